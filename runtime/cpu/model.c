/* One chunk of the LLaMA decoder, forward and backward on one micro-batch: the unit of compute of
 * every schedule. This file only drives; the arithmetic is in the kernel files (kernels.h).
 *
 * A layer, as Hugging Face's LlamaDecoderLayer computes it, on x [T, H] with T = G*S tokens:
 *   xn = rmsnorm(x) ; qkv = xn [Wq; Wk; Wv]^T ; rope(q, k) ; a = attention(q, k, v)
 *   x2 = x + a Wo^T ; xn = rmsnorm(x2) ; gu = xn [Wgate; Wup]^T ; y = x2 + (silu(g) * u) Wdown^T
 * q, k and v (and gate and up) are adjacent in the parameters, so each group is one matrix
 * product. The first chunk starts with the embedding, the last ends with the final norm, the
 * LM head and the cross-entropy.
 *
 * The LM head runs in blocks of wp_ce_block_tokens (config.c) tokens, so that the [T, V] fp32
 * logits of a micro-batch never exist at once (16 sequences of 4k tokens at vocabulary 32000:
 * 7.8 GiB): forward computes a block's logits = xn_blk W^T and keeps each token's log-sum-exp;
 * backward recomputes the block's logits, dlogits = scale * (softmax - onehot), dxn_blk =
 * dlogits W and dW += dlogits^T xn_blk. One more head product in backward buys memory that no
 * longer grows with the vocabulary.
 *
 * The MLP runs in tiles of wp_mlp_tile_tokens (config.c) tokens, the last shorter, so that no
 * [T, F] temporary exists: per tile, gu = xn Wgu^T, h = silu(g) * u and y += h Wdown^T forward;
 * backward h again, dh = dy Wdown, dgu, dxn = dgu Wgu, and dWdown, dWgu added into dparams tile
 * after tile (the sum over the tokens in another order than one product's: the same up to
 * rounding). Every row is computed and rounded as untiled. gu is a layer's stash part [T, 2F]
 * without recompute; with recompute the one-layer recompute stash holds one tile of it, and
 * backward recomputes gu tile by tile from xn (the same bits as the forward's tile).
 *
 * Stash layout (config.c's wp_layer_stash_layout and wp_stash_floats count the same): per layer,
 *   x [T*H] | rstd1 [T] | qkv [T*(heads+2kv)*hd] | att [T*heads*hd] | lse [G*heads*S] |
 *   x2 [T*H] | rstd2 [T] | gu [T*2F]
 * then, on the last chunk, xf [T*H] (the last layer's output) | rstdf [T] | lse of the logits [T].
 * Each part begins with its input, so layer i writes its output where layer i + 1's part begins.
 * With recompute (Megatron's full recomputation, by layer) only each layer's x is stashed, one
 * after the other, and on the last chunk the head's part as it is (config.c's
 * wp_chunk_stash_layout): the forward computes each layer's other parts into the scratch's
 * one-layer recompute stash, and backward, layer by layer from the last, re-runs that layer's
 * forward from its kept x into the same one-layer stash just before the layer's backward (without
 * the down product: its output y is already kept, or not needed). The split backward's B half
 * rebuilds the whole chunk's stash into the keep instead, since W reads it and gets no weights.
 *
 * Offload (config.h's WP_RECOMPUTE_OFFLOAD; wp_scratch_set_offload): the stash the caller gives
 * is host memory (the CUDA backend's pinned memory; here a pool of its own, step_cpu.c), and the
 * chunk computes in the scratch's staging (config.c's WP_WS_OFFLOAD): layer i's input in stage
 * slot i % 2, copied out to the stash once the layer's forward has run (a GPU overlaps that copy
 * with layer i + 1) and copied back before the layer's backward (a GPU prefetches it during layer
 * i + 1's); the head's part through the staging's third slot. The copies are exact, so the
 * result is the same bits as without offload. The split backward's B half copies each layer's
 * input from the stash into the keep's rebuilt stash, as it does without offload.
 *
 * Context parallelism (cpu/model_cp.c): a member of a group runs these chunks on its S/C tokens of
 * each sequence (its scratch made for them), with RoPE at the tokens' own positions
 * (wp_scratch_set_positions) and each layer's attention replaced by the ring round the group
 * (wp_scratch_set_attention's hook, in attend_forward and attend_backward); everything else is per
 * token and unchanged. Without a hook the calls are the ones they always were, the same bits.
 *
 * The zero-bubble schedules split backward in two (wp_chunk_backward_input, then
 * wp_chunk_backward_weights; model.h lists what the first keeps for the second): the same
 * operations as wp_chunk_backward in the same order, the weight products' dW halves moved to the
 * second call (with SwiGLU's elementwise backward and, on the last chunk, the LM head's logits
 * and cross-entropy backward done again there), so both give the same bits as the whole
 * backward. The split adds no rounding point: what it keeps is stored as the whole backward
 * stores it, and what W recomputes is rounded as the first time.
 *
 * Precision. With wp_scratch_set_precision(s, WP_BF16) a chunk computes as a bf16 GPU
 * implementation will, so that the CPU is that implementation's numerical reference: arithmetic
 * in fp32, but every tensor the GPU stores in bf16 is rounded to bf16 (to nearest even) at the
 * point where it is stored. The CPU keeps those tensors in fp32 containers holding bf16 values
 * (so the kernels need no 16-bit versions); the plan's buffers and transfers are real 16-bit
 * arrays, which the step ops convert. Weights must arrive bf16-valued (the caller rounds its
 * working copy, wp_bf16_round_array; nothing here checks). Every matrix product then has
 * bf16-valued inputs and fp32 sums: tensor-core semantics up to the order of the sums (a product
 * of two bf16 values is exact in fp32). The rounding points, the one list of them, with the name
 * of the GPU kernel that stores each tensor (CUDA backend: follow this table):
 *
 *   tensor                                 GPU kernel          here
 *   forward, each layer
 *     x, the chunk's input                 embedding_fwd/recv  store_bf16 as it enters the stash
 *     xn = rmsnorm(x)                      rmsnorm_fwd         store_bf16 (rstd1: fp32)
 *     qkv = xn Wqkv^T                      gemm                MM_BF16_OUT
 *     q, k rotated                         rope_fwd            store_bf16
 *     P (softmax tile) before P V          attention_fwd       attention(bf16)
 *     att                                  attention_fwd       attention(bf16) (lse: fp32)
 *     x2 = x + att Wo^T                    gemm, x as C        MM_BF16_OUT (one rounding of the sum)
 *     xn = rmsnorm(x2)                     rmsnorm_fwd         store_bf16 (rstd2: fp32)
 *     gu = xn Wgu^T                        gemm                MM_BF16_OUT
 *     h = silu(g) * u                      swiglu_fwd          store_bf16
 *     y = x2 + h Wdown^T (next x, x_out)   gemm, x2 as C       MM_BF16_OUT
 *   forward, head (last chunk)
 *     xn = rmsnorm(xf)                     rmsnorm_fwd         store_bf16 (rstdf: fp32)
 *     logits block = xn W^T                gemm, fp32 out      not rounded (fp32 workspace)
 *     lse per token, loss                  ce_fwd              fp32; loss summed in double
 *   backward, head
 *     logits block again                   gemm, fp32 out      not rounded
 *     dlogits = scale (softmax - onehot)   ce_bwd              crossentropy_backward(bf16)
 *     dxn = dlogits W                      gemm                MM_BF16_OUT
 *     dres = rmsnorm_bwd(dxn)              rmsnorm_bwd         store_bf16
 *   backward, each layer (dres = dL/dy on entry; dx_out rounded as it enters)
 *     h again                              swiglu_fwd          store_bf16
 *     dh = dres Wdown                      gemm                MM_BF16_OUT
 *     dgu                                  swiglu_bwd          store_bf16
 *     xn = rmsnorm(x2) again               rmsnorm_fwd         store_bf16
 *     dxn = dgu Wgu                        gemm                MM_BF16_OUT
 *     dres = dres + rmsnorm_bwd(dxn)       rmsnorm_bwd         store_bf16 (dL/dx2, one rounding)
 *     datt = dres Wo                       gemm                MM_BF16_OUT
 *     P, dS before their products          attention_bwd       attention(bf16) (D: fp32)
 *     dqkv                                 attention_bwd       attention(bf16)
 *     dq, dk rotated back                  rope_bwd            store_bf16
 *     xn = rmsnorm(x) again                rmsnorm_fwd         store_bf16
 *     dxn = dqkv Wqkv                      gemm                MM_BF16_OUT
 *     dres = dres + rmsnorm_bwd(dxn)       rmsnorm_bwd         store_bf16 (dL/dx; the chunk's dx_in)
 * Kept in fp32 in every precision: rstd, both log-sum-exps, the softmax statistics inside
 * attention and cross-entropy, the logits block, the loss (double), and the parameter gradients,
 * which the products and the norm and embedding backwards add into dparams in fp32 (how they are
 * stored or sent afterwards is the caller's choice). A recomputed tensor is rounded exactly as the
 * first time, so it is the same bits. */
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include "cpu/model.h"
#include "cpu/kernels.h"
#include "common/rope_table.h"

