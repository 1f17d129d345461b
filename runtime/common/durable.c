/* Durable output (durable.h): the temporary, its flush, its rename, the directory's flush; and the
 * names by which a killed writer's temporaries are known. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "common/durable.h"
#include "common/errmsg.h"

int wp_write_all(int fd, const void *buf, size_t n) {
    const char *p = buf;
    while (n > 0) {
        ssize_t k = write(fd, p, n > (1u << 30) ? (1u << 30) : n);
        if (k < 0) {
            if (errno == EINTR) continue;
            return -1;
        }
        if (k == 0) {   /* nothing written and no error: never retry forever */
            errno = EIO;
            return -1;
        }
        p += k;
        n -= (size_t)k;
    }
    return 0;
}

void wp_dir_of(const char *path, char *out, size_t outlen) {
    const char *slash = strrchr(path, '/');
    if (!slash) snprintf(out, outlen, ".");
    else if (slash == path) snprintf(out, outlen, "/");
    else snprintf(out, outlen, "%.*s", (int)(slash - path), path);
}

int wp_fsync_dir(const char *dir) {
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) return -1;
    int rc = fsync(fd);
    if (rc != 0 && (errno == EINVAL || errno == EROFS)) rc = 0;
    int saved = errno;
    close(fd);
    errno = saved;
    return rc;
}

int wp_fsync_dir_of(const char *path) {
    char dir[4096];
    wp_dir_of(path, dir, sizeof dir);
    return wp_fsync_dir(dir);
}

int wp_pid_path(char *out, size_t outlen, const char *path, const char *mark) {
    if ((size_t)snprintf(out, outlen, "%s%s%ld", path, mark, (long)getpid()) < outlen) return 0;
    errno = ENAMETOOLONG;
    return -1;
}

int wp_tmp_path(char *out, size_t outlen, const char *path, const char *sep) {
    char mark[16];
    snprintf(mark, sizeof mark, ".tmp%s", sep);
    return wp_pid_path(out, outlen, path, mark);
}

int wp_tmp_open(const char *tmp, int excl) {
    return open(tmp, O_WRONLY | O_CREAT | (excl ? O_EXCL : O_TRUNC) | O_CLOEXEC, 0644);
}

int wp_tmp_place(int fd, const char *tmp, const char *path, const char **step) {
    const char *what = "fsync";
    int rc = fsync(fd), saved = errno;
    if (close(fd) != 0 && rc == 0) { what = "close"; rc = -1; saved = errno; }
    if (rc == 0 && rename(tmp, path) != 0) { what = "rename"; rc = -1; saved = errno; }
    if (rc == 0) return 0;
    unlink(tmp);
    if (step) *step = what;
    errno = saved;
    return -1;
}

/* The end of a file wp_write_new or wp_copy_new made: flushed, closed; 0 or -1 with *step. */
static int close_new(int fd, int rc, const char **step) {
    int saved = errno;
    if (rc == 0 && fsync(fd) != 0) { rc = -1; saved = errno; if (step) *step = "fsync"; }
    if (close(fd) != 0 && rc == 0) { rc = -1; saved = errno; if (step) *step = "close"; }
    errno = saved;
    return rc;
}

int wp_write_new(const char *path, int excl, int mode, int n, const void *const *data, const size_t *len, const char **step) {
    int fd = open(path, O_WRONLY | O_CREAT | (excl ? O_EXCL : O_TRUNC) | O_CLOEXEC, mode);
    if (fd < 0) { if (step) *step = "create"; return -1; }
    int rc = 0;
    for (int i = 0; i < n && rc == 0; i++)
        if (wp_write_all(fd, data[i], len[i]) != 0) { rc = -1; if (step) *step = "write"; }
    return close_new(fd, rc, step);
}

int wp_copy_new(const char *from, const char *path, int excl, int mode, const char **step) {
    int in = open(from, O_RDONLY | O_CLOEXEC);
    if (in < 0) { if (step) *step = "open"; return -1; }
    int fd = open(path, O_WRONLY | O_CREAT | (excl ? O_EXCL : O_TRUNC) | O_CLOEXEC, mode);
    if (fd < 0) { int saved = errno; close(in); errno = saved; if (step) *step = "create"; return -1; }
    char buf[1 << 16];
    int rc = 0;
    for (;;) {
        ssize_t k = read(in, buf, sizeof buf);
        if (k < 0 && errno == EINTR) continue;
        if (k < 0) { rc = -1; if (step) *step = "read"; break; }
        if (k == 0) break;
        if (wp_write_all(fd, buf, (size_t)k) != 0) { rc = -1; if (step) *step = "write"; break; }
    }
    int saved = errno;
    close(in);
    errno = saved;
    return close_new(fd, rc, step);
}

int wp_write_text_atomic(const char *path, const char *text, char *err, size_t errlen) {
    char tmp[4200];
    if (wp_tmp_path(tmp, sizeof tmp, path, WP_TMP_DOT)) return errmsg(err, errlen, "%s: path too long", path);
    int fd = wp_tmp_open(tmp, 0);
    if (fd < 0) return errmsg(err, errlen, "%s: cannot create %s: %s", path, tmp, strerror(errno));
    if (wp_write_all(fd, text, strlen(text)) != 0) {
        int saved = errno;
        close(fd);
        unlink(tmp);
        return errmsg(err, errlen, "%s: cannot write: %s", path, strerror(saved));
    }
    if (wp_tmp_place(fd, tmp, path, NULL) != 0) return errmsg(err, errlen, "%s: cannot write: %s", path, strerror(errno));
    if (wp_fsync_dir_of(path) != 0) return errmsg(err, errlen, "%s: fsync of the directory failed: %s", path, strerror(errno));
    return 0;
}

long wp_tmp_pid(const char *name, const char *sep, size_t *target_len) {
    char mark[16];
    snprintf(mark, sizeof mark, ".tmp%s", sep);
    return wp_pid_name(name, mark, target_len);
}

long wp_pid_name(const char *name, const char *mark, size_t *target_len) {
    const char *t = strstr(name, mark);
    if (!t) return 0;
    const char *d = t + strlen(mark);
    char *end;
    errno = 0;
    long pid = strtol(d, &end, 10);
    if (end == d || *end || errno || pid <= 0 || pid > INT_MAX) return 0;
    if (target_len) *target_len = (size_t)(t - name);
    return pid;
}

int wp_pid_gone(long pid) {
    return kill((pid_t)pid, 0) != 0 && errno == ESRCH;
}
