/* wpgen calibrate: fits a calibration file (calib/calib.h) to measured runs of emitted programs.
 *
 *   wpgen calibrate -t TOPO.json --trace RUN/trace.json [--trace ...] [--held-out RUN2/trace.json ...]
 *                   [--links LINKS.json] -o CALIB.json [--force]
 *
 * Each trace is read with the plan.json beside it (or the one --plan names just before it): the
 * plan is built again from the options plan.json records, on the topology of the last -t before
 * the trace, and must have the same hash. Every forward, backward and optimizer span of the
 * steps after the first is a sample: its features (sim/costs.h) against its measured time; the
 * samples of each device type give its rates by least squares (calib/fit.c). A link benchmark's
 * result (scripts/linkbench.sh) gives the links. Then every run is simulated with the new
 * calibration and its predicted step printed beside the measured one (the median of its steps
 * after the first), the fitted runs and the held-out ones (not fitted) apart; traces of one plan
 * on one topology (a run repeated) are one row, measured over their steps pooled. The file is
 * written last; an existing one only with --force. Exit status: 0, or 2 for bad input.
 *
 * Ranks that share cores (a node of the topology with "cores" fewer than its ranks): a span
 * measured there took longer than its work at the rank's own rate, by the share of the cores it
 * got. The ranks' clocks in a trace do not agree, so which spans overlapped is not read from the
 * trace: the simulator, which models the sharing (sim.c), says what share each operation got,
 * and the fit divides it out (span time x share = the time alone). The shares depend on the
 * rates a little (what overlaps what), so the fit is repeated: first with no sharing, then
 * with the shares of a simulation at the rates of the fit before, until the rates settle.
 *
 * Ranks that receive on a CPU: MPI copies a message inside the receiver's first MPI call after
 * it arrived, which is between two layers of the span it is computing (or in its wait). Which
 * span that is, the simulator says again (SimSpan.recv_bytes); those bytes are one more feature
 * of the span (COST_RECV), so the fit finds the core's receiving rate beside its compute rates,
 * in the same rounds as the shares. Without fitted runs that receive, a rank takes in its bytes
 * at half the fitted memory rate (a read and a write). */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <jansson.h>
#include "cli/cli.h"
#include "lua/declare.h"
#include "calib/calib.h"
#include "calib/fit.h"
#include "calib/trace_read.h"
#include "common/jsonfile.h"
#include "common/modelcfg.h"
#include "common/outpaths.h"
#include "emit/emit.h"
#include "ir/op_table.h"
#include "ir/xalloc.h"

typedef struct Run {
    const char *trace, *plan_path, *topo_path;
    char plan_buf[4200];
    int held_out;
    Topology topo;
    WpConfig model;
    char model_name[256];
    Plan *plan;
    TraceRun tr;
    double *share;          /* per span of tr: the share of its rank's cores it computed at (the
                               simulator's, where the node's ranks outnumber its cores); NULL: 1 */
    double *recv;           /* per span of tr: bytes the simulator says arrived during it, which
                               its rank's core took in (CPU ranks that receive); NULL: none */
    double predicted, measured;
} Run;

static void usage(FILE *f) {
    fprintf(f, "usage: wpgen calibrate -t TOPO.json --trace RUN/trace.json [--trace ...] [--held-out RUN/trace.json ...]\n"
               "                       [--plan PLAN.json (for the next trace)] [--links LINKS.json] -o CALIB.json [--force]\n"
               "Fits the simulator's compute rates (and, with --links, its links) to the traces of emitted runs\n"
               "(train --trace), writes them as a calibration file for --calibration, and prints each run's\n"
               "predicted and measured step time. A trace's plan.json is the one beside it unless --plan names\n"
               "another; -t is the topology the runs were emitted for (it applies to the traces after it).\n"
               "Traces of one plan on one topology (a run repeated) are one row: the median of their steps pooled.\n"
               "Exit status: 0 done, 2 bad input.\n");
}

