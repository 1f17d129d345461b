/* The model FLOPs of training, for MFU (model FLOPs utilisation): what the model needs per token,
 * by the usual convention (PaLM's appendix B, Megatron's), not what recomputation adds. One
 * formula for the trainers' step line and tests/gpu/bench_step.cu. */
#ifndef WP_FLOPS_H
#define WP_FLOPS_H

#include "common/config.h"

/* FLOPs of forward and backward per token of a sequence of seq tokens:
 *   6 * N for the matrix products, N = the parameters of the layers' matrices (q, k, v, o, gate,
 *     up, down) and the LM head (not the embedding table, a lookup, nor the norms);
 *   6 * L * seq * heads * head_dim for causal attention: QK^T and PV are 2 * seq^2 * heads *
 *     head_dim FLOPs each per layer and sequence in full, half of that causal, times 3 for forward
 *     and backward, divided among the sequence's seq tokens. */
double wp_model_flops_per_token(const WpConfig *c, int seq);

#endif
