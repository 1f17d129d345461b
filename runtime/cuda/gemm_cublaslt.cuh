/* The model's matrix products through cuBLASLt: bf16 operands, fp32 accumulation, a bf16 or fp32
 * result, in the row-major terms of cpu/matmul.c (a torch Linear's weight W [N, K]):
 *   WC_MM_FWD     y[T, N] = x[T, K] W^T             (+ C[T, N] with beta = 1: "x + a W^T", one rounding)
 *   WC_MM_BWD_DX  dx[T, K] = dy[T, N] W
 *   WC_MM_BWD_DW  dW[N, K] += dy[T, N]^T x[T, K]   (fp32, accumulated in place)
 * The handle and work area are created once (wc_lt_new), and each product the model runs is
 * planned once at start (wc_gemm_plan: descriptors, layouts and the algorithm: the fastest of
 * cuBLASLt's heuristic's first 8 candidates, timed once on scratch operands, when it beats the
 * first by 3%; WP_GEMM_AUTOTUNE=0 keeps the heuristic's first), so a step only launches. cuBLASLt is column-major: a row-major [r, c] matrix is its
 * column-major transpose, so each product is computed as its transpose (wc_gemm_desc in
 * layout_cuda.h, unit-tested on the host). */
#ifndef WP_GEMM_CUBLASLT_CUH
#define WP_GEMM_CUBLASLT_CUH

#include <stddef.h>
#include <cublasLt.h>
#include <cuda_runtime.h>
#include "cuda/layout_cuda.h"   /* WcMmKind and the column-major description of each product */

typedef struct WcLt {
    cublasLtHandle_t handle;
    void *work;          /* device work area of the algorithms */
    size_t work_bytes;
} WcLt;

/* One planned product: two algorithms, one for operands on 16-byte boundaries (the fast ones)
 * and one that needs only the elements' own alignment, chosen per call by the pointers. */
typedef struct WcGemm {
    int planned;
    WcMmKind kind;
    int T, K, N;
    WcGemmDesc desc;     /* transposes, layouts, fp32 or bf16 result, beta (layout_cuda.h) */
    cublasLtMatmulDesc_t op;
    cublasLtMatrixLayout_t a, b, c, d;
    cublasLtMatmulAlgo_t algo_aligned, algo_any;
    /* the aligned algorithm's choice (WP_GEMM_AUTOTUNE): of how many candidates, which one
     * (0: the heuristic's first), and the timings behind it in ms (0 when not timed) */
    int candidates, chosen;
    float heuristic_ms, tuned_ms;
} WcGemm;

int wc_lt_new(WcLt *lt, size_t work_bytes, char *err, size_t errlen);
void wc_lt_free(WcLt *lt);

/* Plans the product of this kind and shape (wc_gemm_desc describes it to cuBLASLt). ld_act: the
 * leading dimension (elements) of the activation `act` of wc_gemm_run: x for FWD (K when dense),
 * dy for BWD_DX and BWD_DW (N when dense; 2N for the LM head's in-place dlogits); the other
 * operands are dense. out_f32: an fp32 result (BWD_DW always). beta_c: FWD adds C. Returns 0, or
 * -1 with the reason in err (sizes it does not know, or no algorithm for them). */
int wc_gemm_plan(WcLt *lt, WcGemm *g, WcMmKind kind, int T, int K, int N, int ld_act, int out_f32, int beta_c,
                 char *err, size_t errlen);
void wc_gemm_free(WcGemm *g);

/* Runs a planned product on stream s.
 *   FWD:    act = x, w = W, c = C (beta 1; else NULL), out = y
 *   BWD_DX: act = dy, w = W, out = dx
 *   BWD_DW: act = dy, w = x (the other activation), out = dW (fp32, accumulated) */
void wc_gemm_run(const WcLt *lt, const WcGemm *g, const void *act, const void *w, const void *c, void *out,
                 cudaStream_t s);

#endif
