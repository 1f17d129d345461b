/* The plan IR's builder: the calls a strategy makes (through the Lua bridge) to describe ranks,
 * chunks, owners, buffers, groups and operations, and plan_finish, which orders each rank's
 * operations by turn and sizes the buffers. Checks here are local (indices in range, names
 * unique); the invariants that need the whole plan are plan_verify's. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stdarg.h>
#include "ir/plan.h"
#include "ir/op_table.h"
#include "util/xalloc.h"
#include "common/errmsg.h"

const char *const what_names[] = { "-", "W", "D", "A", "G", "T" };

static void *grow(void *p, int *cap, int need, size_t elem) {
    if (need <= *cap) return p;
    int n = *cap ? *cap : 8;
    while (n < need) n *= 2;
    void *q = xrealloc(p, (size_t)n * elem);
    *cap = n;
    return q;
}

Plan *plan_new(const Topology *t, const WpConfig *m, const char *strategy, int nranks) {
    Plan *p = xcalloc(1, sizeof *p);
    p->topo = t;
    p->model = *m;
    p->strategy = xstrdup(strategy);
    p->nranks = nranks;
    p->replicas = 1;
    p->ranks = xcalloc((size_t)nranks, sizeof *p->ranks);
    p->op_turn = xcalloc((size_t)nranks, sizeof *p->op_turn);
    for (int r = 0; r < nranks; r++) {
        p->ranks[r].device = r;
        p->ranks[r].node = topology_node_of(t, r);
        p->ranks[r].stage = r;
    }
    return p;
}

void plan_free(Plan *p) {
    if (!p) return;
    for (int r = 0; r < p->nranks; r++) {
        free(p->ranks[r].bufs);
        free(p->ranks[r].bufs_index);
        free(p->ranks[r].ops);
        free(p->ranks[r].turn_start);
        free(p->ranks[r].notes);
        free(p->op_turn[r]);
    }
    for (int c = 0; c < p->nchunks; c++) free(p->chunks[c].owners);
    for (int g = 0; g < p->ngroups; g++) free(p->groups[g].ranks);
    free(p->ranks); free(p->op_turn); free(p->chunks); free(p->groups);
    for (int i = 0; i < p->nsources; i++) free(p->sources[i]);
    free(p->strategy); free(p->notes); free(p->sources);
    if (p->own_topo) { topology_free(p->own_topo); free(p->own_topo); }
    free(p);
}

int plan_set_chunks(Plan *p, const int *layers, int n, char *err, size_t errlen) {
    if (p->nchunks) return errmsg(err, errlen, "chunks are already set");
    if (n < 1) return errmsg(err, errlen, "a plan needs at least one chunk");
    int sum = 0;
    for (int i = 0; i < n; i++) {
        /* the first and last chunk may be left without layers, for plan_set_replicated (plan_finish checks) */
        int ends = n > 2 && (i == 0 || i == n - 1);
        if (layers[i] < (ends ? 0 : 1)) return errmsg(err, errlen, "chunk %d: expected at least one layer, got %d", i, layers[i]);
        sum += layers[i];
    }
    if (sum != p->model.layers)
        return errmsg(err, errlen, "chunks hold %d layers in all, the model has %d", sum, p->model.layers);
    p->chunks = xcalloc((size_t)n, sizeof *p->chunks);
    int l0 = 0;
    for (int i = 0; i < n; i++) {
        p->chunks[i].layer0 = l0;
        p->chunks[i].nlayers = layers[i];
        l0 += layers[i];
    }
    p->nchunks = n;
    return 0;
}

int plan_add_owner(Plan *p, int chunk, int rank, char *err, size_t errlen) {
    if (chunk < 0 || chunk >= p->nchunks) return errmsg(err, errlen, "owner: no chunk %d", chunk);
    if (rank < 0 || rank >= p->nranks) return errmsg(err, errlen, "owner of chunk %d: no rank %d", chunk, rank);
    PlanChunk *c = &p->chunks[chunk];
    for (int i = 0; i < c->nowners; i++)
        if (c->owners[i] == rank) return errmsg(err, errlen, "owner of chunk %d: rank %d given twice", chunk, rank);
    c->owners = grow(c->owners, &c->capowners, c->nowners + 1, sizeof *c->owners);
    c->owners[c->nowners++] = rank;
    return 0;
}

