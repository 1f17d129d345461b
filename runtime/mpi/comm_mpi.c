/* The communication layer (runtime/common/comm.h) over MPI, for CPU buffers: every operation of the step
 * is one nonblocking MPI call whose request joins the pending list with a description of what it
 * is; comm_wait_turn polls the list until it is empty, and when the timeout passes names the first
 * operation still pending and aborts the job. Collectives run on one communicator per group,
 * created once at start. Optionally, sends are held back by an emulated link (latency + bytes /
 * bandwidth per peer, or a cluster of nodes sharing NICs; emulate.c books them, the pending list
 * here holds the operations back until then) so that topology effects can be measured on one
 * machine. The world, the blocking calls outside the step and failing are hostmpi/host_mpi.c's,
 * shared with the NCCL layer.
 *
 * Pieces. MPI counts elements and displacements in ints, so an operation of more than INT_MAX
 * elements (WP_COMM_MAX_ELEMS, a test hook, sets fewer) is several MPI calls of a piece each
 * (common/comm_book.h), posted in order: the k-th piece of a send matches the k-th of its receive,
 * the members of a group post the same pieces in the same order. Each piece is a pending entry
 * of its own, its receive's size checked (a send and a receive of different sizes fail at the
 * first piece that differs; sizes that differ by whole pieces would pair the extra pieces with
 * later transfers, which the verifier's proof of equal sizes rules out); the operation is counted once and traced when its last
 * piece completes. An all-gather or reduce-scatter longer than a piece, whose v-collective takes
 * int displacements into the whole buffer, becomes one broadcast (reduce) of each member's shard
 * from (to) that member, in pieces, as the NCCL layer does for unequal shards.
 *
 * Formats: fp32 elements are MPI_FLOAT summed by MPI_SUM; bf16 elements are MPI_UINT16_T summed by
 * an operation of our own (bf16_sum: each partial sum in fp32, rounded to bf16 where stored), so a
 * bf16 transfer moves 2 bytes an element, as the plan counts it. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <mpi.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "common/comm_book.h"
#include "hostmpi/host_mpi.h"
#include "mpi/emulate.h"

/* --- State ------------------------------------------------------------------------------- */

/* Shard counts and displacements for one buffer size on one group. MPI reads these arrays until
 * a nonblocking v-collective completes, so they live as long as the group (a plan uses few
 * distinct sizes). */
typedef struct Layout {
    size_t n;
    int *counts, *displs;
    struct Layout *next;
} Layout;

/* What MPI holds of a group of the plan, beside its members (Comm.groups). */
typedef struct Group {
    MPI_Comm comm;      /* MPI_COMM_NULL on non-members */
    Layout *layouts;
} Group;

/* One posted operation. */
typedef struct Pending {
    CommOp op;          /* what names it (common/comm_book.h) */
    uint8_t done;
    uint8_t unposted;   /* an emulated receive not yet given to MPI (start_due posts it) */
    uint8_t timed;      /* an emulated send: done no sooner than its link delivers it (release_at) */
    uint8_t held;       /* a collective done in MPI, its completion held back until release_at */
    uint8_t agreeing;   /* its members agreeing on release_at (an all-reduce of the latest, in agree[]) */
    double release_at;
    double t_call;      /* collectives: this rank's first MPI call after posting it (0: none yet) */
    double *agree;      /* agreeing: this rank's release and the members' latest, absolute times */
    long expect;        /* receives: bytes expected, checked on completion; -1: no check */
    int esize;          /* ... in elements of esize bytes, MPI type etype */
    MPI_Datatype etype;
    int lead;           /* a piece after an operation's first: the first's index, else -1 */
    int left;           /* the first piece: pieces of the operation not yet complete */
    int piece, npieces; /* this piece's number and the operation's pieces (1: whole) */
    size_t whole;       /* the first piece: the operation's bytes, for the trace */
    int companion;      /* an emulated receive: the pending index of its companion, else -1 */
    int data;           /* a companion (kind UTIL): the index of its receive, else -1 */
    double *arrival;    /* a companion's 8 bytes: when the link delivers (absolute); apart from
                           pend[], which may move */
    void *rbuf;         /* an unposted receive: what to post */
    int rcount;
    MPI_Datatype rtype;
} Pending;

struct Comm {
    HostMpi h;          /* the world, the settings, the counters (hostmpi/host_mpi.h) */

