/* The verifier executing replica 0 for replicas that are copies of it (verify_replicas.c) proves
 * what executing every rank proves: on every shipped strategy and replica count of small
 * clusters, the same notes on every operation (what the emitter words) and the same peak memory
 * on every rank, with the shortcut taken; and a plan broken in a replica other than 0 (a
 * micro-batch run twice, a forward moved to another micro-batch) is rejected, as it is whole. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "check.h"
#include "plan_fixture.h"
#include "verify/verify_replicas.h"
#include "common/modelcfg.h"

static Plan *build(const Topology *t, const WpConfig *m, const char *strategy, int R) {
    StrategyOpts o = { .micro_batches = 2, .replicas = R, .precision = WP_BF16, .grad_precision = WP_BF16 };
    Plan *p = NULL;
    char err[4096];
    if (strategy_run(strategy, t, m, "test", &o, &p, err, sizeof err)) { plan_free(p); return NULL; }
    return p;
}

static int verify(Plan *p, int all, char *err, size_t len) {
    if (all) setenv("WPGEN_VERIFY_ALL", "1", 1);
    else unsetenv("WPGEN_VERIFY_ALL");
    int rc = plan_verify(p, err, len);
    unsetenv("WPGEN_VERIFY_ALL");
    return rc;
}

static int ncases;

static void same(const Topology *t, const WpConfig *m, const char *strategy, int R) {
    char err[4096];
    Plan *p = build(t, m, strategy, R);
    if (!p) return;
    if (verify(p, 1, err, sizeof err)) { CHECK(0, "%s r%d: %s", strategy, R, err); plan_free(p); return; }
    long ops = 0;
    for (int r = 0; r < p->nranks; r++) ops += p->ranks[r].nops;
    OpNote *notes = malloc((size_t)ops * sizeof *notes);
    size_t *peak = malloc((size_t)p->nranks * sizeof *peak);
    long k = 0;
    for (int r = 0; r < p->nranks; r++) {
        memcpy(notes + k, p->ranks[r].notes, (size_t)p->ranks[r].nops * sizeof *notes);
        k += p->ranks[r].nops;
        peak[r] = p->ranks[r].peak_mem;
    }
    long before = verify_replicas_runs;
    int rc = verify(p, 0, err, sizeof err);
    CHECK(rc == 0, "%s r%d: rejected executing replica 0 only: %s", strategy, R, err);
    CHECK(verify_replicas_runs == before + 1, "%s r%d: the replicas were executed whole", strategy, R);
    int diff = 0, mem = 0;
    k = 0;
    for (int r = 0; r < p->nranks; r++) {
        for (int i = 0; i < p->ranks[r].nops; i++, k++) {
            const OpNote *a = &notes[k], *b = &p->ranks[r].notes[i];
            diff += a->chunk != b->chunk || a->from_rank != b->from_rank || a->from_turn != b->from_turn || a->first != b->first ||
                    a->shard != b->shard || a->nshards != b->nshards;
        }
        mem += peak[r] != p->ranks[r].peak_mem;
    }
    CHECK(diff == 0 && mem == 0, "%s r%d: %d notes and %d ranks' peaks differ", strategy, R, diff, mem);
    ncases++;
    /* broken in replica 1: a forward of its moved to a micro-batch replica 0 runs */
    int victim = -1;
    for (int r = 0; r < p->nranks && victim < 0; r++) if (p->ranks[r].replica == 1) victim = r;
    int r0 = -1;
    for (int r = 0; r < p->nranks && r0 < 0; r++) if (p->ranks[r].replica == 0 && p->ranks[r].stage == p->ranks[victim].stage) r0 = r;
    for (int i = 0; i < p->ranks[victim].nops; i++)
        if (p->ranks[victim].ops[i].kind == OP_FWD) {
            p->ranks[victim].ops[i].mb = p->ranks[r0].ops[i].mb;
            break;
        }
    CHECK(verify(p, 0, err, sizeof err) != 0, "%s r%d: a micro-batch run by replicas 0 and 1 passes", strategy, R);
    CHECK(verify(p, 1, err, sizeof err) != 0, "%s r%d: a micro-batch run by replicas 0 and 1 passes whole", strategy, R);
    free(notes); free(peak);
    plan_free(p);
}

int main(void) {
    fixture_init();
    (void)fixture_model; (void)fixture_topology;   /* the fixture's other helpers, unused here */
    const char *strategies[] = { "weipipe-interleave", "weipipe-naive", "1f1b", "fsdp", "tawpipe" };
    const char *topos[] = { "topologies/weipipe-2x8-a800-nvlink-10gbe.json", "topologies/cpu-4x2.json", "topologies/tawpipe-2x8-a800-pcie-2islands-10gbe.json" };
    char err[4096], name[256];
    WpConfig m;
    if (model_load("llama-h1024", &m, name, sizeof name, err, sizeof err)) { CHECK(0, "%s", err); return check_summary("test_verify_replicas"); }
    m.seq = 1024;
    for (size_t k = 0; k < sizeof topos / sizeof topos[0]; k++) {
        Topology t;
        if (topology_load(topos[k], &t, err, sizeof err)) { CHECK(0, "%s", err); continue; }
        for (size_t s = 0; s < sizeof strategies / sizeof strategies[0]; s++)
            for (int R = 2; R <= t.ndevices; R *= 2) same(&t, &m, strategies[s], R);
        topology_free(&t);
    }
    printf("%d plans verified both ways\n", ncases);
    CHECK(ncases >= 40, "only %d plans", ncases);
    fixture_done();
    return check_summary("test_verify_replicas");
}
