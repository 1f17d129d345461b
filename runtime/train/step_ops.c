/* The operations an emitted step calls (runtime/common/step.h), written once for every compute
 * backend: what each plan operation means, in terms of the backend's calls (train/step_backend.h)
 * and the communication layer's (common/comm.h). Here are the bookkeeping of the activations,
 * their gradients, stashes and keeps held between operations (slots, by kind, chunk and
 * micro-batch), the labels transfers carry into traces and messages, how many elements each moves
 * and in which format, and which operations read or write their buffers; the backend says where
 * the bytes are and computes.
 *
 * The plan verifier has proved the step: every buffer holds what an operation expects, so
 * nothing here re-checks it, except what costs nothing (an activation that is not where the plan
 * says aborts with the operation's name).
 *
 * Formats (common/precision.h): transfers and collectives move what the plan carries (W at its
 * precision, or fp32 where the weights' wire is; D at its grad precision; activations and their
 * gradients at its precision). A buffer whose format is not the one carried (an fp32 master's bf16
 * working copy, a bf16 gradient into an fp32 owner's buffer) goes through a temporary in the
 * carried format, converted back after the turn's wait where the operation writes the buffer. */
#include <stdio.h>
#include <stdlib.h>
#include "train/step_backend.h"

const char *const step_slot_names[SLOT_KINDS] = { "activation", "activation gradient", "stash", "B-to-W keep" };

/* ---- slots ---- */

static void *slot_new(WpRank *R, int kind, int chunk, int mb) {
    R->slots = rank_grow(R, R->slots, R->nslots, &R->capslots, 32, sizeof *R->slots, "activation slots");
    size_t tag = 0;
    void *p = step_slot_take(R, kind, chunk, mb, &tag);
    R->slots[R->nslots++] = (StepSlot){ kind, chunk, mb, p, tag };
    return p;
}

/* The latest first: a chunk's input and its gradient may be held for several micro-batches. */
static int slot_find(const WpRank *R, int kind, int chunk, int mb) {
    for (int i = R->nslots - 1; i >= 0; i--)
        if (R->slots[i].kind == kind && R->slots[i].chunk == chunk && R->slots[i].mb == mb) return i;
    return -1;
}

/* slot_find's index; aborts if missing */
static int slot_at(WpRank *R, int kind, int chunk, int mb) {
    int i = slot_find(R, kind, chunk, mb);
    if (i < 0) comm_abort(R->comm, 1, "turn %d: the %s of chunk %d for micro-batch %d is not here", R->turn,
                          step_slot_names[kind], chunk, mb);
    return i;
}

static void *slot_get(WpRank *R, int kind, int chunk, int mb) {
    return R->slots[slot_at(R, kind, chunk, mb)].p;
}

/* The backward's input gradient slot becomes its output's (the model works in place: cpu/model.h,
 * wp_chunk_backward's dx_in), so the two are never held at once; on the first chunk, which writes
 * no input gradient, the slot is lent to the call as its working storage and freed after it.
 * Only a chunk holding both ends (the whole model) uses the workspace's own (config.c's WP_WS_DRES).
 * Returns dx for the call; *lent is set when the slot must be released after it. */
static void *grad_in_place(WpRank *R, const WpChunk *k, int chunk, int mb, int *lent) {
    *lent = 0;
    if (k->last) return k->first ? NULL : slot_new(R, SLOT_GRAD, chunk, mb);
    int i = slot_at(R, SLOT_GRAD, chunk + 1, mb);
    if (k->first) *lent = 1;
    else R->slots[i].chunk = chunk;   /* the same storage, now the gradient of chunk's input */
    return R->slots[i].p;
}

static void slot_release(WpRank *R, int kind, int chunk, int mb) {
    int i = slot_find(R, kind, chunk, mb);
    if (i < 0) return;
    step_slot_give(R, kind, R->slots[i].p, R->slots[i].tag);
    R->slots[i] = R->slots[--R->nslots];
}

void step_ops_free(WpRank *R) {
    for (int i = 0; i < R->nslots; i++) step_slot_give(R, R->slots[i].kind, R->slots[i].p, R->slots[i].tag);
    free(R->slots);
    free(R->sent);
    R->slots = R->sent = NULL;
    R->nslots = R->capslots = R->nsent = R->capsent = 0;
}

/* ---- sizes, formats, labels ---- */

static size_t act_elems(const WpRank *R) {
    return (size_t)R->cfg.mbs * R->cfg.seq * R->cfg.hidden;
}

/* Elements a buffer holds of chunk: its shard when it is declared as one, else the whole chunk. */
static size_t held(const WpRank *R, int buf, int chunk) {
    const WpBufDesc *b = &R->me->bufs[buf];
    return chunk_floats(R, chunk, b->shard, b->nshards);
}

