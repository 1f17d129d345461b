/* Calibration files (calib.h): reading and checking them field by field, writing them so that
 * they read back to the same numbers, and turning them into the simulator's coefficients.
 *
 * Units as in topology files: TFLOP/s, GB/s (1e9 bytes), µs; the structures hold FLOP/s, bytes/s
 * and seconds. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>
#include <jansson.h>
#include "cost/calib.h"
#include "common/errmsg.h"
#include "common/jsonfile.h"
#include "util/interrupt.h"

/* Sanity bounds, far beyond any real device (as the topology's): a zero or absurd rate would make
 * an operation take forever or no time. */
static const double TFLOPS_RANGE[2] = { 1e-9, 1e6 };
static const double GBPS_RANGE[2] = { 1e-6, 1e6 };
static const double US_RANGE[2] = { 0, 1e7 };
static const double KNEE_RANGE[2] = { 0, 1e15 };

typedef struct Ctx { const char *file; char *err; size_t errlen; } Ctx;

/* A message in the form of every JSON loader's (common/jsonfile.h): "FILE: ...", one line. */
#define fail(cx, ...) wp_json_fail((cx)->err, (cx)->errlen, (cx)->file, __VA_ARGS__)

/* The one message form of every JSON loader (common/jsonfile.h): "FILE: JPATH: expected WHAT, got <v>". */
static int expected(Ctx *cx, const char *jpath, const char *what, const json_t *v) {
    return wp_json_expected(cx->err, cx->errlen, cx->file, jpath, what, v);
}

static int check_keys(Ctx *cx, const json_t *obj, const char *jpath, const char *const *allowed) {
    return wp_json_check_keys(cx->err, cx->errlen, cx->file, obj, jpath, allowed);
}

/* A required number within range, times unit into *out. */
static int number(Ctx *cx, const json_t *obj, const char *parent, const char *key, const double *range, double unit, double *out) {
    char jpath[320];
    snprintf(jpath, sizeof jpath, "%s.%s", parent, key);
    json_t *v = json_object_get(obj, key);
    char what[96];
    snprintf(what, sizeof what, "a number in [%g, %g]", range[0], range[1]);
    if (!json_is_number(v)) return expected(cx, jpath, what, v);
    double x = json_number_value(v);
    if (!(x >= range[0] && x <= range[1])) return expected(cx, jpath, what, v);
    *out = x * unit;
    return 0;
}

static int parse_type(Ctx *cx, const char *name, const json_t *v, CalibType *t) {
    static const char *const keys[] = { "precision", "matmul_tflops", "matmul_knee_mnk", "attn_fwd_tflops", "attn_bwd_tflops",
                                        "mem_GBps", "op_overhead_us", "recv_GBps", NULL };
    char jpath[256];
    snprintf(jpath, sizeof jpath, "device_types.%.200s", name);
    if (!json_is_object(v)) return expected(cx, jpath, "an object", v);
    if (check_keys(cx, v, jpath, keys)) return -1;
    json_t *pr = json_object_get(v, "precision");
    char ppath[300];
    snprintf(ppath, sizeof ppath, "%s.precision", jpath);
    if (!json_is_string(pr) || wp_dtype_parse(json_string_value(pr), &t->precision)) return expected(cx, ppath, "\"fp32\" or \"bf16\"", pr);
    CostRates *r = &t->rates;
    if (number(cx, v, jpath, "matmul_tflops", TFLOPS_RANGE, 1e12, &r->mm_flops)) return -1;
    if (number(cx, v, jpath, "matmul_knee_mnk", KNEE_RANGE, 1, &r->mm_knee)) return -1;
    if (number(cx, v, jpath, "attn_fwd_tflops", TFLOPS_RANGE, 1e12, &r->attn_fwd_flops)) return -1;
    if (number(cx, v, jpath, "attn_bwd_tflops", TFLOPS_RANGE, 1e12, &r->attn_bwd_flops)) return -1;
    if (number(cx, v, jpath, "mem_GBps", GBPS_RANGE, 1e9, &r->mem_bw)) return -1;
    if (number(cx, v, jpath, "op_overhead_us", US_RANGE, 1e-6, &r->op_overhead_s)) return -1;
    /* optional (files before it lack it): without it a rank takes in what it receives at half
     * mem_GBps, a read and a write */
    if (json_object_get(v, "recv_GBps") && number(cx, v, jpath, "recv_GBps", GBPS_RANGE, 1e9, &r->recv_bw)) return -1;
    return 0;
}

