/* Writing a verified plan out as a self-contained directory: one C file per rank (the unrolled
 * step), plan.json, schedule.txt, an MPI rankfile, a Makefile and a README, rendered from
 * templates/ with Penlight's pl.template. Written into DIR.tmp-PID and renamed into place, so a
 * failure leaves DIR as it was. */
#ifndef WP_EMIT_H
#define WP_EMIT_H

#include <stddef.h>
#include <stdint.h>
#include "ir/plan.h"

#define WPGEN_VERSION "0.1.0"

typedef struct EmitInfo {
    const char *model_name;     /* preset name or config.json's name */
    const char *topo_name;      /* the topology's "name" */
    const char *topo_path;      /* the -t file, copied into plan.json ("topology_json"); NULL: not copied */
    const char *backend;        /* compute backend (emit/backends.h); NULL: "cpu" */
    const char *comm;           /* communication backend; NULL: the compute backend's default (backend_default_comm) */
    double bytes_intra, bytes_inter;
    double step_time_s, bubble_ratio;   /* the simulator's prediction; step_time_s 0: none */
    int argc;                   /* the command that made the plan (argv[1] on: "emit", flags), into */
    char *const *argv;          /* plan.json's "command" for wpgen replan; argc 0: none */
    /* wpgen run (generator/cli/cmd_run.c): run.json's text, written into the folder (NULL: none),
     * and train's flags, which run.sh runs with when given none, from the folder wpgen ran in */
    const char *run_json;
    int ntrain_args;
    char *const *train_args;
    const char *run_mpirun_flags;   /* WPGEN_MPIRUN_FLAGS' default then; NULL: none */
} EmitInfo;

/* 64-bit FNV-1a over everything that defines the plan (model, chunks, owners, buffers, ops). */
uint64_t plan_hash(const Plan *p);

/* 0, or -1 with one line in err; dir is untouched on failure. */
int emit_plan(const Plan *p, const EmitInfo *info, const char *dir, char *err, size_t errlen);

#endif
