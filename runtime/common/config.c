/* Sizes of the LLaMA-style model, shared by the generator and the runtime: parameter counts and
 * tensor layout of a chunk, its forward FLOPs, and the memory of its forward and backward (stash and workspace). No BLAS or OpenMP here: the
 * generator links this file too. model.c takes its stash layout and its workspace sizes from
 * here. */
#include <stdio.h>
#include <string.h>
#include "common/config.h"

size_t wp_layer_nparams(const WpConfig *c) {
    size_t H = (size_t)c->hidden, F = (size_t)c->ffn;
    size_t q = (size_t)c->heads * c->head_dim, kv = (size_t)c->kv_heads * c->head_dim;
    /* two norms; q, k, v, o projections; gate, up, down */
    return 2 * H + q * H + 2 * kv * H + H * q + 3 * F * H;
}

WpLayerOffsets wp_layer_offsets(const WpConfig *c) {
    size_t H = (size_t)c->hidden, F = (size_t)c->ffn, q = (size_t)c->heads * c->head_dim;
    size_t width = (size_t)(c->heads + 2 * c->kv_heads) * c->head_dim;
    WpLayerOffsets o;
    o.ln1 = 0;
    o.wqkv = o.ln1 + H;
    o.wo = o.wqkv + width * H;
    o.ln2 = o.wo + H * q;
    o.wgu = o.ln2 + H;
    o.wdown = o.wgu + 2 * F * H;
    return o;
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
        /* Tied: the embedding where the chunk also holds it, else its mirror (wp_chunk_has_head) */
        if (wp_chunk_has_head(c, k)) ADD(V, H, 0, "lm_head.weight");
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
    k.nparams = n;
    if (last) k.nparams += H + (wp_chunk_has_head(c, &k) ? V * H : 0);
    return k;
}

/* What one layer keeps for backward (model.c, "stash layout"): its input x, the attention's
 * q/k (after RoPE), v, output and per-row log-sum-exp, the residual after attention, the two
 * norms' 1/rms, and the MLP's gate and up pre-activations. Normalised inputs and silu(g)*u are
 * recomputed in backward: they cost one pass over memory each. gu [T, 2F] stays in a layer's
 * stash without recompute, a stash choice: such a run has chosen memory for speed (recomputing
 * gate/up per tile would add a third of the MLP's forward products to every backward), and the
 * split backward's W half, which gets no weights, reads it. With recompute the workspace's
 * one-layer stash holds one MLP tile of it (wp_layer_restash_floats), last in the part so that
 * the cut is its end, and begins after x, first, which the kept input replaces. */
WpLayerStashLayout wp_layer_stash_layout(const WpConfig *c) {
    size_t T = wp_rank_tokens(c), H = (size_t)c->hidden, F = (size_t)c->ffn;
    size_t q = (size_t)c->heads * c->head_dim, kv = (size_t)c->kv_heads * c->head_dim;
    WpLayerStashLayout s;
    s.x = 0;                              /* layer input */
    s.rstd1 = s.x + T * H;                /* rstd of input_layernorm */
    s.qkv = s.rstd1 + T;                  /* q, k (rotated), v */
    s.att = s.qkv + T * (q + 2 * kv);     /* attention output, before o_proj */
    s.lse = s.att + T * q;                /* log-sum-exp per (sequence, head, row) */
    s.x2 = s.lse + T * c->heads;   /* x + attention: the MLP's input */
    s.rstd2 = s.x2 + T * H;               /* rstd of post_attention_layernorm */
    s.gu = s.rstd2 + T;                   /* gate and up pre-activations */
    s.end = s.gu + 2 * T * F;
    return s;
}

/* One layer's stash as activation and statistic elements (rstd1, the attention's lse and rstd2
 * are statistics). */
static void layer_stash_count(const WpConfig *c, size_t *act, size_t *stat) {
    WpLayerStashLayout l = wp_layer_stash_layout(c);
    *stat = (l.qkv - l.rstd1) + (l.x2 - l.lse) + (l.gu - l.rstd2);
    *act = l.end - *stat;
}

