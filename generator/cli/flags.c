/* wpgen's own flags of plan, emit, sim and compare, one row each: its names, how its value reads
 * (none, text, a whole number in a range, a precision), whether it may be given only once, the one
 * command that takes it, and its line of the usage text. The parser (main.c: each value read and
 * checked here, by its row), its refusal of a flag given twice, the usage text and replan (which
 * reads a recorded command and replaces its flags with the ones given) all read this table, so a
 * flag added here is known to all four. The strategies' own flags are their declarations'
 * (options.c). */
#include <ctype.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "cli/cli.h"
#include "common/config.h"
#include "common/modelcfg.h"
#include "common/precision.h"
#include "lua/sandbox.h"
#include "common/batch.h"

/* Limits no real run reaches: past them a plan would take minutes or all memory to build
 * (--micro-batches 100000 per rank took 48 s), so they are refused at once. */
enum {
    MAX_MICRO_BATCHES = 1 << 14,   /* per rank and step */
    MAX_RANKS_FLAG = 1 << 17,      /* --replicas, --chunks: the topology's limit on devices */
    MAX_SHAPE = 1 << 24,           /* --seq, --micro-batch-size: the model's limits check further */
};
/* A quintillion tokens and a million per device-hour: beyond any budget, within a double's
 * exact whole numbers. */
#define MAX_TOKENS 1000000000000000000L
#define MAX_PRICE 1000000L

#define STR_(x) #x
#define STR(x) STR_(x)

