/* Parsing the trainers' shared flags: --flag value and --flag=value, each value checked, every
 * problem reported as one line naming the flag (exit status 2 at the caller). */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "train/trainflags.h"
#include "common/batch.h"
#include "common/hash64.h"
#include "common/settings.h"
#include "train/checkpoint.h"
#include "train/data.h"
#include "common/outpaths.h"

const char train_flags_usage[] =
    "  --data SPEC             token shards (*.bin: llm.c's uint16 or uint32, or wpgen data's) or files\n"
    "                          read as bytes, not both; SPEC a file, a comma list, a quoted glob or a\n"
    "                          directory (its train-*.bin); a name that exists is taken as it is\n"
    "  --no-shuffle            read the sequences in file order (default: a seeded order each epoch)\n"
    "  --val-data SPEC         held-out data (as --data): the mean loss over a fixed set of its sequences,\n"
    "                          val_loss in the step line and the log, at the end and with --val-every\n"
    "  --val-every N           and every N steps\n"
    "  --val-steps K           the set: the first K steps' worth of its sequences in file order (default:\n"
    "                          the whole steps it holds, at most 1024 sequences, at least one step)\n"
    "  --synthetic             pseudo-random tokens from the seed\n"
    "  --steps N               train until step N, counted from the start of training (default 10)\n"
    "  --stop-at N             stop after step N as an interrupted job would (saving with --save);\n"
    "                          the schedule still runs to --steps: resume with the same flags\n"
    "  --lr X                  peak learning rate (default 1e-3), reached at the end of the warm-up\n"
    "  --min-lr X              the learning rate at step N, in [0, --lr] (default 0.1 * --lr)\n"
    "  --schedule S            after the warm-up, from --lr to --min-lr at step N: cosine (default),\n"
    "                          linear, constant (--lr throughout), wsd (warmup-stable-decay: --lr,\n"
    "                          then linear over the last --decay-fraction of the steps after the warm-up)\n"
    "  --decay-fraction F      wsd only: in (0, 1] (default 0.2)\n"
    "  --warmup N              linear warm-up steps (default 0)\n"
    "  --beta1 X, --beta2 X    AdamW's moment decays, in [0, 1) (default 0.9, 0.95)\n"
    "  --eps X                 AdamW's epsilon, in (0, 1] (default 1e-8)\n"
    "  --weight-decay X        AdamW decoupled weight decay, not on norms (default 0.1)\n"
    "  --clip X                global gradient-norm limit, 0 = none (default 1.0)\n"
    "                          A resume with another --beta1, --beta2 or --eps is refused; another rate,\n"
    "                          schedule, warm-up, --steps, decay or clip is allowed, with a warning\n"
    "  --seed N                initialisation and synthetic data (default 1)\n"
    "  --init FILE             start from these weights (a checkpoint, or a Hugging Face safetensors file)\n"
    "  --resume FILE           continue a run from its checkpoint (the manifest FILE and the shards it\n"
    "                          names; the run's seed and data position come from the checkpoint)\n"
    "  --global-batch B        sequences per step, all ranks (wp-ref: micro-batches = B / --micro-batch-size;\n"
    "                          train: checked against its plan's); --global-batch-tokens T: the same in tokens\n"
    "  --allow-batch-change    with --resume: accept another global batch (micro-batches x sequences, or\n"
    "                          --seq) than the checkpoint's, going on from its data position\n"
    "  --save FILE             write a checkpoint at the end: the manifest FILE (say DIR/checkpoint.json),\n"
    "                          each process's shard and config.json beside it, committed as one (docs/training.md)\n"
    "  --save-every N          and every N steps\n"
    "  --keep N|all            keep the last N checkpoints (default all): each also as DIR/STEM.STEP.json,\n"
    "                          resumable by that name; FILE is the latest; 1: FILE alone. Another run's\n"
    "                          are never replaced or pruned (each manifest records its run's id)\n"
    "  --sync-save             write each checkpoint before the next step (default: copied to host memory,\n"
    "                          then written by a thread while training goes on; the end of the run and a\n"
    "                          stop signal wait for it; wp-ref always writes before the next step)\n"
    "  --log FILE              one JSON object per step\n"
    "  --trace FILE            Chrome trace (chrome://tracing, Perfetto) of the steps\n"
    "  --recompute             keep each layer's input; recompute its activations before its backward\n";

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

