/* The LLaMA chunk on a CUDA device in bf16 (model_cuda.h): drives one chunk's forward and backward
 * as cpu/model.c does, with the GPU kernels of kernels_cuda.cuh and the cuBLASLt products of
 * gemm_cublaslt.cuh, rounding to bf16 exactly at the points of cpu/model.c's table (each kernel
 * stores its result in bf16, each bf16-out product rounds once, after the residual is added as C).
 *
 * Memory, reserved once by wc_model_new and never inside a step:
 *  - the workspace (layout_cuda.h's wc_workspace): the parts of common/config.c's WpWorkspacePart
 *    at their bf16 sizes (wp_workspace_slot_bytes(..., WP_BF16): parts whose lives never overlap
 *    share one slot, config.c's ws_home), each rounded up to 256 bytes for
 *    alignment; the recompute stash (one layer's stash) among them when recompute is set; then
 *  - a reduction area: the row-range partial sums of the norms' weight gradients, the per-token
 *    losses of one LM-head block and the partial sums of wc_sumsq (WC_NORM_SPLITS * H floats,
 *    wp_ce_block_tokens doubles, WC_SUMSQ_BLOCKS doubles: 0.3 MiB at hidden 2048);
 *  - cuBLASLt's work area (WC_LT_WORK_BYTES) and every product's plan.
 *
 * Stash layout on the device, in bytes (layout_cuda.h's wc_chunk_stash; the total is
 * wp_stash_bytes(c, k, recompute, WP_BF16), which tests/unit/test_cuda_layout.c checks):
 * per layer the bf16 activations first, then the fp32 statistics,
 *   x [T*H] | qkv [T*width] | att [T*qd] | x2 [T*H] | gu [T*2F] | rstd1 [T] | lse [G*heads*S] | rstd2 [T]
 * so that layer i's output, the next layer's x, begins the next part; then on the last chunk
 *   xf [T*H] bf16 | rstdf [T] fp32 | lse of the logits [T] fp32.
 * With recompute (by layer, as cpu/model.c) only each layer's x is stashed, at a stride of T*H bf16,
 * then the head's part as above; the forward writes the rest of each layer's part into the
 * workspace's one-layer recompute stash, and backward re-runs one layer's forward (without the
 * down product) into it just before that layer's backward, rounding as the first time: the same
 * bits. The split backward's B half rebuilds the whole stash into the keep, which W reads.
 *
 * The MLP runs one tile of wp_mlp_tile_tokens tokens at a time, as cpu/model.c's (its products
 * planned at the tile's rows and the last, shorter tile's: mlp_mm); the one-layer recompute stash
 * holds one tile of gu and not x, which the kept input serves (wc_layer_restash); backward
 * recomputes gu tile by tile. */
#include <math.h>
#include <string.h>
#include "cuda/common_cuda.cuh"
#include "cuda/gemm_cublaslt.cuh"
#include "cuda/kernels_cuda.cuh"
#include "cuda/layout_cuda.h"
#include "cuda/model_cuda.h"
#include "common/rope_table.h"

/* cuBLASLt's work area: 32 MiB, what NVIDIA recommends for Hopper (Ampere needs less). */
#define WC_LT_WORK_BYTES ((size_t)32 << 20)

struct WcModel {
    WpConfig cfg;
    int max_layers, has_head, recompute;
    int ce_block;                 /* tokens per LM-head block */
    cudaStream_t stream;
    WcLt lt;
    WcGemm layer_mm[WC_MM_LAYER_N];   /* layout_cuda.h's wc_layer_products, but the MLP's */
    WcGemm mlp_mm[2][WC_MM_LAYER_N];  /* the MLP's: [0] a tile of mlp_tile tokens, [1] the last, shorter one */
    int mlp_tile;                 /* tokens per MLP tile (wp_mlp_tile_tokens) */
    WcGemm head_mm[2][WC_HEAD_N];    /* [0] a block of ce_block tokens, [1] the last, shorter one */
    char attention[640];          /* which attention runs, for the start-up line (wc_attention_plan) */
    char *block;                  /* the one allocation below point into */
    size_t block_bytes;
    uint16_t *xn, *h, *dh, *dgu, *dxn, *dres, *datt, *dqkv;   /* workspace, bf16 */
    float *cos_t, *sin_t;         /* [S, hd/2] RoPE tables */
    float *logits;                /* [ce_block, V] fp32; the bf16 dlogits in place in backward */
    char *restash;                /* recompute: one layer's stash */
    char *stage;                  /* offload: [T, H] bf16 twice, then the head's xf | rstdf | lse (WP_WS_OFFLOAD) */
    cudaStream_t copy_stream;     /* offload: the copies between the staging and the host stash */
    cudaEvent_t ready, copied[2], head_copied;   /* offload: ordering between the two streams */
    float *norm_partials;         /* [WC_NORM_SPLITS * H] */
    double *losses;               /* [ce_block] */
    double *sumsq_partials;       /* [WC_SUMSQ_BLOCKS] */
    /* a bf16 weight gradient (wc_model_set_grad_bf16): g16, summed one segment (gseg; n 0: none
     * open) at a time in the fp32 gstage, as cpu/model.c's */
    uint16_t *g16;
    float *gstage;
    WpGradSegment gseg;
};

/* Pointers into one layer's parameters (bf16 working weights, or their fp32 gradients). */
template <typename E>
struct LayerParams { E *ln1, *wqkv, *wo, *ln2, *wgu, *wdown; };

template <typename E>
static LayerParams<E> layer_params(const WpConfig *c, E *p) {
    WpLayerOffsets o = wp_layer_offsets(c);
    return LayerParams<E>{ p + o.ln1, p + o.wqkv, p + o.wo, p + o.ln2, p + o.wgu, p + o.wdown };
}

static size_t first_layer_off(const WpConfig *c, const WpChunk *k) {
    return k->first ? (size_t)c->vocab * c->hidden : 0;
}
static size_t head_weight_off(const WpConfig *c, const WpChunk *k) {
    return !wp_chunk_has_head(c, k) ? 0 : k->nparams - (size_t)c->vocab * c->hidden;   /* tied, one chunk: the embedding */
}
static size_t final_norm_off(const WpConfig *c, const WpChunk *k) {
    return k->nparams - (size_t)c->hidden - (wp_chunk_has_head(c, k) ? (size_t)c->vocab * c->hidden : 0);
}
template <typename E> static E *first_layer(const WpConfig *c, const WpChunk *k, E *p) { return p + first_layer_off(c, k); }
template <typename E> static E *head_weight(const WpConfig *c, const WpChunk *k, E *p) { return p + head_weight_off(c, k); }
template <typename E> static E *final_norm(const WpConfig *c, const WpChunk *k, E *p) { return p + final_norm_off(c, k); }

