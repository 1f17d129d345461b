/* The model and training shape shared by the generator and the runtime: one definition of the
 * LLaMA-style architecture's sizes, so that the plan's byte counts and the runtime's buffers agree. */
#ifndef WP_CONFIG_H
#define WP_CONFIG_H

#include <stddef.h>
#include "common/precision.h"

/* Llama 3.1's scaling of RoPE's frequencies (config.json's rope_scaling with rope_type "llama3";
 * rope_table.c applies it): wavelengths longer than original_max_position_embeddings /
 * low_freq_factor are stretched by factor, those shorter than original / high_freq_factor kept,
 * and those between interpolated. factor 0: unscaled RoPE. */
typedef struct WpRopeScaling {
    float factor;
    float low_freq_factor, high_freq_factor;
    int original_max_position_embeddings;
} WpRopeScaling;

static inline int wp_rope_scaling_equal(const WpRopeScaling *a, const WpRopeScaling *b) {
    return a->factor == b->factor && a->low_freq_factor == b->low_freq_factor &&
           a->high_freq_factor == b->high_freq_factor &&
           a->original_max_position_embeddings == b->original_max_position_embeddings;
}

/* The special-token ids of the config.json a model was read from (bos_token_id, eos_token_id,
 * pad_token_id): no weight depends on them, but how the model is used does (where generate()
 * starts and stops), so the config.json a checkpoint writes keeps them (modelcfg.c). A count of 0:
 * absent or null; eos_token_id may be a list (Llama 3's), eos_list then set. */
#define WP_MAX_EOS_IDS 8
typedef struct WpTokenIds {
    int nbos, bos;
    int npad, pad;
    int neos, eos[WP_MAX_EOS_IDS], eos_list;
} WpTokenIds;

typedef struct WpConfig {
    int hidden;        /* H */
    int layers;        /* L */
    int heads;         /* query heads */
    int kv_heads;      /* key/value heads (grouped-query attention); divides heads */
    int head_dim;      /* per head; hidden / heads unless config.json gives it (heads * head_dim may
                          differ from hidden: q and o are [heads*head_dim, H] and [H, heads*head_dim]) */
    int ffn;           /* intermediate_size */
    int vocab;
    float eps;         /* rms_norm_eps */
    float rope_theta;
    WpRopeScaling rope_scaling;
    int tied;          /* tie_word_embeddings */
    int seq;           /* S: tokens per sequence */
    int mbs;           /* G: sequences per micro-batch */
    int mlp_tile;      /* tokens per tile of the MLP (wp_mlp_tile_tokens); 0: its default. A plan
                          setting, not the model's: plan.json's "mlp_tile_tokens", wpgen's --mlp-tile */
    WpTokenIds ids;    /* carried into the config.json written, no part of the shape (model_same) */
    int cp;            /* context parallelism: a group of cp ranks shares each micro-batch, a rank
                          holding seq / cp of each sequence's tokens (docs/context-parallel.md);
                          0 or 1: none. Every token-dependent size below is a rank's share. */
} WpConfig;

/* The context-parallel group size (1 where none), and a rank's tokens of one micro-batch:
 * mbs * seq / cp. Every size of config.c that grows with the tokens starts from it. */
static inline int wp_cp(const WpConfig *c) { return c->cp > 1 ? c->cp : 1; }
static inline size_t wp_rank_tokens(const WpConfig *c) { return (size_t)c->mbs * c->seq / (size_t)wp_cp(c); }

/* A chunk is layers [layer0, layer0 + nlayers); the first chunk also holds the embedding, the
 * last the final norm and the LM head. Its parameters are one contiguous float array in the
 * order of wp_chunk_tensors(). */
typedef struct WpChunk {
    int index;
    int layer0, nlayers;
    int first, last;
    size_t nparams;
} WpChunk;

/* Whether the chunk holds an LM head tensor of its own ("lm_head.weight", at the end of its
 * parameters): every last chunk of an untied model, and of a tied model the last chunk when it
 * is not also the first. A tied model's head is then a MIRROR of the embedding: initialised from
 * it, given the same summed gradient by the plan's TIE (ir/plan.h), so AdamW keeps the two equal
 * bit for bit; checkpoints keep only the embedding. A tied one-chunk model uses the embedding. */
static inline int wp_chunk_has_head(const WpConfig *c, const WpChunk *k) {
    return k->last && (!c->tied || !k->first);
}
static inline int wp_chunk_mirrors_embedding(const WpConfig *c, const WpChunk *k) {
    return c->tied && k->last && !k->first;
}

