/* Reading the Chrome trace an emitted program writes (`train --trace FILE`, runtime/train/trace.c):
 * each rank's forward ("F<chunk> mb<m>"), backward ("B<chunk> mb<m>"; a split backward's halves
 * "Bb<chunk> mb<m>" and "Bw<chunk> mb<m>") and optimizer ("AdamW", once per step, all of the rank's
 * updates) spans, and from the optimizer spans the measured step times. What calibrate fits to
 * (cmd_calibrate.c). */
#ifndef WP_TRACE_READ_H
#define WP_TRACE_READ_H

#include <stddef.h>

typedef enum { TR_FWD, TR_BWD, TR_OPT, TR_BWD_B, TR_BWD_W } TraceKind;

typedef struct TraceSpan {
    int rank, kind, chunk, mb;
    int step;               /* 0 for the first step of the run (its warm-up), 1, 2, ... */
    double t0, dur;         /* seconds */
} TraceSpan;

typedef struct TraceRun {
    int nranks;             /* 1 + the largest rank seen */
    int nspans; TraceSpan *spans;
    int nsteps;             /* steps whose end every rank's optimizer span marks */
    double step_median_s;   /* the median step time, steps after the first */
    int nstep_times;        /* how many steps that median is over */
    double *step_times;     /* those steps' times, ascending (repeated runs of a plan pool them) */
} TraceRun;

/* 0, or -1 with one line in err naming the file (and the event: traceEvents[i].field) when it is
 * not such a trace or has fewer than two steps. */
int trace_read(const char *path, TraceRun *run, char *err, size_t errlen);
void trace_run_free(TraceRun *run);

#endif
