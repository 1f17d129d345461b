/* The runtime's one failure path (fail.h): the message, then the job ended by whoever can end it. */
#include <stdio.h>
#include <stdlib.h>
#include "common/fail.h"

static int g_rank = -1;
static WpAbortJob g_abort_job;

void wp_fail_setup(int rank, WpAbortJob abort_job) {
    g_rank = rank;
    g_abort_job = abort_job;
}

void wp_vfail(int status, const char *who, const char *fmt, va_list ap) {
    char msg[1024];
    vsnprintf(msg, sizeof msg, fmt, ap);
    char rank[32] = "";
    if (g_rank >= 0) snprintf(rank, sizeof rank, "rank %d: ", g_rank);
    fprintf(stderr, "%s%s%s%s\n", who ? who : "", who ? ": " : "", rank, msg);
    fflush(stdout);
    fflush(stderr);
    if (g_abort_job) g_abort_job(status);
    exit(status);   /* no layer, or one that could not end the others */
}

void wp_fail(int status, const char *who, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    wp_vfail(status, who, fmt, ap);
}

void wp_call_failed(int status, const char *file, int line, const char *call, const char *error) {
    wp_fail(status, NULL, "%s:%d: %s failed: %s", file, line, call, error);
}
