/* The split backward of the zero-bubble schedules (model.h: wp_chunk_backward_input, the BWD_B
 * pass, then wp_chunk_backward_weights, BWD_W) against the whole backward, wp_chunk_backward:
 * the input gradient and the parameter gradient must be the same bits, in fp32 and bf16, with
 * and without recompute, on the first, a middle and the last chunk (and a tied model's single
 * chunk), with the LM head in several blocks, when the gradient accumulates into one that holds
 * earlier micro-batches, and when other chunks' computations run on the same scratch between
 * the two halves (as a schedule interleaves them), and in bf16 through a bf16 GEMM too. The keep
 * is exactly wp_keep_floats long; W reads no part of it B did not write (it starts as NaN), no
 * weights (B's copy of them is NaN once B returns) and no attention log-sum-exps (likewise).
 * Each case runs untiled and with the MLP in tiles of 4 of the 14 tokens (the last one shorter). */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "check.h"
#include "model_fixture.h"
#include "sbgemm_standin.h"
#include "cpu/kernels.h"
#include "common/config.h"
#include "cpu/model.h"
#include "common/precision.h"

#define GUARD 64

static int sbgemm_forced;   /* the products run through plain_sbgemm (the label says so) */
static int mlp_tile;        /* WpConfig's mlp_tile for the case (0: untiled at 14 tokens) */
#define GUARD_VAL 4321.5f

/* Chunk k of the given split, its parameters from params of the whole model (single-chunk
 * layout), as the fixture does. */
static float *chunk_params(const WpConfig *c, const WpChunk *k, const float *params) {
    WpChunk whole = wp_chunk_make(c, 0, 0, c->layers, 1, 1);
    int nw = wp_chunk_tensors(c, &whole, NULL), nt = wp_chunk_tensors(c, k, NULL);
    WpTensor *tw = malloc(nw * sizeof *tw), *t = malloc(nt * sizeof *t);
    wp_chunk_tensors(c, &whole, tw);
    wp_chunk_tensors(c, k, t);
    float *p = calloc(k->nparams, 4);
    for (int a = 0; a < nt; a++)
        for (int b = 0; b < nw; b++)
            if (!strcmp(t[a].name, tw[b].name)) memcpy(p + t[a].offset, params + tw[b].offset, t[a].rows * t[a].cols * 4);
    free(tw); free(t);
    return p;
}

/* One configuration: the model cut as split, forward of every chunk, then each chunk's backward
 * both ways from the same stash and output gradient. */
