/* What a prediction can be trusted to (trust.h): the rates it used, its error band, ties and MFU. */
#include <stdio.h>
#include <string.h>
#include <jansson.h>
#include "cost/trust.h"
#include "common/flops.h"

TrustRates trust_rates(const Calibration *c, const char *file, const Topology *t) {
    TrustRates r = { .ntypes = t->ntypes, .file = c ? file : NULL };
    for (int i = 0; c && i < t->ntypes; i++) r.ncalibrated += calib_find(c, t->types[i].name) != NULL;
    return r;
}

void trust_describe(const TrustRates *r, char *out, size_t len) {
    if (r->ncalibrated == r->ntypes && r->ntypes > 0)
        snprintf(out, len, "calibrated by %s: held-out steps measured within %.0f%% of the prediction "
                 "(docs/calibration.md)", r->file, 100 * TRUST_BAND_CALIBRATED);
    else
        snprintf(out, len, "%s%s%sthe defaults, not calibrated: on an H200 they predicted steps %.0f-%.0f%% short, so a step may "
                 "take up to twice this (wpgen calibrate: within %.0f%%; docs/calibration.md)",
                 r->ncalibrated ? "partly calibrated by " : "", r->ncalibrated ? r->file : "", r->ncalibrated ? ", the other types " : "",
                 100 * TRUST_DEFAULTS_SHORT_LO, 100 * TRUST_DEFAULTS_SHORT_HI, 100 * TRUST_BAND_CALIBRATED);
}

double trust_upper(const TrustRates *r) {
    int all = r->ncalibrated == r->ntypes && r->ntypes > 0;
    return all ? 1 + TRUST_BAND_CALIBRATED : 1 / (1 - TRUST_DEFAULTS_SHORT_HI);
}

json_t *trust_json(const TrustRates *r) {
    int all = r->ncalibrated == r->ntypes && r->ntypes > 0;
    json_t *j = json_object();
    json_object_set_new(j, "calibrated", json_boolean(all));
    json_object_set_new(j, "file", r->file ? json_string(r->file) : json_null());
    json_object_set_new(j, "band", all ? json_real(TRUST_BAND_CALIBRATED) : json_null());
    if (!all) json_object_set_new(j, "defaults_short", json_pack("[f, f]", TRUST_DEFAULTS_SHORT_LO, TRUST_DEFAULTS_SHORT_HI));
    json_object_set_new(j, "tie_band", json_real(TRUST_TIE_BAND));
    return j;
}

int trust_ties(double step, double best) {
    return step <= best * (1 + TRUST_TIE_BAND);
}

double trust_mfu(const Plan *p, double step_time) {
    const Topology *t = p->topo;
    double peak = 0;
    for (int r = 0; r < p->nranks; r++) {
        int node = topology_node_of(t, p->ranks[r].device);
        /* a context-parallel rank is a group of cp devices */
        if (node >= 0) peak += wp_cp(&p->model) * topology_peak_flops(&t->types[t->nodes[node].type], p->precision == WP_FP32);
    }
    double tokens = (double)p->total_mbs * p->model.mbs * p->model.seq;
    double flops = wp_model_flops_per_token(&p->model, p->model.seq) * tokens;
    return peak > 0 && step_time > 0 ? flops / (step_time * peak) : 0;
}
