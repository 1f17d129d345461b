/* Running a Lua strategy script to build a plan (in the sandbox of sandbox.h), and the trusted
 * Lua state of wpgen's own scripts (the emitter's templates). */
#ifndef WP_STRATEGY_H
#define WP_STRATEGY_H

#include <stddef.h>
#include "ir/plan.h"
#include "lua/home.h"

typedef struct lua_State lua_State;

/* One value of a strategy's own option (its script's `options`, lua/declare.h), by the name the
 * script reads in ctx.opts: an integer (int and bool options) or a string (choice options). */
enum { OPTVAL_INT = 'i', OPTVAL_BOOL = 'b', OPTVAL_STR = 's' };
typedef struct OptVal {
    char name[32];
    char type;          /* OPTVAL_* */
    long long i;        /* int, bool */
    char s[32];         /* choice */
} OptVal;

enum { STRATEGY_MAX_OPTS = 16 };

typedef struct StrategyOpts {
    int micro_batches;  /* per rank */
    int replicas;
    int chunks;         /* 0: the strategy's default */
    int recompute;
    int context_parallel;   /* C: groups of C ranks in a node share each micro-batch (make_plan plans
                             * over the groups: docs/context-parallel.md); 0 or 1: none */
    /* the strategies' own options given (the command line, or the search's choice), by name: a
     * strategy gets in ctx.opts those it declares, each from here or its declared default, and
     * never sees the others */
    int nx;
    OptVal x[STRATEGY_MAX_OPTS];
    int lua_max_mib;        /* the sandbox's limits: MiB of Lua memory, millions of instructions; */
    int lua_max_minstr;     /* 0: the defaults (sandbox.h) */
    int lua_max_seconds;    /* the sandbox's wall-clock limit; 0: the default */
    WpDtype precision;      /* the plan's formats (ir/plan.h, PlanBuf); zero: fp32 */
    WpDtype grad_precision;
    const char *weight_wire;    /* working weights on the wire, "fp32" or "bf16" (--weight-wire); NULL:
                                 * the precision. fp32 with a bf16 precision: Plan.weight_wire_fp32 */
} StrategyOpts;

/* o's value of option name, or NULL where none was given. */
const OptVal *opts_get(const StrategyOpts *o, const char *name);
/* Sets (replaces) option name; 0, or -1 when STRATEGY_MAX_OPTS are set already. */
int opts_set(StrategyOpts *o, const OptVal *v);
int opts_set_int(StrategyOpts *o, const char *name, long long v);   /* an int option */
int opts_set_bool(StrategyOpts *o, const char *name, int v);
int opts_set_str(StrategyOpts *o, const char *name, const char *v);
void opts_unset(StrategyOpts *o, const char *name);

enum { STRATEGY_BAD_INPUT = 2 };

/* Whether o's working weights move in fp32 though they compute in bf16 (Plan.weight_wire_fp32). */
int opts_weight_wire_fp32(const StrategyOpts *o);

/* Builds and finishes (not verifies) the plan. 0, or STRATEGY_BAD_INPUT with err set: a Lua
 * error as "script:line: message" and a traceback (script relative to the wpgen home when it is
 * there); an option the strategy refuses (wp.bad_option), a file that does not load, or a limit
 * of the sandbox hit, as one line. */
int strategy_run(const char *name, const Topology *t, const WpConfig *m, const char *model_name,
                 const StrategyOpts *o, Plan **out, char *err, size_t errlen);
/* Pushes ctx.opts for o on nranks ranks: the options every strategy takes and, for each of the
 * options the strategy's table (at stack index decl) declares, its value in o or its default. */
void strategy_push_opts(lua_State *L, const StrategyOpts *o, int nranks, int decl);
/* schedules/NAME.lua, or NAME itself when it is a path. 0 if readable. */
int strategy_resolve(const char *name, char *path, size_t len);
/* The strategies in schedules/, in name order (auto, the search, is none of them). */
int shipped_strategies(char names[][64], int max);
/* The one line for a -s or --strategies NAME that strategy_resolve did not find at path: a name
 * gets the names there are, a path that it is not there. */
void strategy_missing(const char *name, const char *path, char *err, size_t errlen);   /* err: 2600 bytes hold any */

/* The strategy's one-line description, the text of a "-- about: ..." line in the comment the
 * file starts with, into out; "" if it has none. The file is read, not run. */
void strategy_about(const char *path, char *out, size_t len);

/* The trusted Lua state (wpgen's own scripts, never a strategy): the standard libraries and
 * package.path set to schedules/lib, generator/emit, then the system's. */
lua_State *wpgen_lua_new(void);
/* t[k] = v on the table at the top of the stack (a NULL string is stored as ""). */
void lua_set_int(lua_State *L, const char *k, long long v);
void lua_set_num(lua_State *L, const char *k, double v);
void lua_set_str(lua_State *L, const char *k, const char *v);
/* lua_pcall with a traceback; on error err holds it and the error is popped. */
int lua_pcall_traceback(lua_State *L, int nargs, int nres, char *err, size_t errlen);

#endif
