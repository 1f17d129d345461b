/* Checkpoints sharded by owner: each process's shard of fp32 weights and AdamW state in
 * safetensors with Hugging Face names, committed as one unit by the rename of the manifest; and
 * the loading of those, of earlier versions' single-file checkpoints and of Hugging Face files.
 * See checkpoint.h for the layout and the guarantees. Here, the commit and a one-process save; the
 * parts, one concern a file (ckpt_internal.h declares what they share):
 *   ckpt_names.c     the names of a checkpoint's files, and the pruning after a commit
 *   ckpt_owner.c     whose folder and files: the lock, config.json, the run id, a save's checks
 *   ckpt_manifest.c  the manifest: the training state, tensors and shards as JSON, built and checked
 *   ckpt_shard.c     the shards: written from an owner's arrays, checked against the manifest
 *   ckpt_load.c      ckpt_load's three formats, and what is checked of what was read
 * Writing a file durably is common/durable.c's; the 64-bit hashes common/hash64.h's. */
#include "train/ckpt_internal.h"
#include "common/durable.h"
#include "common/errmsg.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int ckpt_commit(const char *path, const WpConfig *c, const WpChunk *chunks, int nchunks,
                const WpCkptShard *shards, int nshards, const WpTrainState *st, int with_optimizer, int keep,
                int *committed, char *err, size_t errlen) {
    *committed = 0;
    CkptNames n;
    if (ckpt_check_save(path, err, errlen) || ck_names_of(path, &n, err, errlen)) return -1;
    json_t *root = ck_manifest_build(path, c, chunks, nchunks, shards, nshards, st, with_optimizer, err, errlen);
    if (!root) return -1;
    char *text = json_dumps(root, JSON_INDENT(1) | JSON_PRESERVE_ORDER);
    json_decref(root);
    if (!text) return errmsg(err, errlen, "%s: out of memory for the manifest", path);
    /* config.json (rewritten only if the model's shape changed), then the manifest's rename:
     * the commit */
    int rc = ckpt_write_config(path, c, err, errlen);
    if (rc == 0 && keep != 1) {
        /* --keep N or all: this checkpoint also as DIR/STEM.STEP.json, which stays when PATH moves on */
        char kept[5400];
        snprintf(kept, sizeof kept, "%s/%s.%ld.json", n.dir, n.stem, st->step);
        uint64_t r = 0;
        long s;
        if (access(kept, F_OK) == 0 && !ck_manifest_is_ours(kept))
            rc = errmsg(err, errlen, "%s exists and is not a checkpoint manifest written by wpgen: refusing to replace it "
                        "(--keep names the checkpoint of step %ld so)", kept, st->step);
        else if (access(kept, F_OK) == 0 && (!ck_manifest_owner(kept, &r, &s) || r != st->run))
            rc = errmsg(err, errlen, "%s is the checkpoint of another run (run %016" PRIx64 "): refusing to replace it "
                        "(--keep names the checkpoint of step %ld so)", kept, r, st->step);
        else
            rc = wp_write_text_atomic(kept, text, err, errlen);
    }
    if (rc == 0) rc = wp_write_text_atomic(path, text, err, errlen);
    if (rc == 0) {
        *committed = 1;
    } else {
        /* committed all the same when only the directory's fsync failed */
        FILE *f = fopen(path, "rb");
        size_t len = strlen(text);
        char *back = f ? malloc(len + 2) : NULL;
        *committed = back && fread(back, 1, len + 1, f) == len && memcmp(back, text, len) == 0;
        free(back);
        if (f) fclose(f);
    }
    free(text);
    if (rc) return -1;
    /* Committed: the shards no kept manifest names go. */
    ck_prune(&n, path, keep, st->step, st->run);
    return 0;
}

int ckpt_save(const char *path, const WpConfig *c, const WpChunk *chunks, int nchunks,
              float *const *params, float *const *m, float *const *v, const WpTrainState *st, int keep,
              char *err, size_t errlen) {
    WpTrainState none = { 0 };
    if (m && v && !st) return errmsg(err, errlen, "%s: saving the optimizer needs the training state", path);
    if (!st) st = &none;
    if (ckpt_check_save(path, err, errlen)) return -1;
    WpCkptRange *ranges = malloc((size_t)(nchunks > 0 ? nchunks : 1) * sizeof *ranges);
    if (!ranges) return errmsg(err, errlen, "%s: out of memory", path);
    for (int k = 0; k < nchunks; k++) ranges[k] = (WpCkptRange){ k, 0, chunks[k].nparams };
    uint64_t hash = 0;
    int created = 0, committed = 0;
    int rc = ckpt_write_shard(path, c, chunks, ranges, nchunks, params, m && v ? m : NULL, m && v ? v : NULL, st, 0,
                              &hash, &created, err, errlen);
    WpCkptShard shard = { 0, hash, ranges, nchunks };
    if (rc == 0) rc = ckpt_commit(path, c, chunks, nchunks, &shard, 1, st, m && v, keep, &committed, err, errlen);
    if (rc && created && !committed) {
        char file[5400];
        ckpt_shard_path(path, st->step, 0, hash, file, sizeof file);
        unlink(file);
    }
    free(ranges);
    return rc;
}
