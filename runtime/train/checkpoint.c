/* Checkpoints in Hugging Face's format plus the optimizer state; see checkpoint.h. */
#include "train/checkpoint.h"
#include "common/errmsg.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>

#include "train/safetensors.h"

void ckpt_opt_path(const char *path, char *out, size_t outlen) {
    const char *ext = ".safetensors";
    size_t n = strlen(path), k = strlen(ext);
    if (n >= k && strcmp(path + n - k, ext) == 0)
        snprintf(out, outlen, "%.*s.opt.safetensors", (int)(n - k), path);
    else
        snprintf(out, outlen, "%s.opt.safetensors", path);
}

/* The directory part of path ("." if none). */
static void dir_of(const char *path, char *out, size_t outlen) {
    const char *slash = strrchr(path, '/');
    if (!slash) snprintf(out, outlen, ".");
    else if (slash == path) snprintf(out, outlen, "/");
    else snprintf(out, outlen, "%.*s", (int)(slash - path), path);
}

/* Writes text to path atomically: PATH.tmp.PID, fsync, rename, fsync of the directory. */
static int write_text_atomic(const char *path, const char *text, char *err, size_t errlen) {
    char tmp[4200], dir[4096];
    if ((size_t)snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid()) >= sizeof tmp) {
        errmsg(err, errlen, "%s: path too long", path);
        return -1;
    }
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) { errmsg(err, errlen, "%s: cannot create %s: %s", path, tmp, strerror(errno)); return -1; }
    size_t n = strlen(text), done = 0;
    int rc = 0;
    while (done < n && rc == 0) {
        ssize_t k = write(fd, text + done, n - done);
        if (k < 0 && errno != EINTR) rc = -1;
        else if (k > 0) done += (size_t)k;
    }
    if (rc == 0) rc = fsync(fd);
    int saved = errno;
    if (close(fd) != 0 && rc == 0) { rc = -1; saved = errno; }
    if (rc == 0 && rename(tmp, path) != 0) { rc = -1; saved = errno; }
    if (rc != 0) {
        unlink(tmp);
        errmsg(err, errlen, "%s: cannot write: %s", path, strerror(saved));
        return -1;
    }
    dir_of(path, dir, sizeof dir);
    int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd >= 0) {
        if (fsync(dfd) != 0 && errno != EINVAL) rc = -1;
        close(dfd);
    }
    if (rc != 0) errmsg(err, errlen, "%s: fsync of the directory failed", path);
    return rc;
}

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

int ckpt_write_config(const char *path, const WpConfig *c, char *err, size_t errlen) {
    char dir[4096], cfgpath[4200];
    dir_of(path, dir, sizeof dir);
    snprintf(cfgpath, sizeof cfgpath, "%s/config.json", dir);
    json_t *o = json_object();
    int bad = !o;
    if (!bad) {
        json_t *arch = json_array();
        bad |= json_array_append_new(arch, json_string("LlamaForCausalLM"));
        bad |= json_object_set_new(o, "architectures", arch);
        bad |= json_object_set_new(o, "model_type", json_string("llama"));
        bad |= json_object_set_new(o, "hidden_size", json_integer(c->hidden));
        bad |= json_object_set_new(o, "intermediate_size", json_integer(c->ffn));
        bad |= json_object_set_new(o, "num_hidden_layers", json_integer(c->layers));
        bad |= json_object_set_new(o, "num_attention_heads", json_integer(c->heads));
        bad |= json_object_set_new(o, "num_key_value_heads", json_integer(c->kv_heads));
        bad |= json_object_set_new(o, "head_dim", json_integer(c->head_dim));
        bad |= json_object_set_new(o, "hidden_act", json_string("silu"));
        bad |= json_object_set_new(o, "max_position_embeddings", json_integer(c->seq));
        bad |= json_object_set_new(o, "rms_norm_eps", json_real(float_decimal(c->eps)));
        bad |= json_object_set_new(o, "rope_theta", json_real(float_decimal(c->rope_theta)));
        bad |= json_object_set_new(o, "tie_word_embeddings", json_boolean(c->tied));
        bad |= json_object_set_new(o, "vocab_size", json_integer(c->vocab));
        bad |= json_object_set_new(o, "attention_bias", json_false());
        bad |= json_object_set_new(o, "mlp_bias", json_false());
        bad |= json_object_set_new(o, "torch_dtype", json_string("float32"));
    }
    char *text = bad ? NULL : json_dumps(o, JSON_INDENT(2) | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(9));
    json_decref(o);
    if (!text) { errmsg(err, errlen, "%s: out of memory", cfgpath); return -1; }
    size_t n = strlen(text);
    char *withnl = realloc(text, n + 2);
    if (!withnl) { free(text); errmsg(err, errlen, "%s: out of memory", cfgpath); return -1; }
    withnl[n] = '\n';
    withnl[n + 1] = 0;
    int rc = write_text_atomic(cfgpath, withnl, err, errlen);
    free(withnl);
    return rc;
}

