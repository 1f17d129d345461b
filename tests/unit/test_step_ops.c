/* The step's operations (runtime/train/step_ops.c) over a recording compute backend and a
 * recording communication layer: each call of train/step_backend.h and common/comm.h is logged,
 * and the log is compared with what each operation must ask. The CPU parity tests see only the
 * values a step ends with; this sees what a device backend depends on and the CPU cannot show:
 * which members' buffers a collective converts in and out (each is a kernel on the CUDA stream),
 * in which format and how many elements, the slots' order of taking and giving back, and that
 * an activation sent is given back only after the turn's wait. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include "check.h"
#include "train/step_backend.h"

static char logbuf[8192];
static int slot_id;                /* the recording backend's slots are numbered from 1 */
static jmp_buf aborted;
static char abort_msg[256];

static void say(const char *fmt, ...) {
    size_t k = strlen(logbuf);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(logbuf + k, sizeof logbuf - k, fmt, ap);
    va_end(ap);
    k = strlen(logbuf);
    if (k + 1 < sizeof logbuf) { logbuf[k] = ';'; logbuf[k + 1] = 0; }
}

static const char *dtn(WpDtype dt) { return dt == WP_BF16 ? "bf16" : "fp32"; }
static const char *const kinds[SLOT_KINDS] = { "act", "grad", "stash", "keep" };
static int id(const void *p) { return (int)(intptr_t)p; }

/* ---- the recording compute backend ---- */

void *step_slot_take(WpRank *R, int kind, int chunk, int mb, size_t *tag) {
    (void)R;
    *tag = (size_t)++slot_id;
    say("take %s c%d mb%d =%d", kinds[kind], chunk, mb, slot_id);
    return (void *)(intptr_t)slot_id;
}
void step_slot_give(WpRank *R, int kind, void *p, size_t tag) {
    (void)R;
    say("give %s %d", kinds[kind], id(p));
    CHECK((size_t)id(p) == tag, "the tag comes back with its slot");
}
void *step_xfer(WpRank *R, int b, size_t n, WpDtype dt, int in, int out) {
    (void)R;
    say("xfer b%d n%zu %s in%d out%d", b, n, dtn(dt), in, out);
    return (void *)(intptr_t)(100 + b);
}
void *step_xfer_fp32_part(WpRank *R, int b, size_t off, size_t n, int in, int out) {
    (void)R;
    say("xfer_part b%d+%zu n%zu in%d out%d", b, off, n, in, out);
    return (void *)(intptr_t)(1000 + 100 * b + (int)off);
}
void *step_act_send(WpRank *R, void *slot, size_t n, WpDtype dt) {
    (void)R;
    say("act_send %d n%zu %s", id(slot), n, dtn(dt));
    return slot;
}
void *step_act_recv(WpRank *R, void *slot, size_t n, WpDtype dt) {
    (void)R;
    say("act_recv %d n%zu %s", id(slot), n, dtn(dt));
    return slot;
}
void step_turn_done(WpRank *R) { (void)R; say("turn_done"); }
void step_batch(WpRank *R, int mb, const int **tokens, const int **targets) {
    (void)R;
    static int tok[1], tgt[1];
    say("batch mb%d", mb);
    *tokens = tok;
    *targets = tgt;
}
StepSpan step_span_start(WpRank *R) { (void)R; say("span"); return (StepSpan){ 1.0, NULL }; }
void step_span_end(WpRank *R, StepSpan s, const char *cat, const char *name) {
    (void)R; (void)s;
    say("span_end %s %s", cat, name);
}
float *step_grad_open(WpRank *R, int d, size_t n, int first) {
    (void)R;
    say("grad_open b%d n%zu first%d", d, n, first);
    return (float *)(intptr_t)(200 + d);
}
void step_grad_close(WpRank *R, int d, float *grad, size_t n) {
    (void)R;
    say("grad_close b%d n%zu %d", d, n, id(grad));
}
void step_forward(WpRank *R, const WpChunk *k, int w, const int *tokens, const int *targets, const void *x_in,
                  void *x_out, void *stash) {
    (void)R;
    say("fwd c%d w%d tok%d in%d out%d stash%d", k->index, w, tokens != NULL, id(x_in), id(x_out), id(stash));
    (void)targets;
}
void step_backward(WpRank *R, const WpChunk *k, int w, const int *tokens, const int *targets, const void *stash,
                   const void *dy, void *dx, float *grad) {
    (void)R; (void)targets;
    say("bwd c%d w%d tok%d stash%d dy%d dx%d grad%d", k->index, w, tokens != NULL, id(stash), id(dy), id(dx), id(grad));
}
void step_backward_input(WpRank *R, const WpChunk *k, int w, const int *targets, void *stash, const void *dy,
                         void *dx, void *keep) {
    (void)R;
    say("bwd_b c%d w%d tgt%d stash%d dy%d dx%d keep%d", k->index, w, targets != NULL, id(stash), id(dy), id(dx), id(keep));
}
void step_backward_weights(WpRank *R, const WpChunk *k, const int *tokens, const int *targets, const void *stash,
                           const void *keep, float *grad) {
    (void)R; (void)tokens; (void)targets;
    say("bwd_w c%d stash%d keep%d grad%d", k->index, id(stash), id(keep), id(grad));
}
void step_acc(WpRank *R, int dst, int src, size_t n, int first) { (void)R; say("acc b%d b%d n%zu first%d", dst, src, n, first); }
void step_copy(WpRank *R, int dst, int src, size_t n) { (void)R; say("copy b%d b%d n%zu", dst, src, n); }
void step_tie(WpRank *R, int a, size_t ao, int b, size_t bo, size_t n) { (void)R; say("tie b%d+%zu b%d+%zu n%zu", a, ao, b, bo, n); }

