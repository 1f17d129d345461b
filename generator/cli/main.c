/* wpgen's command line: list, plan, emit, sim, compare. Parses flags, loads the topology and the
 * model, runs the strategy, verifies the plan and reports it (text or JSON), writes it out, or
 * simulates it (sim, compare and `-s auto`: simulate.c). Shared pieces: cli.h.
 * Exit status: 0 done; 1 the plan was rejected or does not fit; 2 bad input. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <jansson.h>
#include "input/topology.h"
#include "common/modelcfg.h"
#include "ir/plan.h"
#include "lua/bridge.h"
#include "emit/emit.h"
#include "emit/backends.h"
#include "sim/sim.h"
#include "cli/cli.h"



static void usage(FILE *f) {
    fprintf(f,
        "usage: wpgen list\n"
        "       wpgen plan -t TOPO.json -m MODEL [-s STRATEGY] [--seq S] [--micro-batch-size G]\n"
        "                  [--micro-batches N] [--replicas R] [--chunks C] [--recompute] [--json]\n"
        "                  [--rounds K] [--grouping auto|node|island|published]   (tawpipe)\n"
        "       wpgen emit -t TOPO.json -m MODEL [-s STRATEGY] [...] -o DIR [--backend cpu] [--comm mpi]\n"
        "       wpgen sim -t TOPO.json -m MODEL [-s STRATEGY|auto] [...] [--trace FILE.json] [--svg FILE.svg] [--json]\n"
        "       wpgen compare -t TOPO.json -m MODEL [--strategies a,b,...] [...] [--json]\n"
        "MODEL is a preset (wpgen list) or a Hugging Face config.json. --micro-batches is per rank.\n"
        "-s auto (plan, emit, sim) tries every strategy with its parameters in the simulator and takes the\n"
        "fastest plan that fits.\n"
        "Exit status: 0 done, 1 plan rejected or does not fit, 2 bad input.\n");
}

int bad(const char *fmt, const char *a, const char *b) {
    fprintf(stderr, "wpgen: ");
    fprintf(stderr, fmt, a, b);
    fprintf(stderr, "\n");
    return EXIT_BAD_INPUT;
}

static int parse_int(const char *flag, const char *v, int min, int *out) {
    char *end;
    long x = v ? strtol(v, &end, 10) : 0;
    if (!v || !*v || *end || x < min || x > 1 << 24) {
        fprintf(stderr, "wpgen: %s: expected an integer >= %d, got \"%s\"\n", flag, min, v ? v : "");
        return -1;
    }
    *out = (int)x;
    return 0;
}

static int parse_args(int argc, char **argv, Args *a) {
    memset(a, 0, sizeof *a);
    a->strategy = "weipipe-interleave";
    a->backend = backend_default(BACKEND_COMPUTE);
    a->comm = backend_default(BACKEND_COMM);
    a->micro_batches = 4;
    a->replicas = 1;
    a->cmd = argv[1];
    for (int i = 2; i < argc; i++) {
        const char *f = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        int takes = 1;
        if (!strcmp(f, "-t") || !strcmp(f, "--topology")) a->topo = v;
        else if (!strcmp(f, "-m") || !strcmp(f, "--model")) a->model = v;
        else if (!strcmp(f, "-s") || !strcmp(f, "--strategy")) a->strategy = v;
        else if (!strcmp(f, "-o") || !strcmp(f, "--out")) a->out = v;
        else if (!strcmp(f, "--backend")) a->backend = v;
        else if (!strcmp(f, "--comm")) a->comm = v;
        else if (!strcmp(f, "--seq")) { if (parse_int(f, v, 1, &a->seq)) return -1; }
        else if (!strcmp(f, "--micro-batch-size")) { if (parse_int(f, v, 1, &a->mbs)) return -1; }
        else if (!strcmp(f, "--micro-batches")) { if (parse_int(f, v, 1, &a->micro_batches)) return -1; a->set_micro_batches = 1; }
        else if (!strcmp(f, "--replicas")) { if (parse_int(f, v, 1, &a->replicas)) return -1; a->set_replicas = 1; }
        else if (!strcmp(f, "--chunks")) { if (parse_int(f, v, 1, &a->chunks)) return -1; a->set_chunks = 1; }
        else if (!strcmp(f, "--trace") && !strcmp(a->cmd, "sim")) a->trace = v;
        else if (!strcmp(f, "--svg") && !strcmp(a->cmd, "sim")) a->svg = v;
        else if (!strcmp(f, "--strategies") && !strcmp(a->cmd, "compare")) a->strategies = v;
        else if (!strcmp(f, "--recompute")) { a->recompute = 1; takes = 0; }
        else if (!strcmp(f, "--rounds")) { if (parse_int(f, v, 1, &a->rounds)) return -1; }
        else if (!strcmp(f, "--grouping")) {
            if (!v || (strcmp(v, "auto") && strcmp(v, "node") && strcmp(v, "island") && strcmp(v, "published"))) {
                fprintf(stderr, "wpgen: --grouping: expected auto, node, island or published, got \"%s\"\n", v ? v : "");
                return -1;
            }
            a->grouping = v;
        }
        else if (!strcmp(f, "--json")) { a->json = 1; takes = 0; }
        else if (!strcmp(f, "-h") || !strcmp(f, "--help")) { usage(stdout); exit(0); }
        else { fprintf(stderr, "wpgen: unknown flag \"%s\"\n", f); return -1; }
        if (takes) {
            if (!v) { fprintf(stderr, "wpgen: %s needs a value\n", f); return -1; }
            i++;
        }
    }
    if (!a->topo) { fprintf(stderr, "wpgen %s: -t TOPO.json is required\n", a->cmd); return -1; }
    if (!a->model) { fprintf(stderr, "wpgen %s: -m MODEL is required\n", a->cmd); return -1; }
    /* the table says which backends exist and which are built: one not built yet is refused
     * rather than emitted half-way */
    char berr[256];
    if (!backend_select(BACKEND_COMPUTE, a->backend, berr, sizeof berr) || !backend_select(BACKEND_COMM, a->comm, berr, sizeof berr)) {
        fprintf(stderr, "wpgen: %s\n", berr);
        return -1;
    }
    return 0;
}

