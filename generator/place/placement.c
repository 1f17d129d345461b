/* The placement solver (see placement.h): groups, ring order, staging ranks and owners,
 * chosen to minimise the bytes on the slowest links. Small search: every grouping the topology
 * offers (nodes; PCIe islands), every ring order of up to 6 groups (else node order), a greedy
 * assignment of owners (largest chunks first, to the least loaded rank, ties to the group that
 * keeps the busiest NIC lowest), then local search (move one chunk's owner, change one group's
 * staging rank) while the cost improves. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "place/placement.h"
#include "util/xalloc.h"

typedef struct Ctx {
    const PlacementIn *in;
    int nnodes;
    int *node, *island;         /* [n] */
    int *gof;                   /* [n] group (ring position) of each rank, for the placement being costed */
    double *nin, *nout;         /* [nnodes] NIC bytes */
    double *owned;              /* [n] */
    long evaluated;
} Ctx;

static void edge(Ctx *x, int a, int b, double bytes, PlacementCost *c) {
    if (x->node[a] != x->node[b]) {
        c->bytes[LC_NET] += bytes;
        x->nout[x->node[a]] += bytes;
        x->nin[x->node[b]] += bytes;
    } else if (x->island[a] != x->island[b]) c->bytes[LC_XI] += bytes;
    else c->bytes[LC_IN] += bytes;
}

/* A broadcast or reduce over group g rooted at rank root: n-1 hops in member order from the
 * root (traffic.c counts collectives the same way). */
static void chain(Ctx *x, const Placement *pl, int g, int root, double bytes, PlacementCost *c) {
    const int *m = pl->members + pl->group_start[g];
    int n = pl->group_start[g + 1] - pl->group_start[g], r0 = 0;
    while (m[r0] != root) r0++;
    for (int h = 0; h < n - 1; h++) edge(x, m[(r0 + h) % n], m[(r0 + h + 1) % n], bytes, c);
}

static int rounds_of(const PlacementIn *in) { return in->rounds > 1 && in->nchunks > 1 ? in->rounds : 1; }

/* How often a chunk's weights come to a group in one step: with K rounds, chunk 0 K+1 times
 * (its backward of round j shares a turn with its forward of round j+1), the last chunk K times
 * (its forward and backward share a turn), the others 2K times; a lone chunk once. */
static int uses_of(const PlacementIn *in, int k) {
    int C = in->nchunks, K = rounds_of(in);
    if (C == 1) return 1;
    return k == 0 ? K + 1 : k == C - 1 ? K : 2 * K;
}

static void cost_ctx(Ctx *x, const Placement *pl, PlacementCost *c) {
    const PlacementIn *in = x->in;
    int C = in->nchunks, D = pl->ngroups;
    memset(c, 0, sizeof *c);
    memset(x->nin, 0, (size_t)x->nnodes * sizeof(double));
    memset(x->nout, 0, (size_t)x->nnodes * sizeof(double));
    memset(x->owned, 0, (size_t)in->n * sizeof(double));
    for (int g = 0; g < D; g++)
        for (int i = pl->group_start[g]; i < pl->group_start[g + 1]; i++) x->gof[pl->members[i]] = g;
    double ww = in->weight_wire > 0 ? in->weight_wire : 1, gw = in->grad_wire > 0 ? in->grad_wire : 1;
    for (int k = 0; k < C; k++) {
        double b = in->chunk_bytes[k], wb = ww * b, gb = gw * b;
        int o = pl->owner[k], j0 = x->gof[o];
        x->owned[o] += b;
        int passes = uses_of(in, k), K = rounds_of(in);
        for (int j = 0; j < D; j++) {
            int root = o;
            if (j != j0) {
                int sender = (j == 0 || j - 1 == j0) ? o : pl->staging[j - 1];
                root = pl->staging[j];
                edge(x, sender, root, passes * wb, c);
            }
            chain(x, pl, j, root, passes * wb, c);
            /* the gradient, every round: reduced to the root, sent on to the owner */
            chain(x, pl, j, root, K * gb, c);
            if (j != j0) edge(x, root, o, K * gb, c);
        }
    }
    for (int v = 0; v < x->nnodes; v++) {
        if (x->nin[v] > c->nic_max) c->nic_max = x->nin[v];
        if (x->nout[v] > c->nic_max) c->nic_max = x->nout[v];
    }
    for (int r = 0; r < in->n; r++)
        if (x->owned[r] > c->owner_max) c->owner_max = x->owned[r];
    x->evaluated++;
}

