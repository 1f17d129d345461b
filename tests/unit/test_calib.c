/* Calibration files (cost/calib.h): written and read back they give the same numbers and the
 * same file; an existing file is not overwritten without force; bad files are refused with one
 * line naming the file and the JSON path; a calibration changes the simulator's times as its
 * rates say. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "check.h"
#include "tmpdir.h"
#include "plan_fixture.h"
#include "cost/calib.h"
#include "sim/sim.h"

static void put(const char *path, const char *text) {
    FILE *f = fopen(path, "w");
    fputs(text, f);
    fclose(f);
}

static void test_round_trip(void) {
    CalibType types[2] = {
        { .name = "cpu", .precision = WP_FP32,
          .rates = { .mm_flops = 31.234567890123e9, .mm_knee = 12345.678, .attn_fwd_flops = 7.1e9, .attn_bwd_flops = 5.3e9,
                     .mem_bw = 6.02e9, .op_overhead_s = 37.5e-6, .recv_bw = 3.25e9 } },
        { .name = "A800", .precision = WP_BF16,
          .rates = { .mm_flops = 230e12, .mm_knee = 3e8, .attn_fwd_flops = 180e12, .attn_bwd_flops = 140e12,
                     .mem_bw = 1.7e12, .op_overhead_s = 0 } },
    };
    Calibration c = { .types = types, .ntypes = 2, .about = "test", .intra = { 1, 4.5e9, 2e-6 }, .net = { 1, 1.1e9, 31e-6 } };
    char path[400], path2[400], err[1024];
    snprintf(path, sizeof path, "%s/c.json", fixture_dir);
    snprintf(path2, sizeof path2, "%s/c2.json", fixture_dir);
    CHECK(calib_save(path, &c, 0, err, sizeof err) == 0, "save: %s", err);
    CHECK(calib_save(path, &c, 0, err, sizeof err) == -1 && strstr(err, "exists") && strstr(err, "--force"),
          "an existing file is not overwritten: %s", err);
    CHECK(calib_save(path, &c, 1, err, sizeof err) == 0, "--force overwrites: %s", err);
    Calibration r;
    if (calib_load(path, &r, err, sizeof err)) { CHECK(0, "load: %s", err); return; }
    CHECK(r.ntypes == 2 && !strcmp(r.about, "test"), "types and about");
    for (int i = 0; i < 2; i++) {
        const CalibType *t = calib_find(&r, types[i].name);
        CHECK(t && t->precision == types[i].precision, "type %s", types[i].name);
        if (!t) continue;
        const CostRates *a = &types[i].rates, *b = &t->rates;
        CHECK_CLOSE(b->mm_flops, a->mm_flops, 1e-15, 0, "matmul rate");
        CHECK_CLOSE(b->mm_knee, a->mm_knee, 1e-15, 0, "knee");
        CHECK_CLOSE(b->attn_fwd_flops, a->attn_fwd_flops, 1e-15, 0, "attention forward");
        CHECK_CLOSE(b->attn_bwd_flops, a->attn_bwd_flops, 1e-15, 0, "attention backward");
        CHECK_CLOSE(b->mem_bw, a->mem_bw, 1e-15, 0, "memory");
        CHECK_CLOSE(b->op_overhead_s, a->op_overhead_s, 1e-15, 1e-20, "overhead");
        CHECK_CLOSE(b->recv_bw, a->recv_bw, 1e-15, 0, "receiving (0: not in the file)");
    }
    /* the receiving rate: the file's where given, else half the memory rate (a read and a write) */
    const DeviceType cpu = { .name = "cpu" }, a800 = { .name = "A800", .rated_bf16 = 1 };
    double cc[COST__COUNT], ca[COST__COUNT];
    calib_coefs(&r, &cpu, WP_FP32, cc);
    calib_coefs(&r, &a800, WP_BF16, ca);
    CHECK_CLOSE(cost_recv_copy_s_per_byte(&cpu, cc), 1 / 3.25e9, 1e-12, 0, "a CPU's receiving rate from the file");
    CHECK_CLOSE(ca[COST_RECV], 2 / 1.7e12, 1e-12, 0, "without recv_GBps: half the memory rate");
    CHECK(cost_recv_copy_s_per_byte(&a800, ca) == 0, "a GPU's copies cost its compute nothing");
    CHECK(r.intra.set && r.net.set, "links");
    CHECK_CLOSE(r.net.bw, 1.1e9, 1e-15, 0, "network bandwidth");
    CHECK_CLOSE(r.intra.lat, 2e-6, 1e-15, 0, "intra latency");
    /* written again from what was read: the same file */
    CHECK(calib_save(path2, &r, 0, err, sizeof err) == 0, "save again: %s", err);
    char *x = tmp_slurp(path, NULL), *y = tmp_slurp(path2, NULL);
    CHECK(x && y && !strcmp(x, y), "the file read and written again is the same");
    free(x); free(y);
    calib_free(&r);
}

