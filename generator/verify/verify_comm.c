/* The verifier's transfers and collectives. A rank posts a turn's communication when it starts
 * the turn; what a send carries is what its buffer holds then (a turn may not write a buffer it
 * sends). The k-th send from a to b meets the k-th receive at b from a, whatever the turns (MPI's
 * and NCCL's order on one channel); the k-th collective call of each member of a group is one
 * call. A turn ends when all of its transfers have met their partners; results land then, as the
 * operation's row says (op_table.h: which operand a transfer writes, which it empties). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "verify/verify_comm.h"
#include "verify/verify_replicas.h"
#include "util/xalloc.h"

static int turn_first_op(const Verifier *V, int r) {
    return V->p->ranks[r].turn_start[V->rs[r].turn];
}

static void push(Pending **a, int *n, int *cap, Pending x) {
    if (*n == *cap) {
        *cap = *cap ? 2 * *cap : 8;
        *a = xrealloc(*a, (size_t)*cap * sizeof **a);
    }
    (*a)[(*n)++] = x;
}

static void drop(Pending *a, int *n, int i) {
    memmove(&a[i], &a[i + 1], (size_t)(*n - i - 1) * sizeof *a);
    (*n)--;
}

static void set_matched(Verifier *V, int r, int opi) {
    RankState *s = &V->rs[r];
    s->matched[opi - turn_first_op(V, r)] = 1;
    s->unmatched--;
}

/* A send of rank a (op sop, posted at turn st) meets a receive of rank b (op rop): check they
 * agree and hand what the send carries to the receive. */
static int meet(Verifier *V, int a, int sop, int st, const Val *val, int b, int rop) {
    const Plan *p = V->p;
    const Op *so = &p->ranks[a].ops[sop], *ro = &p->ranks[b].ops[rop];
    char s[160];   /* the send, as messages name it: formatted only for one */
    if (so->what != ro->what) {
        op_format(p, a, so, s, sizeof s);
        return verr(V, b, rop, "meets rank %d's %s (turn %d): expected %s, it sends %s", a, s, st,
                    what_names[ro->what], what_names[so->what]);
    }
    if (so->what == WHAT_A || so->what == WHAT_G) {
        if (so->chunk != ro->chunk || so->mb != ro->mb) {
            op_format(p, a, so, s, sizeof s);
            return verr(V, b, rop, "meets rank %d's %s (turn %d): a different activation", a, s, st);
        }
    } else {
        const PlanBuf *rb = &p->ranks[b].bufs[ro->buf];
        if (rb->elems < val_elems(V, val))
            return verr(V, b, rop, "%s (%zu elements) is too small for the %zu elements rank %d sends", rb->name, rb->elems,
                        val_elems(V, val), a);
        val_copy(V, &V->rs[b].slot[rop - turn_first_op(V, b)], val);
        V->rs[b].slot[rop - turn_first_op(V, b)].from_rank = a;
        V->rs[b].slot[rop - turn_first_op(V, b)].from_turn = st;
    }
    OpNote *sn = &p->ranks[a].notes[sop], *rn = &p->ranks[b].notes[rop];
    sn->chunk = rn->chunk = so->what == WHAT_A || so->what == WHAT_G ? so->chunk : val->chunk;
    sn->from_rank = b; sn->from_turn = V->rs[b].turn;
    rn->from_rank = a; rn->from_turn = st;
    if (val && val->kind != V_EMPTY) { sn->shard = rn->shard = (uint16_t)val->shard; sn->nshards = rn->nshards = (uint16_t)val->nshards; }
    return 0;
}

