/* Tests of the communication layer (runtime/common/comm.h) under mpirun, on any number of ranks:
 * ring send/receive with several transfers in flight per turn, every collective on the world and
 * on sub-groups (reversed, strided, singleton) with uneven shards, the ring shift
 * (comm_ring_shift) on each group, post-compute-wait overlap, the emulated link delay, the
 * blocking calls, counters and trace events, and the same operations on bf16 elements. Values
 * are small integers, so every sum is exact and checked with ==, except where a test of bf16
 * rounding says otherwise. Under WP_COMM_MAX_ELEMS=N (test_comm.sh runs it so) every operation
 * longer than N elements goes in pieces: the same checks hold, and an operation is counted and
 * traced once, whole (test_whole); the emulated link is left out there (a piece per few elements
 * would post tens of thousands of delayed sends).
 *
 * `comm_test MODE` with MODE timeout-send, timeout-allreduce, mismatch, truncate, bad-peer or
 * mpi-fail runs one failure on 2 ranks instead; tests/mpi/test_comm.sh checks that it aborts the
 * job with a clear line. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "common/comm.h"
#include "hostmpi/host_mpi.h"
#include "check.h"

static int R, P;   /* this rank, world size */

/* The value element i of stream `s` holds when rank `a` produces it: a small integer. */
static float val(int a, int s, size_t i) { return (float)((a * 131 + s * 31 + (long)(i % 9973) * 7) % 1000); }

static float *alloc(size_t n) {
    float *p = malloc((n ? n : 1) * sizeof(float));
    if (!p) { fprintf(stderr, "out of memory\n"); exit(1); }
    return p;
}

static void fill(float *b, size_t n, int a, int s) { for (size_t i = 0; i < n; i++) b[i] = val(a, s, i); }

/* One CHECK per buffer, naming the first wrong element. */
static void check_buf(const float *got, const float *want, size_t n, const char *what) {
    size_t bad = n;
    for (size_t i = 0; i < n && bad == n; i++)
        if (got[i] != want[i]) bad = i;
    CHECK(bad == n, "rank %d: %s: [%zu] = %g, expected %g", R, what, bad, bad < n ? got[bad] : 0.0, bad < n ? want[bad] : 0.0);
}

/* A stand-in for a turn's compute: some arithmetic on memory no transfer touches, calling
 * comm_progress now and then if asked. Returns its result so it cannot be optimised away. */
static double compute(Comm *c, int progress, int iters) {
    static float work[1 << 16];
    double s = 0;
    for (int it = 0; it < iters; it++) {
        for (int i = 0; i < (1 << 16); i++) { work[i] = work[i] * 0.5f + (float)(i & 7); s += work[i]; }
        if (progress) comm_progress(c);
    }
    return s;
}

/* --- Point to point ------------------------------------------------------------------------ */

static void test_ring(Comm *c) {
    const size_t sizes[] = { 1, 1000, 70000, 3, 0 };   /* 70000 floats: past every eager limit */
    enum { NS = 5, TURNS = 3 };
    int next = (R + 1) % P, prev = (R + P - 1) % P;
    float *sendf[NS], *recvf[NS], *sendb = alloc(5000), *recvb = alloc(5000), *want = alloc(70000);
    for (int m = 0; m < NS; m++) { sendf[m] = alloc(sizes[m]); recvf[m] = alloc(sizes[m]); }
    uint64_t sent0 = comm_stats(c)->bytes[COMM_SEND], sent = 0;
    for (int t = 0; t < TURNS; t++) {
        char label[NS][16];
        /* Alternate whether receives or sends are posted first: matching must not care. */
        for (int pass = 0; pass < 2; pass++) {
            if ((pass == 0) == (t % 2 == 0)) {
                for (int m = 0; m < NS; m++) {
                    snprintf(label[m], sizeof label[m], "W%d", m);
                    fill(sendf[m], sizes[m], R, t * 10 + m);
                    comm_send(c, sendf[m], sizes[m], WP_FP32, next, &(CommInfo){ t, label[m] });
                    sent += sizes[m] * sizeof(float);
                }
                if (P >= 3) {   /* and one the other way round the ring */
                    fill(sendb, 5000, R, t * 10 + 9);
                    comm_send(c, sendb, 5000, WP_FP32, prev, &(CommInfo){ t, "back" });
                    sent += 5000 * sizeof(float);
                }
            } else {
                for (int m = 0; m < NS; m++) {
                    for (size_t i = 0; i < sizes[m]; i++) recvf[m][i] = -1;
                    comm_recv(c, recvf[m], sizes[m], WP_FP32, prev, &(CommInfo){ t, "W" });
                }
                if (P >= 3) comm_recv(c, recvb, 5000, WP_FP32, next, &(CommInfo){ t, "back" });
            }
        }
        comm_wait_turn(c);
        for (int m = 0; m < NS; m++) {
            char what[64];
            snprintf(what, sizeof what, "ring turn %d message %d (%zu floats) from %d", t, m, sizes[m], prev);
            fill(want, sizes[m], prev, t * 10 + m);
            check_buf(recvf[m], want, sizes[m], what);
        }
        if (P >= 3) {
            fill(want, 5000, next, t * 10 + 9);
            check_buf(recvb, want, 5000, "ring backwards");
        }
    }
    CHECK(comm_stats(c)->bytes[COMM_SEND] - sent0 == sent, "rank %d: SEND bytes counted %llu, sent %llu", R,
          (unsigned long long)(comm_stats(c)->bytes[COMM_SEND] - sent0), (unsigned long long)sent);
    for (int m = 0; m < NS; m++) { free(sendf[m]); free(recvf[m]); }
    free(sendb); free(recvb); free(want);
}

