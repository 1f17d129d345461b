/* wpgen replan OLD_DIR -t TOPO.json -o NEW_DIR [FLAG [VALUE] ...]: the plan of an emitted
 * directory made again for another cluster (the survivors of a lost node, a larger allocation).
 * It runs the command that emitted OLD_DIR (plan.json's "command": strategy, model, its options,
 * precision, backend) again with the new topology and output, and with the micro-batches per rank
 * that keep the old global batch on the new number of ranks; where that does not divide, the
 * nearest batch the new ranks can run, said on stderr (the old command's --global-batch goes: the
 * micro-batches replace it; a --global-batch given here is the new batch instead). Flags after the directory replace the old
 * command's own (a -m whose path has moved, say; --model replaces -m). --without NODE[,NODE...]
 * plans for the topology less those nodes: -t's, or without -t the one OLD_DIR was planned for
 * (plan.json's "topology_json"), which is what job.sbatch does when a node is lost.
 * The recorded command is read as emit reads a command line (the flag table, flags.c, and the
 * strategies' declarations say which flag takes a value), and emit is run on the new words
 * through the same parser (args_parse, args_run), never through wpgen_main again.
 * Exit status: emit's (1: the survivors cannot hold the plan, said with what did); 2 when OLD_DIR
 * is not an emission that recorded its command, its "command" is not one emit takes (a word that
 * is not a string, a flag emit does not know), -o is OLD_DIR or a folder holding it, or --without
 * names no node, a node twice, a node the topology lacks or every node. Nothing is left in the
 * temporary folder on any path. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>
#include <jansson.h>
#include "cli/cli.h"
#include "input/topology.h"
#include "lua/declare.h"
#include "common/jsonfile.h"

/* A JSON object's string member, or `otherwise`. */
static const char *str_or(json_t *obj, const char *key, const char *otherwise) {
    const char *s = json_string_value(json_object_get(obj, key));
    return s ? s : otherwise;
}

/* The names --without gives: commas between them (spaces around them too). */
typedef struct { char *buf; char **name; int n; } Names;

/* Splits without into *w, each name there once. 0, or EXIT_BAD_INPUT said. */
static int without_names(const char *without, Names *w) {
    size_t len = strlen(without);
    w->buf = strdup(without);
    w->name = malloc((len + 1) * sizeof *w->name);
    w->n = 0;
    if (!w->buf || !w->name) { fprintf(stderr, "wpgen replan: out of memory\n"); return EXIT_FAILED; }
    char *piece = w->buf;
    for (;;) {
        char *comma = strchr(piece, ','), *save = NULL;
        if (comma) *comma = 0;
        int before = w->n;
        for (char *s = strtok_r(piece, " ", &save); s; s = strtok_r(NULL, " ", &save)) w->name[w->n++] = s;
        if (w->n == before) {
            fprintf(stderr, "wpgen replan: --without \"%s\": an empty node name; expected NODE[,NODE...], names of the topology's nodes\n", without);
            return EXIT_BAD_INPUT;
        }
        if (!comma) break;
        piece = comma + 1;
    }
    for (int i = 0; i < w->n; i++)
        for (int j = 0; j < i; j++)
            if (!strcmp(w->name[i], w->name[j])) {
                fprintf(stderr, "wpgen replan: --without \"%s\": node %s is named twice; name each lost node once\n", without, w->name[i]);
                return EXIT_BAD_INPUT;
            }
    return 0;
}

/* The topology json less the nodes named in w, written to a temporary file whose path goes into
 * `out`. 0, or the exit status said (nothing left behind). */
static int topology_without(json_t *topo, const char *origin, const char *without, const Names *w, char *out, size_t outlen) {
    json_t *nodes = json_object_get(topo, "nodes");
    if (!json_is_array(nodes)) { fprintf(stderr, "wpgen replan: %s: no \"nodes\" array\n", origin); return EXIT_BAD_INPUT; }
    char names[1024] = "";
    for (size_t i = 0; i < json_array_size(nodes); i++) {
        size_t l = strlen(names);
        snprintf(names + l, sizeof names - l, "%s%s", l ? ", " : "", str_or(json_array_get(nodes, i), "name", "?"));
    }
    char name[256] = "";
    for (int k = 0; k < w->n; k++) {
        size_t i = 0;
        while (i < json_array_size(nodes) && strcmp(w->name[k], str_or(json_array_get(nodes, i), "name", ""))) i++;
        if (i == json_array_size(nodes)) {
            fprintf(stderr, "wpgen replan: --without %s: %s has no node of that name (it has: %s)\n", w->name[k], origin, names);
            return EXIT_BAD_INPUT;
        }
        json_array_remove(nodes, i);
        size_t l = strlen(name);
        snprintf(name + l, sizeof name - l, "-%s", w->name[k]);
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
        out[0] = 0;
        return EXIT_FAILED;
    }
    return 0;
}