struct WpScratch {
    WpConfig cfg;
    int max_layers, nthreads;
    int ce_block;            /* tokens per block of the LM head (wp_ce_block_tokens, or less for tests) */
    WpDtype dtype;           /* WP_BF16: the rounding points of the header apply */
    void (*progress)(void *);   /* called between layers: lets posted transfers move */
    void *progress_ud;
    WpAttentionHook attn;    /* forward NULL: attention over the whole sequence (attention.c) */
    float *restash;          /* recompute: one layer's stash, refilled before its backward */
    float *stage;            /* offload: [T, H] twice, then the head's xf | rstdf | lse (config.c) */
    /* the workspace, one buffer per part of config.c's WpWorkspacePart; parts whose lives never
     * overlap point into one (config.c's ws_home: dxn and datt are xn's, dgu and logits dqkv's) */
    float *xn;               /* [T, H] a norm's output */
    float *h;                /* [T, F] silu(gate) * up */
    float *dh;               /* [T, F] */
    float *dgu;              /* [T, 2F] */
    float *dxn;              /* [T, H] gradient of a norm's output */
    float *dres;             /* [T, H] gradient of the residual stream */
    float *datt;             /* [T, heads*hd] */
    float *dqkv;             /* [T, (heads+2kv)*hd] */
    float *cos_t, *sin_t;    /* [S, hd/2] RoPE tables */
    float *logits;           /* [ce_block, V] a block's logits, then their gradient */
    float *attn_work;        /* K^T, V^T and per-thread tiles */
    float *block;            /* the one allocation all of the above but restash point into */
    WpBf16 *mm_work;         /* bf16 mode with a bf16 GEMM: its operands' 16-bit copies */
    size_t mm_work_elems;
    /* a bf16 weight gradient (wp_scratch_set_grad_bf16): g16, summed one segment (gseg; n 0:
     * none open) at a time in the fp32 gstage */
    WpBf16 *g16;
    float *gstage;
    WpGradSegment gseg;
};

/* Pointers into one layer's parameters. */
typedef struct {
    float *ln1, *wqkv, *wo, *ln2, *wgu, *wdown;
} LayerParams;

static LayerParams layer_params(const WpConfig *c, float *p) {
    WpLayerOffsets o = wp_layer_offsets(c);
    return (LayerParams){ p + o.ln1, p + o.wqkv, p + o.wo, p + o.ln2, p + o.wgu, p + o.wdown };
}

/* Pointers into one layer's part of the stash (its layout is config.c's). gu_tile: gu holds one
 * MLP tile, not the T tokens (the one-layer recompute stash, config.c's wp_layer_restash_floats). */
typedef struct {
    float *x, *rstd1, *qkv, *att, *lse, *x2, *rstd2, *gu;
    int gu_tile;
} LayerStash;

static LayerStash layer_stash(const WpConfig *c, float *b) {
    WpLayerStashLayout l = wp_layer_stash_layout(c);
    LayerStash s = { b + l.x, b + l.rstd1, b + l.qkv, b + l.att, b + l.lse, b + l.x2, b + l.rstd2,
                     b + l.gu, 0 };
    return s;
}

/* The one-layer recompute stash at b: the layer's part from rstd1 on, gu one tile (config.c's
 * wp_layer_restash_floats); x is the caller's, the kept input. */
static LayerStash restash_layer(const WpConfig *c, float *b) {
    WpLayerStashLayout l = wp_layer_stash_layout(c);
    size_t o = l.rstd1;
    LayerStash s = { NULL, b + (l.rstd1 - o), b + (l.qkv - o), b + (l.att - o), b + (l.lse - o), b + (l.x2 - o),
                     b + (l.rstd2 - o), b + (l.gu - o), 1 };
    return s;
}

/* Where tile t0's gate and up are: the tile's rows of a whole gu, or the one tile's place. */
static float *gu_rows(const LayerStash *st, int t0, int F) {
    return st->gu + (st->gu_tile ? 0 : (size_t)t0 * 2 * F);
}

/* The scratch's two allocations in floats, each part rounded to 64 bytes (what wp_scratch_new
 * allocates: the recompute stash, then the block of the parts and the attention's work). */
static size_t scratch_restash_floats(const WpConfig *c, const WpChunk *big) {
    return (wp_workspace_part_floats(c, big, 1, WP_WS_RESTASH) + 15) / 16 * 16;
}

static size_t scratch_block_floats(const WpConfig *c, const WpChunk *big, int nthreads) {
    size_t total = (attention_work_floats(c->mbs, c->seq, c->heads, c->kv_heads, c->head_dim, nthreads) + 15) / 16 * 16;
    for (int i = 0; i < WP_WS_NPARTS; i++)
        if (i != WP_WS_RESTASH) total += (wp_workspace_slot_floats(c, big, 0, (WpWorkspacePart)i) + 15) / 16 * 16;
    return total;
}