static int post_send(Verifier *V, int r, int i) {
    const Op *op = &V->p->ranks[r].ops[i];
    RankState *s = &V->rs[r];
    Pending x = { .src = r, .src_turn = s->turn, .op = i };
    char d[96];
    if (op->what == WHAT_A || op->what == WHAT_G) {
        x.key = key_make(op->what == WHAT_A ? K_ACT : K_GRAD, op->chunk, op->mb);
        if (!keyset_has(&s->keep, x.key))
            return verr(V, r, i, "the %s of chunk %d for micro-batch %d is not on this rank",
                        op->what == WHAT_A ? "input" : "input gradient", op->chunk, op->mb);
    } else {
        const Val *v = &s->bufs[op->buf];
        if (v->kind != (op->what == WHAT_W ? V_W : V_D)) {
            char h[160];
            return verr(V, r, i, "%s holds %s%s", V->p->ranks[r].bufs[op->buf].name, val_describe(V, v, d, sizeof d),
                        op->what == WHAT_D ? bw_pending_hint(V, r, h, sizeof h) : "");
        }
        if (v->kind == V_W && V->p->chunks[v->chunk].replicated)
            return verr(V, r, i, "sends the weights of replicated chunk %d, which every rank holds", v->chunk);
        val_copy(V, &x.val, v);
    }
    RankState *q = &V->rs[op->peer];
    for (int k = 0; k < q->nrecvs; k++)
        if (q->recvs[k].src == r) {
            int rop = q->recvs[k].op;
            drop(q->recvs, &q->nrecvs, k);
            int rc = meet(V, r, i, s->turn, &x.val, op->peer, rop);
            val_clear(&x.val);
            if (rc) return -1;
            set_matched(V, op->peer, rop);
            set_matched(V, r, i);
            return 0;
        }
    push(&q->sends, &q->nsends, &q->capsends, x);
    return 0;
}

static int post_recv(Verifier *V, int r, int i) {
    const Op *op = &V->p->ranks[r].ops[i];
    RankState *s = &V->rs[r];
    for (int k = 0; k < s->nsends; k++)
        if (s->sends[k].src == op->peer) {
            Pending x = s->sends[k];
            drop(s->sends, &s->nsends, k);
            int rc = meet(V, x.src, x.op, x.src_turn, &x.val, r, i);
            val_clear(&x.val);
            if (rc) return -1;
            set_matched(V, x.src, x.op);
            set_matched(V, r, i);
            return 0;
        }
    Pending x = { .src = op->peer, .op = i };
    push(&s->recvs, &s->nrecvs, &s->caprecvs, x);
    return 0;
}

/* A TIE_ALLREDUCE's members: the two ends of a tied model over several chunks (tied_ends_check),
 * one with chunk 0's gradient (the embedding's use), the other with the last chunk's (its head
 * mirror's). Two members, so that each element is the sum of the two uses once (a+b, the same
 * bits on both) and nothing is counted twice. */
static int tie_members(Verifier *V, const PlanGroup *grp, const Coll *c, int last_rank, int last_op) {
    int lastc = V->p->nchunks - 1;
    if (grp->n != 2)
        return verr(V, last_rank, last_op, "ties over a group of %d ranks: expected 2, the one with the embedding's gradient "
                    "(chunk 0) and the one with the LM head mirror's (chunk %d)", grp->n, lastc);
    int me = c->in[0].chunk == lastc && c->in[1].chunk == 0;   /* the member with the embedding's: 0, or 1 */
    char e_at[24], h_at[24];
    snprintf(e_at, sizeof e_at, "rank %d", grp->ranks[me]);
    snprintf(h_at, sizeof h_at, "rank %d", grp->ranks[!me]);
    return tied_ends_check(V, last_rank, last_op, &c->in[me], e_at, &c->in[!me], h_at, grp->ranks, 2);
}

