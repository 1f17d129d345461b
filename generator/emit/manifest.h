/* What of an emitted directory is wpgen's (manifest.c): the manifest an emission writes, and the
 * rule that decides, when emitting again over DIR, what may be replaced, what is the user's and
 * is kept, and what is in the way and refused by name. */
#ifndef WP_EMIT_MANIFEST_H
#define WP_EMIT_MANIFEST_H

#include <stddef.h>
#include <stdint.h>

#define MANIFEST ".wpgen-files"

/* A sorted list of paths relative to a directory. */
typedef struct Names {
    char **v;
    size_t n, cap;
} Names;

void names_free(Names *s);

/* DIR/.wpgen-files for the emission in tmp: every file under it with its content's hash. The
 * files, sorted, into files. 0, or -1 with err set. */
int manifest_write(const char *tmp, Names *files, char *err, size_t errlen);

/* Emitting again over dir (an earlier emission: check_target said so), whose new files are
 * fresh: the top-level entries of dir that are the user's, into keep (to be moved into the new
 * emission); everything else in dir is proven wpgen's and may go. Refuses, by name, anything
 * wpgen cannot prove it wrote that the new emission would replace or that lies where wpgen
 * writes: 0, or -1 with err set and nothing changed. */
int manifest_claim(const char *dir, const Names *fresh, Names *keep, char *err, size_t errlen);

/* After manifest_claim accepted dir: what a build made there is carried into the new emission in
 * tmp, whose files are fresh, so that make rebuilds only what changed: files equal to the earlier
 * emission's keep its times, obj/ (less the objects of sources no longer written) and train are
 * added to keep. 0, or -1 with err set. */
int manifest_carry_build(const char *dir, const char *tmp, const Names *fresh, Names *keep, char *err, size_t errlen);

/* The hash a manifest lists for a file: FNV-1a over its bytes, 64 bits. 0 and *h, or -1 (unreadable,
 * or not a regular file). wpgen export proves its files with it too (generator/export). */
int manifest_hash_file(const char *path, uint64_t *h);

/* Does the regular file at path carry wpgen's generated header (an emitted source's first line,
 * or plan.json's "generated_by")? */
int manifest_generated(const char *path);

#endif
