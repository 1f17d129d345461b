/* SwiGLU of the LLaMA MLP on bf16: h = silu(g) * u from a row [gate | up] of gu, and its backward;
 * fp32 arithmetic, each result rounded to bf16 where stored (cpu/swiglu.c is the reference). */
#include "cuda/common_cuda.cuh"
#include "cuda/kernels_cuda.cuh"

static __global__ void swiglu_forward_kernel(uint16_t *h, const uint16_t *gu, int T, int F) {
    size_t n = (size_t)T * F;
    for (size_t e = (size_t)blockIdx.x * blockDim.x + threadIdx.x; e < n; e += (size_t)gridDim.x * blockDim.x) {
        size_t t = e / F, j = e % F;
        float g = bf16_to_f32(gu[t * 2 * F + j]), u = bf16_to_f32(gu[t * 2 * F + F + j]);
        h[e] = f32_to_bf16(g / (1.0f + expf(-g)) * u);
    }
}

/* d silu(g)/dg = s * (1 + g * (1 - s)) with s = sigmoid(g). */
static __global__ void swiglu_backward_kernel(uint16_t *dgu, const uint16_t *dh, const uint16_t *gu, int T, int F) {
    size_t n = (size_t)T * F;
    for (size_t e = (size_t)blockIdx.x * blockDim.x + threadIdx.x; e < n; e += (size_t)gridDim.x * blockDim.x) {
        size_t t = e / F, j = e % F;
        float g = bf16_to_f32(gu[t * 2 * F + j]), u = bf16_to_f32(gu[t * 2 * F + F + j]);
        float d = bf16_to_f32(dh[e]);
        float sg = 1.0f / (1.0f + expf(-g)), silu = g * sg;
        dgu[t * 2 * F + F + j] = f32_to_bf16(d * silu);
        dgu[t * 2 * F + j] = f32_to_bf16(d * u * sg * (1.0f + g * (1.0f - sg)));
    }
}

void wc_swiglu_forward(uint16_t *h, const uint16_t *gu, int T, int F, cudaStream_t s) {
    size_t n = (size_t)T * F;
    if (n == 0) return;
    swiglu_forward_kernel<<<wc_blocks(n, 256, 65536), 256, 0, s>>>(h, gu, T, F);
    CUDA_CHECK_LAUNCH("swiglu_forward_kernel");
}

void wc_swiglu_backward(uint16_t *dgu, const uint16_t *dh, const uint16_t *gu, int T, int F, cudaStream_t s) {
    size_t n = (size_t)T * F;
    if (n == 0) return;
    swiglu_backward_kernel<<<wc_blocks(n, 256, 65536), 256, 0, s>>>(dgu, dh, gu, T, F);
    CUDA_CHECK_LAUNCH("swiglu_backward_kernel");
}
