/* libFuzzer harness: safetensors headers (runtime/train/safetensors.c). Any input either opens
 * with every tensor's bytes inside the file, matching its shape and dtype and tiling the data, or
 * is refused with one line naming the file. */
#include "fuzz/fuzz.h"
#include "train/safetensors.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char err[512];
    WpStFile *f = wp_st_open_memory("fuzz.safetensors", data, size, err, sizeof err);
    if (!f) {
        fuzz_check_message(err, "fuzz.safetensors: ");
        return 0;
    }
    size_t covered = 0;
    const uint8_t *lo = data + size, *hi = data;
    for (int i = 0; i < wp_st_count(f); i++) {
        const char *name = wp_st_name(f, i), *dtype;
        size_t shape[8], bytes;
        int nd;
        FUZZ_REQUIRE(name != NULL, "tensor %d has no name", i);
        const uint8_t *p = wp_st_get(f, name, &dtype, shape, &nd, &bytes);
        FUZZ_REQUIRE(p != NULL, "tensor %s listed but not found", name);
        FUZZ_REQUIRE(p >= data && bytes <= size && p + bytes <= data + size, "tensor %s outside the file", name);
        FUZZ_REQUIRE(nd >= 0 && nd <= 8, "tensor %s: %d dimensions", name, nd);
        unsigned __int128 n = 1;
        for (int d = 0; d < nd; d++) n *= shape[d];
        size_t es = !strcmp(dtype, "F64") || !strcmp(dtype, "I64") || !strcmp(dtype, "U64") ? 8
                  : !strcmp(dtype, "F32") || !strcmp(dtype, "I32") || !strcmp(dtype, "U32") ? 4
                  : !strcmp(dtype, "F16") || !strcmp(dtype, "BF16") || !strcmp(dtype, "I16") || !strcmp(dtype, "U16") ? 2 : 1;
        FUZZ_REQUIRE(n * es == bytes, "tensor %s: %zu bytes for its shape and dtype %s", name, bytes, dtype);
        /* touch the first and last byte: under ASan a pointer past the file shows here */
        if (bytes) { volatile uint8_t x = p[0]; x ^= p[bytes - 1]; (void)x; }
        covered += bytes;
        if (bytes && p < lo) lo = p;
        if (bytes && p + bytes > hi) hi = p + bytes;
    }
    if (covered) FUZZ_REQUIRE(hi == data + size, "the data does not end at the end of the file");
    FUZZ_REQUIRE(wp_st_get(f, "__metadata__", NULL, NULL, NULL, NULL) == NULL, "__metadata__ taken for a tensor");
    (void)wp_st_metadata(f, "format");
    wp_st_close(f);
    return 0;
}
