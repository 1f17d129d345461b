/* Matrix products of the model's linear layers, all through BLAS: a torch Linear with weight
 * W [N, K] maps x [T, K] to y = x W^T [T, N].
 *
 * Threads: the rest of the model runs on OpenMP threads, and OpenBLAS (pthreads build) keeps a
 * pool of its own; each pool's idle threads spin for a while after their work, stealing the
 * cores from the other pool (measured: forward of a small model 15x slower). So BLAS runs
 * single-threaded (matmul_init) and each product is split here into one slab per OpenMP thread,
 * along a dimension that needs no reduction: rows of y or dx, rows of dW.
 *
 * bf16 (MM_BF16_IN): the inputs hold bf16 values, so a product of two of them is exact in fp32
 * and sgemm on them computes what a tensor core does (bf16 inputs, fp32 sums) up to the order of
 * the sums: that is the conversion path, always available. OpenBLAS has a real bf16 GEMM,
 * cblas_sbgemm, only when built with BUILD_BFLOAT16 (Debian's 0.3.21 is not), so it is looked up
 * at run time; where present, faster than sgemm on this CPU (timed once at start) and given a work
 * area for the 16-bit copies of the operands, bf16-input products run through it, with the same
 * results up to the order of the sums. WP_SBGEMM=0 or 1 in the environment skips the timing. */
#include <cblas.h>
#include <dlfcn.h>
#include <omp.h>
#include <stdlib.h>
#include "common/settings.h"
#include "cpu/kernels.h"

static MatmulSbgemm *sbgemm_found;   /* what matmul_init found and chose */
static int sbgemm_state;             /* matmul_bf16_gemm()'s answer */
static MatmulSbgemm *sbgemm_forced;  /* tests */
static MatmulSgemm *sgemm_forced;    /* tests */
static WpBf16 *bf_work;
static size_t bf_work_elems;

static double time_product(MatmulSbgemm *fn, int n, const float *a, const float *b,
                           const WpBf16 *ah, const WpBf16 *bh, float *c) {
    double best = 1e30;
    for (int rep = 0; rep < 3; rep++) {
        double t0 = omp_get_wtime();
        if (fn) fn(CblasRowMajor, CblasNoTrans, CblasTrans, n, n, n, 1.0f, ah, n, bh, n, 0.0f, c, n);
        else cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, n, n, n, 1.0f, a, n, b, n, 0.0f, c, n);
        double t = omp_get_wtime() - t0;
        best = t < best ? t : best;
    }
    return best;
}

/* Whether the bf16 GEMM beats sgemm on one thread, on a product of the size of a small layer. */
static int sbgemm_faster(MatmulSbgemm *fn) {
    enum { N = 384 };
    float *a = malloc(3 * (size_t)N * N * sizeof *a);
    WpBf16 *h = malloc(2 * (size_t)N * N * sizeof *h);
    if (!a || !h) { free(a); free(h); return 0; }
    for (size_t i = 0; i < 2 * (size_t)N * N; i++) a[i] = (float)((i * 2654435761u) % 1000) / 1000.0f - 0.5f;
    wp_f32_to_bf16_array(h, a, 2 * (size_t)N * N);
    float *b = a + (size_t)N * N, *c = b + (size_t)N * N;
    double ts = time_product(NULL, N, a, b, h, h + (size_t)N * N, c);
    double tb = time_product(fn, N, a, b, h, h + (size_t)N * N, c);
    free(a); free(h);
    return tb < ts;
}

void matmul_init(void) {
    openblas_set_num_threads(1);
    static int looked;
    if (looked) return;
    looked = 1;
    MatmulSbgemm *fn = (MatmulSbgemm *)dlsym(RTLD_DEFAULT, "cblas_sbgemm");
    if (!fn) { sbgemm_state = 0; return; }
    int use = wp_env_given("WP_SBGEMM") ? (int)wp_env_number("WP_SBGEMM") : sbgemm_faster(fn);
    sbgemm_found = use ? fn : NULL;
    sbgemm_state = use ? 1 : 2;
}

int matmul_bf16_gemm(void) { return sbgemm_state; }

size_t matmul_bf16_work(int T, int K, int N) {
    if (!sbgemm_found && !sbgemm_forced) return 0;
    /* the 16-bit copies of x, w and dy: forward needs x and w, backward all three */
    return (size_t)T * K + (size_t)N * K + (size_t)T * N;
}

void matmul_set_bf16_work(WpBf16 *work, size_t elems) { bf_work = work; bf_work_elems = elems; }

void matmul_force_bf16_gemm(MatmulSbgemm *fn) { sbgemm_forced = fn; }

void matmul_force_sgemm(MatmulSgemm *fn) { sgemm_forced = fn; }

