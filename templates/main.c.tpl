${P.first_c}
${P.header_c}

/* The training program of this plan: the runtime's wp_main does flags, setup, steps and
 * checkpoints; the plan is WP_PLAN (plan_desc.c). */
#include "plan.h"

int main(int argc, char **argv) { return wp_main(argc, argv, &WP_PLAN); }
