/* Training data sources and the fixed data order of the numerical contract; see data.h. */
#include "train/data.h"
#include "common/errmsg.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

enum { SRC_BYTES, SRC_SHARD, SRC_SYNTHETIC };

struct WpData {
    int kind;
    int vocab;
    int seq;                      /* longest S the file was checked for */
    void *map;                    /* the whole file */
    size_t mapsize;
    const unsigned char *bytes;   /* SRC_BYTES */
    const uint16_t *tokens;       /* SRC_SHARD */
    size_t ntokens;
    uint64_t seed;                /* SRC_SYNTHETIC */
    char about[512];
};

static int ends_with(const char *s, const char *suffix) {
    size_t n = strlen(s), k = strlen(suffix);
    return n >= k && strcmp(s + n - k, suffix) == 0;
}

void data_close(WpData *d) {
    if (!d) return;
    if (d->map) munmap(d->map, d->mapsize);
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

WpData *data_open(const char *path, int vocab, int seq, char *err, size_t errlen) {
    if (vocab <= 0 || seq <= 0) { errmsg(err, errlen, "%s: bad vocabulary %d or sequence %d", path, vocab, seq); return NULL; }
    WpData *d = calloc(1, sizeof *d);
    if (!d) { errmsg(err, errlen, "%s: out of memory", path); return NULL; }
    d->vocab = vocab;
    d->seq = seq;
    d->kind = ends_with(path, ".bin") ? SRC_SHARD : SRC_BYTES;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return fail(d, err, errlen, "%s: cannot open the data: %s", path, strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        return fail(d, err, errlen, "%s: not a regular file", path);
    }
    d->mapsize = (size_t)st.st_size;
    if (d->mapsize > 0) {
        d->map = mmap(NULL, d->mapsize, PROT_READ, MAP_PRIVATE, fd, 0);
        if (d->map == MAP_FAILED) {
            d->map = NULL;
            int e = errno;
            close(fd);
            return fail(d, err, errlen, "%s: mmap: %s", path, strerror(e));
        }
        /* Sequences are read in order: let the kernel read ahead. */
        madvise(d->map, d->mapsize, MADV_SEQUENTIAL);
    }
    close(fd);

    if (d->kind == SRC_SHARD) {
        if (d->mapsize < 256 * sizeof(int32_t))
            return fail(d, err, errlen, "%s: not an llm.c token shard: %zu bytes, shorter than its 1024-byte header",
                        path, d->mapsize);
        int32_t h[256];
        memcpy(h, d->map, sizeof h);
        if (h[0] != WP_SHARD_MAGIC)
            return fail(d, err, errlen, "%s: not an llm.c token shard: bad magic %d (expected %d)", path, h[0],
                        WP_SHARD_MAGIC);
        if (h[1] != 1)
            return fail(d, err, errlen, "%s: llm.c token shard version %d is not supported (expected 1: uint16 tokens)",
                        path, h[1]);
        if (h[2] < 0 || d->mapsize != sizeof h + (size_t)h[2] * sizeof(uint16_t))
            return fail(d, err, errlen, "%s: the header says %d tokens but the file has %zu bytes of tokens (truncated?)",
                        path, h[2], d->mapsize - sizeof h);
        d->tokens = (const uint16_t *)((const char *)d->map + sizeof h);
        d->ntokens = (size_t)h[2];
        for (size_t i = 0; i < d->ntokens; i++)
            if (d->tokens[i] >= vocab)
                return fail(d, err, errlen, "%s: token %u at position %zu is not below the vocabulary size %d",
                            path, d->tokens[i], i, vocab);
        snprintf(d->about, sizeof d->about, "llm.c shard %s (%zu tokens)", path, d->ntokens);
    } else {
        d->bytes = d->map;
        d->ntokens = d->mapsize;
        if (vocab < 256)
            for (size_t i = 0; i < d->ntokens; i++)
                if (d->bytes[i] >= vocab)
                    return fail(d, err, errlen,
                                "%s: byte %u at offset %zu is not below the vocabulary size %d (a file read as bytes needs vocab_size >= 256)",
                                path, d->bytes[i], i, vocab);
        snprintf(d->about, sizeof d->about, "bytes of %s (%zu tokens)", path, d->ntokens);
    }
    if (d->ntokens < (size_t)seq + 1)
        return fail(d, err, errlen, "%s: %zu tokens, shorter than one sequence of %d+1 tokens", path, d->ntokens, seq);
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

size_t data_ntokens(const WpData *d) { return d->kind == SRC_SYNTHETIC ? 0 : d->ntokens; }
const char *data_describe(const WpData *d) { return d->about; }

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

static int token_at(const WpData *d, uint64_t p) {
    switch (d->kind) {
    case SRC_BYTES: return d->bytes[p];
    case SRC_SHARD: return d->tokens[p];
    default: return (int)(mix64(mix64(d->seed) ^ p) % (uint64_t)d->vocab);
    }
}

void data_read_batch(const WpData *d, long step, int g, int M, int G, int S, int *inputs, int *targets) {
    if (d->kind != SRC_SYNTHETIC && S > d->seq) {
        /* A programming error: data_open checked the file for shorter sequences. */
        fprintf(stderr, "data_read_batch: sequence %d longer than the %d data_open checked\n", S, d->seq);
        abort();
    }
    for (int i = 0; i < G; i++) {
        uint64_t start = data_seq_start(d, data_seq_index(step, g, M, G, i), S);
        int *in = inputs + (size_t)i * S, *tg = targets + (size_t)i * S;
        int prev = token_at(d, start);
        for (int j = 0; j < S; j++) {
            int next = token_at(d, start + (uint64_t)j + 1);
            in[j] = prev;
            tg[j] = next;
            prev = next;
        }
    }
}
