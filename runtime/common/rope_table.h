/* RoPE's cos and sin tables, the one definition the CPU model and the CUDA model (which uploads
 * them at start-up) share, so that both rotate by the same bits. */
#ifndef WP_ROPE_TABLE_H
#define WP_ROPE_TABLE_H

#include "common/config.h"

#ifdef __cplusplus
extern "C" {
#endif

/* cos_t, sin_t [S, hd/2]: cos and sin of s * inv_freq[i], inv_freq[i] = theta^(-2i/hd) computed
 * in fp32 as Hugging Face does, then, when scaling is not NULL and its factor not 0, scaled as
 * transformers' rope_type "llama3" scales it (config.h, WpRopeScaling). cpu/rope.c has the
 * rotation. */
void wp_rope_tables(float *cos_t, float *sin_t, int S, int hd, float theta, const WpRopeScaling *scaling);

#ifdef __cplusplus
}
#endif

#endif