size_t wp_layer_stash_floats(const WpConfig *c) {
    return wp_layer_stash_layout(c).end;
}

size_t wp_layer_stash_bytes(const WpConfig *c, WpDtype act_dtype) {
    size_t act, stat;
    layer_stash_count(c, &act, &stat);
    return act * wp_dtype_bytes(act_dtype) + stat * sizeof(float);
}

/* The default keeps a tile's [tile, 2F] gate/up and its gradient modest (llama2-7b: 344 MiB each
 * in fp32, 172 MiB in bf16) while each MLP product keeps thousands of rows, deep enough for
 * full-speed BLAS and tensor-core tiles (generator/cost models the loss below that). */
int wp_mlp_tile_tokens(const WpConfig *c) {
    size_t T = wp_rank_tokens(c);
    size_t t = c->mlp_tile > 0 ? (size_t)c->mlp_tile : WP_MLP_TILE_DEFAULT;
    if (t > T) t = T;
    return (int)t;
}

/* What one layer's recompute stash drops of its part, all activations: x [T*H] (the kept input
 * is read in its place) and gu's rows beyond one tile. */
static size_t restash_cut(const WpConfig *c) {
    size_t T = wp_rank_tokens(c), H = (size_t)c->hidden, F = (size_t)c->ffn;
    return T * H + (T - (size_t)wp_mlp_tile_tokens(c)) * 2 * F;
}

size_t wp_layer_restash_floats(const WpConfig *c) {
    return wp_layer_stash_floats(c) - restash_cut(c);
}

size_t wp_layer_restash_bytes(const WpConfig *c, WpDtype act_dtype) {
    return wp_layer_stash_bytes(c, act_dtype) - restash_cut(c) * wp_dtype_bytes(act_dtype);
}

/* The stash of a chunk as activation and statistic elements. Each layer's part starts with its
 * input: layer 0's is the chunk's input, layer i's the output of layer i - 1. The last chunk
 * adds the final norm's input (the last layer's output) and rstd, and each token's log-sum-exp
 * of the logits: with it, backward recomputes the softmax one block of tokens at a time.
 * With recompute a layer's part is its input alone (Megatron's full recomputation by layer:
 * backward recomputes one layer's part from it into the workspace's WP_WS_RESTASH just before
 * that layer's backward), and the last chunk keeps the head's part as it is, so the head's
 * backward needs no recomputing. A chunk without layers stashes its input either way. */
static void stash_count(const WpConfig *c, const WpChunk *k, int recompute, size_t *act, size_t *stat) {
    size_t T = wp_rank_tokens(c), H = (size_t)c->hidden;
    *act = T * H;   /* the chunk's input (the embedding's output on the first chunk) */
    *stat = 0;
    if (k->nlayers > 0) {
        size_t lact = T * H, lstat = 0;
        if (!recompute) layer_stash_count(c, &lact, &lstat);
        *act = (size_t)k->nlayers * lact;
        *stat = (size_t)k->nlayers * lstat;
        if (k->last) *act += T * H;   /* the last layer's output */
    }
    if (k->last) *stat += T + T;      /* final norm's rstd, log-sum-exp of the logits */
}

WpChunkStashLayout wp_chunk_stash_layout(const WpConfig *c, const WpChunk *k, int recompute) {
    size_t T = wp_rank_tokens(c), H = (size_t)c->hidden;
    WpChunkStashLayout s;
    s.layer = recompute ? T * H : wp_layer_stash_layout(c).end;
    s.xf = (size_t)k->nlayers * s.layer;
    s.rstdf = s.xf + T * H;
    s.lse = s.rstdf + T;
    s.end = wp_stash_floats(c, k, recompute);
    return s;
}

size_t wp_stash_floats(const WpConfig *c, const WpChunk *k, int recompute) {
    size_t act, stat;
    stash_count(c, k, recompute, &act, &stat);
    return act + stat;
}

size_t wp_stash_bytes(const WpConfig *c, const WpChunk *k, int recompute, WpDtype act_dtype) {
    size_t act, stat;
    stash_count(c, k, recompute, &act, &stat);
    return act * wp_dtype_bytes(act_dtype) + stat * sizeof(float);
}

