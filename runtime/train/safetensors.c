/* safetensors files, the format Hugging Face loads checkpoints from.
 *
 * Layout: an 8-byte little-endian header length N, N bytes of JSON ({"name": {"dtype", "shape",
 * "data_offsets": [begin, end]}, ..., "__metadata__": {string: string}}), then the raw tensor
 * bytes. Offsets are relative to the first byte after the header.
 *
 * The writer keeps the tensors in the order they were added (so the header's keys are sorted by
 * offset), pads the header with spaces to a multiple of 8 (as the specification allows) so that
 * every tensor of a memory-mapped file is 8-byte aligned, and commits atomically: a temporary
 * file beside the target, fsync, rename, fsync of the directory. A crash or an error at any point
 * leaves the previous file untouched.
 *
 * The reader maps the file and validates the whole header before handing out a single pointer:
 * known dtypes, byte ranges that match the shapes, lie inside the file, and cover the data with
 * no overlap and no hole (the rules of the reference implementation). */
#include "train/safetensors.h"
#include "common/settings.h"
#include "common/errmsg.h"
#include "common/durable.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <jansson.h>

#define ST_MAX_DIMS 8
/* The reference implementation refuses headers above 100 MB; so do we, before parsing. */
#define ST_MAX_HEADER (100u * 1000u * 1000u)

/* Bytes per element, or 0 for an unknown dtype. */
static size_t dtype_size(const char *dtype) {
    static const struct { const char *name; size_t size; } known[] = {
        {"F64", 8}, {"F32", 4}, {"F16", 2}, {"BF16", 2}, {"I64", 8}, {"I32", 4}, {"I16", 2},
        {"I8", 1}, {"U64", 8}, {"U32", 4}, {"U16", 2}, {"U8", 1}, {"BOOL", 1},
        {"F8_E4M3", 1}, {"F8_E5M2", 1},
    };
    for (size_t i = 0; i < sizeof known / sizeof known[0]; i++)
        if (strcmp(dtype, known[i].name) == 0) return known[i].size;
    return 0;
}

/* Number of elements, or SIZE_MAX on overflow. */
static size_t shape_numel(const size_t *shape, int ndim) {
    size_t n = 1;
    for (int i = 0; i < ndim; i++) {
        if (shape[i] != 0 && n > SIZE_MAX / shape[i]) return SIZE_MAX;
        n *= shape[i];
    }
    return n;
}

/* ---- writer ---------------------------------------------------------------------------- */

typedef struct StEntry {
    char *name;
    char dtype[12];
    size_t shape[ST_MAX_DIMS];
    int ndim;
    void *data;           /* a copy of the tensor's bytes, or NULL: */
    WpStSource src;       /* ... asked for at commit */
    void *ud;
    size_t bytes;
    int borrowed;         /* wp_st_add_borrowed: data is the caller's, not freed here */
} StEntry;

struct WpStWriter {
    StEntry *tensors;
    int n, cap;
    json_t *metadata;     /* object of strings */
    char error[256];      /* first failure of add/set_metadata, reported by commit */
};

WpStWriter *wp_st_writer_new(void) {
    WpStWriter *w = calloc(1, sizeof *w);
    if (!w) return NULL;
    w->metadata = json_object();
    if (!w->metadata) { free(w); return NULL; }
    return w;
}

void wp_st_writer_free(WpStWriter *w) {
    if (!w) return;
    for (int i = 0; i < w->n; i++) {
        free(w->tensors[i].name);
        if (!w->tensors[i].borrowed) free(w->tensors[i].data);
    }
    free(w->tensors);
    json_decref(w->metadata);
    free(w);
}

static void writer_fail(WpStWriter *w, const char *fmt, ...) {
    if (w->error[0]) return;   /* keep the first: later failures are usually consequences */
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(w->error, sizeof w->error, fmt, ap);
    va_end(ap);
}

