/* The simulator's invariants: the bubble of 1F1B and WeiPipe-Interleave with free communication
 * and backward = 2 x forward is (P-1)/(M+P-1), M the micro-batches of the whole step (P ranks x N
 * per rank: for 1F1B, N per pipeline stage, so M per pipeline; for WeiPipe, N per rank, M in
 * all); more link bandwidth never makes a step slower; compute-only steps scale with the
 * device's speed; a hand-made plan's step time and contention computed by hand; memory
 * accounting of that plan by hand; both in fp32 and bf16. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "check.h"
#include "plan_fixture.h"
#include "sim/sim.h"
#include "ir/op_table.h"
#include "cost/costs.h"
#include "cost/calib.h"

static double run(const Plan *p, const SimOptions *o, SimResult *r) {
    char err[512];
    if (sim_run(p, o, r, err, sizeof err)) { fprintf(stderr, "sim: %s\n", err); return -1; }
    return r->step_time;
}

static double step_of(const Plan *p, const SimOptions *o) {
    SimResult r;
    double s = run(p, o, &r);
    if (s >= 0) sim_result_free(&r);
    return s;
}

/* A copy of t with every link's bandwidth times f and every device's FLOP/s and memory bandwidth
 * times flops_f (names and nodes shared: do not free). */
static Topology scaled(const Topology *t, double f, double flops_f) {
    Topology u = *t;
    u.nodes = malloc((size_t)t->nnodes * sizeof *u.nodes);
    memcpy(u.nodes, t->nodes, (size_t)t->nnodes * sizeof *u.nodes);
    for (int i = 0; i < t->nnodes; i++) u.nodes[i].intra.bw *= f;
    u.net.bw *= f;
    u.types = malloc((size_t)t->ntypes * sizeof *u.types);
    memcpy(u.types, t->types, (size_t)t->ntypes * sizeof *u.types);
    for (int i = 0; i < t->ntypes; i++) u.types[i].peak_flops *= flops_f, u.types[i].hbm_bw *= flops_f;
    return u;
}
static void scaled_free(Topology *u) { free(u->nodes); free(u->types); }

/* The papers' bubble, (P-1)/(M+P-1), with free communication, free memory-bound operations and
 * BWD = 2 FWD (every FWD one unit, whatever its chunk: the papers' equal stages), for M = P x N
 * micro-batches in the step:
 *   - 1F1B (N per pipeline stage, so M per pipeline) runs into it exactly, with each rank
 *     advancing on its own as the runtime does: its forward/backward dependencies are real;
 *   - WeiPipe-Interleave (N per rank, M in all) runs into it exactly when the turns are in
 *     lockstep, the papers' model, for N >= 2 (with N = 1 there is no forward to pair with a
 *     backward and the schedule is the naive one). Run as the runtime runs it, each rank on its
 *     own, its bubble is smaller: weights do not wait for anyone's compute, so the fill does not
 *     cost a full turn per rank. It never exceeds the formula. */
static void test_bubble(void) {
    const char *strategies[] = { "1f1b", "weipipe-interleave" };
    int Ps[] = { 2, 4, 8 }, Ns[] = { 1, 2, 4 };
    for (int si = 0; si < 2; si++)
        for (int pi = 0; pi < 3; pi++)
            for (int ni = 0; ni < 3; ni++) {
                int P = Ps[pi], N = Ns[ni];
                Topology t;
                int per[] = { P };
                if (fixture_topology(&t, 1, per)) { CHECK(0, "topology"); return; }
                WpConfig m = fixture_model(P);
                char err[2048];
                Plan *p = fixture_plan(&t, &m, strategies[si], N, 1, 0, err, sizeof err);
                CHECK(p != NULL, "%s P=%d N=%d: %s", strategies[si], P, N, err);
                if (p) {
                    int M = P * N;
                    double formula = (double)(P - 1) / (M + P - 1);
                    CHECK(p->total_mbs == M, "%s: total_mbs %d, expected %d", strategies[si], p->total_mbs, M);
                    for (int ls = 0; ls < 2; ls++) {
                        SimOptions o = { .free_comm = 1, .free_local = 1, .unit_fwd_s = 1e-3, .lockstep = ls };
                        SimResult r;
                        if (run(p, &o, &r) < 0) { CHECK(0, "sim"); continue; }
                        char what[96];
                        snprintf(what, sizeof what, "%s P=%d N=%d M=%d%s bubble", strategies[si], P, N, M, ls ? " lockstep" : "");
                        int exact = si == 0 ? !ls : ls && N >= 2;
                        if (exact) {
                            CHECK_CLOSE(r.bubble_ratio, formula, 1e-9, 1e-12, what);
                            /* the step: M + P - 1 slots of forward + backward of one chunk */
                            CHECK_CLOSE(r.step_time, 3e-3 * (M + P - 1), 1e-9, 1e-12, what);
                        } else if (si == 1 && !ls) {
                            CHECK(r.bubble_ratio <= formula + 1e-12, "%s: %.6f above the formula's %.6f", what, r.bubble_ratio, formula);
                        } else if (si == 0 && ls) {
                            CHECK(r.bubble_ratio >= formula - 1e-12, "%s: lockstep %.6f below %.6f", what, r.bubble_ratio, formula);
                        }
                        sim_result_free(&r);
                    }
                    plan_free(p);
                }
                topology_free(&t);
            }
}

