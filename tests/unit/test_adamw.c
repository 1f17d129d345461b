/* AdamW: one and two steps against hand-computed values, decoupled weight decay skipping norms,
 * gradient clipping, a sum of squares independent of the thread count, each schedule's rates at
 * chosen steps, and the table of settings (ranges, the exact text a checkpoint records). */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <omp.h>

#include "cpu/adamw.h"
#include "check.h"

static void test_hand_step(void) {
    WpAdamW o;
    adamw_init(&o, 0.1f, 0, 10);
    float p = 1.0f, g = 0.5f, m = 0, v = 0;
    /* t=1: m = 0.05, v = 0.0125, m^ = 0.5, v^ = 0.25;
     * p = 1*(1 - 0.1*0.1) - 0.1 * 0.5/(0.5 + 1e-8) = 0.99 - 0.1 = 0.89 */
    adamw_update(&o, &p, &g, &m, &v, 1, 0.1f, 0.1f, 1.0f, 1);
    CHECK_CLOSE(m, 0.05, 1e-6, 0, "m after 1");
    CHECK_CLOSE(v, 0.0125, 1e-6, 0, "v after 1");
    CHECK_CLOSE(p, 0.89, 1e-6, 0, "p after 1");
    /* t=2 with g = -0.25: m = 0.045 - 0.025 = 0.02, v = 0.011875 + 0.003125 = 0.015,
     * m^ = 0.02/0.19, v^ = 0.015/0.0975; p = 0.89*0.99 - 0.1*m^/(sqrt(v^) + 1e-8) = 0.854263... */
    g = -0.25f;
    adamw_update(&o, &p, &g, &m, &v, 1, 0.1f, 0.1f, 1.0f, 2);
    double ref = 0.89 * 0.99 - 0.1 * (0.02 / 0.19) / (sqrt(0.015 / 0.0975) + 1e-8);
    CHECK_CLOSE(p, ref, 1e-6, 0, "p after 2");
    CHECK_CLOSE(p, 0.854263, 1e-6, 0, "p after 2 (by hand)");

    /* grad_scale multiplies the gradient before everything: scale 0.5 of g=1 is g=0.5. */
    float p2 = 1.0f, g2 = 1.0f, m2 = 0, v2 = 0;
    adamw_update(&o, &p2, &g2, &m2, &v2, 1, 0.1f, 0.1f, 0.5f, 1);
    CHECK_CLOSE(m2, 0.05, 1e-6, 0, "scaled m");
    CHECK_CLOSE(p2, 0.89, 1e-6, 0, "scaled p");
}

/* Many elements, several steps, against a double-precision implementation of the formula. */
static void test_against_double(void) {
    enum { N = 100000, T = 5 };
    WpAdamW o;
    adamw_init(&o, 3e-3f, 0, 10);
    float *p = malloc(N * sizeof *p), *g = malloc(N * sizeof *g), *m = calloc(N, sizeof *m), *v = calloc(N, sizeof *v);
    double *pd = malloc(N * sizeof *pd), *md = calloc(N, sizeof *md), *vd = calloc(N, sizeof *vd);
    for (int i = 0; i < N; i++) pd[i] = p[i] = sinf((float)i);
    double worst = 0;
    for (int t = 1; t <= T; t++) {
        for (int i = 0; i < N; i++) g[i] = cosf((float)(i * t)) * 0.01f;
        adamw_update(&o, p, g, m, v, N, 3e-3f, 0.1f, 0.7f, t);
        for (int i = 0; i < N; i++) {
            double gi = (double)g[i] * 0.7f;
            md[i] = 0.9 * md[i] + 0.1 * gi;
            vd[i] = 0.95 * vd[i] + 0.05 * gi * gi;
            double mh = md[i] / (1 - pow(0.9, t)), vh = vd[i] / (1 - pow(0.95, t));
            pd[i] = pd[i] * (1 - 3e-3 * 0.1) - 3e-3 * mh / (sqrt(vh) + 1e-8);
        }
    }
    for (int i = 0; i < N; i++) worst = fmax(worst, fabs(p[i] - pd[i]));
    CHECK(worst < 1e-6, "worst |p - p_double| = %g", worst);
    free(p); free(g); free(m); free(v); free(pd); free(md); free(vd);
}

