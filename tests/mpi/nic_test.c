/* The emulated cluster of the MPI layer (comm_emulate, runtime/mpi/emulate.c) on 4 ranks: two
 * emulated nodes of two ranks (0, 1 | 2, 3) joined by one NIC each, as the simulator models them.
 *   - one rank sending B bytes to the other node takes about B x beta (+ latency); two ranks of a
 *     node sending B bytes each at once take about twice that: they share their node's NIC;
 *   - two ranks of a node sending to each other do not touch the NIC (an intra-node link);
 *   - an all-reduce over the 4 ranks completes no sooner than the simulator's ring model says
 *     (generator/sim/collective.c: 2 (n-1)/n of the buffer over each edge, the two edges between
 *     nodes each through one NIC side, latency min(ring 6, tree 4) steps), and not much later;
 *   - two all-reduces at once share the NICs: about twice one's NIC time.
 * Times are on the machine's monotonic clock, measured from a barrier; the machine may be loaded
 * (other work only makes things later), so upper bounds are loose and ratios are checked. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "common/comm.h"
#include "check.h"

static int R, P;

enum { NBYTES = 2000000 };                      /* 2 MB */
static const double NET_BETA = 1.0 / 40e6;      /* 40 MB/s per NIC side: 50 ms for 2 MB */
static const double NET_ALPHA = 2e-3;           /* 2 ms */
static const double INTRA_BETA = 1.0 / 4e9, INTRA_ALPHA = 1e-6;

/* Ranks in `senders` each send NBYTES to rank `to[i]` at once; returns when the last receive
 * completed, seconds after a barrier (the same on every rank: the slowest). */
static double exchange(Comm *c, const int *from, const int *to, int npairs, char *sbuf, char *rbuf, int turn) {
    comm_barrier(c);
    double t0 = comm_now(c);
    for (int k = 0; k < npairs; k++) {
        if (R == to[k]) comm_recv(c, rbuf, NBYTES / 4, WP_FP32, from[k], &(CommInfo){ turn, "nic" });
        if (R == from[k]) comm_send(c, sbuf, NBYTES / 4, WP_FP32, to[k], &(CommInfo){ turn, "nic" });
    }
    comm_wait_turn(c);
    double t[1] = { comm_now(c) - t0 };
    /* the slowest rank's time: a max by sums would need another op; the layer has allreduce of
     * doubles (a sum), so every rank contributes its own time in its own slot */
    double all[64] = { 0 };
    all[R] = t[0];
    comm_allreduce_double(c, all, P);
    double worst = 0;
    for (int r = 0; r < P; r++) if (all[r] > worst) worst = all[r];
    return worst;
}

