/* The runtime's one failure path (runtime/common/fail.h), each case in a child process: the line
 * on stderr (the rank once known, who failed, the call, the file and line, the library's text),
 * the job's abort called with the status when a layer set one, else the process's own exit with
 * that status. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include "check.h"
#include "common/fail.h"

/* A layer's abort: ends the "job" with a status the test can tell from a plain exit. */
static void abort_job(int status) { _exit(100 + status); }

/* Runs fn in a child with its stderr into err; returns its exit status (-1: not an exit). */
static int run(void (*fn)(void), char *err, size_t len) {
    int fd[2];
    if (pipe(fd)) return -1;
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        close(fd[0]);
        dup2(fd[1], 2);
        fn();
        _exit(99);   /* fn returned: the failure path did not end the process */
    }
    close(fd[1]);
    size_t n = 0;
    ssize_t r;
    while (n + 1 < len && (r = read(fd[0], err + n, len - 1 - n)) > 0) n += (size_t)r;
    err[n] = 0;
    close(fd[0]);
    int st;
    if (waitpid(pid, &st, 0) != pid || !WIFEXITED(st)) return -1;
    return WEXITSTATUS(st);
}

static void call_before_setup(void) { wp_call_failed(1, "x.cu", 12, "cudaMalloc(&p, n)", "out of memory"); }
static void call_in_a_job(void) {
    wp_fail_setup(3, abort_job);
    wp_call_failed(3, "comm.c", 40, "MPI_Isend(...)", "MPI_ERR_RANK: invalid rank");
}
static void layer_in_a_job(void) {
    wp_fail_setup(0, abort_job);
    wp_fail(2, "comm", "WP_COMM_TIMEOUT=%s: expected seconds", "abc");
}
static void without_a_layer(void) {
    wp_fail_setup(5, NULL);
    wp_fail(4, NULL, "stopped");
}

int main(void) {
    char err[1024];
    int rc = run(call_before_setup, err, sizeof err);
    CHECK(rc == 1 && !strcmp(err, "x.cu:12: cudaMalloc(&p, n) failed: out of memory\n"),
          "before any layer: exit %d, %s", rc, err);
    rc = run(call_in_a_job, err, sizeof err);
    CHECK(rc == 103 && !strcmp(err, "rank 3: comm.c:40: MPI_Isend(...) failed: MPI_ERR_RANK: invalid rank\n"),
          "a library's call in a job: the layer's abort with its status: exit %d, %s", rc, err);
    rc = run(layer_in_a_job, err, sizeof err);
    CHECK(rc == 102 && !strcmp(err, "comm: rank 0: WP_COMM_TIMEOUT=abc: expected seconds\n"),
          "a layer's own failure: exit %d, %s", rc, err);
    rc = run(without_a_layer, err, sizeof err);
    CHECK(rc == 4 && !strcmp(err, "rank 5: stopped\n"), "no abort set: the process exits: exit %d, %s", rc, err);
    return check_summary("test_fail");
}