const CliFlag cli_flags[] = {
    /* id              name                 alias          value     lo  hi                 once only    meta          help */
    { FLAG_TOPO,       "-t",                "--topology",  FV_TEXT,  0, 0,                  1, NULL,     "TOPO.json",  "the cluster (docs/topology.md)" },
    { FLAG_MODEL,      "-m",                "--model",     FV_TEXT,  0, 0,                  1, NULL,     "MODEL",      "a preset (wpgen list), a Hugging Face config.json or its folder" },
    { FLAG_STRATEGY,   "-s",                "--strategy",  FV_TEXT,  0, 0,                  1, NULL,     "STRATEGY",   "a shipped strategy (wpgen list), a path to a .lua file, or auto" },
    { FLAG_OUT,        "-o",                "--out",       FV_TEXT,  0, 0,                  1, NULL,     "DIR",        "emit: the folder of the emitted program" },
    { FLAG_BACKEND,    "--backend",         NULL,          FV_TEXT,  0, 0,                  1, NULL,     "cpu|cuda",   "emit: the compute backend (default: the cluster's devices')" },
    { FLAG_COMM,       "--comm",            NULL,          FV_TEXT,  0, 0,                  1, NULL,     "mpi|nccl",   "emit: the communication backend (default: the compute backend's)" },
    { FLAG_SEQ,        "--seq",             NULL,          FV_INT,   1, MAX_SHAPE,          1, NULL,     "S",          "tokens a sequence (default " WP_DEFAULT_SEQ_RULE ")" },
    { FLAG_MBS,        "--micro-batch-size", NULL,         FV_INT,   1, MAX_SHAPE,          1, NULL,     "G",          "sequences a micro-batch (default: the model's)" },
    { FLAG_MLP_TILE,   "--mlp-tile",        NULL,          FV_INT,   WP_MLP_TILE_MIN, WP_MLP_TILE_MAX, 1, NULL, "N",       "tokens per tile of the MLP's products and their backward (default " STR(WP_MLP_TILE_DEFAULT) ", or the micro-batch's tokens when fewer)" },
    { FLAG_MICRO_BATCHES, "--micro-batches", NULL,         FV_INT,   1, MAX_MICRO_BATCHES,  1, NULL,     "N",          "micro-batches per rank and step (default 4, or --global-batch's)" },
    { FLAG_GLOBAL_BATCH, "--global-batch",  NULL,          FV_INT,   1, WP_BATCH_MAX,       1, NULL,     "B",          "sequences per step, all ranks: micro-batches per rank = B / (devices x --micro-batch-size) (docs/planning.md)" },
    { FLAG_GLOBAL_BATCH_TOKENS, "--global-batch-tokens", NULL, FV_INT, 1, WP_BATCH_MAX,     1, NULL,     "T",          "the same in tokens: T / --seq sequences" },
    { FLAG_REPLICAS,   "--replicas",        NULL,          FV_INT,   1, MAX_RANKS_FLAG,     1, NULL,     "R",          "data-parallel replicas of the pipeline (default 1)" },
    { FLAG_CHUNKS,     "--chunks",          NULL,          FV_INT,   0, MAX_RANKS_FLAG,     1, NULL,     "C",          "chunks of layers (0: the strategy's default; compare and -s auto then do not search them)" },
    { FLAG_PRECISION,  "--precision",       NULL,          FV_DTYPE, 0, 0,                  1, NULL,     "fp32|bf16",  "working weights, activations and their gradients (default bf16 on GPUs and --backend cuda, fp32 on CPUs)" },
    { FLAG_GRAD_PRECISION, "--grad-precision", NULL,       FV_DTYPE, 0, 0,                  1, NULL,     "fp32|bf16",  "weight gradients on the wire, added into fp32 at the owner (default: the --precision)" },
    { FLAG_WEIGHT_WIRE, "--weight-wire",    NULL,          FV_DTYPE, 0, 0,                  1, NULL,     "fp32|bf16",  "working weights on the wire, rounded to the precision on arrival (default: the --precision)" },
    { FLAG_CALIBRATION, "--calibration",    NULL,          FV_TEXT,  0, 0,                  1, NULL,     "CALIB.json", "measured compute rates and links from wpgen calibrate (docs/calibration.md)" },
    { FLAG_STRATEGIES, "--strategies",      NULL,          FV_TEXT,  0, 0,                  1, NULL,     "a,b,...",    "compare and -s auto: only these strategies (names or paths)" },
    { FLAG_TRACE,      "--trace",           NULL,          FV_TEXT,  0, 0,                  1, "sim",    "FILE.json",  "sim: the timeline for Perfetto" },
    { FLAG_SVG,        "--svg",             NULL,          FV_TEXT,  0, 0,                  1, "sim",    "FILE.svg",   "sim: the timeline drawn, one row per rank" },
    { FLAG_LUA_MIB,    "--lua-max-mib",     NULL,          FV_INT,   1, 1 << 20,            0, NULL,     "N",          "the strategy's memory, its Lua objects and the plan, in MiB (default " STR(SANDBOX_DEFAULT_MIB_N) ")" },
    { FLAG_LUA_MINSTR, "--lua-max-instructions", NULL,     FV_INT,   1, 1 << 20,            0, NULL,     "M",          "the strategy's millions of Lua instructions (default " STR(SANDBOX_DEFAULT_MINSTR_N) ")" },
    { FLAG_LUA_SECONDS, "--lua-max-seconds", NULL,         FV_INT,   1, 86400,              0, NULL,     "S",          "the strategy's seconds of wall clock (default " STR(SANDBOX_DEFAULT_SECONDS_N) ")" },
    { FLAG_SEARCH_SECONDS, "--search-seconds", NULL,       FV_INT,   1, 1 << 20,            0, NULL,     "S",          "compare, -s auto: once a plan fits, no new candidate after S seconds (default: search them all)" },
    { FLAG_CONTEXT_PARALLEL, "--context-parallel", NULL,   FV_INT,   1, MAX_RANKS_FLAG,     1, NULL,     "C",          "groups of C ranks inside a node share each micro-batch, S/C tokens each, K/V passed round the group (docs/context-parallel.md; default 1; compare and -s auto then do not search it)" },
    { FLAG_RECOMPUTE,  "--recompute",       NULL,          FV_NONE,  0, 0,                  0, NULL,     NULL,         "keep each layer's input and recompute one layer's activations just before its backward" },
    { FLAG_OFFLOAD,    "--offload-activations", NULL,      FV_NONE,  0, 0,                  0, NULL,     NULL,         "with --recompute: the kept layer inputs in host memory, each copied out after its layer's forward and back before its backward (docs/strategies.md)" },
    { FLAG_JSON,       "--json",            NULL,          FV_NONE,  0, 0,                  0, NULL,     NULL,         "plan, sim, compare: one JSON object on stdout" },
    { FLAG_FORCE,      "--force",           NULL,          FV_NONE,  0, 0,                  0, "emit",   NULL,         "emit: a plan that does not fit the devices' memory too" },
    { FLAG_TOKENS,     "--tokens",          NULL,          FV_COUNT, 1, MAX_TOKENS,         1, NULL,     "N",          "sim, compare, -s auto: the tokens to train (100B, 2.5T, 1e9): the predicted step as wall time and GPU-hours" },
    { FLAG_PRICE,      "--gpu-hour-price",  NULL,          FV_REAL,  0, MAX_PRICE,          1, NULL,     "X",          "with --tokens: the price of one device for an hour, for the budget's cost" },
    { FLAG_HELP,       "-h",                "--help",      FV_NONE,  0, 0,                  0, NULL,     NULL,         "this text (with -s NAME: that strategy's options too)" },
};
const int cli_nflags = (int)(sizeof cli_flags / sizeof cli_flags[0]);

