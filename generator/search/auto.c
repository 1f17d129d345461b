/* `-s auto`: every shipped strategy with its parameters planned, verified and simulated; the
 * fastest plan that fits wins. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "search/search.h"
#include "cost/trust.h"

/* -s auto: the pruned search (search.c) over every shipped strategy and its parameters; the fastest
 * plan that fits wins. Micro-batches per rank stay as given, so the global batch is the same for
 * all; options given on the command line are kept. Returns 0 and fills *best (and *plan with its
 * verified plan, when plan is not NULL), or EXIT_REJECTED when nothing fits. */
int search_strategy_list(const char *list, char names[][64], int max) {
    if (!list) return shipped_strategies(names, max);
    int n = 0;
    for (const char *s = list; *s && n < max;) {
        size_t l = strcspn(s, ",");
        if (l == 0 || l >= 64) return -1;
        memcpy(names[n], s, l);
        names[n++][l] = 0;
        s += l + (s[l] == ',');
    }
    return n;
}

int auto_search(const SearchSpec *sp, const Topology *topo, const WpConfig *model, const char *name, Cand *best, Plan **plan) {
    char names[64][64];
    int ns = search_strategy_list(sp->strategies, names, 64);
    if (ns < 0) { fprintf(stderr, "wpgen: --strategies: expected names separated by commas, got \"%s\"\n", sp->strategies); return EXIT_BAD_PLAN_INPUT; }
    for (int i = 0; i < ns; i++) {   /* a name that is no strategy is a typo, not a candidate refused */
        char path[4200], err[2600];
        if (strategy_resolve(names[i], path, sizeof path) == 0) continue;
        strategy_missing(names[i], path, err, sizeof err);
        fprintf(stderr, "wpgen: --strategies: %s\n", err);
        return EXIT_BAD_PLAN_INPUT;
    }
    SearchResult sr;
    search_run(sp, topo, model, name, names, ns, 0, &sr);
    char counts[400];
    search_describe(&sr.stats, counts, sizeof counts);
    if (sr.winner < 0) {
        fprintf(stderr, "wpgen: auto: no plan fits the device (%s)\n", counts);
        search_free(&sr);
        return EXIT_REJECTED_PLAN;
    }
    SearchBest *w = &sr.best[sr.winner];
    Cand b = w->c;
    int runner = -1;   /* the best other strategy */
    for (int i = 0; i < ns; i++)
        if (i != sr.winner && sr.best[i].c.rc == 0 && (runner < 0 || cand_better(&sr.best[i].c, &sr.best[runner].c))) runner = i;
    int n = snprintf(b.why, sizeof b.why, "%.4g s/step, the fastest of %d plan%s that fit (%s)", b.step, sr.stats.fits, sr.stats.fits == 1 ? "" : "s", counts);
    if (runner >= 0 && n < (int)sizeof b.why) {
        const Cand *r = &sr.best[runner].c;
        snprintf(b.why + n, sizeof b.why - n, "; the best other strategy simulated, %s (%d replica%s%s), takes %.4g s (+%.0f%%%s)", r->strategy,
                 r->o.replicas, r->o.replicas > 1 ? "s" : "", r->o.recompute == WP_RECOMPUTE_OFFLOAD ? ", recomputation, offload" : r->o.recompute ? ", recomputation" : "", r->step, 100 * (r->step / b.step - 1),
                 trust_ties(r->step, b.step) ? ": a tie, within the error band" : "");
    }
    /* the plan is the caller's now; its simulation is not (search_free frees a best's simulation
     * with its plan: without this, LeakSanitizer found it lost under plan -s auto) */
    if (plan) { *plan = w->plan; w->plan = NULL; sim_result_free(&w->sim); }
    *best = b;
    search_free(&sr);
    return 0;
}
