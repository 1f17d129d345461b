/* A plan's precision (ir/plan.h, PlanBuf): every buffer's format and size by its kind, for every
 * strategy in every setting; the memory breakdown of every rank sums to its peak and the peak is
 * the largest; what transfers carry, at which format (weights in fp32 with --weight-wire fp32,
 * their buffers still bf16, with room to convert them); the workspace's logits block only where
 * the LM head runs; the verifier refuses buffers whose formats break the rule; the simulator's
 * compute at the precision's peak (a GPU: fp32 at half its bf16 rating; a CPU: the same) and its
 * memory-bound operations by the bytes of each operand's format; TawPipe's placement solver counts
 * the bytes the plan moves in every setting. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "check.h"
#include "plan_fixture.h"
#include "ir/op_table.h"
#include "sim/sim.h"
#include "cost/costs.h"
#include "place/placement.h"

static const char *strategies[] = { "weipipe-naive", "weipipe-interleave", "1f1b", "fsdp", "tawpipe" };
static const WpDtype settings[][2] = { { WP_FP32, WP_FP32 }, { WP_BF16, WP_FP32 }, { WP_BF16, WP_BF16 }, { WP_FP32, WP_BF16 } };

static Plan *make(const Topology *t, const WpConfig *m, const char *s, WpDtype prec, WpDtype grad, int replicas, int recompute) {
    StrategyOpts o = { .micro_batches = 2, .replicas = replicas, .recompute = recompute, .precision = prec, .grad_precision = grad };
    char err[1024];
    Plan *p = fixture_plan_opts(t, m, s, &o, err, sizeof err);
    CHECK(p != NULL, "%s in %s/%s: %s", s, wp_dtype_name(prec), wp_dtype_name(grad), err);
    return p;
}

/* The gradient buffers OPT reads on rank r. */
static void opt_grads(const Plan *p, int r, uint8_t *is) {
    memset(is, 0, (size_t)p->ranks[r].nbufs);
    for (int i = 0; i < p->ranks[r].nops; i++)
        if (p->ranks[r].ops[i].kind == OP_OPT) is[p->ranks[r].ops[i].buf2] = 1;
}

/* Every buffer by its kind: masters fp32 with 12 bytes per element and a working copy at the
 * precision when it is not fp32; other weights at the precision; the gradient OPT reads fp32;
 * other gradients at the grad precision. The breakdown of each rank sums to its peak. */
