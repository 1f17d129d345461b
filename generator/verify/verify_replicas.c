/* The verifier on replicas that are copies of one pipeline: each distinct replica shape executed
 * once. When every rank of replica q does what the rank of replica 0 at its stage does (the same
 * operations on the same buffers, its peers and groups those of replica 0 moved to replica q, its
 * micro-batches renamed by a one-to-one map pi_q), replica q's symbolic execution is replica 0's
 * renamed, so it passes or fails with it. Only replica 0 is executed; the all-reduce across the
 * replicas (the only operation that joins them) receives the other replicas' gradients as the
 * images of replica 0's under pi_q, so a micro-batch counted by two replicas is still caught, and
 * at the end every micro-batch replica 0 took forward and backward counts for its images too
 * (two replicas running one micro-batch are caught there). The other replicas' notes and
 * activation peaks are replica 0's, moved. Where anything differs, the plan is executed whole.
 * WPGEN_VERIFY_ALL=1 always executes it whole (tests compare both). */
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include "verify/verify_replicas.h"
#include "util/settings.h"
#include "util/xalloc.h"

long verify_replicas_runs;

static int same_buf(const PlanBuf *a, const PlanBuf *b) {
    return a->kind == b->kind && a->master == b->master && a->dtype == b->dtype && a->copy_dtype == b->copy_dtype &&
           a->chunk == b->chunk && a->shard == b->shard && a->nshards == b->nshards && a->elems == b->elems;
}

/* pi_q(mb0) = mb, one-to-one */
static int map_mb(Verifier *V, int q, int mb0, int mb, int32_t *inv) {
    if (mb0 < 0 || mb < 0 || mb0 >= V->M || mb >= V->M) return mb0 == mb;
    int32_t *x = &V->pi[(size_t)q * V->M + mb0], *y = &inv[(size_t)q * V->M + mb];
    if (*x < 0 && *y < 0) { *x = mb; *y = mb0; return 1; }
    return *x == mb && *y == mb0;
}

/* Rank r of replica q against r0, replica 0's rank at its stage. */
static int same_work(Verifier *V, int r, int r0, int q, int32_t *inv) {
    const Plan *p = V->p;
    const PlanRank *a = &p->ranks[r0], *b = &p->ranks[r];
    if (a->nops != b->nops || a->nbufs != b->nbufs) return 0;
    for (int t = 0; t <= p->nturns; t++)
        if (a->turn_start[t] != b->turn_start[t]) return 0;
    for (int i = 0; i < a->nbufs; i++)
        if (!same_buf(&a->bufs[i], &b->bufs[i])) return 0;
    for (int i = 0; i < a->nops; i++) {
        const Op *x = &a->ops[i], *y = &b->ops[i];
        if (x->kind != y->kind || x->what != y->what || x->buf != y->buf || x->buf2 != y->buf2 || x->chunk != y->chunk) return 0;
        if ((x->mb >= 0 || y->mb >= 0) && !map_mb(V, q, x->mb, y->mb, inv)) return 0;
        if (x->kind == OP_RING && (x->ring_steps != y->ring_steps || op_ring_bytes(x) != op_ring_bytes(y))) return 0;
        const OpInfo *in = op_info(x->kind);
        if (in->p2p) {
            if (x->peer < 0 || x->peer >= p->nranks || p->ranks[x->peer].replica != 0) return 0;
            if (y->peer != V->image[q * V->npipe + p->ranks[x->peer].stage]) return 0;
        }
        if (in->coll) {
            if (x->group < 0 || y->group < 0) return 0;
            const PlanGroup *g = &p->groups[x->group], *h = &p->groups[y->group];
            if (V->across[x->group]) {
                if (y->group != x->group || x->kind != OP_ALLREDUCE) return 0;
                continue;
            }
            if (g->n != h->n) return 0;
            for (int m = 0; m < g->n; m++) {
                int s = g->ranks[m];
                if (p->ranks[s].replica != 0 || h->ranks[m] != V->image[q * V->npipe + p->ranks[s].stage]) return 0;
            }
            if (in->root && (y->peer < 0 || x->peer < 0 || y->peer != V->image[q * V->npipe + p->ranks[x->peer].stage])) return 0;
        }
    }
    return 1;
}