/* More bandwidth on every link never makes a step slower; compute-only scaling is exact. */
static void test_monotone_and_scaling(void) {
    const char *strategies[] = { "weipipe-naive", "weipipe-interleave", "1f1b", "fsdp" };
    int shapes[][5] = { { 2, 2, 2 }, { 3, 2, 1, 3 }, { 1, 4 }, { 4, 2, 2, 2, 2 } };   /* nodes, devices per node */
    for (int sh = 0; sh < 4; sh++) {
        int nodes = shapes[sh][0], *per = &shapes[sh][1];
        Topology t;
        if (fixture_topology(&t, nodes, per)) { CHECK(0, "topology"); return; }
        WpConfig m = fixture_model(8);
        m.hidden = 64; m.heads = 4; m.kv_heads = 2; m.head_dim = 16; m.ffn = 128; m.seq = 32; m.vocab = 128;
        for (int si = 0; si < 4; si++) {
            char err[2048];
            Plan *p = fixture_plan(&t, &m, strategies[si], 2, 1, 0, err, sizeof err);
            if (!p) continue;   /* a strategy may refuse a shape */
            double prev = step_of(p, NULL);
            CHECK(prev > 0, "%s: step %g", strategies[si], prev);
            double fs[] = { 1.5, 2, 4, 16, 1e3 };
            for (int k = 0; k < 5; k++) {
                Topology u = scaled(&t, fs[k], 1);
                SimOptions o = { .topo = &u };
                double s = step_of(p, &o);
                CHECK(s <= prev * (1 + 1e-9), "%s shape %d: bandwidth x%g: step %.9g, before %.9g", strategies[si], sh, fs[k], s, prev);
                prev = s;
                scaled_free(&u);
            }
            /* free communication is the limit of infinite bandwidth and no latency */
            SimOptions fc = { .free_comm = 1 };
            double sf = step_of(p, &fc);
            CHECK(sf <= prev * (1 + 1e-9), "%s: free communication %.9g slower than fast links %.9g", strategies[si], sf, prev);
            /* compute only: twice the FLOP/s and memory bandwidth halves the step exactly (the
             * defaults have no fixed cost per call) */
            SimOptions c1 = { .free_comm = 1, .free_local = 1 };
            double a = step_of(p, &c1);
            Topology u = scaled(&t, 1, 2);
            SimOptions c2 = { .topo = &u, .free_comm = 1, .free_local = 1 };
            double b = step_of(p, &c2);
            CHECK_CLOSE(b, a / 2, 1e-9, 0, "compute-only step at twice the FLOP/s");
            scaled_free(&u);
            /* tokens per second per device is what the step's tokens over its time say */
            SimResult r;
            if (run(p, NULL, &r) >= 0) {
                double tokens = (double)p->total_mbs * m.mbs * m.seq;
                CHECK_CLOSE(r.tokens_per_s_per_device, tokens / r.step_time / p->nranks, 1e-12, 0, "tokens/s per device");
                CHECK(r.bubble_ratio >= 0 && r.bubble_ratio < 1, "bubble %g", r.bubble_ratio);
                double intra, inter;
                plan_traffic(p, &intra, &inter);
                double sum = 0;
                for (int l = 0; l < LINK__COUNT; l++) sum += r.link_bytes[l];
                CHECK_CLOSE(sum, intra + inter, 1e-12, 1, "flows carry the bytes plan_traffic counts");
                CHECK_CLOSE(r.link_bytes[LINK_NET], inter, 1e-12, 1, "network flows carry the inter-node bytes");
                sim_result_free(&r);
            }
            plan_free(p);
        }
        topology_free(&t);
    }
}

/* Rank 0 (alone on node 0) owns the single chunk and sends its weights to every other rank (all
 * on node 1): they share node 0's NIC. Each rank runs one micro-batch forward and backward;
 * the gradients come back over node 0's NIC, rank 0 adds them up and updates. */