/* Is -o the plan folder replan reads (1), or a folder holding it (2)? Compared by file (device and
 * inode) up OLD_DIR's real path, so another spelling of either is caught. 0: neither. */
static int out_holds_old(const char *out, const char *old) {
    struct stat so, s;
    char *p = realpath(old, NULL);
    if (stat(out, &so) || !p) { free(p); return 0; }   /* a new -o holds nothing; no OLD_DIR: said later */
    int hit = 0;
    for (int up = 1; !hit; up = 2) {
        if (stat(p, &s) == 0 && s.st_dev == so.st_dev && s.st_ino == so.st_ino) hit = up;
        char *slash = strrchr(p, '/');
        if (!slash || (slash == p && !p[1])) break;
        slash[slash == p] = 0;   /* "/a/b" to "/a", "/a" to "/" */
    }
    free(p);
    return hit;
}

/* The words of a command as emit reads them: isval[i] set where word i is the value of the flag
 * before it. scope: the command and the strategies whose options it may hold. 0, or -1 with the
 * index of the word at fault in *at and why in err. */
static int read_flags(const Args *scope, char **w, int n, char *isval, int *at, char *err, size_t len) {
    memset(isval, 0, (size_t)n);
    for (int i = 0; i < n; i++) {
        const CliFlag *fl = cli_flag(scope->cmd, w[i]);
        int k = cli_flag_arity(scope, w[i]);
        *at = i;
        if (fl && fl->id == FLAG_HELP) { snprintf(err, len, "%s is no flag of a command to run", w[i]); return -1; }
        if (k < 0 && w[i][0] == '-') { snprintf(err, len, "unknown flag \"%s\" (not wpgen %s's, nor an option of strategy %s)", w[i], scope->cmd, scope->strategy); return -1; }
        if (k < 0) { snprintf(err, len, "\"%s\" follows no flag that takes a value", w[i]); return -1; }
        if (k && i + 1 == n) { snprintf(err, len, "%s needs a value", w[i]); return -1; }
        if (k) isval[++i] = 1;
    }
    return 0;
}

/* The value of the last of flag among words that are flags (not values), or NULL. */
static const char *flag_value(char **w, const char *isval, int n, const char *flag) {
    const char *v = NULL;
    for (int i = 0; i + 1 < n; i++)
        if (!isval[i] && cli_same_flag(w[i], flag)) v = w[i + 1];
    return v;
}

/* Does the new command give flag anew (replan's -t, -o and --micro-batches, or one of extra's)?
 * The old --global-batch (or its tokens) goes with --micro-batches: replan's micro-batches per rank
 * keep that batch on the new ranks, and a batch the new ranks cannot run would be refused. */
static int replaced(const char *flag, char **extra, const char *isval, int nextra) {
    if (cli_same_flag(flag, "-t") || cli_same_flag(flag, "-o") || cli_same_flag(flag, "--micro-batches") ||
        cli_same_flag(flag, "--global-batch") || cli_same_flag(flag, "--global-batch-tokens")) return 1;
    for (int i = 0; i < nextra; i++)
        if (!isval[i] && cli_same_flag(flag, extra[i])) return 1;
    return 0;
}

