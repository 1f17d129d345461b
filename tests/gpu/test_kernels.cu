/* The CUDA model against the CPU runtime's bf16 reference (runtime/cpu in bf16 mode, whose table
 * of rounding points in cpu/model.c the GPU follows): every kernel on its own (attention in both
 * of its implementations, CUDA cores and tensor cores, each against the CPU, the tensor-core one
 * against the CUDA-core one and against itself run again, and the dispatch between them; ring
 * attention's blocks against the CPU's fp32 ones), the cuBLASLt products (aligned operands and
 * not), and whole chunks (first, middle, last, several layers in one chunk, tied embeddings,
 * chunks without layers, Llama 3.1's RoPE scaling with an explicit head_dim, the MLP in tiles of
 * tokens; with and without recompute), one line per check with the largest absolute and relative
 * error and the tolerance. Exit 1 if any check fails, 0 otherwise; without a CUDA device it says
 * so and exits 0.
 *
 * Build and run (from the repository root, after `make`):
 *   nvcc -O3 -std=c++17 -gencode arch=compute_80,code=sm_80 -gencode arch=compute_90,code=sm_90 \
 *        -Iruntime -Xcompiler -fopenmp tests/gpu/test_kernels.cu \
 *        runtime/cuda/{model_cuda,gemm_cublaslt,attention_cuda,attention_tc_cuda,attention_block_cuda,crossentropy_cuda,embedding_cuda,rmsnorm_cuda,rope_cuda,swiglu_cuda,adamw_cuda,convert_cuda}.cu \
 *        build/libwprt-cpu.a build/libwprt-common.a -o build/gpu/test_kernels \
 *        -lcublasLt -lcublas -lcudart -L/usr/lib/x86_64-linux-gnu/openblas-pthread -lopenblas -lgomp -lm
 *   build/gpu/test_kernels
 *
 * Tolerances, in units of the last place (ulp) of the stored format: the relative error of an
 * element is |gpu - cpu| / max(|cpu|, floor), floor = the reference array's rms where said (an
 * element far below the array's typical size is the difference of larger terms: its own ulp says
 * nothing about the computation's accuracy), and a bf16 ulp counts as 2^-7 of the value (its
 * largest relative size). The CPU and GPU compute the same expressions but sum in different orders
 * (vector lanes and threads against warps and tensor-core tiles) and the CPU's exp is its own
 * polynomial, so an fp32 result differs in its last bits and a bf16 result, rounded from it, can
 * land one ulp apart; where one rounded result feeds another (attention's P and dS, a layer's
 * output into the next) the differences add up, and the tolerance says how many. Element-wise
 * kernels without exp or sums (conversions, AdamW, embedding) must be exact. */
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <algorithm>
#include <vector>
extern "C" {
#include "common/config.h"
#include "common/optim.h"
#include "common/precision.h"
#include "cpu/adamw.h"
#include "cpu/kernels.h"
#include "common/rope_table.h"
#include "cpu/model.h"
}
#include "cuda/common_cuda.cuh"
#include "cuda/gemm_cublaslt.cuh"
#include "cuda/kernels_cuda.cuh"
#include "cuda/model_cuda.h"

static int failures, checks;
static cudaStream_t stream;

/* ---- host data ---- */

static uint64_t rng = 20261130;
static double urand(void) {   /* uniform in [-1, 1) */
    rng = rng * 6364136223846793005ull + 1442695040888963407ull;
    return (double)(rng >> 11) / 4503599627370496.0 - 1.0;
}
/* n random values of magnitude `scale`, rounded to bf16 values */
static std::vector<float> rand_bf16(size_t n, double scale) {
    std::vector<float> v(n);
    for (size_t i = 0; i < n; i++) v[i] = wp_bf16_round((float)(scale * urand()));
    return v;
}
static std::vector<float> rand_f32(size_t n, double scale) {
    std::vector<float> v(n);
    for (size_t i = 0; i < n; i++) v[i] = (float)(scale * urand());
    return v;
}

/* ---- device buffers ---- */

template <typename T> static T *dev_alloc(size_t n) {
    T *p = NULL;
    CUDA_CHECK(cudaMalloc((void **)&p, (n ? n : 1) * sizeof(T)));
    CUDA_CHECK(cudaMemset(p, 0, (n ? n : 1) * sizeof(T)));
    return p;
}
static uint16_t *up_bf16(const std::vector<float> &v) {
    std::vector<uint16_t> h(v.size());
    for (size_t i = 0; i < v.size(); i++) h[i] = wp_f32_to_bf16(v[i]);
    uint16_t *d = dev_alloc<uint16_t>(v.size());
    CUDA_CHECK(cudaMemcpy(d, h.data(), h.size() * 2, cudaMemcpyHostToDevice));
    return d;
}
template <typename T> static T *up(const std::vector<T> &v) {
    T *d = dev_alloc<T>(v.size());
    CUDA_CHECK(cudaMemcpy(d, v.data(), v.size() * sizeof(T), cudaMemcpyHostToDevice));
    return d;
}
/* n bf16 values at stride `ld` elements (rows of `cols`), widened */
static std::vector<float> down_bf16(const uint16_t *d, size_t n, size_t cols = 0, size_t ld = 0) {
    if (!cols) cols = ld = n ? n : 1;
    size_t rows = n / cols;
    std::vector<uint16_t> h(rows ? (rows - 1) * ld + cols : 0);
    CUDA_CHECK(cudaStreamSynchronize(stream));
    CUDA_CHECK(cudaMemcpy(h.data(), d, h.size() * 2, cudaMemcpyDeviceToHost));
    std::vector<float> v(n);
    for (size_t r = 0; r < rows; r++)
        for (size_t c = 0; c < cols; c++) v[r * cols + c] = wp_bf16_to_f32(h[r * ld + c]);
    return v;
}
template <typename T> static std::vector<T> down(const T *d, size_t n) {
    std::vector<T> v(n);
    CUDA_CHECK(cudaStreamSynchronize(stream));
    CUDA_CHECK(cudaMemcpy(v.data(), d, n * sizeof(T), cudaMemcpyDeviceToHost));
    return v;
}

/* ---- comparison ---- */

enum Unit { BF16, FP32 };
enum Floor { OWN, RMS };

/* The rms of the values a tensor has: exact zeros left out, so that a sparse one (the embedding's
 * gradient, whose rows of tokens absent from the batch are zero on both sides) is judged against
 * the size of its rows, not diluted by the vocabulary's size. Seen on an H200: the embedding's
 * gradient behind a layer was 10.7 "ulps of the rms" off with about two thirds of its rows zero
 * (the loss and every dense tensor well within tolerance). */
static double rms(const float *x, size_t n) {
    double s = 0;
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        if (x[i] != 0) { s += (double)x[i] * x[i]; k++; }
    return k ? sqrt(s / k) : 0;
}

