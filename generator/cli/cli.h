/* What wpgen's command-line files share: the parsed flags (main.c) and their table (flags.c),
 * the steps every command takes (inputs.c), the plan's report (plan_report.c), the strategies' own options on the
 * command line and in help (options.c) and the commands main.c dispatches to (cmd_list.c,
 * cmd_plan.c, cmd_sim.c, cmd_calibrate.c, cmd_probe.c, cmd_export.c, cmd_data.c, cmd_replan.c). The calls go one way: main.c -> cmd_*.c
 * -> search/ (the search of -s auto and compare), inputs.c, plan_report.c. */
#ifndef WP_CLI_H
#define WP_CLI_H

#include <stddef.h>
#include <stdio.h>
#include <jansson.h>
#include "ir/plan.h"
#include "lua/bridge.h"
#include "sim/sim.h"
#include "cost/calib.h"
#include "search/search.h"
#include "cost/trust.h"

enum { EXIT_REJECTED = 1, EXIT_FAILED = 1, EXIT_BAD_INPUT = 2 };   /* EXIT_FAILED: data could not be written */

typedef struct Args {
    const char *cmd, *topo, *model, *strategy, *out, *backend, *comm;
    const char *trace, *svg, *strategies;   /* sim; compare */
    int seq, mbs, mlp_tile, micro_batches, replicas, chunks, recompute, json;
    int offload;        /* --offload-activations (with --recompute): the stashes in host memory */
    int force;              /* emit: a plan that does not fit the devices' memory too */
    /* the strategies' own options as given (options.c checks them against the declarations) */
    int nraw;
    struct { const char *flag, *value; } raw[STRATEGY_MAX_OPTS];
    int ngiven;
    OptVal given[STRATEGY_MAX_OPTS];
    const char *precision, *grad_precision;   /* "fp32" or "bf16" as given; NULL: the default (inputs.c) */
    const char *weight_wire;   /* --weight-wire "fp32" or "bf16"; NULL: the precision */
    int lua_max_mib, lua_max_minstr, lua_max_seconds;   /* the strategy sandbox's limits; 0: its defaults */
    int search_seconds;     /* compare, -s auto: no new candidate after this long (once one fits); 0: no limit */
    int set_micro_batches, set_replicas, set_chunks;   /* given on the command line (auto keeps them) */
    long global_batch, global_batch_tokens;   /* --global-batch B, --global-batch-tokens T (0: not given);
                                                 load_inputs derives micro_batches from them (common/batch.h) */
    double tokens;          /* --tokens: the training budget the prediction is turned into (budget.c); 0: none */
    double gpu_hour_price;  /* --gpu-hour-price: per device and hour; < 0: none */
    int context_parallel, set_context_parallel;   /* --context-parallel C (0: not given, 1) */
    const char *calib_path;    /* --calibration FILE (plan, emit, sim, compare) */
    const Calibration *calib;  /* loaded by main.c; NULL: the cost table's defaults */
    int argc;               /* the command line, for plan.json's "command" (wpgen replan reads it) */
    char **argv;
    /* wpgen run (cmd_run.c): emit prints the plan's summary too, and records the run in the folder */
    int summary;
    const char *run_json;   /* OUT/run.json's text; NULL: not a run */
    int ntrain_args;        /* train's flags, run.sh's when given none */
    char **train_args;
    const char *run_mpirun_flags;   /* WPGEN_MPIRUN_FLAGS' default then; NULL: none */
} Args;

/* flags.c: wpgen's own flags of plan, emit, sim and compare */
typedef enum {
    FLAG_TOPO, FLAG_MODEL, FLAG_STRATEGY, FLAG_OUT, FLAG_BACKEND, FLAG_COMM, FLAG_SEQ, FLAG_MBS, FLAG_MLP_TILE, FLAG_MICRO_BATCHES, FLAG_GLOBAL_BATCH, FLAG_GLOBAL_BATCH_TOKENS,
    FLAG_REPLICAS, FLAG_CHUNKS, FLAG_PRECISION, FLAG_GRAD_PRECISION, FLAG_WEIGHT_WIRE, FLAG_CALIBRATION, FLAG_STRATEGIES,
    FLAG_TRACE, FLAG_SVG, FLAG_LUA_MIB, FLAG_LUA_MINSTR, FLAG_LUA_SECONDS, FLAG_SEARCH_SECONDS, FLAG_CONTEXT_PARALLEL, FLAG_RECOMPUTE, FLAG_OFFLOAD, FLAG_JSON,
    FLAG_FORCE, FLAG_TOKENS, FLAG_PRICE, FLAG_HELP, FLAG_COUNT
} FlagId;
/* How a flag's value reads: FV_NONE a switch (no value), FV_TEXT as given (a path, a name),
 * FV_INT a whole number in [lo, hi], FV_DTYPE fp32 or bf16, FV_COUNT a count in [lo, hi] written
 * as people write token budgets (100B, 2.5T, 1e9: cli_count_parse), FV_REAL a number in [lo, hi]. */