/* wp_st_add, wp_st_add_borrowed (copy 0: data is the caller's) and, with src (data NULL),
 * wp_st_add_source. */
static int add_entry(WpStWriter *w, const char *name, const char *dtype, const size_t *shape, int ndim,
                     const void *data, size_t bytes, int copy, WpStSource src, void *ud) {
    if (!w) return -1;
    size_t esize = dtype ? dtype_size(dtype) : 0;
    if (!name || !name[0] || strcmp(name, "__metadata__") == 0) {
        writer_fail(w, "bad tensor name \"%s\"", name ? name : "(null)");
        return -1;
    }
    if (esize == 0) { writer_fail(w, "%s: unknown dtype %s", name, dtype ? dtype : "(null)"); return -1; }
    if (ndim < 0 || ndim > ST_MAX_DIMS || (ndim > 0 && !shape)) {
        writer_fail(w, "%s: bad number of dimensions %d", name, ndim);
        return -1;
    }
    size_t numel = shape_numel(shape, ndim);
    if (numel == SIZE_MAX || numel > SIZE_MAX / esize || numel * esize != bytes) {
        writer_fail(w, "%s: %zu bytes do not match the shape and dtype %s", name, bytes, dtype);
        return -1;
    }
    if (bytes > 0 && !data && !src) { writer_fail(w, "%s: no data", name); return -1; }
    for (int i = 0; i < w->n; i++)
        if (strcmp(w->tensors[i].name, name) == 0) {
            writer_fail(w, "%s: tensor added twice", name);
            return -1;
        }
    if (w->n == w->cap) {
        int cap = w->cap ? 2 * w->cap : 16;
        StEntry *t = realloc(w->tensors, (size_t)cap * sizeof *t);
        if (!t) { writer_fail(w, "out of memory"); return -1; }
        w->tensors = t;
        w->cap = cap;
    }
    StEntry *e = &w->tensors[w->n];
    memset(e, 0, sizeof *e);
    e->name = strdup(name);
    copy = copy && !src;
    e->borrowed = !copy;
    e->data = src ? NULL : copy ? malloc(bytes ? bytes : 1) : (void *)data;
    if (!e->name || (copy && !e->data)) {
        free(e->name);
        if (copy) free(e->data);
        writer_fail(w, "%s: out of memory (%zu bytes)", name, bytes);
        return -1;
    }
    if (copy && bytes) memcpy(e->data, data, bytes);
    e->src = src;
    e->ud = ud;
    snprintf(e->dtype, sizeof e->dtype, "%s", dtype);
    for (int i = 0; i < ndim; i++) e->shape[i] = shape[i];
    e->ndim = ndim;
    e->bytes = bytes;
    w->n++;
    return 0;
}

int wp_st_add(WpStWriter *w, const char *name, const char *dtype, const size_t *shape, int ndim,
              const void *data, size_t bytes) {
    return add_entry(w, name, dtype, shape, ndim, data, bytes, 1, NULL, NULL);
}

int wp_st_add_borrowed(WpStWriter *w, const char *name, const char *dtype, const size_t *shape, int ndim,
                       const void *data, size_t bytes) {
    return add_entry(w, name, dtype, shape, ndim, data, bytes, 0, NULL, NULL);
}

int wp_st_add_source(WpStWriter *w, const char *name, const char *dtype, const size_t *shape, int ndim,
                     size_t bytes, WpStSource src, void *ud) {
    if (!src) { writer_fail(w, "%s: no source", name ? name : "(null)"); return -1; }
    return add_entry(w, name, dtype, shape, ndim, NULL, bytes, 0, src, ud);
}

void wp_st_set_metadata(WpStWriter *w, const char *key, const char *value) {
    if (!w) return;
    if (!key || !value) { writer_fail(w, "metadata: NULL key or value"); return; }
    json_t *s = json_string(value);
    if (!s || json_object_set_new(w->metadata, key, s) != 0)
        writer_fail(w, "metadata %s: not valid UTF-8 or out of memory", key);
}