/* Compares gpu with the reference cpu; tol in ulps of `unit`; prints one line; counts a failure. */
static void check(const char *name, const float *gpu, const float *cpu, size_t n, double ulps, Unit unit,
                  Floor floor, const char *why) {
    double ulp = unit == BF16 ? ldexp(1.0, -7) : ldexp(1.0, -23);
    double fl = floor == RMS ? rms(cpu, n) : 0.0;
    double max_abs = 0, max_rel = 0;
    size_t worst = 0;
    int bad = 0;
    for (size_t i = 0; i < n; i++) {
        double a = gpu[i], b = cpu[i];
        if (isnan(a) != isnan(b)) { bad = 1; worst = i; max_rel = INFINITY; continue; }
        if (isnan(a)) continue;   /* both NaN: the same answer */
        double d = fabs(a - b), den = fmax(fabs(b), fl);
        double rel = d == 0 ? 0 : (den > 0 ? d / den : INFINITY);
        if (d > max_abs) max_abs = d;
        if (rel > max_rel) { max_rel = rel; worst = i; }
    }
    if (max_rel > ulps * ulp) bad = 1;
    checks++;
    failures += bad;
    printf("%-4s %-48s max abs %.3e  max rel %.3e (%.2f ulps; tolerance %g %s ulps%s: %s)%s\n",
           bad ? "FAIL" : "ok", name, max_abs, max_rel, max_rel / ulp, ulps, unit == BF16 ? "bf16" : "fp32",
           floor == RMS ? " of the element or the rms" : "", why, "");
    if (bad && n) printf("     worst at %zu: gpu %.9g cpu %.9g\n", worst, (double)gpu[worst], (double)cpu[worst]);
}
static void check(const char *name, const std::vector<float> &gpu, const std::vector<float> &cpu, double ulps,
                  Unit unit, Floor floor, const char *why) {
    if (gpu.size() != cpu.size()) {
        printf("FAIL %s: %zu values against %zu\n", name, gpu.size(), cpu.size());
        failures++; checks++;
        return;
    }
    check(name, gpu.data(), cpu.data(), gpu.size(), ulps, unit, floor, why);
}
static void check_true(const char *name, int ok, const char *what) {
    checks++;
    failures += !ok;
    printf("%-4s %-48s %s\n", ok ? "ok" : "FAIL", name, what);
}

static const char *ORDER = "sums in another order, one rounding";

/* ---- kernels ---- */

static void test_rmsnorm(void) {
    const int T = 37, H = 200;
    std::vector<float> x = rand_bf16((size_t)T * H, 2.0), w = rand_bf16(H, 1.0);
    std::vector<float> out(x.size()), rstd(T);
    rmsnorm_forward(out.data(), rstd.data(), x.data(), w.data(), T, H, 1e-5f);
    wp_bf16_round_array(out.data(), out.size());
    uint16_t *dx_ = up_bf16(x), *dw_ = up_bf16(w), *dout = dev_alloc<uint16_t>(x.size());
    float *drstd = dev_alloc<float>(T);
    wc_rmsnorm_forward(dout, drstd, dx_, dw_, T, H, 1e-5f, stream);
    check("rmsnorm forward: out", down_bf16(dout, x.size()), out, 1, BF16, OWN, ORDER);
    check("rmsnorm forward: rstd", down(drstd, T), rstd, 16, FP32, OWN, "a sum of 200 squares in another order");
    /* recompute with the forward's rstd */
    wc_rmsnorm_recompute(dout, dx_, dw_, drstd, T, H, stream);
    check("rmsnorm recompute: out", down_bf16(dout, x.size()), out, 1, BF16, OWN, ORDER);
    /* backward, accumulating into dx and not */
    std::vector<float> g = rand_bf16(x.size(), 0.5), dres = rand_bf16(x.size(), 0.5);
    std::vector<float> dwc = rand_f32(H, 0.1), dwg = dwc;
    for (int acc = 1; acc >= 0; acc--) {
        std::vector<float> dx = acc ? dres : std::vector<float>(x.size(), 0.0f);
        std::vector<float> dw = dwc;
        rmsnorm_backward(dx.data(), dw.data(), g.data(), x.data(), w.data(), rstd.data(), T, H);
        wp_bf16_round_array(dx.data(), dx.size());
        uint16_t *ddx = up_bf16(acc ? dres : std::vector<float>(x.size(), 0.0f)), *dg = up_bf16(g);
        float *ddw = up(dwg), *part = dev_alloc<float>((size_t)WC_NORM_SPLITS * H);
        float *crstd = up(rstd);   /* the CPU's rstd: this checks backward alone */
        wc_rmsnorm_backward(ddx, acc, ddw, dg, dx_, dw_, crstd, T, H, part, stream);
        check(acc ? "rmsnorm backward: dx (accumulated)" : "rmsnorm backward: dx (written)", down_bf16(ddx, x.size()),
              dx, 2, BF16, RMS, "a row sum in another order, then one rounding of a difference");
        check(acc ? "rmsnorm backward: dw (accumulated)" : "rmsnorm backward: dw (again)", down(ddw, H), dw, 64, FP32,
              RMS, "a sum over 37 rows in another order");
        CUDA_CHECK(cudaFree(ddx)); CUDA_CHECK(cudaFree(dg)); CUDA_CHECK(cudaFree(ddw));
        CUDA_CHECK(cudaFree(part)); CUDA_CHECK(cudaFree(crstd));
    }
    CUDA_CHECK(cudaFree(dx_)); CUDA_CHECK(cudaFree(dw_)); CUDA_CHECK(cudaFree(dout)); CUDA_CHECK(cudaFree(drstd));
}

static void test_rope(void) {
    const int G = 2, S = 37, heads = 4, kv = 2, hd = 16, T = G * S, width = (heads + 2 * kv) * hd;
    std::vector<float> cos_t((size_t)S * hd / 2), sin_t(cos_t.size());
    wp_rope_tables(cos_t.data(), sin_t.data(), S, hd, 10000.0f, NULL);
    std::vector<float> qkv = rand_bf16((size_t)T * width, 1.0), ref = qkv;
    rope_forward(ref.data(), cos_t.data(), sin_t.data(), T, S, heads, kv, hd);
    wp_bf16_round_array(ref.data(), ref.size());
    float *dc = up(cos_t), *ds = up(sin_t);
    uint16_t *d = up_bf16(qkv);
    wc_rope_forward(d, dc, ds, T, S, heads, kv, hd, stream);
    check("rope forward", down_bf16(d, qkv.size()), ref, 1, BF16, RMS, "one rounding of a two-term sum (fma or not)");
    std::vector<float> g = rand_bf16(qkv.size(), 1.0), gref = g;
    rope_backward(gref.data(), cos_t.data(), sin_t.data(), T, S, heads, kv, hd);
    wp_bf16_round_array(gref.data(), gref.size());
    uint16_t *dg = up_bf16(g);
    wc_rope_backward(dg, dc, ds, T, S, heads, kv, hd, stream);
    check("rope backward", down_bf16(dg, g.size()), gref, 1, BF16, RMS, "one rounding of a two-term sum (fma or not)");
    CUDA_CHECK(cudaFree(dc)); CUDA_CHECK(cudaFree(ds)); CUDA_CHECK(cudaFree(d)); CUDA_CHECK(cudaFree(dg));
}

static void test_swiglu(void) {
    const int T = 37, F = 100;
    std::vector<float> gu = rand_bf16((size_t)T * 2 * F, 3.0), dh = rand_bf16((size_t)T * F, 1.0);
    std::vector<float> h((size_t)T * F), dgu(gu.size());
    swiglu_forward(h.data(), gu.data(), T, F);
    wp_bf16_round_array(h.data(), h.size());
    swiglu_backward(dgu.data(), dh.data(), gu.data(), T, F);
    wp_bf16_round_array(dgu.data(), dgu.size());
    uint16_t *dgu_in = up_bf16(gu), *dh_ = up_bf16(dh), *dh_out = dev_alloc<uint16_t>(h.size());
    uint16_t *ddgu = dev_alloc<uint16_t>(gu.size());
    wc_swiglu_forward(dh_out, dgu_in, T, F, stream);
    wc_swiglu_backward(ddgu, dh_, dgu_in, T, F, stream);
    check("swiglu forward", down_bf16(dh_out, h.size()), h, 1, BF16, OWN, "CUDA's expf against the CPU's polynomial, one rounding");
    check("swiglu backward", down_bf16(ddgu, gu.size()), dgu, 1, BF16, RMS, "CUDA's expf against the CPU's polynomial, one rounding");
    CUDA_CHECK(cudaFree(dgu_in)); CUDA_CHECK(cudaFree(dh_)); CUDA_CHECK(cudaFree(dh_out)); CUDA_CHECK(cudaFree(ddgu));
}

