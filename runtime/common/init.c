/* Deterministic initialisation of a chunk's parameters. Each tensor has its own random stream,
 * seeded by the run's seed and the tensor's Hugging Face name, so a tensor gets the same values
 * whichever chunk holds it and whatever the chunking: N(0, 0.02) for matrices and the embedding
 * (Hugging Face's initializer_range), 1 for norm weights. A tied model's head mirror (its last
 * chunk's "lm_head.weight" when that chunk is not the first) takes the embedding's stream. */
#include <math.h>
#include <stdlib.h>
#include "common/hash64.h"
#include "common/init.h"

/* FNV-1a of the name, mixed with the seed (splitmix64: outputs well mixed even for nearby seeds) */
static uint64_t stream_seed(uint64_t seed, const char *name) {
    uint64_t s = seed ^ wp_fnv1a_str(WP_FNV_OFFSET, name);
    return wp_splitmix64_next(&s);
}

/* uniform in (0, 1]: 53 random bits, never 0 (Box-Muller takes its log) */
static double uniform(uint64_t *state) {
    return ((wp_splitmix64_next(state) >> 11) + 1.0) * (1.0 / 9007199254740992.0);
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