int main(int argc, char **argv) {
    Comm *c = comm_init(&argc, &argv);
    R = comm_rank(c);
    P = comm_size(c);
    if (P != 4) {
        if (R == 0) fprintf(stderr, "nic_test: run on 4 ranks (got %d)\n", P);
        comm_finalize(c);
        return 2;
    }
    int node[4] = { 0, 0, 1, 1 };
    for (int q = 0; q < P; q++)
        if (q != R) comm_set_link(c, q, node[q] == node[R] ? INTRA_ALPHA : NET_ALPHA, node[q] == node[R] ? INTRA_BETA : NET_BETA);
    comm_emulate(c, node, NET_ALPHA, NET_BETA, INTRA_ALPHA, INTRA_BETA);
    /* NBYTES bytes as floats: NBYTES / 4 elements */
    char *sbuf = calloc(NBYTES, 1), *rbuf = calloc(NBYTES, 1);
    const double one_alone = (double)NBYTES * NET_BETA;   /* seconds on the NIC of one send */

    /* 1. one send between nodes, then two at once from the same node, then two at once from
     *    different nodes (one each way: no NIC side shared) */
    int f1[] = { 0 }, t1[] = { 2 };
    int f2[] = { 0, 1 }, t2[] = { 2, 3 };
    int f3[] = { 0, 2 }, t3[] = { 3, 1 };
    double best1 = 1e9, best2 = 1e9, best3 = 1e9;
    for (int rep = 0; rep < 3; rep++) {   /* the least of 3: a loaded machine only adds time */
        double a = exchange(c, f1, t1, 1, sbuf, rbuf, 10 + rep);
        double b = exchange(c, f2, t2, 2, sbuf, rbuf, 20 + rep);
        double d = exchange(c, f3, t3, 2, sbuf, rbuf, 30 + rep);
        if (a < best1) best1 = a;
        if (b < best2) best2 = b;
        if (d < best3) best3 = d;
    }
    if (R == 0)
        printf("nic_test: one send between nodes %.1f ms (NIC time %.1f ms), two from one node at once %.1f ms (%.2fx), "
               "two in opposite directions %.1f ms (%.2fx)\n", best1 * 1e3, one_alone * 1e3, best2 * 1e3, best2 / best1, best3 * 1e3,
               best3 / best1);
    CHECK(best1 >= one_alone + NET_ALPHA - 1e-3, "one send between nodes took %.1f ms, less than its emulated %.1f ms", best1 * 1e3,
          (one_alone + NET_ALPHA) * 1e3);
    /* (less a few ms: the ranks leave the barrier apart, and each times from its own exit) */
    CHECK(best2 >= 2 * one_alone + NET_ALPHA - 3e-3, "two sends through one NIC took %.1f ms, less than twice one's NIC time (%.1f ms)",
          best2 * 1e3, (2 * one_alone + NET_ALPHA) * 1e3);
    CHECK(best2 / best1 > 1.7 && best2 / best1 < 2.4, "two sends through one NIC took %.2fx one send's time, expected about 2",
          best2 / best1);
    CHECK(best3 / best1 < 1.4, "two sends in opposite directions (no NIC side shared) took %.2fx one send's time, expected about 1",
          best3 / best1);

    /* 2. inside a node: no NIC */
    int f4[] = { 0, 2 }, t4[] = { 1, 3 };
    double intra = exchange(c, f4, t4, 2, sbuf, rbuf, 40);
    CHECK(intra < one_alone, "two sends inside nodes took %.1f ms, as long as one through a NIC (%.1f ms)", intra * 1e3, one_alone * 1e3);

    /* 3. an all-reduce of NBYTES over the 4 ranks, timed as the simulator's ring: each edge
     *    carries 2 (n-1)/n = 1.5 of the buffer; edges 1->2 and 3->0 cross, one per NIC side */
    float *buf = calloc(NBYTES / 4, sizeof(float));
    comm_add_group(c, (int[]){ 0, 1, 2, 3 }, 4);
    double model = 4 * NET_ALPHA + 1.5 * NBYTES * NET_BETA, best = 1e9;
    for (int rep = 0; rep < 3; rep++) {
        comm_barrier(c);
        double t0 = comm_now(c);
        comm_allreduce(c, 0, buf, NBYTES / 4, WP_FP32, &(CommInfo){ 50 + rep, "grads" });
        comm_wait_turn(c);
        double dt = comm_now(c) - t0;
        if (dt < best) best = dt;
    }
    if (R == 0) printf("nic_test: all-reduce of %.1f MB over 2 emulated nodes %.1f ms, the ring model %.1f ms\n", NBYTES / 1e6,
                       best * 1e3, model * 1e3);
    CHECK(best >= model - 1e-3, "rank %d: the all-reduce took %.1f ms, less than the model's %.1f ms", R, best * 1e3, model * 1e3);
    CHECK(best < 1.5 * model + 0.02, "rank %d: the all-reduce took %.1f ms, far more than the model's %.1f ms", R, best * 1e3,
          model * 1e3);

    /* 4. two all-reduces of NBYTES at once (fsdp's backward turns run a reduce-scatter and an
     *    all-gather so): their edges between nodes take each NIC side in turn */
    float *buf2 = calloc(NBYTES / 4, sizeof(float));
    double nic = 1.5 * NBYTES * NET_BETA, two = 1e9;
    for (int rep = 0; rep < 3; rep++) {
        comm_barrier(c);
        double t0 = comm_now(c);
        comm_allreduce(c, 0, buf, NBYTES / 4, WP_FP32, &(CommInfo){ 60 + rep, "grads" });
        comm_allreduce(c, 0, buf2, NBYTES / 4, WP_FP32, &(CommInfo){ 60 + rep, "grads2" });
        comm_wait_turn(c);
        double dt = comm_now(c) - t0;
        if (dt < two) two = dt;
    }
    if (R == 0) printf("nic_test: two all-reduces at once %.1f ms (%.2fx one), twice the NIC time %.1f ms\n", two * 1e3, two / best,
                       2 * nic * 1e3);
    CHECK(two >= 2 * nic - 1e-3, "rank %d: two all-reduces at once took %.1f ms, less than twice one's NIC time (%.1f ms)", R, two * 1e3,
          2 * nic * 1e3);
    CHECK(two < 1.5 * (2 * nic + 4 * NET_ALPHA) + 0.02, "rank %d: two all-reduces at once took %.1f ms, far more than %.1f ms", R,
          two * 1e3, (2 * nic + 4 * NET_ALPHA) * 1e3);
    free(buf2);

    double tally[2] = { check_passed_, check_failed_ };
    comm_allreduce_double(c, tally, 2);
    check_passed_ = (int)tally[0];
    check_failed_ = (int)tally[1];
    free(sbuf); free(rbuf); free(buf);
    comm_finalize(c);
    int status = check_failed_ ? 1 : 0;
    if (R == 0) status = check_summary("nic_test on 4 ranks");
    return status;
}
