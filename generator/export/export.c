/* wpgen export: turns a checkpoint into a folder that Hugging Face's transformers loads with
 * LlamaForCausalLM.from_pretrained: model.safetensors, or beyond --max-shard-size the shards
 * model-0000k-of-0000n.safetensors and model.safetensors.index.json (transformers' layout: a
 * shard takes tensors in order until the next would pass the limit; a tensor larger than the
 * limit is a shard of its own), in bf16 or fp32, with config.json (the checkpoint's, torch_dtype
 * set, the bos/eos ids kept), generation_config.json with those ids (special_tokens.c says where
 * they come from; a generation_config.json beside the checkpoint is copied instead) and the
 * tokenizer's files that lie beside the checkpoint.
 *
 * Bounded memory, and independent of the checkpoint's format: it reads the checkpoint only through
 * runtime/train/checkpoint.h, ckpt_load of one chunk of a few layers at a time (the embedding with
 * the first, the final norm and the head with the last), and writes each tensor as the shard's
 * writer asks for it (wp_st_add_source): at most one chunk of fp32 and one tensor in bf16 in memory.
 *
 * Nothing of the user's is replaced: -o is absent, an empty folder, or an export wpgen wrote (its
 * .wpgen-export lists every file with a hash of its content, FNV-1a as emit's manifest; a file
 * changed since, or one more, is refused by name). The export is built in DIR.tmp-PID and renamed
 * into place (exchanged with the earlier export, which is removed after), so DIR is the old
 * export or the new one, whole; Ctrl-C (SIGTERM, SIGHUP) stops it at its next tensor and removes
 * DIR.tmp-PID (util/interrupt.h). An export killed outright leaves DIR.tmp-PID with its BUILDING
 * marker: the next export to DIR removes it once process PID is gone (emit/outdir.h), and says so.
 * -o a symbolic link to a folder is that folder (emit/outdir.h, as wpgen emit). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE   /* renameat2 */
#endif
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <jansson.h>
#include "export/export.h"
#include "export/special_tokens.h"
#include "common/durable.h"
#include "emit/manifest.h"
#include "emit/outdir.h"
#include "util/interrupt.h"
#include "util/settings.h"
#include "common/config.h"
#include "common/errmsg.h"
#include "common/modelcfg.h"
#include "common/precision.h"
#include "train/checkpoint.h"
#include "train/safetensors.h"

enum { PATHLEN = 4096 };
#define OWNED ".wpgen-export"
/* In DIR.tmp-PID while it is built, removed before it is renamed into place: the proof that lets
 * a later export remove the folder of one that was killed (SIGKILL leaves no other trace). */
#define BUILDING ".wpgen-export-building"
static const char OWNED_HEADER[] = "# wpgen-export 1: HASH NAME of each file wpgen export wrote here (FNV-1a, 64 bits); "
                                   "exporting again replaces them\n";
/* floats read at once, at most (a chunk of one layer may be more, the embedding's too) */
#define READ_FLOATS ((size_t)1 << 26)

/* The files of a tokenizer (and generation settings) transformers reads beside the model. */
static const char *const tokenizer_files[] = {
    "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "tokenizer.model", "vocab.json",
    "merges.txt", "added_tokens.json", "generation_config.json", NULL,
};

/* ---- sizes ---- */

