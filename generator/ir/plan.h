/* The plan IR: ranks, chunks and their owners, buffers, groups, and per rank a list of turns of
 * operations. Strategies (Lua) build it through plan_add_*; plan_verify proves it; the simulator
 * and the emitter only take verified plans. Every operation kind is described once, by its row
 * of op_table[] (ir/op_table.h): its phase in a turn, its operands, what it carries. */
#ifndef WP_PLAN_H
#define WP_PLAN_H

#include <stddef.h>
#include <stdint.h>
#include "common/config.h"
#include "input/topology.h"

typedef enum {
    OP_FWD,             /* chunk mb, weights in buf */
    OP_BWD,             /* chunk mb, weights in buf, gradient added into buf2 */
    OP_BWD_B,           /* chunk mb, weights in buf: activation gradient only */
    OP_BWD_W,           /* chunk mb, weight gradient into buf2 (after BWD_B) */
    OP_SEND,            /* what: W/D buf to peer; A/G (chunk, mb) to peer */
    OP_RECV,            /* what: W/D into buf from peer; A/G (chunk, mb) from peer */
    OP_BCAST,           /* buf over group from root (peer) */
    OP_REDUCE,          /* D buf summed over group into root (peer) */
    OP_ALLREDUCE,       /* D buf summed over group, everywhere */
    OP_ALLGATHER,       /* W shards in buf over group -> whole chunk in buf2 */
    OP_REDUCE_SCATTER,  /* D buf over group -> this rank's shard of the sum in buf2 */
    OP_ACC,             /* buf += buf2 (gradients) */
    OP_COPY,            /* buf = buf2 (weights; e.g. the owner's master into a ring buffer) */
    OP_OPT,             /* AdamW on chunk: master weights buf, gradient buf2 */
    OP_FREE,            /* buf is no longer needed */
    /* last, so that the kinds before keep their numbers (plan_hash counts them: recorded plans'
     * hashes stay as they were) */
    OP_TIE,             /* tied embeddings: buf (chunk 0's complete gradient, the embedding's) and the head
                           mirror's part of buf2 (the last chunk's) both become their sum */
    OP_TIE_ALLREDUCE,   /* tied embeddings on two ranks: the embedding's part of buf (chunk 0's complete
                           gradient on one member, the last chunk's on the other) summed over group */
    OP_RING,            /* context parallelism: the ring attention of the FWD, BWD or BWD_B of chunk mb listed
                           right after it, ring_steps block steps and op_ring_bytes bytes round the group
                           (make_plan adds it, never a strategy: op_table.c's row says why one per compute) */
    OP__COUNT
} OpKind;

/* What a transfer carries. */
typedef enum { WHAT_NONE, WHAT_W, WHAT_D, WHAT_A, WHAT_G,
               WHAT_T   /* only as plan_op_carries says it: a tied embedding's V*H gradient, in fp32 */
} OpWhat;

typedef struct Op {
    uint8_t kind;       /* OpKind */
    uint8_t what;       /* OpWhat, for SEND/RECV */
    int16_t buf, buf2;  /* buffer indices on this rank, -1 if none */
    uint16_t ring_steps;    /* RING: its block steps, all its layers (what was padding: Op stays 28 bytes) */
    int32_t chunk;      /* FWD/BWD/OPT/RING; A/G transfers: the chunk whose input (A) or input gradient (G) */
    int32_t mb;         /* global micro-batch, -1 if none */
    union {
        struct {
            int32_t peer;   /* SEND/RECV: the other rank; collectives: the root (rank), -1 if none */
            int32_t group;  /* collectives: group index, -1 if none */
        };
        uint32_t ring_bytes[2]; /* RING, which names no rank or group (its peers are the members of its
                                 * own group): the bytes one member sends round it, low and high 32 bits
                                 * (op_ring_bytes) */
    };
    uint32_t srcloc;    /* the strategy line that added it: (i + 1) << 20 | line, i indexing Plan.sources;
                           0: not known (a plan built in C). Not part of plan_hash. */
} Op;

