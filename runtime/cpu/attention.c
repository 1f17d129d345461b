/* Causal grouped-query attention, flash-attention style on the CPU.
 *
 * Forward, per (sequence, query head, block of BR query rows): walk the key blocks up to the
 * diagonal, scores of one BR x BC tile at a time, with the online softmax (running max m and
 * sum l, the output rescaled when the max grows). Only the output and each row's log-sum-exp
 * (m + log l) are kept: never an S x S matrix.
 *
 * Backward, per (sequence, key/value head): for each key block, recompute every tile of every
 * query head of the group from q, k and lse (P = exp(S - lse)); dV += P^T dO, dP = dO V^T,
 * dS = P * (dP - D) with D = rowsum(dO * O) (the softmax's Jacobian folded into one number per
 * row), dQ += dS K, dK += dS^T Q (both scaled by 1/sqrt(hd)). A task owns its heads' dQ, dK and
 * dV, so no two threads ever add into the same place.
 *
 * Query head h reads key/value head h / (heads / kv_heads), as Hugging Face's repeat_kv does.
 *
 * bf16 (kernels.h): every product's inputs are bf16 values, as on tensor cores: q, k, v and dO
 * arrive so; P is rounded before P V and P^T dO, dS before dS K and dS^T Q. What is summed in
 * fp32 (l, D, the outputs before they are stored) stays fp32 until stored. */
#include <math.h>
#include <omp.h>
#include "cpu/kernels.h"
#include "cpu/attention_tiles.h"

#pragma GCC optimize ("fp-contract=fast")

enum { BR = ATT_BR, BC = ATT_BC };

/* The tile products (attention_tiles.h) are most of the attention's arithmetic, so they have
 * register-blocked versions for AVX-512 (8 rows x 32 columns of C held in registers across the
 * whole k loop) and AVX2 (4 x 16), chosen once by what the CPU has, and a plain one. */

static void tile_mm_plain(float *C, int ldc, const float *A, int ars, int acs, const float *B,
                          int ldb, int m, int n, int k, int accumulate) {
    for (int r = 0; r < m; r++) {
        const float *a = A + (size_t)r * ars;
        float *c = C + (size_t)r * ldc;
        if (!accumulate) memset(c, 0, (size_t)n * sizeof *c);
        for (int p = 0; p < k; p++) {
            float ap = a[(size_t)p * acs];
            const float *b = B + (size_t)p * ldb;
            #pragma omp simd
            for (int j = 0; j < n; j++) c[j] += ap * b[j];
        }
    }
}

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define HAVE_X86_TILES 1

