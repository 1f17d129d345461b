/* Parsing the trainers' shared flags: --flag value and --flag=value, each value checked, every
 * problem reported as one line naming the flag (exit status 2 at the caller). */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "train/trainflags.h"
#include "train/checkpoint.h"
#include "common/outpaths.h"

const char train_flags_usage[] =
    "  --data FILE             llm.c token shard (*.bin) or any file read as bytes\n"
    "  --synthetic             pseudo-random tokens from the seed\n"
    "  --steps N               train until step N, counted from the start of training (default 10)\n"
    "  --stop-at N             stop after step N as an interrupted job would (saving with --save);\n"
    "                          the schedule still runs to --steps: resume with the same flags\n"
    "  --lr X                  peak learning rate (default 1e-3); cosine decay to 0.1*X at step N\n"
    "  --warmup N              linear warm-up steps (default 0)\n"
    "  --weight-decay X        AdamW decoupled weight decay, not on norms (default 0.1)\n"
    "  --clip X                global gradient-norm limit, 0 = none (default 1.0)\n"
    "  --seed N                initialisation and synthetic data (default 1)\n"
    "  --init FILE             start from these weights (a checkpoint, or a Hugging Face safetensors file)\n"
    "  --resume FILE           continue a run from its checkpoint (the manifest FILE and the shards it\n"
    "                          names; the run's seed and data position come from the checkpoint)\n"
    "  --allow-batch-change    with --resume: accept another global batch (micro-batches x sequences, or\n"
    "                          --seq) than the checkpoint's, going on from its data position\n"
    "  --save FILE             write a checkpoint at the end: the manifest FILE (say DIR/checkpoint.json),\n"
    "                          each process's shard and config.json beside it, committed as one (README)\n"
    "  --save-every N          and every N steps\n"
    "  --keep N                keep the last N checkpoints (default 1): each also as DIR/STEM.STEP.json,\n"
    "                          resumable by that name; FILE is the latest\n"
    "  --log FILE              one JSON object per step\n"
    "  --trace FILE            Chrome trace (chrome://tracing, Perfetto) of the steps\n"
    "  --recompute             keep only each chunk's input; recompute activations in backward\n";

static int parse_long(const char *flag, const char *s, long lo, long hi, long *out, char *err, size_t errlen) {
    char *end;
    errno = 0;
    long x = strtol(s, &end, 10);
    if (errno || end == s || *end || x < lo || x > hi) {
        snprintf(err, errlen, "%s: expected an integer in [%ld, %ld], got \"%s\"", flag, lo, hi, s);
        return -1;
    }
    *out = x;
    return 0;
}

static int parse_float(const char *flag, const char *s, double lo, double hi, float *out, char *err, size_t errlen) {
    char *end;
    errno = 0;
    double x = strtod(s, &end);
    if (errno || end == s || *end || !isfinite(x) || x < lo || x > hi) {
        snprintf(err, errlen, "%s: expected a number in [%g, %g], got \"%s\"", flag, lo, hi, s);
        return -1;
    }
    *out = (float)x;
    return 0;
}

/* No output may name an input or another output (common/outpaths.h). A save may replace the
 * checkpoint it resumes from or starts from (that is how a run goes on; the save's commit keeps
 * the old one whole until the new one is), but nothing else a trainer reads: the data, the
 * program, the model's config.json. The log and the trace replace nothing that is read. */
static int check_paths(const TrainFlags *o, char *err, size_t errlen) {
    char exe[4096] = "", save_cfg[4096] = "";
    /* --resume's shards (or an earlier version's optimizer file) are inputs too */
    char **files = NULL;
    int nfiles = o->resume ? ckpt_input_files(o->resume, &files) : 0;
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    exe[n > 0 ? n : 0] = 0;
    if (o->save) {
        const char *slash = strrchr(o->save, '/');
        snprintf(save_cfg, sizeof save_cfg, "%.*sconfig.json", slash ? (int)(slash - o->save + 1) : 0, o->save);
    }
    const char *model = o->model && (strchr(o->model, '/') || strstr(o->model, ".json")) ? o->model : NULL;
    WpPathArg *read = malloc((size_t)(5 + nfiles) * sizeof *read);
    if (!read) { ckpt_files_free(files, nfiles); snprintf(err, errlen, "out of memory"); return -1; }
    read[0] = (WpPathArg){ "--data", o->data };
    read[1] = (WpPathArg){ "--init", o->init };
    read[2] = (WpPathArg){ "--resume", o->resume };
    read[3] = (WpPathArg){ "-m", model };
    read[4] = (WpPathArg){ "the program", exe[0] ? exe : NULL };
    for (int i = 0; i < nfiles; i++) read[5 + i] = (WpPathArg){ "a file of --resume", files[i] };
    const WpPathArg notes[] = { { "--log", o->log }, { "--trace", o->trace } };
    int rc = wp_check_outputs(read, 5 + nfiles, notes, 2, err, errlen);
    free(read);
    ckpt_files_free(files, nfiles);
    if (rc) return -1;
    const WpPathArg kept[] = { { "--data", o->data }, { "the program", exe[0] ? exe : NULL } };
    const WpPathArg all[] = { { "--save", o->save }, { "--save's config.json", o->save ? save_cfg : NULL },
                              { "--log", o->log }, { "--trace", o->trace } };
    return wp_check_outputs(kept, 2, all, 4, err, errlen);
}

