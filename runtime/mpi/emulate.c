/* The MPI layer's emulated links and cluster (emulate.h says what is emulated and how). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include "hostmpi/host_mpi.h"
#include "mpi/emulate.h"

void emu_init(MpiEmu *e, int rank, int size, const struct timespec *t0) {
    memset(e, 0, sizeof *e);
    e->rank = rank;
    e->size = size;
    e->t0_abs = (double)t0->tv_sec + 1e-9 * (double)t0->tv_nsec;   /* emulated times between ranks */
}

void emu_free(MpiEmu *e) {
    if (e->node) MPI_CHECK(MPI_Win_free(&e->nic_win));
    free(e->alpha);
    free(e->beta);
    free(e->link_free);
    free(e->node);
}

void emu_set_link(MpiEmu *e, int peer, double alpha, double beta) {
    if (peer < -1 || peer >= e->size) comm_fail("comm_set_link: peer %d outside the world of %d", peer, e->size);
    if (!(alpha >= 0) || !(beta >= 0)) comm_fail("comm_set_link: alpha %g, beta %g: expected >= 0", alpha, beta);
    if (!e->alpha) {
        e->alpha = hm_alloc(NULL, (size_t)e->size * sizeof(double));
        e->beta = hm_alloc(NULL, (size_t)e->size * sizeof(double));
        e->link_free = hm_alloc(NULL, (size_t)e->size * sizeof(double));
        for (int p = 0; p < e->size; p++) e->alpha[p] = e->beta[p] = e->link_free[p] = 0;
    }
    for (int p = 0; p < e->size; p++)
        if (peer == -1 || p == peer) { e->alpha[p] = alpha; e->beta[p] = beta; }
}

void emu_cluster(MpiEmu *e, MPI_Comm world, const int *node_of_rank, double net_alpha, double net_beta,
                 double intra_alpha, double intra_beta) {
    if (!(net_alpha >= 0) || !(net_beta >= 0) || !(intra_alpha >= 0) || !(intra_beta >= 0))
        comm_fail("comm_emulate: latencies %g, %g and seconds per byte %g, %g: expected >= 0", net_alpha, intra_alpha, net_beta, intra_beta);
    if (e->node) comm_fail("comm_emulate: called twice");
    e->node = hm_alloc(NULL, (size_t)e->size * sizeof(int));
    e->nnodes = 0;
    for (int r = 0; r < e->size; r++) {
        if (node_of_rank[r] < 0 || node_of_rank[r] >= e->size) comm_fail("comm_emulate: rank %d on node %d: expected 0 to %d", r, node_of_rank[r], e->size - 1);
        e->node[r] = node_of_rank[r];
        if (node_of_rank[r] + 1 > e->nnodes) e->nnodes = node_of_rank[r] + 1;
    }
    e->net_alpha = net_alpha; e->net_beta = net_beta;
    e->intra_alpha = intra_alpha; e->intra_beta = intra_beta;
    /* the book, shared by the ranks on this machine: rank 0 of them allocates it, zeroed (a NIC
     * free since the clock's start); the lock's int first, then the doubles, 8-byte aligned */
    MPI_Comm local;
    MPI_CHECK(MPI_Comm_split_type(world, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &local));
    int lrank;
    MPI_CHECK(MPI_Comm_rank(local, &lrank));
    MPI_Aint size = lrank == 0 ? (MPI_Aint)(sizeof(double) * (2 * (size_t)e->nnodes + 1)) : 0;
    void *base = NULL;
    MPI_CHECK(MPI_Win_allocate_shared(size, sizeof(double), MPI_INFO_NULL, local, &base, &e->nic_win));
    MPI_Aint got;
    int disp;
    MPI_CHECK(MPI_Win_shared_query(e->nic_win, 0, &got, &disp, &base));
    if (lrank == 0) memset(base, 0, (size_t)got);
    e->nic_lock = (volatile int *)base;
    e->nic_free = (double *)base + 1;
    MPI_CHECK(MPI_Barrier(local));   /* zeroed before anyone books */
    MPI_CHECK(MPI_Comm_free(&local));
}

double emu_nic_book(MpiEmu *e, int a, int b, double ready, double seconds) {
    while (__atomic_exchange_n(e->nic_lock, 1, __ATOMIC_ACQUIRE)) {
        while (__atomic_load_n(e->nic_lock, __ATOMIC_RELAXED)) sched_yield();
    }
    double *tx = &e->nic_free[2 * a], *rx = &e->nic_free[2 * b + 1];
    double start = ready + e->t0_abs;
    if (*tx > start) start = *tx;
    if (*rx > start) start = *rx;
    *tx = *rx = start + seconds;
    __atomic_store_n(e->nic_lock, 0, __ATOMIC_RELEASE);
    return start + seconds - e->t0_abs;
}