/* ---- the recording communication layer ---- */

void comm_abort(Comm *c, int status, const char *fmt, ...) {
    (void)c; (void)status;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(abort_msg, sizeof abort_msg, fmt, ap);
    va_end(ap);
    longjmp(aborted, 1);
}
void comm_send(Comm *c, const void *buf, size_t n, WpDtype dt, int peer, const CommInfo *info) {
    (void)c;
    say("send %d n%zu %s to%d %s t%d", id(buf), n, dtn(dt), peer, info->label, info->turn);
}
void comm_recv(Comm *c, void *buf, size_t n, WpDtype dt, int peer, const CommInfo *info) {
    (void)c;
    say("recv %d n%zu %s from%d %s t%d", id(buf), n, dtn(dt), peer, info->label, info->turn);
}
void comm_bcast(Comm *c, int g, void *buf, size_t n, WpDtype dt, int root, const CommInfo *info) {
    (void)c;
    say("bcast g%d %d n%zu %s root%d %s", g, id(buf), n, dtn(dt), root, info->label);
}
void comm_reduce(Comm *c, int g, void *buf, size_t n, WpDtype dt, int root, const CommInfo *info) {
    (void)c;
    say("reduce g%d %d n%zu %s root%d %s", g, id(buf), n, dtn(dt), root, info->label);
}
void comm_allreduce(Comm *c, int g, void *buf, size_t n, WpDtype dt, const CommInfo *info) {
    (void)c;
    say("allreduce g%d %d n%zu %s %s", g, id(buf), n, dtn(dt), info->label);
}
void comm_allgather(Comm *c, int g, const void *shard, void *full, size_t n, WpDtype dt, const CommInfo *info) {
    (void)c;
    say("allgather g%d %d %d n%zu %s %s", g, id(shard), id(full), n, dtn(dt), info->label);
}
void comm_reduce_scatter(Comm *c, int g, const void *full, void *shard, size_t n, WpDtype dt, const CommInfo *info) {
    (void)c;
    say("reduce_scatter g%d %d %d n%zu %s %s", g, id(full), id(shard), n, dtn(dt), info->label);
}
void comm_turn_posted(Comm *c) { (void)c; say("posted"); }
double comm_wait_turn(Comm *c) { (void)c; say("wait"); return 0; }

/* ---- a rank: three chunks of 10, 12 and 14 parameters, activations of 1 x 2 x 4 ---- */

/* b0: a master of chunk 1 (fp32, its copy bf16); b1: working weights (bf16); b2: an owner's
 * gradient (fp32); b3: a gradient (bf16); b4: b0's shard 1 of 2, fp32. */
