/* The communication layer (runtime/common/comm.h) over NCCL, for device buffers: the step's
 * operations are NCCL calls on a communication stream of this layer, a turn's calls in one
 * ncclGroupStart/ncclGroupEnd (ended in comm_turn_posted), ordered against the compute stream by
 * CUDA events: the turn's group waits for the compute queued before it was posted, and
 * comm_wait_turn makes the compute stream wait for the group's end, so the host never waits in a
 * step. A watchdog thread polls each turn's events: it timestamps them for the trace and, when a
 * turn waited for has not completed WP_COMM_TIMEOUT seconds after it started, names the operation,
 * turn and peer or group still pending, aborts the communicators and ends the process with
 * COMM_ABORT_STATUS. The host-side bookkeeping is nccl_book.c; the groups, the names of
 * operations and the checks of arguments every layer's (common/comm_book.c).
 *
 * MPI bootstraps it (each communicator's ncclUniqueId is broadcast over MPI: the world's, then one
 * per plan group by ncclCommSplit) and carries the blocking calls outside the step on host memory
 * (hostmpi/host_mpi.c, shared with the MPI layer). A failing call ends the job through
 * common/fail.h, this layer's communicators aborted first.
 * Each rank uses GPU (its rank among the ranks of its node) mod (GPUs on the node): NCCL refuses
 * two ranks on one GPU, so run as many ranks per node as it has GPUs (the CUDA backend over the MPI
 * layer runs several ranks on one GPU, for tests).
 *
 * Pieces. NCCL counts in size_t, but MPI (the blocking calls) in ints; both layers cut an operation
 * longer than a piece (INT_MAX elements, or WP_COMM_MAX_ELEMS, a test hook) into calls of a piece
 * each, in order (common/comm_book.h), inside the turn's NCCL group, so that a test runs the same
 * path on small models here and there. An all-gather or reduce-scatter longer than a piece takes
 * the path of unequal shards: one broadcast (reduce) of each member's shard, in pieces. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <mpi.h>
#include <cuda_runtime.h>
#include <nccl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "common/comm.h"
#include "common/compute.h"
#include "common/precision.h"
#include "cuda/cuda_check.h"
#include "hostmpi/host_mpi.h"
#include "nccl/nccl_book.h"

/* Every NCCL call: its failure ends the job as an MPI call's does (COMM_ABORT_STATUS), with NCCL's
 * own text and its last error's. */
#define NCCL_CHECK(call) do { ncclResult_t rc_ = (call); if (rc_ != ncclSuccess) nccl_failed(#call, rc_, __FILE__, __LINE__); } while (0)

static void __attribute__((noreturn)) nccl_failed(const char *call, ncclResult_t rc, const char *file, int line) {
    char err[512];
    const char *last = ncclGetLastError(NULL);
    snprintf(err, sizeof err, "%s (%s)", ncclGetErrorString(rc), last ? last : "");
    wp_call_failed(COMM_ABORT_STATUS, file, line, call, err);
}

/* --- State ------------------------------------------------------------------------------- */

struct Comm {
    HostMpi h;                    /* the world, the settings (max_elems: of one NCCL or MPI call), the counters */
    int device;

    ncclComm_t nccl_world;
    ncclComm_t *nccl_groups;      /* [nnccl]: NULL where this rank is not a member */
    int nnccl;                    /* book.groups.n once comm_add_group has its slot */
    cudaStream_t stream;          /* the communication stream */
    cudaStream_t compute;         /* comm_set_stream's (0: the legacy default stream) */
    cudaEvent_t ev_compute;       /* the compute work queued before a turn's first post */
    cudaEvent_t ev_ref;           /* a completed event at host time t_ref: the trace's clock */
    double t_ref;
    cudaEvent_t *ev_start, *ev_end;   /* per batch slot of the book */
    int nev;

    NcclBook book;                /* guarded by lock */
    pthread_mutex_t lock;
    pthread_t watchdog;
    int watching, stop;

