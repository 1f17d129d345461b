/* Tests of model shapes: every preset loads under its name and passes model_check, the papers'
 * shapes have LLaMA-2's FFN sizes, a Hugging Face config.json (with the unrelated keys real ones
 * have) loads with its defaults, and bad configs give one-line messages naming file and field. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "check.h"
#include "common/modelcfg.h"

static char tmpdir[] = "/tmp/wp-test-modelcfg-XXXXXX";

/* Writes text to path, with ' turned into " so that JSON reads easily in C strings. */
static void write_file(const char *path, const char *text) {
    FILE *f = fopen(path, "w");
    if (!f) { perror(path); exit(1); }
    for (const char *p = text; *p; p++) fputc(*p == '\'' ? '"' : *p, f);
    if (fclose(f) != 0) { perror(path); exit(1); }
}

static const ModelPreset *find_preset(const char *name) {
    int n;
    const ModelPreset *p = model_presets(&n);
    for (int i = 0; i < n; i++)
        if (strcmp(p[i].name, name) == 0) return &p[i];
    return NULL;
}

static void test_presets(void) {
    int n;
    const ModelPreset *p = model_presets(&n);
    CHECK(n >= 9, "%d presets", n);
    for (int i = 0; i < n; i++) {
        char err[256] = "", name[64] = "";
        WpConfig c;
        CHECK(model_check(&p[i].cfg, err, sizeof err) == 0, "preset %s: %s", p[i].name, err);
        /* the models' layer offsets are the tensors' order: a middle chunk of one layer */
        WpChunk k = wp_chunk_make(&p[i].cfg, 1, 0, 1, 0, 0);
        WpTensor t[9];
        WpLayerOffsets o = wp_layer_offsets(&p[i].cfg);
        CHECK(wp_chunk_tensors(&p[i].cfg, &k, t) == 9 && o.ln1 == t[0].offset && o.wqkv == t[1].offset && o.wo == t[4].offset &&
              o.ln2 == t[5].offset && o.wgu == t[6].offset && o.wdown == t[8].offset &&
              t[8].offset + t[8].rows * t[8].cols == wp_layer_nparams(&p[i].cfg),
              "preset %s: wp_layer_offsets against wp_chunk_tensors", p[i].name);
        CHECK(p[i].about && p[i].about[0] && !strchr(p[i].about, '\n'), "preset %s: about", p[i].name);
        int rc = model_load(p[i].name, &c, name, sizeof name, err, sizeof err);
        CHECK(rc == 0 && strcmp(name, p[i].name) == 0, "load %s: %s", p[i].name, err);
        CHECK(rc == 0 && memcmp(&c, &p[i].cfg, sizeof c) == 0, "load %s: not the preset", p[i].name);
        for (int j = 0; j < i; j++) CHECK(strcmp(p[i].name, p[j].name) != 0, "preset %s twice", p[i].name);
    }
    const ModelPreset *tiny = find_preset("tiny");
    CHECK(tiny != NULL, "no tiny preset");
    if (tiny) {
        const WpConfig *c = &tiny->cfg;
        CHECK(c->hidden == 64 && c->layers == 4 && c->heads == 4 && c->kv_heads == 2 && c->head_dim == 16, "tiny heads");
        CHECK(c->ffn == 176 && c->vocab == 256 && c->seq == 64 && c->mbs == 2 && c->tied == 0, "tiny sizes");
        CHECK(c->eps == 1e-5f && c->rope_theta == 10000.0f, "tiny eps, theta");
    }
    /* LLaMA-2 FFN sizing: 256 * ceil(8H/3 / 256). */
    const struct { const char *name; int hidden, layers, ffn; } shapes[] = {
        { "llama-h1024", 1024, 32, 2816 }, { "llama-h2048", 2048, 32, 5632 }, { "llama-h4096", 4096, 32, 11008 },
        { "tawpipe-h2048", 2048, 48, 5632 }, { "llama2-7b", 4096, 32, 11008 },
    };
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
        const ModelPreset *s = find_preset(shapes[i].name);
        CHECK(s != NULL, "no preset %s", shapes[i].name);
        if (!s) continue;
        CHECK(s->cfg.hidden == shapes[i].hidden && s->cfg.layers == shapes[i].layers && s->cfg.ffn == shapes[i].ffn,
              "%s: H %d, L %d, ffn %d", s->name, s->cfg.hidden, s->cfg.layers, s->cfg.ffn);
        CHECK(s->cfg.heads == 32 && s->cfg.kv_heads == 32 && s->cfg.vocab == 32000 && s->cfg.seq == 4096,
              "%s: heads, vocab, seq", s->name);
    }
}

