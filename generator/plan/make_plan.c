/* A strategy run into a verified plan (make_plan.h). A context-parallel plan (--context-parallel
 * C) is planned over the groups: the strategy sees a topology of groups (topology_groups) and a
 * model whose sizes are one member's share of each micro-batch (WpConfig.cp), and knows nothing
 * else of it; docs/context-parallel.md says what each group operation stands for. */
#include <stdio.h>
#include <stdlib.h>
#include "plan/make_plan.h"

int cp_check(const Topology *topo, const WpConfig *model, int C, Topology *groups, char *err, size_t errlen) {
    if (topology_groups(topo, C, groups, err, errlen)) return EXIT_BAD_PLAN_INPUT;
    if (model->seq % (2 * C) != 0) {
        snprintf(err, errlen, "--context-parallel %d: the sequence (--seq %d) does not split into 2C = %d equal chunks (the balanced causal layout: rank i of C holds chunks i and 2C-1-i); --seq must be a multiple of %d",
                 C, model->seq, 2 * C, 2 * C);
        topology_free(groups);
        return EXIT_BAD_PLAN_INPUT;
    }
    return 0;
}

int make_plan(const char *strategy, const Topology *topo, const WpConfig *model, const char *name,
              const StrategyOpts *o, Plan **out, char *err, size_t errlen) {
    *out = NULL;
    int C = o->context_parallel > 1 ? o->context_parallel : 1;
    Topology *groups = NULL;
    WpConfig m = *model;
    m.cp = C;
    StrategyOpts og = *o;
    if (C > 1) {
        /* the step's batch stays the devices' (--micro-batches per device): a group of C runs C
         * times as many micro-batches, each of them shared by its members (so plans of every C
         * compare step for step) */
        og.micro_batches = o->micro_batches * C;
        o = &og;
        groups = calloc(1, sizeof *groups);
        if (!groups) { snprintf(err, errlen, "out of memory"); return EXIT_BAD_PLAN_INPUT; }
        if (cp_check(topo, model, C, groups, err, errlen)) { free(groups); return EXIT_BAD_PLAN_INPUT; }
        topo = groups;
    }
    if (strategy_run(strategy, topo, &m, name, o, out, err, errlen)) {
        plan_free(*out); *out = NULL;
        if (groups) { topology_free(groups); free(groups); }
        return EXIT_BAD_PLAN_INPUT;
    }
    (*out)->own_topo = groups;
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
