/* The plan verifier: executes every rank's operations symbolically, turn by turn, and proves
 * what DESIGN.md promises before anything is emitted:
 *   - every operation is well formed (its buffers exist and are of the right kind), and every
 *     buffer is kept in the format the plan's precision gives it (ir/plan.h, above PlanBuf);
 *   - within a turn, no buffer is overwritten while another operation uses it (a turn posts its
 *     transfers, runs its compute in the listed order while they move, waits for them, then
 *     runs its local operations ACC, COPY, OPT and FREE in the listed order);
 *   - every send meets its receive (same kind, fitting size), every collective is called by
 *     all members of its group in the same order, and the whole step cannot deadlock;
 *   - every compute finds the right chunk's weights of this iteration, and the activations or
 *     activation gradients it needs, on its own rank;
 *   - every micro-batch goes forward through every chunk once, in order, and backward once, in
 *     reverse order;
 *   - every chunk's gradient collects each micro-batch exactly once and reaches the owners'
 *     master weights before OPT; every master is updated exactly once;
 *   - with context parallelism (C > 1), every FWD, BWD and BWD_B whose chunk has layers has its
 *     ring attention, a RING right before it of the steps and bytes it needs; with C = 1 none;
 *   - nothing is left behind at the end of the step, and the peak memory is accounted (by
 *     what holds it: PlanMem).
 * What each operation is (its phase, its operands and how it uses them) comes from its row of
 * op_table[] (ir/op_table.h); what it does is the rules here. Transfers and collectives are
 * verify_comm.c's; the symbolic state and its primitives verify_state.c's. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "verify/verify_state.h"
#include "verify/verify_comm.h"
#include "verify/verify_replicas.h"
#include "util/xalloc.h"
#include "common/step.h"   /* WP_XFER_ALIGN */

/* ---- the shape of each operation ---- */

static int check_buf(Verifier *V, int r, int opi, int b, int kind, const char *role) {
    const PlanRank *rk = &V->p->ranks[r];
    if (b < 0 || b >= rk->nbufs) return verr(V, r, opi, "needs a %s buffer", role);
    if (rk->bufs[b].kind != kind)
        return verr(V, r, opi, "%s is a %s buffer, expected %s", rk->bufs[b].name,
                    rk->bufs[b].kind == BUF_W ? "weight" : "gradient", kind == BUF_W ? "weights" : "a gradient");
    return 0;
}

/* Operand k of op: present and of the kind its row asks for. */
static int check_operand(Verifier *V, int r, int opi, int k) {
    const Op *op = &V->p->ranks[r].ops[opi];
    const OpInfo *in = op_info(op->kind);
    int want = in->operand[k], b = k ? op->buf2 : op->buf;
    const char *role = in->role[k];
    if (want == OPND_WHAT) {
        if (op->what != WHAT_W && op->what != WHAT_D) return 0;   /* A and G name no buffer */
        want = op->what == WHAT_W ? OPND_W : OPND_D;
        role = op->what == WHAT_W ? "weight" : "gradient";
    }
    if (want == OPND_NONE) return 0;
    if (want == OPND_ANY) return b < 0 ? verr(V, r, opi, "needs a buffer") : 0;
    return check_buf(V, r, opi, b, want == OPND_W ? BUF_W : BUF_D, role);
}

static int check_shape(Verifier *V, int r, int opi) {
    const Plan *p = V->p;
    const Op *op = &p->ranks[r].ops[opi];
    if (op->kind >= OP__COUNT) return verr(V, r, opi, "unknown operation %d", op->kind);
    const OpInfo *in = op_info(op->kind);
    const PlanBuf *bufs = p->ranks[r].bufs;
    int need_chunk = in->flags & OPF_CHUNK, need_mb = in->flags & OPF_MB;
    if (in->p2p && (op->peer < 0 || op->peer == r)) return verr(V, r, opi, "needs a peer other than itself");
    if (in->coll) {
        if (op->group < 0) return verr(V, r, opi, "needs a group");
        const PlanGroup *g = &p->groups[op->group];
        if (group_index(g, r) < 0) return verr(V, r, opi, "rank %d is not a member of group %d", r, op->group);
        if (in->root && (op->peer < 0 || group_index(g, op->peer) < 0))
            return verr(V, r, opi, "its root %d is not a member of group %d", op->peer, op->group);
    }
    if (in->carries == CARRY_WHAT) {
        if (op->what == WHAT_A || op->what == WHAT_G) {
            need_mb = 1;
            if (op->chunk < 1) return verr(V, r, opi, "activations are named by the chunk they enter (1..%d)", p->nchunks - 1);
        } else if (op->what != WHAT_W && op->what != WHAT_D) return verr(V, r, opi, "carries nothing (expected W, D, A or G)");
    }
    for (int k = 0; k < 2; k++)
        if (in->operand[k] != OPND_NONE && check_operand(V, r, opi, k)) return -1;
    if ((in->flags & OPF_DISTINCT) && op->buf == op->buf2) return verr(V, r, opi, "source and destination are the same buffer");
    if ((in->flags & OPF_MASTER) && (!bufs[op->buf].master || bufs[op->buf].chunk != op->chunk))
        return verr(V, r, opi, "%s is not this rank's master of chunk %d", bufs[op->buf].name, op->chunk);
    if ((in->flags & OPF_MASTER) && op->buf2 >= 0 && bufs[op->buf2].dtype != WP_FP32)
        return verr(V, r, opi, "the gradient %s is kept in %s; the owner's, which AdamW reads, is fp32", bufs[op->buf2].name,
                    wp_dtype_name((WpDtype)bufs[op->buf2].dtype));
    for (int k = 0; k < 2 && (in->flags & OPF_FP32); k++) {
        int b = k ? op->buf2 : op->buf;
        if (b >= 0 && bufs[b].dtype != WP_FP32)
            return verr(V, r, opi, "the gradient %s is kept in %s; a tied sum is of fp32 gradients (the owners', which AdamW reads)",
                        bufs[b].name, wp_dtype_name((WpDtype)bufs[b].dtype));
    }
    /* emptying a master: FREE (the other kinds that empty a buffer take gradients, which masters are not) */
    if ((op_use(op, r, 0) & USE_CLEAR) && bufs[op->buf].master) return verr(V, r, opi, "master weights are never freed");
    if (need_chunk && (op->chunk < 0 || op->chunk >= p->nchunks)) return verr(V, r, opi, "no chunk %d", op->chunk);
    if (need_mb && (op->mb < 0 || op->mb >= V->M)) return verr(V, r, opi, "no micro-batch %d (the step has %d)", op->mb, V->M);
    /* Masters are the owner's truth: only OPT writes them. */
    for (int k = 0; k < 2 && !(in->flags & OPF_MASTER); k++) {
        int b = k ? op->buf2 : op->buf;
        if ((op_use(op, r, k) & USE_WRITE) && bufs[b].master)
            return verr(V, r, opi, "writes into master buffer %s (only OPT may)", bufs[b].name);
    }
    return 0;
}

