/* The plan IR's builder: the calls a strategy makes (through the Lua bridge) to describe ranks,
 * chunks, owners, buffers, groups and operations, and plan_finish, which orders each rank's
 * operations by turn and sizes the buffers. Checks here are local (indices in range, names
 * unique); the invariants that need the whole plan are plan_verify's. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stdarg.h>
#include "ir/plan.h"
#include "ir/xalloc.h"
#include "common/errmsg.h"

const char *const op_names[OP__COUNT] = {
    "FWD", "BWD", "BWD_B", "BWD_W", "SEND", "RECV", "BCAST", "REDUCE", "ALLREDUCE",
    "ALLGATHER", "REDUCE_SCATTER", "ACC", "COPY", "OPT", "FREE",
};
const char *const what_names[] = { "-", "W", "D", "A", "G" };

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
    p->strategy = strdup(strategy);
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
    free(p);
}

int plan_set_chunks(Plan *p, const int *layers, int n, char *err, size_t errlen) {
    if (p->nchunks) return errmsg(err, errlen, "chunks are already set");
    if (n < 1) return errmsg(err, errlen, "a plan needs at least one chunk");
    int sum = 0;
    for (int i = 0; i < n; i++) {
        if (layers[i] < 1) return errmsg(err, errlen, "chunk %d: expected at least one layer, got %d", i, layers[i]);
        sum += layers[i];
    }
    if (sum != p->model.layers)
        return errmsg(err, errlen, "chunks hold %d layers in all, the model has %d", sum, p->model.layers);
    if (p->model.tied && n > 1)
        return errmsg(err, errlen, "tie_word_embeddings with %d chunks: a tied model runs as one chunk", n);
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

int plan_find_buf(const Plan *p, int rank, const char *name) {
    const PlanRank *r = &p->ranks[rank];
    for (int i = 0; i < r->nbufs; i++)
        if (strcmp(r->bufs[i].name, name) == 0) return i;
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
    r->bufs = grow(r->bufs, &r->capbufs, r->nbufs + 1, sizeof *r->bufs);
    PlanBuf *b = &r->bufs[r->nbufs];
    memset(b, 0, sizeof *b);
    memcpy(b->name, name, n + 1);
    b->kind = (uint8_t)kind;
    b->master = (uint8_t)master;
    b->chunk = chunk;
    b->shard = shard;
    b->nshards = nshards;
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
    if (rank < 0 || rank >= p->nranks) return errmsg(err, errlen, "%s: no rank %d", op_names[op->kind], rank);
    if (turn < 0 || turn > 10000000) return errmsg(err, errlen, "rank %d: %s: turn %d out of range", rank, op_names[op->kind], turn);
    PlanRank *r = &p->ranks[rank];
    if (op->buf >= r->nbufs || op->buf2 >= r->nbufs)
        return errmsg(err, errlen, "rank %d turn %d: %s: no such buffer", rank, turn, op_names[op->kind]);
    if (op->chunk >= p->nchunks) return errmsg(err, errlen, "rank %d turn %d: %s: no chunk %d", rank, turn, op_names[op->kind], op->chunk);
    if (op->peer >= p->nranks) return errmsg(err, errlen, "rank %d turn %d: %s: no rank %d", rank, turn, op_names[op->kind], op->peer);
    if (op->group >= p->ngroups) return errmsg(err, errlen, "rank %d turn %d: %s: no group %d", rank, turn, op_names[op->kind], op->group);
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

size_t plan_chunk_bytes(const Plan *p, int chunk) {
    const PlanChunk *c = &p->chunks[chunk];
    WpChunk k = wp_chunk_make(&p->model, chunk, c->layer0, c->nlayers, chunk == 0, chunk == p->nchunks - 1);
    return k.nparams * sizeof(float);
}

size_t plan_act_bytes(const Plan *p) {
    return (size_t)p->model.mbs * p->model.seq * p->model.hidden * sizeof(float);
}

int plan_finish(Plan *p, char *err, size_t errlen) {
    if (p->finished) return 0;
    if (!p->nchunks) return errmsg(err, errlen, "the strategy set no chunks");
    size_t largest = 0;
    for (int c = 0; c < p->nchunks; c++)
        if (plan_chunk_bytes(p, c) > largest) largest = plan_chunk_bytes(p, c);
    for (int r = 0; r < p->nranks; r++) {
        PlanRank *rk = &p->ranks[r];
        for (int b = 0; b < rk->nbufs; b++) {
            PlanBuf *buf = &rk->bufs[b];
            size_t whole = buf->chunk >= 0 ? plan_chunk_bytes(p, buf->chunk) : largest;
            size_t n = whole / sizeof(float);
            buf->bytes = (n / buf->nshards + (n % buf->nshards != 0)) * sizeof(float);
        }
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

int op_format(const Plan *p, int rank, const Op *op, char *out, size_t len) {
    const char *name = op_names[op->kind];
    switch ((OpKind)op->kind) {
    case OP_FWD: case OP_BWD_B:
        return snprintf(out, len, "%s chunk %d mb %d with %s", name, op->chunk, op->mb, bufname(p, rank, op->buf));
    case OP_BWD:
        return snprintf(out, len, "%s chunk %d mb %d with %s into %s", name, op->chunk, op->mb,
                        bufname(p, rank, op->buf), bufname(p, rank, op->buf2));
    case OP_BWD_W:
        return snprintf(out, len, "%s chunk %d mb %d into %s", name, op->chunk, op->mb, bufname(p, rank, op->buf2));
    case OP_SEND: case OP_RECV: {
        const char *dir = op->kind == OP_SEND ? "to" : "from";
        if (op->what == WHAT_A || op->what == WHAT_G)
            return snprintf(out, len, "%s %s chunk %d mb %d %s rank %d", name, what_names[op->what], op->chunk,
                            op->mb, dir, op->peer);
        return snprintf(out, len, "%s %s %s %s rank %d", name, what_names[op->what], bufname(p, rank, op->buf), dir, op->peer);
    }
    case OP_BCAST: case OP_REDUCE:
        return snprintf(out, len, "%s %s group %d root %d", name, bufname(p, rank, op->buf), op->group, op->peer);
    case OP_ALLREDUCE:
        return snprintf(out, len, "%s %s group %d", name, bufname(p, rank, op->buf), op->group);
    case OP_ALLGATHER: case OP_REDUCE_SCATTER:
        return snprintf(out, len, "%s %s -> %s group %d", name, bufname(p, rank, op->buf), bufname(p, rank, op->buf2), op->group);
    case OP_ACC:
        return snprintf(out, len, "ACC %s += %s", bufname(p, rank, op->buf), bufname(p, rank, op->buf2));
    case OP_COPY:
        return snprintf(out, len, "COPY %s = %s", bufname(p, rank, op->buf), bufname(p, rank, op->buf2));
    case OP_OPT:
        return snprintf(out, len, "OPT chunk %d %s with %s", op->chunk, bufname(p, rank, op->buf), bufname(p, rank, op->buf2));
    case OP_FREE:
        return snprintf(out, len, "FREE %s", bufname(p, rank, op->buf));
    case OP__COUNT: break;
    }
    return snprintf(out, len, "?");
}
