/* The CUDA model's host-side arithmetic (runtime/cuda/layout_cuda.h), checked where no GPU runs:
 *  - the device stash: every chunk's (first, middle, last, no layers, tied; with and without
 *    recompute) adds up to wp_stash_bytes(..., WP_BF16), the planner's count; each part is the CPU
 *    stash's part (config.c, wp_chunk_stash_layout with and without recompute) at its element
 *    size; every fp32 statistic on a 4-byte boundary, and
 *    shapes that would break that are refused;
 *  - the B-to-W keep of the split backward: every chunk's adds up to wp_keep_bytes(..., WP_BF16),
 *    each part is the CPU keep's part (config.c) at its element size, the fp32 parts on 4-byte
 *    boundaries, the parts in order and inside the keep;
 *  - the workspace: each part on a 256-byte boundary, none overlapping, each at least what
 *    config.c counts (the recompute stash at least the one layer's stash the GPU writes there);
 *  - the matrix products: each description handed to cuBLASLt, run through cuBLASLt's documented
 *    definition (D = alpha op(A) op(B) + beta C, column-major, with the layouts' leading
 *    dimensions) by a plain loop here, gives what cpu/matmul.c gives for the same row-major product
 *    (forward, with C added, both backward products, dy at leading dimension 2N with NaN in the
 *    gaps, fp32 dW accumulated); and every product the model plans has the shapes of the weight it
 *    multiplies and leading dimensions that are the rows of the activations it reads. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "check.h"
#include "common/config.h"
#include "cpu/kernels.h"
#include "cuda/layout_cuda.h"

static WpConfig cfg(int H, int heads, int kv, int hd, int F, int V, int S, int G, int tied) {
    WpConfig c;
    memset(&c, 0, sizeof c);
    c.hidden = H; c.layers = 4; c.heads = heads; c.kv_heads = kv; c.head_dim = hd; c.ffn = F; c.vocab = V;
    c.eps = 1e-5f; c.rope_theta = 10000.0f; c.tied = tied; c.seq = S; c.mbs = G;
    return c;
}

/* shapes: a small GQA model, an MHA one with odd sizes, the benchmark's, a long sequence, q wider than H */
static WpConfig configs[5];
static void make_configs(void) {
    configs[0] = cfg(128, 4, 2, 32, 352, 512, 100, 2, 0);
    configs[1] = cfg(72, 3, 3, 24, 200, 1001, 37, 3, 1);
    configs[1].mlp_tile = 10;   /* MLP tiles of 10 of 111 tokens: the recompute stash's gu is one */
    configs[2] = cfg(2048, 16, 16, 128, 5632, 32000, 4096, 1, 0);
    configs[3] = cfg(2048, 16, 4, 128, 5632, 32000, 16384, 4, 0);
    configs[4] = cfg(64, 2, 1, 48, 100, 300, 9, 2, 0);   /* heads x head_dim != hidden */
}

/* ---- the stash ---- */