/* ---- hazards within a turn ---- */

enum { T_CR = 1 << 12, T_CW = 1 << 13, T_LR = 1 << 14, T_LW = 1 << 15, T_COUNT = 0xfff };

static void touch(RankState *s, int b, int how) {
    if (b < 0) return;
    s->touch[b] = (uint16_t)((s->touch[b] | how) + 1);
}

/* A turn runs in three phases: its transfers are posted, its compute runs while they move, and
 * once they have completed its local operations run. So only compute can collide with a
 * transfer of its own turn, and local operations collide with nothing. A transfer that writes,
 * adds into or empties a buffer counts as writing it while it moves. */
static int check_hazards(Verifier *V, int r, int t0, int t1) {
    RankState *s = &V->rs[r];
    const PlanRank *rk = &V->p->ranks[r];
    for (int i = t0; i < t1; i++) {
        const Op *op = &rk->ops[i];
        const OpInfo *in = op_info(op->kind);
        if (in->phase == OP_PHASE_LOCAL) continue;
        int rd = in->phase == OP_PHASE_TRANSFER ? T_CR : T_LR, wr = in->phase == OP_PHASE_TRANSFER ? T_CW : T_LW;
        const uint8_t *use = in->root && op->peer == r ? in->root_use : in->use;
        if (use[0]) touch(s, op->buf, use[0] & USE_CHANGES ? wr : rd);
        if (use[1]) touch(s, op->buf2, use[1] & USE_CHANGES ? wr : rd);
    }
    int bad = -1, why = 0;
    for (int b = 0; b < rk->nbufs && bad < 0; b++) {
        int t = s->touch[b];
        if ((t & T_CW) && (t & T_COUNT) > 1) bad = b, why = 1;
        else if ((t & T_CR) && (t & T_LW)) bad = b, why = 2;
    }
    memset(s->touch, 0, (size_t)rk->nbufs * sizeof *s->touch);
    if (bad < 0) return 0;
    /* Name the first operation of the turn that touches the buffer. */
    int opi = t0;
    for (int i = t0; i < t1; i++)
        if (!op_is_local(rk->ops[i].kind) &&
            (rk->ops[i].buf == bad || rk->ops[i].buf2 == bad)) { opi = i; break; }
    return verr(V, r, opi, why == 1 ? "buffer %s is written by a transfer while another operation of the same turn uses it"
                                    : "buffer %s is sent while a computation of the same turn writes it", rk->bufs[bad].name);
}

/* ---- compute and local operations, in order ---- */

static int need_weights(Verifier *V, int r, int opi, const Op *op) {
    const Val *w = &V->rs[r].bufs[op->buf];
    char d[96];
    if (w->kind != V_W || w->chunk != op->chunk || w->nshards != 1 || w->version != 0)
        return verr(V, r, opi, "needs the weights of chunk %d, %s holds %s", op->chunk,
                    V->p->ranks[r].bufs[op->buf].name, val_describe(V, w, d, sizeof d));
    if (V->p->chunks[op->chunk].replicated && !V->p->ranks[r].bufs[op->buf].master)
        return verr(V, r, opi, "chunk %d is replicated: it computes with this rank's master, not %s",
                    op->chunk, V->p->ranks[r].bufs[op->buf].name);
    OpNote *n = &V->p->ranks[r].notes[opi];
    n->chunk = op->chunk;
    n->from_rank = w->from_rank;
    n->from_turn = w->from_turn;
    return 0;
}

