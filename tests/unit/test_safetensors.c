/* safetensors: round trip, the exact byte layout other readers expect, rejection of broken files,
 * and that a failed commit leaves the previous file as it was. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <dirent.h>
#include <unistd.h>

#include "check.h"
#include "tmpdir.h"
#include "train/safetensors.h"

static int spit(const char *path, const void *data, size_t n) {
    FILE *f = fopen(path, "wb");
    if (!f) return -1;
    size_t k = fwrite(data, 1, n, f);
    return fclose(f) == 0 && k == n ? 0 : -1;
}

/* Writes a file from a raw header text and data, for the rejection tests. */
static int spit_raw(const char *path, const char *header, const void *data, size_t n) {
    size_t h = strlen(header);
    unsigned char *b = malloc(8 + h + n);
    for (int i = 0; i < 8; i++) b[i] = (unsigned char)((uint64_t)h >> (8 * i));
    memcpy(b + 8, header, h);
    if (n) memcpy(b + 8 + h, data, n);
    int rc = spit(path, b, 8 + h + n);
    free(b);
    return rc;
}

static void test_round_trip(void) {
    float a[6] = {1, -2, 3.5f, 4, 5, 6e-30f};
    int64_t b[3] = {-1, 1LL << 40, 7};
    double c[1] = {3.141592653589793};
    size_t sa[2] = {2, 3}, sb[1] = {3};
    WpStWriter *w = wp_st_writer_new();
    CHECK(w != NULL, "writer");
    CHECK(wp_st_add(w, "model.a.weight", "F32", sa, 2, a, sizeof a) == 0, "add a");
    CHECK(wp_st_add(w, "b", "I64", sb, 1, b, sizeof b) == 0, "add b");
    CHECK(wp_st_add(w, "scalar", "F64", NULL, 0, c, sizeof c) == 0, "add scalar");
    wp_st_set_metadata(w, "format", "pt");
    wp_st_set_metadata(w, "step", "1");
    wp_st_set_metadata(w, "step", "12");   /* replaces */
    char err[512] = "";
    CHECK(wp_st_commit(w, tmp_path("x.safetensors"), err, sizeof err) == 0, "commit: %s", err);
    CHECK(tmp_count(".tmp.") == 0, "temporary file left behind");

    /* Byte layout: header length is a multiple of 8, keys in data order, data right after. */
    size_t n = 0;
    unsigned char *raw = (unsigned char *)tmp_slurp(tmp_path("x.safetensors"), &n);
    CHECK(raw != NULL, "read back");
    uint64_t h = 0;
    for (int i = 0; i < 8; i++) h |= (uint64_t)raw[i] << (8 * i);
    CHECK(h % 8 == 0, "header length %llu not a multiple of 8", (unsigned long long)h);
    CHECK(n == 8 + h + sizeof a + sizeof b + sizeof c, "file size %zu", n);
    char *hdr = strndup((char *)raw + 8, h);
    char *pa = strstr(hdr, "\"model.a.weight\""), *pb = strstr(hdr, "\"b\""), *pc = strstr(hdr, "\"scalar\"");
    CHECK(pa && pb && pc && pa < pb && pb < pc, "keys sorted by offset: %s", hdr);
    CHECK(strstr(hdr, "\"data_offsets\":[0,24]") != NULL, "offsets of a: %s", hdr);
    CHECK(strstr(hdr, "\"__metadata__\":{\"format\":\"pt\",\"step\":\"12\"}") != NULL, "metadata: %s", hdr);
    CHECK(memcmp(raw + 8 + h, a, sizeof a) == 0, "raw data of a");
    free(hdr);
    free(raw);

    WpStFile *f = wp_st_open(tmp_path("x.safetensors"), err, sizeof err);
    CHECK(f != NULL, "open: %s", err);
    if (!f) return;
    CHECK(wp_st_count(f) == 3, "count %d", wp_st_count(f));
    CHECK(wp_st_name(f, 0) && strcmp(wp_st_name(f, 0), "model.a.weight") == 0, "name 0");
    CHECK(wp_st_name(f, 3) == NULL, "name out of range");
    const char *dt = NULL;
    size_t shape[8] = {0}, bytes = 0;
    int nd = -1;
    const float *ga = wp_st_get(f, "model.a.weight", &dt, shape, &nd, &bytes);
    CHECK(ga && dt && strcmp(dt, "F32") == 0 && nd == 2 && shape[0] == 2 && shape[1] == 3 && bytes == 24, "a meta");
    CHECK(ga && memcmp(ga, a, sizeof a) == 0, "a data");
    CHECK(((uintptr_t)ga) % 8 == 0, "a aligned");
    const int64_t *gb = wp_st_get(f, "b", &dt, shape, &nd, &bytes);
    CHECK(gb && strcmp(dt, "I64") == 0 && nd == 1 && shape[0] == 3 && gb[1] == (1LL << 40), "b");
    const double *gc = wp_st_get(f, "scalar", NULL, NULL, &nd, NULL);
    CHECK(gc && nd == 0 && gc[0] == c[0], "scalar");
    CHECK(wp_st_get(f, "missing", NULL, NULL, NULL, NULL) == NULL, "absent tensor");
    CHECK(wp_st_metadata(f, "step") && strcmp(wp_st_metadata(f, "step"), "12") == 0, "metadata step");
    CHECK(wp_st_metadata(f, "nope") == NULL, "absent metadata");
    wp_st_close(f);
}

