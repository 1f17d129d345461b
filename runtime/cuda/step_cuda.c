/* The CUDA compute backend's part of the step's operations (train/step_backend.h; their meaning is
 * train/step_ops.c): compute through the CUDA model (model_cuda.h) on device buffers, all queued
 * on one stream; slots in the pool reserved at start-up. The host queues work and does not wait
 * inside a step, except in the test mode below.
 *
 * Formats, as the CPU backend's bf16 mode (cpu/step_cpu.c): working weights, activations and
 * their gradients bf16; a master is fp32 with a bf16 working copy (wc_adamw refreshes it), which
 * compute and transfers read; a gradient is summed in fp32 within one backward and rounded where
 * it is stored into a bf16 buffer; a buffer whose format is not the one its transfer carries (an
 * fp32 owner's gradient that moves in bf16) goes through a device copy in the carried format,
 * converted back after the turn's wait.
 *
 * Communication: with a layer that takes device buffers (NCCL) the operations get device
 * pointers and order themselves against this stream (comm_set_stream, comm_turn_posted). With one
 * that takes host memory (MPI) every transfer is staged through pinned host memory: copied out
 * (the stream synchronised) before it is posted, copied in after the turn's wait. That mode is
 * for tests of several ranks on one GPU, and says so at start-up. */
#include <stdio.h>
#include <string.h>
#include "cuda/compute_cuda.h"

/* ---- slots: the parts of the pool ---- */

/* The part of the pool each kind of slot takes (activations and their gradients share one). */
static const int slot_part[SLOT_KINDS] = {
    [SLOT_ACT] = PART_ACTS, [SLOT_GRAD] = PART_ACTS, [SLOT_STASH] = PART_STASHES, [SLOT_KEEP] = PART_KEEPS,
};
static const char *const part_names[SLOT_PARTS] = { "activations", "stashes", "B-to-W keeps" };

/* Where part p's slots begin, how large each is and how many there are. */
static void part_of(const CudaMemPlan *m, int p, size_t *off, size_t *bytes, int *n) {
    if (p == PART_STASHES) { *off = m->stashes; *bytes = m->stash_bytes; *n = m->nstashes; }
    else if (p == PART_KEEPS) { *off = m->keeps; *bytes = m->keep_bytes; *n = m->nkeeps; }
    else { *off = m->acts; *bytes = m->act_bytes; *n = m->nacts; }
}

/* A slot's tag is its index in its part. */
void *step_slot_take(WpRank *R, int kind, int chunk, int mb, size_t *tag) {
    WpCompute *D = R->dev;
    int part = slot_part[kind], n;
    size_t off, bytes;
    part_of(&D->mem, part, &off, &bytes, &n);
    char *used = D->used[part];
    int i = 0;
    while (i < n && used[i]) i++;
    if (i == n)
        comm_abort(R->comm, 1, "turn %d: no room for the %s of chunk %d for micro-batch %d: this rank holds more than the "
                   "%d %s its plan counted (plan_desc.c)", R->turn, step_slot_names[kind], chunk, mb, n,
                   part_names[part]);
    used[i] = 1;
    *tag = (size_t)i;
    if (part == PART_STASHES && D->mem.stashes_host) return D->h_stashes + (size_t)i * bytes;   /* offload */
    return D->pool + off + (size_t)i * bytes;
}

/* The slot's memory may still be read by work queued on the stream: whatever reuses it is queued
 * after that work (or, for a receive, its transfer waits for it). */
void step_slot_give(WpRank *R, int kind, void *p, size_t tag) {
    (void)p;
    R->dev->used[slot_part[kind]][tag] = 0;
}

/* ---- what a turn's wait finishes ---- */

static void after_add(WpRank *R, After a) {
    WpCompute *D = R->dev;
    D->after = rank_grow(R, D->after, D->nafter, &D->capafter, 16, sizeof *D->after, "transfer bookkeeping");
    D->after[D->nafter++] = a;
}

