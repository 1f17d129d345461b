/* The host-side arithmetic of the CUDA model, in plain C and apart from any CUDA header, so that
 * the unit tests check it with the C compiler where no GPU runs (tests/unit/test_cuda_layout.c):
 *  - the byte layout of a chunk's stash on the device (bf16 activations, fp32 statistics), which
 *    must add up to wp_stash_bytes(c, k, recompute, WP_BF16), what the planner counted, and of the
 *    split backward's B-to-W keep, which must add up to wp_keep_bytes(c, k, recompute, WP_BF16);
 *  - the parts of the model's one workspace allocation and where each begins;
 *  - the column-major description of each matrix product handed to cuBLASLt (transposes, the
 *    stored shapes and leading dimensions of A, B and C = D), from the row-major products of
 *    cpu/matmul.c.
 * model_cuda.cu and gemm_cublaslt.cu take these numbers from here and nowhere else. */
#ifndef WP_LAYOUT_CUDA_H
#define WP_LAYOUT_CUDA_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#include "common/config.h"

/* ---- the stash ---- */

/* One layer's part of the device stash, in bytes from the part's start: the bf16 activations
 * first, then the fp32 statistics, so that the statistics need only the activations' count to be
 * even to fall on 4-byte boundaries, and layer i's output (the next layer's x) begins the next
 * part. end: the part's size. */
typedef struct WcLayerStash {
    size_t x, qkv, att, x2, gu;      /* bf16 */
    size_t rstd1, lse, rstd2;        /* fp32 */
    size_t end;
} WcLayerStash;

/* gu_rows: the tokens gu holds, T in a chunk's stash, one MLP tile (wp_mlp_tile_tokens) in the
 * workspace's one-layer recompute stash (wc_layer_restash; its size is wp_layer_restash_bytes). */
static inline WcLayerStash wc_layer_stash_rows(const WpConfig *c, size_t gu_rows) {
    size_t T = (size_t)c->mbs * c->seq, H = (size_t)c->hidden, F = (size_t)c->ffn;
    size_t qd = (size_t)c->heads * c->head_dim, width = (size_t)(c->heads + 2 * c->kv_heads) * c->head_dim;
    WcLayerStash s;
    s.x = 0;
    s.qkv = s.x + 2 * T * H;
    s.att = s.qkv + 2 * T * width;
    s.x2 = s.att + 2 * T * qd;
    s.gu = s.x2 + 2 * T * H;
    s.rstd1 = s.gu + 2 * gu_rows * 2 * F;
    s.lse = s.rstd1 + 4 * T;
    s.rstd2 = s.lse + 4 * (size_t)c->mbs * c->heads * c->seq;
    s.end = s.rstd2 + 4 * T;
    return s;
}

static inline WcLayerStash wc_layer_stash(const WpConfig *c) {
    return wc_layer_stash_rows(c, (size_t)c->mbs * c->seq);
}

/* The workspace's one-layer recompute stash: a layer's part from qkv on, gu one MLP tile. x is
 * not in it (0 here, never used): the kept input, in the chunk's stash, is read in its place. */
static inline WcLayerStash wc_layer_restash(const WpConfig *c) {
    WcLayerStash s = wc_layer_stash_rows(c, (size_t)wp_mlp_tile_tokens(c));
    size_t o = s.qkv;
    s.qkv -= o; s.att -= o; s.x2 -= o; s.gu -= o; s.rstd1 -= o; s.lse -= o; s.rstd2 -= o; s.end -= o;
    s.x = 0;
    return s;
}

/* A chunk's stash in bytes (config.c's wp_chunk_stash_layout at these element sizes): layer i's
 * part at i * layer, then on the last chunk the last layer's output xf [T*H] bf16, the final
 * norm's rstd [T] fp32 and each token's log-sum-exp of the logits [T] fp32. Without recompute a
 * layer's part is wc_layer_stash; with recompute it is the layer's input x [T*H] bf16 alone (the
 * rest of one layer's part is recomputed into the workspace's recompute stash, a wc_layer_restash,
 * before the layer's backward). total: the whole, wp_stash_bytes(c, k, recompute, WP_BF16). */
