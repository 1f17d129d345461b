/* wpgen run's configuration file (docs/run-config.md): one JSON object holding what a run takes
 * from wpgen emit's flags, train's flags and job.sbatch's WPGEN_* variables. Every key is one row
 * of the table below: its JSON path and the flag it stands for (or the variable, under launch
 * slurm). An emit flag's value type and range are flags.c's row; a train flag's range is train's
 * own parser's (train/trainflags.c, the code the emitted program runs), so the file is checked by
 * the same code as the flags, and a new flag is one row here. JSON because every other input of
 * wpgen (topology, model config, calibration) is JSON read by Jansson: no code runs, and a key the
 * table lacks is refused by its path, never ignored. */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "cli/cli.h"
#include "emit/emit.h"
#include "lua/declare.h"
#include "lua/bridge.h"
#include "train/trainflags.h"
#include "util/xalloc.h"

/* How a key's value reads. RK_FLAG: as its wpgen emit flag's row says (flags.c: text, an integer,
 * fp32|bf16, a count, a number; a switch is true or false). The train flags' values: RK_TEXT a
 * string (RK_OUTPUT: a file train writes, whose folder run makes), RK_INT an integer, RK_NUMBER a
 * number, RK_SWITCH true or false, RK_KEEP an integer or "all". The file's own: RK_SECTION an
 * object of keys, RK_OPTIONS the strategy's options (its declaration checks them), RK_LAUNCH how
 * to start it, RK_WORDS a string of words, RK_ABOUT text for the reader. */
typedef enum { RK_FLAG, RK_TEXT, RK_OUTPUT, RK_INT, RK_NUMBER, RK_SWITCH, RK_KEEP, RK_SECTION, RK_OPTIONS, RK_LAUNCH, RK_WORDS, RK_ABOUT } RunKind;

typedef struct RunKey {
    const char *path;   /* "plan.seq" */
    RunKind kind;
    const char *flag;   /* RK_FLAG: wpgen emit's; RK_TEXT ... RK_KEEP: train's */
    const char *env;    /* under launch slurm, job.sbatch's variable in place of the flag */
    int required;
    const char *help;   /* RK_FLAG: NULL, the flag's help is flags.c's */
} RunKey;

