/* Model shapes: the built-in presets (a tiny model for tests, the shapes of the WeiPipe and
 * TawPipe papers, LLaMA-2 7B) and Hugging Face config.json files, read with Jansson into a
 * WpConfig and checked, and the config.json wpgen writes for a WpConfig (the same keys, so that
 * what it writes reads back as the same model). Every key of a config.json is in one table
 * (hf_keys): read, pinned to the value wpgen implements, or known not to change the model. */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <stdint.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <jansson.h>
#include "common/modelcfg.h"
#include "common/errmsg.h"
#include "common/jsonfile.h"

/* LLaMA-2's FFN sizing: 2/3 of 4H, rounded up to a multiple of 256 (4096 -> 11008).
 * floor(8H/3) rounds up to the same multiple of 256 as 8H/3 itself: they could differ only if
 * 8H were 768k + 1 or 768k + 2, and 8H is a multiple of 8. */
#define LLAMA_FFN(H) (256 * (((8 * (H)) / 3 + 255) / 256))

/* hidden, layers, heads, kv_heads, ffn, vocab, seq, mbs; eps 1e-5, theta 1e4, untied. */
#define SHAPE(H, L, NH, NKV, F, V, S, G) \
    { .hidden = (H), .layers = (L), .heads = (NH), .kv_heads = (NKV), .head_dim = (H) / (NH), \
      .ffn = (F), .vocab = (V), .eps = 1e-5f, .rope_theta = 10000.0f, .tied = 0, .seq = (S), .mbs = (G) }

static const ModelPreset presets[] = {
    { "tiny", "test model: H 64, 4 layers, 4 heads (2 kv), byte vocabulary, seq 64",
      SHAPE(64, 4, 4, 2, 176, 256, 64, 2) },
    { "small", "small CPU model: H 256, 6 layers, 8 heads (4 kv), byte vocabulary, seq 256",
      SHAPE(256, 6, 8, 4, 688, 256, 256, 1) },
    { "llama-h1024", "WeiPipe paper's shape: H 1024, 32 layers, 32 heads, LLaMA-2 FFN, seq 4096",
      SHAPE(1024, 32, 32, 32, LLAMA_FFN(1024), 32000, 4096, 1) },
    { "llama-h2048", "WeiPipe paper's shape: H 2048, 32 layers, 32 heads, LLaMA-2 FFN, seq 4096",
      SHAPE(2048, 32, 32, 32, LLAMA_FFN(2048), 32000, 4096, 1) },
    { "llama-h4096", "WeiPipe paper's shape: H 4096, 32 layers, 32 heads, LLaMA-2 FFN, seq 4096",
      SHAPE(4096, 32, 32, 32, LLAMA_FFN(4096), 32000, 4096, 1) },
    { "tawpipe-h1024", "TawPipe-style depth: H 1024, 48 layers, 32 heads, LLaMA-2 FFN, seq 4096",
      SHAPE(1024, 48, 32, 32, LLAMA_FFN(1024), 32000, 4096, 1) },
    { "tawpipe-h2048", "TawPipe paper's shape: H 2048, 48 layers, 32 heads, LLaMA-2 FFN, seq 4096",
      SHAPE(2048, 48, 32, 32, LLAMA_FFN(2048), 32000, 4096, 1) },
    { "tawpipe-h4096", "TawPipe-style depth: H 4096, 48 layers, 32 heads, LLaMA-2 FFN, seq 4096",
      SHAPE(4096, 48, 32, 32, LLAMA_FFN(4096), 32000, 4096, 1) },
    { "llama2-7b", "LLaMA-2 7B: H 4096, 32 layers, 32 heads, FFN 11008, vocabulary 32000, seq 4096",
      SHAPE(4096, 32, 32, 32, 11008, 32000, 4096, 1) },
};

const ModelPreset *model_presets(int *n) {
    *n = (int)(sizeof presets / sizeof presets[0]);
    return presets;
}

/* The one message form of every JSON loader (common/jsonfile.h). */
static int expected(const char *file, const char *key, const char *what, const json_t *v, char *err, size_t errlen) {
    return wp_json_expected(err, errlen, file, key, what, v);
}

/* Every key of a config.json that wpgen knows, written once: read into the shape (with the range
 * it may take), pinned to the one value the runtime implements, a special-token id (carried into
 * the config.json written), or known not to change the trained model (generation settings,
 * metadata). A key that is none of these is
 * refused with its name: a key that would change the model is never ignored, and wpgen cannot
 * tell one it does not know from one that does. */