/* The format a W or D transfer of buffer b carries. */
static WpDtype carried(const WpRank *R, int b) {
    if (R->me->bufs[b].kind != WP_BUF_W) return (WpDtype)R->plan->grad_precision;
    return (WpDtype)(R->plan->weight_wire_fp32 ? WP_FP32 : R->plan->precision);
}

/* Buffer b's first n elements as the communication layer takes them; *dt set before the call
 * that reads it. in: the operation reads the buffer; out: it writes it. */
static void *xfer(WpRank *R, int b, size_t n, int in, int out, WpDtype *dt) {
    *dt = carried(R, b);
    return step_xfer(R, b, n, *dt, in, out);
}

static CommInfo info(WpRank *R, char *label, size_t len, const char *fmt, int a) {
    snprintf(label, len, fmt, a);
    return (CommInfo){ R->turn, label };
}

static const char *wd_label(const WpRank *R, int buf) {
    return R->me->bufs[buf].kind == WP_BUF_W ? "W%d" : "D%d";
}

/* ---- turns ---- */

void wp_turn_begin(WpRank *R, int turn) {
    R->turn = turn;
}

/* Every transfer of the turn is posted: a device layer issues them together now, to run while
 * the turn's compute is queued behind them (a host layer started them as they were posted). */
void wp_turn_compute(WpRank *R) {
    comm_turn_posted(R->comm);
}

void wp_turn_wait(WpRank *R) {
    comm_wait_turn(R->comm);
    step_turn_done(R);
    /* what this turn sent has left: activations sent on are no longer ours */
    for (int i = 0; i < R->nsent; i++) slot_release(R, R->sent[i].kind, R->sent[i].chunk, R->sent[i].mb);
    R->nsent = 0;
}

void wp_turn_end(WpRank *R) {
    (void)R;
}

/* ---- compute ---- */

static StepSpan span_start(WpRank *R) {
    return R->tracing ? step_span_start(R) : (StepSpan){ 0, NULL };
}

/* The span's trace event, named as the plan names the operation: "F3 mb1", "Bw2 mb0". */
static void span_end(WpRank *R, StepSpan s, const char *cat, const char *tag, int chunk, int mb) {
    if (!R->tracing) return;
    char name[40];
    snprintf(name, sizeof name, "%s%d mb%d", tag, chunk, mb);
    step_span_end(R, s, cat, name);
}

void wp_fwd(WpRank *R, int chunk, int mb, int w) {
    const WpChunk *k = &R->chunks[chunk];
    StepSpan t0 = span_start(R);
    const int *tokens = NULL, *targets = NULL;
    if (k->first || k->last) step_batch(R, mb, &tokens, &targets);
    void *stash = slot_new(R, SLOT_STASH, chunk, mb);
    /* the output is written in the input's storage (the model reads its input once, first:
     * cpu/model.h), so the two are never held at once; the stash keeps the input's copy */
    void *x_in = NULL, *x_out = NULL;
    if (!k->first) {
        int i = slot_at(R, SLOT_ACT, chunk, mb);
        x_in = R->slots[i].p;
        if (!k->last) { x_out = x_in; R->slots[i].chunk = chunk + 1; }
    } else if (!k->last)
        x_out = slot_new(R, SLOT_ACT, chunk + 1, mb);
    step_forward(R, k, w, tokens, targets, x_in, x_out, stash);
    if (!k->first && k->last) slot_release(R, SLOT_ACT, chunk, mb);
    span_end(R, t0, "forward", "F", chunk, mb);
}

/* The plan knows when a gradient buffer starts a new sum (first): step_grad_open clears it then. */
void wp_bwd(WpRank *R, int chunk, int mb, int w, int d, int first) {
    const WpChunk *k = &R->chunks[chunk];
    StepSpan t0 = span_start(R);
    const int *tokens = NULL, *targets = NULL;
    if (k->first || k->last) step_batch(R, mb, &tokens, &targets);
    const void *stash = slot_get(R, SLOT_STASH, chunk, mb);
    int lent;
    void *dx = grad_in_place(R, k, chunk, mb, &lent);
    const void *dy = k->last ? NULL : dx;
    float *grad = step_grad_open(R, d, k->nparams, first);
    step_backward(R, k, w, tokens, targets, stash, dy, dx, grad);
    step_grad_close(R, d, grad, k->nparams);
    slot_release(R, SLOT_STASH, chunk, mb);
    if (lent) slot_release(R, SLOT_GRAD, chunk + 1, mb);
    span_end(R, t0, "backward", "B", chunk, mb);
}

