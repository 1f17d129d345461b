/* wpgen replan OLD_DIR -t TOPO.json -o NEW_DIR [FLAG [VALUE] ...]: the plan of an emitted
 * directory made again for another cluster (the survivors of a lost node, a larger allocation).
 * It runs the command that emitted OLD_DIR (plan.json's "command": strategy, model, its options,
 * precision, backend) again with the new topology and output, and with the micro-batches per rank
 * that keep the old global batch on the new number of ranks; where that does not divide, the
 * nearest batch the new ranks can run, said on stderr. Flags after the directory replace the old
 * command's own (a -m whose path has moved, say). --without NODE[,NODE...] plans for the topology
 * less those nodes: -t's, or without -t the one OLD_DIR was planned for (plan.json's
 * "topology_json"), which is what job.sbatch does when a node is lost. Exit status: emit's (1: the
 * survivors cannot hold the plan, said with what did); 2 when OLD_DIR is not an emission that
 * recorded its command, or --without names a node the topology lacks or every node. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
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

/* A JSON object's string member, or `otherwise`. */
static const char *str_or(json_t *obj, const char *key, const char *otherwise) {
    const char *s = json_string_value(json_object_get(obj, key));
    return s ? s : otherwise;
}

/* The topology json less the nodes named in `without` (commas or spaces between names), written
 * to a temporary file whose path goes into `out`. 0, or EXIT_BAD_INPUT said. */
static int topology_without(json_t *topo, const char *origin, const char *without, char *out, size_t outlen) {
    json_t *nodes = json_object_get(topo, "nodes");
    if (!json_is_array(nodes)) { fprintf(stderr, "wpgen replan: %s: no \"nodes\" array\n", origin); return EXIT_BAD_INPUT; }
    char list[4096], names[1024] = "";
    snprintf(list, sizeof list, "%s", without);
    for (size_t i = 0; i < json_array_size(nodes); i++) {
        size_t l = strlen(names);
        snprintf(names + l, sizeof names - l, "%s%s", l ? ", " : "", str_or(json_array_get(nodes, i), "name", "?"));
    }
    char *save = NULL, name[256] = "";
    for (char *w = strtok_r(list, ", ", &save); w; w = strtok_r(NULL, ", ", &save)) {
        size_t i = 0;
        while (i < json_array_size(nodes) && strcmp(w, str_or(json_array_get(nodes, i), "name", ""))) i++;
        if (i == json_array_size(nodes)) {
            fprintf(stderr, "wpgen replan: --without %s: %s has no node of that name (it has: %s)\n", w, origin, names);
            return EXIT_BAD_INPUT;
        }
        json_array_remove(nodes, i);
        size_t l = strlen(name);
        snprintf(name + l, sizeof name - l, "-%s", w);
    }
    if (json_array_size(nodes) == 0) {
        fprintf(stderr, "wpgen replan: --without %s: no node of %s is left to plan for\n", without, origin);
        return EXIT_BAD_INPUT;
    }
    /* a name that says what it is, in the new plan's README and plan.json */
    char tname[512];
    snprintf(tname, sizeof tname, "%s-without%s", str_or(topo, "name", "cluster"), name);
    json_object_set_new(topo, "name", json_string(tname));
    const char *tmpdir = getenv("TMPDIR");
    snprintf(out, outlen, "%s/wpgen-survivors-XXXXXX", tmpdir && *tmpdir ? tmpdir : "/tmp");
    int fd = mkstemp(out);
    FILE *f = fd >= 0 ? fdopen(fd, "w") : NULL;
    if (!f || json_dumpf(topo, f, JSON_INDENT(2) | JSON_REAL_PRECISION(15)) || fclose(f)) {
        fprintf(stderr, "wpgen replan: %s: cannot write the survivors' topology\n", out);
        if (fd >= 0) unlink(out);
        return EXIT_FAILED;
    }
    return 0;
}