int plan_set_replicated(Plan *p, int chunk, char *err, size_t errlen) {
    if (chunk < 0 || chunk >= p->nchunks) return errmsg(err, errlen, "replicate: no chunk %d", chunk);
    if (chunk != 0 && chunk != p->nchunks - 1)
        return errmsg(err, errlen, "replicate: chunk %d is neither the first nor the last (only the embedding's and the LM head's may be replicated)", chunk);
    p->chunks[chunk].replicated = 1;
    return 0;
}

/* A rank's buffers by name: the bridge looks one up for every operand of every operation, and
 * a fully sharded plan's ranks have hundreds of buffers, so a linear search made building a plan quadratic (45% of
 * a 1,024-rank fully sharded plan's time in strcmp). Open addressing, FNV-1a, at most half full. */
static uint32_t name_hash(const char *s) {
    uint32_t h = 2166136261u;
    while (*s) h = (h ^ (uint8_t)*s++) * 16777619u;
    return h;
}

static void buf_index_put(PlanRank *r, int i) {
    uint32_t m = (uint32_t)r->bufs_index_cap - 1, h = name_hash(r->bufs[i].name) & m;
    while (r->bufs_index[h]) h = (h + 1) & m;
    r->bufs_index[h] = i + 1;
}

static void buf_index_grow(PlanRank *r) {
    if (2 * (r->nbufs + 1) <= r->bufs_index_cap) return;
    r->bufs_index_cap = r->bufs_index_cap ? 2 * r->bufs_index_cap : 16;
    free(r->bufs_index);
    r->bufs_index = xcalloc((size_t)r->bufs_index_cap, sizeof *r->bufs_index);
    for (int i = 0; i < r->nbufs; i++) buf_index_put(r, i);
}

int plan_find_buf(const Plan *p, int rank, const char *name) {
    const PlanRank *r = &p->ranks[rank];
    if (!r->bufs_index) return -1;
    uint32_t m = (uint32_t)r->bufs_index_cap - 1, h = name_hash(name) & m;
    for (; r->bufs_index[h]; h = (h + 1) & m)
        if (strcmp(r->bufs[r->bufs_index[h] - 1].name, name) == 0) return r->bufs_index[h] - 1;
    return -1;
}