static void test_no_decay(void) {
    WpConfig c = {.hidden = 8, .layers = 2, .heads = 2, .kv_heads = 1, .head_dim = 4, .ffn = 16,
                  .vocab = 32, .eps = 1e-5f, .rope_theta = 10000, .tied = 0, .seq = 4, .mbs = 1};
    WpChunk k = wp_chunk_make(&c, 0, 0, c.layers, 1, 1);
    int nt = wp_chunk_tensors(&c, &k, NULL);
    WpTensor *ts = calloc((size_t)nt, sizeof *ts);
    wp_chunk_tensors(&c, &k, ts);
    float *p = malloc(k.nparams * sizeof *p), *g = calloc(k.nparams, sizeof *g);
    float *m = calloc(k.nparams, sizeof *m), *v = calloc(k.nparams, sizeof *v);
    for (size_t i = 0; i < k.nparams; i++) p[i] = 2.0f;
    WpAdamW o;
    adamw_init(&o, 0.01f, 0, 10);
    o.weight_decay = 0.5f;
    /* Zero gradient: only the decay moves the weights, by a factor 1 - lr*wd = 0.995. */
    adamw_update_chunk(&o, ts, nt, p, g, m, v, 0.01f, 1.0f, 1);
    int nodecay = 0;
    for (int i = 0; i < nt; i++) {
        float want = ts[i].no_decay ? 2.0f : 2.0f * 0.995f;
        size_t n = ts[i].rows * ts[i].cols, bad = 0;
        for (size_t j = 0; j < n; j++) bad += p[ts[i].offset + j] != want;
        nodecay += ts[i].no_decay;
        CHECK(bad == 0, "%s: %zu elements not %g", ts[i].name, bad, want);
        CHECK(ts[i].no_decay == (strstr(ts[i].name, "norm") != NULL), "%s: no_decay flag", ts[i].name);
    }
    CHECK(nodecay == 2 * c.layers + 1, "%d norms", nodecay);
    free(ts); free(p); free(g); free(m); free(v);
}

static void test_clip(void) {
    WpAdamW o;
    adamw_init(&o, 1e-3f, 0, 10);
    float g[2] = {3, 4}, norm = 0;
    double ss = adamw_sumsq(g, 2);
    CHECK(ss == 25.0, "sumsq %g", ss);
    float s = adamw_clip_scale(&o, ss, &norm);
    CHECK(norm == 5.0f, "norm %g", norm);
    CHECK_CLOSE(s, 1.0 / (5.0 + 1e-6), 1e-7, 0, "scale");
    o.clip = 10;
    CHECK(adamw_clip_scale(&o, ss, NULL) == 1.0f, "below the limit");
    o.clip = 0;
    CHECK(adamw_clip_scale(&o, 1e12, &norm) == 1.0f && norm == 1e6f, "clip 0 disables");
    /* Ranks sum their own squares and add them: the same as one sum over everything. */
    CHECK(adamw_sumsq(g, 1) + adamw_sumsq(g + 1, 1) == ss, "split sums");
    CHECK(adamw_sumsq(g, 0) == 0, "empty");
}

static void test_sumsq_threads(void) {
    enum { N = 1000003 };
    float *g = malloc(N * sizeof *g);
    double naive = 0;
    for (int i = 0; i < N; i++) { g[i] = sinf((float)i * 0.37f) * (1 + i % 7); naive += (double)g[i] * g[i]; }
    double s[4];
    int threads[4] = {1, 2, 3, 8};
    for (int k = 0; k < 4; k++) {
        omp_set_num_threads(threads[k]);
        s[k] = adamw_sumsq(g, N);
    }
    omp_set_num_threads(omp_get_num_procs());
    for (int k = 1; k < 4; k++)
        CHECK(memcmp(&s[0], &s[k], sizeof(double)) == 0, "%d threads: %.17g vs %.17g", threads[k], s[k], s[0]);
    CHECK_CLOSE(s[0], naive, 1e-12, 0, "sumsq vs naive");
    free(g);
}