    CommGroups groups;  /* the plan's groups: their members (common/comm_book.h) */
    Group *comms;       /* [groups.n]: MPI's side of each */

    /* The pending list: parallel arrays, because MPI_Testsome wants the requests contiguous. */
    int npend, ndone, cappend;
    Pending *pend;
    MPI_Request *reqs;
    MPI_Status *statuses;
    int *indices;

    CommTraceFn trace;
    void *trace_ud;

    MPI_Op bf16_sum;    /* sums of MPI_UINT16_T holding bf16 values */

    MpiEmu emu;         /* emulated links and cluster (emulate.h) */
    int nheld, nunposted;
};

HostMpi *comm_host(const Comm *c) { return (HostMpi *)&c->h; }
void comm_set_trace(Comm *c, CommTraceFn fn, void *ud) { c->trace = fn; c->trace_ud = ud; }
void comm_set_timeout(Comm *c, double seconds) { hm_set_timeout(&c->h, seconds, 0); }

/* --- Formats ----------------------------------------------------------------------------- */

/* MPI's user reduction for bf16 sums: inout[i] = bf16(in[i] + inout[i]), the sum in fp32. Called
 * by MPI on whatever pieces it reduces, so every partial sum is rounded once where it is stored. */
static void bf16_sum(void *in, void *inout, int *len, MPI_Datatype *type) {
    (void)type;
    const WpBf16 *a = in;
    WpBf16 *b = inout;
    for (int i = 0; i < *len; i++) b[i] = wp_f32_to_bf16(wp_bf16_to_f32(a[i]) + wp_bf16_to_f32(b[i]));
}

static MPI_Datatype mpi_type(WpDtype dt) { return dt == WP_BF16 ? MPI_UINT16_T : MPI_FLOAT; }
static MPI_Op mpi_sum(const Comm *c, WpDtype dt) { return dt == WP_BF16 ? c->bf16_sum : MPI_SUM; }

/* --- Setup ------------------------------------------------------------------------------- */

/* Open MPI's nonblocking collectives (libnbc) run as a schedule of rounds, and a round starts only
 * inside an MPI call on every rank it involves. For large messages its defaults cut a reduce among
 * up to 4 ranks, and a broadcast among more, into a chain of 8-32 KiB fragments: a round each.
 * Our ranks call MPI between layers and while they wait (with naps, so that ranks sharing cores
 * leave them to the ones computing), so a 5.8 MB reduce of two ranks took 400-660 ms, ten times
 * its transfer (bench-sim, tawpipe on 2 emulated nodes of 2 ranks: 1.89 s a step against 0.23 s
 * with this). The binomial trees have one round per level and nothing to fragment. A user's own
 * OMPI_MCA_ setting wins; other MPIs ignore these variables. */
static void prefer_unsegmented_collectives(void) {
    setenv("OMPI_MCA_coll_libnbc_ireduce_algorithm", "binomial", 0);
    setenv("OMPI_MCA_coll_libnbc_ibcast_algorithm", "binomial", 0);
}

Comm *comm_init(int *argc, char ***argv) {
    Comm *c = hm_alloc(NULL, sizeof *c);
    memset(c, 0, sizeof *c);
    int inited = 0;
    MPI_CHECK(MPI_Initialized(&inited));
    if (!inited) prefer_unsegmented_collectives();
    hm_init(&c->h, argc, argv);
    cb_groups_init(&c->groups, c->h.rank, c->h.size);
    emu_init(&c->emu, c->h.rank, c->h.size, &c->h.t0);
    MPI_CHECK(MPI_Op_create(bf16_sum, 1, &c->bf16_sum));
    return c;
}

static double wait_all(Comm *c);

void comm_finalize(Comm *c) {
    if (!c) return;
    wait_all(c);
    for (int g = 0; g < c->groups.n; g++) {
        Group *gr = &c->comms[g];
        if (gr->comm != MPI_COMM_NULL) MPI_CHECK(MPI_Comm_free(&gr->comm));
        for (Layout *l = gr->layouts, *next; l; l = next) {
            next = l->next;
            free(l->counts);
            free(l->displs);
            free(l);
        }
    }
    emu_free(&c->emu);
    MPI_CHECK(MPI_Op_free(&c->bf16_sum));
    hm_finalize(&c->h);
    cb_groups_free(&c->groups);
    free(c->comms);
    free(c->pend);
    free(c->reqs);
    free(c->statuses);
    free(c->indices);
    free(c);
}

