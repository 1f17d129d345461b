/* Causal grouped-query attention on the GPU, flash-attention style, on CUDA cores: fp32
 * arithmetic on bf16 inputs, no S x S matrix anywhere, only tiles in shared memory. The numerics
 * are cpu/attention.c's in bf16 mode (the reference): q scaled by 1/sqrt(hd) in fp32 before the
 * scores, an online softmax with fp32 max and sum, P rounded to bf16 before P V, the output rounded
 * as stored, lse = m + log(l) in fp32; in backward P = exp(scale q.k - lse), dS = P (dP - D) with
 * D = rowsum(dO O), P and dS rounded to bf16 before their products, 1/sqrt(hd) applied to dQ and dK
 * after their sums.
 *
 * Tiles: BR = 64 query rows and BC = 64 keys (equal, so diagonal tiles align), 8 warps of 32
 * threads. Forward: a block per (query tile, head, sequence); warp w owns rows 8w..8w+7, a lane the
 * scores of keys lane and lane + 32 and output dimensions lane, lane + 32, ... Backward is two
 * kernels so that every sum has one owner and a fixed order (no atomics, the same bits each run):
 * dK and dV by a block per (key tile, kv head, sequence) walking every query tile of every head of
 * its group, warp w owning keys 8w..8w+7; dQ by a block per (query tile, head, sequence) walking
 * the key tiles up to the diagonal. The scores are computed in both, an extra 2/5 of the backward's
 * products, in exchange for no fp32 dQ buffer and no atomics.
 *
 * Shared-memory rows of bf16 read by lanes at different rows have a stride of HDP + 2 elements
 * (an odd number of 4-byte words), so that the 32 lanes hit 32 different banks. Rows past S are
 * loaded as zeros (keys) or as the last row (queries, so that no row's softmax is empty) and
 * never stored. Query head h reads kv head h / (heads / kv_heads), as Hugging Face's repeat_kv.
 *
 * These are the reference GPU kernels and the fallback: wc_attention_forward/backward, at the end
 * of this file, are the one place that chooses, and run cuDNN's fused attention
 * (attention_cudnn.cu) for the shape wc_attention_plan planned with it, else attention_tc_cuda.cu's
 * tensor-core kernels when hd is 64 or 128 and the tensors are 16-byte aligned, else these; the
 * environment's WP_ATTENTION (cudnn, own, reference or auto; kernels_cuda.cuh) narrows the choice. */
#include <math.h>
#include <stdint.h>
#include <string.h>
#include "common/settings.h"
#include "cuda/common_cuda.cuh"
#include "cuda/kernels_cuda.cuh"

enum { BR = 64, BC = 64, WARPS = 8, THREADS = WARPS * 32, PER_WARP = BR / WARPS };

__device__ __forceinline__ float warp_sum(float v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xFFFFFFFFu, v, o);
    return v;
}
__device__ __forceinline__ float warp_max(float v) {
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xFFFFFFFFu, v, o));
    return v;
}

/* Geometry shared by the kernels. */
struct Geo {
    int G, S, heads, kv_heads, hd, rep;
    size_t width, qd;   /* row lengths of qkv and of the output */
    float scale;
};

/* Loads rows [r0, r0 + 64) of one head of a [.., ld] bf16 activation into a [64][stride] tile,
 * zeros past hd; a row past S is `clamp_rows ? the last row : zeros`. */
template <int HDP>
__device__ void load_tile(uint16_t *dst, int stride, const uint16_t *src, size_t ld, int r0, int S, int hd,
                          int clamp_rows) {
    for (int idx = threadIdx.x; idx < 64 * HDP; idx += THREADS) {
        int r = idx / HDP, d = idx % HDP, i = r0 + r;
        uint16_t v = 0;
        if (d < hd) {
            if (i < S) v = src[(size_t)i * ld + d];
            else if (clamp_rows) v = src[(size_t)(S - 1) * ld + d];
        }
        dst[r * stride + d] = v;
    }
}

