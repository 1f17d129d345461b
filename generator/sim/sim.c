/* The simulator (see sim.h for the model): a discrete-event run of every rank's turns, with
 * transfers as flows that share the links they cross (max-min fair rates, recomputed whenever a
 * flow starts or ends). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "sim/sim.h"
#include "sim/collective.h"
#include "sim/symmetry.h"
#include "ir/op_table.h"
#include "util/xalloc.h"

static const DeviceType *rank_type(const Plan *p, const Topology *t, int r) {
    return &t->types[t->nodes[p->ranks[r].node].type];
}

double sim_op_bytes(const Plan *p, int rank, int opi) {
    const Op *op = &p->ranks[rank].ops[opi];
    const OpNote *n = &p->ranks[rank].notes[opi];
    if (!op_is_transfer(op->kind)) return 0;
    return (double)plan_carried_bytes(p, plan_op_carries(p, rank, op), n->chunk, n->nshards);
}

/* Bytes a local operation moves through memory: a pass over an operand to read it (USE_READ,
 * USE_ADD) and one to write it (USE_WRITE, USE_ADD), each at the operand's format (a master read
 * by anything but OPT: its working copy); the rest of its row's mem_passes go over fp32 state
 * beside the buffer (OPT: AdamW's m and v, read and written); OPT also writes the working copy. */
static double local_bytes(const Plan *p, int rank, const Op *op, const OpNote *note) {
    const OpInfo *in = op_info(op->kind);
    const PlanBuf *bufs = p->ranks[rank].bufs;
    double n = (double)plan_shard_elems(p, note->chunk, bufs[op->buf].nshards), passes_left = in->mem_passes, bytes = 0;
    int updates = in->flags & OPF_MASTER;
    for (int k = 0; k < 2; k++) {
        int b = k ? op->buf2 : op->buf;
        unsigned u = op_use(op, rank, k);
        if (b < 0) continue;
        int passes = ((u & (USE_READ | USE_ADD)) != 0) + ((u & (USE_WRITE | USE_ADD)) != 0);
        WpDtype d = (WpDtype)(bufs[b].master && !updates ? bufs[b].copy_dtype : bufs[b].dtype);
        bytes += passes * n * (double)wp_dtype_bytes(d);
        passes_left -= passes;
    }
    bytes += passes_left * n * sizeof(float);
    if (updates && plan_buf_has_copy(&bufs[op->buf])) bytes += n * (double)wp_dtype_bytes((WpDtype)bufs[op->buf].copy_dtype);
    return bytes;
}

/* Forward passes' worth of compute of a compute operation (for SimOptions.unit_fwd_s). */
static double compute_units(const Plan *p, int kind) {
    const OpInfo *in = op_info(kind);
    return in->fwd_units + (p->recompute ? in->recompute_units : 0);
}

/* An operation's features (cost/costs.h): a compute operation's work by class, a local one's bytes
 * through memory (its chunk's part on this rank: the shard its buffer holds); transfers none. */
static void op_features(const Plan *p, const Topology *t, int rank, const Op *op, const OpNote *note, double f[COST__COUNT]) {
    const OpInfo *in = op_info(op->kind);
    for (int i = 0; i < COST__COUNT; i++) f[i] = 0;
    if (in->phase == OP_PHASE_COMPUTE) {
        const PlanChunk *c = &p->chunks[op->chunk];
        cost_compute_features(&p->model, op->chunk, c->layer0, c->nlayers, p->nchunks, op->kind, p->recompute, p->precision,
                              rank_type(p, t, rank)->rated_bf16, f);
    } else if (in->phase == OP_PHASE_LOCAL && in->mem_passes > 0)
        f[COST_BYTES] = local_bytes(p, rank, op, note);
}

void sim_op_features(const Plan *p, int rank, const Op *op, const OpNote *note, double f[COST__COUNT]) {
    op_features(p, p->topo, rank, op, note, f);
}

/* Context parallelism (docs/context-parallel.md): a group rank stands for each of its C members.
 * A member's ring attention, the RING listed right before a compute operation (the verifier
 * proves it is there, of the steps and bytes that compute needs), moves on its own port of the
 * node's link, the group's being C of them, while it computes the blocks it has: the compute
 * takes the longer of its compute and its ring, and the RING, which rides it (OPF_RIDES), no time
 * of its own. */
static const Op *ring_of(const Plan *p, int r, const Op *op) {
    const PlanRank *rk = &p->ranks[r];
    if (!op_is_compute(op->kind) || op_rides(op->kind) || op <= rk->ops || op >= rk->ops + rk->nops) return NULL;
    return op[-1].kind == OP_RING ? &op[-1] : NULL;
}

static double cp_overlap(const Plan *p, const Topology *t, int r, const Op *op, double compute) {
    const Op *ring = ring_of(p, r, op);
    if (!ring || op_ring_bytes(ring) == 0) return compute;
    const Link *l = &t->nodes[p->ranks[r].node].intra;
    double ring_s = ring->ring_steps * l->lat + (double)op_ring_bytes(ring) / (l->bw / wp_cp(&p->model));
    return ring_s > compute ? ring_s : compute;
}

/* The all-gather or reduce-scatter inside the group that a W or D transfer or collective adds
 * (plan_cp_gather_bytes): C-1 steps on a member's port of the node's link. */
static double cp_gather_seconds(const Plan *p, const Topology *t, int r, int opi) {
    int C = wp_cp(&p->model);
    const Op *op = &p->ranks[r].ops[opi];
    int what = plan_op_carries(p, r, op);
    if (C == 1 || (what != WHAT_W && what != WHAT_D)) return 0;
    const Link *l = &t->nodes[p->ranks[r].node].intra;
    return (C - 1) * l->lat + plan_cp_gather_bytes(p, sim_op_bytes(p, r, opi)) / (l->bw / C);
}

double sim_op_seconds_calib(const Plan *p, const Topology *t, const Calibration *calib, int rank, const Op *op,
                            const OpNote *note) {
    double f[COST__COUNT], c[COST__COUNT];
    op_features(p, t, rank, op, note, f);
    calib_coefs(calib, rank_type(p, t, rank), p->precision, c);
    double s = cp_overlap(p, t, rank, op, cost_seconds(f, c));
    return s + sim_offload_exposed(p, t, rank, op, s);
}

double sim_op_seconds(const Plan *p, const Topology *t, int rank, const Op *op, const OpNote *note) {
    return sim_op_seconds_calib(p, t, NULL, rank, op, note);
}

/* ---- the engine ---- */

enum { PH_START, PH_WAIT, PH_LOCAL, PH_BARRIER, PH_DONE };

typedef struct Flow {
    int obj;
    int dst;                /* the rank receiving its bytes (on a CPU, its core copies them) */
    int nres, res[4];
    double w[4];            /* how many times it counts on res[k]: 1, or with symmetry R / orbit size */
    double bytes, rem, rate, lat_end;
    int in_lat, live;
    int intra;              /* between ranks of one node */
} Flow;

