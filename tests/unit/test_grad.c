/* Gradient checks of the CPU model. Every backward piece (RMSNorm, RoPE, attention, SwiGLU,
 * cross-entropy) and the whole model are compared with central finite differences of a plain,
 * double-precision reference written here from Hugging Face's definitions, so the differences
 * are exact to ~1e-9 and any disagreement is the float code's. Then: chunked execution and
 * recomputation give the same loss and gradients as one chunk, the stash is exactly as large as
 * wp_stash_floats says, and initialisation does not depend on the chunking. */
#include <math.h>
#include <omp.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "check.h"
#include "model_fixture.h"
#include "common/config.h"
#include "cpu/model.h"
#include "cpu/kernels.h"
#include "common/rope_table.h"

/* ---- small helpers ---- */

static double *to_double(const float *x, size_t n) {
    double *d = malloc(n * sizeof *d);
    for (size_t i = 0; i < n; i++) d[i] = x[i];
    return d;
}
static double dot_fd(const double *a, const float *r, size_t n) {
    double s = 0;
    for (size_t i = 0; i < n; i++) s += a[i] * r[i];
    return s;
}
static double maxabs_d(const double *x, size_t n) {
    double m = 0;
    for (size_t i = 0; i < n; i++) m = fmax(m, fabs(x[i]));
    return m;
}

/* Compares a float gradient with a double one: every element within
 * rtol * |ref| + atol_rel * max|ref|; prints the worst element. */
static void compare_grad(const char *what, const float *got, const double *ref, size_t n,
                         double rtol, double atol_rel) {
    double scale = maxabs_d(ref, n), worst = 0;
    size_t wi = 0;
    int bad = 0;
    for (size_t i = 0; i < n; i++) {
        double err = fabs(got[i] - ref[i]), tol = rtol * fabs(ref[i]) + atol_rel * scale + 1e-30;
        if (err / tol > worst) { worst = err / tol; wi = i; }
        if (err > tol) bad++;
    }
    if (getenv("VERBOSE")) printf("%-60s worst error/tolerance %.3g\n", what, worst);
    CHECK(bad == 0, "%s: %d of %zu elements off, worst [%zu] %.9g vs %.9g (max |ref| %.3g)",
          what, bad, n, wi, n ? got[wi] : 0.0, n ? ref[wi] : 0.0, scale);
}

/* ---- double-precision references (Hugging Face's definitions, written plainly) ---- */

static void ref_rmsnorm(double *out, const double *x, const double *w, int T, int H, double eps) {
    for (int t = 0; t < T; t++) {
        double ss = 0;
        for (int j = 0; j < H; j++) ss += x[t * H + j] * x[t * H + j];
        double r = 1.0 / sqrt(ss / H + eps);
        for (int j = 0; j < H; j++) out[t * H + j] = x[t * H + j] * r * w[j];
    }
}

/* rotate-half RoPE on the q and k heads of a fused qkv row, angles as fp32 like the runtime */
static void ref_rope(double *qkv, int T, int S, int heads, int kv, int hd, float theta) {
    int half = hd / 2, width = (heads + 2 * kv) * hd;
    for (int t = 0; t < T; t++)
        for (int h = 0; h < heads + kv; h++) {
            double *a = qkv + (size_t)t * width + h * hd;
            for (int i = 0; i < half; i++) {
                float inv = 1.0f / powf(theta, (float)(2 * i) / (float)hd);
                float ang = (float)(t % S) * inv;
                double c = cosf(ang), s = sinf(ang), x1 = a[i], x2 = a[i + half];
                a[i] = x1 * c - x2 * s;
                a[i + half] = x2 * c + x1 * s;
            }
        }
}

static void ref_attention(double *out, double *lse, const double *qkv, int G, int S, int heads,
                          int kv, int hd) {
    int width = (heads + 2 * kv) * hd, qd = heads * hd, rep = heads / kv;
    double scale = 1.0 / sqrt((double)hd);
    double *p = malloc((size_t)S * sizeof *p);
    for (int g = 0; g < G; g++)
        for (int h = 0; h < heads; h++)
            for (int i = 0; i < S; i++) {
                const double *q = qkv + ((size_t)g * S + i) * width + h * hd;
                double m = -INFINITY, sum = 0;
                for (int j = 0; j <= i; j++) {
                    const double *k = qkv + ((size_t)g * S + j) * width + (heads + h / rep) * hd;
                    double s = 0;
                    for (int d = 0; d < hd; d++) s += q[d] * k[d];
                    p[j] = s * scale;
                    m = fmax(m, p[j]);
                }
                for (int j = 0; j <= i; j++) { p[j] = exp(p[j] - m); sum += p[j]; }
                double *o = out + ((size_t)g * S + i) * qd + h * hd;
                for (int d = 0; d < hd; d++) o[d] = 0;
                for (int j = 0; j <= i; j++) {
                    const double *v = qkv + ((size_t)g * S + j) * width + (heads + kv + h / rep) * hd;
                    for (int d = 0; d < hd; d++) o[d] += p[j] / sum * v[d];
                }
                if (lse) lse[((size_t)g * heads + h) * S + i] = m + log(sum);
            }
    free(p);
}

static void ref_swiglu(double *h, const double *gu, int T, int F) {
    for (int t = 0; t < T; t++)
        for (int j = 0; j < F; j++) {
            double g = gu[(size_t)t * 2 * F + j], u = gu[(size_t)t * 2 * F + F + j];
            h[(size_t)t * F + j] = g / (1 + exp(-g)) * u;
        }
}

