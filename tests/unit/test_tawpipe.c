/* TawPipe and its placement solver.
 *  - The strategy verifies on many cluster shapes (one node, equal nodes, uneven nodes, nodes
 *    with PCIe islands, many nodes), micro-batch counts, chunk counts, replicas and every
 *    grouping the solver can be told to take, and the toy-model interpreter computes exactly
 *    the reference step.
 *  - The solver: owners balanced, a staging rank in its own group, never worse than the published
 *    layout, and its byte counts equal to what plan_traffic counts in the plan built from it.
 *  - Traffic on the papers' clusters (2x8 NVLink + 10 GbE, 3x8 PCIe + 10 GbE): bytes_inter_node of
 *    tawpipe and of weipipe-interleave are exactly what counting the algorithms' transfers gives,
 *    so their ratio is exact too; tawpipe's is well below.
 *  - Memory: tawpipe circulates fewer weight buffers than weipipe-interleave, and with its
 *    micro-batches in one round each (--rounds N) its peak per rank is below.
 *  - plan:solve_placement refuses ranks that are not the plan's, or not integers, with a Lua
 *    error naming them (a bad rank was reported after its array was freed: a use after free
 *    that ASan shows; ranks above 2^31 or not numbers were silently taken for rank 0). */
#include "check.h"
#include "plan_fixture.h"
#include "plan_interp.h"
#include "common/modelcfg.h"
#include "place/placement.h"
#include "lua/bridge.h"

static void run_interp(const Plan *p, const char *what) {
    double (*ref)[IW] = malloc((size_t)p->nchunks * sizeof *ref), diff;
    interp_reference(p->nchunks, p->total_mbs, ref);
    int rc = interp_run(p, ref, &diff);
    CHECK(rc == 0 && diff < 1e-12, "%s: the interpreter %s (diff %g)", what, rc ? "could not run it" : "computes another step", diff);
    free(ref);
}

/* A tawpipe plan, built and verified, as `wpgen plan -s tawpipe --rounds K --grouping G` makes it
 * (rounds 0: the strategy's choice; grouping NULL: auto); NULL with the message in err. */
static Plan *tawpipe_plan(const Topology *t, const WpConfig *m, int mbs, int replicas, int chunks, int rounds,
                          const char *grouping, char *err, size_t errlen) {
    StrategyOpts o = { .micro_batches = mbs, .replicas = replicas, .chunks = chunks };
    opts_set_int(&o, "rounds", rounds);
    opts_set_str(&o, "grouping", grouping ? grouping : "auto");
    Plan *p = NULL;
    if (strategy_run("tawpipe", t, m, "test", &o, &p, err, errlen)) return NULL;
    if (plan_verify(p, err, errlen)) { plan_free(p); return NULL; }
    return p;
}

static void check_plan_on(Topology *t, int mbs, int replicas, int chunks, int layers, const char *grouping, int rounds) {
    WpConfig m = fixture_model(layers);
    char err[1024], what[256];
    snprintf(what, sizeof what, "tawpipe on %d ranks / %d nodes, %d micro-batches in %d rounds, %d replicas, chunks %d, %d layers, grouping %s",
             t->ndevices, t->nnodes, mbs, rounds ? rounds : 1, replicas, chunks, layers, grouping ? grouping : "auto");
    Plan *p = tawpipe_plan(t, &m, mbs, replicas, chunks, rounds, grouping, err, sizeof err);
    CHECK(p != NULL, "%s: %s", what, err);
    if (p) { run_interp(p, what); plan_free(p); }
}

/* The plan in `rounds` rounds (0: the strategy's choice), then in 2 and 3 where there are the
 * micro-batches for them (one each, and uneven rounds). */
static void check_shape_rounds(int nodes, const int *per, int mbs, int replicas, int chunks, int layers, int rounds) {
    Topology t;
    if (fixture_topology(&t, nodes, per)) { CHECK(0, "topology"); return; }
    check_plan_on(&t, mbs, replicas, chunks, layers, NULL, rounds);
    for (int K = 2; K <= mbs && K <= 3; K++) check_plan_on(&t, mbs, replicas, chunks, layers, NULL, K);
    topology_free(&t);
}