int comm_add_group(Comm *c, const int *ranks, int n) {
    char err[256];
    int index = cb_group_add(&c->groups, ranks, n, err, sizeof err);
    if (index < 0) comm_fail("%s", err);
    c->comms = hm_alloc(c->comms, (size_t)c->groups.n * sizeof *c->comms);
    Group *gr = &c->comms[index];
    gr->comm = MPI_COMM_NULL;
    gr->layouts = NULL;
    if (c->groups.g[index].me >= 0) {
        /* Collective over the members only. Every rank declares the groups in the same order, so
         * the creations a rank takes part in come in one global order and cannot deadlock; the
         * tag tells them apart besides. Group order = member order, so shard i is on ranks[i]. */
        MPI_Group world_group, group;
        MPI_CHECK(MPI_Comm_group(c->h.world, &world_group));
        MPI_CHECK(MPI_Group_incl(world_group, n, ranks, &group));
        MPI_CHECK(MPI_Comm_create_group(c->h.world, group, index, &gr->comm));
        MPI_CHECK(MPI_Comm_set_errhandler(gr->comm, MPI_ERRORS_RETURN));
        MPI_CHECK(MPI_Group_free(&group));
        MPI_CHECK(MPI_Group_free(&world_group));
    }
    return index;
}

void comm_set_link(Comm *c, int peer, double alpha, double beta) { emu_set_link(&c->emu, peer, alpha, beta); }

void comm_emulate(Comm *c, const int *node_of_rank, double net_alpha, double net_beta, double intra_alpha, double intra_beta) {
    emu_cluster(&c->emu, c->h.world, node_of_rank, net_alpha, net_beta, intra_alpha, intra_beta);
}

/* --- The pending list -------------------------------------------------------------------- */

static void __attribute__((noreturn)) op_fail(const Comm *c, const Pending *p, const char *what) {
    char d[320], piece[64] = "";
    if (p->npieces > 1) snprintf(piece, sizeof piece, ", piece %d of %d", p->piece + 1, p->npieces);
    comm_fail("%s%s: %s", cb_op_desc(&c->groups, &p->op, d, sizeof d), piece, what);
}

/* Adds an operation; the caller starts it into c->reqs[returned index]. */
static int post(Comm *c, CommKind kind, const char *name, const CommInfo *info, int peer, int group, size_t bytes) {
    if (c->npend == c->cappend) {
        c->cappend = c->cappend ? 2 * c->cappend : 64;
        size_t cap = (size_t)c->cappend;
        c->pend = hm_alloc(c->pend, cap * sizeof *c->pend);
        /* Requests are handles: moving them is fine while they are active. */
        c->reqs = hm_alloc(c->reqs, cap * sizeof *c->reqs);
        c->statuses = hm_alloc(c->statuses, cap * sizeof *c->statuses);
        c->indices = hm_alloc(c->indices, cap * sizeof *c->indices);
    }
    int i = c->npend++;
    Pending *p = &c->pend[i];
    p->op = cb_op(kind, name, info, peer, group, bytes, comm_now(c));
    p->done = 0;
    p->unposted = 0;
    p->timed = 0;
    p->held = 0;
    p->agreeing = 0;
    p->agree = NULL;
    p->release_at = 0;
    p->t_call = 0;
    p->expect = -1;
    p->esize = 1;
    p->etype = MPI_BYTE;
    p->lead = -1;
    p->left = 1;
    p->piece = 0;
    p->npieces = 1;
    p->whole = bytes;
    p->companion = p->data = -1;
    p->arrival = NULL;
    c->reqs[i] = MPI_REQUEST_NULL;
    if (kind != COMM_UTIL) cb_count(&c->h.stats, kind, bytes);
    return i;
}

/* Piece k (of `bytes`) of an operation of np pieces and `whole` bytes: k == 0 posts the operation,
 * counted (*lead gets its index); k > 0 joins it, with its description. Returns the piece's index;
 * the caller starts it into c->reqs[index]. */
