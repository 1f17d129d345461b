/* The C side of the PyTorch parity test: builds a small model (several layers, grouped-query
 * attention, untied head, byte vocabulary; or a tied, multi-query one with S = 100; or the first
 * with Llama 3.1's RoPE scaling; or with an explicit head_dim, heads x head_dim != hidden; or the
 * first with its MLP in tiles of 10 of the 66 tokens, the last 6, with recompute too), runs
 * one forward and backward of a micro-batch, and writes everything PyTorch needs to redo it into
 * one safetensors file: the weights under their Hugging Face names, tokens, targets, the shape
 * (metadata), and the results: loss, each token's log-sum-exp of the logits, and the gradient of
 * every tensor ("grad." + name).
 * `dump OUT CHECKPOINT` runs the same batch (2 sequences of 33) on the weights of a checkpoint
 * instead, the model's shape from the config.json beside it: what tests/export/test_export.sh
 * compares transformers' logits of an export with.
 * usage: dump OUT.safetensors [untied | tied | llama3 | head_dim | mlp_tile | mlp_tile_rc | CHECKPOINT] */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "common/config.h"
#include "common/modelcfg.h"
#include "train/checkpoint.h"
#include "cpu/model.h"
#include "train/safetensors.h"

int main(int argc, char **argv) {
    if (argc < 2) { fprintf(stderr, "usage: %s OUT.safetensors [untied | tied | llama3 | head_dim | mlp_tile | mlp_tile_rc | CHECKPOINT]\n", argv[0]); return 2; }
    const char *variant = argc > 2 ? argv[2] : "untied";
    int tied = !strcmp(variant, "tied");
    /* mlp_tile, mlp_tile_rc: the MLP in tiles (config.h's mlp_tile), the second with recompute (gate
     * and up recomputed tile by tile in backward) */
    int tiled = !strcmp(variant, "mlp_tile") || !strcmp(variant, "mlp_tile_rc"), recompute = !strcmp(variant, "mlp_tile_rc");
    const char *ckpt = !tied && !tiled && strcmp(variant, "untied") && strcmp(variant, "llama3") && strcmp(variant, "head_dim") ? variant : NULL;
    WpConfig c = { .hidden = 64, .layers = 3, .heads = 4, .kv_heads = 2, .head_dim = 16, .ffn = 176,
                   .vocab = 256, .eps = 1e-5f, .rope_theta = 10000.0f, .tied = 0, .seq = 33, .mbs = 2 };
    /* tied: also multi-query, another theta and eps, and S over two attention tiles */
    if (tied) { c.layers = 2; c.tied = 1; c.kv_heads = 1; c.rope_theta = 500000.0f; c.eps = 1e-6f;
                c.seq = 100; c.mbs = 1; }
    /* llama3: an original context of 256 puts head_dim 16's wavelengths (2 pi 10000^(i/8): 6.3 to
     * 19869) in all three of the rule's bands: 3 kept (below 256 / 4), 1 interpolated, 4 divided */
    if (!strcmp(variant, "llama3"))
        c.rope_scaling = (WpRopeScaling){ .factor = 8, .low_freq_factor = 1, .high_freq_factor = 4,
                                          .original_max_position_embeddings = 256 };
    /* head_dim: q is 4 x 24 = 96 wide against a hidden size of 64, k and v 2 x 24 */
    if (!strcmp(variant, "head_dim")) c.head_dim = 24;
    if (tiled) c.mlp_tile = 10;
    char err[1024], name[256], cfgpath[4200];
    if (ckpt) {
        const char *slash = strrchr(ckpt, '/');
        snprintf(cfgpath, sizeof cfgpath, "%.*sconfig.json", slash ? (int)(slash - ckpt + 1) : 0, ckpt);
        if (model_load(cfgpath, &c, name, sizeof name, err, sizeof err)) { fprintf(stderr, "dump: %s\n", err); return 2; }
        c.seq = 33; c.mbs = 2;
        tied = c.tied;
    }
    int T = c.mbs * c.seq;
    WpChunk k = wp_chunk_make(&c, 0, 0, c.layers, 1, 1);
    int nt = wp_chunk_tensors(&c, &k, NULL);
    WpTensor *ts = malloc(nt * sizeof *ts);
    wp_chunk_tensors(&c, &k, ts);
    float *params = malloc(k.nparams * sizeof(float)), *grad = calloc(k.nparams, sizeof(float));
    size_t nstash = wp_stash_floats(&c, &k, recompute);
    float *stash = malloc(nstash * sizeof(float));
    wp_chunk_init(&c, &k, params, 2024);
    if (ckpt && ckpt_load(ckpt, &c, &k, 1, &params, NULL, NULL, NULL, err, sizeof err)) { fprintf(stderr, "dump: %s\n", err); return 2; }
    /* Weights 5x the init (std 0.1) and norm weights around 1, so that attention is far from
     * uniform and no gradient is negligible: a wrong scale or rotation cannot hide. */
    uint64_t r = 99;
    for (int i = 0; i < nt && !ckpt; i++)
        for (size_t j = 0; j < ts[i].rows * ts[i].cols; j++) {
            float *v = params + ts[i].offset + j;
            r = r * 6364136223846793005ull + 1442695040888963407ull;
            *v = ts[i].no_decay ? 1.0f + 0.2f * ((float)(r >> 40) / 16777216.0f - 0.5f) : 5.0f * *v;
        }
    int *tokens = malloc(T * sizeof(int)), *targets = malloc(T * sizeof(int));
    const char *text = "The quick brown fox jumps over the lazy dog; pack my box with five dozen liquor jugs.";
    for (int t = 0; t < T; t++) tokens[t] = (unsigned char)text[(t * 3) % strlen(text)];
    for (int t = 0; t < T; t++) targets[t] = (t + 1) % c.seq ? tokens[t + 1] : (unsigned char)text[t % 7];

    WpScratch *s = wp_scratch_new(&c, c.layers);
    double loss_sum = 0;
    wp_chunk_forward(&c, &k, params, tokens, targets, NULL, NULL, stash, recompute, s, &loss_sum);
    wp_chunk_backward(&c, &k, params, tokens, targets, stash, recompute, NULL, NULL, grad, 1.0f / T, s);
    wp_scratch_free(s);

    WpStWriter *w = wp_st_writer_new();
    char key[128], val[64];
#define META(name, fmt, v) do { snprintf(val, sizeof val, fmt, v); wp_st_set_metadata(w, name, val); } while (0)
    META("hidden_size", "%d", c.hidden);
    META("num_hidden_layers", "%d", c.layers);
    META("num_attention_heads", "%d", c.heads);
    META("num_key_value_heads", "%d", c.kv_heads);
    META("intermediate_size", "%d", c.ffn);
    META("vocab_size", "%d", c.vocab);
    META("rms_norm_eps", "%.9g", c.eps);
    META("rope_theta", "%.9g", c.rope_theta);
    META("head_dim", "%d", c.head_dim);
    META("rope_factor", "%.9g", c.rope_scaling.factor);
    META("rope_low_freq_factor", "%.9g", c.rope_scaling.low_freq_factor);
    META("rope_high_freq_factor", "%.9g", c.rope_scaling.high_freq_factor);
    META("rope_original_max_position_embeddings", "%d", c.rope_scaling.original_max_position_embeddings);
    META("tie_word_embeddings", "%d", c.tied);
    META("seq", "%d", c.seq);
    META("mbs", "%d", c.mbs);
    for (int i = 0; i < nt; i++) {
        size_t shape[2] = { ts[i].rows, ts[i].cols };
        int nd = ts[i].cols == 1 ? 1 : 2;
        size_t bytes = ts[i].rows * ts[i].cols * sizeof(float);
        wp_st_add(w, ts[i].name, "F32", shape, nd, params + ts[i].offset, bytes);
        snprintf(key, sizeof key, "grad.%s", ts[i].name);
        wp_st_add(w, key, "F32", shape, nd, grad + ts[i].offset, bytes);
    }
    size_t bt[2] = { (size_t)c.mbs, (size_t)c.seq };
    wp_st_add(w, "tokens", "I32", bt, 2, tokens, T * sizeof(int));
    wp_st_add(w, "targets", "I32", bt, 2, targets, T * sizeof(int));
    double loss = loss_sum / T;
    size_t one = 1;
    wp_st_add(w, "loss", "F64", &one, 1, &loss, sizeof loss);
    /* Each token's log-sum-exp of the logits is the stash's last T floats (model.c, "stash
     * layout"): with the loss and the head's gradient it checks every logit. */
    size_t lshape[2] = { (size_t)c.mbs, (size_t)c.seq };
    wp_st_add(w, "lse", "F32", lshape, 2, stash + nstash - (size_t)T, (size_t)T * sizeof(float));
    if (wp_st_commit(w, argv[1], err, sizeof err)) { fprintf(stderr, "dump: %s\n", err); return 1; }
    printf("dump: %s: %s model, %d tensors, loss %.6f\n", argv[1], variant, nt, loss);
    free(ts); free(params); free(grad); free(stash); free(tokens); free(targets);
    return 0;
}