int placement_cost_cmp(const PlacementCost *a, const PlacementCost *b) {
    double ka[] = { a->bytes[LC_NET], a->owner_max, a->nic_max, a->bytes[LC_XI], a->bytes[LC_IN] };
    double kb[] = { b->bytes[LC_NET], b->owner_max, b->nic_max, b->bytes[LC_XI], b->bytes[LC_IN] };
    for (int i = 0; i < 5; i++) {
        if (ka[i] < kb[i]) return -1;
        if (ka[i] > kb[i]) return 1;
    }
    return 0;
}

static int ctx_init(Ctx *x, const PlacementIn *in) {
    memset(x, 0, sizeof *x);
    x->in = in;
    x->nnodes = in->topo->nnodes;
    x->node = xmalloc((size_t)in->n * sizeof(int));
    x->island = xmalloc((size_t)in->n * sizeof(int));
    x->gof = xmalloc((size_t)in->n * sizeof(int));
    x->owned = xmalloc((size_t)in->n * sizeof(double));
    x->nin = xcalloc((size_t)x->nnodes, sizeof(double));
    x->nout = xcalloc((size_t)x->nnodes, sizeof(double));
    if (!x->node || !x->island || !x->gof || !x->owned || !x->nin || !x->nout) return -1;
    for (int i = 0; i < in->n; i++) {
        int d = in->devices[i], v = topology_node_of(in->topo, d);
        if (v < 0) return -1;
        const Node *nd = &in->topo->nodes[v];
        int per = nd->ndevices / (nd->islands > 0 ? nd->islands : 1);
        x->node[i] = v;
        x->island[i] = (d - nd->first_device) / (per > 0 ? per : 1);
    }
    return 0;
}

static void ctx_free(Ctx *x) {
    free(x->node); free(x->island); free(x->gof); free(x->owned); free(x->nin); free(x->nout);
}

static void pl_alloc(Placement *pl, int n, int C) {
    memset(pl, 0, sizeof *pl);
    pl->group_start = xcalloc((size_t)n + 1, sizeof(int));
    pl->members = xcalloc((size_t)n, sizeof(int));
    pl->staging = xcalloc((size_t)n, sizeof(int));
    pl->owner = xcalloc((size_t)C + 1, sizeof(int));
}

void placement_free(Placement *p) {
    free(p->group_start); free(p->members); free(p->staging); free(p->owner);
    memset(p, 0, sizeof *p);
}

static void pl_copy(Placement *dst, const Placement *src, int n, int C) {
    dst->ngroups = src->ngroups; dst->by_island = src->by_island;
    memcpy(dst->group_start, src->group_start, ((size_t)n + 1) * sizeof(int));
    memcpy(dst->members, src->members, (size_t)n * sizeof(int));
    memcpy(dst->staging, src->staging, (size_t)n * sizeof(int));
    memcpy(dst->owner, src->owner, (size_t)C * sizeof(int));
    dst->cost = src->cost;
}