static const RunKey keys[] = {
    /* path                        kind        flag                      env (launch slurm)     req help */
    { "about",                     RK_ABOUT,   NULL,                     NULL,                  0, "text for the reader, not read" },
    { "model",                     RK_FLAG,    "-m",                     NULL,                  1, NULL },
    { "topology",                  RK_FLAG,    "-t",                     NULL,                  1, NULL },
    { "out",                       RK_FLAG,    "-o",                     NULL,                  1, NULL },
    { "calibration",               RK_FLAG,    "--calibration",          NULL,                  0, NULL },
    { "launch",                    RK_LAUNCH,  NULL,                     NULL,                  0, "\"mpirun\" (default: OUT/run.sh), \"slurm\" (sbatch OUT/job.sbatch) or \"none\" (stop after the build)" },
    { "mpirun_flags",              RK_WORDS,   NULL,                     "WPGEN_MPIRUN_FLAGS",  0, "mpirun's extra words (run.sh and job.sbatch), e.g. \"--rankfile rankfile\"" },
    { "plan",                      RK_SECTION, NULL,                     NULL,                  0, "the plan: wpgen emit's flags" },
    { "plan.strategy",             RK_FLAG,    "-s",                     NULL,                  0, NULL },
    { "plan.strategies",           RK_FLAG,    "--strategies",           NULL,                  0, NULL },
    { "plan.options",              RK_OPTIONS, NULL,                     NULL,                  0, "the strategy's own options, {\"rounds\": 2, \"grouping\": \"node\", \"replicate-ends\": true} (wpgen plan --help -s NAME)" },
    { "plan.seq",                  RK_FLAG,    "--seq",                  NULL,                  0, NULL },
    { "plan.micro_batch_size",     RK_FLAG,    "--micro-batch-size",     NULL,                  0, NULL },
    { "plan.global_batch",         RK_FLAG,    "--global-batch",         NULL,                  0, NULL },
    { "plan.global_batch_tokens",  RK_FLAG,    "--global-batch-tokens",  NULL,                  0, NULL },
    { "plan.micro_batches",        RK_FLAG,    "--micro-batches",        NULL,                  0, NULL },
    { "plan.replicas",             RK_FLAG,    "--replicas",             NULL,                  0, NULL },
    { "plan.chunks",               RK_FLAG,    "--chunks",               NULL,                  0, NULL },
    { "plan.context_parallel",     RK_FLAG,    "--context-parallel",     NULL,                  0, NULL },
    { "plan.mlp_tile",             RK_FLAG,    "--mlp-tile",             NULL,                  0, NULL },
    { "plan.recompute",            RK_FLAG,    "--recompute",            NULL,                  0, NULL },
    { "plan.offload_activations",  RK_FLAG,    "--offload-activations",  NULL,                  0, NULL },
    { "plan.precision",            RK_FLAG,    "--precision",            NULL,                  0, NULL },
    { "plan.grad_precision",       RK_FLAG,    "--grad-precision",       NULL,                  0, NULL },
    { "plan.weight_wire",          RK_FLAG,    "--weight-wire",          NULL,                  0, NULL },
    { "plan.backend",              RK_FLAG,    "--backend",              NULL,                  0, NULL },
    { "plan.comm",                 RK_FLAG,    "--comm",                 NULL,                  0, NULL },
    { "plan.force",                RK_FLAG,    "--force",                NULL,                  0, NULL },
    { "plan.tokens",               RK_FLAG,    "--tokens",               NULL,                  0, NULL },
    { "plan.gpu_hour_price",       RK_FLAG,    "--gpu-hour-price",       NULL,                  0, NULL },
    { "plan.search_seconds",       RK_FLAG,    "--search-seconds",       NULL,                  0, NULL },
    { "plan.lua_max_mib",          RK_FLAG,    "--lua-max-mib",          NULL,                  0, NULL },
    { "plan.lua_max_instructions", RK_FLAG,    "--lua-max-instructions", NULL,                  0, NULL },
    { "plan.lua_max_seconds",      RK_FLAG,    "--lua-max-seconds",      NULL,                  0, NULL },
    { "train",                     RK_SECTION, NULL,                     NULL,                  0, "the training: train's flags (required unless launch is \"none\")" },
    { "train.data",                RK_TEXT,    "--data",                 NULL,                  0, "token shards: a file, a comma list, a glob or a folder (its train-*.bin)" },
    { "train.synthetic",           RK_SWITCH,  "--synthetic",            NULL,                  0, "pseudo-random tokens from the seed (in place of data)" },
    { "train.no_shuffle",          RK_SWITCH,  "--no-shuffle",           NULL,                  0, "the data's sequences in file order" },
    { "train.val_data",            RK_TEXT,    "--val-data",             NULL,                  0, "held-out data, as data" },
    { "train.val_every",           RK_INT,     "--val-every",            NULL,                  0, "the held-out loss every N steps" },
    { "train.val_steps",           RK_INT,     "--val-steps",            NULL,                  0, "the held-out set: the first K steps' worth" },
    { "train.steps",               RK_INT,     "--steps",                NULL,                  0, "train until this step (default 10)" },
    { "train.stop_at",             RK_INT,     "--stop-at",              NULL,                  0, "stop after this step, as an interrupted job would" },
    { "train.lr",                  RK_NUMBER,  "--lr",                   NULL,                  0, "peak learning rate" },
    { "train.min_lr",              RK_NUMBER,  "--min-lr",               NULL,                  0, "the learning rate at the last step" },
    { "train.schedule",            RK_TEXT,    "--schedule",             NULL,                  0, "cosine, linear, constant or wsd" },
    { "train.decay_fraction",      RK_NUMBER,  "--decay-fraction",       NULL,                  0, "wsd: the fraction of the steps that decays" },
    { "train.warmup",              RK_INT,     "--warmup",               NULL,                  0, "linear warm-up steps" },
    { "train.beta1",               RK_NUMBER,  "--beta1",                NULL,                  0, "AdamW's first moment decay" },
    { "train.beta2",               RK_NUMBER,  "--beta2",                NULL,                  0, "AdamW's second moment decay" },
    { "train.eps",                 RK_NUMBER,  "--eps",                  NULL,                  0, "AdamW's epsilon" },
    { "train.weight_decay",        RK_NUMBER,  "--weight-decay",         NULL,                  0, "AdamW's decoupled weight decay" },
    { "train.clip",                RK_NUMBER,  "--clip",                 NULL,                  0, "global gradient-norm limit, 0: none" },
    { "train.seed",                RK_INT,     "--seed",                 NULL,                  0, "initialisation and synthetic data" },
    { "train.init",                RK_TEXT,    "--init",                 NULL,                  0, "start from these weights (a checkpoint or safetensors)" },
    { "train.resume",              RK_TEXT,    "--resume",               NULL,                  0, "continue from this checkpoint (launch slurm: job.sbatch resumes from train.save itself)" },
    { "train.allow_batch_change",  RK_SWITCH,  "--allow-batch-change",   NULL,                  0, "with resume: accept another global batch" },
    { "train.save",                RK_OUTPUT,  "--save",                 "WPGEN_CHECKPOINT",    0, "the checkpoint's manifest, DIR/checkpoint.json (its folder is made)" },
    { "train.save_every",          RK_INT,     "--save-every",           "WPGEN_SAVE_EVERY",    0, "and a checkpoint every N steps" },
    { "train.keep",                RK_KEEP,    "--keep",                 NULL,                  0, "the last N checkpoints kept, or \"all\"" },
    { "train.sync_save",           RK_SWITCH,  "--sync-save",            NULL,                  0, "each checkpoint written before the next step" },
    { "train.log",                 RK_OUTPUT,  "--log",                  "WPGEN_LOG",           0, "one JSON object per step" },
    { "train.trace",               RK_OUTPUT,  "--trace",                NULL,                  0, "a Chrome trace of the steps" },
    { "train.recompute",           RK_SWITCH,  "--recompute",            NULL,                  0, "recompute activations (where the plan does not already)" },
};
enum { NKEYS = (int)(sizeof keys / sizeof keys[0]) };