/* All members have called: compute what each receives. */
static int complete(Verifier *V, int g, Coll *c, int last_rank, int last_op) {
    const Plan *p = V->p;
    const PlanGroup *grp = &p->groups[g];
    int n = grp->n, dup;
    Val sum = { 0 };
    char d1[96], d2[96];
    if (op_info(c->kind)->carries == CARRY_D) {   /* the reductions: the members' gradients summed */
        for (int m = 0; m < n; m++) {
            const Val *v = &c->in[m];
            if (sum.kind != V_EMPTY && (v->chunk != sum.chunk || v->shard != sum.shard || v->nshards != sum.nshards)) {
                val_clear(&sum);
                return verr(V, last_rank, last_op, "rank %d contributes %s, rank %d %s", grp->ranks[m], val_describe(V, v, d1, sizeof d1),
                            grp->ranks[0], val_describe(V, &c->in[0], d2, sizeof d2));
            }
            if (val_union(V, &sum, v, &dup)) {
                val_clear(&sum);
                return verr(V, last_rank, last_op, "micro-batch %d would be counted twice in the gradient of chunk %d (again from rank %d)",
                            dup, v->chunk, grp->ranks[m]);
            }
        }
        if (c->kind == OP_REDUCE_SCATTER && sum.nshards != 1) {
            val_clear(&sum);
            return verr(V, last_rank, last_op, "scatters a gradient that is already a shard");
        }
    }
    if (c->kind == OP_TIE_ALLREDUCE && tie_members(V, grp, c, last_rank, last_op)) return -1;
    if (c->kind == OP_ALLGATHER)
        for (int m = 0; m < n; m++) {
            const Val *v = &c->in[m], *v0 = &c->in[0];
            if (v->nshards != n || v->shard != m || v->chunk != v0->chunk || v->version != v0->version)
                return verr(V, last_rank, last_op, "member %d (rank %d) brings %s, expected shard %d of %d of chunk %d", m,
                            grp->ranks[m], val_describe(V, v, d1, sizeof d1), m, n, v0->chunk);
        }
    int root_m = op_info(c->kind)->root ? group_index(grp, c->root) : -1;
    for (int m = 0; m < n; m++) {
        int r = grp->ranks[m], opi = c->rank_op[m];
        if (V->active && !V->active[r]) continue;   /* a replica not executed: its notes are replica 0's */
        Val *slot = &V->rs[r].slot[opi - turn_first_op(V, r)];
        OpNote *note = &p->ranks[r].notes[opi];
        switch ((OpKind)c->kind) {   /* no default: a new kind is a -Wswitch error until it has a rule */
        case OP_BCAST:
            if (m != root_m) { val_copy(V, slot, &c->in[root_m]); slot->from_rank = c->root; slot->from_turn = V->rs[c->root].turn; }
            note->chunk = c->in[root_m].chunk;
            break;
        case OP_REDUCE:
            if (m == root_m) val_copy(V, slot, &sum);
            note->chunk = sum.chunk;
            break;
        case OP_ALLREDUCE:
            val_copy(V, slot, &sum);
            note->chunk = sum.chunk;
            break;
        case OP_ALLGATHER:
            val_copy(V, slot, &c->in[m]);
            slot->shard = 0; slot->nshards = 1;
            note->chunk = c->in[m].chunk;
            break;
        case OP_REDUCE_SCATTER:
            val_copy(V, slot, &sum);
            slot->shard = m; slot->nshards = n;
            note->chunk = sum.chunk;
            break;
        case OP_TIE_ALLREDUCE:   /* each keeps its own chunk's gradient, its embedding part now the sum */
            val_copy(V, slot, &c->in[m]);
            slot->tied = 1;
            note->chunk = c->in[m].chunk;
            break;
        /* point-to-point, compute and local operations are no collective's */
        case OP_FWD: case OP_BWD: case OP_BWD_B: case OP_BWD_W: case OP_SEND: case OP_RECV:
        case OP_ACC: case OP_COPY: case OP_TIE: case OP_OPT: case OP_FREE: case OP_RING: case OP__COUNT:
            val_clear(&sum);
            return verr(V, r, opi, "%s has no rule among the collectives", op_names[c->kind]);
        }
        /* Collectives note the size of the whole buffer they work on (all-gather's result,
         * reduce-scatter's input), which is what their traffic is counted from. */
        const Val *in = root_m >= 0 ? &c->in[root_m] : &c->in[0];
        int sharded = c->kind != OP_ALLGATHER && c->kind != OP_REDUCE_SCATTER && in->nshards > 1;
        note->shard = (uint16_t)(sharded ? in->shard : 0);
        note->nshards = (uint16_t)(sharded ? in->nshards : 1);
        note->from_rank = -1;
        note->from_turn = V->rs[r].turn;
        /* what lands must fit the buffer it lands in, and be of its kind */
        if (slot->kind != V_EMPTY) {
            const Op *op = &p->ranks[r].ops[opi];
            const PlanBuf *dst = &p->ranks[r].bufs[op_written(op, r)];
            if (dst->kind != (slot->kind == V_W ? BUF_W : BUF_D)) {
                val_clear(&sum);
                return verr(V, r, opi, "%s would receive %s", dst->name, val_describe(V, slot, d1, sizeof d1));
            }
            if (dst->elems < val_elems(V, slot)) {
                val_clear(&sum);
                return verr(V, r, opi, "%s (%zu elements) is too small for %s (%zu elements)", dst->name, dst->elems,
                            val_describe(V, slot, d1, sizeof d1), val_elems(V, slot));
            }
        }
        set_matched(V, r, opi);
    }
    val_clear(&sum);
    return 0;
}

