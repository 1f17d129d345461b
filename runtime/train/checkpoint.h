/* Checkpoints. A checkpoint is named by the path of its model file, PATH (--save PATH, --resume
 * PATH, --init PATH; conventionally DIR/model.safetensors), and consists of:
 *   PATH                         the model: a Hugging Face safetensors file (LlamaForCausalLM
 *                                tensor names, full tensors), so that `transformers` loads DIR;
 *   DIR/config.json              its shape, for transformers;
 *   DIR/STEM.opt.STEP.HASH.safetensors   the optimizer state (AdamW's m and v per tensor, the
 *                                step, the data position, the seed), which PATH names in its
 *                                metadata; STEM is PATH's file name without ".safetensors", HASH a
 *                                hash of the file's content.
 *
 * One commit. A save writes the optimizer file first, under its own new name, then config.json
 * (only if it changed), then the model file beside PATH and renames it over PATH (fsync before
 * and after each rename). That last rename is the commit: until it, PATH is the previous
 * checkpoint and names its own optimizer file, which the save has not touched; after it, PATH is
 * the new one. A crash or kill -9 at any moment therefore leaves one whole checkpoint, the
 * previous or the new. Once committed, the save removes the optimizer files of this STEM that PATH
 * no longer names, and every save first removes the temporaries (NAME.tmp.PID) that crashed saves
 * left: only names of this checkpoint, only of processes no longer running.
 *
 * wpgen replaces only its own files: a save refuses (before writing anything) a PATH that is a
 * directory, a device or any file that is not a checkpoint written by wpgen, and a DIR/config.json
 * it did not write (the model's own config.json given with -m, say).
 *
 * Everything works on arrays of chunks: params[k] (and m[k], v[k]) are the parameters of
 * chunks[k], laid out as wp_chunk_tensors() says. A pipelined runtime that gathers its chunks
 * passes them all; the reference trainer passes one chunk holding the whole model.
 *
 * Checkpoints of earlier versions (PATH and PATH's ".opt.safetensors", written one after the
 * other) still load, when the step both record agrees. */
#ifndef WP_CHECKPOINT_H
#define WP_CHECKPOINT_H

#include <stddef.h>
#include <stdint.h>
#include "common/config.h"
#include "common/optim.h"

/* What is needed, besides the tensors, to continue a run exactly. */
typedef struct WpTrainState {
    long step;              /* steps done: the next step to run */
    uint64_t seed;          /* the run's seed (synthetic data and initialisation) */
    uint64_t data_seq;      /* index of the next sequence to read (data.h's q) */
    int micro_batches;      /* M, G and S of the run, to warn when a resume changes them */
    int micro_batch_size;
    int seq;
    /* The optimizer's settings the run was trained with (common/optim.h's wp_adamw_settings),
     * checked on resume: bit i of adamw_known says that setting i is known (a save records only
     * those; a load sets the bits of those recorded, and of those whose value was fixed before
     * checkpoints recorded them). */
    WpAdamW adamw;
    unsigned adamw_known;
} WpTrainState;

/* The optimizer file's path of an earlier version's checkpoint: PATH with ".safetensors" replaced
 * by ".opt.safetensors" (or that appended). */
void ckpt_opt_path(const char *path, char *out, size_t outlen);

/* Could a checkpoint be saved at path? Its directory exists and is writable, path is absent or a
 * checkpoint written by wpgen, DIR/config.json absent or written by wpgen. 0, or -1 with one line
 * naming the path in err. ckpt_save checks the same; trainers call it at start-up too. */
int ckpt_check_save(const char *path, char *err, size_t errlen);

/* Takes the lock of the checkpoint at path (DIR/STEM.lock: an empty file, and a record lock on
 * it held until the process ends) for the one process that saves it: a second run saving the
 * same checkpoint is refused at its start rather than replacing the first one's saves. 0, or -1
 * with err naming the holder. */
int ckpt_lock(const char *path, char *err, size_t errlen);

/* What the one process that saves checks at its start: DIR/config.json, if wpgen wrote it, is
 * of the model c (one folder, one model), and the lock (ckpt_lock). 0, or -1 with err set. */
int ckpt_claim(const char *path, const WpConfig *c, char *err, size_t errlen);

/* Writes DIR/config.json for c (DIR: the directory of path), unless it holds that already;
 * refuses a config.json wpgen did not write, and one that describes another model. */
int ckpt_write_config(const char *path, const WpConfig *c, char *err, size_t errlen);

/* Saves the checkpoint (see above): with m and v (not NULL) the optimizer state too, else the
 * weights alone (which --init can start from). st may be NULL when m is. 0 or -1 with err set;
 * on failure the previous checkpoint at path is as it was. */
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

/* The optimizer file the checkpoint at path names, into out: 0, or -1 when path is not a
 * checkpoint that has one (what the trainers' output check counts among a resume's inputs). */
int ckpt_optimizer_file(const char *path, char *out, size_t outlen);

/* The training state of the checkpoint at path (step, seed, data position, shape) from the
 * files' headers alone, without reading a tensor: what a trainer needs before it sets up
 * (the seed of the synthetic data, say). 0 or -1 with err set. */
int ckpt_read_state(const char *path, WpTrainState *st, char *err, size_t errlen);

#endif
