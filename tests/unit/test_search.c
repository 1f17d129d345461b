/* The pruned search of -s auto and compare (generator/search/search.c) against building and
 * simulating everything, on clusters small enough to do so: no candidate, pruned or not, beats
 * the one the search chose (per strategy too, as compare uses it); and each pruning rule holds on
 * every candidate: the memory bound is below the verifier's peak, the time bound below the
 * simulated step, the one-replica run fits whenever the candidate does and is no slower, fp32 is
 * no faster and no smaller than bf16, recomputation (with offload or not) no faster than none; over the micro-batches
 * per weight pass and the rounds the search tries too (weipipe-interleave's K, tawpipe's rounds).
 * The turn-by-turn bounds of weipipe's ring and of tawpipe are also checked to come close to the
 * step (each case's least ratio), so that they cannot fall back to the compute unnoticed; the
 * buffers the memory bound counts at rank 0 of weipipe's ring, against those the plan declares
 * there; and compare's row of each strategy is its best candidate, chunks included. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "check.h"
#include "common/step.h"
#include "plan_fixture.h"
#include "cli/cli.h"
#include "search/search.h"
#include "search/bounds.h"
#include "common/modelcfg.h"
#include "emit/backends.h"

typedef struct Case {
    const char *topo, *model;
    int seq, mbs, micro_batches;
    double tight;       /* the least bound / step of the rings' and tawpipe's candidates that fit */
} Case;

static double simulate(const Plan *p) {
    SimResult s;
    char err[512];
    if (sim_run(p, NULL, &s, err, sizeof err)) { fprintf(stderr, "sim: %s\n", err); return -1; }
    double t = s.step_time;
    sim_result_free(&s);
    return t;
}

/* The case's topology and model (its seq and micro-batch size applied); nonzero, counted as a
 * failure, when either does not load. */
static int load_case(const Case *k, Topology *topo, WpConfig *model, char *name, size_t len) {
    char err[4096], path[512];
    snprintf(path, sizeof path, "topologies/%s.json", k->topo);
    if (topology_load(path, topo, err, sizeof err)) { CHECK(0, "%s", err); return -1; }
    if (model_load(k->model, model, name, len, err, sizeof err)) { CHECK(0, "%s", err); topology_free(topo); return -1; }
    if (k->seq) model->seq = k->seq;
    if (k->mbs) model->mbs = k->mbs;
    return 0;
}

static int ring_waits;   /* plans on which the ring's waiting buffers were counted */

/* tied_models: the cases' models with tied embeddings, which every strategy plans over several
 * chunks its own way (TIE on every rank with replicated ends, TIE_ALLREDUCE between two ranks),
 * and for which the bounds must hold all the same */
static int tied_models;

