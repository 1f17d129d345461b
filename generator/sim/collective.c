/* The collectives' shapes (collective.h): one row per collective of how NCCL's algorithms move it. */
#include "sim/collective.h"

static const struct {
    uint8_t chain;          /* a chain from the root rather than a ring */
    uint8_t toward_root;    /* the chain flows toward the root */
    uint8_t tree;           /* NCCL has a tree algorithm for it */
    double passes;          /* ring: how many times (n-1)/n of the buffer crosses each edge */
} algo[COLL__COUNT] = {
    [COLL_BCAST] = { 1, 0, 1, 1 },
    [COLL_REDUCE] = { 1, 1, 1, 1 },
    [COLL_ALLREDUCE] = { 0, 0, 1, 2 },      /* reduce-scatter then all-gather */
    [COLL_ALLGATHER] = { 0, 0, 0, 1 },
    [COLL_REDUCE_SCATTER] = { 0, 0, 0, 1 },
};

CollShape coll_shape(int coll, int n, int root, double whole) {
    CollShape c = { 0 };
    if (n < 2) return c;
    int chain = algo[coll].chain;
    c.nedges = chain ? n - 1 : n;
    c.start = chain ? root : 0;
    c.reversed = algo[coll].toward_root;
    c.edge_bytes = chain ? whole : algo[coll].passes * (n - 1) / n * whole;
    int lg = 0;
    while ((1 << lg) < n) lg++;
    double ring = algo[coll].passes * (n - 1), tree = algo[coll].tree ? algo[coll].passes * lg : ring;
    c.lat_steps = ring < tree ? ring : tree;
    return c;
}