    CommTraceFn trace;
    void *trace_ud;
};

HostMpi *comm_host(const Comm *c) { return (HostMpi *)&c->h; }
int comm_device_buffers(const Comm *c) { (void)c; return 1; }
void comm_set_trace(Comm *c, CommTraceFn fn, void *ud) { c->trace = fn; c->trace_ud = ud; }
void comm_set_stream(Comm *c, void *stream) { c->compute = (cudaStream_t)stream; }

/* Link emulation delays host sends: NCCL's transfers are the hardware's own. */
void comm_set_link(Comm *c, int peer, double alpha, double beta) { (void)c; (void)peer; (void)alpha; (void)beta; }
void comm_emulate(Comm *c, const int *node_of_rank, double net_alpha, double net_beta, double intra_alpha, double intra_beta) {
    (void)c; (void)node_of_rank; (void)net_alpha; (void)net_beta; (void)intra_alpha; (void)intra_beta;
}

void comm_set_timeout(Comm *c, double seconds) {
    hm_set_timeout(&c->h, seconds, 0);
    pthread_mutex_lock(&c->lock);
    c->book.timeout = seconds;
    pthread_mutex_unlock(&c->lock);
}

/* --- The watchdog -------------------------------------------------------------------------- */

/* Host time (comm_now's clock) of a completed event. */
static double event_time(Comm *c, cudaEvent_t ev) {
    float ms = 0;
    if (cudaEventElapsedTime(&ms, c->ev_ref, ev) != cudaSuccess) return comm_now(c);
    return c->t_ref + 1e-3 * (double)ms;
}

static void __attribute__((noreturn)) watchdog_expired(Comm *c, int slot, double now) {
    const NcclBook *b = &c->book;
    int first = nb_first_op(b, slot), left = 0, all = 0;
    for (int i = 0; i < b->nops; i++) { all++; left += b->ops[i].batch == slot; }
    char d[320];
    cb_op_desc(&b->groups, &b->ops[first].op, d, sizeof d);
    fprintf(stderr, "comm: rank %d: timeout: %s still pending after %.1f s (%d of the %d operations pending on this "
            "rank in its group of turn %d; WP_COMM_TIMEOUT=%g); aborting NCCL\n", c->h.rank, d, nb_age(b, slot, now),
            left, all, b->batches[slot].turn, b->timeout);
    fflush(stdout);
    fflush(stderr);
    /* the host thread may be blocked in CUDA or NCCL: abort the communicators, then the process
     * (mpirun ends the other ranks when one exits with an error) */
    for (int g = 0; g < b->groups.n; g++)
        if (c->nccl_groups[g]) ncclCommAbort(c->nccl_groups[g]);
    ncclCommAbort(c->nccl_world);
    _exit(COMM_ABORT_STATUS);
}

/* One pass over the batches: starts and ends seen, expiry, NCCL's asynchronous errors. */
static void watchdog_pass(Comm *c) {
    NcclBook *b = &c->book;
    for (int s = 0; s < b->nbatches && s < c->nev; s++) {
        NbBatch *t = &b->batches[s];
        if (!t->used || t->state == NB_OPEN || t->state == NB_DONE || t->issuing) continue;   /* events not recorded yet */
        if (t->state == NB_WAITED && cudaEventQuery(c->ev_start[s]) == cudaSuccess) nb_started(b, s, comm_now(c));
        if (cudaEventQuery(c->ev_end[s]) == cudaSuccess) nb_done(b, s, event_time(c, c->ev_end[s]));
    }
    double now = comm_now(c);
    int s = nb_expired(b, now);
    if (s >= 0) watchdog_expired(c, s, now);
    ncclResult_t async = ncclSuccess;
    if (ncclCommGetAsyncError(c->nccl_world, &async) == ncclSuccess && async != ncclSuccess && async != ncclInProgress) {
        fprintf(stderr, "comm: rank %d: NCCL failed: %s (%s); aborting\n", c->h.rank, ncclGetErrorString(async),
                ncclGetLastError(c->nccl_world) ? ncclGetLastError(c->nccl_world) : "");
        fflush(stderr);
        ncclCommAbort(c->nccl_world);
        _exit(COMM_ABORT_STATUS);
    }
}