/* The optimizer's setting of the table (common/optim.h) that is this flag, or NULL. */
static const WpAdamWSetting *setting_of(const char *flag) {
    for (int i = 0; i < wp_adamw_nsettings; i++)
        if (!strcmp(flag, wp_adamw_settings[i].flag)) return &wp_adamw_settings[i];
    return NULL;
}

/* A growing list of the paths a run reads, each with the flag that names it. */
typedef struct PathList { WpPathArg *v; char **owned; int n, nowned; } PathList;

static void paths_add(PathList *l, const char *flag, const char *path, char *owned) {
    if (owned) l->owned[l->nowned++] = owned;
    l->v[l->n++] = (WpPathArg){ flag, path };
}

/* The files a data spec reads: each file it expands to (the comma list's items, the glob's
 * matches, the directory's shards: data.h), and beside each the files `wpgen data` wrote with it
 * (tokenizer.json, .wpgen-data). A spec that does not expand is skipped: data_open reports it. */
static const char *const data_folder_files[] = { "tokenizer.json", ".wpgen-data" };
#define NFOLDER (int)(sizeof data_folder_files / sizeof data_folder_files[0])

static int spec_files(const char *spec, char ***files) {
    char why[512];
    if (!spec) return 0;
    int n = data_spec_files(spec, files, why, sizeof why);
    return n < 0 ? 0 : n;
}

static void add_spec(PathList *l, const char *flag, const char *folder_flag, char **files, int n) {
    for (int i = 0; i < n; i++) {
        paths_add(l, flag, files[i], NULL);
        const char *slash = strrchr(files[i], '/');
        for (int k = 0; k < NFOLDER; k++) {
            char *p = malloc(strlen(files[i]) + 32);
            if (!p) continue;
            sprintf(p, "%.*s%s", slash ? (int)(slash - files[i] + 1) : 0, files[i], data_folder_files[k]);
            paths_add(l, folder_flag, p, p);
        }
    }
}

/* No output may name an input or another output (common/outpaths.h), nor a file the checkpoint
 * owns or could write. A save may replace the checkpoint it resumes from or starts from (that is
 * how a run goes on; the save's commit keeps the old one whole until the new one is), but nothing
 * else a trainer reads: the data (every file a spec expands to, and the files `wpgen data` wrote
 * beside them), the program, the model's config.json. The log and the trace replace nothing that
 * is read, nor a name of the checkpoint's (its kept steps, shards, lock: ckpt_output_clash). */
