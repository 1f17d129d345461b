/* The operations an emitted step calls (runtime/common/step.h), for the CPU compute backend:
 * compute through the model's chunk functions on host fp32 buffers, transfers and collectives
 * through the communication layer (common/comm.h) on the same buffers, and the bookkeeping of
 * activations between them. The plan verifier has proved the step: every buffer
 * holds what an operation expects, so nothing here re-checks it, except what costs nothing
 * (an activation that is not where the plan says aborts with the operation's name). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "cpu/compute_cpu.h"

/* ---- activations held between operations ---- */

/* Storage is recycled: after the first step every allocation finds a released block of its size. */
static float *block_get(WpRank *R, size_t n) {
    WpCompute *D = R->dev;
    for (int i = 0; i < D->nfree; i++)
        if (D->free[i].n == n) {
            float *p = D->free[i].p;
            D->free[i] = D->free[--D->nfree];
            return p;
        }
    return rank_realloc(R, NULL, n * sizeof(float), "activations");
}

static void block_put(WpRank *R, float *p, size_t n) {
    WpCompute *D = R->dev;
    if (D->nfree == D->capfree) {
        D->capfree = D->capfree ? 2 * D->capfree : 16;
        D->free = rank_realloc(R, D->free, (size_t)D->capfree * sizeof *D->free, "activation blocks");
    }
    D->free[D->nfree++] = (Block){ p, n };
}

static float *slot_new(WpRank *R, int kind, int chunk, int mb, size_t n) {
    WpCompute *D = R->dev;
    if (D->nslots == D->capslots) {
        D->capslots = D->capslots ? 2 * D->capslots : 32;
        D->slots = rank_realloc(R, D->slots, (size_t)D->capslots * sizeof *D->slots, "activation slots");
    }
    float *p = block_get(R, n);
    D->slots[D->nslots++] = (Slot){ kind, chunk, mb, p, n };
    return p;
}

static int slot_find(const WpCompute *D, int kind, int chunk, int mb) {
    for (int i = D->nslots - 1; i >= 0; i--)
        if (D->slots[i].kind == kind && D->slots[i].chunk == chunk && D->slots[i].mb == mb) return i;
    return -1;
}

static const char *const slot_names[] = { "activation", "activation gradient", "stash" };

/* aborts if missing */
static float *slot_get(WpRank *R, int kind, int chunk, int mb) {
    int i = slot_find(R->dev, kind, chunk, mb);
    if (i < 0) comm_abort(R->comm, 1, "turn %d: the %s of chunk %d for micro-batch %d is not here", R->turn,
                          slot_names[kind], chunk, mb);
    return R->dev->slots[i].p;
}

static void slot_release(WpRank *R, int kind, int chunk, int mb) {
    WpCompute *D = R->dev;
    int i = slot_find(D, kind, chunk, mb);
    if (i < 0) return;
    block_put(R, D->slots[i].p, D->slots[i].n);
    D->slots[i] = D->slots[--D->nslots];
}

/* ---- sizes ---- */

static size_t act_floats(const WpRank *R) {
    return (size_t)R->cfg.mbs * R->cfg.seq * R->cfg.hidden;
}

static CommInfo info(WpRank *R, char *label, size_t len, const char *fmt, int a) {
    snprintf(label, len, fmt, a);
    return (CommInfo){ R->turn, label };
}

/* ---- turns ---- */

void wp_turn_begin(WpRank *R, int turn) {
    R->turn = turn;
}

/* The CPU backend has nothing to do between posting and computing: posting started the
 * transfers. (A GPU backend orders its streams here.) */
void wp_turn_compute(WpRank *R) {
    (void)R;
}

void wp_turn_wait(WpRank *R) {
    comm_wait_turn(R->comm);
    /* what this turn sent has left: activations sent on are no longer ours */
    WpCompute *D = R->dev;
    for (int i = 0; i < D->nrelease; i += 3) slot_release(R, D->release[i], D->release[i + 1], D->release[i + 2]);
    D->nrelease = 0;
}

void wp_turn_end(WpRank *R) {
    (void)R;
}

/* ---- compute ---- */