/* The groups of a grouping, in order of their first rank: lists of rank indices. */
static int make_groups(const Ctx *x, int by_island, int *gstart, int *members) {
    int n = x->in->n, D = 0, k = 0;
    int *key = xmalloc((size_t)n * sizeof(int)), *seen = xmalloc((size_t)n * sizeof(int));
    for (int i = 0; i < n; i++) key[i] = x->node[i] * 4096 + (by_island ? x->island[i] : 0);
    for (int i = 0; i < n; i++) {
        int j = 0;
        while (j < D && seen[j] != key[i]) j++;
        if (j == D) seen[D++] = key[i];
    }
    for (int g = 0; g < D; g++) {
        gstart[g] = k;
        for (int i = 0; i < n; i++) if (key[i] == seen[g]) members[k++] = i;
    }
    gstart[D] = k;
    free(key); free(seen);
    return D;
}

/* Lays out groups (given as base lists) in ring order perm into pl. */
static void apply_order(Placement *pl, int D, const int *gstart, const int *members, const int *perm) {
    int k = 0;
    pl->ngroups = D;
    for (int j = 0; j < D; j++) {
        pl->group_start[j] = k;
        for (int i = gstart[perm[j]]; i < gstart[perm[j] + 1]; i++) pl->members[k++] = members[i];
    }
    pl->group_start[D] = k;
}

/* Greedy owners and staging ranks for the groups in pl, then its cost. */
static void greedy(Ctx *x, Placement *pl) {
    const PlacementIn *in = x->in;
    int C = in->nchunks, D = pl->ngroups, n = in->n;
    int *order = xmalloc((size_t)C * sizeof(int));
    double *gown = xcalloc((size_t)D, sizeof(double)), *rown = xcalloc((size_t)n, sizeof(double));
    double *nic = xcalloc((size_t)x->nnodes * 2, sizeof(double));
    for (int k = 0; k < C; k++) order[k] = k;
    for (int a = 1; a < C; a++)     /* largest chunks first (stable) */
        for (int b = a; b > 0 && in->chunk_bytes[order[b]] > in->chunk_bytes[order[b - 1]]; b--) {
            int t = order[b]; order[b] = order[b - 1]; order[b - 1] = t;
        }
    for (int j = 0; j < D; j++) pl->staging[j] = pl->members[pl->group_start[j]];
    for (int ki = 0; ki < C; ki++) {
        int k = order[ki], best = -1;
        double bnic = 0, bload = 0, b = in->chunk_bytes[k] * rounds_of(in);
        double passes = (double)uses_of(in, k) / rounds_of(in);
        for (int j0 = 0; j0 < D; j0++) {
            /* NIC bytes this chunk adds with its owner in group j0 (node level only) */
            double worst = 0;
            double *add = xcalloc((size_t)x->nnodes * 2, sizeof(double));
            for (int j = 0; j < D; j++) {
                if (j == j0) continue;
                int sg = (j == 0 || j - 1 == j0) ? j0 : j - 1;
                int sn = x->node[pl->members[pl->group_start[sg]]], rn = x->node[pl->members[pl->group_start[j]]];
                if (sn != rn) { add[2 * sn + 1] += passes * b; add[2 * rn] += passes * b; }
                int on = x->node[pl->members[pl->group_start[j0]]];
                if (rn != on) { add[2 * rn + 1] += b; add[2 * on] += b; }
            }
            for (int v = 0; v < 2 * x->nnodes; v++)
                if (nic[v] + add[v] > worst) worst = nic[v] + add[v];
            free(add);
            /* the owner's load: its least loaded member's, with this chunk */
            double load = -1;
            for (int i = pl->group_start[j0]; i < pl->group_start[j0 + 1]; i++)
                if (load < 0 || rown[pl->members[i]] + b < load) load = rown[pl->members[i]] + b;
            if (best < 0 || load < bload || (load == bload && worst < bnic)) { best = j0; bnic = worst; bload = load; }
        }
        /* commit: recompute the NIC bytes for the chosen group */
        for (int j = 0; j < D; j++) {
            if (j == best) continue;
            int sg = (j == 0 || j - 1 == best) ? best : j - 1;
            int sn = x->node[pl->members[pl->group_start[sg]]], rn = x->node[pl->members[pl->group_start[j]]];
            if (sn != rn) { nic[2 * sn + 1] += passes * b; nic[2 * rn] += passes * b; }
            int on = x->node[pl->members[pl->group_start[best]]];
            if (rn != on) { nic[2 * rn + 1] += b; nic[2 * on] += b; }
        }
        gown[best] += b;
        int pick = -1;
        for (int i = pl->group_start[best]; i < pl->group_start[best + 1]; i++) {
            int r = pl->members[i];
            if (pick < 0 || rown[r] < rown[pick]) pick = r;
        }
        rown[pick] += b;
        pl->owner[k] = pick;
    }
    /* staging: the member that owns the least (it holds one more weight buffer) */
    for (int j = 0; j < D; j++) {
        int pick = -1;
        for (int i = pl->group_start[j]; i < pl->group_start[j + 1]; i++) {
            int r = pl->members[i];
            if (pick < 0 || rown[r] < rown[pick]) pick = r;
        }
        pl->staging[j] = pick;
    }
    cost_ctx(x, pl, &pl->cost);
    free(order); free(gown); free(rown); free(nic);
}

