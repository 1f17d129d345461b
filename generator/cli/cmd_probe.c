/* wpgen probe: the topology JSON of the machine it runs on (input/probe.h), or of a cluster from
 * its hosts' probes (there is no remote shell: run `wpgen probe -o HOST.json` on each host of the
 * hostfile, then `wpgen probe --merge A.json B.json ...`). The output is checked by the topology
 * loader before it is written, to stdout or -o FILE (an existing file only with --force).
 * Exit status: 0, or 2 for bad input (flags, unreadable files, a GPU without figures). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>
#include "cli/cli.h"
#include "util/interrupt.h"
#include "input/probe.h"
#include "input/topology.h"
#include "util/xalloc.h"

static void usage(FILE *f) {
    fprintf(f, "usage: wpgen probe [-o OUT.json] [--sysroot DIR] [--name NAME] [--peak-tflops T --hbm-GBps B] [--force]\n"
               "       wpgen probe --merge HOST1.json HOST2.json ... [-o OUT.json] [--force]\n"
               "Writes the topology JSON of this machine: GPUs and NVLink/PCIe from nvidia-smi, else one device per\n"
               "NUMA node; NICs from /sys. --sysroot reads /sys (DIR/sys/...), DIR/etc/hostname and nvidia-smi's\n"
               "recorded outputs (DIR/nvidia-smi-query-gpu.csv, DIR/nvidia-smi-topo-m.txt) under DIR instead.\n"
               "--merge joins the probes of a hostfile's hosts into one cluster. docs/calibration.md.\n"
               "Exit status: 0 done, 2 bad input.\n");
}

static int positive(const char *flag, const char *v, double *out) {
    char *end;
    double x = v ? strtod(v, &end) : 0;
    if (!v || !*v || *end || !(x > 0 && x < 1e7)) { fprintf(stderr, "wpgen probe: %s: expected a positive number, got \"%s\"\n", flag, v ? v : ""); return -1; }
    *out = x;
    return 0;
}

int cmd_probe(int argc, char **argv) {
    const char *out = NULL, *sysroot = NULL, *name = NULL;
    double tflops = 0, hbm = 0;
    int force = 0, merge = 0, nin = 0;
    const char **inputs = xcalloc((size_t)argc, sizeof *inputs);
    if (cli_help_asked(argc, argv)) { usage(stdout); free(inputs); return 0; }
    for (int i = 2; i < argc; i++) {
        const char *f = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        int rc = 0;
        if (!strcmp(f, "--force")) force = 1;
        else if (!strcmp(f, "--merge")) merge = 1;
        else if (f[0] != '-' && merge) inputs[nin++] = f;
        else if (!v) { fprintf(stderr, "wpgen probe: %s needs a value\n", f); rc = 1; }
        else if (!strcmp(f, "-o") || !strcmp(f, "--out")) out = argv[++i];
        else if (!strcmp(f, "--sysroot")) sysroot = argv[++i];
        else if (!strcmp(f, "--name")) name = argv[++i];
        else if (!strcmp(f, "--peak-tflops")) rc = positive(f, argv[++i], &tflops);
        else if (!strcmp(f, "--hbm-GBps")) rc = positive(f, argv[++i], &hbm);
        else { fprintf(stderr, "wpgen probe: unknown flag \"%s\"\n", f); rc = 1; }
        if (rc) { free(inputs); return EXIT_BAD_INPUT; }
    }
    if (merge && nin == 0) { fprintf(stderr, "wpgen probe: --merge needs the hosts' probe files\n"); free(inputs); return EXIT_BAD_INPUT; }
    if (merge && (sysroot || name || tflops > 0 || hbm > 0)) { fprintf(stderr, "wpgen probe: --merge takes only -o and --force\n"); free(inputs); return EXIT_BAD_INPUT; }
    if ((tflops > 0) != (hbm > 0)) { fprintf(stderr, "wpgen probe: --peak-tflops and --hbm-GBps go together\n"); free(inputs); return EXIT_BAD_INPUT; }
    struct stat st;
    if (out && !force && stat(out, &st) == 0 && S_ISREG(st.st_mode)) { fprintf(stderr, "wpgen probe: -o %s exists; refusing to overwrite it (--force replaces it)\n", out); free(inputs); return EXIT_BAD_INPUT; }
    for (int i = 0; out && i < nin; i++)
        if (stat(inputs[i], &st) == 0) {
            struct stat so;
            if (stat(out, &so) == 0 && so.st_dev == st.st_dev && so.st_ino == st.st_ino) {
                fprintf(stderr, "wpgen probe: -o %s is one of the files merged; refusing to overwrite it\n", out);
                free(inputs);
                return EXIT_BAD_INPUT;
            }
        }
    if (name && !host_name_ok(name)) {
        char shown[64];   /* one line, whatever the name holds */
        snprintf(shown, sizeof shown, "%s", name);
        for (char *c = shown; *c; c++) if ((unsigned char)*c < 32) *c = '?';
        fprintf(stderr, "wpgen probe: --name: expected %s, got \"%s\"\n", HOST_NAME_RULE, shown);
        free(inputs);
        return EXIT_BAD_INPUT;
    }
    char err[4400];
    json_t *topo = NULL;
    if (merge) topo = probe_merge(inputs, nin, err, sizeof err);
    else {
        ProbeHost *h = xcalloc(1, sizeof *h);
        if (sysroot && stat(sysroot, &st) != 0) snprintf(err, sizeof err, "--sysroot %s: %s", sysroot, strerror(errno));
        else if (probe_host(sysroot ? sysroot : "", !sysroot, h, err, sizeof err) == 0) {
            if (name) snprintf(h->name, sizeof h->name, "%s", name);
            topo = probe_topology(h, tflops, hbm, err, sizeof err);
        }
        free(h);
    }
    free(inputs);
    if (!topo) { fprintf(stderr, "wpgen probe: %s\n", err); return EXIT_BAD_INPUT; }
    char *text = json_dumps(topo, JSON_INDENT(2) | JSON_REAL_PRECISION(10));
    json_decref(topo);
    /* what it writes must be what the topology loader reads */
    Topology t;
    if (topology_load_buffer("probe output", text, strlen(text), &t, err, sizeof err)) {
        fprintf(stderr, "wpgen probe: %s\n", err);
        free(text);
        return EXIT_BAD_INPUT;
    }
    int nodes = t.nnodes, devices = t.ndevices;
    topology_free(&t);
    int rc = 0;
    if (!out) printf("%s\n", text);
    else {
        char tmp[4200];
        FILE *f = interrupt_fopen(out, tmp, sizeof tmp);   /* a temporary beside it, renamed into place */
        if (f) fprintf(f, "%s\n", text);
        if (!f || interrupt_commit(f, tmp, out)) {
            fprintf(stderr, "wpgen probe: cannot write %s: %s\n", out, strerror(errno));
            rc = EXIT_BAD_INPUT;
        } else fprintf(stderr, "wpgen probe: wrote %s (%d node%s, %d device%s)\n", out, nodes, nodes > 1 ? "s" : "", devices, devices > 1 ? "s" : "");
    }
    free(text);
    return rc;
}
