/* RoPE's tables (rope_table.h). */
#include <math.h>
#include <stddef.h>
#include "common/rope_table.h"

void wp_rope_tables(float *cos_t, float *sin_t, int S, int hd, float theta) {
    int half = hd / 2;
    for (int i = 0; i < half; i++) {
        float inv_freq = 1.0f / powf(theta, (float)(2 * i) / (float)hd);
        for (int s = 0; s < S; s++) {
            float a = (float)s * inv_freq;
            cos_t[(size_t)s * half + i] = cosf(a);
            sin_t[(size_t)s * half + i] = sinf(a);
        }
    }
}
