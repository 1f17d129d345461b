/* The ring attention of context parallelism as plan operations (RING, ir/op_table.c): make_plan
 * puts one right before every FWD, BWD and BWD_B of a plan with --context-parallel C > 1, of the
 * steps and bytes that compute's ring takes (per layer C-1 steps of S/C tokens' K and V forward;
 * K, V, dK and dV backward; both with recompute), counted here by hand for tiny; the verifier
 * counts its blocks in flight in the workspace. And the mutation test of the new kind: every RING
 * of every strategy's plan dropped, duplicated, moved one turn later, given other bytes (the low
 * or the high 32 bits), other steps or another micro-batch, and one put into a plan with C = 1:
 * each is rejected, with the rule's words. And that the simulator costs the ring from the RINGs.
 * Runs from the repository root. */
#include <stdint.h>
#include "check.h"
#include "plan_fixture.h"
#include "plan/make_plan.h"
#include "ir/op_table.h"
#include "common/modelcfg.h"
#include "util/xalloc.h"
#include "common/step.h"   /* WP_XFER_ALIGN */
#include "sim/sim.h"

static int turn_of(const PlanRank *rk, int nturns, int i) {
    int t = 0;
    while (t + 1 < nturns && rk->turn_start[t + 1] <= i) t++;
    return t;
}

/* Op i of rank r removed (*out its copy, *turn its turn), and put back. */
static void op_remove(Plan *p, int r, int i, Op *out, int *turn) {
    PlanRank *rk = &p->ranks[r];
    *out = rk->ops[i];
    *turn = turn_of(rk, p->nturns, i);
    memmove(&rk->ops[i], &rk->ops[i + 1], (size_t)(rk->nops - i - 1) * sizeof *rk->ops);
    rk->nops--;
    for (int t = *turn + 1; t <= p->nturns; t++) rk->turn_start[t]--;
}

/* op inserted at index i, in turn t (turn_start[t] <= i <= turn_start[t + 1]). */
static void op_insert(Plan *p, int r, int i, int t, const Op *op) {
    PlanRank *rk = &p->ranks[r];
    rk->ops = xrealloc(rk->ops, (size_t)(rk->nops + 1) * sizeof *rk->ops);
    memmove(&rk->ops[i + 1], &rk->ops[i], (size_t)(rk->nops - i) * sizeof *rk->ops);
    rk->ops[i] = *op;
    rk->nops++;
    rk->capops = rk->nops;
    for (int u = t + 1; u <= p->nturns; u++) rk->turn_start[u]++;
}

/* The plan verified as it now is: 0 if accepted, else -1 with the message checked for want. */
static int rejected(Plan *p, const char *what, const char *want) {
    char err[2048];
    if (plan_verify(p, err, sizeof err) == 0) { CHECK(0, "%s: accepted", what); return 0; }
    CHECK(strstr(err, want) != NULL, "%s: rejected as \"%s\", expected \"%s\"", what, err, want);
    return 1;
}

static Plan *make(const char *topo_path, const char *model, const char *strategy, int C, int recompute, int replicas,
                  Topology *t, WpConfig *m) {
    char err[2048], name[64];
    CHECK(topology_load(topo_path, t, err, sizeof err) == 0, "%s: %s", topo_path, err);
    CHECK(model_load(model, m, name, sizeof name, err, sizeof err) == 0, "%s: %s", model, err);
    StrategyOpts o = { .micro_batches = 2, .replicas = replicas ? replicas : 1, .context_parallel = C, .recompute = recompute };
    Plan *p = NULL;
    int rc = make_plan(strategy, t, m, name, &o, &p, err, sizeof err);
    CHECK(rc == 0, "%s C=%d: %s", strategy, C, err);
    return rc ? NULL : p;
}

/* tiny (4 layers, 2 kv heads of 16, seq 64, 2 sequences a micro-batch, fp32) in groups of 2: a
 * block of S/C tokens' K (or V, dK, dV) is 2 x 32 tokens x 2 x 16 x 4 bytes. */
enum { TINY_BLOCK = 2 * 32 * 2 * 16 * 4 };

