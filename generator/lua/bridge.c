/* The Lua bridge: runs a strategy script, in the sandbox (sandbox.c), with the topology, the
 * model and the options as tables, and gives it the plan builder (a userdata whose methods call
 * plan_add_*). A Lua error comes back as "script:line: message" with a traceback, an option the
 * strategy refuses as one line "--flag value: message". Also the trusted Lua state of wpgen's own
 * scripts (the emitter) and the home directory they are found in. */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <lua.h>
#include <lauxlib.h>
#include <lualib.h>
#include "lua/bridge.h"
#include "ir/op_table.h"
#include "util/xalloc.h"
#include "lua/sandbox.h"
#include "place/placement.h"

#define PLAN_MT "wpgen.plan"

static Plan *check_plan(lua_State *L) {
    Plan **pp = luaL_checkudata(L, 1, PLAN_MT);
    return *pp;
}

static int check_rank(lua_State *L, Plan *p, int arg) {
    lua_Integer r = luaL_checkinteger(L, arg);
    if (r < 0 || r >= p->nranks) luaL_error(L, "no rank %d (the plan has %d)", (int)r, p->nranks);
    return (int)r;
}

/* A buffer argument: its name on this rank, or nil. */
static int check_buf(lua_State *L, Plan *p, int rank, int arg) {
    if (lua_isnoneornil(L, arg)) return -1;
    const char *name = luaL_checkstring(L, arg);
    int b = plan_find_buf(p, rank, name);
    if (b < 0) luaL_error(L, "rank %d has no buffer \"%s\"", rank, name);
    return b;
}

static int opt_int(lua_State *L, int arg, int dflt) {
    return lua_isnoneornil(L, arg) ? dflt : (int)luaL_checkinteger(L, arg);
}

/* The plan userdata: the plan (first, so that a Plan ** reads it) and the strategy file the last
 * operation came from, so that the next one from it is found without a search. */
typedef struct PlanUd {
    Plan *p;
    uint32_t last_index;        /* its Plan.sources index + 1; 0: none yet */
    size_t last_len;
    char last[512];             /* its Lua source name, "@path" */
} PlanUd;

/* Index + 1 of a strategy file in p->sources, added if new (0: the table is full). Files under
 * wpgen's home are named from there ("schedules/lib/NAME.lua"), others as Lua was given them. */
static uint32_t intern_source(Plan *p, const char *path) {
    const char *home = wpgen_home();
    size_t h = strlen(home);
    if (!strncmp(path, home, h) && path[h] == '/') path += h + 1;
    while (!strncmp(path, "./", 2)) path += 2;
    for (int i = 0; i < p->nsources; i++)
        if (!strcmp(p->sources[i], path)) return (uint32_t)i + 1;
    if (p->nsources >= 4095) return 0;
    p->sources = xrealloc(p->sources, (size_t)(p->nsources + 1) * sizeof *p->sources);
    p->sources[p->nsources++] = xstrdup(path);
    return (uint32_t)p->nsources;
}

/* Op.srcloc of an operation being added: the innermost function on the Lua stack that runs from a
 * file, which is the line calling plan:xxx, in the strategy or in a schedules/lib helper (the
 * helper's line says which call made the operation; its caller is one frame up). 0 if none. */
static uint32_t srcloc(lua_State *L, PlanUd *ud) {
    lua_Debug ar;
    for (int level = 1; lua_getstack(L, level, &ar); level++) {
        if (!lua_getinfo(L, "Sl", &ar)) return 0;
        if (ar.source[0] != '@' || ar.currentline <= 0) continue;
        if (ar.currentline > 0xFFFFF) return 0;
        uint32_t i = ud->last_index;
        if (!(i && ar.srclen == ud->last_len && !memcmp(ar.source, ud->last, ar.srclen))) {
            i = intern_source(ud->p, ar.source + 1);
            ud->last_index = ar.srclen < sizeof ud->last ? i : 0;   /* too long to remember: searched each time */
            ud->last_len = ar.srclen;
            if (ud->last_index) memcpy(ud->last, ar.source, ar.srclen);
        }
        return i ? i << 20 | (uint32_t)ar.currentline : 0;
    }
    return 0;
}

