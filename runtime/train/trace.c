/* The Chrome trace of what really happened on each rank: compute spans (forward, backward,
 * optimizer) and every completed transfer or collective, from post to completion, one process
 * row per rank. Events are kept in memory during the run; at the end rank 0 gathers them and
 * writes one JSON file (Perfetto and chrome://tracing open it). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "common/outpaths.h"
#include "train/rank.h"

void trace_event(WpRank *R, const char *cat, const char *name, double t0, double t1) {
    if (!R->tracing) return;
    if (R->nevents == R->capevents) {
        R->capevents = R->capevents ? 2 * R->capevents : 1024;
        TraceEvent *e = realloc(R->events, R->capevents * sizeof *e);
        if (!e) { R->tracing = 0; return; }   /* a trace is not worth failing the run */
        R->events = e;
    }
    TraceEvent *e = &R->events[R->nevents++];
    e->cat = cat;
    snprintf(e->name, sizeof e->name, "%s", name);
    e->t0 = t0;
    e->t1 = t1;
    e->turn = R->turn;
}

void trace_comm_event(void *ud, const CommEvent *e) {
    WpRank *R = ud;
    char name[40];
    if (e->group >= 0) snprintf(name, sizeof name, "%s %s g%d", comm_kind_names[e->kind], e->label, e->group);
    else snprintf(name, sizeof name, "%s %s %s%d", comm_kind_names[e->kind], e->label,
                  e->kind == COMM_SEND ? ">" : "<", e->peer);
    int saved = R->turn;
    R->turn = e->turn;
    trace_event(R, "transfer", name, e->t_post, e->t_done);
    R->turn = saved;
}

/* This rank's events as JSON lines (without the surrounding array). */
static char *render(const WpRank *R, size_t *len) {
    size_t cap = 256 + R->nevents * 200, n = 0;
    char *s = malloc(cap);
    if (!s) { *len = 0; return NULL; }
    n += (size_t)snprintf(s + n, cap - n, "{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":%d,\"args\":{\"name\":\"rank %d\"}},\n",
                          R->rank, R->rank);
    for (size_t i = 0; i < R->nevents; i++) {
        const TraceEvent *e = &R->events[i];
        /* compute on thread 0, transfers on thread 1: both rows visible at once */
        int tid = strcmp(e->cat, "transfer") == 0;
        n += (size_t)snprintf(s + n, cap - n,
                              "{\"name\":\"%s\",\"cat\":\"%s\",\"ph\":\"X\",\"pid\":%d,\"tid\":%d,\"ts\":%.1f,\"dur\":%.1f,\"args\":{\"turn\":%d}},\n",
                              e->name, e->cat, R->rank, tid, e->t0 * 1e6, (e->t1 - e->t0) * 1e6, e->turn);
    }
    *len = n;
    return s;
}

int trace_write_all(WpRank *R, const char *path) {
    size_t len;
    char *mine = render(R, &len);
    int size = comm_size(R->comm), rc = 0;
    /* rank 0 learns the sizes first (a gather of one number each), then gathers the text */
    size_t total = 0;
    uint64_t n64 = len, *all_n = R->rank == 0 ? rank_calloc(R, (size_t)size, sizeof *all_n, "the trace") : NULL;
    comm_gather_bytes(R->comm, &n64, sizeof n64, all_n, R->rank == 0 ? (size_t)size * sizeof n64 : 0, NULL);
    if (R->rank == 0)
        for (int i = 0; i < size; i++) total += all_n[i];
    char *all = R->rank == 0 ? rank_realloc(R, NULL, total + 1, "the trace") : NULL;
    comm_gather_bytes(R->comm, mine, len, all, total, NULL);
    if (R->rank == 0) {
        WpOutFile out;
        if (wp_out_open(&out, path)) rc = -1;
        else {
            fputs("{\"displayTimeUnit\":\"ms\",\"traceEvents\":[\n", out.f);
            /* drop the last ",\n" so the array closes cleanly */
            if (total >= 2) fwrite(all, 1, total - 2, out.f);
            fputs("\n]}\n", out.f);
            rc = wp_out_commit(&out);
        }
    }
    comm_bcast_bytes(R->comm, &rc, sizeof rc, 0);
    free(mine); free(all_n); free(all);
    return rc;
}
