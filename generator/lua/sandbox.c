/* The sandbox a strategy script runs in. A strategy is a program from anywhere (`-s path.lua`),
 * and wpgen promises that the same inputs give the same bytes, so a strategy gets only what
 * building a plan needs: no files, no processes, no environment, no clock, no loading of code
 * other than the modules of schedules/lib; and it cannot take the machine: the allocator counts
 * its bytes against a limit and a count hook its instructions.
 *
 * The defaults (sandbox.h: 2,000 million instructions, 4 GiB) are far above what plans use, and
 * grow with the plan asked for past that (sandbox_plan_limits: per layer, micro-batch and rank).
 * Measured (instructions counted by the hook, the allocator's peak): scripts/bench_gen.sh's plans,
 * the ring of 4 x 8 ranks with 64 micro-batches per rank 48 million and 131 MiB, and on
 * 1,024 ranks (32 replicas of a 32-rank ring, 4 per rank) 40 million and 15 MiB; larger than any
 * shipped case, the 1,024-rank ring with 32 micro-batches per rank 303 million and 113 MiB, and
 * the placement groups' strategy on 1,024 ranks (32 replicas, 16 per rank) 70 million and 147 MiB. An endless loop
 * reaches the default in 8 s of CPU (an empty loop) to a minute (one calling string.format).
 *
 * The price of counting: while a count hook is set, Lua 5.4 checks for hooks at every
 * instruction, which made `wpgen plan` of both bench plans above take about 15% more CPU (1.1 s
 * -> 1.3 s). A timer signal that sets the hook only when a CPU-time budget is spent would cost
 * nothing, but would stop a script at a point that depends on the machine and its load, and put
 * a signal handler into every program that builds plans; counted instructions stop it at the
 * same point everywhere.
 *
 * What the script makes wpgen hold (its plan's operations, buffers, groups, notes) counts against
 * the same memory limit (sandbox_charge). And a wall-clock limit (default 600 s, --lua-max-seconds)
 * backs the instruction count where it cannot see: time inside one call of a C library function
 * (a pathological string pattern, string.rep("a", 300000):find(".-b"), runs for minutes without
 * executing a Lua instruction). The count hook checks the clock, and a timer thread ends wpgen
 * (exit 2, the script named) if a call outlives the deadline by SANDBOX_GRACE_SECONDS: such a
 * call cannot be interrupted, and nothing has been written while a strategy runs. */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <time.h>
#include <unistd.h>
#include <lua.h>
#include <lauxlib.h>
#include <lualib.h>
#include "lua/home.h"
#include "lua/sandbox.h"

/* Instructions between two calls of the count hook: its cost vanishes, and a limit is overrun
 * by at most this many. */
#define HOOK_EVERY 10000

#define LOADED_KEY "wpgen.loaded"   /* registry: the modules `require` has loaded */

/* lua_Alloc: realloc, counting the bytes in use; growth past the limit fails. Lua answers a
 * failed allocation with a full collection and one more try, and only when that fails too
 * raises a memory error: so the sandbox is out of memory at the second refusal in a row (frees
 * and shrinking in between, which the collection does, do not count as a success). */
static void *sandbox_alloc(void *ud, void *ptr, size_t osize, size_t nsize) {
    Sandbox *sb = ud;
    size_t old = ptr ? osize : 0;   /* without ptr, osize is the kind of object, not a size */
    if (nsize == 0) {
        free(ptr);
        sb->used -= old;
        return NULL;
    }
    size_t taken = sb->used + sb->held;
    if (nsize > old && (taken > sb->max_bytes || nsize - old > sb->max_bytes - taken)) {
        if (sb->refused) sb->out_of_memory = 1;
        sb->refused = 1;
        return NULL;
    }
    void *q = realloc(ptr, nsize);
    if (!q) return NULL;
    sb->used = sb->used - old + nsize;
    if (sb->used > sb->peak) sb->peak = sb->used;
    if (nsize > old) sb->refused = 0;
    return q;
}

static double now_s(void);

/* The count hook. Past a limit it raises an error and from then on fires at every instruction,
 * so a script that catches the error with pcall cannot go on running. */
