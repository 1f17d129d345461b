/* Causal grouped-query flash attention on tensor cores (sm_80 and later: mma.sync m16n8k16 bf16
 * with fp32 accumulators, ldmatrix, cp.async), forward and deterministic backward, for head
 * dimensions 64 and 128. attention_cuda.cu's dispatch runs these when they support the shape and
 * keeps its CUDA-core kernels for the rest and for WP_ATTENTION=reference.
 *
 * Numerics: those of attention_cuda.cu (and of cpu/attention.c in bf16 mode) except the order of
 * the sums and one place: the 1/sqrt(hd) scale is applied to the fp32 score after the q.k sum
 * (s = scale * sum(q k)) instead of to q before it (sum((scale q) k)): the mma takes q as bf16,
 * and bf16(scale q) would be a rounding the reference does not have, while the two fp32
 * expressions differ only by fp32 roundings, as another order of the sum does. The backward of
 * both kernels already computes scale * sum(q k). Then, as the reference: online softmax with fp32
 * max and sum (the sum of the unrounded exps), P rounded to bf16 (to nearest even) as the P V mma
 * takes it, the output rounded as stored, lse = m + log(l) in fp32; backward with P = exp(s - lse)
 * recomputed, D = rowsum(dO O) in fp32, dS = P (dP - D) from the unrounded P and rounded to bf16
 * before its products, 1/sqrt(hd) applied to dQ and dK after their sums. exp is __expf (ex2.approx
 * of x log2 e): its error, a few fp32 ulps, is below the bf16 rounding that follows.
 *
 * Tiles: 64 query rows by 64 keys (equal, so diagonal tiles align), 4 warps. Fragment layouts
 * are the PTX ISA's for mma.m16n8k16 .bf16: with g = lane / 4 and t = lane % 4, A (16 x 16, row
 * major) is 4 registers of 2 bf16: (g, 2t..2t+1), (g+8, 2t..), (g, 2t+8..), (g+8, 2t+8..); B
 * (16 x 8, "col") is 2 registers: (k 2t..2t+1, n g), (k 2t+8.., n g); the fp32 accumulator C
 * (16 x 8) is (g, 2t), (g, 2t+1), (g+8, 2t), (g+8, 2t+1); the lower index in the lower 16 bits.
 * ldmatrix.x4 loads four 8 x 8 matrices whose row addresses come from lanes 8i..8i+7 for matrix
 * i, lane l receiving row l/4, columns 2(l%4)..+1 (with .trans: column l/4, rows 2(l%4)..+1).
 * So the accumulator of two adjacent 8-column tiles of S is, repacked to bf16, the A fragment of
 * the 16-wide k step of P V (the usual flash-attention register reuse), and softmax statistics
 * are per row: a row's values are in the 4 lanes of a quad (shuffles over xor 1 and 2).
 *
 * Forward: a block per (query tile, head, sequence), warp w the rows 16w..16w+15; Q stays in
 * registers, K and V tiles are double-buffered by cp.async (the next tile loads during this one).
 * Backward, three kernels, no atomics, every sum in a fixed order:
 *   1. D = rowsum(dO O) per (token, head), written as an fp32 into the first 4 bytes of that
 *      token's and head's dq slot of dqkv (no scratch buffer: dqkv is an output, and kernel 3
 *      reads a slot's D before it writes the slot's dq, in the one block that owns it);
 *   2. dK, dV: a block per (key tile, kv head, sequence), warp w owning keys 16w..16w+15 and
 *      computing the transposed tiles S^T = K Q^T and dP^T = V dO^T over every query tile of
 *      every head of its group, 32 query rows at a time, so that P^T and dS^T are already the A
 *      operands of dV += P^T dO and dK += dS^T Q; Q and dO tiles double-buffered;
 *   3. dQ: a block per (query tile, head, sequence), warp w rows 16w..16w+15, walking the key
 *      tiles up to the diagonal: S, dP, dS, dQ += dS K; K and V double-buffered.
 * The scores and dP are computed in both 2 and 3, in exchange for no fp32 dQ buffer and no atomics.
 *
 * Shared memory: rows of hd bf16 padded by 8 elements (16 bytes), so that the 8 row addresses of
 * an ldmatrix matrix fall in 8 different 16-byte bank groups (no conflicts). Rows past S are
 * loaded as zeros (cp.async's zero fill) and never stored; their scores are masked or belong to
 * rows that are not stored. The global tensors must be 16-byte aligned (cp.async): the dispatch
 * checks and otherwise runs the CUDA-core kernels. Query head h reads kv head h / (heads /
 * kv_heads), as Hugging Face's repeat_kv. */
#include <math.h>
#include <stdint.h>
#include "cuda/common_cuda.cuh"
#include "cuda/kernels_cuda.cuh"

enum { TILE = 64, TC_WARPS = 4, TC_THREADS = TC_WARPS * 32 };