/* The bytes one chunk adds (sign +1) or takes away (-1) with its owner o: cost_ctx's terms of
 * chunk k, into bytes[], nin/nout and owned (improve's running sums). Its broadcasts and reduces
 * only in groups g1 and g2 where g1 >= 0: a move of the owner between them changes no other
 * group's (their roots are their staging ranks either way), so those terms would cancel. */
static void chunk_terms(Ctx *x, const Placement *pl, int k, int o, double sign, double *bytes, double *nin, double *nout,
                        double *owned, int g1, int g2) {
    const PlacementIn *in = x->in;
    double ww = in->weight_wire > 0 ? in->weight_wire : 1, gw = in->grad_wire > 0 ? in->grad_wire : 1;
    double b = in->chunk_bytes[k], wb = ww * b, gb = gw * b;
    int j0 = x->gof[o], D = pl->ngroups, passes = uses_of(in, k), K = rounds_of(in);
    owned[o] += sign * b;
#define TERM(a, r, v) do { \
        double v_ = sign * (v); \
        if (x->node[a] != x->node[r]) { bytes[LC_NET] += v_; nout[x->node[a]] += v_; nin[x->node[r]] += v_; } \
        else bytes[x->island[a] != x->island[r] ? LC_XI : LC_IN] += v_; \
    } while (0)
    for (int j = 0; j < D; j++) {
        const int *m = pl->members + pl->group_start[j];
        int root = o, nm = pl->group_start[j + 1] - pl->group_start[j], r0 = 0;
        if (j != j0) {
            int sender = (j == 0 || j - 1 == j0) ? o : pl->staging[j - 1];
            root = pl->staging[j];
            TERM(sender, root, passes * wb);
        }
        if (j != j0) TERM(root, o, K * gb);
        if (g1 >= 0 && j != g1 && j != g2) continue;
        while (m[r0] != root) r0++;
        for (int h = 0; h < nm - 1; h++) TERM(m[(r0 + h) % nm], m[(r0 + h + 1) % nm], passes * wb);
        for (int h = 0; h < nm - 1; h++) TERM(m[(r0 + h) % nm], m[(r0 + h + 1) % nm], K * gb);
    }
#undef TERM
}

/* Whether improve may cost an owner's move from running sums (chunk_terms) instead of walking
 * every chunk again: where every term is a multiple of 1/4 byte and all of them together stay
 * within 2^51 (what a double holds exactly in quarters), every partial sum is exact in any
 * order, so the costs (and the choices) are cost_ctx's to the bit. The terms' total does not
 * depend on the owners or staging ranks: each chunk crosses n - 1 edges per use (a hop into
 * every group but the owner's, then its broadcast) and its gradient n - 1 per round. */
