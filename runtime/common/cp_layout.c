/* Context parallelism's balanced causal layout (cp_layout.h): the checks, the positions, a member's
 * tokens. */
#include "common/cp_layout.h"
#include "common/errmsg.h"

int cp_layout_check(int S, int C, char *err, size_t errlen) {
    if (C < 1)
        return errmsg(err, errlen, "context parallelism %d: must be at least 1", C);
    if (S < 1)
        return errmsg(err, errlen, "sequence length %d: must be at least 1", S);
    int k = 2 * C;
    if (S % k) {
        int lo = S / k * k, hi = lo + k;
        if (lo)
            return errmsg(err, errlen, "sequence length %d does not split over %d context-parallel members: "
                          "the balanced layout cuts it into 2 x %d = %d equal chunks, so it must be a "
                          "multiple of %d (%d or %d)", S, C, C, k, k, lo, hi);
        return errmsg(err, errlen, "sequence length %d does not split over %d context-parallel members: "
                      "the balanced layout cuts it into 2 x %d = %d equal chunks, so it must be a "
                      "multiple of %d (at least %d)", S, C, C, k, k, k);
    }
    return 0;
}

void cp_layout_positions(int *pos, int S, int C, int member) {
    int L = cp_chunk_len(S, C);
    for (int half = 0; half < 2; half++) {
        int c = cp_layout_chunk(C, member, half);
        for (int j = 0; j < L; j++) pos[half * L + j] = c * L + j;
    }
}

void cp_layout_take(int *dst, const int *src, int G, int S, int C, int member) {
    int n = S / C, L = cp_chunk_len(S, C);
    for (int g = 0; g < G; g++)
        for (int half = 0; half < 2; half++) {
            int c = cp_layout_chunk(C, member, half);
            for (int j = 0; j < L; j++) dst[(size_t)g * n + half * L + j] = src[(size_t)g * S + c * L + j];
        }
}
