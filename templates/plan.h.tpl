${P.first_c}
${P.header_c}

/* What the rank sources and the plan's tables share: one step function per rank (rank_*.c) and
 * the description of the plan (plan_desc.c) that runtime/common/step.h's wp_main runs. */
#ifndef WP_EMITTED_PLAN_H
#define WP_EMITTED_PLAN_H

#include "common/step.h"

@ for _, d in ipairs(ranks) do
void step_rank_${d.id}(WpRank *R);
@ end

extern const WpPlanDesc WP_PLAN;

#endif