/* --- Collectives --------------------------------------------------------------------------- */

enum { MAXG = 8 };
static int ng, gn[MAXG], granks[MAXG][64], gid[MAXG];

static void add_group(Comm *c, const int *ranks, int n) {
    memcpy(granks[ng], ranks, (size_t)n * sizeof(int));
    gn[ng] = n;
    gid[ng] = comm_add_group(c, ranks, n);
    CHECK(gid[ng] == ng, "rank %d: comm_add_group returned %d, expected %d", R, gid[ng], ng);
    ng++;
}

/* Every rank declares the same groups in the same order, as emitted code does. */
static void declare_groups(Comm *c) {
    int r[64], n;
    for (n = 0; n < P; n++) r[n] = n;
    add_group(c, r, P);                                  /* the world */
    for (n = 0; n < P; n++) r[n] = P - 1 - n;
    add_group(c, r, P);                                  /* the world reversed: shard i on rank P-1-i */
    for (n = 0; 2 * n < P; n++) r[n] = 2 * n;
    add_group(c, r, n);                                  /* even ranks */
    if (P >= 2) { for (n = 0; 2 * n + 1 < P; n++) r[n] = 2 * n + 1; add_group(c, r, n); }   /* odd ranks */
    r[0] = P - 1;
    add_group(c, r, 1);                                  /* a singleton */
    if (P >= 3) { r[0] = 2; r[1] = 0; add_group(c, r, 2); }                                  /* out of order */
}

static int member(int g) {
    for (int i = 0; i < gn[g]; i++)
        if (granks[g][i] == R) return i;
    return -1;
}

/* One posted collective, checked after the wait. */
typedef struct Job {
    CommKind kind;
    int g, root, inplace;
    size_t n;
    float *a, *b;
} Job;

/* Posts every collective on every group this rank is in (plus the ring), for buffers of n floats,
 * as one turn; then checks them all. */
