/* bf16 conversions of whole arrays (precision.h has the scalar ones and the rounding rule): the
 * model's rounding points in bf16 mode, and the step ops' conversions between the model's fp32
 * containers and 16-bit plan buffers. Memory-bound loops, so large arrays are split among the
 * OpenMP threads in fixed contiguous ranges; the result does not depend on the split. */
#include "common/precision.h"

/* Below this many elements one thread is faster than waking the team. */
#define PARALLEL_MIN ((size_t)1 << 15)

void wp_bf16_round_array(float *x, size_t n) {
    #pragma omp parallel for schedule(static) if (n >= PARALLEL_MIN)
    for (size_t i = 0; i < n; i++) {
        uint32_t u;
        memcpy(&u, &x[i], sizeof u);
        u = wp_bf16_round_bits(u);
        memcpy(&x[i], &u, sizeof u);
    }
}

void wp_f32_to_bf16_array(WpBf16 *dst, const float *src, size_t n) {
    #pragma omp parallel for schedule(static) if (n >= PARALLEL_MIN)
    for (size_t i = 0; i < n; i++) {
        uint32_t u;
        memcpy(&u, &src[i], sizeof u);
        dst[i] = (WpBf16)(wp_bf16_round_bits(u) >> 16);
    }
}

void wp_bf16_to_f32_array(float *dst, const WpBf16 *src, size_t n) {
    #pragma omp parallel for schedule(static) if (n >= PARALLEL_MIN)
    for (size_t i = 0; i < n; i++) {
        uint32_t u = (uint32_t)src[i] << 16;
        memcpy(&dst[i], &u, sizeof u);
    }
}