size_t wp_scratch_bytes(const WpConfig *c, int max_layers) {
    WpChunk big = wp_chunk_make(c, 0, 0, max_layers, 1, 1);
    return (scratch_restash_floats(c, &big) + scratch_block_floats(c, &big, omp_get_max_threads())) * sizeof(float);
}

/* Layer i's part of a chunk's stash st laid out as sl: with recompute, x is the kept input and
 * the rest is the scratch's one-layer recompute stash. */
static LayerStash chunk_layer_stash(const WpConfig *c, const WpChunkStashLayout *sl, float *st, int i,
                                    int recompute, WpScratch *s) {
    LayerStash ls = recompute ? restash_layer(c, s->restash) : layer_stash(c, st + (size_t)i * sl->layer);
    ls.x = st + (size_t)i * sl->layer;
    return ls;
}

WpScratch *wp_scratch_new(const WpConfig *c, int max_layers) {
    WpScratch *s = calloc(1, sizeof *s);
    if (!s) return NULL;
    s->cfg = *c;
    s->max_layers = max_layers;
    s->nthreads = omp_get_max_threads();
    s->ce_block = wp_ce_block_tokens(c);
    s->dtype = WP_FP32;
    matmul_init();
    /* the largest chunk this scratch serves: every part at its largest */
    WpChunk big = wp_chunk_make(c, 0, 0, max_layers, 1, 1);
    /* The recompute stash is an allocation of its own: a run without recompute never touches
     * it, so its pages are never made resident. Likewise the logits block of a rank that runs
     * no LM head. */
    size_t nre = scratch_restash_floats(c, &big);
    s->restash = nre ? aligned_alloc(64, nre * sizeof(float)) : NULL;
    if (nre && !s->restash) { free(s); return NULL; }
    float **part[WP_WS_NPARTS] = {
        [WP_WS_XN] = &s->xn, [WP_WS_H] = &s->h, [WP_WS_DH] = &s->dh, [WP_WS_DGU] = &s->dgu,
        [WP_WS_DXN] = &s->dxn, [WP_WS_DRES] = &s->dres, [WP_WS_DATT] = &s->datt,
        [WP_WS_DQKV] = &s->dqkv, [WP_WS_ROPE] = &s->cos_t, [WP_WS_LOGITS] = &s->logits,
    };
    s->block = aligned_alloc(64, scratch_block_floats(c, &big, s->nthreads) * sizeof(float));
    if (!s->block) { free(s->restash); free(s); return NULL; }
    /* one slot per home part (config.c's ws_home), then each sharer pointed at its home's */
    size_t off = 0;
    for (int i = 0; i < WP_WS_NPARTS; i++)
        if (part[i] && wp_workspace_part_home((WpWorkspacePart)i) == (WpWorkspacePart)i) {
            *part[i] = s->block + off;
            off += (wp_workspace_slot_floats(c, &big, 0, (WpWorkspacePart)i) + 15) / 16 * 16;
        }
    for (int i = 0; i < WP_WS_NPARTS; i++)
        if (part[i]) *part[i] = *part[wp_workspace_part_home((WpWorkspacePart)i)];
    s->attn_work = s->block + off;
    if (max_layers > 0) {
        s->sin_t = s->cos_t + (size_t)c->seq * (c->head_dim / 2);
        wp_rope_tables(s->cos_t, s->sin_t, c->seq, c->head_dim, c->rope_theta, &c->rope_scaling);
    }
    return s;
}

int wp_scratch_set_precision(WpScratch *s, WpDtype dtype) {
    s->dtype = dtype;
    if (dtype != WP_BF16 || s->mm_work) return 0;
    /* a bf16 GEMM, if the BLAS has one, needs 16-bit copies of the largest product's operands */
    const WpConfig *c = &s->cfg;
    int T = c->mbs * c->seq, H = c->hidden, F = c->ffn, qd = c->heads * c->head_dim;
    int width = (c->heads + 2 * c->kv_heads) * c->head_dim, tile = wp_mlp_tile_tokens(c);
    size_t need = matmul_bf16_work(s->ce_block, H, c->vocab);
    if (s->max_layers > 0) {
        size_t layer[4] = { matmul_bf16_work(T, H, width), matmul_bf16_work(T, qd, H),
                            matmul_bf16_work(tile, H, 2 * F), matmul_bf16_work(tile, F, H) };
        for (int i = 0; i < 4; i++) need = layer[i] > need ? layer[i] : need;
    }
    if (need == 0) return 0;   /* no bf16 GEMM: the conversion path needs nothing */
    s->mm_work = aligned_alloc(64, (need * sizeof(WpBf16) + 63) / 64 * 64);
    if (!s->mm_work) return -1;
    s->mm_work_elems = need;
    return 0;
}

WpDtype wp_scratch_precision(const WpScratch *s) { return s->dtype; }
const WpConfig *wp_scratch_config(const WpScratch *s) { return &s->cfg; }

void wp_scratch_set_ce_block(WpScratch *s, int tokens) {
    int most = wp_ce_block_tokens(&s->cfg);
    s->ce_block = tokens >= 1 && tokens < most ? tokens : most;
}

void wp_scratch_set_progress(WpScratch *s, void (*fn)(void *), void *ud) {
    s->progress = fn;
    s->progress_ud = ud;
}

void wp_scratch_set_attention(WpScratch *s, const WpAttentionHook *h) {
    s->attn = h ? *h : (WpAttentionHook){ 0 };
}

int wp_scratch_set_positions(WpScratch *s, const int *pos, int S) {
    const WpConfig *c = &s->cfg;
    if (s->max_layers <= 0) return 0;   /* no layers: no RoPE */
    if (!pos) {
        wp_rope_tables(s->cos_t, s->sin_t, c->seq, c->head_dim, c->rope_theta, &c->rope_scaling);
        return 0;
    }
    /* the whole sequence's tables (so the same bits as a run on it), then the rows of pos */
    int half = c->head_dim / 2;
    float *ct = malloc(2 * (size_t)S * half * sizeof(float));
    if (!ct) return -1;
    float *st = ct + (size_t)S * half;
    wp_rope_tables(ct, st, S, c->head_dim, c->rope_theta, &c->rope_scaling);
    for (int j = 0; j < c->seq; j++) {
        memcpy(s->cos_t + (size_t)j * half, ct + (size_t)pos[j] * half, (size_t)half * sizeof(float));
        memcpy(s->sin_t + (size_t)j * half, st + (size_t)pos[j] * half, (size_t)half * sizeof(float));
    }
    free(ct);
    return 0;
}

static void progress(const WpScratch *s) {
    if (s->progress) s->progress(s->progress_ud);
}

void wp_scratch_free(WpScratch *s) {
    if (!s) return;
    if (s->mm_work) matmul_set_bf16_work(NULL, 0);
    free(s->mm_work);
    free(s->block);
    free(s->restash);
    free(s->stage);
    free(s);
}

int wp_scratch_set_offload(WpScratch *s) {
    if (s->stage) return 0;
    WpChunk big = wp_chunk_make(&s->cfg, 0, 0, s->max_layers, 1, 1);
    size_t n = wp_workspace_part_floats(&s->cfg, &big, WP_RECOMPUTE_OFFLOAD, WP_WS_OFFLOAD);
    s->stage = aligned_alloc(64, (n + 15) / 16 * 16 * sizeof(float));
    return s->stage ? 0 : -1;
}

