/* The manifest, a checkpoint's commit: the training state as JSON (one table of its fields), the
 * model's tensors and shapes, each shard's file and the slices it holds, built by a save and
 * checked by a load (format, version, tensors of this model, every tensor covered by the shards
 * exactly once, shard files named as this checkpoint's in its folder). */
#include "train/ckpt_internal.h"
#include "common/errmsg.h"
#include "common/jsonfile.h"

#include <limits.h>
#include <stddef.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- the manifest: the training state -------------------------------------------------------- */

#define MANIFEST_FORMAT "wpgen-checkpoint"
#define MANIFEST_VERSION 1
#define WP_STR_(x) #x
#define WP_STR(x) WP_STR_(x)

/* WpTrainState's fields in the manifest's "state" object: the one place that says how the
 * training state is written and read (a field added to WpTrainState is added here). Every value
 * is a decimal string: a seed needs 64 bits, past what JSON's numbers (and Jansson's) hold. */
typedef enum { FIELD_LONG, FIELD_U64, FIELD_INT } FieldKind;
/* optional: a manifest may lack it (written before the field was), and it then reads as 0 */
static const struct StateField { const char *key; size_t offset; FieldKind kind; int optional; } state_fields[] = {
    { "step", offsetof(WpTrainState, step), FIELD_LONG, 0 },
    { "seed", offsetof(WpTrainState, seed), FIELD_U64, 0 },
    { "data_seq", offsetof(WpTrainState, data_seq), FIELD_U64, 0 },
    { "micro_batches", offsetof(WpTrainState, micro_batches), FIELD_INT, 0 },
    { "micro_batch_size", offsetof(WpTrainState, micro_batch_size), FIELD_INT, 0 },
    { "seq", offsetof(WpTrainState, seq), FIELD_INT, 0 },
    { "data_order", offsetof(WpTrainState, data_order), FIELD_INT, 1 },
};
#define NSTATE_FIELDS (int)(sizeof state_fields / sizeof state_fields[0])

/* The manifest's "state" object of st; NULL when out of memory. */
json_t *ck_state_to_json(const WpTrainState *st) {
    json_t *o = json_object();
    for (int i = 0; o && i < NSTATE_FIELDS; i++) {
        const char *p = (const char *)st + state_fields[i].offset;
        char num[32];
        switch (state_fields[i].kind) {
        case FIELD_LONG: snprintf(num, sizeof num, "%ld", *(const long *)p); break;
        case FIELD_U64: snprintf(num, sizeof num, "%" PRIu64, *(const uint64_t *)p); break;
        case FIELD_INT: snprintf(num, sizeof num, "%d", *(const int *)p); break;
        }
        if (json_object_set_new(o, state_fields[i].key, json_string(num))) { json_decref(o); o = NULL; }
    }
    /* the optimizer's settings the run was trained with, those known, under the table's keys
     * (common/optim.c's wp_adamw_settings), exactly (the value reads back to the same bits) */
    for (int i = 0; o && i < wp_adamw_nsettings; i++) {
        if (!(st->adamw_known & (1u << i))) continue;
        char val[64];
        adamw_setting_format(&st->adamw, &wp_adamw_settings[i], 1, val, sizeof val);
        if (json_object_set_new(o, wp_adamw_settings[i].key, json_string(val))) { json_decref(o); o = NULL; }
    }
    /* the data's tokenizer, "" when unknown; its name for messages only, left out where a
     * shard's header held no UTF-8 (json_string refuses it) */
    if (o && json_object_set_new(o, "tokenizer", json_string(st->tokenizer))) { json_decref(o); o = NULL; }
    json_t *name = o && st->tokenizer_name[0] ? json_string(st->tokenizer_name) : NULL;
    if (name && json_object_set_new(o, "tokenizer_name", name)) { json_decref(o); o = NULL; }
    return o;
}

/* "sha256:" and 16 lowercase hex digits (data.h's data_tokenizer), "bytes", or "" (unknown). */
static int tokenizer_valid(const char *t) {
    if (!*t || !strcmp(t, "bytes")) return 1;
    if (strncmp(t, "sha256:", 7) || strlen(t) != 7 + 16) return 0;
    for (const char *p = t + 7; *p; p++)
        if (!((*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'f'))) return 0;
    return 1;
}

/* st from the manifest's "state" object: every field, a decimal in its range. 0, or -1 with
 * err naming the field. */
