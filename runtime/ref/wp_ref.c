/* wp-ref: the single-process reference trainer. The whole model is one chunk, every micro-batch
 * of a step runs forward then backward in order, and the step is the mean loss over all its
 * tokens: the oracle that every pipelined run is compared with (DESIGN.md, "Numerical
 * contract"). Same flags as an emitted DIR/train, plus the model and training shape, and the same
 * training loop (train/loop.c): the same step lines, log, checks and checkpoints.
 *
 * --precision bf16 computes as a pipelined bf16 run does with the whole model as one chunk: the
 * working weights are the fp32 masters rounded to bf16 each step, the model's math in bf16
 * (cpu/model.c); --grad-precision bf16 rounds the gradient to bf16 after each micro-batch's
 * backward (a bf16 gradient buffer), fp32 sums it in fp32. It defaults to --precision, as wpgen's
 * --grad-precision does, so `wp-ref --precision bf16` is the reference of a default bf16 plan.
 *
 * --eval CHECKPOINT --data SPEC evaluates a checkpoint instead (eval_main): the held-out loss a
 * training run's --val-data logs, with no training flag.
 *
 * Exit status: 0 done; 1 training failed (NaN/Inf loss or gradient norm, a checkpoint that cannot
 * be written); 2 bad input (flags, model, data, checkpoint to load); 4 stopped by SIGTERM, SIGINT or SIGUSR1
 * (with --save, the checkpoint of the last step done is written first). */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <omp.h>

#include <jansson.h>

#include "cpu/adamw.h"
#include "common/outpaths.h"
#include "train/checkpoint.h"
#include "common/config.h"
#include "common/hostmem.h"
#include "train/data.h"
#include "train/loop.h"
#include "cpu/model.h"
#include "cpu/threads.h"
#include "common/modelcfg.h"
#include "train/trainflags.h"
#include "common/batch.h"

static const char usage_head[] =
    "usage: wp-ref -m MODEL (--data FILE | --synthetic) [options]\n"
    "       wp-ref --eval CHECKPOINT --data SPEC   a checkpoint's held-out loss, no training (--eval --help)\n"
    "  -m MODEL                preset (wpgen list) or a Hugging Face config.json path\n"
    "  --seq S                 tokens per sequence (default: " WP_DEFAULT_SEQ_RULE ")\n"
    "  --micro-batch-size G    sequences per micro-batch (default: the model's)\n"
    "  --micro-batches M       micro-batches per step, in all (default 1, or --global-batch / G)\n"
    "  --precision P           fp32 (default) or bf16: working weights, activations and their gradients\n"
    "  --grad-precision P      fp32 or bf16 (default: --precision's): the weight gradient, rounded once per micro-batch\n"
    "  --peak-tflops X         this machine's peak TFLOP/s, in (0, 1e6]: MFU beside tokens/s (default: no MFU)\n";

static void die(int status, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fputs("wp-ref: ", stderr);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    exit(status);
}

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* ---- trace ----------------------------------------------------------------------------- */

/* Written as it goes: each span a JSON line appended to a part file (tmpfile(): removed when the
 * process exits, however it ends), so that a long run holds none of them in memory; at the end
 * the part is copied into the trace, which is renamed into place whole. */
typedef struct Trace { FILE *part; size_t n; double origin; int failed; } Trace;

static void trace_span(Trace *t, const char *name, double t0, double t1, long step, int mb) {
    if (!t->part || t->failed) return;
    fprintf(t->part, ",\n{\"name\":\"%s\",\"ph\":\"X\",\"pid\":0,\"tid\":0,\"ts\":%.3f,\"dur\":%.3f,"
                     "\"args\":{\"step\":%ld", name, (t0 - t->origin) * 1e6, (t1 - t0) * 1e6, step);
    if (mb >= 0) fprintf(t->part, ",\"micro_batch\":%d", mb);
    fprintf(t->part, "}}");
    t->n++;
    t->failed |= ferror(t->part) != 0;   /* the disk full, say: the trace is refused at the end */
}

