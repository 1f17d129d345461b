/* The training loop shared by DIR/train and wp-ref; see loop.h. Everything a user reads of a run
 * (step lines, the log, the stop and failure messages, the summary) is written here, so both
 * trainers say the same things in the same format. */
#include <math.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "train/loop.h"
#include "train/data.h"
#include "common/flops.h"

/* ---- stopping on a signal ---- */

/* The signal that asked for a stop (0: none). The handler only records it: the loop looks at it
 * between steps, where every process agrees (it travels in the step's allreduce). */
static volatile sig_atomic_t stop_signal;

static void on_stop_signal(int sig) {
    stop_signal = sig;
    /* Whoever stops the job may have closed our output already (mpirun, on SIGTERM, stops
     * forwarding it): a line written then must not kill the process before it saves. */
    signal(SIGPIPE, SIG_IGN);
}

void loop_catch_signals(void) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_stop_signal;
    sigemptyset(&sa.sa_mask);
    /* SA_RESETHAND: a second signal finds the default action and ends the process at once, for
     * whoever does not want to wait for the step. No SA_RESTART: a write blocked on an output
     * nobody reads any more (mpirun stops forwarding it when it is told to stop) returns, so the
     * process gets on to its checkpoint; the waits of the communication layer poll anyway. */
    sa.sa_flags = SA_RESETHAND;
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    /* a closed terminal or ssh session (nohup not used) is a stop, not a loss of the run */
    sigaction(SIGHUP, &sa, NULL);
    /* Open MPI's mpirun forwards SIGUSR1 to every rank and then reports their exit status, where
     * a SIGTERM to mpirun kills the ranks a second later (odls_base_sigkill_timeout) and exits 1 */
    sigaction(SIGUSR1, &sa, NULL);
}

static const char *signal_name(int sig) {
    return sig == SIGTERM ? "SIGTERM" : sig == SIGINT ? "SIGINT" : sig == SIGUSR1 ? "SIGUSR1" : sig == SIGHUP ? "SIGHUP" : "a stop signal";
}

/* ---- the loop ---- */

long loop_end(const TrainFlags *o) {
    return o->stop_at && o->stop_at < o->steps ? o->stop_at : o->steps;
}

/* The summary compares the mean loss of the first and the last this many steps. */
enum { SUMMARY_STEPS = 10 };
/* The step line's ETA to --steps: the mean wall time of the last ETA_STEPS steps (their
 * validation and saves included), so that the first steps' warm-up fades out of it. */
enum { ETA_STEPS = 20 };