/* The split backward (zero-bubble schedules). BWD_B: the input gradient, as BWD makes it, sent
 * upstream like BWD's; the stash stays (B may write over parts of it) and a keep slot holds what
 * BWD_W needs. BWD_W: the weight gradient into d, written or added as BWD's; it ends the stash's
 * and the keep's lives. */
void wp_bwd_b(WpRank *R, int chunk, int mb, int w) {
    const WpChunk *k = &R->chunks[chunk];
    StepSpan t0 = span_start(R);
    const int *tokens = NULL, *targets = NULL;
    if (k->last) step_batch(R, mb, &tokens, &targets);
    void *stash = slot_get(R, SLOT_STASH, chunk, mb);
    int lent;
    void *dx = grad_in_place(R, k, chunk, mb, &lent);
    const void *dy = k->last ? NULL : dx;
    void *keep = slot_new(R, SLOT_KEEP, chunk, mb);
    step_backward_input(R, k, w, targets, stash, dy, dx, keep);
    if (lent) slot_release(R, SLOT_GRAD, chunk + 1, mb);
    span_end(R, t0, "backward", "Bb", chunk, mb);
}

void wp_bwd_w(WpRank *R, int chunk, int mb, int d, int first) {
    const WpChunk *k = &R->chunks[chunk];
    StepSpan t0 = span_start(R);
    const int *tokens = NULL, *targets = NULL;
    if (k->first || k->last) step_batch(R, mb, &tokens, &targets);   /* the embedding's tokens, the head's targets */
    const void *stash = slot_get(R, SLOT_STASH, chunk, mb);
    const void *keep = slot_get(R, SLOT_KEEP, chunk, mb);
    float *grad = step_grad_open(R, d, k->nparams, first);
    step_backward_weights(R, k, tokens, targets, stash, keep, grad);
    step_grad_close(R, d, grad, k->nparams);
    slot_release(R, SLOT_KEEP, chunk, mb);
    slot_release(R, SLOT_STASH, chunk, mb);
    span_end(R, t0, "backward", "Bw", chunk, mb);
}

/* ---- transfers ---- */

void wp_send(WpRank *R, int buf, int chunk, int shard, int nshards, int peer) {
    char l[32];
    CommInfo ci = info(R, l, sizeof l, wd_label(R, buf), chunk);
    size_t n = chunk_floats(R, chunk, shard, nshards);
    WpDtype dt;
    const void *p = xfer(R, buf, n, 1, 0, &dt);
    comm_send(R->comm, p, n, dt, peer, &ci);
}

void wp_recv(WpRank *R, int buf, int chunk, int shard, int nshards, int peer) {
    char l[32];
    CommInfo ci = info(R, l, sizeof l, wd_label(R, buf), chunk);
    size_t n = chunk_floats(R, chunk, shard, nshards);
    WpDtype dt;
    void *p = xfer(R, buf, n, 0, 1, &dt);
    comm_recv(R->comm, p, n, dt, peer, &ci);
}

void wp_send_act(WpRank *R, int what, int chunk, int mb, int peer) {
    int kind = what == WP_ACT ? SLOT_ACT : SLOT_GRAD;
    char l[32];
    CommInfo ci = info(R, l, sizeof l, what == WP_ACT ? "A%d" : "G%d", chunk);
    size_t n = act_elems(R);
    WpDtype dt = (WpDtype)R->plan->precision;
    const void *a = step_act_send(R, slot_get(R, kind, chunk, mb), n, dt);
    comm_send(R->comm, a, n, dt, peer, &ci);
    R->sent = rank_grow(R, R->sent, R->nsent, &R->capsent, 8, sizeof *R->sent, "transfer bookkeeping");
    R->sent[R->nsent++] = (StepSlot){ kind, chunk, mb, NULL, 0 };   /* released after the wait */
}

void wp_recv_act(WpRank *R, int what, int chunk, int mb, int peer) {
    int kind = what == WP_ACT ? SLOT_ACT : SLOT_GRAD;
    char l[32];
    CommInfo ci = info(R, l, sizeof l, what == WP_ACT ? "A%d" : "G%d", chunk);
    size_t n = act_elems(R);
    WpDtype dt = (WpDtype)R->plan->precision;
    void *a = step_act_recv(R, slot_new(R, kind, chunk, mb), n, dt);
    comm_recv(R->comm, a, n, dt, peer, &ci);
}

/* ---- collectives: in and out say which members' buffers each one reads and writes ---- */

void wp_bcast(WpRank *R, int buf, int chunk, int shard, int nshards, int group, int root) {
    char l[32];
    CommInfo ci = info(R, l, sizeof l, "W%d", chunk);
    size_t n = chunk_floats(R, chunk, shard, nshards);
    WpDtype dt;
    int me = R->rank == root;
    void *p = xfer(R, buf, n, me, !me, &dt);
    comm_bcast(R->comm, group, p, n, dt, root, &ci);
}