static void run_case(const Case *k) {
    char err[4096], name[256];
    Topology topo;
    WpConfig model;
    if (load_case(k, &topo, &model, name, sizeof name)) return;
    model.tied = tied_models;
    /* the candidates enumerated here are of C = 1 (cp_bounds below, tests/sim/test_cp_search.sh: over C) */
    Args a = { .cmd = "sim", .strategy = "auto", .backend = backend_default(BACKEND_COMPUTE), .comm = backend_default(BACKEND_COMM),
               .micro_batches = k->micro_batches, .replicas = 1, .context_parallel = 1, .set_context_parallel = 1 };
    char names[32][64];
    int ns = shipped_strategies(names, 32);
    SearchResult all, each;
    SearchSpec sp = search_spec_of(&a, &topo);
    search_run(&sp, &topo, &model, name, names, ns, 0, &all);
    search_run(&sp, &topo, &model, name, names, ns, 1, &each);
    const SearchStats *st = &all.stats;
    int pruned = 0;
    for (int i = 0; i < PRUNE__COUNT; i++) pruned += st->pruned[i];
    CHECK(pruned + st->simulated == st->considered, "%s: %d pruned + %d simulated != %d considered", k->topo, pruned, st->simulated, st->considered);
    double chosen = all.winner >= 0 ? all.best[all.winner].c.step : -1;
    StrategyOpts base = opts_of(&a, &topo);
    int P = topo.ndevices, nbuilt = 0, nfit = 0, nsub = 0;
    /* the turn-by-turn bounds of the rings (weipipe-interleave, weipipe-naive) and of tawpipe:
     * the least of bound / step over their candidates that fit, which must be close to 1 */
    double tight_ring = 2, tight_taw = 2;
    for (int si = 0; si < ns; si++) {
        double best_of_strategy = -1;   /* over every candidate of the strategy, as compare searches */
        for (int R = 1; R <= P; R++) {
            if (P % R) continue;
            /* the option sets the search tries (K, rounds, fsdp's variants), and fsdp's with
             * --fsdp-overlap off too, which the search never picks: its bounds must hold for it
             * all the same */
            for (int cm = 0; cm < 2 * (strcmp(names[si], "fsdp") ? 1 : 2); cm++) {
            DeclSearchCtx dc = { .micro_batches = k->micro_batches, .ranks = P / R, .layers = model.layers, .chunks = cm % 2 ? 2 * (P / R) : 0 };
            StrategyOpts sets[SEARCH_MAX_SETS];
            int nk = search_option_sets(names[si], &base, &dc, sets, SEARCH_MAX_SETS);
            for (int ki = 0; ki < nk; ki++) {
                double step_norc = -1;
                const OptVal *kv = opts_get(&sets[ki], "pass_micro_batches");
                if (!kv) kv = opts_get(&sets[ki], "rounds");
                int kk = kv ? (int)kv->i : 0;
                for (int rec = 0; rec <= WP_RECOMPUTE_OFFLOAD; rec++) {   /* config.h's modes: none, recompute, offload */
                    Cand cd = { .o = sets[ki] };
                    cd.o.replicas = R; cd.o.chunks = dc.chunks; cd.o.recompute = rec;
                    if (cm >= 2) opts_set_str(&cd.o, "fsdp_overlap", "off");
                    snprintf(cd.strategy, sizeof cd.strategy, "%.63s", names[si]);
                    double mem_lb = search_mem_bound(cd.strategy, &topo, &model, &cd.o);
                    double time_lb = search_time_bound(cd.strategy, &topo, &model, &cd.o, NULL);
                    Plan *p = NULL;
                    if (make_plan(cd.strategy, &topo, &model, name, &cd.o, &p, err, sizeof err)) continue;
                    nbuilt++;
                    CHECK(mem_lb <= (double)p->peak_mem, "%s %s r%d c%d k%d rc%d: memory bound %.4g above the peak %zu", k->topo, cd.strategy,
                          R, cd.o.chunks, kk, rec, mem_lb, p->peak_mem);
                    /* rank 0 of weipipe's ring holds at least the buffers the memory bound counts for
                     * the streams waiting there between rounds (pool buffers: "w<i>", "d<i>") */
                    if (!tied_models && (!strcmp(cd.strategy, "weipipe-interleave") || !strcmp(cd.strategy, "weipipe-naive"))) {
                        /* (a tied ring replicates its ends: then the ring's streams wait at no owner) */
                        int N = k->micro_batches, K = kk ? kk : !strcmp(cd.strategy, "weipipe-naive") ? N : 1, wn, dn, wc = 0, dc = 0;
                        bound_ring_wait_buffers(p->nchunks, P / R, (N + K - 1) / K, &wn, &dn);
                        for (int i = 0; i < p->ranks[0].nbufs; i++) {
                            const PlanBuf *pb = &p->ranks[0].bufs[i];
                            wc += pb->kind == BUF_W && pb->name[0] == 'w';
                            dc += pb->kind == BUF_D && pb->name[0] == 'd';
                        }
                        CHECK(wn <= wc && dn <= dc, "%s %s r%d c%d k%d: rank 0 holds %d weight and %d gradient buffers, the bound counts %d and %d", k->topo,
                              cd.strategy, R, p->nchunks, kk, wc, dc, wn, dn);
                        if (wn > 0) ring_waits++;
                    }
                    int fits = plan_fits(p);
                    double step = fits ? simulate(p) : -1;
                    if (fits) {
                        nfit++;
                        CHECK(time_lb <= step * (1 + 1e-12), "%s %s r%d rc%d: time bound %.6g above the step %.6g", k->topo, cd.strategy, R, rec,
                              time_lb, step);
                        double ratio = time_lb / step;
                        if ((!strcmp(cd.strategy, "weipipe-interleave") || !strcmp(cd.strategy, "weipipe-naive")) && P / R > 1 && ratio < tight_ring)
                            tight_ring = ratio;
                        if (!strcmp(cd.strategy, "tawpipe") && P / R > 1 && ratio < tight_taw) tight_taw = ratio;
                        CHECK(chosen > 0 && step >= chosen * (1 - 1e-9), "%s: %s r%d c%d k%d rc%d takes %.6g s, the search chose %.6g s",
                              k->topo, cd.strategy, R, cd.o.chunks, kk, rec, step, chosen);
                        if (best_of_strategy < 0 || step < best_of_strategy) best_of_strategy = step;   /* every candidate: compare's rows */
                        if (rec && step_norc > 0 && search_rule_holds(cd.strategy, &cd.o, PRUNE_DOMINATED))
                            CHECK(step >= step_norc * (1 - 1e-9), "%s %s r%d: recomputation faster (%.6g < %.6g)", k->topo, cd.strategy, R, step, step_norc);
                        if (!rec) step_norc = step;
                    }
                    if (R > 1 && search_rule_holds(cd.strategy, &cd.o, RULE_ONE_REPLICA)) {
                        int f1;
                        double s1;
                        if (search_one_replica_bound(&cd, &topo, &model, name, 0, NULL, &f1, &s1) == 0) {
                            nsub++;
                            CHECK(f1 || !fits, "%s %s r%d rc%d: one replica does not fit, the candidate does", k->topo, cd.strategy, R, rec);
                            if (fits && f1)
                                CHECK(s1 <= step * (1 + 1e-9), "%s %s r%d c%d k%d rc%d: one replica takes %.6g s, the candidate %.6g s", k->topo,
                                      cd.strategy, R, cd.o.chunks, kk, rec, s1, step);
                        } else CHECK(0, "%s %s r%d: one replica refused where the candidate is not", k->topo, cd.strategy, R);
                    }
                    if (base.precision != WP_FP32 && !rec && !cm) {   /* fp32 against bf16 */
                        Cand c32 = cd;
                        c32.o.precision = c32.o.grad_precision = WP_FP32;
                        Plan *q = NULL;
                        if (make_plan(c32.strategy, &topo, &model, name, &c32.o, &q, err, sizeof err) == 0) {
                            /* smaller but for what only bf16 gradients take: the fp32 staging
                             * gradient and the room for transfers in another format (on this
                             * test's small model the activations bf16 saves can be less) */
                            size_t extra = 0;
                            for (int r = 0; r < p->nranks; r++) {
                                size_t e = plan_grad_stage_bytes(p, r) + plan_rank_xfer_bytes(p, r, WP_XFER_ALIGN);
                                if (e > extra) extra = e;
                            }
                            CHECK(q->peak_mem + extra >= p->peak_mem, "%s %s r%d: fp32 smaller than bf16", k->topo, cd.strategy, R);
                            if (fits && plan_fits(q)) CHECK(simulate(q) >= step * (1 - 1e-9), "%s %s r%d: fp32 faster than bf16", k->topo, cd.strategy, R);
                            plan_free(q);
                        }
                    }
                    plan_free(p);
                }
            }
            }
        }
        /* compare: each strategy's best over replicas, chunks, rounds, variants and recomputation */
        const SearchBest *b = &each.best[si];
        if (best_of_strategy < 0) CHECK(b->c.rc != 0, "%s %s: the search found a plan that fits where none does", k->topo, names[si]);
        else CHECK(b->c.rc == 0 && fabs(b->c.step - best_of_strategy) <= 1e-9 * best_of_strategy, "%s %s: compare's %.6g s, the best %.6g s",
                   k->topo, names[si], b->c.rc == 0 ? b->c.step : -1, best_of_strategy);
    }
    printf("%s %s seq %d: %d built, %d fit, %d one-replica runs; search: %d considered, %d simulated, chose %.4g s; "
           "time bound / step at least %.3f (rings), %.3f (tawpipe)\n", k->topo, k->model, model.seq, nbuilt, nfit, nsub, st->considered,
           st->simulated, chosen, tight_ring, tight_taw);
    CHECK(tied_models || (tight_ring >= k->tight && tight_taw >= k->tight), "%s: the rings' and tawpipe's time bounds are loose: %.3f, %.3f of the step (expected %.2f)",
          k->topo, tight_ring, tight_taw, k->tight);
    CHECK(st->simulated < nfit || nfit <= 2, "%s: the search simulated %d of %d that fit: nothing pruned", k->topo, st->simulated, nfit);
    /* with a time limit: an answer that fits, whatever was left untried, every candidate counted */
    SearchSpec lim = sp;
    lim.search_seconds = 1;
    SearchResult quick;
    search_run(&lim, &topo, &model, name, names, ns, 0, &quick);
    int qp = 0;
    for (int i = 0; i < PRUNE__COUNT; i++) qp += quick.stats.pruned[i];
    CHECK(qp + quick.stats.simulated == quick.stats.considered, "%s: --search-seconds: candidates lost", k->topo);
    CHECK((quick.winner >= 0) == (all.winner >= 0) && (quick.winner < 0 || quick.best[quick.winner].c.step >= chosen * (1 - 1e-9)),
          "%s: --search-seconds: no answer, or one better than the full search's", k->topo);
    search_free(&quick);
    search_free(&all);
    search_free(&each);
    topology_free(&topo);
}

