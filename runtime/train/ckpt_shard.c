/* A checkpoint's shards: one safetensors file per owner of masters, the slices of each tensor it
 * holds (weights and AdamW's two moments), named by the hash of its content; written straight from
 * the owner's arrays, and checked when a load opens one (its header against the manifest, its
 * content against the hash its name holds). */
#include "train/ckpt_internal.h"
#include "common/errmsg.h"
#include "common/hash64.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ---- content hash ------------------------------------------------------------------------- */

/* The optimizer file is named by a hash of its content, so that the model file's reference to
 * it is also a check: whatever file has that name holds that state. And a save repeated with the
 * same state writes the same names, as every other output of wpgen is reproducible. */
static uint64_t hash_bytes(uint64_t h, const void *data, size_t n) {
    const unsigned char *p = data;
    for (; n >= 8; p += 8, n -= 8) {
        uint64_t w;
        memcpy(&w, p, 8);
        h = (h ^ w) * WP_FNV_PRIME;   /* FNV over 8-byte words */
        h ^= h >> 29;
    }
    uint64_t w = 0;
    memcpy(&w, p, n);
    return wp_splitmix64(h ^ w ^ ((uint64_t)n << 56));
}

/* ---- shards ---------------------------------------------------------------------------------- */

/* The chunk's tensors as checkpoints keep them, malloc'd; NULL on failure. A tied model's mirror
 * of the embedding (wp_chunk_mirrors_embedding: its last chunk's lm_head.weight, the last tensor)
 * is not among them: the embedding is saved once, as Hugging Face saves a tied model, and a load
 * fills the mirror from it (ck_fill_mirror). */
WpTensor *ck_chunk_tensors(const WpConfig *c, const WpChunk *k, int *n) {
    *n = wp_chunk_tensors(c, k, NULL);
    WpTensor *t = calloc((size_t)(*n > 0 ? *n : 1), sizeof *t);
    if (t) wp_chunk_tensors(c, k, t);
    if (wp_chunk_mirrors_embedding(c, k)) (*n)--;
    return t;
}

/* A loaded array of every chunk (weights or one AdamW moment): the mirror, if the last chunk has
 * one, takes the embedding's values (the first chunk's first V*H), as training keeps them equal. */
void ck_fill_mirror(const WpConfig *c, const WpChunk *chunks, int nchunks, float *const *arrays) {
    const WpChunk *last = &chunks[nchunks - 1];
    if (!arrays || !wp_chunk_mirrors_embedding(c, last)) return;
    size_t vh = (size_t)c->vocab * c->hidden;
    memcpy(arrays[nchunks - 1] + last->nparams - vh, arrays[0], vh * sizeof(float));
}

int ck_tensor_shape(const WpTensor *t, size_t *shape) {
    shape[0] = t->rows;
    shape[1] = t->cols;
    return t->cols == 1 ? 1 : 2;
}

/* The part of tensor t (of a chunk) inside the chunk's floats [off, off + n): 1, its first
 * element in the tensor's flattening, its length, and where it starts in the range; 0 if none. */
int ck_slice_of(const WpTensor *t, size_t off, size_t n, size_t *start, size_t *count, size_t *at) {
    size_t a = t->offset, b = t->offset + t->rows * t->cols;
    if (a < off) a = off;
    if (b > off + n) b = off + n;
    if (a >= b) return 0;
    *start = a - t->offset;
    *count = b - a;
    *at = a - off;
    return 1;
}

/* The three arrays a shard holds of each tensor: the weights, AdamW's two moments. */
const char *const ck_shard_suffix[3] = { "", ".exp_avg", ".exp_avg_sq" };

void ckpt_shard_path(const char *path, long step, int rank, uint64_t hash, char *out, size_t outlen) {
    CkptNames n;
    char err[256];
    if (ck_names_of(path, &n, err, sizeof err)) { snprintf(out, outlen, "%s", path); return; }
    snprintf(out, outlen, "%s/%s.shard.%ld.%d.%016" PRIx64 ".safetensors", n.dir, n.stem, step, rank, hash);
}

