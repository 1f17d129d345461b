/* The attention kernels alone, timed: causal attention forward and backward on one GPU, one
 * sequence of 4096 and of 16384 tokens, at bench_step's shape (16 heads of 128, no grouping) or,
 * with --heads 32 --head-dim 64, at the calibration runs' (llama-h2048); the tensor-core kernels
 * (attention_tc_cuda.cu) and the CUDA-core reference beside them. On an H200 the calibration
 * fitted our attention's backward at 77 TFLOP/s against its forward's 292 (docs/calibration.md):
 * this says which pass, at which shape, and is what to run after changing them.
 *
 * FLOPs counted as FlashAttention's papers count them, so that the figures compare with theirs:
 * forward 4 * S^2 / 2 * hd per head (Q K^T and P V, half of it causal), backward 2.5 times that
 * (five products against two). Our backward computes S and dP twice (its dK/dV kernel and its dQ
 * kernel, in exchange for no atomics): seven products, so its own rate is 1.4 times the printed
 * one. Timed with CUDA events over --iters launches after --warmup.
 *
 * usage: bench_attention [--seq N]... [--heads N] [--head-dim 64|128] [--iters N] [--warmup N] */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "cuda/common_cuda.cuh"
#include "cuda/kernels_cuda.cuh"

static __global__ void fill_kernel(uint16_t *x, size_t n, uint32_t seed) {
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        uint32_t h = (uint32_t)i * 2654435761u ^ seed;
        h ^= h >> 15; h *= 2246822519u; h ^= h >> 13;
        float v = ((float)h / 4294967296.0f - 0.5f) * 2.0f;   /* uniform in [-1, 1) */
        x[i] = (uint16_t)(__float_as_uint(v) >> 16);          /* truncated: any bf16 will do */
    }
}

typedef void (*Fwd)(uint16_t *, float *, const uint16_t *, int, int, int, int, int, cudaStream_t);
typedef void (*Bwd)(uint16_t *, const uint16_t *, const uint16_t *, const float *, const uint16_t *, int, int, int, int,
                    int, cudaStream_t);

/* Milliseconds per launch of the forward (bwd NULL) or backward. */
static float time_ms(Fwd fwd, Bwd bwd, uint16_t *qkv, uint16_t *out, float *lse, uint16_t *dout, uint16_t *dqkv, int S,
                     int heads, int hd, int iters, int warmup, cudaStream_t s) {
    cudaEvent_t e0, e1;
    CUDA_CHECK(cudaEventCreate(&e0));
    CUDA_CHECK(cudaEventCreate(&e1));
    fwd(out, lse, qkv, 1, S, heads, heads, hd, s);   /* the backward reads the forward's out and lse */
    for (int it = 0; it < warmup + iters; it++) {
        if (it == warmup) CUDA_CHECK(cudaEventRecord(e0, s));
        if (bwd) bwd(dqkv, dout, out, lse, qkv, 1, S, heads, heads, hd, s);
        else fwd(out, lse, qkv, 1, S, heads, heads, hd, s);
    }
    CUDA_CHECK(cudaEventRecord(e1, s));
    CUDA_CHECK(cudaEventSynchronize(e1));
    CUDA_CHECK(cudaGetLastError());
    float ms = 0;
    CUDA_CHECK(cudaEventElapsedTime(&ms, e0, e1));
    CUDA_CHECK(cudaEventDestroy(e0));
    CUDA_CHECK(cudaEventDestroy(e1));
    return ms / iters;
}

static long arg(int argc, char **argv, int *i, long lo, long hi) {
    if (*i + 1 >= argc) { fprintf(stderr, "bench_attention: %s needs a value\n", argv[*i]); exit(2); }
    char *end;
    long v = strtol(argv[++*i], &end, 10);
    if (*end || v < lo || v > hi) {
        fprintf(stderr, "bench_attention: %s %s: expected an integer in [%ld, %ld]\n", argv[*i - 1], argv[*i], lo, hi);
        exit(2);
    }
    return v;
}