int train_flags_parse(int argc, char **argv, int with_model, const char *usage_head, TrainFlags *o,
                      char *err, size_t errlen) {
    memset(o, 0, sizeof *o);
    o->steps = 10;
    o->lr = 1e-3f;
    o->weight_decay = 0.1f;
    o->clip = 1.0f;
    o->seed = 1;
    o->keep = 1;
    for (int i = 1; i < argc; i++) {
        char flag[64];
        const char *a = argv[i], *val = NULL, *eq = strchr(a, '=');
        if (a[0] == '-' && a[1] == '-' && eq) {
            snprintf(flag, sizeof flag, "%.*s", (int)(eq - a), a);
            val = eq + 1;
        } else {
            snprintf(flag, sizeof flag, "%s", a);
        }
        if (!strcmp(flag, "-h") || !strcmp(flag, "--help")) { fputs(usage_head, stdout); fputs(train_flags_usage, stdout); exit(0); }
        if (!strcmp(flag, "--synthetic") || !strcmp(flag, "--recompute") || !strcmp(flag, "--allow-batch-change")) {
            if (val) { snprintf(err, errlen, "%s takes no value", flag); return -1; }
            if (!strcmp(flag, "--synthetic")) o->synthetic = 1;
            else if (!strcmp(flag, "--recompute")) o->recompute = 1;
            else o->allow_batch_change = 1;
            continue;
        }
        static const char *const model_flags[] = { "-m", "--model", "--seq", "--micro-batch-size", "--micro-batches" };
        static const char *const valued[] = { "--data", "--steps", "--stop-at", "--lr", "--warmup", "--weight-decay",
            "--clip", "--seed", "--init", "--resume", "--save", "--save-every", "--keep", "--log", "--trace" };
        int known = 0, is_model = 0;
        for (size_t j = 0; j < sizeof valued / sizeof valued[0]; j++) known |= !strcmp(flag, valued[j]);
        for (size_t j = 0; j < sizeof model_flags / sizeof model_flags[0]; j++) is_model |= !strcmp(flag, model_flags[j]);
        if (is_model && !with_model) {
            snprintf(err, errlen, "%s: the model and training shape are fixed by the plan this program was generated from", flag);
            return -1;
        }
        if (!known && !is_model) { snprintf(err, errlen, "unknown flag %s", a); return -1; }
        if (!val) {
            if (i + 1 >= argc) { snprintf(err, errlen, "%s: missing value", flag); return -1; }
            val = argv[++i];
        }
        long x = 0;
        int rc = 0;
        if (!strcmp(flag, "-m") || !strcmp(flag, "--model")) o->model = val;
        else if (!strcmp(flag, "--seq")) { rc = parse_long(flag, val, 1, 1 << 24, &x, err, errlen); o->seq = (int)x; }
        else if (!strcmp(flag, "--micro-batch-size")) { rc = parse_long(flag, val, 1, 1 << 20, &x, err, errlen); o->mbs = (int)x; }
        else if (!strcmp(flag, "--micro-batches")) { rc = parse_long(flag, val, 1, 1 << 20, &x, err, errlen); o->micro_batches = (int)x; }
        else if (!strcmp(flag, "--data")) o->data = val;
        /* Steps are counted in an int by the optimizer's schedule: a larger --steps would wrap. */
        else if (!strcmp(flag, "--steps")) rc = parse_long(flag, val, 0, INT32_MAX, &o->steps, err, errlen);
        else if (!strcmp(flag, "--stop-at")) rc = parse_long(flag, val, 1, INT32_MAX, &o->stop_at, err, errlen);
        else if (!strcmp(flag, "--lr")) rc = parse_float(flag, val, 0, 10, &o->lr, err, errlen);
        else if (!strcmp(flag, "--warmup")) { rc = parse_long(flag, val, 0, 1 << 30, &x, err, errlen); o->warmup = (int)x; }
        else if (!strcmp(flag, "--weight-decay")) rc = parse_float(flag, val, 0, 10, &o->weight_decay, err, errlen);
        else if (!strcmp(flag, "--clip")) rc = parse_float(flag, val, 0, 1e30, &o->clip, err, errlen);
        else if (!strcmp(flag, "--seed")) { rc = parse_long(flag, val, 0, INT64_MAX, &x, err, errlen); o->seed = (uint64_t)x; o->seed_given = 1; }
        else if (!strcmp(flag, "--init")) o->init = val;
        else if (!strcmp(flag, "--resume")) o->resume = val;
        else if (!strcmp(flag, "--save")) o->save = val;
        else if (!strcmp(flag, "--save-every")) rc = parse_long(flag, val, 1, INT32_MAX, &o->save_every, err, errlen);
        else if (!strcmp(flag, "--keep")) rc = parse_long(flag, val, 1, INT32_MAX, &o->keep, err, errlen);
        else if (!strcmp(flag, "--log")) o->log = val;
        else if (!strcmp(flag, "--trace")) o->trace = val;
        if (rc) return -1;
    }
    if (with_model && !o->model) { snprintf(err, errlen, "no model: -m MODEL (a preset name or a config.json path) is required"); return -1; }
    if (!o->data == !o->synthetic) { snprintf(err, errlen, "exactly one of --data FILE and --synthetic is needed"); return -1; }
    if (o->init && o->resume) { snprintf(err, errlen, "--init and --resume exclude each other (--resume restores the weights)"); return -1; }
    if (o->save_every && !o->save) { snprintf(err, errlen, "--save-every needs --save FILE"); return -1; }
    if (o->keep > 1 && !o->save) { snprintf(err, errlen, "--keep needs --save FILE"); return -1; }
    if (o->allow_batch_change && !o->resume) { snprintf(err, errlen, "--allow-batch-change needs --resume CHECKPOINT"); return -1; }
    if (o->save) {
        /* Find out now, not after hours of training, that the checkpoint cannot be written (or
         * would replace a file that is not a checkpoint). */
        char why[1024];
        if (ckpt_check_save(o->save, why, sizeof why)) { snprintf(err, errlen, "--save %s", why); return -1; }
    }
    if (check_paths(o, err, errlen)) return -1;
    return 0;
}