/* The plan of a run, built again from what its plan.json records, checked by its hash. */
static int rebuild(Run *r, char *err, size_t errlen) {
    json_t *pj = wp_json_load(r->plan_path, 0, "not JSON", err, errlen);
    if (!pj) {
        size_t n = strlen(err);
        return snprintf(err + n, errlen - n, " (the plan.json of %s; --plan names another)", r->trace), -1;
    }
    int rc = -1;
    json_t *model = json_object_get(pj, "model");
    const char *strategy = json_string_value(json_object_get(pj, "strategy"));
    const char *hash = json_string_value(json_object_get(pj, "plan_hash"));
    const char *prec = json_string_value(json_object_get(pj, "precision")), *gprec = json_string_value(json_object_get(pj, "grad_precision"));
    json_t *mbr = json_object_get(pj, "micro_batches_per_rank"), *rep = json_object_get(pj, "replicas");
    json_t *chunks = json_object_get(pj, "chunks");
    const char *missing = !json_is_object(model) ? "model" : !strategy ? "strategy" : !hash ? "plan_hash" : !prec ? "precision"
                          : !gprec ? "grad_precision" : !json_is_integer(mbr) ? "micro_batches_per_rank"
                          : !json_is_integer(rep) ? "replicas" : !json_is_array(chunks) ? "chunks" : NULL;
    if (missing) { snprintf(err, errlen, "%s: %s: missing or of the wrong type (not a plan.json of wpgen emit?)", r->plan_path, missing); goto done; }
    /* plan.json's model is a config.json's keys and the run's name and shape, read here */
    json_t *cfg = json_deep_copy(model);
    json_object_del(cfg, "name");
    json_object_del(cfg, "seq_len");
    json_object_del(cfg, "micro_batch_size");
    char *text = json_dumps(cfg, JSON_COMPACT);
    json_decref(cfg);
    char merr[1024];
    int mrc = model_config_parse(r->plan_path, text, strlen(text), &r->model, merr, sizeof merr);
    free(text);
    if (mrc) { snprintf(err, errlen, "%s (model)", merr); goto done; }
    r->model.seq = (int)json_integer_value(json_object_get(model, "seq_len"));
    r->model.mbs = (int)json_integer_value(json_object_get(model, "micro_batch_size"));
    snprintf(r->model_name, sizeof r->model_name, "%s", json_string_value(json_object_get(model, "name")) ? json_string_value(json_object_get(model, "name")) : "model");
    if (model_check(&r->model, merr, sizeof merr)) { snprintf(err, errlen, "%s: model: %s", r->plan_path, merr); goto done; }
    StrategyOpts o = { .micro_batches = (int)json_integer_value(mbr), .replicas = (int)json_integer_value(rep),
                       .recompute = json_is_true(json_object_get(pj, "recompute")) };
    /* the strategy's options its notes record, as its declaration says (from_notes) */
    decl_from_notes(strategy_decl(strategy), json_string_value(json_object_get(pj, "notes")), &o);
    if (wp_dtype_parse(prec, &o.precision) || wp_dtype_parse(gprec, &o.grad_precision)) {
        snprintf(err, errlen, "%s: precision: expected fp32 or bf16", r->plan_path);
        goto done;
    }
    /* the weights' format on the wire: absent from plan.json files written before --weight-wire */
    const char *wire = json_string_value(json_object_get(pj, "weight_wire"));
    WpDtype wd;
    if (wire && wp_dtype_parse(wire, &wd)) { snprintf(err, errlen, "%s: weight_wire: expected fp32 or bf16", r->plan_path); goto done; }
    o.weight_wire = wire;
    /* the chunks option: the strategy's default, or as many as the plan has (less the replicated ones) */
    int replicated = 0;
    for (size_t c = 0; c < json_array_size(chunks); c++) replicated += json_is_true(json_object_get(json_array_get(chunks, c), "replicated"));
    int tries[2] = { 0, (int)json_array_size(chunks) - replicated };
    for (int k = 0; k < 2 && rc; k++) {
        o.chunks = tries[k];
        char perr[4096], got[20];
        Plan *p = NULL;
        if (make_plan(strategy, &r->topo, &r->model, r->model_name, &o, &p, perr, sizeof perr)) {
            if (k == 1) { char *nl = strchr(perr, '\n'); if (nl) *nl = 0; snprintf(err, errlen, "%s: cannot plan it again: %.3000s", r->plan_path, perr); }
            continue;
        }
        snprintf(got, sizeof got, "%016llx", (unsigned long long)plan_hash(p));
        if (!strcmp(got, hash)) { r->plan = p; rc = 0; }
        else {
            plan_free(p);
            if (k == 1) snprintf(err, errlen, "%s: planned again on %s it is another plan (hash %s, the file's %s): another topology, "
                                 "or options plan.json does not record (a strategy's own, such as a count of rounds)", r->plan_path, r->topo_path, got, hash);
        }
    }
done:
    json_decref(pj);
    return rc;
}

/* The device type of a run's rank. */
static const DeviceType *type_of(const Run *r, int rank) {
    return &r->topo.types[r->topo.nodes[r->plan->ranks[rank].node].type];
}

/* The plan's operation a forward or backward span timed, and its name's letters. */
static OpKind span_op(const TraceSpan *s) {
    return s->kind == TR_FWD ? OP_FWD : s->kind == TR_BWD_B ? OP_BWD_B : s->kind == TR_BWD_W ? OP_BWD_W : OP_BWD;
}
static const char *span_letters(const TraceSpan *s) {
    return s->kind == TR_FWD ? "F" : s->kind == TR_BWD_B ? "Bb" : s->kind == TR_BWD_W ? "Bw" : "B";
}

/* The features of span k of a run; an optimizer span holds all of the rank's OPTs; a forward or
 * backward also what its core took in meanwhile (r->recv). */