/* Adds micro-batch mb of chunk c into gradient buffer b. */
static int add_grad(Verifier *V, int r, int opi, int b, int c, int mb) {
    Val *d = &V->rs[r].bufs[b];
    OpNote *n = &V->p->ranks[r].notes[opi];
    n->first = d->kind == V_EMPTY;
    if (d->kind == V_EMPTY) {
        d->kind = V_D; d->chunk = c; d->shard = 0; d->nshards = 1; d->count = 0;
        d->set = xcalloc((size_t)V->words, sizeof(uint64_t));
        d->from_rank = r; d->from_turn = V->rs[r].turn;
    } else if (d->kind != V_D || d->chunk != c || d->nshards != 1) {
        char s[96];
        return verr(V, r, opi, "adds to %s, which holds %s", V->p->ranks[r].bufs[b].name, val_describe(V, d, s, sizeof s));
    } else if (d->tied) {
        return verr(V, r, opi, "adds micro-batch %d to the gradient of chunk %d in %s after its TIE: the tied sum is final",
                    mb, c, V->p->ranks[r].bufs[b].name);
    }
    if (d->set[mb / 64] >> (mb % 64) & 1)
        return verr(V, r, opi, "micro-batch %d is already in the gradient of chunk %d in %s", mb, c, V->p->ranks[r].bufs[b].name);
    d->set[mb / 64] |= 1ULL << (mb % 64);
    d->count++;
    return 0;
}

/* ---- context parallelism: the ring attention ---- */

/* What the ring of a compute operation moves, in words, for the messages. */
static const char *ring_blocks(const Plan *p, int kind) {
    if (kind == OP_FWD) return "K and V";
    return p->recompute ? "K and V (its recomputed forward), then K, V, dK and dV" : "K, V, dK and dV";
}

/* A RING: only in a plan with context parallelism, listed right before the FWD, BWD or BWD_B of
 * its chunk and micro-batch, and of the steps and bytes that operation's ring attention takes
 * (plan_cp_ring_bytes: per layer of the chunk C-1 steps, blocks of S/C tokens). */
static int check_ring(Verifier *V, int r, int opi) {
    const Plan *p = V->p;
    const PlanRank *rk = &p->ranks[r];
    const Op *op = &rk->ops[opi];
    int C = wp_cp(&p->model);
    if (C == 1)
        return verr(V, r, opi, "a plan without context parallelism (C = 1) has no ring attention: a rank holds every key and value of its sequences");
    const Op *next = opi + 1 < rk->turn_start[V->rs[r].turn + 1] ? &rk->ops[opi + 1] : NULL;
    double steps, need = next ? plan_cp_ring_bytes(p, next, &steps) : 0;
    if (!next || need <= 0 || next->chunk != op->chunk || next->mb != op->mb) {
        char d[96];
        if (next) op_format(p, r, next, d, sizeof d);
        return verr(V, r, opi, "a RING is the ring attention of the FWD, BWD or BWD_B listed right after it in its turn, "
                    "of chunk %d micro-batch %d; %s%s", op->chunk, op->mb, next ? "the next is " : "it is the turn's last",
                    next ? d : "");
    }
    if ((double)op_ring_bytes(op) != need || op->ring_steps != steps)
        return verr(V, r, opi, "moves %llu bytes in %u steps; the %s of chunk %d needs %.0f bytes in %.0f steps: "
                    "%d layers x (C-1 = %d) steps of %s blocks of a member's %zu tokens (S/C of each sequence)",
                    (unsigned long long)op_ring_bytes(op), op->ring_steps, op_names[next->kind], op->chunk, need, steps,
                    p->chunks[op->chunk].nlayers, C - 1, ring_blocks(p, next->kind), wp_rank_tokens(&p->model));
    return 0;
}

/* A compute operation whose attention spans the group: its RING right before it (which
 * check_ring, run before it, has checked against it). */
static int need_ring(Verifier *V, int r, int opi) {
    const Plan *p = V->p;
    const PlanRank *rk = &p->ranks[r];
    double steps, need = plan_cp_ring_bytes(p, &rk->ops[opi], &steps);
    if (need <= 0 || (opi > rk->turn_start[V->rs[r].turn] && rk->ops[opi - 1].kind == OP_RING)) return 0;
    return verr(V, r, opi, "its ring attention is not in the plan: a RING of %.0f bytes in %.0f steps (%s blocks round "
                "the group of C = %d) must be listed right before it", need, steps, ring_blocks(p, rk->ops[opi].kind),
                wp_cp(&p->model));
}

