/* Allocation for the generator: a planning tool that runs out of memory has nothing sensible to
 * leave half done, so it says so and exits with status 2 (the bad-input status: the inputs asked
 * for more than this machine holds). */
#ifndef WP_XALLOC_H
#define WP_XALLOC_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static inline void *xalloc_check(void *p) {
    if (!p) { fprintf(stderr, "wpgen: out of memory\n"); exit(2); }
    return p;
}
static inline void *xmalloc(size_t n) { return xalloc_check(malloc(n ? n : 1)); }
static inline void *xcalloc(size_t n, size_t size) { return xalloc_check(calloc(n ? n : 1, size ? size : 1)); }
static inline void *xrealloc(void *p, size_t n) { return xalloc_check(realloc(p, n ? n : 1)); }
static inline char *xstrdup(const char *s) { return xalloc_check(strdup(s)); }

#endif
