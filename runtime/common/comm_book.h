/* What every communication layer (common/comm.h: runtime/mpi, runtime/nccl) keeps the same way,
 * written once: the plan's groups as the layer declares them, what names an operation in its
 * error messages and traces, the checks of a call's arguments, the timeouts from the environment,
 * the clock and the counters. Plain C, no MPI, CUDA or NCCL, so that it is unit tested anywhere
 * (tests/unit/test_comm_book.c). A layer keeps only what is its own: how operations are posted,
 * waited for and timed, and its library's handles (a group's communicator, beside the table).
 *
 * Failing: a check returns -1 (or NULL) with one line in err, which the layer prints as it fails
 * ("comm: rank R: ..."), so both layers say the same for the same mistake. */
#ifndef WP_COMM_BOOK_H
#define WP_COMM_BOOK_H

#include <stddef.h>
#include <time.h>
#include "common/comm.h"

/* ---- groups ---- */

typedef struct CommGroup { int n, *ranks, me; } CommGroup;   /* me: this rank's index, -1 if not a member */
typedef struct CommGroups {
    int rank, size;                /* this rank and the world's size */
    CommGroup *g; int n, cap;
} CommGroups;

void cb_groups_init(CommGroups *t, int rank, int size);
void cb_groups_free(CommGroups *t);
/* Declares the next group: world ranks in order, validated as comm.h says. Returns its index, or
 * -1 with err. */
int cb_group_add(CommGroups *t, const int *ranks, int n, char *err, size_t errlen);
/* rank's index in group g, or -1 when it is not a member (or g is no group). */
int cb_group_index(const CommGroups *t, int g, int rank);
/* "group 2 (ranks 0,2)"; more than nine members: the first eight, "...", the last. */
const char *cb_group_desc(const CommGroups *t, int g, char *buf, size_t len);

/* ---- operations: what names one in messages and traces ---- */

typedef struct CommOp {
    int kind;              /* CommKind */
    const char *name;      /* comm_kind_names[kind], or a blocking call's own name */
    int turn, peer, group; /* peer: the other rank (SEND/RECV), the root (BCAST/REDUCE), or -1 */
    size_t bytes;
    double t_post;
    char label[48];
} CommOp;

/* An operation posted at `now`: info's turn and label (copied; NULL: turn -1, no label), the
 * kind's name unless name says otherwise. */
CommOp cb_op(CommKind kind, const char *name, const CommInfo *info, int peer, int group, size_t bytes, double now);
/* "SEND "W3" to rank 1 in turn 17 (1024 bytes)", "REDUCE "D1" to root rank 0 on group 2 (ranks
 * 0,2) in turn 5 (4096 bytes)". */
const char *cb_op_desc(const CommGroups *t, const CommOp *op, char *buf, size_t len);
/* The trace's record of an operation that completed at t_done. */
CommEvent cb_op_event(const CommOp *op, double t_done);
/* The counters of a step operation posted (COMM_UTIL: of a blocking call). */
void cb_count(CommStats *s, CommKind kind, size_t bytes);

/* ---- checks of a call's arguments ---- */

/* A send's or receive's peer: a rank of the world, this one included (MPI and NCCL both send to
 * self; that a plan never does is the verifier's rule, not the layer's). */
int cb_check_peer(const CommGroups *t, CommKind kind, int peer, const CommInfo *info, char *err, size_t errlen);
/* Group g of a collective, which this rank must be a member of. */
const CommGroup *cb_member(const CommGroups *t, CommKind kind, int g, const CommInfo *info, char *err, size_t errlen);
/* The root's index in group g (which cb_member checked). */
int cb_root(const CommGroups *t, CommKind kind, int g, int root, const CommInfo *info, char *err, size_t errlen);
/* An all-gather's shard (its comm_shard_len elements of es bytes) is its own place in full or
 * apart from it; sets *in_place. */
int cb_check_allgather(const CommGroup *gr, const void *shard, const void *full, size_t n, size_t es,
                       const CommInfo *info, int *in_place, char *err, size_t errlen);
/* A reduce-scatter's shard is apart from full. */
int cb_check_reduce_scatter(const CommGroup *gr, const void *full, const void *shard, size_t n, size_t es,
                            const CommInfo *info, char *err, size_t errlen);

/* info's label ("" without) and turn (-1 without), as messages print them. */
const char *cb_label(const CommInfo *info);
int cb_turn(const CommInfo *info);

/* ---- pieces: operations longer than a library's int counts ----
 * MPI counts elements (and displacements) in ints, so an operation of more than INT_MAX elements
 * is cut into pieces of at most `max` elements each, one library call a piece, posted in order;
 * the k-th piece at one end matches the k-th at the other, as whole operations do (comm.h). */

/* The most elements a piece holds: INT_MAX, or WP_COMM_MAX_ELEMS=N (1 to INT_MAX, its row in
 * common/settings.c), a test hook that makes small operations take the piecewise path. 0, or -1
 * with err for another value. */
int cb_env_max_elems(size_t *out, char *err, size_t errlen);
/* How many pieces n elements take: at least one, so that an empty operation still matches. */
size_t cb_pieces(size_t n, size_t max);
/* Piece k of n elements: its first element (returned) and its length (*len). */
size_t cb_piece(size_t n, size_t max, size_t k, size_t *len);

/* ---- the environment and the clock ---- */

/* Seconds from environment variable name, a row of the runtime's settings (common/settings.c:
 * WP_COMM_TIMEOUT, WP_SAVE_TIMEOUT; unset or empty: its default); -1 with err for a bad value. */
int cb_env_seconds(const char *name, double *out, char *err, size_t errlen);
/* Seconds since t0 on CLOCK_MONOTONIC (comm_now's clock, the trace's). */
double cb_since(const struct timespec *t0);

#endif
