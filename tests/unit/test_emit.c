/* Tests of wpgen emit: small plans built by hand through the plan_* builder and verified, then
 * written out: the same plan gives byte-identical directories, every generated file starts with
 * the generated-by line, every operation is one call, no line is 120 characters or longer, the
 * plan's summary is in README only, the C compiles against the runtime's headers, and a failing
 * emit (missing parent, someone else's directory, a write that fails half way) leaves nothing
 * behind and DIR as it was. Plans made by strategies (through the Lua bridge) say for every
 * operation the strategy line that added it. Runs from the repository root (WPGEN_HOME is set to
 * it when unset). WP_EMIT_BENCH=1 also times a plan of 1,024 ranks of about 400 operations;
 * WP_EMIT_KEEP=1 keeps what was written, to look at. */
#include <dirent.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <jansson.h>
#include "check.h"
#include "emit/emit.h"
#include "ir/plan.h"
#include "lua/bridge.h"

static char base[] = "/tmp/wp-test-emit-XXXXXX";
static char err[4096];

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* CPU seconds of this process: wall time on a shared machine says more about the neighbours. */
static double cpu(void) {
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void sh(char *cmd, size_t len, const char *fmt, const char *a, const char *b) {
    if (snprintf(cmd, len, fmt, a, b) >= (int)len) { fprintf(stderr, "command too long\n"); exit(1); }
}

/* dir/name into out (paths here are short: base is a /tmp name). */
static void join(char *out, size_t len, const char *dir, const char *name) {
    sh(out, len, "%s/%s", dir, name);
}

/* ---- inputs ---- */

static int load_topology(int nnodes, int per_node, Topology *t) {
    char path[512];
    snprintf(path, sizeof path, "%s/topo-%dx%d.json", base, nnodes, per_node);
    FILE *f = fopen(path, "w");
    if (!f) { perror(path); exit(1); }
    fprintf(f, "{ \"version\": 1, \"name\": \"test-%dx%d\",\n"
               "  \"device_types\": { \"cpu\": { \"peak_tflops_fp32\": 0.05, \"mem_gb\": 4, \"hbm_GBps\": 10 } },\n"
               "  \"nodes\": [", nnodes, per_node);
    for (int n = 0; n < nnodes; n++)
        fprintf(f, "%s\n    { \"name\": \"n%d\", \"devices\": %d, \"type\": \"cpu\", "
                   "\"intra\": { \"type\": \"SHM\", \"bw_GBps\": 10, \"lat_us\": 1 } }", n ? "," : "", n, per_node);
    fprintf(f, " ]%s }\n", nnodes > 1 ? ",\n  \"network\": { \"type\": \"NET\", \"bw_GBps\": 1.25, \"lat_us\": 20 }" : "");
    if (fclose(f)) { perror(path); exit(1); }
    int rc = topology_load(path, t, err, sizeof err);
    CHECK(rc == 0, "%s", err);
    return rc;
}

static WpConfig tiny_model(void) {
    WpConfig m = { .hidden = 64, .layers = 2, .heads = 4, .kv_heads = 2, .head_dim = 16, .ffn = 176, .vocab = 256,
                   .eps = 1e-5f, .rope_theta = 10000.0f, .tied = 0, .seq = 16, .mbs = 1 };
    return m;
}

static int build_failed;

static int buf(Plan *p, int r, const char *name, BufKind kind, int chunk, int master) {
    int b = plan_add_buf(p, r, name, kind, chunk, master, 0, 1, err, sizeof err);
    if (b < 0) { build_failed = 1; fprintf(stderr, "plan_add_buf: %s\n", err); }
    return b;
}

static void op(Plan *p, int r, int turn, OpKind kind, OpWhat what, int b, int b2, int chunk, int mb, int peer, int group) {
    Op o = { .kind = (uint8_t)kind, .what = (uint8_t)what, .buf = (int16_t)b, .buf2 = (int16_t)b2, .chunk = chunk,
             .mb = mb, .peer = peer, .group = group };
    if (plan_add_op(p, r, turn, &o, err, sizeof err)) { build_failed = 1; fprintf(stderr, "plan_add_op: %s\n", err); }
}

#define B(p, r, name) plan_find_buf(p, r, name)

/* Two ranks, two one-layer chunks: rank 0 owns chunk 0 and sends it over; rank 1 broadcasts
 * chunk 1 to the pair. Each rank takes its micro-batch forward and backward through both chunks,
 * the gradient of the chunk it does not own goes to the owner, who adds it and runs AdamW. The
 * receive buffers are called R (the step's parameter) and int, which the emitter must rename. */
static Plan *hand_plan(const Topology *t) {
    WpConfig m = tiny_model();
    Plan *p = plan_new(t, &m, "hand", 2);
    p->micro_batches = 1;
    p->total_mbs = 2;
    int layers[] = { 1, 1 };
    if (plan_set_chunks(p, layers, 2, err, sizeof err) || plan_add_owner(p, 0, 0, err, sizeof err) ||
        plan_add_owner(p, 1, 1, err, sizeof err)) build_failed = 1;
    int pair[] = { 0, 1 };
    int g = plan_add_group(p, pair, 2, err, sizeof err);
    buf(p, 0, "M0", BUF_W, 0, 1); buf(p, 0, "W1", BUF_W, 1, 0); buf(p, 0, "D0", BUF_D, 0, 0);
    buf(p, 0, "D1", BUF_D, 1, 0); buf(p, 0, "R", BUF_D, 0, 0);
    buf(p, 1, "M1", BUF_W, 1, 1); buf(p, 1, "W0", BUF_W, 0, 0); buf(p, 1, "D1", BUF_D, 1, 0);
    buf(p, 1, "D0", BUF_D, 0, 0); buf(p, 1, "int", BUF_D, 1, 0);
    /* rank 0 */
    op(p, 0, 0, OP_SEND, WHAT_W, B(p, 0, "M0"), -1, -1, -1, 1, -1);
    op(p, 0, 0, OP_BCAST, WHAT_NONE, B(p, 0, "W1"), -1, -1, -1, 1, g);
    op(p, 0, 0, OP_FWD, WHAT_NONE, B(p, 0, "M0"), -1, 0, 0, -1, -1);
    op(p, 0, 1, OP_FWD, WHAT_NONE, B(p, 0, "W1"), -1, 1, 0, -1, -1);
    op(p, 0, 2, OP_BWD, WHAT_NONE, B(p, 0, "W1"), B(p, 0, "D1"), 1, 0, -1, -1);
    op(p, 0, 3, OP_BWD, WHAT_NONE, B(p, 0, "M0"), B(p, 0, "D0"), 0, 0, -1, -1);
    op(p, 0, 3, OP_SEND, WHAT_D, B(p, 0, "D1"), -1, -1, -1, 1, -1);
    op(p, 0, 3, OP_FREE, WHAT_NONE, B(p, 0, "W1"), -1, -1, -1, -1, -1);
    op(p, 0, 5, OP_RECV, WHAT_D, B(p, 0, "R"), -1, -1, -1, 1, -1);
    op(p, 0, 5, OP_ACC, WHAT_NONE, B(p, 0, "D0"), B(p, 0, "R"), -1, -1, -1, -1);
    op(p, 0, 5, OP_OPT, WHAT_NONE, B(p, 0, "M0"), B(p, 0, "D0"), 0, -1, -1, -1);
    /* rank 1 */
    op(p, 1, 0, OP_BCAST, WHAT_NONE, B(p, 1, "M1"), -1, -1, -1, 1, g);
    op(p, 1, 0, OP_RECV, WHAT_W, B(p, 1, "W0"), -1, -1, -1, 0, -1);
    op(p, 1, 1, OP_FWD, WHAT_NONE, B(p, 1, "W0"), -1, 0, 1, -1, -1);
    op(p, 1, 2, OP_FWD, WHAT_NONE, B(p, 1, "M1"), -1, 1, 1, -1, -1);
    op(p, 1, 3, OP_BWD, WHAT_NONE, B(p, 1, "M1"), B(p, 1, "D1"), 1, 1, -1, -1);
    op(p, 1, 3, OP_RECV, WHAT_D, B(p, 1, "int"), -1, -1, -1, 0, -1);
    op(p, 1, 3, OP_ACC, WHAT_NONE, B(p, 1, "D1"), B(p, 1, "int"), -1, -1, -1, -1);
    op(p, 1, 3, OP_OPT, WHAT_NONE, B(p, 1, "M1"), B(p, 1, "D1"), 1, -1, -1, -1);
    op(p, 1, 4, OP_BWD, WHAT_NONE, B(p, 1, "W0"), B(p, 1, "D0"), 0, 1, -1, -1);
    op(p, 1, 5, OP_SEND, WHAT_D, B(p, 1, "D0"), -1, -1, -1, 0, -1);
    op(p, 1, 5, OP_FREE, WHAT_NONE, B(p, 1, "W0"), -1, -1, -1, -1, -1);
    return p;
}

/* Replicas of the pair above: rank 2k owns chunk 0, 2k+1 chunk 1; the pair swaps weights once,
 * runs n micro-batches each (one per turn), swaps gradients, and when there are several replicas
 * all-reduces each chunk's gradient over its owners before AdamW. 4n + 8 operations per rank. */
static Plan *replicated_plan(const Topology *t, int replicas, int n) {
    WpConfig m = tiny_model();
    int P = 2 * replicas;
    Plan *p = plan_new(t, &m, "pairs", P);
    p->replicas = replicas;
    p->micro_batches = n;
    p->total_mbs = P * n;
    int layers[] = { 1, 1 };
    if (plan_set_chunks(p, layers, 2, err, sizeof err)) build_failed = 1;
    int *members[2] = { malloc((size_t)replicas * sizeof(int)), malloc((size_t)replicas * sizeof(int)) };
    for (int k = 0; k < replicas; k++) {
        members[0][k] = 2 * k;
        members[1][k] = 2 * k + 1;
        p->ranks[2 * k].replica = p->ranks[2 * k + 1].replica = k;
        p->ranks[2 * k].stage = 0;
        p->ranks[2 * k + 1].stage = 1;
        if (plan_add_owner(p, 0, 2 * k, err, sizeof err) || plan_add_owner(p, 1, 2 * k + 1, err, sizeof err)) build_failed = 1;
    }
    int groups[2] = { -1, -1 };
    if (replicas > 1)
        for (int c = 0; c < 2; c++) groups[c] = plan_add_group(p, members[c], replicas, err, sizeof err);
    free(members[0]);
    free(members[1]);
    for (int r = 0; r < P; r++) {
        int own = r % 2, other = 1 - own, peer = r ^ 1;
        char M[8], W[8], D[8], G[8], R[8];
        snprintf(M, 8, "M%d", own); snprintf(W, 8, "W%d", other); snprintf(D, 8, "D%d", own);
        snprintf(G, 8, "G%d", other); snprintf(R, 8, "R%d", own);
        int bm = buf(p, r, M, BUF_W, own, 1), bw = buf(p, r, W, BUF_W, other, 0), bd = buf(p, r, D, BUF_D, own, 0);
        int bg = buf(p, r, G, BUF_D, other, 0), br = buf(p, r, R, BUF_D, own, 0);
        int w0 = own == 0 ? bm : bw, w1 = own == 1 ? bm : bw, d0 = own == 0 ? bd : bg, d1 = own == 1 ? bd : bg;
        op(p, r, 0, OP_SEND, WHAT_W, bm, -1, -1, -1, peer, -1);
        op(p, r, 0, OP_RECV, WHAT_W, bw, -1, -1, -1, peer, -1);
        for (int j = 0; j < n; j++) {
            int mb = r * n + j;
            op(p, r, 1 + j, OP_FWD, WHAT_NONE, w0, -1, 0, mb, -1, -1);
            op(p, r, 1 + j, OP_FWD, WHAT_NONE, w1, -1, 1, mb, -1, -1);
            op(p, r, 1 + j, OP_BWD, WHAT_NONE, w1, d1, 1, mb, -1, -1);
            op(p, r, 1 + j, OP_BWD, WHAT_NONE, w0, d0, 0, mb, -1, -1);
        }
        op(p, r, n + 1, OP_SEND, WHAT_D, bg, -1, -1, -1, peer, -1);
        op(p, r, n + 1, OP_RECV, WHAT_D, br, -1, -1, -1, peer, -1);
        op(p, r, n + 1, OP_ACC, WHAT_NONE, bd, br, -1, -1, -1, -1);
        op(p, r, n + 1, OP_FREE, WHAT_NONE, bw, -1, -1, -1, -1, -1);
        int t = n + 1;
        if (replicas > 1) op(p, r, ++t, OP_ALLREDUCE, WHAT_NONE, bd, -1, -1, -1, -1, groups[own]);
        op(p, r, t, OP_OPT, WHAT_NONE, bm, bd, own, -1, -1, -1);
    }
    return p;
}

/* Activation passing, 2 ranks: rank 0 runs chunk 0 (from a copy of its master), rank 1 chunk 1
 * with the backward split into BWD_B and BWD_W; inputs and their gradients travel. */
static Plan *activation_plan(const Topology *t) {
    WpConfig m = tiny_model();
    Plan *p = plan_new(t, &m, "acts", 2);
    p->micro_batches = 1;
    p->total_mbs = 2;
    int layers[] = { 1, 1 };
    if (plan_set_chunks(p, layers, 2, err, sizeof err) || plan_add_owner(p, 0, 0, err, sizeof err) ||
        plan_add_owner(p, 1, 1, err, sizeof err)) build_failed = 1;
    int m0 = buf(p, 0, "M0", BUF_W, 0, 1), w = buf(p, 0, "Wc", BUF_W, 0, 0), d0 = buf(p, 0, "D0", BUF_D, 0, 0);
    int m1 = buf(p, 1, "M1", BUF_W, 1, 1), d1 = buf(p, 1, "D1", BUF_D, 1, 0);
    op(p, 0, 0, OP_COPY, WHAT_NONE, w, m0, -1, -1, -1, -1);
    op(p, 0, 1, OP_FWD, WHAT_NONE, w, -1, 0, 0, -1, -1);
    op(p, 0, 2, OP_SEND, WHAT_A, -1, -1, 1, 0, 1, -1);
    op(p, 0, 2, OP_FWD, WHAT_NONE, w, -1, 0, 1, -1, -1);
    op(p, 0, 3, OP_SEND, WHAT_A, -1, -1, 1, 1, 1, -1);
    op(p, 0, 6, OP_RECV, WHAT_G, -1, -1, 1, 0, 1, -1);
    op(p, 0, 7, OP_BWD, WHAT_NONE, w, d0, 0, 0, -1, -1);
    op(p, 0, 7, OP_RECV, WHAT_G, -1, -1, 1, 1, 1, -1);
    op(p, 0, 8, OP_BWD, WHAT_NONE, w, d0, 0, 1, -1, -1);
    op(p, 0, 8, OP_OPT, WHAT_NONE, m0, d0, 0, -1, -1, -1);
    op(p, 0, 8, OP_FREE, WHAT_NONE, w, -1, -1, -1, -1, -1);
    op(p, 1, 2, OP_RECV, WHAT_A, -1, -1, 1, 0, 0, -1);
    op(p, 1, 3, OP_FWD, WHAT_NONE, m1, -1, 1, 0, -1, -1);
    op(p, 1, 3, OP_RECV, WHAT_A, -1, -1, 1, 1, 0, -1);
    op(p, 1, 4, OP_FWD, WHAT_NONE, m1, -1, 1, 1, -1, -1);
    op(p, 1, 4, OP_BWD_B, WHAT_NONE, m1, -1, 1, 0, -1, -1);
    op(p, 1, 5, OP_SEND, WHAT_G, -1, -1, 1, 0, 0, -1);
    op(p, 1, 5, OP_BWD_B, WHAT_NONE, m1, -1, 1, 1, -1, -1);
    op(p, 1, 5, OP_BWD_W, WHAT_NONE, -1, d1, 1, 0, -1, -1);
    op(p, 1, 6, OP_SEND, WHAT_G, -1, -1, 1, 1, 0, -1);
    op(p, 1, 6, OP_BWD_W, WHAT_NONE, -1, d1, 1, 1, -1, -1);
    op(p, 1, 6, OP_OPT, WHAT_NONE, m1, d1, 1, -1, -1, -1);
    return p;
}

/* Sharded and gathered, 2 ranks: chunk 0's master is cut in two shards (all-gather, then
 * reduce-scatter of its gradient); chunk 1 lives whole on rank 1 (broadcast, then reduce). */
static Plan *sharded_plan(const Topology *t) {
    WpConfig m = tiny_model();
    Plan *p = plan_new(t, &m, "shards", 2);
    p->micro_batches = 1;
    p->total_mbs = 2;
    int layers[] = { 1, 1 };
    if (plan_set_chunks(p, layers, 2, err, sizeof err) || plan_add_owner(p, 0, 0, err, sizeof err) ||
        plan_add_owner(p, 0, 1, err, sizeof err) || plan_add_owner(p, 1, 1, err, sizeof err)) build_failed = 1;
    int pair[] = { 0, 1 };
    int g = plan_add_group(p, pair, 2, err, sizeof err);
    for (int r = 0; r < 2; r++) {
        int s0 = plan_add_buf(p, r, "S0", BUF_W, 0, 1, r, 2, err, sizeof err);
        int e0 = plan_add_buf(p, r, "E0", BUF_D, 0, 0, r, 2, err, sizeof err);
        if (s0 < 0 || e0 < 0) build_failed = 1;
        int w0 = buf(p, r, "W0", BUF_W, 0, 0), d0 = buf(p, r, "D0", BUF_D, 0, 0);
        int w1 = r == 1 ? buf(p, r, "M1", BUF_W, 1, 1) : buf(p, r, "W1", BUF_W, 1, 0), d1 = buf(p, r, "D1", BUF_D, 1, 0);
        op(p, r, 0, OP_ALLGATHER, WHAT_NONE, s0, w0, -1, -1, -1, g);
        op(p, r, 0, OP_BCAST, WHAT_NONE, w1, -1, -1, -1, 1, g);
        op(p, r, 1, OP_FWD, WHAT_NONE, w0, -1, 0, r, -1, -1);
        op(p, r, 2, OP_FWD, WHAT_NONE, w1, -1, 1, r, -1, -1);
        op(p, r, 3, OP_BWD, WHAT_NONE, w1, d1, 1, r, -1, -1);
        op(p, r, 4, OP_REDUCE, WHAT_NONE, d1, -1, -1, -1, 1, g);
        op(p, r, 4, OP_BWD, WHAT_NONE, w0, d0, 0, r, -1, -1);
        if (r == 1) op(p, r, 4, OP_OPT, WHAT_NONE, w1, d1, 1, -1, -1, -1);
        op(p, r, 5, OP_REDUCE_SCATTER, WHAT_NONE, d0, e0, -1, -1, -1, g);
        op(p, r, 5, OP_OPT, WHAT_NONE, s0, e0, 0, -1, -1, -1);
        op(p, r, 5, OP_FREE, WHAT_NONE, w0, -1, -1, -1, -1, -1);
        if (r == 0) op(p, r, 5, OP_FREE, WHAT_NONE, w1, -1, -1, -1, -1, -1);
    }
    return p;
}

static int verify(Plan *p) {
    int rc = build_failed ? -1 : plan_verify(p, err, sizeof err);
    CHECK(rc == 0, "%s: %s", p->strategy, build_failed ? "the builder refused an operation" : err);
    return rc;
}

static int emit(const Plan *p, const char *dir) {
    double intra = 0, inter = 0;
    if (p->verified) plan_traffic(p, &intra, &inter);   /* it needs the verifier's notes */
    EmitInfo info = { .model_name = "tiny-test", .topo_name = p->topo->name, .backend = "cpu",
                      .bytes_intra = intra, .bytes_inter = inter };
    return emit_plan(p, &info, dir, err, sizeof err);
}

/* ---- looking at what was written ---- */

static char *slurp(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    size_t cap = 1 << 16, n = 0, k;
    char *s = malloc(cap + 1);
    while ((k = fread(s + n, 1, cap - n, f)) > 0) {
        n += k;
        if (n == cap) s = realloc(s, (cap *= 2) + 1);
    }
    fclose(f);
    s[n] = 0;
    if (len) *len = n;
    return s;
}

static int first_line_is(const char *path, const char *want) {
    char *s = slurp(path, NULL);
    int ok = s && !strncmp(s, want, strlen(want)) && s[strlen(want)] == '\n';
    if (!ok) fprintf(stderr, "%s: first line is \"%.*s\"\n", path, s ? (int)strcspn(s, "\n") : 0, s ? s : "(missing)");
    free(s);
    return ok;
}

/* Entries of base whose name contains what (leftover DIR.tmp-PID or DIR.old-PID). */
static int leftovers(const char *what) {
    DIR *d = opendir(base);
    int n = 0;
    struct dirent *e;
    while (d && (e = readdir(d)))
        if (strstr(e->d_name, what)) { n++; fprintf(stderr, "left behind: %s/%s\n", base, e->d_name); }
    if (d) closedir(d);
    return n;
}

static int count(const char *s, const char *needle) {
    int n = 0;
    for (const char *q = s; (q = strstr(q, needle)); q += strlen(needle)) n++;
    return n;
}

/* The length of the longest line of a file (-1: cannot read it). */
static int longest_line(const char *path) {
    size_t len;
    char *s = slurp(path, &len);
    if (!s) return -1;
    int longest = 0, n = 0;
    for (size_t i = 0; i < len; i++) {
        if (s[i] == '\n') n = 0;
        else if (++n > longest) longest = n;
    }
    free(s);
    return longest;
}

static void check_rank_sources(const Plan *p, const char *dir, const char *first_c) {
    int width = 1, busy_total = 0;
    for (int x = p->nranks - 1; x >= 10; x /= 10) width++;
    if (width < 3) width = 3;
    for (int r = 0; r < p->nranks; r++) {
        char path[600], name[64];
        if (snprintf(name, sizeof name, "rank_%0*d.c", width, r) >= (int)sizeof name) continue;
        join(path, sizeof path, dir, name);
        CHECK(first_line_is(path, first_c), "%s", path);
        char *s = slurp(path, NULL);
        CHECK(s != NULL, "%s missing", path);
        if (!s) continue;
        /* Every operation is one call "    wp_xxx(R, ...);" apart from the four turn calls. */
        int calls = count(s, "\n    wp_") - count(s, "\n    wp_turn_");
        CHECK(calls == p->ranks[r].nops, "%s: %d calls for %d operations", path, calls, p->ranks[r].nops);
        CHECK(longest_line(path) < 120, "%s: a line of %d characters", path, longest_line(path));
        CHECK(!strstr(s, "strategy    "), "%s repeats the plan's summary", path);
        int busy = 0;
        for (int t = 0; t < p->nturns; t++) busy += p->ranks[r].turn_start[t + 1] > p->ranks[r].turn_start[t];
        busy_total += busy;
        CHECK(count(s, "wp_turn_begin(R, ") == busy && count(s, "wp_turn_end(R);") == busy,
              "%s: %d turns begun for %d busy turns", path, count(s, "wp_turn_begin(R, "), busy);
        char fn[80];
        if (snprintf(fn, sizeof fn, "void step_rank_%0*d(WpRank *R)", width, r) >= (int)sizeof fn) continue;
        CHECK(strstr(s, fn) != NULL, "%s: no %s", path, fn);
        free(s);
    }
    CHECK(busy_total > 0, "no busy turns at all");
}

static void check_dir(const Plan *p, const char *dir) {
    char want_c[160], want_hash[160], path[600], cmd[2048];
    unsigned long long h = (unsigned long long)plan_hash(p);
    snprintf(want_c, sizeof want_c, "/* Code generated by wpgen %s from plan %016llx. DO NOT EDIT. */", WPGEN_VERSION, h);
    snprintf(want_hash, sizeof want_hash, "# Code generated by wpgen %s from plan %016llx. DO NOT EDIT.", WPGEN_VERSION, h);
    const char *c_files[] = { "plan.h", "plan_desc.c", "main.c" };
    const char *hash_files[] = { "rankfile", "schedule.txt", "README" };
    for (int i = 0; i < 3; i++) {
        snprintf(path, sizeof path, "%s/%s", dir, c_files[i]);
        CHECK(first_line_is(path, want_c), "%s", path);
    }
    for (int i = 0; i < 3; i++) {
        snprintf(path, sizeof path, "%s/%s", dir, hash_files[i]);
        CHECK(first_line_is(path, want_hash), "%s", path);
    }
    /* the Makefile names no plan: the same file for every plan on the same backends, so that
     * emitting again keeps what make built (generator/emit/manifest.c, manifest_carry_build) */
    snprintf(want_hash, sizeof want_hash, "# Code generated by wpgen %s. DO NOT EDIT.", WPGEN_VERSION);
    snprintf(path, sizeof path, "%s/Makefile", dir);
    CHECK(first_line_is(path, want_hash), "%s", path);
    check_rank_sources(p, dir, want_c);

    /* plan.json: valid JSON with generated_by, the hash, and one entry per rank. */
    snprintf(path, sizeof path, "%s/plan.json", dir);
    json_error_t jerr;
    json_t *root = json_load_file(path, 0, &jerr);
    CHECK(root != NULL, "%s:%d: %s", path, jerr.line, jerr.text);
    CHECK(json_array_size(json_object_get(root, "ranks")) == (size_t)p->nranks, "%s: ranks", path);
    CHECK(json_integer_value(json_object_get(root, "turns")) == p->nturns, "%s: turns", path);
    json_decref(root);
    char *json = slurp(path, NULL);
    char hash[64];
    snprintf(hash, sizeof hash, "\"plan_hash\": \"%016llx\"", h);
    CHECK(json && strstr(json, "\"generated_by\": \"wpgen " WPGEN_VERSION "\"") && strstr(json, hash), "%s: head", path);
    CHECK(json && count(json, "{\"rank\":") == p->nranks, "%s: %d ranks", path, json ? count(json, "{\"rank\":") : -1);
    free(json);

    /* One rankfile line per rank, on its node and slot. */
    snprintf(path, sizeof path, "%s/rankfile", dir);
    char *rf = slurp(path, NULL);
    for (int r = 0; rf && r < p->nranks; r++) {
        const Node *nd = &p->topo->nodes[p->ranks[r].node];
        char line[128];
        snprintf(line, sizeof line, "\nrank %d=%s slot=%d\n", r, nd->name, p->ranks[r].device - nd->first_device);
        CHECK(strstr(rf, line) != NULL, "rankfile: no \"%s\"", line + 1);
    }
    free(rf);

    /* Every line of the sources, the README and the rankfile is under 120 characters (schedule.txt
     * and plan.json are data: one line per turn, per rank; the Makefile's template is not the
     * emitter's); the summary is in README only, and the other files point there. */
    const char *readable[] = { "plan.h", "plan_desc.c", "main.c", "README", "rankfile" };
    for (int i = 0; i < 5; i++) {
        snprintf(path, sizeof path, "%s/%s", dir, readable[i]);
        CHECK(longest_line(path) < 120, "%s: a line of %d characters", path, longest_line(path));
    }
    char strategy_line[200];
    snprintf(strategy_line, sizeof strategy_line, "strategy    %s\n", p->strategy);
    int copies = 0;
    const char *all[] = { "plan.h", "plan_desc.c", "main.c", "README", "rankfile", "Makefile", "schedule.txt" };
    for (int i = 0; i < 7; i++) {
        snprintf(path, sizeof path, "%s/%s", dir, all[i]);
        char *text = slurp(path, NULL);
        copies += text && strstr(text, strategy_line) != NULL;
        CHECK(i == 3 || (text && strstr(text, "at a glance (strategy, cluster, model, chunks, traffic, prediction): README")),
              "%s does not point to the summary in README", path);
        free(text);
    }
    CHECK(copies == 1, "the plan's summary is in %d files (README only, expected)", copies);

    /* Self-contained: the runtime's headers are there, and no absolute path of this machine. */
    snprintf(path, sizeof path, "%s/runtime/common/step.h", dir);
    CHECK(access(path, R_OK) == 0, "%s missing", path);
    snprintf(cmd, sizeof cmd, "grep -rlF --exclude=job.sbatch -e '%s' -e '%s' '%s'", wpgen_home(), base, dir);
    CHECK(system(cmd) != 0, "an absolute path in %s (above)", dir);
    /* but job.sbatch's wpgen= and emit_cwd=, which name this machine's wpgen and where emit ran
     * for the script's re-plan after a node is lost (WPGEN_BIN overrides) */
    snprintf(cmd, sizeof cmd, "grep -v '^wpgen=\\|^emit_cwd=' '%s/job.sbatch' | grep -F -e '%s' -e '%s'", dir, wpgen_home(), base);
    CHECK(system(cmd) != 0, "an absolute path in %s/job.sbatch beyond wpgen= and emit_cwd= (above)", dir);

    /* The emitted C compiles against the runtime's headers, warning-free. */
    snprintf(cmd, sizeof cmd, "gcc -std=c11 -Wall -Wextra -Werror -fsyntax-only -I '%s' -I '%s/runtime' '%s'/*.c", dir, dir, dir);
    CHECK(system(cmd) == 0, "%s", cmd);
}

/* ---- the tests ---- */

static void test_hand_plan(void) {
    Topology t;
    if (load_topology(1, 2, &t)) return;
    Plan *p = hand_plan(&t);
    if (verify(p)) { plan_free(p); topology_free(&t); return; }
    CHECK(plan_hash(p) == plan_hash(p), "hash is not stable");

    char a[512], b[512], c[512], cmd[2048];
    snprintf(a, sizeof a, "%s/a", base);
    snprintf(b, sizeof b, "%s/b/", base);   /* a trailing slash is the same directory */
    CHECK(emit(p, a) == 0, "emit a: %s", err);
    CHECK(emit(p, b) == 0, "emit b: %s", err);
    b[strlen(b) - 1] = 0;
    sh(cmd, sizeof cmd, "diff -r '%s' '%s'", a, b);
    CHECK(system(cmd) == 0, "two emits of one plan differ");
    check_dir(p, a);

    /* What a reader sees: the calls and the why of a few operations. */
    join(c, sizeof c, a, "rank_001.c");
    char *s = slurp(c, NULL);
    CHECK(s && strstr(s, "wp_recv(R, W0, CHUNK(0), WHOLE, FROM(0));") && strstr(s, "/* W0 for FWD at turn 1 */"),
          "rank_001.c: the receive of W0");
    CHECK(s && strstr(s, "wp_bwd(R, CHUNK(1), MB(1), M1, D1, WRITE);"), "rank_001.c: the first backward into D1");
    CHECK(s && strstr(s, "wp_bwd(R, CHUNK(0), MB(1), W0, D0, WRITE); ") && strstr(s, " /* W0 from rank 0 at turn 0 */"),
          "rank_001.c: BWD provenance");
    CHECK(s && strstr(s, "wp_opt(R, CHUNK(1), M1, D1);") && strstr(s, "AdamW on this rank's chunk 1"), "rank_001.c: OPT");
    CHECK(s && strstr(s, "    B_int,") && strstr(s, "wp_acc(R, D1, B_int, CHUNK(1), ADD);"), "rank_001.c: buffer int is not B_int");
    CHECK(s && strstr(s, "wp_fwd(R, CHUNK(0), MB(1), W0);") && strstr(s, "/* W0 from rank 0 at turn 0 */"),
          "rank_001.c: FWD provenance");
    CHECK(s && strstr(s, "wp_send(R, D0, CHUNK(0), WHOLE, TO(0));") && strstr(s, "/* D0 passed on, not kept */"),
          "rank_001.c: the gradient passed on");
    free(s);
    join(c, sizeof c, a, "rank_000.c");
    s = slurp(c, NULL);
    CHECK(s && strstr(s, "/* turn 4: nothing to do */"), "rank_000.c: the idle turn 4 is not mentioned");
    CHECK(s && strstr(s, "wp_bcast(R, W1, CHUNK(1), WHOLE, GROUP(0), ROOT(1));") && strstr(s, "W1 bcast by rank 1 at turn 0 + loss"),
          "rank_000.c: BCAST");
    free(s);

    /* Re-emitting over a previous output replaces all of it and carries over what make built
     * (train as the Makefile builds it: an executable; anything else of that name is refused,
     * and kept). */
    join(c, sizeof c, a, "train");
    FILE *f = fopen(c, "w");
    CHECK(f && fclose(f) == 0, "cannot write %s", c);
    CHECK(emit(p, a) != 0 && strstr(err, "is not the program the emitted Makefile builds"), "re-emit over a train of the user's: %s", err);
    CHECK(access(c, F_OK) == 0, "re-emit removed the user's %s", c);
    f = fopen(c, "w");
    CHECK(f && fputs("\177ELF\2\1\1", f) >= 0 && fclose(f) == 0, "cannot write %s", c);
    CHECK(emit(p, a) == 0, "re-emit: %s", err);
    CHECK(access(c, F_OK) == 0, "re-emit dropped make's %s", c);
    CHECK(unlink(c) == 0, "unlink %s", c);
    sh(cmd, sizeof cmd, "diff -r '%s' '%s'", a, b);
    CHECK(system(cmd) == 0, "re-emit differs from the first emit");

    /* Failures leave nothing behind. A missing parent: */
    snprintf(c, sizeof c, "%s/no/such/dir", base);
    CHECK(emit(p, c) != 0 && strstr(err, "no/such/dir"), "emit into a missing parent: %s", err);
    snprintf(c, sizeof c, "%s/no", base);
    CHECK(access(c, F_OK) != 0, "%s was created", c);
    /* Someone else's directory, and a regular file: */
    snprintf(c, sizeof c, "%s/mine", base);
    CHECK(mkdir(c, 0777) == 0, "mkdir %s", c);
    snprintf(cmd, sizeof cmd, "%s/notes.txt", c);
    f = fopen(cmd, "w");
    CHECK(f && fputs("mine\n", f) >= 0 && fclose(f) == 0, "cannot write %s", cmd);
    CHECK(emit(p, c) != 0 && strstr(err, "refusing"), "emit over a foreign directory: %s", err);
    CHECK(access(cmd, F_OK) == 0, "%s is gone", cmd);
    CHECK(emit(p, cmd) != 0 && strstr(err, "not a directory"), "emit over a file: %s", err);
    /* A write that fails half-way (a file size limit): the earlier output stays as it was. */
    struct rlimit old, small;
    signal(SIGXFSZ, SIG_IGN);
    CHECK(getrlimit(RLIMIT_FSIZE, &old) == 0, "getrlimit");
    small = old;
    small.rlim_cur = 4096;   /* the soft limit only, so that it can go back up */
    CHECK(setrlimit(RLIMIT_FSIZE, &small) == 0, "setrlimit");
    int rc = emit(p, a);
    CHECK(setrlimit(RLIMIT_FSIZE, &old) == 0, "setrlimit back");
    CHECK(rc != 0, "emit with a 4 KiB file size limit succeeded");
    sh(cmd, sizeof cmd, "diff -r '%s' '%s'", a, b);
    CHECK(system(cmd) == 0, "a failed emit changed %s", a);
    /* An unverified plan is refused. */
    Plan *q = hand_plan(&t);
    CHECK(emit(q, c) != 0 && strstr(err, "verified"), "emit of an unverified plan: %s", err);
    plan_free(q);
    CHECK(leftovers(".tmp-") == 0 && leftovers(".old-") == 0, "temporary directories left behind");

    plan_free(p);
    topology_free(&t);
}

static void test_replicas(void) {
    Topology t;
    if (load_topology(2, 2, &t)) return;
    Plan *p = replicated_plan(&t, 2, 3);
    if (verify(p) == 0) {
        /* Ranks are rendered by several threads: any number of them writes the same bytes. */
        char a[512], b[512], cmd[2048];
        join(a, sizeof a, base, "pairs");
        join(b, sizeof b, base, "pairs-1");
        setenv("WPGEN_THREADS", "3", 1);
        CHECK(emit(p, a) == 0, "emit: %s", err);
        setenv("WPGEN_THREADS", "1", 1);
        CHECK(emit(p, b) == 0, "emit: %s", err);
        unsetenv("WPGEN_THREADS");
        sh(cmd, sizeof cmd, "diff -r '%s' '%s'", a, b);
        CHECK(system(cmd) == 0, "3 threads and 1 thread wrote different files");
        check_dir(p, a);
        Plan *q = hand_plan(&t);
        CHECK(plan_hash(q) != plan_hash(p), "two plans, one hash");
        plan_free(q);
    }
    plan_free(p);
    topology_free(&t);
}

/* Every kind of operation renders, reads as it should and compiles. */
static void test_all_kinds(void) {
    Topology t;
    if (load_topology(1, 2, &t)) return;
    Plan *plans[2] = { activation_plan(&t), sharded_plan(&t) };
    const char *expect[2][3] = {
        { "wp_send_act(R, WP_ACT, CHUNK(1), MB(0), TO(1));", "wp_bwd_w(R, CHUNK(1), MB(0), D1, WRITE);",
          "W0 copied from its master at turn 0" },
        { "wp_allgather(R, S0, W0, CHUNK(0), GROUP(0));", "wp_reduce_scatter(R, D0, E0, CHUNK(0), GROUP(0));",
          "AdamW on this rank's shard 1 of 2" },
    };
    const char *files[2][3] = { { "rank_000.c", "rank_001.c", "rank_000.c" }, { "rank_000.c", "rank_000.c", "rank_001.c" } };
    for (int i = 0; i < 2; i++) {
        Plan *p = plans[i];
        if (verify(p) == 0) {
            char a[512], path[600];
            join(a, sizeof a, base, p->strategy);
            CHECK(emit(p, a) == 0, "emit %s: %s", p->strategy, err);
            check_dir(p, a);
            for (int k = 0; k < 3; k++) {
                join(path, sizeof path, a, files[i][k]);
                char *s = slurp(path, NULL);
                CHECK(s && strstr(s, expect[i][k]), "%s: no \"%s\"", path, expect[i][k]);
                free(s);
            }
        }
        plan_free(p);
    }
    topology_free(&t);
}

/* Line n (from 1) of a file, without its newline, into out; 0, or -1 if there is no such line. */
static int file_line(const char *path, int n, char *out, size_t len) {
    FILE *f = fopen(path, "r");
    if (!f) return -1;
    int rc = -1;
    for (int i = 1; fgets(out, (int)len, f); i++)
        if (i == n) { out[strcspn(out, "\n")] = 0; rc = 0; break; }
    fclose(f);
    return rc;
}

/* A plan a strategy made (through the Lua bridge): every operation's comment starts with the
 * strategy line that added it, as NAME:LINE, where plan.h names the file NAME stands for, and that
 * line calls the plan method of the operation's kind (wp_send_act: plan:send, and so on). */
static void test_sources(const char *strategy) {
    Topology t;
    if (load_topology(1, 2, &t)) return;
    WpConfig m = tiny_model();
    StrategyOpts o = { .micro_batches = 2, .replicas = 1 };
    Plan *p = NULL;
    int rc = strategy_run(strategy, &t, &m, "tiny-test", &o, &p, err, sizeof err);
    CHECK(rc == 0, "%s: %s", strategy, err);
    if (rc == 0 && verify(p) == 0) {
        char dir[512], path[600];
        join(dir, sizeof dir, base, strategy);
        CHECK(emit(p, dir) == 0, "emit %s: %s", strategy, err);
        check_dir(p, dir);
        CHECK(p->nsources > 0, "%s: the plan has no strategy files", strategy);

        /* plan.h's list: " *   NAME  PATH" per file */
        join(path, sizeof path, dir, "plan.h");
        char *h = slurp(path, NULL), names[8][64] = { { 0 } };
        for (int i = 0; h && i < p->nsources && i < 8; i++) {
            char want[600];
            snprintf(want, sizeof want, "  %s\n", p->sources[i]);
            char *at = strstr(h, want);
            CHECK(at != NULL, "plan.h does not name %s", p->sources[i]);
            if (!at) continue;
            char *line = at;
            while (line > h && line[-1] != '\n') line--;
            CHECK(sscanf(line, " *   %63s", names[i]) == 1, "plan.h: \"%.40s\"", line);
        }
        free(h);

        int checked = 0, total = 0;
        for (int r = 0; r < p->nranks; r++) {
            char name[32];
            snprintf(name, sizeof name, "rank_%03d.c", r);
            join(path, sizeof path, dir, name);
            char *src = slurp(path, NULL);
            total += p->ranks[r].nops;
            for (char *line = src; line && (line = strstr(line, "\n    wp_")); line++) {
                char call[32], where[96], text[512], method[40];
                if (!strncmp(line, "\n    wp_turn_", 13)) continue;
                if (sscanf(line, "\n    wp_%31[a-z_](", call) != 1) continue;
                char *c = strstr(line, "/* "), *nl = strchr(line + 1, '\n');
                CHECK(c && (!nl || c < nl) && sscanf(c, "/* %95s", where) == 1, "%s: no comment: %.60s", name, line + 1);
                if (!c || (nl && c > nl)) continue;
                char *colon = strrchr(where, ':');
                int n = colon ? atoi(colon + 1) : 0, file = -1;
                if (colon) *colon = 0;
                for (int i = 0; i < p->nsources && i < 8; i++)
                    if (!strcmp(names[i], where)) file = i;
                CHECK(file >= 0 && n > 0, "%s: \"%s\" is not a strategy line: %.80s", name, where, line + 1);
                if (file < 0 || n <= 0) continue;
                CHECK(file_line(p->sources[file], n, text, sizeof text) == 0, "%s has no line %d", p->sources[file], n);
                size_t k = strlen(call);
                if (k > 4 && !strcmp(call + k - 4, "_act")) call[k - 4] = 0;
                snprintf(method, sizeof method, "plan:%s(", call);
                CHECK(strstr(text, method) != NULL, "%s: wp_%s from %s:%d, which reads \"%s\"", name, call,
                      p->sources[file], n, text);
                checked++;
            }
            free(src);
        }
        CHECK(checked == total && total > 0, "%s: %d of %d operations traced to their strategy line", strategy,
              checked, total);
    }
    plan_free(p);
    topology_free(&t);
}

/* 1,024 ranks (512 pairs, 32 nodes of 32), n micro-batches each: 4n + 8 operations per rank. */
static void bench(void) {
    Topology t;
    if (load_topology(32, 32, &t)) return;
    int n = 98;
    double t0 = now();
    Plan *p = replicated_plan(&t, 512, n);
    double t1 = now();
    if (verify(p) == 0) {
        double t2 = now(), c2 = cpu();
        char a[512];
        snprintf(a, sizeof a, "%s/big", base);
        CHECK(emit(p, a) == 0, "emit: %s", err);
        double t3 = now(), c3 = cpu();
        char path[600];
        snprintf(path, sizeof path, "%s/rank_0513.c", a);
        char *s = slurp(path, NULL);
        int lines = s ? count(s, "\n") : 0;
        free(s);
        printf("bench: %d ranks x %d operations: build %.2f s, verify %.2f s, emit %.2f s (%.2f s of CPU), "
               "%d lines per rank\n", p->nranks, p->ranks[0].nops, t1 - t0, t2 - t1, t3 - t2, c3 - c2, lines);
    }
    plan_free(p);
    topology_free(&t);
}

int main(void) {
    if (!getenv("WPGEN_HOME")) {
        char cwd[4096];
        if (!getcwd(cwd, sizeof cwd) || access("generator/emit/emit.lua", R_OK)) {
            fprintf(stderr, "test_emit: run from the repository root or set WPGEN_HOME\n");
            return 1;
        }
        setenv("WPGEN_HOME", cwd, 1);
    }
    if (!mkdtemp(base)) { perror(base); return 1; }
    test_hand_plan();
    test_replicas();
    test_all_kinds();
    test_sources("weipipe-interleave");   /* operations added in schedules/lib/weipipe.lua */
    test_sources("fsdp");                 /* ... in schedules/fsdp.lua itself */
    test_sources("1f1b");                 /* ... in schedules/lib/actpass.lua, activations too */
    if (getenv("WP_EMIT_BENCH")) bench();
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", base);
    if (getenv("WP_EMIT_KEEP")) printf("test_emit: output kept in %s\n", base);
    else if (!check_failed_ && system(cmd) != 0) fprintf(stderr, "could not remove %s\n", base);
    return check_summary("test_emit");
}
