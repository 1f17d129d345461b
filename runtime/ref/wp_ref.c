/* wp-ref: the single-process reference trainer. The whole model is one chunk, every micro-batch
 * of a step runs forward then backward in order, and the step is the mean loss over all its
 * tokens: the oracle that every pipelined run is compared with (DESIGN.md, "Numerical
 * contract"). Same flags as an emitted DIR/train, plus the model and training shape.
 *
 * Exit status: 0 done; 1 training failed (NaN/Inf loss, a checkpoint that cannot be written);
 * 2 bad input (flags, model, data, checkpoint to load). */
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
#include "train/checkpoint.h"
#include "common/config.h"
#include "train/data.h"
#include "cpu/model.h"
#include "common/modelcfg.h"
#include "train/trainflags.h"

static const char usage_head[] =
    "usage: wp-ref -m MODEL (--data FILE | --synthetic) [options]\n"
    "  -m MODEL                preset (wpgen list) or a Hugging Face config.json path\n"
    "  --seq S                 tokens per sequence (default: the model's)\n"
    "  --micro-batch-size G    sequences per micro-batch (default: the model's)\n"
    "  --micro-batches M       micro-batches per step, in all (default 1)\n";

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

typedef struct Span { const char *name; double t0, t1; long step; int mb; } Span;
typedef struct Trace { Span *spans; size_t n, cap; double origin; } Trace;

static void trace_span(Trace *t, const char *name, double t0, double t1, long step, int mb) {
    if (t->n < t->cap) t->spans[t->n++] = (Span){name, t0, t1, step, mb};
}

static int trace_write(const Trace *t, const char *path) {
    char tmp[4200];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    FILE *f = fopen(tmp, "w");
    if (!f) return -1;
    fprintf(f, "{\"displayTimeUnit\":\"ms\",\"traceEvents\":[\n"
               "{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":0,\"args\":{\"name\":\"wp-ref\"}}");
    for (size_t i = 0; i < t->n; i++) {
        const Span *s = &t->spans[i];
        fprintf(f, ",\n{\"name\":\"%s\",\"ph\":\"X\",\"pid\":0,\"tid\":0,\"ts\":%.3f,\"dur\":%.3f,"
                   "\"args\":{\"step\":%ld", s->name, (s->t0 - t->origin) * 1e6, (s->t1 - s->t0) * 1e6, s->step);
        if (s->mb >= 0) fprintf(f, ",\"micro_batch\":%d", s->mb);
        fprintf(f, "}}");
    }
    fprintf(f, "\n]}\n");
    int bad = ferror(f);
    if (fclose(f) != 0 || bad || rename(tmp, path) != 0) { remove(tmp); return -1; }
    return 0;
}

/* ---- training -------------------------------------------------------------------------- */

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Everything a run holds, set up by main before the first step. */
typedef struct Run {
    WpConfig c;
    WpChunk k;                    /* the whole model as one chunk */
    WpTensor *tensors;            /* its tensors, for the per-tensor weight decay */
    int ntensors;
    WpData *data;
    float *params, *grads, *m, *v, *stash;
    int *tokens, *targets;
    WpScratch *scratch;
    WpAdamW opt;
    FILE *log;
    Trace trace;
    double *step_ms;              /* step times, for the median of the summary */
    size_t ntimes, times_cap;
    long start, end;              /* this run does steps start+1 .. end */
} Run;

