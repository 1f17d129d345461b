/* Data: bytes and token shards (llm.c's uint16 and uint32, wpgen's header fields), lists, globs
 * and directories of shards, the fixed position of every sequence in order and shuffled (the
 * numerical contract: a function of (seed, q) alone), synthetic tokens, and the errors a user
 * meets (short file, bad magic or version, a lying count, a width the header does not say,
 * token >= vocab, a tokenizer larger than the model, an empty list, a glob that matches nothing,
 * a directory without shards, a named pipe, a file that shrinks or changes during the run). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "check.h"
#include "tmpdir.h"
#include "train/data.h"

static void spit(const char *path, const void *data, size_t n) {
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(data, 1, n, f) != n || fclose(f) != 0) { perror(path); exit(1); }
}

static void write_header_and(const char *path, const int32_t *h, const void *tok, size_t width, int ntok) {
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(h, 4, 256, f) != 256 || fwrite(tok, width, (size_t)ntok, f) != (size_t)ntok || fclose(f) != 0) {
        perror(path);
        exit(1);
    }
}

static void write_shard(const char *path, int magic, int version, int count, const uint16_t *tok, int ntok) {
    int32_t h[256] = {0};
    h[0] = magic; h[1] = version; h[2] = count;
    write_header_and(path, h, tok, 2, ntok);
}

/* A shard as `wpgen data` writes it: llm.c's header and wpgen's fields (data.h). */
static void write_wp_shard(const char *path, int width, int header_width, int vocab, uint32_t hash, const uint32_t *tok, int ntok) {
    int32_t h[256] = {0};
    h[0] = width == 2 ? WP_SHARD_MAGIC : WP_SHARD_MAGIC_U32;
    h[1] = width == 2 ? 1 : 7;
    h[2] = ntok;
    h[WP_SHARD_EXT_TAG] = WP_SHARD_EXT_MAGIC;
    h[WP_SHARD_EXT_VERSION] = 1;
    h[WP_SHARD_EXT_VOCAB] = vocab;
    h[WP_SHARD_EXT_WIDTH] = header_width;
    h[WP_SHARD_EXT_HASH] = (int32_t)hash;
    snprintf((char *)&h[WP_SHARD_EXT_NAME], WP_SHARD_EXT_NAME_BYTES, "test-bpe");
    static uint16_t narrow[4096];
    if (width == 2)
        for (int i = 0; i < ntok; i++) narrow[i] = (uint16_t)tok[i];
    write_header_and(path, h, width == 2 ? (const void *)narrow : (const void *)tok, (size_t)width, ntok);
}