/* Device temporaries for transfers in another format, from the planned part of the pool. */
static void *xfer_take(WpRank *R, size_t bytes) {
    WpCompute *D = R->dev;
    size_t room = (bytes + CM_ALIGN - 1) / CM_ALIGN * CM_ALIGN;
    if (D->xfer_used + room > D->mem.xfer_bytes)
        comm_abort(R->comm, 1, "turn %d: the transfers in another format than their buffers' need more than the %zu "
                   "bytes planned for them", R->turn, D->mem.xfer_bytes);
    void *p = D->xfer + D->xfer_used;
    D->xfer_used += room;
    return p;
}

/* Pinned host memory for staging (MPI layer), valid until the turn's wait. */
static void *host_take(WpRank *R, size_t bytes) {
    HostArena *h = &R->dev->host;
    size_t room = (bytes + CM_ALIGN - 1) / CM_ALIGN * CM_ALIGN;
    if (room == 0) room = CM_ALIGN;
    while (h->cur < h->nblocks && h->used + room > h->size[h->cur]) { h->cur++; h->used = 0; }
    if (h->cur == h->nblocks) {   /* more than planned in one turn: one more block (test mode only) */
        size_t size = room > 2 * h->size[h->nblocks - 1] ? room : 2 * h->size[h->nblocks - 1];
        h->block = rank_realloc(R, h->block, (size_t)(h->nblocks + 1) * sizeof *h->block, "staging");
        h->size = rank_realloc(R, h->size, (size_t)(h->nblocks + 1) * sizeof *h->size, "staging");
        CUDA_CHECK(cudaHostAlloc((void **)&h->block[h->nblocks], size, cudaHostAllocDefault));
        h->size[h->nblocks++] = size;
        h->used = 0;
    }
    void *p = h->block[h->cur] + h->used;
    h->used += room;
    return p;
}

/* A device range as the communication layer takes it: itself, or (MPI layer) a pinned host copy,
 * filled now if the operation reads it (in) and copied back after the wait if it writes it (out). */
static void *comm_ptr(WpRank *R, void *dev, size_t bytes, int in, int out) {
    WpCompute *D = R->dev;
    if (!D->staged) return dev;
    void *h = host_take(R, bytes);
    if (in && bytes) {
        CUDA_CHECK(cudaMemcpyAsync(h, dev, bytes, cudaMemcpyDeviceToHost, D->stream));
        CUDA_CHECK(cudaStreamSynchronize(D->stream));
    }
    if (out && bytes) after_add(R, (After){ AFTER_UPLOAD, dev, h, bytes });
    return h;
}

/* dst[0..n) at format ddt = src[0..n) at format sdt, on the stream. */
static void convert(WpRank *R, void *dst, int ddt, const void *src, int sdt, size_t n) {
    WpCompute *D = R->dev;
    if (!n) return;
    if (ddt == sdt) CUDA_CHECK(cudaMemcpyAsync(dst, src, n * wp_dtype_bytes((WpDtype)ddt), cudaMemcpyDeviceToDevice, D->stream));
    else if (ddt == WP_BF16) wc_f32_to_bf16(D->model, dst, src, n);
    else wc_bf16_to_f32(D->model, dst, src, n);
}

/* Buffer b's first n elements in format dt: its working memory (a master's copy) when that is the
 * format, else a device copy in it (converted now if in, back into the buffer after the wait if
 * out; a master is never written by a transfer). */
static void *carried_ptr(WpRank *R, int b, size_t n, WpDtype dt, int in, int out) {
    const WpBufDesc *d = &R->me->bufs[b];
    int wf = cm_working(d);
    void *p = cuda_working(R, b);
    if (wf == (int)dt) return p;
    void *t = xfer_take(R, n * wp_dtype_bytes(dt));
    if (in) convert(R, t, dt, p, wf, n);
    if (out && !d->master) after_add(R, (After){ dt == WP_BF16 ? AFTER_WIDEN : AFTER_ROUND, p, t, n });
    return t;
}