static void check_split(int tied, const int *split, int nchunks, int recompute, WpDtype dtype, int ce_block) {
    WpConfig c = tiny_config(tied);
    c.mlp_tile = mlp_tile;
    int T = c.mbs * c.seq, H = c.hidden;
    char what[112];
    snprintf(what, sizeof what, "%s%d chunk%s, %s, recompute %d, ce block %d, mlp tile %d", tied ? "tied, " : "", nchunks,
             nchunks > 1 ? "s" : "", dtype != WP_BF16 ? "fp32" : sbgemm_forced ? "bf16 (bf16 GEMM)" : "bf16",
             recompute, ce_block, wp_mlp_tile_tokens(&c));
    WpChunk whole = wp_chunk_make(&c, 0, 0, c.layers, 1, 1);
    float *params = malloc(whole.nparams * 4);
    int tokens[14], targets[14], tokens2[14], targets2[14];
    test_params(&c, &whole, params);
    if (dtype == WP_BF16) wp_bf16_round_array(params, whole.nparams);
    make_batch(&c, tokens, targets);
    make_batch(&c, tokens2, targets2);
    int max_layers = 0;
    WpChunk ks[4];
    for (int i = 0, l0 = 0; i < nchunks; l0 += split[i], i++) {
        ks[i] = wp_chunk_make(&c, i, l0, split[i], i == 0, i == nchunks - 1);
        if (split[i] > max_layers) max_layers = split[i];
    }
    WpScratch *s = wp_scratch_new(&c, max_layers);
    CHECK(wp_scratch_set_precision(s, dtype) == 0, "wp_scratch_set_precision");
    wp_scratch_set_ce_block(s, ce_block);
    float *x[5], *stash[4], *p[4];
    for (int i = 0; i <= nchunks; i++) x[i] = calloc((size_t)T * H, 4);
    double loss = 0;
    for (int i = 0; i < nchunks; i++) {
        p[i] = chunk_params(&c, &ks[i], params);
        stash[i] = malloc(wp_stash_floats(&c, &ks[i], recompute) * 4);
        wp_chunk_forward(&c, &ks[i], p[i], tokens, targets, x[i], x[i + 1], stash[i], recompute, s, &loss);
    }
    /* each chunk's output gradient: a bf16-valued random one (what the next chunk sends) */
    float *dy = malloc((size_t)T * H * 4), *dx1 = malloc((size_t)T * H * 4), *dx2 = malloc((size_t)T * H * 4);
    int ok_dx = 1, ok_dp = 1, ok_guard = 1, ok_nonzero = 1;
    for (int i = nchunks - 1; i >= 0; i--) {
        const WpChunk *k = &ks[i];
        fill(dy, (size_t)T * H, 1e-3);
        if (dtype == WP_BF16) wp_bf16_round_array(dy, (size_t)T * H);
        /* gradients that already hold an earlier micro-batch's: the order of the sums matters */
        float *g1 = malloc(k->nparams * 4), *g2 = malloc(k->nparams * 4);
        fill(g1, k->nparams, 1e-2);
        memcpy(g2, g1, k->nparams * 4);
        float *g0 = malloc(k->nparams * 4);
        memcpy(g0, g1, k->nparams * 4);
        memset(dx1, 0, (size_t)T * H * 4); memset(dx2, 0, (size_t)T * H * 4);
        wp_chunk_backward(&c, k, p[i], tokens, targets, stash[i], recompute, k->last ? NULL : dy,
                          k->first ? NULL : dx1, g1, 1.0f / T, s);
        size_t nk = wp_keep_floats(&c, k, recompute);
        float *keep = malloc((nk + GUARD) * 4);
        /* NaN where B has not written: a part of the keep W reads but B did not fill shows */
        for (size_t j = 0; j < nk; j++) keep[j] = NAN;
        for (int j = 0; j < GUARD; j++) keep[nk + j] = GUARD_VAL;
        float *pb = malloc(k->nparams * 4);   /* B's working copy of the weights */
        memcpy(pb, p[i], k->nparams * 4);
        wp_chunk_backward_input(&c, k, pb, targets, stash[i], recompute, k->last ? NULL : dy,
                                k->first ? NULL : dx2, keep, 1.0f / T, s);
        /* what W must not read after B: every layer's attention log-sum-exps, and the weights
         * (W gets none: the working copy may be overwritten as soon as B returns) */
        {
            float *st = recompute ? keep + wp_keep_layout(&c, k, 1).restash : stash[i];
            WpLayerStashLayout l = wp_layer_stash_layout(&c);
            for (int li = 0; li < k->nlayers; li++)
                for (size_t j = l.lse; j < l.x2; j++) st[(size_t)li * l.end + j] = NAN;
            for (size_t j = 0; j < k->nparams; j++) pb[j] = NAN;
        }
        /* between the halves: another micro-batch's forward and backward on the same scratch */
        {
            float *st = malloc(wp_stash_floats(&c, k, recompute) * 4), *g = calloc(k->nparams, 4);
            float *xo = calloc((size_t)T * H, 4), *xi = calloc((size_t)T * H, 4), *d = calloc((size_t)T * H, 4);
            fill(xi, (size_t)T * H, 1.0);
            double l2 = 0;
            wp_chunk_forward(&c, k, p[i], tokens2, targets2, xi, xo, st, recompute, s, &l2);
            wp_chunk_backward(&c, k, p[i], tokens2, targets2, st, recompute, k->last ? NULL : dy, k->first ? NULL : d, g, 1.0f / T, s);
            free(st); free(g); free(xo); free(xi); free(d);
        }
        wp_chunk_backward_weights(&c, k, tokens, targets, stash[i], recompute, keep, g2, 1.0f / T, s);
        for (int j = 0; j < GUARD; j++) ok_guard &= keep[nk + j] == GUARD_VAL;
        if (!k->first) ok_dx &= !memcmp(dx1, dx2, (size_t)T * H * 4);
        ok_dp &= !memcmp(g1, g2, k->nparams * 4);
        ok_nonzero &= memcmp(g0, g2, k->nparams * 4) != 0;
        if (memcmp(g1, g2, k->nparams * 4)) {
            size_t n = 0;
            for (size_t j = 0; j < k->nparams; j++) n += g1[j] != g2[j];
            fprintf(stderr, "%s: chunk %d: %zu of %zu parameter gradients differ (max rel %g)\n", what, i, n, k->nparams,
                    max_rel_diff(g2, g1, k->nparams));
        }
        free(keep); free(pb); free(g0); free(g1); free(g2);
    }
    CHECK(ok_dx, "%s: the input gradients of BWD_B and BWD differ", what);
    CHECK(ok_dp, "%s: the parameter gradients of BWD_B + BWD_W and BWD differ", what);
    CHECK(ok_guard, "%s: BWD_B wrote past the keep of wp_keep_floats floats", what);
    CHECK(ok_nonzero, "%s: BWD_W added nothing", what);
    printf("%s: %s\n", what, ok_dx && ok_dp ? "bit-identical" : "DIFFERENT");
    for (int i = 0; i <= nchunks; i++) free(x[i]);
    for (int i = 0; i < nchunks; i++) { free(stash[i]); free(p[i]); }
    free(dy); free(dx1); free(dx2); free(params);
    wp_scratch_free(s);
}

