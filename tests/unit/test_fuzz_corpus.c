/* Replays the fuzz harnesses' regression cases (tests/fuzz/corpus/NAME/, inputs that once broke
 * something) and seeds (tests/fuzz/seeds/NAME/) without libFuzzer, so that `make test` keeps them
 * fixed on machines without clang. Each harness checks its own invariants and aborts when one
 * breaks; this program also checks that every folder held inputs. Runs from the repository root. */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"

/* The harnesses, each with its entry point renamed. */
#define LLVMFuzzerTestOneInput fuzz_topology_one
#include "fuzz/fuzz_topology.c"
#undef LLVMFuzzerTestOneInput
#define LLVMFuzzerTestOneInput fuzz_modelcfg_one
#include "fuzz/fuzz_modelcfg.c"
#undef LLVMFuzzerTestOneInput
#define LLVMFuzzerTestOneInput fuzz_safetensors_one
#include "fuzz/fuzz_safetensors.c"
#undef LLVMFuzzerTestOneInput
#define LLVMFuzzerTestOneInput fuzz_shard_one
#include "fuzz/fuzz_shard.c"
#undef LLVMFuzzerTestOneInput
#define LLVMFuzzerTestOneInput fuzz_dataspec_one
#include "fuzz/fuzz_dataspec.c"
#undef LLVMFuzzerTestOneInput
#define LLVMFuzzerTestOneInput fuzz_manifest_one
#include "fuzz/fuzz_manifest.c"
#undef LLVMFuzzerTestOneInput

typedef int (*FuzzOne)(const uint8_t *, size_t);

/* Runs every file of dir through one; returns how many (0 if dir is absent). */
static int replay_dir(const char *dir, FuzzOne one) {
    DIR *d = opendir(dir);
    if (!d) return 0;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.') continue;
        char path[512];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        FILE *f = fopen(path, "rb");
        if (!f) continue;
        size_t cap = 1 << 16, len = 0;
        uint8_t *buf = malloc(cap);
        size_t k;
        while (buf && (k = fread(buf + len, 1, cap - len, f)) > 0) {
            len += k;
            if (len == cap) buf = realloc(buf, cap *= 2);
        }
        fclose(f);
        CHECK(buf != NULL, "%s: out of memory", path);
        if (!buf) continue;
        /* libFuzzer hands out a buffer of exactly the input's size: copy into one, so that a read
         * past the end is caught under ASan here too. */
        uint8_t *exact = malloc(len ? len : 1);
        memcpy(exact, buf, len);
        free(buf);
        one(exact, len);
        free(exact);
        n++;
    }
    closedir(d);
    return n;
}

int main(void) {
    static const struct { const char *name; FuzzOne one; } targets[] = {
        { "topology", fuzz_topology_one }, { "modelcfg", fuzz_modelcfg_one },
        { "safetensors", fuzz_safetensors_one }, { "shard", fuzz_shard_one }, { "dataspec", fuzz_dataspec_one },
        { "manifest", fuzz_manifest_one },
    };
    int total = 0;
    for (size_t i = 0; i < sizeof targets / sizeof targets[0]; i++) {
        char dir[256];
        snprintf(dir, sizeof dir, "tests/fuzz/seeds/%s", targets[i].name);
        int seeds = replay_dir(dir, targets[i].one);
        snprintf(dir, sizeof dir, "tests/fuzz/corpus/%s", targets[i].name);
        int found = replay_dir(dir, targets[i].one);
        CHECK(seeds > 0, "%s: no seeds in tests/fuzz/seeds/%s (run from the repository root)", targets[i].name, targets[i].name);
        printf("%-12s %d seeds, %d regression cases\n", targets[i].name, seeds, found);
        total += seeds + found;
    }
    total += replay_dir("topologies", fuzz_topology_one);
    printf("replayed %d inputs\n", total);
    return check_summary("test_fuzz_corpus");
}