typedef struct WcChunkStash {
    size_t layer, xf, rstdf, lse, total;
} WcChunkStash;

static inline WcChunkStash wc_chunk_stash(const WpConfig *c, const WpChunk *k, int recompute) {
    size_t T = (size_t)c->mbs * c->seq, H = (size_t)c->hidden;
    WcChunkStash s;
    s.layer = recompute ? 2 * T * H : wc_layer_stash(c).end;
    s.xf = (size_t)k->nlayers * s.layer;
    s.rstdf = s.xf + 2 * T * H;
    s.lse = s.rstdf + 4 * T;
    /* a chunk without layers still stashes its input x (layer 0's x, or xf on the last chunk) */
    s.total = k->last ? s.lse + 4 * T : k->nlayers > 0 ? s.xf : 2 * T * H;
    return s;
}

/* 0 when every fp32 statistic of every chunk's stash falls on a 4-byte boundary (given a stash
 * that begins on one), else 1. */
static inline int wc_stash_misaligned(const WpConfig *c) {
    size_t T = (size_t)c->mbs * c->seq, H = (size_t)c->hidden;
    return wc_layer_stash(c).rstd1 % 4 != 0 || (2 * T * H) % 4 != 0;
}

/* ---- the B-to-W keep (the split backward's) ---- */

/* A chunk's keep on the device, in bytes: the parts of config.h's WpKeepLayout (cpu/model.h says
 * what BWD_B writes into each), grouped by element size so that every fp32 part falls on a 4-byte
 * boundary whatever the shapes:
 *   restash  recompute: the full stash as BWD_B recomputed it (wc_chunk_stash(c, k, 0)), else empty
 *   norms    fp32 area, per layer (stride layer_norms): ln1, ln2 [H] (the norms' bf16 working
 *            weights, in fp32-sized slots: config.c counts them at 4 bytes), dln1, dln2 [H] fp32
 *            (their weight gradients for this micro-batch); then on the last chunk lnf [H] (bf16
 *            in an fp32-sized slot) and dlnf [H] fp32
 *   grads    bf16 area, per layer (stride layer_grads): dy [T*H], dh [T*F], dx2 [T*H]; then on the
 *            last chunk whead [V*H] (the LM head's working weight) and on the first dx [T*H]
 * total: the whole, wp_keep_bytes(c, k, recompute, WP_BF16). Offsets are from the keep's start. */
typedef struct WcChunkKeep {
    size_t restash;
    size_t norms, layer_norms, ln1, ln2, dln1, dln2;   /* ln1..dln2: within a layer's norms */
    size_t lnf, dlnf;
    size_t grads, layer_grads, dy, dh, dx2;            /* dy..dx2: within a layer's grads */
    size_t whead, dx, total;
} WcChunkKeep;

static inline WcChunkKeep wc_chunk_keep(const WpConfig *c, const WpChunk *k, int recompute) {
    size_t T = (size_t)c->mbs * c->seq, H = (size_t)c->hidden, F = (size_t)c->ffn, V = (size_t)c->vocab;
    size_t L = (size_t)k->nlayers;
    WcChunkKeep p;
    p.restash = 0;
    p.norms = recompute ? wc_chunk_stash(c, k, 0).total : 0;
    p.layer_norms = 16 * H;
    p.ln1 = 0; p.ln2 = 4 * H; p.dln1 = 8 * H; p.dln2 = 12 * H;
    p.lnf = p.norms + L * p.layer_norms;
    p.dlnf = p.lnf + (k->last ? 4 * H : 0);
    p.grads = p.dlnf + (k->last ? 4 * H : 0);
    p.layer_grads = 2 * T * (2 * H + F);
    p.dy = 0; p.dh = 2 * T * H; p.dx2 = 2 * T * (H + F);
    p.whead = p.grads + L * p.layer_grads;
    p.dx = p.whead + (k->last ? 2 * V * H : 0);
    p.total = p.dx + (k->first ? 2 * T * H : 0);
    return p;
}

