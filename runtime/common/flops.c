/* The model FLOPs per token for MFU; see flops.h. */
#include "common/flops.h"

double wp_model_flops_per_token(const WpConfig *c, int seq) {
    double H = c->hidden, V = c->vocab, F = c->ffn, L = c->layers;
    double qd = (double)c->heads * c->head_dim, kvd = (double)c->kv_heads * c->head_dim;
    double n_mm = L * (H * (qd + 2 * kvd) + qd * H + 3 * F * H) + V * H;   /* layers' matrices + LM head */
    return 6.0 * n_mm + 6.0 * L * seq * qd;
}
