/* The LLaMA-style decoder on the CPU, forward and backward, one chunk at a time: the schedules run
 * chunks, so this is the unit of compute. Matches Hugging Face's LlamaForCausalLM. Computes in
 * fp32, or as a bf16 GPU implementation does (wp_scratch_set_precision; model.c lists where it
 * rounds). */
#ifndef WP_MODEL_H
#define WP_MODEL_H

#include <stdint.h>
#include "common/config.h"
#include "common/init.h"   /* wp_chunk_init, which trainers use with the model */

/* Per-rank workspace for the largest chunk it runs; allocated once, never inside a step. */
typedef struct WpScratch WpScratch;
WpScratch *wp_scratch_new(const WpConfig *c, int max_layers);
/* The bytes wp_scratch_new(c, max_layers) allocates (before a bf16 GEMM's copies): what a
 * trainer's memory check counts for it (common/hostmem.h). */
size_t wp_scratch_bytes(const WpConfig *c, int max_layers);
void wp_scratch_free(WpScratch *s);
/* The shape the scratch was made for. */
const WpConfig *wp_scratch_config(const WpScratch *s);
/* The precision the chunks computed with this scratch use; WP_FP32 from wp_scratch_new. WP_BF16:
 * the tensors a bf16 GPU implementation stores as bf16 are rounded to bf16 where they are stored
 * (model.c's table), in fp32 containers: params, x_in, dx_out, stash, x_out and dx_in stay float
 * arrays, and x_out, dx_in and the stash's activations hold bf16 values. The caller must give
 * bf16-valued weights (round its working copy with wp_bf16_round_array). dparams accumulate in
 * fp32. Allocates the work area of a bf16 GEMM if the BLAS has one: call it before the steps,
 * not inside one. Returns 0, or -1 when out of memory. */
int wp_scratch_set_precision(WpScratch *s, WpDtype dtype);
WpDtype wp_scratch_precision(const WpScratch *s);
/* For tests: run the LM head in blocks of this many tokens (at most wp_ce_block_tokens, the
 * default; 0 restores it). */
void wp_scratch_set_ce_block(WpScratch *s, int tokens);
/* fn(ud) is called between layers of forward and backward, so that a communication layer whose
 * transfers only move inside its own calls (MPI without a progress thread) overlaps them with
 * compute for real. NULL: none. */
void wp_scratch_set_progress(WpScratch *s, void (*fn)(void *), void *ud);
/* Context parallelism (cpu/model_cp.h sets both): a layer's attention computed by the hook instead
 * of over the scratch's whole sequence, from the same tensors (att [T, heads*hd] and lse
 * [G, heads, S] from the rotated qkv; backward dqkv written from datt); bf16: the scratch's
 * precision is WP_BF16. NULL: attention.c's again. */
typedef struct WpAttentionHook {
    void (*forward)(void *ud, float *att, float *lse, const float *qkv, int bf16);
    void (*backward)(void *ud, float *dqkv, const float *datt, const float *att, const float *lse,
                     const float *qkv, int bf16);
    void *ud;
} WpAttentionHook;
void wp_scratch_set_attention(WpScratch *s, const WpAttentionHook *h);
/* RoPE at positions pos[0 .. seq) of a sequence of S tokens (the scratch's seq tokens of each
 * sequence are those): the rows of the S-token tables, the same bits. NULL: 0 .. seq, as made.
 * Returns 0, or -1 when out of memory. */
int wp_scratch_set_positions(WpScratch *s, const int *pos, int S);
/* Allocates the staging of offload (config.c's WP_WS_OFFLOAD, for the largest chunk): needed
 * before a chunk runs with recompute = WP_RECOMPUTE_OFFLOAD, whose stash is then host memory
 * (model.c, "offload"). Returns 0, or -1 when out of memory. */
int wp_scratch_set_offload(WpScratch *s);
/* A weight gradient kept in bf16 (g: the chunk's k->nparams values; the caller clears it where a
 * sum starts): wp_chunk_backward and wp_chunk_backward_weights then take dparams NULL and add into
 * g one segment at a time (config.h's wp_grad_segment), summed in fp32 in stage
 * (wp_grad_stage_floats floats of the largest chunk) and rounded once per call, as a whole fp32
 * copy of the chunk's gradient would be. g NULL: dparams again. */
void wp_scratch_set_grad_bf16(WpScratch *s, WpBf16 *g, float *stage);

/* Forward of chunk k on one micro-batch of G sequences of S tokens.
 *   tokens  [G*S]   inputs (first chunk only; may be NULL otherwise)
 *   targets [G*S]   next tokens (last chunk only)
 *   x_in    [G*S*H] the chunk's input (not first)      x_out [G*S*H] its output (not last)
 *   stash   wp_stash_floats(c, k, recompute) floats: what backward needs, the chunk's input
 *           included (so x_in may be reused as soon as forward returns; x_out may be x_in itself:
 *           x_in is read once, first, and train/step_ops.c writes the output in the input's storage)
 * The last chunk adds the sum of the token losses to *loss_sum. */
