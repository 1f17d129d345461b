/* The communication layer of the emitted training step: point-to-point transfers and collectives
 * over groups of ranks for the plan IR's SEND/RECV/BCAST/REDUCE/ALLREDUCE/ALLGATHER/REDUCE_SCATTER
 * (and ring attention's shift round a group), all non-blocking, plus the few blocking calls a
 * trainer needs around the step (barrier, scalar sums, checkpoint gather/scatter).
 * Implementations: runtime/mpi/ (MPI, host buffers) and runtime/nccl/ (NCCL on device buffers,
 * bootstrapped over MPI), both with the blocking calls and the world of runtime/hostmpi/.
 *
 * How emitted code uses it, one turn:
 *
 *     comm_recv(c, w1, n3, WP_BF16, 0, &(CommInfo){17, "W3"});   // post every transfer of the turn,
 *     comm_send(c, w0, n2, WP_BF16, 2, &(CommInfo){17, "W2"});
 *     comm_reduce(c, 1, d0, n1, WP_FP32, 4, &(CommInfo){17, "D1"});
 *     comm_turn_posted(c);                                       // (a device layer issues them here)
 *     model_fwd(...);                                            // run the turn's compute,
 *     comm_wait_turn(c);                                         // then wait for all of them.
 *
 * Formats. The step's operations move elements of a format (common/precision.h): n counts
 * elements, buffers are untyped. Sums (reduce, allreduce, reduce_scatter) add in fp32 and store
 * each partial sum at the format: in bf16 every partial sum is rounded to nearest even where it is
 * stored, as NCCL's bf16 sums are, so a sum over k ranks rounds up to k - 1 times, in an order the
 * library chooses.
 *
 * Device buffers. A layer on a device (NCCL) takes device pointers in the step's operations
 * (comm_device_buffers) and orders them against the compute stream given to comm_set_stream: an
 * operation posted now reads what the work queued on that stream so far wrote, and work queued on
 * it after comm_wait_turn sees the turn's operations complete; the host does not wait, a watchdog
 * enforces the timeout. A host layer (MPI) takes host memory: a compute backend on a device stages
 * through host buffers (for tests of several ranks on one GPU).
 *
 * A buffer handed to a posting call belongs to the layer until comm_wait_turn returns: do not
 * read a receive buffer or write a send buffer in between.
 *
 * Matching. The k-th send from a to b matches the k-th receive at b from a, whatever the labels
 * (MPI's non-overtaking order on one tag); a receive whose size differs from its send's is a
 * clear error. Collectives on a group match in the order they are posted, and every member must
 * post the same collectives on that group in the same order, with the same n and root (MPI's rule
 * for collectives; nothing here can check it cheaply). The plan verifier guarantees both: it
 * proves every send has its receive of the same bytes and every group's members run the same
 * collectives in the same order, and emitted code posts exactly the plan's operations in the
 * plan's order.
 *
 * Sizes. n is a size_t everywhere: an operation longer than the library's int counts goes as
 * several calls of a piece each (common/comm_book.h; WP_COMM_MAX_ELEMS=N sets the piece, a test
 * hook; a bad value ends the job as bad input, COMM_BAD_INPUT_STATUS), counted and traced as one.
 *
 * Failure. Every wait has a timeout (default 300 s; environment variable WP_COMM_TIMEOUT in
 * seconds, or comm_set_timeout), except comm_bcast_bytes_save's, which waits for rank 0 to write
 * a checkpoint and has its own (WP_SAVE_TIMEOUT; default none). When it passes, the rank prints one line to stderr naming
 * itself, the turn, the operation, the peer or group and the label still pending, and aborts the
 * whole job (exit status COMM_ABORT_STATUS) instead of hanging. A failing MPI or NCCL call does
 * likewise, naming the rank, the file and line, the call and the library's error text (every
 * failure of the runtime ends through common/fail.h).
 *
 * Calls are made from one thread (the compute may use OpenMP inside; MPI_THREAD_FUNNELED). */
#ifndef WP_COMM_H
#define WP_COMM_H

#include <stddef.h>
#include <stdint.h>
#include "common/precision.h"

#define COMM_ABORT_STATUS 3       /* exit status of a job aborted by this layer */
#define COMM_BAD_INPUT_STATUS 2   /* ... and of one whose environment it cannot read (WP_COMM_TIMEOUT=abc) */

typedef struct Comm Comm;

/* Names an operation in error messages and traces: the plan's turn (-1: outside the step) and a
 * short label, such as "W3" or "grad of chunk 2". The operation's name comes from the call.
 * The label is copied (up to 47 characters), so it may live on the caller's stack. NULL is
 * allowed: turn -1, no label. */
