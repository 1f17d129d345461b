/* `-s auto`: every shipped strategy with its parameters planned, verified and simulated; the
 * fastest plan that fits wins. Also the list of shipped strategies compare runs. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include "cli/cli.h"
#include "cli/search.h"

int shipped_strategies(char names[][64], int max) {
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

int cand_better(const Cand *x, const Cand *y) {   /* x strictly better than y */
    if (x->rc || !x->fits) return 0;
    if (y->rc || !y->fits) return 1;
    return x->step < y->step * (1 - 1e-9);
}

/* -s auto: the pruned search (search.c) over every shipped strategy and its parameters; the fastest
 * plan that fits wins. Micro-batches per rank stay as given, so the global batch is the same for
 * all; options given on the command line are kept. Returns 0 and fills *best (and *plan with its
 * verified plan, when plan is not NULL), or EXIT_REJECTED when nothing fits. */
int auto_search(const Args *a, const Topology *topo, const WpConfig *model, const char *name, Cand *best, Plan **plan) {
    char names[32][64];
    int ns = shipped_strategies(names, 32);
    SearchResult sr;
    search_run(a, topo, model, name, names, ns, 0, &sr);
    char counts[400];
    search_describe(&sr.stats, counts, sizeof counts);
    if (sr.winner < 0) {
        fprintf(stderr, "wpgen: auto: no plan fits the device (%s)\n", counts);
        search_free(&sr);
        return EXIT_REJECTED;
    }
    SearchBest *w = &sr.best[sr.winner];
    Cand b = w->c;
    int runner = -1;   /* the best other strategy */
    for (int i = 0; i < ns; i++)
        if (i != sr.winner && sr.best[i].c.rc == 0 && (runner < 0 || cand_better(&sr.best[i].c, &sr.best[runner].c))) runner = i;
    int n = snprintf(b.why, sizeof b.why, "%.4g s/step, the fastest of %d plan%s that fit (%s)", b.step, sr.stats.fits, sr.stats.fits == 1 ? "" : "s", counts);
    if (runner >= 0 && n < (int)sizeof b.why) {
        const Cand *r = &sr.best[runner].c;
        snprintf(b.why + n, sizeof b.why - n, "; the best other strategy simulated, %s (%d replica%s%s), takes %.4g s (+%.0f%%)", r->strategy,
                 r->o.replicas, r->o.replicas > 1 ? "s" : "", r->o.recompute ? ", recomputation" : "", r->step, 100 * (r->step / b.step - 1));
    }
    /* the plan is the caller's now; its simulation is not (search_free frees a best's simulation
     * with its plan: without this, LeakSanitizer found it lost under plan -s auto) */
    if (plan) { *plan = w->plan; w->plan = NULL; sim_result_free(&w->sim); }
    *best = b;
    search_free(&sr);
    return 0;
}