template <int HDP>
static size_t forward_smem(void) {
    return (size_t)BR * HDP * sizeof(float) + (size_t)WARPS * PER_WARP * BC * sizeof(float) +
           2 * (size_t)BC * (HDP + 2) * sizeof(uint16_t);
}

template <int HDP>
static __global__ void __launch_bounds__(THREADS) attention_forward_kernel(uint16_t *out, float *lse,
                                                                           const uint16_t *qkv, Geo g) {
    constexpr int NDL = (HDP + 31) / 32, KS = HDP + 2;
    extern __shared__ float smem[];
    float *Qs = smem;                                /* [BR][HDP] q * scale */
    float *Ps = Qs + BR * HDP;                       /* [WARPS][PER_WARP][BC] P as bf16 values */
    uint16_t *Ks = (uint16_t *)(Ps + WARPS * PER_WARP * BC);   /* [BC][KS] */
    uint16_t *Vs = Ks + BC * KS;                     /* [BC][KS] */
    const int nqb = (g.S + BR - 1) / BR;
    const int qb = nqb - 1 - (int)blockIdx.x;        /* the longest rows first */
    const int h = blockIdx.y, seq = blockIdx.z, kvh = h / g.rep;
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, i0 = qb * BR;
    const uint16_t *base = qkv + (size_t)seq * g.S * g.width;
    for (int idx = threadIdx.x; idx < BR * HDP; idx += THREADS) {
        int r = idx / HDP, d = idx % HDP, i = min(i0 + r, g.S - 1);
        Qs[idx] = d < g.hd ? bf16_to_f32(base[(size_t)i * g.width + (size_t)h * g.hd + d]) * g.scale : 0.0f;
    }
    float o[PER_WARP][NDL], m[PER_WARP], l[PER_WARP];
    #pragma unroll
    for (int rr = 0; rr < PER_WARP; rr++) {
        m[rr] = -INFINITY;
        l[rr] = 0.0f;
        #pragma unroll
        for (int e = 0; e < NDL; e++) o[rr][e] = 0.0f;
    }
    float *Pw = Ps + warp * PER_WARP * BC;
    for (int kb = 0; kb <= qb; kb++) {
        const int j0 = kb * BC, nc = min(BC, g.S - j0);
        __syncthreads();   /* Q is in place; the previous tile's K and V are no longer read */
        load_tile<HDP>(Ks, KS, base + (size_t)(g.heads + kvh) * g.hd, g.width, j0, g.S, g.hd, 0);
        load_tile<HDP>(Vs, KS, base + (size_t)(g.heads + g.kv_heads + kvh) * g.hd, g.width, j0, g.S, g.hd, 0);
        __syncthreads();
        float s[PER_WARP][2];
        #pragma unroll
        for (int rr = 0; rr < PER_WARP; rr++) s[rr][0] = s[rr][1] = 0.0f;
        for (int d = 0; d < g.hd; d++) {
            float k0 = bf16_to_f32(Ks[lane * KS + d]), k1 = bf16_to_f32(Ks[(lane + 32) * KS + d]);
            #pragma unroll
            for (int rr = 0; rr < PER_WARP; rr++) {
                float q = Qs[(warp * PER_WARP + rr) * HDP + d];
                s[rr][0] += q * k0;
                s[rr][1] += q * k1;
            }
        }
        #pragma unroll
        for (int rr = 0; rr < PER_WARP; rr++) {
            const int iq = min(i0 + warp * PER_WARP + rr, g.S - 1);   /* the row as loaded */
            const bool v0 = j0 + lane <= iq, v1 = j0 + lane + 32 <= iq;   /* past iq: masked or past S */
            float mx = warp_max(fmaxf(v0 ? s[rr][0] : -INFINITY, v1 ? s[rr][1] : -INFINITY));
            mx = fmaxf(mx, m[rr]);   /* finite: key j0 <= i0 <= iq is always in the tile */
            const float corr = expf(m[rr] - mx);   /* 0 on the first tile, where m is -inf */
            const float p0 = v0 ? expf(s[rr][0] - mx) : 0.0f, p1 = v1 ? expf(s[rr][1] - mx) : 0.0f;
            l[rr] = l[rr] * corr + warp_sum(p0 + p1);
            m[rr] = mx;
            Pw[rr * BC + lane] = bf16_round(p0);   /* P as the P V product takes it */
            Pw[rr * BC + lane + 32] = bf16_round(p1);
            #pragma unroll
            for (int e = 0; e < NDL; e++) o[rr][e] *= corr;
        }
        __syncwarp();
        for (int c = 0; c < nc; c++) {
            float v[NDL];
            #pragma unroll
            for (int e = 0; e < NDL; e++) {
                int d = lane + 32 * e;
                v[e] = d < HDP ? bf16_to_f32(Vs[c * KS + d]) : 0.0f;
            }
            #pragma unroll
            for (int rr = 0; rr < PER_WARP; rr++) {
                float p = Pw[rr * BC + c];
                #pragma unroll
                for (int e = 0; e < NDL; e++) o[rr][e] += p * v[e];
            }
        }
        __syncwarp();   /* Pw is rewritten by the next tile */
    }
    #pragma unroll
    for (int rr = 0; rr < PER_WARP; rr++) {
        const int i = i0 + warp * PER_WARP + rr;
        if (i >= g.S) continue;
        const float inv = 1.0f / l[rr];
        uint16_t *orow = out + ((size_t)seq * g.S + i) * g.qd + (size_t)h * g.hd;
        #pragma unroll
        for (int e = 0; e < NDL; e++) {
            int d = lane + 32 * e;
            if (d < g.hd) orow[d] = f32_to_bf16(o[rr][e] * inv);
        }
        if (lane == 0) lse[((size_t)seq * g.heads + h) * g.S + i] = m[rr] + logf(l[rr]);
    }
}