static int trace_write(Trace *t, const char *path) {
    WpOutFile out;
    if (t->failed || fflush(t->part) || fseek(t->part, 0, SEEK_SET) || wp_out_open(&out, path)) return -1;
    FILE *f = out.f;
    fprintf(f, "{\"displayTimeUnit\":\"ms\",\"traceEvents\":[\n"
               "{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":0,\"args\":{\"name\":\"wp-ref\"}}");
    char buf[1 << 16];
    size_t got;
    while ((got = fread(buf, 1, sizeof buf, t->part)) > 0) fwrite(buf, 1, got, f);
    if (ferror(t->part)) { wp_out_abort(&out); return -1; }
    /* as train's trace says it: the events written, none held in memory */
    fprintf(f, ",\n{\"name\":\"trace_buffer\",\"ph\":\"M\",\"pid\":0,\"args\":{\"events\":%zu,\"most_buffered\":0}}"
               "\n]}\n", t->n);
    return wp_out_commit(&out);
}

/* ---- training: the shared loop (train/loop.c), with the whole model in one process ------- */

/* Everything a run holds, set up by main before the first step. */
typedef struct Run {
    const TrainFlags *o;
    WpConfig c;
    WpChunk k;                    /* the whole model as one chunk */
    WpTensor *tensors;            /* its tensors, for the per-tensor weight decay */
    int ntensors;
    WpData *data;
    WpData *val;                  /* --val-data, read in file order; NULL: none */
    float *params, *grads, *m, *v, *stash;
    float *work;                  /* bf16: the working copy of params (rounded each step); else params */
    WpDtype precision, grad_precision;
    int *tokens, *targets;
    WpScratch *scratch;
    Trace trace;
} Run;

/* Every micro-batch of step s, forward then backward, into one gradient. */
static void ref_step(void *ud, long s, double *loss_sum, double *sumsq) {
    Run *r = ud;
    const WpConfig *c = &r->c;
    const int S = c->seq, G = c->mbs, M = r->o->micro_batches;
    const float loss_scale = (float)(1.0 / ((double)M * G * S));
    memset(r->grads, 0, r->k.nparams * sizeof *r->grads);
    if (r->precision == WP_BF16) {
        memcpy(r->work, r->params, r->k.nparams * sizeof *r->work);
        wp_bf16_round_array(r->work, r->k.nparams);
    }
    for (int g = 0; g < M; g++) {
        data_read_batch(r->data, s, g, M, G, S, r->tokens, r->targets);
        double a = now_s();
        wp_chunk_forward(c, &r->k, r->work, r->tokens, r->targets, NULL, NULL, r->stash, r->o->recompute, r->scratch,
                         loss_sum);
        double b = now_s();
        wp_chunk_backward(c, &r->k, r->work, r->tokens, r->targets, r->stash, r->o->recompute, NULL, NULL, r->grads,
                          loss_scale, r->scratch);
        if (r->grad_precision == WP_BF16) wp_bf16_round_array(r->grads, r->k.nparams);
        double e = now_s();
        trace_span(&r->trace, "forward", a, b, s + 1, g);
        trace_span(&r->trace, "backward", b, e, s + 1, g);
    }
    *sumsq = adamw_sumsq(r->grads, r->k.nparams);
}

/* The held-out set's token losses: its steps 0 .. steps-1 forward only, with the weights as they
 * are now (rounded as a step rounds them in bf16). */
static double ref_validate(void *ud, long steps) {
    Run *r = ud;
    const WpConfig *c = &r->c;
    const int S = c->seq, G = c->mbs, M = r->o->micro_batches;
    if (r->precision == WP_BF16) {
        memcpy(r->work, r->params, r->k.nparams * sizeof *r->work);
        wp_bf16_round_array(r->work, r->k.nparams);
    }
    double sum = 0;
    for (long s = 0; s < steps; s++)
        for (int g = 0; g < M; g++) {
            data_read_batch(r->val, s, g, M, G, S, r->tokens, r->targets);
            wp_chunk_forward(c, &r->k, r->work, r->tokens, r->targets, NULL, NULL, r->stash, r->o->recompute, r->scratch, &sum);
        }
    return sum;
}

static void ref_update(void *ud, const WpAdamW *opt, float lr, float grad_scale, long t) {
    Run *r = ud;
    adamw_update_chunk(opt, r->tensors, r->ntensors, r->params, r->grads, r->m, r->v, lr, grad_scale, t);
}

static int ref_save(void *ud, const char *path, int keep, const WpTrainState *st, char *err, size_t errlen) {
    Run *r = ud;
    return ckpt_save(path, &r->c, &r->k, 1, &r->params, &r->m, &r->v, st, keep, err, errlen);
}