/* Offload's staging: layer i's input, and the head's part (xf | rstdf | lse). A last chunk
 * without layers takes its input where the head reads it. */
static float *stage_x(const WpScratch *s, int i) {
    return s->stage + (size_t)(i & 1) * s->cfg.mbs * s->cfg.seq * s->cfg.hidden;
}
static float *stage_head(const WpScratch *s) { return stage_x(s, 0) + 2 * (size_t)s->cfg.mbs * s->cfg.seq * s->cfg.hidden; }
static float *stage_in(const WpScratch *s, const WpChunk *k) { return k->last && k->nlayers == 0 ? stage_head(s) : stage_x(s, 0); }

/* The copies between the staging and the stash in host memory: plain copies on the CPU, where the
 * CUDA backend's are on its copy stream. */
static void offload_copy(float *dst, const float *src, size_t n) { memcpy(dst, src, n * sizeof(float)); }

/* A rounding point of the header's table: the n floats at x are stored as bf16 (in bf16 mode). */
static void store_bf16(const WpScratch *s, float *x, size_t n) {
    if (s->dtype == WP_BF16) wp_bf16_round_array(x, n);
}

/* Flags of a product whose output is an activation (rounded when stored) or not. */
static int mm_flags(const WpScratch *s) { return s->dtype == WP_BF16 ? MM_BF16_IN | MM_BF16_OUT : 0; }
static int mm_flags_fp32_out(const WpScratch *s) { return s->dtype == WP_BF16 ? MM_BF16_IN : 0; }

static void check_call(const WpConfig *c, const WpChunk *k, const WpScratch *s) {
    if (k->nlayers > s->max_layers || s->cfg.seq != c->seq || s->cfg.mbs != c->mbs ||
        s->cfg.hidden != c->hidden || s->cfg.ffn != c->ffn || s->cfg.vocab != c->vocab ||
        s->cfg.heads != c->heads || s->cfg.kv_heads != c->kv_heads || s->cfg.head_dim != c->head_dim ||
        wp_mlp_tile_tokens(&s->cfg) != wp_mlp_tile_tokens(c) ||
        s->cfg.rope_theta != c->rope_theta || !wp_rope_scaling_equal(&s->cfg.rope_scaling, &c->rope_scaling)) {
        fprintf(stderr, "wp_chunk: chunk %d (%d layers) does not fit the scratch (%d layers) or its shape\n",
                k->index, k->nlayers, s->max_layers);
        abort();
    }
    /* this scratch's bf16 GEMM work area, not another's */
    matmul_set_bf16_work(s->mm_work, s->mm_work_elems);
}

/* A layer's attention: over the whole sequence, or the scratch's hook (context parallelism's
 * ring, cpu/model_cp.c), which sees the same tensors: att and lse from the rotated qkv; in
 * backward dqkv written from datt. */
static void attend_forward(const WpConfig *c, const LayerStash *st, WpScratch *s) {
    int bf16 = s->dtype == WP_BF16;
    if (s->attn.forward) s->attn.forward(s->attn.ud, st->att, st->lse, st->qkv, bf16);
    else attention_forward(st->att, st->lse, st->qkv, c->mbs, c->seq, c->heads, c->kv_heads, c->head_dim,
                           s->attn_work, s->nthreads, bf16);
}

static void attend_backward(const WpConfig *c, const LayerStash *st, WpScratch *s) {
    int bf16 = s->dtype == WP_BF16;
    if (s->attn.backward) s->attn.backward(s->attn.ud, s->dqkv, s->datt, st->att, st->lse, st->qkv, bf16);
    else attention_backward(s->dqkv, s->datt, st->att, st->lse, st->qkv, c->mbs, c->seq, c->heads,
                            c->kv_heads, c->head_dim, s->attn_work, s->nthreads, bf16);
}

/* y: the layer's output; NULL when only the stash is wanted (recompute before the layer's
 * backward), which skips the MLP's down product. */
static void layer_forward(const WpConfig *c, const LayerParams *p, const LayerStash *st, float *y,
                          WpScratch *s) {
    int T = c->mbs * c->seq, H = c->hidden, F = c->ffn, hd = c->head_dim;
    int qd = c->heads * hd, width = (c->heads + 2 * c->kv_heads) * hd, mm = mm_flags(s);
    rmsnorm_forward(s->xn, st->rstd1, st->x, p->ln1, T, H, c->eps);
    store_bf16(s, s->xn, (size_t)T * H);
    matmul_forward(st->qkv, s->xn, p->wqkv, T, H, width, 0, mm);
    rope_forward(st->qkv, s->cos_t, s->sin_t, T, c->seq, c->heads, c->kv_heads, hd);
    store_bf16(s, st->qkv, (size_t)T * width);
    attend_forward(c, st, s);
    memcpy(st->x2, st->x, (size_t)T * H * sizeof(float));
    matmul_forward(st->x2, st->att, p->wo, T, qd, H, 1, mm);        /* x2 = x + att Wo^T */
    rmsnorm_forward(s->xn, st->rstd2, st->x2, p->ln2, T, H, c->eps);
    store_bf16(s, s->xn, (size_t)T * H);
    if (!y && st->gu_tile) return;   /* recompute: backward redoes gate/up tile by tile */
    if (y) memcpy(y, st->x2, (size_t)T * H * sizeof(float));
    int B = wp_mlp_tile_tokens(c);
    for (int t0 = 0; t0 < T; t0 += B) {
        int n = T - t0 < B ? T - t0 : B;
        float *gu = gu_rows(st, t0, F);
        matmul_forward(gu, s->xn + (size_t)t0 * H, p->wgu, n, H, 2 * F, 0, mm);
        if (!y) continue;
        swiglu_forward(s->h, gu, n, F);
        store_bf16(s, s->h, (size_t)n * F);
        matmul_forward(y + (size_t)t0 * H, s->h, p->wdown, n, F, H, 1, mm);   /* y = x2 + h Wdown^T */
    }
}

