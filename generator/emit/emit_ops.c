/* The text of a rank's operations, rendered in C. emit.lua says once, per kind of operation, how
 * its call, its comment and its schedule.txt token read, as formats with named fields
 * ("wp_fwd(R, {chunk}, {mb}, {buf});"); the wording that depends on the operation's context
 * (where its weights came from, what a received value is for) is a phrase with variants, one
 * format each, of which this file picks one per operation. A plan of 600,000 operations is
 * rendered here without a Lua value per operation: that was most of emit's time. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <lua.h>
#include <lauxlib.h>
#include "emit/emit_ops.h"
#include "ir/op_table.h"
#include "util/xalloc.h"
#include "common/errmsg.h"

/* ---- growing strings ---- */

static void text_reserve(Text *t, size_t more) {
    if (t->len + more + 1 <= t->cap) return;
    size_t cap = t->cap ? t->cap : 4096;
    while (cap < t->len + more + 1) cap *= 2;
    t->s = xrealloc(t->s, cap);
    t->cap = cap;
}

/* (Not NUL-terminated: a Text is its s and len.) */
static void put(Text *t, const char *s, size_t n) {
    text_reserve(t, n);
    if (n) memcpy(t->s + t->len, s, n);   /* s may be NULL when n is 0 (an empty Text): not memcpy's */
    t->len += n;
}

static void put_str(Text *t, const char *s) { put(t, s, strlen(s)); }

static void put_spaces(Text *t, size_t n) {
    text_reserve(t, n);
    memset(t->s + t->len, ' ', n);
    t->len += n;
}

static void put_int(Text *t, long v) {
    char b[24], *q = b + sizeof b;
    unsigned long u = v < 0 ? 0UL - (unsigned long)v : (unsigned long)v;
    do { *--q = (char)('0' + u % 10); u /= 10; } while (u);
    if (v < 0) *--q = '-';
    put(t, q, (size_t)(b + sizeof b - q));
}

void text_free(Text *t) {
    free(t->s);
    t->s = NULL;
    t->len = t->cap = 0;
}

/* ---- fields, phrases and forms ---- */

/* The names a format may use inside braces.
 *   an operation's  turn; rank (this one); chunk, mb, peer (the other end, or a collective's root),
 *                   group (as the plan has them); nchunk, shard, nshards (what a transfer carries);
 *                   from_rank, from_turn (where a computation's weights came from and when; for a
 *                   transfer, the turn of the other end); src_turn (when this rank wrote the weights
 *                   a computation reads); use_turn, use_kind (the next use of what it wrote, in
 *                   emit.lua's words); held (the chunk a freed buffer held); bshard, bnshards (its
 *                   buffer's shard); gsize, members (its group's size, and its ranks in emit.lua's
 *                   words); buf, buf2 (its buffers' names); letter (W or D: what it carries or what
 *                   its buffer holds)
 *   its line's      call, where (the strategy line: both padded to the widest of the rank); why
 *                   (continued on more lines, at its column, rather than pass max_line)
 *   a turn's        turn; summary (continued like why); comm_, compute_, local_lines and _tokens;
 *                   from, to (a stretch of idle turns)
 *   phrases         fields whose text is a format, one of a few variants (phrase_variants), which
 *                   phrase_variant() picks for the operation. */
#define FIELDS(X)                                                                                       \
    X(turn) X(rank) X(chunk) X(mb) X(peer) X(group) X(nchunk) X(shard) X(nshards) X(from_rank)        \
    X(from_turn) X(src_turn) X(use_turn) X(use_kind) X(held) X(bshard) X(bnshards) X(gsize) X(members) \
    X(buf) X(buf2) X(letter)                                                                            \
    X(carried) X(part) X(origin) X(purpose) X(first) X(act) X(act_id) X(loss) X(their_turn)     \
    X(held_note)                                                                                        \
    X(call) X(where) X(why)                                                                             \
    X(summary) X(comm_lines) X(compute_lines) X(local_lines) X(comm_tokens) X(compute_tokens)          \
    X(local_tokens) X(from) X(to)

enum {
#define X(n) F_##n,
    FIELDS(X)
#undef X
    F__COUNT
};

static const char *const field_names[F__COUNT] = {
#define X(n) #n,
    FIELDS(X)
#undef X
};

enum { MAXVAR = 6 };

/* Variants of each phrase, in the order phrase_variant() returns them. */
static const char *const phrase_variants[F__COUNT][MAXVAR + 1] = {
    [F_carried] = { "whole", "shard" },
    [F_part] = { "whole", "shard" },
    [F_origin] = { "master", "bcast", "came", "copied", "gathered", "plain" },
    [F_purpose] = { "use", "none" },
    [F_first] = { "first", "add" },
    [F_act] = { "A", "G" },
    [F_act_id] = { "A", "G" },
    [F_loss] = { "last", "other" },
    [F_their_turn] = { "same", "other" },
    [F_held_note] = { "same", "other" },
};