enum { KEY_INT, KEY_REAL, KEY_BOOL, KEY_PINNED, KEY_HARMLESS, KEY_OBJECT, KEY_TOKEN_ID };
typedef struct HfKey {
    const char *key;
    int kind;
    double lo, hi;               /* KEY_INT, KEY_REAL: the valid range */
    const char *pinned;          /* KEY_PINNED: the value (JSON) the runtime implements */
    const char *why;             /* KEY_PINNED: what it is, for the message */
} HfKey;
/* A table of keys: the top level of config.json, or an object in it (KEY_OBJECT, read by its
 * own reader), whose keys messages name as "prefix.key". */
typedef struct KeyTable {
    const char *prefix;          /* "" at the top level */
    const HfKey *keys;
    size_t n;
} KeyTable;
#define INT(k, lo, hi) { k, KEY_INT, lo, hi, NULL, NULL }
#define REAL(k, lo, hi) { k, KEY_REAL, lo, hi, NULL, NULL }
#define BOOL(k) { k, KEY_BOOL, 0, 0, NULL, NULL }
#define PIN(k, value, why) { k, KEY_PINNED, 0, 0, value, why }
#define SAME(k) { k, KEY_HARMLESS, 0, 0, NULL, NULL }
#define OBJECT(k) { k, KEY_OBJECT, 0, 0, NULL, NULL }
static const HfKey hf_keys[] = {
    INT("hidden_size", 1, 1 << 20),
    INT("num_hidden_layers", 1, 1 << 16),
    INT("num_attention_heads", 1, 1 << 20),
    INT("num_key_value_heads", 1, 1 << 20),
    INT("intermediate_size", 1, 1 << 22),
    INT("vocab_size", 1, 1 << 24),
    INT("head_dim", 2, 1 << 20),
    INT("max_position_embeddings", 1, INT_MAX),
    REAL("rms_norm_eps", 1e-12, 1),
    REAL("rope_theta", 1, 1e12),
    BOOL("tie_word_embeddings"),
    PIN("model_type", "\"llama\"", "a LLaMA model"),
    PIN("architectures", "[\"LlamaForCausalLM\"]", "a LLaMA causal language model"),
    PIN("hidden_act", "\"silu\"", "the SwiGLU feed-forward's activation"),
    PIN("attention_bias", "false", "projections without bias"),
    PIN("mlp_bias", "false", "projections without bias"),
    PIN("attention_dropout", "0", "no dropout"),
    OBJECT("rope_scaling"),   /* null (unscaled) or Llama 3.1's: rope_keys */
    PIN("sliding_window", "null", "full causal attention"),
    PIN("use_sliding_window", "false", "full causal attention"),
    PIN("quantization_config", "null", "unquantized weights"),
    PIN("auto_map", "null", "transformers' own model code"),
    /* token ids: read (a null, an id in [0, vocab_size), eos_token_id also a list of them) and
     * written back into a checkpoint's config.json (WpTokenIds): they change the model's use */
    { "bos_token_id", KEY_TOKEN_ID, 0, 0, NULL, NULL }, { "eos_token_id", KEY_TOKEN_ID, 0, 0, NULL, NULL },
    { "pad_token_id", KEY_TOKEN_ID, 0, 0, NULL, NULL },
    /* do not change what is trained: metadata, inference and generation settings (wpgen export
     * writes generation_config.json from the token ids and the tokenizer's files),
     * tensor-parallel slicing (pretraining_tp: the same product), the initialisation's scale
     * (wpgen initialises as its reference trainer does: docs/architecture.md) */
    SAME("torch_dtype"), SAME("dtype"), SAME("transformers_version"),
    SAME("use_cache"), SAME("initializer_range"), SAME("pretraining_tp"),
    SAME("_name_or_path"), SAME("_attn_implementation"),
    SAME("attn_implementation"), SAME("output_attentions"),
    SAME("output_hidden_states"), SAME("return_dict"), SAME("tokenizer_class"),
    SAME("id2label"), SAME("label2id"), SAME("max_length"),
    SAME("min_length"), SAME("do_sample"), SAME("temperature"),
    SAME("top_k"), SAME("top_p"), SAME("num_beams"),
    SAME("repetition_penalty"), SAME("use_bfloat16"), PIN("is_encoder_decoder", "false", "a decoder-only model"),
    SAME("written_by"),
};
/* rope_scaling's keys: transformers' rope_type "llama3", all required (as transformers requires
 * them); "type" is the older configs' name of rope_type. A factor below 1 would shrink the
 * wavelengths, which no published model does; high_freq_factor must exceed low_freq_factor
 * (model_check), the interpolation divides by their difference. */