/* On entry s->dres holds dL/dy; on return dL/dx. */
static void layer_backward(const WpConfig *c, const LayerParams *p, LayerParams *dp,
                           const LayerStash *st, WpScratch *s) {
    int T = c->mbs * c->seq, H = c->hidden, F = c->ffn, hd = c->head_dim;
    int qd = c->heads * hd, width = (c->heads + 2 * c->kv_heads) * hd, mm = mm_flags(s);
    /* MLP: y = x2 + h Wdown^T, h = silu(g) * u, gu = rmsnorm(x2) Wgu^T; tile by tile, the
     * weight gradients summed over the tiles (gu recomputed per tile with recompute) */
    rmsnorm_recompute(s->xn, st->x2, p->ln2, st->rstd2, T, H);
    store_bf16(s, s->xn, (size_t)T * H);
    int B = wp_mlp_tile_tokens(c);
    for (int t0 = 0; t0 < T; t0 += B) {
        int n = T - t0 < B ? T - t0 : B;
        float *gu = gu_rows(st, t0, F), *xn = s->xn + (size_t)t0 * H;
        if (st->gu_tile) matmul_forward(gu, xn, p->wgu, n, H, 2 * F, 0, mm);   /* as in forward */
        swiglu_forward(s->h, gu, n, F);
        store_bf16(s, s->h, (size_t)n * F);
        matmul_backward(s->dh, dp->wdown, s->dres + (size_t)t0 * H, s->h, p->wdown, n, F, H, 0, mm);
        swiglu_backward(s->dgu, s->dh, gu, n, F);
        store_bf16(s, s->dgu, (size_t)n * 2 * F);
        matmul_backward(s->dxn + (size_t)t0 * H, dp->wgu, s->dgu, xn, p->wgu, n, H, 2 * F, 0, mm);
    }
    rmsnorm_backward(s->dres, dp->ln2, s->dxn, st->x2, p->ln2, st->rstd2, T, H);   /* dres: dL/dx2 */
    store_bf16(s, s->dres, (size_t)T * H);
    /* attention: x2 = x + att Wo^T */
    matmul_backward(s->datt, dp->wo, s->dres, st->att, p->wo, T, qd, H, 0, mm);
    attend_backward(c, st, s);
    rope_backward(s->dqkv, s->cos_t, s->sin_t, T, c->seq, c->heads, c->kv_heads, hd);
    store_bf16(s, s->dqkv, (size_t)T * width);
    rmsnorm_recompute(s->xn, st->x, p->ln1, st->rstd1, T, H);
    store_bf16(s, s->xn, (size_t)T * H);
    matmul_backward(s->dxn, dp->wqkv, s->dqkv, s->xn, p->wqkv, T, H, width, 0, mm);
    rmsnorm_backward(s->dres, dp->ln1, s->dxn, st->x, p->ln1, st->rstd1, T, H);     /* dres: dL/dx */
    store_bf16(s, s->dres, (size_t)T * H);
}

/* Where the last chunk's head parameters are, and the first layer's, in elements. */
static size_t head_weight_off(const WpConfig *c, const WpChunk *k) {
    if (!wp_chunk_has_head(c, k)) return 0;   /* tied, one chunk: the embedding, at its start */
    return k->nparams - (size_t)c->vocab * c->hidden;
}
static size_t final_norm_off(const WpConfig *c, const WpChunk *k) {
    return k->nparams - (size_t)c->hidden - (wp_chunk_has_head(c, k) ? (size_t)c->vocab * c->hidden : 0);
}
static size_t first_layer_off(const WpConfig *c, const WpChunk *k) {
    return k->first ? (size_t)c->vocab * c->hidden : 0;
}
static float *head_weight(const WpConfig *c, const WpChunk *k, float *p) { return p + head_weight_off(c, k); }
static float *final_norm(const WpConfig *c, const WpChunk *k, float *p) { return p + final_norm_off(c, k); }
static float *first_layer(const WpConfig *c, const WpChunk *k, float *p) { return p + first_layer_off(c, k); }

/* ---- a bf16 gradient ----
 * With wp_scratch_set_grad_bf16 the backward adds into a stage of one segment of the chunk's
 * parameters at a time (config.h's wp_grad_segment: the head's, one layer's, the embedding's):
 * the segment's bf16 values widened, the backward's sums added in fp32, rounded back once when it
 * moves on. Each element is widened, summed and rounded as when the whole chunk was staged, so the
 * bits are the same; the stage is the largest segment, not the chunk. Without it, dparams. */

/* The open segment rounded into the bf16 gradient. */
static void grad_store(WpScratch *s) {
    if (s->g16 && s->gseg.n) wp_f32_to_bf16_array(s->g16 + s->gseg.off, s->gstage, s->gseg.n);
    s->gseg.n = 0;
}

/* The fp32 gradient of the chunk's parameters from offset off on (off begins a tensor): dparams's,
 * or the stage of the segment holding off, opened (the open one stored) when off is outside it. */
static float *grad_at(WpScratch *s, const WpChunk *k, float *dparams, size_t off) {
    if (!s->g16) return dparams + off;
    if (!s->gseg.n || off < s->gseg.off || off >= s->gseg.off + s->gseg.n) {
        grad_store(s);
        for (int i = 0; i < wp_grad_nsegments(&s->cfg, k); i++) {
            WpGradSegment g = wp_grad_segment(&s->cfg, k, i);
            if (off >= g.off && off < g.off + g.n) { s->gseg = g; break; }
        }
        wp_bf16_to_f32_array(s->gstage, s->g16 + s->gseg.off, s->gseg.n);
    }
    return s->gstage + (off - s->gseg.off);
}

void wp_scratch_set_grad_bf16(WpScratch *s, WpBf16 *g, float *stage) {
    s->g16 = g;
    s->gstage = stage;
    s->gseg.n = 0;
}

/* The LM head's forward from xf (the last layer's output): its norm, then block by block the
 * logits and each token's log-sum-exp. Returns the block's summed token losses. */
static double head_forward(const WpConfig *c, const WpChunk *k, const float *params,
                           const int *targets, float *xf, float *rstdf, float *lse, WpScratch *s) {
    int T = c->mbs * c->seq, H = c->hidden, V = c->vocab, B = s->ce_block;
    float *pp = (float *)params, *w = head_weight(c, k, pp);
    rmsnorm_forward(s->xn, rstdf, xf, final_norm(c, k, pp), T, H, c->eps);
    store_bf16(s, s->xn, (size_t)T * H);
    double loss = 0;
    for (int t0 = 0; t0 < T; t0 += B) {
        int n = T - t0 < B ? T - t0 : B;
        matmul_forward(s->logits, s->xn + (size_t)t0 * H, w, n, H, V, 0, mm_flags_fp32_out(s));
        loss += crossentropy_forward(lse + t0, s->logits, targets + t0, n, V);
    }
    return loss;
}

/* One block of the head's backward from the recomputed xn: the block's logits again, then
 * dlogits = scale (softmax - onehot) in s->logits, the same bits in both halves. */
static void head_block_dlogits(const WpConfig *c, const float *xn_blk, const float *w, const float *lse,
                               const int *targets, int n, float loss_scale, WpScratch *s) {
    matmul_forward(s->logits, xn_blk, w, n, c->hidden, c->vocab, 0, mm_flags_fp32_out(s));
    crossentropy_backward(s->logits, lse, targets, n, c->vocab, loss_scale, s->dtype == WP_BF16);
}