static void count_hook(lua_State *L, lua_Debug *ar) {
    (void)ar;
    void *ud;
    lua_getallocf(L, &ud);
    Sandbox *sb = ud;
    sb->steps += HOOK_EVERY;
    if (sb->steps > sb->max_steps) sb->out_of_steps = 1;
    if (sb->deadline > 0 && now_s() > sb->deadline) sb->out_of_time = 1;
    if (sb->out_of_steps || sb->out_of_memory || sb->out_of_time) {
        lua_sethook(L, count_hook, LUA_MASKCOUNT, 1);
        luaL_error(L, "strategy stopped: over its %s limit",
                   sb->out_of_steps ? "instruction" : sb->out_of_memory ? "memory" : "wall-clock");
    }
}

/* ---- the wall clock ---- */

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* The timer's thread: the script is still running SANDBOX_GRACE_SECONDS past its deadline, inside
 * a C call the hook cannot interrupt. */
static void watchdog_fired(union sigval v) {
    const Sandbox *sb = v.sival_ptr;
    fprintf(stderr, "wpgen: strategy %s ran past its wall-clock limit of %d s inside one call of a library function "
            "(a string pattern that backtracks?); stopped (--lua-max-seconds raises the limit)\n", sb->name, sb->max_seconds);
    _exit(2);
}

/* a default of per_unit x units, never below base nor above the flag's range */
static int scaled_limit(int base, double units, double per_unit, int *grew) {
    double x = units * per_unit;
    if (x <= base) return base;
    *grew = 1;
    return x >= (1 << 20) ? 1 << 20 : (int)x + 1;
}

int sandbox_plan_limits(Sandbox *sb, double units, const char *what, int given_mib, int given_minstr, int given_seconds) {
    int grew = 0;
    sb->max_mib = given_mib > 0 ? given_mib : scaled_limit(SANDBOX_DEFAULT_MIB, units, SANDBOX_BYTES_PER_UNIT / 1048576.0, &grew);
    sb->max_minstr = given_minstr > 0 ? given_minstr : scaled_limit(SANDBOX_DEFAULT_MINSTR, units, SANDBOX_INSTR_PER_UNIT / 1e6, &grew);
    int seconds = given_seconds > 0 ? given_seconds : scaled_limit(SANDBOX_DEFAULT_SECONDS, units, SANDBOX_SECONDS_PER_UNIT, &grew);
    sb->max_bytes = (size_t)sb->max_mib << 20;
    sb->max_steps = (long long)sb->max_minstr * 1000000;
    if (grew) snprintf(sb->scaled, sizeof sb->scaled, "the default for %s", what);
    return seconds;
}

void sandbox_set_time(Sandbox *sb, int max_seconds, const char *name) {
    sandbox_stop_time(sb);
    sb->max_seconds = max_seconds > 0 ? max_seconds : SANDBOX_DEFAULT_SECONDS;
    snprintf(sb->name, sizeof sb->name, "%s", name);
    sb->deadline = now_s() + sb->max_seconds;
    timer_t *t = malloc(sizeof *t);
    struct sigevent ev = { .sigev_notify = SIGEV_THREAD, .sigev_notify_function = watchdog_fired };
    ev.sigev_value.sival_ptr = sb;
    struct itimerspec when = { .it_value = { .tv_sec = sb->max_seconds + SANDBOX_GRACE_SECONDS } };
    if (t && timer_create(CLOCK_MONOTONIC, &ev, t) == 0 && timer_settime(*t, 0, &when, NULL) == 0) sb->watchdog = t;
    else free(t);   /* no timer: the hook's check of the clock alone */
}

void sandbox_stop_time(Sandbox *sb) {
    if (sb->watchdog) {
        timer_delete(*(timer_t *)sb->watchdog);
        free(sb->watchdog);
        sb->watchdog = NULL;
    }
    sb->deadline = 0;
}

void sandbox_close(lua_State *L, Sandbox *sb) {
    sandbox_stop_time(sb);
    if (L) lua_close(L);
}

