/* What emitted code calls: the static description of a plan (written out by wpgen as constant
 * tables) and the per-operation calls of a rank's unrolled training step. A turn is
 *     wp_turn_begin  ->  transfers posted  ->  wp_turn_compute  ->  forward/backward  ->
 *     wp_turn_wait (the transfers complete)  ->  local operations  ->  wp_turn_end
 * exactly as the plan verifier executed it. The runtime behind this (wp_main) owns buffers,
 * activations, communication, data, optimizer, checkpoints, logs and traces. */
#ifndef WP_STEP_H
#define WP_STEP_H

#include <stddef.h>
#include "common/config.h"

enum { WP_BUF_W = 0, WP_BUF_D = 1 };
enum { WP_ACT = 0, WP_GRAD = 1 };   /* activation transfers: a chunk's input, or its gradient */

typedef struct WpBufDesc {
    const char *name;
    int kind;           /* WP_BUF_W or WP_BUF_D */
    int master;         /* holds the owner's master weights of chunk (and AdamW state) */
    int chunk;          /* -1: sized for the largest chunk */
    int shard, nshards;
    size_t floats;      /* elements (at dtype) */
    int dtype;          /* WpDtype its elements are kept in */
    int copy_dtype;     /* masters: the working copy's WpDtype (compute and sends read it, rounded from
                         * the fp32 master); equal to dtype: no copy */
} WpBufDesc;

typedef struct WpRank WpRank;   /* a rank's runtime state, opaque to emitted code */

typedef struct WpRankDesc {
    int node, replica, stage;
    int nbufs;
    const WpBufDesc *bufs;
    void (*step)(WpRank *R);    /* one training step: the unrolled turns */
    int max_acts;               /* the most chunk inputs and input gradients it holds at once */
    int max_stashes;            /* the most stashes (forward -> backward) it holds at once */
    int max_keeps;              /* the most B-to-W keeps (BWD_B -> BWD_W) it holds at once; all
                                 * three from wpgen's walk of its step (emit_rank_holds), so that a
                                 * device backend reserves them at start-up */
    size_t xfer_bytes;          /* room for its W and D transfers in another format than their
                                 * buffers' own, each piece rounded up to WP_XFER_ALIGN bytes
                                 * (plan_rank_xfer_bytes): a device backend converts them there */
    double peak_flops;          /* its device's peak FLOP/s at the plan's precision (the topology's
                                 * rating; cost_peak_flops): the step line's MFU divides by the sum */
} WpRankDesc;

/* The granule of WpRankDesc.xfer_bytes: the CUDA backend's allocation alignment. */
enum { WP_XFER_ALIGN = 256 };

typedef struct WpGroupDesc { int n; const int *ranks; } WpGroupDesc;

typedef struct WpChunkDesc {
    int layer0, nlayers;
    int nowners;
    const int *owners;
} WpChunkDesc;

typedef struct WpPlanDesc {
    const char *wpgen_version, *plan_hash, *strategy, *model_name, *topo_name;
    WpConfig model;
    int nranks, nnodes, nchunks, ngroups, nturns;
    int micro_batches, total_mbs, recompute;   /* recompute: config.h's WP_KEEP_ALL, WP_RECOMPUTE, ... */
    int precision;              /* WpDtype of working weights, activations and their gradients */
    int grad_precision;         /* WpDtype of weight gradients on the wire (Plan.grad_precision) */
    int weight_wire_fp32;       /* working weights on the wire in fp32 whatever the precision
                                 * (Plan.weight_wire_fp32): converted on each side */
    const WpChunkDesc *chunks;
    const unsigned char *replicated;   /* [nchunks] chunks every rank holds a master of (the plan's
                                        * PlanChunk.replicated; NULL: none): the gradient norm and the
                                        * checkpoint count the first owner's only */
    const WpGroupDesc *groups;
    const WpRankDesc *ranks;
    const int *rank_node;       /* [nranks] */
    double intra_bw, intra_lat, inter_bw, inter_lat;   /* for topology emulation (bytes/s, s) */
} WpPlanDesc;

/* The training program: flags, setup, steps, checkpoints. Returns the exit status. */
int wp_main(int argc, char **argv, const WpPlanDesc *plan);

/* ---- one turn ---- */
void wp_turn_begin(WpRank *R, int turn);
void wp_turn_compute(WpRank *R);
void wp_turn_wait(WpRank *R);
void wp_turn_end(WpRank *R);

/* ---- compute: first = the gradient buffer held nothing, so it is written, not added to ---- */
void wp_fwd(WpRank *R, int chunk, int mb, int w);
void wp_bwd(WpRank *R, int chunk, int mb, int w, int d, int first);
void wp_bwd_b(WpRank *R, int chunk, int mb, int w);
void wp_bwd_w(WpRank *R, int chunk, int mb, int d, int first);

/* ---- transfers of weights or gradients: the chunk (and shard) they carry sizes them ---- */
void wp_send(WpRank *R, int buf, int chunk, int shard, int nshards, int peer);
void wp_recv(WpRank *R, int buf, int chunk, int shard, int nshards, int peer);
/* ---- transfers of activations (WP_ACT: input of chunk for mb) or their gradients ---- */
void wp_send_act(WpRank *R, int what, int chunk, int mb, int peer);
void wp_recv_act(WpRank *R, int what, int chunk, int mb, int peer);

/* ---- collectives over a group of the plan ---- */
void wp_bcast(WpRank *R, int buf, int chunk, int shard, int nshards, int group, int root);
void wp_reduce(WpRank *R, int buf, int chunk, int shard, int nshards, int group, int root);
void wp_allreduce(WpRank *R, int buf, int chunk, int shard, int nshards, int group);
void wp_allgather(WpRank *R, int shard_buf, int whole_buf, int chunk, int group);
void wp_reduce_scatter(WpRank *R, int whole_buf, int shard_buf, int chunk, int group);
/* TIE_ALLREDUCE: a tied model's embedding gradient (chunk 0's first V*H, on one member) and its
 * head mirror's (the last chunk's last V*H, on the other) both become their sum, in fp32 */
void wp_tie_allreduce(WpRank *R, int buf, int chunk, int group);

/* ---- local, after the turn's transfers ---- */
void wp_acc(WpRank *R, int dst, int src, int chunk, int first);
void wp_copy(WpRank *R, int dst, int src, int chunk);
/* TIE: a tied model's embedding gradient (chunk 0's, in emb) and its head mirror's (the end of the
 * last chunk's, in head) both become their sum (config.h, wp_chunk_mirrors_embedding) */
void wp_tie(WpRank *R, int emb, int head);
void wp_opt(WpRank *R, int chunk, int master, int grad);
void wp_free(WpRank *R, int buf);

#endif