typedef struct CommInfo {
    int turn;
    const char *label;
} CommInfo;

/* Kinds of operations, for counters and traces. COMM_UTIL counts the blocking calls. */
typedef enum {
    COMM_SEND, COMM_RECV, COMM_BCAST, COMM_REDUCE, COMM_ALLREDUCE, COMM_ALLGATHER,
    COMM_REDUCE_SCATTER, COMM_UTIL, COMM__NKINDS
} CommKind;

extern const char *const comm_kind_names[COMM__NKINDS];   /* "SEND", "RECV", ... */

/* --- Setup ------------------------------------------------------------------------------- */

/* Initializes MPI (unless already initialized) and the layer; reads WP_COMM_TIMEOUT, WP_SAVE_TIMEOUT and
 * WP_COMM_MAX_ELEMS. */
Comm *comm_init(int *argc, char ***argv);
/* Waits for anything still pending, frees the groups, finalizes MPI if comm_init started it. */
void comm_finalize(Comm *c);
int comm_rank(const Comm *c);
int comm_size(const Comm *c);
/* Ranks of the job on this rank's node, this one included (they share its cores and memory). */
int comm_local_size(const Comm *c);

/* Declares a group: world ranks in order, member i holding shard i in ALLGATHER/REDUCE_SCATTER.
 * Every rank declares every group of the plan, in the plan's order, so that the returned indices
 * (0, 1, 2, ...) agree with the plan's group indices everywhere; the members create the group's
 * communicator (collective over the members, once, at start). Returns the group index. */
int comm_add_group(Comm *c, const int *ranks, int n);

/* Seconds after which a wait aborts the job; 0 waits forever. */
void comm_set_timeout(Comm *c, double seconds);

/* Aborts the whole job: prints "rank R: MESSAGE" and exits every rank with status `status`. */
void comm_abort(Comm *c, int status, const char *fmt, ...) __attribute__((format(printf, 3, 4), noreturn));

/* --- The step's operations (non-blocking: they post; comm_wait_turn completes) -------------- */

/* buf, n elements of format dt, to / from a world rank. */
void comm_send(Comm *c, const void *buf, size_t n, WpDtype dt, int peer, const CommInfo *info);
void comm_recv(Comm *c, void *buf, size_t n, WpDtype dt, int peer, const CommInfo *info);

/* Collectives on group g; `root` is a world rank, a member of g. Sums as the header says. */
void comm_bcast(Comm *c, int g, void *buf, size_t n, WpDtype dt, int root, const CommInfo *info);
/* buf summed over the group into buf at root; the other members' buf is left as it was. */
void comm_reduce(Comm *c, int g, void *buf, size_t n, WpDtype dt, int root, const CommInfo *info);
void comm_allreduce(Comm *c, int g, void *buf, size_t n, WpDtype dt, const CommInfo *info);

/* Shards of a buffer of n elements over the k members of a group: member i holds
 * [i*n/k, (i+1)*n/k), so shards differ in size by at most one and may be empty (n < k). */
size_t comm_shard_offset(size_t n, int k, int i);
size_t comm_shard_len(size_t n, int k, int i);

/* Every member contributes its shard (comm_shard_len elements, at `shard`) and gets the whole
 * buffer in `full` (n elements). `shard` may be its own place in full: in place. */
void comm_allgather(Comm *c, int g, const void *shard, void *full, size_t n, WpDtype dt, const CommInfo *info);
/* The sum over the group of `full` (n elements, each member's own); member i gets shard i of the
 * sum in `shard`. full and shard must not overlap. */
void comm_reduce_scatter(Comm *c, int g, const void *full, void *shard, size_t n, WpDtype dt, const CommInfo *info);

/* One step of a ring round group g (context parallelism's ring attention, cpu/model_cp.c): member i
 * sends `send` to member i + 1 and receives `recv` from member i - 1 (modulo the group's size; the
 * members in comm_add_group's order), n elements each: comm_send and comm_recv to and from those
 * members' world ranks, posted, counted, traced and matched as those are. send and recv must not
 * overlap. */
void comm_ring_shift(Comm *c, int g, const void *send, void *recv, size_t n, WpDtype dt, const CommInfo *info);

/* Every operation of the turn has been posted: a device layer issues them together here (NCCL:
 * the turn's group ends). A host layer has started them already and does nothing. */
void comm_turn_posted(Comm *c);
/* 1 when the step's operations take device pointers and order themselves on streams (NCCL); 0
 * when they take host memory (MPI). */
int comm_device_buffers(const Comm *c);
/* The compute stream (a cudaStream_t) a device layer orders its operations against; host layers
 * ignore it. */
void comm_set_stream(Comm *c, void *stream);

