/* Bytes a verified plan moves in one step, split into traffic inside nodes and traffic that
 * crosses the network. Collectives are counted as NCCL's ring algorithms move them: a broadcast
 * or reduce is a chain of n-1 hops from the root, each carrying the whole buffer; all-reduce moves
 * 2(n-1)/n of it over each of the ring's n edges, all-gather and reduce-scatter (n-1)/n. */
#include "ir/plan.h"

static size_t carried_bytes(const Plan *p, const OpNote *n) {
    if (n->chunk < 0) return 0;
    size_t floats = plan_chunk_bytes(p, n->chunk) / sizeof(float);
    int shards = n->nshards ? n->nshards : 1;
    return (floats / shards + (floats % shards != 0)) * sizeof(float);
}

static void add_edge(const Plan *p, int a, int b, double bytes, double *intra, double *inter) {
    if (p->ranks[a].node == p->ranks[b].node) *intra += bytes;
    else *inter += bytes;
}

void plan_traffic(const Plan *p, double *intra, double *inter) {
    *intra = *inter = 0;
    for (int r = 0; r < p->nranks; r++) {
        const PlanRank *rk = &p->ranks[r];
        for (int i = 0; i < rk->nops; i++) {
            const Op *op = &rk->ops[i];
            const OpNote *note = &rk->notes[i];
            if (op->kind == OP_SEND) {
                double bytes = op->what == WHAT_A || op->what == WHAT_G ? (double)plan_act_bytes(p) : (double)carried_bytes(p, note);
                add_edge(p, r, op->peer, bytes, intra, inter);
                continue;
            }
            if (op->kind < OP_BCAST || op->kind > OP_REDUCE_SCATTER) continue;
            const PlanGroup *g = &p->groups[op->group];
            /* Count each call once: at its root, or at the group's first member. */
            int counter = op->kind == OP_BCAST || op->kind == OP_REDUCE ? op->peer : g->ranks[0];
            if (counter != r || g->n < 2) continue;
            int n = g->n;
            double whole = (double)carried_bytes(p, note);   /* all-gather, reduce-scatter: the whole chunk */
            if (op->kind == OP_BCAST || op->kind == OP_REDUCE) {
                int root = 0;
                while (g->ranks[root] != op->peer) root++;
                for (int h = 0; h < n - 1; h++)
                    add_edge(p, g->ranks[(root + h) % n], g->ranks[(root + h + 1) % n], whole, intra, inter);
            } else {
                double per_edge = op->kind == OP_ALLREDUCE ? 2.0 * (n - 1) / n * whole : (double)(n - 1) / n * whole;
                for (int h = 0; h < n; h++)
                    add_edge(p, g->ranks[h], g->ranks[(h + 1) % n], per_edge, intra, inter);
            }
        }
    }
}
