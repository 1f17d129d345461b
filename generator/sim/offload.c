/* What activation offload (--offload-activations, config.h's WP_RECOMPUTE_OFFLOAD) adds to a
 * compute operation's time: the copies of its stash between the device and host memory over the
 * device's host link (topology's host_GBps), overlapped with the compute as the runtime does it
 * (runtime/cpu/model.c, "offload"). The forward copies each layer's input out once that layer has
 * run, while the next computes; a backward (or BWD_B) copies each back one layer ahead, while
 * the layer before it computes. So of a chunk's n copies, the last out and the first in have no
 * compute beside them and are exposed whole; each other one is exposed by what it takes beyond
 * one piece of the compute (the operation's time over its layers, the LM head one more). The
 * last chunk's head part (its input, rstd and log-sum-exp) is one more copy. The split
 * backward's BWD_B copies every input back into the keep's rebuilt stash on the compute stream,
 * hiding none; BWD_W reads the B-to-W keep, which stays on the device: no copy. The link is the device's own: transfers to
 * other ranks do not share it (a PCIe switch that the NICs share is not modelled). */
#include "sim/sim.h"
#include "ir/op_table.h"

double sim_offload_exposed(const Plan *p, const Topology *t, int rank, const Op *op, double compute_s) {
    if (p->recompute != WP_RECOMPUTE_OFFLOAD || (op->kind != OP_FWD && op->kind != OP_BWD && op->kind != OP_BWD_B))
        return 0;
    const PlanChunk *c = &p->chunks[op->chunk];
    int last = op->chunk == p->nchunks - 1;
    double bw = t->types[t->nodes[p->ranks[rank].node].type].host_bw;
    double T = (double)wp_rank_tokens(&p->model), x = T * p->model.hidden * wp_dtype_bytes(p->precision) / bw;
    double head = x + 2 * T * sizeof(float) / bw;
    /* the copies in the order they run, and the compute each can hide behind */
    int n = c->nlayers + (last || c->nlayers == 0);
    double piece = op->kind == OP_BWD_B ? 0 : compute_s / n, exposed = 0;
    for (int i = 0; i < n; i++) {
        double copy = last && i == n - 1 ? head : x;   /* the head's part: last out, first in */
        exposed += i == n - 1 ? copy : copy > piece ? copy - piece : 0;
    }
    return exposed;
}