static void test_collectives_n(Comm *c, size_t n, int turn) {
    Job jobs[256];
    int nj = 0;
    int stream = (int)n;
    float *ringo = alloc(n), *ringi = alloc(n);
    fill(ringo, n, R, stream + 1);
    comm_recv(c, ringi, n, WP_FP32, (R + P - 1) % P, &(CommInfo){ turn, "ring" });
    for (int g = 0; g < ng; g++) {
        int me = member(g);
        if (me < 0) continue;
        int k = gn[g];
        Job j = { 0 };
        j.g = g; j.n = n;

        j.kind = COMM_ALLREDUCE; j.a = alloc(n); fill(j.a, n, R, stream);
        comm_allreduce(c, g, j.a, n, WP_FP32, &(CommInfo){ turn, "allreduce" });
        jobs[nj++] = j;

        for (int ri = 0; ri < k; ri++) {
            j.root = granks[g][ri];
            j.kind = COMM_BCAST; j.a = alloc(n);
            if (R == j.root) fill(j.a, n, R, stream + ri); else for (size_t i = 0; i < n; i++) j.a[i] = -1;
            comm_bcast(c, g, j.a, n, WP_FP32, j.root, &(CommInfo){ turn, "bcast" });
            jobs[nj++] = j;
            j.kind = COMM_REDUCE; j.a = alloc(n); fill(j.a, n, R, stream + ri);
            comm_reduce(c, g, j.a, n, WP_FP32, j.root, &(CommInfo){ turn, "reduce" });
            jobs[nj++] = j;
        }
        j.root = -1;

        size_t off = comm_shard_offset(n, k, me), len = comm_shard_len(n, k, me);
        for (int inplace = 0; inplace < 2; inplace++) {
            j.kind = COMM_ALLGATHER; j.inplace = inplace; j.b = alloc(n);
            for (size_t i = 0; i < n; i++) j.b[i] = -1;
            if (inplace) { j.a = NULL; for (size_t i = 0; i < len; i++) j.b[off + i] = val(R, stream, off + i); }
            else { j.a = alloc(len); for (size_t i = 0; i < len; i++) j.a[i] = val(R, stream, off + i); }
            comm_allgather(c, g, inplace ? j.b + off : j.a, j.b, n, WP_FP32, &(CommInfo){ turn, "allgather" });
            jobs[nj++] = j;
        }
        j.inplace = 0;

        j.kind = COMM_REDUCE_SCATTER; j.a = alloc(n); j.b = alloc(len);
        fill(j.a, n, R, stream + 5);
        for (size_t i = 0; i < len; i++) j.b[i] = -1;
        comm_reduce_scatter(c, g, j.a, j.b, n, WP_FP32, &(CommInfo){ turn, "reduce_scatter" });
        jobs[nj++] = j;
    }
    comm_send(c, ringo, n, WP_FP32, (R + 1) % P, &(CommInfo){ turn, "ring" });
    comm_wait_turn(c);

    float *want = alloc(n);
    for (int q = 0; q < nj; q++) {
        Job *j = &jobs[q];
        int k = gn[j->g], me = member(j->g);
        char what[96];
        snprintf(what, sizeof what, "%s on group %d of %d, n %zu, root %d%s", comm_kind_names[j->kind], j->g, k, n,
                 j->root, j->inplace ? ", in place" : "");
        size_t off = comm_shard_offset(n, k, me), len = comm_shard_len(n, k, me);
        int ri = 0;
        for (int i = 0; i < k; i++) if (granks[j->g][i] == j->root) ri = i;
        switch (j->kind) {
        case COMM_ALLREDUCE:
            for (size_t i = 0; i < n; i++) { want[i] = 0; for (int m = 0; m < k; m++) want[i] += val(granks[j->g][m], stream, i); }
            check_buf(j->a, want, n, what);
            break;
        case COMM_BCAST:
            fill(want, n, j->root, stream + ri);
            check_buf(j->a, want, n, what);
            break;
        case COMM_REDUCE:
            if (R == j->root)
                for (size_t i = 0; i < n; i++) { want[i] = 0; for (int m = 0; m < k; m++) want[i] += val(granks[j->g][m], stream + ri, i); }
            else
                fill(want, n, R, stream + ri);   /* left as it was */
            check_buf(j->a, want, n, what);
            break;
        case COMM_ALLGATHER:
            for (int s = 0; s < k; s++)
                for (size_t i = comm_shard_offset(n, k, s); i < comm_shard_offset(n, k, s + 1); i++) want[i] = val(granks[j->g][s], stream, i);
            check_buf(j->b, want, n, what);
            break;
        case COMM_REDUCE_SCATTER:
            for (size_t i = 0; i < len; i++) { want[i] = 0; for (int m = 0; m < k; m++) want[i] += val(granks[j->g][m], stream + 5, off + i); }
            check_buf(j->b, want, len, what);
            break;
        default: break;
        }
        free(j->a); free(j->b);
    }
    fill(want, n, (R + P - 1) % P, stream + 1);
    check_buf(ringi, want, n, "ring beside the collectives");
    free(want); free(ringo); free(ringi);
}

static void test_collectives(Comm *c) {
    /* 0 and sizes below the group sizes give empty shards; 30001 is past the eager limits. */
    const size_t sizes[] = { 0, 1, 3, 7, 10, 30001 };
    for (int s = 0; s < 6; s++) test_collectives_n(c, sizes[s], 100 + s);
    CHECK(comm_shard_len(10, 4, 0) == 2 && comm_shard_len(10, 4, 1) == 3 && comm_shard_offset(10, 4, 3) == 7,
          "rank %d: shards of 10 over 4: expected 2,3,2,3 from 0,2,5,7", R);
}

