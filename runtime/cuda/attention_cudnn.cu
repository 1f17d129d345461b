/* Causal grouped-query attention through cuDNN's fused flash attention (SDPA), built with the
 * cudnn-frontend graph API, behind the C interface of kernels_cuda.cuh (wc_cudnn_*).
 *
 * Same tensors as our kernels (attention_cuda.cu): Q, K and V are strided views of the packed
 * qkv buffer [T, (heads + 2 kv) * hd] (token t = g * S + s; head h's q at column h * hd, kv head
 * j's k at (heads + j) * hd and v at (heads + kv + j) * hd), so nothing is permuted; the output
 * is [T, heads * hd]; the fp32 Stats tensor cuDNN keeps for the backward, m + log(l) of the
 * scaled scores per query row, laid out [G, heads, S], is exactly our lse; dQ, dK and dV are
 * written into the packed dqkv at the places of Q, K and V.
 *
 * libcudnn.so.9 is loaded at run time (the frontend's dynamic-loading mode, dlopen): a program
 * built here runs on a machine without cuDNN with our own kernels, and says so. The library is
 * looked for as WP_CUDNN_LIBRARY names it, else by the loader's search ("libcudnn.so.9"), else in
 * the directory the build found (WP_CUDNN_LIBDIR: the nvidia-cudnn wheel PyTorch uses).
 *
 * Graphs are built once per shape, at start-up (wc_cudnn_attention_plan), and cached; executing
 * one is a lookup and a launch. Their workspace is one device buffer, allocated at plan time at
 * the largest size any planned graph needs, and reported (wc_cudnn_attention_workspace_bytes) so
 * that the start-up memory line counts it. The backward is cuDNN's deterministic algorithm unless
 * WP_CUDNN_DETERMINISTIC=0: the step is then reproducible bit for bit, as on the CPU.
 *
 * Built without the frontend's headers (WP_HAVE_CUDNN undefined: the build did not find them or
 * cudnn.h), every function here says "not built with cuDNN" and the dispatch uses our kernels. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cuda_runtime.h>
#include "common/settings.h"
#include "cuda/common_cuda.cuh"
#include "cuda/kernels_cuda.cuh"

#ifndef WP_HAVE_CUDNN

int wc_cudnn_load(char *why, size_t whylen) {
    snprintf(why, whylen, "built without cuDNN (the build found no cudnn-frontend headers or cudnn.h)");
    return 0;
}
int wc_cudnn_attention_plan(int, int, int, int, int, char *why, size_t whylen) {
    snprintf(why, whylen, "built without cuDNN");
    return -1;
}
int wc_cudnn_attention_planned(int, int, int, int, int) { return 0; }
size_t wc_cudnn_attention_workspace_bytes(void) { return 0; }
int wc_cudnn_attention_deterministic(void) { return 0; }
void wc_cudnn_attention_forward(uint16_t *, float *, const uint16_t *, int, int, int, int, int, cudaStream_t) {
    fprintf(stderr, "attention: cuDNN called in a build without it\n");
    abort();
}
void wc_cudnn_attention_backward(uint16_t *, const uint16_t *, const uint16_t *, const float *,
                                            const uint16_t *, int, int, int, int, int, cudaStream_t) {
    fprintf(stderr, "attention: cuDNN called in a build without it\n");
    abort();
}

#else

#include <dlfcn.h>
#include <math.h>
#include <algorithm>
#include <cstring>
#include <memory>
#include <unordered_map>
#include <cudnn_frontend.h>

namespace fe = cudnn_frontend;

/* the frontend's dynamic-loading mode resolves every cuDNN call through this handle */
namespace cudnn_frontend { void *cudnn_dlhandle = nullptr; }

/* The uids of the graphs' tensors (the variant pack's keys). */
enum { U_Q = 1, U_K, U_V, U_O, U_STATS, U_DO, U_DQ, U_DK, U_DV };

/* One shape's two graphs. */
struct Graphs {
    std::shared_ptr<fe::graph::Graph> fwd, bwd;
};

