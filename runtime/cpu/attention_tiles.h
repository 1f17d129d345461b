/* What attention.c (causal attention over whole sequences) and attention_block.c (a block of
 * queries against a block of keys and values, for ring attention) share: the tile size, the
 * small-tile product kernels and the K/V transpose into the work area, and the online softmax's
 * step on one row of a score tile. Written once here so that both forms do the same arithmetic
 * in the same order. Private to runtime/cpu. */
#ifndef WP_ATTENTION_TILES_H
#define WP_ATTENTION_TILES_H

#include <stddef.h>
#include "cpu/kernels.h"

enum { ATT_BR = 64, ATT_BC = 64 };   /* query rows and keys per tile; equal, so diagonal tiles align */

/* C[m, n] (+)= A[m, k] B[k, n] on small tiles, A(i, p) = A[i * ars + p * acs] (so A may be read
 * transposed), B's rows contiguous. */
typedef void TileMM(float *C, int ldc, const float *A, int ars, int acs, const float *B, int ldb,
                    int m, int n, int k, int accumulate);
/* The best tile kernel this CPU runs (or the one attention_force_tiles named). */
TileMM *attention_tile_mm(void);

/* S rounded up to a whole tile: the K^T / V^T rows' length in the work area. */
static inline size_t attention_padded(int S) { return (size_t)(S + ATT_BC - 1) / ATT_BC * ATT_BC; }

/* dst[(g * kv + j) * hd + d][s] = src[g, s, off + j * hd + d] (rows of `width` floats, S rows a
 * sequence), zero for S <= s < attention_padded(S): keys along a row, so that a tile's score loop
 * runs with unit stride. Called inside a parallel region (an omp for, ending in a barrier). */
void attention_transpose_heads(float *dst, const float *src, size_t off, int G, int S, int kv_heads,
                               int hd, size_t width);

/* One row of a score tile through the online softmax: s[0, ATT_BC) holds scaled scores, of which
 * the first lim count (the rest are masked or past the keys); m and l are the row's running max
 * and sum, o its unnormalised output (hd floats), rescaled when the max grows. s becomes P (0
 * where masked), rounded to bf16 when bf16, as the P V product takes it. */
static inline void attention_softmax_row(float *s, int lim, float *m, float *l, float *o, int hd,
                                         int bf16) {
    float mx = *m;
    #pragma omp simd reduction(max:mx)
    for (int c = 0; c < ATT_BC; c++) mx = c < lim && s[c] > mx ? s[c] : mx;
    float corr = wp_expf(*m - mx), sum = 0.0f;
    #pragma omp simd reduction(+:sum)
    for (int c = 0; c < ATT_BC; c++) {
        s[c] = c < lim ? wp_expf(s[c] - mx) : 0.0f;
        sum += s[c];
    }
    *l = *l * corr + sum;
    *m = mx;
    if (bf16) wp_bf16_round_serial(s, ATT_BC);
    if (corr != 1.0f) {
        #pragma omp simd
        for (int d = 0; d < hd; d++) o[d] *= corr;
    }
}

#endif