typedef enum { FV_NONE, FV_TEXT, FV_INT, FV_DTYPE, FV_COUNT, FV_REAL } FlagValue;
typedef struct CliFlag {
    FlagId id;
    const char *name, *alias;   /* "-t", "--topology" */
    FlagValue value;            /* FV_NONE: takes no value; else the next word, read as this says */
    long lo, hi;                /* FV_INT: its range */
    int once;                   /* given twice: refused (which one was meant is a guess) */
    const char *only;           /* the one command that takes it; NULL: plan, emit, sim and compare */
    const char *meta;           /* its value in the usage text: "TOPO.json", "N" */
    const char *help;           /* one line: what it does, its default */
} CliFlag;
extern const CliFlag cli_flags[];
extern const int cli_nflags;
/* The flags' lines of the usage text, from the table. */
void cli_flags_usage(FILE *f);
/* A flag's value read as its row says: FV_INT into *out, FV_COUNT and FV_REAL into *real (else
 * both untouched). 0, or -1 with one line on stderr naming the flag, what it expects and what it
 * got. */
int cli_flag_read(const CliFlag *fl, const char *word, const char *v, int *out, double *real);
/* A count as people write one: a number (1000000, 2.5e12) with an optional suffix K, M, B (or G)
 * or T for thousand, million, billion, trillion, either case. 0, or -1 when text is none. */
int cli_count_parse(const char *text, double *out);
/* The row of word (a name or an alias) for command cmd (NULL: any command); NULL if none. */
const CliFlag *cli_flag(const char *cmd, const char *word);
/* Word as a flag of a->cmd with a->strategy's (or a->strategies') options: 1 if it takes the next
 * word as its value, 0 if it takes none, -1 if it is no flag of theirs. */
int cli_flag_arity(const Args *a, const char *word);
/* Do x and y name one flag (-t and --topology)? A strategy's flag has one name. */
int cli_same_flag(const char *x, const char *y);

/* main.c */
/* The flags of plan, emit, sim or compare (argv[1]) into a, checked; 0, or -1 said on stderr. */
int args_parse(int argc, char **argv, Args *a);
/* Runs the command a holds (its --calibration loaded): the command's exit status. */
int args_run(const Args *a);
/* The strategy sandbox's --lua-max-seconds among words, for the declarations read before a
 * command's flags are parsed (the flags they declare); the last one given counts. */
void args_limits(int nwords, char **words);

/* inputs.c */
/* Prints "wpgen: " and the message; returns EXIT_BAD_INPUT. */
int bad(const char *fmt, const char *a, const char *b);
/* The strategy's options, as the flags give them; the precision's default from the topology. */
StrategyOpts opts_of(const Args *a, const Topology *topo);
/* What the search may vary, as the flags say. */
SearchSpec search_spec_of(const Args *a, const Topology *topo);
/* The topology and the model of the flags, loaded and checked, and the micro-batches per rank of
 * --global-batch (or --global-batch-tokens) set in a. 0, or EXIT_BAD_INPUT said. */
int load_inputs(Args *a, Topology *topo, WpConfig *model, char *name, size_t namelen);
/* plan_report.c */
json_t *plan_json(const Plan *p, double intra, double inter, int fits);
void print_summary(const Plan *p, const char *model_name, double intra, double inter, int fits);
void human_bytes(double b, char *out, size_t len);   /* "512 B", "1.50 GiB" */