static const HfKey rope_keys[] = {
    PIN("rope_type", "\"llama3\"", "Llama 3.1's RoPE scaling"),
    PIN("type", "\"llama3\"", "Llama 3.1's RoPE scaling"),
    REAL("factor", 1, 1e6),
    REAL("low_freq_factor", 1e-6, 1e6),
    REAL("high_freq_factor", 1e-6, 1e6),
    INT("original_max_position_embeddings", 1, 1 << 24),
};
static const KeyTable top_table = { "", hf_keys, sizeof hf_keys / sizeof hf_keys[0] };
static const KeyTable rope_table = { "rope_scaling.", rope_keys, sizeof rope_keys / sizeof rope_keys[0] };
#undef INT
#undef REAL
#undef BOOL
#undef PIN
#undef SAME
#undef OBJECT

static const HfKey *hf_key(const KeyTable *t, const char *key) {
    for (size_t i = 0; i < t->n; i++)
        if (!strcmp(t->keys[i].key, key)) return &t->keys[i];
    return NULL;
}

/* "prefix.key", as messages name a key. */
static const char *key_path(const KeyTable *t, const char *key, char *buf, size_t n) {
    snprintf(buf, n, "%s%s", t->prefix, key);
    return buf;
}

/* A pinned key's value v is the one implemented: equal as JSON, numbers by value (0 and 0.0). */
static int pinned_ok(const HfKey *k, const json_t *v) {
    json_t *want = json_loads(k->pinned, JSON_DECODE_ANY, NULL);
    int ok = json_is_number(want) ? json_is_number(v) && json_number_value(v) == json_number_value(want)
                                  : json_equal(want, v);
    json_decref(want);
    return ok;
}

/* Every key of root in table t, every pinned one at its value. */
static int check_keys(const char *file, const KeyTable *t, const json_t *root, char *err, size_t errlen) {
    const char *key;
    json_t *v;
    char name[160];
    json_object_foreach((json_t *)root, key, v) {
        const HfKey *k = hf_key(t, key);
        if (!k && t == &top_table)
            return errmsg(err, errlen, "%s: %s: not a key wpgen knows (it trains LLaMA models: the keys of transformers' "
                          "LlamaConfig); a key that could change the model is not ignored: remove it if it does not", file, key);
        if (!k)
            return errmsg(err, errlen, "%s: %s: not a key wpgen knows (it implements rope_type \"llama3\": rope_type, "
                          "factor, low_freq_factor, high_freq_factor, original_max_position_embeddings)", file,
                          key_path(t, key, name, sizeof name));
        if (k->kind == KEY_PINNED && !json_is_null(v) && !pinned_ok(k, v)) {
            char what[160];
            snprintf(what, sizeof what, "%s (wpgen trains %s)", k->pinned, k->why);
            return expected(file, key_path(t, key, name, sizeof name), what, v, err, errlen);
        }
    }
    return 0;
}

/* Readers for one field of a config.json, in its table's range. A field that is absent or null
 * (configs write "num_key_value_heads": null for "same as heads") keeps *out, the caller's
 * default, unless required. */
static int read_int(const char *file, const KeyTable *t, const json_t *root, const char *key, int required, int *out,
                    char *err, size_t errlen) {
    const HfKey *k = hf_key(t, key);
    json_t *v = json_object_get(root, key);
    if ((!v || json_is_null(v)) && !required) return 0;
    if (!json_is_integer(v) || (double)json_integer_value(v) < k->lo || (double)json_integer_value(v) > k->hi) {
        char what[96], name[160];
        snprintf(what, sizeof what, "an integer in [%.0f, %.0f]", k->lo, k->hi);
        return expected(file, key_path(t, key, name, sizeof name), what, v, err, errlen);
    }
    *out = (int)json_integer_value(v);
    return 0;
}

static int read_real(const char *file, const KeyTable *t, const json_t *root, const char *key, int required, float *out,
                     char *err, size_t errlen) {
    const HfKey *k = hf_key(t, key);
    json_t *v = json_object_get(root, key);
    if ((!v || json_is_null(v)) && !required) return 0;
    if (!json_is_number(v) || !(json_number_value(v) >= k->lo && json_number_value(v) <= k->hi)) {
        char what[96], name[160];
        snprintf(what, sizeof what, "a number in [%g, %g]", k->lo, k->hi);
        return expected(file, key_path(t, key, name, sizeof name), what, v, err, errlen);
    }
    *out = (float)json_number_value(v);
    return 0;
}

/* rope_scaling, an object (null is unscaled RoPE and never gets here): its type, one of
 * rope_type and type (the same when both), and its four numbers. */