/* A RING's bytes (Op.ring_bytes), and setting them. */
static inline uint64_t op_ring_bytes(const Op *op) { return (uint64_t)op->ring_bytes[1] << 32 | op->ring_bytes[0]; }
static inline void op_set_ring_bytes(Op *op, uint64_t n) { op->ring_bytes[0] = (uint32_t)n; op->ring_bytes[1] = (uint32_t)(n >> 32); }
_Static_assert(sizeof(Op) == 28, "an Op is 28 bytes: a plan of 8,192 GPUs holds millions");

typedef enum { BUF_W, BUF_D } BufKind;

/* Number formats (common/precision.h's WpDtype). A plan has two settings: its precision, the
 * format of the working weights (what FWD and BWD compute with and W transfers carry), of the
 * activations and of their gradients (A and G transfers, the stash); and its grad_precision, the
 * format of weight gradients on the wire (D transfers and collectives) and in the buffers that
 * carry them. Whatever the settings, the owner keeps fp32: its master weights with AdamW's m and
 * v, and the gradient OPT reads, into which what arrives in grad_precision is added (ACC, a
 * reduction or BWD converts). plan_finish gives every buffer its format by that rule:
 *     master W            fp32 (+ m, v fp32), and a working copy at the precision when that is
 *                         not fp32: OPT refreshes it, compute and sends read it
 *     other W             precision
 *     D that OPT reads    fp32 (the owner's accumulator)
 *     other D             grad_precision */
typedef struct PlanBuf {
    char name[24];
    uint8_t kind;       /* BufKind */
    uint8_t master;     /* holds the owner's master weights (and optimizer state) from the start */
    uint8_t dtype;      /* WpDtype its elements are kept in (plan_finish) */
    uint8_t copy_dtype; /* masters: WpDtype of the working copy, when it differs from dtype (a plan
                         * whose precision is not fp32); equal to dtype: no copy (plan_finish) */
    int32_t chunk;      /* the chunk it is sized for and, for masters, holds; -1: sized for the largest */
    int32_t shard, nshards; /* a shard of the chunk (fully sharded plans); 0 of 1 for whole chunks */
    size_t elems;       /* elements: the chunk's parameters, or its shard's (plan_finish) */
    size_t bytes;       /* elems at dtype (plan_finish); masters' state and copy: plan_buf_mem */
} PlanBuf;

static inline int plan_buf_has_copy(const PlanBuf *b) { return b->master && b->copy_dtype != b->dtype; }

/* A rank's memory at its peak, by what holds it (plan_verify; plan_buf_mem for one buffer). */
typedef struct PlanMem {
    size_t weights;     /* working weights: weight buffers other than masters, and masters' working copies */
    size_t grads;       /* gradient buffers, at their formats */
    size_t masters;     /* masters' fp32 weights and AdamW's m and v: 12 bytes per parameter */
    size_t acts;        /* the most activations kept at once: stashes, chunk inputs, their gradients */
    size_t workspace;   /* temporaries of one chunk's forward and backward: per part of config.c's
                         * workspace, the largest over the chunks the rank computes; and the
                         * fp32 staging gradient where gradients are bf16 (plan_grad_stage_bytes)
                         * and the room for transfers in another format (plan_rank_xfer_bytes) */
    size_t host;        /* host memory, not part of the device's peak: the most stashes kept there
                         * at once (--offload-activations, config.h's wp_stash_host_bytes) */
} PlanMem;

/* What the verifier learnt about an operation, for the emitter and the simulator. */
typedef struct OpNote {
    int32_t chunk;      /* the chunk a W/D transfer or collective carries */
    int32_t from_rank;  /* compute: where its weights came from (-1: own master); p2p: the peer */
    int32_t from_turn;  /* the turn that delivered them; p2p: the peer's turn of the matching op */
    uint8_t first;      /* gradient ops: the destination was empty, so it is written, not added to */
    uint16_t shard, nshards;
} OpNote;

