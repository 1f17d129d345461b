/* libFuzzer harness: Hugging Face config.json (runtime/common/modelcfg.c). Any input either gives
 * a shape whose every count (parameters, tensor layout, activations, FLOPs) is computed without
 * overflow, or is refused with one line naming the file. The counts are checked against the same
 * sums in long double, which cannot wrap. */
#include <math.h>
#include "fuzz/fuzz.h"
#include "common/config.h"
#include "common/modelcfg.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    WpConfig c;
    char err[512];
    if (model_config_parse("fuzz/config.json", (const char *)data, size, &c, err, sizeof err) != 0) {
        fuzz_check_message(err, "fuzz/config.json: ");
        return 0;
    }
    FUZZ_REQUIRE(model_check(&c, err, sizeof err) == 0, "a loaded shape fails its own check: %s", err);
    long double H = c.hidden, F = c.ffn, V = c.vocab, L = c.layers, q = (long double)c.heads * c.head_dim,
                kv = (long double)c.kv_heads * c.head_dim;
    long double layer = 2 * H + q * H + 2 * kv * H + H * q + 3 * F * H;
    long double whole = L * layer + V * H + H + (c.tied ? 0 : V * H);
    WpChunk k = wp_chunk_make(&c, 0, 0, c.layers, 1, 1);
    FUZZ_REQUIRE((long double)k.nparams == whole, "%zu parameters, expected %.0Lf", k.nparams, whole);
    FUZZ_REQUIRE(whole <= 0x1p44L, "%.0Lf parameters pass the documented 2^44", whole);
    FUZZ_REQUIRE((long double)wp_layer_nparams(&c) == layer, "layer parameters");
    /* The tensor layout adds up to the chunk (only for shapes small enough to list quickly). */
    if (c.layers <= 64) {
        int n = wp_chunk_tensors(&c, &k, NULL);
        WpTensor *ts = calloc((size_t)n, sizeof *ts);
        FUZZ_REQUIRE(ts != NULL, "out of memory");
        wp_chunk_tensors(&c, &k, ts);
        size_t end = 0;
        for (int i = 0; i < n; i++) {
            FUZZ_REQUIRE(ts[i].offset == end, "tensor %s at %zu, expected %zu", ts[i].name, ts[i].offset, end);
            end += ts[i].rows * ts[i].cols;
        }
        FUZZ_REQUIRE(end == k.nparams, "tensors cover %zu of %zu", end, k.nparams);
        free(ts);
    }
    long double T = (long double)c.seq * c.mbs;
    /* a layer keeps about 2H + 2q + 2kv + 2F + heads floats a token (config.c's stash layout): q and
     * kv are not H's when head_dim is given (heads x head_dim != hidden); twice that bounds it */
    long double stash = (long double)wp_stash_floats(&c, &k, 0),
                bound = T * (4 * H + 4 * q + 4 * kv + 4 * F + 4 * c.heads + 4) * (L + 1) + T * V;
    FUZZ_REQUIRE(stash > 0 && stash <= bound && bound <= 0x1p50L, "stash %.0Lf floats, bound %.0Lf", stash, bound);
    double flops = wp_chunk_fwd_flops(&c, &k);
    FUZZ_REQUIRE(isfinite(flops) && flops > 0, "forward FLOPs %g", flops);
    return 0;
}
