/* The LLaMA chunk on a CUDA device, in bf16: what the CUDA compute backend's step operations
 * (cuda/step_cuda.c) call, as cpu/model.h is for the CPU backend. Forward and backward of one
 * chunk on one micro-batch, the optimizer and the element-wise conversions between the plan's
 * formats. Everything is asynchronous on the stream the model was created with; nothing here
 * allocates, synchronises with the host or copies between host and device after wc_model_new.
 *
 * Numerics: those of the CPU model in bf16 mode (cpu/model.c's table of rounding points, which
 * names the kernel that stores each tensor): bf16 activations and working weights, fp32 sums in
 * every product and reduction, fp32 statistics (rstd, log-sum-exps), parameter gradients summed in
 * fp32. The CPU run is the reference a GPU run is tested against (tests/gpu).
 *
 * Memory: the stash of a chunk on a micro-batch is wp_stash_bytes(c, k, recompute, WP_BF16) bytes
 * (common/config.h), the workspace wp_workspace_bytes(c, k, recompute, WP_BF16) of the largest
 * chunk the model serves (each part rounded up to 256 bytes) plus the reductions' scratch (under
 * 1 MiB at hidden 2048) and the matrix-product library's work area (wc_model_workspace_bytes says
 * the total; cuda/layout_cuda.h has the arithmetic, tests/unit/test_cuda_layout.c checks it), so
 * that what the planner counted is what the device holds. All pointers below are device pointers
 * unless said; the stash begins on a 4-byte boundary at least (its fp32 statistics). */
#ifndef WP_MODEL_CUDA_H
#define WP_MODEL_CUDA_H

#include <stddef.h>
#include <stdint.h>

/* C linkage for the C headers' functions too, so that CUDA C++ files including this link with the
 * C runtime (common/config.h and common/optim.h have no guards of their own). */