static double ref_crossentropy(const double *logits, const int *targets, int T, int V) {
    double total = 0;
    for (int t = 0; t < T; t++) {
        if (targets[t] < 0) continue;
        const double *l = logits + (size_t)t * V;
        double m = l[0], s = 0;
        for (int v = 1; v < V; v++) m = fmax(m, l[v]);
        for (int v = 0; v < V; v++) s += exp(l[v] - m);
        total += m + log(s) - l[targets[t]];
    }
    return total;
}

/* y[T, N] (+)= x[T, K] W[N, K]^T */
static void ref_matmul(double *y, const double *x, const double *w, int T, int K, int N, int acc) {
    for (int t = 0; t < T; t++)
        for (int n = 0; n < N; n++) {
            double s = acc ? y[(size_t)t * N + n] : 0;
            for (int k = 0; k < K; k++) s += x[(size_t)t * K + k] * w[(size_t)n * K + k];
            y[(size_t)t * N + n] = s;
        }
}

/* The whole model as one chunk (first and last), parameters in wp_chunk_tensors order. Returns
 * the summed token loss. */
static double ref_model(const WpConfig *c, const double *P, const int *tokens, const int *targets) {
    int T = c->mbs * c->seq, H = c->hidden, F = c->ffn, V = c->vocab, hd = c->head_dim;
    int qd = c->heads * hd, width = (c->heads + 2 * c->kv_heads) * hd;
    double *x = malloc(sizeof(double) * T * H), *xn = malloc(sizeof(double) * T * H);
    double *qkv = malloc(sizeof(double) * T * width), *att = malloc(sizeof(double) * T * qd);
    double *gu = malloc(sizeof(double) * T * 2 * F), *h = malloc(sizeof(double) * T * F);
    double *logits = malloc(sizeof(double) * T * V);
    const double *p = P, *embed = P;
    for (int t = 0; t < T; t++) memcpy(x + (size_t)t * H, embed + (size_t)tokens[t] * H, sizeof(double) * H);
    p += (size_t)V * H;
    for (int l = 0; l < c->layers; l++) {
        const double *ln1 = p, *wqkv = ln1 + H, *wo = wqkv + (size_t)width * H, *ln2 = wo + (size_t)H * qd;
        const double *wgu = ln2 + H, *wd = wgu + (size_t)2 * F * H;
        p = wd + (size_t)H * F;
        ref_rmsnorm(xn, x, ln1, T, H, c->eps);
        ref_matmul(qkv, xn, wqkv, T, H, width, 0);
        ref_rope(qkv, T, c->seq, c->heads, c->kv_heads, hd, c->rope_theta);
        ref_attention(att, NULL, qkv, c->mbs, c->seq, c->heads, c->kv_heads, hd);
        ref_matmul(x, att, wo, T, qd, H, 1);
        ref_rmsnorm(xn, x, ln2, T, H, c->eps);
        ref_matmul(gu, xn, wgu, T, H, 2 * F, 0);
        ref_swiglu(h, gu, T, F);
        ref_matmul(x, h, wd, T, F, H, 1);
    }
    ref_rmsnorm(xn, x, p, T, H, c->eps);
    p += H;
    ref_matmul(logits, xn, c->tied ? embed : p, T, H, V, 0);
    double loss = ref_crossentropy(logits, targets, T, V);
    free(x); free(xn); free(qkv); free(att); free(gu); free(h); free(logits);
    return loss;
}

/* ---- the pieces ---- */

static void test_rmsnorm(void) {
    int T = 5, H = 37;
    float x[5 * 37], w[37], out[5 * 37], rstd[5], R[5 * 37], dx[5 * 37], dx0[5 * 37], dw[37], dw0[37];
    fill(x, T * H, 1.5); fill(w, H, 1.0); fill(R, T * H, 1.0); fill(dx0, T * H, 1.0); fill(dw0, H, 1.0);
    for (int j = 0; j < H; j++) w[j] += 1.0f;
    double eps = 1e-5;
    rmsnorm_forward(out, rstd, x, w, T, H, (float)eps);
    double *xd = to_double(x, T * H), *wd = to_double(w, H), ref[5 * 37];
    ref_rmsnorm(ref, xd, wd, T, H, eps);
    double err = 0;
    for (int i = 0; i < T * H; i++) err = fmax(err, fabs(out[i] - ref[i]));
    CHECK(err < 1e-5, "rmsnorm forward: max error %g", err);
    /* backward accumulates: start from dx0, dw0 */
    memcpy(dx, dx0, sizeof dx); memcpy(dw, dw0, sizeof dw);
    rmsnorm_backward(dx, dw, R, x, w, rstd, T, H);
    double gx[5 * 37], gw[37], h = 1e-6;
    for (int i = 0; i < T * H; i++) {
        double o = xd[i];
        xd[i] = o + h; ref_rmsnorm(ref, xd, wd, T, H, eps); double lp = dot_fd(ref, R, T * H);
        xd[i] = o - h; ref_rmsnorm(ref, xd, wd, T, H, eps); double lm = dot_fd(ref, R, T * H);
        xd[i] = o;
        gx[i] = (lp - lm) / (2 * h) + dx0[i];
    }
    for (int j = 0; j < H; j++) {
        double o = wd[j];
        wd[j] = o + h; ref_rmsnorm(ref, xd, wd, T, H, eps); double lp = dot_fd(ref, R, T * H);
        wd[j] = o - h; ref_rmsnorm(ref, xd, wd, T, H, eps); double lm = dot_fd(ref, R, T * H);
        wd[j] = o;
        gw[j] = (lp - lm) / (2 * h) + dw0[j];
    }
    compare_grad("rmsnorm dx", dx, gx, T * H, 1e-4, 1e-5);
    compare_grad("rmsnorm dw", dw, gw, H, 1e-4, 1e-5);
    free(xd); free(wd);
}