static const WpBufDesc bufs[] = {
    { "m", WP_BUF_W, 1, 1, 0, 1, 12, WP_FP32, WP_BF16 }, { "w", WP_BUF_W, 0, -1, 0, 1, 14, WP_BF16, WP_BF16 },
    { "g", WP_BUF_D, 0, 1, 0, 1, 12, WP_FP32, WP_FP32 }, { "d", WP_BUF_D, 0, -1, 0, 1, 14, WP_BF16, WP_BF16 },
    { "s", WP_BUF_W, 0, 1, 1, 2, 6, WP_FP32, WP_FP32 },
};
static WpChunk chunks[3] = { { 0, 0, 1, 1, 0, 10 }, { 1, 1, 1, 0, 0, 12 }, { 2, 2, 1, 0, 1, 14 } };

static WpRank *rank_new(int rank, int tracing) {
    static WpPlanDesc plan;
    static WpRankDesc me;
    static WpRank R;
    memset(&plan, 0, sizeof plan);
    plan.precision = WP_BF16;
    plan.grad_precision = WP_BF16;
    me.nbufs = 5;
    me.bufs = bufs;
    memset(&R, 0, sizeof R);
    R.plan = &plan;
    R.me = &me;
    R.rank = rank;
    R.cfg.mbs = 1;
    R.cfg.seq = 2;
    R.cfg.hidden = 4;
    R.chunks = chunks;
    R.tracing = tracing;
    logbuf[0] = 0;
    slot_id = 0;
    return &R;
}

#define EXPECT(what, want) CHECK(!strcmp(logbuf, want), "%s:\n  got  %s\n  want %s", what, logbuf, want)

/* The call ends the job (comm_abort) with the message why, having asked nothing of the backend
 * or the communication layer. what names the case. */
#define EXPECT_ABORT(call, why, what) do {                                                              \
        volatile int aborted_ = 0;                                                                      \
        logbuf[0] = 0;                                                                                  \
        if (setjmp(aborted) == 0) call;                                                                 \
        else aborted_ = 1;                                                                              \
        CHECK(aborted_ && !strcmp(abort_msg, why) && !logbuf[0], "%s: %s (asked: %s)", what, abort_msg, logbuf); \
    } while (0)

static void test_collectives(void) {
    WpRank *R = rank_new(3, 0);
    wp_turn_begin(R, 7);
    wp_bcast(R, 1, 2, 0, 1, 0, 3);
    EXPECT("a broadcast's root reads its buffer and is not written", "xfer b1 n14 bf16 in1 out0;bcast g0 101 n14 bf16 root3 W2;");
    logbuf[0] = 0;
    wp_bcast(R, 1, 2, 0, 1, 0, 5);
    EXPECT("another member is written, not read", "xfer b1 n14 bf16 in0 out1;bcast g0 101 n14 bf16 root5 W2;");
    logbuf[0] = 0;
    wp_reduce(R, 2, 1, 0, 1, 1, 3);
    EXPECT("a reduce's root: read and written", "xfer b2 n12 bf16 in1 out1;reduce g1 102 n12 bf16 root3 D1;");
    logbuf[0] = 0;
    wp_reduce(R, 2, 1, 0, 1, 1, 0);
    EXPECT("another member: only read", "xfer b2 n12 bf16 in1 out0;reduce g1 102 n12 bf16 root0 D1;");
    logbuf[0] = 0;
    wp_allreduce(R, 3, 2, 1, 2, 0);
    EXPECT("an all-reduce of a shard: its elements, read and written", "xfer b3 n7 bf16 in1 out1;allreduce g0 103 n7 bf16 D2;");
    logbuf[0] = 0;
    wp_allgather(R, 4, 0, 1, 2);
    EXPECT("a gather reads the shard (its held elements), writes the whole",
           "xfer b4 n6 bf16 in1 out0;xfer b0 n12 bf16 in0 out1;allgather g2 104 100 n12 bf16 W1;");
    logbuf[0] = 0;
    wp_reduce_scatter(R, 2, 4, 1, 2);
    EXPECT("a scatter reads the whole, writes the shard",
           "xfer b2 n12 bf16 in1 out0;xfer b4 n6 bf16 in0 out1;reduce_scatter g2 102 104 n12 bf16 D1;");
    logbuf[0] = 0;
    wp_send(R, 0, 1, 1, 2, 4);
    wp_recv(R, 3, 2, 0, 1, 2);
    EXPECT("sends read, receives write; W and D named by the buffer's kind",
           "xfer b0 n6 bf16 in1 out0;send 100 n6 bf16 to4 W1 t7;xfer b3 n14 bf16 in0 out1;recv 103 n14 bf16 from2 D2 t7;");
    logbuf[0] = 0;
    R->plan = &(WpPlanDesc){ .precision = WP_BF16, .grad_precision = WP_FP32, .weight_wire_fp32 = 1 };
    wp_send(R, 1, 2, 0, 1, 1);
    wp_send(R, 3, 2, 0, 1, 1);
    EXPECT("the plan's wire formats: weights in fp32, gradients at the grad precision",
           "xfer b1 n14 fp32 in1 out0;send 101 n14 fp32 to1 W2 t7;xfer b3 n14 fp32 in1 out0;send 103 n14 fp32 to1 D2 t7;");
    logbuf[0] = 0;
    wp_acc(R, 2, 4, 1, 1);
    wp_copy(R, 1, 4, 1);
    EXPECT("ACC counts its destination's elements, COPY its source's", "acc b2 b4 n12 first1;copy b1 b4 n6;");
}

