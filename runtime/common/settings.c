/* Settings from the environment (settings.h): the readers, the --help text, and the runtime's
 * table. */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "common/settings.h"

/* The runtime's variables. A test hook is marked so in its line; the CUDA ones are read only by
 * the CUDA backend, the CPU ones only by the CPU backend. */
const WpSetting wp_runtime_settings[] = {
    { "WP_COMM_TIMEOUT", SET_SECONDS, "300", 0, INFINITY, NULL,
      "a transfer, collective or blocking call not done after this long aborts the job, naming it (exit 3; 0: never)" },
    { "WP_SAVE_TIMEOUT", SET_SECONDS, "0", 0, INFINITY, NULL,
      "how long the ranks wait for rank 0's checkpoint to be written before aborting (0: no limit)" },
    { "WP_COMM_MAX_ELEMS", SET_COUNT, "2147483647", 1, INT_MAX, NULL,
      "elements of one MPI or NCCL call at most; longer operations go in pieces (a test hook)" },
    { "WP_EMULATE", SET_SWITCH, "0", 0, 1, NULL,
      "1: every send is delayed by the plan's link (latency + bytes / bandwidth), to measure a cluster on one machine" },
    { "WP_SKIP_MEM_CHECK", SET_SWITCH, "0", 0, 1, NULL,
      "1: start even where the host memory the run allocates is more than the machine has available" },
    { "WP_MEM_AVAILABLE", SET_COUNT, "", 0, 9.007199254740992e15, NULL,
      "bytes of host memory to take as available instead of the machine's (a test hook)" },
    { "WP_SAVE_DELAY_MS", SET_COUNT, "0", 0, 60000, NULL,
      "milliseconds each checkpoint file's write is held (a test hook: saves that take time on a tiny model)" },
    { "WP_SBGEMM", SET_SWITCH, "", 0, 1, NULL,
      "CPU: 1 runs bf16 products through OpenBLAS's cblas_sbgemm where it has one, 0 through sgemm (unset: the faster, timed)" },
    { "WP_ATTENTION", SET_CHOICE, "auto", 0, 0, "auto|cudnn|own|reference",
      "CUDA: the attention kernels (auto: cuDNN's fused attention where it loads, else our own)" },
    { "WP_CUDNN_DETERMINISTIC", SET_SWITCH, "1", 0, 1, NULL,
      "CUDA: 0 lets cuDNN's attention backward use its faster nondeterministic algorithm" },
    { "WP_CUDNN_LIBRARY", SET_TEXT, "", 0, 0, NULL,
      "CUDA: the libcudnn.so.9 to load (unset: the loader's search, then the cuDNN wheel's folder)" },
    { "WP_GEMM_AUTOTUNE", SET_SWITCH, "1", 0, 1, NULL,
      "CUDA: 0 takes cuBLASLt's first heuristic algorithm for each product instead of timing the candidates" },
};
const int wp_runtime_nsettings = (int)(sizeof wp_runtime_settings / sizeof wp_runtime_settings[0]);

const WpSetting *wp_setting_find(const WpSetting *table, int n, const char *name) {
    for (int i = 0; i < n; i++)
        if (!strcmp(table[i].name, name)) return &table[i];
    return NULL;
}

static const char *raw(const WpSetting *s, int *given) {
    const char *v = getenv(s->name);
    int set = v && *v;
    if (given) *given = set;
    return set ? v : s->dflt;
}

/* What a row expects, for messages and --help: "a number of seconds >= 0", ... */
static void expects(const WpSetting *s, char *out, size_t len) {
    switch (s->kind) {
    case SET_SECONDS: snprintf(out, len, "a number of seconds >= %g", s->lo); break;
    case SET_COUNT: snprintf(out, len, "a whole number from %.0f to %.0f", s->lo, s->hi); break;
    case SET_SWITCH: snprintf(out, len, "0 or 1"); break;
    case SET_CHOICE: {
        size_t at = (size_t)snprintf(out, len, "one of ");
        for (const char *c = s->choices; *c && at < len; c++) out[at++] = *c == '|' ? ',' : *c;
        if (at < len) out[at] = 0; else out[len - 1] = 0;
        break;
    }
    case SET_TEXT: snprintf(out, len, "text"); break;
    }
}

