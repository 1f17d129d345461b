/* A process's checkpoint shard written on a thread of its own while training goes on (saver.h).
 * One thread per write, joined by the next saver_wait: a thread that lives for the run would need
 * a queue and a condition variable for what is at most one write every few hundred steps. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "train/saver.h"

struct WpSaver {
    int background;
    WpSaverAlloc alloc;
    /* the arrays, kept from one save to the next: n ranges of cap[i] floats */
    int n;
    size_t *cap;
    float **w, **m, **v;
    /* the write under way (or done): its inputs and result */
    char path[4096];
    const WpConfig *c;
    const WpChunk *chunks;
    WpCkptRange *ranges;
    WpTrainState st;
    int rank;
    int running;           /* a thread was started and not yet joined */
    atomic_int done;       /* the thread has finished (set last, by it) */
    WpSaverResult result;
    pthread_t thread;
};

static double now_seconds(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static void write_shard(WpSaver *S) {
    WpSaverResult *r = &S->result;
    double t0 = now_seconds();
    r->bytes = 0;
    for (int i = 0; i < S->n; i++) r->bytes += 3 * S->ranges[i].n * sizeof(float);
    r->ok = ckpt_write_shard(S->path, S->c, S->chunks, S->ranges, S->n, S->w, S->m, S->v, &S->st, S->rank, &r->hash,
                             &r->created, r->err, sizeof r->err) == 0;
    r->seconds = now_seconds() - t0;
}

static void *writer(void *arg) {
    WpSaver *S = arg;
    write_shard(S);
    atomic_store(&S->done, 1);
    return NULL;
}

WpSaver *saver_new(int background, WpSaverAlloc alloc) {
    WpSaver *S = calloc(1, sizeof *S);
    if (!S) return NULL;
    S->background = background;
    S->alloc = alloc;
    atomic_init(&S->done, 1);
    return S;
}

static void release_arrays(WpSaver *S) {
    for (int i = 0; i < S->n; i++) {
        S->alloc.release(S->alloc.ud, S->w[i]);
        S->alloc.release(S->alloc.ud, S->m[i]);
        S->alloc.release(S->alloc.ud, S->v[i]);
    }
    free(S->w); free(S->m); free(S->v); free(S->cap); free(S->ranges);
    S->w = S->m = S->v = NULL;
    S->cap = NULL;
    S->ranges = NULL;
    S->n = 0;
}

/* Joins the thread of the write under way, if any, keeping its result for saver_wait. */
static void join(WpSaver *S) {
    if (S->running) {
        pthread_join(S->thread, NULL);
        S->running = 0;
    }
}

void saver_free(WpSaver *S) {
    if (!S) return;
    join(S);
    release_arrays(S);
    free(S);
}

int saver_arrays(WpSaver *S, const WpCkptRange *ranges, int n, float ***w, float ***m, float ***v, char *err,
                 size_t errlen) {
    join(S);   /* the arrays are the thread's until its write is done */
    int same = n == S->n;
    for (int i = 0; i < n && same; i++) same = ranges[i].n <= S->cap[i];
    if (!same) {
        release_arrays(S);
        S->w = calloc((size_t)n + 1, sizeof *S->w);
        S->m = calloc((size_t)n + 1, sizeof *S->m);
        S->v = calloc((size_t)n + 1, sizeof *S->v);
        S->cap = calloc((size_t)n + 1, sizeof *S->cap);
        S->ranges = calloc((size_t)n + 1, sizeof *S->ranges);
        int ok = S->w && S->m && S->v && S->cap && S->ranges;
        size_t total = 0;
        for (int i = 0; i < n && ok; i++) {
            size_t bytes = (ranges[i].n + 1) * sizeof(float);
            total += 3 * bytes;
            S->w[i] = S->alloc.alloc(S->alloc.ud, bytes);
            S->m[i] = S->alloc.alloc(S->alloc.ud, bytes);
            S->v[i] = S->alloc.alloc(S->alloc.ud, bytes);
            S->cap[i] = ranges[i].n;
            S->n = i + 1;   /* what release_arrays frees */
            ok = S->w[i] && S->m[i] && S->v[i];
            /* touched now, so that the first copy does not fault in gigabytes of pages: a save
             * costs the step the copy only (and memory that is not there fails here) */
            if (ok) { memset(S->w[i], 0, bytes); memset(S->m[i], 0, bytes); memset(S->v[i], 0, bytes); }
        }
        if (!ok) {
            release_arrays(S);
            snprintf(err, errlen, "cannot allocate %.1f MiB of host memory for the checkpoint's copy of the masters",
                     (double)total / (1 << 20));
            return -1;
        }
        S->n = n;
    }
    *w = S->w; *m = S->m; *v = S->v;
    return 0;
}

void saver_start(WpSaver *S, const char *path, const WpConfig *c, const WpChunk *chunks, const WpCkptRange *ranges,
                 int n, const WpTrainState *st, int rank) {
    snprintf(S->path, sizeof S->path, "%s", path);
    S->c = c;
    S->chunks = chunks;
    memcpy(S->ranges, ranges, (size_t)n * sizeof *ranges);
    S->n = n;
    S->st = *st;
    S->rank = rank;
    memset(&S->result, 0, sizeof S->result);
    S->result.started = 1;
    atomic_store(&S->done, 0);
    S->running = S->background && pthread_create(&S->thread, NULL, writer, S) == 0;
    if (!S->running) {   /* --sync-save, or no thread to be had: written here, before the step goes on */
        write_shard(S);
        atomic_store(&S->done, 1);
    }
}

int saver_idle(WpSaver *S) {
    return atomic_load(&S->done);
}

WpSaverResult saver_wait(WpSaver *S) {
    join(S);
    WpSaverResult r = S->result;
    S->result.started = 0;
    return r;
}