/* The strategy's options, as the flags give them. */
StrategyOpts opts_of(const Args *a) {
    StrategyOpts o = { .micro_batches = a->micro_batches, .replicas = a->replicas, .chunks = a->chunks,
                       .recompute = a->recompute, .rounds = a->rounds, .grouping = a->grouping ? a->grouping : "auto" };
    return o;
}

static int cmd_list(void) {
    int n;
    const ModelPreset *m = model_presets(&n);
    printf("Models (-m NAME, or a Hugging Face config.json):\n");
    for (int i = 0; i < n; i++)
        printf("  %-16s H=%-5d L=%-3d heads=%d/%d ffn=%d vocab=%d  %s\n", m[i].name, m[i].cfg.hidden, m[i].cfg.layers,
               m[i].cfg.heads, m[i].cfg.kv_heads, m[i].cfg.ffn, m[i].cfg.vocab, m[i].about);
    char dir[4200];
    snprintf(dir, sizeof dir, "%s/schedules", wpgen_home());
    printf("Strategies (-s NAME, or a path to a .lua file), in %s:\n", "schedules/");
    struct dirent **ents;
    int k = scandir(dir, &ents, NULL, alphasort);
    for (int i = 0; i < k; i++) {
        size_t l = strlen(ents[i]->d_name);
        if (l > 4 && !strcmp(ents[i]->d_name + l - 4, ".lua")) {
            char path[4500], about[256];
            snprintf(path, sizeof path, "%s/%s", dir, ents[i]->d_name);
            strategy_about(path, about, sizeof about);
            printf("  %-20.*s %s\n", (int)(l - 4), ents[i]->d_name, about);
        }
        free(ents[i]);
    }
    if (k >= 0) free(ents);
    printf("  %-20s %s\n", "auto", "searches the others and their parameters with the simulator; the fastest plan that fits");
    snprintf(dir, sizeof dir, "%s/topologies", wpgen_home());
    printf("Topologies (-t FILE), in topologies/:\n");
    k = scandir(dir, &ents, NULL, alphasort);
    for (int i = 0; i < k; i++) {
        if (strstr(ents[i]->d_name, ".json")) printf("  %s\n", ents[i]->d_name);
        free(ents[i]);
    }
    if (k >= 0) free(ents);
    return 0;
}

void human_bytes(double b, char *out, size_t len) {
    const char *u[] = { "B", "KiB", "MiB", "GiB", "TiB" };
    int i = 0;
    while (b >= 1024 && i < 4) b /= 1024, i++;
    snprintf(out, len, i ? "%.2f %s" : "%.0f %s", b, u[i]);
}

