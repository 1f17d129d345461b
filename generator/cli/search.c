/* The pruned search of `-s auto` and `compare` (search.h). The candidate space is every strategy
 * x replicas (each divisor of the ranks: a user runs replicas of shorter pipelines) x chunks (the
 * strategy's default, twice the pipeline's ranks) x recomputation x precision x rounds (the
 * micro-batches per weight pass of weipipe-interleave, K = 1, 2, 4, ... below N, K = N being
 * weipipe-naive; tawpipe's rounds, its solver's choice and 1, 2, 4, ... up to N), less what the
 * flags fix. Building a plan of 1,024 ranks takes seconds (the strategy's Lua), so a candidate is
 * built only when bounds computed from the model and the topology alone cannot rule it out:
 *   impossible  more chunks, or 1F1B stages, than the model has layers (the strategies refuse them);
 *   memory      a lower bound on the largest peak of a rank exceeds the device's memory: the fp32
 *               masters and AdamW state of a replica spread evenly over its ranks, plus what every
 *               rank must hold at once (weight passing: one micro-batch's stash through every
 *               chunk; 1F1B: stage 0's first chunk, its stashes for the micro-batches in flight),
 *               plus the workspace of the lightest chunk;
 *   fp32        where bf16 is the default (more bytes, half the compute rate, more memory);
 *   dominated   recomputation where the same candidate fits without it (more compute, same plan);
 *   slower      a lower bound on the step time (every rank's share of the step's compute at the
 *               device's rate, nothing waited for) no better than the best simulated so far;
 *               candidates are tried in the order of that bound, and a simulation is stopped once
 *               its clock passes the best's step time;
 *   one replica a candidate of R > 1 replicas is first run as its one pipeline on its own devices
 *               (R times cheaper): if that does not fit, or is no faster than the best, neither is
 *               the candidate (the replicas only add the all-reduce between them).
 * Each bound is below what the verifier and the simulator compute for the plan (test_search
 * checks it on clusters small enough to build everything), so no pruned candidate can beat the
 * chosen one. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "cli/search.h"
#include "cli/progress.h"
#include "ir/xalloc.h"

const char *const prune_names[PRUNE__COUNT] = {
    [PRUNE_IMPOSSIBLE] = "impossible", [PRUNE_MEMORY] = "over the memory bound", [PRUNE_PRECISION] = "fp32 (bf16 is faster and smaller)", [PRUNE_DOMINATED] = "recomputation not needed",
    [PRUNE_SLOWER] = "cannot win", [PRUNE_REFUSED] = "refused", [PRUNE_NO_FIT] = "built, do not fit", [PRUNE_TIME] = "not tried (--search-seconds)",
};

typedef enum { SHAPE_OTHER, SHAPE_WEIGHT_PASSING, SHAPE_ACT_PASSING } StrategyShape;

/* What the bounds may assume of a shipped strategy: weight passing (every rank runs whole
 * micro-batches through every chunk), or 1F1B's activation passing. Other scripts: nothing. */
static StrategyShape shape_of(const char *s) {
    if (!strcmp(s, "weipipe-interleave") || !strcmp(s, "weipipe-naive") || !strcmp(s, "fsdp") || !strcmp(s, "tawpipe"))
        return SHAPE_WEIGHT_PASSING;
    if (!strcmp(s, "1f1b")) return SHAPE_ACT_PASSING;
    return SHAPE_OTHER;
}

/* The strategies of schedules/lib/weipipe.lua that take --pass-micro-batches. */
static int takes_pass_mbs(const char *s) { return !strcmp(s, "weipipe-interleave") || !strcmp(s, "weipipe-naive"); }

int search_round_values(const char *strategy, int micro_batches, int given_pass, int given_rounds, int *out, int max) {
    int n = 0, taw = !strcmp(strategy, "tawpipe");
    if (taw && given_rounds) { out[n++] = given_rounds; return n; }
    if (!taw && given_pass) { out[n++] = takes_pass_mbs(strategy) ? given_pass : 0; return n; }
    out[n++] = 0;
    if (taw)   /* the solver's choice (the fewest whose memory fits by its upper bound), and the others */
        for (int r = 1; r <= micro_batches && n < max; r *= 2) out[n++] = r;
    else if (!strcmp(strategy, "weipipe-interleave"))   /* naive is K = N, and K < N is interleave's */
        for (int k = 2; k < micro_batches && n < max; k *= 2) out[n++] = k;
    return n;
}

