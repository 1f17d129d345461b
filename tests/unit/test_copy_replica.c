/* plan_copy_replica (ir/plan.c): replica 0 built and copied is the plan built replica by replica.
 * A small plan written in C, every kind of operand a copy moves (ranks of transfers and roots,
 * micro-batches, a group inside the replica, a group across replicas, owners, places), built
 * both ways on several replica counts: the same plan_hash, the same strategy lines and places
 * (not a plan that trains: the verifier is not asked). Replica 0 naming a rank outside itself, or another replica already built, is
 * refused. (The shipped strategies' plans were compared file by file with those of the scripts
 * that built every replica, when they took to copying.) */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "check.h"
#include "plan_fixture.h"
#include "emit/emit.h"

/* Replica q of P ranks, R replicas: rank r's master of chunk r (one chunk per stage, a plain
 * pipeline of weights), a forward of every chunk for micro-batch mb(r) with weights passed
 * round the replica, a broadcast from the replica's last rank, the all-reduce of each chunk's
 * gradient across the replicas and the update. Returns 0 or -1. */
static int build_replica(Plan *p, int q, int P, int R, char *err, size_t len) {
    int *m = calloc((size_t)(P > R ? P : R), sizeof *m);
    for (int i = 0; i < P; i++) m[i] = q * P + i;
    int inside = plan_add_group(p, m, P, err, len);
    int rc = inside < 0;
    for (int s = 0; s < P && !rc; s++) {
        int r = q * P + s;
        p->ranks[r].replica = q;
        p->ranks[r].stage = s;
        rc |= plan_add_owner(p, s, r, err, len);
        rc |= plan_add_buf(p, r, "m", BUF_W, s, 1, 0, 1, err, len) < 0;
        rc |= plan_add_buf(p, r, "g", BUF_D, s, 0, 0, 1, err, len) < 0;
        rc |= plan_add_buf(p, r, "w", BUF_W, -1, 0, 0, 1, err, len) < 0;
        for (int k = 0; k < R; k++) m[k] = k * P + s;
        int across = R > 1 ? plan_add_group(p, m, R, err, len) : -1;
        if (R > 1 && across < 0) rc = 1;
        (void)across;
    }
    free(m);
    return rc ? -1 : 0;
}

/* The operations of replica q (after every replica's buffers exist: a copy is made at the end). */
static int ops_replica(Plan *p, int q, int P, int R, char *err, size_t len) {
    int rc = 0, N = p->micro_batches;
    for (int s = 0; s < P && !rc; s++) {
        int r = q * P + s, mb = r * N;
        /* turn t: forward of chunk t with the weights of stage t, passed from rank t to rank s */
        for (int t = 0; t < P; t++) {
            Op f = { .kind = OP_FWD, .buf = (int16_t)plan_find_buf(p, r, t == s ? "m" : "w"), .buf2 = -1, .chunk = t, .mb = mb,
                     .peer = -1, .group = -1, .srcloc = (uint32_t)(1 << 20 | (100 + t)) };
            if (t != s) {
                Op x = { .kind = OP_RECV, .what = WHAT_W, .buf = (int16_t)plan_find_buf(p, r, "w"), .buf2 = -1, .chunk = -1, .mb = -1,
                         .peer = q * P + t, .group = -1, .srcloc = 1 << 20 | 7 };
                rc |= plan_add_op(p, r, 2 * t, &x, err, len);
            } else
                for (int d = 0; d < P; d++) {
                    if (d == s) continue;
                    Op x = { .kind = OP_SEND, .what = WHAT_W, .buf = (int16_t)plan_find_buf(p, r, "m"), .buf2 = -1, .chunk = -1, .mb = -1,
                             .peer = q * P + d, .group = -1, .srcloc = 1 << 20 | 8 };
                    rc |= plan_add_op(p, r, 2 * t, &x, err, len);
                }
            rc |= plan_add_op(p, r, 2 * t + 1, &f, err, len);
        }
        /* the backward of its own chunk, then the gradient all-reduced across replicas and OPT */
        int T = 2 * P;
        Op b = { .kind = OP_BWD, .buf = (int16_t)plan_find_buf(p, r, "m"), .buf2 = (int16_t)plan_find_buf(p, r, "g"), .chunk = s, .mb = mb,
                 .peer = -1, .group = -1, .srcloc = 1 << 20 | 9 };
        rc |= plan_add_op(p, r, T, &b, err, len);
        int m[64];
        for (int i = 0; i < P; i++) m[i] = q * P + i;
        Op bc = { .kind = OP_BCAST, .buf = (int16_t)plan_find_buf(p, r, "w"), .buf2 = -1, .chunk = -1, .mb = -1, .peer = q * P + P - 1,
                  .group = plan_add_group(p, m, P, err, len), .srcloc = 1 << 20 | 10 };
        rc |= plan_add_op(p, r, T, &bc, err, len);
        int t = T + 1;
        if (R > 1) {
            for (int k = 0; k < R; k++) m[k] = k * P + s;
            Op ar = { .kind = OP_ALLREDUCE, .buf = (int16_t)plan_find_buf(p, r, "g"), .buf2 = -1, .chunk = -1, .mb = -1, .peer = -1,
                      .group = plan_add_group(p, m, R, err, len), .srcloc = 1 << 20 | 11 };
            rc |= plan_add_op(p, r, t++, &ar, err, len);
        }
        Op o = { .kind = OP_OPT, .buf = (int16_t)plan_find_buf(p, r, "m"), .buf2 = (int16_t)plan_find_buf(p, r, "g"), .chunk = s, .mb = -1,
                 .peer = -1, .group = -1, .srcloc = 1 << 20 | 12 };
        rc |= plan_add_op(p, r, t, &o, err, len);
    }
    return rc ? -1 : 0;
}

