/* Ring attention's CUDA block kernels (runtime/cuda/attention_block_cuda.cu) run on the CPU,
 * without a GPU, against the CPU's block kernels (runtime/cpu/attention_block.c): a check of the
 * kernels' indices, masks, strides and warp sums on a machine that has no GPU. The same blocks as
 * tests/gpu/test_kernels.cu's test_attention_block (a member's two chunks: diagonal, full, merged,
 * then each block's backward), smaller, and the same tolerances.
 *
 * How: the kernels' source is included with WC_BLOCK_HOST_EMULATION defined (which leaves out its
 * launchers) and CUDA's keywords defined away. The kernels share nothing between warps (no shared
 * memory, no __syncthreads), so each warp runs alone: its 32 lanes as fibers (ucontext) taken in
 * turn, each yielding at a warp collective; a shuffle is write, yield (every lane has written),
 * read, yield (every lane has read), and __syncwarp one yield.
 *
 * Build and run (from the repository root, after `make`):
 *   make build/tests/test_attention_block_emulated   (a unit test of make test)
 * Exit 1 if any check fails. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <ucontext.h>
#include <functional>
#include <vector>
#include <omp.h>
extern "C" {
#include "common/precision.h"
#include "cpu/kernels.h"
}

/* ---- the CUDA the kernels use, on the host ---- */

struct Dim3 { unsigned x, y, z; };
static Dim3 threadIdx, blockIdx;

static ucontext_t sched_ctx, lane_ctx[32];
static std::vector<char> stacks[32];
static bool alive[32];
static int cur_lane;
static std::function<void()> body;
static float shfl_slot[32];

static void yield_lane(void) { swapcontext(&lane_ctx[cur_lane], &sched_ctx); }
static float __shfl_xor_sync(unsigned, float v, int o) {
    const int l = cur_lane;
    shfl_slot[l] = v;
    yield_lane();
    float r = shfl_slot[l ^ o];
    yield_lane();
    return r;
}
static void __syncwarp(void) { yield_lane(); }
static float bf16_to_f32(uint16_t h) { return wp_bf16_to_f32(h); }

static void trampoline(void) { body(); alive[cur_lane] = false; }

/* Runs warp w of the current block: its lanes in turn until every one has returned. */
static void run_warp(unsigned w) {
    for (int l = 0; l < 32; l++) {
        stacks[l].resize(1 << 16);
        getcontext(&lane_ctx[l]);
        lane_ctx[l].uc_stack.ss_sp = stacks[l].data();
        lane_ctx[l].uc_stack.ss_size = stacks[l].size();
        lane_ctx[l].uc_link = &sched_ctx;
        makecontext(&lane_ctx[l], trampoline, 0);
        alive[l] = true;
    }
    for (bool any = true; any;) {
        any = false;
        for (int l = 0; l < 32; l++)
            if (alive[l]) {
                cur_lane = l;
                threadIdx = Dim3{ w * 32 + (unsigned)l, 0, 0 };
                swapcontext(&sched_ctx, &lane_ctx[l]);
                any |= alive[l];
            }
    }
}

#define WC_BLOCK_HOST_EMULATION 1
#define WP_COMMON_CUDA_CUH    /* the two headers are CUDA's; what the kernels need is above */
#define WP_KERNELS_CUDA_CUH
#define __global__
#define __device__
#define __forceinline__ inline
#define __launch_bounds__(...)
#include "cuda/attention_block_cuda.cu"

/* A launch of gx x gy blocks of THREADS threads, the kernel given as a call. */
static void launch(unsigned gx, unsigned gy, const std::function<void()> &kernel) {
    body = kernel;
    for (unsigned y = 0; y < gy; y++)
        for (unsigned x = 0; x < gx; x++) {
            blockIdx = Dim3{ x, y, 0 };
            for (unsigned w = 0; w < WARPS; w++) run_warp(w);
        }
}

/* ---- the check ---- */

static int failures, checks;
static uint64_t rng = 20261203;
static float urand(void) {   /* uniform in [-1, 1) */
    rng = rng * 6364136223846793005ull + 1442695040888963407ull;
    return (float)((double)(rng >> 11) / 4503599627370496.0 - 1.0);
}

/* max |emu - cpu| / max(|cpu|, floor) within ulps fp32 ulps; floor the rms of cpu, or 0 */
static void check(const char *name, const std::vector<float> &emu, const std::vector<float> &cpu, double ulps, int rms_floor) {
    double s = 0, worst = 0;
    size_t k = 0;
    for (float x : cpu) if (x != 0 && isfinite(x)) { s += (double)x * x; k++; }
    double fl = rms_floor && k ? sqrt(s / k) : 0;
    int bad = 0;
    for (size_t i = 0; i < cpu.size(); i++) {
        double d = fabs((double)emu[i] - cpu[i]), den = fmax(fabs((double)cpu[i]), fl);
        if (isinf(cpu[i]) && emu[i] == cpu[i]) d = 0;
        double rel = d == 0 ? 0 : den > 0 ? d / den : INFINITY;
        if (!(rel <= worst)) worst = rel;
    }
    bad = !(worst <= ulps * ldexp(1.0, -23));
    checks++;
    failures += bad;
    printf("%-4s %-44s max rel %.3e (%.1f ulps; tolerance %g fp32 ulps)\n", bad ? "FAIL" : "ok", name, worst,
           worst / ldexp(1.0, -23), ulps);
}

static std::vector<uint16_t> bits(const std::vector<float> &v) {
    std::vector<uint16_t> b(v.size());
    for (size_t i = 0; i < v.size(); i++) b[i] = wp_f32_to_bf16(v[i]);
    return b;
}