static void counts(const char *strategy, int recompute) {
    Topology t; WpConfig m;
    Plan *p = make("topologies/cpu-1x4.json", "tiny", strategy, 2, recompute, 0, &t, &m);
    if (!p) { topology_free(&t); return; }
    long computes = 0, rings = 0;
    uint8_t *computed = xcalloc((size_t)p->nchunks, 1);
    for (int r = 0; r < p->nranks; r++) {
        const PlanRank *rk = &p->ranks[r];
        size_t most = 0;
        memset(computed, 0, (size_t)p->nchunks);
        for (int i = 0; i < rk->nops; i++) {
            const Op *op = &rk->ops[i];
            if (op_is_compute(op->kind)) computed[op->chunk] = 1;
            if (op->kind == OP_FWD || op->kind == OP_BWD || op->kind == OP_BWD_B) {
                computes += p->chunks[op->chunk].nlayers > 0;
                if (p->chunks[op->chunk].nlayers == 0) continue;
                /* its RING, right before it: per layer C-1 = 1 step of each pass, by hand */
                int L = p->chunks[op->chunk].nlayers, fwd = op->kind == OP_FWD || recompute, bwd = op->kind != OP_FWD;
                uint64_t bytes = (uint64_t)L * (fwd * 2 + bwd * 4) * TINY_BLOCK;
                const Op *ring = i > 0 ? &rk->ops[i - 1] : NULL;
                CHECK(ring && ring->kind == OP_RING && ring->chunk == op->chunk && ring->mb == op->mb &&
                      ring->ring_steps == L * (fwd + bwd) && op_ring_bytes(ring) == bytes,
                      "%s%s: rank %d's %s chunk %d mb %d: expected a RING of %d steps, %llu bytes before it", strategy,
                      recompute ? " --recompute" : "", r, op_names[op->kind], op->chunk, op->mb, L * (fwd + bwd),
                      (unsigned long long)bytes);
            }
            if (op->kind == OP_RING) { rings++; most = 2 * 4 * TINY_BLOCK; }   /* 2 x (K, V, dK, dV) in flight */
        }
        /* its workspace: the chunks' parts without the ring's, and the ring's blocks from its RINGs */
        size_t rest = plan_workspace_bytes(p, computed, 0) + plan_grad_stage_bytes(p, r) + plan_rank_xfer_bytes(p, r, WP_XFER_ALIGN);
        CHECK(rk->mem.workspace == rest + most, "%s: rank %d's workspace %zu, expected %zu + the ring's %zu", strategy, r,
              rk->mem.workspace, rest, most);
    }
    CHECK(rings == computes && rings > 0, "%s: %ld RINGs for %ld computes with attention", strategy, rings, computes);
    free(computed);
    plan_free(p);
    topology_free(&t);
}

/* Every RING of the plan, mutated one way at a time, each mutant rejected; the plan itself accepted. */
static void mutations(const char *topo, const char *strategy, int replicas) {
    Topology t; WpConfig m;
    Plan *p = make(topo, "tiny", strategy, 2, 0, replicas, &t, &m);
    if (!p) { topology_free(&t); return; }
    char what[160], err[2048];
    long n = 0;
    for (int r = 0; r < p->nranks; r++)
        for (int i = 0; i < p->ranks[r].nops; i++) {
            PlanRank *rk = &p->ranks[r];
            if (rk->ops[i].kind != OP_RING) continue;
            Op ring = rk->ops[i], tmp;
            int t0;
            snprintf(what, sizeof what, "%s: rank %d's RING chunk %d mb %d", strategy, r, ring.chunk, ring.mb);
            n++;
            /* dropped */
            op_remove(p, r, i, &tmp, &t0);
            rejected(p, what, "its ring attention is not in the plan");
            op_insert(p, r, i, t0, &tmp);
            /* duplicated */
            op_insert(p, r, i, t0, &ring);
            rejected(p, what, "a RING is the ring attention of the FWD, BWD or BWD_B listed right after it");
            op_remove(p, r, i, &tmp, &t0);
            /* moved to the start of the next turn (it is never its turn's last: its compute follows) */
            if (t0 + 1 < p->nturns) {
                op_remove(p, r, i, &tmp, &t0);
                op_insert(p, r, rk->turn_start[t0 + 1], t0 + 1, &tmp);
                rejected(p, what, "ring attention");
                op_remove(p, r, rk->turn_start[t0 + 1], &tmp, &t0);
                op_insert(p, r, i, t0 - 1, &tmp);
            }
            /* other bytes: one more, and 2^32 more (the high word) */
            op_set_ring_bytes(&rk->ops[i], op_ring_bytes(&ring) + 1);
            rejected(p, what, "bytes in");
            op_set_ring_bytes(&rk->ops[i], op_ring_bytes(&ring) + ((uint64_t)1 << 32));
            rejected(p, what, "bytes in");
            op_set_ring_bytes(&rk->ops[i], op_ring_bytes(&ring));
            /* other steps */
            rk->ops[i].ring_steps++;
            rejected(p, what, "steps");
            rk->ops[i].ring_steps--;
            /* another micro-batch's */
            rk->ops[i].mb = (ring.mb + 1) % p->total_mbs;
            rejected(p, what, "listed right after it");
            rk->ops[i] = ring;
        }
    CHECK(n > 0, "%s: no RING", strategy);
    CHECK(plan_verify(p, err, sizeof err) == 0, "%s: the plan put back: %s", strategy, err);
    plan_free(p);
    topology_free(&t);
}

