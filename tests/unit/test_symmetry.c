/* The simulator's symmetry shortcut (generator/sim/symmetry.c): replicas that are moves of one
 * pipeline simulated once give the results of simulating every rank: step time, bubble, bytes
 * per link class, each rank's end and busy time, the time waiting for transfers. On every
 * shipped strategy and replica count of clusters small enough to simulate fully, with one NIC
 * per node (replicas sharing it), one per device, PCIe islands and several replicas per node;
 * and the shortcut is taken where the replicas are moves of each other (a test of the
 * shortcut that never ran it would prove nothing). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "check.h"
#include "plan_fixture.h"
#include "sim/sim.h"
#include "common/modelcfg.h"

static int ncases, nsym;

/* --replicate-ends for the next plans: the replicated chunks' all-reduce over all ranks, a group
 * across the replicas with a block of members in each */
static int ends;

/* mbs micro-batches per rank, pass_mbs of them per weight pass (weipipe's K; 0: the strategy's) */
static void compare_k(const char *topo_path, const char *model_name, int seq, const char *strategy, int R, int rec, int mbs, int pass_mbs) {
    char err[4096], name[256];
    Topology t;
    WpConfig m;
    if (topology_load(topo_path, &t, err, sizeof err)) { CHECK(0, "%s", err); return; }
    if (model_load(model_name, &m, name, sizeof name, err, sizeof err)) { CHECK(0, "%s", err); topology_free(&t); return; }
    if (seq) m.seq = seq;
    StrategyOpts o = { .micro_batches = mbs, .replicas = R, .recompute = rec, .precision = WP_BF16, .grad_precision = WP_BF16 };
    if (pass_mbs) opts_set_int(&o, "pass_micro_batches", pass_mbs);
    if (ends) opts_set_bool(&o, "replicate_ends", 1);
    Plan *p = fixture_plan_opts(&t, &m, strategy, &o, err, sizeof err);
    if (!p) { topology_free(&t); return; }   /* a shape the strategy refuses: nothing to compare */
    SimOptions full = { .no_symmetry = 1 }, fast = { 0 };
    SimResult a, b;
    if (sim_run(p, &full, &a, err, sizeof err) || sim_run(p, &fast, &b, err, sizeof err)) {
        CHECK(0, "sim: %s", err);
        plan_free(p); topology_free(&t);
        return;
    }
    char what[300];
    snprintf(what, sizeof what, "%s %s r%d rc%d k%d%s", topo_path, strategy, R, rec, pass_mbs, ends ? " ends" : "");
    ncases++;
    nsym += b.symmetric > 0;
    CHECK(a.symmetric == 0, "%s: the full simulation took the shortcut", what);
    CHECK_CLOSE(b.step_time, a.step_time, 1e-9, 0, what);
    CHECK_CLOSE(b.bubble_ratio, a.bubble_ratio, 1e-9, 1e-12, what);
    CHECK_CLOSE(b.comm_exposed_s, a.comm_exposed_s, 1e-9, 1e-9 * a.step_time, what);
    CHECK_CLOSE(b.compute_s, a.compute_s, 1e-9, 0, what);
    for (int l = 0; l < LINK__COUNT; l++) CHECK_CLOSE(b.link_bytes[l], a.link_bytes[l], 1e-12, 0, what);
    int worst = 0;
    for (int r = 0; r < p->nranks; r++)
        if (fabs(b.rank_end[r] - a.rank_end[r]) > 1e-9 * a.step_time || fabs(b.rank_busy[r] - a.rank_busy[r]) > 1e-9 * a.step_time) worst++;
    CHECK(worst == 0, "%s: %d ranks end or compute differently", what, worst);
    sim_result_free(&a);
    sim_result_free(&b);
    plan_free(p);
    topology_free(&t);
}

static void compare(const char *topo_path, const char *model_name, int seq, const char *strategy, int R, int rec) {
    compare_k(topo_path, model_name, seq, strategy, R, rec, 2, 0);
}