static int post_collective(Verifier *V, int r, int i) {
    const Plan *p = V->p;
    const Op *op = &p->ranks[r].ops[i];
    const PlanGroup *grp = &p->groups[op->group];
    GroupState *gs = &V->gs[op->group];
    int m = group_index(grp, r), k = gs->next[m]++;
    if (k >= gs->ncalls) {
        if (k >= gs->capcalls) {
            gs->capcalls = gs->capcalls ? 2 * gs->capcalls : 16;
            gs->calls = xrealloc(gs->calls, (size_t)gs->capcalls * sizeof *gs->calls);
        }
        while (gs->ncalls <= k) gs->calls[gs->ncalls++] = NULL;
    }
    Coll *c = gs->calls[k];
    if (!c) {
        c = gs->calls[k] = xcalloc(1, sizeof *c);
        c->kind = op->kind; c->root = op->peer; c->turn0 = V->rs[r].turn;
        c->rank_op = xmalloc((size_t)grp->n * sizeof *c->rank_op);
        c->in = xcalloc((size_t)grp->n, sizeof *c->in);
        for (int j = 0; j < grp->n; j++) c->rank_op[j] = -1;
    } else if (c->kind != op->kind || (c->root != op->peer && op_info(c->kind)->root)) {
        return verr(V, r, i, "is call %d on group %d, where another member calls %s with root %d", k, op->group,
                    op_names[c->kind], c->root);
    }
    const Val *v = &V->rs[r].bufs[op->buf];
    char d[96];
    /* what each member brings: the carried kind, or for a broadcast anything at the root */
    int carries = op_info(op->kind)->carries;
    int want = carries == CARRY_W ? V_W : V_D;
    if (carries == CARRY_ANY) want = m == group_index(grp, op->peer) ? -1 : 0;
    if (want == -1 && v->kind == V_EMPTY) return verr(V, r, i, "broadcasts %s, which holds nothing", p->ranks[r].bufs[op->buf].name);
    if (want > 0 && v->kind != want)
        return verr(V, r, i, "%s holds %s", p->ranks[r].bufs[op->buf].name, val_describe(V, v, d, sizeof d));
    if (want) val_copy(V, &c->in[m], v);
    c->rank_op[m] = i;
    if (V->active && V->across[op->group])   /* the other replicas make the same call: replica 0's gradient, renamed */
        for (int j = 0; j < grp->n; j++) {
            int rj = grp->ranks[j];
            if (V->active[rj]) continue;
            if (want) replicas_image(V, p->ranks[rj].replica, &c->in[m], &c->in[j]);
            c->rank_op[j] = i;
            c->posted++;
        }
    if (++c->posted < grp->n) return 0;
    int rc = complete(V, op->group, c, r, i);
    for (int j = 0; j < grp->n; j++) val_clear(&c->in[j]);
    free(c->in); free(c->rank_op); free(c);
    gs->calls[k] = NULL;
    return rc;
}

int comm_post(Verifier *V, int r) {
    const PlanRank *rk = &V->p->ranks[r];
    RankState *s = &V->rs[r];
    int t0 = rk->turn_start[s->turn], t1 = rk->turn_start[s->turn + 1];
    for (int i = t0; i < t1; i++)
        if (op_is_transfer(rk->ops[i].kind)) { s->matched[i - t0] = 0; s->unmatched++; }
    for (int i = t0; i < t1; i++) {
        const OpInfo *in = op_info(rk->ops[i].kind);
        int rc = 0;
        if (in->p2p == P2P_SEND) rc = post_send(V, r, i);
        else if (in->p2p == P2P_RECV) rc = post_recv(V, r, i);
        else if (in->coll) rc = post_collective(V, r, i);
        if (rc) return -1;
    }
    return 0;
}

