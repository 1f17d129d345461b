/* The analytic bounds of the search (search.c), computed from the model and the topology alone,
 * before anything is built: a lower bound on the largest peak memory of a rank and on the step
 * time of one candidate (a strategy with its options). Each is below what the verifier and the
 * simulator compute for the plan; test_search checks both on every candidate of clusters small
 * enough to build everything, so no pruned candidate can beat the chosen one.
 *   memory  the fp32 masters and AdamW state of a replica spread evenly over its ranks, plus what
 *           every rank must hold at once (weight passing: one micro-batch's stash through every
 *           chunk; activation passing: stage 0's first chunk, its stashes for the micro-batches in flight), plus
 *           the workspace of the lightest chunk; on rank 0 of a weight ring also the buffers of
 *           the streams waiting there between rounds;
 *   time    every rank's share of the step's compute at the device's rate, nothing waited for,
 *           and, turn by turn, what the strategy's script makes a rank wait for (weight rings,
 *           gathering collectives, placement groups with the solver's placement, activation-passing stages). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "search/bounds.h"
#include "lua/declare.h"
#include "util/xalloc.h"
#include "sim/collective.h"
#include "place/placement.h"
#include "lua/bridge.h"

Traits strategy_traits(const char *s, const StrategyOpts *o, int nranks, int layers) {
    Traits tr = { .shape = SHAPE_OTHER };
    DeclTable t;
    if (decl_traits(strategy_decl(s), o, nranks, layers, &t)) return tr;
    const char *pass = decl_str(&t, "passing", "");
    tr.shape = !strcmp(pass, "weights") ? SHAPE_WEIGHT_PASSING : !strcmp(pass, "activations") ? SHAPE_ACT_PASSING : SHAPE_OTHER;
    tr.split = decl_num(&t, "split_backward", 0) != 0;
    tr.all_forward = decl_num(&t, "all_forward", 0) != 0;
    tr.ring = decl_num(&t, "ring", 0) != 0;
    tr.ring_tail = decl_num(&t, "ring_tail", 0) != 0;
    tr.ring_rounds = decl_num(&t, "ring_rounds", 0) != 0;
    tr.pass_k = (int)decl_num(&t, "pass_k", 0);
    tr.pass_k_default = (int)decl_num(&t, "pass_k_default", 1);
    tr.ends = decl_num(&t, "ends", 0) != 0;
    tr.gathers = decl_num(&t, "gathers", 0) != 0;
    tr.gather_per_mb = decl_num(&t, "gather_per_micro_batch", 0) != 0;
    tr.chunks_per_layer = !strcmp(decl_str(&t, "default_chunks", ""), "layers");
    tr.groups = decl_num(&t, "groups", 0) != 0;
    tr.group_rounds = (int)decl_num(&t, "group_rounds", 0);
    const char *g = decl_str(&t, "group_mode", "auto");
    tr.group_mode = !strcmp(g, "node") ? PLACE_NODE : !strcmp(g, "island") ? PLACE_ISLAND : !strcmp(g, "published") ? PLACE_PUBLISHED : PLACE_AUTO;
    tr.stages_need_layers = decl_num(&t, "stages_need_layers", 0) != 0;
    tr.recompute_never_faster = decl_num(&t, "recompute_never_faster", 0) != 0;
    tr.one_replica_bound = decl_num(&t, "one_replica_bound", 0) != 0;
    tr.first_layers = (int)decl_num(&t, "first_stage_layers", 0);
    tr.last_layers = (int)decl_num(&t, "last_stage_layers", 0);
    return tr;
}

int bound_chunk_count(const Traits *tr, const WpConfig *m, int npipe, int option) {
    if (option) return option;
    if (tr->chunks_per_layer) return m->layers;
    if (tr->shape != SHAPE_OTHER) return npipe < m->layers ? npipe : m->layers;
    return 0;
}

/* The layers of chunk k of C as lib/wp.lua's split_layers cuts them: L/C each, the L mod C extra
 * ones handed out from the middle chunk outwards. */
static int chunk_layers(int L, int C, int k) {
    int extra = L % C, lo = (C + 1) / 2, hi = lo + 1, n = 0;   /* 1-based, as the Lua */
    while (n < extra) {
        if (lo >= 1) { if (lo == k + 1) return L / C + 1; lo--; n++; }
        if (hi <= C && n < extra) { if (hi == k + 1) return L / C + 1; hi++; n++; }
    }
    return L / C;
}

/* Whether the traits give the end chunks layers of their own (first_stage_layers, last_stage_layers). */
static int uneven(const Traits *tr) { return tr->first_layers > 0 || tr->last_layers > 0; }

/* The layers of chunk k of C as the strategy cuts them: split_layers, or with uneven ends as
 * lib/wp.lua's split_layers_ends does (the ends as given, split_layers of the rest between). */
static int chunk_layers_of(const Traits *tr, int L, int C, int k) {
    int f = tr->first_layers, l = tr->last_layers;
    if (!uneven(tr) || C < 2) return chunk_layers(L, C, k);
    if (f > 0 && k == 0) return f;
    if (l > 0 && k == C - 1) return l;
    int m = C - (f > 0) - (l > 0), rest = L - f - l;
    if (m < 1 || rest < m) return chunk_layers(L, C, k);   /* refused by the strategy */
    return chunk_layers(rest, m, k - (f > 0));
}

/* Chunk i of C as the strategies cut them: evenly, its layer count is L/C or one more, so a chunk
 * of L/C layers is the lightest; with uneven ends, the chunk as cut. */
static WpChunk light_chunk(const Traits *tr, const WpConfig *m, int C, int index) {
    int n = uneven(tr) ? chunk_layers_of(tr, m->layers, C, index) : m->layers / C;
    return wp_chunk_make(m, index, 0, n, index == 0, index == C - 1);
}

static double params_total(const WpConfig *m) {
    WpChunk k = wp_chunk_make(m, 0, 0, m->layers, 1, 1);
    return (double)k.nparams;
}

/* The weight and gradient buffers rank 0 of the weight ring holds at once, its default
 * turns (ring_rounds) with C >= P chunks in J >= 2 rounds: each chunk's
 * forward and backward weight streams reach rank 0 at s_j (s_j = jC + k and (j+1)C + C-1-k) and,
 * after going round, come back to it at s_j + P and wait there until s_{j+1}: a pool request
 * [s_j + P - 1, s_{j+1}] for the weights, [s_j + P, s_{j+1} + 1] for the gradient chain that
 * follows the backward weights. The pool gives a rank as many buffers as its requests overlap
 * at most (wp.lua), each sized for the largest chunk, so rank 0 holds at least that many of
 * these alone (its other requests only add). */
void bound_ring_wait_buffers(int C, int P, int J, int *wbufs, int *dbufs) {
    *wbufs = *dbufs = 0;
    if (J < 2 || C < P || P < 2) return;
    long T = (long)(J + 2) * C + P + 2;
    int *dw = xcalloc((size_t)T + 1, sizeof *dw), *dd = xcalloc((size_t)T + 1, sizeof *dd);
    for (int k = 0; k < C; k++)
        for (int j = 0; j + 1 < J; j++) {
            long f0 = (long)j * C + k, f1 = f0 + C, b0 = (long)(j + 1) * C + C - 1 - k, b1 = b0 + C;
            dw[f0 + P - 1]++; dw[f1 + 1]--;
            dw[b0 + P - 1]++; dw[b1 + 1]--;
            dd[b0 + P]++; dd[b1 + 2]--;
        }
    for (long t = 0, w = 0, d = 0; t <= T; t++) {
        w += dw[t]; d += dd[t];
        if (w > *wbufs) *wbufs = (int)w;
        if (d > *dbufs) *dbufs = (int)d;
    }
    free(dw); free(dd);
}

/* The part of a chunk's stash in device memory: none with offload (config.h). */
static size_t dev_stash(const WpConfig *m, const WpChunk *k, int recompute, WpDtype prec) {
    return wp_stash_bytes(m, k, recompute, prec) - wp_stash_host_bytes(m, k, recompute, prec);
}

