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
    long steps, stop_at;
    float lr, weight_decay, clip;
    int warmup;
    uint64_t seed;
    int seed_given;
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

#endif
