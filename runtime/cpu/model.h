/* The LLaMA-style decoder on the CPU (fp32), forward and backward, one chunk at a time: the
 * schedules run chunks, so this is the unit of compute. Matches Hugging Face's LlamaForCausalLM. */
#ifndef WP_MODEL_H
#define WP_MODEL_H

#include <stdint.h>
#include "common/config.h"
#include "common/init.h"   /* wp_chunk_init, which trainers use with the model */

/* Per-rank workspace for the largest chunk it runs; allocated once, never inside a step. */
typedef struct WpScratch WpScratch;
WpScratch *wp_scratch_new(const WpConfig *c, int max_layers);
void wp_scratch_free(WpScratch *s);
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

#endif