static void test_embedding(void) {
    const int T = 300, H = 72, V = 50;   /* many repeated tokens */
    std::vector<int> tok(T);
    for (int t = 0; t < T; t++) tok[t] = (int)((urand() + 1.0) * 0.5 * V) % V;
    std::vector<float> table = rand_bf16((size_t)V * H, 1.0), x((size_t)T * H);
    embedding_forward(x.data(), tok.data(), table.data(), T, H, V);
    int *dtok = up(tok);
    uint16_t *dtab = up_bf16(table), *dx = dev_alloc<uint16_t>(x.size());
    wc_embedding_forward(dx, dtok, dtab, T, H, V, stream);
    check("embedding forward", down_bf16(dx, x.size()), x, 0, BF16, OWN, "a copy");
    std::vector<float> g = rand_bf16(x.size(), 1.0), dtable = rand_f32((size_t)V * H, 0.1), dref = dtable;
    embedding_backward(dref.data(), g.data(), tok.data(), T, H);
    uint16_t *dg = up_bf16(g);
    float *ddt = up(dtable);
    wc_embedding_backward(ddt, dg, dtok, T, H, V, stream);
    check("embedding backward", down(ddt, dtable.size()), dref, 0, FP32, OWN, "the same sums in token order");
    CUDA_CHECK(cudaFree(dtok)); CUDA_CHECK(cudaFree(dtab)); CUDA_CHECK(cudaFree(dx));
    CUDA_CHECK(cudaFree(dg)); CUDA_CHECK(cudaFree(ddt));
}

static void test_crossentropy(void) {
    const int n = 70, V = 3000;   /* rows of several chunks of the in-place backward, the last partial */
    std::vector<float> logits = rand_f32((size_t)n * V, 5.0);
    std::vector<int> tgt(n);
    for (int t = 0; t < n; t++) tgt[t] = t % 11 == 5 ? -1 : (int)((urand() + 1.0) * 0.5 * V) % V;
    std::vector<float> lse(n);
    double loss = crossentropy_forward(lse.data(), logits.data(), tgt.data(), n, V);
    float *dl = up(logits), *dlse = dev_alloc<float>(n);
    int *dt = up(tgt);
    double *losses = dev_alloc<double>(n), *dsum = dev_alloc<double>(1);
    wc_ce_forward(dlse, losses, dl, dt, n, V, stream);
    wc_loss_sum(dsum, losses, n, stream);
    check("cross-entropy forward: lse", down(dlse, n), lse, 64, FP32, OWN, "a sum of 3000 exponentials in another order");
    double gl = down(dsum, 1)[0];
    check("cross-entropy forward: summed loss", std::vector<float>(1, (float)gl), std::vector<float>(1, (float)loss), 64,
          FP32, OWN, "fp64 sums of losses from fp32 lse");
    const float scale = 1.0f / 64;
    std::vector<float> dref = logits;
    crossentropy_backward(dref.data(), lse.data(), tgt.data(), n, V, scale, 1);
    float *clse = up(lse);   /* the CPU's lse: this checks backward alone */
    wc_ce_backward(dl, clse, dt, n, V, scale, stream);
    check("cross-entropy backward: dlogits (in place, ld 2V)", down_bf16((uint16_t *)dl, (size_t)n * V, V, 2 * (size_t)V),
          dref, 1, BF16, OWN, "CUDA's expf against the CPU's polynomial, one rounding");
    CUDA_CHECK(cudaFree(dl)); CUDA_CHECK(cudaFree(dlse)); CUDA_CHECK(cudaFree(dt)); CUDA_CHECK(cudaFree(losses));
    CUDA_CHECK(cudaFree(dsum)); CUDA_CHECK(cudaFree(clse));
}

/* One attention implementation's forward and backward on the GPU: out, lse and dqkv (bf16 widened).
 * dqkv starts as NaN bits everywhere, so that an element left unwritten fails every comparison. */
struct AttnRun { std::vector<float> out, lse, dqkv; };
typedef void AttnFwd(uint16_t *, float *, const uint16_t *, int, int, int, int, int, cudaStream_t);
typedef void AttnBwd(uint16_t *, const uint16_t *, const uint16_t *, const float *, const uint16_t *, int, int, int,
                     int, int, cudaStream_t);
static AttnRun run_attention(AttnFwd *fwd, AttnBwd *bwd, const std::vector<float> &qkv, const std::vector<float> &dO,
                             const std::vector<float> &ref_out, const std::vector<float> &ref_lse, int G, int S,
                             int heads, int kv, int hd) {
    AttnRun r;
    uint16_t *dqkv_in = up_bf16(qkv), *dout = dev_alloc<uint16_t>(ref_out.size());
    float *dlse = dev_alloc<float>(ref_lse.size());
    fwd(dout, dlse, dqkv_in, G, S, heads, kv, hd, stream);
    r.out = down_bf16(dout, ref_out.size());
    r.lse = down(dlse, ref_lse.size());
    /* backward from the CPU's forward outputs, so that it is checked on its own */
    uint16_t *ddo = up_bf16(dO), *cout_ = up_bf16(ref_out), *dd = dev_alloc<uint16_t>(qkv.size());
    float *clse = up(ref_lse);
    CUDA_CHECK(cudaMemset(dd, 0xFF, qkv.size() * sizeof(uint16_t)));
    bwd(dd, ddo, cout_, clse, dqkv_in, G, S, heads, kv, hd, stream);
    r.dqkv = down_bf16(dd, qkv.size());
    CUDA_CHECK(cudaFree(dqkv_in)); CUDA_CHECK(cudaFree(dout)); CUDA_CHECK(cudaFree(dlse)); CUDA_CHECK(cudaFree(ddo));
    CUDA_CHECK(cudaFree(cout_)); CUDA_CHECK(cudaFree(dd)); CUDA_CHECK(cudaFree(clse));
    return r;
}

/* Both implementations (CUDA cores; tensor cores where hd is 64 or 128) against the CPU reference,
 * and the tensor-core one against the CUDA-core one, and run twice (the same bits: deterministic). */
