/* Private to the training program: the state of one rank of an emitted program, shared by the
 * program around the step (train.c), the operations the emitted step calls (step_ops.c,
 * on the compute backend's train/step_backend.h), the neutral helpers (rank.c) and the trace (trace.c).
 * Backend-neutral: what the compute backend holds (buffers, activations, workspace) is behind
 * `dev`, reached through common/compute.h. */
#ifndef WP_RANK_H
#define WP_RANK_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include "common/step.h"
#include "common/comm.h"
#include "common/compute.h"
#include "train/data.h"

/* An update the step asked for (OPT), applied at the end of the step once the global gradient
 * norm is known. */
typedef struct PendingOpt { int chunk, master, grad; } PendingOpt;

typedef struct TraceEvent { const char *cat; char name[40]; double t0, t1; int turn; } TraceEvent;

/* An activation, its gradient, a stash or a B-to-W keep the rank holds between operations, by
 * (kind, chunk, mb): its memory and the compute backend's tag for it (train/step_backend.h). */
typedef struct StepSlot { int kind, chunk, mb; void *p; size_t tag; } StepSlot;

struct WpRank {
    const WpPlanDesc *plan;
    const WpRankDesc *me;
    int rank;
    Comm *comm;
    WpConfig cfg;
    WpChunk *chunks;              /* [nchunks] */
    WpTensor **tensors; int *ntensors;   /* per chunk, for the update */
    WpCompute *dev;               /* the compute backend's part: buffers, activations, workspace */
    WpData *data;
    WpData *val;                  /* --val-data, read in file order; NULL: none */
    int recompute;
    long step;                    /* the step being run (0-based) */
    double loss_sum;              /* this step's token losses, on ranks running the last chunk */
    float loss_scale;             /* 1 / tokens of the step */
    PendingOpt *opts; int nopts, capopts;
    int turn;
    StepSlot *slots; int nslots, capslots;   /* held now (train/step_ops.c) */
    StepSlot *sent; int nsent, capsent;      /* sent this turn: released after its wait */
    TraceEvent *events; size_t nevents, capevents;   /* the trace's events not yet in its part file */
    int tracing;
    FILE *trace_part;             /* this rank's events written so far (trace.c) */
    size_t trace_written, trace_most;   /* events written there; the most buffered at once */
    int trace_failed;             /* the part could not be written: the trace is incomplete */
};

/* rank.c */
/* Allocation that cannot fail quietly: out of memory ends the job with what was being allocated. */
void *rank_realloc(WpRank *R, void *p, size_t bytes, const char *what);
/* The array p of *cap elements of elem bytes, with room for one more after n: doubled (first
 * to first elements) when full. Aborts like rank_realloc. */
void *rank_grow(WpRank *R, void *p, int n, int *cap, int first, size_t elem, const char *what);
void *rank_calloc(WpRank *R, size_t n, size_t size, const char *what);
/* Floats of chunk's parameters in shard `shard` of `nshards` (the whole chunk when nshards <= 1). */
size_t chunk_floats(const WpRank *R, int chunk, int shard, int nshards);

/* trace.c */
void trace_event(WpRank *R, const char *cat, const char *name, double t0, double t1);
void trace_comm_event(void *ud, const CommEvent *e);
/* The buffered events into the rank's part file: after a step, once a device backend has timed
 * its spans (compute_step_end), so that the buffer holds one step's events at most. */
void trace_flush(WpRank *R);
int trace_write_all(WpRank *R, const char *path);    /* collective: rank 0 writes, from every part */

#endif