static int sums_exact(const Ctx *x, const Placement *pl) {
    const PlacementIn *in = x->in;
    double ww = in->weight_wire > 0 ? in->weight_wire : 1, gw = in->grad_wire > 0 ? in->grad_wire : 1, total = 0;
    (void)pl;
    if (ww * 4 != (double)(long long)(ww * 4) || gw * 4 != (double)(long long)(gw * 4)) return 0;
    for (int k = 0; k < in->nchunks; k++) {
        double b = in->chunk_bytes[k];
        if (b != (double)(long long)b || b < 0) return 0;
        total += (in->n - 1) * (uses_of(in, k) * ww * b + rounds_of(in) * gw * b) + b;
    }
    return total <= 0x1p51;
}

/* Moves one chunk's owner or one group's staging rank while that lowers the cost, within a
 * budget of work (a cost evaluation walks every chunk over every rank). An owner's move is
 * costed from running sums where they are exact (sums_exact): the same costs, so the same
 * moves, in a chunk's work instead of all of them (50x faster at 128 ranks). */
static void improve(Ctx *x, Placement *pl) {
    const PlacementIn *in = x->in;
    int C = in->nchunks, n = in->n, D = pl->ngroups;
    long budget = 300000000L / ((long)C * n + 1) + 1, spent = 0;
    PlacementCost c;
    int fast = sums_exact(x, pl);
    double bytes[LC__COUNT];
    double *nin = xcalloc((size_t)x->nnodes, sizeof *nin), *nout = xcalloc((size_t)x->nnodes, sizeof *nout);
    double *owned = xcalloc((size_t)n, sizeof *owned);
    for (int round = 0; round < 50 && spent < budget; round++) {
        int better = 0;
        if (fast) {   /* the running sums of the placement as it is (cost_ctx's gof stays: groups do not change) */
            memset(bytes, 0, sizeof bytes);
            memset(nin, 0, (size_t)x->nnodes * sizeof *nin); memset(nout, 0, (size_t)x->nnodes * sizeof *nout);
            memset(owned, 0, (size_t)n * sizeof *owned);
            for (int g = 0; g < D; g++)
                for (int i = pl->group_start[g]; i < pl->group_start[g + 1]; i++) x->gof[pl->members[i]] = g;
            for (int k = 0; k < C; k++) chunk_terms(x, pl, k, pl->owner[k], 1, bytes, nin, nout, owned, -1, -1);
        }
        for (int k = 0; k < C && spent < budget; k++)
            for (int r = 0; r < n && spent < budget; r++) {
                if (r == pl->owner[k]) continue;
                int was = pl->owner[k];
                pl->owner[k] = r;
                int g1 = x->gof[was], g2 = x->gof[r];
                if (fast) {
                    chunk_terms(x, pl, k, was, -1, bytes, nin, nout, owned, g1, g2);
                    chunk_terms(x, pl, k, r, 1, bytes, nin, nout, owned, g1, g2);
                    memset(&c, 0, sizeof c);
                    memcpy(c.bytes, bytes, sizeof bytes);
                    for (int v = 0; v < x->nnodes; v++) {
                        if (nin[v] > c.nic_max) c.nic_max = nin[v];
                        if (nout[v] > c.nic_max) c.nic_max = nout[v];
                    }
                    for (int i = 0; i < n; i++)
                        if (owned[i] > c.owner_max) c.owner_max = owned[i];
                    x->evaluated++;
                } else cost_ctx(x, pl, &c);
                spent++;
                if (placement_cost_cmp(&c, &pl->cost) < 0) { pl->cost = c; better = 1; }
                else {
                    pl->owner[k] = was;
                    if (fast) {
                        chunk_terms(x, pl, k, r, -1, bytes, nin, nout, owned, g1, g2);
                        chunk_terms(x, pl, k, was, 1, bytes, nin, nout, owned, g1, g2);
                    }
                }
            }
        for (int j = 0; j < D && spent < budget; j++)
            for (int i = pl->group_start[j]; i < pl->group_start[j + 1]; i++) {
                int was = pl->staging[j];
                if (pl->members[i] == was) continue;
                pl->staging[j] = pl->members[i];
                cost_ctx(x, pl, &c);
                spent++;
                if (placement_cost_cmp(&c, &pl->cost) < 0) { pl->cost = c; better = 1; }
                else pl->staging[j] = was;
            }
        if (!better) break;
    }
    free(nin); free(nout); free(owned);
}

