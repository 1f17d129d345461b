/* Private to the CPU compute backend: what it holds for a rank (WpRank.dev). Buffers are host
 * fp32 (or bf16) arrays; the slots train/step_ops.c holds between operations are blocks of
 * floats, recycled from step to step (cpu/step_cpu.c). */
#ifndef WP_COMPUTE_CPU_H
#define WP_COMPUTE_CPU_H

#include <stddef.h>
#include "train/rank.h"
#include "cpu/model.h"

/* Storage of slots (train/step_ops.c holds which is which) and temporaries: blocks of floats,
 * recycled. */
typedef struct Block { float *p; size_t n; } Block;

/* What a turn's wait finishes for a transfer in another format than its buffer's: a temporary
 * block (n floats of room, released after) and, unless PEND_RELEASE, elems values written from
 * it (PEND_BF16: the block holds bf16 elements, widened into the fp32 array dst; PEND_STORE: the
 * block holds elements of format dt, written into buffer dst_buf at its format). */
enum { PEND_RELEASE, PEND_BF16, PEND_STORE };
typedef struct Pending { int kind; float *p; size_t n; float *dst; int dst_buf; size_t elems; int dt; } Pending;

struct WpCompute {
    float **buf;                  /* [nbufs]: fp32 arrays, or WpBf16 arrays (cast) where the buffer's dtype is bf16 */
    float *wstage, *gstage;       /* fp32: the largest chunk's bf16 weights, the largest segment of a bf16
                                     gradient (config.h's wp_grad_stage_floats) while computed */
    float **adam_m, **adam_v;     /* per buffer: AdamW moments of masters, NULL elsewhere */
    WpScratch *scratch;
    int *tokens, *targets;        /* one micro-batch */
    Block *free; int nfree, capfree;          /* released blocks, reused by size */
    Block *hfree; int nhfree, caphfree;       /* offload: the stashes' host pool, released blocks of its
                                               * own (never lent to the device's slots) */
    size_t hbytes;                            /* offload: the bytes that host pool allocated */
    Pending *pend; int npend, cappend;        /* conversions and temporaries finished after the wait */
};

#endif
