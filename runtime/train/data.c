/* Training data sources and the fixed data order of the numerical contract; see data.h. */
#include "train/data.h"
#include "common/errmsg.h"
#include "common/hash64.h"

#include <errno.h>
#include <fcntl.h>
#include <glob.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

enum { SRC_FILES, SRC_SYNTHETIC };
enum { FILE_BYTES, FILE_SHARD };

/* Files are read with pread, a sequence at a time, not memory-mapped: a mapped file that shrinks
 * under the run (a shard being rewritten, a copy still in progress, a full disk) kills the job
 * with SIGBUS on the next read of a page past the end, and a file rewritten in place would hand
 * out tokens that were never checked against the vocabulary (an index out of the embedding).
 * pread reports the first as a short read, and every token is checked again as it is read; both
 * end the run with one line naming the file. One system call per sequence costs nothing next to
 * a step. */
typedef struct DataFile {
    int kind;
    int fd;
    off_t base;                   /* offset of the first token */
    size_t tsize;                 /* bytes per token: 1 (bytes), 2 or 4 (shards) */
    uint64_t ntokens;
    uint64_t nseq, first_seq;     /* its sequences, and how many the files before it hold */
    uint64_t first_token;         /* tokens in the files before it */
    char *path;
} DataFile;

struct WpData {
    int kind;
    int vocab;
    int seq;                      /* the S the files were cut into sequences for */
    int shuffle;
    uint64_t seed;
    DataFile *files;
    int nfiles;
    uint64_t ntokens, nseq;
    char about[768];
    char tokenizer[24], tokenizer_name[WP_SHARD_EXT_NAME_BYTES];   /* data_tokenizer */
    long origin_step;             /* data_set_origin: step origin_step reads sequence origin_seq on */
    uint64_t origin_seq;
};

/* Bytes per token, and the header's name of it, for llm.c's two magics. */
static const struct { int32_t magic, version; size_t tsize; const char *name; } shard_kinds[] = {
    { WP_SHARD_MAGIC, 1, 2, "uint16" },
    { WP_SHARD_MAGIC_U32, 7, 4, "uint32" },
};
enum { NKINDS = sizeof shard_kinds / sizeof shard_kinds[0] };

static int ends_with(const char *s, const char *suffix) {
    size_t n = strlen(s), k = strlen(suffix);
    return n >= k && strcmp(s + n - k, suffix) == 0;
}

void data_close(WpData *d) {
    if (!d) return;
    for (int i = 0; i < d->nfiles; i++) {
        if (d->files[i].fd >= 0) close(d->files[i].fd);
        free(d->files[i].path);
    }
    free(d->files);
    free(d);
}

static WpData *fail(WpData *d, char *err, size_t errlen, const char *fmt, ...) {
    if (err && errlen) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, errlen, fmt, ap);
        va_end(ap);
    }
    data_close(d);
    return NULL;
}

/* Reads n bytes at off: 0, or the bytes actually there (short: the file ended), or -1 (errno). */
static ssize_t read_at(int fd, void *buf, size_t n, off_t off) {
    size_t done = 0;
    while (done < n) {
        ssize_t k = pread(fd, (char *)buf + done, n - done, off + (off_t)done);
        if (k < 0 && errno == EINTR) continue;
        if (k < 0) return -1;
        if (k == 0) break;
        done += (size_t)k;
    }
    return (ssize_t)done;
}

/* Tokens [first, first + n) of file f into out; 0, or -1 with why set (the file shrank, changed,
 * or a read failed). Reads through a small buffer on the stack: nothing is allocated per
 * sequence. */