static void read_batch(WpRank *R, int mb) {
    const WpPlanDesc *P = R->plan;
    data_read_batch(R->data, R->step, mb, P->total_mbs, R->cfg.mbs, R->cfg.seq, R->dev->tokens, R->dev->targets);
}

void wp_fwd(WpRank *R, int chunk, int mb, int w) {
    const WpChunk *k = &R->chunks[chunk];
    double t0 = comm_now(R->comm);
    if (k->first || k->last) read_batch(R, mb);
    float *x_in = k->first ? NULL : slot_get(R, SLOT_ACT, chunk, mb);
    float *stash = slot_new(R, SLOT_STASH, chunk, mb, wp_stash_floats(&R->cfg, k, R->recompute));
    float *x_out = k->last ? NULL : slot_new(R, SLOT_ACT, chunk + 1, mb, act_floats(R));
    WpCompute *D = R->dev;
    wp_chunk_forward(&R->cfg, k, D->buf[w], D->tokens, D->targets, x_in, x_out, stash, R->recompute, D->scratch,
                     &R->loss_sum);
    if (!k->first) slot_release(R, SLOT_ACT, chunk, mb);   /* the stash kept a copy */
    if (R->tracing) {
        char name[40];
        snprintf(name, sizeof name, "F%d mb%d", chunk, mb);
        trace_event(R, "forward", name, t0, comm_now(R->comm));
    }
}

static void backward(WpRank *R, int chunk, int mb, int w, int d, int first) {
    const WpChunk *k = &R->chunks[chunk];
    double t0 = comm_now(R->comm);
    if (k->first || k->last) read_batch(R, mb);
    float *stash = slot_get(R, SLOT_STASH, chunk, mb);
    float *dy = k->last ? NULL : slot_get(R, SLOT_GRAD, chunk + 1, mb);
    float *dx = k->first ? NULL : slot_new(R, SLOT_GRAD, chunk, mb, act_floats(R));
    WpCompute *D = R->dev;
    /* the plan knows when a gradient buffer starts a new sum: clear it then, add otherwise */
    if (first) memset(D->buf[d], 0, k->nparams * sizeof(float));
    wp_chunk_backward(&R->cfg, k, D->buf[w], D->tokens, D->targets, stash, R->recompute, dy, dx, D->buf[d],
                      R->loss_scale, D->scratch);
    slot_release(R, SLOT_STASH, chunk, mb);
    if (!k->last) slot_release(R, SLOT_GRAD, chunk + 1, mb);
    if (R->tracing) {
        char name[40];
        snprintf(name, sizeof name, "B%d mb%d", chunk, mb);
        trace_event(R, "backward", name, t0, comm_now(R->comm));
    }
}

void wp_bwd(WpRank *R, int chunk, int mb, int w, int d, int first) {
    backward(R, chunk, mb, w, d, first);
}

/* The CPU backend has no split backward yet: plans that use BWD_B/BWD_W are refused at start
 * (train.c), so these are never reached. */
void wp_bwd_b(WpRank *R, int chunk, int mb, int w) {
    (void)chunk; (void)mb; (void)w;
    comm_abort(R->comm, 2, "BWD_B is not supported by the CPU backend yet");
}

void wp_bwd_w(WpRank *R, int chunk, int mb, int d, int first) {
    (void)chunk; (void)mb; (void)d; (void)first;
    comm_abort(R->comm, 2, "BWD_W is not supported by the CPU backend yet");
}

/* ---- transfers ---- */

void wp_send(WpRank *R, int buf, int chunk, int shard, int nshards, int peer) {
    char l[32];
    CommInfo ci = info(R, l, sizeof l, R->me->bufs[buf].kind == WP_BUF_W ? "W%d" : "D%d", chunk);
    comm_send(R->comm, R->dev->buf[buf], chunk_floats(R, chunk, shard, nshards), peer, &ci);
}

void wp_recv(WpRank *R, int buf, int chunk, int shard, int nshards, int peer) {
    char l[32];
    CommInfo ci = info(R, l, sizeof l, R->me->bufs[buf].kind == WP_BUF_W ? "W%d" : "D%d", chunk);
    comm_recv(R->comm, R->dev->buf[buf], chunk_floats(R, chunk, shard, nshards), peer, &ci);
}

