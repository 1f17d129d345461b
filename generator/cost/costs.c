/* Compute costs per class of work (see costs.h): the table of defaults per device type, the
 * features of a chunk's forward and backward, and rates <-> coefficients. */
#include <math.h>
#include <string.h>
#include <strings.h>
#include "cost/costs.h"
#include "ir/plan.h"

const char *const cost_feature_names[COST__COUNT] = {
    [COST_MM_FLOPS] = "matrix product FLOPs", [COST_MM_CALLS] = "matrix products",
    [COST_ATTN_FWD] = "attention forward FLOPs", [COST_ATTN_BWD] = "attention backward FLOPs",
    [COST_BYTES] = "bytes through memory", [COST_OPS] = "calls", [COST_RECV] = "bytes received",
};

/* The defaults, one row per device type; the first row whose match starts the type's name (and
 * whose kind, GPU or CPU, is the type's) applies. docs/calibration.md has this table and why.
 *   mm_eff         share of peak large products (m, n, k in the thousands) reach in cuBLAS / BLAS
 *   mm_knee        m*n*k at which a product reaches half of that
 *   attn_*_eff     share of peak of FlashAttention-2's causal forward and backward
 *   mem_eff        share of the memory bandwidth elementwise kernels and AdamW reach
 * Estimates from published measurements, not fits: cuBLAS bf16 GEMMs at about 75% of an A100's 312
 * TFLOP/s and 70% of an H100's 989 from 4096-cubed up, about 60% and 35% at 1024-cubed; FA-2's
 * paper (Dao 2023): forward 55-73% of an A100, backward 45-63% (head dim 64-128, causal lower);
 * on H100 FA-2 reaches 35-40%. A CPU keeps the one constant the simulator used before (0.5 of
 * its nominal fp32 rating) for products, with attention (loops over heads and positions in
 * the CPU backend) at half of that. */
const CostDefaults cost_defaults_table[] = {
    { "H100", 1, 0.70, 1.0e9, 0.38, 0.30, 0.85, 0, "cuBLAS bf16 GEMM, FA-2 on H100 SXM" },
    { "H800", 1, 0.70, 1.0e9, 0.38, 0.30, 0.85, 0, "as H100" },
    { "H200", 1, 0.70, 1.0e9, 0.38, 0.30, 0.85, 0, "as H100 (the same chip with more, faster memory)" },
    { "A100", 1, 0.75, 3.0e8, 0.60, 0.45, 0.85, 0, "cuBLAS bf16 GEMM, FA-2 paper (A100)" },
    { "A800", 1, 0.75, 3.0e8, 0.60, 0.45, 0.85, 0, "as A100 (the same chip, NVLink cut to 400 GB/s)" },
    { "", 1, 0.70, 5.0e8, 0.50, 0.40, 0.85, 0, "any other GPU" },
    { "", 0, 0.50, 1.0e4, 0.25, 0.25, 1.00, 0, "any CPU: the simulator's former constant" },
    { NULL, 0, 0, 0, 0, 0, 0, 0, NULL },
};

const CostDefaults *cost_defaults_for(const DeviceType *d) {
    const CostDefaults *last = NULL;
    for (const CostDefaults *row = cost_defaults_table; row->match; row++) {
        if (row->gpu != (d->rated_bf16 != 0)) continue;
        if (!last) last = row;
        if (!strncasecmp(d->name ? d->name : "", row->match, strlen(row->match))) return row;
    }
    return last;
}

CostRates cost_rates_default(const DeviceType *d, WpDtype precision) {
    const CostDefaults *row = cost_defaults_for(d);
    double peak = topology_peak_flops(d, precision == WP_FP32);
    /* a topology's "efficiency" is the share products reach: attention keeps its ratio to it */
    double scale = d->efficiency_set ? d->efficiency / row->mm_eff : 1;
    CostRates r = {
        .mm_flops = peak * row->mm_eff * scale, .mm_knee = row->mm_knee,
        .attn_fwd_flops = peak * row->attn_fwd_eff * scale, .attn_bwd_flops = peak * row->attn_bwd_eff * scale,
        .mem_bw = d->hbm_bw * row->mem_eff, .op_overhead_s = row->op_overhead_us * 1e-6,
    };
    return r;
}

