/* A minimal assertion kit for the unit tests: each CHECK counts, a failure prints where and why,
 * and check_summary() prints this program's tally and gives its exit status. */
#ifndef WP_CHECK_H
#define WP_CHECK_H

#include <stdio.h>
#include <math.h>

static int check_passed_, check_failed_;

#define CHECK(cond, ...) do { \
    if (cond) check_passed_++; \
    else { check_failed_++; fprintf(stderr, "%s:%d: CHECK(%s) failed: ", __FILE__, __LINE__, #cond); \
           fprintf(stderr, __VA_ARGS__); fputc('\n', stderr); } \
} while (0)

/* |a - b| <= atol + rtol * |b| */
#define CHECK_CLOSE(a, b, rtol, atol, what) do { \
    double a_ = (a), b_ = (b); \
    CHECK(fabs(a_ - b_) <= (atol) + (rtol) * fabs(b_), "%s: %.9g vs %.9g", (what), a_, b_); \
} while (0)

static inline int check_summary(const char *name) {
    printf("%s: %d checks passed, %d failed\n", name, check_passed_, check_failed_);
    return check_failed_ ? 1 : 0;
}

#endif