typedef struct Obj {
    int need, posted;
    int p2p;                /* a send and its receive (else a collective call) */
    int n;                  /* participants */
    int *ranks, *ops;
    double lat, t_start;
    int flows_left, done;
    int await_rank;         /* >= 0: its flows wait for this rank's first MPI call (next_mpi_call) */
    double t_calls;         /* between CPU ranks: the latest first MPI call of those that posted before */
    int call_op;            /* a point-to-point transfer into a CPU rank: the compute operation at
                               whose layer boundary the receiver's call matched it, or -1 (in its wait) */
    /* flows to create at start: edges */
    int nedges; int *src, *dst; double edge_bytes;
} Obj;

typedef struct RankSim {
    int turn, phase, pending;
    double cend, lend;
    /* on a node whose ranks share cores (Sim.node_cores): the operation computing (-1: none) and
     * the seconds of it left at the rank's unshared rate; cend/lend are INFINITY until done */
    int cur;
    double rem;
    double copy_owed;       /* seconds of receive copies that arrived while it computed (shared node) */
} RankSim;

typedef struct Sim {
    const Plan *p;
    const Topology *t;
    const SimOptions *o;
    SimResult *r;
    RankSim *rs;
    int nobjs, capobjs; Obj *objs;
    int **op_obj;
    double **tpost, **tstart, **tend;
    double **recv_in;                  /* per rank and op: bytes its core took in during that compute
                                          operation (CPUs; SimSpan.recv_bytes) */
    int nflows, capflows; Flow *flows;
    int nres; double *cap;
    int *res_dev_tx, *res_dev_rx;      /* per device */
    int *res_isl;                      /* per node: first island resource (up, down pairs) */
    int *res_nic;                      /* per node: first NIC resource (tx, rx pairs) */
    int *work, nwork; char *inwork;
    double now;
    int rates_dirty;
    int at_barrier;                    /* lockstep: ranks that finished the current turn */
    double (*coef)[COST__COUNT];       /* per device type: seconds per unit of each feature */
    double *copy_s_per_byte;           /* per device type: its core's time per byte received (CPUs), else 0 */
    const SimSym *sym;                 /* replicas simulated once (symmetry.h), or NULL */
    int *node_cores;                   /* per node: cores its ranks share when they outnumber them, else 0 */
    int *node_computing;               /* per node: its ranks computing now (compute or local operations) */
    int any_shared;
    int nact; int *act;                /* the ranks simulated: all, or replica 0's */
} Sim;

/* Seconds of a compute or local operation on its rank's device type: its work, and offload's
 * copies where the work does not hide them (*exposed, when not NULL). */
static double op_seconds_of(const Sim *S, int r, const Op *op, const OpNote *note, double *exposed) {
    double f[COST__COUNT];
    op_features(S->p, S->t, r, op, note, f);
    double s = cp_overlap(S->p, S->t, r, op, cost_seconds(f, S->coef[S->t->nodes[S->p->ranks[r].node].type]));
    double x = sim_offload_exposed(S->p, S->t, r, op, s);
    if (exposed) *exposed = x;
    return s + x;
}

static double op_seconds(const Sim *S, int r, const Op *op, const OpNote *note) {
    return op_seconds_of(S, r, op, note, NULL);
}

/* Ranks that share cores. A node with more ranks than cores (the topology's "cores") runs one
 * thread per rank (the CPU runtime gives each rank cores / ranks threads, at least one), so k
 * ranks computing at once each compute at min(1, cores / k) of their own rate: processor sharing.
 * Ranks waiting on transfers sleep (comm_mpi.c's wait) and take no core. Memory-bound local
 * operations share alike. Nodes with a core per rank keep the fixed layout of a turn. */
static double rank_share(const Sim *S, int r) {
    int node = S->p->ranks[r].node, k = S->node_computing[node];
    return k > S->node_cores[node] ? (double)S->node_cores[node] / k : 1;
}

/* A local operation its turn runs (ACC, COPY, FREE); OPT waits for the step's end (step_end). */
static int local_in_turn(int kind) { return op_is_local(kind) && !op_at_step_end(kind); }

/* Starts the first compute (local: 0) or local (1) operation of rank r's turn at or after op i,
 * on a shared node; returns 0 when there is none left. */
static int share_start(Sim *S, int r, int i, int local) {
    const PlanRank *rk = &S->p->ranks[r];
    RankSim *s = &S->rs[r];
    int t1 = rk->turn_start[s->turn + 1];
    for (; i < t1; i++) {
        const Op *op = &rk->ops[i];
        if (local ? !local_in_turn(op->kind) : !op_is_compute(op->kind)) continue;
        if (op_rides(op->kind)) { S->tpost[r][i] = S->tstart[r][i] = S->tend[r][i] = S->now; continue; }   /* in the next one's time */
        double d = local && S->o->free_local ? 0 : op_seconds(S, r, op, &rk->notes[i]);
        if (!local && S->o->unit_fwd_s > 0) d = S->o->unit_fwd_s * compute_units(S->p, op->kind);
        S->tpost[r][i] = S->tstart[r][i] = S->now;
        if (s->cur < 0) S->node_computing[rk->node]++;
        s->cur = i;
        s->rem = d;
        return 1;
    }
    if (s->cur >= 0) S->node_computing[rk->node]--;
    s->cur = -1;
    return 0;
}

/* Rank r's operation on a shared node has finished now: the next one, or the phase's end. */
static void share_finish(Sim *S, int r) {
    RankSim *s = &S->rs[r];
    int i = s->cur, local = s->phase == PH_LOCAL;
    S->tend[r][i] = S->now;
    if (!local) S->r->rank_busy[r] += S->now - S->tstart[r][i];
    if (!share_start(S, r, i + 1, local)) {
        if (local) s->lend = S->now;
        else s->cend = S->now + s->copy_owed, s->copy_owed = 0;
    }
}

static int new_obj(Sim *S) {
    if (S->nobjs == S->capobjs) {
        S->capobjs = S->capobjs ? 2 * S->capobjs : 256;
        S->objs = xrealloc(S->objs, (size_t)S->capobjs * sizeof *S->objs);
    }
    memset(&S->objs[S->nobjs], 0, sizeof(Obj));
    S->objs[S->nobjs].await_rank = -1;
    return S->nobjs++;
}

typedef struct P2P { long key; int rank, op; } P2P;
static int p2p_cmp(const void *a, const void *b) {
    const P2P *x = a, *y = b;
    if (x->key != y->key) return x->key < y->key ? -1 : 1;
    return x->op < y->op ? -1 : x->op > y->op;
}

/* With symmetry, a collective across the replicas (w members each, in blocks of replica order:
 * symmetry.h): the members of the replicas simulated, which start it when they have posted (every
 * move posts at the same time), and the ring's edges out of them; the latency of the whole ring.
 * The k-th call of each member is one call, as for other collectives. */