/* D = rowsum(dO * O) of rows [i0, i0 + 64) of head h, warp w computing rows 8w..8w+7, into Ds;
 * and their lse into Ls (0 past S, where nothing is stored). */
__device__ void load_row_stats(float *Ds, float *Ls, const uint16_t *dout, const uint16_t *out, const float *lse,
                               const Geo &g, int seq, int h, int i0) {
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    for (int rr = 0; rr < PER_WARP; rr++) {
        const int r = warp * PER_WARP + rr, i = i0 + r;
        float acc = 0.0f;
        if (i < g.S) {
            const size_t off = ((size_t)seq * g.S + i) * g.qd + (size_t)h * g.hd;
            for (int d = lane; d < g.hd; d += 32) acc += bf16_to_f32(dout[off + d]) * bf16_to_f32(out[off + d]);
        }
        acc = warp_sum(acc);
        if (lane == 0) {
            Ds[r] = acc;
            Ls[r] = i < g.S ? lse[((size_t)seq * g.heads + h) * g.S + i] : 0.0f;
        }
    }
}

template <int HDP>
static size_t backward_kv_smem(void) {
    return 2 * (size_t)WARPS * PER_WARP * BR * sizeof(float) + 2 * (size_t)BR * sizeof(float) +
           4 * (size_t)64 * (HDP + 2) * sizeof(uint16_t);
}

