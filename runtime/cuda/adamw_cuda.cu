/* AdamW on the GPU: cpu/adamw.c's update, element by element in the same fp32 expression order,
 * on the fp32 master weights and moments of the chunk's owner; optionally writes the updated
 * weights' bf16 working copy in the same pass (one read of the master instead of two). */
#include "cuda/common_cuda.cuh"
#include "cuda/kernels_cuda.cuh"

static __global__ void adamw_kernel(float *w, const float *grad, float *m1, float *m2, size_t n, float lr,
                                    float decay, float grad_scale, float b1, float b2, float eps, float c1,
                                    float c2, uint16_t *w16) {
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        /* _rn intrinsics: no fused multiply-adds, so each step rounds as cpu/adamw.c's (compiled
         * without contraction) does and the update is the CPU's bit for bit */
        float g = __fmul_rn(grad[i], grad_scale);
        float mi = __fadd_rn(__fmul_rn(b1, m1[i]), __fmul_rn(1.0f - b1, g));
        float vi = __fadd_rn(__fmul_rn(b2, m2[i]), __fmul_rn(__fmul_rn(1.0f - b2, g), g));
        m1[i] = mi;
        m2[i] = vi;
        float step = __fdiv_rn(__fmul_rn(lr, __fmul_rn(mi, c1)), __fadd_rn(__fsqrt_rn(__fmul_rn(vi, c2)), eps));
        float p = __fsub_rn(__fmul_rn(w[i], decay), step);
        w[i] = p;
        if (w16) w16[i] = f32_to_bf16(p);
    }
}

void wc_adamw_launch(float *w, const float *g, float *m1, float *m2, size_t n, float lr, float wd,
                     float grad_scale, float b1, float b2, float eps, float c1, float c2, uint16_t *w16,
                     cudaStream_t s) {
    if (n == 0) return;
    adamw_kernel<<<wc_blocks(n, 256, 65536), 256, 0, s>>>(w, g, m1, m2, n, lr, 1.0f - lr * wd, grad_scale, b1,
                                                          b2, eps, c1, c2, w16);
    CUDA_CHECK_LAUNCH("adamw_kernel");
}
