/* MPI on host memory for both communication layers (host_mpi.h): the world, the settings, the
 * blocking calls outside the step, and the failure path. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "hostmpi/host_mpi.h"

void hm_call_failed(const char *call, int rc, const char *file, int line) {
    char err[MPI_MAX_ERROR_STRING];
    int len = 0;
    if (MPI_Error_string(rc, err, &len) != MPI_SUCCESS) snprintf(err, sizeof err, "error %d", rc);
    wp_call_failed(COMM_ABORT_STATUS, file, line, call, err);
}

void hm_abort_job(int status) {
    fflush(stdout);
    fflush(stderr);
    int inited = 0, finished = 0;
    MPI_Initialized(&inited);
    MPI_Finalized(&finished);
    if (inited && !finished) MPI_Abort(MPI_COMM_WORLD, status);   /* mpirun ends every rank */
    exit(status);
}

void *hm_alloc(void *p, size_t bytes) {
    void *q = realloc(p, bytes ? bytes : 1);
    if (!q) comm_fail("out of memory (%zu bytes)", bytes);
    return q;
}

/* --- What every layer has alike (host_mpi.h): counters, clock, settings, failing ----------- */

double comm_now(const Comm *c) { return hm_now(comm_host(c)); }
int comm_rank(const Comm *c) { return comm_host(c)->rank; }
int comm_size(const Comm *c) { return comm_host(c)->size; }
int comm_local_size(const Comm *c) { return comm_host(c)->local_size; }
const CommStats *comm_stats(const Comm *c) { return &comm_host(c)->stats; }
void comm_reset_stats(Comm *c) { memset(&comm_host(c)->stats, 0, sizeof(CommStats)); }
void comm_set_save_timeout(Comm *c, double seconds) { hm_set_timeout(comm_host(c), seconds, 1); }

void hm_check_peer(const CommGroups *t, CommKind kind, int peer, const CommInfo *info) {
    char err[320];
    if (cb_check_peer(t, kind, peer, info, err, sizeof err)) comm_fail("%s", err);
}

const CommGroup *hm_member(const CommGroups *t, CommKind kind, int g, const CommInfo *info) {
    char err[320];
    const CommGroup *gr = cb_member(t, kind, g, info, err, sizeof err);
    if (!gr) comm_fail("%s", err);
    return gr;
}

int hm_root(const CommGroups *t, CommKind kind, int g, int root, const CommInfo *info) {
    char err[320];
    int r = cb_root(t, kind, g, root, info, err, sizeof err);
    if (r < 0) comm_fail("%s", err);
    return r;
}

/* Both layers' comm_abort: the job's failure path, whichever layer runs it. */
void comm_abort(Comm *c, int status, const char *fmt, ...) {
    (void)c;
    va_list ap;
    va_start(ap, fmt);
    wp_vfail(status, NULL, fmt, ap);
}

/* A timeout in seconds from the environment (its row in common/settings.c gives the default). */
static double env_seconds(const char *name) {
    char err[256];
    double t;
    if (cb_env_seconds(name, &t, err, sizeof err)) wp_fail(COMM_BAD_INPUT_STATUS, "comm", "%s", err);   /* bad input */
    return t;
}

void hm_init(HostMpi *h, int *argc, char ***argv) {
    memset(h, 0, sizeof *h);
    clock_gettime(CLOCK_MONOTONIC, &h->t0);
    wp_fail_setup(-1, hm_abort_job);   /* MPI's own failures from here end the job, the rank not known yet */
    int inited = 0;
    MPI_CHECK(MPI_Initialized(&inited));
    if (!inited) {
        int provided;   /* compute may run OpenMP threads, but only the main thread calls MPI */
        MPI_CHECK(MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided));
        h->started_mpi = 1;
    }
    MPI_CHECK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
    MPI_CHECK(MPI_Comm_dup(MPI_COMM_WORLD, &h->world));
    MPI_CHECK(MPI_Comm_set_errhandler(h->world, MPI_ERRORS_RETURN));
    MPI_CHECK(MPI_Comm_rank(h->world, &h->rank));
    MPI_CHECK(MPI_Comm_size(h->world, &h->size));
    wp_fail_setup(h->rank, hm_abort_job);
    /* the ranks sharing this node: what a compute backend divides the node's cores (or GPUs) among */
    MPI_Comm node;
    MPI_CHECK(MPI_Comm_split_type(h->world, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node));
    MPI_CHECK(MPI_Comm_size(node, &h->local_size));
    MPI_CHECK(MPI_Comm_rank(node, &h->local_rank));
    MPI_CHECK(MPI_Comm_free(&node));
    h->timeout = env_seconds("WP_COMM_TIMEOUT");
    h->save_timeout = env_seconds("WP_SAVE_TIMEOUT");
    char err[256];
    if (cb_env_max_elems(&h->max_elems, err, sizeof err)) wp_fail(COMM_BAD_INPUT_STATUS, "comm", "%s", err);   /* bad input */
}

void hm_finalize(HostMpi *h) {
    MPI_CHECK(MPI_Comm_free(&h->world));
    if (h->started_mpi) MPI_CHECK(MPI_Finalize());
}

