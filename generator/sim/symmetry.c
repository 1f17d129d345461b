/* Finding the replicas' symmetry for the simulator (symmetry.h): the move sigma takes each rank to
 * the rank k replicas on at the same stage; the plan is symmetric when sigma maps every rank's
 * operations, buffers and links onto its image's, and every group either inside a replica onto
 * another group or, across the replicas, onto itself turned by k members. k = 1 where each
 * replica has nodes of its own or is laid out like its neighbours; more where replicas share
 * nodes (4 of them on a node of 8: k = 4, one node simulated). A group across the replicas has
 * one member per replica, or (replicated chunks' all-reduce) all of each replica's ranks, in blocks.
 * The smallest k that works is taken. Checked operation by operation: linear in the plan's size for each k tried. */
#include <stdlib.h>
#include <string.h>
#include "sim/symmetry.h"
#include "ir/op_table.h"
#include "util/xalloc.h"

void sym_free(SimSym *s) {
    free(s->reps); free(s->rep); free(s->sigma); free(s->across); free(s->res_rep); free(s->res_w);
    memset(s, 0, sizeof *s);
}

static int same_link(const Topology *t, int a, int b, int c, int d) {
    Link x = topology_link(t, a, b), y = topology_link(t, c, d);
    return x.type == y.type && x.bw == y.bw && x.lat == y.lat;
}

static int same_buf(const PlanBuf *a, const PlanBuf *b) {
    return a->kind == b->kind && a->master == b->master && a->dtype == b->dtype && a->copy_dtype == b->copy_dtype &&
           a->chunk == b->chunk && a->shard == b->shard && a->nshards == b->nshards && a->elems == b->elems;
}

/* Rank r and its image q = sigma(r): the same work, peers and groups moved by sigma. */
static int same_rank(const Plan *p, const Topology *t, const SimSym *s, int r) {
    int q = s->sigma[r];
    const PlanRank *a = &p->ranks[r], *b = &p->ranks[q];
    if (a->nops != b->nops || a->nbufs != b->nbufs) return 0;
    const DeviceType *ta = &t->types[t->nodes[a->node].type], *tb = &t->types[t->nodes[b->node].type];
    if (ta != tb && (ta->peak_flops != tb->peak_flops || ta->efficiency != tb->efficiency || ta->hbm_bw != tb->hbm_bw ||
                     ta->rated_bf16 != tb->rated_bf16)) return 0;
    for (int i = 0; i <= p->nturns; i++)
        if (a->turn_start[i] != b->turn_start[i]) return 0;
    for (int i = 0; i < a->nbufs; i++)
        if (!same_buf(&a->bufs[i], &b->bufs[i])) return 0;
    for (int i = 0; i < a->nops; i++) {
        const Op *x = &a->ops[i], *y = &b->ops[i];
        if (x->kind != y->kind || x->what != y->what || x->buf != y->buf || x->buf2 != y->buf2 || x->chunk != y->chunk) return 0;
        if (a->notes[i].chunk != b->notes[i].chunk || a->notes[i].nshards != b->notes[i].nshards) return 0;
        if (x->kind == OP_RING && (x->ring_steps != y->ring_steps || op_ring_bytes(x) != op_ring_bytes(y))) return 0;
        const OpInfo *in = op_info(x->kind);
        if (in->p2p) {
            if (x->peer < 0 || y->peer != s->sigma[x->peer] || p->ranks[x->peer].replica != a->replica) return 0;
            if (!same_link(t, a->device, p->ranks[x->peer].device, b->device, p->ranks[y->peer].device)) return 0;
        }
        if (in->coll) {
            const PlanGroup *g = &p->groups[x->group], *h = &p->groups[y->group];
            if (s->across[x->group]) {
                if (y->group != x->group || in->root) return 0;
                continue;
            }
            if (g->n != h->n) return 0;
            for (int m = 0; m < g->n; m++)
                if (h->ranks[m] != s->sigma[g->ranks[m]]) return 0;
            if (in->root && y->peer != s->sigma[x->peer]) return 0;
        }
    }
    return 1;
}