static void *watchdog_main(void *arg) {
    Comm *c = arg;
    cudaSetDevice(c->device);   /* events are queried on this rank's device */
    for (;;) {
        pthread_mutex_lock(&c->lock);
        int stop = c->stop, busy = nb_in_flight(&c->book) > 0;
        if (!stop) watchdog_pass(c);
        pthread_mutex_unlock(&c->lock);
        if (stop) return NULL;
        /* a turn takes at least tens of microseconds; idle, a millisecond is soon enough */
        struct timespec ts = { 0, busy ? 50000 : 1000000 };
        nanosleep(&ts, NULL);
    }
}

/* --- Setup ------------------------------------------------------------------------------- */

/* The job's abort (common/fail.h) once this layer runs: NCCL's communicators first, so that no
 * rank stays blocked in a collective of this one's, then MPI's. */
static Comm *g_comm;

static void __attribute__((noreturn)) abort_job(int status) {
    Comm *c = g_comm;
    for (int g = 0; c && g < c->nnccl; g++)
        if (c->nccl_groups[g]) ncclCommAbort(c->nccl_groups[g]);
    if (c && c->nccl_world) ncclCommAbort(c->nccl_world);
    hm_abort_job(status);
}

Comm *comm_init(int *argc, char ***argv) {
    Comm *c = hm_alloc(NULL, sizeof *c);
    memset(c, 0, sizeof *c);
    hm_init(&c->h, argc, argv);
    g_comm = c;
    wp_fail_setup(c->h.rank, abort_job);
    nb_init(&c->book, c->h.rank, c->h.size, c->h.timeout);
    pthread_mutex_init(&c->lock, NULL);

    /* the GPU: one per rank of the node */
    int ndev = 0;
    cudaError_t e = cudaGetDeviceCount(&ndev);
    if (e != cudaSuccess || ndev == 0)
        wp_fail(COMPUTE_NO_DEVICE_STATUS, "comm", "no CUDA device (%s): the NCCL layer needs one GPU per rank "
                "(--comm mpi runs the CUDA backend on host-staged transfers)",
                e != cudaSuccess ? cudaGetErrorString(e) : "cudaGetDeviceCount found none");
    if (c->h.local_size > ndev)
        wp_fail(COMPUTE_NO_DEVICE_STATUS, "comm", "%d ranks on this node but %d GPUs: NCCL needs a GPU per rank "
                "(for tests of several ranks on one GPU, emit with --comm mpi)", c->h.local_size, ndev);
    c->device = c->h.local_rank % ndev;
    CUDA_CHECK(cudaSetDevice(c->device));
    CUDA_CHECK(cudaStreamCreateWithFlags(&c->stream, cudaStreamNonBlocking));
    CUDA_CHECK(cudaEventCreateWithFlags(&c->ev_compute, cudaEventDisableTiming));
    CUDA_CHECK(cudaEventCreate(&c->ev_ref));

    /* the world's communicator: rank 0's unique id, broadcast over MPI */
    ncclUniqueId id;
    if (c->h.rank == 0) NCCL_CHECK(ncclGetUniqueId(&id));
    MPI_CHECK(MPI_Bcast(&id, (int)sizeof id, MPI_BYTE, 0, c->h.world));
    ncclComm_t world;   /* set once whole: a failure aborts only what exists (abort_job) */
    NCCL_CHECK(ncclCommInitRank(&world, c->h.size, id, c->h.rank));
    c->nccl_world = world;

    CUDA_CHECK(cudaEventRecord(c->ev_ref, c->stream));
    CUDA_CHECK(cudaEventSynchronize(c->ev_ref));
    c->t_ref = comm_now(c);
    c->watching = pthread_create(&c->watchdog, NULL, watchdog_main, c) == 0;
    if (!c->watching) comm_fail("cannot start the watchdog thread");
    return c;
}

