/* Bytes a verified plan moves in one step, split into traffic inside nodes and traffic that
 * crosses the network: every send once, every collective call once as NCCL's ring algorithms
 * move it (sim/collective.h, the simulator's own model); each at the format what it carries moves
 * in (plan_carried_bytes: weights and activations at the plan's precision, gradients at its
 * grad_precision). */
#include "ir/plan.h"
#include "ir/op_table.h"
#include "sim/collective.h"

static void add_edge(const Plan *p, int a, int b, double bytes, double *intra, double *inter) {
    if (p->ranks[a].node == p->ranks[b].node) *intra += bytes;
    else *inter += bytes;
}

double plan_cp_traffic(const Plan *p) {
    int C = wp_cp(&p->model);
    double n = 0;
    if (C == 1) return 0;
    for (int r = 0; r < p->nranks; r++) {
        const PlanRank *rk = &p->ranks[r];
        for (int i = 0; i < rk->nops; i++) {
            const Op *op = &rk->ops[i];
            const OpInfo *in = op_info(op->kind);
            if (op->kind == OP_RING) n += C * (double)op_ring_bytes(op);   /* every member's ring */
            int what = plan_op_carries(p, r, op);
            if (what != WHAT_W && what != WHAT_D) continue;
            /* a transfer once (at its sender), a collective once per member group */
            if (in->p2p == P2P_SEND || in->coll)
                n += C * plan_cp_gather_bytes(p, (double)plan_carried_bytes(p, what, rk->notes[i].chunk, rk->notes[i].nshards));
        }
    }
    return n;
}

void plan_traffic(const Plan *p, double *intra, double *inter) {
    *intra = *inter = 0;
    for (int r = 0; r < p->nranks; r++) {
        const PlanRank *rk = &p->ranks[r];
        for (int i = 0; i < rk->nops; i++) {
            const Op *op = &rk->ops[i];
            const OpNote *note = &rk->notes[i];
            const OpInfo *in = op_info(op->kind);
            if (in->p2p == P2P_SEND) {
                double bytes = (double)plan_carried_bytes(p, op->what, note->chunk, note->nshards);
                add_edge(p, r, op->peer, bytes, intra, inter);
                continue;
            }
            if (!in->coll) continue;
            const PlanGroup *g = &p->groups[op->group];
            /* Count each call once: at its root, or at the group's first member. */
            if ((in->root ? op->peer : g->ranks[0]) != r) continue;
            double bytes = (double)plan_carried_bytes(p, plan_op_carries(p, r, op), note->chunk, note->nshards);
            int root = 0;
            if (in->root) while (g->ranks[root] != op->peer) root++;
            /* all-gather, reduce-scatter: the note is of the whole chunk */
            CollShape cs = coll_shape(in->coll, g->n, root, bytes);
            for (int h = 0; h < cs.nedges; h++) {
                int a, b;
                coll_edge(&cs, g->n, h, &a, &b);
                add_edge(p, g->ranks[a], g->ranks[b], cs.edge_bytes, intra, inter);
            }
        }
    }
    *intra += plan_cp_traffic(p);
}
