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