static int read_rope_scaling(const char *file, const json_t *rs, WpRopeScaling *out, char *err, size_t errlen) {
    if (!json_is_object(rs)) return expected(file, "rope_scaling", "an object or null", rs, err, errlen);
    if (check_keys(file, &rope_table, rs, err, errlen)) return -1;
    json_t *type = json_object_get(rs, "rope_type");
    if (!type || json_is_null(type)) type = json_object_get(rs, "type");
    if (!type || json_is_null(type))
        return expected(file, "rope_scaling.rope_type", "\"llama3\" (the only scaling wpgen implements)", type, err,
                        errlen);
    WpRopeScaling r = { 0 };
    if (read_real(file, &rope_table, rs, "factor", 1, &r.factor, err, errlen) ||
        read_real(file, &rope_table, rs, "low_freq_factor", 1, &r.low_freq_factor, err, errlen) ||
        read_real(file, &rope_table, rs, "high_freq_factor", 1, &r.high_freq_factor, err, errlen) ||
        read_int(file, &rope_table, rs, "original_max_position_embeddings", 1, &r.original_max_position_embeddings, err,
                 errlen))
        return -1;
    *out = r;
    return 0;
}

/* One special-token id: null or absent (*n stays 0), an id in [0, vocab), or where list_max > 1
 * a list of 1 to list_max of them (*is_list set). */
static int read_token_id(const char *file, const json_t *root, const char *key, int vocab, int list_max, int *n,
                         int *ids, int *is_list, char *err, size_t errlen) {
    json_t *v = json_object_get(root, key);
    if (!v || json_is_null(v)) return 0;
    size_t k = json_is_array(v) ? json_array_size(v) : 1;
    int ok = json_is_integer(v) || (list_max > 1 && json_is_array(v) && k >= 1 && k <= (size_t)list_max);
    for (size_t i = 0; ok && i < k; i++) {
        json_t *e = json_is_array(v) ? json_array_get(v, i) : v;
        ok = json_is_integer(e) && json_integer_value(e) >= 0 && json_integer_value(e) < vocab;
        if (ok) ids[i] = (int)json_integer_value(e);
    }
    if (!ok) {
        char what[160];
        snprintf(what, sizeof what, "null or a token id in [0, %d] (vocab_size %d)%s", vocab - 1, vocab,
                 list_max > 1 ? ", or a list of 1 to " WP_STR(WP_MAX_EOS_IDS) " of them" : "");
        return expected(file, key, what, v, err, errlen);
    }
    *n = (int)k;
    if (is_list) *is_list = json_is_array(v);
    return 0;
}

static int read_bool(const char *file, const json_t *root, const char *key, int *out, char *err, size_t errlen) {
    json_t *v = json_object_get(root, key);
    if (!v || json_is_null(v)) return 0;
    if (!json_is_boolean(v)) return expected(file, key, "true or false", v, err, errlen);
    *out = json_is_true(v);
    return 0;
}

/* Reads the sizes of a Hugging Face config.json, parsed into root (NULL: jerr says why not),
 * into c; path names it in messages. Takes root. */