static void test_attention(int G, int S, int heads, int kv, int hd) {
    char name[120], err[200];
    if (wc_attention_setup(hd, err, sizeof err)) { check_true("attention setup", 0, err); return; }
    int T = G * S, width = (heads + 2 * kv) * hd, qd = heads * hd, nt = omp_get_max_threads();
    std::vector<float> qkv = rand_bf16((size_t)T * width, 1.5), out((size_t)T * qd), lse((size_t)G * heads * S);
    std::vector<float> work(attention_work_floats(G, S, heads, kv, hd, nt));
    attention_forward(out.data(), lse.data(), qkv.data(), G, S, heads, kv, hd, work.data(), nt, 1);
    std::vector<float> dO = rand_bf16(out.size(), 1.0), dqkv(qkv.size());
    attention_backward(dqkv.data(), dO.data(), out.data(), lse.data(), qkv.data(), G, S, heads, kv, hd,
                       work.data(), nt, 1);
    const int tc = wc_attention_tc_supported(hd);
    AttnRun runs[2];
    for (int k = 0; k < 1 + tc; k++) {
        const char *kind = k ? "tc" : "cc";
        runs[k] = k ? run_attention(wc_attention_tc_forward, wc_attention_tc_backward, qkv, dO, out, lse, G, S, heads, kv, hd)
                    : run_attention(wc_attention_cc_forward, wc_attention_cc_backward, qkv, dO, out, lse, G, S, heads, kv, hd);
        snprintf(name, sizeof name, "attention %s forward G%d S%d h%d kv%d hd%d: out", kind, G, S, heads, kv, hd);
        check(name, runs[k].out, out, 4, BF16, RMS, "P rounded to bf16 from exps in another order, sums in another order");
        snprintf(name, sizeof name, "attention %s forward G%d S%d h%d kv%d hd%d: lse", kind, G, S, heads, kv, hd);
        check(name, runs[k].lse, lse, 256, FP32, OWN, "scores and the softmax's sum in another order");
        snprintf(name, sizeof name, "attention %s backward G%d S%d h%d kv%d hd%d: dqkv", kind, G, S, heads, kv, hd);
        check(name, runs[k].dqkv, dqkv, 8, BF16, RMS,
              "P and dS rounded to bf16 from values summed in another order (dP - D cancels), then summed");
    }
    /* cuDNN's fused attention where it loads and takes the shape; the tolerances are first
     * estimates for a kernel that keeps P in bf16 as ours do but sums in its own tiles (exp2 of
     * prescaled scores, another lse rounding), to be tightened on the GPU */
    char why[600];
    AttnRun cd;
    const int cudnn = wc_cudnn_attention_plan(G, S, heads, kv, hd, why, sizeof why) == 0;
    if (cudnn) {
        cd = run_attention(wc_cudnn_attention_forward, wc_cudnn_attention_backward, qkv, dO, out, lse, G, S, heads, kv, hd);
        snprintf(name, sizeof name, "attention cudnn forward G%d S%d h%d kv%d hd%d: out", G, S, heads, kv, hd);
        check(name, cd.out, out, 8, BF16, RMS, "cuDNN's tiles and exp2 of prescaled scores, P in bf16");
        snprintf(name, sizeof name, "attention cudnn forward G%d S%d h%d kv%d hd%d: lse", G, S, heads, kv, hd);
        check(name, cd.lse, lse, 1024, FP32, OWN, "cuDNN's Stats: max + log(sum) from exp2, another order");
        snprintf(name, sizeof name, "attention cudnn backward G%d S%d h%d kv%d hd%d: dqkv", G, S, heads, kv, hd);
        check(name, cd.dqkv, dqkv, 16, BF16, RMS, "cuDNN's tiles, dS in bf16, dK and dV summed over the query group");
        if (wc_cudnn_attention_deterministic()) {
            AttnRun again = run_attention(wc_cudnn_attention_forward, wc_cudnn_attention_backward, qkv, dO, out, lse, G, S,
                                          heads, kv, hd);
            snprintf(name, sizeof name, "attention cudnn deterministic G%d S%d h%d kv%d hd%d", G, S, heads, kv, hd);
            check_true(name, !memcmp(again.dqkv.data(), cd.dqkv.data(), dqkv.size() * sizeof(float)),
                       "the deterministic backward: a second run gives the same bits");
        }
    } else {
        printf("note: attention G%d S%d h%d kv%d hd%d: cuDNN not checked: %s\n", G, S, heads, kv, hd, why);
    }
    if (!tc) return;
    snprintf(name, sizeof name, "attention tc vs cc G%d S%d h%d kv%d hd%d: out", G, S, heads, kv, hd);
    check(name, runs[1].out, runs[0].out, 4, BF16, RMS, "two GPU kernels, sums in other orders");
    snprintf(name, sizeof name, "attention tc vs cc G%d S%d h%d kv%d hd%d: lse", G, S, heads, kv, hd);
    check(name, runs[1].lse, runs[0].lse, 256, FP32, OWN, "scale after the q.k sum, sums in other orders");
    snprintf(name, sizeof name, "attention tc vs cc G%d S%d h%d kv%d hd%d: dqkv", G, S, heads, kv, hd);
    check(name, runs[1].dqkv, runs[0].dqkv, 8, BF16, RMS, "two GPU kernels, sums in other orders");
    AttnRun again = run_attention(wc_attention_tc_forward, wc_attention_tc_backward, qkv, dO, out, lse, G, S, heads,
                                  kv, hd);
    snprintf(name, sizeof name, "attention tc deterministic G%d S%d h%d kv%d hd%d", G, S, heads, kv, hd);
    check_true(name, !memcmp(again.out.data(), runs[1].out.data(), out.size() * sizeof(float)) &&
                     !memcmp(again.lse.data(), runs[1].lse.data(), lse.size() * sizeof(float)) &&
                     !memcmp(again.dqkv.data(), runs[1].dqkv.data(), dqkv.size() * sizeof(float)),
               "a second run gives the same bits (fixed order, no atomics)");
    /* the dispatch: cuDNN for a shape planned with it (planned just above), else the tensor-core
     * kernels for these (aligned) tensors; WP_ATTENTION=own the tensor-core ones, reference the CUDA-core ones */
    const char *env = getenv("WP_ATTENTION");
    const int reference = env && !strcmp(env, "reference"), own = env && !strcmp(env, "own");
    const char *kernel = reference ? "cuda-core" : own || !cudnn ? "tensor-core" : "cudnn";
    AttnRun d = run_attention(wc_attention_forward, wc_attention_backward, qkv, dO, out, lse, G, S, heads, kv, hd);
    const AttnRun &want = !strcmp(kernel, "cudnn") ? cd : runs[reference ? 0 : 1];
    snprintf(name, sizeof name, "attention dispatch G%d S%d h%d kv%d hd%d", G, S, heads, kv, hd);
    char said[96];
    snprintf(said, sizeof said, "the %s kernels ran (WP_ATTENTION=%s)", kernel, env && *env ? env : "auto");
    check_true(name, !strcmp(wc_attention_last_kernel(), kernel) &&
                     !memcmp(d.out.data(), want.out.data(), out.size() * sizeof(float)) &&
                     (!strcmp(kernel, "cudnn") && !wc_cudnn_attention_deterministic() ||
                      !memcmp(d.dqkv.data(), want.dqkv.data(), dqkv.size() * sizeof(float))),
               said);
}

/* Ring attention's blocks (attention_block_cuda.cu) against the CPU's (attention_block.c, fp32 on
 * the same bf16 values): a sequence of two chunks of L tokens as one member holds them; chunk 0's
 * queries against itself (diagonal); chunk 1's against chunk 0 (full) merged with itself
 * (diagonal), K/V read from a packed [2L, 2 kv hd] copy as the ring sends it; then each block's
 * backward from the merged result, dq and dkv accumulated in fp32. Both sides compute the same
 * fp32 expressions: only the summation order (per key against per tile) and exp differ, so the
 * tolerance is the reordering bound of sums over at most 2L keys plus hd, in fp32 ulps of the
 * element or the rms (a gradient element is a difference of larger terms). */
