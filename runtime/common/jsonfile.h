/* A JSON file read by a loader that names the file in its errors (jsonfile.c): the reason it could
 * not be opened said as the system says it, with no line number (jansson reports "line -1"). */
#ifndef WP_JSONFILE_H
#define WP_JSONFILE_H

#include <stddef.h>
#include <jansson.h>

/* path's JSON (json_loadf's flags), or NULL with one line in err: "PATH: cannot open: STRERROR",
 * "PATH: not a regular file (a FIFO, ...)", or "PATH: line N: WHAT: PARSER'S TEXT". */
json_t *wp_json_load(const char *path, size_t flags, const char *what, char *err, size_t errlen);

#endif