static int read_tokens(const DataFile *f, int vocab, uint64_t first, size_t n, int *out, char *why, size_t whylen) {
    unsigned char buf[8192];
    size_t per = sizeof buf / f->tsize;
    for (size_t done = 0; done < n;) {
        size_t k = n - done < per ? n - done : per;
        off_t off = f->base + (off_t)((first + done) * f->tsize);
        ssize_t got = read_at(f->fd, buf, k * f->tsize, off);
        if (got < 0) return errmsg(why, whylen, "read at byte %lld: %s", (long long)off, strerror(errno));
        if ((size_t)got != k * f->tsize) {
            struct stat st;
            long long now = fstat(f->fd, &st) == 0 ? (long long)st.st_size : -1;
            return errmsg(why, whylen, "the file shrank to %lld bytes during the run (token %llu was at byte %lld)",
                          now, (unsigned long long)(first + done), (long long)off);
        }
        for (size_t i = 0; i < k; i++) {
            uint32_t t;
            if (f->tsize == 4) memcpy(&t, buf + 4 * i, 4);
            else if (f->tsize == 2) { uint16_t u; memcpy(&u, buf + 2 * i, 2); t = u; }
            else t = buf[i];
            if (t >= (uint32_t)vocab)
                return f->kind == FILE_SHARD
                    ? errmsg(why, whylen, "token %u at position %llu is not below the vocabulary size %d", t,
                             (unsigned long long)(first + done + i), vocab)
                    : errmsg(why, whylen, "byte %u at offset %llu is not below the vocabulary size %d (a file read "
                             "as bytes needs vocab_size >= 256)", t, (unsigned long long)(first + done + i), vocab);
            out[done + i] = (int)t;
        }
        done += k;
    }
    return 0;
}

/* ---- the spec: a file, a comma list, a glob, a directory ---- */

typedef struct Names { char **v; int n, cap; } Names;

static int names_add(Names *s, const char *path) {
    if (s->n == s->cap) {
        int cap = s->cap ? 2 * s->cap : 16;
        char **v = realloc(s->v, (size_t)cap * sizeof *v);
        if (!v) return -1;
        s->v = v;
        s->cap = cap;
    }
    if (!(s->v[s->n] = strdup(path))) return -1;
    s->n++;
    return 0;
}

static void names_free(Names *s) {
    for (int i = 0; i < s->n; i++) free(s->v[i]);
    free(s->v);
}

/* The files of a glob pattern, sorted (glob's order), into s: 0, or -1 with err naming it (as
 * shown: the pattern, or the directory it lists) and, where nothing matches, saying what. */
static int add_glob(Names *s, const char *pattern, const char *shown, const char *what, char *err, size_t errlen) {
    glob_t g;
    int rc = glob(pattern, GLOB_ERR, NULL, &g);
    if (rc == GLOB_NOMATCH) return errmsg(err, errlen, "%s: %s", shown, what);
    if (rc != 0) return errmsg(err, errlen, "%s: cannot list the files: %s", pattern, rc == GLOB_NOSPACE ? "out of memory" : strerror(errno));
    for (size_t i = 0; i < g.gl_pathc; i++)
        if (names_add(s, g.gl_pathv[i])) { globfree(&g); return errmsg(err, errlen, "%s: out of memory", pattern); }
    globfree(&g);
    return 0;
}

/* The flag a role's data are given by, for messages. */
static const char *const role_flag[] = { [WP_DATA_TRAIN] = "--data", [WP_DATA_VAL] = "--val-data" };

/* One item of the list: a name that exists as it is (a directory: its train-*.bin; a file), else
 * a glob, else a file (which then fails to open, naming itself). A name that exists is never read
 * as a pattern, so a file whose name holds '*', '?' or '[' can be given. */
static int add_item(Names *s, const char *item, char *err, size_t errlen) {
    struct stat st;
    int exists = stat(item, &st) == 0;
    if (!exists && strpbrk(item, "*?[")) return add_glob(s, item, item, "the pattern matches no file", err, errlen);
    if (exists && S_ISDIR(st.st_mode)) {
        /* the directory's own name escaped, so that glob reads it as it is */
        char pattern[8400];
        size_t n = 0;
        for (const char *p = item; *p && n + 2 < sizeof pattern; p++) {
            if (strchr("*?[\\", *p)) pattern[n++] = '\\';
            pattern[n++] = *p;
        }
        int k = snprintf(pattern + n, sizeof pattern - n, "/train-*.bin");
        if (k < 0 || (size_t)k >= sizeof pattern - n) return errmsg(err, errlen, "%s: the name is too long", item);
        return add_glob(s, pattern, item, "a directory without token shards (train-*.bin): give the shards, or the "
                        "directory `wpgen data` wrote", err, errlen);
    }
    return names_add(s, item) ? errmsg(err, errlen, "%s: out of memory", item) : 0;
}

