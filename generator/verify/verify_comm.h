/* The verifier's transfers and collectives (verify_comm.c), as the driver (verify.c) calls them
 * for each rank's turn: post its transfers when the turn starts, apply what they delivered once
 * they have all met, or name the transfer a stuck step waits on. */
#ifndef WP_VERIFY_COMM_H
#define WP_VERIFY_COMM_H

#include "verify/verify_state.h"

/* Posts the transfers and collectives of rank's current turn, matching each with its partners
 * as far as they have posted. 0, or -1 with the message set (verr). */
int comm_post(Verifier *V, int rank);
/* Once the turn's transfers have all met: what they deliver lands, what they pass on leaves. */
int comm_apply(Verifier *V, int rank);
/* No rank can move: names the first transfer of the rank furthest behind that never met. -1. */
int comm_report_deadlock(Verifier *V);

#endif
