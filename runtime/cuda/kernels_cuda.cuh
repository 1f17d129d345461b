/* The CUDA model's kernels, one launcher per kernel, each in the file its name says: what
 * model_cuda.cu drives and what tests/gpu/test_kernels.cu checks one by one against the CPU's
 * bf16 reference (cpu/kernels.h, whose functions these mirror). Activations and working weights
 * are bf16 (uint16_t bits), activations row-major [T, width] with T = G*S tokens; statistics and
 * parameter gradients fp32. Every launcher is asynchronous on the given stream and allocates
 * nothing: the scratch a reduction needs is passed in (model_cuda.cu reserves it at start). */
#ifndef WP_KERNELS_CUDA_CUH
#define WP_KERNELS_CUDA_CUH

#include <stddef.h>
#include <stdint.h>
#include <cuda_runtime.h>
#include "cuda/layout_cuda.h"   /* WC_NORM_SPLITS, WC_SUMSQ_BLOCKS: the reductions' scratch sizes */

/* convert_cuda.cu: f32 <-> bf16, gradient accumulation across formats, the sum of squares. */
void wc_convert_f32_to_bf16(uint16_t *dst, const float *src, size_t n, cudaStream_t s);
void wc_convert_bf16_to_f32(float *dst, const uint16_t *src, size_t n, cudaStream_t s);
/* dst (+)= src, dtypes WpDtype (0 fp32, 1 bf16): the sum in fp32, rounded once where dst is bf16;
 * first: dst = src. */
void wc_acc_launch(void *dst, int dst_dtype, const void *src, int src_dtype, size_t n, int first,
                   cudaStream_t s);
/* x[0..n) = v (fp32): -0.0f starts a sum whose first addition must give its addend's bits. */
void wc_fill_f32(float *x, float v, size_t n, cudaStream_t s);
/* *out = sum of g[i]^2 in fp64, the same tree for the same n on any device: WC_SUMSQ_BLOCKS fixed
 * ranges, each summed by a fixed tree of threads, then the partials by a fixed tree. */
void wc_sumsq_launch(const float *g, size_t n, double *partials /* [WC_SUMSQ_BLOCKS] */, double *out,
                     cudaStream_t s);

/* rmsnorm_cuda.cu: out = bf16((x * rstd) * w), rstd = 1 / sqrt(mean(x^2) + eps) in fp32. */
void wc_rmsnorm_forward(uint16_t *out, float *rstd, const uint16_t *x, const uint16_t *w, int T, int H,
                        float eps, cudaStream_t s);
/* out = bf16((x * rstd) * w) with the forward's rstd. */
void wc_rmsnorm_recompute(uint16_t *out, const uint16_t *x, const uint16_t *w, const float *rstd, int T,
                          int H, cudaStream_t s);
/* dx = bf16((accumulate ? dx : 0) + rstd * (dout * w - xhat * mean(dout * w * xhat))) and
 * dw += sum over rows of dout * xhat (fp32), the rows summed in WC_NORM_SPLITS fixed ranges whose
 * partial sums go through partials [WC_NORM_SPLITS * H] and are added in order. */
void wc_rmsnorm_backward(uint16_t *dx, int accumulate, float *dw, const uint16_t *dout, const uint16_t *x,
                         const uint16_t *w, const float *rstd, int T, int H, float *partials, cudaStream_t s);

/* rope_cuda.cu: rotation in place of the q and k heads of qkv [T, (heads + 2 kv) * hd] with the
 * fp32 tables [S, hd/2]; rounded to bf16 as stored. Backward: the transpose rotation. */
void wc_rope_forward(uint16_t *qkv, const float *cos_t, const float *sin_t, int T, int S, int heads,
                     int kv_heads, int hd, cudaStream_t s);
void wc_rope_backward(uint16_t *dqkv, const float *cos_t, const float *sin_t, int T, int S, int heads,
                      int kv_heads, int hd, cudaStream_t s);

/* swiglu_cuda.cu: h = bf16(silu(g) * u) from gu [T, 2F]; dgu = bf16(...) from dh. */
void wc_swiglu_forward(uint16_t *h, const uint16_t *gu, int T, int F, cudaStream_t s);
void wc_swiglu_backward(uint16_t *dgu, const uint16_t *dh, const uint16_t *gu, int T, int F, cudaStream_t s);

