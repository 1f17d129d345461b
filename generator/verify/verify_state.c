/* The verifier's symbolic state (verify_state.h): key sets, values, what a rank keeps between
 * operations, and the error message. verify.c and verify_comm.c both build on these; nothing
 * here calls back into either. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stdarg.h>
#include "verify/verify_state.h"
#include "util/xalloc.h"

/* ---- key sets ---- */

static size_t key_hash(uint64_t k, size_t cap) {
    k ^= k >> 33; k *= 0xff51afd7ed558ccdULL; k ^= k >> 33;
    return (size_t)k & (cap - 1);
}

int keyset_has(const KeySet *s, uint64_t k) {
    if (!s->cap) return 0;
    for (size_t i = key_hash(k, s->cap);; i = (i + 1) & (s->cap - 1)) {
        if (s->slots[i] == k) return 1;
        if (s->slots[i] == 0) return 0;
    }
}

void keyset_add(KeySet *s, uint64_t k) {
    if (2 * (s->n + 1) > s->cap) {
        KeySet t = { xcalloc(s->cap ? 2 * s->cap : 64, sizeof(uint64_t)), s->cap ? 2 * s->cap : 64, 0 };
        for (size_t i = 0; i < s->cap; i++)
            if (s->slots[i]) keyset_add(&t, s->slots[i]);
        free(s->slots);
        *s = t;
    }
    size_t i = key_hash(k, s->cap);
    while (s->slots[i] && s->slots[i] != k) i = (i + 1) & (s->cap - 1);
    if (!s->slots[i]) { s->slots[i] = k; s->n++; }
}

int keyset_del(KeySet *s, uint64_t k) {
    if (!s->cap) return 0;
    size_t i = key_hash(k, s->cap);
    while (s->slots[i] != k) {
        if (!s->slots[i]) return 0;
        i = (i + 1) & (s->cap - 1);
    }
    /* Backward-shift deletion keeps probe chains intact without tombstones. */
    for (size_t j = (i + 1) & (s->cap - 1); s->slots[j]; j = (j + 1) & (s->cap - 1)) {
        size_t h = key_hash(s->slots[j], s->cap);
        if (((j - h) & (s->cap - 1)) >= ((j - i) & (s->cap - 1))) { s->slots[i] = s->slots[j]; i = j; }
    }
    s->slots[i] = 0;
    s->n--;
    return 1;
}

/* ---- values ---- */

void val_clear(Val *v) {
    free(v->set);
    memset(v, 0, sizeof *v);
}

void val_copy(Verifier *V, Val *dst, const Val *src) {
    if (dst == src) return;
    free(dst->set);
    *dst = *src;
    dst->set = NULL;
    if (src->set) {
        dst->set = xmalloc((size_t)V->words * sizeof(uint64_t));
        memcpy(dst->set, src->set, (size_t)V->words * sizeof(uint64_t));
    }
}

int val_union(Verifier *V, Val *dst, const Val *src, int *dup_mb) {
    if (dst->kind == V_EMPTY) { val_copy(V, dst, src); return 0; }
    for (int w = 0; w < V->words; w++) {
        uint64_t both = dst->set[w] & src->set[w];
        if (both) { *dup_mb = w * 64 + __builtin_ctzll(both); return -1; }
    }
    for (int w = 0; w < V->words; w++) dst->set[w] |= src->set[w];
    dst->count += src->count;
    return 0;
}

size_t val_elems(const Verifier *V, const Val *v) {
    return plan_shard_elems(V->p, v->chunk, v->nshards);
}

const char *val_describe(const Verifier *V, const Val *v, char *buf, size_t len) {
    char shard[32] = "";
    if (v->kind != V_EMPTY && v->nshards > 1) snprintf(shard, sizeof shard, " (shard %d of %d)", v->shard, v->nshards);
    if (v->kind == V_EMPTY) snprintf(buf, len, "nothing");
    else if (v->kind == V_W) snprintf(buf, len, "%sweights of chunk %d%s", v->version ? "updated " : "", v->chunk, shard);
    else snprintf(buf, len, "the gradient of chunk %d over %d of %d micro-batches%s", v->chunk, v->count, V->M, shard);
    return buf;
}

int verr(Verifier *V, int rank, int opi, const char *fmt, ...) {
    char what[160] = "";
    int turn = V->rs[rank].turn;
    if (opi >= 0) op_format(V->p, rank, &V->p->ranks[rank].ops[opi], what, sizeof what);
    int n = opi >= 0 ? snprintf(V->err, V->errlen, "rank %d, turn %d, %s: ", rank, turn, what)
                     : snprintf(V->err, V->errlen, "rank %d: ", rank);
    if (n < 0 || (size_t)n >= V->errlen) return -1;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(V->err + n, V->errlen - (size_t)n, fmt, ap);
    va_end(ap);
    return -1;
}

