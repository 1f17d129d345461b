/* The flags every trainer takes (the reference trainer wp-ref and every emitted DIR/train), parsed
 * in one place so they mean the same everywhere (DESIGN.md, "Interfaces"). */
#ifndef WP_TRAINFLAGS_H
#define WP_TRAINFLAGS_H

#include <stddef.h>
#include <stdint.h>
#include "common/optim.h"
#include "train/checkpoint.h"

typedef struct TrainFlags {
    const char *model;                /* -m (wp-ref only) */
    int seq, mbs, micro_batches;      /* wp-ref only; 0: the model's default */
    long global_batch, global_batch_tokens;   /* --global-batch B, --global-batch-tokens T (0: not given):
                                       * wp-ref's micro-batches, train's check of its plan (common/batch.h) */
    const char *data;
    int synthetic;
    int no_shuffle;                   /* --no-shuffle: the data's sequences in file order */
    const char *val_data;             /* --val-data SPEC: held-out sequences, read in file order */
    long val_every, val_steps;        /* --val-every N (0: at the end only), --val-steps K (0: loop_val_steps) */
    long steps, stop_at;
    WpAdamW opt;                      /* --lr, --min-lr, --schedule, --beta1 ...; opt.steps = steps */
    uint64_t seed;
    int seed_given;                   /* --seed was given (else seed is the default, 1) */
    const char *init, *resume, *save, *log, *trace;
    long save_every;
    long keep;                        /* --keep N: checkpoints kept; 0 (the default, --keep all): every one */
    int sync_save;                    /* --sync-save: each checkpoint written before the next step
                                       * (default: in the background, train/saver.h) */
    int recompute;
    int allow_batch_change;           /* --allow-batch-change: a resume may change M x G or S */
    uint64_t run;                     /* the run's id (checkpoint.h): train_flags_run_id, or --resume's */
} TrainFlags;

/* The shared part of the usage text. */
extern const char train_flags_usage[];

/* Parses argv. with_model: accept -m/--seq/--micro-batch-size/--micro-batches (wp-ref). Every
 * flag is given once (a second one, under either of its names, is refused naming both values).
 * -h/--help prints usage (head, then the shared text) and exits 0. Returns 0, or -1 with one
 * line in err (the caller exits 2). */
int train_flags_parse(int argc, char **argv, int with_model, const char *usage_head, TrainFlags *o,
                      char *err, size_t errlen);

/* A new run's id (WpTrainState.run): a hash of what decides the weights it trains (the seed,
 * --init, the data's files (real path and size, however the spec names them), the model and
 * batch shape, the data's order and every optimizer setting, --steps among them; not
 * --val-data, --stop-at, --save or the notes),
 * so that two runs whose checkpoints are the same bytes are the same run, and a checkpoint's
 * folder holds the same bytes whoever saved it. Never 0. */
uint64_t train_flags_run_id(const TrainFlags *o);

/* --resume: takes the seed of the run being resumed into o->seed (initialisation is the
 * checkpoint's; the synthetic data must continue where they were), its run id into o->run (a
 * checkpoint of an earlier version, which records none, keeps the new one), and its state into
 * *st (if not NULL), reading only the checkpoint's manifest, so that a trainer can call it before
 * it sets up its data, and checks the optimizer's settings against the checkpoint's
 * (train_flags_check_resume). A --seed that differs is ignored. With print, says so on stderr,
 * prefixed "prog: warning: ". Then, with --save, with or without --resume: the files the saves
 * would replace are this run's (ckpt_check_owner). 0, or -1 with err set (the checkpoint cannot
 * be read, a setting's change is refused, or --save names another run's checkpoint: exit 2). */
int train_flags_resume(TrainFlags *o, const char *prog, int print, WpTrainState *st, char *err, size_t errlen);

/* Compares the optimizer's settings of the flags with those st records (common/optim.h's table
 * says, per setting, whether another value is refused or allowed with a warning). With print,
 * each allowed change is one line on stderr naming the flag, the checkpoint's value and the new
 * one. 0, or -1 with the first refused change in err. */
int train_flags_check_resume(const TrainFlags *o, const WpTrainState *st, const char *prog, int print,
                             char *err, size_t errlen);

/* The sequence a resume of st, with M micro-batches of G sequences of S tokens per step, reads
 * first (data_set_origin): the checkpoint's data position. A global batch other than the
 * checkpoint's (M x G sequences, or S) is refused, -1 with one line in err (exit 2), unless
 * --allow-batch-change: then the first sequence past the tokens the checkpoint's run read. */
int train_flags_data_origin(const TrainFlags *o, const WpTrainState *st, int M, int G, int S, uint64_t *seq,
                            char *err, size_t errlen);

/* The data's tokenizer (train/data.h's data_tokenizer) against --val-data's (val, NULL: none) and
 * against the run being resumed (st, NULL: no --resume): another one is refused, -1 with one line
 * in err naming both (exit 2). Where either is unknown (llm.c's own shards, synthetic tokens) nothing
 * is compared; a checkpoint written before checkpoints recorded the tokenizer resumes, with a
 * warning on stderr (print). */
struct WpData;
int train_flags_check_tokenizers(const TrainFlags *o, const struct WpData *data, const struct WpData *val,
                                 const WpTrainState *st, const char *prog, int print, char *err, size_t errlen);

#endif
