/* Rotary position embedding on the q and k heads of the fused bf16 qkv activation, in place:
 * Hugging Face's rotate-half convention, fp32 tables [S, hd/2] (model_cuda.cu fills them at start
 * as cpu/rope.c does). One thread per (token, head, pair): it reads both halves before writing,
 * and no other thread touches them. */
#include "cuda/common_cuda.cuh"
#include "cuda/kernels_cuda.cuh"

template <int BACKWARD>
static __global__ void rope_kernel(uint16_t *qkv, const float *cos_t, const float *sin_t, int T, int S,
                                   int nh, int half, size_t width) {
    size_t n = (size_t)T * nh * half;
    for (size_t e = (size_t)blockIdx.x * blockDim.x + threadIdx.x; e < n; e += (size_t)gridDim.x * blockDim.x) {
        int i = (int)(e % half);
        size_t th = e / half;
        int h = (int)(th % nh);
        size_t t = th / nh;
        size_t pos = t % S;
        float c = cos_t[pos * half + i], sn = sin_t[pos * half + i];
        uint16_t *a = qkv + t * width + (size_t)h * 2 * half + i, *b = a + half;
        float x1 = bf16_to_f32(*a), x2 = bf16_to_f32(*b);
        if (!BACKWARD) {   /* q1' = q1 c - q2 s, q2' = q2 c + q1 s */
            *a = f32_to_bf16(x1 * c - x2 * sn);
            *b = f32_to_bf16(x2 * c + x1 * sn);
        } else {           /* the transpose: d1 = d1' c + d2' s, d2 = d2' c - d1' s */
            *a = f32_to_bf16(x1 * c + x2 * sn);
            *b = f32_to_bf16(x2 * c - x1 * sn);
        }
    }
}

void wc_rope_forward(uint16_t *qkv, const float *cos_t, const float *sin_t, int T, int S, int heads,
                     int kv_heads, int hd, cudaStream_t s) {
    size_t n = (size_t)T * (heads + kv_heads) * (hd / 2);
    if (n == 0) return;
    rope_kernel<0><<<wc_blocks(n, 256, 65536), 256, 0, s>>>(qkv, cos_t, sin_t, T, S, heads + kv_heads, hd / 2,
                                                            (size_t)(heads + 2 * kv_heads) * hd);
    CUDA_CHECK_LAUNCH("rope_kernel<forward>");
}

void wc_rope_backward(uint16_t *dqkv, const float *cos_t, const float *sin_t, int T, int S, int heads,
                      int kv_heads, int hd, cudaStream_t s) {
    size_t n = (size_t)T * (heads + kv_heads) * (hd / 2);
    if (n == 0) return;
    rope_kernel<1><<<wc_blocks(n, 256, 65536), 256, 0, s>>>(dqkv, cos_t, sin_t, T, S, heads + kv_heads, hd / 2,
                                                            (size_t)(heads + 2 * kv_heads) * hd);
    CUDA_CHECK_LAUNCH("rope_kernel<backward>");
}
