/* Running a Lua strategy script to build a plan (in the sandbox of sandbox.h), and the trusted
 * Lua state of wpgen's own scripts (the emitter's templates). */
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
    int pass_mbs;           /* weipipe-naive, -interleave: micro-batches per weight pass; 0: the strategy's */
    int replicate_ends;     /* weight passing: the embedding and the LM head replicated on every rank (plan_set_replicated) */
    const char *grouping;   /* tawpipe: "auto", "node", "island" or "published" */
    const char *fsdp_variant;   /* fsdp: "gather-once" (NULL: it) or "full-shard" */
    const char *fsdp_overlap;   /* fsdp: "on" (NULL: it) or "off" (schedules/fsdp.lua) */
    int lua_max_mib;        /* the sandbox's limits: MiB of Lua memory, millions of instructions; */
    int lua_max_minstr;     /* 0: the defaults (sandbox.h) */
    WpDtype precision;      /* the plan's formats (ir/plan.h, PlanBuf); zero: fp32 */
    WpDtype grad_precision;
    const char *weight_wire;    /* working weights on the wire, "fp32" or "bf16" (--weight-wire); NULL:
                                 * the precision. fp32 with a bf16 precision: Plan.weight_wire_fp32 */
} StrategyOpts;

enum { STRATEGY_BAD_INPUT = 2 };

/* Whether o's working weights move in fp32 though they compute in bf16 (Plan.weight_wire_fp32). */
int opts_weight_wire_fp32(const StrategyOpts *o);

/* Builds and finishes (not verifies) the plan. 0, or STRATEGY_BAD_INPUT with err set: a Lua
 * error as "script:line: message" and a traceback (script relative to the wpgen home when it is
 * there); an option the strategy refuses (wp.bad_option), a file that does not load, or a limit
 * of the sandbox hit, as one line. */
int strategy_run(const char *name, const Topology *t, const WpConfig *m, const char *model_name,
                 const StrategyOpts *o, Plan **out, char *err, size_t errlen);
/* Whether a shipped strategy takes --replicate-ends (StrategyOpts.replicate_ends): weipipe-naive,
 * weipipe-interleave, weipipe-zb1, weipipe-zb2 (schedules/lib/weipipe.lua). */
int strategy_takes_replicate_ends(const char *name);
/* schedules/NAME.lua, or NAME itself when it is a path. 0 if readable. */
int strategy_resolve(const char *name, char *path, size_t len);

/* The strategy's one-line description, the text of a "-- about: ..." line in the comment the
 * file starts with, into out; "" if it has none. The file is read, not run. */
void strategy_about(const char *path, char *out, size_t len);

/* The repository root (WPGEN_HOME, or the executable's ../), where schedules/ and templates/ are. */
const char *wpgen_home(void);
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
