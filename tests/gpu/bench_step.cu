/* One training step of a LLaMA-style model on one GPU with the CUDA model (runtime/cuda), timed:
 * hidden 2048, 16 layers, 16 heads (no grouping), head_dim 128, ffn 5632, vocabulary 32000,
 * micro-batch 1, sequences of 4096 and 16384 tokens. The step is what a one-rank plan runs: the
 * whole model as one chunk, forward and backward on one micro-batch (no recompute), the gradient's
 * sum of squares, AdamW on the fp32 masters writing the bf16 working copy. Timed with CUDA events
 * after warm-up steps; prints tokens/s and MFU in the format of bench_torch.py, so that
 * tests/gpu/run.sh can print them side by side.
 *
 * Model FLOPs of a step: common/flops.h's per token (the trainers' MFU counts the same) times the
 * step's tokens. MFU = model FLOPs / step time / the device's peak dense bf16 rate (the table
 * below by device name; --peak-tflops overrides).
 *
 * Build and run (from the repository root, after `make`):
 *   nvcc -O3 -std=c++17 -gencode arch=compute_80,code=sm_80 -gencode arch=compute_90,code=sm_90 \
 *        -Iruntime tests/gpu/bench_step.cu \
 *        runtime/cuda/{model_cuda,gemm_cublaslt,attention_cuda,attention_tc_cuda,crossentropy_cuda,embedding_cuda,rmsnorm_cuda,rope_cuda,swiglu_cuda,adamw_cuda,convert_cuda}.cu \
 *        build/libwprt-common.a -o build/gpu/bench_step -lcublasLt -lcublas -lcudart -lm
 *   build/gpu/bench_step [--seq N]... [--layers N] [--steps N] [--warmup N] [--peak-tflops X]
 *                        [--attention auto|cudnn|own|reference]
 * --attention sets WP_ATTENTION, which the first wc_attention_setup reads: cudnn cuDNN's fused
 * attention, own our tensor-core kernels, reference our CUDA-core ones; auto, the default, cuDNN
 * where it loads and takes the shape, else ours. The line printed names the kernel that ran. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
extern "C" {
#include "common/config.h"
#include "common/flops.h"
#include "common/optim.h"
}
#include "cuda/common_cuda.cuh"
#include "cuda/kernels_cuda.cuh"
#include "cuda/model_cuda.h"

/* Dense bf16 tensor-core peak (TFLOP/s, no sparsity) by a substring of the device name; the
 * first match wins, so the more specific names come first. */
static const struct { const char *name; double tflops; } PEAKS[] = {
    { "H100 PCIe", 756 }, { "H100 NVL", 835 }, { "H100", 989 }, { "H200", 989 }, { "H800", 989 },
    { "GH200", 989 }, { "A100", 312 }, { "A800", 312 }, { "L40S", 362 }, { "L4", 121 }, { "A10G", 70 },
    { "A10", 125 }, { "RTX 4090", 165 }, { "RTX 3090", 71 },
};

static void usage(void) {
    fprintf(stderr, "usage: bench_step [--seq N]... [--layers N] [--steps N] [--warmup N] [--peak-tflops X] "
                    "[--attention auto|cudnn|own|reference]\n");
    exit(2);
}

static long arg_long(int argc, char **argv, int *i, long lo, long hi) {
    if (*i + 1 >= argc) usage();
    char *end;
    long v = strtol(argv[++*i], &end, 10);
    if (*end || v < lo || v > hi) {
        fprintf(stderr, "bench_step: %s %s: expected an integer in [%ld, %ld]\n", argv[*i - 1], argv[*i], lo, hi);
        exit(2);
    }
    return v;
}

/* Deterministic stand-ins for the initial weights (the speed does not depend on them): norms 1,
 * other weights uniform with the standard deviation 0.02 of wp_chunk_init. */
static __global__ void init_kernel(float *w, size_t n, int ones, uint32_t seed) {
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        uint32_t h = (uint32_t)i * 2654435761u ^ seed;
        h ^= h >> 15; h *= 2246822519u; h ^= h >> 13;
        w[i] = ones ? 1.0f : ((float)h / 4294967296.0f - 0.5f) * 0.0693f;   /* sqrt(12) * 0.02 */
    }
}