/* Ends the open turn's group (without the lock: ncclGroupEnd may wait for a peer to connect, and
 * the watchdog times that too). The communication stream first waits for everything queued on
 * the compute stream so far (the turn's compute before it, and what the posting itself queued
 * there, such as a gradient converted to the format it moves in), then NCCL issues the group's
 * operations; the two events around them time the turn for the watchdog and the trace. */
static void end_group(Comm *c) {
    pthread_mutex_lock(&c->lock);
    int slot = c->book.open;
    if (slot >= 0) {
        nb_close(&c->book);
        nb_issuing(&c->book, slot, comm_now(c));
    }
    pthread_mutex_unlock(&c->lock);
    if (slot < 0) return;
    CUDA_CHECK(cudaEventRecord(c->ev_compute, c->compute));
    CUDA_CHECK(cudaStreamWaitEvent(c->stream, c->ev_compute, 0));
    CUDA_CHECK(cudaEventRecord(c->ev_start[slot], c->stream));
    NCCL_CHECK(ncclGroupEnd());
    CUDA_CHECK(cudaEventRecord(c->ev_end[slot], c->stream));
    pthread_mutex_lock(&c->lock);
    nb_issued(&c->book, slot);
    pthread_mutex_unlock(&c->lock);
}

/* Everything posted is waited for and complete (the blocking calls, finalize): the stream drains
 * while the watchdog enforces the timeout. */
static void drain(Comm *c) {
    end_group(c);
    pthread_mutex_lock(&c->lock);
    nb_waited(&c->book, comm_now(c));
    pthread_mutex_unlock(&c->lock);
    CUDA_CHECK(cudaStreamSynchronize(c->stream));
    pthread_mutex_lock(&c->lock);
    /* the watchdog may not have looked since: every batch is complete now */
    for (int s = 0; s < c->book.nbatches && s < c->nev; s++)
        if (c->book.batches[s].used && c->book.batches[s].state != NB_DONE)
            nb_done(&c->book, s, event_time(c, c->ev_end[s]));
    nb_collect(&c->book, c->trace, c->trace_ud);
    pthread_mutex_unlock(&c->lock);
}

void comm_finalize(Comm *c) {
    if (!c) return;
    drain(c);
    pthread_mutex_lock(&c->lock);
    c->stop = 1;
    pthread_mutex_unlock(&c->lock);
    if (c->watching) pthread_join(c->watchdog, NULL);
    g_comm = NULL;   /* from here a failure aborts MPI alone: the communicators are being destroyed */
    for (int g = 0; g < c->nnccl; g++)
        if (c->nccl_groups[g]) NCCL_CHECK(ncclCommDestroy(c->nccl_groups[g]));
    NCCL_CHECK(ncclCommDestroy(c->nccl_world));
    for (int s = 0; s < c->nev; s++) { cudaEventDestroy(c->ev_start[s]); cudaEventDestroy(c->ev_end[s]); }
    cudaEventDestroy(c->ev_compute);
    cudaEventDestroy(c->ev_ref);
    cudaStreamDestroy(c->stream);
    hm_finalize(&c->h);
    nb_free(&c->book);
    pthread_mutex_destroy(&c->lock);
    free(c->nccl_groups);
    free(c->ev_start);
    free(c->ev_end);
    free(c);
}