static void add_op(lua_State *L, Plan *p, int rank, int turn, Op *op) {
    char err[256];
    op->srcloc = srcloc(L, lua_touserdata(L, 1));
    sandbox_charge(L, sizeof *op);   /* the plan holds it for the script: its memory limit counts it */
    if (plan_add_op(p, rank, turn, op, err, sizeof err)) luaL_error(L, "%s", err);
}

static Op op_new(int kind) {
    Op op = { .kind = (uint8_t)kind, .what = WHAT_NONE, .buf = -1, .buf2 = -1, .chunk = -1, .mb = -1, .peer = -1, .group = -1 };
    return op;
}

/* plan:fwd(rank, turn, chunk, mb, wbuf) / plan:bwd_b(...) */
static int compute_op(lua_State *L, int kind) {
    Plan *p = check_plan(L);
    int r = check_rank(L, p, 2), t = (int)luaL_checkinteger(L, 3);
    Op op = op_new(kind);
    op.chunk = (int)luaL_checkinteger(L, 4);
    op.mb = (int)luaL_checkinteger(L, 5);
    if (kind == OP_BWD_W) op.buf2 = (int16_t)check_buf(L, p, r, 6);
    else {
        op.buf = (int16_t)check_buf(L, p, r, 6);
        if (kind == OP_BWD) op.buf2 = (int16_t)check_buf(L, p, r, 7);
    }
    add_op(L, p, r, t, &op);
    return 0;
}
static int l_fwd(lua_State *L) { return compute_op(L, OP_FWD); }
static int l_bwd(lua_State *L) { return compute_op(L, OP_BWD); }
static int l_bwd_b(lua_State *L) { return compute_op(L, OP_BWD_B); }
static int l_bwd_w(lua_State *L) { return compute_op(L, OP_BWD_W); }

/* plan:send(rank, turn, what, buf, peer) for W/D; plan:send(rank, turn, what, chunk, mb, peer) for A/G */
static int p2p_op(lua_State *L, int kind) {
    Plan *p = check_plan(L);
    int r = check_rank(L, p, 2), t = (int)luaL_checkinteger(L, 3);
    const char *what = luaL_checkstring(L, 4);
    Op op = op_new(kind);
    if (!strcmp(what, "W") || !strcmp(what, "D")) {
        op.what = what[0] == 'W' ? WHAT_W : WHAT_D;
        op.buf = (int16_t)check_buf(L, p, r, 5);
        op.peer = check_rank(L, p, 6);
    } else if (!strcmp(what, "A") || !strcmp(what, "G")) {
        op.what = what[0] == 'A' ? WHAT_A : WHAT_G;
        op.chunk = (int)luaL_checkinteger(L, 5);
        op.mb = (int)luaL_checkinteger(L, 6);
        op.peer = check_rank(L, p, 7);
    } else {
        return luaL_error(L, "%s: expected \"W\", \"D\", \"A\" or \"G\", got \"%s\"", op_names[kind], what);
    }
    add_op(L, p, r, t, &op);
    return 0;
}
static int l_send(lua_State *L) { return p2p_op(L, OP_SEND); }
static int l_recv(lua_State *L) { return p2p_op(L, OP_RECV); }

static int check_group(lua_State *L, Plan *p, int arg) {
    lua_Integer g = luaL_checkinteger(L, arg);
    if (g < 0 || g >= p->ngroups) luaL_error(L, "no group %d", (int)g);
    return (int)g;
}

/* plan:bcast(rank, turn, buf, group, root), plan:reduce(...same), plan:allreduce(rank, turn, buf, group),
 * plan:allgather(rank, turn, shard_buf, whole_buf, group), plan:reduce_scatter(rank, turn, whole, shard, group),
 * plan:tie_allreduce(rank, turn, buf, group) */
static int coll_op(lua_State *L, int kind) {
    Plan *p = check_plan(L);
    int r = check_rank(L, p, 2), t = (int)luaL_checkinteger(L, 3);
    Op op = op_new(kind);
    op.buf = (int16_t)check_buf(L, p, r, 4);
    if (kind == OP_ALLGATHER || kind == OP_REDUCE_SCATTER) {
        op.buf2 = (int16_t)check_buf(L, p, r, 5);
        op.group = check_group(L, p, 6);
    } else {
        op.group = check_group(L, p, 5);
        if (op_info(kind)->root) op.peer = check_rank(L, p, 6);
    }
    add_op(L, p, r, t, &op);
    return 0;
}
static int l_bcast(lua_State *L) { return coll_op(L, OP_BCAST); }
static int l_reduce(lua_State *L) { return coll_op(L, OP_REDUCE); }
static int l_allreduce(lua_State *L) { return coll_op(L, OP_ALLREDUCE); }
static int l_allgather(lua_State *L) { return coll_op(L, OP_ALLGATHER); }
static int l_reduce_scatter(lua_State *L) { return coll_op(L, OP_REDUCE_SCATTER); }
static int l_tie_allreduce(lua_State *L) { return coll_op(L, OP_TIE_ALLREDUCE); }