static void test_schedule(void) {
    WpAdamW o;
    adamw_init(&o, 1e-3f, 10, 110);
    CHECK_CLOSE(o.min_lr, 1e-4, 1e-6, 0, "min_lr = 0.1 lr");
    CHECK_CLOSE(adamw_lr(&o, 0), 1e-4, 1e-6, 0, "warm-up step 0");
    CHECK_CLOSE(adamw_lr(&o, 4), 5e-4, 1e-6, 0, "warm-up step 4");
    CHECK_CLOSE(adamw_lr(&o, 9), 1e-3, 1e-6, 0, "end of warm-up");
    CHECK_CLOSE(adamw_lr(&o, 10), 1e-3, 1e-6, 0, "cosine start");
    CHECK_CLOSE(adamw_lr(&o, 60), 5.5e-4, 1e-6, 0, "cosine middle");
    CHECK_CLOSE(adamw_lr(&o, 110), 1e-4, 1e-6, 0, "cosine end");
    CHECK_CLOSE(adamw_lr(&o, 1000), 1e-4, 1e-6, 0, "after the end");
    int mono = 1;
    for (long s = 11; s <= 110; s++) mono &= adamw_lr(&o, s) <= adamw_lr(&o, s - 1);
    CHECK(mono, "cosine not decreasing");
    adamw_init(&o, 1e-3f, 0, 100);
    CHECK(adamw_lr(&o, 0) == 1e-3f, "no warm-up: step 0 at full rate");
    adamw_init(&o, 1e-3f, 5, 5);   /* all warm-up */
    CHECK_CLOSE(adamw_lr(&o, 4), 1e-3, 1e-6, 0, "warm-up only");
    CHECK(isfinite(adamw_lr(&o, 5)), "no division by zero");
}

/* lr 1e-3, min_lr 1e-4, 10 steps of warm-up, 110 in all: 100 steps after the warm-up, in which
 * the rate goes from 1e-3 (step 10) to 1e-4 (step 110); 9e-4 between them. */
static void test_schedules(void) {
    WpAdamW o;
    adamw_init(&o, 1e-3f, 10, 110);
    o.schedule = WP_SCHED_LINEAR;
    CHECK_CLOSE(adamw_lr(&o, 4), 5e-4, 1e-6, 0, "linear: warm-up as cosine's, 1e-3 * 5/10");
    CHECK_CLOSE(adamw_lr(&o, 10), 1e-3, 1e-6, 0, "linear: start");
    /* step 35: 25 of 100 steps done, 1e-4 + 0.75 * 9e-4 = 7.75e-4 */
    CHECK_CLOSE(adamw_lr(&o, 35), 7.75e-4, 1e-6, 0, "linear: a quarter down");
    /* step 60: half way, 1e-4 + 0.5 * 9e-4 = 5.5e-4 (cosine's too: both are symmetric there) */
    CHECK_CLOSE(adamw_lr(&o, 60), 5.5e-4, 1e-6, 0, "linear: half way");
    CHECK_CLOSE(adamw_lr(&o, 109), 1.09e-4, 1e-5, 0, "linear: last step, 1e-4 + 0.01 * 9e-4");
    CHECK_CLOSE(adamw_lr(&o, 500), 1e-4, 1e-6, 0, "linear: after the end");

    o.schedule = WP_SCHED_CONSTANT;
    CHECK_CLOSE(adamw_lr(&o, 5), 6e-4, 1e-6, 0, "constant: warm-up, 1e-3 * 6/10");
    CHECK(adamw_lr(&o, 10) == 1e-3f && adamw_lr(&o, 109) == 1e-3f && adamw_lr(&o, 500) == 1e-3f,
          "constant: lr after the warm-up, at the end and after it");

    /* wsd, decay fraction 0.2: 20 of the 100 steps decay, from step 90 to 110 */
    o.schedule = WP_SCHED_WSD;
    CHECK(adamw_lr(&o, 10) == 1e-3f && adamw_lr(&o, 89) == 1e-3f && adamw_lr(&o, 90) == 1e-3f,
          "wsd: stable until the decay's first step");
    /* step 95: 5 of 20 decay steps done, 1e-4 + 0.75 * 9e-4 = 7.75e-4 */
    CHECK_CLOSE(adamw_lr(&o, 95), 7.75e-4, 1e-6, 0, "wsd: a quarter of the decay");
    CHECK_CLOSE(adamw_lr(&o, 100), 5.5e-4, 1e-6, 0, "wsd: half the decay");
    CHECK_CLOSE(adamw_lr(&o, 110), 1e-4, 1e-6, 0, "wsd: end");
    /* decay fraction 0.25: 25 steps, from step 85; step 97 is 12/25 = 0.48 down: 1e-4 + 0.52 * 9e-4 */
    o.decay_fraction = 0.25f;
    CHECK(adamw_lr(&o, 84) == 1e-3f, "wsd 0.25: stable at step 84");
    CHECK_CLOSE(adamw_lr(&o, 97), 5.68e-4, 1e-6, 0, "wsd 0.25: step 97");
    /* decay fraction 1: wsd is the linear schedule */
    o.decay_fraction = 1.0f;
    CHECK_CLOSE(adamw_lr(&o, 35), 7.75e-4, 1e-6, 0, "wsd 1.0 = linear");
    /* a decay of less than half a step still decays over one step: the last (step 109) at lr, min_lr at 110 */
    o.decay_fraction = 0.001f;
    CHECK(adamw_lr(&o, 109) == 1e-3f && adamw_lr(&o, 110) == o.min_lr, "wsd: a decay rounded to one step");

    int mono = 1;
    for (int k = 0; k < WP_SCHED_COUNT; k++) {
        adamw_init(&o, 1e-3f, 10, 110);
        o.schedule = k;
        for (long s = 11; s <= 120; s++) mono &= adamw_lr(&o, s) <= adamw_lr(&o, s - 1);
        CHECK(mono, "%s: the rate rises after the warm-up", wp_schedule_names[k]);
    }
}

