/* Parsing what nvidia-smi prints about a machine's GPUs, for `wpgen probe`: the connection matrix
 * of `nvidia-smi topo -m` and the CSV of `nvidia-smi --query-gpu=name,memory.total --format=csv`.
 * Both are parsed from text, so that tests run on recorded outputs of real machines
 * (tests/data/probe/). */
#ifndef WP_SMI_PARSE_H
#define WP_SMI_PARSE_H

#include <stddef.h>

#define SMI_MAX_GPUS 64

typedef struct SmiTopo {
    int ngpus;
    /* link[i][j]: "X" (itself), "NV<k>" (k bonded NVLinks), "PIX", "PXB", "PHB", "NODE", "SYS"
     * (or "SOC", older drivers' SYS) */
    char link[SMI_MAX_GPUS][SMI_MAX_GPUS][8];
} SmiTopo;

typedef struct SmiGpu {
    char name[96];          /* as nvidia-smi names it: "NVIDIA H100 80GB HBM3" */
    double mem_bytes;       /* memory.total */
} SmiGpu;

/* `nvidia-smi topo -m`: the GPU rows of the matrix (NIC rows, the affinity columns and the legend
 * ignored). 0, or -1 with one line in err (name: the file, for messages). */
int smi_parse_topo(const char *name, const char *text, SmiTopo *t, char *err, size_t errlen);

/* `nvidia-smi --query-gpu=name,memory.total --format=csv` (with its header line). Returns the
 * number of GPUs (at most max), or -1 with one line in err. */
int smi_parse_query(const char *name, const char *text, SmiGpu *gpus, int max, char *err, size_t errlen);

/* NVLinks between two GPUs of a cell ("NV18" -> 18), 0 for a PCIe or system path. */
int smi_nvlinks(const char *cell);

/* Whether a cell is a path through PCIe switches only (PIX, PXB): the two GPUs are in one
 * island (behind one switch, not through a host bridge or the CPUs). */
int smi_same_switch(const char *cell);

#endif
