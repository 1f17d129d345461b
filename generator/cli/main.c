/* wpgen's command line: parses the flags (their table: flags.c) and hands them to the command
 * (args_parse, args_run: replan runs emit through them too), one file each: list
 * (cmd_list.c), plan and emit (cmd_plan.c), sim and compare (cmd_sim.c), calibrate, probe, export,
 * data, replan and run (cmd_calibrate.c, cmd_probe.c, cmd_export.c, cmd_data.c, cmd_replan.c,
 * cmd_run.c: their own flags); what commands share is
 * declared in cli.h. Exit status: 0 done; 1 the plan was rejected or does not fit; 2 bad input. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include "emit/emit.h"
#include "emit/backends.h"
#include "cli/cli.h"
#include "lua/sandbox.h"
#include "lua/declare.h"
#include "common/modelcfg.h"
#include "util/settings.h"

static void usage(FILE *f) {
    fprintf(f,
        "usage: wpgen list\n"
        "       wpgen plan -t TOPO.json -m MODEL [-s STRATEGY] [--seq S] [--micro-batch-size G] [--mlp-tile N]\n"
        "                  [--global-batch B | --micro-batches N] [--replicas R] [--chunks C] [--recompute [--offload-activations]] [--json]\n"
        "                  [--precision fp32|bf16] [--grad-precision fp32|bf16] [--weight-wire fp32|bf16]\n"
        "                  [--OPTION [VALUE] ...]   (the strategy's own options, as its file declares them:\n"
        "                  wpgen plan --help -s NAME prints them, wpgen list all of them)\n"
        "                  [--lua-max-mib N] [--lua-max-instructions M] [--lua-max-seconds S]   (the strategy's limits)\n"
        "       wpgen emit -t TOPO.json -m MODEL [-s STRATEGY] [...] -o DIR [--backend cpu|cuda] [--comm mpi|nccl] [--force]\n"
        "       wpgen sim -t TOPO.json -m MODEL [-s STRATEGY|auto] [...] [--trace FILE.json] [--svg FILE.svg] [--json]\n"
        "                 [--tokens N [--gpu-hour-price X]]   (the step as a run: hours, GPU-hours, cost; also compare, -s auto)\n"
        "       wpgen compare -t TOPO.json -m MODEL [--strategies a,b,...] [...] [--json] [--tokens N [--gpu-hour-price X]]\n"
        "       wpgen calibrate -t TOPO.json --trace RUN/trace.json [...] [--held-out ...] [--links L.json] -o CALIB.json\n"
        "       wpgen probe [-o OUT.json] [--sysroot DIR] | --merge HOST1.json HOST2.json ... [-o OUT.json]\n"
        "       wpgen export CHECKPOINT -o DIR [--dtype bf16|fp32] [--max-shard-size SIZE]   (for transformers)\n"
        "       wpgen replan OLD_DIR {-t TOPO.json | --without NODE,...} -o NEW_DIR [FLAG [VALUE] ...]   (OLD_DIR's\n"
        "                  plan again for another cluster, the same global batch: the survivors of a lost node)\n"
        "       wpgen run RUN.json [--dry-run]   (one file of the plan's and train's flags: plan, emit, build,\n"
        "                  launch; wpgen run --help, docs/run-config.md)\n"
        "       wpgen data --tokenizer tokenizer.json -o DIR [--val-fraction F] [--text-field NAME] [--eot TOKEN]\n"
        "                  [--shard-tokens N] [--width auto|uint16|uint32] INPUT...   (text or JSONL into token\n"
        "                  shards DIR/train-NNNNN.bin, DIR/val-NNNNN.bin for train --data; wpgen data --help)\n"
        "\nThe flags of plan, emit, sim and compare (generator/cli/flags.c):\n");
    cli_flags_usage(f);
    fprintf(f,
        "-s auto (plan, emit, sim) tries every strategy with its parameters in the simulator and takes the\n"
        "fastest plan that fits. A file or folder named like a preset wins over it, saying so. fp32 master weights\n"
        "and AdamW's state stay at their owner whatever the --precision. emit writes nothing for a plan that does\n"
        "not fit the devices' memory, unless --force.\n"
        "-h anywhere after a command prints its help (exit 0) without reading its other flags; with -s NAME\n"
        "it prints that strategy's options, and a NAME that is no strategy is refused (exit 2).\n"
        "Exit status: 0 done, 1 plan rejected or does not fit, 2 bad input.\n");
    fprintf(f, "\nEnvironment (generator/util/settings.c; unset or empty: the default):\n");
    wp_settings_print(f, wpgen_settings, wpgen_nsettings);
}

/* sim's outputs (--trace, --svg) must not be one of its inputs, nor each other: writing one would
 * destroy the topology, the model's config.json or the strategy it was read from. Compared by
 * file (device and inode), so another name for the same file is caught too. */
