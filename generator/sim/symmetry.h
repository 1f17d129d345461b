/* The simulator's symmetry shortcut (symmetry.c), for sim.c: a plan whose replicas are the same
 * pipeline moved along the cluster (same operations, peers and buffers, on devices that map onto
 * each other link for link) runs the same in every replica, so only replica 0 is simulated (or
 * the first k replicas, where the move must skip k replicas to map nodes onto nodes). Its
 * flows stand for one flow per replica: each resource (a device port, an island uplink, a NIC)
 * stands for its orbit under the move from one replica to the next, and a flow counts on it as
 * many times as flows of its orbit cross one resource of that orbit (R / orbit size). Max-min
 * fair rates are unique, so they are the same on every replica; the all-reduce across replicas
 * is simulated as its edge out of replica 0 on the real links, its latency from all its edges. */
#ifndef WP_SIM_SYMMETRY_H
#define WP_SIM_SYMMETRY_H

#include <stdint.h>
#include "ir/plan.h"

typedef struct SimSym {
    int R;                  /* moves: the orbit of every rank (replicas / k) */
    int k;                  /* replicas simulated: 0 .. k-1 */
    int nreps; int *reps;   /* their ranks, the ones simulated */
    int *rep;               /* [nranks] the rank of replica (its replica mod k) at the same stage */
    int *sigma;             /* [nranks] the rank at the same stage k replicas on */
    uint8_t *across;        /* [ngroups] a group across the replicas: the same number of members in each,
                             * in blocks of replica order (the all-reduce among replicas' owners, or over
                             * all ranks for a replicated chunk) */
    int nres; int *res_rep; double *res_w;   /* [nres] a resource's orbit representative, and R / orbit size */
} SimSym;

/* Whether the plan's replicas are moves of each other on t: 1 with s filled (resources not yet),
 * else 0 (nothing to free). */
int sym_find(const Plan *p, const Topology *t, SimSym *s);

/* The resources' orbits, from the engine's resource numbering: per device its send and receive
 * ports (dev_tx, dev_rx), per node its first island and first NIC resource (pairs: out, in).
 * 0, or -1 where the move does not map the resources onto each other (then sym_free and
 * simulate everything). */
int sym_resources(SimSym *s, const Plan *p, const Topology *t, int nres, const int *dev_tx, const int *dev_rx,
                  const int *res_isl, const int *res_nic, const double *cap);

void sym_free(SimSym *s);

#endif