static const WpAdamWSetting *setting(const char *flag) {
    for (int i = 0; i < wp_adamw_nsettings; i++)
        if (!strcmp(wp_adamw_settings[i].flag, flag)) return &wp_adamw_settings[i];
    return NULL;
}

static void test_settings(void) {
    WpAdamW o;
    adamw_init(&o, 1e-3f, 0, 10);
    const WpAdamWSetting *b2 = setting("--beta2"), *eps = setting("--eps"), *sch = setting("--schedule");
    CHECK(b2 && eps && sch && setting("--min-lr") && setting("--beta1") && setting("--decay-fraction"), "the flags");
    CHECK(adamw_setting_parse(&o, b2, "0.999") == 0 && o.beta2 == 0.999f, "beta2 0.999");
    CHECK(adamw_setting_parse(&o, b2, "1") == -1 && adamw_setting_parse(&o, b2, "-0.1") == -1, "beta2 outside [0, 1)");
    /* rounds to 1.0f: the open end, refused */
    CHECK(adamw_setting_parse(&o, b2, "0.999999999") == -1 && o.beta2 == 0.999f, "beta2 rounding to 1 refused, kept");
    CHECK(adamw_setting_parse(&o, eps, "0") == -1 && adamw_setting_parse(&o, eps, "1e-6x") == -1 &&
          adamw_setting_parse(&o, eps, "nan") == -1, "eps 0, junk, NaN");
    CHECK(adamw_setting_parse(&o, sch, "wsd") == 0 && o.schedule == WP_SCHED_WSD, "schedule wsd");
    CHECK(adamw_setting_parse(&o, sch, "cosin") == -1, "schedule misspelt");
    char buf[96];
    adamw_setting_range(b2, buf, sizeof buf);
    CHECK(!strcmp(buf, "a number in [0, 1)"), "range text: %s", buf);
    /* what a checkpoint records reads back to the same float, for every float setting */
    adamw_init(&o, 3.3e-4f, 7, 1234);
    o.eps = 1e-7f;
    o.beta1 = 0.8f;
    for (int i = 0; i < wp_adamw_nsettings; i++) {
        WpAdamW back;
        adamw_init(&back, 0, 0, 0);
        adamw_setting_format(&o, &wp_adamw_settings[i], 1, buf, sizeof buf);
        CHECK(adamw_setting_parse(&back, &wp_adamw_settings[i], buf) == 0, "%s: %s parses", wp_adamw_settings[i].key, buf);
        size_t at = wp_adamw_settings[i].offset;
        CHECK(memcmp((char *)&back + at, (char *)&o + at, 4) == 0, "%s: %s reads back exactly", wp_adamw_settings[i].key, buf);
    }
}

int main(void) {
    test_hand_step();
    test_against_double();
    test_no_decay();
    test_clip();
    test_sumsq_threads();
    test_schedule();
    test_schedules();
    test_settings();
    return check_summary("test_adamw");
}