static void test_bytes(void) {
    enum { N = 1000, S = 16, G = 3, M = 4 };
    unsigned char text[N];
    for (int i = 0; i < N; i++) text[i] = (unsigned char)(i * 7 % 251);
    spit(tmp_path("text.txt"), text, N);
    char err[512] = "";
    WpData *d = data_open(WP_DATA_TRAIN, tmp_path("text.txt"), 256, S, 0, 1, err, sizeof err);
    CHECK(d != NULL, "open: %s", err);
    if (!d) return;
    CHECK(data_ntokens(d) == N, "ntokens %zu", data_ntokens(d));
    CHECK(data_nseq(d) == (N - 1) / S, "sequences an epoch %llu", (unsigned long long)data_nseq(d));
    CHECK(strstr(data_describe(d), "text.txt") != NULL, "describe: %s", data_describe(d));
    int in[G * S], tg[G * S];
    int bad = 0, wrapped = 0;
    for (long s = 0; s < 30; s++)
        for (int g = 0; g < M; g++) {
            data_read_batch(d, s, g, M, G, S, in, tg);
            for (int i = 0; i < G; i++) {
                uint64_t q = ((uint64_t)s * M + g) * G + i;
                uint64_t start = (q % ((N - 1) / S)) * S;   /* in order: the epoch starts again at 0 */
                wrapped |= q >= (N - 1) / S;
                bad += start + S >= N;
                for (int j = 0; j < S; j++) {
                    bad += in[i * S + j] != text[start + j];
                    bad += tg[i * S + j] != text[start + j + 1];
                }
            }
        }
    CHECK(bad == 0, "%d tokens not at their fixed position", bad);
    CHECK(wrapped, "the test should wrap around the file");
    /* Consecutive sequences tile the data: sequence q+1 starts where q's targets end. */
    CHECK(data_seq_start(d, 1, S) == S && data_seq_start(d, 2, S) == 2 * S, "tiling");

    /* The same step with its sequences split into micro-batches differently reads the same
     * sequences in the same order (what the contract needs for M*G fixed). */
    int a[4 * S], at[4 * S], b[4 * S], bt[4 * S];
    for (int g = 0; g < 2; g++) data_read_batch(d, 5, g, 2, 2, S, a + g * 2 * S, at + g * 2 * S);
    for (int g = 0; g < 4; g++) data_read_batch(d, 5, g, 4, 1, S, b + g * S, bt + g * S);
    CHECK(memcmp(a, b, sizeof a) == 0 && memcmp(at, bt, sizeof at) == 0, "M=2,G=2 vs M=4,G=1");
    /* Any order of reading gives the same micro-batch (ranks read independently). */
    int c1[G * S], c2[G * S], t1[G * S], t2[G * S];
    data_read_batch(d, 7, 3, M, G, S, c1, t1);
    data_read_batch(d, 2, 1, M, G, S, in, tg);
    data_read_batch(d, 7, 3, M, G, S, c2, t2);
    CHECK(memcmp(c1, c2, sizeof c1) == 0 && memcmp(t1, t2, sizeof t1) == 0, "stateless reads");
    /* A resume's origin: step 7 reads from sequence 20 on (micro-batch 1 of 2 sequences: 22, 23),
     * step 8 goes on from there; what a run without an origin reads at steps 5 and 6 of M=2 G=2. */
    data_set_origin(d, 7, 20);
    data_read_batch(d, 7, 1, 2, 2, S, a, at);
    data_read_batch(d, 8, 0, 2, 2, S, a + 2 * S, at + 2 * S);
    data_set_origin(d, 0, 0);
    data_read_batch(d, 5, 1, 2, 2, S, b, bt);   /* q = 22, 23 */
    data_read_batch(d, 6, 0, 2, 2, S, b + 2 * S, bt + 2 * S);   /* q = 24, 25 */
    CHECK(memcmp(a, b, sizeof a) == 0 && memcmp(at, bt, sizeof at) == 0, "data_set_origin");
    data_close(d);

    /* Exactly one sequence: every read is that sequence. */
    spit(tmp_path("one.txt"), text, S + 1);
    d = data_open(WP_DATA_TRAIN, tmp_path("one.txt"), 256, S, 1, 5, err, sizeof err);
    CHECK(d != NULL, "file of exactly S+1 tokens: %s", err);
    if (d) {
        data_read_batch(d, 3, 2, M, G, S, in, tg);
        int ok = 1;
        for (int i = 0; i < G; i++) ok &= in[i * S] == text[0] && tg[i * S + S - 1] == text[S];
        CHECK(ok, "single sequence");
        data_close(d);
    }
}

static void test_shard(void) {
    enum { N = 300, S = 8 };
    uint16_t tok[N];
    for (int i = 0; i < N; i++) tok[i] = (uint16_t)(50000 + i);
    write_shard(tmp_path("train.bin"), WP_SHARD_MAGIC, 1, N, tok, N);
    char err[512] = "";
    WpData *d = data_open(WP_DATA_TRAIN, tmp_path("train.bin"), 50304, S, 0, 1, err, sizeof err);
    CHECK(d != NULL, "open shard: %s", err);
    if (!d) return;
    CHECK(data_ntokens(d) == N, "shard tokens");
    CHECK(strstr(data_describe(d), "shard") != NULL, "describe: %s", data_describe(d));
    int in[2 * S], tg[2 * S];
    data_read_batch(d, 1, 1, 2, 2, S, in, tg);   /* q = 6, 7 */
    CHECK(in[0] == 50000 + 6 * S && tg[0] == 50000 + 6 * S + 1, "shard sequence 6: %d %d", in[0], tg[0]);
    CHECK(in[S] == 50000 + 7 * S && tg[2 * S - 1] == 50000 + 8 * S, "shard sequence 7");
    data_close(d);
}

static void expect_error(const char *file, int vocab, int seq, const char *needle) {
    char err[512] = "";
    WpData *d = data_open(WP_DATA_TRAIN, tmp_path(file), vocab, seq, 1, 1, err, sizeof err);
    CHECK(d == NULL, "%s: accepted", file);
    CHECK(strstr(err, file) && strstr(err, needle) && !strchr(err, '\n'), "%s: message: %s", file, err);
    data_close(d);
}

