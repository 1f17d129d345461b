/* Plain GEMMs standing in for OpenBLAS's in the unit tests. plain_sbgemm stands in for
 * cblas_sbgemm (this machine's OpenBLAS may have none), so that the CPU model's bf16 GEMM path
 * (cpu/matmul.c) runs under test: give it to matmul_force_bf16_gemm. plain_sgemm stands in for
 * cblas_sgemm (matmul_force_sgemm) and sums in the same order, one k at a time from 0: a product
 * of two bf16 values is exact in fp32, so on bf16-valued inputs the two give the same bits, and
 * the conversion path and the bf16 GEMM path can be compared exactly, whatever kernels OpenBLAS
 * would pick on this CPU. */
#ifndef WP_SBGEMM_STANDIN_H
#define WP_SBGEMM_STANDIN_H

#include "common/precision.h"

static int sbgemm_calls;   /* how many products plain_sbgemm ran */

/* C = alpha op(A) op(B) + beta C, row-major, sums in fp32 in the order of k; `at` and `bt` read
 * one element of A and of B as a float. */
#define PLAIN_GEMM_BODY(at, bt)                                                                   \
    int ta = transa == 112, tb = transb == 112;   /* CblasTrans */                                \
    for (int i = 0; i < m; i++)                                                                   \
        for (int j = 0; j < n; j++) {                                                             \
            float sum = 0;                                                                        \
            for (int p = 0; p < k; p++)                                                           \
                sum += at(ta ? a[(size_t)p * lda + i] : a[(size_t)i * lda + p]) *                 \
                       bt(tb ? b[(size_t)j * ldb + p] : b[(size_t)p * ldb + j]);                  \
            float *cij = c + (size_t)i * ldc + j;                                                 \
            *cij = alpha * sum + (beta == 0 ? 0 : beta * *cij);                                   \
        }

#define PLAIN_AS_FLOAT(x) (x)

/* cblas_sbgemm's meaning (row-major only): products of bf16 values summed in fp32. */
static void plain_sbgemm(int order, int transa, int transb, int m, int n, int k, float alpha,
                         const WpBf16 *a, int lda, const WpBf16 *b, int ldb, float beta, float *c, int ldc) {
    (void)order;
    #pragma omp atomic
    sbgemm_calls++;
    PLAIN_GEMM_BODY(wp_bf16_to_f32, wp_bf16_to_f32)
}

/* cblas_sgemm's meaning (row-major only), in plain_sbgemm's order. */
static inline void plain_sgemm(int order, int transa, int transb, int m, int n, int k, float alpha,
                               const float *a, int lda, const float *b, int ldb, float beta, float *c, int ldc) {
    (void)order;
    PLAIN_GEMM_BODY(PLAIN_AS_FLOAT, PLAIN_AS_FLOAT)
}

#endif