__attribute__((target("avx512f,fma")))
static void tile_mm_avx512(float *C, int ldc, const float *A, int ars, int acs, const float *B,
                           int ldb, int m, int n, int k, int accumulate) {
    int r = 0;
    for (; r + 8 <= m; r += 8) {
        int j = 0;
        for (; j + 32 <= n; j += 32) {
            __m512 c0[8], c1[8];
            #pragma GCC unroll 8
            for (int i = 0; i < 8; i++) {
                float *cp = C + (size_t)(r + i) * ldc + j;
                c0[i] = accumulate ? _mm512_loadu_ps(cp) : _mm512_setzero_ps();
                c1[i] = accumulate ? _mm512_loadu_ps(cp + 16) : _mm512_setzero_ps();
            }
            const float *a = A + (size_t)r * ars;
            for (int p = 0; p < k; p++) {
                const float *bp = B + (size_t)p * ldb + j, *ap = a + (size_t)p * acs;
                __m512 b0 = _mm512_loadu_ps(bp), b1 = _mm512_loadu_ps(bp + 16);
                #pragma GCC unroll 8
                for (int i = 0; i < 8; i++) {
                    __m512 av = _mm512_set1_ps(ap[(size_t)i * ars]);
                    c0[i] = _mm512_fmadd_ps(av, b0, c0[i]);
                    c1[i] = _mm512_fmadd_ps(av, b1, c1[i]);
                }
            }
            #pragma GCC unroll 8
            for (int i = 0; i < 8; i++) {
                float *cp = C + (size_t)(r + i) * ldc + j;
                _mm512_storeu_ps(cp, c0[i]);
                _mm512_storeu_ps(cp + 16, c1[i]);
            }
        }
        for (; j < n; j += 16) {   /* the last columns, 16 or fewer at a time, masked */
            __mmask16 mk = n - j >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << (n - j)) - 1);
            __m512 c0[8];
            #pragma GCC unroll 8
            for (int i = 0; i < 8; i++)
                c0[i] = accumulate ? _mm512_maskz_loadu_ps(mk, C + (size_t)(r + i) * ldc + j) : _mm512_setzero_ps();
            const float *a = A + (size_t)r * ars;
            for (int p = 0; p < k; p++) {
                __m512 b0 = _mm512_maskz_loadu_ps(mk, B + (size_t)p * ldb + j);
                const float *ap = a + (size_t)p * acs;
                #pragma GCC unroll 8
                for (int i = 0; i < 8; i++)
                    c0[i] = _mm512_fmadd_ps(_mm512_set1_ps(ap[(size_t)i * ars]), b0, c0[i]);
            }
            #pragma GCC unroll 8
            for (int i = 0; i < 8; i++) _mm512_mask_storeu_ps(C + (size_t)(r + i) * ldc + j, mk, c0[i]);
        }
    }
    for (; r < m; r++) {   /* the last rows, one at a time */
        const float *a = A + (size_t)r * ars;
        float *cp = C + (size_t)r * ldc;
        for (int j = 0; j < n; j += 16) {
            __mmask16 mk = n - j >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << (n - j)) - 1);
            __m512 c0 = accumulate ? _mm512_maskz_loadu_ps(mk, cp + j) : _mm512_setzero_ps();
            for (int p = 0; p < k; p++)
                c0 = _mm512_fmadd_ps(_mm512_set1_ps(a[(size_t)p * acs]),
                                     _mm512_maskz_loadu_ps(mk, B + (size_t)p * ldb + j), c0);
            _mm512_mask_storeu_ps(cp + j, mk, c0);
        }
    }
}

__attribute__((target("avx2,fma")))
static void tile_mm_avx2(float *C, int ldc, const float *A, int ars, int acs, const float *B,
                         int ldb, int m, int n, int k, int accumulate) {
    int r = 0;
    for (; r + 4 <= m; r += 4) {
        int j = 0;
        for (; j + 16 <= n; j += 16) {
            __m256 c0[4], c1[4];
            #pragma GCC unroll 4
            for (int i = 0; i < 4; i++) {
                float *cp = C + (size_t)(r + i) * ldc + j;
                c0[i] = accumulate ? _mm256_loadu_ps(cp) : _mm256_setzero_ps();
                c1[i] = accumulate ? _mm256_loadu_ps(cp + 8) : _mm256_setzero_ps();
            }
            const float *a = A + (size_t)r * ars;
            for (int p = 0; p < k; p++) {
                const float *bp = B + (size_t)p * ldb + j, *ap = a + (size_t)p * acs;
                __m256 b0 = _mm256_loadu_ps(bp), b1 = _mm256_loadu_ps(bp + 8);
                #pragma GCC unroll 4
                for (int i = 0; i < 4; i++) {
                    __m256 av = _mm256_broadcast_ss(ap + (size_t)i * ars);
                    c0[i] = _mm256_fmadd_ps(av, b0, c0[i]);
                    c1[i] = _mm256_fmadd_ps(av, b1, c1[i]);
                }
            }
            #pragma GCC unroll 4
            for (int i = 0; i < 4; i++) {
                float *cp = C + (size_t)(r + i) * ldc + j;
                _mm256_storeu_ps(cp, c0[i]);
                _mm256_storeu_ps(cp + 8, c1[i]);
            }
        }
        if (j < n)   /* the last columns: plain */
            for (int i = 0; i < 4; i++)
                tile_mm_plain(C + (size_t)(r + i) * ldc + j, ldc, A + (size_t)(r + i) * ars, ars, acs,
                              B + j, ldb, 1, n - j, k, accumulate);
    }
    if (r < m)
        tile_mm_plain(C + (size_t)r * ldc, ldc, A + (size_t)r * ars, ars, acs, B, ldb, m - r, n, k,
                      accumulate);
}
#endif

static const char *forced_tiles;   /* tests: "avx2" or "plain" instead of the best */

void attention_force_tiles(const char *which) { forced_tiles = which; }