int ckpt_write_shard(const char *path, const WpConfig *c, const WpChunk *chunks, const WpCkptRange *ranges,
                     int nranges, float *const *w, float *const *m, float *const *v, const WpTrainState *st,
                     int rank, uint64_t *hash, int *created, char *err, size_t errlen) {
    char file[5400];
    *created = 0;
    WpStWriter *wr = wp_st_writer_new();
    json_t *slices = json_object(), *state = ck_state_to_json(st);
    char *state_text = state ? json_dumps(state, JSON_COMPACT | JSON_PRESERVE_ORDER) : NULL;
    int rc = wr && slices && state_text ? 0 : errmsg(err, errlen, "%s: out of memory for its shard", path);
    /* the name's hash covers everything the file holds: the same name, the same bytes */
    uint64_t h = state_text ? hash_bytes((uint64_t)rank, state_text, strlen(state_text)) : 0;
    for (int i = 0; i < nranges && rc == 0; i++) {
        const WpCkptRange *r = &ranges[i];
        int nt;
        WpTensor *ts = ck_chunk_tensors(c, &chunks[r->chunk], &nt);
        if (!ts) { rc = errmsg(err, errlen, "%s: out of memory for its shard", path); break; }
        for (int j = 0; j < nt && rc == 0; j++) {
            size_t start, count, at, shape[2];
            if (!ck_slice_of(&ts[j], r->offset, r->n, &start, &count, &at)) continue;
            int nd = ck_tensor_shape(&ts[j], shape);
            json_t *sl = nd == 2 ? json_pack("{sIs[II]}", "offset", (json_int_t)start, "shape", (json_int_t)shape[0], (json_int_t)shape[1])
                                 : json_pack("{sIs[I]}", "offset", (json_int_t)start, "shape", (json_int_t)shape[0]);
            if (!sl || json_object_set_new(slices, ts[j].name, sl)) { rc = errmsg(err, errlen, "%s: out of memory", path); break; }
            h = hash_bytes(h, ts[j].name, strlen(ts[j].name) + 1);
            h = hash_bytes(h, &start, sizeof start);
            float *const src[3] = { w[i] + at, m ? m[i] + at : NULL, v ? v[i] + at : NULL };
            for (int q = 0; q < 3 && rc == 0; q++) {
                if (!src[q]) continue;
                char name[160];
                snprintf(name, sizeof name, "%s%s", ts[j].name, ck_shard_suffix[q]);
                /* borrowed: the caller's arrays outlive the commit below */
                if (wp_st_add_borrowed(wr, name, "F32", &count, 1, src[q], count * sizeof(float)) != 0)
                    rc = errmsg(err, errlen, "%s: %s: cannot add the tensor (out of memory?)", path, name);
                h = hash_bytes(h, src[q], count * sizeof(float));
            }
        }
        free(ts);
    }
    char *slices_text = rc == 0 ? json_dumps(slices, JSON_COMPACT | JSON_PRESERVE_ORDER) : NULL;
    if (rc == 0 && !slices_text) rc = errmsg(err, errlen, "%s: out of memory", path);
    if (rc == 0) {
        char num[32];
        snprintf(num, sizeof num, "%d", rank);
        wp_st_set_metadata(wr, "format", SHARD_FORMAT);
        wp_st_set_metadata(wr, "written_by", WRITTEN_BY);
        wp_st_set_metadata(wr, "rank", num);
        wp_st_set_metadata(wr, "state", state_text);
        wp_st_set_metadata(wr, "slices", slices_text);
        *hash = h;
        ckpt_shard_path(path, st->step, rank, h, file, sizeof file);
        *created = access(file, F_OK) != 0;   /* there already: the same state saved before, the same bytes */
        rc = wp_st_commit(wr, file, err, errlen);
        wr = NULL;   /* freed by the commit */
        if (rc) *created = 0;
    }
    wp_st_writer_free(wr);
    free(slices_text);
    free(state_text);
    json_decref(state);
    json_decref(slices);
    return rc ? errmsg_one_line(err) : 0;
}

/* What a shard says of itself against what the manifest says of it, checked when a load opens
 * it (its header only: cheap whatever its size): written by wpgen, of the manifest's rank and
 * training state, and each slice the manifest names at the manifest's offset, of the manifest's
 * tensor shape. A shard of another save under the right name, or metadata edited, is refused
 * here rather than loaded into the wrong place. 0, or -1 with err naming the file. */
