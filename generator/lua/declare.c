/* Reading what a strategy declares of itself (declare.h): its script run in the sandbox for its
 * table, the table's `options` checked and copied out, and its `traits`, `label` and `search`
 * entries called on demand in the same state. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <ctype.h>
#include <dirent.h>
#include <lua.h>
#include <lauxlib.h>
#include "lua/declare.h"
#include "lua/sandbox.h"
#include "util/xalloc.h"

enum { DECL_CACHE_MAX = 64 };
static StrategyDecl *cache[DECL_CACHE_MAX];
static int ncache;
static int decl_seconds;   /* the wall-clock limit of each call, 0: the sandbox's default */

void strategy_decl_set_seconds(int max_seconds) { decl_seconds = max_seconds; }

static int load_table(lua_State *L) {
    const char *path = lua_touserdata(L, 1);
    const char *name = sandbox_script_name(path);
    if (sandbox_load(L, path) != LUA_OK) return lua_error(L);
    lua_call(L, 0, 1);
    if (!lua_istable(L, -1)) return luaL_error(L, "%s: expected the script to return a table with a build function", name);
    return 1;
}

/* d->err = "NAME: options[i]: what" and d->ok = 0 */
static void bad_decl(StrategyDecl *d, int i, const char *what) {
    snprintf(d->err, sizeof d->err, "strategy %s: options[%d]: %s", d->name, i, what);
    d->ok = 0;
}

/* Reads options[i] (on the top of the stack) into od. 0, or -1 with d->err. */
static int read_option(StrategyDecl *d, lua_State *L, int i, OptDecl *od) {
    memset(od, 0, sizeof *od);
    if (lua_getfield(L, -1, "name") != LUA_TSTRING) { lua_pop(L, 1); bad_decl(d, i, "no name"); return -1; }
    const char *name = lua_tostring(L, -1);
    size_t nl = strlen(name);
    int okname = nl > 0 && nl < sizeof od->name;
    for (size_t k = 0; k < nl; k++) okname &= islower((unsigned char)name[k]) || isdigit((unsigned char)name[k]) || name[k] == '_';
    if (!okname) { lua_pop(L, 1); bad_decl(d, i, "name: expected lower-case letters, digits and _"); return -1; }
    memcpy(od->name, name, nl + 1);
    lua_pop(L, 1);
    od->flag[0] = od->flag[1] = '-';
    memcpy(od->flag + 2, od->name, nl + 1);
    for (char *c = od->flag + 2; *c; c++) if (*c == '_') *c = '-';
    lua_getfield(L, -1, "type");
    const char *type = lua_tostring(L, -1);
    if (!type || (strcmp(type, "int") && strcmp(type, "bool") && strcmp(type, "choice"))) {
        lua_pop(L, 1); bad_decl(d, i, "type: expected \"int\", \"bool\" or \"choice\""); return -1;
    }
    od->type = !strcmp(type, "int") ? OPT_INT : !strcmp(type, "bool") ? OPT_BOOL : OPT_CHOICE;
    lua_pop(L, 1);
    memcpy(od->def.name, od->name, sizeof od->def.name);
    if (od->type == OPT_INT) {
        int isnum;
        lua_getfield(L, -1, "min"); od->min = lua_tointegerx(L, -1, &isnum); lua_pop(L, 1);
        if (!isnum) { bad_decl(d, i, "min: expected an integer"); return -1; }
        lua_getfield(L, -1, "max"); od->max = lua_tointegerx(L, -1, &isnum); lua_pop(L, 1);
        if (!isnum || od->max < od->min) { bad_decl(d, i, "max: expected an integer no less than min"); return -1; }
        lua_getfield(L, -1, "default"); od->def.i = lua_tointegerx(L, -1, &isnum); lua_pop(L, 1);
        if (!isnum) { bad_decl(d, i, "default: expected an integer"); return -1; }
        od->def.type = OPTVAL_INT;
    } else if (od->type == OPT_BOOL) {
        lua_getfield(L, -1, "default"); od->def.i = lua_toboolean(L, -1); lua_pop(L, 1);
        od->def.type = OPTVAL_BOOL;
    } else {
        if (lua_getfield(L, -1, "values") != LUA_TTABLE) { lua_pop(L, 1); bad_decl(d, i, "values: expected a list of strings"); return -1; }
        lua_Integer n = luaL_len(L, -1);
        for (lua_Integer k = 1; k <= n && od->nchoices < DECL_MAX_CHOICES; k++) {
            lua_geti(L, -1, k);
            const char *v = lua_tostring(L, -1);
            if (v) snprintf(od->choices[od->nchoices++], sizeof od->choices[0], "%s", v);
            lua_pop(L, 1);
        }
        lua_pop(L, 1);
        if (!od->nchoices) { bad_decl(d, i, "values: expected a list of strings"); return -1; }
        lua_getfield(L, -1, "default");
        const char *v = lua_tostring(L, -1);
        snprintf(od->def.s, sizeof od->def.s, "%s", v ? v : od->choices[0]);
        lua_pop(L, 1);
        od->def.type = OPTVAL_STR;
    }
    lua_getfield(L, -1, "help");
    snprintf(od->help, sizeof od->help, "%s", lua_tostring(L, -1) ? lua_tostring(L, -1) : "");
    lua_pop(L, 1);
    lua_getfield(L, -1, "default_words");
    snprintf(od->default_words, sizeof od->default_words, "%s", lua_tostring(L, -1) ? lua_tostring(L, -1) : "");
    lua_pop(L, 1);
    od->searched = lua_getfield(L, -1, "search") != LUA_TNIL;
    lua_pop(L, 1);
    return 0;
}

