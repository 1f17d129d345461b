/* JSON files opened here rather than by json_load_file, so that a file that cannot be opened is
 * refused for the reason the system gives, and one that is not a regular file (a FIFO would wait
 * for a writer forever, a directory reads as an error) before a byte is read (jsonfile.h). */
#include <errno.h>
#include <stdio.h>
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