static int run_local(Verifier *V, int r, int opi) {
    Plan *p = V->p;
    const Op *op = &p->ranks[r].ops[opi];
    RankState *s = &V->rs[r];
    int c = op->chunk, mb = op->mb, last = c == p->nchunks - 1;
    size_t cm = (size_t)c * V->M + (size_t)mb;
    char d1[96], d2[96];
    switch ((OpKind)op->kind) {
    case OP_RING:
        return check_ring(V, r, opi);
    case OP_FWD:
        if (need_ring(V, r, opi) || need_weights(V, r, opi, op)) return -1;
        if (V->fwd[cm]) return verr(V, r, opi, "micro-batch %d already went forward through chunk %d", mb, c);
        /* the input is held beside the stash the operation fills; the output is written in the
         * input's storage (train/step_ops.c, wp_fwd): add the stash, take the input, add the output */
        if (c > 0 && !keyset_has(&s->keep, key_make(K_ACT, c, mb)))
            return verr(V, r, opi, "the input of chunk %d for micro-batch %d is not on this rank", c, mb);
        keep_add(V, r, key_make(K_STASH, c, mb));
        if (c > 0) keep_take(V, r, key_make(K_ACT, c, mb));
        if (!last) keep_add(V, r, key_make(K_ACT, c + 1, mb));
        V->fwd[cm]++;
        return 0;
    case OP_BWD: case OP_BWD_B:
        if (need_ring(V, r, opi) || need_weights(V, r, opi, op)) return -1;
        if (!keyset_has(&s->keep, key_make(K_STASH, c, mb)))
            return verr(V, r, opi, "micro-batch %d has not gone forward through chunk %d on this rank (or went backward already)", mb, c);
        if (!last && !keyset_has(&s->keep, key_make(K_GRAD, c + 1, mb)))
            return verr(V, r, opi, "the gradient of chunk %d's output for micro-batch %d is not on this rank", c, mb);
        /* the stash is held until the operation ends, beside the gradient it writes; that
         * gradient is written in the incoming one's storage (train/step_ops.c, grad_in_place), so
         * the incoming goes first. BWD_B's stash stays on, inside its B-to-W keep (K_STASHW counts
         * it), so it moves there first */
        if (op->kind == OP_BWD_B) { keep_take(V, r, key_make(K_STASH, c, mb)); keep_add(V, r, key_make(K_STASHW, c, mb)); }
        if (!last) keep_take(V, r, key_make(K_GRAD, c + 1, mb));
        if (c > 0) keep_add(V, r, key_make(K_GRAD, c, mb));
        if (op->kind == OP_BWD_B) return 0;
        keep_take(V, r, key_make(K_STASH, c, mb));
        if (add_grad(V, r, opi, op->buf2, c, mb)) return -1;
        V->bwd[cm]++;
        return 0;
    case OP_BWD_W:
        if (!keep_take(V, r, key_make(K_STASHW, c, mb)))
            return verr(V, r, opi, "BWD_B of chunk %d for micro-batch %d has not run on this rank", c, mb);
        if (add_grad(V, r, opi, op->buf2, c, mb)) return -1;
        p->ranks[r].notes[opi].chunk = c;
        V->bwd[cm]++;
        return 0;
    case OP_ACC: {
        Val *dst = &s->bufs[op->buf], *src = &s->bufs[op->buf2];
        if (src->kind != V_D) {
            char h[160];
            return verr(V, r, opi, "%s holds %s, not a gradient%s", p->ranks[r].bufs[op->buf2].name, val_describe(V, src, d1, sizeof d1),
                        bw_pending_hint(V, r, h, sizeof h));
        }
        if (dst->kind != V_EMPTY && (dst->chunk != src->chunk || dst->shard != src->shard || dst->nshards != src->nshards))
            return verr(V, r, opi, "adds %s to %s", val_describe(V, src, d1, sizeof d1), val_describe(V, dst, d2, sizeof d2));
        if (dst->tied || src->tied)
            return verr(V, r, opi, "adds to or from the gradient of chunk %d after its TIE: the tied sum is final", src->chunk);
        int dup;
        p->ranks[r].notes[opi].first = dst->kind == V_EMPTY;
        p->ranks[r].notes[opi].chunk = src->chunk;
        if (val_union(V, dst, src, &dup)) return verr(V, r, opi, "micro-batch %d would be counted twice in the gradient of chunk %d", dup, src->chunk);
        val_clear(src);
        return 0;
    }
    case OP_COPY: {
        Val *src = &s->bufs[op->buf2];
        if (src->kind != V_W) return verr(V, r, opi, "%s holds %s, not weights", p->ranks[r].bufs[op->buf2].name, val_describe(V, src, d1, sizeof d1));
        p->ranks[r].notes[opi].chunk = src->chunk;
        val_copy(V, &s->bufs[op->buf], src);
        return 0;
    }
    case OP_TIE: {
        /* tied embeddings over several chunks: the embedding (chunk 0) and its mirror, the last
         * chunk's LM head, each with its complete gradient here; both become the sum, once */
        Val *e = &s->bufs[op->buf], *h = &s->bufs[op->buf2];
        if (tied_ends_check(V, r, opi, e, p->ranks[r].bufs[op->buf].name, h, p->ranks[r].bufs[op->buf2].name, NULL, 0)) return -1;
        e->tied = h->tied = 1;
        p->ranks[r].notes[opi].chunk = 0;
        return 0;
    }
    case OP_OPT: {
        Val *w = &s->bufs[op->buf], *g = &s->bufs[op->buf2];
        if (w->version) return verr(V, r, opi, "chunk %d is updated twice", c);
        if (g->kind != V_D || g->chunk != c || g->shard != w->shard || g->nshards != w->nshards)
            return verr(V, r, opi, "needs the gradient of chunk %d%s, %s holds %s", c, w->nshards > 1 ? " (its shard)" : "",
                        p->ranks[r].bufs[op->buf2].name, val_describe(V, g, d1, sizeof d1));
        /* a tied model over several chunks: its embedding and head mirror are updated with the
         * summed gradient only, else the two masters diverge */
        if (p->model.tied && p->nchunks > 1 && (c == 0 || c == p->nchunks - 1) && !g->tied && g->count == V->M)
            return verr(V, r, opi, "updates chunk %d of a tied model with its own gradient: the embedding's (chunk 0) "
                        "and the LM head mirror's (chunk %d) must first be summed by TIE, or the two masters diverge",
                        c, p->nchunks - 1);
        if (g->count != V->M) {
            int missing = 0;
            while (g->set[missing / 64] >> (missing % 64) & 1) missing++;
            /* the B/W rule: every BWD_W before its gradient is applied */
            for (int q = 0; q < p->nranks; q++)
                if (keyset_has(&V->rs[q].keep, key_make(K_STASHW, c, missing)))
                    return verr(V, r, opi, "the gradient of chunk %d has %d of %d micro-batches: micro-batch %d's BWD_W "
                                "(its BWD_B ran on rank %d) has not run before this update", c, g->count, V->M, missing, q);
            return verr(V, r, opi, "the gradient of chunk %d has %d of %d micro-batches (micro-batch %d is missing)", c, g->count, V->M, missing);
        }
        p->ranks[r].notes[opi].chunk = c;
        w->version = 1;
        val_clear(g);
        return 0;
    }
    case OP_FREE:
        val_clear(&s->bufs[op->buf]);
        return 0;
    /* transfers complete in verify_comm.c (their rule there, or the row's uses); never run here.
     * No default: a new kind is a -Wswitch error (-Werror=switch, Makefile) until it has a rule. */
    case OP_SEND: case OP_RECV: case OP_BCAST: case OP_REDUCE: case OP_ALLREDUCE: case OP_ALLGATHER:
    case OP_REDUCE_SCATTER: case OP_TIE_ALLREDUCE:
    case OP__COUNT:
        break;
    }
    return verr(V, r, opi, "%s has no rule among the compute and local operations", op_names[op->kind]);
}