static void ref_span(void *ud, const char *what, double t0, double t1, long step) {
    trace_span(&((Run *)ud)->trace, what, t0, t1, step, -1);
}

static double ref_now(void *ud) {
    (void)ud;
    return now_s();
}

/* ---- --eval: a checkpoint's held-out loss, no training ---------------------------------- */

/* The run's buffers, allocated once (a step allocates nothing): the weights, their bf16 working
 * copy, one micro-batch's stash, the batch, the scratch; with train also the gradients and AdamW's
 * moments. Dies (exit 1) when memory runs out. */
static void alloc_run(Run *r, const WpConfig *c, size_t nstash, int G, int S, int train) {
    size_t np = r->k.nparams;
    r->params = malloc(np * sizeof *r->params);
    if (train) {
        r->grads = calloc(np, sizeof *r->grads);
        r->m = calloc(np, sizeof *r->m);
        r->v = calloc(np, sizeof *r->v);
    }
    r->stash = malloc(nstash * sizeof *r->stash);
    r->tokens = malloc((size_t)G * S * sizeof *r->tokens);
    r->targets = malloc((size_t)G * S * sizeof *r->targets);
    r->scratch = wp_scratch_new(c, c->layers);
    r->work = r->precision == WP_BF16 ? malloc(np * sizeof *r->work) : r->params;
    if (r->scratch && wp_scratch_set_precision(r->scratch, r->precision)) die(1, "out of memory for the bf16 workspace");
    if (!r->params || !r->work || (train && (!r->grads || !r->m || !r->v)) || !r->stash || !r->tokens || !r->targets || !r->scratch)
        die(1, "out of memory: %zu parameters and %zu floats of activations", np, nstash);
}

static const char eval_usage[] =
    "usage: wp-ref --eval CHECKPOINT --data SPEC [--val-steps K] [-m MODEL] [--precision fp32|bf16]\n"
    "  --eval CHECKPOINT       a checkpoint's manifest (DIR/checkpoint.json, DIR/checkpoint.STEP.json) of\n"
    "                          any run, wp-ref's or an emitted train's under any plan\n"
    "  --data SPEC             the held-out data (as train's --val-data: a file, a comma list, a quoted glob\n"
    "                          or a directory), read in file order\n"
    "  --val-steps K           the set: the first K steps' worth of its sequences, a step being the\n"
    "                          checkpoint's batch (default: as the training run's --val-data, the whole steps\n"
    "                          it holds, at most 1024 sequences, at least one step)\n"
    "  -m MODEL                the model (default: the config.json beside the checkpoint)\n"
    "  --precision P           fp32 (default) or bf16: the weights rounded to bf16, the model's math in bf16\n"
    "Prints the mean loss per token over the set and its perplexity, exp(loss). The batch shape\n"
    "(micro-batches, sequences, tokens per sequence) is the checkpoint's, so the set and the number\n"
    "are those the training run logged as val_loss on the same data. Exit status: 0 done; 1 the loss\n"
    "is not finite; 2 bad input (flags, model, data, checkpoint).\n";

/* wp-ref --eval CHECKPOINT --data SPEC: the held-out loss of the checkpoint's weights, computed
 * as a training run's --val-data computes it (ref_validate over loop_val_steps steps of the
 * run's own batch), forward only. Its own flags: no training flag applies, none is needed. */