typedef struct PlanRank {
    int node, device;   /* device: global device index in the topology */
    int replica, stage; /* data-parallel replica, position in its pipeline */
    int nbufs, capbufs; PlanBuf *bufs;
    int bufs_index_cap; int32_t *bufs_index;   /* names -> 1 + index, open addressing (plan.c) */
    int nops, capops; Op *ops;
    int *turn_start;    /* [nturns + 1] offsets into ops, filled by plan_finish */
    OpNote *notes;      /* [nops], filled by plan_verify */
    size_t peak_mem;    /* filled by plan_verify: buffers, optimizer state, activations, workspace */
    PlanMem mem;        /* filled by plan_verify: peak_mem by what holds it (they sum to it) */
} PlanRank;

typedef struct PlanChunk {
    int layer0, nlayers;
    int nowners, capowners; int *owners;   /* ranks holding master weights: one per replica, or shards */
    int replicated;     /* every rank holds its master and computes it with it (plan_set_replicated): the
                         * embedding or the final norm and LM head kept on every rank instead of passed */
} PlanChunk;

typedef struct PlanGroup {
    int n; int *ranks;  /* members in order: shard i lives on ranks[i] */
} PlanGroup;

/* Per-op turn is kept while building; plan_finish sorts ops by turn (stable). */
typedef struct Plan {
    const Topology *topo;   /* with model.cp > 1 a topology of context-parallel groups (topology_groups) */
    Topology *own_topo;     /* that topology, when the plan owns it (make_plan); freed with the plan */
    WpConfig model;
    char *strategy;
    int nranks, replicas, nchunks, nturns;
    int micro_batches;  /* per rank (per pipeline rank for activation passing) */
    int total_mbs;      /* M: global micro-batches per step, all replicas */
    int recompute;      /* config.h's WP_KEEP_ALL, WP_RECOMPUTE or WP_RECOMPUTE_OFFLOAD */
    WpDtype precision;      /* working weights, activations, activation gradients (see PlanBuf) */
    WpDtype grad_precision; /* weight gradients on the wire and in flight (see PlanBuf) */
    uint8_t weight_wire_fp32;   /* working weights move in fp32 whatever the precision (W transfers
                                 * and collectives; PyTorch's fully sharded flat parameters without a
                                 * MixedPrecision policy); 0: in the precision */
    PlanRank *ranks;
    PlanChunk *chunks;
    int ngroups, capgroups; PlanGroup *groups;
    int32_t **op_turn;  /* [rank][op] turn while building */
    char *notes;        /* the strategy's words on what it chose, for the summary */
    size_t notes_len, notes_cap;   /* its length and room (plan:note appends) */
    int nsources; char **sources;   /* the Lua files ops were added from (Op.srcloc), as the bridge names them */
    int finished, verified;
    size_t peak_mem;    /* largest over ranks */
    int peak_rank;
} Plan;

extern const char *const op_names[OP__COUNT];   /* the name column of op_table[] (ir/op_table.c) */
extern const char *const what_names[];          /* OpWhat: "-", "W", "D", "A", "G", "T" */

Plan *plan_new(const Topology *t, const WpConfig *m, const char *strategy, int nranks);
void plan_free(Plan *p);

/* Builder. Each returns 0, or -1 with a message in err. */
int plan_set_chunks(Plan *p, const int *layers, int n, char *err, size_t errlen);
int plan_add_owner(Plan *p, int chunk, int rank, char *err, size_t errlen);
/* Marks the first or the last chunk replicated (PlanChunk.replicated): its weights never travel,
 * every rank of the plan owns a whole master of it, computes it with that master and updates it
 * with the gradient summed over all ranks. Only such a chunk may hold no layers. */
