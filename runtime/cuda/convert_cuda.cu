/* Element-wise conversions between the plan's formats (fp32 masters and gradients, bf16 working
 * copies and activations), gradient accumulation across formats, and the deterministic sum of
 * squares the gradient clipping needs. Memory-bound grid-stride loops; the rounding is
 * common_cuda.cuh's, the CPU's bit for bit. */
#include "cuda/common_cuda.cuh"
#include "cuda/kernels_cuda.cuh"

static __global__ void f32_to_bf16_kernel(uint16_t *dst, const float *src, size_t n) {
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        dst[i] = f32_to_bf16(src[i]);
}

static __global__ void bf16_to_f32_kernel(float *dst, const uint16_t *src, size_t n) {
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        dst[i] = bf16_to_f32(src[i]);
}

void wc_convert_f32_to_bf16(uint16_t *dst, const float *src, size_t n, cudaStream_t s) {
    if (n == 0) return;
    f32_to_bf16_kernel<<<wc_blocks(n, 256, 65536), 256, 0, s>>>(dst, src, n);
    CUDA_CHECK_LAUNCH("f32_to_bf16_kernel");
}

void wc_convert_bf16_to_f32(float *dst, const uint16_t *src, size_t n, cudaStream_t s) {
    if (n == 0) return;
    bf16_to_f32_kernel<<<wc_blocks(n, 256, 65536), 256, 0, s>>>(dst, src, n);
    CUDA_CHECK_LAUNCH("bf16_to_f32_kernel");
}

/* One instance per pair of formats, so that the loop has no per-element branch on them. */
__device__ __forceinline__ float widen(float v) { return v; }
__device__ __forceinline__ float widen(uint16_t v) { return bf16_to_f32(v); }
__device__ __forceinline__ void store(float *p, size_t i, float v) { p[i] = v; }
__device__ __forceinline__ void store(uint16_t *p, size_t i, float v) { p[i] = f32_to_bf16(v); }

template <typename D, typename S>
static __global__ void acc_kernel(D *dst, const S *src, size_t n, int first) {
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        float v = widen(src[i]);
        if (!first) v = widen(dst[i]) + v;
        store(dst, i, v);
    }
}

void wc_acc_launch(void *dst, int dst_dtype, const void *src, int src_dtype, size_t n, int first,
                   cudaStream_t s) {
    if (n == 0) return;
    unsigned int b = wc_blocks(n, 256, 65536);
    if (dst_dtype == 0 && src_dtype == 0)
        acc_kernel<float, float><<<b, 256, 0, s>>>((float *)dst, (const float *)src, n, first);
    else if (dst_dtype == 0)
        acc_kernel<float, uint16_t><<<b, 256, 0, s>>>((float *)dst, (const uint16_t *)src, n, first);
    else if (src_dtype == 0)
        acc_kernel<uint16_t, float><<<b, 256, 0, s>>>((uint16_t *)dst, (const float *)src, n, first);
    else
        acc_kernel<uint16_t, uint16_t><<<b, 256, 0, s>>>((uint16_t *)dst, (const uint16_t *)src, n, first);
    CUDA_CHECK_LAUNCH("acc_kernel");
}

static __global__ void fill_kernel(float *x, float v, size_t n) {
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) x[i] = v;
}

void wc_fill_f32(float *x, float v, size_t n, cudaStream_t s) {
    if (n == 0) return;
    fill_kernel<<<wc_blocks(n, 256, 65536), 256, 0, s>>>(x, v, n);
    CUDA_CHECK_LAUNCH("fill_kernel");
}

enum { SUMSQ_THREADS = 256 };

/* The fixed tree over a block's threads: halving strides, so the order depends only on the
 * thread count. Leaves the sum in sh[0]. */
__device__ static void block_tree_sum(double *sh) {
    for (int stride = SUMSQ_THREADS / 2; stride > 0; stride /= 2) {
        __syncthreads();
        if ((int)threadIdx.x < stride) sh[threadIdx.x] += sh[threadIdx.x + stride];
    }
    __syncthreads();
}

/* Block b sums range b of WC_SUMSQ_BLOCKS equal ranges (the first n % B one longer); thread i
 * takes elements lo + i, lo + i + 256, ... in order. */
static __global__ void sumsq_partial_kernel(const float *g, size_t n, double *partials) {
    __shared__ double sh[SUMSQ_THREADS];
    size_t b = blockIdx.x, B = WC_SUMSQ_BLOCKS;
    size_t lo = n / B * b + (n % B < b ? n % B : b);
    size_t hi = lo + n / B + (b < n % B ? 1 : 0);
    double acc = 0.0;
    for (size_t i = lo + threadIdx.x; i < hi; i += SUMSQ_THREADS) acc += (double)g[i] * (double)g[i];
    sh[threadIdx.x] = acc;
    block_tree_sum(sh);
    if (threadIdx.x == 0) partials[b] = sh[0];
}

static __global__ void sumsq_final_kernel(const double *partials, double *out) {
    __shared__ double sh[SUMSQ_THREADS];
    double acc = 0.0;
    for (int i = threadIdx.x; i < WC_SUMSQ_BLOCKS; i += SUMSQ_THREADS) acc += partials[i];
    sh[threadIdx.x] = acc;
    block_tree_sum(sh);
    if (threadIdx.x == 0) *out = sh[0];
}

void wc_sumsq_launch(const float *g, size_t n, double *partials, double *out, cudaStream_t s) {
    sumsq_partial_kernel<<<WC_SUMSQ_BLOCKS, SUMSQ_THREADS, 0, s>>>(g, n, partials);
    CUDA_CHECK_LAUNCH("sumsq_partial_kernel");
    sumsq_final_kernel<<<1, SUMSQ_THREADS, 0, s>>>(partials, out);
    CUDA_CHECK_LAUNCH("sumsq_final_kernel");
}
