/* Context parallelism in the CPU model (cpu/model_cp.h) under mpirun: the C ranks of the job are
 * one group, each holding its S/C tokens of every sequence of one micro-batch, and together must
 * compute what one process computes on the whole sequences (wp_chunk_forward/backward, which
 * every rank also runs alone as the reference). The model is tests/data/tiny8/config.json
 * (8 layers, 4 query heads over 2 kv heads), as two chunks (layers 0-3 with the embedding, 4-7
 * with the head), 2 sequences of S tokens (argument 1; a multiple of 2C), some targets ignored
 * (-100). Compared, with the stash kept, recomputed, offloaded, and with the split backward of the
 * zero-bubble schedules (recompute runs each layer's ring forward again before its backward; the
 * split backward runs the ring's backward in its input half):
 *   - the first chunk's output rows and the input gradient the second chunk returns for them
 *     (each member its rows, at the sequence positions cp_layout_positions gives);
 *   - the loss, summed over the members (comm_allreduce_double);
 *   - every weight gradient of both chunks, summed over the members (comm_allreduce on the group),
 *     the loss scaled by 1 / the whole micro-batch's tokens on every member.
 *
 * Tolerance. The ring computes the same sums as whole-sequence attention in another order: the
 * online softmax's running sums block by block then merged (attention_block_merge), the dK/dV of
 * a block summed member after member round the ring, and a weight gradient's sum over the tokens
 * split into C partial sums then added by the all-reduce. Every other operation is the same on the
 * same rows (norms, products, MLP, loss). Reordering a sum of k fp32 terms moves it by at most
 * about k * 2^-24 of the sum of their magnitudes; the longest sums here are over the tokens of the
 * micro-batch (k = 2S for the weight gradients) and over the keys (k = S), and the difference then
 * travels through the 8 layers forward and back. So the bound, as a fraction of the largest
 * magnitude of each compared tensor (elementwise relative differences are meaningless where the
 * terms cancel): 2S x 8 layers x 2^-24 (S = 64: 6.1e-5; the runs show 1e-7 to 1e-6). A skipped
 * block or a wrong position changes results by 1e-3 and more (test_cp_model.sh shows it: mode
 * "wrong-positions" leaves RoPE at 0 .. S/C and must fail).
 *
 * Usage: mpirun -np C cp_model_test S [wrong-positions] */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "check.h"
#include "common/comm.h"
#include "common/cp_layout.h"
#include "common/modelcfg.h"
#include "cpu/model.h"
#include "cpu/model_cp.h"

enum { G = 2, NCHUNK = 2 };

static int R, C;

/* max |a - b| over max |b|, over every rank (the worst member). */
static double rel_diff(Comm *comm, const float *a, const float *b, size_t n) {
    double d[2] = { 0, 0 };
    for (size_t i = 0; i < n; i++) {
        double e = fabs((double)a[i] - b[i]), m = fabs((double)b[i]);
        if (e > d[0] || e != e) d[0] = e != e ? INFINITY : e;
        if (m > d[1]) d[1] = m;
    }
    double all[2 * 64] = { 0 };
    all[2 * R] = d[0]; all[2 * R + 1] = d[1];
    comm_allreduce_double(comm, all, 2 * C);
    double e = 0, m = 0;
    for (int r = 0; r < C; r++) { if (all[2 * r] > e) e = all[2 * r]; if (all[2 * r + 1] > m) m = all[2 * r + 1]; }
    return m > 0 ? e / m : e;
}

/* dst: the member's rows (width floats each) of src [G * S rows], in its order. */
static void take_rows(float *dst, const float *src, int S, int member, int width) {
    int n = S / C, *pos = malloc((size_t)n * sizeof *pos);
    cp_layout_positions(pos, S, C, member);
    for (int g = 0; g < G; g++)
        for (int j = 0; j < n; j++)
            memcpy(dst + ((size_t)g * n + j) * width, src + ((size_t)g * S + pos[j]) * width, (size_t)width * sizeof(float));
    free(pos);
}

typedef struct {
    float *p[NCHUNK], *g[NCHUNK], *stash[NCHUNK], *keep[NCHUNK], *x, *dx;
    double loss;
} Run;

/* How a run stores and splits its work: the stash kept, recomputed, offloaded, or (split) the
 * zero-bubble schedules' backward in its two halves. */
enum { KEEP, RECOMPUTE, OFFLOAD, SPLIT, NMODES };
static const char *const mode_names[NMODES] = { "kept stash", "recompute", "offload", "split backward" };

