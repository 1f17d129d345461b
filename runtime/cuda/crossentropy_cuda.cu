/* Cross-entropy of the LM head, fused with its softmax, on one block of tokens' fp32 logits at a
 * time (model_cuda.cu runs the head in blocks of wp_ce_block_tokens tokens, so the [T, V] logits
 * never exist). One thread block per token row; the row's max and sum of exponentials in fp32 with
 * a fixed reduction tree, the loss of each token in fp64 and the block's losses summed in a fixed
 * order. Backward overwrites each row's logits with its bf16 gradient in place (see
 * kernels_cuda.cuh). cpu/loss.c is the reference. */
#include <float.h>
#include "cuda/common_cuda.cuh"
#include "cuda/kernels_cuda.cuh"

enum { CE_THREADS = 256, CE_WARPS = CE_THREADS / 32, CE_PER_THREAD = 4 };

/* The block's maximum or sum of v, the same tree every time: xor shuffles in each warp, then the
 * warps' results in order by every thread. sh: CE_WARPS floats. */
template <int MAX>
__device__ float block_reduce(float v, float *sh) {
    for (int o = 16; o > 0; o >>= 1) {
        float u = __shfl_xor_sync(0xFFFFFFFFu, v, o);
        v = MAX ? fmaxf(v, u) : v + u;
    }
    __syncthreads();   /* sh may still be read from a previous reduction */
    if ((threadIdx.x & 31) == 0) sh[threadIdx.x / 32] = v;
    __syncthreads();
    float r = sh[0];
    for (int i = 1; i < CE_WARPS; i++) r = MAX ? fmaxf(r, sh[i]) : r + sh[i];
    return r;
}

static __global__ void ce_forward_kernel(float *lse, double *losses, const float *logits, const int *targets,
                                         int V) {
    __shared__ float sh[CE_WARPS];
    int t = blockIdx.x;
    const float *l = logits + (size_t)t * V;
    float m = -FLT_MAX;
    for (int v = threadIdx.x; v < V; v += CE_THREADS) m = fmaxf(m, l[v]);
    m = block_reduce<1>(m, sh);
    float sum = 0.0f;
    for (int v = threadIdx.x; v < V; v += CE_THREADS) sum += expf(l[v] - m);
    sum = block_reduce<0>(sum, sh);
    if (threadIdx.x == 0) {
        lse[t] = m + logf(sum);
        int y = targets[t];   /* -log softmax = logsumexp - logit; a target < 0 counts nothing */
        losses[t] = y >= 0 ? (double)m + log((double)sum) - (double)l[y] : 0.0;
    }
}

static __global__ void loss_sum_kernel(double *loss_sum, const double *losses, int n) {
    __shared__ double sh[CE_THREADS];
    double acc = 0.0;
    for (int i = threadIdx.x; i < n; i += CE_THREADS) acc += losses[i];
    sh[threadIdx.x] = acc;
    for (int stride = CE_THREADS / 2; stride > 0; stride /= 2) {
        __syncthreads();
        if ((int)threadIdx.x < stride) sh[threadIdx.x] += sh[threadIdx.x + stride];
    }
    if (threadIdx.x == 0) *loss_sum += sh[0];
}

/* Row t's fp32 values are read a chunk of CE_THREADS * CE_PER_THREAD at a time and the chunk's bf16
 * results written after a barrier: chunk c's bf16 values land in bytes [2cn, 2(c+1)n) of the row,
 * which belong to fp32 values of chunks 0..c only, all read before the barrier. */
static __global__ void ce_backward_kernel(float *logits, const float *lse, const int *targets, int V,
                                          float scale) {
    int t = blockIdx.x, y = targets[t];
    float *l = logits + (size_t)t * V;
    uint16_t *d = (uint16_t *)l;
    float L = lse[t];
    const int n = CE_THREADS * CE_PER_THREAD;
    for (int c0 = 0; c0 < V; c0 += n) {
        uint16_t out[CE_PER_THREAD];
        #pragma unroll
        for (int k = 0; k < CE_PER_THREAD; k++) {
            int v = c0 + k * CE_THREADS + threadIdx.x;
            float g = 0.0f;
            if (v < V && y >= 0) {
                g = scale * expf(l[v] - L);
                if (v == y) g -= scale;
            }
            out[k] = f32_to_bf16(g);
        }
        __syncthreads();
        #pragma unroll
        for (int k = 0; k < CE_PER_THREAD; k++) {
            int v = c0 + k * CE_THREADS + threadIdx.x;
            if (v < V) d[v] = out[k];
        }
    }
}

void wc_ce_forward(float *lse, double *losses, const float *logits, const int *targets, int n, int V,
                   cudaStream_t s) {
    if (n == 0) return;
    ce_forward_kernel<<<n, CE_THREADS, 0, s>>>(lse, losses, logits, targets, V);
    CUDA_CHECK_LAUNCH("ce_forward_kernel");
}

void wc_loss_sum(double *loss_sum, const double *losses, int n, cudaStream_t s) {
    loss_sum_kernel<<<1, CE_THREADS, 0, s>>>(loss_sum, losses, n);
    CUDA_CHECK_LAUNCH("loss_sum_kernel");
}

void wc_ce_backward(float *logits, const float *lse, const int *targets, int n, int V, float scale,
                    cudaStream_t s) {
    if (n == 0) return;
    ce_backward_kernel<<<n, CE_THREADS, 0, s>>>(logits, lse, targets, V, scale);
    CUDA_CHECK_LAUNCH("ce_backward_kernel");
}