int export_parse_size(const char *s, uint64_t *out) {
    static const struct { const char *unit; uint64_t mult; } units[] = {
        { "", 1 }, { "B", 1 }, { "KB", 1000ull }, { "MB", 1000000ull }, { "GB", 1000000000ull }, { "TB", 1000000000000ull },
        { "KIB", 1ull << 10 }, { "MIB", 1ull << 20 }, { "GIB", 1ull << 30 }, { "TIB", 1ull << 40 },
    };
    /* digits only: no sign, no fraction or exponent ("1.5", "1e-9GB"), no base prefix ("0x10") */
    if (!s) return -1;
    uint64_t x = 0;
    const char *p = s;
    for (; *p >= '0' && *p <= '9'; p++) {
        if (x > (EXPORT_MAX_SHARD_MAX - (uint64_t)(*p - '0')) / 10) return -1;
        x = 10 * x + (uint64_t)(*p - '0');
    }
    if (p == s) return -1;
    char unit[8];
    size_t n = strlen(p);
    if (n >= sizeof unit) return -1;
    for (size_t i = 0; i <= n; i++) unit[i] = (char)toupper((unsigned char)p[i]);
    for (size_t u = 0; u < sizeof units / sizeof units[0]; u++)
        if (!strcmp(unit, units[u].unit)) {
            if (x > EXPORT_MAX_SHARD_MAX / units[u].mult) return -1;
            x *= units[u].mult;
            if (x < EXPORT_MAX_SHARD_MIN) return -1;
            *out = x;
            return 0;
        }
    return -1;
}

/* ---- the tensors, in the order of the files ---- */

typedef struct Entry {
    WpTensor t;
    int chunk;       /* of Reader.chunks */
    int shard;
    size_t bytes;    /* in the export's dtype */
} Entry;

/* What the shards' writers ask for their tensors' bytes (source). */
typedef struct Reader {
    const char *path;
    const WpConfig *c;
    WpChunk *chunks;
    int nchunks, cur;     /* cur: the chunk in params, -1: none */
    float *params;
    WpBf16 *conv;         /* one tensor in bf16 */
    size_t convcap;
    int bf16;
    Entry *e;
    int ne, next;         /* the entry asked for next */
    int read_failed;      /* the checkpoint could not be read: bad input */
} Reader;

static const void *source(void *ud, const char *name, size_t bytes, char *err, size_t errlen) {
    Reader *r = ud;
    if (r->next >= r->ne || strcmp(r->e[r->next].t.name, name) != 0) {
        errmsg(err, errlen, "export: %s asked for out of order", name);
        return NULL;
    }
    if (interrupt_pending()) { errmsg(err, errlen, "interrupted"); return NULL; }   /* Ctrl-C: stop, removed */
    const Entry *e = &r->e[r->next++];
    if (e->chunk != r->cur) {
        const WpChunk *k = &r->chunks[e->chunk];
        free(r->params);
        r->params = malloc((k->nparams ? k->nparams : 1) * sizeof(float));
        r->cur = -1;
        if (!r->params) { errmsg(err, errlen, "%s: out of memory for layers %d to %d (%zu floats)", r->path, k->layer0,
                                 k->layer0 + k->nlayers - 1, k->nparams); return NULL; }
        if (ckpt_load(r->path, r->c, k, 1, &r->params, NULL, NULL, NULL, err, errlen)) { r->read_failed = 1; return NULL; }
        r->cur = e->chunk;
    }
    const float *src = r->params + e->t.offset;
    size_t n = e->t.rows * e->t.cols;
    if (bytes != n * (r->bf16 ? 2 : 4)) { errmsg(err, errlen, "export: %s: %zu bytes asked, %zu elements", name, bytes, n); return NULL; }
    if (!r->bf16) return src;
    if (n > r->convcap) {
        free(r->conv);
        r->conv = malloc(n * sizeof *r->conv);
        r->convcap = r->conv ? n : 0;
        if (!r->conv) { errmsg(err, errlen, "export: out of memory for %s in bf16", name); return NULL; }
    }
    wp_f32_to_bf16_array(r->conv, src, n);
    return r->conv;
}

/* Chunks of a few layers each (at most READ_FLOATS floats, one layer at least), and every tensor
 * of the model in order with its chunk. */
