/* The operation table: one row per kind of operation (OpKind, ir/plan.h) saying what it is, as
 * Lua's lopcodes.c describes its opcodes in luaP_opmodes: its name, the phase of a turn it runs
 * in, how it uses its buffer operands, whether it is a point-to-point transfer or a collective
 * (and which), whether it has a root, what it carries, what else it names. The verifier, the
 * simulator, its pictures, the traffic count and the plan printer read these rows instead of
 * classifying operations each by hand; what an operation does to the values it touches stays
 * with the verifier's rules and the runtime's functions.
 *
 * Adding an operation: its OpKind (ir/plan.h) and its row (op_table.c); its rule in the verifier
 * (verify.c run_local for compute and local operations; for a transfer the row's uses already
 * say what lands where, and a new collective needs what it computes in verify_comm.c complete()
 * and how NCCL moves it in sim/collective.c); the strategies' method for it (lua/bridge.c); its
 * function in the runtime and its call in the emitter. Shape checks, hazards, phases, costs,
 * traffic, pictures and the printed form follow from the row. The switches over kinds have no
 * default and the generator is built with -Werror=switch, so the compiler lists the places a new
 * kind must be written, and test_optable its emitter forms and runtime function
 * (docs/extending.md, "An operation"). */
#ifndef WP_OP_TABLE_H
#define WP_OP_TABLE_H

#include <stddef.h>
#include <stdint.h>
#include "ir/plan.h"

/* A turn runs its operations in three phases, in this order: its transfers are posted, its
 * compute runs in the listed order while they move, and once they have all completed its local
 * operations run in the listed order. */
typedef enum { OP_PHASE_TRANSFER, OP_PHASE_COMPUTE, OP_PHASE_LOCAL, OP_PHASE__COUNT } OpPhase;
extern const char *const op_phase_names[OP_PHASE__COUNT];   /* "transfer", "compute", "local" */

/* A point-to-point transfer's side. */
typedef enum { P2P_NONE, P2P_SEND, P2P_RECV } OpP2P;

/* Collectives, named as NCCL names them; sim/collective.c has what each moves. */
typedef enum { COLL_NONE, COLL_BCAST, COLL_REDUCE, COLL_ALLREDUCE, COLL_ALLGATHER, COLL_REDUCE_SCATTER, COLL__COUNT } OpColl;
extern const char *const op_coll_names[COLL__COUNT];       /* "", "bcast", "reduce", ... */

/* What a transfer or collective carries. */
typedef enum {
    CARRY_NONE,
    CARRY_WHAT,     /* as op->what says: weights (W), gradients (D), activations (A) or their gradients (G) */
    CARRY_W,        /* weights */
    CARRY_D,        /* gradients */
    CARRY_ANY,      /* whatever the root's buffer holds */
    CARRY_TIED,     /* a tied embedding's gradient: the V*H part of its buffer that is the embedding's, fp32 */
    CARRY__COUNT
} OpCarry;

/* The kind of buffer an operand must be. */
typedef enum {
    OPND_NONE,      /* no buffer */
    OPND_W,         /* a weight buffer */
    OPND_D,         /* a gradient buffer */
    OPND_ANY,       /* any buffer */
    OPND_WHAT,      /* W or D as op->what says; A and G name no buffer */
} OpOperand;

/* How an operation uses a buffer operand, bits. A transfer reads when it is posted and writes or
 * empties when it completes; compute and local operations do both when they run. */
enum {
    USE_READ = 1,   /* reads what it holds */
    USE_WRITE = 2,  /* its result replaces what it holds */
    USE_ADD = 4,    /* adds a gradient into it; into an empty buffer it writes (OpNote.first) */
    USE_CLEAR = 8,  /* empties it: a gradient passed on, a buffer freed */
    USE_CHANGES = USE_WRITE | USE_ADD | USE_CLEAR,
};

