/* The main path of every command: a strategy run into a plan, and the plan verified (make_plan);
 * whether it fits the devices (plan_fits). plan, sim, emit, compare, -s auto and calibrate all
 * build their plans here, so none of them depends on the search. */
#ifndef WP_MAKE_PLAN_H
#define WP_MAKE_PLAN_H

#include <stddef.h>
#include "ir/plan.h"
#include "lua/bridge.h"

enum { EXIT_REJECTED_PLAN = 1, EXIT_BAD_PLAN_INPUT = 2 };

/* Runs a strategy and verifies its plan. 0; 2 (a strategy's error) or 1 (the verifier's) with
 * the message in err. */
int make_plan(const char *strategy, const Topology *topo, const WpConfig *model, const char *name,
              const StrategyOpts *o, Plan **out, char *err, size_t errlen);
int plan_fits(const Plan *p);   /* every rank's peak memory within its device's */
/* Whether a context-parallel group size C fits the inputs: the sequence splits into 2C equal
 * chunks and C divides every node's devices (and island's); then groups holds the topology of
 * the groups (topology_groups). 0, or EXIT_BAD_PLAN_INPUT with one line in err naming the flag. */
int cp_check(const Topology *topo, const WpConfig *model, int C, Topology *groups, char *err, size_t errlen);

#endif
