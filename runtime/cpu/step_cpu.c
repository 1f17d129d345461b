/* The CPU compute backend's part of the step's operations (train/step_backend.h; their meaning is
 * train/step_ops.c): compute through the model's chunk functions (cpu/model.h) on host buffers,
 * which the communication layer (MPI) takes as they are; slots in host blocks recycled from step
 * to step.
 *
 * Formats (common/precision.h): a buffer whose dtype is bf16 is a real 16-bit array; transfers
 * move 2-byte elements where the plan carries bf16, the communication layer summing bf16 as NCCL
 * does (each partial sum rounded). The model computes on fp32 containers: a bf16 buffer is widened
 * into a staging copy for it, an fp32 master is rounded to bf16 where the plan reads its working
 * copy (compute, sends, COPY), a gradient is summed in fp32 within one backward and rounded where
 * it is stored into a bf16 buffer. A transfer in another format than its buffer's goes through a
 * temporary block in the carried format, converted back after the turn's wait.
 *
 * Offload (config.h's WP_RECOMPUTE_OFFLOAD): stash slots come from a host pool of blocks of
 * their own, standing for the CUDA backend's pinned host memory; the model copies each layer's
 * input between it and the scratch's staging (model.c, "offload"). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "cpu/compute_cpu.h"
#include "train/step_backend.h"

/* ---- blocks: storage of slots and temporaries ---- */

/* Storage is recycled: after the first step every allocation finds a released block of its size,
 * in its pool (the device's, or offload's host pool). *held, where given, counts the bytes the
 * pool allocated: blocks are never freed before the end, so that is the pool's peak. */
static float *pool_get(WpRank *R, Block *pool, int *npool, size_t n, size_t *held) {
    for (int i = 0; i < *npool; i++)
        if (pool[i].n == n) {
            float *p = pool[i].p;
            pool[i] = pool[--*npool];
            return p;
        }
    if (held) *held += n * sizeof(float);
    return rank_realloc(R, NULL, n * sizeof(float), "activations");
}

static float *block_get(WpRank *R, size_t n) { return pool_get(R, R->dev->free, &R->dev->nfree, n, NULL); }

static void block_put(WpRank *R, float *p, size_t n) {
    WpCompute *D = R->dev;
    D->free = rank_grow(R, D->free, D->nfree, &D->capfree, 16, sizeof *D->free, "activation blocks");
    D->free[D->nfree++] = (Block){ p, n };
}

static int in_host_pool(const WpRank *R, int kind) { return kind == SLOT_STASH && R->recompute == WP_RECOMPUTE_OFFLOAD; }

/* A slot's tag is its block's size in floats: activations and their gradients, fp32. */
void *step_slot_take(WpRank *R, int kind, int chunk, int mb, size_t *tag) {
    (void)mb;
    const WpChunk *k = &R->chunks[chunk];
    size_t n = kind == SLOT_STASH ? wp_stash_floats(&R->cfg, k, R->recompute)
             : kind == SLOT_KEEP ? wp_keep_floats(&R->cfg, k, R->recompute)
             : (size_t)R->cfg.mbs * R->cfg.seq * R->cfg.hidden;
    *tag = n;
    return in_host_pool(R, kind) ? pool_get(R, R->dev->hfree, &R->dev->nhfree, n, &R->dev->hbytes) : block_get(R, n);
}