static void test_errors(void) {
    static const struct { const char *text, *want; } cases[] = {
        { "{", "malformed JSON" },
        { "[]", "top level: expected an object" },
        { "{\"version\": 2, \"device_types\": {}}", "version: expected 1, got 2" },
        { "{\"version\": 1}", "device_types: expected an object, got nothing" },
        { "{\"version\": 1, \"device_types\": {}, \"extra\": 1}", "top level: expected only the keys" },
        { "{\"version\": 1, \"device_types\": {\"cpu\": 3}}", "device_types.cpu: expected an object, got 3" },
        { "{\"version\": 1, \"device_types\": {\"cpu\": {\"precision\": \"fp16\"}}}", "device_types.cpu.precision: expected \"fp32\" or \"bf16\"" },
        { "{\"version\": 1, \"device_types\": {\"cpu\": {\"precision\": \"fp32\", \"matmul_tflops\": -1}}}",
          "device_types.cpu.matmul_tflops: expected a number in" },
        { "{\"version\": 1, \"device_types\": {\"cpu\": {\"precision\": \"fp32\", \"matmul_tflops\": 1, \"matmul_knee_mnk\": 1, "
          "\"attn_fwd_tflops\": 1, \"attn_bwd_tflops\": 1, \"mem_GBps\": 1}}}", "device_types.cpu.op_overhead_us: expected a number in" },
        { "{\"version\": 1, \"device_types\": {\"cpu\": {\"precision\": \"fp32\", \"matmul_flops\": 1}}}",
          "device_types.cpu: expected only the keys precision, matmul_tflops" },
        { "{\"version\": 1, \"device_types\": {}, \"links\": {\"network\": {\"bw_GBps\": 0, \"lat_us\": 1}}}",
          "links.network.bw_GBps: expected a number in" },
        { "{\"version\": 1, \"device_types\": {}, \"links\": {\"nvlink\": {}}}", "links: expected only the keys intra, network" },
    };
    char path[400], err[1024];
    snprintf(path, sizeof path, "%s/bad.json", fixture_dir);
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        put(path, cases[i].text);
        Calibration c;
        int rc = calib_load(path, &c, err, sizeof err);
        CHECK(rc == -1 && strstr(err, path) == err && strstr(err, cases[i].want) && !strchr(err, '\n'),
              "case %zu: got \"%s\", want \"%s\"", i, err, cases[i].want);
        if (rc == 0) calib_free(&c);
    }
    Calibration c;
    CHECK(calib_load("/no/such/calib.json", &c, err, sizeof err) == -1 && strstr(err, "cannot open"), "missing file: %s", err);
}

/* A calibration twice as fast at everything halves a compute-only step. */
static void test_sim_uses_it(void) {
    Topology t;
    int per[] = { 2 };
    char err[2048];
    Plan *p = fixture_ring_plan(&t, 1, per, err, sizeof err);
    CHECK(p != NULL, "%s", err);
    if (!p) return;
    CalibType ct = { .name = "cpu", .precision = WP_FP32, .rates = cost_rates_default(&t.types[0], WP_FP32) };
    ct.rates.op_overhead_s = 1e-6;
    Calibration c = { .types = &ct, .ntypes = 1 };
    SimOptions o = { .free_comm = 1, .calib = &c };
    SimResult r1, r2;
    if (sim_run(p, &o, &r1, err, sizeof err) == 0) {
        ct.rates.mm_flops *= 2; ct.rates.attn_fwd_flops *= 2; ct.rates.attn_bwd_flops *= 2; ct.rates.mem_bw *= 2;
        ct.rates.op_overhead_s /= 2;
        if (sim_run(p, &o, &r2, err, sizeof err) == 0) {
            CHECK_CLOSE(r2.step_time, r1.step_time / 2, 1e-9, 0, "twice the calibrated rates, half the step");
            sim_result_free(&r2);
        }
        sim_result_free(&r1);
    }
    plan_free(p);
    topology_free(&t);
}

int main(void) {
    fixture_init();
    test_round_trip();
    test_errors();
    test_sim_uses_it();
    fixture_done();
    return check_summary("calib");
}
