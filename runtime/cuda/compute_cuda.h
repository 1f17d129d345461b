/* Private to the CUDA compute backend: what it holds for a rank (WpRank.dev). Everything on the
 * device lives in one pool reserved at start-up (cuda_mem.h says where); activations, their
 * gradients and stashes take slots of it between operations. One stream computes; the
 * communication layer orders its own against it (comm_set_stream), or, when it takes host memory
 * (MPI), transfers are staged through pinned host buffers. */
#ifndef WP_COMPUTE_CUDA_H
#define WP_COMPUTE_CUDA_H

#include <stddef.h>
#include <stdint.h>
#include <cuda_runtime.h>
#include "train/rank.h"
#include "train/step_backend.h"
#include "cuda/cuda_check.h"
#include "cuda/cuda_mem.h"
#include "cuda/model_cuda.h"


/* The parts of the pool the slots train/step_ops.c holds take (step_cuda.c says which kind takes
 * which: activations and their gradients share one). */
enum { PART_ACTS, PART_STASHES, PART_KEEPS, SLOT_PARTS };

/* What a turn's wait finishes: an element-wise conversion into a buffer (a transfer that moved
 * another format than the buffer's), or a staged copy from host memory into the device. */
enum { AFTER_WIDEN, AFTER_ROUND, AFTER_UPLOAD };
typedef struct After { int kind; void *dst; const void *src; size_t n; } After;   /* n: elements; bytes for uploads */

/* Pinned host memory for staging, in blocks, allocated at start-up and grown (test mode only)
 * when a turn needs more; reset at every wait. */
typedef struct HostArena { char **block; size_t *size; int nblocks, cur; size_t used; } HostArena;

struct WpCompute {
    int device;
    char device_name[256];
    cudaStream_t stream;
    WcModel *model;
    CudaMemPlan mem;
    char *pool;
    char *h_stashes;              /* offload: the stash slots, pinned host memory (CudaMemPlan.stashes_host) */
    void **buf;                   /* [nbufs]: at the buffer's dtype */
    uint16_t **copy;              /* masters' bf16 working copies, NULL elsewhere */
    float **adam_m, **adam_v;
    float *gstage;                /* fp32 gradient of one chunk (bf16 gradient buffers), or NULL */
    char *xfer; size_t xfer_used; /* device copies of transfers at another format, reset at the wait */
    int *tokens, *targets;        /* device rings [mem.ntok][T] */
    int *h_tokens, *h_targets;    /* pinned, the same rings */
    cudaEvent_t *tok_copied;      /* per ring slot: its upload is done, the pinned slot is free */
    long *tok_step; int *tok_mb; int tok_next;
    const WpData **tok_src;       /* per ring slot: the data it was read from (training or --val-data) */
    double *loss, *sumsq;         /* device */
    double *h_loss, *h_sumsq;     /* pinned */
    char *used[SLOT_PARTS];       /* [mem.nacts], [mem.nstashes], [mem.nkeeps]: slot taken */
    After *after; int nafter, capafter;
    int staged;                   /* the communication layer takes host memory: stage through host */
    HostArena host;
    /* --trace: compute spans are timed on the device, by events recorded on the stream around
     * them, and given the host's clock at the step's end (cuda_trace_resolve): the host only queues
     * the work, so its own clock would time the queueing. trace_base is an event recorded on the
     * idle stream at trace_base_s (comm_now). */
    cudaEvent_t trace_base; double trace_base_s;
    struct GpuSpan { cudaEvent_t t0, t1; int event; } *gspans; int ngspans, capgspans;
};

/* Device pointers of a buffer in the format it is computed and sent with (a master: its copy). */
void *cuda_working(WpRank *R, int b);

/* Device-timed trace spans (--trace): cuda_span_start records the span's first event (NULL when
 * not tracing); cuda_span_end its last, and adds the trace event, whose times cuda_trace_resolve
 * fills in once the stream has run them (the stream idle: at the step's end). */
cudaEvent_t cuda_span_start(WpRank *R);
void cuda_span_end(WpRank *R, cudaEvent_t t0, const char *cat, const char *name);
void cuda_trace_resolve(WpRank *R);

#endif
