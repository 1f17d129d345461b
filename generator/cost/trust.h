/* What a predicted step can be trusted to, said beside every prediction (sim, compare, -s auto):
 * whether the device rates were calibrated (from which file) or are the cost table's defaults,
 * the error band that applies, the band within which compare does not rank two plans, and the
 * plan's MFU at the predicted step. The bands are measurements, written once here: see
 * docs/calibration.md ("Calibrated on a GPU" and "What it measured here"). */
#ifndef WP_TRUST_H
#define WP_TRUST_H

#include <stddef.h>
#include "cost/calib.h"

/* Calibrated rates: every held-out run measured so far was within 10% of its prediction (make
 * bench-sim, 26 runs with a core per rank, worst 7.9%; an H200, 3 runs, worst 6.8%). */
#define TRUST_BAND_CALIBRATED 0.10
/* The defaults: on an H200 they predicted steps 39% to 54% shorter than measured (the same six
 * runs): a step may take up to about twice the prediction. */
#define TRUST_DEFAULTS_SHORT_LO 0.39
#define TRUST_DEFAULTS_SHORT_HI 0.54
/* compare ranks two plans only where their steps differ by more than this fraction of the faster:
 * the calibrated band (two plans' errors, measured, differ by less; with the defaults, whose
 * errors are larger but shared by plans of the same work, no narrower figure is measured). */
#define TRUST_TIE_BAND TRUST_BAND_CALIBRATED

/* Which rates the topology's device types get: each one the calibration names is calibrated. */
typedef struct TrustRates {
    int ntypes, ncalibrated;     /* device types the plan uses, and of them those calibrated */
    const char *file;            /* --calibration FILE, or NULL */
} TrustRates;

TrustRates trust_rates(const Calibration *c, const char *file, const Topology *t);

/* One line for people: "calibrated by FILE: ..." or "defaults, not calibrated: ...". */
void trust_describe(const TrustRates *r, char *out, size_t len);

/* The same for --json: { "calibrated": bool (every type), "file": FILE or null, "band": the
 * fraction or null, "defaults_short": [lo, hi] with the defaults }. A new reference. */
struct json_t;
struct json_t *trust_json(const TrustRates *r);

/* The most a step may take, as a factor of the prediction, by the band that applies: 1.1 when
 * calibrated; with the defaults, whose predictions were up to TRUST_DEFAULTS_SHORT_HI short,
 * 1 / (1 - 0.54) = 2.17. */
double trust_upper(const TrustRates *r);

/* Does a step of `step` seconds tie with the fastest, `best`? (TRUST_TIE_BAND) */
int trust_ties(double step, double best);

/* The model FLOPs of the plan's step (common/flops.h) over the step's time and the peak of the
 * plan's devices together (each rank's device type at the plan's precision, as the trainers'
 * MFU): a fraction. */
double trust_mfu(const Plan *p, double step_time);

#endif