void search_set_round(const char *strategy, StrategyOpts *o, int v) {
    if (!strcmp(strategy, "tawpipe")) { o->rounds = v; o->pass_mbs = 0; }
    else o->pass_mbs = v;
}

/* Which strategies the rules that compare two plans of one strategy hold for (test_search checks
 * them on every candidate of its clusters). Recomputation: tawpipe's solver picks other rounds
 * and placements when activations are small, so with recomputation it can be faster. One
 * replica: 1F1B with one replica runs each chunk's update in the turn of its last backward,
 * with replicas a turn later, after the all-reduce, which lets the turns in between start sooner
 * (1% faster on dgx-h100): its one pipeline is no bound. */
int search_rule_holds(const char *strategy, int rule) {
    /* recomputation is never faster for the weight-passing strategies but tawpipe; with the costs
     * per class of work the simulator finds it faster for 1F1B on two 10 GbE clusters of
     * test_search (9.07 s against 9.91 s on 2x8 A800), so 1F1B's candidates with it are
     * simulated too; why is not understood yet */
    if (rule == PRUNE_DOMINATED) return shape_of(strategy) == SHAPE_WEIGHT_PASSING && strcmp(strategy, "tawpipe");
    if (rule == RULE_ONE_REPLICA) return shape_of(strategy) == SHAPE_WEIGHT_PASSING;
    return 1;
}

/* The chunk count a candidate runs with: its option, or the strategy's default (ir: ranks of the
 * pipeline, no more than the layers; fsdp one per layer). 0 where it does not know. */
static int chunk_count(const char *s, const WpConfig *m, int npipe, int option) {
    if (option) return option;
    if (!strcmp(s, "fsdp")) return m->layers;
    if (shape_of(s) != SHAPE_OTHER) return npipe < m->layers ? npipe : m->layers;
    return 0;
}

/* Chunk i of C as evenly cut as the strategies cut them: its layer count is L/C or one more, so
 * a chunk of L/C layers is the lightest. */
static WpChunk light_chunk(const WpConfig *m, int C, int index) {
    return wp_chunk_make(m, index, 0, m->layers / C, index == 0, index == C - 1);
}

static double params_total(const WpConfig *m) {
    WpChunk k = wp_chunk_make(m, 0, 0, m->layers, 1, 1);
    return (double)k.nparams;
}

static double device_mem_max(const Topology *t) {
    double x = 0;
    for (int i = 0; i < t->ntypes; i++)
        if (t->types[i].mem_bytes > x) x = t->types[i].mem_bytes;
    return x;
}

double search_mem_bound(const char *strategy, const Topology *topo, const WpConfig *model, const StrategyOpts *o) {
    int P = topo->ndevices, R = o->replicas > 0 ? o->replicas : 1, npipe = P / R;
    WpDtype prec = o->precision;
    /* the masters: fp32 weights, AdamW's m and v, and a working copy when the precision is not fp32 */
    double per_param = 12 + (prec != WP_FP32 ? (double)wp_dtype_bytes(prec) : 0);
    double masters = params_total(model) * per_param / npipe;
    StrategyShape sh = shape_of(strategy);
    int C = chunk_count(strategy, model, npipe, o->chunks);
    if (sh == SHAPE_OTHER || C < 1 || C > model->layers) return masters;
    WpChunk mid = light_chunk(model, C, C > 2 ? 1 : 0);
    mid.first = 0; mid.last = 0;
    double ws = (double)wp_workspace_bytes(model, &mid, o->recompute, prec);
    if (sh == SHAPE_WEIGHT_PASSING) {
        /* before its first backward of a micro-batch a rank holds its stash of every chunk; with K
         * micro-batches per weight pass (schedules/lib/weipipe.lua), the stashes of the first
         * round's K (counted only where --pass-micro-batches gives K, so the default plans' bounds
         * stay as they were) */
        double acts = 0;
        for (int c = 0; c < C; c++) {
            WpChunk k = light_chunk(model, C, c);
            acts += (double)wp_stash_bytes(model, &k, o->recompute, prec);
        }
        int K = takes_pass_mbs(strategy) && o->pass_mbs > 0 ? (o->pass_mbs < o->micro_batches ? o->pass_mbs : o->micro_batches) : 1;
        return masters + K * acts + ws;
    }
    /* 1F1B: stage 0 runs min(stages, micro-batches) forwards of chunk 0 before its first
     * backward; interleaved with v chunks per stage, Megatron's warm-up of 2 (stages - 1) +
     * (v - 1) stages forwards of a chunk, and one more in flight (schedules/1f1b.lua); and it
     * owns chunk 0's masters */
    double b = masters + ws;
    if (C % npipe == 0) {
        WpChunk k0 = light_chunk(model, C, 0);
        long m = (long)o->micro_batches * npipe, v = C / npipe;
        long warm = v == 1 ? npipe : 2L * (npipe - 1) + (v - 1) * npipe + 1;
        long inflight = warm < m * v ? warm : m * v;
        double s0 = (double)k0.nparams * per_param + inflight * (double)wp_stash_bytes(model, &k0, o->recompute, prec) + ws;
        if (s0 > b) b = s0;
    }
    return b;
}