static int check_paths(const TrainFlags *o, char *err, size_t errlen) {
    char exe[4096] = "", save_cfg[4096] = "", save_lock[4200] = "";
    /* --resume's shards (or an earlier version's optimizer file) are inputs too */
    char **files = NULL, **data = NULL, **val = NULL;
    int nfiles = o->resume ? ckpt_input_files(o->resume, &files) : 0;
    int ndata = spec_files(o->data, &data), nval = spec_files(o->val_data, &val);
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    exe[n > 0 ? n : 0] = 0;
    if (o->save) {
        const char *slash = strrchr(o->save, '/'), *base = slash ? slash + 1 : o->save;
        size_t len = strlen(base);
        int dl = slash ? (int)(slash - o->save + 1) : 0;
        snprintf(save_cfg, sizeof save_cfg, "%.*sconfig.json", dl, o->save);
        if (len > 5 && !strcmp(base + len - 5, ".json")) len -= 5;   /* STEM.lock (checkpoint.h) */
        snprintf(save_lock, sizeof save_lock, "%.*s%.*s.lock", dl, o->save, (int)len, base);
    }
    const char *model = o->model && (strchr(o->model, '/') || strstr(o->model, ".json")) ? o->model : NULL;
    int most = 8 + nfiles + (ndata + nval) * (1 + NFOLDER);
    PathList read = { malloc((size_t)most * sizeof *read.v), malloc((size_t)most * sizeof *read.owned), 0, 0 };
    int rc = -1;
    if (!read.v || !read.owned) { snprintf(err, errlen, "out of memory"); goto done; }
    /* what even the save may not replace first, then what it may */
    paths_add(&read, "--data", o->data, NULL);
    paths_add(&read, "--val-data", o->val_data, NULL);
    paths_add(&read, "the program", exe[0] ? exe : NULL, NULL);
    add_spec(&read, "a file of --data", "a file of --data's folder", data, ndata);
    add_spec(&read, "a file of --val-data", "a file of --val-data's folder", val, nval);
    int nkept = read.n;
    paths_add(&read, "--init", o->init, NULL);
    paths_add(&read, "--resume", o->resume, NULL);
    paths_add(&read, "-m", model, NULL);
    for (int i = 0; i < nfiles; i++) paths_add(&read, "a file of --resume", files[i], NULL);
    const WpPathArg notes[] = { { "--log", o->log }, { "--trace", o->trace } };
    if (wp_check_outputs(read.v, read.n, notes, 2, err, errlen)) goto done;
    const WpPathArg all[] = { { "--save", o->save }, { "--save's config.json", o->save ? save_cfg : NULL },
                              { "--save's lock", o->save ? save_lock : NULL }, { "--log", o->log }, { "--trace", o->trace } };
    if (wp_check_outputs(read.v, nkept, all, 5, err, errlen)) goto done;
    for (int i = 0; i < 2 && o->save; i++) {
        char what[4400];
        if (notes[i].path && ckpt_output_clash(o->save, notes[i].path, what, sizeof what)) {
            snprintf(err, errlen, "%s %s is a file --save %s writes or owns (%s): each output needs a file of its own; "
                     "nothing was written", notes[i].flag, notes[i].path, o->save, what);
            goto done;
        }
    }
    rc = 0;
done:
    for (int i = 0; i < read.nowned; i++) free(read.owned[i]);
    free(read.v);
    free(read.owned);
    ckpt_files_free(files, nfiles);
    ckpt_files_free(data, ndata);
    ckpt_files_free(val, nval);
    return rc;
}

/* FNV-1a over text, then mixed (splitmix64's finalizer). */
static uint64_t hash_text(uint64_t h, const char *text) { return wp_mix64(wp_fnv1a_str(h, text)); }

/* A file as the run id counts it: its real path (however the flag spelled it) and size. */
static uint64_t hash_file(uint64_t h, const char *what, const char *path) {
    char line[PATH_MAX + 128], real[PATH_MAX];
    struct stat st;
    snprintf(line, sizeof line, "%s %s %lld", what, realpath(path, real) ? real : path,
             stat(path, &st) == 0 ? (long long)st.st_size : -1LL);
    return hash_text(h, line);
}

uint64_t train_flags_run_id(const TrainFlags *o) {
    char line[256];
    uint64_t h = WP_FNV_OFFSET;
    snprintf(line, sizeof line, "seed %llu shape %d %d %d order %d", (unsigned long long)o->seed, o->seq, o->mbs,
             o->micro_batches, o->no_shuffle);
    h = hash_text(h, line);
    if (o->global_batch || o->global_batch_tokens) {   /* only where given: the ids of runs without stay as they were */
        snprintf(line, sizeof line, "global batch %ld %ld", o->global_batch, o->global_batch_tokens);
        h = hash_text(h, line);
    }
    if (o->model) h = hash_file(h, "model", o->model);   /* a preset's name, or its config.json */
    for (int i = 0; i < wp_adamw_nsettings; i++) {
        adamw_setting_format(&o->opt, &wp_adamw_settings[i], 1, line, sizeof line);
        h = hash_text(hash_text(h, wp_adamw_settings[i].key), line);
    }
    if (o->init) h = hash_file(h, "init", o->init);
    /* the data: each file the spec names (synthetic: the seed says it all) */
    char **files = NULL;
    int n = spec_files(o->data, &files);
    h = hash_text(h, o->data ? "data" : "synthetic");
    for (int i = 0; i < n; i++) h = hash_file(h, "file", files[i]);
    ckpt_files_free(files, n);
    return h ? h : 1;   /* 0 is "unknown": a checkpoint of an earlier version */
}

