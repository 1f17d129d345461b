/* Checkpoints in Hugging Face's format plus the optimizer state, committed as one unit by the
 * rename of the model file; see checkpoint.h for the layout and the guarantees. */
#include "train/checkpoint.h"
#include "common/errmsg.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <math.h>
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
 * ".safetensors"), the prefix of every name the checkpoint uses besides BASE and config.json. */
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
    size_t len = strlen(base), k = strlen(".safetensors");
    snprintf(n->stem, sizeof n->stem, "%.*s", (int)(len > k && strcmp(base + len - k, ".safetensors") == 0 ? len - k : len), base);
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

/* Is name a temporary of ours (BASE, config.json or an optimizer file, then ".tmp.PID") left by
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
    if (strcmp(target, n->base) != 0 && strcmp(target, "config.json") != 0 && !is_opt_name(target, n->stem)) return 0;
    return pid == (long)getpid() || (kill((pid_t)pid, 0) != 0 && errno == ESRCH);
}

/* ---- content hash ------------------------------------------------------------------------- */

/* The optimizer file is named by a hash of its content, so that the model file's reference to
 * it is also a check: whatever file has that name holds that state. And a save repeated with the
 * same state writes the same names, as every other output of wpgen is reproducible. */
static uint64_t mix64(uint64_t x) {
    x += 0x9e3779b97f4a7c15ULL;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
    return x ^ (x >> 31);
}