void print_summary(const Plan *p, const char *model_name, double intra, double inter, int fits) {
    const Topology *t = p->topo;
    char a[32], b[32], c[32], d[32];
    int nops = 0;
    for (int r = 0; r < p->nranks; r++) nops += p->ranks[r].nops;
    printf("strategy    %s\n", p->strategy);
    printf("cluster     %s: %d ranks on %d nodes, %d replica%s of %d\n", t->name, p->nranks, t->nnodes, p->replicas,
           p->replicas > 1 ? "s" : "", p->nranks / p->replicas);
    printf("model       %s: H=%d, %d layers, %d heads (%d kv), seq %d, %d sequence%s per micro-batch\n", model_name,
           p->model.hidden, p->model.layers, p->model.heads, p->model.kv_heads, p->model.seq, p->model.mbs,
           p->model.mbs > 1 ? "s" : "");
    printf("batch       %d micro-batches per step (%d per rank), %ld tokens\n", p->total_mbs, p->micro_batches,
           (long)p->total_mbs * p->model.mbs * p->model.seq);
    printf("chunks      %d:", p->nchunks);
    for (int c = 0; c < p->nchunks; c++) {
        printf(" [%d layer%s, owner%s", p->chunks[c].nlayers, p->chunks[c].nlayers > 1 ? "s" : "", p->chunks[c].nowners > 1 ? "s" : "");
        for (int i = 0; i < p->chunks[c].nowners && i < 4; i++) printf(" %d", p->chunks[c].owners[i]);
        if (p->chunks[c].nowners > 4) printf(" ...");
        printf("]");
        if (c >= 7 && c < p->nchunks - 1) { printf(" ..."); break; }
    }
    printf("\n");
    human_bytes(intra, a, sizeof a);
    human_bytes(inter, b, sizeof b);
    human_bytes((double)p->peak_mem, c, sizeof c);
    human_bytes(t->types[t->nodes[p->ranks[p->peak_rank].node].type].mem_bytes, d, sizeof d);
    printf("turns       %d, %d operations\n", p->nturns, nops);
    printf("traffic     %s inside nodes, %s between nodes per step\n", a, b);
    printf("memory      peak %s on rank %d of %s: %s\n", c, p->peak_rank, d, fits ? "fits" : "DOES NOT FIT");
    if (p->notes) printf("notes       %s", p->notes);
}

json_t *plan_json(const Plan *p, double intra, double inter, int fits) {
    json_t *o = json_object();
    json_object_set_new(o, "strategy", json_string(p->strategy));
    json_object_set_new(o, "ranks", json_integer(p->nranks));
    json_object_set_new(o, "nodes", json_integer(p->topo->nnodes));
    json_object_set_new(o, "replicas", json_integer(p->replicas));
    json_object_set_new(o, "chunks", json_integer(p->nchunks));
    json_object_set_new(o, "micro_batches_per_rank", json_integer(p->micro_batches));
    json_object_set_new(o, "micro_batches", json_integer(p->total_mbs));
    json_object_set_new(o, "turns", json_integer(p->nturns));
    json_object_set_new(o, "bytes_intra_node", json_real(intra));
    json_object_set_new(o, "bytes_inter_node", json_real(inter));
    json_object_set_new(o, "peak_mem_bytes", json_integer((json_int_t)p->peak_mem));
    json_object_set_new(o, "peak_mem_rank", json_integer(p->peak_rank));
    json_object_set_new(o, "fits", json_boolean(fits));
    return o;
}

int plan_fits(const Plan *p) {
    for (int r = 0; r < p->nranks; r++) {
        const Topology *t = p->topo;
        if ((double)p->ranks[r].peak_mem > t->types[t->nodes[p->ranks[r].node].type].mem_bytes) return 0;
    }
    return 1;
}

/* ---- sim, compare, auto ---- */

/* Runs a strategy and verifies its plan. 0; EXIT_BAD_INPUT (a strategy's error) or EXIT_REJECTED
 * (the verifier's) with the message in err. */
int make_plan(const char *strategy, const Topology *topo, const WpConfig *model, const char *name,
                     const StrategyOpts *o, Plan **out, char *err, size_t errlen) {
    *out = NULL;
    if (strategy_run(strategy, topo, model, name, o, out, err, errlen)) { plan_free(*out); *out = NULL; return EXIT_BAD_INPUT; }
    char e2[4096];
    if (plan_verify(*out, e2, sizeof e2)) {
        snprintf(err, errlen, "plan rejected: %.4000s", e2);
        plan_free(*out); *out = NULL;
        return EXIT_REJECTED;
    }
    return 0;
}

int load_inputs(const Args *a, Topology *topo, WpConfig *model, char *name, size_t namelen) {
    char err[4096];
    if (topology_load(a->topo, topo, err, sizeof err)) return bad("%s%s", err, "");
    if (model_load(a->model, model, name, namelen, err, sizeof err)) { topology_free(topo); return bad("%s%s", err, ""); }
    if (a->seq) model->seq = a->seq;
    if (a->mbs) model->mbs = a->mbs;
    if (model_check(model, err, sizeof err)) { topology_free(topo); return bad("%s%s", err, ""); }
    return 0;
}

