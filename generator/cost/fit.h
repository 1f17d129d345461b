/* The least-squares fit behind `wpgen calibrate`: coefficients c >= 0 (cost/costs.h: seconds per
 * unit of each class of work) such that every measured span's time d is close to its features'
 * f . c, in relative terms (a span of 1 ms counts as much as one of 1 s):
 *
 *     minimise  sum_i ((f_i . c - d_i) / d_i)^2  +  lambda sum_j ((c_j - p_j) / s_j)^2
 *
 * The second term holds each coefficient near a prior p (the defaults table's) on the scale s,
 * weakly (lambda 1e-10): it only decides directions the spans do not (runs of one shape cannot
 * tell a product's knee from its rate), and the fit still reproduces exact data to 1e-4. A
 * coefficient that would go negative is held at 0 and the rest fitted again. */
#ifndef WP_CALIB_FIT_H
#define WP_CALIB_FIT_H

#include "cost/costs.h"

typedef struct FitSample {
    double f[COST__COUNT];
    double d;               /* measured seconds, > 0 */
} FitSample;

/* Fits c from n samples with prior p (scale s: where p is 0 a typical size). 0, or -1 when there
 * is no sample. rms: the root mean square of the relative residuals at c. */
int fit_costs(const FitSample *x, int n, const double p[COST__COUNT], const double s[COST__COUNT], double c[COST__COUNT],
              double *rms);

/* Latency and bandwidth of points (bytes, seconds): t = lat + bytes / bw, by least squares in
 * relative terms, lat >= 0. 0, or -1 with fewer than 2 sizes. */
int fit_link(const double *bytes, const double *secs, int n, double *lat, double *bw);

#endif
