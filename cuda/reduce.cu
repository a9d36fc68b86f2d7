/* SPDX-License-Identifier: MIT */
/* nnt CUDA kernels: deterministic reductions (column sums, sum of squares).
 * No atomics: the summation order depends only on the sizes, so repeated runs give
 * bit-identical results. */
#include "nnt_cuda.h"
#include "kernel_util.cuh"

namespace {

using namespace nnt_cu;

const int kColTile = 32;
const int kRowGroups = 16;
const int kSumsqThreads = 1024;

/* blockDim (32, 16): column i = blockIdx.x * 32 + tx; rows o = ty, ty + 16, ...; the 16 row
 * group sums are then added in order by ty == 0. */
__global__ void sum_outer_kernel(int64_t outer, int64_t inner, const float *__restrict__ y,
                                 int64_t ldy, float *__restrict__ acc)
{
    __shared__ double part[kRowGroups][kColTile + 1];
    const int tx = threadIdx.x, ty = threadIdx.y;
    for (int64_t i0 = (int64_t)blockIdx.x * kColTile; i0 < inner;
         i0 += (int64_t)gridDim.x * kColTile) {
        const int64_t i = i0 + tx;
        double s = 0.0;
        if (i < inner)
            for (int64_t o = ty; o < outer; o += kRowGroups)
                s += (double)y[o * ldy + i];
        part[ty][tx] = s;
        __syncthreads();
        if (ty == 0 && i < inner) {
            double t = 0.0;
            for (int g = 0; g < kRowGroups; ++g)
                t += part[g][tx];
            acc[i] = (float)((double)acc[i] + t);
        }
        __syncthreads();
    }
}

/* Sum of squares of x[0, n) by one block: per-thread double partial sums (float4 loads when
 * aligned), then a fixed-order warp-shuffle + shared-memory reduction. The total is
 * returned in thread 0. */
__device__ double block_sumsq(int64_t n, const float *__restrict__ x)
{
    __shared__ double warp_part[kSumsqThreads / 32];
    const int tid = threadIdx.x;
    double s = 0.0;
    int64_t done = 0;
    if (((uintptr_t)x & 15u) == 0) {
        const float4 *x4 = (const float4 *)x;
        const int64_t n4 = n / 4;
        int64_t i = tid;
        for (; i + 3 * kSumsqThreads < n4; i += 4 * kSumsqThreads) {
            float4 a = x4[i], b = x4[i + kSumsqThreads], c = x4[i + 2 * kSumsqThreads],
                   d = x4[i + 3 * kSumsqThreads];
            s += (double)a.x * a.x + (double)a.y * a.y + (double)a.z * a.z + (double)a.w * a.w;
            s += (double)b.x * b.x + (double)b.y * b.y + (double)b.z * b.z + (double)b.w * b.w;
            s += (double)c.x * c.x + (double)c.y * c.y + (double)c.z * c.z + (double)c.w * c.w;
            s += (double)d.x * d.x + (double)d.y * d.y + (double)d.z * d.z + (double)d.w * d.w;
        }
        for (; i < n4; i += kSumsqThreads) {
            float4 a = x4[i];
            s += (double)a.x * a.x + (double)a.y * a.y + (double)a.z * a.z + (double)a.w * a.w;
        }
        done = n4 * 4;
    }
    for (int64_t i = done + tid; i < n; i += kSumsqThreads)
        s += (double)x[i] * x[i];

    for (int off = 16; off > 0; off >>= 1)
        s += __shfl_xor_sync(0xffffffffu, s, off);
    if ((tid & 31) == 0)
        warp_part[tid >> 5] = s;
    __syncthreads();
    double t = 0.0;
    if (tid < 32) {
        t = warp_part[tid];
        for (int off = 16; off > 0; off >>= 1)
            t += __shfl_xor_sync(0xffffffffu, t, off);
    }
    return t;
}

/* Block b sums chunk b of x (chunk elements, a multiple of 4 so that aligned chunks stay
 * aligned): into part[b], or with part NULL (one block) straight into acc[0]. */
__global__ void __launch_bounds__(kSumsqThreads)
sumsq_kernel(int64_t n, int64_t chunk, const float *__restrict__ x, double *__restrict__ part,
             float *__restrict__ acc)
{
    const int64_t begin = (int64_t)blockIdx.x * chunk;
    const int64_t len = n - begin < chunk ? n - begin : chunk;
    double t = block_sumsq(len, x + begin);
    if (threadIdx.x == 0) {
        if (part)
            part[blockIdx.x] = t;
        else
            acc[0] = (float)((double)acc[0] + t);
    }
}

/* acc[0] += sum of part[0, nparts) in a fixed order (one warp). */
__global__ void sumsq_finish_kernel(int nparts, const double *__restrict__ part,
                                    float *__restrict__ acc)
{
    double t = 0.0;
    for (int i = threadIdx.x; i < nparts; i += 32)
        t += part[i];
    for (int off = 16; off > 0; off >>= 1)
        t += __shfl_xor_sync(0xffffffffu, t, off);
    if (threadIdx.x == 0)
        acc[0] = (float)((double)acc[0] + t);
}

} /* namespace */

extern "C" int nnt_cuda_sum_outer_f32(int64_t outer, int64_t inner, const float *y, int64_t ldy,
                                      float *acc, cudaStream_t stream)
{
    if (outer < 0 || inner < 0)
        return -1;
    if (outer == 0 || inner == 0)
        return 0;
    int64_t b = (inner + kColTile - 1) / kColTile;
    if (b > 65535)
        b = 65535;
    sum_outer_kernel<<<(unsigned)b, dim3(kColTile, kRowGroups), 0, stream>>>(outer, inner, y, ldy,
                                                                            acc);
    return launch_status();
}

extern "C" int nnt_cuda_sumsq_f32(int64_t n, const float *x, float *acc, double *partials,
                                  cudaStream_t stream)
{
    if (n < 0)
        return -1;
    if (n == 0)
        return 0;
    /* blocks of at least 64K elements, at most NNT_CUDA_SUMSQ_PARTIALS: both depend on n only */
    int64_t nparts = partials ? (n + 65535) / 65536 : 1;
    if (nparts > NNT_CUDA_SUMSQ_PARTIALS)
        nparts = NNT_CUDA_SUMSQ_PARTIALS;
    int64_t chunk = (n + nparts - 1) / nparts;
    chunk = (chunk + 3) / 4 * 4;
    nparts = (n + chunk - 1) / chunk;
    if (nparts == 1) {
        sumsq_kernel<<<1, kSumsqThreads, 0, stream>>>(n, n, x, NULL, acc);
        return launch_status();
    }
    sumsq_kernel<<<(unsigned)nparts, kSumsqThreads, 0, stream>>>(n, chunk, x, partials, acc);
    sumsq_finish_kernel<<<1, 32, 0, stream>>>((int)nparts, partials, acc);
    return launch_status();
}