static cudnnHandle_t handle;
static int loaded = -1;                        /* -1 not tried, 0 failed, 1 loaded */
static char load_why[512];
static int deterministic = -1;                 /* WP_CUDNN_DETERMINISTIC, read once */
static std::unordered_map<uint64_t, Graphs> cache;
static void *workspace;
static size_t workspace_bytes;

static uint64_t shape_key(int G, int S, int heads, int kv_heads, int hd) {
    return ((uint64_t)G << 48) ^ ((uint64_t)S << 24) ^ ((uint64_t)heads << 16) ^ ((uint64_t)kv_heads << 8) ^ (uint64_t)hd;
}

static void *open_cudnn(char *why, size_t whylen) {
    const char *named = wp_env_text("WP_CUDNN_LIBRARY");
    if (named) {
        void *h = dlopen(named, RTLD_NOW | RTLD_GLOBAL);
        if (!h) snprintf(why, whylen, "WP_CUDNN_LIBRARY=%s: %s", named, dlerror());
        return h;
    }
    void *h = dlopen("libcudnn.so.9", RTLD_NOW | RTLD_GLOBAL);
    if (h) return h;
    snprintf(why, whylen, "libcudnn.so.9 not found (%s)", dlerror());
#ifdef WP_CUDNN_LIBDIR
    char path[4096];
    snprintf(path, sizeof path, "%s/libcudnn.so.9", WP_CUDNN_LIBDIR);
    h = dlopen(path, RTLD_NOW | RTLD_GLOBAL);
    if (h) return h;
    snprintf(why, whylen, "libcudnn.so.9 found neither by the loader nor in %s", WP_CUDNN_LIBDIR);
#endif
    return NULL;
}

int wc_cudnn_load(char *why, size_t whylen) {
    if (loaded < 0) {
        loaded = 0;
        void *h = open_cudnn(load_why, sizeof load_why);
        if (h) {
            fe::cudnn_dlhandle = h;
            size_t v = 0;
            try { v = fe::detail::get_backend_version(); } catch (const std::exception &e) { v = 0; }
            if (v < 90000) {
                snprintf(load_why, sizeof load_why, "cuDNN %zu.%zu is older than 9.0, which the fused attention needs",
                         v / 10000, v / 100 % 100);
            } else if (fe::detail::create_handle(&handle) != CUDNN_STATUS_SUCCESS) {
                snprintf(load_why, sizeof load_why, "cudnnCreate failed");
            } else {
                loaded = 1;
                snprintf(load_why, sizeof load_why, "cuDNN %zu.%zu.%zu", v / 10000, v / 100 % 100, v % 100);
            }
        }
        deterministic = wp_env_number("WP_CUDNN_DETERMINISTIC") != 0;
    }
    snprintf(why, whylen, "%s", load_why);
    return loaded;
}

int wc_cudnn_attention_deterministic(void) { return deterministic == 1; }

/* A 4-d tensor [G, heads, S, hd] viewed in a buffer of rows of `ld` elements (token t = g*S+s). */
static fe::graph::Tensor_attributes view(const char *name, int uid, int G, int nh, int S, int hd, int64_t ld) {
    return fe::graph::Tensor_attributes()
        .set_name(name)
        .set_uid(uid)
        .set_dim({ G, nh, S, hd })
        .set_stride({ (int64_t)S * ld, hd, ld, 1 });
}

static void set_types(fe::graph::Graph &g) {
    g.set_io_data_type(fe::DataType_t::BFLOAT16)
        .set_intermediate_data_type(fe::DataType_t::FLOAT)
        .set_compute_data_type(fe::DataType_t::FLOAT);
}

/* Q, K and V of a graph of bf16 io and fp32 compute: views of the packed qkv rows */
struct QkvViews { std::shared_ptr<fe::graph::Tensor_attributes> Q, K, V; };
static QkvViews qkv_views(fe::graph::Graph &g, int G, int S, int heads, int kv, int hd) {
    set_types(g);
    int64_t width = (int64_t)(heads + 2 * kv) * hd;
    return { g.tensor(view("Q", U_Q, G, heads, S, hd, width)), g.tensor(view("K", U_K, G, kv, S, hd, width)),
             g.tensor(view("V", U_V, G, kv, S, hd, width)) };
}

