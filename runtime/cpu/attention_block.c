/* Attention of a block of queries against a block of keys and values, the piece ring attention
 * (context parallelism, common/cp_layout.h) is made of: a member of a group holds some chunks of
 * a sequence, and computes each of its query chunks against every key/value chunk at or before it
 * as those chunks come round the ring, merging the partial results as they arrive.
 *
 * Forward: as attention.c's, on one block: per (query head, tile of BR query rows), walk the key
 * tiles with the online softmax; the block's output is normalised by its own sum and comes with
 * its log-sum-exp, so that two blocks' results merge exactly (attention_block_merge).
 *
 * Backward: flash attention's form from the final (merged) output and lse, so that each block's
 * share is computed alone: P = exp(S - lse) is the final softmax's restriction to the block,
 * D = rowsum(dO * O) the final output's, and dV += P^T dO, dS = P * (dP - D), dQ += dS K,
 * dK += dS^T Q (both times 1/sqrt(hd)). Summed over the blocks this is the whole sequence's
 * gradient, in one of two schedules by how the kv heads compare with the threads (described at
 * attention_block_backward).
 *
 * fp32 only: the bf16 mode's roundings (kernels.h) are not applied here. Where a ring rounds in
 * bf16 (each partial output, or the merged one; dS scaled or not) is to be decided with the GPU's
 * per-block kernels (cuDNN's), which the CPU reference must then follow. */
#include <math.h>
#include <omp.h>
#include "cpu/kernels.h"
#include "cpu/attention_tiles.h"

#pragma GCC optimize ("fp-contract=fast")

enum { BR = ATT_BR, BC = ATT_BC };

/* Work area: K^T and V^T of the block's kv heads ([hd][mp] each, zero past m), D of every query
 * row and head (backward: [heads][n]); then each thread's tiles: forward Q tile, scores, output
 * tile, m and l; backward P and dS tiles, dK and dV tiles. */
static size_t kv_floats(int m, int kv_heads, int hd) {
    return 2 * (size_t)kv_heads * hd * attention_padded(m);
}
static size_t shared_floats(int n, int m, int heads, int kv_heads, int hd) {
    return kv_floats(m, kv_heads, hd) + (size_t)heads * n;
}
static size_t thread_floats(int hd) {
    size_t f = 2 * (size_t)BR * hd + (size_t)BR * BC + 2 * BR;
    size_t b = 2 * (size_t)BR * BC + 2 * (size_t)BC * hd;
    return f > b ? f : b;
}
size_t attention_block_work_floats(int n, int m, int heads, int kv_heads, int hd, int nthreads) {
    return shared_floats(n, m, heads, kv_heads, hd) + (size_t)nthreads * thread_floats(hd);
}

/* Keys of the tile at column j0 a row of query tile i0 sees: in a diagonal block the keys up to
 * its own position (tiles align, BR = BC), in a full one all nc of them. */
static inline int visible(int diag, int i0, int j0, int r, int nc) {
    if (!diag || i0 != j0) return nc;
    return r + 1 < nc ? r + 1 : nc;
}