/* embedding_cuda.cu: x[t] = table[tokens[t]]; dtable[tokens[t]] += dx[t] (fp32), each vocabulary
 * row summed in token order by one block: deterministic, no atomics. */
void wc_embedding_forward(uint16_t *x, const int *tokens, const uint16_t *table, int T, int H, int V,
                          cudaStream_t s);
void wc_embedding_backward(float *dtable, const uint16_t *dx, const int *tokens, int T, int H, int V,
                           cudaStream_t s);

/* crossentropy_cuda.cu, on one block of n tokens of fp32 logits [n, V]:
 * forward: lse[t] (fp32) and each token's loss (fp64, 0 for a target < 0) into losses[t];
 * wc_loss_sum then adds sum(losses[0..n)) to *loss_sum in a fixed order. */
void wc_ce_forward(float *lse, double *losses, const float *logits, const int *targets, int n, int V,
                   cudaStream_t s);
void wc_loss_sum(double *loss_sum, const double *losses, int n, cudaStream_t s);
/* backward, in place: row t of the fp32 logits becomes bf16 dlogits = bf16(scale * (softmax -
 * onehot)) in the first half of the row's own bytes, so the dlogits are a bf16 [n, V] matrix with
 * leading dimension 2V (elements) at the same address: no second [n, V] buffer. */
void wc_ce_backward(float *logits, const float *lse, const int *targets, int n, int V, float scale,
                    cudaStream_t s);

/* attention_cuda.cu, attention_tc_cuda.cu: causal grouped-query flash attention on qkv
 * [T, (heads + 2 kv) * hd], output [T, heads * hd] and lse [G, heads, S] fp32; never an S x S
 * matrix. bf16 inputs, fp32 sums, P rounded to bf16 before P V (and P, dS before their products in
 * backward), as the CPU reference does. Two implementations: on tensor cores (mma.sync, head
 * dimensions 64 and 128, 16-byte aligned tensors) and on CUDA cores (any even hd <= 128);
 * wc_attention_forward/backward run cuDNN's (attention_cudnn.cu) for a shape wc_attention_plan
 * planned with it, else the tensor-core one where it applies, else the CUDA-core one. The
 * environment's WP_ATTENTION, read once by the first wc_attention_setup, chooses: unset or "auto"
 * as just said, "cudnn" cuDNN or an error, "own" our kernels (tensor-core where they apply),
 * "reference" the CUDA-core ones. wc_attention_setup once per head dimension before any launch (it
 * raises the kernels' shared-memory limits, of both kinds); -1 with the reason in err if hd is not
 * supported (hd <= 128, even) or WP_ATTENTION is none of those. */
int wc_attention_setup(int hd, char *err, size_t errlen);
void wc_attention_forward(uint16_t *out, float *lse, const uint16_t *qkv, int G, int S, int heads,
                          int kv_heads, int hd, cudaStream_t s);
/* dqkv written (not accumulated), bf16. */
void wc_attention_backward(uint16_t *dqkv, const uint16_t *dout, const uint16_t *out, const float *lse,
                           const uint16_t *qkv, int G, int S, int heads, int kv_heads, int hd,
                           cudaStream_t s);
/* "cudnn", "tensor-core" or "cuda-core": what the last wc_attention_forward ran ("none" before any). */
const char *wc_attention_last_kernel(void);
/* Each implementation on its own, for the tests (same arguments and results as above). The
 * tensor-core one: hd 64 or 128 (wc_attention_tc_supported), tensors 16-byte aligned; its
 * backward uses dqkv's q part as scratch before writing it. */
int wc_attention_tc_supported(int hd);
void wc_attention_tc_setup(int hd);   /* called by wc_attention_setup */
void wc_attention_tc_forward(uint16_t *out, float *lse, const uint16_t *qkv, int G, int S, int heads,
                             int kv_heads, int hd, cudaStream_t s);
void wc_attention_tc_backward(uint16_t *dqkv, const uint16_t *dout, const uint16_t *out, const float *lse,
                              const uint16_t *qkv, int G, int S, int heads, int kv_heads, int hd,
                              cudaStream_t s);
