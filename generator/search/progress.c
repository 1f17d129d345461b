/* Progress lines on stderr (see progress.h). Quiet for the first two seconds: most commands end
 * sooner, and their output stays what scripts and tests expect. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>
#include "search/progress.h"
#include "util/settings.h"

#define PROGRESS_AFTER_S 2.0    /* quiet before this */
#define PROGRESS_EVERY_S 1.0    /* at most one line per this, when stderr is not a terminal */

static double t_begin, t_last = -1;
static int tty, printed, mode = -1;   /* mode: 0 off, 1 always, 2 after PROGRESS_AFTER_S */

double progress_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + 1e-9 * ts.tv_nsec;
}

void progress_begin(void) {
    mode = wpgen_env_given("WPGEN_PROGRESS") ? (int)wpgen_env_number("WPGEN_PROGRESS") : 2;
    tty = isatty(2);
    t_begin = progress_now();
    t_last = -1;
}

void progress(const char *fmt, ...) {
    if (mode < 0) progress_begin();
    double now = progress_now();
    if (mode == 0 || (mode == 2 && now - t_begin < PROGRESS_AFTER_S)) return;
    if (!tty && t_last >= 0 && now - t_last < PROGRESS_EVERY_S) return;
    t_last = now;
    char line[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    if (tty) fprintf(stderr, "\r\033[K[%.0f s] %s", now - t_begin, line);
    else fprintf(stderr, "[%.0f s] %s\n", now - t_begin, line);
    printed = 1;
}

void progress_end(void) {
    if (printed && tty) fprintf(stderr, "\r\033[K");
    printed = 0;
    mode = -1;
}
