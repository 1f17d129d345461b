/* libFuzzer harness: the checkpoint manifest reader (runtime/train/ckpt_manifest.c and
 * ckpt_load.c). Once per process a tiny model's checkpoint is saved in a folder of its own (the
 * manifest checkpoint.json and its shard); each input replaces the manifest, and is read as a
 * resume reads it: the state alone
 * (ckpt_read_state), the files it names (ckpt_input_files: each one in the folder, never a path
 * out of it), and the tensors (ckpt_load, weights and AdamW's moments). Each either succeeds with
 * a state in range or is refused with one line naming the manifest or a file in its folder. The
 * seeds are manifests of that checkpoint (tests/fuzz/seeds/manifest). */
#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>
#include "fuzz/fuzz.h"
#include "train/checkpoint.h"

static char fuzz_manifest_dir[64], fuzz_manifest_path[96];
static WpConfig fuzz_manifest_cfg;
static WpChunk fuzz_manifest_whole;
static float *fuzz_manifest_arrays[3];

/* At exit: the folder and what is in it (the shard, config.json, the lock, the manifest). */
static void fuzz_manifest_cleanup(void) {
    DIR *d = opendir(fuzz_manifest_dir);
    struct dirent *e;
    char path[400];
    while (d && (e = readdir(d))) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
        snprintf(path, sizeof path, "%s/%s", fuzz_manifest_dir, e->d_name);
        unlink(path);
    }
    if (d) closedir(d);
    rmdir(fuzz_manifest_dir);
    for (int k = 0; k < 3; k++) free(fuzz_manifest_arrays[k]);
}

/* The checkpoint every input is a manifest of: a model of 2 layers, hidden 8, vocabulary 40,
 * weights and moments of fixed values (the same shard, the same name, in every process). */
static void fuzz_manifest_setup(void) {
    snprintf(fuzz_manifest_dir, sizeof fuzz_manifest_dir, "/tmp/wp_fuzz_manifest_%ld", (long)getpid());
    snprintf(fuzz_manifest_path, sizeof fuzz_manifest_path, "%s/checkpoint.json", fuzz_manifest_dir);
    FUZZ_REQUIRE(mkdir(fuzz_manifest_dir, 0755) == 0, "cannot make %s", fuzz_manifest_dir);
    atexit(fuzz_manifest_cleanup);
    fuzz_manifest_cfg = (WpConfig){ .hidden = 8, .layers = 2, .heads = 2, .kv_heads = 1, .head_dim = 4, .ffn = 20,
                                    .vocab = 40, .eps = 1e-5f, .rope_theta = 10000, .seq = 16, .mbs = 2 };
    fuzz_manifest_whole = wp_chunk_make(&fuzz_manifest_cfg, 0, 0, 2, 1, 1);
    size_t n = fuzz_manifest_whole.nparams;
    for (int k = 0; k < 3; k++) {
        fuzz_manifest_arrays[k] = malloc(n * sizeof(float));
        FUZZ_REQUIRE(fuzz_manifest_arrays[k] != NULL, "out of memory");
        for (size_t i = 0; i < n; i++) fuzz_manifest_arrays[k][i] = (float)k + (float)(i % 97) * 1e-2f;
    }
    WpTrainState st = { .step = 5, .seed = 3, .data_seq = 40, .micro_batches = 4, .micro_batch_size = 2, .seq = 16,
                        .tokenizer = "sha256:0102030405060708", .tokenizer_name = "fuzz-bpe", .tokenizer_known = 1 };
    char err[1024];
    FUZZ_REQUIRE(ckpt_save(fuzz_manifest_path, &fuzz_manifest_cfg, &fuzz_manifest_whole, 1, fuzz_manifest_arrays,
                           &fuzz_manifest_arrays[1], &fuzz_manifest_arrays[2], &st, 1, err, sizeof err) == 0,
                 "cannot save the checkpoint: %s", err);
}

/* A message names the manifest, or a file in its folder (a shard). */
static void fuzz_manifest_message(const char *err) {
    FUZZ_REQUIRE(err[0] != '\0', "empty error message");
    FUZZ_REQUIRE(strchr(err, '\n') == NULL, "error message of more than one line: %s", err);
    FUZZ_REQUIRE(strncmp(err, fuzz_manifest_dir, strlen(fuzz_manifest_dir)) == 0, "error message not naming the "
                 "manifest or a file beside it: %s", err);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (!fuzz_manifest_dir[0]) fuzz_manifest_setup();
    FILE *f = fopen(fuzz_manifest_path, "wb");
    FUZZ_REQUIRE(f && fwrite(data, 1, size, f) == size && fclose(f) == 0, "cannot write %s", fuzz_manifest_path);
    char err[2048] = "";
    WpTrainState st;
    if (ckpt_read_state(fuzz_manifest_path, &st, err, sizeof err) != 0) fuzz_manifest_message(err);
    else FUZZ_REQUIRE(st.step >= 0 && st.micro_batches >= 0 && st.seq >= 0, "state out of range");
    char **files = NULL;
    int n = ckpt_input_files(fuzz_manifest_path, &files);
    size_t k = strlen(fuzz_manifest_dir);
    for (int i = 0; i < n; i++)
        FUZZ_REQUIRE(!strncmp(files[i], fuzz_manifest_dir, k) && files[i][k] == '/' && !strchr(files[i] + k + 1, '/') &&
                     strcmp(files[i] + k + 1, "..") && strcmp(files[i] + k + 1, "."), "a file out of the folder: %s",
                     files[i]);
    ckpt_files_free(files, n);
    size_t np = fuzz_manifest_whole.nparams;
    float *w = calloc(np, sizeof *w), *m = calloc(np, sizeof *m), *v = calloc(np, sizeof *v);
    FUZZ_REQUIRE(w && m && v, "out of memory");
    err[0] = 0;
    if (ckpt_load(fuzz_manifest_path, &fuzz_manifest_cfg, &fuzz_manifest_whole, 1, &w, &m, &v, &st, err, sizeof err) != 0)
        fuzz_manifest_message(err);
    else
        FUZZ_REQUIRE(st.tokenizer[sizeof st.tokenizer - 1] == 0 && st.tokenizer_name[sizeof st.tokenizer_name - 1] == 0,
                     "tokenizer not terminated");
    free(w);
    free(m);
    free(v);
    return 0;
}