/* The spec's files into s: the spec as it is when that name exists (a file or directory whose
 * name holds a comma), else each item of its comma list. */
static int expand_spec(const char *spec, const char *flag, Names *s, char *err, size_t errlen) {
    if (!*spec) return errmsg(err, errlen, "%s: expected a file, a comma list, a glob or a directory, got an empty name", flag);
    struct stat st;
    if (stat(spec, &st) == 0) return add_item(s, spec, err, errlen);
    char *copy = strdup(spec);
    if (!copy) return errmsg(err, errlen, "%s: out of memory", spec);
    int rc = 0;
    for (char *p = copy, *comma; rc == 0; p = comma + 1) {
        comma = strchr(p, ',');
        if (comma) *comma = 0;
        if (!*p) rc = errmsg(err, errlen, "%s %s: an empty name in the list", flag, spec);
        else rc = add_item(s, p, err, errlen);
        if (!comma) break;
    }
    free(copy);
    return rc;
}

static int is_shard_name(const char *path) { return ends_with(path, ".bin"); }

/* `wpgen data`'s held-out shards: DIR/val-*.bin. */
static int is_val_shard_name(const char *path) {
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    return strncmp(base, "val-", 4) == 0 && is_shard_name(base);
}

/* What the expanded names may not be, refused before a file is opened: held-out shards in the
 * training data (a glob over a `wpgen data` folder matches its val-*.bin), and token shards
 * mixed with files read as bytes (the same glob matches its tokenizer.json; ids of a tokenizer
 * and bytes are different vocabularies). Names the files. */
static int check_names(const Names *s, int role, const char *spec, char *err, size_t errlen) {
    const char *flag = role_flag[role];
    for (int i = 0; role == WP_DATA_TRAIN && i < s->n; i++)
        if (is_val_shard_name(s->v[i]))
            return errmsg(err, errlen, "%s: a held-out shard (val-*.bin, the validation split `wpgen data` writes) in --data "
                          "%s: the run would train on what it validates on; give --data the directory (its train-*.bin) "
                          "or its train-*.bin, and --val-data its val-*.bin", s->v[i], spec);
    int shards = 0, bytes = 0, first_shard = -1;
    char listed[600] = "";
    size_t at = 0;
    for (int i = 0; i < s->n; i++) {
        if (is_shard_name(s->v[i])) {
            if (!shards++) first_shard = i;
        } else if (bytes++ < 3 && at < sizeof listed) {
            at += (size_t)snprintf(listed + at, sizeof listed - at, "%s%.180s", bytes > 1 ? ", " : "", s->v[i]);
        }
    }
    if (shards && bytes)
        return errmsg(err, errlen, "%s %s: mixes token shards (%s%s) with files read as bytes, one token per byte (%s%s): one "
                      "run reads one kind of data; give the shards alone (the directory `wpgen data` wrote gives its "
                      "train-*.bin)", flag, spec, s->v[first_shard], shards > 1 ? " and others" : "", listed,
                      bytes > 3 ? " and others" : "");
    return 0;
}

/* The files a spec names, as data_open reads them (data.h). */
int data_spec_files(const char *spec, char ***files, char *err, size_t errlen) {
    Names names = { 0 };
    *files = NULL;
    if (expand_spec(spec, "--data", &names, err, errlen)) { names_free(&names); return -1; }
    *files = names.v;
    return names.n;
}

/* ---- one file ---- */

/* The tokenizer a shard records (hash and name), for checking that every shard agrees. */
typedef struct Tokenizer {
    int have;
    unsigned char hash[8];        /* as the header holds them: SHA-256's first bytes, in order */
    char hex[17];
    int vocab;
    char name[WP_SHARD_EXT_NAME_BYTES];
    const char *path;
} Tokenizer;