double bound_mem(const Traits *trp, const Topology *topo, const WpConfig *model, const StrategyOpts *o) {
    int P = topo->ndevices, R = o->replicas > 0 ? o->replicas : 1, npipe = P / R;
    WpDtype prec = o->precision;
    /* the masters: fp32 weights, AdamW's m and v, and a working copy when the precision is not fp32.
     * A context-parallel member (model->cp: planned over groups, docs/context-parallel.md) keeps
     * 1/C of every buffer of weights or gradients (verify.c's account_memory; it adds one whole
     * working chunk and gradient, left out of this bound), and config.c's sizes are its S/C tokens */
    double pc = 1.0 / wp_cp(model), fl = sizeof(float) * pc;
    double per_param = (12 + (prec != WP_FP32 ? (double)wp_dtype_bytes(prec) : 0)) * pc;
    double masters = params_total(model) * per_param / npipe;
    const Traits tr = *trp;
    int C = bound_chunk_count(&tr, model, npipe, o->chunks);
    if (tr.shape == SHAPE_OTHER || C < 1 || C > model->layers) return masters;
    WpChunk mid = light_chunk(&tr, model, C, C > 2 ? 1 : 0);
    if (uneven(&tr)) {   /* the lightest of all the chunks */
        int least = model->layers;
        for (int k = 0; k < C; k++)
            if (chunk_layers_of(&tr, model->layers, C, k) < least) least = chunk_layers_of(&tr, model->layers, C, k);
        mid = wp_chunk_make(model, C > 2 ? 1 : 0, 0, least, 0, 0);
    }
    mid.first = 0; mid.last = 0;
    double ws = (double)wp_workspace_bytes(model, &mid, o->recompute, prec);
    if (tr.shape == SHAPE_WEIGHT_PASSING) {
        /* every rank computes every chunk, so its workspace is, part by part, the largest over
         * them all (plan_workspace_bytes): the first's and the last's too (the LM head's
         * logits); the ends of --replicate-ends are chunks of their own, left to the lightest */
        if (!tr.ends) {
            WpChunk ends[2] = { light_chunk(&tr, model, C, 0), light_chunk(&tr, model, C, C - 1) };
            ws = 0;
            for (int part = 0; part < WP_WS_NPARTS; part++) {
                double most = (double)wp_workspace_slot_bytes(model, &mid, o->recompute, (WpWorkspacePart)part, prec);
                for (int e = 0; e < 2; e++) {
                    double x = (double)wp_workspace_slot_bytes(model, &ends[e], o->recompute, (WpWorkspacePart)part, prec);
                    if (x > most) most = x;
                }
                ws += most;
            }
        }
        /* before its first backward of a micro-batch a rank holds its stash of every chunk: of
         * every micro-batch where all go forward first, of the first round's K with K
         * micro-batches per weight pass (ring_rounds; counted only where
         * the strategy's K is given); a split backward (split_backward) runs a micro-batch's
         * B passes of every chunk before any of its W passes, so after its last B it holds every
         * chunk's stash and B-to-W keep */
        double acts = 0, keep = 0;
        for (int c = 0; c < C; c++) {
            WpChunk k = light_chunk(&tr, model, C, c);
            acts += (double)dev_stash(model, &k, o->recompute, prec);
            if (tr.split) keep += (double)wp_keep_bytes(model, &k, o->recompute, prec);
        }
        int K = tr.ring_rounds && tr.pass_k > 0 ? (tr.pass_k < o->micro_batches ? tr.pass_k : o->micro_batches) : 0;
        if (K) acts *= K;
        else if (tr.all_forward) acts *= o->micro_batches;
        double bufs = 0;
        if (tr.ends && tr.ring) {
            /* replicated ends (traits ends): every rank holds the embedding's and the head's
             * masters, AdamW state and fp32 gradients; the layers' masters are shared out */
            WpChunk e = wp_chunk_make(model, 0, 0, 0, 1, 0), h = wp_chunk_make(model, 1, 0, 0, 0, 1);
            double ends = (double)(e.nparams + h.nparams);
            masters = (params_total(model) - ends) * per_param / npipe + ends * (per_param + fl);
        } else if (!tr.gathers) {
            /* one owner per chunk and replica holds its whole masters, AdamW state and the fp32
             * gradient OPT reads: at least the heavier of the first chunk (the embedding) and the
             * last (the head), on one rank */
            WpChunk k0 = light_chunk(&tr, model, C, 0), kl = light_chunk(&tr, model, C, C - 1);
            double heavy = (double)(k0.nparams > kl.nparams ? k0.nparams : kl.nparams) * (per_param + fl);
            if (heavy > masters) masters = heavy;
        }
        WpChunk k0 = light_chunk(&tr, model, C, 0), kl = light_chunk(&tr, model, C, C - 1);
        double big = (double)(k0.nparams > kl.nparams ? k0.nparams : kl.nparams) * pc;
        if (tr.gathers)   /* gathers' w0, w1, d0, d1: whole chunks, sized for the largest */
            bufs = 2 * big * (double)(wp_dtype_bytes(prec) + wp_dtype_bytes(o->grad_precision));
        /* bf16 gradients: a gathering plan's whole-chunk gradient and the ring's travelling ones are bf16
         * buffers on every rank of a pipeline of several, so each rank has the fp32 staging
         * gradient of the largest segment (plan_grad_stage_bytes; of these light chunks, no more) */
        if ((tr.gathers || (tr.ring && !tr.ends)) && npipe > 1 && o->grad_precision == WP_BF16) {
            size_t s0 = wp_grad_stage_floats(model, &k0), sl = wp_grad_stage_floats(model, &kl);
            bufs += (double)(s0 > sl ? s0 : sl) * sizeof(float);
        }
        double b = masters + acts + keep + ws + bufs;
        if (tr.ring && tr.ring_rounds && !tr.ends) {
            /* rank 0 of the ring: owner of chunk 0 (its masters, AdamW state and fp32 gradient)
             * and the buffers of the streams waiting there between rounds (bound_ring_wait_buffers);
             * K micro-batches per pass: the strategy's default K where not given (pass_k_default) */
            int k = K ? K : tr.pass_k_default;
            int wn, dn;
            bound_ring_wait_buffers(C, npipe, (o->micro_batches + k - 1) / k, &wn, &dn);
            double r0 = (double)k0.nparams * (per_param + fl) + acts + keep + ws + bufs +
                        big * (wn * (double)wp_dtype_bytes(prec) + dn * (double)wp_dtype_bytes(o->grad_precision));
            if (r0 > b) b = r0;
        }
        return b;
    }
    /* Activation passing: stage 0 runs min(stages, micro-batches) forwards of chunk 0 before its first
     * backward; interleaved with v chunks per stage, Megatron's warm-up of 2 (stages - 1) +
     * (v - 1) stages forwards of a chunk, and one more in flight (Megatron's interleaved order); and it
     * owns chunk 0's masters. ZB-H1 (split_backward): one chunk per stage, the same P forwards, and the keep
     * of chunk 0's first B pass beside them. */
    double b = masters + ws;
    if (C % npipe == 0) {
        WpChunk k0 = light_chunk(&tr, model, C, 0);
        long m = (long)o->micro_batches * npipe, v = C / npipe;
        long warm = v == 1 ? npipe : 2L * (npipe - 1) + (v - 1) * npipe + 1;
        long inflight = warm < m * v ? warm : m * v;
        double keep0 = tr.split ? (double)wp_keep_bytes(model, &k0, o->recompute, prec) : 0;
        double s0 = (double)k0.nparams * per_param + inflight * (double)dev_stash(model, &k0, o->recompute, prec) + keep0 + ws;
        if (s0 > b) b = s0;
        if (tr.split && v == 1 && m >= npipe) {
            /* ZB-H1: stage s runs npipe - s forwards, then s times a B and a forward,
             * then its first B, W, F: before that first W it holds npipe micro-batches' stashes
             * and s B-to-W keeps of its chunk s, whose masters it owns */
            for (int st = 1; st < npipe; st++) {
                WpChunk k = light_chunk(&tr, model, C, st);
                double x = (double)k.nparams * per_param + npipe * (double)dev_stash(model, &k, o->recompute, prec) +
                           st * (double)wp_keep_bytes(model, &k, o->recompute, prec) + ws;
                if (x > b) b = x;
            }
        }
        if (!tr.split && v == 1 && uneven(&tr)) {
            /* uneven stages: the heavier ones inside. In Megatron's order stage s runs P - s - 1 warm-up
             * forwards and one more before its first backward: it holds min(P - s, m) stashes of
             * its chunk s, whose masters it owns */
            for (int st = 1; st < npipe; st++) {
                WpChunk k = light_chunk(&tr, model, C, st);
                long held = npipe - st < m ? npipe - st : m;
                double x = (double)k.nparams * per_param + held * (double)dev_stash(model, &k, o->recompute, prec) + ws;
                if (x > b) b = x;
            }
        }
    }
    return b;
}

