/* The CPU backend's OpenMP threads: how many, and how they wait. Used by compute_process_start and
 * compute_process_init (common/compute.h) for emitted programs, and by wp-ref. */
#ifndef WP_THREADS_H
#define WP_THREADS_H

/* First thing in main, before MPI starts: unless OMP_WAIT_POLICY or OMP_NUM_THREADS is set, the
 * process executes itself again with OMP_WAIT_POLICY=passive, so that idle threads sleep instead
 * of spinning (libgomp reads the variable only when it is loaded, so it cannot be set from
 * inside). Returns if that is not needed or not possible. Under a tool that runs the program
 * (valgrind), set OMP_WAIT_POLICY: the new program would run outside the tool. */
void cpu_wait_passively(char **argv);

#endif