static void test_attention_block(int L, int heads, int kv, int hd) {
    char name[120];
    const int width = (heads + 2 * kv) * hd, qd = heads * hd, kvw = 2 * kv * hd, S = 2 * L, nt = omp_get_max_threads();
    std::vector<float> qkv = rand_bf16((size_t)S * width, 1.5), kvp((size_t)S * kvw), dO = rand_bf16((size_t)S * qd, 1.0);
    for (int t = 0; t < S; t++)
        memcpy(&kvp[(size_t)t * kvw], &qkv[(size_t)t * width + qd], (size_t)kvw * sizeof(float));
    /* the CPU: out, lse [heads][S] of the sequence's two query chunks; then dq [S, width] (q part), dkv [S, kvw] */
    std::vector<float> out((size_t)S * qd, 0.0f), lse((size_t)heads * S, -INFINITY), bo((size_t)L * qd), bl((size_t)heads * L);
    std::vector<float> dq((size_t)S * width, 0.0f), dkv((size_t)S * kvw, 0.0f);
    std::vector<float> work(attention_block_work_floats(L, L, heads, kv, hd, nt));
    const int blocks[3][3] = { { 0, 0, 1 }, { 1, 0, 0 }, { 1, 1, 1 } };   /* query chunk, K/V chunk, diagonal */
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
    /* the GPU, the same blocks */
    uint16_t *gq = up_bf16(qkv), *gkv = up_bf16(kvp), *gdo = up_bf16(dO);
    float *gout = up(std::vector<float>((size_t)S * qd, 0.0f)), *glse = up(std::vector<float>((size_t)heads * S, -INFINITY));
    float *gbo = dev_alloc<float>((size_t)L * qd), *gbl = dev_alloc<float>((size_t)heads * L), *gD = dev_alloc<float>((size_t)heads * L);
    float *gdq = dev_alloc<float>((size_t)S * width), *gdkv = dev_alloc<float>((size_t)S * kvw);
    for (auto &b : blocks) {
        wc_attention_block_forward(gbo, gbl, L, gq + (size_t)b[0] * L * width, width, gkv + (size_t)b[1] * L * kvw, kvw,
                                   L, L, heads, kv, hd, b[2], stream);
        wc_attention_block_merge(gout + (size_t)b[0] * L * qd, glse + (size_t)b[0] * L, S, gbo, gbl, L, L, heads, hd, stream);
    }
    for (auto &b : blocks)
        wc_attention_block_backward(gdq + (size_t)b[0] * L * width, width, gdkv + (size_t)b[1] * L * kvw, kvw,
                                    gdo + (size_t)b[0] * L * qd, gout + (size_t)b[0] * L * qd, glse + (size_t)b[0] * L, S,
                                    gq + (size_t)b[0] * L * width, width, gkv + (size_t)b[1] * L * kvw, kvw, L, L, heads,
                                    kv, hd, b[2], gD, stream);
    std::vector<float> rout = down(gout, out.size()), rlse = down(glse, lse.size());
    std::vector<float> rdq = down(gdq, dq.size()), rdkv = down(gdkv, dkv.size());
    double ulps = 4.0 * (S + hd);
    snprintf(name, sizeof name, "attention block L%d h%d kv%d hd%d: out", L, heads, kv, hd);
    check(name, rout, out, ulps, FP32, RMS, "per-key online softmax against tiles, expf against wp_expf");
    snprintf(name, sizeof name, "attention block L%d h%d kv%d hd%d: lse", L, heads, kv, hd);
    check(name, rlse, lse, ulps, FP32, OWN, "the softmax's sum in another order");
    snprintf(name, sizeof name, "attention block L%d h%d kv%d hd%d: dq", L, heads, kv, hd);
    check(name, rdq, dq, 2 * ulps, FP32, RMS, "sums over keys in another order (dP - D cancels)");
    snprintf(name, sizeof name, "attention block L%d h%d kv%d hd%d: dkv", L, heads, kv, hd);
    check(name, rdkv, dkv, 2 * ulps, FP32, RMS, "sums over queries and heads in another order");
    CUDA_CHECK(cudaFree(gq)); CUDA_CHECK(cudaFree(gkv)); CUDA_CHECK(cudaFree(gdo)); CUDA_CHECK(cudaFree(gout));
    CUDA_CHECK(cudaFree(glse)); CUDA_CHECK(cudaFree(gbo)); CUDA_CHECK(cudaFree(gbl)); CUDA_CHECK(cudaFree(gD));
    CUDA_CHECK(cudaFree(gdq)); CUDA_CHECK(cudaFree(gdkv));
}

/* Each kind of product at one shape, against cpu/matmul.c with the same bf16 flags. */
static void test_gemm(int T, int K, int N) {
    char name[96], err[200];
    WcLt lt;
    if (wc_lt_new(&lt, (size_t)32 << 20, err, sizeof err)) { check_true("cuBLASLt", 0, err); return; }
    std::vector<float> x = rand_bf16((size_t)T * K, 1.0), w = rand_bf16((size_t)N * K, 0.2);
    std::vector<float> c = rand_bf16((size_t)T * N, 1.0), dy = rand_bf16((size_t)T * N, 1.0);
    uint16_t *dx_ = up_bf16(x), *dw_ = up_bf16(w), *dc = up_bf16(c), *dy16 = dev_alloc<uint16_t>((size_t)T * 2 * N);
    uint16_t *out16 = dev_alloc<uint16_t>((size_t)T * (K > N ? K : N));
    float *out32 = dev_alloc<float>((size_t)T * N);
    {   /* dy with leading dimension 2N, as the LM head's in-place dlogits */
        std::vector<uint16_t> h((size_t)T * 2 * N, 0x7FC0);   /* NaN in the gaps: they must not be read */
        for (int t = 0; t < T; t++)
            for (int j = 0; j < N; j++) h[(size_t)t * 2 * N + j] = wp_f32_to_bf16(dy[(size_t)t * N + j]);
        CUDA_CHECK(cudaMemcpy(dy16, h.data(), h.size() * 2, cudaMemcpyHostToDevice));
    }
    WcGemm g;
    /* y = x W^T, bf16 out */
    std::vector<float> y((size_t)T * N);
    matmul_forward(y.data(), x.data(), w.data(), T, K, N, 0, MM_BF16_IN | MM_BF16_OUT);
    if (wc_gemm_plan(&lt, &g, WC_MM_FWD, T, K, N, K, 0, 0, err, sizeof err)) check_true("gemm plan", 0, err);
    else {
        wc_gemm_run(&lt, &g, dx_, dw_, NULL, out16, stream);
        snprintf(name, sizeof name, "gemm x W^T, bf16 out (T%d K%d N%d)", T, K, N);
        check(name, down_bf16(out16, y.size()), y, 1, BF16, RMS, ORDER);
        wc_gemm_free(&g);
    }
    /* y = c + x W^T, bf16 out, one rounding */
    std::vector<float> yc = c;
    matmul_forward(yc.data(), x.data(), w.data(), T, K, N, 1, MM_BF16_IN | MM_BF16_OUT);
    if (wc_gemm_plan(&lt, &g, WC_MM_FWD, T, K, N, K, 0, 1, err, sizeof err)) check_true("gemm plan", 0, err);
    else {
        wc_gemm_run(&lt, &g, dx_, dw_, dc, out16, stream);
        snprintf(name, sizeof name, "gemm c + x W^T, bf16 out (T%d K%d N%d)", T, K, N);
        check(name, down_bf16(out16, yc.size()), yc, 1, BF16, RMS, ORDER);
        wc_gemm_free(&g);
    }
    /* logits = x W^T, fp32 out */
    std::vector<float> yf((size_t)T * N);
    matmul_forward(yf.data(), x.data(), w.data(), T, K, N, 0, MM_BF16_IN);
    if (wc_gemm_plan(&lt, &g, WC_MM_FWD, T, K, N, K, 1, 0, err, sizeof err)) check_true("gemm plan", 0, err);
    else {
        wc_gemm_run(&lt, &g, dx_, dw_, NULL, out32, stream);
        snprintf(name, sizeof name, "gemm x W^T, fp32 out (T%d K%d N%d)", T, K, N);
        check(name, down(out32, yf.size()), yf, 256, FP32, RMS, "exact products summed in another order");
        wc_gemm_free(&g);
    }
    /* dx = dy W (dy at leading dimension 2N) and dW += dy^T x */
    std::vector<float> dxr((size_t)T * K), dWr = rand_f32((size_t)N * K, 0.1), dWg = dWr;
    matmul_backward(dxr.data(), dWr.data(), dy.data(), x.data(), w.data(), T, K, N, 0, MM_BF16_IN | MM_BF16_OUT);
    if (wc_gemm_plan(&lt, &g, WC_MM_BWD_DX, T, K, N, 2 * N, 0, 0, err, sizeof err)) check_true("gemm plan", 0, err);
    else {
        wc_gemm_run(&lt, &g, dy16, dw_, NULL, out16, stream);
        snprintf(name, sizeof name, "gemm dy W, dy at ld 2N (T%d K%d N%d)", T, K, N);
        check(name, down_bf16(out16, dxr.size()), dxr, 1, BF16, RMS, ORDER);
        wc_gemm_free(&g);
    }
    float *ddW = up(dWg);
    if (wc_gemm_plan(&lt, &g, WC_MM_BWD_DW, T, K, N, 2 * N, 0, 0, err, sizeof err)) check_true("gemm plan", 0, err);
    else {
        wc_gemm_run(&lt, &g, dy16, dx_, NULL, ddW, stream);
        snprintf(name, sizeof name, "gemm dW += dy^T x, fp32 (T%d K%d N%d)", T, K, N);
        check(name, down(ddW, dWr.size()), dWr, 256, FP32, RMS, "exact products summed in another order");
        wc_gemm_free(&g);
    }
    /* x and the result one element off their 16-byte boundaries (an LM-head block at an odd token
     * offset): wc_gemm_run takes the algorithm planned for each element's own alignment */
    {
        std::vector<float> x1(x.size() + 1, 0.0f);
        std::copy(x.begin(), x.end(), x1.begin() + 1);
        uint16_t *dx1 = up_bf16(x1), *o16 = dev_alloc<uint16_t>((size_t)T * N + 1);
        float *o32 = dev_alloc<float>((size_t)T * N + 1);
        if (wc_gemm_plan(&lt, &g, WC_MM_FWD, T, K, N, K, 0, 0, err, sizeof err)) check_true("gemm plan", 0, err);
        else {
            wc_gemm_run(&lt, &g, dx1 + 1, dw_, NULL, o16 + 1, stream);
            snprintf(name, sizeof name, "gemm x W^T, bf16, operands 2 bytes off (T%d K%d N%d)", T, K, N);
            check(name, down_bf16(o16 + 1, y.size()), y, 1, BF16, RMS, ORDER);
            wc_gemm_free(&g);
        }
        if (wc_gemm_plan(&lt, &g, WC_MM_FWD, T, K, N, K, 1, 0, err, sizeof err)) check_true("gemm plan", 0, err);
        else {
            wc_gemm_run(&lt, &g, dx1 + 1, dw_, NULL, o32 + 1, stream);
            snprintf(name, sizeof name, "gemm x W^T, fp32, operands 2 and 4 bytes off (T%d K%d N%d)", T, K, N);
            check(name, down(o32 + 1, yf.size()), yf, 256, FP32, RMS, "exact products summed in another order");
            wc_gemm_free(&g);
        }
        CUDA_CHECK(cudaFree(dx1)); CUDA_CHECK(cudaFree(o16)); CUDA_CHECK(cudaFree(o32));
    }
    CUDA_CHECK(cudaFree(dx_)); CUDA_CHECK(cudaFree(dw_)); CUDA_CHECK(cudaFree(dc)); CUDA_CHECK(cudaFree(dy16));
    CUDA_CHECK(cudaFree(out16)); CUDA_CHECK(cudaFree(out32)); CUDA_CHECK(cudaFree(ddW));
    wc_lt_free(&lt);
}