static int is_phrase(int f) { return phrase_variants[f][0] != NULL; }

static int nvariants(int f) {
    int n = 0;
    while (n < MAXVAR && phrase_variants[f][n]) n++;
    return n;
}

enum {
#define X(n, kind) FM_##n,
    OP_FORMS(X)
#undef X
    FM__COUNT
};

static const char *const form_names[FM__COUNT] = {
#define X(n, kind) #n,
    OP_FORMS(X)
#undef X
};

enum { PART_CALL, PART_WHY, PART_TOKEN, NPARTS };
static const char *const part_names[NPARTS] = { "call", "why", "token" };

/* A compiled format: literal runs and fields. */
typedef struct Piece { int field; size_t off, len; } Piece;   /* field -1: the literal lit[off, off+len) */
typedef struct Fmt { Piece *pc; int n; char *lit; } Fmt;

struct OpText {
    Fmt form[FM__COUNT][NPARTS];
    Fmt phrase[F__COUNT][MAXVAR];
    Fmt line, line_bare, turn, idle_one, idle_range, summary, sched_busy, sched_idle;
    char *token_sep, *no_tokens, *turn_sep;
    int call_width, max_line;
    char *use_words[OP__COUNT];
    char **members;   /* by group */
    int ngroups;
    char **sources;   /* the names comments give Plan.sources */
    int nsources;
};

static void fmt_free(Fmt *f) {
    free(f->pc);
    free(f->lit);
}

/* "{name}" is a field, "{{" a brace; what ends the format is an error naming where. */
static int fmt_compile(Fmt *f, const char *src, const char *where, char *err, size_t errlen) {
    size_t n = strlen(src);
    f->lit = xmalloc(n + 1);
    memcpy(f->lit, src, n + 1);
    f->pc = xmalloc((n + 1) * sizeof *f->pc);
    f->n = 0;
    size_t i = 0, lit0 = 0;
    while (i < n) {
        if (src[i] != '{') { i++; continue; }
        if (i > lit0) f->pc[f->n++] = (Piece){ -1, lit0, i - lit0 };
        if (src[i + 1] == '{') { f->pc[f->n++] = (Piece){ -1, i, 1 }; i += 2; lit0 = i; continue; }
        const char *end = strchr(src + i, '}');
        if (!end) return errmsg(err, errlen, "emit.lua: %s: \"{\" without \"}\"", where);
        size_t len = (size_t)(end - src - i - 1);
        int field = -1;
        for (int k = 0; k < F__COUNT; k++)
            if (strlen(field_names[k]) == len && !memcmp(field_names[k], src + i + 1, len)) field = k;
        if (field < 0) return errmsg(err, errlen, "emit.lua: %s: no field {%.*s}", where, (int)len, src + i + 1);
        f->pc[f->n++] = (Piece){ field, 0, 0 };
        i += len + 2;
        lit0 = i;
    }
    if (i > lit0) f->pc[f->n++] = (Piece){ -1, lit0, i - lit0 };
    return 0;
}

/* ---- loading the formats from emit.lua ---- */

/* The string at key of the table at idx (a copy), or NULL with err set. */
static char *get_string(lua_State *L, int idx, const char *key, const char *where, char *err, size_t errlen) {
    lua_getfield(L, idx, key);
    char *s = NULL;
    if (lua_type(L, -1) == LUA_TSTRING) s = xalloc_check(strdup(lua_tostring(L, -1)));
    else errmsg(err, errlen, "emit.lua: %s.%s: expected a string", where, key);
    lua_pop(L, 1);
    return s;
}

static int get_fmt(lua_State *L, int idx, const char *key, Fmt *f, const char *where, char *err, size_t errlen) {
    char name[160];
    snprintf(name, sizeof name, "%s.%s", where, key);
    char *s = get_string(L, idx, key, where, err, errlen);
    if (!s) return -1;
    int rc = fmt_compile(f, s, name, err, errlen);
    free(s);
    return rc;
}

/* A phrase may use other phrases, but not itself through them: found here, not while rendering. */
static int phrase_loops(const OpText *ot, int f, int depth) {
    if (depth > F__COUNT) return 1;
    for (int v = 0; v < nvariants(f); v++)
        for (int k = 0; k < ot->phrase[f][v].n; k++) {
            int g = ot->phrase[f][v].pc[k].field;
            if (g >= 0 && is_phrase(g) && phrase_loops(ot, g, depth + 1)) return 1;
        }
    return 0;
}