struct TcGeo {
    int S, heads, kv_heads, rep;
    size_t width, qd;   /* row lengths of qkv and of the output, in elements */
    float scale;
};

static TcGeo tc_geo(int S, int heads, int kv_heads, int hd) {
    TcGeo g;
    g.S = S; g.heads = heads; g.kv_heads = kv_heads; g.rep = heads / kv_heads;
    g.width = (size_t)(heads + 2 * kv_heads) * hd;
    g.qd = (size_t)heads * hd;
    g.scale = 1.0f / sqrtf((float)hd);
    return g;
}

/* ---- PTX wrappers ----
 * tests/gpu/emulate_attention_tc.cpp compiles this file's kernels on the host with
 * WC_TC_HOST_EMULATION defined and its own versions of these wrappers (the PTX ISA's fragment
 * layouts written out), so that every index here is checked without a GPU. */
#ifndef WC_TC_HOST_EMULATION

__device__ __forceinline__ uint32_t smem_u32(const void *p) { return (uint32_t)__cvta_generic_to_shared(p); }

/* 16 bytes global -> shared, asynchronously; zeros instead when !valid (src is then not read). */
__device__ __forceinline__ void cp_async16(void *dst, const void *src, bool valid) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(smem_u32(dst)), "l"(src),
                 "r"(valid ? 16 : 0)
                 : "memory");
}
__device__ __forceinline__ void cp_async_commit(void) { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
/* Waits until at most n of this thread's committed groups are still in flight. */
template <int N>
__device__ __forceinline__ void cp_async_wait(void) {
    asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}

__device__ __forceinline__ void ldsm_x4(uint32_t r[4], const uint16_t *p) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(smem_u32(p)));
}
__device__ __forceinline__ void ldsm_x4_trans(uint32_t r[4], const uint16_t *p) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(smem_u32(p)));
}