/* The fastest the simulator computes FLOPs on a device type in a precision (sim/costs.h): the
 * largest of its rates for matrix products and for attention forward and backward, from the
 * defaults table or the calibration. Every FLOP of a chunk is one of those, and the cost model
 * only adds to them (the knee of small products, bytes, overheads), so FLOPs at this rate are a
 * lower bound on the simulated time. */
static double type_flops(const DeviceType *d, WpDtype prec, const Calibration *calib) {
    double c[COST__COUNT];
    calib_coefs(calib, d, prec, c);
    CostRates r = cost_rates_of(c);
    double f = r.mm_flops;
    if (r.attn_fwd_flops > f) f = r.attn_fwd_flops;
    if (r.attn_bwd_flops > f) f = r.attn_bwd_flops;
    return f;
}

double search_time_bound(const char *strategy, const Topology *topo, const WpConfig *model, const StrategyOpts *o,
                         const Calibration *calib) {
    double rate = 0, fastest = 0;   /* the cluster's compute rate, every device busy all the time */
    for (int i = 0; i < topo->nnodes; i++) {
        double f = type_flops(&topo->types[topo->nodes[i].type], o->precision, calib);
        rate += topo->nodes[i].ndevices * f;
        if (f > fastest) fastest = f;
    }
    WpChunk all = wp_chunk_make(model, 0, 0, model->layers, 1, 1);
    double M = (double)o->micro_batches * topo->ndevices;   /* micro-batches per step, all replicas */
    double units = 3 + (o->recompute ? 1 : 0);              /* FWD 1, BWD 2, recomputation +1 */
    double bound = M * units * wp_chunk_fwd_flops(model, &all) / rate;
    int R = o->replicas > 0 ? o->replicas : 1, npipe = topo->ndevices / R;
    int C = chunk_count(strategy, model, npipe, o->chunks);
    if (shape_of(strategy) == SHAPE_ACT_PASSING && C >= npipe && C % npipe == 0 && C <= model->layers) {
        /* 1F1B's fill: the last stage starts once a micro-batch has gone forward through the
         * npipe - 1 chunks before it, then computes its share, m micro-batches through C / npipe
         * chunks; every chunk at least as heavy as the lightest */
        WpChunk k = light_chunk(model, C, C > 2 ? 1 : 0);
        k.first = k.last = 0;
        double tf = wp_chunk_fwd_flops(model, &k) / fastest, m = (double)o->micro_batches * npipe;
        double fill = (npipe - 1) * tf + m * (C / npipe) * units * tf;
        if (fill > bound) bound = fill;
    }
    return bound;
}

/* The cluster of one replica: the first n devices of t (its nodes, the last one cut), sharing
 * t's strings; free with free(out->nodes) only. */
static void topo_prefix(const Topology *t, int n, Topology *out) {
    *out = *t;
    out->nodes = xcalloc((size_t)t->nnodes, sizeof *out->nodes);
    out->nnodes = 0;
    for (int i = 0, d = 0; i < t->nnodes && d < n; i++) {
        Node nd = t->nodes[i];
        if (d + nd.ndevices > n) {   /* a part of a node: its islands cut with it */
            int isl = nd.islands > 0 ? nd.islands : 1;
            nd.islands = (n - d) * isl / nd.ndevices > 0 ? (n - d) * isl / nd.ndevices : 1;
            nd.ndevices = n - d;
        }
        out->nodes[out->nnodes++] = nd;
        d += nd.ndevices;
    }
    out->ndevices = n;
}