/* Forward and backward of both chunks on the tokens given (the whole micro-batch, or a member's). */
static void run(const WpConfig *c, const WpChunk *k, WpScratch *s, const int *tok, const int *tgt, int mode,
                float loss_scale, Run *r) {
    int rc = mode == RECOMPUTE ? WP_RECOMPUTE : mode == OFFLOAD ? WP_RECOMPUTE_OFFLOAD : WP_KEEP_ALL;
    r->loss = 0;
    for (int i = 0; i < NCHUNK; i++) memset(r->g[i], 0, k[i].nparams * sizeof(float));
    wp_chunk_forward(c, &k[0], r->p[0], tok, NULL, NULL, r->x, r->stash[0], rc, s, NULL);
    wp_chunk_forward(c, &k[1], r->p[1], NULL, tgt, r->x, NULL, r->stash[1], rc, s, &r->loss);
    if (mode == SPLIT) {
        wp_chunk_backward_input(c, &k[1], r->p[1], tgt, r->stash[1], rc, NULL, r->dx, r->keep[1], loss_scale, s);
        wp_chunk_backward_input(c, &k[0], r->p[0], NULL, r->stash[0], rc, r->dx, NULL, r->keep[0], loss_scale, s);
        wp_chunk_backward_weights(c, &k[1], NULL, tgt, r->stash[1], rc, r->keep[1], r->g[1], loss_scale, s);
        wp_chunk_backward_weights(c, &k[0], tok, NULL, r->stash[0], rc, r->keep[0], r->g[0], loss_scale, s);
        return;
    }
    wp_chunk_backward(c, &k[1], r->p[1], NULL, tgt, r->stash[1], rc, NULL, r->dx, r->g[1], loss_scale, s);
    wp_chunk_backward(c, &k[0], r->p[0], tok, NULL, r->stash[0], rc, r->dx, NULL, r->g[0], loss_scale, s);
}

static void run_alloc(const WpConfig *c, const WpChunk *k, Run *r) {
    size_t TH = (size_t)c->mbs * c->seq * c->hidden;
    for (int i = 0; i < NCHUNK; i++) {
        r->p[i] = malloc(k[i].nparams * sizeof(float));
        r->g[i] = malloc(k[i].nparams * sizeof(float));
        size_t ns = wp_stash_floats(c, &k[i], WP_KEEP_ALL), nr = wp_stash_floats(c, &k[i], WP_RECOMPUTE_OFFLOAD);
        r->stash[i] = malloc((ns > nr ? ns : nr) * sizeof(float));
        r->keep[i] = malloc(wp_keep_floats(c, &k[i], WP_KEEP_ALL) * sizeof(float));
        wp_chunk_init(c, &k[i], r->p[i], 7);
    }
    r->x = malloc(TH * sizeof(float));
    r->dx = malloc(TH * sizeof(float));
}

