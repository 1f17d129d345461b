/* The optimizer's settings through a checkpoint and back: what a save records reads back
 * exactly; a resume with another beta1, beta2 or eps is refused and one with another rate,
 * schedule or length is allowed; a checkpoint of an earlier version (no settings recorded) still
 * resumes, its fixed values (betas, eps, the cosine) checked and the rest not. Flags parsed as the
 * trainers parse them (train_flags_parse). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "tmpdir.h"
#include "train/checkpoint.h"
#include "train/trainflags.h"

/* Parses "--synthetic" plus the given flags; exits the test on a parse error (none expected). */
static TrainFlags flags(const char *a, const char *b, const char *c, const char *d) {
    char *argv[8] = { "train", "--synthetic" };
    int argc = 2;
    const char *extra[] = { a, b, c, d };
    for (int i = 0; i < 4; i++) if (extra[i]) argv[argc++] = (char *)extra[i];
    TrainFlags o;
    char err[512];
    if (train_flags_parse(argc, argv, 0, "", &o, err, sizeof err)) { fprintf(stderr, "parse: %s\n", err); exit(1); }
    return o;
}

static int parse_error(const char *flag, const char *val, const char *want) {
    char *argv[] = { "train", "--synthetic", (char *)flag, (char *)val, NULL };
    TrainFlags o;
    char err[512] = "";
    int rc = train_flags_parse(4, argv, 0, "", &o, err, sizeof err);
    if (rc == 0 || !strstr(err, want)) fprintf(stderr, "%s %s: \"%s\", wanted \"%s\"\n", flag, val, err, want);
    return rc == -1 && strstr(err, want) != NULL;
}

static void test_flags(void) {
    TrainFlags o = flags("--lr", "2e-3", NULL, NULL);
    CHECK(o.opt.lr == 2e-3f && o.opt.min_lr == 0.1f * 2e-3f && o.opt.schedule == WP_SCHED_COSINE && o.opt.steps == 10 &&
          o.opt.beta1 == 0.9f && o.opt.beta2 == 0.95f && o.opt.eps == 1e-8f, "defaults");
    o = flags("--schedule", "wsd", "--decay-fraction=0.5", "--steps=40");
    CHECK(o.opt.schedule == WP_SCHED_WSD && o.opt.decay_fraction == 0.5f && o.steps == 40 && o.opt.steps == 40, "wsd");
    o = flags("--beta1", "0.8", "--beta2=0.999", "--eps=1e-6");
    CHECK(o.opt.beta1 == 0.8f && o.opt.beta2 == 0.999f && o.opt.eps == 1e-6f, "betas, eps");
    CHECK(parse_error("--beta1", "1", "--beta1: expected a number in [0, 1), got \"1\""), "beta1 1");
    CHECK(parse_error("--beta2", "x", "--beta2: expected a number in [0, 1)"), "beta2 x");
    CHECK(parse_error("--eps", "0", "--eps: expected a number in (0, 1]"), "eps 0");
    CHECK(parse_error("--min-lr", "0.5", "--min-lr: expected a number in [0, --lr 0.001]"), "min-lr above lr");
    CHECK(parse_error("--schedule", "step", "--schedule: expected one of cosine, linear, constant, wsd"), "schedule");
    CHECK(parse_error("--decay-fraction", "0.3", "--decay-fraction: only --schedule wsd"), "decay fraction without wsd");
    CHECK(parse_error("--steps", "-1", "--steps: expected an integer in [0, 2147483647]"), "steps");
}

static void test_resume(void) {
    WpConfig c = { .hidden = 8, .layers = 1, .heads = 2, .kv_heads = 1, .head_dim = 4, .ffn = 20, .vocab = 40,
                   .eps = 1e-5f, .rope_theta = 10000, .seq = 4, .mbs = 1 };
    WpChunk k = wp_chunk_make(&c, 0, 0, 1, 1, 1);
    float *p = calloc(k.nparams, 4), *m = calloc(k.nparams, 4), *v = calloc(k.nparams, 4);
    char err[512] = "";
    TrainFlags run = flags("--lr", "3e-4", "--beta2", "0.99");
    run.opt.warmup = 7;
    WpTrainState st = { .step = 2, .seed = 1, .micro_batches = 1, .micro_batch_size = 1, .seq = 4,
                        .adamw = run.opt, .adamw_known = (1u << wp_adamw_nsettings) - 1 }, back;
    const char *path = tmp_path("checkpoint.json");
    CHECK(ckpt_save(path, &c, &k, 1, &p, &m, &v, &st, 1, err, sizeof err) == 0, "save: %s", err);
    CHECK(ckpt_read_state(path, &back, err, sizeof err) == 0, "read: %s", err);
    CHECK(back.adamw_known == st.adamw_known && memcmp(&back.adamw, &run.opt, sizeof run.opt) == 0, "settings read back");

    CHECK(train_flags_check_resume(&run, &back, "t", 0, err, sizeof err) == 0, "the same flags: %s", err);
    TrainFlags o = flags("--lr", "1e-3", "--beta2", "0.99");   /* another rate, min_lr and warm-up: allowed */
    CHECK(train_flags_check_resume(&o, &back, "t", 0, err, sizeof err) == 0, "another --lr: %s", err);
    o = flags("--lr", "3e-4", "--beta2", "0.99");
    o.opt.schedule = WP_SCHED_LINEAR;
    o.opt.steps = 99;
    CHECK(train_flags_check_resume(&o, &back, "t", 0, err, sizeof err) == 0, "another schedule, --steps: %s", err);
    o = flags("--lr", "3e-4", NULL, NULL);                     /* beta2 back to 0.95: refused */
    CHECK(train_flags_check_resume(&o, &back, "t", 0, err, sizeof err) == -1 &&
          strstr(err, "--beta2 0.95: the run being resumed was trained with --beta2 0.99"), "beta2 changed: %s", err);
    o = flags("--lr", "3e-4", "--beta2", "0.99");
    o.opt.eps = 1e-6f;
    CHECK(train_flags_check_resume(&o, &back, "t", 0, err, sizeof err) == -1 && strstr(err, "--eps 1e-06"), "eps: %s", err);

    /* An earlier version's checkpoint: no settings recorded. Betas, eps and the cosine were fixed then. */
    st.adamw_known = 0;
    path = tmp_path("old.json");
    CHECK(ckpt_save(path, &c, &k, 1, &p, &m, &v, &st, 1, err, sizeof err) == 0, "save old: %s", err);
    CHECK(ckpt_read_state(path, &back, err, sizeof err) == 0, "read old: %s", err);
    unsigned fixed = 0;
    for (int i = 0; i < wp_adamw_nsettings; i++) fixed |= (wp_adamw_settings[i].before != NULL) << i;
    CHECK(back.adamw_known == fixed && fixed != 0 && back.adamw.beta2 == 0.95f && back.adamw.schedule == WP_SCHED_COSINE,
          "an old checkpoint's settings: known %#x", back.adamw_known);
    o = flags("--lr", "5", "--warmup", "3");
    CHECK(train_flags_check_resume(&o, &back, "t", 0, err, sizeof err) == 0, "old: any --lr: %s", err);
    CHECK(train_flags_check_resume(&run, &back, "t", 0, err, sizeof err) == -1 && strstr(err, "--beta2 0.95"),
          "old: --beta2 0.99 refused: %s", err);
    free(p); free(m); free(v);
}

int main(void) {
    tmp_dir_make("optim_resume");
    test_flags();
    test_resume();
    tmp_dir_remove();
    return check_summary("test_optim_resume");
}