/* dK, dV of key tile blockIdx.x of kv head blockIdx.y of sequence blockIdx.z. */
template <int HDP>
static __global__ void __launch_bounds__(THREADS) attention_backward_kv_kernel(
    uint16_t *dqkv, const uint16_t *dout, const uint16_t *out, const float *lse, const uint16_t *qkv, Geo g) {
    constexpr int NDL = (HDP + 31) / 32, KS = HDP + 2;
    extern __shared__ float smem[];
    float *Pall = smem;                                 /* [WARPS][PER_WARP keys][BR rows] */
    float *dSall = Pall + WARPS * PER_WARP * BR;        /* same */
    float *Ds = dSall + WARPS * PER_WARP * BR, *Ls = Ds + BR;
    uint16_t *Ks = (uint16_t *)(Ls + BR), *Vs = Ks + BC * KS, *Qs = Vs + BC * KS, *dOs = Qs + BR * KS;
    const int kb = blockIdx.x, kvh = blockIdx.y, seq = blockIdx.z;
    const int nqb = (g.S + BR - 1) / BR, j0 = kb * BC;
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const uint16_t *base = qkv + (size_t)seq * g.S * g.width;
    const uint16_t *dobase = dout + (size_t)seq * g.S * g.qd;
    load_tile<HDP>(Ks, KS, base + (size_t)(g.heads + kvh) * g.hd, g.width, j0, g.S, g.hd, 0);
    load_tile<HDP>(Vs, KS, base + (size_t)(g.heads + g.kv_heads + kvh) * g.hd, g.width, j0, g.S, g.hd, 0);
    float dk[PER_WARP][NDL], dv[PER_WARP][NDL];
    #pragma unroll
    for (int cc = 0; cc < PER_WARP; cc++)
        #pragma unroll
        for (int e = 0; e < NDL; e++) dk[cc][e] = dv[cc][e] = 0.0f;
    float *Pw = Pall + warp * PER_WARP * BR, *dSw = dSall + warp * PER_WARP * BR;
    for (int hh = 0; hh < g.rep; hh++) {
        const int h = kvh * g.rep + hh;
        for (int qb = kb; qb < nqb; qb++) {
            const int i0 = qb * BR;
            __syncthreads();   /* the previous tile's Q, dO, D, L are no longer read */
            load_tile<HDP>(Qs, KS, base + (size_t)h * g.hd, g.width, i0, g.S, g.hd, 0);
            load_tile<HDP>(dOs, KS, dobase + (size_t)h * g.hd, g.qd, i0, g.S, g.hd, 0);
            load_row_stats(Ds, Ls, dout, out, lse, g, seq, h, i0);
            __syncthreads();
            /* scores and dP of the warp's 8 keys against rows lane and lane + 32 */
            float s[PER_WARP][2], dp[PER_WARP][2];
            #pragma unroll
            for (int cc = 0; cc < PER_WARP; cc++) s[cc][0] = s[cc][1] = dp[cc][0] = dp[cc][1] = 0.0f;
            for (int d = 0; d < g.hd; d++) {
                float q0 = bf16_to_f32(Qs[lane * KS + d]), q1 = bf16_to_f32(Qs[(lane + 32) * KS + d]);
                float o0 = bf16_to_f32(dOs[lane * KS + d]), o1 = bf16_to_f32(dOs[(lane + 32) * KS + d]);
                #pragma unroll
                for (int cc = 0; cc < PER_WARP; cc++) {
                    float k = bf16_to_f32(Ks[(warp * PER_WARP + cc) * KS + d]);
                    float v = bf16_to_f32(Vs[(warp * PER_WARP + cc) * KS + d]);
                    s[cc][0] += q0 * k;
                    s[cc][1] += q1 * k;
                    dp[cc][0] += o0 * v;
                    dp[cc][1] += o1 * v;
                }
            }
            #pragma unroll
            for (int cc = 0; cc < PER_WARP; cc++) {
                const int j = j0 + warp * PER_WARP + cc;
                #pragma unroll
                for (int half = 0; half < 2; half++) {
                    const int r = lane + 32 * half, i = i0 + r;
                    const bool valid = i < g.S && j <= i;   /* j <= i < S: the key exists too */
                    const float p = valid ? expf(s[cc][half] * g.scale - Ls[r]) : 0.0f;
                    const float ds = p * (dp[cc][half] - Ds[r]);
                    Pw[cc * BR + r] = bf16_round(p);
                    dSw[cc * BR + r] = bf16_round(ds);
                }
            }
            __syncwarp();
            /* dV += P^T dO, dK += dS^T Q over the tile's rows, in row order */
            const int nr = min(BR, g.S - i0);
            for (int r = 0; r < nr; r++) {
                float qv[NDL], ov[NDL];
                #pragma unroll
                for (int e = 0; e < NDL; e++) {
                    int d = lane + 32 * e;
                    qv[e] = d < HDP ? bf16_to_f32(Qs[r * KS + d]) : 0.0f;
                    ov[e] = d < HDP ? bf16_to_f32(dOs[r * KS + d]) : 0.0f;
                }
                #pragma unroll
                for (int cc = 0; cc < PER_WARP; cc++) {
                    float p = Pw[cc * BR + r], ds = dSw[cc * BR + r];
                    #pragma unroll
                    for (int e = 0; e < NDL; e++) {
                        dv[cc][e] += p * ov[e];
                        dk[cc][e] += ds * qv[e];
                    }
                }
            }
            __syncwarp();   /* Pw, dSw are rewritten by the next tile */
        }
    }
    #pragma unroll
    for (int cc = 0; cc < PER_WARP; cc++) {
        const int j = j0 + warp * PER_WARP + cc;
        if (j >= g.S) continue;
        uint16_t *row = dqkv + ((size_t)seq * g.S + j) * g.width;
        #pragma unroll
        for (int e = 0; e < NDL; e++) {
            int d = lane + 32 * e;
            if (d >= g.hd) continue;
            row[(size_t)(g.heads + kvh) * g.hd + d] = f32_to_bf16(dk[cc][e] * g.scale);
            row[(size_t)(g.heads + g.kv_heads + kvh) * g.hd + d] = f32_to_bf16(dv[cc][e]);
        }
    }
}

