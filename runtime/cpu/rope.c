/* Rotary position embedding, Hugging Face's rotate-half convention: a head vector q of hd values
 * is seen as halves (q1, q2), and q' = q * cos + rotate_half(q) * sin with rotate_half(q) =
 * (-q2, q1), cos and sin of pos * inv_freq[i] repeated over both halves,
 * inv_freq[i] = theta^(-2i/hd), computed in fp32 as Hugging Face does. */
#include <math.h>
#include "cpu/kernels.h"

/* q1' = q1 c - q2 s, q2' = q2 c + q1 s on the first heads + kv_heads head vectors of each row
 * (the q heads, then the k heads; v is not rotated). */
WP_HOT
void rope_forward(float *qkv, const float *cos_t, const float *sin_t, int T, int S,
                  int heads, int kv_heads, int hd) {
    int half = hd / 2, nh = heads + kv_heads;
    size_t width = (size_t)(heads + 2 * kv_heads) * hd;
    #pragma omp parallel for schedule(static)
    for (int t = 0; t < T; t++) {
        const float *c = cos_t + (size_t)(t % S) * half, *s = sin_t + (size_t)(t % S) * half;
        for (int h = 0; h < nh; h++) {
            float *a = qkv + t * width + (size_t)h * hd, *b = a + half;
            #pragma omp simd
            for (int i = 0; i < half; i++) {
                float x1 = a[i], x2 = b[i];
                a[i] = x1 * c[i] - x2 * s[i];
                b[i] = x2 * c[i] + x1 * s[i];
            }
        }
    }
}

/* The rotation's transpose: dq1 = dq1' c + dq2' s, dq2 = dq2' c - dq1' s. */
WP_HOT
void rope_backward(float *dqkv, const float *cos_t, const float *sin_t, int T, int S,
                   int heads, int kv_heads, int hd) {
    int half = hd / 2, nh = heads + kv_heads;
    size_t width = (size_t)(heads + 2 * kv_heads) * hd;
    #pragma omp parallel for schedule(static)
    for (int t = 0; t < T; t++) {
        const float *c = cos_t + (size_t)(t % S) * half, *s = sin_t + (size_t)(t % S) * half;
        for (int h = 0; h < nh; h++) {
            float *a = dqkv + t * width + (size_t)h * hd, *b = a + half;
            #pragma omp simd
            for (int i = 0; i < half; i++) {
                float d1 = a[i], d2 = b[i];
                a[i] = d1 * c[i] + d2 * s[i];
                b[i] = d2 * c[i] - d1 * s[i];
            }
        }
    }
}
