/* The one way the runtime ends a job on a failure it cannot go on from (a library call that
 * failed, a timeout, a broken invariant): one line on stderr naming the rank, then every rank of
 * the job ends with the given status, not this one alone, so that no rank waits for it forever.
 * Ending the others is the communication layer's: it says how once its library is up
 * (wp_fail_setup: MPI_Abort, with NCCL's communicators aborted first); before that, or without a
 * layer (wp-ref, the GPU test programs), the process exits. Each library's check macro ends here
 * through wp_call_failed (MPI_CHECK: hostmpi/host_mpi.h; CUDA_CHECK, CUBLAS_CHECK:
 * cuda/cuda_check.h; NCCL_CHECK: nccl/comm_nccl.c), with the status its library fails with
 * (common/comm.h: COMM_ABORT_STATUS for MPI and NCCL; 1 for CUDA, a broken device or a bug). Plain
 * C, and C++ for nvcc. */
#ifndef WP_FAIL_H
#define WP_FAIL_H

#include <stdarg.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Ends every rank of the job with `status`; does not return. */
typedef void (*WpAbortJob)(int status);

/* This process is rank `rank` (for the messages), and abort_job ends the job (NULL: exit). */
void wp_fail_setup(int rank, WpAbortJob abort_job);

/* Prints "WHO: rank R: MESSAGE" ("rank R: MESSAGE" when who is NULL; without "rank R: " before
 * wp_fail_setup) and ends the job with `status`. */
void wp_fail(int status, const char *who, const char *fmt, ...) __attribute__((format(printf, 3, 4), noreturn));
void wp_vfail(int status, const char *who, const char *fmt, va_list ap) __attribute__((noreturn));

/* A library call that failed: "rank R: FILE:LINE: CALL failed: ERROR" (the library's own text). */
void wp_call_failed(int status, const char *file, int line, const char *call, const char *error) __attribute__((noreturn));

#ifdef __cplusplus
}
#endif

#endif