template <int HDP>
static size_t backward_q_smem(void) {
    return (size_t)WARPS * PER_WARP * BC * sizeof(float) + 2 * (size_t)BR * sizeof(float) +
           2 * (size_t)BR * HDP * sizeof(uint16_t) + 2 * (size_t)BC * (HDP + 2) * sizeof(uint16_t);
}

/* dQ of query tile (reversed blockIdx.x) of head blockIdx.y of sequence blockIdx.z. */
template <int HDP>
static __global__ void __launch_bounds__(THREADS) attention_backward_q_kernel(
    uint16_t *dqkv, const uint16_t *dout, const uint16_t *out, const float *lse, const uint16_t *qkv, Geo g) {
    constexpr int NDL = (HDP + 31) / 32, KS = HDP + 2;
    extern __shared__ float smem[];
    float *dSall = smem;                                /* [WARPS][PER_WARP rows][BC keys] */
    float *Ds = dSall + WARPS * PER_WARP * BC, *Ls = Ds + BR;
    uint16_t *Qs = (uint16_t *)(Ls + BR), *dOs = Qs + BR * HDP;   /* [BR][HDP], read as broadcasts */
    uint16_t *Ks = dOs + BR * HDP, *Vs = Ks + BC * KS;
    const int nqb = (g.S + BR - 1) / BR, qb = nqb - 1 - (int)blockIdx.x;
    const int h = blockIdx.y, seq = blockIdx.z, kvh = h / g.rep, i0 = qb * BR;
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const uint16_t *base = qkv + (size_t)seq * g.S * g.width;
    load_tile<HDP>(Qs, HDP, base + (size_t)h * g.hd, g.width, i0, g.S, g.hd, 0);
    load_tile<HDP>(dOs, HDP, dout + (size_t)seq * g.S * g.qd + (size_t)h * g.hd, g.qd, i0, g.S, g.hd, 0);
    load_row_stats(Ds, Ls, dout, out, lse, g, seq, h, i0);
    float dq[PER_WARP][NDL];
    #pragma unroll
    for (int rr = 0; rr < PER_WARP; rr++)
        #pragma unroll
        for (int e = 0; e < NDL; e++) dq[rr][e] = 0.0f;
    float *dSw = dSall + warp * PER_WARP * BC;
    for (int kb = 0; kb <= qb; kb++) {
        const int j0 = kb * BC, nc = min(BC, g.S - j0);
        __syncthreads();   /* Q, dO, D, L in place; the previous K, V tile no longer read */
        load_tile<HDP>(Ks, KS, base + (size_t)(g.heads + kvh) * g.hd, g.width, j0, g.S, g.hd, 0);
        load_tile<HDP>(Vs, KS, base + (size_t)(g.heads + g.kv_heads + kvh) * g.hd, g.width, j0, g.S, g.hd, 0);
        __syncthreads();
        float s[PER_WARP][2], dp[PER_WARP][2];
        #pragma unroll
        for (int rr = 0; rr < PER_WARP; rr++) s[rr][0] = s[rr][1] = dp[rr][0] = dp[rr][1] = 0.0f;
        for (int d = 0; d < g.hd; d++) {
            float k0 = bf16_to_f32(Ks[lane * KS + d]), k1 = bf16_to_f32(Ks[(lane + 32) * KS + d]);
            float v0 = bf16_to_f32(Vs[lane * KS + d]), v1 = bf16_to_f32(Vs[(lane + 32) * KS + d]);
            #pragma unroll
            for (int rr = 0; rr < PER_WARP; rr++) {
                float q = bf16_to_f32(Qs[(warp * PER_WARP + rr) * HDP + d]);
                float o = bf16_to_f32(dOs[(warp * PER_WARP + rr) * HDP + d]);
                s[rr][0] += q * k0;
                s[rr][1] += q * k1;
                dp[rr][0] += o * v0;
                dp[rr][1] += o * v1;
            }
        }
        #pragma unroll
        for (int rr = 0; rr < PER_WARP; rr++) {
            const int r = warp * PER_WARP + rr, i = i0 + r;
            #pragma unroll
            for (int half = 0; half < 2; half++) {
                const int c = lane + 32 * half, j = j0 + c;
                const bool valid = i < g.S && j <= i;
                const float p = valid ? expf(s[rr][half] * g.scale - Ls[r]) : 0.0f;
                dSw[rr * BC + c] = bf16_round(p * (dp[rr][half] - Ds[r]));
            }
        }
        __syncwarp();
        /* dQ += dS K over the tile's keys, in key order */
        for (int c = 0; c < nc; c++) {
            float kv[NDL];
            #pragma unroll
            for (int e = 0; e < NDL; e++) {
                int d = lane + 32 * e;
                kv[e] = d < HDP ? bf16_to_f32(Ks[c * KS + d]) : 0.0f;
            }
            #pragma unroll
            for (int rr = 0; rr < PER_WARP; rr++) {
                float ds = dSw[rr * BC + c];
                #pragma unroll
                for (int e = 0; e < NDL; e++) dq[rr][e] += ds * kv[e];
            }
        }
        __syncwarp();   /* dSw is rewritten by the next tile */
    }
    #pragma unroll
    for (int rr = 0; rr < PER_WARP; rr++) {
        const int i = i0 + warp * PER_WARP + rr;
        if (i >= g.S) continue;
        uint16_t *row = dqkv + ((size_t)seq * g.S + i) * g.width + (size_t)h * g.hd;
        #pragma unroll
        for (int e = 0; e < NDL; e++) {
            int d = lane + 32 * e;
            if (d < g.hd) row[d] = f32_to_bf16(dq[rr][e] * g.scale);
        }
    }
}

