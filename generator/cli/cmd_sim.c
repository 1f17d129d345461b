/* wpgen sim and compare: verified plans run in the simulator (sim/) and reported as text or
 * JSON; sim also draws the step as a Chrome trace and an SVG timeline (sim/timeline.c). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <errno.h>
#include <math.h>
#include <jansson.h>
#include "cli/cli.h"
#include "common/batch.h"
#include "util/xalloc.h"
#include "cost/trust.h"

static void sim_json_add(json_t *o, const Plan *p, const SimResult *s) {
    json_object_set_new(o, "step_time_s", json_real(s->step_time));
    json_object_set_new(o, "mfu", json_real(trust_mfu(p, s->step_time)));
    json_object_set_new(o, "tokens_per_s_per_device", json_real(s->tokens_per_s_per_device));
    json_object_set_new(o, "bubble_ratio", json_real(s->bubble_ratio));
    json_object_set_new(o, "tokens_per_step", json_integer((json_int_t)p->total_mbs * p->model.mbs * p->model.seq));
    json_object_set_new(o, "compute_s_per_rank", json_real(s->compute_s / p->nranks));
    json_object_set_new(o, "comm_wait_s_per_rank", json_real(s->comm_exposed_s / p->nranks));
    json_object_set_new(o, "recompute", json_boolean(p->recompute));
    json_object_set_new(o, "offload_activations", json_boolean(p->recompute == WP_RECOMPUTE_OFFLOAD));
    json_object_set_new(o, "offload_exposed_s_per_rank", json_real(s->offload_exposed_s / p->nranks));
    json_object_set_new(o, "context_parallel", json_integer(wp_cp(&p->model)));
    json_t *links = json_object();
    for (int l = 0; l < LINK__COUNT; l++)
        if (s->link_bytes[l] > 0) json_object_set_new(links, link_type_name((LinkType)l), json_real(s->link_bytes[l]));
    json_object_set_new(o, "bytes_by_link", links);
}

static void print_sim(const Plan *p, const SimResult *s, const TrustRates *tr, const Budget *bu) {
    char b[32], rates[600], budget[600];
    printf("step        %.4g s predicted: %.5g tokens/s per device, bubble %.1f%%, MFU %.1f%%\n", s->step_time,
           s->tokens_per_s_per_device, 100 * s->bubble_ratio, 100 * trust_mfu(p, s->step_time));
    trust_describe(tr, rates, sizeof rates);
    printf("rates       %s\n", rates);
    if (bu->tokens > 0) {
        budget_describe(bu, budget, sizeof budget);
        printf("budget      %s\n", budget);
    }
    printf("time        per rank (mean): %.4g s forward/backward, %.4g s waiting for transfers, %.4g s the rest\n",
           s->compute_s / p->nranks, s->comm_exposed_s / p->nranks,
           s->step_time - (s->compute_s + s->comm_exposed_s) / p->nranks);
    if (p->recompute == WP_RECOMPUTE_OFFLOAD)
        printf("offload     per rank (mean): %.4g s of the forward/backward is copies to and from host memory that compute does not hide\n",
               s->offload_exposed_s / p->nranks);
    printf("links      ");
    int any = 0;
    for (int l = 0; l < LINK__COUNT; l++)
        if (s->link_bytes[l] > 0) { human_bytes(s->link_bytes[l], b, sizeof b); printf("%s %s %s", any ? "," : "", link_type_name((LinkType)l), b); any = 1; }
    printf("%s per step\n", any ? "" : " none");
    printf("mem/rank    GiB:");
    for (int r = 0; r < p->nranks; r++) printf("%s%.1f", r && r % 16 == 0 ? "\n               " : " ", (double)p->ranks[r].peak_mem / (1 << 30));
    printf("\n");
}

int cmd_sim(Args *a) {
    char err[4096], name[256];
    Topology topo;
    WpConfig model;
    int rc = load_inputs(a, &topo, &model, name, sizeof name);
    if (rc) return rc;
    const char *strategy = a->strategy;
    StrategyOpts o = opts_of(a, &topo);
    Cand best;
    Plan *p = NULL;
    int is_auto = !strcmp(a->strategy, "auto");
    if (is_auto) {
        SearchSpec sp = search_spec_of(a, &topo);
        if ((rc = auto_search(&sp, &topo, &model, name, &best, &p))) { topology_free(&topo); return rc; }
        strategy = best.strategy;
        o = best.o;
    }
    if (!p) rc = make_plan(strategy, &topo, &model, name, &o, &p, err, sizeof err);
    if (rc) {
        fprintf(stderr, "wpgen: %s\n", err);
        topology_free(&topo);
        return rc;
    }
    SimOptions so = { .record = a->trace || a->svg, .calib = a->calib };
    SimResult s;
    if (sim_run(p, &so, &s, err, sizeof err)) {
        fprintf(stderr, "wpgen: sim: %s\n", err);
        plan_free(p); topology_free(&topo);
        return EXIT_REJECTED;
    }
    int fits = plan_fits(p);
    TrustRates tr = trust_rates(a->calib, a->calib_path, &topo);
    Budget bu;
    budget_of(a, p, s.step_time, &tr, &bu);
    if (a->json) {
        json_t *j = plan_json(p, s.bytes_intra, s.bytes_inter, fits);
        sim_json_add(j, p, &s);
        json_object_set_new(j, "rates", trust_json(&tr));
        if (bu.tokens > 0) json_object_set_new(j, "budget", budget_json(&bu));
        if (is_auto) {
            json_t *au = json_object();
            json_object_set_new(au, "replicas", json_integer(o.replicas));
            json_object_set_new(au, "chunks_option", json_integer(o.chunks));
            StrategyOpts flags = opts_of(a, &topo);
            cand_label_json(&best, &flags, "auto-json", au);
            json_object_set_new(au, "why", json_string(best.why));
            json_object_set_new(j, "auto", au);
        }
        char *txt = json_dumps(j, JSON_INDENT(2) | JSON_REAL_PRECISION(17));
        printf("%s\n", txt);
        free(txt);
        json_decref(j);
    } else {
        if (is_auto) {
            StrategyOpts flags = opts_of(a, &topo);
            char picked[200], after[200];
            cand_label(&best, &flags, "picked", picked, sizeof picked);
            cand_label(&best, &flags, "picked-after", after, sizeof after);
            printf("auto        picked %s%s, %d replica%s, %s chunks%s%s: %s\n", strategy, picked,
                   o.replicas, o.replicas > 1 ? "s" : "", o.chunks ? "twice the default" : "default", o.recompute == WP_RECOMPUTE_OFFLOAD ? ", recomputation, offload" : o.recompute ? ", recomputation" : "",
                   after, best.why);
        }
        print_summary(p, name, s.bytes_intra, s.bytes_inter, fits);
        if (p->notes && p->notes[0] && p->notes[strlen(p->notes) - 1] != '\n') printf("\n");
        print_sim(p, &s, &tr, &bu);
    }
    if (a->trace && sim_write_trace(p, &s, a->trace)) rc = bad("sim: cannot write %s: %s", a->trace, strerror(errno));
    if (!rc && a->svg) {
        char title[512];
        snprintf(title, sizeof title, "%s on %s, %s seq %d: %.4g s/step, bubble %.1f%%", p->strategy, topo.name, name, model.seq,
                 s.step_time, 100 * s.bubble_ratio);
        if (sim_write_svg(p, &s, title, a->svg)) rc = bad("sim: cannot write %s: %s", a->svg, strerror(errno));
    }
    if (!rc && !fits) {
        fprintf(stderr, "wpgen: the plan does not fit: rank %d needs %zu bytes\n", p->peak_rank, p->peak_mem);
        rc = EXIT_REJECTED;
    }
    sim_result_free(&s);
    plan_free(p);
    topology_free(&topo);
    return rc;
}

/* compare: each strategy at its best parameters that fit, from the pruned search (search.c:
 * replicas, chunks, the strategy's rounds and variant and, where it does not fit without,
 * recomputation: the same search as -s auto's; what the flags give stays fixed).
 * A strategy of which nothing fits is shown as the flags give it, marked OOM, on clusters of up
 * to COMPARE_BUILD_MAX devices; on larger ones building that plan (one pipeline through every
 * device, by default) takes from seconds to minutes, so the row says why the search found
 * nothing instead (search_describe_strategy). "auto" in --strategies is the full search's pick. */