static void test_buffers(void) {
    Topology t;
    int per[] = { 2, 2 };
    if (fixture_topology(&t, 2, per)) { CHECK(0, "topology"); return; }
    WpConfig m = fixture_model(8);
    for (size_t si = 0; si < sizeof strategies / sizeof *strategies; si++)
        for (int k = 0; k < 4; k++)
            for (int replicas = 1; replicas <= 2; replicas++) {
                WpDtype prec = settings[k][0], grad = settings[k][1];
                Plan *p = make(&t, &m, strategies[si], prec, grad, replicas, k == 1);
                if (!p) continue;
                CHECK(p->precision == prec && p->grad_precision == grad, "%s: the plan's settings", strategies[si]);
                size_t peak = 0;
                int masters = 0;
                for (int r = 0; r < p->nranks; r++) {
                    const PlanRank *rk = &p->ranks[r];
                    uint8_t *is_opt = calloc((size_t)rk->nbufs + 1, 1);
                    opt_grads(p, r, is_opt);
                    PlanMem sum = { 0 };
                    for (int b = 0; b < rk->nbufs; b++) {
                        const PlanBuf *pb = &rk->bufs[b];
                        WpDtype want = pb->master || (pb->kind == BUF_D && is_opt[b]) ? WP_FP32 : pb->kind == BUF_W ? prec : grad;
                        CHECK(pb->dtype == want, "%s %s/%s rank %d: %s is %s, expected %s", strategies[si], wp_dtype_name(prec),
                              wp_dtype_name(grad), r, pb->name, wp_dtype_name((WpDtype)pb->dtype), wp_dtype_name(want));
                        CHECK(pb->elems == (pb->chunk >= 0 ? plan_shard_elems(p, pb->chunk, pb->nshards) : pb->elems) &&
                              pb->bytes == pb->elems * wp_dtype_bytes(want), "%s rank %d: %s's size", strategies[si], r, pb->name);
                        PlanMem one = { 0 };
                        size_t got = plan_buf_mem(pb, &one);
                        size_t expect = pb->master ? pb->elems * (12 + (prec == WP_BF16 ? 2 : 0)) : pb->elems * wp_dtype_bytes(want);
                        CHECK(got == expect && plan_mem_total(&one) == got, "%s rank %d: %s takes %zu bytes, expected %zu",
                              strategies[si], r, pb->name, got, expect);
                        if (pb->master) {
                            masters++;
                            CHECK(pb->copy_dtype == prec && plan_buf_has_copy(pb) == (prec != WP_FP32) &&
                                  one.masters == 12 * pb->elems && one.weights == (prec == WP_BF16 ? 2 * pb->elems : 0),
                                  "%s rank %d: master %s's working copy", strategies[si], r, pb->name);
                        } else CHECK(pb->copy_dtype == pb->dtype && !plan_buf_has_copy(pb), "%s: %s has no copy", strategies[si], pb->name);
                        plan_buf_mem(pb, &sum);
                    }
                    free(is_opt);
                    const PlanMem *mm = &rk->mem;
                    CHECK(mm->weights == sum.weights && mm->grads == sum.grads && mm->masters == sum.masters,
                          "%s rank %d: the breakdown's buffers", strategies[si], r);
                    CHECK(plan_mem_total(mm) == rk->peak_mem, "%s rank %d: the breakdown sums to %zu, the peak is %zu", strategies[si], r,
                          plan_mem_total(mm), rk->peak_mem);
                    if (rk->peak_mem > peak) peak = rk->peak_mem;
                }
                CHECK(masters == p->nchunks * p->replicas || !strcmp(strategies[si], "fsdp"), "%s: %d masters", strategies[si], masters);
                CHECK(p->peak_mem == peak && p->ranks[p->peak_rank].peak_mem == peak, "%s: the peak is the largest rank's", strategies[si]);
                plan_free(p);
            }
    topology_free(&t);
}

/* What each transfer carries, at its format: weights and activations at the precision,
 * gradients at the grad precision, by what the operation carries (a broadcast: its buffer). */
static void test_carried(void) {
    Topology t;
    int per[] = { 2, 2 };
    if (fixture_topology(&t, 2, per)) { CHECK(0, "topology"); return; }
    WpConfig m = fixture_model(8);
    for (int wire32 = 0; wire32 < 2; wire32++)
    for (size_t si = 0; si < sizeof strategies / sizeof *strategies; si++) {
        /* --weight-wire fp32: weights move in fp32, their buffers stay bf16 */
        StrategyOpts o = { .micro_batches = 2, .replicas = 1, .precision = WP_BF16, .grad_precision = WP_FP32,
                           .weight_wire = wire32 ? "fp32" : NULL };
        char err[1024];
        Plan *p = fixture_plan_opts(&t, &m, strategies[si], &o, err, sizeof err);
        CHECK(p != NULL, "%s, weights on the wire in %s: %s", strategies[si], wire32 ? "fp32" : "bf16", err);
        if (!p) continue;
        CHECK(p->weight_wire_fp32 == wire32, "%s: weight_wire_fp32 %d", strategies[si], p->weight_wire_fp32);
        size_t xfer = 0;
        for (int r = 0; r < p->nranks; r++) {
            xfer += plan_rank_xfer_bytes(p, r, 1);
            for (int b = 0; b < p->ranks[r].nbufs; b++) {
                const PlanBuf *pb = &p->ranks[r].bufs[b];
                if (pb->kind == BUF_W && !pb->master)
                    CHECK(pb->dtype == WP_BF16, "%s rank %d: working weights %s kept in %s", strategies[si], r, pb->name, wp_dtype_name(pb->dtype));
            }
        }
        /* fp32 gradients and bf16 weights in bf16 need no room in another format; fp32 weights into
         * bf16 buffers do, wherever weights move */
        CHECK((xfer > 0) == (wire32 && strcmp(strategies[si], "1f1b")), "%s: %zu bytes of transfer room", strategies[si], xfer);
        int seen[WHAT_T + 1] = { 0 };
        for (int r = 0; r < p->nranks; r++)
            for (int i = 0; i < p->ranks[r].nops; i++) {
                const Op *op = &p->ranks[r].ops[i];
                const OpNote *n = &p->ranks[r].notes[i];
                int what = plan_op_carries(p, r, op);
                CHECK(op_is_transfer(op->kind) == (what != WHAT_NONE), "%s: only transfers carry", strategies[si]);
                if (what == WHAT_NONE) continue;
                seen[what]++;
                size_t elems = what == WHAT_A || what == WHAT_G ? (size_t)m.mbs * m.seq * m.hidden : plan_shard_elems(p, n->chunk, n->nshards);
                size_t want = elems * (what == WHAT_D || (what == WHAT_W && wire32) ? 4 : 2);
                CHECK(plan_carried_bytes(p, what, n->chunk, n->nshards) == want && sim_op_bytes(p, r, i) == (double)want,
                      "%s rank %d: %s carries %zu bytes, expected %zu", strategies[si], r, op_names[op->kind],
                      plan_carried_bytes(p, what, n->chunk, n->nshards), want);
            }
        /* weight passing moves weights and gradients, 1F1B activations and their gradients */
        if (!strcmp(strategies[si], "1f1b")) CHECK(seen[WHAT_A] && seen[WHAT_G], "1f1b moves activations");
        else CHECK(seen[WHAT_W] && seen[WHAT_D], "%s moves weights and gradients", strategies[si]);
        CHECK(plan_act_bytes(p) == (size_t)m.mbs * m.seq * m.hidden * 2, "one activation in bf16");
        plan_free(p);
    }
    topology_free(&t);
}

