/* A strategy run into a verified plan (make_plan.h). A context-parallel plan (--context-parallel
 * C) is planned over the groups: the strategy sees a topology of groups (topology_groups) and a
 * model whose sizes are one member's share of each micro-batch (WpConfig.cp), and knows nothing
 * else of it; docs/context-parallel.md says what each group operation stands for. The ring
 * attention's K/V blocks are added after the strategy, one RING before each FWD, BWD and BWD_B
 * (plan_add_rings), and verified with the plan. */
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
    /* the ring attention each compute of a group needs, as RINGs beside it: the C core's, so that
     * no strategy knows of it, and the verifier proves them as the rest */
    if (plan_add_rings(*out, err, errlen)) { plan_free(*out); *out = NULL; return EXIT_BAD_PLAN_INPUT; }
    char e2[4096];
    if (plan_verify(*out, e2, sizeof e2)) {
        snprintf(err, errlen, "plan rejected: %.4000s", e2);
        plan_free(*out); *out = NULL;
        return EXIT_REJECTED_PLAN;
    }
    return 0;
}

size_t plan_node_host(const Plan *p, int node) {
    size_t n = 0;
    for (int r = 0; r < p->nranks; r++)
        if (p->ranks[r].node == node) n += p->ranks[r].mem.host;
    return n;
}

int plan_host_node(const Plan *p) {
    int best = 0;
    for (int i = 1; i < p->topo->nnodes; i++)
        if (plan_node_host(p, i) > plan_node_host(p, best)) best = i;
    return best;
}

void plan_misfit(const Plan *p, char *out, size_t len) {
    const Topology *t = p->topo;
    int n = plan_host_node(p);
    if ((double)plan_node_host(p, n) > t->nodes[n].host_mem)
        snprintf(out, len, "node %s keeps %zu bytes of offloaded stashes in host memory of %.0f (nodes[%d].host_mem_gb)",
                 t->nodes[n].name, plan_node_host(p, n), t->nodes[n].host_mem, n);
    else snprintf(out, len, "rank %d needs %zu bytes", p->peak_rank, p->peak_mem);
}

int plan_fits(const Plan *p) {
    const Topology *t = p->topo;
    for (int r = 0; r < p->nranks; r++)
        if ((double)p->ranks[r].peak_mem > t->types[t->nodes[p->ranks[r].node].type].mem_bytes) return 0;
    for (int i = 0; i < t->nnodes; i++)
        if ((double)plan_node_host(p, i) > t->nodes[i].host_mem) return 0;
    return 1;
}
