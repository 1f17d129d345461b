/* Least squares for calibration (fit.h): normal equations in coefficients scaled to their prior
 * (u = c / s, so every unknown is of order 1 whatever its unit), solved by Gaussian elimination
 * with partial pivoting; an active set holds negative coefficients at zero. */
#include <math.h>
#include <string.h>
#include "cost/fit.h"

enum { K = COST__COUNT };

/* Solves A x = b (n x n, row-major in A[K][K]) in place; -1 if singular. */
static int solve(double A[K][K], double b[K], int n, double x[K]) {
    for (int col = 0; col < n; col++) {
        int piv = col;
        for (int r = col + 1; r < n; r++)
            if (fabs(A[r][col]) > fabs(A[piv][col])) piv = r;
        if (fabs(A[piv][col]) < 1e-300) return -1;
        if (piv != col) {
            for (int k = 0; k < n; k++) { double t = A[col][k]; A[col][k] = A[piv][k]; A[piv][k] = t; }
            double t = b[col]; b[col] = b[piv]; b[piv] = t;
        }
        for (int r = col + 1; r < n; r++) {
            double m = A[r][col] / A[col][col];
            for (int k = col; k < n; k++) A[r][k] -= m * A[col][k];
            b[r] -= m * b[col];
        }
    }
    for (int r = n - 1; r >= 0; r--) {
        double s = b[r];
        for (int k = r + 1; k < n; k++) s -= A[r][k] * x[k];
        x[r] = s / A[r][r];
    }
    return 0;
}

#define LAMBDA 1e-10

int fit_costs(const FitSample *x, int n, const double p[K], const double s[K], double c[K], double *rms) {
    if (n <= 0) return -1;
    int fixed[K] = { 0 };
    double u[K];
    for (int round = 0; round <= K; round++) {
        int map[K], m = 0;
        for (int j = 0; j < K; j++)
            if (!fixed[j]) map[m++] = j;
        double A[K][K], b[K], sol[K];
        memset(A, 0, sizeof A);
        memset(b, 0, sizeof b);
        /* rows: f_ij s_j / d_i against 1 (the fixed coefficients are 0: they contribute nothing) */
        for (int i = 0; i < n; i++) {
            double row[K];
            for (int a = 0; a < m; a++) row[a] = x[i].f[map[a]] * s[map[a]] / x[i].d;
            for (int a = 0; a < m; a++) {
                b[a] += row[a];
                for (int q = 0; q < m; q++) A[a][q] += row[a] * row[q];
            }
        }
        for (int a = 0; a < m; a++) {
            A[a][a] += LAMBDA * n;
            b[a] += LAMBDA * n * p[map[a]] / s[map[a]];
        }
        if (solve(A, b, m, sol)) return -1;
        for (int j = 0; j < K; j++) u[j] = 0;
        int neg = 0;
        for (int a = 0; a < m; a++) {
            u[map[a]] = sol[a];
            if (sol[a] < 0) { fixed[map[a]] = 1; neg = 1; }
        }
        if (!neg) break;
        for (int j = 0; j < K; j++) if (fixed[j]) u[j] = 0;
    }
    double ss = 0;
    for (int j = 0; j < K; j++) c[j] = u[j] > 0 ? u[j] * s[j] : 0;
    for (int i = 0; i < n; i++) {
        double r = (cost_seconds(x[i].f, c) - x[i].d) / x[i].d;
        ss += r * r;
    }
    if (rms) *rms = sqrt(ss / n);
    return 0;
}

int fit_link(const double *bytes, const double *secs, int n, double *lat, double *bw) {
    /* t = a + b B, rows weighted by 1 / t */
    double A[K][K] = { { 0 } }, r[K] = { 0 }, x[K];
    int sizes = 0;
    for (int i = 0; i < n; i++) {
        if (!(secs[i] > 0)) continue;
        double w = 1 / secs[i], row[2] = { w, bytes[i] * w };
        for (int a = 0; a < 2; a++) {
            r[a] += row[a];
            for (int q = 0; q < 2; q++) A[a][q] += row[a] * row[q];
        }
        sizes += i == 0 || bytes[i] != bytes[i - 1];
    }
    if (sizes < 2 || solve(A, r, 2, x)) return -1;
    if (x[0] < 0 || x[1] <= 0) {
        /* bandwidth alone through the origin, or latency alone: whichever the data allow */
        double sb = 0, sbb = 0;
        for (int i = 0; i < n; i++) if (secs[i] > 0) { sb += bytes[i] / secs[i]; sbb += bytes[i] * bytes[i] / (secs[i] * secs[i]); }
        x[0] = 0; x[1] = sbb > 0 ? sb / sbb : 0;
        if (x[1] <= 0) return -1;
    }
    *lat = x[0];
    *bw = 1 / x[1];
    return 0;
}
