/* The compute backend's side of the seam: what the backend-neutral training program
 * (runtime/train: flags, setup, the step loop, checkpoints, trace) asks of the backend that holds
 * a rank's buffers and runs the step's operations. runtime/cpu implements it today (host fp32,
 * OpenMP, OpenBLAS); runtime/cuda will (device buffers, streams), and the emitted Makefile picks
 * one by the table in generator/emit/backends.c.
 *
 * The neutral side never touches a buffer's memory: it names buffers by their index in the plan
 * (WpRankDesc.bufs) and moves weights in and out as host fp32 arrays, so a backend may keep them
 * on a device and in another precision (master weights stay fp32 either way). Besides these calls
 * a backend implements the step's operations of common/step.h (wp_fwd, wp_send, ...) except
 * wp_opt, which the neutral side records (train/rank.c).
 *
 * Errors: out of memory, or a device that fails, ends the job (comm_abort) naming what failed. */
#ifndef WP_COMPUTE_H
#define WP_COMPUTE_H

#include <stddef.h>
#include "common/optim.h"

/* Exit status of a run whose backend finds no device, or a plan that does not fit in its memory
 * (train/loop.h's WP_EXIT_DEVICE). */
#define COMPUTE_NO_DEVICE_STATUS 5

typedef struct WpRank WpRank;        /* a rank's state: train/rank.h */
typedef struct WpCompute WpCompute;  /* the backend's part of it (WpRank.dev): its own header */

/* The first thing a program does, before the communication layer starts: a backend whose
 * libraries read their settings when they are loaded may set them and execute the program again
 * (the CPU backend: OMP_WAIT_POLICY=passive unless the user chose; see cpu/threads.h). */
void compute_process_start(char **argv);

/* Once per process, before the step program's first parallel region and before compute_setup:
 * the host threads the backend computes with, from the ranks of the job on this node (the CPU
 * backend shares the node's cores among them unless OMP_NUM_THREADS says otherwise). Writes one
 * phrase for the start-up line, such as "1 thread per rank (2 cores / 4 ranks on this node)". */
void compute_process_init(int ranks_on_node, char *about, size_t len);

/* Allocates what the rank computes with and sets R->dev: every buffer of R->me->bufs at its
 * declared size (zeroed), AdamW's moments for the masters, the workspace of the largest chunk.
 * R->plan, R->me, R->cfg, R->chunks and R->recompute must be set. */
void compute_setup(WpRank *R);
void compute_teardown(WpRank *R);

/* After the step's operations, before its loss and norms are read: a backend that sums the loss
 * on a device adds it into R->loss_sum here, one read per step (the CPU backend: nothing). */
void compute_step_end(WpRank *R);

/* When tracing: returns once the work queued so far has run, so that a span the host times (the
 * optimizer's, a checkpoint's) is the device's time (the CPU backend: nothing to wait for). */
void compute_sync(WpRank *R);

/* What of a master buffer moves to and from the host: its weights or AdamW's moments. */
enum { WP_MASTER_W, WP_MASTER_M, WP_MASTER_V };

/* host[0..n) into (out of) master buffer `buf`'s weights or moments, n floats from its start:
 * initialization, --init/--resume and checkpoints. */
void compute_master_set(WpRank *R, int buf, int what, const float *host, size_t n);
void compute_master_get(WpRank *R, int buf, int what, float *host, size_t n);

/* Host memory for the checkpoint's copy of the masters (train/saver.h), kept for the run: pinned
 * where the backend copies from a device (faster, and the copy does not stage), plain otherwise.
 * NULL when it cannot be had; compute_host_free takes what compute_host_alloc gave. */
void *compute_host_alloc(WpRank *R, size_t bytes);
void compute_host_free(WpRank *R, void *p);

/* The sum of the squares of buffer `buf`'s first n floats (a gradient), in double and in an
 * order that depends only on n, so every run clips alike. */
double compute_sumsq(WpRank *R, int buf, size_t n);

/* AdamW (optim.h's hyperparameters) on floats [off, off + n) of master buffer `master`, with the
 * gradient in the same floats of buffer `grad`, scaled by grad_scale; weight decay wd (0 for
 * norms); t is the 1-based number of the update. */
void compute_adamw(WpRank *R, const WpAdamW *opt, int master, int grad, size_t off, size_t n, float lr,
                   float wd, float grad_scale, long t);

#endif
