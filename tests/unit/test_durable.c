/* The two libraries every writer and every JSON loader share: durable output (common/durable.c:
 * the temporary's name, the write that replaces a file whole or leaves it as it was, the names by
 * which a killed writer's temporaries are known) and the one form of "expected X, got Y"
 * (common/jsonfile.c). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <jansson.h>

#include "check.h"
#include "tmpdir.h"
#include "common/durable.h"
#include "common/jsonfile.h"

static void test_write_text(void) {
    char err[512] = "", *text;
    const char *p = tmp_path("a.json");
    CHECK(wp_write_text_atomic(p, "one\n", err, sizeof err) == 0, "%s", err);
    CHECK(wp_write_text_atomic(p, "two\n", err, sizeof err) == 0, "%s", err);
    text = tmp_slurp(p, NULL);
    CHECK(text && strcmp(text, "two\n") == 0, "replaced whole: %s", text ? text : "(none)");
    free(text);
    CHECK(tmp_count(".tmp") == 0, "no temporary left beside it");
    /* a folder that is not there: nothing written, the message names the path and the temporary */
    const char *q = tmp_path("nowhere/b.json");
    CHECK(wp_write_text_atomic(q, "x", err, sizeof err) == -1 && strstr(err, "nowhere/b.json: cannot create ") &&
          strstr(err, "b.json.tmp."), "%s", err);
    /* the rename fails (a folder in the way): the temporary is removed, the folder left */
    char dir[300];
    snprintf(dir, sizeof dir, "%s", tmp_path("d"));
    mkdir(dir, 0755);
    char inner[320];
    snprintf(inner, sizeof inner, "%s/x", dir);
    mkdir(inner, 0755);
    CHECK(wp_write_text_atomic(dir, "x", err, sizeof err) == -1 && strstr(err, ": cannot write: "), "%s", err);
    struct stat st;
    CHECK(stat(dir, &st) == 0 && S_ISDIR(st.st_mode) && tmp_count(".tmp") == 0, "the folder stays, no temporary");
}

static void test_names(void) {
    char tmp[64];
    size_t at = 99;
    CHECK(wp_tmp_path(tmp, sizeof tmp, "d/x.json", WP_TMP_DOT) == 0 && !strncmp(tmp, "d/x.json.tmp.", 13), "%s", tmp);
    CHECK(wp_tmp_path(tmp, 8, "d/x.json", WP_TMP_DASH) == -1, "too long");
    CHECK(wp_tmp_pid("x.json.tmp.123", WP_TMP_DOT, &at) == 123 && at == 6, "dot: %zu", at);
    CHECK(wp_tmp_pid("out.tmp-77", WP_TMP_DASH, &at) == 77 && at == 3, "dash");
    CHECK(wp_tmp_pid("out.tmp-77", WP_TMP_DOT, NULL) == 0, "the other separator is not ours");
    CHECK(wp_tmp_pid("x.tmp.12a", WP_TMP_DOT, NULL) == 0 && wp_tmp_pid("x.tmp.", WP_TMP_DOT, NULL) == 0 &&
          wp_tmp_pid("x.tmp.0", WP_TMP_DOT, NULL) == 0 && wp_tmp_pid("x.tmp.99999999999", WP_TMP_DOT, NULL) == 0 &&
          wp_tmp_pid("x.tmp.-5", WP_TMP_DOT, NULL) == 0, "not a process id: never a temporary");
    CHECK(wp_pid_path(tmp, sizeof tmp, "out", ".old-") == 0 && !strncmp(tmp, "out.old-", 8) &&
          wp_pid_name(tmp, ".old-", &at) == (long)getpid() && at == 3, "aside: %s", tmp);
    CHECK(wp_pid_name("out.old-7", ".tmp" WP_TMP_DASH, NULL) == 0, "a temporary's mark is not the aside one");
    CHECK(!wp_pid_gone((long)getpid()), "this process runs");
    char dir[16];
    wp_dir_of("a", dir, sizeof dir);
    CHECK(!strcmp(dir, "."), "%s", dir);
    wp_dir_of("/a", dir, sizeof dir);
    CHECK(!strcmp(dir, "/"), "%s", dir);
    wp_dir_of("x/y/a", dir, sizeof dir);
    CHECK(!strcmp(dir, "x/y"), "%s", dir);
}