/* Seconds of a forward (kind OP_FWD) or a whole backward (OP_BWD) of a chunk of nlayers layers on
 * the device type that does it fastest, at the simulator's costs (cost/costs.h) and calibration;
 * with context parallelism, no less than its ring attention's blocks take. */
static double chunk_seconds(const Topology *topo, const WpConfig *model, int chunk, int nlayers, int nchunks, int kind,
                            const StrategyOpts *o, const Calibration *calib) {
    double best = INFINITY;
    for (int i = 0; i < topo->ntypes; i++) {
        double f[COST__COUNT], c[COST__COUNT];
        calib_coefs(calib, &topo->types[i], o->precision, c);
        cost_compute_features(model, chunk, 0, nlayers, nchunks, kind, o->recompute, o->precision, topo->types[i].rated_bf16, f);
        double t = cost_seconds(f, c);
        if (t < best) best = t;
    }
    /* a context-parallel member's K/V ring inside the node, overlapped with the compute (the
     * simulator's cp_overlap): at least the ring on the fastest node's link */
    double steps, ring_bytes = cp_ring_bytes(model, o->precision, nlayers, kind, o->recompute, &steps), ring = INFINITY;
    for (int i = 0; ring_bytes > 0 && i < topo->nnodes; i++) {
        const Link *l = &topo->nodes[i].intra;
        double x = steps * l->lat + ring_bytes / (l->bw / wp_cp(model));
        if (x < ring) ring = x;
    }
    return ring_bytes > 0 && ring > best ? ring : best;
}

/* Bytes of a weight element on the wire: the precision's, or fp32's where the weights move in fp32
 * (--weight-wire fp32: bridge.c's opts_weight_wire_fp32, the rule the plan follows). */
static double weight_wire_bytes(const StrategyOpts *o) {
    return opts_weight_wire_fp32(o) ? (double)sizeof(float) : (double)wp_dtype_bytes(o->precision);
}

/* Seconds a rank's core spends per byte it receives (cost_recv_copy_s_per_byte), the least over
 * the device types. */
static double recv_copy_s_per_byte(const Topology *topo, const StrategyOpts *o, const Calibration *calib) {
    double best = INFINITY;
    for (int i = 0; i < topo->ntypes; i++) {
        double c[COST__COUNT];
        calib_coefs(calib, &topo->types[i], o->precision, c);
        double x = cost_recv_copy_s_per_byte(&topo->types[i], c);
        if (x < best) best = x;
    }
    return best;
}

/* Seconds of one hop of a weight ring, device a to b: the simulator's transfer is the
 * link's latency and then the bytes at a rate no higher than the link's bandwidth. */
static double hop_seconds(const Topology *topo, int a, int b, double bytes) {
    Link l = topology_link(topo, a, b);
    return l.type == LINK_LOC ? 0 : l.lat + (l.bw > 0 ? bytes / l.bw : 0);
}

/* The least time a collective over the devices dev[0..n) in member order (a rooted one, broadcast
 * or reduce, from member root) can take in the simulator: its latency (sim/collective.h: steps x
 * the largest link latency of its edges) and then each edge's bytes at no more than that edge's
 * bandwidth (all edges move at once). */
static double rooted_seconds(const Topology *topo, int coll, const int *dev, int n, int root, double whole) {
    CollShape cs = coll_shape(coll, n, root, whole);
    double maxlat = 0, slowest = 0;
    for (int h = 0; h < cs.nedges; h++) {
        int a, b;
        coll_edge(&cs, n, h, &a, &b);
        Link l = topology_link(topo, dev[a], dev[b]);
        if (l.lat > maxlat) maxlat = l.lat;
        double t = l.type == LINK_LOC || l.bw <= 0 ? 0 : cs.edge_bytes / l.bw;
        if (t > slowest) slowest = t;
    }
    return cs.nedges ? cs.lat_steps * maxlat + slowest : 0;
}

static double coll_seconds(const Topology *topo, int coll, const int *dev, int n, double whole) {
    return rooted_seconds(topo, coll, dev, n, 0, whole);
}

/* A gathering plan's turns (traits gathers), as rank 0 runs them: a turn ends no sooner than its compute
 * and no sooner than each of its collectives, which start no sooner than the turn does; so the
 * step is at least the sum over turns of the larger of the two. Gather-once: turn k gathers
 * chunk k, turn k + 1 runs its forward of the N micro-batches; turn 2C - c the backward of chunk
 * c (chunk c gathered the turn before, but the last two), turn 2C - c + 1 reduce-scatters its
 * gradient, with replicas turn 2C - c + 2 all-reduces the shard across them. Full-shard: that
 * block of 2C + 1 turns once per micro-batch, the all-reduce after the last. */
static double gathers_turns_bound(const Traits *tr, const Topology *topo, const WpConfig *model, const StrategyOpts *o, const Calibration *calib,
                               int C, int npipe, int R) {
    int N = o->micro_batches, L = model->layers;
    int full = tr->gather_per_mb;
    int blocks = full ? N : 1, per = full ? 1 : N, T = blocks * (2 * C + 1) + 3;
    double *comp = xcalloc((size_t)T, sizeof *comp), *comm = xcalloc((size_t)T, sizeof *comm);
    int *rep = xcalloc((size_t)npipe, sizeof *rep), *across = xcalloc((size_t)R, sizeof *across);
    for (int i = 0; i < npipe; i++) rep[i] = i;
    for (int q = 0; q < R; q++) across[q] = q * npipe;
    double *ag = xcalloc((size_t)C, sizeof *ag), *rs = xcalloc((size_t)C, sizeof *rs), *ar = xcalloc((size_t)C, sizeof *ar);
    double *tf = xcalloc((size_t)C, sizeof *tf), *tb = xcalloc((size_t)C, sizeof *tb), *el = xcalloc((size_t)C, sizeof *el);
    for (int c = 0, layer0 = 0; c < C; c++) {
        int n = chunk_layers_of(tr, L, C, c), same = -1;
        double elems = el[c] = (double)wp_chunk_make(model, c, layer0, n, c == 0, c == C - 1).nparams;
        layer0 += n;
        /* a chunk of the size of one before it: the same collectives (their edges walk every
         * member, which at 2,048 ranks made this bound seconds) */
        for (int d = 0; d < c && same < 0; d++)
            if (el[d] == elems) same = d;
        if (same >= 0) { ag[c] = ag[same]; rs[c] = rs[same]; ar[c] = ar[same]; }
        else {
            ag[c] = coll_seconds(topo, COLL_ALLGATHER, rep, npipe, elems * weight_wire_bytes(o));
            rs[c] = coll_seconds(topo, COLL_REDUCE_SCATTER, rep, npipe, elems * (double)wp_dtype_bytes(o->grad_precision));
            ar[c] = R > 1 ? coll_seconds(topo, COLL_ALLREDUCE, across, R, floor(elems / npipe) * (double)wp_dtype_bytes(o->grad_precision)) : 0;
        }
        tf[c] = chunk_seconds(topo, model, c, n, C, OP_FWD, o, calib);
        tb[c] = chunk_seconds(topo, model, c, n, C, OP_BWD, o, calib);
    }
#define AT_LEAST(x, v) do { if ((v) > (x)) (x) = (v); } while (0)
    for (int b = 0; b < blocks; b++) {
        int base = b * (2 * C + 1);
        for (int k = 0; k < C; k++) {
            AT_LEAST(comm[base + k], ag[k]);
            comp[base + k + 1] += per * tf[k];
        }
        for (int c = C - 1; c >= 0; c--) {
            int t = base + 2 * C - c;
            if (c < C - 2) AT_LEAST(comm[t - 1], ag[c]);
            comp[t] += per * tb[c];
            AT_LEAST(comm[t + 1], rs[c]);
            if (b == blocks - 1 && R > 1) AT_LEAST(comm[t + 2], ar[c]);
        }
    }
#undef AT_LEAST
    double sum = 0;
    for (int t = 0; t < T; t++) sum += comp[t] > comm[t] ? comp[t] : comm[t];
    free(comp); free(comm); free(rep); free(across); free(ag); free(rs); free(ar); free(tf); free(tb); free(el);
    return sum;
}