static int check_outputs(const Args *a) {
    const char *in[] = { a->topo, a->model, a->strategy }, *inflag[] = { "-t", "-m", "-s" };
    const char *out[] = { a->trace, a->svg }, *outflag[] = { "--trace", "--svg" };
    for (int o = 0; o < 2; o++) {
        struct stat so, si;
        if (!out[o] || stat(out[o], &so)) continue;   /* a new file is no input */
        for (int i = 0; i < 3; i++)
            if (in[i] && stat(in[i], &si) == 0 && si.st_dev == so.st_dev && si.st_ino == so.st_ino) {
                fprintf(stderr, "wpgen: %s %s is the input of %s; refusing to overwrite it\n", outflag[o], out[o], inflag[i]);
                return -1;
            }
    }
    if (a->trace && a->svg && !strcmp(a->trace, a->svg)) {
        fprintf(stderr, "wpgen: --trace and --svg name the same file %s\n", a->svg);
        return -1;
    }
    return 0;
}

/* Flags that take one value (the table's once): given twice, which one was meant is a guess, so
 * neither is taken. */
static int check_repeats(int argc, char **argv) {
    int first[FLAG_COUNT];
    for (int k = 0; k < FLAG_COUNT; k++) first[k] = -1;
    for (int i = 2; i + 1 < argc; i++) {
        const CliFlag *fl = cli_flag(NULL, argv[i]);
        if (!fl || !fl->once) continue;
        if (first[fl->id] >= 0) {
            fprintf(stderr, "wpgen: %s given twice (\"%s\", then \"%s\"): give it once\n", fl->name, argv[first[fl->id] + 1], argv[i + 1]);
            return -1;
        }
        first[fl->id] = i;
        i++;   /* its value is not a flag */
    }
    return 0;
}

/* -h anywhere on the line: the help, the other flags not read (cli.h says the rule), except the
 * strategy whose options it prints: an unknown one is refused as it is without -h. Exits 0. */
static int help(int argc, char **argv) {
    const char *s = NULL;
    for (int j = 2; j + 1 < argc; j++)
        if (!strcmp(argv[j], "-s") || !strcmp(argv[j], "--strategy")) s = argv[j + 1];
    if (s && strcmp(s, "auto") && !strategy_decl(s)->ok) {
        fprintf(stderr, "wpgen: %s\n", strategy_decl(s)->err);
        return -1;
    }
    usage(stdout);
    strategy_options_help(stdout, s);
    exit(0);
}

int cli_help_asked(int argc, char **argv) {
    for (int i = 2; i < argc; i++)
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) return 1;
    return 0;
}