/* comm_ring_shift on every group this rank is in, posted together as one turn: member i gets what
 * member i - 1 sent, in the group's own order (the reversed and out-of-order groups), a singleton
 * its own; a size per group, so that a shift matched with another group's would fail its check. */
static void test_ring_shift(Comm *c) {
    float *out[MAXG], *in[MAXG], *want = alloc(1000 + MAXG);
    for (int g = 0; g < ng; g++) {
        out[g] = alloc(1000 + g); in[g] = alloc(1000 + g);
        if (member(g) < 0) continue;
        fill(out[g], 1000 + g, R, 60 + g);
        for (int i = 0; i < 1000 + g; i++) in[g][i] = -1;
        comm_ring_shift(c, g, out[g], in[g], 1000 + g, WP_FP32, &(CommInfo){ 200, "ring shift" });
    }
    comm_turn_posted(c);
    comm_wait_turn(c);
    for (int g = 0; g < ng; g++) {
        int me = member(g);
        if (me >= 0) {
            fill(want, 1000 + g, granks[g][(me + gn[g] - 1) % gn[g]], 60 + g);
            char what[48];
            snprintf(what, sizeof what, "ring shift on group %d", g);
            check_buf(in[g], want, 1000 + g, what);
        }
        free(out[g]); free(in[g]);
    }
    free(want);
}

/* --- Overlap, emulated links, traces ------------------------------------------------------- */

static void test_overlap(Comm *c) {
    const size_t n = 1 << 20;   /* 4 MB: a rendezvous transfer that needs MPI's progress */
    float *out = alloc(n), *in = alloc(n), *sum = alloc(n), *want = alloc(n);
    for (int progress = 0; progress < 2; progress++) {
        fill(out, n, R, 40 + progress);
        fill(sum, n, R, 50 + progress);
        for (size_t i = 0; i < n; i++) in[i] = -1;
        comm_recv(c, in, n, WP_FP32, (R + P - 1) % P, &(CommInfo){ 200, "overlap" });
        comm_send(c, out, n, WP_FP32, (R + 1) % P, &(CommInfo){ 200, "overlap" });
        comm_allreduce(c, 0, sum, n, WP_FP32, &(CommInfo){ 200, "overlap" });
        double s = compute(c, progress, 20);
        comm_wait_turn(c);
        CHECK(s > 0, "rank %d: compute", R);
        fill(want, n, (R + P - 1) % P, 40 + progress);
        check_buf(in, want, n, progress ? "overlap with comm_progress: send" : "overlap: send");
        for (size_t i = 0; i < n; i++) { want[i] = 0; for (int m = 0; m < P; m++) want[i] += val(m, 50 + progress, i); }
        check_buf(sum, want, n, "overlap: allreduce");
        fill(want, n, R, 40 + progress);
        check_buf(out, want, n, "overlap: the send buffer is untouched");
    }
    free(out); free(in); free(sum); free(want);
}

/* --- bf16 elements --------------------------------------------------------------------------- */

/* A small integer for bf16 collectives: below 60, so a sum over up to 4 ranks stays below 256 and
 * every partial sum is exact in bf16's 8 significant bits, whatever the order. */
static float small(int a, size_t i) { return (float)((a * 7 + (long)(i % 53)) % 60); }

/* bf16 moves 2 bytes an element (counted so), and sums are rounded to bf16: on 2 ranks a sum is
 * one addition, so its rounding is known whatever the library's order. */
