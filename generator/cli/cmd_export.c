/* wpgen export CHECKPOINT -o DIR [--dtype bf16|fp32] [--max-shard-size SIZE]: its flags, then
 * generator/export. Exit status: 0 done, 1 the export could not be written, 2 bad input. */
#include <stdio.h>
#include <string.h>
#include "cli/cli.h"
#include "export/export.h"

static void export_usage(FILE *f) {
    fprintf(f, "usage: wpgen export CHECKPOINT -o DIR [--dtype bf16|fp32] [--max-shard-size SIZE]\n"
               "CHECKPOINT: the model file a run saved (DIR/model.safetensors) or its folder. Writes DIR for\n"
               "transformers: model.safetensors, or shards model-0000k-of-0000n.safetensors with\n"
               "model.safetensors.index.json beyond SIZE (default 5GB; 500MB, 2GiB, ...), in bf16 (default) or\n"
               "fp32, config.json and the tokenizer's files beside the checkpoint. DIR: new, empty, or an export.\n");
}

int cmd_export(int argc, char **argv) {
    ExportOptions o = { .bf16 = 1, .max_shard = EXPORT_DEFAULT_MAX_SHARD };
    int seen_dtype = 0, seen_size = 0;
    if (cli_help_asked(argc, argv)) { export_usage(stdout); return 0; }
    for (int i = 2; i < argc; i++) {
        const char *f = argv[i];
        int takes = !strcmp(f, "-o") || !strcmp(f, "--dtype") || !strcmp(f, "--max-shard-size");
        if (takes && i + 1 >= argc) { fprintf(stderr, "wpgen export: %s: expected a value\n", f); return 2; }
        if (!strcmp(f, "-o")) {
            if (o.out) { fprintf(stderr, "wpgen export: -o given twice\n"); return 2; }
            o.out = argv[++i];
        } else if (!strcmp(f, "--dtype")) {
            const char *v = argv[++i];
            if (seen_dtype++) { fprintf(stderr, "wpgen export: --dtype given twice\n"); return 2; }
            if (strcmp(v, "bf16") && strcmp(v, "fp32")) { fprintf(stderr, "wpgen export: --dtype: expected bf16 or fp32, got \"%s\"\n", v); return 2; }
            o.bf16 = !strcmp(v, "bf16");
        } else if (!strcmp(f, "--max-shard-size")) {
            const char *v = argv[++i];
            if (seen_size++) { fprintf(stderr, "wpgen export: --max-shard-size given twice\n"); return 2; }
            if (export_parse_size(v, &o.max_shard)) {
                fprintf(stderr, "wpgen export: --max-shard-size: expected a whole number of bytes from 1000 (1KB) to 1PB, "
                        "alone or with a unit B, KB, MB, GB, TB, KiB, MiB, GiB or TiB (e.g. 5GB, 500MB, 2GiB), got \"%s\"\n", v);
                return 2;
            }
        } else if (f[0] == '-') {
            fprintf(stderr, "wpgen export: unknown flag %s (wpgen export --help)\n", f);
            return 2;
        } else if (o.checkpoint) {
            fprintf(stderr, "wpgen export: one CHECKPOINT expected, got %s and %s\n", o.checkpoint, f);
            return 2;
        } else {
            o.checkpoint = f;
        }
    }
    if (!o.checkpoint || !o.out) {
        fprintf(stderr, "wpgen export: %s missing\n", !o.checkpoint ? "CHECKPOINT" : "-o DIR");
        export_usage(stderr);
        return 2;
    }
    ExportReport r;
    char err[1024];
    int rc = export_checkpoint(&o, &r, err, sizeof err);
    if (rc != EXPORT_OK) {
        fprintf(stderr, "wpgen export: %s\n", err);
        return rc;
    }
    printf("export: %d tensors (%.1f MB in %s) of %s into %s: %d file%s of tensors%s, config.json%s%d tokenizer file%s; "
           "read %d layer%s at a time; token ids: %s\n", r.tensors, (double)r.bytes / 1e6, o.bf16 ? "bf16" : "fp32", o.checkpoint, o.out,
           r.shards, r.shards == 1 ? "" : "s", r.shards > 1 ? " with model.safetensors.index.json" : "", ", ", r.copied,
           r.copied == 1 ? "" : "s", r.layers_per_read, r.layers_per_read == 1 ? "" : "s", r.ids);
    return 0;
}