static void test_rope(void) {
    int G = 2, S = 9, T = G * S, heads = 3, kv = 1, hd = 8, width = (heads + 2 * kv) * hd;
    float theta = 10000.0f;
    size_t n = (size_t)T * width;
    float *qkv = malloc(n * 4), *R = malloc(n * 4), *d = malloc(n * 4);
    float cs[9 * 4], sn[9 * 4];
    fill(qkv, n, 1.0); fill(R, n, 1.0);
    wp_rope_tables(cs, sn, S, hd, theta, NULL);
    double *qd = to_double(qkv, n), *ref = malloc(n * sizeof *ref), *g = malloc(n * sizeof *g);
    rope_forward(qkv, cs, sn, T, S, heads, kv, hd);
    memcpy(ref, qd, n * sizeof *ref);
    ref_rope(ref, T, S, heads, kv, hd, theta);
    double err = 0;
    for (size_t i = 0; i < n; i++) err = fmax(err, fabs(qkv[i] - ref[i]));
    CHECK(err < 1e-6, "rope forward: max error %g", err);
    memcpy(d, R, n * 4);
    rope_backward(d, cs, sn, T, S, heads, kv, hd);
    double h = 1e-6;
    for (size_t i = 0; i < n; i++) {
        double o = qd[i];
        memcpy(ref, qd, n * sizeof *ref); ref[i] = o + h; ref_rope(ref, T, S, heads, kv, hd, theta);
        double lp = dot_fd(ref, R, n);
        memcpy(ref, qd, n * sizeof *ref); ref[i] = o - h; ref_rope(ref, T, S, heads, kv, hd, theta);
        double lm = dot_fd(ref, R, n);
        g[i] = (lp - lm) / (2 * h);
    }
    compare_grad("rope dqkv", d, g, n, 1e-5, 1e-6);
    free(qkv); free(R); free(d); free(qd); free(ref); free(g);
}

/* Attention on G sequences of S tokens; S not a multiple of the tile size exercises the tails.
 * nsample inputs are checked by finite differences (all when nsample >= the input size). */
static void test_attention(int G, int S, int heads, int kv, int hd, int nsample, const char *tiles) {
    int T = G * S, width = (heads + 2 * kv) * hd, qd = heads * hd;
    size_t n = (size_t)T * width, no = (size_t)T * qd, nl = (size_t)G * heads * S;
    float *qkv = malloc(n * 4), *out = malloc(no * 4), *lse = malloc(nl * 4), *R = malloc(no * 4);
    float *dqkv = malloc(n * 4);
    int nt = omp_get_max_threads();
    float *work = malloc(attention_work_floats(G, S, heads, kv, hd, nt) * 4);
    fill(qkv, n, 2.0); fill(R, no, 1.0);   /* scale 2: peaked softmaxes, not uniform ones */
    attention_force_tiles(tiles);
    attention_forward(out, lse, qkv, G, S, heads, kv, hd, work, nt, 0);
    double *qd_ = to_double(qkv, n), *ref = malloc(no * sizeof *ref), *lref = malloc(nl * sizeof *lref);
    ref_attention(ref, lref, qd_, G, S, heads, kv, hd);
    double err = 0, lerr = 0;
    for (size_t i = 0; i < no; i++) err = fmax(err, fabs(out[i] - ref[i]));
    for (size_t i = 0; i < nl; i++) lerr = fmax(lerr, fabs(lse[i] - lref[i]));
    char what[96];
    snprintf(what, sizeof what, "attention G=%d S=%d heads=%d kv=%d hd=%d tiles %s", G, S, heads, kv,
             hd, tiles ? tiles : "best");
    CHECK(err < 2e-5 && lerr < 2e-5, "%s forward: max error %g, lse %g", what, err, lerr);
    attention_backward(dqkv, R, out, lse, qkv, G, S, heads, kv, hd, work, nt, 0);
    int m = nsample < (int)n ? nsample : (int)n;
    float *got = malloc(m * 4);
    double *g = malloc(m * sizeof *g), h = 1e-6;
    for (int s = 0; s < m; s++) {
        size_t i = m == (int)n ? (size_t)s : (size_t)((urand() + 1) / 2 * n) % n;
        double o = qd_[i];
        qd_[i] = o + h; ref_attention(ref, NULL, qd_, G, S, heads, kv, hd); double lp = dot_fd(ref, R, no);
        qd_[i] = o - h; ref_attention(ref, NULL, qd_, G, S, heads, kv, hd); double lm = dot_fd(ref, R, no);
        qd_[i] = o;
        g[s] = (lp - lm) / (2 * h);
        got[s] = dqkv[i];
    }
    snprintf(what + strlen(what), sizeof what - strlen(what), " dqkv");
    compare_grad(what, got, g, m, 1e-4, 1e-5);
    free(qkv); free(out); free(lse); free(R); free(dqkv); free(work); free(qd_); free(ref);
    free(lref); free(got); free(g);
    attention_force_tiles(NULL);
}