void sandbox_charge(lua_State *L, size_t bytes) {
    void *ud;
    if (lua_getallocf(L, &ud) != sandbox_alloc) return;   /* not a sandbox: nothing to count */
    Sandbox *sb = ud;
    sb->held += bytes;
    if (sb->used + sb->held > sb->max_bytes) {
        sb->out_of_memory = 1;
        luaL_error(L, "strategy stopped: over its memory limit");
    }
}

const char *sandbox_script_name(const char *path) {
    const char *home = wpgen_home();
    size_t n = strlen(home);
    while (n > 1 && home[n - 1] == '/') n--;
    if (n > 1 && !strncmp(path, home, n) && path[n] == '/') return path + n + 1;
    return path;
}

typedef struct Reader { FILE *f; char buf[8192]; } Reader;

static const char *read_chunk(lua_State *L, void *ud, size_t *size) {
    (void)L;
    Reader *r = ud;
    *size = fread(r->buf, 1, sizeof r->buf, r->f);
    return *size ? r->buf : NULL;
}

int sandbox_load(lua_State *L, const char *path) {
    const char *name = sandbox_script_name(path);
    lua_pushfstring(L, "@%s", name);   /* first: nothing is open yet if this raises */
    FILE *f = fopen(path, "r");
    if (!f) {
        lua_pop(L, 1);
        lua_pushfstring(L, "%s: %s", name, strerror(errno));
        return LUA_ERRFILE;
    }
    Reader r = { .f = f };
    /* "t": source only; a precompiled chunk could be made to crash the interpreter */
    int rc = lua_load(L, read_chunk, &r, lua_tostring(L, -1), "t");
    if (rc == LUA_ERRSYNTAX && lua_isstring(L, -1) && strncmp(lua_tostring(L, -1), name, strlen(name))) {
        /* Lua's refusal of a binary chunk does not say which file it was */
        const char *why = lua_pushfstring(L, "%s: %s (a strategy is Lua source)", name, lua_tostring(L, -1));
        (void)why;
        lua_remove(L, -2);
    }
    int bad_read = ferror(f);
    fclose(f);
    lua_remove(L, -2);
    if (rc == LUA_OK && bad_read) {
        lua_pop(L, 1);
        lua_pushfstring(L, "%s: cannot read it", name);
        return LUA_ERRFILE;
    }
    return rc;
}

/* require(name): a module of schedules/lib (name.lua there), loaded once. Nothing else: no
 * package.path, no C modules. */
static int l_require(lua_State *L) {
    const char *name = luaL_checkstring(L, 1);
    lua_settop(L, 1);
    lua_getfield(L, LUA_REGISTRYINDEX, LOADED_KEY);
    if (lua_getfield(L, 2, name) != LUA_TNIL) return 1;
    lua_pop(L, 1);
    int plain = *name != 0;
    for (const char *c = name; *c; c++) plain &= isalnum((unsigned char)*c) || *c == '_' || *c == '-';
    if (!plain)
        return luaL_error(L, "require \"%s\": a strategy may require only the modules of schedules/lib, by name (require \"wp\")", name);
    const char *path = lua_pushfstring(L, "%s/schedules/lib/%s.lua", wpgen_home(), name);
    if (access(path, R_OK)) return luaL_error(L, "require \"%s\": no module schedules/lib/%s.lua", name, name);
    if (sandbox_load(L, path) != LUA_OK) return lua_error(L);
    lua_pushstring(L, name);
    lua_call(L, 1, 1);
    if (lua_isnil(L, -1)) { lua_pop(L, 1); lua_pushboolean(L, 1); }
    lua_pushvalue(L, -1);
    lua_setfield(L, 2, name);
    return 1;
}

/* setmetatable without finalizers: Lua runs __gc with hooks off, where no limit could stop it. */
static int l_setmetatable(lua_State *L) {
    if (lua_istable(L, 2)) {
        lua_pushliteral(L, "__gc");
        if (lua_rawget(L, 2) != LUA_TNIL) return luaL_error(L, "setmetatable: a strategy cannot set finalizers (__gc)");
        lua_pop(L, 1);
    }
    lua_pushvalue(L, lua_upvalueindex(1));
    lua_insert(L, 1);
    lua_call(L, lua_gettop(L) - 1, 1);
    return 1;
}

