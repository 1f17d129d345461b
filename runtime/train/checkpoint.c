/* Checkpoints sharded by owner: each process's shard of fp32 weights and AdamW state in
 * safetensors with Hugging Face names, committed as one unit by the rename of the manifest; and
 * the loading of those, of earlier versions' single-file checkpoints and of Hugging Face files.
 * See checkpoint.h for the layout and the guarantees. */
#include "train/checkpoint.h"
#include "common/errmsg.h"
#include "common/hash64.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <stddef.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <jansson.h>

#include "train/safetensors.h"
#include "common/modelcfg.h"

/* What marks a file as ours: the model file's __metadata__ and config.json carry it. */
#define WRITTEN_BY "wpgen"

/* ---- names ------------------------------------------------------------------------------ */

/* A checkpoint path taken apart: DIR ("." if none), BASE (the file name) and STEM (BASE without
 * ".json", or an earlier version's ".safetensors"), the prefix of every name the checkpoint uses
 * besides BASE and config.json. */
typedef struct CkptNames {
    char dir[4096], base[1024], stem[1024];
} CkptNames;

static int names_of(const char *path, CkptNames *n, char *err, size_t errlen) {
    const char *slash = strrchr(path, '/');
    const char *base = slash ? slash + 1 : path;
    int dl = slash == path ? 1 : slash ? (int)(slash - path) : 0;
    if (strlen(path) >= sizeof n->dir || strlen(base) + 64 >= sizeof n->base)
        return errmsg(err, errlen, "%s: path too long", path);
    if (slash) snprintf(n->dir, sizeof n->dir, "%.*s", dl, path);
    else snprintf(n->dir, sizeof n->dir, ".");
    snprintf(n->base, sizeof n->base, "%s", base);
    size_t len = strlen(base), cut = len;
    static const char *const exts[] = { ".safetensors", ".json" };
    for (int i = 0; i < 2; i++) {
        size_t k = strlen(exts[i]);
        if (len > k && strcmp(base + len - k, exts[i]) == 0) cut = len - k;
    }
    snprintf(n->stem, sizeof n->stem, "%.*s", (int)cut, base);
    return 0;
}

static void join(char *out, size_t outlen, const char *dir, const char *name) {
    snprintf(out, outlen, "%s/%s", dir, name);
}

void ckpt_opt_path(const char *path, char *out, size_t outlen) {
    const char *ext = ".safetensors";
    size_t n = strlen(path), k = strlen(ext);
    if (n >= k && strcmp(path + n - k, ext) == 0)
        snprintf(out, outlen, "%.*s.opt.safetensors", (int)(n - k), path);
    else
        snprintf(out, outlen, "%s.opt.safetensors", path);
}

/* Is name STEM.opt.STEP.HASH.safetensors (STEP decimal, HASH 16 hex digits)? */
static int is_opt_name(const char *name, const char *stem) {
    size_t k = strlen(stem);
    if (strncmp(name, stem, k) != 0 || strncmp(name + k, ".opt.", 5) != 0) return 0;
    const char *p = name + k + 5, *q = p;
    while (*q >= '0' && *q <= '9') q++;
    if (q == p || *q != '.') return 0;
    p = ++q;
    while ((*q >= '0' && *q <= '9') || (*q >= 'a' && *q <= 'f')) q++;
    return q - p == 16 && strcmp(q, ".safetensors") == 0;
}

/* Is name STEM.shard.STEP.RANK.HASH.safetensors (STEP, RANK decimal, HASH 16 hex digits)? */
static int is_shard_name(const char *name, const char *stem) {
    size_t k = strlen(stem);
    if (strncmp(name, stem, k) != 0 || strncmp(name + k, ".shard.", 7) != 0) return 0;
    const char *q = name + k + 7;
    for (int field = 0; field < 2; field++) {
        const char *p = q;
        while (*q >= '0' && *q <= '9') q++;
        if (q == p || *q != '.') return 0;
        q++;
    }
    const char *p = q;
    while ((*q >= '0' && *q <= '9') || (*q >= 'a' && *q <= 'f')) q++;
    return q - p == 16 && strcmp(q, ".safetensors") == 0;
}

/* Is name STEM.STEP.json (STEP decimal), the manifest of a checkpoint --keep keeps? Its step in
 * *step (if not NULL). */
static int is_kept_name(const char *name, const char *stem, long *step) {
    size_t k = strlen(stem);
    if (strncmp(name, stem, k) != 0 || name[k] != '.') return 0;
    const char *p = name + k + 1, *q = p;
    while (*q >= '0' && *q <= '9') q++;
    if (q == p || q - p > 18 || strcmp(q, ".json") != 0) return 0;
    if (step) *step = strtol(p, NULL, 10);
    return 1;
}

/* May a manifest named STEM (its file name without ".json") name shard file? One of STEM's, or,
 * of a kept manifest STEM = S.STEP, one of S's: a plain name in its folder, never a path. */
static int shard_of_stem(const char *file, const char *stem) {
    if (is_shard_name(file, stem)) return 1;
    const char *dot = strrchr(stem, '.');
    if (!dot || !dot[1] || strspn(dot + 1, "0123456789") != strlen(dot + 1)) return 0;
    char base[1024];
    snprintf(base, sizeof base, "%.*s", (int)(dot - stem), stem);
    return is_shard_name(file, base);
}

/* Is name a temporary of ours (BASE, config.json, a shard, a kept manifest or an optimizer file, then ".tmp.PID") left by
 * a save that is no longer running? A live process's own temporaries are left alone. */