/* The shipped strategies (the .lua files in schedules/), in name order; auto excluded. */

static int cmd_plan_or_emit(const Args *a, int emit) {
    char err[4096], name[256];
    Topology topo;
    WpConfig model;
    if (topology_load(a->topo, &topo, err, sizeof err)) return bad("%s%s", err, "");
    if (model_load(a->model, &model, name, sizeof name, err, sizeof err)) {
        topology_free(&topo);
        return bad("%s%s", err, "");
    }
    if (a->seq) model.seq = a->seq;
    if (a->mbs) model.mbs = a->mbs;
    int rc = 0;
    Plan *p = NULL;
    StrategyOpts o = opts_of(a);
    Cand best;
    int is_auto = !strcmp(a->strategy, "auto");
    if (model_check(&model, err, sizeof err)) rc = bad("%s%s", err, "");
    else if (is_auto && (rc = auto_search(a, &topo, &model, name, &best, 0))) {}
    else if (strategy_run(is_auto ? best.strategy : a->strategy, &topo, &model, name, is_auto ? &best.o : &o, &p, err, sizeof err))
        rc = bad("%s%s", err, "");
    else if (plan_verify(p, err, sizeof err)) {
        fprintf(stderr, "wpgen: plan rejected: %s\n", err);
        rc = EXIT_REJECTED;
    }
    if (rc == 0 && is_auto)
        fprintf(stderr, "wpgen: auto picked %s, %d replica%s, %s chunks%s: %s\n", best.strategy, best.o.replicas,
                best.o.replicas > 1 ? "s" : "", best.o.chunks ? "twice the default" : "default", best.o.recompute ? ", recomputation" : "", best.why);
    if (rc == 0) {
        double intra, inter;
        plan_traffic(p, &intra, &inter);
        int fits = plan_fits(p);
        if (emit) {
            if (!a->out) rc = bad("emit: -o DIR is required%s%s", "", "");
            else {
                EmitInfo info = { .model_name = name, .topo_name = topo.name, .backend = a->backend, .comm = a->comm,
                                  .bytes_intra = intra, .bytes_inter = inter };
                /* the prediction goes into every file's summary; a plan the simulator cannot run
                 * is still emitted, without one */
                SimOptions so = { 0 };
                SimResult sr;
                if (sim_run(p, &so, &sr, err, sizeof err) == 0) {
                    info.step_time_s = sr.step_time;
                    info.bubble_ratio = sr.bubble_ratio;
                    sim_result_free(&sr);
                }
                if (emit_plan(p, &info, a->out, err, sizeof err)) rc = bad("emit: %s%s", err, "");
                else if (!a->json) printf("wpgen: wrote %s (%d ranks, plan %016llx)\n", a->out, p->nranks, (unsigned long long)plan_hash(p));
            }
        } else if (a->json) {
            json_t *j = plan_json(p, intra, inter, fits);
            char *s = json_dumps(j, JSON_INDENT(2) | JSON_REAL_PRECISION(17));
            printf("%s\n", s);
            free(s);
            json_decref(j);
        } else print_summary(p, name, intra, inter, fits);
        if (rc == 0 && !fits && !emit) {
            fprintf(stderr, "wpgen: the plan does not fit: rank %d needs %zu bytes\n", p->peak_rank, p->peak_mem);
            rc = EXIT_REJECTED;
        }
    }
    plan_free(p);
    topology_free(&topo);
    return rc;
}

int main(int argc, char **argv) {
    if (argc < 2) { usage(stderr); return EXIT_BAD_INPUT; }
    const char *cmd = argv[1];
    if (!strcmp(cmd, "-h") || !strcmp(cmd, "--help") || !strcmp(cmd, "help")) { usage(stdout); return 0; }
    if (!strcmp(cmd, "--version")) { printf("wpgen %s\n", WPGEN_VERSION); return 0; }
    if (!strcmp(cmd, "list")) return cmd_list();
    if (strcmp(cmd, "plan") && strcmp(cmd, "emit") && strcmp(cmd, "sim") && strcmp(cmd, "compare")) {
        fprintf(stderr, "wpgen: unknown command \"%s\"\n", cmd);
        usage(stderr);
        return EXIT_BAD_INPUT;
    }
    Args a;
    if (parse_args(argc, argv, &a)) return EXIT_BAD_INPUT;
    if (!strcmp(cmd, "sim")) return cmd_sim(&a);
    if (!strcmp(cmd, "compare")) return cmd_compare(&a);
    return cmd_plan_or_emit(&a, !strcmp(cmd, "emit"));
}
