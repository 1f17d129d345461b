/* The CUDA backend's start-up memory plan: where everything a rank holds on the device lives in
 * its one pool, computed from the plan's tables alone (no CUDA here, so it is unit tested without
 * a GPU: tests/unit/test_cuda_mem.c). compute_cuda.c reserves the pool once and carves it by these
 * offsets; nothing is allocated on the device during a step.
 *
 * What a rank holds (each part 256-byte aligned):
 *   buffers      each buffer of the plan at its format; a master's working copy (bf16) beside it
 *   masters      AdamW's m and v (fp32) of every master (the fp32 weights are among the buffers)
 *   activations  max_acts slots of one micro-batch's [T, H] in bf16 (chunk inputs, their
 *                gradients), max_stashes stashes of the largest chunk (wp_stash_bytes, bf16; with
 *                offload in pinned host memory instead, compute_cuda.c) and
 *                max_keeps B-to-W keeps of the largest chunk (wp_keep_bytes, bf16: the split
 *                backward's), the counts wpgen emitted (WpRankDesc.max_acts, max_stashes, max_keeps)
 *   staging      an fp32 gradient of the largest chunk where some gradient buffer is bf16 (the
 *                backward sums in fp32 and rounds once, where it is stored); a transfer's copy at
 *                the format it carries for each buffer stored in another (an fp32 gradient that
 *                moves in bf16); the tokens and targets of the last few micro-batches (a
 *                ring: a forward and its backward read the same ones, copied once); the loss and a norm
 * The model's workspace (cuBLASLt's included) is wc_model_new's and is reported beside it. */
#ifndef WP_CUDA_MEM_H
#define WP_CUDA_MEM_H

#include <stddef.h>
#include "common/step.h"

enum { CM_ALIGN = WP_XFER_ALIGN, CM_TOKEN_RING = 16 };   /* xfer_bytes was emitted in this granule */

typedef struct CudaMemPlan {
    /* offsets into the pool, per buffer of the rank ([nbufs]); copy and m/v: masters only (else
     * SIZE_MAX) */
    size_t *buf, *copy, *adam_m, *adam_v;
    size_t acts, act_bytes; int nacts;          /* nacts slots of act_bytes from offset acts */
    size_t stashes, stash_bytes; int nstashes;   /* stashes: SIZE_MAX where stashes_host */
    int stashes_host;                           /* offload (config.h's WP_RECOMPUTE_OFFLOAD): the
                                                 * nstashes slots are pinned host memory, not the pool's */
    size_t keeps, keep_bytes; int nkeeps;       /* 0 slots without a split backward */
    size_t gstage;                              /* fp32 [stage_floats], or SIZE_MAX */
    size_t xfer, xfer_bytes;                    /* transfer copies in another format */
    size_t tokens, targets; int ntok;           /* int32 [ntok][T] each: the micro-batches read lately */
    size_t loss, sumsq;                         /* one double each */
    size_t max_params;                          /* the largest chunk's parameters */
    size_t stage_floats;                        /* a bf16 gradient's largest segment (wp_grad_stage_floats) */
    /* bytes by part, for the start-up line (they sum to total) */
    size_t b_buffers, b_masters, b_acts, b_staging, total;
} CudaMemPlan;

/* The carried format of a weight or gradient buffer's transfers. */
int cm_carried(const WpPlanDesc *P, const WpBufDesc *b);
/* The format a buffer takes part in transfers and compute with: a master's working copy, else its own. */
int cm_working(const WpBufDesc *b);

/* Plans rank `rank` of P (chunks as train.c makes them, recompute as the run says). 0, or -1 when
 * out of host memory. cm_free releases the arrays. */
int cm_plan(CudaMemPlan *m, const WpPlanDesc *P, int rank, const WpChunk *chunks, int recompute);
void cm_free(CudaMemPlan *m);

#endif