static const char *handmade =
    "return { build = function(plan, ctx)\n"
    "  local P = ctx.opts.ranks\n"
    "  plan:chunks({ ctx.model.layers })\n"
    "  plan:owner(0, 0)\n"
    "  plan:buffer(0, 'm0', 'W', { chunk = 0, master = true })\n"
    "  plan:buffer(0, 'd', 'D', { chunk = 0 })\n"
    "  for r = 1, P - 1 do\n"
    "    plan:buffer(r, 'w', 'W', { chunk = 0 })\n"
    "    plan:buffer(r, 'd', 'D', { chunk = 0 })\n"
    "    plan:buffer(0, 'in' .. r, 'D', { chunk = 0 })\n"
    "    plan:send(0, 0, 'W', 'm0', r); plan:recv(r, 0, 'W', 'w', 0)\n"
    "  end\n"
    "  for r = 0, P - 1 do\n"
    "    local w = r == 0 and 'm0' or 'w'\n"
    "    plan:fwd(r, 1, 0, r, w)\n"
    "    plan:bwd(r, 2, 0, r, w, 'd')\n"
    "  end\n"
    "  for r = 1, P - 1 do\n"
    "    plan:send(r, 3, 'D', 'd', 0); plan:recv(0, 3, 'D', 'in' .. r, r); plan:acc(0, 3, 'd', 'in' .. r)\n"
    "    plan:free(r, 3, 'w')\n"
    "  end\n"
    "  plan:opt(0, 4, 0, 'm0', 'd')\n"
    "end }\n";

/* The handmade plan in each precision, everything by hand: elements n, master fp32 (AdamW m, v
 * beside it, and a bf16 working copy when the precision is bf16), weights on the wire at the
 * precision (w bytes per element), gradients at the grad precision (g bytes) except the gradient
 * OPT reads, the owner's fp32 accumulator 'd' on rank 0. */
static void test_handmade(void) {
    char path[400];
    snprintf(path, sizeof path, "%s/handmade.lua", fixture_dir);
    FILE *f = fopen(path, "w");
    fputs(handmade, f);
    fclose(f);
    static const WpDtype settings[][2] = { { WP_FP32, WP_FP32 }, { WP_BF16, WP_FP32 }, { WP_BF16, WP_BF16 } };
    for (int si = 0; si < 3; si++)
    for (int P = 2; P <= 4; P++) {
        WpDtype prec = settings[si][0], grad = settings[si][1];
        Topology t;
        int per[] = { 1, P - 1 };
        if (fixture_topology(&t, 2, per)) { CHECK(0, "topology"); return; }
        WpConfig m = fixture_model(2);
        char err[2048];
        StrategyOpts o = { .micro_batches = 1, .replicas = 1, .precision = prec, .grad_precision = grad };
        Plan *p = fixture_plan_opts(&t, &m, path, &o, err, sizeof err);
        CHECK(p != NULL, "handmade P=%d: %s", P, err);
        if (!p) { topology_free(&t); continue; }
        /* by hand: fixture network 1 GB/s, 10 us; 10 GB/s memory; forward and backward at the
         * cost model's rates (checked by hand in test_costs) */
        double n = (double)plan_chunk_params(p, 0), w = (double)wp_dtype_bytes(prec), g = (double)wp_dtype_bytes(grad);
        double bw = 1e9, lat = 10e-6, hbm = 10e9;
        WpChunk k = wp_chunk_make(&m, 0, 0, 2, 1, 1);
        double ff[COST__COUNT], fb[COST__COUNT], coef[COST__COUNT];
        cost_compute_features(&m, 0, 0, 2, 1, OP_FWD, 0, prec, 0, ff);
        cost_compute_features(&m, 0, 0, 2, 1, OP_BWD, 0, prec, 0, fb);
        calib_coefs(NULL, &t.types[0], prec, coef);
        double fb3 = cost_seconds(ff, coef) + cost_seconds(fb, coef);   /* one forward and its backward */
        double xfer_w = lat + (P - 1) * n * w / bw;   /* P-1 flows share one NIC */
        double xfer_d = lat + (P - 1) * n * g / bw;
        /* ACC: the fp32 accumulator read and written, the arrived gradient read; OPT: master,
         * m, v read and written, the gradient read, and in bf16 the working copy written */
        double acc = (2 * 4 + g) * n / hbm, opt = (7 * 4 + (prec == WP_BF16 ? 2 : 0)) * n / hbm;
        /* a CPU's core copies what it receives (a read and a write per byte at the memory rate):
         * each rank its weights, while it waits for them; rank 0 the P-1 gradients, one after
         * the other, once they have arrived together */
        double copy_w = 2 * n * w * coef[COST_BYTES], copy_d = 2 * n * g * coef[COST_BYTES];
        /* the step's end (train/loop.c): rank 0 reads its fp32 gradient for the norm, every rank
         * meets in the norm's all-reduce, then rank 0 updates (OPT runs there, not in turn 4) */
        double norm = 4 * n / hbm;
        double sync = xfer_w + copy_w + fb3 + xfer_d + (P - 1) * copy_d + (P - 1) * acc + norm, expect = sync + opt;
        SimResult r;
        if (run(p, NULL, &r) >= 0) {
            char what[96];
            snprintf(what, sizeof what, "handmade %s/%s P=%d step", wp_dtype_name(prec), wp_dtype_name(grad), P);
            CHECK_CLOSE(r.step_time, expect, 1e-9, 1e-15, what);
            /* a receiving rank, with nothing to update, ends at the norm's all-reduce */
            snprintf(what, sizeof what, "handmade P=%d rank 1 end", P);
            CHECK_CLOSE(r.rank_end[1], sync, 1e-9, 1e-15, what);
            CHECK_CLOSE(r.bubble_ratio, 1 - P * fb3 / (P * expect), 1e-9, 1e-15, "handmade bubble");
            CHECK_CLOSE(r.link_bytes[LINK_NET], (P - 1) * n * (w + g), 1e-12, 0, "handmade network bytes");
            sim_result_free(&r);
        }
        /* memory by hand: rank 0 holds the master (12 bytes per element with AdamW's m and v, and
         * its working copy), its fp32 gradient and P-1 incoming gradients, one micro-batch's
         * stash, and the workspace of the one chunk (config.c's parts, logits block included),
         * with bf16 gradients the fp32 staging gradient of the chunk's largest segment (a layer's,
         * the head's, the embedding's: config.h's wp_grad_segment); no buffer moves in another
         * format than it works in (the bf16 gradients are sent and received as they are) */
        WpConfig *c = &p->model;
        size_t N = (size_t)n;
        size_t stash = wp_stash_bytes(c, &k, 0, prec);
        size_t ws = wp_workspace_bytes(c, &k, 0, prec) + (grad == WP_BF16 ? 4 * wp_grad_stage_floats(c, &k) : 0);
        size_t copy = prec == WP_BF16 ? 2 * N : 0;
        size_t want0 = 12 * N + copy + 4 * N + (size_t)(P - 1) * N * (size_t)g + stash + ws;
        CHECK(p->ranks[0].peak_mem == want0, "rank 0 memory %zu, by hand %zu", p->ranks[0].peak_mem, want0);
        CHECK(p->ranks[0].mem.masters == 12 * N && p->ranks[0].mem.weights == copy && p->ranks[0].mem.workspace == ws &&
              p->ranks[0].mem.acts == stash, "rank 0's breakdown");
        size_t want1 = N * (size_t)w + N * (size_t)g + stash + ws;
        CHECK(p->ranks[1].peak_mem == want1, "rank 1 memory %zu, by hand %zu", p->ranks[1].peak_mem, want1);
        plan_free(p);
        topology_free(&t);
    }
}

