/* The sizes of a plan, in one place: a chunk's parameters and their shards, what a transfer
 * carries and in which format (the plan's precision and grad_precision, ir/plan.h), the memory a
 * buffer takes, and a rank's workspace. The byte counts of the verifier (peak memory), the
 * traffic count and the simulator all come from here; the model's own sizes (stash, workspace
 * parts) from runtime/common/config.c. */
#include <stdlib.h>
#include "ir/plan.h"
#include "ir/op_table.h"

static WpChunk chunk_of(const Plan *p, int chunk) {
    const PlanChunk *c = &p->chunks[chunk];
    return wp_chunk_make(&p->model, chunk, c->layer0, c->nlayers, chunk == 0, chunk == p->nchunks - 1);
}

size_t plan_chunk_params(const Plan *p, int chunk) {
    return chunk_of(p, chunk).nparams;
}

size_t plan_chunk_bytes(const Plan *p, int chunk) {
    return plan_chunk_params(p, chunk) * sizeof(float);
}

size_t shard_elems(size_t n, int nshards) {
    if (nshards < 1) nshards = 1;
    return n / (size_t)nshards + (n % (size_t)nshards != 0);
}

size_t shard_bytes(size_t whole, int nshards) {
    return shard_elems(whole / sizeof(float), nshards) * sizeof(float);
}

size_t plan_shard_elems(const Plan *p, int chunk, int nshards) {
    return chunk < 0 ? 0 : shard_elems(plan_chunk_params(p, chunk), nshards);
}

size_t plan_act_bytes(const Plan *p) {
    return (size_t)p->model.mbs * p->model.seq * p->model.hidden * wp_dtype_bytes(p->precision);
}

int plan_op_carries(const Plan *p, int rank, const Op *op) {
    switch (op_info(op->kind)->carries) {
    case CARRY_WHAT: return op->what;
    case CARRY_W: return WHAT_W;
    case CARRY_D: return WHAT_D;
    case CARRY_ANY: return op->buf >= 0 && p->ranks[rank].bufs[op->buf].kind == BUF_D ? WHAT_D : WHAT_W;
    default: return WHAT_NONE;
    }
}

WpDtype plan_carried_dtype(const Plan *p, int what) {
    if (what == WHAT_D) return p->grad_precision;
    return what == WHAT_W && p->weight_wire_fp32 ? WP_FP32 : p->precision;
}

size_t plan_carried_bytes(const Plan *p, int what, int chunk, int nshards) {
    size_t n = what == WHAT_A || what == WHAT_G ? (size_t)p->model.mbs * p->model.seq * p->model.hidden
                                                : plan_shard_elems(p, chunk, nshards);
    return n * wp_dtype_bytes(plan_carried_dtype(p, what));
}

size_t plan_buf_mem(const PlanBuf *b, PlanMem *m) {
    size_t n = b->bytes;
    if (b->kind == BUF_D) m->grads += b->bytes;
    else if (!b->master) m->weights += b->bytes;
    else {
        size_t state = 2 * b->elems * sizeof(float);   /* AdamW's m and v */
        size_t copy = plan_buf_has_copy(b) ? b->elems * wp_dtype_bytes((WpDtype)b->copy_dtype) : 0;
        m->masters += b->bytes + state;
        m->weights += copy;
        n += state + copy;
    }
    return n;
}

size_t plan_mem_total(const PlanMem *m) {
    return m->weights + m->grads + m->masters + m->acts + m->workspace;
}

size_t plan_rank_xfer_bytes(const Plan *p, int rank, size_t align) {
    const PlanRank *rk = &p->ranks[rank];
    uint8_t *moves = calloc((size_t)rk->nbufs + 1, 1);
    if (!moves) return SIZE_MAX;   /* out of memory: a bound that cannot be met says so at start */
    for (int i = 0; i < rk->nops; i++) {
        const Op *op = &rk->ops[i];
        int what = plan_op_carries(p, rank, op);
        if (what != WHAT_W && what != WHAT_D) continue;
        if (op->buf >= 0) moves[op->buf] = 1;
        if (op->buf2 >= 0) moves[op->buf2] = 1;   /* allgather's whole, reduce-scatter's shard */
    }
    size_t n = 0;
    for (int b = 0; b < rk->nbufs; b++) {
        const PlanBuf *pb = &rk->bufs[b];
        WpDtype carried = plan_carried_dtype(p, pb->kind == BUF_D ? WHAT_D : WHAT_W);
        int working = pb->master ? pb->copy_dtype : pb->dtype;
        if (!moves[b] || working == (int)carried) continue;
        size_t bytes = pb->elems * wp_dtype_bytes(carried);
        n += (bytes + align - 1) / align * align;
    }
    free(moves);
    return n;
}

size_t plan_grad_stage_bytes(const Plan *p, int rank) {
    const PlanRank *rk = &p->ranks[rank];
    int bf16_grads = 0;
    for (int b = 0; b < rk->nbufs; b++) bf16_grads |= rk->bufs[b].kind == BUF_D && rk->bufs[b].dtype == WP_BF16;
    if (!bf16_grads) return 0;
    size_t most = 0;
    for (int c = 0; c < p->nchunks; c++)
        if (plan_chunk_params(p, c) > most) most = plan_chunk_params(p, c);
    return most * sizeof(float);
}

size_t plan_workspace_bytes(const Plan *p, const uint8_t *computes) {
    size_t n = 0;
    for (int part = 0; part < WP_WS_NPARTS; part++) {
        size_t most = 0;
        for (int c = 0; c < p->nchunks; c++) {
            if (computes && !computes[c]) continue;
            WpChunk k = chunk_of(p, c);
            size_t b = wp_workspace_part_bytes(&p->model, &k, p->recompute, (WpWorkspacePart)part, p->precision);
            if (b > most) most = b;
        }
        n += most;
    }
    return n;
}