static int next_perm(int *a, int n) {
    int i = n - 2;
    while (i >= 0 && a[i] >= a[i + 1]) i--;
    if (i < 0) return 0;
    int j = n - 1;
    while (a[j] <= a[i]) j--;
    int t = a[i]; a[i] = a[j]; a[j] = t;
    for (int l = i + 1, r = n - 1; l < r; l++, r--) { t = a[l]; a[l] = a[r]; a[r] = t; }
    return 1;
}

void placement_cost(const PlacementIn *in, const Placement *pl, PlacementCost *c) {
    Ctx x;
    if (ctx_init(&x, in)) { memset(c, 0, sizeof *c); ctx_free(&x); return; }
    cost_ctx(&x, pl, c);
    ctx_free(&x);
}

int placement_solve(const PlacementIn *in, Placement *out, char *err, size_t errlen) {
    int n = in->n, C = in->nchunks;
    if (n < 1 || C < 1) return snprintf(err, errlen, "placement: %d ranks, %d chunks", n, C), -1;
    Ctx x;
    if (ctx_init(&x, in)) { ctx_free(&x); return snprintf(err, errlen, "placement: a device is not in the topology"), -1; }
    int *gstart = xmalloc(((size_t)n + 1) * sizeof(int)), *members = xmalloc((size_t)n * sizeof(int));
    int *perm = xcalloc((size_t)n + 1, sizeof(int));
    Placement cand, best;
    pl_alloc(&cand, n, C);
    pl_alloc(&best, n, C);
    int have = 0;

    /* the published layout */
    int D = make_groups(&x, 0, gstart, members);
    for (int j = 0; j < D; j++) perm[j] = j;
    apply_order(&cand, D, gstart, members, perm);
    for (int j = 0; j < D; j++) cand.staging[j] = cand.members[cand.group_start[j]];
    for (int k = 0; k < C; k++) {
        int g = k % D, size = cand.group_start[g + 1] - cand.group_start[g];
        cand.owner[k] = cand.members[cand.group_start[g] + (k / D) % size];
    }
    cost_ctx(&x, &cand, &cand.cost);
    PlacementCost published = cand.cost;
    if (in->mode == PLACE_PUBLISHED) { pl_copy(&best, &cand, n, C); have = 1; }

    int any_islands = 0;
    for (int i = 0; i < n; i++) any_islands |= x.island[i] != 0;
    int try_node = in->mode != PLACE_ISLAND || !any_islands, try_island = any_islands && in->mode != PLACE_NODE;
    for (int by_island = 0; by_island <= 1 && in->mode != PLACE_PUBLISHED; by_island++) {
        if (by_island ? !try_island : !try_node) continue;
        D = make_groups(&x, by_island, gstart, members);
        for (int j = 0; j < D; j++) perm[j] = j;
        Placement bo;
        pl_alloc(&bo, n, C);
        int have_o = 0;
        do {
            apply_order(&cand, D, gstart, members, perm);
            cand.by_island = by_island;
            greedy(&x, &cand);
            if (!have_o || placement_cost_cmp(&cand.cost, &bo.cost) < 0) { pl_copy(&bo, &cand, n, C); have_o = 1; }
        } while (D <= 6 && next_perm(perm, D));
        improve(&x, &bo);
        if (!have || placement_cost_cmp(&bo.cost, &best.cost) < 0) { pl_copy(&best, &bo, n, C); have = 1; }
        placement_free(&bo);
    }
    placement_free(&cand);
    best.published = published;
    best.evaluated = x.evaluated;
    *out = best;
    free(gstart); free(members); free(perm);
    ctx_free(&x);
    return 0;
}

