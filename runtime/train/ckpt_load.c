/* ckpt_load and the files it reads, in three formats: a manifest with its shards (any number, read
 * where they overlap the chunks asked for), an earlier version's single model file with its
 * optimizer file, and a plain Hugging Face safetensors file (weights only, F32, BF16 or F16, its
 * halves widened by common/precision.h); and what is checked of what was read (finite weights,
 * AdamW's moments as AdamW leaves them). */
#include "train/ckpt_internal.h"
#include "common/errmsg.h"
#include "common/jsonfile.h"
#include "common/precision.h"

#include <limits.h>
#include <math.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A shape as "[R, C]", for messages. */
void ck_shape_str(const size_t *shape, int nd, char *out, size_t outlen) {
    size_t pos = (size_t)snprintf(out, outlen, "[");
    for (int d = 0; d < nd && pos < outlen; d++)
        pos += (size_t)snprintf(out + pos, outlen - pos, "%s%zu", d ? ", " : "", shape[d]);
    if (pos < outlen) snprintf(out + pos, outlen - pos, "]");
}

static int check_moments(const char *opt, const WpChunk *chunks, int nchunks, float *const *m, float *const *v,
                         char *err, size_t errlen);

/* ---- a manifest and its shards ---------------------------------------------------------------- */

/* ckpt_load of a manifest: each tensor of each chunk asked for from the slices that hold it,
 * opening each shard once, and only those that hold some. */
static int load_manifest(const char *path, const WpConfig *c, const WpChunk *chunks, int nchunks,
                         float *const *params, float *const *m, float *const *v, WpTrainState *st, char *err,
                         size_t errlen) {
    json_t *root = ck_manifest_open(path, err, errlen);
    if (!root) return -1;
    WpTrainState state;
    const json_t *shards = json_object_get(root, "shards");
    size_t nsh = json_array_size(shards);
    int rc = ck_state_from_json(json_object_get(root, "state"), path, &state, err, errlen);
    if (rc == 0) rc = ck_manifest_run(root, path, &state.run, err, errlen);
    if (rc == 0) rc = ck_manifest_check_tensors(root, path, c, err, errlen);
    if (rc == 0 && (!json_is_array(shards) || nsh == 0))
        rc = wp_json_expected(err, errlen, path, "shards", "a list of files", shards);
    const char *opt = json_string_value(json_object_get(root, "optimizer"));
    int moments = m && v;
    if (rc == 0 && moments && !(opt && strcmp(opt, "adamw") == 0))
        rc = errmsg(err, errlen, "%s holds only the weights (saved without the optimizer state): --init %s starts from "
                    "them, --resume needs a checkpoint written by training", path, path);
    WpStFile **open = calloc(nsh ? nsh : 1, sizeof *open);
    Piece *pieces = malloc((nsh ? nsh : 1) * sizeof *pieces);
    size_t *nread = calloc(nsh ? nsh : 1, sizeof *nread);   /* slices read of each shard */
    if (rc == 0 && (!open || !pieces || !nread)) rc = errmsg(err, errlen, "%s: out of memory", path);
    float *const *dst[3] = { params, m, v };
    for (int k = 0; k < nchunks && rc == 0; k++) {
        int nt;
        WpTensor *ts = ck_chunk_tensors(c, &chunks[k], &nt);
        if (!ts) { rc = errmsg(err, errlen, "%s: out of memory", path); break; }
        for (int i = 0; i < nt && rc == 0; i++) {
            int np = ck_tensor_pieces(shards, ts[i].name, ts[i].rows * ts[i].cols, pieces, path, err, errlen);
            if (np < 0) { rc = -1; break; }
            for (int p = 0; p < np && rc == 0; p++) {
                char file[5400];
                size_t s = (size_t)pieces[p].shard;
                if (ck_manifest_shard_path(root, s, path, file, sizeof file, err, errlen)) { rc = -1; break; }
                if (!open[s] && (!(open[s] = wp_st_open(file, err, errlen)) ||
                                 ck_shard_check_header(open[s], file, root, s, path, err, errlen))) { rc = -1; break; }
                nread[s]++;
                for (int q = 0; q < (moments ? 3 : 1) && rc == 0; q++) {
                    char name[160];
                    const char *dtype;
                    size_t shape[8], bytes;
                    int nd;
                    snprintf(name, sizeof name, "%s%s", ts[i].name, ck_shard_suffix[q]);
                    const void *data = wp_st_get(open[s], name, &dtype, shape, &nd, &bytes);
                    if (!data || strcmp(dtype, "F32") || nd != 1 || shape[0] != pieces[p].count)
                        rc = errmsg(err, errlen, "%s: tensor %s: expected %zu F32 values (the slice the manifest %s names "
                                    "there)%s", file, name, pieces[p].count, path, data ? "" : ", found none");
                    else   /* memcpy: the data may be unaligned */
                        memcpy(dst[q][k] + ts[i].offset + pieces[p].offset, data, bytes);
                }
            }
        }
        free(ts);
    }
    /* the shards read whole: their content against the hash their names hold */
    for (size_t s = 0; s < nsh && rc == 0; s++) {
        char file[5400];
        if (open[s] && nread[s] == json_object_size(json_object_get(json_array_get(shards, s), "slices")) &&
            (ck_manifest_shard_path(root, s, path, file, sizeof file, err, errlen) ||
             ck_shard_check_hash(open[s], file, err, errlen)))
            rc = -1;
    }
    for (int q = 0; q < (moments ? 3 : 1) && rc == 0; q++) ck_fill_mirror(c, chunks, nchunks, dst[q]);
    if (rc == 0 && moments) rc = check_moments(path, chunks, nchunks, m, v, err, errlen);
    if (rc == 0 && st) *st = state;
    for (size_t s = 0; open && s < nsh; s++) wp_st_close(open[s]);
    free(open);
    free(pieces);
    free(nread);
    json_decref(root);
    return rc ? errmsg_one_line(err) : 0;
}