static std::shared_ptr<fe::graph::Graph> forward_graph(int G, int S, int heads, int kv, int hd) {
    auto g = std::make_shared<fe::graph::Graph>();
    auto [Q, K, V] = qkv_views(*g, G, S, heads, kv, hd);
    int64_t od = (int64_t)heads * hd;
    auto opt = fe::graph::SDPA_attributes()
                   .set_name("attention")
                   .set_generate_stats(true)
                   .set_attn_scale(1.0f / sqrtf((float)hd))
                   .set_diagonal_alignment(fe::DiagonalAlignment_t::TOP_LEFT)
                   .set_diagonal_band_right_bound(0);
    auto [O, Stats] = g->sdpa(Q, K, V, opt);
    O->set_output(true).set_uid(U_O).set_dim({ G, heads, S, hd }).set_stride({ (int64_t)S * od, hd, od, 1 });
    Stats->set_output(true).set_uid(U_STATS).set_data_type(fe::DataType_t::FLOAT)
        .set_dim({ G, heads, S, 1 }).set_stride({ (int64_t)heads * S, S, 1, 1 });
    return g;
}

static std::shared_ptr<fe::graph::Graph> backward_graph(int G, int S, int heads, int kv, int hd) {
    auto g = std::make_shared<fe::graph::Graph>();
    auto [Q, K, V] = qkv_views(*g, G, S, heads, kv, hd);
    int64_t width = (int64_t)(heads + 2 * kv) * hd, od = (int64_t)heads * hd;
    auto O = g->tensor(view("O", U_O, G, heads, S, hd, od));
    auto dO = g->tensor(view("dO", U_DO, G, heads, S, hd, od));
    auto Stats = g->tensor(fe::graph::Tensor_attributes()
                               .set_name("Stats")
                               .set_uid(U_STATS)
                               .set_dim({ G, heads, S, 1 })
                               .set_stride({ (int64_t)heads * S, S, 1, 1 })
                               .set_data_type(fe::DataType_t::FLOAT));
    auto opt = fe::graph::SDPA_backward_attributes()
                   .set_name("attention_backward")
                   .set_attn_scale(1.0f / sqrtf((float)hd))
                   .set_deterministic_algorithm(deterministic == 1)
                   .set_diagonal_alignment(fe::DiagonalAlignment_t::TOP_LEFT)
                   .set_diagonal_band_right_bound(0);
    auto [dQ, dK, dV] = g->sdpa_backward(Q, K, V, O, dO, Stats, opt);
    dQ->set_output(true).set_uid(U_DQ).set_dim({ G, heads, S, hd }).set_stride({ (int64_t)S * width, hd, width, 1 });
    dK->set_output(true).set_uid(U_DK).set_dim({ G, kv, S, hd }).set_stride({ (int64_t)S * width, hd, width, 1 });
    dV->set_output(true).set_uid(U_DV).set_dim({ G, kv, S, hd }).set_stride({ (int64_t)S * width, hd, width, 1 });
    return g;
}

/* validate, lower, pick by the heuristics and build the plans: the frontend's steps of a build */
static int build(fe::graph::Graph &g, const char *what, char *why, size_t whylen) {
    auto st = g.build(handle, { fe::HeurMode_t::A });
    if (!st.is_good()) {
        snprintf(why, whylen, "cuDNN refuses the %s: %s", what, st.get_message().c_str());
        return -1;
    }
    return 0;
}