/* The workspace: config.c's parts, the largest over the chunks a rank computes; 1F1B's rank r
 * computes chunk r alone, so its workspace is that chunk's, and only the last has logits. */
static void test_workspace(void) {
    Topology t;
    int per[] = { 4 };
    if (fixture_topology(&t, 1, per)) { CHECK(0, "topology"); return; }
    WpConfig m = fixture_model(8);
    for (int k = 0; k < 3; k++)
        for (int recompute = 0; recompute < 2; recompute++) {
            Plan *p = make(&t, &m, "1f1b", settings[k][0], settings[k][1], 1, recompute);
            if (!p) continue;
            for (int r = 0; r < p->nranks; r++) {
                WpChunk c = wp_chunk_make(&m, r, p->chunks[r].layer0, p->chunks[r].nlayers, r == 0, r == p->nchunks - 1);
                size_t ws = wp_workspace_bytes(&m, &c, recompute, settings[k][0]);
                size_t logits = wp_workspace_part_bytes(&m, &c, recompute, WP_WS_LOGITS, settings[k][0]);
                CHECK(p->ranks[r].mem.workspace == ws, "1f1b rank %d: workspace %zu, its chunk's %zu", r, p->ranks[r].mem.workspace, ws);
                CHECK((logits > 0) == (r == p->nranks - 1), "1f1b rank %d: logits %zu", r, logits);
            }
            /* every chunk at once: each part at its largest, the logits block included */
            size_t all = plan_workspace_bytes(p, NULL, 1), most = 0;
            for (int c = 0; c < p->nchunks; c++) {
                WpChunk ch = wp_chunk_make(&m, c, p->chunks[c].layer0, p->chunks[c].nlayers, c == 0, c == p->nchunks - 1);
                if (wp_workspace_bytes(&m, &ch, recompute, settings[k][0]) > most) most = wp_workspace_bytes(&m, &ch, recompute, settings[k][0]);
            }
            CHECK(all >= most, "every chunk's workspace %zu covers the largest chunk's %zu", all, most);
            plan_free(p);
        }
    topology_free(&t);
}

/* The verifier holds the formats to the rule: a plan whose buffers were changed after
 * plan_finish is rejected, naming the buffer. */
