/* Output paths checked against inputs and each other (outpaths.h). Identity is by device and
 * inode, so a hard link, a symbolic link or "./a/../b" naming an input is caught as the input
 * itself; a path that does not exist yet is identified by its directory's real path and its
 * name, so two outputs that would create the same file are caught before either is written. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "common/outpaths.h"
#include "common/durable.h"

typedef struct {
    int exists, regular;
    dev_t dev;
    ino_t ino;
    char where[PATH_MAX + 256];   /* for an absent path: its directory's real path, "/", its name */
} Ident;

/* dir: path's directory ("." when it has none); base: its last component. */
static void split(const char *path, char *dir, size_t dirlen, const char **base) {
    const char *slash = strrchr(path, '/');
    if (!slash) { snprintf(dir, dirlen, "."); *base = path; return; }
    if (slash == path) snprintf(dir, dirlen, "/");
    else snprintf(dir, dirlen, "%.*s", (int)(slash - path), path);
    *base = slash + 1;
}

static int ident(const char *path, Ident *id, char *why, size_t whylen) {
    struct stat st;
    memset(id, 0, sizeof *id);
    if (stat(path, &st) == 0) {
        id->exists = 1;
        id->regular = S_ISREG(st.st_mode) || S_ISDIR(st.st_mode);
        id->dev = st.st_dev;
        id->ino = st.st_ino;
        return 0;
    }
    if (errno != ENOENT) { snprintf(why, whylen, "%s", strerror(errno)); return -1; }
    char dir[PATH_MAX], real[PATH_MAX];
    const char *base;
    split(path, dir, sizeof dir, &base);
    if (!*base) { snprintf(why, whylen, "names a directory, not a file"); return -1; }
    if (!realpath(dir, real)) { snprintf(why, whylen, "its directory %s: %s", dir, strerror(errno)); return -1; }
    id->regular = 1;
    snprintf(id->where, sizeof id->where, "%s/%s", real, base);
    return 0;
}

static int same(const Ident *a, const Ident *b) {
    if (!a->regular || !b->regular || a->exists != b->exists) return 0;
    return a->exists ? a->dev == b->dev && a->ino == b->ino : !strcmp(a->where, b->where);
}

/* Can path be written as an output? A regular file is replaced through a temporary beside it or
 * truncated: its directory must be writable; a device or pipe is written into. */
static int writable(const char *path, const Ident *id, char *why, size_t whylen) {
    struct stat st;
    if (id->exists && stat(path, &st) == 0 && S_ISDIR(st.st_mode)) {
        snprintf(why, whylen, "is a directory (an output is a file)");
        return -1;
    }
    if (id->exists && !id->regular) {
        if (access(path, W_OK)) { snprintf(why, whylen, "%s", strerror(errno)); return -1; }
        return 0;
    }
    char dir[PATH_MAX];
    const char *base;
    split(path, dir, sizeof dir, &base);
    if (access(dir, W_OK)) {
        snprintf(why, whylen, "its directory %s cannot be written (%s)", dir, strerror(errno));
        return -1;
    }
    return 0;
}

int wp_check_outputs(const WpPathArg *in, int nin, const WpPathArg *out, int nout, char *err, size_t errlen) {
    Ident *ids = calloc((size_t)(nin + nout) + 1, sizeof *ids);
    int *have = calloc((size_t)(nin + nout) + 1, sizeof *have);
    char why[PATH_MAX + 64];
    int rc = -1;
    if (!ids || !have) { snprintf(err, errlen, "out of memory checking the output paths"); goto done; }
    for (int i = 0; i < nin; i++)
        have[i] = in[i].path && *in[i].path && ident(in[i].path, &ids[i], why, sizeof why) == 0 && ids[i].exists;
    for (int j = 0; j < nout; j++) {
        const WpPathArg *o = &out[j];
        Ident *id = &ids[nin + j];
        if (!o->path) continue;
        if (!*o->path) { snprintf(err, errlen, "%s: expected a file name, got an empty one", o->flag); goto done; }
        if (ident(o->path, id, why, sizeof why) || writable(o->path, id, why, sizeof why)) {
            snprintf(err, errlen, "%s %s: %s", o->flag, o->path, why);
            goto done;
        }
        have[nin + j] = 1;
        for (int i = 0; i < nin; i++)
            if (have[i] && same(id, &ids[i])) {
                snprintf(err, errlen, "%s %s is %s (%s): an output may not replace an input; nothing was written",
                         o->flag, o->path, in[i].flag, in[i].path);
                goto done;
            }
        for (int i = 0; i < j; i++)
            if (have[nin + i] && same(id, &ids[nin + i])) {
                snprintf(err, errlen, "%s %s is also %s's file (%s): each output needs a file of its own; nothing was written",
                         o->flag, o->path, out[i].flag, out[i].path);
                goto done;
            }
    }
    rc = 0;
done:
    free(ids);
    free(have);
    return rc;
}

/* ---- writing an output ---- */

int wp_out_open(WpOutFile *o, const char *path) {
    struct stat st;
    memset(o, 0, sizeof *o);
    snprintf(o->path, sizeof o->path, "%s", path);
    if (stat(path, &st) == 0 && !S_ISREG(st.st_mode) && !S_ISDIR(st.st_mode)) {
        o->direct = 1;
        o->f = fopen(path, "w");
        return o->f ? 0 : -1;
    }
    int fd = wp_tmp_path(o->tmp, sizeof o->tmp, path, WP_TMP_DASH) ? -1 : wp_tmp_open(o->tmp, 1);
    if (fd < 0) { o->tmp[0] = 0; return -1; }
    if (!(o->f = fdopen(fd, "w"))) { close(fd); unlink(o->tmp); o->tmp[0] = 0; return -1; }
    return 0;
}

int wp_out_commit(WpOutFile *o) {
    int bad = ferror(o->f) != 0;
    if (fflush(o->f) != 0) bad = 1;
    if (!o->direct && fsync(fileno(o->f)) != 0) bad = 1;
    if (fclose(o->f) != 0) bad = 1;
    o->f = NULL;
    if (o->direct) return bad ? -1 : 0;
    if (bad || rename(o->tmp, o->path) != 0) { unlink(o->tmp); return -1; }
    return 0;
}

void wp_out_abort(WpOutFile *o) {
    if (o->f) fclose(o->f);
    o->f = NULL;
    if (!o->direct && o->tmp[0]) unlink(o->tmp);
}
