/* The search behind `-s auto` and `compare` (search.c): the candidate space of strategies and
 * their parameters, analytic bounds that drop candidates before anything is built, and the
 * survivors planned, verified and simulated, with every drop counted by its reason. */
#ifndef WP_SEARCH_H
#define WP_SEARCH_H

#include "ir/plan.h"
#include "plan/make_plan.h"
#include "lua/bridge.h"
#include "lua/declare.h"
#include "sim/sim.h"
#include "cost/calib.h"

/* A candidate: a strategy with its options, and what it came to. */
typedef struct Cand {
    char strategy[64];
    StrategyOpts o;
    int rc, fits;
    double step, tps, bubble;
    char why[768];
} Cand;

/* What the search may vary: the options the flags give (base, with the strategies' own options
 * given on the command line, which stay fixed for the strategies that declare them) and which of
 * the rest they fix. */
typedef struct SearchSpec {
    StrategyOpts base;
    int fixed_replicas, fixed_chunks;   /* --replicas, --chunks given: not searched */
    int fixed_context_parallel;         /* --context-parallel given (or emit, which runs none yet): not searched */
    int fixed_precision, fixed_grad_precision;
    int search_seconds;                 /* no new candidate after this long once one fits; 0: no limit */
    const Calibration *calib;
    const char *strategies;             /* -s auto: "a,b,..." (names or paths) to search; NULL: the shipped ones */
} SearchSpec;

/* The strategies of a list "a,b,path/c.lua" (NULL: the shipped ones), at most max; -1 on a name
 * too long or empty. */
int search_strategy_list(const char *list, char names[][64], int max);

int cand_better(const Cand *x, const Cand *y);       /* x fits and is strictly faster than y */

/* Why a candidate was not simulated to the end. */
typedef enum {
    PRUNE_IMPOSSIBLE,   /* more chunks or stages than the model has layers */
    PRUNE_MEMORY,       /* the analytic lower bound on a rank's peak memory exceeds its device */
    PRUNE_PRECISION,    /* fp32 where bf16 is the default: more bytes, more memory, half the rate */
    PRUNE_DOMINATED,    /* recomputation where the same candidate fits without it */
    PRUNE_SLOWER,       /* its lower bound on the step time is no better than the best simulated,
                           or its simulation passed the best's step time and was stopped there */
    PRUNE_REFUSED,      /* built: the strategy refused the options, or the verifier the plan */
    PRUNE_NO_FIT,       /* built and verified: the verifier's peak memory exceeds the device */
    PRUNE_TIME,         /* not tried: --search-seconds had passed (and a plan that fits was found) */
    PRUNE__COUNT
} PruneReason;

extern const char *const prune_names[PRUNE__COUNT];

enum { RULE_ONE_REPLICA = PRUNE__COUNT };
/* Whether a rule that compares plans of one strategy holds for it: PRUNE_DOMINATED (recomputation
 * no faster than none) or RULE_ONE_REPLICA (one pipeline on its own no slower than the replicas,
 * and fitting when they fit), as the strategy's declared traits say (recompute_never_faster,
 * one_replica_bound). */
int search_rule_holds(const char *strategy, const StrategyOpts *o, int rule);

typedef struct SearchStats {
    int considered, simulated, fits;
    int pruned[PRUNE__COUNT];
    int stopped;        /* of pruned[PRUNE_SLOWER]: simulations stopped at the best's step time */
    int one_replica;    /* of the pruned: decided by the strategy run on one replica's devices */
    double seconds;     /* wall clock of the whole search */
} SearchStats;

/* The best of a strategy: its candidate, its plan (verified) and simulation, and why. */
typedef struct SearchBest {
    Cand c;             /* c.rc != 0: nothing of this strategy fits */
    Plan *plan;         /* per_strategy, or the winner: its plan; else NULL (freed) */
    SimResult sim;
    double mem_bound, time_bound;   /* the winner's analytic bounds, for the explanation */
    int pruned[PRUNE__COUNT];       /* this strategy's candidates the search set aside, by reason */
    int considered;                 /* this strategy's candidates */
} SearchBest;

typedef struct SearchResult {
    int nstrategies;
    char (*names)[64];
    SearchBest *best;   /* [nstrategies]: each strategy's fastest that fits */
    int winner;         /* index into best of the fastest overall; -1: nothing fits */
    SearchStats stats;
} SearchResult;

/* Searches the strategies names[0..ns) over context-parallel groups (every C dividing the devices
 * of each node and island, and 2C the sequence: docs/context-parallel.md), replicas (every divisor
 * of the ranks), chunks (the default and twice the pipeline's ranks), recomputation and precision, each only where the flags
 * do not fix it. per_strategy: each strategy's best is wanted (compare), so a candidate is
 * dropped as slower only against its own strategy's best; else against the best of all. Progress
 * on stderr when it takes more than a couple of seconds. Returns 0 (even when nothing fits:
 * winner -1); the plans are the caller's to free with search_free. */
int search_run(const SearchSpec *sp, const Topology *topo, const WpConfig *model, const char *name,
               char names[][64], int ns, int per_strategy, SearchResult *out);
void search_free(SearchResult *r);

/* One line: "N candidates: N pruned (N impossible, ...), N simulated, N fit". */
/* The bound from a candidate's one pipeline (search.c): the strategy run with one replica on the
 * first ranks / replicas devices. 0 with *fits and *step (0: stopped past stop_after, or it does
 * not fit), or the refusal's exit status. */
int search_one_replica_bound(const Cand *cd, const Topology *topo, const WpConfig *model, const char *name,
                             double stop_after, const Calibration *calib, int *fits, double *step);

void search_describe(const SearchStats *s, char *out, size_t len);
/* Why a strategy has no plan that fits (b->c.rc != 0), from its candidates' fates: "OOM: nothing
 * fits: N candidates: ..." or, when the time limit left some untried, "no plan that fits found
 * within --search-seconds: ...". For compare's row where building the plan the flags give would
 * take long. */
void search_describe_strategy(const SearchBest *b, char *out, size_t len);

/* The option sets the search tries for strategy s from base: every combination of the values
 * its declared options' `search` gives (ctx: the pipeline's ranks, the candidate's chunks), the
 * earlier option varying slowest; an option base gives (the command line) stays as given.
 * Returns how many, at most max (the first is base itself where nothing is searched). */
enum { SEARCH_MAX_VALUES = 16, SEARCH_MAX_SETS = 64 };
int search_option_sets(const char *s, const StrategyOpts *base, const DeclSearchCtx *ctx, StrategyOpts *out, int max);

/* -s auto (auto.c): the pruned search over every shipped strategy (or sp->strategies); the fastest plan that fits
 * wins. Fills *best (and *plan with its verified plan, when plan is not NULL) and returns 0, or
 * returns 1 when nothing fits (said on stderr). */
int auto_search(const SearchSpec *sp, const Topology *topo, const WpConfig *model, const char *name, Cand *best, Plan **plan);

/* The analytic bounds of one candidate (exported for the tests): a lower bound on the largest
 * peak memory of a rank, in bytes, and on the step time, in seconds. Strategies wpgen does not
 * ship get the bounds every plan obeys (masters, compute). */
double search_mem_bound(const char *strategy, const Topology *topo, const WpConfig *model, const StrategyOpts *o);
double search_time_bound(const char *strategy, const Topology *topo, const WpConfig *model, const StrategyOpts *o,
                         const Calibration *calib);

#endif
