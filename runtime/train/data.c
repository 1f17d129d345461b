/* Training data sources and the fixed data order of the numerical contract; see data.h. */
#include "train/data.h"
#include "common/errmsg.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

enum { SRC_BYTES, SRC_SHARD, SRC_SYNTHETIC };

/* Files are read with pread, a sequence at a time, not memory-mapped: a mapped file that shrinks
 * under the run (a shard being rewritten, a copy still in progress, a full disk) kills the job
 * with SIGBUS on the next read of a page past the end, and a file rewritten in place would hand
 * out tokens that were never checked against the vocabulary (an index out of the embedding).
 * pread reports the first as a short read, and every token is checked again as it is read; both
 * end the run with one line naming the file. One system call per sequence costs nothing next to
 * a step. */
struct WpData {
    int kind;
    int vocab;
    int seq;                      /* longest S the file was checked for */
    int fd;                       /* files; -1 for synthetic data */
    off_t base;                   /* offset of the first token */
    size_t tsize;                 /* bytes per token: 1 (bytes) or 2 (shard) */
    size_t ntokens;
    uint64_t seed;                /* SRC_SYNTHETIC */
    long origin_step;             /* data_set_origin: step origin_step reads sequence origin_seq on */
    uint64_t origin_seq;
    char path[4096];
    char about[512];
};

static int ends_with(const char *s, const char *suffix) {
    size_t n = strlen(s), k = strlen(suffix);
    return n >= k && strcmp(s + n - k, suffix) == 0;
}