static int load(OpText *ot, lua_State *L, int t, const Plan *p, char *err, size_t errlen) {
    if (!lua_istable(L, t)) return errmsg(err, errlen, "emit.lua: M.op_text must return a table");
    lua_getfield(L, t, "forms");
    int forms = lua_gettop(L);
    if (!lua_istable(L, forms)) return errmsg(err, errlen, "emit.lua: op_text().forms: expected a table");
    for (int k = 0; k < FM__COUNT; k++) {
        char where[96];
        snprintf(where, sizeof where, "forms.%s", form_names[k]);
        lua_getfield(L, forms, form_names[k]);
        if (!lua_istable(L, -1)) return errmsg(err, errlen, "emit.lua: %s: expected a table", where);
        for (int part = 0; part < NPARTS; part++)
            if (get_fmt(L, lua_gettop(L), part_names[part], &ot->form[k][part], where, err, errlen)) return -1;
        lua_pop(L, 1);
    }
    lua_pop(L, 1);

    lua_getfield(L, t, "phrases");
    int phrases = lua_gettop(L);
    if (!lua_istable(L, phrases)) return errmsg(err, errlen, "emit.lua: op_text().phrases: expected a table");
    for (int f = 0; f < F__COUNT; f++) {
        if (!is_phrase(f)) continue;
        char where[96];
        snprintf(where, sizeof where, "phrases.%s", field_names[f]);
        lua_getfield(L, phrases, field_names[f]);
        if (!lua_istable(L, -1)) return errmsg(err, errlen, "emit.lua: %s: expected a table of variants", where);
        for (int v = 0; v < nvariants(f); v++)
            if (get_fmt(L, lua_gettop(L), phrase_variants[f][v], &ot->phrase[f][v], where, err, errlen)) return -1;
        lua_pop(L, 1);
    }
    lua_pop(L, 1);
    for (int f = 0; f < F__COUNT; f++)
        if (is_phrase(f) && phrase_loops(ot, f, 0))
            return errmsg(err, errlen, "emit.lua: phrases.%s: uses itself", field_names[f]);

    if (get_fmt(L, t, "line", &ot->line, "op_text()", err, errlen) ||
        get_fmt(L, t, "line_bare", &ot->line_bare, "op_text()", err, errlen) ||
        get_fmt(L, t, "turn", &ot->turn, "op_text()", err, errlen) ||
        get_fmt(L, t, "idle_one", &ot->idle_one, "op_text()", err, errlen) ||
        get_fmt(L, t, "idle_range", &ot->idle_range, "op_text()", err, errlen) ||
        get_fmt(L, t, "summary", &ot->summary, "op_text()", err, errlen) ||
        get_fmt(L, t, "sched_busy", &ot->sched_busy, "op_text()", err, errlen) ||
        get_fmt(L, t, "sched_idle", &ot->sched_idle, "op_text()", err, errlen)) return -1;
    if (!(ot->token_sep = get_string(L, t, "token_sep", "op_text()", err, errlen)) ||
        !(ot->no_tokens = get_string(L, t, "no_tokens", "op_text()", err, errlen)) ||
        !(ot->turn_sep = get_string(L, t, "turn_sep", "op_text()", err, errlen))) return -1;
    lua_getfield(L, t, "call_width");
    lua_getfield(L, t, "max_line");
    ot->call_width = (int)lua_tointeger(L, -2);
    ot->max_line = (int)lua_tointeger(L, -1);
    lua_pop(L, 2);

    lua_getfield(L, t, "uses");
    if (!lua_istable(L, -1)) return errmsg(err, errlen, "emit.lua: op_text().uses: expected a table");
    for (int k = 0; k < OP__COUNT; k++)
        if (!(ot->use_words[k] = get_string(L, lua_gettop(L), op_names[k], "op_text().uses", err, errlen))) return -1;
    lua_pop(L, 1);

    lua_getfield(L, t, "members");
    if (!lua_istable(L, -1)) return errmsg(err, errlen, "emit.lua: op_text().members: expected a table");
    ot->members = xcalloc((size_t)p->ngroups + 1, sizeof *ot->members);
    ot->ngroups = p->ngroups;
    for (int g = 0; g < p->ngroups; g++) {
        lua_rawgeti(L, -1, g + 1);
        if (lua_type(L, -1) != LUA_TSTRING) return errmsg(err, errlen, "emit.lua: op_text().members[%d]: expected a string", g + 1);
        ot->members[g] = xalloc_check(strdup(lua_tostring(L, -1)));
        lua_pop(L, 1);
    }
    lua_pop(L, 1);

    lua_getfield(L, t, "sources");
    if (!lua_istable(L, -1)) return errmsg(err, errlen, "emit.lua: op_text().sources: expected a table");
    ot->sources = xcalloc((size_t)p->nsources + 1, sizeof *ot->sources);
    ot->nsources = p->nsources;
    for (int i = 0; i < p->nsources; i++) {
        lua_rawgeti(L, -1, i + 1);
        if (lua_type(L, -1) != LUA_TSTRING) return errmsg(err, errlen, "emit.lua: op_text().sources[%d]: expected a string", i + 1);
        ot->sources[i] = xalloc_check(strdup(lua_tostring(L, -1)));
        lua_pop(L, 1);
    }
    lua_pop(L, 1);
    return 0;
}

