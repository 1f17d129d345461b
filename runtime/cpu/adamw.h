/* AdamW on the CPU: the update and the sum of squares of gradients, on host fp32 arrays. The
 * hyperparameters, the learning-rate schedule and the clipping scale are common/optim.h's.
 *
 * The three pieces are separate calls so that a pipelined run can do what the reference trainer
 * does in one process: each rank sums the squares of the gradients it owns (adamw_sumsq), the
 * ranks add their sums, every rank derives the same clipping scale (adamw_clip_scale), and each
 * owner updates its chunks with that scale (adamw_update_chunk). */
#ifndef WP_ADAMW_H
#define WP_ADAMW_H

#include <stddef.h>
#include "common/config.h"
#include "common/optim.h"

/* Sum of the squares of g[0..n), in double, in an order that does not depend on the number of
 * threads (so runs with different OMP_NUM_THREADS clip identically). */
double adamw_sumsq(const float *g, size_t n);

/* One AdamW step on n parameters: g = grad * grad_scale, then
 *   p -= lr * wd * p;  m = b1 m + (1-b1) g;  v = b2 v + (1-b2) g^2;
 *   p -= lr * (m / (1 - b1^t)) / (sqrt(v / (1 - b2^t)) + eps)
 * t is the 1-based number of this update (bias correction). */
void adamw_update(const WpAdamW *o, float *p, const float *grad, float *m, float *v, size_t n,
                  float lr, float wd, float grad_scale, long t);

/* adamw_update over a chunk's parameters, tensor by tensor, with weight decay except on tensors
 * marked no_decay. tensors/ntensors: wp_chunk_tensors() of the chunk, computed once up front. */
void adamw_update_chunk(const WpAdamW *o, const WpTensor *tensors, int ntensors, float *params,
                        const float *grads, float *m, float *v, float lr, float grad_scale, long t);

#endif
