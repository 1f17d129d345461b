/* The simulator: runs a verified plan against a topology, event by event, with the semantics the
 * verifier proves (verify.c): each rank, independently of the others, starts a turn by posting
 * its transfers, computes the turn's FWD/BWD in order while they move, waits for them, then runs
 * its local operations (ACC, COPY, OPT, FREE); then it starts its next turn. A point-to-point
 * transfer starts once both its send and its receive are posted (the k-th send from a to b meets
 * the k-th receive at b from a); a collective once every member has posted it (k-th call of each
 * member). Empty turns cost nothing.
 *
 * Costs, all from the topology and the model (nothing is tuned to a published figure):
 *   compute    per class of work (cost/costs.h): a FWD/BWD's matrix products by shape (a small
 *              product reaches a lower share of peak), attention forward and backward apart, and
 *              its elementwise work by bytes at the device's memory bandwidth, each at its
 *              device type's rate: the defaults table (cost/costs.c, shares of the topology's peak
 *              in the plan's precision: a GPU's bf16 rating, half of it in fp32 for TF32; a
 *              CPU's fp32 rating in both) or a calibration file's measured rates (cost/calib.c).
 *              BWD = two products per forward product, attention backward and twice the bytes,
 *              + a FWD with recomputation; BWD_B the input-gradient half, BWD_W the weights'.
 *   sharing    a node whose ranks outnumber its "cores" (CPU nodes): k of its ranks computing
 *              (compute or local operations) at once each run at min(1, cores / k) of their
 *              rate, re-evaluated as ranks start and finish (processor sharing).
 *   receiving  on a CPU, the receiving rank's core copies every byte it receives (at its
 *              calibrated receiving rate; by default a read and a write at the memory-bound
 *              rate) once the bytes are there, computing nothing meanwhile: MPI over shared
 *              memory (or TCP) copies on the CPU; a GPU's DMA engines and NCCL's kernels copy
 *              beside its compute, so nothing is charged there.
 *              And a point-to-point transfer into a CPU rank starts at the receiver's first MPI
 *              call after both have posted: at once if it waits, else at its next layer
 *              boundary (a post is not a call that moves messages); a collective of CPU ranks
 *              once every member has made that call after the last one posted.
 *   memory     ACC 3, COPY 2, OPT (AdamW: read w g m v, write w m v) 7 passes over the
 *              elements, each at its buffer's format (m, v fp32; OPT also writes a master's
 *              working copy in a bf16 plan), at the device's memory-bound rate.
 *   bytes      every transfer at the format of what it carries (plan_carried_bytes).
 *   transfers  alpha-beta per link class, as flows that share links fairly (max-min):
 *              NVL/SHM: each device's send and receive port (intra bandwidth each);
 *              PCI: the device ports, and traffic between PCIe islands of a node shares each
 *              island's uplink (intra bandwidth per direction);
 *              NET: the node's NICs (nics_per_node, devices spread evenly over them), bandwidth
 *              per NIC and direction.
 *   collectives as NCCL's ring algorithms (sim/collective.h, which plan_traffic counts by too):
 *              broadcast and reduce a pipelined chain from the root (n-1 edges carrying the
 *              whole buffer), all-reduce 2(n-1)/n and all-gather / reduce-scatter (n-1)/n of it
 *              over each of the ring's n edges, all edges at once; the latency term is the
 *              smaller of the ring's (steps x link latency) and a tree's (log2 n levels), as
 *              NCCL's tuner picks tree for small messages.
 * Which phase an operation runs in, its work in forward passes and its passes through memory
 * are its row of the operation table (ir/op_table.h). */
#ifndef WP_SIM_H
#define WP_SIM_H

#include <stddef.h>
#include "ir/plan.h"
#include "cost/calib.h"
#include "cost/costs.h"