static void test_swiglu(void) {
    int T = 4, F = 37;
    size_t n = (size_t)T * 2 * F, nh = (size_t)T * F;
    float gu[4 * 74], h[4 * 37], R[4 * 37], dgu[4 * 74];
    fill(gu, n, 4.0); fill(R, nh, 1.0);
    swiglu_forward(h, gu, T, F);
    double *gd = to_double(gu, n), ref[4 * 37], g[4 * 74], eps = 1e-6;
    ref_swiglu(ref, gd, T, F);
    double err = 0;
    for (size_t i = 0; i < nh; i++) err = fmax(err, fabs(h[i] - ref[i]) / (1 + fabs(ref[i])));
    CHECK(err < 1e-6, "swiglu forward: max error %g", err);
    swiglu_backward(dgu, R, gu, T, F);
    for (size_t i = 0; i < n; i++) {
        double o = gd[i];
        gd[i] = o + eps; ref_swiglu(ref, gd, T, F); double lp = dot_fd(ref, R, nh);
        gd[i] = o - eps; ref_swiglu(ref, gd, T, F); double lm = dot_fd(ref, R, nh);
        gd[i] = o;
        g[i] = (lp - lm) / (2 * eps);
    }
    compare_grad("swiglu dgu", dgu, g, n, 1e-4, 1e-6);
    free(gd);
}

static void test_crossentropy(void) {
    int T = 6, V = 29;
    int targets[6] = { 3, 0, 28, -1, 7, 7 };   /* -1: ignored */
    float logits[6 * 29], lse[6], d[6 * 29], scale = 0.2f;
    fill(logits, T * V, 5.0);
    double loss = crossentropy_forward(lse, logits, targets, T, V);
    double *ld = to_double(logits, T * V), g[6 * 29], h = 1e-6;
    double ref = ref_crossentropy(ld, targets, T, V);
    CHECK_CLOSE(loss, ref, 1e-6, 0, "cross-entropy forward");
    for (int t = 0; t < T; t++) {   /* every row's log-sum-exp, the ignored one's too */
        double m = ld[t * V], sum = 0;
        for (int v = 0; v < V; v++) m = fmax(m, ld[t * V + v]);
        for (int v = 0; v < V; v++) sum += exp(ld[t * V + v] - m);
        CHECK_CLOSE(lse[t], m + log(sum), 2e-7, 0, "cross-entropy log-sum-exp");
    }
    memcpy(d, logits, sizeof d);
    crossentropy_backward(d, lse, targets, T, V, scale, 0);
    for (int i = 0; i < T * V; i++) {
        double o = ld[i];
        ld[i] = o + h; double lp = ref_crossentropy(ld, targets, T, V);
        ld[i] = o - h; double lm = ref_crossentropy(ld, targets, T, V);
        ld[i] = o;
        g[i] = scale * (lp - lm) / (2 * h);
    }
    compare_grad("cross-entropy dlogits", d, g, T * V, 1e-5, 1e-6);
    /* bf16: the same gradient, each element rounded to bf16 */
    float d16[6 * 29];
    memcpy(d16, logits, sizeof d16);
    crossentropy_backward(d16, lse, targets, T, V, scale, 1);
    int same = 1;
    for (int i = 0; i < T * V; i++) same &= d16[i] == wp_bf16_round(d[i]);
    CHECK(same, "cross-entropy bf16 dlogits are not the fp32 ones rounded");
    free(ld);
}

/* ---- the whole model ---- */

static void test_model_fd(int tied) {
    WpConfig c = tiny_config(tied);
    int T = c.mbs * c.seq;
    WpChunk k = wp_chunk_make(&c, 0, 0, c.layers, 1, 1);
    float *params = malloc(k.nparams * 4), *grad = calloc(k.nparams, 4);
    int tokens[14], targets[14];
    test_params(&c, &k, params);
    make_batch(&c, tokens, targets);
    int one[1] = { c.layers };
    double loss = run_chunked(&c, params, tokens, targets, one, 1, 0, grad);
    double *pd = to_double(params, k.nparams), *fd = malloc(k.nparams * sizeof *fd), h = 1e-6;
    double ref = ref_model(&c, pd, tokens, targets) / T;
    CHECK_CLOSE(loss, ref, 2e-6, 0, tied ? "tied model loss vs double reference" : "model loss vs double reference");
    for (size_t i = 0; i < k.nparams; i++) {   /* every parameter */
        double o = pd[i];
        pd[i] = o + h; double lp = ref_model(&c, pd, tokens, targets);
        pd[i] = o - h; double lm = ref_model(&c, pd, tokens, targets);
        pd[i] = o;
        fd[i] = (lp - lm) / (2 * h) / T;
    }
    int nt = wp_chunk_tensors(&c, &k, NULL);
    WpTensor *t = malloc(nt * sizeof *t);
    wp_chunk_tensors(&c, &k, t);
    for (int i = 0; i < nt; i++) {
        char what[120];
        snprintf(what, sizeof what, "%sd %s", tied ? "tied: " : "", t[i].name);
        compare_grad(what, grad + t[i].offset, fd + t[i].offset, t[i].rows * t[i].cols, 1e-4, 2e-5);
    }
    free(t); free(params); free(grad); free(pd); free(fd);
}

