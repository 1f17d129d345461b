/* --tokens N [--gpu-hour-price X] on sim, compare and -s auto: the predicted step turned into
 * what a user asks before renting a cluster: how many steps the budget takes, how long on the
 * wall, how many device-hours (every device of the plan, for the whole run) and, given a price per
 * device and hour, what it costs; and the same at the most the rates' band says a step may take
 * (cost/trust.h), since a prediction of the default rates may be half the measured step. */
#include <math.h>
#include <stdio.h>
#include <string.h>
#include "cli/cli.h"

int budget_of(const Args *a, const Plan *p, double step_s, const TrustRates *tr, Budget *b) {
    memset(b, 0, sizeof *b);
    if (a->tokens <= 0 || !(step_s > 0)) return 0;
    b->tokens = round(a->tokens);   /* 2.5T: a whole number of tokens */
    b->tokens_per_step = (double)p->total_mbs * p->model.mbs * p->model.seq;
    b->steps = ceil(b->tokens / b->tokens_per_step);   /* the last step is a whole one */
    b->wall_s = b->steps * step_s;
    b->devices = p->nranks;
    b->gpu_hours = b->wall_s / 3600 * b->devices;
    b->price = a->gpu_hour_price;
    b->cost = b->price >= 0 ? b->gpu_hours * b->price : -1;
    b->upper = trust_upper(tr);
    return 1;
}

/* seconds as people read a long run: "41 min", "29.6 h", "12.3 days" */
static void human_time(double s, char *out, size_t len) {
    if (s < 3600) snprintf(out, len, "%.3g min", s / 60);
    else if (s < 3 * 86400) snprintf(out, len, "%.3g h", s / 3600);
    else snprintf(out, len, s < 100 * 86400 ? "%.3g days" : "%.0f days", s / 86400);
}

/* a count as --tokens takes one: "100B", "2.5T", "4096" */
static void human_count(double x, char *out, size_t len) {
    static const struct { double scale; const char *suffix; } s[] = { { 1e12, "T" }, { 1e9, "B" }, { 1e6, "M" }, { 1e3, "K" } };
    for (size_t i = 0; i < sizeof s / sizeof s[0]; i++)
        if (x >= s[i].scale) { snprintf(out, len, "%.4g%s", x / s[i].scale, s[i].suffix); return; }
    snprintf(out, len, "%.0f", x);
}

void budget_amount(double x, char *out, size_t len) {
    snprintf(out, len, x >= 100 ? "%.0f" : "%.3g", x);
}

void budget_describe(const Budget *b, char *out, size_t len) {
    char tokens[32], wall[32], wall_hi[32], gh[32], gh_hi[32], c[32], c_hi[32], cost[96] = "", cost_hi[64] = "";
    human_count(b->tokens, tokens, sizeof tokens);
    human_time(b->wall_s, wall, sizeof wall);
    human_time(b->wall_s * b->upper, wall_hi, sizeof wall_hi);
    budget_amount(b->gpu_hours, gh, sizeof gh);
    budget_amount(b->gpu_hours * b->upper, gh_hi, sizeof gh_hi);
    if (b->cost >= 0) {
        budget_amount(b->cost, c, sizeof c);
        budget_amount(b->cost * b->upper, c_hi, sizeof c_hi);
        snprintf(cost, sizeof cost, ", cost %s at %g per GPU-hour", c, b->price);
        snprintf(cost_hi, sizeof cost_hi, ", cost %s", c_hi);
    }
    snprintf(out, len, "%s tokens = %.0f steps of %.0f tokens: %s, %s GPU-hours on %d device%s%s; up to %s, %s GPU-hours%s "
             "(%.2fx, the rates' band)", tokens, b->steps, b->tokens_per_step, wall, gh, b->devices, b->devices == 1 ? "" : "s", cost, wall_hi,
             gh_hi, cost_hi, b->upper);
}

json_t *budget_json(const Budget *b) {
    json_t *j = json_object();
    json_object_set_new(j, "tokens", json_integer((json_int_t)b->tokens));
    json_object_set_new(j, "tokens_per_step", json_integer((json_int_t)b->tokens_per_step));
    json_object_set_new(j, "steps", json_integer((json_int_t)b->steps));
    json_object_set_new(j, "wall_s", json_real(b->wall_s));
    json_object_set_new(j, "devices", json_integer(b->devices));
    json_object_set_new(j, "gpu_hours", json_real(b->gpu_hours));
    json_object_set_new(j, "price_per_gpu_hour", b->price >= 0 ? json_real(b->price) : json_null());
    json_object_set_new(j, "cost", b->cost >= 0 ? json_real(b->cost) : json_null());
    /* the most the band says: every figure above times this */
    json_object_set_new(j, "upper_factor", json_real(b->upper));
    return j;
}