static int across_obj(Sim *S, int r, int i, int **calls, int *ncalls, int *capcalls, int **next) {
    const Plan *p = S->p;
    const Op *op = &p->ranks[r].ops[i];
    const PlanGroup *g = &p->groups[op->group];
    int m = 0;
    while (g->ranks[m] != r) m++;
    /* the block of replica 0 starts at member first: the simulated members are first .. first + k*w - 1 */
    int first = 0, w = g->n / p->replicas;
    while (!(p->ranks[g->ranks[first]].replica == 0 && (first == 0 || p->ranks[g->ranks[first - 1]].replica != 0))) first++;
    int slot = (m - first + g->n) % g->n;   /* 0 .. k*w - 1 */
    int gi = op->group, kk = next[gi][slot]++;
    if (kk >= ncalls[gi]) {
        if (kk >= capcalls[gi]) {
            capcalls[gi] = 2 * kk + 8;
            calls[gi] = xrealloc(calls[gi], (size_t)capcalls[gi] * sizeof(int));
        }
        int id = new_obj(S);
        Obj *o = &S->objs[id];
        int k = S->sym->k * w;
        o->need = k; o->n = k;
        o->ranks = xcalloc((size_t)k, sizeof(int)); o->ops = xcalloc((size_t)k, sizeof(int));
        CollShape cs = coll_shape(op_info(op->kind)->coll, g->n, 0, sim_op_bytes(p, r, i));
        o->edge_bytes = cs.edge_bytes;
        o->src = xcalloc((size_t)k + 1, sizeof(int)); o->dst = xcalloc((size_t)k + 1, sizeof(int));
        double maxlat = 0;
        for (int h = 0; h < cs.nedges; h++) {
            int a, b;
            coll_edge(&cs, g->n, h, &a, &b);
            Link l = topology_link(S->t, p->ranks[g->ranks[a]].device, p->ranks[g->ranks[b]].device);
            if (l.lat > maxlat) maxlat = l.lat;
            if ((a - first + g->n) % g->n < k) { o->src[o->nedges] = g->ranks[a]; o->dst[o->nedges] = g->ranks[b]; o->nedges++; }
        }
        o->lat = cs.lat_steps * maxlat;
        calls[gi][ncalls[gi]++] = id;
    }
    Obj *o = &S->objs[calls[gi][kk]];
    o->ranks[slot] = r; o->ops[slot] = i;
    S->op_obj[r][i] = calls[gi][kk];
    return 0;
}

static int build_objs(Sim *S, char *err, size_t errlen) {
    const Plan *p = S->p;
    int n = p->nranks;
    long nsend = 0, nrecv = 0;
    for (int ai = 0; ai < S->nact; ai++) {
        int r = S->act[ai];
        for (int i = 0; i < p->ranks[r].nops; i++) {
            int side = op_info(p->ranks[r].ops[i].kind)->p2p;
            nsend += side == P2P_SEND; nrecv += side == P2P_RECV;
        }
    }
    if (nsend != nrecv) return snprintf(err, errlen, "the plan has %ld sends and %ld receives", nsend, nrecv), -1;
    P2P *sends = xcalloc((size_t)nsend, sizeof *sends), *recvs = xcalloc((size_t)nrecv, sizeof *recvs);
    long ns = 0, nr = 0;
    for (int ai = 0; ai < S->nact; ai++) {
        int r = S->act[ai];
        for (int i = 0; i < p->ranks[r].nops; i++) {
            const Op *op = &p->ranks[r].ops[i];
            int side = op_info(op->kind)->p2p;
            if (side == P2P_SEND) sends[ns++] = (P2P){ (long)r * n + op->peer, r, i };
            if (side == P2P_RECV) recvs[nr++] = (P2P){ (long)op->peer * n + r, r, i };
        }
    }
    qsort(sends, (size_t)ns, sizeof *sends, p2p_cmp);
    qsort(recvs, (size_t)nr, sizeof *recvs, p2p_cmp);
    for (long j = 0; j < ns; j++) {
        if (sends[j].key != recvs[j].key) {
            int rank = sends[j].rank;   /* read before the arrays go */
            free(sends); free(recvs);
            return snprintf(err, errlen, "rank %d's sends do not match their receives (is the plan verified?)", rank), -1;
        }
        int id = new_obj(S);
        Obj *o = &S->objs[id];
        o->need = 2; o->p2p = 1; o->n = 2;
        o->ranks = xcalloc(2, sizeof(int)); o->ops = xcalloc(2, sizeof(int));
        o->ranks[0] = sends[j].rank; o->ops[0] = sends[j].op;
        o->ranks[1] = recvs[j].rank; o->ops[1] = recvs[j].op;
        o->nedges = 1;
        o->src = xcalloc(1, sizeof(int)); o->dst = xcalloc(1, sizeof(int));
        o->src[0] = sends[j].rank; o->dst[0] = recvs[j].rank;
        o->edge_bytes = sim_op_bytes(p, sends[j].rank, sends[j].op);
        S->op_obj[sends[j].rank][sends[j].op] = id;
        S->op_obj[recvs[j].rank][recvs[j].op] = id;
    }
    free(sends); free(recvs);
    /* Collectives: the k-th call of each member is one call. */
    int **calls = xcalloc((size_t)p->ngroups + 1, sizeof *calls);
    int *ncalls = xcalloc((size_t)p->ngroups + 1, sizeof *ncalls), *capcalls = xcalloc((size_t)p->ngroups + 1, sizeof *capcalls);
    int **next = xcalloc((size_t)p->ngroups + 1, sizeof *next);
    for (int g = 0; g < p->ngroups; g++) next[g] = xcalloc((size_t)p->groups[g].n, sizeof(int));
    int rc = 0;
    for (int ai = 0; ai < S->nact && !rc; ai++) {
        int r = S->act[ai];
        for (int i = 0; i < p->ranks[r].nops; i++) {
            const Op *op = &p->ranks[r].ops[i];
            const OpInfo *in = op_info(op->kind);
            if (!in->coll) continue;
            const PlanGroup *g = &p->groups[op->group];
            if (S->sym && S->sym->across[op->group]) { across_obj(S, r, i, calls, ncalls, capcalls, next); continue; }
            int m = 0;
            while (m < g->n && g->ranks[m] != r) m++;
            int k = next[op->group][m]++;
            if (k >= ncalls[op->group]) {
                if (k >= capcalls[op->group]) {
                    capcalls[op->group] = 2 * k + 8;
                    calls[op->group] = xrealloc(calls[op->group], (size_t)capcalls[op->group] * sizeof(int));
                }
                int id = new_obj(S);
                Obj *o = &S->objs[id];
                o->need = g->n; o->n = g->n;
                o->ranks = xcalloc((size_t)g->n, sizeof(int)); o->ops = xcalloc((size_t)g->n, sizeof(int));
                calls[op->group][ncalls[op->group]++] = id;
            }
            Obj *o = &S->objs[calls[op->group][k]];
            o->ranks[m] = r; o->ops[m] = i;
            S->op_obj[r][i] = calls[op->group][k];
            /* The edges: once, from the root's view (rooted) or the first member's (rings). */
            if (in->root ? op->peer != r : m != 0) continue;
            int root = 0;
            if (in->root) while (g->ranks[root] != op->peer) root++;
            CollShape cs = coll_shape(in->coll, g->n, root, sim_op_bytes(p, r, i));
            o->nedges = cs.nedges;
            o->edge_bytes = cs.edge_bytes;
            o->src = xcalloc((size_t)o->nedges + 1, sizeof(int)); o->dst = xcalloc((size_t)o->nedges + 1, sizeof(int));
            double maxlat = 0;
            for (int h = 0; h < o->nedges; h++) {
                int a, b;
                coll_edge(&cs, g->n, h, &a, &b);
                o->src[h] = g->ranks[a]; o->dst[h] = g->ranks[b];
                Link l = topology_link(S->t, p->ranks[o->src[h]].device, p->ranks[o->dst[h]].device);
                if (l.lat > maxlat) maxlat = l.lat;
            }
            o->lat = cs.lat_steps * maxlat;
        }
    }
    for (int g = 0; g < p->ngroups; g++) free(calls[g]), free(next[g]);
    free(calls); free(ncalls); free(capcalls); free(next);
    return rc;
}