/* ---- the Lua binding: plan:solve_placement({ranks...}, mode, rounds) ----
 * ranks: the global ranks of one pipeline; mode: "auto" (default), "node", "island" or
 * "published"; rounds: the micro-batch rounds per step the bytes are counted for (default 1). Returns { groups = {{rank, ...}, ...} (ring order, members in rank order),
 * staging = {rank per group}, owner = {[chunk] = rank} (0-based chunks), by_island = bool,
 * cost = {...}, published = {...}, evaluated = N }, the costs as { net, xi, intra, nic_max,
 * owner_max } in bytes per step. Registered in strategy.c's plan methods. */
#include <lua.h>
#include <lauxlib.h>
#include "ir/plan.h"

static void push_cost(lua_State *L, const PlacementCost *c) {
    lua_createtable(L, 0, 5);
    lua_pushnumber(L, c->bytes[LC_NET]); lua_setfield(L, -2, "net");
    lua_pushnumber(L, c->bytes[LC_XI]); lua_setfield(L, -2, "xi");
    lua_pushnumber(L, c->bytes[LC_IN]); lua_setfield(L, -2, "intra");
    lua_pushnumber(L, c->nic_max); lua_setfield(L, -2, "nic_max");
    lua_pushnumber(L, c->owner_max); lua_setfield(L, -2, "owner_max");
}