static void read_decl(StrategyDecl *d) {
    if (strategy_resolve(d->name, d->path, sizeof d->path)) {
        strategy_missing(d->name, d->path, d->err, sizeof d->err);
        return;
    }
    strategy_about(d->path, d->about, sizeof d->about);
    Sandbox *sb = xcalloc(1, sizeof *sb);
    lua_State *L = sandbox_new(sb, 0, 0);
    if (!L) { free(sb); snprintf(d->err, sizeof d->err, "strategy %s: cannot create its Lua state", d->name); return; }
    lua_pushcfunction(L, load_table);
    lua_pushlightuserdata(L, d->path);
    char err[1024];
    sandbox_set_time(sb, decl_seconds, d->name);
    int rc = sandbox_pcall(L, sb, 1, 1, d->name, err, sizeof err);
    sandbox_stop_time(sb);
    if (rc) {
        char *nl = strchr(err, '\n');
        if (nl) *nl = 0;
        snprintf(d->err, sizeof d->err, "%s", err);
        lua_close(L); free(sb);
        return;
    }
    d->ok = 1;
    if (!d->about[0]) {   /* no "-- about:" line: the table's about */
        if (lua_getfield(L, -1, "about") == LUA_TSTRING) snprintf(d->about, sizeof d->about, "%s", lua_tostring(L, -1));
        lua_pop(L, 1);
    }
    if (lua_getfield(L, -1, "options") == LUA_TTABLE) {
        lua_Integer n = luaL_len(L, -1);
        for (lua_Integer i = 1; i <= n && d->ok; i++) {
            if (d->nopts >= STRATEGY_MAX_OPTS) { bad_decl(d, (int)i, "too many options"); break; }
            if (lua_geti(L, -1, i) != LUA_TTABLE) { lua_pop(L, 1); bad_decl(d, (int)i, "expected a table"); break; }
            if (read_option(d, L, (int)i, &d->opts[d->nopts]) == 0) d->nopts++;
            lua_pop(L, 1);
        }
    }
    lua_pop(L, 1);
    int t = lua_getfield(L, -1, "traits");
    d->has_traits = t == LUA_TTABLE || t == LUA_TFUNCTION;
    lua_pop(L, 1);
    d->has_label = lua_getfield(L, -1, "label") == LUA_TFUNCTION;
    lua_pop(L, 1);
    if (!d->ok) { lua_close(L); free(sb); return; }
    d->ref = luaL_ref(L, LUA_REGISTRYINDEX);
    d->L = L;
    d->sb = sb;
}