static void build_resources(Sim *S) {
    const Topology *t = S->t;
    int D = t->ndevices;
    S->res_dev_tx = xcalloc((size_t)D, sizeof(int));
    S->res_dev_rx = xcalloc((size_t)D, sizeof(int));
    S->res_isl = xcalloc((size_t)t->nnodes, sizeof(int));
    S->res_nic = xcalloc((size_t)t->nnodes, sizeof(int));
    int nres = 2 * D;
    for (int i = 0; i < t->nnodes; i++) {
        S->res_isl[i] = nres; nres += 2 * (t->nodes[i].islands > 0 ? t->nodes[i].islands : 1);
        S->res_nic[i] = nres; nres += 2 * (t->nics_per_node > 0 ? t->nics_per_node : 1);
    }
    S->nres = nres;
    S->cap = xcalloc((size_t)nres, sizeof(double));
    for (int i = 0; i < t->nnodes; i++) {
        const Node *nd = &t->nodes[i];
        for (int d = 0; d < nd->ndevices; d++) {
            int g = nd->first_device + d;
            S->res_dev_tx[g] = g; S->res_dev_rx[g] = D + g;
            S->cap[g] = S->cap[D + g] = nd->intra.bw;
        }
        int isl = nd->islands > 0 ? nd->islands : 1, nics = t->nics_per_node > 0 ? t->nics_per_node : 1;
        for (int k = 0; k < 2 * isl; k++) S->cap[S->res_isl[i] + k] = nd->intra.bw;
        for (int k = 0; k < 2 * nics; k++) S->cap[S->res_nic[i] + k] = t->net.bw;
    }
}

static void add_flow(Sim *S, int obj, int ra, int rb, double bytes, double lat_end) {
    const Topology *t = S->t;
    int da = S->p->ranks[ra].device, db = S->p->ranks[rb].device;
    int na = topology_node_of(t, da), nb = topology_node_of(t, db);
    Link l = topology_link(t, da, db);
    S->r->link_bytes[l.type] += S->sym ? bytes * S->sym->R : bytes;   /* one flow per replica */
    if (S->o->free_comm || l.type == LINK_LOC || bytes <= 0) return;
    if (S->nflows == S->capflows) {
        S->capflows = S->capflows ? 2 * S->capflows : 64;
        S->flows = xrealloc(S->flows, (size_t)S->capflows * sizeof *S->flows);
    }
    Flow *f = &S->flows[S->nflows++];
    memset(f, 0, sizeof *f);
    f->obj = obj; f->dst = rb; f->bytes = f->rem = bytes; f->lat_end = lat_end; f->in_lat = 1; f->live = 1;
    f->intra = na == nb;
    if (na != nb) {
        const Node *A = &t->nodes[na], *B = &t->nodes[nb];
        int nics = t->nics_per_node > 0 ? t->nics_per_node : 1;
        int ia = (da - A->first_device) * nics / A->ndevices, ib = (db - B->first_device) * nics / B->ndevices;
        f->res[f->nres++] = S->res_nic[na] + 2 * ia;
        f->res[f->nres++] = S->res_nic[nb] + 2 * ib + 1;
    } else {
        const Node *A = &t->nodes[na];
        f->res[f->nres++] = S->res_dev_tx[da];
        f->res[f->nres++] = S->res_dev_rx[db];
        int isl = A->islands > 0 ? A->islands : 1;
        int ia = (da - A->first_device) * isl / A->ndevices, ib = (db - A->first_device) * isl / A->ndevices;
        if (l.type == LINK_PCI && ia != ib) {
            f->res[f->nres++] = S->res_isl[na] + 2 * ia;
            f->res[f->nres++] = S->res_isl[na] + 2 * ib + 1;
        }
    }
    for (int k = 0; k < f->nres; k++) {
        f->w[k] = 1;
        if (S->sym) { f->w[k] = S->sym->res_w[f->res[k]]; f->res[k] = S->sym->res_rep[f->res[k]]; }
    }
    S->objs[obj].flows_left++;
}

static void push_work(Sim *S, int r) {
    if (S->inwork[r]) return;
    S->inwork[r] = 1;
    S->work[S->nwork++] = r;
}

/* Seconds rank r's core spends per byte it receives: 0 on a GPU (cost_recv_copy_s_per_byte), so
 * also what tells a rank that moves its messages by MPI calls on a CPU. */
static double rank_copy_s_per_byte(const Sim *S, int r) {
    return S->copy_s_per_byte[S->t->nodes[S->p->ranks[r].node].type];
}

/* The compute operation rank r is in now, or -1 (it waits, or copies after its compute). */
static int computing_now(const Sim *S, int r) {
    const RankSim *s = &S->rs[r];
    if (s->cur >= 0) return s->cur;
    if (s->phase != PH_WAIT || S->now >= s->cend) return -1;
    const PlanRank *rk = &S->p->ranks[r];
    for (int i = rk->turn_start[s->turn]; i < rk->turn_start[s->turn + 1]; i++)
        if (op_is_compute(rk->ops[i].kind) && S->tstart[r][i] <= S->now && S->now < S->tend[r][i]) return i;
    return -1;
}

/* Receiving on a CPU is a copy by the receiving rank's own core: MPI over shared memory (and a CPU
 * cluster's TCP) reads the message and writes it into the rank's buffer (at the calibration's
 * receiving rate, COST_RECV; by default a pass each at the memory-bound rate), and the rank
 * computes nothing meanwhile; it does so when it next calls MPI after the bytes are there
 * (between layers, or in its wait), so the copy lengthens the rank's compute phase, or its wait
 * once that is over. Measured (bench-sim, 2 ranks of one node,
 * the weight ring): a 9.4 MB chunk of weights cost its receiver 1.3-1.9 ms besides its
 * compute, time the model had hidden under it (steps 14% under). A GPU's transfers are copied
 * by DMA engines or NCCL's kernels beside its compute: nothing is charged there. With symmetry a
 * flow into a rank not simulated is charged to the rank simulated in its place. */