int plan_add_buf(Plan *p, int rank, const char *name, BufKind kind, int chunk, int master,
                 int shard, int nshards, char *err, size_t errlen) {
    if (rank < 0 || rank >= p->nranks) return errmsg(err, errlen, "buffer %s: no rank %d", name, rank);
    size_t n = strlen(name);
    if (n == 0 || n >= sizeof ((PlanBuf *)0)->name)
        return errmsg(err, errlen, "rank %d: buffer name \"%s\": expected 1 to %zu characters", rank, name,
                    sizeof ((PlanBuf *)0)->name - 1);
    for (size_t i = 0; i < n; i++) {
        char ch = name[i];
        if (!(ch == '_' || (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (i && ch >= '0' && ch <= '9')))
            return errmsg(err, errlen, "rank %d: buffer name \"%s\": expected a C identifier", rank, name);
    }
    if (plan_find_buf(p, rank, name) >= 0) return errmsg(err, errlen, "rank %d: buffer %s declared twice", rank, name);
    if (chunk < -1 || chunk >= p->nchunks) return errmsg(err, errlen, "rank %d: buffer %s: no chunk %d", rank, name, chunk);
    if (master && chunk < 0) return errmsg(err, errlen, "rank %d: master buffer %s needs a chunk", rank, name);
    if (master && kind != BUF_W) return errmsg(err, errlen, "rank %d: master buffer %s must hold weights", rank, name);
    if (nshards < 1 || shard < 0 || shard >= nshards)
        return errmsg(err, errlen, "rank %d: buffer %s: shard %d of %d", rank, name, shard, nshards);
    if (nshards > 1 && chunk < 0) return errmsg(err, errlen, "rank %d: sharded buffer %s needs a chunk", rank, name);
    PlanRank *r = &p->ranks[rank];
    if (r->nbufs >= 32000) return errmsg(err, errlen, "rank %d: too many buffers", rank);
    buf_index_grow(r);
    r->bufs = grow(r->bufs, &r->capbufs, r->nbufs + 1, sizeof *r->bufs);
    PlanBuf *b = &r->bufs[r->nbufs];
    memset(b, 0, sizeof *b);
    memcpy(b->name, name, n + 1);
    b->kind = (uint8_t)kind;
    b->master = (uint8_t)master;
    b->chunk = chunk;
    b->shard = shard;
    b->nshards = nshards;
    buf_index_put(r, r->nbufs);
    return r->nbufs++;
}

int plan_add_group(Plan *p, const int *ranks, int n, char *err, size_t errlen) {
    if (n < 1) return errmsg(err, errlen, "a group needs at least one rank");
    for (int i = 0; i < n; i++) {
        if (ranks[i] < 0 || ranks[i] >= p->nranks) return errmsg(err, errlen, "group: no rank %d", ranks[i]);
        for (int j = 0; j < i; j++)
            if (ranks[j] == ranks[i]) return errmsg(err, errlen, "group: rank %d given twice", ranks[i]);
    }
    /* The same member list is the same group: strategies may ask for it again and again. */
    for (int g = 0; g < p->ngroups; g++)
        if (p->groups[g].n == n && memcmp(p->groups[g].ranks, ranks, (size_t)n * sizeof *ranks) == 0) return g;
    p->groups = grow(p->groups, &p->capgroups, p->ngroups + 1, sizeof *p->groups);
    PlanGroup *g = &p->groups[p->ngroups];
    g->n = n;
    g->ranks = xmalloc((size_t)n * sizeof *ranks);
    memcpy(g->ranks, ranks, (size_t)n * sizeof *ranks);
    return p->ngroups++;
}

int plan_add_op(Plan *p, int rank, int turn, const Op *op, char *err, size_t errlen) {
    if (p->finished) return errmsg(err, errlen, "the plan is finished");
    if (op->kind >= OP__COUNT) return errmsg(err, errlen, "rank %d turn %d: unknown operation %d", rank, turn, op->kind);
    if (op->what > WHAT_G) return errmsg(err, errlen, "rank %d turn %d: %s: unknown payload %d", rank, turn, op_names[op->kind], op->what);
    if (rank < 0 || rank >= p->nranks) return errmsg(err, errlen, "%s: no rank %d", op_names[op->kind], rank);
    if (turn < 0 || turn > 10000000) return errmsg(err, errlen, "rank %d: %s: turn %d out of range", rank, op_names[op->kind], turn);
    PlanRank *r = &p->ranks[rank];
    if (op->buf >= r->nbufs || op->buf2 >= r->nbufs)
        return errmsg(err, errlen, "rank %d turn %d: %s: no such buffer", rank, turn, op_names[op->kind]);
    if (op->chunk >= p->nchunks) return errmsg(err, errlen, "rank %d turn %d: %s: no chunk %d", rank, turn, op_names[op->kind], op->chunk);
    /* (a RING holds its bytes where the others name a rank and a group) */
    if (op->kind != OP_RING && op->peer >= p->nranks) return errmsg(err, errlen, "rank %d turn %d: %s: no rank %d", rank, turn, op_names[op->kind], op->peer);
    if (op->kind != OP_RING && op->group >= p->ngroups) return errmsg(err, errlen, "rank %d turn %d: %s: no group %d", rank, turn, op_names[op->kind], op->group);
    int cap = r->capops;
    r->ops = grow(r->ops, &r->capops, r->nops + 1, sizeof *r->ops);
    if (r->capops != cap) {
        int32_t *t = xrealloc(p->op_turn[rank], (size_t)r->capops * sizeof *t);
        p->op_turn[rank] = t;
    }
    r->ops[r->nops] = *op;
    p->op_turn[rank][r->nops] = turn;
    r->nops++;
    if (turn + 1 > p->nturns) p->nturns = turn + 1;
    return 0;
}

int plan_copy_replica(Plan *p, char *err, size_t errlen) {
    int R = p->replicas, P = R > 0 ? p->nranks / R : 0;
    if (p->finished) return errmsg(err, errlen, "the plan is finished");
    if (R < 2) return 0;
    if (P * R != p->nranks) return errmsg(err, errlen, "copy_replica: %d ranks are not %d replicas", p->nranks, R);
    /* what is copied must stay inside replica 0, and the other replicas must be empty */
    for (int r = P; r < p->nranks; r++)
        if (p->ranks[r].nops || p->ranks[r].nbufs)
            return errmsg(err, errlen, "copy_replica: rank %d (replica %d) already has buffers or operations", r, r / P);
    for (int c = 0; c < p->nchunks; c++)
        for (int i = 0; i < p->chunks[c].nowners; i++)
            if (p->chunks[c].owners[i] >= P)
                return errmsg(err, errlen, "copy_replica: chunk %d already has an owner outside replica 0 (rank %d)", c, p->chunks[c].owners[i]);
    for (int r = 0; r < P; r++)
        for (int i = 0; i < p->ranks[r].nops; i++) {
            const Op *o = &p->ranks[r].ops[i];
            if (o->peer >= P)
                return errmsg(err, errlen, "copy_replica: rank %d turn %d: %s names rank %d, outside replica 0", r, p->op_turn[r][i],
                              op_names[o->kind], o->peer);
        }
    /* groups inside replica 0 get a copy in each replica; groups across replicas stay */
    int ng = p->ngroups;
    uint8_t *inside = xcalloc((size_t)ng + 1, 1);
    for (int g = 0; g < ng; g++) {
        inside[g] = 1;
        for (int m = 0; m < p->groups[g].n; m++) inside[g] &= p->groups[g].ranks[m] < P;
    }
    int *gmap = xmalloc(((size_t)ng + 1) * sizeof *gmap), *members = xmalloc(((size_t)P + 1) * sizeof *members);
    int rc = 0;
    for (int q = 1; q < R && !rc; q++) {
        int shift = q * P;
        long mb_shift = (long)q * P * p->micro_batches;
        for (int g = 0; g < ng && !rc; g++) {
            gmap[g] = g;
            if (!inside[g]) continue;
            for (int m = 0; m < p->groups[g].n; m++) members[m] = p->groups[g].ranks[m] + shift;
            gmap[g] = plan_add_group(p, members, p->groups[g].n, err, errlen);
            if (gmap[g] < 0) rc = -1;
        }
        for (int r = 0; r < P && !rc; r++) {
            const PlanRank *src = &p->ranks[r];
            PlanRank *dst = &p->ranks[shift + r];
            dst->replica = src->replica + q;
            dst->stage = src->stage;
            /* the buffers and their name index, as they are (the same names hash the same) */
            dst->nbufs = dst->capbufs = src->nbufs;
            dst->bufs = xmalloc(((size_t)src->nbufs + 1) * sizeof *dst->bufs);
            memcpy(dst->bufs, src->bufs, (size_t)src->nbufs * sizeof *dst->bufs);
            dst->bufs_index_cap = src->bufs_index_cap;
            if (src->bufs_index) {
                dst->bufs_index = xmalloc((size_t)src->bufs_index_cap * sizeof *dst->bufs_index);
                memcpy(dst->bufs_index, src->bufs_index, (size_t)src->bufs_index_cap * sizeof *dst->bufs_index);
            }
            dst->nops = dst->capops = src->nops;
            dst->ops = xmalloc(((size_t)src->nops + 1) * sizeof *dst->ops);
            p->op_turn[shift + r] = xmalloc(((size_t)src->nops + 1) * sizeof **p->op_turn);
            memcpy(p->op_turn[shift + r], p->op_turn[r], (size_t)src->nops * sizeof **p->op_turn);
            for (int i = 0; i < src->nops; i++) {
                Op o = src->ops[i];
                if (o.peer >= 0) o.peer += shift;
                if (o.mb >= 0) o.mb = (int32_t)(o.mb + mb_shift);
                if (o.group >= 0) o.group = gmap[o.group];
                dst->ops[i] = o;
            }
        }
        /* replica q's owners after replica q-1's, in replica 0's order (the owners' checks hold:
         * a shift of distinct ranks of replica 0) */
        for (int c = 0; c < p->nchunks && !rc; c++) {
            PlanChunk *ch = &p->chunks[c];
            int n0 = 0;
            while (n0 < ch->nowners && ch->owners[n0] < P) n0++;
            ch->owners = grow(ch->owners, &ch->capowners, ch->nowners + n0, sizeof *ch->owners);
            for (int i = 0; i < n0; i++) ch->owners[ch->nowners++] = ch->owners[i] + shift;
        }
    }
    free(inside); free(gmap); free(members);
    return rc;
}

/* The formats of the buffers (plan.h, above PlanBuf): the gradient each OPT reads is the owner's
 * fp32 accumulator; the rest follow the plan's two settings. */
static void set_dtypes(Plan *p, int r, size_t largest) {
    PlanRank *rk = &p->ranks[r];
    uint8_t *accumulator = xcalloc((size_t)rk->nbufs + 1, 1);
    for (int i = 0; i < rk->nops; i++)
        if (rk->ops[i].kind == OP_OPT && rk->ops[i].buf2 >= 0) accumulator[rk->ops[i].buf2] = 1;
    for (int b = 0; b < rk->nbufs; b++) {
        PlanBuf *buf = &rk->bufs[b];
        WpDtype d = buf->master || (buf->kind == BUF_D && accumulator[b]) ? WP_FP32
                  : buf->kind == BUF_W ? p->precision : p->grad_precision;
        buf->dtype = (uint8_t)d;
        buf->copy_dtype = (uint8_t)(buf->master ? p->precision : d);
        buf->elems = shard_elems(buf->chunk >= 0 ? plan_chunk_params(p, buf->chunk) : largest, buf->nshards);
        buf->bytes = buf->elems * wp_dtype_bytes(d);
    }
    free(accumulator);
}

int plan_finish(Plan *p, char *err, size_t errlen) {
    if (p->finished) return 0;
    if (!p->nchunks) return errmsg(err, errlen, "the strategy set no chunks");
    for (int c = 0; c < p->nchunks; c++)
        if (p->chunks[c].nlayers < 1 && !p->chunks[c].replicated)
            return errmsg(err, errlen, "chunk %d: expected at least one layer, got 0 (only a replicated chunk may have none)", c);
    /* buffers not sized for a chunk hold travelling weights: a replicated chunk's never travel */
    size_t largest = 0;
    for (int c = 0; c < p->nchunks; c++)
        if (!p->chunks[c].replicated && plan_chunk_params(p, c) > largest) largest = plan_chunk_params(p, c);
    for (int r = 0; r < p->nranks; r++) {
        PlanRank *rk = &p->ranks[r];
        set_dtypes(p, r, largest);
        /* Counting sort by turn keeps the order the strategy gave within a turn. */
        rk->turn_start = xcalloc((size_t)p->nturns + 2, sizeof *rk->turn_start);
        for (int i = 0; i < rk->nops; i++) rk->turn_start[p->op_turn[r][i] + 1]++;
        for (int t = 0; t < p->nturns; t++) rk->turn_start[t + 1] += rk->turn_start[t];
        Op *sorted = xmalloc((size_t)(rk->nops ? rk->nops : 1) * sizeof *sorted);
        int *fill = xmalloc((size_t)(p->nturns + 1) * sizeof *fill);
        memcpy(fill, rk->turn_start, (size_t)(p->nturns + 1) * sizeof *fill);
        for (int i = 0; i < rk->nops; i++) sorted[fill[p->op_turn[r][i]]++] = rk->ops[i];
        free(fill);
        free(rk->ops);
        rk->ops = sorted;
        rk->capops = rk->nops;
        free(p->op_turn[r]);
        p->op_turn[r] = NULL;
    }
    p->finished = 1;
    return 0;
}

static const char *bufname(const Plan *p, int rank, int b) {
    return b >= 0 ? p->ranks[rank].bufs[b].name : "-";
}

/* op_format's text, built in a buffer that always holds it (names are at most 23 characters,
 * numbers 11, formats short) and then copied out as snprintf would. It is made for every
 * operation of every rank in plan.json, hence no printf per field. */
typedef struct Text { char s[256]; size_t n; } Text;

static void put(Text *t, const char *s, size_t k) {
    if (k > sizeof t->s - 1 - t->n) k = sizeof t->s - 1 - t->n;
    memcpy(t->s + t->n, s, k);
    t->n += k;
}

static void put_str(Text *t, const char *s) { put(t, s, strlen(s)); }

static void put_int(Text *t, int v) {
    char b[16], *e = b + sizeof b, *q = e;
    unsigned u = v < 0 ? 0u - (unsigned)v : (unsigned)v;
    do *--q = (char)('0' + u % 10); while (u /= 10);
    if (v < 0) *--q = '-';
    put(t, q, (size_t)(e - q));
}

static void put_u64(Text *t, uint64_t v) {
    char b[24], *e = b + sizeof b, *q = e;
    do *--q = (char)('0' + v % 10); while (v /= 10);
    put(t, q, (size_t)(e - q));
}

/* The row's name, a space, then its format with the $-fields filled in. */
int op_format(const Plan *p, int rank, const Op *op, char *out, size_t len) {
    Text t;
    t.n = 0;
    if (op->kind >= OP__COUNT) put_str(&t, "?");
    else {
        const OpInfo *in = op_info(op->kind);
        put_str(&t, in->name);
        put(&t, " ", 1);
        for (const char *f = in->format; *f;) {
            const char *d = strchr(f, '$');
            if (!d || !d[1]) { put_str(&t, f); break; }
            put(&t, f, (size_t)(d - f));
            switch (d[1]) {
            case 'c': put_int(&t, op->chunk); break;
            case 'm': put_int(&t, op->mb); break;
            case 'b': put_str(&t, bufname(p, rank, op->buf)); break;
            case 'B': put_str(&t, bufname(p, rank, op->buf2)); break;
            case 'g': put_int(&t, op->group); break;
            case 'p': put_int(&t, op->peer); break;
            case 's': put_int(&t, op->ring_steps); break;
            case 'y': put_u64(&t, op_ring_bytes(op)); break;
            case 'w': put_str(&t, op->what <= WHAT_G ? what_names[op->what] : "?"); break;
            case 'x':
                if (!op_moves_activation(op)) put_str(&t, bufname(p, rank, op->buf));
                else { put_str(&t, "chunk "); put_int(&t, op->chunk); put_str(&t, " mb "); put_int(&t, op->mb); }
                break;
            default: put(&t, d, 2); break;
            }
            f = d + 2;
        }
    }
    if (len) {
        size_t k = t.n < len - 1 ? t.n : len - 1;
        memcpy(out, t.s, k);
        out[k] = 0;
    }
    return (int)t.n;
}

/* ---- the sizes of a plan, in one place: a chunk's parameters and their shards, what a transfer
 * carries and in which format (the plan's precision and grad_precision, ir/plan.h), the memory a
 * buffer takes, and a rank's workspace. The byte counts of the verifier (peak memory), the
 * traffic count and the simulator all come from here; the model's own sizes (stash, workspace
 * parts) from runtime/common/config.c. (Once plan_size.c: it and plan.c each used the other.) ---- */

static WpChunk chunk_of(const Plan *p, int chunk) {
    const PlanChunk *c = &p->chunks[chunk];
    return wp_chunk_make(&p->model, chunk, c->layer0, c->nlayers, chunk == 0, chunk == p->nchunks - 1);
}

size_t plan_chunk_params(const Plan *p, int chunk) {
    return chunk_of(p, chunk).nparams;
}

size_t plan_chunk_bytes(const Plan *p, int chunk) {
    return plan_chunk_params(p, chunk) * sizeof(float);
}

size_t shard_elems(size_t n, int nshards) {
    if (nshards < 1) nshards = 1;
    return n / (size_t)nshards + (n % (size_t)nshards != 0);
}

size_t shard_bytes(size_t whole, int nshards) {
    return shard_elems(whole / sizeof(float), nshards) * sizeof(float);
}

size_t plan_shard_elems(const Plan *p, int chunk, int nshards) {
    return chunk < 0 ? 0 : shard_elems(plan_chunk_params(p, chunk), nshards);
}

size_t plan_act_bytes(const Plan *p) {
    return wp_rank_tokens(&p->model) * p->model.hidden * wp_dtype_bytes(p->precision);
}

int plan_op_carries(const Plan *p, int rank, const Op *op) {
    switch (op_info(op->kind)->carries) {
    case CARRY_WHAT: return op->what;
    case CARRY_W: return WHAT_W;
    case CARRY_D: return WHAT_D;
    case CARRY_TIED: return WHAT_T;
    case CARRY_ANY: return op->buf >= 0 && p->ranks[rank].bufs[op->buf].kind == BUF_D ? WHAT_D : WHAT_W;
    default: return WHAT_NONE;
    }
}

WpDtype plan_carried_dtype(const Plan *p, int what) {
    if (what == WHAT_T) return WP_FP32;
    if (what == WHAT_D) return p->grad_precision;
    return what == WHAT_W && p->weight_wire_fp32 ? WP_FP32 : p->precision;
}

size_t plan_carried_bytes(const Plan *p, int what, int chunk, int nshards) {
    size_t n = what == WHAT_A || what == WHAT_G ? (size_t)p->model.mbs * p->model.seq * p->model.hidden
             : what == WHAT_T                   ? (size_t)p->model.vocab * p->model.hidden
                                                : plan_shard_elems(p, chunk, nshards);
    return n * wp_dtype_bytes(plan_carried_dtype(p, what));
}

double cp_ring_bytes(const WpConfig *m, WpDtype prec, int nlayers, int kind, int recompute, double *steps) {
    int C = wp_cp(m);
    *steps = 0;
    if (C == 1 || !op_is_compute(kind) || op_rides(kind)) return 0;
    /* forward passes (K, V) and input-gradient passes (K, V, dK, dV): BWD_W computes no attention */
    double fwd = kind == OP_FWD ? 1 : kind == OP_BWD_W ? 0 : recompute ? op_info(kind)->recompute_units : 0;
    double bwd = kind == OP_BWD || kind == OP_BWD_B;
    double per = (double)nlayers * (C - 1);
    double block = (double)wp_rank_tokens(m) * m->kv_heads * m->head_dim * wp_dtype_bytes(prec);
    *steps = per * (fwd + bwd);
    return per * (fwd * 2 * block + bwd * 4 * block);
}

double plan_cp_ring_bytes(const Plan *p, const Op *op, double *steps) {
    *steps = 0;
    if (!op_is_compute(op->kind) || op->chunk < 0 || op->chunk >= p->nchunks) return 0;
    return cp_ring_bytes(&p->model, p->precision, p->chunks[op->chunk].nlayers, op->kind, p->recompute, steps);
}

int plan_add_rings(Plan *p, char *err, size_t errlen) {
    if (!p->finished) return errmsg(err, errlen, "plan_add_rings: the plan is not finished");
    if (wp_cp(&p->model) == 1) return 0;
    for (int r = 0; r < p->nranks; r++) {
        PlanRank *rk = &p->ranks[r];
        int n = 0;
        for (int i = 0; i < rk->nops; i++) {
            double steps;
            n += plan_cp_ring_bytes(p, &rk->ops[i], &steps) > 0;
        }
        if (!n) continue;
        Op *ops = xmalloc((size_t)(rk->nops + n) * sizeof *ops);
        int k = 0, t = 0;
        for (int i = 0; i < rk->nops; i++) {
            /* a turn starts where its first operation now is: after the rings inserted before it */
            while (t < p->nturns && rk->turn_start[t] == i) rk->turn_start[t++] = k;
            const Op *op = &rk->ops[i];
            double steps, bytes = plan_cp_ring_bytes(p, op, &steps);
            if (bytes > 0) {
                if (steps > UINT16_MAX) {
                    free(ops);
                    return errmsg(err, errlen, "rank %d: %s of chunk %d: its ring attention takes %.0f steps, more than a RING holds (%d): fewer layers a chunk or a smaller --context-parallel",
                                  r, op_names[op->kind], op->chunk, steps, UINT16_MAX);
                }
                Op ring = { .kind = OP_RING, .what = WHAT_NONE, .buf = -1, .buf2 = -1, .ring_steps = (uint16_t)steps,
                            .chunk = op->chunk, .mb = op->mb };
                op_set_ring_bytes(&ring, (uint64_t)bytes);
                ops[k++] = ring;
            }
            ops[k++] = *op;
        }
        while (t <= p->nturns) rk->turn_start[t++] = k;
        free(rk->ops);
        rk->ops = ops;
        rk->nops = rk->capops = k;
    }
    return 0;
}

size_t plan_ring_buffer_bytes(const Plan *p, const Op *ring) {
    if (ring->chunk < 0 || ring->chunk >= p->nchunks) return 0;
    WpChunk k = chunk_of(p, ring->chunk);
    return wp_workspace_slot_bytes(&p->model, &k, p->recompute, WP_WS_KV_RING, p->precision);
}

double plan_cp_gather_bytes(const Plan *p, double bytes) {
    int C = wp_cp(&p->model);
    return bytes * (C - 1) / C;
}

size_t plan_buf_mem(const PlanBuf *b, PlanMem *m) {
    size_t n = b->bytes;
    if (b->kind == BUF_D) m->grads += b->bytes;
    else if (!b->master) m->weights += b->bytes;
    else {
        size_t state = 2 * b->elems * sizeof(float);   /* AdamW's m and v */
        size_t copy = plan_buf_has_copy(b) ? b->elems * wp_dtype_bytes((WpDtype)b->copy_dtype) : 0;
        m->masters += b->bytes + state;
        m->weights += copy;
        n += state + copy;
    }
    return n;
}

size_t plan_mem_total(const PlanMem *m) {
    return m->weights + m->grads + m->masters + m->acts + m->workspace;
}

size_t plan_rank_xfer_bytes(const Plan *p, int rank, size_t align) {
    const PlanRank *rk = &p->ranks[rank];
    uint8_t *moves = calloc((size_t)rk->nbufs + 1, 1);
    if (!moves) return SIZE_MAX;   /* out of memory: a bound that cannot be met says so at start */
    for (int i = 0; i < rk->nops; i++) {
        const Op *op = &rk->ops[i];
        int what = plan_op_carries(p, rank, op);
        if (what != WHAT_W && what != WHAT_D) continue;
        if (op->buf >= 0) moves[op->buf] = 1;
        if (op->buf2 >= 0) moves[op->buf2] = 1;   /* allgather's whole, reduce-scatter's shard */
    }
    size_t n = 0;
    for (int b = 0; b < rk->nbufs; b++) {
        const PlanBuf *pb = &rk->bufs[b];
        WpDtype carried = plan_carried_dtype(p, pb->kind == BUF_D ? WHAT_D : WHAT_W);
        int working = pb->master ? pb->copy_dtype : pb->dtype;
        if (!moves[b] || working == (int)carried) continue;
        size_t bytes = pb->elems * wp_dtype_bytes(carried);
        n += (bytes + align - 1) / align * align;
    }
    free(moves);
    return n;
}

size_t plan_grad_stage_bytes(const Plan *p, int rank) {
    const PlanRank *rk = &p->ranks[rank];
    int bf16_grads = 0;
    for (int b = 0; b < rk->nbufs; b++) bf16_grads |= rk->bufs[b].kind == BUF_D && rk->bufs[b].dtype == WP_BF16;
    if (!bf16_grads) return 0;
    size_t most = 0;   /* the largest segment of any chunk's gradient (config.h's wp_grad_segment) */
    for (int c = 0; c < p->nchunks; c++) {
        WpChunk k = chunk_of(p, c);
        if (wp_grad_stage_floats(&p->model, &k) > most) most = wp_grad_stage_floats(&p->model, &k);
    }
    return most * sizeof(float);
}

size_t plan_workspace_bytes(const Plan *p, const uint8_t *computes, int ring) {
    size_t n = 0;
    for (int part = 0; part < WP_WS_NPARTS; part++) {
        size_t most = 0;
        if (part == WP_WS_KV_RING && !ring) continue;
        for (int c = 0; c < p->nchunks; c++) {
            if (computes && !computes[c]) continue;
            WpChunk k = chunk_of(p, c);
            size_t b = wp_workspace_slot_bytes(&p->model, &k, p->recompute, (WpWorkspacePart)part, p->precision);
            if (b > most) most = b;
        }
        n += most;
    }
    return n;
}