/* Opens f->path and reads its header: 0, or -1 with err naming the file. */
static int open_file(DataFile *f, int vocab, Tokenizer *tok, char *err, size_t errlen) {
    const char *path = f->path;
    f->kind = is_shard_name(path) ? FILE_SHARD : FILE_BYTES;
    /* O_NONBLOCK: opening a named pipe would wait for a writer forever; it is refused below. */
    f->fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (f->fd < 0) return errmsg(err, errlen, "%s: cannot open the data: %s", path, strerror(errno));
    struct stat st;
    if (fstat(f->fd, &st) != 0) return errmsg(err, errlen, "%s: cannot open the data: %s", path, strerror(errno));
    if (!S_ISREG(st.st_mode))
        return errmsg(err, errlen, "%s: not a regular file (%s): the data must be a file that can be read at any position",
                      path, S_ISFIFO(st.st_mode) ? "a named pipe" : S_ISDIR(st.st_mode) ? "a directory" :
                      S_ISCHR(st.st_mode) || S_ISBLK(st.st_mode) ? "a device" : S_ISSOCK(st.st_mode) ? "a socket" : "not a file");
    uint64_t size = (uint64_t)st.st_size;
    if (f->kind == FILE_BYTES) {
        f->tsize = 1;
        f->ntokens = size;
        return 0;
    }
    int32_t h[256];
    if (size < sizeof h)
        return errmsg(err, errlen, "%s: not a token shard: %llu bytes, shorter than its 1024-byte header", path,
                      (unsigned long long)size);
    ssize_t got = read_at(f->fd, h, sizeof h, 0);
    if (got != (ssize_t)sizeof h)
        return errmsg(err, errlen, "%s: cannot read the header: %s", path, got < 0 ? strerror(errno) : "the file shrank");
    int k = 0;
    while (k < NKINDS && h[0] != shard_kinds[k].magic) k++;
    if (k == NKINDS)
        return errmsg(err, errlen, "%s: not a token shard: bad magic %d (expected %d for uint16 tokens or %d for uint32)",
                      path, h[0], WP_SHARD_MAGIC, WP_SHARD_MAGIC_U32);
    if (h[1] != shard_kinds[k].version)
        return errmsg(err, errlen, "%s: token shard version %d is not supported (magic %d is version %d: %s tokens)", path,
                      h[1], h[0], shard_kinds[k].version, shard_kinds[k].name);
    f->tsize = shard_kinds[k].tsize;
    f->base = sizeof h;
    uint64_t body = size - sizeof h;
    if (h[2] < 0 || body != (uint64_t)h[2] * f->tsize) {
        /* the other width fits the size exactly: the header says one width, the tokens are another */
        size_t other = f->tsize == 2 ? 4 : 2;
        int fits = h[2] > 0 && body == (uint64_t)h[2] * other;
        return errmsg(err, errlen, "%s: the header says %d tokens but the file holds %llu (%llu bytes of %zu-byte tokens%s)",
                      path, h[2], (unsigned long long)(body / f->tsize), (unsigned long long)body, f->tsize,
                      fits ? ": the size is that of other-width tokens, a width the header does not say"
                           : (uint64_t)(h[2] < 0 ? 0 : h[2]) * f->tsize > body ? ": truncated?" : "");
    }
    f->ntokens = (uint64_t)h[2];
    if (h[WP_SHARD_EXT_TAG] != WP_SHARD_EXT_MAGIC) return 0;   /* llm.c's own shard */
    if (h[WP_SHARD_EXT_VERSION] != 1)
        return errmsg(err, errlen, "%s: wpgen shard fields version %d are not supported (expected 1)", path, h[WP_SHARD_EXT_VERSION]);
    if (h[WP_SHARD_EXT_WIDTH] != (int32_t)f->tsize)
        return errmsg(err, errlen, "%s: the header says %d-byte tokens but its magic %d is %s tokens: a width the header does "
                      "not say", path, h[WP_SHARD_EXT_WIDTH], h[0], shard_kinds[k].name);
    int tv = h[WP_SHARD_EXT_VOCAB];
    if (tv <= 0 || (f->tsize == 2 && tv > 65536))
        return errmsg(err, errlen, "%s: the header's vocabulary size %d is not in [1, %d]", path, tv, f->tsize == 2 ? 65536 : INT32_MAX);
    if (tv > vocab)
        return errmsg(err, errlen, "%s: the tokenizer's vocabulary (%d) exceeds the model's (vocab_size %d): tokenize for this "
                      "model, or give it vocab_size >= %d", path, tv, vocab, tv);
    char name[WP_SHARD_EXT_NAME_BYTES];
    memcpy(name, &h[WP_SHARD_EXT_NAME], sizeof name);
    name[sizeof name - 1] = 0;
    unsigned char hash[8];
    char hex[17];
    memcpy(hash, &h[WP_SHARD_EXT_HASH], sizeof hash);
    for (int i = 0; i < 8; i++) snprintf(hex + 2 * i, 3, "%02x", hash[i]);
    if (!tok->have) {
        tok->have = 1;
        memcpy(tok->hash, hash, sizeof hash);
        memcpy(tok->hex, hex, sizeof hex);
        tok->vocab = tv;
        memcpy(tok->name, name, sizeof name);
        tok->path = path;
    } else if (memcmp(tok->hash, hash, sizeof hash) || tok->vocab != tv) {
        return errmsg(err, errlen, "%s: tokenized by another tokenizer (%s %s) than %s (%s %s): one run reads one "
                      "tokenizer's ids", path, name, hex, tok->path, tok->name, tok->hex);
    }
    return 0;
}