/* Placement groups (traits groups): one per node (or PCIe island; only nodes of one
 * island are bounded here, where a group is a node's ranks of the pipeline). Chunk 0's weights
 * start at its owner and reach group j of the ring only over the network from the owner's group
 * outwards, one staging rank to the next, a hop per turn: the groups after the owner's at 1, 2,
 * ... hops, those before it (from group 0 on) at 1, 2, ...; inside a group the root (the owner
 * or the staging rank) broadcasts it to the others. A rank's first compute is its forward of
 * chunk 0. Its last is its backward of chunk 0, whose gradient is then reduced to the group's
 * root (the others) and sent on to the owner (outside the owner's group). The solver chooses the
 * order and the owner: the least the hops can add is with the largest groups nearest. The step
 * is at least the mean over the ranks of first start + compute + what follows the last. */
static double groups_fill_bound(const Topology *topo, const WpConfig *model, const StrategyOpts *o, int C, int npipe, int R,
                                  int uniform) {
    for (int i = 0; i < topo->nnodes; i++)
        if (topo->nodes[i].islands > 1) return 0;
    WpChunk k0 = wp_chunk_make(model, 0, 0, model->layers / C, 1, C == 1);
    double wb = (double)k0.nparams * weight_wire_bytes(o);
    double db = (double)k0.nparams * (double)wp_dtype_bytes(o->grad_precision);
    double hw = topo->net.lat + wb / topo->net.bw, hd = topo->net.lat + db / topo->net.bw;
    int *size = xcalloc((size_t)topo->nnodes, sizeof *size);
    double sum = 0, most = 0;
    for (int q = 0; q < R; q++) {
        int D = 0, smallest = npipe;
        double intra_min = INFINITY, rsum = 0;
        for (int r = q * npipe; r < (q + 1) * npipe; r++) {   /* ranks of a node are consecutive */
            int v = topology_node_of(topo, r);
            if (r == q * npipe || v != topology_node_of(topo, r - 1)) size[D++] = 0;
            size[D - 1]++;
            Link in = topo->nodes[v].intra;
            double t = 2 * in.lat + (wb + db) / in.bw;
            if (t < intra_min) intra_min = t;
            if (size[D - 1] > 1) rsum += t;   /* all but one of a group: the broadcast in, the reduce out */
        }
        for (int i = 0; i < D; i++)
            if (size[i] < smallest) smallest = size[i];
        /* largest groups first, at distances 0, 1, 1, 2, 2, ... (the fewest hops any order has) */
        for (int i = 1; i < D; i++)
            for (int j = i; j > 0 && size[j] > size[j - 1]; j--) { int x = size[j]; size[j] = size[j - 1]; size[j - 1] = x; }
        for (int i = 1; i < D; i++) rsum += size[i] * ((i + 1) / 2 * hw + hd);
        sum += rsum;
        /* the farthest group is at least D / 2 hops out whatever the order; every group of two or
         * more has a rank the broadcast and the reduce reach */
        double far = (D > 1 ? D / 2 * hw + hd : 0) + (smallest > 1 ? intra_min : 0);
        if (far > most) most = far;
    }
    free(size);
    return uniform ? most : sum / topo->ndevices;
}

/* Whether the R replicas of P devices are alike: every node of the same size and PCIe islands,
 * each replica on whole nodes. Then the strategies (and the placement solver, which sees devices only
 * as their nodes and islands) lay every replica out as the first, so a chunk's all-reduce across
 * the replicas' owners comes in the turn after its last gradient reaches replica 0's owner. */
static int replicas_alike(const Topology *topo, int P, int R) {
    if (R < 2) return 0;
    for (int i = 0; i < topo->nnodes; i++)
        if (topo->nodes[i].ndevices != topo->nodes[0].ndevices || topo->nodes[i].islands != topo->nodes[0].islands) return 0;
    return P % topo->nodes[0].ndevices == 0;
}

/* The least time of the all-reduce of a chunk's gradient (bytes) across the replicas' owners,
 * local rank o of each replica of P devices (wp.update, the groups' ops). */
static double across_seconds(const Topology *topo, int P, int R, int o, double bytes) {
    int *dev = xcalloc((size_t)R, sizeof *dev);
    for (int q = 0; q < R; q++) dev[q] = q * P + o;
    double t = coll_seconds(topo, COLL_ALLREDUCE, dev, R, bytes);
    free(dev);
    return t;
}

/* The round j and chunk k whose forward (fwd_of) or backward (bwd_of) reaches rank 0 at turn s in
 * the ring's default turns (f = jC + k, b = (j+1)C + C-1-k; J rounds); 0 if none. */
static int fwd_of(int C, int J, long s, int *j, int *k) {
    if (s < 0 || s >= (long)J * C) return 0;
    *j = (int)(s / C); *k = (int)(s % C);
    return 1;
}

static int bwd_of(int C, int J, long s, int *j, int *k) {
    if (s < C || s >= (long)(J + 1) * C) return 0;
    *j = (int)(s / C) - 1; *k = C - 1 - (int)(s % C);
    return 1;
}

/* The weight ring with its default turns (ring_rounds: the strategies
 * that take K micro-batches per weight pass), turn by turn on one pipeline (devices 0 .. npipe-1,
 * replica 0; the others only add the all-reduce between them). In the simulator a rank's turn t
 * ends no sooner than its compute (from the turn's start) and no sooner than each of its
 * transfers, which start when both sides have reached turn t and then take the link's latency and
 * their bytes at no more than its bandwidth; transfers of one turn between the same two ranks
 * start together and share the link, so the last ends no sooner than all their bytes take. So
 *     start(r, t + 1) >= start(r, t) + compute(r, t)
 *     start(r, t + 1) >= max(start(r, t), start(s, t)) + latency + bytes(s -> r, t) / bandwidth
 * (and alike for the sender), local operations counted as nothing; on a CPU the receiver's core
 * also copies what it receives (sim.c's recv_copy), after the bytes arrive and besides its
 * compute, so both of rank r's terms grow by that copy; the step is at least the
 * latest start after the last turn. Only the weights' and gradients' positions are needed, read
 * off the Lua (for rounds j < J of K micro-batches, C chunks, P ranks):
 *   the forward weights of chunk k in round j reach rank 0 at s = jC + k and rank r at s + r, the
 *   backward weights of chunk c at s = (j+1)C + C-1-c and rank r at s + r, each received in the
 *   turn before from rank r-1; the gradient of chunk c is at rank r at that same s + r, received
 *   in that turn from r-1. With C >= P each chunk's streams circulate: after rank P-1 back to rank
 *   0 (weights at s + P, from P-1 in the turn before; the gradient in turn s + P), between rounds;
 *   else each round's streams start afresh. A stream's first round leaves the owner, rank
 *   (P - k mod P) mod P, k mod P hops before rank 0 and reaches each rank x in between at
 *   s + x - P (rank 0 at s). The gradient's last round goes from rank P-1 to the owner in turn
 *   s + P (not when the owner is P-1). Forward and backward compute at rank r's turns s + r, for
 *   the round's micro-batches. Returns 0 where the cells (ranks x turns) exceed max_cells. */
