/* Mutation test of the verifier: take valid plans of every strategy, apply every single-operation
 * mutation (drop it, duplicate it, move it one or two turns earlier or later, change its peer,
 * root, chunk, micro-batch or buffer) and verify each mutant. A mutant the verifier accepts must
 * still compute the same step: the toy-model interpreter (tests/plan_interp.h) checks that
 * independently. Any accepted mutant that computes something else has slipped through: fail. */
#include "check.h"
#include "plan_fixture.h"
#include "plan_interp.h"
#include "ir/op_table.h"

enum { M_DROP, M_DUP, M_EARLIER, M_EARLIER2, M_LATER, M_LATER2, M_PEER, M_CHUNK, M_MB, M_BUF, M_BUF2, M__COUNT };
static const char *mut_names[M__COUNT] = { "drop", "duplicate", "one turn earlier", "two turns earlier",
    "one turn later", "two turns later", "other peer", "other chunk", "other micro-batch", "other buffer",
    "other second buffer" };

/* Mutation m of op i of rank r; returns 0 if it does not apply to that op. */
static int mutate(const Plan *p, int r, const Op *op, int m, Op *out, int *dturn) {
    *out = *op;
    *dturn = 0;
    switch (m) {
    case M_DROP: case M_DUP: return 1;
    case M_EARLIER: *dturn = -1; return 1;
    case M_EARLIER2: *dturn = -2; return 1;
    case M_LATER: *dturn = 1; return 1;
    case M_LATER2: *dturn = 2; return 1;
    case M_PEER:
        if (op_info(op->kind)->p2p) {
            if (p->nranks < 3) return 0;
            out->peer = (op->peer + 1) % p->nranks;
            if (out->peer == r) out->peer = (out->peer + 1) % p->nranks;
            return 1;
        }
        if (op_info(op->kind)->root) {
            const PlanGroup *g = &p->groups[op->group];
            if (g->n < 2) return 0;
            int i = 0;
            while (g->ranks[i] != op->peer) i++;
            out->peer = g->ranks[(i + 1) % g->n];
            return 1;
        }
        return 0;
    case M_CHUNK:
        if (op->chunk < 0 || p->nchunks < 2) return 0;
        out->chunk = (op->chunk + 1) % p->nchunks;
        if ((op->what == WHAT_A || op->what == WHAT_G) && out->chunk == 0) out->chunk = 1;
        return out->chunk != op->chunk;
    case M_MB:
        if (op->mb < 0 || p->total_mbs < 2) return 0;
        out->mb = (op->mb + 1) % p->total_mbs;
        return 1;
    case M_BUF: {
        const PlanRank *rk = &p->ranks[r];
        if (op->buf < 0) return 0;
        for (int k = 1; k < rk->nbufs; k++) {
            int b = (op->buf + k) % rk->nbufs;
            if (rk->bufs[b].kind == rk->bufs[op->buf].kind && b != op->buf2) { out->buf = (int16_t)b; return 1; }
        }
        return 0;
    }
    case M_BUF2: {   /* the gradient a BWD or BWD_W adds into, the source of an ACC, ... */
        const PlanRank *rk = &p->ranks[r];
        if (op->buf2 < 0) return 0;
        for (int k = 1; k < rk->nbufs; k++) {
            int b = (op->buf2 + k) % rk->nbufs;
            if (rk->bufs[b].kind == rk->bufs[op->buf2].kind && b != op->buf) { out->buf2 = (int16_t)b; return 1; }
        }
        return 0;
    }
    }
    return 0;
}

/* >= 0: mutant() moves the op to this turn instead (the B/W cases below). */
static int force_turn = -1;

/* A copy of p with op i of rank r mutated (m), finished but not verified; NULL if the builder
 * itself refuses it (that counts as rejected). */
