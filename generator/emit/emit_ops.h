/* Private to the emitter: the text of a rank's operations (the step's body in rank_NNN.c and the
 * rank's lines of schedule.txt), rendered in C from the formats emit.lua gives once per Lua
 * state. emit.lua owns the words and the layout; this renders them for a few hundred thousand
 * operations without making a Lua value per operation. */
#ifndef WP_EMIT_OPS_H
#define WP_EMIT_OPS_H

#include <stddef.h>
#include "ir/plan.h"

typedef struct lua_State lua_State;

/* A growing string: s[0, len), not NUL-terminated. */
typedef struct Text {
    char *s;
    size_t len, cap;
} Text;

void text_free(Text *t);

/* The forms of an emitted operation, X(form, its kind): one per kind of operation, and more where
 * a kind reads differently (a send of weights or of activations, the root of a broadcast or a
 * member). emit.lua's FORMS has each one's words (its call of runtime/common/step.h, its comment,
 * its schedule.txt token); form_of() in emit_ops.c picks one per operation. test_optable checks
 * that every kind has one and that every call is a function of the runtime. */
#define OP_FORMS(X)                                                                                \
    X(FWD, FWD) X(BWD, BWD) X(BWD_B, BWD_B) X(BWD_W, BWD_W)                                         \
    X(SEND_W, SEND) X(SEND_D, SEND) X(SEND_ACT, SEND) X(RECV, RECV) X(RECV_ACT, RECV)               \
    X(BCAST_ROOT, BCAST) X(BCAST, BCAST) X(REDUCE_ROOT, REDUCE) X(REDUCE, REDUCE)                   \
    X(ALLREDUCE, ALLREDUCE) X(ALLGATHER, ALLGATHER) X(REDUCE_SCATTER, REDUCE_SCATTER)               \
    X(TIE_ALLREDUCE, TIE_ALLREDUCE) X(ACC_FIRST, ACC) X(ACC, ACC) X(COPY, COPY) X(TIE, TIE)         \
    X(OPT_SHARD, OPT) X(OPT, OPT) X(FREE, FREE) X(FREE_HELD, FREE)                                \
    X(RING, RING)

typedef struct OpText OpText;

/* Compiles the formats of the table at index idx of L (what emit.lua's M.op_text returns; see
 * there for its fields). NULL with one line in err when a format names a field or a variant
 * this renderer does not know, or a part is missing. */
OpText *op_text_load(lua_State *L, int idx, const Plan *p, char *err, size_t errlen);
void op_text_free(OpText *ot);

/* Rank r's step body (every turn, the text between the function's braces, without the last
 * newline) into body, and its lines of schedule.txt into sched; ids are its buffers' names in
 * the C source. *nbusy: the turns with operations. Appends to body and sched. */
void op_text_rank(const OpText *ot, const Plan *p, int r, const char *const *ids, Text *body, Text *sched, int *nbusy);

#endif
