/* Context parallelism on the CPU model (docs/context-parallel.md): the C members of a group share
 * each micro-batch, member i holding chunks i and 2C-1-i of every sequence (common/cp_layout.h),
 * and together compute what one process computes on the whole sequences. How a member runs:
 *
 *     WpConfig mc = wp_cp_member_config(c);              // c->cp = C; mc: its S/C tokens a sequence
 *     WpScratch *s = wp_scratch_new(&mc, max_layers);
 *     WpCpRing *r = wp_cp_ring_new(c, comm, group, member, s, err, sizeof err);
 *     cp_layout_take(tok, tokens, c->mbs, c->seq, C, member);   // its tokens (and targets)
 *     wp_chunk_forward(&mc, &k, ...); wp_chunk_backward(&mc, &k, ..., 1.0f / (mbs * S), s);
 *
 * Every chunk call (forward, backward, the split backward, recompute, offload) then works on the
 * member's tokens: norms, products, MLP, embedding and loss per token, RoPE at the tokens' own
 * positions, and each layer's attention the ring round the group (model_cp.c), collective over
 * its members: they must run the same chunk calls in the same order. The caller sums what the
 * members hold: the loss sums (over the group) and the weight gradients (the plan's group
 * reduction); the loss_scale it gives backward is 1 / the whole micro-batch's (step's) tokens,
 * not the member's, so that the sum of the members' gradients is the single process's. */
#ifndef WP_MODEL_CP_H
#define WP_MODEL_CP_H

#include <stddef.h>
#include "common/comm.h"
#include "cpu/model.h"

typedef struct WpCpRing WpCpRing;

/* The shape a member computes with: c with seq = S / C and cp = 1 (its activations, stash and
 * scratch are those of S/C tokens a sequence; config.c's sizes for c count the same). */
WpConfig wp_cp_member_config(const WpConfig *c);

/* Member `member` (its index in group g of comm, which holds the C = c->cp members in order) of
 * the ring for the whole model's shape c; s, made with wp_cp_member_config(c), computes its
 * attention by the ring and its RoPE at the member's positions from here on. NULL with the reason
 * in err when S does not split over C (cp_layout_check's text), the member is outside 0 .. C-1,
 * or memory runs out. fp32 only: a chunk call in bf16 ends the process with a message. */
WpCpRing *wp_cp_ring_new(const WpConfig *c, Comm *comm, int g, int member, WpScratch *s, char *err,
                         size_t errlen);
/* Gives s back its whole-sequence attention and positions, and frees r. */
void wp_cp_ring_free(WpCpRing *r);

#endif