void wp_send_act(WpRank *R, int what, int chunk, int mb, int peer) {
    int kind = what == WP_ACT ? SLOT_ACT : SLOT_GRAD;
    char l[32];
    CommInfo ci = info(R, l, sizeof l, what == WP_ACT ? "A%d" : "G%d", chunk);
    comm_send(R->comm, slot_get(R, kind, chunk, mb), act_floats(R), peer, &ci);
    WpCompute *D = R->dev;
    if (D->nrelease + 3 > D->caprelease) {
        D->caprelease = D->caprelease ? 2 * D->caprelease : 24;
        D->release = rank_realloc(R, D->release, (size_t)D->caprelease * sizeof *D->release, "transfer bookkeeping");
    }
    D->release[D->nrelease++] = kind;
    D->release[D->nrelease++] = chunk;
    D->release[D->nrelease++] = mb;
}

void wp_recv_act(WpRank *R, int what, int chunk, int mb, int peer) {
    int kind = what == WP_ACT ? SLOT_ACT : SLOT_GRAD;
    char l[32];
    CommInfo ci = info(R, l, sizeof l, what == WP_ACT ? "A%d" : "G%d", chunk);
    comm_recv(R->comm, slot_new(R, kind, chunk, mb, act_floats(R)), act_floats(R), peer, &ci);
}

/* ---- collectives ---- */

void wp_bcast(WpRank *R, int buf, int chunk, int shard, int nshards, int group, int root) {
    char l[32];
    CommInfo ci = info(R, l, sizeof l, "W%d", chunk);
    comm_bcast(R->comm, group, R->dev->buf[buf], chunk_floats(R, chunk, shard, nshards), root, &ci);
}

void wp_reduce(WpRank *R, int buf, int chunk, int shard, int nshards, int group, int root) {
    char l[32];
    CommInfo ci = info(R, l, sizeof l, "D%d", chunk);
    comm_reduce(R->comm, group, R->dev->buf[buf], chunk_floats(R, chunk, shard, nshards), root, &ci);
}

void wp_allreduce(WpRank *R, int buf, int chunk, int shard, int nshards, int group) {
    char l[32];
    CommInfo ci = info(R, l, sizeof l, "D%d", chunk);
    comm_allreduce(R->comm, group, R->dev->buf[buf], chunk_floats(R, chunk, shard, nshards), &ci);
}

void wp_allgather(WpRank *R, int shard_buf, int whole_buf, int chunk, int group) {
    char l[32];
    CommInfo ci = info(R, l, sizeof l, "W%d", chunk);
    comm_allgather(R->comm, group, R->dev->buf[shard_buf], R->dev->buf[whole_buf], R->chunks[chunk].nparams, &ci);
}

void wp_reduce_scatter(WpRank *R, int whole_buf, int shard_buf, int chunk, int group) {
    char l[32];
    CommInfo ci = info(R, l, sizeof l, "D%d", chunk);
    comm_reduce_scatter(R->comm, group, R->dev->buf[whole_buf], R->dev->buf[shard_buf], R->chunks[chunk].nparams, &ci);
}

/* ---- local ---- */

/* Floats a buffer holds of chunk: its shard when it is declared as one, else the whole chunk. */
static size_t held_floats(const WpRank *R, int buf, int chunk) {
    const WpBufDesc *b = &R->me->bufs[buf];
    return chunk_floats(R, chunk, b->shard, b->nshards);
}

void wp_acc(WpRank *R, int dst, int src, int chunk, int first) {
    size_t n = held_floats(R, dst, chunk);
    float *d = R->dev->buf[dst];
    const float *s = R->dev->buf[src];
    if (first) memcpy(d, s, n * sizeof(float));
    else {
        #pragma omp parallel for schedule(static)
        for (size_t i = 0; i < n; i++) d[i] += s[i];
    }
}

void wp_copy(WpRank *R, int dst, int src, int chunk) {
    memcpy(R->dev->buf[dst], R->dev->buf[src], held_floats(R, src, chunk) * sizeof(float));
}

void wp_free(WpRank *R, int buf) {
    (void)R; (void)buf;   /* static buffers: freeing only ends the content's life in the plan */
}
