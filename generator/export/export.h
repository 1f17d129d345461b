/* wpgen export: a checkpoint into a folder Hugging Face's transformers loads (export.c). */
#ifndef WP_EXPORT_H
#define WP_EXPORT_H

#include <stddef.h>
#include <stdint.h>

#define EXPORT_DEFAULT_MAX_SHARD 5000000000ull   /* 5GB, transformers' save_pretrained default */

typedef struct ExportOptions {
    const char *checkpoint;   /* the model file (DIR/model.safetensors) or the folder holding it */
    const char *out;          /* -o DIR */
    int bf16;                 /* --dtype bf16 (1, the default) or fp32 (0) */
    uint64_t max_shard;       /* --max-shard-size, bytes of tensors per file */
} ExportOptions;

typedef struct ExportReport {
    int tensors, shards, copied;   /* copied: the tokenizer's (and generation's) files */
    uint64_t bytes;                /* of the tensors */
    int layers_per_read;           /* layers of each ckpt_load */
    char ids[160];                 /* the special-token ids written and where from (special_tokens.c) */
} ExportReport;

/* Bad input (exit 2): a checkpoint that cannot be read, -o in the way; failure (exit 1): writing
 * the export failed (a full disk), nothing of it left. */
enum { EXPORT_OK = 0, EXPORT_FAILED = 1, EXPORT_BAD_INPUT = 2 };

/* Writes the export (see export.c): EXPORT_OK, or the status with one line in err. */
int export_checkpoint(const ExportOptions *o, ExportReport *r, char *err, size_t errlen);

/* --max-shard-size's range: a shard smaller than 1KB (a few tensors' headers) is a mistake */
#define EXPORT_MAX_SHARD_MIN 1000ull
#define EXPORT_MAX_SHARD_MAX 1000000000000000ull   /* 1PB */

/* A size as --max-shard-size takes it: a positive integer of bytes, alone or with B, KB, MB, GB,
 * TB (powers of 1000) or KiB, MiB, GiB, TiB (of 1024), any case, as transformers writes them
 * ("5GB", "500MB", "2GiB"), from EXPORT_MAX_SHARD_MIN to _MAX. No fraction, exponent or base
 * prefix. 0, or -1. */
int export_parse_size(const char *s, uint64_t *out);

#endif
