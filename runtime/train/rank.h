/* Private to the MPI runtime: the state of one rank of an emitted training program, shared by the
 * operations the emitted step calls (step_ops.c), the program around them (train.c) and the
 * trace (trace.c). */
#ifndef WP_RANK_H
#define WP_RANK_H

#include <stddef.h>
#include <stdint.h>
#include "common/step.h"
#include "common/comm.h"
#include "train/data.h"
#include "cpu/model.h"
#include "cpu/adamw.h"

/* Activations, their gradients and stashes a rank holds between operations, by (kind, chunk, mb). */
enum { SLOT_ACT, SLOT_GRAD, SLOT_STASH };
typedef struct Slot { int kind, chunk, mb; float *p; size_t n; } Slot;
typedef struct Block { float *p; size_t n; } Block;

/* An update the step asked for (OPT), applied at the end of the step once the global gradient
 * norm is known. */
typedef struct PendingOpt { int chunk, master, grad; } PendingOpt;

typedef struct TraceEvent { const char *cat; char name[40]; double t0, t1; int turn; } TraceEvent;

struct WpRank {
    const WpPlanDesc *plan;
    const WpRankDesc *me;
    int rank;
    Comm *comm;
    WpConfig cfg;
    WpChunk *chunks;              /* [nchunks] */
    WpTensor **tensors; int *ntensors;   /* per chunk, for the update */
    float **buf;                  /* [nbufs] */
    float **adam_m, **adam_v;     /* per buffer: AdamW moments of masters, NULL elsewhere */
    WpData *data;
    WpScratch *scratch;
    int recompute;
    long step;                    /* the step being run (0-based) */
    int *tokens, *targets;        /* one micro-batch */
    double loss_sum;              /* this step's token losses, on ranks running the last chunk */
    float loss_scale;             /* 1 / tokens of the step */
    Slot *slots; int nslots, capslots;
    Block *free; int nfree, capfree;
    int *release; int nrelease, caprelease;   /* slots sent this turn: released after the wait */
    PendingOpt *opts; int nopts, capopts;
    int turn;
    TraceEvent *events; size_t nevents, capevents;
    int tracing;
};

/* step_ops.c */
/* Allocation that cannot fail quietly: out of memory ends the job with what was being allocated. */
void *rank_realloc(WpRank *R, void *p, size_t bytes, const char *what);
void *rank_calloc(WpRank *R, size_t n, size_t size, const char *what);
float *slot_new(WpRank *R, int kind, int chunk, int mb, size_t n);
float *slot_get(WpRank *R, int kind, int chunk, int mb);      /* aborts if missing */
void slot_release(WpRank *R, int kind, int chunk, int mb);
size_t chunk_floats(const WpRank *R, int chunk, int shard, int nshards);

/* trace.c */
void trace_event(WpRank *R, const char *cat, const char *name, double t0, double t1);
void trace_comm_event(void *ud, const CommEvent *e);
int trace_write_all(WpRank *R, const char *path);    /* collective: rank 0 writes */

#endif