void step_slot_give(WpRank *R, int kind, void *p, size_t tag) {
    WpCompute *D = R->dev;
    if (!in_host_pool(R, kind)) { block_put(R, p, tag); return; }
    D->hfree = rank_grow(R, D->hfree, D->nhfree, &D->caphfree, 16, sizeof *D->hfree, "offload's host blocks");
    D->hfree[D->nhfree++] = (Block){ p, tag };
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

/* ---- transfers ---- */

static void pending_add(WpRank *R, Pending p) {
    WpCompute *D = R->dev;
    D->pend = rank_grow(R, D->pend, D->npend, &D->cappend, 16, sizeof *D->pend, "transfer bookkeeping");
    D->pend[D->npend++] = p;
}

/* A temporary of n elements of format dt: a block of their room. */
static size_t temp_room(size_t n, WpDtype dt) {
    size_t room = dt == WP_BF16 ? bf16_room(n) : n;
    return room ? room : 1;
}

void *step_xfer(WpRank *R, int b, size_t n, WpDtype dt, int in, int out) {
    const WpBufDesc *d = &R->me->bufs[b];
    if (buf_dtype(R, b) == (int)dt) return R->dev->buf[b];
    size_t room = temp_room(n, dt);
    float *t = block_get(R, room);
    /* a master's values rounded: its working copy; widened where the wire is wider */
    if (in) convert(t, dt, R->dev->buf[b], buf_dtype(R, b), n);
    pending_add(R, (Pending){ out && !d->master ? PEND_STORE : PEND_RELEASE, t, room, NULL, b, n, dt });
    return t;
}

void *step_xfer_fp32_part(WpRank *R, int b, size_t off, size_t n, int in, int out) {
    (void)n; (void)in; (void)out;   /* host memory: the communication layer takes it as it is */
    return (float *)R->dev->buf[b] + off;
}

/* In a bf16 plan activations move as bf16: a rounded copy is sent, a receive is widened into
 * the slot after the wait. */
void *step_act_send(WpRank *R, void *slot, size_t n, WpDtype dt) {
    if (dt != WP_BF16) return slot;
    size_t room = temp_room(n, dt);
    float *t = block_get(R, room);
    wp_f32_to_bf16_array((WpBf16 *)t, slot, n);
    pending_add(R, (Pending){ PEND_RELEASE, t, room, NULL, -1, 0, WP_BF16 });
    return t;
}

void *step_act_recv(WpRank *R, void *slot, size_t n, WpDtype dt) {
    if (dt != WP_BF16) return slot;
    float *t = block_get(R, bf16_room(n));
    pending_add(R, (Pending){ PEND_BF16, t, bf16_room(n), slot, -1, n, WP_BF16 });
    return t;
}

void step_turn_done(WpRank *R) {
    WpCompute *D = R->dev;
    for (int i = 0; i < D->npend; i++) {
        Pending *p = &D->pend[i];
        if (p->kind == PEND_BF16) wp_bf16_to_f32_array(p->dst, (const WpBf16 *)p->p, p->elems);
        else if (p->kind == PEND_STORE) convert(D->buf[p->dst_buf], buf_dtype(R, p->dst_buf), p->p, p->dt, p->elems);
        block_put(R, p->p, p->n);
    }
    D->npend = 0;
}

/* ---- compute ---- */

/* One micro-batch at a time: the host computes it before the next is read. */
void step_batch(WpRank *R, int mb, const int **tokens, const int **targets) {
    WpCompute *D = R->dev;
    data_read_batch(R->data, R->step, mb, R->plan->total_mbs, R->cfg.mbs, R->cfg.seq, D->tokens, D->targets);
    *tokens = D->tokens;
    *targets = D->targets;
}

/* The host computes as it is called: its clock times the span. */
StepSpan step_span_start(WpRank *R) {
    return (StepSpan){ comm_now(R->comm), NULL };
}

void step_span_end(WpRank *R, StepSpan s, const char *cat, const char *name) {
    trace_event(R, cat, name, s.t0, comm_now(R->comm));
}

/* A bf16 gradient is summed by the model one segment at a time in the fp32 stage
 * (wp_scratch_set_grad_bf16): NULL here. */
float *step_grad_open(WpRank *R, int d, size_t n, int first) {
    WpCompute *D = R->dev;
    if (buf_dtype(R, d) == WP_BF16) {
        if (first) memset(D->buf[d], 0, n * sizeof(WpBf16));
        wp_scratch_set_grad_bf16(D->scratch, (WpBf16 *)D->buf[d], D->gstage);
        return NULL;
    }
    if (first) memset(D->buf[d], 0, n * sizeof(float));
    return D->buf[d];
}

void step_grad_close(WpRank *R, int d, float *grad, size_t n) {
    if (buf_dtype(R, d) == WP_BF16) wp_scratch_set_grad_bf16(R->dev->scratch, NULL, NULL);
}

void step_forward(WpRank *R, const WpChunk *k, int w, const int *tokens, const int *targets, const void *x_in,
                  void *x_out, void *stash) {
    WpCompute *D = R->dev;
    wp_chunk_forward(&R->cfg, k, working_weights(R, w, k->nparams), tokens, targets, x_in, x_out, stash, R->recompute,
                     D->scratch, &R->loss_sum);
}

void step_backward(WpRank *R, const WpChunk *k, int w, const int *tokens, const int *targets, const void *stash,
                   const void *dy, void *dx, float *grad) {
    WpCompute *D = R->dev;
    wp_chunk_backward(&R->cfg, k, working_weights(R, w, k->nparams), tokens, targets, stash, R->recompute,
                      dy, dx, grad, R->loss_scale, D->scratch);
}

void step_backward_input(WpRank *R, const WpChunk *k, int w, const int *targets, void *stash, const void *dy,
                         void *dx, void *keep) {
    WpCompute *D = R->dev;
    wp_chunk_backward_input(&R->cfg, k, working_weights(R, w, k->nparams), targets, stash, R->recompute, dy, dx,
                            keep, R->loss_scale, D->scratch);
}

void step_backward_weights(WpRank *R, const WpChunk *k, const int *tokens, const int *targets, const void *stash,
                           const void *keep, float *grad) {
    WpCompute *D = R->dev;
    wp_chunk_backward_weights(&R->cfg, k, tokens, targets, stash, R->recompute, keep, grad, R->loss_scale,
                              D->scratch);
}

/* ---- local ---- */

/* Element i of a buffer of format dt, as fp32. */
static inline float elem(const float *p, int dt, size_t i) {
    return dt == WP_BF16 ? wp_bf16_to_f32(((const WpBf16 *)p)[i]) : p[i];
}

/* A bf16 gradient received and added into the owner's fp32 one is widened; into a bf16 one, the
 * sum is rounded. */
void step_acc(WpRank *R, int dst, int src, size_t n, int first) {
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

void step_tie(WpRank *R, int a, size_t ao, int b, size_t bo, size_t n) {
    float *x = (float *)R->dev->buf[a] + ao, *y = (float *)R->dev->buf[b] + bo;
    #pragma omp parallel for schedule(static)
    for (size_t i = 0; i < n; i++) y[i] = x[i] = x[i] + y[i];
}

void step_copy(WpRank *R, int dst, int src, size_t n) {
    float *d = R->dev->buf[dst];
    const float *s = R->dev->buf[src];
    convert(d, buf_dtype(R, dst), s, buf_dtype(R, src), n);
}