static void test_stash(void) {
    for (int ci = 0; ci < 5; ci++) {
        const WpConfig *c = &configs[ci];
        WcLayerStash g = wc_layer_stash(c);
        WpLayerStashLayout l = wp_layer_stash_layout(c);
        /* each part: the CPU's part (elements) at its size, bf16 activations and fp32 statistics */
        CHECK(g.qkv - g.x == 2 * (l.rstd1 - l.x), "config %d: x", ci);
        CHECK(g.att - g.qkv == 2 * (l.att - l.qkv), "config %d: qkv", ci);
        CHECK(g.x2 - g.att == 2 * (l.lse - l.att), "config %d: att", ci);
        CHECK(g.gu - g.x2 == 2 * (l.rstd2 - l.x2), "config %d: x2", ci);
        CHECK(g.rstd1 - g.gu == 2 * (l.end - l.gu), "config %d: gu", ci);
        CHECK(g.lse - g.rstd1 == 4 * (l.qkv - l.rstd1), "config %d: rstd1", ci);
        CHECK(g.rstd2 - g.lse == 4 * (l.x2 - l.lse), "config %d: lse", ci);
        CHECK(g.end - g.rstd2 == 4 * (l.gu - l.rstd2), "config %d: rstd2", ci);
        CHECK(!wc_stash_misaligned(c), "config %d: these shapes keep the statistics aligned", ci);
        for (int nl = 0; nl <= 3; nl++)
            for (int first = 0; first <= 1; first++)
                for (int last = 0; last <= 1; last++)
                    for (int rec = 0; rec <= WP_RECOMPUTE_OFFLOAD; rec++) {   /* config.h's modes */
                        if (c->tied && last && !first) continue;   /* refused by the generator */
                        WpChunk k = wp_chunk_make(c, 0, 0, nl, first, last);
                        WcChunkStash s = wc_chunk_stash(c, &k, rec);
                        size_t want = wp_stash_bytes(c, &k, rec, WP_BF16);
                        CHECK(s.total == want, "config %d, %d layers, first %d last %d recompute %d: %zu bytes, "
                              "the planner counts %zu", ci, nl, first, last, rec, s.total, want);
                        WcChunkStash full = wc_chunk_stash(c, &k, 0);
                        /* where each part begins: the CPU's layout, activations at 2 bytes */
                        WpChunkStashLayout cl = wp_chunk_stash_layout(c, &k, rec);
                        CHECK(s.layer == (rec ? 2 * cl.layer : g.end) && s.xf == (size_t)nl * s.layer &&
                              s.rstdf - s.xf == 2 * (cl.rstdf - cl.xf) && s.lse - s.rstdf == 4 * (cl.lse - cl.rstdf),
                              "config %d, %d layers, first %d last %d recompute %d: the parts", ci, nl, first, last, rec);
                        if (last) CHECK(s.rstdf % 4 == 0 && s.lse % 4 == 0, "config %d: the head's statistics (recompute %d)", ci, rec);
                        /* every statistic of every layer, and the head's, on a 4-byte boundary */
                        for (int i = 0; i < nl; i++) {
                            size_t b = (size_t)i * full.layer;
                            CHECK((b + g.rstd1) % 4 == 0 && (b + g.lse) % 4 == 0 && (b + g.rstd2) % 4 == 0,
                                  "config %d: layer %d's statistics misaligned", ci, i);
                        }
                        if (last)
                            CHECK(full.rstdf % 4 == 0 && full.lse % 4 == 0 && full.lse + 4 * (size_t)c->mbs * c->seq
                                  == wp_stash_bytes(c, &k, 0, WP_BF16), "config %d: the head's statistics", ci);
                        /* the last layer writes its output where the head reads xf */
                        if (nl > 0 && last) CHECK(full.xf == (size_t)nl * g.end, "config %d: xf", ci);
                    }
    }
    /* A layer's bf16 part is T (2H + 2F + 2 (heads + kv) hd) elements: always even. The head's
     * statistics follow xf [T*H]: an odd T*H is refused rather than misaligned. */
    WpConfig odd = cfg(5, 1, 1, 5, 7, 11, 3, 1, 0);   /* T*H = 15 */
    CHECK(wc_stash_misaligned(&odd), "T x H = 3 x 5: refused");
    WpConfig even = cfg(5, 1, 1, 5, 7, 11, 3, 2, 0);  /* T*H = 30 */
    CHECK(!wc_stash_misaligned(&even), "T x H = 6 x 5: accepted");
}

/* ---- the B-to-W keep ---- */

