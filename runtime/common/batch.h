/* The global batch: one setting, the same in every tool (wpgen's plan, emit, sim and compare,
 * wp-ref, the emitted train), as torchtitan, Megatron and nanotron have it. --global-batch B is
 * the sequences of one optimizer step (--global-batch-tokens T the same in tokens); the rule that
 * turns it into micro-batches is written here once: B = micro-batches per device x devices x
 * sequences per micro-batch (G). wp-ref is one device; a plan's devices are its topology's (with
 * --context-parallel C a group of C devices runs C times the micro-batches, each shared, so the
 * rule holds per device: plan/make_plan.c). */
#ifndef WP_BATCH_H
#define WP_BATCH_H

#include <stddef.h>

enum { WP_BATCH_MAX = 1 << 30 };   /* the flags' limit, sequences or tokens */

/* The step's wording, the same in every tool: "global batch 32 sequences, 2048 tokens". */
void wp_batch_describe(long sequences, long seq, char *out, size_t len);

/* The global batch the flags give, in sequences of seq tokens: --global-batch B (B > 0) and
 * --global-batch-tokens T (T > 0), either or both (then they must agree); then split over devices
 * of mbs sequences a micro-batch into *per_device micro-batches each. *sequences: 0 where neither
 * is given (*per_device untouched). 0, or -1 with one line in err naming the flag: T not whole
 * sequences, a batch not a multiple of devices x mbs (with the nearest valid values), more than
 * max_per micro-batches a device, or B and T that disagree. */
int wp_batch_split(long B, long T, int seq, int devices, int mbs, int max_per, long *sequences, int *per_device,
                   char *err, size_t errlen);

/* A --micro-batches given (given > 0) beside the global batch (B or T as given, sequences as
 * wp_batch_split found them) must agree with the per_device it gave: 0, or -1 with one line in
 * err naming both flags. */
int wp_batch_agree(int given, long B, long T, long sequences, int devices, int mbs, int per_device,
                   char *err, size_t errlen);

#endif