static void test_adamw(void) {
    const size_t n = 100003;
    WpAdamW opt;
    adamw_init(&opt, 1e-3f, 10, 100);
    std::vector<float> w = rand_f32(n, 0.5), g = rand_f32(n, 0.01), m1 = rand_f32(n, 0.001), m2(n);
    for (size_t i = 0; i < n; i++) m2[i] = (float)fabs(urand()) * 1e-5f;
    float *dw = up(w), *dg = up(g), *dm1 = up(m1), *dm2 = up(m2);
    uint16_t *w16 = dev_alloc<uint16_t>(n);
    adamw_update(&opt, w.data(), g.data(), m1.data(), m2.data(), n, 7e-4f, 0.1f, 0.7f, 3);
    /* wc_adamw computes these and calls the launcher; a model is not needed to test it */
    float c1 = (float)(1.0 / (1.0 - pow(opt.beta1, 3.0))), c2 = (float)(1.0 / (1.0 - pow(opt.beta2, 3.0)));
    wc_adamw_launch(dw, dg, dm1, dm2, n, 7e-4f, 0.1f, 0.7f, opt.beta1, opt.beta2, opt.eps, c1, c2, w16, stream);
    check("adamw: weights", down(dw, n), w, 0, FP32, OWN, "the same fp32 operations, none fused");
    check("adamw: first moment", down(dm1, n), m1, 0, FP32, OWN, "the same fp32 operations, none fused");
    check("adamw: second moment", down(dm2, n), m2, 0, FP32, OWN, "the same fp32 operations, none fused");
    std::vector<float> wr(n);
    for (size_t i = 0; i < n; i++) wr[i] = wp_bf16_round(w[i]);
    check("adamw: bf16 working copy", down_bf16(w16, n), wr, 0, BF16, OWN, "the same rounding");
    CUDA_CHECK(cudaFree(dw)); CUDA_CHECK(cudaFree(dg)); CUDA_CHECK(cudaFree(dm1)); CUDA_CHECK(cudaFree(dm2));
    CUDA_CHECK(cudaFree(w16));
}

static float from_bits(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }

static void test_convert(void) {
    /* ties, NaNs with payloads in the lower half, infinities, overflow, subnormals, then random */
    static const uint32_t special[] = { 0x3F808000u, 0x3F818000u, 0xBF808000u, 0x7F800001u, 0xFF80FFFFu,
                                        0x7FC00000u, 0x7F800000u, 0xFF800000u, 0x7F7FFFFFu, 0x7F7F8000u,
                                        0x00008000u, 0x00018000u, 0x80008001u, 0x007FFFFFu, 0x80000000u };
    const size_t ns = sizeof special / sizeof special[0], n = 100000;
    std::vector<float> src(n);
    for (size_t i = 0; i < n; i++) {
        rng = rng * 6364136223846793005ull + 1442695040888963407ull;
        src[i] = i < ns ? from_bits(special[i]) : from_bits((uint32_t)(rng >> 32));
    }
    std::vector<float> ref(n);
    for (size_t i = 0; i < n; i++) ref[i] = wp_bf16_round(src[i]);
    float *ds = up(src), *back = dev_alloc<float>(n);
    uint16_t *d16 = dev_alloc<uint16_t>(n);
    wc_convert_f32_to_bf16(d16, ds, n, stream);
    std::vector<uint16_t> h = down(d16, n);
    int same = 1;
    for (size_t i = 0; i < n; i++) same &= h[i] == wp_f32_to_bf16(src[i]);
    check_true("f32 -> bf16: every bit as wp_f32_to_bf16", same, "100000 patterns: ties, NaN payloads, infinities, subnormals, random");
    wc_convert_bf16_to_f32(back, d16, n, stream);
    std::vector<float> b = down(back, n);
    same = 1;
    for (size_t i = 0; i < n; i++) { uint32_t u, v; memcpy(&u, &b[i], 4); memcpy(&v, &ref[i], 4); same &= u == v; }
    check_true("bf16 -> f32: every bit", same, "the widening of the values above");
    /* acc in the four pairs of formats, added and first */
    const size_t m = 5000;
    std::vector<float> a = rand_bf16(m, 1.0), s = rand_bf16(m, 1.0), sf = rand_f32(m, 1.0);
    for (int first = 0; first <= 1; first++)
        for (int dd = 0; dd <= 1; dd++)
            for (int sd = 0; sd <= 1; sd++) {
                const std::vector<float> &sv = sd ? s : sf;
                std::vector<float> ref2(m);
                for (size_t i = 0; i < m; i++) {
                    float v = first ? sv[i] : a[i] + sv[i];
                    ref2[i] = dd ? wp_bf16_round(v) : v;
                }
                void *dst = dd ? (void *)up_bf16(a) : (void *)up(a);
                void *sp = sd ? (void *)up_bf16(s) : (void *)up(sf);
                wc_acc_launch(dst, dd, sp, sd, m, first, stream);
                std::vector<float> got = dd ? down_bf16((uint16_t *)dst, m) : down((float *)dst, m);
                char name[64];
                snprintf(name, sizeof name, "acc %s %s= %s", dd ? "bf16" : "fp32", first ? "" : "+", sd ? "bf16" : "fp32");
                check(name, got, ref2, 0, dd ? BF16 : FP32, OWN, "one fp32 sum, one rounding");
                CUDA_CHECK(cudaFree(dst)); CUDA_CHECK(cudaFree(sp));
            }
    CUDA_CHECK(cudaFree(ds)); CUDA_CHECK(cudaFree(back)); CUDA_CHECK(cudaFree(d16));
}