static void recv_copy(Sim *S, const Flow *f) {
    int r = S->sym ? S->sym->rep[f->dst] : f->dst;
    double d = f->bytes * rank_copy_s_per_byte(S, r);
    if (d <= 0) return;
    RankSim *s = &S->rs[r];
    if (s->phase != PH_WAIT) return;   /* a transfer of its turn completes only while it waits */
    /* the span the runtime copies in: between ranks of a node, the one of the receiver's MPI call
     * that matched the message, which copies it at once (over shared memory the copy is the
     * transfer); else the one in which the bytes came, whose next call copies them */
    const Obj *o = &S->objs[f->obj];
    int i = f->intra && o->p2p ? o->call_op : computing_now(S, r);
    if (i >= 0 && !S->sym) S->recv_in[r][i] += f->bytes;   /* (recorded runs have no symmetry) */
    if (s->cur >= 0) s->copy_owed += d;   /* computing on a shared node: after its compute */
    else s->cend = (s->cend > S->now ? s->cend : S->now) + d;
}

static void obj_complete(Sim *S, int id) {
    Obj *o = &S->objs[id];
    o->done = 1;
    for (int m = 0; m < o->n; m++) {
        S->tend[o->ranks[m]][o->ops[m]] = S->now;
        S->rs[o->ranks[m]].pending--;
        push_work(S, o->ranks[m]);
    }
}

/* The first layer boundary of rank r's compute operation i (of n layers, taken as equal parts),
 * at or after now: a computing CPU rank calls MPI after each layer (runtime/cpu/model.c). On a
 * shared node, at the rank's share of the cores now. */
static double layer_boundary(const Sim *S, int r, int i) {
    const RankSim *s = &S->rs[r];
    const PlanRank *rk = &S->p->ranks[r];
    const Op *op = &rk->ops[i];
    int n = S->p->chunks[op->chunk].nlayers > 0 ? S->p->chunks[op->chunk].nlayers : 1;
    if (s->cur == i) {
        double d = op_seconds(S, r, op, &rk->notes[i]), done = d - s->rem;
        if (d <= 0) return S->now;
        double left = ceil(done / (d / n) - 1e-9) * (d / n) - done;
        if (left <= 0) left = d / n;   /* at a boundary now, as it starts: the next one */
        return S->now + left / rank_share(S, r);
    }
    double a = S->tstart[r][i], step = (S->tend[r][i] - a) / n;
    if (step <= 0) return S->now;
    double k = ceil((S->now - a) / step - 1e-9);
    if (k < 1) k = 1;
    return a + k * step;
}

/* When rank r next calls MPI (now or later). On a CPU, MPI moves a message only inside the
 * receiver's MPI calls (it takes the sender's announcement from shared memory, matches it and
 * copies), and a post is not one of them (MPI_Irecv does not progress): a rank that posts and then
 * computes matches a message at its first layer boundary, one computing at its next, one waiting
 * at once. A GPU's transfers need no call from the host. */
static double next_mpi_call(const Sim *S, int r) {
    const RankSim *s = &S->rs[r];
    if (rank_copy_s_per_byte(S, r) <= 0 || s->phase != PH_WAIT) return S->now;
    int i = computing_now(S, r);
    return i >= 0 ? layer_boundary(S, r, i) : S->now;   /* waiting, or between its compute and its copies */
}

/* Rank r has posted its turn and laid out its compute: the transfers it receives that started
 * while it posted begin at its first MPI call (next_mpi_call). */
static void start_awaiting(Sim *S, int r) {
    const PlanRank *rk = &S->p->ranks[r];
    int t0 = rk->turn_start[S->rs[r].turn], t1 = rk->turn_start[S->rs[r].turn + 1], any = 0;
    for (int i = t0; i < t1; i++) {
        Obj *o = &S->objs[S->op_obj[r][i]];
        if (op_is_transfer(rk->ops[i].kind) && o->await_rank == r) any = 1;
    }
    if (!any) return;
    double at = next_mpi_call(S, r);
    for (int f = 0; f < S->nflows; f++) {
        Flow *fl = &S->flows[f];
        Obj *o = &S->objs[fl->obj];
        if (fl->live && fl->in_lat && o->await_rank == r) fl->lat_end = (at > o->t_calls ? at : o->t_calls) + o->lat;
    }
    for (int i = t0; i < t1; i++) {
        Obj *o = &S->objs[S->op_obj[r][i]];
        if (!op_is_transfer(rk->ops[i].kind)) continue;
        if (o->p2p && o->await_rank == r) o->call_op = computing_now(S, r);
        o->await_rank = -1;
    }
}

static void obj_start(Sim *S, int id) {
    Obj *o = &S->objs[id];
    o->t_start = S->now;
    for (int m = 0; m < o->n; m++) S->tstart[o->ranks[m]][o->ops[m]] = S->now;
    if (o->p2p) o->lat = topology_link(S->t, S->p->ranks[o->src[0]].device, S->p->ranks[o->dst[0]].device).lat;
    /* Between CPU ranks bytes move only inside MPI calls: a point-to-point transfer's inside its
     * receiver's, a collective's (libnbc's rounds of sends and receives) inside every member's. It
     * starts once each of them has called MPI after the last one posted: a rank posting now calls
     * in start_awaiting; the others posted before and call at their next layer boundary, or at
     * once if they wait. */
    const int *callers = o->p2p ? o->dst : o->ranks;
    int ncallers = o->p2p ? 1 : o->n;
    double from = S->now;
    o->call_op = -1;
    if (o->edge_bytes > 0 && o->nedges > 0 && rank_copy_s_per_byte(S, callers[0]) > 0) {
        o->t_calls = S->now;
        for (int m = 0; m < ncallers; m++) {
            int q = callers[m];
            if (S->rs[q].phase == PH_START) { o->await_rank = q; continue; }
            double c = next_mpi_call(S, q);
            if (c > o->t_calls) o->t_calls = c;
            if (o->p2p) o->call_op = computing_now(S, q);
        }
        from = o->await_rank >= 0 ? INFINITY : o->t_calls;
    }
    double lat = o->lat + cp_gather_seconds(S->p, S->t, o->ranks[0], o->ops[0]);
    for (int h = 0; h < o->nedges; h++) add_flow(S, id, o->src[h], o->dst[h], o->edge_bytes, from + lat);
    if (o->flows_left == 0) obj_complete(S, id);
    else S->rates_dirty = 1;
}

