/* The communication layers' shared bookkeeping (comm_book.h): groups, the names of operations,
 * argument checks, timeouts, the clock, counters. */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "common/comm_book.h"
#include "common/settings.h"

const char *const comm_kind_names[COMM__NKINDS] = {
    "SEND", "RECV", "BCAST", "REDUCE", "ALLREDUCE", "ALLGATHER", "REDUCE_SCATTER", "UTIL",
};

size_t comm_shard_offset(size_t n, int k, int i) { return (size_t)i * n / (size_t)k; }
size_t comm_shard_len(size_t n, int k, int i) { return comm_shard_offset(n, k, i + 1) - comm_shard_offset(n, k, i); }

/* ---- groups ---- */

void cb_groups_init(CommGroups *t, int rank, int size) {
    memset(t, 0, sizeof *t);
    t->rank = rank;
    t->size = size;
}

void cb_groups_free(CommGroups *t) {
    for (int g = 0; g < t->n; g++) free(t->g[g].ranks);
    free(t->g);
    t->g = NULL;
    t->n = t->cap = 0;
}

int cb_group_add(CommGroups *t, const int *ranks, int n, char *err, size_t errlen) {
    int index = t->n;
    if (n < 1 || n > t->size) {
        snprintf(err, errlen, "group %d: %d members, expected 1 to %d", index, n, t->size);
        return -1;
    }
    for (int i = 0; i < n; i++) {
        if (ranks[i] < 0 || ranks[i] >= t->size) {
            snprintf(err, errlen, "group %d: member %d is rank %d, outside the world of %d", index, i, ranks[i], t->size);
            return -1;
        }
        for (int j = 0; j < i; j++)
            if (ranks[j] == ranks[i]) {
                snprintf(err, errlen, "group %d: rank %d appears twice", index, ranks[i]);
                return -1;
            }
    }
    if (t->n == t->cap) {
        int cap = t->cap ? 2 * t->cap : 8;
        CommGroup *g = realloc(t->g, (size_t)cap * sizeof *g);
        if (!g) { snprintf(err, errlen, "out of memory for group %d", index); return -1; }
        t->g = g;
        t->cap = cap;
    }
    CommGroup *gr = &t->g[index];
    gr->ranks = malloc((size_t)n * sizeof *gr->ranks);
    if (!gr->ranks) { snprintf(err, errlen, "out of memory for group %d", index); return -1; }
    memcpy(gr->ranks, ranks, (size_t)n * sizeof *ranks);
    gr->n = n;
    gr->me = -1;
    for (int i = 0; i < n; i++)
        if (ranks[i] == t->rank) gr->me = i;
    t->n++;
    return index;
}

int cb_group_index(const CommGroups *t, int g, int rank) {
    if (g < 0 || g >= t->n) return -1;
    for (int i = 0; i < t->g[g].n; i++)
        if (t->g[g].ranks[i] == rank) return i;
    return -1;
}

const char *cb_group_desc(const CommGroups *t, int g, char *buf, size_t len) {
    const CommGroup *gr = &t->g[g];
    int k = snprintf(buf, len, "group %d (ranks ", g);
    for (int i = 0; i < gr->n && k >= 0 && (size_t)k < len; i++) {
        if (i == 8 && gr->n > 9) { k += snprintf(buf + k, len - (size_t)k, ",...,%d", gr->ranks[gr->n - 1]); break; }
        k += snprintf(buf + k, len - (size_t)k, "%s%d", i ? "," : "", gr->ranks[i]);
    }
    if (k >= 0 && (size_t)k < len) snprintf(buf + k, len - (size_t)k, ")");
    return buf;
}

/* ---- operations ---- */

CommOp cb_op(CommKind kind, const char *name, const CommInfo *info, int peer, int group, size_t bytes, double now) {
    CommOp op = { kind, name ? name : comm_kind_names[kind], info ? info->turn : -1, peer, group, bytes, now, "" };
    if (info && info->label) snprintf(op.label, sizeof op.label, "%s", info->label);
    return op;
}

const char *cb_op_desc(const CommGroups *t, const CommOp *op, char *buf, size_t len) {
    char gbuf[128] = "", label[64] = "", peer[32] = "", turn[32] = "outside the step";
    if (op->label[0]) snprintf(label, sizeof label, " \"%s\"", op->label);
    const char *dir = op->kind == COMM_SEND ? " to" : op->kind == COMM_RECV ? " from"
                    : op->kind == COMM_BCAST ? " from root" : op->kind == COMM_REDUCE ? " to root" : " with";
    if (op->peer >= 0) snprintf(peer, sizeof peer, "%s rank %d", dir, op->peer);
    if (op->group >= 0 && op->group < t->n) cb_group_desc(t, op->group, gbuf, sizeof gbuf);
    if (op->turn >= 0) snprintf(turn, sizeof turn, "turn %d", op->turn);
    snprintf(buf, len, "%s%s%s%s%s in %s (%zu bytes)", op->name, label, peer, gbuf[0] ? " on " : "", gbuf, turn,
             op->bytes);
    return buf;
}