WP_HOT
void attention_block_forward(float *out, float *lse, int ldl, const float *q, int ldq,
                             const float *kv, int ldkv, int n, int m, int heads, int kv_heads,
                             int hd, int diag, float *work, int nthreads) {
    size_t qd = (size_t)heads * hd, mp = attention_padded(m);
    int rep = heads / kv_heads, nqb = (n + BR - 1) / BR, nkb = (m + BC - 1) / BC;
    float scale = 1.0f / sqrtf((float)hd);
    float *KT = work;
    TileMM *tile_mm = attention_tile_mm();
    #pragma omp parallel num_threads(nthreads)
    {
        attention_transpose_heads(KT, kv, 0, 1, m, kv_heads, hd, (size_t)ldkv);   /* ends in a barrier */
        float *Qs = work + shared_floats(n, m, heads, kv_heads, hd) + (size_t)omp_get_thread_num() * thread_floats(hd);
        float *Sc = Qs + (size_t)BR * hd, *O = Sc + BR * BC;
        float *mx = O + (size_t)BR * hd, *l = mx + BR;
        /* diagonal blocks: late query tiles see more keys, so dynamic, largest first */
        #pragma omp for schedule(dynamic, 1) collapse(2)
        for (int h = 0; h < heads; h++)
            for (int qbr = 0; qbr < nqb; qbr++) {
                int qb = nqb - 1 - qbr, i0 = qb * BR, nr = n - i0 < BR ? n - i0 : BR;
                const float *kt = KT + (size_t)(h / rep) * hd * mp;
                const float *vbase = kv + (size_t)(kv_heads + h / rep) * hd;
                for (int r = 0; r < nr; r++) {
                    const float *qr = q + (size_t)(i0 + r) * ldq + (size_t)h * hd;
                    for (int d = 0; d < hd; d++) Qs[r * hd + d] = qr[d] * scale;
                    mx[r] = -INFINITY; l[r] = 0.0f;
                }
                memset(O, 0, (size_t)nr * hd * sizeof *O);
                int kend = diag ? qb + 1 : nkb;
                for (int kb = 0; kb < kend; kb++) {
                    int j0 = kb * BC, nc = m - j0 < BC ? m - j0 : BC;
                    tile_mm(Sc, BC, Qs, hd, 1, kt + j0, (int)mp, nr, BC, hd, 0);
                    for (int r = 0; r < nr; r++)
                        attention_softmax_row(Sc + r * BC, visible(diag, i0, j0, r, nc), &mx[r], &l[r],
                                              O + (size_t)r * hd, hd, 0);
                    tile_mm(O, hd, Sc, BC, 1, vbase + (size_t)j0 * ldkv, ldkv, nr, hd, nc, 1);
                }
                for (int r = 0; r < nr; r++) {
                    float *o = out + (size_t)(i0 + r) * qd + (size_t)h * hd, inv = 1.0f / l[r];
                    for (int d = 0; d < hd; d++) o[d] = O[(size_t)r * hd + d] * inv;
                    lse[(size_t)h * ldl + i0 + r] = mx[r] + logf(l[r]);
                }
            }
    }
}

void attention_block_merge(float *out, float *lse, int ldl, const float *out_b, const float *lse_b,
                           int ldlb, int n, int heads, int hd, int nthreads) {
    size_t qd = (size_t)heads * hd;
    /* a row of out holds every head: rows split over the threads, each read and written once */
    #pragma omp parallel for schedule(static) num_threads(nthreads)
    for (int i = 0; i < n; i++)
        for (int h = 0; h < heads; h++) {
            float *la = lse + (size_t)h * ldl + i, lb = lse_b[(size_t)h * ldlb + i];
            float mx = *la > lb ? *la : lb;
            if (mx == -INFINITY) continue;   /* neither saw a key: nothing to weigh */
            /* exp(x - mx) <= 1, so nothing overflows; weights wa = exp(la - lse), wb likewise */
            float ea = expf(*la - mx), eb = expf(lb - mx), sum = ea + eb;
            float wa = ea / sum, wb = eb / sum;
            float *o = out + (size_t)i * qd + (size_t)h * hd;
            const float *ob = out_b + (size_t)i * qd + (size_t)h * hd;
            #pragma omp simd
            for (int d = 0; d < hd; d++) o[d] = wa * o[d] + wb * ob[d];
            *la = mx + logf(sum);
        }
}

/* P and dS of one tile: query rows i0 .. i0 + nr of head h (q0, do0 their first rows; L, D their
 * lse and D) against keys j0 .. j0 + nc (kt, vt: K^T and V^T of their kv head). P = exp(scale q.k
 * - lse), 0 where masked or past the keys; dS = P * (dO.v - D) * scale. */