const StrategyDecl *strategy_decl(const char *name) {
    for (int i = 0; i < ncache; i++)
        if (!strcmp(cache[i]->name, name)) return cache[i];
    StrategyDecl *d = xcalloc(1, sizeof *d);
    snprintf(d->name, sizeof d->name, "%s", name);
    read_decl(d);
    if (ncache < DECL_CACHE_MAX) cache[ncache++] = d;   /* past it (never, in practice): not cached, not freed */
    return d;
}

const OptDecl *decl_option(const StrategyDecl *d, const char *s) {
    for (int i = 0; i < d->nopts; i++)
        if (!strcmp(d->opts[i].flag, s) || !strcmp(d->opts[i].name, s)) return &d->opts[i];
    return NULL;
}

void decl_describe_range(const OptDecl *od, char *out, size_t len) {
    if (od->type == OPT_BOOL) { snprintf(out, len, "a flag, no value"); return; }
    if (od->type == OPT_INT) { snprintf(out, len, "an integer in [%lld, %lld]", od->min, od->max); return; }
    size_t n = 0;
    out[0] = 0;
    for (int i = 0; i < od->nchoices && n < len; i++)
        n += snprintf(out + n, len - n, "%s%s", i ? (i + 1 == od->nchoices ? " or " : ", ") : "", od->choices[i]);
}

int decl_parse_value(const OptDecl *od, const char *text, OptVal *out, char *err, size_t errlen) {
    memset(out, 0, sizeof *out);
    snprintf(out->name, sizeof out->name, "%s", od->name);
    char range[400];
    decl_describe_range(od, range, sizeof range);
    if (od->type == OPT_BOOL) { out->type = OPTVAL_BOOL; out->i = 1; return 0; }
    if (od->type == OPT_INT) {
        char *end;
        long long x = text ? strtoll(text, &end, 10) : 0;
        if (!text || !*text || *end || x < od->min || x > od->max) {
            snprintf(err, errlen, "%s: expected %s, got \"%s\"", od->flag, range, text ? text : "");
            return -1;
        }
        out->type = OPTVAL_INT; out->i = x;
        return 0;
    }
    for (int i = 0; text && i < od->nchoices; i++)
        if (!strcmp(text, od->choices[i])) { out->type = OPTVAL_STR; snprintf(out->s, sizeof out->s, "%s", text); return 0; }
    snprintf(err, errlen, "%s: expected %s, got \"%s\"", od->flag, range, text ? text : "");
    return -1;
}

void decl_format_value(const OptVal *v, char *out, size_t len) {
    if (v->type == OPTVAL_STR) snprintf(out, len, "%s", v->s);
    else if (v->type == OPTVAL_BOOL) snprintf(out, len, "%s", v->i ? "on" : "off");
    else snprintf(out, len, "%lld", v->i);
}

void decl_describe_default(const OptDecl *od, const char *own, char *out, size_t len) {
    if (od->default_words[0]) { snprintf(out, len, "%s", od->default_words); return; }
    if (od->type == OPT_INT && (od->def.i < od->min || od->def.i > od->max)) { snprintf(out, len, "%s", own); return; }
    decl_format_value(&od->def, out, len);
}

const DeclField *decl_field(const DeclTable *t, const char *key) {
    for (int i = 0; i < t->n; i++)
        if (!strcmp(t->f[i].key, key)) return &t->f[i];
    return NULL;
}

double decl_num(const DeclTable *t, const char *key, double dflt) {
    const DeclField *f = decl_field(t, key);
    return !f ? dflt : f->type == DECL_STR ? dflt : f->num;
}

const char *decl_str(const DeclTable *t, const char *key, const char *dflt) {
    const DeclField *f = decl_field(t, key);
    return f && f->type == DECL_STR ? f->str : dflt;
}

