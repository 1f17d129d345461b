/* Model shapes: built-in presets and Hugging Face config.json files, checked, into a WpConfig. */
#ifndef WP_MODELCFG_H
#define WP_MODELCFG_H

#include <stddef.h>
#include "common/config.h"

typedef struct ModelPreset {
    const char *name;
    const char *about;
    WpConfig cfg;       /* seq and mbs are the preset's default training shape */
} ModelPreset;

/* The presets, in the order `wpgen list` shows them. */
const ModelPreset *model_presets(int *n);

/* The default sequence length, one rule for every tool (--seq overrides it): a preset's own (wpgen
 * list shows it), a config.json's max_position_embeddings capped at WP_DEFAULT_SEQ_CAP (a model
 * of a 131072-token context trains at 4096 unless asked: the context is a limit, not a target),
 * WP_DEFAULT_SEQ_NO_MAX_POS for a config.json without it. */
#define WP_DEFAULT_SEQ_CAP 4096
#define WP_DEFAULT_SEQ_NO_MAX_POS 1024
/* the rule in words, for the usage texts */
#define WP_STR_(x) #x
#define WP_STR(x) WP_STR_(x)
#define WP_DEFAULT_SEQ_RULE "a preset's own, a config.json's max_position_embeddings capped at " \
    WP_STR(WP_DEFAULT_SEQ_CAP) " (" WP_STR(WP_DEFAULT_SEQ_NO_MAX_POS) " without it)"

/* name_or_path: a preset name, a config.json path or a model's folder holding one; a file or
 * folder of a preset's name in the working directory wins over the preset (a note on stderr
 * says so). seq (the rule above) and mbs (a preset's, else 1) are for the caller to override.
 * On error returns -1 and writes one line to err ("PATH: FIELD: expected ..., got ..." or
 * "unknown model NAME"). */
int model_load(const char *name_or_path, WpConfig *c, char *name, size_t namelen, char *err, size_t errlen);

/* A config.json's text in memory, read and checked as model_load reads a file; name stands for
 * the file in messages. */
int model_config_parse(const char *name, const char *text, size_t len, WpConfig *c, char *err, size_t errlen);

/* The config.json of c, as transformers reads it (LlamaConfig's keys: every one that changes the
 * model, so that model_config_parse reads back a model model_same calls c; rope_scaling null when
 * unscaled), the special-token ids c was read with (c->ids: bos_token_id, eos_token_id,
 * pad_token_id, each only where the config had it), with a written_by key when it is not NULL; malloc'd, ending in a newline; NULL when
 * out of memory. */
char *model_config_text(const WpConfig *c, const char *written_by);
/* 1 when a and b are the same model (every field but the training shape, seq and mbs). */
int model_same(const WpConfig *a, const WpConfig *b);

/* Checks the shape's internal consistency (heads divide hidden, kv_heads divide heads, ...). */
int model_check(const WpConfig *c, char *err, size_t errlen);
/* It also refuses sizes no real model reaches, so that no count downstream can overflow:
 * hidden_size and heads above 2^20, layers above 2^16, intermediate_size above 2^22, vocab_size
 * and the sequence above 2^24, the micro-batch above 2^20, more than 2^44 parameters, or more
 * than 2^50 floats of activations per micro-batch. */

#endif
