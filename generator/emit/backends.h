/* The backends an emitted program can be built with, one table entry each: a compute backend
 * (--backend: holds the buffers, runs forward/backward and AdamW) and a communication backend
 * (--comm: moves buffers between ranks), chosen separately. An entry names the runtime folders it
 * adds to the emitted directory; its part of the emitted Makefile (compiler, flags, libraries,
 * rules, probed at make time) is templates/backend/NAME.mk. Adding a backend is its folder under
 * runtime/, its fragment, one entry here and one line in the top Makefile; nothing else in the
 * emitter or the templates names a backend. */
#ifndef WP_BACKENDS_H
#define WP_BACKENDS_H

#include <stddef.h>

typedef enum { BACKEND_COMPUTE, BACKEND_COMM } BackendKind;

typedef struct Backend {
    const char *name;             /* the flag's value: --backend NAME or --comm NAME */
    BackendKind kind;
    const char *const *dirs;      /* runtime/DIR folders copied into the emitted directory */
    const char *const *exts;      /* which of their files are copied (".c", ".h", ...) */
    const char *missing;          /* NULL: built; else why it cannot be chosen yet (one line) */
    const char *comm_default;     /* compute backends: the --comm it is emitted with by default */
    int device;                   /* 1: its buffers are on a GPU (compute), or it moves device
                                   * buffers only (comm: NCCL); 0: host memory */
    int bf16_only;                /* compute: it computes in bf16 only (an fp32 plan is refused
                                   * when emitted, not when the program starts) */
} Backend;

/* The runtime folders every emitted program builds from, whatever its backends. */
extern const char *const backend_neutral_dirs[];

/* The default of each flag: "cpu", "mpi". */
const char *backend_default(BackendKind kind);

/* The default --comm of a compute backend (NULL: the default one): "nccl" for "cuda", else "mpi". */
const char *backend_default_comm(const char *compute);

/* Whether a compute and a communication backend work together: a comm layer that moves device
 * buffers only (nccl) needs a compute backend whose buffers are on the device (a device compute
 * backend on a host comm layer stages through host memory: for tests). 0, or -1 with one line in
 * err naming the flags. */
int backend_check_pair(const Backend *compute, const Backend *comm, char *err, size_t errlen);

/* The entry of a kind by name, or NULL. */
const Backend *backend_find(BackendKind kind, const char *name);

/* A flag's value (NULL: the default) -> its entry; or NULL with one line in err naming the flag:
 * an unknown name lists the known ones, a known one that is not built says so. */
const Backend *backend_select(BackendKind kind, const char *name, char *err, size_t errlen);

#endif