static int refuse(const WpSetting *s, const char *v, char *err, size_t errlen) {
    char want[160];
    expects(s, want, sizeof want);
    snprintf(err, errlen, "%s=%s: expected %s (%s)", s->name, v, want, s->help);
    return -1;
}

static int parse_number(const WpSetting *s, double *out, int *given, char *err, size_t errlen) {
    const char *v = raw(s, given);
    *out = 0;
    if (!v || !*v) return 0;   /* no default: "decided by the program" */
    char *end;
    errno = 0;
    switch (s->kind) {
    case SET_SECONDS: {
        double t = strtod(v, &end);
        if (errno || end == v || *end || !(t >= s->lo) || !(t <= s->hi)) return refuse(s, v, err, errlen);
        *out = t;
        return 0;
    }
    case SET_COUNT: {
        if (*v == '-' || *v == '+' || *v == ' ') return refuse(s, v, err, errlen);
        unsigned long long n = strtoull(v, &end, 10);
        if (errno || end == v || *end || (double)n < s->lo || (double)n > s->hi) return refuse(s, v, err, errlen);
        *out = (double)n;
        return 0;
    }
    case SET_SWITCH:
        if (strcmp(v, "0") && strcmp(v, "1")) return refuse(s, v, err, errlen);
        *out = v[0] == '1';
        return 0;
    case SET_CHOICE: {
        size_t n = strlen(v);
        int k = 0;
        for (const char *c = s->choices; ; k++) {
            const char *bar = strchr(c, '|');
            size_t len = bar ? (size_t)(bar - c) : strlen(c);
            if (len == n && !strncmp(c, v, n)) { *out = k; return 0; }
            if (!bar) break;
            c = bar + 1;
        }
        return refuse(s, v, err, errlen);
    }
    case SET_TEXT:
        return refuse(s, v, err, errlen);   /* a text is read with wp_setting_text */
    }
    return refuse(s, v, err, errlen);
}

/* errno as the caller had it: a setting read between a failed call and its message (the save's
 * test hook, say) must not change what the message says. */
int wp_setting_number(const WpSetting *s, double *out, int *given, char *err, size_t errlen) {
    int saved = errno, rc = parse_number(s, out, given, err, errlen);
    errno = saved;
    return rc;
}

const char *wp_setting_text(const WpSetting *s, int *given) {
    const char *v = raw(s, given);
    return v && *v ? v : NULL;
}

static const WpSetting *row(const WpSetting *table, int n, const char *name) {
    const WpSetting *s = wp_setting_find(table, n, name);
    if (!s) {
        fprintf(stderr, "internal error: %s is in no table of settings (runtime/common/settings.c, generator/util/settings.c)\n", name);
        abort();
    }
    return s;
}

double wp_settings_number(const WpSetting *table, int n, const char *name, const char *prog) {
    char err[512];
    double v;
    if (wp_setting_number(row(table, n, name), &v, NULL, err, sizeof err)) {
        fprintf(stderr, "%s%s\n", prog, err);
        exit(2);
    }
    return v;
}

const char *wp_settings_text(const WpSetting *table, int n, const char *name) { return wp_setting_text(row(table, n, name), NULL); }

int wp_settings_given(const WpSetting *table, int n, const char *name) {
    int given;
    raw(row(table, n, name), &given);
    return given;
}

void wp_settings_print(FILE *f, const WpSetting *table, int n) {
    for (int i = 0; i < n; i++) {
        const WpSetting *s = &table[i];
        char want[160];
        expects(s, want, sizeof want);
        fprintf(f, "  %-24s %s; %s", s->name, s->help, want);
        if (s->dflt && *s->dflt) fprintf(f, ", default %s", s->dflt);
        fprintf(f, "\n");
    }
}
