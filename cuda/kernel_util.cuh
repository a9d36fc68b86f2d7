/* SPDX-License-Identifier: MIT */
/* Helpers shared by nnt's CUDA kernel files (internal; included by cuda/*.cu only). */
#ifndef NNT_CUDA_KERNEL_UTIL_CUH
#define NNT_CUDA_KERNEL_UTIL_CUH

#include <cuda_runtime.h>
#include <stdint.h>

namespace nnt_cu {

/* Threads per block of the grid-stride elementwise kernels. */
const int kThreads = 256;

/* Blocks for n elements at kThreads a block, at most 2^19 (grid-stride loops cover the
 * rest), at least 1. */
inline unsigned grid_for(int64_t n)
{
    int64_t b = (n + kThreads - 1) / kThreads;
    if (b > (int64_t)1 << 19)
        b = (int64_t)1 << 19;
    if (b < 1)
        b = 1;
    return (unsigned)b;
}

/* 0, or minus the CUDA error of the last launch (cudaGetLastError clears it). */
inline int launch_status(void)
{
    cudaError_t e = cudaGetLastError();
    return e == cudaSuccess ? 0 : -(int)e;
}

/* Sum of v over the 32 lanes of a full warp (every lane gets it; fixed order). */
__device__ __forceinline__ double warp_sum(double v)
{
    for (int off = 16; off > 0; off >>= 1)
        v += __shfl_xor_sync(0xffffffffu, v, off);
    return v;
}

/* Blocks of warps_per_block warps for one warp per row over rows rows (grid-stride loops
 * cover what is past the 65535 * 8 cap). */
inline unsigned warp_row_blocks(int64_t rows, int warps_per_block)
{
    int64_t b = (rows + warps_per_block - 1) / warps_per_block;
    if (b > 65535 * 8)
        b = 65535 * 8;
    return (unsigned)b;
}

} // namespace nnt_cu

#endif
