/* Matrix products of the model's linear layers, all through BLAS (cblas_sgemm): a torch Linear
 * with weight W [N, K] maps x [T, K] to y = x W^T [T, N].
 *
 * Threads: the rest of the model runs on OpenMP threads, and OpenBLAS (pthreads build) keeps a
 * pool of its own; each pool's idle threads spin for a while after their work, stealing the
 * cores from the other pool (measured: forward of a small model 15x slower). So BLAS runs
 * single-threaded (matmul_init) and each product is split here into one slab per OpenMP thread,
 * along a dimension that needs no reduction: rows of y or dx, rows of dW. */
#include <cblas.h>
#include <omp.h>
#include "cpu/kernels.h"

void matmul_init(void) {
    openblas_set_num_threads(1);
}

/* Rows [r0, r1) of n split evenly over the team, in multiples of 16 so slabs stay aligned. */
static void slab(int n, int *r0, int *r1) {
    int id = omp_get_thread_num(), nt = omp_get_num_threads();
    int blocks = (n + 15) / 16;
    int b0 = (int)((long)blocks * id / nt), b1 = (int)((long)blocks * (id + 1) / nt);
    *r0 = b0 * 16 < n ? b0 * 16 : n;
    *r1 = b1 * 16 < n ? b1 * 16 : n;
}

/* No more threads than slabs of 32 rows: tiny products run on one thread. */
static int team(int rows) {
    int nt = omp_get_max_threads(), most = (rows + 31) / 32;
    return nt < most ? nt : (most > 0 ? most : 1);
}

void matmul_forward(float *y, const float *x, const float *w, int T, int K, int N, int accumulate) {
    #pragma omp parallel num_threads(team(T))
    {
        int r0, r1;
        slab(T, &r0, &r1);
        if (r1 > r0)
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, r1 - r0, N, K, 1.0f,
                        x + (size_t)r0 * K, K, w, K, accumulate ? 1.0f : 0.0f, y + (size_t)r0 * N, N);
    }
}

void matmul_backward(float *dx, float *dw, const float *dy, const float *x, const float *w,
                     int T, int K, int N, int accumulate_dx) {
    /* dx = dy W: [T, N] x [N, K], by rows of dx */
    if (dx) {
        #pragma omp parallel num_threads(team(T))
        {
            int r0, r1;
            slab(T, &r0, &r1);
            if (r1 > r0)
                cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, r1 - r0, K, N, 1.0f,
                            dy + (size_t)r0 * N, N, w, K, accumulate_dx ? 1.0f : 0.0f,
                            dx + (size_t)r0 * K, K);
        }
    }
    /* dW += dy^T x: [N, T] x [T, K], by rows of dW (columns of dy) */
    #pragma omp parallel num_threads(team(N))
    {
        int r0, r1;
        slab(N, &r0, &r1);
        if (r1 > r0)
            cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, r1 - r0, K, T, 1.0f,
                        dy + r0, N, x, K, 1.0f, dw + (size_t)r0 * K, K);
    }
}
