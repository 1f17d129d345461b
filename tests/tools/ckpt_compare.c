/* ckpt_compare A B [RTOL]: compares the weights of two checkpoints (manifests, earlier versions'
 * model files, or Hugging Face files), tensor by tensor: relative error ||a - b|| / ||b|| at most
 * RTOL (default 1e-4), and prints the worst tensor. The model's shape is A's DIR/config.json;
 * both are read with ckpt_load, so a checkpoint of any plan compares with any other. Exit 0 when
 * they agree, 1 when they do not, 2 on bad input. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "common/modelcfg.h"
#include "train/checkpoint.h"

int main(int argc, char **argv) {
    if (argc < 3) { fprintf(stderr, "usage: ckpt_compare A B [RTOL]\n"); return 2; }
    double rtol = argc > 3 ? atof(argv[3]) : 1e-4;
    char err[1024], name[256], cfgpath[4200];
    const char *slash = strrchr(argv[1], '/');
    snprintf(cfgpath, sizeof cfgpath, "%.*sconfig.json", slash ? (int)(slash - argv[1] + 1) : 0, argv[1]);
    WpConfig c;
    if (model_load(cfgpath, &c, name, sizeof name, err, sizeof err)) { fprintf(stderr, "ckpt_compare: %s\n", err); return 2; }
    WpChunk whole = wp_chunk_make(&c, 0, 0, c.layers, 1, 1);
    int nt = wp_chunk_tensors(&c, &whole, NULL);
    WpTensor *ts = calloc((size_t)nt, sizeof *ts);
    float *a = malloc(whole.nparams * sizeof *a), *b = malloc(whole.nparams * sizeof *b);
    if (!ts || !a || !b) { fprintf(stderr, "ckpt_compare: out of memory\n"); return 2; }
    wp_chunk_tensors(&c, &whole, ts);
    if (ckpt_load(argv[1], &c, &whole, 1, &a, NULL, NULL, NULL, err, sizeof err) ||
        ckpt_load(argv[2], &c, &whole, 1, &b, NULL, NULL, NULL, err, sizeof err)) {
        fprintf(stderr, "ckpt_compare: %s\n", err);
        return 2;
    }
    int bad = 0;
    double worst = 0;
    const char *worst_name = "";
    for (int i = 0; i < nt; i++) {
        const float *x = a + ts[i].offset, *y = b + ts[i].offset;
        double num = 0, den = 0;
        for (size_t j = 0; j < ts[i].rows * ts[i].cols; j++) { double d = (double)x[j] - y[j]; num += d * d; den += (double)y[j] * y[j]; }
        double rel = sqrt(num) / (sqrt(den) + 1e-30);
        if (!(rel <= worst)) { worst = rel; worst_name = ts[i].name; }
        if (!(rel <= rtol)) { fprintf(stderr, "ckpt_compare: %s: relative error %.3g > %.3g\n", ts[i].name, rel, rtol); bad = 1; }
    }
    printf("ckpt_compare: %d tensors, worst relative error %.3g (%s)%s\n", nt, worst, worst_name, bad ? ": DIFFER" : "");
    free(ts); free(a); free(b);
    return bad;
}
