/* -o DIR for the commands that write a folder whole (outdir.h). A symbolic link to a folder is
 * taken as that folder, the same with or without a trailing slash: the output goes where the
 * link's owner keeps it, and DIR.tmp-PID is built beside the real folder, so the rename that puts
 * it in place never replaces the link. */
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "emit/outdir.h"
#include "common/errmsg.h"
#include "common/durable.h"

int outdir_final(const char *arg, char *final, size_t len, char *err, size_t errlen) {
    size_t n = strlen(arg);
    while (n > 1 && arg[n - 1] == '/') n--;   /* "DIR/" is DIR: DIR.tmp-PID must be its sibling */
    if (n == 0) return errmsg(err, errlen, "expected a folder name, got \"\"");
    if (n >= len || n >= PATH_MAX) return errmsg(err, errlen, "%s: path too long", arg);
    memcpy(final, arg, n);
    final[n] = 0;
    struct stat lst, st;
    if (lstat(final, &lst) || !S_ISLNK(lst.st_mode)) return 0;
    char target[PATH_MAX];
    ssize_t t = readlink(final, target, sizeof target - 1);
    target[t < 0 ? 0 : t] = 0;
    if (stat(final, &st))
        return errmsg(err, errlen, "%s is a symbolic link to %s, which %s", final, target,
                      errno == ENOENT ? "does not exist" : strerror(errno));
    if (!S_ISDIR(st.st_mode))
        return errmsg(err, errlen, "%s is a symbolic link to %s, which is %s, not a folder", final, target, outdir_kind(final));
    char real[PATH_MAX];
    if (!realpath(final, real)) return errmsg(err, errlen, "%s: %s", final, strerror(errno));
    if (strlen(real) >= len) return errmsg(err, errlen, "%s: path too long", real);
    snprintf(final, len, "%s", real);
    return 0;
}

const char *outdir_kind(const char *path) {
    struct stat st;
    if (stat(path, &st)) return "missing";
    if (S_ISREG(st.st_mode)) return "a regular file";
    if (S_ISDIR(st.st_mode)) return "a folder";
    if (S_ISFIFO(st.st_mode)) return "a FIFO";
    if (S_ISSOCK(st.st_mode)) return "a socket";
    if (S_ISCHR(st.st_mode) || S_ISBLK(st.st_mode)) return "a device";
    return "not a regular file";
}

/* dir (a real folder, not a link) holding marker: its regular files and itself removed, or left
 * whole when it holds anything else. */
static int remove_marked(const char *dir, const char *marker) {
    char path[PATH_MAX];
    struct stat st;
    if (lstat(dir, &st) || !S_ISDIR(st.st_mode)) return -1;
    if (snprintf(path, sizeof path, "%s/%s", dir, marker) >= (int)sizeof path || lstat(path, &st) || !S_ISREG(st.st_mode))
        return -1;
    DIR *d = opendir(dir);
    if (!d) return -1;
    struct dirent *e;
    int only_files = 1;
    while (only_files && (e = readdir(d))) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
        only_files = snprintf(path, sizeof path, "%s/%s", dir, e->d_name) < (int)sizeof path && lstat(path, &st) == 0 &&
                     S_ISREG(st.st_mode);
    }
    if (only_files) {
        rewinddir(d);
        while ((e = readdir(d)))
            if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..") && strcmp(e->d_name, marker) &&
                snprintf(path, sizeof path, "%s/%s", dir, e->d_name) < (int)sizeof path)
                unlink(path);
    }
    closedir(d);
    if (!only_files) return -1;
    /* the marker last: a sweep stopped half-way is still proven next time */
    if (snprintf(path, sizeof path, "%s/%s", dir, marker) < (int)sizeof path) unlink(path);
    return rmdir(dir);
}

int outdir_sweep(const char *final, const char *const *marks, OutdirLeftover rm, void *ctx) {
    char parent[PATH_MAX];
    const char *slash = strrchr(final, '/'), *base = slash ? slash + 1 : final;
    wp_dir_of(final, parent, sizeof parent);
    size_t blen = strlen(base);
    DIR *d = opendir(parent);
    if (!d) return 0;
    int removed = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        const char *name = e->d_name, *tail = name + blen;
        if (strncmp(name, base, blen)) continue;
        for (const char *const *m = marks; *m; m++) {
            size_t at;
            long pid = wp_pid_name(tail, *m, &at);
            /* only a process that is gone, named right after BASE */
            if (!pid || at != 0 || pid == (long)getpid() || !wp_pid_gone(pid)) continue;
            char path[PATH_MAX];
            if (snprintf(path, sizeof path, "%s/%s", parent, name) < (int)sizeof path) removed += rm(path, pid, ctx);
            break;
        }
    }
    closedir(d);
    return removed;
}

typedef struct { const char *marker, *who; } Marked;

static int remove_stale(const char *path, long pid, void *ctx) {
    const Marked *m = ctx;
    if (remove_marked(path, m->marker)) return 0;
    fprintf(stderr, "%s: removed %s, left by a run that was killed (process %ld is gone; %s inside proves it ours)\n",
            m->who, path, pid, m->marker);
    return 1;
}

int outdir_sweep_stale(const char *final, const char *marker, const char *who) {
    static const char *const tmp[] = { ".tmp" WP_TMP_DASH, NULL };
    Marked m = { marker, who };
    return outdir_sweep(final, tmp, remove_stale, &m);
}
