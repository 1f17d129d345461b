/* Checkpoints, sharded by owner. A checkpoint is named by the path of its manifest, PATH
 * (--save PATH, --resume PATH; conventionally DIR/checkpoint.json), and consists of:
 *   PATH                   the manifest (JSON): the training state (step, seed, data position,
 *                          batch shape: ckpt_manifest.c's state_fields), every tensor's shape, and
 *                          for each shard its file and the slices it holds;
 *   DIR/STEM.shard.STEP.RANK.HASH.safetensors   one per process that owns masters: a safetensors
 *                          file with the Hugging Face names of the tensors it holds slices of (the
 *                          weights NAME, AdamW's NAME.exp_avg and NAME.exp_avg_sq), each a 1-D
 *                          F32 slice, a contiguous range of the tensor's row-major flattening; its
 *                          __metadata__ "slices" gives each slice's offset and the whole shape.
 *                          STEM is PATH's file name without ".json", HASH a hash of the content;
 *   DIR/config.json        the model's shape (Hugging Face's), which `wpgen export` reads;
 *   DIR/STEM.STEP.json     unless --keep 1, the manifests of the checkpoints kept (all, or the
 *                          last N), each one resumable by that name (PATH is the latest of them);
 *   DIR/STEM.lock          the lock of the process saving it (ckpt_lock).
 * Every manifest records the id of the run that wrote it ("run"); a run replaces or prunes only
 * its own (ckpt_check_owner at its start, the commit and its pruning): another run's kept steps
 * and their shards stay, whatever --keep says.
 * DIR must be one folder all processes see (a shared file system, as torch's distributed
 * checkpoint assumes).
 *
 * One commit. Every process writes its shard under a new name (temporary, fsync, rename, fsync
 * of DIR) straight from its own masters: no gather. Once every shard is durable (the processes
 * say so to the first one, which waits for all), the first process writes config.json (only if
 * it changed) and the manifest, renamed over PATH: that rename is the commit. Until it, PATH is
 * the previous checkpoint and names only its own shards, which no save touches (a name holds
 * its content's hash: a re-save of the same state writes the same bytes); after it, PATH is the
 * new one. A crash or kill -9 of any process at any moment therefore leaves one whole
 * checkpoint, the previous or the new. Once committed, the save removes the shards of this STEM
 * that PATH does not name and the temporaries (NAME.tmp.PID) of processes no longer running.
 *
 * wpgen replaces only its own files: a save refuses (before writing anything) a PATH that is a
 * directory, a device or any file that is not a manifest written by wpgen, a PATH ending in
 * ".safetensors" (a manifest is not a tensor file) or named config.json, and a DIR/config.json
 * it did not write (the model's own config.json given with -m, say).
 *
 * Everything works on arrays of chunks: params[k] (and m[k], v[k]) are the parameters of
 * chunks[k], laid out as wp_chunk_tensors() says.
 *
 * Loading reads a checkpoint whatever plan wrote it: a manifest (any number of shards, read only
 * where they overlap the chunks asked for), a checkpoint of an earlier version (a Hugging Face
 * model file PATH naming its optimizer file DIR/STEM.opt.STEP.HASH.safetensors, or PATH and
 * PATH's ".opt.safetensors"), or a plain Hugging Face safetensors file (weights only: --init). */
#ifndef WP_CHECKPOINT_H
#define WP_CHECKPOINT_H

#include <stddef.h>
#include <stdint.h>
#include "common/config.h"
#include "common/optim.h"

/* The order a run read its data in: unknown (a checkpoint from before the data were shuffled,
 * whose run read them in file order), in file order (--no-shuffle), or shuffled per epoch. */
enum { WP_ORDER_UNKNOWN = 0, WP_ORDER_FILE = 1, WP_ORDER_SHUFFLED = 2 };

/* What is needed, besides the tensors, to continue a run exactly. */
typedef struct WpTrainState {
    long step;              /* steps done: the next step to run */
    uint64_t seed;          /* the run's seed (synthetic data and initialisation) */
    uint64_t data_seq;      /* index of the next sequence to read (data.h's q) */
    int data_order;         /* how the run read its data: WP_ORDER_* (a resume must read it alike) */
    int micro_batches;      /* M, G and S of the run: a resume with another global batch is refused */
    int micro_batch_size;
    int seq;
    /* The optimizer's settings the run was trained with (common/optim.h's wp_adamw_settings),
     * checked on resume: bit i of adamw_known says that setting i is known (a save records only
     * those; a load sets the bits of those recorded, and of those whose value was fixed before
     * checkpoints recorded them). */
    WpAdamW adamw;
    unsigned adamw_known;
    /* The run's id (train_flags_run_id: a hash of what decides its weights, so that two runs
     * that write the same checkpoints have the same one), recorded in the manifest ("run", not in
     * the shards): a save replaces or prunes only manifests of its own run. A resume goes on with
     * the id of the checkpoint it resumes; 0: unknown (a checkpoint of an earlier version). */
    uint64_t run;
    /* The tokenizer of the run's --data (train/data.h's data_tokenizer: "sha256:HEX", "bytes" or
     * "" where unknown) and its name, checked on resume against the data given then.
     * tokenizer_known: 0 for a checkpoint written before checkpoints recorded it. */
    char tokenizer[24];
    char tokenizer_name[256];
    int tokenizer_known;
} WpTrainState;

/* A range of a chunk's parameters that one process saves: floats [offset, offset + n) of chunk
 * `chunk` (the whole chunk, or an FSDP shard of it, which may cut tensors anywhere). */
typedef struct WpCkptRange {
    int chunk;
    size_t offset, n;
} WpCkptRange;

