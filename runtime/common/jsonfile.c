/* JSON files opened here rather than by json_load_file, so that a file that cannot be opened is
 * refused for the reason the system gives, and one that is not a regular file (a FIFO would wait
 * for a writer forever, a directory reads as an error) before a byte is read; and the one form of
 * "expected X, got Y" every loader's messages take (jsonfile.h). */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include "common/jsonfile.h"
#include "common/errmsg.h"

json_t *wp_json_load(const char *path, size_t flags, const char *what, char *err, size_t errlen) {
    struct stat st;
    if (stat(path, &st)) { errmsg(err, errlen, "%s: cannot open: %s", path, strerror(errno)); return NULL; }
    if (!S_ISREG(st.st_mode)) {
        errmsg(err, errlen, "%s: not a regular file (%s)", path, S_ISDIR(st.st_mode) ? "a directory" : S_ISFIFO(st.st_mode) ? "a FIFO" : "a device or socket");
        return NULL;
    }
    FILE *f = fopen(path, "rb");
    if (!f) { errmsg(err, errlen, "%s: cannot open: %s", path, strerror(errno)); return NULL; }
    json_error_t je;
    json_t *root = json_loadf(f, flags, &je);
    fclose(f);
    if (!root) {
        errmsg(err, errlen, "%s: line %d: %s: %s", path, je.line, what, je.text);
        errmsg_one_line(err);
    }
    return root;
}

int wp_json_fail(char *err, size_t errlen, const char *file, const char *fmt, ...) {
    if (!err || !errlen) return -1;
    int n = snprintf(err, errlen, "%s: ", file);
    if (n >= 0 && (size_t)n < errlen) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err + n, errlen - (size_t)n, fmt, ap);
        va_end(ap);
    }
    return errmsg_one_line(err);
}

void wp_json_describe(const json_t *v, char *buf, size_t n) {
    if (!v) { snprintf(buf, n, "nothing"); return; }
    if (json_is_object(v)) { snprintf(buf, n, json_object_size(v) ? "an object" : "an empty object"); return; }
    if (json_is_array(v)) { snprintf(buf, n, json_array_size(v) ? "an array" : "an empty array"); return; }
    char *s = json_dumps(v, JSON_ENCODE_ANY | JSON_REAL_PRECISION(10));
    if (!s) { snprintf(buf, n, "a value"); return; }
    if (strlen(s) > 40) snprintf(buf, n, "%.37s...", s);
    else snprintf(buf, n, "%s", s);
    free(s);
}

int wp_json_expected(char *err, size_t errlen, const char *file, const char *jpath, const char *what, const json_t *v) {
    char got[64];
    wp_json_describe(v, got, sizeof got);
    if (file) errmsg(err, errlen, "%s: %s: expected %s, got %s", file, jpath, what, got);
    else errmsg(err, errlen, "%s: expected %s, got %s", jpath, what, got);
    return errmsg_one_line(err);
}

int wp_json_check_keys(char *err, size_t errlen, const char *file, const json_t *obj, const char *jpath,
                       const char *const *allowed) {
    const char *key;
    json_t *v;
    json_object_foreach((json_t *)obj, key, v) {
        int ok = 0;
        for (int i = 0; allowed[i]; i++) ok |= strcmp(key, allowed[i]) == 0;
        if (ok) continue;
        char list[256] = "", what[300];
        for (int i = 0; allowed[i]; i++) {
            size_t len = strlen(list);
            snprintf(list + len, sizeof list - len, "%s%s", i ? ", " : "", allowed[i]);
        }
        snprintf(what, sizeof what, "only the keys %s", list);
        json_t *k = json_string(key);
        int rc = wp_json_expected(err, errlen, file, jpath[0] ? jpath : "top level", what, k);
        json_decref(k);
        return rc;
    }
    return 0;
}