/* ---- a bf16 gradient (cpu/model.c's "a bf16 gradient": the same segments, the same bits) ---- */

/* The open segment rounded into the bf16 gradient, on the model's stream. */
static void grad_store(WcModel *m) {
    if (m->g16 && m->gseg.n) wc_convert_f32_to_bf16(m->g16 + m->gseg.off, m->gstage, m->gseg.n, m->stream);
    m->gseg.n = 0;
}

/* The fp32 gradient of the chunk's parameters from offset off on (off begins a tensor): dparams's,
 * or the stage of the segment holding off, opened (the open one stored) when off is outside it. */
static float *grad_at(WcModel *m, const WpChunk *k, float *dparams, size_t off) {
    if (!m->g16) return dparams + off;
    if (!m->gseg.n || off < m->gseg.off || off >= m->gseg.off + m->gseg.n) {
        grad_store(m);
        for (int i = 0; i < wp_grad_nsegments(&m->cfg, k); i++) {
            WpGradSegment g = wp_grad_segment(&m->cfg, k, i);
            if (off >= g.off && off < g.off + g.n) { m->gseg = g; break; }
        }
        wc_convert_bf16_to_f32(m->gstage, m->g16 + m->gseg.off, m->gseg.n, m->stream);
    }
    return m->gstage + (off - m->gseg.off);
}

void wc_model_set_grad_bf16(WcModel *m, uint16_t *g, float *stage) {
    m->g16 = g;
    m->gstage = stage;
    m->gseg.n = 0;
}

/* Pointers into one layer's part of the stash (layout_cuda.h's wc_layer_stash). */
struct LayerStash {
    uint16_t *x, *qkv, *att, *x2, *gu;
    float *rstd1, *lse, *rstd2;
    int gu_tile;   /* gu holds one MLP tile (the recompute stash), not T tokens */
};

static LayerStash layer_stash_at(const WcLayerStash &l, char *b, int gu_tile) {
    LayerStash s;
    s.x = (uint16_t *)(b + l.x);
    s.qkv = (uint16_t *)(b + l.qkv);
    s.att = (uint16_t *)(b + l.att);
    s.x2 = (uint16_t *)(b + l.x2);
    s.gu = (uint16_t *)(b + l.gu);
    s.rstd1 = (float *)(b + l.rstd1);
    s.lse = (float *)(b + l.lse);
    s.rstd2 = (float *)(b + l.rstd2);
    s.gu_tile = gu_tile;
    return s;
}

static LayerStash layer_stash(const WpConfig *c, char *b) {
    return layer_stash_at(wc_layer_stash(c), b, 0);
}

/* Where tile t0's gate and up are: the tile's rows of a whole gu, or the one tile's place. */
static uint16_t *gu_rows(const LayerStash &st, int t0, int F) {
    return st.gu + (st.gu_tile ? 0 : (size_t)t0 * 2 * F);
}

/* The MLP's product i planned for a tile of n tokens. */
static const WcGemm *mlp_gemm(const WcModel *m, int n, int i) {
    return &m->mlp_mm[n == m->mlp_tile ? 0 : 1][i];
}

/* Layer i's part of a chunk's stash st laid out as cs: with recompute, x is the kept input and
 * the rest is the workspace's one-layer recompute stash. */
static LayerStash chunk_layer_stash(const WcModel *m, const WcChunkStash &cs, char *st, int i) {
    LayerStash ls = m->recompute ? layer_stash_at(wc_layer_restash(&m->cfg), m->restash, 1)
                                 : layer_stash(&m->cfg, st + (size_t)i * cs.layer);
    ls.x = (uint16_t *)(st + (size_t)i * cs.layer);
    return ls;
}

static int plan_products(WcModel *m, char *err, size_t errlen) {
    const WpConfig *c = &m->cfg;
    int T = c->mbs * c->seq;
    if (m->max_layers > 0) {
        WcProduct p[WC_MM_LAYER_N];
        wc_layer_products(c, p);
        int rows[2] = { m->mlp_tile, T % m->mlp_tile };   /* the MLP's: a full tile, the last shorter one */
        for (int i = 0; i < WC_MM_LAYER_N; i++)
            for (int b = 0; b < (wc_mm_is_mlp(i) ? 2 : 1); b++) {
                WcGemm *g = wc_mm_is_mlp(i) ? &m->mlp_mm[b][i] : &m->layer_mm[i];
                int n = wc_mm_is_mlp(i) ? rows[b] : T;
                if (n == 0) continue;   /* T is a whole number of tiles */
                if (wc_gemm_plan(&m->lt, g, p[i].kind, n, p[i].K, p[i].N, p[i].ld_act, p[i].out_f32, p[i].beta_c,
                                 err, errlen))
                    return -1;
            }
    }
    if (m->has_head) {
        WcProduct p[WC_HEAD_N];
        wc_head_products(c, p);
        int rows[2] = { m->ce_block, T % m->ce_block };   /* [0] a full block, [1] the last, shorter one */
        for (int b = 0; b < 2; b++) {
            if (rows[b] == 0) continue;   /* T is a whole number of blocks */
            for (int i = 0; i < WC_HEAD_N; i++)
                if (wc_gemm_plan(&m->lt, &m->head_mm[b][i], p[i].kind, rows[b], p[i].K, p[i].N, p[i].ld_act,
                                 p[i].out_f32, p[i].beta_c, err, errlen))
                    return -1;
        }
    }
    return 0;
}