/* plan:acc(rank, turn, dst, src), plan:copy(rank, turn, dst, src), plan:tie(rank, turn, embedding_grad, head_grad) */
static int local2_op(lua_State *L, int kind) {
    Plan *p = check_plan(L);
    int r = check_rank(L, p, 2), t = (int)luaL_checkinteger(L, 3);
    Op op = op_new(kind);
    op.buf = (int16_t)check_buf(L, p, r, 4);
    op.buf2 = (int16_t)check_buf(L, p, r, 5);
    add_op(L, p, r, t, &op);
    return 0;
}
static int l_acc(lua_State *L) { return local2_op(L, OP_ACC); }
static int l_copy(lua_State *L) { return local2_op(L, OP_COPY); }
static int l_tie(lua_State *L) { return local2_op(L, OP_TIE); }

/* plan:opt(rank, turn, chunk, master, grad) */
static int l_opt(lua_State *L) {
    Plan *p = check_plan(L);
    int r = check_rank(L, p, 2), t = (int)luaL_checkinteger(L, 3);
    Op op = op_new(OP_OPT);
    op.chunk = (int)luaL_checkinteger(L, 4);
    op.buf = (int16_t)check_buf(L, p, r, 5);
    op.buf2 = (int16_t)check_buf(L, p, r, 6);
    add_op(L, p, r, t, &op);
    return 0;
}

/* plan:free(rank, turn, buf) */
static int l_free(lua_State *L) {
    Plan *p = check_plan(L);
    int r = check_rank(L, p, 2), t = (int)luaL_checkinteger(L, 3);
    Op op = op_new(OP_FREE);
    op.buf = (int16_t)check_buf(L, p, r, 4);
    add_op(L, p, r, t, &op);
    return 0;
}

/* plan:chunks({layers, ...}) */
static int l_chunks(lua_State *L) {
    Plan *p = check_plan(L);
    luaL_checktype(L, 2, LUA_TTABLE);
    int n = (int)luaL_len(L, 2);
    int *layers = xmalloc((size_t)n * sizeof *layers);
    for (int i = 0; i < n; i++) {
        lua_geti(L, 2, i + 1);
        layers[i] = (int)lua_tointeger(L, -1);
        lua_pop(L, 1);
    }
    char err[256];
    int rc = plan_set_chunks(p, layers, n, err, sizeof err);
    free(layers);
    if (rc) return luaL_error(L, "%s", err);
    return 0;
}

/* plan:replicate(chunk): the first or last chunk kept on every rank (plan_set_replicated) */
static int l_replicate(lua_State *L) {
    Plan *p = check_plan(L);
    char err[256];
    if (plan_set_replicated(p, (int)luaL_checkinteger(L, 2), err, sizeof err)) return luaL_error(L, "%s", err);
    return 0;
}

/* plan:owner(chunk, rank) */
static int l_owner(lua_State *L) {
    Plan *p = check_plan(L);
    char err[256];
    if (plan_add_owner(p, (int)luaL_checkinteger(L, 2), (int)luaL_checkinteger(L, 3), err, sizeof err))
        return luaL_error(L, "%s", err);
    return 0;
}