size_t wp_stash_host_bytes(const WpConfig *c, const WpChunk *k, int recompute, WpDtype act_dtype) {
    return recompute == WP_RECOMPUTE_OFFLOAD ? wp_stash_bytes(c, k, recompute, act_dtype) : 0;
}

WpLayerKeepLayout wp_layer_keep_layout(const WpConfig *c) {
    size_t T = wp_rank_tokens(c), H = (size_t)c->hidden, F = (size_t)c->ffn;
    WpLayerKeepLayout l;
    l.dy = 0;
    l.dh = l.dy + T * H;
    l.dx2 = l.dh + T * F;
    l.ln1 = l.dx2 + T * H;
    l.ln2 = l.ln1 + H;
    l.dln1 = l.ln2 + H;
    l.dln2 = l.dln1 + H;
    l.end = l.dln2 + H;
    return l;
}

WpKeepLayout wp_keep_layout(const WpConfig *c, const WpChunk *k, int recompute) {
    size_t T = wp_rank_tokens(c), H = (size_t)c->hidden, V = (size_t)c->vocab;
    WpKeepLayout l;
    l.restash = 0;
    l.layers = l.restash + (recompute ? wp_stash_floats(c, k, 0) : 0);
    l.lnf = l.layers + (size_t)k->nlayers * wp_layer_keep_layout(c).end;
    l.dlnf = l.lnf + (k->last ? H : 0);
    l.whead = l.dlnf + (k->last ? H : 0);
    l.dx = l.whead + (k->last ? V * H : 0);
    l.end = l.dx + (k->first ? T * H : 0);
    return l;
}

size_t wp_keep_floats(const WpConfig *c, const WpChunk *k, int recompute) {
    return wp_keep_layout(c, k, recompute).end;
}

size_t wp_keep_bytes(const WpConfig *c, const WpChunk *k, int recompute, WpDtype act_dtype) {
    WpKeepLayout l = wp_keep_layout(c, k, recompute);
    /* ln1, ln2, dln1, dln2 per layer; lnf, dlnf on the last chunk */
    size_t norms = (size_t)k->nlayers * 4 * (size_t)c->hidden + (k->last ? 2 * (size_t)c->hidden : 0);
    size_t acts = l.end - l.layers - norms;
    return (recompute ? wp_stash_bytes(c, k, 0, act_dtype) : 0) + acts * wp_dtype_bytes(act_dtype) + norms * sizeof(float);
}

/* A block's logits are the largest temporary of the LM head: 32 MiB of them (or 64 tokens, for
 * vocabularies over 131072) keep the block small beside the activations (one H1024 layer's stash
 * of a 16 x 4k micro-batch is 2.9 GiB in fp32) while the head's products keep at least 64 rows, deep
 * enough for full-speed BLAS and tensor-core tiles; whole multiples of 64 tokens for the same
 * reason. A 16 x 4k micro-batch at vocabulary 32000 had 7.8 GiB of logits at once; now 31 MiB. */
#define CE_BLOCK_BYTES ((size_t)32 << 20)

int wp_ce_block_tokens(const WpConfig *c) {
    size_t T = wp_rank_tokens(c), V = c->vocab > 0 ? (size_t)c->vocab : 1;
    size_t b = CE_BLOCK_BYTES / (V * sizeof(float)) / 64 * 64;
    if (b < 64) b = 64;
    if (b > T) b = T;
    return (int)b;
}

