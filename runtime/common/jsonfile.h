/* What every loader of a JSON file the user gives (topology, model config.json, calibration, a
 * checkpoint's manifest, plan.json) says, written once (jsonfile.c): the reason the file could not
 * be opened, as the system says it, with no line number (jansson reports "line -1"); and a value
 * that is not what the file's format asks for, in one form:
 *     FILE: JSON.PATH: expected WHAT, got VALUE
 * VALUE as JSON writes it (strings quoted, so that "8" and 8 are told apart), a container by kind
 * ("an object", "an empty array"), a missing one "nothing". */
#ifndef WP_JSONFILE_H
#define WP_JSONFILE_H

#include <stddef.h>
#include <jansson.h>

/* path's JSON (json_loadf's flags), or NULL with one line in err: "PATH: cannot open: STRERROR",
 * "PATH: not a regular file (a FIFO, ...)", or "PATH: line N: WHAT: PARSER'S TEXT". */
json_t *wp_json_load(const char *path, size_t flags, const char *what, char *err, size_t errlen);

/* "FILE: " and the message into err, made one line (names and keys from the file are quoted raw).
 * Returns -1. A loader's own messages, other than "expected ..., got ...", take this form. */
int wp_json_fail(char *err, size_t errlen, const char *file, const char *fmt, ...) __attribute__((format(printf, 4, 5)));

/* v for "got ...", into buf (n >= 48 holds every form). */
void wp_json_describe(const json_t *v, char *buf, size_t n);

/* "FILE: JPATH: expected WHAT, got <v>" into err (file NULL: "JPATH: ..."), made one line
 * (keys from the file are quoted raw). Returns -1. */
int wp_json_expected(char *err, size_t errlen, const char *file, const char *jpath, const char *what, const json_t *v);

/* obj holds only the keys allowed (NULL-terminated): 0; else -1 and "FILE: JPATH: expected only
 * the keys K1, K2, ..., got "KEY"" naming the first other one (JPATH "" is "top level"). */
int wp_json_check_keys(char *err, size_t errlen, const char *file, const json_t *obj, const char *jpath,
                       const char *const *allowed);

#endif