static const RunKey *key_of(const char *path) {
    for (int i = 0; i < NKEYS; i++)
        if (!strcmp(keys[i].path, path)) return &keys[i];
    return NULL;
}

/* What a key's value must be, in words. */
static const char *expected(const RunKey *k) {
    if (k->kind == RK_FLAG) {
        const CliFlag *fl = cli_flag("emit", k->flag);
        switch (fl ? fl->value : FV_TEXT) {
        case FV_NONE: return "true or false";
        case FV_INT: return "an integer";
        case FV_DTYPE: return "a string, \"fp32\" or \"bf16\"";
        case FV_COUNT: return "a number, or a string such as \"100B\"";
        case FV_REAL: return "a number";
        case FV_TEXT: return "a string";
        }
    }
    switch (k->kind) {
    case RK_INT: return "an integer";
    case RK_NUMBER: return "a number";
    case RK_SWITCH: return "true or false";
    case RK_KEEP: return "an integer, or \"all\"";
    case RK_SECTION: case RK_OPTIONS: return "an object";
    case RK_LAUNCH: return "\"mpirun\", \"slurm\" or \"none\"";
    default: return "a string";   /* RK_TEXT, RK_OUTPUT, RK_WORDS, RK_ABOUT */
    }
}

static int type_ok(const RunKey *k, const json_t *v) {
    const char *e = expected(k);
    if (!strcmp(e, "true or false")) return json_is_boolean(v);
    if (!strcmp(e, "an integer")) return json_is_integer(v);
    if (!strcmp(e, "a number")) return json_is_number(v);
    if (!strcmp(e, "an object")) return json_is_object(v);
    if (k->kind == RK_KEEP) return json_is_integer(v) || (json_is_string(v) && !strcmp(json_string_value(v), "all"));
    if (k->kind == RK_FLAG && cli_flag("emit", k->flag)->value == FV_COUNT) return json_is_number(v) || json_is_string(v);
    if (k->kind == RK_LAUNCH)
        return json_is_string(v) && (!strcmp(json_string_value(v), "mpirun") || !strcmp(json_string_value(v), "slurm") ||
                                      !strcmp(json_string_value(v), "none"));
    return json_is_string(v);
}