/* What else an operation names or requires, bits. */
enum {
    OPF_CHUNK = 1,      /* names a chunk (op->chunk) */
    OPF_MB = 2,         /* names a micro-batch (op->mb) */
    OPF_DISTINCT = 4,   /* its two operands are different buffers */
    OPF_MASTER = 8,     /* updates the master weights of its chunk in buf: the one kind that may write a master */
    OPF_PASS_D = 16,    /* a gradient (what D) it sends is passed on, not copied: its buffer is empty afterwards */
    OPF_STEP_END = 32,  /* runs at the step's end, not in its turn: the runtime records it there and applies it
                           once every rank's turns are done and the gradient norm is all-reduced (train/rank.c,
                           train/loop.c), so the simulator times it there too (sim/sim.c, step_end) */
    OPF_FP32 = 64,      /* its gradient operands are fp32 buffers: the tied sums, which must round alike on both
                           ends (the owners' gradients, which OPT reads, are: plan.h's rule) */
    OPF_RIDES = 128,    /* a compute-phase operation of no work of its own that runs inside the compute operation
                           listed right after it (RING: that compute's ring attention): the simulator times the
                           two together, the longer of the compute and what this moves (sim/sim.c cp_overlap) */
};

typedef struct OpInfo {
    const char *name;       /* "FWD", as plans, schedules and traces print it (op_names[] is this column) */
    const char *label;      /* compute: short label of pictures ("F", "Bb"); NULL for others */
    const char *format;     /* op_format's text after the name: $c chunk, $m mb, $b buf, $B buf2, $g group,
                             * $p peer or root, $w what, $x what a transfer moves (its buffer, or A/G's chunk and mb),
                             * $s a RING's steps, $y its bytes */
    uint8_t phase;          /* OpPhase */
    uint8_t p2p;            /* OpP2P */
    uint8_t coll;           /* OpColl */
    uint8_t root;           /* op->peer is the root of a collective */
    uint8_t carries;        /* OpCarry */
    uint8_t flags;          /* OPF_* */
    uint8_t operand[2];     /* OpOperand of buf, buf2 */
    uint8_t use[2];         /* USE_* of buf, buf2; for rooted collectives, at the members other than the root */
    uint8_t root_use[2];    /* USE_* of buf, buf2 at the root */
    const char *role[2];    /* how the verifier's messages name buf, buf2 ("weight", "gradient shard") */
    double fwd_units;       /* compute: its work in forward passes of its chunk */
    double recompute_units; /* compute: forward passes it adds when activations are recomputed */
    double mem_passes;      /* local: times its chunk's bytes (its shard's) go through memory */
} OpInfo;

extern const OpInfo op_table[OP__COUNT];

static inline const OpInfo *op_info(int kind) { return &op_table[kind]; }
static inline int op_is_compute(int kind) { return op_table[kind].phase == OP_PHASE_COMPUTE; }
static inline int op_is_transfer(int kind) { return op_table[kind].phase == OP_PHASE_TRANSFER; }
static inline int op_is_local(int kind) { return op_table[kind].phase == OP_PHASE_LOCAL; }
static inline int op_at_step_end(int kind) { return (op_table[kind].flags & OPF_STEP_END) != 0; }
static inline int op_rides(int kind) { return (op_table[kind].flags & OPF_RIDES) != 0; }

/* How op, on rank, uses its operand k (0: buf, 1: buf2): its row's use, or the root's at the root
 * of a rooted collective; 0 when the operand is absent. */
static inline unsigned op_use(const Op *op, int rank, int k) {
    const OpInfo *in = &op_table[op->kind];
    if ((k ? op->buf2 : op->buf) < 0) return 0;
    return in->root && op->peer == rank ? in->root_use[k] : in->use[k];
}

/* The buffer op, on rank, writes its result into (USE_WRITE), or -1. */
static inline int op_written(const Op *op, int rank) {
    return op_use(op, rank, 0) & USE_WRITE ? op->buf : op_use(op, rank, 1) & USE_WRITE ? op->buf2 : -1;
}

/* The buffer op, on rank, leaves empty (USE_CLEAR, or a gradient it sends on: OPF_PASS_D), or -1.
 * With op_written, what a transfer changes when it completes. */
static inline int op_emptied(const Op *op, int rank) {
    if (op_use(op, rank, 0) & USE_CLEAR) return op->buf;
    if (op_use(op, rank, 1) & USE_CLEAR) return op->buf2;
    return (op_table[op->kind].flags & OPF_PASS_D) && op->what == WHAT_D ? op->buf : -1;
}

/* An activation transfer: what A or G, which names a chunk and a micro-batch, not a buffer. */
static inline int op_moves_activation(const Op *op) {
    return op_table[op->kind].carries == CARRY_WHAT && (op->what == WHAT_A || op->what == WHAT_G);
}

#endif