/* The padded head dimension the kernels are instantiated for: 0 if hd is not supported. */
static int padded_hd(int hd) {
    if (hd <= 0 || hd % 2) return 0;
    return hd <= 16 ? 16 : hd <= 32 ? 32 : hd <= 64 ? 64 : hd <= 128 ? 128 : 0;
}

template <int HDP>
static void setup_hdp(void) {
    CUDA_CHECK(cudaFuncSetAttribute(attention_forward_kernel<HDP>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                    (int)forward_smem<HDP>()));
    CUDA_CHECK(cudaFuncSetAttribute(attention_backward_kv_kernel<HDP>,
                                    cudaFuncAttributeMaxDynamicSharedMemorySize, (int)backward_kv_smem<HDP>()));
    CUDA_CHECK(cudaFuncSetAttribute(attention_backward_q_kernel<HDP>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                    (int)backward_q_smem<HDP>()));
}

static int setup_cc(int hd, char *err, size_t errlen) {
    switch (padded_hd(hd)) {
    case 16: setup_hdp<16>(); return 0;
    case 32: setup_hdp<32>(); return 0;
    case 64: setup_hdp<64>(); return 0;
    case 128: setup_hdp<128>(); return 0;
    default:
        snprintf(err, errlen, "attention: head_dim %d is not supported on CUDA (even, at most 128)", hd);
        return -1;
    }
}