static Plan *new_plan(const Topology *t, const WpConfig *m, int R) {
    Plan *p = plan_new(t, m, "test", t->ndevices);
    p->replicas = R;
    p->micro_batches = 1;
    p->total_mbs = t->ndevices;
    p->precision = p->grad_precision = WP_FP32;
    int P = t->ndevices / R, *layers = malloc((size_t)P * sizeof *layers);
    for (int i = 0; i < P; i++) layers[i] = m->layers / P;
    char err[256];
    if (plan_set_chunks(p, layers, P, err, sizeof err)) { fprintf(stderr, "%s\n", err); exit(2); }
    free(layers);
    return p;
}

int main(void) {
    fixture_init();
    char err[512];
    for (int R = 1; R <= 4; R *= 2) {
        int per[] = { 4, 4 };
        Topology t;
        if (fixture_topology(&t, 2, per)) return 2;
        WpConfig m = fixture_model(8);
        int P = t.ndevices / R;
        /* every replica built */
        Plan *a = new_plan(&t, &m, R);
        int rc = 0;
        for (int q = 0; q < R; q++) rc |= build_replica(a, q, P, R, err, sizeof err);
        for (int q = 0; q < R; q++) rc |= ops_replica(a, q, P, R, err, sizeof err);
        CHECK(rc == 0, "R %d: built replica by replica: %s", R, err);
        /* replica 0 built and copied */
        Plan *b = new_plan(&t, &m, R);
        rc = build_replica(b, 0, P, R, err, sizeof err) | ops_replica(b, 0, P, R, err, sizeof err);
        rc |= plan_copy_replica(b, err, sizeof err);
        CHECK(rc == 0, "R %d: copied: %s", R, err);
        CHECK(plan_finish(a, err, sizeof err) == 0 && plan_finish(b, err, sizeof err) == 0, "R %d: finish: %s", R, err);
        CHECK(plan_hash(a) == plan_hash(b), "R %d: the copied plan differs (%016llx, %016llx)", R, (unsigned long long)plan_hash(a),
              (unsigned long long)plan_hash(b));
        int lines = 1;
        for (int r = 0; r < t.ndevices; r++) {
            lines &= a->ranks[r].nops == b->ranks[r].nops && a->ranks[r].replica == b->ranks[r].replica && a->ranks[r].stage == b->ranks[r].stage;
            for (int i = 0; lines && i < a->ranks[r].nops; i++) lines &= a->ranks[r].ops[i].srcloc == b->ranks[r].ops[i].srcloc;
        }
        CHECK(lines, "R %d: strategy lines or places differ", R);
        plan_free(a);
        plan_free(b);

        if (R > 1) {
            /* refused: replica 0 sends to replica 1; replica 1 already has buffers */
            Plan *c = new_plan(&t, &m, R);
            build_replica(c, 0, P, R, err, sizeof err);
            Op x = { .kind = OP_SEND, .what = WHAT_W, .buf = 0, .buf2 = -1, .chunk = -1, .mb = -1, .peer = P, .group = -1 };
            plan_add_op(c, 0, 0, &x, err, sizeof err);
            err[0] = 0;
            CHECK(plan_copy_replica(c, err, sizeof err) == -1 && strstr(err, "outside replica 0"), "R %d: a send across replicas copied: %s", R, err);
            plan_free(c);
            c = new_plan(&t, &m, R);
            build_replica(c, 0, P, R, err, sizeof err);
            plan_add_buf(c, P, "x", BUF_W, -1, 0, 0, 1, err, sizeof err);
            err[0] = 0;
            CHECK(plan_copy_replica(c, err, sizeof err) == -1 && strstr(err, "already has"), "R %d: copied over a built replica: %s", R, err);
            plan_free(c);
        }
        topology_free(&t);
    }
    fixture_done();
    return check_summary("test_copy_replica");
}