static int read_hf_config(const char *path, json_t *root, const json_error_t *jerr, WpConfig *c, char *err,
                          size_t errlen) {
    if (!root)
        return errmsg(err, errlen, "%s: line %d, column %d: malformed JSON: %s", path, jerr->line, jerr->column, jerr->text);
    int rc = -1;
    if (!json_is_object(root)) {
        expected(path, "top level", "an object", root, err, errlen);
        goto done;
    }
    if (check_keys(path, &top_table, root, err, errlen)) goto done;
    /* Hugging Face's defaults for LlamaConfig where a field is optional. */
    *c = (WpConfig){ .eps = 1e-6f, .rope_theta = 10000.0f, .tied = 0, .seq = WP_DEFAULT_SEQ_NO_MAX_POS, .mbs = 1 };
    int max_pos = 0, head_dim = 0;
    if (read_int(path, &top_table, root, "hidden_size", 1, &c->hidden, err, errlen)) goto done;
    if (read_int(path, &top_table, root, "num_hidden_layers", 1, &c->layers, err, errlen)) goto done;
    if (read_int(path, &top_table, root, "num_attention_heads", 1, &c->heads, err, errlen)) goto done;
    c->kv_heads = c->heads;
    if (read_int(path, &top_table, root, "num_key_value_heads", 0, &c->kv_heads, err, errlen)) goto done;
    if (read_int(path, &top_table, root, "intermediate_size", 1, &c->ffn, err, errlen)) goto done;
    if (read_int(path, &top_table, root, "vocab_size", 1, &c->vocab, err, errlen)) goto done;
    WpTokenIds *t = &c->ids;
    if (read_token_id(path, root, "bos_token_id", c->vocab, 1, &t->nbos, &t->bos, NULL, err, errlen) ||
        read_token_id(path, root, "pad_token_id", c->vocab, 1, &t->npad, &t->pad, NULL, err, errlen) ||
        read_token_id(path, root, "eos_token_id", c->vocab, WP_MAX_EOS_IDS, &t->neos, t->eos, &t->eos_list, err, errlen))
        goto done;
    if (read_real(path, &top_table, root, "rms_norm_eps", 0, &c->eps, err, errlen)) goto done;
    if (read_real(path, &top_table, root, "rope_theta", 0, &c->rope_theta, err, errlen)) goto done;
    if (read_bool(path, root, "tie_word_embeddings", &c->tied, err, errlen)) goto done;
    if (read_int(path, &top_table, root, "head_dim", 0, &head_dim, err, errlen)) goto done;
    if (read_int(path, &top_table, root, "max_position_embeddings", 0, &max_pos, err, errlen)) goto done;
    json_t *rs = json_object_get(root, "rope_scaling");
    if (rs && !json_is_null(rs) && read_rope_scaling(path, rs, &c->rope_scaling, err, errlen)) goto done;
    /* Train at the model's context length, but not beyond WP_DEFAULT_SEQ_CAP: longer is a choice (--seq). */
    if (max_pos) c->seq = max_pos < WP_DEFAULT_SEQ_CAP ? max_pos : WP_DEFAULT_SEQ_CAP;
    /* Given (Qwen 3, Gemma: heads * head_dim may differ from hidden_size), or hidden / heads as
     * transformers defaults it; 0 when heads do not divide hidden_size (model_check says so). */
    c->head_dim = head_dim ? head_dim : c->hidden % c->heads == 0 ? c->hidden / c->heads : 0;
    rc = 0;
done:
    json_decref(root);
    return rc;
}

static int load_hf_config(const char *path, WpConfig *c, char *err, size_t errlen) {
    FILE *f = fopen(path, "rb");
    if (!f) return errmsg(err, errlen, "%s: cannot open: %s", path, strerror(errno));
    json_error_t jerr;
    json_t *root = json_loadf(f, JSON_REJECT_DUPLICATES, &jerr);
    fclose(f);
    return read_hf_config(path, root, &jerr, c, err, errlen);
}

int model_config_parse(const char *name, const char *text, size_t len, WpConfig *c, char *err, size_t errlen) {
    json_error_t jerr;
    json_t *root = json_loadb(text, len, JSON_REJECT_DUPLICATES, &jerr);
    WpConfig tmp;
    if (read_hf_config(name, root, &jerr, &tmp, err, errlen)) return errmsg_one_line(err);
    char why[256];
    if (model_check(&tmp, why, sizeof why)) return errmsg(err, errlen, "%s: %s", name, why);
    *c = tmp;
    return 0;
}

/* ---- config.json, written ---- */

/* The shortest decimal that reads back as f, as a double: config.json shows 1e-05, not
 * 9.99999974737875e-06. */
static double float_decimal(float f) {
    char buf[32];
    for (int prec = 1; prec <= 9; prec++) {
        snprintf(buf, sizeof buf, "%.*g", prec, (double)f);
        double d = strtod(buf, NULL);
        if ((float)d == f) return d;
    }
    return (double)f;
}

/* rope_scaling as transformers writes it for Llama 3.1, or null when unscaled. */
static json_t *rope_scaling_json(const WpRopeScaling *r) {
    if (r->factor == 0) return json_null();
    return json_pack("{s:f, s:f, s:f, s:i, s:s}", "factor", float_decimal(r->factor), "low_freq_factor",
                     float_decimal(r->low_freq_factor), "high_freq_factor", float_decimal(r->high_freq_factor),
                     "original_max_position_embeddings", r->original_max_position_embeddings, "rope_type", "llama3");
}

