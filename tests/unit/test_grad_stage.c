/* A bf16 weight gradient summed one segment at a time (model.h's wp_scratch_set_grad_bf16,
 * config.h's wp_grad_segment) against the whole chunk's gradient summed in fp32 and rounded once,
 * as the step ops did before: the bf16 gradients must be the same bits, for the whole backward
 * and the split one (B then W), on the first, a middle and the last chunk, a last chunk without
 * layers, a tied model's single chunk (its head and its embedding one segment) and a tied model's
 * last chunk (the mirror of the embedding), in fp32 and bf16 compute, when the gradient starts a
 * sum and when it holds an earlier micro-batch's. The stage is wp_grad_stage_floats long and
 * nothing is written past it; the segments tile the chunk's parameters once; on llama2-7b the
 * stage is one layer's gradient, not a chunk's. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "check.h"
#include "model_fixture.h"
#include "common/config.h"
#include "cpu/model.h"
#include "common/precision.h"

#define GUARD 64
#define GUARD_VAL 4321.5f

/* Chunk k's parameters from the whole model's (single-chunk layout), by tensor name. */
static float *chunk_params(const WpConfig *c, const WpChunk *k, const float *params) {
    WpChunk whole = wp_chunk_make(c, 0, 0, c->layers, 1, 1);
    int nw = wp_chunk_tensors(c, &whole, NULL), nt = wp_chunk_tensors(c, k, NULL);
    WpTensor *tw = malloc(nw * sizeof *tw), *t = malloc(nt * sizeof *t);
    wp_chunk_tensors(c, &whole, tw);
    wp_chunk_tensors(c, k, t);
    float *p = calloc(k->nparams, 4);
    for (int a = 0; a < nt; a++)
        for (int b = 0; b < nw; b++) {
            const char *name = strcmp(t[a].name, "lm_head.weight") || wp_chunk_has_head(c, &whole) ? t[a].name
                                                                                                  : "model.embed_tokens.weight";
            if (!strcmp(name, tw[b].name)) memcpy(p + t[a].offset, params + tw[b].offset, t[a].rows * t[a].cols * 4);
        }
    free(tw); free(t);
    return p;
}

/* The segments of a chunk cover its parameters once: disjoint, inside it, summing to it. */
static void check_segments(const WpConfig *c, const WpChunk *k) {
    size_t covered = 0, most = 0;
    int n = wp_grad_nsegments(c, k), ok = 1;
    for (int i = 0; i < n; i++) {
        WpGradSegment g = wp_grad_segment(c, k, i);
        ok &= g.off + g.n <= k->nparams && g.n > 0;
        for (int j = 0; j < i; j++) {
            WpGradSegment h = wp_grad_segment(c, k, j);
            ok &= g.off + g.n <= h.off || h.off + h.n <= g.off;
        }
        covered += g.n;
        if (g.n > most) most = g.n;
    }
    CHECK(ok && covered == k->nparams, "chunk %d (%d layers, first %d, last %d): %d segments cover %zu of %zu",
          k->index, k->nlayers, k->first, k->last, n, covered, k->nparams);
    CHECK(wp_grad_stage_floats(c, k) == most, "chunk %d: the stage is the largest segment", k->index);
}

/* One configuration: forward of every chunk, then each chunk's backward (whole, or split when
 * split) into an fp32 gradient rounded once, and into a bf16 one by segments. */
