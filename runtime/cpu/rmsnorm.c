/* RMSNorm as Hugging Face's LlamaRMSNorm computes it in fp32: out = (x * rsqrt(mean(x^2) + eps)) * w.
 * Forward keeps only the per-row rsqrt; backward recomputes x * rstd from x. */
#include <math.h>
#include "cpu/kernels.h"

#pragma GCC optimize ("fp-contract=fast")

WP_HOT
void rmsnorm_forward(float *out, float *rstd, const float *x, const float *w, int T, int H, float eps) {
    #pragma omp parallel for schedule(static)
    for (int t = 0; t < T; t++) {
        const float *xr = x + (size_t)t * H;
        float *o = out + (size_t)t * H;
        float ss = 0.0f;
        #pragma omp simd reduction(+:ss)
        for (int j = 0; j < H; j++) ss += xr[j] * xr[j];
        float r = 1.0f / sqrtf(ss / (float)H + eps);
        rstd[t] = r;
        #pragma omp simd
        for (int j = 0; j < H; j++) o[j] = (xr[j] * r) * w[j];
    }
}

WP_HOT
void rmsnorm_recompute(float *out, const float *x, const float *w, const float *rstd, int T, int H) {
    #pragma omp parallel for schedule(static)
    for (int t = 0; t < T; t++) {
        const float *xr = x + (size_t)t * H;
        float *o = out + (size_t)t * H, r = rstd[t];
        #pragma omp simd
        for (int j = 0; j < H; j++) o[j] = (xr[j] * r) * w[j];
    }
}

/* With xhat = x * rstd and g = dout * w: dx = rstd * (g - xhat * mean(g * xhat)); dw = sum over
 * rows of dout * xhat. The rows are split among threads for dx, the columns for dw, so that no
 * two threads add into the same dw element and the sum order does not depend on the threads. */
WP_HOT
void rmsnorm_backward(float *dx, float *dw, const float *dout, const float *x, const float *w,
                      const float *rstd, int T, int H) {
    #pragma omp parallel
    {
        if (dx) {
        #pragma omp for schedule(static)
        for (int t = 0; t < T; t++) {
            const float *xr = x + (size_t)t * H, *d = dout + (size_t)t * H;
            float *dxr = dx + (size_t)t * H;
            float r = rstd[t], dot = 0.0f;
            #pragma omp simd reduction(+:dot)
            for (int j = 0; j < H; j++) dot += d[j] * w[j] * (xr[j] * r);
            float m = dot / (float)H;
            #pragma omp simd
            for (int j = 0; j < H; j++) dxr[j] += r * (d[j] * w[j] - (xr[j] * r) * m);
        }
        }
        /* columns in blocks of 64 so that each thread's reads stay in whole cache lines */
        int nb = dw ? (H + 63) / 64 : 0;
        #pragma omp for schedule(static)
        for (int b = 0; b < nb; b++) {
            int j0 = b * 64, j1 = j0 + 64 < H ? j0 + 64 : H;
            float acc[64] = {0};
            for (int t = 0; t < T; t++) {
                const float *xr = x + (size_t)t * H, *d = dout + (size_t)t * H;
                float r = rstd[t];
                #pragma omp simd
                for (int j = j0; j < j1; j++) acc[j - j0] += d[j] * (xr[j] * r);
            }
            for (int j = j0; j < j1; j++) dw[j] += acc[j - j0];
        }
    }
}
