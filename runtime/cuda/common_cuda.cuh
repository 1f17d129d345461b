/* What every CUDA file of the model shares: the checks of CUDA and cuBLASLt calls (cuda_check.h:
 * each names the failed call, the file and the line, and ends the job with status 1) and the bf16
 * rounding rule of common/precision.h on the device, bit for bit, so that the GPU rounds exactly
 * where and how the CPU reference rounds. */
#ifndef WP_COMMON_CUDA_CUH
#define WP_COMMON_CUDA_CUH

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <cuda_runtime.h>
#include <cublasLt.h>
#include "cuda/cuda_check.h"

/* A bf16 value is kept as its 16 bits (uint16_t), as the plan's buffers keep it; the kernels widen
 * and round with these two, never with cuda_bf16.h's conversions, so that NaN payloads and ties
 * follow wp_bf16_round_bits exactly. */
__device__ __forceinline__ float bf16_to_f32(uint16_t h) {
    return __uint_as_float((uint32_t)h << 16);
}

__device__ __forceinline__ uint16_t f32_to_bf16(float f) {
    uint32_t u = __float_as_uint(f);
    uint32_t rounded = u + 0x7FFFu + ((u >> 16) & 1u);
    uint32_t nan = (u & 0x7FFFFFFFu) > 0x7F800000u;
    return (uint16_t)(((nan ? (u | 0x00400000u) : rounded) & 0xFFFF0000u) >> 16);
}

/* f rounded to the nearest bf16, kept in a float (a rounding point whose value is used again). */
__device__ __forceinline__ float bf16_round(float f) { return bf16_to_f32(f32_to_bf16(f)); }

/* Blocks of `threads` covering n elements, at most `cap` (grid-stride loops do the rest). */
static inline unsigned int wc_blocks(size_t n, unsigned int threads, unsigned int cap) {
    size_t b = (n + threads - 1) / threads;
    if (b < 1) b = 1;
    return (unsigned int)(b < cap ? b : cap);
}

#endif