/* cblas_sgemm, or the tests' stand-in (the products' only call to it; time_product times BLAS's) */
static void sgemm(int transa, int transb, int m, int n, int k, const float *a, int lda,
                  const float *b, int ldb, float beta, float *c, int ldc) {
    if (sgemm_forced) sgemm_forced(CblasRowMajor, transa, transb, m, n, k, 1.0f, a, lda, b, ldb, beta, c, ldc);
    else cblas_sgemm(CblasRowMajor, transa, transb, m, n, k, 1.0f, a, lda, b, ldb, beta, c, ldc);
}

/* The bf16 GEMM for a product of these sizes, when there is one and room for its operands. */
static MatmulSbgemm *bf16_gemm(int flags, int T, int K, int N) {
    MatmulSbgemm *fn = sbgemm_forced ? sbgemm_forced : sbgemm_found;
    if (!fn || !(flags & MM_BF16_IN) || !bf_work) return NULL;
    return matmul_bf16_work(T, K, N) <= bf_work_elems ? fn : NULL;
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

/* src -> dst as bf16, shared among the team (inside a parallel region; ends in a barrier). */
static void to_bf16_team(WpBf16 *dst, const float *src, size_t n) {
    #pragma omp for schedule(static)
    for (size_t i = 0; i < n; i++) dst[i] = wp_f32_to_bf16(src[i]);
}

void matmul_forward(float *y, const float *x, const float *w, int T, int K, int N, int accumulate,
                    int flags) {
    MatmulSbgemm *bf = bf16_gemm(flags, T, K, N);
    WpBf16 *xh = bf_work, *wh = bf_work + (size_t)T * K;
    #pragma omp parallel num_threads(team(T))
    {
        if (bf) { to_bf16_team(xh, x, (size_t)T * K); to_bf16_team(wh, w, (size_t)N * K); }
        int r0, r1;
        slab(T, &r0, &r1);
        if (r1 > r0) {
            if (bf)
                bf(CblasRowMajor, CblasNoTrans, CblasTrans, r1 - r0, N, K, 1.0f, xh + (size_t)r0 * K, K,
                   wh, K, accumulate ? 1.0f : 0.0f, y + (size_t)r0 * N, N);
            else
                sgemm(CblasNoTrans, CblasTrans, r1 - r0, N, K, x + (size_t)r0 * K, K, w, K,
                      accumulate ? 1.0f : 0.0f, y + (size_t)r0 * N, N);
            if (flags & MM_BF16_OUT) wp_bf16_round_serial(y + (size_t)r0 * N, (size_t)(r1 - r0) * N);
        }
    }
}

void matmul_backward(float *dx, float *dw, const float *dy, const float *x, const float *w,
                     int T, int K, int N, int accumulate_dx, int flags) {
    MatmulSbgemm *bf = bf16_gemm(flags, T, K, N);
    WpBf16 *dyh = bf_work, *wh = bf_work + (size_t)T * N, *xh = wh + (size_t)N * K;
    /* dW += dy^T x: [N, T] x [T, K], by rows of dW (columns of dy); none for the split
     * backward's input half (model.c, wp_chunk_backward_input). First, so that dx may be written
     * over x (kernels.h) */
    if (dw) {
        #pragma omp parallel num_threads(team(N))
        {
            if (bf) { to_bf16_team(dyh, dy, (size_t)T * N); to_bf16_team(xh, x, (size_t)T * K); }
            int r0, r1;
            slab(N, &r0, &r1);
            if (r1 > r0) {
                if (bf)
                    bf(CblasRowMajor, CblasTrans, CblasNoTrans, r1 - r0, K, T, 1.0f, dyh + r0, N, xh, K, 1.0f,
                       dw + (size_t)r0 * K, K);
                else
                    sgemm(CblasTrans, CblasNoTrans, r1 - r0, K, T, dy + r0, N, x, K, 1.0f, dw + (size_t)r0 * K, K);
            }
        }
    }
    /* dx = dy W: [T, N] x [N, K], by rows of dx */
    if (!dx) return;
    #pragma omp parallel num_threads(team(T))
    {
        if (bf) {
            if (!dw) to_bf16_team(dyh, dy, (size_t)T * N);
            to_bf16_team(wh, w, (size_t)N * K);
        }
        int r0, r1;
        slab(T, &r0, &r1);
        if (r1 > r0) {
            if (bf)
                bf(CblasRowMajor, CblasNoTrans, CblasNoTrans, r1 - r0, K, N, 1.0f, dyh + (size_t)r0 * N, N,
                   wh, K, accumulate_dx ? 1.0f : 0.0f, dx + (size_t)r0 * K, K);
            else
                sgemm(CblasNoTrans, CblasNoTrans, r1 - r0, K, N, dy + (size_t)r0 * N, N, w, K,
                      accumulate_dx ? 1.0f : 0.0f, dx + (size_t)r0 * K, K);
            if (flags & MM_BF16_OUT) wp_bf16_round_serial(dx + (size_t)r0 * K, (size_t)(r1 - r0) * K);
        }
    }
}
