/* Checkpoint names (checkpoint.h's layout): a path taken apart into DIR, BASE and STEM, the names
 * of shards, kept manifests, optimizer files and temporaries recognised by their shape; and what a
 * committed save leaves behind pruned: the kept manifests past --keep, the shards no manifest names
 * any more, the temporaries of dead processes (common/durable.h's names). */
#include "train/ckpt_internal.h"
#include "common/durable.h"
#include "common/errmsg.h"

#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ---- names ------------------------------------------------------------------------------ */

int ck_names_of(const char *path, CkptNames *n, char *err, size_t errlen) {
    const char *slash = strrchr(path, '/');
    const char *base = slash ? slash + 1 : path;
    int dl = slash == path ? 1 : slash ? (int)(slash - path) : 0;
    if (strlen(path) >= sizeof n->dir || strlen(base) + 64 >= sizeof n->base)
        return errmsg(err, errlen, "%s: path too long", path);
    if (slash) snprintf(n->dir, sizeof n->dir, "%.*s", dl, path);
    else snprintf(n->dir, sizeof n->dir, ".");
    snprintf(n->base, sizeof n->base, "%s", base);
    size_t len = strlen(base), cut = len;
    static const char *const exts[] = { ".safetensors", ".json" };
    for (int i = 0; i < 2; i++) {
        size_t k = strlen(exts[i]);
        if (len > k && strcmp(base + len - k, exts[i]) == 0) cut = len - k;
    }
    snprintf(n->stem, sizeof n->stem, "%.*s", (int)cut, base);
    return 0;
}

void ck_join(char *out, size_t outlen, const char *dir, const char *name) {
    snprintf(out, outlen, "%s/%s", dir, name);
}

void ckpt_opt_path(const char *path, char *out, size_t outlen) {
    const char *ext = ".safetensors";
    size_t n = strlen(path), k = strlen(ext);
    if (n >= k && strcmp(path + n - k, ext) == 0)
        snprintf(out, outlen, "%.*s.opt.safetensors", (int)(n - k), path);
    else
        snprintf(out, outlen, "%s.opt.safetensors", path);
}

/* Is name STEM.opt.STEP.HASH.safetensors (STEP decimal, HASH 16 hex digits)? */
int ck_is_opt_name(const char *name, const char *stem) {
    size_t k = strlen(stem);
    if (strncmp(name, stem, k) != 0 || strncmp(name + k, ".opt.", 5) != 0) return 0;
    const char *p = name + k + 5, *q = p;
    while (*q >= '0' && *q <= '9') q++;
    if (q == p || *q != '.') return 0;
    p = ++q;
    while ((*q >= '0' && *q <= '9') || (*q >= 'a' && *q <= 'f')) q++;
    return q - p == 16 && strcmp(q, ".safetensors") == 0;
}

/* Is name STEM.shard.STEP.RANK.HASH.safetensors (STEP, RANK decimal, HASH 16 hex digits)? */
int ck_is_shard_name(const char *name, const char *stem) {
    size_t k = strlen(stem);
    if (strncmp(name, stem, k) != 0 || strncmp(name + k, ".shard.", 7) != 0) return 0;
    const char *q = name + k + 7;
    for (int field = 0; field < 2; field++) {
        const char *p = q;
        while (*q >= '0' && *q <= '9') q++;
        if (q == p || *q != '.') return 0;
        q++;
    }
    const char *p = q;
    while ((*q >= '0' && *q <= '9') || (*q >= 'a' && *q <= 'f')) q++;
    return q - p == 16 && strcmp(q, ".safetensors") == 0;
}

/* Is name STEM.STEP.json (STEP decimal), the manifest of a checkpoint --keep keeps? Its step in
 * *step (if not NULL). */
int ck_is_kept_name(const char *name, const char *stem, long *step) {
    size_t k = strlen(stem);
    if (strncmp(name, stem, k) != 0 || name[k] != '.') return 0;
    const char *p = name + k + 1, *q = p;
    while (*q >= '0' && *q <= '9') q++;
    if (q == p || q - p > 18 || strcmp(q, ".json") != 0) return 0;
    if (step) *step = strtol(p, NULL, 10);
    return 1;
}

/* May a manifest named STEM (its file name without ".json") name shard file? One of STEM's, or,
 * of a kept manifest STEM = S.STEP, one of S's: a plain name in its folder, never a path. */
int ck_shard_of_stem(const char *file, const char *stem) {
    if (ck_is_shard_name(file, stem)) return 1;
    const char *dot = strrchr(stem, '.');
    if (!dot || !dot[1] || strspn(dot + 1, "0123456789") != strlen(dot + 1)) return 0;
    char base[1024];
    snprintf(base, sizeof base, "%.*s", (int)(dot - stem), stem);
    return ck_is_shard_name(file, base);
}