static void test_verifier(void) {
    Topology t;
    int per[] = { 2, 2 };
    if (fixture_topology(&t, 2, per)) { CHECK(0, "topology"); return; }
    WpConfig m = fixture_model(4);
    enum { W_FP32, MASTER_BF16, OPT_GRAD_BF16, COPY_FP32, BYTES, NCASES };
    for (int c = 0; c < NCASES; c++) {
        Plan *p = make(&t, &m, "weipipe-interleave", WP_BF16, WP_BF16, 1, 0);
        if (!p) continue;
        PlanBuf *victim = NULL;
        for (int r = 0; r < p->nranks && !victim; r++) {
            PlanRank *rk = &p->ranks[r];
            uint8_t *is_opt = calloc((size_t)rk->nbufs + 1, 1);
            opt_grads(p, r, is_opt);
            for (int b = 0; b < rk->nbufs && !victim; b++) {
                PlanBuf *pb = &rk->bufs[b];
                if ((c == W_FP32 || c == BYTES) && pb->kind == BUF_W && !pb->master) victim = pb;
                if ((c == MASTER_BF16 || c == COPY_FP32) && pb->master) victim = pb;
                if (c == OPT_GRAD_BF16 && is_opt[b]) victim = pb;
            }
            free(is_opt);
        }
        CHECK(victim != NULL, "case %d: a buffer to change", c);
        if (!victim) { plan_free(p); continue; }
        if (c == W_FP32) { victim->dtype = victim->copy_dtype = WP_FP32; victim->bytes = 4 * victim->elems; }
        if (c == MASTER_BF16) { victim->dtype = WP_BF16; victim->bytes = 2 * victim->elems; }
        if (c == OPT_GRAD_BF16) { victim->dtype = victim->copy_dtype = WP_BF16; victim->bytes = 2 * victim->elems; }
        if (c == COPY_FP32) victim->copy_dtype = WP_FP32;
        if (c == BYTES) victim->bytes = 4 * victim->elems;
        char err[1024] = "";
        int rc = plan_verify(p, err, sizeof err);
        CHECK(rc != 0 && strstr(err, victim->name), "case %d: the verifier accepts %s changed (%s)", c, victim->name, err);
        plan_free(p);
    }
    topology_free(&t);
}

/* A GPU topology of one node (rated in bf16) and a CPU one (rated in fp32). */
static int topology_of(Topology *t, const char *rating) {
    char path[400], err[512];
    snprintf(path, sizeof path, "%s/dev.json", fixture_dir);
    FILE *f = fopen(path, "w");
    if (!f) return -1;
    fprintf(f, "{\"version\": 1, \"name\": \"dev\", \"device_types\": {\"d\": {\"%s\": 100, \"mem_gb\": 80, \"hbm_GBps\": 1000}},"
               " \"nodes\": [{\"name\": \"n0\", \"devices\": 2, \"type\": \"d\", \"intra\": {\"type\": \"NVL\", \"bw_GBps\": 100, \"lat_us\": 1}}]}\n", rating);
    fclose(f);
    if (topology_load(path, t, err, sizeof err)) { fprintf(stderr, "%s\n", err); return -1; }
    return 0;
}

/* Compute at the precision's peak; ACC, COPY and OPT by the bytes of each operand's format. */
static void test_sim_costs(void) {
    /* the rows' passes: one to read an operand, one to write it; what is left is fp32 state */
    for (int k = 0; k < OP__COUNT; k++) {
        const OpInfo *in = op_info(k);
        if (in->mem_passes == 0) continue;
        int passes = 0;
        for (int o = 0; o < 2; o++) {
            unsigned u = in->use[o];
            passes += ((u & (USE_READ | USE_ADD)) != 0) + ((u & (USE_WRITE | USE_ADD)) != 0);
        }
        CHECK(passes <= in->mem_passes && (k == OP_OPT ? in->mem_passes - passes == 4 : in->mem_passes == passes),
              "%s: %g passes, %d over its operands", in->name, in->mem_passes, passes);
    }
    const char *ratings[] = { "peak_tflops_bf16", "peak_tflops_fp32" };
    WpConfig m = fixture_model(4);
    for (int g = 0; g < 2; g++) {
        Topology t;
        if (topology_of(&t, ratings[g])) { CHECK(0, "topology"); return; }
        CHECK(t.types[0].rated_bf16 == (g == 0), "%s: rated_bf16", ratings[g]);
        double fwd[2] = { 0 }, opt[2] = { 0 }, acc[2] = { 0 };
        size_t n = 0;
        for (int k = 0; k < 2; k++) {
            Plan *p = make(&t, &m, "weipipe-interleave", settings[k][0], WP_BF16, 1, 0);
            if (!p) continue;
            for (int r = 0; r < p->nranks; r++)
                for (int i = 0; i < p->ranks[r].nops; i++) {
                    const Op *op = &p->ranks[r].ops[i];
                    if (op->chunk != 0 && op->kind != OP_ACC) continue;
                    double s = sim_op_seconds(p, &t, r, op, &p->ranks[r].notes[i]);
                    if (op->kind == OP_FWD) fwd[k] = s;
                    if (op->kind == OP_OPT) { opt[k] = s; n = plan_chunk_params(p, 0); }
                    if (op->kind == OP_ACC && p->ranks[r].notes[i].chunk == 0 && p->ranks[r].bufs[op->buf].dtype == WP_FP32)
                        acc[k] = s;
                }
            plan_free(p);
        }
        /* a GPU's fp32 runs at half its bf16 rating (TF32); a CPU computes both at its rating */
        CHECK_CLOSE(fwd[0], (g == 0 ? 2 : 1) * fwd[1], 1e-12, 0, ratings[g]);
        /* OPT: master, m, v read and written, the fp32 gradient read (7 x 4 bytes); bf16 adds the
         * working copy written (2 bytes), at the share of memory bandwidth the cost table gives
         * memory-bound work on this device */
        double bw = 1000e9 * cost_defaults_for(&t.types[0])->mem_eff;
        CHECK_CLOSE(opt[0], 28.0 * n / bw, 1e-12, 0, "OPT in fp32");
        CHECK_CLOSE(opt[1], 30.0 * n / bw, 1e-12, 0, "OPT in bf16");
        /* ACC into the owner's fp32 accumulator of a bf16 gradient: read and write 4, read 2 */
        CHECK_CLOSE(acc[0], 10.0 * n / bw, 1e-12, 0, "ACC of a bf16 gradient into fp32");
        CHECK_CLOSE(acc[1], 10.0 * n / bw, 1e-12, 0, "ACC of a bf16 gradient into fp32 (bf16 plan)");
        topology_free(&t);
    }
}