/* The cost model by hand (cost/costs.h) for a chunk of the fixture's shape: its products, its
 * attention and its bytes; a product's efficiency falls with its size as the knee says; the
 * topology's efficiency replaces the products' share; a calibration's rates replace the table's,
 * moved between precisions on a GPU and not on a CPU. */
static void test_costs(void) {
    WpConfig m = fixture_model(2);   /* H 16, 2 heads of 8 (1 kv head), F 32, V 64, S 8, G 1 */
    double T = 8, H = 16, q = 16, kv = 8, F = 32, V = 64, S = 8;
    /* per layer 2 m n k for q, k, v, o, gate, up, down; 2 layers and the LM head */
    double mm_fwd = 2 * 2 * (2 * T * H * q + 2 * T * H * kv + 3 * T * H * F) + 2 * T * H * V;
    double attn = 2 * 1 * 2 * (S * (S + 1) / 2) * 4 * 8;
    double bytes = 4 * T * (2 * (4 * H + 6 * H + 2 * (q + kv) + 2 * q + 2 * kv + 3 * F) + H + 2 * H + 3 * V);
    double f[COST__COUNT];
    cost_compute_features(&m, 0, 0, 2, 1, OP_FWD, 0, WP_FP32, 0, f);
    CHECK_CLOSE(f[COST_MM_FLOPS], mm_fwd, 1e-12, 0, "forward product FLOPs");
    WpChunk k = wp_chunk_make(&m, 0, 0, 2, 1, 1);
    CHECK_CLOSE(f[COST_MM_FLOPS] + f[COST_ATTN_FWD], wp_chunk_fwd_flops(&m, &k), 1e-12, 0, "the FLOPs config.c counts");
    CHECK(f[COST_MM_CALLS] == 15 && f[COST_OPS] == 1, "15 products, 1 call: %g %g", f[COST_MM_CALLS], f[COST_OPS]);
    CHECK_CLOSE(f[COST_ATTN_FWD], attn, 1e-12, 0, "attention forward");
    CHECK_CLOSE(f[COST_BYTES], bytes, 1e-12, 0, "elementwise bytes, fp32 activations");
    double b[COST__COUNT];
    cost_compute_features(&m, 0, 0, 2, 1, OP_BWD, 1, WP_FP32, 0, b);
    /* the last chunk's backward computes the head's logits again (one more head product) */
    double head = 2 * T * H * V;
    CHECK_CLOSE(b[COST_MM_FLOPS], 3 * mm_fwd + head, 1e-12, 0, "backward with recomputation: 3 products per product, the logits again");
    CHECK(b[COST_MM_CALLS] == 46 && b[COST_ATTN_FWD] == attn && b[COST_ATTN_BWD] == 2 * attn, "backward's calls and attention");
    CHECK_CLOSE(b[COST_BYTES], 3 * bytes, 1e-12, 0, "backward with recomputation: 3 times the bytes");
    double bb[COST__COUNT], bw_[COST__COUNT];
    cost_compute_features(&m, 0, 0, 2, 1, OP_BWD_B, 0, WP_FP32, 0, bb);
    cost_compute_features(&m, 0, 0, 2, 1, OP_BWD_W, 0, WP_FP32, 0, bw_);
    cost_compute_features(&m, 0, 0, 2, 1, OP_BWD, 0, WP_FP32, 0, b);
    /* BWD_W computes the logits again too (it keeps the head's weight, not the dlogits): one more
     * head product, call and pass of the loss over the logits than BWD; and the split's copies
     * into its keep (BWD_B: dy, dx2, qkv's gradient) and SwiGLU's backward again (BWD_W), per
     * token and layer, read and written */
    double again[COST__COUNT] = { 0 };
    again[COST_MM_FLOPS] = head;
    again[COST_MM_CALLS] = 1;
    double width = (m.heads + 2.0 * m.kv_heads) * m.head_dim;
    again[COST_BYTES] = 4 * T * 3 * V + 4 * T * 2 * (2 * (2.0 * H + width) + 5.0 * m.ffn);
    for (int i = 0; i < COST_OPS; i++) CHECK_CLOSE(bb[i] + bw_[i], b[i] + again[i], 1e-12, 0, "BWD_B + BWD_W = BWD + the logits again + the split's copies");
    CHECK_CLOSE(bw_[COST_BYTES], 4 * T * 3 * V + 4 * T * 2 * 5.0 * m.ffn, 1e-12, 0, "BWD_W's bytes: the loss again, SwiGLU's backward again");
    /* bf16 activations on a GPU halve the bytes; a CPU keeps them fp32 */
    double g[COST__COUNT];
    cost_compute_features(&m, 0, 0, 2, 1, OP_FWD, 0, WP_BF16, 1, g);
    CHECK_CLOSE(g[COST_BYTES], bytes / 2, 1e-12, 0, "bf16 bytes on a GPU");
    cost_compute_features(&m, 0, 0, 2, 1, OP_FWD, 0, WP_BF16, 0, g);
    CHECK_CLOSE(g[COST_BYTES], bytes, 1e-12, 0, "fp32 bytes on a CPU in a bf16 plan");
    /* rates of the table: an A800 in bf16, and in fp32 half the compute */
    DeviceType a800 = { .name = "A800", .peak_flops = 312e12, .rated_bf16 = 1, .hbm_bw = 2039e9, .efficiency = 0.5 };
    const CostDefaults *row = cost_defaults_for(&a800);
    CHECK(row && !strcmp(row->match, "A800"), "the A800 row");
    CostRates r = cost_rates_default(&a800, WP_BF16), r32 = cost_rates_default(&a800, WP_FP32);
    CHECK_CLOSE(r.mm_flops, 312e12 * row->mm_eff, 1e-12, 0, "A800 products");
    CHECK_CLOSE(r.attn_bwd_flops, 312e12 * row->attn_bwd_eff, 1e-12, 0, "A800 attention backward");
    CHECK_CLOSE(r.mem_bw, 2039e9 * row->mem_eff, 1e-12, 0, "A800 memory-bound");
    CHECK_CLOSE(r32.mm_flops, r.mm_flops / 2, 1e-12, 0, "fp32 on TF32");
    /* one product of m n k takes 2 (mnk + knee) / R: at mnk = knee, half of R */
    double c[COST__COUNT] = { 0 }, one[COST__COUNT] = { 0 };
    cost_coefs(&r, c);
    one[COST_MM_FLOPS] = 2 * r.mm_knee; one[COST_MM_CALLS] = 1;
    CHECK_CLOSE(2 * r.mm_knee / cost_seconds(one, c), r.mm_flops / 2, 1e-12, 0, "a product at the knee reaches half");
    one[COST_MM_FLOPS] = 2 * 1e4 * r.mm_knee;
    CHECK(2 * 1e4 * r.mm_knee / cost_seconds(one, c) > 0.999 * r.mm_flops, "a large product reaches the rate");
    CostRates back = cost_rates_of(c);
    CHECK_CLOSE(back.mm_knee, r.mm_knee, 1e-12, 0, "knee through coefficients");
    CHECK_CLOSE(back.attn_fwd_flops, r.attn_fwd_flops, 1e-12, 0, "attention through coefficients");
    /* a topology's efficiency replaces the products' share, attention keeps its ratio */
    a800.efficiency_set = 1;
    CostRates re = cost_rates_default(&a800, WP_BF16);
    CHECK_CLOSE(re.mm_flops, 312e12 * 0.5, 1e-12, 0, "efficiency given");
    CHECK_CLOSE(re.attn_fwd_flops / re.mm_flops, row->attn_fwd_eff / row->mm_eff, 1e-12, 0, "attention's ratio kept");
    /* a calibration's rates for the type, measured in bf16, used in fp32: half; a CPU's: the same */
    CalibType ct = { .name = "A800", .precision = WP_BF16, .rates = r };
    Calibration cal = { .types = &ct, .ntypes = 1 };
    double cc[COST__COUNT];
    calib_coefs(&cal, &a800, WP_FP32, cc);
    CHECK_CLOSE(cc[COST_MM_FLOPS], 2 / r.mm_flops, 1e-12, 0, "calibrated bf16 used in fp32");
    DeviceType cpu = { .name = "A800", .peak_flops = 1e11, .rated_bf16 = 0, .hbm_bw = 1e10 };
    calib_coefs(&cal, &cpu, WP_FP32, cc);
    CHECK_CLOSE(cc[COST_MM_FLOPS], 1 / r.mm_flops, 1e-12, 0, "a CPU computes both in fp32");
}