static double ring_turns_bound(const Traits *tr, const Topology *topo, const WpConfig *model, const StrategyOpts *o, const Calibration *calib,
                               int C, int P, int R, int K, double max_cells) {
    int N = o->micro_batches, L = model->layers;
    if (K > N) K = N;
    int J = (N + K - 1) / K, cont = C >= P;
    long T = (long)(J + 1) * C + P + 1;   /* the last turn: the gradient of chunk 0's last round to its owner */
    if (P < 2 || (double)P * (double)T > max_cells) return 0;
    double *tf = xcalloc((size_t)C, sizeof *tf), *tb = xcalloc((size_t)C, sizeof *tb);
    double *wb = xcalloc((size_t)C, sizeof *wb), *db = xcalloc((size_t)C, sizeof *db);
    for (int k = 0, layer0 = 0; k < C; k++) {
        int n = chunk_layers_of(tr, L, C, k);
        double params = (double)wp_chunk_make(model, k, layer0, n, k == 0, k == C - 1).nparams;
        layer0 += n;
        tf[k] = chunk_seconds(topo, model, k, n, C, OP_FWD, o, calib);
        tb[k] = chunk_seconds(topo, model, k, n, C, OP_BWD, o, calib);
        wb[k] = params * weight_wire_bytes(o);
        db[k] = params * (double)wp_dtype_bytes(o->grad_precision);
    }
    /* the hop into rank r from r - 1 (into 0 from P - 1): latency and seconds per byte */
    double *lat = xcalloc((size_t)P, sizeof *lat), *spb = xcalloc((size_t)P, sizeof *spb);
    for (int r = 0; r < P; r++) {
        int from = (r + P - 1) % P;
        Link l = topology_link(topo, from, r);
        if (l.type != LINK_LOC) { lat[r] = l.lat; spb[r] = l.bw > 0 ? 1 / l.bw : 0; }
    }
    /* with alike replicas: each chunk's all-reduce at its owner in the turn after its gradient's
     * last hop (wp.update): the delivery from rank P-1 in turn s + P, or the add at P-1 in s + P-1 */
    double *ar = xcalloc((size_t)C, sizeof *ar);
    long *ar_turn = xcalloc((size_t)C, sizeof *ar_turn);
    int alike = replicas_alike(topo, P, R);
    for (int c = 0; alike && c < C; c++) {
        int ow = (P - c % P) % P;
        long s_last = (long)J * C + C - 1 - c;
        ar_turn[c] = s_last + P - (ow == P - 1) + 1;
        ar[c] = across_seconds(topo, P, R, ow, db[c]);
        if (ar_turn[c] + 1 > T) T = ar_turn[c] + 1;
    }
    double *cur = xcalloc((size_t)P, sizeof *cur), *nxt = xcalloc((size_t)P, sizeof *nxt);
    double *comp = xcalloc((size_t)P, sizeof *comp), *cpt = xcalloc((size_t)P, sizeof *cpt), cspb = recv_copy_s_per_byte(topo, o, calib);
#define MBS(j) ((j) < J - 1 || N % K == 0 ? K : N % K)
    for (long t = 0; t < T; t++) {
        for (int r = 0; r < P; r++) {
            long u = t - r;
            int j, k;
            double c = 0;
            if (fwd_of(C, J, u, &j, &k)) c += MBS(j) * tf[k];
            if (bwd_of(C, J, u, &j, &k)) c += MBS(j) * tb[k];
            nxt[r] = cur[r] + c;
            comp[r] = c;
            cpt[r] = 0;
        }
        for (int r = 0; r < P; r++) {   /* what rank r receives from r - 1 (0 from P - 1) in turn t */
            double bytes = 0;
            long a = t + 1;             /* weights received in turn t are there in turn t + 1 */
            int j, k;
            if (r > 0) {
                if (fwd_of(C, J, a - r, &j, &k)) bytes += wb[k];
                if (bwd_of(C, J, a - r, &j, &k)) bytes += wb[k];
                if (bwd_of(C, J, t - r, &j, &k)) bytes += db[k];
                /* a first round on its way from the owner: rank r is past the owner, P - (k mod P) */
                if (fwd_of(C, J, a + P - r, &j, &k) && (!cont || j == 0) && k % P > 0 && r > P - k % P) bytes += wb[k];
                if (bwd_of(C, J, a + P - r, &j, &k) && (!cont || j == 0) && k % P > 0 && r > P - k % P) bytes += wb[k];
            } else {
                if (fwd_of(C, J, a, &j, &k) && (!cont || j == 0) && k % P > 0) bytes += wb[k];
                if (bwd_of(C, J, a, &j, &k) && (!cont || j == 0) && k % P > 0) bytes += wb[k];
                if (cont && fwd_of(C, J, a - P, &j, &k) && j < J - 1) bytes += wb[k];
                if (cont && bwd_of(C, J, a - P, &j, &k) && j < J - 1) bytes += wb[k];
                if (cont && bwd_of(C, J, t - P, &j, &k) && j < J - 1) bytes += db[k];
            }
            if (bytes <= 0) continue;
            int from = (r + P - 1) % P;
            double end = (cur[from] > cur[r] ? cur[from] : cur[r]) + lat[r] + bytes * spb[r];
            cpt[r] = bytes * cspb;
            if (end + cpt[r] > nxt[r]) nxt[r] = end + cpt[r];
            if (end > nxt[from]) nxt[from] = end;
        }
        for (int r = 0; r < P; r++)
            if (cur[r] + comp[r] + cpt[r] > nxt[r]) nxt[r] = cur[r] + comp[r] + cpt[r];
        int j, c;
        if (bwd_of(C, J, t - P, &j, &c) && (!cont || j == J - 1) && (P - c % P) % P != P - 1) {   /* a gradient to its owner */
            int ow = (P - c % P) % P;
            double end = (cur[P - 1] > cur[ow] ? cur[P - 1] : cur[ow]) + hop_seconds(topo, P - 1, ow, db[c]);
            if (end + db[c] * cspb > nxt[ow]) nxt[ow] = end + db[c] * cspb;
            if (end > nxt[P - 1]) nxt[P - 1] = end;
        }
        /* the all-reduces in turn t: of chunk JC + C + P - t, or one less where its owner is P-1 */
        for (long c = (long)J * C + C + P - t, d = 0; alike && d < 2; d++, c--)
            if (c >= 0 && c < C && ar_turn[c] == t) {
                int ow = (P - (int)c % P) % P;
                if (cur[ow] + ar[c] > nxt[ow]) nxt[ow] = cur[ow] + ar[c];
            }
        double *x = cur; cur = nxt; nxt = x;
    }
#undef MBS
    double step = 0;
    for (int r = 0; r < P; r++)
        if (cur[r] > step) step = cur[r];
    free(tf); free(tb); free(wb); free(db); free(lat); free(spb); free(cur); free(nxt); free(ar); free(ar_turn);
    free(comp); free(cpt);
    return step;
}

/* What ties ranks together in one turn of groups_turns_bound, and the least time it takes once
 * all are there: a transfer between ranks a and b (group -1), a collective over a group (its
 * index), or an all-reduce of rank a with the other replicas (group -2). */
typedef struct TurnTie { int turn, a, b, group; double seconds; } TurnTie;

static int tie_cmp(const void *x, const void *y) {
    const TurnTie *a = x, *b = y;
    return (a->turn > b->turn) - (a->turn < b->turn);
}

/* The solver's placements the bounds asked for, by what the solver reads (placement.c: the
 * devices only as their nodes and islands, the chunks' bytes, the wire formats, the mode, the
 * rounds): the search asks for the same ones for every recomputation and rounds candidate of a
 * pipeline length. A process-wide cache keyed by content, so it can never answer for other
 * inputs; the oldest entry goes when full. */
enum { PLACE_CACHE_MAX = 32 };
static struct PlaceCacheEntry {
    int used, n, C, mode, rounds, nnodes;
    double ww, gw;
    int *shape;             /* [3n]: each device's node (from the first's), node size, island */
    double *cb;             /* [C] */
    Placement pl;
} place_cache[PLACE_CACHE_MAX];
static int place_cache_next;

