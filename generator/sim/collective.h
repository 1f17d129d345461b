/* What a collective moves, as NCCL's ring algorithms move it, for the simulator (sim.c) and the
 * traffic count (traffic.c), which must agree byte for byte: a broadcast or reduce is a
 * pipelined chain of n-1 edges from the root in member order, each carrying the whole buffer (a
 * reduce flows toward the root); all-reduce moves 2(n-1)/n of the buffer over each of the
 * ring's n edges (member i to i+1), all-gather and reduce-scatter (n-1)/n; all edges at once.
 * The latency is the smaller of the ring's steps and a tree's log2 n levels (twice for
 * all-reduce), as NCCL's tuner picks a tree for small messages; all-gather and reduce-scatter
 * have no tree. */
#ifndef WP_COLLECTIVE_H
#define WP_COLLECTIVE_H

#include "ir/op_table.h"

typedef struct CollShape {
    int nedges;             /* 0 for a group of one */
    int start;              /* the member edge 0 starts at: the root (chains) or member 0 (rings) */
    int reversed;           /* data flows along the chain toward the root */
    double edge_bytes;      /* what each edge carries */
    double lat_steps;       /* link latencies the collective waits */
} CollShape;

/* Collective coll (OpColl) over n members, root the root's member index (rooted ones), of a
 * buffer of whole bytes. */
CollShape coll_shape(int coll, int n, int root, double whole);

/* Edge h of a collective: the members (indices) it runs from and to. */
static inline void coll_edge(const CollShape *c, int n, int h, int *from, int *to) {
    int a = (c->start + h) % n, b = (c->start + h + 1) % n;
    *from = c->reversed ? b : a;
    *to = c->reversed ? a : b;
}

#endif