static int is_stale_tmp(const char *name, const CkptNames *n) {
    const char *t = strstr(name, ".tmp.");
    if (!t) return 0;
    const char *d = t + 5;
    char *end;
    errno = 0;
    long pid = strtol(d, &end, 10);
    if (end == d || *end || errno || pid <= 0) return 0;
    char target[1100];
    snprintf(target, sizeof target, "%.*s", (int)(t - name), name);
    if (strcmp(target, n->base) != 0 && strcmp(target, "config.json") != 0 && !is_opt_name(target, n->stem) &&
        !is_shard_name(target, n->stem) && !is_kept_name(target, n->stem, NULL))
        return 0;
    return pid == (long)getpid() || (kill((pid_t)pid, 0) != 0 && errno == ESRCH);
}

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

/* ---- files ---------------------------------------------------------------------------------- */

/* fsync of a directory, so that a rename in it survives a crash. Some file systems refuse it. */
static int fsync_dir(const char *dir) {
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) return -1;
    int rc = fsync(fd);
    if (rc != 0 && (errno == EINVAL || errno == EROFS)) rc = 0;
    close(fd);
    return rc;
}

/* Writes text to path atomically: PATH.tmp.PID, fsync, rename, fsync of the directory. */
static int write_text_atomic(const char *path, const char *dir, const char *text, char *err, size_t errlen) {
    char tmp[4200];
    if ((size_t)snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid()) >= sizeof tmp)
        return errmsg(err, errlen, "%s: path too long", path);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) return errmsg(err, errlen, "%s: cannot create %s: %s", path, tmp, strerror(errno));
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
        return errmsg(err, errlen, "%s: cannot write: %s", path, strerror(saved));
    }
    if (fsync_dir(dir) != 0) return errmsg(err, errlen, "%s: fsync of the directory failed: %s", path, strerror(errno));
    return 0;
}

/* Removes, in DIR, the temporaries of crashed saves and, once a commit names the shards keep[0..
 * nkeep), the shards of this checkpoint that it does not name. keep NULL: temporaries only.
 * Failures are ignored: what is left is removed by the next save. */
static void remove_leftovers(const CkptNames *n, const char *const *keep, int nkeep) {
    DIR *d = opendir(n->dir);
    if (!d) return;
    struct dirent *e;
    char path[5200];
    while ((e = readdir(d))) {
        int stale = is_stale_tmp(e->d_name, n);
        if (keep && !stale && is_shard_name(e->d_name, n->stem)) {
            stale = 1;
            for (int i = 0; i < nkeep && stale; i++) stale = strcmp(e->d_name, keep[i]) != 0;
        }
        if (!stale) continue;
        join(path, sizeof path, n->dir, e->d_name);
        unlink(path);
    }
    closedir(d);
}

/* ---- config.json ---------------------------------------------------------------------------- */
/* The keys of the config.json wpgen writes (before it marked its files). */
static const char *const config_keys[] = {
    "architectures", "model_type", "hidden_size", "intermediate_size", "num_hidden_layers",
    "num_attention_heads", "num_key_value_heads", "head_dim", "hidden_act", "max_position_embeddings",
    "rms_norm_eps", "rope_theta", "tie_word_embeddings", "vocab_size", "attention_bias", "mlp_bias",
    "torch_dtype", NULL,
};

/* Did wpgen write this config.json? Marked so, or exactly the keys earlier versions wrote. */
static int config_is_ours(const json_t *o) {
    if (!json_is_object(o)) return 0;
    const char *w = json_string_value(json_object_get(o, "written_by"));
    if (w) return strcmp(w, WRITTEN_BY) == 0;
    size_t n = 0;
    for (; config_keys[n]; n++)
        if (!json_object_get(o, config_keys[n])) return 0;
    return json_object_size(o) == n;
}

/* DIR/config.json may be written: absent, or a file wpgen wrote. */
static int check_config(const char *cfgpath, const char *path, char *err, size_t errlen) {
    struct stat st;
    if (lstat(cfgpath, &st) != 0) {
        if (errno == ENOENT) return 0;
        return errmsg(err, errlen, "%s: %s", cfgpath, strerror(errno));
    }
    json_error_t je;
    json_t *o = S_ISREG(st.st_mode) ? json_load_file(cfgpath, 0, &je) : NULL;
    int ours = config_is_ours(o);
    json_decref(o);
    if (!ours)
        return errmsg(err, errlen, "%s: %s exists and was not written by wpgen (the model's own config.json?): "
                      "a checkpoint there would replace it; save into another directory", path, cfgpath);
    return 0;
}

int ckpt_lock(const char *path, char *err, size_t errlen) {
    CkptNames n;
    char lockpath[5200];
    if (names_of(path, &n, err, errlen)) return -1;
    snprintf(lockpath, sizeof lockpath, "%s/%s.lock", n.dir, n.stem);
    int fd = open(lockpath, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0) return errmsg(err, errlen, "%s: cannot lock it (%s): %s", path, lockpath, strerror(errno));
    /* a POSIX record lock: the kernel names its holder (F_GETLK), so the file stays empty and a
     * checkpoint's folder holds the same bytes whoever saved it; it ends with the process */
    struct flock fl = { .l_type = F_WRLCK, .l_whence = SEEK_SET };
    if (fcntl(fd, F_SETLK, &fl) == 0) return 0;   /* fd stays open: held until the process ends */
    int e = errno;
    struct flock who = { .l_type = F_WRLCK, .l_whence = SEEK_SET };
    long pid = fcntl(fd, F_GETLK, &who) == 0 && who.l_type != F_UNLCK ? (long)who.l_pid : 0;
    close(fd);
    if (e != EACCES && e != EAGAIN) return errmsg(err, errlen, "%s: cannot lock it (%s): %s", path, lockpath, strerror(e));
    char holder[48] = "";
    if (pid > 0) snprintf(holder, sizeof holder, " (pid %ld)", pid);
    return errmsg(err, errlen, "%s: another run%s is saving this checkpoint (its lock %s): two runs saving one "
                  "checkpoint would replace each other's; save into another file", path, holder, lockpath);
}

