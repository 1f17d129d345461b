/* Test fixtures for the CPU model: a tiny config, a deterministic random batch and parameters,
 * and a runner that executes a model as any chunking (one forward and backward of a micro-batch,
 * in fp32 or bf16, with or without recompute). Header-only, for tests (test_grad, test_bf16). */
#ifndef WP_MODEL_FIXTURE_H
#define WP_MODEL_FIXTURE_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "check.h"
#include "common/config.h"
#include "cpu/model.h"

static uint64_t rng_state = 12345;
static inline double urand(void) {   /* uniform in [-1, 1) */
    rng_state = rng_state * 6364136223846793005ull + 1442695040888963407ull;
    return (double)(rng_state >> 11) / 4503599627370496.0 - 1.0;
}
static inline void fill(float *x, size_t n, double scale) { for (size_t i = 0; i < n; i++) x[i] = (float)(scale * urand()); }

static inline WpConfig tiny_config(int tied) {
    WpConfig c = { .hidden = 16, .layers = 2, .heads = 4, .kv_heads = 2, .head_dim = 4, .ffn = 40,
                   .vocab = 32, .eps = 1e-5f, .rope_theta = 10000.0f, .tied = tied, .seq = 7, .mbs = 2 };
    return c;
}

/* How run_chunked runs: precision (WP_FP32 unless said), LM-head block (0: the default). */
typedef struct {
    WpDtype dtype;
    int ce_block;
} RunOpts;

/* Runs the model as the given chunks (each [layer0, layer0 + n)) on one micro-batch, forward then
 * backward, with the full model's parameters (single-chunk layout) in and its gradient out.
 * Returns the mean token loss. o may be NULL (fp32, default blocks). */
static inline double run_chunked_opts(const WpConfig *c, const float *params, const int *tokens,
                               const int *targets, const int *split, int nchunks, int recompute,
                               float *grad, const RunOpts *o) {
    int T = c->mbs * c->seq, H = c->hidden;
    WpChunk whole = wp_chunk_make(c, 0, 0, c->layers, 1, 1);
    int nt_whole = wp_chunk_tensors(c, &whole, NULL);
    WpTensor *tw = malloc(nt_whole * sizeof *tw);
    wp_chunk_tensors(c, &whole, tw);
    WpChunk ks[8];
    float *p[8], *g[8], *stash[8];
    float *x[9];
    int max_layers = 0;
    for (int i = 0, l0 = 0; i < nchunks; l0 += split[i], i++) {
        ks[i] = wp_chunk_make(c, i, l0, split[i], i == 0, i == nchunks - 1);
        if (split[i] > max_layers) max_layers = split[i];
    }
    WpScratch *s = wp_scratch_new(c, max_layers);
    if (o) {
        CHECK(wp_scratch_set_precision(s, o->dtype) == 0, "wp_scratch_set_precision");
        wp_scratch_set_ce_block(s, o->ce_block);
    }
    for (int i = 0; i <= nchunks; i++) x[i] = calloc((size_t)T * H, 4);
    /* scatter the whole model's tensors into the chunks, by name */
    for (int i = 0; i < nchunks; i++) {
        p[i] = calloc(ks[i].nparams, 4); g[i] = calloc(ks[i].nparams, 4);
        size_t ns = wp_stash_floats(c, &ks[i], recompute);
        stash[i] = malloc((ns + 64) * 4);
        for (int j = 0; j < 64; j++) stash[i][ns + j] = 1234.5f;   /* guard: nothing written past */
        int nt = wp_chunk_tensors(c, &ks[i], NULL);
        WpTensor *t = malloc(nt * sizeof *t);
        wp_chunk_tensors(c, &ks[i], t);
        for (int a = 0; a < nt; a++)
            for (int b = 0; b < nt_whole; b++)
                if (!strcmp(t[a].name, tw[b].name))
                    memcpy(p[i] + t[a].offset, params + tw[b].offset, t[a].rows * t[a].cols * 4);
        free(t);
    }
    double loss = 0;
    for (int i = 0; i < nchunks; i++)
        wp_chunk_forward(c, &ks[i], p[i], tokens, targets, x[i], x[i + 1], stash[i], recompute, s, &loss);
    for (int i = nchunks - 1; i >= 0; i--)
        wp_chunk_backward(c, &ks[i], p[i], tokens, targets, stash[i], recompute, x[i + 1], x[i],
                          g[i], 1.0f / T, s);
    /* gather the gradient back into the single-chunk layout */
    for (int i = 0; i < nchunks; i++) {
        size_t ns = wp_stash_floats(c, &ks[i], recompute);
        int ok = 1;
        for (int j = 0; j < 64; j++) ok &= stash[i][ns + j] == 1234.5f;
        CHECK(ok, "chunk %d wrote past its stash of %zu floats (recompute %d)", i, ns, recompute);
        int nt = wp_chunk_tensors(c, &ks[i], NULL);
        WpTensor *t = malloc(nt * sizeof *t);
        wp_chunk_tensors(c, &ks[i], t);
        for (int a = 0; a < nt; a++)
            for (int b = 0; b < nt_whole; b++)
                if (!strcmp(t[a].name, tw[b].name))
                    memcpy(grad + tw[b].offset, g[i] + t[a].offset, t[a].rows * t[a].cols * 4);
        free(t);
        free(p[i]); free(g[i]); free(stash[i]);
    }
    for (int i = 0; i <= nchunks; i++) free(x[i]);
    wp_scratch_free(s);
    free(tw);
    return loss / T;
}

static inline double run_chunked(const WpConfig *c, const float *params, const int *tokens,
                          const int *targets, const int *split, int nchunks, int recompute,
                          float *grad) {
    return run_chunked_opts(c, params, tokens, targets, split, nchunks, recompute, grad, NULL);
}

static inline void make_batch(const WpConfig *c, int *tokens, int *targets) {
    int T = c->mbs * c->seq;
    for (int t = 0; t < T; t++) tokens[t] = (int)((urand() + 1) / 2 * c->vocab) % c->vocab;
    for (int t = 0; t < T; t++) targets[t] = (t % c->seq == c->seq - 1) ? (int)((urand() + 1) / 2 * c->vocab) % c->vocab : tokens[t + 1];
}

/* The model's parameters from wp_chunk_init, then made larger (std 0.3 instead of 0.02, norm
 * weights around 1 rather than exactly 1) so that attention is far from uniform and every
 * gradient is well above the float noise. */
static inline void test_params(const WpConfig *c, const WpChunk *k, float *params) {
    wp_chunk_init(c, k, params, 7);
    int nt = wp_chunk_tensors(c, k, NULL);
    WpTensor *t = malloc(nt * sizeof *t);
    wp_chunk_tensors(c, k, t);
    for (int i = 0; i < nt; i++)
        for (size_t j = 0; j < t[i].rows * t[i].cols; j++) {
            float *v = params + t[i].offset + j;
            *v = t[i].no_decay ? 1.0f + 0.3f * (float)urand() : *v * 15.0f;
        }
    free(t);
}

static inline double max_rel_diff(const float *a, const float *b, size_t n) {
    double m = 0, s = 0;
    for (size_t i = 0; i < n; i++) s = fmax(s, fabs(b[i]));
    for (size_t i = 0; i < n; i++) m = fmax(m, fabs(a[i] - b[i]));
    return s > 0 ? m / s : m;
}

#endif
