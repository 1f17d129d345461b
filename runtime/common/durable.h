/* Durable output, written once for every writer of the runtime and of wpgen: a file is written as
 * a temporary sibling (PATH + a separator + this process's id), flushed to disk, renamed onto PATH
 * and its directory flushed, so that PATH is the old file or the new one whole, whatever stops the
 * writer; and the temporaries of a writer that was killed are known by their names, so that a
 * later writer removes only those (never a file of the user's, never a live process's).
 *
 * Two separators name temporaries: ".tmp." (the training program's files: checkpoints, their
 * shards, config.json; train/ckpt_names.c sweeps them) and ".tmp-" (wpgen's outputs and folders,
 * and the programs' --log-like outputs: common/outpaths.c, emit/outdir.c sweep them). */
#ifndef WP_DURABLE_H
#define WP_DURABLE_H

#include <stddef.h>

#define WP_TMP_DOT "."   /* PATH.tmp.PID */
#define WP_TMP_DASH "-"  /* PATH.tmp-PID */

/* Every byte of buf to fd, in calls of at most 1 GiB (a write may do less than it is asked),
 * retried on EINTR. 0, or -1 with errno set (EIO when the system writes nothing and says nothing). */
int wp_write_all(int fd, const void *buf, size_t n);

/* The directory holding path ("." for a bare name, "/" for a name in the root) into out. */
void wp_dir_of(const char *path, char *out, size_t outlen);

/* fsync of a directory, so that a rename in it survives a crash; a file system that refuses
 * fsync on directories (EINVAL, EROFS) counts as done: the data itself is already durable.
 * 0, or -1 with errno set. wp_fsync_dir_of: of the directory holding path. */
int wp_fsync_dir(const char *dir);
int wp_fsync_dir_of(const char *path);

/* PATH.tmp + sep + PID (sep WP_TMP_DOT or WP_TMP_DASH) into out: 0, or -1 (too long). */
int wp_tmp_path(char *out, size_t outlen, const char *path, const char *sep);

/* The temporary tmp created for writing: truncated if it is there (excl 0), or created new
 * and never a file that is there (excl 1). The descriptor, or -1 with errno set. */
int wp_tmp_open(const char *tmp, int excl);

/* The written temporary (fd) put in path's place: fsync, close, rename. 0; or -1 with errno set,
 * *step naming what failed ("fsync", "close", "rename"), fd closed and tmp removed. The directory
 * is not flushed here (wp_fsync_dir_of, after). */
int wp_tmp_place(int fd, const char *tmp, const char *path, const char **step);

/* text written to path atomically: PATH.tmp.PID, fsync, rename, fsync of the directory.
 * 0, or -1 with one line in err: "PATH: cannot create TMP: WHY", "PATH: cannot write: WHY" (the
 * old file, if any, untouched), or "PATH: fsync of the directory failed: WHY" (in place, its
 * durability unsure). */
int wp_write_text_atomic(const char *path, const char *text, char *err, size_t errlen);

/* A new file path (excl 1: never one that is there; excl 0: one there is truncated), mode as given
 * (less the umask), made of the n parts data[i] of len[i] bytes and flushed to disk: how a file
 * inside a folder that is itself a temporary (emit's DIR.tmp-PID, export's) is written, the
 * folder's rename publishing it. 0, or -1 with errno set and *step naming what failed ("create",
 * "write", "fsync", "close"), the file left as far as it got (its folder is removed whole). */
int wp_write_new(const char *path, int excl, int mode, int n, const void *const *data, const size_t *len, const char **step);

/* The file from copied into path as wp_write_new writes one: 0, or -1 with errno set and *step
 * "open" or "read" (of from), or one of wp_write_new's (of path). */
int wp_copy_new(const char *from, const char *path, int excl, int mode, const char **step);

/* PATH + mark + PID (mark e.g. ".old-": where a folder steps aside while its replacement moves in)
 * into out: 0, or -1 (too long). wp_tmp_path is this with mark ".tmp" + sep. */
int wp_pid_path(char *out, size_t outlen, const char *path, const char *mark);

/* name TARGET + mark + PID? Its PID (> 0, <= INT_MAX) and TARGET's length in *target_len, found
 * at the first mark in name; 0 if name is not one. wp_tmp_pid is this with mark ".tmp" + sep. */
long wp_pid_name(const char *name, const char *mark, size_t *target_len);

/* name a temporary TARGET.tmp + sep + PID? Its PID (> 0, <= INT_MAX) and TARGET's length in
 * *target_len, found at the first ".tmp" + sep of name; 0 if name is not one. */
long wp_tmp_pid(const char *name, const char *sep, size_t *target_len);

/* Is process pid gone: kill(pid, 0) fails with ESRCH (EPERM: it runs, as another user)? */
int wp_pid_gone(long pid);

#endif