WcModel *wc_model_new(const WpConfig *c, int max_layers, int has_head, int whole, int recompute, void *stream,
                      char *err, size_t errlen) {
    size_t T = (size_t)c->mbs * c->seq, H = (size_t)c->hidden;
    if (wc_stash_misaligned(c)) {
        snprintf(err, errlen, "CUDA model: tokens x hidden (%zu x %zu) or a layer's bf16 stash is an odd number "
                 "of elements: its fp32 statistics would be misaligned", T, H);
        return NULL;
    }
    if (max_layers > 0 && wc_attention_setup(c->head_dim, err, errlen)) return NULL;
    WcModel *m = (WcModel *)calloc(1, sizeof *m);
    if (!m) { snprintf(err, errlen, "CUDA model: out of host memory"); return NULL; }
    m->cfg = *c;
    m->max_layers = max_layers;
    m->has_head = has_head;
    m->recompute = recompute;
    m->ce_block = wp_ce_block_tokens(c);
    m->mlp_tile = wp_mlp_tile_tokens(c);
    m->stream = (cudaStream_t)stream;
    /* cuDNN's graphs for the one attention shape, built now (their workspace is reserved here too) */
    if (max_layers > 0 && wc_attention_plan(c->mbs, c->seq, c->heads, c->kv_heads, c->head_dim, m->attention,
                                            sizeof m->attention, err, errlen)) {
        free(m);
        return NULL;
    }
    if (wc_lt_new(&m->lt, WC_LT_WORK_BYTES, err, errlen)) { free(m); return NULL; }
    WcWorkspace ws = wc_workspace(c, max_layers, has_head, whole, recompute);
    size_t total = ws.total;
    if (cudaMalloc((void **)&m->block, total) != cudaSuccess) {
        snprintf(err, errlen, "CUDA model: cudaMalloc of the workspace (%zu bytes) failed", total);
        cudaGetLastError();
        wc_lt_free(&m->lt);
        free(m);
        return NULL;
    }
    m->block_bytes = total;
    void **ptr[WC_WS_NPARTS] = {
        [WP_WS_XN] = (void **)&m->xn, [WP_WS_H] = (void **)&m->h, [WP_WS_DH] = (void **)&m->dh,
        [WP_WS_DGU] = (void **)&m->dgu, [WP_WS_DXN] = (void **)&m->dxn, [WP_WS_DRES] = (void **)&m->dres,
        [WP_WS_DATT] = (void **)&m->datt, [WP_WS_DQKV] = (void **)&m->dqkv, [WP_WS_ROPE] = (void **)&m->cos_t,
        [WP_WS_LOGITS] = (void **)&m->logits, [WP_WS_RESTASH] = (void **)&m->restash, [WP_WS_OFFLOAD] = (void **)&m->stage,
        [WP_WS_KV_RING] = NULL,
        [WC_WS_NORM] = (void **)&m->norm_partials, [WC_WS_LOSSES] = (void **)&m->losses,
        [WC_WS_SUMSQ] = (void **)&m->sumsq_partials,
    };
    /* a part without a pointer here (the ring attention's K/V blocks: context parallelism is
     * not run yet) is empty at cp 1 */
    for (int i = 0; i < WC_WS_NPARTS; i++) if (ptr[i]) *ptr[i] = m->block + ws.off[i];
    if (max_layers > 0) {
        size_t n = (size_t)c->seq * (c->head_dim / 2);
        m->sin_t = m->cos_t + n;
        float *host = (float *)malloc(2 * n * sizeof(float) + 1);
        if (!host) { snprintf(err, errlen, "CUDA model: out of host memory"); wc_model_free(m); return NULL; }
        wp_rope_tables(host, host + n, c->seq, c->head_dim, c->rope_theta, &c->rope_scaling);
        /* on the model's stream, and waited for: a plain cudaMemcpy from pageable memory may return
         * before its DMA is done, and a non-blocking stream does not wait for the legacy stream */
        CUDA_CHECK(cudaMemcpyAsync(m->cos_t, host, 2 * n * sizeof(float), cudaMemcpyHostToDevice, m->stream));
        CUDA_CHECK(cudaStreamSynchronize(m->stream));
        free(host);
    }
    if (recompute == WP_RECOMPUTE_OFFLOAD) {
        int ok = cudaStreamCreateWithFlags(&m->copy_stream, cudaStreamNonBlocking) == cudaSuccess &&
                 cudaEventCreateWithFlags(&m->ready, cudaEventDisableTiming) == cudaSuccess &&
                 cudaEventCreateWithFlags(&m->copied[0], cudaEventDisableTiming) == cudaSuccess &&
                 cudaEventCreateWithFlags(&m->copied[1], cudaEventDisableTiming) == cudaSuccess &&
                 cudaEventCreateWithFlags(&m->head_copied, cudaEventDisableTiming) == cudaSuccess;
        if (!ok) {
            snprintf(err, errlen, "CUDA model: the offload's copy stream: %s", cudaGetErrorString(cudaGetLastError()));
            wc_model_free(m);
            return NULL;
        }
    }
    if (plan_products(m, err, errlen)) { wc_model_free(m); return NULL; }
    return m;
}

void wc_model_free(WcModel *m) {
    if (!m) return;
    for (int i = 0; i < WC_MM_LAYER_N; i++) if (m->layer_mm[i].planned) wc_gemm_free(&m->layer_mm[i]);
    for (int b = 0; b < 2; b++)
        for (int i = 0; i < WC_MM_LAYER_N; i++) if (m->mlp_mm[b][i].planned) wc_gemm_free(&m->mlp_mm[b][i]);
    for (int b = 0; b < 2; b++)
        for (int i = 0; i < WC_HEAD_N; i++) if (m->head_mm[b][i].planned) wc_gemm_free(&m->head_mm[b][i]);
    if (m->block) CUDA_CHECK(cudaFree(m->block));
    if (m->copy_stream) cudaStreamDestroy(m->copy_stream);
    cudaEvent_t ev[4] = { m->ready, m->copied[0], m->copied[1], m->head_copied };
    for (int i = 0; i < 4; i++) if (ev[i]) cudaEventDestroy(ev[i]);
    wc_lt_free(&m->lt);
    free(m);
}

size_t wc_model_workspace_bytes(const WcModel *m) {
    return m->block_bytes + m->lt.work_bytes + (m->max_layers > 0 ? wc_cudnn_attention_workspace_bytes() : 0);
}

const char *wc_model_attention(const WcModel *m) { return m->attention; }

int wc_model_set_ce_block(WcModel *m, int tokens, char *err, size_t errlen) {
    int most = wp_ce_block_tokens(&m->cfg);   /* the logits block and the losses are this large */
    m->ce_block = tokens >= 1 && tokens < most ? tokens : most;
    for (int b = 0; b < 2; b++)
        for (int i = 0; i < WC_HEAD_N; i++) if (m->head_mm[b][i].planned) wc_gemm_free(&m->head_mm[b][i]);
    int layers = m->max_layers;
    m->max_layers = 0;   /* plan the head's products only */
    int rc = plan_products(m, err, errlen);
    m->max_layers = layers;
    return rc;
}

static void check_call(const WcModel *m, const WpChunk *k, const void *stash) {
    if (k->nlayers > m->max_layers || (k->last && !m->has_head)) {
        fprintf(stderr, "wc_chunk: chunk %d (%d layers%s) does not fit the model (%d layers%s)\n", k->index,
                k->nlayers, k->last ? ", LM head" : "", m->max_layers, m->has_head ? ", LM head" : "");
        abort();
    }
    if ((uintptr_t)stash % 4) {   /* its fp32 statistics would be misaligned (layout_cuda.h) */
        fprintf(stderr, "wc_chunk: chunk %d's stash %p is not on a 4-byte boundary\n", k->index, stash);
        abort();
    }
}

static void copy_d2d(void *dst, const void *src, size_t bytes, cudaStream_t s) {
    CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, s));
}

