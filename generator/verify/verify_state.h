/* Private to the verifier: the symbolic state of every rank while the plan is executed
 * abstractly (what each buffer holds, which activations a rank keeps), the bookkeeping that
 * matches transfers and collectives across ranks, and the primitives on it (verify_state.c).
 * The verifier's modules sit on this in one direction: verify.c (the driver, shapes, hazards,
 * compute and local operations) calls verify_comm.c (transfers and collectives); both call
 * verify_state.c. */
#ifndef WP_VERIFY_STATE_H
#define WP_VERIFY_STATE_H

#include <stdint.h>
#include <stddef.h>
#include "ir/plan.h"
#include "ir/op_table.h"

/* What a buffer holds: nothing, weights of a chunk (before or after this step's update), or a
 * partial weight gradient of a chunk: the set of global micro-batches summed into it. */
enum { V_EMPTY, V_W, V_D };
typedef struct Val {
    uint8_t kind, version;
    uint8_t tied;           /* D: summed with its tied partner by TIE (the embedding's and the head mirror's) */
    int32_t chunk, shard, nshards;
    int32_t count;          /* D: micro-batches in set */
    uint64_t *set;          /* D: bitset over the step's micro-batches, owned */
    int32_t from_rank, from_turn;
} Val;

/* Keys of what a rank keeps between operations, beside its buffers. */
enum { K_ACT = 1, K_GRAD, K_STASH, K_STASHW };
static inline uint64_t key_make(int kind, int chunk, int mb) {
    return ((uint64_t)kind << 60) | ((uint64_t)(uint32_t)chunk << 32) | (uint32_t)mb;
}

/* An open-addressing set of keys (linear probing, backward-shift deletion). */
typedef struct KeySet { uint64_t *slots; size_t cap, n; } KeySet;
int keyset_has(const KeySet *s, uint64_t k);
void keyset_add(KeySet *s, uint64_t k);
int keyset_del(KeySet *s, uint64_t k);   /* 1 if it was there */

/* A send waiting for its receive, or a receive waiting for its send, at the receiving rank. */
typedef struct Pending {
    int src, src_turn, op;  /* op: index in the poster's ops */
    Val val;                /* sends: what it carries */
    uint64_t key;           /* A/G sends: the activation */
} Pending;

typedef struct RankState {
    Val *bufs;
    KeySet keep;            /* activations, activation gradients, stashes */
    int turn, posted, unmatched, done;
    Val *slot;              /* per op of the posted turn: what a receive or collective delivers */
    uint8_t *matched;
    Pending *sends; int nsends, capsends;   /* sends to this rank not yet received */
    Pending *recvs; int nrecvs, caprecvs;   /* receives of this rank not yet matched */
    size_t act_bytes, act_peak;             /* activations kept, and their peak */
    size_t host_bytes, host_peak;           /* the same in host memory (offload's stashes) */
    uint16_t *touch;        /* hazard check: per buffer, how ops of the turn use it */
} RankState;

/* One collective call of a group: the k-th call every member makes. */
typedef struct Coll {
    int kind, root, posted, turn0;
    int *rank_op;           /* per member: op index, -1 until posted */
    Val *in;                /* per member: its snapshot */
} Coll;

typedef struct GroupState {
    int *next;              /* per member: index of its next call */
    Coll **calls; int ncalls, capcalls;
} GroupState;

typedef struct Verifier {
    Plan *p;
    int M, words;           /* micro-batches per step; bitset words */
    RankState *rs;
    int maxops;             /* entries of each rank's slot: the most operations of a turn */
    GroupState *gs;
    uint8_t *fwd, *bwd;     /* [chunk * M + mb]: times done */
    char *err; size_t errlen;
    /* replicas executed once (verify_replicas.c); all NULL: every rank executed */
    uint8_t *active;        /* [nranks] executed: replica 0's ranks */
    int npipe;              /* ranks per replica */
    int *image;             /* [replica * npipe + stage] its rank */
    uint8_t *across;        /* [ngroups] one member per replica */
    int32_t *pi;            /* [replica * M + mb]: the micro-batch replica q runs where replica 0 runs mb; -1 */
    long *shift;            /* [replica]: pi_q is mb + shift[q] wherever it is defined; LONG_MIN: not a shift */
    uint64_t *undef;        /* [replica * words]: the micro-batches pi_q leaves undefined */
} Verifier;

/* Values (verify_state.c, as are the functions below). */
void val_clear(Val *v);
void val_copy(Verifier *V, Val *dst, const Val *src);
int val_union(Verifier *V, Val *dst, const Val *src, int *dup_mb);  /* 0, or -1 with the mb counted twice */
size_t val_elems(const Verifier *V, const Val *v);   /* elements: its chunk's or shard's */
const char *val_describe(const Verifier *V, const Val *v, char *buf, size_t len);

/* Errors: "rank R, turn T, OP: message". Always returns -1. */
int verr(Verifier *V, int rank, int opi, const char *fmt, ...) __attribute__((format(printf, 4, 5)));

/* " (this rank's BWD_W of ... has not run ...)" if rank r owes a W pass, else "". */
const char *bw_pending_hint(const Verifier *V, int r, char *buf, size_t len);

/* The two ends of a tied model's embedding as TIE or TIE_ALLREDUCE (rank r's operation opi) is
 * about to sum them: e chunk 0's gradient, at e_at, and h the last chunk's, at h_at (a buffer's or
 * a rank's name, for the message), in a plan whose model ties them over several chunks, each
 * whole, complete and not tied yet. A BWD_W that one of the nowers ranks in owers still owes is
 * named where the gradients are incomplete. 0, or -1 with the rule broken. */
int tied_ends_check(Verifier *V, int r, int opi, const Val *e, const char *e_at, const Val *h, const char *h_at,
                    const int *owers, int nowers);

/* What a rank keeps: add, or take (0 if it was not there). */
void keep_add(Verifier *V, int rank, uint64_t key);
int keep_take(Verifier *V, int rank, uint64_t key);

static inline int group_index(const PlanGroup *g, int rank) {
    for (int i = 0; i < g->n; i++) if (g->ranks[i] == rank) return i;
    return -1;
}

#endif
