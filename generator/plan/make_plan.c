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