_Static_assert(sizeof cli_flags / sizeof cli_flags[0] == FLAG_COUNT, "one row per FlagId");

void cli_flags_usage(FILE *f) {
    for (int i = 0; i < cli_nflags; i++) {
        const CliFlag *fl = &cli_flags[i];
        char names[64];
        snprintf(names, sizeof names, "%s%s%s%s%s", fl->name, fl->alias ? ", " : "", fl->alias ? fl->alias : "",
                 fl->meta ? " " : "", fl->meta ? fl->meta : "");
        fprintf(f, "  %-34s %s", names, fl->help);
        if (fl->value == FV_INT || fl->value == FV_REAL) fprintf(f, "; %ld to %ld", fl->lo, fl->hi);
        if (fl->value == FV_COUNT) fprintf(f, "; %ld to %.0e", fl->lo, (double)fl->hi);
        fprintf(f, "\n");
    }
}

int cli_count_parse(const char *text, double *out) {
    static const struct { char c; double scale; } suffix[] = {
        { 'K', 1e3 }, { 'M', 1e6 }, { 'B', 1e9 }, { 'G', 1e9 }, { 'T', 1e12 },
    };
    char *end;
    if (!text || !*text || isspace((unsigned char)*text)) return -1;
    double x = strtod(text, &end);
    if (end == text || !isfinite(x)) return -1;
    for (size_t i = 0; *end && i < sizeof suffix / sizeof suffix[0]; i++)
        if (toupper((unsigned char)*end) == suffix[i].c) { x *= suffix[i].scale; end++; break; }
    if (*end) return -1;
    *out = x;
    return 0;
}

int cli_flag_read(const CliFlag *fl, const char *word, const char *v, int *out, double *real) {
    switch (fl->value) {
    case FV_NONE:
    case FV_TEXT:
        return 0;
    case FV_INT: {
        char *end;
        long x = v ? strtol(v, &end, 10) : 0;
        if (!v || !*v || *end || x < fl->lo || x > fl->hi) {
            fprintf(stderr, "wpgen: %s: expected an integer in [%ld, %ld], got \"%s\"\n", word, fl->lo, fl->hi, v ? v : "");
            return -1;
        }
        *out = (int)x;
        return 0;
    }
    case FV_COUNT:
    case FV_REAL: {
        double x = 0;
        char *end = NULL;
        int okv = v && (fl->value == FV_COUNT ? cli_count_parse(v, &x) == 0 : (x = strtod(v, &end), *v && end != v && !*end && isfinite(x)));
        if (!okv || x < fl->lo || x > fl->hi) {
            if (fl->value == FV_COUNT)
                fprintf(stderr, "wpgen: %s: expected a count from %ld to %.0e, a number with K, M, B or T after it if you like "
                        "(100B, 2.5T, 1e9), got \"%s\"\n", word, fl->lo, (double)fl->hi, v ? v : "");
            else fprintf(stderr, "wpgen: %s: expected a number in [%ld, %ld], got \"%s\"\n", word, fl->lo, fl->hi, v ? v : "");
            return -1;
        }
        *real = x;
        return 0;
    }
    case FV_DTYPE: {
        WpDtype d;
        if (!v || wp_dtype_parse(v, &d)) {
            fprintf(stderr, "wpgen: %s: expected fp32 or bf16, got \"%s\"\n", word, v ? v : "");
            return -1;
        }
        return 0;
    }
    }
    return 0;
}

const CliFlag *cli_flag(const char *cmd, const char *word) {
    for (int i = 0; i < cli_nflags; i++) {
        const CliFlag *f = &cli_flags[i];
        if (strcmp(word, f->name) && (!f->alias || strcmp(word, f->alias))) continue;
        return !cmd || !f->only || !strcmp(cmd, f->only) ? f : NULL;
    }
    return NULL;
}

int cli_flag_arity(const Args *a, const char *word) {
    const CliFlag *f = cli_flag(a->cmd, word);
    if (f) return f->value != FV_NONE;
    int takes;
    if (!strncmp(word, "--", 2) && strategy_flag_known(a, word, &takes)) return takes;
    return -1;
}

int cli_same_flag(const char *x, const char *y) {
    const CliFlag *a = cli_flag(NULL, x), *b = cli_flag(NULL, y);
    return a || b ? a == b : !strcmp(x, y);
}
