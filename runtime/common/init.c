/* Deterministic initialisation of a chunk's parameters. Each tensor has its own random stream,
 * seeded by the run's seed and the tensor's Hugging Face name, so a tensor gets the same values
 * whichever chunk holds it and whatever the chunking: N(0, 0.02) for matrices and the embedding
 * (Hugging Face's initializer_range), 1 for norm weights. A tied model's head mirror (its last
 * chunk's "lm_head.weight" when that chunk is not the first) takes the embedding's stream. */
#include <math.h>
#include <stdlib.h>
#include "common/init.h"

/* splitmix64: a full-period 64-bit generator whose outputs are well mixed even for nearby seeds */
static uint64_t splitmix64(uint64_t *state) {
    uint64_t z = (*state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* FNV-1a of the name, mixed with the seed */
static uint64_t stream_seed(uint64_t seed, const char *name) {
    uint64_t h = 0xCBF29CE484222325ull;
    for (const unsigned char *p = (const unsigned char *)name; *p; p++) h = (h ^ *p) * 0x100000001B3ull;
    uint64_t s = seed ^ h;
    return splitmix64(&s);
}

/* uniform in (0, 1]: 53 random bits, never 0 (Box-Muller takes its log) */
static double uniform(uint64_t *state) {
    return ((splitmix64(state) >> 11) + 1.0) * (1.0 / 9007199254740992.0);
}

static void fill_normal(float *x, size_t n, double std, uint64_t *state) {
    const double two_pi = 6.283185307179586;
    for (size_t i = 0; i < n; i += 2) {   /* Box-Muller: two normals per pair of uniforms */
        double r = sqrt(-2.0 * log(uniform(state))), a = two_pi * uniform(state);
        x[i] = (float)(std * r * cos(a));
        if (i + 1 < n) x[i + 1] = (float)(std * r * sin(a));
    }
}

void wp_chunk_init(const WpConfig *c, const WpChunk *k, float *params, uint64_t seed) {
    int n = wp_chunk_tensors(c, k, NULL);
    WpTensor *ts = malloc((size_t)n * sizeof *ts);
    if (!ts) abort();
    wp_chunk_tensors(c, k, ts);
    for (int i = 0; i < n; i++) {
        float *p = params + ts[i].offset;
        size_t len = ts[i].rows * ts[i].cols;
        if (ts[i].no_decay) {
            for (size_t j = 0; j < len; j++) p[j] = 1.0f;
        } else {
            /* a tied model's mirror of the embedding starts as the embedding (wp_chunk_mirrors_embedding) */
            int mirror = wp_chunk_mirrors_embedding(c, k) && i == n - 1;
            uint64_t state = stream_seed(seed, mirror ? "model.embed_tokens.weight" : ts[i].name);
            fill_normal(p, len, 0.02, &state);
        }
    }
    free(ts);
}
