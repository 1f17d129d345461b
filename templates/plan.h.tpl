${P.first_c}
${P.header_c}

/* What the rank sources and the plan's tables share: one step function per rank (rank_*.c), the
 * description of the plan (plan_desc.c) that runtime/common/step.h's wp_main runs, and the labels
 * the steps' calls are written with.
 *
 * Reading rank_NNN.c: its step is unrolled turn by turn. A turn posts its transfers, computes while
 * they move, waits for them, then runs its local operations (runtime/common/step.h); its first
 * comment is its line of schedule.txt. Each call's comment says what the call does not:
@ if #P.sources > 0 then
 * first the strategy line that added the operation (the plan:xxx call, in the files below), then
@ end
 * where the weights a computation uses came from, what a received value is for and at which turn,
 * and the turn of the rank at the other end of a transfer ("their turn") when it is not this one.
 * Wc is the weights of chunk c, Dc its weight gradient, Wc[k/n] shard k of n; mb is a global
 * micro-batch; "+ loss": the forward of the last chunk ends with the loss.
 *
 * Number formats: working weights, activations and their gradients ${P.precision}, weight gradients
 * on the wire ${P.grad_precision}, masters and AdamW fp32 (plan_desc.c gives each buffer's).
@ if P.weight_wire ~= P.precision then
 * Working weights on the wire ${P.weight_wire} (--weight-wire), rounded to ${P.precision} on arrival.
@ end
@ if #P.sources > 0 then
 *
@   local w = 0
@   for _, n in ipairs(P.source_names) do w = math.max(w, #n) end
@   for i, path in ipairs(P.source_paths) do
 *   ${fmt("%-" .. w .. "s", P.source_names[i])}  ${path}
@   end
@ end
 */
#ifndef WP_EMITTED_PLAN_H
#define WP_EMITTED_PLAN_H

#include "common/step.h"

/* The labels of the calls' integer arguments: each is the plain value (or pair of values) the
 * runtime/common/step.h function takes, named for the reader; they cost nothing at run time. */
#define CHUNK(c)     (c)        /* a chunk of layers */
#define MB(m)        (m)        /* a global micro-batch */
#define TO(r)        (r)        /* the rank a send goes to */
#define FROM(r)      (r)        /* the rank a receive comes from */
#define ROOT(r)      (r)        /* the root rank of a broadcast or a reduce */
#define GROUP(g)     (g)        /* a group of ranks (plan_desc.c) */
#define WHOLE        0, 1       /* shard 0 of 1: the whole chunk */
#define SHARD(k, n)  (k), (n)   /* shard k of n */
#define WRITE        1          /* a gradient into a destination that held nothing: written */
#define ADD          0          /* a gradient added to what its destination holds */

@ for _, d in ipairs(ranks) do
void step_rank_${d.id}(WpRank *R);
@ end

extern const WpPlanDesc WP_PLAN;

#endif
