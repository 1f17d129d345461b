/* The operations an emitted step calls (runtime/common/step.h), for the CUDA compute backend:
 * compute through the CUDA model (model_cuda.h) on device buffers, all queued on one stream;
 * transfers and collectives through the communication layer (common/comm.h) on the same buffers;
 * the bookkeeping of activations, their gradients and stashes in slots of the pool reserved at
 * start-up. The host queues work and does not wait inside a step, except in the test mode below.
 *
 * Formats, as the CPU backend's bf16 mode (cpu/step_ops.c): working weights, activations and
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

/* ---- activations, their gradients and stashes ---- */

/* Each kind of slot: its name, and the part of the pool it takes. */
static const struct { const char *name; int part; } slot_kinds[SLOT_KINDS] = {
    [SLOT_ACT] = { "activation", PART_ACTS }, [SLOT_GRAD] = { "activation gradient", PART_ACTS },
    [SLOT_STASH] = { "stash", PART_STASHES }, [SLOT_KEEP] = { "B-to-W keep", PART_KEEPS },
};
static const char *const part_names[SLOT_PARTS] = { "activations", "stashes", "B-to-W keeps" };

/* Where part p's slots begin, how large each is and how many there are. */
static void part_of(const CudaMemPlan *m, int p, size_t *off, size_t *bytes, int *n) {
    if (p == PART_STASHES) { *off = m->stashes; *bytes = m->stash_bytes; *n = m->nstashes; }
    else if (p == PART_KEEPS) { *off = m->keeps; *bytes = m->keep_bytes; *n = m->nkeeps; }
    else { *off = m->acts; *bytes = m->act_bytes; *n = m->nacts; }
}

static void *slot_ptr(const WpCompute *D, const Slot *s) {
    size_t off, bytes;
    int n;
    part_of(&D->mem, slot_kinds[s->kind].part, &off, &bytes, &n);
    return D->pool + off + (size_t)s->index * bytes;
}

static void *slot_new(WpRank *R, int kind, int chunk, int mb) {
    WpCompute *D = R->dev;
    int part = slot_kinds[kind].part, n;
    size_t off, bytes;
    part_of(&D->mem, part, &off, &bytes, &n);
    char *used = D->used[part];
    int i = 0;
    while (i < n && used[i]) i++;
    if (i == n)
        comm_abort(R->comm, 1, "turn %d: no room for the %s of chunk %d for micro-batch %d: this rank holds more than the "
                   "%d %s its plan counted (plan_desc.c)", R->turn, slot_kinds[kind].name, chunk, mb, n,
                   part_names[part]);
    used[i] = 1;
    D->slots[D->nslots] = (Slot){ kind, chunk, mb, i };
    return slot_ptr(D, &D->slots[D->nslots++]);
}

static int slot_find(const WpCompute *D, int kind, int chunk, int mb) {
    for (int i = D->nslots - 1; i >= 0; i--)
        if (D->slots[i].kind == kind && D->slots[i].chunk == chunk && D->slots[i].mb == mb) return i;
    return -1;
}

static void *slot_get(WpRank *R, int kind, int chunk, int mb) {
    int i = slot_find(R->dev, kind, chunk, mb);
    if (i < 0) comm_abort(R->comm, 1, "turn %d: the %s of chunk %d for micro-batch %d is not here", R->turn,
                          slot_kinds[kind].name, chunk, mb);
    return slot_ptr(R->dev, &R->dev->slots[i]);
}

/* The slot's memory may still be read by work queued on the stream: whatever reuses it is queued
 * after that work (or, for a receive, its transfer waits for it). */
static void slot_release(WpRank *R, int kind, int chunk, int mb) {
    WpCompute *D = R->dev;
    int i = slot_find(D, kind, chunk, mb);
    if (i < 0) return;
    D->used[slot_kinds[kind].part][D->slots[i].index] = 0;
    D->slots[i] = D->slots[--D->nslots];
}

/* ---- what a turn's wait finishes ---- */

static void after_add(WpRank *R, After a) {
    WpCompute *D = R->dev;
    if (D->nafter == D->capafter) {
        D->capafter = D->capafter ? 2 * D->capafter : 16;
        D->after = rank_realloc(R, D->after, (size_t)D->capafter * sizeof *D->after, "transfer bookkeeping");
    }
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
        CUDA_CHECK(R, cudaHostAlloc((void **)&h->block[h->nblocks], size, cudaHostAllocDefault));
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
        CUDA_CHECK(R, cudaMemcpyAsync(h, dev, bytes, cudaMemcpyDeviceToHost, D->stream));
        CUDA_CHECK(R, cudaStreamSynchronize(D->stream));
    }
    if (out && bytes) after_add(R, (After){ AFTER_UPLOAD, dev, h, bytes });
    return h;
}