static void check_stage(int tied, const int *layers, int nchunks, int recompute, WpDtype dtype, int split, int first) {
    WpConfig c = tiny_config(tied);
    c.mlp_tile = 4;
    int T = c.mbs * c.seq, H = c.hidden;
    char what[128];
    snprintf(what, sizeof what, "%s%d chunk%s, %s, recompute %d, %s, %s", tied ? "tied, " : "", nchunks,
             nchunks > 1 ? "s" : "", dtype == WP_BF16 ? "bf16" : "fp32", recompute, split ? "split" : "whole",
             first ? "a new sum" : "onto an earlier sum");
    WpChunk whole = wp_chunk_make(&c, 0, 0, c.layers, 1, 1);
    float *params = malloc(whole.nparams * 4);
    int tokens[14], targets[14];
    test_params(&c, &whole, params);
    if (dtype == WP_BF16) wp_bf16_round_array(params, whole.nparams);
    make_batch(&c, tokens, targets);
    WpChunk ks[4];
    int max_layers = 0;
    size_t stage_n = 1;
    for (int i = 0, l0 = 0; i < nchunks; l0 += layers[i], i++) {
        ks[i] = wp_chunk_make(&c, i, l0, layers[i], i == 0, i == nchunks - 1);
        if (layers[i] > max_layers) max_layers = layers[i];
        if (wp_grad_stage_floats(&c, &ks[i]) > stage_n) stage_n = wp_grad_stage_floats(&c, &ks[i]);
        check_segments(&c, &ks[i]);
    }
    WpScratch *s = wp_scratch_new(&c, max_layers);
    CHECK(wp_scratch_set_precision(s, dtype) == 0, "wp_scratch_set_precision");
    float *x[5], *stash[4], *p[4];
    for (int i = 0; i <= nchunks; i++) x[i] = calloc((size_t)T * H, 4);
    double loss = 0;
    for (int i = 0; i < nchunks; i++) {
        p[i] = chunk_params(&c, &ks[i], params);
        stash[i] = malloc(wp_stash_floats(&c, &ks[i], recompute) * 4);
        wp_chunk_forward(&c, &ks[i], p[i], tokens, targets, x[i], x[i + 1], stash[i], recompute, s, &loss);
    }
    float *dy = malloc((size_t)T * H * 4), *dx = malloc((size_t)T * H * 4);
    float *stage = malloc((stage_n + GUARD) * 4);
    int same = 1, guard = 1, moved = 1;
    for (int i = nchunks - 1; i >= 0; i--) {
        const WpChunk *k = &ks[i];
        size_t n = k->nparams;
        fill(dy, (size_t)T * H, 1e-3);
        if (dtype == WP_BF16) wp_bf16_round_array(dy, (size_t)T * H);
        /* the bf16 gradient before this micro-batch: zeros for a new sum, else an earlier sum */
        WpBf16 *g0 = calloc(n, sizeof *g0), *g16 = malloc(n * sizeof *g16), *want = malloc(n * sizeof *want);
        float *g32 = malloc(n * 4);
        if (!first) {
            fill(g32, n, 1e-2);
            wp_f32_to_bf16_array(g0, g32, n);
        }
        memcpy(g16, g0, n * sizeof *g16);
        for (int j = 0; j < GUARD; j++) stage[stage_n + j] = GUARD_VAL;
        for (int pass = 0; pass < 2; pass++) {   /* 0: the fp32 whole-chunk sum, 1: by segments */
            float *dparams = NULL;
            if (pass == 0) { wp_bf16_to_f32_array(g32, g0, n); dparams = g32; }
            else wp_scratch_set_grad_bf16(s, g16, stage);
            if (!split) {
                wp_chunk_backward(&c, k, p[i], tokens, targets, stash[i], recompute, k->last ? NULL : dy,
                                  k->first ? NULL : dx, dparams, 1.0f / T, s);
            } else {
                float *st = malloc(wp_stash_floats(&c, k, recompute) * 4), *keep = malloc(wp_keep_floats(&c, k, recompute) * 4);
                memcpy(st, stash[i], wp_stash_floats(&c, k, recompute) * 4);   /* B writes over its qkv */
                wp_chunk_backward_input(&c, k, p[i], targets, st, recompute, k->last ? NULL : dy, k->first ? NULL : dx,
                                        keep, 1.0f / T, s);
                wp_chunk_backward_weights(&c, k, tokens, targets, st, recompute, keep, dparams, 1.0f / T, s);
                free(st); free(keep);
            }
            if (pass == 0) wp_f32_to_bf16_array(want, g32, n);
            else wp_scratch_set_grad_bf16(s, NULL, NULL);
        }
        same &= !memcmp(g16, want, n * sizeof *g16);
        moved &= memcmp(g16, g0, n * sizeof *g16) != 0;
        for (int j = 0; j < GUARD; j++) guard &= stage[stage_n + j] == GUARD_VAL;
        if (memcmp(g16, want, n * sizeof *g16)) {
            size_t d = 0;
            for (size_t j = 0; j < n; j++) d += g16[j] != want[j];
            fprintf(stderr, "%s: chunk %d: %zu of %zu bf16 gradients differ\n", what, i, d, n);
        }
        free(g0); free(g16); free(want); free(g32);
    }
    CHECK(same, "%s: the bf16 gradient by segments differs from the whole fp32 sum rounded once", what);
    CHECK(guard, "%s: the backward wrote past the stage of wp_grad_stage_floats", what);
    CHECK(moved, "%s: the backward added nothing", what);
    printf("%s: %s\n", what, same ? "bit-identical" : "DIFFERENT");
    for (int i = 0; i <= nchunks; i++) free(x[i]);
    for (int i = 0; i < nchunks; i++) { free(stash[i]); free(p[i]); }
    free(dy); free(dx); free(stage); free(params);
    wp_scratch_free(s);
}

int main(void) {
    int one[1] = { 2 }, two[2] = { 1, 1 }, three[3] = { 1, 1, 0 };
    for (int bf = 0; bf < 2; bf++)
        for (int rc = 0; rc < 2; rc++)
            for (int split = 0; split < 2; split++)
                for (int first = 0; first < 2; first++) {
                    WpDtype dt = bf ? WP_BF16 : WP_FP32;
                    check_stage(0, one, 1, rc, dt, split, first);
                    check_stage(0, three, 3, rc, dt, split, first);   /* a middle chunk, a last one without layers */
                    check_stage(1, one, 1, rc, dt, split, first);     /* tied: the head's gradient is the embedding's */
                    check_stage(1, two, 2, rc, dt, split, first);     /* tied: the last chunk's mirror */
                }
    /* llama2-7b in chunks of 4 layers: the stage is a layer's gradient (0.75 GiB in fp32), not
     * the first chunk's (4 layers and the embedding, 3.5 GiB) */
    WpConfig b = { .hidden = 4096, .layers = 32, .heads = 32, .kv_heads = 32, .head_dim = 128, .ffn = 11008,
                   .vocab = 32000, .eps = 1e-5f, .rope_theta = 10000.0f, .seq = 4096, .mbs = 1 };
    WpChunk first = wp_chunk_make(&b, 0, 0, 4, 1, 0), last = wp_chunk_make(&b, 7, 28, 4, 0, 1);
    CHECK(wp_grad_stage_floats(&b, &first) == wp_layer_nparams(&b) && wp_grad_stage_floats(&b, &last) == wp_layer_nparams(&b),
          "llama2-7b: the stage is %zu and %zu floats, a layer %zu", wp_grad_stage_floats(&b, &first),
          wp_grad_stage_floats(&b, &last), wp_layer_nparams(&b));
    check_segments(&b, &first);
    check_segments(&b, &last);
    printf("llama2-7b, 4-layer chunks: an fp32 stage of %.2f GiB, the first chunk %.2f GiB\n",
           wp_grad_stage_floats(&b, &first) * 4.0 / (1 << 30), first.nparams * 4.0 / (1 << 30));
    return check_summary("test_grad_stage");
}