typedef struct SimOptions {
    const Topology *topo;   /* NULL: the plan's; else one with the same devices (what-if links) */
    int free_comm;          /* transfers and collectives take no time (rendezvous still holds) */
    int free_local;         /* ACC, COPY, OPT take no time */
    int record;             /* keep every operation's times (for traces and pictures) */
    int lockstep;           /* every rank waits for all others at the end of every turn (the papers'
                               turn model; the runtime does not do this) */
    const Calibration *calib;   /* measured rates per device type (NULL: the defaults table) */
    int no_symmetry;        /* simulate every replica even where they are moves of one pipeline
                               (symmetry.h: the same results, R times the work; for tests) */
    double stop_after;      /* > 0: stop once the clock passes this many seconds (sim_run returns
                               SIM_STOPPED): the step takes longer; for searches */
    double unit_fwd_s;      /* > 0: every FWD takes this long whatever its chunk (BWD twice...): the
                               papers' equal-stage assumption, for tests */
} SimOptions;

/* One operation's times: compute and local ops run [t0, t1); transfers are posted at t_post,
 * start when every side has posted (t0) and complete at t1. */
typedef struct SimSpan {
    int rank, turn, op;     /* op: index into the rank's ops */
    double t_post, t0, t1;
    double recv_bytes;      /* a compute operation on a CPU: bytes that arrived while it ran, which
                               the runtime copies inside its span (calibrate fits their cost) */
} SimSpan;

typedef struct SimResult {
    double step_time;                   /* seconds: the last rank's end of step */
    double tokens_per_s_per_device;
    double bubble_ratio;                /* 1 - FWD/BWD busy time / (ranks * step time) */
    double bytes_intra, bytes_inter;    /* per step, all ranks, as plan_traffic counts them */
    double link_bytes[LINK__COUNT];     /* bytes the simulated flows put on each link class */
    double compute_s, comm_exposed_s;   /* sums over ranks: FWD/BWD time; time waiting on transfers */
    double offload_exposed_s;           /* the part of compute_s that is offload's copies not hidden
                                           behind compute (sim/offload.c); 0 without offload */
    double *rank_busy;                  /* [nranks] FWD/BWD seconds */
    double *rank_end;                   /* [nranks] when each rank finished its step */
    double **turn_t;                    /* [nranks][nturns + 1]: turn t of rank r runs [turn_t[r][t], turn_t[r][t+1]) */
    int nspans; SimSpan *spans;         /* with record: every operation, in rank, op order */
    long events;
    int nranks;
    int symmetric;                      /* > 0: the replicas were simulated once, as this many moves
                                           of replica 0 (symmetry.h); 0: every rank */
} SimResult;

enum { SIM_STOPPED = 1 };

/* 0, or -1 with one line in err (an unverified plan, a topology that does not match it), or
 * SIM_STOPPED (stop_after passed; nothing in r). */
int sim_run(const Plan *p, const SimOptions *o, SimResult *r, char *err, size_t errlen);
void sim_result_free(SimResult *r);

/* Seconds one compute or local operation takes on its rank (0 for transfers), at the defaults
 * table's rates or a calibration's. */
double sim_op_seconds(const Plan *p, const Topology *t, int rank, const Op *op, const OpNote *note);
double sim_op_seconds_calib(const Plan *p, const Topology *t, const Calibration *calib, int rank, const Op *op,
                            const OpNote *note);
/* Seconds of offload's copies (--offload-activations) that compute_s, the compute operation's
 * own time on its rank, does not hide (sim/offload.c); 0 without offload. Part of what
 * sim_op_seconds says. */
double sim_offload_exposed(const Plan *p, const Topology *t, int rank, const Op *op, double compute_s);
/* What an operation does, per class of work (cost/costs.h): calibrate fits rates to these. */
void sim_op_features(const Plan *p, int rank, const Op *op, const OpNote *note, double f[COST__COUNT]);

/* Bytes a transfer or collective carries (a collective: its whole buffer). */
double sim_op_bytes(const Plan *p, int rank, int opi);

/* Chrome trace (chrome://tracing, Perfetto) and SVG timeline of a recorded run. 0 or -1 (errno). */
int sim_write_trace(const Plan *p, const SimResult *r, const char *path);
int sim_write_svg(const Plan *p, const SimResult *r, const char *title, const char *path);

#endif