/* plan:buffer(rank, name, "W"|"D", {chunk=, master=, shard=, nshards=}) */
static int l_buffer(lua_State *L) {
    Plan *p = check_plan(L);
    int r = check_rank(L, p, 2);
    const char *name = luaL_checkstring(L, 3);
    const char *kind = luaL_checkstring(L, 4);
    if (strcmp(kind, "W") && strcmp(kind, "D")) return luaL_error(L, "buffer %s: kind must be \"W\" or \"D\", got \"%s\"", name, kind);
    int chunk = -1, master = 0, shard = 0, nshards = 1;
    if (lua_istable(L, 5)) {
        lua_getfield(L, 5, "chunk"); chunk = opt_int(L, -1, -1); lua_pop(L, 1);
        lua_getfield(L, 5, "master"); master = lua_toboolean(L, -1); lua_pop(L, 1);
        lua_getfield(L, 5, "shard"); shard = opt_int(L, -1, 0); lua_pop(L, 1);
        lua_getfield(L, 5, "nshards"); nshards = opt_int(L, -1, 1); lua_pop(L, 1);
    }
    char err[256];
    sandbox_charge(L, 64 + strlen(name));   /* a buffer's description and name */
    if (plan_add_buf(p, r, name, kind[0] == 'W' ? BUF_W : BUF_D, chunk, master, shard, nshards, err, sizeof err) < 0)
        return luaL_error(L, "%s", err);
    return 0;
}

/* plan:group({ranks...}) -> group id (the same list gives the same id) */
static int l_group(lua_State *L) {
    Plan *p = check_plan(L);
    luaL_checktype(L, 2, LUA_TTABLE);
    int n = (int)luaL_len(L, 2);
    if (n < 0 || n > p->nranks) return luaL_error(L, "plan:group: expected at most the plan's %d ranks, got %d", p->nranks, n);
    sandbox_charge(L, (size_t)n * sizeof(int));
    int *ranks = xmalloc((size_t)n * sizeof *ranks);
    for (int i = 0; i < n; i++) {
        lua_geti(L, 2, i + 1);
        ranks[i] = (int)lua_tointeger(L, -1);
        lua_pop(L, 1);
    }
    char err[256];
    int g = plan_add_group(p, ranks, n, err, sizeof err);
    free(ranks);
    if (g < 0) return luaL_error(L, "%s", err);
    lua_pushinteger(L, g);
    return 1;
}

int opts_weight_wire_fp32(const StrategyOpts *o) {
    return o->weight_wire && !strcmp(o->weight_wire, "fp32") && o->precision != WP_FP32;
}

/* plan:copy_replica(): replica 0 as built so far copied onto every other replica (plan_copy_replica) */
static int l_copy_replica(lua_State *L) {
    Plan *p = check_plan(L);
    char err[256];
    if (plan_copy_replica(p, err, sizeof err)) return luaL_error(L, "%s", err);
    return 0;
}

/* plan:place(rank, replica, stage) */
static int l_place(lua_State *L) {
    Plan *p = check_plan(L);
    int r = check_rank(L, p, 2);
    p->ranks[r].replica = (int)luaL_checkinteger(L, 3);
    p->ranks[r].stage = (int)luaL_checkinteger(L, 4);
    return 0;
}

/* plan:note(text): the strategy's words for the summary */
static int l_note(lua_State *L) {
    Plan *p = check_plan(L);
    size_t n;
    const char *s = luaL_checklstring(L, 2, &n);
    n = strlen(s);   /* up to a NUL, as the summary prints it */
    sandbox_charge(L, n + 1);
    /* appended at the known end, the room doubled: a script's many notes cost linear time */
    size_t old = p->notes_len;
    if (old + n + 2 > p->notes_cap) {
        p->notes_cap = old + n + 2 > 2 * p->notes_cap ? old + n + 2 : 2 * p->notes_cap;
        p->notes = xrealloc(p->notes, p->notes_cap);
    }
    memcpy(p->notes + old, s, n);
    p->notes[old + n] = '\n';
    p->notes[old + n + 1] = 0;
    p->notes_len = old + n + 1;
    return 0;
}

static const luaL_Reg plan_methods[] = {
    { "fwd", l_fwd }, { "bwd", l_bwd }, { "bwd_b", l_bwd_b }, { "bwd_w", l_bwd_w },
    { "send", l_send }, { "recv", l_recv },
    { "bcast", l_bcast }, { "reduce", l_reduce }, { "allreduce", l_allreduce },
    { "allgather", l_allgather }, { "reduce_scatter", l_reduce_scatter },
    { "tie_allreduce", l_tie_allreduce },
    { "acc", l_acc }, { "copy", l_copy }, { "tie", l_tie }, { "opt", l_opt }, { "free", l_free },
    { "chunks", l_chunks }, { "replicate", l_replicate }, { "owner", l_owner }, { "buffer", l_buffer }, { "group", l_group },
    { "place", l_place }, { "note", l_note }, { "copy_replica", l_copy_replica },
    { "solve_placement", placement_lua_solve },   /* the placement solver, generator/place/placement.c */
    { NULL, NULL },
};