OpText *op_text_load(lua_State *L, int idx, const Plan *p, char *err, size_t errlen) {
    OpText *ot = xcalloc(1, sizeof *ot);
    int top = lua_gettop(L);
    idx = lua_absindex(L, idx);
    int rc = load(ot, L, idx, p, err, errlen);
    lua_settop(L, top);
    if (rc) { op_text_free(ot); return NULL; }
    return ot;
}

void op_text_free(OpText *ot) {
    if (!ot) return;
    for (int k = 0; k < FM__COUNT; k++)
        for (int part = 0; part < NPARTS; part++) fmt_free(&ot->form[k][part]);
    for (int f = 0; f < F__COUNT; f++)
        for (int v = 0; v < MAXVAR; v++) fmt_free(&ot->phrase[f][v]);
    Fmt *single[] = { &ot->line, &ot->line_bare, &ot->turn, &ot->idle_one, &ot->idle_range, &ot->summary,
                      &ot->sched_busy, &ot->sched_idle };
    for (size_t i = 0; i < sizeof single / sizeof *single; i++) fmt_free(single[i]);
    free(ot->token_sep); free(ot->no_tokens); free(ot->turn_sep);
    for (int k = 0; k < OP__COUNT; k++) free(ot->use_words[k]);
    for (int g = 0; g < ot->ngroups; g++) free(ot->members[g]);
    for (int i = 0; i < ot->nsources; i++) free(ot->sources[i]);
    free(ot->members);
    free(ot->sources);
    free(ot);
}

/* ---- what the verifier's order says about each operation ---- */

/* What an operation is and what a transfer does to its buffers come from the operation table
 * (ir/op_table.h): a transfer reads its buffer when it is posted (op_use), and when it completes
 * writes one (op_written) and may leave one empty (op_emptied: a gradient passed on, or reduced
 * away). */
static int transfer_reads(const Op *o, int rank) { return op_use(o, rank, 0) & USE_READ ? o->buf : -1; }

/* For each operation of rank r, in the order the verifier runs a turn (transfers posted, compute,
 * transfers complete, local operations): src, the operation that last wrote the weights a
 * computation reads (-1: they were there from the start); use, the next operation to read what
 * a transfer or copy wrote (-1: none this step); held, the chunk a freed buffer held (-1). */
static void explain(const Plan *p, int r, int *src, int *use, int *held, int *last, int *cont, int *next) {
    const PlanRank *rk = &p->ranks[r];
    for (int b = 0; b < rk->nbufs; b++) {
        last[b] = -1;
        cont[b] = rk->bufs[b].master ? rk->bufs[b].chunk : -1;
        next[b] = -1;
    }
    for (int i = 0; i < rk->nops; i++) src[i] = use[i] = held[i] = -1;
    for (int t = 0; t < p->nturns; t++) {
        int t0 = rk->turn_start[t], t1 = rk->turn_start[t + 1];
        for (int i = t0; i < t1; i++) {
            const Op *o = &rk->ops[i];
            if (!op_is_compute(o->kind)) continue;
            if (o->kind != OP_BWD_W && o->buf >= 0) src[i] = last[o->buf];   /* (a RING names no buffer) */
            if (o->buf2 >= 0) { last[o->buf2] = i; cont[o->buf2] = o->chunk; }
        }
        for (int i = t0; i < t1; i++) {
            if (!op_is_transfer(rk->ops[i].kind)) continue;
            int w = op_written(&rk->ops[i], r), e = op_emptied(&rk->ops[i], r);
            if (w >= 0) { last[w] = i; cont[w] = rk->notes[i].chunk; }
            if (e >= 0 && e != w) {
                if (w < 0) last[e] = i;
                cont[e] = -1;
            }
        }
        for (int i = t0; i < t1; i++) {
            const Op *o = &rk->ops[i];
            switch ((OpKind)o->kind) {
            case OP_ACC: last[o->buf] = i; cont[o->buf] = rk->notes[i].chunk; cont[o->buf2] = -1; break;
            case OP_COPY: last[o->buf] = i; cont[o->buf] = rk->notes[i].chunk; break;
            case OP_TIE: last[o->buf] = last[o->buf2] = i; break;
            case OP_OPT: cont[o->buf2] = -1; break;
            case OP_FREE: held[i] = cont[o->buf]; cont[o->buf] = -1; last[o->buf] = i; break;
            /* compute and transfers: the loops above, from the row's uses. No default in this
             * file's switches over kinds: a new kind is a -Wswitch error until it is written. */
            case OP_FWD: case OP_BWD: case OP_BWD_B: case OP_BWD_W: case OP_SEND: case OP_RECV: case OP_BCAST:
            case OP_REDUCE: case OP_ALLREDUCE: case OP_ALLGATHER: case OP_REDUCE_SCATTER: case OP_TIE_ALLREDUCE:
            case OP_RING: case OP__COUNT: break;
            }
        }
    }
    /* Backwards, for the next reader: a plain overwrite ends the chain of the value before it. */
    for (int t = p->nturns - 1; t >= 0; t--) {
        int t0 = rk->turn_start[t], t1 = rk->turn_start[t + 1];
        for (int i = t1 - 1; i >= t0; i--) {
            const Op *o = &rk->ops[i];
            switch ((OpKind)o->kind) {
            case OP_ACC: use[i] = next[o->buf]; next[o->buf] = next[o->buf2] = i; break;
            case OP_COPY: use[i] = next[o->buf]; next[o->buf] = -1; next[o->buf2] = i; break;
            case OP_TIE: use[i] = next[o->buf]; next[o->buf] = next[o->buf2] = i; break;
            case OP_OPT: next[o->buf] = next[o->buf2] = i; break;
            case OP_FREE: next[o->buf] = i; break;
            case OP_FWD: case OP_BWD: case OP_BWD_B: case OP_BWD_W: case OP_SEND: case OP_RECV: case OP_BCAST:
            case OP_REDUCE: case OP_ALLREDUCE: case OP_ALLGATHER: case OP_REDUCE_SCATTER: case OP_TIE_ALLREDUCE:
            case OP_RING: case OP__COUNT: break;
            }
        }
        for (int i = t1 - 1; i >= t0; i--) {
            if (!op_is_transfer(rk->ops[i].kind)) continue;
            int w = op_written(&rk->ops[i], r), e = op_emptied(&rk->ops[i], r);
            if (w >= 0) { use[i] = next[w]; next[w] = -1; }
            if (e >= 0) next[e] = -1;
        }
        /* a transfer that reads a buffer runs beside the turn's compute; when both read it, the
         * compute is the better answer to "what is it for" */
        for (int i = t1 - 1; i >= t0; i--) {
            int b = op_is_transfer(rk->ops[i].kind) ? transfer_reads(&rk->ops[i], r) : -1;
            if (b >= 0) next[b] = i;
        }
        for (int i = t1 - 1; i >= t0; i--) {
            const Op *o = &rk->ops[i];
            if (!op_is_compute(o->kind)) continue;
            if (o->buf2 >= 0) next[o->buf2] = i;
            if (o->kind != OP_BWD_W && o->buf >= 0) next[o->buf] = i;
        }
    }
}

