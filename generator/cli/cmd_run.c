/* wpgen run CONFIG [--dry-run]: a run configuration file (runcfg.c, docs/run-config.md) taken to a
 * running job in one command: plan and emit (wpgen emit with the file's flags, printing the plan's
 * summary, writing OUT/run.json: the file, where it ran and the flags it resolved to; run.sh then
 * runs those flags when given none), build (make -C OUT), and launch: OUT/run.sh (mpirun), sbatch
 * OUT/job.sbatch (slurm) or nothing (none). --dry-run prints the commands and runs none. Exit
 * status: 2 bad input (nothing written); emit's or make's (1) when they fail; else the launch's
 * (run.sh's: train's status; sbatch's). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include "cli/cli.h"
#include "emit/emit.h"
#include "util/xalloc.h"

static void usage(FILE *f) {
    fprintf(f,
        "usage: wpgen run RUN.json [--dry-run]\n"
        "       wpgen run --keys   (every key of RUN.json: the flag it stands for, its type)\n"
        "Plans, emits into the file's \"out\" folder (printing the plan's summary; OUT/run.json records the\n"
        "file and the flags it resolved to, which OUT/run.sh runs when given none), builds it (make -C OUT)\n"
        "and launches it as \"launch\" says: mpirun (OUT/run.sh, the default), slurm (sbatch OUT/job.sbatch)\n"
        "or none. --dry-run prints the commands and runs none, writing nothing. Paths in the file are from\n"
        "the directory wpgen run runs in, as on the command line. A run's record, OUT/run.json, runs its\n"
        "config again, from where it ran. docs/run-config.md has the keys and an example (examples/run-cpu.json).\n"
        "Exit status: 2 bad input (the file, the JSON path and what was expected; nothing written), 1 emit or\n"
        "make failed, else the launch's: train's (README's table) or sbatch's.\n");
}

/* A word for the shell, quoted only where it must be. */
static void put_word(FILE *f, const char *w) {
    int plain = *w != 0;
    for (const char *c = w; *c && plain; c++) plain = strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-+=./,:@%", *c) != NULL;
    if (plain) { fputs(w, f); return; }
    fputc('\'', f);
    for (const char *c = w; *c; c++) fputs(*c == '\'' ? "'\\''" : (char[]){ *c, 0 }, f);
    fputc('\'', f);
}

static void put_command(FILE *f, char *const *env, int nenv, char *const *v, int n) {
    fputs("  ", f);
    for (int i = 0; i < nenv; i++) { put_word(f, env[i]); fputc(' ', f); }
    for (int i = 0; i < n; i++) { if (i) fputc(' ', f); put_word(f, v[i]); }
    fputc('\n', f);
}

/* Runs argv, waits: its exit status, or 1 where it could not run or was killed. */
static int spawn(char *const *argv) {
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0) { fprintf(stderr, "wpgen run: cannot fork: %s\n", strerror(errno)); return 1; }
    if (pid == 0) {
        execvp(argv[0], argv);
        fprintf(stderr, "wpgen run: cannot run %s: %s\n", argv[0], strerror(errno));
        _exit(127);
    }
    int st;
    while (waitpid(pid, &st, 0) < 0)
        if (errno != EINTR) return 1;
    return WIFEXITED(st) ? WEXITSTATUS(st) : 1;
}

/* mkdir -p of path's folder; the folders it made into made[] (*nmade, at most 64), outermost
 * first, so that a failure after can remove them again. */
static int make_folder_of(const char *path, char made[][4096], int *nmade) {
    char d[4096];
    const char *slash = strrchr(path, '/');
    if (!slash || slash == path) return 0;
    snprintf(d, sizeof d, "%.*s", (int)(slash - path), path);
    for (char *p = d + 1; ; p++)
        if (*p == '/' || !*p) {
            char c = *p;
            *p = 0;
            if (mkdir(d, 0777) == 0) { if (made && *nmade < 64) snprintf(made[(*nmade)++], 4096, "%s", d); }
            else if (errno != EEXIST) return -1;
            *p = c;
            if (!c) return 0;
        }
}

static json_t *words_json(char *const *v, int n) {
    json_t *a = json_array();
    for (int i = 0; i < n; i++) json_array_append_new(a, json_string(v[i]));
    return a;
}

