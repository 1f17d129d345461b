/* The sandbox a strategy script runs in (sandbox.c): only the Lua it needs to build a plan, its
 * memory and its instructions counted, errors made into one line or a traceback. */
#ifndef WP_SANDBOX_H
#define WP_SANDBOX_H

#include <stddef.h>

typedef struct lua_State lua_State;

/* Defaults of the limits, generous: the largest shipped plans stay far below (the 1,024-rank
 * bench plan: see sandbox.c). --lua-max-mib and --lua-max-instructions (in millions) change them.
 * For a large plan they grow with it (sandbox_plan_limits). */
#define SANDBOX_DEFAULT_MIB_N 4096       /* as numbers for the usage text (cli/flags.c) */
#define SANDBOX_DEFAULT_MINSTR_N 2000
#define SANDBOX_DEFAULT_SECONDS_N 600
enum { SANDBOX_DEFAULT_MIB = SANDBOX_DEFAULT_MIB_N, SANDBOX_DEFAULT_MINSTR = SANDBOX_DEFAULT_MINSTR_N,
       SANDBOX_DEFAULT_SECONDS = SANDBOX_DEFAULT_SECONDS_N };

/* What a strategy may spend per unit of the plan asked for, a unit being one layer of one
 * micro-batch on one rank (ranks x micro-batches per rank x layers: a weight-passing strategy
 * runs every layer on every rank's micro-batches, so its operations grow as that product, and the
 * others' grow slower). Measured on the heaviest shipped strategy (weipipe-interleave, llama2-7b
 * on 1,024 ranks, 8 and 16 micro-batches per rank: 842 instructions, 2.4 KiB of Lua objects and
 * plan, 50 us per unit, linear), with about 4x headroom. */
#define SANDBOX_INSTR_PER_UNIT 4000.0
#define SANDBOX_BYTES_PER_UNIT 8192.0
#define SANDBOX_SECONDS_PER_UNIT 200e-6

/* What a strategy may use and what it has used. The allocator counts `used` against `max_bytes`,
 * the count hook `steps` against `max_steps`; either limit, once hit, stays hit. */
typedef struct Sandbox {
    size_t used, peak, max_bytes;
    size_t held;               /* bytes wpgen holds for the script (its plan's operations, notes, ...),
                                * counted against max_bytes with the Lua state's own */
    long long steps, max_steps;
    int out_of_memory, out_of_steps, out_of_time;
    int refused;               /* the last growth asked for was refused */
    int max_mib, max_minstr;   /* the limits as given, for the messages */
    int max_seconds;           /* the wall-clock limit */
    char scaled[160];          /* "" or why the limits are above the defaults: the plan's size */
    double deadline;           /* CLOCK_MONOTONIC seconds the script must end by */
    void *watchdog;            /* the timer that ends wpgen when a C call outlives the deadline */
    char name[128];            /* the script, for the watchdog's message */
} Sandbox;

/* A Lua state for a strategy, its allocator and hook working on *sb (which must outlive it):
 * the base library without load, loadfile, dofile, print, collectgarbage and warn; string,
 * table, math (random with a fixed seed), utf8; `require` of schedules/lib modules only; no io,
 * os, package, debug or coroutine. max_mib / max_minstr 0: the defaults. NULL if it cannot be made. */
lua_State *sandbox_new(Sandbox *sb, int max_mib, int max_minstr);

/* The limits for a plan of `units` (see SANDBOX_INSTR_PER_UNIT): the defaults, or more for a
 * large plan, each one that is 0 (not given by a flag) set, clamped to the flags' ranges; `what`
 * says the plan's size for the messages ("1024 ranks x 64 micro-batches x 32 layers"), copied into
 * sb->scaled when a limit grew (call it after sandbox_new). Returns the wall-clock limit, for
 * sandbox_set_time. */
int sandbox_plan_limits(Sandbox *sb, double units, const char *what, int given_mib, int given_minstr, int given_seconds);

/* The wall-clock limit (0: the default), from now; name is the script's, for the messages. The
 * count hook stops a script past it; a C call that outlives it by SANDBOX_GRACE_SECONDS (a
 * pathological string pattern runs inside one) ends wpgen with the bad-input status. */
enum { SANDBOX_GRACE_SECONDS = 5 };
void sandbox_set_time(Sandbox *sb, int max_seconds, const char *name);

/* Ends the wall-clock limit: a state that lives on between calls (a strategy's declaration,
 * called on demand) has one per call, not for its whole life. */
void sandbox_stop_time(Sandbox *sb);

/* Closes L and stops sb's watchdog. */
void sandbox_close(lua_State *L, Sandbox *sb);

/* Counts bytes wpgen takes on the script's behalf (an operation added to its plan, a note)
 * against its memory limit: raises the memory error past it. L must be a sandbox's. */
void sandbox_charge(lua_State *L, size_t bytes);

/* The name a script's errors and tracebacks carry: its path relative to the wpgen home when it
 * lies there (schedules/NAME.lua), else the path as given. */
const char *sandbox_script_name(const char *path);

/* Loads a Lua source file (never a precompiled chunk) as a function on the stack; LUA_OK, or an
 * error status with the message on the stack. */
int sandbox_load(lua_State *L, const char *path);

/* lua_pcall in the sandbox. 0; or -1 with err set to one line when the strategy refused its
 * options (an error {flag = "--chunks 7", msg = "..."}: "--chunks 7: ...") or went over a limit
 * ("strategy NAME used more than N MiB ..."), else to the error and its traceback. A limit hit
 * is an error even when the script caught it. */
int sandbox_pcall(lua_State *L, Sandbox *sb, int nargs, int nres, const char *strategy, char *err, size_t errlen);

#endif