/* dst[0..n) at format ddt = src[0..n) at format sdt, on the stream. */
static void convert(WpRank *R, void *dst, int ddt, const void *src, int sdt, size_t n) {
    WpCompute *D = R->dev;
    if (!n) return;
    if (ddt == sdt) CUDA_CHECK(R, cudaMemcpyAsync(dst, src, n * wp_dtype_bytes((WpDtype)ddt), cudaMemcpyDeviceToDevice, D->stream));
    else if (ddt == WP_BF16) wc_f32_to_bf16(D->model, dst, src, n);
    else wc_bf16_to_f32(D->model, dst, src, n);
}

/* Buffer b's first n elements as a transfer of the plan carries them (*dt): its working memory
 * (a master's copy) when that is the format, else a device copy in it (converted now if in, back
 * into the buffer after the wait if out; a master is never written by a transfer). */
static void *carried_ptr(WpRank *R, int b, size_t n, int in, int out, WpDtype *dt) {
    const WpBufDesc *d = &R->me->bufs[b];
    *dt = (WpDtype)cm_carried(R->plan, d);
    int wf = cm_working(d);
    void *p = cuda_working(R, b);
    if (wf == (int)*dt) return p;
    void *t = xfer_take(R, n * wp_dtype_bytes(*dt));
    if (in) convert(R, t, *dt, p, wf, n);
    if (out && !d->master) after_add(R, (After){ *dt == WP_BF16 ? AFTER_WIDEN : AFTER_ROUND, p, t, n });
    return t;
}

/* The same, then as the communication layer takes it. */
static void *xfer_ptr(WpRank *R, int b, size_t n, int in, int out, WpDtype *dt) {
    void *p = carried_ptr(R, b, n, in, out, dt);
    return comm_ptr(R, p, n * wp_dtype_bytes(*dt), in, out);
}