int wc_cudnn_attention_plan(int G, int S, int heads, int kv_heads, int hd, char *why, size_t whylen) {
    if (wc_cudnn_load(why, whylen) != 1) return -1;
    uint64_t key = shape_key(G, S, heads, kv_heads, hd);
    if (cache.count(key)) return 0;
    Graphs gr;
    try {
        gr.fwd = forward_graph(G, S, heads, kv_heads, hd);
        gr.bwd = backward_graph(G, S, heads, kv_heads, hd);
        if (build(*gr.fwd, "forward", why, whylen) || build(*gr.bwd, "backward", why, whylen)) return -1;
    } catch (const std::exception &e) {
        snprintf(why, whylen, "cuDNN: %s", e.what());
        return -1;
    }
    size_t need = (size_t)std::max(gr.fwd->get_workspace_size(), gr.bwd->get_workspace_size());
    if (need > workspace_bytes) {
        if (workspace) CUDA_CHECK(cudaFree(workspace));
        workspace = NULL;
        if (cudaMalloc(&workspace, need) != cudaSuccess) {
            cudaGetLastError();
            workspace_bytes = 0;
            snprintf(why, whylen, "cuDNN's attention workspace of %zu bytes does not fit on the device", need);
            return -1;
        }
        workspace_bytes = need;
    }
    cache.emplace(key, gr);
    return 0;
}

int wc_cudnn_attention_planned(int G, int S, int heads, int kv_heads, int hd) {
    return loaded == 1 && cache.count(shape_key(G, S, heads, kv_heads, hd)) > 0;
}

size_t wc_cudnn_attention_workspace_bytes(void) { return workspace_bytes; }

static const Graphs &graphs(int G, int S, int heads, int kv_heads, int hd) {
    auto it = cache.find(shape_key(G, S, heads, kv_heads, hd));
    if (it == cache.end()) {
        fprintf(stderr, "attention: no cuDNN graph planned for G %d, S %d, heads %d/%d, hd %d\n", G, S, heads, kv_heads, hd);
        abort();
    }
    return it->second;
}

static void run(fe::graph::Graph &g, std::unordered_map<fe::graph::Tensor_attributes::uid_t, void *> &pack,
                cudaStream_t s, const char *what) {
    /* a failure ends the job as any CUDA call's does (cuda_check.h) */
    if (fe::detail::set_stream(handle, s) != CUDNN_STATUS_SUCCESS)
        wp_call_failed(CUDA_FAIL_STATUS, __FILE__, __LINE__, "cudnnSetStream", "cuDNN refused the stream");
    auto st = g.execute(handle, pack, workspace);
    if (!st.is_good()) wp_call_failed(CUDA_FAIL_STATUS, __FILE__, __LINE__, what, st.get_message().c_str());
}

void wc_cudnn_attention_forward(uint16_t *out, float *lse, const uint16_t *qkv, int G, int S, int heads,
                                           int kv_heads, int hd, cudaStream_t s) {
    if (G == 0 || S == 0) return;
    const Graphs &gr = graphs(G, S, heads, kv_heads, hd);
    uint16_t *q = (uint16_t *)qkv;
    std::unordered_map<fe::graph::Tensor_attributes::uid_t, void *> pack = {
        { U_Q, q }, { U_K, q + (size_t)heads * hd }, { U_V, q + (size_t)(heads + kv_heads) * hd },
        { U_O, out }, { U_STATS, lse },
    };
    run(*gr.fwd, pack, s, "the cuDNN attention graph (forward)");
}

void wc_cudnn_attention_backward(uint16_t *dqkv, const uint16_t *dout, const uint16_t *out, const float *lse,
                                            const uint16_t *qkv, int G, int S, int heads, int kv_heads, int hd,
                                            cudaStream_t s) {
    if (G == 0 || S == 0) return;
    const Graphs &gr = graphs(G, S, heads, kv_heads, hd);
    uint16_t *q = (uint16_t *)qkv;
    size_t ko = (size_t)heads * hd, vo = (size_t)(heads + kv_heads) * hd;
    std::unordered_map<fe::graph::Tensor_attributes::uid_t, void *> pack = {
        { U_Q, q }, { U_K, q + ko }, { U_V, q + vo }, { U_O, (void *)out }, { U_DO, (void *)dout },
        { U_STATS, (void *)lse }, { U_DQ, dqkv }, { U_DK, dqkv + ko }, { U_DV, dqkv + vo },
    };
    run(*gr.bwd, pack, s, "the cuDNN attention graph (backward)");
}

#endif