static void test_activations(void) {
    WpRank *R = rank_new(0, 0);
    wp_turn_begin(R, 1);
    wp_recv_act(R, WP_ACT, 1, 0, 0);
    wp_turn_compute(R);
    wp_turn_wait(R);
    wp_fwd(R, 1, 0, 0);
    wp_send_act(R, WP_ACT, 2, 0, 2);
    wp_turn_end(R);
    EXPECT("a middle chunk's forward: no batch; its output written in its input's storage (the stash holds the "
           "input); what it sent, after the wait",
           "take act c1 mb0 =1;act_recv 1 n8 bf16;recv 1 n8 bf16 from0 A1 t1;posted;wait;turn_done;"
           "take stash c1 mb0 =2;fwd c1 w0 tok0 in1 out1 stash2;"
           "act_send 1 n8 bf16;send 1 n8 bf16 to2 A2 t1;");
    logbuf[0] = 0;
    wp_turn_begin(R, 2);
    wp_recv_act(R, WP_GRAD, 2, 0, 2);
    wp_turn_wait(R);
    EXPECT("the sent activation is given back after the next wait", "take grad c2 mb0 =3;act_recv 3 n8 bf16;recv 3 n8 bf16 from2 G2 t2;wait;turn_done;give act 1;");
    logbuf[0] = 0;
    wp_bwd(R, 1, 0, 0, 2, 1);
    EXPECT("a backward: its gradient sum opened before, closed after; its input gradient written in dy's storage, "
           "which it keeps; the stash given back",
           "grad_open b2 n12 first1;bwd c1 w0 tok0 stash2 dy3 dx3 grad202;grad_close b2 n12 202;"
           "give stash 2;");
    EXPECT_ABORT(wp_send_act(R, WP_ACT, 1, 3, 0), "turn 2: the activation of chunk 1 for micro-batch 3 is not here",
                 "a send of an activation that is not here");
    step_ops_free(R);
    CHECK(R->nslots == 0 && !R->slots, "freed");
}

