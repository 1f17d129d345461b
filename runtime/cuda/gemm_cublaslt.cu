/* cuBLASLt products of the model (gemm_cublaslt.cuh). Row-major X [r, c] is column-major X^T
 * [c, r] with leading dimension c, so each row-major product is planned as its transpose, with the
 * transposes, shapes and leading dimensions of wc_gemm_desc (layout_cuda.h, tested on the host):
 *   FWD     y^T [N, T] = (W as [K, N])^T  x^T [K, T]            m = N, n = T, k = K
 *   BWD_DX  dx^T [K, T] = (W as [K, N])  dy^T [N, T]            m = K, n = T, k = N
 *   BWD_DW  dW^T [K, N] += x^T [K, T] (dy^T [N, T])^T           m = K, n = N, k = T
 * Compute type fp32 (CUBLAS_COMPUTE_32F), scale type fp32: bf16 products are exact in fp32 and
 * summed in fp32; a bf16 result is rounded once, after beta * C is added. */
#include <stdlib.h>
#include <string.h>
#include "common/settings.h"
#include "cuda/common_cuda.cuh"
#include "cuda/gemm_cublaslt.cuh"

int wc_lt_new(WcLt *lt, size_t work_bytes, char *err, size_t errlen) {
    memset(lt, 0, sizeof *lt);
    if (cublasLtCreate(&lt->handle) != CUBLAS_STATUS_SUCCESS) {
        snprintf(err, errlen, "cublasLtCreate failed");
        return -1;
    }
    if (work_bytes && cudaMalloc(&lt->work, work_bytes) != cudaSuccess) {
        snprintf(err, errlen, "cuBLASLt work area: cudaMalloc of %zu bytes failed", work_bytes);
        cudaGetLastError();   /* the failed allocation is reported here, not by the next launch's check */
        lt->work = NULL;
        cublasLtDestroy(lt->handle);
        lt->handle = NULL;
        return -1;
    }
    lt->work_bytes = work_bytes;
    return 0;
}

void wc_lt_free(WcLt *lt) {
    if (lt->work) CUDA_CHECK(cudaFree(lt->work));
    if (lt->handle) CUBLAS_CHECK(cublasLtDestroy(lt->handle));
    memset(lt, 0, sizeof *lt);
}

/* How many of the heuristic's candidates are timed, and by how much one must beat the heuristic's
 * first choice to replace it: a near tie keeps the first, so that the choice, and with it the
 * summation order and the result's bits, does not flip between runs on the load of the moment. */
enum { TUNE_CANDIDATES = 8, TUNE_RUNS = 5 };
#define TUNE_MARGIN 0.97f

/* WP_GEMM_AUTOTUNE=0: the heuristic's first choice, as cuBLASLt ranks them (reproducible across
 * runs bit for bit); else the fastest of its first TUNE_CANDIDATES, timed once at start-up. */
static int autotune_on(void) {
    static int on = -1;
    if (on < 0) {
        on = wp_env_number("WP_GEMM_AUTOTUNE") != 0;   /* common/settings.c */
    }
    return on;
}

static size_t mat_bytes(const WcMat &x, size_t elem) { return ((size_t)x.ld * (x.cols - 1) + x.rows) * elem; }

/* Times candidate algo on scratch operands: the mean of TUNE_RUNS launches after one
 * warm-up, in ms; a negative value if it fails to run. */
static float time_algo(const WcLt *lt, const WcGemm *g, const cublasLtMatmulAlgo_t *algo, void *A, void *B, void *C,
                       cudaStream_t s, cudaEvent_t e0, cudaEvent_t e1) {
    const float alpha = 1.0f, beta = g->desc.beta;
    for (int i = 0; i <= TUNE_RUNS; i++) {
        if (i == 1) CUDA_CHECK(cudaEventRecord(e0, s));
        if (cublasLtMatmul(lt->handle, g->op, &alpha, A, g->a, B, g->b, &beta, C, g->c, C, g->d, algo, lt->work,
                           lt->work_bytes, s) != CUBLAS_STATUS_SUCCESS)
            return -1.0f;
    }
    CUDA_CHECK(cudaEventRecord(e1, s));
    CUDA_CHECK(cudaEventSynchronize(e1));
    float ms = 0;
    CUDA_CHECK(cudaEventElapsedTime(&ms, e0, e1));
    return ms / TUNE_RUNS;
}