/* Recompute by layer on chunks of several layers gives the same bits as no recompute: loss and
 * every gradient (each recomputed tensor rounded as the first time; in fp32, the same operations). */
static void test_recompute_identical(void) {
    WpConfig c = tiny_config(0);
    c.layers = 4;
    WpChunk k = wp_chunk_make(&c, 0, 0, c.layers, 1, 1);
    float *params = malloc(k.nparams * 4), *g0 = calloc(k.nparams, 4), *g = calloc(k.nparams, 4);
    int tokens[14], targets[14];
    test_params(&c, &k, params);
    make_batch(&c, tokens, targets);
    double l0 = run_chunked(&c, params, tokens, targets, (int[]){ 4 }, 1, 0, g0);
    const int splits[3][3] = { { 4 }, { 3, 1 }, { 1, 3 } }, n[3] = { 1, 2, 2 };
    for (int w = 0; w < 3; w++) {
        memset(g, 0, k.nparams * 4);
        double l = run_chunked(&c, params, tokens, targets, splits[w], n[w], 1, g);
        CHECK(l == l0 && !memcmp(g, g0, k.nparams * 4),
              "4 layers as %d chunk(s) of %d first, recompute: loss %.9g vs %.9g, gradient differs by %g",
              n[w], splits[w][0], l, l0, max_rel_diff(g, g0, k.nparams));
    }
    free(params); free(g0); free(g);
}

static void test_chunking_and_recompute(void) {
    WpConfig c = tiny_config(0);
    WpChunk k = wp_chunk_make(&c, 0, 0, c.layers, 1, 1);
    float *params = malloc(k.nparams * 4);
    float *g1 = calloc(k.nparams, 4), *g2 = calloc(k.nparams, 4), *g1r = calloc(k.nparams, 4), *g2r = calloc(k.nparams, 4);
    int tokens[14], targets[14];
    test_params(&c, &k, params);
    make_batch(&c, tokens, targets);
    int one[1] = { 2 }, two[2] = { 1, 1 };
    double l1 = run_chunked(&c, params, tokens, targets, one, 1, 0, g1);
    double l2 = run_chunked(&c, params, tokens, targets, two, 2, 0, g2);
    double l1r = run_chunked(&c, params, tokens, targets, one, 1, 1, g1r);
    double l2r = run_chunked(&c, params, tokens, targets, two, 2, 1, g2r);
    CHECK_CLOSE(l2, l1, 1e-6, 0, "loss: 2 chunks vs 1");
    CHECK_CLOSE(l1r, l1, 1e-6, 0, "loss: recompute vs not");
    CHECK_CLOSE(l2r, l1, 1e-6, 0, "loss: 2 chunks, recompute vs 1 chunk");
    double d2 = max_rel_diff(g2, g1, k.nparams), d1r = max_rel_diff(g1r, g1, k.nparams);
    double d2r = max_rel_diff(g2r, g1, k.nparams);
    CHECK(d2 <= 1e-6, "gradient: 2 chunks vs 1 differ by %g (relative to the largest)", d2);
    CHECK(d1r <= 1e-6, "gradient: recompute vs not differ by %g", d1r);
    CHECK(d2r <= 1e-6, "gradient: 2 chunks with recompute vs 1 chunk differ by %g", d2r);
    printf("chunking: loss %.9f; |2 chunks - 1| %.3g, |recompute - not| %.3g (%s)\n", l1, d2, d1r,
           d2 == 0 && d1r == 0 && d2r == 0 ? "bit-identical" : "not bit-identical");
    free(params); free(g1); free(g2); free(g1r); free(g2r);
}

/* Backward accumulates into dparams: two backward passes of the same micro-batch give twice one. */
static void test_accumulation(void) {
    WpConfig c = tiny_config(0);
    int T = c.mbs * c.seq;
    WpChunk k = wp_chunk_make(&c, 0, 0, c.layers, 1, 1);
    float *params = malloc(k.nparams * 4), *g = calloc(k.nparams, 4), *g2 = calloc(k.nparams, 4);
    float *stash = malloc(wp_stash_floats(&c, &k, 0) * 4);
    int tokens[14], targets[14];
    test_params(&c, &k, params);
    make_batch(&c, tokens, targets);
    WpScratch *s = wp_scratch_new(&c, c.layers);
    double loss = 0;
    wp_chunk_forward(&c, &k, params, tokens, targets, NULL, NULL, stash, 0, s, &loss);
    wp_chunk_backward(&c, &k, params, tokens, targets, stash, 0, NULL, NULL, g, 1.0f / T, s);
    wp_chunk_backward(&c, &k, params, tokens, targets, stash, 0, NULL, NULL, g2, 1.0f / T, s);
    wp_chunk_backward(&c, &k, params, tokens, targets, stash, 0, NULL, NULL, g2, 1.0f / T, s);
    for (size_t i = 0; i < k.nparams; i++) g[i] *= 2;
    CHECK(max_rel_diff(g2, g, k.nparams) < 1e-6, "two backward passes do not add up");
    wp_scratch_free(s);
    free(params); free(g); free(g2); free(stash);
}