static void check_shape(int nodes, const int *per, int mbs, int replicas, int chunks, int layers) {
    check_shape_rounds(nodes, per, mbs, replicas, chunks, layers, 0);
}

/* ---- the solver, called directly ---- */

static void check_solver(const Topology *t, int C, int mode, const char *label) {
    int n = t->ndevices;
    int *dev = malloc((size_t)n * sizeof *dev);
    double *cb = malloc((size_t)C * sizeof *cb);
    for (int i = 0; i < n; i++) dev[i] = i;
    for (int c = 0; c < C; c++) cb[c] = 1000.0 + (c == 0 || c == C - 1 ? 500.0 : 0.0);
    PlacementIn in = { .topo = t, .n = n, .devices = dev, .nchunks = C, .chunk_bytes = cb, .mode = mode };
    Placement pl;
    char err[256];
    if (placement_solve(&in, &pl, err, sizeof err)) { CHECK(0, "%s: %s", label, err); free(dev); free(cb); return; }
    /* every rank in exactly one group; a group on one node (and one island when by island) */
    int *seen = calloc((size_t)n, sizeof *seen);
    for (int g = 0; g < pl.ngroups; g++) {
        int first = pl.members[pl.group_start[g]], staged = 0;
        for (int i = pl.group_start[g]; i < pl.group_start[g + 1]; i++) {
            int r = pl.members[i];
            seen[r]++;
            CHECK(topology_node_of(t, r) == topology_node_of(t, first), "%s: group %d spans nodes", label, g);
            staged |= pl.staging[g] == r;
        }
        CHECK(staged, "%s: group %d's staging rank %d is not a member", label, g, pl.staging[g]);
    }
    for (int r = 0; r < n; r++) CHECK(seen[r] == 1, "%s: rank %d is in %d groups", label, r, seen[r]);
    CHECK(pl.group_start[pl.ngroups] == n, "%s: groups hold %d of %d ranks", label, pl.group_start[pl.ngroups], n);
    /* owners: no rank owns more than the balanced share (in chunks, for near-equal chunks) when
     * groups are nodes; grouped by island, keeping the network bytes down comes first and
     * concentrates owners in the groups that save network transfers */
    int *owns = calloc((size_t)n, sizeof *owns), most = 0;
    for (int c = 0; c < C; c++) { CHECK(pl.owner[c] >= 0 && pl.owner[c] < n, "%s: chunk %d owner %d", label, c, pl.owner[c]); owns[pl.owner[c]]++; }
    for (int r = 0; r < n; r++) if (owns[r] > most) most = owns[r];
    if (!pl.by_island) CHECK(most <= (C + n - 1) / n, "%s: a rank owns %d of %d chunks on %d ranks", label, most, C, n);
    if (mode == PLACE_AUTO || mode == PLACE_NODE)
        CHECK(placement_cost_cmp(&pl.cost, &pl.published) <= 0, "%s: the solver's choice costs more than the published layout", label);
    PlacementCost again;
    placement_cost(&in, &pl, &again);
    CHECK(placement_cost_cmp(&again, &pl.cost) == 0, "%s: the reported cost is not the placement's", label);
    free(seen); free(owns);
    placement_free(&pl);
    free(dev); free(cb);
}

