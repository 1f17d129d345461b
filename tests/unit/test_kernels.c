/* wp_expf (runtime/cpu/kernels.h), the exp of every softmax and SiLU: within 2 ulp of libm's
 * expf over the range that matters, 0 at -inf and below -88, and NaN for NaN (which used to reach
 * a float-to-int conversion, undefined behaviour that UBSan reports; build with
 * CFLAGS='-O1 -g -fsanitize=address,undefined -fno-sanitize-recover=all' to see it). */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "check.h"
#include "cpu/kernels.h"

/* Distance in units in the last place between two finite floats of the same sign. */
static int64_t ulps(float a, float b) {
    int32_t ia, ib;
    memcpy(&ia, &a, 4);
    memcpy(&ib, &b, 4);
    return ia > ib ? (int64_t)ia - ib : (int64_t)ib - ia;
}

int main(void) {
    volatile float nan_in = NAN, inf = INFINITY;   /* volatile: computed at run time, not folded */
    CHECK(isnan(wp_expf(nan_in)), "exp(NaN) = %g", (double)wp_expf(nan_in));
    CHECK(isnan(wp_expf(-nan_in)), "exp(-NaN) = %g", (double)wp_expf(-nan_in));
    CHECK(wp_expf(-inf) == 0.0f, "exp(-inf) = %g", (double)wp_expf(-inf));
    CHECK(wp_expf(-1000.0f) == 0.0f && wp_expf(-88.5f) == 0.0f, "exp below -88");
    CHECK(isfinite(wp_expf(inf)) && wp_expf(inf) > 1e38f, "exp(inf) = %g, the largest it gives", (double)wp_expf(inf));
    CHECK(wp_expf(0.0f) == 1.0f, "exp(0) = %.9g", (double)wp_expf(0.0f));
    int64_t worst = 0;
    float at = 0;
    for (float x = -87.0f; x <= 88.0f; x += 0.0137f) {
        int64_t u = ulps(wp_expf(x), expf(x));
        if (u > worst) { worst = u; at = x; }
    }
    CHECK(worst <= 2, "%lld ulp from expf at %g", (long long)worst, (double)at);
    /* In a loop as the kernels call it (vectorised): a NaN stays where it was, alone. */
    float v[64], out[64];
    for (int i = 0; i < 64; i++) v[i] = (float)(i - 32) * 0.5f;
    v[17] = nan_in;
    for (int i = 0; i < 64; i++) out[i] = wp_expf(v[i]);
    int ok = isnan(out[17]);
    for (int i = 0; i < 64; i++) ok &= i == 17 || (isfinite(out[i]) && ulps(out[i], expf(v[i])) <= 2);
    CHECK(ok, "a NaN in a vector of inputs");
    return check_summary("test_kernels");
}