static int parse_link(Ctx *cx, const json_t *links, const char *key, CalibLink *l) {
    static const char *const keys[] = { "bw_GBps", "lat_us", NULL };
    json_t *v = json_object_get(links, key);
    if (!v) return 0;
    char jpath[64];
    snprintf(jpath, sizeof jpath, "links.%s", key);
    if (!json_is_object(v)) return expected(cx, jpath, "an object", v);
    if (check_keys(cx, v, jpath, keys)) return -1;
    if (number(cx, v, jpath, "bw_GBps", GBPS_RANGE, 1e9, &l->bw)) return -1;
    if (number(cx, v, jpath, "lat_us", US_RANGE, 1e-6, &l->lat)) return -1;
    l->set = 1;
    return 0;
}

static int parse(Ctx *cx, const json_t *root, Calibration *c) {
    static const char *const keys[] = { "version", "about", "device_types", "links", "fit", NULL };
    if (!json_is_object(root)) return expected(cx, "top level", "an object", root);
    json_t *ver = json_object_get(root, "version");
    if (!json_is_integer(ver) || json_integer_value(ver) != 1) return expected(cx, "version", "1", ver);
    if (check_keys(cx, root, "top level", keys)) return -1;
    json_t *about = json_object_get(root, "about");
    if (about && !json_is_string(about)) return expected(cx, "about", "a string", about);
    if (about && !(c->about = strdup(json_string_value(about)))) return fail(cx, "out of memory");
    json_t *types = json_object_get(root, "device_types");
    if (!json_is_object(types)) return expected(cx, "device_types", "an object", types);
    c->types = calloc(json_object_size(types) + 1, sizeof *c->types);
    if (!c->types) return fail(cx, "out of memory");
    const char *name;
    json_t *v;
    json_object_foreach(types, name, v) {
        CalibType *t = &c->types[c->ntypes];
        if (parse_type(cx, name, v, t)) return -1;
        if (!(t->name = strdup(name))) return fail(cx, "out of memory");
        c->ntypes++;
    }
    json_t *links = json_object_get(root, "links");
    if (links) {
        static const char *const lkeys[] = { "intra", "network", NULL };
        if (!json_is_object(links)) return expected(cx, "links", "an object", links);
        if (check_keys(cx, links, "links", lkeys)) return -1;
        if (parse_link(cx, links, "intra", &c->intra) || parse_link(cx, links, "network", &c->net)) return -1;
    }
    json_t *fit = json_object_get(root, "fit");
    if (fit) {
        if (!json_is_object(fit)) return expected(cx, "fit", "an object", fit);
        if (!(c->fit_json = json_dumps(fit, JSON_COMPACT | JSON_REAL_PRECISION(17)))) return fail(cx, "out of memory");
    }
    return 0;
}

int calib_load(const char *path, Calibration *c, char *err, size_t errlen) {
    Ctx cx = { path, err, errlen };
    memset(c, 0, sizeof *c);
    FILE *f = fopen(path, "rb");
    if (!f) return fail(&cx, "cannot open: %s", strerror(errno));
    json_error_t jerr;
    json_t *root = json_loadf(f, JSON_REJECT_DUPLICATES, &jerr);
    fclose(f);
    if (!root) return fail(&cx, "line %d, column %d: malformed JSON: %s", jerr.line, jerr.column, jerr.text);
    int rc = parse(&cx, root, c);
    json_decref(root);
    if (rc) calib_free(c);
    return rc;
}

