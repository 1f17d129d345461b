/* Ring attention's block kernels on the GPU (the CPU's are runtime/cpu/attention_block.c, whose
 * contracts these follow; docs/architecture.md, "Ring attention's kernels"): a block of n queries
 * against m keys and values, diagonal (same positions, causal within) or full (every key earlier),
 * its output normalised by the block's own sum with its lse; the exact merge of two partial
 * results; and a block's share of the backward from the final output and lse.
 *
 * Formats: q, kv and dout bf16 as the rest of the model's activations; the block's output, lse,
 * the merged result and the gradients dq, dkv fp32, because they are partial sums that later
 * blocks add to: each is rounded once, by the caller, when every block has been added (a bf16
 * rounding per block would grow with C). fp32 arithmetic throughout, no rounding inside (the CPU
 * block kernels' fp32 numerics on bf16 values), so the check against the CPU is a matter of
 * summation order only.
 *
 * These are reference kernels: one warp per (query row, head) in forward and for dQ, one per
 * (key row, kv head) for dK and dV, each walking the other side's rows with the online softmax
 * (forward) or P = exp(S - lse) (backward), lanes over the head dimension, a warp sum per dot
 * product: simple enough to check without a device (below), and every sum has one owner and a
 * fixed order (no atomics, the same bits each run). Slow: each warp reads the other side's rows
 * from memory once per row, where a tiled kernel shares them through shared memory. The tiled,
 * tensor-core and cuDNN forms (with cuDNN's Stats as the lse) are to follow once the plan's ring
 * operations call these. tests/gpu/emulate_attention_block.cpp runs these kernels on the CPU (a
 * unit test without a GPU); tests/gpu/test_kernels.cu checks them on a device. */
#include <math.h>
#include <stdint.h>
#include "cuda/common_cuda.cuh"
#include "cuda/kernels_cuda.cuh"

enum { WARPS = 4, THREADS = WARPS * 32, NDL = 4 };   /* hd <= 32 * NDL = 128 */

__device__ __forceinline__ float warp_sum_b(float v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xFFFFFFFFu, v, o);
    return v;
}

struct BlockGeo {
    int n, m, heads, kv_heads, hd, rep, diag;
    int ldq, ldkv;
    float scale;
};

/* Keys row i sees: 0 .. (diag ? i : m - 1). */
__device__ __forceinline__ int keys_seen(const BlockGeo &g, int i) { return g.diag ? i + 1 : g.m; }

static __global__ void __launch_bounds__(THREADS) block_forward_kernel(float *out, float *lse, int ldl,
                                                                       const uint16_t *q, const uint16_t *kv,
                                                                       BlockGeo g) {
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int i = blockIdx.x * WARPS + warp, h = blockIdx.y, kvh = h / g.rep;
    if (i >= g.n) return;
    float qv[NDL], o[NDL];
    #pragma unroll
    for (int e = 0; e < NDL; e++) {
        int d = lane + 32 * e;
        qv[e] = d < g.hd ? bf16_to_f32(q[(size_t)i * g.ldq + (size_t)h * g.hd + d]) * g.scale : 0.0f;
        o[e] = 0.0f;
    }
    float mx = -INFINITY, l = 0.0f;
    const int nk = keys_seen(g, i);
    for (int j = 0; j < nk; j++) {
        const uint16_t *k = kv + (size_t)j * g.ldkv + (size_t)kvh * g.hd;
        const uint16_t *v = kv + (size_t)j * g.ldkv + (size_t)(g.kv_heads + kvh) * g.hd;
        float s = 0.0f;
        #pragma unroll
        for (int e = 0; e < NDL; e++) {
            int d = lane + 32 * e;
            if (d < g.hd) s += qv[e] * bf16_to_f32(k[d]);
        }
        s = warp_sum_b(s);
        const float mnew = fmaxf(mx, s), corr = expf(mx - mnew), p = expf(s - mnew);
        l = l * corr + p;
        mx = mnew;
        #pragma unroll
        for (int e = 0; e < NDL; e++) {
            int d = lane + 32 * e;
            o[e] = o[e] * corr + (d < g.hd ? p * bf16_to_f32(v[d]) : 0.0f);
        }
    }
    const float inv = 1.0f / l;
    #pragma unroll
    for (int e = 0; e < NDL; e++) {
        int d = lane + 32 * e;
        if (d < g.hd) out[(size_t)i * g.heads * g.hd + (size_t)h * g.hd + d] = o[e] * inv;
    }
    if (lane == 0) lse[(size_t)h * ldl + i] = mx + logf(l);
}