/* A RING in a plan without context parallelism. */
static void no_ring_at_c1(void) {
    Topology t; WpConfig m;
    Plan *p = make("topologies/cpu-1x4.json", "tiny", "1f1b", 1, 0, 0, &t, &m);
    if (!p) { topology_free(&t); return; }
    for (int r = 0; r < p->nranks; r++)
        for (int i = 0; i < p->ranks[r].nops; i++) CHECK(p->ranks[r].ops[i].kind != OP_RING, "a RING in a plan of C = 1");
    int i = 0;
    while (p->ranks[0].ops[i].kind != OP_FWD) i++;
    Op ring = { .kind = OP_RING, .buf = -1, .buf2 = -1, .ring_steps = 2, .chunk = p->ranks[0].ops[i].chunk,
                .mb = p->ranks[0].ops[i].mb };
    op_set_ring_bytes(&ring, 2 * 2 * TINY_BLOCK);
    op_insert(p, 0, i, turn_of(&p->ranks[0], p->nturns, i), &ring);
    rejected(p, "a RING in a plan of C = 1", "a plan without context parallelism (C = 1) has no ring attention");
    plan_free(p);
    topology_free(&t);
}

/* The simulator and the traffic count cost the ring from the RINGs: the same verified plan with
 * every RING made 1000 times larger moves exactly the difference more inside the node (every
 * member's: C x) and takes longer (a verifier would refuse it; sim_run takes it as it is). */
static void costed_from_rings(void) {
    Topology t; WpConfig m;
    Plan *p = make("topologies/cpu-1x4.json", "tiny", "1f1b", 2, 0, 0, &t, &m);
    if (!p) { topology_free(&t); return; }
    char err[512];
    SimResult a = { 0 }, b = { 0 };
    CHECK(sim_run(p, NULL, &a, err, sizeof err) == 0, "sim: %s", err);
    double more = 0;
    for (int r = 0; r < p->nranks; r++)
        for (int i = 0; i < p->ranks[r].nops; i++) {
            Op *op = &p->ranks[r].ops[i];
            if (op->kind != OP_RING) continue;
            more += 2 * 999.0 * (double)op_ring_bytes(op);
            op_set_ring_bytes(op, 1000 * op_ring_bytes(op));
        }
    CHECK(sim_run(p, NULL, &b, err, sizeof err) == 0, "sim: %s", err);
    CHECK(b.bytes_intra - a.bytes_intra == more && b.bytes_inter == a.bytes_inter,
          "the RINGs 1000 times larger: %.0f more bytes inside the node, expected %.0f", b.bytes_intra - a.bytes_intra, more);
    CHECK(b.step_time > 2 * a.step_time, "the RINGs 1000 times larger: a step of %g s, against %g", b.step_time, a.step_time);
    sim_result_free(&a);
    sim_result_free(&b);
    plan_free(p);
    topology_free(&t);
}

int main(void) {
    fixture_init();
    static const char *strategies[] = { "weipipe-interleave", "1f1b", "fsdp", "zb1", "tawpipe" };
    for (size_t s = 0; s < sizeof strategies / sizeof *strategies; s++) {
        counts(strategies[s], 0);
        mutations("topologies/cpu-1x4.json", strategies[s], 0);
    }
    counts("1f1b", 1);
    counts("zb1", 1);
    /* two replicas, which the verifier executes once when they are alike: a RING changed in
     * replica 1 alone must still be caught */
    mutations("topologies/cpu-2x2.json", "1f1b", 2);
    no_ring_at_c1();
    costed_from_rings();
    fixture_done();
    return check_summary("test_cp_ring");
}