/* WP_ATTENTION, read once at the first wc_attention_setup. */
enum { ATT_UNREAD = -1, ATT_AUTO, ATT_CUDNN, ATT_OWN, ATT_REFERENCE };
static int att_mode = ATT_UNREAD;

int wc_attention_setup(int hd, char *err, size_t errlen) {
    if (att_mode == ATT_UNREAD) {
        /* its choices in ATT_* order: auto|cudnn|own|reference (common/settings.c) */
        double v;
        if (wp_setting_number(wp_setting_find(wp_runtime_settings, wp_runtime_nsettings, "WP_ATTENTION"), &v, NULL, err, errlen))
            return -1;
        att_mode = (int)v;
    }
    if (setup_cc(hd, err, errlen)) return -1;
    wc_attention_tc_setup(hd);   /* both kinds are set up: the tests run one against the other */
    return 0;
}

int wc_attention_plan(int G, int S, int heads, int kv_heads, int hd, char *about, size_t aboutlen, char *err,
                      size_t errlen) {
    const char *own = att_mode == ATT_REFERENCE || !wc_attention_tc_supported(hd) ? "CUDA-core" : "tensor-core";
    char why[600];
    if (att_mode == ATT_OWN || att_mode == ATT_REFERENCE) {
        snprintf(about, aboutlen, "attention: our %s kernels (WP_ATTENTION=%s)", own,
                 att_mode == ATT_OWN ? "own" : "reference");
        return 0;
    }
    if (wc_cudnn_attention_plan(G, S, heads, kv_heads, hd, why, sizeof why) == 0) {
        char version[200];
        wc_cudnn_load(version, sizeof version);
        snprintf(about, aboutlen, "attention: %s fused flash attention, %s backward", version,
                 wc_cudnn_attention_deterministic() ? "deterministic" : "non-deterministic");
        return 0;
    }
    if (att_mode == ATT_CUDNN) {
        snprintf(err, errlen, "WP_ATTENTION=cudnn: %s", why);
        return -1;
    }
    snprintf(about, aboutlen, "attention: our %s kernels (cuDNN: %s)", own, why);
    return 0;
}

static Geo make_geo(int G, int S, int heads, int kv_heads, int hd) {
    Geo g;
    g.G = G; g.S = S; g.heads = heads; g.kv_heads = kv_heads; g.hd = hd; g.rep = heads / kv_heads;
    g.width = (size_t)(heads + 2 * kv_heads) * hd;
    g.qd = (size_t)heads * hd;
    g.scale = 1.0f / sqrtf((float)hd);
    return g;
}

template <int HDP>
static void forward_hdp(uint16_t *out, float *lse, const uint16_t *qkv, const Geo &g, cudaStream_t s) {
    dim3 grid((g.S + BR - 1) / BR, g.heads, g.G);
    attention_forward_kernel<HDP><<<grid, THREADS, forward_smem<HDP>(), s>>>(out, lse, qkv, g);
    CUDA_CHECK_LAUNCH("attention_forward_kernel");
}

template <int HDP>
static void backward_hdp(uint16_t *dqkv, const uint16_t *dout, const uint16_t *out, const float *lse,
                         const uint16_t *qkv, const Geo &g, cudaStream_t s) {
    dim3 gkv((g.S + BC - 1) / BC, g.kv_heads, g.G), gq((g.S + BR - 1) / BR, g.heads, g.G);
    attention_backward_kv_kernel<HDP><<<gkv, THREADS, backward_kv_smem<HDP>(), s>>>(dqkv, dout, out, lse, qkv, g);
    CUDA_CHECK_LAUNCH("attention_backward_kv_kernel");
    attention_backward_q_kernel<HDP><<<gq, THREADS, backward_q_smem<HDP>(), s>>>(dqkv, dout, out, lse, qkv, g);
    CUDA_CHECK_LAUNCH("attention_backward_q_kernel");
}

static void unsupported(int hd) {
    fprintf(stderr, "attention: head_dim %d is not supported on CUDA (wc_attention_setup refuses it)\n", hd);
    abort();
}

