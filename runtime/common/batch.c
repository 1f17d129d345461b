/* The global batch's one rule (batch.h): sequences or tokens per step into micro-batches per
 * device, and the words every tool prints it with. */
#include <stdio.h>
#include "common/batch.h"

void wp_batch_describe(long sequences, long seq, char *out, size_t len) {
    snprintf(out, len, "global batch %ld sequence%s, %ld tokens", sequences, sequences == 1 ? "" : "s", sequences * seq);
}

/* x checked as a multiple of unit (of what: "sequences", "tokens"); the nearest ones named */
static int multiple(const char *flag, long x, long unit, const char *what, const char *why, char *err, size_t errlen) {
    if (x >= unit && x % unit == 0) return 0;
    long lo = x / unit * unit, hi = lo + unit;
    if (lo < unit) snprintf(err, errlen, "%s %ld: expected a multiple of %ld %s (%s); the nearest is %ld", flag, x, unit, what, why, hi);
    else snprintf(err, errlen, "%s %ld: expected a multiple of %ld %s (%s); the nearest are %ld and %ld", flag, x, unit, what, why, lo, hi);
    return -1;
}

int wp_batch_split(long B, long T, int seq, int devices, int mbs, int max_per, long *sequences, int *per_device,
                   char *err, size_t errlen) {
    long unit = (long)devices * mbs;
    char why[160];
    *sequences = 0;
    if (B <= 0 && T <= 0) return 0;
    snprintf(why, sizeof why, "%d device%s x %d sequence%s per micro-batch, each device running whole micro-batches",
             devices, devices == 1 ? "" : "s", mbs, mbs == 1 ? "" : "s");
    if (T > 0) {
        char whyt[200];
        snprintf(whyt, sizeof whyt, "%d device%s x %d sequence%s per micro-batch x %d tokens a sequence",
                 devices, devices == 1 ? "" : "s", mbs, mbs == 1 ? "" : "s", seq);
        if (multiple("--global-batch-tokens", T, unit * seq, "tokens", whyt, err, errlen)) return -1;
        if (B > 0 && B * seq != T) {
            snprintf(err, errlen, "--global-batch %ld and --global-batch-tokens %ld disagree: %ld sequences of %d tokens are %ld tokens; "
                     "give one of them", B, T, B, seq, B * seq);
            return -1;
        }
        B = T / seq;
    } else if (multiple("--global-batch", B, unit, "sequences", why, err, errlen)) return -1;
    if (B / unit > max_per) {
        snprintf(err, errlen, "--global-batch %ld: %ld micro-batches a device, more than %d; at most %ld sequences (%s)",
                 B, B / unit, max_per, unit * max_per, why);
        return -1;
    }
    *sequences = B;
    *per_device = (int)(B / unit);
    return 0;
}

int wp_batch_agree(int given, long B, long T, long sequences, int devices, int mbs, int per_device,
                   char *err, size_t errlen) {
    if (!sequences || given <= 0 || given == per_device) return 0;
    snprintf(err, errlen, "--micro-batches %d and %s %ld disagree: %ld sequences on %d device%s of %d sequence%s a "
             "micro-batch are %d micro-batches per rank; give one of them", given, B > 0 ? "--global-batch" : "--global-batch-tokens",
             B > 0 ? B : T, sequences, devices, devices == 1 ? "" : "s", mbs, mbs == 1 ? "" : "s", per_device);
    return -1;
}