static Plan *mutant(const Plan *p, int r0, int i0, int m) {
    char err[512];
    Plan *q = plan_new(p->topo, &p->model, p->strategy, p->nranks);
    q->replicas = p->replicas; q->micro_batches = p->micro_batches; q->total_mbs = p->total_mbs;
    int layers[256];
    for (int c = 0; c < p->nchunks; c++) layers[c] = p->chunks[c].nlayers;
    plan_set_chunks(q, layers, p->nchunks, err, sizeof err);
    for (int c = 0; c < p->nchunks; c++)
        if (p->chunks[c].replicated) plan_set_replicated(q, c, err, sizeof err);
    for (int c = 0; c < p->nchunks; c++)
        for (int i = 0; i < p->chunks[c].nowners; i++) plan_add_owner(q, c, p->chunks[c].owners[i], err, sizeof err);
    for (int g = 0; g < p->ngroups; g++) plan_add_group(q, p->groups[g].ranks, p->groups[g].n, err, sizeof err);
    for (int r = 0; r < p->nranks; r++) {
        const PlanRank *rk = &p->ranks[r];
        q->ranks[r].replica = rk->replica; q->ranks[r].stage = rk->stage;
        for (int b = 0; b < rk->nbufs; b++)
            plan_add_buf(q, r, rk->bufs[b].name, rk->bufs[b].kind, rk->bufs[b].chunk, rk->bufs[b].master,
                         rk->bufs[b].shard, rk->bufs[b].nshards, err, sizeof err);
        for (int t = 0; t < p->nturns; t++)
            for (int i = rk->turn_start[t]; i < rk->turn_start[t + 1]; i++) {
                Op op = rk->ops[i];
                int dt = 0, ok = 0;
                if (r == r0 && i == i0) {
                    Op mo;
                    mutate(p, r, &rk->ops[i], m, &mo, &dt);
                    if (force_turn >= 0) dt = force_turn - t;
                    if (m == M_DROP) continue;
                    if (m == M_DUP) ok |= plan_add_op(q, r, t, &op, err, sizeof err);
                    op = mo;
                }
                if (t + dt < 0) { plan_free(q); return NULL; }
                ok |= plan_add_op(q, r, t + dt, &op, err, sizeof err);
                if (ok) { plan_free(q); return NULL; }
            }
    }
    if (plan_finish(q, err, sizeof err)) { plan_free(q); return NULL; }
    return q;
}

static long slipped;

/* The B/W rules of the split backward, case by case on a zero-bubble plan: every BWD_W of the
 * plan moved into the turn before its BWD_B (W before B), dropped, or moved past the update of its
 * chunk (its gradient applied without it): each must be rejected, naming the rule. */
static void bw_rules(const char *strategy, const Plan *p) {
    int cases = 0;
    char err[1024];
    for (int r = 0; r < p->nranks; r++) {
        const PlanRank *rk = &p->ranks[r];
        for (int t = 0; t < p->nturns; t++)
            for (int i = rk->turn_start[t]; i < rk->turn_start[t + 1]; i++) {
                const Op *w = &rk->ops[i];
                if (w->kind != OP_BWD_W) continue;
                int tb = -1;   /* the turn of its B pass */
                for (int u = 0; u <= t && tb < 0; u++)
                    for (int k = rk->turn_start[u]; k < rk->turn_start[u + 1]; k++)
                        if (rk->ops[k].kind == OP_BWD_B && rk->ops[k].chunk == w->chunk && rk->ops[k].mb == w->mb) tb = u;
                CHECK(tb >= 0, "%s: rank %d's BWD_W of chunk %d mb %d has no BWD_B before it", strategy, r, w->chunk, w->mb);
                if (tb < 1) continue;
                const char *want[3] = { "has not run on this rank", "BWD_W", "BWD_W" };
                for (int c = 0; c < 3; c++) {
                    force_turn = c == 0 ? tb - 1 : c == 2 ? p->nturns + 1 : -1;
                    Plan *q = mutant(p, r, i, c == 1 ? M_DROP : M_EARLIER);
                    force_turn = -1;
                    int rc = q ? plan_verify(q, err, sizeof err) : -1;
                    CHECK(rc != 0, "%s: rank %d, BWD_W chunk %d mb %d %s: verified", strategy, r, w->chunk, w->mb,
                          c == 0 ? "before its BWD_B" : c == 1 ? "dropped" : "after the update");
                    /* moved into another turn it may first break that turn's hazard rule */
                    int named = !q || rc == 0 || strstr(err, want[c]) || (c == 0 && strstr(err, "of the same turn"));
                    CHECK(named, "%s: rank %d, BWD_W chunk %d mb %d: rejected for another reason: %s",
                          strategy, r, w->chunk, w->mb, err);
                    cases++;
                    plan_free(q);
                }
            }
    }
    CHECK(cases > 0, "%s: no BWD_W to mutate", strategy);
    printf("%-20s B/W rules: %d mutants of BWD_W (before its B, dropped, after the update) checked\n", strategy, cases);
}

