/* The analytic bounds of the search (bounds.c): what the bounds may assume of a strategy (its
 * declared traits), and the lower bounds on a candidate's step time and peak memory (search_mem_bound
 * and search_time_bound are declared in search.h, for the tests). */
#ifndef WP_BOUNDS_H
#define WP_BOUNDS_H

#include "search/search.h"

typedef enum { SHAPE_OTHER, SHAPE_WEIGHT_PASSING, SHAPE_ACT_PASSING } StrategyShape;

/* What the bounds may assume of a strategy's plans for given options: its declared `traits`
 * (lua/declare.h; docs/strategies.md lists them), resolved for the options. A strategy that
 * declares none gets SHAPE_OTHER and nothing else: the bounds every plan obeys (masters,
 * compute). test_search checks every bound on every candidate of its clusters. */
typedef struct Traits {
    StrategyShape shape;    /* passing = "weights": every rank runs its own micro-batches whole through
                               every chunk; "activations": stages, stage s holding chunks s, s + P, ... */
    int split;              /* split_backward: B and W passes (zero bubble): between them a chunk's
                               B-to-W keep (config.h, wp_keep_bytes) beside its stash */
    int all_forward;        /* every micro-batch of a rank goes forward through every chunk before
                               its first backward */
    int ring;               /* a weight ring: chunk 0's owner is the pipeline's rank 0 and
                               its weights reach rank r only through the hops 0 -> 1 -> ... -> r */
    int ring_tail;          /* and a rank's last compute is its backward of chunk 0, whose gradient
                               then travels on r -> r+1 -> ... -> last -> rank 0 (not split) */
    int ring_rounds;        /* the ring's default turns in rounds of K micro-batches per weight pass */
    int pass_k;             /* K as given (0: not given) */
    int pass_k_default;     /* K where not given */
    int ends;               /* the embedding and the head replicated on every rank, beside the ring */
    int gathers;            /* two whole-chunk weight and two gradient buffers on every rank, gathered */
    int gather_per_mb;      /* and gathered again for every micro-batch */
    int chunks_per_layer;   /* default_chunks = "layers": one chunk per layer by default */
    int groups;             /* the placement solver's groups (bcast, reduce inside, one copy between) */
    int group_rounds;       /* their rounds (0: the solver's choice) */
    int group_mode;         /* PLACE_* of place/placement.h */
    int stages_need_layers; /* a pipeline of more ranks than layers is impossible */
    int recompute_never_faster;   /* the search's rules that compare two plans of the strategy: */
    int one_replica_bound;        /* PRUNE_DOMINATED, RULE_ONE_REPLICA (search.h) */
    int first_layers, last_layers; /* activation passing: the first and last stages' layers (0: the even split) */
} Traits;

/* Strategy s's traits for the options o on nranks ranks (its declaration, read once). */
Traits strategy_traits(const char *s, const StrategyOpts *o, int nranks, int layers);

/* The chunk count a candidate runs with: its option, or the strategy's default (ranks of the
 * pipeline, no more than the layers; one per layer with chunks_per_layer). 0 where it does not know. */
int bound_chunk_count(const Traits *tr, const WpConfig *m, int npipe, int option);

/* The weight and gradient buffers rank 0 of the weight ring (its default turns: C chunks
 * on P ranks, J rounds) holds at least for the streams waiting there between rounds (0 where
 * C < P or J < 2), as the script's pool counts them (bounds.c; test_search checks them on plans). */
void bound_ring_wait_buffers(int C, int P, int J, int *wbufs, int *dbufs);

/* The most cells (ranks x turns) ring_turns_bound walks for one candidate: 1,024 ranks of one
 * pipeline (about 3 million) take a few hundredths of a second. */
#define RING_CELLS_MAX 4e7

/* search_time_bound, with the turn-by-turn walks (rings, placement groups) where their
 * cells are at most ring_cells (0: not at all; the search computes them only for the candidates
 * the cheaper bounds leave). */
double bound_time(const Traits *tr, const Topology *topo, const WpConfig *model, const StrategyOpts *o,
                  const Calibration *calib, double ring_cells);
/* search_mem_bound for resolved traits. */
double bound_mem(const Traits *tr, const Topology *topo, const WpConfig *model, const StrategyOpts *o);

#endif