/* The head's backward: leaves dL/dxf in s->dres. */
static void head_backward(const WpConfig *c, const WpChunk *k, const float *params,
                          const int *targets, const float *xf, const float *rstdf, const float *lse,
                          float *dw, float *dwf, float loss_scale, WpScratch *s) {
    int T = c->mbs * c->seq, H = c->hidden, V = c->vocab, B = s->ce_block;
    float *pp = (float *)params, *w = head_weight(c, k, pp), *wf = final_norm(c, k, pp);
    rmsnorm_recompute(s->xn, xf, wf, rstdf, T, H);
    store_bf16(s, s->xn, (size_t)T * H);
    for (int t0 = 0; t0 < T; t0 += B) {
        int n = T - t0 < B ? T - t0 : B;
        const float *xn = s->xn + (size_t)t0 * H;
        head_block_dlogits(c, xn, w, lse + t0, targets + t0, n, loss_scale, s);   /* logits as in forward */
        matmul_backward(s->dxn + (size_t)t0 * H, dw, s->logits, xn, w, n, H, V, 0, mm_flags(s));
    }
    memset(s->dres, 0, (size_t)T * H * sizeof(float));
    rmsnorm_backward(s->dres, dwf, s->dxn, xf, wf, rstdf, T, H);
    store_bf16(s, s->dres, (size_t)T * H);
}

/* The forward after the chunk's input is in st (layer 0's x), st laid out as
 * wp_chunk_stash_layout(c, k, recompute) says: the layers, each writing its output where the next
 * layer's x (or the head's xf) is kept, then on the last chunk the head and the loss. y: the
 * non-last chunk's output. */
static void chunk_forward(const WpConfig *c, const WpChunk *k, const float *params, const int *targets,
                          float *st, int recompute, float *y, WpScratch *s, double *loss_sum) {
    size_t T = (size_t)c->mbs * c->seq, H = (size_t)c->hidden;
    WpChunkStashLayout sl = wp_chunk_stash_layout(c, k, recompute);
    float *lp = first_layer(c, k, (float *)params);   /* read only; the helpers serve dparams too */
    int off = recompute == WP_RECOMPUTE_OFFLOAD;
    float *head = off ? stage_head(s) : st + sl.xf;   /* xf, then rstdf and lse: the layout's order */
    for (int i = 0; i < k->nlayers; i++) {
        LayerParams p = layer_params(c, lp + (size_t)i * wp_layer_nparams(c));
        LayerStash ls = chunk_layer_stash(c, &sl, st, i, recompute, s);
        if (off) ls.x = stage_x(s, i);
        float *out = (i == k->nlayers - 1 && !k->last) ? y : i == k->nlayers - 1 ? head
                   : off ? stage_x(s, i + 1) : st + (size_t)(i + 1) * sl.layer;
        layer_forward(c, &p, &ls, out, s);
        if (off) offload_copy(st + (size_t)i * sl.layer, ls.x, T * H);   /* copy out */
        progress(s);
    }
    if (!k->last) {
        if (k->nlayers == 0) {
            memcpy(y, off ? stage_x(s, 0) : st, T * H * sizeof(float));
            if (off) offload_copy(st, stage_x(s, 0), T * H);
        }
        return;
    }
    double l = head_forward(c, k, params, targets, head, head + T * H, head + T * H + T, s);
    if (off) offload_copy(st + sl.xf, head, T * H + 2 * T);
    if (loss_sum) *loss_sum += l;
}

void wp_chunk_forward(const WpConfig *c, const WpChunk *k, const float *params,
                      const int *tokens, const int *targets, const float *x_in, float *x_out,
                      float *stash, int recompute, WpScratch *s, double *loss_sum) {
    check_call(c, k, s);
    size_t TH = (size_t)c->mbs * c->seq * c->hidden;
    float *x = recompute == WP_RECOMPUTE_OFFLOAD ? stage_in(s, k) : stash;
    if (k->first) embedding_forward(x, tokens, params, c->mbs * c->seq, c->hidden, c->vocab);
    else memcpy(x, x_in, TH * sizeof(float));
    store_bf16(s, x, TH);   /* x: bf16 already when the weights and the sender are */
    chunk_forward(c, k, params, targets, stash, recompute, x_out, s, loss_sum);
}

/* The buffer a backward carries the residual stream's gradient in (dres): dx_in, where the caller
 * gives one (the gradient it writes: a chunk's output; on the first chunk, storage the caller
 * lends, its own input gradient's buffer in train/step_ops.c), else the scratch's own, which
 * config.c counts only for a chunk holding both ends (WP_WS_DRES). dx_in may be dx_out itself:
 * dx_out is read once, first. Copies dL/dy in (not last) and returns the scratch's own pointer,
 * for dres_end. */
static float *dres_begin(WpScratch *s, const WpChunk *k, const float *dx_out, float *dx_in, size_t TH) {
    float *own = s->dres;
    if (dx_in) s->dres = dx_in;
    if (!k->last) {
        if (s->dres != dx_out) memcpy(s->dres, dx_out, TH * sizeof(float));
        store_bf16(s, s->dres, TH);   /* dL/dy: bf16 already when the sender is */
    }
    return own;
}

static void dres_end(WpScratch *s, float *own) { s->dres = own; }

void wp_chunk_backward(const WpConfig *c, const WpChunk *k, const float *params,
                       const int *tokens, const int *targets,
                       const float *stash, int recompute, const float *dx_out, float *dx_in,
                       float *dparams, float loss_scale, WpScratch *s) {
    check_call(c, k, s);
    size_t T = (size_t)c->mbs * c->seq, H = (size_t)c->hidden;
    float *st = (float *)stash;   /* read only in backward */
    WpChunkStashLayout sl = wp_chunk_stash_layout(c, k, recompute);
    float *pp = (float *)params;
    int off = recompute == WP_RECOMPUTE_OFFLOAD;
    float *own = dres_begin(s, k, dx_out, dx_in, T * H);
    if (k->last) {
        float *head = st + sl.xf;
        if (off) offload_copy(head = stage_head(s), st + sl.xf, T * H + 2 * T);   /* copy in */
        float *dwf = grad_at(s, k, dparams, final_norm_off(c, k)), *dw = grad_at(s, k, dparams, head_weight_off(c, k));
        head_backward(c, k, params, targets, head, head + T * H, head + T * H + T, dw, dwf, loss_scale, s);
    }
    float *lp = first_layer(c, k, pp);
    for (int i = k->nlayers - 1; i >= 0; i--) {
        LayerParams p = layer_params(c, lp + (size_t)i * wp_layer_nparams(c));
        LayerParams dp = layer_params(c, grad_at(s, k, dparams, first_layer_off(c, k) + (size_t)i * wp_layer_nparams(c)));
        LayerStash ls = chunk_layer_stash(c, &sl, st, i, recompute, s);
        if (off) offload_copy(ls.x = stage_x(s, i), st + (size_t)i * sl.layer, T * H);   /* copy in */
        if (recompute) layer_forward(c, &p, &ls, NULL, s);   /* this layer's stash again, the same bits */
        layer_backward(c, &p, &dp, &ls, s);
        progress(s);
    }
    if (k->first) embedding_backward(grad_at(s, k, dparams, 0), s->dres, tokens, (int)T, (int)H);
    dres_end(s, own);   /* not first: dL/dx is in dx_in already */
    grad_store(s);
}