static inline void p_ds_tile(float *P, float *dS, TileMM *tile_mm, const float *q0, int ldq,
                             const float *do0, int qd, const float *kt, const float *vt, int mp,
                             const float *L, const float *D, int i0, int nr, int j0, int nc, int hd,
                             int diag, float scale) {
    tile_mm(P, BC, q0, ldq, 1, kt + j0, mp, nr, BC, hd, 0);
    for (int r = 0; r < nr; r++) {
        float *p = P + r * BC, Lr = L[r];
        int lim = visible(diag, i0, j0, r, nc);
        #pragma omp simd
        for (int c = 0; c < BC; c++) p[c] = c < lim ? wp_expf(p[c] * scale - Lr) : 0.0f;
    }
    tile_mm(dS, BC, do0, qd, 1, vt + j0, mp, nr, BC, hd, 0);
    for (int r = 0; r < nr; r++) {
        float *ds = dS + r * BC, *p = P + r * BC, Dr = D[r];
        #pragma omp simd
        for (int c = 0; c < BC; c++) ds[c] = p[c] * (ds[c] - Dr) * scale;
    }
}

/* Two schedules of the same tile steps. With at least as many kv heads as threads, a task per kv
 * head owns its dK, dV and its group's dQ, and each tile's P and dS serve all three (five tile
 * products). With fewer (multi-query, or many threads), that would leave threads idle, so dK and
 * dV are done by a task per (kv head, key tile) and dQ by a task per (head, query tile), each
 * recomputing P and dS: seven products instead of five, over every thread. Either way a task owns
 * what it adds to, so no two threads add into the same place. */
