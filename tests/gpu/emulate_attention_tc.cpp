/* The tensor-core attention kernels (runtime/cuda/attention_tc_cuda.cu) run on the CPU, without a
 * GPU, against the CPU runtime's bf16 reference: a check of every index, fragment layout and
 * barrier of those kernels on a machine that has no GPU. Slow (a thread per CUDA thread), so small
 * shapes only; the same shapes and tolerances as tests/gpu/test_kernels.cu's tensor-core checks.
 *
 * How: the kernels' source is included with WC_TC_HOST_EMULATION defined, CUDA's keywords defined
 * away, and the PTX wrappers written here from the PTX ISA's definitions (independently of the
 * kernels' use of them): ldmatrix .m8n8 .x4 (lanes 8i..8i+7 give the row addresses of matrix i;
 * lane l receives row l/4, columns 2(l%4), 2(l%4)+1, or with .trans column l/4 of rows 2(l%4),
 * 2(l%4)+1), mma .m16n8k16 .bf16 (A: a register r of lane l holds row l/4 + 8 (r & 1), columns
 * 2(l%4) + 8 (r >> 1) and + 1; B: register r holds rows 2(l%4) + 8r and + 1 of column l/4; C:
 * element e is row l/4 + 8 (e >> 1), column 2(l%4) + (e & 1)), warp shuffles. Each block's
 * threads run as host threads with real barriers for __syncthreads and for the warp collectives;
 * cp.async copies at once (the barriers order them; a missing cp.async.wait is not caught here).
 *
 * Build and run (from the repository root, after `make`):
 *   make build/tests/test_attention_tc_emulated   (a unit test of make test), or by hand:
 *   g++ -std=c++17 -O1 -pthread -fno-strict-aliasing -Wno-unknown-pragmas -Iruntime tests/gpu/emulate_attention_tc.cpp \
 *       build/libwprt-cpu.a build/libwprt-common.a -fopenmp -lm -o build/emulate_attention_tc
 *   build/emulate_attention_tc
 * Exit 1 if any check fails. */
#include <condition_variable>
#include <math.h>
#include <mutex>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <thread>
#include <vector>
#include <omp.h>
extern "C" {
#include "common/precision.h"
#include "cpu/kernels.h"
}

/* ---- the CUDA the kernels use, on the host ---- */

struct Dim3 { unsigned x, y, z; };
static thread_local Dim3 threadIdx;
static Dim3 blockIdx, blockDim;

/* A reusable barrier of n threads. */
struct Barrier {
    std::mutex mu;
    std::condition_variable cv;
    int n = 0, waiting = 0;
    unsigned long gen = 0;
    void wait() {
        std::unique_lock<std::mutex> lk(mu);
        unsigned long g = gen;
        if (++waiting == n) { waiting = 0; gen++; cv.notify_all(); return; }
        cv.wait(lk, [&] { return gen != g; });
    }
};
enum { MAX_WARPS = 8 };
static Barrier block_barrier, warp_barrier[MAX_WARPS];
/* what the lanes of a warp exchange in a collective */
struct WarpShared {
    const uint16_t *addr[32];
    uint32_t a[32][4], b[32][2];
    float f[32];
};
static WarpShared warp_shared[MAX_WARPS];

static void __syncthreads(void) { block_barrier.wait(); }
static int lane_id(void) { return threadIdx.x % 32; }
static WarpShared &my_warp(void) { return warp_shared[threadIdx.x / 32]; }
static void warp_sync(void) { warp_barrier[threadIdx.x / 32].wait(); }

static float __shfl_xor_sync(unsigned, float v, int o) {
    WarpShared &w = my_warp();
    w.f[lane_id()] = v;
    warp_sync();
    float r = w.f[lane_id() ^ o];
    warp_sync();
    return r;
}
#define __expf(x) expf(x)   /* ex2.approx on the device; within the tolerances either way */

static float bf16_to_f32(uint16_t h) {
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}
static uint16_t f32_to_bf16(float f) { return wp_f32_to_bf16(f); }

/* ---- the PTX wrappers, from the PTX ISA ---- */

static void cp_async16(void *dst, const void *src, bool valid) {
    if (valid) memcpy(dst, src, 16);
    else memset(dst, 0, 16);
}
static void cp_async_commit(void) {}
template <int N>
static void cp_async_wait(void) {}

static uint32_t two(uint16_t lo, uint16_t hi) { return (uint32_t)lo | ((uint32_t)hi << 16); }

static void ldsm_x4(uint32_t r[4], const uint16_t *p) {
    WarpShared &w = my_warp();
    int l = lane_id();
    w.addr[l] = p;
    warp_sync();
    for (int i = 0; i < 4; i++) {
        const uint16_t *row = w.addr[8 * i + l / 4];
        r[i] = two(row[2 * (l % 4)], row[2 * (l % 4) + 1]);
    }
    warp_sync();
}
static void ldsm_x4_trans(uint32_t r[4], const uint16_t *p) {
    WarpShared &w = my_warp();
    int l = lane_id();
    w.addr[l] = p;
    warp_sync();
    for (int i = 0; i < 4; i++)
        r[i] = two(w.addr[8 * i + 2 * (l % 4)][l / 4], w.addr[8 * i + 2 * (l % 4) + 1][l / 4]);
    warp_sync();
}
static uint16_t half_of(uint32_t v, int hi) { return (uint16_t)(hi ? v >> 16 : v & 0xFFFF); }
/* A[m][k] of the warp's fragments: lane (m % 8) * 4 + (k % 8) / 2, register (m >= 8) + 2 (k >= 8),
 * half k % 2 */
