/* Cross-entropy of the LM head's logits against the next tokens, on one block of tokens at a
 * time (model.c runs the head in blocks so that the logits of a whole micro-batch never exist at
 * once). Forward keeps only each token's log-sum-exp (fp32), from which backward recomputes the
 * softmax of the block's recomputed logits; the per-token losses are summed in double so the mean
 * over a whole step does not depend on how it was split into micro-batches or blocks beyond the
 * last bits. */
#include <math.h>
#include <omp.h>
#include "cpu/kernels.h"

#pragma GCC optimize ("fp-contract=fast")

/* The sum over rows is taken per thread over a fixed static range of rows, then over threads in
 * order: the same bits on every run with the same thread count (an OpenMP reduction adds the
 * threads' parts in whatever order they finish). */
#define LOSS_MAX_THREADS 256

WP_HOT
double crossentropy_forward(float *lse, const float *logits, const int *targets, int n, int V) {
    double part[LOSS_MAX_THREADS] = {0};
    int nthreads = 1;
    #pragma omp parallel num_threads(omp_get_max_threads() < LOSS_MAX_THREADS ? omp_get_max_threads() : LOSS_MAX_THREADS)
    {
        int id = omp_get_thread_num(), nt = omp_get_num_threads();
        if (id == 0) nthreads = nt;
        int t0 = (int)((long)n * id / nt), t1 = (int)((long)n * (id + 1) / nt);
        double total = 0.0;
        for (int t = t0; t < t1; t++) {
            const float *l = logits + (size_t)t * V;
            float m = l[0];
            for (int v = 1; v < V; v++) m = l[v] > m ? l[v] : m;
            float sum = 0.0f;
            #pragma omp simd reduction(+:sum)
            for (int v = 0; v < V; v++) sum += wp_expf(l[v] - m);
            lse[t] = m + logf(sum);
            if (targets[t] >= 0)   /* -log softmax = logsumexp - logit */
                total += (double)m + log((double)sum) - (double)l[targets[t]];
        }
        part[id] = total;
    }
    double total = 0.0;
    for (int i = 0; i < nthreads; i++) total += part[i];
    return total;
}

WP_HOT
void crossentropy_backward(float *logits, const float *lse, const int *targets, int n, int V,
                           float scale, int bf16) {
    #pragma omp parallel for schedule(static)
    for (int t = 0; t < n; t++) {
        float *d = logits + (size_t)t * V;
        if (targets[t] < 0) { memset(d, 0, (size_t)V * sizeof *d); continue; }
        float L = lse[t];
        #pragma omp simd
        for (int v = 0; v < V; v++) d[v] = scale * wp_expf(d[v] - L);
        d[targets[t]] -= scale;
        if (bf16) wp_bf16_round_serial(d, (size_t)V);
    }
}
