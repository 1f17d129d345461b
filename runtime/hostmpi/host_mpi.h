/* MPI on host memory, what both communication layers (runtime/mpi, runtime/nccl) take from MPI
 * beside their step's operations, written once: the world (MPI started, our own duplicate of
 * MPI_COMM_WORLD with errors returned, this rank's place on its node), the settings every layer
 * reads at start (WP_COMM_TIMEOUT, WP_SAVE_TIMEOUT, WP_COMM_MAX_ELEMS), the blocking calls outside
 * the step (common/comm.h: barrier, sums of doubles, byte broadcasts, gather and scatter), and
 * failing: MPI_CHECK, comm_fail and the job's abort (common/fail.h).
 *
 * A layer keeps a HostMpi in its Comm and gives it to this file (comm_host), which defines the
 * functions of comm.h every layer has alike: the counters, the clock, the blocking calls (each
 * first completes the layer's step operations, comm_complete_step: they run alone on the world)
 * and comm_abort. The checks of a step operation's arguments (common/comm_book.h) fail here too. The blocking calls poll their
 * requests with the timeout (the save timeout for comm_bcast_bytes_save), napping so that waiting
 * ranks leave the cores to ranks still computing, and count as COMM_UTIL. Gather and scatter move
 * each rank's part between it and rank 0 as messages of a piece each (common/comm_book.h: MPI's
 * int counts), in order on their own tag, so that no int displacement limits a checkpoint; each
 * receive's size is checked against what its sender announced. */
#ifndef WP_HOST_MPI_H
#define WP_HOST_MPI_H

#include <mpi.h>
#include <stddef.h>
#include <time.h>
#include "common/comm.h"
#include "common/comm_book.h"
#include "common/fail.h"

/* realloc that ends the job when memory runs out. */
void *hm_alloc(void *p, size_t bytes);

/* Point-to-point tags on the world: the step's messages (one tag, so MPI's non-overtaking order
 * is the plan's matching), the blocking calls' (never confused with the step's), and the MPI
 * layer's emulated arrivals. */
enum { TAG_STEP = 1, TAG_UTIL = 2, TAG_ARRIVAL = 3 };

/* Every MPI call goes through this: the world returns errors instead of aborting anonymously
 * (MPI_ERRORS_RETURN), so the job ends naming the call, the file and line and MPI's error text. */
#define MPI_CHECK(call) do { int rc_ = (call); if (rc_ != MPI_SUCCESS) hm_call_failed(#call, rc_, __FILE__, __LINE__); } while (0)
void hm_call_failed(const char *call, int rc, const char *file, int line) __attribute__((noreturn));

/* A failure of the layer's own ("comm: rank R: ..."): the job ends with COMM_ABORT_STATUS. */
#define comm_fail(...) wp_fail(COMM_ABORT_STATUS, "comm", __VA_ARGS__)

typedef struct HostMpi {
    MPI_Comm world;          /* our duplicate of MPI_COMM_WORLD, errors returned */
    int rank, size;
    int local_rank, local_size;   /* this rank among the ranks of its node (sharing its memory) */
    int started_mpi;         /* hm_init called MPI_Init, so hm_finalize calls MPI_Finalize */
    double timeout;          /* WP_COMM_TIMEOUT: every wait's; 0 waits forever */
    double save_timeout;     /* WP_SAVE_TIMEOUT: comm_bcast_bytes_save's; 0: none */
    size_t max_elems;        /* elements of one MPI call at most: INT_MAX, or WP_COMM_MAX_ELEMS */
    struct timespec t0;      /* comm_now's zero */
    CommStats stats;
} HostMpi;

/* What each layer defines for this file: its HostMpi, and completing everything it posted. */
HostMpi *comm_host(const Comm *c);
void comm_complete_step(Comm *c);

/* Starts MPI (unless started: MPI_THREAD_FUNNELED, only the main thread calls MPI) and the world,
 * and reads the settings (a bad value ends the job as bad input, COMM_BAD_INPUT_STATUS). From here
 * a failure ends the whole job (hm_abort_job) unless the layer says otherwise (wp_fail_setup). */
void hm_init(HostMpi *h, int *argc, char ***argv);
/* Frees the world; finalizes MPI if hm_init started it. */
void hm_finalize(HostMpi *h);
/* Ends every rank of the job with `status` (MPI_Abort once MPI runs, else exit). */
void hm_abort_job(int status) __attribute__((noreturn));

/* comm_set_timeout (save 0) and comm_set_save_timeout (save 1): seconds >= 0, 0 waits forever. */
void hm_set_timeout(HostMpi *h, double seconds, int save);

/* Seconds since hm_init. */
double hm_now(const HostMpi *h);

/* The checks every layer makes (common/comm_book.c), ending the job as comm_fail does: a step
 * operation's peer, a collective's group (this rank a member) and root (its index returned). */
void hm_check_peer(const CommGroups *t, CommKind kind, int peer, const CommInfo *info);
const CommGroup *hm_member(const CommGroups *t, CommKind kind, int g, const CommInfo *info);
int hm_root(const CommGroups *t, CommKind kind, int g, int root, const CommInfo *info);

#endif
