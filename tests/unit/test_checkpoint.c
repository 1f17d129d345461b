/* Checkpoints: round trip through chunks (saved as two chunks, loaded as one and back), shards
 * that cut tensors (as FSDP's do) loaded under other chunkings, the manifest's coverage check,
 * the config.json beside it, the optimizer state, shape mismatches, BF16 input; one commit (a
 * failed save leaves the previous checkpoint intact; what a crash at any point leaves loads as
 * the previous or the new checkpoint; leftovers of crashed saves go at the next save, and only
 * ours); --keep; the paths a save refuses to replace; checkpoints of the earlier formats. */
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <dirent.h>
#include <unistd.h>

#include <jansson.h>

#include "check.h"
#include "tmpdir.h"
#include "train/checkpoint.h"
#include "train/safetensors.h"

static WpConfig tiny(int hidden, int layers, int tied) {
    WpConfig c = {.hidden = hidden, .layers = layers, .heads = 2, .kv_heads = 1, .head_dim = hidden / 2,
                  .ffn = 2 * hidden + 4, .vocab = 40, .eps = 1e-5f, .rope_theta = 10000, .tied = tied,
                  .seq = 16, .mbs = 2};
    return c;
}

static float *filled(size_t n, float base) {
    float *p = malloc(n * sizeof *p);
    for (size_t i = 0; i < n; i++) p[i] = base + (float)i * 1e-3f;
    return p;
}

static int find_file(const char *part, char *first, size_t len);

static void test_round_trip(int tied) {
    WpConfig c = tiny(8, 3, tied);
    WpChunk whole = wp_chunk_make(&c, 0, 0, 3, 1, 1);
    /* Two chunks, as a pipeline holds them: layers 0 (with the embedding) and 1-2 (with the head). */
    WpChunk two[2] = {wp_chunk_make(&c, 0, 0, 1, 1, 0), wp_chunk_make(&c, 1, 1, 2, 0, 1)};
    CHECK(two[0].nparams + two[1].nparams == whole.nparams || tied, "chunk sizes");
    if (tied) {   /* a tied model runs as one chunk only */
        two[0] = whole;
    }
    int nk = tied ? 1 : 2;
    float *p[2], *m[2], *v[2];
    for (int k = 0; k < nk; k++) {
        p[k] = filled(two[k].nparams, (float)k);
        m[k] = filled(two[k].nparams, 10.0f + k);
        v[k] = filled(two[k].nparams, 20.0f + k);
    }
    WpTrainState st = {.step = 5, .seed = 1234567890123ULL, .data_seq = 40, .micro_batches = 4,
                       .micro_batch_size = 2, .seq = 16};
    char err[512] = "";
    const char *path = tmp_path(tied ? "tied.json" : "checkpoint.json");
    CHECK(ckpt_save(path, &c, two, nk, p, m, v, &st, 1, err, sizeof err) == 0, "save: %s", err);

    /* Load it as one chunk covering everything: the reference trainer's view. */
    float *P = calloc(whole.nparams, 4), *Mo = calloc(whole.nparams, 4), *Vo = calloc(whole.nparams, 4);
    WpTrainState st2 = {0};
    CHECK(ckpt_load(path, &c, &whole, 1, &P, &Mo, &Vo, &st2, err, sizeof err) == 0, "load: %s", err);
    size_t off = 0;
    int same = 1;
    for (int k = 0; k < nk; k++) {
        same &= memcmp(P + off, p[k], two[k].nparams * 4) == 0;
        same &= memcmp(Mo + off, m[k], two[k].nparams * 4) == 0;
        same &= memcmp(Vo + off, v[k], two[k].nparams * 4) == 0;
        off += two[k].nparams;
    }
    CHECK(same, "tensors differ after the round trip (tied=%d)", tied);
    CHECK(st2.step == 5 && st2.seed == 1234567890123ULL && st2.data_seq == 40 && st2.micro_batches == 4 &&
          st2.micro_batch_size == 2 && st2.seq == 16, "state");

    /* And back into two chunks, weights only. */
    if (!tied) {
        float *q[2] = {calloc(two[0].nparams, 4), calloc(two[1].nparams, 4)};
        CHECK(ckpt_load(path, &c, two, 2, q, NULL, NULL, NULL, err, sizeof err) == 0, "load 2: %s", err);
        CHECK(memcmp(q[0], p[0], two[0].nparams * 4) == 0 && memcmp(q[1], p[1], two[1].nparams * 4) == 0, "2 chunks");
        /* A rank may load only the chunk it owns. */
        memset(q[1], 0, two[1].nparams * 4);
        CHECK(ckpt_load(path, &c, &two[1], 1, &q[1], NULL, NULL, NULL, err, sizeof err) == 0, "load chunk 1: %s", err);
        CHECK(memcmp(q[1], p[1], two[1].nparams * 4) == 0, "chunk 1 alone");
        free(q[0]); free(q[1]);
    }

    /* The one shard: Hugging Face names, 1-D slices, each slice's offset and whole shape. */
    char shard[600] = "";
    CHECK(find_file(tied ? "tied.shard.5.0." : "checkpoint.shard.5.0.", shard, sizeof shard) == 1, "one shard of step 5");
    WpStFile *f = wp_st_open(shard, err, sizeof err);
    size_t shape[8];
    int nd;
    const char *dt;
    CHECK(f && wp_st_get(f, "model.embed_tokens.weight", &dt, shape, &nd, NULL) && nd == 1 && shape[0] == 40 * 8 &&
          strcmp(dt, "F32") == 0, "embedding");
    CHECK(f && wp_st_get(f, "model.layers.2.self_attn.k_proj.weight.exp_avg_sq", NULL, shape, &nd, NULL) && nd == 1 &&
          shape[0] == 4 * 8, "k_proj's second moment [kv_heads*head_dim * hidden]");
    CHECK(f && (wp_st_get(f, "lm_head.weight", NULL, NULL, NULL, NULL) != NULL) == !tied, "lm_head iff untied");
    CHECK(f && wp_st_metadata(f, "format") && strcmp(wp_st_metadata(f, "format"), "wpgen-shard") == 0, "format");
    json_t *sl = f && wp_st_metadata(f, "slices") ? json_loads(wp_st_metadata(f, "slices"), 0, NULL) : NULL;
    json_t *down = json_object_get(sl, "model.layers.1.mlp.down_proj.weight");
    CHECK(json_integer_value(json_object_get(down, "offset")) == 0 &&
          json_integer_value(json_array_get(json_object_get(down, "shape"), 0)) == 8 &&
          json_integer_value(json_array_get(json_object_get(down, "shape"), 1)) == 20, "down_proj's slice [hidden, ffn]");
    json_decref(sl);
    wp_st_close(f);
    /* The files --resume reads besides the manifest: the shard. */
    char **files = NULL;
    int nfiles = ckpt_input_files(path, &files);
    CHECK(nfiles == 1 && strcmp(files[0], shard) == 0, "input files: %d, %s", nfiles, nfiles ? files[0] : "");
    ckpt_files_free(files, nfiles);

    /* config.json beside it. */
    json_error_t je;
    json_t *cfg = json_load_file(tmp_path("config.json"), 0, &je);
    CHECK(cfg != NULL, "config.json: %s", je.text);
    if (cfg) {
        CHECK(json_integer_value(json_object_get(cfg, "hidden_size")) == 8, "hidden_size");
        CHECK(json_integer_value(json_object_get(cfg, "num_hidden_layers")) == 3, "layers");
        CHECK(json_integer_value(json_object_get(cfg, "num_attention_heads")) == 2, "heads");
        CHECK(json_integer_value(json_object_get(cfg, "num_key_value_heads")) == 1, "kv heads");
        CHECK(json_integer_value(json_object_get(cfg, "intermediate_size")) == 20, "ffn");
        CHECK(json_integer_value(json_object_get(cfg, "vocab_size")) == 40, "vocab");
        CHECK(json_integer_value(json_object_get(cfg, "max_position_embeddings")) == 16, "max pos");
        CHECK(json_real_value(json_object_get(cfg, "rms_norm_eps")) == 1e-5, "eps exactly 1e-05");
        CHECK(json_number_value(json_object_get(cfg, "rope_theta")) == 10000, "theta");
        CHECK(json_is_boolean(json_object_get(cfg, "tie_word_embeddings")) &&
              json_is_true(json_object_get(cfg, "tie_word_embeddings")) == tied, "tied");
        CHECK(strcmp(json_string_value(json_object_get(cfg, "model_type")), "llama") == 0, "model_type");
        CHECK(strcmp(json_string_value(json_array_get(json_object_get(cfg, "architectures"), 0)),
                     "LlamaForCausalLM") == 0, "architectures");
        CHECK(strcmp(json_string_value(json_object_get(cfg, "torch_dtype")), "float32") == 0, "dtype");
        json_decref(cfg);
    }
    for (int k = 0; k < nk; k++) { free(p[k]); free(m[k]); free(v[k]); }
    free(P); free(Mo); free(Vo);
}

