/* The one check every program's output paths go through before anything is written: no output
 * names one of the program's inputs or another output (the same file by device and inode where
 * it exists, by its resolved directory and name where it does not yet), and each output can be
 * written where it is (its directory exists and is writable, an existing one is not a directory).
 * Outputs that are not regular files (/dev/null, a pipe, a terminal) are written into, not
 * replaced: they may repeat and may be an input's name. */
#ifndef WP_OUTPATHS_H
#define WP_OUTPATHS_H

#include <stddef.h>
#include <stdio.h>

/* A path and the flag that named it ("--log", "-o", "the program"); path NULL: not given. */
typedef struct WpPathArg {
    const char *flag;
    const char *path;
} WpPathArg;

/* 0, or -1 with one line in err naming both flags and the path (the caller exits 2). Inputs that
 * do not exist are skipped here: reading them reports that. */
int wp_check_outputs(const WpPathArg *inputs, int ninputs, const WpPathArg *outputs, int noutputs, char *err,
                     size_t errlen);


/* ---- writing an output ----
 * A regular file (or an absent one) is written as a new file beside it, PATH.tmp-PID, created
 * exclusively (never a file of the user's), flushed and renamed over PATH on commit, so that PATH
 * is the old file or the new one whole; a device or pipe is written into. */
typedef struct WpOutFile {
    FILE *f;                 /* write here between open and commit */
    char path[4096], tmp[4200];
    int direct;              /* PATH itself is open (not a regular file) */
} WpOutFile;

/* 0 and o->f open, or -1 with errno set. */
int wp_out_open(WpOutFile *o, const char *path);
/* Closes and renames into place: 0, or -1 (nothing replaced; the temporary removed). */
int wp_out_commit(WpOutFile *o);
/* Closes and removes the temporary. */
void wp_out_abort(WpOutFile *o);
#endif
