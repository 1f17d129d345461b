/* Running a Lua strategy script to build a plan, and the Lua state wpgen's scripts share
 * (strategies and the emitter's templates). */
#ifndef WP_STRATEGY_H
#define WP_STRATEGY_H

#include <stddef.h>
#include "ir/plan.h"

typedef struct lua_State lua_State;

typedef struct StrategyOpts {
    int micro_batches;  /* per rank */
    int replicas;
    int chunks;         /* 0: the strategy's default */
    int recompute;
    int rounds;             /* tawpipe: micro-batch rounds; 0: its own choice */
    const char *grouping;   /* tawpipe: "auto", "node", "island" or "published" */
} StrategyOpts;

enum { STRATEGY_BAD_INPUT = 2 };

/* Builds and finishes (not verifies) the plan. 0, or STRATEGY_BAD_INPUT with err set
 * (a Lua error comes as "script:line: message" and a traceback). */
int strategy_run(const char *name, const Topology *t, const WpConfig *m, const char *model_name,
                 const StrategyOpts *o, Plan **out, char *err, size_t errlen);
/* schedules/NAME.lua, or NAME itself when it is a path. 0 if readable. */
int strategy_resolve(const char *name, char *path, size_t len);

/* The strategy's one-line description (its table's `about`), into out; "" if it has none or
 * does not load. */
void strategy_about(const char *path, char *out, size_t len);

/* The repository root (WPGEN_HOME, or the executable's ../), where schedules/ and templates/ are. */
const char *wpgen_home(void);
/* A Lua state with the standard libraries and package.path set to schedules/lib, templates/, then the system's. */
lua_State *wpgen_lua_new(void);
/* t[k] = v on the table at the top of the stack (a NULL string is stored as ""). */
void lua_set_int(lua_State *L, const char *k, long long v);
void lua_set_num(lua_State *L, const char *k, double v);
void lua_set_str(lua_State *L, const char *k, const char *v);
/* lua_pcall with a traceback; on error err holds it and the error is popped. */
int lua_pcall_traceback(lua_State *L, int nargs, int nres, char *err, size_t errlen);

#endif