/* ---- the workspace ---- */

/* Reductions' scratch, beside config.c's workspace parts: the norms' weight-gradient partial sums
 * (WC_NORM_SPLITS row ranges), the losses of one LM-head block, wc_sumsq's partial sums. */
enum { WC_NORM_SPLITS = 32, WC_SUMSQ_BLOCKS = 1024 };
enum { WC_WS_NORM = WP_WS_NPARTS, WC_WS_LOSSES, WC_WS_SUMSQ, WC_WS_NPARTS };
/* What each part begins on: what cuBLASLt's fastest algorithms and vector loads want, and
 * cudaMalloc's own alignment. */
#define WC_WS_ALIGN ((size_t)256)

/* Byte offsets of the parts of the one workspace allocation of a model serving chunks of at most
 * max_layers layers (with the LM head if has_head; whole: one chunk holds both ends): part i is [off[i], off[i] + room[i]), total the
 * allocation. Each config.c slot (wp_workspace_slot_bytes(..., WP_BF16): bf16 activations, fp32
 * RoPE tables and logits, the recompute stash as one layer's stash) rounded up to WC_WS_ALIGN,
 * and a part that shares its home's storage (wp_workspace_part_home) at its home's offset; the
 * reductions' parts after them. */
typedef struct WcWorkspace {
    size_t off[WC_WS_NPARTS], room[WC_WS_NPARTS], total;
} WcWorkspace;

static inline size_t wc_round_up(size_t n, size_t a) { return (n + a - 1) / a * a; }

static inline WcWorkspace wc_workspace(const WpConfig *c, int max_layers, int has_head, int whole, int recompute) {
    /* the largest chunk this model serves: every part at its largest (a chunk holding both ends,
     * whole, has the residual stream's gradient of its own: config.c's WP_WS_DRES) */
    WpChunk big = wp_chunk_make(c, 0, 0, max_layers, whole, has_head);
    WcWorkspace w;
    size_t p = 0;
    for (int i = 0; i < WC_WS_NPARTS; i++) {
        size_t bytes;
        if (i < WP_WS_NPARTS && wp_workspace_part_home((WpWorkspacePart)i) != (WpWorkspacePart)i) continue;
        if (i < WP_WS_NPARTS) bytes = wp_workspace_slot_bytes(c, &big, recompute, (WpWorkspacePart)i, WP_BF16);
        else if (i == WC_WS_NORM) bytes = (size_t)WC_NORM_SPLITS * c->hidden * sizeof(float);
        else if (i == WC_WS_LOSSES) bytes = has_head ? (size_t)wp_ce_block_tokens(c) * sizeof(double) : 0;
        else bytes = (size_t)WC_SUMSQ_BLOCKS * sizeof(double);
        w.off[i] = p;
        w.room[i] = wc_round_up(bytes, WC_WS_ALIGN);
        p += w.room[i];
    }
    for (int i = 0; i < WP_WS_NPARTS; i++) {
        int home = (int)wp_workspace_part_home((WpWorkspacePart)i);
        w.off[i] = w.off[home];
        w.room[i] = w.room[home];
    }
    w.total = p;
    return w;
}

/* ---- the matrix products ---- */

/* In the row-major terms of cpu/matmul.c, with a torch Linear's weight W [N, K]:
 *   WC_MM_FWD     y[T, N] = x[T, K] W^T             (+ C[T, N] with beta = 1)
 *   WC_MM_BWD_DX  dx[T, K] = dy[T, N] W
 *   WC_MM_BWD_DW  dW[N, K] += dy[T, N]^T x[T, K]    (fp32, beta = 1) */
typedef enum { WC_MM_FWD, WC_MM_BWD_DX, WC_MM_BWD_DW } WcMmKind;

