/* The token embedding: a row of the table per token, and the gradient added back into the rows
 * the micro-batch used. */
#include <stdio.h>
#include <stdlib.h>
#include "cpu/kernels.h"

void embedding_forward(float *x, const int *tokens, const float *table, int T, int H, int V) {
    for (int t = 0; t < T; t++)   /* the data loader checks too; a bad id here is a bug */
        if (tokens[t] < 0 || tokens[t] >= V) {
            fprintf(stderr, "embedding: token id %d at position %d is outside [0, %d)\n", tokens[t], t, V);
            abort();
        }
    #pragma omp parallel for schedule(static)
    for (int t = 0; t < T; t++)
        memcpy(x + (size_t)t * H, table + (size_t)tokens[t] * H, (size_t)H * sizeof(float));
}

/* Threads split the columns, each walks all tokens in order: a token repeated in the batch adds
 * into the same row without races, and the sum order is fixed. */
void embedding_backward(float *dtable, const float *dx, const int *tokens, int T, int H) {
    int nb = (H + 63) / 64;
    #pragma omp parallel for schedule(static)
    for (int b = 0; b < nb; b++) {
        int j0 = b * 64, j1 = j0 + 64 < H ? j0 + 64 : H;
        for (int t = 0; t < T; t++) {
            float *d = dtable + (size_t)tokens[t] * H;
            const float *g = dx + (size_t)t * H;
            for (int j = j0; j < j1; j++) d[j] += g[j];
        }
    }
}
