/* Test fixtures for plans: clusters of any shape written as topology JSON into a temporary
 * directory, a small model of any depth, and building + verifying a plan with a strategy.
 * Header-only, for tests. */
#ifndef WP_PLAN_FIXTURE_H
#define WP_PLAN_FIXTURE_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "input/topology.h"
#include "ir/plan.h"
#include "lua/bridge.h"

static char fixture_dir[256];

/* Strategies and templates are found from the repository root, where tests run. */
static void fixture_init(void) {
    char cwd[4096];
    if (!getcwd(cwd, sizeof cwd)) { perror("getcwd"); exit(2); }
    setenv("WPGEN_HOME", cwd, 1);
    snprintf(fixture_dir, sizeof fixture_dir, "/tmp/wpgen-test-XXXXXX");
    if (!mkdtemp(fixture_dir)) { perror("mkdtemp"); exit(2); }
}

static void fixture_done(void) {
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf %s", fixture_dir);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", fixture_dir);
}

/* A cluster of `nodes` nodes with per_node[i] CPU devices on node i, in islands[i] PCIe islands
 * (islands NULL: one each, shared memory inside a node). */
static int fixture_topology_islands(Topology *t, int nodes, const int *per_node, const int *islands) {
    char path[400], err[512];
    snprintf(path, sizeof path, "%s/topo.json", fixture_dir);
    FILE *f = fopen(path, "w");
    if (!f) return -1;
    fprintf(f, "{\"version\": 1, \"name\": \"test\", \"device_types\": {\"cpu\": {\"peak_tflops_fp32\": 0.05, \"mem_gb\": 64, \"hbm_GBps\": 10}},\n \"nodes\": [");
    for (int i = 0; i < nodes; i++) {
        fprintf(f, "%s{\"name\": \"n%d\", \"devices\": %d, \"type\": \"cpu\", ", i ? ", " : "", i, per_node[i]);
        if (islands) fprintf(f, "\"islands\": %d, \"intra\": {\"type\": \"PCI\", \"bw_GBps\": 5, \"lat_us\": 1}}", islands[i]);
        else fprintf(f, "\"intra\": {\"type\": \"SHM\", \"bw_GBps\": 5, \"lat_us\": 1}}");
    }
    fprintf(f, "]%s}\n", nodes > 1 ? ", \"network\": {\"type\": \"NET\", \"bw_GBps\": 1, \"lat_us\": 10}" : "");
    fclose(f);
    if (topology_load(path, t, err, sizeof err)) { fprintf(stderr, "%s\n", err); return -1; }
    return 0;
}

static int fixture_topology(Topology *t, int nodes, const int *per_node) {
    return fixture_topology_islands(t, nodes, per_node, NULL);
}

/* A small model: cheap to plan at any depth. */
static WpConfig fixture_model(int layers) {
    WpConfig m = { .hidden = 16, .layers = layers, .heads = 2, .kv_heads = 1, .head_dim = 8, .ffn = 32,
                   .vocab = 64, .eps = 1e-5f, .rope_theta = 10000, .tied = 0, .seq = 8, .mbs = 1 };
    return m;
}

/* Builds and verifies; returns the plan, or NULL with the message in err. */
static inline Plan *fixture_plan_opts(const Topology *t, const WpConfig *m, const char *strategy, const StrategyOpts *o,
                               char *err, size_t errlen) {
    Plan *p = NULL;
    if (strategy_run(strategy, t, m, "test", o, &p, err, errlen)) return NULL;
    if (plan_verify(p, err, errlen)) { plan_free(p); return NULL; }
    return p;
}

/* The same in fp32. */
static inline Plan *fixture_plan(const Topology *t, const WpConfig *m, const char *strategy, int micro_batches,
                          int replicas, int chunks, char *err, size_t errlen) {
    StrategyOpts o = { .micro_batches = micro_batches, .replicas = replicas, .chunks = chunks };
    return fixture_plan_opts(t, m, strategy, &o, err, errlen);
}

/* weipipe-interleave with 2 micro-batches per rank on fixture_model(4) over nodes of per_node ranks:
 * the plan several tests simulate. NULL with the reason in err (t then holds nothing to free). */
static inline Plan *fixture_ring_plan(Topology *t, int nodes, const int *per_node, char *err, size_t errlen) {
    if (fixture_topology(t, nodes, per_node)) return snprintf(err, errlen, "the fixture topology did not load"), NULL;
    WpConfig m = fixture_model(4);
    Plan *p = fixture_plan(t, &m, "weipipe-interleave", 2, 1, 0, err, errlen);
    if (!p) topology_free(t);
    return p;
}

#endif
