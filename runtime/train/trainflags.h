/* The flags every trainer takes (the reference trainer wp-ref and every emitted DIR/train), parsed
 * in one place so they mean the same everywhere (DESIGN.md, "Interfaces"). */
#ifndef WP_TRAINFLAGS_H
#define WP_TRAINFLAGS_H

#include <stdint.h>

typedef struct TrainFlags {
    const char *model;                /* -m (wp-ref only) */
    int seq, mbs, micro_batches;      /* wp-ref only; 0: the model's default */
    const char *data;
    int synthetic;
    int no_shuffle;                   /* --no-shuffle: the data's sequences in file order */
    const char *val_data;             /* --val-data SPEC: held-out sequences, read in file order */
    long val_every, val_steps;        /* --val-every N (0: at the end only), --val-steps K (0: loop_val_steps) */
    long steps, stop_at;
    float lr, weight_decay, clip;
    int warmup;
    uint64_t seed;
    int seed_given;                   /* --seed was given (else seed is the default, 1) */
    const char *init, *resume, *save, *log, *trace;
    long save_every;
    int recompute;
} TrainFlags;

/* The shared part of the usage text. */
extern const char train_flags_usage[];

/* Parses argv. with_model: accept -m/--seq/--micro-batch-size/--micro-batches (wp-ref).
 * -h/--help prints usage (head, then the shared text) and exits 0. Returns 0, or -1 with one
 * line in err (the caller exits 2). */
int train_flags_parse(int argc, char **argv, int with_model, const char *usage_head, TrainFlags *o,
                      char *err, size_t errlen);

/* --resume: takes the seed of the run being resumed into o->seed (initialisation is the
 * checkpoint's; the synthetic data must continue where they were), reading only the
 * checkpoint's headers, so that a trainer can call it before it sets up its data. A --seed that
 * differs is ignored: returns 1 and its value in *ignored_seed, for the caller's warning. Without
 * --resume does nothing. 0 or 1, or -1 with err set (the checkpoint cannot be read: exit 2). */
int train_flags_resume(TrainFlags *o, uint64_t *ignored_seed, char *err, size_t errlen);

#endif
