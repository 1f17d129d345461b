/* libFuzzer harness: token shards (runtime/train/data.c: llm.c's uint16 and uint32, wpgen's
 * header fields). The input is a file's bytes, written to a temporary *.bin (data_open reads
 * files); its first byte picks the sequence length, the vocabulary and whether the sequences are
 * shuffled. Either the shard opens and every batch read from it holds tokens below the vocabulary
 * at the positions data_seq_start says, or it is refused with one line naming the file. */
#include <unistd.h>
#include "fuzz/fuzz.h"
#include "train/data.h"

static char fuzz_shard_path[64];

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    int seq = 1 + (data[0] & 15), vocab = (data[0] & 16) ? 50304 : 300, shuffle = (data[0] & 32) != 0;
    if (!fuzz_shard_path[0]) snprintf(fuzz_shard_path, sizeof fuzz_shard_path, "/tmp/wp_fuzz_shard_%ld.bin", (long)getpid());
    FILE *f = fopen(fuzz_shard_path, "wb");
    FUZZ_REQUIRE(f != NULL, "cannot write %s", fuzz_shard_path);
    FUZZ_REQUIRE(fwrite(data + 1, 1, size - 1, f) == size - 1 && fclose(f) == 0, "cannot write %s", fuzz_shard_path);
    char err[512];
    WpData *d = data_open(WP_DATA_TRAIN, fuzz_shard_path, vocab, seq, shuffle, 7, err, sizeof err);
    if (!d) {
        fuzz_check_message(err, fuzz_shard_path);
        unlink(fuzz_shard_path);
        return 0;
    }
    size_t n = data_ntokens(d), width = 0;
    int32_t magic;
    memcpy(&magic, data + 1, 4);
    width = magic == WP_SHARD_MAGIC ? 2 : 4;
    FUZZ_REQUIRE(n >= (size_t)seq + 1 && 1024 + width * n == size - 1, "%zu tokens in a file of %zu bytes", n, size - 1);
    int in[4 * 16], tg[4 * 16];
    for (long s = 0; s < 3; s++) {
        data_read_batch(d, s, 1, 2, 4, seq, in, tg);
        for (int i = 0; i < 4; i++) {
            uint64_t start = data_seq_start(d, data_seq_index(s, 1, 2, 4, i), seq);
            FUZZ_REQUIRE(start + (uint64_t)seq < n, "sequence at %llu passes the %zu tokens", (unsigned long long)start, n);
            for (int j = 0; j < seq; j++) {
                const uint8_t *at = data + 1 + 1024 + width * (start + (uint64_t)j);
                uint32_t want;
                if (width == 2) { uint16_t u; memcpy(&u, at, 2); want = u; }
                else memcpy(&want, at, 4);
                FUZZ_REQUIRE((uint32_t)in[i * seq + j] == want && want < (uint32_t)vocab, "token %d of sequence %d", j, i);
                FUZZ_REQUIRE(j == 0 || tg[i * seq + j - 1] == in[i * seq + j], "targets are the inputs moved by one");
            }
            FUZZ_REQUIRE(tg[i * seq + seq - 1] >= 0 && tg[i * seq + seq - 1] < vocab, "last target");
        }
    }
    data_close(d);
    unlink(fuzz_shard_path);
    return 0;
}