static void advance(Sim *S, int r) {
    const Plan *p = S->p;
    const PlanRank *rk = &p->ranks[r];
    RankSim *s = &S->rs[r];
    for (;;) {
        if (s->phase == PH_START) {
            if (s->turn == p->nturns) {
                s->phase = PH_DONE;
                S->r->rank_end[r] = S->now;
                S->r->turn_t[r][p->nturns] = S->now;
                return;
            }
            S->r->turn_t[r][s->turn] = S->now;
            int t0 = rk->turn_start[s->turn], t1 = rk->turn_start[s->turn + 1];
            for (int i = t0; i < t1; i++)
                if (op_is_transfer(rk->ops[i].kind)) s->pending++;
            for (int i = t0; i < t1; i++) {
                if (!op_is_transfer(rk->ops[i].kind)) continue;
                S->tpost[r][i] = S->now;
                int id = S->op_obj[r][i];
                if (++S->objs[id].posted == S->objs[id].need) obj_start(S, id);
            }
            double c = S->now;
            if (S->node_cores[rk->node]) {
                s->cend = share_start(S, r, t0, 0) ? INFINITY : S->now;
                s->phase = PH_WAIT;
                t1 = t0;   /* nothing laid out below */
            }
            for (int i = t0; i < t1; i++) {
                if (!op_is_compute(rk->ops[i].kind)) continue;
                double d = op_seconds(S, r, &rk->ops[i], &rk->notes[i]);
                if (S->o->unit_fwd_s > 0) d = S->o->unit_fwd_s * compute_units(p, rk->ops[i].kind);
                S->tpost[r][i] = S->tstart[r][i] = c;
                c += d;
                S->tend[r][i] = c;
                S->r->rank_busy[r] += d;
            }
            if (!S->node_cores[rk->node]) s->cend = c;
            s->phase = PH_WAIT;
            start_awaiting(S, r);
        }
        if (s->phase == PH_WAIT) {
            if (s->cend > S->now || s->pending > 0) return;
            S->r->comm_exposed_s += S->now - s->cend;
            int t0 = rk->turn_start[s->turn], t1 = rk->turn_start[s->turn + 1];
            double c = S->now;
            if (S->node_cores[rk->node]) {
                s->phase = PH_LOCAL;
                s->lend = share_start(S, r, t0, 1) ? INFINITY : S->now;
                t1 = t0;
            }
            for (int i = t0; i < t1; i++) {
                if (!local_in_turn(rk->ops[i].kind)) continue;
                double d = S->o->free_local ? 0 : op_seconds(S, r, &rk->ops[i], &rk->notes[i]);
                S->tpost[r][i] = S->tstart[r][i] = c;
                c += d;
                S->tend[r][i] = c;
            }
            if (!S->node_cores[rk->node]) s->lend = c;
            s->phase = PH_LOCAL;
        }
        if (s->phase == PH_LOCAL) {
            if (s->lend > S->now) return;
            if (S->o->lockstep) {
                s->phase = PH_BARRIER;
                if (++S->at_barrier < p->nranks) return;
                S->at_barrier = 0;
                for (int q = 0; q < p->nranks; q++)
                    if (q != r) { S->rs[q].turn++; S->rs[q].phase = PH_START; push_work(S, q); }
            }
            s->turn++;
            s->phase = PH_START;
        }
        if (s->phase == PH_DONE || s->phase == PH_BARRIER) return;
    }
}

/* A min-heap of (fair share, resource) for progressive filling. Shares only grow as flows are
 * frozen, so stale entries are re-pushed with their current share when they surface. */
typedef struct Share { double share; int res; } Share;

static void heap_push(Share *h, int *n, Share x) {
    int i = (*n)++;
    while (i > 0 && h[(i - 1) / 2].share > x.share) { h[i] = h[(i - 1) / 2]; i = (i - 1) / 2; }
    h[i] = x;
}

static Share heap_pop(Share *h, int *n) {
    Share top = h[0], x = h[--*n];
    int i = 0;
    for (;;) {
        int c = 2 * i + 1;
        if (c >= *n) break;
        if (c + 1 < *n && h[c + 1].share < h[c].share) c++;
        if (h[c].share >= x.share) break;
        h[i] = h[c];
        i = c;
    }
    if (*n > 0) h[i] = x;
    return top;
}

/* Max-min fair rates by progressive filling over the flows moving bytes: repeatedly the resource
 * with the smallest fair share (capacity left / flows left on it) fixes the rate of its flows.
 * Resources know their flows (built here, CSR), and a heap finds the bottleneck, so a call costs
 * O(incidences * log) rather than flows * resources: what makes 1,024 ranks simulate quickly. */
static void compute_rates(Sim *S) {
    int nres = S->nres, nf = S->nflows;
    double *left = xcalloc((size_t)nres, sizeof(double)), *count = xcalloc((size_t)nres + 1, sizeof(double));
    int *nflow = xcalloc((size_t)nres + 1, sizeof(int)), *start = xcalloc((size_t)nres + 1, sizeof(int));
    char *frozen = xcalloc((size_t)nf + 1, 1);
    memcpy(left, S->cap, (size_t)nres * sizeof(double));
    int incid = 0;
    for (int i = 0; i < nf; i++) {
        Flow *f = &S->flows[i];
        f->rate = 0;
        if (!f->live || f->in_lat) { frozen[i] = 1; continue; }
        for (int k = 0; k < f->nres; k++) { count[f->res[k]] += f->w[k]; nflow[f->res[k]]++; }
        incid += f->nres;
    }
    for (int q = 0; q < nres; q++) start[q + 1] = start[q] + nflow[q];
    int *fill = xcalloc((size_t)nres + 1, sizeof(int)), *flows_of = xcalloc((size_t)incid + 1, sizeof(int));
    memcpy(fill, start, (size_t)nres * sizeof(int));
    for (int i = 0; i < nf; i++)
        if (!frozen[i])
            for (int k = 0; k < S->flows[i].nres; k++) flows_of[fill[S->flows[i].res[k]]++] = i;
    Share *heap = xcalloc((size_t)(nres + incid) + 1, sizeof(Share));
    int nheap = 0;
    for (int q = 0; q < nres; q++)
        if (count[q] > 0) heap_push(heap, &nheap, (Share){ left[q] / count[q], q });
    while (nheap > 0) {
        Share top = heap_pop(heap, &nheap);
        int q = top.res;
        if (count[q] == 0) continue;
        double share = left[q] / count[q];
        if (share > top.share * (1 + 1e-12) + 1e-300) { heap_push(heap, &nheap, (Share){ share, q }); continue; }
        if (share < 0) share = 0;
        for (int j = start[q]; j < start[q + 1]; j++) {
            int i = flows_of[j];
            if (frozen[i]) continue;
            Flow *f = &S->flows[i];
            f->rate = share;
            frozen[i] = 1;
            for (int k = 0; k < f->nres; k++) { left[f->res[k]] -= share * f->w[k]; count[f->res[k]] -= f->w[k]; }
        }
        count[q] = 0;
    }
    free(left); free(count); free(nflow); free(start); free(frozen); free(fill); free(flows_of); free(heap);
}

static void compact_flows(Sim *S) {
    int j = 0;
    for (int i = 0; i < S->nflows; i++)
        if (S->flows[i].live) S->flows[j++] = S->flows[i];
    S->nflows = j;
}

static int cmp_by_work(const void *a, const void *b) {
    const double *x = a, *y = b;   /* (work, rank) pairs */
    return x[0] < y[0] ? -1 : x[0] > y[0];
}

/* The step's end, as the runtime runs it (train/loop.c): each rank, its turns done, reads the
 * gradients it updates for their norm (one pass over each; replica 0's ranks, a replicated chunk's
 * first owner: what train.c counts), every rank meets the others in the all-reduce of the norm,
 * then applies its updates (the OPF_STEP_END operations, recorded in their turns). The
 * all-reduce of three doubles is taken as free: microseconds against steps of milliseconds. On a
 * node whose ranks share cores, the updates, started together, share them (processor sharing:
 * the shortest ends first, then the rest get its part). Sets rank_end. */