static void test_errors(void) {
    uint16_t tok[100];
    for (int i = 0; i < 100; i++) tok[i] = (uint16_t)i;
    expect_error("absent.txt", 256, 8, "No such file");
    spit(tmp_path("short.txt"), "0123456789", 10);
    expect_error("short.txt", 256, 10, "shorter than one sequence");     /* needs 11 */
    spit(tmp_path("empty.txt"), "", 0);
    expect_error("empty.txt", 256, 1, "shorter than one sequence");
    expect_error("short.txt", 40, 4, "not below the vocabulary size 40");   /* '0' = 48 */
    write_shard(tmp_path("magic.bin"), 12345, 1, 100, tok, 100);
    expect_error("magic.bin", 256, 8, "bad magic 12345 (expected 20240520 for uint16 tokens or 20240801 for uint32)");
    write_shard(tmp_path("version.bin"), WP_SHARD_MAGIC, 2, 100, tok, 100);
    expect_error("version.bin", 256, 8, "token shard version 2 is not supported (magic 20240520 is version 1: uint16");
    write_shard(tmp_path("version32.bin"), WP_SHARD_MAGIC_U32, 1, 50, tok, 100);
    expect_error("version32.bin", 256, 8, "version 1 is not supported (magic 20240801 is version 7: uint32");
    write_shard(tmp_path("trunc.bin"), WP_SHARD_MAGIC, 1, 200, tok, 100);
    expect_error("trunc.bin", 256, 8, "the header says 200 tokens but the file holds 100 (200 bytes of 2-byte tokens: truncated?)");
    write_shard(tmp_path("under.bin"), WP_SHARD_MAGIC, 1, 40, tok, 100);   /* tokens, not bytes, on both sides */
    expect_error("under.bin", 256, 8, "the header says 40 tokens but the file holds 100 (200 bytes of 2-byte tokens)");
    write_shard(tmp_path("vocab.bin"), WP_SHARD_MAGIC, 1, 100, tok, 100);
    expect_error("vocab.bin", 64, 8, "token 64 at position 64 is not below the vocabulary size 64");
    write_shard(tmp_path("shortshard.bin"), WP_SHARD_MAGIC, 1, 8, tok, 8);
    expect_error("shortshard.bin", 256, 8, "shorter than one sequence");
    spit(tmp_path("tiny.bin"), "abc", 3);
    expect_error("tiny.bin", 256, 1, "not a token shard");
    write_shard(tmp_path("negative.bin"), WP_SHARD_MAGIC, 1, -5, tok, 100);
    expect_error("negative.bin", 256, 8, "the header says -5 tokens");

    /* wpgen's fields: a width the header does not say, a tokenizer larger than the model */
    uint32_t wide[100];
    for (int i = 0; i < 100; i++) wide[i] = (uint32_t)(70000 + i);
    write_shard(tmp_path("width.bin"), WP_SHARD_MAGIC, 1, 50, tok, 100);   /* 50 uint32 in fact */
    expect_error("width.bin", 256, 8, "the size is that of other-width tokens, a width the header does not say");
    write_wp_shard(tmp_path("extwidth.bin"), 4, 2, 70100, 1, wide, 100);
    expect_error("extwidth.bin", 70100, 8, "the header says 2-byte tokens but its magic 20240801 is uint32 tokens");
    write_wp_shard(tmp_path("bigvocab.bin"), 4, 4, 70100, 1, wide, 100);
    expect_error("bigvocab.bin", 70050, 8, "the tokenizer's vocabulary (70100) exceeds the model's (vocab_size 70050)");
    write_wp_shard(tmp_path("id32.bin"), 4, 4, 70000, 1, wide, 100);        /* a lying vocabulary: ids past it */
    expect_error("id32.bin", 70050, 8, "token 70050 at position 50 is not below the vocabulary size 70050");
}

/* Lists, globs and directories, and what is refused of them, each naming what it was given. */
static void expect_spec_error(const char *spec, const char *needle) {
    char err[1024] = "";
    WpData *d = data_open(WP_DATA_TRAIN, spec, 70100, 8, 1, 1, err, sizeof err);
    CHECK(d == NULL, "%s: accepted", spec);
    CHECK(strstr(err, needle) && !strchr(err, '\n'), "%s: message: %s", spec, err);
    data_close(d);
}

