/* wpgen's command line: list, plan, emit, sim, compare. Parses flags, loads the topology and the
 * model, runs the strategy, verifies the plan and reports it (text or JSON), writes it out, or
 * simulates it (sim, compare; `-s auto` searches strategies and parameters with the simulator).
 * Exit status: 0 done; 1 the plan was rejected or does not fit; 2 bad input. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <errno.h>
#include <jansson.h>
#include "topology.h"
#include "modelcfg.h"
#include "plan.h"
#include "strategy.h"
#include "emit.h"
#include "sim.h"

enum { EXIT_REJECTED = 1, EXIT_BAD_INPUT = 2 };

typedef struct Args {
    const char *cmd, *topo, *model, *strategy, *out, *backend;
    const char *trace, *svg, *strategies;   /* sim; compare */
    int seq, mbs, micro_batches, replicas, chunks, recompute, json;
    int rounds;             /* tawpipe: micro-batch rounds, 0 = the solver's */
    const char *grouping;   /* tawpipe: auto, node, island or published */
    int set_micro_batches, set_replicas, set_chunks;   /* given on the command line (auto keeps them) */
} Args;

static void usage(FILE *f) {
    fprintf(f,
        "usage: wpgen list\n"
        "       wpgen plan -t TOPO.json -m MODEL [-s STRATEGY] [--seq S] [--micro-batch-size G]\n"
        "                  [--micro-batches N] [--replicas R] [--chunks C] [--recompute] [--json]\n"
        "                  [--rounds K] [--grouping auto|node|island|published]   (tawpipe)\n"
        "       wpgen emit -t TOPO.json -m MODEL [-s STRATEGY] [...] -o DIR [--backend cpu|cuda]\n"
        "       wpgen sim -t TOPO.json -m MODEL [-s STRATEGY|auto] [...] [--trace FILE.json] [--svg FILE.svg] [--json]\n"
        "       wpgen compare -t TOPO.json -m MODEL [--strategies a,b,...] [...] [--json]\n"
        "MODEL is a preset (wpgen list) or a Hugging Face config.json. --micro-batches is per rank.\n"
        "-s auto (plan, emit, sim) tries every strategy with its parameters in the simulator and takes the\n"
        "fastest plan that fits.\n"
        "Exit status: 0 done, 1 plan rejected or does not fit, 2 bad input.\n");
}

static int bad(const char *fmt, const char *a, const char *b) {
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
    a->backend = "cpu";
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
    if (strcmp(a->backend, "cpu") && strcmp(a->backend, "cuda")) {
        fprintf(stderr, "wpgen: --backend: expected cpu or cuda, got \"%s\"\n", a->backend);
        return -1;
    }
    /* Refused rather than emitted half-way: no runtime/cuda exists for the code to link. */
    if (!strcmp(a->backend, "cuda")) {
        fprintf(stderr, "wpgen: --backend cuda: the CUDA runtime is not part of this version yet (use --backend cpu)\n");
        return -1;
    }
    return 0;
}