/* One timed configuration; returns 0, or 1 when the device lacks the memory (said on stdout). */
static int bench(int seq, int layers, int steps, int warmup, double peak, const char *device) {
    WpConfig c;
    memset(&c, 0, sizeof c);
    c.hidden = 2048; c.layers = layers; c.heads = 16; c.kv_heads = 16; c.head_dim = 128; c.ffn = 5632;
    c.vocab = 32000; c.eps = 1e-5f; c.rope_theta = 10000.0f; c.tied = 0; c.seq = seq; c.mbs = 1;
    WpChunk k = wp_chunk_make(&c, 0, 0, layers, 1, 1);
    size_t T = (size_t)c.mbs * seq, P = k.nparams, stash = wp_stash_bytes(&c, &k, 0, WP_BF16);
    size_t need = P * (4 + 4 + 4 + 4 + 2) + stash + 2 * T * sizeof(int);
    size_t free_b = 0, total_b = 0;
    CUDA_CHECK(cudaMemGetInfo(&free_b, &total_b));
    if (need + ((size_t)2 << 30) > free_b) {
        printf("bench wpgen-cuda seq %d: skipped, needs %.1f GiB, %.1f GiB free\n", seq, need / 1073741824.0,
               free_b / 1073741824.0);
        return 1;
    }
    cudaStream_t s;
    CUDA_CHECK(cudaStreamCreate(&s));
    char err[256];
    WcModel *m = wc_model_new(&c, layers, 1, 1, 0, s, err, sizeof err);
    if (!m) { fprintf(stderr, "bench_step: %s\n", err); exit(1); }
    float *w, *g, *m1, *m2;
    uint16_t *w16;
    void *st;
    int *tok;
    double *loss, *sumsq;
    CUDA_CHECK(cudaMalloc((void **)&w, P * 4));
    CUDA_CHECK(cudaMalloc((void **)&g, P * 4));
    CUDA_CHECK(cudaMalloc((void **)&m1, P * 4));
    CUDA_CHECK(cudaMalloc((void **)&m2, P * 4));
    CUDA_CHECK(cudaMalloc((void **)&w16, P * 2));
    CUDA_CHECK(cudaMalloc(&st, stash));
    CUDA_CHECK(cudaMalloc((void **)&tok, 2 * T * sizeof(int)));
    CUDA_CHECK(cudaMalloc((void **)&loss, sizeof(double)));
    CUDA_CHECK(cudaMalloc((void **)&sumsq, sizeof(double)));
    CUDA_CHECK(cudaMemset(m1, 0, P * 4));
    CUDA_CHECK(cudaMemset(m2, 0, P * 4));
    int nt = wp_chunk_tensors(&c, &k, NULL);
    WpTensor *tens = (WpTensor *)malloc(nt * sizeof *tens);
    wp_chunk_tensors(&c, &k, tens);
    for (int i = 0; i < nt; i++) {
        size_t n = tens[i].rows * tens[i].cols;
        init_kernel<<<wc_blocks(n, 256, 65536), 256, 0, s>>>(w + tens[i].offset, n, tens[i].no_decay, 977u * i + 1);
        CUDA_CHECK_LAUNCH("init_kernel");
    }
    wc_f32_to_bf16(m, w16, w, P);
    {   /* tokens and next tokens: a fixed pseudo-random text */
        int *h = (int *)malloc(2 * T * sizeof(int));
        uint64_t r = 1;
        for (size_t i = 0; i <= T; i++) {
            r = r * 6364136223846793005ull + 1442695040888963407ull;
            int v = (int)((r >> 33) % (uint64_t)c.vocab);
            if (i < T) h[i] = v;
            if (i > 0) h[T + i - 1] = v;
        }
        CUDA_CHECK(cudaMemcpy(tok, h, 2 * T * sizeof(int), cudaMemcpyHostToDevice));
        free(h);
    }
    WpAdamW opt;
    adamw_init(&opt, 3e-4f, 10, 1000);
    cudaEvent_t e0, e1;
    CUDA_CHECK(cudaEventCreate(&e0));
    CUDA_CHECK(cudaEventCreate(&e1));
    float loss_scale = 1.0f / (float)T;
    for (int it = 0; it < warmup + steps; it++) {
        if (it == warmup) CUDA_CHECK(cudaEventRecord(e0, s));
        CUDA_CHECK(cudaMemsetAsync(g, 0, P * 4, s));
        CUDA_CHECK(cudaMemsetAsync(loss, 0, sizeof(double), s));
        wc_chunk_forward(m, &k, w16, tok, tok + T, NULL, NULL, st, loss);
        wc_chunk_backward(m, &k, w16, tok, tok + T, st, NULL, NULL, g, loss_scale);
        wc_sumsq(m, g, P, sumsq);   /* the clipping's norm; the scale would come back to the host */
        for (int i = 0; i < nt; i++) {
            size_t off = tens[i].offset, n = tens[i].rows * tens[i].cols;
            wc_adamw(m, &opt, w + off, g + off, m1 + off, m2 + off, n, adamw_lr(&opt, it), tens[i].no_decay ? 0.0f : opt.weight_decay,
                     1.0f, it + 1, w16 + off);
        }
    }
    CUDA_CHECK(cudaEventRecord(e1, s));
    CUDA_CHECK(cudaEventSynchronize(e1));
    float ms = 0;
    CUDA_CHECK(cudaEventElapsedTime(&ms, e0, e1));
    double loss_h = 0;
    CUDA_CHECK(cudaMemcpy(&loss_h, loss, sizeof loss_h, cudaMemcpyDeviceToHost));
    double step_s = ms / 1000.0 / steps;
    double flops = wp_model_flops_per_token(&c, seq) * T;
    double tps = T / step_s;
    printf("bench wpgen-cuda seq %d: step %.4f s, %.0f tokens/s, MFU %s%.1f%% (model %.3g FLOP/step, peak %.0f "
           "TFLOP/s bf16, %s; attention %s; loss %.4f; reserved %.2f GiB workspace)\n",
           seq, step_s, tps, peak > 0 ? "" : "n/a ", peak > 0 ? 100.0 * flops / step_s / (peak * 1e12) : 0.0, flops,
           peak, device, wc_attention_last_kernel(), loss_h / T, wc_model_workspace_bytes(m) / 1073741824.0);
    fflush(stdout);
    CUDA_CHECK(cudaEventDestroy(e0));
    CUDA_CHECK(cudaEventDestroy(e1));
    CUDA_CHECK(cudaFree(w)); CUDA_CHECK(cudaFree(g)); CUDA_CHECK(cudaFree(m1)); CUDA_CHECK(cudaFree(m2));
    CUDA_CHECK(cudaFree(w16)); CUDA_CHECK(cudaFree(st)); CUDA_CHECK(cudaFree(tok)); CUDA_CHECK(cudaFree(loss));
    CUDA_CHECK(cudaFree(sumsq));
    free(tens);
    wc_model_free(m);
    CUDA_CHECK(cudaStreamDestroy(s));
    return 0;
}