void wc_attention_cc_forward(uint16_t *out, float *lse, const uint16_t *qkv, int G, int S, int heads,
                             int kv_heads, int hd, cudaStream_t s) {
    if (G == 0 || S == 0) return;
    Geo g = make_geo(G, S, heads, kv_heads, hd);
    switch (padded_hd(hd)) {
    case 16: forward_hdp<16>(out, lse, qkv, g, s); break;
    case 32: forward_hdp<32>(out, lse, qkv, g, s); break;
    case 64: forward_hdp<64>(out, lse, qkv, g, s); break;
    case 128: forward_hdp<128>(out, lse, qkv, g, s); break;
    default: unsupported(hd);
    }
}

void wc_attention_cc_backward(uint16_t *dqkv, const uint16_t *dout, const uint16_t *out, const float *lse,
                              const uint16_t *qkv, int G, int S, int heads, int kv_heads, int hd,
                              cudaStream_t s) {
    if (G == 0 || S == 0) return;
    Geo g = make_geo(G, S, heads, kv_heads, hd);
    switch (padded_hd(hd)) {
    case 16: backward_hdp<16>(dqkv, dout, out, lse, qkv, g, s); break;
    case 32: backward_hdp<32>(dqkv, dout, out, lse, qkv, g, s); break;
    case 64: backward_hdp<64>(dqkv, dout, out, lse, qkv, g, s); break;
    case 128: backward_hdp<128>(dqkv, dout, out, lse, qkv, g, s); break;
    default: unsupported(hd);
    }
}

/* The dispatch, the one place that chooses: the tensor-core kernels (attention_tc_cuda.cu) when
 * WP_ATTENTION is not "reference", they support hd and the tensors are 16-byte aligned (their
 * cp.async loads need it; the model's buffers are), else the CUDA-core kernels above. */
static int use_tc(int hd, const void *a, const void *b, const void *c) {
    uintptr_t bits = (uintptr_t)a | (uintptr_t)b | (uintptr_t)c;
    return att_mode != ATT_REFERENCE && wc_attention_tc_supported(hd) && (bits & 15) == 0;
}

/* cuDNN's for a shape planned with it (never under own or reference: wc_attention_plan planned none) */
static int use_cudnn(int G, int S, int heads, int kv_heads, int hd) {
    return (att_mode == ATT_AUTO || att_mode == ATT_CUDNN) && wc_cudnn_attention_planned(G, S, heads, kv_heads, hd);
}

static const char *last_kernel = "none";   /* what the last wc_attention_forward ran */

const char *wc_attention_last_kernel(void) { return last_kernel; }

void wc_attention_forward(uint16_t *out, float *lse, const uint16_t *qkv, int G, int S, int heads,
                          int kv_heads, int hd, cudaStream_t s) {
    if (use_cudnn(G, S, heads, kv_heads, hd)) {
        last_kernel = "cudnn";
        wc_cudnn_attention_forward(out, lse, qkv, G, S, heads, kv_heads, hd, s);
    } else if (use_tc(hd, out, qkv, qkv)) {
        last_kernel = "tensor-core";
        wc_attention_tc_forward(out, lse, qkv, G, S, heads, kv_heads, hd, s);
    } else {
        last_kernel = "cuda-core";
        wc_attention_cc_forward(out, lse, qkv, G, S, heads, kv_heads, hd, s);
    }
}

void wc_attention_backward(uint16_t *dqkv, const uint16_t *dout, const uint16_t *out, const float *lse,
                           const uint16_t *qkv, int G, int S, int heads, int kv_heads, int hd,
                           cudaStream_t s) {
    if (use_cudnn(G, S, heads, kv_heads, hd))
        wc_cudnn_attention_backward(dqkv, dout, out, lse, qkv, G, S, heads, kv_heads, hd, s);
    else if (use_tc(hd, dqkv, dout, qkv) && ((uintptr_t)out & 15) == 0)
        wc_attention_tc_backward(dqkv, dout, out, lse, qkv, G, S, heads, kv_heads, hd, s);
    else wc_attention_cc_backward(dqkv, dout, out, lse, qkv, G, S, heads, kv_heads, hd, s);
}
