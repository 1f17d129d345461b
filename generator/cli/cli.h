/* Shared by wpgen's commands (main.c: list, plan, emit; simulate.c: sim, compare and the
 * `-s auto` search): the parsed flags and the steps every command takes. */
#ifndef WP_CLI_H
#define WP_CLI_H

#include <stddef.h>
#include <jansson.h>
#include "ir/plan.h"
#include "lua/bridge.h"
#include "sim/sim.h"

enum { EXIT_REJECTED = 1, EXIT_BAD_INPUT = 2 };

typedef struct Args {
    const char *cmd, *topo, *model, *strategy, *out, *backend, *comm;
    const char *trace, *svg, *strategies;   /* sim; compare */
    int seq, mbs, micro_batches, replicas, chunks, recompute, json;
    int rounds;             /* tawpipe: micro-batch rounds, 0 = the solver's */
    const char *grouping;   /* tawpipe: auto, node, island or published */
    int set_micro_batches, set_replicas, set_chunks;   /* given on the command line (auto keeps them) */
} Args;

typedef struct Cand {
    char strategy[64];
    StrategyOpts o;
    int rc, fits;
    double step, tps, bubble;
    char why[320];
} Cand;

/* Prints "wpgen: " and the message; returns EXIT_BAD_INPUT. */
int bad(const char *fmt, const char *a, const char *b);
StrategyOpts opts_of(const Args *a);
int load_inputs(const Args *a, Topology *topo, WpConfig *model, char *name, size_t namelen);
int make_plan(const char *strategy, const Topology *topo, const WpConfig *model, const char *name,
              const StrategyOpts *o, Plan **out, char *err, size_t errlen);
int plan_fits(const Plan *p);
json_t *plan_json(const Plan *p, double intra, double inter, int fits);
void print_summary(const Plan *p, const char *model_name, double intra, double inter, int fits);
void human_bytes(double b, char *out, size_t len);

int auto_search(const Args *a, const Topology *topo, const WpConfig *model, const char *name, Cand *best, int verbose);
int cmd_sim(const Args *a);
int cmd_compare(const Args *a);

#endif
