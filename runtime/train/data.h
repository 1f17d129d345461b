/* Training data: token sequences read from a fixed place that depends only on the step, the
 * global micro-batch and the sequence within it (and the seed), so any rank can read any
 * micro-batch on its own and every strategy trains on exactly the reference trainer's batches
 * (DESIGN.md, "Numerical contract").
 *
 * Sources (--data): one file, a comma list, a quoted glob, or a directory (its train-*.bin). A
 * name that exists is taken as it is before any other reading of it (the whole spec first, then
 * each item of the list), so a name holding ',', '*', '?' or '[' can be given (alone, if it holds
 * a comma). Refused before a file is opened: a spec that mixes token shards with files read as
 * bytes (a glob of everything in a `wpgen data` folder matches its tokenizer.json), and in --data a
 * held-out shard val-*.bin (`wpgen data`'s validation split).
 * A file named *.bin is a token shard: a 256 × int32 header, then the tokens. llm.c's two kinds
 * are read as they are: magic 20240520 version 1, uint16 tokens; magic 20240801 version 7, uint32
 * tokens; header[2] = the number of tokens. `wpgen data` writes the same headers and records in
 * unused words (llm.c's readers ignore them) the tokenizer's name and hash, its vocabulary and the
 * token width (WP_SHARD_EXT_* below). Any other file is read as bytes (one token per byte). Or
 * synthetic tokens, a hash of (seed, position).
 *
 * Each file holds (tokens - 1) / S sequences of S+1 tokens, at every S-th token (consecutive ones
 * share a token: each target is the next input). The run's sequence q is sequence
 * perm_e(q mod N) of the files taken one after another, N their count and e = q / N the epoch;
 * perm_e is a keyed permutation of [0, N) (a Feistel network, cycle-walked) keyed by (seed, e),
 * or the identity with shuffling off. So q's tokens are a function of (seed, q) alone: no loader
 * state, and resume under any plan reads what the uninterrupted run read. */
#ifndef WP_DATA_H
#define WP_DATA_H

#include <stddef.h>
#include <stdint.h>

#define WP_SHARD_MAGIC 20240520       /* llm.c: uint16 tokens, version 1 */
#define WP_SHARD_MAGIC_U32 20240801   /* llm.c: uint32 tokens, version 7 */

/* wpgen's words in the header (all zero in llm.c's own shards). */
enum {
    WP_SHARD_EXT_TAG = 3,             /* WP_SHARD_EXT_MAGIC: the words below are set */
    WP_SHARD_EXT_VERSION = 4,         /* 1 */
    WP_SHARD_EXT_VOCAB = 5,           /* the tokenizer's vocabulary size */
    WP_SHARD_EXT_WIDTH = 6,           /* bytes per token: 2 or 4, as the magic says */
    WP_SHARD_EXT_HASH = 7,            /* words 7, 8: the first 8 bytes of tokenizer.json's SHA-256, little-endian */
    WP_SHARD_EXT_EOT = 9,             /* the end-of-text token between documents */
    WP_SHARD_EXT_NAME = 16,           /* words 16..79: the tokenizer's name, NUL-terminated UTF-8 */
    WP_SHARD_EXT_NAME_BYTES = 256,
};
#define WP_SHARD_EXT_MAGIC 0x4e504757 /* "WGPN" read as little-endian int32 */

typedef struct WpData WpData;

/* What data are opened for: training (--data) or held-out (--val-data). */
enum { WP_DATA_TRAIN, WP_DATA_VAL };

/* Opens the data spec, as role (the messages name its flag; training refuses held-out shards), for sequences of seq+1 tokens and checks every token against vocab (one
 * pass over the data). Files must be regular (a named pipe, a device is refused, not waited on);
 * they stay open and are read with pread (not mapped: see data.c). shuffle: the sequences in a
 * seeded order per epoch (else in file order). On error returns NULL and writes one line naming
 * the file (or the pattern, or the directory) to err. */
WpData *data_open(int role, const char *spec, int vocab, int seq, int shuffle, uint64_t seed, char *err, size_t errlen);
/* The files spec names (a comma list's items, a glob's matches, a directory's train-*.bin), in
 * data_open's order, as a malloc'd array of malloc'd paths in *files: how many, or -1 with err
 * set (*files NULL). Nothing is opened: what the trainers' output check counts among the inputs. */
int data_spec_files(const char *spec, char ***files, char *err, size_t errlen);
/* Unbounded synthetic data: token at position p is a hash of (seed, p) modulo vocab. */
WpData *data_synthetic(uint64_t seed, int vocab);
void data_close(WpData *d);

/* Tokens in the files (0 for synthetic data). */
size_t data_ntokens(const WpData *d);
/* Sequences in an epoch (0 for synthetic data: no epochs). */
uint64_t data_nseq(const WpData *d);
/* A short description for logs: the files, their tokens and width, the tokenizer, the order. */
const char *data_describe(const WpData *d);

/* The tokenizer of the data, what a checkpoint records and a resume and --val-data are checked
 * against: "sha256:HEX" for `wpgen data`'s shards (HEX: the first 8 bytes of tokenizer.json's
 * SHA-256, as their headers hold it), "bytes" for files read as bytes, "" where unknown (llm.c's
 * own shards, synthetic tokens). And its name ("" unless `wpgen data`'s). */
const char *data_tokenizer(const WpData *d);
const char *data_tokenizer_name(const WpData *d);

/* Index of sequence i of global micro-batch g of step s, with M micro-batches of G sequences
 * per step: q = (s*M + g)*G + i. Sequences are consumed in this order, one after another. */
uint64_t data_seq_index(long step, int g, int M, int G, int i);

/* Where a resumed run's data go on: step `step` reads sequences from seq on (the checkpoint's data
 * position), the steps after it follow in data_seq_index's order. Until called: step 0, sequence
 * 0, so step s reads from data_seq_index(s, 0, ...). */
void data_set_origin(WpData *d, long step, uint64_t seq);

/* Where the run's sequence q starts, counting the files' tokens one after another: file order's
 * sequence perm(q mod N) times S within its file; q*S for synthetic data. S must be the seq of
 * data_open. */
uint64_t data_seq_start(const WpData *d, uint64_t q, int S);

/* The keyed permutation of [0, n) (exposed for its test): a bijection, a pure function of its
 * arguments. */
uint64_t data_permute(uint64_t x, uint64_t n, uint64_t key);

/* Fills inputs[G*S] and targets[G*S] with micro-batch g of step s: sequence i is the S+1 tokens
 * at data_seq_start(q) (q counted from the origin, data_set_origin), inputs the first S, targets
 * the last S. Every token read is checked again:
 * if a file shrank or changed since data_open, it prints one line naming the file and what
 * changed, and ends the process with exit status 2 (under mpirun that ends the job). */
void data_read_batch(const WpData *d, long step, int g, int M, int G, int S, int *inputs, int *targets);

#endif