enum { COMPARE_BUILD_MAX = 64 };

int cmd_compare(Args *a) {
    char names[64][64];
    int ns = 0;
    if (a->strategies) {
        const char *s = a->strategies;
        while (*s && ns < 64) {
            size_t l = strcspn(s, ",");
            if (l == 0 || l >= 64) { fprintf(stderr, "wpgen: --strategies: expected names separated by commas, got \"%s\"\n", a->strategies); return EXIT_BAD_INPUT; }
            memcpy(names[ns], s, l);
            names[ns++][l] = 0;
            s += l + (s[l] == ',');
        }
    } else ns = shipped_strategies(names, 64);
    for (int i = 0; i < ns; i++) {
        char path[4200];
        if (strcmp(names[i], "auto") && strategy_resolve(names[i], path, sizeof path)) {
            char err[2300];
            strategy_missing(names[i], path, err, sizeof err);
            fprintf(stderr, "wpgen: compare: --strategies: %s\n", err);
            return EXIT_BAD_INPUT;
        }
    }
    char name[256];
    Topology topo;
    WpConfig model;
    int rc = load_inputs(a, &topo, &model, name, sizeof name);
    if (rc) return rc;
    StrategyOpts o = opts_of(a, &topo);
    SearchSpec sp = search_spec_of(a, &topo);
    SearchResult sr;
    search_run(&sp, &topo, &model, name, names, ns, 1, &sr);   /* "auto" is no file: refused, and searched below */
    json_t *arr = json_array();
    Cand *c = xcalloc((size_t)ns, sizeof *c);
    char (*errs)[512] = xcalloc((size_t)ns, sizeof *errs);
    Plan **plans = xcalloc((size_t)ns, sizeof *plans);
    SimResult *res = xcalloc((size_t)ns, sizeof *res);
    int best = -1, nfit = 0;
    for (int i = 0; i < ns; i++) {
        char err[4096];
        snprintf(c[i].strategy, sizeof c[i].strategy, "%s", names[i]);
        c[i].o = o;   /* the options given reach only the strategies that declare them */
        if (!strcmp(names[i], "auto")) {
            Cand b;
            if (auto_search(&sp, &topo, &model, name, &b, &plans[i])) { c[i].rc = EXIT_REJECTED; snprintf(errs[i], sizeof errs[i], "auto: nothing fits"); continue; }
            c[i].o = b.o;
            snprintf(c[i].strategy, sizeof c[i].strategy, "%s", b.strategy);
        } else if (sr.best[i].c.rc == 0) {   /* the search's best that fits, simulated already */
            c[i] = sr.best[i].c;
            plans[i] = sr.best[i].plan; sr.best[i].plan = NULL;
            res[i] = sr.best[i].sim; memset(&sr.best[i].sim, 0, sizeof sr.best[i].sim);
            nfit++;
            if (best < 0 || cand_better(&c[i], &c[best])) best = i;
            continue;
        } else if (topo.ndevices > COMPARE_BUILD_MAX) {
            c[i].rc = EXIT_REJECTED;
            search_describe_strategy(&sr.best[i], errs[i], sizeof errs[i]);
            continue;
        }
        if (!plans[i]) c[i].rc = make_plan(c[i].strategy, &topo, &model, name, &c[i].o, &plans[i], err, sizeof err);
        if (c[i].rc) {
            char *nl = strchr(err, '\n');
            if (nl) *nl = 0;
            snprintf(errs[i], sizeof errs[i], "%.500s", err);
            if (!strcmp(names[i], "auto")) snprintf(c[i].strategy, sizeof c[i].strategy, "auto");
            continue;
        }
        SimOptions so = { .calib = a->calib };
        if (sim_run(plans[i], &so, &res[i], err, sizeof err)) { c[i].rc = EXIT_REJECTED; snprintf(errs[i], sizeof errs[i], "sim: %.500s", err); continue; }
        c[i].fits = plan_fits(plans[i]);
        c[i].step = res[i].step_time;
        nfit += c[i].fits;
        if (c[i].fits && (best < 0 || cand_better(&c[i], &c[best]))) best = i;
    }
    char counts[400];
    search_describe(&sr.stats, counts, sizeof counts);
    TrustRates tr = trust_rates(a->calib, a->calib_path, &topo);
    int nties = 0;   /* rows that fit within the tie band of the fastest, the fastest itself aside */
    for (int i = 0; best >= 0 && i < ns; i++) nties += i != best && !c[i].rc && c[i].fits && trust_ties(res[i].step_time, res[best].step_time);
    char (*shown)[400] = xcalloc((size_t)ns, sizeof *shown);
    int width = 22;
    for (int i = 0; i < ns; i++) {
        /* the label says where the search moved off the flags: /rN replicas, /2c twice the chunks, /rc
         * recomputation, /off offload, and what the strategy's declared label says of its own options */
        char extra[200] = "", head[160] = "", tail[160] = "";
        int rc_ = c[i].o.recompute;   /* /rc recomputation, /off offload (which is with it) */
        const char *rec = rc_ == o.recompute ? "" : rc_ == WP_RECOMPUTE ? "/rc" : o.recompute ? "/off" : "/rc/off";
        const char *rec_any = rc_ == WP_RECOMPUTE_OFFLOAD ? "/rc/off" : rc_ ? "/rc" : "";
        char cp[16] = "";   /* /cp8: groups of 8 devices share each micro-batch (docs/context-parallel.md) */
        if (!c[i].rc && c[i].o.context_parallel > 1) snprintf(cp, sizeof cp, "/cp%d", c[i].o.context_parallel);
        if (!c[i].rc) {
            cand_label(&c[i], &o, !strcmp(names[i], "auto") ? "auto-row" : "row", tail, sizeof tail);
            if (strcmp(names[i], "auto")) cand_label(&c[i], &o, "name", head, sizeof head);
            snprintf(extra, sizeof extra, "%s%s%.0d%s%s%s", cp, c[i].o.replicas != o.replicas ? "/r" : "", c[i].o.replicas != o.replicas ? c[i].o.replicas : 0,
                     c[i].o.chunks != o.chunks ? "/2c" : "", rec, tail);
        }
        if (!strcmp(names[i], "auto") && !c[i].rc)
            snprintf(shown[i], sizeof shown[i], "auto=%s%s/r%d%s%s%s", c[i].strategy, cp, c[i].o.replicas, c[i].o.chunks ? "/2c" : "",
                     rec_any, tail);
        else snprintf(shown[i], sizeof shown[i], "%.63s%s%s", names[i], head, extra);
        if ((int)strlen(shown[i]) > width) width = (int)strlen(shown[i]);
    }
    if (!a->json) {
        char gb[96];   /* the same for every candidate: micro-batches per device stay the flags' */
        wp_batch_describe((long)a->micro_batches * topo.ndevices * model.mbs, model.seq, gb, sizeof gb);
        printf("cluster %s (%d devices on %d node%s); model %s, seq %d, %d sequence%s per micro-batch, %d micro-batches per rank, %s; "
               "precision %s, gradients %s%s\n", topo.name, topo.ndevices, topo.nnodes, topo.nnodes > 1 ? "s" : "", name, model.seq,
               model.mbs, model.mbs > 1 ? "s" : "", a->micro_batches, gb, wp_dtype_name(o.precision), wp_dtype_name(o.grad_precision),
               opts_weight_wire_fp32(&o) ? ", weights on the wire fp32" : "");
        char rates[600];
        trust_describe(&tr, rates, sizeof rates);
        printf("rates: %s\n", rates);
        printf("%-*s %10s %13s %6s %7s %11s %11s %10s", width, "strategy", "step s", "tokens/s/dev", "MFU", "bubble", "intra GiB",
               "inter GiB", "peak GiB");
        if (a->tokens > 0) printf(" %10s %10s%s", "run hours", "GPU-hours", a->gpu_hour_price >= 0 ? "       cost" : "");
        printf("\n");
    }
    for (int i = 0; i < ns; i++) {
        const char *label = names[i];
        if (c[i].rc) {
            if (a->json) {
                json_t *j = json_object();
                json_object_set_new(j, "strategy", json_string(label));
                json_object_set_new(j, "fits", json_false());
                json_object_set_new(j, "error", json_string(errs[i]));
                json_array_append_new(arr, j);
            } else printf("%-*s %s\n", width, shown[i], errs[i]);
            continue;
        }
        const Plan *p = plans[i];
        const SimResult *s = &res[i];
        if (a->json) {
            json_t *j = plan_json(p, s->bytes_intra, s->bytes_inter, c[i].fits);
            sim_json_add(j, p, s);
            json_object_set_new(j, "fastest", json_boolean(i == best));
            /* within the tie band of the fastest: the simulator does not tell them apart */
            json_object_set_new(j, "ties_fastest", json_boolean(best >= 0 && i != best && c[i].fits &&
                                                                trust_ties(s->step_time, res[best].step_time)));
            cand_label_json(&c[i], &o, "json", j);
            Budget bu;
            if (budget_of(a, p, s->step_time, &tr, &bu)) json_object_set_new(j, "budget", budget_json(&bu));
            if (!strcmp(names[i], "auto")) json_object_set_new(j, "picked_by", json_string("auto"));
            json_array_append_new(arr, j);
        } else {
            int ties = best >= 0 && i != best && c[i].fits && trust_ties(s->step_time, res[best].step_time);
            const char *mark = !c[i].fits ? "OOM" : i == best ? (nties ? "<- fastest, ties with ~" : "<- fastest") : ties ? "~ ties" : NULL;
            printf("%-*s %10.4g %13.5g %5.1f%% %6.1f%% %11.2f %11.2f %10.2f", width, shown[i], s->step_time,
                   s->tokens_per_s_per_device, 100 * trust_mfu(p, s->step_time), 100 * s->bubble_ratio, s->bytes_intra / (1 << 30),
                   s->bytes_inter / (1 << 30), (double)p->peak_mem / (1 << 30));
            Budget bu;
            if (budget_of(a, p, s->step_time, &tr, &bu)) {
                char h[32], gh[32], c[32];
                budget_amount(bu.wall_s / 3600, h, sizeof h);
                budget_amount(bu.gpu_hours, gh, sizeof gh);
                budget_amount(bu.cost, c, sizeof c);
                printf(" %10s %10s", h, gh);
                if (bu.cost >= 0) printf(" %10s", c);
            }
            printf("%s%s\n", mark ? "  " : "", mark ? mark : "");
        }
    }
    if (a->json) {
        char *txt = json_dumps(arr, JSON_INDENT(2) | JSON_REAL_PRECISION(17));
        printf("%s\n", txt);
        free(txt);
    } else {
        /* what the search varied: what the flags left free */
        const char *free_[3];
        int nf = 0;
        if (!a->set_replicas) free_[nf++] = "replicas";
        if (!a->set_chunks) free_[nf++] = "chunks";
        if (!a->offload) free_[nf++] = !a->recompute ? "recomputation (offload where needed to fit)" : "offload (where needed to fit)";
        char over[160] = " (replicas, chunks, recomputation and offload given)";
        if (nf) snprintf(over, sizeof over, " over %s%s%s%s%s", free_[0], nf == 3 ? ", " : nf == 2 ? " and " : "", nf > 1 ? free_[1] : "",
                         nf == 3 ? " and " : "", nf == 3 ? free_[2] : "");
        printf("search: each strategy's fastest that fits%s; %s\n", over, counts);
        if (a->tokens > 0) {
            char price[64] = "";
            if (a->gpu_hour_price >= 0) snprintf(price, sizeof price, ", cost at %g per GPU-hour", a->gpu_hour_price);
            printf("budget: %.0f tokens%s; a step may take up to %.2fx the prediction (the rates' band), and so the run%s\n",
                   round(a->tokens), price, trust_upper(&tr), price[0] ? " and its cost" : "");
        }
        if (nties)
            printf("ties: the rows marked ~ are within %.0f%% of the fastest step, the error band of calibrated predictions: "
                   "the simulator does not rank them\n", 100 * TRUST_TIE_BAND);
    }
    json_decref(arr);
    for (int i = 0; i < ns; i++) { plan_free(plans[i]); sim_result_free(&res[i]); }
    free(c); free(errs); free(plans); free(res); free(shown);
    search_free(&sr);
    topology_free(&topo);
    return nfit ? 0 : EXIT_REJECTED;
}