/* The globals of the base library a strategy keeps. */
static const char *const base_kept[] = {
    "_G", "_VERSION", "assert", "error", "getmetatable", "ipairs", "next", "pairs", "pcall", "rawequal",
    "rawget", "rawlen", "rawset", "select", "setmetatable", "tonumber", "tostring", "type", "xpcall", NULL,
};

static int kept(const char *name) {
    for (int i = 0; base_kept[i]; i++)
        if (!strcmp(base_kept[i], name)) return 1;
    return 0;
}

/* Opens the sandbox's libraries (in protected mode: a memory error is an error, not a panic). */
static int open_sandbox(lua_State *L) {
    luaL_requiref(L, LUA_GNAME, luaopen_base, 1);
    lua_pop(L, 1);
    lua_pushglobaltable(L);
    lua_pushnil(L);
    while (lua_next(L, -2)) {   /* setting existing fields to nil during a traversal is allowed */
        lua_pop(L, 1);
        if (lua_type(L, -1) != LUA_TSTRING || !kept(lua_tostring(L, -1))) {
            lua_pushvalue(L, -1);
            lua_pushnil(L);
            lua_rawset(L, -4);
        }
    }
    lua_getfield(L, -1, "setmetatable");
    lua_pushcclosure(L, l_setmetatable, 1);
    lua_setfield(L, -2, "setmetatable");
    lua_pop(L, 1);
    luaL_requiref(L, LUA_STRLIBNAME, luaopen_string, 1);
    luaL_requiref(L, LUA_TABLIBNAME, luaopen_table, 1);
    luaL_requiref(L, LUA_MATHLIBNAME, luaopen_math, 1);
    luaL_requiref(L, LUA_UTF8LIBNAME, luaopen_utf8, 1);
    /* math.random from a fixed seed: the same inputs give the same plan */
    lua_getfield(L, -2, "randomseed");
    lua_pushinteger(L, 0);
    lua_call(L, 1, 0);
    lua_pop(L, 4);
    lua_newtable(L);
    lua_setfield(L, LUA_REGISTRYINDEX, LOADED_KEY);
    lua_register(L, "require", l_require);
    return 0;
}

/* What is left when Lua fails outside protected mode (it should not: everything a script can
 * reach runs under lua_pcall): say so and exit with the bad-input status. */
static int panic(lua_State *L) {
    const char *msg = lua_tostring(L, -1);
    fprintf(stderr, "wpgen: the strategy's Lua state failed: %s\n", msg ? msg : "(no message)");
    exit(2);
}

lua_State *sandbox_new(Sandbox *sb, int max_mib, int max_minstr) {
    memset(sb, 0, sizeof *sb);
    sb->max_mib = max_mib > 0 ? max_mib : SANDBOX_DEFAULT_MIB;
    sb->max_minstr = max_minstr > 0 ? max_minstr : SANDBOX_DEFAULT_MINSTR;
    sb->max_bytes = (size_t)sb->max_mib << 20;
    sb->max_steps = (long long)sb->max_minstr * 1000000;
    lua_State *L = lua_newstate(sandbox_alloc, sb);
    if (!L) return NULL;
    lua_atpanic(L, panic);
    /* strategies make many small short-lived tables: the generational collector handles them
     * with less work than the incremental one */
    lua_gc(L, LUA_GCGEN, 0, 0);
    lua_pushcfunction(L, open_sandbox);
    if (lua_pcall(L, 0, 0, 0) != LUA_OK) { lua_close(L); return NULL; }
    lua_sethook(L, count_hook, LUA_MASKCOUNT, HOOK_EVERY);
    return L;
}

/* t[key] of the table at idx when it is a string, read raw (no metamethod of the script runs
 * here, some of it outside protected mode), into out as one line (control characters, newlines
 * among them, become spaces); "" otherwise. 1 if it was a string. */