int replicas_detect(Verifier *V) {
    Plan *p = V->p;
    int R = p->replicas, n = p->nranks;
    if (wpgen_env_number("WPGEN_VERIFY_ALL") || R < 2 || n % R) return 0;
    int npipe = n / R;
    V->npipe = npipe;
    V->image = xmalloc((size_t)n * sizeof *V->image);
    for (int r = 0; r < n; r++) V->image[p->ranks[r].replica * npipe + p->ranks[r].stage] = r;   /* placement checked */
    /* groups across the replicas: one member per replica, all at one stage */
    V->across = xcalloc((size_t)p->ngroups + 1, 1);
    int ok = 1;
    for (int g = 0; g < p->ngroups && ok; g++) {
        const PlanGroup *G = &p->groups[g];
        int q0 = p->ranks[G->ranks[0]].replica, inside = 1;
        for (int m = 1; m < G->n; m++) inside &= p->ranks[G->ranks[m]].replica == q0;
        if (inside) continue;
        if (G->n != R) ok = 0;
        uint8_t *seen = xcalloc((size_t)R, 1);
        for (int m = 0; m < G->n && ok; m++) {
            const PlanRank *k = &p->ranks[G->ranks[m]];
            if (seen[k->replica]++ || k->stage != p->ranks[G->ranks[0]].stage) ok = 0;
        }
        free(seen);
        V->across[g] = 1;
    }
    V->pi = xmalloc((size_t)R * V->M * sizeof *V->pi);
    int32_t *inv = xmalloc((size_t)R * V->M * sizeof *inv);
    for (size_t i = 0; i < (size_t)R * V->M; i++) V->pi[i] = inv[i] = -1;
    for (int r = 0; r < n && ok; r++) {
        int q = p->ranks[r].replica;
        if (q) ok = same_work(V, r, V->image[p->ranks[r].stage], q, inv);
    }
    free(inv);
    if (!ok) {
        free(V->image); free(V->across); free(V->pi);
        V->image = NULL; V->across = NULL; V->pi = NULL;
        return 0;
    }
    /* where pi_q moves every micro-batch it names by one distance (the replicas' micro-batches
     * numbered in blocks, as every shipped strategy numbers them), an image is a shifted bitset */
    V->shift = xmalloc((size_t)R * sizeof *V->shift);
    V->undef = xcalloc((size_t)R * V->words + 1, sizeof *V->undef);
    for (int q = 0; q < R; q++) {
        long d = LONG_MIN;
        for (int mb = 0; mb < V->M; mb++) {
            int32_t to = V->pi[(size_t)q * V->M + mb];
            if (to < 0) { V->undef[(size_t)q * V->words + mb / 64] |= 1ULL << (mb % 64); continue; }
            if (d == LONG_MIN) d = (long)to - mb;
            else if ((long)to - mb != d) { d = LONG_MIN; break; }
        }
        V->shift[q] = d;
    }
    verify_replicas_runs++;
    V->active = xcalloc((size_t)n, 1);
    for (int r = 0; r < n; r++) V->active[r] = p->ranks[r].replica == 0;
    return 1;
}

void replicas_image(const Verifier *V, int q, const Val *src, Val *dst) {
    memset(dst, 0, sizeof *dst);
    *dst = *src;
    dst->set = NULL;
    if (src->kind != V_D || !src->set) return;
    dst->set = xcalloc((size_t)V->words, sizeof(uint64_t));
    long d = V->shift[q];
    int shifted = d != LONG_MIN;
    const uint64_t *undef = V->undef + (size_t)q * V->words;
    for (int w = 0; w < V->words && shifted; w++) shifted = !(src->set[w] & undef[w]);
    if (shifted) {   /* every micro-batch of the set moves by d: whole words at a time */
        long ws = d >= 0 ? d / 64 : -((-d + 63) / 64);
        int bs = (int)(d - ws * 64);
        for (int w = 0; w < V->words; w++) {
            uint64_t x = src->set[w];
            if (!x) continue;
            long a = w + ws;
            if (a >= 0 && a < V->words) dst->set[a] |= x << bs;
            if (bs && a + 1 >= 0 && a + 1 < V->words) dst->set[a + 1] |= x >> (64 - bs);
        }
        return;
    }
    for (int w = 0; w < V->words; w++)
        for (uint64_t bits = src->set[w]; bits; bits &= bits - 1) {
            int mb = w * 64 + __builtin_ctzll(bits), to = V->pi[(size_t)q * V->M + mb];
            if (to < 0) to = mb;   /* replica 0's micro-batch that replica q never names: left as it is, so a clash shows */
            dst->set[to / 64] |= 1ULL << (to % 64);
        }
}

int replicas_finish(Verifier *V) {
    Plan *p = V->p;
    int R = p->replicas;
    /* every forward and backward of replica 0 done by each replica on its own micro-batch */
    for (int c = 0; c < p->nchunks; c++)
        for (int mb = 0; mb < V->M; mb++) {
            size_t i = (size_t)c * V->M + mb;
            /* replica 0's micro-batches: the ones its operations name, which pi_1 maps */
            if ((!V->fwd[i] && !V->bwd[i]) || V->pi[(size_t)V->M + mb] < 0) continue;
            for (int q = 1; q < R; q++) {
                int to = V->pi[(size_t)q * V->M + mb];
                if (to < 0 || to == mb) return snprintf(V->err, V->errlen, "micro-batch %d of chunk %d: replica %d runs no micro-batch in its place", mb, c, q), -1;
                size_t j = (size_t)c * V->M + to;
                if ((V->fwd[i] && V->fwd[j]) || (V->bwd[i] && V->bwd[j]))
                    return snprintf(V->err, V->errlen, "micro-batch %d goes through chunk %d in two replicas", to, c), -1;
                V->fwd[j] = V->fwd[i]; V->bwd[j] = V->bwd[i];
            }
        }
    /* the other replicas' notes and peaks: replica 0's, moved */
    for (int r = 0; r < p->nranks; r++) {
        if (V->active[r]) continue;
        int q = p->ranks[r].replica, r0 = V->image[p->ranks[r].stage];
        PlanRank *rk = &p->ranks[r];
        for (int i = 0; i < rk->nops; i++) {
            OpNote n = p->ranks[r0].notes[i];
            if (n.from_rank >= 0 && p->ranks[n.from_rank].replica == 0) n.from_rank = V->image[q * V->npipe + p->ranks[n.from_rank].stage];
            rk->notes[i] = n;
        }
        V->rs[r].act_peak = V->rs[r0].act_peak;
        V->rs[r].host_peak = V->rs[r0].host_peak;
    }
    return 0;
}

void replicas_free(Verifier *V) {
    free(V->image); free(V->across); free(V->pi); free(V->active); free(V->shift); free(V->undef);
    V->image = NULL; V->across = NULL; V->pi = NULL; V->active = NULL; V->shift = NULL; V->undef = NULL;
}
