/* Where wpgen's own files are: the repository root (WPGEN_HOME, or the executable's ../), where
 * schedules/ and templates/ lie. Used by the sandbox (schedules/lib), the bridge and the
 * emitter; depends on nothing of theirs. */
#ifndef WP_HOME_H
#define WP_HOME_H

const char *wpgen_home(void);

#endif
