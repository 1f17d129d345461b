/* What a compute or local operation costs, per class of work, instead of one efficiency constant.
 * A FWD/BWD of a chunk is split into its matrix products (each by its shape m x n x k), causal
 * attention's S^2 terms (forward and backward apart), and memory-bound elementwise work (norms,
 * RoPE, SwiGLU, residual adds, the loss) counted in bytes; ACC, COPY and OPT are bytes only.
 *
 * The time of an operation is a dot product of its features (what it does) and its device's
 * coefficients (how fast that device does each thing):
 *   t = mm_flops / R_mm + mm_calls * 2 knee / R_mm + attn_fwd_flops / R_af + attn_bwd_flops / R_ab
 *       + bytes / B + ops * overhead
 * since a product of shape m n k at efficiency mm_eff * mnk / (mnk + knee) takes 2 (mnk + knee) /
 * R_mm, R_mm = peak * mm_eff: small products reach a lower share of peak. Linear in the
 * coefficients, which is what lets `wpgen calibrate` fit them by least squares (cost/fit.c).
 *
 * The coefficients come from one table of defaults per device type (costs.c, documented in
 * docs/calibration.md), relative to the topology's peak and memory bandwidth, or from a
 * calibration file (cost/calib.h) that gives a device type's measured rates. */
#ifndef WP_SIM_COSTS_H
#define WP_SIM_COSTS_H

#include "ir/plan.h"
#include "input/topology.h"

/* The features of an operation: what it does, per class of work. */
enum {
    COST_MM_FLOPS,      /* FLOPs of matrix products (2 m n k each) */
    COST_MM_CALLS,      /* number of matrix products (each pays 2 knee / R_mm) */
    COST_ATTN_FWD,      /* FLOPs of attention's S^2 terms, forward */
    COST_ATTN_BWD,      /* the same, backward (twice the forward's) */
    COST_BYTES,         /* bytes through memory: elementwise work, ACC, COPY, OPT */
    COST_OPS,           /* 1 for a compute operation: a fixed cost per call (dispatch, threads) */
    COST_RECV,          /* bytes a CPU rank's core took in from MPI meanwhile: never an
                           operation's own, what the simulator says arrived during a measured span
                           (wpgen calibrate fits the core's receiving rate from it) */
    COST__COUNT
};
extern const char *const cost_feature_names[COST__COUNT];

/* One device type's rates, absolute, in one precision. */
typedef struct CostRates {
    double mm_flops;        /* FLOP/s large matrix products reach */
    double mm_knee;         /* m*n*k at which a product reaches half of that */
    double attn_fwd_flops;  /* FLOP/s of attention forward */
    double attn_bwd_flops;  /* FLOP/s of attention backward */
    double mem_bw;          /* bytes/s of memory-bound work */
    double op_overhead_s;   /* seconds per FWD/BWD call */
    double recv_bw;         /* bytes/s a CPU rank's core takes in what it receives (MPI's copy and
                               what it displaces); 0: half of mem_bw (a read and a write) */
} CostRates;

/* A row of the defaults table: shares of the topology's figures. */
typedef struct CostDefaults {
    const char *match;      /* a device type's name starts with this (case-insensitive); "" any */
    int gpu;                /* 1: for types rated in bf16 (GPUs), 0: in fp32 (CPUs) */
    double mm_eff, mm_knee, attn_fwd_eff, attn_bwd_eff, mem_eff, op_overhead_us;
    const char *source;     /* where the figures come from */
} CostDefaults;

/* The table (ends with a row whose match is NULL) and the row a device type gets. */
extern const CostDefaults cost_defaults_table[];
const CostDefaults *cost_defaults_for(const DeviceType *d);

/* A device type's rates in a precision from the table: peak (in that precision: a GPU's fp32 is
 * half its bf16 rating, TF32) times the shares; the topology's "efficiency", when given, replaces
 * the matrix products' share and scales attention's alike. */
CostRates cost_rates_default(const DeviceType *d, WpDtype precision);

/* The same rates measured in one precision, moved to another: a GPU's compute halves from bf16 to
 * fp32 (and doubles back); a CPU computes both in fp32. */
CostRates cost_rates_convert(const CostRates *r, int gpu, WpDtype from, WpDtype to);

/* Coefficients (seconds per unit of each feature) of rates, and back. */
void cost_coefs(const CostRates *r, double c[COST__COUNT]);
CostRates cost_rates_of(const double c[COST__COUNT]);

/* Features of a compute operation (FWD, BWD, BWD_B, BWD_W) of a chunk; gpu: activations are
 * stored at the precision (else fp32, as the CPU backend keeps them). */
void cost_compute_features(const WpConfig *m, int chunk, int layer0, int nlayers, int nchunks, int kind, int recompute,
                           WpDtype precision, int gpu, double f[COST__COUNT]);

/* Seconds of features at coefficients. */
double cost_seconds(const double f[COST__COUNT], const double c[COST__COUNT]);

/* Seconds a rank's own core spends per byte it receives, at coefficients c of its device type: on
 * a CPU, MPI copies the message (by default a read and a write at the memory-bound rate; a
 * calibration measures it: COST_RECV); on a GPU nothing (DMA engines and NCCL's kernels copy
 * beside the compute). The simulator charges it (sim.c, recv_copy); the search's bounds count it
 * (bounds.c). */
double cost_recv_copy_s_per_byte(const DeviceType *d, const double c[COST__COUNT]);

#endif