static int parse_args(int argc, char **argv, Args *a) {
    memset(a, 0, sizeof *a);
    a->argc = argc;
    a->argv = argv;
    a->strategy = strategy_default();   /* schedules/default-strategy */
    a->backend = backend_default(BACKEND_COMPUTE);
    a->comm = NULL;   /* the compute backend's default, once it is known */
    a->micro_batches = 4;
    a->replicas = 1;
    a->cmd = argv[1];
    a->gpu_hour_price = -1;
    if (cli_help_asked(argc, argv)) return help(argc, argv);
    if (check_repeats(argc, argv)) return -1;
    /* the strategies named, before the loop: their declarations say which other flags exist */
    for (int i = 2; i + 1 < argc; i++) {
        if (!strcmp(argv[i], "-s") || !strcmp(argv[i], "--strategy")) a->strategy = argv[i + 1];
        if (!strcmp(argv[i], "--strategies")) a->strategies = argv[i + 1];
    }
    for (int i = 2; i < argc; i++) {
        const char *f = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        const CliFlag *fl = cli_flag(a->cmd, f);
        int takes = fl ? fl->value != FV_NONE : 1, iv = 0;
        double rv = 0;
        if (fl && cli_flag_read(fl, f, v, &iv, &rv)) return -1;
        if (fl) switch (fl->id) {
        case FLAG_TOPO: a->topo = v; break;
        case FLAG_MODEL: a->model = v; break;
        case FLAG_STRATEGY: a->strategy = v; break;
        case FLAG_OUT: a->out = v; break;
        case FLAG_BACKEND: a->backend = v; break;
        case FLAG_COMM: a->comm = v; break;
        case FLAG_SEQ: a->seq = iv; break;
        case FLAG_MBS: a->mbs = iv; break;
        case FLAG_MLP_TILE: a->mlp_tile = iv; break;
        case FLAG_MICRO_BATCHES: a->micro_batches = iv; a->set_micro_batches = 1; break;
        case FLAG_GLOBAL_BATCH: a->global_batch = iv; break;
        case FLAG_GLOBAL_BATCH_TOKENS: a->global_batch_tokens = iv; break;
        case FLAG_REPLICAS: a->replicas = iv; a->set_replicas = 1; break;
        case FLAG_CHUNKS: a->chunks = iv; a->set_chunks = 1; break;
        case FLAG_TRACE: a->trace = v; break;
        case FLAG_SVG: a->svg = v; break;
        case FLAG_STRATEGIES: a->strategies = v; break;   /* compare; plan, emit and sim with -s auto */
        case FLAG_RECOMPUTE: a->recompute = 1; break;
        case FLAG_OFFLOAD: a->offload = 1; break;
        case FLAG_CONTEXT_PARALLEL: a->context_parallel = iv; a->set_context_parallel = 1; break;
        case FLAG_LUA_MIB: a->lua_max_mib = iv; break;
        case FLAG_LUA_MINSTR: a->lua_max_minstr = iv; break;
        case FLAG_LUA_SECONDS: a->lua_max_seconds = iv; break;
        case FLAG_SEARCH_SECONDS: a->search_seconds = iv; break;
        case FLAG_PRECISION: a->precision = v; break;
        case FLAG_GRAD_PRECISION: a->grad_precision = v; break;
        case FLAG_WEIGHT_WIRE: a->weight_wire = v; break;
        case FLAG_JSON: a->json = 1; break;
        case FLAG_CALIBRATION: a->calib_path = v; break;
        case FLAG_FORCE: a->force = 1; break;
        case FLAG_TOKENS: a->tokens = rv; break;
        case FLAG_PRICE: a->gpu_hour_price = rv; break;
        case FLAG_HELP: break;   /* answered before the loop */
        case FLAG_COUNT: break;
        }
        else if (!strncmp(f, "--", 2) && strategy_flag_known(a, f, &takes)) {
            if (a->nraw == STRATEGY_MAX_OPTS) { fprintf(stderr, "wpgen: %s: too many strategy options\n", f); return -1; }
            a->raw[a->nraw].flag = f;
            a->raw[a->nraw++].value = takes ? v : NULL;
        }
        else { fprintf(stderr, "wpgen: unknown flag \"%s\"\n", f); return -1; }
        if (takes) {
            if (!v) { fprintf(stderr, "wpgen: %s needs a value\n", f); return -1; }
            i++;
        }
    }
    if (!a->topo) { fprintf(stderr, "wpgen %s: -t TOPO.json is required\n", a->cmd); return -1; }
    if (!a->model) { fprintf(stderr, "wpgen %s: -m MODEL is required\n", a->cmd); return -1; }
    if (check_outputs(a)) return -1;
    if (a->offload && !a->recompute) {
        fprintf(stderr, "wpgen: --offload-activations: expected --recompute too (offload moves the layer inputs that --recompute keeps)\n");
        return -1;
    }
    if (a->out && strcmp(a->cmd, "emit")) {
        fprintf(stderr, "wpgen %s: -o is emit's (%s prints to standard output; --json for one object)\n", a->cmd, a->cmd);
        return -1;
    }
    if (a->strategies) {
        /* a list of names: none of them empty */
        const char *p = a->strategies;
        int empty = !*p || *p == ',';
        for (; *p && !empty; p++) empty = *p == ',' && (p[1] == ',' || p[1] == 0);
        if (empty) {
            fprintf(stderr, "wpgen: --strategies: expected a list of strategies, a,b,... (wpgen list), got \"%s\"\n", a->strategies);
            return -1;
        }
    }
    if (a->strategies && strcmp(a->cmd, "compare") && strcmp(a->strategy, "auto")) {
        fprintf(stderr, "wpgen: --strategies: for compare, or -s auto (the strategies it searches)\n");
        return -1;
    }
    /* a budget needs a predicted step: sim's, compare's or the one -s auto picks by */
    if (a->tokens > 0 && (!strcmp(a->cmd, "plan") || !strcmp(a->cmd, "emit")) && strcmp(a->strategy, "auto")) {
        fprintf(stderr, "wpgen %s: --tokens: for sim, compare and -s auto, which predict the step (or wpgen sim with the same flags)\n", a->cmd);
        return -1;
    }
    if (a->gpu_hour_price >= 0 && a->tokens <= 0) {
        fprintf(stderr, "wpgen: --gpu-hour-price: prices the budget of --tokens N; give --tokens too\n");
        return -1;
    }
    if (strategy_options_check(a)) return -1;
    /* the table says which backends exist and which are built: one not built yet is refused
     * rather than emitted half-way */
    char berr[256];
    if (!a->comm) a->comm = backend_default_comm(a->backend);
    const Backend *bcompute = backend_select(BACKEND_COMPUTE, a->backend, berr, sizeof berr);
    const Backend *bcomm = bcompute ? backend_select(BACKEND_COMM, a->comm, berr, sizeof berr) : NULL;
    if (!bcomm || backend_check_pair(bcompute, bcomm, berr, sizeof berr)) {
        fprintf(stderr, "wpgen: %s\n", berr);
        return -1;
    }

    return 0;
}