/* Completes everything posted: polls, aborting on timeout. Returns the seconds it waited. (A
 * device layer makes the compute stream wait instead, and returns 0.) */
double comm_wait_turn(Comm *c);
/* Lets posted transfers advance without waiting. MPI moves large messages only inside MPI calls
 * (Open MPI has no progress thread), so a long compute may call this now and then (between
 * layers, say) to overlap them for real; it also starts delayed sends whose time has come. */
void comm_progress(Comm *c);

/* --- Blocking calls over the whole world, outside the step ---------------------------------
 * Each first completes anything still pending, and uses the same timeout. */

void comm_barrier(Comm *c);
/* x[0..n) summed over all ranks, in place (the loss, the squared gradient norm). */
void comm_allreduce_double(Comm *c, double *x, int n);
/* Bytes from root to every rank (configuration, checkpoint headers). */
void comm_bcast_bytes(Comm *c, void *buf, size_t nbytes, int root);
/* The same, for the ranks that wait while root writes a checkpoint: a save of a large model to a
 * slow disk can take far longer than any transfer, so this wait has the save timeout instead of
 * the communication timeout: WP_SAVE_TIMEOUT seconds (or comm_set_save_timeout), default 0, no
 * limit (a rank that dies while saving still ends the job: mpirun sees it exit). */
void comm_bcast_bytes_save(Comm *c, void *buf, size_t nbytes, int root);
void comm_set_save_timeout(Comm *c, double seconds);
/* Concatenates every rank's `mine` (n floats, n may differ per rank and be 0) in rank order into
 * `all` at rank 0, which has room for `cap` floats; if counts is not NULL, rank 0 gets each
 * rank's n in counts[0..size). Returns the total at rank 0, 0 elsewhere. For checkpoints. */
size_t comm_gather(Comm *c, const float *mine, size_t n, float *all, size_t cap, size_t *counts);
/* The same for bytes (traces, text): n, cap and counts in bytes. */
size_t comm_gather_bytes(Comm *c, const void *mine, size_t n, void *all, size_t cap, size_t *counts);
/* The inverse, for loading: rank 0 holds `all`, `total` floats, the concatenation in rank order;
 * every rank gets the next n floats (its own n) in `mine`. The counts must add up to total. */
void comm_scatter(Comm *c, const float *all, size_t total, float *mine, size_t n);

/* --- Counters, traces, emulation ------------------------------------------------------------ */

/* Per kind: calls and payload bytes named by the calls (a send's or receive's n elements, the
 * collective's whole buffer, at their format), not bytes on the wire. wait_s: time spent in waits. */
typedef struct CommStats {
    uint64_t calls[COMM__NKINDS];
    uint64_t bytes[COMM__NKINDS];
    double wait_s;
} CommStats;
const CommStats *comm_stats(const Comm *c);
void comm_reset_stats(Comm *c);

/* Seconds since comm_init, on the clock the trace events use. */
double comm_now(const Comm *c);

/* One completed operation of the step. t_done is when a poll saw it complete. label is valid
 * only during the callback. peer: the other rank (SEND/RECV), the root (BCAST/REDUCE) or -1;
 * group: -1 for SEND/RECV. */
typedef struct CommEvent {
    CommKind kind;
    int turn;
    const char *label;
    int peer, group;
    size_t bytes;
    double t_post, t_done;
} CommEvent;
typedef void (*CommTraceFn)(void *ud, const CommEvent *e);
/* Calls fn for every completed step operation (NULL: off). */
void comm_set_trace(Comm *c, CommTraceFn fn, void *ud);

/* Topology emulation: the link between this rank and `peer` (-1: every peer) is emulated, latency
 * alpha seconds and beta seconds per byte (1 / bandwidth). A send over it completes, on both
 * sides, only once the link would have carried it (alpha + bytes * beta after it was posted,
 * queued behind the link's earlier sends): the sender tells the receiver when, in a companion
 * message of 8 bytes, so both ends of a link must set it (train.c sets every pair). 0, 0 turns
 * it off (the default). Collectives are delayed only by comm_emulate. */
void comm_set_link(Comm *c, int peer, double alpha, double beta);

/* The emulated cluster on top of comm_set_link's links (MPI backend; collective over the world):
 * node_of_rank[r] is rank r's emulated node. Sends between nodes share their nodes' NICs (one per
 * node, net_beta seconds per byte each way, net_alpha latency) instead of a link per peer, and
 * collectives complete only after the time the simulator's collective model gives them (ring or
 * chain over intra_* links inside a node and the NICs between). runtime/mpi/emulate.h says how. */
void comm_emulate(Comm *c, const int *node_of_rank, double net_alpha, double net_beta, double intra_alpha, double intra_beta);

#endif
