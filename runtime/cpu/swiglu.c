/* The SwiGLU activation of the LLaMA MLP: h = silu(gate) * up, silu(g) = g * sigmoid(g). The gate
 * and up projections come out of one fused matrix product, so a row of gu is [gate | up]. */
#include "cpu/kernels.h"

#pragma GCC optimize ("fp-contract=fast")

WP_HOT
void swiglu_forward(float *h, const float *gu, int T, int F) {
    #pragma omp parallel for schedule(static)
    for (int t = 0; t < T; t++) {
        const float *g = gu + (size_t)t * 2 * F, *u = g + F;
        float *hr = h + (size_t)t * F;
        #pragma omp simd
        for (int j = 0; j < F; j++) hr[j] = g[j] / (1.0f + wp_expf(-g[j])) * u[j];
    }
}

/* d silu(g)/dg = s * (1 + g * (1 - s)) with s = sigmoid(g). */
WP_HOT
void swiglu_backward(float *dgu, const float *dh, const float *gu, int T, int F) {
    #pragma omp parallel for schedule(static)
    for (int t = 0; t < T; t++) {
        const float *g = gu + (size_t)t * 2 * F, *u = g + F, *d = dh + (size_t)t * F;
        float *dg = dgu + (size_t)t * 2 * F, *du = dg + F;
        #pragma omp simd
        for (int j = 0; j < F; j++) {
            float s = 1.0f / (1.0f + wp_expf(-g[j]));
            float silu = g[j] * s;
            du[j] = d[j] * silu;
            dg[j] = d[j] * u[j] * s * (1.0f + g[j] * (1.0f - s));
        }
    }
}
