/* Progress on stderr for commands that take more than a couple of seconds (progress.c): one line
 * saying what is being tried, rewritten in place on a terminal, at most one line a second
 * otherwise; nothing at all for work that finishes sooner (so short runs print what they always
 * printed). WPGEN_PROGRESS=0 turns it off, WPGEN_PROGRESS=1 prints from the start. */
#ifndef WP_PROGRESS_H
#define WP_PROGRESS_H

void progress_begin(void);                          /* starts the clock */
void progress(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void progress_end(void);                            /* clears a terminal's line */
double progress_now(void);                          /* seconds on a monotonic clock */

#endif