static int eval_main(int argc, char **argv, Run *r) {
    const char *ckpt = NULL, *spec = NULL, *model = NULL;
    TrainFlags o = { 0 };
    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) { fputs(eval_usage, stdout); exit(0); }
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        int known = !strcmp(a, "--eval") || !strcmp(a, "--data") || !strcmp(a, "--val-steps") || !strcmp(a, "-m");
        if (!known)
            die(2, "--eval: %s is not an evaluation flag (it takes --data, --val-steps, -m and --precision; "
                "wp-ref --eval --help)", a);
        if (i + 1 >= argc) die(2, "%s: expected a value", a);
        const char *v = argv[++i];
        if (!strcmp(a, "--eval")) ckpt = v;
        else if (!strcmp(a, "--data")) spec = v;
        else if (!strcmp(a, "-m")) model = v;
        else {
            char *end = NULL;
            errno = 0;
            o.val_steps = strtol(v, &end, 10);
            if (errno || end == v || *end || o.val_steps < 1 || o.val_steps > 1000000000L)
                die(2, "--val-steps: expected an integer in [1, 1000000000], got \"%s\"", v);
        }
    }
    if (!ckpt || !spec) die(2, "--eval CHECKPOINT and --data SPEC are both needed\n%s", eval_usage);

    char err[1024], name[256], dir[4096];
    WpTrainState st;
    if (ckpt_read_state(ckpt, &st, err, sizeof err)) die(2, "--eval %s", err);
    if (st.micro_batches < 1 || st.micro_batch_size < 1 || st.seq < 1)
        die(2, "--eval %s: the checkpoint records no batch shape (a checkpoint of an earlier version): "
            "resume it with wp-ref --val-data instead", ckpt);
    if (!model) {   /* the config.json the checkpoint's save wrote beside it */
        const char *slash = strrchr(ckpt, '/');
        snprintf(dir, sizeof dir, "%.*s", slash ? (int)(slash - ckpt) : 1, slash ? ckpt : ".");
        model = dir;
    }
    WpConfig *c = &r->c;
    if (model_load(model, c, name, sizeof name, err, sizeof err)) die(2, "-m %s", err);
    c->seq = st.seq;
    c->mbs = st.micro_batch_size;
    if (model_check(c, err, sizeof err)) die(2, "%s", err);
    const int S = c->seq, G = c->mbs, M = st.micro_batches;
    if (!(r->val = data_open(WP_DATA_VAL, spec, c->vocab, S, 0, 0, err, sizeof err))) die(2, "--data %s", err);
    /* held-out data of the checkpoint's own tokenizer: another's ids would mean other tokens */
    const char *tk = data_tokenizer(r->val);
    if (st.tokenizer_known && *st.tokenizer && *tk && strcmp(st.tokenizer, tk))
        die(2, "--data %s is tokenized by %s %s, the checkpoint's run read data of %s %s: evaluate on data of its tokenizer",
            spec, data_tokenizer_name(r->val), tk, st.tokenizer_name, st.tokenizer);
    const long steps = loop_val_steps(&o, data_nseq(r->val), M, G);
    o.micro_batches = M;
    r->o = &o;

    /* the weights and one micro-batch's forward, checked against the memory there is */
    r->k = wp_chunk_make(c, 0, 0, c->layers, 1, 1);
    size_t np = r->k.nparams, nstash = wp_stash_floats(c, &r->k, 0);
    double need = (double)np * sizeof(float) * (r->precision == WP_BF16 ? 2 : 1) + (double)nstash * sizeof(float) +
                  (double)wp_scratch_bytes(c, c->layers) + 2.0 * G * S * sizeof(int);
    if (wp_host_mem_check((uint64_t)need, "weights, activations and workspace", err, sizeof err)) die(2, "%s", err);
    alloc_run(r, c, nstash, G, S, 0);
    if (ckpt_load(ckpt, c, &r->k, 1, &r->params, NULL, NULL, NULL, err, sizeof err)) die(2, "--eval %s", err);

    printf("wp-ref: eval %s (step %ld), model %s (%.2fM parameters%s); data %s\n", ckpt, st.step, name, np / 1e6,
           r->precision == WP_BF16 ? ", bf16" : "", data_describe(r->val));
    double t0 = now_s();
    double loss = ref_validate(r, steps) / ((double)steps * M * G * S);
    double t1 = now_s();
    if (!isfinite(loss)) die(1, "--eval %s: the held-out loss is %s", ckpt, isnan(loss) ? "NaN" : "infinite");
    printf("eval  step %ld | val loss %.6f | perplexity %.4f | %ld sequences of %d tokens (%ld steps of %d x %d) | %.1f ms\n",
           st.step, loss, exp(loss), steps * M * G, S, steps, M, G, (t1 - t0) * 1e3);
    return 0;
}