char *model_config_text(const WpConfig *c, const char *written_by) {
    /* every key that changes the model, so that the file reads back as c (model_same) */
    json_t *o = json_pack("{s:[s], s:s, s:i, s:i, s:i, s:i, s:i, s:i, s:s, s:i, s:f, s:f, s:o, s:b, s:i, s:b, s:b, s:s}",
                          "architectures", "LlamaForCausalLM", "model_type", "llama", "hidden_size", c->hidden,
                          "intermediate_size", c->ffn, "num_hidden_layers", c->layers, "num_attention_heads", c->heads,
                          "num_key_value_heads", c->kv_heads, "head_dim", c->head_dim, "hidden_act", "silu",
                          "max_position_embeddings", c->seq, "rms_norm_eps", float_decimal(c->eps), "rope_theta",
                          float_decimal(c->rope_theta), "rope_scaling", rope_scaling_json(&c->rope_scaling),
                          "tie_word_embeddings", c->tied, "vocab_size", c->vocab, "attention_bias", 0, "mlp_bias", 0,
                          "torch_dtype", "float32");
    /* the token ids as they were read (eos a list where it was one) */
    const WpTokenIds *t = &c->ids;
    json_t *eos = t->eos_list ? json_array() : t->neos ? json_integer(t->eos[0]) : NULL;
    for (int i = 0; t->eos_list && i < t->neos; i++) json_array_append_new(eos, json_integer(t->eos[i]));
    if (!o) json_decref(eos);
    if (o && ((t->nbos && json_object_set_new(o, "bos_token_id", json_integer(t->bos))) ||
              (eos && json_object_set_new(o, "eos_token_id", eos)) ||
              (t->npad && json_object_set_new(o, "pad_token_id", json_integer(t->pad))))) {
        json_decref(o);
        o = NULL;
    }
    /* transformers keeps unknown keys as attributes: harmless, and it tells the writer's file
     * from a config.json someone else wrote */
    if (o && written_by && json_object_set_new(o, "written_by", json_string(written_by))) {
        json_decref(o);
        o = NULL;
    }
    char *text = o ? json_dumps(o, JSON_INDENT(2) | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(9)) : NULL;
    json_decref(o);
    if (!text) return NULL;
    size_t n = strlen(text);
    char *withnl = realloc(text, n + 2);
    if (!withnl) { free(text); return NULL; }
    withnl[n] = '\n';
    withnl[n + 1] = 0;
    return withnl;
}

int model_same(const WpConfig *a, const WpConfig *b) {
    return a->hidden == b->hidden && a->layers == b->layers && a->heads == b->heads && a->kv_heads == b->kv_heads &&
           a->head_dim == b->head_dim && a->ffn == b->ffn && a->vocab == b->vocab && a->tied == b->tied &&
           a->eps == b->eps && a->rope_theta == b->rope_theta &&
           wp_rope_scaling_equal(&a->rope_scaling, &b->rope_scaling);
}

/* The name a plan calls the model by: the file's base name without ".json", or for the usual
 * ".../NAME/config.json" the directory's name. */
static void model_name_of_path(const char *path, char *name, size_t namelen) {
    size_t end = strlen(path);
    while (end > 1 && path[end - 1] == '/') end--;
    size_t start = end;
    while (start > 0 && path[start - 1] != '/') start--;
    size_t len = end - start;
    if (len > 5 && strncmp(path + end - 5, ".json", 5) == 0) len -= 5;
    if (len == 6 && strncmp(path + start, "config", 6) == 0 && start > 1) {
        /* the directory before it, unless it is "." or ".." (which say nothing) */
        size_t dend = start - 1;
        while (dend > 0 && path[dend - 1] == '/') dend--;
        size_t dstart = dend;
        while (dstart > 0 && path[dstart - 1] != '/') dstart--;
        size_t dlen = dend - dstart;
        int dots = (dlen == 1 && path[dstart] == '.') || (dlen == 2 && strncmp(path + dstart, "..", 2) == 0);
        if (dlen > 0 && !dots) { start = dstart; len = dlen; }
    }
    snprintf(name, namelen, "%.*s", (int)len, path + start);
}