static void span_features(const Run *r, int k, double f[COST__COUNT]) {
    const Plan *p = r->plan;
    const TraceSpan *s = &r->tr.spans[k];
    for (int j = 0; j < COST__COUNT; j++) f[j] = 0;
    if (s->kind == TR_OPT) {
        const PlanRank *rk = &p->ranks[s->rank];
        for (int i = 0; i < rk->nops; i++) {
            if (rk->ops[i].kind != OP_OPT) continue;
            double g[COST__COUNT];
            sim_op_features(p, s->rank, &rk->ops[i], &rk->notes[i], g);
            for (int j = 0; j < COST__COUNT; j++) f[j] += g[j];
        }
        return;
    }
    const PlanChunk *c = &p->chunks[s->chunk];
    cost_compute_features(&p->model, s->chunk, c->layer0, c->nlayers, p->nchunks, span_op(s), p->recompute,
                          p->precision, type_of(r, s->rank)->rated_bf16, f);
    f[COST_RECV] = r->recv ? r->recv[k] : 0;
}

static int load_links(const char *path, Calibration *cal, char *err, size_t errlen);

static int cmp_dbl(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* The median of n values (sorted in place); 0 for none. */
static double median_of(double *x, int n) {
    if (n <= 0) return 0;
    qsort(x, (size_t)n, sizeof *x, cmp_dbl);
    return n % 2 ? x[n / 2] : (x[n / 2 - 1] + x[n / 2]) / 2;
}

/* The median over a run's forward and backward spans (after its first step) of measured over
 * calibrated time: 1 when the run computes at the fitted rates; above it when its ranks computed
 * slower (sharing cores with each other or other work), which no model of the links explains. */
static double span_ratio(const Run *r, const Calibration *cal) {
    /* a span's time counted as if alone: times the share of the cores the model says it had */
    double *x = xcalloc((size_t)r->tr.nspans + 1, sizeof *x);
    int n = 0;
    for (int k = 0; k < r->tr.nspans; k++) {
        const TraceSpan *s = &r->tr.spans[k];
        if (s->step == 0 || s->kind == TR_OPT || s->dur <= 0) continue;
        double f[COST__COUNT], c[COST__COUNT];
        span_features(r, k, f);
        calib_coefs(cal, type_of(r, s->rank), r->plan->precision, c);
        double t = cost_seconds(f, c);
        if (t > 0) x[n++] = s->dur * (r->share ? r->share[k] : 1) / t;
    }
    double m = median_of(x, n);
    free(x);
    return m;
}

/* The plan has the span's forward or backward on the span's rank. */
static int has_op(const Plan *p, const TraceSpan *s) {
    if (s->rank >= p->nranks) return 0;
    const PlanRank *rk = &p->ranks[s->rank];
    for (int i = 0; i < rk->nops; i++) {
        const Op *op = &rk->ops[i];
        if (op->chunk == s->chunk && op->mb == s->mb && op->kind == span_op(s)) return 1;
    }
    return 0;
}

static int cmp_sample(const void *a, const void *b) {
    const FitSample *x = a, *y = b;
    for (int j = 0; j < COST__COUNT; j++)
        if (x->f[j] != y->f[j]) return x->f[j] < y->f[j] ? -1 : 1;
    return x->d < y->d ? -1 : x->d > y->d;
}

/* Spans of the same work (the same chunk forward, say, on every rank and step) become one sample
 * at their median time: a span slowed down by another process on the machine (a core taken
 * away for milliseconds) does not pull the fit. Returns the new count. */
static int median_samples(FitSample *xs, int n) {
    qsort(xs, (size_t)n, sizeof *xs, cmp_sample);
    int m = 0;
    for (int i = 0; i < n;) {
        int j = i;
        while (j < n && !memcmp(xs[j].f, xs[i].f, sizeof xs[i].f)) j++;
        FitSample x = xs[i];
        x.d = (j - i) % 2 ? xs[i + (j - i) / 2].d : (xs[i + (j - i) / 2 - 1].d + xs[i + (j - i) / 2].d) / 2;
        xs[m++] = x;
        i = j;
    }
    return m;
}

/* A node of the topology whose ranks outnumber its cores. */
static int shares_cores(const Topology *t) {
    for (int i = 0; i < t->nnodes; i++)
        if (t->nodes[i].cores > 0 && t->nodes[i].ndevices > t->nodes[i].cores) return 1;
    return 0;
}

/* A CPU rank of the plan receives something (a point-to-point transfer or a collective). */
static int cpu_receives(const Run *r) {
    const Plan *p = r->plan;
    for (int q = 0; q < p->nranks && p->nranks > 1; q++) {
        if (type_of(r, q)->rated_bf16) continue;
        for (int i = 0; i < p->ranks[q].nops; i++)
            if (op_is_transfer(p->ranks[q].ops[i].kind) && sim_op_bytes(p, q, i) > 0) return 1;
    }
    return 0;
}

/* What only a simulation of the run says about its spans: r->share where its ranks share cores,
 * r->recv where CPU ranks receive; at cal's rates. Per operation, its time alone over its
 * simulated time, and the bytes that arrived while it ran; a span gets its operation's (an
 * optimizer span its rank's OPTs' together). 0, or -1 with err. */
static int sim_factors(Run *r, const Calibration *cal, char *err, size_t errlen) {
    free(r->share);
    free(r->recv);
    r->share = r->recv = NULL;
    int shared = shares_cores(&r->topo), recv = cpu_receives(r);
    if (!shared && !recv) return 0;
    const Plan *p = r->plan;
    SimOptions so = { .calib = cal, .record = 1 };
    SimResult res;
    if (sim_run(p, &so, &res, err, errlen)) return -1;
    double **alone = xcalloc((size_t)p->nranks, sizeof *alone), **wall = xcalloc((size_t)p->nranks, sizeof *wall);
    double **bytes = xcalloc((size_t)p->nranks, sizeof *bytes);
    for (int q = 0; q < p->nranks; q++) {
        alone[q] = xcalloc((size_t)p->ranks[q].nops + 1, sizeof(double));
        wall[q] = xcalloc((size_t)p->ranks[q].nops + 1, sizeof(double));
        bytes[q] = xcalloc((size_t)p->ranks[q].nops + 1, sizeof(double));
    }
    for (int k = 0; k < res.nspans; k++) {
        const SimSpan *sp = &res.spans[k];
        const PlanRank *rk = &p->ranks[sp->rank];
        wall[sp->rank][sp->op] = sp->t1 - sp->t0;
        alone[sp->rank][sp->op] = sim_op_seconds_calib(p, &r->topo, cal, sp->rank, &rk->ops[sp->op], &rk->notes[sp->op]);
        bytes[sp->rank][sp->op] = sp->recv_bytes;
    }
    sim_result_free(&res);
    if (shared) r->share = xcalloc((size_t)r->tr.nspans + 1, sizeof(double));
    if (recv) r->recv = xcalloc((size_t)r->tr.nspans + 1, sizeof(double));
    for (int k = 0; k < r->tr.nspans; k++) {
        const TraceSpan *s = &r->tr.spans[k];
        const PlanRank *rk = &p->ranks[s->rank];
        double a = 0, w = 0, b = 0;
        for (int i = 0; i < rk->nops; i++) {
            const Op *op = &rk->ops[i];
            int match = s->kind == TR_OPT ? op->kind == OP_OPT : op->chunk == s->chunk && op->mb == s->mb && op->kind == span_op(s);
            if (match) a += alone[s->rank][i], w += wall[s->rank][i], b += bytes[s->rank][i];
        }
        if (r->share) r->share[k] = w > 0 && a > 0 ? a / w : 1;
        if (r->recv) r->recv[k] = s->kind == TR_OPT ? 0 : b;
    }
    for (int q = 0; q < p->nranks; q++) free(alone[q]), free(wall[q]), free(bytes[q]);
    free(alone); free(wall); free(bytes);
    return 0;
}

/* Fits every device type of the fitted runs into cal (its types replaced): per type, the spans
 * after each run's first step, as if alone (times r->share), with what they received (r->recv).
 * 0, or an exit status. */
static int fit_types(Run *runs, int nruns, Calibration *cal, int verbose) {
    for (int i = 0; i < cal->ntypes; i++) free(cal->types[i].name);
    cal->ntypes = 0;
    for (int i = 0; i < nruns; i++) {
        if (runs[i].held_out) continue;
        for (int t = 0; t < runs[i].topo.ntypes; t++) {
            const DeviceType *d = &runs[i].topo.types[t];
            if (calib_find(cal, d->name)) continue;
            if (cal->ntypes == 64) break;
            CalibType *ct = &cal->types[cal->ntypes];
            memset(ct, 0, sizeof *ct);
            ct->precision = runs[i].plan->precision;
            int n = 0, cap = 1024;
            FitSample *xs = xcalloc((size_t)cap, sizeof *xs);
            for (int j = 0; j < nruns; j++) {
                Run *r = &runs[j];
                if (r->held_out) continue;
                for (int k = 0; k < r->tr.nspans; k++) {
                    const TraceSpan *s = &r->tr.spans[k];
                    if (s->step == 0 || s->dur <= 0 || strcmp(type_of(r, s->rank)->name, d->name)) continue;
                    if (n == cap) xs = xrealloc(xs, (size_t)(cap *= 2) * sizeof *xs);
                    span_features(r, k, xs[n].f);
                    /* a GPU run in the other precision: its compute counted at this one's rates */
                    if (type_of(r, s->rank)->rated_bf16 && r->plan->precision != ct->precision) {
                        double k2 = r->plan->precision == WP_FP32 ? 2 : 0.5;
                        xs[n].f[COST_MM_FLOPS] *= k2; xs[n].f[COST_MM_CALLS] *= k2; xs[n].f[COST_ATTN_FWD] *= k2; xs[n].f[COST_ATTN_BWD] *= k2;
                    }
                    xs[n++].d = s->dur * (r->share ? r->share[k] : 1);
                }
            }
            if (n == 0) { free(xs); continue; }
            int nspans = n;
            n = median_samples(xs, n);
            double prior[COST__COUNT], scale[COST__COUNT], c[COST__COUNT], rms = 0;
            CostRates def = cost_rates_default(d, ct->precision);
            cost_coefs(&def, prior);
            for (int j = 0; j < COST__COUNT; j++) scale[j] = prior[j] > 0 ? prior[j] : j == COST_OPS ? 1e-4 : 1e-12;
            if (fit_costs(xs, n, prior, scale, c, &rms)) { free(xs); fprintf(stderr, "wpgen: calibrate: the fit of %s failed\n", d->name); return EXIT_BAD_INPUT; }
            ct->rates = cost_rates_of(c);
            /* a class the spans never exercised (its coefficient at 0) keeps the default's rate;
             * one they did, fitted at no cost, gets the fastest rate a file holds (1e6 TFLOP/s or
             * GB/s), so that the file predicts what the fit found (the default would add a cost the
             * fit gave to other classes) */
            int used[COST__COUNT] = { 0 };
            for (int k = 0; k < n; k++)
                for (int j = 0; j < COST__COUNT; j++) used[j] |= xs[k].f[j] > 0;
            double top = 1e18;
            if (!isfinite(ct->rates.mm_flops)) ct->rates.mm_flops = used[COST_MM_FLOPS] ? top : def.mm_flops;
            if (!isfinite(ct->rates.attn_fwd_flops)) ct->rates.attn_fwd_flops = used[COST_ATTN_FWD] ? top : def.attn_fwd_flops;
            if (!isfinite(ct->rates.attn_bwd_flops)) ct->rates.attn_bwd_flops = used[COST_ATTN_BWD] ? top : def.attn_bwd_flops;
            if (!isfinite(ct->rates.mem_bw)) ct->rates.mem_bw = used[COST_BYTES] ? 1e15 : def.mem_bw;
            /* no span received anything: half the fitted memory rate (0 says so in the file) */
            if (!used[COST_RECV]) ct->rates.recv_bw = 0;
            else if (!isfinite(ct->rates.recv_bw)) ct->rates.recv_bw = 1e15;
            free(xs);
            ct->name = xstrdup(d->name);
            cal->ntypes++;
            const CostRates *x = &ct->rates;
            char recv[64] = "";
            if (x->recv_bw > 0) snprintf(recv, sizeof recv, ", receiving %.4g GB/s", x->recv_bw / 1e9);
            if (verbose)
                printf("calibrate: %s (%s, %d spans of %d kinds, rms error %.1f%%): products %.4g TFLOP/s (knee %.3g), attention %.4g / %.4g TFLOP/s, "
                       "memory %.4g GB/s, %.3g us per call%s\n", d->name, wp_dtype_name(ct->precision), nspans, n, 100 * rms, x->mm_flops / 1e12,
                       x->mm_knee, x->attn_fwd_flops / 1e12, x->attn_bwd_flops / 1e12, x->mem_bw / 1e9, x->op_overhead_s * 1e6, recv);
        }
    }
    return 0;
}

/* -o names none of the inputs (topologies, traces, plans, the link benchmark), by inode
 * (common/outpaths.h); no trace is given twice, which would count one run as two (or fit to a
 * run it also holds out). 0, or EXIT_BAD_INPUT with the message printed. */
static int check_paths(const Run *runs, int nruns, const char *links, const char *out) {
    WpPathArg *in = xcalloc((size_t)(3 * nruns + 1), sizeof *in);
    int n = 0, rc = 0;
    for (int i = 0; i < nruns; i++) {
        in[n++] = (WpPathArg){ runs[i].held_out ? "--held-out" : "--trace", runs[i].trace };
        in[n++] = (WpPathArg){ "-t", runs[i].topo_path };
        in[n++] = (WpPathArg){ "--plan", runs[i].plan_path };
    }
    in[n++] = (WpPathArg){ "--links", links };
    char err[8400];
    const WpPathArg o = { "-o", out };
    if (wp_check_outputs(in, n, &o, 1, err, sizeof err)) {
        fprintf(stderr, "wpgen calibrate: %s\n", err);
        rc = EXIT_BAD_INPUT;
    }
    for (int i = 0; i < nruns && !rc; i++) {
        struct stat a, b;
        if (stat(runs[i].trace, &a)) continue;
        for (int j = 0; j < i && !rc; j++)
            if (stat(runs[j].trace, &b) == 0 && a.st_dev == b.st_dev && a.st_ino == b.st_ino) {
                fprintf(stderr, "wpgen calibrate: %s %s is the trace also given as %s %s: each run once\n",
                        runs[i].held_out ? "--held-out" : "--trace", runs[i].trace, runs[j].held_out ? "--held-out" : "--trace",
                        runs[j].trace);
                rc = EXIT_BAD_INPUT;
            }
    }
    free(in);
    return rc;
}

int cmd_calibrate(int argc, char **argv) {
    Run *runs = xcalloc((size_t)argc, sizeof *runs);
    int nruns = 0, force = 0, rc = 0;
    const char *topo = NULL, *plan = NULL, *out = NULL, *links = NULL;
    for (int i = 2; i < argc; i++) {
        const char *f = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(f, "-h") || !strcmp(f, "--help")) { usage(stdout); free(runs); return 0; }
        if (!strcmp(f, "--force")) { force = 1; continue; }
        if (!v) { fprintf(stderr, "wpgen calibrate: %s needs a value\n", f); free(runs); return EXIT_BAD_INPUT; }
        i++;
        if (!strcmp(f, "-t") || !strcmp(f, "--topology")) topo = v;
        else if (!strcmp(f, "--plan")) plan = v;
        else if (!strcmp(f, "-o") || !strcmp(f, "--out")) out = v;
        else if (!strcmp(f, "--links")) links = v;
        else if (!strcmp(f, "--trace") || !strcmp(f, "--held-out")) {
            if (!topo) { fprintf(stderr, "wpgen calibrate: %s %s: give -t TOPO.json before it (the topology the run was emitted for)\n", f, v); free(runs); return EXIT_BAD_INPUT; }
            Run *r = &runs[nruns++];
            r->trace = v; r->topo_path = topo; r->held_out = f[2] == 'h';
            if (plan) r->plan_path = plan;
            else {
                const char *slash = strrchr(v, '/');
                snprintf(r->plan_buf, sizeof r->plan_buf, "%.*splan.json", slash ? (int)(slash - v + 1) : 0, v);
                r->plan_path = r->plan_buf;
            }
            plan = NULL;
        } else { fprintf(stderr, "wpgen calibrate: unknown flag \"%s\"\n", f); free(runs); return EXIT_BAD_INPUT; }
    }
    int nfit = 0;
    for (int i = 0; i < nruns; i++) nfit += !runs[i].held_out;
    struct stat st;
    if (!nfit) { fprintf(stderr, "wpgen calibrate: --trace RUN/trace.json is required (a run to fit to; wpgen calibrate -h)\n"); rc = EXIT_BAD_INPUT; }
    else if (!out) { fprintf(stderr, "wpgen calibrate: -o CALIB.json is required\n"); rc = EXIT_BAD_INPUT; }
    else if (!force && stat(out, &st) == 0 && S_ISREG(st.st_mode)) { fprintf(stderr, "wpgen calibrate: -o %s exists; refusing to overwrite it (--force replaces it)\n", out); rc = EXIT_BAD_INPUT; }
    char err[4200];
    if (!rc) rc = check_paths(runs, nruns, links, out);
    for (int i = 0; i < nruns && !rc; i++) {
        Run *r = &runs[i];
        if (topology_load(r->topo_path, &r->topo, err, sizeof err)) { rc = bad("%s%s", err, ""); break; }
        if (trace_read(r->trace, &r->tr, err, sizeof err)) { rc = bad("calibrate: %s%s", err, ""); break; }
        if (rebuild(r, err, sizeof err)) { rc = bad("calibrate: %s%s", err, ""); break; }
        if (r->tr.nranks != r->plan->nranks) {
            fprintf(stderr, "wpgen: calibrate: %s has spans of %d ranks, its plan %s has %d\n", r->trace, r->tr.nranks, r->plan_path, r->plan->nranks);
            rc = EXIT_BAD_INPUT;
        }
        for (int k = 0; !rc && k < r->tr.nspans; k++) {
            const TraceSpan *s = &r->tr.spans[k];
            if (s->kind == TR_OPT || has_op(r->plan, s)) continue;
            fprintf(stderr, "wpgen: calibrate: %s: rank %d runs %s%d mb%d, which its plan %s does not (the trace of another plan?)\n",
                    r->trace, s->rank, span_letters(s), s->chunk, s->mb, r->plan_path);
            rc = EXIT_BAD_INPUT;
        }
        r->measured = r->tr.step_median_s;
    }
    Calibration cal = { 0 };
    cal.types = xcalloc(64, sizeof *cal.types);
    if (!rc && links && load_links(links, &cal, err, sizeof err)) rc = bad("calibrate: %s%s", err, "");
    /* the fit; where fitted runs' ranks share cores or receive on CPUs, again with the shares and
     * the bytes received the simulator gives at the rates found, until they settle (see the top
     * of this file) */
    int shared = 0, receive = 0;
    for (int i = 0; i < nruns && !rc; i++)
        if (!runs[i].held_out) shared |= shares_cores(&runs[i].topo), receive |= cpu_receives(&runs[i]);
    int again = shared || receive;
    double before[64][COST__COUNT];
    for (int pass = 0, more = 1; more && !rc; pass++) {
        for (int i = 0; i < nruns && pass > 0 && !rc; i++) {
            calib_apply_links(&cal, &runs[i].topo);
            if (!runs[i].held_out && sim_factors(&runs[i], &cal, err, sizeof err)) rc = bad("calibrate: sim: %s%s", err, "");
        }
        for (int k = 0; k < cal.ntypes; k++) cost_coefs(&cal.types[k].rates, before[k]);
        if (rc || (rc = fit_types(runs, nruns, &cal, 0))) break;
        /* again until the rates move less than 0.01% (the shares depend on them), at most 20 times */
        more = again && pass < 20;
        if (more && pass > 0) {
            double moved = 0;
            for (int k = 0; k < cal.ntypes; k++) {
                double c[COST__COUNT];
                cost_coefs(&cal.types[k].rates, c);
                for (int j = 0; j < COST__COUNT; j++)
                    if (c[j] > 0 || before[k][j] > 0) moved = fmax(moved, fabs(c[j] - before[k][j]) / fmax(c[j], before[k][j]));
            }
            more = moved > 1e-4;
        }
    }
    if (!rc) rc = fit_types(runs, nruns, &cal, 1);   /* the last fit again, to print it */
    if (!rc && shared) printf("calibrate: ranks share cores in the fitted runs: spans counted at the shares of the cores the simulator gives them\n");
    for (int i = 0; i < nruns && !rc; i++) {   /* for the spans column: every run's shares at the final rates */
        calib_apply_links(&cal, &runs[i].topo);
        if (sim_factors(&runs[i], &cal, err, sizeof err)) rc = bad("calibrate: sim: %s%s", err, "");
    }
    if (!rc && cal.intra.set) printf("calibrate: links inside a node %.4g GB/s, %.3g us\n", cal.intra.bw / 1e9, cal.intra.lat * 1e6);
    if (!rc && cal.net.set) printf("calibrate: network %.4g GB/s, %.3g us\n", cal.net.bw / 1e9, cal.net.lat * 1e6);
    /* every plan predicted with the calibration, beside its measured step: the median of the
     * steps of all its runs of that role pooled (a plan run again, under the same topology, is
     * one row: repeats interleaved with other runs average out the machine's drift between
     * minutes), and how far each run's own median was from it */
    json_t *fit = json_object(), *jr = json_array();
    double err2[2] = { 0 }, worst[2] = { 0 };
    int cnt[2] = { 0 };
    int *group = xcalloc((size_t)nruns + 1, sizeof *group);   /* the first run of each run's plan */
    uint64_t *hash = xcalloc((size_t)nruns + 1, sizeof *hash);
    for (int i = 0; i < nruns && !rc; i++) {
        group[i] = i;
        hash[i] = plan_hash(runs[i].plan);
        for (int j = 0; j < i; j++)
            if (group[j] == j && runs[j].held_out == runs[i].held_out && hash[j] == hash[i] && !strcmp(runs[j].topo_path, runs[i].topo_path)) {
                group[i] = j;
                break;
            }
    }
    free(hash);
    for (int role = 0; role < 2 && !rc; role++) {
        for (int i = 0; i < nruns; i++) {
            Run *r = &runs[i];
            if (r->held_out != role || group[i] != i) continue;
            if (!cnt[role]) printf("%-10s %-44s %-20s %12s %12s %8s %7s %s\n", role ? "held out" : "fitted", "trace", "strategy", "predicted s",
                                   "measured s", "error", "spans", "runs (their medians)");
            calib_apply_links(&cal, &r->topo);
            SimOptions so = { .calib = &cal };
            SimResult s;
            if (sim_run(r->plan, &so, &s, err, sizeof err)) { rc = bad("calibrate: sim: %s%s", err, ""); break; }
            r->predicted = s.step_time;
            sim_result_free(&s);
            int nt = 0, n = 0;
            double lo = INFINITY, hi = 0;
            json_t *jt = json_array();
            for (int j = i; j < nruns; j++)
                if (group[j] == i) nt += runs[j].tr.nstep_times;
            double *t = xcalloc((size_t)nt + 1, sizeof *t), *sr = xcalloc((size_t)nruns + 1, sizeof *sr);
            nt = 0;
            for (int j = i; j < nruns; j++) {
                if (group[j] != i) continue;
                memcpy(t + nt, runs[j].tr.step_times, (size_t)runs[j].tr.nstep_times * sizeof *t);
                nt += runs[j].tr.nstep_times;
                lo = fmin(lo, runs[j].measured); hi = fmax(hi, runs[j].measured);
                sr[n++] = span_ratio(&runs[j], &cal);
                json_array_append_new(jt, json_string(runs[j].trace));
            }
            r->measured = median_of(t, nt);
            double e = r->predicted / r->measured - 1, spans = median_of(sr, n);
            free(t); free(sr);
            char spread[64] = "1";
            if (n > 1) snprintf(spread, sizeof spread, "%d (%+.1f%% to %+.1f%%)", n, 100 * (lo / r->measured - 1), 100 * (hi / r->measured - 1));
            printf("%-10s %-44s %-20s %12.5g %12.5g %+7.1f%% %6.2fx %s\n", "", r->trace, r->plan->strategy, r->predicted, r->measured, 100 * e,
                   spans, spread);
            json_array_append_new(jr, json_pack("{s:s, s:o, s:s, s:s, s:f, s:f}", "trace", r->trace, "traces", jt, "role",
                                                role ? "held-out" : "fitted", "strategy", r->plan->strategy, "predicted_s", r->predicted,
                                                "measured_s", r->measured));
            err2[role] += e * e; cnt[role]++;
            if (fabs(e) > worst[role]) worst[role] = fabs(e);
        }
    }
    free(group);
    for (int role = 0; role < 2 && !rc; role++)
        if (cnt[role]) printf("calibrate: %s runs: %d, rms error %.1f%%, worst %.1f%%\n", role ? "held-out" : "fitted", cnt[role],
                              100 * sqrt(err2[role] / cnt[role]), 100 * worst[role]);
    json_object_set_new(fit, "runs", jr);
    if (!rc) {
        char about[256];
        snprintf(about, sizeof about, "wpgen calibrate %s: fitted to %d run%s", WPGEN_VERSION, nfit, nfit > 1 ? "s" : "");
        cal.about = xstrdup(about);
        cal.fit_json = json_dumps(fit, JSON_COMPACT | JSON_REAL_PRECISION(17));
        if (calib_save(out, &cal, force, err, sizeof err)) rc = bad("calibrate: %s%s", err, "");
        else printf("calibrate: wrote %s\n", out);
    }
    json_decref(fit);
    calib_free(&cal);
    for (int i = 0; i < nruns; i++) {
        plan_free(runs[i].plan);
        trace_run_free(&runs[i].tr);
        free(runs[i].share);
        free(runs[i].recv);
        if (runs[i].topo.name) topology_free(&runs[i].topo);
    }
    free(runs);
    return rc;
}