CostRates cost_rates_convert(const CostRates *r, int gpu, WpDtype from, WpDtype to) {
    CostRates x = *r;
    if (!gpu || from == to) return x;
    double f = to == WP_FP32 ? TOPOLOGY_GPU_FP32_OF_BF16 : 1 / TOPOLOGY_GPU_FP32_OF_BF16;
    x.mm_flops *= f; x.attn_fwd_flops *= f; x.attn_bwd_flops *= f;
    return x;
}

static double inv(double x) { return x > 0 && isfinite(x) ? 1 / x : 0; }

void cost_coefs(const CostRates *r, double c[COST__COUNT]) {
    c[COST_MM_FLOPS] = inv(r->mm_flops);
    c[COST_MM_CALLS] = 2 * r->mm_knee * inv(r->mm_flops);
    c[COST_ATTN_FWD] = inv(r->attn_fwd_flops);
    c[COST_ATTN_BWD] = inv(r->attn_bwd_flops);
    c[COST_BYTES] = inv(r->mem_bw);
    c[COST_OPS] = r->op_overhead_s;
    c[COST_RECV] = r->recv_bw > 0 ? inv(r->recv_bw) : 2 * c[COST_BYTES];
}

CostRates cost_rates_of(const double c[COST__COUNT]) {
    CostRates r = {
        .mm_flops = c[COST_MM_FLOPS] > 0 ? 1 / c[COST_MM_FLOPS] : INFINITY,
        .mm_knee = c[COST_MM_FLOPS] > 0 ? c[COST_MM_CALLS] / (2 * c[COST_MM_FLOPS]) : 0,
        .attn_fwd_flops = c[COST_ATTN_FWD] > 0 ? 1 / c[COST_ATTN_FWD] : INFINITY,
        .attn_bwd_flops = c[COST_ATTN_BWD] > 0 ? 1 / c[COST_ATTN_BWD] : INFINITY,
        .mem_bw = c[COST_BYTES] > 0 ? 1 / c[COST_BYTES] : INFINITY,
        .op_overhead_s = c[COST_OPS],
        .recv_bw = c[COST_RECV] > 0 ? 1 / c[COST_RECV] : INFINITY,
    };
    return r;
}

/* The forward of a chunk (a context-parallel member's: its S/C tokens): its products (m tokens, n outputs, k inputs; q, k, v, o, gate, up,
 * down per layer, the LM head in the last chunk; the products wp_chunk_fwd_flops counts), its
 * attention (the same S^2 terms) and its elementwise bytes: per token and layer two RMSNorms (read
 * and write H each), two residual adds (3H each), RoPE on q and k (read and write), attention's
 * q, k, v read and output written, SwiGLU (read gate and up, write F); the embedding written in
 * the first chunk, the final norm and the loss over the logits (read, softmax, write) in the last.
 * The MLP's three products run once per tile of tokens (config.h, wp_mlp_tile_tokens): the same
 * FLOPs in more, shorter products, each of which costs the per-product term (COST_MM_CALLS, the
 * knee: a product of m*n*k reaches mnk / (mnk + knee) of the rate), so small tiles are slower.
 * That is this model's, not a measurement of tiles: on an H100 (knee 1e9) a llama2-7b tile of
 * 4096 tokens keeps 99.5% of the rate, one of 64 tokens 74%. */
static void forward_parts(const WpConfig *m, int nlayers, int first, int last, double act_bytes, double *mm, double *calls,
                          double *attn, double *bytes) {
    double T = (double)wp_rank_tokens(m), H = m->hidden, F = m->ffn, V = m->vocab;
    double q = (double)m->heads * m->head_dim, kv = (double)m->kv_heads * m->head_dim, S = m->seq;
    double mnk[] = { T * q * H, T * kv * H, T * kv * H, T * H * q, T * F * H, T * F * H, T * H * F };
    double layer_mm = 0;
    for (size_t i = 0; i < sizeof mnk / sizeof *mnk; i++) layer_mm += 2 * mnk[i];
    *mm = nlayers * layer_mm + (last ? 2 * T * H * V : 0);
    double tile = wp_mlp_tile_tokens(m), tiles = ceil(T / (tile > 0 ? tile : 1));
    *calls = nlayers * (4.0 + 3.0 * tiles) + (last ? 1 : 0);
    /* a context-parallel member's share of the causal pairs: 1/C of them in the balanced layout */
    *attn = nlayers * (double)m->mbs * m->heads * (S * (S + 1) / 2) * 4.0 * m->head_dim / wp_cp(m);
    double per_layer = 2 * 2 * H + 2 * 3 * H + 2 * (q + kv) + (2 * q + 2 * kv) + 3 * F;
    *bytes = act_bytes * T * (nlayers * per_layer + (first ? H : 0) + (last ? 2 * H + 3 * V : 0));
}