/* ---- the driver ---- */

/* Buffer formats as plan.h's rule says (plan_finish sets them; the emitter and the runtime
 * allocate and convert by them): masters fp32 with a working copy at the precision, other weights
 * at the precision, gradients at the grad_precision or fp32, the gradient OPT reads fp32, and
 * every size its elements at its format. */
static int check_dtypes(Verifier *V, int r) {
    const Plan *p = V->p;
    const PlanRank *rk = &p->ranks[r];
    for (int b = 0; b < rk->nbufs; b++) {
        const PlanBuf *pb = &rk->bufs[b];
        WpDtype want = pb->master ? WP_FP32 : pb->kind == BUF_W ? p->precision : p->grad_precision;
        int ok = pb->dtype == want || (pb->kind == BUF_D && pb->dtype == WP_FP32);
        if (!ok || (pb->master && pb->copy_dtype != p->precision) || (!pb->master && pb->copy_dtype != pb->dtype))
            return verr(V, r, -1, "buffer %s is kept in %s (working copy %s), expected %s in a plan of %s weights and %s gradients",
                        pb->name, wp_dtype_name((WpDtype)pb->dtype), wp_dtype_name((WpDtype)pb->copy_dtype), wp_dtype_name(want),
                        wp_dtype_name(p->precision), wp_dtype_name(p->grad_precision));
        size_t elems = pb->chunk >= 0 ? plan_shard_elems(p, pb->chunk, pb->nshards) : pb->elems;
        if (pb->elems != elems || pb->bytes != pb->elems * wp_dtype_bytes((WpDtype)pb->dtype))
            return verr(V, r, -1, "buffer %s: %zu elements in %zu bytes, expected %zu elements of %s", pb->name, pb->elems,
                        pb->bytes, elems, wp_dtype_name((WpDtype)pb->dtype));
    }
    return 0;
}

/* Where plan:place put each rank: the emitted runtime relies on it (runtime/train/train.c:
 * replica 0's masters make the checkpoint and its gradients the norm), so the replicas must be
 * p->replicas pipelines of the same length, replica in [0, replicas) and stage in [0, ranks per
 * replica), each (replica, stage) held by one rank. */
static int check_placement(Verifier *V) {
    const Plan *p = V->p;
    if (p->replicas < 1 || p->nranks % p->replicas)
        return snprintf(V->err, V->errlen, "the plan has %d replicas: expected a divisor of its %d ranks", p->replicas, p->nranks), -1;
    int per = p->nranks / p->replicas, rc = 0;
    int *at = xcalloc((size_t)p->nranks, sizeof *at);   /* (replica, stage) -> its rank + 1 */
    for (int r = 0; r < p->nranks && rc == 0; r++) {
        int q = p->ranks[r].replica, st = p->ranks[r].stage;
        if (q < 0 || q >= p->replicas)
            rc = verr(V, r, -1, "placed in replica %d, expected 0..%d (the plan has %d replicas)", q, p->replicas - 1, p->replicas);
        else if (st < 0 || st >= per)
            rc = verr(V, r, -1, "placed at stage %d, expected 0..%d (%d ranks per replica)", st, per - 1, per);
        else if (at[q * per + st])
            rc = verr(V, r, -1, "placed at replica %d, stage %d, where rank %d is too", q, st, at[q * per + st] - 1);
        else at[q * per + st] = r + 1;
    }
    free(at);
    return rc;
}

/* The master buffers of every chunk, rank by rank in buffer order (as (rank, buffer) pairs from
 * first[c] to first[c + 1]), and whether each rank owns each chunk: gathered once, so that the
 * checks below cost the buffers, not chunks x ranks x owners (a fully sharded plan makes every rank an owner of
 * every chunk: quadratic in the ranks). */
typedef struct MasterIndex { int *first, *rank, *buf; unsigned char *owns; } MasterIndex;