static void test_lists(void) {
    enum { S = 8, A = 81, B = 161 };   /* 10 and 20 sequences */
    uint32_t a[A], b[B];
    for (int i = 0; i < A; i++) a[i] = (uint32_t)(70000 + i);
    for (int i = 0; i < B; i++) b[i] = (uint32_t)(i);
    char dir[300];
    snprintf(dir, sizeof dir, "%s", tmp_path("shards"));
    CHECK(mkdir(dir, 0755) == 0, "mkdir");
    char pa[400], pb[400], pv[400];
    snprintf(pa, sizeof pa, "%s/train-00000.bin", dir);
    snprintf(pb, sizeof pb, "%s/train-00001.bin", dir);
    snprintf(pv, sizeof pv, "%s/val-00000.bin", dir);
    write_wp_shard(pa, 4, 4, 70100, 0xabc, a, A);
    write_wp_shard(pb, 4, 4, 70100, 0xabc, b, B);
    write_wp_shard(pv, 4, 4, 70100, 0xabc, a, A);
    char err[1024] = "", spec[900];
    /* the directory: its train-*.bin in name order, not val-*.bin */
    WpData *d = data_open(WP_DATA_TRAIN, dir, 70100, S, 0, 1, err, sizeof err);
    CHECK(d != NULL, "directory: %s", err);
    if (!d) return;
    CHECK(data_ntokens(d) == A + B && data_nseq(d) == 30, "two shards: %zu tokens, %llu sequences", data_ntokens(d),
          (unsigned long long)data_nseq(d));
    CHECK(strstr(data_describe(d), "2 shards") && strstr(data_describe(d), "uint32") && strstr(data_describe(d), "test-bpe"),
          "describe: %s", data_describe(d));
    int in[S], tg[S];
    data_read_batch(d, 9, 0, 1, 1, S, in, tg);    /* the last sequence of the first shard */
    CHECK(in[0] == 70072 && tg[S - 1] == 70080, "sequence 9: %d %d", in[0], tg[S - 1]);
    data_read_batch(d, 10, 0, 1, 1, S, in, tg);   /* the first of the second: never across the files */
    CHECK(in[0] == 0 && tg[S - 1] == 8, "sequence 10: %d %d", in[0], tg[S - 1]);
    data_read_batch(d, 30 + 12, 0, 1, 1, S, in, tg);   /* epoch 2 in order: sequence 12 again */
    CHECK(in[0] == 16 && data_seq_start(d, 42, S) == A + 16, "epoch 2: %d", in[0]);
    data_close(d);

    /* the same files as a list and as a glob: the same data */
    snprintf(spec, sizeof spec, "%s,%s", pa, pb);
    WpData *l = data_open(WP_DATA_TRAIN, spec, 70100, S, 1, 9, err, sizeof err);
    CHECK(l != NULL, "list: %s", err);
    snprintf(spec, sizeof spec, "%s/train-*.bin", dir);
    WpData *g = data_open(WP_DATA_TRAIN, spec, 70100, S, 1, 9, err, sizeof err);
    CHECK(g != NULL, "glob: %s", err);
    if (!l || !g) { data_close(l); data_close(g); return; }
    /* shuffled: every epoch a permutation of the 30 sequences, each epoch another one */
    int seen[2][30] = { { 0 } }, same_order = 1, differs = 0;
    for (uint64_t q = 0; q < 60; q++) {
        uint64_t st = data_seq_start(l, q, S);
        CHECK(st == data_seq_start(g, q, S), "list and glob agree");
        uint64_t k = st < A ? st / S : 10 + (st - A) / S;
        CHECK((st < A ? st : st - A) % S == 0 && k < 30, "a sequence's start: %llu", (unsigned long long)st);
        if (k < 30) seen[q / 30][k]++;
        same_order &= q < 30 ? 1 : st == data_seq_start(l, q - 30, S);
        differs += q < 30 && k != q;
    }
    int perm = 1;
    for (int e = 0; e < 2; e++)
        for (int k = 0; k < 30; k++) perm &= seen[e][k] == 1;
    CHECK(perm, "each epoch reads every sequence once");
    CHECK(!same_order && differs > 10, "shuffled, and in another order each epoch");
    data_close(l);
    data_close(g);

    snprintf(spec, sizeof spec, "%s/train-00000.bin,,%s", dir, pb);
    expect_spec_error(spec, "an empty name in the list");
    expect_spec_error("", "got an empty name");
    snprintf(spec, sizeof spec, "%s/nothing-*.bin", dir);
    expect_spec_error(spec, "nothing-*.bin: the pattern matches no file");
    snprintf(spec, sizeof spec, "%s", tmp_path("empty-dir"));
    CHECK(mkdir(spec, 0755) == 0, "mkdir");
    expect_spec_error(spec, "empty-dir: a directory without token shards (train-*.bin)");
    /* a shard shorter than a sequence (a corpus's last) adds none; only shards that short are refused */
    char ps[400];
    snprintf(ps, sizeof ps, "%s/train-00002.bin", dir);
    write_wp_shard(ps, 4, 4, 70100, 0xabc, a, 5);
    WpData *t = data_open(WP_DATA_TRAIN, dir, 70100, S, 1, 1, err, sizeof err);
    CHECK(t && data_nseq(t) == 30 && data_ntokens(t) == A + B + 5, "a short last shard: %s", t ? data_describe(t) : err);
    data_close(t);
    snprintf(spec, sizeof spec, "%s,%s", ps, ps);
    expect_spec_error(spec, "2 files, none of them as long as one sequence of 8+1 tokens");
    /* shards of two tokenizers in one run */
    char po[400];
    snprintf(po, sizeof po, "%s/other-00000.bin", dir);
    write_wp_shard(po, 4, 4, 70100, 0xdef, a, A);
    snprintf(spec, sizeof spec, "%s,%s", pa, po);
    expect_spec_error(spec, "other-00000.bin: tokenized by another tokenizer");
}