static void test_keep(void) {
    for (int ci = 0; ci < 5; ci++) {
        const WpConfig *c = &configs[ci];
        size_t T = (size_t)c->mbs * c->seq, H = (size_t)c->hidden, V = (size_t)c->vocab;
        WpLayerKeepLayout l = wp_layer_keep_layout(c);
        for (int nl = 0; nl <= 3; nl++)
            for (int first = 0; first <= 1; first++)
                for (int last = 0; last <= 1; last++)
                    for (int rec = 0; rec <= WP_RECOMPUTE_OFFLOAD; rec++) {   /* config.h's modes */
                        if (c->tied && last && !first) continue;
                        WpChunk k = wp_chunk_make(c, 0, 0, nl, first, last);
                        WcChunkKeep g = wc_chunk_keep(c, &k, rec);
                        WpKeepLayout cl = wp_keep_layout(c, &k, rec);
                        size_t want = wp_keep_bytes(c, &k, rec, WP_BF16);
                        const char *fmt = "config %d, %d layers, first %d last %d recompute %d: %s";
                        CHECK(g.total == want, "config %d, %d layers, first %d last %d recompute %d: %zu bytes, the "
                              "planner counts %zu", ci, nl, first, last, rec, g.total, want);
                        /* the parts: the CPU's elements, the norms' at 4 bytes, the rest at 2 */
                        CHECK(g.norms - g.restash == (rec ? wp_stash_bytes(c, &k, 0, WP_BF16) : 0), fmt, ci, nl, first, last, rec, "restash");
                        CHECK(g.layer_norms == 4 * (l.end - l.ln1) && l.end - l.ln1 == 4 * H && l.dln2 - l.ln1 == 3 * H,
                              fmt, ci, nl, first, last, rec, "a layer's norms and their sums");
                        CHECK(g.layer_grads == 2 * (l.ln1 - l.dy) && g.dh - g.dy == 2 * (l.dh - l.dy) &&
                              g.dx2 - g.dh == 2 * (l.dx2 - l.dh) && g.layer_grads - g.dx2 == 2 * (l.ln1 - l.dx2),
                              fmt, ci, nl, first, last, rec, "a layer's gradients dy, dh, dx2");
                        CHECK(g.dlnf - g.lnf == (last ? 4 * (cl.dlnf - cl.lnf) : 0) && g.grads - g.dlnf == (last ? 4 * (cl.whead - cl.dlnf) : 0),
                              fmt, ci, nl, first, last, rec, "lnf, dlnf");
                        CHECK(g.dx - g.whead == (last ? 2 * V * H : 0) && 2 * (cl.dx - cl.whead) == g.dx - g.whead,
                              fmt, ci, nl, first, last, rec, "whead");
                        CHECK(g.total - g.dx == (first ? 2 * T * H : 0) && 2 * (cl.end - cl.dx) == g.total - g.dx,
                              fmt, ci, nl, first, last, rec, "dx");
                        /* fp32 parts aligned (the keep begins on a 256-byte boundary), all in order */
                        int aligned = g.norms % 4 == 0 && g.lnf % 4 == 0 && g.dlnf % 4 == 0 && g.layer_norms % 4 == 0 &&
                                      g.dln1 % 4 == 0 && g.dln2 % 4 == 0;
                        CHECK(aligned, fmt, ci, nl, first, last, rec, "fp32 parts on 4-byte boundaries");
                        CHECK(g.restash <= g.norms && g.norms + (size_t)nl * g.layer_norms == g.lnf && g.lnf <= g.dlnf &&
                              g.dlnf <= g.grads && g.grads + (size_t)nl * g.layer_grads == g.whead && g.whead <= g.dx &&
                              g.dx <= g.total, fmt, ci, nl, first, last, rec, "parts in order, none overlapping");
                    }
    }
}

/* ---- the workspace ---- */

/* The slot a workspace part lives in: its home's (config.c's ws_home), the reductions' their own. */
static int slot_of(int i) {
    return i < WP_WS_NPARTS ? (int)wp_workspace_part_home((WpWorkspacePart)i) : i;
}