/* The shape a config.json wpgen wrote describes, compared with c: 1 if it is another model. */
static int config_is_other_model(const char *cfgpath, const WpConfig *c, char *what, size_t whatlen) {
    FILE *f = fopen(cfgpath, "rb");
    if (!f) return 0;
    char text[8192];
    size_t k = fread(text, 1, sizeof text - 1, f);
    fclose(f);
    text[k] = 0;
    WpConfig o;
    char err[512];
    if (model_config_parse(cfgpath, text, k, &o, err, sizeof err)) return 0;
    if (model_same(&o, c)) return 0;
    snprintf(what, whatlen, "hidden_size %d, %d layers, %d heads (%d kv), intermediate_size %d, vocab_size %d", o.hidden,
             o.layers, o.heads, o.kv_heads, o.ffn, o.vocab);
    return 1;
}

/* One folder, one model: transformers loads DIR with DIR/config.json, and a second model's
 * checkpoint beside the first would make the first one unloadable. 0, or -1 with err set. */
static int check_same_model(const char *path, const char *cfgpath, const WpConfig *c, char *err, size_t errlen) {
    char other[256];
    if (config_is_other_model(cfgpath, c, other, sizeof other))
        return errmsg(err, errlen, "%s: %s describes another model (%s), whose checkpoint is in that folder; save this one "
                      "into a folder of its own", path, cfgpath, other);
    return 0;
}

int ckpt_claim(const char *path, const WpConfig *c, char *err, size_t errlen) {
    CkptNames n;
    char cfgpath[4200];
    if (names_of(path, &n, err, errlen)) return -1;
    join(cfgpath, sizeof cfgpath, n.dir, "config.json");
    if (check_same_model(path, cfgpath, c, err, errlen)) return -1;
    return ckpt_lock(path, err, errlen);
}

int ckpt_write_config(const char *path, const WpConfig *c, char *err, size_t errlen) {
    CkptNames n;
    char cfgpath[4200];
    if (names_of(path, &n, err, errlen)) return -1;
    join(cfgpath, sizeof cfgpath, n.dir, "config.json");
    if (check_config(cfgpath, path, err, errlen)) return -1;
    if (check_same_model(path, cfgpath, c, err, errlen)) return -1;
    char *text = model_config_text(c, WRITTEN_BY);
    if (!text) return errmsg(err, errlen, "%s: out of memory", cfgpath);
    /* Unchanged (the usual case: the same model saved again): not rewritten. */
    size_t len = strlen(text);
    char *old = malloc(len + 2);
    FILE *f = old ? fopen(cfgpath, "rb") : NULL;
    size_t got = f ? fread(old, 1, len + 1, f) : 0;
    if (f) fclose(f);
    int same = f && got == len && memcmp(old, text, len) == 0;
    free(old);
    int rc = same ? 0 : write_text_atomic(cfgpath, n.dir, text, err, errlen);
    free(text);
    return rc;
}

/* ---- the manifest: the training state -------------------------------------------------------- */

#define MANIFEST_FORMAT "wpgen-checkpoint"
#define MANIFEST_VERSION 1
#define SHARD_FORMAT "wpgen-shard"

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
static json_t *state_to_json(const WpTrainState *st) {
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
static int state_from_json(const json_t *o, const char *path, WpTrainState *st, char *err, size_t errlen) {
    memset(st, 0, sizeof *st);
    for (int i = 0; i < NSTATE_FIELDS; i++) {
        const struct StateField *f = &state_fields[i];
        const char *s = json_string_value(json_object_get(o, f->key));
        if (!s && f->optional && !json_object_get(o, f->key)) continue;
        uint64_t max = f->kind == FIELD_U64 ? UINT64_MAX : f->kind == FIELD_LONG ? (uint64_t)LONG_MAX : (uint64_t)INT32_MAX;
        char *end = NULL;
        errno = 0;
        unsigned long long x = s && *s >= '0' && *s <= '9' ? strtoull(s, &end, 10) : 0;
        if (!end || *end || errno || x > max)
            return errmsg(err, errlen, "%s: state.%s: expected a decimal string in [0, %" PRIu64 "], got %s", path, f->key,
                          max, s ? s : "none");
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
            return errmsg(err, errlen, "%s: state.tokenizer: expected \"sha256:\" and 16 hex digits, \"bytes\" or \"\"",
                          path);
        snprintf(st->tokenizer, sizeof st->tokenizer, "%s", t);
        st->tokenizer_known = 1;
    }
    if (tn) {
        const char *t = json_string_value(tn);
        if (!t || json_string_length(tn) >= sizeof st->tokenizer_name || strlen(t) != json_string_length(tn))
            return errmsg(err, errlen, "%s: state.tokenizer_name: expected a string of at most %zu bytes", path,
                          sizeof st->tokenizer_name - 1);
        snprintf(st->tokenizer_name, sizeof st->tokenizer_name, "%s", t);
    }
    return 0;
}

/* The manifest at path, parsed and checked to be ours (format, version); NULL with err set. */
static json_t *manifest_open(const char *path, char *err, size_t errlen) {
    json_error_t je;
    json_t *root = json_load_file(path, 0, &je);
    if (!root) {
        errmsg(err, errlen, "%s: not a checkpoint manifest: %s (line %d)", path, je.text, je.line);
        return NULL;
    }
    const char *fmt = json_string_value(json_object_get(root, "format"));
    json_t *ver = json_object_get(root, "version");
    if (!fmt || strcmp(fmt, MANIFEST_FORMAT) != 0) {
        errmsg(err, errlen, "%s: format: expected \"%s\" (a checkpoint manifest written by wpgen)", path, MANIFEST_FORMAT);
        json_decref(root);
        return NULL;
    }
    if (!json_is_integer(ver) || json_integer_value(ver) != MANIFEST_VERSION) {
        errmsg(err, errlen, "%s: version: expected %d (written by another wpgen version?)", path, MANIFEST_VERSION);
        json_decref(root);
        return NULL;
    }
    return root;
}

/* Does path hold a manifest (a JSON object) rather than a safetensors file? Its first byte says. */
static int is_manifest(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) return 0;
    int ch;
    while ((ch = fgetc(f)) == ' ' || ch == '\n' || ch == '\t' || ch == '\r') {}
    fclose(f);
    return ch == '{';
}