int model_load(const char *name_or_path, WpConfig *c, char *name, size_t namelen, char *err, size_t errlen) {
    int n;
    const ModelPreset *p = model_presets(&n);
    struct stat st;
    /* A file, or a folder holding a config.json, of the preset's name where one runs is what the
     * user made, so it wins (as transformers' from_pretrained takes a local folder before a hub
     * name), said on stderr: both print "model NAME" otherwise. Any other folder of that name
     * (an output folder, say) is not a model: the preset stays. */
    char probe[4096];
    snprintf(probe, sizeof probe, "%s/config.json", name_or_path);
    int on_disk = stat(name_or_path, &st) == 0 && (S_ISREG(st.st_mode) || (S_ISDIR(st.st_mode) && !access(probe, F_OK)));
    for (int i = 0; i < n; i++) {
        if (strcmp(p[i].name, name_or_path) != 0) continue;
        if (on_disk) {
            fprintf(stderr, "note: -m %s: loading the %s ./%s%s, not the preset %s (a preset is taken only where no "
                    "model file or folder of its name is here)\n", name_or_path, S_ISDIR(st.st_mode) ? "folder" : "file", name_or_path,
                    S_ISDIR(st.st_mode) ? "/config.json" : "", p[i].name);
            break;
        }
        *c = p[i].cfg;
        if (name && namelen) snprintf(name, namelen, "%s", p[i].name);
        return model_check(c, err, errlen);
    }
    /* A model's folder, as transformers users name it: its config.json. */
    char cfgpath[4096];
    if (stat(name_or_path, &st) == 0 && S_ISDIR(st.st_mode)) {
        snprintf(cfgpath, sizeof cfgpath, "%s/config.json", name_or_path);
        if (access(cfgpath, F_OK))
            return errmsg(err, errlen, "%s: a folder without a config.json (-m takes a preset, a config.json or a "
                          "model's folder holding one)", name_or_path);
        name_or_path = cfgpath;
    }
    /* Not a preset. A bare word that is not a file is most likely a mistyped preset name. */
    int looks_like_path = strchr(name_or_path, '/') || strstr(name_or_path, ".json") || on_disk;
    FILE *f = looks_like_path ? NULL : fopen(name_or_path, "rb");
    if (!looks_like_path && !f)
        return errmsg(err, errlen, "unknown model %s: not a preset (see wpgen list) nor a config.json file", name_or_path);
    if (f) fclose(f);
    WpConfig tmp;
    /* one line, whatever the parser quotes from the file */
    if (load_hf_config(name_or_path, &tmp, err, errlen)) return errmsg_one_line(err);
    char why[256];
    if (model_check(&tmp, why, sizeof why)) return errmsg(err, errlen, "%s: %s", name_or_path, why);
    *c = tmp;
    if (name && namelen) model_name_of_path(name_or_path, name, namelen);
    return 0;
}

/* Limits far beyond any real model (the largest have H 16384, 126 layers, vocabularies of 256k,
 * contexts of 10^6), so that every count downstream (parameters, bytes, FLOPs, buffer sizes in
 * size_t and int) stays far from overflowing: a hidden size of 2^30 used to wrap the plan's byte
 * counts to "0 B" and "fits". */
#define MAX_PARAMS (1ULL << 44)        /* 17.6 trillion: 16 times the largest dense models */
#define MAX_ACT_FLOATS (1ULL << 50)    /* activations of one micro-batch through the whole model */

/* a * b into *out, or -1 when it passes limit (and so could have overflowed). */
static int mul_le(unsigned long long a, unsigned long long b, unsigned long long limit, unsigned long long *out) {
    unsigned long long r;
    if (__builtin_mul_overflow(a, b, &r) || r > limit) return -1;
    *out = r;
    return 0;
}

static int add_le(unsigned long long a, unsigned long long b, unsigned long long limit, unsigned long long *out) {
    unsigned long long r;
    if (__builtin_add_overflow(a, b, &r) || r > limit) return -1;
    *out = r;
    return 0;
}