int ck_state_from_json(const json_t *o, const char *path, WpTrainState *st, char *err, size_t errlen) {
    memset(st, 0, sizeof *st);
    for (int i = 0; i < NSTATE_FIELDS; i++) {
        const struct StateField *f = &state_fields[i];
        const char *s = json_string_value(json_object_get(o, f->key));
        if (!s && f->optional && !json_object_get(o, f->key)) continue;
        uint64_t max = f->kind == FIELD_U64 ? UINT64_MAX : f->kind == FIELD_LONG ? (uint64_t)LONG_MAX : (uint64_t)INT32_MAX;
        char *end = NULL;
        errno = 0;
        unsigned long long x = s && *s >= '0' && *s <= '9' ? strtoull(s, &end, 10) : 0;
        if (!end || *end || errno || x > max) {
            char jpath[64], what[64];
            snprintf(jpath, sizeof jpath, "state.%s", f->key);
            snprintf(what, sizeof what, "a decimal string in [0, %" PRIu64 "]", max);
            return wp_json_expected(err, errlen, path, jpath, what, json_object_get(o, f->key));
        }
        char *p = (char *)st + f->offset;
        switch (f->kind) {
        case FIELD_LONG: *(long *)p = (long)x; break;
        case FIELD_U64: *(uint64_t *)p = x; break;
        case FIELD_INT: *(int *)p = (int)x; break;
        }
    }
    /* the optimizer's settings: those recorded, else the value fixed before they were */
    adamw_init(&st->adamw, 0, 0, 0);
    for (int i = 0; i < wp_adamw_nsettings; i++) {
        const WpAdamWSetting *set = &wp_adamw_settings[i];
        const char *val = json_string_value(json_object_get(o, set->key));
        if (!val) val = set->before;
        if (!val) continue;
        if (adamw_setting_parse(&st->adamw, set, val)) {
            char range[96];
            adamw_setting_range(set, range, sizeof range);
            return errmsg(err, errlen, "%s: state.%s: \"%s\", expected %s", path, set->key, val, range);
        }
        st->adamw_known |= 1u << i;
    }
    /* the data's tokenizer: absent in a checkpoint written before they recorded it */
    const json_t *tk = json_object_get(o, "tokenizer"), *tn = json_object_get(o, "tokenizer_name");
    if (tk) {
        const char *t = json_string_value(tk);
        if (!t || !tokenizer_valid(t))
            return wp_json_expected(err, errlen, path, "state.tokenizer", "\"sha256:\" and 16 hex digits, \"bytes\" or \"\"", tk);
        snprintf(st->tokenizer, sizeof st->tokenizer, "%s", t);
        st->tokenizer_known = 1;
    }
    if (tn) {
        const char *t = json_string_value(tn);
        if (!t || json_string_length(tn) >= sizeof st->tokenizer_name || strlen(t) != json_string_length(tn)) {
            char what[64];
            snprintf(what, sizeof what, "a string of at most %zu bytes", sizeof st->tokenizer_name - 1);
            return wp_json_expected(err, errlen, path, "state.tokenizer_name", what, tn);
        }
        snprintf(st->tokenizer_name, sizeof st->tokenizer_name, "%s", t);
    }
    return 0;
}

/* The manifest at path, parsed and checked to be ours (format, version); NULL with err set. */
json_t *ck_manifest_open(const char *path, char *err, size_t errlen) {
    json_error_t je;
    json_t *root = json_load_file(path, 0, &je);
    if (!root) {
        errmsg(err, errlen, "%s: not a checkpoint manifest: %s (line %d)", path, je.text, je.line);
        return NULL;
    }
    const char *fmt = json_string_value(json_object_get(root, "format"));
    json_t *ver = json_object_get(root, "version");
    if (!fmt || strcmp(fmt, MANIFEST_FORMAT) != 0) {
        wp_json_expected(err, errlen, path, "format", "\"" MANIFEST_FORMAT "\" (a checkpoint manifest written by wpgen)",
                         json_object_get(root, "format"));
        json_decref(root);
        return NULL;
    }
    if (!json_is_integer(ver) || json_integer_value(ver) != MANIFEST_VERSION) {
        wp_json_expected(err, errlen, path, "version", WP_STR(MANIFEST_VERSION) " (written by another wpgen version?)", ver);
        json_decref(root);
        return NULL;
    }
    return root;
}

/* Does path hold a manifest (a JSON object) rather than a safetensors file? Its first byte says. */
int ck_is_manifest(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) return 0;
    int ch;
    while ((ch = fgetc(f)) == ' ' || ch == '\n' || ch == '\t' || ch == '\r') {}
    fclose(f);
    return ch == '{';
}

/* ---- which shard holds which slice --------------------------------------------------------- */

static int cmp_piece(const void *a, const void *b) {
    size_t x = ((const Piece *)a)->offset, y = ((const Piece *)b)->offset;
    return (x > y) - (x < y);
}