static void test_add_errors(void) {
    float a[4] = {0};
    size_t s[2] = {2, 2}, s3[1] = {3};
    WpStWriter *w = wp_st_writer_new();
    CHECK(wp_st_add(w, "a", "F32", s, 2, a, sizeof a) == 0, "add");
    CHECK(wp_st_add(w, "a", "F32", s, 2, a, sizeof a) == -1, "duplicate name accepted");
    CHECK(wp_st_add(w, "c", "F33", s, 2, a, sizeof a) == -1, "bad dtype accepted");
    CHECK(wp_st_add(w, "d", "F32", s3, 1, a, sizeof a) == -1, "byte count mismatch accepted");
    CHECK(wp_st_add(w, "__metadata__", "F32", s, 2, a, sizeof a) == -1, "reserved name accepted");
    /* A writer that saw an error refuses to commit, and the target is not created. */
    char err[512] = "";
    CHECK(wp_st_commit(w, tmp_path("never.safetensors"), err, sizeof err) == -1, "commit after error");
    CHECK(strstr(err, "never.safetensors") && strstr(err, "twice"), "message: %s", err);
    CHECK(access(tmp_path("never.safetensors"), F_OK) != 0, "file created");
}

static void test_atomic(void) {
    float a[2] = {1, 2}, b[2] = {3, 4};
    size_t s[1] = {2};
    char err[512] = "";
    WpStWriter *w = wp_st_writer_new();
    wp_st_add(w, "t", "F32", s, 1, a, sizeof a);
    CHECK(wp_st_commit(w, tmp_path("old.safetensors"), err, sizeof err) == 0, "%s", err);
    size_t n0 = 0, n1 = 0;
    unsigned char *before = (unsigned char *)tmp_slurp(tmp_path("old.safetensors"), &n0);

    /* A commit that fails (target is a directory: rename fails) leaves the old file and no temp. */
    CHECK(mkdir(tmp_path("adir.safetensors"), 0755) == 0, "mkdir");
    char sub[300];
    snprintf(sub, sizeof sub, "%s/x", tmp_path("adir.safetensors"));
    CHECK(spit(sub, "x", 1) == 0, "fill dir");
    w = wp_st_writer_new();
    wp_st_add(w, "t", "F32", s, 1, b, sizeof b);
    CHECK(wp_st_commit(w, tmp_path("adir.safetensors"), err, sizeof err) == -1, "rename onto a directory");
    CHECK(strstr(err, "rename") != NULL, "message: %s", err);
    CHECK(tmp_count(".tmp.") == 0, "temporary file left after a failed rename");

    /* A directory that does not exist: a clear error, nothing created. */
    w = wp_st_writer_new();
    wp_st_add(w, "t", "F32", s, 1, b, sizeof b);
    CHECK(wp_st_commit(w, tmp_path("nodir/y.safetensors"), err, sizeof err) == -1, "missing dir");
    CHECK(strstr(err, "nodir/y.safetensors") != NULL, "message: %s", err);

    unsigned char *after = (unsigned char *)tmp_slurp(tmp_path("old.safetensors"), &n1);
    CHECK(before && after && n0 == n1 && memcmp(before, after, n0) == 0, "old file changed");
    free(before);
    free(after);

    /* A successful commit replaces it. */
    w = wp_st_writer_new();
    wp_st_add(w, "t", "F32", s, 1, b, sizeof b);
    CHECK(wp_st_commit(w, tmp_path("old.safetensors"), err, sizeof err) == 0, "%s", err);
    WpStFile *f = wp_st_open(tmp_path("old.safetensors"), err, sizeof err);
    const float *t = f ? wp_st_get(f, "t", NULL, NULL, NULL, NULL) : NULL;
    CHECK(t && t[0] == 3 && t[1] == 4, "replaced");
    wp_st_close(f);
}