/* One process's shard as the manifest names it: the process, its content hash, its ranges. */
typedef struct WpCkptShard {
    int rank;
    uint64_t hash;
    const WpCkptRange *ranges;
    int nranges;
} WpCkptShard;

/* The optimizer file's path of an earlier version's checkpoint: PATH with ".safetensors" replaced
 * by ".opt.safetensors" (or that appended). */
void ckpt_opt_path(const char *path, char *out, size_t outlen);

/* Could a checkpoint be saved at path? Its directory exists and is writable, path is absent or a
 * checkpoint written by wpgen, DIR/config.json absent or written by wpgen. 0, or -1 with one line
 * naming the path in err. ckpt_save checks the same; trainers call it at start-up too. */
int ckpt_check_save(const char *path, char *err, size_t errlen);

/* What a run with id `run`, going on from step `start`, checks at its start before it saves at
 * path (every file of the checkpoint's names a save replaces or prunes must be provably its own):
 * path, if a manifest, is this run's, or is the file `from` (the --resume or --init checkpoint,
 * NULL if none: a file named so has been asked to be replaced); and no DIR/STEM.STEP.json of a
 * step past start, which this run's saves would write, is another run's (or not wpgen's). 0, or
 * -1 with one line in err naming the file and saying how to proceed (the caller exits 2). */
int ckpt_check_owner(const char *path, uint64_t run, long start, const char *from, char *err, size_t errlen);

/* Is out a file the checkpoint at path writes, owns or could write (one of its kept manifests
 * DIR/STEM.STEP.json of any step, a shard's name, its lock DIR/STEM.lock: by name in DIR however
 * spelled, or by identity, a link to one there now)? 1 with what it is in what, else 0. The
 * trainers refuse such a --log or --trace at start. */
int ckpt_output_clash(const char *path, const char *out, char *what, size_t whatlen);

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

/* Writes this process's shard of the checkpoint at path, durably: ranges[i]'s floats are w[i]
 * (and m[i], v[i]: NULL for the weights alone). Sets *hash (what the name holds) and *created
 * (1 if the file is new: a failed commit then removes it; 0 if the same content was there).
 * Touches nothing else. 0, or -1 with one line naming the file in err. */
int ckpt_write_shard(const char *path, const WpConfig *c, const WpChunk *chunks, const WpCkptRange *ranges,
                     int nranges, float *const *w, float *const *m, float *const *v, const WpTrainState *st,
                     int rank, uint64_t *hash, int *created, char *err, size_t errlen);

/* The shard file of process rank of the checkpoint at path, of step and content hash, into out. */
void ckpt_shard_path(const char *path, long step, int rank, uint64_t hash, char *out, size_t outlen);

/* The commit, by one process once every shard is durable: checks that the shards cover every
 * tensor exactly once, writes config.json and the manifest, renames it over path, and removes
 * the shards of this checkpoint that no kept manifest names. keep (--keep N): with N > 1 the
 * manifest is also written as DIR/STEM.STEP.json (resumable by that name), of which the newest
 * N (this one among them) stay; with 0 (--keep all) it is written and every one stays; with 1
 * none is written and those there are left alone. *committed: whether path now is the
 * new checkpoint (it can be while -1 reports a failed fsync of the directory). 0 or -1. */
int ckpt_commit(const char *path, const WpConfig *c, const WpChunk *chunks, int nchunks,
                const WpCkptShard *shards, int nshards, const WpTrainState *st, int with_optimizer, int keep,
                int *committed, char *err, size_t errlen);

/* Saves the checkpoint from one process (one shard holding every chunk, then the commit): with
 * m and v (not NULL) the optimizer state too, else the weights alone (which --init can start
 * from). 0 or -1 with err set; on failure the previous checkpoint at path is as it was. */
int ckpt_save(const char *path, const WpConfig *c, const WpChunk *chunks, int nchunks,
              float *const *params, float *const *m, float *const *v, const WpTrainState *st, int keep,
              char *err, size_t errlen);

/* Loads the chunks' tensors from path (any subset of the model's chunks, any layer ranges; F32,
 * and from a Hugging Face file BF16 and F16 converted). Every tensor must be present with the
 * shape the model expects, and the checkpoint must hold no tensor the model does not have (a
 * checkpoint of another shape is an error naming the tensor and both shapes). With m and v (not
 * NULL) also loads AdamW's state and fills st; without them (weights alone: --init, wpgen
 * export) every weight must be finite, else an error naming the tensor and its first bad element.
 * Of a manifest, opens only the shards that hold slices of the chunks asked for, checks each one's
 * header against the manifest (rank, state, slices' offsets and shapes) and, for those it reads
 * whole, its content against the hash its name holds. */
int ckpt_load(const char *path, const WpConfig *c, const WpChunk *chunks, int nchunks,
              float *const *params, float *const *m, float *const *v, WpTrainState *st,
              char *err, size_t errlen);

/* The files besides path that the checkpoint at path reads (its shards; an earlier version's
 * optimizer file), as a malloc'd array of malloc'd paths in *files (free with ckpt_files_free):
 * what the trainers' output check counts among a resume's inputs. Returns how many (0 when path
 * is none of ours). */
int ckpt_input_files(const char *path, char ***files);
void ckpt_files_free(char **files, int n);

/* The training state of the checkpoint at path (step, seed, data position, shape) from the
 * files' headers alone, without reading a tensor: what a trainer needs before it sets up
 * (the seed of the synthetic data, say). 0 or -1 with err set. */
int ckpt_read_state(const char *path, WpTrainState *st, char *err, size_t errlen);

#endif