/* ---- tables handed to the strategy ---- */

void lua_set_num(lua_State *L, const char *k, double v) { lua_pushnumber(L, v); lua_setfield(L, -2, k); }
void lua_set_int(lua_State *L, const char *k, long long v) { lua_pushinteger(L, (lua_Integer)v); lua_setfield(L, -2, k); }
void lua_set_str(lua_State *L, const char *k, const char *v) { lua_pushstring(L, v ? v : ""); lua_setfield(L, -2, k); }

static void push_link(lua_State *L, const Link *l) {
    lua_createtable(L, 0, 3);
    lua_set_str(L, "type", link_type_name(l->type));
    lua_set_num(L, "bw", l->bw);
    lua_set_num(L, "lat", l->lat);
}

static void push_topology(lua_State *L, const Topology *t) {
    lua_createtable(L, 0, 6);
    lua_set_str(L, "name", t->name);
    lua_set_int(L, "ndevices", t->ndevices);
    lua_set_int(L, "nics_per_node", t->nics_per_node);
    push_link(L, &t->net);
    lua_setfield(L, -2, "net");
    lua_createtable(L, t->nnodes, 0);
    for (int i = 0; i < t->nnodes; i++) {
        const Node *n = &t->nodes[i];
        lua_createtable(L, 0, 7);
        lua_set_str(L, "name", n->name);
        lua_set_int(L, "devices", n->ndevices);
        lua_set_int(L, "first_device", n->first_device);
        lua_set_int(L, "islands", n->islands);
        lua_set_str(L, "type", t->types[n->type].name);
        lua_set_num(L, "peak_flops", t->types[n->type].peak_flops);
        lua_set_num(L, "mem_bytes", t->types[n->type].mem_bytes);
        push_link(L, &n->intra);
        lua_setfield(L, -2, "intra");
        lua_seti(L, -2, i + 1);
    }
    lua_setfield(L, -2, "nodes");
    /* node of each device, 0-based, for convenience */
    lua_createtable(L, t->ndevices, 0);
    for (int d = 0; d < t->ndevices; d++) {
        lua_pushinteger(L, topology_node_of(t, d));
        lua_seti(L, -2, d);
    }
    lua_setfield(L, -2, "node_of");
}

static void push_model(lua_State *L, const WpConfig *m, const char *name) {
    lua_createtable(L, 0, 12);
    lua_set_str(L, "name", name);
    lua_set_int(L, "hidden", m->hidden); lua_set_int(L, "layers", m->layers); lua_set_int(L, "heads", m->heads);
    lua_set_int(L, "kv_heads", m->kv_heads); lua_set_int(L, "head_dim", m->head_dim); lua_set_int(L, "ffn", m->ffn);
    lua_set_int(L, "vocab", m->vocab); lua_set_int(L, "seq", m->seq); lua_set_int(L, "mbs", m->mbs);
    lua_set_int(L, "tied", m->tied);
    lua_set_num(L, "layer_params", (double)wp_layer_nparams(m));
}