int placement_lua_solve(lua_State *L) {
    Plan *p = *(Plan **)luaL_checkudata(L, 1, "wpgen.plan");
    luaL_checktype(L, 2, LUA_TTABLE);
    const char *mode = luaL_optstring(L, 3, "auto");
    PlacementIn in = { .topo = p->topo, .nchunks = p->nchunks };
    if (!strcmp(mode, "auto")) in.mode = PLACE_AUTO;
    else if (!strcmp(mode, "node")) in.mode = PLACE_NODE;
    else if (!strcmp(mode, "island")) in.mode = PLACE_ISLAND;
    else if (!strcmp(mode, "published")) in.mode = PLACE_PUBLISHED;
    else return luaL_error(L, "solve_placement: mode \"%s\": expected auto, node, island or published", mode);
    if (p->nchunks < 1) return luaL_error(L, "solve_placement: set the chunks first");
    lua_Integer rounds = luaL_optinteger(L, 4, 1);
    if (rounds < 0 || rounds > (1 << 20)) return luaL_error(L, "solve_placement: rounds %I: expected 0 to 2^20", rounds);
    in.rounds = (int)rounds;
    /* Every check that can raise a Lua error (which longjmps past any free) comes before the
     * allocations: a rank that is not an integer, or not one of the plan's. Raw access: no
     * metamethod can raise an error or answer differently the second time. */
    lua_Integer len = (lua_Integer)lua_rawlen(L, 2);
    if (len < 1 || len > p->nranks) return luaL_error(L, "solve_placement: %I ranks: expected 1 to %d", len, p->nranks);
    int n = (int)len;
    for (int i = 0; i < n; i++) {
        int isint = 0;
        lua_rawgeti(L, 2, i + 1);
        lua_Integer r = lua_tointegerx(L, -1, &isint);
        lua_pop(L, 1);
        if (!isint) return luaL_error(L, "solve_placement: ranks[%d]: expected an integer", i + 1);
        if (r < 0 || r >= p->nranks) return luaL_error(L, "solve_placement: no rank %I (the plan has %d)", r, p->nranks);
    }
    int *ranks = xmalloc((size_t)n * sizeof(int)), *dev = xmalloc((size_t)n * sizeof(int));
    double *cb = xmalloc((size_t)p->nchunks * sizeof(double));
    for (int i = 0; i < n; i++) {
        lua_rawgeti(L, 2, i + 1);
        ranks[i] = (int)lua_tointeger(L, -1);
        lua_pop(L, 1);
        dev[i] = p->ranks[ranks[i]].device;
    }
    for (int c = 0; c < p->nchunks; c++) cb[c] = (double)plan_chunk_bytes(p, c);
    in.n = n; in.devices = dev; in.chunk_bytes = cb;
    /* the bytes a transfer carries at the plan's formats (ir/plan.h) */
    in.weight_wire = (double)plan_carried_bytes(p, WHAT_W, 0, 1) / (double)plan_chunk_bytes(p, 0);
    in.grad_wire = (double)plan_carried_bytes(p, WHAT_D, 0, 1) / (double)plan_chunk_bytes(p, 0);
    Placement pl;
    char err[256];
    if (placement_solve(&in, &pl, err, sizeof err)) { free(ranks); free(dev); free(cb); return luaL_error(L, "%s", err); }
    lua_createtable(L, 0, 7);
    lua_createtable(L, pl.ngroups, 0);
    for (int g = 0; g < pl.ngroups; g++) {
        lua_createtable(L, pl.group_start[g + 1] - pl.group_start[g], 0);
        for (int i = pl.group_start[g]; i < pl.group_start[g + 1]; i++) {
            lua_pushinteger(L, ranks[pl.members[i]]);
            lua_seti(L, -2, i - pl.group_start[g] + 1);
        }
        lua_seti(L, -2, g + 1);
    }
    lua_setfield(L, -2, "groups");
    lua_createtable(L, pl.ngroups, 0);
    for (int g = 0; g < pl.ngroups; g++) { lua_pushinteger(L, ranks[pl.staging[g]]); lua_seti(L, -2, g + 1); }
    lua_setfield(L, -2, "staging");
    lua_createtable(L, p->nchunks, 1);
    for (int c = 0; c < p->nchunks; c++) { lua_pushinteger(L, ranks[pl.owner[c]]); lua_seti(L, -2, c); }
    lua_setfield(L, -2, "owner");
    lua_pushboolean(L, pl.by_island); lua_setfield(L, -2, "by_island");
    push_cost(L, &pl.cost); lua_setfield(L, -2, "cost");
    push_cost(L, &pl.published); lua_setfield(L, -2, "published");
    lua_pushinteger(L, pl.evaluated); lua_setfield(L, -2, "evaluated");
    /* what the strategy needs to size its rounds to the memory (as verify.c accounts it):
     * mem = { device = the smallest device memory of these ranks, workspace, act = one
     * activation, chunk = {[c] = weight bytes}, stash = {[c] = what backward keeps per micro-batch} } */
    const WpConfig *m = &p->model;
    double device = 0;
    for (int i = 0; i < n; i++) {
        const Node *nd = &p->topo->nodes[p->ranks[ranks[i]].node];
        double b = p->topo->types[nd->type].mem_bytes;
        if (i == 0 || b < device) device = b;
    }
    lua_createtable(L, 0, 5);
    lua_pushnumber(L, device); lua_setfield(L, -2, "device");
    lua_pushnumber(L, (double)plan_workspace_bytes(p, NULL, 1));   /* the ring's part too: it holds a RING wherever cp > 1 */
    lua_setfield(L, -2, "workspace");
    lua_pushnumber(L, (double)plan_act_bytes(p)); lua_setfield(L, -2, "act");
    lua_createtable(L, p->nchunks, 1);
    for (int c = 0; c < p->nchunks; c++) { lua_pushnumber(L, cb[c]); lua_seti(L, -2, c); }
    lua_setfield(L, -2, "chunk");
    lua_createtable(L, p->nchunks, 1);
    for (int c = 0; c < p->nchunks; c++) {
        const PlanChunk *ch = &p->chunks[c];
        WpChunk k = wp_chunk_make(m, c, ch->layer0, ch->nlayers, c == 0, c == p->nchunks - 1);
        lua_pushnumber(L, (double)wp_stash_bytes(m, &k, p->recompute, p->precision));
        lua_seti(L, -2, c);
    }
    lua_setfield(L, -2, "stash");
    lua_setfield(L, -2, "mem");
    placement_free(&pl);
    free(ranks); free(dev); free(cb);
    return 1;
}