/* c += a b on one 16 x 8 x 16 tile, bf16 inputs, fp32 accumulators. */
__device__ __forceinline__ void mma_bf16(float c[4], const uint32_t a[4], uint32_t b0, uint32_t b1) {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
                 "{%8, %9}, {%0, %1, %2, %3};\n"
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

/* Two fp32 rounded to bf16 (to nearest even, as f32_to_bf16 for every non-NaN value), lo in the
 * lower half: an operand of the mma. */
__device__ __forceinline__ uint32_t pack_bf16(float lo, float hi) {
    uint32_t r;
    asm("cvt.rn.bf16x2.f32 %0, %1, %2;\n" : "=r"(r) : "f"(hi), "f"(lo));
    return r;
}
/* As stored: the project's rounding, bit for bit (NaN payloads too). */
__device__ __forceinline__ uint32_t pack_stored(float lo, float hi) {
    return (uint32_t)f32_to_bf16(lo) | ((uint32_t)f32_to_bf16(hi) << 16);
}

#endif /* WC_TC_HOST_EMULATION */

__device__ __forceinline__ float quad_max(float v) {
    v = fmaxf(v, __shfl_xor_sync(0xFFFFFFFFu, v, 1));
    return fmaxf(v, __shfl_xor_sync(0xFFFFFFFFu, v, 2));
}
__device__ __forceinline__ float quad_sum(float v) {
    v += __shfl_xor_sync(0xFFFFFFFFu, v, 1);
    return v + __shfl_xor_sync(0xFFFFFFFFu, v, 2);
}

/* ---- tiles ---- */

/* Rows [r0, r0 + 64) of one head (HD bf16 from src, rows ld elements apart) into dst [64][HD + 8],
 * asynchronously; rows past S as zeros. The caller commits the group. */
template <int HD>
__device__ __forceinline__ void load_tile_async(uint16_t *dst, const uint16_t *src, size_t ld, int r0, int S) {
    constexpr int CHUNKS = HD / 8, LD = HD + 8;   /* 16-byte pieces per row */
    for (int idx = threadIdx.x; idx < TILE * CHUNKS; idx += TC_THREADS) {
        const int r = idx / CHUNKS, c = idx % CHUNKS, i = r0 + r;
        const bool ok = i < S;
        cp_async16(dst + r * LD + c * 8, src + (size_t)(ok ? i : 0) * ld + c * 8, ok);
    }
}

/* Lane's row address for an A operand (16 x 16 at rows r0.., columns c0.. of a [..][LD] tile)
 * loaded by ldsm_x4: matrices (rows 0-7, cols 0-7), (8-15, 0-7), (0-7, 8-15), (8-15, 8-15) are
 * a0..a3. The same address with ldsm_x4_trans on a [k][n] tile gives the B operands of two
 * adjacent 8-column n tiles (k 0-7 | 8-15 of n tile 0, then of n tile 1). */
template <int LD>
__device__ __forceinline__ const uint16_t *frag_a(const uint16_t *tile, int r0, int c0, int lane) {
    return tile + (r0 + (lane & 7) + ((lane >> 3) & 1) * 8) * LD + c0 + (lane >> 4) * 8;
}
/* Lane's row address for the B operands of two adjacent n tiles read from a [n][k] tile (keys x
 * dims: B[k][n] = tile[n][k]) by ldsm_x4: r[0], r[1] are b0, b1 of n tile n0..n0+7 and r[2],
 * r[3] those of n0+8..n0+15 (k c0..c0+15). */
template <int LD>
__device__ __forceinline__ const uint16_t *frag_b_nk(const uint16_t *tile, int n0, int c0, int lane) {
    return tile + (n0 + (lane & 7) + (lane >> 4) * 8) * LD + c0 + ((lane >> 3) & 1) * 8;
}

/* ---- forward ---- */

template <int HD>
static size_t tc_forward_smem(void) {
    return (size_t)5 * TILE * (HD + 8) * sizeof(uint16_t);   /* Q, K[2], V[2] */
}

template <int HD>
static __global__ void __launch_bounds__(TC_THREADS, 2) tc_forward_kernel(uint16_t *out, float *lse,
                                                                       const uint16_t *qkv, TcGeo g) {
    constexpr int LD = HD + 8, KD = HD / 16, ND = HD / 8;
    extern __shared__ __align__(16) uint16_t tsm[];
    uint16_t *Qs = tsm, *Ks = Qs + TILE * LD, *Vs = Ks + 2 * TILE * LD;   /* K, V: two stages each */
    const int nqb = (g.S + TILE - 1) / TILE, qb = nqb - 1 - (int)blockIdx.x;   /* longest rows first */
    const int h = blockIdx.y, seq = blockIdx.z, kvh = h / g.rep, i0 = qb * TILE;
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, gq = lane >> 2, tq = lane & 3;
    const uint16_t *base = qkv + (size_t)seq * g.S * g.width;
    const uint16_t *kbase = base + (size_t)(g.heads + kvh) * HD;
    const uint16_t *vbase = base + (size_t)(g.heads + g.kv_heads + kvh) * HD;
    load_tile_async<HD>(Qs, base + (size_t)h * HD, g.width, i0, g.S);
    load_tile_async<HD>(Ks, kbase, g.width, 0, g.S);
    load_tile_async<HD>(Vs, vbase, g.width, 0, g.S);
    cp_async_commit();

    uint32_t qf[KD][4];
    float o[ND][4], m[2] = {-INFINITY, -INFINITY}, l[2] = {0.0f, 0.0f};   /* rows gq and gq + 8 */
    #pragma unroll
    for (int n = 0; n < ND; n++) o[n][0] = o[n][1] = o[n][2] = o[n][3] = 0.0f;
    const int r_lo = warp * 16 + gq;   /* the tile-local row of accumulator elements 0, 1 (2, 3: + 8) */

    for (int kb = 0; kb <= qb; kb++) {
        const int st = kb & 1;
        if (kb < qb) {   /* the next tile into the other stage, freed by the last iteration's barrier */
            load_tile_async<HD>(Ks + (st ^ 1) * TILE * LD, kbase, g.width, (kb + 1) * TILE, g.S);
            load_tile_async<HD>(Vs + (st ^ 1) * TILE * LD, vbase, g.width, (kb + 1) * TILE, g.S);
        }
        cp_async_commit();   /* possibly empty: the group count stays one per iteration */
        cp_async_wait<1>();  /* everything but the newest group: Q and this tile have landed */
        __syncthreads();
        const uint16_t *Kt = Ks + st * TILE * LD, *Vt = Vs + st * TILE * LD;
        if (kb == 0) {
            #pragma unroll
            for (int kk = 0; kk < KD; kk++) ldsm_x4(qf[kk], frag_a<LD>(Qs, warp * 16, kk * 16, lane));
        }
        /* S = Q K^T: 8 n tiles of 8 keys */
        float s[8][4];
        #pragma unroll
        for (int n = 0; n < 8; n++) s[n][0] = s[n][1] = s[n][2] = s[n][3] = 0.0f;
        #pragma unroll
        for (int kk = 0; kk < KD; kk++) {
            #pragma unroll
            for (int np = 0; np < 4; np++) {
                uint32_t b[4];
                ldsm_x4(b, frag_b_nk<LD>(Kt, np * 16, kk * 16, lane));
                mma_bf16(s[2 * np], qf[kk], b[0], b[1]);
                mma_bf16(s[2 * np + 1], qf[kk], b[2], b[3]);
            }
        }
        /* scale, causal mask (diagonal tile only: earlier tiles' keys precede every row), the
         * online softmax per row */
        const bool diag = kb == qb;
        float mx[2] = {m[0], m[1]};
        #pragma unroll
        for (int n = 0; n < 8; n++)
            #pragma unroll
            for (int e = 0; e < 4; e++) {
                const int c = n * 8 + 2 * tq + (e & 1), r = r_lo + (e >> 1) * 8;
                float v = s[n][e] * g.scale;
                if (diag && c > r) v = -INFINITY;
                s[n][e] = v;
                mx[e >> 1] = fmaxf(mx[e >> 1], v);
            }
        float corr[2];
        #pragma unroll
        for (int half = 0; half < 2; half++) {
            mx[half] = quad_max(mx[half]);   /* finite: key 0 of the first tile precedes every row */
            corr[half] = __expf(m[half] - mx[half]);   /* 0 on the first tile, where m is -inf */
            m[half] = mx[half];
        }
        float rs[2] = {0.0f, 0.0f};
        #pragma unroll
        for (int n = 0; n < 8; n++)
            #pragma unroll
            for (int e = 0; e < 4; e++) {
                const float p = __expf(s[n][e] - m[e >> 1]);   /* 0 where masked */
                s[n][e] = p;
                rs[e >> 1] += p;
            }
        /* l: this lane's part of the row sum (the quad's four parts are added at the end) */
        l[0] = l[0] * corr[0] + rs[0];
        l[1] = l[1] * corr[1] + rs[1];
        #pragma unroll
        for (int n = 0; n < ND; n++) {
            o[n][0] *= corr[0]; o[n][1] *= corr[0];
            o[n][2] *= corr[1]; o[n][3] *= corr[1];
        }
        /* O += P V: k steps of 16 keys, P from the accumulators (n tiles 2kt, 2kt + 1) */
        #pragma unroll
        for (int kt = 0; kt < 4; kt++) {
            uint32_t a[4];
            a[0] = pack_bf16(s[2 * kt][0], s[2 * kt][1]);
            a[1] = pack_bf16(s[2 * kt][2], s[2 * kt][3]);
            a[2] = pack_bf16(s[2 * kt + 1][0], s[2 * kt + 1][1]);
            a[3] = pack_bf16(s[2 * kt + 1][2], s[2 * kt + 1][3]);
            #pragma unroll
            for (int dp = 0; dp < ND / 2; dp++) {
                uint32_t b[4];
                ldsm_x4_trans(b, frag_a<LD>(Vt, kt * 16, dp * 16, lane));
                mma_bf16(o[2 * dp], a, b[0], b[1]);
                mma_bf16(o[2 * dp + 1], a, b[2], b[3]);
            }
        }
        __syncthreads();   /* this stage is reloaded by the next iteration's prefetch */
    }
    #pragma unroll
    for (int half = 0; half < 2; half++) {
        const float lsum = quad_sum(l[half]);
        const int i = i0 + r_lo + half * 8;
        if (i >= g.S) continue;
        const float inv = 1.0f / lsum;
        uint16_t *orow = out + ((size_t)seq * g.S + i) * g.qd + (size_t)h * HD;
        #pragma unroll
        for (int n = 0; n < ND; n++)
            *(uint32_t *)(orow + n * 8 + 2 * tq) = pack_stored(o[n][2 * half] * inv, o[n][2 * half + 1] * inv);
        if (tq == 0) lse[((size_t)seq * g.heads + h) * g.S + i] = m[half] + logf(lsum);
    }
}

/* ---- backward ---- */

/* 1. D = rowsum(dO * O) of every (token, head), a warp each, into the first 4 bytes of the
 * token's dq slot of head h (see the header). */
template <int HD>
static __global__ void tc_row_dot_kernel(uint16_t *dqkv, const uint16_t *dout, const uint16_t *out, size_t T,
                                         TcGeo g) {
    constexpr int PER = HD / 32;   /* contiguous elements per lane */
    const size_t idx = (size_t)blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
    const int lane = threadIdx.x % 32;
    if (idx >= T * g.heads) return;
    const size_t t = idx / g.heads, h = idx % g.heads;
    const uint16_t *d = dout + t * g.qd + h * HD + lane * PER, *o = out + t * g.qd + h * HD + lane * PER;
    float acc = 0.0f;
    #pragma unroll
    for (int e = 0; e < PER; e++) acc += bf16_to_f32(d[e]) * bf16_to_f32(o[e]);
    for (int off = 16; off > 0; off >>= 1) acc += __shfl_xor_sync(0xFFFFFFFFu, acc, off);
    if (lane == 0) *(float *)(dqkv + t * g.width + h * HD) = acc;
}

template <int HD>
static size_t tc_backward_kv_smem(void) {
    return (size_t)6 * TILE * (HD + 8) * sizeof(uint16_t) + 4 * TILE * sizeof(float);
}

/* 2. dK, dV of key tile blockIdx.x of kv head blockIdx.y of sequence blockIdx.z. */
template <int HD>
static __global__ void __launch_bounds__(TC_THREADS, 2) tc_backward_kv_kernel(uint16_t *dqkv, const uint16_t *dout,
                                                                           const float *lse, const uint16_t *qkv,
                                                                           TcGeo g) {
    constexpr int LD = HD + 8, KD = HD / 16, ND = HD / 8;
    extern __shared__ __align__(16) uint16_t tsm[];
    uint16_t *Ks = tsm, *Vs = Ks + TILE * LD, *Qs = Vs + TILE * LD, *dOs = Qs + 2 * TILE * LD;   /* Q, dO: 2 stages */
    float *Ls = (float *)(dOs + 2 * TILE * LD), *Ds = Ls + 2 * TILE;                           /* [2][64] each */
    const int kb = blockIdx.x, kvh = blockIdx.y, seq = blockIdx.z, j0 = kb * TILE;
    const int nqb = (g.S + TILE - 1) / TILE, nq = nqb - kb, iters = g.rep * nq;
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, gq = lane >> 2, tq = lane & 3;
    const uint16_t *base = qkv + (size_t)seq * g.S * g.width;
    const uint16_t *dobase = dout + (size_t)seq * g.S * g.qd;
    const uint16_t *dbase = dqkv + (size_t)seq * g.S * g.width;
    /* iteration it: query head kvh * rep + it / nq, query tile kb + it % nq */
    auto stage = [&](int it, int st) {
        const int h = kvh * g.rep + it / nq, i0 = (kb + it % nq) * TILE;
        load_tile_async<HD>(Qs + st * TILE * LD, base + (size_t)h * HD, g.width, i0, g.S);
        load_tile_async<HD>(dOs + st * TILE * LD, dobase + (size_t)h * HD, g.qd, i0, g.S);
        if (threadIdx.x < TILE) {   /* plain loads: visible after the barrier that follows the wait */
            const int i = i0 + threadIdx.x;
            const bool ok = i < g.S;
            Ls[st * TILE + threadIdx.x] = ok ? lse[((size_t)seq * g.heads + h) * g.S + i] : 0.0f;
            Ds[st * TILE + threadIdx.x] = ok ? *(const float *)(dbase + (size_t)i * g.width + (size_t)h * HD) : 0.0f;
        }
    };
    load_tile_async<HD>(Ks, base + (size_t)(g.heads + kvh) * HD, g.width, j0, g.S);
    load_tile_async<HD>(Vs, base + (size_t)(g.heads + g.kv_heads + kvh) * HD, g.width, j0, g.S);
    stage(0, 0);
    cp_async_commit();

    float dk[ND][4], dv[ND][4];
    #pragma unroll
    for (int n = 0; n < ND; n++)
        #pragma unroll
        for (int e = 0; e < 4; e++) dk[n][e] = dv[n][e] = 0.0f;
    const int k_lo = warp * 16 + gq;   /* the tile-local key of accumulator elements 0, 1 (2, 3: + 8) */

    for (int it = 0; it < iters; it++) {
        const int st = it & 1;
        if (it + 1 < iters) stage(it + 1, st ^ 1);
        cp_async_commit();
        cp_async_wait<1>();
        __syncthreads();
        const int qb = kb + it % nq, i0 = qb * TILE;
        const bool diag = qb == kb;
        const uint16_t *Qt = Qs + st * TILE * LD, *dOt = dOs + st * TILE * LD;
        const float *Lt = Ls + st * TILE, *Dt = Ds + st * TILE;
        #pragma unroll 1
        for (int ch = 0; ch < 2; ch++) {   /* 32 query rows at a time: fewer live registers */
            const int r0 = ch * 32;
            /* warp-uniform skips of chunks that contribute exactly nothing: every row before
             * the warp's first key (diagonal tile), or every row past S */
            if ((diag && r0 + 31 < warp * 16) || i0 + r0 >= g.S) continue;
            /* S^T = K Q^T: 16 keys x 32 rows, 4 n tiles of 8 rows */
            float s[4][4], dp[4][4];
            #pragma unroll
            for (int n = 0; n < 4; n++)
                #pragma unroll
                for (int e = 0; e < 4; e++) s[n][e] = dp[n][e] = 0.0f;
            #pragma unroll
            for (int kk = 0; kk < KD; kk++) {
                uint32_t a[4], b[4];
                ldsm_x4(a, frag_a<LD>(Ks, warp * 16, kk * 16, lane));
                #pragma unroll
                for (int np = 0; np < 2; np++) {
                    ldsm_x4(b, frag_b_nk<LD>(Qt, r0 + np * 16, kk * 16, lane));
                    mma_bf16(s[2 * np], a, b[0], b[1]);
                    mma_bf16(s[2 * np + 1], a, b[2], b[3]);
                }
            }
            /* P^T = exp(scale s - lse) where the row sees the key */
            #pragma unroll
            for (int n = 0; n < 4; n++)
                #pragma unroll
                for (int e = 0; e < 4; e++) {
                    const int r = r0 + n * 8 + 2 * tq + (e & 1), c = k_lo + (e >> 1) * 8;
                    const bool valid = i0 + r < g.S && (!diag || c <= r);   /* j <= i < S */
                    s[n][e] = valid ? __expf(s[n][e] * g.scale - Lt[r]) : 0.0f;
                }
            /* dV += P^T dO: k steps of 16 rows, A from the accumulators, dO read as B[row][dim] */
            #pragma unroll
            for (int kt = 0; kt < 2; kt++) {
                uint32_t a[4];
                a[0] = pack_bf16(s[2 * kt][0], s[2 * kt][1]);
                a[1] = pack_bf16(s[2 * kt][2], s[2 * kt][3]);
                a[2] = pack_bf16(s[2 * kt + 1][0], s[2 * kt + 1][1]);
                a[3] = pack_bf16(s[2 * kt + 1][2], s[2 * kt + 1][3]);
                #pragma unroll
                for (int d2 = 0; d2 < ND / 2; d2++) {
                    uint32_t b[4];
                    ldsm_x4_trans(b, frag_a<LD>(dOt, r0 + kt * 16, d2 * 16, lane));
                    mma_bf16(dv[2 * d2], a, b[0], b[1]);
                    mma_bf16(dv[2 * d2 + 1], a, b[2], b[3]);
                }
            }
            /* dP^T = V dO^T, then dS^T = P^T (dP^T - D) from the unrounded P */
            #pragma unroll
            for (int kk = 0; kk < KD; kk++) {
                uint32_t a[4], b[4];
                ldsm_x4(a, frag_a<LD>(Vs, warp * 16, kk * 16, lane));
                #pragma unroll
                for (int np = 0; np < 2; np++) {
                    ldsm_x4(b, frag_b_nk<LD>(dOt, r0 + np * 16, kk * 16, lane));
                    mma_bf16(dp[2 * np], a, b[0], b[1]);
                    mma_bf16(dp[2 * np + 1], a, b[2], b[3]);
                }
            }
            #pragma unroll
            for (int n = 0; n < 4; n++)
                #pragma unroll
                for (int e = 0; e < 4; e++) dp[n][e] = s[n][e] * (dp[n][e] - Dt[r0 + n * 8 + 2 * tq + (e & 1)]);
            /* dK += dS^T Q, as dV */
            #pragma unroll
            for (int kt = 0; kt < 2; kt++) {
                uint32_t a[4];
                a[0] = pack_bf16(dp[2 * kt][0], dp[2 * kt][1]);
                a[1] = pack_bf16(dp[2 * kt][2], dp[2 * kt][3]);
                a[2] = pack_bf16(dp[2 * kt + 1][0], dp[2 * kt + 1][1]);
                a[3] = pack_bf16(dp[2 * kt + 1][2], dp[2 * kt + 1][3]);
                #pragma unroll
                for (int d2 = 0; d2 < ND / 2; d2++) {
                    uint32_t b[4];
                    ldsm_x4_trans(b, frag_a<LD>(Qt, r0 + kt * 16, d2 * 16, lane));
                    mma_bf16(dk[2 * d2], a, b[0], b[1]);
                    mma_bf16(dk[2 * d2 + 1], a, b[2], b[3]);
                }
            }
        }
        __syncthreads();   /* this stage is reloaded by the next iteration's prefetch */
    }
    #pragma unroll
    for (int half = 0; half < 2; half++) {
        const int j = j0 + k_lo + half * 8;
        if (j >= g.S) continue;
        uint16_t *row = dqkv + ((size_t)seq * g.S + j) * g.width;
        uint16_t *dkrow = row + (size_t)(g.heads + kvh) * HD, *dvrow = row + (size_t)(g.heads + g.kv_heads + kvh) * HD;
        #pragma unroll
        for (int n = 0; n < ND; n++) {
            *(uint32_t *)(dkrow + n * 8 + 2 * tq) =
                pack_stored(dk[n][2 * half] * g.scale, dk[n][2 * half + 1] * g.scale);
            *(uint32_t *)(dvrow + n * 8 + 2 * tq) = pack_stored(dv[n][2 * half], dv[n][2 * half + 1]);
        }
    }
}

template <int HD>
static size_t tc_backward_q_smem(void) {
    return (size_t)6 * TILE * (HD + 8) * sizeof(uint16_t) + 2 * TILE * sizeof(float);
}

/* 3. dQ of query tile (reversed blockIdx.x) of head blockIdx.y of sequence blockIdx.z. */
template <int HD>
static __global__ void __launch_bounds__(TC_THREADS, 2) tc_backward_q_kernel(uint16_t *dqkv, const uint16_t *dout,
                                                                          const float *lse, const uint16_t *qkv,
                                                                          TcGeo g) {
    constexpr int LD = HD + 8, KD = HD / 16, ND = HD / 8;
    extern __shared__ __align__(16) uint16_t tsm[];
    uint16_t *Qs = tsm, *dOs = Qs + TILE * LD, *Ks = dOs + TILE * LD, *Vs = Ks + 2 * TILE * LD;   /* K, V: 2 stages */
    float *Ls = (float *)(Vs + 2 * TILE * LD), *Ds = Ls + TILE;
    const int nqb = (g.S + TILE - 1) / TILE, qb = nqb - 1 - (int)blockIdx.x;
    const int h = blockIdx.y, seq = blockIdx.z, kvh = h / g.rep, i0 = qb * TILE;
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, gq = lane >> 2, tq = lane & 3;
    const uint16_t *base = qkv + (size_t)seq * g.S * g.width;
    const uint16_t *kbase = base + (size_t)(g.heads + kvh) * HD;
    const uint16_t *vbase = base + (size_t)(g.heads + g.kv_heads + kvh) * HD;
    uint16_t *dbase = dqkv + (size_t)seq * g.S * g.width;
    load_tile_async<HD>(Qs, base + (size_t)h * HD, g.width, i0, g.S);
    load_tile_async<HD>(dOs, dout + (size_t)seq * g.S * g.qd + (size_t)h * HD, g.qd, i0, g.S);
    load_tile_async<HD>(Ks, kbase, g.width, 0, g.S);
    load_tile_async<HD>(Vs, vbase, g.width, 0, g.S);
    cp_async_commit();
    if (threadIdx.x < TILE) {   /* D from this block's own dq slots, read before they are written */
        const int i = i0 + threadIdx.x;
        const bool ok = i < g.S;
        Ls[threadIdx.x] = ok ? lse[((size_t)seq * g.heads + h) * g.S + i] : 0.0f;
        Ds[threadIdx.x] = ok ? *(const float *)(dbase + (size_t)i * g.width + (size_t)h * HD) : 0.0f;
    }
    float dq[ND][4];
    #pragma unroll
    for (int n = 0; n < ND; n++) dq[n][0] = dq[n][1] = dq[n][2] = dq[n][3] = 0.0f;
    const int r_lo = warp * 16 + gq;
    float L[2] = {0.0f, 0.0f}, D[2] = {0.0f, 0.0f};

    for (int kb = 0; kb <= qb; kb++) {
        const int st = kb & 1;
        if (kb < qb) {
            load_tile_async<HD>(Ks + (st ^ 1) * TILE * LD, kbase, g.width, (kb + 1) * TILE, g.S);
            load_tile_async<HD>(Vs + (st ^ 1) * TILE * LD, vbase, g.width, (kb + 1) * TILE, g.S);
        }
        cp_async_commit();
        cp_async_wait<1>();
        __syncthreads();
        if (kb == 0) {
            L[0] = Ls[r_lo]; L[1] = Ls[r_lo + 8];
            D[0] = Ds[r_lo]; D[1] = Ds[r_lo + 8];
        }
        const uint16_t *Kt = Ks + st * TILE * LD, *Vt = Vs + st * TILE * LD;
        /* S = Q K^T and dP = dO V^T: 16 rows x 64 keys */
        float s[8][4], dp[8][4];
        #pragma unroll
        for (int n = 0; n < 8; n++)
            #pragma unroll
            for (int e = 0; e < 4; e++) s[n][e] = dp[n][e] = 0.0f;
        #pragma unroll
        for (int kk = 0; kk < KD; kk++) {
            uint32_t a[4], b[4];
            ldsm_x4(a, frag_a<LD>(Qs, warp * 16, kk * 16, lane));
            #pragma unroll
            for (int np = 0; np < 4; np++) {
                ldsm_x4(b, frag_b_nk<LD>(Kt, np * 16, kk * 16, lane));
                mma_bf16(s[2 * np], a, b[0], b[1]);
                mma_bf16(s[2 * np + 1], a, b[2], b[3]);
            }
            ldsm_x4(a, frag_a<LD>(dOs, warp * 16, kk * 16, lane));
            #pragma unroll
            for (int np = 0; np < 4; np++) {
                ldsm_x4(b, frag_b_nk<LD>(Vt, np * 16, kk * 16, lane));
                mma_bf16(dp[2 * np], a, b[0], b[1]);
                mma_bf16(dp[2 * np + 1], a, b[2], b[3]);
            }
        }
        const bool diag = kb == qb;
        #pragma unroll
        for (int n = 0; n < 8; n++)
            #pragma unroll
            for (int e = 0; e < 4; e++) {
                const int c = n * 8 + 2 * tq + (e & 1), r = r_lo + (e >> 1) * 8;
                const bool valid = i0 + r < g.S && (!diag || c <= r);
                const float p = valid ? __expf(s[n][e] * g.scale - L[e >> 1]) : 0.0f;
                dp[n][e] = p * (dp[n][e] - D[e >> 1]);
            }
        /* dQ += dS K: k steps of 16 keys, dS from the accumulators, K read as [key][dim] = B[k][n] */
        #pragma unroll
        for (int kt = 0; kt < 4; kt++) {
            uint32_t a[4];
            a[0] = pack_bf16(dp[2 * kt][0], dp[2 * kt][1]);
            a[1] = pack_bf16(dp[2 * kt][2], dp[2 * kt][3]);
            a[2] = pack_bf16(dp[2 * kt + 1][0], dp[2 * kt + 1][1]);
            a[3] = pack_bf16(dp[2 * kt + 1][2], dp[2 * kt + 1][3]);
            #pragma unroll
            for (int d2 = 0; d2 < ND / 2; d2++) {
                uint32_t b[4];
                ldsm_x4_trans(b, frag_a<LD>(Kt, kt * 16, d2 * 16, lane));
                mma_bf16(dq[2 * d2], a, b[0], b[1]);
                mma_bf16(dq[2 * d2 + 1], a, b[2], b[3]);
            }
        }
        __syncthreads();
    }
    #pragma unroll
    for (int half = 0; half < 2; half++) {
        const int i = i0 + r_lo + half * 8;
        if (i >= g.S) continue;
        uint16_t *row = dbase + (size_t)i * g.width + (size_t)h * HD;
        #pragma unroll
        for (int n = 0; n < ND; n++)
            *(uint32_t *)(row + n * 8 + 2 * tq) = pack_stored(dq[n][2 * half] * g.scale, dq[n][2 * half + 1] * g.scale);
    }
}

/* ---- launchers ---- */
#ifndef WC_TC_HOST_EMULATION

int wc_attention_tc_supported(int hd) { return hd == 64 || hd == 128; }

template <int HD>
static void tc_setup_hd(void) {
    CUDA_CHECK(cudaFuncSetAttribute(tc_forward_kernel<HD>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                    (int)tc_forward_smem<HD>()));
    CUDA_CHECK(cudaFuncSetAttribute(tc_backward_kv_kernel<HD>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                    (int)tc_backward_kv_smem<HD>()));
    CUDA_CHECK(cudaFuncSetAttribute(tc_backward_q_kernel<HD>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                    (int)tc_backward_q_smem<HD>()));
}

void wc_attention_tc_setup(int hd) {
    if (hd == 64) tc_setup_hd<64>();
    else if (hd == 128) tc_setup_hd<128>();
}

template <int HD>
static void tc_forward_hd(uint16_t *out, float *lse, const uint16_t *qkv, int G, const TcGeo &g, cudaStream_t s) {
    dim3 grid((g.S + TILE - 1) / TILE, g.heads, G);
    tc_forward_kernel<HD><<<grid, TC_THREADS, tc_forward_smem<HD>(), s>>>(out, lse, qkv, g);
    CUDA_CHECK_LAUNCH("tc_forward_kernel");
}

template <int HD>
static void tc_backward_hd(uint16_t *dqkv, const uint16_t *dout, const uint16_t *out, const float *lse,
                           const uint16_t *qkv, int G, const TcGeo &g, cudaStream_t s) {
    const size_t T = (size_t)G * g.S, warps = T * g.heads;
    tc_row_dot_kernel<HD><<<(unsigned)((warps + 7) / 8), 256, 0, s>>>(dqkv, dout, out, T, g);
    CUDA_CHECK_LAUNCH("tc_row_dot_kernel");
    dim3 gkv((g.S + TILE - 1) / TILE, g.kv_heads, G), gq((g.S + TILE - 1) / TILE, g.heads, G);
    tc_backward_kv_kernel<HD><<<gkv, TC_THREADS, tc_backward_kv_smem<HD>(), s>>>(dqkv, dout, lse, qkv, g);
    CUDA_CHECK_LAUNCH("tc_backward_kv_kernel");
    tc_backward_q_kernel<HD><<<gq, TC_THREADS, tc_backward_q_smem<HD>(), s>>>(dqkv, dout, lse, qkv, g);
    CUDA_CHECK_LAUNCH("tc_backward_q_kernel");
}

static void tc_unsupported(int hd) {
    fprintf(stderr, "attention: head_dim %d has no tensor-core kernel (wc_attention_tc_supported says so)\n", hd);
    abort();
}

void wc_attention_tc_forward(uint16_t *out, float *lse, const uint16_t *qkv, int G, int S, int heads, int kv_heads,
                             int hd, cudaStream_t s) {
    if (G == 0 || S == 0) return;
    TcGeo g = tc_geo(S, heads, kv_heads, hd);
    if (hd == 64) tc_forward_hd<64>(out, lse, qkv, G, g, s);
    else if (hd == 128) tc_forward_hd<128>(out, lse, qkv, G, g, s);
    else tc_unsupported(hd);
}

void wc_attention_tc_backward(uint16_t *dqkv, const uint16_t *dout, const uint16_t *out, const float *lse,
                              const uint16_t *qkv, int G, int S, int heads, int kv_heads, int hd, cudaStream_t s) {
    if (G == 0 || S == 0) return;
    TcGeo g = tc_geo(S, heads, kv_heads, hd);
    if (hd == 64) tc_backward_hd<64>(dqkv, dout, out, lse, qkv, G, g, s);
    else if (hd == 128) tc_backward_hd<128>(dqkv, dout, out, lse, qkv, G, g, s);
    else tc_unsupported(hd);
}
#endif /* WC_TC_HOST_EMULATION */