/* A matrix as cuBLASLt's layout describes it: column-major, as stored (before any transpose). */
typedef struct WcMat {
    uint64_t rows, cols;
    int64_t ld;
} WcMat;

static inline WcMat wc_mat(uint64_t rows, uint64_t cols, int64_t ld) {
    WcMat x;
    x.rows = rows; x.cols = cols; x.ld = ld;
    return x;
}

/* One product as cuBLASLt computes it, D = alpha op(A) op(B) + beta C, column-major, m x n with
 * inner dimension k. A is always the run's weight-side operand (`w`: W, or x for BWD_DW) and B the
 * activation-side one (`act`: x or dy). D has C's layout. out_f32: C and D fp32, else bf16 (A and
 * B are bf16 always). beta: 1 adds C (FWD: a separate input; BWD_DW: dW itself). */
typedef struct WcGemmDesc {
    int trans_a, trans_b;
    WcMat a, b, c;
    uint64_t m, n, k;
    int out_f32;
    float beta;
} WcGemmDesc;

/* Row-major X [r, c] (leading dimension ld >= c) is column-major X^T [c, r] with leading
 * dimension ld, so each product is described as its transpose:
 *   FWD     y^T [N, T] = (W as [K, N])^T x^T [K, T]          m = N, n = T, k = K
 *   BWD_DX  dx^T [K, T] = (W as [K, N]) dy^T [N, T]          m = K, n = T, k = N
 *   BWD_DW  dW^T [K, N] += x^T [K, T] (dy^T as [N, T])^T     m = K, n = N, k = T
 * ld_act: the leading dimension (elements) of B as stored: x for FWD (K when dense), dy for BWD_DX
 * and BWD_DW (N when dense; the LM head's in-place dlogits have 2N). The other operands are dense.
 * beta_c: FWD adds C. Returns 0, or -1 for a kind or sizes it does not know. */
static inline int wc_gemm_desc(WcGemmDesc *d, WcMmKind kind, int T, int K, int N, int ld_act, int out_f32,
                               int beta_c) {
    if (T < 0 || K < 1 || N < 1) return -1;
    uint64_t t = (uint64_t)T, kk = (uint64_t)K, nn = (uint64_t)N;
    d->trans_a = d->trans_b = 0;
    d->out_f32 = out_f32;
    d->beta = 0.0f;
    switch (kind) {
    case WC_MM_FWD:
        if (ld_act < K) return -1;
        d->trans_a = 1;
        d->a = wc_mat(kk, nn, K);
        d->b = wc_mat(kk, t, ld_act);
        d->c = wc_mat(nn, t, N);
        d->m = nn; d->n = t; d->k = kk;
        d->beta = beta_c ? 1.0f : 0.0f;
        return 0;
    case WC_MM_BWD_DX:
        if (ld_act < N || beta_c) return -1;
        d->a = wc_mat(kk, nn, K);
        d->b = wc_mat(nn, t, ld_act);
        d->c = wc_mat(kk, t, K);
        d->m = kk; d->n = t; d->k = nn;
        return 0;
    case WC_MM_BWD_DW:
        if (ld_act < N || beta_c) return -1;
        d->trans_b = 1;
        d->a = wc_mat(kk, t, K);
        d->b = wc_mat(nn, t, ld_act);
        d->c = wc_mat(kk, nn, K);
        d->m = kk; d->n = nn; d->k = t;
        d->out_f32 = 1;   /* dW is the fp32 gradient, accumulated */
        d->beta = 1.0f;
        return 0;
    }
    return -1;
}

/* The products model_cuda.cu plans at start: a layer's twelve and the LM head's three (for one
 * block of tokens; T is the block's). The MLP's six (wc_mm_is_mlp) run on one MLP tile of tokens
 * (T is the tile's). K, N: W's [N, K] (the fused q|k|v and gate|up weights are one
 * W each); ld_act as wc_gemm_desc's. The head's dlogits are bf16 written over the fp32 logits in
 * place (crossentropy_cuda.cu), so their rows are 2V elements apart. */