/* ---- offload (config.h's WP_RECOMPUTE_OFFLOAD; cpu/model.c, "offload", is the reference) ----
 * The stash is pinned host memory (compute_cuda.c); a chunk computes in the staging: layer i's
 * input in slot i % 2, the head's part after both. The forward copies layer i's input out on the
 * copy stream while layer i computes (it only reads it) and waits for that copy before layer
 * i + 1 writes its output over the slot; the backward copies layer i - 1's input in while layer
 * i computes its backward and waits for it before layer i - 1. Every copy is waited for by the
 * compute stream before the call returns, so whatever the compute stream queues next finds the
 * staging free and the host stash complete. */
static char *stage_x(const WcModel *m, int i) {
    return m->stage + (size_t)(i & 1) * 2 * m->cfg.mbs * m->cfg.seq * m->cfg.hidden;
}
static char *stage_head(const WcModel *m) { return stage_x(m, 0) + 4 * (size_t)m->cfg.mbs * m->cfg.seq * m->cfg.hidden; }
static char *stage_in(const WcModel *m, const WpChunk *k) { return k->last && k->nlayers == 0 ? stage_head(m) : stage_x(m, 0); }

/* bytes from src to dst on the copy stream, once the compute stream has queued all it has so far;
 * done marks the copy's end */
static void offload_copy(WcModel *m, void *dst, const void *src, size_t bytes, cudaEvent_t done) {
    CUDA_CHECK(cudaEventRecord(m->ready, m->stream));
    CUDA_CHECK(cudaStreamWaitEvent(m->copy_stream, m->ready, 0));
    CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, m->copy_stream));
    CUDA_CHECK(cudaEventRecord(done, m->copy_stream));
}

static void offload_wait(WcModel *m, cudaEvent_t done) {
    CUDA_CHECK(cudaStreamWaitEvent(m->stream, done, 0));   /* an event never recorded: no wait */
}

/* y: the layer's output; NULL when only the stash is wanted (recompute before the layer's
 * backward), which skips the MLP's down product. */
static void layer_forward(WcModel *m, const LayerParams<const uint16_t> &p, const LayerStash &st, uint16_t *y) {
    const WpConfig *c = &m->cfg;
    int T = c->mbs * c->seq, H = c->hidden, F = c->ffn;
    cudaStream_t s = m->stream;
    wc_rmsnorm_forward(m->xn, st.rstd1, st.x, p.ln1, T, H, c->eps, s);
    wc_gemm_run(&m->lt, &m->layer_mm[WC_MM_QKV_F], m->xn, p.wqkv, NULL, st.qkv, s);
    wc_rope_forward(st.qkv, m->cos_t, m->sin_t, T, c->seq, c->heads, c->kv_heads, c->head_dim, s);
    wc_attention_forward(st.att, st.lse, st.qkv, c->mbs, c->seq, c->heads, c->kv_heads, c->head_dim, s);
    wc_gemm_run(&m->lt, &m->layer_mm[WC_MM_O_F], st.att, p.wo, st.x, st.x2, s);        /* x2 = x + att Wo^T */
    wc_rmsnorm_forward(m->xn, st.rstd2, st.x2, p.ln2, T, H, c->eps, s);
    if (!y && st.gu_tile) return;   /* recompute: backward redoes gate/up tile by tile */
    for (int t0 = 0; t0 < T; t0 += m->mlp_tile) {
        int n = T - t0 < m->mlp_tile ? T - t0 : m->mlp_tile;
        uint16_t *gu = gu_rows(st, t0, F);
        size_t r = (size_t)t0 * H;
        wc_gemm_run(&m->lt, mlp_gemm(m, n, WC_MM_GU_F), m->xn + r, p.wgu, NULL, gu, s);
        if (!y) continue;
        wc_swiglu_forward(m->h, gu, n, F, s);
        wc_gemm_run(&m->lt, mlp_gemm(m, n, WC_MM_DOWN_F), m->h, p.wdown, st.x2 + r, y + r, s);   /* y = x2 + h Wdown^T */
    }
}

/* On entry m->dres holds dL/dy; on return dL/dx. */
static void layer_backward(WcModel *m, const LayerParams<const uint16_t> &p, const LayerParams<float> &dp,
                           const LayerStash &st) {
    const WpConfig *c = &m->cfg;
    int T = c->mbs * c->seq, H = c->hidden, F = c->ffn;
    cudaStream_t s = m->stream;
    /* MLP: y = x2 + h Wdown^T, h = silu(g) * u, gu = rmsnorm(x2) Wgu^T; tile by tile, the weight
     * gradients summed over the tiles (beta 1), gu recomputed per tile with recompute */
    wc_rmsnorm_recompute(m->xn, st.x2, p.ln2, st.rstd2, T, H, s);
    for (int t0 = 0; t0 < T; t0 += m->mlp_tile) {
        int n = T - t0 < m->mlp_tile ? T - t0 : m->mlp_tile;
        uint16_t *gu = gu_rows(st, t0, F);
        size_t r = (size_t)t0 * H;
        if (st.gu_tile) wc_gemm_run(&m->lt, mlp_gemm(m, n, WC_MM_GU_F), m->xn + r, p.wgu, NULL, gu, s);   /* as in forward */
        wc_swiglu_forward(m->h, gu, n, F, s);
        wc_gemm_run(&m->lt, mlp_gemm(m, n, WC_MM_DOWN_DX), m->dres + r, p.wdown, NULL, m->dh, s);
        wc_gemm_run(&m->lt, mlp_gemm(m, n, WC_MM_DOWN_DW), m->dres + r, m->h, NULL, dp.wdown, s);
        wc_swiglu_backward(m->dgu, m->dh, gu, n, F, s);
        /* dW first: dxn is written over xn (config.c's ws_home) */
        wc_gemm_run(&m->lt, mlp_gemm(m, n, WC_MM_GU_DW), m->dgu, m->xn + r, NULL, dp.wgu, s);
        wc_gemm_run(&m->lt, mlp_gemm(m, n, WC_MM_GU_DX), m->dgu, p.wgu, NULL, m->dxn + r, s);
    }
    wc_rmsnorm_backward(m->dres, 1, dp.ln2, m->dxn, st.x2, p.ln2, st.rstd2, T, H, m->norm_partials, s);
    /* attention: x2 = x + att Wo^T */
    wc_gemm_run(&m->lt, &m->layer_mm[WC_MM_O_DX], m->dres, p.wo, NULL, m->datt, s);
    wc_gemm_run(&m->lt, &m->layer_mm[WC_MM_O_DW], m->dres, st.att, NULL, dp.wo, s);
    wc_attention_backward(m->dqkv, m->datt, st.att, st.lse, st.qkv, c->mbs, c->seq, c->heads, c->kv_heads,
                          c->head_dim, s);
    wc_rope_backward(m->dqkv, m->cos_t, m->sin_t, T, c->seq, c->heads, c->kv_heads, c->head_dim, s);
    wc_rmsnorm_recompute(m->xn, st.x, p.ln1, st.rstd1, T, H, s);
    wc_gemm_run(&m->lt, &m->layer_mm[WC_MM_QKV_DW], m->dqkv, m->xn, NULL, dp.wqkv, s);   /* dW first, as above */
    wc_gemm_run(&m->lt, &m->layer_mm[WC_MM_QKV_DX], m->dqkv, p.wqkv, NULL, m->dxn, s);
    wc_rmsnorm_backward(m->dres, 1, dp.ln1, m->dxn, st.x, p.ln1, st.rstd1, T, H, m->norm_partials, s);
}