int cmd_replan(int argc, char **argv) {
    const char *old = NULL, *topo_path = NULL, *out = NULL, *without = NULL;
    char *extra[MAX_ARGS];
    int nextra = 0;
    for (int i = 2; i < argc; i++) {
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            printf("usage: wpgen replan OLD_DIR {-t TOPO.json | --without NODE[,NODE...]} -o NEW_DIR [FLAG [VALUE] ...]\n"
                   "Emits OLD_DIR's plan again for TOPO.json into NEW_DIR: the same strategy, model, options and\n"
                   "global batch (the nearest the new ranks can run where it does not divide, said on stderr);\n"
                   "flags given here replace the old command's. --without plans for the topology (-t's, else the\n"
                   "one OLD_DIR was planned for) less the nodes named. Resume NEW_DIR/train from OLD_DIR's checkpoint.\n");
            return 0;
        }
        if ((!strcmp(argv[i], "-t") || !strcmp(argv[i], "-o")) && i + 1 < argc) {
            const char **slot = argv[i][1] == 't' ? &topo_path : &out;
            if (*slot) { fprintf(stderr, "wpgen replan: %s given twice\n", argv[i]); return EXIT_BAD_INPUT; }
            *slot = argv[++i];
        } else if (!strcmp(argv[i], "--without") && i + 1 < argc) {
            if (without) { fprintf(stderr, "wpgen replan: --without given twice (name every node in one list)\n"); return EXIT_BAD_INPUT; }
            without = argv[++i];
        } else if (!old && !is_flag(argv[i])) {
            old = argv[i];
        } else if (nextra + 1 < MAX_ARGS) {
            extra[nextra++] = argv[i];
        } else {
            fprintf(stderr, "wpgen replan: more than %d flags\n", MAX_ARGS);
            return EXIT_BAD_INPUT;
        }
    }
    if (!old || (!topo_path && !without) || !out) {
        fprintf(stderr, "wpgen replan: usage: wpgen replan OLD_DIR {-t TOPO.json | --without NODE[,NODE...]} -o NEW_DIR [FLAG [VALUE] ...]\n");
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
    char survivors[4200] = "";
    if (without) {
        /* the survivors: the topology less the lost nodes, in a temporary file for emit's -t */
        json_t *base = topo_path ? json_load_file(topo_path, 0, &je) : json_deep_copy(json_object_get(plan, "topology_json"));
        if (!base) {
            if (topo_path) fprintf(stderr, "wpgen replan: -t %s: %s\n", topo_path, je.text);
            else fprintf(stderr, "wpgen replan: %s: no \"topology_json\" (emitted before --without existed): give -t TOPO.json\n", path);
            json_decref(plan);
            return EXIT_BAD_INPUT;
        }
        int rc = topology_without(base, topo_path ? topo_path : path, without, survivors, sizeof survivors);
        json_decref(base);
        if (rc) { json_decref(plan); return rc; }
        topo_path = survivors;
    }
    Topology t;
    char err[1024];
    if (topology_load(topo_path, &t, err, sizeof err)) {
        fprintf(stderr, "wpgen replan: -t %s\n", err);
        if (survivors[0]) unlink(survivors);
        json_decref(plan);
        return EXIT_BAD_INPUT;
    }
    int ndev = t.ndevices, nnodes = t.nnodes;
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
        if (survivors[0]) unlink(survivors);
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
    if (rc == EXIT_REJECTED)
        /* what fits and what does not, for the one who must find more nodes */
        fprintf(stderr, "wpgen replan: the plan does not fit on %d rank(s) of %d node(s)%s%s; what fits: the old plan, %lld ranks "
                "on %zu node(s) (%s)\n", ndev, nnodes, without ? " without " : "", without ? without : "",
                (long long)json_integer_value(json_object_get(plan, "nranks")), json_array_size(json_object_get(plan, "nodes")), old);
    if (survivors[0]) unlink(survivors);
    json_decref(plan);   /* args point into it until emit is done */
    return rc;
}