/* ---- rendering ---- */

/* What the fields of one operation (or one turn) are. */
typedef struct Ctx {
    const OpText *ot;
    const Plan *p;
    const PlanRank *rk;
    int rank;
    const char *const *ids;
    const int *turn_of;         /* turn of each operation of the rank */
    const Op *o;                /* the operation; NULL for a turn's formats */
    const OpNote *nt;
    int i, turn, src, use, held, form;
    int wrap;                   /* the longest line {why} and {summary} may make (0: no limit) */
    const char *call;           /* the operation's call, rendered, and the widths of the columns */
    size_t call_len, call_width, where_width;
    Text *scratch;              /* for a field that wraps */
    const Text *summary, *lines[3], *tokens[3];
    int from, to;
} Ctx;

static const char *buf_id(const Ctx *c, int b) { return b >= 0 && b < c->rk->nbufs ? c->ids[b] : "?"; }

static const char *letter(const Ctx *c) {
    const Op *o = c->o;
    if (o->kind == OP_SEND || o->kind == OP_RECV) return what_names[o->what];
    return o->buf >= 0 && c->rk->bufs[o->buf].kind == BUF_D ? "D" : "W";
}

/* Which variant of phrase f the operation reads with (its index in phrase_variants[f]): carried,
 * part: a shard or the whole chunk; origin: the computation's weights are its rank's master, were
 * broadcast or sent by another rank, copied or all-gathered here, or none of these; purpose:
 * something later reads what it wrote, or nothing; first: its destination held nothing (written)
 * or something (added to); act: an activation or its gradient; loss: the last chunk or another;
 * their_turn: the other end's turn is this one or not; held_note: the freed buffer's name says
 * which chunk it held, or not. */
static int phrase_variant(const Ctx *c, int f) {
    const Op *o = c->o;
    switch (f) {
    case F_carried: case F_part: return c->nt->nshards > 1;
    case F_origin: {
        if (o->buf >= 0 && c->rk->bufs[o->buf].master) return 0;
        int sk = c->src >= 0 ? c->rk->ops[c->src].kind : -1;
        if (c->nt->from_rank >= 0) return sk == OP_BCAST ? 1 : 2;
        if (sk == OP_COPY) return 3;
        if (sk == OP_ALLGATHER) return 4;
        return 5;
    }
    case F_purpose: return c->use < 0;
    case F_first: return !c->nt->first;
    case F_act: case F_act_id: return o->what != WHAT_A;
    case F_loss: return o->chunk != c->p->nchunks - 1;
    case F_their_turn: return c->nt->from_turn != c->turn;
    case F_held_note: {
        /* "same" when the buffer's name already says what it held (W3 freeing W3) */
        char held[32];
        snprintf(held, sizeof held, "%s%d", letter(c), c->held);
        return strcmp(held, buf_id(c, o->buf)) != 0;
    }
    default: return 0;
    }
}