/* A value as the flag's word: a number as the shortest text that reads back as the same double. */
static void value_text(const json_t *v, char *out, size_t len) {
    if (json_is_string(v)) snprintf(out, len, "%s", json_string_value(v));
    else if (json_is_integer(v)) snprintf(out, len, "%lld", (long long)json_integer_value(v));
    else if (json_is_real(v)) {
        double x = json_real_value(v);
        for (int digits = 1; digits <= 17; digits++) {
            snprintf(out, len, "%.*g", digits, x);
            if (strtod(out, NULL) == x) break;
        }
    } else snprintf(out, len, "%s", json_is_true(v) ? "true" : "false");
}

static const char *type_name(const json_t *v) {
    switch (json_typeof(v)) {
    case JSON_OBJECT: return "an object";
    case JSON_ARRAY: return "an array";
    case JSON_STRING: return "a string";
    case JSON_INTEGER: return "an integer";
    case JSON_REAL: return "a number with a fraction";
    case JSON_TRUE: case JSON_FALSE: return "a boolean";
    default: return "null";
    }
}

/* ---- words ---- */

typedef struct Words { char **v; int n, cap; } Words;

static void add(Words *w, const char *s) {
    if (w->n + 2 > w->cap) {
        w->cap = w->cap ? 2 * w->cap : 16;
        w->v = xrealloc(w->v, (size_t)w->cap * sizeof *w->v);
    }
    w->v[w->n++] = xstrdup(s);
    w->v[w->n] = NULL;
}

static void words_free(char **v, int n) {
    for (int i = 0; i < n; i++) free(v[i]);
    free(v);
}

/* ---- reading ---- */

static int refuse(const char *file, const char *path, const char *fmt, const char *a, const char *b) {
    fprintf(stderr, "wpgen run: %s: %s: ", file, path);
    fprintf(stderr, fmt, a, b);
    fputc('\n', stderr);
    return EXIT_BAD_INPUT;
}

/* The keys a section may hold, for a refusal: "strategy, seq, ...". */
static void section_keys(const char *section, char *out, size_t len) {
    size_t n = 0, pl = section ? strlen(section) : 0;
    out[0] = 0;
    for (int i = 0; i < NKEYS && n < len; i++) {
        const char *p = keys[i].path;
        if (section ? strncmp(p, section, pl) || p[pl] != '.' : strchr(p, '.') != NULL) continue;
        n += snprintf(out + n, len - n, "%s%s", n ? ", " : "", section ? p + pl + 1 : p);
    }
}

/* Every key of obj (the section's, NULL: the top level) is the table's and of its type. */
static int check_keys(const char *file, const json_t *obj, const char *section) {
    const char *name;
    json_t *v;
    json_object_foreach((json_t *)obj, name, v) {
        char path[256], known[2048];
        snprintf(path, sizeof path, "%s%s%s", section ? section : "", section ? "." : "", name);
        const RunKey *k = key_of(path);
        if (!k) {
            section_keys(section, known, sizeof known);
            return refuse(file, path, "unknown key (%s%s)", section ? "the keys of this section: " : "the keys: ", known);
        }
        if (!type_ok(k, v)) {
            char got[96];
            if (json_is_string(v)) snprintf(got, sizeof got, "\"%.80s\"", json_string_value(v));
            else snprintf(got, sizeof got, "%s", type_name(v));
            return refuse(file, path, "expected %s, got %s", expected(k), got);
        }
        if (k->kind == RK_SECTION && check_keys(file, v, path)) return EXIT_BAD_INPUT;
    }
    return 0;
}

static const json_t *at(const json_t *root, const char *path) {
    char sec[64];
    const char *dot = strchr(path, '.');
    if (!dot) return json_object_get(root, path);
    snprintf(sec, sizeof sec, "%.*s", (int)(dot - path), path);
    const json_t *s = json_object_get(root, sec);
    return s ? json_object_get(s, dot + 1) : NULL;
}

/* plan.options: each the option of the strategy (of one of those -s auto or compare searches) that
 * declares it, its value of the declared type, as its flag's words. */