static void test_bf16(Comm *c) {
    enum { N = 1001 };   /* odd: no element pairs into a float */
    WpBf16 out[N], in[N], sum[N], full[N];
    for (int i = 0; i < N; i++) { out[i] = wp_f32_to_bf16(val(R, 70, i)); in[i] = 0xFFFF; sum[i] = wp_f32_to_bf16(small(R, i)); }
    uint64_t sent0 = comm_stats(c)->bytes[COMM_SEND];
    comm_recv(c, in, N, WP_BF16, (R + P - 1) % P, &(CommInfo){ 400, "bf16" });
    comm_send(c, out, N, WP_BF16, (R + 1) % P, &(CommInfo){ 400, "bf16" });
    comm_allreduce(c, 0, sum, N, WP_BF16, &(CommInfo){ 400, "bf16 sum" });
    comm_wait_turn(c);
    CHECK(comm_stats(c)->bytes[COMM_SEND] - sent0 == 2 * N, "rank %d: a bf16 send of %d elements counted %llu bytes, expected %d",
          R, N, (unsigned long long)(comm_stats(c)->bytes[COMM_SEND] - sent0), 2 * N);
    int bad = -1;
    for (int i = 0; i < N && bad < 0; i++)
        if (in[i] != wp_f32_to_bf16(val((R + P - 1) % P, 70, i))) bad = i;
    CHECK(bad < 0, "rank %d: bf16 ring: element %d is %04x", R, bad, bad < 0 ? 0 : in[bad]);
    bad = -1;
    for (int i = 0; i < N && bad < 0; i++) {
        float want = 0;
        for (int m = 0; m < P; m++) want += small(m, i);
        if (wp_bf16_to_f32(sum[i]) != want) bad = i;
    }
    CHECK(bad < 0, "rank %d: bf16 allreduce: element %d is %g", R, bad, bad < 0 ? 0.0 : wp_bf16_to_f32(sum[bad]));

    /* the whole buffer gathered from bf16 shards, then reduce-scattered back */
    for (int i = 0; i < N; i++) full[i] = 0xFFFF;
    size_t off = comm_shard_offset(N, P, R), len = comm_shard_len(N, P, R);
    for (size_t i = 0; i < len; i++) full[off + i] = wp_f32_to_bf16(small(R, off + i));
    comm_allgather(c, 0, full + off, full, N, WP_BF16, &(CommInfo){ 401, "bf16 gather" });
    comm_wait_turn(c);
    bad = -1;
    for (int s = 0; s < P; s++)
        for (size_t i = comm_shard_offset(N, P, s); i < comm_shard_offset(N, P, s + 1) && bad < 0; i++)
            if (full[i] != wp_f32_to_bf16(small(s, i))) bad = (int)i;
    CHECK(bad < 0, "rank %d: bf16 allgather: element %d is %04x", R, bad, bad < 0 ? 0 : full[bad]);
    comm_reduce_scatter(c, 0, full, sum, N, WP_BF16, &(CommInfo){ 402, "bf16 scatter" });
    comm_wait_turn(c);
    bad = -1;
    for (size_t i = 0; i < len && bad < 0; i++) {
        int s = 0;
        while (comm_shard_offset(N, P, s + 1) <= off + i) s++;
        if (wp_bf16_to_f32(sum[i]) != (float)P * small(s, off + i)) bad = (int)i;
    }
    CHECK(bad < 0, "rank %d: bf16 reduce_scatter: element %zu of the shard wrong", R, bad < 0 ? 0 : off + (size_t)bad);

    if (P != 2) return;
    /* 1 + 2^-8 is halfway between bf16's 1 and 1 + 2^-7: to even, 1. 1 + 3 * 2^-8: to 1 + 2^-6. */
    WpBf16 r[2] = { wp_f32_to_bf16(R ? 0x1p-8f : 1.0f), wp_f32_to_bf16(R ? 0x1p-7f + 0x1p-8f : 1.0f) };
    comm_reduce(c, 0, r, 2, WP_BF16, 0, &(CommInfo){ 403, "bf16 rounding" });
    comm_wait_turn(c);
    if (R == 0) {
        CHECK(wp_bf16_to_f32(r[0]) == 1.0f, "rank 0: bf16 1 + 2^-8 summed to %g, expected 1 (ties to even)", wp_bf16_to_f32(r[0]));
        CHECK(wp_bf16_to_f32(r[1]) == 1.0f + 0x1p-6f, "rank 0: bf16 1 + 3*2^-8 summed to %g, expected 1 + 2^-6",
              wp_bf16_to_f32(r[1]));
    }
}

typedef struct Seen { int n; CommEvent ev[16]; } Seen;
static void on_event(void *ud, const CommEvent *e) {
    Seen *s = ud;
    if (s->n < 16) s->ev[s->n++] = *e;
}