static int sym_find_k(const Plan *p, const Topology *t, SimSym *s, int k) {
    memset(s, 0, sizeof *s);
    int n = p->nranks, R = p->replicas;
    int npipe = n / R;
    int *at = xcalloc((size_t)n, sizeof *at);   /* [replica * npipe + stage] -> rank + 1 */
    int ok = 1;
    for (int r = 0; r < n && ok; r++) {
        const PlanRank *k = &p->ranks[r];
        if (k->replica < 0 || k->replica >= R || k->stage < 0 || k->stage >= npipe || at[k->replica * npipe + k->stage]) ok = 0;
        else at[k->replica * npipe + k->stage] = r + 1;
    }
    if (!ok) { free(at); return 0; }
    s->R = R / k;
    s->k = k;
    s->sigma = xcalloc((size_t)n, sizeof *s->sigma);
    s->rep = xcalloc((size_t)n, sizeof *s->rep);
    s->nreps = k * npipe;
    s->reps = xcalloc((size_t)s->nreps, sizeof *s->reps);
    for (int r = 0; r < n; r++) {
        const PlanRank *rk = &p->ranks[r];
        s->sigma[r] = at[(rk->replica + k) % R * npipe + rk->stage] - 1;
        s->rep[r] = at[rk->replica % k * npipe + rk->stage] - 1;
    }
    for (int i = 0; i < s->nreps; i++) s->reps[i] = at[i] - 1;
    free(at);
    /* groups: inside one replica, or w members per replica in blocks of replica order (w = 1: the
     * all-reduce among the replicas' owners of a chunk; w = all the replica's ranks: the all-reduce
     * of a replicated chunk's gradient over all ranks), which sigma turns by k blocks */
    s->across = xcalloc((size_t)p->ngroups + 1, 1);
    for (int g = 0; g < p->ngroups && ok; g++) {
        const PlanGroup *G = &p->groups[g];
        int inside = 1;
        for (int m = 1; m < G->n; m++) inside &= p->ranks[G->ranks[m]].replica == p->ranks[G->ranks[0]].replica;
        if (inside) continue;
        if (G->n % R) { ok = 0; break; }
        int w = G->n / R, first = 0;
        while (first < G->n && !(p->ranks[G->ranks[first]].replica == 0 && (first == 0 || p->ranks[G->ranks[first - 1]].replica != 0)))
            first++;
        for (int m = 0; m < G->n && ok; m++) {
            int a = G->ranks[m], b = G->ranks[(m + 1) % G->n];
            if (p->ranks[a].replica != (m - first + G->n) % G->n / w || s->sigma[a] != G->ranks[(m + k * w) % G->n]) ok = 0;   /* sigma turns the ring by k blocks */
            /* every edge of the ring on the same kind of link as the one k blocks on */
            else if (!same_link(t, p->ranks[a].device, p->ranks[b].device, p->ranks[s->sigma[a]].device, p->ranks[s->sigma[b]].device)) ok = 0;
        }
        s->across[g] = 1;
    }
    for (int r = 0; r < n && ok; r++) ok = same_rank(p, t, s, r);
    /* inside groups: consecutive members' links move with sigma too (ring and chain edges) */
    for (int g = 0; g < p->ngroups && ok; g++) {
        const PlanGroup *G = &p->groups[g];
        if (s->across[g] || G->n < 2) continue;
        for (int m = 0; m < G->n && ok; m++) {
            int a = G->ranks[m], b = G->ranks[(m + 1) % G->n];
            ok = same_link(t, p->ranks[a].device, p->ranks[b].device, p->ranks[s->sigma[a]].device, p->ranks[s->sigma[b]].device);
        }
    }
    if (!ok) { sym_free(s); return 0; }
    return 1;
}

int sym_find(const Plan *p, const Topology *t, SimSym *s) {
    memset(s, 0, sizeof *s);
    int R = p->replicas;
    if (R < 2 || p->nranks % R) return 0;
    for (int k = 1; k < R; k++)
        if (R % k == 0 && sym_find_k(p, t, s, k)) return 1;
    return 0;
}

/* map[x] = y, or a conflict */
static int put(int *map, int x, int y) {
    if (map[x] >= 0 && map[x] != y) return -1;
    map[x] = y;
    return 0;
}

int sym_resources(SimSym *s, const Plan *p, const Topology *t, int nres, const int *dev_tx, const int *dev_rx,
                  const int *res_isl, const int *res_nic, const double *cap) {
    int *map = xcalloc((size_t)nres, sizeof *map);
    for (int i = 0; i < nres; i++) map[i] = -1;
    int bad = 0;
    for (int r = 0; r < p->nranks && !bad; r++) {
        int d = p->ranks[r].device, e = p->ranks[s->sigma[r]].device;
        int nd = topology_node_of(t, d), ne = topology_node_of(t, e);
        const Node *A = &t->nodes[nd], *B = &t->nodes[ne];
        int nics = t->nics_per_node > 0 ? t->nics_per_node : 1;
        int ia = A->islands > 0 ? A->islands : 1, ib = B->islands > 0 ? B->islands : 1;
        int nic_d = (d - A->first_device) * nics / A->ndevices, nic_e = (e - B->first_device) * nics / B->ndevices;
        int isl_d = (d - A->first_device) * ia / A->ndevices, isl_e = (e - B->first_device) * ib / B->ndevices;
        bad |= put(map, dev_tx[d], dev_tx[e]) | put(map, dev_rx[d], dev_rx[e]);
        bad |= put(map, res_nic[nd] + 2 * nic_d, res_nic[ne] + 2 * nic_e) | put(map, res_nic[nd] + 2 * nic_d + 1, res_nic[ne] + 2 * nic_e + 1);
        bad |= put(map, res_isl[nd] + 2 * isl_d, res_isl[ne] + 2 * isl_e) | put(map, res_isl[nd] + 2 * isl_d + 1, res_isl[ne] + 2 * isl_e + 1);
    }
    s->nres = nres;
    s->res_rep = xcalloc((size_t)nres, sizeof *s->res_rep);
    s->res_w = xcalloc((size_t)nres, sizeof *s->res_w);
    for (int q = 0; q < nres && !bad; q++) {
        if (map[q] < 0) { s->res_rep[q] = q; s->res_w[q] = 1; continue; }   /* no device of a rank behind it: unused */
        /* the orbit: follow the map back to q; every member the same capacity */
        int len = 1, lo = q, x = map[q];
        while (x != q && x >= 0 && len <= s->R) {
            if (cap[x] != cap[q]) { bad = 1; break; }
            if (x < lo) lo = x;
            x = map[x];
            len++;
        }
        if (bad || x != q || s->R % len) { bad = 1; break; }
        s->res_rep[q] = lo;
        s->res_w[q] = (double)(s->R / len);
    }
    free(map);
    return bad ? -1 : 0;
}
