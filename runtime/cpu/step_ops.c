/* The operations an emitted step calls (runtime/common/step.h), for the CPU compute backend:
 * compute through the model's chunk functions on host fp32 buffers, transfers and collectives
 * through the communication layer (common/comm.h) on the same buffers, and the bookkeeping of
 * activations between them. The plan verifier has proved the step: every buffer
 * holds what an operation expects, so nothing here re-checks it, except what costs nothing
 * (an activation that is not where the plan says aborts with the operation's name).
 *
 * Formats (common/precision.h): a buffer whose dtype is bf16 is a real 16-bit array; transfers
 * and collectives move what the plan carries (W, A, G at its precision, D at its grad precision)
 * as 2-byte elements, the communication layer summing bf16 as NCCL does (each partial sum
 * rounded). The model computes on fp32 containers: a bf16 buffer is widened into a staging copy
 * for it, an fp32 master is rounded to bf16 where the plan reads its working copy (compute,
 * sends, COPY), a gradient is summed in fp32 within one backward and rounded where it is stored
 * into a bf16 buffer. A buffer whose format is not the one carried (an fp32 master's bf16 working
 * copy, a bf16 gradient into an fp32 owner's buffer) goes through a temporary in the carried
 * format, converted back after the turn's wait. */
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

static const char *const slot_names[] = { "activation", "activation gradient", "stash", "B-to-W keep" };

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

/* ---- formats ---- */

static int buf_dtype(const WpRank *R, int b) { return R->me->bufs[b].dtype; }

/* Floats of room n bf16 elements take in a block (blocks are float arrays). */
static size_t bf16_room(size_t n) { return (n + 1) / 2; }

/* dst[0..n) at format ddt = src[0..n) at format sdt (rounded to nearest even into bf16). */
static void convert(void *dst, int ddt, const void *src, int sdt, size_t n) {
    if (ddt == sdt) memcpy(dst, src, n * wp_dtype_bytes((WpDtype)ddt));
    else if (ddt == WP_BF16) wp_f32_to_bf16_array(dst, src, n);
    else wp_bf16_to_f32_array(dst, src, n);
}

/* n elements of buffer b as fp32 into out (exact). */
static void load_f32(WpRank *R, int b, float *out, size_t n) {
    if (buf_dtype(R, b) == WP_BF16) wp_bf16_to_f32_array(out, (const WpBf16 *)R->dev->buf[b], n);
    else memcpy(out, R->dev->buf[b], n * sizeof(float));
}

/* n fp32 values into buffer b at its format (rounded to bf16 there). */
static void store_f32(WpRank *R, int b, const float *in, size_t n) {
    if (buf_dtype(R, b) == WP_BF16) wp_f32_to_bf16_array((WpBf16 *)R->dev->buf[b], in, n);
    else memcpy(R->dev->buf[b], in, n * sizeof(float));
}

/* The working weights of buffer w (n elements) as the model reads them: fp32 values, bf16-valued
 * in a bf16 plan (a bf16 buffer widened, an fp32 master rounded: its working copy). */
static const float *working_weights(WpRank *R, int w, size_t n) {
    WpCompute *D = R->dev;
    if (buf_dtype(R, w) == WP_BF16) { load_f32(R, w, D->wstage, n); return D->wstage; }
    if (R->plan->precision == WP_BF16) {
        memcpy(D->wstage, D->buf[w], n * sizeof(float));
        wp_bf16_round_array(D->wstage, n);
        return D->wstage;
    }
    return D->buf[w];
}

static void pending_add(WpRank *R, Pending p) {
    WpCompute *D = R->dev;
    if (D->npend == D->cappend) {
        D->cappend = D->cappend ? 2 * D->cappend : 16;
        D->pend = rank_realloc(R, D->pend, (size_t)D->cappend * sizeof *D->pend, "transfer bookkeeping");
    }
    D->pend[D->npend++] = p;
}

/* A temporary of n bf16 elements holding src (fp32) rounded, released after the turn's wait. */
static WpBf16 *bf16_temp(WpRank *R, const float *src, size_t n) {
    size_t room = bf16_room(n);
    float *t = block_get(R, room ? room : 1);
    wp_f32_to_bf16_array((WpBf16 *)t, src, n);
    pending_add(R, (Pending){ PEND_RELEASE, t, room ? room : 1, NULL, -1, 0, WP_BF16 });
    return (WpBf16 *)t;
}