/* A receive must not throw away gradient contributions that were never passed on. */
static int overwrite(Verifier *V, int r, int opi, int b, Val *with) {
    Val *dst = &V->rs[r].bufs[b];
    if (dst->kind == V_D && dst->count > 0) {
        char d[96];
        return verr(V, r, opi, "overwrites %s in %s, which was never passed on", val_describe(V, dst, d, sizeof d),
                    V->p->ranks[r].bufs[b].name);
    }
    val_clear(dst);
    *dst = *with;
    memset(with, 0, sizeof *with);
    return 0;
}

/* What transfer i of rank r delivered (in slot) lands as its row says: an activation is kept or
 * given away; an operand the transfer empties is emptied; one it writes takes what arrived,
 * which must not throw away gradient contributions never passed on, unless the transfer also
 * read them (a reduction in place: they went into the sum). */
static int land(Verifier *V, int r, int i, Val *slot) {
    const Op *op = &V->p->ranks[r].ops[i];
    const OpInfo *in = op_info(op->kind);
    RankState *s = &V->rs[r];
    if (op_moves_activation(op)) {
        uint64_t key = key_make(op->what == WHAT_A ? K_ACT : K_GRAD, op->chunk, op->mb);
        if (in->p2p == P2P_SEND)
            return keep_take(V, r, key) ? 0 : verr(V, r, i, "what it sends was consumed by another operation of the same turn");
        if (keyset_has(&s->keep, key)) return verr(V, r, i, "this rank already holds it");
        keep_add(V, r, key);
        return 0;
    }
    for (int k = 0; k < 2; k++) {
        unsigned u = op_use(op, r, k);
        int b = k ? op->buf2 : op->buf;
        if (u & USE_CLEAR) val_clear(&s->bufs[b]);
        else if ((u & (USE_READ | USE_WRITE)) == (USE_READ | USE_WRITE)) {
            val_clear(&s->bufs[b]);
            s->bufs[b] = *slot;
            memset(slot, 0, sizeof *slot);
        } else if ((u & USE_WRITE) && overwrite(V, r, i, b, slot)) return -1;
    }
    if (in->flags & OPF_PASS_D) {   /* a gradient sent is passed on, not copied */
        int b = op_emptied(op, r);
        if (b >= 0) val_clear(&s->bufs[b]);
    }
    return 0;
}

int comm_apply(Verifier *V, int r) {
    const PlanRank *rk = &V->p->ranks[r];
    RankState *s = &V->rs[r];
    int t0 = rk->turn_start[s->turn], t1 = rk->turn_start[s->turn + 1];
    for (int i = t0; i < t1; i++) {
        Val *slot = &s->slot[i - t0];
        int rc = op_is_transfer(rk->ops[i].kind) ? land(V, r, i, slot) : 0;
        val_clear(slot);
        if (rc) return -1;
    }
    return 0;
}

int comm_report_deadlock(Verifier *V) {
    const Plan *p = V->p;
    int r = -1;
    for (int q = 0; q < p->nranks; q++)
        if (!V->rs[q].done && (r < 0 || V->rs[q].turn < V->rs[r].turn)) r = q;
    RankState *s = &V->rs[r];
    int t0 = turn_first_op(V, r), t1 = p->ranks[r].turn_start[s->turn + 1];
    for (int i = t0; i < t1; i++) {
        const Op *op = &p->ranks[r].ops[i];
        if (!op_is_transfer(op->kind) || s->matched[i - t0]) continue;
        if (op_info(op->kind)->p2p) {
            const RankState *q = &V->rs[op->peer];
            if (q->done)
                return verr(V, r, i, "never met: rank %d has finished its step (deadlock)", op->peer);
            return verr(V, r, i, "never met: rank %d waits in turn %d (deadlock)", op->peer, q->turn);
        }
        const PlanGroup *g = &p->groups[op->group];
        for (int m = 0; m < g->n; m++) {
            int q = g->ranks[m];
            if (q != r && V->rs[q].done)
                return verr(V, r, i, "never completes: member rank %d has finished its step (deadlock)", q);
        }
        return verr(V, r, i, "never completes: not every member of group %d calls it in this order (deadlock)", op->group);
    }
    return verr(V, r, -1, "stuck at turn %d (deadlock)", s->turn);
}