/* ---- shards ---------------------------------------------------------------------------------- */

/* The chunk's tensors as checkpoints keep them, malloc'd; NULL on failure. A tied model's mirror
 * of the embedding (wp_chunk_mirrors_embedding: its last chunk's lm_head.weight, the last tensor)
 * is not among them: the embedding is saved once, as Hugging Face saves a tied model, and a load
 * fills the mirror from it (fill_mirror). */
static WpTensor *chunk_tensors(const WpConfig *c, const WpChunk *k, int *n) {
    *n = wp_chunk_tensors(c, k, NULL);
    WpTensor *t = calloc((size_t)(*n > 0 ? *n : 1), sizeof *t);
    if (t) wp_chunk_tensors(c, k, t);
    if (wp_chunk_mirrors_embedding(c, k)) (*n)--;
    return t;
}

/* A loaded array of every chunk (weights or one AdamW moment): the mirror, if the last chunk has
 * one, takes the embedding's values (the first chunk's first V*H), as training keeps them equal. */
static void fill_mirror(const WpConfig *c, const WpChunk *chunks, int nchunks, float *const *arrays) {
    const WpChunk *last = &chunks[nchunks - 1];
    if (!arrays || !wp_chunk_mirrors_embedding(c, last)) return;
    size_t vh = (size_t)c->vocab * c->hidden;
    memcpy(arrays[nchunks - 1] + last->nparams - vh, arrays[0], vh * sizeof(float));
}

static int tensor_shape(const WpTensor *t, size_t *shape) {
    shape[0] = t->rows;
    shape[1] = t->cols;
    return t->cols == 1 ? 1 : 2;
}

/* The part of tensor t (of a chunk) inside the chunk's floats [off, off + n): 1, its first
 * element in the tensor's flattening, its length, and where it starts in the range; 0 if none. */