/* Shards as FSDP cuts them: chunk 0 of a two-chunk model split between two processes at a float
 * that falls inside a tensor, chunk 1 whole on a third. Loaded as the whole model, as chunks of
 * other layer ranges (a layer alone), and the manifest's coverage checked at the commit. */
static void test_sharded(void) {
    WpConfig c = tiny(8, 3, 0);
    WpChunk whole = wp_chunk_make(&c, 0, 0, 3, 1, 1);
    WpChunk two[2] = {wp_chunk_make(&c, 0, 0, 2, 1, 0), wp_chunk_make(&c, 1, 2, 1, 0, 1)};
    size_t cut = two[0].nparams / 2 + 3;   /* inside some tensor: not at a tensor's start */
    WpCkptRange r0 = {0, 0, cut}, r1 = {0, cut, two[0].nparams - cut}, r2 = {1, 0, two[1].nparams};
    float *all = filled(whole.nparams, 0.5f), *mall = filled(whole.nparams, 3), *vall = filled(whole.nparams, 4);
    /* the chunks' floats are the whole model's, in order */
    float *w0 = all, *w1 = all + cut, *w2 = all + two[0].nparams;
    float *m0 = mall, *m1 = mall + cut, *m2 = mall + two[0].nparams;
    float *v0 = vall, *v1 = vall + cut, *v2 = vall + two[0].nparams;
    WpTrainState st = {.step = 7, .seed = 3, .data_seq = 56, .micro_batches = 4, .micro_batch_size = 2, .seq = 16};
    char err[512] = "", path[300];
    snprintf(path, sizeof path, "%s", tmp_path("fsdp.json"));
    uint64_t h[3];
    int created[3];
    CHECK(ckpt_write_shard(path, &c, two, &r0, 1, &w0, &m0, &v0, &st, 0, &h[0], &created[0], err, sizeof err) == 0 &&
          ckpt_write_shard(path, &c, two, &r1, 1, &w1, &m1, &v1, &st, 1, &h[1], &created[1], err, sizeof err) == 0 &&
          ckpt_write_shard(path, &c, two, &r2, 1, &w2, &m2, &v2, &st, 2, &h[2], &created[2], err, sizeof err) == 0,
          "shards: %s", err);
    CHECK(created[0] && created[1] && created[2], "new shards");
    /* a commit that leaves part of a tensor out is refused, naming it and the range */
    WpCkptShard partial[2] = {{0, h[0], &r0, 1}, {2, h[2], &r2, 1}}, full[3] = {{0, h[0], &r0, 1}, {1, h[1], &r1, 1}, {2, h[2], &r2, 1}};
    int committed = 1;
    CHECK(ckpt_commit(path, &c, two, 2, partial, 2, &st, 1, 1, &committed, err, sizeof err) == -1 && !committed &&
          strstr(err, "leave out elements") && access(path, F_OK) != 0, "a partial commit: %s", err);
    WpCkptRange past = {1, 1, two[1].nparams};   /* one float past chunk 1's end */
    WpCkptShard wrong[3] = {{0, h[0], &r0, 1}, {1, h[1], &r1, 1}, {2, h[2], &past, 1}};
    CHECK(ckpt_commit(path, &c, two, 2, wrong, 3, &st, 1, 1, &committed, err, sizeof err) == -1 &&
          strstr(err, "outside the chunks"), "a range past its chunk: %s", err);
    CHECK(ckpt_commit(path, &c, two, 2, full, 3, &st, 1, 1, &committed, err, sizeof err) == 0 && committed, "commit: %s", err);

    float *P = calloc(whole.nparams, 4), *M = calloc(whole.nparams, 4), *V = calloc(whole.nparams, 4);
    WpTrainState s2;
    CHECK(ckpt_load(path, &c, &whole, 1, &P, &M, &V, &s2, err, sizeof err) == 0, "load whole: %s", err);
    CHECK(memcmp(P, all, whole.nparams * 4) == 0 && memcmp(M, mall, whole.nparams * 4) == 0 &&
          memcmp(V, vall, whole.nparams * 4) == 0, "the whole model from three shards");
    CHECK(s2.step == 7 && s2.seed == 3 && s2.data_seq == 56 && s2.micro_batches == 4, "state");
    /* layer 1 alone (a chunk the save had inside chunk 0, cut by its shards) */
    WpChunk mid = wp_chunk_make(&c, 0, 1, 1, 0, 0);
    float *q = calloc(mid.nparams, 4);
    CHECK(ckpt_load(path, &c, &mid, 1, &q, NULL, NULL, NULL, err, sizeof err) == 0, "load layer 1: %s", err);
    WpChunk first = wp_chunk_make(&c, 0, 0, 1, 1, 0);
    CHECK(memcmp(q, all + first.nparams, mid.nparams * 4) == 0, "layer 1 alone");
    /* a missing shard: named when a chunk needs it, not when none does */
    char gone[600];
    ckpt_shard_path(path, 7, 2, h[2], gone, sizeof gone);
    CHECK(rename(gone, tmp_path("aside")) == 0, "rename");
    CHECK(ckpt_load(path, &c, &mid, 1, &q, NULL, NULL, NULL, err, sizeof err) == 0, "layer 1 needs no shard 2: %s", err);
    CHECK(ckpt_load(path, &c, &whole, 1, &P, NULL, NULL, NULL, err, sizeof err) == -1 && strstr(err, "fsdp.shard.7.2."),
          "a missing shard: %s", err);
    CHECK(rename(tmp_path("aside"), gone) == 0, "rename back");
    free(P); free(M); free(V); free(q); free(all); free(mall); free(vall);
}