static void expect_reject(const char *what, const char *header, const void *data, size_t n, const char *needle) {
    char err[512] = "";
    spit_raw(tmp_path("bad.safetensors"), header, data, n);
    WpStFile *f = wp_st_open(tmp_path("bad.safetensors"), err, sizeof err);
    CHECK(f == NULL, "%s: accepted", what);
    CHECK(strstr(err, "bad.safetensors") && strstr(err, needle), "%s: message: %s", what, err);
    wp_st_close(f);
}

static void test_reject(void) {
    float d[4] = {0};
    char err[512] = "";
    CHECK(wp_st_open(tmp_path("absent.safetensors"), err, sizeof err) == NULL, "absent file");
    CHECK(strstr(err, "absent.safetensors") && strstr(err, "No such file"), "message: %s", err);
    spit(tmp_path("short.safetensors"), "abc", 3);
    CHECK(wp_st_open(tmp_path("short.safetensors"), err, sizeof err) == NULL, "short file");
    unsigned char huge[16] = {0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0};
    spit(tmp_path("huge.safetensors"), huge, sizeof huge);
    CHECK(wp_st_open(tmp_path("huge.safetensors"), err, sizeof err) == NULL, "header length past end");

    expect_reject("not JSON", "{\"a\":", d, 0, "header");
    expect_reject("not an object", "[1,2]      ", d, 0, "object");
    expect_reject("bad dtype", "{\"a\":{\"dtype\":\"X\",\"shape\":[1],\"data_offsets\":[0,4]}}", d, 4, "dtype");
    expect_reject("shape mismatch", "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,4]}}", d, 4, "do not match");
    expect_reject("past the end", "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", d, 4, "outside");
    expect_reject("overlap",
                  "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
                  "\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[4,12]}}", d, 12, "overlap");
    expect_reject("hole",
                  "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
                  "\"b\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[8,12]}}", d, 12, "hole");
    expect_reject("trailing bytes", "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}", d, 8, "cover");
    expect_reject("bad metadata", "{\"__metadata__\":{\"x\":1}}", d, 0, "__metadata__");
    expect_reject("duplicate key",
                  "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
                  "\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}", d, 4, "header");

    /* Valid: written by hand the way another writer might (unpadded header, reverse key order). */
    spit_raw(tmp_path("ok.safetensors"),
             "{\"b\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]},"
             "\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}", d, 8);
    WpStFile *f = wp_st_open(tmp_path("ok.safetensors"), err, sizeof err);
    CHECK(f != NULL && wp_st_count(f) == 2, "hand-written file: %s", err);
    wp_st_close(f);
}

/* Tensors from a source (wp_st_add_source): asked for in order while the file is written, the
 * file as if their bytes had been added; a source that fails fails the commit with its own line
 * and leaves no file. */