/* The slices of tensor `name` (numel elements) in the manifest's shards, sorted by offset into
 * out (room for one per shard): they must cover the tensor exactly once. How many, or -1 with err
 * set. The commit checks a new manifest with it and loading an old one. */
int ck_tensor_pieces(const json_t *shards, const char *name, size_t numel, Piece *out, const char *path,
                     char *err, size_t errlen) {
    int n = 0;
    for (size_t i = 0; i < json_array_size(shards); i++) {
        json_t *sl = json_object_get(json_object_get(json_array_get(shards, i), "slices"), name);
        if (!sl) continue;
        json_t *o = json_array_get(sl, 0), *k = json_array_get(sl, 1);
        if (json_array_size(sl) != 2 || !json_is_integer(o) || !json_is_integer(k) || json_integer_value(o) < 0 ||
            json_integer_value(k) <= 0) {
            char jpath[256];
            snprintf(jpath, sizeof jpath, "shards[%zu].slices.%s", i, name);
            return wp_json_expected(err, errlen, path, jpath, "[offset, count], count > 0", sl);
        }
        out[n++] = (Piece){ (int)i, (size_t)json_integer_value(o), (size_t)json_integer_value(k) };
    }
    qsort(out, (size_t)n, sizeof *out, cmp_piece);
    size_t at = 0;
    for (int i = 0; i < n; i++) {
        if (out[i].offset != at)
            return errmsg(err, errlen, "%s: tensor %s: its shards %s elements [%zu, %zu) (of %zu)", path, name,
                          out[i].offset > at ? "leave out" : "hold twice", out[i].offset > at ? at : out[i].offset,
                          out[i].offset > at ? out[i].offset : at, numel);
        at += out[i].count;
    }
    if (at != numel)
        return errmsg(err, errlen, "%s: tensor %s: its shards %s elements [%zu, %zu) (of %zu)", path, name,
                      at < numel ? "leave out" : "hold more than its", at < numel ? at : numel, at < numel ? numel : at, numel);
    return n;
}

/* The manifest of a save: the state, the model's tensors, each shard's file and slices. Checks
 * that the shards cover every tensor once. NULL with err set. */
json_t *ck_manifest_build(const char *path, const WpConfig *c, const WpChunk *chunks, int nchunks,
                          const WpCkptShard *shards, int nshards, const WpTrainState *st, int with_optimizer,
                          char *err, size_t errlen) {
    WpChunk whole = wp_chunk_make(c, 0, 0, c->layers, 1, 1);
    int nt;
    WpTensor *ts = ck_chunk_tensors(c, &whole, &nt);
    json_t *root = json_object(), *tensors = json_object(), *arr = json_array();
    int bad = !ts || !root || !tensors || !arr;
    if (!bad) {
        bad |= json_object_set_new(root, "format", json_string(MANIFEST_FORMAT));
        bad |= json_object_set_new(root, "version", json_integer(MANIFEST_VERSION));
        bad |= json_object_set_new(root, "written_by", json_string(WRITTEN_BY));
        bad |= json_object_set_new(root, "state", ck_state_to_json(st));
        if (st->run) {
            char run[24];
            snprintf(run, sizeof run, "%016" PRIx64, st->run);
            bad |= json_object_set_new(root, "run", json_string(run));
        }
        if (with_optimizer) bad |= json_object_set_new(root, "optimizer", json_string("adamw"));
        for (int i = 0; i < nt && !bad; i++) {
            size_t shape[2];
            int nd = ck_tensor_shape(&ts[i], shape);
            bad |= json_object_set_new(tensors, ts[i].name, nd == 2 ? json_pack("[II]", (json_int_t)shape[0], (json_int_t)shape[1])
                                                                  : json_pack("[I]", (json_int_t)shape[0]));
        }
    }
    for (int s = 0; s < nshards && !bad; s++) {
        char file[5400];
        ckpt_shard_path(path, st->step, shards[s].rank, shards[s].hash, file, sizeof file);
        json_t *sl = json_object();
        bad |= !sl;
        for (int i = 0; i < shards[s].nranges && !bad; i++) {
            const WpCkptRange *r = &shards[s].ranges[i];
            if (r->chunk < 0 || r->chunk >= nchunks || r->offset + r->n > chunks[r->chunk].nparams) {
                json_decref(sl);
                json_decref(root); json_decref(tensors); json_decref(arr); free(ts);
                errmsg(err, errlen, "%s: shard of rank %d: range %d (chunk %d, floats %zu + %zu) outside the chunks", path,
                       shards[s].rank, i, r->chunk, r->offset, r->n);
                return NULL;
            }
            int n;
            WpTensor *cts = ck_chunk_tensors(c, &chunks[r->chunk], &n);
            bad |= !cts;
            for (int j = 0; j < n && !bad; j++) {
                size_t start, count, at;
                if (ck_slice_of(&cts[j], r->offset, r->n, &start, &count, &at))
                    bad |= json_object_set_new(sl, cts[j].name, json_pack("[II]", (json_int_t)start, (json_int_t)count));
            }
            free(cts);
        }
        bad |= json_array_append_new(arr, json_pack("{sssisO}", "file", strrchr(file, '/') + 1, "rank", shards[s].rank,
                                                     "slices", sl));
        json_decref(sl);
    }
    bad |= json_object_set(root, "tensors", tensors) || json_object_set(root, "shards", arr);
    Piece *pieces = malloc((size_t)(nshards > 0 ? nshards : 1) * sizeof *pieces);
    int rc = bad || !pieces ? errmsg(err, errlen, "%s: out of memory for the manifest", path) : 0;
    for (int i = 0; i < nt && rc == 0; i++)
        if (ck_tensor_pieces(arr, ts[i].name, ts[i].rows * ts[i].cols, pieces, path, err, errlen) < 0) rc = -1;
    free(pieces);
    free(ts);
    json_decref(tensors);
    json_decref(arr);
    if (rc) { json_decref(root); return NULL; }
    return root;
}