/* Recorded times: every operation inside its turn; the trace and picture writers run. */
/* On a CPU, MPI moves a message only inside the receiver's MPI calls, which a computing rank makes
 * after each layer (sim.c, next_mpi_call): a receive posted by both sides at t0 ends no sooner than
 * the receiver's first layer boundary after t0 (t0 itself if it computes nothing then), plus the
 * link's latency and the bytes at its bandwidth. Checked on every receive of weipipe-interleave on
 * one node of 2 CPU ranks; some must have been held back so. */
/* Rank `rank`'s next MPI call at or after t in its turn: the first layer boundary after t of
 * the compute it runs at t (its layers taken as equal parts), else t. */
static double next_boundary(const Plan *p, const SimResult *r, int rank, int turn, double t) {
    double b = t;
    for (int j = 0; j < r->nspans; j++) {
        const SimSpan *c = &r->spans[j];
        const Op *cop = &p->ranks[c->rank].ops[c->op];
        if (c->rank != rank || c->turn != turn || !op_is_compute(cop->kind) || !(c->t0 <= t && t < c->t1)) continue;
        int n = p->chunks[cop->chunk].nlayers > 0 ? p->chunks[cop->chunk].nlayers : 1;
        double step = (c->t1 - c->t0) / n, k = ceil((t - c->t0) / step - 1e-9);
        b = c->t0 + (k < 1 ? 1 : k) * step;
    }
    return b;
}