/* The LM head's forward from xf: its norm, then block by block the logits, each token's lse and
 * (if loss_sum) the block's summed losses added to *loss_sum. */
static void head_forward(WcModel *m, const WpChunk *k, const uint16_t *params, const int *targets,
                         const uint16_t *xf, float *rstdf, float *lse, double *loss_sum) {
    const WpConfig *c = &m->cfg;
    int T = c->mbs * c->seq, H = c->hidden, V = c->vocab, B = m->ce_block;
    cudaStream_t s = m->stream;
    const uint16_t *w = head_weight(c, k, params);
    wc_rmsnorm_forward(m->xn, rstdf, xf, final_norm(c, k, params), T, H, c->eps, s);
    for (int t0 = 0; t0 < T; t0 += B) {
        int n = T - t0 < B ? T - t0 : B;
        const WcGemm *mm = m->head_mm[n == B ? 0 : 1];
        wc_gemm_run(&m->lt, &mm[WC_HEAD_F], m->xn + (size_t)t0 * H, w, NULL, m->logits, s);
        wc_ce_forward(lse + t0, m->losses, m->logits, targets + t0, n, V, s);
        if (loss_sum) wc_loss_sum(loss_sum, m->losses, n, s);
    }
}

/* The head's backward: leaves dL/dxf in m->dres. */
static void head_backward(WcModel *m, const WpChunk *k, const uint16_t *params, const int *targets,
                          const uint16_t *xf, const float *rstdf, const float *lse, float *dw, float *dwf,
                          float loss_scale) {
    const WpConfig *c = &m->cfg;
    int T = c->mbs * c->seq, H = c->hidden, V = c->vocab, B = m->ce_block;
    cudaStream_t s = m->stream;
    const uint16_t *w = head_weight(c, k, params), *wf = final_norm(c, k, params);
    wc_rmsnorm_recompute(m->xn, xf, wf, rstdf, T, H, s);
    for (int t0 = 0; t0 < T; t0 += B) {
        int n = T - t0 < B ? T - t0 : B;
        const WcGemm *mm = m->head_mm[n == B ? 0 : 1];
        const uint16_t *xn = m->xn + (size_t)t0 * H;
        wc_gemm_run(&m->lt, &mm[WC_HEAD_F], xn, w, NULL, m->logits, s);   /* as in forward */
        wc_ce_backward(m->logits, lse + t0, targets + t0, n, V, loss_scale, s);
        wc_gemm_run(&m->lt, &mm[WC_HEAD_DW], m->logits, xn, NULL, dw, s);   /* dW first: dxn over xn */
        wc_gemm_run(&m->lt, &mm[WC_HEAD_DX], m->logits, w, NULL, m->dxn + (size_t)t0 * H, s);
    }
    wc_rmsnorm_backward(m->dres, 0, dwf, m->dxn, xf, wf, rstdf, T, H, m->norm_partials, s);
}

/* The forward after the chunk's input is in st (layer 0's x), st laid out as
 * wc_chunk_stash(c, k, m->recompute): the layers, each writing its output where the next layer's
 * x (or the head's xf) is kept, then on the last chunk the head. y: a non-last chunk's output. */
static void chunk_forward(WcModel *m, const WpChunk *k, const uint16_t *params, const int *targets,
                          char *st, uint16_t *y, double *loss_sum) {
    const WpConfig *c = &m->cfg;
    size_t T = (size_t)c->mbs * c->seq, H = (size_t)c->hidden, np = wp_layer_nparams(c);
    WcChunkStash cs = wc_chunk_stash(c, k, m->recompute);
    const uint16_t *lp = first_layer(c, k, params);
    int off = m->recompute == WP_RECOMPUTE_OFFLOAD;
    char *head = off ? stage_head(m) : st + cs.xf;   /* xf, then rstdf and lse: the layout's order */
    for (int i = 0; i < k->nlayers; i++) {
        LayerParams<const uint16_t> p = layer_params(c, lp + (size_t)i * np);
        LayerStash ls = chunk_layer_stash(m, cs, st, i);
        uint16_t *out = (i == k->nlayers - 1 && !k->last) ? y : i == k->nlayers - 1 ? (uint16_t *)head
                      : (uint16_t *)(off ? stage_x(m, i + 1) : st + (size_t)(i + 1) * cs.layer);
        if (off) {
            ls.x = (uint16_t *)stage_x(m, i);
            offload_copy(m, st + (size_t)i * cs.layer, ls.x, T * H * sizeof(uint16_t), m->copied[i & 1]);   /* out */
            offload_wait(m, m->copied[(i + 1) & 1]);   /* layer i - 1's input, which out overwrites */
        }
        layer_forward(m, p, ls, out);
    }
    if (!k->last) {
        if (k->nlayers == 0) {
            copy_d2d(y, off ? stage_x(m, 0) : st, T * H * sizeof(uint16_t), m->stream);
            if (off) offload_copy(m, st, stage_x(m, 0), T * H * sizeof(uint16_t), m->copied[0]);
        }
    } else {
        head_forward(m, k, params, targets, (const uint16_t *)head, (float *)(head + 2 * T * H),
                     (float *)(head + 2 * T * H + 4 * T), loss_sum);
        if (off) offload_copy(m, st + cs.xf, head, cs.total - cs.xf, m->head_copied);
    }
    if (off) {   /* the last copies out: no compute left to hide them */
        offload_wait(m, m->copied[0]);
        offload_wait(m, m->copied[1]);
        offload_wait(m, m->head_copied);
    }
}

void wc_chunk_forward(WcModel *m, const WpChunk *k, const uint16_t *params, const int *tokens,
                      const int *targets, const uint16_t *x_in, uint16_t *x_out, void *stash,
                      double *loss_sum) {
    check_call(m, k, stash);
    const WpConfig *c = &m->cfg;
    size_t TH = (size_t)c->mbs * c->seq * c->hidden;
    char *st = (char *)stash, *x = m->recompute == WP_RECOMPUTE_OFFLOAD ? stage_in(m, k) : st;
    if (k->first) wc_embedding_forward((uint16_t *)x, tokens, params, c->mbs * c->seq, c->hidden, c->vocab, m->stream);
    else copy_d2d(x, x_in, TH * sizeof(uint16_t), m->stream);   /* bf16 already: no rounding */
    chunk_forward(m, k, params, targets, st, x_out, loss_sum);
}