/* Parameters of one decoder layer. */
size_t wp_layer_nparams(const WpConfig *c);
/* Where a layer's tensors begin in its parameters, in elements (wp_chunk_tensors' order; q, k, v
 * and gate, up are adjacent, so each group is one matrix): the CPU and CUDA models point into a
 * layer with these. */
typedef struct WpLayerOffsets { size_t ln1, wqkv, wo, ln2, wgu, wdown; } WpLayerOffsets;
WpLayerOffsets wp_layer_offsets(const WpConfig *c);
/* Fills a chunk's description; nparams included. */
WpChunk wp_chunk_make(const WpConfig *c, int index, int layer0, int nlayers, int first, int last);

/* One tensor of a chunk, named as Hugging Face's LlamaForCausalLM names it. */
typedef struct WpTensor {
    char name[80];
    size_t offset;      /* in floats, from the start of the chunk's parameters */
    size_t rows, cols;  /* cols == 1 for vectors (norm weights) */
    int no_decay;       /* norms: AdamW's weight decay is not applied */
} WpTensor;

/* Writes the chunk's tensors in order to out (if not NULL), returns how many there are. */
int wp_chunk_tensors(const WpConfig *c, const WpChunk *k, WpTensor *out);

/* ---- Memory of a chunk's forward and backward. The one place these sizes are computed: the
 * runtime's buffers (runtime/cpu/model.c) and the planner's peak-memory estimates both come from
 * here. Counted in elements ("floats": the CPU keeps every element in an fp32 container); the
 * _bytes versions count each element at the size a run in the given precision stores it (bf16
 * activations, fp32 statistics; common/precision.h). */

/* Where one layer's part of the stash keeps what (model.c, "stash layout"), in elements from the
 * part's start. rstd1, lse, rstd2 are statistics (fp32 in every precision); the rest are
 * activations. end: the part's size. */
typedef struct WpLayerStashLayout {
    size_t x, rstd1, qkv, att, lse, x2, rstd2, gu, end;
} WpLayerStashLayout;
WpLayerStashLayout wp_layer_stash_layout(const WpConfig *c);
/* One layer's part, in elements and in bytes at activation format act (statistics fp32). */
size_t wp_layer_stash_floats(const WpConfig *c);
size_t wp_layer_stash_bytes(const WpConfig *c, WpDtype act);
/* The recompute stash of the workspace (WP_WS_RESTASH): one layer's part from rstd1 on (its x is
 * the kept input, in the chunk's stash), with its gu cut to one MLP tile [wp_mlp_tile_tokens, 2F]
 * (backward recomputes gate and up tile by tile). */
size_t wp_layer_restash_floats(const WpConfig *c);
size_t wp_layer_restash_bytes(const WpConfig *c, WpDtype act);

/* Tokens per tile of the MLP: gate/up, SwiGLU and down products and their backward run on this
 * many of the micro-batch's T = G*S tokens at a time (the last tile shorter), so that no [T, F]
 * buffer exists (model.c, "the MLP"). c->mlp_tile when set (capped at T), else
 * WP_MLP_TILE_DEFAULT tokens or T when smaller. WP_MLP_TILE_MIN, MAX: --mlp-tile's range. */
#define WP_MLP_TILE_DEFAULT 4096
#define WP_MLP_TILE_MIN 1
#define WP_MLP_TILE_MAX (1 << 24)
int wp_mlp_tile_tokens(const WpConfig *c);

/* How a run keeps what backward needs: the `recompute` argument of the functions below (and
 * Plan.recompute, WpPlanDesc.recompute, WpRank.recompute) is one of these. Every mode but the
 * first is recompute (a true value), so a test of recompute alone reads them all alike.
 *   WP_KEEP_ALL            every layer's activations, in the stash
 *   WP_RECOMPUTE           each layer's input only (--recompute)
 *   WP_RECOMPUTE_OFFLOAD   the same stash, kept in host memory (--offload-activations): each
 *                          layer's input copied out after that layer's forward and back before
 *                          its backward, through the workspace's staging (WP_WS_OFFLOAD), the
 *                          head's part likewise; device memory holds no stash */
enum { WP_KEEP_ALL = 0, WP_RECOMPUTE = 1, WP_RECOMPUTE_OFFLOAD = 2 };

