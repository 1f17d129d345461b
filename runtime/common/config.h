/* The model and training shape shared by the generator and the runtime: one definition of the
 * LLaMA-style architecture's sizes, so that the plan's byte counts and the runtime's buffers agree. */
#ifndef WP_CONFIG_H
#define WP_CONFIG_H

#include <stddef.h>

typedef struct WpConfig {
    int hidden;        /* H */
    int layers;        /* L */
    int heads;         /* query heads */
    int kv_heads;      /* key/value heads (grouped-query attention); divides heads */
    int head_dim;      /* hidden / heads */
    int ffn;           /* intermediate_size */
    int vocab;
    float eps;         /* rms_norm_eps */
    float rope_theta;
    int tied;          /* tie_word_embeddings */
    int seq;           /* S: tokens per sequence */
    int mbs;           /* G: sequences per micro-batch */
} WpConfig;

/* A chunk is layers [layer0, layer0 + nlayers); the first chunk also holds the embedding, the
 * last the final norm and the LM head. Its parameters are one contiguous float array in the
 * order of wp_chunk_tensors(). */
typedef struct WpChunk {
    int index;
    int layer0, nlayers;
    int first, last;
    size_t nparams;
} WpChunk;

/* Parameters of one decoder layer. */
size_t wp_layer_nparams(const WpConfig *c);
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

/* Floats kept from the forward of one chunk on one micro-batch for its backward pass
 * (recompute: only the chunk's input is kept). */
size_t wp_stash_floats(const WpConfig *c, const WpChunk *k, int recompute);

/* Forward FLOPs of one chunk on one micro-batch (matrix products and attention). */
double wp_chunk_fwd_flops(const WpConfig *c, const WpChunk *k);

#endif
