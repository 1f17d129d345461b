/* Settings from the environment, declared once (runtime/common/settings.h, the runtime's table;
 * generator/util/settings.c, wpgen's): every row's default reads; values of each kind are read or
 * refused with a message naming the variable, what it expects and what it does; the *_or_exit
 * readers stop a program on a bad value with exit 2; and no source file of the generator, the
 * runtime or the templates reads a WP_ or WPGEN_ variable with getenv outside the tables. Run
 * from the repository's root (tests/run.sh does). */
#include <dirent.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include "check.h"
#include "tmpdir.h"
#include "common/settings.h"
#include "util/settings.h"

static void test_rows(const WpSetting *t, int n, const char *which) {
    for (int i = 0; i < n; i++) {
        char err[512];
        double v = -1;
        unsetenv(t[i].name);
        CHECK(!strncmp(t[i].name, "WP", 2), "%s: %s is no WP_ or WPGEN_ name", which, t[i].name);
        CHECK(t[i].help && strlen(t[i].help) > 10, "%s: %s says what it does", which, t[i].name);
        for (int j = 0; j < i; j++) CHECK(strcmp(t[i].name, t[j].name), "%s: %s declared twice", which, t[i].name);
        if (t[i].kind == SET_TEXT) continue;
        CHECK(wp_setting_number(&t[i], &v, NULL, err, sizeof err) == 0, "%s: %s's default \"%s\" reads: %s", which, t[i].name,
              t[i].dflt, err);
        setenv(t[i].name, "bad value", 1);
        CHECK(wp_setting_number(&t[i], &v, NULL, err, sizeof err) == -1 && strstr(err, t[i].name) && strstr(err, "expected") &&
              strstr(err, t[i].help), "%s: %s=bad value: %s", which, t[i].name, err);
        unsetenv(t[i].name);
    }
}

static double read_as(const char *name, const char *value, int *rc, char *err, size_t errlen) {
    double v = -1;
    if (value) setenv(name, value, 1); else unsetenv(name);
    *rc = wp_setting_number(wp_setting_find(wp_runtime_settings, wp_runtime_nsettings, name), &v, NULL, err, errlen);
    unsetenv(name);
    return v;
}