/* The lower bound of a candidate with R > 1 replicas from its one pipeline alone: the strategy
 * run with one replica on the first P/R devices, verified and simulated, skips the all-reduce
 * across replicas and the links it shares with them, which can only add time and no memory
 * (test_search checks both on every candidate of small clusters). R times cheaper to build than
 * the candidate. Returns 0 with *fits and *step (step 0: stopped past stop_after), or the
 * strategy's or verifier's refusal. */
int search_one_replica_bound(const Cand *cd, const Topology *topo, const WpConfig *model, const char *name,
                             double stop_after, const Calibration *calib, int *fits, double *step) {
    Topology sub;
    topo_prefix(topo, topo->ndevices / cd->o.replicas, &sub);
    StrategyOpts o = cd->o;
    o.replicas = 1;
    Plan *p = NULL;
    char err[4096];
    int rc = make_plan(cd->strategy, &sub, model, name, &o, &p, err, sizeof err);
    *step = 0;
    if (rc == 0) {
        *fits = plan_fits(p);
        SimOptions so = { .stop_after = stop_after, .calib = calib };
        SimResult s;
        int src = *fits ? sim_run(p, &so, &s, err, sizeof err) : SIM_STOPPED;
        if (src == 0) { *step = s.step_time; sim_result_free(&s); }
        else if (src != SIM_STOPPED) rc = EXIT_REJECTED;
    }
    plan_free(p);
    free(sub.nodes);
    return rc;
}

typedef struct Cand2 {
    int si, R, chunks, rec;
    int k;                  /* search_round_values: weipipe's micro-batches per weight pass or tawpipe's
                               rounds; 0: the strategy's default */
    int var;                /* fsdp: 1 for full-shard (schedules/fsdp.lua), 0 for the default */
    WpDtype prec;
    int order;              /* enumeration order: ties keep it */
    double mem_lb, time_lb, cost;
    int built_fits;         /* -1 not built, 0 built and does not fit, 1 fits */
} Cand2;

static int cand2_cmp(const void *a, const void *b) {
    const Cand2 *x = a, *y = b;
    if (x->time_lb != y->time_lb) return x->time_lb < y->time_lb ? -1 : 1;
    if (x->cost != y->cost) return x->cost < y->cost ? -1 : 1;
    return x->order - y->order;
}

void search_describe(const SearchStats *s, char *out, size_t len) {
    int pruned = 0, n = 0;
    for (int i = 0; i < PRUNE__COUNT; i++) pruned += s->pruned[i];
    n = snprintf(out, len, "%d candidate%s: %d pruned (", s->considered, s->considered == 1 ? "" : "s", pruned);
    int any = 0;
    for (int i = 0; i < PRUNE__COUNT && n < (int)len; i++) {
        if (!s->pruned[i]) continue;
        n += snprintf(out + n, len - n, "%s%d %s", any ? ", " : "", s->pruned[i], prune_names[i]);
        if (i == PRUNE_SLOWER && s->stopped && n < (int)len)
            n += snprintf(out + n, len - n, " [%d stopped mid-simulation]", s->stopped);
        any = 1;
    }
    if (n < (int)len) snprintf(out + n, len - n, "%s), %d simulated, %d fit; %d decided on one replica", any ? "" : "none", s->simulated, s->fits, s->one_replica);
}

static int find_twin(const Cand2 *c, int n, const Cand2 *x) {   /* the same candidate without recomputation */
    for (int i = 0; i < n; i++)
        if (c[i].si == x->si && c[i].R == x->R && c[i].chunks == x->chunks && c[i].prec == x->prec && c[i].var == x->var && c[i].k == x->k && !c[i].rec) return i;
    return -1;
}