/* The solver's byte counts are the plan's: build the plan with it and count with plan_traffic. */
static void check_solver_matches_plan(const Topology *t, const WpConfig *m, int mbs, int rounds) {
    char err[1024];
    Plan *p = tawpipe_plan(t, m, mbs, 1, 0, rounds, NULL, err, sizeof err);
    CHECK(p != NULL, "tawpipe on %s: %s", t->name, err);
    if (!p) return;
    int n = p->nranks, C = p->nchunks;
    int *dev = malloc((size_t)n * sizeof *dev);
    double *cb = malloc((size_t)C * sizeof *cb);
    for (int i = 0; i < n; i++) dev[i] = i;
    for (int c = 0; c < C; c++) cb[c] = (double)plan_chunk_bytes(p, c);
    PlacementIn in = { .topo = t, .n = n, .devices = dev, .nchunks = C, .chunk_bytes = cb, .mode = PLACE_AUTO, .rounds = rounds };
    Placement pl;
    if (placement_solve(&in, &pl, err, sizeof err) == 0) {
        double intra, inter;
        plan_traffic(p, &intra, &inter);
        CHECK(inter == pl.cost.bytes[LC_NET], "%s: the solver counts %.0f network bytes, the plan moves %.0f", t->name, pl.cost.bytes[LC_NET], inter);
        CHECK(intra == pl.cost.bytes[LC_XI] + pl.cost.bytes[LC_IN], "%s: the solver counts %.0f bytes inside nodes, the plan moves %.0f", t->name,
              pl.cost.bytes[LC_XI] + pl.cost.bytes[LC_IN], intra);
        for (int c = 0; c < C; c++)
            CHECK(p->chunks[c].owners[0] == pl.owner[c], "%s: chunk %d: the plan's owner %d, the solver's %d", t->name, c, p->chunks[c].owners[0], pl.owner[c]);
        placement_free(&pl);
    } else CHECK(0, "%s", err);
    free(dev); free(cb);
    plan_free(p);
}

/* ---- traffic on the papers' clusters, counted from the algorithms ---- */

/* weipipe-interleave (schedules/lib/weipipe.lua, C = P chunks, N rounds, streams continuous):
 * the forward and the backward weights of chunk k each leave the owner (P-k) mod P, travel
 * k hops along the ring to rank 0, then go round 0 -> P-1 once per round, wrapping P-1 -> 0
 * between rounds; the gradient of chunk c starts at rank 0, goes round the same way and is
 * delivered from rank P-1 straight to the owner. Counts chunk crossings of the network. */
static double weipipe_expected(const Plan *p, int N) {
    int P = p->nranks, C = p->nchunks;
    double total = 0;
    for (int k = 0; k < C; k++) {
        int o = (P - k % P) % P, cross = 0;
#define NODE(r) p->ranks[(r)].node
        for (int h = 0, r = o; h < k % P; h++, r = (r + 1) % P) cross += NODE(r) != NODE((r + 1) % P);   /* to rank 0 */
        int round = 0, wrap = NODE(P - 1) != NODE(0);
        for (int r = 0; r < P - 1; r++) round += NODE(r) != NODE(r + 1);
        int stream = cross + N * round + (N - 1) * wrap;
        int grad = N * round + (N - 1) * wrap + (o != P - 1 && NODE(P - 1) != NODE(o));
#undef NODE
        total += (double)(2 * stream + grad) * (double)plan_chunk_bytes(p, k);
    }
    return total;
}

/* tawpipe, groups = nodes (D of them), K rounds: every use of a chunk brings one copy into every
 * group but the owner's (D-1 transfers): per round chunk c is used forward and backward, but the
 * last chunk's backward runs in the same turn as its forward, and chunk 0's backward of round j in
 * the same turn as its forward of round j+1; so chunk 0 is used K+1 times, the last chunk K times,
 * the others 2K times (one chunk: once). Each round, each group but the owner's sends one reduced
 * gradient to the owner. */
static double tawpipe_expected(const Plan *p, int D, int K) {
    int C = p->nchunks;
    double total = 0;
    for (int c = 0; c < C; c++) {
        int uses = C == 1 ? 1 : c == 0 ? K + 1 : c == C - 1 ? K : 2 * K;
        total += (double)(D - 1) * (uses + K) * (double)plan_chunk_bytes(p, c);
    }
    return total;
}

/* The bytes of circulating (not master) weight buffers on the rank that has most. */
static size_t circulating(const Plan *p) {
    size_t most = 0;
    for (int r = 0; r < p->nranks; r++) {
        size_t b = 0;
        for (int i = 0; i < p->ranks[r].nbufs; i++)
            if (p->ranks[r].bufs[i].kind == BUF_W && !p->ranks[r].bufs[i].master) b += p->ranks[r].bufs[i].bytes;
        if (b > most) most = b;
    }
    return most;
}