static int raw_string(lua_State *L, int idx, const char *key, char *out, size_t len) {
    idx = lua_absindex(L, idx);
    lua_pushstring(L, key);
    int is = lua_rawget(L, idx) == LUA_TSTRING;
    const char *s = is ? lua_tostring(L, -1) : "";
    size_t i = 0;
    for (; s[i] && i + 1 < len; i++) out[i] = iscntrl((unsigned char)s[i]) ? ' ' : s[i];
    if (len) out[i] = 0;
    lua_pop(L, 1);
    return is;
}

/* An error a strategy raises for options it cannot take: a table with a string `msg` (and maybe
 * a string `flag`), as wp.bad_option makes. */
static int is_refusal(lua_State *L, int idx) {
    char c;
    return lua_istable(L, idx) && raw_string(L, idx, "msg", &c, 1);
}

/* The message handler: a refusal goes through as it is; any other error gets the traceback. */
static int message_handler(lua_State *L) {
    if (is_refusal(L, 1)) return 1;
    const char *msg = lua_tostring(L, 1);
    if (!msg) {
        /* error(nil), error({}): no message, so the place it was raised, as Lua's own errors give */
        lua_Debug ar;
        char where[256] = "";
        for (int level = 1; lua_getstack(L, level, &ar); level++)
            if (lua_getinfo(L, "Sl", &ar) && ar.currentline > 0) {
                snprintf(where, sizeof where, "%s:%d: ", ar.short_src, ar.currentline);
                break;
            }
        if (luaL_callmeta(L, 1, "__tostring") && lua_type(L, -1) == LUA_TSTRING) msg = lua_pushfstring(L, "%s%s", where, lua_tostring(L, -1));
        else msg = lua_pushfstring(L, "%s(error object is a %s value)", where, luaL_typename(L, 1));
    }
    luaL_traceback(L, L, msg, 1);
    return 1;
}

int sandbox_pcall(lua_State *L, Sandbox *sb, int nargs, int nres, const char *strategy, char *err, size_t errlen) {
    int base = lua_gettop(L) - nargs;   /* the function */
    lua_pushcfunction(L, message_handler);
    lua_insert(L, base);
    int rc = lua_pcall(L, nargs, nres, base);
    lua_remove(L, base);
    /* a memory error raised at a first refusal (Lua tries no collection in some states) */
    if (rc == LUA_ERRMEM && sb->refused) sb->out_of_memory = 1;
    if (sb->out_of_time)
        snprintf(err, errlen, "strategy %s ran past its wall-clock limit of %d s (%s%s--lua-max-seconds raises the limit)",
                 strategy, sb->max_seconds, sb->scaled, *sb->scaled ? "; " : "");
    else if (sb->out_of_steps)
        snprintf(err, errlen, "strategy %s ran more than %d million Lua instructions (%s%san endless loop? --lua-max-instructions raises the limit)",
                 strategy, sb->max_minstr, sb->scaled, *sb->scaled ? "; " : "");
    else if (sb->out_of_memory)
        snprintf(err, errlen, "strategy %s used more than %d MiB of memory (%.1f MiB of Lua objects, %.1f MiB of the plan it "
                 "built; %s%s--lua-max-mib raises the limit)", strategy, sb->max_mib, sb->used / 1048576.0, sb->held / 1048576.0,
                 sb->scaled, *sb->scaled ? "; " : "");
    else if (rc == LUA_OK)
        return 0;
    else if (is_refusal(L, -1)) {
        char flag[256], msg[1024];
        raw_string(L, -1, "flag", flag, sizeof flag);
        raw_string(L, -1, "msg", msg, sizeof msg);
        snprintf(err, errlen, "%s%s%s", flag, *flag ? ": " : "", msg);
    } else {
        const char *msg = lua_tostring(L, -1);
        snprintf(err, errlen, "%s", msg ? msg : "(error object is not a string)");
        /* the traceback's last frame is the C function that ran the script: nothing to read */
        size_t n = strlen(err), k = strlen("\n\t[C]: in ?");
        if (n > k && !strcmp(err + n - k, "\n\t[C]: in ?")) err[n - k] = 0;
    }
    lua_settop(L, base - 1);
    return -1;
}