/* nodes x devices, nics per node, islands per node: written as topology JSON */
static const char *cluster(const char *file, int nodes, int devices, int nics, int islands) {
    static char path[400];
    snprintf(path, sizeof path, "%s/%s", fixture_dir, file);
    FILE *f = fopen(path, "w");
    if (!f) return NULL;
    fprintf(f, "{\"version\": 1, \"name\": \"%s\", \"device_types\": {\"g\": {\"peak_tflops_bf16\": 300, \"mem_gb\": 80, \"hbm_GBps\": 2000}},\n \"nodes\": [",
            file);
    for (int i = 0; i < nodes; i++)
        fprintf(f, "%s{\"name\": \"n%d\", \"devices\": %d, \"type\": \"g\", \"islands\": %d, \"intra\": {\"type\": \"%s\", \"bw_GBps\": 100, \"lat_us\": 2}}",
                i ? ", " : "", i, devices, islands, islands > 1 ? "PCI" : "NVL");
    fprintf(f, "], \"network\": {\"type\": \"NET\", \"bw_GBps\": 10, \"lat_us\": 10, \"nics_per_node\": %d}}\n", nics);
    fclose(f);
    return path;
}

int main(void) {
    fixture_init();
    (void)fixture_model; (void)fixture_topology;   /* the fixture's other helpers, unused here */
    const char *strategies[] = { "weipipe-interleave", "weipipe-naive", "1f1b", "fsdp", "tawpipe" };
    struct { const char *file; int nodes, devices, nics, islands; } shapes[] = {
        { "one-nic.json", 4, 4, 1, 1 },       /* replicas share a node's only NIC */
        { "nic-per-gpu.json", 4, 4, 4, 1 },
        { "islands.json", 2, 8, 2, 2 },       /* PCIe islands, two NICs */
    };
    for (size_t k = 0; k < sizeof shapes / sizeof shapes[0]; k++) {
        char path[400];
        const char *pp = cluster(shapes[k].file, shapes[k].nodes, shapes[k].devices, shapes[k].nics, shapes[k].islands);
        if (!pp) { CHECK(0, "cannot write a topology"); continue; }
        snprintf(path, sizeof path, "%s", pp);
        int P = shapes[k].nodes * shapes[k].devices;
        for (size_t s = 0; s < sizeof strategies / sizeof strategies[0]; s++)
            for (int R = 2; R <= P; R *= 2)
                for (int rec = 0; rec < 2; rec++) compare(path, "llama-h1024", 1024, strategies[s], R, rec);
    }
    /* the shipped clusters of the papers */
    const char *topos[] = { "topologies/weipipe-2x8-a800-nvlink-10gbe.json", "topologies/cpu-4x2.json" };
    for (size_t k = 0; k < 2; k++)
        for (size_t s = 0; s < sizeof strategies / sizeof strategies[0]; s++)
            for (int R = 2; R <= 8; R *= 2) compare(topos[k], "llama-h1024", 2048, strategies[s], R, 0);
    /* K = 2 micro-batches per weight pass of 3 */
    for (int R = 2; R <= 8; R *= 2) compare_k(topos[0], "llama-h1024", 2048, "weipipe-interleave", R, 0, 3, 2);
    /* replicated ends: the ends' all-reduce spans every replica's ranks; on every shape above */
    ends = 1;
    int before_ends = nsym, cases_ends = ncases;
    for (size_t k = 0; k < sizeof shapes / sizeof shapes[0]; k++) {
        char path[400];
        snprintf(path, sizeof path, "%s/%s", fixture_dir, shapes[k].file);
        for (int R = 2; R <= 8; R *= 2) compare_k(path, "llama-h1024", 1024, R == 4 ? "weipipe-naive" : "weipipe-interleave", R, R == 8, 2, 0);
    }
    for (int R = 2; R <= 8; R *= 2) compare_k(topos[0], "llama-h1024", 2048, "weipipe-interleave", R, 0, 3, 2);
    for (int R = 2; R <= 8; R *= 2) compare_k(topos[0], "llama-h1024", 2048, R == 4 ? "weipipe-zb2" : "weipipe-zb1", R, 0, 2, 0);
    ends = 0;
    CHECK(nsym - before_ends == ncases - cases_ends, "replicated ends: the shortcut ran on %d of %d plans", nsym - before_ends, ncases - cases_ends);
    printf("%d plans compared, %d simulated with the shortcut\n", ncases, nsym);
    CHECK(nsym >= ncases * 3 / 4, "the shortcut ran on %d of %d plans", nsym, ncases);
    /* replicas on nodes of different sizes are no moves of each other: simulated in full, the same */
    int before = nsym;
    for (size_t s = 0; s < sizeof strategies / sizeof strategies[0]; s++) compare("topologies/cpu-uneven.json", "tiny", 0, strategies[s], 2, 0);
    CHECK(nsym == before, "the shortcut ran on the uneven cluster");
    fixture_done();
    return check_summary("test_symmetry");
}