void hm_set_timeout(HostMpi *h, double seconds, int save) {
    if (!(seconds >= 0)) comm_fail("%s: %g: expected seconds >= 0", save ? "comm_set_save_timeout" : "comm_set_timeout", seconds);
    if (save) h->save_timeout = seconds;
    else h->timeout = seconds;
}

double hm_now(const HostMpi *h) { return cb_since(&h->t0); }

/* --- Waiting ------------------------------------------------------------------------------- */

/* Waits for one request, polling, within `timeout` (0: none; var names its setting); what is
 * "GATHER part from rank 2", say. A receive (expect >= 0 bytes, in elements of esize bytes of MPI
 * type t) gets what it expected or ends the job. */
static void wait_one(HostMpi *h, MPI_Request *req, const char *what, double timeout, const char *var, long expect,
                     MPI_Datatype t, size_t esize) {
    double t0 = hm_now(h), nap = 2e-6;
    MPI_Status st;
    for (;;) {
        int done = 0;
        MPI_CHECK(MPI_Test(req, &done, &st));
        if (done) break;
        double waited = hm_now(h) - t0;
        if (timeout > 0 && waited > timeout)
            comm_fail("timeout: %s outside the step still pending after %.1f s (%s=%g)", what, waited, var, timeout);
        struct timespec ts = { 0, (long)(nap * 1e9) };
        nanosleep(&ts, NULL);
        if (nap < 500e-6) nap *= 2;
    }
    h->stats.wait_s += hm_now(h) - t0;
    if (expect < 0) return;
    int got = 0;   /* in elements: a piece's bytes may pass INT_MAX */
    MPI_CHECK(MPI_Get_count(&st, t, &got));
    if (got == MPI_UNDEFINED)
        comm_fail("%s: expected %ld bytes, the matching send had a part of an element", what, expect);
    if ((long)got * (long)esize != expect)
        comm_fail("%s: expected %ld bytes, the matching send had %ld", what, expect, (long)got * (long)esize);
}

static void wait_plain(HostMpi *h, MPI_Request *req, const char *what) {
    wait_one(h, req, what, h->timeout, "WP_COMM_TIMEOUT", -1, MPI_BYTE, 1);
}

/* --- The blocking calls -------------------------------------------------------------------- */

static void hm_barrier(HostMpi *h) {
    cb_count(&h->stats, COMM_UTIL, 0);
    MPI_Request r;
    MPI_CHECK(MPI_Ibarrier(h->world, &r));
    wait_plain(h, &r, "BARRIER");
}

static void hm_allreduce_double(HostMpi *h, double *x, int n) {
    cb_count(&h->stats, COMM_UTIL, (size_t)n * sizeof(double));
    MPI_Request r;
    MPI_CHECK(MPI_Iallreduce(MPI_IN_PLACE, x, n, MPI_DOUBLE, MPI_SUM, h->world, &r));
    wait_plain(h, &r, "ALLREDUCE_DOUBLE");
}

static void hm_bcast_bytes(HostMpi *h, void *buf, size_t nbytes, int root, int save) {
    if (root < 0 || root >= h->size) comm_fail("comm_bcast_bytes: root %d outside the world of %d ranks", root, h->size);
    cb_count(&h->stats, COMM_UTIL, nbytes);
    char what[64];
    snprintf(what, sizeof what, "BCAST_BYTES from rank %d", root);
    size_t len;
    for (size_t k = 0; k < cb_pieces(nbytes, h->max_elems); k++) {   /* MPI's int counts: in pieces */
        size_t off = cb_piece(nbytes, h->max_elems, k, &len);
        MPI_Request r;
        MPI_CHECK(MPI_Ibcast((char *)buf + off, (int)len, MPI_BYTE, root, h->world, &r));
        wait_one(h, &r, what, save ? h->save_timeout : h->timeout, save ? "WP_SAVE_TIMEOUT" : "WP_COMM_TIMEOUT", -1,
                 MPI_BYTE, 1);
    }
}

/* Every rank's n at rank 0 (counts: size entries there, NULL elsewhere). */
static void gather_counts(HostMpi *h, const char *name, size_t n, uint64_t *counts) {
    uint64_t mine = n;
    char what[64];
    snprintf(what, sizeof what, "%s (sizes)", name);
    MPI_Request r;
    MPI_CHECK(MPI_Igather(&mine, 1, MPI_UINT64_T, counts, 1, MPI_UINT64_T, 0, h->world, &r));
    wait_plain(h, &r, what);
}

/* One rank's part, n elements of esize bytes (MPI type `type`) at buf, sent to `peer` or (recv)
 * received from it, a piece a message, in order on TAG_UTIL: every piece posted, then each waited
 * for (a wait per piece made a part in pieces a round trip each). */