size_t wp_workspace_part_floats(const WpConfig *c, const WpChunk *k, int recompute, WpWorkspacePart part) {
    size_t T = wp_rank_tokens(c), H = (size_t)c->hidden, F = (size_t)c->ffn;
    size_t tile = (size_t)wp_mlp_tile_tokens(c);
    size_t qd = (size_t)c->heads * c->head_dim;
    size_t width = (size_t)(c->heads + 2 * c->kv_heads) * c->head_dim;
    int layers = k->nlayers > 0, head = k->last;
    switch (part) {
    case WP_WS_XN:      return layers || head ? T * H : 0;
    case WP_WS_H:       return layers ? tile * F : 0;
    case WP_WS_DH:      return layers ? tile * F : 0;
    case WP_WS_DGU:     return layers ? 2 * tile * F : 0;
    case WP_WS_DXN:     return layers || head ? T * H : 0;
    /* the backward carries dres in the gradient it writes, or (first chunk) in the one it was
     * given (cpu/model.h, wp_chunk_backward's dx_in): its own only on a chunk holding both ends */
    case WP_WS_DRES:    return k->first && k->last ? T * H : 0;
    case WP_WS_DATT:    return layers ? T * qd : 0;
    case WP_WS_DQKV:    return layers ? T * width : 0;
    case WP_WS_ROPE:    return layers ? 2 * ((size_t)c->seq / wp_cp(c)) * (c->head_dim / 2) : 0;   /* a rank's positions */
    case WP_WS_LOGITS:  return head ? (size_t)wp_ce_block_tokens(c) * c->vocab : 0;
    case WP_WS_RESTASH: return recompute && layers ? wp_layer_restash_floats(c) : 0;
    /* offload's staging (model.c, "offload"): two layer inputs, the one a layer computes from
     * and the one copied out (forward) or in (backward) meanwhile, and the head's part */
    case WP_WS_OFFLOAD: return recompute == WP_RECOMPUTE_OFFLOAD ? 2 * T * H + (head ? T * H + 2 * T : 0) : 0;
    case WP_WS_KV_RING: return layers && wp_cp(c) > 1 ? 2 * 4 * T * ((size_t)c->kv_heads * c->head_dim) : 0;
    case WP_WS_NPARTS:  break;
    }
    return 0;
}

/* The parts that live in another part's storage (the rest have their own), each in that of a
 * part whose life never overlaps its own in any call of the CPU and CUDA models (model.c, model_cuda.cu; both run a chunk's
 * operations in one order, the GPU's on one stream). The one table of the sharing: the CPU
 * scratch, the CUDA workspace (layout_cuda.h) and the planner's sums all follow it.
 *   dxn in xn's: a norm's output xn is read last by the product whose input gradient dxn is
 *     (a tile's gate/up, qkv's, a block's LM head), which computes its weight gradient from xn
 *     before it writes dxn over it (matmul.c, kernels.h); the MLP's and the head's tile by tile
 *     over their own rows. The split backward's B half reads no xn, its W half no dxn.
 *   datt in xn's: datt [T, heads*hd] is written by o_proj's backward, after the post-attention
 *     norm's backward has read dxn for the last time, and read by attention's backward, before
 *     the input norm's output xn is recomputed for qkv's product (the B half likewise; the W
 *     half and the forward have no datt).
 *   dgu in dqkv's: dgu [tile, 2F] lives inside the MLP's tile loop, dqkv [T, (heads+2kv)*hd] from
 *     attention's backward to qkv's product, which follows the loop (the W half has no dqkv).
 *   logits in dqkv's: the LM head's block runs before (backward) or after (forward) every layer
 *     of its chunk, never inside one.
 * The recompute stash keeps its own allocation (model.c: a run without recompute never touches
 * it), so it shares nothing. */
static const struct { WpWorkspacePart part, home; } ws_home[] = {
    { WP_WS_DXN, WP_WS_XN }, { WP_WS_DATT, WP_WS_XN }, { WP_WS_DGU, WP_WS_DQKV }, { WP_WS_LOGITS, WP_WS_DQKV },
};

/* A part not in the table (a part added later included) has storage of its own. */
WpWorkspacePart wp_workspace_part_home(WpWorkspacePart part) {
    for (size_t i = 0; i < sizeof ws_home / sizeof ws_home[0]; i++)
        if (ws_home[i].part == part) return ws_home[i].home;
    return part;
}

/* A slot holds its part and the parts that live in it (ws_home): the largest of them, counted as
 * elements (bytes = 0) or as bytes at act_dtype. */