/* The chunk's tensors, malloc'd; NULL on failure. */
static WpTensor *chunk_tensors(const WpConfig *c, const WpChunk *k, int *n) {
    *n = wp_chunk_tensors(c, k, NULL);
    WpTensor *t = calloc((size_t)(*n > 0 ? *n : 1), sizeof *t);
    if (t) wp_chunk_tensors(c, k, t);
    return t;
}

static int tensor_shape(const WpTensor *t, size_t *shape) {
    shape[0] = t->rows;
    shape[1] = t->cols;
    return t->cols == 1 ? 1 : 2;
}

/* Adds every tensor of every chunk, from arrays[k], named NAME+suffix. */
static int add_chunks(WpStWriter *w, const WpConfig *c, const WpChunk *chunks, int nchunks,
                      float *const *arrays, const char *suffix, char *err, size_t errlen) {
    for (int k = 0; k < nchunks; k++) {
        int n;
        WpTensor *ts = chunk_tensors(c, &chunks[k], &n);
        if (!ts) { errmsg(err, errlen, "out of memory"); return -1; }
        for (int i = 0; i < n; i++) {
            char name[128];
            size_t shape[2];
            int nd = tensor_shape(&ts[i], shape);
            snprintf(name, sizeof name, "%s%s", ts[i].name, suffix);
            if (wp_st_add(w, name, "F32", shape, nd, arrays[k] + ts[i].offset,
                          ts[i].rows * ts[i].cols * sizeof(float)) != 0) {
                errmsg(err, errlen, "%s: cannot add the tensor (out of memory?)", name);
                free(ts);
                return -1;
            }
        }
        free(ts);
    }
    return 0;
}

int ckpt_save(const char *path, const WpConfig *c, const WpChunk *chunks, int nchunks,
              float *const *params, float *const *m, float *const *v, const WpTrainState *st,
              char *err, size_t errlen) {
    char num[32], e2[512];
    if (m && v) {
        if (!st) { errmsg(err, errlen, "%s: saving the optimizer needs the training state", path); return -1; }
        char opt[4200];
        ckpt_opt_path(path, opt, sizeof opt);
        WpStWriter *w = wp_st_writer_new();
        if (!w) { errmsg(err, errlen, "%s: out of memory", opt); return -1; }
        if (add_chunks(w, c, chunks, nchunks, m, ".exp_avg", e2, sizeof e2) != 0 ||
            add_chunks(w, c, chunks, nchunks, v, ".exp_avg_sq", e2, sizeof e2) != 0) {
            errmsg(err, errlen, "%s: %s", opt, e2);
            wp_st_writer_free(w);
            return -1;
        }
        wp_st_set_metadata(w, "format", "wpgen-adamw");
        snprintf(num, sizeof num, "%ld", st->step);             wp_st_set_metadata(w, "step", num);
        snprintf(num, sizeof num, "%" PRIu64, st->seed);        wp_st_set_metadata(w, "seed", num);
        snprintf(num, sizeof num, "%" PRIu64, st->data_seq);    wp_st_set_metadata(w, "data_seq", num);
        snprintf(num, sizeof num, "%d", st->micro_batches);     wp_st_set_metadata(w, "micro_batches", num);
        snprintf(num, sizeof num, "%d", st->micro_batch_size);  wp_st_set_metadata(w, "micro_batch_size", num);
        snprintf(num, sizeof num, "%d", st->seq);               wp_st_set_metadata(w, "seq", num);
        if (wp_st_commit(w, opt, err, errlen) != 0) return -1;
    }
    if (ckpt_write_config(path, c, err, errlen) != 0) return -1;
    WpStWriter *w = wp_st_writer_new();
    if (!w) { errmsg(err, errlen, "%s: out of memory", path); return -1; }
    if (add_chunks(w, c, chunks, nchunks, params, "", e2, sizeof e2) != 0) {
        errmsg(err, errlen, "%s: %s", path, e2);
        wp_st_writer_free(w);
        return -1;
    }
    /* transformers refuses safetensors files whose format is not one it knows. */
    wp_st_set_metadata(w, "format", "pt");
    if (st) {
        snprintf(num, sizeof num, "%ld", st->step);
        wp_st_set_metadata(w, "step", num);
    }
    return wp_st_commit(w, path, err, errlen);
}

