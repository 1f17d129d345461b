/* ckpt-compare A.safetensors B.safetensors [RTOL]: compares two checkpoints tensor by tensor
 * (same names, same shapes; relative error ||a - b|| / ||b|| at most RTOL, default 1e-4) and
 * prints the worst tensor. Exit 0 when they agree, 1 when they do not, 2 on bad input. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "train/safetensors.h"

int main(int argc, char **argv) {
    if (argc < 3) { fprintf(stderr, "usage: ckpt-compare A.safetensors B.safetensors [RTOL]\n"); return 2; }
    double rtol = argc > 3 ? atof(argv[3]) : 1e-4;
    char err[512];
    WpStFile *a = wp_st_open(argv[1], err, sizeof err), *b = a ? wp_st_open(argv[2], err, sizeof err) : NULL;
    if (!a || !b) { fprintf(stderr, "ckpt-compare: %s\n", err); return 2; }
    int bad = 0;
    double worst = 0;
    const char *worst_name = "";
    if (wp_st_count(a) != wp_st_count(b)) {
        fprintf(stderr, "ckpt-compare: %d tensors against %d\n", wp_st_count(a), wp_st_count(b));
        bad = 1;
    }
    for (int i = 0; i < wp_st_count(a); i++) {
        const char *name = wp_st_name(a, i), *da, *db;
        size_t sa[8], sb[8], na, nb;
        int ka, kb;
        const float *x = wp_st_get(a, name, &da, sa, &ka, &na), *y = wp_st_get(b, name, &db, sb, &kb, &nb);
        if (!y) { fprintf(stderr, "ckpt-compare: %s: missing in %s\n", name, argv[2]); bad = 1; continue; }
        if (strcmp(da, "F32") || strcmp(db, "F32") || na != nb) { fprintf(stderr, "ckpt-compare: %s: dtype or size differ\n", name); bad = 1; continue; }
        double num = 0, den = 0;
        for (size_t j = 0; j < na / 4; j++) { double d = (double)x[j] - y[j]; num += d * d; den += (double)y[j] * y[j]; }
        double rel = sqrt(num) / (sqrt(den) + 1e-30);
        if (!(rel <= worst)) { worst = rel; worst_name = name; }
        if (!(rel <= rtol)) { fprintf(stderr, "ckpt-compare: %s: relative error %.3g > %.3g\n", name, rel, rtol); bad = 1; }
    }
    printf("ckpt-compare: %d tensors, worst relative error %.3g (%s)%s\n", wp_st_count(a), worst, worst_name, bad ? ": DIFFER" : "");
    wp_st_close(a);
    wp_st_close(b);
    return bad;
}
