/* An output folder named by -o (wpgen emit, wpgen export): the one rule for what the name means
 * (outdir.c), and the sweep of the DIR.tmp-PID and DIR.old-PID folders a killed writer left beside it. */
#ifndef WP_OUTDIR_H
#define WP_OUTDIR_H

#include <stddef.h>

/* The folder -o ARG names, into final (len bytes): ARG without trailing slashes; a symbolic link
 * to a folder is that folder (its real path), with or without a trailing slash. 0, or -1 with err
 * giving the true reason (an empty name, a link to something that is not a folder, a dangling
 * link, a path too long). */
int outdir_final(const char *arg, char *final, size_t len, char *err, size_t errlen);

/* What is at path, in words for a refusal ("a regular file", "a FIFO", ...), from lstat. */
const char *outdir_kind(const char *path);

/* Where a folder being replaced steps aside while its replacement moves in: FINAL.old-PID. */
#define OUTDIR_ASIDE ".old-"

/* A leftover beside final: path, named FINAL + one of the marks + PID, PID a process that is gone
 * (never this one). Returns 1 if it removed it (and said so), else 0. */
typedef int (*OutdirLeftover)(const char *path, long pid, void *ctx);

/* Hands each leftover of a killed writer beside final (FINAL + marks[i] + PID, marks ending in
 * NULL) to rm, which proves it the writer's and removes it. Returns how many were removed. */
int outdir_sweep(const char *final, const char *const *marks, OutdirLeftover rm, void *ctx);

/* Removes each FINAL.tmp-PID beside final whose process PID is gone and which holds the regular
 * file marker (the writer's proof that it made the folder): its regular files, then the folder.
 * A folder holding anything else (a subfolder, a link) is left. Each removal is said on stderr,
 * prefixed by who. Returns how many were removed. */
int outdir_sweep_stale(const char *final, const char *marker, const char *who);

#endif
