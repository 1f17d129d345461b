/* Ring attention in one process, for tests: C members of a context-parallel group in the balanced
 * layout (common/cp_layout.h), each running its query chunks against every key/value chunk as the
 * ring brings them (cpu/kernels.h's attention_block_*), merged; then the backward, each block's dK
 * and dV returned to the chunk's owner. What a distributed run does, with the sends replaced by
 * reads of the other members' arrays. Used by tests/unit/test_attention_block.c and the PyTorch
 * parity driver tests/torch/ring_dump.c. Header-only. */
#ifndef WP_RING_FIXTURE_H
#define WP_RING_FIXTURE_H

#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>
#include "cpu/kernels.h"
#include "common/cp_layout.h"

/* What the ring gives, in the whole sequence's layout (one sequence, as attention_forward's with
 * G = 1): out [S, heads * hd], lse [heads, S], dqkv [S, (heads + 2 kv) * hd]; the inputs are qkv
 * [S, (heads + 2 kv) * hd] and dout [S, heads * hd], the sequence's, each member reading its rows. */
typedef struct {
    float *out, *lse, *dqkv;
} Ring;

/* Ring attention over C members in one process, the kernels on nt threads. drop: a (member, step)
 * whose FULL blocks are left out (-1: none), to show that the comparison sees a missing block. */
static inline void ring_attention(Ring *r, const float *qkv, const float *dout, int S, int C, int heads,
                                  int kv, int hd, int nt, int drop_member, int drop_step) {
    int width = (heads + 2 * kv) * hd, qd = heads * hd, kvw = 2 * kv * hd;
    int n = S / C, L = cp_chunk_len(S, C);
    float *work = malloc(attention_block_work_floats(L, L, heads, kv, hd, nt) * sizeof(float));
    int *pos = malloc((size_t)C * n * sizeof *pos);
    float *lq = malloc((size_t)C * n * width * 4), *ldo = malloc((size_t)C * n * qd * 4);
    float *lo = malloc((size_t)C * n * qd * 4), *ll = malloc((size_t)C * heads * n * 4);
    float *kvbuf = malloc((size_t)C * n * kvw * 4), *dkv = calloc((size_t)C * n * kvw, 4);
    float *dq = calloc((size_t)C * n * width, 4);
    float *bo = malloc((size_t)L * qd * 4), *bl = malloc((size_t)heads * L * 4);
    /* each member reads its tokens, and packs its K/V as it would send them round the ring */
    for (int i = 0; i < C; i++) {
        cp_layout_positions(pos + (size_t)i * n, S, C, i);
        for (int t = 0; t < n; t++) {
            int p = pos[(size_t)i * n + t];
            memcpy(lq + ((size_t)i * n + t) * width, qkv + (size_t)p * width, (size_t)width * 4);
            memcpy(ldo + ((size_t)i * n + t) * qd, dout + (size_t)p * qd, (size_t)qd * 4);
            memcpy(kvbuf + ((size_t)i * n + t) * kvw, qkv + (size_t)p * width + qd, (size_t)kvw * 4);
        }
        for (size_t e = 0; e < (size_t)n * qd; e++) lo[(size_t)i * n * qd + e] = 0.0f;
        for (size_t e = 0; e < (size_t)heads * n; e++) ll[(size_t)i * heads * n + e] = -INFINITY;
    }
    /* forward: at step t member i holds the K/V of member src; each of its query chunks against
     * each of src's chunks at or before it, merged into the running result */
    for (int pass = 0; pass < 2; pass++)
        for (int i = 0; i < C; i++)
            for (int t = 0; t < C; t++) {
                int src = cp_ring_source(C, i, t);
                for (int a = 0; a < 2; a++)
                    for (int b = 0; b < 2; b++) {
                        CpBlock blk = cp_layout_block(cp_layout_chunk(C, i, a), cp_layout_chunk(C, src, b));
                        if (blk == CP_SKIP || (blk == CP_FULL && i == drop_member && t == drop_step)) continue;
                        const float *q = lq + ((size_t)i * n + (size_t)a * L) * width;
                        const float *k = kvbuf + ((size_t)src * n + (size_t)b * L) * kvw;
                        float *o = lo + ((size_t)i * n + (size_t)a * L) * qd;
                        float *l = ll + (size_t)i * heads * n + (size_t)a * L;
                        if (pass == 0) {
                            attention_block_forward(bo, bl, L, q, width, k, kvw, L, L, heads, kv, hd,
                                                    blk == CP_DIAG, work, nt);
                            attention_block_merge(o, l, n, bo, bl, L, L, heads, hd, nt);
                        } else {   /* backward: dQ stays, dK and dV go back to their owner */
                            attention_block_backward(dq + ((size_t)i * n + (size_t)a * L) * width, width,
                                                     dkv + ((size_t)src * n + (size_t)b * L) * kvw, kvw,
                                                     ldo + ((size_t)i * n + (size_t)a * L) * qd, o, l, n,
                                                     q, width, k, kvw, L, L, heads, kv, hd,
                                                     blk == CP_DIAG, work, nt);
                        }
                    }
            }
    /* back to the whole sequence's layout */
    for (int i = 0; i < C; i++)
        for (int t = 0; t < n; t++) {
            int p = pos[(size_t)i * n + t];
            memcpy(r->out + (size_t)p * qd, lo + ((size_t)i * n + t) * qd, (size_t)qd * 4);
            for (int h = 0; h < heads; h++) r->lse[(size_t)h * S + p] = ll[(size_t)i * heads * n + (size_t)h * n + t];
            memcpy(r->dqkv + (size_t)p * width, dq + ((size_t)i * n + t) * width, (size_t)qd * 4);
            memcpy(r->dqkv + (size_t)p * width + qd, dkv + ((size_t)i * n + t) * kvw, (size_t)kvw * 4);
        }
    free(work); free(pos); free(lq); free(ldo); free(lo); free(ll); free(kvbuf); free(dkv); free(dq);
    free(bo); free(bl);
}

#endif