static void check_traffic(const char *topo_path, const char *model, int N) {
    Topology t;
    char err[1024], name[64];
    if (topology_load(topo_path, &t, err, sizeof err)) { CHECK(0, "%s", err); return; }
    WpConfig m;
    if (model_load(model, &m, name, sizeof name, err, sizeof err)) { CHECK(0, "%s", err); topology_free(&t); return; }
    Plan *wei = fixture_plan(&t, &m, "weipipe-interleave", N, 1, 0, err, sizeof err);
    CHECK(wei != NULL, "weipipe-interleave on %s, %s: %s", topo_path, model, err);
    for (int K = 1; K <= N && wei; K = K < N ? N : N + 1) {
        Plan *taw = tawpipe_plan(&t, &m, N, 1, 0, K, NULL, err, sizeof err);
        CHECK(taw != NULL, "tawpipe on %s, %s, %d rounds: %s", topo_path, model, K, err);
        if (!taw) continue;
        double ti, tx, wi, wx;
        plan_traffic(taw, &ti, &tx);
        plan_traffic(wei, &wi, &wx);
        double et = tawpipe_expected(taw, t.nnodes, K), ew = weipipe_expected(wei, N);
        CHECK(tx == et, "%s %s: tawpipe moves %.0f bytes between nodes, counting gives %.0f", topo_path, model, tx, et);
        CHECK(wx == ew, "%s %s: weipipe-interleave moves %.0f bytes between nodes, counting gives %.0f", topo_path, model, wx, ew);
        CHECK(tx / wx == et / ew, "%s %s: ratio %.6f, expected %.6f", topo_path, model, tx / wx, et / ew);
        /* one round: a fraction of weipipe-interleave's, falling with N; one round per
         * micro-batch: still below (about (D-1)/D of it: D-1 copies cross where weipipe's
         * streams cross D ring edges) */
        CHECK(tx < (K > 1 ? 0.7 : N > 1 ? 0.35 : 0.6) * wx, "%s %s, %d rounds: tawpipe's %.0f bytes between nodes are not well below weipipe-interleave's %.0f",
              topo_path, model, K, tx, wx);
        /* memory: the weight buffers that circulate (not masters) on the rank holding most */
        size_t tw = circulating(taw), ww = circulating(wei);
        CHECK(tw < ww, "%s %s: tawpipe circulates %zu bytes of weights on a rank, weipipe-interleave %zu", topo_path, model, tw, ww);
        /* with one micro-batch per round both keep one micro-batch's activations: the peak shows
         * the saving (with one round, tawpipe keeps all N micro-batches of a rank) */
        if (K == N)
            CHECK(taw->peak_mem < wei->peak_mem, "%s %s: tawpipe's peak %zu is not below weipipe-interleave's %zu", topo_path, model,
                  taw->peak_mem, wei->peak_mem);
        printf("  %s, %s, %d micro-batches/rank, %d round%s: bytes_inter_node tawpipe %.0f, weipipe-interleave %.0f (ratio %.4f); "
               "peak memory %zu vs %zu; circulating weights %zu vs %zu\n",
               topo_path, model, N, K, K > 1 ? "s" : "", tx, wx, tx / wx, taw->peak_mem, wei->peak_mem, tw, ww);
        plan_free(taw);
    }
    if (wei) plan_free(wei);
    topology_free(&t);
}

/* A strategy that sets four chunks and calls plan:solve_placement(RANKS, "auto", ROUNDS). */
static void check_solver_refuses(const Topology *t, const char *ranks, const char *rounds, const char *want) {
    char path[512], err[2048];
    snprintf(path, sizeof path, "%s/bad-placement.lua", fixture_dir);
    FILE *f = fopen(path, "w");
    if (!f) { perror(path); exit(2); }
    fprintf(f, "return { build = function(plan, ctx)\n  plan:chunks({ 1, 1, 1, 1 })\n"
               "  plan:solve_placement(%s, \"auto\", %s)\nend }\n", ranks, rounds);
    fclose(f);
    WpConfig m = fixture_model(4);
    StrategyOpts o = { .micro_batches = 1, .replicas = 1 };
    Plan *p = NULL;
    int rc = strategy_run(path, t, &m, "test", &o, &p, err, sizeof err);
    CHECK(rc == STRATEGY_BAD_INPUT && strstr(err, want), "solve_placement(%s, %s): %s (want %s)", ranks, rounds, err, want);
    if (p) plan_free(p);
}