static int *device_shape(const PlacementIn *in) {
    int *sh = xcalloc((size_t)in->n * 3, sizeof *sh), v0 = topology_node_of(in->topo, in->devices[0]);
    for (int i = 0; i < in->n; i++) {
        int v = topology_node_of(in->topo, in->devices[i]);
        const Node *nd = &in->topo->nodes[v];
        int per = nd->ndevices / (nd->islands > 0 ? nd->islands : 1);
        sh[3 * i] = v - v0;
        sh[3 * i + 1] = nd->ndevices;
        sh[3 * i + 2] = (in->devices[i] - nd->first_device) / (per > 0 ? per : 1);
    }
    return sh;
}

/* placement_solve through the cache: 0 with *pl (the cache's: not to be freed), or -1. */
static int placement_cached(const PlacementIn *in, const Placement **pl) {
    int *sh = device_shape(in);
    for (int i = 0; i < PLACE_CACHE_MAX; i++) {
        struct PlaceCacheEntry *e = &place_cache[i];
        if (e->used && e->n == in->n && e->C == in->nchunks && e->mode == in->mode && e->rounds == in->rounds && e->ww == in->weight_wire &&
            e->gw == in->grad_wire && e->nnodes == in->topo->nnodes && !memcmp(e->shape, sh, (size_t)in->n * 3 * sizeof *sh) &&
            !memcmp(e->cb, in->chunk_bytes, (size_t)in->nchunks * sizeof *e->cb)) {
            free(sh);
            *pl = &e->pl;
            return 0;
        }
    }
    Placement got;
    char err[256];
    if (placement_solve(in, &got, err, sizeof err)) { free(sh); return -1; }
    struct PlaceCacheEntry *e = &place_cache[place_cache_next];
    place_cache_next = (place_cache_next + 1) % PLACE_CACHE_MAX;
    if (e->used) { free(e->shape); free(e->cb); placement_free(&e->pl); }
    *e = (struct PlaceCacheEntry){ 1, in->n, in->nchunks, in->mode, in->rounds, in->topo->nnodes, in->weight_wire, in->grad_wire, sh,
                                   xcalloc((size_t)in->nchunks, sizeof *e->cb), got };
    memcpy(e->cb, in->chunk_bytes, (size_t)in->nchunks * sizeof *e->cb);
    *pl = &e->pl;
    return 0;
}

/* The rounds the groups' script chooses where not given (group_rounds 0): the fewest K
 * whose upper bound of a rank's memory fits the smallest device of the pipeline, with the owners
 * of the solver's placement for one round, every figure as placement.c hands it to the script
 * and summed in the script's order. Only where every replica is laid out as the first (else the
 * script checks each replica's owners): 0 where not known. */
static int groups_rounds_choice(const Traits *tr, const Topology *topo, const WpConfig *model, const StrategyOpts *o, int C, int P, int R) {
    int N = o->micro_batches, L = model->layers;
    if (C == 1) return 1;
    if (R > 1 && !replicas_alike(topo, P, R)) return 0;
    double *cb = xcalloc((size_t)C, sizeof *cb), *stash = xcalloc((size_t)C, sizeof *stash), *owned = xcalloc((size_t)P, sizeof *owned);
    size_t n0 = 0, ws = 0;
    WpChunk *ch = xcalloc((size_t)C, sizeof *ch);
    for (int k = 0, layer0 = 0; k < C; k++) {
        int n = chunk_layers_of(tr, L, C, k);
        ch[k] = wp_chunk_make(model, k, layer0, n, k == 0, k == C - 1);
        layer0 += n;
        if (k == 0) n0 = ch[k].nparams;
        cb[k] = (double)(ch[k].nparams * sizeof(float));
        stash[k] = (double)wp_stash_bytes(model, &ch[k], o->recompute, o->precision);
    }
    for (int part = 0; part < WP_WS_NPARTS; part++) {   /* plan_workspace_bytes */
        size_t most = 0;
        for (int k = 0; k < C; k++) {
            size_t b = wp_workspace_slot_bytes(model, &ch[k], o->recompute, (WpWorkspacePart)part, o->precision);
            if (b > most) most = b;
        }
        ws += most;
    }
    int *dev = xcalloc((size_t)P, sizeof *dev);
    for (int i = 0; i < P; i++) dev[i] = i;
    PlacementIn in = { .topo = topo, .n = P, .devices = dev, .nchunks = C, .chunk_bytes = cb, .rounds = 1,
                       .weight_wire = weight_wire_bytes(o) / (double)sizeof(float),
                       .grad_wire = (double)(n0 * wp_dtype_bytes(o->grad_precision)) / (double)(n0 * sizeof(float)) };
    in.mode = tr->group_mode;
    const Placement *pl;
    int K = 0;
    if (!placement_cached(&in, &pl)) {
        double device = 0, big = 0, keep = (double)((size_t)model->mbs * model->seq * model->hidden * wp_dtype_bytes(o->precision));
        for (int i = 0; i < P; i++) {
            double b = topo->types[topo->nodes[topology_node_of(topo, i)].type].mem_bytes;
            if (i == 0 || b < device) device = b;
        }
        for (int k = 0; k < C; k++) {
            if (cb[k] > big) big = cb[k];
            keep = keep + stash[k];
        }
        for (int k = 0; k < C; k++) owned[pl->owner[k]] = owned[pl->owner[k]] + 4 * cb[k];
        for (K = 1; K <= N; K++) {
            int n_r = (N + K - 1) / K, fits = 1;
            for (int i = 0; i < P && fits; i++)
                if (owned[i] + 7 * big + (double)ws + n_r * keep > device) fits = 0;
            if (fits || K == N) break;
        }
    }
    free(cb); free(stash); free(owned); free(ch); free(dev);
    return K;
}

/* Placement groups turn by turn on one pipeline (devices 0 .. P-1, replica 0),
 * as ring_turns_bound: its placement is the solver's own (generator/place, called as the script
 * calls it: K rounds counted where K > 1), and then, in local turns tau of K rounds of L = 2C-2
 * (group j's local turn tau is turn tau + 2 + j), every group runs chunk c forward at jL + c (the
 * last chunk also backward), backward at jL + 2C-2-c, chunk 0's backward sharing its turn with
 * the next round's forward; the weights of a use at tau reach a group's root (its staging rank;
 * the owner in the owner's group) point to point at tau - 2 from the previous group's staging
 * rank (group 0 and the group after the owner's from the owner) and go to the others by a
 * broadcast at tau - 1; a backward's gradient is reduced to the root at tb + 1 and sent to the
 * owner at tb + 2 (tb + 1 in a group of one). Compute counts the round's micro-batches. Returns 0
 * where the solver refuses. */