/* cpu/model.c's dres_begin, on the device: the residual stream's gradient is carried in dx_in where
 * the caller gives one (on the first chunk, storage it lends), else in the workspace's own dres,
 * which config.c counts only for a chunk holding both ends; dx_in may be dx_out itself. */
static uint16_t *dres_begin(WcModel *m, const WpChunk *k, const uint16_t *dx_out, uint16_t *dx_in, size_t TH) {
    uint16_t *own = m->dres;
    if (dx_in) m->dres = dx_in;
    if (!k->last && m->dres != dx_out)
        copy_d2d(m->dres, dx_out, TH * sizeof(uint16_t), m->stream);   /* bf16 already: no rounding */
    return own;
}

void wc_chunk_backward(WcModel *m, const WpChunk *k, const uint16_t *params, const int *tokens,
                       const int *targets, const void *stash, const uint16_t *dx_out,
                       uint16_t *dx_in, float *dparams, float loss_scale) {
    check_call(m, k, stash);
    const WpConfig *c = &m->cfg;
    size_t T = (size_t)c->mbs * c->seq, H = (size_t)c->hidden, np = wp_layer_nparams(c);
    char *st = (char *)stash;   /* read only in backward */
    WcChunkStash cs = wc_chunk_stash(c, k, m->recompute);
    int off = m->recompute == WP_RECOMPUTE_OFFLOAD, L = k->nlayers;
    size_t xb = T * H * sizeof(uint16_t);
    if (off && k->last)   /* the head's part first, with nothing to hide it */
        CUDA_CHECK(cudaMemcpyAsync(stage_head(m), st + cs.xf, cs.total - cs.xf, cudaMemcpyDefault, m->stream));
    if (off && L > 0) offload_copy(m, stage_x(m, L - 1), st + (size_t)(L - 1) * cs.layer, xb, m->copied[(L - 1) & 1]);
    const char *head = off ? stage_head(m) : st + cs.xf;
    uint16_t *own = dres_begin(m, k, dx_out, dx_in, T * H);
    if (k->last) {
        float *dwf = grad_at(m, k, dparams, final_norm_off(c, k)), *dw = grad_at(m, k, dparams, head_weight_off(c, k));
        head_backward(m, k, params, targets, (const uint16_t *)head, (const float *)(head + 2 * T * H),
                      (const float *)(head + 2 * T * H + 4 * T), dw, dwf, loss_scale);
    }
    const uint16_t *lp = first_layer(c, k, params);
    for (int i = k->nlayers - 1; i >= 0; i--) {
        LayerParams<const uint16_t> p = layer_params(c, lp + (size_t)i * np);
        LayerParams<float> dp = layer_params(c, grad_at(m, k, dparams, first_layer_off(c, k) + (size_t)i * np));
        LayerStash ls = chunk_layer_stash(m, cs, st, i);
        if (off) {
            offload_wait(m, m->copied[i & 1]);   /* layer i's input is in */
            if (i > 0) offload_copy(m, stage_x(m, i - 1), st + (size_t)(i - 1) * cs.layer, xb, m->copied[(i - 1) & 1]);
            ls.x = (uint16_t *)stage_x(m, i);
        }
        if (m->recompute) layer_forward(m, p, ls, NULL);   /* this layer's stash again, the same bits */
        layer_backward(m, p, dp, ls);
    }
    if (k->first) wc_embedding_backward(grad_at(m, k, dparams, 0), m->dres, tokens, (int)T, (int)H, c->vocab, m->stream);
    m->dres = own;   /* not first: dL/dx is in dx_in already */
    grad_store(m);
}

/* ---- the split backward (zero-bubble schedules: BWD_B, then BWD_W) ----
 * cpu/model.c's split, on the device: the B half keeps dy, dh, dx2, the norms' weights and their
 * weight-gradient sums, the head's weight, and writes qkv's output gradient over the stash's qkv
 * (dead after attention's backward); the W half rebuilds the rest (h, SwiGLU's backward, the
 * normalised inputs, the head's dlogits) exactly as B computed it. A norm's sum is written by
 * the same kernels as in wc_chunk_backward into a keep slot holding -0.0f (the identity of the
 * addition its last kernel does), then added into dparams by W: the same single addition. */

/* Pointers into one layer's parts of the keep (layout_cuda.h's wc_chunk_keep). */
struct LayerKeep {
    uint16_t *ln1, *ln2;     /* bf16 working weights in fp32-sized slots */
    float *dln1, *dln2;
    uint16_t *dy, *dh, *dx2;
};

static LayerKeep layer_keep(const WcChunkKeep &kl, char *keep, int i) {
    char *n = keep + kl.norms + (size_t)i * kl.layer_norms, *g = keep + kl.grads + (size_t)i * kl.layer_grads;
    return LayerKeep{ (uint16_t *)(n + kl.ln1), (uint16_t *)(n + kl.ln2), (float *)(n + kl.dln1),
                      (float *)(n + kl.dln2), (uint16_t *)(g + kl.dy), (uint16_t *)(g + kl.dh),
                      (uint16_t *)(g + kl.dx2) };
}

/* layer_backward's input-gradient half. On entry m->dres holds dL/dy; on return dL/dx, and the
 * stash's qkv holds qkv's output gradient. */