int cmd_replan(int argc, char **argv) {
    const char *old = NULL, *topo_path = NULL, *out = NULL, *without = NULL;
    int nextra = 0, rc = EXIT_BAD_INPUT;
    char **extra = calloc((size_t)argc + 1, sizeof *extra), **cmdw = NULL, **args = NULL;
    char *xval = calloc((size_t)argc + 1, 1), *cval = NULL;
    char survivors[4200] = "", path[4200], err[1024];
    json_t *plan = NULL;
    Names wn = { 0 };
    if (!extra || !xval) { fprintf(stderr, "wpgen replan: out of memory\n"); rc = EXIT_FAILED; goto done; }
    if (cli_help_asked(argc, argv)) {
        printf("usage: wpgen replan OLD_DIR {-t TOPO.json | --without NODE[,NODE...]} -o NEW_DIR [FLAG [VALUE] ...]\n"
               "Emits OLD_DIR's plan again for TOPO.json into NEW_DIR: the same strategy, model, options and\n"
               "global batch (the nearest the new ranks can run where it does not divide, said on stderr);\n"
               "flags given here replace the old command's. --without plans for the topology (-t's, else the\n"
               "one OLD_DIR was planned for) less the nodes named. Resume NEW_DIR/train from OLD_DIR's checkpoint.\n");
        rc = 0;
        goto done;
    }
    for (int i = 2; i < argc; i++) {
        const CliFlag *fl = cli_flag("emit", argv[i]);
        if (fl && (fl->id == FLAG_TOPO || fl->id == FLAG_OUT) && i + 1 < argc) {
            const char **slot = fl->id == FLAG_TOPO ? &topo_path : &out;
            if (*slot) { fprintf(stderr, "wpgen replan: %s given twice\n", fl->name); goto done; }
            *slot = argv[++i];
        } else if (!strcmp(argv[i], "--without") && i + 1 < argc) {
            if (without) { fprintf(stderr, "wpgen replan: --without given twice (name every node in one list)\n"); goto done; }
            without = argv[++i];
        } else if (!old && !(argv[i][0] == '-' && argv[i][1] && !(argv[i][1] >= '0' && argv[i][1] <= '9'))) {
            old = argv[i];
        } else {
            extra[nextra++] = argv[i];
        }
    }
    if (!old || (!topo_path && !without) || !out) {
        fprintf(stderr, "wpgen replan: usage: wpgen replan OLD_DIR {-t TOPO.json | --without NODE[,NODE...]} -o NEW_DIR [FLAG [VALUE] ...]\n");
        goto done;
    }
    if (without && (rc = without_names(without, &wn))) goto done;
    rc = EXIT_BAD_INPUT;
    int holds = out_holds_old(out, old);
    if (holds) {
        fprintf(stderr, "wpgen replan: -o %s %s the plan folder it reads (%s); give another folder for the new plan\n",
                out, holds == 1 ? "is" : "holds", old);
        goto done;
    }

    /* the old command: words emit would take, "emit" first */
    snprintf(path, sizeof path, "%s/plan.json", old);
    json_error_t je;
    plan = json_load_file(path, 0, &je);
    if (!plan) { fprintf(stderr, "wpgen replan: %s: %s\n", path, je.text); goto done; }
    json_t *cmd = json_object_get(plan, "command");
    json_int_t total = json_integer_value(json_object_get(plan, "micro_batches"));
    if (!json_is_array(cmd) || json_array_size(cmd) < 1 || total < 1) {
        fprintf(stderr, "wpgen replan: %s: no \"command\" (emitted before wpgen replan existed): emit the plan "
                "for the new topology by hand\n", path);
        goto done;
    }
    int nc = (int)json_array_size(cmd);
    cmdw = calloc((size_t)nc + 1, sizeof *cmdw);
    cval = calloc((size_t)nc + 1, 1);
    if (!cmdw || !cval) { fprintf(stderr, "wpgen replan: out of memory\n"); rc = EXIT_FAILED; goto done; }
    for (int i = 0; i < nc; i++) {
        json_t *v = json_array_get(cmd, (size_t)i);
        if (!json_is_string(v)) {
            char jpath[32], msg[4608];
            snprintf(jpath, sizeof jpath, "\"command\"[%d]", i);
            wp_json_expected(msg, sizeof msg, path, jpath, "a string (a word of the command that emitted it)", v);
            fprintf(stderr, "wpgen replan: %s\n", msg);
            goto done;
        }
        cmdw[i] = (char *)json_string_value(v);
    }
    if (strcmp(cmdw[0], "emit")) {
        fprintf(stderr, "wpgen replan: %s: its command is \"%s\", not emit\n", path, cmdw[0]);
        goto done;
    }
    /* which words are flags and which their values: emit's table, and the options of the strategy
     * the new command names (-s given here, else the old one's) */
    args_limits(nc - 1, cmdw + 1);
    args_limits(nextra, extra);
    Args scope = { .cmd = "emit", .strategy = strategy_default() };
    int at;
    for (int pass = 0; pass < 2; pass++) {
        /* the first pass finds the strategy (a flag it does not know yet is no error yet); the second reads */
        if (read_flags(&scope, extra, nextra, xval, &at, err, sizeof err)) {
            if (pass) { fprintf(stderr, "wpgen replan: %s\n", err); goto done; }
            memset(xval, 0, (size_t)nextra);
        }
        if (read_flags(&scope, cmdw + 1, nc - 1, cval + 1, &at, err, sizeof err)) {
            if (pass) { fprintf(stderr, "wpgen replan: %s: \"command\"[%d]: %s\n", path, at + 1, err); goto done; }
            memset(cval, 0, (size_t)nc);
        }
        if (pass) break;
        const char *s = flag_value(extra, xval, nextra, "-s"), *ss = flag_value(extra, xval, nextra, "--strategies");
        if (!s) s = flag_value(cmdw + 1, cval + 1, nc - 1, "-s");
        if (!ss) ss = flag_value(cmdw + 1, cval + 1, nc - 1, "--strategies");
        if (s) scope.strategy = s;
        scope.strategies = ss;
    }

    if (without) {
        /* the survivors: the topology less the lost nodes, in a temporary file for emit's -t */
        json_t *base = topo_path ? json_load_file(topo_path, 0, &je) : json_deep_copy(json_object_get(plan, "topology_json"));
        if (!base) {
            if (topo_path) fprintf(stderr, "wpgen replan: -t %s: %s\n", topo_path, je.text);
            else fprintf(stderr, "wpgen replan: %s: no \"topology_json\" (emitted before --without existed): give -t TOPO.json\n", path);
            goto done;
        }
        rc = topology_without(base, topo_path ? topo_path : path, without, &wn, survivors, sizeof survivors);
        json_decref(base);
        if (rc) goto done;
        rc = EXIT_BAD_INPUT;
        topo_path = survivors;
    }
    Topology t;
    if (topology_load(topo_path, &t, err, sizeof err)) { fprintf(stderr, "wpgen replan: -t %s\n", err); goto done; }
    int ndev = t.ndevices, nnodes = t.nnodes;
    topology_free(&t);
    /* the global batch kept where it divides; else the nearest that does, never none */
    long per = (long)(total / ndev), kept = total % ndev == 0;
    if (!kept && (total - per * ndev) * 2 > ndev) per++;
    if (per < 1) per = 1;
    /* a --global-batch given here is the new batch: the micro-batches are its */
    int given_batch = flag_value(extra, xval, nextra, "--global-batch") || flag_value(extra, xval, nextra, "--global-batch-tokens");
    if (!kept && !given_batch)
        fprintf(stderr, "wpgen replan: warning: the old plan's %lld micro-batches per step do not divide over %d ranks: "
                "the new plan runs %ld per rank, %ld per step (the checkpoint's resume must be told the batch changed)\n",
                (long long)total, ndev, per, per * ndev);

    /* the new command: the old one less what is given anew, then replan's flags and the ones given */
    char per_s[32];
    snprintf(per_s, sizeof per_s, "%ld", per);
    args = calloc((size_t)(nc + nextra + 8), sizeof *args);
    if (!args) { fprintf(stderr, "wpgen replan: out of memory\n"); rc = EXIT_FAILED; goto done; }
    int n = 0;
    args[n++] = argv[0];
    args[n++] = cmdw[0];
    for (int i = 1; i < nc; i++) {
        if (!cval[i] && replaced(cmdw[i], extra, xval, nextra)) {
            if (i + 1 < nc && cval[i + 1]) i++;
            continue;
        }
        args[n++] = cmdw[i];
    }
    args[n++] = "-t"; args[n++] = (char *)topo_path;
    args[n++] = "-o"; args[n++] = (char *)out;
    if (!given_batch) { args[n++] = "--micro-batches"; args[n++] = per_s; }
    for (int i = 0; i < nextra; i++) args[n++] = extra[i];
    args[n] = NULL;
    fprintf(stderr, "wpgen replan: %s for %d ranks (was %lld in %s):", given_batch ? "the global batch given" : kept ? "the same global batch" : "another global batch",
            ndev, (long long)json_integer_value(json_object_get(plan, "nranks")), old);
    for (int i = 1; i < n; i++) fprintf(stderr, " %s", args[i]);
    fprintf(stderr, "\n");
    Args a;
    if (args_parse(n, args, &a)) {
        fprintf(stderr, "wpgen replan: the command above (%s's with the flags given here) is not one emit takes\n", path);
        goto done;
    }
    rc = args_run(&a);
    if (rc == EXIT_REJECTED)
        /* what fits and what does not, for the one who must find more nodes */
        fprintf(stderr, "wpgen replan: the plan does not fit on %d rank(s) of %d node(s)%s%s; what fits: the old plan, %lld ranks "
                "on %zu node(s) (%s)\n", ndev, nnodes, without ? " without " : "", without ? without : "",
                (long long)json_integer_value(json_object_get(plan, "nranks")), json_array_size(json_object_get(plan, "nodes")), old);
done:
    if (survivors[0]) unlink(survivors);
    json_decref(plan);   /* cmdw and args point into it */
    free(args);
    free(cmdw);
    free(cval);
    free(extra);
    free(xval);
    free(wn.buf);
    free(wn.name);
    return rc;
}
