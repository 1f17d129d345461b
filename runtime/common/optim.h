/* The backend-neutral half of the optimizer: AdamW's hyperparameters, the learning-rate schedule
 * (linear warm-up, then cosine) and global-norm gradient clipping. Every rank derives the same
 * learning rate and clipping scale from the same numbers, whatever backend holds the weights; the
 * update itself runs where the weights are (cpu/adamw.h on the CPU, compute.h's compute_adamw). */
#ifndef WP_OPTIM_H
#define WP_OPTIM_H

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

/* Scale for the gradients given their global sum of squares: min(1, clip / (norm + 1e-6)), as
 * torch.nn.utils.clip_grad_norm_ computes it. *norm receives sqrt(sumsq) if not NULL. */
float adamw_clip_scale(const WpAdamW *o, double sumsq, float *norm);

#endif