static __global__ void block_merge_kernel(float *out, float *lse, int ldl, const float *out_b, const float *lse_b,
                                          int ldlb, int n, int heads, int hd) {
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int i = blockIdx.x * WARPS + warp, h = blockIdx.y;
    if (i >= n) return;
    const float la = lse[(size_t)h * ldl + i], lb = lse_b[(size_t)h * ldlb + i], mx = fmaxf(la, lb);
    if (mx == -INFINITY) return;   /* neither saw a key */
    const float ea = expf(la - mx), eb = expf(lb - mx), sum = ea + eb, wa = ea / sum, wb = eb / sum;
    const size_t row = (size_t)i * heads * hd + (size_t)h * hd;
    for (int d = lane; d < hd; d += 32) out[row + d] = wa * out[row + d] + wb * out_b[row + d];
    __syncwarp();
    if (lane == 0) lse[(size_t)h * ldl + i] = mx + logf(sum);
}

/* D[h * n + i] = rowsum(dO * O) of query i, head h. */
static __global__ void block_delta_kernel(float *D, const uint16_t *dout, const float *out, int n, int heads, int hd) {
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int i = blockIdx.x * WARPS + warp, h = blockIdx.y;
    if (i >= n) return;
    const size_t row = (size_t)i * heads * hd + (size_t)h * hd;
    float acc = 0.0f;
    for (int d = lane; d < hd; d += 32) acc += bf16_to_f32(dout[row + d]) * out[row + d];
    acc = warp_sum_b(acc);
    if (lane == 0) D[(size_t)h * n + i] = acc;
}

/* P and dS of query i (head h) against key j: p = exp(scale q.k - L), ds = p (dO.v - D). */
__device__ __forceinline__ void p_ds(float *p, float *ds, const float *qv, const float *ov, const uint16_t *k,
                                     const uint16_t *v, float L, float Dr, const BlockGeo &g, int lane) {
    float s = 0.0f, dp = 0.0f;
    #pragma unroll
    for (int e = 0; e < NDL; e++) {
        int d = lane + 32 * e;
        if (d < g.hd) { s += qv[e] * bf16_to_f32(k[d]); dp += ov[e] * bf16_to_f32(v[d]); }
    }
    s = warp_sum_b(s);
    dp = warp_sum_b(dp);
    *p = expf(s * g.scale - L);
    *ds = *p * (dp - Dr);
}

/* dq[i] += scale * sum over visible j of ds_ij k_j, a warp per (query row, head). */
static __global__ void __launch_bounds__(THREADS) block_backward_q_kernel(
    float *dq, int lddq, const uint16_t *dout, const float *lse, int ldl, const float *D, const uint16_t *q,
    const uint16_t *kv, BlockGeo g) {
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int i = blockIdx.x * WARPS + warp, h = blockIdx.y, kvh = h / g.rep;
    if (i >= g.n) return;
    float qv[NDL], ov[NDL], acc[NDL];
    #pragma unroll
    for (int e = 0; e < NDL; e++) {
        int d = lane + 32 * e;
        qv[e] = d < g.hd ? bf16_to_f32(q[(size_t)i * g.ldq + (size_t)h * g.hd + d]) : 0.0f;
        ov[e] = d < g.hd ? bf16_to_f32(dout[(size_t)i * g.heads * g.hd + (size_t)h * g.hd + d]) : 0.0f;
        acc[e] = 0.0f;
    }
    const float L = lse[(size_t)h * ldl + i], Dr = D[(size_t)h * g.n + i];
    const int nk = keys_seen(g, i);
    for (int j = 0; j < nk; j++) {
        const uint16_t *k = kv + (size_t)j * g.ldkv + (size_t)kvh * g.hd;
        float p, ds;
        p_ds(&p, &ds, qv, ov, k, kv + (size_t)j * g.ldkv + (size_t)(g.kv_heads + kvh) * g.hd, L, Dr, g, lane);
        #pragma unroll
        for (int e = 0; e < NDL; e++) {
            int d = lane + 32 * e;
            if (d < g.hd) acc[e] += ds * bf16_to_f32(k[d]);
        }
    }
    #pragma unroll
    for (int e = 0; e < NDL; e++) {
        int d = lane + 32 * e;
        if (d < g.hd) dq[(size_t)i * lddq + (size_t)h * g.hd + d] += acc[e] * g.scale;
    }
}

/* dk[j] += scale * sum ds_ij q_i, dv[j] += sum p_ij dO_i over the group's heads and the queries
 * that see key j, a warp per (key row, kv head). */