static void test_hf_config(void) {
    char dir[256], path[300], name[64], err[512];
    WpConfig c;
    /* A config.json as Hugging Face writes it, named by its directory. */
    snprintf(dir, sizeof dir, "%s/my-llama", tmpdir);
    CHECK(mkdir(dir, 0700) == 0, "mkdir %s", dir);
    snprintf(path, sizeof path, "%s/config.json", dir);
    write_file(path, "{'architectures': ['LlamaForCausalLM'], 'model_type': 'llama', 'torch_dtype': 'bfloat16',\n"
                     " 'hidden_act': 'silu', 'hidden_size': 512, 'intermediate_size': 1376,\n"
                     " 'num_hidden_layers': 8, 'num_attention_heads': 8, 'num_key_value_heads': 2,\n"
                     " 'head_dim': 64, 'rms_norm_eps': 1e-05, 'rope_theta': 500000.0, 'rope_scaling': null,\n"
                     " 'tie_word_embeddings': true, 'vocab_size': 32000, 'max_position_embeddings': 8192,\n"
                     " 'transformers_version': '4.44.0'}");
    int rc = model_load(path, &c, name, sizeof name, err, sizeof err);
    CHECK(rc == 0, "%s", err);
    CHECK(rc == 0 && strcmp(name, "my-llama") == 0, "name %s", name);
    CHECK(c.hidden == 512 && c.ffn == 1376 && c.layers == 8 && c.heads == 8 && c.kv_heads == 2 && c.head_dim == 64,
          "sizes from config.json");
    CHECK(c.vocab == 32000 && c.tied == 1 && c.eps == 1e-5f && c.rope_theta == 500000.0f, "vocab, tied, eps, theta");
    CHECK(c.seq == 4096 && c.mbs == 1, "seq %d (max_position_embeddings capped at 4096), mbs %d", c.seq, c.mbs);
    unlink(path);
    rmdir(dir);

    /* Only the required fields: Hugging Face's defaults for the rest. Named by its base name. */
    snprintf(path, sizeof path, "%s/mini.json", tmpdir);
    write_file(path, "{'hidden_size': 64, 'intermediate_size': 176, 'num_hidden_layers': 2,"
                     " 'num_attention_heads': 4, 'vocab_size': 256, 'num_key_value_heads': null}");
    rc = model_load(path, &c, name, sizeof name, err, sizeof err);
    CHECK(rc == 0 && strcmp(name, "mini") == 0, "mini.json: %s (name %s)", err, name);
    CHECK(c.kv_heads == 4 && c.head_dim == 16 && c.eps == 1e-6f && c.rope_theta == 10000.0f && c.tied == 0,
          "mini.json defaults");
    CHECK(c.seq == 1024 && c.mbs == 1, "mini.json seq %d mbs %d", c.seq, c.mbs);
    unlink(path);
}

