/* Sizes of the LLaMA-style model, shared by the generator and the runtime: parameter counts and
 * tensor layout of a chunk, the floats its forward keeps for backward, and its forward FLOPs.
 * No BLAS or OpenMP here: the generator links this file too. The stash layout below is the one
 * runtime/model.c uses; the two must change together. */
#include <stdio.h>
#include <string.h>
#include "common/config.h"

size_t wp_layer_nparams(const WpConfig *c) {
    size_t H = (size_t)c->hidden, F = (size_t)c->ffn;
    size_t q = (size_t)c->heads * c->head_dim, kv = (size_t)c->kv_heads * c->head_dim;
    /* two norms; q, k, v, o projections; gate, up, down */
    return 2 * H + q * H + 2 * kv * H + H * q + 3 * F * H;
}

int wp_chunk_tensors(const WpConfig *c, const WpChunk *k, WpTensor *out) {
    size_t H = (size_t)c->hidden, F = (size_t)c->ffn, V = (size_t)c->vocab;
    size_t q = (size_t)c->heads * c->head_dim, kv = (size_t)c->kv_heads * c->head_dim;
    size_t off = 0;
    int n = 0;
#define ADD(rows_, cols_, nodecay_, ...) do { \
        if (out) { \
            WpTensor *t_ = &out[n]; \
            snprintf(t_->name, sizeof t_->name, __VA_ARGS__); \
            t_->offset = off; t_->rows = (rows_); t_->cols = (cols_); t_->no_decay = (nodecay_); \
        } \
        off += (size_t)(rows_) * (cols_); n++; \
    } while (0)
    if (k->first) ADD(V, H, 0, "model.embed_tokens.weight");
    for (int i = 0; i < k->nlayers; i++) {
        int l = k->layer0 + i;
        ADD(H, 1, 1, "model.layers.%d.input_layernorm.weight", l);
        ADD(q, H, 0, "model.layers.%d.self_attn.q_proj.weight", l);
        ADD(kv, H, 0, "model.layers.%d.self_attn.k_proj.weight", l);
        ADD(kv, H, 0, "model.layers.%d.self_attn.v_proj.weight", l);
        ADD(H, q, 0, "model.layers.%d.self_attn.o_proj.weight", l);
        ADD(H, 1, 1, "model.layers.%d.post_attention_layernorm.weight", l);
        ADD(F, H, 0, "model.layers.%d.mlp.gate_proj.weight", l);
        ADD(F, H, 0, "model.layers.%d.mlp.up_proj.weight", l);
        ADD(H, F, 0, "model.layers.%d.mlp.down_proj.weight", l);
    }
    if (k->last) {
        ADD(H, 1, 1, "model.norm.weight");
        /* Tied: the LM head is the embedding, which only a chunk that is also first holds. A tied
         * model therefore has to run as one chunk; the generator rejects anything else. */
        if (!c->tied) ADD(V, H, 0, "lm_head.weight");
    }
#undef ADD
    return n;
}

WpChunk wp_chunk_make(const WpConfig *c, int index, int layer0, int nlayers, int first, int last) {
    WpChunk k = { .index = index, .layer0 = layer0, .nlayers = nlayers,
                  .first = first, .last = last, .nparams = 0 };
    size_t n = (size_t)nlayers * wp_layer_nparams(c);
    size_t H = (size_t)c->hidden, V = (size_t)c->vocab;
    if (first) n += V * H;
    if (last) n += H + (c->tied ? 0 : V * H);
    k.nparams = n;
    return k;
}

/* What one layer keeps for backward (model.c, "stash layout"): its input x, the attention's
 * q/k (after RoPE), v, output and per-row log-sum-exp, the residual after attention, the two
 * norms' 1/rms, and the MLP's gate and up pre-activations. Normalised inputs and silu(g)*u are
 * recomputed in backward: they cost one pass over memory each. */
size_t wp_layer_stash_floats(const WpConfig *c) {
    size_t T = (size_t)c->mbs * c->seq, H = (size_t)c->hidden, F = (size_t)c->ffn;
    size_t q = (size_t)c->heads * c->head_dim, kv = (size_t)c->kv_heads * c->head_dim;
    return T * H            /* x: layer input */
         + T                /* rstd of input_layernorm */
         + T * q + 2 * T * kv   /* q, k (rotated), v */
         + T * q            /* attention output, before o_proj */
         + (size_t)c->mbs * c->heads * c->seq   /* log-sum-exp per (sequence, head, row) */
         + T * H            /* x + attention: the MLP's residual input */
         + T                /* rstd of post_attention_layernorm */
         + 2 * T * F;       /* gate and up pre-activations */
}

size_t wp_stash_floats(const WpConfig *c, const WpChunk *k, int recompute) {
    size_t T = (size_t)c->mbs * c->seq, H = (size_t)c->hidden, V = (size_t)c->vocab;
    if (recompute || k->nlayers == 0) {
        /* the chunk's input (the embedding's output on the first chunk) */
        size_t n = T * H;
        if (!recompute && k->last) n += T + T * V;   /* final norm's rstd, softmax (below) */
        return n;
    }
    /* Each layer's part starts with its input: layer 0's is the chunk's input, layer i's the
     * output of layer i - 1. */
    size_t n = (size_t)k->nlayers * wp_layer_stash_floats(c);
    if (k->last)
        n += T * H         /* output of the last layer: the final norm's input */
           + T             /* its rstd */
           + T * V;        /* softmax of the logits: cross-entropy's backward */
    return n;
}

double wp_chunk_fwd_flops(const WpConfig *c, const WpChunk *k) {
    double T = (double)c->mbs * c->seq, H = c->hidden, F = c->ffn, V = c->vocab;
    double q = (double)c->heads * c->head_dim, kv = (double)c->kv_heads * c->head_dim;
    double S = c->seq;
    double mm = 2 * T * H * (q + 2 * kv) + 2 * T * q * H + 3 * 2 * T * H * F;
    /* causal attention: S(S+1)/2 (query, key) pairs per sequence and head, 2*hd FLOPs each for
     * q.k and again for p*v */
    double attn = (double)c->mbs * c->heads * (S * (S + 1) / 2) * 4.0 * c->head_dim;
    double f = k->nlayers * (mm + attn);
    if (k->last) f += 2 * T * H * V;
    return f;
}
