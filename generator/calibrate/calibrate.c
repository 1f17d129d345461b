/* The calibration of `wpgen calibrate`: calibrate.h says what and how. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <jansson.h>
#include "calibrate/calibrate.h"
#include "cost/fit.h"
#include "emit/emit.h"
#include "common/jsonfile.h"
#include "common/modelcfg.h"
#include "ir/op_table.h"
#include "lua/declare.h"
#include "plan/make_plan.h"
#include "sim/sim.h"
#include "util/xalloc.h"

/* The plan of a run, built again from what its plan.json records, checked by its hash. */
static int rebuild(CalibRun *r, char *err, size_t errlen) {
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
    /* what is read of plan.json, each of its type (wpgen emit writes them all) */
    static const struct { const char *key; json_type type; const char *what; } need[] = {
        { "model", JSON_OBJECT, "an object (not a plan.json of wpgen emit?)" },
        { "strategy", JSON_STRING, "a string (not a plan.json of wpgen emit?)" },
        { "plan_hash", JSON_STRING, "a string (not a plan.json of wpgen emit?)" },
        { "precision", JSON_STRING, "a string (not a plan.json of wpgen emit?)" },
        { "grad_precision", JSON_STRING, "a string (not a plan.json of wpgen emit?)" },
        { "micro_batches_per_rank", JSON_INTEGER, "an integer (not a plan.json of wpgen emit?)" },
        { "replicas", JSON_INTEGER, "an integer (not a plan.json of wpgen emit?)" },
        { "chunks", JSON_ARRAY, "an array (not a plan.json of wpgen emit?)" },
    };
    for (size_t i = 0; i < sizeof need / sizeof need[0]; i++) {
        json_t *v = json_object_get(pj, need[i].key);
        if (!v || json_typeof(v) != need[i].type) {
            wp_json_expected(err, errlen, r->plan_path, need[i].key, need[i].what, v);
            goto done;
        }
    }
    /* plan.json's model is a config.json's keys and the run's name and shape, read here */
    json_t *cfg = json_deep_copy(model);
    json_object_del(cfg, "name");
    json_object_del(cfg, "seq_len");
    json_object_del(cfg, "micro_batch_size");
    json_object_del(cfg, "mlp_tile_tokens");
    char *text = json_dumps(cfg, JSON_COMPACT);
    json_decref(cfg);
    char merr[1024];
    int mrc = model_config_parse(r->plan_path, text, strlen(text), &r->model, merr, sizeof merr);
    free(text);
    if (mrc) { snprintf(err, errlen, "%s (model)", merr); goto done; }
    r->model.seq = (int)json_integer_value(json_object_get(model, "seq_len"));
    r->model.mbs = (int)json_integer_value(json_object_get(model, "micro_batch_size"));
    /* absent from plan.json files written before the MLP's tiles: those programs ran it untiled */
    json_t *tile = json_object_get(model, "mlp_tile_tokens");
    r->model.mlp_tile = tile ? (int)json_integer_value(tile) : r->model.seq * r->model.mbs;
    snprintf(r->model_name, sizeof r->model_name, "%s", json_string_value(json_object_get(model, "name")) ? json_string_value(json_object_get(model, "name")) : "model");
    if (model_check(&r->model, merr, sizeof merr)) { snprintf(err, errlen, "%s: model: %s", r->plan_path, merr); goto done; }
    /* context_parallel: absent from plan.json files written before it (1); a group's micro-batches are
     * C times the flag's (make_plan) */
    json_t *cpj = json_object_get(pj, "context_parallel");
    int cp = json_is_integer(cpj) && json_integer_value(cpj) > 1 ? (int)json_integer_value(cpj) : 1;
    StrategyOpts o = { .micro_batches = (int)json_integer_value(mbr) / cp, .replicas = (int)json_integer_value(rep),
                       .recompute = !json_is_true(json_object_get(pj, "recompute")) ? WP_KEEP_ALL
                                    : json_is_true(json_object_get(pj, "offload_activations")) ? WP_RECOMPUTE_OFFLOAD : WP_RECOMPUTE,
                       .context_parallel = cp };
    /* the strategy's options its notes record, as its declaration says (from_notes) */
    decl_from_notes(strategy_decl(strategy), json_string_value(json_object_get(pj, "notes")), &o);
    if (wp_dtype_parse(prec, &o.precision) || wp_dtype_parse(gprec, &o.grad_precision)) {
        const char *key = wp_dtype_parse(prec, &o.precision) ? "precision" : "grad_precision";
        wp_json_expected(err, errlen, r->plan_path, key, "fp32 or bf16", json_object_get(pj, key));
        goto done;
    }
    /* the weights' format on the wire: absent from plan.json files written before --weight-wire */
    const char *wire = json_string_value(json_object_get(pj, "weight_wire"));
    WpDtype wd;
    if (wire && wp_dtype_parse(wire, &wd)) {
        wp_json_expected(err, errlen, r->plan_path, "weight_wire", "fp32 or bf16", json_object_get(pj, "weight_wire"));
        goto done;
    }
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
static const DeviceType *type_of(const CalibRun *r, int rank) {
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
static void span_features(const CalibRun *r, int k, double f[COST__COUNT]) {
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
static double span_ratio(const CalibRun *r, const Calibration *cal) {
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
static int cpu_receives(const CalibRun *r) {
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
static int sim_factors(CalibRun *r, const Calibration *cal, char *err, size_t errlen) {
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
 * after each run's first step, as if alone (times r->share), with what they received (r->recv);
 * fits[k] how type k was. 0, or -1 with err. */
static int fit_types(CalibRun *runs, int nruns, Calibration *cal, CalibTypeFit *fits, char *err, size_t errlen) {
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
                CalibRun *r = &runs[j];
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
            if (fit_costs(xs, n, prior, scale, c, &rms)) { free(xs); snprintf(err, errlen, "the fit of %s failed", d->name); return -1; }
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
            fits[cal->ntypes - 1] = (CalibTypeFit){ nspans, n, rms };
        }
    }
    return 0;
}

int calibrate_load_run(CalibRun *r, char *err, size_t errlen) {
    char e[4200];
    if (topology_load(r->topo_path, &r->topo, e, sizeof e)) return snprintf(err, errlen, "%s", e), -1;
    if (trace_read(r->trace, &r->tr, e, sizeof e)) return snprintf(err, errlen, "calibrate: %s", e), -1;
    if (rebuild(r, e, sizeof e)) return snprintf(err, errlen, "calibrate: %s", e), -1;
    if (r->tr.nranks != r->plan->nranks)
        return snprintf(err, errlen, "calibrate: %s has spans of %d ranks, its plan %s has %d", r->trace, r->tr.nranks, r->plan_path,
                        r->plan->nranks), -1;
    for (int k = 0; k < r->tr.nspans; k++) {
        const TraceSpan *s = &r->tr.spans[k];
        if (s->kind == TR_OPT || has_op(r->plan, s)) continue;
        return snprintf(err, errlen, "calibrate: %s: rank %d runs %s%d mb%d, which its plan %s does not (the trace of another plan?)",
                        r->trace, s->rank, span_letters(s), s->chunk, s->mb, r->plan_path), -1;
    }
    r->measured = r->tr.step_median_s;
    return 0;
}

void calibrate_run_free(CalibRun *r) {
    plan_free(r->plan);
    trace_run_free(&r->tr);
    free(r->share);
    free(r->recv);
    if (r->topo.name) topology_free(&r->topo);
}

int calibrate_fit(CalibRun *runs, int nruns, Calibration *cal, CalibTypeFit *fits, int *shared_out, char *err, size_t errlen) {
    /* where fitted runs' ranks share cores or receive on CPUs, again with the shares and the
     * bytes received the simulator gives at the rates found, until they settle (calibrate.h) */
    char e[4200];
    int shared = 0, receive = 0, rc = 0;
    for (int i = 0; i < nruns; i++)
        if (!runs[i].held_out) shared |= shares_cores(&runs[i].topo), receive |= cpu_receives(&runs[i]);
    int again = shared || receive;
    *shared_out = shared;
    double before[64][COST__COUNT];
    for (int pass = 0, more = 1; more && !rc; pass++) {
        for (int i = 0; i < nruns && pass > 0 && !rc; i++) {
            calib_apply_links(cal, &runs[i].topo);
            if (!runs[i].held_out && sim_factors(&runs[i], cal, e, sizeof e)) rc = -1, snprintf(err, errlen, "calibrate: sim: %s", e);
        }
        for (int k = 0; k < cal->ntypes; k++) cost_coefs(&cal->types[k].rates, before[k]);
        if (rc || (rc = fit_types(runs, nruns, cal, fits, err, errlen))) break;
        /* again until the rates move less than 0.01% (the shares depend on them), at most 20 times */
        more = again && pass < 20;
        if (more && pass > 0) {
            double moved = 0;
            for (int k = 0; k < cal->ntypes; k++) {
                double c[COST__COUNT];
                cost_coefs(&cal->types[k].rates, c);
                for (int j = 0; j < COST__COUNT; j++)
                    if (c[j] > 0 || before[k][j] > 0) moved = fmax(moved, fabs(c[j] - before[k][j]) / fmax(c[j], before[k][j]));
            }
            more = moved > 1e-4;
        }
    }
    if (!rc) rc = fit_types(runs, nruns, cal, fits, err, errlen);   /* the last fit again (the command prints it) */
    for (int i = 0; i < nruns && !rc; i++) {   /* for the spans column: every run's shares at the final rates */
        calib_apply_links(cal, &runs[i].topo);
        if (sim_factors(&runs[i], cal, e, sizeof e)) rc = -1, snprintf(err, errlen, "calibrate: sim: %s", e);
    }
    return rc;
}

int calibrate_predict(CalibRun *runs, int nruns, const Calibration *cal, CalibRow *rows, int *nrows, char *err, size_t errlen) {
    /* a plan run again under the same topology is one row: repeats interleaved with other runs
     * average out the machine's drift between minutes; each run's own median is kept beside */
    char e[4200];
    int rc = 0;
    *nrows = 0;
    int *group = xcalloc((size_t)nruns + 1, sizeof *group);   /* the first run of each run's plan */
    uint64_t *hash = xcalloc((size_t)nruns + 1, sizeof *hash);
    for (int i = 0; i < nruns; i++) {
        group[i] = i;
        hash[i] = plan_hash(runs[i].plan);
        for (int j = 0; j < i; j++)
            if (group[j] == j && runs[j].held_out == runs[i].held_out && hash[j] == hash[i] && !strcmp(runs[j].topo_path, runs[i].topo_path)) {
                group[i] = j;
                break;
            }
    }
    free(hash);
    for (int i = 0; i < nruns; i++) runs[i].group = group[i];
    for (int role = 0; role < 2 && !rc; role++) {
        for (int i = 0; i < nruns; i++) {
            CalibRun *r = &runs[i];
            if (r->held_out != role || group[i] != i) continue;
            calib_apply_links((Calibration *)cal, &r->topo);
            SimOptions so = { .calib = cal };
            SimResult s;
            if (sim_run(r->plan, &so, &s, e, sizeof e)) { rc = -1; snprintf(err, errlen, "calibrate: sim: %s", e); break; }
            r->predicted = s.step_time;
            sim_result_free(&s);
            int nt = 0, n = 0;
            double lo = INFINITY, hi = 0;
            for (int j = i; j < nruns; j++)
                if (group[j] == i) nt += runs[j].tr.nstep_times;
            double *t = xcalloc((size_t)nt + 1, sizeof *t), *sr = xcalloc((size_t)nruns + 1, sizeof *sr);
            nt = 0;
            for (int j = i; j < nruns; j++) {
                if (group[j] != i) continue;
                memcpy(t + nt, runs[j].tr.step_times, (size_t)runs[j].tr.nstep_times * sizeof *t);
                nt += runs[j].tr.nstep_times;
                lo = fmin(lo, runs[j].measured); hi = fmax(hi, runs[j].measured);
                sr[n++] = span_ratio(&runs[j], cal);
            }
            r->measured = median_of(t, nt);
            rows[(*nrows)++] = (CalibRow){ .run = i, .held_out = role, .nruns = n, .predicted = r->predicted, .measured = r->measured,
                                           .lo = lo, .hi = hi, .spans = median_of(sr, n) };
            free(t); free(sr);
        }
    }
    free(group);
    return rc;
}

/* A link benchmark's result (scripts/linkbench.c): point-to-point times between pairs of ranks,
 * on one host or two; each class's latency and bandwidth by least squares. */
int calibrate_load_links(const char *path, Calibration *cal, char *err, size_t errlen) {
    json_t *root = wp_json_load(path, 0, "malformed JSON", err, errlen);
    if (!root) return -1;
    json_t *ver = json_object_get(root, "version"), *kind = json_object_get(root, "kind"), *p2p = json_object_get(root, "p2p");
    int rc = 0;
    if (!json_is_integer(ver) || json_integer_value(ver) != 1) rc = wp_json_expected(err, errlen, path, "version", "1", ver);
    else if (!json_is_string(kind) || strcmp(json_string_value(kind), "wpgen-linkbench"))
        rc = wp_json_expected(err, errlen, path, "kind", "\"wpgen-linkbench\" (the output of scripts/linkbench.sh)", kind);
    else if (!json_is_array(p2p) || json_array_size(p2p) == 0) rc = wp_json_expected(err, errlen, path, "p2p", "a non-empty array", p2p);
    size_t n = rc ? 0 : json_array_size(p2p);
    double *b[2], *t[2];
    int m[2] = { 0 };
    for (int k = 0; k < 2; k++) b[k] = xcalloc(n + 1, sizeof(double)), t[k] = xcalloc(n + 1, sizeof(double));
    for (size_t i = 0; i < n && !rc; i++) {
        json_t *e = json_array_get(p2p, i), *sh = json_object_get(e, "same_host"), *by = json_object_get(e, "bytes"), *s = json_object_get(e, "seconds");
        char jpath[64];
        const char *bad = !json_is_boolean(sh) ? "same_host" : !json_is_number(by) || json_number_value(by) <= 0 ? "bytes"
                          : !json_is_number(s) || json_number_value(s) <= 0 ? "seconds" : NULL;
        if (bad) {
            snprintf(jpath, sizeof jpath, "p2p[%zu].%s", i, bad);
            rc = wp_json_expected(err, errlen, path, jpath, !strcmp(bad, "same_host") ? "true or false" : "a positive number",
                                  json_object_get(e, bad));
            break;
        }
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