/* TawPipe's solver counts the plan's bytes in every setting: weights at the precision, gradients
 * at the grad precision (PlacementIn's wires), on the TawPipe paper's clusters. */
static void test_placement(void) {
    const char *topos[] = { "topologies/tawpipe-3x8-a800-pcie-10gbe.json", "topologies/tawpipe-2x8-a800-pcie-2islands-10gbe.json" };
    WpConfig m = fixture_model(48);
    for (int ti = 0; ti < 2; ti++) {
        Topology t;
        char err[1024];
        if (topology_load(topos[ti], &t, err, sizeof err)) { CHECK(0, "%s", err); continue; }
        for (int k = 0; k < 4; k++) {
            Plan *p = make(&t, &m, "tawpipe", settings[k][0], settings[k][1], 1, 0);
            if (!p) continue;
            int n = p->nranks, C = p->nchunks;
            int *dev = malloc((size_t)n * sizeof *dev);
            double *cb = malloc((size_t)C * sizeof *cb);
            for (int i = 0; i < n; i++) dev[i] = i;
            for (int c = 0; c < C; c++) cb[c] = (double)plan_chunk_bytes(p, c);
            PlacementIn in = { .topo = &t, .n = n, .devices = dev, .nchunks = C, .chunk_bytes = cb, .mode = PLACE_AUTO, .rounds = 1,
                               .weight_wire = wp_dtype_bytes(settings[k][0]) / 4.0, .grad_wire = wp_dtype_bytes(settings[k][1]) / 4.0 };
            Placement pl;
            if (placement_solve(&in, &pl, err, sizeof err) == 0) {
                double intra, inter;
                plan_traffic(p, &intra, &inter);
                CHECK(inter == pl.cost.bytes[LC_NET] && intra == pl.cost.bytes[LC_XI] + pl.cost.bytes[LC_IN],
                      "%s %s/%s: the solver counts %.0f + %.0f bytes, the plan moves %.0f + %.0f", t.name, wp_dtype_name(settings[k][0]),
                      wp_dtype_name(settings[k][1]), pl.cost.bytes[LC_NET], pl.cost.bytes[LC_XI] + pl.cost.bytes[LC_IN], inter, intra);
                placement_free(&pl);
            } else CHECK(0, "%s", err);
            free(dev); free(cb);
            plan_free(p);
        }
        topology_free(&t);
    }
}

int main(void) {
    fixture_init();
    test_buffers();
    test_carried();
    test_workspace();
    test_verifier();
    test_sim_costs();
    test_placement();
    fixture_done();
    return check_summary("test_precision");
}