/* Bad configs: each written to tmpdir/NAME.json; the message follows "PATH: ". */
static const struct { const char *name, *json, *message; } bad[] = {
    { "malformed", "{'hidden_size': 64,", "line 1, column 19: malformed JSON: string or '}' expected near end of file" },
    { "array", "[]", "top level: expected an object, got an empty array" },
    { "no-hidden", "{'intermediate_size': 176, 'num_hidden_layers': 2, 'num_attention_heads': 4, 'vocab_size': 256}",
      "hidden_size: expected an integer in [1, 1048576], got nothing" },
    { "hidden-string", "{'hidden_size': '64', 'intermediate_size': 176, 'num_hidden_layers': 2, 'num_attention_heads': 4, 'vocab_size': 256}",
      "hidden_size: expected an integer in [1, 1048576], got \"64\"" },
    { "layers-zero", "{'hidden_size': 64, 'intermediate_size': 176, 'num_hidden_layers': 0, 'num_attention_heads': 4, 'vocab_size': 256}",
      "num_hidden_layers: expected an integer in [1, 65536], got 0" },
    { "eps-negative", "{'hidden_size': 64, 'intermediate_size': 176, 'num_hidden_layers': 2, 'num_attention_heads': 4, 'vocab_size': 256, 'rms_norm_eps': -1e-6}",
      "rms_norm_eps: expected a number in [1e-12, 1], got -1e-6" },
    { "tie-string", "{'hidden_size': 64, 'intermediate_size': 176, 'num_hidden_layers': 2, 'num_attention_heads': 4, 'vocab_size': 256, 'tie_word_embeddings': 'no'}",
      "tie_word_embeddings: expected true or false, got \"no\"" },
    { "heads-not-dividing", "{'hidden_size': 64, 'intermediate_size': 176, 'num_hidden_layers': 2, 'num_attention_heads': 6, 'vocab_size': 256}",
      "num_attention_heads (6) does not divide hidden_size (64), and no head_dim is given" },
    { "kv-not-dividing", "{'hidden_size': 64, 'intermediate_size': 176, 'num_hidden_layers': 2, 'num_attention_heads': 4, 'num_key_value_heads': 3, 'vocab_size': 256}",
      "num_key_value_heads (3) does not divide num_attention_heads (4)" },
    { "head-dim-1", "{'hidden_size': 64, 'intermediate_size': 176, 'num_hidden_layers': 2, 'num_attention_heads': 4, 'head_dim': 1, 'vocab_size': 256}",
      "head_dim: expected an integer in [2, 1048576], got 1" },
    { "odd-head-dim", "{'hidden_size': 36, 'intermediate_size': 96, 'num_hidden_layers': 2, 'num_attention_heads': 4, 'vocab_size': 256}",
      "head_dim (9) must be even for RoPE" },
    { "odd-head-dim-given", "{'hidden_size': 64, 'intermediate_size': 96, 'num_hidden_layers': 2, 'num_attention_heads': 4, 'head_dim': 9, 'vocab_size': 256}",
      "head_dim (9) must be even for RoPE" },
    /* rope_scaling: Llama 3.1's, complete and in range, or refused with the key named */
#define SIZES "'hidden_size': 64, 'intermediate_size': 176, 'num_hidden_layers': 2, 'num_attention_heads': 4, 'vocab_size': 256, "
    { "rope-string", "{" SIZES "'rope_scaling': 'llama3'}", "rope_scaling: expected an object or null, got \"llama3\"" },
    { "rope-yarn", "{" SIZES "'rope_scaling': {'rope_type': 'yarn', 'factor': 4.0, 'original_max_position_embeddings': 4096}}",
      "rope_scaling.rope_type: expected \"llama3\" (wpgen trains Llama 3.1's RoPE scaling), got \"yarn\"" },
    { "rope-linear", "{" SIZES "'rope_scaling': {'type': 'linear', 'factor': 2.0}}",
      "rope_scaling.type: expected \"llama3\" (wpgen trains Llama 3.1's RoPE scaling), got \"linear\"" },
    { "rope-no-type", "{" SIZES "'rope_scaling': {'factor': 8.0, 'low_freq_factor': 1.0, 'high_freq_factor': 4.0, 'original_max_position_embeddings': 8192}}",
      "rope_scaling.rope_type: expected \"llama3\" (the only scaling wpgen implements), got nothing" },
    { "rope-no-factor", "{" SIZES "'rope_scaling': {'rope_type': 'llama3', 'low_freq_factor': 1.0, 'high_freq_factor': 4.0, 'original_max_position_embeddings': 8192}}",
      "rope_scaling.factor: expected a number in [1, 1e+06], got nothing" },
    { "rope-factor-small", "{" SIZES "'rope_scaling': {'rope_type': 'llama3', 'factor': 0.5, 'low_freq_factor': 1.0, 'high_freq_factor': 4.0, 'original_max_position_embeddings': 8192}}",
      "rope_scaling.factor: expected a number in [1, 1e+06], got 0.5" },
    { "rope-orig-zero", "{" SIZES "'rope_scaling': {'rope_type': 'llama3', 'factor': 8, 'low_freq_factor': 1.0, 'high_freq_factor': 4.0, 'original_max_position_embeddings': 0}}",
      "rope_scaling.original_max_position_embeddings: expected an integer in [1, 16777216], got 0" },
    { "rope-high-low", "{" SIZES "'rope_scaling': {'rope_type': 'llama3', 'factor': 8, 'low_freq_factor': 4.0, 'high_freq_factor': 4.0, 'original_max_position_embeddings': 8192}}",
      "rope_scaling.high_freq_factor: expected more than low_freq_factor (4), got 4" },
    { "rope-extra", "{" SIZES "'rope_scaling': {'rope_type': 'llama3', 'factor': 8, 'low_freq_factor': 1.0, 'high_freq_factor': 4.0, 'original_max_position_embeddings': 8192, 'mscale': 1}}",
      "rope_scaling.mscale: not a key wpgen knows (it implements rope_type \"llama3\": rope_type, factor, low_freq_factor, "
      "high_freq_factor, original_max_position_embeddings)" },
#undef SIZES
    /* Sizes no real model has: each field has a limit, then the products (parameters, one
     * micro-batch's activations) are counted in checked 64-bit arithmetic. A hidden size of 2^30
     * used to wrap the plan's byte counts to "0 B" and "fits". */
    { "hidden-2-30", "{'hidden_size': 1073741824, 'intermediate_size': 176, 'num_hidden_layers': 2, 'num_attention_heads': 4, 'vocab_size': 256}",
      "hidden_size: expected an integer in [1, 1048576], got 1073741824" },
    { "layers-huge", "{'hidden_size': 64, 'intermediate_size': 176, 'num_hidden_layers': 100000, 'num_attention_heads': 4, 'vocab_size': 256}",
      "num_hidden_layers: expected an integer in [1, 65536], got 100000" },
    { "vocab-huge", "{'hidden_size': 64, 'intermediate_size': 176, 'num_hidden_layers': 2, 'num_attention_heads': 4, 'vocab_size': 2147483647}",
      "vocab_size: expected an integer in [1, 16777216], got 2147483647" },
    { "ffn-huge", "{'hidden_size': 64, 'intermediate_size': 8388608, 'num_hidden_layers': 2, 'num_attention_heads': 4, 'vocab_size': 256}",
      "intermediate_size: expected an integer in [1, 4194304], got 8388608" },
    { "params-huge", "{'hidden_size': 1048576, 'intermediate_size': 4194304, 'num_hidden_layers': 65536, 'num_attention_heads': 4096, 'vocab_size': 16777216}",
      "the model has more than 2^44 parameters (hidden_size 1048576, intermediate_size 4194304, num_hidden_layers 65536, vocab_size 16777216): beyond any real model" },
};