/* ---- the split backward (zero-bubble schedules: BWD_B, then BWD_W) ----
 * The same operations as wp_chunk_backward, in the same order within each half, so the input
 * gradient and the parameter gradient are the same bits as the whole backward's. The B half
 * keeps (config.h, WpKeepLayout; model.h lists it) what the W half needs beyond the stash, as
 * little of it as the W half can rebuild from: dy, dh (not SwiGLU's backward's dgu, twice as
 * wide: W redoes that elementwise step from dh and the stash's gu), dx2, qkv's output gradient
 * written over the stash's qkv (dead once attention's backward has run, and of the same size),
 * and the norms' weight gradients, which B sums over the tokens so that their inputs' gradients
 * (dxn1, dxn2, the head's dxnf) need not be kept. Each such sum is the fresh sum rmsnorm_backward
 * adds into dparams in the whole backward, written into the keep (which B fills with -0.0f first:
 * -0.0f + a == a for every a, signed zeros included) and added into dparams by W: the same single
 * addition, so the same bits. The LM head's weight gradient needs every block's dlogits [T*V];
 * rather than keep them the B half keeps a copy of the head's weight [V*H] (smaller when T > H),
 * and the W half recomputes each block's logits and dlogits exactly as B computed them. */

/* Pointers into one layer's part of the keep. */
typedef struct {
    float *dy, *dh, *dx2, *ln1, *ln2, *dln1, *dln2;
} LayerKeep;

static LayerKeep layer_keep(const WpConfig *c, float *b) {
    WpLayerKeepLayout l = wp_layer_keep_layout(c);
    LayerKeep k = { b + l.dy, b + l.dh, b + l.dx2, b + l.ln1, b + l.ln2, b + l.dln1, b + l.dln2 };
    return k;
}

/* The start of a norm's weight-gradient sum in the keep: -0.0f, the identity of the addition
 * rmsnorm_backward does (a fresh sum added to what is there). */
static void sum_start(float *dw, int n) {
    for (int j = 0; j < n; j++) dw[j] = -0.0f;
}

/* dparams += a norm's weight-gradient sum from the keep: rmsnorm_backward's own last step. */
static void sum_add(float *dw, const float *sum, int n) {
    for (int j = 0; j < n; j++) dw[j] += sum[j];
}

/* layer_backward's input-gradient half. On entry s->dres holds dL/dy; on return dL/dx. The
 * stash's qkv holds qkv's output gradient on return. */
static void layer_backward_input(const WpConfig *c, const LayerParams *p, const LayerStash *st,
                                 const LayerKeep *kp, WpScratch *s) {
    int T = c->mbs * c->seq, H = c->hidden, F = c->ffn, hd = c->head_dim;
    int qd = c->heads * hd, width = (c->heads + 2 * c->kv_heads) * hd, mm = mm_flags(s);
    memcpy(kp->ln1, p->ln1, (size_t)H * sizeof(float));
    memcpy(kp->ln2, p->ln2, (size_t)H * sizeof(float));
    memcpy(kp->dy, s->dres, (size_t)T * H * sizeof(float));
    int B = wp_mlp_tile_tokens(c);
    for (int t0 = 0; t0 < T; t0 += B) {
        int n = T - t0 < B ? T - t0 : B;
        float *dh = kp->dh + (size_t)t0 * F;
        matmul_backward(dh, NULL, s->dres + (size_t)t0 * H, NULL, p->wdown, n, F, H, 0, mm);
        swiglu_backward(s->dgu, dh, gu_rows(st, t0, F), n, F);
        store_bf16(s, s->dgu, (size_t)n * 2 * F);
        matmul_backward(s->dxn + (size_t)t0 * H, NULL, s->dgu, NULL, p->wgu, n, H, 2 * F, 0, mm);
    }
    sum_start(kp->dln2, H);
    rmsnorm_backward(s->dres, kp->dln2, s->dxn, st->x2, p->ln2, st->rstd2, T, H);   /* dres: dL/dx2 */
    store_bf16(s, s->dres, (size_t)T * H);
    memcpy(kp->dx2, s->dres, (size_t)T * H * sizeof(float));
    matmul_backward(s->datt, NULL, s->dres, NULL, p->wo, T, qd, H, 0, mm);
    attend_backward(c, st, s);
    rope_backward(s->dqkv, s->cos_t, s->sin_t, T, c->seq, c->heads, c->kv_heads, hd);
    store_bf16(s, s->dqkv, (size_t)T * width);
    matmul_backward(s->dxn, NULL, s->dqkv, NULL, p->wqkv, T, H, width, 0, mm);
    sum_start(kp->dln1, H);
    rmsnorm_backward(s->dres, kp->dln1, s->dxn, st->x, p->ln1, st->rstd1, T, H);     /* dres: dL/dx */
    store_bf16(s, s->dres, (size_t)T * H);
    memcpy(st->qkv, s->dqkv, (size_t)T * width * sizeof(float));   /* qkv is dead: its gradient there */
}

/* layer_backward's weight-gradient half, from the stash (qkv holding its gradient) and the keep. */
static void layer_backward_weights(const WpConfig *c, LayerParams *dp, const LayerStash *st,
                                   const LayerKeep *kp, WpScratch *s) {
    int T = c->mbs * c->seq, H = c->hidden, F = c->ffn, hd = c->head_dim;
    int qd = c->heads * hd, width = (c->heads + 2 * c->kv_heads) * hd, mm = mm_flags(s);
    rmsnorm_recompute(s->xn, st->x2, kp->ln2, st->rstd2, T, H);
    store_bf16(s, s->xn, (size_t)T * H);
    int B = wp_mlp_tile_tokens(c);
    for (int t0 = 0; t0 < T; t0 += B) {   /* the whole backward's tiles, in its order */
        int n = T - t0 < B ? T - t0 : B;
        const float *gu = gu_rows(st, t0, F), *dh = kp->dh + (size_t)t0 * F;
        swiglu_forward(s->h, gu, n, F);
        store_bf16(s, s->h, (size_t)n * F);
        matmul_backward(NULL, dp->wdown, kp->dy + (size_t)t0 * H, s->h, NULL, n, F, H, 0, mm);
        swiglu_backward(s->dgu, dh, gu, n, F);   /* as B computed it */
        store_bf16(s, s->dgu, (size_t)n * 2 * F);
        matmul_backward(NULL, dp->wgu, s->dgu, s->xn + (size_t)t0 * H, NULL, n, H, 2 * F, 0, mm);
    }
    sum_add(dp->ln2, kp->dln2, H);
    matmul_backward(NULL, dp->wo, kp->dx2, st->att, NULL, T, qd, H, 0, mm);
    rmsnorm_recompute(s->xn, st->x, kp->ln1, st->rstd1, T, H);
    store_bf16(s, s->xn, (size_t)T * H);
    matmul_backward(NULL, dp->wqkv, st->qkv, s->xn, NULL, T, H, width, 0, mm);
    sum_add(dp->ln1, kp->dln1, H);
}

/* head_backward's input half: the final norm's weight and the head's (copied into the keep for
 * W), the final norm's weight-gradient sum; leaves dL/dxf in s->dres. */