int comm_add_group(Comm *c, const int *ranks, int n) {
    char err[256];
    pthread_mutex_lock(&c->lock);
    int g = cb_group_add(&c->book.groups, ranks, n, err, sizeof err);
    pthread_mutex_unlock(&c->lock);
    if (g < 0) comm_fail("%s", err);
    ncclComm_t *t = realloc(c->nccl_groups, (size_t)(g + 1) * sizeof *t);
    if (!t) comm_fail("out of memory for group %d", g);
    c->nccl_groups = t;
    c->nccl_groups[g] = NULL;
    c->nnccl = g + 1;
    /* collective over the whole world, in the plan's group order everywhere: the members get a
     * communicator whose rank i is member i (key), the others NCCL_SPLIT_NOCOLOR */
    int me = c->book.groups.g[g].me;
    ncclComm_t split = NULL;
    NCCL_CHECK(ncclCommSplit(c->nccl_world, me >= 0 ? g : NCCL_SPLIT_NOCOLOR, me >= 0 ? me : 0, &split, NULL));
    c->nccl_groups[g] = split;
    return g;
}

/* --- The step's operations ----------------------------------------------------------------- */

static ncclDataType_t nccl_type(WpDtype dt) { return dt == WP_BF16 ? ncclBfloat16 : ncclFloat32; }

/* Books an operation; the first of a turn opens the NCCL group (end_group orders and issues it).
 * Call with the lock held. */
static void post(Comm *c, CommKind kind, const CommInfo *info, int peer, int group, size_t bytes) {
    int opening = c->book.open < 0;
    int slot = nb_post(&c->book, kind, info, peer, group, bytes, comm_now(c));
    if (slot < 0) comm_fail("out of memory for the pending operations");
    if (slot >= c->nev) {
        int n = c->book.nbatches;
        cudaEvent_t *s = realloc(c->ev_start, (size_t)n * sizeof *s), *e = s ? realloc(c->ev_end, (size_t)n * sizeof *e) : NULL;
        if (s) c->ev_start = s;
        if (!e) comm_fail("out of memory for the turns' events");
        c->ev_end = e;
        for (int i = c->nev; i < n; i++) {
            CUDA_CHECK(cudaEventCreate(&c->ev_start[i]));
            CUDA_CHECK(cudaEventCreate(&c->ev_end[i]));
        }
        c->nev = n;
    }
    if (opening) NCCL_CHECK(ncclGroupStart());   /* NCCL issues nothing until the group ends */
    cb_count(&c->h.stats, kind, bytes);
}



/* One NCCL call of a piece: len elements at `at` (and `to`: a reduce's result at its root, the
 * group's member root; a send's or receive's peer). */
typedef void (*PieceFn)(Comm *c, int g, char *at, char *to, size_t len, WpDtype dt, int root);

/* Issues n elements at buf (and to) as pieces of fn, in order. Call with the lock held. */
static void pieces(Comm *c, int g, char *buf, char *to, size_t n, WpDtype dt, int root, PieceFn fn) {
    size_t es = wp_dtype_bytes(dt), len;
    for (size_t k = 0; k < cb_pieces(n, c->h.max_elems); k++) {
        size_t off = cb_piece(n, c->h.max_elems, k, &len) * es;
        fn(c, g, buf + off, to ? to + off : NULL, len, dt, root);
    }
}

static void send_piece(Comm *c, int g, char *at, char *to, size_t len, WpDtype dt, int peer) {
    (void)g; (void)to;
    NCCL_CHECK(ncclSend(at, len, nccl_type(dt), peer, c->nccl_world, c->stream));
}

static void recv_piece(Comm *c, int g, char *at, char *to, size_t len, WpDtype dt, int peer) {
    (void)g; (void)to;
    NCCL_CHECK(ncclRecv(at, len, nccl_type(dt), peer, c->nccl_world, c->stream));
}

static void bcast_piece(Comm *c, int g, char *at, char *to, size_t len, WpDtype dt, int root) {
    (void)to;
    NCCL_CHECK(ncclBroadcast(at, at, len, nccl_type(dt), root, c->nccl_groups[g], c->stream));
}

