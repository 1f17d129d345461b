/* Ring attention in one process (cpu/kernels.h's attention_block_*, common/cp_layout.h): C = 1, 2
 * and 4 members in the balanced layout, each member's query chunks against every key/value chunk
 * in ring order, the partial results merged; forward and backward equal attention_forward and
 * attention_backward over the whole sequence, MHA and GQA, sequences of 2C * k tokens with chunks
 * inside one tile and across two. Then the layout's own properties and messages, and that the
 * comparison catches a ring that drops one block.
 *
 * Tolerance, from the bound on two fp32 evaluations of the same sums in different orders (each
 * within gamma_n * sum|terms| of the exact value, gamma_n ~ n u, u = 2^-24): an output is a convex
 * combination of at most S values, its weights from hd-term dot products of size up to smax (the
 * largest |scaled score|) through exp (2 ulp) and at most 2C merges' rescalings (a few ulp each):
 *     |ring - whole| <= 2 (S + hd smax + 4C + 8) u max|v|      (out)
 *     |ring - whole| <= 2 (S + hd smax + 4C + 8) u             (lse, absolute: log of such a sum)
 * The gradients are sums of the same kind over S keys or S queries, of terms P * (dP - D), whose
 * size is bounded by the tensor's largest gradient times the same factors; stated against that
 * scale (as tests/torch/parity.py states its bounds): 4 (S + hd smax + 4C + 8) u max|grad|. */
#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>
#include "check.h"
#include "cpu/kernels.h"
#include "common/cp_layout.h"
#include "ring_fixture.h"

static const double U = 1.0 / (1 << 24);

static unsigned long long rng = 88172645463325252ull;
static float frand(void) {   /* uniform in [-1, 1) */
    rng ^= rng << 13; rng ^= rng >> 7; rng ^= rng << 17;
    return (float)((rng >> 40) / (double)(1ull << 24) * 2.0 - 1.0);
}

static float maxabs(const float *x, size_t n) {
    float m = 0;
    for (size_t i = 0; i < n; i++) m = fmaxf(m, fabsf(x[i]));
    return m;
}

/* Largest |ring - whole| over the worst element's tolerance, per part; returns max ratio. */
static double worst_ratio(const float *got, const float *ref, size_t n, double tol) {
    double w = 0;
    for (size_t i = 0; i < n; i++) {
        double e = fabs((double)got[i] - ref[i]) / tol;
        if (!(e <= w)) w = e;   /* NaN counts as worst */
    }
    return w;
}

static void test_ring(int C, int k, int heads, int kv, int hd) {
    int S = 2 * C * k, width = (heads + 2 * kv) * hd, qd = heads * hd, nt = omp_get_max_threads();
    size_t nq = (size_t)S * width, no = (size_t)S * qd, nl = (size_t)heads * S;
    float *qkv = malloc(nq * 4), *dout = malloc(no * 4), *out = malloc(no * 4), *lse = malloc(nl * 4);
    float *dqkv = malloc(nq * 4);
    float *work = malloc(attention_work_floats(1, S, heads, kv, hd, nt) * 4);
    for (size_t i = 0; i < nq; i++) qkv[i] = 2.0f * frand();   /* peaked softmaxes, not uniform */
    for (size_t i = 0; i < no; i++) dout[i] = frand();
    attention_forward(out, lse, qkv, 1, S, heads, kv, hd, work, nt, 0);
    attention_backward(dqkv, dout, out, lse, qkv, 1, S, heads, kv, hd, work, nt, 0);
    double smax = 4.0 * hd / sqrt(hd);   /* |q.k| / sqrt(hd) with |q|, |k| <= 2 */
    double f = S + hd * smax + 4 * C + 8;
    Ring r = { malloc(no * 4), malloc(nl * 4), malloc(nq * 4) };
    float *part = malloc(nq * 4), *rpart = malloc(nq * 4);
    /* the backward's two schedules (attention_block.c): a task per kv head on 1 thread, tasks per
     * tile on more threads than kv heads */
    for (int sched = 0; sched < 2; sched++) {
        int rt = sched ? kv + 1 : 1;
        ring_attention(&r, qkv, dout, S, C, heads, kv, hd, rt, -1, -1);
        char what[112];
        snprintf(what, sizeof what, "ring C=%d S=%d heads=%d kv=%d hd=%d threads=%d", C, S, heads, kv, hd, rt);
        double vmax = 2.0;   /* |v| <= 2 */
        double ro = worst_ratio(r.out, out, no, 2 * f * U * vmax), rl = worst_ratio(r.lse, lse, nl, 2 * f * U);
        double gq = 0, gk = 0, gv = 0;
        /* the q, k and v parts of dqkv, each against its own largest element */
        const int off[4] = { 0, qd, qd + kv * hd, width };
        double *g[3] = { &gq, &gk, &gv };
        for (int p = 0; p < 3; p++) {
            size_t m = 0;
            for (int t = 0; t < S; t++)
                for (int e = off[p]; e < off[p + 1]; e++, m++) {
                    part[m] = dqkv[(size_t)t * width + e];
                    rpart[m] = r.dqkv[(size_t)t * width + e];
                }
            *g[p] = worst_ratio(rpart, part, m, 4 * f * U * maxabs(part, m));
        }
        if (getenv("VERBOSE"))
            printf("%-50s error/tolerance: out %.3g lse %.3g dq %.3g dk %.3g dv %.3g\n", what, ro, rl, gq, gk, gv);
        CHECK(ro <= 1 && rl <= 1, "%s forward: error/tolerance out %.3g, lse %.3g", what, ro, rl);
        CHECK(gq <= 1 && gk <= 1 && gv <= 1, "%s backward: error/tolerance dq %.3g, dk %.3g, dv %.3g", what, gq, gk, gv);
    }
    if (C > 1) {   /* a ring missing one step's full blocks is far outside the tolerance */
        ring_attention(&r, qkv, dout, S, C, heads, kv, hd, nt, C - 1, 1);
        double bo = worst_ratio(r.out, out, no, 2 * f * U * 2.0);
        CHECK(bo > 100, "ring C=%d S=%d kv=%d with a block dropped: out error/tolerance only %.3g", C, S, kv, bo);
    }
    free(qkv); free(dout); free(out); free(lse); free(dqkv); free(work); free(r.out); free(r.lse);
    free(r.dqkv); free(part); free(rpart);
}