static void test_shape_errors(void) {
    WpConfig c = tiny(8, 2, 0), wide = tiny(16, 2, 0), deep = tiny(8, 3, 0), shallow = tiny(8, 1, 0);
    WpChunk k = wp_chunk_make(&c, 0, 0, 2, 1, 1);
    float *p = filled(k.nparams, 0);
    char err[512] = "";
    CHECK(ckpt_save(tmp_path("s.json"), &c, &k, 1, &p, NULL, NULL, NULL, 1, err, sizeof err) == 0, "%s", err);

    WpChunk kw = wp_chunk_make(&wide, 0, 0, 2, 1, 1);
    float *q = calloc(kw.nparams, 4);
    CHECK(ckpt_load(tmp_path("s.json"), &wide, &kw, 1, &q, NULL, NULL, NULL, err, sizeof err) == -1, "wider model");
    CHECK(strstr(err, "s.json") && strstr(err, "model.embed_tokens.weight") && strstr(err, "[40, 8]") &&
          strstr(err, "[40, 16]"), "message: %s", err);
    free(q);

    WpChunk kd = wp_chunk_make(&deep, 0, 0, 3, 1, 1);
    q = calloc(kd.nparams, 4);
    CHECK(ckpt_load(tmp_path("s.json"), &deep, &kd, 1, &q, NULL, NULL, NULL, err, sizeof err) == -1, "deeper");
    CHECK(strstr(err, "model.layers.2.") && strstr(err, "missing"), "message: %s", err);
    free(q);

    WpChunk ks = wp_chunk_make(&shallow, 0, 0, 1, 1, 1);
    q = calloc(ks.nparams, 4);
    CHECK(ckpt_load(tmp_path("s.json"), &shallow, &ks, 1, &q, NULL, NULL, NULL, err, sizeof err) == -1, "shallower");
    CHECK(strstr(err, "model.layers.1.") && strstr(err, "not part of this model"), "message: %s", err);
    free(q);

    /* Resuming from a weights-only checkpoint: the optimizer file is missing. */
    float *m = calloc(k.nparams, 4), *v = calloc(k.nparams, 4);
    WpTrainState st;
    CHECK(ckpt_load(tmp_path("s.json"), &c, &k, 1, &p, &m, &v, &st, err, sizeof err) == -1, "no opt file");
    CHECK(strstr(err, "s.json holds only the weights") != NULL, "message: %s", err);
    free(p); free(m); free(v);
}

static void test_bf16(void) {
    WpConfig c = tiny(8, 1, 0);
    WpChunk k = wp_chunk_make(&c, 0, 0, 1, 1, 1);
    int n = wp_chunk_tensors(&c, &k, NULL);
    WpTensor *ts = calloc((size_t)n, sizeof *ts);
    wp_chunk_tensors(&c, &k, ts);
    WpStWriter *w = wp_st_writer_new();
    for (int i = 0; i < n; i++) {
        size_t cnt = ts[i].rows * ts[i].cols, shape[2] = {ts[i].rows, ts[i].cols};
        uint16_t *h = malloc(cnt * 2);
        /* bf16 of 1.5 is 0x3fc0, f16 of -2.0 is 0xc000 */
        for (size_t j = 0; j < cnt; j++) h[j] = i % 2 ? 0x3fc0 : 0xc000;
        wp_st_add(w, ts[i].name, i % 2 ? "BF16" : "F16", shape, ts[i].cols == 1 ? 1 : 2, h, cnt * 2);
        free(h);
    }
    char err[512] = "";
    CHECK(wp_st_commit(w, tmp_path("half.safetensors"), err, sizeof err) == 0, "%s", err);
    float *p = calloc(k.nparams, 4);
    CHECK(ckpt_load(tmp_path("half.safetensors"), &c, &k, 1, &p, NULL, NULL, NULL, err, sizeof err) == 0, "load half: %s", err);
    int ok = 1;
    for (int i = 0; i < n; i++) ok &= p[ts[i].offset] == (i % 2 ? 1.5f : -2.0f);
    CHECK(ok, "half conversions");
    free(p);
    free(ts);
}