static void part(HostMpi *h, const char *name, void *buf, size_t n, size_t esize, MPI_Datatype type, int peer, int recv) {
    size_t np = cb_pieces(n, h->max_elems), len;
    MPI_Request *reqs = hm_alloc(NULL, np * sizeof *reqs);
    for (size_t k = 0; k < np; k++) {
        char *at = (char *)buf + cb_piece(n, h->max_elems, k, &len) * esize;
        if (recv) MPI_CHECK(MPI_Irecv(at, (int)len, type, peer, TAG_UTIL, h->world, &reqs[k]));
        else MPI_CHECK(MPI_Isend(at, (int)len, type, peer, TAG_UTIL, h->world, &reqs[k]));
    }
    for (size_t k = 0; k < np; k++) {
        cb_piece(n, h->max_elems, k, &len);
        char what[192], piece[64] = "";
        if (np > 1) snprintf(piece, sizeof piece, ", piece %zu of %zu", k + 1, np);
        snprintf(what, sizeof what, "%s part %s rank %d (%zu bytes)%s", name, recv ? "from" : "to", peer, n * esize, piece);
        wait_one(h, &reqs[k], what, h->timeout, "WP_COMM_TIMEOUT", recv ? (long)(len * esize) : -1, type, esize);
    }
    free(reqs);
}

static uint64_t *counts_at_root(HostMpi *h) {
    if (h->rank != 0) return NULL;
    uint64_t *cnt = hm_alloc(NULL, (size_t)h->size * sizeof *cnt);
    memset(cnt, 0, (size_t)h->size * sizeof *cnt);
    return cnt;
}

static size_t hm_gather(HostMpi *h, const char *name, const void *mine, size_t n, size_t esize, MPI_Datatype type,
                        void *all, size_t cap, size_t *counts) {
    cb_count(&h->stats, COMM_UTIL, n * esize);
    uint64_t *cnt = counts_at_root(h);
    gather_counts(h, name, n, cnt);
    size_t total = 0;
    if (h->rank == 0) {
        for (int r = 0; r < h->size; r++) total += cnt[r];
        if (total > cap) comm_fail("%s: the ranks send %zu elements, rank 0 has room for %zu", name, total, cap);
        if (n) memcpy(all, mine, n * esize);
        size_t off = n;
        for (int r = 1; r < h->size; r++) {
            if (counts) counts[r] = (size_t)cnt[r];
            if (!cnt[r]) continue;
            part(h, name, (char *)all + off * esize, (size_t)cnt[r], esize, type, r, 1);
            off += (size_t)cnt[r];
        }
        if (counts) counts[0] = n;
    } else if (n) {
        part(h, name, (void *)mine, n, esize, type, 0, 0);
    }
    free(cnt);
    return total;
}

static void hm_scatter(HostMpi *h, const float *all, size_t total, float *mine, size_t n) {
    cb_count(&h->stats, COMM_UTIL, n * sizeof(float));
    uint64_t *cnt = counts_at_root(h);
    gather_counts(h, "SCATTER", n, cnt);
    if (h->rank == 0) {
        size_t sum = 0;
        for (int r = 0; r < h->size; r++) sum += cnt[r];
        if (sum != total) comm_fail("comm_scatter: the ranks ask for %zu floats, rank 0 has %zu", sum, total);
        if (n) memcpy(mine, all, n * sizeof(float));
        size_t off = n;
        for (int r = 1; r < h->size; r++) {
            if (!cnt[r]) continue;
            part(h, "SCATTER", (void *)(all + off), (size_t)cnt[r], sizeof(float), MPI_FLOAT, r, 0);
            off += (size_t)cnt[r];
        }
    } else if (n) {
        part(h, "SCATTER", mine, n, sizeof(float), MPI_FLOAT, 0, 1);
    }
    free(cnt);
}

/* --- comm.h's blocking calls, the layer's step completed first ------------------------------- */

void comm_barrier(Comm *c) { comm_complete_step(c); hm_barrier(comm_host(c)); }
void comm_allreduce_double(Comm *c, double *x, int n) { comm_complete_step(c); hm_allreduce_double(comm_host(c), x, n); }

void comm_bcast_bytes(Comm *c, void *buf, size_t nbytes, int root) {
    comm_complete_step(c);
    hm_bcast_bytes(comm_host(c), buf, nbytes, root, 0);
}

void comm_bcast_bytes_save(Comm *c, void *buf, size_t nbytes, int root) {
    comm_complete_step(c);
    hm_bcast_bytes(comm_host(c), buf, nbytes, root, 1);
}

size_t comm_gather(Comm *c, const float *mine, size_t n, float *all, size_t cap, size_t *counts) {
    comm_complete_step(c);
    return hm_gather(comm_host(c), "GATHER", mine, n, sizeof(float), MPI_FLOAT, all, cap, counts);
}

size_t comm_gather_bytes(Comm *c, const void *mine, size_t n, void *all, size_t cap, size_t *counts) {
    comm_complete_step(c);
    return hm_gather(comm_host(c), "GATHER_BYTES", mine, n, 1, MPI_BYTE, all, cap, counts);
}

void comm_scatter(Comm *c, const float *all, size_t total, float *mine, size_t n) {
    comm_complete_step(c);
    hm_scatter(comm_host(c), all, total, mine, n);
}
