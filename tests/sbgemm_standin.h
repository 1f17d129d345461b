/* A plain bf16 GEMM standing in for OpenBLAS's cblas_sbgemm in the unit tests (this machine's
 * OpenBLAS may have none), so that the CPU model's bf16 GEMM path (cpu/matmul.c) runs under test:
 * give it to matmul_force_bf16_gemm. */
#ifndef WP_SBGEMM_STANDIN_H
#define WP_SBGEMM_STANDIN_H

#include "common/precision.h"

static int sbgemm_calls;   /* how many products it ran */

/* cblas_sbgemm's meaning (row-major only): C = alpha op(A) op(B) + beta C, products of bf16
 * values summed in fp32. */
static void plain_sbgemm(int order, int transa, int transb, int m, int n, int k, float alpha,
                         const WpBf16 *a, int lda, const WpBf16 *b, int ldb, float beta, float *c, int ldc) {
    (void)order;
    #pragma omp atomic
    sbgemm_calls++;
    int ta = transa == 112, tb = transb == 112;   /* CblasTrans */
    for (int i = 0; i < m; i++)
        for (int j = 0; j < n; j++) {
            float sum = 0;
            for (int p = 0; p < k; p++)
                sum += wp_bf16_to_f32(ta ? a[(size_t)p * lda + i] : a[(size_t)i * lda + p]) *
                       wp_bf16_to_f32(tb ? b[(size_t)j * ldb + p] : b[(size_t)p * ldb + j]);
            float *cij = c + (size_t)i * ldc + j;
            *cij = alpha * sum + (beta == 0 ? 0 : beta * *cij);
        }
}

#endif