static void layer_backward_input(WcModel *m, const LayerParams<const uint16_t> &p, const LayerStash &st,
                                 const LayerKeep &kp) {
    const WpConfig *c = &m->cfg;
    int T = c->mbs * c->seq, H = c->hidden, F = c->ffn;
    size_t width = (size_t)(c->heads + 2 * c->kv_heads) * c->head_dim;
    cudaStream_t s = m->stream;
    copy_d2d(kp.ln1, p.ln1, (size_t)H * sizeof(uint16_t), s);
    copy_d2d(kp.ln2, p.ln2, (size_t)H * sizeof(uint16_t), s);
    copy_d2d(kp.dy, m->dres, (size_t)T * H * sizeof(uint16_t), s);
    for (int t0 = 0; t0 < T; t0 += m->mlp_tile) {
        int n = T - t0 < m->mlp_tile ? T - t0 : m->mlp_tile;
        uint16_t *dh = kp.dh + (size_t)t0 * F;
        size_t r = (size_t)t0 * H;
        wc_gemm_run(&m->lt, mlp_gemm(m, n, WC_MM_DOWN_DX), m->dres + r, p.wdown, NULL, dh, s);
        wc_swiglu_backward(m->dgu, dh, gu_rows(st, t0, F), n, F, s);
        wc_gemm_run(&m->lt, mlp_gemm(m, n, WC_MM_GU_DX), m->dgu, p.wgu, NULL, m->dxn + r, s);
    }
    wc_fill_f32(kp.dln2, -0.0f, (size_t)H, s);
    wc_rmsnorm_backward(m->dres, 1, kp.dln2, m->dxn, st.x2, p.ln2, st.rstd2, T, H, m->norm_partials, s);
    copy_d2d(kp.dx2, m->dres, (size_t)T * H * sizeof(uint16_t), s);
    wc_gemm_run(&m->lt, &m->layer_mm[WC_MM_O_DX], m->dres, p.wo, NULL, m->datt, s);
    wc_attention_backward(m->dqkv, m->datt, st.att, st.lse, st.qkv, c->mbs, c->seq, c->heads, c->kv_heads,
                          c->head_dim, s);
    wc_rope_backward(m->dqkv, m->cos_t, m->sin_t, T, c->seq, c->heads, c->kv_heads, c->head_dim, s);
    wc_gemm_run(&m->lt, &m->layer_mm[WC_MM_QKV_DX], m->dqkv, p.wqkv, NULL, m->dxn, s);
    wc_fill_f32(kp.dln1, -0.0f, (size_t)H, s);
    wc_rmsnorm_backward(m->dres, 1, kp.dln1, m->dxn, st.x, p.ln1, st.rstd1, T, H, m->norm_partials, s);
    copy_d2d(st.qkv, m->dqkv, (size_t)T * width * sizeof(uint16_t), s);   /* qkv is dead: its gradient there */
}

/* layer_backward's weight-gradient half, from the stash (qkv holding its gradient) and the keep. */
static void layer_backward_weights(WcModel *m, const LayerParams<float> &dp, const LayerStash &st,
                                   const LayerKeep &kp) {
    const WpConfig *c = &m->cfg;
    int T = c->mbs * c->seq, H = c->hidden, F = c->ffn;
    cudaStream_t s = m->stream;
    wc_rmsnorm_recompute(m->xn, st.x2, kp.ln2, st.rstd2, T, H, s);
    for (int t0 = 0; t0 < T; t0 += m->mlp_tile) {   /* the whole backward's tiles, in its order */
        int n = T - t0 < m->mlp_tile ? T - t0 : m->mlp_tile;
        const uint16_t *gu = gu_rows(st, t0, F), *dh = kp.dh + (size_t)t0 * F;
        size_t r = (size_t)t0 * H;
        wc_swiglu_forward(m->h, gu, n, F, s);
        wc_gemm_run(&m->lt, mlp_gemm(m, n, WC_MM_DOWN_DW), kp.dy + r, m->h, NULL, dp.wdown, s);
        wc_swiglu_backward(m->dgu, dh, gu, n, F, s);   /* as B computed it */
        wc_gemm_run(&m->lt, mlp_gemm(m, n, WC_MM_GU_DW), m->dgu, m->xn + r, NULL, dp.wgu, s);
    }
    wc_acc_launch(dp.ln2, WP_FP32, kp.dln2, WP_FP32, (size_t)H, 0, s);
    wc_gemm_run(&m->lt, &m->layer_mm[WC_MM_O_DW], kp.dx2, st.att, NULL, dp.wo, s);
    wc_rmsnorm_recompute(m->xn, st.x, kp.ln1, st.rstd1, T, H, s);
    wc_gemm_run(&m->lt, &m->layer_mm[WC_MM_QKV_DW], st.qkv, m->xn, NULL, dp.wqkv, s);
    wc_acc_launch(dp.ln1, WP_FP32, kp.dln1, WP_FP32, (size_t)H, 0, s);
}

/* head_backward's input half: the final norm's and the head's weights copied into the keep, the
 * final norm's weight-gradient sum there; leaves dL/dxf in m->dres. */
static void head_backward_input(WcModel *m, const WpChunk *k, const uint16_t *params, const int *targets,
                                const uint16_t *xf, const float *rstdf, const float *lse, char *keep,
                                const WcChunkKeep &kl, float loss_scale) {
    const WpConfig *c = &m->cfg;
    int T = c->mbs * c->seq, H = c->hidden, V = c->vocab, B = m->ce_block;
    cudaStream_t s = m->stream;
    const uint16_t *w = head_weight(c, k, params), *wf = final_norm(c, k, params);
    float *dlnf = (float *)(keep + kl.dlnf);
    copy_d2d(keep + kl.lnf, wf, (size_t)H * sizeof(uint16_t), s);
    copy_d2d(keep + kl.whead, w, (size_t)V * H * sizeof(uint16_t), s);
    wc_rmsnorm_recompute(m->xn, xf, wf, rstdf, T, H, s);
    for (int t0 = 0; t0 < T; t0 += B) {
        int n = T - t0 < B ? T - t0 : B;
        const WcGemm *mm = m->head_mm[n == B ? 0 : 1];
        wc_gemm_run(&m->lt, &mm[WC_HEAD_F], m->xn + (size_t)t0 * H, w, NULL, m->logits, s);
        wc_ce_backward(m->logits, lse + t0, targets + t0, n, V, loss_scale, s);
        wc_gemm_run(&m->lt, &mm[WC_HEAD_DX], m->logits, w, NULL, m->dxn + (size_t)t0 * H, s);
    }
    wc_fill_f32(dlnf, -0.0f, (size_t)H, s);
    wc_rmsnorm_backward(m->dres, 0, dlnf, m->dxn, xf, wf, rstdf, T, H, m->norm_partials, s);
}

/* head_backward's weight half: each block's dlogits recomputed with the kept weight. */
static void head_backward_weights(WcModel *m, const WpChunk *k, const int *targets, const uint16_t *xf,
                                  const float *rstdf, const float *lse, const char *keep, const WcChunkKeep &kl,
                                  float *dw, float *dwf, float loss_scale) {
    const WpConfig *c = &m->cfg;
    int T = c->mbs * c->seq, H = c->hidden, V = c->vocab, B = m->ce_block;
    cudaStream_t s = m->stream;
    const uint16_t *w = (const uint16_t *)(keep + kl.whead);
    wc_rmsnorm_recompute(m->xn, xf, (const uint16_t *)(keep + kl.lnf), rstdf, T, H, s);
    for (int t0 = 0; t0 < T; t0 += B) {
        int n = T - t0 < B ? T - t0 : B;
        const WcGemm *mm = m->head_mm[n == B ? 0 : 1];
        const uint16_t *xn = m->xn + (size_t)t0 * H;
        wc_gemm_run(&m->lt, &mm[WC_HEAD_F], xn, w, NULL, m->logits, s);
        wc_ce_backward(m->logits, lse + t0, targets + t0, n, V, loss_scale, s);
        wc_gemm_run(&m->lt, &mm[WC_HEAD_DW], m->logits, xn, NULL, dw, s);
    }
    wc_acc_launch(dwf, WP_FP32, keep + kl.dlnf, WP_FP32, (size_t)H, 0, s);
}