static int plan_reads(const WpConfig *c, Reader *r, char *err, size_t errlen) {
    size_t per_layer = wp_layer_nparams(c);
    int per = per_layer ? (int)(READ_FLOATS / per_layer) : c->layers;
    /* a test hook: fewer layers a read, so that a small model takes the path of chunks */
    const WpSetting *hook = wp_setting_find(wpgen_settings, wpgen_nsettings, "WP_EXPORT_READ_LAYERS");
    double v;
    int given;
    if (wp_setting_number(hook, &v, &given, err, errlen) || (given && v > c->layers)) {
        r->read_failed = 1;   /* bad input */
        return errmsg(err, errlen, "WP_EXPORT_READ_LAYERS=%s: expected a number of layers from 1 to %d", wp_setting_text(hook, NULL),
                      c->layers);
    }
    if (given) per = (int)v;
    if (per < 1) per = 1;
    if (per > c->layers) per = c->layers;
    r->nchunks = (c->layers + per - 1) / per;
    r->chunks = calloc((size_t)r->nchunks, sizeof *r->chunks);
    if (!r->chunks) return errmsg(err, errlen, "out of memory");
    int total = 0;
    for (int k = 0; k < r->nchunks; k++) {
        int l0 = k * per, nl = l0 + per > c->layers ? c->layers - l0 : per;
        r->chunks[k] = wp_chunk_make(c, k, l0, nl, k == 0, k == r->nchunks - 1);
        total += wp_chunk_tensors(c, &r->chunks[k], NULL);
    }
    r->e = calloc((size_t)total, sizeof *r->e);
    WpTensor *ts = calloc((size_t)total, sizeof *ts);
    if (!r->e || !ts) { free(ts); return errmsg(err, errlen, "out of memory"); }
    for (int k = 0; k < r->nchunks; k++) {
        int n = wp_chunk_tensors(c, &r->chunks[k], ts);
        for (int i = 0; i < n; i++) {
            r->e[r->ne].t = ts[i];
            r->e[r->ne].chunk = k;
            r->e[r->ne].bytes = ts[i].rows * ts[i].cols * (r->bf16 ? 2 : 4);
            r->ne++;
        }
    }
    free(ts);
    return 0;
}

/* transformers' rule: a shard takes tensors until the next would pass max; one larger than max
 * is alone. Returns the number of shards. */
static int plan_shards(Entry *e, int ne, uint64_t max) {
    int shard = 0;
    uint64_t used = 0;
    for (int i = 0; i < ne; i++) {
        if (used > 0 && used + e[i].bytes > max) { shard++; used = 0; }
        e[i].shard = shard;
        used += e[i].bytes;
    }
    return shard + 1;
}

static void shard_name(char *out, size_t len, int k, int n) {
    if (n == 1) snprintf(out, len, "model.safetensors");
    else snprintf(out, len, "model-%05d-of-%05d.safetensors", k + 1, n);
}

/* ---- files ---- */

static int join(char *out, const char *dir, const char *name, char *err, size_t errlen) {
    if ((size_t)snprintf(out, PATHLEN, "%s/%s", dir, name) >= PATHLEN) return errmsg(err, errlen, "%s/%s: path too long", dir, name);
    return 0;
}

/* What a wp_write_new or wp_copy_new of path (from from) that failed at step says. */
static int file_error(const char *from, const char *path, const char *step, char *err, size_t errlen) {
    if (!strcmp(step, "open") || !strcmp(step, "read")) return errmsg(err, errlen, "%s: %s", from, strerror(errno));
    if (!strcmp(step, "write")) return errmsg(err, errlen, "%s: write failed: %s", path, strerror(errno));
    return errmsg(err, errlen, "%s: %s", path, strerror(errno));
}

/* text into a new file path, flushed to disk. */
static int write_text(const char *path, const char *text, char *err, size_t errlen) {
    const char *step = "";
    const void *data = text;
    size_t len = strlen(text);
    return wp_write_new(path, 1, 0644, 1, &data, &len, &step) ? file_error(NULL, path, step, err, errlen) : 0;
}

/* A copy of the regular file from into the new file to. */
static int copy_file(const char *from, const char *to, char *err, size_t errlen) {
    const char *step = "";
    return wp_copy_new(from, to, 1, 0644, &step) ? file_error(from, to, step, err, errlen) : 0;
}

