/* wpgen replan OLD_DIR -t TOPO.json -o NEW_DIR [FLAG [VALUE] ...]: the plan of an emitted
 * directory made again for another cluster (the survivors of a lost node, a larger allocation).
 * It runs the command that emitted OLD_DIR (plan.json's "command": strategy, model, its options,
 * precision, backend) again with the new topology and output, and with the micro-batches per rank
 * that keep the old global batch on the new number of ranks; where that does not divide, the
 * nearest batch the new ranks can run, said on stderr. Flags after the directory replace the old
 * command's own (a -m whose path has moved, say). Exit status: emit's; 2 when OLD_DIR is not an
 * emission that recorded its command. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <jansson.h>
#include "cli/cli.h"
#include "input/topology.h"

enum { MAX_ARGS = 512 };

/* Does token `flag` of a command take the next token as its value? Every wpgen flag does but
 * the switches below (a strategy's own boolean options are given as --NAME alone too: a next
 * token that is itself a flag says so). */
static int takes_value(const char *flag, const char *next) {
    static const char *const switches[] = { "--recompute", "--json", "--force" };
    for (size_t i = 0; i < sizeof switches / sizeof switches[0]; i++)
        if (!strcmp(flag, switches[i])) return 0;
    return next && (next[0] != '-' || (next[1] >= '0' && next[1] <= '9') || next[1] == '.');
}

static int is_flag(const char *s) { return s[0] == '-' && s[1] && !(s[1] >= '0' && s[1] <= '9'); }

/* Is flag among the tokens of extra (flags and values) or the ones replan sets itself? */
static int replaced(const char *flag, int nextra, char **extra) {
    if (!strcmp(flag, "-t") || !strcmp(flag, "-o") || !strcmp(flag, "--micro-batches")) return 1;
    for (int i = 0; i < nextra; i++)
        if (is_flag(extra[i]) && !strcmp(flag, extra[i])) return 1;
    return 0;
}

int cmd_replan(int argc, char **argv) {
    const char *old = NULL, *topo_path = NULL, *out = NULL;
    char *extra[MAX_ARGS];
    int nextra = 0;
    for (int i = 2; i < argc; i++) {
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            printf("usage: wpgen replan OLD_DIR -t TOPO.json -o NEW_DIR [FLAG [VALUE] ...]\n"
                   "Emits OLD_DIR's plan again for TOPO.json into NEW_DIR: the same strategy, model, options and\n"
                   "global batch (the nearest the new ranks can run where it does not divide, said on stderr);\n"
                   "flags given here replace the old command's. Resume NEW_DIR/train from OLD_DIR's checkpoint.\n");
            return 0;
        }
        if ((!strcmp(argv[i], "-t") || !strcmp(argv[i], "-o")) && i + 1 < argc) {
            const char **slot = argv[i][1] == 't' ? &topo_path : &out;
            if (*slot) { fprintf(stderr, "wpgen replan: %s given twice\n", argv[i]); return EXIT_BAD_INPUT; }
            *slot = argv[++i];
        } else if (!old && !is_flag(argv[i])) {
            old = argv[i];
        } else if (nextra + 1 < MAX_ARGS) {
            extra[nextra++] = argv[i];
        } else {
            fprintf(stderr, "wpgen replan: more than %d flags\n", MAX_ARGS);
            return EXIT_BAD_INPUT;
        }
    }
    if (!old || !topo_path || !out) {
        fprintf(stderr, "wpgen replan: usage: wpgen replan OLD_DIR -t TOPO.json -o NEW_DIR [FLAG [VALUE] ...]\n");
        return EXIT_BAD_INPUT;
    }
    char path[4200];
    snprintf(path, sizeof path, "%s/plan.json", old);
    json_error_t je;
    json_t *plan = json_load_file(path, 0, &je);
    if (!plan) { fprintf(stderr, "wpgen replan: %s: %s\n", path, je.text); return EXIT_BAD_INPUT; }
    json_t *cmd = json_object_get(plan, "command");
    json_int_t total = json_integer_value(json_object_get(plan, "micro_batches"));
    if (!json_is_array(cmd) || json_array_size(cmd) < 1 || total < 1) {
        fprintf(stderr, "wpgen replan: %s: no \"command\" (emitted before wpgen replan existed): emit the plan "
                "for the new topology by hand\n", path);
        json_decref(plan);
        return EXIT_BAD_INPUT;
    }
    Topology t;
    char err[1024];
    if (topology_load(topo_path, &t, err, sizeof err)) {
        fprintf(stderr, "wpgen replan: -t %s\n", err);
        json_decref(plan);
        return EXIT_BAD_INPUT;
    }
    int ndev = t.ndevices;
    topology_free(&t);
    /* the global batch kept where it divides; else the nearest that does, never none */
    long per = (long)(total / ndev), kept = total % ndev == 0;
    if (!kept && (total - per * ndev) * 2 > ndev) per++;
    if (per < 1) per = 1;
    if (!kept)
        fprintf(stderr, "wpgen replan: warning: the old plan's %lld micro-batches per step do not divide over %d ranks: "
                "the new plan runs %ld per rank, %ld per step (the checkpoint's resume must be told the batch changed)\n",
                (long long)total, ndev, per, per * ndev);

    char *args[MAX_ARGS + 16];
    char per_s[32];
    snprintf(per_s, sizeof per_s, "%ld", per);
    int n = 0;
    args[n++] = argv[0];
    size_t nc = json_array_size(cmd);
    for (size_t i = 0; i < nc && n < MAX_ARGS; i++) {
        const char *tok = json_string_value(json_array_get(cmd, i));
        if (!tok) continue;
        const char *next = i + 1 < nc ? json_string_value(json_array_get(cmd, i + 1)) : NULL;
        if (i > 0 && is_flag(tok) && replaced(tok, nextra, extra)) {
            if (takes_value(tok, next)) i++;
            continue;
        }
        args[n++] = (char *)tok;
    }
    if (strcmp(args[1], "emit")) {
        fprintf(stderr, "wpgen replan: %s: its command is \"%s\", not emit\n", path, args[1]);
        json_decref(plan);
        return EXIT_BAD_INPUT;
    }
    args[n++] = "-t"; args[n++] = (char *)topo_path;
    args[n++] = "-o"; args[n++] = (char *)out;
    args[n++] = "--micro-batches"; args[n++] = per_s;
    for (int i = 0; i < nextra; i++) args[n++] = extra[i];
    args[n] = NULL;
    fprintf(stderr, "wpgen replan: %s for %d ranks (was %lld in %s):", kept ? "the same global batch" : "another global batch",
            ndev, (long long)json_integer_value(json_object_get(plan, "nranks")), old);
    for (int i = 1; i < n; i++) fprintf(stderr, " %s", args[i]);
    fprintf(stderr, "\n");
    int rc = wpgen_main(n, args);
    json_decref(plan);   /* args point into it until emit is done */
    return rc;
}