/* ---- the order: a keyed permutation of the sequences ---- */


/* A balanced Feistel network of 4 rounds on 2h bits is a bijection of [0, 4^h) whatever its
 * round function; walking the cycle (applying it again until the value falls below n) makes it
 * one of [0, n). 4^h < 4n, so fewer than 4 rounds of walking on average: no table, O(1). */
uint64_t data_permute(uint64_t x, uint64_t n, uint64_t key) {
    if (n <= 1) return 0;
    int h = 1;
    while (h < 32 && (1ULL << (2 * h)) < n) h++;
    uint64_t mask = (1ULL << h) - 1;
    do {
        uint64_t l = x >> h, r = x & mask;
        for (int round = 0; round < 4; round++) {
            uint64_t t = l ^ (wp_splitmix64(r ^ wp_splitmix64(key + (uint64_t)round)) & mask);
            l = r;
            r = t;
        }
        x = (l << h) | r;
    } while (x >= n);
    return x;
}

/* File order's sequence of the run's sequence q. */
static uint64_t seq_of(const WpData *d, uint64_t q) {
    uint64_t epoch = q / d->nseq, pos = q % d->nseq;
    return d->shuffle ? data_permute(pos, d->nseq, wp_splitmix64(d->seed) ^ wp_splitmix64(~epoch)) : pos;
}

/* The file holding file order's sequence k (binary search over first_seq). */
static const DataFile *file_of(const WpData *d, uint64_t k) {
    int lo = 0, hi = d->nfiles - 1;
    while (lo < hi) {
        int mid = (lo + hi + 1) / 2;
        if (d->files[mid].first_seq <= k) lo = mid;
        else hi = mid - 1;
    }
    return &d->files[lo];
}

static void describe(WpData *d, const Tokenizer *tok, const char *spec) {
    int shards = 0;
    size_t tsize = 0;
    for (int i = 0; i < d->nfiles; i++) {
        shards += d->files[i].kind == FILE_SHARD;
        if (d->files[i].tsize > tsize) tsize = d->files[i].tsize;
    }
    char what[300], tk[400] = "";
    if (d->nfiles == 1) snprintf(what, sizeof what, "%s %.200s", shards ? "token shard" : "bytes of", d->files[0].path);
    else snprintf(what, sizeof what, "%d %s of %.200s", d->nfiles, shards == d->nfiles ? "shards" : "files", spec);
    if (tok->have) snprintf(tk, sizeof tk, ", tokenizer %.200s %s", tok->name, tok->hex);
    snprintf(d->about, sizeof d->about, "%s (%llu tokens%s%s, %llu sequences an epoch, %s)", what,
             (unsigned long long)d->ntokens, shards ? (tsize == 4 ? ", uint32" : ", uint16") : "", tk,
             (unsigned long long)d->nseq, d->shuffle ? "shuffled each epoch by the seed" : "in order");
}