void strategy_push_opts(lua_State *L, const StrategyOpts *o, int nranks, int decl) {
    decl = lua_absindex(L, decl);
    lua_createtable(L, 0, 16);
    lua_set_int(L, "ranks", nranks);
    lua_set_int(L, "micro_batches", o->micro_batches);
    lua_set_int(L, "replicas", o->replicas);
    lua_set_int(L, "chunks", o->chunks);
    lua_set_int(L, "total_mbs", (long long)nranks * o->micro_batches);
    lua_set_int(L, "recompute", o->recompute != 0);   /* whether; offload is the runtime's, not the plan's shape */
    lua_set_str(L, "precision", wp_dtype_name(o->precision));
    lua_set_str(L, "grad_precision", wp_dtype_name(o->grad_precision));
    lua_set_str(L, "weight_wire", o->weight_wire ? o->weight_wire : wp_dtype_name(o->precision));
    /* the strategy's own options (its table's `options`): each as given, else its default */
    if (lua_getfield(L, decl, "options") == LUA_TTABLE) {
        lua_Integer n = luaL_len(L, -1);
        for (lua_Integer i = 1; i <= n; i++) {
            if (lua_geti(L, -1, i) != LUA_TTABLE) { lua_pop(L, 1); continue; }
            if (lua_getfield(L, -1, "name") == LUA_TSTRING) {
                const char *name = lua_tostring(L, -1);
                const OptVal *v = opts_get(o, name);
                lua_getfield(L, -2, "type");
                const char *type = lua_tostring(L, -1);
                int is_bool = type && !strcmp(type, "bool"), is_int = type && !strcmp(type, "int");
                lua_pop(L, 1);
                if (!v) lua_getfield(L, -2, "default");
                else if (is_bool) lua_pushboolean(L, v->i != 0);
                else if (is_int) lua_pushinteger(L, (lua_Integer)v->i);
                else lua_pushstring(L, v->type == OPTVAL_STR ? v->s : "");
                if (is_bool && lua_isnil(L, -1)) { lua_pop(L, 1); lua_pushboolean(L, 0); }
                lua_setfield(L, -5, name);   /* opts: below the options, the option and its name */
            }
            lua_pop(L, 2);
        }
    }
    lua_pop(L, 1);
}

static int traceback(lua_State *L) {
    const char *msg = lua_tostring(L, 1);
    luaL_traceback(L, L, msg ? msg : "(error object is not a string)", 1);
    return 1;
}

const OptVal *opts_get(const StrategyOpts *o, const char *name) {
    for (int i = 0; i < o->nx; i++)
        if (!strcmp(o->x[i].name, name)) return &o->x[i];
    return NULL;
}

int opts_set(StrategyOpts *o, const OptVal *v) {
    for (int i = 0; i < o->nx; i++)
        if (!strcmp(o->x[i].name, v->name)) { o->x[i] = *v; return 0; }
    if (o->nx >= STRATEGY_MAX_OPTS) return -1;
    o->x[o->nx++] = *v;
    return 0;
}

static int opts_set_val(StrategyOpts *o, const char *name, char type, long long i, const char *str) {
    OptVal v = { .type = type, .i = i };
    snprintf(v.name, sizeof v.name, "%s", name);
    if (str) snprintf(v.s, sizeof v.s, "%s", str);
    return opts_set(o, &v);
}
int opts_set_int(StrategyOpts *o, const char *name, long long v) { return opts_set_val(o, name, OPTVAL_INT, v, NULL); }
int opts_set_bool(StrategyOpts *o, const char *name, int v) { return opts_set_val(o, name, OPTVAL_BOOL, v != 0, NULL); }
int opts_set_str(StrategyOpts *o, const char *name, const char *v) { return opts_set_val(o, name, OPTVAL_STR, 0, v); }

void opts_unset(StrategyOpts *o, const char *name) {
    for (int i = 0; i < o->nx; i++)
        if (!strcmp(o->x[i].name, name)) {
            memmove(&o->x[i], &o->x[i + 1], (size_t)(o->nx - i - 1) * sizeof o->x[0]);
            o->nx--;
            return;
        }
}

int strategy_resolve(const char *name, char *path, size_t len) {
    if (strchr(name, '/') || (strlen(name) > 4 && !strcmp(name + strlen(name) - 4, ".lua")))
        snprintf(path, len, "%s", name);
    else
        snprintf(path, len, "%s/schedules/%s.lua", wpgen_home(), name);
    return access(path, R_OK) == 0 ? 0 : -1;
}

int shipped_strategies(char names[][64], int max) {
    char dir[4200];
    snprintf(dir, sizeof dir, "%s/schedules", wpgen_home());
    struct dirent **ents;
    int k = scandir(dir, &ents, NULL, alphasort), n = 0;
    for (int i = 0; i < k; i++) {
        size_t l = strlen(ents[i]->d_name);
        if (l > 4 && l < 60 && !strcmp(ents[i]->d_name + l - 4, ".lua") && strncmp(ents[i]->d_name, "auto.", 5) && n < max)
            snprintf(names[n++], 64, "%.*s", (int)(l - 4), ents[i]->d_name);
        free(ents[i]);
    }
    if (k >= 0) free(ents);
    return n;
}