/* With recompute, the chunk's full stash (wc_chunk_stash(c, k, 0)) from the kept one
 * (wc_chunk_stash(c, k, 1)): each layer's kept x copied in and the rest of its part recomputed,
 * the head's part copied. */
static void restash_chunk(WcModel *m, const WpChunk *k, const uint16_t *params, const char *kept, char *full) {
    const WpConfig *c = &m->cfg;
    size_t T = (size_t)c->mbs * c->seq, H = (size_t)c->hidden, np = wp_layer_nparams(c);
    WcChunkStash fl = wc_chunk_stash(c, k, 0), kl = wc_chunk_stash(c, k, 1);
    const uint16_t *lp = first_layer(c, k, params);
    for (int i = 0; i < k->nlayers; i++) {
        LayerParams<const uint16_t> p = layer_params(c, lp + (size_t)i * np);
        LayerStash ls = layer_stash(c, full + (size_t)i * fl.layer);
        /* cudaMemcpyDefault: with offload the kept stash is pinned host memory */
        CUDA_CHECK(cudaMemcpyAsync(ls.x, kept + (size_t)i * kl.layer, T * H * sizeof(uint16_t), cudaMemcpyDefault, m->stream));
        layer_forward(m, p, ls, NULL);
    }
    if (k->last)   /* xf, rstdf, lse */
        CUDA_CHECK(cudaMemcpyAsync(full + fl.xf, kept + kl.xf, fl.total - fl.xf, cudaMemcpyDefault, m->stream));
}

void wc_chunk_backward_input(WcModel *m, const WpChunk *k, const uint16_t *params, const int *targets,
                             void *stash, const uint16_t *dx_out, uint16_t *dx_in, void *keep,
                             float loss_scale) {
    check_call(m, k, stash);
    const WpConfig *c = &m->cfg;
    size_t T = (size_t)c->mbs * c->seq, H = (size_t)c->hidden, np = wp_layer_nparams(c);
    WcChunkKeep kl = wc_chunk_keep(c, k, m->recompute);
    char *kp = (char *)keep, *st = (char *)stash;
    if (m->recompute) {
        /* the whole chunk's stash again, into the keep: the W half reads it (and gets no weights
         * to recompute a layer's with) */
        st = kp + kl.restash;
        restash_chunk(m, k, params, (const char *)stash, st);
    }
    WcChunkStash cs = wc_chunk_stash(c, k, 0);
    uint16_t *own = dres_begin(m, k, dx_out, dx_in, T * H);
    if (k->last)
        head_backward_input(m, k, params, targets, (const uint16_t *)(st + cs.xf), (const float *)(st + cs.rstdf),
                            (const float *)(st + cs.lse), kp, kl, loss_scale);
    const uint16_t *lp = first_layer(c, k, params);
    for (int i = k->nlayers - 1; i >= 0; i--) {
        LayerParams<const uint16_t> p = layer_params(c, lp + (size_t)i * np);
        LayerStash ls = layer_stash(c, st + (size_t)i * cs.layer);
        layer_backward_input(m, p, ls, layer_keep(kl, kp, i));
    }
    if (k->first) copy_d2d(kp + kl.dx, m->dres, T * H * sizeof(uint16_t), m->stream);
    m->dres = own;   /* not first: dL/dx is in dx_in already */
}

void wc_chunk_backward_weights(WcModel *m, const WpChunk *k, const int *tokens, const int *targets,
                               const void *stash, const void *keep, float *dparams, float loss_scale) {
    check_call(m, k, stash);
    const WpConfig *c = &m->cfg;
    size_t T = (size_t)c->mbs * c->seq, H = (size_t)c->hidden, np = wp_layer_nparams(c);
    WcChunkKeep kl = wc_chunk_keep(c, k, m->recompute);
    char *kp = (char *)keep;   /* read only in W */
    char *st = m->recompute ? kp + kl.restash : (char *)stash;
    WcChunkStash cs = wc_chunk_stash(c, k, 0);
    if (k->last) {
        float *dwf = grad_at(m, k, dparams, final_norm_off(c, k)), *dw = grad_at(m, k, dparams, head_weight_off(c, k));
        head_backward_weights(m, k, targets, (const uint16_t *)(st + cs.xf), (const float *)(st + cs.rstdf),
                              (const float *)(st + cs.lse), kp, kl, dw, dwf, loss_scale);
    }
    for (int i = k->nlayers - 1; i >= 0; i--) {
        LayerParams<float> dp = layer_params(c, grad_at(m, k, dparams, first_layer_off(c, k) + (size_t)i * np));
        LayerStash ls = layer_stash(c, st + (size_t)i * cs.layer);
        layer_backward_weights(m, dp, ls, layer_keep(kl, kp, i));
    }
    if (k->first)
        wc_embedding_backward(grad_at(m, k, dparams, 0), (const uint16_t *)(kp + kl.dx), tokens, (int)T, (int)H,
                              c->vocab, m->stream);
    grad_store(m);
}

/* ---- element-wise ---- */

void wc_f32_to_bf16(WcModel *m, uint16_t *dst, const float *src, size_t n) {
    wc_convert_f32_to_bf16(dst, src, n, m->stream);
}

void wc_bf16_to_f32(WcModel *m, float *dst, const uint16_t *src, size_t n) {
    wc_convert_bf16_to_f32(dst, src, n, m->stream);
}

void wc_acc(WcModel *m, void *dst, int dst_dtype, const void *src, int src_dtype, size_t n, int first) {
    wc_acc_launch(dst, dst_dtype, src, src_dtype, n, first, m->stream);
}

void wc_sumsq(WcModel *m, const float *g, size_t n, double *out) {
    wc_sumsq_launch(g, n, m->sumsq_partials, out, m->stream);
}

void wc_adamw(WcModel *m, const WpAdamW *opt, float *w, const float *g, float *m1, float *m2,
              size_t n, float lr, float wd, float grad_scale, long t, uint16_t *w16) {
    /* bias corrections in double, as cpu/adamw.c: 1 - b^t loses digits in float for large t */
    float c1 = (float)(1.0 / (1.0 - pow(opt->beta1, (double)t)));
    float c2 = (float)(1.0 / (1.0 - pow(opt->beta2, (double)t)));
    wc_adamw_launch(w, g, m1, m2, n, lr, wd, grad_scale, opt->beta1, opt->beta2, opt->eps, c1, c2, w16, m->stream);
}