/* Where the operation came from: "NAME.lua:158" (the length; 0 when not known). */
static size_t put_where(Text *out, const Ctx *c) {
    uint32_t loc = c->o->srcloc;
    int file = (int)(loc >> 20) - 1, line = (int)(loc & 0xFFFFF);
    if (file < 0 || file >= c->ot->nsources) return 0;
    size_t len0 = out->len;
    put_str(out, c->ot->sources[file]);
    put(out, ":", 1);
    put_int(out, line);
    return out->len - len0;
}

/* The column the next character of out goes to. */
static size_t column(const Text *out) {
    size_t i = out->len;
    while (i > 0 && out->s[i - 1] != '\n') i--;
    return out->len - i;
}

/* text at the current column, broken at spaces so that no line is longer than max with tail (what
 * the format puts after it on the same line) at the end; the lines after the first start at the
 * same column. A word longer than a line stays whole. */
static void put_wrapped(Text *out, const char *text, size_t len, size_t tail, size_t max) {
    size_t col = column(out);
    if (!max || col + len + tail <= max) { put(out, text, len); return; }
    size_t room = max > col + 20 ? max - col : 20;
    while (len > 0) {
        if (len + tail <= room) { put(out, text, len); return; }
        size_t cut = room < len ? room : len - 1;   /* the space a line may end at */
        while (cut > 0 && text[cut] != ' ') cut--;
        if (cut == 0) {   /* one long word: up to the next space */
            cut = room;
            while (cut < len && text[cut] != ' ') cut++;
            if (cut == len) { put(out, text, len); return; }
        } else if (!memchr(text + cut + 1, ' ', len - cut - 1)) {
            /* not one word alone on the last line: the word before goes with it */
            size_t prev = cut - 1;
            while (prev > 0 && text[prev] != ' ') prev--;
            if (prev > 0) cut = prev;
        }
        size_t end = cut;
        while (end > 0 && text[end - 1] == ' ') end--;
        put(out, text, end);
        put(out, "\n", 1);
        put_spaces(out, col);
        while (cut < len && text[cut] == ' ') cut++;
        text += cut;
        len -= cut;
    }
}

static void render(Text *out, const Fmt *f, const Ctx *c);

/* The literal text a format puts after piece k on the same line. */
static size_t tail_of(const Fmt *f, int k) {
    size_t n = 0;
    for (k++; k < f->n && f->pc[k].field < 0; k++) {
        const char *s = f->lit + f->pc[k].off, *nl = memchr(s, '\n', f->pc[k].len);
        if (nl) return n + (size_t)(nl - s);
        n += f->pc[k].len;
    }
    return n;
}

static void put_field(Text *out, const Fmt *fm, int k, const Ctx *c) {
    int f = fm->pc[k].field;
    const Op *o = c->o;
    const OpNote *nt = c->nt;
    if (is_phrase(f)) { if (o) render(out, &c->ot->phrase[f][phrase_variant(c, f)], c); return; }
    switch (f) {
    case F_turn: put_int(out, c->turn); return;
    case F_rank: put_int(out, c->rank); return;
    case F_summary:
        if (c->wrap) put_wrapped(out, c->summary->s, c->summary->len, tail_of(fm, k), (size_t)c->wrap);
        else put(out, c->summary->s, c->summary->len);
        return;
    case F_comm_lines: case F_compute_lines: case F_local_lines: {
        const Text *t = c->lines[f - F_comm_lines];
        put(out, t->s, t->len);
        return;
    }
    case F_comm_tokens: case F_compute_tokens: case F_local_tokens: {
        const Text *t = c->tokens[f - F_comm_tokens];
        if (t->len) put(out, t->s, t->len);
        else put_str(out, c->ot->no_tokens);
        return;
    }
    case F_from: put_int(out, c->from); return;
    case F_to: put_int(out, c->to); return;
    default: break;
    }
    if (!o) return;   /* an operation's field in a turn's format: nothing */
    switch (f) {
    case F_chunk: put_int(out, o->chunk); break;
    case F_mb: put_int(out, o->mb); break;
    case F_peer: put_int(out, o->peer); break;
    case F_group: put_int(out, o->group); break;
    case F_nchunk: put_int(out, nt->chunk); break;
    case F_shard: put_int(out, nt->nshards > 1 ? nt->shard : 0); break;
    case F_nshards: put_int(out, nt->nshards > 1 ? nt->nshards : 1); break;
    case F_from_rank: put_int(out, nt->from_rank); break;
    case F_from_turn: put_int(out, nt->from_turn); break;
    case F_src_turn: put_int(out, c->src >= 0 ? c->turn_of[c->src] : -1); break;
    case F_use_turn: put_int(out, c->use >= 0 ? c->turn_of[c->use] : -1); break;
    case F_use_kind: put_str(out, c->use >= 0 ? c->ot->use_words[c->rk->ops[c->use].kind] : "?"); break;
    case F_held: put_int(out, c->held); break;
    case F_bshard: put_int(out, o->buf >= 0 ? c->rk->bufs[o->buf].shard : 0); break;
    case F_bnshards: put_int(out, o->buf >= 0 ? c->rk->bufs[o->buf].nshards : 1); break;
    case F_gsize: put_int(out, o->group >= 0 ? c->p->groups[o->group].n : 0); break;
    case F_members: put_str(out, o->group >= 0 ? c->ot->members[o->group] : "?"); break;
    case F_buf: put_str(out, buf_id(c, o->buf)); break;
    case F_buf2: put_str(out, buf_id(c, o->buf2)); break;
    case F_letter: put_str(out, letter(c)); break;
    case F_call:   /* padded to the rank's widest call */
        if (!c->call) { render(out, &c->ot->form[c->form][PART_CALL], c); break; }
        put(out, c->call, c->call_len);
        if (c->call_len < c->call_width) put_spaces(out, c->call_width - c->call_len);
        break;
    case F_where: {   /* padded to the rank's widest */
        size_t n = put_where(out, c);
        if (n < c->where_width) put_spaces(out, c->where_width - n);
        break;
    }
    case F_why:
        if (!c->wrap) { render(out, &c->ot->form[c->form][PART_WHY], c); break; }
        c->scratch->len = 0;
        render(c->scratch, &c->ot->form[c->form][PART_WHY], c);
        put_wrapped(out, c->scratch->s, c->scratch->len, tail_of(fm, k), (size_t)c->wrap);
        break;
    default: break;
    }
}