/* The value on the top of the stack as field key of t (numbers, strings and booleans only). */
static void add_field(lua_State *L, DeclTable *t, const char *key) {
    if (t->n >= (int)(sizeof t->f / sizeof t->f[0])) return;
    DeclField *f = &t->f[t->n];
    memset(f, 0, sizeof *f);
    snprintf(f->key, sizeof f->key, "%s", key);
    int ty = lua_type(L, -1);
    if (ty == LUA_TBOOLEAN) { f->type = DECL_BOOL; f->num = lua_toboolean(L, -1); }
    else if (ty == LUA_TNUMBER) { f->type = DECL_NUM; f->num = lua_tonumber(L, -1); }
    else if (ty == LUA_TSTRING) { f->type = DECL_STR; snprintf(f->str, sizeof f->str, "%s", lua_tostring(L, -1)); }
    else return;
    t->n++;
}

/* Pushes d's table's entry key. */
static void push_entry(const StrategyDecl *d, const char *key) {
    lua_rawgeti(d->L, LUA_REGISTRYINDEX, d->ref);
    lua_getfield(d->L, -1, key);
    lua_remove(d->L, -2);
}

/* Calls the function below its nargs arguments on d's state in the sandbox, one result. */
static int call(const StrategyDecl *d, int nargs) {
    char err[1024];
    /* the state lives as long as wpgen: each call has the limits of its own, a fresh instruction
     * count and the default wall clock */
    ((Sandbox *)d->sb)->steps = 0;
    sandbox_set_time(d->sb, decl_seconds, d->name);
    int rc = sandbox_pcall(d->L, d->sb, nargs, 1, d->name, err, sizeof err);
    sandbox_stop_time(d->sb);
    if (rc) {
        fprintf(stderr, "wpgen: strategy %s: %s\n", d->name, err);
        return -1;
    }
    return 0;
}

int decl_traits(const StrategyDecl *d, const StrategyOpts *o, int nranks, int layers, DeclTable *out) {
    out->n = 0;
    if (!d->ok || !d->has_traits) return -1;
    lua_State *L = d->L;
    int top = lua_gettop(L);
    push_entry(d, "traits");
    if (lua_isfunction(L, -1)) {
        lua_rawgeti(L, LUA_REGISTRYINDEX, d->ref);
        strategy_push_opts(L, o, nranks, -1);
        lua_remove(L, -2);
        lua_set_int(L, "layers", layers);
        if (call(d, 1)) { lua_settop(L, top); return -1; }
    }
    if (lua_istable(L, -1)) {
        lua_pushnil(L);
        while (lua_next(L, -2)) {
            if (lua_type(L, -2) == LUA_TSTRING) add_field(L, out, lua_tostring(L, -2));
            lua_pop(L, 1);
        }
    }
    lua_settop(L, top);
    return 0;
}

int decl_label(const StrategyDecl *d, const char *how, const StrategyOpts *o, const StrategyOpts *flags, int nranks,
               char *out, size_t len, DeclTable *json) {
    if (out && len) out[0] = 0;
    if (json) json->n = 0;
    if (!d->ok || !d->has_label) return 0;
    lua_State *L = d->L;
    int top = lua_gettop(L);
    push_entry(d, "label");
    lua_rawgeti(L, LUA_REGISTRYINDEX, d->ref);
    strategy_push_opts(L, o, nranks, -1);
    lua_pushstring(L, how);
    strategy_push_opts(L, flags, nranks, -3);
    lua_remove(L, -4);   /* the table */
    if (call(d, 3)) { lua_settop(L, top); return -1; }
    if (lua_type(L, -1) == LUA_TSTRING && out) snprintf(out, len, "%s", lua_tostring(L, -1));
    else if (lua_istable(L, -1) && json) {   /* { {key, value}, ... } */
        lua_Integer n = luaL_len(L, -1);
        for (lua_Integer i = 1; i <= n; i++) {
            if (lua_geti(L, -1, i) == LUA_TTABLE) {
                lua_geti(L, -1, 1);
                lua_geti(L, -2, 2);
                const char *k = lua_tostring(L, -2);
                if (k) {
                    char key[40];
                    snprintf(key, sizeof key, "%s", k);
                    add_field(L, json, key);
                }
                lua_pop(L, 2);
            }
            lua_pop(L, 1);
        }
    }
    lua_settop(L, top);
    return 0;
}

