/* Number formats of training: which one a run computes in, their sizes, and bfloat16 rounding.
 *
 * Used by the planner (byte sizes) and by the runtime (the bf16 model math, the step ops'
 * conversions), so this header is plain C: no OpenMP, no BLAS, nothing to link. The array
 * functions at the end are in precision.c, which only the runtime links.
 *
 * bf16 is the upper half of an IEEE fp32: sign, the same 8 exponent bits, 7 fraction bits. So
 * every bf16 value is an fp32 value, and "rounding a float to bf16" below means: the nearest
 * bf16 value, kept in a float. The CPU model in bf16 mode keeps its tensors as such floats (fp32
 * containers holding bf16 values, runtime/cpu/model.c); buffers of the plan and transfers between
 * ranks are real 16-bit arrays (WpBf16), converted by the step ops with the functions below. */
#ifndef WP_PRECISION_H
#define WP_PRECISION_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

typedef enum { WP_FP32 = 0, WP_BF16 = 1 } WpDtype;

/* One bf16 value: its bits, the upper 16 of the fp32 with the same value. */
typedef uint16_t WpBf16;

/* Bytes of one element. */
static inline size_t wp_dtype_bytes(WpDtype d) { return d == WP_BF16 ? 2 : 4; }

/* "fp32" or "bf16", as flags and plan files spell them. */
static inline const char *wp_dtype_name(WpDtype d) { return d == WP_BF16 ? "bf16" : "fp32"; }

/* name -> *d; returns 0, or -1 for a name that is neither "fp32" nor "bf16". */
static inline int wp_dtype_parse(const char *name, WpDtype *d) {
    if (!strcmp(name, "fp32")) { *d = WP_FP32; return 0; }
    if (!strcmp(name, "bf16")) { *d = WP_BF16; return 0; }
    return -1;
}

/* The bits of the bf16 nearest to f, ties to even (as CUDA's __float2bfloat16_rn and PyTorch's
 * conversion): add half an ulp of the result, minus one unless the kept part is odd, then cut.
 * This is exact for every finite input, subnormals included (their bit patterns are ordered like
 * their values), and rounds past the largest bf16 to infinity. A NaN stays a NaN of the same
 * sign: its quiet bit is set before the cut, so the kept fraction is never zero (a NaN whose
 * payload is all in the lower half would otherwise become infinity). Branch-free, so loops over
 * it vectorise. */
static inline uint32_t wp_bf16_round_bits(uint32_t u) {
    uint32_t rounded = u + 0x7FFFu + ((u >> 16) & 1u);
    uint32_t nan = (u & 0x7FFFFFFFu) > 0x7F800000u;
    return (nan ? (u | 0x00400000u) : rounded) & 0xFFFF0000u;
}

static inline WpBf16 wp_f32_to_bf16(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return (WpBf16)(wp_bf16_round_bits(u) >> 16);
}

static inline float wp_bf16_to_f32(WpBf16 h) {
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* An IEEE half (fp16) widened to the float of the same value: infinities and NaNs kept,
 * subnormal halves made normal floats. For checkpoints saved in F16 (train/ckpt_load.c). */
static inline float wp_f16_to_f32(uint16_t h) {
    uint32_t sign = (uint32_t)(h >> 15) << 31, exp = (h >> 10) & 0x1f, man = h & 0x3ff, u;
    if (exp == 0x1f) u = sign | 0x7f800000u | (man << 13);            /* inf, nan */
    else if (exp != 0) u = sign | ((exp + 112) << 23) | (man << 13);   /* normal */
    else if (man == 0) u = sign;                                       /* zero */
    else {                                                             /* subnormal */
        int e = -1;
        do { man <<= 1; e++; } while (!(man & 0x400));
        u = sign | ((uint32_t)(112 - e) << 23) | ((man & 0x3ff) << 13);
    }
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* f rounded to the nearest bf16 value, as a float. */
static inline float wp_bf16_round(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    u = wp_bf16_round_bits(u);
    memcpy(&f, &u, sizeof f);
    return f;
}

/* 1 when f is a bf16 value (its lower 16 bits are zero). */
static inline int wp_is_bf16(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return (u & 0xFFFFu) == 0;
}

/* Rounds n floats in place, on the calling thread: for small tiles and for code that already
 * runs inside a parallel region. */
static inline void wp_bf16_round_serial(float *x, size_t n) {
    for (size_t i = 0; i < n; i++) {
        uint32_t u;
        memcpy(&u, &x[i], sizeof u);
        u = wp_bf16_round_bits(u);
        memcpy(&x[i], &u, sizeof u);
    }
}

/* precision.c (runtime only): whole arrays, split among OpenMP threads when large. */
void wp_bf16_round_array(float *x, size_t n);                      /* in place */
void wp_f32_to_bf16_array(WpBf16 *dst, const float *src, size_t n);
void wp_bf16_to_f32_array(float *dst, const WpBf16 *src, size_t n);

#endif