void args_limits(int nwords, char **words) {
    for (int i = 0; i + 1 < nwords; i++)
        if (!strcmp(words[i], "--lua-max-seconds")) strategy_decl_set_seconds(atoi(words[i + 1]) > 0 ? atoi(words[i + 1]) : 0);
}

int args_parse(int argc, char **argv, Args *a) {
    /* the declarations parse_args reads (a strategy's own flags) run under --lua-max-seconds too,
     * wherever it stands on the line; parse_args checks its value */
    args_limits(argc - 2, argv + 2);
    return parse_args(argc, argv, a);
}

int args_run(const Args *a) {
    Args run = *a;
    Calibration calib;
    if (run.calib_path) {
        char err[1024];
        if (calib_load(run.calib_path, &calib, err, sizeof err)) { fprintf(stderr, "wpgen: --calibration %s\n", err); return EXIT_BAD_INPUT; }
        run.calib = &calib;
    }
    int rc = !strcmp(run.cmd, "sim") ? cmd_sim(&run) : !strcmp(run.cmd, "compare") ? cmd_compare(&run) : cmd_plan(&run, !strcmp(run.cmd, "emit"));
    if (run.calib) calib_free(&calib);
    return rc;
}

int wpgen_main(int argc, char **argv) {
    if (argc < 2) { usage(stderr); return EXIT_BAD_INPUT; }
    const char *cmd = argv[1];
    if (!strcmp(cmd, "-h") || !strcmp(cmd, "--help") || !strcmp(cmd, "help")) { usage(stdout); return 0; }
    if (!strcmp(cmd, "--version")) { printf("wpgen %s\n", WPGEN_VERSION); return 0; }
    if (!strcmp(cmd, "list")) return cmd_list(argc, argv);
    if (!strcmp(cmd, "calibrate")) return cmd_calibrate(argc, argv);
    if (!strcmp(cmd, "probe")) return cmd_probe(argc, argv);
    if (!strcmp(cmd, "export")) return cmd_export(argc, argv);
    if (!strcmp(cmd, "data")) return cmd_data(argc, argv);
    if (!strcmp(cmd, "replan")) return cmd_replan(argc, argv);
    if (!strcmp(cmd, "run")) return cmd_run(argc, argv);
    if (strcmp(cmd, "plan") && strcmp(cmd, "emit") && strcmp(cmd, "sim") && strcmp(cmd, "compare")) {
        fprintf(stderr, "wpgen: unknown command \"%s\"\n", cmd);
        usage(stderr);
        return EXIT_BAD_INPUT;
    }
    Args a;
    if (args_parse(argc, argv, &a)) return EXIT_BAD_INPUT;
    return args_run(&a);
}

int main(int argc, char **argv) { return wpgen_main(argc, argv); }