/* The names in the scratch directory that contain part, in *n; the first one into first. */
static int find_file(const char *part, char *first, size_t len) {
    DIR *d = opendir(tmp_dir);
    int n = 0;
    struct dirent *e;
    while (d && (e = readdir(d)))
        if (strstr(e->d_name, part)) {
            if (n++ == 0 && first) snprintf(first, len, "%s/%s", tmp_dir, e->d_name);
        }
    if (d) closedir(d);
    return n;
}

static void spit(const char *path, const char *text) {
    FILE *f = fopen(path, "w");
    if (!f || fputs(text, f) < 0 || fclose(f) != 0) { perror(path); exit(1); }
}

static void test_atomic(void) {
    WpConfig c = tiny(8, 2, 0);
    WpChunk k = wp_chunk_make(&c, 0, 0, 2, 1, 1);
    float *p = filled(k.nparams, 0), *m = filled(k.nparams, 1), *v = filled(k.nparams, 2);
    WpTrainState st = {.step = 1, .seed = 7, .micro_batches = 1, .micro_batch_size = 1, .seq = 4};
    char err[512] = "", shard[600] = "";
    const char *path = tmp_path("a.json");
    CHECK(ckpt_save(path, &c, &k, 1, &p, &m, &v, &st, 1, err, sizeof err) == 0, "%s", err);
    CHECK(find_file("a.shard.1.0.", shard, sizeof shard) == 1, "one shard of step 1, a.shard.1.0.HASH.safetensors");
    size_t n0, n1, o0, o1;
    unsigned char *before = (unsigned char *)tmp_slurp(path, &n0), *obefore = (unsigned char *)tmp_slurp(shard, &o0);

    /* A full disk, simulated with a file-size limit: every write fails half-way. */
    struct rlimit old, lim;
    getrlimit(RLIMIT_FSIZE, &old);
    lim = old;
    lim.rlim_cur = 1000;
    signal(SIGXFSZ, SIG_IGN);
    setrlimit(RLIMIT_FSIZE, &lim);
    for (size_t i = 0; i < k.nparams; i++) p[i] += 1;
    st.step = 2;
    int rc = ckpt_save(path, &c, &k, 1, &p, &m, &v, &st, 1, err, sizeof err);
    setrlimit(RLIMIT_FSIZE, &old);
    CHECK(rc == -1, "save on a full disk succeeded");
    CHECK(strstr(err, "a.shard.2.0.") != NULL && strstr(err, "File too large") && !strchr(err, '\n'), "message: %s", err);
    CHECK(tmp_count(".tmp.") == 0, "temporary files left behind");
    CHECK(find_file("a.shard.", NULL, 0) == 1, "the failed save left a shard");
    unsigned char *after = (unsigned char *)tmp_slurp(path, &n1), *oafter = (unsigned char *)tmp_slurp(shard, &o1);
    CHECK(before && after && n0 == n1 && memcmp(before, after, n0) == 0, "manifest changed by a failed save");
    CHECK(obefore && oafter && o0 == o1 && memcmp(obefore, oafter, o0) == 0, "shard changed");
    float *q = calloc(k.nparams, 4), *qm = calloc(k.nparams, 4), *qv = calloc(k.nparams, 4);
    WpTrainState s2;
    CHECK(ckpt_load(path, &c, &k, 1, &q, &qm, &qv, &s2, err, sizeof err) == 0 && s2.step == 1, "old still loads: %s", err);

    /* A save that succeeds replaces the checkpoint and removes the shard of the old one. */
    CHECK(ckpt_save(path, &c, &k, 1, &p, &m, &v, &st, 1, err, sizeof err) == 0, "%s", err);
    CHECK(find_file("a.shard.", NULL, 0) == 1 && find_file("a.shard.2.0.", NULL, 0) == 1, "the old shard is left");
    CHECK(ckpt_load(path, &c, &k, 1, &q, &qm, &qv, &s2, err, sizeof err) == 0 && s2.step == 2, "step 2: %s", err);
    /* The same state saved again: the same bytes under the same names. */
    free(before);
    before = (unsigned char *)tmp_slurp(path, &n0);
    CHECK(ckpt_save(path, &c, &k, 1, &p, &m, &v, &st, 1, err, sizeof err) == 0, "%s", err);
    free(after);
    after = (unsigned char *)tmp_slurp(path, &n1);
    CHECK(before && after && n0 == n1 && memcmp(before, after, n0) == 0, "the same save wrote other bytes");
    CHECK(find_file("a.shard.", NULL, 0) == 1, "shards after saving twice");
    free(before); free(after); free(obefore); free(oafter);
    free(p); free(m); free(v); free(q); free(qm); free(qv);
}