/* The strategy's options, as the flags give them. */
static StrategyOpts opts_of(const Args *a) {
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

static void human_bytes(double b, char *out, size_t len) {
    const char *u[] = { "B", "KiB", "MiB", "GiB", "TiB" };
    int i = 0;
    while (b >= 1024 && i < 4) b /= 1024, i++;
    snprintf(out, len, i ? "%.2f %s" : "%.0f %s", b, u[i]);
}

static void print_summary(const Plan *p, const char *model_name, double intra, double inter, int fits) {
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

static json_t *plan_json(const Plan *p, double intra, double inter, int fits) {
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

static int plan_fits(const Plan *p) {
    for (int r = 0; r < p->nranks; r++) {
        const Topology *t = p->topo;
        if ((double)p->ranks[r].peak_mem > t->types[t->nodes[p->ranks[r].node].type].mem_bytes) return 0;
    }
    return 1;
}

/* ---- sim, compare, auto ---- */

/* Runs a strategy and verifies its plan. 0; EXIT_BAD_INPUT (a strategy's error) or EXIT_REJECTED
 * (the verifier's) with the message in err. */
static int make_plan(const char *strategy, const Topology *topo, const WpConfig *model, const char *name,
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

static int load_inputs(const Args *a, Topology *topo, WpConfig *model, char *name, size_t namelen) {
    char err[4096];
    if (topology_load(a->topo, topo, err, sizeof err)) return bad("%s%s", err, "");
    if (model_load(a->model, model, name, namelen, err, sizeof err)) { topology_free(topo); return bad("%s%s", err, ""); }
    if (a->seq) model->seq = a->seq;
    if (a->mbs) model->mbs = a->mbs;
    if (model_check(model, err, sizeof err)) { topology_free(topo); return bad("%s%s", err, ""); }
    return 0;
}

/* The shipped strategies (the .lua files in schedules/), in name order; auto excluded. */
static int shipped_strategies(char names[][64], int max) {
    char dir[4200];
    snprintf(dir, sizeof dir, "%s/schedules", wpgen_home());
    struct dirent **ents;
    int k = scandir(dir, &ents, NULL, alphasort), n = 0;
    for (int i = 0; i < k; i++) {
        size_t l = strlen(ents[i]->d_name);
        if (l > 4 && l < 60 && !strcmp(ents[i]->d_name + l - 4, ".lua") && strncmp(ents[i]->d_name, "auto.", 5) && n < max)
            snprintf(names[n++], 64, "%.*s", (int)(l - 4), ents[i]->d_name);
        free(ents[i]);
    }
    if (k >= 0) free(ents);
    return n;
}

static void sim_json_add(json_t *o, const Plan *p, const SimResult *s) {
    json_object_set_new(o, "step_time_s", json_real(s->step_time));
    json_object_set_new(o, "tokens_per_s_per_device", json_real(s->tokens_per_s_per_device));
    json_object_set_new(o, "bubble_ratio", json_real(s->bubble_ratio));
    json_object_set_new(o, "tokens_per_step", json_integer((json_int_t)p->total_mbs * p->model.mbs * p->model.seq));
    json_object_set_new(o, "compute_s_per_rank", json_real(s->compute_s / p->nranks));
    json_object_set_new(o, "comm_wait_s_per_rank", json_real(s->comm_exposed_s / p->nranks));
    json_object_set_new(o, "recompute", json_boolean(p->recompute));
    json_t *links = json_object();
    for (int l = 0; l < LINK__COUNT; l++)
        if (s->link_bytes[l] > 0) json_object_set_new(links, link_type_name((LinkType)l), json_real(s->link_bytes[l]));
    json_object_set_new(o, "bytes_by_link", links);
    json_t *mem = json_array();
    for (int r = 0; r < p->nranks; r++) json_array_append_new(mem, json_integer((json_int_t)p->ranks[r].peak_mem));
    json_object_set_new(o, "peak_mem_bytes_per_rank", mem);
}

static void print_sim(const Plan *p, const SimResult *s) {
    char b[32];
    printf("step        %.4g s predicted: %.5g tokens/s per device, bubble %.1f%%\n", s->step_time,
           s->tokens_per_s_per_device, 100 * s->bubble_ratio);
    printf("time        per rank (mean): %.4g s forward/backward, %.4g s waiting for transfers, %.4g s the rest\n",
           s->compute_s / p->nranks, s->comm_exposed_s / p->nranks,
           s->step_time - (s->compute_s + s->comm_exposed_s) / p->nranks);
    printf("links      ");
    int any = 0;
    for (int l = 0; l < LINK__COUNT; l++)
        if (s->link_bytes[l] > 0) { human_bytes(s->link_bytes[l], b, sizeof b); printf("%s %s %s", any ? "," : "", link_type_name((LinkType)l), b); any = 1; }
    printf("%s per step\n", any ? "" : " none");
    printf("mem/rank    GiB:");
    for (int r = 0; r < p->nranks; r++) printf("%s%.1f", r && r % 16 == 0 ? "\n               " : " ", (double)p->ranks[r].peak_mem / (1 << 30));
    printf("\n");
}

typedef struct Cand {
    char strategy[64];
    StrategyOpts o;
    int rc, fits;
    double step, tps, bubble;
    char why[320];
} Cand;

static int cand_better(const Cand *x, const Cand *y) {   /* x strictly better than y */
    if (x->rc || !x->fits) return 0;
    if (y->rc || !y->fits) return 1;
    return x->step < y->step * (1 - 1e-9);
}

/* -s auto: every shipped strategy with every replica count that divides the ranks, its default
 * chunks and twice as many, first without recomputation and with it only where that does not
 * fit. Micro-batches per rank stay as given, so the global batch is the same for all. Options
 * given on the command line are kept. Picks the fastest that fits. Returns 0 and fills *best, or
 * EXIT_REJECTED when nothing fits. */
static int auto_search(const Args *a, const Topology *topo, const WpConfig *model, const char *name, Cand *best, int verbose) {
    char names[32][64];
    int ns = shipped_strategies(names, 32), ncand = 0, nfit = 0;
    Cand b = { .rc = -1 }, runner = { .rc = -1 };   /* the best, and the best of another strategy */
    int P = topo->ndevices;
    for (int si = 0; si < ns; si++)
        for (int R = 1; R <= P; R++) {
            if (P % R || (a->set_replicas && R != a->replicas)) continue;
            for (int cm = 0; cm < 2; cm++) {
                if (a->set_chunks && cm) continue;
                int chunks = a->set_chunks ? a->chunks : cm ? 2 * (P / R) : 0;
                if (chunks > model->layers) continue;
                for (int rec = a->recompute; rec < 2; rec++) {
                    Cand c = { .o = opts_of(a) };
                    c.o.replicas = R;
                    c.o.chunks = chunks;
                    c.o.recompute = rec;
                    snprintf(c.strategy, sizeof c.strategy, "%.63s", names[si]);
                    Plan *p = NULL;
                    char err[4096];
                    c.rc = make_plan(c.strategy, topo, model, name, &c.o, &p, err, sizeof err);
                    if (c.rc == 0) {
                        c.fits = plan_fits(p);
                        SimResult s;
                        if (sim_run(p, NULL, &s, err, sizeof err) == 0) {
                            c.step = s.step_time; c.tps = s.tokens_per_s_per_device; c.bubble = s.bubble_ratio;
                            sim_result_free(&s);
                        } else c.rc = EXIT_REJECTED;
                    }
                    plan_free(p);
                    if (c.rc == 0) {
                        ncand++;
                        nfit += c.fits;
                        if (verbose)
                            fprintf(stderr, "auto: %-20s replicas %-3d chunks %-4d%s  %.4g s%s\n", c.strategy, R, chunks,
                                    rec ? " recompute" : "", c.step, c.fits ? "" : " (does not fit)");
                        if (b.rc != 0 || cand_better(&c, &b)) {
                            if (b.rc == 0 && b.fits && strcmp(b.strategy, c.strategy)) runner = b;
                            b = c;
                        } else if (c.fits && strcmp(c.strategy, b.strategy) && (runner.rc != 0 || cand_better(&c, &runner))) runner = c;
                    }
                    if (c.rc || c.fits) break;   /* recompute only when it did not fit */
                }
            }
        }
    if (b.rc != 0 || !b.fits) {
        fprintf(stderr, "wpgen: auto: no plan fits the device (%d candidates tried)\n", ncand);
        return EXIT_REJECTED;
    }
    if (runner.rc == 0 && runner.fits && strcmp(runner.strategy, b.strategy))
        snprintf(b.why, sizeof b.why, "%.4g s/step, the fastest of %d plans that fit (%d tried); the best other strategy, %s "
                 "(%d replica%s%s), takes %.4g s (+%.0f%%)", b.step, nfit, ncand, runner.strategy, runner.o.replicas,
                 runner.o.replicas > 1 ? "s" : "", runner.o.recompute ? ", recomputation" : "", runner.step, 100 * (runner.step / b.step - 1));
    else snprintf(b.why, sizeof b.why, "%.4g s/step, the fastest of %d plans that fit (%d tried)", b.step, nfit, ncand);
    *best = b;
    return 0;
}

static int cmd_sim(const Args *a) {
    char err[4096], name[256];
    Topology topo;
    WpConfig model;
    int rc = load_inputs(a, &topo, &model, name, sizeof name);
    if (rc) return rc;
    const char *strategy = a->strategy;
    StrategyOpts o = opts_of(a);
    Cand best;
    int is_auto = !strcmp(a->strategy, "auto");
    if (is_auto) {
        if ((rc = auto_search(a, &topo, &model, name, &best, 0))) { topology_free(&topo); return rc; }
        strategy = best.strategy;
        o = best.o;
    }
    Plan *p = NULL;
    rc = make_plan(strategy, &topo, &model, name, &o, &p, err, sizeof err);
    if (rc) {
        fprintf(stderr, "wpgen: %s\n", err);
        topology_free(&topo);
        return rc;
    }
    SimOptions so = { .record = a->trace || a->svg };
    SimResult s;
    if (sim_run(p, &so, &s, err, sizeof err)) {
        fprintf(stderr, "wpgen: sim: %s\n", err);
        plan_free(p); topology_free(&topo);
        return EXIT_REJECTED;
    }
    int fits = plan_fits(p);
    if (a->json) {
        json_t *j = plan_json(p, s.bytes_intra, s.bytes_inter, fits);
        sim_json_add(j, p, &s);
        if (is_auto) {
            json_t *au = json_object();
            json_object_set_new(au, "replicas", json_integer(o.replicas));
            json_object_set_new(au, "chunks_option", json_integer(o.chunks));
            json_object_set_new(au, "why", json_string(best.why));
            json_object_set_new(j, "auto", au);
        }
        char *txt = json_dumps(j, JSON_INDENT(2) | JSON_REAL_PRECISION(17));
        printf("%s\n", txt);
        free(txt);
        json_decref(j);
    } else {
        if (is_auto)
            printf("auto        picked %s, %d replica%s, %s chunks%s: %s\n", strategy, o.replicas, o.replicas > 1 ? "s" : "",
                   o.chunks ? "twice the default" : "default", o.recompute ? ", recomputation" : "", best.why);
        print_summary(p, name, s.bytes_intra, s.bytes_inter, fits);
        if (p->notes && p->notes[0] && p->notes[strlen(p->notes) - 1] != '\n') printf("\n");
        print_sim(p, &s);
    }
    if (a->trace && sim_write_trace(p, &s, a->trace)) rc = bad("sim: cannot write %s: %s", a->trace, strerror(errno));
    if (!rc && a->svg) {
        char title[512];
        snprintf(title, sizeof title, "%s on %s, %s seq %d: %.4g s/step, bubble %.1f%%", p->strategy, topo.name, name, model.seq,
                 s.step_time, 100 * s.bubble_ratio);
        if (sim_write_svg(p, &s, title, a->svg)) rc = bad("sim: cannot write %s: %s", a->svg, strerror(errno));
    }
    if (!rc && !fits) {
        fprintf(stderr, "wpgen: the plan does not fit: rank %d needs %zu bytes\n", p->peak_rank, p->peak_mem);
        rc = EXIT_REJECTED;
    }
    sim_result_free(&s);
    plan_free(p);
    topology_free(&topo);
    return rc;
}

static int cmd_compare(const Args *a) {
    char names[64][64];
    int ns = 0;
    if (a->strategies) {
        const char *s = a->strategies;
        while (*s && ns < 64) {
            size_t l = strcspn(s, ",");
            if (l == 0 || l >= 64) { fprintf(stderr, "wpgen: --strategies: expected names separated by commas, got \"%s\"\n", a->strategies); return EXIT_BAD_INPUT; }
            memcpy(names[ns], s, l);
            names[ns++][l] = 0;
            s += l + (s[l] == ',');
        }
    } else ns = shipped_strategies(names, 64);
    for (int i = 0; i < ns; i++) {
        char path[4200];
        if (strcmp(names[i], "auto") && strategy_resolve(names[i], path, sizeof path)) {
            fprintf(stderr, "wpgen: compare: no strategy \"%s\" (no such file %s)\n", names[i], path);
            return EXIT_BAD_INPUT;
        }
    }
    char name[256];
    Topology topo;
    WpConfig model;
    int rc = load_inputs(a, &topo, &model, name, sizeof name);
    if (rc) return rc;
    StrategyOpts o = opts_of(a);
    json_t *arr = json_array();
    Cand *c = calloc((size_t)ns, sizeof *c);
    json_t **rows = calloc((size_t)ns, sizeof *rows);
    char (*errs)[512] = calloc((size_t)ns, sizeof *errs);
    Plan **plans = calloc((size_t)ns, sizeof *plans);
    SimResult *res = calloc((size_t)ns, sizeof *res);
    int best = -1, nfit = 0;
    for (int i = 0; i < ns; i++) {
        char err[4096];
        snprintf(c[i].strategy, sizeof c[i].strategy, "%s", names[i]);
        c[i].o = o;
        if (!strcmp(names[i], "auto")) {
            Cand b;
            if (auto_search(a, &topo, &model, name, &b, 0)) { c[i].rc = EXIT_REJECTED; snprintf(errs[i], sizeof errs[i], "auto: nothing fits"); continue; }
            c[i].o = b.o;
            snprintf(c[i].strategy, sizeof c[i].strategy, "%s", b.strategy);
        }
        c[i].rc = make_plan(c[i].strategy, &topo, &model, name, &c[i].o, &plans[i], err, sizeof err);
        if (c[i].rc) {
            char *nl = strchr(err, '\n');
            if (nl) *nl = 0;
            snprintf(errs[i], sizeof errs[i], "%.500s", err);
            if (!strcmp(names[i], "auto")) snprintf(c[i].strategy, sizeof c[i].strategy, "auto");
            continue;
        }
        if (sim_run(plans[i], NULL, &res[i], err, sizeof err)) { c[i].rc = EXIT_REJECTED; snprintf(errs[i], sizeof errs[i], "sim: %.500s", err); continue; }
        c[i].fits = plan_fits(plans[i]);
        c[i].step = res[i].step_time;
        nfit += c[i].fits;
        if (c[i].fits && (best < 0 || cand_better(&c[i], &c[best]))) best = i;
    }
    if (!a->json) {
        printf("cluster %s (%d devices on %d node%s); model %s, seq %d, %d sequence%s per micro-batch, %d micro-batches per rank\n",
               topo.name, topo.ndevices, topo.nnodes, topo.nnodes > 1 ? "s" : "", name, model.seq, model.mbs, model.mbs > 1 ? "s" : "",
               a->micro_batches);
        printf("%-22s %10s %13s %7s %11s %11s %10s\n", "strategy", "step s", "tokens/s/dev", "bubble", "intra GiB", "inter GiB", "peak GiB");
    }
    for (int i = 0; i < ns; i++) {
        const char *label = names[i];
        char shown[160];
        if (!strcmp(names[i], "auto") && !c[i].rc)
            snprintf(shown, sizeof shown, "auto=%s/r%d%s%s", c[i].strategy, c[i].o.replicas, c[i].o.chunks ? "/2c" : "", c[i].o.recompute ? "/rc" : "");
        else snprintf(shown, sizeof shown, "%s", label);
        if (c[i].rc) {
            if (a->json) {
                json_t *j = json_object();
                json_object_set_new(j, "strategy", json_string(label));
                json_object_set_new(j, "fits", json_false());
                json_object_set_new(j, "error", json_string(errs[i]));
                json_array_append_new(arr, j);
            } else printf("%-22s %s\n", shown, errs[i]);
            continue;
        }
        const Plan *p = plans[i];
        const SimResult *s = &res[i];
        if (a->json) {
            json_t *j = plan_json(p, s->bytes_intra, s->bytes_inter, c[i].fits);
            sim_json_add(j, p, s);
            json_object_set_new(j, "fastest", json_boolean(i == best));
            if (!strcmp(names[i], "auto")) json_object_set_new(j, "picked_by", json_string("auto"));
            json_array_append_new(arr, j);
        } else {
            printf("%-22s %10.4g %13.5g %6.1f%% %11.2f %11.2f %10.2f  %s\n", shown, s->step_time, s->tokens_per_s_per_device,
                   100 * s->bubble_ratio, s->bytes_intra / (1 << 30), s->bytes_inter / (1 << 30), (double)p->peak_mem / (1 << 30),
                   !c[i].fits ? "OOM" : i == best ? "<- fastest" : "");
        }
    }
    if (a->json) {
        char *txt = json_dumps(arr, JSON_INDENT(2) | JSON_REAL_PRECISION(17));
        printf("%s\n", txt);
        free(txt);
    }
    json_decref(arr);
    for (int i = 0; i < ns; i++) { plan_free(plans[i]); if (!c[i].rc) sim_result_free(&res[i]); }
    free(c); free(rows); free(errs); free(plans); free(res);
    topology_free(&topo);
    return nfit ? 0 : EXIT_REJECTED;
}

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
                EmitInfo info = { .model_name = name, .topo_name = topo.name, .backend = a->backend,
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