/* Steps start+1 .. end. Returns 0, or 1 when the loss or the gradient is not finite. */
static int train(const TrainFlags *o, Run *r) {
    const WpConfig *c = &r->c;
    const int S = c->seq, G = c->mbs, M = o->micro_batches;
    const double tokens_per_step = (double)M * G * S;
    const float loss_scale = (float)(1.0 / tokens_per_step);
    const size_t np = r->k.nparams;
    char err[1024];
    double t_begin = now_s(), first_loss = NAN, last_loss = NAN, min_loss = INFINITY;
    long saved_at = -1;
    r->trace.origin = t_begin;
    for (long s = r->start; s < r->end; s++) {
        double t0 = now_s();
        memset(r->grads, 0, np * sizeof *r->grads);
        double loss_sum = 0;
        for (int g = 0; g < M; g++) {
            data_read_batch(r->data, s, g, M, G, S, r->tokens, r->targets);
            double a = now_s();
            wp_chunk_forward(c, &r->k, r->params, r->tokens, r->targets, NULL, NULL, r->stash, o->recompute,
                             r->scratch, &loss_sum);
            double b = now_s();
            wp_chunk_backward(c, &r->k, r->params, r->tokens, r->targets, r->stash, o->recompute, NULL, NULL,
                              r->grads, loss_scale, r->scratch);
            double e = now_s();
            trace_span(&r->trace, "forward", a, b, s + 1, g);
            trace_span(&r->trace, "backward", b, e, s + 1, g);
        }
        double loss = loss_sum / tokens_per_step;
        double a = now_s();
        float norm;
        float scale = adamw_clip_scale(&r->opt, adamw_sumsq(r->grads, np), &norm);
        if (!isfinite(loss) || !isfinite(norm)) {
            /* Stop before the update: the weights are garbage from here on, the checkpoint is not. */
            double bad = isfinite(loss) ? norm : loss;
            char kept[4400] = "no checkpoint was written";
            if (saved_at >= 0) snprintf(kept, sizeof kept, "the last checkpoint, %s, is of step %ld", o->save, saved_at);
            else if (o->resume) snprintf(kept, sizeof kept, "the checkpoint %s is untouched", o->resume);
            fprintf(stderr, "wp-ref: step %ld: the %s is %s: stopping (%s)\n", s + 1,
                    isfinite(loss) ? "gradient norm" : "loss", isnan(bad) ? "NaN" : "infinite", kept);
            return 1;
        }
        float lr = adamw_lr(&r->opt, s);
        adamw_update_chunk(&r->opt, r->tensors, r->ntensors, r->params, r->grads, r->m, r->v, lr, scale, s + 1);
        double t1 = now_s();
        trace_span(&r->trace, "optimizer", a, t1, s + 1, -1);
        double ms = (t1 - t0) * 1e3;
        if (r->ntimes < r->times_cap) r->step_ms[r->ntimes++] = ms;
        if (s == r->start) first_loss = loss;
        last_loss = loss;
        if (loss < min_loss) min_loss = loss;
        printf("step %5ld/%ld | loss %.6f | lr %.3e | norm %.4f | %8.1f ms | %8.0f tok/s\n", s + 1, o->steps, loss,
               lr, norm, ms, tokens_per_step / (ms * 1e-3));
        fflush(stdout);
        if (r->log) {
            fprintf(r->log, "{\"step\":%ld,\"loss\":%.9g,\"lr\":%.9g,\"grad_norm\":%.9g,\"ms\":%.3f,\"tokens_per_s\":%.1f}\n",
                    s + 1, loss, lr, norm, ms, tokens_per_step / (ms * 1e-3));
            fflush(r->log);
        }
        if (o->save && ((o->save_every && (s + 1) % o->save_every == 0) || s + 1 == r->end)) {
            double sa = now_s();
            WpTrainState st = {.step = s + 1, .seed = o->seed, .data_seq = data_seq_index(s + 1, 0, M, G, 0),
                               .micro_batches = M, .micro_batch_size = G, .seq = S};
            if (ckpt_save(o->save, c, &r->k, 1, &r->params, &r->m, &r->v, &st, err, sizeof err) != 0)
                die(1, "step %ld: cannot save the checkpoint: %s", s + 1, err);
            saved_at = s + 1;
            trace_span(&r->trace, "save", sa, now_s(), s + 1, -1);
        }
    }
    double total = now_s() - t_begin;
    qsort(r->step_ms, r->ntimes, sizeof *r->step_ms, cmp_double);
    double median = r->step_ms[r->ntimes / 2];
    printf("wp-ref: %ld steps (%ld to %ld) in %.2f s | loss %.4f -> %.4f (min %.4f) | median step %.1f ms, %.0f tok/s\n",
           r->end - r->start, r->start + 1, r->end, total, first_loss, last_loss, min_loss, median,
           tokens_per_step / (median * 1e-3));
    if (saved_at >= 0) printf("wp-ref: checkpoint of step %ld in %s\n", saved_at, o->save);
    return 0;
}