/* What a glob over a `wpgen data` folder matches: its held-out shards (refused for training,
 * taken for validation) and its tokenizer.json (refused among token shards, by name); names that
 * hold ',', '*', '[' taken as they are when they exist; and the tokenizer a run records. */
static void test_spec_kinds(void) {
    enum { S = 8, A = 81 };
    uint32_t a[A];
    for (int i = 0; i < A; i++) a[i] = (uint32_t)(i * 3);
    char dir[300], p[600], spec[900], err[1024] = "";
    snprintf(dir, sizeof dir, "%s", tmp_path("kinds"));
    CHECK(mkdir(dir, 0755) == 0, "mkdir");
    snprintf(p, sizeof p, "%s/train-00000.bin", dir);
    write_wp_shard(p, 4, 4, 70100, 0xabc, a, A);
    snprintf(p, sizeof p, "%s/val-00000.bin", dir);
    write_wp_shard(p, 4, 4, 70100, 0xabc, a, A);
    snprintf(p, sizeof p, "%s/tokenizer.json", dir);
    spit(p, "{\"model\": {}}", 13);
    /* held-out shards in the training data */
    snprintf(spec, sizeof spec, "%s/*.bin", dir);
    expect_spec_error(spec, "val-00000.bin: a held-out shard (val-*.bin, the validation split `wpgen data` writes) in --data");
    WpData *v = data_open(WP_DATA_VAL, spec, 70100, S, 0, 0, err, sizeof err);
    CHECK(v != NULL, "--val-data DIR/*.bin: %s", err);
    CHECK(v && !strcmp(data_tokenizer(v), "sha256:bc0a000000000000") && !strcmp(data_tokenizer_name(v), "test-bpe"),
          "the shards' tokenizer: %s %s", v ? data_tokenizer(v) : "", v ? data_tokenizer_name(v) : "");
    data_close(v);
    /* shards and a file read as bytes, in either role */
    snprintf(spec, sizeof spec, "%s/*", dir);
    err[0] = 0;
    v = data_open(WP_DATA_VAL, spec, 70100, S, 0, 0, err, sizeof err);
    CHECK(v == NULL && strstr(err, "--val-data") && strstr(err, "mixes token shards (") && strstr(err, "train-00000.bin") &&
          strstr(err, "with files read as bytes, one token per byte (") && strstr(err, "kinds/tokenizer.json)"),
          "--val-data DIR/*: %s", err);
    data_close(v);
    snprintf(spec, sizeof spec, "%s/train-00000.bin,%s/tokenizer.json", dir, dir);
    expect_spec_error(spec, "mixes token shards");
    /* names holding a comma, a bracket and a star: taken as they are where they exist */
    char odd[400];
    snprintf(odd, sizeof odd, "%s", tmp_path("odd,[1]*.txt"));
    unsigned char text[100];
    for (int i = 0; i < 100; i++) text[i] = (unsigned char)i;
    spit(odd, text, sizeof text);
    WpData *d = data_open(WP_DATA_TRAIN, odd, 256, S, 0, 1, err, sizeof err);
    CHECK(d && data_ntokens(d) == 100 && !strcmp(data_tokenizer(d), "bytes"), "a name holding , [ *: %s", d ? "" : err);
    data_close(d);
    snprintf(spec, sizeof spec, "%s,%s", odd, odd);   /* a comma list of it cannot be: it is refused by name */
    err[0] = 0;
    d = data_open(WP_DATA_TRAIN, spec, 256, S, 0, 1, err, sizeof err);
    CHECK(d == NULL && err[0], "a list of names holding commas: accepted");
    data_close(d);
    char odir[400];
    snprintf(odir, sizeof odir, "%s", tmp_path("sh[1]*,d"));
    CHECK(mkdir(odir, 0755) == 0, "mkdir");
    snprintf(p, sizeof p, "%s/train-00000.bin", odir);
    write_wp_shard(p, 4, 4, 70100, 0xabc, a, A);
    d = data_open(WP_DATA_TRAIN, odir, 70100, S, 0, 1, err, sizeof err);
    CHECK(d && data_ntokens(d) == A, "a directory whose name holds [ ] * ,: %s", d ? "" : err);
    data_close(d);
    /* llm.c's own shards record no tokenizer */
    uint16_t t16[40] = { 0 };
    snprintf(p, sizeof p, "%s/llmc.bin", dir);
    write_shard(p, WP_SHARD_MAGIC, 1, 40, t16, 40);
    d = data_open(WP_DATA_TRAIN, p, 70100, S, 0, 1, err, sizeof err);
    CHECK(d && !strcmp(data_tokenizer(d), ""), "llm.c's shard: %s", d ? data_tokenizer(d) : err);
    data_close(d);
}