static uint64_t hash_bytes(uint64_t h, const void *data, size_t n) {
    const unsigned char *p = data;
    for (; n >= 8; p += 8, n -= 8) {
        uint64_t w;
        memcpy(&w, p, 8);
        h = (h ^ w) * 0x100000001b3ULL;
        h ^= h >> 29;
    }
    uint64_t w = 0;
    memcpy(&w, p, n);
    return mix64(h ^ w ^ ((uint64_t)n << 56));
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

/* Removes, in DIR, the temporaries of crashed saves and (once a commit names keep) the optimizer
 * files of this checkpoint that nothing names any more, including an earlier version's
 * STEM.opt.safetensors. keep NULL: temporaries only. Failures are ignored: what is left is
 * removed by the next save. */
static void remove_leftovers(const CkptNames *n, const char *keep) {
    DIR *d = opendir(n->dir);
    if (!d) return;
    struct dirent *e;
    char legacy[1100], path[5200];
    snprintf(legacy, sizeof legacy, "%s.opt.safetensors", n->stem);
    while ((e = readdir(d))) {
        int stale = is_stale_tmp(e->d_name, n);
        if (keep && !stale) {
            if (is_opt_name(e->d_name, n->stem)) stale = strcmp(e->d_name, keep) != 0;
            else if (strcmp(e->d_name, legacy) == 0) {
                /* ours only if it says so */
                join(path, sizeof path, n->dir, e->d_name);
                WpStFile *f = wp_st_open(path, NULL, 0);
                const char *fmt = f ? wp_st_metadata(f, "format") : NULL;
                stale = fmt && strcmp(fmt, "wpgen-adamw") == 0;
                wp_st_close(f);
            }
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

/* ---- saving --------------------------------------------------------------------------------- */

/* A model file wpgen wrote: marked so, or (earlier versions) one with a step in its metadata. */
static int model_is_ours(const WpStFile *f) {
    const char *w = wp_st_metadata(f, "written_by"), *fmt = wp_st_metadata(f, "format");
    if (w) return strcmp(w, WRITTEN_BY) == 0;
    return fmt && strcmp(fmt, "pt") == 0 && wp_st_metadata(f, "step") != NULL;
}

int ckpt_check_save(const char *path, char *err, size_t errlen) {
    CkptNames n;
    if (names_of(path, &n, err, errlen)) return -1;
    if (!n.base[0] || !strcmp(n.base, ".") || !strcmp(n.base, ".."))
        return errmsg(err, errlen, "%s: expected the model file's path, such as %s/model.safetensors", path,
                      n.base[0] ? path : n.dir);
    struct stat st;
    if (stat(n.dir, &st) != 0) return errmsg(err, errlen, "%s: directory %s: %s", path, n.dir, strerror(errno));
    if (!S_ISDIR(st.st_mode)) return errmsg(err, errlen, "%s: directory %s: %s", path, n.dir, strerror(ENOTDIR));
    if (access(n.dir, W_OK) != 0) return errmsg(err, errlen, "%s: directory %s: %s", path, n.dir, strerror(errno));
    if (stat(path, &st) == 0) {
        if (S_ISDIR(st.st_mode))
            return errmsg(err, errlen, "%s is a directory, not a checkpoint file: give the model file's path, such as "
                          "%s/model.safetensors", path, path);
        if (!S_ISREG(st.st_mode))
            return errmsg(err, errlen, "%s exists and is not a regular file (a device? a pipe?): refusing to replace it", path);
        WpStFile *f = wp_st_open(path, NULL, 0);
        int ours = f && model_is_ours(f);
        wp_st_close(f);
        if (!ours)
            return errmsg(err, errlen, "%s exists and is not a checkpoint written by wpgen: refusing to replace it "
                          "(remove it or save elsewhere)", path);
    } else if (errno != ENOENT) {
        return errmsg(err, errlen, "%s: %s", path, strerror(errno));
    }
    char cfgpath[4200];
    join(cfgpath, sizeof cfgpath, n.dir, "config.json");
    return check_config(cfgpath, path, err, errlen);
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

/* Does the model file at path name opt as its optimizer state (i.e. was that save committed)? */
static int names_opt(const char *path, const char *opt) {
    WpStFile *f = wp_st_open(path, NULL, 0);
    const char *o = f ? wp_st_metadata(f, "optimizer") : NULL;
    int yes = o && strcmp(o, opt) == 0;
    wp_st_close(f);
    return yes;
}

int ckpt_save(const char *path, const WpConfig *c, const WpChunk *chunks, int nchunks,
              float *const *params, float *const *m, float *const *v, const WpTrainState *st,
              char *err, size_t errlen) {
    char num[32], e2[512], optname[1200] = "", optpath[5300] = "";
    CkptNames n;
    if (m && v && !st) return errmsg(err, errlen, "%s: saving the optimizer needs the training state", path);
    if (ckpt_check_save(path, err, errlen) || names_of(path, &n, err, errlen)) return -1;
    remove_leftovers(&n, NULL);
    int opt_existed = 0;
    if (m && v) {
        /* 1. The optimizer state, under a new name of its own: nothing of the previous
         *    checkpoint is touched. */
        WpStWriter *w = wp_st_writer_new();
        if (!w) return errmsg(err, errlen, "%s: out of memory", path);
        if (add_chunks(w, c, chunks, nchunks, m, ".exp_avg", e2, sizeof e2) != 0 ||
            add_chunks(w, c, chunks, nchunks, v, ".exp_avg_sq", e2, sizeof e2) != 0) {
            wp_st_writer_free(w);
            return errmsg(err, errlen, "%s: %s", path, e2);
        }
        uint64_t h = 0;
        for (int k = 0; k < nchunks; k++) {
            h = hash_bytes(h, m[k], chunks[k].nparams * sizeof(float));
            h = hash_bytes(h, v[k], chunks[k].nparams * sizeof(float));
        }
        const char *keys[] = { "step", "seed", "data_seq", "micro_batches", "micro_batch_size", "seq" };
        uint64_t vals[] = { (uint64_t)st->step, st->seed, st->data_seq, (uint64_t)st->micro_batches,
                            (uint64_t)st->micro_batch_size, (uint64_t)st->seq };
        wp_st_set_metadata(w, "format", "wpgen-adamw");
        for (int i = 0; i < 6; i++) {
            snprintf(num, sizeof num, "%" PRIu64, vals[i]);
            wp_st_set_metadata(w, keys[i], num);
            h = hash_bytes(h, num, strlen(num) + 1);
        }
        for (int i = 0; i < wp_adamw_nsettings; i++) {
            if (!(st->adamw_known & (1u << i))) continue;
            char val[64];
            adamw_setting_format(&st->adamw, &wp_adamw_settings[i], 1, val, sizeof val);
            wp_st_set_metadata(w, wp_adamw_settings[i].key, val);
            h = hash_bytes(h, val, strlen(val) + 1);
        }
        snprintf(optname, sizeof optname, "%s.opt.%ld.%016" PRIx64 ".safetensors", n.stem, st->step, h);
        join(optpath, sizeof optpath, n.dir, optname);
        opt_existed = access(optpath, F_OK) == 0;   /* the same state saved before: same bytes */
        if (wp_st_commit(w, optpath, err, errlen) != 0) return -1;
    }
    /* 2. config.json, rewritten only if the model's shape changed. */
    if (ckpt_write_config(path, c, err, errlen) != 0) goto undo;
    /* 3. The model file, naming the optimizer file; its rename over path is the commit. */
    WpStWriter *w = wp_st_writer_new();
    if (!w) { errmsg(err, errlen, "%s: out of memory", path); goto undo; }
    if (add_chunks(w, c, chunks, nchunks, params, "", e2, sizeof e2) != 0) {
        errmsg(err, errlen, "%s: %s", path, e2);
        wp_st_writer_free(w);
        goto undo;
    }
    /* transformers refuses safetensors files whose format is not one it knows. */
    wp_st_set_metadata(w, "format", "pt");
    wp_st_set_metadata(w, "written_by", WRITTEN_BY);
    if (st) {
        snprintf(num, sizeof num, "%ld", st->step);
        wp_st_set_metadata(w, "step", num);
    }
    if (optname[0]) wp_st_set_metadata(w, "optimizer", optname);
    if (wp_st_commit(w, path, err, errlen) != 0) {
        /* Committed all the same (only the directory's fsync failed)? Then keep everything. */
        if (optname[0] && names_opt(path, optname)) return -1;
        goto undo;
    }
    /* 4. Committed: what the previous checkpoint had and this one does not name goes. */
    remove_leftovers(&n, optname[0] ? optname : "");
    return 0;
undo:
    if (optname[0] && !opt_existed) unlink(optpath);
    return -1;
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
        st->step = (long)step;
        st->seed = seed;
        st->data_seq = seq;
        st->micro_batches = (int)mb;
        st->micro_batch_size = (int)mbs;
        st->seq = (int)s;
    }
    return 0;
}

int ckpt_optimizer_file(const char *path, char *out, size_t outlen) {
    char err[512];
    WpStFile *f = wp_st_open(path, err, sizeof err);
    if (!f) return -1;
    int rc = opt_path_of(f, path, out, outlen, err, sizeof err);
    wp_st_close(f);
    return rc;
}

int ckpt_read_state(const char *path, WpTrainState *st, char *err, size_t errlen) {
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