/* Layout: tensors tile the chunk's parameters; init gives the same tensor whatever the chunking. */
static void test_layout_and_init(void) {
    WpConfig c = tiny_config(0);
    c.layers = 3;
    WpChunk whole = wp_chunk_make(&c, 0, 0, 3, 1, 1);
    WpChunk parts[2] = { wp_chunk_make(&c, 0, 0, 2, 1, 0), wp_chunk_make(&c, 1, 2, 1, 0, 1) };
    CHECK(parts[0].nparams + parts[1].nparams == whole.nparams, "chunk sizes do not add up");
    CHECK(whole.nparams == (size_t)2 * c.vocab * c.hidden + c.hidden + 3 * wp_layer_nparams(&c),
          "nparams %zu", whole.nparams);
    WpTensor tw[40], tp[40];
    int nw = wp_chunk_tensors(&c, &whole, tw);
    CHECK(nw == 1 + 9 * 3 + 2, "%d tensors", nw);
    size_t off = 0;
    for (int i = 0; i < nw; i++) { CHECK(tw[i].offset == off, "%s offset", tw[i].name); off += tw[i].rows * tw[i].cols; }
    CHECK(off == whole.nparams, "tensors cover %zu of %zu", off, whole.nparams);
    CHECK(!strcmp(tw[1].name, "model.layers.0.input_layernorm.weight") && tw[1].no_decay, "%s", tw[1].name);
    CHECK(!strcmp(tw[nw - 1].name, "lm_head.weight"), "%s", tw[nw - 1].name);
    float *pw = malloc(whole.nparams * 4);
    wp_chunk_init(&c, &whole, pw, 42);
    double sum2 = 0; size_t n2 = 0;
    for (size_t j = 0; j < tw[0].rows * tw[0].cols; j++) { sum2 += pw[j] * (double)pw[j]; n2++; }
    CHECK(fabs(sqrt(sum2 / n2) - 0.02) < 0.002, "embedding std %g", sqrt(sum2 / n2));
    CHECK(pw[tw[1].offset] == 1.0f, "norm weights start at 1");
    int same = 1;
    for (int k = 0; k < 2; k++) {
        float *pp = malloc(parts[k].nparams * 4);
        wp_chunk_init(&c, &parts[k], pp, 42);
        int np = wp_chunk_tensors(&c, &parts[k], tp);
        for (int a = 0; a < np; a++)
            for (int b = 0; b < nw; b++)
                if (!strcmp(tp[a].name, tw[b].name))
                    same &= !memcmp(pp + tp[a].offset, pw + tw[b].offset, tp[a].rows * tp[a].cols * 4);
        free(pp);
    }
    CHECK(same, "init depends on the chunking");
    c.tied = 1;
    WpChunk tied = wp_chunk_make(&c, 0, 0, 3, 1, 1);
    CHECK(tied.nparams == whole.nparams - (size_t)c.vocab * c.hidden, "tied nparams");
    free(pw);
}

/* The LM head in blocks of tokens (model.c): any block size gives the loss and gradients of one
 * block (the whole micro-batch) up to the order of the sums. Block 5 of 14 tokens leaves a tail
 * block of 4; block 1 is the extreme. */
static void test_ce_blocks(void) {
    WpConfig c = tiny_config(0);
    WpChunk k = wp_chunk_make(&c, 0, 0, c.layers, 1, 1);
    CHECK(wp_ce_block_tokens(&c) == c.mbs * c.seq, "tiny model: one block (%d tokens)", wp_ce_block_tokens(&c));
    float *params = malloc(k.nparams * 4), *g1 = calloc(k.nparams, 4), *g5 = calloc(k.nparams, 4);
    float *gb = calloc(k.nparams, 4), *g5r = calloc(k.nparams, 4);
    int tokens[14], targets[14];
    test_params(&c, &k, params);
    make_batch(&c, tokens, targets);
    targets[3] = -1;   /* an ignored token inside a block */
    int one[1] = { 2 }, two[2] = { 1, 1 };
    RunOpts whole = { WP_FP32, 0 }, b5 = { WP_FP32, 5 }, b1 = { WP_FP32, 1 };
    double l1 = run_chunked_opts(&c, params, tokens, targets, one, 1, 0, g1, &whole);
    double l5 = run_chunked_opts(&c, params, tokens, targets, two, 2, 0, g5, &b5);
    double lb = run_chunked_opts(&c, params, tokens, targets, one, 1, 0, gb, &b1);
    double l5r = run_chunked_opts(&c, params, tokens, targets, two, 2, 1, g5r, &b5);
    CHECK_CLOSE(l5, l1, 1e-6, 0, "loss: head in blocks of 5 tokens vs one block");
    CHECK_CLOSE(lb, l1, 1e-6, 0, "loss: head in blocks of 1 token vs one block");
    CHECK_CLOSE(l5r, l1, 1e-6, 0, "loss: blocks of 5 with recompute vs one block");
    double d5 = max_rel_diff(g5, g1, k.nparams), db = max_rel_diff(gb, g1, k.nparams);
    double d5r = max_rel_diff(g5r, g1, k.nparams);
    CHECK(d5 <= 1e-6 && db <= 1e-6 && d5r <= 1e-6,
          "gradient: head in blocks vs one block differ by %g (5), %g (1), %g (5, recompute)", d5, db, d5r);
    printf("LM head in blocks: |blocks of 5 - one block| %.3g, |blocks of 1 - one block| %.3g\n", d5, db);
    free(params); free(g1); free(g5); free(gb); free(g5r);
}

/* The MLP in tiles of tokens (5 of 14: a shorter last tile; and 1) gives the untiled loss and
 * gradients up to the order of the weight gradients' sums over the tokens (fp32: relative 1e-6),
 * and with recompute (gate/up recomputed tile by tile) the tiled run's bits. */
