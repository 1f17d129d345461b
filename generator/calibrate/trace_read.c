/* Reads a runtime trace (trace_read.h). Ranks' clocks need not agree: a step's time is measured
 * on each rank between the ends of its consecutive optimizer spans (every rank ends a step at the
 * same collective), and the step's time is the largest of the ranks'. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <jansson.h>
#include "calibrate/trace_read.h"
#include "common/errmsg.h"
#include "common/jsonfile.h"

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static int cmp_span(const void *a, const void *b) {
    const TraceSpan *x = a, *y = b;
    if (x->rank != y->rank) return x->rank < y->rank ? -1 : 1;
    return x->t0 < y->t0 ? -1 : x->t0 > y->t0;
}

int trace_read(const char *path, TraceRun *run, char *err, size_t errlen) {
    memset(run, 0, sizeof *run);
    json_t *root = wp_json_load(path, 0, "not a JSON trace", err, errlen);
    if (!root) return -1;
    json_t *ev = json_object_get(root, "traceEvents");
    if (!json_is_array(ev)) { json_decref(root); return errmsg(err, errlen, "%s: traceEvents: expected an array (a trace of train --trace)", path); }
    size_t n = json_array_size(ev);
    run->spans = calloc(n + 1, sizeof *run->spans);
    int rc = 0;
    for (size_t i = 0; i < n && !rc; i++) {
        json_t *e = json_array_get(ev, i), *ph = json_object_get(e, "ph");
        if (!json_is_string(ph) || strcmp(json_string_value(ph), "X")) continue;
        const char *cat = json_string_value(json_object_get(e, "cat")), *name = json_string_value(json_object_get(e, "name"));
        json_t *pid = json_object_get(e, "pid"), *ts = json_object_get(e, "ts"), *dur = json_object_get(e, "dur");
        if (!cat || !name) { rc = errmsg(err, errlen, "%s: traceEvents[%zu]: expected a name and a cat", path, i); break; }
        TraceSpan s = { 0 };
        if (!strcmp(cat, "forward") || !strcmp(cat, "backward")) {
            /* "F<chunk> mb<m>", "B<chunk> mb<m>", or a split backward's halves (runtime/train/step_ops.c)
             * "Bb<chunk> mb<m>" and "Bw<chunk> mb<m>" */
            int split = name[0] == 'B' && (name[1] == 'b' || name[1] == 'w');
            s.kind = name[0] == 'F' ? TR_FWD : !split ? TR_BWD : name[1] == 'b' ? TR_BWD_B : TR_BWD_W;
            if ((name[0] != 'F' && name[0] != 'B') || sscanf(name + 1 + split, "%d mb%d", &s.chunk, &s.mb) != 2) {
                rc = errmsg(err, errlen, "%s: traceEvents[%zu].name: expected \"F<chunk> mb<m>\", \"B<chunk> mb<m>\", \"Bb<chunk> mb<m>\" or \"Bw<chunk> mb<m>\", got \"%.40s\"", path, i, name);
                break;
            }
        } else if (!strcmp(cat, "optimizer")) s.kind = TR_OPT;
        else continue;   /* transfers, checkpoints */
        /* times in microseconds, as train --trace writes them: at most 10^12 (11.6 days), so that
         * no sum or ratio of the fit overflows to inf */
        const double most = 1e12;
        const char *bad = !json_is_integer(pid) || json_integer_value(pid) < 0 || json_integer_value(pid) > (1 << 17) ? "pid"
                          : !json_is_number(ts) || !(fabs(json_number_value(ts)) <= most) ? "ts"
                          : !json_is_number(dur) || !(json_number_value(dur) >= 0 && json_number_value(dur) <= most) ? "dur" : NULL;
        if (bad) {
            rc = !strcmp(bad, "pid") ? errmsg(err, errlen, "%s: traceEvents[%zu].pid: expected a rank in [0, %d]", path, i, 1 << 17)
               : errmsg(err, errlen, "%s: traceEvents[%zu].%s: expected a number of microseconds in [%s, 1e12]", path, i, bad,
                        !strcmp(bad, "ts") ? "-1e12" : "0");
            break;
        }
        s.rank = (int)json_integer_value(pid);
        s.t0 = json_number_value(ts) * 1e-6;
        s.dur = json_number_value(dur) * 1e-6;
        if (s.rank + 1 > run->nranks) run->nranks = s.rank + 1;
        run->spans[run->nspans++] = s;
    }
    json_decref(root);
    if (rc) { trace_run_free(run); return -1; }
    qsort(run->spans, (size_t)run->nspans, sizeof *run->spans, cmp_span);
    /* per rank: the ends of its optimizer spans; spans before the k-th end belong to step k */
    int nr = run->nranks, minsteps = -1;
    double **ends = calloc((size_t)nr + 1, sizeof *ends);
    int *nend = calloc((size_t)nr + 1, sizeof *nend);
    for (int i = 0; i < run->nspans; i++) {
        TraceSpan *s = &run->spans[i];
        if (s->kind != TR_OPT) continue;
        ends[s->rank] = realloc(ends[s->rank], (size_t)(nend[s->rank] + 1) * sizeof(double));
        ends[s->rank][nend[s->rank]++] = s->t0 + s->dur;
    }
    for (int r = 0; r < nr; r++) if (minsteps < 0 || nend[r] < minsteps) minsteps = nend[r];
    if (nr == 0 || minsteps < 2)
        rc = errmsg(err, errlen, "%s: expected the spans of at least 2 steps on every rank (forward, backward, AdamW: train --trace), "
                    "got %d", path, nr == 0 ? 0 : minsteps);
    for (int i = 0, k = 0, prev = -1; !rc && i < run->nspans; i++) {
        TraceSpan *s = &run->spans[i];
        if (s->rank != prev) { k = 0; prev = s->rank; }
        while (k < nend[s->rank] && s->t0 >= ends[s->rank][k] - 1e-9) k++;
        s->step = k;
    }
    /* a trace whose compute takes no time (every span 0 s) gives nothing to fit a rate to */
    double busy = 0;
    for (int i = 0; !rc && i < run->nspans; i++) if (run->spans[i].kind != TR_OPT) busy += run->spans[i].dur;
    if (!rc && !(busy > 0))
        rc = errmsg(err, errlen, "%s: every forward and backward span lasts 0 s: nothing to measure a compute rate by", path);
    if (!rc) {
        run->nsteps = minsteps;
        int nt = minsteps - 1;
        double *t = calloc(nt > 0 ? (size_t)nt : 1, sizeof *t);
        for (int k = 1; k < minsteps; k++)
            for (int r = 0; r < nr; r++) {
                double d = ends[r][k] - ends[r][k - 1];
                if (d > t[k - 1]) t[k - 1] = d;
            }
        qsort(t, (size_t)nt, sizeof *t, cmp_double);
        run->step_median_s = nt % 2 ? t[nt / 2] : (t[nt / 2 - 1] + t[nt / 2]) / 2;
        if (!(run->step_median_s > 0))
            rc = errmsg(err, errlen, "%s: its steps take 0 s (the ends of the AdamW spans): not a trace of a run", path);
        run->nstep_times = nt;
        run->step_times = t;
    }
    for (int r = 0; r < nr; r++) free(ends[r]);
    free(ends); free(nend);
    if (rc) trace_run_free(run);
    return rc;
}

void trace_run_free(TraceRun *run) {
    free(run->spans);
    free(run->step_times);
    memset(run, 0, sizeof *run);
}