typedef struct Src { int calls; const char *fail_at; float buf[4]; } Src;
static const void *src_fn(void *ud, const char *name, size_t bytes, char *err, size_t errlen) {
    Src *s = ud;
    s->calls++;
    if (s->fail_at && !strcmp(name, s->fail_at)) { snprintf(err, errlen, "source: %s unreadable", name); return NULL; }
    for (int i = 0; i < 4; i++) s->buf[i] = (float)(s->calls * 10 + i);
    return bytes == sizeof s->buf ? s->buf : NULL;
}

static void test_source(void) {
    Src src = { 0 };
    size_t sh[1] = {4};
    char err[512] = "";
    WpStWriter *w = wp_st_writer_new();
    CHECK(wp_st_add_source(w, "one", "F32", sh, 1, 16, src_fn, &src) == 0 && wp_st_add_source(w, "two", "F32", sh, 1, 16, src_fn, &src) == 0,
          "add sources");
    CHECK(src.calls == 0, "asked for before the commit");
    CHECK(wp_st_commit(w, tmp_path("src.safetensors"), err, sizeof err) == 0 && src.calls == 2, "commit: %s", err);
    WpStFile *f = wp_st_open(tmp_path("src.safetensors"), err, sizeof err);
    const float *one = f ? wp_st_get(f, "one", NULL, NULL, NULL, NULL) : NULL, *two = f ? wp_st_get(f, "two", NULL, NULL, NULL, NULL) : NULL;
    CHECK(one && two && one[0] == 10 && one[3] == 13 && two[0] == 20 && two[3] == 23, "the sources' bytes in order");
    wp_st_close(f);
    Src bad = { .fail_at = "two" };
    w = wp_st_writer_new();
    wp_st_add_source(w, "one", "F32", sh, 1, 16, src_fn, &bad);
    wp_st_add_source(w, "two", "F32", sh, 1, 16, src_fn, &bad);
    CHECK(wp_st_commit(w, tmp_path("bad.safetensors"), err, sizeof err) == -1 && !strcmp(err, "source: two unreadable"),
          "a failing source: %s", err);
    CHECK(access(tmp_path("bad.safetensors"), F_OK) != 0 && tmp_count(".tmp.") == 0, "nothing left of a failed commit");
}

/* wp_st_add_borrowed writes the caller's bytes as they are at the commit, without a copy of its
 * own: the same file as wp_st_add's of the same bytes. */
static void test_borrowed(void) {
    float a[5] = {1, 2, 3, 4, 5};
    size_t sa[1] = {5};
    char err[512] = "";
    WpStWriter *w = wp_st_writer_new();
    CHECK(wp_st_add(w, "t", "F32", sa, 1, a, sizeof a) == 0 && wp_st_commit(w, tmp_path("copy.safetensors"), err, sizeof err) == 0,
          "copied: %s", err);
    float b[5] = {0};
    w = wp_st_writer_new();
    CHECK(wp_st_add_borrowed(w, "t", "F32", sa, 1, b, sizeof b) == 0, "add borrowed");
    memcpy(b, a, sizeof a);   /* written at the commit, not at the add */
    CHECK(wp_st_commit(w, tmp_path("borrowed.safetensors"), err, sizeof err) == 0, "borrowed: %s", err);
    size_t n1 = 0, n2 = 0;
    char *x = tmp_slurp(tmp_path("copy.safetensors"), &n1), *y = tmp_slurp(tmp_path("borrowed.safetensors"), &n2);
    CHECK(x && y && n1 == n2 && memcmp(x, y, n1) == 0, "borrowed bytes differ from copied ones");
    free(x); free(y);
    /* freed without a commit: the caller's array is not freed (a sanitizer build would say) */
    w = wp_st_writer_new();
    CHECK(wp_st_add_borrowed(w, "t", "F32", sa, 1, b, sizeof b) == 0, "add borrowed");
    wp_st_writer_free(w);
    CHECK(b[4] == 5, "the caller's array changed");
}

int main(void) {
    tmp_dir_make("safetensors");
    test_source();
    test_round_trip();
    test_add_errors();
    test_borrowed();
    test_atomic();
    test_reject();
    tmp_dir_remove();
    return check_summary("test_safetensors");
}