static void master_index(const Plan *p, MasterIndex *x) {
    int C = p->nchunks;
    x->first = xcalloc((size_t)C + 2, sizeof(int));
    x->owns = xcalloc((size_t)C * p->nranks + 1, 1);
    for (int c = 0; c < C; c++)
        for (int i = 0; i < p->chunks[c].nowners; i++) {
            int o = p->chunks[c].owners[i];
            if (o >= 0 && o < p->nranks) x->owns[(size_t)c * p->nranks + o] = 1;
        }
    for (int r = 0; r < p->nranks; r++)
        for (int b = 0; b < p->ranks[r].nbufs; b++) {
            const PlanBuf *pb = &p->ranks[r].bufs[b];
            if (pb->master && pb->chunk >= 0 && pb->chunk < C) x->first[pb->chunk + 2]++;
        }
    for (int c = 0; c < C; c++) x->first[c + 2] += x->first[c + 1];
    x->rank = xcalloc((size_t)x->first[C + 1] + 1, sizeof(int));
    x->buf = xcalloc((size_t)x->first[C + 1] + 1, sizeof(int));
    for (int r = 0; r < p->nranks; r++)   /* ranks, then buffers, ascending: the order checked in */
        for (int b = 0; b < p->ranks[r].nbufs; b++) {
            const PlanBuf *pb = &p->ranks[r].bufs[b];
            if (!pb->master || pb->chunk < 0 || pb->chunk >= C) continue;
            int k = x->first[pb->chunk + 1]++;
            x->rank[k] = r; x->buf[k] = b;
        }
}

static void master_index_free(MasterIndex *x) { free(x->first); free(x->rank); free(x->buf); free(x->owns); }

/* A replicated chunk (PlanChunk.replicated): every rank owns it and holds one whole master of it,
 * with which it computes the chunk on its own micro-batches (need_weights) and which it updates
 * with the gradient summed over all ranks (OPT's count of M micro-batches). Checkpoints and the
 * gradient norm count it once (runtime/train/train.c). */
static int check_replicated_masters(Verifier *V, const MasterIndex *mi, int c) {
    const Plan *p = V->p;
    int *held = xcalloc((size_t)p->nranks, sizeof *held), rc = 0;
    for (int k = mi->first[c]; k < mi->first[c + 1] && rc == 0; k++) {
        int r = mi->rank[k];
        const PlanBuf *pb = &p->ranks[r].bufs[mi->buf[k]];
        if (!mi->owns[(size_t)c * p->nranks + r])
            rc = verr(V, r, -1, "holds master %s of chunk %d but is not among its owners", pb->name, c);
        else if (pb->nshards != 1)
            rc = verr(V, r, -1, "master %s of replicated chunk %d is a shard: every rank holds it whole", pb->name, c);
        else if (held[r]++)
            rc = verr(V, r, -1, "holds a second master %s of replicated chunk %d", pb->name, c);
    }
    for (int r = 0; r < p->nranks && rc == 0; r++)
        if (!held[r]) rc = verr(V, r, -1, "holds no master of replicated chunk %d: every rank needs one", c);
    free(held);
    return rc;
}

static int check_structure(Verifier *V) {
    Plan *p = V->p;
    if (check_placement(V)) return -1;
    MasterIndex mi;
    master_index(p, &mi);
    for (int c = 0; c < p->nchunks; c++) {
        const PlanChunk *ch = &p->chunks[c];
        if (ch->nowners == 0) { master_index_free(&mi); return snprintf(V->err, V->errlen, "chunk %d has no owner", c), -1; }
        if (ch->replicated) {
            if (check_replicated_masters(V, &mi, c)) { master_index_free(&mi); return -1; }
            continue;
        }
        int nshards = 0, *seen = NULL;
        for (int k = mi.first[c]; k < mi.first[c + 1]; k++) {
            int r = mi.rank[k];
            const PlanRank *rk = &p->ranks[r];
            const PlanBuf *pb = &rk->bufs[mi.buf[k]];
            if (!mi.owns[(size_t)c * p->nranks + r]) {
                free(seen); master_index_free(&mi);
                return verr(V, r, -1, "holds master %s of chunk %d but is not among its owners", pb->name, c);
            }
            if (!nshards) { nshards = pb->nshards; seen = xcalloc((size_t)nshards * p->replicas, sizeof *seen); }
            if (pb->nshards != nshards) {
                free(seen); master_index_free(&mi);
                return verr(V, r, -1, "master %s of chunk %d is cut in %d shards, another in %d", pb->name, c, pb->nshards, nshards);
            }
            /* once in every replica: replica 0's masters alone make the checkpoint */
            if (seen[pb->shard * p->replicas + rk->replica]++) {
                free(seen); master_index_free(&mi);
                return verr(V, r, -1, "holds master %s (shard %d of chunk %d), which replica %d already holds: expected once per replica",
                            pb->name, pb->shard, c, rk->replica);
            }
        }
        if (!nshards) { master_index_free(&mi); return snprintf(V->err, V->errlen, "chunk %d: no rank holds its master weights", c), -1; }
        for (int s = 0; s < nshards; s++) {
            int n = 0;
            for (int q = 0; q < p->replicas; q++) n += seen[s * p->replicas + q];
            if (n != p->replicas) {
                free(seen); master_index_free(&mi);
                return snprintf(V->err, V->errlen, "chunk %d: shard %d of its master weights is held %d times, expected once per replica (%d)",
                                c, s, n, p->replicas), -1;
            }
        }
        free(seen);
    }
    master_index_free(&mi);
    for (int r = 0; r < p->nranks; r++)
        if (check_dtypes(V, r)) return -1;
    for (int r = 0; r < p->nranks; r++)
        for (int t = 0; t < p->nturns; t++) {
            V->rs[r].turn = t;   /* for the message */
            for (int i = p->ranks[r].turn_start[t]; i < p->ranks[r].turn_start[t + 1]; i++)
                if (check_shape(V, r, i)) return -1;
        }
    return 0;
}

