/* A process's shard of a checkpoint, written in the background. A save has two halves: the copy
 * of the process's masters and AdamW moments into host arrays the saver owns (the only part the
 * step waits for: a memcpy on the CPU, a device-to-host copy into pinned memory on a GPU), and the
 * write of the shard from those arrays (checkpoint.h's ckpt_write_shard: serialise, hash, fsync,
 * rename), which runs on a thread of its own while training goes on. The commit that follows (the
 * processes' reports, the manifest) is the trainer's, once every process's write is done
 * (train.c, loop.c).
 *
 * The arrays are allocated at the first save and kept for the run: about 12 bytes per parameter
 * the process owns (weights and both moments, fp32), never per parameter of the model. One write
 * at a time: a save waits for the previous one before it starts. No MPI here: the thread touches
 * only its arrays and files. */
#ifndef WP_SAVER_H
#define WP_SAVER_H

#include <stddef.h>
#include <stdint.h>
#include "train/checkpoint.h"

typedef struct WpSaver WpSaver;

/* Host memory for the arrays (pinned on a GPU: common/compute.h's compute_host_alloc), from ud. */
typedef struct WpSaverAlloc {
    void *(*alloc)(void *ud, size_t bytes);   /* NULL on failure */
    void (*release)(void *ud, void *p);
    void *ud;
} WpSaverAlloc;

/* A saver whose writes run on a thread (background) or inside saver_start. NULL: out of memory. */
WpSaver *saver_new(int background, WpSaverAlloc alloc);
void saver_free(WpSaver *S);   /* waits for a write under way (its result unread) */

/* The host arrays of a save of these ranges (ranges[i].n floats each: weights w[i], moments m[i]
 * and v[i]), for the caller to fill before saver_start; reused from one save to the next (the
 * ranges are the plan's, the same each time), allocated and touched by the first call (a trainer
 * makes it at start-up, so that neither the cost nor a lack of memory waits for the first save).
 * Waits for a write under way (whose result saver_wait still gives). 0, or -1 when host memory
 * cannot be had (err says how much). */
int saver_arrays(WpSaver *S, const WpCkptRange *ranges, int n, float ***w, float ***m, float ***v, char *err,
                 size_t errlen);

/* Writes the shard of `rank` for the checkpoint at path from the arrays saver_arrays gave, with
 * the training state st (copied: the caller's may go). c and chunks must stay until the write is
 * done. In the background, returns at once. */
void saver_start(WpSaver *S, const char *path, const WpConfig *c, const WpChunk *chunks, const WpCkptRange *ranges,
                 int n, const WpTrainState *st, int rank);

/* Whether no write is under way (the last one done, or none started). Does not wait. */
int saver_idle(WpSaver *S);

/* What a write did. */
typedef struct WpSaverResult {
    int started;           /* a write was started since the last saver_wait */
    int ok;                /* it succeeded: the shard is durable */
    uint64_t hash;         /* the content hash its name holds */
    int created;           /* the file is new (a failed commit removes it) */
    double seconds;        /* the write's wall-clock time */
    size_t bytes;          /* the tensors' bytes it wrote */
    char err[480];         /* why not, one line naming the file */
} WpSaverResult;

/* Waits for the write under way (if any) and returns what it did; the next saver_wait says
 * started 0 until another saver_start. */
WpSaverResult saver_wait(WpSaver *S);

#endif