int main(int argc, char **argv) {
    int seqs[8], nseq = 0, heads = 16, hd = 128, iters = 10, warmup = 2;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--seq") && nseq < 8) seqs[nseq++] = (int)arg(argc, argv, &i, 64, 1 << 20);
        else if (!strcmp(argv[i], "--heads")) heads = (int)arg(argc, argv, &i, 1, 256);
        else if (!strcmp(argv[i], "--head-dim")) hd = (int)arg(argc, argv, &i, 64, 128);
        else if (!strcmp(argv[i], "--iters")) iters = (int)arg(argc, argv, &i, 1, 100000);
        else if (!strcmp(argv[i], "--warmup")) warmup = (int)arg(argc, argv, &i, 0, 100000);
        else {
            fprintf(stderr, "usage: bench_attention [--seq N]... [--heads N] [--head-dim 64|128] [--iters N] [--warmup N]\n");
            return 2;
        }
    }
    if (!nseq) { seqs[0] = 4096; seqs[1] = 16384; nseq = 2; }
    int ndev = 0;
    if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev == 0) {
        printf("bench_attention: no CUDA device here; nothing run\n");
        return 0;
    }
    char err[256];
    if (wc_attention_setup(hd, err, sizeof err)) { fprintf(stderr, "bench_attention: %s\n", err); return 1; }
    cudaDeviceProp prop;
    CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
    cudaStream_t s;
    CUDA_CHECK(cudaStreamCreate(&s));
    for (int k = 0; k < nseq; k++) {
        int S = seqs[k];
        size_t width = (size_t)3 * heads * hd, T = (size_t)S;
        uint16_t *qkv, *out, *dout, *dqkv;
        float *lse;
        CUDA_CHECK(cudaMalloc((void **)&qkv, T * width * 2));
        CUDA_CHECK(cudaMalloc((void **)&dqkv, T * width * 2));
        CUDA_CHECK(cudaMalloc((void **)&out, T * heads * hd * 2));
        CUDA_CHECK(cudaMalloc((void **)&dout, T * heads * hd * 2));
        CUDA_CHECK(cudaMalloc((void **)&lse, T * heads * sizeof(float)));
        fill_kernel<<<1024, 256, 0, s>>>(qkv, T * width, 1);
        fill_kernel<<<1024, 256, 0, s>>>(dout, T * heads * hd, 2);
        CUDA_CHECK_LAUNCH("fill_kernel");
        double fwd_flop = 4.0 * S * (double)S / 2 * hd * heads, bwd_flop = 2.5 * fwd_flop;
        struct { const char *name; Fwd f; Bwd b; } impl[] = {
            { "tensor-core", wc_attention_tc_forward, wc_attention_tc_backward },
            { "cuda-core", wc_attention_cc_forward, wc_attention_cc_backward },
            { "cudnn", wc_cudnn_attention_forward, wc_cudnn_attention_backward },
        };
        char why[600];
        const int cudnn = wc_cudnn_attention_plan(1, S, heads, heads, hd, why, sizeof why) == 0;
        if (!cudnn) printf("bench attention cudnn seq %d: not run: %s\n", S, why);
        for (int j = 0; j < 3; j++) {
            if (j == 0 && !wc_attention_tc_supported(hd)) continue;
            if (j == 2 && !cudnn) continue;
            int it = j == 1 && S > 4096 ? 1 : iters;   /* the reference is slow: one launch at long sequences */
            float f = time_ms(impl[j].f, NULL, qkv, out, lse, dout, dqkv, S, heads, hd, it, j == 1 ? 0 : warmup, s);
            float b = time_ms(impl[j].f, impl[j].b, qkv, out, lse, dout, dqkv, S, heads, hd, it, j == 1 ? 0 : warmup, s);
            printf("bench attention %s seq %d, %d heads of %d: forward %.3f ms (%.1f TFLOP/s), backward %.3f ms "
                   "(%.1f TFLOP/s, FlashAttention's count), backward/forward %.2f (%s)\n", impl[j].name, S, heads, hd, f,
                   fwd_flop / (f * 1e-3) / 1e12, b, bwd_flop / (b * 1e-3) / 1e12, b / f, prop.name);
        }
        cudaFree(qkv); cudaFree(dqkv); cudaFree(out); cudaFree(dout); cudaFree(lse);
    }
    CUDA_CHECK(cudaStreamDestroy(s));
    return 0;
}