/* The header JSON, padded with spaces to a multiple of 8 bytes. Returns malloc'd text. */
static char *writer_header(WpStWriter *w, size_t *len) {
    json_t *root = json_object();
    if (!root) return NULL;
    int bad = 0;
    if (json_object_size(w->metadata) > 0)
        bad |= json_object_set(root, "__metadata__", w->metadata);
    size_t offset = 0;
    for (int i = 0; i < w->n && !bad; i++) {
        StEntry *e = &w->tensors[i];
        json_t *shape = json_array();
        json_t *offs = json_array();
        json_t *t = json_object();
        bad |= !shape || !offs || !t;
        for (int d = 0; d < e->ndim && !bad; d++)
            bad |= json_array_append_new(shape, json_integer((json_int_t)e->shape[d]));
        if (!bad) {
            bad |= json_array_append_new(offs, json_integer((json_int_t)offset));
            bad |= json_array_append_new(offs, json_integer((json_int_t)(offset + e->bytes)));
            bad |= json_object_set_new(t, "dtype", json_string(e->dtype));
            bad |= json_object_set_new(t, "shape", shape);
            bad |= json_object_set_new(t, "data_offsets", offs);
            shape = offs = NULL;
            bad |= json_object_set_new(root, e->name, t);
            t = NULL;
        }
        json_decref(shape); json_decref(offs); json_decref(t);
        offset += e->bytes;
    }
    char *text = bad ? NULL : json_dumps(root, JSON_COMPACT | JSON_PRESERVE_ORDER);
    json_decref(root);
    if (!text) return NULL;
    size_t n = strlen(text), padded = (n + 7) & ~(size_t)7;
    char *out = realloc(text, padded + 1);
    if (!out) { free(text); return NULL; }
    memset(out + n, ' ', padded - n);
    out[padded] = 0;
    *len = padded;
    return out;
}

/* WP_SAVE_DELAY_MS=N, a test hook (docs/training.md, checkpoints): every file written here keeps its
 * temporary N more milliseconds before the rename, so that a test can kill a process in the middle
 * of a save, or see training go on while one is written, on a model whose files take no time. */
static void hold_for_tests(void) {
    long ms = (long)wp_env_number("WP_SAVE_DELAY_MS");   /* 0 to 60000 (common/settings.c) */
    if (ms <= 0) return;
    int keep = errno;
    struct timespec t = { ms / 1000, (ms % 1000) * 1000000L };
    while (nanosleep(&t, &t) != 0 && errno == EINTR) {}
    errno = keep;
}