static void test_block(int L, int heads, int kv, int hd) {
    const int width = (heads + 2 * kv) * hd, qd = heads * hd, kvw = 2 * kv * hd, S = 2 * L, nt = omp_get_max_threads();
    std::vector<float> qkv((size_t)S * width), kvp((size_t)S * kvw), dO((size_t)S * qd);
    for (float &x : qkv) x = wp_bf16_round(1.5f * urand());
    for (float &x : dO) x = wp_bf16_round(urand());
    for (int t = 0; t < S; t++) memcpy(&kvp[(size_t)t * kvw], &qkv[(size_t)t * width + qd], (size_t)kvw * sizeof(float));
    const int blocks[3][3] = { { 0, 0, 1 }, { 1, 0, 0 }, { 1, 1, 1 } };   /* query chunk, K/V chunk, diagonal */
    /* the CPU */
    std::vector<float> out((size_t)S * qd, 0.0f), lse((size_t)heads * S, -INFINITY), bo((size_t)L * qd), bl((size_t)heads * L);
    std::vector<float> dq((size_t)S * width, 0.0f), dkv((size_t)S * kvw, 0.0f);
    std::vector<float> work(attention_block_work_floats(L, L, heads, kv, hd, nt));
    for (auto &b : blocks) {
        attention_block_forward(bo.data(), bl.data(), L, &qkv[(size_t)b[0] * L * width], width, &kvp[(size_t)b[1] * L * kvw],
                                kvw, L, L, heads, kv, hd, b[2], work.data(), nt);
        attention_block_merge(&out[(size_t)b[0] * L * qd], &lse[(size_t)b[0] * L], S, bo.data(), bl.data(), L, L, heads, hd, nt);
    }
    for (auto &b : blocks)
        attention_block_backward(&dq[(size_t)b[0] * L * width], width, &dkv[(size_t)b[1] * L * kvw], kvw,
                                 &dO[(size_t)b[0] * L * qd], &out[(size_t)b[0] * L * qd], &lse[(size_t)b[0] * L], S,
                                 &qkv[(size_t)b[0] * L * width], width, &kvp[(size_t)b[1] * L * kvw], kvw, L, L, heads,
                                 kv, hd, b[2], work.data(), nt);
    /* the kernels, as the launchers call them */
    std::vector<uint16_t> gq = bits(qkv), gkv = bits(kvp), gdo = bits(dO);
    std::vector<float> gout((size_t)S * qd, 0.0f), glse((size_t)heads * S, -INFINITY), gbo((size_t)L * qd), gbl((size_t)heads * L);
    std::vector<float> gD((size_t)heads * L), gdq((size_t)S * width, 0.0f), gdkv((size_t)S * kvw, 0.0f);
    const unsigned rows = (L + WARPS - 1) / WARPS;
    for (auto &b : blocks) {
        BlockGeo g = { L, L, heads, kv, hd, heads / kv, b[2], width, kvw, 1.0f / sqrtf((float)hd) };
        const uint16_t *q = &gq[(size_t)b[0] * L * width], *k = &gkv[(size_t)b[1] * L * kvw];
        launch(rows, heads, [&] { block_forward_kernel(gbo.data(), gbl.data(), L, q, k, g); });
        float *o = &gout[(size_t)b[0] * L * qd], *l = &glse[(size_t)b[0] * L];
        launch(rows, heads, [&] { block_merge_kernel(o, l, S, gbo.data(), gbl.data(), L, L, heads, hd); });
    }
    for (auto &b : blocks) {
        BlockGeo g = { L, L, heads, kv, hd, heads / kv, b[2], width, kvw, 1.0f / sqrtf((float)hd) };
        const uint16_t *q = &gq[(size_t)b[0] * L * width], *k = &gkv[(size_t)b[1] * L * kvw], *d = &gdo[(size_t)b[0] * L * qd];
        const float *o = &gout[(size_t)b[0] * L * qd], *l = &glse[(size_t)b[0] * L];
        float *dqb = &gdq[(size_t)b[0] * L * width], *dkvb = &gdkv[(size_t)b[1] * L * kvw];
        launch(rows, heads, [&] { block_delta_kernel(gD.data(), d, o, L, heads, hd); });
        launch(rows, heads, [&] { block_backward_q_kernel(dqb, width, d, l, S, gD.data(), q, k, g); });
        launch(rows, kv, [&] { block_backward_kv_kernel(dkvb, kvw, d, l, S, gD.data(), q, k, g); });
    }
    char name[120];
    const double ulps = 4.0 * (S + hd);
    snprintf(name, sizeof name, "attention block L%d h%d kv%d hd%d: out", L, heads, kv, hd);
    check(name, gout, out, ulps, 1);
    snprintf(name, sizeof name, "attention block L%d h%d kv%d hd%d: lse", L, heads, kv, hd);
    check(name, glse, lse, ulps, 0);
    snprintf(name, sizeof name, "attention block L%d h%d kv%d hd%d: dq", L, heads, kv, hd);
    check(name, gdq, dq, 2 * ulps, 1);
    snprintf(name, sizeof name, "attention block L%d h%d kv%d hd%d: dkv", L, heads, kv, hd);
    check(name, gdkv, dkv, 2 * ulps, 1);
}

int main(void) {
    /* small: a lane switch costs a system call (swapcontext's signal mask) */
    test_block(12, 4, 2, 16);    /* GQA, a head dimension under one lane's worth */
    test_block(9, 2, 2, 72);     /* MHA, three lanes' worth of head dimension, the last partial; rows past n */
    test_block(6, 3, 1, 128);    /* multi-query, the largest head dimension */
    printf("test_attention_block_emulated: %d checks, %d failed\n", checks, failures);
    return failures ? 1 : 0;
}
