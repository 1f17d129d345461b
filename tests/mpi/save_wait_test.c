/* The wait of the ranks while rank 0 writes a checkpoint (runtime/common/comm.h,
 * comm_bcast_bytes_save): rank 0 stands for a slow save by sleeping 6 s, longer than the
 * communication timeout the script sets (WP_COMM_TIMEOUT=2), then broadcasts the save's status.
 * The margins are for a loaded machine: the save outlasts the timeout by 4 s, and the timeout
 * leaves the other operations (the start, the barrier) 2 s each for a rank kept off its core.
 *   save_wait_test save    comm_bcast_bytes_save: the others wait it out (save timeout: none)
 *   save_wait_test plain   comm_bcast_bytes: the others abort the job on the comm timeout, as the
 *                          trainer's save did before it used comm_bcast_bytes_save
 * tests/mpi/test_save_wait.sh runs both, and `save` with WP_SAVE_TIMEOUT=2 (aborts). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <stdio.h>
#include <string.h>
#include <time.h>
#include "common/comm.h"

int main(int argc, char **argv) {
    Comm *c = comm_init(&argc, &argv);
    int save = argc > 1 && strcmp(argv[1], "save") == 0;
    int status = -1;
    if (comm_rank(c) == 0) {
        struct timespec slow = { 6, 0 };
        nanosleep(&slow, NULL);
        status = 42;
    }
    if (save) comm_bcast_bytes_save(c, &status, sizeof status, 0);
    else comm_bcast_bytes(c, &status, sizeof status, 0);
    printf("rank %d: the save's status %d\n", comm_rank(c), status);
    comm_barrier(c);
    comm_finalize(c);
    return status == 42 ? 0 : 1;
}