/* ---- one file: an earlier version's (with its optimizer file), or Hugging Face's -------------- */

/* Copies tensor NAME+suffix of file f into dst, checking its shape; converts BF16/F16 if allowed. */
static int load_tensor(const WpStFile *f, const char *path, const WpTensor *t, const char *suffix,
                       int convert, float *dst, char *err, size_t errlen) {
    char name[128];
    snprintf(name, sizeof name, "%s%s", t->name, suffix);
    const char *dtype;
    size_t shape[8], want[2], bytes;
    int nd;
    const unsigned char *p = wp_st_get(f, name, &dtype, shape, &nd, &bytes);
    int wnd = ck_tensor_shape(t, want);
    if (!p) { errmsg(err, errlen, "%s: tensor %s is missing", path, name); return -1; }
    if (nd != wnd || shape[0] != want[0] || (nd == 2 && shape[1] != want[1])) {
        char a[96], b[96];
        ck_shape_str(shape, nd, a, sizeof a);
        ck_shape_str(want, wnd, b, sizeof b);
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
            dst[i] = bf ? wp_bf16_to_f32(h) : wp_f16_to_f32(h);
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
    WpTensor *ts = ck_chunk_tensors(c, &whole, &n);
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
        WpTensor *ts = ck_chunk_tensors(c, &chunks[k], &n);
        if (!ts) { errmsg(err, errlen, "%s: out of memory", path); return -1; }
        for (int i = 0; i < n; i++)
            if (load_tensor(f, path, &ts[i], suffix, convert, arrays[k] + ts[i].offset, err, errlen) != 0) {
                free(ts);
                return -1;
            }
        free(ts);
    }
    ck_fill_mirror(c, chunks, nchunks, arrays);
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

/* The optimizer file of the model file f at path (metadata "optimizer", in path's directory; an
 * earlier version's PATH.opt.safetensors when absent) into out. -1 with err set when the model
 * file holds only weights or names something that is not an optimizer file of ours. */
static int opt_path_of(const WpStFile *f, const char *path, char *out, size_t outlen, char *err, size_t errlen) {
    const char *name = wp_st_metadata(f, "optimizer");
    CkptNames n;
    if (ck_names_of(path, &n, err, errlen)) return -1;
    if (name) {
        /* a plain name in the same directory, never a path: the file is not trusted further */
        if (!ck_is_opt_name(name, n.stem))
            return errmsg(err, errlen, "%s: its metadata names the optimizer state \"%s\", not a file name wpgen "
                          "writes for this checkpoint (renamed? its optimizer files are %s.opt.STEP.HASH.safetensors)",
                          path, name, n.stem);
        ck_join(out, outlen, n.dir, name);
        return 0;
    }
    const char *w = wp_st_metadata(f, "written_by");
    if (w && strcmp(w, WRITTEN_BY) == 0)
        return errmsg(err, errlen, "%s holds only the weights (saved without the optimizer state): --init %s starts "
                      "from them, --resume needs a checkpoint written by training", path, path);
    ckpt_opt_path(path, out, outlen);
    return 0;
}

/* Reads the optimizer file's metadata into st; checks its format and that its step is the
 * model file's. */
static int read_opt_meta(const WpStFile *f, const char *opt, const char *path, int has_step, uint64_t model_step,
                         WpTrainState *st, char *err, size_t errlen) {
    uint64_t step, seed, seq, mb, mbs, s;
    const char *fmt = wp_st_metadata(f, "format");
    if (!fmt || strcmp(fmt, "wpgen-adamw") != 0 || meta_u64(f, "step", &step) || meta_u64(f, "seed", &seed) ||
        meta_u64(f, "data_seq", &seq) || meta_u64(f, "micro_batches", &mb) ||
        meta_u64(f, "micro_batch_size", &mbs) || meta_u64(f, "seq", &s) || step > (uint64_t)INT64_MAX ||
        mb > INT32_MAX || mbs > INT32_MAX || s > INT32_MAX)
        return errmsg(err, errlen, "%s: not an optimizer state written by wpgen (its __metadata__ lacks format, step, seed, data_seq, ...)", opt);
    if (!has_step || model_step != step) {
        /* Earlier versions committed the two files one after the other: a crash in between mixed steps. */
        char ms[32] = "unknown";
        if (has_step) snprintf(ms, sizeof ms, "%" PRIu64, model_step);
        return errmsg(err, errlen, "%s: optimizer state of step %" PRIu64 " but %s is of step %s (an interrupted save?)",
                      opt, step, path, ms);
    }
    /* The optimizer's settings; a checkpoint of an earlier version records none of them. */
    WpAdamW adamw;
    adamw_init(&adamw, 0, 0, 0);
    unsigned known = 0;
    for (int i = 0; i < wp_adamw_nsettings; i++) {
        const WpAdamWSetting *set = &wp_adamw_settings[i];
        const char *val = wp_st_metadata(f, set->key);
        if (!val) val = set->before;
        if (!val) continue;
        if (adamw_setting_parse(&adamw, set, val)) {
            char range[96];
            adamw_setting_range(set, range, sizeof range);
            return errmsg(err, errlen, "%s: its __metadata__ \"%s\" is \"%s\", expected %s", opt, set->key, val, range);
        }
        known |= 1u << i;
    }
    if (st) {
        st->adamw = adamw;
        st->adamw_known = known;
        st->data_order = WP_ORDER_UNKNOWN;   /* this version's runs read their data in file order */
        st->run = 0;                         /* nor did it record its run */
        st->step = (long)step;
        st->seed = seed;
        st->data_seq = seq;
        st->micro_batches = (int)mb;
        st->micro_batch_size = (int)mbs;
        st->seq = (int)s;
    }
    return 0;
}

int ckpt_input_files(const char *path, char ***files) {
    char err[512];
    *files = NULL;
    if (ck_is_manifest(path)) {
        json_t *root = ck_manifest_open(path, err, sizeof err);
        size_t nsh = json_array_size(json_object_get(root, "shards")), n = 0;
        char **out = root ? calloc(nsh ? nsh : 1, sizeof *out) : NULL;
        for (size_t i = 0; out && i < nsh; i++) {
            char file[5400];
            if (ck_manifest_shard_path(root, i, path, file, sizeof file, err, sizeof err) == 0 && (out[n] = strdup(file))) n++;
        }
        json_decref(root);
        *files = out;
        return (int)n;
    }
    char opt[5300];
    WpStFile *f = wp_st_open(path, err, sizeof err);
    int rc = f ? opt_path_of(f, path, opt, sizeof opt, err, sizeof err) : -1;
    wp_st_close(f);
    if (rc || !(*files = malloc(sizeof **files))) return 0;
    if (!((*files)[0] = strdup(opt))) { free(*files); *files = NULL; return 0; }
    return 1;
}

void ckpt_files_free(char **files, int n) {
    for (int i = 0; files && i < n; i++) free(files[i]);
    free(files);
}

int ckpt_read_state(const char *path, WpTrainState *st, char *err, size_t errlen) {
    if (ck_is_manifest(path)) {
        json_t *root = ck_manifest_open(path, err, errlen);
        int rc = root ? ck_state_from_json(json_object_get(root, "state"), path, st, err, errlen) : -1;
        if (rc == 0) rc = ck_manifest_run(root, path, &st->run, err, errlen);
        json_decref(root);
        return rc ? errmsg_one_line(err) : 0;
    }
    char opt[5300];
    WpStFile *f = wp_st_open(path, err, errlen);
    if (!f) return errmsg_one_line(err);
    uint64_t model_step = 0;
    int has_step = meta_u64(f, "step", &model_step) == 0;
    int rc = opt_path_of(f, path, opt, sizeof opt, err, errlen);
    wp_st_close(f);
    if (rc) return errmsg_one_line(err);
    WpStFile *o = wp_st_open(opt, err, errlen);
    if (!o) return errmsg_one_line(err);
    rc = read_opt_meta(o, opt, path, has_step, model_step, st, err, errlen);
    wp_st_close(o);
    return rc ? errmsg_one_line(err) : 0;
}

/* ---- what was read ----------------------------------------------------------------------------- */

/* AdamW's moments as AdamW leaves them: finite, the second ones >= 0 (a NaN or a negative one
 * would turn the first update's weights into NaN, steps after the resume). */
static int check_moments(const char *opt, const WpChunk *chunks, int nchunks, float *const *m, float *const *v,
                         char *err, size_t errlen) {
    for (int k = 0; k < nchunks; k++)
        for (size_t i = 0; i < chunks[k].nparams; i++) {
            if (!isfinite(m[k][i]))
                return errmsg(err, errlen, "%s: an exp_avg (AdamW's first moment) of chunk %d is %g at element %zu: "
                              "not a state AdamW leaves", opt, k, (double)m[k][i], i);
            if (!(v[k][i] >= 0) || !isfinite(v[k][i]))
                return errmsg(err, errlen, "%s: an exp_avg_sq (AdamW's second moment) of chunk %d is %g at element %zu: "
                              "expected a finite number >= 0", opt, k, (double)v[k][i], i);
        }
    return 0;
}

/* Weights loaded alone (--init, wpgen export) are finite: else the first tensor that is not,
 * named with the first bad element, as the file's reader sees it (row and column). */
static int check_finite(const char *path, const WpConfig *c, const WpChunk *chunks, int nchunks, float *const *params,
                        char *err, size_t errlen) {
    for (int k = 0; k < nchunks; k++) {
        int n;
        WpTensor *ts = ck_chunk_tensors(c, &chunks[k], &n);
        if (!ts) return errmsg(err, errlen, "%s: out of memory", path);
        for (int t = 0; t < n; t++) {
            const float *x = params[k] + ts[t].offset;
            size_t numel = ts[t].rows * ts[t].cols;
            for (size_t i = 0; i < numel; i++)
                if (!isfinite(x[i])) {
                    char at[64];
                    if (ts[t].cols == 1) snprintf(at, sizeof at, "[%zu]", i);
                    else snprintf(at, sizeof at, "[%zu, %zu]", i / ts[t].cols, i % ts[t].cols);
                    errmsg(err, errlen, "%s: tensor %s%s is %g (first of its elements that is not finite): expected "
                           "finite weights (a run that diverged?)", path, ts[t].name, at, (double)x[i]);
                    free(ts);
                    return -1;
                }
        }
        free(ts);
    }
    return 0;
}

static int ckpt_load_any(const char *path, const WpConfig *c, const WpChunk *chunks, int nchunks,
                         float *const *params, float *const *m, float *const *v, WpTrainState *st,
                         char *err, size_t errlen);

int ckpt_load(const char *path, const WpConfig *c, const WpChunk *chunks, int nchunks,
              float *const *params, float *const *m, float *const *v, WpTrainState *st,
              char *err, size_t errlen) {
    if (ckpt_load_any(path, c, chunks, nchunks, params, m, v, st, err, errlen)) return -1;
    /* a resume's NaN is left to the loop's check (it stops with exit 1, the checkpoint kept) */
    if (!(m && v) && check_finite(path, c, chunks, nchunks, params, err, errlen)) return -1;
    return 0;
}

static int ckpt_load_any(const char *path, const WpConfig *c, const WpChunk *chunks, int nchunks,
                         float *const *params, float *const *m, float *const *v, WpTrainState *st,
                         char *err, size_t errlen) {
    if (ck_is_manifest(path)) return load_manifest(path, c, chunks, nchunks, params, m, v, st, err, errlen);
    WpStFile *f = wp_st_open(path, err, errlen);
    if (!f) return -1;
    static const char *const plain[] = {""}, *const moments[] = {".exp_avg", ".exp_avg_sq"};
    int rc = check_no_extra(f, path, c, plain, 1, err, errlen);
    if (rc == 0) rc = load_chunks(f, path, c, chunks, nchunks, params, "", 1, err, errlen);
    uint64_t model_step = 0;
    int has_step = meta_u64(f, "step", &model_step) == 0;
    char opt[5300];
    if (rc == 0 && m && v) rc = opt_path_of(f, path, opt, sizeof opt, err, errlen);
    wp_st_close(f);
    if (rc != 0 || !(m && v)) return rc ? errmsg_one_line(err) : 0;

    f = wp_st_open(opt, err, errlen);
    if (!f) return -1;
    WpTrainState tmp;
    rc = read_opt_meta(f, opt, path, has_step, model_step, &tmp, err, errlen);
    if (rc == 0) rc = check_no_extra(f, opt, c, moments, 2, err, errlen);
    if (rc == 0) rc = load_chunks(f, opt, c, chunks, nchunks, m, ".exp_avg", 0, err, errlen);
    if (rc == 0) rc = load_chunks(f, opt, c, chunks, nchunks, v, ".exp_avg_sq", 0, err, errlen);
    if (rc == 0) rc = check_moments(opt, chunks, nchunks, m, v, err, errlen);
    if (rc == 0 && st) *st = tmp;
    wp_st_close(f);
    return rc ? errmsg_one_line(err) : 0;
}