static __global__ void __launch_bounds__(THREADS) block_backward_kv_kernel(
    float *dkv, int lddkv, const uint16_t *dout, const float *lse, int ldl, const float *D, const uint16_t *q,
    const uint16_t *kv, BlockGeo g) {
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int j = blockIdx.x * WARPS + warp, kvh = blockIdx.y;
    if (j >= g.m) return;
    const uint16_t *k = kv + (size_t)j * g.ldkv + (size_t)kvh * g.hd;
    const uint16_t *v = kv + (size_t)j * g.ldkv + (size_t)(g.kv_heads + kvh) * g.hd;
    float dk[NDL], dv[NDL];
    #pragma unroll
    for (int e = 0; e < NDL; e++) dk[e] = dv[e] = 0.0f;
    for (int hh = 0; hh < g.rep; hh++) {
        const int h = kvh * g.rep + hh;
        for (int i = g.diag ? j : 0; i < g.n; i++) {
            float qv[NDL], ov[NDL];
            #pragma unroll
            for (int e = 0; e < NDL; e++) {
                int d = lane + 32 * e;
                qv[e] = d < g.hd ? bf16_to_f32(q[(size_t)i * g.ldq + (size_t)h * g.hd + d]) : 0.0f;
                ov[e] = d < g.hd ? bf16_to_f32(dout[(size_t)i * g.heads * g.hd + (size_t)h * g.hd + d]) : 0.0f;
            }
            float p, ds;
            p_ds(&p, &ds, qv, ov, k, v, lse[(size_t)h * ldl + i], D[(size_t)h * g.n + i], g, lane);
            #pragma unroll
            for (int e = 0; e < NDL; e++) { dv[e] += p * ov[e]; dk[e] += ds * qv[e]; }
        }
    }
    #pragma unroll
    for (int e = 0; e < NDL; e++) {
        int d = lane + 32 * e;
        if (d >= g.hd) continue;
        dkv[(size_t)j * lddkv + (size_t)kvh * g.hd + d] += dk[e] * g.scale;
        dkv[(size_t)j * lddkv + (size_t)(g.kv_heads + kvh) * g.hd + d] += dv[e];
    }
}

#ifndef WC_BLOCK_HOST_EMULATION   /* tests/gpu/emulate_attention_block.cpp runs the kernels above on the host */
static BlockGeo block_geo(int n, int m, int heads, int kv_heads, int hd, int diag, int ldq, int ldkv) {
    BlockGeo g = { n, m, heads, kv_heads, hd, heads / kv_heads, diag, ldq, ldkv, 1.0f / sqrtf((float)hd) };
    return g;
}

void wc_attention_block_forward(float *out, float *lse, int ldl, const uint16_t *q, int ldq, const uint16_t *kv,
                                int ldkv, int n, int m, int heads, int kv_heads, int hd, int diag, cudaStream_t s) {
    BlockGeo g = block_geo(n, m, heads, kv_heads, hd, diag, ldq, ldkv);
    block_forward_kernel<<<dim3((n + WARPS - 1) / WARPS, heads), THREADS, 0, s>>>(out, lse, ldl, q, kv, g);
    CUDA_CHECK_LAUNCH("block_forward_kernel");
}

void wc_attention_block_merge(float *out, float *lse, int ldl, const float *out_b, const float *lse_b, int ldlb,
                              int n, int heads, int hd, cudaStream_t s) {
    block_merge_kernel<<<dim3((n + WARPS - 1) / WARPS, heads), THREADS, 0, s>>>(out, lse, ldl, out_b, lse_b, ldlb,
                                                                                n, heads, hd);
    CUDA_CHECK_LAUNCH("block_merge_kernel");
}

void wc_attention_block_backward(float *dq, int lddq, float *dkv, int lddkv, const uint16_t *dout, const float *out,
                                 const float *lse, int ldl, const uint16_t *q, int ldq, const uint16_t *kv, int ldkv,
                                 int n, int m, int heads, int kv_heads, int hd, int diag, float *D, cudaStream_t s) {
    BlockGeo g = block_geo(n, m, heads, kv_heads, hd, diag, ldq, ldkv);
    dim3 rows((n + WARPS - 1) / WARPS, heads);
    block_delta_kernel<<<rows, THREADS, 0, s>>>(D, dout, out, n, heads, hd);
    CUDA_CHECK_LAUNCH("block_delta_kernel");
    block_backward_q_kernel<<<rows, THREADS, 0, s>>>(dq, lddq, dout, lse, ldl, D, q, kv, g);
    CUDA_CHECK_LAUNCH("block_backward_q_kernel");
    block_backward_kv_kernel<<<dim3((m + WARPS - 1) / WARPS, kv_heads), THREADS, 0, s>>>(dkv, lddkv, dout, lse, ldl,
                                                                                          D, q, kv, g);
    CUDA_CHECK_LAUNCH("block_backward_kv_kernel");
}
#endif
