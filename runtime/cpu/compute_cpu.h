/* Private to the CPU compute backend: what it holds for a rank (WpRank.dev). Buffers are host
 * fp32 arrays; activations, their gradients and stashes live in slots between operations, their
 * storage recycled from step to step. */
#ifndef WP_COMPUTE_CPU_H
#define WP_COMPUTE_CPU_H

#include <stddef.h>
#include "train/rank.h"
#include "cpu/model.h"

/* Activations, their gradients and stashes a rank holds between operations, by (kind, chunk, mb). */
enum { SLOT_ACT, SLOT_GRAD, SLOT_STASH };
typedef struct Slot { int kind, chunk, mb; float *p; size_t n; } Slot;
typedef struct Block { float *p; size_t n; } Block;

struct WpCompute {
    float **buf;                  /* [nbufs] */
    float **adam_m, **adam_v;     /* per buffer: AdamW moments of masters, NULL elsewhere */
    WpScratch *scratch;
    int *tokens, *targets;        /* one micro-batch */
    Slot *slots; int nslots, capslots;
    Block *free; int nfree, capfree;
    int *release; int nrelease, caprelease;   /* slots sent this turn: released after the wait */
};

#endif