#ifdef __cplusplus
extern "C" {
#endif

#include "common/config.h"
#include "common/optim.h"

typedef struct WcModel WcModel;

/* On the current device, for chunks of at most max_layers layers (with the LM head if has_head;
 * whole: a chunk holds both ends, the whole model, and needs the workspace's own dres),
 * computing on `stream` (a cudaStream_t). Reserves the workspace, the RoPE tables and the
 * cuBLASLt handle and work area. NULL on failure, with the reason in err. */
WcModel *wc_model_new(const WpConfig *c, int max_layers, int has_head, int whole, int recompute, void *stream,
                      char *err, size_t errlen);
void wc_model_free(WcModel *m);
/* Device bytes wc_model_new reserved (for the start-up line), cuDNN's attention workspace included. */
size_t wc_model_workspace_bytes(const WcModel *m);
/* Which attention the model runs, one phrase for the start-up line ("" without layers). */
const char *wc_model_attention(const WcModel *m);
/* For tests: run the LM head in blocks of this many tokens (at most wp_ce_block_tokens, the
 * default; 0 restores it), as cpu/model.h's wp_scratch_set_ce_block. Plans the head's products
 * again: call it between steps, never inside one. Returns 0, or -1 with the reason in err. */
int wc_model_set_ce_block(WcModel *m, int tokens, char *err, size_t errlen);

/* Forward of chunk k on one micro-batch of G sequences of S tokens (T = G*S).
 *   params   bf16 [k->nparams], the chunk's working weights (order of wp_chunk_tensors)
 *   tokens   int32 [T] (first chunk)        targets int32 [T] (last chunk)
 *   x_in     bf16 [T*H] (not first)         x_out   bf16 [T*H] (not last)
 *   stash    wp_stash_bytes(c, k, recompute, WP_BF16) bytes: what backward needs, x_in included
 *   loss_sum the last chunk adds the sum of its token losses (fp64) */
void wc_chunk_forward(WcModel *m, const WpChunk *k, const uint16_t *params, const int *tokens,
                      const int *targets, const uint16_t *x_in, uint16_t *x_out, void *stash,
                      double *loss_sum);

/* Backward of chunk k on the micro-batch whose forward filled stash.
 *   dx_out   bf16 [T*H] gradient w.r.t. x_out (not last; the last chunk starts from the loss,
 *            each token's loss weighted by loss_scale)
 *   dx_in    bf16 [T*H] written (not first)
 *   dparams  fp32 [k->nparams], accumulated (+=) */
void wc_chunk_backward(WcModel *m, const WpChunk *k, const uint16_t *params, const int *tokens,
                       const int *targets, const void *stash, const uint16_t *dx_out,
                       uint16_t *dx_in, float *dparams, float loss_scale);

/* The backward split in two for the zero-bubble schedules, as cpu/model.h's
 * wp_chunk_backward_input and wp_chunk_backward_weights (which list what the keep holds and why):
 * together they compute what wc_chunk_backward computes, the same operations in the same order
 * within each half, the norms' weight-gradient sums kept by B and added by W (one addition, as the
 * whole backward's), so the same bits.
 *   wc_chunk_backward_input (BWD_B): dx_in (not first) as wc_chunk_backward writes it; fills keep,
 *            wp_keep_bytes(c, k, recompute, WP_BF16) bytes laid out as layout_cuda.h's
 *            wc_chunk_keep, and overwrites each layer's qkv in the stash (or, with recompute, in the
 *            keep's recomputed stash) with qkv's output gradient. targets: last chunk.
 *   wc_chunk_backward_weights (BWD_W): dparams += the chunk's parameter gradient, from the stash,
 *            the keep, the tokens (first chunk), and the targets and loss_scale (last chunk: the
 *            logits are recomputed with the kept head weight). Gets no weights. */
void wc_chunk_backward_input(WcModel *m, const WpChunk *k, const uint16_t *params, const int *targets,
                             void *stash, const uint16_t *dx_out, uint16_t *dx_in, void *keep,
                             float loss_scale);
void wc_chunk_backward_weights(WcModel *m, const WpChunk *k, const int *tokens, const int *targets,
                               const void *stash, const void *keep, float *dparams, float loss_scale);

/* A weight gradient kept in bf16 (g: the chunk's k->nparams values on the device; the caller
 * clears it where a sum starts): wc_chunk_backward and wc_chunk_backward_weights then take dparams
 * NULL and add into g one segment at a time (config.h's wp_grad_segment), summed in fp32 in stage
 * (device, wp_grad_stage_floats floats of the largest chunk) and rounded once per call, as
 * cpu/model.h's wp_scratch_set_grad_bf16. g NULL: dparams again. */
void wc_model_set_grad_bf16(WcModel *m, uint16_t *g, float *stage);

/* ---- element-wise, on the model's stream ---- */

/* dst = src rounded to bf16 (to nearest even), or widened. */
void wc_f32_to_bf16(WcModel *m, uint16_t *dst, const float *src, size_t n);
void wc_bf16_to_f32(WcModel *m, float *dst, const uint16_t *src, size_t n);
/* dst (+)= src for gradients: dst_dtype, src_dtype are WpDtype; the sum is in fp32, rounded
 * where dst is bf16; first: dst = src. */
void wc_acc(WcModel *m, void *dst, int dst_dtype, const void *src, int src_dtype, size_t n, int first);

/* The sum of squares of g[0..n) into *out (fp64, device), in an order that depends only on n. */
void wc_sumsq(WcModel *m, const float *g, size_t n, double *out);

/* AdamW on w[0..n) (fp32 master) with gradient g * grad_scale and moments m1, m2, as
 * cpu/adamw.c computes it; wd: weight decay (0 for norms); t: the 1-based update. If w16 is not
 * NULL the updated weights are also written there rounded to bf16 (the working copy). */
void wc_adamw(WcModel *m, const WpAdamW *opt, float *w, const float *g, float *m1, float *m2,
              size_t n, float lr, float wd, float grad_scale, long t, uint16_t *w16);

#ifdef __cplusplus
}
#endif

#endif