static void pending_finish(WpRank *R) {
    WpCompute *D = R->dev;
    for (int i = 0; i < D->npend; i++) {
        Pending *p = &D->pend[i];
        if (p->kind == PEND_BF16) wp_bf16_to_f32_array(p->dst, (const WpBf16 *)p->p, p->elems);
        else if (p->kind == PEND_STORE) convert(R->dev->buf[p->dst_buf], buf_dtype(R, p->dst_buf), p->p, p->dt, p->elems);
        block_put(R, p->p, p->n);
    }
    D->npend = 0;
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
    pending_finish(R);
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
    wp_chunk_forward(&R->cfg, k, working_weights(R, w, k->nparams), D->tokens, D->targets, x_in, x_out, stash, R->recompute, D->scratch,
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
    /* the plan knows when a gradient buffer starts a new sum: clear it then, add otherwise; a bf16
     * gradient is summed in fp32 within this backward and rounded once, where it is stored */
    int g16 = buf_dtype(R, d) == WP_BF16;
    float *grad = g16 ? D->gstage : D->buf[d];
    if (first) memset(grad, 0, k->nparams * sizeof(float));
    else if (g16) load_f32(R, d, grad, k->nparams);
    wp_chunk_backward(&R->cfg, k, working_weights(R, w, k->nparams), D->tokens, D->targets, stash, R->recompute, dy,
                      dx, grad, R->loss_scale, D->scratch);
    if (g16) store_f32(R, d, grad, k->nparams);
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

/* The split backward (zero-bubble schedules). BWD_B: the input gradient, as BWD makes it, sent
 * upstream like BWD's; the stash stays and a keep slot holds what BWD_W needs (model.h). BWD_W: the
 * weight gradient into d, written or added as BWD's; it ends the stash's and the keep's lives. */
void wp_bwd_b(WpRank *R, int chunk, int mb, int w) {
    const WpChunk *k = &R->chunks[chunk];
    double t0 = comm_now(R->comm);
    if (k->last) read_batch(R, mb);
    float *stash = slot_get(R, SLOT_STASH, chunk, mb);
    float *dy = k->last ? NULL : slot_get(R, SLOT_GRAD, chunk + 1, mb);
    float *dx = k->first ? NULL : slot_new(R, SLOT_GRAD, chunk, mb, act_floats(R));
    float *keep = slot_new(R, SLOT_KEEP, chunk, mb, wp_keep_floats(&R->cfg, k, R->recompute));
    WpCompute *D = R->dev;
    wp_chunk_backward_input(&R->cfg, k, working_weights(R, w, k->nparams), D->targets, stash, R->recompute, dy, dx,
                            keep, R->loss_scale, D->scratch);
    if (!k->last) slot_release(R, SLOT_GRAD, chunk + 1, mb);
    if (R->tracing) {
        char name[40];
        snprintf(name, sizeof name, "Bb%d mb%d", chunk, mb);
        trace_event(R, "backward", name, t0, comm_now(R->comm));
    }
}

void wp_bwd_w(WpRank *R, int chunk, int mb, int d, int first) {
    const WpChunk *k = &R->chunks[chunk];
    double t0 = comm_now(R->comm);
    if (k->first || k->last) read_batch(R, mb);   /* tokens: the embedding's; targets: the head's */
    float *stash = slot_get(R, SLOT_STASH, chunk, mb);
    float *keep = slot_get(R, SLOT_KEEP, chunk, mb);
    WpCompute *D = R->dev;
    int g16 = buf_dtype(R, d) == WP_BF16;   /* as backward() */
    float *grad = g16 ? D->gstage : D->buf[d];
    if (first) memset(grad, 0, k->nparams * sizeof(float));
    else if (g16) load_f32(R, d, grad, k->nparams);
    wp_chunk_backward_weights(&R->cfg, k, D->tokens, D->targets, stash, R->recompute, keep, grad, R->loss_scale,
                              D->scratch);
    if (g16) store_f32(R, d, grad, k->nparams);
    slot_release(R, SLOT_KEEP, chunk, mb);
    slot_release(R, SLOT_STASH, chunk, mb);
    if (R->tracing) {
        char name[40];
        snprintf(name, sizeof name, "Bw%d mb%d", chunk, mb);
        trace_event(R, "backward", name, t0, comm_now(R->comm));
    }
}

/* ---- transfers ---- */

/* The format a W or D transfer of buffer b carries. */
static int carried(const WpRank *R, int b) {
    if (R->me->bufs[b].kind != WP_BUF_W) return R->plan->grad_precision;
    return R->plan->weight_wire_fp32 ? WP_FP32 : R->plan->precision;
}

/* Buffer b's first n elements as a transfer carries them (*dt, the plan's format for what b
 * holds): the buffer itself when that is its format, else a temporary in it, released after the
 * turn's wait. in: the temporary holds the buffer's values (a master's rounded: its working copy;
 * widened where the wire is wider); out: it is converted back into the buffer after the wait (a
 * master is never overwritten). Sends are in, receives out, collectives both but where they only
 * read (a gather's shard, a scatter's whole) or only write (a gather's whole). */
static void *carried_buf(WpRank *R, int b, size_t n, int in, int out, WpDtype *dt) {
    const WpBufDesc *d = &R->me->bufs[b];
    *dt = (WpDtype)carried(R, b);
    if (buf_dtype(R, b) == (int)*dt) return R->dev->buf[b];
    size_t room = *dt == WP_BF16 ? bf16_room(n) : n;
    float *t = block_get(R, room ? room : 1);
    if (in) convert(t, *dt, R->dev->buf[b], buf_dtype(R, b), n);
    pending_add(R, (Pending){ out && !d->master ? PEND_STORE : PEND_RELEASE, t, room ? room : 1, NULL, b, n, *dt });
    return t;
}

void wp_send(WpRank *R, int buf, int chunk, int shard, int nshards, int peer) {
    char l[32];
    CommInfo ci = info(R, l, sizeof l, R->me->bufs[buf].kind == WP_BUF_W ? "W%d" : "D%d", chunk);
    size_t n = chunk_floats(R, chunk, shard, nshards);
    WpDtype dt;
    const void *p = carried_buf(R, buf, n, 1, 0, &dt);
    comm_send(R->comm, p, n, dt, peer, &ci);
}

void wp_recv(WpRank *R, int buf, int chunk, int shard, int nshards, int peer) {
    char l[32];
    CommInfo ci = info(R, l, sizeof l, R->me->bufs[buf].kind == WP_BUF_W ? "W%d" : "D%d", chunk);
    size_t n = chunk_floats(R, chunk, shard, nshards);
    WpDtype dt;
    void *p = carried_buf(R, buf, n, 0, 1, &dt);
    comm_recv(R->comm, p, n, dt, peer, &ci);
}

void wp_send_act(WpRank *R, int what, int chunk, int mb, int peer) {
    int kind = what == WP_ACT ? SLOT_ACT : SLOT_GRAD;
    char l[32];
    CommInfo ci = info(R, l, sizeof l, what == WP_ACT ? "A%d" : "G%d", chunk);
    float *a = slot_get(R, kind, chunk, mb);
    if (R->plan->precision == WP_BF16) comm_send(R->comm, bf16_temp(R, a, act_floats(R)), act_floats(R), WP_BF16, peer, &ci);
    else comm_send(R->comm, a, act_floats(R), WP_FP32, peer, &ci);
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
    size_t n = act_floats(R);
    float *a = slot_new(R, kind, chunk, mb, n);
    if (R->plan->precision == WP_BF16) {   /* bf16 on the wire, widened into the slot after the wait */
        float *t = block_get(R, bf16_room(n));
        comm_recv(R->comm, t, n, WP_BF16, peer, &ci);
        pending_add(R, (Pending){ PEND_BF16, t, bf16_room(n), a, -1, n, WP_BF16 });
    } else comm_recv(R->comm, a, n, WP_FP32, peer, &ci);
}

/* ---- collectives ---- */

void wp_bcast(WpRank *R, int buf, int chunk, int shard, int nshards, int group, int root) {
    char l[32];
    CommInfo ci = info(R, l, sizeof l, "W%d", chunk);
    size_t n = chunk_floats(R, chunk, shard, nshards);
    WpDtype dt;
    void *p = carried_buf(R, buf, n, 1, 1, &dt);
    comm_bcast(R->comm, group, p, n, dt, root, &ci);
}

void wp_reduce(WpRank *R, int buf, int chunk, int shard, int nshards, int group, int root) {
    char l[32];
    CommInfo ci = info(R, l, sizeof l, "D%d", chunk);
    size_t n = chunk_floats(R, chunk, shard, nshards);
    WpDtype dt;
    void *p = carried_buf(R, buf, n, 1, 1, &dt);
    comm_reduce(R->comm, group, p, n, dt, root, &ci);
}

void wp_allreduce(WpRank *R, int buf, int chunk, int shard, int nshards, int group) {
    char l[32];
    CommInfo ci = info(R, l, sizeof l, "D%d", chunk);
    size_t n = chunk_floats(R, chunk, shard, nshards);
    WpDtype dt;
    void *p = carried_buf(R, buf, n, 1, 1, &dt);
    comm_allreduce(R->comm, group, p, n, dt, &ci);
}

void wp_allgather(WpRank *R, int shard_buf, int whole_buf, int chunk, int group) {
    char l[32];
    CommInfo ci = info(R, l, sizeof l, "W%d", chunk);
    size_t n = R->chunks[chunk].nparams;
    const WpBufDesc *sb = &R->me->bufs[shard_buf];
    WpDtype sdt, wdt;
    const void *shard = carried_buf(R, shard_buf, chunk_floats(R, chunk, sb->shard, sb->nshards), 1, 0, &sdt);
    void *whole = carried_buf(R, whole_buf, n, 0, 1, &wdt);
    comm_allgather(R->comm, group, shard, whole, n, wdt, &ci);
}

void wp_reduce_scatter(WpRank *R, int whole_buf, int shard_buf, int chunk, int group) {
    char l[32];
    CommInfo ci = info(R, l, sizeof l, "D%d", chunk);
    size_t n = R->chunks[chunk].nparams;
    const WpBufDesc *sb = &R->me->bufs[shard_buf];
    WpDtype wdt, sdt;
    const void *whole = carried_buf(R, whole_buf, n, 1, 0, &wdt);
    void *shard = carried_buf(R, shard_buf, chunk_floats(R, chunk, sb->shard, sb->nshards), 0, 1, &sdt);
    comm_reduce_scatter(R->comm, group, whole, shard, n, wdt, &ci);
}

/* ---- local ---- */

/* Floats a buffer holds of chunk: its shard when it is declared as one, else the whole chunk. */
static size_t held_floats(const WpRank *R, int buf, int chunk) {
    const WpBufDesc *b = &R->me->bufs[buf];
    return chunk_floats(R, chunk, b->shard, b->nshards);
}

/* Element i of a buffer of format dt, as fp32. */
static inline float elem(const float *p, int dt, size_t i) {
    return dt == WP_BF16 ? wp_bf16_to_f32(((const WpBf16 *)p)[i]) : p[i];
}

/* dst += src (first: dst = src) in fp32, stored at dst's format: a bf16 gradient received and
 * added into the owner's fp32 one is widened; into a bf16 one, the sum is rounded. */
void wp_acc(WpRank *R, int dst, int src, int chunk, int first) {
    size_t n = held_floats(R, dst, chunk);
    float *d = R->dev->buf[dst];
    const float *s = R->dev->buf[src];
    int dd = buf_dtype(R, dst), sd = buf_dtype(R, src);
    if (dd == WP_FP32 && sd == WP_FP32) {
        if (first) memcpy(d, s, n * sizeof(float));
        else {
            #pragma omp parallel for schedule(static)
            for (size_t i = 0; i < n; i++) d[i] += s[i];
        }
        return;
    }
    #pragma omp parallel for schedule(static)
    for (size_t i = 0; i < n; i++) {
        float v = first ? elem(s, sd, i) : elem(d, dd, i) + elem(s, sd, i);
        if (dd == WP_BF16) ((WpBf16 *)d)[i] = wp_f32_to_bf16(v);
        else d[i] = v;
    }
}

/* dst = src at dst's format: a master copied into a bf16 buffer is rounded (its working copy). */
void wp_copy(WpRank *R, int dst, int src, int chunk) {
    size_t n = held_floats(R, src, chunk);
    float *d = R->dev->buf[dst];
    const float *s = R->dev->buf[src];
    int dd = buf_dtype(R, dst), sd = buf_dtype(R, src);
    if (dd == sd) memcpy(d, s, n * wp_dtype_bytes((WpDtype)dd));
    else if (dd == WP_BF16) wp_f32_to_bf16_array((WpBf16 *)d, s, n);
    else wp_bf16_to_f32_array(d, (const WpBf16 *)s, n);
}

void wp_free(WpRank *R, int buf) {
    (void)R; (void)buf;   /* static buffers: freeing only ends the content's life in the plan */
}
