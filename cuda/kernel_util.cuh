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

/* nnt_cpu_round_f32's rounding of one float's bits to `drop` fewer mantissa bits (16: to
 * bfloat16, the upper half of the result; to nearest even, NaN stays NaN). */
__device__ __forceinline__ uint32_t round_bits(uint32_t u, int drop)
{
    const uint32_t mask = ~((1u << drop) - 1u), half = (1u << (drop - 1)) - 1u;
    if ((u & 0x7f800000u) == 0x7f800000u)
        return (u & 0x007fffffu) ? (u | 0x00400000u) & mask : u;
    return (u + half + ((u >> drop) & 1u)) & mask;
}

/* Sum (max) of v over the 32 lanes of a full warp (every lane gets it; fixed order), in v's
 * type: double for the norms' statistics, float for attention's rows. */
template <class T>
__device__ __forceinline__ T warp_sum(T v)
{
    for (int off = 16; off > 0; off >>= 1)
        v += __shfl_xor_sync(0xffffffffu, v, off);
    return v;
}

__device__ __forceinline__ float warp_max(float v)
{
    for (int off = 16; off > 0; off >>= 1)
        v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, off));
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

/* ---- column sums of tall row blocks, split into row chunks (the norms' dgamma / dbeta) ----
 * One thread block per 32 columns over every row fills a GPU poorly when the columns are few
 * (C 768: 24 blocks for 132 multiprocessors). Split: the rows are cut into chunks of `per`
 * rows; block (column tile, chunk) sums one or two terms t(r, j, &s0, &s1) over its rows in
 * 16 row groups, then the groups in order, into part[k][chunk][j] (double); a second kernel
 * adds each column's chunks in order to out_k[j] (accumulated in double, then rounded).
 * Deterministic: fixed orders, no atomics. */
const int kSplitCols = 32;
const int kSplitRowGroups = 16;

template <class Terms>
__global__ void col_chunk_partials(int64_t rows, int64_t n, int64_t per, int64_t nchunks,
                                   Terms t, double *__restrict__ part)
{
    __shared__ double s[2][kSplitRowGroups][kSplitCols + 1];
    const int tx = threadIdx.x, ty = threadIdx.y;
    const int64_t c = blockIdx.y, r0 = c * per, r1 = r0 + per < rows ? r0 + per : rows;
    for (int64_t j0 = (int64_t)blockIdx.x * kSplitCols; j0 < n;
         j0 += (int64_t)gridDim.x * kSplitCols) {
        const int64_t j = j0 + tx;
        double a0 = 0.0, a1 = 0.0;
        if (j < n)
            for (int64_t r = r0 + ty; r < r1; r += kSplitRowGroups)
                t(r, j, a0, a1);
        s[0][ty][tx] = a0;
        s[1][ty][tx] = a1;
        __syncthreads();
        if (ty == 0 && j < n) {
            double t0 = 0.0, t1 = 0.0;
            for (int i = 0; i < kSplitRowGroups; ++i) {
                t0 += s[0][i][tx];
                t1 += s[1][i][tx];
            }
            part[c * n + j] = t0;
            part[(nchunks + c) * n + j] = t1;
        }
        __syncthreads();
    }
}

template <int kUnused = 0>
__global__ void col_chunks_finish(int64_t nchunks, int64_t n, const double *__restrict__ part,
                                  float *out0, float *out1)
{
    for (int64_t j = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; j < n;
         j += (int64_t)gridDim.x * blockDim.x) {
        double t0 = 0.0, t1 = 0.0;
        for (int64_t c = 0; c < nchunks; c++) {
            t0 += part[c * n + j];
            t1 += part[(nchunks + c) * n + j];
        }
        if (out0)
            out0[j] = (float)((double)out0[j] + t0);
        if (out1)
            out1[j] = (float)((double)out1[j] + t1);
    }
}

/* The split column sums of t into out0 (and out1, when not NULL): 0, minus a CUDA error, or
 * 1 when not split (too few rows, or no memory for the partials): the caller then runs its
 * one-pass kernel. */
template <class Terms>
int col_sums_split(int64_t rows, int64_t n, Terms t, float *out0, float *out1,
                   cudaStream_t stream)
{
    int64_t cb = (n + kSplitCols - 1) / kSplitCols;
    if (cb > 65535)
        cb = 65535;
    int64_t nchunks = 1024 / cb;                       /* about 1024 blocks in all   */
    int64_t most = (rows + 255) / 256;                 /* at least 256 rows a chunk  */
    nchunks = nchunks < most ? nchunks : most;
    nchunks = nchunks < 65535 ? nchunks : 65535;
    if (nchunks < 2)
        return 1;
    const int64_t per = (rows + nchunks - 1) / nchunks;
    nchunks = (rows + per - 1) / per;
    double *part = NULL;
    if (cudaMallocAsync((void **)&part, (size_t)(2 * nchunks * n) * sizeof(double), stream) !=
        cudaSuccess) {
        (void)cudaGetLastError();
        return 1;
    }
    col_chunk_partials<<<dim3((unsigned)cb, (unsigned)nchunks),
                         dim3(kSplitCols, kSplitRowGroups), 0, stream>>>(rows, n, per, nchunks,
                                                                         t, part);
    int rc = launch_status();
    if (rc == 0) {
        col_chunks_finish<><<<grid_for(n), kThreads, 0, stream>>>(nchunks, n, part, out0, out1);
        rc = launch_status();
    }
    cudaFreeAsync(part, stream);
    return rc;
}

/* Whether the norms' backward splits their column sums (nnt_cuda_set_norm_split). */
extern int norm_split;

} // namespace nnt_cu

#endif