static int post_piece(Comm *c, CommKind kind, const char *name, const CommInfo *info, int peer, int group, size_t whole,
                      size_t bytes, size_t k, size_t np, int *lead) {
    int i;
    if (k == 0) {
        i = *lead = post(c, kind, name, info, peer, group, whole);
    } else {
        i = post(c, COMM_UTIL, NULL, NULL, -1, -1, 0);
        c->pend[i].op = c->pend[*lead].op;
        c->pend[i].lead = *lead;
        c->pend[*lead].left++;
    }
    Pending *p = &c->pend[i];
    p->op.bytes = bytes;
    p->piece = (int)k;
    p->npieces = (int)np;
    return i;
}

/* A receive's size against what it expected (its status from MPI). */
static void check_size(Comm *c, int i, MPI_Status *st) {
    Pending *p = &c->pend[i];
    if (p->expect < 0 || !st) return;
    int got = 0;   /* in elements: a piece's bytes may pass INT_MAX */
    MPI_CHECK(MPI_Get_count(st, p->etype, &got));
    if (got == MPI_UNDEFINED || (long)got * p->esize != p->expect) {
        char what[128];
        if (got == MPI_UNDEFINED) snprintf(what, sizeof what, "expected %ld bytes, the matching send had a part of an element", p->expect);
        else snprintf(what, sizeof what, "expected %ld bytes, the matching send had %ld", p->expect, (long)got * p->esize);
        op_fail(c, p, what);
    }
}

/* Receive i checks that it gets `bytes` in elements of MPI type t, esize bytes each. */
static void expect_size(Comm *c, int i, size_t bytes, MPI_Datatype t, size_t esize) {
    c->pend[i].expect = (long)bytes;
    c->pend[i].etype = t;
    c->pend[i].esize = (int)esize;
}

static void complete(Comm *c, int i, MPI_Status *st) {
    Pending *p = &c->pend[i];
    check_size(c, i, st);
    free(p->arrival);
    p->arrival = NULL;
    p->done = 1;
    c->ndone++;
    Pending *op = p->lead >= 0 ? &c->pend[p->lead] : p;   /* an operation ends with its last piece */
    if (--op->left == 0 && c->trace && op->op.kind != COMM_UTIL) {
        CommEvent e = cb_op_event(&op->op, comm_now(c));
        e.bytes = op->whole;
        c->trace(c->trace_ud, &e);
    }
}

/* Posts the emulated receives whose link has delivered them (in the order they were posted: for
 * one peer their times never decrease, so MPI matches them in the plan's order) and completes
 * the held-back sends and collectives whose emulated time has passed. Returns the earliest time
 * still to come, or 0. */
static double start_due(Comm *c, double now) {
    double next = 0;
    if (!c->nheld && !c->nunposted) return 0;
    for (int i = 0; i < c->npend; i++) {
        Pending *p = &c->pend[i];
        if (p->unposted && c->pend[p->companion].done) {   /* its companion came: when it arrives */
            if (p->release_at <= now) {
                MPI_CHECK(MPI_Irecv(p->rbuf, p->rcount, p->rtype, p->op.peer, TAG_STEP, c->h.world, &c->reqs[i]));
                p->unposted = 0;
                c->nunposted--;
            } else if (next == 0 || p->release_at < next) {
                next = p->release_at;
            }
            continue;
        }
        if (p->held) {   /* a send or collective whose emulated time is up completes */
            if (p->release_at <= now) {
                p->held = 0;
                c->nheld--;
                complete(c, i, NULL);
            } else if (next == 0 || p->release_at < next) {
                next = p->release_at;
            }
        }
    }
    return next;
}

/* Completes operation i at time `at` (this rank's clock): now if that has passed, else held until
 * then (start_due); its size was checked. */
static void hold(Comm *c, long i, double at) {
    Pending *p = &c->pend[i];
    if (at <= comm_now(c)) { complete(c, (int)i, NULL); return; }
    p->held = 1;
    p->release_at = at;
    c->nheld++;
}