int wp_st_commit(WpStWriter *w, const char *path, char *err, size_t errlen) {
    if (!w) { errmsg(err, errlen, "%s: no writer", path); return -1; }
    if (w->error[0]) {
        errmsg(err, errlen, "%s: %s", path, w->error);
        wp_st_writer_free(w);
        return -1;
    }
    size_t hlen = 0;
    char *header = writer_header(w, &hlen);
    if (!header) {
        errmsg(err, errlen, "%s: cannot build the header (out of memory)", path);
        wp_st_writer_free(w);
        return -1;
    }
    char tmp[4200];
    if (wp_tmp_path(tmp, sizeof tmp, path, WP_TMP_DOT)) {
        errmsg(err, errlen, "%s: path too long", path);
        free(header);
        wp_st_writer_free(w);
        return -1;
    }
    int fd = wp_tmp_open(tmp, 0);
    if (fd < 0) {
        errmsg(err, errlen, "%s: cannot create %s: %s", path, tmp, strerror(errno));
        free(header);
        wp_st_writer_free(w);
        return -1;
    }
    /* offsets and sizes are 64-bit throughout: a tensor or file past 4 GiB is written whole */
    const char *step = "write";
    unsigned char len8[8];
    for (int i = 0; i < 8; i++) len8[i] = (unsigned char)((uint64_t)hlen >> (8 * i));
    int rc = wp_write_all(fd, len8, 8);
    if (rc == 0) rc = wp_write_all(fd, header, hlen);
    char srcerr[256] = "";
    for (int i = 0; i < w->n && rc == 0; i++) {
        StEntry *e = &w->tensors[i];
        const void *data = e->src ? e->src(e->ud, e->name, e->bytes, srcerr, sizeof srcerr) : e->data;
        if (!data && e->bytes) { step = "read"; rc = -1; break; }
        rc = wp_write_all(fd, data, e->bytes);
    }
    int saved = errno;
    if (rc == 0) {
        hold_for_tests();
        rc = wp_tmp_place(fd, tmp, path, &step);   /* fsync, close, rename; the temporary removed if not */
        saved = errno;
    } else {
        close(fd);
        unlink(tmp);
    }
    if (rc != 0) {
        if (srcerr[0]) errmsg(err, errlen, "%s", srcerr);   /* a source failed: its own line */
        else errmsg(err, errlen, "%s: %s failed: %s", path, step, strerror(saved));
    } else if (wp_fsync_dir_of(path) != 0) {
        /* The file is in place and complete; only the durability of the rename is unsure. */
        errmsg(err, errlen, "%s: fsync of the directory failed: %s", path, strerror(errno));
        rc = -1;
    }
    free(header);
    wp_st_writer_free(w);
    return rc == 0 ? 0 : -1;
}

/* ---- reader ---------------------------------------------------------------------------- */

typedef struct StTensor {
    const char *name;     /* key in root, alive as long as root */
    const char *dtype;
    size_t shape[ST_MAX_DIMS];
    int ndim;
    size_t begin, end;
} StTensor;

struct WpStFile {
    void *map;                   /* ours to unmap; NULL for wp_st_open_memory */
    const unsigned char *bytes;  /* the whole file */
    size_t size;
    const unsigned char *data;   /* first byte after the header */
    json_t *root;
    json_t *metadata;            /* borrowed from root, may be NULL */
    StTensor *tensors;           /* in the order of the header */
    int n;
};

void wp_st_close(WpStFile *f) {
    if (!f) return;
    if (f->map && f->map != MAP_FAILED) munmap(f->map, f->size);
    json_decref(f->root);
    free(f->tensors);
    free(f);
}

static int cmp_begin(const void *a, const void *b) {
    const StTensor *x = *(const StTensor *const *)a, *y = *(const StTensor *const *)b;
    return x->begin < y->begin ? -1 : x->begin > y->begin ? 1 : (x->end > y->end) - (x->end < y->end);
}