static WpData *open_spec(int role, const char *spec, int vocab, int seq, int shuffle, uint64_t seed, char *err,
                         size_t errlen);

WpData *data_open(int role, const char *spec, int vocab, int seq, int shuffle, uint64_t seed, char *err, size_t errlen) {
    WpData *d = open_spec(role, spec, vocab, seq, shuffle, seed, err, errlen);
    if (!d) errmsg_one_line(err);   /* the spec, a file's name, a tokenizer's may hold a newline */
    return d;
}

static WpData *open_spec(int role, const char *spec, int vocab, int seq, int shuffle, uint64_t seed, char *err,
                         size_t errlen) {
    if (vocab <= 0 || seq <= 0 || (role != WP_DATA_TRAIN && role != WP_DATA_VAL)) {
        errmsg(err, errlen, "%s: bad vocabulary %d, sequence %d or role %d", spec, vocab, seq, role);
        return NULL;
    }
    WpData *d = calloc(1, sizeof *d);
    if (!d) { errmsg(err, errlen, "%s: out of memory", spec); return NULL; }
    d->kind = SRC_FILES;
    d->vocab = vocab;
    d->seq = seq;
    d->shuffle = shuffle;
    d->seed = seed;
    Names names = { 0 };
    if (expand_spec(spec, role_flag[role], &names, err, errlen) || check_names(&names, role, spec, err, errlen)) {
        names_free(&names);
        data_close(d);
        return NULL;
    }
    d->files = calloc(names.n > 0 ? (size_t)names.n : 1, sizeof *d->files);
    if (!d->files) { names_free(&names); return fail(d, err, errlen, "%s: out of memory", spec); }
    for (int i = 0; i < names.n; i++) {
        d->files[i].fd = -1;
        d->files[i].path = names.v[i];   /* the file owns its name now */
        names.v[i] = NULL;
    }
    d->nfiles = names.n;
    names_free(&names);
    Tokenizer tok = { 0 };
    for (int i = 0; i < d->nfiles; i++) {
        DataFile *f = &d->files[i];
        if (open_file(f, vocab, &tok, err, errlen)) {   /* err says why */
            data_close(d);
            return NULL;
        }
        f->nseq = f->ntokens ? (f->ntokens - 1) / (uint64_t)seq : 0;
        f->first_seq = d->nseq;
        f->first_token = d->ntokens;
        d->nseq += f->nseq;
        d->ntokens += f->ntokens;
        /* Every token checked once now, so that a bad file fails at the start and not hours in:
         * one read of the data (bytes need none where every byte is below the vocabulary). */
        if (f->kind == FILE_SHARD || vocab < 256) {
            int block[4096];
            char why[256];
            for (uint64_t t = 0; t < f->ntokens; t += 4096) {
                size_t k = f->ntokens - t < 4096 ? (size_t)(f->ntokens - t) : 4096;
                if (read_tokens(f, vocab, t, k, block, why, sizeof why) != 0) return fail(d, err, errlen, "%s: %s", f->path, why);
            }
        }
        /* In order, the sequences are read one after another: let the kernel read ahead then. */
        posix_fadvise(f->fd, 0, 0, shuffle ? POSIX_FADV_RANDOM : POSIX_FADV_SEQUENTIAL);
    }
    /* A shard shorter than a sequence (a corpus's last) adds none; the data needs one. */
    if (d->nseq == 0)
        return d->nfiles == 1
            ? fail(d, err, errlen, "%s: %llu tokens, shorter than one sequence of %d+1 tokens", d->files[0].path,
                   (unsigned long long)d->ntokens, seq)
            : fail(d, err, errlen, "%s: %d files, none of them as long as one sequence of %d+1 tokens", spec, d->nfiles, seq);
    describe(d, &tok, spec);
    if (tok.have) {
        snprintf(d->tokenizer, sizeof d->tokenizer, "sha256:%s", tok.hex);
        memcpy(d->tokenizer_name, tok.name, sizeof d->tokenizer_name);
    } else if (d->files[0].kind == FILE_BYTES) {
        snprintf(d->tokenizer, sizeof d->tokenizer, "bytes");   /* check_names: all of them bytes */
    }
    return d;
}