/* budget.c: the predicted step turned into wall time, GPU-hours and cost for --tokens */
typedef struct Budget {
    double tokens, tokens_per_step, steps, wall_s, gpu_hours, price, cost;   /* price, cost: < 0 without a price */
    double upper;   /* what the rates' band says a step may take at most, as a factor of the prediction */
    int devices;
} Budget;
/* 0 when a asks for none (no --tokens). */
int budget_of(const Args *a, const Plan *p, double step_s, const TrustRates *tr, Budget *b);
/* One line: "100B tokens = 95368 steps of 1048576 tokens: 29.6 h, 947 GPU-hours on 32 devices, ..." */
void budget_describe(const Budget *b, char *out, size_t len);
json_t *budget_json(const Budget *b);
/* An amount (hours, GPU-hours, cost) as the budget prints it: whole from 100 up, else three digits. */
void budget_amount(double x, char *out, size_t len);

/* options.c */
/* Where a flag main.c does not know may be a strategy's own: 1 if some strategy declares it (*takes
 * a value unless it is a bool), 0 if none. */
int strategy_flag_known(const Args *a, const char *flag, int *takes_value);
/* The strategies' own options given, checked against the declarations: a value of the right type
 * and range; for plan, emit and sim of one strategy, an option it declares (another strategy's is
 * refused, naming the strategy that takes it). 0, or -1 said on stderr. */
int strategy_options_check(Args *a);
/* The options of the strategy (wpgen plan --help -s NAME; every strategy without a name). */
void strategy_options_help(FILE *f, const char *strategy);
/* The label pieces a strategy declares for how (decl_label), of candidate c against the flags. */
void cand_label(const Cand *c, const StrategyOpts *flags, const char *how, char *out, size_t len);
void cand_label_json(const Cand *c, const StrategyOpts *flags, const char *how, json_t *obj);

/* the commands */
/* -h or --help anywhere after the command: it prints its help and exits 0 without reading the
 * other flags (as git and argparse do), whatever they are; the one argument a help reads is
 * checked: plan, emit, sim and compare's -s NAME, whose options it prints (exit 2 for a strategy
 * that is not there). Every command follows this rule. */
int cli_help_asked(int argc, char **argv);
int cmd_list(int argc, char **argv);
int cmd_plan(Args *a, int emit);   /* plan, or emit with emit set */
int cmd_sim(Args *a);
int cmd_compare(Args *a);
int cmd_calibrate(int argc, char **argv);   /* its own flags (cmd_calibrate.c) */
int cmd_probe(int argc, char **argv);       /* its own flags (cmd_probe.c) */
int cmd_export(int argc, char **argv);      /* its own flags (cmd_export.c) */
int cmd_data(int argc, char **argv);        /* runs scripts/tokenize_data.py (cmd_data.c) */
int cmd_replan(int argc, char **argv);      /* the old plan's command again, for another topology (cmd_replan.c) */
int cmd_run(int argc, char **argv);         /* a run configuration file: plan, emit, build, launch (cmd_run.c) */

/* runcfg.c: wpgen run's configuration file (docs/run-config.md), read through one table of its
 * keys, each the flag of wpgen emit or of train it stands for, and resolved into their words. */
typedef struct RunConfig {
    const char *path;       /* the file as given */
    json_t *root;           /* as read */
    int emit_argc;          /* "wpgen" "emit" FLAGS... -o OUT: what args_parse reads */
    char **emit_argv;
    int ntrain;             /* train's flags (run.sh's) */
    char **train;
    int nsbatch;            /* launch slurm: those job.sbatch does not set from its variables */
    char **sbatch;
    int nenv;               /* launch slurm: job.sbatch's variables, NAME=VALUE */
    char **env;
    const char *out, *launch, *mpirun_flags;   /* launch: "mpirun", "slurm" or "none" */
    const char *outputs[4]; /* train.save, log, trace: their folders run makes before the launch */
    int noutputs;
    char *record;           /* OUT/run.json's text: the file, where it ran, and what it resolved to */
} RunConfig;
/* Reads and checks path: every key known, of its type and in its range (the flags' own checks:
 * flags.c's table for the plan, train's parser for the training), the required ones there.
 * 0, or EXIT_BAD_INPUT said on stderr naming the file and the JSON path. Writes nothing. */
int runcfg_load(const char *path, RunConfig *rc);
void runcfg_free(RunConfig *rc);
/* The keys, their flags and types, as docs/run-config.md lists them (wpgen run --keys). */
void runcfg_keys(FILE *f);
/* wpgen's commands, as main runs them */
int wpgen_main(int argc, char **argv);

#endif
