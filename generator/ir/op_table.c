/* The rows of the operation table (op_table.h), and op_names[], its name column, made from the
 * same rows so that the two cannot disagree. A row's name is its OpKind without OP_. */
#include "ir/op_table.h"

/* Operand uses, short. */
#define R USE_READ
#define W USE_WRITE

#define OP_ROWS(X) \
    /* ---- compute: runs in order while the turn's transfers move ---- */ \
    X(FWD, .phase = OP_PHASE_COMPUTE, .label = "F", .flags = OPF_CHUNK | OPF_MB, \
        .operand = { OPND_W }, .use = { R }, .role = { "weight" }, \
        .fwd_units = 1, .format = "chunk $c mb $m with $b") \
    X(BWD, .phase = OP_PHASE_COMPUTE, .label = "B", .flags = OPF_CHUNK | OPF_MB, \
        .operand = { OPND_W, OPND_D }, .use = { R, USE_ADD }, .role = { "weight", "gradient" }, \
        .fwd_units = 2, .recompute_units = 1, .format = "chunk $c mb $m with $b into $B") \
    X(BWD_B, .phase = OP_PHASE_COMPUTE, .label = "Bb", .flags = OPF_CHUNK | OPF_MB, \
        .operand = { OPND_W }, .use = { R }, .role = { "weight" }, \
        .fwd_units = 1, .recompute_units = 1, .format = "chunk $c mb $m with $b") \
    X(BWD_W, .phase = OP_PHASE_COMPUTE, .label = "Bw", .flags = OPF_CHUNK | OPF_MB, \
        .operand = { OPND_NONE, OPND_D }, .use = { 0, USE_ADD }, .role = { NULL, "gradient" }, \
        .fwd_units = 1, .format = "chunk $c mb $m into $B") \
    /* context parallelism: the ring attention of the compute listed right after it, which it rides \
       (OPF_RIDES): its K and V blocks (forward) or K, V, dK and dV (backward) passed round the group \
       while that compute runs, ring_steps steps of all the chunk's layers, op_ring_bytes a member \
       sends. One per FWD, BWD or BWD_B, not one per layer and step: those are (C-1) x layers of \
       one shape, so a row per step would multiply a plan of 8,192 GPUs by 7 x 32 (cp8, llama2-7b) \
       for nothing the verifier or the simulator could use; the C core adds them after the \
       strategy (plan_add_rings), the verifier proves each against the compute it serves. */ \
    X(RING, .phase = OP_PHASE_COMPUTE, .label = "R", .flags = OPF_CHUNK | OPF_MB | OPF_RIDES, \
        .format = "chunk $c mb $m: $s steps, $y bytes") \
    /* ---- transfers: posted when the turn starts, complete before its local operations ---- */ \
    X(SEND, .phase = OP_PHASE_TRANSFER, .p2p = P2P_SEND, .carries = CARRY_WHAT, .flags = OPF_PASS_D, \
        .operand = { OPND_WHAT }, .use = { R }, .format = "$w $x to rank $p") \
    X(RECV, .phase = OP_PHASE_TRANSFER, .p2p = P2P_RECV, .carries = CARRY_WHAT, \
        .operand = { OPND_WHAT }, .use = { W }, .format = "$w $x from rank $p") \
    X(BCAST, .phase = OP_PHASE_TRANSFER, .coll = COLL_BCAST, .root = 1, .carries = CARRY_ANY, \
        .operand = { OPND_ANY }, .use = { W }, .root_use = { R }, .format = "$b group $g root $p") \
    X(REDUCE, .phase = OP_PHASE_TRANSFER, .coll = COLL_REDUCE, .root = 1, .carries = CARRY_D, \
        .operand = { OPND_D }, .use = { R | USE_CLEAR }, .root_use = { R | W }, .role = { "gradient" }, \
        .format = "$b group $g root $p") \
    X(ALLREDUCE, .phase = OP_PHASE_TRANSFER, .coll = COLL_ALLREDUCE, .carries = CARRY_D, \
        .operand = { OPND_D }, .use = { R | W }, .role = { "gradient" }, .format = "$b group $g") \
    X(ALLGATHER, .phase = OP_PHASE_TRANSFER, .coll = COLL_ALLGATHER, .carries = CARRY_W, \
        .operand = { OPND_W, OPND_W }, .use = { R, W }, .role = { "weight shard", "weight" }, \
        .format = "$b -> $B group $g") \
    X(REDUCE_SCATTER, .phase = OP_PHASE_TRANSFER, .coll = COLL_REDUCE_SCATTER, .carries = CARRY_D, \
        .operand = { OPND_D, OPND_D }, .use = { R | USE_CLEAR, W }, .role = { "gradient", "gradient shard" }, \
        .format = "$b -> $B group $g") \
    /* a tied model's two uses of the embedding summed where they are on two ranks: each member's \
       V*H part (chunk 0's first, or the last chunk's end) all-reduced in fp32, the same bits on both */ \
    X(TIE_ALLREDUCE, .phase = OP_PHASE_TRANSFER, .coll = COLL_ALLREDUCE, .carries = CARRY_TIED, .flags = OPF_FP32, \
        .operand = { OPND_D }, .use = { R | W }, .role = { "tied gradient" }, .format = "$b group $g") \
    /* ---- local: run in order once the turn's transfers have completed ---- */ \
    X(ACC, .phase = OP_PHASE_LOCAL, .flags = OPF_DISTINCT, \
        .operand = { OPND_D, OPND_D }, .use = { USE_ADD, R | USE_CLEAR }, .role = { "destination", "source" }, \
        .mem_passes = 3, .format = "$b += $B") \
    X(COPY, .phase = OP_PHASE_LOCAL, .flags = OPF_DISTINCT, \
        .operand = { OPND_W, OPND_W }, .use = { W, R }, .role = { "destination", "source" }, \
        .mem_passes = 2, .format = "$b = $B") \
    /* a tied model's two uses of the embedding summed: reads both V*H parts, writes both (chunk 0's bytes) */ \
    X(TIE, .phase = OP_PHASE_LOCAL, .flags = OPF_DISTINCT | OPF_FP32, \
        .operand = { OPND_D, OPND_D }, .use = { R | W, R | W }, .role = { "embedding gradient", "LM head gradient" }, \
        .mem_passes = 4, .format = "$b <-> $B") \
    /* AdamW reads w, g, m, v and writes w, m, v: 7 passes */ \
    X(OPT, .phase = OP_PHASE_LOCAL, .flags = OPF_CHUNK | OPF_MASTER | OPF_STEP_END, \
        .operand = { OPND_W, OPND_D }, .use = { R | W, R | USE_CLEAR }, .role = { "master", "gradient" }, \
        .mem_passes = 7, .format = "chunk $c $b with $B") \
    X(FREE, .phase = OP_PHASE_LOCAL, \
        .operand = { OPND_ANY }, .use = { USE_CLEAR }, .format = "$b")

#define ROW(k, ...) [OP_##k] = { .name = #k, __VA_ARGS__ },
#define NAME(k, ...) [OP_##k] = #k,

const OpInfo op_table[OP__COUNT] = { OP_ROWS(ROW) };
const char *const op_names[OP__COUNT] = { OP_ROWS(NAME) };

const char *const op_phase_names[OP_PHASE__COUNT] = { "transfer", "compute", "local" };
const char *const op_coll_names[COLL__COUNT] = { "", "bcast", "reduce", "allreduce", "allgather", "reduce_scatter" };

#undef R
#undef W