static size_t slot_size(const WpConfig *c, const WpChunk *k, int recompute, WpWorkspacePart part, int bytes, WpDtype act_dtype) {
    size_t most = 0;
    if (wp_workspace_part_home(part) != part) return 0;
    for (int p = 0; p < WP_WS_NPARTS; p++) {
        if (wp_workspace_part_home((WpWorkspacePart)p) != part) continue;
        size_t n = bytes ? wp_workspace_part_bytes(c, k, recompute, (WpWorkspacePart)p, act_dtype)
                         : wp_workspace_part_floats(c, k, recompute, (WpWorkspacePart)p);
        if (n > most) most = n;
    }
    return most;
}

size_t wp_workspace_slot_floats(const WpConfig *c, const WpChunk *k, int recompute, WpWorkspacePart part) {
    return slot_size(c, k, recompute, part, 0, WP_FP32);
}

size_t wp_workspace_slot_bytes(const WpConfig *c, const WpChunk *k, int recompute, WpWorkspacePart part, WpDtype act_dtype) {
    return slot_size(c, k, recompute, part, 1, act_dtype);
}

size_t wp_workspace_floats(const WpConfig *c, const WpChunk *k, int recompute) {
    size_t n = 0;
    for (int p = 0; p < WP_WS_NPARTS; p++) n += wp_workspace_slot_floats(c, k, recompute, (WpWorkspacePart)p);
    return n;
}

/* Activations and their gradients at the run's precision; RoPE tables and logits fp32 (the
 * cross-entropy's softmax works on fp32 logits, model.c); the recompute stash as one layer's
 * stash with one tile of gu. */
size_t wp_workspace_part_bytes(const WpConfig *c, const WpChunk *k, int recompute, WpWorkspacePart part, WpDtype act_dtype) {
    size_t e = wp_workspace_part_floats(c, k, recompute, part);
    size_t T = wp_rank_tokens(c);
    int head = k->last;   /* the head's rstdf and lse: statistics, fp32 */
    if (part == WP_WS_RESTASH) return e ? wp_layer_restash_bytes(c, act_dtype) : 0;
    if (part == WP_WS_OFFLOAD) return e ? (e - (head ? 2 * T : 0)) * wp_dtype_bytes(act_dtype) + (head ? 2 * T : 0) * sizeof(float) : 0;
    if (part == WP_WS_ROPE || part == WP_WS_LOGITS) return e * sizeof(float);
    return e * wp_dtype_bytes(act_dtype);
}

size_t wp_workspace_bytes(const WpConfig *c, const WpChunk *k, int recompute, WpDtype act_dtype) {
    size_t n = 0;
    for (int p = 0; p < WP_WS_NPARTS; p++) n += wp_workspace_slot_bytes(c, k, recompute, (WpWorkspacePart)p, act_dtype);
    return n;
}

/* A tied chunk holding both ends has no head tensor of its own: its head is the embedding. */
static int grad_one_segment(const WpConfig *c, const WpChunk *k) {
    return k->first && k->last && !wp_chunk_has_head(c, k);
}

int wp_grad_nsegments(const WpConfig *c, const WpChunk *k) {
    return grad_one_segment(c, k) ? 1 : k->last + k->nlayers + k->first;
}

WpGradSegment wp_grad_segment(const WpConfig *c, const WpChunk *k, int i) {
    size_t V = (size_t)c->vocab, H = (size_t)c->hidden;
    size_t emb = k->first ? V * H : 0, head = H + (wp_chunk_has_head(c, k) ? V * H : 0);
    WpGradSegment g = { 0, k->nparams };
    if (grad_one_segment(c, k)) return g;
    if (k->last && i == 0) { g.off = k->nparams - head; g.n = head; return g; }
    i -= k->last;
    if (i < k->nlayers) {   /* from the last layer */
        g.n = wp_layer_nparams(c);
        g.off = emb + (size_t)(k->nlayers - 1 - i) * g.n;
        return g;
    }
    g.n = emb;   /* the embedding */
    return g;
}

size_t wp_grad_stage_floats(const WpConfig *c, const WpChunk *k) {
    size_t most = 0;
    for (int i = 0; i < wp_grad_nsegments(c, k); i++)
        if (wp_grad_segment(c, k, i).n > most) most = wp_grad_segment(c, k, i).n;
    return most;
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