static void test_kinds(void) {
    char err[512];
    int rc;
    double v = read_as("WP_COMM_TIMEOUT", "2.5", &rc, err, sizeof err);
    CHECK(rc == 0 && v == 2.5, "seconds: 2.5 -> %g", v);
    v = read_as("WP_COMM_TIMEOUT", NULL, &rc, err, sizeof err);
    CHECK(rc == 0 && v == 300, "seconds unset: the default 300, got %g", v);
    const char *bad_seconds[] = { "-1", "5s", "nan", "inf x", " ", "1e999x" };
    for (int i = 0; i < 6; i++) {
        read_as("WP_COMM_TIMEOUT", bad_seconds[i], &rc, err, sizeof err);
        CHECK(rc == -1 && strstr(err, "expected a number of seconds >= 0"), "seconds %s: %s", bad_seconds[i], err);
    }
    v = read_as("WP_SAVE_DELAY_MS", "60000", &rc, err, sizeof err);
    CHECK(rc == 0 && v == 60000, "count at its top: %g", v);
    const char *bad_counts[] = { "60001", "-1", "+5", "1.5", "0x10", "1e3", "12 ", "" };
    for (int i = 0; i < 7; i++) {
        read_as("WP_SAVE_DELAY_MS", bad_counts[i], &rc, err, sizeof err);
        CHECK(rc == -1 && strstr(err, "expected a whole number from 0 to 60000"), "count %s: %s", bad_counts[i], err);
    }
    v = read_as("WP_SAVE_DELAY_MS", "", &rc, err, sizeof err);
    CHECK(rc == 0 && v == 0, "empty: the default");
    v = read_as("WP_EMULATE", "1", &rc, err, sizeof err);
    CHECK(rc == 0 && v == 1, "switch 1");
    const char *bad_switches[] = { "yes", "2", "true", "01" };
    for (int i = 0; i < 4; i++) {
        read_as("WP_EMULATE", bad_switches[i], &rc, err, sizeof err);
        CHECK(rc == -1 && strstr(err, "expected 0 or 1"), "switch %s: %s", bad_switches[i], err);
    }
    const char *choices[] = { "auto", "cudnn", "own", "reference" };
    for (int i = 0; i < 4; i++) {
        v = read_as("WP_ATTENTION", choices[i], &rc, err, sizeof err);
        CHECK(rc == 0 && v == i, "choice %s: index %g", choices[i], v);
    }
    read_as("WP_ATTENTION", "ow", &rc, err, sizeof err);
    CHECK(rc == -1 && strstr(err, "WP_ATTENTION=ow: expected one of auto,cudnn,own,reference ("), "choice ow: %s", err);
    read_as("WP_ATTENTION", "owner", &rc, err, sizeof err);
    CHECK(rc == -1, "choice owner (a prefix of nothing, a choice its prefix)");
    /* a row without default: given or not */
    int given = -1;
    unsetenv("WP_SBGEMM");
    CHECK(!wp_env_given("WP_SBGEMM"), "WP_SBGEMM unset: not given");
    setenv("WP_SBGEMM", "0", 1);
    CHECK(wp_env_given("WP_SBGEMM") && wp_env_number("WP_SBGEMM") == 0, "WP_SBGEMM=0 given and 0");
    unsetenv("WP_SBGEMM");
    (void)given;
    /* a read leaves errno as it was (a setting read between a failed write and its message) */
    errno = ENOSPC;
    read_as("WP_SAVE_DELAY_MS", "5", &rc, err, sizeof err);
    CHECK(errno == ENOSPC, "errno kept across a read: %d", errno);
    errno = ENOSPC;
    read_as("WP_SAVE_DELAY_MS", "x", &rc, err, sizeof err);
    CHECK(errno == ENOSPC, "errno kept across a refused read: %d", errno);
    setenv("WPGEN_PYTHON", "/opt/py", 1);
    CHECK(wpgen_env_text("WPGEN_PYTHON") && !strcmp(wpgen_env_text("WPGEN_PYTHON"), "/opt/py"), "text read");
    unsetenv("WPGEN_PYTHON");
    CHECK(wpgen_env_text("WPGEN_PYTHON") && !strcmp(wpgen_env_text("WPGEN_PYTHON"), "python3"), "text's default");
}

/* wp_env_number on a bad value: the message on stderr, exit 2. */
static void test_exit(void) {
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        setenv("WP_EMULATE", "maybe", 1);
        if (!freopen("/dev/null", "w", stderr)) _exit(9);
        (void)wp_env_number("WP_EMULATE");
        _exit(0);
    }
    int st = 0;
    waitpid(pid, &st, 0);
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 2, "a bad value stops the program with exit 2 (status %d)", st);
}

/* No getenv("WP..." or getenv(WP_... in a source file but the tables' own. */
static int scan(const char *dir, int *files) {
    int found = 0;
    DIR *d = opendir(dir);
    if (!d) return 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.') continue;
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        if (e->d_type == DT_DIR) { found += scan(path, files); continue; }
        const char *dot = strrchr(e->d_name, '.');
        if (!dot || (strcmp(dot, ".c") && strcmp(dot, ".h") && strcmp(dot, ".cu") && strcmp(dot, ".cuh") && strcmp(dot, ".tpl")))
            continue;
        if (strstr(path, "settings.c")) continue;
        char *text = tmp_slurp(path, NULL);
        if (!text) continue;
        (*files)++;
        for (const char *p = text; (p = strstr(p, "getenv(")); p += 7) {
            const char *a = p + 7;
            if (*a == '"') a++;
            size_t len = strspn(a, "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_");
            if (!strncmp(a, "WP", 2)) { found++; printf("getenv of %.*s in %s, not through a table of settings\n", (int)len, a, path); }
        }
        free(text);
    }
    closedir(d);
    return found;
}

int main(void) {
    test_rows(wp_runtime_settings, wp_runtime_nsettings, "runtime");
    test_rows(wpgen_settings, wpgen_nsettings, "wpgen");
    test_kinds();
    test_exit();
    int files = 0, found = scan("generator", &files) + scan("runtime", &files) + scan("templates", &files);
    CHECK(files > 100, "the sources were found (%d files): run from the repository's root", files);
    CHECK(found == 0, "%d reads of WP_ or WPGEN_ variables outside the tables", found);
    return check_summary("test_settings");
}