static void test_mpi_progress(void) {
    Topology t;
    int per[] = { 2 };
    char err[2048];
    Plan *p = fixture_ring_plan(&t, 1, per, err, sizeof err);
    CHECK(p != NULL, "%s", err);
    if (!p) return;
    SimOptions o = { .record = 1 };
    SimResult r;
    int held = 0, early = 0;
    if (run(p, &o, &r) >= 0) {
        const Link l = t.nodes[0].intra;
        for (int i = 0; i < r.nspans; i++) {
            const SimSpan *s = &r.spans[i];
            const Op *op = &p->ranks[s->rank].ops[s->op];
            if (op_info(op->kind)->p2p != P2P_RECV) continue;
            double b = next_boundary(p, &r, s->rank, s->turn, s->t0);   /* the receiver's next MPI call */
            double least = b + l.lat + sim_op_bytes(p, s->rank, s->op) / l.bw;
            early += s->t1 < least * (1 - 1e-9);
            held += b > s->t0 * (1 + 1e-9) + 1e-15;
        }
        /* the bytes received during each compute span (SimSpan.recv_bytes, what calibrate fits the
         * receiving rate to): between ranks of a node, the receiver's MPI call that matches a
         * message copies it, so a span gets every receive that started while it computed (at its
         * next layer boundary), and no other */
        int wrong = 0;
        double inside = 0;
        for (int j = 0; j < r.nspans; j++) {
            const SimSpan *c = &r.spans[j];
            if (!op_is_compute(p->ranks[c->rank].ops[c->op].kind)) {
                wrong += c->recv_bytes != 0;
                continue;
            }
            double want = 0;
            for (int i = 0; i < r.nspans; i++) {
                const SimSpan *s = &r.spans[i];
                if (s->rank == c->rank && op_info(p->ranks[s->rank].ops[s->op].kind)->p2p == P2P_RECV && c->t0 <= s->t0 && s->t0 < c->t1)
                    want += sim_op_bytes(p, s->rank, s->op);
            }
            wrong += fabs(c->recv_bytes - want) > 1e-9 * (want + 1);
            inside += want;
        }
        CHECK(wrong == 0, "%d spans' bytes received differ from the receives that started during them", wrong);
        CHECK(inside > 0, "no receive started during a compute span: the bytes received went unchecked");
        sim_result_free(&r);
    }
    CHECK(early == 0, "%d receives ended before the receiver's next MPI call and the link's time", early);
    CHECK(held > 0, "no receive waited for the receiver's layer boundary: the case went unchecked");
    plan_free(p);
    topology_free(&t);
}

