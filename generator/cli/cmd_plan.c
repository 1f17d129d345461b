/* wpgen plan and emit: a verified plan (of a strategy, or the one `-s auto` picks) reported as
 * text or JSON, or written out as a directory of per-rank C (emit/), with the simulator's
 * prediction in every file's summary. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <jansson.h>
#include "emit/emit.h"
#include "cli/cli.h"
#include "cost/trust.h"

int cmd_plan(Args *a, int emit) {
    char err[4096], name[256];
    Topology topo;
    WpConfig model;
    int rc = load_inputs(a, &topo, &model, name, sizeof name);
    if (rc) return rc;
    Plan *p = NULL;
    StrategyOpts o = opts_of(a, &topo);
    Cand best;
    int is_auto = !strcmp(a->strategy, "auto");
    Budget bu = { 0 };   /* -s auto with --tokens: its predicted step as a run */
    SearchSpec sp = search_spec_of(a, &topo);
    if (is_auto) rc = auto_search(&sp, &topo, &model, name, &best, &p);   /* its plan, verified */
    if (rc == 0 && !p && (rc = make_plan(is_auto ? best.strategy : a->strategy, &topo, &model, name, is_auto ? &best.o : &o, &p, err, sizeof err)))
        fprintf(stderr, "wpgen: %s\n", err);
    if (rc == 0 && is_auto) {
        char after[200], cp[48] = "";
        cand_label(&best, &o, "picked-after", after, sizeof after);
        if (best.o.context_parallel > 1) snprintf(cp, sizeof cp, ", context parallel %d", best.o.context_parallel);
        fprintf(stderr, "wpgen: auto picked %s, %d replica%s, %s chunks%s%s%s: %s\n", best.strategy, best.o.replicas,
                best.o.replicas > 1 ? "s" : "", best.o.chunks ? "twice the default" : "default",
                best.o.recompute == WP_RECOMPUTE_OFFLOAD ? ", recomputation, offload" : best.o.recompute ? ", recomputation" : "",
                cp, after, best.why);
        char rates[600];
        TrustRates tr = trust_rates(a->calib, a->calib_path, &topo);
        trust_describe(&tr, rates, sizeof rates);
        fprintf(stderr, "wpgen: auto: rates %s\n", rates);
        if (budget_of(a, p, best.step, &tr, &bu)) {
            char line[600];
            budget_describe(&bu, line, sizeof line);
            fprintf(stderr, "wpgen: auto: budget %s\n", line);
        }
    }
    if (rc == 0) {
        double intra, inter;
        plan_traffic(p, &intra, &inter);
        int fits = plan_fits(p);
        if (emit) {
            if (!a->out) rc = bad("emit: -o DIR is required%s%s", "", "");
            else if (wp_cp(&p->model) > 1) {
                char c[16];
                snprintf(c, sizeof c, "%d", wp_cp(&p->model));
                rc = bad("emit: --context-parallel %s: context-parallel plans cannot be emitted yet: the train loop does not run the ring yet (the CPU model does) (plan, sim and compare cost them: docs/context-parallel.md)%s", c, "");
            }
            else if (!fits && !a->force) {
                /* a program that would run out of memory: nothing is written, unless asked */
                plan_misfit(p, err, sizeof err);
                fprintf(stderr, "wpgen: the plan does not fit: %s; nothing written (--force emits it anyway)\n", err);
                rc = EXIT_REJECTED;
            }
            else {
                EmitInfo info = { .model_name = name, .topo_name = topo.name, .topo_path = a->topo, .backend = a->backend, .comm = a->comm,
                                  .bytes_intra = intra, .bytes_inter = inter, .argc = a->argc - 1, .argv = a->argv + 1,
                                  .run_json = a->run_json, .ntrain_args = a->ntrain_args, .train_args = a->train_args,
                                  .run_mpirun_flags = a->run_mpirun_flags };
                if (a->summary) print_summary(p, name, intra, inter, fits);   /* wpgen run */
                /* the prediction goes into every file's summary; a plan the simulator cannot run
                 * is still emitted, without one */
                SimOptions so = { .calib = a->calib };
                SimResult sr;
                if (sim_run(p, &so, &sr, err, sizeof err) == 0) {
                    info.step_time_s = sr.step_time;
                    info.bubble_ratio = sr.bubble_ratio;
                    sim_result_free(&sr);
                }
                if (emit_plan(p, &info, a->out, err, sizeof err)) rc = bad("emit: %s%s", err, "");
                else if (!a->json) printf("wpgen: wrote %s (%d ranks, plan %016llx)\n", a->out, p->nranks, (unsigned long long)plan_hash(p));
                if (rc == 0 && !fits) {
                    plan_misfit(p, err, sizeof err);
                    fprintf(stderr, "wpgen: warning: the plan does not fit: %s (emitted: --force)\n", err);
                }
            }
        } else if (a->json) {
            json_t *j = plan_json(p, intra, inter, fits);
            if (bu.tokens > 0) json_object_set_new(j, "budget", budget_json(&bu));
            char *s = json_dumps(j, JSON_INDENT(2) | JSON_REAL_PRECISION(17));
            printf("%s\n", s);
            free(s);
            json_decref(j);
        } else print_summary(p, name, intra, inter, fits);
        if (rc == 0 && !fits && !emit) {
            plan_misfit(p, err, sizeof err);
            fprintf(stderr, "wpgen: the plan does not fit: %s\n", err);
            rc = EXIT_REJECTED;
        }
    }
    plan_free(p);
    topology_free(&topo);
    return rc;
}
