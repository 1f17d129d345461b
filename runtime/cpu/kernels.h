/* The CPU model's building blocks, private to the runtime: one forward and one backward per
 * piece of the LLaMA layer, each in its own file. All fp32 arithmetic on float arrays,
 * activations row-major [T, width] with T = G*S tokens (token t is position t % S of sequence
 * t / S); in bf16 mode those arrays hold bf16 values, and the kernels with a bf16 flag round
 * inside where a GPU kernel would (model.c rounds the rest). Backward functions accumulate (+=)
 * into weight gradients and, where said, into input gradients. None allocates. */
#ifndef WP_KERNELS_H
#define WP_KERNELS_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include "common/config.h"
#include "common/precision.h"

/* Vectorised clones of the hot loops: the build has no -march, so each such function is compiled
 * for AVX-512, AVX2+FMA and plain x86-64, and the loader picks the best one the CPU has. */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define WP_HOT __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define WP_HOT
#endif

/* exp for the softmaxes and SiLU, branch-free so that loops over it vectorise (libm's expf is a
 * call per element). Cephes' expf: range reduction by ln 2, degree-6 polynomial, about 1 ulp;
 * 0 below -88 (where the true value is denormal or 0), so exp(-inf) is 0 as softmax wants.
 * NaN in, NaN out: the clamps are written so that NaN fails both and becomes -88 (a NaN reaching
 * the conversion to int below is undefined behaviour, and UBSan says so), and the NaN is handed
 * back at the end, with a select that vectorises like the clamps. */
static inline float wp_expf(float x) {
    const float in = x;
    x = x > -88.0f ? x : -88.0f;
    x = x < 88.0f ? x : 88.0f;
    float n = x * 1.44269504088896341f + 12582912.0f;   /* round to nearest integer */
    n -= 12582912.0f;
    float r = x - n * 0.693359375f;
    r = r - n * -2.12194440e-4f;
    float p = 1.9875691500e-4f;
    p = p * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    p = p * r * r + r + 1.0f;
    int32_t e = ((int32_t)n + 127) << 23;   /* 2^n; n = -127 gives 0 */
    float scale;
    memcpy(&scale, &e, sizeof scale);
    return in == in ? p * scale : in;
}

/* matmul.c: BLAS single-threaded (the OpenMP threads split each product); called by
 * wp_scratch_new, before any product. */
void matmul_init(void);
/* flags of a product: */
enum {
    MM_BF16_IN = 1,    /* its inputs (x or dy, and w) hold bf16 values: a bf16 GEMM may run it */
    MM_BF16_OUT = 2,   /* y, or dx, is stored as bf16: rounded as written (dW never is) */
};
/* y[T, N] = x[T, K] W[N, K]^T (a torch Linear's weight layout), through BLAS. */
void matmul_forward(float *y, const float *x, const float *w, int T, int K, int N, int accumulate,
                    int flags);
/* dx[T, K] (= or +=) dy W; dW[N, K] += dy^T x. dx may be NULL, and so may dw (then x too). dW is
 * computed first, so dx may be x itself (not +=): the workspace keeps a norm's output and its
 * gradient in one buffer (config.c's ws_home). */
void matmul_backward(float *dx, float *dw, const float *dy, const float *x, const float *w,
                     int T, int K, int N, int accumulate_dx, int flags);
/* Whether the BLAS has a bf16 GEMM (OpenBLAS's cblas_sbgemm, looked up at run time) and uses it
 * for MM_BF16_IN products: 0 none, 1 found and used, 2 found but slower than the conversion path
 * (sgemm on bf16-valued floats), so unused. */
int matmul_bf16_gemm(void);
/* Elements of bf16 work area the bf16 GEMM needs for a product of these sizes (0 without one). */
size_t matmul_bf16_work(int T, int K, int N);
/* The work area for the bf16 GEMM, at least matmul_bf16_work() of every product; given by the
 * scratch. NULL (or too small for a product): that product takes the conversion path. */
void matmul_set_bf16_work(WpBf16 *work, size_t elems);
/* For tests: take fn as the bf16 GEMM (cblas_sbgemm's signature, row-major calls only), or NULL:
 * back to what matmul_init found. */
typedef void MatmulSbgemm(int order, int transa, int transb, int m, int n, int k, float alpha,
                          const WpBf16 *a, int lda, const WpBf16 *b, int ldb, float beta, float *c, int ldc);
void matmul_force_bf16_gemm(MatmulSbgemm *fn);
/* For tests: take fn as the fp32 GEMM (cblas_sgemm's signature, row-major calls only), or NULL:
 * back to BLAS's. A stand-in that sums in the order the bf16 stand-in does makes the conversion
 * path and the bf16 GEMM path comparable bit for bit (tests/unit/test_bf16.c): BLAS's own order
 * depends on the kernels it picks for the CPU (OPENBLAS_CORETYPE). */
typedef void MatmulSgemm(int order, int transa, int transb, int m, int n, int k, float alpha,
                         const float *a, int lda, const float *b, int ldb, float beta, float *c, int ldc);
void matmul_force_sgemm(MatmulSgemm *fn);

/* rmsnorm.c: out = x * rsqrt(mean(x^2) + eps) * w per row; rstd keeps the rsqrt. */
void rmsnorm_forward(float *out, float *rstd, const float *x, const float *w, int T, int H, float eps);
/* out = x * rstd * w with the rstd forward kept: the normalised input again, for backward. */
void rmsnorm_recompute(float *out, const float *x, const float *w, const float *rstd, int T, int H);
/* dx += d/dx, dw += d/dw. Either may be NULL (w may be NULL without dx): the two sums are
 * independent, so the split backward runs them apart, with the same results. */