int plan_set_replicated(Plan *p, int chunk, char *err, size_t errlen);
int plan_add_buf(Plan *p, int rank, const char *name, BufKind kind, int chunk, int master,
                 int shard, int nshards, char *err, size_t errlen);   /* returns index or -1 */
int plan_find_buf(const Plan *p, int rank, const char *name);
int plan_add_group(Plan *p, const int *ranks, int n, char *err, size_t errlen); /* returns index or -1 */
int plan_add_op(Plan *p, int rank, int turn, const Op *op, char *err, size_t errlen);
/* Copies replica 0 (ranks 0 .. P-1, P = nranks / replicas), as built so far, onto every other
 * replica q, which must still be empty (no buffer, operation or owner): rank qP + r gets rank r's
 * buffers, its operations in the same order at the same turns from the same strategy lines, and
 * its place (replica + q, the same stage), every rank an operation names moved by qP and every
 * micro-batch by qP x micro_batches. A group of replica 0's ranks becomes its copy in replica q
 * (made in the order of replica 0's groups, as a strategy building each replica in turn makes
 * them); a group across replicas (a chunk's owners' all-reduce) stays the same one; each chunk
 * gets replica q's owners after replica q-1's. The plan is then the one the strategy would build
 * replica by replica, for the Lua of one (strategies whose replicas are alike). 0, or -1 with a
 * message: an operation of replica 0 names a rank outside it. */
int plan_copy_replica(Plan *p, char *err, size_t errlen);
/* Orders every rank's ops by turn, sizes buffers; after this the plan is read-only. */
int plan_finish(Plan *p, char *err, size_t errlen);

/* Proves the plan (see verify.c for the rules). 0, or -1 with one line in err:
 * "rank R, turn T, OP: rule broken". Fills the notes and the peak memory. */
int plan_verify(Plan *p, char *err, size_t errlen);

/* Bytes moved in one step, summed over ranks, split by whether the link leaves the node;
 * collectives counted as NCCL's ring algorithms move them (sim/traffic.c, sim/collective.h). */
void plan_traffic(const Plan *p, double *intra, double *inter);
/* Of that, what a context-parallel plan adds inside the nodes (docs/context-parallel.md): every
 * member's ring attention blocks and the all-gathers and reduce-scatters inside the groups that
 * W and D transfers and collectives take; between the nodes it moves the group plan's bytes. */
double plan_cp_traffic(const Plan *p);

/* One line, "FWD chunk 3 mb 5 with w0", as the row's format says; returns what snprintf does. */
int op_format(const Plan *p, int rank, const Op *op, char *out, size_t len);
size_t plan_chunk_params(const Plan *p, int chunk);  /* parameters of one chunk */
size_t plan_chunk_bytes(const Plan *p, int chunk);   /* one chunk's parameters at 4 bytes (its fp32 master) */
size_t plan_act_bytes(const Plan *p);                /* one activation a rank holds, G*S*H elements (a context-parallel
                                                         * member's G*S/C*H) at the precision */
/* One of nshards shards of n elements: split evenly, rounded up (the last shard is padded);
 * nshards < 1 counts as 1. */
size_t shard_elems(size_t n, int nshards);
size_t plan_shard_elems(const Plan *p, int chunk, int nshards);   /* 0 for chunk -1 */

/* What a transfer or collective op (on rank) carries: WHAT_W, WHAT_D, WHAT_A or WHAT_G (a
 * broadcast: what its buffer holds, by the buffer's kind), WHAT_T (TIE_ALLREDUCE); WHAT_NONE for
 * other operations. */
int plan_op_carries(const Plan *p, int rank, const Op *op);
/* The format a transfer carrying what moves in: A, G the precision; W the precision, or fp32 where
 * weight_wire_fp32; D the grad_precision; T fp32 (the two ends of a tied embedding must add alike). */
WpDtype plan_carried_dtype(const Plan *p, int what);
/* Bytes of one value on the wire: a chunk's weights or gradient (or a shard of nshards) for W and
 * D, one activation or activation gradient for A and G, the V*H embedding for T (chunk and
 * nshards unused for A, G and T). */