static void poll_once(Comm *c) {
    if (c->ndone == c->npend) return;
    if (c->emu.node) {   /* a collective's emulated time runs from here: its first call (see the top) */
        double now = comm_now(c);
        for (int i = 0; i < c->npend; i++)
            if (c->pend[i].op.group >= 0 && c->pend[i].t_call == 0) c->pend[i].t_call = now;
    }
    int out = 0;
    int rc = MPI_Testsome(c->npend, c->reqs, &out, c->indices, c->statuses);
    if (rc == MPI_ERR_IN_STATUS) {
        for (int j = 0; j < out; j++) {
            int e = c->statuses[j].MPI_ERROR;
            if (e != MPI_SUCCESS) {
                char err[MPI_MAX_ERROR_STRING];
                int len = 0;
                MPI_Error_string(e, err, &len);
                op_fail(c, &c->pend[c->indices[j]], err);
            }
        }
    } else {
        MPI_CHECK(rc);
    }
    if (out == MPI_UNDEFINED) return;   /* only held-back operations and unposted receives are left */
    for (int j = 0; j < out; j++) {
        int i = c->indices[j];
        Pending *p = &c->pend[i];
        if (p->data >= 0 && p->op.kind == COMM_UTIL) {   /* a companion: its receive is posted at that time */
            c->pend[p->data].release_at = *p->arrival - c->emu.t0_abs;
            complete(c, i, NULL);
            start_due(c, comm_now(c));
            continue;
        }
        if (p->timed) {   /* an emulated send: held until its link delivered it, as its receive is */
            hold(c, i, p->release_at);
            continue;
        }
        if (p->agreeing) {   /* the members' latest release: held until then */
            p->agreeing = 0;
            p->held = 1;
            p->release_at = p->agree[1] - c->emu.t0_abs;
            free(p->agree);
            p->agree = NULL;
            c->nheld++;
            continue;
        }
        OwnEdge own;
        double d = emu_collective_s(&c->emu, p->op.group >= 0 ? &c->groups.g[p->op.group] : NULL, p->op.kind, p->op.peer,
                                    p->op.bytes, &own);
        if (d > 0) {
            double now = comm_now(c), from = p->t_call > 0 ? p->t_call : now, at = from + d;
            if (own.s > 0) {   /* its edge between nodes, after what the NICs carry already */
                double end = emu_nic_book(&c->emu, own.a, own.b, from, own.s) + own.lat;
                if (end > at) at = end;
            }
            if (at < now) at = now;
            p->agree = hm_alloc(NULL, 2 * sizeof(double));   /* apart from pend[], which may move */
            p->agree[0] = at + c->emu.t0_abs;
            p->agreeing = 1;
            MPI_CHECK(MPI_Iallreduce(&p->agree[0], &p->agree[1], 1, MPI_DOUBLE, MPI_MAX, c->comms[p->op.group].comm, &c->reqs[i]));
        } else {
            complete(c, i, &c->statuses[j]);
        }
    }
}

static void __attribute__((noreturn)) timeout_fail(Comm *c, double waited, double timeout, const char *var) {
    int first = -1, left = 0;
    for (int i = 0; i < c->npend; i++)
        if (!c->pend[i].done) { left++; if (first < 0) first = i; }
    char d[320];
    cb_op_desc(&c->groups, &c->pend[first].op, d, sizeof d);
    comm_fail("timeout: %s still pending after %.1f s (%d of the %d operations of this wait pending; "
              "%s=%g)", d, waited, left, c->npend, var, timeout);
}

/* Polls until everything posted has completed; the heart of comm_wait_turn. It spins briefly
 * (a transfer that is nearly done should not pay a sleep), then sleeps with a growing interval
 * so that waiting ranks leave the cores to ranks still computing (tests oversubscribe). */
static double wait_within(Comm *c, double timeout, const char *var) {
    if (c->ndone == c->npend) { c->npend = c->ndone = 0; return 0; }
    double t0 = comm_now(c);
    double nap = 2e-6;
    for (;;) {
        double next = start_due(c, comm_now(c));
        poll_once(c);
        if (c->ndone == c->npend) break;
        double now = comm_now(c);
        if (timeout > 0 && now - t0 > timeout) timeout_fail(c, now - t0, timeout, var);
        if (now - t0 < 20e-6) continue;
        double s = nap;
        if (next > 0 && next - now < s) s = next - now > 0 ? next - now : 0;
        struct timespec ts = { 0, (long)(s * 1e9) };
        if (ts.tv_nsec > 0) nanosleep(&ts, NULL);
        if (nap < 500e-6) nap *= 2;
    }
    c->npend = c->ndone = 0;
    double waited = comm_now(c) - t0;
    c->h.stats.wait_s += waited;
    return waited;
}

static double wait_all(Comm *c) { return wait_within(c, c->h.timeout, "WP_COMM_TIMEOUT"); }

double comm_wait_turn(Comm *c) { return wait_all(c); }