static double groups_turns_bound(const Traits *tr, const Topology *topo, const WpConfig *model, const StrategyOpts *o, const Calibration *calib,
                                  int C, int P, int R, int K) {
    int N = o->micro_batches, Lm = model->layers;
    K = K < 1 ? 1 : K > N ? N : K;
    if (C == 1) K = 1;
    double *cb = xcalloc((size_t)C, sizeof *cb), *tf = xcalloc((size_t)C, sizeof *tf), *tb = xcalloc((size_t)C, sizeof *tb);
    size_t n0 = 0;
    for (int k = 0, layer0 = 0; k < C; k++) {
        int n = chunk_layers_of(tr, Lm, C, k);
        size_t params = wp_chunk_make(model, k, layer0, n, k == 0, k == C - 1).nparams;
        if (k == 0) n0 = params;
        layer0 += n;
        cb[k] = (double)(params * sizeof(float));
        tf[k] = chunk_seconds(topo, model, k, n, C, OP_FWD, o, calib);
        tb[k] = chunk_seconds(topo, model, k, n, C, OP_BWD, o, calib);
    }
    int *dev = xcalloc((size_t)P, sizeof *dev);
    for (int i = 0; i < P; i++) dev[i] = i;
    PlacementIn in = { .topo = topo, .n = P, .devices = dev, .nchunks = C, .chunk_bytes = cb, .rounds = K > 1 ? K : 1,
                       .weight_wire = weight_wire_bytes(o) / (double)sizeof(float),
                       .grad_wire = (double)(n0 * wp_dtype_bytes(o->grad_precision)) / (double)(n0 * sizeof(float)) };
    in.mode = tr->group_mode;
    const Placement *plp;
    if (placement_cached(&in, &plp)) { free(cb); free(tf); free(tb); free(dev); return 0; }
    const Placement pl = *plp;
    int D = pl.ngroups, L = 2 * C - 2;
    int *gpos = xcalloc((size_t)P, sizeof *gpos);
    for (int j = 0; j < D; j++)
        for (int i = pl.group_start[j]; i < pl.group_start[j + 1]; i++) gpos[pl.members[i]] = j;
    /* compute per local turn (the same in every group) */
    int ntau = C == 1 ? 1 : K * L + 1;
    double *comp = xcalloc((size_t)ntau, sizeof *comp);
#define ROUND_MBS(j) (((j) + 1) * N / K - (j) * N / K)
    if (C == 1) comp[0] = ROUND_MBS(0) * (tf[0] + tb[0]);
    else
        for (int j = 0; j < K; j++) {
            for (int c = 0; c < C; c++) comp[j * L + c] += ROUND_MBS(j) * (tf[c] + (c == C - 1 ? tb[c] : 0));
            for (int c = C - 2; c >= 0; c--) comp[j * L + 2 * C - 2 - c] += ROUND_MBS(j) * tb[c];
        }
#undef ROUND_MBS
    /* the uses of weights (chunk, tau) and the backwards (chunk, tau), in any order */
    int nuse = 0, nbwd = 0;
    int *use_c = xcalloc((size_t)ntau + 1, sizeof *use_c), *use_t = xcalloc((size_t)ntau + 1, sizeof *use_t);
    int *bwd_c = xcalloc((size_t)K * C + 1, sizeof *bwd_c), *bwd_t = xcalloc((size_t)K * C + 1, sizeof *bwd_t);
    if (C == 1) { use_c[0] = 0; use_t[0] = 0; nuse = 1; bwd_c[0] = 0; bwd_t[0] = 0; nbwd = 1; }
    else
        for (int j = 0; j < K; j++) {
            for (int c = 0; c < C; c++)
                if (!(c == 0 && j > 0)) { use_c[nuse] = c; use_t[nuse++] = j * L + c; }
            for (int c = C - 2; c >= 0; c--) { use_c[nuse] = c; use_t[nuse++] = j * L + 2 * C - 2 - c; }
            for (int c = 0; c < C; c++) { bwd_c[nbwd] = c; bwd_t[nbwd++] = c == C - 1 ? j * L + C - 1 : j * L + 2 * C - 2 - c; }
        }
    long cap = 2L * (nuse + nbwd) * D + C + 1, nt = 0;
    TurnTie *ties = xcalloc((size_t)cap, sizeof *ties);
    int *last_acc = xcalloc((size_t)C, sizeof *last_acc);   /* the turn of the last ACC into g<c> at its owner */
    /* each group's broadcast and reduce of each chunk (-1: not yet costed): its root is fixed */
    double *bc = xcalloc((size_t)D * C, sizeof *bc), *rd = xcalloc((size_t)D * C, sizeof *rd);
    double *hw = xcalloc((size_t)D * C, sizeof *hw), *hd = xcalloc((size_t)D * C, sizeof *hd);   /* and its hops in */
    for (long i = 0; i < (long)D * C; i++) bc[i] = rd[i] = hw[i] = hd[i] = -1;
    for (int u = 0; u < nuse + nbwd; u++) {
        int bwd = u >= nuse, c = bwd ? bwd_c[u - nuse] : use_c[u], tau = bwd ? bwd_t[u - nuse] : use_t[u];
        int ow = pl.owner[c], j0 = gpos[ow];
        double wbytes = cb[c] / sizeof(float) * weight_wire_bytes(o), dbytes = cb[c] / sizeof(float) * wp_dtype_bytes(o->grad_precision);
        for (int j = 0; j < D; j++) {
            int *mem = pl.members + pl.group_start[j], nm = pl.group_start[j + 1] - pl.group_start[j];
            int root = j == j0 ? ow : pl.staging[j], ri = 0;
            while (mem[ri] != root) ri++;
            if (!bwd) {
                if (j != j0) {
                    int from = j == 0 || j - 1 == j0 ? ow : pl.staging[j - 1];
                    if (hw[j * C + c] < 0) hw[j * C + c] = hop_seconds(topo, from, root, wbytes);
                    ties[nt++] = (TurnTie){ tau - 2 + 2 + j, from, root, -1, hw[j * C + c] };
                }
                if (nm > 1 && bc[j * C + c] < 0) bc[j * C + c] = rooted_seconds(topo, COLL_BCAST, mem, nm, ri, wbytes);
                if (nm > 1) ties[nt++] = (TurnTie){ tau - 1 + 2 + j, 0, 0, j, bc[j * C + c] };
            } else {
                int hold = nm > 1 ? 2 : 1;
                if (nm > 1 && rd[j * C + c] < 0) rd[j * C + c] = rooted_seconds(topo, COLL_REDUCE, mem, nm, ri, dbytes);
                if (nm > 1) ties[nt++] = (TurnTie){ tau + 1 + 2 + j, 0, 0, j, rd[j * C + c] };
                if (j != j0 && hd[j * C + c] < 0) hd[j * C + c] = hop_seconds(topo, root, ow, dbytes);
                if (j != j0) ties[nt++] = (TurnTie){ tau + hold + 2 + j, root, ow, -1, hd[j * C + c] };
                int t_acc = j != j0 ? tau + hold + 2 + j : nm > 1 ? tau + 1 + 2 + j : tau + 2 + j;
                if (t_acc > last_acc[c]) last_acc[c] = t_acc;
            }
        }
    }
    /* with alike replicas, each chunk's all-reduce at its owner in the turn after its last ACC */
    for (int c = 0; c < C && replicas_alike(topo, P, R); c++)
        ties[nt++] = (TurnTie){ last_acc[c] + 1, pl.owner[c], pl.owner[c], -2,
                                across_seconds(topo, P, R, pl.owner[c], cb[c] / sizeof(float) * wp_dtype_bytes(o->grad_precision)) };
    qsort(ties, (size_t)nt, sizeof *ties, tie_cmp);
    int T = ntau + 2 + D + 4;   /* past the last all-reduce */
    double *cur = xcalloc((size_t)P, sizeof *cur), *nxt = xcalloc((size_t)P, sizeof *nxt);
    long e = 0;
    for (int t = 0; t < T; t++) {
        for (int r = 0; r < P; r++) {
            int tau = t - 2 - gpos[r];
            nxt[r] = cur[r] + (tau >= 0 && tau < ntau ? comp[tau] : 0);
        }
        for (; e < nt && ties[e].turn == t; e++) {
            const TurnTie *x = &ties[e];
            if (x->group == -2) {   /* a collective with the other replicas: from this rank's post */
                if (cur[x->a] + x->seconds > nxt[x->a]) nxt[x->a] = cur[x->a] + x->seconds;
            } else if (x->group < 0) {
                double end = (cur[x->a] > cur[x->b] ? cur[x->a] : cur[x->b]) + x->seconds;
                if (end > nxt[x->a]) nxt[x->a] = end;
                if (end > nxt[x->b]) nxt[x->b] = end;
            } else {   /* a collective starts when every member has posted it */
                int *mem = pl.members + pl.group_start[x->group], nm = pl.group_start[x->group + 1] - pl.group_start[x->group];
                double start = 0;
                for (int i = 0; i < nm; i++)
                    if (cur[mem[i]] > start) start = cur[mem[i]];
                for (int i = 0; i < nm; i++)
                    if (start + x->seconds > nxt[mem[i]]) nxt[mem[i]] = start + x->seconds;
            }
        }
        double *x = cur; cur = nxt; nxt = x;
    }
    double step = 0;
    for (int r = 0; r < P; r++)
        if (cur[r] > step) step = cur[r];
    free(cb); free(tf); free(tb); free(dev); free(gpos); free(comp); free(use_c); free(use_t); free(bwd_c); free(bwd_t);
    free(ties); free(cur); free(nxt); free(last_acc); free(bc); free(rd); free(hw); free(hd);
    return step;
}

