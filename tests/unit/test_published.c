/* Tests of the Llama family as published: the config.json files of Llama 3.1 8B and Llama 3.2 1B
 * (tests/data/, their values on the Hugging Face Hub) load with every size, rope_scaling and the
 * tied head of the 1B, count the parameters the model cards give, scale RoPE's frequencies in the
 * three bands of Llama 3.1's rule, and come back unchanged through the config.json a checkpoint
 * writes (every key that changes the model, compared as JSON). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <jansson.h>
#include "check.h"
#include "tmpdir.h"
#include "common/modelcfg.h"
#include "common/rope_table.h"
#include "train/checkpoint.h"

typedef struct Published {
    const char *dir;
    WpConfig want;          /* seq: the 4096 model_load caps max_position_embeddings at */
    size_t params;          /* the whole model's, as its model card counts them */
} Published;

static const Published models[] = {
    { "tests/data/llama-3.1-8b",
      { .hidden = 4096, .layers = 32, .heads = 32, .kv_heads = 8, .head_dim = 128, .ffn = 14336, .vocab = 128256,
        .eps = 1e-5f, .rope_theta = 500000.0f, .rope_scaling = { 8, 1, 4, 8192 }, .tied = 0, .seq = 4096, .mbs = 1 },
      8030261248ULL },
    { "tests/data/llama-3.2-1b",
      { .hidden = 2048, .layers = 16, .heads = 32, .kv_heads = 8, .head_dim = 64, .ffn = 8192, .vocab = 128256,
        .eps = 1e-5f, .rope_theta = 500000.0f, .rope_scaling = { 32, 1, 4, 8192 }, .tied = 1, .seq = 4096, .mbs = 1 },
      1235814400ULL },
};

/* The keys of config.json that change the model: each must come back as it was. */
static const char *const model_keys[] = {
    "architectures", "model_type", "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads",
    "num_key_value_heads", "head_dim", "hidden_act", "rms_norm_eps", "rope_theta", "rope_scaling",
    "tie_word_embeddings", "vocab_size", "attention_bias", "mlp_bias",
};

/* JSON values equal, numbers by value (8.0 and 8), objects key by key. */
static int same_json(const json_t *a, const json_t *b) {
    if (json_is_number(a) && json_is_number(b)) return json_number_value(a) == json_number_value(b);
    if (json_is_object(a) && json_is_object(b)) {
        if (json_object_size(a) != json_object_size(b)) return 0;
        const char *k;
        json_t *v;
        json_object_foreach((json_t *)a, k, v)
            if (!same_json(v, json_object_get(b, k))) return 0;
        return 1;
    }
    return json_equal(a, b);
}

static void test_load(const Published *p, WpConfig *c) {
    char err[512], name[64];
    CHECK(model_load(p->dir, c, name, sizeof name, err, sizeof err) == 0, "%s: %s", p->dir, err);
    CHECK(model_same(c, &p->want), "%s: not the published model", p->dir);
    CHECK(c->seq == p->want.seq && c->mbs == 1, "%s: seq %d", p->dir, c->seq);
    WpChunk whole = wp_chunk_make(c, 0, 0, c->layers, 1, 1);
    CHECK(whole.nparams == p->params, "%s: %zu parameters, the model card's %zu", p->dir, whole.nparams, p->params);
}

/* The frequency f is asin(sin_t) at position 1 (every f <= 1 < pi / 2): scaled over unscaled is
 * 1 for wavelengths below original / high_freq_factor, 1 / factor above original /
 * low_freq_factor, and between the two in between, falling as the wavelength grows. */
static void test_rope_bands(const WpConfig *c) {
    int half = c->head_dim / 2, kept = 0, divided = 0, blended = 0;
    float *cs = malloc(4 * 2 * half * sizeof(float)), *sn = cs + 2 * half;
    float *cs0 = sn + 2 * half, *sn0 = cs0 + 2 * half;
    wp_rope_tables(cs, sn, 2, c->head_dim, c->rope_theta, &c->rope_scaling);
    wp_rope_tables(cs0, sn0, 2, c->head_dim, c->rope_theta, NULL);
    const WpRopeScaling *r = &c->rope_scaling;
    double prev = 1;
    for (int i = 0; i < half; i++) {
        double f0 = asin((double)sn0[half + i]), f = asin((double)sn[half + i]);
        double ratio = f / f0, wavelen = 2 * M_PI / f0;
        if (wavelen < r->original_max_position_embeddings / r->high_freq_factor) {
            CHECK(sn[half + i] == sn0[half + i] && cs[half + i] == cs0[half + i], "i %d: high frequency changed", i);
            kept++;
        } else if (wavelen > r->original_max_position_embeddings / r->low_freq_factor) {
            CHECK(fabs(ratio * r->factor - 1) < 1e-5, "i %d: low frequency scaled by %g, not 1/%g", i, ratio, r->factor);
            divided++;
        } else {
            CHECK(ratio > 1 / r->factor && ratio < 1 && ratio <= prev, "i %d: blended ratio %g", i, ratio);
            blended++;
        }
        prev = ratio;
    }
    CHECK(kept > 0 && divided > 0 && blended > 0, "bands %d kept, %d divided, %d blended", kept, divided, blended);
    free(cs);
}

static void test_round_trip(const Published *p, const WpConfig *c) {
    char err[512], path[300];
    snprintf(path, sizeof path, "%s/model.safetensors", tmp_dir);
    CHECK(ckpt_write_config(path, c, err, sizeof err) == 0, "%s: write config.json: %s", p->dir, err);
    WpConfig back;
    CHECK(model_load(tmp_dir, &back, NULL, 0, err, sizeof err) == 0, "%s: written config.json: %s", p->dir, err);
    CHECK(model_same(&back, c), "%s: the written config.json is another model", p->dir);
    char orig[300];
    snprintf(orig, sizeof orig, "%s/config.json", p->dir);
    json_error_t je;
    json_t *a = json_load_file(orig, 0, &je), *b = json_load_file(tmp_path("config.json"), 0, &je);
    CHECK(a && b, "%s: JSON", p->dir);
    for (size_t i = 0; a && b && i < sizeof model_keys / sizeof *model_keys; i++) {
        json_t *va = json_object_get(a, model_keys[i]), *vb = json_object_get(b, model_keys[i]);
        /* head_dim: the 8B's file leaves it to its default, hidden / heads, which is written */
        json_t *dflt = !va && !strcmp(model_keys[i], "head_dim") ? json_integer(c->hidden / c->heads) : NULL;
        CHECK(vb && same_json(va ? va : dflt, vb), "%s: %s does not come back", p->dir, model_keys[i]);
        json_decref(dflt);
    }
    json_decref(a);
    json_decref(b);
    remove(tmp_path("config.json"));
}

int main(void) {
    tmp_dir_make("published");
    for (size_t i = 0; i < sizeof models / sizeof *models; i++) {
        WpConfig c;
        test_load(&models[i], &c);
        test_rope_bands(&c);
        test_round_trip(&models[i], &c);
    }
    tmp_dir_remove();
    return check_summary("test_published");
}
