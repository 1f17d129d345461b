/* A numeric interpreter of plans, independent of the verifier's symbolic rules: it runs a plan
 * with a toy model (each chunk's weights a vector of IW doubles; each micro-batch a scalar
 * flowing through y = tanh(x * <w, ramp> + 0.1 c); loss y^2/2) and returns the updated master
 * weights, so a test can compare them with the same toy step computed directly. The mutation
 * test uses it as the oracle for "does this plan still compute the same step".
 * Turn semantics as the runtime runs them: post transfers (a send carries its buffer as it is at
 * the start of the turn), compute, deliver, local operations. Header-only, for tests. */
#ifndef WP_PLAN_INTERP_H
#define WP_PLAN_INTERP_H

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "ir/plan.h"
#include "ir/op_table.h"

#define IW 64           /* elements of a chunk's toy weights */
#define ILR 0.1         /* the toy optimizer: w -= ILR * grad */

static double interp_init(int c, int i) { return 0.3 + 0.05 * c + 0.01 * ((i * 7 + c) % 13); }
/* Tied embeddings over C > 1 chunks (runtime/common/config.h, wp_chunk_mirrors_embedding): the toy's
 * last chunk mirrors chunk 0, starting from its weights, and TIE gives both the sum of their
 * gradients, so the two stay equal. */
static int interp_tied(const Plan *p) { return p->model.tied && p->nchunks > 1; }
static double interp_chunk_init(int C, int tied, int c, int i) { return interp_init(tied && c == C - 1 ? 0 : c, i); }
static double interp_data(int g) { return 0.2 + 0.013 * g; }
static double interp_ramp(int i) { return (1.0 + i % 5) / IW; }
static double interp_dot(const double *w) {
    double s = 0;
    for (int i = 0; i < IW; i++) s += w[i] * interp_ramp(i);
    return s;
}

/* The step computed directly: out[c] = chunk c's weights after one update over M micro-batches
 * (tied: chunk 0's and chunk C - 1's gradients summed, interp_chunk_init). */
static void interp_reference_tied(int C, int M, int tied, double (*out)[IW]) {
    double (*w)[IW] = malloc((size_t)C * sizeof *w), (*d)[IW] = calloc((size_t)C, sizeof *d);
    double *xs = malloc((size_t)(C + 1) * sizeof *xs);
    for (int c = 0; c < C; c++) for (int i = 0; i < IW; i++) w[c][i] = interp_chunk_init(C, tied, c, i);
    for (int g = 0; g < M; g++) {
        xs[0] = interp_data(g);
        for (int c = 0; c < C; c++) xs[c + 1] = tanh(xs[c] * interp_dot(w[c]) + 0.1 * c);
        double gy = xs[C];
        for (int c = C - 1; c >= 0; c--) {
            double y = xs[c + 1], dz = gy * (1 - y * y);
            for (int i = 0; i < IW; i++) d[c][i] += dz * xs[c] * interp_ramp(i);
            gy = dz * interp_dot(w[c]);
        }
    }
    if (tied && C > 1)
        for (int i = 0; i < IW; i++) d[0][i] = d[C - 1][i] = d[0][i] + d[C - 1][i];
    for (int c = 0; c < C; c++) for (int i = 0; i < IW; i++) out[c][i] = w[c][i] - ILR * d[c][i];
    free(w); free(d); free(xs);
}
static inline void interp_reference(int C, int M, double (*out)[IW]) { interp_reference_tied(C, M, 0, out); }

typedef struct IVec { double v[IW]; } IVec;
/* What a rank keeps: 1 activation (y: chunk's input), 2 its gradient (gy), 3 stash, 4 B-pass stash. */
typedef struct IKeep { int kind, chunk, mb; double x, y, gy; } IKeep;

typedef struct IRank {
    IVec *bufs;
    IKeep *keep; int nkeep, capkeep;
    int turn, posted;
} IRank;

