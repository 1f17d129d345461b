/* Training data: token sequences read from a fixed place that depends only on the step, the
 * global micro-batch and the sequence within it, so any rank can read any micro-batch on its own
 * and every strategy trains on exactly the reference trainer's batches (DESIGN.md, "Numerical
 * contract").
 *
 * Sources: an llm.c token shard (a file named *.bin: 256 int32 header, magic 20240520, version 1,
 * header[2] = number of tokens, then uint16 tokens); any other file, read as bytes (one token per
 * byte, vocabulary 256); or synthetic tokens, a hash of (seed, position). */
#ifndef WP_DATA_H
#define WP_DATA_H

#include <stddef.h>
#include <stdint.h>

#define WP_SHARD_MAGIC 20240520

typedef struct WpData WpData;

/* Opens path for sequences of seq+1 tokens and checks every token against vocab. path must be a
 * regular file (a named pipe, a device or a directory is refused, not waited on). The file stays
 * open and is read with pread (not mapped: see data.c). On error returns NULL and writes one line
 * naming the file to err. */
WpData *data_open(const char *path, int vocab, int seq, char *err, size_t errlen);
/* Unbounded synthetic data: token at position p is a hash of (seed, p) modulo vocab. */
WpData *data_synthetic(uint64_t seed, int vocab);
void data_close(WpData *d);

/* Tokens in the file (0 for synthetic data). */
size_t data_ntokens(const WpData *d);
/* A short description for logs: "bytes of FILE (N tokens)", "llm.c shard FILE (N tokens)", ... */
const char *data_describe(const WpData *d);

/* Index of sequence i of global micro-batch g of step s, with M micro-batches of G sequences
 * per step: q = (s*M + g)*G + i. Sequences are consumed in this order, one after another. */
uint64_t data_seq_index(long step, int g, int M, int G, int i);

/* Where a resumed run's data go on: step `step` reads sequences from seq on (the checkpoint's data
 * position), the steps after it follow in data_seq_index's order. Until called: step 0, sequence
 * 0, so step s reads from data_seq_index(s, 0, ...). */
void data_set_origin(WpData *d, long step, uint64_t seq);

/* Where sequence q starts: q*S modulo the number of possible starts (ntokens - S), so that
 * consecutive sequences tile the data (sharing one token, as each target is the next input)
 * and wrap around at the end; q*S for synthetic data. */
uint64_t data_seq_start(const WpData *d, uint64_t q, int S);

/* Fills inputs[G*S] and targets[G*S] with micro-batch g of step s: sequence i is the S+1 tokens
 * at data_seq_start(q) (q counted from the origin, data_set_origin), inputs the first S, targets the last S. Every token read is checked again:
 * if the file shrank or changed since data_open, it prints one line naming the file and what
 * changed, and ends the process with exit status 2 (under mpirun that ends the job). */
void data_read_batch(const WpData *d, long step, int g, int M, int G, int S, int *inputs, int *targets);

#endif