/* Elements kept from the forward of one chunk on one micro-batch for its backward pass. Without
 * recompute, every layer's part (WpLayerStashLayout); with recompute, each layer's input [T*H]
 * only (backward recomputes the rest of one layer's part at a time into the workspace). Either
 * way the last chunk adds the head's part: xf [T*H] (the last layer's output), rstdf [T], lse [T]
 * (the logits' log-sum-exp per token). A chunk without layers keeps its input. */
size_t wp_stash_floats(const WpConfig *c, const WpChunk *k, int recompute);
/* The same stash in bytes when activations are stored as act (statistics stay fp32). */
size_t wp_stash_bytes(const WpConfig *c, const WpChunk *k, int recompute, WpDtype act);
/* Where the parts of a chunk's stash begin, in elements (the CPU's fp32 containers; the CUDA
 * model's byte layout is layout_cuda.h's wc_chunk_stash, which follows this one): layer i's part
 * (its input first) at i * layer, the head's xf, rstdf, lse on the last chunk; end = wp_stash_floats. */
typedef struct WpChunkStashLayout {
    size_t layer, xf, rstdf, lse, end;
} WpChunkStashLayout;
WpChunkStashLayout wp_chunk_stash_layout(const WpConfig *c, const WpChunk *k, int recompute);
/* Bytes of that stash kept in host memory instead of the device's: all of it with
 * WP_RECOMPUTE_OFFLOAD, else 0. */
size_t wp_stash_host_bytes(const WpConfig *c, const WpChunk *k, int recompute, WpDtype act);

/* What the split backward keeps between its two halves (model.h, wp_chunk_backward_input and
 * wp_chunk_backward_weights, which say what BWD_B computes into each part): beside the stash, which
 * stays until BWD_W and whose qkv part BWD_B overwrites with qkv's output gradient, BWD_B keeps the
 * output gradients of the other weight products, the norms' weights (BWD_W gets no weights and
 * recomputes the normalised inputs) and the norms' weight gradients, which BWD_B sums over the
 * tokens (BWD_W adds them to the chunk's gradient). Per layer, in elements from the layer's part:
 * dy = dL/dy [T*H] (down_proj's output gradient), dh [T*F] (down_proj's input gradient, before
 * SwiGLU's backward), dx2 = dL/dx2 [T*H] (o_proj's output gradient), ln1, ln2 [H] (the norms'
 * weights), dln1, dln2 [H] (their gradients for this micro-batch). The split is not tiled in
 * memory: dh stays [T*F], and the stash W reads keeps gu [T*2F] per layer (with recompute, the
 * restash part below rebuilds it whole). BWD_W gets no weights, so it cannot recompute gate/up
 * or dh tile by tile as the whole backward does. Keeping copies of Wgu and Wdown [3FH] per layer
 * instead, as the head's whead, would let it, and is smaller only once T > 3H (llama2-7b: above
 * 12,288 tokens); not done. */
typedef struct WpLayerKeepLayout {
    size_t dy, dh, dx2, ln1, ln2, dln1, dln2, end;
} WpLayerKeepLayout;
WpLayerKeepLayout wp_layer_keep_layout(const WpConfig *c);
/* A chunk's keep: restash [recompute: the full stash, as the B pass recomputed it] | the layers'
 * parts | on the last chunk lnf [H] (the final norm's weight), dlnf [H] (its gradient) and whead
 * [V*H] (the LM head's weight, the embedding when tied: BWD_W recomputes the logits block by
 * block with it) | on the first chunk dx [T*H] (the embedding's output gradient). Offsets of a part
 * the chunk lacks equal the next. */
typedef struct WpKeepLayout {
    size_t restash, layers, lnf, dlnf, whead, dx, end;
} WpKeepLayout;
WpKeepLayout wp_keep_layout(const WpConfig *c, const WpChunk *k, int recompute);
size_t wp_keep_floats(const WpConfig *c, const WpChunk *k, int recompute);
/* In bytes at activation format act: the gradients dy, dh, dx2, dx and the head's weight whead as
 * activations (the working weights are at the run's precision too), the norms' weights and their
 * gradients fp32, the recomputed stash as a stash. */
size_t wp_keep_bytes(const WpConfig *c, const WpChunk *k, int recompute, WpDtype act);

/* Tokens per block of the LM head's chunked cross-entropy: the [tokens, vocab] fp32 logits exist
 * one block at a time, never for the whole micro-batch (model.c, "the LM head"). */
int wp_ce_block_tokens(const WpConfig *c);