static void test_solver_bad_input(void) {
    Topology t;
    int per[] = { 2, 2 };
    if (fixture_topology(&t, 2, per)) { CHECK(0, "topology"); return; }
    check_solver_refuses(&t, "{ 0, 99 }", "1", "solve_placement: no rank 99 (the plan has 4)");
    check_solver_refuses(&t, "{ 0, -1 }", "1", "solve_placement: no rank -1");
    check_solver_refuses(&t, "{ 0, 1 << 32 }", "1", "solve_placement: no rank 4294967296");
    check_solver_refuses(&t, "{ 0, \"x\" }", "1", "solve_placement: ranks[2]: expected an integer");
    check_solver_refuses(&t, "{ 0, 1.5 }", "1", "solve_placement: ranks[2]: expected an integer");
    check_solver_refuses(&t, "{ }", "1", "solve_placement: 0 ranks: expected 1 to 4");
    check_solver_refuses(&t, "{ 0, 1 }", "1 << 40", "solve_placement: rounds 1099511627776");
    topology_free(&t);
}

int main(void) {
    fixture_init();
    test_solver_bad_input();
    int per[64], isl[64];
    /* one node */
    int one[] = { 1, 2, 3, 4, 5, 7, 8, 12, 16 };
    for (size_t i = 0; i < sizeof one / sizeof *one; i++) {
        per[0] = one[i];
        for (int mbs = 1; mbs <= 3; mbs++) check_shape(1, per, mbs, 1, 0, 32);
    }
    /* equal nodes */
    int eq[][2] = { { 2, 1 }, { 2, 2 }, { 2, 3 }, { 2, 4 }, { 2, 8 }, { 3, 2 }, { 3, 8 }, { 4, 2 }, { 8, 1 }, { 6, 4 } };
    for (size_t i = 0; i < sizeof eq / sizeof *eq; i++) {
        for (int k = 0; k < eq[i][0]; k++) per[k] = eq[i][1];
        for (int mbs = 1; mbs <= 2; mbs++) check_shape(eq[i][0], per, mbs, 1, 0, 32);
    }
    /* uneven nodes */
    int un[][5] = { { 3, 2, 1, 3 }, { 2, 3, 1 }, { 4, 1, 2, 1, 4 }, { 3, 5, 3, 1 }, { 2, 1, 7 } };
    for (size_t i = 0; i < sizeof un / sizeof *un; i++) {
        for (int k = 0; k < un[i][0]; k++) per[k] = un[i][k + 1];
        for (int mbs = 1; mbs <= 3; mbs++) check_shape(un[i][0], per, mbs, 1, 0, 32);
        check_shape(un[i][0], per, 2, 1, 2, 12);
        check_shape(un[i][0], per, 2, 1, 12, 12);
    }
    /* chunk counts */
    per[0] = 2; per[1] = 2;
    int cs[] = { 1, 2, 3, 5, 8, 12 };
    for (size_t i = 0; i < sizeof cs / sizeof *cs; i++) check_shape(2, per, 2, 1, cs[i], 12);
    per[0] = 4;
    for (size_t i = 0; i < sizeof cs / sizeof *cs; i++) check_shape(1, per, 1, 1, cs[i], 12);
    /* replicas */
    per[0] = per[1] = 2;
    check_shape(2, per, 2, 2, 0, 32);
    check_shape(2, per, 1, 4, 0, 32);
    for (int k = 0; k < 4; k++) per[k] = 2;
    check_shape(4, per, 2, 2, 0, 32);
    check_shape(4, per, 1, 4, 0, 32);
    per[0] = 2; per[1] = 1; per[2] = 3;
    check_shape(3, per, 2, 2, 0, 12);      /* replicas of different shapes: 2+1 and 3 */
    check_shape(3, per, 1, 3, 0, 12);
    check_shape(3, per, 1, 6, 0, 12);
    for (int k = 0; k < 8; k++) per[k] = 4;
    check_shape(8, per, 1, 4, 0, 32);      /* 4 replicas of 2 nodes x 4 */

    /* islands, and every grouping the solver can be told to take */
    const char *modes[] = { NULL, "node", "island", "published" };
    int ishape[][7] = { { 2, 8, 8, 2, 2 }, { 1, 8, 2 }, { 2, 4, 2, 2, 1 }, { 3, 4, 8, 2, 2, 4, 2 } };
    for (size_t i = 0; i < sizeof ishape / sizeof *ishape; i++) {
        int nn = ishape[i][0];
        for (int k = 0; k < nn; k++) { per[k] = ishape[i][1 + k]; isl[k] = ishape[i][1 + nn + k]; }
        Topology t;
        if (fixture_topology_islands(&t, nn, per, isl)) { CHECK(0, "islands topology"); continue; }
        for (size_t mi = 0; mi < sizeof modes / sizeof *modes; mi++) {
            check_plan_on(&t, 2, 1, 0, 32, modes[mi], 0);
            check_plan_on(&t, 1, 1, 5, 12, modes[mi], 0);
        }
        char label[64];
        snprintf(label, sizeof label, "islands shape %zu", i);
        check_solver(&t, t.ndevices, PLACE_AUTO, label);
        check_solver(&t, t.ndevices, PLACE_ISLAND, label);
        WpConfig m = fixture_model(32);
        check_solver_matches_plan(&t, &m, 2, 1);
        topology_free(&t);
    }
    /* uneven nodes, other groupings */
    per[0] = 2; per[1] = 1; per[2] = 3;
    {
        Topology t;
        if (fixture_topology(&t, 3, per) == 0) {
            for (size_t mi = 0; mi < sizeof modes / sizeof *modes; mi++) check_plan_on(&t, 2, 1, 0, 12, modes[mi], 0);
            check_solver(&t, 6, PLACE_AUTO, "uneven 2+1+3, 6 chunks");
            check_solver(&t, 12, PLACE_AUTO, "uneven 2+1+3, 12 chunks");
            check_solver(&t, 4, PLACE_NODE, "uneven 2+1+3, 4 chunks");
            WpConfig m = fixture_model(12);
            check_solver_matches_plan(&t, &m, 2, 1);
            check_solver_matches_plan(&t, &m, 3, 2);
            check_solver_matches_plan(&t, &m, 3, 3);
            topology_free(&t);
        } else CHECK(0, "topology");
    }
    for (int k = 0; k < 4; k++) per[k] = 2;
    {
        Topology t;
        if (fixture_topology(&t, 4, per) == 0) {
            WpConfig m = fixture_model(32);
            check_solver_matches_plan(&t, &m, 1, 1);
            check_solver_matches_plan(&t, &m, 2, 2);
            check_solver(&t, 8, PLACE_AUTO, "4x2, 8 chunks");
            topology_free(&t);
        } else CHECK(0, "topology");
    }

    /* the papers' clusters */
    const char *topos[] = { "topologies/weipipe-2x8-a800-nvlink-10gbe.json", "topologies/tawpipe-3x8-a800-pcie-10gbe.json" };
    const char *models[] = { "llama-h1024", "llama-h2048" };
    for (int ti = 0; ti < 2; ti++)
        for (int mi = 0; mi < 2; mi++)
            for (int N = 1; N <= 4; N *= 2) check_traffic(topos[ti], models[mi], N);
    /* chunk counts below and above... one chunk: nothing circulates between rounds */
    per[0] = 2; per[1] = 2;
    check_shape_rounds(2, per, 2, 1, 1, 12, 2);
    check_shape_rounds(2, per, 3, 1, 2, 12, 2);

    fixture_done();
    return check_summary("test_tawpipe");
}
