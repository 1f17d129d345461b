/* AdamW's schedule and clipping, the same on every rank and every backend; see optim.h. */
#include "common/optim.h"

#include <math.h>

void adamw_init(WpAdamW *o, float lr, int warmup, int steps) {
    o->lr = lr;
    o->min_lr = 0.1f * lr;
    o->warmup = warmup > 0 ? warmup : 0;
    o->steps = steps;
    o->beta1 = 0.9f;
    o->beta2 = 0.95f;   /* the usual choice for language models (GPT-3, LLaMA, llm.c) */
    o->eps = 1e-8f;
    o->weight_decay = 0.1f;
    o->clip = 1.0f;
}

float adamw_lr(const WpAdamW *o, long step) {
    if (step < o->warmup) return o->lr * (float)(step + 1) / (float)o->warmup;
    if (step >= o->steps) return o->min_lr;
    /* Cosine over the steps after the warm-up: lr at its first step, min_lr at `steps`. */
    double ratio = (double)(step - o->warmup) / (double)(o->steps - o->warmup);
    double coeff = 0.5 * (1.0 + cos(M_PI * ratio));
    return (float)(o->min_lr + coeff * (o->lr - o->min_lr));
}

float adamw_clip_scale(const WpAdamW *o, double sumsq, float *norm) {
    double nrm = sqrt(sumsq);
    if (norm) *norm = (float)nrm;
    if (o->clip <= 0) return 1.0f;
    double scale = o->clip / (nrm + 1e-6);
    return scale < 1.0 ? (float)scale : 1.0f;
}
