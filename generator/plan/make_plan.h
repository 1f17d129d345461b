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
/* Every rank's peak memory within its device's, and every node's host memory (its ranks' offloaded
 * stashes, PlanMem.host, summed: each rank's peak, so a bound) within the node's. */
int plan_fits(const Plan *p);
size_t plan_node_host(const Plan *p, int node);   /* the host memory node's ranks keep at most */
int plan_host_node(const Plan *p);                /* the node keeping the most */
/* Why p does not fit, for "the plan does not fit: ...": the device's peak ("rank R needs N
 * bytes") or, where that fits, the node's host memory. */
void plan_misfit(const Plan *p, char *out, size_t len);
/* Whether a context-parallel group size C fits the inputs: the sequence splits into 2C equal
 * chunks and C divides every node's devices (and island's); then groups holds the topology of
 * the groups (topology_groups). 0, or EXIT_BAD_PLAN_INPUT with one line in err naming the flag. */
int cp_check(const Topology *topo, const WpConfig *model, int C, Topology *groups, char *err, size_t errlen);

#endif
