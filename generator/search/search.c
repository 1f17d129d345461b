/* The pruned search of `-s auto` and `compare` (search.h). The candidate space is every strategy
 * x replicas (each divisor of the ranks: a user runs replicas of shorter pipelines) x chunks (the
 * strategy's default, twice the pipeline's ranks) x recomputation x precision x rounds (the
 * values of each of the strategy's own options that its declaration has the search try: the
 * micro-batches per weight pass, the rounds, a variant ...) x
 * variant, less what the flags fix. Building, verifying and simulating a plan of 1,024 ranks takes
 * a tenth of a second to a second, so a candidate is built only when what can be said of it
 * without building it cannot rule it out:
 *   impossible  more chunks, or activation-passing stages, than the model has layers (the strategies refuse them);
 *   memory      a lower bound on the largest peak of a rank exceeds the device's memory (bounds.c);
 *   fp32        where bf16 is the default (more bytes, half the compute rate, more memory);
 *   dominated   recomputation where the same candidate fits without it (more compute, same plan);
 *               offload (--offload-activations) where it fits without offload (the same plan
 *               with copies added), so offload is tried only where it is needed to fit;
 *   slower      a lower bound on the step time (bounds.c) no better than the best simulated so
 *               far; candidates are tried in the order of that bound, and a simulation is stopped
 *               once its clock passes the best's step time;
 *   one replica a candidate of R > 1 replicas is first run as its one pipeline on its own devices:
 *               if that does not fit, or is no faster than the best, neither is the candidate
 *               (the replicas only add the all-reduce between them).
 * Each bound is below what the verifier and the simulator compute for the plan (test_search
 * checks it on clusters small enough to build everything), so no pruned candidate can beat the
 * chosen one. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "search/search.h"
#include "search/bounds.h"
#include "search/progress.h"
#include "util/xalloc.h"
#include "util/settings.h"

const char *const prune_names[PRUNE__COUNT] = {
    [PRUNE_IMPOSSIBLE] = "impossible", [PRUNE_MEMORY] = "over the memory bound", [PRUNE_PRECISION] = "fp32 (bf16 is faster and smaller)", [PRUNE_DOMINATED] = "recomputation or offload not needed",
    [PRUNE_SLOWER] = "cannot win", [PRUNE_REFUSED] = "refused", [PRUNE_NO_FIT] = "built, do not fit", [PRUNE_TIME] = "not tried (--search-seconds)",
};

int search_option_sets(const char *s, const StrategyOpts *base, const DeclSearchCtx *ctx, StrategyOpts *out, int max) {
    const StrategyDecl *d = strategy_decl(s);
    int n = 1;
    out[0] = *base;
    for (int i = 0; d->ok && i < d->nopts; i++) {
        if (!d->opts[i].searched || opts_get(base, d->opts[i].name)) continue;   /* given: fixed */
        OptVal v[SEARCH_MAX_VALUES];
        int nv = decl_search_values(d, i, ctx, v, SEARCH_MAX_VALUES);
        if (nv < 1) continue;
        int m = n * nv > max ? max / nv : n;   /* the sets so far, each with every value */
        for (int e = m - 1; e >= 0; e--)
            for (int k = nv - 1; k >= 0; k--) {
                out[e * nv + k] = out[e];
                opts_set(&out[e * nv + k], &v[k]);
            }
        n = m * nv;
    }
    return n;
}

/* Which rules that compare two plans of one strategy hold for it: its declared traits
 * recompute_never_faster (PRUNE_DOMINATED) and one_replica_bound (RULE_ONE_REPLICA); test_search
 * checks them on every candidate of its clusters. */
static int rule_holds(const Traits *tr, int rule) {
    if (rule == PRUNE_DOMINATED) return tr->recompute_never_faster;
    if (rule == RULE_ONE_REPLICA) return tr->one_replica_bound;
    return 1;
}

int search_rule_holds(const char *strategy, const StrategyOpts *o, int rule) {
    Traits tr = strategy_traits(strategy, o, 0, 0);
    return rule_holds(&tr, rule);
}

static double device_mem_max(const Topology *t) {
    double x = 0;
    for (int i = 0; i < t->ntypes; i++)
        if (t->types[i].mem_bytes > x) x = t->types[i].mem_bytes;
    return x;
}

/* The search computes the turn-by-turn bounds of pipelines longer than this only when their
 * candidate comes up (the placement solver takes a tenth of a second at 512 ranks). */
#define REFINE_LATER_RANKS 256

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
        else if (src != SIM_STOPPED) rc = EXIT_REJECTED_PLAN;
    }
    plan_free(p);
    free(sub.nodes);
    return rc;
}