/* The same, then as the communication layer takes it. */
void *step_xfer(WpRank *R, int b, size_t n, WpDtype dt, int in, int out) {
    void *p = carried_ptr(R, b, n, dt, in, out);
    return comm_ptr(R, p, n * wp_dtype_bytes(dt), in, out);
}

void *step_xfer_fp32_part(WpRank *R, int b, size_t off, size_t n, int in, int out) {
    return comm_ptr(R, (float *)R->dev->buf[b] + off, n * sizeof(float), in, out);
}

/* Activations are bf16 in the slots, as they move. */
void *step_act_send(WpRank *R, void *slot, size_t n, WpDtype dt) {
    return comm_ptr(R, slot, n * wp_dtype_bytes(dt), 1, 0);
}

void *step_act_recv(WpRank *R, void *slot, size_t n, WpDtype dt) {
    return comm_ptr(R, slot, n * wp_dtype_bytes(dt), 0, 1);
}

void step_turn_done(WpRank *R) {
    WpCompute *D = R->dev;
    /* staged data back first, then the conversions that read it */
    for (int i = 0; i < D->nafter; i++)
        if (D->after[i].kind == AFTER_UPLOAD)
            CUDA_CHECK(cudaMemcpyAsync(D->after[i].dst, D->after[i].src, D->after[i].n, cudaMemcpyHostToDevice, D->stream));
    for (int i = 0; i < D->nafter; i++) {
        const After *a = &D->after[i];
        if (a->kind == AFTER_WIDEN) wc_bf16_to_f32(D->model, a->dst, a->src, a->n);
        else if (a->kind == AFTER_ROUND) wc_f32_to_bf16(D->model, a->dst, a->src, a->n);
    }
    /* the staging memory is reused next turn: its uploads must be done */
    if (D->staged && D->nafter) CUDA_CHECK(cudaStreamSynchronize(D->stream));
    D->nafter = 0;
    D->xfer_used = 0;
    D->host.cur = 0;
    D->host.used = 0;
}

/* ---- compute ---- */

/* The device tokens and targets of micro-batch mb of this step: from the ring if a recent
 * operation read them (from the same data: a validation's steps are numbered from 0 too), else
 * read into a pinned slot and copied up on the stream. */
void step_batch(WpRank *R, int mb, const int **tokens, const int **targets) {
    WpCompute *D = R->dev;
    size_t T = (size_t)R->cfg.mbs * R->cfg.seq;
    int i;
    for (i = 0; i < D->mem.ntok; i++)
        if (D->tok_step[i] == R->step && D->tok_mb[i] == mb && D->tok_src[i] == R->data) break;
    if (i == D->mem.ntok) {
        i = D->tok_next;
        D->tok_next = (D->tok_next + 1) % D->mem.ntok;
        /* the slot's last upload was queued ntok reads ago: done long since, unless the host is far ahead */
        CUDA_CHECK(cudaEventSynchronize(D->tok_copied[i]));
        data_read_batch(R->data, R->step, mb, R->plan->total_mbs, R->cfg.mbs, R->cfg.seq, D->h_tokens + i * T,
                        D->h_targets + i * T);
        CUDA_CHECK(cudaMemcpyAsync(D->tokens + i * T, D->h_tokens + i * T, T * sizeof(int), cudaMemcpyHostToDevice, D->stream));
        CUDA_CHECK(cudaMemcpyAsync(D->targets + i * T, D->h_targets + i * T, T * sizeof(int), cudaMemcpyHostToDevice, D->stream));
        CUDA_CHECK(cudaEventRecord(D->tok_copied[i], D->stream));
        D->tok_step[i] = R->step;
        D->tok_mb[i] = mb;
        D->tok_src[i] = R->data;
    }
    *tokens = D->tokens + i * T;
    *targets = D->targets + i * T;
}

