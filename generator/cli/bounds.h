/* The analytic bounds of the search (bounds.c): what the bounds may assume of each shipped
 * strategy, and the lower bounds on a candidate's step time and peak memory (search_mem_bound
 * and search_time_bound are declared in search.h, for the tests). */
#ifndef WP_BOUNDS_H
#define WP_BOUNDS_H

#include "cli/search.h"

typedef enum { SHAPE_OTHER, SHAPE_WEIGHT_PASSING, SHAPE_ACT_PASSING } StrategyShape;

/* What the bounds may assume of a shipped strategy (each read off its script in schedules/;
 * test_search checks every bound on every candidate of its clusters). Other scripts: nothing. */
typedef struct Traits {
    const char *name;
    StrategyShape shape;    /* weight passing: every rank runs its own micro-batches whole through
                               every chunk; activation passing: 1F1B's stages */
    int split;              /* the backward split into B and W passes (zero bubble): between them a
                               chunk's B-to-W keep (config.h, wp_keep_bytes) beside its stash */
    int all_forward;        /* every micro-batch of a rank goes forward through every chunk before
                               its first backward (weipipe-naive's one round; fsdp gather-once) */
    int ring;               /* lib/weipipe.lua's ring: chunk 0's owner is the pipeline's rank 0 and
                               its weights reach rank r only through the hops 0 -> 1 -> ... -> r */
    int ring_tail;          /* and a rank's last compute is its backward of chunk 0, whose gradient
                               then travels on r -> r+1 -> ... -> last -> rank 0 (not split) */
    int gathers;            /* fsdp: two whole-chunk weight and two gradient buffers on every rank */
    int pass_mbs;           /* takes --pass-micro-batches K (lib/weipipe.lua's rounds of K) */
} Traits;

/* A shipped strategy's traits; other scripts: SHAPE_OTHER and nothing else. */
Traits strategy_traits(const char *s);

/* The chunk count a candidate runs with: its option, or the strategy's default (ir: ranks of the
 * pipeline, no more than the layers; fsdp one per layer). 0 where it does not know. */
int bound_chunk_count(const char *s, const WpConfig *m, int npipe, int option);

/* The weight and gradient buffers rank 0 of lib/weipipe.lua's ring (its default turns: C chunks
 * on P ranks, J rounds) holds at least for the streams waiting there between rounds (0 where
 * C < P or J < 2), as the script's pool counts them (bounds.c; test_search checks them on plans). */
void bound_ring_wait_buffers(int C, int P, int J, int *wbufs, int *dbufs);

/* The most cells (ranks x turns) ring_turns_bound walks for one candidate: 1,024 ranks of one
 * pipeline (about 3 million) take a few hundredths of a second. */
#define RING_CELLS_MAX 4e7

/* search_time_bound, with the turn-by-turn walks (weipipe's rings, tawpipe's groups) where their
 * cells are at most ring_cells (0: not at all; the search computes them only for the candidates
 * the cheaper bounds leave). */
double bound_time(const char *strategy, const Topology *topo, const WpConfig *model, const StrategyOpts *o,
                  const Calibration *calib, double ring_cells);

#endif
