/* `-s auto`: every shipped strategy with its parameters planned, verified and simulated; the
 * fastest plan that fits wins. Also the list of shipped strategies compare runs. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include "cli/cli.h"

int shipped_strategies(char names[][64], int max) {
    char dir[4200];
    snprintf(dir, sizeof dir, "%s/schedules", wpgen_home());
    struct dirent **ents;
    int k = scandir(dir, &ents, NULL, alphasort), n = 0;
    for (int i = 0; i < k; i++) {
        size_t l = strlen(ents[i]->d_name);
        if (l > 4 && l < 60 && !strcmp(ents[i]->d_name + l - 4, ".lua") && strncmp(ents[i]->d_name, "auto.", 5) && n < max)
            snprintf(names[n++], 64, "%.*s", (int)(l - 4), ents[i]->d_name);
        free(ents[i]);
    }
    if (k >= 0) free(ents);
    return n;
}

int cand_better(const Cand *x, const Cand *y) {   /* x strictly better than y */
    if (x->rc || !x->fits) return 0;
    if (y->rc || !y->fits) return 1;
    return x->step < y->step * (1 - 1e-9);
}

/* -s auto: every shipped strategy with every replica count that divides the ranks, its default
 * chunks and twice as many, fsdp in both its variants, first without recomputation and with it only where that does not
 * fit. Micro-batches per rank stay as given, so the global batch is the same for all. Options
 * given on the command line are kept. Picks the fastest that fits. Returns 0 and fills *best, or
 * EXIT_REJECTED when nothing fits. */
int auto_search(const Args *a, const Topology *topo, const WpConfig *model, const char *name, Cand *best, int verbose) {
    char names[32][64];
    int ns = shipped_strategies(names, 32), ncand = 0, nfit = 0;
    Cand b = { .rc = -1 }, runner = { .rc = -1 };   /* the best, and the best of another strategy */
    int P = topo->ndevices;
    for (int si = 0; si < ns; si++)
        for (int R = 1; R <= P; R++) {
            if (P % R || (a->set_replicas && R != a->replicas)) continue;
            for (int cm = 0; cm < 2; cm++) {
                if (a->set_chunks && cm) continue;
                int chunks = a->set_chunks ? a->chunks : cm ? 2 * (P / R) : 0;
                if (chunks > model->layers) continue;
                /* fsdp in both variants (schedules/fsdp.lua), unless one was given */
                int nvar = !strcmp(names[si], "fsdp") && !a->fsdp_variant ? 2 : 1;
                for (int var = 0; var < nvar; var++)
                for (int rec = a->recompute; rec < 2; rec++) {
                    Cand c = { .o = opts_of(a, topo) };
                    if (var) c.o.fsdp_variant = "full-shard";
                    c.o.replicas = R;
                    c.o.chunks = chunks;
                    c.o.recompute = rec;
                    snprintf(c.strategy, sizeof c.strategy, "%.63s", names[si]);
                    Plan *p = NULL;
                    char err[4096];
                    c.rc = make_plan(c.strategy, topo, model, name, &c.o, &p, err, sizeof err);
                    if (c.rc == 0) {
                        c.fits = plan_fits(p);
                        SimResult s;
                        SimOptions so = { .calib = a->calib };
                        if (sim_run(p, &so, &s, err, sizeof err) == 0) {
                            c.step = s.step_time; c.tps = s.tokens_per_s_per_device; c.bubble = s.bubble_ratio;
                            sim_result_free(&s);
                        } else c.rc = EXIT_REJECTED;
                    }
                    plan_free(p);
                    if (c.rc == 0) {
                        ncand++;
                        nfit += c.fits;
                        if (verbose)
                            fprintf(stderr, "auto: %-20s replicas %-3d chunks %-4d%s  %.4g s%s\n", c.strategy, R, chunks,
                                    rec ? " recompute" : "", c.step, c.fits ? "" : " (does not fit)");
                        if (b.rc != 0 || cand_better(&c, &b)) {
                            if (b.rc == 0 && b.fits && strcmp(b.strategy, c.strategy)) runner = b;
                            b = c;
                        } else if (c.fits && strcmp(c.strategy, b.strategy) && (runner.rc != 0 || cand_better(&c, &runner))) runner = c;
                    }
                    if (c.rc || c.fits) break;   /* recompute only when it did not fit */
                }
            }
        }
    if (b.rc != 0 || !b.fits) {
        fprintf(stderr, "wpgen: auto: no plan fits the device (%d candidates tried)\n", ncand);
        return EXIT_REJECTED;
    }
    if (runner.rc == 0 && runner.fits && strcmp(runner.strategy, b.strategy))
        snprintf(b.why, sizeof b.why, "%.4g s/step, the fastest of %d plans that fit (%d tried); the best other strategy, %s "
                 "(%d replica%s%s), takes %.4g s (+%.0f%%)", b.step, nfit, ncand, runner.strategy, runner.o.replicas,
                 runner.o.replicas > 1 ? "s" : "", runner.o.recompute ? ", recomputation" : "", runner.step, 100 * (runner.step / b.step - 1));
    else snprintf(b.why, sizeof b.why, "%.4g s/step, the fastest of %d plans that fit (%d tried)", b.step, nfit, ncand);
    *best = b;
    return 0;
}