static void render(Text *out, const Fmt *f, const Ctx *c) {
    for (int k = 0; k < f->n; k++) {
        const Piece *pc = &f->pc[k];
        if (pc->field < 0) put(out, f->lit + pc->off, pc->len);
        else put_field(out, f, k, c);
    }
}

static int form_of(const Ctx *c) {
    const Op *o = c->o;
    int act = o->what == WHAT_A || o->what == WHAT_G;
    switch ((OpKind)o->kind) {
    case OP_FWD: return FM_FWD;
    case OP_BWD: return FM_BWD;
    case OP_BWD_B: return FM_BWD_B;
    case OP_BWD_W: return FM_BWD_W;
    case OP_SEND: return act ? FM_SEND_ACT : o->what == WHAT_D ? FM_SEND_D : FM_SEND_W;
    case OP_RECV: return act ? FM_RECV_ACT : FM_RECV;
    case OP_BCAST: return o->peer == c->rank ? FM_BCAST_ROOT : FM_BCAST;
    case OP_REDUCE: return o->peer == c->rank ? FM_REDUCE_ROOT : FM_REDUCE;
    case OP_ALLREDUCE: return FM_ALLREDUCE;
    case OP_ALLGATHER: return FM_ALLGATHER;
    case OP_REDUCE_SCATTER: return FM_REDUCE_SCATTER;
    case OP_TIE_ALLREDUCE: return FM_TIE_ALLREDUCE;
    case OP_ACC: return c->nt->first ? FM_ACC_FIRST : FM_ACC;
    case OP_COPY: return FM_COPY;
    case OP_TIE: return FM_TIE;
    case OP_OPT: return o->buf >= 0 && c->rk->bufs[o->buf].nshards > 1 ? FM_OPT_SHARD : FM_OPT;
    case OP_FREE: return c->held >= 0 ? FM_FREE_HELD : FM_FREE;
    /* the ring attention of the compute after it: a comment, its blocks moved inside that call
     * (emit.lua FORMS.RING). Context-parallel plans are refused before emitting for now (cmd_plan.c:
     * the train loop does not run the ring yet) */
    case OP_RING: return FM_RING;
    case OP__COUNT: break;
    }
    /* not a kind: the verifier refuses what it has no rule for, so this is the emitter's own bug */
    fprintf(stderr, "wpgen: internal error: emitting operation kind %d, which has no form\n", o->kind);
    abort();
}

/* A turn's lines and tokens by phase: comm_, compute_ and local_ in the order of OpPhase. */
_Static_assert(OP_PHASE_TRANSFER == 0 && OP_PHASE_COMPUTE == 1 && OP_PHASE_LOCAL == 2 && OP_PHASE__COUNT == 3,
               "lines[] and tokens[] are indexed by OpPhase");
static int phase_of(int kind) { return op_info(kind)->phase; }

static void op_at(Ctx *c, int i, const int *src, const int *use, const int *held, const int *form) {
    c->o = &c->rk->ops[i];
    c->nt = &c->rk->notes[i];
    c->i = i;
    c->turn = c->turn_of[i];
    c->src = src[i];
    c->use = use[i];
    c->held = held[i];
    if (form) c->form = form[i];
}

