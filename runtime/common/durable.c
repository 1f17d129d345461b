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

int wp_tmp_path(char *out, size_t outlen, const char *path, const char *sep) {
    if ((size_t)snprintf(out, outlen, "%s.tmp%s%ld", path, sep, (long)getpid()) < outlen) return 0;
    errno = ENAMETOOLONG;
    return -1;
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