/* Is name a temporary of ours (BASE, config.json, a shard, a kept manifest or an optimizer file, then ".tmp.PID") left by
 * a save that is no longer running? A live process's own temporaries are left alone. */
static int is_stale_tmp(const char *name, const CkptNames *n) {
    size_t tl;
    long pid = wp_tmp_pid(name, WP_TMP_DOT, &tl);
    if (!pid) return 0;
    char target[1100];
    snprintf(target, sizeof target, "%.*s", (int)tl, name);
    if (strcmp(target, n->base) != 0 && strcmp(target, "config.json") != 0 && !ck_is_opt_name(target, n->stem) &&
        !ck_is_shard_name(target, n->stem) && !ck_is_kept_name(target, n->stem, NULL))
        return 0;
    return pid == (long)getpid() || wp_pid_gone(pid);
}

/* ---- what a save leaves behind ---------------------------------------------------------------------------------- */

/* Removes, in DIR, the temporaries of crashed saves and, once a commit names the shards keep[0..
 * nkeep), the shards of this checkpoint that it does not name. keep NULL: temporaries only.
 * Failures are ignored: what is left is removed by the next save. */
static void remove_leftovers(const CkptNames *n, const char *const *keep, int nkeep) {
    DIR *d = opendir(n->dir);
    if (!d) return;
    struct dirent *e;
    char path[5200];
    while ((e = readdir(d))) {
        int stale = is_stale_tmp(e->d_name, n);
        if (keep && !stale && ck_is_shard_name(e->d_name, n->stem)) {
            stale = 1;
            for (int i = 0; i < nkeep && stale; i++) stale = strcmp(e->d_name, keep[i]) != 0;
        }
        if (!stale) continue;
        ck_join(path, sizeof path, n->dir, e->d_name);
        unlink(path);
    }
    closedir(d);
}

/* A kept manifest in DIR: its name, step, and whether it is this run's. */
typedef struct Kept { char name[1100]; long step; int mine; } Kept;

static int cmp_kept_newest(const void *a, const void *b) {
    long x = ((const Kept *)a)->step, y = ((const Kept *)b)->step;
    return (x < y) - (x > y);
}

/* After a commit of step `step` at path: of the kept manifests of run `run` (STEM.STEP.json), the
 * newest keep - 1 besides this step's stay (keep > 1; with keep 0, all, every one stays; with keep
 * 1 none is written and those there are left alone); another run's all stay. The shards of this
 * checkpoint that no manifest left names go, with the temporaries of dead processes. Failures are
 * ignored: the next save retries. */
void ck_prune(const CkptNames *n, const char *path, int keep, long step, uint64_t run) {
    Kept *kept = NULL;
    size_t nk = 0, cap = 0;
    DIR *d = opendir(n->dir);
    struct dirent *e;
    char file[5400];
    while (d && (e = readdir(d))) {
        long s, at;
        uint64_t r;
        if (!ck_is_kept_name(e->d_name, n->stem, &s)) continue;
        ck_join(file, sizeof file, n->dir, e->d_name);
        if (!ck_manifest_owner(file, &r, &at)) continue;
        if (nk == cap) {
            Kept *k2 = realloc(kept, (cap = cap ? 2 * cap : 16) * sizeof *kept);
            if (!k2) { free(kept); closedir(d); return; }
            kept = k2;
        }
        snprintf(kept[nk].name, sizeof kept[nk].name, "%s", e->d_name);
        kept[nk].mine = r == run;
        kept[nk++].step = s;
    }
    if (d) closedir(d);
    if (nk > 1) qsort(kept, nk, sizeof *kept, cmp_kept_newest);
    size_t left = 0, others = 0;
    for (size_t i = 0; i < nk; i++) {
        int stays = !kept[i].mine || keep <= 1 || kept[i].step == step || ++others < (size_t)keep;
        ck_join(file, sizeof file, n->dir, kept[i].name);
        if (stays) kept[left++] = kept[i];
        else unlink(file);
    }
    /* the shards the manifests left name */
    char **names = NULL;
    int nnames = 0;
    for (size_t i = 0; i <= left; i++) {
        if (i < left) ck_join(file, sizeof file, n->dir, kept[i].name);
        char **files = NULL;
        int nf = ckpt_input_files(i < left ? file : path, &files);
        char **grown = nf > 0 ? realloc(names, (size_t)(nnames + nf) * sizeof *names) : names;
        if (!grown) { ckpt_files_free(files, nf); ckpt_files_free(names, nnames); free(kept); return; }
        names = grown;
        for (int j = 0; j < nf; j++) {
            names[nnames++] = files[j];
            memmove(files[j], strrchr(files[j], '/') + 1, strlen(strrchr(files[j], '/') + 1) + 1);
        }
        free(files);   /* the strings moved into names */
    }
    remove_leftovers(n, (const char *const *)names, nnames);
    ckpt_files_free(names, nnames);
    free(kept);
}