void comm_progress(Comm *c) {
    start_due(c, comm_now(c));
    poll_once(c);
}

/* --- The step's operations ----------------------------------------------------------------- */


/* An emulated send: started now, its companion (when the link delivers it, start_at on this rank's
 * clock) on TAG_ARRIVAL beside it; see the top of this file. */
static void send_emulated(Comm *c, int i, double start_at, const void *buf, int count, WpDtype dt) {
    Pending *p = &c->pend[i];
    p->timed = 1;
    p->release_at = start_at;
    MPI_CHECK(MPI_Isend(buf, count, mpi_type(dt), p->op.peer, TAG_STEP, c->h.world, &c->reqs[i]));
    int peer = p->op.peer, j = post(c, COMM_UTIL, "emulated arrival", NULL, peer, -1, sizeof(double));   /* p may move */
    Pending *q = &c->pend[j];
    q->arrival = hm_alloc(NULL, sizeof(double));
    *q->arrival = start_at + c->emu.t0_abs;
    MPI_CHECK(MPI_Isend(q->arrival, 1, MPI_DOUBLE, peer, TAG_ARRIVAL, c->h.world, &c->reqs[j]));
}

/* The link to or from `peer` goes between emulated nodes, through their NICs. */
void comm_send(Comm *c, const void *buf, size_t n, WpDtype dt, int peer, const CommInfo *info) {
    hm_check_peer(&c->groups, COMM_SEND, peer, info);
    size_t es = wp_dtype_bytes(dt), np = cb_pieces(n, c->h.max_elems), len;
    int lead = -1;
    for (size_t k = 0; k < np; k++) {
        const char *at = (const char *)buf + cb_piece(n, c->h.max_elems, k, &len) * es;
        int i = post_piece(c, COMM_SEND, NULL, info, peer, -1, n * es, len * es, k, np, &lead);
        if (emu_link(&c->emu, peer)) send_emulated(c, i, emu_delivers(&c->emu, peer, len * es, c->pend[i].op.t_post), at, (int)len, dt);
        else MPI_CHECK(MPI_Isend(at, (int)len, mpi_type(dt), peer, TAG_STEP, c->h.world, &c->reqs[i]));
    }
}

void comm_recv(Comm *c, void *buf, size_t n, WpDtype dt, int peer, const CommInfo *info) {
    hm_check_peer(&c->groups, COMM_RECV, peer, info);
    size_t es = wp_dtype_bytes(dt), np = cb_pieces(n, c->h.max_elems), len;
    int lead = -1;
    for (size_t k = 0; k < np; k++) {
        char *at = (char *)buf + cb_piece(n, c->h.max_elems, k, &len) * es;
        int i = post_piece(c, COMM_RECV, NULL, info, peer, -1, n * es, len * es, k, np, &lead);
        expect_size(c, i, len * es, mpi_type(dt), es);
        if (!emu_link(&c->emu, peer)) {
            MPI_CHECK(MPI_Irecv(at, (int)len, mpi_type(dt), peer, TAG_STEP, c->h.world, &c->reqs[i]));
            continue;
        }
        /* over an emulated link: posted once it delivers, which its companion says (send_emulated) */
        Pending *p = &c->pend[i];
        p->unposted = 1;
        p->rbuf = at; p->rcount = (int)len; p->rtype = mpi_type(dt);
        c->nunposted++;
        int j = post(c, COMM_UTIL, "emulated arrival", NULL, peer, -1, sizeof(double));
        Pending *q = &c->pend[j];
        q->arrival = hm_alloc(NULL, sizeof(double));
        q->data = i;
        c->pend[i].companion = j;
        MPI_CHECK(MPI_Irecv(q->arrival, 1, MPI_DOUBLE, peer, TAG_ARRIVAL, c->h.world, &c->reqs[j]));
    }
}


/* A send to the next member and a receive from the previous one (comm.h). */
void comm_ring_shift(Comm *c, int g, const void *send, void *recv, size_t n, WpDtype dt, const CommInfo *info) {
    const CommGroup *gr = hm_member(&c->groups, COMM_SEND, g, info);
    comm_send(c, send, n, dt, gr->ranks[(gr->me + 1) % gr->n], info);
    comm_recv(c, recv, n, dt, gr->ranks[(gr->me + gr->n - 1) % gr->n], info);
}