static int slice_of(const WpTensor *t, size_t off, size_t n, size_t *start, size_t *count, size_t *at) {
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
static const char *const shard_suffix[3] = { "", ".exp_avg", ".exp_avg_sq" };

void ckpt_shard_path(const char *path, long step, int rank, uint64_t hash, char *out, size_t outlen) {
    CkptNames n;
    char err[256];
    if (names_of(path, &n, err, sizeof err)) { snprintf(out, outlen, "%s", path); return; }
    snprintf(out, outlen, "%s/%s.shard.%ld.%d.%016" PRIx64 ".safetensors", n.dir, n.stem, step, rank, hash);
}

int ckpt_write_shard(const char *path, const WpConfig *c, const WpChunk *chunks, const WpCkptRange *ranges,
                     int nranges, float *const *w, float *const *m, float *const *v, const WpTrainState *st,
                     int rank, uint64_t *hash, int *created, char *err, size_t errlen) {
    char file[5400];
    *created = 0;
    WpStWriter *wr = wp_st_writer_new();
    json_t *slices = json_object(), *state = state_to_json(st);
    char *state_text = state ? json_dumps(state, JSON_COMPACT | JSON_PRESERVE_ORDER) : NULL;
    int rc = wr && slices && state_text ? 0 : errmsg(err, errlen, "%s: out of memory for its shard", path);
    /* the name's hash covers everything the file holds: the same name, the same bytes */
    uint64_t h = state_text ? hash_bytes((uint64_t)rank, state_text, strlen(state_text)) : 0;
    for (int i = 0; i < nranges && rc == 0; i++) {
        const WpCkptRange *r = &ranges[i];
        int nt;
        WpTensor *ts = chunk_tensors(c, &chunks[r->chunk], &nt);
        if (!ts) { rc = errmsg(err, errlen, "%s: out of memory for its shard", path); break; }
        for (int j = 0; j < nt && rc == 0; j++) {
            size_t start, count, at, shape[2];
            if (!slice_of(&ts[j], r->offset, r->n, &start, &count, &at)) continue;
            int nd = tensor_shape(&ts[j], shape);
            json_t *sl = nd == 2 ? json_pack("{sIs[II]}", "offset", (json_int_t)start, "shape", (json_int_t)shape[0], (json_int_t)shape[1])
                                 : json_pack("{sIs[I]}", "offset", (json_int_t)start, "shape", (json_int_t)shape[0]);
            if (!sl || json_object_set_new(slices, ts[j].name, sl)) { rc = errmsg(err, errlen, "%s: out of memory", path); break; }
            h = hash_bytes(h, ts[j].name, strlen(ts[j].name) + 1);
            h = hash_bytes(h, &start, sizeof start);
            float *const src[3] = { w[i] + at, m ? m[i] + at : NULL, v ? v[i] + at : NULL };
            for (int q = 0; q < 3 && rc == 0; q++) {
                if (!src[q]) continue;
                char name[160];
                snprintf(name, sizeof name, "%s%s", ts[j].name, shard_suffix[q]);
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

/* ---- which shard holds which slice --------------------------------------------------------- */

typedef struct Piece { int shard; size_t offset, count; } Piece;

static int cmp_piece(const void *a, const void *b) {
    size_t x = ((const Piece *)a)->offset, y = ((const Piece *)b)->offset;
    return (x > y) - (x < y);
}

/* The slices of tensor `name` (numel elements) in the manifest's shards, sorted by offset into
 * out (room for one per shard): they must cover the tensor exactly once. How many, or -1 with err
 * set. The commit checks a new manifest with it and loading an old one. */
static int tensor_pieces(const json_t *shards, const char *name, size_t numel, Piece *out, const char *path,
                         char *err, size_t errlen) {
    int n = 0;
    for (size_t i = 0; i < json_array_size(shards); i++) {
        json_t *sl = json_object_get(json_object_get(json_array_get(shards, i), "slices"), name);
        if (!sl) continue;
        json_t *o = json_array_get(sl, 0), *k = json_array_get(sl, 1);
        if (json_array_size(sl) != 2 || !json_is_integer(o) || !json_is_integer(k) || json_integer_value(o) < 0 ||
            json_integer_value(k) <= 0)
            return errmsg(err, errlen, "%s: shards[%zu].slices.%s: expected [offset, count], count > 0", path, i, name);
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

/* ---- saving --------------------------------------------------------------------------------- */

/* A manifest wpgen wrote, at path? */
static int manifest_is_ours(const char *path) {
    if (!is_manifest(path)) return 0;
    json_t *root = manifest_open(path, NULL, 0);
    const char *w = json_string_value(json_object_get(root, "written_by"));
    int ours = w && strcmp(w, WRITTEN_BY) == 0;
    json_decref(root);
    return ours;
}

/* ---- whose checkpoint: the run id ------------------------------------------------------------
 * Every manifest a run writes records the run's id ("run": 16 hex digits; WpTrainState.run), and
 * a save replaces or prunes only manifests of its own run: two runs saving STEM in one folder (one
 * after the other: the lock keeps them from doing so at once) never replace or delete each
 * other's kept steps. A resume goes on with the id of the checkpoint it resumes. */

/* The run id of the manifest root: 0 where it records none (an earlier version), or -1 with
 * err set where "run" is not 16 hex digits. */
static int manifest_run(const json_t *root, const char *path, uint64_t *run, char *err, size_t errlen) {
    const json_t *r = json_object_get(root, "run");
    const char *s = json_string_value(r);
    *run = 0;
    if (!r) return 0;
    if (!s || strlen(s) != 16 || strspn(s, "0123456789abcdef") != 16)
        return errmsg(err, errlen, "%s: run: expected the run's id, 16 hex digits, got %s", path, s ? s : "no string");
    *run = strtoull(s, NULL, 16);
    return 0;
}

/* Of a manifest wpgen wrote at path: 1 and its run id (0: none, or not one) and step, else 0. */
static int manifest_owner(const char *path, uint64_t *run, long *step) {
    char err[512];
    WpTrainState st;
    *run = 0;
    if (!is_manifest(path)) return 0;
    json_t *root = manifest_open(path, NULL, 0);
    const char *w = json_string_value(json_object_get(root, "written_by"));
    int ours = w && strcmp(w, WRITTEN_BY) == 0;
    if (ours && manifest_run(root, path, run, err, sizeof err)) *run = 0;   /* no run's provably: its shards stay */
    *step = ours && state_from_json(json_object_get(root, "state"), path, &st, err, sizeof err) == 0 ? st.step : -1;
    json_decref(root);
    return ours;
}

static int same_file(const char *a, const char *b) {
    struct stat x, y;
    return a && b && stat(a, &x) == 0 && stat(b, &y) == 0 && x.st_dev == y.st_dev && x.st_ino == y.st_ino;
}

int ckpt_check_owner(const char *path, uint64_t run, long start, const char *from, char *err, size_t errlen) {
    CkptNames n;
    if (names_of(path, &n, err, errlen)) return -1;
    uint64_t r;
    long s;
    /* PATH: this run's, or the checkpoint it goes on from (--resume) or starts from (--init) */
    if (manifest_owner(path, &r, &s) && r != run && !same_file(path, from)) {
        char whose[64] = "saved by an earlier version";
        if (r) snprintf(whose, sizeof whose, "run %016" PRIx64, r);
        return errmsg(err, errlen, "%s holds the checkpoint of another run (step %ld, %s): a %s does not replace it: "
                      "save into a new path, or --resume %s to go on with that run", path, s, whose,
                      from ? "run from another checkpoint" : "new run", path);
    }
    /* the kept steps this run could write (past its start) */
    DIR *d = opendir(n.dir);
    struct dirent *e;
    int rc = 0;
    while (d && rc == 0 && (e = readdir(d))) {
        long step;
        char file[5400];
        if (!is_kept_name(e->d_name, n.stem, &step) || step <= start) continue;
        join(file, sizeof file, n.dir, e->d_name);
        if (manifest_owner(file, &r, &s) && r == run) continue;
        rc = errmsg(err, errlen, "%s: %s is the checkpoint of step %ld of another run%s, a name this run's saves "
                    "take (--keep keeps each step as %s.STEP.json): save into a new path", path, file, step,
                    access(file, F_OK) == 0 && !manifest_is_ours(file) ? " (or a file not written by wpgen)" : "", n.stem);
    }
    if (d) closedir(d);
    return rc;
}

int ckpt_output_clash(const char *path, const char *out, char *what, size_t whatlen) {
    CkptNames n, o;
    char err[256], a[PATH_MAX], b[PATH_MAX];
    if (names_of(path, &n, err, sizeof err) || names_of(out, &o, err, sizeof err)) return 0;
    long step;
    /* by name: out in the checkpoint's folder (however spelled) under one of its names */
    if (realpath(n.dir, a) && realpath(o.dir, b) && !strcmp(a, b)) {
        if (is_kept_name(o.base, n.stem, &step))
            return snprintf(what, whatlen, "its checkpoint of step %ld: --keep keeps each step as %s.STEP.json", step,
                            n.stem), 1;
        if (is_shard_name(o.base, n.stem)) return snprintf(what, whatlen, "a shard's name"), 1;
        char lock[1100];
        snprintf(lock, sizeof lock, "%s.lock", n.stem);
        if (!strcmp(o.base, lock)) return snprintf(what, whatlen, "its lock"), 1;
    }
    /* by identity: out is (a link to) one of the files of the checkpoint there now */
    DIR *d = opendir(n.dir);
    struct dirent *e;
    int hit = 0;
    while (d && !hit && (e = readdir(d))) {
        char file[5400];
        if (!is_kept_name(e->d_name, n.stem, NULL) && !is_shard_name(e->d_name, n.stem) &&
            !(strlen(e->d_name) == strlen(n.stem) + 5 && !strncmp(e->d_name, n.stem, strlen(n.stem)) &&
              !strcmp(e->d_name + strlen(n.stem), ".lock")))
            continue;
        join(file, sizeof file, n.dir, e->d_name);
        if (same_file(file, out)) {
            snprintf(what, whatlen, "the same file as %s", file);
            hit = 1;
        }
    }
    if (d) closedir(d);
    return hit;
}

int ckpt_check_save(const char *path, char *err, size_t errlen) {
    CkptNames n;
    if (names_of(path, &n, err, errlen)) return -1;
    if (!n.base[0] || !strcmp(n.base, ".") || !strcmp(n.base, ".."))
        return errmsg(err, errlen, "%s: expected the manifest's path, such as %s/checkpoint.json", path,
                      n.base[0] ? path : n.dir);
    size_t len = strlen(n.base), k = strlen(".safetensors");
    if (len >= k && strcmp(n.base + len - k, ".safetensors") == 0)
        return errmsg(err, errlen, "%s: a checkpoint is a manifest with its shards beside it, not a safetensors file: "
                      "expected a path such as %s/checkpoint.json (one of an earlier version still loads with --resume)",
                      path, n.dir);
    if (strcmp(n.base, "config.json") == 0)
        return errmsg(err, errlen, "%s: config.json is the model's shape beside the checkpoint: name the manifest "
                      "otherwise, such as %s/checkpoint.json", path, n.dir);
    struct stat st;
    if (stat(n.dir, &st) != 0) return errmsg(err, errlen, "%s: directory %s: %s", path, n.dir, strerror(errno));
    if (!S_ISDIR(st.st_mode)) return errmsg(err, errlen, "%s: directory %s: %s", path, n.dir, strerror(ENOTDIR));
    if (access(n.dir, W_OK) != 0) return errmsg(err, errlen, "%s: directory %s: %s", path, n.dir, strerror(errno));
    if (stat(path, &st) == 0) {
        if (S_ISDIR(st.st_mode))
            return errmsg(err, errlen, "%s is a directory, not a checkpoint file: give the manifest's path, such as "
                          "%s/checkpoint.json", path, path);
        if (!S_ISREG(st.st_mode))
            return errmsg(err, errlen, "%s exists and is not a regular file (a device? a pipe?): refusing to replace it", path);
        if (!manifest_is_ours(path))
            return errmsg(err, errlen, "%s exists and is not a checkpoint manifest written by wpgen: refusing to replace "
                          "it (remove it or save elsewhere)", path);
    } else if (errno != ENOENT) {
        return errmsg(err, errlen, "%s: %s", path, strerror(errno));
    }
    char cfgpath[4200];
    join(cfgpath, sizeof cfgpath, n.dir, "config.json");
    return check_config(cfgpath, path, err, errlen);
}

/* The manifest of a save: the state, the model's tensors, each shard's file and slices. Checks
 * that the shards cover every tensor once. NULL with err set. */
static json_t *manifest_build(const char *path, const WpConfig *c, const WpChunk *chunks, int nchunks,
                              const WpCkptShard *shards, int nshards, const WpTrainState *st, int with_optimizer,
                              char *err, size_t errlen) {
    WpChunk whole = wp_chunk_make(c, 0, 0, c->layers, 1, 1);
    int nt;
    WpTensor *ts = chunk_tensors(c, &whole, &nt);
    json_t *root = json_object(), *tensors = json_object(), *arr = json_array();
    int bad = !ts || !root || !tensors || !arr;
    if (!bad) {
        bad |= json_object_set_new(root, "format", json_string(MANIFEST_FORMAT));
        bad |= json_object_set_new(root, "version", json_integer(MANIFEST_VERSION));
        bad |= json_object_set_new(root, "written_by", json_string(WRITTEN_BY));
        bad |= json_object_set_new(root, "state", state_to_json(st));
        if (st->run) {
            char run[24];
            snprintf(run, sizeof run, "%016" PRIx64, st->run);
            bad |= json_object_set_new(root, "run", json_string(run));
        }
        if (with_optimizer) bad |= json_object_set_new(root, "optimizer", json_string("adamw"));
        for (int i = 0; i < nt && !bad; i++) {
            size_t shape[2];
            int nd = tensor_shape(&ts[i], shape);
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
            WpTensor *cts = chunk_tensors(c, &chunks[r->chunk], &n);
            bad |= !cts;
            for (int j = 0; j < n && !bad; j++) {
                size_t start, count, at;
                if (slice_of(&cts[j], r->offset, r->n, &start, &count, &at))
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
        if (tensor_pieces(arr, ts[i].name, ts[i].rows * ts[i].cols, pieces, path, err, errlen) < 0) rc = -1;
    free(pieces);
    free(ts);
    json_decref(tensors);
    json_decref(arr);
    if (rc) { json_decref(root); return NULL; }
    return root;
}

/* A kept manifest in DIR: its name, step, and whether it is this run's. */
typedef struct Kept { char name[1100]; long step; int mine; } Kept;

static int cmp_kept_newest(const void *a, const void *b) {
    long x = ((const Kept *)a)->step, y = ((const Kept *)b)->step;
    return (x < y) - (x > y);
}

/* After a commit of step `step` at path: of the kept manifests of run `run` (STEM.STEP.json), the
 * newest keep - 1 besides this step's stay (keep > 1; with keep 0, all, every one stays; with keep
 * 1 none is written and those there are left alone); another run's all stay. The shards of this
 * checkpoint that no manifest left names go, with the temporaries of dead processes. Failures are
 * ignored: the next save retries. */
static void prune(const CkptNames *n, const char *path, int keep, long step, uint64_t run) {
    Kept *kept = NULL;
    size_t nk = 0, cap = 0;
    DIR *d = opendir(n->dir);
    struct dirent *e;
    char file[5400];
    while (d && (e = readdir(d))) {
        long s, at;
        uint64_t r;
        if (!is_kept_name(e->d_name, n->stem, &s)) continue;
        join(file, sizeof file, n->dir, e->d_name);
        if (!manifest_owner(file, &r, &at)) continue;
        if (nk == cap) {
            Kept *k2 = realloc(kept, (cap = cap ? 2 * cap : 16) * sizeof *kept);
            if (!k2) { free(kept); closedir(d); return; }
            kept = k2;
        }
        snprintf(kept[nk].name, sizeof kept[nk].name, "%s", e->d_name);
        kept[nk].mine = r == run;
        kept[nk++].step = s;
    }
    if (d) closedir(d);
    if (nk > 1) qsort(kept, nk, sizeof *kept, cmp_kept_newest);
    size_t left = 0, others = 0;
    for (size_t i = 0; i < nk; i++) {
        int stays = !kept[i].mine || keep <= 1 || kept[i].step == step || ++others < (size_t)keep;
        join(file, sizeof file, n->dir, kept[i].name);
        if (stays) kept[left++] = kept[i];
        else unlink(file);
    }
    /* the shards the manifests left name */
    char **names = NULL;
    int nnames = 0;
    for (size_t i = 0; i <= left; i++) {
        if (i < left) join(file, sizeof file, n->dir, kept[i].name);
        char **files = NULL;
        int nf = ckpt_input_files(i < left ? file : path, &files);
        char **grown = nf > 0 ? realloc(names, (size_t)(nnames + nf) * sizeof *names) : names;
        if (!grown) { ckpt_files_free(files, nf); ckpt_files_free(names, nnames); free(kept); return; }
        names = grown;
        for (int j = 0; j < nf; j++) {
            names[nnames++] = files[j];
            memmove(files[j], strrchr(files[j], '/') + 1, strlen(strrchr(files[j], '/') + 1) + 1);
        }
        free(files);   /* the strings moved into names */
    }
    remove_leftovers(n, (const char *const *)names, nnames);
    ckpt_files_free(names, nnames);
    free(kept);
}

int ckpt_commit(const char *path, const WpConfig *c, const WpChunk *chunks, int nchunks,
                const WpCkptShard *shards, int nshards, const WpTrainState *st, int with_optimizer, int keep,
                int *committed, char *err, size_t errlen) {
    *committed = 0;
    CkptNames n;
    if (ckpt_check_save(path, err, errlen) || names_of(path, &n, err, errlen)) return -1;
    json_t *root = manifest_build(path, c, chunks, nchunks, shards, nshards, st, with_optimizer, err, errlen);
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
        if (access(kept, F_OK) == 0 && !manifest_is_ours(kept))
            rc = errmsg(err, errlen, "%s exists and is not a checkpoint manifest written by wpgen: refusing to replace it "
                        "(--keep names the checkpoint of step %ld so)", kept, st->step);
        else if (access(kept, F_OK) == 0 && (!manifest_owner(kept, &r, &s) || r != st->run))
            rc = errmsg(err, errlen, "%s is the checkpoint of another run (run %016" PRIx64 "): refusing to replace it "
                        "(--keep names the checkpoint of step %ld so)", kept, r, st->step);
        else
            rc = write_text_atomic(kept, n.dir, text, err, errlen);
    }
    if (rc == 0) rc = write_text_atomic(path, n.dir, text, err, errlen);
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
    prune(&n, path, keep, st->step, st->run);
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

static void shape_str(const size_t *shape, int nd, char *out, size_t outlen) {
    size_t pos = (size_t)snprintf(out, outlen, "[");
    for (int d = 0; d < nd && pos < outlen; d++)
        pos += (size_t)snprintf(out + pos, outlen - pos, "%s%zu", d ? ", " : "", shape[d]);
    if (pos < outlen) snprintf(out + pos, outlen - pos, "]");
}

/* ---- loading a manifest ---------------------------------------------------------------------- */

/* The manifest's tensors are the model's, of the same shapes: else the first difference, named. */
static int manifest_check_tensors(const json_t *root, const char *path, const WpConfig *c, char *err, size_t errlen) {
    const json_t *tensors = json_object_get(root, "tensors");
    WpChunk whole = wp_chunk_make(c, 0, 0, c->layers, 1, 1);
    int nt;
    WpTensor *ts = chunk_tensors(c, &whole, &nt);
    if (!ts) return errmsg(err, errlen, "%s: out of memory", path);
    int rc = json_is_object(tensors) ? 0 : errmsg(err, errlen, "%s: tensors: expected an object of shapes", path);
    for (int i = 0; i < nt && rc == 0; i++) {
        const json_t *sh = json_object_get(tensors, ts[i].name);
        size_t want[2], got[2] = { 0, 0 };
        int wnd = tensor_shape(&ts[i], want), nd = (int)json_array_size(sh);
        if (!sh) { rc = errmsg(err, errlen, "%s: tensor %s is missing", path, ts[i].name); break; }
        for (int d = 0; d < nd && d < 2; d++) got[d] = (size_t)json_integer_value(json_array_get(sh, (size_t)d));
        if (nd != wnd || got[0] != want[0] || (nd == 2 && got[1] != want[1])) {
            /* the shape as the manifest writes it (any rank, any JSON), not as far as it was read */
            char *a = json_dumps(sh, JSON_ENCODE_ANY), b[96];
            shape_str(want, wnd, b, sizeof b);
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
static int manifest_shard_path(const json_t *root, size_t i, const char *path, char *out, size_t outlen, char *err,
                               size_t errlen) {
    CkptNames n;
    if (names_of(path, &n, err, errlen)) return -1;
    const char *file = json_string_value(json_object_get(json_array_get(json_object_get(root, "shards"), i), "file"));
    if (!file || !shard_of_stem(file, n.stem))
        return errmsg(err, errlen, "%s: shards[%zu].file: expected a name %s.shard.STEP.RANK.HASH.safetensors in its "
                      "folder, got %s", path, i, n.stem, file ? file : "none");
    join(out, outlen, n.dir, file);
    return 0;
}

static int check_moments(const char *opt, const WpChunk *chunks, int nchunks, float *const *m, float *const *v,
                         char *err, size_t errlen);

/* What a shard says of itself against what the manifest says of it, checked when a load opens
 * it (its header only: cheap whatever its size): written by wpgen, of the manifest's rank and
 * training state, and each slice the manifest names at the manifest's offset, of the manifest's
 * tensor shape. A shard of another save under the right name, or metadata edited, is refused
 * here rather than loaded into the wrong place. 0, or -1 with err naming the file. */
static int shard_check_header(const WpStFile *f, const char *file, const json_t *root, size_t s, const char *path,
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
 * shard_check_header. 0, or -1 with err naming the file. */
static int shard_check_hash(const WpStFile *f, const char *file, char *err, size_t errlen) {
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
            snprintf(full, sizeof full, "%s%s", name, shard_suffix[q]);
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

/* ckpt_load of a manifest: each tensor of each chunk asked for from the slices that hold it,
 * opening each shard once, and only those that hold some. */
static int load_manifest(const char *path, const WpConfig *c, const WpChunk *chunks, int nchunks,
                         float *const *params, float *const *m, float *const *v, WpTrainState *st, char *err,
                         size_t errlen) {
    json_t *root = manifest_open(path, err, errlen);
    if (!root) return -1;
    WpTrainState state;
    const json_t *shards = json_object_get(root, "shards");
    size_t nsh = json_array_size(shards);
    int rc = state_from_json(json_object_get(root, "state"), path, &state, err, errlen);
    if (rc == 0) rc = manifest_run(root, path, &state.run, err, errlen);
    if (rc == 0) rc = manifest_check_tensors(root, path, c, err, errlen);
    if (rc == 0 && (!json_is_array(shards) || nsh == 0)) rc = errmsg(err, errlen, "%s: shards: expected a list of files", path);
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
        WpTensor *ts = chunk_tensors(c, &chunks[k], &nt);
        if (!ts) { rc = errmsg(err, errlen, "%s: out of memory", path); break; }
        for (int i = 0; i < nt && rc == 0; i++) {
            int np = tensor_pieces(shards, ts[i].name, ts[i].rows * ts[i].cols, pieces, path, err, errlen);
            if (np < 0) { rc = -1; break; }
            for (int p = 0; p < np && rc == 0; p++) {
                char file[5400];
                size_t s = (size_t)pieces[p].shard;
                if (manifest_shard_path(root, s, path, file, sizeof file, err, errlen)) { rc = -1; break; }
                if (!open[s] && (!(open[s] = wp_st_open(file, err, errlen)) ||
                                 shard_check_header(open[s], file, root, s, path, err, errlen))) { rc = -1; break; }
                nread[s]++;
                for (int q = 0; q < (moments ? 3 : 1) && rc == 0; q++) {
                    char name[160];
                    const char *dtype;
                    size_t shape[8], bytes;
                    int nd;
                    snprintf(name, sizeof name, "%s%s", ts[i].name, shard_suffix[q]);
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
            (manifest_shard_path(root, s, path, file, sizeof file, err, errlen) ||
             shard_check_hash(open[s], file, err, errlen)))
            rc = -1;
    }
    for (int q = 0; q < (moments ? 3 : 1) && rc == 0; q++) fill_mirror(c, chunks, nchunks, dst[q]);
    if (rc == 0 && moments) rc = check_moments(path, chunks, nchunks, m, v, err, errlen);
    if (rc == 0 && st) *st = state;
    for (size_t s = 0; open && s < nsh; s++) wp_st_close(open[s]);
    free(open);
    free(pieces);
    free(nread);
    json_decref(root);
    return rc ? errmsg_one_line(err) : 0;
}

/* ---- loading -------------------------------------------------------------------------------- */

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
    fill_mirror(c, chunks, nchunks, arrays);
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
    if (names_of(path, &n, err, errlen)) return -1;
    if (name) {
        /* a plain name in the same directory, never a path: the file is not trusted further */
        if (!is_opt_name(name, n.stem))
            return errmsg(err, errlen, "%s: its metadata names the optimizer state \"%s\", not a file name wpgen "
                          "writes for this checkpoint (renamed? its optimizer files are %s.opt.STEP.HASH.safetensors)",
                          path, name, n.stem);
        join(out, outlen, n.dir, name);
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
    if (is_manifest(path)) {
        json_t *root = manifest_open(path, err, sizeof err);
        size_t nsh = json_array_size(json_object_get(root, "shards")), n = 0;
        char **out = root ? calloc(nsh ? nsh : 1, sizeof *out) : NULL;
        for (size_t i = 0; out && i < nsh; i++) {
            char file[5400];
            if (manifest_shard_path(root, i, path, file, sizeof file, err, sizeof err) == 0 && (out[n] = strdup(file))) n++;
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
    if (is_manifest(path)) {
        json_t *root = manifest_open(path, err, errlen);
        int rc = root ? state_from_json(json_object_get(root, "state"), path, st, err, errlen) : -1;
        if (rc == 0) rc = manifest_run(root, path, &st->run, err, errlen);
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
        WpTensor *ts = chunk_tensors(c, &chunks[k], &n);
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
    if (is_manifest(path)) return load_manifest(path, c, chunks, nchunks, params, m, v, st, err, errlen);
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