int ck_shard_check_header(const WpStFile *f, const char *file, const json_t *root, size_t s, const char *path,
                          char *err, size_t errlen) {
    const json_t *entry = json_array_get(json_object_get(root, "shards"), s);
    const char *fmt = wp_st_metadata(f, "format"), *rank = wp_st_metadata(f, "rank");
    const char *state = wp_st_metadata(f, "state"), *slices = wp_st_metadata(f, "slices");
    if (!fmt || strcmp(fmt, SHARD_FORMAT))
        return errmsg(err, errlen, "%s: not a checkpoint shard written by wpgen (its __metadata__ format is not \"%s\")", file,
                      SHARD_FORMAT);
    const json_t *want_rank = json_object_get(entry, "rank");
    if (json_is_integer(want_rank) && (!rank || strtoll(rank, NULL, 10) != json_integer_value(want_rank)))
        return errmsg(err, errlen, "%s: a shard of rank %s, where the manifest %s names rank %" JSON_INTEGER_FORMAT, file,
                      rank ? rank : "none", path, json_integer_value(want_rank));
    json_t *st = state ? json_loads(state, 0, NULL) : NULL, *sl = slices ? json_loads(slices, 0, NULL) : NULL;
    int rc = 0;
    if (!json_equal(st, json_object_get(root, "state")))
        rc = errmsg(err, errlen, "%s: its training state is not the manifest %s's: a shard of another save", file, path);
    const char *name;
    const json_t *want;
    json_object_foreach((json_t *)json_object_get(entry, "slices"), name, want) {
        if (rc) break;
        const json_t *got = json_object_get(sl, name);
        json_int_t off = json_integer_value(json_object_get(got, "offset"));
        if (!json_is_integer(json_object_get(got, "offset")) || off != json_integer_value(json_array_get(want, 0)))
            rc = errmsg(err, errlen, "%s: slices.%s: the shard says offset %" JSON_INTEGER_FORMAT ", the manifest %s %"
                        JSON_INTEGER_FORMAT ": a shard of another save", file, name, off, path,
                        json_integer_value(json_array_get(want, 0)));
        else if (!json_equal(json_object_get(got, "shape"), json_object_get(json_object_get(root, "tensors"), name)))
            rc = errmsg(err, errlen, "%s: slices.%s: the shard's whole shape is not the manifest %s's", file, name, path);
    }
    json_decref(st);
    json_decref(sl);
    return rc;
}

/* The content hash ckpt_write_shard names a shard by, recomputed from what the file holds (its
 * rank, state, and each slice's name, offset and arrays in the order its metadata lists them),
 * against the name's. Reads the whole file: a load does it for the shards it reads whole (the
 * usual resume under the plan that saved, and wp-ref's); a shard read in part, only checked by
 * ck_shard_check_header. 0, or -1 with err naming the file. */
int ck_shard_check_hash(const WpStFile *f, const char *file, char *err, size_t errlen) {
    const char *dot = strrchr(file, '.'), *rank = wp_st_metadata(f, "rank"), *state = wp_st_metadata(f, "state");
    const char *hex = dot && dot - file >= 17 ? dot - 16 : NULL;
    char *end = NULL;
    uint64_t want = hex ? strtoull(hex, &end, 16) : 0;
    if (!end || end != dot || !rank || !state) return errmsg(err, errlen, "%s: no content hash in its name", file);
    uint64_t h = hash_bytes((uint64_t)strtoll(rank, NULL, 10), state, strlen(state));
    json_t *sl = json_loads(wp_st_metadata(f, "slices") ? wp_st_metadata(f, "slices") : "", 0, NULL);
    const char *name;
    const json_t *v;
    json_object_foreach(sl, name, v) {
        size_t start = (size_t)json_integer_value(json_object_get(v, "offset"));
        h = hash_bytes(h, name, strlen(name) + 1);
        h = hash_bytes(h, &start, sizeof start);
        for (int q = 0; q < 3; q++) {
            char full[300];
            size_t bytes = 0;
            snprintf(full, sizeof full, "%s%s", name, ck_shard_suffix[q]);
            const void *data = wp_st_get(f, full, NULL, NULL, NULL, &bytes);
            if (data) h = hash_bytes(h, data, bytes);
        }
    }
    json_decref(sl);
    if (h != want)
        return errmsg(err, errlen, "%s: its content hashes to %016" PRIx64 ", not to the %016" PRIx64 " of its name: the file "
                      "changed after it was saved (cut short, a disk error, edited)", file, h, want);
    return 0;
}
