/* wpgen calibrate: fits a calibration file (cost/calib.h) to measured runs of emitted programs
 * (calibrate/calibrate.h: what is fitted and how) and prints each run's predicted step beside the
 * measured one.
 *
 *   wpgen calibrate -t TOPO.json --trace RUN/trace.json [--trace ...] [--held-out RUN2/trace.json ...]
 *                   [--links LINKS.json] -o CALIB.json [--force]
 *
 * A trace's plan.json is the one beside it, or the one --plan names just before it; -t is the
 * topology the runs after it were emitted for. The file is written last; an existing one only with
 * --force. Exit status: 0, or 2 for bad input. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <jansson.h>
#include "cli/cli.h"
#include "calibrate/calibrate.h"
#include "common/outpaths.h"
#include "emit/emit.h"
#include "util/xalloc.h"

static void usage(FILE *f) {
    fprintf(f, "usage: wpgen calibrate -t TOPO.json --trace RUN/trace.json [--trace ...] [--held-out RUN/trace.json ...]\n"
               "                       [--plan PLAN.json (for the next trace)] [--links LINKS.json] -o CALIB.json [--force]\n"
               "Fits the simulator's compute rates (and, with --links, its links) to the traces of emitted runs\n"
               "(train --trace), writes them as a calibration file for --calibration, and prints each run's\n"
               "predicted and measured step time. A trace's plan.json is the one beside it unless --plan names\n"
               "another; -t is the topology the runs were emitted for (it applies to the traces after it).\n"
               "Traces of one plan on one topology (a run repeated) are one row: the median of their steps pooled.\n"
               "Exit status: 0 done, 2 bad input.\n");
}

/* -o names none of the inputs (topologies, traces, plans, the link benchmark), by inode
 * (common/outpaths.h); no trace is given twice, which would count one run as two (or fit to a
 * run it also holds out). 0, or EXIT_BAD_INPUT with the message printed. */
static int check_paths(const CalibRun *runs, int nruns, const char *links, const char *out) {
    WpPathArg *in = xcalloc((size_t)(3 * nruns + 1), sizeof *in);
    int n = 0, rc = 0;
    for (int i = 0; i < nruns; i++) {
        in[n++] = (WpPathArg){ runs[i].held_out ? "--held-out" : "--trace", runs[i].trace };
        in[n++] = (WpPathArg){ "-t", runs[i].topo_path };
        in[n++] = (WpPathArg){ "--plan", runs[i].plan_path };
    }
    in[n++] = (WpPathArg){ "--links", links };
    char err[8400];
    const WpPathArg o = { "-o", out };
    if (wp_check_outputs(in, n, &o, 1, err, sizeof err)) {
        fprintf(stderr, "wpgen calibrate: %s\n", err);
        rc = EXIT_BAD_INPUT;
    }
    for (int i = 0; i < nruns && !rc; i++) {
        struct stat a, b;
        if (stat(runs[i].trace, &a)) continue;
        for (int j = 0; j < i && !rc; j++)
            if (stat(runs[j].trace, &b) == 0 && a.st_dev == b.st_dev && a.st_ino == b.st_ino) {
                fprintf(stderr, "wpgen calibrate: %s %s is the trace also given as %s %s: each run once\n",
                        runs[i].held_out ? "--held-out" : "--trace", runs[i].trace, runs[j].held_out ? "--held-out" : "--trace",
                        runs[j].trace);
                rc = EXIT_BAD_INPUT;
            }
    }
    free(in);
    return rc;
}