static void test_mlp_tiles(void) {
    WpConfig c = tiny_config(0);
    WpChunk k = wp_chunk_make(&c, 0, 0, c.layers, 1, 1);
    CHECK(wp_mlp_tile_tokens(&c) == c.mbs * c.seq, "tiny model: one MLP tile (%d tokens)", wp_mlp_tile_tokens(&c));
    float *params = malloc(k.nparams * 4), *g1 = calloc(k.nparams, 4), *g5 = calloc(k.nparams, 4);
    float *gt1 = calloc(k.nparams, 4), *g5r = calloc(k.nparams, 4);
    int tokens[14], targets[14];
    test_params(&c, &k, params);
    make_batch(&c, tokens, targets);
    int one[1] = { 2 }, two[2] = { 1, 1 };
    double l1 = run_chunked(&c, params, tokens, targets, one, 1, 0, g1);
    WpConfig c5 = c, ct1 = c;
    c5.mlp_tile = 5;
    ct1.mlp_tile = 1;
    CHECK(wp_mlp_tile_tokens(&c5) == 5 && wp_workspace_part_floats(&c5, &k, 0, WP_WS_DGU) == 5 * 2 * (size_t)c.ffn,
          "tiles of 5: the SwiGLU gradient is one tile's");
    double l5 = run_chunked(&c5, params, tokens, targets, two, 2, 0, g5);
    double lt1 = run_chunked(&ct1, params, tokens, targets, one, 1, 0, gt1);
    double l5r = run_chunked(&c5, params, tokens, targets, two, 2, 1, g5r);
    CHECK_CLOSE(l5, l1, 1e-6, 0, "loss: MLP in tiles of 5 tokens vs untiled");
    CHECK_CLOSE(lt1, l1, 1e-6, 0, "loss: MLP in tiles of 1 token vs untiled");
    double d5 = max_rel_diff(g5, g1, k.nparams), dt1 = max_rel_diff(gt1, g1, k.nparams);
    CHECK(d5 <= 1e-6 && dt1 <= 1e-6, "gradient: MLP in tiles vs untiled differ by %g (5), %g (1)", d5, dt1);
    CHECK(l5r == l5 && !memcmp(g5r, g5, k.nparams * 4),
          "tiles of 5 with recompute: not the bits of tiles of 5 without (gradient differs by %g)",
          max_rel_diff(g5r, g5, k.nparams));
    printf("MLP in tiles: |tiles of 5 - untiled| %.3g, |tiles of 1 - untiled| %.3g\n", d5, dt1);
    free(params); free(g1); free(g5); free(gt1); free(g5r);
}

/* The sizes the planner reads: the logits exist one block at a time, the stash keeps a
 * log-sum-exp per token instead of the softmax, and the bf16 byte counts halve activations only. */