/* The best tile kernel this CPU runs. */
TileMM *attention_tile_mm(void) {
    if (forced_tiles && !strcmp(forced_tiles, "plain")) return tile_mm_plain;
#ifdef HAVE_X86_TILES
    __builtin_cpu_init();
    int avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    if (forced_tiles && !strcmp(forced_tiles, "avx2")) return avx2 ? tile_mm_avx2 : tile_mm_plain;
    if (__builtin_cpu_supports("avx512f")) return tile_mm_avx512;
    if (avx2) return tile_mm_avx2;
#endif
    return tile_mm_plain;
}

/* The work area: K^T and V^T of every (sequence, kv head), [hd][Sp] each with Sp = S rounded up
 * to a whole tile (zeros past S), so that a tile's score loop runs along keys with unit stride;
 * then each thread's tiles. */
static size_t shared_floats(int G, int S, int kv_heads, int hd) {
    return 2 * (size_t)G * kv_heads * hd * attention_padded(S);
}
static size_t thread_floats(int S, int heads, int kv_heads, int hd) {
    /* forward: Q block, scores, output block, m and l;
     * backward: P and dS tiles, dK and dV blocks, D for the group's heads */
    size_t f = (size_t)BR * hd + (size_t)BR * BC + (size_t)BR * hd + 2 * BR;
    size_t b = 2 * (size_t)BR * BC + 2 * (size_t)BC * hd + (size_t)(heads / kv_heads) * S;
    return f > b ? f : b;
}
size_t attention_work_floats(int G, int S, int heads, int kv_heads, int hd, int nthreads) {
    return shared_floats(G, S, kv_heads, hd) + (size_t)nthreads * thread_floats(S, heads, kv_heads, hd);
}

/* attention_tiles.h; in 16 x 16 blocks so that both sides stay in cache. */
void attention_transpose_heads(float *dst, const float *qkv, size_t off, int G, int S, int kv_heads,
                               int hd, size_t width) {
    size_t Sp = attention_padded(S);
    int nsb = (int)(Sp / 16), ndb = (hd + 15) / 16;
    #pragma omp for schedule(static) collapse(2)
    for (int gj = 0; gj < G * kv_heads; gj++)
        for (int sb = 0; sb < nsb; sb++) {
            int g = gj / kv_heads, j = gj % kv_heads;
            const float *src = qkv + (size_t)g * S * width + off + (size_t)j * hd;
            float *d0 = dst + (size_t)gj * hd * Sp;
            for (int db = 0; db < ndb; db++)
                for (int d = db * 16; d < db * 16 + 16 && d < hd; d++)
                    for (int s = sb * 16; s < sb * 16 + 16; s++)
                        d0[(size_t)d * Sp + s] = s < S ? src[(size_t)s * width + d] : 0.0f;
        }
}