int search_run(const Args *a, const Topology *topo, const WpConfig *model, const char *name,
               char names[][64], int ns, int per_strategy, SearchResult *out) {
    memset(out, 0, sizeof *out);
    double t0 = progress_now();
    progress_begin();
    out->nstrategies = ns;
    out->names = xcalloc((size_t)ns, sizeof *out->names);
    for (int i = 0; i < ns; i++) memcpy(out->names[i], names[i], 64);
    out->best = xcalloc((size_t)ns, sizeof *out->best);
    for (int i = 0; i < ns; i++) out->best[i].c.rc = -1;
    out->winner = -1;
    StrategyOpts base = opts_of(a, topo);
    int P = topo->ndevices, L = model->layers;
    /* precision: bf16 where it is the default and not fixed; fp32 then only counted, dominated */
    int try_fp32 = !a->precision && base.precision != WP_FP32;
    int ncap = 64, n = 0;
    Cand2 *c = xcalloc((size_t)ncap, sizeof *c);
    for (int si = 0; si < ns; si++)
        for (int R = 1; R <= P && strcmp(names[si], "auto"); R++) {   /* "auto" is the search itself */
            if (P % R || (a->set_replicas && R != a->replicas)) continue;
            for (int cm = 0; cm < (per_strategy || a->set_chunks ? 1 : 2); cm++) {
                int chunks = a->set_chunks ? a->chunks : cm ? 2 * (P / R) : 0;
                /* fsdp in both its variants, unless one was given */
                int nvar = !strcmp(names[si], "fsdp") && !a->fsdp_variant ? 2 : 1;
                int ks[SEARCH_MAX_ROUND_VALUES], nk = search_round_values(names[si], a->micro_batches, a->pass_mbs, a->rounds, ks, SEARCH_MAX_ROUND_VALUES);
                for (int var = 0; var < nvar; var++)
                for (int ki = 0; ki < nk; ki++)
                for (int rec = a->recompute; rec < 2; rec++)
                    for (int pf = 0; pf <= try_fp32; pf++) {
                        if (n == ncap) c = xrealloc(c, (size_t)(ncap *= 2) * sizeof *c);
                        Cand2 *x = &c[n];
                        *x = (Cand2){ .si = si, .R = R, .chunks = chunks, .rec = rec, .var = var, .k = ks[ki], .order = n, .built_fits = -1,
                                      .prec = pf ? WP_FP32 : base.precision };
                        StrategyOpts o = base;
                        o.replicas = R; o.chunks = chunks; o.recompute = rec; o.precision = x->prec;
                        search_set_round(names[si], &o, x->k);
                        if (var) o.fsdp_variant = "full-shard";
                        if (pf && !a->grad_precision) o.grad_precision = WP_FP32;
                        x->mem_lb = search_mem_bound(names[si], topo, model, &o);
                        x->time_lb = search_time_bound(names[si], topo, model, &o, a->calib);
                        /* what building it costs, for the order among equal bounds: ranks x chunks */
                        int npipe = P / R, C = chunk_count(names[si], model, npipe, chunks);
                        x->cost = (double)(R > 1 && search_rule_holds(names[si], RULE_ONE_REPLICA) ? npipe : P) * (C > 0 ? C : model->layers);
                        n++;
                    }
            }
        }
    qsort(c, (size_t)n, sizeof *c, cand2_cmp);
    SearchStats *st = &out->stats;
    st->considered = n;
    double mem = device_mem_max(topo);
    /* WPGEN_SEARCH_TRACE=1: every candidate's bounds and fate on stderr, one line each */
    const char *tr = getenv("WPGEN_SEARCH_TRACE");
    int trace = tr && tr[0] == '1';
    double tc = 0;
#define DROP(reason) do { \
        st->pruned[reason]++; \
        if (trace) fprintf(stderr, "search: %-20s r%-4d c%-4d k%-3d rc%d %s  mem >= %6.2f GiB, step >= %.4g s: %s (%.2f s)\n", sname, x->R, x->chunks, x->k, \
                           x->rec, wp_dtype_name(x->prec), x->mem_lb / (1 << 30), x->time_lb, prune_names[reason], progress_now() - tc); \
        goto next; \
    } while (0)
    for (int i = 0; i < n; i++) {
        Cand2 *x = &c[i];
        tc = progress_now();
        const char *sname = names[x->si];
        int npipe = P / x->R;
        int C = chunk_count(sname, model, npipe, x->chunks);
        if (C > L || (!strcmp(sname, "1f1b") && npipe > L)) { DROP(PRUNE_IMPOSSIBLE); }
        if (x->prec == WP_FP32 && try_fp32) { DROP(PRUNE_PRECISION); }
        if (x->mem_lb > mem) { DROP(PRUNE_MEMORY); }
        if (x->rec && !a->recompute && search_rule_holds(sname, PRUNE_DOMINATED)) {
            int tw = find_twin(c, n, x);
            if (tw >= 0 && c[tw].built_fits == 1) { DROP(PRUNE_DOMINATED); }
        }
        SearchBest *ref = per_strategy ? &out->best[x->si] : out->winner >= 0 ? &out->best[out->winner] : NULL;
        int have_ref = ref && ref->c.rc == 0;
        if (have_ref && x->time_lb >= ref->c.step * (1 - 1e-9)) { DROP(PRUNE_SLOWER); }
        /* the user's limit: an answer now, with what was not tried said (not a bound: these might win) */
        if (a->search_seconds > 0 && have_ref && progress_now() - t0 > a->search_seconds) { DROP(PRUNE_TIME); }
        progress("search: candidate %d of %d: %s, %d replica%s, %s chunks%s (%d simulated, best %.4g s)", i + 1, n, sname, x->R,
                 x->R > 1 ? "s" : "", x->chunks ? "twice the default" : "default", x->rec ? ", recomputation" : "", st->simulated,
                 out->winner >= 0 ? out->best[out->winner].c.step : 0.0);
        Cand cd = { .o = base };
        cd.o.replicas = x->R; cd.o.chunks = x->chunks; cd.o.recompute = x->rec; cd.o.precision = x->prec;
        search_set_round(sname, &cd.o, x->k);
        if (x->var) cd.o.fsdp_variant = "full-shard";
        snprintf(cd.strategy, sizeof cd.strategy, "%.63s", sname);
        if (x->R > 1 && search_rule_holds(sname, RULE_ONE_REPLICA)) {
            int f1;
            double lb1;
            if (search_one_replica_bound(&cd, topo, model, name, have_ref ? ref->c.step : 0, a->calib, &f1, &lb1)) { DROP(PRUNE_REFUSED); }
            if (!f1) { st->one_replica++; x->built_fits = 0; DROP(PRUNE_NO_FIT); }
            if (have_ref && (lb1 == 0 || lb1 >= ref->c.step * (1 - 1e-9))) { st->one_replica++; DROP(PRUNE_SLOWER); }
        }
        Plan *p = NULL;
        char err[4096];
        cd.rc = make_plan(cd.strategy, topo, model, name, &cd.o, &p, err, sizeof err);
        if (cd.rc) { DROP(PRUNE_REFUSED); }
        cd.fits = plan_fits(p);
        x->built_fits = cd.fits;
        if (!cd.fits) { plan_free(p); DROP(PRUNE_NO_FIT); }
        SimOptions so = { .stop_after = have_ref ? ref->c.step : 0, .calib = a->calib };
        SimResult s;
        int src = sim_run(p, &so, &s, err, sizeof err);
        if (src == SIM_STOPPED) { st->stopped++; plan_free(p); DROP(PRUNE_SLOWER); }
        if (src) { plan_free(p); DROP(PRUNE_REFUSED); }
        st->simulated++;
        st->fits++;
        if (trace) fprintf(stderr, "search: %-20s r%-4d c%-4d k%-3d rc%d %s  mem >= %6.2f GiB, step >= %.4g s: simulated, %.4g s (%.2f s)\n", sname, x->R,
                           x->chunks, x->k, x->rec, wp_dtype_name(x->prec), x->mem_lb / (1 << 30), x->time_lb, s.step_time, progress_now() - tc);
        cd.step = s.step_time; cd.tps = s.tokens_per_s_per_device; cd.bubble = s.bubble_ratio;
        SearchBest *b = &out->best[x->si];
        if (b->c.rc != 0 || cand_better(&cd, &b->c)) {
            if (b->plan) { plan_free(b->plan); sim_result_free(&b->sim); }
            b->c = cd; b->plan = p; b->sim = s; b->mem_bound = x->mem_lb; b->time_bound = x->time_lb;
            if (out->winner < 0 || cand_better(&cd, &out->best[out->winner].c)) out->winner = x->si;
            if (!per_strategy)   /* only the winner's plan is wanted: the others' figures stay */
                for (int k = 0; k < ns; k++)
                    if (k != out->winner && out->best[k].plan) {
                        plan_free(out->best[k].plan); out->best[k].plan = NULL;
                        sim_result_free(&out->best[k].sim);
                    }
        } else {
            plan_free(p);
            sim_result_free(&s);
        }
    next:;
    }
#undef DROP
    free(c);
    progress_end();
    st->seconds = progress_now() - t0;
    return 0;
}

void search_free(SearchResult *r) {
    for (int i = 0; i < r->nstrategies; i++)
        if (r->best[i].plan) { plan_free(r->best[i].plan); sim_result_free(&r->best[i].sim); }
    free(r->best); free(r->names);
    memset(r, 0, sizeof *r);
}