static json_t *rates_json(const CalibType *t) {
    const CostRates *r = &t->rates;
    json_t *o = json_pack("{s:s, s:f, s:f, s:f, s:f, s:f, s:f}", "precision", wp_dtype_name(t->precision),
                          "matmul_tflops", r->mm_flops / 1e12, "matmul_knee_mnk", r->mm_knee, "attn_fwd_tflops",
                          r->attn_fwd_flops / 1e12, "attn_bwd_tflops", r->attn_bwd_flops / 1e12, "mem_GBps", r->mem_bw / 1e9,
                          "op_overhead_us", r->op_overhead_s / 1e-6);
    if (o && r->recv_bw > 0) json_object_set_new(o, "recv_GBps", json_real(r->recv_bw / 1e9));
    return o;
}

int calib_save(const char *path, const Calibration *c, int force, char *err, size_t errlen) {
    struct stat st;
    if (!force && stat(path, &st) == 0 && S_ISREG(st.st_mode))   /* a file of the user's; not /dev/null */
        return errmsg(err, errlen, "%s exists; refusing to overwrite it (--force replaces it)", path);
    json_t *root = json_object(), *types = json_object();
    json_object_set_new(root, "version", json_integer(1));
    if (c->about) json_object_set_new(root, "about", json_string(c->about));
    for (int i = 0; i < c->ntypes; i++) json_object_set_new(types, c->types[i].name, rates_json(&c->types[i]));
    json_object_set_new(root, "device_types", types);
    if (c->intra.set || c->net.set) {
        json_t *links = json_object();
        if (c->intra.set) json_object_set_new(links, "intra", json_pack("{s:f, s:f}", "bw_GBps", c->intra.bw / 1e9, "lat_us", c->intra.lat / 1e-6));
        if (c->net.set) json_object_set_new(links, "network", json_pack("{s:f, s:f}", "bw_GBps", c->net.bw / 1e9, "lat_us", c->net.lat / 1e-6));
        json_object_set_new(root, "links", links);
    }
    if (c->fit_json) {
        json_t *fit = json_loads(c->fit_json, 0, NULL);
        if (fit) json_object_set_new(root, "fit", fit);
    }
    char *text = json_dumps(root, JSON_INDENT(2) | JSON_REAL_PRECISION(17) | JSON_PRESERVE_ORDER);
    json_decref(root);
    if (!text) return errmsg(err, errlen, "%s: cannot write: out of memory", path);
    char tmp[4200];
    FILE *f = interrupt_fopen(path, tmp, sizeof tmp);   /* a temporary beside it, renamed into place */
    if (f) fprintf(f, "%s\n", text);
    free(text);
    if (!f || interrupt_commit(f, tmp, path)) return errmsg(err, errlen, "%s: cannot write: %s", path, strerror(errno));
    return 0;
}

void calib_free(Calibration *c) {
    for (int i = 0; i < c->ntypes; i++) free(c->types[i].name);
    free(c->types); free(c->about); free(c->fit_json);
    memset(c, 0, sizeof *c);
}

const CalibType *calib_find(const Calibration *c, const char *type) {
    for (int i = 0; c && i < c->ntypes; i++)
        if (!strcmp(c->types[i].name, type)) return &c->types[i];
    return NULL;
}

void calib_coefs(const Calibration *c, const DeviceType *d, WpDtype precision, double coef[COST__COUNT]) {
    const CalibType *t = calib_find(c, d->name);
    CostRates r = t ? cost_rates_convert(&t->rates, d->rated_bf16, t->precision, precision) : cost_rates_default(d, precision);
    cost_coefs(&r, coef);
}

void calib_apply_links(const Calibration *c, Topology *t) {
    if (!c) return;
    for (int i = 0; c->intra.set && i < t->nnodes; i++) t->nodes[i].intra.bw = c->intra.bw, t->nodes[i].intra.lat = c->intra.lat;
    if (c->net.set && t->nnodes > 1) t->net.bw = c->net.bw, t->net.lat = c->net.lat;
}