enum {
    WC_MM_QKV_F, WC_MM_O_F, WC_MM_GU_F, WC_MM_DOWN_F,
    WC_MM_QKV_DX, WC_MM_QKV_DW, WC_MM_O_DX, WC_MM_O_DW, WC_MM_GU_DX, WC_MM_GU_DW, WC_MM_DOWN_DX, WC_MM_DOWN_DW,
    WC_MM_LAYER_N
};
enum { WC_HEAD_F, WC_HEAD_DX, WC_HEAD_DW, WC_HEAD_N };

static inline int wc_mm_is_mlp(int i) {
    return i == WC_MM_GU_F || i == WC_MM_DOWN_F || i == WC_MM_GU_DX || i == WC_MM_GU_DW || i == WC_MM_DOWN_DX ||
           i == WC_MM_DOWN_DW;
}

typedef struct WcProduct {
    WcMmKind kind;
    int K, N, ld_act, out_f32, beta_c;
} WcProduct;

static inline WcProduct wc_product(WcMmKind kind, int K, int N, int ld_act, int out_f32, int beta_c) {
    WcProduct p;
    p.kind = kind; p.K = K; p.N = N; p.ld_act = ld_act; p.out_f32 = out_f32; p.beta_c = beta_c;
    return p;
}

static inline void wc_layer_products(const WpConfig *c, WcProduct p[WC_MM_LAYER_N]) {
    int H = c->hidden, F = c->ffn, qd = c->heads * c->head_dim;
    int width = (c->heads + 2 * c->kv_heads) * c->head_dim;
    p[WC_MM_QKV_F] = wc_product(WC_MM_FWD, H, width, H, 0, 0);          /* qkv = xn Wqkv^T */
    p[WC_MM_O_F] = wc_product(WC_MM_FWD, qd, H, qd, 0, 1);              /* x2 = x + att Wo^T */
    p[WC_MM_GU_F] = wc_product(WC_MM_FWD, H, 2 * F, H, 0, 0);           /* gu = xn Wgu^T */
    p[WC_MM_DOWN_F] = wc_product(WC_MM_FWD, F, H, F, 0, 1);             /* y = x2 + h Wdown^T */
    p[WC_MM_QKV_DX] = wc_product(WC_MM_BWD_DX, H, width, width, 0, 0);  /* dxn = dqkv Wqkv */
    p[WC_MM_QKV_DW] = wc_product(WC_MM_BWD_DW, H, width, width, 1, 0);
    p[WC_MM_O_DX] = wc_product(WC_MM_BWD_DX, qd, H, H, 0, 0);           /* datt = dres Wo */
    p[WC_MM_O_DW] = wc_product(WC_MM_BWD_DW, qd, H, H, 1, 0);
    p[WC_MM_GU_DX] = wc_product(WC_MM_BWD_DX, H, 2 * F, 2 * F, 0, 0);   /* dxn = dgu Wgu */
    p[WC_MM_GU_DW] = wc_product(WC_MM_BWD_DW, H, 2 * F, 2 * F, 1, 0);
    p[WC_MM_DOWN_DX] = wc_product(WC_MM_BWD_DX, F, H, H, 0, 0);         /* dh = dres Wdown */
    p[WC_MM_DOWN_DW] = wc_product(WC_MM_BWD_DW, F, H, H, 1, 0);
}

static inline void wc_head_products(const WpConfig *c, WcProduct p[WC_HEAD_N]) {
    int H = c->hidden, V = c->vocab;
    p[WC_HEAD_F] = wc_product(WC_MM_FWD, H, V, H, 1, 0);                /* logits = xn W^T, fp32 */
    p[WC_HEAD_DX] = wc_product(WC_MM_BWD_DX, H, V, 2 * V, 0, 0);        /* dxn = dlogits W */
    p[WC_HEAD_DW] = wc_product(WC_MM_BWD_DW, H, V, 2 * V, 1, 0);        /* dW += dlogits^T xn */
}

#ifdef __cplusplus
}
#endif

#endif