/* The keep's sizes: what model.h lists, and the bytes at a precision. */
static void check_keep_sizes(void) {
    WpConfig c = tiny_config(0);
    size_t T = (size_t)c.mbs * c.seq, H = c.hidden, F = c.ffn, V = c.vocab;
    size_t layer = 2 * T * H + T * F + 4 * H;   /* dy, dh, dx2; ln1, ln2, dln1, dln2 */
    WpChunk first = wp_chunk_make(&c, 0, 0, 1, 1, 0), last = wp_chunk_make(&c, 1, 1, 1, 0, 1);
    CHECK(wp_layer_keep_layout(&c).end == layer, "a layer keeps %zu floats, expected %zu", wp_layer_keep_layout(&c).end, layer);
    CHECK(wp_keep_floats(&c, &first, 0) == layer + T * H, "first chunk: a layer and the embedding's gradient");
    CHECK(wp_keep_floats(&c, &last, 0) == layer + 2 * H + V * H, "last chunk: a layer, lnf, dlnf, the head's weight");
    CHECK(wp_keep_floats(&c, &last, 1) == wp_keep_floats(&c, &last, 0) + wp_stash_floats(&c, &last, 0),
          "recompute: the full stash is kept too");
    CHECK(wp_keep_bytes(&c, &first, 0, WP_FP32) == 4 * wp_keep_floats(&c, &first, 0), "fp32 keep bytes");
    CHECK(wp_keep_bytes(&c, &first, 0, WP_BF16) == 2 * (wp_keep_floats(&c, &first, 0) - 4 * H) + 4 * 4 * H,
          "bf16 keep bytes: gradients halved, norm weights and their gradients fp32");
    CHECK(wp_keep_bytes(&c, &last, 0, WP_BF16) == 2 * (wp_keep_floats(&c, &last, 0) - 6 * H) + 4 * 6 * H,
          "bf16 keep bytes of the last chunk: the head's weight at the precision, lnf and dlnf fp32");
    /* the paper's shape (llama-h1024, seq 4096): a layer's keep beside its stash, bf16 */
    WpConfig b = { .hidden = 1024, .layers = 32, .heads = 32, .kv_heads = 32, .head_dim = 32, .ffn = 2816,
                   .vocab = 32000, .eps = 1e-5f, .rope_theta = 10000.0f, .seq = 4096, .mbs = 1 };
    WpChunk mid = wp_chunk_make(&b, 1, 4, 4, 0, 0);
    double ratio = (double)wp_keep_bytes(&b, &mid, 0, WP_BF16) / (double)wp_stash_bytes(&b, &mid, 0, WP_BF16);
    printf("llama-h1024 seq 4096, 4 layers, bf16: keep %.1f MiB, stash %.1f MiB (%.3f of it)\n",
           wp_keep_bytes(&b, &mid, 0, WP_BF16) / 1048576.0, wp_stash_bytes(&b, &mid, 0, WP_BF16) / 1048576.0, ratio);
    /* dy, dh, dx2 = 2H + F per token against the stash's 6H + 2F (+ statistics) */
    CHECK(ratio > 0.40 && ratio < 0.42, "llama-h1024: the keep is %.3f of the stash, expected 0.41", ratio);
}

int main(void) {
    int one[1] = { 2 }, two[2] = { 1, 1 }, three[3] = { 1, 1, 0 };
    check_keep_sizes();
    for (int tile = 0; tile <= 4; tile += 4)
    for (int bf = 0; bf < 2; bf++)
        for (int rc = 0; rc < 2; rc++) {
            mlp_tile = tile;
            WpDtype dt = bf ? WP_BF16 : WP_FP32;
            check_split(0, one, 1, rc, dt, 0);
            check_split(0, two, 2, rc, dt, 5);     /* the head in blocks of 5 of 14 tokens */
            check_split(0, three, 3, rc, dt, 0);   /* a middle chunk, and a last one without layers */
            check_split(1, one, 1, rc, dt, 4);     /* tied: the head's gradient is the embedding's */
        }
    /* bf16 through a bf16 GEMM (a plain stand-in for OpenBLAS's cblas_sbgemm), where a product's
     * 16-bit copy of its output gradient is shared by its two halves in the whole backward and
     * made again by W in the split one */
    matmul_force_bf16_gemm(plain_sbgemm);
    sbgemm_forced = 1;
    sbgemm_calls = 0;
    check_split(0, two, 2, 0, WP_BF16, 5);
    mlp_tile = 4;
    check_split(0, two, 2, 1, WP_BF16, 5);
    mlp_tile = 0;
    check_split(0, three, 3, 1, WP_BF16, 0);
    check_split(1, one, 1, 0, WP_BF16, 4);
    matmul_force_bf16_gemm(NULL);
    CHECK(sbgemm_calls > 0, "the bf16 GEMM stand-in never ran");
    return check_summary("test_split_bwd");
}