/* in place without `to`: the root's buffer gets the sum; NCCL leaves the others' as they were */
static void reduce_piece(Comm *c, int g, char *at, char *to, size_t len, WpDtype dt, int root) {
    NCCL_CHECK(ncclReduce(at, to ? to : at, len, nccl_type(dt), ncclSum, root, c->nccl_groups[g], c->stream));
}

static void allreduce_piece(Comm *c, int g, char *at, char *to, size_t len, WpDtype dt, int root) {
    (void)to; (void)root;
    NCCL_CHECK(ncclAllReduce(at, at, len, nccl_type(dt), ncclSum, c->nccl_groups[g], c->stream));
}

void comm_send(Comm *c, const void *buf, size_t n, WpDtype dt, int peer, const CommInfo *info) {
    hm_check_peer(&c->book.groups, COMM_SEND, peer, info);
    pthread_mutex_lock(&c->lock);
    post(c, COMM_SEND, info, peer, -1, n * wp_dtype_bytes(dt));
    pieces(c, -1, (char *)buf, NULL, n, dt, peer, send_piece);
    pthread_mutex_unlock(&c->lock);
}

void comm_recv(Comm *c, void *buf, size_t n, WpDtype dt, int peer, const CommInfo *info) {
    hm_check_peer(&c->book.groups, COMM_RECV, peer, info);
    pthread_mutex_lock(&c->lock);
    post(c, COMM_RECV, info, peer, -1, n * wp_dtype_bytes(dt));
    pieces(c, -1, buf, NULL, n, dt, peer, recv_piece);
    pthread_mutex_unlock(&c->lock);
}

/* A send to the next member and a receive from the previous one (comm.h). */
void comm_ring_shift(Comm *c, int g, const void *send, void *recv, size_t n, WpDtype dt, const CommInfo *info) {
    const CommGroup *gr = hm_member(&c->book.groups, COMM_SEND, g, info);
    comm_send(c, send, n, dt, gr->ranks[(gr->me + 1) % gr->n], info);
    comm_recv(c, recv, n, dt, gr->ranks[(gr->me + gr->n - 1) % gr->n], info);
}

void comm_bcast(Comm *c, int g, void *buf, size_t n, WpDtype dt, int root, const CommInfo *info) {
    hm_member(&c->book.groups, COMM_BCAST, g, info);
    int r = hm_root(&c->book.groups, COMM_BCAST, g, root, info);
    pthread_mutex_lock(&c->lock);
    post(c, COMM_BCAST, info, root, g, n * wp_dtype_bytes(dt));
    pieces(c, g, buf, NULL, n, dt, r, bcast_piece);
    pthread_mutex_unlock(&c->lock);
}

void comm_reduce(Comm *c, int g, void *buf, size_t n, WpDtype dt, int root, const CommInfo *info) {
    hm_member(&c->book.groups, COMM_REDUCE, g, info);
    int r = hm_root(&c->book.groups, COMM_REDUCE, g, root, info);
    pthread_mutex_lock(&c->lock);
    post(c, COMM_REDUCE, info, root, g, n * wp_dtype_bytes(dt));
    pieces(c, g, buf, NULL, n, dt, r, reduce_piece);
    pthread_mutex_unlock(&c->lock);
}

void comm_allreduce(Comm *c, int g, void *buf, size_t n, WpDtype dt, const CommInfo *info) {
    hm_member(&c->book.groups, COMM_ALLREDUCE, g, info);
    pthread_mutex_lock(&c->lock);
    post(c, COMM_ALLREDUCE, info, -1, g, n * wp_dtype_bytes(dt));
    pieces(c, g, buf, NULL, n, dt, -1, allreduce_piece);
    pthread_mutex_unlock(&c->lock);
}

