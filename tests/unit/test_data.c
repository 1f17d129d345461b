/* Data: bytes and llm.c shards, the fixed position of every sequence (the numerical contract),
 * synthetic tokens, and the errors a user meets (short file, bad magic, token >= vocab, a named
 * pipe or a directory given as data, a file that shrinks or changes during the run). */
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

static void write_shard(const char *path, int magic, int version, int count, const uint16_t *tok, int ntok) {
    int32_t h[256] = {0};
    h[0] = magic; h[1] = version; h[2] = count;
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(h, sizeof h, 1, f) != 1 || fwrite(tok, 2, (size_t)ntok, f) != (size_t)ntok || fclose(f) != 0) {
        perror(path);
        exit(1);
    }
}

static void test_bytes(void) {
    enum { N = 1000, S = 16, G = 3, M = 4 };
    unsigned char text[N];
    for (int i = 0; i < N; i++) text[i] = (unsigned char)(i * 7 % 251);
    spit(tmp_path("text.txt"), text, N);
    char err[512] = "";
    WpData *d = data_open(tmp_path("text.txt"), 256, S, err, sizeof err);
    CHECK(d != NULL, "open: %s", err);
    if (!d) return;
    CHECK(data_ntokens(d) == N, "ntokens %zu", data_ntokens(d));
    CHECK(strstr(data_describe(d), "text.txt") != NULL, "describe: %s", data_describe(d));
    int in[G * S], tg[G * S];
    int bad = 0, wrapped = 0;
    for (long s = 0; s < 30; s++)
        for (int g = 0; g < M; g++) {
            data_read_batch(d, s, g, M, G, S, in, tg);
            for (int i = 0; i < G; i++) {
                uint64_t q = ((uint64_t)s * M + g) * G + i;
                uint64_t start = (q * S) % (N - S);
                wrapped |= q * S >= N - S;
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
    d = data_open(tmp_path("one.txt"), 256, S, err, sizeof err);
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
    WpData *d = data_open(tmp_path("train.bin"), 50304, S, err, sizeof err);
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
    WpData *d = data_open(tmp_path(file), vocab, seq, err, sizeof err);
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
    expect_error("magic.bin", 256, 8, "bad magic 12345");
    write_shard(tmp_path("version.bin"), WP_SHARD_MAGIC, 2, 100, tok, 100);
    expect_error("version.bin", 256, 8, "version 2");
    write_shard(tmp_path("trunc.bin"), WP_SHARD_MAGIC, 1, 200, tok, 100);
    expect_error("trunc.bin", 256, 8, "the header says 200 tokens but the file holds 100 (200 bytes of 2-byte tokens: truncated?)");
    write_shard(tmp_path("under.bin"), WP_SHARD_MAGIC, 1, 50, tok, 100);   /* tokens, not bytes, on both sides */
    expect_error("under.bin", 256, 8, "the header says 50 tokens but the file holds 100 (200 bytes of 2-byte tokens)");
    write_shard(tmp_path("vocab.bin"), WP_SHARD_MAGIC, 1, 100, tok, 100);
    expect_error("vocab.bin", 64, 8, "token 64 at position 64 is not below the vocabulary size 64");
    write_shard(tmp_path("shortshard.bin"), WP_SHARD_MAGIC, 1, 8, tok, 8);
    expect_error("shortshard.bin", 256, 8, "shorter than one sequence");
    spit(tmp_path("tiny.bin"), "abc", 3);
    expect_error("tiny.bin", 256, 1, "not an llm.c token shard");
}

/* A named pipe used to block data_open forever (open waits for a writer): the alarm turns a
 * hang into a failure of this test. */
static void test_not_regular(void) {
    CHECK(mkfifo(tmp_path("pipe.bin"), 0600) == 0, "mkfifo");
    alarm(20);
    expect_error("pipe.bin", 256, 8, "not a regular file (a named pipe)");
    alarm(0);
    char err[512] = "";
    WpData *d = data_open(tmp_dir, 256, 8, err, sizeof err);
    CHECK(d == NULL && strstr(err, "not a regular file (a directory)"), "a directory: %s", err);
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
    WpData *d = data_open(tmp_path("grow.txt"), 256, S, err, sizeof err);
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
    d = data_open(tmp_path("live.bin"), 64, S, err, sizeof err);
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
    test_not_regular();
    test_changed_under_run();
    test_synthetic();
    tmp_dir_remove();
    return check_summary("test_data");
}
