/* The token embedding on the GPU: rows of the bf16 table into the activation, and the gradient
 * added back into fp32 rows. The backward gives each block a range of vocabulary rows; the block
 * walks all tokens in order and adds the rows of the tokens in its range, so a token repeated in
 * the micro-batch is summed in token order by one block: no atomics, the same bits every run. */
#include "cuda/common_cuda.cuh"
#include "cuda/kernels_cuda.cuh"

enum { VOCAB_ROWS_PER_BLOCK = 128, EMB_THREADS = 256 };

static __global__ void embedding_forward_kernel(uint16_t *x, const int *tokens, const uint16_t *table,
                                                int T, int H, int V) {
    size_t n = (size_t)T * H;
    for (size_t e = (size_t)blockIdx.x * blockDim.x + threadIdx.x; e < n; e += (size_t)gridDim.x * blockDim.x) {
        size_t t = e / H, j = e % H;
        int tok = tokens[t];
        if (tok < 0 || tok >= V) {   /* the data loader checks too; a bad id here is a bug */
            printf("embedding: token id %d at position %d is outside [0, %d)\n", tok, (int)t, V);
            __trap();
        }
        x[e] = table[(size_t)tok * H + j];
    }
}

static __global__ void embedding_backward_kernel(float *dtable, const uint16_t *dx, const int *tokens, int T,
                                                 int H) {
    __shared__ int tok[EMB_THREADS];
    int v0 = blockIdx.x * VOCAB_ROWS_PER_BLOCK, v1 = v0 + VOCAB_ROWS_PER_BLOCK;
    for (int t0 = 0; t0 < T; t0 += EMB_THREADS) {
        __syncthreads();   /* the previous chunk's tokens are no longer read */
        tok[threadIdx.x] = t0 + (int)threadIdx.x < T ? tokens[t0 + threadIdx.x] : -1;
        __syncthreads();
        int n = T - t0 < EMB_THREADS ? T - t0 : EMB_THREADS;
        for (int i = 0; i < n; i++) {   /* tok[i] is the same for every thread: a uniform branch */
            int v = tok[i];
            if (v < v0 || v >= v1) continue;
            float *d = dtable + (size_t)v * H;
            const uint16_t *g = dx + (size_t)(t0 + i) * H;
            for (int j = threadIdx.x; j < H; j += EMB_THREADS) d[j] += bf16_to_f32(g[j]);
        }
    }
}

void wc_embedding_forward(uint16_t *x, const int *tokens, const uint16_t *table, int T, int H, int V,
                          cudaStream_t s) {
    size_t n = (size_t)T * H;
    if (n == 0) return;
    embedding_forward_kernel<<<wc_blocks(n, 256, 65536), 256, 0, s>>>(x, tokens, table, T, H, V);
    CUDA_CHECK_LAUNCH("embedding_forward_kernel");
}

void wc_embedding_backward(float *dtable, const uint16_t *dx, const int *tokens, int T, int H, int V,
                           cudaStream_t s) {
    if (T == 0 || H == 0) return;
    int blocks = (V + VOCAB_ROWS_PER_BLOCK - 1) / VOCAB_ROWS_PER_BLOCK;
    embedding_backward_kernel<<<blocks, EMB_THREADS, 0, s>>>(dtable, dx, tokens, T, H);
    CUDA_CHECK_LAUNCH("embedding_backward_kernel");
}