void op_text_rank(const OpText *ot, const Plan *p, int r, const char *const *ids, Text *body, Text *sched, int *nbusy) {
    const PlanRank *rk = &p->ranks[r];
    int n = rk->nops;
    int *scratch = xmalloc(((size_t)n * 5 + (size_t)rk->nbufs * 3 + 1) * sizeof *scratch);
    int *src = scratch, *use = src + n, *held = use + n, *turn_of = held + n, *form = turn_of + n;
    int *last = form + n, *cont = last + rk->nbufs, *next = cont + rk->nbufs;
    explain(p, r, src, use, held, last, cont, next);
    for (int t = 0; t < p->nturns; t++)
        for (int i = rk->turn_start[t]; i < rk->turn_start[t + 1]; i++) turn_of[i] = t;

    /* The calls first: their column is as wide as the widest (up to call_width), and the column of
     * the strategy lines as wide as the widest. */
    Text calls = { 0 }, why = { 0 };
    Ctx c = { .ot = ot, .p = p, .rk = rk, .rank = r, .ids = ids, .turn_of = turn_of, .wrap = ot->max_line,
              .scratch = &why };
    size_t *call_end = xmalloc(((size_t)n + 1) * sizeof *call_end);
    size_t width = 0, where = 0;
    for (int i = 0; i < n; i++) {
        op_at(&c, i, src, use, held, NULL);
        c.form = form[i] = form_of(&c);
        size_t start = calls.len;
        render(&calls, &ot->form[form[i]][PART_CALL], &c);
        call_end[i] = calls.len;
        if (calls.len - start > width) width = calls.len - start;
        size_t w = put_where(&calls, &c);
        if (w > where) where = w;
        calls.len -= w;
    }
    c.call_width = width > (size_t)ot->call_width ? (size_t)ot->call_width : width;
    c.where_width = where;

    Text lines[3] = { { 0 } }, tokens[3] = { { 0 } }, summary = { 0 };
    int entries = 0, last_busy = -1, busy = 0;
    size_t tsep = strlen(ot->token_sep), isep = strlen(ot->turn_sep);
    Ctx tc = { .ot = ot, .p = p, .rk = rk, .rank = r, .ids = ids, .turn_of = turn_of, .summary = &summary,
               .wrap = ot->max_line };
    for (int k = 0; k < 3; k++) { tc.lines[k] = &lines[k]; tc.tokens[k] = &tokens[k]; }
    for (int t = 0; t <= p->nturns; t++) {
        int t0 = t < p->nturns ? rk->turn_start[t] : n, t1 = t < p->nturns ? rk->turn_start[t + 1] : n;
        /* a stretch of idle turns gets one comment, before the next busy turn or at the end */
        int idle_to = t0 < t1 ? t - 1 : t == p->nturns ? t - 1 : -2;
        if (idle_to > last_busy) {
            if (entries++) put(body, ot->turn_sep, isep);
            tc.from = last_busy + 1;
            tc.to = idle_to;
            render(body, tc.to > tc.from ? &ot->idle_range : &ot->idle_one, &tc);
            last_busy = idle_to;
        }
        if (t == p->nturns) break;
        tc.turn = t;
        tc.wrap = 0;   /* schedule.txt: one line per turn, however long */
        if (t0 == t1) { render(sched, &ot->sched_idle, &tc); put(sched, "\n", 1); continue; }
        for (int k = 0; k < 3; k++) lines[k].len = tokens[k].len = 0;
        for (int i = t0; i < t1; i++) {
            op_at(&c, i, src, use, held, form);
            int ph = phase_of(c.o->kind);
            size_t c0 = i ? call_end[i - 1] : 0;
            c.call = calls.s + c0;
            c.call_len = call_end[i] - c0;
            render(&lines[ph], c.o->srcloc && (int)(c.o->srcloc >> 20) <= ot->nsources ? &ot->line : &ot->line_bare, &c);
            put(&lines[ph], "\n", 1);
            if (tokens[ph].len) put(&tokens[ph], ot->token_sep, tsep);
            render(&tokens[ph], &ot->form[form[i]][PART_TOKEN], &c);
        }
        summary.len = 0;
        render(&summary, &ot->summary, &tc);
        render(sched, &ot->sched_busy, &tc);
        put(sched, "\n", 1);
        tc.wrap = ot->max_line;
        if (entries++) put(body, ot->turn_sep, isep);
        render(body, &ot->turn, &tc);
        last_busy = t;
        busy++;
    }
    *nbusy = busy;
    for (int k = 0; k < 3; k++) { text_free(&lines[k]); text_free(&tokens[k]); }
    text_free(&summary);
    text_free(&calls);
    text_free(&why);
    free(call_end);
    free(scratch);
}