int main(int argc, char **argv) {
    TrainFlags o;
    Run run = {0}, *r = &run;
    char err[1024], name[256];
    if (train_flags_parse(argc, argv, 1, usage_head, &o, err, sizeof err)) die(2, "%s\n(wp-ref --help lists the flags)", err);
    if (!o.micro_batches) o.micro_batches = 1;
    WpConfig *c = &r->c;
    if (model_load(o.model, c, name, sizeof name, err, sizeof err)) die(2, "%s", err);
    if (o.seq) c->seq = o.seq;
    if (o.mbs) c->mbs = o.mbs;
    if (model_check(c, err, sizeof err)) die(2, "%s", err);
    const int S = c->seq, G = c->mbs, M = o.micro_batches;

    r->k = wp_chunk_make(c, 0, 0, c->layers, 1, 1);
    r->ntensors = wp_chunk_tensors(c, &r->k, NULL);
    r->tensors = calloc((size_t)r->ntensors, sizeof *r->tensors);
    if (!r->tensors) die(1, "out of memory");
    wp_chunk_tensors(c, &r->k, r->tensors);

    r->data = o.synthetic ? data_synthetic(o.seed, c->vocab) : data_open(o.data, c->vocab, S, err, sizeof err);
    if (!r->data) die(2, "%s", o.synthetic ? "out of memory" : err);

    /* Everything the steps need, allocated now: a step itself allocates nothing. */
    size_t np = r->k.nparams, nstash = wp_stash_floats(c, &r->k, o.recompute);
    r->params = malloc(np * sizeof *r->params);
    r->grads = calloc(np, sizeof *r->grads);
    r->m = calloc(np, sizeof *r->m);
    r->v = calloc(np, sizeof *r->v);
    r->stash = malloc(nstash * sizeof *r->stash);
    r->tokens = malloc((size_t)G * S * sizeof *r->tokens);
    r->targets = malloc((size_t)G * S * sizeof *r->targets);
    r->scratch = wp_scratch_new(c, c->layers);
    if (!r->params || !r->grads || !r->m || !r->v || !r->stash || !r->tokens || !r->targets || !r->scratch)
        die(1, "out of memory: %zu parameters and %zu floats of activations", np, nstash);

    if (o.resume) {
        WpTrainState st;
        if (ckpt_load(o.resume, c, &r->k, 1, &r->params, &r->m, &r->v, &st, err, sizeof err) != 0) die(2, "%s", err);
        r->start = st.step;
        if (o.seed_given && o.seed != st.seed)
            fprintf(stderr, "wp-ref: warning: --seed %llu ignored: the run being resumed has seed %llu\n",
                    (unsigned long long)o.seed, (unsigned long long)st.seed);
        if (o.synthetic && st.seed != o.seed) {
            data_close(r->data);
            if (!(r->data = data_synthetic(st.seed, c->vocab))) die(1, "out of memory");
        }
        o.seed = st.seed;
        if (st.micro_batches != M || st.micro_batch_size != G || st.seq != S)
            fprintf(stderr, "wp-ref: warning: the checkpoint was trained with M=%d G=%d S=%d, now M=%d G=%d S=%d: "
                    "the data order differs from an uninterrupted run\n", st.micro_batches, st.micro_batch_size,
                    st.seq, M, G, S);
    } else if (o.init) {
        if (ckpt_load(o.init, c, &r->k, 1, &r->params, NULL, NULL, NULL, err, sizeof err) != 0) die(2, "%s", err);
    } else {
        wp_chunk_init(c, &r->k, r->params, o.seed);
    }

    adamw_init(&r->opt, o.lr, o.warmup, (int)(o.steps < INT32_MAX ? o.steps : INT32_MAX));
    r->opt.weight_decay = o.weight_decay;
    r->opt.clip = o.clip;

    if (o.log && !(r->log = fopen(o.log, o.resume ? "a" : "w"))) die(2, "%s: %s", o.log, strerror(errno));
    r->end = o.stop_at && o.stop_at < o.steps ? o.stop_at : o.steps;
    long nsteps = r->end > r->start ? r->end - r->start : 0;
    if (o.trace) {
        r->trace.cap = (size_t)nsteps * (2 * (size_t)M + 2) + 4;
        if (r->trace.cap > (1u << 22)) r->trace.cap = 1u << 22;   /* the first 4M spans of a long run */
        if (!(r->trace.spans = malloc(r->trace.cap * sizeof *r->trace.spans))) die(1, "out of memory for the trace");
    }
    r->times_cap = (size_t)(nsteps < (1 << 20) ? (nsteps > 0 ? nsteps : 1) : (1 << 20));
    if (!(r->step_ms = malloc(r->times_cap * sizeof *r->step_ms))) die(1, "out of memory");

    printf("wp-ref: model %s: hidden %d, %d layers, %d heads (%d kv), ffn %d, vocab %d%s; %.2fM parameters\n",
           o.model, c->hidden, c->layers, c->heads, c->kv_heads, c->ffn, c->vocab, c->tied ? ", tied" : "", np / 1e6);
    printf("wp-ref: data %s; %d micro-batches x %d sequences x %d tokens = %.0f tokens per step; %d threads%s\n",
           data_describe(r->data), M, G, S, (double)M * G * S, omp_get_max_threads(), o.recompute ? "; recompute" : "");
    int status = 0;
    if (r->start >= r->end) {
        printf("wp-ref: no step to run: the model is at step %ld, this run ends at step %ld\n", r->start, r->end);
        if (o.save) {   /* --steps 0 --save FILE writes the initial model (for --init elsewhere) */
            WpTrainState st = {.step = r->start, .seed = o.seed, .data_seq = data_seq_index(r->start, 0, M, G, 0),
                               .micro_batches = M, .micro_batch_size = G, .seq = S};
            if (ckpt_save(o.save, c, &r->k, 1, &r->params, &r->m, &r->v, &st, err, sizeof err) != 0)
                die(1, "cannot save the checkpoint: %s", err);
            printf("wp-ref: checkpoint of step %ld in %s\n", r->start, o.save);
        }
    } else {
        if (r->start > 0) printf("wp-ref: resuming from %s at step %ld\n", o.resume, r->start);
        fflush(stdout);
        status = train(&o, r);
        /* Written after a failed run too: they are what one looks at to see why. */
        if (o.trace && trace_write(&r->trace, o.trace) != 0) die(1, "%s: cannot write the trace", o.trace);
    }
    if (r->log && fclose(r->log) != 0) die(1, "%s: cannot write the log", o.log);

    free(r->step_ms);
    free(r->trace.spans);
    wp_scratch_free(r->scratch);
    free(r->params); free(r->grads); free(r->m); free(r->v); free(r->stash);
    free(r->tokens); free(r->targets); free(r->tensors);
    data_close(r->data);
    return status;
}