/* --replicate-ends (weipipe-naive, -interleave, -zb1, -zb2): the memory and time bounds hold on every plan of
 * the cluster (replicas, chunks, recomputation, K); and the flag reaches only those strategies.
 * tied: the model's embeddings tied and the flag not given: the ring replicates the ends for it
 * over more than one chunk, and the bounds must know (bounds.c, model_traits). */
static void ends_bounds(const Case *k, int tied) {
    char err[4096], name[256];
    Topology topo;
    WpConfig model;
    if (load_case(k, &topo, &model, name, sizeof name)) return;
    model.tied = tied;
    Args a = { .cmd = "sim", .strategy = "auto", .backend = backend_default(BACKEND_COMPUTE), .comm = backend_default(BACKEND_COMM),
               .micro_batches = k->micro_batches, .replicas = 1, .context_parallel = 1, .set_context_parallel = 1 };
    StrategyOpts base = opts_of(&a, &topo);
    if (!tied) opts_set_bool(&base, "replicate_ends", 1);
    const char *names[] = { "weipipe-interleave", "weipipe-naive", "weipipe-zb1", "weipipe-zb2" };
    int P = topo.ndevices, nbuilt = 0;
    for (int si = 0; si < 4; si++)
        for (int R = 1; R <= P; R++) {
            if (P % R) continue;
            for (int cm = 0; cm < 2; cm++) {
                DeclSearchCtx dc = { .micro_batches = k->micro_batches, .ranks = P / R, .layers = model.layers, .chunks = cm ? 2 * (P / R) : 0 };
                StrategyOpts sets[SEARCH_MAX_SETS];
                int nk = search_option_sets(names[si], &base, &dc, sets, SEARCH_MAX_SETS);
                for (int ki = 0; ki < nk; ki++)
                    for (int rec = 0; rec <= WP_RECOMPUTE_OFFLOAD; rec++) {   /* config.h's modes: none, recompute, offload */
                        const OptVal *kv = opts_get(&sets[ki], "pass_micro_batches");
                        int kk = kv ? (int)kv->i : 0;
                        Cand cd = { .o = sets[ki] };
                        cd.o.replicas = R; cd.o.chunks = dc.chunks; cd.o.recompute = rec;
                        const OptVal *re = opts_get(&cd.o, "replicate_ends");
                        CHECK(tied || (re && re->i == 1), "%s: --replicate-ends dropped", names[si]);
                        snprintf(cd.strategy, sizeof cd.strategy, "%s", names[si]);
                        double mem_lb = search_mem_bound(cd.strategy, &topo, &model, &cd.o);
                        double time_lb = search_time_bound(cd.strategy, &topo, &model, &cd.o, NULL);
                        Plan *p = NULL;
                        if (make_plan(cd.strategy, &topo, &model, name, &cd.o, &p, err, sizeof err)) continue;
                        nbuilt++;
                        /* a tied model on a pipeline of one rank runs as one chunk, its head the embedding */
                        CHECK((tied && p->nchunks == 1) || (p->nchunks >= 3 && p->chunks[0].replicated && p->chunks[p->nchunks - 1].replicated),
                              "%s%s: no replicated ends", cd.strategy, tied ? " (tied)" : "");
                        CHECK(mem_lb <= (double)p->peak_mem, "%s ends %s r%d c%d k%d rc%d: memory bound %.4g above the peak %zu", k->topo,
                              cd.strategy, R, cd.o.chunks, kk, rec, mem_lb, p->peak_mem);
                        if (plan_fits(p)) {
                            double step = simulate(p);
                            CHECK(time_lb <= step * (1 + 1e-12), "%s ends %s r%d c%d k%d rc%d: time bound %.6g above the step %.6g", k->topo,
                                  cd.strategy, R, cd.o.chunks, kk, rec, time_lb, step);
                        }
                        plan_free(p);
                    }
            }
        }
    CHECK(!decl_option(strategy_decl("tawpipe"), "--replicate-ends") && decl_option(strategy_decl("weipipe-zb2"), "--replicate-ends"),
          "--replicate-ends: declared by tawpipe, or not by weipipe-zb2");
    printf("%s %s seq %d, replicated ends%s: %d plans, bounds checked\n", k->topo, k->model, model.seq,
           tied ? " (tied embeddings, no flag)" : "", nbuilt);
    CHECK(nbuilt > 0, "%s: no replicated-ends plan built", k->topo);
    topology_free(&topo);
}