static void test_workspace(void) {
    for (int ci = 0; ci < 5; ci++) {
        const WpConfig *c = &configs[ci];
        for (int nl = 0; nl <= 2; nl++)
            for (int head = 0; head <= 1; head++)
                for (int rec = 0; rec <= WP_RECOMPUTE_OFFLOAD; rec++)   /* config.h's modes */
                for (int whole = 0; whole <= 1; whole++) {
                    WcWorkspace w = wc_workspace(c, nl, head, whole, rec);
                    WpChunk big = wp_chunk_make(c, 0, 0, nl, whole, head);
                    for (int i = 0; i < WC_WS_NPARTS; i++) {
                        size_t have = w.room[i], need;
                        if (i < WP_WS_NPARTS) need = wp_workspace_slot_bytes(c, &big, rec, (WpWorkspacePart)i, WP_BF16);
                        else if (i == WC_WS_NORM) need = (size_t)WC_NORM_SPLITS * c->hidden * sizeof(float);
                        else if (i == WC_WS_LOSSES) need = head ? (size_t)wp_ce_block_tokens(c) * sizeof(double) : 0;
                        else need = (size_t)WC_SUMSQ_BLOCKS * sizeof(double);
                        CHECK(w.off[i] % WC_WS_ALIGN == 0, "config %d: part %d at %zu", ci, i, w.off[i]);
                        int shares = i < WP_WS_NPARTS && wp_workspace_part_home((WpWorkspacePart)i) != (WpWorkspacePart)i;
                        CHECK(w.off[i] + have <= w.total && have >= need && (shares || have < need + WC_WS_ALIGN),
                              "config %d (%d layers, head %d, recompute %d): part %d has %zu bytes for %zu",
                              ci, nl, head, rec, i, have, need);
                        if (i < WP_WS_NPARTS)   /* a sharer's own need fits its home's slot */
                            CHECK(have >= wp_workspace_part_bytes(c, &big, rec, (WpWorkspacePart)i, WP_BF16),
                                  "config %d: part %d has %zu bytes for its own %zu", ci, i, have,
                                  wp_workspace_part_bytes(c, &big, rec, (WpWorkspacePart)i, WP_BF16));
                        /* parts of different slots never overlap; a slot's parts begin together */
                        for (int j = 0; j < i; j++) {
                            if (slot_of(i) == slot_of(j)) CHECK(w.off[i] == w.off[j], "config %d: parts %d and %d share a slot", ci, i, j);
                            else if (w.room[i] && w.room[j])
                                CHECK(w.off[i] + w.room[i] <= w.off[j] || w.off[j] + w.room[j] <= w.off[i],
                                      "config %d: parts %d and %d overlap", ci, i, j);
                        }
                    }
                    /* what the GPU writes there: the full stash of the largest chunk, fp32 logits of
                     * a block, both RoPE tables, the activations the kernels write */
                    size_t T = (size_t)c->mbs * c->seq;
                    if (rec && nl) {
                        size_t one = wc_layer_restash(c).end;
                        CHECK(w.room[WP_WS_RESTASH] >= one &&
                              w.room[WP_WS_RESTASH] < one + WC_WS_ALIGN,
                              "config %d: the recompute stash holds one layer's stash (%zu bytes), %zu", ci, one,
                              w.room[WP_WS_RESTASH]);
                    }
                    if (head)
                        CHECK(w.room[WP_WS_LOGITS] >=
                              (size_t)wp_ce_block_tokens(c) * c->vocab * sizeof(float), "config %d: logits", ci);
                    if (nl) {
                        CHECK(w.room[WP_WS_ROPE] >= 2 * (size_t)c->seq * (c->head_dim / 2) * 4,
                              "config %d: rope tables", ci);
                        /* the MLP's temporaries hold one tile of tokens (config 3: 4096 of 65536) */
                        size_t tile = (size_t)wp_mlp_tile_tokens(c);
                        CHECK(w.room[WP_WS_DGU] >= 2 * tile * 2 * c->ffn &&
                              w.room[WP_WS_H] >= 2 * tile * c->ffn &&
                              w.room[WP_WS_DH] >= 2 * tile * c->ffn, "config %d: h, dh, dgu", ci);
                        CHECK(w.room[WP_WS_DQKV] >=
                              2 * T * (c->heads + 2 * c->kv_heads) * c->head_dim, "config %d: dqkv", ci);
                    }
                    if (nl || head)
                        CHECK(w.room[WP_WS_DXN] >= 2 * T * c->hidden &&
                              w.room[WP_WS_XN] >= 2 * T * c->hidden, "config %d: xn, dxn", ci);
                    /* the residual stream's gradient is carried in the chunk's gradients
                     * (model_cuda.cu, dres_begin): its own room only for a whole-model chunk */
                    CHECK(whole && head ? w.room[WP_WS_DRES] >= 2 * T * c->hidden : w.room[WP_WS_DRES] == 0,
                          "config %d (whole %d): dres %zu", ci, whole, w.room[WP_WS_DRES]);
                }
    }
}

/* ---- the matrix products ---- */

