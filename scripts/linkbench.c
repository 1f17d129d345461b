/* The link benchmark `wpgen calibrate --links` reads: point-to-point and collective times between
 * the ranks of an MPI job (run by scripts/linkbench.sh, one rank per device as training runs).
 *
 * Point to point: rank 0 and every other rank r ping-pong messages of 1 KiB to MAX bytes (powers
 * of 4); the one-way time is half the median round trip. Collectives: all-reduce, broadcast and
 * all-gather of the same sizes over all ranks, the slowest rank's time, median of the repeats.
 * Whether two ranks share a host (MPI_Get_processor_name) tells calibrate which link a pair
 * measures: inside a node or the network. Rank 0 prints one JSON object:
 *
 *   { "version": 1, "kind": "wpgen-linkbench", "ranks": N, "hosts": ["h0", ...],
 *     "p2p": [ { "a": 0, "b": 1, "same_host": true, "bytes": 1024, "seconds": 1.2e-6 }, ... ],
 *     "collectives": [ { "op": "allreduce", "ranks": N, "bytes": 1024, "seconds": 3e-6 }, ... ] }
 *
 * usage: linkbench [MAX_BYTES (default 16777216)] [REPEATS (default 10)]. Exit 0, 2 bad flags,
 * 3 an MPI call failed (named). */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MPI_CHECK(call) do { int rc_ = (call); if (rc_ != MPI_SUCCESS) { \
    char s_[MPI_MAX_ERROR_STRING]; int l_ = 0; MPI_Error_string(rc_, s_, &l_); \
    fprintf(stderr, "linkbench: %s failed: %s\n", #call, s_); MPI_Abort(MPI_COMM_WORLD, 3); } } while (0)

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(double *t, int n) {
    qsort(t, (size_t)n, sizeof *t, cmp_double);
    return n % 2 ? t[n / 2] : (t[n / 2 - 1] + t[n / 2]) / 2;
}

int main(int argc, char **argv) {
    MPI_CHECK(MPI_Init(&argc, &argv));
    int rank, size;
    MPI_CHECK(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
    MPI_CHECK(MPI_Comm_size(MPI_COMM_WORLD, &size));
    long max = argc > 1 ? strtol(argv[1], NULL, 10) : 16 << 20;
    int reps = argc > 2 ? atoi(argv[2]) : 10;
    if (max < 1024 || max > (1L << 30) || reps < 1 || reps > 1000) {
        if (rank == 0) fprintf(stderr, "linkbench: usage: linkbench [MAX_BYTES in [1024, 2^30]] [REPEATS in [1, 1000]]\n");
        MPI_Finalize();
        return 2;
    }
    char host[MPI_MAX_PROCESSOR_NAME] = { 0 };
    int hl = 0;
    MPI_CHECK(MPI_Get_processor_name(host, &hl));
    char *hosts = calloc((size_t)size, MPI_MAX_PROCESSOR_NAME);
    MPI_CHECK(MPI_Allgather(host, MPI_MAX_PROCESSOR_NAME, MPI_CHAR, hosts, MPI_MAX_PROCESSOR_NAME, MPI_CHAR, MPI_COMM_WORLD));
    /* allgather's receive side holds size times the message */
    char *buf = malloc((size_t)max), *big = malloc((size_t)max * (size_t)size);
    double *t = calloc((size_t)reps, sizeof *t);
    if (!buf || !big || !t || !hosts) { fprintf(stderr, "linkbench: rank %d: out of memory\n", rank); MPI_Abort(MPI_COMM_WORLD, 3); }
    memset(buf, 1, (size_t)max);
    if (rank == 0) {
        printf("{\"version\": 1, \"kind\": \"wpgen-linkbench\", \"ranks\": %d, \"hosts\": [", size);
        for (int r = 0; r < size; r++) printf("%s\"%s\"", r ? ", " : "", hosts + (size_t)r * MPI_MAX_PROCESSOR_NAME);
        printf("],\n \"p2p\": [");
    }
    int first = 1;
    for (int peer = 1; peer < size; peer++)
        for (long bytes = 1024; bytes <= max; bytes *= 4) {
            for (int k = 0; k < reps + 1; k++) {
                MPI_CHECK(MPI_Barrier(MPI_COMM_WORLD));
                double t0 = MPI_Wtime();
                if (rank == 0) {
                    MPI_CHECK(MPI_Send(buf, (int)bytes, MPI_BYTE, peer, 0, MPI_COMM_WORLD));
                    MPI_CHECK(MPI_Recv(buf, (int)bytes, MPI_BYTE, peer, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
                } else if (rank == peer) {
                    MPI_CHECK(MPI_Recv(buf, (int)bytes, MPI_BYTE, 0, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
                    MPI_CHECK(MPI_Send(buf, (int)bytes, MPI_BYTE, 0, 0, MPI_COMM_WORLD));
                }
                if (k > 0) t[k - 1] = (MPI_Wtime() - t0) / 2;   /* the first is a warm-up */
            }
            if (rank == 0) {
                int same = !strcmp(hosts, hosts + (size_t)peer * MPI_MAX_PROCESSOR_NAME);
                printf("%s\n  {\"a\": 0, \"b\": %d, \"same_host\": %s, \"bytes\": %ld, \"seconds\": %.9g}", first ? "" : ",", peer,
                       same ? "true" : "false", bytes, median(t, reps));
                first = 0;
            }
        }
    if (rank == 0) printf("\n ],\n \"collectives\": [");
    first = 1;
    const char *ops[] = { "allreduce", "bcast", "allgather" };
    for (int o = 0; o < 3; o++)
        for (long bytes = 1024; bytes <= max; bytes *= 4) {
            for (int k = 0; k < reps + 1; k++) {
                MPI_CHECK(MPI_Barrier(MPI_COMM_WORLD));
                double t0 = MPI_Wtime();
                if (o == 0) MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, buf, (int)(bytes / 4), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD));
                else if (o == 1) MPI_CHECK(MPI_Bcast(buf, (int)bytes, MPI_BYTE, 0, MPI_COMM_WORLD));
                else MPI_CHECK(MPI_Allgather(buf, (int)(bytes / size), MPI_BYTE, big, (int)(bytes / size), MPI_BYTE, MPI_COMM_WORLD));
                double mine = MPI_Wtime() - t0, slowest = 0;
                MPI_CHECK(MPI_Allreduce(&mine, &slowest, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD));
                if (k > 0) t[k - 1] = slowest;
            }
            if (rank == 0) {
                printf("%s\n  {\"op\": \"%s\", \"ranks\": %d, \"bytes\": %ld, \"seconds\": %.9g}", first ? "" : ",", ops[o], size, bytes, median(t, reps));
                first = 0;
            }
        }
    if (rank == 0) printf("\n ]\n}\n");
    free(buf); free(big); free(t); free(hosts);
    MPI_CHECK(MPI_Finalize());
    return 0;
}