WP_HOT
void attention_block_backward(float *dq, int lddq, float *dkv, int lddkv, const float *dout,
                              const float *out, const float *lse, int ldl, const float *q, int ldq,
                              const float *kv, int ldkv, int n, int m, int heads, int kv_heads,
                              int hd, int diag, float *work, int nthreads) {
    size_t qd = (size_t)heads * hd;
    int mp = (int)attention_padded(m);
    int rep = heads / kv_heads, nqb = (n + BR - 1) / BR, nkb = (m + BC - 1) / BC;
    int fused = kv_heads >= nthreads;
    float scale = 1.0f / sqrtf((float)hd);
    float *KT = work, *VT = work + kv_floats(m, kv_heads, hd) / 2, *D = work + kv_floats(m, kv_heads, hd);
    TileMM *tile_mm = attention_tile_mm();
    #pragma omp parallel num_threads(nthreads)
    {
        attention_transpose_heads(KT, kv, 0, 1, m, kv_heads, hd, (size_t)ldkv);
        attention_transpose_heads(VT, kv, (size_t)kv_heads * hd, 1, m, kv_heads, hd, (size_t)ldkv);
        /* D = rowsum(dO * O): recomputed by each block's call, n * hd per head against the
         * block's n * m * hd, so callers need not carry it */
        #pragma omp for schedule(static) collapse(2)
        for (int h = 0; h < heads; h++)
            for (int i = 0; i < n; i++) {
                const float *o = out + (size_t)i * qd + (size_t)h * hd, *d = dout + (size_t)i * qd + (size_t)h * hd;
                float acc = 0.0f;
                #pragma omp simd reduction(+:acc)
                for (int e = 0; e < hd; e++) acc += o[e] * d[e];
                D[(size_t)h * n + i] = acc;
            }
        float *P = work + shared_floats(n, m, heads, kv_heads, hd) + (size_t)omp_get_thread_num() * thread_floats(hd);
        float *dS = P + BR * BC, *dK = dS + BR * BC, *dV = dK + (size_t)BC * hd;
        /* dK and dV of key tile kb of kv head kvh; fused, a task is a whole kv head (its key
         * tiles in one thread, since they add to the same dQ), and adds to dQ too */
        #pragma omp for schedule(dynamic, 1)
        for (int task = 0; task < (fused ? kv_heads : kv_heads * nkb); task++)
            for (int kb = fused ? 0 : task % nkb; kb < (fused ? nkb : task % nkb + 1); kb++) {
                int kvh = fused ? task : task / nkb;
                int j0 = kb * BC, nc = m - j0 < BC ? m - j0 : BC;
                const float *kt = KT + (size_t)kvh * hd * mp, *vt = VT + (size_t)kvh * hd * mp;
                memset(dK, 0, (size_t)BC * hd * sizeof *dK);
                memset(dV, 0, (size_t)BC * hd * sizeof *dV);
                for (int hh = 0; hh < rep; hh++) {
                    int h = kvh * rep + hh;
                    for (int qb = diag ? kb : 0; qb < nqb; qb++) {
                        int i0 = qb * BR, nr = n - i0 < BR ? n - i0 : BR;
                        const float *q0 = q + (size_t)i0 * ldq + (size_t)h * hd;
                        const float *do0 = dout + (size_t)i0 * qd + (size_t)h * hd;
                        p_ds_tile(P, dS, tile_mm, q0, ldq, do0, (int)qd, kt, vt, mp, lse + (size_t)h * ldl + i0,
                                  D + (size_t)h * n + i0, i0, nr, j0, nc, hd, diag, scale);
                        tile_mm(dV, hd, P, 1, BC, do0, (int)qd, nc, hd, nr, 1);   /* dV += P^T dO */
                        tile_mm(dK, hd, dS, 1, BC, q0, ldq, nc, hd, nr, 1);        /* dK += dS^T Q */
                        if (fused)   /* dQ += dS K, K's rows straight from the block */
                            tile_mm(dq + (size_t)i0 * lddq + (size_t)h * hd, lddq, dS, BC, 1,
                                    kv + (size_t)j0 * ldkv + (size_t)kvh * hd, ldkv, nr, hd, nc, 1);
                    }
                }
                for (int c = 0; c < nc; c++) {
                    float *dk = dkv + (size_t)(j0 + c) * lddkv + (size_t)kvh * hd;
                    float *dv = dkv + (size_t)(j0 + c) * lddkv + (size_t)(kv_heads + kvh) * hd;
                    #pragma omp simd
                    for (int e = 0; e < hd; e++) { dk[e] += dK[(size_t)c * hd + e]; dv[e] += dV[(size_t)c * hd + e]; }
                }
            }
        if (!fused) {
            /* dQ of query tile qb of head h, against every key tile it sees */
            #pragma omp for schedule(dynamic, 1) collapse(2)
            for (int h = 0; h < heads; h++)
                for (int qbr = 0; qbr < nqb; qbr++) {
                    int qb = nqb - 1 - qbr, i0 = qb * BR, nr = n - i0 < BR ? n - i0 : BR, kvh = h / rep;
                    const float *kt = KT + (size_t)kvh * hd * mp, *vt = VT + (size_t)kvh * hd * mp;
                    const float *q0 = q + (size_t)i0 * ldq + (size_t)h * hd;
                    const float *do0 = dout + (size_t)i0 * qd + (size_t)h * hd;
                    int kend = diag ? qb + 1 : nkb;
                    for (int kb = 0; kb < kend; kb++) {
                        int j0 = kb * BC, nc = m - j0 < BC ? m - j0 : BC;
                        p_ds_tile(P, dS, tile_mm, q0, ldq, do0, (int)qd, kt, vt, mp, lse + (size_t)h * ldl + i0,
                                  D + (size_t)h * n + i0, i0, nr, j0, nc, hd, diag, scale);
                        tile_mm(dq + (size_t)i0 * lddq + (size_t)h * hd, lddq, dS, BC, 1,
                                kv + (size_t)j0 * ldkv + (size_t)kvh * hd, ldkv, nr, hd, nc, 1);
                    }
                }
        }
    }
}