static void test_sumsq(void) {
    const size_t n = 1000003;
    std::vector<float> g = rand_f32(n, 0.01);
    double ref = adamw_sumsq(g.data(), n);
    float *dg = up(g);
    double *part = dev_alloc<double>(WC_SUMSQ_BLOCKS), *out = dev_alloc<double>(2);
    wc_sumsq_launch(dg, n, part, out, stream);
    wc_sumsq_launch(dg, n, part, out + 1, stream);
    std::vector<double> r = down(out, 2);
    double rel = fabs(r[0] - ref) / ref;
    char what[160];
    snprintf(what, sizeof what, "gpu %.17g cpu %.17g: rel %.2e (tolerance 1e-12: fp64 sums of fp32 squares in "
             "another order)", r[0], ref, rel);
    check_true("sumsq against adamw_sumsq", rel <= 1e-12, what);
    check_true("sumsq twice: the same bits", memcmp(&r[0], &r[1], sizeof(double)) == 0, "a fixed tree for a given n");
    CUDA_CHECK(cudaFree(dg)); CUDA_CHECK(cudaFree(part)); CUDA_CHECK(cudaFree(out));
}

/* ---- whole chunks ---- */

struct ChunkRun {
    std::vector<std::vector<float>> x;       /* x[i]: the input of chunk i (i >= 1) */
    std::vector<std::vector<float>> dx;      /* dx[i]: the gradient of chunk i's input (i >= 1) */
    std::vector<std::vector<float>> dparams; /* per chunk, fp32 */
    double loss;
};

static int most_layers(const std::vector<WpChunk> &ks) {
    int most = 0;
    for (const WpChunk &k : ks) most = k.nlayers > most ? k.nlayers : most;
    return most;
}

/* The model as the chunks ks, forward then backward, on the CPU in bf16 mode. */
static ChunkRun run_cpu(const WpConfig *c, const std::vector<WpChunk> &ks, const std::vector<std::vector<float>> &p,
                        const std::vector<int> &tok, const std::vector<int> &tgt, int recompute, int ce_block) {
    size_t TH = (size_t)c->mbs * c->seq * c->hidden;
    int n = (int)ks.size();
    WpScratch *s = wp_scratch_new(c, most_layers(ks));
    wp_scratch_set_precision(s, WP_BF16);
    wp_scratch_set_ce_block(s, ce_block);
    ChunkRun r;
    r.x.assign(n + 1, std::vector<float>(TH));
    r.dx.assign(n + 1, std::vector<float>(TH));
    r.loss = 0;
    std::vector<std::vector<float>> stash(n);
    for (int i = 0; i < n; i++) {
        stash[i].resize(wp_stash_floats(c, &ks[i], recompute));
        wp_chunk_forward(c, &ks[i], p[i].data(), tok.data(), tgt.data(), r.x[i].data(), r.x[i + 1].data(),
                         stash[i].data(), recompute, s, &r.loss);
    }
    float scale = 1.0f / (float)(c->mbs * c->seq);
    for (int i = n - 1; i >= 0; i--) {
        r.dparams.insert(r.dparams.begin(), std::vector<float>(ks[i].nparams, 0.0f));
        wp_chunk_backward(c, &ks[i], p[i].data(), tok.data(), tgt.data(), stash[i].data(), recompute,
                          r.dx[i + 1].data(), r.dx[i].data(), r.dparams[0].data(), scale, s);
    }
    wp_scratch_free(s);
    return r;
}

/* split: the backward as the zero-bubble schedules run it, every chunk's BWD_B (last to first),
 * then every BWD_W, each keep filled with NaN first (0xFF bytes) so that a part W reads and B did
 * not write shows. */
static ChunkRun run_gpu(const WpConfig *c, const std::vector<WpChunk> &ks, const std::vector<std::vector<float>> &p,
                        const std::vector<int> &tok, const std::vector<int> &tgt, int recompute, int ce_block,
                        int split = 0) {
    size_t TH = (size_t)c->mbs * c->seq * c->hidden;
    int n = (int)ks.size();
    char err[256];
    WcModel *m = wc_model_new(c, most_layers(ks), 1, 1, recompute, stream, err, sizeof err);
    if (!m) { fprintf(stderr, "test_kernels: %s\n", err); exit(1); }
    if (wc_model_set_ce_block(m, ce_block, err, sizeof err)) { fprintf(stderr, "test_kernels: %s\n", err); exit(1); }
    int *dtok = up(tok), *dtgt = up(tgt);
    std::vector<uint16_t *> dp(n), x(n + 1), dx(n + 1);
    std::vector<float *> dg(n);
    std::vector<void *> stash(n);
    for (int i = 0; i <= n; i++) { x[i] = dev_alloc<uint16_t>(TH); dx[i] = dev_alloc<uint16_t>(TH); }
    double *loss = dev_alloc<double>(1);
    for (int i = 0; i < n; i++) {
        dp[i] = up_bf16(p[i]);
        dg[i] = dev_alloc<float>(ks[i].nparams);
        stash[i] = dev_alloc<char>(wp_stash_bytes(c, &ks[i], recompute, WP_BF16));
        wc_chunk_forward(m, &ks[i], dp[i], dtok, dtgt, x[i], x[i + 1], stash[i], loss);
    }
    float scale = 1.0f / (float)(c->mbs * c->seq);
    std::vector<void *> keep(n, nullptr);
    for (int i = n - 1; i >= 0; i--) {
        if (!split) { wc_chunk_backward(m, &ks[i], dp[i], dtok, dtgt, stash[i], dx[i + 1], dx[i], dg[i], scale); continue; }
        size_t kb = wp_keep_bytes(c, &ks[i], recompute, WP_BF16);
        keep[i] = dev_alloc<char>(kb);
        CUDA_CHECK(cudaMemsetAsync(keep[i], 0xFF, kb, stream));
        wc_chunk_backward_input(m, &ks[i], dp[i], dtgt, stash[i], dx[i + 1], dx[i], keep[i], scale);
    }
    for (int i = 0; split && i < n; i++) {
        wc_chunk_backward_weights(m, &ks[i], dtok, dtgt, stash[i], keep[i], dg[i], scale);
        CUDA_CHECK(cudaStreamSynchronize(stream));
        CUDA_CHECK(cudaFree(keep[i]));
    }
    ChunkRun r;
    r.loss = down(loss, 1)[0];
    for (int i = 0; i <= n; i++) { r.x.push_back(down_bf16(x[i], TH)); r.dx.push_back(down_bf16(dx[i], TH)); }
    for (int i = 0; i < n; i++) r.dparams.push_back(down(dg[i], ks[i].nparams));
    for (int i = 0; i <= n; i++) { CUDA_CHECK(cudaFree(x[i])); CUDA_CHECK(cudaFree(dx[i])); }
    for (int i = 0; i < n; i++) { CUDA_CHECK(cudaFree(dp[i])); CUDA_CHECK(cudaFree(dg[i])); CUDA_CHECK(cudaFree(stash[i])); }
    CUDA_CHECK(cudaFree(dtok)); CUDA_CHECK(cudaFree(dtgt)); CUDA_CHECK(cudaFree(loss));
    wc_model_free(m);
    return r;
}

static const char *CHAIN = "roundings one ulp apart (sums in another order) carried through the layers";

/* The model as the chunks ks (chunk i of layers[i] layers) on the CPU and the GPU, with and without
 * recompute: each chunk's output and input gradient, the mean loss, every tensor's gradient; and
 * the GPU's recomputed run the same bits as its plain one. llama3: as Llama 3.1 and Qwen 3 have
 * it, RoPE scaled (an original context of 32, so that the frequencies fall in all three of the
 * rule's bands) and an explicit head_dim of 64 (q 256 wide against a hidden size of 128).
 * mlp_tile: the MLP in tiles of that many of the 200 tokens (config.h's mlp_tile; 0: untiled). */
