/* AdamW with a warm-up + cosine learning-rate schedule and global-norm gradient clipping.
 *
 * The three pieces are separate calls so that a pipelined run can do what the reference trainer
 * does in one process: each rank sums the squares of the gradients it owns (adamw_sumsq), the
 * ranks add their sums, every rank derives the same clipping scale (adamw_clip_scale), and each
 * owner updates its chunks with that scale (adamw_update_chunk). */
#ifndef WP_ADAMW_H
#define WP_ADAMW_H

#include <stddef.h>
#include "common/config.h"

typedef struct WpAdamW {
    float lr;             /* peak learning rate, reached at the end of the warm-up */
    float min_lr;         /* floor of the cosine: 0.1 * lr by default */
    int warmup;           /* steps of linear warm-up */
    int steps;            /* total steps of training: the cosine reaches min_lr here */
    float beta1, beta2;   /* 0.9, 0.95 */
    float eps;            /* 1e-8 */
    float weight_decay;   /* decoupled; not applied to tensors marked no_decay (norms) */
    float clip;           /* global gradient-norm limit; 0 disables clipping */
} WpAdamW;

/* Fills o with the defaults above and the given peak rate, warm-up and length. */
void adamw_init(WpAdamW *o, float lr, int warmup, int steps);

/* Learning rate of step `step` (0-based): lr * (step+1)/warmup during the warm-up, then a cosine
 * from lr down to min_lr at step `steps`, and min_lr after that. */
float adamw_lr(const WpAdamW *o, long step);

/* Sum of the squares of g[0..n), in double, in an order that does not depend on the number of
 * threads (so runs with different OMP_NUM_THREADS clip identically). */
double adamw_sumsq(const float *g, size_t n);

/* Scale for the gradients given their global sum of squares: min(1, clip / (norm + 1e-6)), as
 * torch.nn.utils.clip_grad_norm_ computes it. *norm receives sqrt(sumsq) if not NULL. */
float adamw_clip_scale(const WpAdamW *o, double sumsq, float *norm);

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
