/* Ctrl-C (SIGINT), SIGTERM and SIGHUP while wpgen writes its outputs (interrupt.c): nothing is
 * left half-written. A file is written under a temporary name and renamed into place; if a signal
 * comes first, the temporary is removed and wpgen ends as the signal ends it. A directory (emit)
 * is built beside its target: the signal is noted, the writer stops at its next file, removes what
 * it wrote and ends the same way; once it is moving the result into place, it finishes first. */
#ifndef WP_INTERRUPT_H
#define WP_INTERRUPT_H

#include <stdio.h>

/* Opens PATH.tmp-PID (its name into tmp, at least len bytes) for writing, removed on a signal
 * until interrupt_commit; a PATH that is there and not a regular file (/dev/null, a pipe) is
 * opened itself (tmp ""). NULL and errno on failure. */
FILE *interrupt_fopen(const char *path, char *tmp, size_t len);
/* Closes f and renames tmp to path (0); or removes tmp (-1, errno). */
int interrupt_commit(FILE *f, const char *tmp, const char *path);

/* A directory under construction: a signal only sets interrupt_pending() until interrupt_end. */
void interrupt_begin(void);
int interrupt_pending(void);   /* the signal number that came, or 0 */
/* Stops deferring; ends the process with the signal that came, if one did (after cleanup). */
void interrupt_end(void);

#endif