/* The permutation is a bijection for every n (cycle-walking), and depends on the key. */
static void test_permute(void) {
    static unsigned char hit[5000];
    int ok = 1;
    for (uint64_t n = 1; n <= 5000; n = n * 3 + 1) {
        memset(hit, 0, sizeof hit);
        for (uint64_t x = 0; x < n; x++) {
            uint64_t y = data_permute(x, n, 77);
            ok &= y < n && !hit[y];
            if (y < n) hit[y] = 1;
        }
    }
    CHECK(ok, "a permutation of [0, n)");
    int moved = 0;
    for (uint64_t x = 0; x < 1000; x++) moved += data_permute(x, 1000, 1) != data_permute(x, 1000, 2);
    CHECK(moved > 900, "another key, another order (%d of 1000 moved)", moved);
    CHECK(data_permute(123456789, 1ULL << 40, 3) < (1ULL << 40), "large n");
}

/* A named pipe used to block data_open forever (open waits for a writer): the alarm turns a
 * hang into a failure of this test. */
static void test_not_regular(void) {
    CHECK(mkfifo(tmp_path("pipe.bin"), 0600) == 0, "mkfifo");
    alarm(20);
    expect_error("pipe.bin", 256, 8, "not a regular file (a named pipe)");
    alarm(0);
    char err[512] = "";
    WpData *d = data_open(WP_DATA_TRAIN, tmp_dir, 256, 8, 1, 1, err, sizeof err);
    CHECK(d == NULL && strstr(err, "a directory without token shards"), "a directory: %s", err);
    data_close(d);
}

/* Runs data_read_batch of step s in a child process after change() altered the open file;
 * returns its wait status and its stderr in msg. */
static int read_in_child(WpData *d, long s, int S, void (*change)(void), char *msg, size_t msglen) {
    int fds[2];
    if (pipe(fds) != 0) { perror("pipe"); exit(1); }
    pid_t pid = fork();
    if (pid == 0) {
        dup2(fds[1], 2);
        close(fds[0]);
        change();
        int in[4 * 64], tg[4 * 64];
        data_read_batch(d, s, 0, 1, 4, S, in, tg);
        _exit(0);
    }
    close(fds[1]);
    ssize_t n = read(fds[0], msg, msglen - 1);
    msg[n > 0 ? n : 0] = 0;
    close(fds[0]);
    int status = 0;
    waitpid(pid, &status, 0);
    return status;
}

