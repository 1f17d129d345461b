/* The training loop every trainer runs: the emitted DIR/train (train.c, any number of ranks) and
 * the reference trainer wp-ref (one process). One place for what a step means around the model:
 * the loss and gradient norm of the step, the checks on them, AdamW's schedule and clipping, the
 * console line and the JSON log line (tokens/s and, with a peak, MFU), when to save, and stopping on a signal. A trainer is a
 * set of callbacks: run one step, sum over the processes, apply the update, save.
 *
 * A step: step() -> (loss sum, gradient sum of squares, stop flag, processes still writing a
 * checkpoint) summed over the processes in one allreduce -> the save under way committed if none
 * is still writing -> both sums must be finite -> update() with the clipping scale -> save() if
 * --save and (--save-every hits, the last step, or a stop signal arrived on any process) -> one
 * console line and one log line (by the printing process). */
#ifndef WP_LOOP_H
#define WP_LOOP_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include "common/optim.h"
#include "train/checkpoint.h"
#include "train/trainflags.h"

/* Exit statuses of train and wp-ref (docs/exit-status.md). */
enum {
    WP_EXIT_OK = 0,
    WP_EXIT_FAILED = 1,      /* the loss or gradient norm not finite, a checkpoint not written */
    WP_EXIT_BAD_INPUT = 2,   /* flags, data, a checkpoint of another shape, the world size */
    WP_EXIT_COMM = 3,        /* a transfer timed out or MPI failed: common/comm.h's COMM_ABORT_STATUS */
    WP_EXIT_STOPPED = 4,     /* SIGTERM, SIGINT, SIGHUP or SIGUSR1: stopped at a step boundary (saved with --save) */
    WP_EXIT_DEVICE = 5,      /* no CUDA device, or the plan does not fit in its memory: COMPUTE_NO_DEVICE_STATUS */
};

/* What a save cost this process, for its line in the log. */
typedef struct WpSaveReport {
    size_t bytes;             /* the shard's tensors */
    double copy_seconds;      /* the copy to host memory: what the step waited for */
    double write_seconds;     /* the shard's write (in the background unless --sync-save) */
} WpSaveReport;

typedef struct WpLoop {
    const char *prog;              /* "train", "wp-ref": the prefix of its messages */
    const TrainFlags *flags;       /* --steps, --stop-at, --lr ..., --save, --save-every, --resume */
    long start;                    /* steps already done: this run does start+1 .. loop_end() */
    uint64_t data_seq0;            /* the data position at start (a resume's, train_flags_data_origin) */
    int micro_batches, mbs, seq;   /* M, G, S of a step: its tokens, and the checkpoint's state */
    const WpConfig *model;         /* its shape, for the model FLOPs of MFU (NULL: no MFU) */
    int printer;                   /* this process prints the step lines and writes the log */
    double peak_flops;             /* FLOP/s of every process's device together, for MFU beside
                                    * tokens/s (common/flops.h's model FLOPs); 0: not known, no MFU */
    uint64_t epoch_seqs;           /* sequences in an epoch of the data (data_nseq); 0: no epochs */
    int shuffled;                  /* each epoch in another order (for the epoch's line) */
    const char *tokenizer;         /* the data's (data_tokenizer, data_tokenizer_name), recorded */
    const char *tokenizer_name;    /* in the checkpoint; NULL: synthetic data, none */
    FILE *log;                     /* --log, open on the printer; NULL: none */
    void *ud;
    /* Runs step s (0-based): this process's sum of token losses and the sum of squares of the
     * gradients it owns (each gradient counted on one process only). */
    void (*step)(void *ud, long s, double *loss_sum, double *sumsq);
    /* Sums x[0..n) over every process of the job, in place. NULL: one process. */
    void (*allreduce)(void *ud, double *x, int n);
    /* AdamW on what this process owns, the gradients scaled by grad_scale; t: 1-based update. */
    void (*update)(void *ud, const WpAdamW *opt, float lr, float grad_scale, long t);
    /* Writes the checkpoint, keeping the last `keep` (--keep). 0, or -1 with the reason in err on
     * the printer. With save_commit NULL it is collective and writes the whole checkpoint; else it
     * begins it (each process's copy of its state, its shard written in the background: saver.h),
     * save_idle says whether this process's part is written (without waiting), and save_commit
     * (collective) waits for every process's part and commits the checkpoint. The loop commits a
     * save once every process is idle (asked in the step's allreduce), before the next save, at
     * the end of the run and on a stop. */
    int (*save)(void *ud, const char *path, int keep, const WpTrainState *st, char *err, size_t errlen);
    int (*save_idle)(void *ud);
    int (*save_commit)(void *ud, WpSaveReport *rep, char *err, size_t errlen);
    /* A span of the trace, what = "optimizer" or "save" (NULL: no trace). */
    void (*span)(void *ud, const char *what, double t0, double t1, long step);
    double (*now)(void *ud);       /* seconds, any origin */
    /* Collective, NULL: no --val-data. The sum of the token losses of `steps` steps' worth of the
     * held-out data (its steps 0 .. steps-1, in file order) with the current weights, no update;
     * val_seqs: the sequences the held-out data holds (data_nseq). */
    double (*validate)(void *ud, long steps);
    uint64_t val_seqs;
} WpLoop;

/* The step this run ends at: --stop-at if it comes before --steps. */
long loop_end(const TrainFlags *o);

/* From now on SIGTERM, SIGINT, SIGHUP and SIGUSR1 ask the loop to stop at the next step boundary (a
 * second one ends the process at once, as usual). Call it on every process, after the
 * communication layer has started (MPI may install handlers of its own). */
void loop_catch_signals(void);

/* The steps' worth of held-out data a validation reads (--val-steps, else the whole steps the
 * data holds, at most 1024 sequences, at least one step). */
long loop_val_steps(const TrainFlags *o, uint64_t val_seqs, int micro_batches, int mbs);

/* Runs the steps start+1 .. loop_end(), saving as the flags say, and prints the summary.
 * Collective. Returns the exit status: WP_EXIT_OK, WP_EXIT_FAILED or WP_EXIT_STOPPED. */
int loop_run(const WpLoop *L);

#endif