typedef struct Cand2 {
    int si, R, chunks, rec;
    int ci;                 /* its context-parallel group size: the ci-th of the search's (CpSpace) */
    int set;                /* its strategy's own options: the set-th of search_option_sets */
    StrategyOpts o;         /* all its options */
    Traits tr;              /* its strategy's traits for them */
    WpDtype prec;
    int order;              /* enumeration order: ties keep it */
    double mem_lb, time_lb, cost;
    int refine;             /* its turn-by-turn bounds are still to compute (long pipelines: when it comes up) */
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

void search_describe_strategy(const SearchBest *b, char *out, size_t len) {
    int n = snprintf(out, len, "%s: %d candidate%s:", b->pruned[PRUNE_TIME] ? "no plan that fits found within --search-seconds" : "OOM: nothing fits",
                     b->considered, b->considered == 1 ? "" : "s");
    for (int i = 0, any = 0; i < PRUNE__COUNT && n < (int)len; i++) {
        if (!b->pruned[i]) continue;
        n += snprintf(out + n, len - n, "%s %d %s", any ? "," : "", b->pruned[i], prune_names[i]);
        any = 1;
    }
}

static int find_twin(const Cand2 *c, int n, const Cand2 *x, int rec) {   /* the same candidate with recompute mode rec */
    for (int i = 0; i < n; i++)
        if (c[i].si == x->si && c[i].ci == x->ci && c[i].R == x->R && c[i].chunks == x->chunks && c[i].prec == x->prec && c[i].set == x->set && c[i].rec == rec) return i;
    return -1;
}

/* The context-parallel group sizes a search tries (docs/context-parallel.md): every C that divides
 * the devices of each node and island and whose 2C divides the sequence (cp_check), 1 first;
 * only the given one where fixed. Each with the topology of its groups and the model of a member,
 * which the strategies' traits and the bounds see (what make_plan gives the strategy). */
enum { CP_MAX = 16 };
typedef struct CpSpace {
    int n, c[CP_MAX];
    Topology groups[CP_MAX];   /* c[i] > 1: its groups (freed by cp_space_free); c[i] == 1: unused */
    WpConfig model[CP_MAX];
} CpSpace;

static void cp_space(const SearchSpec *sp, const Topology *topo, const WpConfig *model, CpSpace *cs) {
    memset(cs, 0, sizeof *cs);
    int most = topo->ndevices;
    for (int i = 0; i < topo->nnodes; i++)
        if (topo->nodes[i].ndevices < most) most = topo->nodes[i].ndevices;
    for (int C = 1; C <= most && cs->n < CP_MAX; C++) {
        int want = sp->fixed_context_parallel ? (sp->base.context_parallel > 1 ? sp->base.context_parallel : 1) : 0;
        if (want && C != want) continue;
        char err[512];
        if (C > 1 && cp_check(topo, model, C, &cs->groups[cs->n], err, sizeof err)) continue;
        cs->model[cs->n] = *model;
        cs->model[cs->n].cp = C;
        cs->c[cs->n++] = C;
    }
}

static void cp_space_free(CpSpace *cs) {
    for (int i = 0; i < cs->n; i++)
        if (cs->c[i] > 1) topology_free(&cs->groups[i]);
}

static const Topology *cp_topo(const CpSpace *cs, int ci, const Topology *topo) { return cs->c[ci] > 1 ? &cs->groups[ci] : topo; }

int search_run(const SearchSpec *sp, const Topology *topo, const WpConfig *model, const char *name,
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
    const StrategyOpts base = sp->base;
    int L = model->layers;
    CpSpace cps;
    cp_space(sp, topo, model, &cps);
    const Topology *const orig = topo;
    const WpConfig *const orig_model = model;
    /* precision: bf16 where it is the default and not fixed; fp32 then only counted, dominated */
    int try_fp32 = !sp->fixed_precision && base.precision != WP_FP32;
    double mem = device_mem_max(topo);
    int ncap = 64, n = 0;
    Cand2 *c = xcalloc((size_t)ncap, sizeof *c);
    StrategyOpts *sets = xcalloc(SEARCH_MAX_SETS, sizeof *sets);
    for (int ci = 0; ci < cps.n; ci++)
    for (int si = 0; si < ns; si++) {
        /* a context-parallel candidate is bounded as make_plan plans it: over its groups */
        const Topology *topo = cp_topo(&cps, ci, orig);
        const WpConfig *model = &cps.model[ci];
        int P = topo->ndevices;
        for (int R = 1; R <= P && strcmp(names[si], "auto"); R++) {   /* "auto" is the search itself */
            if (P % R || (sp->fixed_replicas && R != base.replicas)) continue;
            for (int cm = 0; cm < (sp->fixed_chunks ? 1 : 2); cm++) {
                int chunks = sp->fixed_chunks ? base.chunks : cm ? 2 * (P / R) : 0;
                /* the strategy's own options: the values its declaration has the search try */
                DeclSearchCtx dc = { .micro_batches = base.micro_batches * cps.c[ci], .ranks = P / R, .layers = L, .chunks = chunks };
                int nset = search_option_sets(names[si], &base, &dc, sets, SEARCH_MAX_SETS);
                for (int set = 0; set < nset; set++)
                for (int rec = base.recompute; rec <= WP_RECOMPUTE_OFFLOAD; rec++)   /* config.h's modes */
                    for (int pf = 0; pf <= try_fp32; pf++) {
                        if (n == ncap) c = xrealloc(c, (size_t)(ncap *= 2) * sizeof *c);
                        Cand2 *x = &c[n];
                        *x = (Cand2){ .si = si, .ci = ci, .R = R, .chunks = chunks, .rec = rec, .set = set, .order = n, .built_fits = -1,
                                      .prec = pf ? WP_FP32 : base.precision };
                        StrategyOpts *o = &x->o;
                        *o = sets[set];
                        o->replicas = R; o->chunks = chunks; o->recompute = rec; o->precision = x->prec;
                        o->context_parallel = cps.c[ci];
                        if (pf && !sp->fixed_grad_precision) o->grad_precision = WP_FP32;
                        /* bounded as make_plan plans it: a group runs C times the micro-batches */
                        StrategyOpts ob = *o;
                        ob.micro_batches *= cps.c[ci];
                        x->tr = strategy_traits(names[si], &ob, P, L);
                        x->mem_lb = bound_mem(&x->tr, topo, model, &ob);
                        /* what building it costs, for the order among equal bounds: ranks x chunks */
                        int npipe = P / R, C = bound_chunk_count(&x->tr, model, npipe, chunks);
                        /* the bounds that walk every turn only for what the checks below leave, and for
                         * pipelines longer than REFINE_LATER_RANKS only once the candidate comes up
                         * (their cheaper bounds, by which they are ordered, often rule them out) */
                        int dropped = C > L || (x->prec == WP_FP32 && try_fp32) || x->mem_lb > mem;
                        x->refine = !dropped && npipe > REFINE_LATER_RANKS;
                        x->time_lb = bound_time(&x->tr, topo, model, &ob, sp->calib, dropped || x->refine ? 0 : RING_CELLS_MAX);
                        x->cost = (double)(R > 1 && rule_holds(&x->tr, RULE_ONE_REPLICA) ? npipe : P) * (C > 0 ? C : model->layers);
                        n++;
                    }
            }
        }
    }
    free(sets);
    for (int i = 0; i < n; i++) out->best[c[i].si].considered++;
    qsort(c, (size_t)n, sizeof *c, cand2_cmp);
    SearchStats *st = &out->stats;
    st->considered = n;
    /* WPGEN_SEARCH_TRACE=1: every candidate's bounds and fate on stderr, one line each */
    int trace = wpgen_env_number("WPGEN_SEARCH_TRACE") != 0;
    double tc = 0;
    if (trace) fprintf(stderr, "search: %d candidates bounded in %.2f s\n", n, progress_now() - t0);
#define DROP(reason) do { \
        st->pruned[reason]++; \
        out->best[x->si].pruned[reason]++; \
        if (trace) fprintf(stderr, "search: %-20s r%-4d c%-4d o%-3d rc%d %s  mem >= %6.2f GiB, step >= %.4g s: %s (%.2f s)\n", sname, x->R, x->chunks, x->set, \
                           x->rec, wp_dtype_name(x->prec), x->mem_lb / (1 << 30), x->time_lb, prune_names[reason], progress_now() - tc); \
        goto next; \
    } while (0)
    for (int i = 0; i < n; i++) {
        Cand2 *x = &c[i];
        tc = progress_now();
        const char *sname = names[x->si];
        const Topology *topo = cp_topo(&cps, x->ci, orig);   /* its groups (bounds); make_plan takes orig */
        const WpConfig *model = &cps.model[x->ci];
        int npipe = topo->ndevices / x->R;
        int C = bound_chunk_count(&x->tr, model, npipe, x->chunks);
        if (C > L || (x->tr.stages_need_layers && npipe > L)) { DROP(PRUNE_IMPOSSIBLE); }
        if (x->prec == WP_FP32 && try_fp32) { DROP(PRUNE_PRECISION); }
        if (x->mem_lb > mem) { DROP(PRUNE_MEMORY); }
        if (x->rec == WP_RECOMPUTE && !base.recompute && rule_holds(&x->tr, PRUNE_DOMINATED)) {
            int tw = find_twin(c, n, x, WP_KEEP_ALL);
            if (tw >= 0 && c[tw].built_fits == 1) { DROP(PRUNE_DOMINATED); }
        }
        if (x->rec == WP_RECOMPUTE_OFFLOAD && base.recompute != WP_RECOMPUTE_OFFLOAD) {
            /* tried after its twins (the same time bound, built first): offload only adds copies */
            int t0 = find_twin(c, n, x, WP_KEEP_ALL), t1 = find_twin(c, n, x, WP_RECOMPUTE);
            if ((t0 >= 0 && c[t0].built_fits == 1) || (t1 >= 0 && c[t1].built_fits == 1)) { DROP(PRUNE_DOMINATED); }
        }
        SearchBest *ref = per_strategy ? &out->best[x->si] : out->winner >= 0 ? &out->best[out->winner] : NULL;
        int have_ref = ref && ref->c.rc == 0;
        if (have_ref && x->time_lb >= ref->c.step * (1 - 1e-9)) { DROP(PRUNE_SLOWER); }
        if (x->refine) {
            StrategyOpts ob = x->o;
            ob.micro_batches *= cps.c[x->ci];
            double lb = bound_time(&x->tr, topo, model, &ob, sp->calib, RING_CELLS_MAX);
            if (lb > x->time_lb) x->time_lb = lb;
            x->refine = 0;
            if (have_ref && x->time_lb >= ref->c.step * (1 - 1e-9)) { DROP(PRUNE_SLOWER); }
            if (i + 1 < n && cand2_cmp(&c[i + 1], x) < 0) {   /* behind others now: to its place in the order */
                Cand2 keep = *x;
                int j = i + 1;
                for (; j < n && cand2_cmp(&c[j], &keep) < 0; j++) c[j - 1] = c[j];
                c[j - 1] = keep;
                i--;
                continue;
            }
        }
        /* the user's limit: an answer now, with what was not tried said (not a bound: these might
         * win). It starts once any plan fits, compare's too: a strategy of which nothing fits
         * by then is shown as not tried, rather than searched on past the limit */
        int any_fits = out->winner >= 0 && out->best[out->winner].c.rc == 0;
        if (sp->search_seconds > 0 && any_fits && progress_now() - t0 > sp->search_seconds) { DROP(PRUNE_TIME); }
        progress("search: candidate %d of %d: %s, %d replica%s, %s chunks%s (%d simulated, best %.4g s)", i + 1, n, sname, x->R,
                 x->R > 1 ? "s" : "", x->chunks ? "twice the default" : "default", x->rec == WP_RECOMPUTE_OFFLOAD ? ", recomputation, offload" : x->rec == WP_RECOMPUTE_OFFLOAD ? ", recomputation, offload" : x->rec ? ", recomputation" : "", st->simulated,
                 out->winner >= 0 ? out->best[out->winner].c.step : 0.0);
        Cand cd = { .o = x->o };
        snprintf(cd.strategy, sizeof cd.strategy, "%.63s", sname);
        if (x->R > 1 && rule_holds(&x->tr, RULE_ONE_REPLICA)) {
            int f1;
            double lb1;
            if (search_one_replica_bound(&cd, orig, orig_model, name, have_ref ? ref->c.step : 0, sp->calib, &f1, &lb1)) { DROP(PRUNE_REFUSED); }
            if (!f1) { st->one_replica++; x->built_fits = 0; DROP(PRUNE_NO_FIT); }
            if (have_ref && (lb1 == 0 || lb1 >= ref->c.step * (1 - 1e-9))) { st->one_replica++; DROP(PRUNE_SLOWER); }
        }
        Plan *p = NULL;
        char err[4096];
        cd.rc = make_plan(cd.strategy, orig, orig_model, name, &cd.o, &p, err, sizeof err);
        if (cd.rc) { DROP(PRUNE_REFUSED); }
        cd.fits = plan_fits(p);
        x->built_fits = cd.fits;
        if (!cd.fits) { plan_free(p); DROP(PRUNE_NO_FIT); }
        SimOptions so = { .stop_after = have_ref ? ref->c.step : 0, .calib = sp->calib };
        SimResult s;
        int src = sim_run(p, &so, &s, err, sizeof err);
        if (src == SIM_STOPPED) { st->stopped++; plan_free(p); DROP(PRUNE_SLOWER); }
        if (src) { plan_free(p); DROP(PRUNE_REFUSED); }
        st->simulated++;
        st->fits++;
        if (trace) fprintf(stderr, "search: %-20s r%-4d c%-4d o%-3d rc%d %s  mem >= %6.2f GiB, step >= %.4g s: simulated, %.4g s (%.2f s)\n", sname, x->R,
                           x->chunks, x->set, x->rec, wp_dtype_name(x->prec), x->mem_lb / (1 << 30), x->time_lb, s.step_time, progress_now() - tc);
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
    cp_space_free(&cps);
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

int cand_better(const Cand *x, const Cand *y) {   /* x strictly better than y */
    if (x->rc || !x->fits) return 0;
    if (y->rc || !y->fits) return 1;
    return x->step < y->step * (1 - 1e-9);
}