static void test_memory_sizes(void) {
    WpConfig c = { .hidden = 1024, .layers = 32, .heads = 32, .kv_heads = 32, .head_dim = 32,
                   .ffn = 2816, .vocab = 32000, .eps = 1e-5f, .rope_theta = 10000.0f, .tied = 0,
                   .seq = 4096, .mbs = 16 };
    size_t T = (size_t)c.mbs * c.seq, H = c.hidden;
    WpChunk mid = wp_chunk_make(&c, 1, 8, 8, 0, 0), last = wp_chunk_make(&c, 3, 24, 8, 0, 1);
    WpChunk head = wp_chunk_make(&c, 3, 32, 0, 0, 1);
    int B = wp_ce_block_tokens(&c);
    size_t logits = wp_workspace_part_floats(&c, &last, 0, WP_WS_LOGITS);
    CHECK(B == 256 && logits == (size_t)B * c.vocab, "H1024 S4096 G16: blocks of %d tokens, %zu logits", B, logits);
    CHECK(logits * 4 <= ((size_t)32 << 20), "a logits block is %zu bytes", logits * 4);
    CHECK(wp_workspace_part_floats(&c, &mid, 0, WP_WS_LOGITS) == 0, "no logits off the LM-head chunk");
    /* recompute by layer: the stash keeps each layer's input (and the head's part), the workspace
     * one layer's stash with one MLP tile of gu, refilled before that layer's backward */
    size_t F = c.ffn, tile = (size_t)wp_mlp_tile_tokens(&c), cut = T * H + (T - tile) * 2 * F;   /* x, gu beyond a tile */
    CHECK(tile == WP_MLP_TILE_DEFAULT, "T = 65536: MLP tiles of %zu tokens", tile);
    CHECK(wp_workspace_part_floats(&c, &mid, 0, WP_WS_RESTASH) == 0 &&
          wp_workspace_part_floats(&c, &mid, 1, WP_WS_RESTASH) == wp_layer_stash_floats(&c) - cut &&
          wp_workspace_part_floats(&c, &last, 1, WP_WS_RESTASH) == wp_layer_stash_floats(&c) - cut,
          "the recompute stash is one layer's stash without x, with one tile of gu (%zu floats), with recompute only: %zu",
          wp_layer_stash_floats(&c) - cut, wp_workspace_part_floats(&c, &mid, 1, WP_WS_RESTASH));
    CHECK(wp_workspace_part_floats(&c, &head, 1, WP_WS_RESTASH) == 0, "a chunk without layers recomputes nothing");
    WpChunk one = wp_chunk_make(&c, 1, 8, 1, 0, 0);
    CHECK(wp_workspace_part_bytes(&c, &mid, 1, WP_WS_RESTASH, WP_BF16) == wp_layer_stash_bytes(&c, WP_BF16) - 2 * cut &&
          wp_layer_stash_bytes(&c, WP_BF16) == wp_stash_bytes(&c, &one, 0, WP_BF16),
          "the recompute stash in bytes is one layer's stash with one tile of gu");
    /* no [T, F] temporary: the MLP's are one tile's */
    CHECK(wp_workspace_part_floats(&c, &mid, 1, WP_WS_H) == tile * F && wp_workspace_part_floats(&c, &mid, 1, WP_WS_DH) == tile * F &&
          wp_workspace_part_floats(&c, &mid, 1, WP_WS_DGU) == 2 * tile * F, "the MLP's temporaries are one tile's");
    CHECK(wp_stash_floats(&c, &mid, 1) == 8 * T * H, "recompute: a middle chunk keeps its 8 layers' inputs");
    CHECK(wp_stash_floats(&c, &last, 1) == 8 * T * H + T * H + 2 * T && wp_stash_floats(&c, &head, 1) == T * H + 2 * T,
          "recompute: the last chunk keeps its layers' inputs and the head's part (xf, rstd, lse)");
    CHECK(wp_stash_bytes(&c, &last, 1, WP_BF16) == 2 * 9 * T * H + 4 * 2 * T, "recompute: bf16 stash bytes");
    WpChunkStashLayout rl = wp_chunk_stash_layout(&c, &last, 1), fl = wp_chunk_stash_layout(&c, &last, 0);
    CHECK(rl.layer == T * H && rl.xf == 8 * T * H && rl.lse == rl.rstdf + T && rl.end == wp_stash_floats(&c, &last, 1) &&
          fl.layer == wp_layer_stash_floats(&c) && fl.xf == 8 * fl.layer && fl.end == wp_stash_floats(&c, &last, 0) &&
          fl.lse + T == fl.end && rl.lse + T == rl.end, "the stash layouts with and without recompute");
    CHECK(wp_stash_floats(&c, &head, 0) == T * H + 2 * T, "head-only stash: xf, rstd, lse");
    CHECK(wp_stash_floats(&c, &last, 0) == wp_stash_floats(&c, &mid, 0) + T * H + 2 * T,
          "last chunk's stash: its layers, then xf, rstd, lse");
    CHECK(wp_workspace_part_floats(&c, &head, 0, WP_WS_H) == 0 && wp_workspace_part_floats(&c, &head, 0, WP_WS_XN) == T * H,
          "head-only chunk: no layer temporaries, a norm's output");
    /* bytes: fp32 is 4 per element; bf16 halves activations, not the statistics */
    CHECK(wp_stash_bytes(&c, &last, 0, WP_FP32) == 4 * wp_stash_floats(&c, &last, 0), "fp32 stash bytes");
    WpLayerStashLayout l = wp_layer_stash_layout(&c);
    size_t stat = 8 * ((l.qkv - l.rstd1) + (l.x2 - l.lse) + (l.gu - l.rstd2)) + 2 * T;
    size_t act = wp_stash_floats(&c, &last, 0) - stat;
    CHECK(wp_stash_bytes(&c, &last, 0, WP_BF16) == 2 * act + 4 * stat, "bf16 stash bytes");
    CHECK(wp_workspace_bytes(&c, &mid, 0, WP_FP32) == 4 * wp_workspace_floats(&c, &mid, 0), "fp32 workspace bytes");
    CHECK(wp_workspace_bytes(&c, &last, 1, WP_BF16) < wp_workspace_bytes(&c, &last, 1, WP_FP32), "bf16 workspace bytes");
    printf("H1024 S4096 G16 V32000: logits %.2f GiB for the whole micro-batch before, a block of %d tokens now: %.1f MiB; "
           "stash of the LM head %.2f GiB -> %.4f GiB\n",
           (double)T * c.vocab * 4 / (1 << 30), B, (double)logits * 4 / (1 << 20),
           (double)(T * H + T + T * c.vocab) * 4 / (1 << 30), (double)wp_stash_floats(&c, &head, 0) * 4 / (1 << 30));
}

int main(void) {
    test_layout_and_init();
    test_rmsnorm();
    test_rope();
    test_swiglu();
    test_crossentropy();
    test_attention(1, 5, 2, 2, 8, 1 << 30, NULL);      /* one partial tile, every input */
    test_attention(2, 150, 4, 2, 16, 150, NULL);       /* GQA, three tiles, the last partial */
    test_attention(1, 128, 4, 1, 8, 60, NULL);         /* multi-query, S a multiple of the tile */
    /* hd 40: column tails in the tile kernels; the AVX2 and plain kernels, which this CPU may
     * not pick by itself */
    test_attention(2, 70, 4, 2, 40, 80, NULL);
    test_attention(2, 70, 4, 2, 40, 80, "avx2");
    test_attention(2, 70, 4, 2, 40, 80, "plain");
    test_model_fd(0);
    test_model_fd(1);
    test_chunking_and_recompute();
    test_accumulation();
    test_ce_blocks();
    test_mlp_tiles();
    test_memory_sizes();
    test_recompute_identical();   /* last: its draws would change the inputs of the others */
    return check_summary("test_grad");
}