/* --weight-wire fp32 on a bf16 cluster: the bounds count the weights' fp32 bytes (bounds.c's
 * weight_wire_bytes), so they hold on every plan of every strategy and, where the network decides,
 * come out above the same candidate's bounds with the weights moving in bf16. */
static void wire_bounds(const Case *k) {
    char err[4096], name[256];
    Topology topo;
    WpConfig model;
    if (load_case(k, &topo, &model, name, sizeof name)) return;
    Args a = { .cmd = "sim", .strategy = "auto", .backend = backend_default(BACKEND_COMPUTE), .comm = backend_default(BACKEND_COMM),
               .micro_batches = k->micro_batches, .replicas = 1, .weight_wire = "fp32" };
    StrategyOpts base = opts_of(&a, &topo);
    char names[32][64];
    int ns = shipped_strategies(names, 32), P = topo.ndevices, nbuilt = 0, above = 0;
    for (int si = 0; si < ns; si++)
        for (int R = 1; R <= P; R *= 2) {
            if (P % R) continue;
            Cand cd = { .o = base };
            cd.o.replicas = R;
            snprintf(cd.strategy, sizeof cd.strategy, "%.63s", names[si]);
            double mem_lb = search_mem_bound(cd.strategy, &topo, &model, &cd.o);
            double time_lb = search_time_bound(cd.strategy, &topo, &model, &cd.o, NULL);
            StrategyOpts b16 = cd.o;
            b16.weight_wire = NULL;
            double time_b16 = search_time_bound(cd.strategy, &topo, &model, &b16, NULL);
            Plan *p = NULL;
            if (make_plan(cd.strategy, &topo, &model, name, &cd.o, &p, err, sizeof err)) continue;
            nbuilt++;
            CHECK(p->weight_wire_fp32, "%s %s: --weight-wire fp32 not in the plan", k->topo, cd.strategy);
            CHECK(mem_lb <= (double)p->peak_mem, "%s wire %s r%d: memory bound %.4g above the peak %zu", k->topo, cd.strategy, R, mem_lb,
                  p->peak_mem);
            if (plan_fits(p)) {
                double step = simulate(p);
                CHECK(time_lb <= step * (1 + 1e-12), "%s wire %s r%d: time bound %.6g above the step %.6g", k->topo, cd.strategy, R, time_lb, step);
            }
            above += time_lb > time_b16 * (1 + 1e-9);
            plan_free(p);
        }
    printf("%s %s seq %d, weights on the wire in fp32: %d plans, bounds checked, %d bounds above bf16's\n", k->topo, k->model, model.seq,
           nbuilt, above);
    CHECK(nbuilt > 0 && above > 0, "%s: no plan built, or no bound counting the fp32 weights' bytes", k->topo);
    topology_free(&topo);
}

