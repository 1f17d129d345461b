/* The C side of ring attention's PyTorch parity test (tests/torch/test_ring_parity.sh): random q,
 * k, v and an output gradient for one sequence; ring attention over C members in the balanced
 * layout (tests/ring_fixture.h: block forward, merge, block backward); and two blocks alone, the
 * first chunk against itself (diagonal) and the second against the first (full). Writes them all
 * to one safetensors file for ring_parity.py:
 *   qkv [S, (heads + 2 kv) hd], dout [S, heads hd], out, lse [heads, S], dqkv: the ring's;
 *   diag.out, diag.lse, full.out, full.lse: the blocks' ([L, heads hd], [heads, L], L = S / 2C);
 *   metadata C, heads, kv_heads, head_dim.
 * usage: ring_dump OUT.safetensors C S HEADS KV_HEADS HEAD_DIM */
#include <stdio.h>
#include <stdlib.h>
#include "train/safetensors.h"
#include "ring_fixture.h"

int main(int argc, char **argv) {
    if (argc != 7) { fprintf(stderr, "usage: %s OUT.safetensors C S HEADS KV_HEADS HEAD_DIM\n", argv[0]); return 2; }
    int C = atoi(argv[2]), S = atoi(argv[3]), heads = atoi(argv[4]), kv = atoi(argv[5]), hd = atoi(argv[6]);
    char err[512];
    if (cp_layout_check(S, C, err, sizeof err)) { fprintf(stderr, "ring_dump: %s\n", err); return 2; }
    if (heads < 1 || kv < 1 || heads % kv || hd < 1) { fprintf(stderr, "ring_dump: heads must be a multiple of kv heads\n"); return 2; }
    int width = (heads + 2 * kv) * hd, qd = heads * hd, L = cp_chunk_len(S, C), nt = omp_get_max_threads();
    size_t nq = (size_t)S * width, no = (size_t)S * qd, nl = (size_t)heads * S;
    float *qkv = malloc(nq * 4), *dout = malloc(no * 4);
    unsigned long long x = 0x9E3779B97F4A7C15ull;
    for (size_t i = 0; i < nq + no; i++) {   /* uniform in [-2, 2) for qkv (peaked softmaxes), [-1, 1) for dout */
        x ^= x << 13; x ^= x >> 7; x ^= x << 17;
        float u = (float)((x >> 40) / (double)(1ull << 24) * 2.0 - 1.0);
        if (i < nq) qkv[i] = 2.0f * u; else dout[i - nq] = u;
    }
    Ring r = { malloc(no * 4), malloc(nl * 4), malloc(nq * 4) };
    ring_attention(&r, qkv, dout, S, C, heads, kv, hd, nt, -1, -1);
    float *work = malloc(attention_block_work_floats(L, L, heads, kv, hd, nt) * 4);
    float *bo[2], *bl[2];
    for (int b = 0; b < 2; b++) {   /* b = 0: chunk 0 against itself; 1: chunk 1 against chunk 0 */
        bo[b] = malloc((size_t)L * qd * 4); bl[b] = malloc((size_t)heads * L * 4);
        attention_block_forward(bo[b], bl[b], L, qkv + (size_t)b * L * width, width, qkv + qd, width,
                                L, L, heads, kv, hd, b == 0, work, nt);
    }
    WpStWriter *w = wp_st_writer_new();
    size_t sq[2] = { S, width }, so[2] = { S, qd }, sl[2] = { heads, S }, sbo[2] = { L, qd }, sbl[2] = { heads, L };
    wp_st_add(w, "qkv", "F32", sq, 2, qkv, nq * 4);
    wp_st_add(w, "dout", "F32", so, 2, dout, no * 4);
    wp_st_add(w, "out", "F32", so, 2, r.out, no * 4);
    wp_st_add(w, "lse", "F32", sl, 2, r.lse, nl * 4);
    wp_st_add(w, "dqkv", "F32", sq, 2, r.dqkv, nq * 4);
    wp_st_add(w, "diag.out", "F32", sbo, 2, bo[0], (size_t)L * qd * 4);
    wp_st_add(w, "diag.lse", "F32", sbl, 2, bl[0], (size_t)heads * L * 4);
    wp_st_add(w, "full.out", "F32", sbo, 2, bo[1], (size_t)L * qd * 4);
    wp_st_add(w, "full.lse", "F32", sbl, 2, bl[1], (size_t)heads * L * 4);
    char val[32];
    snprintf(val, sizeof val, "%d", C); wp_st_set_metadata(w, "C", val);
    snprintf(val, sizeof val, "%d", heads); wp_st_set_metadata(w, "heads", val);
    snprintf(val, sizeof val, "%d", kv); wp_st_set_metadata(w, "kv_heads", val);
    snprintf(val, sizeof val, "%d", hd); wp_st_set_metadata(w, "head_dim", val);
    if (wp_st_commit(w, argv[1], err, sizeof err)) { fprintf(stderr, "ring_dump: %s\n", err); return 1; }
    return 0;
}