/* Of n candidates (n >= 1, the heuristic's order), the one to run: the fastest when it beats the
 * first by the margin, timed on scratch operands of the product's sizes; the first when there is
 * one candidate, autotuning is off, or the scratch does not fit on the device. */
static int fastest(const WcLt *lt, WcGemm *g, const cublasLtMatmulHeuristicResult_t *res, int n) {
    if (n < 2 || !autotune_on()) return 0;
    const WcGemmDesc *d = &g->desc;
    size_t out_elem = d->out_f32 ? 4 : 2;
    void *A = NULL, *B = NULL, *C = NULL;
    if (cudaMalloc(&A, mat_bytes(d->a, 2)) != cudaSuccess || cudaMalloc(&B, mat_bytes(d->b, 2)) != cudaSuccess ||
        cudaMalloc(&C, mat_bytes(d->c, out_elem)) != cudaSuccess) {
        cudaGetLastError();   /* no room for the scratch: the heuristic's choice */
        cudaFree(A); cudaFree(B); cudaFree(C);
        cudaGetLastError();
        return 0;
    }
    /* zeros: the same work as any operands, and no NaN or overflow to slow a kernel down */
    CUDA_CHECK(cudaMemset(A, 0, mat_bytes(d->a, 2)));
    CUDA_CHECK(cudaMemset(B, 0, mat_bytes(d->b, 2)));
    CUDA_CHECK(cudaMemset(C, 0, mat_bytes(d->c, out_elem)));
    cudaStream_t s;
    cudaEvent_t e0, e1;
    CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    CUDA_CHECK(cudaEventCreate(&e0));
    CUDA_CHECK(cudaEventCreate(&e1));
    int best = 0;
    float first = time_algo(lt, g, &res[0].algo, A, B, C, s, e0, e1), best_ms = first;
    for (int i = 1; i < n && first > 0; i++) {
        float ms = time_algo(lt, g, &res[i].algo, A, B, C, s, e0, e1);
        if (ms > 0 && ms < best_ms && ms < TUNE_MARGIN * first) { best = i; best_ms = ms; }
    }
    g->tuned_ms = best_ms;
    g->heuristic_ms = first;
    CUDA_CHECK(cudaEventDestroy(e0));
    CUDA_CHECK(cudaEventDestroy(e1));
    CUDA_CHECK(cudaStreamDestroy(s));
    CUDA_CHECK(cudaFree(A)); CUDA_CHECK(cudaFree(B)); CUDA_CHECK(cudaFree(C));
    return first > 0 ? best : 0;
}

/* The algorithm for operands aligned to align_ab bytes (A, B) and align_cd bytes (C, D): of the
 * heuristic's first candidates the fastest (tune, for the aligned operands the step uses), else
 * its first; 0 if it has none. */
static int pick_algo(const WcLt *lt, WcGemm *g, uint32_t align_ab, uint32_t align_cd, int tune, cublasLtMatmulAlgo_t *algo) {
    cublasLtMatmulPreference_t pref;
    CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&pref));
    uint64_t ws = lt->work_bytes;
    CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws));
    const cublasLtMatmulPreferenceAttributes_t al[4] = {
        CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
        CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES };
    for (int i = 0; i < 4; i++) {
        uint32_t a = i < 2 ? align_ab : align_cd;
        CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, al[i], &a, sizeof a));
    }
    cublasLtMatmulHeuristicResult_t res[TUNE_CANDIDATES];
    int found = 0;
    cublasStatus_t st = cublasLtMatmulAlgoGetHeuristic(lt->handle, g->op, g->a, g->b, g->c, g->d, pref,
                                                       tune ? TUNE_CANDIDATES : 1, res, &found);
    CUBLAS_CHECK(cublasLtMatmulPreferenceDestroy(pref));
    if (st != CUBLAS_STATUS_SUCCESS || found < 1) return 0;
    int k = tune ? fastest(lt, g, res, found) : 0;
    g->candidates = found;
    g->chosen = k;
    *algo = res[k].algo;
    return 1;
}