static uint64_t rng = 42;
static float urand(void) {
    rng = rng * 6364136223846793005ull + 1442695040888963407ull;
    return (float)((double)(rng >> 11) / 4503599627370496.0 - 1.0);
}
static float *rand_array(size_t n) {
    float *a = malloc((n ? n : 1) * sizeof *a);
    for (size_t i = 0; i < n; i++) a[i] = urand();
    return a;
}

/* The stored matrix x of a layout fits in a buffer of n elements; rows <= ld. */
static int fits(const WcMat *x, size_t n) {
    return x->ld >= 1 && (uint64_t)x->ld >= x->rows && x->cols >= 1 && (x->cols - 1) * (uint64_t)x->ld + x->rows <= n;
}

/* cuBLASLt's definition of a matmul (column-major, op(X) = X or X^T by the TRANS attributes):
 * D[i + j ldc] = sum_p op(A)[i, p] op(B)[p, j] + beta C[i + j ldc], for i < m, j < n, p < k. The
 * shapes must agree: op(A) m x k, op(B) k x n, C m x n. Returns 0, or -1 where they do not or an
 * operand does not fit its buffer. */
static int lt_matmul(const WcGemmDesc *d, const float *A, size_t na, const float *B, size_t nb, const float *C,
                     float *D, size_t nc) {
    uint64_t am = d->trans_a ? d->a.cols : d->a.rows, ak = d->trans_a ? d->a.rows : d->a.cols;
    uint64_t bk = d->trans_b ? d->b.cols : d->b.rows, bn = d->trans_b ? d->b.rows : d->b.cols;
    if (am != d->m || ak != d->k || bk != d->k || bn != d->n || d->c.rows != d->m || d->c.cols != d->n) return -1;
    if (!fits(&d->a, na) || !fits(&d->b, nb) || !fits(&d->c, nc)) return -1;
    for (uint64_t j = 0; j < d->n; j++)
        for (uint64_t i = 0; i < d->m; i++) {
            double s = 0;
            for (uint64_t p = 0; p < d->k; p++) {
                float a = d->trans_a ? A[p + i * d->a.ld] : A[i + p * d->a.ld];
                float b = d->trans_b ? B[j + p * d->b.ld] : B[p + j * d->b.ld];
                s += (double)a * b;
            }
            size_t o = i + j * d->c.ld;
            D[o] = (float)(s + (d->beta != 0.0f ? d->beta * (double)C[o] : 0.0));
        }
    return 0;
}

static double max_rel(const float *a, const float *b, size_t n) {
    double scale = 0, worst = 0;
    for (size_t i = 0; i < n; i++) scale = fmax(scale, fabs(b[i]));
    for (size_t i = 0; i < n; i++) {
        double d = isnan(a[i]) || isnan(b[i]) ? INFINITY : fabs(a[i] - b[i]) / (scale > 0 ? scale : 1);
        worst = fmax(worst, d);
    }
    return worst;
}

/* Each kind at one shape, with the run's operands as wc_gemm_run hands them to cuBLASLt (A: the
 * weight side, B: the activation side, C and D: the result), against cpu/matmul.c in fp32. */