void strategy_missing(const char *name, const char *path, char *err, size_t errlen) {
    if (strchr(name, '/') || (strlen(name) > 4 && !strcmp(name + strlen(name) - 4, ".lua"))) {
        snprintf(err, errlen, "strategy %s: no such file", path);
        return;
    }
    char names[64][64], list[64 * 66] = "";
    int n = shipped_strategies(names, 64);
    for (int i = 0; i < n; i++) {
        size_t l = strlen(list);
        snprintf(list + l, sizeof list - l, "%s, ", names[i]);
    }
    snprintf(err, errlen, "strategy \"%s\": not one of %sauto (wpgen list), nor a path to a .lua file", name, list);
}

/* The trusted state: wpgen's own scripts (the emitter and Penlight's templates) get the standard
 * libraries; strategies never run here (sandbox_new). */
lua_State *wpgen_lua_new(void) {
    lua_State *L = luaL_newstate();
    if (!L) return NULL;
    luaL_openlibs(L);
    /* strategies and templates make many small short-lived tables: the generational
     * collector handles them with less work than the incremental one */
    lua_gc(L, LUA_GCGEN, 0, 0);
    /* schedules/ and schedules/lib/ come before the system's paths (Penlight lives there). */
    lua_getglobal(L, "package");
    lua_getfield(L, -1, "path");
    char buf[8192];
    snprintf(buf, sizeof buf, "%s/schedules/lib/?.lua;%s/generator/emit/?.lua;%s", wpgen_home(), wpgen_home(), lua_tostring(L, -1));
    lua_pop(L, 1);
    lua_pushstring(L, buf);
    lua_setfield(L, -2, "path");
    lua_pop(L, 1);
    return L;
}

int lua_pcall_traceback(lua_State *L, int nargs, int nres, char *err, size_t errlen) {
    int base = lua_gettop(L) - nargs;
    lua_pushcfunction(L, traceback);
    lua_insert(L, base);
    int rc = lua_pcall(L, nargs, nres, base);
    lua_remove(L, base);
    if (rc != LUA_OK) {
        snprintf(err, errlen, "%s", lua_tostring(L, -1));
        lua_pop(L, 1);
        return -1;
    }
    return 0;
}

/* The description is the text of a "-- about:" line in the comment the file starts with: read,
 * never run, so listing the strategies of a directory runs none of them. */
void strategy_about(const char *path, char *out, size_t len) {
    out[0] = 0;
    FILE *f = fopen(path, "r");
    if (!f) return;
    char line[1024];
    for (int i = 0; i < 100 && fgets(line, sizeof line, f); i++) {
        if (strncmp(line, "--", 2)) break;   /* the first comment ends here */
        const char *s = line + 2;
        while (*s == ' ' || *s == '\t') s++;
        if (strncmp(s, "about:", 6)) continue;
        s += 6;
        while (*s == ' ' || *s == '\t') s++;
        size_t n = 0;
        for (; s[n] && n + 1 < len; n++) out[n] = (unsigned char)s[n] < ' ' ? ' ' : s[n];
        while (n > 0 && out[n - 1] == ' ') n--;
        out[n] = 0;
        break;
    }
    fclose(f);
}

/* An error that wpgen prints as one line, without a traceback (sandbox.c's refusal). */
static int one_line_error(lua_State *L, const char *msg) {
    lua_createtable(L, 0, 1);
    lua_pushstring(L, msg);
    lua_setfield(L, -2, "msg");
    return lua_error(L);
}

typedef struct Run {
    const char *path, *model_name;
    const Topology *t;
    const WpConfig *m;
    const StrategyOpts *o;
    Plan *p;
} Run;

/* Loads the script, calls it for its table and calls the table's build with the plan and the
 * context; all in protected mode, so that nothing of the script runs outside the sandbox's
 * pcall. A file that does not load is an error of one line (the message names file and line). */
