/* What wpgen's command-line files share: the parsed flags (main.c), the steps every command
 * takes (inputs.c), the plan's report (plan_report.c), the `-s auto` search (auto.c) and the
 * commands main.c dispatches to (cmd_list.c, cmd_plan.c, cmd_sim.c, cmd_calibrate.c, cmd_probe.c). The calls go one way:
 * main.c -> cmd_*.c -> auto.c -> inputs.c, plan_report.c. */
#ifndef WP_CLI_H
#define WP_CLI_H

#include <stddef.h>
#include <jansson.h>
#include "ir/plan.h"
#include "lua/bridge.h"
#include "sim/sim.h"
#include "calib/calib.h"

enum { EXIT_REJECTED = 1, EXIT_BAD_INPUT = 2 };

typedef struct Args {
    const char *cmd, *topo, *model, *strategy, *out, *backend, *comm;
    const char *trace, *svg, *strategies;   /* sim; compare */
    int seq, mbs, micro_batches, replicas, chunks, recompute, json;
    int force;              /* emit: a plan that does not fit the devices' memory too */
    int rounds;             /* tawpipe: micro-batch rounds, 0 = the solver's */
    int pass_mbs;           /* weipipe-naive, -interleave: micro-batches per weight pass (K), 0 = the strategy's */
    int replicate_ends;     /* --replicate-ends: embedding and LM head on every rank (strategy_takes_replicate_ends) */
    const char *grouping;   /* tawpipe: auto, node, island or published */
    const char *fsdp_variant;   /* fsdp: gather-once or full-shard; NULL: gather-once */
    const char *fsdp_overlap;   /* fsdp: "on" (NULL) or "off", collectives in turns of their own */
    const char *precision, *grad_precision;   /* "fp32" or "bf16" as given; NULL: the default (inputs.c) */
    const char *weight_wire;   /* --weight-wire "fp32" or "bf16"; NULL: the precision */
    int lua_max_mib, lua_max_minstr;   /* the strategy sandbox's limits; 0: its defaults */
    int search_seconds;     /* compare, -s auto: no new candidate after this long (once one fits); 0: no limit */
    int set_micro_batches, set_replicas, set_chunks;   /* given on the command line (auto keeps them) */
    const char *calib_path;    /* --calibration FILE (plan, emit, sim, compare) */
    const Calibration *calib;  /* loaded by main.c; NULL: the cost table's defaults */
} Args;

typedef struct Cand {
    char strategy[64];
    StrategyOpts o;
    int rc, fits;
    double step, tps, bubble;
    char why[768];
} Cand;

/* inputs.c */
/* Prints "wpgen: " and the message; returns EXIT_BAD_INPUT. */
int bad(const char *fmt, const char *a, const char *b);
/* The strategy's options, as the flags give them; the precision's default from the topology. */
StrategyOpts opts_of(const Args *a, const Topology *topo);
/* The topology and the model of the flags, loaded and checked. 0, or EXIT_BAD_INPUT said. */
int load_inputs(const Args *a, Topology *topo, WpConfig *model, char *name, size_t namelen);
/* Runs a strategy and verifies its plan. 0; EXIT_BAD_INPUT (a strategy's error) or EXIT_REJECTED
 * (the verifier's) with the message in err. */
int make_plan(const char *strategy, const Topology *topo, const WpConfig *model, const char *name,
              const StrategyOpts *o, Plan **out, char *err, size_t errlen);

/* plan_report.c */
int plan_fits(const Plan *p);   /* every rank's peak memory within its device's */
json_t *plan_json(const Plan *p, double intra, double inter, int fits);
void print_summary(const Plan *p, const char *model_name, double intra, double inter, int fits);
void human_bytes(double b, char *out, size_t len);   /* "512 B", "1.50 GiB" */

/* auto.c */
int shipped_strategies(char names[][64], int max);   /* the schedules/ strategies in name order, auto excluded */
int cand_better(const Cand *x, const Cand *y);       /* x fits and is strictly faster than y */
/* The pruned search (search.c) over every shipped strategy; *plan (when not NULL) gets the winner's
 * verified plan, the caller's to free. */
int auto_search(const Args *a, const Topology *topo, const WpConfig *model, const char *name, Cand *best, Plan **plan);

/* the commands */
int cmd_list(void);
int cmd_plan(const Args *a, int emit);   /* plan, or emit with emit set */
int cmd_sim(const Args *a);
int cmd_compare(const Args *a);
int cmd_calibrate(int argc, char **argv);   /* its own flags (cmd_calibrate.c) */
int cmd_probe(int argc, char **argv);       /* its own flags (cmd_probe.c) */

#endif