CommEvent cb_op_event(const CommOp *op, double t_done) {
    return (CommEvent){ (CommKind)op->kind, op->turn, op->label, op->peer, op->group, op->bytes, op->t_post, t_done };
}

void cb_count(CommStats *s, CommKind kind, size_t bytes) {
    s->calls[kind]++;
    s->bytes[kind] += bytes;
}

/* ---- checks ---- */

const char *cb_label(const CommInfo *info) { return info && info->label ? info->label : ""; }
int cb_turn(const CommInfo *info) { return info ? info->turn : -1; }

const CommGroup *cb_member(const CommGroups *t, CommKind kind, int g, const CommInfo *info, char *err, size_t errlen) {
    if (g < 0 || g >= t->n) {
        snprintf(err, errlen, "%s \"%s\" in turn %d: group %d, but %d groups are declared", comm_kind_names[kind],
                 cb_label(info), cb_turn(info), g, t->n);
        return NULL;
    }
    if (t->g[g].me < 0) {
        char gbuf[128];
        snprintf(err, errlen, "%s \"%s\" in turn %d: this rank is not a member of %s", comm_kind_names[kind],
                 cb_label(info), cb_turn(info), cb_group_desc(t, g, gbuf, sizeof gbuf));
        return NULL;
    }
    return &t->g[g];
}

int cb_root(const CommGroups *t, CommKind kind, int g, int root, const CommInfo *info, char *err, size_t errlen) {
    int r = cb_group_index(t, g, root);
    if (r < 0) {
        char gbuf[128];
        snprintf(err, errlen, "%s \"%s\" in turn %d: root rank %d is not a member of %s", comm_kind_names[kind],
                 cb_label(info), cb_turn(info), root, cb_group_desc(t, g, gbuf, sizeof gbuf));
    }
    return r;
}

int cb_check_peer(const CommGroups *t, CommKind kind, int peer, const CommInfo *info, char *err, size_t errlen) {
    if (peer >= 0 && peer < t->size) return 0;
    snprintf(err, errlen, "%s \"%s\" in turn %d: peer %d outside the world of %d ranks", comm_kind_names[kind],
             cb_label(info), cb_turn(info), peer, t->size);
    return -1;
}

/* Byte ranges [a, a + na) and [b, b + nb) share a byte. */
static int overlaps(const void *a, size_t na, const void *b, size_t nb) {
    const char *x = a, *y = b;
    return na && nb && x < y + nb && y < x + na;
}

int cb_check_allgather(const CommGroup *gr, const void *shard, const void *full, size_t n, size_t es,
                       const CommInfo *info, int *in_place, char *err, size_t errlen) {
    const char *own = (const char *)full + comm_shard_offset(n, gr->n, gr->me) * es;
    *in_place = (const char *)shard == own;
    if (!*in_place && overlaps(shard, comm_shard_len(n, gr->n, gr->me) * es, full, n * es)) {
        snprintf(err, errlen, "ALLGATHER \"%s\" in turn %d: the shard overlaps the full buffer but is not its own "
                 "place in it", cb_label(info), cb_turn(info));
        return -1;
    }
    return 0;
}

int cb_check_reduce_scatter(const CommGroup *gr, const void *full, const void *shard, size_t n, size_t es,
                            const CommInfo *info, char *err, size_t errlen) {
    if (overlaps(full, n * es, shard, comm_shard_len(n, gr->n, gr->me) * es)) {
        snprintf(err, errlen, "REDUCE_SCATTER \"%s\" in turn %d: the shard overlaps the full buffer", cb_label(info),
                 cb_turn(info));
        return -1;
    }
    return 0;
}

/* ---- the environment and the clock ---- */

int cb_env_seconds(const char *name, double *out, char *err, size_t errlen) {
    const WpSetting *s = wp_setting_find(wp_runtime_settings, wp_runtime_nsettings, name);
    if (!s || s->kind != SET_SECONDS) { snprintf(err, errlen, "%s: not a setting of seconds (common/settings.c)", name); return -1; }
    return wp_setting_number(s, out, NULL, err, errlen);
}

int cb_env_max_elems(size_t *out, char *err, size_t errlen) {
    double v;
    *out = (size_t)INT_MAX;
    if (wp_setting_number(wp_setting_find(wp_runtime_settings, wp_runtime_nsettings, "WP_COMM_MAX_ELEMS"), &v, NULL, err, errlen))
        return -1;
    *out = (size_t)v;
    return 0;
}

size_t cb_pieces(size_t n, size_t max) { return n ? (n - 1) / max + 1 : 1; }

size_t cb_piece(size_t n, size_t max, size_t k, size_t *len) {
    size_t off = k * max;
    *len = off >= n ? 0 : n - off < max ? n - off : max;
    return off;
}

double cb_since(const struct timespec *t0) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)(t.tv_sec - t0->tv_sec) + 1e-9 * (double)(t.tv_nsec - t0->tv_nsec);
}
