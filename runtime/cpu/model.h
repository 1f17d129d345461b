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
void wp_scratch_free(WpScratch *s);
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

/* Forward of chunk k on one micro-batch of G sequences of S tokens.
 *   tokens  [G*S]   inputs (first chunk only; may be NULL otherwise)
 *   targets [G*S]   next tokens (last chunk only)
 *   x_in    [G*S*H] the chunk's input (not first)      x_out [G*S*H] its output (not last)
 *   stash   wp_stash_floats(c, k, recompute) floats: what backward needs, the chunk's input
 *           included (so x_in may be reused as soon as forward returns)
 * The last chunk adds the sum of the token losses to *loss_sum. */
void wp_chunk_forward(const WpConfig *c, const WpChunk *k, const float *params,
                      const int *tokens, const int *targets, const float *x_in, float *x_out,
                      float *stash, int recompute, WpScratch *s, double *loss_sum);

/* Backward of chunk k on the micro-batch whose forward filled stash.
 *   dx_out [G*S*H]  gradient of the loss w.r.t. x_out (not last; the last chunk starts from
 *                   the loss itself, each token's loss weighted by loss_scale, 1/tokens of the step)
 *   dx_in  [G*S*H]  written: gradient w.r.t. x_in (not first)
 *   dparams         accumulated (+=): the gradient of the chunk's parameters */
void wp_chunk_backward(const WpConfig *c, const WpChunk *k, const float *params,
                       const int *tokens, const int *targets,
                       const float *stash, int recompute, const float *dx_out, float *dx_in,
                       float *dparams, float loss_scale, WpScratch *s);

/* The backward split in two for the zero-bubble schedules (BWD_B, then BWD_W; any order of other
 * operations between them). Together they compute exactly what wp_chunk_backward does, the same
 * bits in fp32 and in bf16: the same operations in the same order, only the weight products'
 * dW halves and the norms' dw sums moved to the second call.
 *
 * wp_chunk_backward_input (BWD_B): dx_in (not first) as wp_chunk_backward writes it, and fills
 * keep, wp_keep_floats(c, k, recompute) floats laid out as config.h's WpKeepLayout:
 *   per layer   dy = dL/dy [T*H]            the down projection's output gradient
 *               dgu [T*2F]                  gate_up's output gradient (after SwiGLU's backward)
 *               dxn2 [T*H]                  post_attention_layernorm's output gradient
 *               dx2 = dL/dx2 [T*H]          o_proj's output gradient (the residual after attention)
 *               dqkv [T*(heads+2kv)*hd]     qkv's output gradient (RoPE's backward applied)
 *               dxn1 [T*H]                  input_layernorm's output gradient
 *               ln1, ln2 [H]                the two norms' weights (the W half recomputes the
 *                                           normalised inputs and gets no weights of its own)
 *   last chunk  dxnf [T*H]                  the final norm's output gradient
 *               dlogits [T*V]               the LM head's output gradient, every block
 *                                           (cross-entropy's backward, rounded in bf16)
 *               lnf [H]                     the final norm's weight
 *   first chunk dx [T*H]                    the embedding's output gradient
 *   recompute   the full stash, recomputed by this call (ahead of the rest), which the W half
 *               reads instead of the stash
 * Every tensor above is stored as the whole backward stores it (model.c's table: bf16-valued in
 * bf16, the norm weights as the caller's working copy). The stash must stay until the W half
 * (without recompute it is read again there: x, x2, rstd1/2, att, gu, the head's xf, rstdf).
 * tokens are not read (the embedding's gradient is the W half's); targets on the last chunk.
 *
 * wp_chunk_backward_weights (BWD_W): dparams += the chunk's parameter gradient, from the stash,
 * the keep and (first chunk) the tokens. */
void wp_chunk_backward_input(const WpConfig *c, const WpChunk *k, const float *params,
                             const int *targets, const float *stash, int recompute,
                             const float *dx_out, float *dx_in, float *keep, float loss_scale,
                             WpScratch *s);
void wp_chunk_backward_weights(const WpConfig *c, const WpChunk *k, const int *tokens,
                               const float *stash, int recompute, const float *keep,
                               float *dparams, WpScratch *s);

#endif