void cost_compute_features(const WpConfig *m, int chunk, int layer0, int nlayers, int nchunks, int kind, int recompute,
                           WpDtype precision, int gpu, double f[COST__COUNT]) {
    (void)layer0;
    for (int i = 0; i < COST__COUNT; i++) f[i] = 0;
    double act = gpu ? (double)wp_dtype_bytes(precision) : 4;
    double mm, calls, attn, bytes;
    forward_parts(m, nlayers, chunk == 0, chunk == nchunks - 1, act, &mm, &calls, &attn, &bytes);
    /* the backward of a product is two of its shape (input gradient, weight gradient); of
     * attention twice the forward's FLOPs; of elementwise work twice the bytes. A split backward
     * (zero bubble): BWD_B the input gradients, attention and elementwise; BWD_W the weights'.
     * The LM head never keeps its [tokens, vocab] logits (config.h, wp_ce_block_tokens): every
     * backward of the last chunk computes them again block by block, and so does BWD_W, which
     * keeps the head's weight rather than the dlogits (cpu/model.h): one more head product and
     * one more pass of the loss over the logits each. The split moves more through memory than
     * the whole backward (cpu/model.c, "the split backward"; the CUDA model alike): per token and
     * layer BWD_B copies dy and dx2 into its keep and qkv's gradient over the stash (a read and a
     * write each: 4H + 2(q + 2kv)), and BWD_W runs SwiGLU's backward again (reads dh and gu,
     * writes dgu: 5F). Measured on this project's CPU at H 256: B 18.0 ms against Bb + Bw 19.3
     * ms for the same chunk, what these bytes take at its memory rate. */
    double fwd = 0, mm_bwd = 0, bwd_rest = 0;
    switch ((OpKind)kind) {
    case OP_FWD: fwd = 1; break;
    case OP_BWD: mm_bwd = 2; bwd_rest = 1; fwd = recompute != 0; break;   /* any mode of config.h's but WP_KEEP_ALL */
    case OP_BWD_B: mm_bwd = 1; bwd_rest = 1; fwd = recompute != 0; break;
    case OP_BWD_W: mm_bwd = 1; break;
    /* not compute: a transfer is costed on its links (sim/collective.c), a local operation by its
     * row's mem_passes (sim/sim.c), a RING by its steps and bytes on the node's link, overlapped
     * with the compute it rides (sim/sim.c cp_overlap). No default: a new kind is a -Wswitch
     * error until it is costed. */
    case OP_SEND: case OP_RECV: case OP_BCAST: case OP_REDUCE: case OP_ALLREDUCE: case OP_ALLGATHER:
    case OP_REDUCE_SCATTER: case OP_TIE_ALLREDUCE: case OP_ACC: case OP_COPY: case OP_TIE: case OP_OPT:
    case OP_FREE: case OP_RING: case OP__COUNT: return;
    }
    int last = chunk == nchunks - 1, again = last && kind != OP_FWD;
    double T = (double)wp_rank_tokens(m);
    f[COST_MM_FLOPS] = (fwd + mm_bwd) * mm + (again ? 2 * T * m->hidden * m->vocab : 0);
    f[COST_MM_CALLS] = (fwd + mm_bwd) * calls + again;
    f[COST_ATTN_FWD] = fwd * attn;
    f[COST_ATTN_BWD] = bwd_rest * 2 * attn;
    double q = (double)m->heads * m->head_dim, kv = (double)m->kv_heads * m->head_dim;
    double split = kind == OP_BWD_B ? 4.0 * m->hidden + 2 * (q + 2 * kv) : kind == OP_BWD_W ? 5.0 * m->ffn : 0;
    f[COST_BYTES] = (fwd + 2 * bwd_rest) * bytes + act * T * nlayers * split + (kind == OP_BWD_W && last ? act * T * 3 * m->vocab : 0);
    f[COST_OPS] = 1;
}

double cost_seconds(const double f[COST__COUNT], const double c[COST__COUNT]) {
    double t = 0;
    for (int i = 0; i < COST__COUNT; i++) t += f[i] * c[i];
    return t;
}

double cost_recv_copy_s_per_byte(const DeviceType *d, const double c[COST__COUNT]) {
    return d->rated_bf16 ? 0 : c[COST_RECV];
}