size_t plan_carried_bytes(const Plan *p, int what, int chunk, int nshards);

/* Context parallelism (docs/context-parallel.md): what one member of a group of C moves inside its
 * group beside the group plan's operations. The ring attention a compute operation needs: per
 * layer C-1 steps, each passing a block of S/C tokens' K and V (a forward pass) or K, V, dK and dV
 * (a backward's input-gradient pass) at the precision; *steps the steps, the bytes one member
 * sends (and receives) in all. 0 for other operations and where cp is 1. The plan holds it as the
 * RING listed right before the operation (plan_add_rings), which the verifier checks against this. */
double plan_cp_ring_bytes(const Plan *p, const Op *op, double *steps);
/* After the strategy (make_plan): a RING before every compute operation of a plan with cp > 1 that
 * plan_cp_ring_bytes says needs one, of that many steps and bytes, in the same turn; the plan is
 * finished. 0, or -1 with a message (a ring of more steps than a RING holds). */
int plan_add_rings(Plan *p, char *err, size_t errlen);
/* The blocks in flight of a RING's ring on its member (config.c's WP_WS_KV_RING part, at the
 * plan's precision), which the verifier counts in the workspace of a rank that holds the RING. */
size_t plan_ring_buffer_bytes(const Plan *p, const Op *ring);
/* The same for a compute operation of kind on nlayers layers of model m (the search's bounds). */
double cp_ring_bytes(const WpConfig *m, WpDtype prec, int nlayers, int kind, int recompute, double *steps);
/* The all-gather (a W) or reduce-scatter (a D) inside the group that a W or D transfer or
 * collective of `bytes` (the group's, plan_carried_bytes) takes: (C-1)/C of it per member. */
double plan_cp_gather_bytes(const Plan *p, double bytes);

/* Adds the memory one buffer takes on its rank to m: its elements, and a master's AdamW state and
 * working copy. Returns the bytes added. */
size_t plan_buf_mem(const PlanBuf *b, PlanMem *m);
size_t plan_mem_total(const PlanMem *m);
/* The workspace of a rank that computes the chunks computes[c] != 0 (NULL: every chunk): per part
 * of config.c's workspace the largest over those chunks, at the plan's precision; ring 0 leaves out
 * the ring attention's part (WP_WS_KV_RING), which the verifier counts from the RINGs
 * (plan_ring_buffer_bytes). */
size_t plan_workspace_bytes(const Plan *p, const uint8_t *computes, int ring);
/* The fp32 staging gradient of a rank with a bf16 gradient buffer: a backward sums a bf16
 * gradient in fp32 and rounds it once, one segment at a time (a layer's, the head's, the
 * embedding's: config.h's wp_grad_segment) through an fp32 array of the largest segment (the CPU
 * and CUDA backends', cuda_mem.h); 0 where every gradient buffer is fp32. Part of the workspace. */
size_t plan_grad_stage_bytes(const Plan *p, int rank);
/* The device area a rank's W and D transfers need in another format than their buffers' own (a
 * buffer whose working format, a master's copy or else its own, is not what the plan carries:
 * an fp32 accumulator that a bf16 collective reads or writes): over the buffers that some
 * transfer or collective of the rank touches and that differ, the buffer's elements at the
 * carried format, each rounded up to align bytes. A turn moves each buffer at most once, so no
 * turn needs more. The CUDA backend reserves it (WpRankDesc.xfer_bytes). */
size_t plan_rank_xfer_bytes(const Plan *p, int rank, size_t align);

/* shard_elems in fp32 bytes: one of nshards shards of whole bytes of floats, rounded up to a
 * whole float. (Every size of a shard, buffers, transfers, the verifier's values, comes from
 * shard_elems.) */
size_t shard_bytes(size_t whole, int nshards);

#endif