void wp_chunk_forward(const WpConfig *c, const WpChunk *k, const float *params,
                      const int *tokens, const int *targets, const float *x_in, float *x_out,
                      float *stash, int recompute, WpScratch *s, double *loss_sum);

/* Backward of chunk k on the micro-batch whose forward filled stash.
 *   dx_out [G*S*H]  gradient of the loss w.r.t. x_out (not last; the last chunk starts from
 *                   the loss itself, each token's loss weighted by loss_scale, 1/tokens of the step)
 *   dx_in  [G*S*H]  written: gradient w.r.t. x_in (not first). It may be dx_out itself (in place:
 *                   dx_out is read once, first). On the first chunk, optional storage the call
 *                   may use (its content is then lost), so that the scratch's own residual-stream
 *                   gradient (config.c's WP_WS_DRES) is needed only by a chunk holding both ends.
 *   dparams         accumulated (+=): the gradient of the chunk's parameters */
void wp_chunk_backward(const WpConfig *c, const WpChunk *k, const float *params,
                       const int *tokens, const int *targets,
                       const float *stash, int recompute, const float *dx_out, float *dx_in,
                       float *dparams, float loss_scale, WpScratch *s);

/* The backward split in two for the zero-bubble schedules (BWD_B, then BWD_W; any order of other
 * operations between them). Together they compute exactly what wp_chunk_backward does, the same
 * bits in fp32 and in bf16: the same operations in the same order, only the weight products' dW
 * halves (and what they need recomputed) moved to the second call. T = G*S tokens, width =
 * (heads + 2 kv_heads) * head_dim.
 *
 * wp_chunk_backward_input (BWD_B): dx_in (not first) as wp_chunk_backward writes it. It fills
 * keep, wp_keep_floats(c, k, recompute) floats laid out as config.h's WpKeepLayout, and writes
 * into the stash:
 *   per layer   dy [T*H]      dL/dy, the gradient entering the layer (down_proj's output gradient)
 *               dh [T*F]      down_proj's input gradient dy Wdown, as the whole backward stores it
 *                             (MM_BF16_OUT), before SwiGLU's backward: W recomputes h from the
 *                             stash's gu and dgu = swiglu_backward(dh, gu), rounded as B rounds it
 *               dx2 [T*H]     dL/dx2 (o_proj's output gradient: the residual stream's gradient
 *                             after post_attention_layernorm's backward)
 *               ln1, ln2 [H]  the two norms' weights, copied (W gets no weights; it recomputes the
 *                             normalised inputs rmsnorm(x), rmsnorm(x2) with them)
 *               dln1, dln2 [H] fp32: the two norms' weight gradients for this micro-batch,
 *                             sum over tokens of dxn * (x * rstd), which B computes (rmsnorm_backward
 *                             into -0.0f) and W adds into dparams (one addition, as the whole
 *                             backward's), so the norms' output gradients are not kept
 *               stash qkv     overwritten with qkv's output gradient dqkv [T*width] (attention's
 *                             and RoPE's backward applied, stored as the whole backward stores it):
 *                             qkv itself is dead after attention's backward and has dqkv's size
 *   last chunk  lnf [H]       the final norm's weight, copied
 *               dlnf [H]      fp32: the final norm's weight gradient, as dln1
 *               whead [V*H]   the LM head's weight (the embedding when tied), copied: W recomputes
 *                             every block's logits and dlogits = scale (softmax - onehot) from the
 *                             stash's xf, rstdf and log-sum-exps, the targets and loss_scale, the
 *                             same bits as B's; V*H is smaller than the T*V dlogits whenever T > H
 *   first chunk dx [T*H]      the embedding's output gradient
 *   recompute   the full stash, recomputed by this call (ahead of the rest) into the keep; W reads
 *               it instead of the stash, and its qkv parts are the ones overwritten
 * Every tensor above but the fp32 sums is stored as the whole backward stores it (model.c's table:
 * bf16-valued in bf16; the weights as the caller's working copy). Without recompute the stash must
 * stay until the W half, which reads x, rstd1, att, x2, rstd2, gu, dqkv (over qkv) and on the last
 * chunk xf, rstdf and the logits' log-sum-exps; a layer's attention log-sum-exps are not read
 * again. tokens are not read (the embedding's gradient is the W half's); targets on the last chunk.
 *
 * wp_chunk_backward_weights (BWD_W): dparams += the chunk's parameter gradient, from the stash,
 * the keep, (first chunk) the tokens and (last chunk) the targets and the same loss_scale. */
void wp_chunk_backward_input(const WpConfig *c, const WpChunk *k, const float *params,
                             const int *targets, float *stash, int recompute,
                             const float *dx_out, float *dx_in, float *keep, float loss_scale,
                             WpScratch *s);
void wp_chunk_backward_weights(const WpConfig *c, const WpChunk *k, const int *tokens, const int *targets,
                               const float *stash, int recompute, const float *keep,
                               float *dparams, float loss_scale, WpScratch *s);

#endif