void data_close(WpData *d) {
    if (!d) return;
    if (d->fd >= 0) close(d->fd);
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

/* Tokens [first, first + n) into out; 0, or -1 with why set (the file shrank, changed, or a read
 * failed). Reads through a small buffer on the stack: nothing is allocated per sequence. */
static int read_tokens(const WpData *d, uint64_t first, size_t n, int *out, char *why, size_t whylen) {
    unsigned char buf[8192];
    size_t per = sizeof buf / d->tsize;
    for (size_t done = 0; done < n;) {
        size_t k = n - done < per ? n - done : per;
        off_t off = d->base + (off_t)((first + done) * d->tsize);
        ssize_t got = read_at(d->fd, buf, k * d->tsize, off);
        if (got < 0) return errmsg(why, whylen, "read at byte %lld: %s", (long long)off, strerror(errno));
        if ((size_t)got != k * d->tsize) {
            struct stat st;
            long long now = fstat(d->fd, &st) == 0 ? (long long)st.st_size : -1;
            return errmsg(why, whylen, "the file shrank to %lld bytes during the run (token %llu was at byte %lld)",
                          now, (unsigned long long)(first + done), (long long)off);
        }
        for (size_t i = 0; i < k; i++) {
            int t;
            if (d->tsize == 2) { uint16_t u; memcpy(&u, buf + 2 * i, 2); t = u; }
            else t = buf[i];
            if (t >= d->vocab)
                return d->kind == SRC_SHARD
                    ? errmsg(why, whylen, "token %d at position %llu is not below the vocabulary size %d", t,
                             (unsigned long long)(first + done + i), d->vocab)
                    : errmsg(why, whylen, "byte %d at offset %llu is not below the vocabulary size %d (a file read "
                             "as bytes needs vocab_size >= 256)", t, (unsigned long long)(first + done + i), d->vocab);
            out[done + i] = t;
        }
        done += k;
    }
    return 0;
}

WpData *data_open(const char *path, int vocab, int seq, char *err, size_t errlen) {
    if (vocab <= 0 || seq <= 0) { errmsg(err, errlen, "%s: bad vocabulary %d or sequence %d", path, vocab, seq); return NULL; }
    WpData *d = calloc(1, sizeof *d);
    if (!d) { errmsg(err, errlen, "%s: out of memory", path); return NULL; }
    d->fd = -1;
    d->vocab = vocab;
    d->seq = seq;
    d->kind = ends_with(path, ".bin") ? SRC_SHARD : SRC_BYTES;
    d->tsize = d->kind == SRC_SHARD ? 2 : 1;
    snprintf(d->path, sizeof d->path, "%s", path);
    /* O_NONBLOCK: opening a named pipe would wait for a writer forever; it is refused below. */
    d->fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (d->fd < 0) return fail(d, err, errlen, "%s: cannot open the data: %s", path, strerror(errno));
    struct stat st;
    if (fstat(d->fd, &st) != 0) return fail(d, err, errlen, "%s: cannot open the data: %s", path, strerror(errno));
    if (!S_ISREG(st.st_mode))
        return fail(d, err, errlen, "%s: not a regular file (%s): the data must be a file that can be read at any position",
                    path, S_ISFIFO(st.st_mode) ? "a named pipe" : S_ISDIR(st.st_mode) ? "a directory" :
                    S_ISCHR(st.st_mode) || S_ISBLK(st.st_mode) ? "a device" : S_ISSOCK(st.st_mode) ? "a socket" : "not a file");
    size_t size = (size_t)st.st_size;
    /* Sequences are read in order: let the kernel read ahead. */
    posix_fadvise(d->fd, 0, 0, POSIX_FADV_SEQUENTIAL);

    if (d->kind == SRC_SHARD) {
        int32_t h[256];
        if (size < sizeof h)
            return fail(d, err, errlen, "%s: not an llm.c token shard: %zu bytes, shorter than its 1024-byte header",
                        path, size);
        ssize_t got = read_at(d->fd, h, sizeof h, 0);
        if (got != (ssize_t)sizeof h)
            return fail(d, err, errlen, "%s: cannot read the header: %s", path, got < 0 ? strerror(errno) : "the file shrank");
        if (h[0] != WP_SHARD_MAGIC)
            return fail(d, err, errlen, "%s: not an llm.c token shard: bad magic %d (expected %d)", path, h[0],
                        WP_SHARD_MAGIC);
        if (h[1] != 1)
            return fail(d, err, errlen, "%s: llm.c token shard version %d is not supported (expected 1: uint16 tokens)",
                        path, h[1]);
        if (h[2] < 0 || size != sizeof h + (size_t)h[2] * sizeof(uint16_t))
            return fail(d, err, errlen, "%s: the header says %d tokens but the file holds %zu (%zu bytes of 2-byte tokens%s)",
                        path, h[2], (size - sizeof h) / sizeof(uint16_t), size - sizeof h,
                        (size_t)h[2] * sizeof(uint16_t) > size - sizeof h ? ": truncated?" : "");
        d->base = sizeof h;
        d->ntokens = (size_t)h[2];
        snprintf(d->about, sizeof d->about, "llm.c shard %s (%zu tokens)", path, d->ntokens);
    } else {
        d->ntokens = size;
        snprintf(d->about, sizeof d->about, "bytes of %s (%zu tokens)", path, d->ntokens);
    }
    if (d->ntokens < (size_t)seq + 1)
        return fail(d, err, errlen, "%s: %zu tokens, shorter than one sequence of %d+1 tokens", path, d->ntokens, seq);
    /* Every token checked once now, so that a bad file fails at the start and not hours in. */
    if (d->kind == SRC_SHARD || vocab < 256) {
        int block[4096];
        char why[256];
        for (size_t i = 0; i < d->ntokens; i += 4096) {
            size_t k = d->ntokens - i < 4096 ? d->ntokens - i : 4096;
            if (read_tokens(d, i, k, block, why, sizeof why) != 0) return fail(d, err, errlen, "%s: %s", path, why);
        }
    }
    return d;
}

WpData *data_synthetic(uint64_t seed, int vocab) {
    if (vocab <= 0) return NULL;
    WpData *d = calloc(1, sizeof *d);
    if (!d) return NULL;
    d->kind = SRC_SYNTHETIC;
    d->fd = -1;
    d->vocab = vocab;
    d->seed = seed;
    snprintf(d->about, sizeof d->about, "synthetic tokens (seed %llu, vocabulary %d)", (unsigned long long)seed, vocab);
    return d;
}

size_t data_ntokens(const WpData *d) { return d->kind == SRC_SYNTHETIC ? 0 : d->ntokens; }
const char *data_describe(const WpData *d) { return d->about; }

void data_set_origin(WpData *d, long step, uint64_t seq) {
    d->origin_step = step;
    d->origin_seq = seq;
}

uint64_t data_seq_index(long step, int g, int M, int G, int i) {
    return ((uint64_t)step * (uint64_t)M + (uint64_t)g) * (uint64_t)G + (uint64_t)i;
}

uint64_t data_seq_start(const WpData *d, uint64_t q, int S) {
    if (d->kind == SRC_SYNTHETIC) return q * (uint64_t)S;
    /* ntokens - S starts leave room for S+1 tokens; data_open made sure there is at least one. */
    return (q % (d->ntokens - (uint64_t)S)) * (uint64_t)S % (d->ntokens - (uint64_t)S);
}

/* splitmix64: a good 64-bit mix, so that token p depends on (seed, p) alone. */
static uint64_t mix64(uint64_t x) {
    x += 0x9e3779b97f4a7c15ULL;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
    return x ^ (x >> 31);
}

static int synthetic_token(const WpData *d, uint64_t p) {
    return (int)(mix64(mix64(d->seed) ^ p) % (uint64_t)d->vocab);
}

void data_read_batch(const WpData *d, long step, int g, int M, int G, int S, int *inputs, int *targets) {
    if (d->kind != SRC_SYNTHETIC && S > d->seq) {
        /* A programming error: data_open checked the file for shorter sequences. */
        fprintf(stderr, "data_read_batch: sequence %d longer than the %d data_open checked\n", S, d->seq);
        abort();
    }
    for (int i = 0; i < G; i++) {
        uint64_t start = data_seq_start(d, d->origin_seq + data_seq_index(step - d->origin_step, g, M, G, i), S);
        int *in = inputs + (size_t)i * S, *tg = targets + (size_t)i * S;
        if (d->kind == SRC_SYNTHETIC) {
            for (int j = 0; j < S; j++) in[j] = synthetic_token(d, start + (uint64_t)j);
        } else {
            /* S+1 tokens: the inputs, then the last target (the others are the inputs moved by one). */
            char why[320];
            if (read_tokens(d, start, (size_t)S, in, why, sizeof why) != 0 ||
                read_tokens(d, start + (uint64_t)S, 1, &tg[S - 1], why, sizeof why) != 0) {
                /* The file was checked at the start: it changed under the run. Stop now rather
                 * than train on garbage; the last checkpoint is untouched. */
                fprintf(stderr, "%s: %s; stopping (the data file changed during the run)\n", d->path, why);
                exit(2);
            }
            memmove(tg, in + 1, (size_t)(S - 1) * sizeof *tg);
            continue;
        }
        tg[S - 1] = synthetic_token(d, start + (uint64_t)S);
        memmove(tg, in + 1, (size_t)(S - 1) * sizeof *tg);
    }
}