static int add_options(const char *file, const json_t *opts, const char *strategy, Words *w) {
    char names[64][64];
    int n = 0;
    if (strcmp(strategy, "auto")) snprintf(names[n++], 64, "%.63s", strategy);
    else n = shipped_strategies(names, 64);
    const char *name;
    json_t *v;
    json_object_foreach((json_t *)opts, name, v) {
        char path[160], flag[80], text[128], err[700];
        snprintf(path, sizeof path, "plan.options.%s", name);
        const OptDecl *od = NULL;
        for (int i = 0; i < n && !od; i++) {
            const StrategyDecl *d = strategy_decl(names[i]);
            if (!d->ok) return refuse(file, "plan.strategy", "%s%s", d->err, "");
            snprintf(flag, sizeof flag, "--%s", name);
            od = decl_option(d, name);
            if (!od) od = decl_option(d, flag);
        }
        if (!od) return refuse(file, path, "strategy %s declares no such option (wpgen plan --help -s %s lists them)", strategy, strategy);
        int ok = od->type == OPT_BOOL ? json_is_true(v) : od->type == OPT_INT ? json_is_integer(v) : json_is_string(v);
        if (!ok)
            return refuse(file, path, "expected %s", od->type == OPT_BOOL ? "true (a switch; leave it out for its default)"
                                                    : od->type == OPT_INT ? "an integer" : "a string, one of its choices", "");
        value_text(v, text, sizeof text);
        OptVal val;
        if (decl_parse_value(od, od->type == OPT_BOOL ? NULL : text, &val, err, sizeof err)) return refuse(file, path, "%s%s", err, "");
        add(w, od->flag);
        if (od->type != OPT_BOOL) add(w, text);
    }
    return 0;
}

/* train's error (it starts with the flag it is about) with the JSON path of that flag's key. */
static int train_refusal(const char *file, const char *err) {
    const RunKey *best = NULL;
    for (int i = 0; i < NKEYS; i++) {
        const RunKey *k = &keys[i];
        if (k->kind < RK_TEXT || k->kind > RK_KEEP) continue;
        size_t l = strlen(k->flag);
        if (!strncmp(err, k->flag, l) && (err[l] == ':' || err[l] == ' ') && (!best || l > strlen(best->flag))) best = k;
    }
    return refuse(file, best ? best->path : "train", "%s%s", err, "");
}

/* The train flags checked by train's own parser. An output (RK_OUTPUT) in a folder not made yet
 * (run makes it before the launch) is checked as the same path under an empty folder of the
 * system's, made and removed here, so that outputs that clash still clash. */