WP_HOT
void attention_forward(float *out, float *lse, const float *qkv, int G, int S, int heads,
                       int kv_heads, int hd, float *work, int nthreads, int bf16) {
    size_t width = (size_t)(heads + 2 * kv_heads) * hd, qd = (size_t)heads * hd, Sp = attention_padded(S);
    int rep = heads / kv_heads, nqb = (S + BR - 1) / BR;
    float scale = 1.0f / sqrtf((float)hd);
    float *KT = work;
    TileMM *tile_mm = attention_tile_mm();
    #pragma omp parallel num_threads(nthreads)
    {
        attention_transpose_heads(KT, qkv, (size_t)heads * hd, G, S, kv_heads, hd, width);   /* ends in a barrier */
        float *Qs = work + shared_floats(G, S, kv_heads, hd)
                  + (size_t)omp_get_thread_num() * thread_floats(S, heads, kv_heads, hd);
        float *Sc = Qs + (size_t)BR * hd, *O = Sc + BR * BC;
        float *m = O + (size_t)BR * hd, *l = m + BR;
        /* late query blocks have more keys: dynamic, largest first */
        #pragma omp for schedule(dynamic, 1) collapse(2)
        for (int task = 0; task < G * heads; task++)
            for (int qbr = 0; qbr < nqb; qbr++) {
                int g = task / heads, h = task % heads, qb = nqb - 1 - qbr;
                int i0 = qb * BR, nr = S - i0 < BR ? S - i0 : BR;
                const float *base = qkv + (size_t)g * S * width;
                const float *kt = KT + ((size_t)g * kv_heads + h / rep) * hd * Sp;
                const float *vbase = base + (size_t)(heads + kv_heads + h / rep) * hd;
                for (int r = 0; r < nr; r++) {
                    const float *q = base + (size_t)(i0 + r) * width + (size_t)h * hd;
                    for (int d = 0; d < hd; d++) Qs[r * hd + d] = q[d] * scale;
                    m[r] = -INFINITY; l[r] = 0.0f;
                }
                memset(O, 0, (size_t)nr * hd * sizeof *O);
                for (int kb = 0; kb <= qb; kb++) {
                    int j0 = kb * BC, nc = S - j0 < BC ? S - j0 : BC;
                    tile_mm(Sc, BC, Qs, hd, 1, kt + j0, (int)Sp, nr, BC, hd, 0);
                    for (int r = 0; r < nr; r++) {
                        /* keys past the row (diagonal tile) or past S: no weight */
                        int lim = kb == qb ? r + 1 : nc;
                        attention_softmax_row(Sc + r * BC, lim, &m[r], &l[r], O + (size_t)r * hd, hd, bf16);
                    }
                    tile_mm(O, hd, Sc, BC, 1, vbase + (size_t)j0 * width, (int)width, nr, hd, nc, 1);
                }
                for (int r = 0; r < nr; r++) {
                    float *o = out + ((size_t)g * S + i0 + r) * qd + (size_t)h * hd;
                    float inv = 1.0f / l[r];
                    for (int d = 0; d < hd; d++) o[d] = O[(size_t)r * hd + d] * inv;
                    if (bf16) wp_bf16_round_serial(o, (size_t)hd);
                    lse[((size_t)g * heads + h) * S + i0 + r] = m[r] + logf(l[r]);
                }
            }
    }
}

