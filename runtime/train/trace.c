/* The Chrome trace of what really happened on each rank: compute spans (forward, backward,
 * optimizer) and every completed transfer or collective, from post to completion, one process
 * row per rank. Events are kept in memory during the run; at the end rank 0 gathers them and
 * writes one JSON file (Perfetto and chrome://tracing open it). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <mpi.h>
#include "train/rank.h"

/* The communication layer makes MPI return errors; a failed gather of the trace ends the job with
 * the call's name, like every other MPI call here. */
#define TRACE_MPI(R, call) do { int rc_ = (call); if (rc_ != MPI_SUCCESS) { \
    char s_[MPI_MAX_ERROR_STRING]; int l_ = 0; MPI_Error_string(rc_, s_, &l_); \
    comm_abort((R)->comm, 1, "%s: %s", #call, s_); } } while (0)

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
    int size = comm_size(R->comm), n = (int)len, rc = 0;
    int *lens = R->rank == 0 ? malloc((size_t)size * sizeof(int)) : NULL;
    TRACE_MPI(R, MPI_Gather(&n, 1, MPI_INT, lens, 1, MPI_INT, 0, MPI_COMM_WORLD));
    int *offs = NULL;
    char *all = NULL;
    if (R->rank == 0) {
        offs = malloc((size_t)size * sizeof(int));
        long total = 0;
        for (int i = 0; i < size; i++) { offs[i] = (int)total; total += lens[i]; }
        all = malloc((size_t)total + 1);
    }
    TRACE_MPI(R, MPI_Gatherv(mine, n, MPI_CHAR, all, lens, offs, MPI_CHAR, 0, MPI_COMM_WORLD));
    if (R->rank == 0) {
        char tmp[4200];
        snprintf(tmp, sizeof tmp, "%s.tmp", path);
        FILE *f = fopen(tmp, "w");
        if (!f) rc = -1;
        else {
            long total = offs[size - 1] + lens[size - 1];
            fputs("{\"displayTimeUnit\":\"ms\",\"traceEvents\":[\n", f);
            /* drop the last ",\n" so the array closes cleanly */
            if (total >= 2) fwrite(all, 1, (size_t)total - 2, f);
            fputs("\n]}\n", f);
            if (ferror(f)) rc = -1;
            if (fclose(f) != 0) rc = -1;
            if (rc == 0 && rename(tmp, path) != 0) rc = -1;
            if (rc) remove(tmp);
        }
    }
    TRACE_MPI(R, MPI_Bcast(&rc, 1, MPI_INT, 0, MPI_COMM_WORLD));
    free(mine); free(lens); free(offs); free(all);
    return rc;
}