/* The layout: positions are a partition of the sequence, ascending per member; every member
 * has the same causal work; the divisibility check and its message. */
static void test_layout(void) {
    for (int C = 1; C <= 8; C *= 2) {
        int S = 2 * C * 5, n = S / C;
        int *seen = calloc(S, sizeof *seen), *pos = malloc(n * sizeof *pos);
        long work0 = -1;
        int ok_sorted = 1, ok_work = 1;
        for (int i = 0; i < C; i++) {
            cp_layout_positions(pos, S, C, i);
            long w = 0;
            for (int t = 0; t < n; t++) {
                seen[pos[t]]++;
                w += pos[t] + 1;   /* keys at or before the query */
                if (t && pos[t] <= pos[t - 1]) ok_sorted = 0;
            }
            if (work0 < 0) work0 = w;
            if (w != work0) ok_work = 0;
        }
        int once = 1;
        for (int p = 0; p < S; p++) once &= seen[p] == 1;
        CHECK(once && ok_sorted, "C=%d: members' positions are not an ascending partition of 0..%d", C, S - 1);
        CHECK(ok_work, "C=%d: members' causal work differs", C);
        free(seen); free(pos);
    }
    CHECK(cp_layout_block(3, 3) == CP_DIAG && cp_layout_block(3, 1) == CP_FULL && cp_layout_block(1, 3) == CP_SKIP,
          "block kinds");
    CHECK(cp_ring_source(4, 0, 1) == 3 && cp_ring_source(4, 2, 0) == 2 && cp_ring_source(4, 1, 3) == 2, "ring sources");
    char err[256];
    CHECK(cp_layout_check(96, 4, err, sizeof err) == 0 && cp_layout_check(7, 1, err, sizeof err) == -1,
          "96 over 4 splits, 7 over 1 does not");
    err[0] = 0;
    CHECK(cp_layout_check(100, 4, err, sizeof err) == -1 &&
          !strcmp(err, "sequence length 100 does not split over 4 context-parallel members: the balanced "
                       "layout cuts it into 2 x 4 = 8 equal chunks, so it must be a multiple of 8 (96 or 104)"),
          "message: %s", err);
    CHECK(cp_layout_check(6, 4, err, sizeof err) == -1 && strstr(err, "(at least 8)"), "message: %s", err);
    CHECK(cp_layout_check(64, 0, err, sizeof err) == -1 && strstr(err, "context parallelism 0: must be at least 1"),
          "message: %s", err);
}

int main(void) {
    test_layout();
    for (int C = 1; C <= 4; C *= 2) {
        test_ring(C, 40, 4, 4, 16);   /* MHA, a chunk inside one tile */
        test_ring(C, 70, 4, 2, 16);   /* GQA, chunks across two tiles, the second partial */
        test_ring(C, 24, 6, 1, 8);    /* multi-query */
    }
    return check_summary("test_attention_block");
}