static void test_gemm_shape(int T, int K, int N) {
    float *x = rand_array((size_t)T * K), *w = rand_array((size_t)N * K), *c = rand_array((size_t)T * N);
    float *dy = rand_array((size_t)T * N), *dW0 = rand_array((size_t)N * K);
    float *dy2 = malloc((size_t)T * 2 * N * sizeof *dy2);   /* dy at leading dimension 2N, NaN between */
    for (size_t i = 0; i < (size_t)T * 2 * N; i++) dy2[i] = NAN;
    for (int t = 0; t < T; t++) memcpy(dy2 + (size_t)t * 2 * N, dy + (size_t)t * N, (size_t)N * sizeof *dy);
    size_t most = (size_t)T * (K > N ? K : N) + (size_t)N * K;
    float *ref = malloc(most * sizeof *ref), *got = malloc(most * sizeof *got);
    WcGemmDesc d;
    const double tol = 1e-5;   /* fp32 sums of K or T terms against double ones */

    /* y = x W^T, and y = c + x W^T */
    for (int beta = 0; beta <= 1; beta++) {
        if (beta) memcpy(ref, c, (size_t)T * N * sizeof *ref);
        matmul_forward(ref, x, w, T, K, N, beta, 0);
        CHECK(wc_gemm_desc(&d, WC_MM_FWD, T, K, N, K, 0, beta) == 0, "FWD desc");
        CHECK(lt_matmul(&d, w, (size_t)N * K, x, (size_t)T * K, c, got, (size_t)T * N) == 0,
              "FWD T%d K%d N%d: shapes disagree or an operand overruns", T, K, N);
        CHECK(max_rel(got, ref, (size_t)T * N) < tol, "FWD%s T%d K%d N%d: %.3g", beta ? " + C" : "", T, K, N,
              max_rel(got, ref, (size_t)T * N));
    }
    /* dx = dy W (dy dense and at 2N) and dW += dy^T x */
    float *dW = malloc((size_t)N * K * sizeof *dW);
    memcpy(dW, dW0, (size_t)N * K * sizeof *dW);
    matmul_backward(ref, dW, dy, x, w, T, K, N, 0, 0);
    for (int wide = 0; wide <= 1; wide++) {
        int ld = wide ? 2 * N : N;
        const float *b = wide ? dy2 : dy;
        size_t nb = wide ? (size_t)T * 2 * N : (size_t)T * N;
        CHECK(wc_gemm_desc(&d, WC_MM_BWD_DX, T, K, N, ld, 0, 0) == 0, "BWD_DX desc");
        CHECK(lt_matmul(&d, w, (size_t)N * K, b, nb, NULL, got, (size_t)T * K) == 0,
              "BWD_DX T%d K%d N%d ld %d: shapes disagree or an operand overruns", T, K, N, ld);
        CHECK(max_rel(got, ref, (size_t)T * K) < tol, "BWD_DX T%d K%d N%d ld %d: %.3g", T, K, N, ld,
              max_rel(got, ref, (size_t)T * K));
        CHECK(wc_gemm_desc(&d, WC_MM_BWD_DW, T, K, N, ld, 0, 0) == 0, "BWD_DW desc");
        CHECK(d.out_f32 && d.beta == 1.0f, "BWD_DW accumulates into fp32");
        memcpy(got, dW0, (size_t)N * K * sizeof *got);
        CHECK(lt_matmul(&d, x, (size_t)T * K, b, nb, got, got, (size_t)N * K) == 0,
              "BWD_DW T%d K%d N%d ld %d: shapes disagree or an operand overruns", T, K, N, ld);
        CHECK(max_rel(got, dW, (size_t)N * K) < tol, "BWD_DW T%d K%d N%d ld %d: %.3g", T, K, N, ld,
              max_rel(got, dW, (size_t)N * K));
    }
    /* leading dimensions shorter than a row, and C where it has no meaning, are refused */
    CHECK(wc_gemm_desc(&d, WC_MM_FWD, T, K, N, K - 1, 0, 0) == -1, "FWD ld < K");
    CHECK(wc_gemm_desc(&d, WC_MM_BWD_DX, T, K, N, N - 1, 0, 0) == -1, "BWD_DX ld < N");
    CHECK(wc_gemm_desc(&d, WC_MM_BWD_DW, T, K, N, N, 0, 1) == -1, "BWD_DW with C");
    free(x); free(w); free(c); free(dy); free(dy2); free(dW0); free(dW); free(ref); free(got);
}

/* The products the model plans: W [N, K] is the weight it multiplies (from wp_chunk_tensors), the
 * forward and backward of one weight agree, the activation it reads has rows of ld_act. */