/* Context parallelism (docs/context-parallel.md): every strategy's plan at each C that divides the
 * case's nodes, with and without recomputation, against the bounds the search takes for it (over
 * the groups, a member's model, a group's C x micro-batches): memory and step time no lower. */
static void cp_bounds(const Case *k) {
    char err[4096], name[256];
    Topology topo;
    WpConfig model;
    if (load_case(k, &topo, &model, name, sizeof name)) return;
    char names[32][64];
    int ns = shipped_strategies(names, 32), nbuilt = 0;
    for (int C = 2; C <= topo.nodes[0].ndevices; C++) {
        Topology groups;
        if (cp_check(&topo, &model, C, &groups, err, sizeof err)) continue;
        WpConfig m = model;
        m.cp = C;
        Args a = { .cmd = "sim", .strategy = "auto", .backend = backend_default(BACKEND_COMPUTE), .comm = backend_default(BACKEND_COMM),
                   .micro_batches = k->micro_batches, .replicas = 1, .context_parallel = C, .set_context_parallel = 1 };
        for (int si = 0; si < ns; si++)
            for (int rec = 0; rec < 2; rec++) {
                StrategyOpts o = opts_of(&a, &topo), ob;
                o.recompute = rec;
                ob = o;
                ob.micro_batches *= C;
                double mem_lb = search_mem_bound(names[si], &groups, &m, &ob), time_lb = search_time_bound(names[si], &groups, &m, &ob, NULL);
                Plan *p = NULL;
                if (make_plan(names[si], &topo, &model, name, &o, &p, err, sizeof err)) continue;
                nbuilt++;
                CHECK(mem_lb <= (double)p->peak_mem, "%s %s cp%d rc%d: memory bound %.4g above the peak %zu", k->topo, names[si], C, rec, mem_lb, p->peak_mem);
                if (plan_fits(p)) {
                    double step = simulate(p);
                    CHECK(time_lb <= step * (1 + 1e-12), "%s %s cp%d rc%d: time bound %.6g above the step %.6g", k->topo, names[si], C, rec, time_lb, step);
                }
                plan_free(p);
            }
        topology_free(&groups);
    }
    printf("%s %s: %d context-parallel plans against their bounds\n", k->topo, k->model, nbuilt);
    CHECK(nbuilt > 0, "%s: no context-parallel plan built", k->topo);
    topology_free(&topo);
}