static void shrink(void) { if (truncate(tmp_path("grow.txt"), 100) != 0) perror("truncate"); }

static void corrupt(void) {
    /* token 30 (every token of this shard is < 64) becomes 9999, in place */
    FILE *f = fopen(tmp_path("live.bin"), "r+b");
    uint16_t big = 9999;
    if (!f || fseek(f, 1024 + 2 * 30, SEEK_SET) != 0 || fwrite(&big, 2, 1, f) != 1 || fclose(f) != 0) perror("corrupt");
}

/* A data file truncated during a run used to kill the job with SIGBUS (it was memory-mapped),
 * and one rewritten in place handed out tokens nobody had checked: both end the run with one
 * line naming the file and exit status 2. */
static void test_changed_under_run(void) {
    enum { N = 1 << 16, S = 16 };
    static unsigned char text[N];
    for (int i = 0; i < N; i++) text[i] = (unsigned char)(i % 200);
    spit(tmp_path("grow.txt"), text, N);
    char err[512] = "", msg[1024];
    WpData *d = data_open(WP_DATA_TRAIN, tmp_path("grow.txt"), 256, S, 0, 1, err, sizeof err);
    CHECK(d != NULL, "%s", err);
    if (!d) return;
    /* sequences 800-803, at byte 12800: a page wholly past the new end (a mapping faults there) */
    int st = read_in_child(d, 200, S, shrink, msg, sizeof msg);
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 2, "truncated file: %s %d", WIFSIGNALED(st) ? "killed by signal" : "exit",
          WIFSIGNALED(st) ? WTERMSIG(st) : WEXITSTATUS(st));
    CHECK(strstr(msg, "grow.txt: the file shrank to 100 bytes during the run") && strchr(msg, '\n') == msg + strlen(msg) - 1,
          "message: %s", msg);
    data_close(d);

    uint16_t tok[200];
    for (int i = 0; i < 200; i++) tok[i] = (uint16_t)(i % 64);
    write_shard(tmp_path("live.bin"), WP_SHARD_MAGIC, 1, 200, tok, 200);
    d = data_open(WP_DATA_TRAIN, tmp_path("live.bin"), 64, S, 0, 1, err, sizeof err);
    CHECK(d != NULL, "%s", err);
    if (!d) return;
    st = read_in_child(d, 0, S, corrupt, msg, sizeof msg);
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 2, "a token changed in place: %s %d", WIFSIGNALED(st) ? "signal" : "exit",
          WIFSIGNALED(st) ? WTERMSIG(st) : WEXITSTATUS(st));
    CHECK(strstr(msg, "live.bin: token 9999 at position 30 is not below the vocabulary size 64"), "message: %s", msg);
    data_close(d);
}

static void test_synthetic(void) {
    enum { S = 32, G = 2 };
    WpData *a = data_synthetic(42, 1000), *b = data_synthetic(42, 1000), *c = data_synthetic(43, 1000);
    int ia[G * S], ta[G * S], ib[G * S], tb[G * S], ic[G * S], tc[G * S];
    data_read_batch(a, 3, 1, 4, G, S, ia, ta);
    data_read_batch(b, 3, 1, 4, G, S, ib, tb);
    data_read_batch(c, 3, 1, 4, G, S, ic, tc);
    CHECK(memcmp(ia, ib, sizeof ia) == 0 && memcmp(ta, tb, sizeof ta) == 0, "same seed, same tokens");
    CHECK(memcmp(ia, ic, sizeof ia) != 0, "another seed, other tokens");
    int ok = 1, distinct = 0;
    for (int j = 0; j < G * S; j++) {
        ok &= ia[j] >= 0 && ia[j] < 1000 && ta[j] >= 0 && ta[j] < 1000;
        if (j % S != S - 1) ok &= ta[j] == ia[j + 1];
        distinct += j > 0 && ia[j] != ia[j - 1];
    }
    CHECK(ok, "range and shift");
    CHECK(distinct > G * S / 2, "not random-looking");
    CHECK(data_ntokens(a) == 0, "unbounded");
    data_close(a); data_close(b); data_close(c);
}

int main(void) {
    tmp_dir_make("data");
    test_bytes();
    test_shard();
    test_errors();
    test_lists();
    test_spec_kinds();
    test_permute();
    test_not_regular();
    test_changed_under_run();
    test_synthetic();
    tmp_dir_remove();
    return check_summary("test_data");
}
