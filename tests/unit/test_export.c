/* wpgen export's sizes (generator/export): --max-shard-size as transformers writes them, in
 * powers of 1000 or 1024, whole numbers from 1KB to 1PB, and what is refused. The export itself is tested end to end, loaded by
 * transformers, in tests/export/test_export.sh. */
#include <string.h>
#include "check.h"
#include "export/export.h"

int main(void) {
    static const struct { const char *s; uint64_t want; } good[] = {
        { "5GB", 5000000000ull }, { "500MB", 500000000ull }, { "2GiB", 2ull << 30 }, { "100KB", 100000 },
        { "1000", 1000 }, { "4096B", 4096 }, { "2kib", 2048 }, { "3TB", 3000000000000ull }, { "10MiB", 10ull << 20 },
        { "1KB", 1000 }, { "1000TB", 1000000000000000ull },
    };
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
        uint64_t got = 0;
        CHECK(export_parse_size(good[i].s, &got) == 0 && got == good[i].want, "%s: %llu, expected %llu", good[i].s,
              (unsigned long long)got, (unsigned long long)good[i].want);
    }
    /* a fraction, an exponent, a base prefix, a sign, a size below 1KB or past 1PB, an overflow */
    const char *bad[] = { "", "GB", "-1GB", "0", "5XB", "5 GB", "0.5", "2000TB", "1.5", "1.5kib", "1e-9GB", "1e3", "0x10",
                          "+5GB", "1", "999", "999B", "18446744073709551617", "99999999999999999999GB", NULL };
    for (int i = 0; bad[i]; i++) {
        uint64_t got = 7;
        CHECK(export_parse_size(bad[i], &got) == -1, "\"%s\" accepted as %llu", bad[i], (unsigned long long)got);
    }
    CHECK(EXPORT_DEFAULT_MAX_SHARD == 5000000000ull, "the default is transformers' 5GB");
    return check_summary("test_export");
}
