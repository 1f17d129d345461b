/* A strategy run into a verified plan (make_plan.h). */
#include <stdio.h>
#include "plan/make_plan.h"

int make_plan(const char *strategy, const Topology *topo, const WpConfig *model, const char *name,
              const StrategyOpts *o, Plan **out, char *err, size_t errlen) {
    *out = NULL;
    if (strategy_run(strategy, topo, model, name, o, out, err, errlen)) { plan_free(*out); *out = NULL; return EXIT_BAD_PLAN_INPUT; }
    char e2[4096];
    if (plan_verify(*out, e2, sizeof e2)) {
        snprintf(err, errlen, "plan rejected: %.4000s", e2);
        plan_free(*out); *out = NULL;
        return EXIT_REJECTED_PLAN;
    }
    return 0;
}

int plan_fits(const Plan *p) {
    for (int r = 0; r < p->nranks; r++) {
        const Topology *t = p->topo;
        if ((double)p->ranks[r].peak_mem > t->types[t->nodes[p->ranks[r].node].type].mem_bytes) return 0;
    }
    return 1;
}