/* Records that flag (a known one) was given, with val (NULL: a flag without a value); a second
 * time, under either of its names, is refused: -1 with err naming it and both values. */
static int once(const char *flag, const char *val, char (*seen_flag)[64], const char **seen_val, int *nseen, int max,
                char *err, size_t errlen) {
    static const char *const names[][2] = { { "--model", "-m" } };   /* one flag, two names */
    const char *same = flag;
    for (size_t k = 0; k < sizeof names / sizeof names[0]; k++)
        if (!strcmp(flag, names[k][0])) same = names[k][1];
    for (int j = 0; j < *nseen; j++) {
        if (strcmp(seen_flag[j], same)) continue;
        if (val) snprintf(err, errlen, "%s given twice (%s, then %s): give each flag once", flag, seen_val[j], val);
        else snprintf(err, errlen, "%s given twice: give each flag once", flag);
        return -1;
    }
    if (*nseen < max) {   /* always: every flag once, fewer than max flags */
        snprintf(seen_flag[*nseen], sizeof seen_flag[*nseen], "%s", same);
        seen_val[(*nseen)++] = val;
    }
    return 0;
}

int train_flags_parse(int argc, char **argv, int with_model, const char *usage_head, TrainFlags *o,
                      char *err, size_t errlen) {
    memset(o, 0, sizeof *o);
    o->steps = 10;
    adamw_init(&o->opt, 1e-3f, 0, 10);
    o->seed = 1;
    int min_lr_given = 0, decay_given = 0, keep_given = 0;
    o->keep = 0;   /* all */
    /* Every flag once: a second --data or --lr would silently replace the first (which one a
     * user meant is not ours to guess). seen_flag[j], seen_val[j]: the j-th flag given, its value. */
    enum { MAX_SEEN = 64 };
    char seen_flag[MAX_SEEN][64];
    const char *seen_val[MAX_SEEN];
    int nseen = 0;
    for (int i = 1; i < argc; i++) {
        char flag[64];
        const char *a = argv[i], *val = NULL, *eq = strchr(a, '=');
        if (a[0] == '-' && a[1] == '-' && eq) {
            snprintf(flag, sizeof flag, "%.*s", (int)(eq - a), a);
            val = eq + 1;
        } else {
            snprintf(flag, sizeof flag, "%s", a);
        }
        if (!strcmp(flag, "-h") || !strcmp(flag, "--help")) {
            fputs(usage_head, stdout);
            fputs(train_flags_usage, stdout);
            fputs("\nEnvironment (common/settings.c; unset or empty: the default):\n", stdout);
            wp_settings_print(stdout, wp_runtime_settings, wp_runtime_nsettings);
            exit(0);
        }
        if (!strcmp(flag, "--synthetic") || !strcmp(flag, "--recompute") || !strcmp(flag, "--no-shuffle") ||
            !strcmp(flag, "--allow-batch-change") || !strcmp(flag, "--sync-save")) {
            if (val) { snprintf(err, errlen, "%s takes no value", flag); return -1; }
            if (once(flag, NULL, seen_flag, seen_val, &nseen, MAX_SEEN, err, errlen)) return -1;
            if (!strcmp(flag, "--synthetic")) o->synthetic = 1;
            else if (!strcmp(flag, "--no-shuffle")) o->no_shuffle = 1;
            else if (!strcmp(flag, "--recompute")) o->recompute = 1;
            else if (!strcmp(flag, "--sync-save")) o->sync_save = 1;
            else o->allow_batch_change = 1;
            continue;
        }
        static const char *const model_flags[] = { "-m", "--model", "--seq", "--micro-batch-size", "--micro-batches" };
        static const char *const valued[] = { "--data", "--val-data", "--val-every", "--val-steps", "--stop-at", "--seed",
            "--init", "--resume", "--save", "--save-every", "--keep", "--log", "--trace", "--global-batch", "--global-batch-tokens" };
        const WpAdamWSetting *set = setting_of(flag);
        int known = set != NULL, is_model = 0;
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
        if (once(flag, val, seen_flag, seen_val, &nseen, MAX_SEEN, err, errlen)) return -1;
        long x = 0;
        int rc = 0;
        if (!strcmp(flag, "-m") || !strcmp(flag, "--model")) o->model = val;
        else if (!strcmp(flag, "--seq")) { rc = parse_long(flag, val, 1, 1 << 24, &x, err, errlen); o->seq = (int)x; }
        else if (!strcmp(flag, "--micro-batch-size")) { rc = parse_long(flag, val, 1, 1 << 20, &x, err, errlen); o->mbs = (int)x; }
        else if (!strcmp(flag, "--micro-batches")) { rc = parse_long(flag, val, 1, 1 << 20, &x, err, errlen); o->micro_batches = (int)x; }
        else if (!strcmp(flag, "--global-batch")) rc = parse_long(flag, val, 1, WP_BATCH_MAX, &o->global_batch, err, errlen);
        else if (!strcmp(flag, "--global-batch-tokens")) rc = parse_long(flag, val, 1, WP_BATCH_MAX, &o->global_batch_tokens, err, errlen);
        else if (set) {
            /* --steps among them: the schedule counts steps in an int, so a larger --steps would wrap */
            if (adamw_setting_parse(&o->opt, set, val)) {
                char why[320];
                adamw_setting_refusal(set, val, why, sizeof why);
                snprintf(err, errlen, "%s: %s", flag, why);
                return -1;
            }
            min_lr_given |= !strcmp(flag, "--min-lr");
            decay_given |= !strcmp(flag, "--decay-fraction");
        }
        else if (!strcmp(flag, "--data")) o->data = val;
        else if (!strcmp(flag, "--val-data")) o->val_data = val;
        else if (!strcmp(flag, "--val-every")) rc = parse_long(flag, val, 1, INT32_MAX, &o->val_every, err, errlen);
        else if (!strcmp(flag, "--val-steps")) rc = parse_long(flag, val, 1, 1 << 20, &o->val_steps, err, errlen);
        else if (!strcmp(flag, "--stop-at")) rc = parse_long(flag, val, 1, INT32_MAX, &o->stop_at, err, errlen);
        else if (!strcmp(flag, "--seed")) { rc = parse_long(flag, val, 0, INT64_MAX, &x, err, errlen); o->seed = (uint64_t)x; o->seed_given = 1; }
        else if (!strcmp(flag, "--init")) o->init = val;
        else if (!strcmp(flag, "--resume")) o->resume = val;
        else if (!strcmp(flag, "--save")) o->save = val;
        else if (!strcmp(flag, "--save-every")) rc = parse_long(flag, val, 1, INT32_MAX, &o->save_every, err, errlen);
        else if (!strcmp(flag, "--keep")) {
            keep_given = 1;
            if (!strcmp(val, "all")) o->keep = 0;
            else if (parse_long(flag, val, 1, INT32_MAX, &o->keep, err, errlen)) {
                snprintf(err, errlen, "--keep: expected an integer in [1, %d] or \"all\", got \"%s\"", INT32_MAX, val);
                rc = -1;
            }
        }
        else if (!strcmp(flag, "--log")) o->log = val;
        else if (!strcmp(flag, "--trace")) o->trace = val;
        if (rc) return -1;
    }
    WpAdamW *opt = &o->opt;
    o->steps = opt->steps;
    if (!min_lr_given) opt->min_lr = 0.1f * opt->lr;
    if (opt->min_lr > opt->lr) {
        snprintf(err, errlen, "--min-lr: expected a number in [0, --lr %g], got %g", (double)opt->lr, (double)opt->min_lr);
        return -1;
    }
    if (min_lr_given && opt->schedule == WP_SCHED_CONSTANT) {
        snprintf(err, errlen, "--min-lr: the constant schedule keeps --lr throughout (cosine, linear and wsd end at --min-lr)");
        return -1;
    }
    if (decay_given && opt->schedule != WP_SCHED_WSD) {
        snprintf(err, errlen, "--decay-fraction: only --schedule wsd decays over a fraction of the steps (this is %s)",
                 wp_schedule_names[opt->schedule]);
        return -1;
    }
    if (with_model && !o->model) { snprintf(err, errlen, "no model: -m MODEL (a preset name or a config.json path) is required"); return -1; }
    if (!o->data == !o->synthetic) { snprintf(err, errlen, "exactly one of --data SPEC and --synthetic is needed"); return -1; }
    if (o->init && o->resume) { snprintf(err, errlen, "--init and --resume exclude each other (--resume restores the weights)"); return -1; }
    if (o->save_every && !o->save) { snprintf(err, errlen, "--save-every needs --save FILE"); return -1; }
    if ((o->val_every || o->val_steps) && !o->val_data) {
        snprintf(err, errlen, "%s needs --val-data SPEC", o->val_every ? "--val-every" : "--val-steps");
        return -1;
    }
    if (keep_given && !o->save) { snprintf(err, errlen, "--keep needs --save FILE"); return -1; }
    if (o->sync_save && !o->save) { snprintf(err, errlen, "--sync-save needs --save FILE"); return -1; }
    if (o->allow_batch_change && !o->resume) { snprintf(err, errlen, "--allow-batch-change needs --resume CHECKPOINT"); return -1; }
    if (o->save) {
        /* Find out now, not after hours of training, that the checkpoint cannot be written (or
         * would replace a file that is not a checkpoint). */
        char why[1024];
        if (ckpt_check_save(o->save, why, sizeof why)) { snprintf(err, errlen, "--save %s", why); return -1; }
    }
    if (check_paths(o, err, errlen)) return -1;
    o->run = train_flags_run_id(o);
    return 0;
}