/* plan:place mutants: a rank in a replica or at a stage that does not exist, two ranks at one
 * place, the plan's replica count off by one. The runtime would train them wrong (a rank in
 * replica 1000000 trained with a zero gradient norm and wrote an all-zero checkpoint): every one
 * must be rejected. */
static void placement_mutants(const char *strategy, const Plan *p) {
    int per = p->nranks / p->replicas, last = p->nranks - 1;
    for (int m = 0; m < 6; m++) {
        Plan *q = mutant(p, -1, -1, M_DROP);   /* a copy: no operation mutated */
        if (!q) { CHECK(0, "%s: the copy of a valid plan was refused", strategy); return; }
        const char *what = "";
        switch (m) {
        case 0: q->ranks[0].replica = 1000000; what = "rank 0 in replica 1000000"; break;
        case 1: q->ranks[last].replica = -1; what = "a rank in replica -1"; break;
        case 2: q->ranks[last].stage = per; what = "a rank at a stage past the pipeline's end"; break;
        case 3: q->ranks[1].replica = q->ranks[0].replica; q->ranks[1].stage = q->ranks[0].stage; what = "two ranks at one place"; break;
        case 4: q->replicas = p->replicas + 1; what = "one replica more than placed"; break;
        case 5: q->replicas = p->replicas > 1 ? p->replicas - 1 : 4; what = "a replica count that does not match"; break;
        }
        char err[512] = "";
        int rc = plan_verify(q, err, sizeof err);
        CHECK(rc != 0, "%s, %d replica(s): %s verified", strategy, p->replicas, what);
        CHECK(rc == 0 || !strchr(err, '\n'), "%s: the rejection is not one line: %s", strategy, err);
        plan_free(q);
    }
}

/* The TIE rules, case by case on a tied plan: every TIE (or one member's TIE_ALLREDUCE, where the
 * two ends are on two ranks) dropped (each OPT of chunk 0 or of the last chunk would update a
 * master with its own gradient: the mirror would diverge from the embedding), duplicated (summed
 * twice), or moved a turn earlier (before the all-reduces complete the gradients): each rejected,
 * a local TIE's by the rule that names it. A TIE_ALLREDUCE's partner may be the first to fail
 * (its call never completes, or meets the duplicate in its turn); and the member whose gradient
 * was complete a turn before its partner's may post a turn earlier: the call completes when the
 * partner posts, and the interpreter must find the step unchanged. */