void wp_reduce(WpRank *R, int buf, int chunk, int shard, int nshards, int group, int root) {
    char l[32];
    CommInfo ci = info(R, l, sizeof l, "D%d", chunk);
    size_t n = chunk_floats(R, chunk, shard, nshards);
    WpDtype dt;
    void *p = xfer(R, buf, n, 1, R->rank == root, &dt);
    comm_reduce(R->comm, group, p, n, dt, root, &ci);
}

void wp_allreduce(WpRank *R, int buf, int chunk, int shard, int nshards, int group) {
    char l[32];
    CommInfo ci = info(R, l, sizeof l, "D%d", chunk);
    size_t n = chunk_floats(R, chunk, shard, nshards);
    WpDtype dt;
    void *p = xfer(R, buf, n, 1, 1, &dt);
    comm_allreduce(R->comm, group, p, n, dt, &ci);
}

/* A gather only reads its shard and only writes the whole; a scatter the other way round. */
void wp_allgather(WpRank *R, int shard_buf, int whole_buf, int chunk, int group) {
    char l[32];
    CommInfo ci = info(R, l, sizeof l, "W%d", chunk);
    size_t n = R->chunks[chunk].nparams;
    WpDtype sdt, wdt;
    const void *shard = xfer(R, shard_buf, held(R, shard_buf, chunk), 1, 0, &sdt);
    void *whole = xfer(R, whole_buf, n, 0, 1, &wdt);
    comm_allgather(R->comm, group, shard, whole, n, wdt, &ci);
}

void wp_reduce_scatter(WpRank *R, int whole_buf, int shard_buf, int chunk, int group) {
    char l[32];
    CommInfo ci = info(R, l, sizeof l, "D%d", chunk);
    size_t n = R->chunks[chunk].nparams;
    WpDtype wdt, sdt;
    const void *whole = xfer(R, whole_buf, n, 1, 0, &wdt);
    void *shard = xfer(R, shard_buf, held(R, shard_buf, chunk), 0, 1, &sdt);
    comm_reduce_scatter(R->comm, group, whole, shard, n, wdt, &ci);
}

/* The tied embedding's two uses on two ranks (the verifier's rule: two members, each with a whole
 * end): each member's part all-reduced in place, in fp32 whatever the plan's grad precision, so
 * that both hold a + b, the same bits, and the two masters stay equal. */
void wp_tie_allreduce(WpRank *R, int buf, int chunk, int group) {
    const WpChunk *k = &R->chunks[chunk];
    const WpBufDesc *b = &R->me->bufs[buf];
    size_t n = (size_t)R->cfg.vocab * R->cfg.hidden;
    int emb = chunk == 0, mirror = wp_chunk_mirrors_embedding(&R->cfg, k);
    if (!R->cfg.tied || (!emb && !mirror) || b->dtype != WP_FP32 || b->nshards != 1 || k->nparams < n)
        comm_abort(R->comm, 1, "TIE_ALLREDUCE: expected the whole fp32 gradient of a tied model's embedding or its LM head mirror");
    char l[32];
    CommInfo ci = info(R, l, sizeof l, "T%d", chunk);
    void *p = step_xfer_fp32_part(R, buf, emb ? 0 : k->nparams - n, n, 1, 1);
    comm_allreduce(R->comm, group, p, n, WP_FP32, &ci);
}

/* ---- local, after the turn's transfers ---- */

/* A gradient received and added into the owner's: summed in fp32, stored at dst's format. */
void wp_acc(WpRank *R, int dst, int src, int chunk, int first) {
    step_acc(R, dst, src, held(R, dst, chunk), first);
}

void wp_copy(WpRank *R, int dst, int src, int chunk) {
    step_copy(R, dst, src, held(R, src, chunk));
}

/* The embedding is chunk 0's first V*H parameters, the mirror the last chunk's last V*H
 * (config.c, wp_chunk_tensors); both gradients are the fp32 ones OPT reads (plan.h's rule). */
void wp_tie(WpRank *R, int emb, int head) {
    const WpChunk *last = &R->chunks[R->plan->nchunks - 1];
    size_t n = (size_t)R->cfg.vocab * R->cfg.hidden;
    if (!wp_chunk_mirrors_embedding(&R->cfg, last) || R->me->bufs[emb].dtype != WP_FP32 || R->me->bufs[head].dtype != WP_FP32)
        comm_abort(R->comm, 1, "TIE: expected the fp32 gradients of a tied model's embedding and its LM head mirror");
    step_tie(R, emb, 0, head, last->nparams - n, n);
}

void wp_free(WpRank *R, int buf) {
    (void)R; (void)buf;   /* buffers are static: freeing only ends the content's life in the plan */
}