/* The files an export lists (its .wpgen-export), each with its hash. */
typedef struct Owned { char (*name)[256]; uint64_t *hash; int n, cap; } Owned;

static int owned_add(Owned *o, const char *name, uint64_t h) {
    if (o->n == o->cap) {
        int cap = o->cap ? 2 * o->cap : 32;
        void *a = realloc(o->name, (size_t)cap * sizeof *o->name), *b = a ? realloc(o->hash, (size_t)cap * sizeof *o->hash) : NULL;
        if (a) o->name = a;
        if (!b) return -1;
        o->hash = b;
        o->cap = cap;
    }
    snprintf(o->name[o->n], sizeof o->name[o->n], "%s", name);
    o->hash[o->n++] = h;
    return 0;
}

static void owned_free(Owned *o) { free(o->name); free(o->hash); memset(o, 0, sizeof *o); }

/* dir's .wpgen-export, read: -1 when there is none or it is malformed. */
static int owned_read(const char *dir, Owned *o) {
    char path[PATHLEN], line[512];
    char err[64];
    if (join(path, dir, OWNED, err, sizeof err)) return -1;
    FILE *f = fopen(path, "r");
    if (!f) return -1;
    int rc = 0;
    while (rc == 0 && fgets(line, sizeof line, f)) {
        if (line[0] == '#') continue;
        unsigned long long h;
        char name[256];
        if (sscanf(line, "%16llx %255s", &h, name) != 2 || strchr(name, '/') || owned_add(o, name, h)) rc = -1;
    }
    fclose(f);
    return rc;
}

/* May -o DIR be replaced? Absent, empty, or every entry a file of its .wpgen-export as listed.
 * *exists says whether it is there. 0, or -1 with err naming what is in the way. */
static int check_out(const char *dir, int *exists, char *err, size_t errlen) {
    struct stat st;
    *exists = 0;
    if (lstat(dir, &st)) {
        if (errno == ENOENT) return 0;
        return errmsg(err, errlen, "-o %s: %s", dir, strerror(errno));
    }
    if (!S_ISDIR(st.st_mode))
        return errmsg(err, errlen, "-o %s exists and is %s, not a folder; refusing to replace it (expected a new folder, an "
                      "empty one or an earlier export)", dir, outdir_kind(dir));
    *exists = 1;
    Owned o = { 0 };
    int listed = owned_read(dir, &o) == 0;
    DIR *d = opendir(dir);
    if (!d) { owned_free(&o); return errmsg(err, errlen, "-o %s: %s", dir, strerror(errno)); }
    int rc = 0;
    struct dirent *e;
    while (rc == 0 && (e = readdir(d))) {
        const char *name = e->d_name;
        if (!strcmp(name, ".") || !strcmp(name, "..") || (listed && !strcmp(name, OWNED))) continue;
        char path[PATHLEN];
        if (join(path, dir, name, err, errlen)) { rc = -1; break; }
        int i = -1;
        for (int k = 0; k < o.n && i < 0; k++)
            if (!strcmp(o.name[k], name)) i = k;
        uint64_t h;
        if (i < 0)
            rc = errmsg(err, errlen, "-o %s: %s was not written by wpgen export; refusing to replace the folder (expected a "
                        "new folder, an empty one or an earlier export)", dir, path);
        else if (manifest_hash_file(path, &h) || h != o.hash[i])
            rc = errmsg(err, errlen, "-o %s: %s was changed after wpgen export wrote it; refusing to replace it", dir, path);
    }
    closedir(d);
    owned_free(&o);
    return rc;
}

/* Removes an export's folder: the files it lists, the list, the folder (an earlier export, proven
 * by check_out, or one being built). Quietly: what stays is named by nothing. */
