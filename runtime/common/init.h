/* The model's deterministic initialisation, on host fp32 arrays: part of the model's definition,
 * not of a backend, so every trainer and every backend starts from the same weights (a backend
 * that keeps its weights elsewhere initialises on the host and copies them in). */
#ifndef WP_INIT_H
#define WP_INIT_H

#include <stdint.h>
#include "common/config.h"

/* Every tensor is filled from its own stream, seeded by (seed, tensor name), so the same model
 * comes out whatever the chunking: N(0, 0.02) for matrices and the embedding, 1 for norm weights. */
void wp_chunk_init(const WpConfig *c, const WpChunk *k, float *params, uint64_t seed);

#endif
