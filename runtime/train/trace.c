/* The Chrome trace of what really happened on each rank: compute spans (forward, backward,
 * optimizer) and every completed transfer or collective, from post to completion, one process
 * row per rank (Perfetto and chrome://tracing open it; wpgen calibrate reads it).
 *
 * Written as it goes, in bounded memory. A rank buffers the events of the step under way (their
 * number is the plan's, whatever the length of the run) and, once the step is done, appends them
 * as JSON lines to a part file of its own (tmpfile(): on the rank's machine, removed when it
 * exits, so nothing is left behind however the run ends). At the end rank 0 writes the trace from
 * the parts in rounds: each round every rank sends its share of TRACE_ROUND_BYTES in whole lines,
 * so rank 0 holds one round at a time. Each rank's part ends with a "trace_buffer"
 * metadata event: how many events it wrote and the most it held in memory at once. */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "common/outpaths.h"
#include "train/rank.h"

/* What rank 0 gathers per round from all ranks together: TRACE_ROUND_BYTES, a rank's share of it
 * at least TRACE_SHARE_MIN (so that many ranks do not take many rounds: rank 0 then holds
 * TRACE_SHARE_MIN per rank). An event's line is shorter than TRACE_LINE_MAX. */
enum { TRACE_ROUND_BYTES = 1 << 20, TRACE_SHARE_MIN = 16 << 10, TRACE_LINE_MAX = 512 };

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
    if (R->nevents > R->trace_most) R->trace_most = R->nevents;
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

/* Stops tracing this rank when its part cannot be written: the run goes on, the trace keeps
 * what was written, and the end says so. */
static void part_failed(WpRank *R, const char *what) {
    fprintf(stderr, "train: rank %d: --trace: cannot %s the trace's part file (%s): this rank's trace stops here\n",
            R->rank, what, strerror(errno));
    R->tracing = 0;
    R->trace_failed = 1;
    R->nevents = 0;
}

void trace_flush(WpRank *R) {
    if (!R->tracing) return;
    if (!R->trace_part) {
        if (!(R->trace_part = tmpfile())) { part_failed(R, "create"); return; }
        fprintf(R->trace_part, "{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":%d,\"args\":{\"name\":\"rank %d\"}}\n",
                R->rank, R->rank);
    }
    for (size_t i = 0; i < R->nevents; i++) {
        const TraceEvent *e = &R->events[i];
        /* compute on thread 0, transfers on thread 1: both rows visible at once */
        int tid = strcmp(e->cat, "transfer") == 0;
        fprintf(R->trace_part,
                "{\"name\":\"%s\",\"cat\":\"%s\",\"ph\":\"X\",\"pid\":%d,\"tid\":%d,\"ts\":%.1f,\"dur\":%.1f,\"args\":{\"turn\":%d}}\n",
                e->name, e->cat, R->rank, tid, e->t0 * 1e6, (e->t1 - e->t0) * 1e6, e->turn);
    }
    R->trace_written += R->nevents;
    R->nevents = 0;
    if (ferror(R->trace_part)) part_failed(R, "write");
}

/* Fills buf (cap bytes) with whole lines of f, carrying a line that does not fit in pending
 * (TRACE_LINE_MAX bytes, "" when none) to the next call. Returns the bytes filled. */
static size_t next_lines(FILE *f, char *pending, char *buf, size_t cap) {
    size_t n = 0;
    for (;;) {
        if (!pending[0] && (!f || !fgets(pending, TRACE_LINE_MAX, f))) { pending[0] = 0; break; }
        size_t len = strlen(pending);
        if (n + len > cap) break;
        memcpy(buf + n, pending, len);
        n += len;
        pending[0] = 0;
    }
    return n;
}

/* Rank 0: the lines of one round into the trace, a comma between events. */
static void put_lines(FILE *out, const char *s, size_t n, int *first) {
    while (n > 0) {
        const char *nl = memchr(s, '\n', n);
        size_t len = nl ? (size_t)(nl - s) : n;
        if (len > 0) {
            fputs(*first ? "\n" : ",\n", out);
            fwrite(s, 1, len, out);
            *first = 0;
        }
        len += nl != NULL;
        s += len;
        n -= len;
    }
}

int trace_write_all(WpRank *R, const char *path) {
    int size = comm_size(R->comm), rc = 0;
    trace_flush(R);
    /* the part's last line: what it holds and the most this rank buffered */
    if (R->trace_part) {
        fprintf(R->trace_part, "{\"name\":\"trace_buffer\",\"ph\":\"M\",\"pid\":%d,\"args\":{\"events\":%zu,"
                "\"most_buffered\":%zu}}\n", R->rank, R->trace_written, R->trace_most);
        if (fflush(R->trace_part) || fseek(R->trace_part, 0, SEEK_SET)) part_failed(R, "read back");
    }
    size_t share = TRACE_ROUND_BYTES / (size_t)size;
    if (share < TRACE_SHARE_MIN) share = TRACE_SHARE_MIN;
    char *mine = rank_realloc(R, NULL, share, "the trace");
    char pending[TRACE_LINE_MAX] = "";
    char *all = R->rank == 0 ? rank_realloc(R, NULL, share * (size_t)size, "the trace") : NULL;
    WpOutFile out;
    int open_ok = 1, first = 1;
    if (R->rank == 0) {
        open_ok = wp_out_open(&out, path) == 0;
        if (open_ok) fputs("{\"displayTimeUnit\":\"ms\",\"traceEvents\":[", out.f);
    }
    for (;;) {
        size_t n = next_lines(R->trace_part, pending, mine, share);
        size_t got = comm_gather_bytes(R->comm, mine, n, all, R->rank == 0 ? share * (size_t)size : 0, NULL);
        if (R->rank == 0 && open_ok) put_lines(out.f, all, got, &first);
        double sent = (double)n;
        comm_allreduce_double(R->comm, &sent, 1);
        if (sent == 0) break;
    }
    if (R->rank == 0) {
        if (!open_ok) rc = -1;
        else {
            fputs("\n]}\n", out.f);
            rc = wp_out_commit(&out);
        }
    }
    comm_bcast_bytes(R->comm, &rc, sizeof rc, 0);
    double failed = R->trace_failed;
    comm_allreduce_double(R->comm, &failed, 1);
    if (R->trace_part) fclose(R->trace_part);
    R->trace_part = NULL;
    free(mine); free(all);
    return rc || failed > 0 ? -1 : 0;
}