static void remove_export(const char *dir, const Owned *o) {
    char path[PATHLEN], err[64];
    for (int i = 0; i < o->n; i++)
        if (join(path, dir, o->name[i], err, sizeof err) == 0) unlink(path);
    if (join(path, dir, OWNED, err, sizeof err) == 0) unlink(path);
    if (join(path, dir, BUILDING, err, sizeof err) == 0) unlink(path);
    rmdir(dir);
}

/* "DIR/NAME" resolved as far as it exists: the real path of its folder and the name. */
static int real_of(const char *path, char *out) {
    char buf[PATHLEN];
    if (realpath(path, out)) return 0;
    snprintf(buf, sizeof buf, "%s", path);
    char *slash = strrchr(buf, '/');
    const char *name = slash ? slash + 1 : buf;
    char dir[PATHLEN];
    if (slash == buf) snprintf(dir, sizeof dir, "/");
    else if (slash) snprintf(dir, sizeof dir, "%.*s", (int)(slash - buf), buf);
    else snprintf(dir, sizeof dir, ".");
    char rd[PATHLEN];
    if (!realpath(dir, rd)) return -1;
    if ((size_t)snprintf(out, PATHLEN, "%s/%s", strcmp(rd, "/") ? rd : "", name) >= PATHLEN) return -1;
    return 0;
}

/* ---- the export ---- */

/* The report's words for the ids: "bos 1 (tokenizer.json), eos 2 (config.json)". */
static void id_phrase(char *out, size_t len, const SpecialIds *ids) {
    char b[64] = "none", e[64] = "none";
    char *bt = ids->bos ? json_dumps(ids->bos, JSON_ENCODE_ANY | JSON_COMPACT) : NULL;
    char *et = ids->eos ? json_dumps(ids->eos, JSON_ENCODE_ANY | JSON_COMPACT) : NULL;
    if (bt) snprintf(b, sizeof b, "%s (%s)", bt, ids->bos_from);
    if (et) snprintf(e, sizeof e, "%s (%s)", et, ids->eos_from);
    free(bt), free(et);
    snprintf(out, len, "bos %s, eos %s", b, e);
}

/* o as a JSON file, to. */
static int write_json(json_t *o, const char *to, char *err, size_t errlen) {
    char *text = json_dumps(o, JSON_INDENT(2) | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(9));
    if (!text) return errmsg(err, errlen, "%s: out of memory", to);
    size_t n = strlen(text);
    char *nl = realloc(text, n + 2);
    if (!nl) { free(text); return errmsg(err, errlen, "%s: out of memory", to); }
    nl[n] = '\n'; nl[n + 1] = 0;
    int rc = write_text(to, nl, err, errlen);
    free(nl);
    return rc;
}

/* The special-token ids into o (where known). */
static int set_ids(json_t *o, const SpecialIds *ids) {
    return (ids->bos && json_object_set(o, "bos_token_id", ids->bos)) || (ids->eos && json_object_set(o, "eos_token_id", ids->eos));
}

/* config.json: the checkpoint's, every key as it was, torch_dtype the export's, the token ids. */
static int write_config(const char *from, const char *to, int bf16, const SpecialIds *ids, char *err, size_t errlen) {
    json_error_t je;
    json_t *o = json_load_file(from, 0, &je);
    if (!json_is_object(o)) { json_decref(o); return errmsg(err, errlen, "%s: %s", from, je.text); }
    int bad = json_object_set_new(o, "torch_dtype", json_string(bf16 ? "bfloat16" : "float32")) || set_ids(o, ids);
    int rc = bad ? errmsg(err, errlen, "%s: out of memory", to) : write_json(o, to, err, errlen);
    json_decref(o);
    return rc;
}

/* generation_config.json: the token ids, as transformers writes it for a model without sampling
 * settings of its own. */
static int write_generation_config(const char *to, const SpecialIds *ids, char *err, size_t errlen) {
    json_t *o = json_object();
    int bad = !o || set_ids(o, ids) || json_object_set_new(o, "_from_model_config", json_true());
    int rc = bad ? errmsg(err, errlen, "%s: out of memory", to) : write_json(o, to, err, errlen);
    json_decref(o);
    return rc;
}