static void step_end(Sim *S, SimResult *res) {
    const Plan *p = S->p;
    int n = p->nranks;
    double sync = 0, *upd = xcalloc((size_t)n, sizeof *upd), *fin = xcalloc((size_t)n, sizeof *fin);
    for (int r = 0; r < n; r++) {
        const PlanRank *rk = &p->ranks[r];
        double norm_bytes = 0;
        for (int i = 0; i < rk->nops; i++) {
            const Op *op = &rk->ops[i];
            if (!op_at_step_end(op->kind)) continue;
            if (!S->o->free_local) upd[r] += op_seconds(S, r, op, &rk->notes[i]);
            const PlanChunk *c = &p->chunks[op->chunk];
            int counted = rk->replica == 0 && (!c->replicated || (c->nowners > 0 && c->owners[0] == r));
            if (counted && op->buf2 >= 0)
                norm_bytes += (double)plan_shard_elems(p, op->chunk, rk->bufs[op->buf2].nshards) * wp_dtype_bytes((WpDtype)rk->bufs[op->buf2].dtype);
        }
        double norm = S->o->free_local ? 0 : norm_bytes * S->coef[S->t->nodes[rk->node].type][COST_BYTES];
        if (res->rank_end[r] + norm > sync) sync = res->rank_end[r] + norm;
        fin[r] = upd[r];
    }
    for (int node = 0; node < S->t->nnodes; node++) {
        if (!S->node_cores[node]) continue;
        double (*w)[2] = xcalloc((size_t)n, sizeof *w), t = 0, done = 0;
        int m = 0;
        for (int r = 0; r < n; r++)
            if (p->ranks[r].node == node && upd[r] > 0) w[m][0] = upd[r], w[m++][1] = r;
        qsort(w, (size_t)m, sizeof *w, cmp_by_work);
        for (int j = 0; j < m; j++) {
            double rate = m - j > S->node_cores[node] ? (double)S->node_cores[node] / (m - j) : 1;
            t += (w[j][0] - done) / rate;
            done = w[j][0];
            fin[(int)w[j][1]] = t;
        }
        free(w);
    }
    for (int r = 0; r < n; r++) {
        const PlanRank *rk = &p->ranks[r];
        double t = sync, k = upd[r] > 0 ? fin[r] / upd[r] : 1;
        for (int i = 0; i < rk->nops; i++) {
            if (!op_at_step_end(rk->ops[i].kind)) continue;
            double d = S->o->free_local ? 0 : k * op_seconds(S, r, &rk->ops[i], &rk->notes[i]);
            S->tpost[r][i] = S->tstart[r][i] = t;
            S->tend[r][i] = t += d;
        }
        res->rank_end[r] = sync + fin[r];
    }
    free(upd); free(fin);
}