static void test_products(void) {
    for (int ci = 0; ci < 5; ci++) {
        const WpConfig *c = &configs[ci];
        WcProduct p[WC_MM_LAYER_N], h[WC_HEAD_N];
        wc_layer_products(c, p);
        wc_head_products(c, h);
        WpChunk k = wp_chunk_make(c, 0, 0, 1, 0, 1);
        WpTensor t[16];
        int n = wp_chunk_tensors(c, &k, t);
        CHECK(n == 11 || (c->tied && n == 10), "config %d: %d tensors", ci, n);
        /* t: ln1, q, k, v, o, ln2, gate, up, down, norm, lm_head */
        size_t wqkv_rows = t[1].rows + t[2].rows + t[3].rows, wgu_rows = t[6].rows + t[7].rows;
        struct { int f, dx, dw; size_t rows, cols; const char *name; } w[4] = {
            { WC_MM_QKV_F, WC_MM_QKV_DX, WC_MM_QKV_DW, wqkv_rows, t[1].cols, "qkv" },
            { WC_MM_O_F, WC_MM_O_DX, WC_MM_O_DW, t[4].rows, t[4].cols, "o" },
            { WC_MM_GU_F, WC_MM_GU_DX, WC_MM_GU_DW, wgu_rows, t[6].cols, "gate|up" },
            { WC_MM_DOWN_F, WC_MM_DOWN_DX, WC_MM_DOWN_DW, t[8].rows, t[8].cols, "down" },
        };
        for (int i = 0; i < 4; i++) {
            const WcProduct *f = &p[w[i].f], *dx = &p[w[i].dx], *dw = &p[w[i].dw];
            CHECK(f->kind == WC_MM_FWD && dx->kind == WC_MM_BWD_DX && dw->kind == WC_MM_BWD_DW, "%s: kinds", w[i].name);
            CHECK((size_t)f->N == w[i].rows && (size_t)f->K == w[i].cols, "config %d: %s forward is [%d, %d], W is "
                  "[%zu, %zu]", ci, w[i].name, f->N, f->K, w[i].rows, w[i].cols);
            CHECK(dx->K == f->K && dx->N == f->N && dw->K == f->K && dw->N == f->N, "config %d: %s backward shapes",
                  ci, w[i].name);
            CHECK(f->ld_act == f->K && dx->ld_act == f->N && dw->ld_act == f->N, "config %d: %s dense rows", ci,
                  w[i].name);
            CHECK(!f->out_f32 && !dx->out_f32 && dw->out_f32, "config %d: %s bf16 activations, fp32 dW", ci, w[i].name);
            WcGemmDesc d;
            CHECK(wc_gemm_desc(&d, f->kind, 64, f->K, f->N, f->ld_act, f->out_f32, f->beta_c) == 0 &&
                  wc_gemm_desc(&d, dx->kind, 64, dx->K, dx->N, dx->ld_act, dx->out_f32, dx->beta_c) == 0 &&
                  wc_gemm_desc(&d, dw->kind, 64, dw->K, dw->N, dw->ld_act, dw->out_f32, dw->beta_c) == 0,
                  "config %d: %s descriptions", ci, w[i].name);
        }
        /* the residual adds: o and down add their input as C */
        CHECK(p[WC_MM_O_F].beta_c && p[WC_MM_DOWN_F].beta_c && !p[WC_MM_QKV_F].beta_c && !p[WC_MM_GU_F].beta_c,
              "config %d: residual adds", ci);
        /* the head: W [V, H]; logits fp32; the dlogits bf16 over the fp32 logits, rows 2V apart */
        CHECK(h[WC_HEAD_F].N == c->vocab && h[WC_HEAD_F].K == c->hidden && h[WC_HEAD_F].out_f32 &&
              h[WC_HEAD_F].ld_act == c->hidden, "config %d: head forward", ci);
        CHECK(h[WC_HEAD_DX].kind == WC_MM_BWD_DX && h[WC_HEAD_DX].ld_act == 2 * c->vocab && !h[WC_HEAD_DX].out_f32,
              "config %d: head dx", ci);
        CHECK(h[WC_HEAD_DW].kind == WC_MM_BWD_DW && h[WC_HEAD_DW].ld_act == 2 * c->vocab && h[WC_HEAD_DW].out_f32,
              "config %d: head dW", ci);
        if (!c->tied) CHECK(t[10].rows == (size_t)c->vocab && t[10].cols == (size_t)c->hidden, "lm_head [V, H]");
    }
}

int main(void) {
    matmul_init();
    make_configs();
    test_stash();
    test_keep();
    test_workspace();
    test_gemm_shape(7, 5, 3);
    test_gemm_shape(37, 40, 24);
    test_gemm_shape(64, 16, 100);
    test_products();
    return check_summary("test_cuda_layout");
}