/* The same for collectives (fsdp on one node of 2 CPU ranks): each starts once every member has
 * called MPI after the last one posted, so it ends no sooner than every member's next layer
 * boundary after its start (the members' spans of one call start together). */
static void test_collective_progress(void) {
    Topology t;
    int per[] = { 2 };
    char err[2048];
    CHECK(fixture_topology(&t, 1, per) == 0, "topology");
    WpConfig m = fixture_model(4);
    Plan *p = fixture_plan(&t, &m, "fsdp", 2, 1, 0, err, sizeof err);
    CHECK(p != NULL, "%s", err);
    if (!p) { topology_free(&t); return; }
    SimOptions o = { .record = 1 };
    SimResult r;
    int held = 0, early = 0, calls = 0;
    if (run(p, &o, &r) >= 0) {
        for (int i = 0; i < r.nspans; i++) {
            const SimSpan *s = &r.spans[i];
            const Op *op = &p->ranks[s->rank].ops[s->op];
            if (!op_is_transfer(op->kind) || op_info(op->kind)->p2p || sim_op_bytes(p, s->rank, s->op) <= 0) continue;
            calls++;
            double b = s->t0;
            for (int j = 0; j < r.nspans; j++) {   /* the members: this kind of call, starting at t0 */
                const SimSpan *c = &r.spans[j];
                if (p->ranks[c->rank].ops[c->op].kind != op->kind || fabs(c->t0 - s->t0) > 1e-12) continue;
                double bq = next_boundary(p, &r, c->rank, c->turn, s->t0);
                if (bq > b) b = bq;
            }
            early += s->t1 < b * (1 - 1e-9);
            held += b > s->t0 * (1 + 1e-9) + 1e-15;
        }
        sim_result_free(&r);
    }
    CHECK(calls > 0, "fsdp made no collective with bytes");
    CHECK(early == 0, "%d of %d collective calls ended before every member's next MPI call", early, calls);
    CHECK(held > 0, "no collective waited for a member's layer boundary: the case went unchecked");
    plan_free(p);
    topology_free(&t);
}

static void test_records(void) {
    Topology t;
    int per[] = { 2, 2 };
    char err[2048];
    Plan *p = fixture_ring_plan(&t, 2, per, err, sizeof err);
    CHECK(p != NULL, "%s", err);
    if (!p) return;
    SimOptions o = { .record = 1 };
    SimResult r;
    if (run(p, &o, &r) >= 0) {
        long nops = 0;
        for (int q = 0; q < p->nranks; q++) nops += p->ranks[q].nops;
        CHECK(r.nspans == nops, "%d spans for %ld operations", r.nspans, nops);
        int ordered = 1;
        for (int i = 0; i < r.nspans; i++) {
            const SimSpan *s = &r.spans[i];
            ordered &= s->t_post <= s->t0 + 1e-15 && s->t0 <= s->t1 + 1e-15 && s->t1 <= r.step_time + 1e-12;
            /* an update runs at the step's end, after the rank's turns (OPF_STEP_END) */
            if (op_at_step_end(p->ranks[s->rank].ops[s->op].kind)) ordered &= s->t0 >= r.turn_t[s->rank][p->nturns] - 1e-15;
            else ordered &= s->t_post >= r.turn_t[s->rank][s->turn] - 1e-15 && s->t1 <= r.turn_t[s->rank][s->turn + 1] + 1e-15;
        }
        CHECK(ordered, "every operation runs inside its turn (an update after them), posted before it starts, before the end of the step");
        char path[400];
        snprintf(path, sizeof path, "%s/t.json", fixture_dir);
        CHECK(sim_write_trace(p, &r, path) == 0, "trace");
        snprintf(path, sizeof path, "%s/t.svg", fixture_dir);
        CHECK(sim_write_svg(p, &r, "test", path) == 0, "svg");
        sim_result_free(&r);
    }
    plan_free(p);
    topology_free(&t);
}