int main(int argc, char **argv) {
    Comm *comm = comm_init(&argc, &argv);
    R = comm_rank(comm);
    C = comm_size(comm);
    if (argc < 2 || C > 64) { fprintf(stderr, "usage: mpirun -np C (at most 64) cp_model_test S [wrong-positions]\n"); return 2; }
    int S = atoi(argv[1]), wrong_positions = argc > 2 && !strcmp(argv[2], "wrong-positions");
    WpConfig c;
    char name[64], err[512];
    if (model_load("tests/data/tiny8/config.json", &c, name, sizeof name, err, sizeof err)) {
        fprintf(stderr, "%s\n", err);
        return 2;
    }
    c.seq = S;
    c.mbs = G;
    c.cp = C;
    int *ranks = malloc((size_t)C * sizeof *ranks);
    for (int i = 0; i < C; i++) ranks[i] = i;
    int group = comm_add_group(comm, ranks, C);

    WpConfig whole = c, mc = wp_cp_member_config(&c);
    whole.cp = 1;
    WpChunk k[NCHUNK] = { wp_chunk_make(&whole, 0, 0, 4, 1, 0), wp_chunk_make(&whole, 1, 4, 4, 0, 1) };
    int T = G * S, n = S / C, H = c.hidden;
    float scale = 1.0f / (float)T;   /* the whole micro-batch's tokens, on every member */

    /* the micro-batch: every rank draws the same */
    int *tok = malloc((size_t)T * sizeof *tok), *tgt = malloc((size_t)T * sizeof *tgt);
    unsigned st = 12345;
    for (int t = 0; t < T; t++) {
        st = st * 1103515245u + 12345u; tok[t] = (int)((st >> 8) % (unsigned)c.vocab);
        st = st * 1103515245u + 12345u; tgt[t] = (st >> 8) % 11 == 0 ? -100 : (int)((st >> 8) % (unsigned)c.vocab);
    }
    int *ltok = malloc((size_t)G * n * sizeof *ltok), *ltgt = malloc((size_t)G * n * sizeof *ltgt);
    cp_layout_take(ltok, tok, G, S, C, R);
    cp_layout_take(ltgt, tgt, G, S, C, R);

    Run ref, cp;
    run_alloc(&whole, k, &ref);
    run_alloc(&mc, k, &cp);
    WpScratch *sw = wp_scratch_new(&whole, 4), *sc = wp_scratch_new(&mc, 4);
    CHECK(sw && sc && !wp_scratch_set_offload(sw) && !wp_scratch_set_offload(sc), "the scratches");
    /* what the ring refuses, before anything is attached */
    if (C > 1) {
        CHECK(!wp_cp_ring_new(&c, comm, group, R, sw, err, sizeof err) && strstr(err, "wp_cp_member_config"),
              "a scratch of the whole sequences: %s", err);
        WpConfig odd = c;
        odd.seq = S + 2;
        CHECK(!wp_cp_ring_new(&odd, comm, group, R, sc, err, sizeof err) && strstr(err, "does not split"),
              "S + 2 tokens: %s", err);
    }
    CHECK(!wp_cp_ring_new(&c, comm, group, C, sc, err, sizeof err) && strstr(err, "expected 0 to"),
          "member C: %s", err);
    WpCpRing *ring = wp_cp_ring_new(&c, comm, group, R, sc, err, sizeof err);
    CHECK(ring, "wp_cp_ring_new: %s", err);
    if (!ring) return 1;
    if (wrong_positions) wp_scratch_set_positions(sc, NULL, 0);   /* the mutation: RoPE at 0 .. S/C */

    double bound = 2.0 * S * c.layers / 16777216.0, worst = 0;
    float *rows = malloc((size_t)G * n * H * sizeof(float));
    for (int mode = 0; mode < NMODES; mode++) {
        run(&whole, k, sw, tok, tgt, mode, scale, &ref);
        run(&mc, k, sc, ltok, ltgt, mode, scale, &cp);
        double d;
        take_rows(rows, ref.x, S, R, H);
        d = rel_diff(comm, cp.x, rows, (size_t)G * n * H);
        CHECK(d <= bound, "%s: the first chunk's output: %.3g of its largest, bound %.3g", mode_names[mode], d, bound);
        worst = d > worst ? d : worst;
        take_rows(rows, ref.dx, S, R, H);
        d = rel_diff(comm, cp.dx, rows, (size_t)G * n * H);
        CHECK(d <= bound, "%s: the input gradient of the last chunk: %.3g of its largest, bound %.3g", mode_names[mode], d, bound);
        worst = d > worst ? d : worst;
        double loss = cp.loss;
        comm_allreduce_double(comm, &loss, 1);
        CHECK(fabs(loss - ref.loss) <= bound * fabs(ref.loss), "%s: loss sum %.9g, one process %.9g", mode_names[mode], loss, ref.loss);
        for (int i = 0; i < NCHUNK; i++) {
            comm_allreduce(comm, group, cp.g[i], k[i].nparams, WP_FP32, &(CommInfo){ -1, "gradient" });
            comm_turn_posted(comm);
            comm_wait_turn(comm);
            int nt = wp_chunk_tensors(&whole, &k[i], NULL);
            WpTensor *tw = malloc((size_t)nt * sizeof *tw);
            wp_chunk_tensors(&whole, &k[i], tw);
            for (int j = 0; j < nt; j++) {
                size_t len = tw[j].rows * tw[j].cols;
                d = rel_diff(comm, cp.g[i] + tw[j].offset, ref.g[i] + tw[j].offset, len);
                CHECK(d <= bound, "%s: gradient of %s: %.3g of its largest, bound %.3g", mode_names[mode], tw[j].name, d, bound);
                worst = d > worst ? d : worst;
            }
            free(tw);
        }
    }
    if (R == 0) printf("C = %d, S = %d: largest difference %.3g of a tensor's largest value (bound %.3g)\n", C, S, worst, bound);
    wp_cp_ring_free(ring);
    wp_scratch_free(sw);
    wp_scratch_free(sc);
    double tally[2] = { check_passed_, check_failed_ };
    comm_allreduce_double(comm, tally, 2);
    check_passed_ = (int)tally[0];
    check_failed_ = (int)tally[1];
    comm_finalize(comm);
    char what[48];
    snprintf(what, sizeof what, "cp_model_test C=%d S=%d", C, S);
    return R == 0 ? check_summary(what) : (check_failed_ ? 1 : 0);
}
