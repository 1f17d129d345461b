/* AdamW's schedule and clipping, the same on every rank and every backend, and the table of its
 * settings; see optim.h. */
#include "common/optim.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *const wp_schedule_names[WP_SCHED_COUNT] = { "cosine", "linear", "constant", "wsd" };

void adamw_init(WpAdamW *o, float lr, int warmup, int steps) {
    o->lr = lr;
    o->min_lr = 0.1f * lr;
    o->warmup = warmup > 0 ? warmup : 0;
    o->steps = steps;
    o->schedule = WP_SCHED_COSINE;
    o->decay_fraction = 0.2f;
    o->beta1 = 0.9f;
    o->beta2 = 0.95f;   /* the usual choice for language models (GPT-3, LLaMA, llm.c) */
    o->eps = 1e-8f;
    o->weight_decay = 0.1f;
    o->clip = 1.0f;
}

float adamw_lr(const WpAdamW *o, long step) {
    if (step < o->warmup) return o->lr * (float)(step + 1) / (float)o->warmup;
    if (o->schedule == WP_SCHED_CONSTANT) return o->lr;
    if (step >= o->steps) return o->min_lr;
    /* The fraction of the decay done at this step: 0 at its first step, 1 at `steps`. */
    double after = (double)(o->steps - o->warmup), ratio = (double)(step - o->warmup) / after;
    if (o->schedule == WP_SCHED_WSD) {
        /* stable at lr until the decay's first step, then linear: the decay is rounded to whole steps */
        double decay = floor(o->decay_fraction * after + 0.5);
        double start = (double)o->steps - (decay > 0 ? decay : 1);
        if (step < start) return o->lr;
        ratio = (step - start) / ((double)o->steps - start);
    }
    double coeff = o->schedule == WP_SCHED_COSINE ? 0.5 * (1.0 + cos(M_PI * ratio)) : 1.0 - ratio;
    return (float)(o->min_lr + coeff * (o->lr - o->min_lr));
}

float adamw_clip_scale(const WpAdamW *o, double sumsq, float *norm) {
    double nrm = sqrt(sumsq);
    if (norm) *norm = (float)nrm;
    if (o->clip <= 0) return 1.0f;
    double scale = o->clip / (nrm + 1e-6);
    return scale < 1.0 ? (float)scale : 1.0f;
}

/* ---- the settings ---- */

#define F(field) WP_SETTING_FLOAT, offsetof(WpAdamW, field)
#define I(field) WP_SETTING_INT, offsetof(WpAdamW, field)

/* Which change is refused: only beta1, beta2 and eps, whose values the moments in the checkpoint
 * were averaged under (a changed beta2 would silently reweigh every second moment). A new rate,
 * schedule, warm-up, length, decay or clipping is what one resumes to change: allowed, loudly. */
const WpAdamWSetting wp_adamw_settings[] = {
    { "lr", "--lr", F(lr), 0, 10, 0, 0, WP_RESUME_WARN, 0, NULL },
    { "min_lr", "--min-lr", F(min_lr), 0, 10, 0, 0, WP_RESUME_WARN, 0, NULL },
    { "warmup", "--warmup", I(warmup), 0, 1 << 30, 0, 0, WP_RESUME_WARN, 0, NULL },
    /* --steps is a trainer's own flag (trainflags.c), recorded as the schedule's length */
    { "schedule_steps", "--steps", I(steps), 0, 2147483647.0, 0, 0, WP_RESUME_WARN, 0, NULL },
    { "schedule", "--schedule", WP_SETTING_SCHEDULE, offsetof(WpAdamW, schedule), 0, 0, 0, 0, WP_RESUME_WARN, 0, "cosine" },
    { "decay_fraction", "--decay-fraction", F(decay_fraction), 0, 1, 1, 0, WP_RESUME_WARN, 1, NULL },
    { "beta1", "--beta1", F(beta1), 0, 1, 0, 1, WP_RESUME_REFUSE, 0, "0.9" },
    { "beta2", "--beta2", F(beta2), 0, 1, 0, 1, WP_RESUME_REFUSE, 0, "0.95" },
    { "eps", "--eps", F(eps), 0, 1, 1, 0, WP_RESUME_REFUSE, 0, "1e-8" },
    { "weight_decay", "--weight-decay", F(weight_decay), 0, 10, 0, 0, WP_RESUME_WARN, 0, NULL },
    { "clip", "--clip", F(clip), 0, 1e30, 0, 0, WP_RESUME_WARN, 0, NULL },
};
const int wp_adamw_nsettings = (int)(sizeof wp_adamw_settings / sizeof wp_adamw_settings[0]);