/* The files of a folder that is itself a temporary: written from parts, created new or truncated,
 * copied; each failure names its step. */
static void test_write_new(void) {
    const char *step = "";
    char p[300], q[300];
    snprintf(p, sizeof p, "%s", tmp_path("new.txt"));
    snprintf(q, sizeof q, "%s", tmp_path("copy.txt"));
    const void *parts[3] = { "ab", "", "cd\n" };
    size_t len[3] = { 2, 0, 3 };
    CHECK(wp_write_new(p, 1, 0644, 3, parts, len, &step) == 0, "%s", step);
    char *text = tmp_slurp(p, NULL);
    CHECK(text && !strcmp(text, "abcd\n"), "the parts in order: %s", text ? text : "(none)");
    free(text);
    CHECK(wp_write_new(p, 1, 0644, 1, parts, len, &step) == -1 && errno == EEXIST && !strcmp(step, "create"),
          "excl: never a file that is there (%s)", step);
    CHECK(wp_write_new(p, 0, 0644, 1, parts, len, &step) == 0, "truncated: %s", step);
    text = tmp_slurp(p, NULL);
    CHECK(text && !strcmp(text, "ab"), "truncated: %s", text ? text : "(none)");
    free(text);
    CHECK(wp_copy_new(p, q, 1, 0644, &step) == 0, "%s", step);
    text = tmp_slurp(q, NULL);
    CHECK(text && !strcmp(text, "ab"), "copied: %s", text ? text : "(none)");
    free(text);
    CHECK(wp_copy_new(tmp_path("absent"), q, 0, 0644, &step) == -1 && errno == ENOENT && !strcmp(step, "open"), "%s", step);
    snprintf(q, sizeof q, "%s", tmp_path("dircopy"));
    CHECK(wp_copy_new(tmp_path("."), q, 0, 0644, &step) == -1 && errno == EISDIR && !strcmp(step, "read"),
          "a folder is read as nothing: %s", step);
}

static void test_expected(void) {
    char err[256];
    json_t *v = json_loads("{\"a\": \"8\", \"b\": 8, \"c\": [], \"d\": [1], \"e\": {}, \"k\": 1}", 0, NULL);
    static const struct { const char *key, *got; } cases[] = {
        { "a", "got \"8\"" }, { "b", "got 8" }, { "c", "got an empty array" }, { "d", "got an array" },
        { "e", "got an empty object" }, { "z", "got nothing" },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char want[128];
        snprintf(want, sizeof want, "f.json: x.%s: expected a number, %s", cases[i].key, cases[i].got);
        char jpath[16];
        snprintf(jpath, sizeof jpath, "x.%s", cases[i].key);
        CHECK(wp_json_expected(err, sizeof err, "f.json", jpath, "a number", json_object_get(v, cases[i].key)) == -1 &&
              !strcmp(err, want), "%s (want %s)", err, want);
    }
    static const char *const allowed[] = { "a", "b", "c", "d", "e", NULL };
    CHECK(wp_json_check_keys(err, sizeof err, "f.json", v, "", allowed) == -1 &&
          !strcmp(err, "f.json: top level: expected only the keys a, b, c, d, e, got \"k\""), "%s", err);
    json_t *nl = json_loads("{\"bad\\nkey\": 1}", 0, NULL);
    CHECK(wp_json_check_keys(err, sizeof err, "f.json", nl, "x", allowed) == -1 && !strchr(err, '\n'), "one line: %s", err);
    json_decref(nl);
    json_decref(v);
}

int main(void) {
    tmp_dir_make("durable");
    test_write_text();
    test_names();
    test_write_new();
    test_expected();
    tmp_dir_remove();
    return check_summary("test_durable");
}