int main(int argc, char **argv) {
    cpu_wait_passively(argv);   /* idle threads sleep, unless OMP_WAIT_POLICY or OMP_NUM_THREADS is set */
    TrainFlags o;
    Run run = {0}, *r = &run;
    char err[1024], name[256];
    /* --precision, --grad-precision and --peak-tflops are wp-ref's own: taken out before the shared flags */
    char **args = malloc(((size_t)argc + 1) * sizeof *args);
    if (!args) die(1, "out of memory");
    int nargs = 0, grad_given = 0;
    double peak_tflops = 0;
    for (int i = 0; i < argc; i++) {
        int p = !strcmp(argv[i], "--precision"), g = !strcmp(argv[i], "--grad-precision");
        if (!strcmp(argv[i], "--peak-tflops")) {
            char *end = NULL;
            if (i + 1 < argc) peak_tflops = strtod(argv[i + 1], &end);
            if (i + 1 >= argc || end == argv[i + 1] || *end || !(peak_tflops > 0 && peak_tflops <= 1e6))
                die(2, "--peak-tflops: expected a number in (0, 1e6], got \"%s\"", i + 1 < argc ? argv[i + 1] : "");
            i++;
            continue;
        }
        if (!p && !g) { args[nargs++] = argv[i]; continue; }
        WpDtype d;
        if (i + 1 >= argc || wp_dtype_parse(argv[i + 1], &d))
            die(2, "%s: expected fp32 or bf16, got \"%s\"", argv[i], i + 1 < argc ? argv[i + 1] : "");
        if (p) r->precision = d; else { r->grad_precision = d; grad_given = 1; }
        i++;
    }
    if (!grad_given) r->grad_precision = r->precision;   /* wpgen's default: gradients at the plan's precision */
    args[nargs] = NULL;
    argc = nargs;
    argv = args;
    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], "--eval")) return eval_main(argc, argv, r);
    if (train_flags_parse(argc, argv, 1, usage_head, &o, err, sizeof err)) die(2, "%s\n(wp-ref --help lists the flags)", err);
    /* --resume: the run's own seed (the data's order depends on it), and its optimizer's settings
     * checked, before anything is set up */
    WpTrainState resumed = { 0 };
    if (train_flags_resume(&o, "wp-ref", 1, &resumed, err, sizeof err)) die(2, "%s", err);
    WpConfig *c = &r->c;
    if (model_load(o.model, c, name, sizeof name, err, sizeof err)) die(2, "%s", err);
    if (o.seq) c->seq = o.seq;
    if (o.mbs) c->mbs = o.mbs;
    if (model_check(c, err, sizeof err)) die(2, "%s", err);
    /* --global-batch: the micro-batches, by the rule every tool uses (common/batch.h; wp-ref is one device) */
    long gb;
    int per = 1;
    if (wp_batch_split(o.global_batch, o.global_batch_tokens, c->seq, 1, c->mbs, 1 << 20, &gb, &per, err, sizeof err))
        die(2, "%s", err);
    if (wp_batch_agree(o.micro_batches, o.global_batch, o.global_batch_tokens, gb, 1, c->mbs, per, err, sizeof err))
        die(2, "%s", err);
    if (!o.micro_batches) o.micro_batches = per;
    if (o.save && ckpt_claim(o.save, c, err, sizeof err)) die(2, "--save %s", err);
    const int S = c->seq, G = c->mbs, M = o.micro_batches;

    r->k = wp_chunk_make(c, 0, 0, c->layers, 1, 1);
    r->ntensors = wp_chunk_tensors(c, &r->k, NULL);
    r->tensors = calloc((size_t)r->ntensors, sizeof *r->tensors);
    if (!r->tensors) die(1, "out of memory");
    wp_chunk_tensors(c, &r->k, r->tensors);

    r->data = o.synthetic ? data_synthetic(o.seed, c->vocab) : data_open(WP_DATA_TRAIN, o.data, c->vocab, S, !o.no_shuffle, o.seed, err, sizeof err);
    if (!r->data) die(2, "%s", o.synthetic ? "out of memory" : err);
    if (o.val_data && !(r->val = data_open(WP_DATA_VAL, o.val_data, c->vocab, S, 0, 0, err, sizeof err))) die(2, "--val-data %s", err);
    if (train_flags_check_tokenizers(&o, r->data, r->val, o.resume ? &resumed : NULL, "wp-ref", 1, err, sizeof err))
        die(2, "%s", err);

    /* Everything the steps need, allocated now: a step itself allocates nothing. */
    size_t np = r->k.nparams, nstash = wp_stash_floats(c, &r->k, o.recompute);
    /* ... if they fit: the machine's available memory checked first (common/hostmem.h) */
    double state = (double)np * sizeof(float) * (r->precision == WP_BF16 ? 5 : 4), acts = (double)nstash * sizeof(float),
           work = (double)wp_scratch_bytes(c, c->layers) + 2.0 * G * S * sizeof(int);
    char what[256], s1[32], s2[32], s3[32];
    snprintf(what, sizeof what, "weights, gradients and AdamW's moments %s, activations %s, workspace %s",
             wp_size_str(state, s1, sizeof s1), wp_size_str(acts, s2, sizeof s2), wp_size_str(work, s3, sizeof s3));
    if (wp_host_mem_check((uint64_t)(state + acts + work), what, err, sizeof err)) die(2, "%s", err);
    alloc_run(r, c, nstash, G, S, 1);

    long start = 0;
    uint64_t data_seq0 = 0;
    if (o.resume) {
        WpTrainState st;
        if (ckpt_load(o.resume, c, &r->k, 1, &r->params, &r->m, &r->v, &st, err, sizeof err) != 0) die(2, "%s", err);
        start = st.step;
        o.seed = st.seed;   /* train_flags_resume read it already */
        if (train_flags_data_origin(&o, &st, M, G, S, &data_seq0, err, sizeof err)) die(2, "%s", err);
        data_set_origin(r->data, start, data_seq0);
    } else if (o.init) {
        if (ckpt_load(o.init, c, &r->k, 1, &r->params, NULL, NULL, NULL, err, sizeof err) != 0) die(2, "%s", err);
    } else {
        wp_chunk_init(c, &r->k, r->params, o.seed);
    }

    FILE *log = NULL;
    if (o.log && !(log = fopen(o.log, o.resume ? "a" : "w"))) die(2, "%s: %s", o.log, strerror(errno));
    long nsteps = loop_end(&o) > start ? loop_end(&o) - start : 0;
    if (o.trace && !(r->trace.part = tmpfile())) die(2, "--trace %s: cannot create its temporary part file: %s", o.trace, strerror(errno));

    printf("wp-ref: model %s: hidden %d, %d layers, %d heads (%d kv), ffn %d, vocab %d%s; %.2fM parameters\n",
           o.model, c->hidden, c->layers, c->heads, c->kv_heads, c->ffn, c->vocab, c->tied ? ", tied" : "", np / 1e6);
    const char *wait = getenv("OMP_WAIT_POLICY");
    char gbs[96];
    wp_batch_describe((long)M * G, S, gbs, sizeof gbs);
    printf("wp-ref: data %s; %s: %d micro-batches x %d sequences x %d tokens per step; %d threads%s%s%s\n",
           data_describe(r->data), gbs, M, G, S, omp_get_max_threads(), wait && *wait ? ", OMP_WAIT_POLICY=" : "",
           wait && *wait ? wait : "", o.recompute ? "; recompute" : "");
    if (r->precision != WP_FP32 || r->grad_precision != WP_FP32)
        printf("wp-ref: precision %s, weight gradients %s\n", wp_dtype_name(r->precision), wp_dtype_name(r->grad_precision));
    r->o = &o;
    r->trace.origin = now_s();
    loop_catch_signals();
    WpLoop loop = { .prog = "wp-ref", .flags = &o, .start = start, .data_seq0 = data_seq0, .micro_batches = M, .mbs = G, .seq = S, .model = c,
                    .peak_flops = peak_tflops * 1e12, .printer = 1,
                    .epoch_seqs = data_nseq(r->data), .shuffled = !o.no_shuffle, .tokenizer = data_tokenizer(r->data),
                    .tokenizer_name = data_tokenizer_name(r->data), .log = log,
                    .validate = r->val ? ref_validate : NULL, .val_seqs = r->val ? data_nseq(r->val) : 0, .ud = r,
                    .step = ref_step, .update = ref_update, .save = ref_save,
                    .span = o.trace ? ref_span : NULL, .now = ref_now };
    int status = loop_run(&loop);
    /* Written after a failed run too: they are what one looks at to see why. */
    if (nsteps > 0 && o.trace && trace_write(&r->trace, o.trace) != 0) die(1, "%s: cannot write the trace", o.trace);
    if (log && fclose(log) != 0) die(1, "%s: cannot write the log", o.log);

    if (r->trace.part) fclose(r->trace.part);
    wp_scratch_free(r->scratch);
    if (r->work != r->params) free(r->work);
    free(r->params); free(r->grads); free(r->m); free(r->v); free(r->stash);
    free(r->tokens); free(r->targets); free(r->tensors); free(args);
    data_close(r->data);
    data_close(r->val);
    return status;
}
