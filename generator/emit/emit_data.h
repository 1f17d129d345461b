/* Private to the emitter (emit.c): what emit_data.c makes of a plan for the templates and for
 * plan.json. The templates get the plan's shape once and then one rank at a time, so that a plan
 * of 1,024 ranks never exists as Lua tables all at once. */
#ifndef WP_EMIT_DATA_H
#define WP_EMIT_DATA_H

#include <stdio.h>
#include "emit/emit.h"

typedef struct lua_State lua_State;

/* Pushes the plan without its operations: model, chunks and owners, groups, node names, the
 * summary's figures. hash is plan_hash as 16 hex digits, tpldir where the *.tpl files are. */
void emit_push_plan(lua_State *L, const Plan *p, const EmitInfo *info, const char *hash, const char *tpldir);

/* Pushes rank r: its place, its number of operations and its buffers (the operations' text is
 * emit_ops.c's). Both raise Lua errors (out of memory): call them in protected mode. They only
 * read the plan, so threads with a Lua state each may call them. */
void emit_push_rank(lua_State *L, const Plan *p, int r);

/* The most activations (chunk inputs and their gradients, each [mbs * seq, hidden]), stashes and
 * B-to-W keeps (the split backward's) rank r holds at one time during a step, counted in the order its runtime allocates and releases
 * them (runtime/train/step_ops.c): a received activation from when
 * its receive is posted, a sent one until the turn's wait; a forward holds its input, its output
 * and its stash together, a backward its stash, its output gradient and its input gradient, a
 * BWD_B its keep beside them. A device backend reserves this many at start-up
 * (WpRankDesc.max_acts, max_stashes, max_keeps). */
void emit_rank_holds(const Plan *p, int r, int *max_acts, int *max_stashes, int *max_keeps);

/* plan.json, streamed: the head (everything but the ranks), then each rank on one line, then the
 * tail. Each returns 0, or -1 with errno set by the failing write (or out of memory). */
int emit_json_head(FILE *f, const Plan *p, const EmitInfo *info, const char *hash);
int emit_json_rank(FILE *f, const Plan *p, int r);
int emit_json_tail(FILE *f);

#endif
