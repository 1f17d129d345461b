${P.first_c}
${P.header_c}

${r.head}
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