/* The MPI call of one piece of a collective: `at`, `len` elements at the piece's place in the
 * operation's buffer (and `to` in a reduce's result, NULL where it is in place). */
typedef void (*PieceFn)(Comm *c, int g, char *at, char *to, int len, WpDtype dt, int root, MPI_Request *req);

/* Posts a collective of n elements at buf (and its result at `to` when not in place) in pieces,
 * each by fn; an operation started earlier as *lead (>= 0) takes these as its further pieces, *lead
 * -1 starts one (k0: the pieces posted before, of np in all). */
static void post_pieces(Comm *c, CommKind kind, int g, char *buf, char *to, size_t n, WpDtype dt, int root, int peer,
                        const CommInfo *info, size_t whole, size_t k0, size_t np, int *lead, PieceFn fn) {
    size_t es = wp_dtype_bytes(dt), len;
    for (size_t k = 0; k < cb_pieces(n, c->h.max_elems); k++) {
        size_t off = cb_piece(n, c->h.max_elems, k, &len) * es;
        int i = post_piece(c, kind, NULL, info, peer, g, whole, len * es, k0 + k, np, lead);
        fn(c, g, buf + off, to ? to + off : NULL, (int)len, dt, root, &c->reqs[i]);
    }
}

static void bcast_piece(Comm *c, int g, char *at, char *to, int len, WpDtype dt, int root, MPI_Request *req) {
    (void)to;
    MPI_CHECK(MPI_Ibcast(at, len, mpi_type(dt), root, c->comms[g].comm, req));
}

/* In place at the root (to NULL), or into `to` there; the other members' buffers are left as they were. */
static void reduce_piece(Comm *c, int g, char *at, char *to, int len, WpDtype dt, int root, MPI_Request *req) {
    MPI_Datatype t = mpi_type(dt);
    MPI_Comm comm = c->comms[g].comm;
    if (root != c->groups.g[g].me) MPI_CHECK(MPI_Ireduce(at, NULL, len, t, mpi_sum(c, dt), root, comm, req));
    else if (to) MPI_CHECK(MPI_Ireduce(at, to, len, t, mpi_sum(c, dt), root, comm, req));
    else MPI_CHECK(MPI_Ireduce(MPI_IN_PLACE, at, len, t, mpi_sum(c, dt), root, comm, req));
}

static void allreduce_piece(Comm *c, int g, char *at, char *to, int len, WpDtype dt, int root, MPI_Request *req) {
    (void)to; (void)root;
    MPI_CHECK(MPI_Iallreduce(MPI_IN_PLACE, at, len, mpi_type(dt), mpi_sum(c, dt), c->comms[g].comm, req));
}

void comm_bcast(Comm *c, int g, void *buf, size_t n, WpDtype dt, int root, const CommInfo *info) {
    hm_member(&c->groups, COMM_BCAST, g, info);
    int r = hm_root(&c->groups, COMM_BCAST, g, root, info), lead = -1;
    post_pieces(c, COMM_BCAST, g, buf, NULL, n, dt, r, root, info, n * wp_dtype_bytes(dt), 0, cb_pieces(n, c->h.max_elems),
                &lead, bcast_piece);
}

void comm_reduce(Comm *c, int g, void *buf, size_t n, WpDtype dt, int root, const CommInfo *info) {
    hm_member(&c->groups, COMM_REDUCE, g, info);
    int r = hm_root(&c->groups, COMM_REDUCE, g, root, info), lead = -1;
    post_pieces(c, COMM_REDUCE, g, buf, NULL, n, dt, r, root, info, n * wp_dtype_bytes(dt), 0, cb_pieces(n, c->h.max_elems),
                &lead, reduce_piece);
}

void comm_allreduce(Comm *c, int g, void *buf, size_t n, WpDtype dt, const CommInfo *info) {
    hm_member(&c->groups, COMM_ALLREDUCE, g, info);
    int lead = -1;
    post_pieces(c, COMM_ALLREDUCE, g, buf, NULL, n, dt, -1, -1, info, n * wp_dtype_bytes(dt), 0, cb_pieces(n, c->h.max_elems),
                &lead, allreduce_piece);
}

/* MPI's counts and displacements of a group's shards of n elements over its k members (n at most
 * a piece: they are ints). */