int train_flags_check_resume(const TrainFlags *o, const WpTrainState *st, const char *prog, int print,
                             char *err, size_t errlen) {
    /* the data's order: another one would read other sequences from the checkpoint's position on */
    int order = o->no_shuffle ? WP_ORDER_FILE : WP_ORDER_SHUFFLED;
    if (st->data_order != WP_ORDER_UNKNOWN && st->data_order != order) {
        snprintf(err, errlen, "--resume %s: the run being resumed read its data %s: resume %s", o->resume,
                 st->data_order == WP_ORDER_FILE ? "in file order (--no-shuffle)" : "shuffled per epoch (the default)",
                 st->data_order == WP_ORDER_FILE ? "with --no-shuffle" : "without --no-shuffle");
        return -1;
    }
    if (st->data_order == WP_ORDER_UNKNOWN && order == WP_ORDER_SHUFFLED && print && !o->synthetic)
        fprintf(stderr, "%s: warning: --resume %s: the checkpoint is from before the data were shuffled (its run read "
                "them in file order): the data from here on are shuffled; --no-shuffle goes on in file order\n", prog,
                o->resume);
    for (int i = 0; i < wp_adamw_nsettings; i++) {
        const WpAdamWSetting *set = &wp_adamw_settings[i];
        char was[64], now[64];
        if (!(st->adamw_known & (1u << i))) continue;   /* an earlier version's checkpoint: not recorded */
        if (set->wsd_only && o->opt.schedule != WP_SCHED_WSD) continue;
        /* the same value is the same exact text: the checkpoint records floats so that they read back */
        adamw_setting_format(&st->adamw, set, 1, was, sizeof was);
        adamw_setting_format(&o->opt, set, 1, now, sizeof now);
        if (!strcmp(was, now)) continue;
        adamw_setting_format(&st->adamw, set, 0, was, sizeof was);
        adamw_setting_format(&o->opt, set, 0, now, sizeof now);
        if (set->on_resume == WP_RESUME_REFUSE) {
            snprintf(err, errlen, "%s %s: the run being resumed was trained with %s %s, and AdamW's moments in its "
                     "checkpoint are averages under it: resume with %s %s (or start a new run)", set->flag, now,
                     set->flag, was, set->flag, was);
            return -1;
        }
        if (print)
            fprintf(stderr, "%s: warning: %s changes on resume: %s in the checkpoint, %s now: the new value "
                    "applies from here on\n", prog, set->flag, was, now);
    }
    return 0;
}

