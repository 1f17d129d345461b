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
 * Stash layout (wp_stash_floats in config.c counts the same): per layer, in order,
 *   x [T*H] | rstd1 [T] | qkv [T*(heads+2kv)*hd] | att [T*heads*hd] | lse [G*heads*S] |
 *   x2 [T*H] | rstd2 [T] | gu [T*2F]
 * then, on the last chunk, xf [T*H] (the last layer's output) | rstdf [T] | probs [T*V].
 * Each part begins with its input, so layer i writes its output where layer i + 1's part begins.
 * With recompute only the chunk's input is stashed; backward re-runs the forward into a full
 * stash inside the scratch first. */
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include "cpu/model.h"
#include "cpu/kernels.h"

struct WpScratch {
    WpConfig cfg;
    int max_layers, nthreads;
    void (*progress)(void *);   /* called between layers: lets posted transfers move */
    void *progress_ud;
    float *restash;          /* the full stash of a recomputed chunk */
    float *xn;               /* [T, H] a norm's output */
    float *h;                /* [T, F] silu(gate) * up */
    float *dh;               /* [T, F] */
    float *dgu;              /* [T, 2F] */
    float *dxn;              /* [T, H] gradient of a norm's output */
    float *dres;             /* [T, H] gradient of the residual stream */
    float *datt;             /* [T, heads*hd] */
    float *dqkv;             /* [T, (heads+2kv)*hd] */
    float *logits;           /* [T, V] logits, then their gradient */
    float *cos_t, *sin_t;    /* [S, hd/2] RoPE tables */
    float *attn_work;        /* K^T, V^T and per-thread tiles */
    float *block;            /* the one allocation all of the above but restash point into */
};

/* Pointers into one layer's parameters. */
typedef struct {
    float *ln1, *wqkv, *wo, *ln2, *wgu, *wdown;
} LayerParams;

static LayerParams layer_params(const WpConfig *c, float *p) {
    size_t H = (size_t)c->hidden, F = (size_t)c->ffn, qd = (size_t)c->heads * c->head_dim;
    size_t width = (size_t)(c->heads + 2 * c->kv_heads) * c->head_dim;
    LayerParams l;
    l.ln1 = p;
    l.wqkv = l.ln1 + H;
    l.wo = l.wqkv + width * H;
    l.ln2 = l.wo + H * qd;
    l.wgu = l.ln2 + H;
    l.wdown = l.wgu + 2 * F * H;
    return l;
}

/* Pointers into one layer's part of the stash. */
typedef struct {
    float *x, *rstd1, *qkv, *att, *lse, *x2, *rstd2, *gu, *end;
} LayerStash;

static LayerStash layer_stash(const WpConfig *c, float *b) {
    size_t T = (size_t)c->mbs * c->seq, H = (size_t)c->hidden, F = (size_t)c->ffn;
    size_t qd = (size_t)c->heads * c->head_dim;
    size_t width = (size_t)(c->heads + 2 * c->kv_heads) * c->head_dim;
    LayerStash s;
    s.x = b;
    s.rstd1 = s.x + T * H;
    s.qkv = s.rstd1 + T;
    s.att = s.qkv + T * width;
    s.lse = s.att + T * qd;
    s.x2 = s.lse + (size_t)c->mbs * c->heads * c->seq;
    s.rstd2 = s.x2 + T * H;
    s.gu = s.rstd2 + T;
    s.end = s.gu + 2 * T * F;
    return s;
}

WpScratch *wp_scratch_new(const WpConfig *c, int max_layers) {
    size_t T = (size_t)c->mbs * c->seq, H = (size_t)c->hidden, F = (size_t)c->ffn;
    size_t V = (size_t)c->vocab, hd = (size_t)c->head_dim, qd = (size_t)c->heads * hd;
    size_t width = (size_t)(c->heads + 2 * c->kv_heads) * hd;
    WpScratch *s = calloc(1, sizeof *s);
    if (!s) return NULL;
    s->cfg = *c;
    s->max_layers = max_layers;
    s->nthreads = omp_get_max_threads();
    matmul_init();
    WpChunk big = wp_chunk_make(c, 0, 0, max_layers, 1, 1);
    /* The recompute stash is an allocation of its own: a run without recompute never touches
     * it, so its pages are never made resident. */
    s->restash = aligned_alloc(64, (wp_stash_floats(c, &big, 0) + 15) / 16 * 16 * sizeof(float));
    if (!s->restash) { free(s); return NULL; }
    size_t sizes[] = {
        T * H, T * F, T * F, 2 * T * F, T * H, T * H, T * qd,
        T * width, T * V, (size_t)c->seq * hd / 2, (size_t)c->seq * hd / 2,
        attention_work_floats(c->mbs, c->seq, c->heads, c->kv_heads, c->head_dim, s->nthreads),
    };
    float **ptrs[] = { &s->xn, &s->h, &s->dh, &s->dgu, &s->dxn, &s->dres, &s->datt,
                       &s->dqkv, &s->logits, &s->cos_t, &s->sin_t, &s->attn_work };
    enum { NBUF = sizeof sizes / sizeof sizes[0] };
    size_t total = 0;
    for (int i = 0; i < NBUF; i++) total += (sizes[i] + 15) / 16 * 16;   /* 64-byte aligned each */
    s->block = aligned_alloc(64, total * sizeof(float));
    if (!s->block) { free(s->restash); free(s); return NULL; }
    size_t off = 0;
    for (int i = 0; i < NBUF; i++) { *ptrs[i] = s->block + off; off += (sizes[i] + 15) / 16 * 16; }
    rope_tables(s->cos_t, s->sin_t, c->seq, c->head_dim, c->rope_theta);
    return s;
}

void wp_scratch_set_progress(WpScratch *s, void (*fn)(void *), void *ud) {
    s->progress = fn;
    s->progress_ud = ud;
}

static void progress(const WpScratch *s) {
    if (s->progress) s->progress(s->progress_ud);
}

void wp_scratch_free(WpScratch *s) {
    if (!s) return;
    free(s->block);
    free(s->restash);
    free(s);
}

static void check_call(const WpConfig *c, const WpChunk *k, const WpScratch *s) {
    if (k->nlayers > s->max_layers || s->cfg.seq != c->seq || s->cfg.mbs != c->mbs ||
        s->cfg.hidden != c->hidden || s->cfg.ffn != c->ffn || s->cfg.vocab != c->vocab ||
        s->cfg.heads != c->heads || s->cfg.kv_heads != c->kv_heads || s->cfg.head_dim != c->head_dim ||
        s->cfg.rope_theta != c->rope_theta) {
        fprintf(stderr, "wp_chunk: chunk %d (%d layers) does not fit the scratch (%d layers) or its shape\n",
                k->index, k->nlayers, s->max_layers);
        abort();
    }
    if (c->tied && k->last && !k->first) {
        fprintf(stderr, "wp_chunk: a tied LM head needs the embedding in the same chunk (chunk %d)\n", k->index);
        abort();
    }
}

static void layer_forward(const WpConfig *c, const LayerParams *p, const LayerStash *st, float *y,
                          WpScratch *s) {
    int T = c->mbs * c->seq, H = c->hidden, F = c->ffn, hd = c->head_dim;
    int qd = c->heads * hd, width = (c->heads + 2 * c->kv_heads) * hd;
    rmsnorm_forward(s->xn, st->rstd1, st->x, p->ln1, T, H, c->eps);
    matmul_forward(st->qkv, s->xn, p->wqkv, T, H, width, 0);
    rope_forward(st->qkv, s->cos_t, s->sin_t, T, c->seq, c->heads, c->kv_heads, hd);
    attention_forward(st->att, st->lse, st->qkv, c->mbs, c->seq, c->heads, c->kv_heads, hd,
                      s->attn_work, s->nthreads);
    memcpy(st->x2, st->x, (size_t)T * H * sizeof(float));
    matmul_forward(st->x2, st->att, p->wo, T, qd, H, 1);        /* x2 = x + att Wo^T */
    rmsnorm_forward(s->xn, st->rstd2, st->x2, p->ln2, T, H, c->eps);
    matmul_forward(st->gu, s->xn, p->wgu, T, H, 2 * F, 0);
    swiglu_forward(s->h, st->gu, T, F);
    memcpy(y, st->x2, (size_t)T * H * sizeof(float));
    matmul_forward(y, s->h, p->wdown, T, F, H, 1);              /* y = x2 + h Wdown^T */
}

/* On entry s->dres holds dL/dy; on return dL/dx. */
static void layer_backward(const WpConfig *c, const LayerParams *p, LayerParams *dp,
                           const LayerStash *st, WpScratch *s) {
    int T = c->mbs * c->seq, H = c->hidden, F = c->ffn, hd = c->head_dim;
    int qd = c->heads * hd, width = (c->heads + 2 * c->kv_heads) * hd;
    /* MLP: y = x2 + h Wdown^T, h = silu(g) * u, gu = rmsnorm(x2) Wgu^T */
    swiglu_forward(s->h, st->gu, T, F);
    matmul_backward(s->dh, dp->wdown, s->dres, s->h, p->wdown, T, F, H, 0);
    swiglu_backward(s->dgu, s->dh, st->gu, T, F);
    rmsnorm_recompute(s->xn, st->x2, p->ln2, st->rstd2, T, H);
    matmul_backward(s->dxn, dp->wgu, s->dgu, s->xn, p->wgu, T, H, 2 * F, 0);
    rmsnorm_backward(s->dres, dp->ln2, s->dxn, st->x2, p->ln2, st->rstd2, T, H);   /* dres: dL/dx2 */
    /* attention: x2 = x + att Wo^T */
    matmul_backward(s->datt, dp->wo, s->dres, st->att, p->wo, T, qd, H, 0);
    attention_backward(s->dqkv, s->datt, st->att, st->lse, st->qkv, c->mbs, c->seq, c->heads,
                       c->kv_heads, hd, s->attn_work, s->nthreads);
    rope_backward(s->dqkv, s->cos_t, s->sin_t, T, c->seq, c->heads, c->kv_heads, hd);
    rmsnorm_recompute(s->xn, st->x, p->ln1, st->rstd1, T, H);
    matmul_backward(s->dxn, dp->wqkv, s->dqkv, s->xn, p->wqkv, T, H, width, 0);
    rmsnorm_backward(s->dres, dp->ln1, s->dxn, st->x, p->ln1, st->rstd1, T, H);     /* dres: dL/dx */
}

/* Where the last chunk's head parameters are. */
static float *head_weight(const WpConfig *c, const WpChunk *k, float *p) {
    if (c->tied) return p;   /* the embedding, at the start of the (first) chunk */
    return p + k->nparams - (size_t)c->vocab * c->hidden;
}
static float *final_norm(const WpConfig *c, const WpChunk *k, float *p) {
    return p + k->nparams - (size_t)c->hidden - (c->tied ? 0 : (size_t)c->vocab * c->hidden);
}
static float *first_layer(const WpConfig *c, const WpChunk *k, float *p) {
    return p + (k->first ? (size_t)c->vocab * c->hidden : 0);
}

/* The forward after the chunk's input is in st (layer 0's x): the layers, then on the last
 * chunk the head and the loss. y: the non-last chunk's output. */
static void chunk_forward_from_stash(const WpConfig *c, const WpChunk *k, const float *params,
                                     const int *targets, float *st, float *y, WpScratch *s,
                                     double *loss_sum) {
    size_t T = (size_t)c->mbs * c->seq, H = (size_t)c->hidden;
    float *pp = (float *)params;   /* read only; the pointer helpers serve dparams too */
    float *lp = first_layer(c, k, pp), *b = st;
    for (int i = 0; i < k->nlayers; i++) {
        LayerParams p = layer_params(c, lp + (size_t)i * wp_layer_nparams(c));
        LayerStash ls = layer_stash(c, b);
        float *out = (i == k->nlayers - 1 && !k->last) ? y : ls.end;
        layer_forward(c, &p, &ls, out, s);
        progress(s);
        b = ls.end;
    }
    if (!k->last) {
        if (k->nlayers == 0) memcpy(y, st, T * H * sizeof(float));
        return;
    }
    float *xf = b, *rstdf = xf + T * H, *probs = rstdf + T;
    rmsnorm_forward(s->xn, rstdf, xf, final_norm(c, k, pp), (int)T, (int)H, c->eps);
    matmul_forward(s->logits, s->xn, head_weight(c, k, pp), (int)T, (int)H, c->vocab, 0);
    double l = crossentropy_forward(probs, s->logits, targets, (int)T, c->vocab);
    if (loss_sum) *loss_sum += l;
}

void wp_chunk_forward(const WpConfig *c, const WpChunk *k, const float *params,
                      const int *tokens, const int *targets, const float *x_in, float *x_out,
                      float *stash, int recompute, WpScratch *s, double *loss_sum) {
    check_call(c, k, s);
    size_t TH = (size_t)c->mbs * c->seq * c->hidden;
    float *st = recompute ? s->restash : stash;
    if (k->first) embedding_forward(st, tokens, params, c->mbs * c->seq, c->hidden, c->vocab);
    else memcpy(st, x_in, TH * sizeof(float));
    if (recompute) memcpy(stash, st, TH * sizeof(float));
    chunk_forward_from_stash(c, k, params, targets, st, x_out, s, loss_sum);
}

void wp_chunk_backward(const WpConfig *c, const WpChunk *k, const float *params,
                       const int *tokens, const int *targets,
                       const float *stash, int recompute, const float *dx_out, float *dx_in,
                       float *dparams, float loss_scale, WpScratch *s) {
    check_call(c, k, s);
    size_t T = (size_t)c->mbs * c->seq, H = (size_t)c->hidden;
    float *st = (float *)stash;   /* read only in backward */
    if (recompute) {
        /* the forward again, into the scratch's stash; a non-last chunk's output goes to dres,
         * which is set below */
        memcpy(s->restash, stash, T * H * sizeof(float));
        chunk_forward_from_stash(c, k, params, targets, s->restash, s->dres, s, NULL);
        st = s->restash;
    }
    float *pp = (float *)params;
    size_t lstash = wp_layer_stash_floats(c);
    if (k->last) {
        float *xf = k->nlayers ? st + (size_t)k->nlayers * lstash : st;
        float *rstdf = xf + T * H, *probs = rstdf + T;
        float *wf = final_norm(c, k, pp);
        crossentropy_backward(s->logits, probs, targets, (int)T, c->vocab, loss_scale);
        rmsnorm_recompute(s->xn, xf, wf, rstdf, (int)T, (int)H);
        matmul_backward(s->dxn, head_weight(c, k, dparams), s->logits, s->xn,
                        head_weight(c, k, pp), (int)T, (int)H, c->vocab, 0);
        memset(s->dres, 0, T * H * sizeof(float));
        rmsnorm_backward(s->dres, final_norm(c, k, dparams), s->dxn, xf, wf, rstdf, (int)T, (int)H);
    } else {
        memcpy(s->dres, dx_out, T * H * sizeof(float));
    }
    float *lp = first_layer(c, k, pp), *dlp = first_layer(c, k, dparams);
    for (int i = k->nlayers - 1; i >= 0; i--) {
        LayerParams p = layer_params(c, lp + (size_t)i * wp_layer_nparams(c));
        LayerParams dp = layer_params(c, dlp + (size_t)i * wp_layer_nparams(c));
        LayerStash ls = layer_stash(c, st + (size_t)i * lstash);
        layer_backward(c, &p, &dp, &ls, s);
        progress(s);
    }
    if (k->first) embedding_backward(dparams, s->dres, tokens, (int)T, (int)H);
    else memcpy(dx_in, s->dres, T * H * sizeof(float));
}
