/* RoPE's tables (rope_table.h). */
#include <math.h>
#include <stddef.h>
#include "common/rope_table.h"

/* Llama 3.1's rule, in fp32 as transformers computes it (its _compute_llama3_parameters): with
 * wavelen = 2 pi / inv_freq, a wavelength above original / low_freq_factor (a frequency the
 * original context never saw a full turn of) is divided by factor, one below original /
 * high_freq_factor is kept, and between the two inv_freq blends the two by
 * smooth = (original / wavelen - low) / (high - low). */
static float llama3_scaled(float inv_freq, const WpRopeScaling *r) {
    float orig = (float)r->original_max_position_embeddings;
    float low_wavelen = orig / r->low_freq_factor, high_wavelen = orig / r->high_freq_factor;
    float wavelen = (float)(2 * M_PI) / inv_freq;
    if (wavelen < high_wavelen) return inv_freq;
    if (wavelen > low_wavelen) return inv_freq / r->factor;
    float smooth = (orig / wavelen - r->low_freq_factor) / (r->high_freq_factor - r->low_freq_factor);
    return (1 - smooth) * inv_freq / r->factor + smooth * inv_freq;
}

/* inv_freq[i] = theta^(-2i/hd), in fp32 as Hugging Face computes it, then scaled if asked. */
static float inv_freq_of(int i, int hd, float theta, const WpRopeScaling *scaling) {
    float f = 1.0f / powf(theta, (float)(2 * i) / (float)hd);
    return scaling && scaling->factor != 0 ? llama3_scaled(f, scaling) : f;
}

void wp_rope_tables(float *cos_t, float *sin_t, int S, int hd, float theta, const WpRopeScaling *scaling) {
    int half = hd / 2;
    for (int i = 0; i < half; i++) {
        float f = inv_freq_of(i, hd, theta, scaling);
        for (int s = 0; s < S; s++) {
            float a = (float)s * f;
            cos_t[(size_t)s * half + i] = cosf(a);
            sin_t[(size_t)s * half + i] = sinf(a);
        }
    }
}
