/* Private to the NCCL communication layer (comm_nccl.c): its host-side bookkeeping, with no CUDA,
 * NCCL or MPI in it so that it is unit tested on machines without a GPU (tests/unit/test_nccl_book.c).
 *
 * The layer issues a turn's operations as one NCCL group, timed by two CUDA events on its stream
 * (the group's start and end). Here a turn is a batch: the operations posted since the last
 * nb_close, each with what names it in messages and traces (kind, turn, peer or group, label,
 * bytes). A batch goes through: open (operations being posted) -> closed (its group issued) ->
 * waited (the compute stream was told to wait for it; the timeout applies from here) -> started
 * (the watchdog saw its start event) -> done (the watchdog saw its end event, at t_done) ->
 * collected (the main thread reported its operations to the trace and forgot them).
 * A batch that is waited for and started but not done timeout seconds after it started has
 * expired, and so has one whose group the host has been issuing for longer than the timeout
 * (NCCL connects peers there, waiting for them): the watchdog names its first operation and
 * aborts the job.
 *
 * Not thread-safe: the layer holds its lock around every call (the main thread posts and
 * collects, the watchdog marks batches started and done). Allocation failure returns -1. */
#ifndef WP_NCCL_BOOK_H
#define WP_NCCL_BOOK_H

#include <stddef.h>
#include "common/comm_book.h"

typedef struct NbOp {
    CommOp op;          /* what names it (common/comm_book.h) */
    int batch;          /* its batch's slot */
} NbOp;

enum { NB_OPEN, NB_CLOSED, NB_WAITED, NB_STARTED, NB_DONE };
typedef struct NbBatch {
    int used, state;    /* state: NB_OPEN ... NB_DONE */
    int nops;           /* its operations still in the book */
    int turn;           /* of its first operation */
    int issuing;        /* the host is in ncclGroupEnd for it (which may wait for a peer): its
                         * events are not recorded yet, and the timeout counts from t_issue */
    double t_wait, t_start, t_done, t_issue;
} NbBatch;

typedef struct NcclBook {
    double timeout;               /* seconds after a batch started; 0: none */
    NbOp *ops; int nops, capops;  /* pending operations, in posting order */
    NbBatch *batches; int nbatches;   /* slots, reused */
    int open;                     /* the open batch's slot, -1: none */
    CommGroups groups;            /* the plan's groups (common/comm_book.h) */
} NcclBook;

void nb_init(NcclBook *b, int rank, int size, double timeout);
void nb_free(NcclBook *b);

/* Posts an operation into the open batch (opening one). Returns the batch's slot, or -1 (memory). */
int nb_post(NcclBook *b, CommKind kind, const CommInfo *info, int peer, int group, size_t bytes, double now);
/* Closes the open batch: its group has been issued. Returns its slot, or -1 if none was open. */
int nb_close(NcclBook *b);
/* The host enters and leaves ncclGroupEnd for a closed batch. */
void nb_issuing(NcclBook *b, int slot, double now);
void nb_issued(NcclBook *b, int slot);
/* Seconds a batch has been pending at `now`: since it started, or since its issue began. */
double nb_age(const NcclBook *b, int slot, double now);
/* Every closed batch is now waited for (comm_wait_turn). */
void nb_waited(NcclBook *b, double now);
/* The watchdog saw slot's start event, or its end event. */
void nb_started(NcclBook *b, int slot, double now);
void nb_done(NcclBook *b, int slot, double t_done);
/* The slot of the first batch (in posting order) that expired at `now`, or -1. */
int nb_expired(const NcclBook *b, double now);
/* The index in ops of the first pending operation of a batch, or -1. */
int nb_first_op(const NcclBook *b, int slot);
/* Calls fn for each operation of the done batches, in posting order, and forgets them; their
 * slots are free again. Returns how many it reported. */
int nb_collect(NcclBook *b, CommTraceFn fn, void *ud);
/* Batches still in the book (not collected). */
int nb_in_flight(const NcclBook *b);

#endif