static void tie_rules(const char *strategy, const Plan *p, double (*ref)[IW]) {
    int cases = 0, ties = 0;
    char err[1024];
    for (int r = 0; r < p->nranks; r++)
        for (int i = 0; i < p->ranks[r].nops; i++) {
            int kind = p->ranks[r].ops[i].kind;
            if (kind != OP_TIE && kind != OP_TIE_ALLREDUCE) continue;
            ties++;
            const int muts[3] = { M_DROP, M_DUP, M_EARLIER };
            const char *want[3] = { "must first be summed by TIE", "tied twice", "incomplete" };
            for (int k = 0; k < 3; k++) {
                Plan *q = mutant(p, r, i, muts[k]);
                int rc = q ? plan_verify(q, err, sizeof err) : -1;
                double diff = 1;
                if (rc == 0 && kind == OP_TIE_ALLREDUCE && muts[k] == M_EARLIER) {
                    CHECK(interp_run(q, ref, &diff) == 0 && diff < 1e-12, "%s: rank %d, TIE_ALLREDUCE a turn earlier: "
                          "verified, and computes another step", strategy, r);
                    plan_free(q);
                    cases++;
                    continue;
                }
                CHECK(rc != 0, "%s: rank %d, %s %s: verified", strategy, r, op_names[kind], mut_names[muts[k]]);
                CHECK(!q || rc == 0 || strstr(err, want[k]) || (k == 2 && strstr(err, "of the same turn")) ||
                      (kind == OP_TIE_ALLREDUCE && (strstr(err, "never completes") || strstr(err, "deadlock") ||
                                                    strstr(err, "of the same turn"))),
                      "%s: rank %d, %s %s: rejected for another reason: %s", strategy, r, op_names[kind], mut_names[muts[k]], err);
                CHECK(!q || rc == 0 || !strchr(err, '\n'), "%s: the rejection is not one line: %s", strategy, err);
                plan_free(q);
                cases++;
            }
        }
    /* one TIE on every rank (weipipe, fsdp: both ends everywhere), or a pair per replica */
    int want_ties = strstr(strategy, "weipipe") || !strcmp(strategy, "fsdp") ? p->nranks : 2 * p->replicas;
    CHECK(ties == want_ties, "%s: %d TIEs, expected %d", strategy, ties, want_ties);
    printf("%-20s TIE rules: %d mutants (dropped, duplicated, a turn earlier) of %d TIE%s rejected\n", strategy, cases, ties,
           ties > 1 ? "s" : "");
}

/* pass_mbs: weipipe's micro-batches per weight pass (--pass-micro-batches), 0: the strategy's;
 * ends: --replicate-ends */
static int ends, tied;
static void run(const char *strategy, int nodes, const int *per, int mbs, int replicas, int pass_mbs, long *total, long *rejected, long *same) {
    Topology t;
    if (fixture_topology(&t, nodes, per)) { CHECK(0, "topology"); return; }
    WpConfig m = fixture_model(4);
    m.tied = tied;
    char err[1024];
    StrategyOpts o = { .micro_batches = mbs, .replicas = replicas };
    if (pass_mbs) opts_set_int(&o, "pass_micro_batches", pass_mbs);
    if (ends) opts_set_bool(&o, "replicate_ends", 1);
    Plan *p = fixture_plan_opts(&t, &m, strategy, &o, err, sizeof err);
    CHECK(p != NULL, "%s: %s", strategy, err);
    if (!p) { topology_free(&t); return; }
    placement_mutants(strategy, p);
    if (strstr(strategy, "zb")) bw_rules(strategy, p);
    double (*ref)[IW] = malloc((size_t)p->nchunks * sizeof *ref), diff;
    interp_reference_tied(p->nchunks, p->total_mbs, interp_tied(p), ref);
    if (tied) tie_rules(strategy, p, ref);
    long n0 = *total, rej0 = *rejected, same0 = *same;
    for (int r = 0; r < p->nranks; r++)
        for (int i = 0; i < p->ranks[r].nops; i++)
            for (int mu = 0; mu < M__COUNT; mu++) {
                Op dummy;
                int dt;
                if (!mutate(p, r, &p->ranks[r].ops[i], mu, &dummy, &dt)) continue;
                (*total)++;
                Plan *q = mutant(p, r, i, mu);
                if (!q || plan_verify(q, err, sizeof err)) { (*rejected)++; plan_free(q); continue; }
                int rc = interp_run(q, ref, &diff);
                if (rc == 0 && diff < 1e-12) (*same)++;
                else {
                    slipped++;
                    char what[160];
                    op_format(p, r, &p->ranks[r].ops[i], what, sizeof what);
                    CHECK(0, "%s: mutant slipped through: rank %d, op %d (%s): %s (%s)", strategy, r, i, what,
                          mut_names[mu], rc ? "the step cannot run" : "it computes another step");
                }
                plan_free(q);
            }
    char kdesc[64] = "";
    if (pass_mbs) snprintf(kdesc, sizeof kdesc, ", K=%d", pass_mbs);
    if (ends) snprintf(kdesc + strlen(kdesc), sizeof kdesc - strlen(kdesc), ", replicated ends");
    if (tied) snprintf(kdesc + strlen(kdesc), sizeof kdesc - strlen(kdesc), ", tied");
    printf("%-20s %d ranks, %d replica(s), %d mb/rank%s: %5ld mutants, %5ld rejected, %4ld accepted and equivalent\n",
           strategy, p->nranks, replicas, mbs, kdesc, *total - n0, *rejected - rej0, *same - same0);
    free(ref);
    plan_free(p);
    topology_free(&t);
}