static void test_bad_configs(void) {
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char path[256], want[1024], err[1024] = "";
        snprintf(path, sizeof path, "%s/%s.json", tmpdir, bad[i].name);
        write_file(path, bad[i].json);
        snprintf(want, sizeof want, "%s: %s", path, bad[i].message);
        WpConfig c = { 0 };
        CHECK(model_load(path, &c, NULL, 0, err, sizeof err) == -1, "%s: loaded", bad[i].name);
        CHECK(strcmp(err, want) == 0, "%s:\n  got  %s\n  want %s", bad[i].name, err, want);
        unlink(path);
    }
    char err[512];
    WpConfig c;
    CHECK(model_load("tinyy", &c, NULL, 0, err, sizeof err) == -1
          && strcmp(err, "unknown model tinyy: not a preset (see wpgen list) nor a config.json file") == 0, "%s", err);
    CHECK(model_load("no/such/config.json", &c, NULL, 0, err, sizeof err) == -1
          && strcmp(err, "no/such/config.json: cannot open: No such file or directory") == 0, "%s", err);

    /* model_check on its own: what a caller's --seq or --micro-batch-size can break. */
    const ModelPreset *tiny = find_preset("tiny");
    if (!tiny) return;
    c = tiny->cfg;
    c.seq = 0;
    CHECK(model_check(&c, err, sizeof err) == -1 && strcmp(err, "sequence length: expected a positive integer, got 0") == 0, "%s", err);
    c = tiny->cfg;
    c.seq = 1 << 25;
    CHECK(model_check(&c, err, sizeof err) == -1 && strcmp(err, "sequence length: expected at most 16777216 (2^24, beyond any real model), got 33554432") == 0, "%s", err);
    c = tiny->cfg;
    c.mbs = 1 << 21;
    CHECK(model_check(&c, err, sizeof err) == -1 && strstr(err, "micro-batch size: expected at most 1048576"), "%s", err);
    /* The largest real shapes pass: LLaMA-3 405B (H 16384, 126 layers, FFN 53248, vocabulary
     * 128256) at a context of 2^20. */
    WpConfig big = { .hidden = 16384, .layers = 126, .heads = 128, .kv_heads = 8, .head_dim = 128, .ffn = 53248,
                     .vocab = 128256, .eps = 1e-5f, .rope_theta = 5e5f, .seq = 1 << 20, .mbs = 1 };
    CHECK(model_check(&big, err, sizeof err) == 0, "405B: %s", err);
    WpChunk whole = wp_chunk_make(&big, 0, 0, big.layers, 1, 1);
    CHECK(whole.nparams > 405000000000ULL && whole.nparams < 406000000000ULL, "405B: %zu parameters", whole.nparams);
    big.seq = 1 << 24;
    big.mbs = 64;
    CHECK(model_check(&big, err, sizeof err) == -1 && strcmp(err, "one micro-batch's activations pass 2^50 floats (sequence "
          "length 16777216 x micro-batch size 64, hidden_size 16384, intermediate_size 53248, 126 layers, vocab_size 128256): "
          "beyond any real run") == 0, "%s", err);
    c = tiny->cfg;
    c.head_dim = 8;   /* heads x head_dim (32) need not be hidden_size (64) */
    CHECK(model_check(&c, err, sizeof err) == 0, "head_dim 8: %s", err);
    c.head_dim = 0;
    CHECK(model_check(&c, err, sizeof err) == -1 && strcmp(err, "num_attention_heads (4) does not divide hidden_size (64), "
          "and no head_dim is given") == 0, "%s", err);
}