static float frag_A(const WarpShared &w, int m, int k) {
    return bf16_to_f32(half_of(w.a[(m % 8) * 4 + (k % 8) / 2][(m >= 8) + 2 * (k >= 8)], k % 2));
}
/* B[k][n]: lane n * 4 + (k % 8) / 2, register k >= 8, half k % 2 */
static float frag_B(const WarpShared &w, int k, int n) {
    return bf16_to_f32(half_of(w.b[n * 4 + (k % 8) / 2][k >= 8], k % 2));
}
static void mma_bf16(float c[4], const uint32_t a[4], uint32_t b0, uint32_t b1) {
    WarpShared &w = my_warp();
    int l = lane_id();
    for (int i = 0; i < 4; i++) w.a[l][i] = a[i];
    w.b[l][0] = b0;
    w.b[l][1] = b1;
    warp_sync();
    for (int e = 0; e < 4; e++) {
        int m = l / 4 + 8 * (e >> 1), n = 2 * (l % 4) + (e & 1);
        float acc = 0.0f;
        for (int k = 0; k < 16; k++) acc += frag_A(w, m, k) * frag_B(w, k, n);
        c[e] += acc;
    }
    warp_sync();
}
static uint32_t pack_bf16(float lo, float hi) { return two(f32_to_bf16(lo), f32_to_bf16(hi)); }
static uint32_t pack_stored(float lo, float hi) { return two(f32_to_bf16(lo), f32_to_bf16(hi)); }

/* ---- the kernels ---- */

#define WC_TC_HOST_EMULATION 1
#define WP_COMMON_CUDA_CUH    /* the two headers are CUDA's; what the kernels need is above */
#define WP_KERNELS_CUDA_CUH
#define __global__
#define __device__
#define __forceinline__ inline
#define __launch_bounds__(...)
#define __shared__
#define __align__(n)   /* tsm below is aligned */
/* the block's shared memory: blocks run one at a time, so one array serves them all, and the
 * kernels' `extern __shared__ __align__(16) uint16_t tsm[];` declares it */
alignas(16) uint16_t tsm[160 * 1024];
#include "cuda/attention_tc_cuda.cu"

static int failures, checks;

/* Runs body once per thread of every block of grid, a block at a time, with smem bytes of shared
 * memory: what lies past them is a canary that must come back untouched. */
template <class F>
static void launch(Dim3 grid, int threads, size_t smem, F body) {
    const size_t cap = sizeof tsm;
    if (smem > cap) { printf("FAIL shared memory %zu bytes: more than the emulation's %zu\n", smem, cap); failures++; return; }
    memset((char *)tsm + smem, 0xA5, cap - smem);
    block_barrier.n = threads;
    for (int i = 0; i < threads / 32; i++) warp_barrier[i].n = 32;
    blockDim = Dim3{(unsigned)threads, 1, 1};
    for (unsigned z = 0; z < grid.z; z++)
        for (unsigned y = 0; y < grid.y; y++)
            for (unsigned x = 0; x < grid.x; x++) {
                blockIdx = Dim3{x, y, z};
                std::vector<std::thread> ts;
                for (int t = 0; t < threads; t++)
                    ts.emplace_back([=] { threadIdx = Dim3{(unsigned)t, 0, 0}; body(); });
                for (auto &t : ts) t.join();
            }
    size_t bad = 0;
    for (size_t i = smem; i < cap; i++) bad += ((unsigned char *)tsm)[i] != 0xA5;
    checks++;
    if (bad) { printf("FAIL %zu bytes written past the %zu bytes of shared memory\n", bad, smem); failures++; }
}

/* ---- checks ---- */