static int check_train(const char *file, const Words *train) {
    char tmp[64] = "", err[4096];
    Words made = { 0 }, alt = { 0 };
    char **argv = xcalloc((size_t)train->n + 2, sizeof *argv);
    argv[0] = "train";
    for (int i = 0; i < train->n; i++) argv[i + 1] = train->v[i];
    for (int i = 0; i + 1 < train->n; i++) {
        const RunKey *k = NULL;
        for (int j = 0; j < NKEYS && !k; j++)
            if (keys[j].kind == RK_OUTPUT && !strcmp(keys[j].flag, train->v[i])) k = &keys[j];
        const char *out = k ? train->v[i + 1] : NULL, *slash = out ? strrchr(out, '/') : NULL;
        char folder[4096], path[4200];
        struct stat st;
        if (!slash) continue;
        snprintf(folder, sizeof folder, "%.*s", (int)(slash - out), out);
        if (!folder[0] || stat(folder, &st) == 0) continue;
        if (!tmp[0]) {
            snprintf(tmp, sizeof tmp, "%s/wpgen-run-XXXXXX", getenv("TMPDIR") && *getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
            if (!mkdtemp(tmp)) { tmp[0] = 0; continue; }
        }
        snprintf(path, sizeof path, "%s/%s", tmp, folder);
        for (char *p = path + strlen(tmp) + 1; ; p++)
            if (*p == '/' || !*p) {
                char c = *p;
                *p = 0;
                if (mkdir(path, 0700) == 0) add(&made, path);
                *p = c;
                if (!c) break;
            }
        snprintf(path, sizeof path, "%s/%s", tmp, out);
        add(&alt, path);
        argv[i + 2] = alt.v[alt.n - 1];
        i++;
    }
    TrainFlags tf;
    int rc = train_flags_parse(train->n + 1, argv, 0, "", &tf, err, sizeof err);
    for (int i = made.n - 1; i >= 0; i--) rmdir(made.v[i]);
    if (tmp[0]) rmdir(tmp);
    words_free(made.v, made.n);
    words_free(alt.v, alt.n);
    free(argv);
    if (!rc) return 0;
    /* the messages name the paths as given, not their stand-ins */
    for (char *at; tmp[0] && (at = strstr(err, tmp)); ) memmove(at, at + strlen(tmp) + 1, strlen(at + strlen(tmp) + 1) + 1);
    return train_refusal(file, err);
}

int runcfg_load(const char *path, RunConfig *rc) {
    memset(rc, 0, sizeof *rc);
    rc->path = path;
    json_error_t je;
    rc->root = json_load_file(path, JSON_REJECT_DUPLICATES, &je);
    if (!rc->root) {
        fprintf(stderr, "wpgen run: %s:%d:%d: %s\n", path, je.line, je.column, je.text);
        return EXIT_BAD_INPUT;
    }
    /* a run's record (OUT/run.json, cmd_run.c): its "config", from the folder it ran in */
    json_t *cfg = json_object_get(rc->root, "config"), *cwd = json_object_get(rc->root, "cwd"),
           *gen = json_object_get(rc->root, "generated_by");
    if (json_is_object(cfg) && json_is_string(cwd) && json_is_string(gen) && !strncmp(json_string_value(gen), "wpgen ", 6)) {
        if (chdir(json_string_value(cwd)))
            return refuse(path, "cwd", "cannot enter %s, where the run ran (its paths are from there): %s", json_string_value(cwd), strerror(errno));
        fprintf(stderr, "wpgen run: %s is the record of a run: its config, from %s\n", path, json_string_value(cwd));
        json_incref(cfg);
        json_decref(rc->root);
        rc->root = cfg;
    }
    const json_t *root = rc->root;
    if (!json_is_object(root)) return refuse(path, "(the file)", "expected an object of keys (docs/run-config.md), got %s%s", type_name(root), "");
    if (check_keys(path, root, NULL)) return EXIT_BAD_INPUT;
    for (int i = 0; i < NKEYS; i++)
        if (keys[i].required && !at(root, keys[i].path))
            return refuse(path, keys[i].path, "missing: expected %s (%s)", expected(&keys[i]),
                          keys[i].help ? keys[i].help : cli_flag("emit", keys[i].flag)->help);
    const json_t *launch = json_object_get(root, "launch");
    rc->launch = launch ? json_string_value(launch) : "mpirun";
    int slurm = !strcmp(rc->launch, "slurm");
    if (!json_object_get(root, "train") && strcmp(rc->launch, "none"))
        return refuse(path, "train", "missing: expected an object of the training's keys (data or synthetic, steps, lr, ...), "
                      "or launch \"none\" to stop after the build%s%s", "", "");
    if (slurm && at(root, "train.resume"))
        return refuse(path, "train.resume", "launch \"slurm\": job.sbatch resumes from train.save's checkpoint itself; "
                      "leave resume out (or launch \"mpirun\")%s%s", "", "");

    /* the words, in the table's order: wpgen emit's, train's (and job.sbatch's variables) */
    Words emit = { 0 }, train = { 0 }, env = { 0 };
    add(&emit, "wpgen");
    add(&emit, "emit");
    const json_t *strategy = at(root, "plan.strategy");
    for (int i = 0; i < NKEYS; i++) {
        const RunKey *k = &keys[i];
        const json_t *v = at(root, k->path);
        char text[4200], label[512];
        if (!v) continue;
        value_text(v, text, sizeof text);
        if (k->kind == RK_FLAG) {
            const CliFlag *fl = cli_flag("emit", k->flag);
            int iv;
            double rv;
            snprintf(label, sizeof label, "run: %s: %s (%s)", path, k->path, k->flag);
            if (fl->value == FV_NONE) { if (json_is_true(v)) add(&emit, k->flag); continue; }
            if (cli_flag_read(fl, label, text, &iv, &rv)) goto bad;
            add(&emit, k->flag);
            add(&emit, text);
        } else if (k->kind == RK_OPTIONS) {
            if (add_options(path, v, strategy ? json_string_value(strategy) : strategy_default(), &emit)) goto bad;
        } else if (k->kind == RK_SWITCH) {
            if (json_is_true(v)) add(&train, k->flag);
        } else if (k->kind >= RK_TEXT && k->kind <= RK_KEEP) {
            add(&train, k->flag);
            add(&train, text);
            if (k->kind == RK_OUTPUT && rc->noutputs < 4) rc->outputs[rc->noutputs++] = json_string_value(v);
        } else if (k->kind == RK_WORDS) {
            rc->mpirun_flags = json_string_value(v);
        }
    }
    rc->out = json_string_value(at(root, "out"));
    /* the plan's flags as wpgen emit reads them (which checks how they go together), and the
     * model and topology they name, loaded (a dry run says what would fail) */
    Args a;
    Topology topo;
    WpConfig model;
    char name[256];
    if (args_parse(emit.n, emit.v, &a) || load_inputs(&a, &topo, &model, name, sizeof name)) {
        fprintf(stderr, "wpgen run: %s: refused as wpgen emit's flags (the line above names the flag: model, topology "
                "or a key of plan)\n", path);
        goto bad;
    }
    topology_free(&topo);
    if (train.n && check_train(path, &train)) goto bad;
    /* launch slurm: job.sbatch sets the flags of its variables itself */
    Words sb = { 0 };
    for (int i = 0; slurm && i < train.n; i++) {
        const RunKey *k = NULL;
        for (int j = 0; j < NKEYS && !k; j++)
            if (keys[j].flag && keys[j].kind != RK_FLAG && !strcmp(keys[j].flag, train.v[i])) k = &keys[j];
        if (k && k->env) {
            char kv[4300];
            snprintf(kv, sizeof kv, "%s=%s", k->env, train.v[i + 1]);
            add(&env, kv);
            i++;
        } else add(&sb, train.v[i]);
    }
    if (slurm && rc->mpirun_flags) {
        char kv[4300];
        snprintf(kv, sizeof kv, "WPGEN_MPIRUN_FLAGS=%s", rc->mpirun_flags);
        add(&env, kv);
    }
    rc->nsbatch = sb.n;
    rc->sbatch = sb.v ? sb.v : xcalloc(1, sizeof *rc->sbatch);
    rc->emit_argc = emit.n;
    rc->emit_argv = emit.v;
    rc->ntrain = train.n;
    rc->train = train.v;
    rc->nenv = env.n;
    rc->env = env.v;
    if (!rc->train) rc->train = xcalloc(1, sizeof *rc->train);
    if (!rc->env) rc->env = xcalloc(1, sizeof *rc->env);
    return 0;
bad:
    words_free(emit.v, emit.n);
    words_free(train.v, train.n);
    words_free(env.v, env.n);
    return EXIT_BAD_INPUT;
}

void runcfg_free(RunConfig *rc) {
    json_decref(rc->root);
    words_free(rc->emit_argv, rc->emit_argc);
    words_free(rc->train, rc->ntrain);
    words_free(rc->env, rc->nenv);
    words_free(rc->sbatch, rc->nsbatch);
    free(rc->record);
    memset(rc, 0, sizeof *rc);
}

void runcfg_keys(FILE *f) {
    for (int i = 0; i < NKEYS; i++) {
        const RunKey *k = &keys[i];
        char to[96];
        if (k->kind == RK_FLAG) snprintf(to, sizeof to, "emit %s", k->flag);
        else if (k->flag) snprintf(to, sizeof to, "train %s%s%s", k->flag, k->env ? ", slurm " : "", k->env ? k->env : "");
        else snprintf(to, sizeof to, "%s", k->env ? k->env : "");
        fprintf(f, "  %-26s %-42s %s: %s\n", k->path, to, expected(k), k->help ? k->help : cli_flag("emit", k->flag)->help);
    }
}