/* ---- a manifest a load reads ---------------------------------------------------------------------- */

/* The manifest's tensors are the model's, of the same shapes: else the first difference, named. */
int ck_manifest_check_tensors(const json_t *root, const char *path, const WpConfig *c, char *err, size_t errlen) {
    const json_t *tensors = json_object_get(root, "tensors");
    WpChunk whole = wp_chunk_make(c, 0, 0, c->layers, 1, 1);
    int nt;
    WpTensor *ts = ck_chunk_tensors(c, &whole, &nt);
    if (!ts) return errmsg(err, errlen, "%s: out of memory", path);
    int rc = json_is_object(tensors) ? 0 : wp_json_expected(err, errlen, path, "tensors", "an object of shapes", tensors);
    for (int i = 0; i < nt && rc == 0; i++) {
        const json_t *sh = json_object_get(tensors, ts[i].name);
        size_t want[2], got[2] = { 0, 0 };
        int wnd = ck_tensor_shape(&ts[i], want), nd = (int)json_array_size(sh);
        if (!sh) { rc = errmsg(err, errlen, "%s: tensor %s is missing", path, ts[i].name); break; }
        for (int d = 0; d < nd && d < 2; d++) got[d] = (size_t)json_integer_value(json_array_get(sh, (size_t)d));
        if (nd != wnd || got[0] != want[0] || (nd == 2 && got[1] != want[1])) {
            /* the shape as the manifest writes it (any rank, any JSON), not as far as it was read */
            char *a = json_dumps(sh, JSON_ENCODE_ANY), b[96];
            ck_shape_str(want, wnd, b, sizeof b);
            rc = errmsg(err, errlen, "%s: %s: shape %.200s in the checkpoint, %s in the model (a checkpoint of another model "
                        "shape?)", path, ts[i].name, a ? a : "?", b);
            free(a);
        }
    }
    if (rc == 0 && json_object_size(tensors) != (size_t)nt) {
        const char *key;
        const json_t *val;
        json_object_foreach((json_t *)tensors, key, val) {
            int found = 0;
            for (int i = 0; i < nt && !found; i++) found = strcmp(key, ts[i].name) == 0;
            if (!found) {
                rc = errmsg(err, errlen, "%s: tensor %s is not part of this model (%d layers%s): a checkpoint of another "
                            "model shape?", path, key, c->layers, c->tied ? ", tied embeddings" : "");
                break;
            }
        }
    }
    free(ts);
    return rc;
}

/* The path of shard i of the manifest: a plain file name of this checkpoint's shards in its
 * directory, never a path (the manifest is not trusted further). -1 with err set. */
int ck_manifest_shard_path(const json_t *root, size_t i, const char *path, char *out, size_t outlen, char *err,
                           size_t errlen) {
    CkptNames n;
    if (ck_names_of(path, &n, err, errlen)) return -1;
    const json_t *fv = json_object_get(json_array_get(json_object_get(root, "shards"), i), "file");
    const char *file = json_string_value(fv);
    if (!file || !ck_shard_of_stem(file, n.stem)) {
        char jpath[64], what[1100];
        snprintf(jpath, sizeof jpath, "shards[%zu].file", i);
        snprintf(what, sizeof what, "a name %s.shard.STEP.RANK.HASH.safetensors in its folder", n.stem);
        return wp_json_expected(err, errlen, path, jpath, what, fv);
    }
    ck_join(out, outlen, n.dir, file);
    return 0;
}