int cmd_run(int argc, char **argv) {
    if (cli_help_asked(argc, argv)) { usage(stdout); return 0; }
    const char *path = NULL;
    int dry = 0;
    for (int i = 2; i < argc; i++) {
        if (!strcmp(argv[i], "--dry-run")) dry = 1;
        else if (!strcmp(argv[i], "--keys")) { runcfg_keys(stdout); return 0; }
        else if (argv[i][0] == '-' && argv[i][1]) { fprintf(stderr, "wpgen run: unknown flag \"%s\"\n", argv[i]); usage(stderr); return EXIT_BAD_INPUT; }
        else if (path) { fprintf(stderr, "wpgen run: one RUN.json, got \"%s\" and \"%s\"\n", path, argv[i]); return EXIT_BAD_INPUT; }
        else path = argv[i];
    }
    if (!path) { usage(stderr); return EXIT_BAD_INPUT; }
    RunConfig rc;
    int st = runcfg_load(path, &rc);
    if (st) { runcfg_free(&rc); return st; }

    /* the commands: make, then the launch's */
    char cwd[4096], jobs[32], runsh[4200], sbatch_file[4200], chdir_flag[4200];
    if (!getcwd(cwd, sizeof cwd)) snprintf(cwd, sizeof cwd, ".");
    long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    snprintf(jobs, sizeof jobs, "-j%ld", ncpu > 0 ? ncpu : 1);
    snprintf(runsh, sizeof runsh, "%s%s/run.sh", rc.out[0] == '/' ? "" : "./", rc.out);
    snprintf(sbatch_file, sizeof sbatch_file, "%s/job.sbatch", rc.out);
    snprintf(chdir_flag, sizeof chdir_flag, "--chdir=%s", cwd);
    char *make[] = { "make", "-s", "-C", (char *)rc.out, jobs, NULL };
    int is_slurm = !strcmp(rc.launch, "slurm"), is_mpirun = !strcmp(rc.launch, "mpirun");
    char **launch = xcalloc((size_t)rc.nsbatch + 8, sizeof *launch);
    int nlaunch = 0;
    if (is_mpirun) launch[nlaunch++] = runsh;
    if (is_slurm) {
        launch[nlaunch++] = "sbatch";
        launch[nlaunch++] = chdir_flag;
        launch[nlaunch++] = sbatch_file;
        for (int i = 0; i < rc.nsbatch; i++) launch[nlaunch++] = rc.sbatch[i];
    }

    /* OUT/run.json: the file as read, where it ran, and what it resolved to */
    json_t *rec = json_object();
    json_object_set_new(rec, "generated_by", json_string("wpgen " WPGEN_VERSION " run (docs/run-config.md)"));
    json_object_set_new(rec, "config_file", json_string(path));
    json_object_set_new(rec, "cwd", json_string(cwd));
    json_object_set(rec, "config", rc.root);
    json_object_set_new(rec, "emit", words_json(rc.emit_argv, rc.emit_argc));
    json_object_set_new(rec, "train", words_json(rc.train, rc.ntrain));
    json_object_set_new(rec, "launch", json_string(rc.launch));
    json_object_set_new(rec, "launch_command", words_json(launch, nlaunch));
    if (is_slurm) json_object_set_new(rec, "launch_env", words_json(rc.env, rc.nenv));
    rc.record = json_dumps(rec, JSON_INDENT(2) | JSON_REAL_PRECISION(17));
    json_decref(rec);
    size_t rl = strlen(rc.record);
    rc.record = xrealloc(rc.record, rl + 2);
    memcpy(rc.record + rl, "\n", 2);

    printf("wpgen run: %s, from %s:\n", dry ? "the commands it would run" : "running", cwd);
    put_command(stdout, NULL, 0, rc.emit_argv, rc.emit_argc);
    printf("    (and %s/run.json", rc.out);
    if (rc.ntrain) printf("; %s/run.sh without flags runs train with:", rc.out);
    for (int i = 0; i < rc.ntrain; i++) { fputc(' ', stdout); put_word(stdout, rc.train[i]); }
    printf(")\n");
    put_command(stdout, NULL, 0, make, 5);
    if (nlaunch) put_command(stdout, rc.env, is_slurm ? rc.nenv : 0, launch, nlaunch);
    else printf("  (launch \"none\": nothing is started)\n");
    if (dry) { free(launch); runcfg_free(&rc); return 0; }

    /* plan and emit */
    Args a;
    if (args_parse(rc.emit_argc, rc.emit_argv, &a)) { free(launch); runcfg_free(&rc); return EXIT_BAD_INPUT; }
    a.summary = 1;
    a.run_json = rc.record;
    a.ntrain_args = rc.ntrain;
    a.train_args = rc.train;
    a.run_mpirun_flags = rc.mpirun_flags;
    /* emit makes OUT, not its parent: made here, and removed again if nothing is emitted */
    static char made[64][4096];
    int nmade = 0;
    char out[4096];
    snprintf(out, sizeof out, "%s", rc.out);
    for (size_t l = strlen(out); l > 1 && out[l - 1] == '/'; l--) out[l - 1] = 0;
    if (make_folder_of(out, made, &nmade)) fprintf(stderr, "wpgen run: cannot make the folder of %s: %s\n", out, strerror(errno));
    st = args_run(&a);
    for (int i = nmade - 1; st && i >= 0; i--) rmdir(made[i]);
    if (st == 0 && (st = spawn(make)) != 0) {
        fprintf(stderr, "wpgen run: the build failed (make exit %d): see above\n", st);
        st = EXIT_FAILED;
    }
    if (st || !nlaunch) {
        if (!st) printf("wpgen run: built %s/train; %s%s trains it\n", rc.out, runsh, rc.ntrain ? " (the recorded flags)" : " TRAIN-FLAGS");
        free(launch);
        runcfg_free(&rc);
        return st;
    }
    /* launch: the outputs' folders made (train wants it there), then run.sh or sbatch in place of
     * wpgen, so that signals reach it as they would from the shell */
    for (int i = 0; i < rc.noutputs; i++)
        if (make_folder_of(rc.outputs[i], NULL, NULL)) {
            fprintf(stderr, "wpgen run: %s: cannot make its folder: %s\n", rc.outputs[i], strerror(errno));
            return EXIT_FAILED;
        }
    for (int i = 0; is_slurm && i < rc.nenv; i++) putenv(rc.env[i]);
    fflush(NULL);
    execvp(launch[0], launch);
    fprintf(stderr, "wpgen run: cannot run %s: %s%s\n", launch[0], strerror(errno), is_slurm ? " (launch \"slurm\" needs Slurm's sbatch on PATH)" : "");
    return EXIT_FAILED;
}