/* ---- what a rank keeps between operations ---- */

/* What key keeps in device memory and, with offload, in host memory (*host): a stash offload
 * keeps in host memory is there from its chunk's forward to its backward (to BWD_W, with the
 * split backward); the device holds it only in the workspace's staging while computed. */
static size_t keep_bytes(Verifier *V, uint64_t key, size_t *host) {
    int kind = (int)(key >> 60), chunk = (int)((key >> 32) & 0xfffffff);
    *host = 0;
    if (kind == K_ACT || kind == K_GRAD) return plan_act_bytes(V->p);
    const PlanChunk *c = &V->p->chunks[chunk];
    WpChunk k = wp_chunk_make(&V->p->model, chunk, c->layer0, c->nlayers, chunk == 0, chunk == V->p->nchunks - 1);
    *host = wp_stash_host_bytes(&V->p->model, &k, V->p->recompute, V->p->precision);
    size_t stash = wp_stash_bytes(&V->p->model, &k, V->p->recompute, V->p->precision) - *host;
    /* between BWD_B and BWD_W: the stash, and what the B pass keeps for the W pass (config.h) */
    if (kind == K_STASHW) return stash + wp_keep_bytes(&V->p->model, &k, V->p->recompute, V->p->precision);
    return stash;
}

void keep_add(Verifier *V, int r, uint64_t key) {
    RankState *s = &V->rs[r];
    size_t host;
    keyset_add(&s->keep, key);
    s->act_bytes += keep_bytes(V, key, &host);
    s->host_bytes += host;
    if (s->act_bytes > s->act_peak) s->act_peak = s->act_bytes;
    if (s->host_bytes > s->host_peak) s->host_peak = s->host_bytes;
}

int keep_take(Verifier *V, int r, uint64_t key) {
    if (!keyset_del(&V->rs[r].keep, key)) return 0;
    size_t host;
    V->rs[r].act_bytes -= keep_bytes(V, key, &host);
    V->rs[r].host_bytes -= host;
    return 1;
}

/* The split backward's rule, every BWD_W before its gradient leaves or is applied, named in the
 * message of an operation that found no gradient: the first W pass rank r still owes. */
const char *bw_pending_hint(const Verifier *V, int r, char *buf, size_t len) {
    const KeySet *k = &V->rs[r].keep;
    buf[0] = 0;
    for (size_t i = 0; i < k->cap; i++) {
        uint64_t key = k->slots[i];
        if (key && (int)(key >> 60) == K_STASHW) {
            snprintf(buf, len, " (this rank's BWD_W of chunk %d for micro-batch %d has not run: every BWD_W comes before its gradient leaves)",
                     (int)((key >> 32) & 0xfffffff), (int)(uint32_t)key);
            break;
        }
    }
    return buf;
}

int tied_ends_check(Verifier *V, int r, int opi, const Val *e, const char *e_at, const Val *h, const char *h_at,
                    const int *owers, int nowers) {
    const Plan *p = V->p;
    int lastc = p->nchunks - 1;
    char d1[96], d2[96];
    if (!p->model.tied || p->nchunks < 2)
        return verr(V, r, opi, "%s in a plan whose model %s", op_names[p->ranks[r].ops[opi].kind],
                    !p->model.tied ? "does not tie its embeddings" : "runs as one chunk (its head is the embedding itself)");
    if (e->kind != V_D || e->chunk != 0 || e->nshards != 1 || h->kind != V_D || h->chunk != lastc || h->nshards != 1)
        return verr(V, r, opi, "needs the whole gradients of chunk 0 and chunk %d, %s holds %s and %s holds %s", lastc,
                    e_at, val_describe(V, e, d1, sizeof d1), h_at, val_describe(V, h, d2, sizeof d2));
    if (e->tied || h->tied) return verr(V, r, opi, "the gradients of chunks 0 and %d are tied twice", lastc);
    if (e->count != V->M || h->count != V->M) {
        char hint[200] = "", one[160];
        const char *mine = " (this rank's ";   /* bw_pending_hint's words, said of the rank that owes it */
        for (int m = 0; m < nowers && !hint[0]; m++)
            if (bw_pending_hint(V, owers[m], one, sizeof one)[0])
                snprintf(hint, sizeof hint, " (rank %d's %s", owers[m], one + strlen(mine));
        return verr(V, r, opi, "ties incomplete gradients: chunk 0's has %d and chunk %d's %d of %d micro-batches%s",
                    e->count, lastc, h->count, V->M, hint);
    }
    return 0;
}