static void layout(cublasLtMatrixLayout_t *l, cudaDataType_t type, const WcMat &x) {
    CUBLAS_CHECK(cublasLtMatrixLayoutCreate(l, type, x.rows, x.cols, x.ld));
}

int wc_gemm_plan(WcLt *lt, WcGemm *g, WcMmKind kind, int T, int K, int N, int ld_act, int out_f32, int beta_c,
                 char *err, size_t errlen) {
    memset(g, 0, sizeof *g);
    g->kind = kind; g->T = T; g->K = K; g->N = N;
    if (wc_gemm_desc(&g->desc, kind, T, K, N, ld_act, out_f32, beta_c)) {
        snprintf(err, errlen, "gemm: no product of kind %d, T %d, K %d, N %d, leading dimension %d%s", (int)kind,
                 T, K, N, ld_act, beta_c ? " with C" : "");
        return -1;
    }
    const WcGemmDesc *d = &g->desc;
    const cudaDataType_t out = d->out_f32 ? CUDA_R_32F : CUDA_R_16BF;
    const cublasOperation_t ta = d->trans_a ? CUBLAS_OP_T : CUBLAS_OP_N, tb = d->trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
    CUBLAS_CHECK(cublasLtMatmulDescCreate(&g->op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(g->op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta));
    CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(g->op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb));
    layout(&g->a, CUDA_R_16BF, d->a);
    layout(&g->b, CUDA_R_16BF, d->b);
    layout(&g->c, out, d->c);
    layout(&g->d, out, d->c);
    /* the fast algorithm for 16-byte operands, and one that needs only each element's own
     * alignment: 2 bytes for the bf16 A and B, 4 or 2 for C and D */
    if (!pick_algo(lt, g, 16, 16, 1, &g->algo_aligned) || !pick_algo(lt, g, 2, d->out_f32 ? 4 : 2, 0, &g->algo_any)) {
        snprintf(err, errlen, "gemm: cuBLASLt has no algorithm for kind %d, T %d, K %d, N %d", (int)kind, T, K, N);
        wc_gemm_free(g);
        return -1;
    }
    g->planned = 1;
    return 0;
}

void wc_gemm_free(WcGemm *g) {
    if (g->d) CUBLAS_CHECK(cublasLtMatrixLayoutDestroy(g->d));
    if (g->c) CUBLAS_CHECK(cublasLtMatrixLayoutDestroy(g->c));
    if (g->b) CUBLAS_CHECK(cublasLtMatrixLayoutDestroy(g->b));
    if (g->a) CUBLAS_CHECK(cublasLtMatrixLayoutDestroy(g->a));
    if (g->op) CUBLAS_CHECK(cublasLtMatmulDescDestroy(g->op));
    memset(g, 0, sizeof *g);
}

static int aligned16(const void *p) { return ((uintptr_t)p & 15u) == 0; }

void wc_gemm_run(const WcLt *lt, const WcGemm *g, const void *act, const void *w, const void *c, void *out,
                 cudaStream_t s) {
    if (!g->planned) {
        fprintf(stderr, "gemm: a product that was not planned at start (kind %d)\n", (int)g->kind);
        abort();
    }
    if (g->T == 0) return;
    if (g->kind == WC_MM_FWD && g->desc.beta != 0.0f && !c) {
        fprintf(stderr, "gemm: a product planned to add C (kind %d) run without C\n", (int)g->kind);
        abort();
    }
    const float alpha = 1.0f, beta = g->desc.beta;
    /* column-major A and B: FWD and BWD_DX take W as A and the activation as B; BWD_DW takes x (w
     * here) as A and dy as B */
    const void *A = w;
    const void *B = act;
    const void *C = g->kind == WC_MM_FWD ? (beta != 0.0f ? c : out) : out;
    const cublasLtMatmulAlgo_t *algo =
        aligned16(A) && aligned16(B) && aligned16(C) && aligned16(out) ? &g->algo_aligned : &g->algo_any;
    CUBLAS_CHECK(cublasLtMatmul(lt->handle, g->op, &alpha, A, g->a, B, g->b, &beta, C, g->c, out, g->d, algo,
                                lt->work, lt->work_bytes, s));
}