static IKeep *ikeep_find(IRank *r, int kind, int chunk, int mb) {
    for (int i = 0; i < r->nkeep; i++)
        if (r->keep[i].kind == kind && r->keep[i].chunk == chunk && r->keep[i].mb == mb) return &r->keep[i];
    return NULL;
}
static void ikeep_put(IRank *r, IKeep k) {
    if (r->nkeep == r->capkeep) {
        r->capkeep = r->capkeep ? 2 * r->capkeep : 16;
        r->keep = realloc(r->keep, (size_t)r->capkeep * sizeof *r->keep);
    }
    r->keep[r->nkeep++] = k;
}
static int ikeep_take(IRank *r, int kind, int chunk, int mb, IKeep *out) {
    IKeep *k = ikeep_find(r, kind, chunk, mb);
    if (!k) return 0;
    *out = *k;
    *k = r->keep[--r->nkeep];
    return 1;
}

static void shard_range(int s, int n, int *lo, int *hi) {
    if (n < 1) n = 1;
    *lo = s * IW / n; *hi = (s + 1) * IW / n;
}

static int is_coll(int k) { return op_table[k].coll != COLL_NONE; }

/* Runs the plan and compares every master (every replica's, every shard) with ref[c], the step
 * computed directly: *maxdiff gets the largest difference. 0, or -1 when the plan cannot run
 * (a missing value, or no progress). */