/* The workspace of one chunk's forward and backward on one micro-batch: temporaries that live
 * only inside one call, beside the stash and the chunk's input and output activations. One part
 * per buffer of the CPU model's scratch; a part a chunk does not use is 0 (the logits block, for
 * one, is nonzero only on the chunk with the LM head; the recompute stash only with recompute).
 * Not counted: the attention kernel's own work area (the CPU's copies of K and V transposed and
 * per-thread tiles, attention_work_floats; a flash-attention GPU kernel needs none). */
typedef enum {
    WP_WS_XN,        /* [T, H] a norm's output                     activation */
    WP_WS_H,         /* [tile, F] silu(gate) * up, one MLP tile    activation */
    WP_WS_DH,        /* [tile, F]                                  activation gradient */
    WP_WS_DGU,       /* [tile, 2F]                                 activation gradient */
    WP_WS_DXN,       /* [T, H] gradient of a norm's output         activation gradient */
    WP_WS_DRES,      /* [T, H] gradient of the residual stream     activation gradient */
    WP_WS_DATT,      /* [T, heads*hd]                              activation gradient */
    WP_WS_DQKV,      /* [T, (heads + 2 kv)*hd]                     activation gradient */
    WP_WS_ROPE,      /* [S, hd/2] twice: RoPE's cos and sin        fp32 */
    WP_WS_LOGITS,    /* [wp_ce_block_tokens, V] a block of logits  fp32 */
    WP_WS_RESTASH,   /* recompute: one layer's stash, its gu one tile (wp_layer_restash_floats) */
    WP_WS_OFFLOAD,   /* offload: [T, H] twice, and the head's xf, rstdf, lse: the staging of the
                      * stash, which lives in host memory (WP_RECOMPUTE_OFFLOAD) */
    WP_WS_KV_RING,   /* context parallelism: the ring attention's blocks in flight, double-buffered:
                        2 x (K, V, dK, dV) of a rank's T tokens, [T, kv*hd] each   activation */
    WP_WS_NPARTS
} WpWorkspacePart;
size_t wp_workspace_part_floats(const WpConfig *c, const WpChunk *k, int recompute, WpWorkspacePart part);
/* The same part in bytes when activations are stored as act (RoPE tables and logits stay fp32,
 * the recompute stash wp_layer_restash_bytes). */
size_t wp_workspace_part_bytes(const WpConfig *c, const WpChunk *k, int recompute, WpWorkspacePart part, WpDtype act);
/* Parts whose lives never overlap share storage (config.c's table ws_home, which says why each
 * may): a part's home is the part whose storage it uses, itself when it has its own. A slot is a
 * home's storage, the largest of the parts living there (0 for a part that lives in another's);
 * wp_workspace_floats and wp_workspace_bytes are the sums over the slots. Shared today: dxn and
 * datt in xn's, dgu and the logits block in dqkv's (llama2-7b at 131,072 tokens: 2.2 GiB less). */
WpWorkspacePart wp_workspace_part_home(WpWorkspacePart part);
size_t wp_workspace_slot_floats(const WpConfig *c, const WpChunk *k, int recompute, WpWorkspacePart part);
size_t wp_workspace_slot_bytes(const WpConfig *c, const WpChunk *k, int recompute, WpWorkspacePart part, WpDtype act);
size_t wp_workspace_floats(const WpConfig *c, const WpChunk *k, int recompute);
size_t wp_workspace_bytes(const WpConfig *c, const WpChunk *k, int recompute, WpDtype act);

/* The segments a backward sums a bf16 weight gradient in, one at a time: fp32 sums of one
 * segment's elements (a stage of wp_grad_stage_floats) rounded to bf16 once, when the backward
 * leaves the segment, as a whole chunk's were (model.c, "a bf16 gradient"). In the order the
 * backward visits them: on the last chunk the final norm and the LM head, each layer from the
 * last, on the first chunk the embedding; a tied chunk holding both ends is one segment (its head
 * adds into the embedding's gradient before the layers, its embedding after). Segment i of
 * wp_grad_nsegments, in elements from the chunk's parameters' start. */
typedef struct WpGradSegment { size_t off, n; } WpGradSegment;
int wp_grad_nsegments(const WpConfig *c, const WpChunk *k);
WpGradSegment wp_grad_segment(const WpConfig *c, const WpChunk *k, int i);
/* The largest segment of the chunk, in elements: the fp32 stage a bf16 gradient needs. */
size_t wp_grad_stage_floats(const WpConfig *c, const WpChunk *k);

/* Forward FLOPs of one chunk on one micro-batch (matrix products and attention). */
double wp_chunk_fwd_flops(const WpConfig *c, const WpChunk *k);

#endif