#undef F
#undef I

void adamw_setting_format(const WpAdamW *o, const WpAdamWSetting *s, int exact, char *buf, size_t len) {
    const char *base = (const char *)o + s->offset;
    if (s->kind == WP_SETTING_FLOAT) snprintf(buf, len, exact ? "%.9g" : "%g", (double)*(const float *)base);
    else if (s->kind == WP_SETTING_INT) snprintf(buf, len, "%d", *(const int *)base);
    else {
        int k = *(const int *)base;
        snprintf(buf, len, "%s", k >= 0 && k < WP_SCHED_COUNT ? wp_schedule_names[k] : "?");
    }
}

int adamw_setting_parse(WpAdamW *o, const WpAdamWSetting *s, const char *text) {
    char *base = (char *)o + s->offset;
    if (s->kind == WP_SETTING_SCHEDULE) {
        for (int k = 0; k < WP_SCHED_COUNT; k++)
            if (!strcmp(text, wp_schedule_names[k])) { *(int *)base = k; return 0; }
        return -1;
    }
    char *end;
    errno = 0;
    double x = s->kind == WP_SETTING_FLOAT ? strtod(text, &end) : (double)strtol(text, &end, 10);
    if (errno || end == text || *end || !isfinite(x)) return -1;
    if (x < s->lo || x > s->hi || (s->lo_open && x == s->lo) || (s->hi_open && x == s->hi)) return -1;
    /* a float whose rounding leaves the range's open end (0.99999999 -> 1.0f) is out of range too */
    if (s->kind == WP_SETTING_FLOAT) {
        float f = (float)x;
        if ((s->lo_open && f == (float)s->lo) || (s->hi_open && f == (float)s->hi)) return -1;
        *(float *)base = f;
    } else {
        *(int *)base = (int)x;
    }
    return 0;
}

void adamw_setting_range(const WpAdamWSetting *s, char *buf, size_t len) {
    if (s->kind == WP_SETTING_SCHEDULE) {
        size_t n = (size_t)snprintf(buf, len, "one of");
        for (int k = 0; k < WP_SCHED_COUNT && n < len; k++)
            n += (size_t)snprintf(buf + n, len - n, "%s %s", k ? "," : "", wp_schedule_names[k]);
        return;
    }
    snprintf(buf, len, "%s in %c%.10g, %.10g%c", s->kind == WP_SETTING_INT ? "an integer" : "a number",
             s->lo_open ? '(' : '[', s->lo, s->hi, s->hi_open ? ')' : ']');
}

void adamw_setting_refusal(const WpAdamWSetting *s, const char *text, char *buf, size_t len) {
    char range[96];
    adamw_setting_range(s, range, sizeof range);
    size_t n = (size_t)snprintf(buf, len, "expected %s, got \"%s\"", range, text);
    if (s->kind != WP_SETTING_FLOAT || n >= len) return;
    char *end;
    errno = 0;
    double x = strtod(text, &end);
    if (end == text || *end || !isfinite(x) || x < s->lo || x > s->hi || (s->lo_open && x == s->lo) || (s->hi_open && x == s->hi))
        return;   /* out of range as written: the range says it all */
    /* in range as written, refused for its float: say so, not a range the value seems to be in */
    float f = (float)x, inside = (s->lo_open && f == (float)s->lo) ? nextafterf((float)s->lo, (float)s->hi)
                                                                  : nextafterf((float)s->hi, (float)s->lo);
    snprintf(buf + n, len - n, ", which is %g as a 32-bit float (AdamW's precision), outside the range; the nearest value "
             "inside is %.9g", (double)f, (double)inside);
}
