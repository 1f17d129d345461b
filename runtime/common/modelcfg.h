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

/* name_or_path: a preset name or a config.json path. seq and mbs are left at the preset's
 * defaults (1024 and 1 for a config.json) for the caller to override. On error returns -1 and
 * writes one line to err ("PATH: FIELD: expected ..., got ..." or "unknown model NAME"). */
int model_load(const char *name_or_path, WpConfig *c, char *name, size_t namelen, char *err, size_t errlen);

/* Checks the shape's internal consistency (heads divide hidden, kv_heads divide heads, ...). */
int model_check(const WpConfig *c, char *err, size_t errlen);

#endif