int train_flags_resume(TrainFlags *o, WpTrainState *state, uint64_t *ignored_seed, char *err, size_t errlen) {
    if (!o->resume) return 0;
    WpTrainState st;
    if (ckpt_read_state(o->resume, &st, err, errlen)) return -1;
    if (state) *state = st;
    int ignored = o->seed_given && o->seed != st.seed;
    if (ignored && ignored_seed) *ignored_seed = o->seed;
    /* The synthetic data continue where the run was, whatever --seed says. */
    o->seed = st.seed;
    return ignored;
}

int train_flags_data_origin(const TrainFlags *o, const WpTrainState *st, int M, int G, int S, uint64_t *seq,
                            char *err, size_t errlen) {
    *seq = st->data_seq;
    if ((uint64_t)st->micro_batches * (uint64_t)st->micro_batch_size == (uint64_t)M * (uint64_t)G && st->seq == S)
        return 0;   /* the same sequences per step (M and G may trade): the data go on as they were */
    if (!o->allow_batch_change) {
        snprintf(err, errlen, "--resume %s: the checkpoint's run read %d x %d sequences of %d tokens per step (micro-batches "
                 "x micro-batch size), this run %d x %d of %d: its data would not go on as they were "
                 "(--allow-batch-change goes on from the checkpoint's data position with the new batch)", o->resume,
                 st->micro_batches, st->micro_batch_size, st->seq, M, G, S);
        return -1;
    }
    /* the first sequence of S tokens that starts past the tokens read so far (data_seq of the old S) */
    *seq = (st->data_seq * (uint64_t)st->seq + (uint64_t)S - 1) / (uint64_t)S;
    return 0;
}