/* Validates one tensor entry; fills t. Returns 0 or -1 with err set. */
static int parse_entry(const char *path, const char *name, json_t *v, size_t datasize, StTensor *t,
                       char *err, size_t errlen) {
    if (!json_is_object(v)) { errmsg(err, errlen, "%s: header: %s: expected an object", path, name); return -1; }
    json_t *dt = json_object_get(v, "dtype"), *sh = json_object_get(v, "shape"),
           *off = json_object_get(v, "data_offsets");
    if (!json_is_string(dt) || dtype_size(json_string_value(dt)) == 0) {
        errmsg(err, errlen, "%s: header: %s.dtype: expected a known dtype, got %s", path, name,
               json_is_string(dt) ? json_string_value(dt) : "no string");
        return -1;
    }
    if (!json_is_array(sh) || json_array_size(sh) > ST_MAX_DIMS) {
        errmsg(err, errlen, "%s: header: %s.shape: expected an array of at most %d integers", path, name, ST_MAX_DIMS);
        return -1;
    }
    t->name = name;
    t->dtype = json_string_value(dt);
    t->ndim = (int)json_array_size(sh);
    for (int d = 0; d < t->ndim; d++) {
        json_t *x = json_array_get(sh, (size_t)d);
        if (!json_is_integer(x) || json_integer_value(x) < 0) {
            errmsg(err, errlen, "%s: header: %s.shape[%d]: expected a non-negative integer", path, name, d);
            return -1;
        }
        t->shape[d] = (size_t)json_integer_value(x);
    }
    if (!json_is_array(off) || json_array_size(off) != 2 || !json_is_integer(json_array_get(off, 0)) ||
        !json_is_integer(json_array_get(off, 1))) {
        errmsg(err, errlen, "%s: header: %s.data_offsets: expected [begin, end]", path, name);
        return -1;
    }
    json_int_t b = json_integer_value(json_array_get(off, 0)), e = json_integer_value(json_array_get(off, 1));
    if (b < 0 || e < b || (uint64_t)e > datasize) {
        errmsg(err, errlen, "%s: header: %s.data_offsets [%lld, %lld] outside the %zu bytes of data", path,
               name, (long long)b, (long long)e, datasize);
        return -1;
    }
    t->begin = (size_t)b;
    t->end = (size_t)e;
    size_t numel = shape_numel(t->shape, t->ndim), es = dtype_size(t->dtype);
    if (numel == SIZE_MAX || numel > SIZE_MAX / es || numel * es != t->end - t->begin) {
        errmsg(err, errlen, "%s: header: %s: %zu bytes do not match its shape and dtype %s", path, name,
               t->end - t->begin, t->dtype);
        return -1;
    }
    return 0;
}

/* Validates the header of f->bytes (f->size bytes) and fills the table; 0, or -1 with err set. */
static int st_parse(WpStFile *f, const char *path, char *err, size_t errlen);

WpStFile *wp_st_open(const char *path, char *err, size_t errlen) {
    WpStFile *f = calloc(1, sizeof *f);
    if (!f) { errmsg(err, errlen, "%s: out of memory", path); return NULL; }
    /* O_NONBLOCK: a named pipe would block the open itself; it is refused below. */
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) { errmsg(err, errlen, "%s: %s", path, strerror(errno)); free(f); return NULL; }
    struct stat st;
    if (fstat(fd, &st) != 0) {
        errmsg(err, errlen, "%s: %s", path, strerror(errno));
        close(fd); free(f);
        return NULL;
    }
    if (!S_ISREG(st.st_mode) || st.st_size < 8) {
        errmsg(err, errlen, "%s: not a safetensors file (%s)", path,
               S_ISREG(st.st_mode) ? "shorter than 8 bytes" : "not a regular file");
        close(fd); free(f);
        return NULL;
    }
    f->size = (size_t)st.st_size;
    f->map = mmap(NULL, f->size, PROT_READ, MAP_PRIVATE, fd, 0);
    int saved = errno;
    close(fd);   /* the mapping stays valid */
    if (f->map == MAP_FAILED) {
        errmsg(err, errlen, "%s: mmap: %s", path, strerror(saved));
        f->map = NULL;
        wp_st_close(f);
        return NULL;
    }
    f->bytes = f->map;
    if (st_parse(f, path, err, errlen) != 0) {
        errmsg_one_line(err);   /* tensor names from the file are quoted raw */
        wp_st_close(f);
        return NULL;
    }
    return f;
}

WpStFile *wp_st_open_memory(const char *name, const void *data, size_t size, char *err, size_t errlen) {
    WpStFile *f = calloc(1, sizeof *f);
    if (!f) { errmsg(err, errlen, "%s: out of memory", name); return NULL; }
    if (size < 8) {
        errmsg(err, errlen, "%s: not a safetensors file (shorter than 8 bytes)", name);
        free(f);
        return NULL;
    }
    f->bytes = data;
    f->size = size;
    if (st_parse(f, name, err, errlen) != 0) {
        errmsg_one_line(err);
        wp_st_close(f);
        return NULL;
    }
    return f;
}