int model_check(const WpConfig *c, char *err, size_t errlen) {
    /* Named as in config.json (and as wpgen's flags), since that is what a user can change. */
    const struct { const char *name; int value, max, log2; } sizes[] = {
        { "hidden_size", c->hidden, 1 << 20, 20 }, { "num_hidden_layers", c->layers, 1 << 16, 16 },
        { "num_attention_heads", c->heads, 1 << 20, 20 }, { "num_key_value_heads", c->kv_heads, 1 << 20, 20 },
        { "intermediate_size", c->ffn, 1 << 22, 22 }, { "vocab_size", c->vocab, 1 << 24, 24 },
        { "sequence length", c->seq, 1 << 24, 24 }, { "micro-batch size", c->mbs, 1 << 20, 20 },
    };
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        if (sizes[i].value <= 0)
            return errmsg(err, errlen, "%s: expected a positive integer, got %d", sizes[i].name, sizes[i].value);
        if (sizes[i].value > sizes[i].max)
            return errmsg(err, errlen, "%s: expected at most %d (2^%d, beyond any real model), got %d", sizes[i].name,
                          sizes[i].max, sizes[i].log2, sizes[i].value);
    }
    if (c->head_dim == 0)
        return errmsg(err, errlen, "num_attention_heads (%d) does not divide hidden_size (%d), and no head_dim is given",
                      c->heads, c->hidden);
    if (c->head_dim < 2 || c->head_dim > 1 << 20)
        return errmsg(err, errlen, "head_dim: expected an integer in [2, 1048576], got %d", c->head_dim);
    if (c->heads % c->kv_heads != 0)
        return errmsg(err, errlen, "num_key_value_heads (%d) does not divide num_attention_heads (%d)",
                    c->kv_heads, c->heads);
    /* RoPE rotates pairs of dimensions. */
    if (c->head_dim % 2 != 0)
        return errmsg(err, errlen, "head_dim (%d) must be even for RoPE", c->head_dim);
    if (!(c->eps > 0) || !isfinite(c->eps))
        return errmsg(err, errlen, "rms_norm_eps: expected a positive number, got %g", (double)c->eps);
    if (!(c->rope_theta > 0) || !isfinite(c->rope_theta))
        return errmsg(err, errlen, "rope_theta: expected a positive number, got %g", (double)c->rope_theta);
    const WpRopeScaling *r = &c->rope_scaling;
    if (r->factor != 0) {
        if (!(r->factor >= 1) || !isfinite(r->factor))
            return errmsg(err, errlen, "rope_scaling.factor: expected a number of at least 1, got %g", (double)r->factor);
        if (!(r->low_freq_factor > 0) || !isfinite(r->low_freq_factor))
            return errmsg(err, errlen, "rope_scaling.low_freq_factor: expected a positive number, got %g",
                          (double)r->low_freq_factor);
        if (!(r->high_freq_factor > r->low_freq_factor) || !isfinite(r->high_freq_factor))
            return errmsg(err, errlen, "rope_scaling.high_freq_factor: expected more than low_freq_factor (%g), got %g",
                          (double)r->low_freq_factor, (double)r->high_freq_factor);
        if (r->original_max_position_embeddings <= 0)
            return errmsg(err, errlen, "rope_scaling.original_max_position_embeddings: expected a positive integer, got %d",
                          r->original_max_position_embeddings);
    }
    if (c->tied != 0 && c->tied != 1)
        return errmsg(err, errlen, "tie_word_embeddings: expected 0 or 1, got %d", c->tied);
    /* The tokens of a micro-batch are counted in an int. */
    if ((long long)c->seq * c->mbs > INT_MAX)
        return errmsg(err, errlen, "sequence length x micro-batch size (%d x %d) is too large", c->seq, c->mbs);
    /* Products, in checked 64-bit arithmetic: each field may be within its limit and the model
     * still absurd. Parameters: a layer's 2H + 2qH + 2kvH + 3FH (config.c), L of them, and the
     * embedding and head. */
    unsigned long long H = (unsigned)c->hidden, F = (unsigned)c->ffn, V = (unsigned)c->vocab,
                       q = (unsigned long long)(unsigned)c->heads * (unsigned)c->head_dim,
                       kv = (unsigned long long)(unsigned)c->kv_heads * (unsigned)c->head_dim, a, b, layer, params;
    const unsigned long long P = MAX_PARAMS;
    int bad = mul_le(3 * F + 2 * kv + 2 * q + 2, H, P, &layer) || mul_le(layer, (unsigned)c->layers, P, &a) ||
              mul_le(2 * V + 1, H, P, &b) || add_le(a, b, P, &params);
    if (bad)
        return errmsg(err, errlen, "the model has more than 2^44 parameters (hidden_size %d, intermediate_size %d, "
                      "num_hidden_layers %d, vocab_size %d): beyond any real model", c->hidden, c->ffn, c->layers, c->vocab);
    /* Activations of one micro-batch, bounded from above: per layer and token at most
     * 4H + 4q + 4kv + 4F + 4 heads + 4 floats (config.c's stash keeps 2H + 2q + 2kv + 2F + heads
     * + 2; the workspace as much again), the logits T x V on top. q and kv are at most 2^40 here
     * (2^20 heads of 2^20), so the sum cannot wrap. */
    unsigned long long T = (unsigned long long)c->seq * (unsigned)c->mbs, per_tok, acts, logits;
    const unsigned long long A = MAX_ACT_FLOATS;
    bad = mul_le(4 * H + 4 * q + 4 * kv + 4 * F + 4 * (unsigned)c->heads + 4, (unsigned)c->layers + 1ULL, A, &per_tok) ||
          mul_le(per_tok, T, A, &acts) || mul_le(T, V, A, &logits) || add_le(acts, logits, A, &acts);
    if (bad)
        return errmsg(err, errlen, "one micro-batch's activations pass 2^50 floats (sequence length %d x micro-batch "
                      "size %d, hidden_size %d, intermediate_size %d, %d layers, vocab_size %d): beyond any real run",
                      c->seq, c->mbs, c->hidden, c->ffn, c->layers, c->vocab);
    return 0;
}
