/* Scratch space for tests: one temporary directory per test program, paths inside it, reading a
 * whole file, and removing it all at the end. Header-only, for tests. */
#ifndef WP_TMPDIR_H
#define WP_TMPDIR_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>

static char tmp_dir[64];

/* Makes /tmp/wp_NAME_XXXXXX; exits on failure (nothing can be tested without it). */
static inline void tmp_dir_make(const char *name) {
    snprintf(tmp_dir, sizeof tmp_dir, "/tmp/wp_%s_XXXXXX", name);
    if (!mkdtemp(tmp_dir)) { perror("mkdtemp"); exit(1); }
}

static inline void tmp_dir_remove(void) {
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", tmp_dir);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", tmp_dir);
}

/* TMP/name; the result lives until four more calls. */
static inline char *tmp_path(const char *name) {
    static char buf[4][256];
    static int k;
    k = (k + 1) % 4;
    snprintf(buf[k], sizeof buf[k], "%s/%s", tmp_dir, name);
    return buf[k];
}

/* The whole file, NUL-terminated (n, if not NULL, gets its length); NULL if it cannot be read. */
static inline char *tmp_slurp(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long len = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *b = len >= 0 ? malloc((size_t)len + 1) : NULL;
    if (b && fread(b, 1, (size_t)len, f) != (size_t)len) { free(b); b = NULL; }
    if (b) b[len] = 0;
    fclose(f);
    if (n) *n = len >= 0 ? (size_t)len : 0;
    return b;
}

/* Files in the scratch directory whose name contains part (e.g. the ".tmp." of an atomic write
 * that was not cleaned up). */
static inline int tmp_count(const char *part) {
    DIR *d = opendir(tmp_dir);
    int n = 0;
    struct dirent *e;
    while (d && (e = readdir(d)))
        if (strstr(e->d_name, part)) n++;
    if (d) closedir(d);
    return n;
}

#endif