static const Layout *layout(Group *gr, int k, size_t n) {
    for (Layout *l = gr->layouts; l; l = l->next)
        if (l->n == n) return l;
    Layout *l = hm_alloc(NULL, sizeof *l);
    l->n = n;
    l->counts = hm_alloc(NULL, (size_t)k * sizeof(int));
    l->displs = hm_alloc(NULL, (size_t)k * sizeof(int));
    for (int i = 0; i < k; i++) {
        l->displs[i] = (int)comm_shard_offset(n, k, i);
        l->counts[i] = (int)comm_shard_len(n, k, i);
    }
    l->next = gr->layouts;
    gr->layouts = l;
    return l;
}

/* The pieces of an all-gather or reduce-scatter longer than a piece: one broadcast (reduce) of
 * each member's shard from (to) it, in pieces (see the top of this file). `to`: the reduce's
 * result at its root. */
static void per_member(Comm *c, CommKind kind, int g, char *full, char *to, size_t n, WpDtype dt, const CommInfo *info,
                       PieceFn fn) {
    const CommGroup *gr = &c->groups.g[g];
    size_t es = wp_dtype_bytes(dt), np = 0, k0 = 0;
    for (int m = 0; m < gr->n; m++) np += cb_pieces(comm_shard_len(n, gr->n, m), c->h.max_elems);
    int lead = -1;
    for (int m = 0; m < gr->n; m++) {
        size_t len = comm_shard_len(n, gr->n, m);
        post_pieces(c, kind, g, full + comm_shard_offset(n, gr->n, m) * es, m == gr->me ? to : NULL, len, dt, m, -1, info,
                    n * es, k0, np, &lead, fn);
        k0 += cb_pieces(len, c->h.max_elems);
    }
}

void comm_allgather(Comm *c, int g, const void *shard, void *full, size_t n, WpDtype dt, const CommInfo *info) {
    const CommGroup *gr = hm_member(&c->groups, COMM_ALLGATHER, g, info);
    int me = gr->me, in_place;
    size_t es = wp_dtype_bytes(dt);
    char err[320];
    if (cb_check_allgather(gr, shard, full, n, es, info, &in_place, err, sizeof err)) comm_fail("%s", err);
    if (n > c->h.max_elems) {   /* each member broadcasts its shard from its place in full */
        char *own = (char *)full + comm_shard_offset(n, gr->n, me) * es;
        if (!in_place) memcpy(own, shard, comm_shard_len(n, gr->n, me) * es);
        per_member(c, COMM_ALLGATHER, g, full, NULL, n, dt, info, bcast_piece);
        return;
    }
    const Layout *l = layout(&c->comms[g], gr->n, n);
    int i = post(c, COMM_ALLGATHER, NULL, info, -1, g, n * es);
    MPI_CHECK(MPI_Iallgatherv(in_place ? MPI_IN_PLACE : shard, l->counts[me], mpi_type(dt),
                              full, l->counts, l->displs, mpi_type(dt), c->comms[g].comm, &c->reqs[i]));
}

void comm_reduce_scatter(Comm *c, int g, const void *full, void *shard, size_t n, WpDtype dt, const CommInfo *info) {
    const CommGroup *gr = hm_member(&c->groups, COMM_REDUCE_SCATTER, g, info);
    size_t es = wp_dtype_bytes(dt);
    char err[320];
    if (cb_check_reduce_scatter(gr, full, shard, n, es, info, err, sizeof err)) comm_fail("%s", err);
    if (n > c->h.max_elems) {   /* each member's shard of the sum reduced to it */
        per_member(c, COMM_REDUCE_SCATTER, g, (char *)full, shard, n, dt, info, reduce_piece);
        return;
    }
    const Layout *l = layout(&c->comms[g], gr->n, n);
    int i = post(c, COMM_REDUCE_SCATTER, NULL, info, -1, g, n * es);
    MPI_CHECK(MPI_Ireduce_scatter(full, shard, l->counts, mpi_type(dt), mpi_sum(c, dt), c->comms[g].comm, &c->reqs[i]));
}

/* Host buffers: the operations started when they were posted; no streams to order against. */
void comm_turn_posted(Comm *c) { (void)c; }
int comm_device_buffers(const Comm *c) { (void)c; return 0; }
void comm_set_stream(Comm *c, void *stream) { (void)c; (void)stream; }

/* The blocking calls (hostmpi/host_mpi.c) run alone on the world: everything posted completes first. */
void comm_complete_step(Comm *c) { wait_all(c); }