int main(void) {
    fixture_init();
    (void)fixture_model; (void)fixture_topology;   /* the fixture's other helpers, unused here */
    const Case cases[] = {
        /* GPU clusters: bf16 by default, memory tight at these shapes so some candidates do not fit;
         * the last figure: how close the rings' and tawpipe's bounds come to their steps at least
         * (on 10 GbE many transfers share a NIC, which the bounds do not count) */
        { "weipipe-2x8-a800-nvlink-10gbe", "llama-h2048", 8192, 0, 4, 0.30 },
        { "weipipe-2x8-a800-nvlink-10gbe", "llama-h1024", 4096, 16, 2, 0.65 },
        { "tawpipe-2x8-a800-pcie-2islands-10gbe", "tawpipe-h2048", 4096, 4, 4, 0.42 },
        { "dgx-h100", "llama-h4096", 8192, 0, 4, 0.93 },
        /* CPU clusters: fp32; the bounds do not count that MPI moves a message only inside the
         * receiver's MPI calls (sim.c, next_mpi_call: into a computing rank at its next layer
         * boundary), which costs the small models here up to a fifth of their steps */
        { "cpu-4x2", "small", 0, 0, 4, 0.80 },
        { "cpu-2x2", "tiny", 0, 0, 2, 0.80 },
        /* K micro-batches per weight pass 1, 2 and 4 of 6 (the last round shorter) */
        { "cpu-4x2", "tiny", 0, 0, 6, 0.85 },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) run_case(&cases[i]);
    tied_models = 1;   /* every strategy, tied: a GPU cluster and a CPU one */
    run_case(&cases[3]);
    run_case(&cases[5]);
    tied_models = 0;
    printf("weipipe's ring: %d plans with buffers waiting at rank 0 between rounds, bounded\n", ring_waits);
    CHECK(ring_waits > 0, "no plan with buffers waiting at rank 0: the ring's memory bound went unchecked");
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) ends_bounds(&cases[i], 0);
    ends_bounds(&cases[3], 1);   /* tied: a GPU cluster and a CPU one */
    ends_bounds(&cases[5], 1);
    for (size_t i = 0; i < 3; i++) wire_bounds(&cases[i]);   /* the bf16 clusters with a network */
    cp_bounds(&cases[3]);   /* context parallelism: a GPU node and a CPU one */
    cp_bounds(&cases[5]);
    fixture_done();
    return check_summary("test_search");
}