/* What a crash leaves at each point of a save, and the next save's cleaning. */
static void test_crash_points(void) {
    WpConfig c = tiny(8, 1, 0);
    WpChunk k = wp_chunk_make(&c, 0, 0, 1, 1, 1);
    float *p = filled(k.nparams, 0), *m = filled(k.nparams, 1), *v = filled(k.nparams, 2);
    float *q = calloc(k.nparams, 4), *qm = calloc(k.nparams, 4), *qv = calloc(k.nparams, 4);
    WpTrainState st = {.step = 3, .seed = 9, .micro_batches = 1, .micro_batch_size = 1, .seq = 4}, s2;
    char err[512] = "", shard3[600], shard4[600], path[300];
    snprintf(path, sizeof path, "%s", tmp_path("c.json"));   /* tmp_path's buffers are reused */
    CHECK(ckpt_save(path, &c, &k, 1, &p, &m, &v, &st, 1, err, sizeof err) == 0, "%s", err);
    find_file("c.shard.3.", shard3, sizeof shard3);
    /* Killed after the shards of step 4 were written, before the manifest's rename: the new
     * shard is there, with the temporary of the manifest half written. */
    st.step = 4;
    m[0] += 1;
    WpCkptRange all = {0, 0, k.nparams};
    uint64_t h;
    int created;
    CHECK(ckpt_write_shard(path, &c, &k, &all, 1, &p, &m, &v, &st, 0, &h, &created, err, sizeof err) == 0 && created, "%s", err);
    ckpt_shard_path(path, 4, 0, h, shard4, sizeof shard4);
    spit(tmp_path("c.json.tmp.999999999"), "{\"half a manifest");   /* no such process */
    spit(tmp_path("config.json.tmp.999999998"), "{");
    char shard_tmp[800];
    snprintf(shard_tmp, sizeof shard_tmp, "%s.tmp.999999997", shard4);
    spit(shard_tmp, "half a shard");
    /* Not ours, or of a process still running: never touched. */
    char live[300], foreign[300], other[300];
    snprintf(live, sizeof live, "%s", tmp_path("c.json.tmp.1"));   /* pid 1 runs */
    snprintf(foreign, sizeof foreign, "%s", tmp_path("notes.txt.tmp.999999999"));
    snprintf(other, sizeof other, "%s", tmp_path("c.shard.7.0.notahash.safetensors"));
    spit(live, "x"); spit(foreign, "x"); spit(other, "x");
    /* The checkpoint is still step 3, whole. */
    CHECK(ckpt_load(path, &c, &k, 1, &q, &qm, &qv, &s2, err, sizeof err) == 0 && s2.step == 3 && qm[0] == 1.0f,
          "after a crash before the commit: %s", err);
    WpTrainState rs;
    CHECK(ckpt_read_state(path, &rs, err, sizeof err) == 0 && rs.step == 3 && rs.seed == 9, "read_state: %s", err);
    /* The next save, of step 5, commits and cleans: only our leftovers of dead processes. */
    st.step = 5;
    CHECK(ckpt_save(path, &c, &k, 1, &p, &m, &v, &st, 1, err, sizeof err) == 0, "%s", err);
    CHECK(access(tmp_path("c.json.tmp.999999999"), F_OK) != 0, "stale manifest temporary kept");
    CHECK(access(tmp_path("config.json.tmp.999999998"), F_OK) != 0, "stale config temporary kept");
    CHECK(access(shard_tmp, F_OK) != 0, "stale shard temporary kept");
    CHECK(access(shard4, F_OK) != 0 && access(shard3, F_OK) != 0, "shards nothing names kept");
    CHECK(access(live, F_OK) == 0 && access(foreign, F_OK) == 0 && access(other, F_OK) == 0,
          "removed a file that is not ours or of a live process");
    CHECK(find_file("c.shard.5.", NULL, 0) == 1, "the new shard");
    CHECK(ckpt_load(path, &c, &k, 1, &q, &qm, &qv, &s2, err, sizeof err) == 0 && s2.step == 5, "step 5: %s", err);

    /* A manifest that names a shard elsewhere (edited by hand) is refused. */
    json_t *man = json_load_file(path, 0, NULL);
    json_object_set_new(json_array_get(json_object_get(man, "shards"), 0), "file", json_string("../../etc/passwd"));
    CHECK(man && json_dump_file(man, tmp_path("evil.json"), 0) == 0, "evil.json");
    json_decref(man);
    CHECK(ckpt_load(tmp_path("evil.json"), &c, &k, 1, &q, NULL, NULL, NULL, err, sizeof err) == -1 &&
          strstr(err, "shards[0].file: expected a name evil.shard."), "a shard outside the directory: %s", err);
    /* A manifest of another format version is refused, naming the field. */
    spit(tmp_path("v2.json"), "{\"format\": \"wpgen-checkpoint\", \"version\": 2}");
    CHECK(ckpt_read_state(tmp_path("v2.json"), &rs, err, sizeof err) == -1 && strstr(err, "version: expected 1"), "v2: %s", err);
    unlink(live); unlink(foreign); unlink(other); unlink(tmp_path("evil.json")); unlink(tmp_path("v2.json"));
    free(p); free(m); free(v); free(q); free(qm); free(qv);
}

/* --keep N: the newest N checkpoints stay, each resumable as DIR/STEM.STEP.json; older ones go
 * with their shards; a file of that name that wpgen did not write is never removed. */
static void test_keep(void) {
    WpConfig c = tiny(8, 1, 0);
    WpChunk k = wp_chunk_make(&c, 0, 0, 1, 1, 1);
    float *p = filled(k.nparams, 0), *m = filled(k.nparams, 1), *v = filled(k.nparams, 2);
    float *q = calloc(k.nparams, 4), *qm = calloc(k.nparams, 4), *qv = calloc(k.nparams, 4);
    WpTrainState st = {.step = 1, .seed = 1, .micro_batches = 1, .micro_batch_size = 1, .seq = 4}, s2;
    char err[512] = "", path[300];
    snprintf(path, sizeof path, "%s", tmp_path("k.json"));
    spit(tmp_path("k.9.json"), "my notes, not a checkpoint");
    for (long s = 1; s <= 5; s++) {
        st.step = s;
        p[0] = (float)s;
        CHECK(ckpt_save(path, &c, &k, 1, &p, &m, &v, &st, 3, err, sizeof err) == 0, "step %ld: %s", s, err);
    }
    CHECK(access(tmp_path("k.1.json"), F_OK) != 0 && access(tmp_path("k.2.json"), F_OK) != 0, "older checkpoints kept");
    CHECK(find_file("k.shard.", NULL, 0) == 3, "shards: %d, want those of steps 3, 4, 5", find_file("k.shard.", NULL, 0));
    for (long s = 3; s <= 5; s++) {
        char name[32];
        snprintf(name, sizeof name, "k.%ld.json", s);
        CHECK(ckpt_load(tmp_path(name), &c, &k, 1, &q, &qm, &qv, &s2, err, sizeof err) == 0 && s2.step == s &&
              q[0] == (float)s, "%s: %s", name, err);
    }
    CHECK(ckpt_load(path, &c, &k, 1, &q, &qm, &qv, &s2, err, sizeof err) == 0 && s2.step == 5, "the latest: %s", err);
    char *kept = tmp_slurp(tmp_path("k.9.json"), NULL);
    CHECK(kept && strstr(kept, "my notes"), "a file of the user's named like a kept checkpoint was touched");
    free(kept);
    /* keep 1 (the default) writes no copy and leaves the kept ones, and their shards, alone */
    st.step = 6;
    CHECK(ckpt_save(path, &c, &k, 1, &p, &m, &v, &st, 1, err, sizeof err) == 0, "%s", err);
    CHECK(access(tmp_path("k.6.json"), F_OK) != 0 && access(tmp_path("k.3.json"), F_OK) == 0 &&
          find_file("k.shard.", NULL, 0) == 4, "keep 1 after keep 3: %d shards", find_file("k.shard.", NULL, 0));
    unlink(tmp_path("k.9.json"));
    free(p); free(m); free(v); free(q); free(qm); free(qv);
}