int main(void) {
    fixture_init();
    const char *strategies[] = { "weipipe-naive", "weipipe-interleave", "1f1b", "fsdp", "tawpipe", "zb1", "weipipe-zb1", "weipipe-zb2" };
    long total = 0, rejected = 0, same = 0;
    for (size_t s = 0; s < sizeof strategies / sizeof *strategies; s++) {
        char path[256];
        if (strategy_resolve(strategies[s], path, sizeof path)) { CHECK(0, "no strategy %s", strategies[s]); continue; }
        int two[] = { 2, 2 }, four[] = { 4 };
        run(strategies[s], 2, two, 2, 1, 0, &total, &rejected, &same);
        run(strategies[s], 1, four, 1, 2, 0, &total, &rejected, &same);
    }
    /* K = 2 micro-batches per weight pass of 3: a round of 2 and a shorter last round */
    int two[] = { 2, 2 };
    run("weipipe-interleave", 2, two, 3, 1, 2, &total, &rejected, &same);
    /* replicated ends (--replicate-ends): the ends' FWD, BWD, all-reduce over all ranks and OPT on
     * every rank; with replicas, where the all-reduce spans them */
    ends = 1;
    run("weipipe-interleave", 2, two, 2, 1, 0, &total, &rejected, &same);
    run("weipipe-naive", 1, (int[]){ 4 }, 1, 2, 0, &total, &rejected, &same);
    run("weipipe-zb1", 2, two, 2, 1, 0, &total, &rejected, &same);
    /* tied embeddings: the TIE of the embedding's and the head mirror's gradients on every rank */
    tied = 1;
    run("weipipe-interleave", 2, two, 2, 1, 0, &total, &rejected, &same);
    run("weipipe-zb2", 1, (int[]){ 4 }, 1, 2, 0, &total, &rejected, &same);
    /* ... and between the first stage and the last (TIE_ALLREDUCE), or two owners */
    ends = 0;
    run("1f1b", 2, two, 2, 1, 0, &total, &rejected, &same);
    run("1f1b", 1, (int[]){ 4 }, 1, 2, 0, &total, &rejected, &same);
    run("zb1", 2, two, 2, 1, 0, &total, &rejected, &same);
    run("tawpipe", 2, two, 2, 1, 0, &total, &rejected, &same);
    run("tawpipe", 1, (int[]){ 4 }, 1, 2, 0, &total, &rejected, &same);
    /* fsdp: the ends replicated, TIE on every rank */
    run("fsdp", 2, two, 2, 1, 0, &total, &rejected, &same);
    run("fsdp", 1, (int[]){ 4 }, 1, 2, 0, &total, &rejected, &same);
    tied = 0;
    printf("mutation test: %ld mutants, %ld rejected by the verifier, %ld accepted and equivalent, %ld slipped through\n",
           total, rejected, same, slipped);
    fixture_done();
    return check_summary("test_mutation");
}