static int run_turn(Verifier *V, int r) {
    const PlanRank *rk = &V->p->ranks[r];
    RankState *s = &V->rs[r];
    int t0 = rk->turn_start[s->turn], t1 = rk->turn_start[s->turn + 1];
    for (int i = t0; i < t1; i++)
        if (op_is_compute(rk->ops[i].kind) && run_local(V, r, i)) return -1;
    if (comm_apply(V, r)) return -1;
    for (int i = t0; i < t1; i++)
        if (op_is_local(rk->ops[i].kind) && run_local(V, r, i)) return -1;
    s->posted = 0;
    if (++s->turn == V->p->nturns) s->done = 1;
    return 0;
}

static int check_end(Verifier *V) {
    Plan *p = V->p;
    for (int c = 0; c < p->nchunks; c++)
        for (int g = 0; g < V->M; g++) {
            size_t i = (size_t)c * V->M + g;
            if (!V->fwd[i]) return snprintf(V->err, V->errlen, "micro-batch %d never goes forward through chunk %d", g, c), -1;
            if (!V->bwd[i]) return snprintf(V->err, V->errlen, "micro-batch %d never goes backward through chunk %d", g, c), -1;
        }
    for (int r = 0; r < p->nranks; r++) {
        if (V->active && !V->active[r]) continue;   /* replica 0's, checked */
        const PlanRank *rk = &p->ranks[r];
        RankState *s = &V->rs[r];
        s->turn = p->nturns;
        for (int b = 0; b < rk->nbufs; b++)
            if (rk->bufs[b].master && !s->bufs[b].version)
                return verr(V, r, -1, "master %s of chunk %d is never updated (no OPT)", rk->bufs[b].name, rk->bufs[b].chunk);
        for (size_t i = 0; i < s->keep.cap; i++) {
            uint64_t k = s->keep.slots[i];
            if (!k) continue;
            static const char *what[] = { "", "the input of chunk", "the input gradient of chunk", "the stash of chunk", "the weight-gradient stash of chunk" };
            return verr(V, r, -1, "ends the step still holding %s %d for micro-batch %d (never used)", what[k >> 60],
                        (int)((k >> 32) & 0xfffffff), (int)(uint32_t)k);
        }
    }
    return 0;
}

/* A rank's peak: all its buffers for the whole step (masters with AdamW's state and working
 * copy), the most activations it keeps at once, and the workspace of the chunks it computes
 * (config.c's: the logits block only where the LM head runs) with, where gradients are bf16,
 * the fp32 staging gradient, and the room for transfers in another format than their buffers'
 * (both as the CUDA backend reserves them); by what holds it. A context-parallel plan's rank is
 * a group: its figures are one member's, the ring attention's blocks in flight counted from its
 * RINGs (config.c's WP_WS_KV_RING part). */
static void account_memory(Verifier *V) {
    Plan *p = V->p;
    p->peak_mem = 0;
    p->peak_rank = 0;
    uint8_t *computes = xcalloc((size_t)p->nchunks + 1, 1);
    for (int r = 0; r < p->nranks; r++) {
        PlanRank *rk = &p->ranks[r];
        memset(computes, 0, (size_t)p->nchunks);
        size_t ring = 0;   /* the blocks in flight of its RINGs' rings, one at a time */
        for (int i = 0; i < rk->nops; i++) {
            if (op_is_compute(rk->ops[i].kind)) computes[rk->ops[i].chunk] = 1;
            if (rk->ops[i].kind == OP_RING && plan_ring_buffer_bytes(p, &rk->ops[i]) > ring) ring = plan_ring_buffer_bytes(p, &rk->ops[i]);
        }
        PlanMem m = { .acts = V->rs[r].act_peak, .host = V->rs[r].host_peak, .workspace = plan_workspace_bytes(p, computes, 0) + ring
                                                                      + plan_grad_stage_bytes(p, r) + plan_rank_xfer_bytes(p, r, WP_XFER_ALIGN) };
        for (int b = 0; b < rk->nbufs; b++) plan_buf_mem(&rk->bufs[b], &m);
        /* a context-parallel group keeps its buffers sharded over its members, each holding
         * the 1/C it passes on and, for a master, updates (docs/context-parallel.md); a member
         * gathers the weights of the chunk it computes into one whole working buffer and writes
         * its whole gradient before the group reduce-scatters it. Activations and workspace are
         * a member's already (config.c's sizes are its share of the tokens). */
        size_t C = (size_t)wp_cp(&p->model);
        if (C > 1) {
            size_t most = 0;
            for (int c = 0; c < p->nchunks; c++)
                if (computes[c] && plan_chunk_params(p, c) > most) most = plan_chunk_params(p, c);
            m.masters /= C;
            m.weights = m.weights / C + most * wp_dtype_bytes(p->precision);
            m.grads = m.grads / C + most * wp_dtype_bytes(p->grad_precision);
        }
        rk->mem = m;
        rk->peak_mem = plan_mem_total(&m);
        if (rk->peak_mem > p->peak_mem) { p->peak_mem = rk->peak_mem; p->peak_rank = r; }
    }
    free(computes);
}