/* seconds as the step line's ETA: 45s, 2m31s, 3h07m, 2d05h */
static void format_eta(char *out, size_t len, double sec) {
    long t = sec > 0 && sec < 1e12 ? (long)(sec + 0.5) : 0;
    if (t < 60) snprintf(out, len, "%lds", t);
    else if (t < 3600) snprintf(out, len, "%ldm%02lds", t / 60, t % 60);
    else if (t < 86400) snprintf(out, len, "%ldh%02ldm", t / 3600, t / 60 % 60);
    else snprintf(out, len, "%ldd%02ldh", t / 86400, t / 3600 % 24);
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static WpTrainState state_at(const WpLoop *L, long step) {
    WpTrainState st = { .step = step, .seed = L->flags->seed,
                        .data_seq = L->data_seq0 + data_seq_index(step - L->start, 0, L->micro_batches, L->mbs, 0),
                        .data_order = L->shuffled ? WP_ORDER_SHUFFLED : WP_ORDER_FILE,
                        .micro_batches = L->micro_batches, .micro_batch_size = L->mbs, .seq = L->seq,
                        .adamw = L->flags->opt, .adamw_known = (1u << wp_adamw_nsettings) - 1, .tokenizer_known = 1,
                        .run = L->flags->run };
    snprintf(st.tokenizer, sizeof st.tokenizer, "%s", L->tokenizer ? L->tokenizer : "");
    snprintf(st.tokenizer_name, sizeof st.tokenizer_name, "%s", L->tokenizer_name ? L->tokenizer_name : "");
    return st;
}

long loop_val_steps(const TrainFlags *o, uint64_t val_seqs, int micro_batches, int mbs) {
    if (o->val_steps) return o->val_steps;
    uint64_t per = (uint64_t)micro_batches * (uint64_t)mbs, most = val_seqs < 1024 ? val_seqs : 1024;
    return most / per > 0 ? (long)(most / per) : 1;
}

/* The mean loss over the held-out set with the weights of `step` (a span in the trace). */
static double validate(const WpLoop *L, long step, double *ms) {
    long k = loop_val_steps(L->flags, L->val_seqs, L->micro_batches, L->mbs);
    double t0 = L->now(L->ud);
    double loss = L->validate(L->ud, k) / ((double)k * L->micro_batches * L->mbs * L->seq);
    double t1 = L->now(L->ud);
    if (L->span) L->span(L->ud, "validation", t0, t1, step);
    *ms = (t1 - t0) * 1e3;
    return loss;
}

static void print_val(const WpLoop *L, long step, double loss, double ms) {
    long k = loop_val_steps(L->flags, L->val_seqs, L->micro_batches, L->mbs);
    uint64_t read = (uint64_t)k * (uint64_t)L->micro_batches * (uint64_t)L->mbs;
    /* fewer than that held: the held-out data are read from their start again (data_read_batch) */
    char held[96] = "";
    if (read > L->val_seqs)
        snprintf(held, sizeof held, ", which holds %llu (read again from its start)", (unsigned long long)L->val_seqs);
    printf("val   %5ld/%ld | val loss %.6f | %llu sequences of --val-data%s | %8.1f ms\n", step, L->flags->steps, loss,
           (unsigned long long)read, held, ms);
}

/* The saves of a run: the one under way (begun, not yet committed) and the last committed. */
typedef struct Saves {
    long pending;       /* the step of the save under way, or -1 */
    long saved_at;      /* the step of the last committed checkpoint, or -1 */
    double stall;       /* seconds the training thread spent on saves in this step */
    int defer;          /* a commit's line waits in `line` for the step's own line (save_line) */
    char line[4400];    /* the deferred line, "" if none */
} Saves;

/* Prints the commit's line held back while the step's own line was not yet printed: a step's
 * checkpoint is written before its line (a stop may leave nobody reading the console), but read
 * after it. */
static void save_line(const WpLoop *L, Saves *sv) {
    if (!sv->line[0]) return;
    if (L->printer) fputs(sv->line, stdout), fflush(stdout);
    sv->line[0] = 0;
}

/* After one of the trainer's save calls, begun at t0, for the checkpoint of `step`: its time goes
 * into the step's stall and the trace; a failure (rc) is said on the printer. rc, 0 or -1. */
static int save_call_done(const WpLoop *L, Saves *sv, long step, double t0, int rc, const char *err) {
    double t1 = L->now(L->ud);
    sv->stall += t1 - t0;
    if (rc) {
        if (L->printer) fprintf(stderr, "%s: step %ld: cannot save the checkpoint: %s\n", L->prog, step, err);
        return -1;
    }
    if (L->span) L->span(L->ud, "save", t0, t1, step);
    return 0;
}

/* Begins the checkpoint of `step`: with a trainer that writes in the background it is under way
 * when this returns, else written. 0, or -1 having said why (printer). */
static int save_begin(const WpLoop *L, Saves *sv, long step) {
    char err[1024] = "";
    WpTrainState st = state_at(L, step);
    double t0 = L->now(L->ud);
    int rc = L->save(L->ud, L->flags->save, (int)L->flags->keep, &st, err, sizeof err);
    if (save_call_done(L, sv, step, t0, rc, err)) return -1;
    if (L->save_commit) sv->pending = step;
    else sv->saved_at = step;
    return 0;
}

/* Commits the save under way, if any (collective): waits for every process's part. 0, or -1
 * having said why (printer). */
static int save_end(const WpLoop *L, Saves *sv) {
    if (sv->pending < 0) return 0;
    long step = sv->pending;
    sv->pending = -1;
    char err[1024] = "";
    WpSaveReport rep = { 0 };
    double t0 = L->now(L->ud);
    int rc = L->save_commit(L->ud, &rep, err, sizeof err);
    if (save_call_done(L, sv, step, t0, rc, err)) return -1;
    sv->saved_at = step;
    if (L->printer) {
        save_line(L, sv);   /* one held back still: in order */
        snprintf(sv->line, sizeof sv->line, "save  %5ld/%ld | %s | this process's shard %.1f MiB: copied in %.1f ms, written in %.2f s%s\n",
                 step, L->flags->steps, L->flags->save, (double)rep.bytes / (1 << 20), rep.copy_seconds * 1e3,
                 rep.write_seconds, L->flags->sync_save ? "" : " in the background");
        if (!sv->defer) save_line(L, sv);
    }
    return 0;
}

int loop_run(const WpLoop *L) {
    const TrainFlags *o = L->flags;
    const long start = L->start, end = loop_end(o);
    const double tokens_per_step = (double)L->micro_batches * L->mbs * L->seq;
    /* the model FLOPs of a step over what the devices could do in its time: MFU = flops / ms / peak */
    const double flops_per_step = L->model ? wp_model_flops_per_token(L->model, L->seq) * tokens_per_step : 0;
    if (start >= end) {
        if (L->printer) printf("%s: no step to run: the model is at step %ld, this run ends at step %ld\n", L->prog, start, end);
        /* --val-data: the held-out loss of the model as it is (a checkpoint evaluated) */
        if (L->validate) {
            double ms, loss = validate(L, start, &ms);
            if (L->printer) print_val(L, start, loss, ms);
        }
        /* --steps 0 --save FILE writes the initial model (for --init elsewhere) */
        if (o->save) {
            Saves sv = { .pending = -1, .saved_at = -1 };
            if (save_begin(L, &sv, start) || save_end(L, &sv)) return WP_EXIT_FAILED;
            if (L->printer) printf("%s: checkpoint of step %ld in %s\n", L->prog, start, o->save);
        }
        return WP_EXIT_OK;
    }
    if (start > 0 && o->resume && L->printer) printf("%s: resuming from %s at step %ld\n", L->prog, o->resume, start);
    fflush(stdout);

    const WpAdamW opt = o->opt;
    /* step times, for the median of the summary (the first million steps of a long run) */
    size_t ncap = (size_t)(end - start < (1 << 20) ? end - start : (1 << 20)), ntimes = 0;
    double *step_ms = malloc(ncap * sizeof *step_ms);   /* NULL: a summary without the median */

    int status = WP_EXIT_OK;
    long done = 0;
    Saves sv = { .pending = -1, .saved_at = -1 };
    /* the losses of the first and the last SUMMARY_STEPS steps, for the summary's means: one
     * step's loss is too noisy to compare */
    double t_begin = L->now(L->ud), head[SUMMARY_STEPS], tail[SUMMARY_STEPS], min_loss = INFINITY;
    double t_prev = t_begin, recent[ETA_STEPS], recent_sum = 0;   /* wall seconds of the last steps */
    for (long s = start; s < end; s++) {
        double t0 = L->now(L->ud);
        double red[4] = { 0, 0, 0, 0 };
        sv.stall = 0;
        L->step(L->ud, s, &red[0], &red[1]);
        red[2] = stop_signal != 0;   /* a signal during the step counts for this one */
        red[3] = sv.pending >= 0 && !L->save_idle(L->ud);   /* still writing its part of a checkpoint */
        /* one sum for the loss, the gradient norm, whether any process was asked to stop, and how
         * many are still writing a checkpoint */
        if (L->allreduce) L->allreduce(L->ud, red, 4);
        double loss = red[0] / tokens_per_step;
        float norm, scale = adamw_clip_scale(&opt, red[1], &norm);
        int stop = red[2] > 0;
        /* every process's part written (every process sees the same sum): the commit */
        if (sv.pending >= 0 && red[3] == 0 && save_end(L, &sv)) { status = WP_EXIT_FAILED; break; }
        if (!isfinite(loss) || !isfinite(norm)) {
            /* the checkpoint under way is of good weights: committed before saying which is kept */
            save_end(L, &sv);
            long saved_at = sv.saved_at;
            /* Stop before the update: the weights are garbage from here on, the checkpoint is not. */
            if (L->printer) {
                double bad = isfinite(loss) ? norm : loss;
                char kept[4400] = "no checkpoint was written";
                if (saved_at >= 0) snprintf(kept, sizeof kept, "the last checkpoint, %s, is of step %ld", o->save, saved_at);
                else if (o->resume) snprintf(kept, sizeof kept, "the checkpoint %s is untouched", o->resume);
                fprintf(stderr, "%s: step %ld: the %s is %s: stopping (%s)\n", L->prog, s + 1,
                        isfinite(loss) ? "gradient norm" : "loss", isnan(bad) ? "NaN" : "infinite", kept);
            }
            status = WP_EXIT_FAILED;
            break;
        }
        float lr = adamw_lr(&opt, s);
        double t1 = L->now(L->ud);
        L->update(L->ud, &opt, lr, scale, s + 1);
        double t2 = L->now(L->ud);
        if (L->span) L->span(L->ud, "optimizer", t1, t2, s + 1);
        double ms = (t2 - t0) * 1e3;
        done++;
        if (ntimes < ncap && step_ms) step_ms[ntimes++] = ms;
        if (done <= SUMMARY_STEPS) head[done - 1] = loss;
        tail[(done - 1) % SUMMARY_STEPS] = loss;
        if (loss < min_loss) min_loss = loss;
        /* the checkpoint before the lines: when stopping, the console may no longer be read. One
         * save at a time: the one under way is committed first. The last step's and a stop's are
         * committed at once, as is every one with --sync-save. */
        int every = o->save_every && (s + 1) % o->save_every == 0;
        if (o->save && (every || s + 1 == end || stop)) {
            int at_once = o->sync_save || s + 1 == end || stop;
            sv.defer = 1;   /* this step's commit is said after its step line */
            int failed = save_end(L, &sv) || save_begin(L, &sv, s + 1) || (at_once && save_end(L, &sv));
            sv.defer = 0;
            if (failed) {
                save_line(L, &sv);
                status = WP_EXIT_FAILED;
                break;
            }
        }
        /* the held-out loss with the weights of this step: every --val-every steps and at the end */
        double val_loss = NAN, val_ms = 0;
        if (L->validate && ((o->val_every && (s + 1) % o->val_every == 0) || s + 1 == end)) val_loss = validate(L, s + 1, &val_ms);
        if (L->printer) {
            double t_now = L->now(L->ud);
            if (done > ETA_STEPS) recent_sum -= recent[(done - 1) % ETA_STEPS];
            recent[(done - 1) % ETA_STEPS] = t_now - t_prev;
            recent_sum += t_now - t_prev;
            t_prev = t_now;
            char eta[32];
            format_eta(eta, sizeof eta, recent_sum / (done < ETA_STEPS ? done : ETA_STEPS) * (double)(o->steps - (s + 1)));
            char mfu_log[48] = "", mfu_line[32] = "";
            if (L->peak_flops > 0 && flops_per_step > 0) {
                double mfu = flops_per_step / (ms * 1e-3) / L->peak_flops;
                snprintf(mfu_log, sizeof mfu_log, ",\"mfu\":%.6g", mfu);
                snprintf(mfu_line, sizeof mfu_line, " | MFU %5.1f%%", 100 * mfu);
            }
            if (L->log) {
                fprintf(L->log, "{\"step\":%ld,\"loss\":%.9g,\"lr\":%.9g,\"grad_norm\":%.9g,\"ms\":%.3f,\"tokens_per_s\":%.1f%s",
                        s + 1, loss, lr, norm, ms, tokens_per_step / (ms * 1e-3), mfu_log);
                if (!isnan(val_loss)) fprintf(L->log, ",\"val_loss\":%.9g", val_loss);
                /* the time this step's saves held the training thread (a commit, a copy to the host) */
                if (sv.stall > 0) fprintf(L->log, ",\"save_ms\":%.3f", sv.stall * 1e3);
                fprintf(L->log, "}\n");
                fflush(L->log);
            }
            printf("step %5ld/%ld | loss %.6f | lr %.3e | grad norm %.4f | %8.1f ms | %9.0f tok/s%s | eta %s\n", s + 1,
                   o->steps, loss, lr, norm, ms, tokens_per_step / (ms * 1e-3), mfu_line, eta);
            if (!isnan(val_loss)) print_val(L, s + 1, val_loss, val_ms);
            save_line(L, &sv);
            /* the data's end is said, not wrapped over in silence */
            if (L->epoch_seqs) {
                uint64_t before = data_seq_index(s, 0, L->micro_batches, L->mbs, 0) / L->epoch_seqs;
                uint64_t after = data_seq_index(s + 1, 0, L->micro_batches, L->mbs, 0) / L->epoch_seqs;
                for (uint64_t e = before; e < after; e++)
                    printf("%s: epoch %llu of the data (%llu sequences) ended in step %ld; epoch %llu reads them %s\n", L->prog,
                           (unsigned long long)e + 1, (unsigned long long)L->epoch_seqs, s + 1, (unsigned long long)e + 2,
                           L->shuffled ? "in a new order" : "again in order");
            }
            fflush(stdout);
        }
        if (stop && s + 1 < end) {
            if (L->printer) {
                const char *what = signal_name(stop_signal);
                if (!stop_signal) what = "a stop signal on another rank";
                if (sv.saved_at == s + 1)
                    fprintf(stderr, "%s: stopped by %s after step %ld: the checkpoint of step %ld is in %s "
                            "(continue with --resume %s)\n", L->prog, what, s + 1, s + 1, o->save, o->save);
                else
                    fprintf(stderr, "%s: stopped by %s after step %ld: no checkpoint (--save FILE writes one)\n", L->prog,
                            what, s + 1);
            }
            status = WP_EXIT_STOPPED;
            break;
        }
    }
    /* a save under way when the loop ended (it cannot be at the end or a stop, which commit theirs
     * at once): committed, or reported, before the summary */
    if (sv.pending >= 0 && save_end(L, &sv)) status = WP_EXIT_FAILED;
    if (L->printer && done > 0 && status != WP_EXIT_FAILED) {
        double median = NAN;
        if (ntimes > 0) {
            qsort(step_ms, ntimes, sizeof *step_ms, cmp_double);
            median = step_ms[ntimes / 2];
        }
        char mfu[32] = "";
        if (L->peak_flops > 0 && flops_per_step > 0)
            snprintf(mfu, sizeof mfu, ", MFU %.1f%%", 100 * flops_per_step / (median * 1e-3) / L->peak_flops);
        /* k steps at each end, as many as fit twice (one step: itself at both ends) */
        long k = done >= 2 * SUMMARY_STEPS ? SUMMARY_STEPS : done / 2 > 0 ? done / 2 : 1;
        double first = 0, last = 0;
        for (long i = 0; i < k; i++) first += head[i], last += tail[(done - 1 - i) % SUMMARY_STEPS];
        char span[160];
        if (k > 1) snprintf(span, sizeof span, "mean %.4f (steps %ld-%ld) -> %.4f (steps %ld-%ld)", first / k, start + 1,
                            start + k, last / k, start + done - k + 1, start + done);
        else snprintf(span, sizeof span, "%.4f -> %.4f", first, last);
        printf("%s: %ld steps (%ld to %ld) in %.2f s | loss %s (min %.4f) | median step %.1f ms, %.0f tok/s%s\n",
               L->prog, done, start + 1, start + done, L->now(L->ud) - t_begin, span, min_loss, median,
               tokens_per_step / (median * 1e-3), mfu);
        if (sv.saved_at >= 0) printf("%s: checkpoint of step %ld in %s\n", L->prog, sv.saved_at, o->save);
        fflush(stdout);
    }
    free(step_ms);
    return status;
}