/* --save's files a save would replace or prune are this run's (ckpt_check_owner), from step start. */
static int check_owner(const TrainFlags *o, long start, char *err, size_t errlen) {
    char why[1536];
    if (!o->save || ckpt_check_owner(o->save, o->run, start, o->resume ? o->resume : o->init, why, sizeof why) == 0)
        return 0;
    snprintf(err, errlen, "--save %s", why);
    return -1;
}

int train_flags_resume(TrainFlags *o, const char *prog, int print, WpTrainState *state, char *err, size_t errlen) {
    if (!o->resume) return check_owner(o, 0, err, errlen);
    WpTrainState st;
    if (ckpt_read_state(o->resume, &st, err, errlen)) return -1;
    if (st.run) o->run = st.run;   /* the same run goes on: it replaces and prunes its own kept steps */
    if (state) *state = st;
    if (o->seed_given && o->seed != st.seed && print)
        fprintf(stderr, "%s: warning: --seed %llu ignored: the run being resumed has seed %llu\n", prog,
                (unsigned long long)o->seed, (unsigned long long)st.seed);
    /* The synthetic data continue where the run was, whatever --seed says. */
    o->seed = st.seed;
    if (train_flags_check_resume(o, &st, prog, print, err, errlen)) return -1;
    return check_owner(o, st.step, err, errlen);
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

/* A tokenizer as the messages name it: its name and hash, or bytes. */
static void tokenizer_str(const char *tk, const char *name, char *out, size_t outlen) {
    if (!strcmp(tk, "bytes")) snprintf(out, outlen, "bytes (one token per byte)");
    else snprintf(out, outlen, "tokenizer %.200s%s%s", name && *name ? name : "", name && *name ? " " : "", tk);
}

int train_flags_check_tokenizers(const TrainFlags *o, const WpData *data, const WpData *val, const WpTrainState *st,
                                 const char *prog, int print, char *err, size_t errlen) {
    const char *tk = data_tokenizer(data);
    char a[300], b[300];
    tokenizer_str(tk, data_tokenizer_name(data), a, sizeof a);
    if (val && *tk && *data_tokenizer(val) && strcmp(tk, data_tokenizer(val))) {
        tokenizer_str(data_tokenizer(val), data_tokenizer_name(val), b, sizeof b);
        snprintf(err, errlen, "--val-data %s is tokenized by %s, --data %s by %s: the held-out loss would be of another "
                 "tokenizer's ids; tokenize both with one tokenizer", o->val_data, b, o->data, a);
        return -1;
    }
    if (!st || !*tk) return 0;
    if (!st->tokenizer_known) {
        if (print)
            fprintf(stderr, "%s: warning: --resume %s: the checkpoint records no tokenizer (written before checkpoints did): "
                    "--data's, %s, cannot be checked against its run's\n", prog, o->resume, a);
        return 0;
    }
    if (*st->tokenizer && strcmp(st->tokenizer, tk)) {
        tokenizer_str(st->tokenizer, st->tokenizer_name, b, sizeof b);
        snprintf(err, errlen, "--resume %s: its run read data tokenized by %s, --data %s is tokenized by %s: the model's "
                 "ids would mean other tokens; resume on data of the checkpoint's tokenizer", o->resume, b, o->data, a);
        return -1;
    }
    return 0;
}