double emu_collective_s(const MpiEmu *e, const CommGroup *gr, int kind, int root_rank, size_t bytes, OwnEdge *own) {
    memset(own, 0, sizeof *own);
    if (!e->node || !gr) return 0;
    static const struct { int chain, toward_root, tree; double passes; } algo[COMM__NKINDS] = {
        [COMM_BCAST] = { 1, 0, 1, 1 }, [COMM_REDUCE] = { 1, 1, 1, 1 }, [COMM_ALLREDUCE] = { 0, 0, 1, 2 },
        [COMM_ALLGATHER] = { 0, 0, 0, 1 }, [COMM_REDUCE_SCATTER] = { 0, 0, 0, 1 },
    };
    if (kind != COMM_BCAST && kind != COMM_REDUCE && kind != COMM_ALLREDUCE && kind != COMM_ALLGATHER &&
        kind != COMM_REDUCE_SCATTER)
        return 0;
    int n = gr->n;
    if (n < 2) return 0;
    int chain = algo[kind].chain, root = 0;
    if (chain)
        for (int i = 0; i < n; i++)
            if (gr->ranks[i] == root_rank) root = i;
    int nedges = chain ? n - 1 : n, lg = 0;
    while ((1 << lg) < n) lg++;
    double whole = (double)bytes, edge = chain ? whole : algo[kind].passes * (n - 1) / n * whole;
    double ring = algo[kind].passes * (n - 1), tree = algo[kind].tree ? algo[kind].passes * lg : ring;
    /* loads: seconds on each rank's send and receive ports (inside a node) and each node's NIC
     * sides (between nodes); every edge at once, so the most loaded decides */
    double *load = hm_alloc(NULL, sizeof(double) * (2 * (size_t)e->size + 2 * (size_t)e->nnodes));
    memset(load, 0, sizeof(double) * (2 * (size_t)e->size + 2 * (size_t)e->nnodes));
    double lat = 0, worst = 0;
    for (int h = 0; h < nedges; h++) {
        int from = gr->ranks[(root + h) % n], to = gr->ranks[(root + h + 1) % n];
        if (algo[kind].toward_root) { int t = from; from = to; to = t; }
        int na = e->node[from], nb = e->node[to];
        double s = na != nb ? edge * e->net_beta : edge * e->intra_beta, a = na != nb ? e->net_alpha : e->intra_alpha;
        if (a > lat) lat = a;
        double *l[2] = { &load[2 * from], &load[2 * to + 1] };
        if (na != nb) { l[0] = &load[2 * e->size + 2 * na]; l[1] = &load[2 * e->size + 2 * nb + 1]; }
        for (int k = 0; k < 2; k++) { *l[k] += s; if (*l[k] > worst) worst = *l[k]; }
        if (from == e->rank && na != nb) own->s += s, own->a = na, own->b = nb;
    }
    free(load);
    own->lat = (ring < tree ? ring : tree) * lat;
    return own->lat + worst;
}

/* The link to or from `peer` goes between emulated nodes, through their NICs. */
static int through_nics(const MpiEmu *e, int peer) {
    return e->node && e->node[peer] != e->node[e->rank] && e->net_beta > 0;
}

/* Both ends set it (comm.h). */
int emu_link(const MpiEmu *e, int peer) {
    return through_nics(e, peer) || (e->alpha && (e->alpha[peer] > 0 || e->beta[peer] > 0));
}

/* Between nodes through both nodes' NICs (emulate.h), else on the link, one send after the other
 * (bandwidth), each arriving alpha after its last byte left (latency); after this rank's earlier
 * sends to that peer either way. */
double emu_delivers(MpiEmu *e, int peer, size_t bytes, double posted) {
    double ready = e->link_free && e->link_free[peer] > posted ? e->link_free[peer] : posted;
    if (through_nics(e, peer)) {
        double end = emu_nic_book(e, e->node[e->rank], e->node[peer], ready, (double)bytes * e->net_beta);
        if (e->link_free) e->link_free[peer] = end;
        return end + e->net_alpha;
    }
    e->link_free[peer] = ready + (double)bytes * e->beta[peer];
    return e->link_free[peer] + e->alpha[peer];
}