/* model.safetensors.index.json: the total size and which shard holds each tensor. */
static int write_index(const char *path, const Entry *e, int ne, int nshards, uint64_t total, char *err, size_t errlen) {
    json_t *o = json_object(), *meta = json_object(), *map = json_object();
    int bad = !o || !meta || !map;
    bad |= json_object_set_new(meta, "total_size", json_integer((json_int_t)total));
    for (int i = 0; i < ne && !bad; i++) {
        char name[64];
        shard_name(name, sizeof name, e[i].shard, nshards);
        bad |= json_object_set_new(map, e[i].t.name, json_string(name));
    }
    bad |= json_object_set_new(o, "metadata", meta);
    bad |= json_object_set_new(o, "weight_map", map);
    char *text = bad ? NULL : json_dumps(o, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
    json_decref(o);
    if (!text) return errmsg(err, errlen, "%s: out of memory", path);
    int rc = write_text(path, text, err, errlen);
    free(text);
    return rc;
}

/* Records a file written into tmp in the list of what the export owns. */
static int own(Owned *o, const char *tmp, const char *name, char *err, size_t errlen) {
    char path[PATHLEN];
    uint64_t h;
    if (join(path, tmp, name, err, errlen)) return -1;
    if (manifest_hash_file(path, &h)) return errmsg(err, errlen, "%s: cannot read it back: %s", path, strerror(errno));
    if (owned_add(o, name, h)) return errmsg(err, errlen, "out of memory");
    return 0;
}

static int write_owned(const char *tmp, const Owned *o, char *err, size_t errlen) {
    size_t cap = sizeof OWNED_HEADER + (size_t)o->n * 300;
    char *text = malloc(cap), path[PATHLEN];
    if (!text) return errmsg(err, errlen, "out of memory");
    size_t at = (size_t)snprintf(text, cap, "%s", OWNED_HEADER);
    for (int i = 0; i < o->n; i++) at += (size_t)snprintf(text + at, cap - at, "%016llx %s\n", (unsigned long long)o->hash[i], o->name[i]);
    int rc = join(path, tmp, OWNED, err, errlen) ? -1 : write_text(path, text, err, errlen);
    free(text);
    return rc;
}

/* Everything of the export into tmp (a new folder), listed in o. */
static int build(const ExportOptions *opt, const char *model, const char *ckdir, const WpConfig *c, const SpecialIds *ids,
                 const char *tmp, Owned *o, ExportReport *rep, int *read_failed, char *err, size_t errlen) {
    Reader r = { .path = model, .c = c, .cur = -1, .bf16 = opt->bf16 };
    int rc = plan_reads(c, &r, err, errlen);
    int nshards = rc ? 0 : plan_shards(r.e, r.ne, opt->max_shard);
    uint64_t total = 0;
    for (int i = 0; i < r.ne; i++) total += r.e[i].bytes;
    char path[PATHLEN], name[64], from[PATHLEN];
    for (int s = 0, i = 0; rc == 0 && s < nshards; s++) {
        WpStWriter *w = wp_st_writer_new();
        if (!w) { rc = errmsg(err, errlen, "out of memory"); break; }
        wp_st_set_metadata(w, "format", "pt");   /* transformers refuses a file without it */
        for (; i < r.ne && r.e[i].shard == s; i++) {
            size_t shape[2] = { r.e[i].t.rows, r.e[i].t.cols };
            wp_st_add_source(w, r.e[i].t.name, opt->bf16 ? "BF16" : "F32", shape, r.e[i].t.cols == 1 ? 1 : 2, r.e[i].bytes,
                             source, &r);
        }
        shard_name(name, sizeof name, s, nshards);
        rc = join(path, tmp, name, err, errlen);
        if (rc == 0) rc = wp_st_commit(w, path, err, errlen);
        else wp_st_writer_free(w);
        if (rc == 0) rc = own(o, tmp, name, err, errlen);
    }
    if (rc == 0 && nshards > 1) {
        rc = join(path, tmp, "model.safetensors.index.json", err, errlen);
        if (rc == 0) rc = write_index(path, r.e, r.ne, nshards, total, err, errlen);
        if (rc == 0) rc = own(o, tmp, "model.safetensors.index.json", err, errlen);
    }
    if (rc == 0) rc = join(from, ckdir, "config.json", err, errlen) || join(path, tmp, "config.json", err, errlen);
    if (rc == 0) rc = write_config(from, path, opt->bf16, ids, err, errlen);
    if (rc == 0) rc = own(o, tmp, "config.json", err, errlen);
    struct stat gst;
    if (rc == 0) rc = join(from, ckdir, "generation_config.json", err, errlen) || join(path, tmp, "generation_config.json", err, errlen);
    if (rc == 0 && stat(from, &gst) && (ids->bos || ids->eos)) {   /* one beside the checkpoint is copied below */
        rc = write_generation_config(path, ids, err, errlen);
        if (rc == 0) rc = own(o, tmp, "generation_config.json", err, errlen);
    }
    int copied = 0;
    for (int k = 0; tokenizer_files[k] && rc == 0; k++) {
        struct stat st;
        rc = join(from, ckdir, tokenizer_files[k], err, errlen) || join(path, tmp, tokenizer_files[k], err, errlen);
        if (rc || stat(from, &st) || !S_ISREG(st.st_mode)) continue;
        rc = copy_file(from, path, err, errlen);
        if (rc == 0) rc = own(o, tmp, tokenizer_files[k], err, errlen);
        copied++;
    }
    if (rc == 0) rc = write_owned(tmp, o, err, errlen);
    rep->tensors = r.ne;
    rep->shards = nshards;
    rep->bytes = total;
    rep->copied = copied;
    rep->layers_per_read = r.nchunks ? r.chunks[0].nlayers : 0;
    *read_failed = r.read_failed;
    free(r.params); free(r.conv); free(r.e); free(r.chunks);
    return rc;
}

int export_checkpoint(const ExportOptions *opt, ExportReport *rep, char *err, size_t errlen) {
    memset(rep, 0, sizeof *rep);
    /* the checkpoint: its model file, the folder beside it, the model's shape from its config.json */
    char model[PATHLEN], ckdir[PATHLEN], cfgpath[PATHLEN];
    struct stat st;
    if (stat(opt->checkpoint, &st)) return errmsg(err, errlen, "%s: %s", opt->checkpoint, strerror(errno)), EXPORT_BAD_INPUT;
    if (S_ISDIR(st.st_mode)) {
        /* a folder: its checkpoint.json (the convention), else an earlier version's model file */
        if (join(model, opt->checkpoint, "checkpoint.json", err, errlen)) return EXPORT_BAD_INPUT;
        if (access(model, F_OK) && join(model, opt->checkpoint, "model.safetensors", err, errlen)) return EXPORT_BAD_INPUT;
    } else {
        snprintf(model, sizeof model, "%s", opt->checkpoint);
    }
    if (real_of(model, ckdir)) return errmsg(err, errlen, "%s: cannot resolve its folder", model), EXPORT_BAD_INPUT;
    *strrchr(ckdir, '/') = 0;
    if (!ckdir[0]) snprintf(ckdir, sizeof ckdir, "/");
    if (stat(model, &st) || !S_ISREG(st.st_mode))
        return errmsg(err, errlen, "%s: no checkpoint there (expected its manifest, DIR/checkpoint.json, or its folder)",
                      model), EXPORT_BAD_INPUT;
    if (join(cfgpath, ckdir, "config.json", err, errlen)) return EXPORT_BAD_INPUT;
    WpConfig c;
    char mname[256];
    if (stat(cfgpath, &st))
        return errmsg(err, errlen, "%s: no config.json beside the checkpoint (%s): the export reads the model's shape from it",
                      model, cfgpath), EXPORT_BAD_INPUT;
    if (model_load(cfgpath, &c, mname, sizeof mname, err, errlen)) return EXPORT_BAD_INPUT;

    /* -o: the folder it names (a link to one is that one), not the checkpoint's folder nor one
     * holding it, and free to replace */
    char out[PATHLEN], rout[PATHLEN];
    if (outdir_final(opt->out, out, sizeof out, err, errlen)) {
        char why[1024];
        snprintf(why, sizeof why, "%s", err);
        return errmsg(err, errlen, "-o %s", why), EXPORT_BAD_INPUT;
    }
    if (real_of(out, rout)) return errmsg(err, errlen, "-o %s: its folder does not exist", out), EXPORT_BAD_INPUT;
    size_t lo = strlen(rout);
    if (!strcmp(rout, ckdir) || (!strncmp(ckdir, rout, lo) && ckdir[lo] == '/'))
        return errmsg(err, errlen, "-o %s holds the checkpoint %s (an input); refusing to write there", opt->out, model),
               EXPORT_BAD_INPUT;
    int exists;
    if (check_out(out, &exists, err, errlen)) return EXPORT_BAD_INPUT;

    char tmp[PATHLEN], marker[PATHLEN];
    if (wp_tmp_path(tmp, sizeof tmp, out, WP_TMP_DASH) || join(marker, tmp, BUILDING, err, errlen))
        return errmsg(err, errlen, "-o %s: path too long", out), EXPORT_BAD_INPUT;
    /* the special-token ids, from the config or the tokenizer beside it (refused before anything is written) */
    SpecialIds ids;
    json_t *cfg = json_load_file(cfgpath, 0, NULL);
    int idrc = special_ids(ckdir, cfg, c.vocab, &ids, err, errlen);
    json_decref(cfg);
    if (idrc) return EXPORT_BAD_INPUT;
    id_phrase(rep->ids, sizeof rep->ids, &ids);
    outdir_sweep_stale(out, BUILDING, "wpgen export");
    interrupt_begin();   /* a signal from here stops the build, which is removed (util/interrupt.h) */
    if (mkdir(tmp, 0755)) {
        interrupt_end();
        special_ids_free(&ids);
        return errmsg(err, errlen, "%s: %s", tmp, strerror(errno)), EXPORT_FAILED;
    }
    Owned o = { 0 };
    int read_failed = 0;
    int rc = write_text(marker, "wpgen export is building this folder; a later export removes it once its process is gone\n",
                        err, errlen);
    if (rc == 0) rc = build(opt, model, ckdir, &c, &ids, tmp, &o, rep, &read_failed, err, errlen);
    special_ids_free(&ids);
    if (rc == 0 && unlink(marker)) rc = errmsg(err, errlen, "%s: %s", marker, strerror(errno));
    if (rc == 0 && interrupt_pending()) rc = errmsg(err, errlen, "interrupted");
    if (rc == 0) {
        wp_fsync_dir(tmp);   /* its files' names, before the rename that publishes them */
        if (!exists) {
            if (rename(tmp, out)) rc = errmsg(err, errlen, "rename %s to %s: %s", tmp, out, strerror(errno));
        } else if (renameat2(AT_FDCWD, tmp, AT_FDCWD, out, RENAME_EXCHANGE)) {
            rc = errmsg(err, errlen, "exchanging %s with the earlier export %s: %s", tmp, out, strerror(errno));
        } else {
            /* tmp is now the earlier export (or the empty folder), every file of it proven ours */
            Owned old = { 0 };
            owned_read(tmp, &old);
            remove_export(tmp, &old);
            owned_free(&old);
        }
    }
    /* a failed build (a checkpoint of another shape is found by its first read): its files are its own */
    if (rc) remove_export(tmp, &o);
    owned_free(&o);
    interrupt_end();   /* a signal that came ends wpgen now, as it would have */
    if (rc) return read_failed ? EXPORT_BAD_INPUT : EXPORT_FAILED;
    return EXPORT_OK;
}