void rmsnorm_backward(float *dx, float *dw, const float *dout, const float *x, const float *w,
                      const float *rstd, int T, int H);

/* rope.c: rotation in place of the q and k parts of a fused qkv activation
 * [T, (heads + 2 kv_heads) * hd], with the cos/sin tables [S, hd/2] (the halves are equal) of
 * common/rope_table.h. */
void rope_forward(float *qkv, const float *cos_t, const float *sin_t, int T, int S,
                  int heads, int kv_heads, int hd);
/* The transpose rotation, in place on the gradient of the rotated q and k. */
void rope_backward(float *dqkv, const float *cos_t, const float *sin_t, int T, int S,
                   int heads, int kv_heads, int hd);

/* attention.c: causal grouped-query attention on a fused qkv [T, (heads + 2 kv) * hd], output
 * [T, heads * hd] (head-major within a row, as o_proj expects) and the log-sum-exp of each
 * score row [G, heads, S]. Flash-style: no S x S matrix, only per-thread tiles. */
/* work: attention_work_floats() floats, for forward and backward alike. */
size_t attention_work_floats(int G, int S, int heads, int kv_heads, int hd, int nthreads);
/* bf16: the inputs hold bf16 values and the two products of the softmax's probabilities take
 * them as bf16 (P rounded before P V; in backward P before P^T dO and dS before dS K, dS^T Q),
 * as a flash-attention kernel on tensor cores does; out and dqkv are rounded to bf16. Sums,
 * softmax statistics and lse stay fp32. */
void attention_forward(float *out, float *lse, const float *qkv, int G, int S, int heads,
                       int kv_heads, int hd, float *work, int nthreads, int bf16);
/* dqkv written (not accumulated). */
void attention_backward(float *dqkv, const float *dout, const float *out, const float *lse,
                        const float *qkv, int G, int S, int heads, int kv_heads, int hd, float *work,
                        int nthreads, int bf16);

/* For tests: use the "avx2" or the "plain" tile kernel instead of the best one; NULL: the best. */
void attention_force_tiles(const char *which);

/* attention_block.c: one block of ring attention (docs/architecture.md, "Ring attention"): n
 * queries against m keys and values of one sequence, fp32. q: rows of ldq floats, query head h at
 * h * hd (a fused qkv's rows, ldq its width); kv: rows of ldkv floats, kv_heads keys then kv_heads
 * values (a fused qkv + heads * hd, or a received [m, 2 kv_heads hd] block). diag: the blocks are
 * the same positions (n = m), causal inside; else full: every key lies before every query. out
 * [n, heads * hd]; lse[h * ldl + i] the log-sum-exp of query i's scores under head h (scaled by
 * 1/sqrt(hd), as attention_forward's). work: attention_block_work_floats(), for either. */
size_t attention_block_work_floats(int n, int m, int heads, int kv_heads, int hd, int nthreads);
void attention_block_forward(float *out, float *lse, int ldl, const float *q, int ldq,
                             const float *kv, int ldkv, int n, int m, int heads, int kv_heads,
                             int hd, int diag, float *work, int nthreads);
/* The exact merge of two partial results of the same queries over disjoint keys, into the first:
 * lse = log(exp(lse) + exp(lse_b)), out = out * exp(lse_a - lse) + out_b * exp(lse_b - lse),
 * computed from the larger lse so that nothing overflows; a row whose lse are both -inf (no keys
 * yet: how a running result starts) stays as it is. */
void attention_block_merge(float *out, float *lse, int ldl, const float *out_b, const float *lse_b,
                           int ldlb, int n, int heads, int hd, int nthreads);
/* A block's share of the backward, from the final (merged) out and lse and dout [n, heads * hd]:
 * dq (rows of lddq, as q) and dkv (rows of lddkv, as kv) accumulated (+=); summed over every
 * block of the forward, the gradient of the whole attention. */
void attention_block_backward(float *dq, int lddq, float *dkv, int lddkv, const float *dout,
                              const float *out, const float *lse, int ldl, const float *q, int ldq,
                              const float *kv, int ldkv, int n, int m, int heads, int kv_heads,
                              int hd, int diag, float *work, int nthreads);

/* swiglu.c: h = silu(g) * u from gu [T, 2F] (gate then up in each row). */
void swiglu_forward(float *h, const float *gu, int T, int F);
/* dgu from dh. */
void swiglu_backward(float *dgu, const float *dh, const float *gu, int T, int F);

/* loss.c: cross-entropy of a block of n tokens' logits [n, V] (the LM head runs it one block
 * at a time, model.c). Forward: lse[t] = log(sum exp(logits[t])) in fp32, and returns the sum
 * of lse - logit[target] over the block in double. A target < 0 is ignored (no loss, no
 * gradient), as Hugging Face's -100. */
double crossentropy_forward(float *lse, const float *logits, const int *targets, int n, int V);
/* In place, logits become dlogits = scale * (softmax - onehot(target)), the softmax from the
 * forward's lse; rounded to bf16 when bf16 (they are the head's products' input). */
void crossentropy_backward(float *logits, const float *lse, const int *targets, int n, int V,
                           float scale, int bf16);

/* embedding.c: rows of the table, and its gradient. */
void embedding_forward(float *x, const int *tokens, const float *table, int T, int H, int V);
void embedding_backward(float *dtable, const float *dx, const int *tokens, int T, int H);

#endif