static size_t act_elems(const WpRank *R) {
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

/* Every transfer of the turn is posted: a device layer issues them together now, to run while
 * the turn's compute is queued behind them on the compute stream. */
void wp_turn_compute(WpRank *R) {
    comm_turn_posted(R->comm);
}

void wp_turn_wait(WpRank *R) {
    WpCompute *D = R->dev;
    comm_wait_turn(R->comm);
    /* staged data back first, then the conversions that read it */
    for (int i = 0; i < D->nafter; i++)
        if (D->after[i].kind == AFTER_UPLOAD)
            CUDA_CHECK(R, cudaMemcpyAsync(D->after[i].dst, D->after[i].src, D->after[i].n, cudaMemcpyHostToDevice, D->stream));
    for (int i = 0; i < D->nafter; i++) {
        const After *a = &D->after[i];
        if (a->kind == AFTER_WIDEN) wc_bf16_to_f32(D->model, a->dst, a->src, a->n);
        else if (a->kind == AFTER_ROUND) wc_f32_to_bf16(D->model, a->dst, a->src, a->n);
    }
    /* the staging memory is reused next turn: its uploads must be done */
    if (D->staged && D->nafter) CUDA_CHECK(R, cudaStreamSynchronize(D->stream));
    D->nafter = 0;
    D->xfer_used = 0;
    D->host.cur = 0;
    D->host.used = 0;
    for (int i = 0; i < D->nsent; i++) slot_release(R, D->sent[i].kind, D->sent[i].chunk, D->sent[i].mb);
    D->nsent = 0;
}

void wp_turn_end(WpRank *R) {
    (void)R;
}

/* ---- compute ---- */

/* The device tokens and targets of micro-batch mb of this step: from the ring if a recent
 * operation read them, else read into a pinned slot and copied up on the stream. */
static void batch(WpRank *R, int mb, const int **tokens, const int **targets) {
    WpCompute *D = R->dev;
    size_t T = (size_t)R->cfg.mbs * R->cfg.seq;
    int i;
    for (i = 0; i < D->mem.ntok; i++)
        if (D->tok_step[i] == R->step && D->tok_mb[i] == mb) break;
    if (i == D->mem.ntok) {
        i = D->tok_next;
        D->tok_next = (D->tok_next + 1) % D->mem.ntok;
        /* the slot's last upload was queued ntok reads ago: done long since, unless the host is far ahead */
        CUDA_CHECK(R, cudaEventSynchronize(D->tok_copied[i]));
        data_read_batch(R->data, R->step, mb, R->plan->total_mbs, R->cfg.mbs, R->cfg.seq, D->h_tokens + i * T,
                        D->h_targets + i * T);
        CUDA_CHECK(R, cudaMemcpyAsync(D->tokens + i * T, D->h_tokens + i * T, T * sizeof(int), cudaMemcpyHostToDevice, D->stream));
        CUDA_CHECK(R, cudaMemcpyAsync(D->targets + i * T, D->h_targets + i * T, T * sizeof(int), cudaMemcpyHostToDevice, D->stream));
        CUDA_CHECK(R, cudaEventRecord(D->tok_copied[i], D->stream));
        D->tok_step[i] = R->step;
        D->tok_mb[i] = mb;
    }
    *tokens = D->tokens + i * T;
    *targets = D->targets + i * T;
}

/* A compute operation's trace span, timed on the device (compute_cuda.c). */
static void trace_compute(WpRank *R, const char *cat, const char *tag, int chunk, int mb, cudaEvent_t t0) {
    if (!t0) return;
    char name[40];
    snprintf(name, sizeof name, "%s%d mb%d", tag, chunk, mb);
    cuda_span_end(R, t0, cat, name);
}

void wp_fwd(WpRank *R, int chunk, int mb, int w) {
    WpCompute *D = R->dev;
    const WpChunk *k = &R->chunks[chunk];
    cudaEvent_t t0 = cuda_span_start(R);
    const int *tokens = NULL, *targets = NULL;
    if (k->first || k->last) batch(R, mb, &tokens, &targets);
    const uint16_t *x_in = k->first ? NULL : slot_get(R, SLOT_ACT, chunk, mb);
    void *stash = slot_new(R, SLOT_STASH, chunk, mb);
    uint16_t *x_out = k->last ? NULL : slot_new(R, SLOT_ACT, chunk + 1, mb);
    wc_chunk_forward(D->model, k, cuda_working(R, w), tokens, targets, x_in, x_out, stash, D->loss);
    if (!k->first) slot_release(R, SLOT_ACT, chunk, mb);   /* the stash kept a copy */
    trace_compute(R, "forward", "F", chunk, mb, t0);
}

/* The fp32 sum a backward adds chunk gradient buffer d's n parameters into. The plan says when a
 * gradient buffer starts a new sum: cleared then, added to otherwise; a bf16 one is summed in fp32
 * (the staging gradient) within the backward and rounded once, where grad_close stores it. */
static float *grad_open(WpRank *R, int d, size_t n, int first) {
    WpCompute *D = R->dev;
    int g16 = R->me->bufs[d].dtype == WP_BF16;
    float *grad = g16 ? D->gstage : D->buf[d];
    if (first) CUDA_CHECK(R, cudaMemsetAsync(grad, 0, n * sizeof(float), D->stream));
    else if (g16) wc_bf16_to_f32(D->model, grad, D->buf[d], n);
    return grad;
}

static void grad_close(WpRank *R, int d, float *grad, size_t n) {
    if (R->me->bufs[d].dtype == WP_BF16) wc_f32_to_bf16(R->dev->model, R->dev->buf[d], grad, n);
}

void wp_bwd(WpRank *R, int chunk, int mb, int w, int d, int first) {
    WpCompute *D = R->dev;
    const WpChunk *k = &R->chunks[chunk];
    cudaEvent_t t0 = cuda_span_start(R);
    const int *tokens = NULL, *targets = NULL;
    if (k->first || k->last) batch(R, mb, &tokens, &targets);
    const void *stash = slot_get(R, SLOT_STASH, chunk, mb);
    const uint16_t *dy = k->last ? NULL : slot_get(R, SLOT_GRAD, chunk + 1, mb);
    uint16_t *dx = k->first ? NULL : slot_new(R, SLOT_GRAD, chunk, mb);
    float *grad = grad_open(R, d, k->nparams, first);
    wc_chunk_backward(D->model, k, cuda_working(R, w), tokens, targets, stash, dy, dx, grad, R->loss_scale);
    grad_close(R, d, grad, k->nparams);
    slot_release(R, SLOT_STASH, chunk, mb);
    if (!k->last) slot_release(R, SLOT_GRAD, chunk + 1, mb);
    trace_compute(R, "backward", "B", chunk, mb, t0);
}

/* The split backward (zero-bubble schedules), as the CPU backend's: BWD_B makes the input
 * gradient as BWD does and fills a keep slot with what BWD_W needs (model_cuda.h); the stash stays.
 * BWD_W adds the weight gradient into d, written or added as BWD's, and ends the stash and the
 * keep. */
void wp_bwd_b(WpRank *R, int chunk, int mb, int w) {
    WpCompute *D = R->dev;
    const WpChunk *k = &R->chunks[chunk];
    cudaEvent_t t0 = cuda_span_start(R);
    const int *tokens = NULL, *targets = NULL;
    if (k->last) batch(R, mb, &tokens, &targets);
    void *stash = slot_get(R, SLOT_STASH, chunk, mb);   /* B writes qkv's gradient over its qkv */
    const uint16_t *dy = k->last ? NULL : slot_get(R, SLOT_GRAD, chunk + 1, mb);
    uint16_t *dx = k->first ? NULL : slot_new(R, SLOT_GRAD, chunk, mb);
    void *keep = slot_new(R, SLOT_KEEP, chunk, mb);
    wc_chunk_backward_input(D->model, k, cuda_working(R, w), targets, stash, dy, dx, keep, R->loss_scale);
    if (!k->last) slot_release(R, SLOT_GRAD, chunk + 1, mb);
    trace_compute(R, "backward", "Bb", chunk, mb, t0);
}

void wp_bwd_w(WpRank *R, int chunk, int mb, int d, int first) {
    WpCompute *D = R->dev;
    const WpChunk *k = &R->chunks[chunk];
    cudaEvent_t t0 = cuda_span_start(R);
    const int *tokens = NULL, *targets = NULL;
    if (k->first || k->last) batch(R, mb, &tokens, &targets);   /* the embedding's tokens, the head's targets */
    const void *stash = slot_get(R, SLOT_STASH, chunk, mb);
    const void *keep = slot_get(R, SLOT_KEEP, chunk, mb);
    float *grad = grad_open(R, d, k->nparams, first);
    wc_chunk_backward_weights(D->model, k, tokens, targets, stash, keep, grad, R->loss_scale);
    grad_close(R, d, grad, k->nparams);
    slot_release(R, SLOT_KEEP, chunk, mb);
    slot_release(R, SLOT_STASH, chunk, mb);
    trace_compute(R, "backward", "Bw", chunk, mb, t0);
}

/* ---- transfers ---- */

static const char *wd_label(const WpRank *R, int buf) {
    return R->me->bufs[buf].kind == WP_BUF_W ? "W%d" : "D%d";
}

void wp_send(WpRank *R, int buf, int chunk, int shard, int nshards, int peer) {
    char l[32];
    CommInfo ci = info(R, l, sizeof l, wd_label(R, buf), chunk);
    size_t n = chunk_floats(R, chunk, shard, nshards);
    WpDtype dt;
    void *p = xfer_ptr(R, buf, n, 1, 0, &dt);
    comm_send(R->comm, p, n, dt, peer, &ci);
}

void wp_recv(WpRank *R, int buf, int chunk, int shard, int nshards, int peer) {
    char l[32];
    CommInfo ci = info(R, l, sizeof l, wd_label(R, buf), chunk);
    size_t n = chunk_floats(R, chunk, shard, nshards);
    WpDtype dt;
    void *p = xfer_ptr(R, buf, n, 0, 1, &dt);
    comm_recv(R->comm, p, n, dt, peer, &ci);
}

void wp_send_act(WpRank *R, int what, int chunk, int mb, int peer) {
    WpCompute *D = R->dev;
    int kind = what == WP_ACT ? SLOT_ACT : SLOT_GRAD;
    char l[32];
    CommInfo ci = info(R, l, sizeof l, what == WP_ACT ? "A%d" : "G%d", chunk);
    size_t n = act_elems(R);
    void *a = comm_ptr(R, slot_get(R, kind, chunk, mb), n * 2, 1, 0);
    comm_send(R->comm, a, n, WP_BF16, peer, &ci);
    D->sent[D->nsent++] = (Slot){ kind, chunk, mb, -1 };   /* released after the wait */
}

void wp_recv_act(WpRank *R, int what, int chunk, int mb, int peer) {
    int kind = what == WP_ACT ? SLOT_ACT : SLOT_GRAD;
    char l[32];
    CommInfo ci = info(R, l, sizeof l, what == WP_ACT ? "A%d" : "G%d", chunk);
    size_t n = act_elems(R);
    void *a = comm_ptr(R, slot_new(R, kind, chunk, mb), n * 2, 0, 1);
    comm_recv(R->comm, a, n, WP_BF16, peer, &ci);
}

/* ---- collectives ---- */

void wp_bcast(WpRank *R, int buf, int chunk, int shard, int nshards, int group, int root) {
    char l[32];
    CommInfo ci = info(R, l, sizeof l, "W%d", chunk);
    size_t n = chunk_floats(R, chunk, shard, nshards);
    WpDtype dt;
    int me = R->rank == root;
    void *p = xfer_ptr(R, buf, n, me, !me, &dt);   /* sets dt: before the call that reads it */
    comm_bcast(R->comm, group, p, n, dt, root, &ci);
}

void wp_reduce(WpRank *R, int buf, int chunk, int shard, int nshards, int group, int root) {
    char l[32];
    CommInfo ci = info(R, l, sizeof l, "D%d", chunk);
    size_t n = chunk_floats(R, chunk, shard, nshards);
    WpDtype dt;
    void *p = xfer_ptr(R, buf, n, 1, R->rank == root, &dt);
    comm_reduce(R->comm, group, p, n, dt, root, &ci);
}

void wp_allreduce(WpRank *R, int buf, int chunk, int shard, int nshards, int group) {
    char l[32];
    CommInfo ci = info(R, l, sizeof l, "D%d", chunk);
    size_t n = chunk_floats(R, chunk, shard, nshards);
    WpDtype dt;
    void *p = xfer_ptr(R, buf, n, 1, 1, &dt);
    comm_allreduce(R->comm, group, p, n, dt, &ci);
}

void wp_allgather(WpRank *R, int shard_buf, int whole_buf, int chunk, int group) {
    char l[32];
    CommInfo ci = info(R, l, sizeof l, "W%d", chunk);
    size_t n = R->chunks[chunk].nparams;
    const WpBufDesc *sb = &R->me->bufs[shard_buf];
    WpDtype sdt, wdt;
    const void *shard = xfer_ptr(R, shard_buf, chunk_floats(R, chunk, sb->shard, sb->nshards), 1, 0, &sdt);
    void *whole = xfer_ptr(R, whole_buf, n, 0, 1, &wdt);
    comm_allgather(R->comm, group, shard, whole, n, wdt, &ci);
}

void wp_reduce_scatter(WpRank *R, int whole_buf, int shard_buf, int chunk, int group) {
    char l[32];
    CommInfo ci = info(R, l, sizeof l, "D%d", chunk);
    size_t n = R->chunks[chunk].nparams;
    const WpBufDesc *sb = &R->me->bufs[shard_buf];
    WpDtype sdt, wdt;
    const void *whole = xfer_ptr(R, whole_buf, n, 1, 0, &wdt);
    void *shard = xfer_ptr(R, shard_buf, chunk_floats(R, chunk, sb->shard, sb->nshards), 0, 1, &sdt);
    comm_reduce_scatter(R->comm, group, whole, shard, n, wdt, &ci);
}

/* ---- local, after the turn's transfers ---- */

/* Elements a buffer holds of chunk: its shard when it is declared as one, else the whole chunk. */
static size_t held(const WpRank *R, int buf, int chunk) {
    const WpBufDesc *b = &R->me->bufs[buf];
    return chunk_floats(R, chunk, b->shard, b->nshards);
}

/* dst += src (first: dst = src), summed in fp32 and stored at dst's format. */
void wp_acc(WpRank *R, int dst, int src, int chunk, int first) {
    WpCompute *D = R->dev;
    size_t n = held(R, dst, chunk);
    if (n) wc_acc(D->model, D->buf[dst], R->me->bufs[dst].dtype, D->buf[src], R->me->bufs[src].dtype, n, first);
}

/* dst = src at dst's format: a master into a bf16 buffer is its working copy. */
void wp_copy(WpRank *R, int dst, int src, int chunk) {
    WpCompute *D = R->dev;
    size_t n = held(R, src, chunk);
    int dd = R->me->bufs[dst].dtype, sd = R->me->bufs[src].dtype;
    if (dd == WP_BF16 && D->copy[src]) convert(R, D->buf[dst], WP_BF16, D->copy[src], WP_BF16, n);
    else convert(R, D->buf[dst], dd, D->buf[src], sd, n);
}

void wp_free(WpRank *R, int buf) {
    (void)R; (void)buf;   /* buffers are static: freeing only ends the content's life in the plan */
}