int cmd_calibrate(int argc, char **argv) {
    CalibRun *runs = xcalloc((size_t)argc, sizeof *runs);
    int nruns = 0, force = 0, rc = 0;
    const char *topo = NULL, *plan = NULL, *out = NULL, *links = NULL;
    if (cli_help_asked(argc, argv)) { usage(stdout); free(runs); return 0; }
    for (int i = 2; i < argc; i++) {
        const char *f = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(f, "--force")) { force = 1; continue; }
        if (!v) { fprintf(stderr, "wpgen calibrate: %s needs a value\n", f); free(runs); return EXIT_BAD_INPUT; }
        i++;
        if (!strcmp(f, "-t") || !strcmp(f, "--topology")) topo = v;
        else if (!strcmp(f, "--plan")) plan = v;
        else if (!strcmp(f, "-o") || !strcmp(f, "--out")) out = v;
        else if (!strcmp(f, "--links")) links = v;
        else if (!strcmp(f, "--trace") || !strcmp(f, "--held-out")) {
            if (!topo) { fprintf(stderr, "wpgen calibrate: %s %s: give -t TOPO.json before it (the topology the run was emitted for)\n", f, v); free(runs); return EXIT_BAD_INPUT; }
            CalibRun *r = &runs[nruns++];
            r->trace = v; r->topo_path = topo; r->held_out = f[2] == 'h';
            if (plan) r->plan_path = plan;
            else {
                const char *slash = strrchr(v, '/');
                snprintf(r->plan_buf, sizeof r->plan_buf, "%.*splan.json", slash ? (int)(slash - v + 1) : 0, v);
                r->plan_path = r->plan_buf;
            }
            plan = NULL;
        } else { fprintf(stderr, "wpgen calibrate: unknown flag \"%s\"\n", f); free(runs); return EXIT_BAD_INPUT; }
    }
    int nfit = 0;
    for (int i = 0; i < nruns; i++) nfit += !runs[i].held_out;
    struct stat st;
    if (!nfit) { fprintf(stderr, "wpgen calibrate: --trace RUN/trace.json is required (a run to fit to; wpgen calibrate -h)\n"); rc = EXIT_BAD_INPUT; }
    else if (!out) { fprintf(stderr, "wpgen calibrate: -o CALIB.json is required\n"); rc = EXIT_BAD_INPUT; }
    else if (!force && stat(out, &st) == 0 && S_ISREG(st.st_mode)) { fprintf(stderr, "wpgen calibrate: -o %s exists; refusing to overwrite it (--force replaces it)\n", out); rc = EXIT_BAD_INPUT; }
    char err[4200];
    if (!rc) rc = check_paths(runs, nruns, links, out);
    for (int i = 0; i < nruns && !rc; i++)
        if (calibrate_load_run(&runs[i], err, sizeof err)) rc = bad("%s%s", err, "");
    Calibration cal = { 0 };
    cal.types = xcalloc(64, sizeof *cal.types);
    if (!rc && links && calibrate_load_links(links, &cal, err, sizeof err)) rc = bad("calibrate: %s%s", err, "");
    CalibTypeFit fits[64];
    int shared = 0;
    if (!rc && calibrate_fit(runs, nruns, &cal, fits, &shared, err, sizeof err)) rc = bad("%s%s", err, "");
    for (int k = 0; k < cal.ntypes && !rc; k++) {
        const CalibType *ct = &cal.types[k];
        const CostRates *x = &ct->rates;
        char recv[64] = "";
        if (x->recv_bw > 0) snprintf(recv, sizeof recv, ", receiving %.4g GB/s", x->recv_bw / 1e9);
        printf("calibrate: %s (%s, %d spans of %d kinds, rms error %.1f%%): products %.4g TFLOP/s (knee %.3g), attention %.4g / %.4g TFLOP/s, "
               "memory %.4g GB/s, %.3g us per call%s\n", ct->name, wp_dtype_name(ct->precision), fits[k].nspans, fits[k].nkinds,
               100 * fits[k].rms, x->mm_flops / 1e12, x->mm_knee, x->attn_fwd_flops / 1e12, x->attn_bwd_flops / 1e12, x->mem_bw / 1e9,
               x->op_overhead_s * 1e6, recv);
    }
    if (!rc && shared) printf("calibrate: ranks share cores in the fitted runs: spans counted at the shares of the cores the simulator gives them\n");
    if (!rc && cal.intra.set) printf("calibrate: links inside a node %.4g GB/s, %.3g us\n", cal.intra.bw / 1e9, cal.intra.lat * 1e6);
    if (!rc && cal.net.set) printf("calibrate: network %.4g GB/s, %.3g us\n", cal.net.bw / 1e9, cal.net.lat * 1e6);
    /* every plan predicted with the calibration, beside its measured step (calibrate_predict) */
    json_t *fit = json_object(), *jr = json_array();
    double err2[2] = { 0 }, worst[2] = { 0 };
    int cnt[2] = { 0 }, nrows = 0;
    CalibRow *rows = xcalloc((size_t)nruns + 1, sizeof *rows);
    if (!rc && calibrate_predict(runs, nruns, &cal, rows, &nrows, err, sizeof err)) rc = bad("%s%s", err, "");
    for (int k = 0; k < nrows && !rc; k++) {
        const CalibRow *w = &rows[k];
        const CalibRun *r = &runs[w->run];
        int role = w->held_out;
        if (!cnt[role]) printf("%-10s %-44s %-20s %12s %12s %8s %7s %s\n", role ? "held out" : "fitted", "trace", "strategy", "predicted s",
                               "measured s", "error", "spans", "runs (their medians)");
        double e = w->predicted / w->measured - 1;
        char spread[64] = "1";
        if (w->nruns > 1) snprintf(spread, sizeof spread, "%d (%+.1f%% to %+.1f%%)", w->nruns, 100 * (w->lo / w->measured - 1),
                                   100 * (w->hi / w->measured - 1));
        printf("%-10s %-44s %-20s %12.5g %12.5g %+7.1f%% %6.2fx %s\n", "", r->trace, r->plan->strategy, w->predicted, w->measured, 100 * e,
               w->spans, spread);
        json_t *jt = json_array();
        for (int j = w->run; j < nruns; j++)
            if (runs[j].group == w->run) json_array_append_new(jt, json_string(runs[j].trace));
        json_array_append_new(jr, json_pack("{s:s, s:o, s:s, s:s, s:f, s:f}", "trace", r->trace, "traces", jt, "role",
                                            role ? "held-out" : "fitted", "strategy", r->plan->strategy, "predicted_s", w->predicted,
                                            "measured_s", w->measured));
        err2[role] += e * e; cnt[role]++;
        if (fabs(e) > worst[role]) worst[role] = fabs(e);
    }
    free(rows);
    for (int role = 0; role < 2 && !rc; role++)
        if (cnt[role]) printf("calibrate: %s runs: %d, rms error %.1f%%, worst %.1f%%\n", role ? "held-out" : "fitted", cnt[role],
                              100 * sqrt(err2[role] / cnt[role]), 100 * worst[role]);
    json_object_set_new(fit, "runs", jr);
    if (!rc) {
        char about[256];
        snprintf(about, sizeof about, "wpgen calibrate %s: fitted to %d run%s", WPGEN_VERSION, nfit, nfit > 1 ? "s" : "");
        cal.about = xstrdup(about);
        cal.fit_json = json_dumps(fit, JSON_COMPACT | JSON_REAL_PRECISION(17));
        if (calib_save(out, &cal, force, err, sizeof err)) rc = bad("calibrate: %s%s", err, "");
        else printf("calibrate: wrote %s\n", out);
    }
    json_decref(fit);
    calib_free(&cal);
    for (int i = 0; i < nruns; i++) calibrate_run_free(&runs[i]);
    free(runs);
    return rc;
}