static void test_names(void) {
    /* The name of a config.json path: directory for config.json, else the base name. */
    const char *cases[][2] = {
        { "models/llama-7b/config.json", "llama-7b" }, { "config.json", "config" }, { "./config.json", "config" },
        { "a/b/tiny2.json", "tiny2" },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        /* Write each under tmpdir so that it exists; compare the name only. */
        char path[512], name[64] = "", err[512], sub[512];
        snprintf(path, sizeof path, "%s/%s", tmpdir, cases[i][0]);
        for (char *s = strchr(path + strlen(tmpdir) + 1, '/'); s; s = strchr(s + 1, '/')) {
            snprintf(sub, sizeof sub, "%.*s", (int)(s - path), path);
            mkdir(sub, 0700);
        }
        write_file(path, "{'hidden_size': 64, 'intermediate_size': 176, 'num_hidden_layers': 2,"
                         " 'num_attention_heads': 4, 'vocab_size': 256}");
        WpConfig c;
        /* "config.json" alone: load it through a path with no directory part. */
        const char *arg = path;
        char cwd[512];
        int chdir_ok = 0;
        if (strchr(cases[i][0], '/') == NULL || strncmp(cases[i][0], "./", 2) == 0) {
            chdir_ok = getcwd(cwd, sizeof cwd) && chdir(tmpdir) == 0;
            arg = cases[i][0];
        }
        int rc = model_load(arg, &c, name, sizeof name, err, sizeof err);
        CHECK(rc == 0 && strcmp(name, cases[i][1]) == 0, "%s: name %s, want %s (%s)", cases[i][0], name, cases[i][1],
              rc ? err : "ok");
        if (chdir_ok) CHECK(chdir(cwd) == 0, "chdir back");
        unlink(path);
    }
    char d[512];
    snprintf(d, sizeof d, "%s/models/llama-7b", tmpdir); rmdir(d);
    snprintf(d, sizeof d, "%s/models", tmpdir); rmdir(d);
    snprintf(d, sizeof d, "%s/a/b", tmpdir); rmdir(d);
    snprintf(d, sizeof d, "%s/a", tmpdir); rmdir(d);
}

int main(void) {
    if (!mkdtemp(tmpdir)) { perror("mkdtemp"); return 1; }
    test_presets();
    test_hf_config();
    test_bad_configs();
    test_names();
    CHECK(rmdir(tmpdir) == 0, "temporary directory %s left non-empty", tmpdir);
    return check_summary("test_modelcfg");
}
