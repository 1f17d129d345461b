/* Whose folder, whose files: what a save may write into before it writes anything. The lock of
 * the process saving (ckpt_lock), DIR/config.json (wpgen's, and of this model: one folder, one
 * model), the run id every manifest records (a run replaces or prunes only its own), the outputs
 * that would clash with the checkpoint's files, and the checks of a save's PATH (ckpt_check_save). */
#include "train/ckpt_internal.h"
#include "common/durable.h"
#include "common/errmsg.h"
#include "common/jsonfile.h"
#include "common/modelcfg.h"

#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

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
    if (ck_names_of(path, &n, err, errlen)) return -1;
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
    if (ck_names_of(path, &n, err, errlen)) return -1;
    ck_join(cfgpath, sizeof cfgpath, n.dir, "config.json");
    if (check_same_model(path, cfgpath, c, err, errlen)) return -1;
    return ckpt_lock(path, err, errlen);
}

int ckpt_write_config(const char *path, const WpConfig *c, char *err, size_t errlen) {
    CkptNames n;
    char cfgpath[4200];
    if (ck_names_of(path, &n, err, errlen)) return -1;
    ck_join(cfgpath, sizeof cfgpath, n.dir, "config.json");
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
    int rc = same ? 0 : wp_write_text_atomic(cfgpath, text, err, errlen);
    free(text);
    return rc;
}

/* A manifest wpgen wrote, at path? */
int ck_manifest_is_ours(const char *path) {
    if (!ck_is_manifest(path)) return 0;
    json_t *root = ck_manifest_open(path, NULL, 0);
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
int ck_manifest_run(const json_t *root, const char *path, uint64_t *run, char *err, size_t errlen) {
    const json_t *r = json_object_get(root, "run");
    const char *s = json_string_value(r);
    *run = 0;
    if (!r) return 0;
    if (!s || strlen(s) != 16 || strspn(s, "0123456789abcdef") != 16)
        return wp_json_expected(err, errlen, path, "run", "the run's id, 16 hex digits", r);
    *run = strtoull(s, NULL, 16);
    return 0;
}

/* Of a manifest wpgen wrote at path: 1 and its run id (0: none, or not one) and step, else 0. */
int ck_manifest_owner(const char *path, uint64_t *run, long *step) {
    char err[512];
    WpTrainState st;
    *run = 0;
    if (!ck_is_manifest(path)) return 0;
    json_t *root = ck_manifest_open(path, NULL, 0);
    const char *w = json_string_value(json_object_get(root, "written_by"));
    int ours = w && strcmp(w, WRITTEN_BY) == 0;
    if (ours && ck_manifest_run(root, path, run, err, sizeof err)) *run = 0;   /* no run's provably: its shards stay */
    *step = ours && ck_state_from_json(json_object_get(root, "state"), path, &st, err, sizeof err) == 0 ? st.step : -1;
    json_decref(root);
    return ours;
}

static int same_file(const char *a, const char *b) {
    struct stat x, y;
    return a && b && stat(a, &x) == 0 && stat(b, &y) == 0 && x.st_dev == y.st_dev && x.st_ino == y.st_ino;
}

int ckpt_check_owner(const char *path, uint64_t run, long start, const char *from, char *err, size_t errlen) {
    CkptNames n;
    if (ck_names_of(path, &n, err, errlen)) return -1;
    uint64_t r;
    long s;
    /* PATH: this run's, or the checkpoint it goes on from (--resume) or starts from (--init) */
    if (ck_manifest_owner(path, &r, &s) && r != run && !same_file(path, from)) {
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
        if (!ck_is_kept_name(e->d_name, n.stem, &step) || step <= start) continue;
        ck_join(file, sizeof file, n.dir, e->d_name);
        if (ck_manifest_owner(file, &r, &s) && r == run) continue;
        rc = errmsg(err, errlen, "%s: %s is the checkpoint of step %ld of another run%s, a name this run's saves "
                    "take (--keep keeps each step as %s.STEP.json): save into a new path", path, file, step,
                    access(file, F_OK) == 0 && !ck_manifest_is_ours(file) ? " (or a file not written by wpgen)" : "", n.stem);
    }
    if (d) closedir(d);
    return rc;
}

int ckpt_output_clash(const char *path, const char *out, char *what, size_t whatlen) {
    CkptNames n, o;
    char err[256], a[PATH_MAX], b[PATH_MAX];
    if (ck_names_of(path, &n, err, sizeof err) || ck_names_of(out, &o, err, sizeof err)) return 0;
    long step;
    /* by name: out in the checkpoint's folder (however spelled) under one of its names */
    if (realpath(n.dir, a) && realpath(o.dir, b) && !strcmp(a, b)) {
        if (ck_is_kept_name(o.base, n.stem, &step))
            return snprintf(what, whatlen, "its checkpoint of step %ld: --keep keeps each step as %s.STEP.json", step,
                            n.stem), 1;
        if (ck_is_shard_name(o.base, n.stem)) return snprintf(what, whatlen, "a shard's name"), 1;
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
        if (!ck_is_kept_name(e->d_name, n.stem, NULL) && !ck_is_shard_name(e->d_name, n.stem) &&
            !(strlen(e->d_name) == strlen(n.stem) + 5 && !strncmp(e->d_name, n.stem, strlen(n.stem)) &&
              !strcmp(e->d_name + strlen(n.stem), ".lock")))
            continue;
        ck_join(file, sizeof file, n.dir, e->d_name);
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
    if (ck_names_of(path, &n, err, errlen)) return -1;
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
        if (!ck_manifest_is_ours(path))
            return errmsg(err, errlen, "%s exists and is not a checkpoint manifest written by wpgen: refusing to replace "
                          "it (remove it or save elsewhere)", path);
    } else if (errno != ENOENT) {
        return errmsg(err, errlen, "%s: %s", path, strerror(errno));
    }
    char cfgpath[4200];
    ck_join(cfgpath, sizeof cfgpath, n.dir, "config.json");
    return check_config(cfgpath, path, err, errlen);
}
