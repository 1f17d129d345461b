/* What the step's operations (train/step_ops.c, the meaning of every call of common/step.h) ask
 * of the compute backend: only what differs between one that keeps a rank's buffers in host
 * memory (runtime/cpu) and one that keeps them on a device (runtime/cuda). Where a buffer's bytes
 * are and in which format, storage for activations, the batch's tokens, the chunk's forward and
 * backward, gradient sums, conversions and the trace's clock are the backend's; which slot holds
 * what, what a transfer is called and how many elements it moves, which operations read or write
 * their buffers, and when anything is released are step_ops.c's, written once.
 *
 * The emitted Makefile links one compute backend, so these are plain functions, implemented once
 * per backend (cpu/step_cpu.c, cuda/step_cuda.c). Memory is untyped here: a backend knows the
 * format of what it hands out (fp32 or bf16 arrays, host or device). Every call may end the job
 * (comm_abort) naming what failed. */
#ifndef WP_STEP_BACKEND_H
#define WP_STEP_BACKEND_H

#include <stddef.h>
#include "train/rank.h"

/* What a slot holds (StepSlot.kind): a chunk's input (its activation) or the gradient of one, a
 * stash (forward -> backward), or what BWD_B keeps for BWD_W. */
enum { SLOT_ACT, SLOT_GRAD, SLOT_STASH, SLOT_KEEP, SLOT_KINDS };
extern const char *const step_slot_names[SLOT_KINDS];   /* "activation", ... for messages */

/* ---- slots: storage for what a rank holds between operations ---- */

/* Memory for a new slot of `kind` (chunk and mb name it in messages), of the size its kind takes
 * for the rank's model; *tag is the backend's, given back to step_slot_give. */
void *step_slot_take(WpRank *R, int kind, int chunk, int mb, size_t *tag);
/* The slot's life in the plan has ended: its memory may be reused (a device backend: by work
 * queued after what may still read it). */
void step_slot_give(WpRank *R, int kind, void *p, size_t tag);

/* ---- transfers: where the communication layer reads and writes ---- */

/* Buffer b's first n elements as a transfer carries them, in format dt (step_ops.c decides it
 * from the plan): the buffer's own memory when that is its format, else a temporary in dt, filled
 * now if the operation reads the buffer (in) and converted back into it after the turn's wait if
 * the operation writes it (out; a master is never written by a transfer). A backend whose memory
 * the communication layer cannot take stages it as well. Valid until the turn's wait. */
void *step_xfer(WpRank *R, int b, size_t n, WpDtype dt, int in, int out);
/* Elements [off, off + n) of fp32 buffer b, in place, as the communication layer takes them
 * (staged where it cannot take the backend's memory: read now if in, written back after the
 * turn's wait if out). Valid until the turn's wait. */
void *step_xfer_fp32_part(WpRank *R, int b, size_t off, size_t n, int in, int out);
/* An activation slot's n elements as a send carries them in format dt (read now), or where a
 * receive into it lands (written into the slot after the turn's wait). */
void *step_act_send(WpRank *R, void *slot, size_t n, WpDtype dt);
void *step_act_recv(WpRank *R, void *slot, size_t n, WpDtype dt);
/* The turn's transfers are complete (comm_wait_turn returned): finish what step_xfer and
 * step_act_recv deferred, and free their temporaries. */
void step_turn_done(WpRank *R);

/* ---- compute ---- */

/* Tokens and targets of micro-batch mb of this step (R->step), where the backend computes. */
void step_batch(WpRank *R, int mb, const int **tokens, const int **targets);

/* A compute span for the trace, timed as the backend runs it: the host's clock (t0) where it
 * computes as it is called, events on its stream (event) where it queues the work. Only called
 * when R->tracing. */
typedef struct StepSpan { double t0; void *event; } StepSpan;
StepSpan step_span_start(WpRank *R);
void step_span_end(WpRank *R, StepSpan s, const char *cat, const char *name);

/* The fp32 sum a backward adds gradient buffer d's n elements into: cleared when first (the plan
 * says the buffer starts a new sum), else holding its values; step_grad_close stores it back at
 * d's format (a bf16 buffer's is rounded once, there). */
float *step_grad_open(WpRank *R, int d, size_t n, int first);
void step_grad_close(WpRank *R, int d, float *grad, size_t n);

/* The chunk's passes (the model's chunk functions) with the working weights of buffer w (a
 * master's as its copy rounds them). tokens and targets are NULL where the chunk has neither its
 * first nor its last layer. */
void step_forward(WpRank *R, const WpChunk *k, int w, const int *tokens, const int *targets, const void *x_in,
                  void *x_out, void *stash);
void step_backward(WpRank *R, const WpChunk *k, int w, const int *tokens, const int *targets, const void *stash,
                   const void *dy, void *dx, float *grad);
void step_backward_input(WpRank *R, const WpChunk *k, int w, const int *targets, void *stash, const void *dy,
                         void *dx, void *keep);
void step_backward_weights(WpRank *R, const WpChunk *k, const int *tokens, const int *targets, const void *stash,
                           const void *keep, float *grad);

/* ---- local ---- */

/* dst += src (first: dst = src) over n elements, summed in fp32 and stored at dst's format. */
void step_acc(WpRank *R, int dst, int src, size_t n, int first);
/* dst = src over n elements, at dst's format (a master into a bf16 buffer: its working copy). */
void step_copy(WpRank *R, int dst, int src, size_t n);

/* a[ao .. ao+n) and b[bo .. bo+n), both fp32, each become a + b (the same bits in both). */
void step_tie(WpRank *R, int a, size_t ao, int b, size_t bo, size_t n);

/* Gives back every slot still held and frees step_ops.c's tables: before compute_teardown. */
void step_ops_free(WpRank *R);

#endif
