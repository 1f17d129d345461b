/* wpgen's own flags of plan, emit, sim and compare, one row each: its names, whether it takes the
 * next word as its value, whether it may be given only once, and the one command that takes it.
 * The parser (main.c), its refusal of a flag given twice, and replan (which reads a recorded
 * command and replaces its flags with the ones given) all read this table, so a flag added here
 * is known to all three. The strategies' own flags are their declarations' (options.c). */
#include <string.h>
#include "cli/cli.h"

static const CliFlag flags[] = {
    /* id                   name                    alias          value once only */
    { FLAG_TOPO,            "-t",                   "--topology",  1, 1, NULL },
    { FLAG_MODEL,           "-m",                   "--model",     1, 1, NULL },
    { FLAG_STRATEGY,        "-s",                   "--strategy",  1, 1, NULL },
    { FLAG_OUT,             "-o",                   "--out",       1, 1, NULL },
    { FLAG_BACKEND,         "--backend",            NULL,          1, 1, NULL },
    { FLAG_COMM,            "--comm",               NULL,          1, 1, NULL },
    { FLAG_SEQ,             "--seq",                NULL,          1, 1, NULL },
    { FLAG_MBS,             "--micro-batch-size",   NULL,          1, 1, NULL },
    { FLAG_MICRO_BATCHES,   "--micro-batches",      NULL,          1, 1, NULL },
    { FLAG_REPLICAS,        "--replicas",           NULL,          1, 1, NULL },
    { FLAG_CHUNKS,          "--chunks",             NULL,          1, 1, NULL },
    { FLAG_PRECISION,       "--precision",          NULL,          1, 1, NULL },
    { FLAG_GRAD_PRECISION,  "--grad-precision",     NULL,          1, 1, NULL },
    { FLAG_WEIGHT_WIRE,     "--weight-wire",        NULL,          1, 1, NULL },
    { FLAG_CALIBRATION,     "--calibration",        NULL,          1, 1, NULL },
    { FLAG_STRATEGIES,      "--strategies",         NULL,          1, 1, NULL },
    { FLAG_TRACE,           "--trace",              NULL,          1, 1, "sim" },
    { FLAG_SVG,             "--svg",                NULL,          1, 1, "sim" },
    { FLAG_LUA_MIB,         "--lua-max-mib",        NULL,          1, 0, NULL },
    { FLAG_LUA_MINSTR,      "--lua-max-instructions", NULL,        1, 0, NULL },
    { FLAG_LUA_SECONDS,     "--lua-max-seconds",    NULL,          1, 0, NULL },
    { FLAG_SEARCH_SECONDS,  "--search-seconds",     NULL,          1, 0, NULL },
    { FLAG_RECOMPUTE,       "--recompute",          NULL,          0, 0, NULL },
    { FLAG_JSON,            "--json",               NULL,          0, 0, NULL },
    { FLAG_FORCE,           "--force",              NULL,          0, 0, "emit" },
    { FLAG_HELP,            "-h",                   "--help",      0, 0, NULL },
};

const CliFlag *cli_flag(const char *cmd, const char *word) {
    for (size_t i = 0; i < sizeof flags / sizeof flags[0]; i++) {
        const CliFlag *f = &flags[i];
        if (strcmp(word, f->name) && (!f->alias || strcmp(word, f->alias))) continue;
        return !cmd || !f->only || !strcmp(cmd, f->only) ? f : NULL;
    }
    return NULL;
}

int cli_flag_arity(const Args *a, const char *word) {
    const CliFlag *f = cli_flag(a->cmd, word);
    if (f) return f->value;
    int takes;
    if (!strncmp(word, "--", 2) && strategy_flag_known(a, word, &takes)) return takes;
    return -1;
}

int cli_same_flag(const char *x, const char *y) {
    const CliFlag *a = cli_flag(NULL, x), *b = cli_flag(NULL, y);
    return a || b ? a == b : !strcmp(x, y);
}