static void test_ends_and_split(void) {
    WpRank *R = rank_new(0, 1);
    wp_turn_begin(R, 0);
    wp_fwd(R, 0, 1, 1);
    EXPECT("the first chunk reads its batch; traced as F0 mb1",
           "span;batch mb1;take stash c0 mb1 =1;take act c1 mb1 =2;fwd c0 w1 tok1 in0 out2 stash1;span_end forward F0 mb1;");
    logbuf[0] = 0;
    wp_recv_act(R, WP_ACT, 2, 1, 0);
    wp_fwd(R, 2, 1, 1);
    wp_bwd_b(R, 2, 1, 1);
    wp_bwd_w(R, 2, 1, 3, 0);
    EXPECT("the last chunk: no output; the split backward keeps the stash until W",
           "take act c2 mb1 =3;act_recv 3 n8 bf16;recv 3 n8 bf16 from0 A2 t0;"
           "span;batch mb1;take stash c2 mb1 =4;fwd c2 w1 tok1 in3 out0 stash4;give act 3;span_end forward F2 mb1;"
           "span;batch mb1;take grad c2 mb1 =5;take keep c2 mb1 =6;bwd_b c2 w1 tgt1 stash4 dy0 dx5 keep6;span_end backward Bb2 mb1;"
           "span;batch mb1;grad_open b3 n14 first0;bwd_w c2 stash4 keep6 grad203;grad_close b3 n14 203;give keep 6;give stash 4;"
           "span_end backward Bw2 mb1;");
    logbuf[0] = 0;
    step_ops_free(R);
    CHECK(strstr(logbuf, "give stash 1;") && strstr(logbuf, "give act 2;") && strstr(logbuf, "give grad 5;") &&
          strlen(logbuf) == strlen("give stash 1;give act 2;give grad 5;"), "what is held at the end is given back: %s", logbuf);
}

/* The rank above as a tied model's (V 2) whose plan has its three chunks: the last chunk's
 * last V*H mirror the embedding. plan: the plan it points to. */
static WpRank *tied_rank(WpPlanDesc *plan) {
    WpRank *R = rank_new(0, 0);
    *plan = *R->plan;
    plan->nchunks = 3;
    R->plan = plan;
    R->cfg.vocab = 2;
    R->cfg.tied = 1;
    return R;
}

/* TIE of a tied model: the embedding is chunk 0's first V*H parameters, the head mirror the last
 * chunk's last V*H (V 2, H 4: 8 of chunk 2's 14, from 6); refused unless both are fp32 gradients
 * of a model whose last chunk mirrors the embedding. */
static void test_tie(void) {
    WpPlanDesc plan;
    WpRank *R = tied_rank(&plan);
    wp_tie(R, 2, 4);
    EXPECT("TIE adds the embedding's gradient and the head mirror's, at their offsets", "tie b2+0 b4+6 n8;");
    const char *why = "TIE: expected the fp32 gradients of a tied model's embedding and its LM head mirror";
    R->cfg.tied = 0;
    EXPECT_ABORT(wp_tie(R, 2, 4), why, "an untied model");
    R->cfg.tied = 1;
    EXPECT_ABORT(wp_tie(R, 2, 3), why, "a bf16 buffer");
}

/* TIE_ALLREDUCE: the tied part of this member's buffer (the embedding at chunk 0's start, the
 * mirror at the last chunk's end: V 2, H 4, from 6 of chunk 2's 14) all-reduced in place, in fp32;
 * refused for a chunk without either end, a bf16 buffer, a shard, or an untied model. */
static void test_tie_allreduce(void) {
    WpPlanDesc plan;
    WpRank *R = tied_rank(&plan);
    wp_tie_allreduce(R, 2, 0, 1);
    wp_tie_allreduce(R, 2, 2, 1);
    EXPECT("TIE_ALLREDUCE: each end's V*H in place, fp32, labelled T<chunk>",
           "xfer_part b2+0 n8 in1 out1;allreduce g1 1200 n8 fp32 T0;xfer_part b2+6 n8 in1 out1;allreduce g1 1206 n8 fp32 T2;");
    const char *why = "TIE_ALLREDUCE: expected the whole fp32 gradient of a tied model's embedding or its LM head mirror";
    const struct { int buf, chunk, tied; const char *what; } bad[] = {
        { 2, 1, 1, "a middle chunk" }, { 3, 0, 1, "a bf16 buffer" }, { 4, 0, 1, "a shard" }, { 2, 2, 0, "an untied model" },
        { 2, 0, 0, "an untied model's first chunk" },
    };
    for (int k = 0; k < 5; k++) {
        R->cfg.tied = bad[k].tied;
        EXPECT_ABORT(wp_tie_allreduce(R, bad[k].buf, bad[k].chunk, 1), why, bad[k].what);
    }
}

int main(void) {
    test_collectives();
    test_tie();
    test_tie_allreduce();
    test_activations();
    test_ends_and_split();
    return check_summary("test_step_ops");
}