WpData *data_synthetic(uint64_t seed, int vocab) {
    if (vocab <= 0) return NULL;
    WpData *d = calloc(1, sizeof *d);
    if (!d) return NULL;
    d->kind = SRC_SYNTHETIC;
    d->vocab = vocab;
    d->seed = seed;
    snprintf(d->about, sizeof d->about, "synthetic tokens (seed %llu, vocabulary %d)", (unsigned long long)seed, vocab);
    return d;
}

size_t data_ntokens(const WpData *d) { return d->kind == SRC_SYNTHETIC ? 0 : (size_t)d->ntokens; }
uint64_t data_nseq(const WpData *d) { return d->kind == SRC_SYNTHETIC ? 0 : d->nseq; }
const char *data_describe(const WpData *d) { return d->about; }
const char *data_tokenizer(const WpData *d) { return d->tokenizer; }
const char *data_tokenizer_name(const WpData *d) { return d->tokenizer_name; }

void data_set_origin(WpData *d, long step, uint64_t seq) {
    d->origin_step = step;
    d->origin_seq = seq;
}

uint64_t data_seq_index(long step, int g, int M, int G, int i) {
    return ((uint64_t)step * (uint64_t)M + (uint64_t)g) * (uint64_t)G + (uint64_t)i;
}

static void check_seq(const WpData *d, int S) {
    if (d->kind != SRC_SYNTHETIC && S != d->seq) {
        /* A programming error: data_open cut the files into sequences of another length. */
        fprintf(stderr, "data: sequence %d read from data opened for %d\n", S, d->seq);
        abort();
    }
}

uint64_t data_seq_start(const WpData *d, uint64_t q, int S) {
    if (d->kind == SRC_SYNTHETIC) return q * (uint64_t)S;
    check_seq(d, S);
    uint64_t k = seq_of(d, q);
    const DataFile *f = file_of(d, k);
    return f->first_token + (k - f->first_seq) * (uint64_t)S;
}

static int synthetic_token(const WpData *d, uint64_t p) {
    return (int)(wp_splitmix64(wp_splitmix64(d->seed) ^ p) % (uint64_t)d->vocab);
}

void data_read_batch(const WpData *d, long step, int g, int M, int G, int S, int *inputs, int *targets) {
    check_seq(d, S);
    for (int i = 0; i < G; i++) {
        uint64_t q = d->origin_seq + data_seq_index(step - d->origin_step, g, M, G, i);
        int *in = inputs + (size_t)i * S, *tg = targets + (size_t)i * S;
        if (d->kind == SRC_SYNTHETIC) {
            uint64_t start = q * (uint64_t)S;
            for (int j = 0; j < S; j++) in[j] = synthetic_token(d, start + (uint64_t)j);
            tg[S - 1] = synthetic_token(d, start + (uint64_t)S);
        } else {
            uint64_t k = seq_of(d, q);
            const DataFile *f = file_of(d, k);
            uint64_t start = (k - f->first_seq) * (uint64_t)S;
            /* S+1 tokens: the inputs, then the last target (the others are the inputs moved by one). */
            char why[320];
            if (read_tokens(f, d->vocab, start, (size_t)S, in, why, sizeof why) != 0 ||
                read_tokens(f, d->vocab, start + (uint64_t)S, 1, &tg[S - 1], why, sizeof why) != 0) {
                /* The file was checked at the start: it changed under the run. Stop now rather
                 * than train on garbage; the last checkpoint is untouched. */
                fprintf(stderr, "%s: %s; stopping (the data file changed during the run)\n", f->path, why);
                exit(2);
            }
        }
        memmove(tg, in + 1, (size_t)(S - 1) * sizeof *tg);
    }
}