static int interp_run(const Plan *p, double (*ref)[IW], double *maxdiff) {
    int n = p->nranks, rc = 0;
    *maxdiff = 0;
    IRank *R = calloc((size_t)n, sizeof *R);
    IVec **snap = calloc((size_t)n, sizeof *snap);     /* [rank][op]: what a send/collective carries */
    int **match = calloc((size_t)n, sizeof *match);    /* [rank][op]: RECV: sender rank*2^20+op; collective: call index */
    for (int r = 0; r < n; r++) {
        const PlanRank *rk = &p->ranks[r];
        R[r].bufs = calloc((size_t)rk->nbufs + 1, sizeof(IVec));
        snap[r] = calloc((size_t)rk->nops + 1, sizeof(IVec));
        match[r] = malloc(((size_t)rk->nops + 1) * sizeof(int));
        for (int i = 0; i <= rk->nops; i++) match[r][i] = -1;
        for (int b = 0; b < rk->nbufs; b++)
            if (rk->bufs[b].master)
                for (int i = 0; i < IW; i++) R[r].bufs[b].v[i] = interp_chunk_init(p->nchunks, interp_tied(p), rk->bufs[b].chunk, i);
    }
    /* Precompute who meets whom: the k-th send a->b with the k-th receive at b from a; the k-th
     * call of each member of a group. */
    int *sent = calloc((size_t)n * n, sizeof(int)), *recvd = calloc((size_t)n * n, sizeof(int));
    int **send_ops = calloc((size_t)n * n, sizeof *send_ops);
    int ng = p->ngroups;
    int **calls = calloc((size_t)ng + 1, sizeof *calls);    /* [g][k * members + m] = rank*2^20 + op */
    int *ncalls = calloc((size_t)ng + 1, sizeof(int)), *cap = calloc((size_t)ng + 1, sizeof(int));
    int **callk = calloc((size_t)ng + 1, sizeof *callk);    /* [g][m] = next call index of member m */
    for (int g = 0; g < ng; g++) callk[g] = calloc((size_t)p->groups[g].n, sizeof(int));
    for (int r = 0; r < n; r++)
        for (int i = 0; i < p->ranks[r].nops; i++) {
            const Op *op = &p->ranks[r].ops[i];
            if (op->kind == OP_SEND) {
                int *k = &sent[r * n + op->peer];
                send_ops[r * n + op->peer] = realloc(send_ops[r * n + op->peer], (size_t)(*k + 1) * sizeof(int));
                send_ops[r * n + op->peer][(*k)++] = i;
            } else if (is_coll(op->kind)) {
                const PlanGroup *g = &p->groups[op->group];
                int m = 0;
                while (g->ranks[m] != r) m++;
                int k = callk[op->group][m]++;
                if (k >= ncalls[op->group]) {
                    ncalls[op->group] = k + 1;
                    if (k + 1 > cap[op->group]) {
                        cap[op->group] = 2 * (k + 1);
                        calls[op->group] = realloc(calls[op->group], (size_t)cap[op->group] * g->n * sizeof(int));
                    }
                }
                calls[op->group][k * g->n + m] = r << 20 | i;
                match[r][i] = k;
            }
        }
    for (int r = 0; r < n; r++)
        for (int i = 0; i < p->ranks[r].nops; i++) {
            const Op *op = &p->ranks[r].ops[i];
            if (op->kind != OP_RECV) continue;
            int k = recvd[op->peer * n + r]++;
            if (k >= sent[op->peer * n + r]) { rc = -1; break; }
            int j = send_ops[op->peer * n + r][k];
            match[r][i] = op->peer << 20 | j;
            match[op->peer][j] = r << 20 | i;     /* and the send knows its receive */
        }
    /* the turn in which each op is, for readiness checks */
    int **turn_of = calloc((size_t)n, sizeof *turn_of);
    for (int r = 0; r < n; r++) {
        turn_of[r] = calloc((size_t)p->ranks[r].nops + 1, sizeof(int));
        for (int t = 0; t < p->nturns; t++)
            for (int i = p->ranks[r].turn_start[t]; i < p->ranks[r].turn_start[t + 1]; i++) turn_of[r][i] = t;
    }
#define POSTED(q, op) (R[q].turn > turn_of[q][op] || (R[q].turn == turn_of[q][op] && R[q].posted))
    for (int progress = 1, left = n; rc == 0 && left > 0 && progress;) {
        progress = 0;
        left = 0;
        for (int r = 0; r < n && rc == 0; r++) {
            const PlanRank *rk = &p->ranks[r];
            IRank *me = &R[r];
            while (me->turn < p->nturns && rc == 0) {
                int t = me->turn, t0 = rk->turn_start[t], t1 = rk->turn_start[t + 1];
                if (!me->posted) {
                    for (int i = t0; i < t1; i++) {
                        const Op *op = &rk->ops[i];
                        if (op->kind != OP_SEND && !is_coll(op->kind)) continue;
                        if (op->what == WHAT_A || op->what == WHAT_G) {
                            IKeep *k = ikeep_find(me, op->what == WHAT_A ? 1 : 2, op->chunk, op->mb);
                            if (!k) { rc = -1; break; }
                            snap[r][i].v[0] = op->what == WHAT_A ? k->y : k->gy;
                        } else if (op->buf >= 0) snap[r][i] = me->bufs[op->buf];
                    }
                    me->posted = 1;
                }
                int ready = rc == 0;
                for (int i = t0; i < t1 && ready; i++) {
                    const Op *op = &rk->ops[i];
                    if (op->kind == OP_RECV) {
                        if (match[r][i] < 0) { rc = -1; ready = 0; }
                        else ready = POSTED(match[r][i] >> 20, match[r][i] & 0xfffff);
                    }
                    else if (is_coll(op->kind)) {
                        const PlanGroup *g = &p->groups[op->group];
                        for (int m = 0; m < g->n && ready; m++) {
                            int x = calls[op->group][match[r][i] * g->n + m];
                            ready = POSTED(x >> 20, x & 0xfffff);
                        }
                    }
                }
                /* a send must be met too before the turn ends */
                for (int i = t0; i < t1 && ready; i++) {
                    const Op *op = &rk->ops[i];
                    if (op->kind != OP_SEND) continue;
                    int x = match[r][i];
                    if (x < 0) { rc = -1; ready = 0; }   /* a send nobody receives */
                    else ready = POSTED(x >> 20, x & 0xfffff);
                }
                if (!ready) break;
                /* compute */
                for (int i = t0; i < t1 && rc == 0; i++) {
                    const Op *op = &rk->ops[i];
                    const OpNote *no = &rk->notes[i];
                    int c = op->chunk, last = c == p->nchunks - 1;
                    IKeep st, gk;
                    if (op->kind == OP_FWD) {
                        double x;
                        if (c == 0) x = interp_data(op->mb);
                        else if (ikeep_take(me, 1, c, op->mb, &gk)) x = gk.y;
                        else { rc = -1; break; }
                        double y = tanh(x * interp_dot(me->bufs[op->buf].v) + 0.1 * c);
                        ikeep_put(me, (IKeep){ 3, c, op->mb, x, y, 0 });
                        if (!last) ikeep_put(me, (IKeep){ 1, c + 1, op->mb, 0, y, 0 });
                    } else if (op->kind == OP_BWD || op->kind == OP_BWD_B) {
                        if (!ikeep_take(me, 3, c, op->mb, &st)) { rc = -1; break; }
                        double gy = st.y;
                        if (!last) {
                            if (!ikeep_take(me, 2, c + 1, op->mb, &gk)) { rc = -1; break; }
                            gy = gk.gy;
                        }
                        double dz = gy * (1 - st.y * st.y);
                        if (c > 0) ikeep_put(me, (IKeep){ 2, c, op->mb, 0, 0, dz * interp_dot(me->bufs[op->buf].v) });
                        if (op->kind == OP_BWD_B) { ikeep_put(me, (IKeep){ 4, c, op->mb, st.x, st.y, dz }); continue; }
                        double *d = me->bufs[op->buf2].v;
                        for (int e = 0; e < IW; e++) d[e] = (no->first ? 0 : d[e]) + dz * st.x * interp_ramp(e);
                    } else if (op->kind == OP_BWD_W) {
                        if (!ikeep_take(me, 4, c, op->mb, &st)) { rc = -1; break; }
                        double *d = me->bufs[op->buf2].v;
                        for (int e = 0; e < IW; e++) d[e] = (no->first ? 0 : d[e]) + st.gy * st.x * interp_ramp(e);
                    }
                    /* a RING (context parallelism) changes no value of the toy: it moves K/V blocks among the
                     * members of a group, which this interpreter runs as the one rank they stand for */
                }
                /* deliver */
                for (int i = t0; i < t1 && rc == 0; i++) {
                    const Op *op = &rk->ops[i];
                    const OpNote *no = &rk->notes[i];
                    int lo, hi;
                    shard_range(no->shard, no->nshards, &lo, &hi);
                    if (op->kind == OP_RECV) {
                        const IVec *v = &snap[match[r][i] >> 20][match[r][i] & 0xfffff];
                        if (op->what == WHAT_A || op->what == WHAT_G)
                            ikeep_put(me, (IKeep){ op->what == WHAT_A ? 1 : 2, op->chunk, op->mb, 0, v->v[0], v->v[0] });
                        else memcpy(me->bufs[op->buf].v + lo, v->v + lo, (size_t)(hi - lo) * sizeof(double));
                    } else if (op->kind == OP_SEND && (op->what == WHAT_A || op->what == WHAT_G)) {
                        if (!ikeep_take(me, op->what == WHAT_A ? 1 : 2, op->chunk, op->mb, &(IKeep){ 0 })) rc = -1;
                    } else if (is_coll(op->kind)) {
                        const PlanGroup *g = &p->groups[op->group];
                        int my = 0;
                        while (g->ranks[my] != r) my++;
                        IVec sum = { { 0 } };
                        for (int m = 0; m < g->n; m++) {
                            int x = calls[op->group][match[r][i] * g->n + m];
                            const IVec *v = &snap[x >> 20][x & 0xfffff];
                            if (op->kind == OP_BCAST && g->ranks[m] == op->peer) sum = *v;
                            if (op->kind == OP_REDUCE || op->kind == OP_ALLREDUCE || op->kind == OP_REDUCE_SCATTER ||
                                op->kind == OP_TIE_ALLREDUCE)   /* the toy's mirror is all embedding: its whole vector */
                                for (int e = 0; e < IW; e++) sum.v[e] += v->v[e];
                            if (op->kind == OP_ALLGATHER) {
                                int a, b;
                                shard_range(m, g->n, &a, &b);
                                memcpy(sum.v + a, v->v + a, (size_t)(b - a) * sizeof(double));
                            }
                        }
                        double *dst = NULL;
                        if (op->kind == OP_BCAST && op->peer != r) dst = me->bufs[op->buf].v;
                        if ((op->kind == OP_REDUCE && op->peer == r) || op->kind == OP_ALLREDUCE || op->kind == OP_TIE_ALLREDUCE)
                            dst = me->bufs[op->buf].v;
                        if (op->kind == OP_ALLGATHER) { dst = me->bufs[op->buf2].v; lo = 0; hi = IW; }
                        if (op->kind == OP_REDUCE_SCATTER) { dst = me->bufs[op->buf2].v; shard_range(my, g->n, &lo, &hi); }
                        if (dst) memcpy(dst + lo, sum.v + lo, (size_t)(hi - lo) * sizeof(double));
                    }
                }
                /* local operations */
                for (int i = t0; i < t1 && rc == 0; i++) {
                    const Op *op = &rk->ops[i];
                    const OpNote *no = &rk->notes[i];
                    double *a = op->buf >= 0 ? me->bufs[op->buf].v : NULL, *b = op->buf2 >= 0 ? me->bufs[op->buf2].v : NULL;
                    if (op->kind == OP_OPT) {
                        int lo, hi;
                        shard_range(rk->bufs[op->buf].shard, rk->bufs[op->buf].nshards, &lo, &hi);
                        for (int e = lo; e < hi; e++) a[e] -= ILR * b[e];
                    } else if (op->kind == OP_ACC) {
                        for (int e = 0; e < IW; e++) a[e] = (no->first ? 0 : a[e]) + b[e];
                    } else if (op->kind == OP_COPY) {
                        memcpy(a, b, sizeof(double) * IW);
                    } else if (op->kind == OP_TIE) {
                        for (int e = 0; e < IW; e++) a[e] = b[e] = a[e] + b[e];
                    }
                }
                me->turn++;
                me->posted = 0;
                progress = 1;
            }
            if (me->turn < p->nturns) left++;
        }
        if (rc == 0 && left > 0 && !progress) rc = -1;
    }
#undef POSTED
    if (rc == 0)
        for (int r = 0; r < n; r++)
            for (int b = 0; b < p->ranks[r].nbufs; b++) {
                const PlanBuf *pb = &p->ranks[r].bufs[b];
                if (!pb->master) continue;
                int lo, hi;
                shard_range(pb->shard, pb->nshards, &lo, &hi);
                for (int e = lo; e < hi; e++) {
                    double d = fabs(ref[pb->chunk][e] - R[r].bufs[b].v[e]);
                    if (!(d <= *maxdiff)) *maxdiff = d;   /* NaN counts as different */
                }
            }
    for (int r = 0; r < n; r++) { free(R[r].bufs); free(R[r].keep); free(snap[r]); free(match[r]); free(turn_of[r]); }
    for (int i = 0; i < n * n; i++) free(send_ops[i]);
    for (int g = 0; g < ng; g++) { free(calls[g]); free(callk[g]); }
    free(R); free(snap); free(match); free(turn_of); free(sent); free(recvd); free(send_ops);
    free(calls); free(ncalls); free(cap); free(callk);
    return rc;
}

#endif