static int run_strategy(lua_State *L) {
    const Run *run = lua_touserdata(L, 1);
    const char *name = sandbox_script_name(run->path);
    if (sandbox_load(L, run->path) != LUA_OK) return one_line_error(L, lua_tostring(L, -1));
    lua_call(L, 0, 1);
    if (!lua_istable(L, -1))
        return one_line_error(L, lua_pushfstring(L, "%s: expected the script to return a table with a build function", name));
    lua_getfield(L, -1, "build");
    if (!lua_isfunction(L, -1))
        return one_line_error(L, lua_pushfstring(L, "%s: the returned table has no build function", name));
    PlanUd *ud = lua_newuserdatauv(L, sizeof *ud, 0);
    ud->p = run->p;
    ud->last_index = 0;
    if (luaL_newmetatable(L, PLAN_MT)) {
        luaL_newlib(L, plan_methods);
        lua_setfield(L, -2, "__index");
    }
    lua_setmetatable(L, -2);
    lua_createtable(L, 0, 3);
    push_topology(L, run->t); lua_setfield(L, -2, "topo");
    push_model(L, run->m, run->model_name); lua_setfield(L, -2, "model");
    strategy_push_opts(L, run->o, run->p->nranks, -4); lua_setfield(L, -2, "opts");
    lua_call(L, 2, 0);
    return 0;
}

int strategy_run(const char *name, const Topology *t, const WpConfig *m, const char *model_name,
                 const StrategyOpts *o, Plan **out, char *err, size_t errlen) {
    *out = NULL;
    char path[4096];
    if (strategy_resolve(name, path, sizeof path)) return strategy_missing(name, path, err, errlen), STRATEGY_BAD_INPUT;
    if (o->replicas < 1 || t->ndevices % o->replicas)
        return snprintf(err, errlen, "--replicas %d: expected a divisor of the %d devices", o->replicas, t->ndevices), STRATEGY_BAD_INPUT;
    if (o->micro_batches < 1)
        return snprintf(err, errlen, "--micro-batches %d: expected at least 1", o->micro_batches), STRATEGY_BAD_INPUT;
    /* weights rounded to bf16 on the wire and used at fp32: no real trainer does that */
    if (o->weight_wire && !strcmp(o->weight_wire, "bf16") && o->precision == WP_FP32)
        return snprintf(err, errlen, "--weight-wire bf16: the working weights are fp32 (--precision fp32, or the default on "
                        "this cluster); expected fp32, or --precision bf16"), STRATEGY_BAD_INPUT;
    const char *base = strrchr(path, '/');
    char sname[256];
    size_t sl = strlen(base ? base + 1 : path);
    if (sl >= sizeof sname) sl = sizeof sname - 1;
    memcpy(sname, base ? base + 1 : path, sl);
    sname[sl] = 0;
    if (strlen(sname) > 4 && !strcmp(sname + strlen(sname) - 4, ".lua")) sname[strlen(sname) - 4] = 0;
    Sandbox sb;
    lua_State *L = sandbox_new(&sb, o->lua_max_mib, o->lua_max_minstr);
    if (!L) return snprintf(err, errlen, "strategy %s: cannot create its Lua state", sname), STRATEGY_BAD_INPUT;
    /* the limits grow with the plan asked for: a shipped strategy plans whatever the search offers */
    char size[160];
    snprintf(size, sizeof size, "%d ranks x %d micro-batches x %d layers", t->ndevices, o->micro_batches, m->layers);
    double units = (double)t->ndevices * o->micro_batches * m->layers;
    sandbox_set_time(&sb, sandbox_plan_limits(&sb, units, size, o->lua_max_mib, o->lua_max_minstr, o->lua_max_seconds), sname);
    Plan *p = plan_new(t, m, sname, t->ndevices);
    p->replicas = o->replicas;
    p->micro_batches = o->micro_batches;
    p->total_mbs = t->ndevices * o->micro_batches;
    p->recompute = o->recompute;
    p->precision = o->precision;
    p->grad_precision = o->grad_precision;
    p->weight_wire_fp32 = (uint8_t)opts_weight_wire_fp32(o);
    for (int r = 0; r < p->nranks; r++) {
        int per = p->nranks / p->replicas;
        p->ranks[r].replica = r / per;
        p->ranks[r].stage = r % per;
    }

    Run run = { .path = path, .model_name = model_name, .t = t, .m = m, .o = o, .p = p };
    lua_pushcfunction(L, run_strategy);
    lua_pushlightuserdata(L, &run);
    int rc = sandbox_pcall(L, &sb, 1, 0, sname, err, errlen) ? STRATEGY_BAD_INPUT : 0;
    sandbox_close(L, &sb);
    if (rc == 0 && plan_finish(p, err, errlen)) rc = STRATEGY_BAD_INPUT;
    if (rc) { plan_free(p); return rc; }
    *out = p;
    return 0;
}