/* A save replaces only what wpgen wrote. */
static void test_refusals(void) {
    WpConfig c = tiny(8, 1, 0);
    WpChunk k = wp_chunk_make(&c, 0, 0, 1, 1, 1);
    float *p = filled(k.nparams, 0), *m = filled(k.nparams, 1), *v = filled(k.nparams, 2);
    WpTrainState st = {.step = 1, .seed = 1, .micro_batches = 1, .micro_batch_size = 1, .seq = 4};
    char err[1024] = "", path[400];
    snprintf(path, sizeof path, "%s/sub", tmp_dir);
    CHECK(mkdir(path, 0755) == 0, "mkdir");
    CHECK(ckpt_save(path, &c, &k, 1, &p, &m, &v, &st, 1, err, sizeof err) == -1 && strstr(err, "sub is a directory"),
          "a directory: %s", err);
    /* a named pipe stands for a device (a bug here must not replace a real /dev/null) */
    CHECK(mkfifo(tmp_path("pipe"), 0600) == 0, "mkfifo");
    CHECK(ckpt_save(tmp_path("pipe"), &c, &k, 1, &p, &m, &v, &st, 1, err, sizeof err) == -1 &&
          strstr(err, "pipe exists and is not a regular file"), "a device: %s", err);
    struct stat sb;
    CHECK(stat(tmp_path("pipe"), &sb) == 0 && S_ISFIFO(sb.st_mode), "the pipe was replaced");
    spit(tmp_path("notes.json"), "my notes");
    CHECK(ckpt_save(tmp_path("notes.json"), &c, &k, 1, &p, &m, &v, &st, 1, err, sizeof err) == -1 &&
          strstr(err, "notes.json exists and is not a checkpoint manifest written by wpgen"), "a foreign file: %s", err);
    char *kept = tmp_slurp(tmp_path("notes.json"), NULL);
    CHECK(kept && strcmp(kept, "my notes") == 0, "the foreign file changed");
    free(kept);
    spit(tmp_path("other.json"), "{\"format\": \"wpgen-checkpoint\", \"version\": 1}");   /* not marked as ours */
    CHECK(ckpt_check_save(tmp_path("other.json"), err, sizeof err) == -1 && strstr(err, "not a checkpoint manifest"),
          "an unmarked manifest: %s", err);
    CHECK(ckpt_check_save(tmp_path("nodir/m.json"), err, sizeof err) == -1 && strstr(err, "directory") &&
          strstr(err, "No such file"), "no directory: %s", err);
    /* A manifest is not a tensor file, nor the model's config.json. */
    CHECK(ckpt_check_save(tmp_path("m.safetensors"), err, sizeof err) == -1 && strstr(err, "not a safetensors file") &&
          strstr(err, "checkpoint.json"), "a .safetensors path: %s", err);
    CHECK(ckpt_check_save(tmp_path("config.json"), err, sizeof err) == -1 && strstr(err, "name the manifest otherwise"),
          "config.json: %s", err);

    /* The model's own config.json (as given to -m) is not overwritten. */
    snprintf(path, sizeof path, "%s/hf", tmp_dir);
    CHECK(mkdir(path, 0755) == 0, "mkdir");
    const char *user_cfg = "{\"hidden_size\": 8, \"num_hidden_layers\": 1, \"num_attention_heads\": 2, "
                           "\"intermediate_size\": 20, \"vocab_size\": 40, \"transformers_version\": \"4.40\"}\n";
    spit(tmp_path("hf/config.json"), user_cfg);
    CHECK(ckpt_save(tmp_path("hf/checkpoint.json"), &c, &k, 1, &p, &m, &v, &st, 1, err, sizeof err) == -1 &&
          strstr(err, "hf/config.json exists and was not written by wpgen"), "a foreign config.json: %s", err);
    kept = tmp_slurp(tmp_path("hf/config.json"), NULL);
    CHECK(kept && strcmp(kept, user_cfg) == 0, "the user's config.json changed");
    free(kept);
    CHECK(access(tmp_path("hf/checkpoint.json"), F_OK) != 0 && find_file("hf", NULL, 0) == 1, "files written");
    /* One written by an earlier version (its exact keys, no mark) is ours. */
    spit(tmp_path("hf/config.json"), "{\"architectures\": [\"LlamaForCausalLM\"], \"model_type\": \"llama\", \"hidden_size\": 8, "
         "\"intermediate_size\": 20, \"num_hidden_layers\": 1, \"num_attention_heads\": 2, \"num_key_value_heads\": 1, "
         "\"head_dim\": 4, \"hidden_act\": \"silu\", \"max_position_embeddings\": 16, \"rms_norm_eps\": 1e-05, "
         "\"rope_theta\": 10000.0, \"tie_word_embeddings\": false, \"vocab_size\": 40, \"attention_bias\": false, "
         "\"mlp_bias\": false, \"torch_dtype\": \"float32\"}\n");
    CHECK(ckpt_save(tmp_path("hf/checkpoint.json"), &c, &k, 1, &p, &m, &v, &st, 1, err, sizeof err) == 0, "%s", err);
    kept = tmp_slurp(tmp_path("hf/config.json"), NULL);
    CHECK(kept && strstr(kept, "\"written_by\": \"wpgen\""), "config.json not rewritten: %s", kept ? kept : "");
    free(kept);
    free(p); free(m); free(v);
}