static void shape_str(const size_t *shape, int nd, char *out, size_t outlen) {
    size_t pos = (size_t)snprintf(out, outlen, "[");
    for (int d = 0; d < nd && pos < outlen; d++)
        pos += (size_t)snprintf(out + pos, outlen - pos, "%s%zu", d ? ", " : "", shape[d]);
    if (pos < outlen) snprintf(out + pos, outlen - pos, "]");
}

static float bf16_to_f32(uint16_t h) {
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

static float f16_to_f32(uint16_t h) {
    uint32_t sign = (uint32_t)(h >> 15) << 31, exp = (h >> 10) & 0x1f, man = h & 0x3ff, u;
    if (exp == 0x1f) u = sign | 0x7f800000u | (man << 13);            /* inf, nan */
    else if (exp != 0) u = sign | ((exp + 112) << 23) | (man << 13);   /* normal */
    else if (man == 0) u = sign;                                       /* zero */
    else {                                                             /* subnormal */
        int e = -1;
        do { man <<= 1; e++; } while (!(man & 0x400));
        u = sign | ((uint32_t)(112 - e) << 23) | ((man & 0x3ff) << 13);
    }
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* Copies tensor NAME+suffix of file f into dst, checking its shape; converts BF16/F16 if allowed. */
static int load_tensor(const WpStFile *f, const char *path, const WpTensor *t, const char *suffix,
                       int convert, float *dst, char *err, size_t errlen) {
    char name[128];
    snprintf(name, sizeof name, "%s%s", t->name, suffix);
    const char *dtype;
    size_t shape[8], want[2], bytes;
    int nd;
    const unsigned char *p = wp_st_get(f, name, &dtype, shape, &nd, &bytes);
    int wnd = tensor_shape(t, want);
    if (!p) { errmsg(err, errlen, "%s: tensor %s is missing", path, name); return -1; }
    if (nd != wnd || shape[0] != want[0] || (nd == 2 && shape[1] != want[1])) {
        char a[96], b[96];
        shape_str(shape, nd, a, sizeof a);
        shape_str(want, wnd, b, sizeof b);
        errmsg(err, errlen, "%s: %s: shape %s in the file, %s in the model (a checkpoint of another model shape?)",
               path, name, a, b);
        return -1;
    }
    size_t n = t->rows * t->cols;
    if (strcmp(dtype, "F32") == 0) {
        memcpy(dst, p, n * sizeof(float));   /* memcpy: the data may be unaligned */
    } else if (convert && (strcmp(dtype, "BF16") == 0 || strcmp(dtype, "F16") == 0)) {
        int bf = dtype[0] == 'B';
        for (size_t i = 0; i < n; i++) {
            uint16_t h;
            memcpy(&h, p + 2 * i, 2);
            dst[i] = bf ? bf16_to_f32(h) : f16_to_f32(h);
        }
    } else {
        errmsg(err, errlen, "%s: %s: dtype %s is not supported (expected F32%s)", path, name, dtype,
               convert ? ", BF16 or F16" : "");
        return -1;
    }
    return 0;
}

/* Every tensor of the file must belong to the whole model (whichever chunks are loaded now). */
static int check_no_extra(const WpStFile *f, const char *path, const WpConfig *c,
                          const char *const *suffixes, int nsuffixes, char *err, size_t errlen) {
    WpChunk whole = wp_chunk_make(c, 0, 0, c->layers, 1, 1);
    int n;
    WpTensor *ts = chunk_tensors(c, &whole, &n);
    if (!ts) { errmsg(err, errlen, "%s: out of memory", path); return -1; }
    int rc = 0;
    for (int i = 0; i < wp_st_count(f) && rc == 0; i++) {
        const char *name = wp_st_name(f, i);
        size_t len = strlen(name);
        /* Buffers that older transformers versions saved, and a tied model's copy of the head. */
        if (len > 20 && strcmp(name + len - 20, ".rotary_emb.inv_freq") == 0) continue;
        if (c->tied && strcmp(name, "lm_head.weight") == 0) continue;
        int found = 0;
        for (int j = 0; j < n && !found; j++) {
            size_t k = strlen(ts[j].name);
            if (strncmp(name, ts[j].name, k) != 0) continue;
            for (int x = 0; x < nsuffixes && !found; x++) found = strcmp(name + k, suffixes[x]) == 0;
        }
        if (!found) {
            errmsg(err, errlen, "%s: tensor %s is not part of this model (%d layers%s): a checkpoint of another model shape?",
                   path, name, c->layers, c->tied ? ", tied embeddings" : "");
            rc = -1;
        }
    }
    free(ts);
    return rc;
}

static int load_chunks(const WpStFile *f, const char *path, const WpConfig *c, const WpChunk *chunks,
                       int nchunks, float *const *arrays, const char *suffix, int convert, char *err,
                       size_t errlen) {
    for (int k = 0; k < nchunks; k++) {
        int n;
        WpTensor *ts = chunk_tensors(c, &chunks[k], &n);
        if (!ts) { errmsg(err, errlen, "%s: out of memory", path); return -1; }
        for (int i = 0; i < n; i++)
            if (load_tensor(f, path, &ts[i], suffix, convert, arrays[k] + ts[i].offset, err, errlen) != 0) {
                free(ts);
                return -1;
            }
        free(ts);
    }
    return 0;
}

/* An unsigned integer from the metadata; -1 if absent or malformed. */
static int meta_u64(const WpStFile *f, const char *key, uint64_t *out) {
    const char *s = wp_st_metadata(f, key);
    if (!s || !*s || *s == '-') return -1;
    char *end;
    errno = 0;
    unsigned long long x = strtoull(s, &end, 10);
    if (errno || *end) return -1;
    *out = x;
    return 0;
}

int ckpt_load(const char *path, const WpConfig *c, const WpChunk *chunks, int nchunks,
              float *const *params, float *const *m, float *const *v, WpTrainState *st,
              char *err, size_t errlen) {
    WpStFile *f = wp_st_open(path, err, errlen);
    if (!f) return -1;
    static const char *const plain[] = {""}, *const moments[] = {".exp_avg", ".exp_avg_sq"};
    int rc = check_no_extra(f, path, c, plain, 1, err, errlen);
    if (rc == 0) rc = load_chunks(f, path, c, chunks, nchunks, params, "", 1, err, errlen);
    uint64_t model_step = 0;
    int has_step = meta_u64(f, "step", &model_step) == 0;
    wp_st_close(f);
    if (rc != 0 || !(m && v)) return rc;

    char opt[4200];
    ckpt_opt_path(path, opt, sizeof opt);
    f = wp_st_open(opt, err, errlen);
    if (!f) return -1;
    uint64_t step, seed, seq, mb, mbs, s;
    const char *fmt = wp_st_metadata(f, "format");
    if (!fmt || strcmp(fmt, "wpgen-adamw") != 0 || meta_u64(f, "step", &step) || meta_u64(f, "seed", &seed) ||
        meta_u64(f, "data_seq", &seq) || meta_u64(f, "micro_batches", &mb) ||
        meta_u64(f, "micro_batch_size", &mbs) || meta_u64(f, "seq", &s)) {
        errmsg(err, errlen, "%s: not an optimizer state written by wpgen (its __metadata__ lacks format, step, seed, data_seq, ...)", opt);
        rc = -1;
    } else if (!has_step || model_step != step) {
        /* The two files are committed one after the other: a crash in between mixes steps. */
        char ms[32] = "unknown";
        if (has_step) snprintf(ms, sizeof ms, "%" PRIu64, model_step);
        errmsg(err, errlen, "%s: optimizer state of step %" PRIu64 " but %s is of step %s (an interrupted save?)",
               opt, step, path, ms);
        rc = -1;
    }
    if (rc == 0) rc = check_no_extra(f, opt, c, moments, 2, err, errlen);
    if (rc == 0) rc = load_chunks(f, opt, c, chunks, nchunks, m, ".exp_avg", 0, err, errlen);
    if (rc == 0) rc = load_chunks(f, opt, c, chunks, nchunks, v, ".exp_avg_sq", 0, err, errlen);
    if (rc == 0 && st) {
        st->step = (long)step;
        st->seed = seed;
        st->data_seq = seq;
        st->micro_batches = (int)mb;
        st->micro_batch_size = (int)mbs;
        st->seq = (int)s;
    }
    wp_st_close(f);
    return rc;
}
