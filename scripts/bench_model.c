/* Times forward + backward of the CPU model on one micro-batch, the whole model as one chunk, and
 * prints the median of several runs and the process's peak resident memory: the C side of
 * `make bench-cpu` (scripts/bench_cpu.sh). PRECISION: fp32 (default) or bf16 (model.c's rounding
 * points; the weights rounded to bf16 first).
 * usage: bench_model H LAYERS HEADS KV_HEADS FFN VOCAB SEQ MBS [RUNS [PRECISION]] */
#include <omp.h>
#include <sys/resource.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "cpu/model.h"

static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv) {
    if (argc < 9) {
        fprintf(stderr, "usage: %s H LAYERS HEADS KV_HEADS FFN VOCAB SEQ MBS [RUNS [fp32|bf16]]\n", argv[0]);
        return 2;
    }
    WpConfig c = { .hidden = atoi(argv[1]), .layers = atoi(argv[2]), .heads = atoi(argv[3]),
                   .kv_heads = atoi(argv[4]), .ffn = atoi(argv[5]), .vocab = atoi(argv[6]),
                   .seq = atoi(argv[7]), .mbs = atoi(argv[8]), .eps = 1e-5f, .rope_theta = 10000.0f };
    c.head_dim = c.hidden / c.heads;
    int runs = argc > 9 ? atoi(argv[9]) : 5, T = c.seq * c.mbs;
    WpDtype dtype = WP_FP32;
    if (argc > 10 && wp_dtype_parse(argv[10], &dtype) != 0) {
        fprintf(stderr, "bench_model: precision '%s' is neither fp32 nor bf16\n", argv[10]);
        return 2;
    }
    WpChunk k = wp_chunk_make(&c, 0, 0, c.layers, 1, 1);
    float *params = malloc(k.nparams * sizeof(float)), *grad = calloc(k.nparams, sizeof(float));
    float *stash = malloc(wp_stash_floats(&c, &k, 0) * sizeof(float));
    int *tokens = malloc(T * sizeof(int)), *targets = malloc(T * sizeof(int));
    for (int t = 0; t < T; t++) tokens[t] = (t * 7 + 3) % c.vocab;
    for (int t = 0; t < T; t++) targets[t] = (t * 13 + 1) % c.vocab;
    wp_chunk_init(&c, &k, params, 1);
    WpScratch *s = wp_scratch_new(&c, c.layers);
    if (!s || wp_scratch_set_precision(s, dtype) != 0) { fprintf(stderr, "bench_model: out of memory\n"); return 1; }
    if (dtype == WP_BF16) wp_bf16_round_array(params, k.nparams);
    double *fwd = malloc((runs + 1) * sizeof(double)), *bwd = malloc((runs + 1) * sizeof(double));
    double *tot = malloc((runs + 1) * sizeof(double)), loss = 0;
    for (int r = 0; r <= runs; r++) {   /* run 0 warms up */
        double t0 = omp_get_wtime();
        loss = 0;
        wp_chunk_forward(&c, &k, params, tokens, targets, NULL, NULL, stash, 0, s, &loss);
        double t1 = omp_get_wtime();
        wp_chunk_backward(&c, &k, params, tokens, targets, stash, 0, NULL, NULL, grad, 1.0f / T, s);
        double t2 = omp_get_wtime();
        fwd[r] = t1 - t0; bwd[r] = t2 - t1; tot[r] = t2 - t0;
    }
    qsort(fwd + 1, runs, sizeof(double), cmp);
    qsort(bwd + 1, runs, sizeof(double), cmp);
    qsort(tot + 1, runs, sizeof(double), cmp);
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    printf("c %s: threads %d loss %.6f forward %.2f ms backward %.2f ms total %.2f ms (median of %d) peak RSS %.0f MiB\n",
           wp_dtype_name(dtype), omp_get_max_threads(), loss / T, 1e3 * fwd[1 + runs / 2], 1e3 * bwd[1 + runs / 2],
           1e3 * tot[1 + runs / 2], runs, ru.ru_maxrss / 1024.0);
    wp_scratch_free(s);
    free(params); free(grad); free(stash); free(tokens); free(targets); free(fwd); free(bwd); free(tot);
    return 0;
}