double bound_time(const Traits *trp, const Topology *topo, const WpConfig *model, const StrategyOpts *o,
                  const Calibration *calib, double ring_cells) {
    /* Compute: every micro-batch goes forward and backward through every chunk, each on some
     * rank, whose compute runs one operation at a time; so the busiest rank computes at least the
     * mean, micro-batches per rank x (forward + backward of every chunk) at the fastest device's
     * costs. A split backward's B and W add up to the whole backward's work. Where the chunks are
     * not known, the model as one chunk: the cost features are sums over layers plus what the
     * first and the last chunk add, so any cut costs at least that. */
    int R = o->replicas > 0 ? o->replicas : 1, P = topo->ndevices, npipe = P / R, L = model->layers;
    const Traits tr = *trp;
    int C = bound_chunk_count(&tr, model, npipe, o->chunks);
    if (C < 1 || C > L) C = 1;
    double pass = 0;
    for (int k = 0; k < C; k++) {
        int n = chunk_layers_of(&tr, L, C, k);
        pass += chunk_seconds(topo, model, k, n, C, OP_FWD, o, calib) + chunk_seconds(topo, model, k, n, C, OP_BWD, o, calib);
    }
    double compute = o->micro_batches * pass, bound = compute;
    /* Weight passing on devices of one type: every rank computes exactly that mean (its own
     * micro-batches through every chunk), so what delays one rank's start or follows its last
     * compute adds to the step as it is, not averaged over the ranks. */
    int uniform = tr.shape == SHAPE_WEIGHT_PASSING;
    for (int i = 1; i < topo->nnodes; i++)
        if (topo->nodes[i].type != topo->nodes[0].type) uniform = 0;
    if (tr.ring && npipe > 1) {
        /* a weight ring: rank r's first compute is a forward of chunk 0, whose weights start at
         * the pipeline's rank 0 and come one hop at a time (a buffer received in a turn is sent
         * on in a later one), so it starts no sooner than the hops 0 -> ... -> r take; with
         * ring_tail, its last compute is its backward of chunk 0, whose gradient then goes on
         * r -> ... -> last -> 0 before the owner can update it. The step is at least any rank's
         * start + compute + tail, so at least their means. */
        int ends = tr.ends;   /* then the ring's first chunk carries no embedding (nor the head) */
        WpChunk k0 = wp_chunk_make(model, 0, 0, L / C, !ends, C == 1 && !ends);
        double wbytes = (double)k0.nparams * weight_wire_bytes(o);
        double dbytes = (double)k0.nparams * (double)wp_dtype_bytes(o->grad_precision);
        double sum = 0, most = 0;
        for (int q = 0; q < R; q++) {
            int base = q * npipe;
            double fill = 0, tail = 0;   /* rank r's hops 0 -> r; rank 0's gradient hops round the ring */
            if (tr.ring_tail) {
                for (int i = 0; i < npipe - 1; i++) tail += hop_seconds(topo, base + i, base + i + 1, dbytes);
                tail += hop_seconds(topo, base + npipe - 1, base, dbytes);
            }
            for (int r = 0; r < npipe; r++) {
                sum += fill + tail;
                if (fill + tail > most) most = fill + tail;
                if (r + 1 < npipe) {
                    fill += hop_seconds(topo, base + r, base + r + 1, wbytes);
                    if (tr.ring_tail) tail -= hop_seconds(topo, base + r, base + r + 1, dbytes);
                }
            }
        }
        bound += uniform ? most : sum / P;
    }
    /* the turn-by-turn walk follows the ring of all the chunks: with
     * --replicate-ends the ring carries the middle ones and the ends run beside it, which it does
     * not model (it came out above the simulated step), so those plans keep the bounds above */
    if (tr.ring && tr.ring_rounds && npipe > 1 && ring_cells > 0 && !tr.ends) {
        int K = tr.pass_k > 0 ? tr.pass_k : tr.pass_k_default;
        /* below the simulator's clock by its rounding: a flow ends within 1e-9 of its bytes */
        double f = ring_turns_bound(&tr, topo, model, o, calib, C, npipe, R, K, ring_cells) * (1 - 1e-6);
        if (f > bound) bound = f;
    }
    if (tr.gathers) {
        double f = gathers_turns_bound(&tr, topo, model, o, calib, C, npipe, R);
        if (f > bound) bound = f;
    }
    if (tr.groups && npipe > 1) bound += groups_fill_bound(topo, model, o, C, npipe, R, uniform);
    if (tr.groups && npipe > 1 && ring_cells > 0 && (double)npipe * (2.0 * C * o->micro_batches + npipe) <= ring_cells) {
        /* its rounds: --rounds, or the script's choice (by memory), else the least over all */
        double least = INFINITY;
        int chosen = tr.group_rounds > 0 ? tr.group_rounds : groups_rounds_choice(&tr, topo, model, o, C, npipe, R);
        for (int K = chosen > 0 ? chosen : 1; K <= (chosen > 0 ? chosen : o->micro_batches); K++) {
            double f = groups_turns_bound(&tr, topo, model, o, calib, C, npipe, R, K);
            if (f < least) least = f;
        }
        if (least < INFINITY && least * (1 - 1e-6) > bound) bound = least * (1 - 1e-6);
    }
    if (tr.shape == SHAPE_ACT_PASSING && C >= npipe && C % npipe == 0) {
        /* Activation passing's stages: stage s holds chunks s, s + npipe, ... and
         * runs m micro-batches through each. Its first compute is a forward of chunk s, which
         * waits for that micro-batch's forwards through chunks 0 .. s-1; its last (not split) is
         * a backward of chunk s, after which that micro-batch's backwards through chunks s-1 .. 0
         * remain. So the step is at least, for every stage, those forwards + its compute + those
         * backwards (with split_backward the last pass may be a W pass: no backwards after it counted). */
        double m = (double)o->micro_batches * npipe, before_f = 0, before_b = 0;
        double *own = xcalloc((size_t)npipe, sizeof *own);
        double *tf = xcalloc((size_t)C, sizeof *tf), *tb = xcalloc((size_t)C, sizeof *tb);
        for (int k = 0; k < C; k++) {
            int n = chunk_layers_of(&tr, L, C, k);
            tf[k] = chunk_seconds(topo, model, k, n, C, OP_FWD, o, calib);
            tb[k] = chunk_seconds(topo, model, k, n, C, OP_BWD, o, calib);
            own[k % npipe] += m * (tf[k] + tb[k]);
        }
        for (int st = 0; st < npipe; st++) {
            double b = before_f + own[st] + (tr.split ? 0 : before_b);
            if (b > bound) bound = b;
            before_f += tf[st];
            before_b += tb[st];
        }
        free(own); free(tf); free(tb);
    }
    return bound;
}

/* The strategy's traits for this model: a ring (weipipe) runs a tied model over more than one
 * chunk with replicated ends whatever its options say (schedules/lib/weipipe.lua: its TIE needs
 * both ends on every rank), so its bounds are those of the ends. A gathering plan (fsdp) of a
 * tied model over several chunks keeps its ends whole on every rank, never gathered
 * (schedules/fsdp.lua): the gathers' turns and buffers are not its bounds, so it gets those of a
 * plan without gathers, which are below them. */
static Traits model_traits(const char *strategy, const Topology *topo, const WpConfig *model, const StrategyOpts *o) {
    Traits tr = strategy_traits(strategy, o, topo->ndevices, model->layers);
    int P = topo->ndevices / (o->replicas > 0 ? o->replicas : 1);
    int C = o->chunks ? o->chunks : (P < model->layers ? P : model->layers);
    if (tr.ring && model->tied && C > 1) tr.ends = 1;
    if (tr.gathers && model->tied && bound_chunk_count(&tr, model, P, o->chunks) > 1) tr.gathers = 0;
    return tr;
}

double search_time_bound(const char *strategy, const Topology *topo, const WpConfig *model, const StrategyOpts *o,
                         const Calibration *calib) {
    Traits tr = model_traits(strategy, topo, model, o);
    return bound_time(&tr, topo, model, o, calib, RING_CELLS_MAX);
}

double search_mem_bound(const char *strategy, const Topology *topo, const WpConfig *model, const StrategyOpts *o) {
    Traits tr = model_traits(strategy, topo, model, o);
    return bound_mem(&tr, topo, model, o);
}
