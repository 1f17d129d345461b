/* The CPU backend's threads (threads.h, and compute_process_start/compute_process_init of
 * common/compute.h). Two things made a job on a shared machine crawl: every rank starting as many
 * OpenMP threads as the node has cores (4 ranks on 2 cores ran the README's example a hundred times
 * slower than one thread each), and threads spinning while they wait (with the node busy, a
 * spinning thread takes the core from the one it waits for). Unless the user chose, the node's
 * cores are shared among its ranks and waiting threads sleep. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <omp.h>
#include "common/compute.h"
#include "cpu/threads.h"

static int chosen(const char *var) {
    const char *v = getenv(var);
    return v && *v;
}

/* OMP_NUM_THREADS is input like a flag: a value OpenMP would reject or that would ask for more
 * threads than any machine runs (each takes a workspace) ends the program here, named, exit 2,
 * rather than as "out of memory" later. A comma list gives the nested levels' counts. */
static void check_num_threads(const char *prog) {
    const char *v = getenv("OMP_NUM_THREADS");
    if (!v || !*v) return;
    long cores = sysconf(_SC_NPROCESSORS_ONLN), most = cores > 256 ? 4 * cores : 1024;
    const char *p = v;
    for (;;) {
        char *end;
        long n = strtol(p, &end, 10);
        if (end == p || n < 1 || n > most || (*end && *end != ',')) {
            fprintf(stderr, "%s: OMP_NUM_THREADS=%s: expected a positive integer up to %ld (threads per rank; this "
                    "machine has %ld cores), or a comma list of them\n", prog, v, most, cores);
            exit(2);
        }
        if (!*end) return;
        p = end + 1;
    }
}

void cpu_wait_passively(char **argv) {
    const char *slash = argv && argv[0] ? strrchr(argv[0], '/') : NULL;
    check_num_threads(slash ? slash + 1 : argv && argv[0] ? argv[0] : "wpgen");
    if (chosen("OMP_WAIT_POLICY") || chosen("OMP_NUM_THREADS")) return;
    if (setenv("OMP_WAIT_POLICY", "passive", 1)) return;
    /* the program's own path, not /proc/self/exe: the process keeps its name in ps, top and
     * pgrep (the kernel names a process after the file it executes) */
    char self[4096];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n > 0) {
        self[n] = 0;
        if (access(self, X_OK) == 0) execv(self, argv);
    }
    execv("/proc/self/exe", argv);
    /* no /proc (or exec refused): carry on spinning, the variable unset again so that the
     * start-up line does not claim otherwise */
    unsetenv("OMP_WAIT_POLICY");
}

void compute_process_start(char **argv) {
    cpu_wait_passively(argv);
}

void compute_process_init(int ranks_on_node, char *about, size_t len) {
    const char *wait = getenv("OMP_WAIT_POLICY");
    char how[64] = "";
    if (wait && *wait) snprintf(how, sizeof how, ", OMP_WAIT_POLICY=%s", wait);
    if (chosen("OMP_NUM_THREADS")) {
        int n = omp_get_max_threads();
        snprintf(about, len, "%d thread%s per rank (OMP_NUM_THREADS%s)", n, n == 1 ? "" : "s", how);
        return;
    }
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    int mine = omp_get_num_procs();   /* what this process may run on (its affinity) */
    if (cores < 1) cores = mine;
    if (ranks_on_node < 1) ranks_on_node = 1;
    long n = cores / ranks_on_node;
    if (n > mine) n = mine;
    if (n < 1) n = 1;
    omp_set_num_threads((int)n);
    char bound[64] = "";
    if (mine < cores / ranks_on_node) snprintf(bound, sizeof bound, ", %d for this rank (its binding)", mine);
    snprintf(about, len, "%ld thread%s per rank (%ld cores / %d rank%s on this node%s%s; OMP_NUM_THREADS overrides)", n,
             n == 1 ? "" : "s", cores, ranks_on_node, ranks_on_node == 1 ? "" : "s", bound, how);
}