void comm_allgather(Comm *c, int g, const void *shard, void *full, size_t n, WpDtype dt, const CommInfo *info) {
    const CommGroup *gr = hm_member(&c->book.groups, COMM_ALLGATHER, g, info);
    size_t es = wp_dtype_bytes(dt), k = (size_t)gr->n;
    char err[320], *fullb = full;
    const char *own = fullb + comm_shard_offset(n, gr->n, gr->me) * es;
    size_t mine = comm_shard_len(n, gr->n, gr->me);
    int in_place;
    if (cb_check_allgather(gr, shard, full, n, es, info, &in_place, err, sizeof err)) comm_fail("%s", err);
    pthread_mutex_lock(&c->lock);
    post(c, COMM_ALLGATHER, info, -1, g, n * es);
    if (n % k == 0 && n <= c->h.max_elems) {
        NCCL_CHECK(ncclAllGather(shard, full, n / k, nccl_type(dt), c->nccl_groups[g], c->stream));
    } else {
        /* shards of unequal sizes (NCCL's all-gather wants equal ones), or longer than a piece:
         * member i broadcasts its shard into its place of everyone's full buffer, in pieces, all
         * in this turn's group */
        /* (on the compute stream, which the group waits for when it ends) */
        if (!in_place) CUDA_CHECK(cudaMemcpyAsync((void *)own, shard, mine * es, cudaMemcpyDeviceToDevice, c->compute));
        for (int i = 0; i < gr->n; i++) {
            size_t len = comm_shard_len(n, gr->n, i);
            if (len) pieces(c, g, fullb + comm_shard_offset(n, gr->n, i) * es, NULL, len, dt, i, bcast_piece);
        }
    }
    pthread_mutex_unlock(&c->lock);
}

void comm_reduce_scatter(Comm *c, int g, const void *full, void *shard, size_t n, WpDtype dt, const CommInfo *info) {
    const CommGroup *gr = hm_member(&c->book.groups, COMM_REDUCE_SCATTER, g, info);
    size_t es = wp_dtype_bytes(dt), k = (size_t)gr->n;
    char err[320];
    if (cb_check_reduce_scatter(gr, full, shard, n, es, info, err, sizeof err)) comm_fail("%s", err);
    pthread_mutex_lock(&c->lock);
    post(c, COMM_REDUCE_SCATTER, info, -1, g, n * es);
    if (n % k == 0 && n <= c->h.max_elems) {
        NCCL_CHECK(ncclReduceScatter(full, shard, n / k, nccl_type(dt), ncclSum, c->nccl_groups[g], c->stream));
    } else {
        /* unequal shards, or longer than a piece: one reduce per member, to it, of its part of
         * full, in pieces */
        for (int i = 0; i < gr->n; i++) {
            size_t len = comm_shard_len(n, gr->n, i);
            char *p = (char *)full + comm_shard_offset(n, gr->n, i) * es;
            if (len) pieces(c, g, p, i == gr->me ? shard : NULL, len, dt, i, reduce_piece);
        }
    }
    pthread_mutex_unlock(&c->lock);
}

void comm_turn_posted(Comm *c) {
    end_group(c);
}

double comm_wait_turn(Comm *c) {
    comm_turn_posted(c);   /* a turn that did not say so: its group ends now */
    pthread_mutex_lock(&c->lock);
    for (int s = 0; s < c->book.nbatches && s < c->nev; s++)
        if (c->book.batches[s].used && c->book.batches[s].state == NB_CLOSED)
            CUDA_CHECK(cudaStreamWaitEvent(c->compute, c->ev_end[s], 0));
    nb_waited(&c->book, comm_now(c));
    nb_collect(&c->book, c->trace, c->trace_ud);
    pthread_mutex_unlock(&c->lock);
    return 0;
}

void comm_progress(Comm *c) {
    pthread_mutex_lock(&c->lock);
    nb_collect(&c->book, c->trace, c->trace_ud);
    pthread_mutex_unlock(&c->lock);
}

/* The blocking calls (hostmpi/host_mpi.c) run alone on the world: everything posted completes first. */
void comm_complete_step(Comm *c) { drain(c); }