void wc_attention_cc_forward(uint16_t *out, float *lse, const uint16_t *qkv, int G, int S, int heads,
                             int kv_heads, int hd, cudaStream_t s);
void wc_attention_cc_backward(uint16_t *dqkv, const uint16_t *dout, const uint16_t *out, const float *lse,
                              const uint16_t *qkv, int G, int S, int heads, int kv_heads, int hd,
                              cudaStream_t s);

/* attention_block_cuda.cu: ring attention's blocks, the contracts of cpu/kernels.h's
 * attention_block_* (lse [heads][ldl], strides in elements) with q, kv and dout bf16 and the
 * partial results fp32: out [n, heads * hd] and lse written; the merge in place; dq, dkv
 * accumulated (+=), to be rounded by the caller once every block has added. hd <= 128. D: scratch
 * of heads * n floats (D = rowsum(dO * O), recomputed per call). Reference kernels, not tuned. */
void wc_attention_block_forward(float *out, float *lse, int ldl, const uint16_t *q, int ldq, const uint16_t *kv,
                                int ldkv, int n, int m, int heads, int kv_heads, int hd, int diag, cudaStream_t s);
void wc_attention_block_merge(float *out, float *lse, int ldl, const float *out_b, const float *lse_b, int ldlb,
                              int n, int heads, int hd, cudaStream_t s);
void wc_attention_block_backward(float *dq, int lddq, float *dkv, int lddkv, const uint16_t *dout, const float *out,
                                 const float *lse, int ldl, const uint16_t *q, int ldq, const uint16_t *kv, int ldkv,
                                 int n, int m, int heads, int kv_heads, int hd, int diag, float *D, cudaStream_t s);
/* attention_cudnn.cu: the same attention through cuDNN's fused flash attention (cudnn-frontend
 * graphs, libcudnn.so.9 loaded at run time). wc_cudnn_load: 1 when cuDNN is usable, else 0, with
 * why (its version, or why not) in why. wc_cudnn_attention_plan builds and caches one shape's
 * forward and backward graphs and grows the shared workspace: 0, or -1 with why (not loaded, the
 * shape refused). forward/backward: as wc_attention_forward/backward, for a planned shape only. */
int wc_cudnn_load(char *why, size_t whylen);
int wc_cudnn_attention_plan(int G, int S, int heads, int kv_heads, int hd, char *why, size_t whylen);
int wc_cudnn_attention_planned(int G, int S, int heads, int kv_heads, int hd);
size_t wc_cudnn_attention_workspace_bytes(void);
int wc_cudnn_attention_deterministic(void);   /* the backward's algorithm (WP_CUDNN_DETERMINISTIC) */
void wc_cudnn_attention_forward(uint16_t *out, float *lse, const uint16_t *qkv, int G, int S, int heads,
                                int kv_heads, int hd, cudaStream_t s);
void wc_cudnn_attention_backward(uint16_t *dqkv, const uint16_t *dout, const uint16_t *out, const float *lse,
                                 const uint16_t *qkv, int G, int S, int heads, int kv_heads, int hd,
                                 cudaStream_t s);

/* The dispatch's plan for the model's one shape (after wc_attention_setup): with cuDNN chosen
 * (WP_ATTENTION=cudnn, or unset/auto when it loads and takes the shape) its graphs are built
 * here; about receives one phrase for the start-up line ("cuDNN 9.19.0 fused attention,
 * deterministic backward", or "tensor-core kernels (cuDNN: why not)"). -1 with err only when
 * WP_ATTENTION=cudnn and cuDNN cannot run it. */
int wc_attention_plan(int G, int S, int heads, int kv_heads, int hd, char *about, size_t aboutlen, char *err,
                      size_t errlen);

/* adamw_cuda.cu: cpu/adamw.c's update, element-wise; c1, c2 the bias corrections 1 / (1 - b^t)
 * computed by the caller in double; w16, if not NULL, receives the updated weights in bf16. */
void wc_adamw_launch(float *w, const float *g, float *m1, float *m2, size_t n, float lr, float wd,
                     float grad_scale, float b1, float b2, float eps, float c1, float c2, uint16_t *w16,
                     cudaStream_t s);

#endif