static int st_parse(WpStFile *f, const char *path, char *err, size_t errlen) {
    const unsigned char *p = f->bytes;
    uint64_t hlen = 0;
    for (int i = 0; i < 8; i++) hlen |= (uint64_t)p[i] << (8 * i);
    if (hlen > ST_MAX_HEADER || hlen > f->size - 8) {
        errmsg(err, errlen, "%s: not a safetensors file (header length %llu, file size %zu)", path,
               (unsigned long long)hlen, f->size);
        return -1;
    }
    f->data = p + 8 + hlen;
    size_t datasize = f->size - 8 - (size_t)hlen;
    json_error_t je;
    f->root = json_loadb((const char *)p + 8, (size_t)hlen, JSON_REJECT_DUPLICATES, &je);
    if (!f->root || !json_is_object(f->root)) {
        errmsg(err, errlen, "%s: header: %s", path, f->root ? "expected a JSON object" : je.text);
        return -1;
    }
    size_t nkeys = json_object_size(f->root);
    f->tensors = calloc(nkeys ? nkeys : 1, sizeof *f->tensors);
    StTensor **order = calloc(nkeys ? nkeys : 1, sizeof *order);
    if (!f->tensors || !order) {
        errmsg(err, errlen, "%s: out of memory", path);
        free(order);
        return -1;
    }
    const char *key;
    json_t *v;
    json_object_foreach(f->root, key, v) {
        if (strcmp(key, "__metadata__") == 0) {
            const char *mk;
            json_t *mv;
            if (!json_is_object(v)) goto bad_meta;
            json_object_foreach(v, mk, mv) if (!json_is_string(mv)) goto bad_meta;
            f->metadata = v;
            continue;
        bad_meta:
            errmsg(err, errlen, "%s: header: __metadata__: expected an object of strings", path);
            free(order);
            return -1;
        }
        if (parse_entry(path, key, v, datasize, &f->tensors[f->n], err, errlen) != 0) {
            free(order);
            return -1;
        }
        order[f->n] = &f->tensors[f->n];
        f->n++;
    }
    /* The tensors must tile the data exactly: no overlap (a corrupt or hostile file), no hole. */
    qsort(order, (size_t)f->n, sizeof *order, cmp_begin);
    size_t pos = 0;
    for (int i = 0; i < f->n; i++) {
        if (order[i]->begin != pos) {
            errmsg(err, errlen, "%s: header: %s: data_offsets %s the previous tensor (begins at %zu, expected %zu)",
                   path, order[i]->name, order[i]->begin < pos ? "overlap" : "leave a hole after",
                   order[i]->begin, pos);
            free(order);
            return -1;
        }
        pos = order[i]->end;
    }
    free(order);
    if (pos != datasize) {
        errmsg(err, errlen, "%s: %zu bytes of data but the tensors cover %zu (truncated or padded file)",
               path, datasize, pos);
        return -1;
    }
    return 0;
}

const void *wp_st_get(const WpStFile *f, const char *name, const char **dtype, size_t *shape,
                      int *ndim, size_t *bytes) {
    if (!f || !name) return NULL;
    for (int i = 0; i < f->n; i++) {
        const StTensor *t = &f->tensors[i];
        if (strcmp(t->name, name) != 0) continue;
        if (dtype) *dtype = t->dtype;
        if (shape) for (int d = 0; d < t->ndim; d++) shape[d] = t->shape[d];
        if (ndim) *ndim = t->ndim;
        if (bytes) *bytes = t->end - t->begin;
        return f->data + t->begin;
    }
    return NULL;
}

const char *wp_st_metadata(const WpStFile *f, const char *key) {
    if (!f || !f->metadata || !key) return NULL;
    return json_string_value(json_object_get(f->metadata, key));
}

int wp_st_count(const WpStFile *f) { return f ? f->n : 0; }

const char *wp_st_name(const WpStFile *f, int i) {
    return f && i >= 0 && i < f->n ? f->tensors[i].name : NULL;
}