static void verifier_free(Verifier *V) {
    Plan *p = V->p;
    if (V->rs)
        for (int r = 0; r < p->nranks; r++) {
            RankState *s = &V->rs[r];
            for (int b = 0; b < p->ranks[r].nbufs; b++) val_clear(&s->bufs[b]);
            for (int i = 0; i < s->nsends; i++) val_clear(&s->sends[i].val);
            /* a turn posted but not applied (the plan was rejected on the way) still holds values */
            for (int i = 0; s->slot && i < V->maxops; i++) val_clear(&s->slot[i]);
            free(s->bufs); free(s->keep.slots); free(s->slot); free(s->matched);
            free(s->sends); free(s->recvs); free(s->touch);
        }
    if (V->gs)
        for (int g = 0; g < p->ngroups; g++) {
            GroupState *gs = &V->gs[g];
            for (int i = 0; i < gs->ncalls; i++) {
                if (!gs->calls[i]) continue;
                for (int m = 0; m < p->groups[g].n; m++) val_clear(&gs->calls[i]->in[m]);
                free(gs->calls[i]->in); free(gs->calls[i]->rank_op); free(gs->calls[i]);
            }
            free(gs->calls); free(gs->next);
        }
    free(V->rs); free(V->gs); free(V->fwd); free(V->bwd);
    replicas_free(V);
}

int plan_verify(Plan *p, char *err, size_t errlen) {
    if (!p->finished && plan_finish(p, err, errlen)) return -1;
    Verifier V = { .p = p, .err = err, .errlen = errlen };
    V.M = p->total_mbs;
    if (V.M < 1) return snprintf(err, errlen, "the plan has no micro-batches"), -1;
    V.words = (V.M + 63) / 64;
    V.rs = xcalloc((size_t)p->nranks, sizeof *V.rs);
    V.gs = xcalloc((size_t)p->ngroups + 1, sizeof *V.gs);
    V.fwd = xcalloc((size_t)p->nchunks * V.M, 1);
    V.bwd = xcalloc((size_t)p->nchunks * V.M, 1);
    for (int g = 0; g < p->ngroups; g++) V.gs[g].next = xcalloc((size_t)p->groups[g].n, sizeof(int));
    int maxops = 1;
    for (int r = 0; r < p->nranks; r++)
        for (int t = 0; t < p->nturns; t++) {
            int n = p->ranks[r].turn_start[t + 1] - p->ranks[r].turn_start[t];
            if (n > maxops) maxops = n;
        }
    V.maxops = maxops;
    for (int r = 0; r < p->nranks; r++) {
        PlanRank *rk = &p->ranks[r];
        RankState *s = &V.rs[r];
        s->bufs = xcalloc((size_t)rk->nbufs + 1, sizeof *s->bufs);
        s->touch = xcalloc((size_t)rk->nbufs + 1, sizeof *s->touch);
        s->slot = xcalloc((size_t)maxops, sizeof *s->slot);
        s->matched = xcalloc((size_t)maxops, 1);
        free(rk->notes);
        rk->notes = xcalloc((size_t)rk->nops + 1, sizeof *rk->notes);
        for (int i = 0; i < rk->nops; i++) rk->notes[i].from_rank = rk->notes[i].from_turn = rk->notes[i].chunk = -1;
        for (int b = 0; b < rk->nbufs; b++)
            if (rk->bufs[b].master) {
                Val *v = &s->bufs[b];
                v->kind = V_W; v->chunk = rk->bufs[b].chunk;
                v->shard = rk->bufs[b].shard; v->nshards = rk->bufs[b].nshards;
                v->from_rank = -1; v->from_turn = -1;
            }
        s->done = p->nturns == 0;
    }
    int rc = check_structure(&V);
    for (int r = 0; r < p->nranks; r++) V.rs[r].turn = 0;
    /* replicas that are copies of one pipeline: replica 0 executed for all (verify_replicas.c) */
    if (rc == 0 && replicas_detect(&V))
        for (int r = 0; r < p->nranks; r++)
            if (!V.active[r]) V.rs[r].done = 1;
    /* Each rank runs as far as its transfers allow; a sweep that moves no rank is a deadlock. */
    for (int progress = 1; rc == 0 && progress;) {
        progress = 0;
        for (int r = 0; r < p->nranks && rc == 0; r++) {
            RankState *s = &V.rs[r];
            while (!s->done && rc == 0) {
                if (!s->posted) {
                    int t0 = p->ranks[r].turn_start[s->turn], t1 = p->ranks[r].turn_start[s->turn + 1];
                    if ((rc = check_hazards(&V, r, t0, t1)) || (rc = comm_post(&V, r))) break;
                    s->posted = 1;
                }
                if (s->unmatched) break;
                rc = run_turn(&V, r);
                progress = 1;
            }
        }
    }
    if (rc == 0) {
        for (int r = 0; r < p->nranks && rc == 0; r++)
            if (!V.rs[r].done) rc = comm_report_deadlock(&V);
    }
    if (rc == 0 && V.active) rc = replicas_finish(&V);
    if (rc == 0) rc = check_end(&V);
    if (rc == 0) account_memory(&V);
    verifier_free(&V);
    p->verified = rc == 0;
    return rc;
}
