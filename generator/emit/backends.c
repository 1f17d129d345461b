/* The table of backends (see backends.h): one entry per backend, the only place the emitter and
 * the command line learn which exist, which are built, and what each adds to a program. */
#include <stdio.h>
#include <string.h>
#include "emit/backends.h"

const char *const backend_neutral_dirs[] = { "common", "train", NULL };

static const char *const c_files[] = { ".c", ".h", NULL };
static const char *const cuda_files[] = { ".cu", ".cuh", ".c", ".h", NULL };

static const Backend backends[] = {
    /* fp32 on the CPU: OpenMP threads, matrix products through OpenBLAS */
    { "cpu", BACKEND_COMPUTE, (const char *const[]){ "cpu", NULL }, c_files, NULL, "mpi", 0, 0 },
    /* GPUs: bf16 on device buffers, cuBLASLt and kernels of our own (runtime/cuda) */
    { "cuda", BACKEND_COMPUTE, (const char *const[]){ "cuda", NULL }, cuda_files, NULL, "nccl", 1, 1 },
    /* MPI (Open MPI) between host buffers; hostmpi: the world and the blocking calls, shared with nccl */
    { "mpi", BACKEND_COMM, (const char *const[]){ "hostmpi", "mpi", NULL }, c_files, NULL, NULL, 0, 0 },
    /* NCCL between GPU buffers, bootstrapped over MPI (runtime/nccl), its blocking calls over hostmpi */
    { "nccl", BACKEND_COMM, (const char *const[]){ "hostmpi", "nccl", NULL }, c_files, NULL, NULL, 1, 0 },
};
enum { NBACKENDS = sizeof backends / sizeof backends[0] };

static const char *flag_of(BackendKind kind) {
    return kind == BACKEND_COMPUTE ? "--backend" : "--comm";
}

const char *backend_default(BackendKind kind) {
    return kind == BACKEND_COMPUTE ? "cpu" : "mpi";
}

const char *backend_default_comm(const char *compute) {
    const Backend *b = backend_find(BACKEND_COMPUTE, compute ? compute : backend_default(BACKEND_COMPUTE));
    return b && b->comm_default ? b->comm_default : backend_default(BACKEND_COMM);
}

int backend_check_pair(const Backend *compute, const Backend *comm, char *err, size_t errlen) {
    if (comm->device && !compute->device) {
        snprintf(err, errlen, "--comm %s moves GPU buffers only, and --backend %s keeps them in host memory "
                 "(use --comm mpi, or --backend cuda)", comm->name, compute->name);
        return -1;
    }
    return 0;
}

const Backend *backend_find(BackendKind kind, const char *name) {
    for (int i = 0; i < NBACKENDS; i++)
        if (backends[i].kind == kind && !strcmp(backends[i].name, name)) return &backends[i];
    return NULL;
}

const Backend *backend_select(BackendKind kind, const char *name, char *err, size_t errlen) {
    if (!name) name = backend_default(kind);
    const Backend *b = backend_find(kind, name);
    if (b && !b->missing) return b;
    if (b) {
        snprintf(err, errlen, "%s %s: %s", flag_of(kind), name, b->missing);
        return NULL;
    }
    /* "expected cpu or cuda": every name of the kind, built or not */
    char names[256] = "";
    int n = 0, k = 0;
    for (int i = 0; i < NBACKENDS; i++) k += backends[i].kind == kind;
    for (int i = 0; i < NBACKENDS; i++) {
        if (backends[i].kind != kind) continue;
        size_t len = strlen(names);
        snprintf(names + len, sizeof names - len, "%s%s", n == 0 ? "" : n == k - 1 ? " or " : ", ", backends[i].name);
        n++;
    }
    snprintf(err, errlen, "%s: expected %s, got \"%s\"", flag_of(kind), names, name);
    return NULL;
}
