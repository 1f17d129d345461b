/* Checkpoints: the model as a Hugging Face safetensors file (LlamaForCausalLM tensor names, full
 * tensors) with a config.json beside it, so `transformers` loads the directory; and the optimizer
 * state (AdamW's m and v per tensor, the step, the data position, the seed) in a second file,
 * PATH with ".safetensors" replaced by ".opt.safetensors" (or ".opt.safetensors" appended).
 *
 * Everything works on arrays of chunks: params[k] (and m[k], v[k]) are the parameters of
 * chunks[k], laid out as wp_chunk_tensors() says. A pipelined runtime that gathers its chunks
 * passes them all; the reference trainer passes one chunk holding the whole model. Every file
 * is written atomically (temporary file, fsync, rename). */
#ifndef WP_CHECKPOINT_H
#define WP_CHECKPOINT_H

#include <stddef.h>
#include <stdint.h>
#include "common/config.h"

/* What is needed, besides the tensors, to continue a run exactly. */
typedef struct WpTrainState {
    long step;              /* steps done: the next step to run */
    uint64_t seed;          /* the run's seed (synthetic data and initialisation) */
    uint64_t data_seq;      /* index of the next sequence to read (data.h's q) */
    int micro_batches;      /* M, G and S of the run, to warn when a resume changes them */
    int micro_batch_size;
    int seq;
} WpTrainState;

/* The optimizer file's path for a model path. */
void ckpt_opt_path(const char *path, char *out, size_t outlen);

/* Writes DIR/config.json for c (DIR: the directory of path). */
int ckpt_write_config(const char *path, const WpConfig *c, char *err, size_t errlen);

/* Saves the model to path and config.json beside it; with m and v (not NULL) also the optimizer
 * file, written first: a crash between the two commits leaves files of two different steps, which
 * ckpt_load refuses (both carry the step). st may be NULL when m is. 0 or -1 with err set. */
int ckpt_save(const char *path, const WpConfig *c, const WpChunk *chunks, int nchunks,
              float *const *params, float *const *m, float *const *v, const WpTrainState *st,
              char *err, size_t errlen);

/* Loads the chunks' tensors from path (F32; BF16 and F16 are converted). Every tensor must be
 * present with the shape the model expects, and the file must hold no tensor the model does not
 * have (a checkpoint of another shape is an error naming the tensor and both shapes). With m and
 * v (not NULL) also loads the optimizer file and fills st. */
int ckpt_load(const char *path, const WpConfig *c, const WpChunk *chunks, int nchunks,
              float *const *params, float *const *m, float *const *v, WpTrainState *st,
              char *err, size_t errlen);

#endif