/* Checkpoints of the earliest format: PATH and PATH's .opt.safetensors, committed one after the
 * other; they load when their steps agree, and are refused when a crash mixed two steps. A save
 * beside them leaves them alone. */
static void write_legacy(const char *path, const WpConfig *c, const WpChunk *k, const float *p, const float *m,
                         const float *v, const char *model_step, const char *opt_step) {
    int n = wp_chunk_tensors(c, k, NULL);
    WpTensor *ts = calloc((size_t)n, sizeof *ts);
    wp_chunk_tensors(c, k, ts);
    WpStWriter *wm = wp_st_writer_new(), *wo = wp_st_writer_new();
    for (int i = 0; i < n; i++) {
        size_t shape[2] = {ts[i].rows, ts[i].cols}, bytes = ts[i].rows * ts[i].cols * 4;
        int nd = ts[i].cols == 1 ? 1 : 2;
        char name[128];
        wp_st_add(wm, ts[i].name, "F32", shape, nd, p + ts[i].offset, bytes);
        snprintf(name, sizeof name, "%s.exp_avg", ts[i].name);
        wp_st_add(wo, name, "F32", shape, nd, m + ts[i].offset, bytes);
        snprintf(name, sizeof name, "%s.exp_avg_sq", ts[i].name);
        wp_st_add(wo, name, "F32", shape, nd, v + ts[i].offset, bytes);
    }
    wp_st_set_metadata(wm, "format", "pt");
    wp_st_set_metadata(wm, "step", model_step);
    const char *meta[][2] = {{"format", "wpgen-adamw"}, {"step", opt_step}, {"seed", "4"}, {"data_seq", "8"},
                             {"micro_batches", "2"}, {"micro_batch_size", "1"}, {"seq", "4"}};
    for (int i = 0; i < 7; i++) wp_st_set_metadata(wo, meta[i][0], meta[i][1]);
    char opt[400], err[512];
    ckpt_opt_path(path, opt, sizeof opt);
    CHECK(wp_st_commit(wo, opt, err, sizeof err) == 0 && wp_st_commit(wm, path, err, sizeof err) == 0, "%s", err);
    free(ts);
}

static void test_legacy(void) {
    WpConfig c = tiny(8, 1, 0);
    WpChunk k = wp_chunk_make(&c, 0, 0, 1, 1, 1);
    float *p = filled(k.nparams, 0), *m = filled(k.nparams, 1), *v = filled(k.nparams, 2);
    float *q = calloc(k.nparams, 4), *qm = calloc(k.nparams, 4), *qv = calloc(k.nparams, 4);
    char err[512] = "", opt[400];
    WpTrainState st;
    CHECK(strstr((ckpt_opt_path(tmp_path("l.safetensors"), opt, sizeof opt), opt), "/l.opt.safetensors"), "opt path %s", opt);
    write_legacy(tmp_path("l.safetensors"), &c, &k, p, m, v, "2", "2");
    CHECK(ckpt_load(tmp_path("l.safetensors"), &c, &k, 1, &q, &qm, &qv, &st, err, sizeof err) == 0 && st.step == 2 &&
          st.seed == 4 && memcmp(qv, v, k.nparams * 4) == 0, "legacy checkpoint: %s", err);
    write_legacy(tmp_path("x.safetensors"), &c, &k, p, m, v, "1", "2");
    CHECK(ckpt_load(tmp_path("x.safetensors"), &c, &k, 1, &q, &qm, &qv, &st, err, sizeof err) == -1 &&
          strstr(err, "step 2") && strstr(err, "step 1"), "mixed steps: %s", err);
    char **files = NULL;
    int nfiles = ckpt_input_files(tmp_path("l.safetensors"), &files);
    CHECK(nfiles == 1 && strcmp(files[0], opt) == 0, "its input files: %d", nfiles);
    ckpt_files_free(files, nfiles);
    /* A sharded save of the same stem beside it: the old files are not ours to remove. */
    WpTrainState s3 = {.step = 3, .seed = 4, .micro_batches = 2, .micro_batch_size = 1, .seq = 4};
    CHECK(ckpt_save(tmp_path("l.json"), &c, &k, 1, &p, &m, &v, &s3, 1, err, sizeof err) == 0, "%s", err);
    CHECK(access(opt, F_OK) == 0 && access(tmp_path("l.safetensors"), F_OK) == 0 && find_file("l.shard.3.", NULL, 0) == 1,
          "the earlier checkpoint beside a new one");
    CHECK(ckpt_load(tmp_path("l.safetensors"), &c, &k, 1, &q, &qm, &qv, &st, err, sizeof err) == 0 && st.step == 2,
          "the earlier checkpoint still loads: %s", err);
    free(p); free(m); free(v); free(q); free(qm); free(qv);
}

/* One folder, one model: a checkpoint of another model is refused where config.json describes
 * the first (ckpt_write_config, and ckpt_claim at a trainer's start); the same model saved again
 * (a resume, another step) is not. And one saving process per checkpoint (ckpt_claim's lock). */
