/* The MPI layer's emulated links and cluster (common/comm.h: comm_set_link, comm_emulate): when
 * an emulated link delivers a send, and how long the simulator's collective model says a
 * collective takes, so that topology effects can be measured on one machine. What is booked lives
 * here (the links per peer, the nodes' NICs in shared memory); comm_mpi.c's pending list holds
 * the operations back until the times this says.
 *
 * An emulated send is started for real at once, with a companion message of 8 bytes on its own
 * tag that carries when the emulated link delivers it (absolute CLOCK_MONOTONIC seconds). The
 * receiver posts the receive itself only at its first MPI call after that time, so MPI copies
 * the bytes then, as the simulator says a CPU rank does once they arrived; the sender's send
 * completes no sooner than that time either. The link is the sender's to book (its NIC's, its
 * earlier sends', from its post); the rest is the receiver's, so a sender busy computing does
 * not delay it: a send held back at the sender started only at the sender's next MPI call, up
 * to a layer later than its link delivered it, which the simulator does not model (bench-sim,
 * zb1 on 2 emulated nodes: each activation and gradient 3-4 ms late, the step 10% over the
 * model). The simulator starts a transfer at the receiver's first call instead of the sender's
 * post; the emulation does not (booking the link at the receiver's call, its sends complete
 * only once the receiver copied, which the simulator does not claim: the emulated weight
 * passing of bench-sim's zero-bubble regime measured 13-19% over the model that way).
 *
 * The emulated cluster (comm_emulate, WP_EMULATE=1), what the simulator (generator/sim) claims:
 *  - NICs. Each emulated node has one NIC, a transmit and a receive side, shared by all its
 *    ranks. A send between nodes reserves its bytes' time (bytes x seconds per byte of the
 *    network) on the sender's node's transmit side and the receiver's node's receive side, first
 *    come first served: it starts when both are free (and after this rank's earlier sends to that
 *    peer), holds both until it ends, and is delivered latency after that end.
 *    Two ranks of a node sending at once to another node so take twice as long as one: the time
 *    the simulator's fair sharing of a NIC gives the pair (each at half the bandwidth).
 *    The ranks of a node are processes: the book of when each NIC side is free is a window of
 *    shared memory (MPI_Win_allocate_shared over the ranks on this machine), absolute
 *    CLOCK_MONOTONIC times as doubles, updated under a spinlock in the same window. Emulated
 *    nodes are meant to be ranks of one machine (make bench-sim); ranks on other machines keep
 *    their own book, and traffic of ranks on another machine is not seen.
 *  - Collectives. When the MPI collective completes, its completion is held back by the time the
 *    simulator's collective model gives it (sim/collective.h, the same rows in emu_collective_s): NCCL's ring
 *    (chains for broadcast and reduce), every edge at once, the most loaded of the ranks' ports
 *    (inside a node) and the nodes' NIC sides (between nodes) deciding the time, plus the latency
 *    steps (ring or tree, the fewer) at the slowest link's latency, counted from the rank's first
 *    MPI call after posting it (the simulator's start: once every member has called MPI after the
 *    last one posted; libnbc's later rounds wait for later calls, which the simulator does not
 *    model, so counting from the real completion made the emulation slower than the model by
 *    those calls: 75 ms against 66 in fsdp's backward turns). Each rank also books its own
 *    edge between nodes, if it has one, on the NICs' book from then, as a send: two collectives
 *    at once (fsdp's backward turns: a reduce-scatter and the next all-gather), or a collective
 *    and a send, take the NIC in turn, as the simulator shares it between them. The members then
 *    agree on the latest of their releases (an all-reduce of one double, MAX): a collective ends
 *    for all its members at once, as in the simulator. Without the booking two such collectives
 *    took 46 ms in a turn the simulator gives 65 (bench-sim, fsdp on 2 emulated nodes, 0.05
 *    GB/s: the step 7.6% over its measured time). */
#ifndef WP_MPI_EMULATE_H
#define WP_MPI_EMULATE_H

#include <mpi.h>
#include <stddef.h>
#include <time.h>
#include "common/comm_book.h"

typedef struct MpiEmu {
    int rank, size;
    double t0_abs;              /* the layer's clock's zero in absolute CLOCK_MONOTONIC seconds */
    /* links per peer (NULL until emu_set_link) */
    double *alpha, *beta, *link_free;
    /* the emulated cluster (node NULL until emu_cluster) */
    int *node, nnodes;
    double net_alpha, net_beta, intra_alpha, intra_beta;
    MPI_Win nic_win;            /* the shared book: a lock, then tx and rx free times per node */
    volatile int *nic_lock;
    double *nic_free;           /* [2 * nnodes]: tx of node k at 2k, rx at 2k + 1 */
} MpiEmu;

/* Nothing emulated yet; t0 is the layer's clock's zero. */
void emu_init(MpiEmu *e, int rank, int size, const struct timespec *t0);
/* Frees the book (its window: collective over the machine's ranks, as comm_finalize is). */
void emu_free(MpiEmu *e);
/* comm_set_link, comm_emulate (world: the layer's world communicator). */
void emu_set_link(MpiEmu *e, int peer, double alpha, double beta);
void emu_cluster(MpiEmu *e, MPI_Comm world, const int *node_of_rank, double net_alpha, double net_beta,
                 double intra_alpha, double intra_beta);

/* The link to or from `peer` is emulated: its sends carry a companion, its receives wait for theirs. */
int emu_link(const MpiEmu *e, int peer);
/* When the emulated link delivers a send of `bytes` to `peer` posted at `posted` (the layer's
 * clock), booked on the link or the NICs. */
double emu_delivers(MpiEmu *e, int peer, size_t bytes, double posted);

/* This rank's edge between nodes in a collective: its seconds on the NICs, from node a to b, and
 * the collective's latency steps (seconds); s 0 if it has none. */
typedef struct OwnEdge { double s, lat; int a, b; } OwnEdge;
/* The time the simulator's collective model gives a collective of kind `kind` and `bytes` on
 * group gr (root: the world rank of a broadcast's or reduce's root), 0 for anything else or
 * without emu_cluster; and this rank's own edge between nodes in it (*own). */
double emu_collective_s(const MpiEmu *e, const CommGroup *gr, int kind, int root, size_t bytes, OwnEdge *own);
/* Books a transfer of `seconds` on node a's transmit side and node b's receive side, starting no
 * earlier than `ready` (the layer's clock); returns its end (the layer's clock). */
double emu_nic_book(MpiEmu *e, int a, int b, double ready, double seconds);

#endif