/* A link benchmark's result (scripts/linkbench.c): point-to-point times between pairs of ranks,
 * on one host or two; each class's latency and bandwidth by least squares. */
static int load_links(const char *path, Calibration *cal, char *err, size_t errlen) {
    json_t *root = wp_json_load(path, 0, "malformed JSON", err, errlen);
    if (!root) return -1;
    json_t *ver = json_object_get(root, "version"), *kind = json_object_get(root, "kind"), *p2p = json_object_get(root, "p2p");
    int rc = 0;
    if (!json_is_integer(ver) || json_integer_value(ver) != 1) rc = -1, snprintf(err, errlen, "%s: version: expected 1", path);
    else if (!json_is_string(kind) || strcmp(json_string_value(kind), "wpgen-linkbench"))
        rc = -1, snprintf(err, errlen, "%s: kind: expected \"wpgen-linkbench\" (the output of scripts/linkbench.sh)", path);
    else if (!json_is_array(p2p) || json_array_size(p2p) == 0) rc = -1, snprintf(err, errlen, "%s: p2p: expected a non-empty array", path);
    size_t n = rc ? 0 : json_array_size(p2p);
    double *b[2], *t[2];
    int m[2] = { 0 };
    for (int k = 0; k < 2; k++) b[k] = xcalloc(n + 1, sizeof(double)), t[k] = xcalloc(n + 1, sizeof(double));
    for (size_t i = 0; i < n && !rc; i++) {
        json_t *e = json_array_get(p2p, i), *sh = json_object_get(e, "same_host"), *by = json_object_get(e, "bytes"), *s = json_object_get(e, "seconds");
        if (!json_is_boolean(sh)) { rc = -1, snprintf(err, errlen, "%s: p2p[%zu].same_host: expected true or false", path, i); break; }
        if (!json_is_number(by) || json_number_value(by) <= 0) { rc = -1, snprintf(err, errlen, "%s: p2p[%zu].bytes: expected a positive number", path, i); break; }
        if (!json_is_number(s) || json_number_value(s) <= 0) { rc = -1, snprintf(err, errlen, "%s: p2p[%zu].seconds: expected a positive number", path, i); break; }
        int k = json_is_true(sh) ? 0 : 1;
        b[k][m[k]] = json_number_value(by); t[k][m[k]++] = json_number_value(s);
    }
    for (int k = 0; k < 2 && !rc; k++) {
        if (!m[k]) continue;
        CalibLink *l = k ? &cal->net : &cal->intra;
        if (fit_link(b[k], t[k], m[k], &l->lat, &l->bw)) rc = -1, snprintf(err, errlen, "%s: p2p: the %s pairs need at least 2 message sizes", path, k ? "two-host" : "same-host");
        else l->set = 1;
    }
    for (int k = 0; k < 2; k++) free(b[k]), free(t[k]);
    json_decref(root);
    return rc ? -1 : 0;
}