int main(int argc, char **argv) {
    int seqs[8], nseq = 0, layers = 16, steps = 3, warmup = 2;
    double peak = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--seq")) {
            if (nseq == 8) usage();
            seqs[nseq++] = (int)arg_long(argc, argv, &i, 64, 1 << 20);
        } else if (!strcmp(argv[i], "--layers")) layers = (int)arg_long(argc, argv, &i, 1, 1024);
        else if (!strcmp(argv[i], "--steps")) steps = (int)arg_long(argc, argv, &i, 1, 1000);
        else if (!strcmp(argv[i], "--warmup")) warmup = (int)arg_long(argc, argv, &i, 0, 1000);
        else if (!strcmp(argv[i], "--peak-tflops")) {
            if (i + 1 >= argc) usage();
            char *end;
            peak = strtod(argv[++i], &end);
            if (*end || !(peak > 0)) { fprintf(stderr, "bench_step: --peak-tflops %s: expected a positive number\n", argv[i]); return 2; }
        } else if (!strcmp(argv[i], "--attention")) {
            if (i + 1 >= argc) usage();
            const char *a = argv[++i];
            if (strcmp(a, "auto") && strcmp(a, "reference") && strcmp(a, "own") && strcmp(a, "cudnn")) {
                fprintf(stderr, "bench_step: --attention %s: expected auto, cudnn, own or reference\n", a);
                return 2;
            }
            setenv("WP_ATTENTION", a, 1);   /* read by the first wc_attention_setup, in wc_model_new */
        } else usage();
    }
    if (nseq == 0) { seqs[0] = 4096; seqs[1] = 16384; nseq = 2; }
    int ndev = 0;
    if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev == 0) {
        printf("bench_step: no CUDA device here; nothing run\n");
        return 0;
    }
    cudaDeviceProp prop;
    CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
    if (peak == 0)
        for (size_t i = 0; i < sizeof PEAKS / sizeof PEAKS[0]; i++)
            if (strstr(prop.name, PEAKS[i].name)) { peak = PEAKS[i].tflops; break; }
    if (peak == 0) printf("bench_step: no peak known for %s: MFU not computed (give --peak-tflops)\n", prop.name);
    for (int i = 0; i < nseq; i++) bench(seqs[i], layers, steps, warmup, peak, prop.name);
    return 0;
}