/* Zero bubble, with free communication and memory-bound operations, every FWD one unit, BWD two,
 * BWD_B and BWD_W one each (the papers' F = B = W), M = P x N micro-batches, C = P chunks:
 *   - zb1 (ZB-H1, Qi et al.): 1F1B's bubble per stage, (P-1)(F+B+W), becomes (P-1)(F+B-W), a
 *     third: with M micro-batches per pipeline (M >= P) the ratio is (P-1)/(3M+P-1) against
 *     1F1B's (P-1)/(M+P-1). zb1 runs into it exactly;
 *   - weight passing (schedules/weipipe-zb*.lua derive these): a rank's turn t waits for its ring
 *     neighbours' turn t, and rank r runs rank r-1's turns one turn later, so a schedule whose
 *     turns all hold u units loses only the ring's fill and drain, at most (P-1)u per rank in
 *     3NC + (P-1)u. weipipe-zb2 (one pass per turn, u = 1): at most (P-1)/(3M+P-1), ZB-H1's
 *     bound; weipipe-zb1 (two passes per turn, u = 2): at most 2(P-1)/(3M+2(P-1)). Both below
 *     weipipe-interleave's, whose turns hold 1, 3 or 2 units, from P = 4 on (with P = 2 the
 *     three have no bubble at all). */
static void test_zero_bubble(void) {
    const char *strategies[] = { "1f1b", "zb1", "weipipe-interleave", "weipipe-zb1", "weipipe-zb2" };
    int Ps[] = { 2, 4, 8 }, Ns[] = { 1, 2, 4 };
    for (int pi = 0; pi < 3; pi++)
        for (int ni = 0; ni < 3; ni++) {
            int P = Ps[pi], N = Ns[ni], M = P * N;
            double b[5] = { 0 };
            Topology t;
            int per[] = { P };
            if (fixture_topology(&t, 1, per)) { CHECK(0, "topology"); return; }
            WpConfig m = fixture_model(P);
            for (int si = 0; si < 5; si++) {
                char err[2048];
                Plan *p = fixture_plan(&t, &m, strategies[si], N, 1, 0, err, sizeof err);
                CHECK(p != NULL, "%s P=%d N=%d: %s", strategies[si], P, N, err);
                if (!p) continue;
                SimOptions o = { .free_comm = 1, .free_local = 1, .unit_fwd_s = 1e-3 };
                SimResult r;
                if (run(p, &o, &r) < 0) { CHECK(0, "sim"); plan_free(p); continue; }
                b[si] = r.bubble_ratio;
                sim_result_free(&r);
                plan_free(p);
            }
            double zb = (double)(P - 1) / (3 * M + P - 1), wzb1 = 2.0 * (P - 1) / (3 * M + 2 * (P - 1));
            printf("P=%d N=%d bubble: 1f1b %.4f, zb1 %.4f (formula %.4f) | weipipe-interleave %.4f, weipipe-zb1 %.4f "
                   "(bound %.4f), weipipe-zb2 %.4f (bound %.4f)\n", P, N, b[0], b[1], zb, b[2], b[3], wzb1, b[4], zb);
            char what[64];
            snprintf(what, sizeof what, "zb1 P=%d N=%d bubble", P, N);
            CHECK_CLOSE(b[1], zb, 1e-9, 1e-12, what);
            CHECK(b[1] < b[0], "P=%d N=%d: zb1's bubble %.4f not below 1f1b's %.4f", P, N, b[1], b[0]);
            CHECK(b[3] <= wzb1 + 1e-12, "P=%d N=%d: weipipe-zb1's bubble %.4f above its bound %.4f", P, N, b[3], wzb1);
            CHECK(b[4] <= zb + 1e-12, "P=%d N=%d: weipipe-zb2's bubble %.4f above its bound %.4f", P, N, b[4], zb);
            CHECK(b[4] <= b[3] + 1e-12, "P=%d N=%d: weipipe-zb2's bubble %.4f above weipipe-zb1's %.4f", P, N, b[4], b[3]);
            if (P > 2) {
                CHECK(b[3] < b[2], "P=%d N=%d: weipipe-zb1's bubble %.4f not below weipipe-interleave's %.4f", P, N, b[3], b[2]);
                CHECK(b[4] < b[2], "P=%d N=%d: weipipe-zb2's bubble %.4f not below weipipe-interleave's %.4f", P, N, b[4], b[2]);
            } else CHECK(b[2] < 1e-12 && b[3] < 1e-12 && b[4] < 1e-12, "P=2: weight passing has a bubble");
            topology_free(&t);
        }
}

int main(void) {
    fixture_init();
    test_bubble();
    test_zero_bubble();
    test_monotone_and_scaling();
    test_costs();
    test_handmade();
    test_records();
    test_mpi_progress();
    test_collective_progress();
    fixture_done();
    return check_summary("sim");
}