int sim_run(const Plan *p, const SimOptions *opt, SimResult *res, char *err, size_t errlen) {
    static const SimOptions defaults = { 0 };
    if (!opt) opt = &defaults;
    memset(res, 0, sizeof *res);
    if (!p->verified) return snprintf(err, errlen, "the simulator only runs verified plans"), -1;
    Sim S = { .p = p, .t = opt->topo ? opt->topo : p->topo, .o = opt, .r = res };
    if (S.t->ndevices != p->topo->ndevices || S.t->nnodes != p->topo->nnodes)
        return snprintf(err, errlen, "the topology has %d devices on %d nodes, the plan's %d on %d", S.t->ndevices, S.t->nnodes,
                        p->topo->ndevices, p->topo->nnodes), -1;
    int n = p->nranks;
    res->rank_busy = xcalloc((size_t)n, sizeof(double));
    res->rank_end = xcalloc((size_t)n, sizeof(double));
    res->turn_t = xcalloc((size_t)n, sizeof(double *));
    res->nranks = n;
    S.rs = xcalloc((size_t)n, sizeof *S.rs);
    S.op_obj = xcalloc((size_t)n, sizeof(int *));
    S.tpost = xcalloc((size_t)n, sizeof(double *));
    S.tstart = xcalloc((size_t)n, sizeof(double *));
    S.tend = xcalloc((size_t)n, sizeof(double *));
    S.recv_in = xcalloc((size_t)n, sizeof(double *));
    for (int r = 0; r < n; r++) {
        int no = p->ranks[r].nops;
        res->turn_t[r] = xcalloc((size_t)p->nturns + 1, sizeof(double));
        S.op_obj[r] = xcalloc((size_t)no, sizeof(int));
        S.tpost[r] = xcalloc((size_t)no, sizeof(double));
        S.tstart[r] = xcalloc((size_t)no, sizeof(double));
        S.tend[r] = xcalloc((size_t)no, sizeof(double));
        S.recv_in[r] = xcalloc((size_t)no, sizeof(double));
    }
    S.coef = xcalloc((size_t)S.t->ntypes, sizeof *S.coef);
    S.copy_s_per_byte = xcalloc((size_t)S.t->ntypes, sizeof(double));
    for (int i = 0; i < S.t->ntypes; i++) {
        calib_coefs(opt->calib, &S.t->types[i], p->precision, S.coef[i]);
        S.copy_s_per_byte[i] = cost_recv_copy_s_per_byte(&S.t->types[i], S.coef[i]);
    }
    S.work = xcalloc((size_t)n, sizeof(int));
    S.inwork = xcalloc((size_t)n, 1);
    S.node_cores = xcalloc((size_t)S.t->nnodes, sizeof(int));
    S.node_computing = xcalloc((size_t)S.t->nnodes, sizeof(int));
    for (int i = 0; i < S.t->nnodes; i++) {
        const Node *nd = &S.t->nodes[i];
        if (nd->cores > 0 && nd->ndevices > nd->cores) S.node_cores[i] = nd->cores, S.any_shared = 1;
    }
    for (int r = 0; r < n; r++) S.rs[r].cur = -1;
    /* replicas that are moves of one pipeline are simulated once (symmetry.h); the trace and the
     * lockstep turn model want every rank */
    SimSym sym;
    int use_sym = !opt->no_symmetry && !opt->record && !opt->lockstep && !S.any_shared && sym_find(p, S.t, &sym);
    build_resources(&S);
    if (use_sym && sym_resources(&sym, p, S.t, S.nres, S.res_dev_tx, S.res_dev_rx, S.res_isl, S.res_nic, S.cap)) {
        sym_free(&sym);
        use_sym = 0;
    }
    if (use_sym) {
        S.sym = &sym;
        S.nact = sym.nreps;
        S.act = xcalloc((size_t)S.nact, sizeof(int));
        memcpy(S.act, sym.reps, (size_t)S.nact * sizeof(int));
        res->symmetric = sym.R;
    } else {
        S.nact = n;
        S.act = xcalloc((size_t)n, sizeof(int));
        for (int r = 0; r < n; r++) S.act[r] = r;
    }
    int rc = build_objs(&S, err, errlen);
    if (rc == 0) {
        for (int ai = 0; ai < S.nact; ai++) push_work(&S, S.act[ai]);
        for (;;) {
            while (S.nwork > 0) {
                int r = S.work[--S.nwork];
                S.inwork[r] = 0;
                advance(&S, r);
            }
            int alldone = 1;
            for (int ai = 0; ai < S.nact; ai++) alldone &= S.rs[S.act[ai]].phase == PH_DONE;
            if (alldone) break;
            if (S.rates_dirty) { compact_flows(&S); compute_rates(&S); S.rates_dirty = 0; }
            double next = INFINITY;
            for (int ai = 0; ai < S.nact; ai++) {
                RankSim *s = &S.rs[S.act[ai]];
                if (s->phase == PH_WAIT && s->cend > S.now && s->cend < next) next = s->cend;
                if (s->phase == PH_LOCAL && s->lend > S.now && s->lend < next) next = s->lend;
                if (s->cur >= 0) {
                    double tc = S.now + s->rem / rank_share(&S, S.act[ai]);
                    if (tc < next) next = tc;
                }
            }
            for (int i = 0; i < S.nflows; i++) {
                Flow *f = &S.flows[i];
                if (!f->live) continue;
                double tf = f->in_lat ? f->lat_end : f->rate > 0 ? S.now + f->rem / f->rate : INFINITY;
                if (tf < next) next = tf;
            }
            if (!(next < INFINITY)) {
                int ai = 0;
                while (S.rs[S.act[ai]].phase == PH_DONE) ai++;
                int r = S.act[ai];
                rc = -1;
                snprintf(err, errlen, "simulation stuck: rank %d at turn %d (is the plan verified?)", r, S.rs[r].turn);
                break;
            }
            if (opt->stop_after > 0 && next > opt->stop_after) { rc = SIM_STOPPED; break; }
            double dt = next - S.now;
            if (S.any_shared) {   /* work done at the shares of the interval just ended, then what finished */
                for (int ai = 0; ai < S.nact; ai++)
                    if (S.rs[S.act[ai]].cur >= 0) S.rs[S.act[ai]].rem -= dt * rank_share(&S, S.act[ai]);
            }
            S.now = next;
            res->events++;
            if (S.any_shared) {
                for (int ai = 0; ai < S.nact; ai++) {
                    RankSim *s = &S.rs[S.act[ai]];
                    while (s->cur >= 0 && s->rem <= 1e-12 * (1 + S.now)) share_finish(&S, S.act[ai]);
                }
            }
            for (int i = 0; i < S.nflows; i++) {
                Flow *f = &S.flows[i];
                if (!f->live) continue;
                if (f->in_lat) {
                    if (f->lat_end <= S.now) { f->in_lat = 0; S.rates_dirty = 1; }
                    continue;
                }
                f->rem -= f->rate * dt;
                if (f->rem <= f->bytes * 1e-9 || (f->rate > 0 && f->rem / f->rate <= 1e-12 * (1 + S.now))) {
                    f->live = 0;
                    S.rates_dirty = 1;
                    recv_copy(&S, f);
                    if (--S.objs[f->obj].flows_left == 0) obj_complete(&S, f->obj);
                }
            }
            for (int ai = 0; ai < S.nact; ai++) {
                int r = S.act[ai];
                RankSim *s = &S.rs[r];
                if ((s->phase == PH_WAIT && s->cend <= S.now) || (s->phase == PH_LOCAL && s->lend <= S.now)) push_work(&S, r);
            }
        }
    }
    if (rc == 0 && S.sym) {   /* every replica as replica 0 */
        for (int r = 0; r < n; r++) {
            int q = sym.rep[r];
            if (q == r) continue;
            res->rank_end[r] = res->rank_end[q];
            res->rank_busy[r] = res->rank_busy[q];
            memcpy(res->turn_t[r], res->turn_t[q], ((size_t)p->nturns + 1) * sizeof(double));
        }
        res->comm_exposed_s *= sym.R;
    }
    if (rc == 0) step_end(&S, res);
    if (rc == 0) {
        double step = 0, busy = 0;
        for (int r = 0; r < n; r++) {
            if (res->rank_end[r] > step) step = res->rank_end[r];
            busy += res->rank_busy[r];
        }
        res->step_time = step;
        res->compute_s = busy;
        for (int r = 0; r < n && p->recompute == WP_RECOMPUTE_OFFLOAD; r++)
            for (int i = 0; i < p->ranks[r].nops; i++) {
                double x = 0;
                if (op_is_compute(p->ranks[r].ops[i].kind)) op_seconds_of(&S, r, &p->ranks[r].ops[i], &p->ranks[r].notes[i], &x);
                res->offload_exposed_s += x;
            }
        double tokens = (double)p->total_mbs * p->model.mbs * p->model.seq;
        res->tokens_per_s_per_device = step > 0 ? tokens / step / (n * wp_cp(&p->model)) : 0;   /* a group: C devices */
        res->bubble_ratio = step > 0 ? 1 - busy / (n * step) : 0;
        plan_traffic(p, &res->bytes_intra, &res->bytes_inter);
        if (p->nranks > 0) res->link_bytes[S.t->nodes[0].intra.type] += plan_cp_traffic(p);   /* costed beside the flows */
        if (opt->record) {
            long total = 0;
            for (int r = 0; r < n; r++) total += p->ranks[r].nops;
            res->spans = xcalloc((size_t)total, sizeof *res->spans);
            for (int r = 0; r < n; r++)
                for (int t = 0; t < p->nturns; t++)
                    for (int i = p->ranks[r].turn_start[t]; i < p->ranks[r].turn_start[t + 1]; i++)
                        res->spans[res->nspans++] = (SimSpan){ r, t, i, S.tpost[r][i], S.tstart[r][i], S.tend[r][i], S.recv_in[r][i] };
        }
    }
    for (int i = 0; i < S.nobjs; i++) free(S.objs[i].ranks), free(S.objs[i].ops), free(S.objs[i].src), free(S.objs[i].dst);
    free(S.objs);
    for (int r = 0; r < n; r++) free(S.op_obj[r]), free(S.tpost[r]), free(S.tstart[r]), free(S.tend[r]), free(S.recv_in[r]);
    free(S.op_obj); free(S.tpost); free(S.tstart); free(S.tend); free(S.recv_in);
    free(S.node_cores); free(S.node_computing);
    free(S.rs); free(S.coef); free(S.copy_s_per_byte); free(S.work); free(S.inwork); free(S.flows); free(S.cap); free(S.act);
    if (S.sym) sym_free(&sym);
    free(S.res_dev_tx); free(S.res_dev_rx); free(S.res_isl); free(S.res_nic);
    if (rc) sim_result_free(res);
    return rc;
}

void sim_result_free(SimResult *r) {
    if (r->turn_t)
        for (int i = 0; i < r->nranks; i++) free(r->turn_t[i]);
    free(r->turn_t);
    r->turn_t = NULL;
    free(r->rank_busy); free(r->rank_end); free(r->spans);
    r->rank_busy = r->rank_end = NULL; r->spans = NULL;
}
