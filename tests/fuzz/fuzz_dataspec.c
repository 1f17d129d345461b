/* libFuzzer harness: the trainers' --data/--val-data specs (runtime/train/data.c: a file, a comma
 * list, a glob, a directory; a name that exists taken as it is; held-out shards and files read as
 * bytes among shards refused). The input's first byte picks the role (--data or --val-data); the
 * rest, up to a NUL, is the spec, read in a folder made once per process that holds what a
 * `wpgen data` folder holds (train-*.bin, val-*.bin, tokenizer.json), a text file, a folder of
 * shards, and names holding ',', '[', '*'. Specs that could leave the folder (an absolute name,
 * "..") are skipped: the harness tests the parser, not the file system. Either the spec opens
 * (sequences, a tokenizer data.h names) or it is refused with one non-empty line. */
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include "fuzz/fuzz.h"
#include "train/data.h"

static char fuzz_dataspec_dir[64];

/* A `wpgen data` shard of n uint16 tokens below 256, tokenizer hash h. */
static void fuzz_dataspec_shard(const char *path, int n, unsigned char h) {
    int32_t head[256] = { WP_SHARD_MAGIC, 1, n };
    head[WP_SHARD_EXT_TAG] = WP_SHARD_EXT_MAGIC;
    head[WP_SHARD_EXT_VERSION] = 1;
    head[WP_SHARD_EXT_VOCAB] = 256;
    head[WP_SHARD_EXT_WIDTH] = 2;
    memset(&head[WP_SHARD_EXT_HASH], h, 8);
    memcpy(&head[WP_SHARD_EXT_NAME], "fuzz-bpe", 9);
    FILE *f = fopen(path, "wb");
    FUZZ_REQUIRE(f && fwrite(head, 4, 256, f) == 256, "cannot write %s", path);
    for (int i = 0; i < n; i++) {
        uint16_t t = (uint16_t)(i * 7 % 256);
        fwrite(&t, 2, 1, f);
    }
    FUZZ_REQUIRE(fclose(f) == 0, "cannot write %s", path);
}

static void fuzz_dataspec_text(const char *path, int n) {
    FILE *f = fopen(path, "wb");
    FUZZ_REQUIRE(f != NULL, "cannot write %s", path);
    for (int i = 0; i < n; i++) fputc('a' + i % 26, f);
    FUZZ_REQUIRE(fclose(f) == 0, "cannot write %s", path);
}

/* The folder's files, made once (in the folder, the current one then) and removed at exit. */
static const char *const fuzz_dataspec_files[] = {
    "d/train-00000.bin", "d/train-00001.bin", "d/val-00000.bin", "o[1]*,x/train-00000.bin", "other.bin", "short.bin",
    "d/tokenizer.json", "text.txt", "a,b.txt", "s[1]*.txt", "d", "o[1]*,x", "empty",
};

static void fuzz_dataspec_cleanup(void) {
    char path[128];
    for (size_t i = 0; i < sizeof fuzz_dataspec_files / sizeof fuzz_dataspec_files[0]; i++) {
        snprintf(path, sizeof path, "%s/%s", fuzz_dataspec_dir, fuzz_dataspec_files[i]);
        remove(path);
    }
    rmdir(fuzz_dataspec_dir);
}

static void fuzz_dataspec_setup(void) {
    atexit(fuzz_dataspec_cleanup);
    mkdir("d", 0755);
    mkdir("o[1]*,x", 0755);
    mkdir("empty", 0755);
    fuzz_dataspec_shard("d/train-00000.bin", 300, 1);
    fuzz_dataspec_shard("d/train-00001.bin", 40, 1);
    fuzz_dataspec_shard("d/val-00000.bin", 100, 1);
    fuzz_dataspec_shard("o[1]*,x/train-00000.bin", 200, 2);
    fuzz_dataspec_shard("other.bin", 200, 2);
    fuzz_dataspec_shard("short.bin", 3, 1);
    fuzz_dataspec_text("d/tokenizer.json", 120);
    fuzz_dataspec_text("text.txt", 500);
    fuzz_dataspec_text("a,b.txt", 300);
    fuzz_dataspec_text("s[1]*.txt", 300);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1 || size > 512) return 0;
    char spec[512];
    size_t n = 0;
    while (n + 1 < size && data[1 + n] && n < sizeof spec - 1) {
        spec[n] = (char)data[1 + n];
        n++;
    }
    spec[n] = 0;
    if (spec[0] == '/' || strstr(spec, "..") || strchr(spec, '~')) return 0;
    int role = data[0] & 1 ? WP_DATA_VAL : WP_DATA_TRAIN, seq = 1 + (data[0] >> 1 & 31);
    /* the spec is read in the folder; the caller's working directory is given back (the corpus
     * replay, unit/test_fuzz_corpus, reads its folders by relative names) */
    int here = open(".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    FUZZ_REQUIRE(here >= 0, "cannot open the working directory");
    if (!fuzz_dataspec_dir[0]) {
        snprintf(fuzz_dataspec_dir, sizeof fuzz_dataspec_dir, "/tmp/wp_fuzz_dataspec_%ld", (long)getpid());
        FUZZ_REQUIRE(mkdir(fuzz_dataspec_dir, 0755) == 0, "cannot make %s", fuzz_dataspec_dir);
        FUZZ_REQUIRE(chdir(fuzz_dataspec_dir) == 0, "cannot enter %s", fuzz_dataspec_dir);
        fuzz_dataspec_setup();
    }
    FUZZ_REQUIRE(chdir(fuzz_dataspec_dir) == 0, "cannot enter %s", fuzz_dataspec_dir);
    char err[1024] = "";
    WpData *d = data_open(role, spec, 256, seq, (data[0] & 64) != 0, 3, err, sizeof err);
    FUZZ_REQUIRE(fchdir(here) == 0 && close(here) == 0, "cannot go back to the working directory");
    if (!d) {
        FUZZ_REQUIRE(err[0] != '\0', "spec \"%s\" refused without a message", spec);
        FUZZ_REQUIRE(strchr(err, '\n') == NULL, "a message of more than one line: %s", err);
        return 0;
    }
    FUZZ_REQUIRE(data_nseq(d) > 0 && data_ntokens(d) > data_nseq(d), "spec \"%s\": %s", spec, data_describe(d));
    const char *tk = data_tokenizer(d);
    FUZZ_REQUIRE(!strcmp(tk, "") || !strcmp(tk, "bytes") || !strcmp(tk, "sha256:0101010101010101") ||
                 !strcmp(tk, "sha256:0202020202020202"), "spec \"%s\": tokenizer %s", spec, tk);
    /* a held-out shard never trains; bytes and shards never mix (the only files read as bytes
     * here hold letters, shards hold tokens of at most 7 * 299 % 256) */
    FUZZ_REQUIRE(role == WP_DATA_VAL || !strstr(data_describe(d), "val-0"), "spec \"%s\": %s", spec, data_describe(d));
    int in[32], tg[32];
    for (long s = 0; s < 3; s++) {
        data_read_batch(d, s, 0, 1, 1, seq, in, tg);
        for (int j = 0; j < seq; j++) FUZZ_REQUIRE(in[j] >= 0 && in[j] < 256 && tg[j] >= 0 && tg[j] < 256, "token");
    }
    data_close(d);
    return 0;
}
