/* The verifier on replicas that are copies of one pipeline (verify_replicas.c): replica 0
 * executed for all of them. For verify.c and verify_comm.c. */
#ifndef WP_VERIFY_REPLICAS_H
#define WP_VERIFY_REPLICAS_H

#include "verify/verify_state.h"

/* Whether every replica is replica 0 moved (its ranks, peers, groups) with its micro-batches
 * renamed; 1 with V->active, image, across and pi set, else 0 (execute everything). */
int replicas_detect(Verifier *V);
/* What replica q brings to an all-reduce across the replicas where replica 0 brings src: its
 * micro-batches renamed by pi_q. dst is the caller's to clear. */
void replicas_image(const Verifier *V, int q, const Val *src, Val *dst);
/* After the execution: the other replicas' forwards and backwards counted, their notes and
 * activation peaks filled in. 0, or -1 with the message (two replicas on one micro-batch). */
int replicas_finish(Verifier *V);
void replicas_free(Verifier *V);

extern long verify_replicas_runs;   /* plans verified this way, for tests */

#endif
