/* RMSNorm (Hugging Face's LlamaRMSNorm) on bf16 rows: one warp per row for the row-wise parts,
 * fp32 sums; the weight gradient summed over rows in fixed ranges and a fixed order, so that
 * it is the same bits on every run (no atomics). cpu/rmsnorm.c is the reference. */
#include "cuda/common_cuda.cuh"
#include "cuda/kernels_cuda.cuh"

enum { ROWS_PER_BLOCK = 8 };   /* warps per block, one row each */

__device__ __forceinline__ float warp_sum(float v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xFFFFFFFFu, v, o);
    return v;
}

static __global__ void rmsnorm_forward_kernel(uint16_t *out, float *rstd, const uint16_t *x,
                                              const uint16_t *w, int T, int H, float eps) {
    int t = blockIdx.x * ROWS_PER_BLOCK + threadIdx.y, lane = threadIdx.x;
    if (t >= T) return;   /* a whole warp leaves together */
    const uint16_t *xr = x + (size_t)t * H;
    uint16_t *o = out + (size_t)t * H;
    float ss = 0.0f;
    for (int j = lane; j < H; j += 32) { float v = bf16_to_f32(xr[j]); ss += v * v; }
    ss = warp_sum(ss);
    float r = 1.0f / sqrtf(ss / (float)H + eps);
    if (lane == 0) rstd[t] = r;
    for (int j = lane; j < H; j += 32) o[j] = f32_to_bf16((bf16_to_f32(xr[j]) * r) * bf16_to_f32(w[j]));
}

static __global__ void rmsnorm_recompute_kernel(uint16_t *out, const uint16_t *x, const uint16_t *w,
                                                const float *rstd, int T, int H) {
    int t = blockIdx.x * ROWS_PER_BLOCK + threadIdx.y, lane = threadIdx.x;
    if (t >= T) return;
    const uint16_t *xr = x + (size_t)t * H;
    uint16_t *o = out + (size_t)t * H;
    float r = rstd[t];
    for (int j = lane; j < H; j += 32) o[j] = f32_to_bf16((bf16_to_f32(xr[j]) * r) * bf16_to_f32(w[j]));
}

/* With xhat = x * rstd and g = dout * w: dx = rstd * (g - xhat * mean(g * xhat)). */
static __global__ void rmsnorm_backward_dx_kernel(uint16_t *dx, int accumulate, const uint16_t *dout,
                                                  const uint16_t *x, const uint16_t *w, const float *rstd,
                                                  int T, int H) {
    int t = blockIdx.x * ROWS_PER_BLOCK + threadIdx.y, lane = threadIdx.x;
    if (t >= T) return;
    const uint16_t *xr = x + (size_t)t * H, *d = dout + (size_t)t * H;
    uint16_t *dxr = dx + (size_t)t * H;
    float r = rstd[t], dot = 0.0f;
    for (int j = lane; j < H; j += 32)
        dot += bf16_to_f32(d[j]) * bf16_to_f32(w[j]) * (bf16_to_f32(xr[j]) * r);
    float m = warp_sum(dot) / (float)H;
    for (int j = lane; j < H; j += 32) {
        float g = r * (bf16_to_f32(d[j]) * bf16_to_f32(w[j]) - (bf16_to_f32(xr[j]) * r) * m);
        dxr[j] = f32_to_bf16(accumulate ? bf16_to_f32(dxr[j]) + g : g);
    }
}

/* Block (column block bx, row range by): 32 columns x 8 row-strided threads; the 8 partial sums
 * of a column are added in thread order. */
static __global__ void rmsnorm_backward_dw_partial_kernel(float *partials, const uint16_t *dout,
                                                          const uint16_t *x, const float *rstd, int T, int H) {
    __shared__ float sh[8][33];
    int j = blockIdx.x * 32 + threadIdx.x, split = blockIdx.y;
    int r0 = (int)((long)T * split / WC_NORM_SPLITS), r1 = (int)((long)T * (split + 1) / WC_NORM_SPLITS);
    float acc = 0.0f;
    if (j < H)
        for (int t = r0 + threadIdx.y; t < r1; t += 8)
            acc += bf16_to_f32(dout[(size_t)t * H + j]) * (bf16_to_f32(x[(size_t)t * H + j]) * rstd[t]);
    sh[threadIdx.y][threadIdx.x] = acc;
    __syncthreads();
    if (threadIdx.y == 0 && j < H) {
        float s = sh[0][threadIdx.x];
        for (int i = 1; i < 8; i++) s += sh[i][threadIdx.x];
        partials[(size_t)split * H + j] = s;
    }
}

static __global__ void rmsnorm_backward_dw_final_kernel(float *dw, const float *partials, int H) {
    int j = blockIdx.x * blockDim.x + threadIdx.x;
    if (j >= H) return;
    float s = 0.0f;
    for (int i = 0; i < WC_NORM_SPLITS; i++) s += partials[(size_t)i * H + j];
    dw[j] += s;
}

void wc_rmsnorm_forward(uint16_t *out, float *rstd, const uint16_t *x, const uint16_t *w, int T, int H,
                        float eps, cudaStream_t s) {
    dim3 block(32, ROWS_PER_BLOCK);
    rmsnorm_forward_kernel<<<(T + ROWS_PER_BLOCK - 1) / ROWS_PER_BLOCK, block, 0, s>>>(out, rstd, x, w, T, H, eps);
    CUDA_CHECK_LAUNCH("rmsnorm_forward_kernel");
}

void wc_rmsnorm_recompute(uint16_t *out, const uint16_t *x, const uint16_t *w, const float *rstd, int T,
                          int H, cudaStream_t s) {
    dim3 block(32, ROWS_PER_BLOCK);
    rmsnorm_recompute_kernel<<<(T + ROWS_PER_BLOCK - 1) / ROWS_PER_BLOCK, block, 0, s>>>(out, x, w, rstd, T, H);
    CUDA_CHECK_LAUNCH("rmsnorm_recompute_kernel");
}

void wc_rmsnorm_backward(uint16_t *dx, int accumulate, float *dw, const uint16_t *dout, const uint16_t *x,
                         const uint16_t *w, const float *rstd, int T, int H, float *partials, cudaStream_t s) {
    dim3 block(32, ROWS_PER_BLOCK);
    rmsnorm_backward_dx_kernel<<<(T + ROWS_PER_BLOCK - 1) / ROWS_PER_BLOCK, block, 0, s>>>(
        dx, accumulate, dout, x, w, rstd, T, H);
    CUDA_CHECK_LAUNCH("rmsnorm_backward_dx_kernel");
    dim3 grid((H + 31) / 32, WC_NORM_SPLITS), b2(32, 8);
    rmsnorm_backward_dw_partial_kernel<<<grid, b2, 0, s>>>(partials, dout, x, rstd, T, H);
    CUDA_CHECK_LAUNCH("rmsnorm_backward_dw_partial_kernel");
    rmsnorm_backward_dw_final_kernel<<<(H + 255) / 256, 256, 0, s>>>(dw, partials, H);
    CUDA_CHECK_LAUNCH("rmsnorm_backward_dw_final_kernel");
}
