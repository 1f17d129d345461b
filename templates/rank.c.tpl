${P.first_c}
${P.header_c}

/* The training step of rank ${r.rank} (node ${r.node_text}, replica ${r.replica}, stage ${r.stage}): ${plural(r.nops, "operation")}
 * in ${nbusy} of ${P.nturns} turns, unrolled. A turn posts its transfers, computes while they move,
 * waits for them, then runs its local operations (runtime/common/step.h). In the comments Wc is the
 * weights of chunk c, Dc its weight gradient and mb a global micro-batch; "its turn" is the turn
 * of the rank at the other end. */
#include "plan.h"
@ if #r.bufs > 0 then

enum {
@   for _, b in ipairs(r.bufs) do
    ${fmt("%-10s", b.id .. ",")} /* ${b.about} */
@   end
};
@ end

void step_rank_${r.id}(WpRank *R)
{
@ if r.nops == 0 then
    (void)R;    /* this rank has nothing to do in a step */
@ end
@ if body ~= "" then
${body}
@ end
}
