/* Every shipped strategy, on 1..16, 24 and 32 ranks, several micro-batch counts, with and
 * without replicas and with other chunk counts: the plan must verify, and running it with the
 * toy-model interpreter must give exactly the step computed directly. In bf16 the same plan (same
 * turns and operations; TawPipe with fp32 gradients may place otherwise) verifies and computes the
 * same step; with bf16 gradients too it moves exactly half the bytes of fp32, and with fp32
 * gradients between the two. */
#include "check.h"
#include "plan_fixture.h"
#include "plan_interp.h"

static const char *strategies[] = { "weipipe-naive", "weipipe-interleave", "1f1b", "fsdp", "tawpipe", "zb1", "weipipe-zb1", "weipipe-zb2" };
static const int rank_counts[] = { 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 24, 32 };

static void check_one(const char *s, int nodes, const int *per, int mbs, int replicas, int chunks, int layers) {
    Topology t;
    if (fixture_topology(&t, nodes, per)) { CHECK(0, "topology"); return; }
    WpConfig m = fixture_model(layers);
    char err[1024];
    Plan *p = fixture_plan(&t, &m, s, mbs, replicas, chunks, err, sizeof err);
    CHECK(p != NULL, "%s on %d ranks, %d micro-batches, %d replicas, chunks %d: %s", s, t.ndevices, mbs, replicas, chunks, err);
    if (p) {
        double (*ref)[IW] = malloc((size_t)p->nchunks * sizeof *ref), diff;
        interp_reference(p->nchunks, p->total_mbs, ref);
        int rc = interp_run(p, ref, &diff);
        CHECK(rc == 0 && diff < 1e-12, "%s on %d ranks, %d micro-batches, %d replicas: the interpreter %s (diff %g)", s,
              t.ndevices, mbs, replicas, rc ? "could not run it" : "computes another step", diff);
        free(ref);
        double intra, inter;
        plan_traffic(p, &intra, &inter);
        static const WpDtype grads[] = { WP_BF16, WP_FP32 };
        for (int gi = 0; gi < 2; gi++) {
            StrategyOpts o = { .micro_batches = mbs, .replicas = replicas, .chunks = chunks, .precision = WP_BF16, .grad_precision = grads[gi] };
            Plan *q = fixture_plan_opts(&t, &m, s, &o, err, sizeof err);
            CHECK(q != NULL, "%s on %d ranks in bf16 (gradients %s): %s", s, t.ndevices, wp_dtype_name(grads[gi]), err);
            if (!q) continue;
            /* TawPipe's placement weighs weight bytes against gradient bytes: with bf16 weights and
             * fp32 gradients it may choose another placement, so another plan */
            int tawpipe_mixed = !strcmp(s, "tawpipe") && grads[gi] == WP_FP32;
            int same = q->nturns == p->nturns;
            for (int r = 0; r < p->nranks && same; r++) same = q->ranks[r].nops == p->ranks[r].nops;
            CHECK(same || tawpipe_mixed, "%s on %d ranks: the bf16 plan has other turns or operations", s, t.ndevices);
            double (*ref2)[IW] = malloc((size_t)q->nchunks * sizeof *ref2);
            interp_reference(q->nchunks, q->total_mbs, ref2);
            CHECK(interp_run(q, ref2, &diff) == 0 && diff < 1e-12, "%s on %d ranks: the bf16 plan computes another step", s, t.ndevices);
            free(ref2);
            double qi, qx;
            plan_traffic(q, &qi, &qx);
            if (grads[gi] == WP_BF16)
                CHECK(2 * qi == intra && 2 * qx == inter, "%s on %d ranks, %d micro-batches, %d replicas: bf16 moves %.0f + %.0f bytes, "
                      "fp32 %.0f + %.0f", s, t.ndevices, mbs, replicas, qi, qx, intra, inter);
            else if (!tawpipe_mixed)
                CHECK(2 * qi >= intra && qi <= intra && 2 * qx >= inter && qx <= inter, "%s on %d ranks: bf16 with fp32 gradients "
                      "moves %.0f + %.0f bytes, fp32 %.0f + %.0f", s, t.ndevices, qi, qx, intra, inter);
            plan_free(q);
        }
        plan_free(p);
    }
    topology_free(&t);
}

int main(void) {
    fixture_init();
    int per[64];
    for (size_t si = 0; si < sizeof strategies / sizeof *strategies; si++) {
        char path[256];
        if (strategy_resolve(strategies[si], path, sizeof path)) { CHECK(0, "no strategy %s", strategies[si]); continue; }
        for (size_t ri = 0; ri < sizeof rank_counts / sizeof *rank_counts; ri++) {
            int n = rank_counts[ri];
            /* one node, and two nodes when the count splits */
            per[0] = n;
            for (int mbs = 1; mbs <= 3; mbs++) check_one(strategies[si], 1, per, mbs, 1, 0, 32);
            if (n % 2 == 0) {
                per[0] = per[1] = n / 2;
                check_one(strategies[si], 2, per, 2, 1, 0, 32);
                check_one(strategies[si], 2, per, 2, 2, 0, 32);     /* 2 replicas of n/2 */
            }
        }
        /* other chunk counts (1f1b: multiples of the stages, its interleaved form) */
        per[0] = 4;
        if (!strcmp(strategies[si], "zb1")) {
            check_one(strategies[si], 1, per, 2, 1, 4, 12);       /* ZB-H1: one chunk per stage only */
        } else if (strcmp(strategies[si], "1f1b")) {
            int cs[] = { 1, 2, 3, 6, 8, 12 };
            for (size_t ci = 0; ci < sizeof cs / sizeof *cs; ci++) check_one(strategies[si], 1, per, 2, 1, cs[ci], 12);
        } else {
            check_one(strategies[si], 1, per, 2, 1, 8, 12);
            check_one(strategies[si], 1, per, 3, 1, 12, 12);
        }
        /* an uneven cluster: nodes of 2, 1 and 3 devices */
        per[0] = 2; per[1] = 1; per[2] = 3;
        check_one(strategies[si], 3, per, 2, 1, 0, 12);
    }
    fixture_done();
    return check_summary("test_strategies");
}