static void test_link_delay(Comm *c) {
    const double alpha = 0.15, beta = 1e-7;   /* 150 ms, 10 MB/s */
    const size_t n = 250000;                  /* 1 MB: 100 ms on that link */
    float *o1 = alloc(n), *o2 = alloc(n), *i1 = alloc(n), *i2 = alloc(n), *want = alloc(n);
    fill(o1, n, R, 60); fill(o2, n, R, 61);
    Seen seen = { 0 };
    comm_set_link(c, (R + 1) % P, alpha, beta);   /* both ends of each link (comm.h) */
    comm_set_link(c, (R + P - 1) % P, alpha, beta);
    comm_set_trace(c, on_event, &seen);
    comm_barrier(c);
    double t0 = comm_now(c);
    comm_recv(c, i1, n, WP_FP32, (R + P - 1) % P, &(CommInfo){ 300, "first" });
    comm_recv(c, i2, n, WP_FP32, (R + P - 1) % P, &(CommInfo){ 300, "second" });
    comm_send(c, o1, n, WP_FP32, (R + 1) % P, &(CommInfo){ 300, "first" });
    comm_send(c, o2, n, WP_FP32, (R + 1) % P, &(CommInfo){ 300, "second" });
    comm_wait_turn(c);
    comm_set_trace(c, NULL, NULL);
    comm_set_link(c, -1, 0, 0);
    fill(want, n, (R + P - 1) % P, 60); check_buf(i1, want, n, "delayed send 1");
    fill(want, n, (R + P - 1) % P, 61); check_buf(i2, want, n, "delayed send 2");

    /* Lower bounds only: a loaded machine can only make things later. The link delivers a send
     * alpha + k * bytes * beta after the first was posted (the second queues behind the first),
     * and neither its completion nor the receiver's comes before that (less the microseconds
     * between the two posts). All ranks run on
     * one machine, so they compare on its monotonic clock: each tells the others when it posted. */
    CHECK(seen.n == 4, "rank %d: %d trace events, expected 4", R, seen.n);
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    double origin = (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec - comm_now(c);   /* comm_now's 0 */
    double *posted = calloc((size_t)P, sizeof(double));
    for (int k = 0; k < seen.n; k++)
        if (seen.ev[k].kind == COMM_SEND && strcmp(seen.ev[k].label, "first") == 0) posted[R] = origin + seen.ev[k].t_post;
    comm_allreduce_double(c, posted, P);
    double link1 = alpha + (double)(n * sizeof(float)) * beta, bb = (double)(n * sizeof(float)) * beta;
    for (int k = 0; k < seen.n; k++) {
        const CommEvent *e = &seen.ev[k];
        int second = strcmp(e->label, "second") == 0;
        CHECK(e->turn == 300 && e->bytes == n * sizeof(float) && e->t_post >= t0 && e->t_done >= e->t_post,
              "rank %d: event %d: turn %d, %zu bytes, posted %g, done %g", R, k, e->turn, e->bytes, e->t_post - t0, e->t_done - t0);
        if (e->kind == COMM_SEND) {
            CHECK(e->peer == (R + 1) % P && e->t_done - e->t_post >= link1 + second * bb - 1e-3,
                  "rank %d: SEND %s to %d over the emulated link done %.3f s after posting, expected >= %.3f",
                  R, e->label, e->peer, e->t_done - e->t_post, link1 + second * bb);
        } else {
            double sender = posted[(R + P - 1) % P], got = origin + e->t_done - sender;
            CHECK(e->kind == COMM_RECV && got >= link1 + second * bb - 1e-3,
                  "rank %d: RECV %s over the emulated link done %.3f s after its send was posted, expected >= %.3f",
                  R, e->label, got, link1 + second * bb);
        }
    }
    free(posted);
    free(o1); free(o2); free(i1); free(i2); free(want);
}

/* An operation is counted once and traced once, with its whole bytes, however many pieces it
 * takes (WP_COMM_MAX_ELEMS). */
static void test_whole(Comm *c) {
    const size_t n = 2500;
    float *o = alloc(n), *in = alloc(n), *sum = alloc(n), *want = alloc(n);
    fill(o, n, R, 70);
    fill(sum, n, R, 71);
    Seen seen = { 0 };
    CommStats before = *comm_stats(c);
    comm_set_trace(c, on_event, &seen);
    comm_recv(c, in, n, WP_FP32, (R + P - 1) % P, &(CommInfo){ 400, "whole" });
    comm_send(c, o, n, WP_FP32, (R + 1) % P, &(CommInfo){ 400, "whole" });
    comm_allreduce(c, gid[0], sum, n, WP_FP32, &(CommInfo){ 400, "whole" });
    comm_wait_turn(c);
    comm_set_trace(c, NULL, NULL);
    const CommStats *st = comm_stats(c);
    CHECK(st->calls[COMM_SEND] == before.calls[COMM_SEND] + 1 && st->bytes[COMM_SEND] == before.bytes[COMM_SEND] + n * 4 &&
          st->calls[COMM_ALLREDUCE] == before.calls[COMM_ALLREDUCE] + 1,
          "rank %d: one send of %zu bytes and one all-reduce counted: %llu sends more, %llu bytes more", R, n * 4,
          (unsigned long long)(st->calls[COMM_SEND] - before.calls[COMM_SEND]),
          (unsigned long long)(st->bytes[COMM_SEND] - before.bytes[COMM_SEND]));
    CHECK(seen.n == 3, "rank %d: %d trace events for a send, a receive and an all-reduce, expected 3", R, seen.n);
    for (int k = 0; k < seen.n; k++)
        CHECK(seen.ev[k].bytes == n * 4 && seen.ev[k].turn == 400, "rank %d: event %d: %zu bytes in turn %d, expected %zu in 400",
              R, k, seen.ev[k].bytes, seen.ev[k].turn, n * 4);
    fill(want, n, (R + P - 1) % P, 70);
    check_buf(in, want, n, "the received pieces");
    for (size_t i = 0; i < n; i++) { want[i] = 0; for (int m = 0; m < P; m++) want[i] += val(m, 71, i); }
    check_buf(sum, want, n, "the all-reduced pieces");
    free(o); free(in); free(sum); free(want);
}

/* --- Blocking calls ------------------------------------------------------------------------ */

static size_t part_len(int r) { return r % 3 == 1 ? 0 : (size_t)(r + 2) * 1000; }

static void test_blocking(Comm *c) {
    comm_barrier(c);
    double x[2] = { R + 0.5, 1 };
    comm_allreduce_double(c, x, 2);
    CHECK(x[0] == P * (P - 1) / 2.0 + 0.5 * P && x[1] == P, "rank %d: allreduce_double gave %g %g", R, x[0], x[1]);

    char msg[32] = "";
    if (R == P - 1) snprintf(msg, sizeof msg, "hello from %d", P - 1);
    comm_bcast_bytes(c, msg, sizeof msg, P - 1);
    char want_msg[32];
    snprintf(want_msg, sizeof want_msg, "hello from %d", P - 1);
    CHECK(strcmp(msg, want_msg) == 0, "rank %d: bcast_bytes gave \"%s\"", R, msg);

    /* Gather uneven parts (some empty) to rank 0, then scatter them back. */
    size_t total = 0, n = part_len(R);
    for (int r = 0; r < P; r++) total += part_len(r);
    float *mine = alloc(n), *all = R == 0 ? alloc(total) : NULL, *back = alloc(n);
    fill(mine, n, R, 70);
    size_t counts[64];
    size_t got = comm_gather(c, mine, n, all, total, counts);
    if (R == 0) {
        CHECK(got == total, "rank 0: gather returned %zu, expected %zu", got, total);
        size_t off = 0;
        for (int r = 0; r < P; r++) {
            float *want = alloc(part_len(r));
            fill(want, part_len(r), r, 70);
            CHECK(counts[r] == part_len(r), "rank 0: gather count of rank %d: %zu", r, counts[r]);
            check_buf(all + off, want, part_len(r), "gather");
            off += part_len(r);
            free(want);
        }
        for (size_t i = 0; i < total; i++) all[i] += 1;
    } else {
        CHECK(got == 0, "rank %d: gather returned %zu off rank 0", R, got);
    }
    comm_scatter(c, all, R == 0 ? total : 0, back, n);
    for (size_t i = 0; i < n; i++) mine[i] += 1;
    check_buf(back, mine, n, "scatter");
    free(mine); free(all); free(back);
}

/* --- Failures, each on 2 ranks; the script checks the message and the exit status -------------- */

static int run_failure(Comm *c, const char *mode) {
    if (P < 2) { fprintf(stderr, "%s needs 2 ranks\n", mode); return 2; }
    /* The script sets the timeout low through WP_COMM_TIMEOUT. */
    const size_t n = 1 << 20;  /* 4 MB: cannot complete without the receiver (no eager copy) */
    float *buf = calloc(n, sizeof(float));
    if (strcmp(mode, "timeout-send") == 0) {
        /* Rank 1 never posts its receive: rank 0 must give up, naming SEND "W3" to rank 1 in turn 3. */
        if (R == 0) {
            comm_send(c, buf, 0, WP_FP32, 0, &(CommInfo){ 3, "self" });   /* two that complete, beside it */
            comm_recv(c, buf + 1, 0, WP_FP32, 0, &(CommInfo){ 3, "self" });
            comm_send(c, buf, n, WP_FP32, 1, &(CommInfo){ 3, "W3" });
            comm_wait_turn(c);
        }
    } else if (strcmp(mode, "timeout-allreduce") == 0) {
        int g = comm_add_group(c, (int[]){ 0, 1 }, 2);
        if (R == 0) {
            comm_allreduce(c, g, buf, 16, WP_FP32, &(CommInfo){ 5, "D1" });
            comm_wait_turn(c);
        }
    } else if (strcmp(mode, "mismatch") == 0 || strcmp(mode, "truncate") == 0) {
        /* The plan's sizes disagree: rank 1 expects 12 (or 8) floats, rank 0 sends 10. */
        if (R == 0) comm_send(c, buf, 10, WP_FP32, 1, &(CommInfo){ 7, "A2" });
        if (R == 1) comm_recv(c, buf, mode[0] == 'm' ? 12 : 8, WP_FP32, 0, &(CommInfo){ 7, "A2" });
        comm_wait_turn(c);
    } else if (strcmp(mode, "bad-peer") == 0) {
        /* a peer outside the world: refused when posted, by the check both layers share */
        if (R == 0) comm_send(c, buf, 10, WP_FP32, P, &(CommInfo){ 3, "W3" });
    } else if (strcmp(mode, "mpi-fail") == 0) {
        /* a failing MPI call on rank 1 ends the whole job (common/fail.h), rank 0 too */
        if (R == 1) {
            int x;
            MPI_CHECK(MPI_Comm_rank(MPI_COMM_NULL, &x));
        }
    } else {
        fprintf(stderr, "unknown mode %s\n", mode);
        return 2;
    }
    if (R != 0 || strcmp(mode, "mismatch") == 0 || strcmp(mode, "truncate") == 0 || strcmp(mode, "mpi-fail") == 0)
        sleep(30);   /* until the abort */
    fprintf(stderr, "rank %d: %s: no abort\n", R, mode);
    return 1;
}

int main(int argc, char **argv) {
    Comm *c = comm_init(&argc, &argv);
    R = comm_rank(c);
    P = comm_size(c);
    if (argc > 1) return run_failure(c, argv[1]);
    if (P > 64) { fprintf(stderr, "at most 64 ranks\n"); return 2; }
    CHECK(comm_stats(c)->calls[COMM_SEND] == 0, "rank %d: fresh counters", R);

    declare_groups(c);
    test_ring(c);
    test_collectives(c);
    test_ring_shift(c);
    test_overlap(c);
    test_bf16(c);
    if (!getenv("WP_COMM_MAX_ELEMS")) test_link_delay(c);
    test_whole(c);
    test_blocking(c);

    /* One tally for the whole job, printed by rank 0. */
    double tally[2] = { check_passed_, check_failed_ };
    comm_allreduce_double(c, tally, 2);
    const CommStats *st = comm_stats(c);
    if (R == 0) {
        printf("rank 0: %llu sends (%.1f MB), %llu collectives, %.3f s waiting\n",
               (unsigned long long)st->calls[COMM_SEND], st->bytes[COMM_SEND] / 1e6,
               (unsigned long long)(st->calls[COMM_BCAST] + st->calls[COMM_REDUCE] + st->calls[COMM_ALLREDUCE] +
                                    st->calls[COMM_ALLGATHER] + st->calls[COMM_REDUCE_SCATTER]), st->wait_s);
    }
    check_passed_ = (int)tally[0];
    check_failed_ = (int)tally[1];
    comm_finalize(c);
    char name[32];
    snprintf(name, sizeof name, "comm_test on %d ranks", P);
    int status = check_failed_ ? 1 : 0;
    if (R == 0) status = check_summary(name);
    return status;
}