int decl_search_values(const StrategyDecl *d, int i, const DeclSearchCtx *ctx, OptVal *out, int max) {
    if (!d->ok || i < 0 || i >= d->nopts || !d->opts[i].searched) return 0;
    const OptDecl *od = &d->opts[i];
    lua_State *L = d->L;
    int top = lua_gettop(L), n = 0;
    lua_rawgeti(L, LUA_REGISTRYINDEX, d->ref);
    lua_getfield(L, -1, "options");
    lua_geti(L, -1, i + 1);
    lua_getfield(L, -1, "search");
    if (lua_isfunction(L, -1)) {
        lua_createtable(L, 0, 4);
        lua_set_int(L, "micro_batches", ctx->micro_batches);
        lua_set_int(L, "ranks", ctx->ranks);
        lua_set_int(L, "layers", ctx->layers);
        lua_set_int(L, "chunks", ctx->chunks);
        if (call(d, 1)) { lua_settop(L, top); return 0; }
    }
    if (lua_istable(L, -1)) {
        lua_Integer len = luaL_len(L, -1);
        for (lua_Integer k = 1; k <= len && n < max; k++) {
            lua_geti(L, -1, k);
            OptVal v = { .type = od->def.type };
            snprintf(v.name, sizeof v.name, "%s", od->name);
            if (od->type == OPT_INT && lua_isinteger(L, -1)) v.i = lua_tointeger(L, -1);
            else if (od->type == OPT_BOOL) v.i = lua_toboolean(L, -1);
            else if (od->type == OPT_CHOICE && lua_type(L, -1) == LUA_TSTRING) snprintf(v.s, sizeof v.s, "%s", lua_tostring(L, -1));
            else { lua_pop(L, 1); continue; }
            out[n++] = v;
            lua_pop(L, 1);
        }
    }
    lua_settop(L, top);
    return n;
}

void decl_from_notes(const StrategyDecl *d, const char *notes, StrategyOpts *o) {
    if (!d->ok || !notes) return;
    lua_State *L = d->L;
    int top = lua_gettop(L);
    for (int i = 0; i < d->nopts; i++) {
        const OptDecl *od = &d->opts[i];
        lua_settop(L, top);
        lua_rawgeti(L, LUA_REGISTRYINDEX, d->ref);
        lua_getfield(L, -1, "options");
        lua_geti(L, -1, i + 1);
        if (lua_getfield(L, -1, "from_notes") != LUA_TSTRING) continue;
        int pat = lua_gettop(L);
        lua_getglobal(L, "string");
        lua_getfield(L, -1, "match");
        lua_pushstring(L, notes);
        lua_pushvalue(L, pat);
        if (call(d, 2) || lua_isnil(L, -1)) continue;
        OptVal v = { .type = od->def.type };
        snprintf(v.name, sizeof v.name, "%s", od->name);
        if (od->type == OPT_BOOL) v.i = 1;
        else if (od->type == OPT_INT) v.i = atoll(lua_tostring(L, -1) ? lua_tostring(L, -1) : "0");
        else snprintf(v.s, sizeof v.s, "%s", lua_tostring(L, -1) ? lua_tostring(L, -1) : "");
        opts_set(o, &v);
    }
    lua_settop(L, top);
}

const char *strategy_default(void) {
    static char name[64];
    if (name[0]) return name;
    char path[4200];
    snprintf(path, sizeof path, "%s/schedules/default-strategy", wpgen_home());
    FILE *f = fopen(path, "r");
    if (!f || !fgets(name, sizeof name, f)) name[0] = 0;
    if (f) fclose(f);
    name[strcspn(name, " \t\r\n")] = 0;
    if (!name[0]) snprintf(name, sizeof name, "auto");   /* no file: the search picks */
    return name;
}