static uint64_t rng = 20261130;
static double urand(void) {
    rng = rng * 6364136223846793005ull + 1442695040888963407ull;
    return (double)(rng >> 11) / 9007199254740992.0 * 2.0 - 1.0;
}
static std::vector<float> rand_bf16(size_t n, double scale) {
    std::vector<float> v(n);
    for (auto &x : v) x = bf16_to_f32(f32_to_bf16((float)(urand() * scale)));
    return v;
}
static std::vector<uint16_t> bits(const std::vector<float> &v) {
    std::vector<uint16_t> b(v.size());
    for (size_t i = 0; i < v.size(); i++) b[i] = f32_to_bf16(v[i]);
    return b;
}
/* As test_kernels.cu: the largest |a - b| / max(|b|, rms(b)) in bf16 or fp32 ulps. */
static void check(const char *name, const std::vector<float> &got, const std::vector<float> &ref, double ulps,
                  bool bf16, bool rms_floor) {
    double ulp = bf16 ? ldexp(1.0, -7) : ldexp(1.0, -23), fl = 0, worst = 0;
    size_t at = 0;
    if (rms_floor) {
        for (float x : ref) fl += (double)x * x;
        fl = sqrt(fl / ref.size());
    }
    for (size_t i = 0; i < ref.size(); i++) {
        double d = fabs((double)got[i] - ref[i]), den = fmax(fabs((double)ref[i]), fl);
        double rel = d == 0 ? 0 : (den > 0 ? d / den : INFINITY);
        if (!(rel <= worst)) { worst = rel; at = i; }
    }
    bool bad = !(worst <= ulps * ulp);
    checks++;
    failures += bad;
    printf("%-4s %-52s %.2f ulps (tolerance %g)%s\n", bad ? "FAIL" : "ok", name, worst / ulp, ulps, "");
    if (bad) printf("     worst at %zu: emulated %.9g reference %.9g\n", at, (double)got[at], (double)ref[at]);
}

template <int HD>
static void run(int G, int S, int heads, int kv) {
    const int hd = HD, T = G * S, width = (heads + 2 * kv) * hd, qd = heads * hd, nt = omp_get_max_threads();
    const TcGeo g = tc_geo(S, heads, kv, hd);
    std::vector<float> qkv = rand_bf16((size_t)T * width, 1.5), out((size_t)T * qd), lse((size_t)G * heads * S);
    std::vector<float> work(attention_work_floats(G, S, heads, kv, hd, nt));
    attention_forward(out.data(), lse.data(), qkv.data(), G, S, heads, kv, hd, work.data(), nt, 1);
    std::vector<uint16_t> qkv16 = bits(qkv), out16(out.size(), 0xFFFF);
    std::vector<float> else_(lse.size(), NAN);
    const int nqb = (S + TILE - 1) / TILE;
    uint16_t *o16 = out16.data();
    float *l32 = else_.data();
    const uint16_t *q16 = qkv16.data();
    launch(Dim3{(unsigned)nqb, (unsigned)heads, (unsigned)G}, TC_THREADS, tc_forward_smem<HD>(),
           [=] { tc_forward_kernel<HD>(o16, l32, q16, g); });
    std::vector<float> eout(out.size());
    for (size_t i = 0; i < out.size(); i++) eout[i] = bf16_to_f32(out16[i]);
    char name[120];
    snprintf(name, sizeof name, "emulated forward G%d S%d h%d kv%d hd%d: out", G, S, heads, kv, hd);
    check(name, eout, out, 4, true, true);
    snprintf(name, sizeof name, "emulated forward G%d S%d h%d kv%d hd%d: lse", G, S, heads, kv, hd);
    check(name, else_, lse, 256, false, false);

    std::vector<float> dO = rand_bf16(out.size(), 1.0), dqkv(qkv.size());
    attention_backward(dqkv.data(), dO.data(), out.data(), lse.data(), qkv.data(), G, S, heads, kv, hd, work.data(),
                       nt, 1);
    std::vector<uint16_t> dO16 = bits(dO), cout16 = bits(out), dqkv16(qkv.size(), 0xFFFF);   /* NaN: unwritten */
    uint16_t *dq16 = dqkv16.data();
    const uint16_t *do16 = dO16.data(), *co16 = cout16.data();
    const float *clse = lse.data();
    const size_t warps = (size_t)T * heads;
    launch(Dim3{(unsigned)((warps + 7) / 8), 1, 1}, 256, 0, [=] { tc_row_dot_kernel<HD>(dq16, do16, co16, T, g); });
    launch(Dim3{(unsigned)nqb, (unsigned)kv, (unsigned)G}, TC_THREADS, tc_backward_kv_smem<HD>(),
           [=] { tc_backward_kv_kernel<HD>(dq16, do16, clse, q16, g); });
    launch(Dim3{(unsigned)nqb, (unsigned)heads, (unsigned)G}, TC_THREADS, tc_backward_q_smem<HD>(),
           [=] { tc_backward_q_kernel<HD>(dq16, do16, clse, q16, g); });
    std::vector<float> ed(dqkv.size());
    for (size_t i = 0; i < ed.size(); i++) ed[i] = bf16_to_f32(dqkv16[i]);
    snprintf(name, sizeof name, "emulated backward G%d S%d h%d kv%d hd%d: dqkv", G, S, heads, kv, hd);
    check(name, ed, dqkv, 8, true, true);
}

int main(void) {
    printf("emulate_attention_tc: the tensor-core attention kernels on the CPU against the bf16 reference\n");
    run<64>(2, 100, 4, 2);    /* S not a multiple of the tile, G > 1, GQA 2 */
    run<64>(1, 130, 8, 2);    /* GQA 4, three tiles */
    run<128>(2, 70, 4, 1);    /* hd 128, GQA 4 */
    run<128>(1, 64, 2, 2);    /* exactly one tile, no GQA */
    printf("emulate_attention_tc: %d checks, %d failed\n", checks, failures);
    return failures ? 1 : 0;
}
