/* The placement solver of group-based weight passing: for the ranks of one pipeline, chooses the
 * groups (one per node, or one per PCIe island), the order of the groups along the inter-node ring, the staging rank of each
 * group (the rank that fetches a chunk over the network and broadcasts it inside the group) and
 * the owner of every chunk (master weights, gradient accumulation, optimizer state).
 *
 * It counts the bytes one training step moves under that transfer pattern (the strategy's
 * script in schedules/lib) per link class: NET between nodes, XI between the PCIe islands of one node,
 * and inside an island; and the bytes through each node's NIC. It minimises, in this order:
 * the network bytes, the busiest NIC, the largest master weights any rank owns (optimizer work
 * and memory), the cross-island bytes, the bytes inside islands. It costs bytes, not time: the
 * simulator (generator/sim) times whole plans once they are built, and `-s auto` and `wpgen
 * compare` choose between strategies by its step time, but placements are not simulated.
 *
 * The transfer pattern, per chunk c owned in ring group j0 (groups 0..D-1 in ring order), in
 * each of K rounds of micro-batches:
 *   weights, once forward and once backward (the last chunk only once: its backward follows its
 *   forward in the same turn; chunk 0's backward shares a turn with its next forward): group 0 gets it from the owner, group j from group j-1's staging
 *   rank (group j0+1 from the owner itself); inside each group the owner or the staging rank
 *   broadcasts it (a chain from the root, in member order, as NCCL's ring does);
 *   gradients: reduced inside each group to the owner or the staging rank, which sends it to the
 *   owner. */
#ifndef WP_PLACEMENT_H
#define WP_PLACEMENT_H

#include <stddef.h>
#include "input/topology.h"

enum { PLACE_AUTO, PLACE_NODE, PLACE_ISLAND, PLACE_PUBLISHED };
enum { LC_NET, LC_XI, LC_IN, LC__COUNT };   /* link classes: between nodes, between islands, inside an island */

typedef struct PlacementCost {
    double bytes[LC__COUNT];    /* per step, one pipeline */
    double nic_max;             /* the busiest NIC, in or out */
    double owner_max;           /* the largest master weights one rank owns */
} PlacementCost;

typedef struct PlacementIn {
    const Topology *topo;
    int n;                      /* ranks in the pipeline */
    const int *devices;         /* [n] the device of each (global index) */
    int nchunks;
    const double *chunk_bytes;  /* [nchunks] at 4 bytes per parameter (fp32) */
    double weight_wire, grad_wire;  /* bytes on the wire per byte of chunk_bytes, for weights and
                                 * for gradients: 0.5 in bf16; 0 counts as 1 (fp32) */
    int mode;                   /* PLACE_* */
    int rounds;                 /* micro-batch rounds per step (0 or 1: one) */
} PlacementIn;

typedef struct Placement {
    int ngroups, by_island;
    int *group_start;           /* [ngroups + 1] into members */
    int *members;               /* [n] indices into PlacementIn.devices, group by group, ring order */
    int *staging;               /* [ngroups] an index into devices */
    int *owner;                 /* [nchunks] an index into devices */
    PlacementCost cost;         /* of this placement */
    PlacementCost published;    /* of the published layout (groups per node, node order, rank i
                                 * of group k owns chunk (D*i + k) mod P, first rank stages) */
    long evaluated;             /* candidate placements costed */
} Placement;

/* 0, or -1 with a message in err. */
int placement_solve(const PlacementIn *in, Placement *out, char *err, size_t errlen);
void placement_free(Placement *p);
/* The cost of a placement (groups, staging and owners filled in). */
void placement_cost(const PlacementIn *in, const Placement *pl, PlacementCost *c);
/* -1, 0, 1 in the solver's order. */
int placement_cost_cmp(const PlacementCost *a, const PlacementCost *b);

/* plan:solve_placement({ranks...}, mode) in strategies (see placement.c). */
struct lua_State;
int placement_lua_solve(struct lua_State *L);

#endif