WP_HOT
void attention_backward(float *dqkv, const float *dout, const float *out, const float *lse,
                        const float *qkv, int G, int S, int heads, int kv_heads, int hd,
                        float *work, int nthreads, int bf16) {
    size_t width = (size_t)(heads + 2 * kv_heads) * hd, qd = (size_t)heads * hd, Sp = attention_padded(S);
    int rep = heads / kv_heads, nb = (S + BR - 1) / BR;
    float scale = 1.0f / sqrtf((float)hd);
    /* bf16: dS is rounded before its products without the 1/sqrt(hd), which dQ and dK take after
     * their sums, as flash attention does (the rounding of dS does not depend on hd then) */
    float dscale = bf16 ? 1.0f : scale;
    float *KT = work, *VT = work + shared_floats(G, S, kv_heads, hd) / 2;
    TileMM *tile_mm = attention_tile_mm();
    #pragma omp parallel num_threads(nthreads)
    {
        attention_transpose_heads(KT, qkv, (size_t)heads * hd, G, S, kv_heads, hd, width);
        attention_transpose_heads(VT, qkv, (size_t)(heads + kv_heads) * hd, G, S, kv_heads, hd, width);
        float *P = work + shared_floats(G, S, kv_heads, hd)
                 + (size_t)omp_get_thread_num() * thread_floats(S, heads, kv_heads, hd);
        float *dS = P + BR * BC, *dK = dS + BR * BC, *dV = dK + (size_t)BC * hd, *D = dV + (size_t)BC * hd;
        #pragma omp for schedule(dynamic, 1)
        for (int task = 0; task < G * kv_heads; task++) {
            int g = task / kv_heads, kvh = task % kv_heads;
            const float *base = qkv + (size_t)g * S * width;
            const float *kt = KT + ((size_t)g * kv_heads + kvh) * hd * Sp;
            const float *vt = VT + ((size_t)g * kv_heads + kvh) * hd * Sp;
            float *dbase = dqkv + (size_t)g * S * width;
            const float *dobase = dout + (size_t)g * S * qd, *obase = out + (size_t)g * S * qd;
            size_t koff = (size_t)(heads + kvh) * hd, voff = (size_t)(heads + kv_heads + kvh) * hd;
            /* D = rowsum(dO * O) for the group's heads; the group's dQ starts at 0 */
            for (int hh = 0; hh < rep; hh++) {
                int h = kvh * rep + hh;
                for (int i = 0; i < S; i++) {
                    const float *o = obase + (size_t)i * qd + (size_t)h * hd;
                    const float *d = dobase + (size_t)i * qd + (size_t)h * hd;
                    float acc = 0.0f;
                    #pragma omp simd reduction(+:acc)
                    for (int e = 0; e < hd; e++) acc += o[e] * d[e];
                    D[(size_t)hh * S + i] = acc;
                    memset(dbase + (size_t)i * width + (size_t)h * hd, 0, (size_t)hd * sizeof(float));
                }
            }
            for (int kb = 0; kb < nb; kb++) {
                int j0 = kb * BC, nc = S - j0 < BC ? S - j0 : BC;
                memset(dK, 0, (size_t)BC * hd * sizeof *dK);
                memset(dV, 0, (size_t)BC * hd * sizeof *dV);
                for (int hh = 0; hh < rep; hh++) {
                    int h = kvh * rep + hh;
                    const float *lrow = lse + ((size_t)g * heads + h) * S;
                    for (int qb = kb; qb < nb; qb++) {
                        int i0 = qb * BR, nr = S - i0 < BR ? S - i0 : BR;
                        const float *q0 = base + (size_t)i0 * width + (size_t)h * hd;
                        const float *do0 = dobase + (size_t)i0 * qd + (size_t)h * hd;
                        /* P = exp(scale q.k - lse), 0 where masked or past S */
                        tile_mm(P, BC, q0, (int)width, 1, kt + j0, (int)Sp, nr, BC, hd, 0);
                        for (int r = 0; r < nr; r++) {
                            float *p = P + r * BC, L = lrow[i0 + r];
                            int lim = qb == kb ? r + 1 : nc;
                            #pragma omp simd
                            for (int c = 0; c < BC; c++) p[c] = c < lim ? wp_expf(p[c] * scale - L) : 0.0f;
                        }
                        /* dP = dO V^T, then dS = P * (dP - D) * dscale */
                        tile_mm(dS, BC, do0, (int)qd, 1, vt + j0, (int)Sp, nr, BC, hd, 0);
                        for (int r = 0; r < nr; r++) {
                            float *ds = dS + r * BC, *p = P + r * BC, Dr = D[(size_t)hh * S + i0 + r];
                            #pragma omp simd
                            for (int c = 0; c < BC; c++) ds[c] = p[c] * (ds[c] - Dr) * dscale;
                        }
                        if (bf16) {   /* the products below take P and dS as bf16 */
                            wp_bf16_round_serial(P, (size_t)nr * BC);
                            wp_bf16_round_serial(dS, (size_t)nr * BC);
                        }
                        /* dV += P^T dO */
                        tile_mm(dV, hd, P, 1, BC, do0, (int)qd, nc, hd, nr, 1);
                        /* dQ += dS K (K's rows straight from qkv), dK += dS^T Q */
                        tile_mm(dbase + (size_t)i0 * width + (size_t)h * hd, (int)width, dS, BC, 1,
                                base + (size_t)j0 * width + koff, (int)width, nr, hd, nc, 1);
                        tile_mm(dK, hd, dS, 1, BC, q0, (int)width, nc, hd, nr, 1);
                    }
                }
                if (bf16) {   /* dK's deferred scale; dK and dV stored as bf16 */
                    for (size_t e = 0; e < (size_t)nc * hd; e++) dK[e] *= scale;
                    wp_bf16_round_serial(dK, (size_t)nc * hd);
                    wp_bf16_round_serial(dV, (size_t)nc * hd);
                }
                for (int c = 0; c < nc; c++) {
                    memcpy(dbase + (size_t)(j0 + c) * width + koff, dK + (size_t)c * hd, (size_t)hd * sizeof(float));
                    memcpy(dbase + (size_t)(j0 + c) * width + voff, dV + (size_t)c * hd, (size_t)hd * sizeof(float));
                }
            }
            if (bf16)   /* the group's dQ is complete: its deferred scale, then stored as bf16 */
                for (int hh = 0; hh < rep; hh++)
                    for (int i = 0; i < S; i++) {
                        float *dq = dbase + (size_t)i * width + (size_t)(kvh * rep + hh) * hd;
                        for (int e = 0; e < hd; e++) dq[e] *= scale;
                        wp_bf16_round_serial(dq, (size_t)hd);
                    }
        }
    }
}