static void head_backward_input(const WpConfig *c, const WpChunk *k, const float *params,
                                const int *targets, const float *xf, const float *rstdf, const float *lse,
                                float *keep, const WpKeepLayout *kl, float loss_scale, WpScratch *s) {
    int T = c->mbs * c->seq, H = c->hidden, V = c->vocab, B = s->ce_block;
    float *pp = (float *)params, *w = head_weight(c, k, pp), *wf = final_norm(c, k, pp);
    memcpy(keep + kl->lnf, wf, (size_t)H * sizeof(float));
    memcpy(keep + kl->whead, w, (size_t)V * H * sizeof(float));
    rmsnorm_recompute(s->xn, xf, wf, rstdf, T, H);
    store_bf16(s, s->xn, (size_t)T * H);
    for (int t0 = 0; t0 < T; t0 += B) {
        int n = T - t0 < B ? T - t0 : B;
        head_block_dlogits(c, s->xn + (size_t)t0 * H, w, lse + t0, targets + t0, n, loss_scale, s);
        matmul_backward(s->dxn + (size_t)t0 * H, NULL, s->logits, NULL, w, n, H, V, 0, mm_flags(s));
    }
    memset(s->dres, 0, (size_t)T * H * sizeof(float));
    sum_start(keep + kl->dlnf, H);
    rmsnorm_backward(s->dres, keep + kl->dlnf, s->dxn, xf, wf, rstdf, T, H);
    store_bf16(s, s->dres, (size_t)T * H);
}

/* head_backward's weight half: dlogits recomputed block by block with the kept weight. */
static void head_backward_weights(const WpConfig *c, const WpChunk *k, const int *targets, const float *xf,
                                  const float *rstdf, const float *lse, const float *keep, const WpKeepLayout *kl,
                                  float *dw, float *dwf, float loss_scale, WpScratch *s) {
    int T = c->mbs * c->seq, H = c->hidden, V = c->vocab, B = s->ce_block;
    const float *w = keep + kl->whead;
    rmsnorm_recompute(s->xn, xf, keep + kl->lnf, rstdf, T, H);
    store_bf16(s, s->xn, (size_t)T * H);
    for (int t0 = 0; t0 < T; t0 += B) {
        int n = T - t0 < B ? T - t0 : B;
        const float *xn = s->xn + (size_t)t0 * H;
        head_block_dlogits(c, xn, w, lse + t0, targets + t0, n, loss_scale, s);
        matmul_backward(NULL, dw, s->logits, xn, NULL, n, H, V, 0, mm_flags(s));
    }
    sum_add(dwf, keep + kl->dlnf, H);
}

/* With recompute, the chunk's full stash (wp_chunk_stash_layout(c, k, 0)) from the kept one
 * (wp_chunk_stash_layout(c, k, 1)): each layer's kept x copied in and the rest of its part
 * recomputed, the head's part copied. */
static void restash_chunk(const WpConfig *c, const WpChunk *k, const float *params, const float *kept,
                          float *full, WpScratch *s) {
    size_t T = (size_t)c->mbs * c->seq, H = (size_t)c->hidden;
    WpChunkStashLayout fl = wp_chunk_stash_layout(c, k, 0), kl = wp_chunk_stash_layout(c, k, 1);
    float *lp = first_layer(c, k, (float *)params);
    for (int i = 0; i < k->nlayers; i++) {
        LayerParams p = layer_params(c, lp + (size_t)i * wp_layer_nparams(c));
        LayerStash ls = layer_stash(c, full + (size_t)i * fl.layer);
        memcpy(ls.x, kept + (size_t)i * kl.layer, T * H * sizeof(float));
        layer_forward(c, &p, &ls, NULL, s);
        progress(s);
    }
    if (k->last) memcpy(full + fl.xf, kept + kl.xf, (T * H + 2 * T) * sizeof(float));
}

void wp_chunk_backward_input(const WpConfig *c, const WpChunk *k, const float *params,
                             const int *targets, float *stash, int recompute,
                             const float *dx_out, float *dx_in, float *keep, float loss_scale,
                             WpScratch *s) {
    check_call(c, k, s);
    size_t T = (size_t)c->mbs * c->seq, H = (size_t)c->hidden;
    WpKeepLayout kl = wp_keep_layout(c, k, recompute);
    WpChunkStashLayout sl = wp_chunk_stash_layout(c, k, 0);
    float *st = stash;
    if (recompute) {
        /* the whole chunk's stash again, into the keep: the W half reads it (and gets no
         * weights to recompute a layer's with) */
        st = keep + kl.restash;
        restash_chunk(c, k, params, stash, st, s);
    }
    size_t lkeep = wp_layer_keep_layout(c).end;
    float *own = dres_begin(s, k, dx_out, dx_in, T * H);
    if (k->last)
        head_backward_input(c, k, params, targets, st + sl.xf, st + sl.rstdf, st + sl.lse, keep, &kl, loss_scale, s);
    float *lp = first_layer(c, k, (float *)params);
    for (int i = k->nlayers - 1; i >= 0; i--) {
        LayerParams p = layer_params(c, lp + (size_t)i * wp_layer_nparams(c));
        LayerStash ls = layer_stash(c, st + (size_t)i * sl.layer);
        LayerKeep kp = layer_keep(c, keep + kl.layers + (size_t)i * lkeep);
        layer_backward_input(c, &p, &ls, &kp, s);
        progress(s);
    }
    if (k->first) memcpy(keep + kl.dx, s->dres, T * H * sizeof(float));
    dres_end(s, own);   /* not first: dL/dx is in dx_in already */
}

void wp_chunk_backward_weights(const WpConfig *c, const WpChunk *k, const int *tokens, const int *targets,
                               const float *stash, int recompute, const float *keep,
                               float *dparams, float loss_scale, WpScratch *s) {
    check_call(c, k, s);
    size_t T = (size_t)c->mbs * c->seq, H = (size_t)c->hidden;
    WpKeepLayout kl = wp_keep_layout(c, k, recompute);
    const float *st = recompute ? keep + kl.restash : stash;   /* the full stash either way */
    WpChunkStashLayout sl = wp_chunk_stash_layout(c, k, 0);
    size_t lkeep = wp_layer_keep_layout(c).end;
    if (k->last) {
        float *dwf = grad_at(s, k, dparams, final_norm_off(c, k)), *dw = grad_at(s, k, dparams, head_weight_off(c, k));
        head_backward_weights(c, k, targets, st + sl.xf, st + sl.rstdf, st + sl.lse, keep, &kl, dw, dwf, loss_scale, s);
    }
    for (int i = k->nlayers - 1; i >= 0; i--) {
        LayerParams dp = layer_params(c, grad_at(s, k, dparams, first_layer_off(c, k) + (size_t)i * wp_layer_nparams(c)));
        LayerStash ls = layer_stash(c, (float *)st + (size_t)i * sl.layer);
        LayerKeep kp = layer_keep(c, (float *)keep + kl.layers + (size_t)i * lkeep);
        layer_backward_weights(c, &dp, &ls, &kp, s);
        progress(s);
    }
    if (k->first) embedding_backward(grad_at(s, k, dparams, 0), keep + kl.dx, tokens, (int)T, (int)H);
    grad_store(s);
}
