/* The check of every CUDA runtime and cuBLASLt call, for the CUDA backend's C and CUDA files and
 * the NCCL layer alike: a call that fails ends the whole job (common/fail.h: the communication
 * layer aborts every rank, so none waits for this one) with one line naming the rank, the file and
 * line, the call and the library's own error text. Exit status 1: a CUDA error is a broken device
 * or a bug, not bad input and not a transfer that failed. */
#ifndef WP_CUDA_CHECK_H
#define WP_CUDA_CHECK_H

#include <cuda_runtime.h>
#include "common/fail.h"

#define CUDA_FAIL_STATUS 1

#define CUDA_CHECK(call) do { cudaError_t err_ = (call); if (err_ != cudaSuccess) \
    wp_call_failed(CUDA_FAIL_STATUS, __FILE__, __LINE__, #call, cudaGetErrorString(err_)); } while (0)

/* After a kernel launch: a bad configuration is reported at once, naming the kernel. */
#define CUDA_CHECK_LAUNCH(name) do { cudaError_t err_ = cudaGetLastError(); if (err_ != cudaSuccess) \
    wp_call_failed(CUDA_FAIL_STATUS, __FILE__, __LINE__, "launch of " name, cudaGetErrorString(err_)); } while (0)

/* cuBLASLt's calls (its header only where the caller included it: the .cu files of the model). */
#define CUBLAS_CHECK(call) do { cublasStatus_t st_ = (call); if (st_ != CUBLAS_STATUS_SUCCESS) \
    wp_call_failed(CUDA_FAIL_STATUS, __FILE__, __LINE__, #call, cublasLtGetStatusName(st_)); } while (0)

#endif