/* Compute spans are timed on the device (compute_cuda.c): the host only queues the work. */
StepSpan step_span_start(WpRank *R) {
    return (StepSpan){ 0, cuda_span_start(R) };
}

void step_span_end(WpRank *R, StepSpan s, const char *cat, const char *name) {
    if (s.event) cuda_span_end(R, (cudaEvent_t)s.event, cat, name);
}

/* A bf16 gradient is summed by the model one segment at a time in the fp32 staging gradient
 * (wc_model_set_grad_bf16): NULL here. */
float *step_grad_open(WpRank *R, int d, size_t n, int first) {
    WpCompute *D = R->dev;
    int g16 = R->me->bufs[d].dtype == WP_BF16;
    if (first) CUDA_CHECK(cudaMemsetAsync(D->buf[d], 0, n * (g16 ? sizeof(uint16_t) : sizeof(float)), D->stream));
    if (!g16) return (float *)D->buf[d];
    wc_model_set_grad_bf16(D->model, (uint16_t *)D->buf[d], D->gstage);
    return NULL;
}

void step_grad_close(WpRank *R, int d, float *grad, size_t n) {
    if (R->me->bufs[d].dtype == WP_BF16) wc_model_set_grad_bf16(R->dev->model, NULL, NULL);
}

void step_forward(WpRank *R, const WpChunk *k, int w, const int *tokens, const int *targets, const void *x_in,
                  void *x_out, void *stash) {
    WpCompute *D = R->dev;
    wc_chunk_forward(D->model, k, cuda_working(R, w), tokens, targets, x_in, x_out, stash, D->loss);
}

void step_backward(WpRank *R, const WpChunk *k, int w, const int *tokens, const int *targets, const void *stash,
                   const void *dy, void *dx, float *grad) {
    WpCompute *D = R->dev;
    wc_chunk_backward(D->model, k, cuda_working(R, w), tokens, targets, stash, dy, dx, grad, R->loss_scale);
}

/* B writes qkv's gradient over the stash's qkv (model_cuda.h). */
void step_backward_input(WpRank *R, const WpChunk *k, int w, const int *targets, void *stash, const void *dy,
                         void *dx, void *keep) {
    WpCompute *D = R->dev;
    wc_chunk_backward_input(D->model, k, cuda_working(R, w), targets, stash, dy, dx, keep, R->loss_scale);
}

void step_backward_weights(WpRank *R, const WpChunk *k, const int *tokens, const int *targets, const void *stash,
                           const void *keep, float *grad) {
    WpCompute *D = R->dev;
    wc_chunk_backward_weights(D->model, k, tokens, targets, stash, keep, grad, R->loss_scale);
}

/* ---- local ---- */

void step_acc(WpRank *R, int dst, int src, size_t n, int first) {
    WpCompute *D = R->dev;
    if (n) wc_acc(D->model, D->buf[dst], R->me->bufs[dst].dtype, D->buf[src], R->me->bufs[src].dtype, n, first);
}

/* a += b, then b = a: the same bits in both */
void step_tie(WpRank *R, int a, size_t ao, int b, size_t bo, size_t n) {
    WpCompute *D = R->dev;
    float *x = (float *)D->buf[a] + ao, *y = (float *)D->buf[b] + bo;
    if (!n) return;
    wc_acc(D->model, x, WP_FP32, y, WP_FP32, n, 0);
    convert(R, y, WP_FP32, x, WP_FP32, n);
}

/* A master into a bf16 buffer: its working copy, already rounded. */
void step_copy(WpRank *R, int dst, int src, size_t n) {
    WpCompute *D = R->dev;
    int dd = R->me->bufs[dst].dtype, sd = R->me->bufs[src].dtype;
    if (dd == WP_BF16 && D->copy[src]) convert(R, D->buf[dst], WP_BF16, D->copy[src], WP_BF16, n);
    else convert(R, D->buf[dst], dd, D->buf[src], sd, n);
}