static void test_one_model_per_folder(void) {
    WpConfig a = tiny(8, 3, 0), b = tiny(16, 3, 0);
    WpChunk ka = wp_chunk_make(&a, 0, 0, 3, 1, 1), kb = wp_chunk_make(&b, 0, 0, 3, 1, 1);
    float *pa = filled(ka.nparams, 0), *pb = filled(kb.nparams, 0);
    char err[512] = "";
    CHECK(ckpt_save(tmp_path("a.json"), &a, &ka, 1, &pa, NULL, NULL, NULL, 1, err, sizeof err) == 0, "save a: %s", err);
    CHECK(ckpt_save(tmp_path("a2.json"), &a, &ka, 1, &pa, NULL, NULL, NULL, 1, err, sizeof err) == 0, "the same model again: %s", err);
    CHECK(ckpt_claim(tmp_path("b.json"), &b, err, sizeof err) == -1 && strstr(err, "describes another model (hidden_size 8"),
          "claim: %s", err);
    CHECK(ckpt_save(tmp_path("b.json"), &b, &kb, 1, &pb, NULL, NULL, NULL, 1, err, sizeof err) == -1 &&
          strstr(err, "describes another model"), "save b beside a: %s", err);
    CHECK(access(tmp_path("b.json"), F_OK) != 0 && find_file("b.shard.", NULL, 0) == 0, "b was written beside a");
    CHECK(ckpt_claim(tmp_path("a.json"), &a, err, sizeof err) == 0, "claim a: %s", err);
    /* the lock is per process (a record lock): a child cannot take it, and is told the holder */
    pid_t pid = fork();
    if (pid == 0) {
        char want[64];
        snprintf(want, sizeof want, "another run (pid %ld)", (long)getppid());
        _exit(ckpt_lock(tmp_path("a.json"), err, sizeof err) == -1 && strstr(err, want) ? 0 : 1);
    }
    int st = 0;
    CHECK(pid > 0 && waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0, "a second process took the lock");
    free(pa); free(pb);
    unlink(tmp_path("config.json"));
}

/* Two runs (run ids 0xa and 0xb) saving one name in one folder: the second neither replaces nor
 * prunes the first's kept steps (nor their shards), even where the check at its start was not made
 * (a run started before the other saved); it prunes its own; ckpt_check_owner refuses at start
 * what its saves would take, and a resume (the same id) is let through. */
static void test_runs(void) {
    WpConfig c = tiny(8, 1, 0);
    WpChunk k = wp_chunk_make(&c, 0, 0, 1, 1, 1);
    float *p = filled(k.nparams, 0), *m = filled(k.nparams, 1), *v = filled(k.nparams, 2);
    float *q = calloc(k.nparams, 4), *qm = calloc(k.nparams, 4), *qv = calloc(k.nparams, 4);
    WpTrainState st = {.step = 1, .seed = 1, .micro_batches = 1, .micro_batch_size = 1, .seq = 4, .run = 0xa}, s2;
    char err[512] = "", path[300];
    snprintf(path, sizeof path, "%s", tmp_path("r.json"));
    for (long s = 1; s <= 2; s++) {
        st.step = s;
        CHECK(ckpt_save(path, &c, &k, 1, &p, &m, &v, &st, 0, err, sizeof err) == 0, "run a, step %ld: %s", s, err);
    }
    CHECK(ckpt_read_state(path, &s2, err, sizeof err) == 0 && s2.run == 0xa, "the run id read back: %llx",
          (unsigned long long)s2.run);
    /* at start: run b over run a's checkpoint, or whose saves would take a kept step of a's */
    CHECK(ckpt_check_owner(path, 0xb, 0, NULL, err, sizeof err) == -1 && strstr(err, "holds the checkpoint of another run"),
          "run b over a's checkpoint: %s", err);
    CHECK(ckpt_check_owner(path, 0xa, 2, path, err, sizeof err) == 0, "run a resumed: %s", err);
    unlink(path);
    CHECK(ckpt_check_owner(path, 0xb, 1, NULL, err, sizeof err) == -1 && strstr(err, "r.2.json is the checkpoint of step 2"),
          "run b from step 1: %s", err);
    CHECK(ckpt_check_owner(path, 0xb, 2, NULL, err, sizeof err) == 0, "run b from step 2 takes no kept step of a's: %s", err);
    /* at the commit: b's step 2 is refused, nothing of a's replaced; b's steps 3-5 with keep 2 prune b's alone */
    char *before = tmp_slurp(tmp_path("r.2.json"), NULL), *after;
    st.run = 0xb;
    p[0] = 42;
    CHECK(ckpt_save(path, &c, &k, 1, &p, &m, &v, &st, 2, err, sizeof err) == -1 && strstr(err, "the checkpoint of another run"),
          "run b over a's step 2: %s", err);
    after = tmp_slurp(tmp_path("r.2.json"), NULL);
    CHECK(before && after && !strcmp(before, after), "run a's step 2 replaced");
    free(after);
    for (long s = 3; s <= 5; s++) {
        st.step = s;
        CHECK(ckpt_save(path, &c, &k, 1, &p, &m, &v, &st, 2, err, sizeof err) == 0, "run b, step %ld: %s", s, err);
    }
    CHECK(access(tmp_path("r.1.json"), F_OK) == 0 && access(tmp_path("r.2.json"), F_OK) == 0 &&
          access(tmp_path("r.3.json"), F_OK) != 0 && access(tmp_path("r.4.json"), F_OK) == 0, "kept: a's 1, 2 and b's 4, 5");
    for (long s = 1; s <= 2; s++) {
        char name[32];
        snprintf(name, sizeof name, "r.%ld.json", s);
        CHECK(ckpt_load(tmp_path(name), &c, &k, 1, &q, &qm, &qv, &s2, err, sizeof err) == 0 && s2.step == s && s2.run == 0xa,
              "run a's %s after run b: %s", name, err);
    }
    free(before);
    free(p); free(m); free(v); free(q); free(qm); free(qv);
}

int main(void) {
    tmp_dir_make("checkpoint");
    /* the tests below save models of several shapes into one folder: each starts without the
     * config.json of the one before */
    test_round_trip(0);
    unlink(tmp_path("config.json"));
    test_round_trip(1);
    unlink(tmp_path("config.json"));
    test_sharded();
    unlink(tmp_path("config.json"));
    test_shape_errors();
    unlink(tmp_path("config.json"));
    test_bf16();
    unlink(tmp_path("config.json"));
    test_atomic();
    unlink(tmp_path("config.json"));
    test_crash_points();
    unlink(tmp_path("config.json"));
    test_keep();
    unlink(tmp_path("config.json"));
    test_refusals();
    unlink(tmp_path("config.json"));
    test_legacy();
    unlink(tmp_path("config.json"));
    test_one_model_per_folder();
    unlink(tmp_path("config.json"));
    test_runs();
    tmp_dir_remove();
    return check_summary("test_checkpoint");
}
