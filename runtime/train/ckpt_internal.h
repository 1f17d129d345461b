/* What the checkpoint's files (checkpoint.c and its parts, ckpt_*.c) share among themselves: not
 * an interface of the runtime (that is checkpoint.h). Each function is described where it is
 * written. */
#ifndef WP_CKPT_INTERNAL_H
#define WP_CKPT_INTERNAL_H

#include <stddef.h>
#include <stdint.h>
#include <jansson.h>
#include "train/checkpoint.h"
#include "train/safetensors.h"

/* What marks a file as ours: a shard's and the manifest's "written_by", and config.json's. */
#define WRITTEN_BY "wpgen"
/* A shard's __metadata__ "format". */
#define SHARD_FORMAT "wpgen-shard"

/* A checkpoint path taken apart: DIR ("." if none), BASE (the file name) and STEM (BASE without
 * ".json", or an earlier version's ".safetensors"), the prefix of every name the checkpoint uses
 * besides BASE and config.json. */
typedef struct CkptNames {
    char dir[4096], base[1024], stem[1024];
} CkptNames;

/* A slice of a tensor in shard `shard`: its offset into the tensor's flattening, its length. */
typedef struct Piece { int shard; size_t offset, count; } Piece;

/* ckpt_names.c: names, pruning */
int ck_names_of(const char *path, CkptNames *n, char *err, size_t errlen);
void ck_join(char *out, size_t outlen, const char *dir, const char *name);
int ck_is_opt_name(const char *name, const char *stem);
int ck_is_shard_name(const char *name, const char *stem);
int ck_is_kept_name(const char *name, const char *stem, long *step);
int ck_shard_of_stem(const char *file, const char *stem);
void ck_prune(const CkptNames *n, const char *path, int keep, long step, uint64_t run);

/* ckpt_owner.c: whose files */
int ck_manifest_is_ours(const char *path);
int ck_manifest_run(const json_t *root, const char *path, uint64_t *run, char *err, size_t errlen);
int ck_manifest_owner(const char *path, uint64_t *run, long *step);

/* ckpt_manifest.c: the manifest */
json_t *ck_state_to_json(const WpTrainState *st);
int ck_state_from_json(const json_t *o, const char *path, WpTrainState *st, char *err, size_t errlen);
json_t *ck_manifest_open(const char *path, char *err, size_t errlen);
int ck_is_manifest(const char *path);
int ck_tensor_pieces(const json_t *shards, const char *name, size_t numel, Piece *out, const char *path,
                     char *err, size_t errlen);
json_t *ck_manifest_build(const char *path, const WpConfig *c, const WpChunk *chunks, int nchunks,
                          const WpCkptShard *shards, int nshards, const WpTrainState *st, int with_optimizer,
                          char *err, size_t errlen);
int ck_manifest_check_tensors(const json_t *root, const char *path, const WpConfig *c, char *err, size_t errlen);
int ck_manifest_shard_path(const json_t *root, size_t i, const char *path, char *out, size_t outlen, char *err,
                           size_t errlen);

/* ckpt_shard.c: shards */
WpTensor *ck_chunk_tensors(const WpConfig *c, const WpChunk *k, int *n);
void ck_fill_mirror(const WpConfig *c, const WpChunk *chunks, int nchunks, float *const *arrays);
int ck_tensor_shape(const WpTensor *t, size_t *shape);
int ck_slice_of(const WpTensor *t, size_t off, size_t n, size_t *start, size_t *count, size_t *at);
int ck_shard_check_header(const WpStFile *f, const char *file, const json_t *root, size_t s, const char *path,
                          char *err, size_t errlen);
int ck_shard_check_hash(const WpStFile *f, const char *file, char *err, size_t errlen);
extern const char *const ck_shard_suffix[3];

/* ckpt_load.c: reading */
void ck_shape_str(const size_t *shape, int nd, char *out, size_t outlen);

#endif