static void test_chunks(const char *label, int tied, const std::vector<int> &layers, int llama3 = 0, int mlp_tile = 0) {
    WpConfig c;
    memset(&c, 0, sizeof c);
    c.hidden = 128; c.layers = 3; c.heads = 4; c.kv_heads = 2; c.head_dim = 32; c.ffn = 352; c.vocab = 512;
    c.eps = 1e-5f; c.rope_theta = 10000.0f; c.tied = tied; c.seq = 100; c.mbs = 2;
    c.mlp_tile = mlp_tile;
    if (llama3) {
        c.head_dim = 64;
        c.rope_scaling.factor = 8; c.rope_scaling.low_freq_factor = 1; c.rope_scaling.high_freq_factor = 4;
        c.rope_scaling.original_max_position_embeddings = 32;
    }
    const int ce_block = 64;   /* 200 tokens: blocks of 64, 64, 64 and 8 */
    const int n = (int)layers.size();
    std::vector<WpChunk> ks;
    for (int i = 0, l0 = 0; i < n; l0 += layers[i], i++)
        ks.push_back(wp_chunk_make(&c, i, l0, layers[i], i == 0, i == n - 1));
    std::vector<std::vector<float>> p(n);
    for (int i = 0; i < n; i++) {
        p[i].resize(ks[i].nparams);
        wp_chunk_init(&c, &ks[i], p[i].data(), 7);
        wp_bf16_round_array(p[i].data(), p[i].size());   /* the working copy */
    }
    int T = c.mbs * c.seq;
    std::vector<int> tok(T), tgt(T);
    for (int t = 0; t < T; t++) {
        tok[t] = (int)((urand() + 1.0) * 0.5 * c.vocab) % c.vocab;
        tgt[t] = t % 17 == 3 ? -1 : (int)((urand() + 1.0) * 0.5 * c.vocab) % c.vocab;
    }
    ChunkRun gpu_plain;
    for (int rec = 0; rec <= 1; rec++) {
        ChunkRun cr = run_cpu(&c, ks, p, tok, tgt, rec, ce_block), gr = run_gpu(&c, ks, p, tok, tgt, rec, ce_block);
        char name[128];
        const char *rs = rec ? " (recompute)" : "";
        for (int i = 1; i < n; i++) {
            snprintf(name, sizeof name, "%s: chunk %d forward: x_out%s", label, i - 1, rs);
            check(name, gr.x[i], cr.x[i], 8, BF16, RMS, CHAIN);
        }
        snprintf(name, sizeof name, "%s: chunk %d forward: mean loss%s", label, n - 1, rs);
        check(name, std::vector<float>(1, (float)(gr.loss / T)), std::vector<float>(1, (float)(cr.loss / T)), 1, BF16, OWN, "a mean over 200 tokens of losses from bf16 activations");
        for (int i = n - 1; i >= 1; i--) {
            snprintf(name, sizeof name, "%s: chunk %d backward: dx_in%s", label, i, rs);
            check(name, gr.dx[i], cr.dx[i], 8, BF16, RMS, CHAIN);
        }
        for (int i = 0; i < n; i++) {   /* each tensor of the gradient against its own rms */
            std::vector<WpTensor> tens(wp_chunk_tensors(&c, &ks[i], NULL));
            wp_chunk_tensors(&c, &ks[i], tens.data());
            for (const WpTensor &t : tens) {
                size_t nel = t.rows * t.cols;
                snprintf(name, sizeof name, "%s: chunk %d dparams %s%s", label, i, t.name, rs);
                check(name, gr.dparams[i].data() + t.offset, cr.dparams[i].data() + t.offset, nel, 8, BF16, RMS, CHAIN);
            }
        }
        /* the split backward (zero bubble): the same bits as the whole one */
        ChunkRun sr = run_gpu(&c, ks, p, tok, tgt, rec, ce_block, 1);
        int same = sr.loss == gr.loss;
        for (int i = 0; i < n; i++) same &= sr.dparams[i] == gr.dparams[i];
        for (int i = 1; i < n; i++) same &= sr.dx[i] == gr.dx[i];
        snprintf(name, sizeof name, "%s: split backward (BWD_B, BWD_W) bit-identical to BWD%s", label, rs);
        check_true(name, same, "the same kernels in the same order in each half; the norms' sums added once");
        if (!rec) gpu_plain = gr;
        else {
            int same = gr.loss == gpu_plain.loss;
            for (int i = 0; i < n; i++) same &= gr.dparams[i] == gpu_plain.dparams[i];
            for (int i = 1; i < n; i++) same &= gr.x[i] == gpu_plain.x[i] && gr.dx[i] == gpu_plain.dx[i];
            snprintf(name, sizeof name, "%s: recompute bit-identical to without", label);
            check_true(name, same, "the recomputed forward rounds as the first, every kernel is deterministic");
        }
    }
}

int main(void) {
    int ndev = 0;
    if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev == 0) {
        printf("test_kernels: no CUDA device here; nothing run\n");
        return 0;
    }
    cudaDeviceProp prop;
    CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
    printf("test_kernels: %s, against the CPU runtime's bf16 reference (%d OpenMP threads)\n", prop.name,
           omp_get_max_threads());
    CUDA_CHECK(cudaStreamCreate(&stream));
    matmul_init();
    test_convert();
    test_sumsq();
    test_adamw();
    test_rmsnorm();
    test_rope();
    test_swiglu();
    test_embedding();
    test_crossentropy();
    test_gemm(100, 72, 136);
    test_gemm(37, 40, 24);
    test_gemm(33, 20, 30);                /* rows of 40 and 60 bytes: no 16-byte leading dimension */
    test_attention(2, 100, 4, 2, 16);    /* GQA, S not a multiple of the tile (CUDA cores only) */
    test_attention(1, 64, 2, 2, 32);     /* exactly one tile (CUDA cores only) */
    test_attention(1, 64, 2, 2, 64);     /* exactly one tile, both kinds from here on */
    test_attention(2, 100, 4, 2, 64);    /* G > 1, two query heads per kv head, S not a multiple of 64 */
    test_attention(1, 200, 8, 2, 64);    /* four query heads per kv head */
    test_attention(2, 100, 4, 2, 128);   /* the largest head dimension, GQA 2 */
    test_attention(2, 130, 4, 1, 128);   /* one kv head, GQA 4 */
    test_attention(1, 517, 4, 2, 128);   /* nine tiles, the double-buffered loads in steady state */
    test_attention_block(40, 4, 2, 16);   /* ring attention's blocks: GQA, a chunk inside one tile */
    test_attention_block(100, 4, 4, 128); /* MHA, the largest head dimension, chunks across two tiles */
    test_attention_block(70, 6, 1, 64);   /* multi-query */
    test_chunks("3 chunks of 1 layer", 0, std::vector<int>{ 1, 1, 1 });     /* first, middle, last */
    test_chunks("1 chunk of 3 layers, tied", 1, std::vector<int>{ 3 });     /* layers' stash parts in sequence;
                                                                             * the head's dW into the embedding's */
    test_chunks("no-layer chunks", 0, std::vector<int>{ 0, 2, 0 });         /* the embedding alone, the head alone */
    test_chunks("3 chunks, RoPE scaled, head_dim 64", 0, std::vector<int>{ 1, 1, 1 }, 1);
    test_chunks("3 chunks, MLP in tiles of 48", 0, std::vector<int>{ 1, 2, 1 }, 0, 48);   /* 4 x 48 + 8 */
    CUDA_CHECK(cudaStreamDestroy(stream));
    printf("test_kernels: %d checks, %d failed\n", checks, failures);
    return failures ? 1 : 0;
}
