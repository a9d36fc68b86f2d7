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

/* Column sums acc[i] += (h ? h[i] : 1) sum_o term(o, i) (term in double), blockDim (32, 16):
 * column i = blockIdx.x * 32 + tx; rows o = ty, ty + 16, ...; the 16 row group sums are then
 * added in order by ty == 0. Terms: sum_outer's y[o, i], dot_cols' x[o, i] y[o, i]. */
template <class Term>
__global__ void column_sums_kernel(int64_t outer, int64_t inner, Term term,
                                   const float *__restrict__ h, float *__restrict__ acc)
{
    __shared__ double part[kRowGroups][kColTile + 1];
    const int tx = threadIdx.x, ty = threadIdx.y;
    for (int64_t i0 = (int64_t)blockIdx.x * kColTile; i0 < inner;
         i0 += (int64_t)gridDim.x * kColTile) {
        const int64_t i = i0 + tx;
        double s = 0.0;
        if (i < inner)
            for (int64_t o = ty; o < outer; o += kRowGroups)
                s += term(o, i);
        part[ty][tx] = s;
        __syncthreads();
        if (ty == 0 && i < inner) {
            double t = 0.0;
            for (int g = 0; g < kRowGroups; ++g)
                t += part[g][tx];
            acc[i] = (float)((double)acc[i] + (h ? (double)h[i] * t : t));
        }
        __syncthreads();
    }
}

struct ColumnTerm {   /* sum_outer: y (outer, inner; leading dim ldy) */
    const float *y;
    int64_t ldy;
    __device__ double operator()(int64_t o, int64_t i) const { return (double)y[o * ldy + i]; }
};

struct ProductTerm {   /* dot_cols: x y (outer, inner) */
    const float *x, *y;
    int64_t inner;
    __device__ double operator()(int64_t o, int64_t i) const
    {
        return (double)x[o * inner + i] * y[o * inner + i];
    }
};

template <class Term>
int column_sums(int64_t outer, int64_t inner, Term term, const float *h, float *acc,
                cudaStream_t stream)
{
    if (outer < 0 || inner < 0)
        return -1;
    if (outer == 0 || inner == 0)
        return 0;
    int64_t b = (inner + kColTile - 1) / kColTile;
    if (b > 65535)
        b = 65535;
    column_sums_kernel<<<(unsigned)b, dim3(kColTile, kRowGroups), 0, stream>>>(outer, inner,
                                                                               term, h, acc);
    return launch_status();
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

/* ---- DoRA's per-feature products ---- */

__global__ void mul_bcast_kernel(int64_t outer, int64_t inner, const float *x,
                                 const float *__restrict__ h, float c, int by_row,
                                 int accumulate, float *z)
{
    const int64_t n = outer * inner;
    for (int64_t k = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; k < n;
         k += (int64_t)gridDim.x * blockDim.x) {
        float v = x[k] * (h[by_row ? k / inner : k % inner] + c);
        z[k] = accumulate ? z[k] + v : v;
    }
}

__device__ __forceinline__ float widen(float v) { return v; }
__device__ __forceinline__ float widen(uint16_t v) { return __uint_as_float((uint32_t)v << 16); }

/* one warp per row: lane sums in double, then the warp's in a fixed order */
template <class T>
__global__ void dot_rows_kernel(int64_t outer, int64_t inner, const T *__restrict__ x,
                                const T *__restrict__ y, float *__restrict__ acc)
{
    const int lane = threadIdx.x % 32;
    const int64_t warps = (int64_t)gridDim.x * (blockDim.x / 32);
    for (int64_t o = (int64_t)blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32; o < outer;
         o += warps) {
        double s = 0.0;
        for (int64_t i = lane; i < inner; i += 32)
            s += (double)widen(x[o * inner + i]) * widen(y[o * inner + i]);
        s = warp_sum(s);
        if (lane == 0)
            acc[o] = (float)((double)acc[o] + s);
    }
}

__global__ void rsqrt_mul_kernel(int64_t n, const float *__restrict__ m,
                                 const float *__restrict__ n2, float *__restrict__ out)
{
    for (int64_t k = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; k < n;
         k += (int64_t)gridDim.x * blockDim.x)
        out[k] = (float)((m ? (double)m[k] : 1.0) / sqrt((double)n2[k]));
}

} /* namespace */

extern "C" int nnt_cuda_sum_outer_f32(int64_t outer, int64_t inner, const float *y, int64_t ldy,
                                      float *acc, cudaStream_t stream)
{
    return column_sums(outer, inner, ColumnTerm{y, ldy}, NULL, acc, stream);
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

extern "C" int nnt_cuda_mul_bcast_f32(int64_t outer, int64_t inner, const float *x,
                                      const float *h, float c, int by_row, int accumulate,
                                      float *z, cudaStream_t stream)
{
    if (outer < 0 || inner < 0)
        return -1;
    if (outer == 0 || inner == 0)
        return 0;
    mul_bcast_kernel<<<grid_for(outer * inner), kThreads, 0, stream>>>(outer, inner, x, h, c,
                                                                        by_row, accumulate, z);
    return launch_status();
}

extern "C" int nnt_cuda_dot_cols_f32(int64_t outer, int64_t inner, const float *x,
                                     const float *y, const float *h, float *acc,
                                     cudaStream_t stream)
{
    return column_sums(outer, inner, ProductTerm{x, y, inner}, h, acc, stream);
}

extern "C" int nnt_cuda_dot_rows(int bf16, int64_t outer, int64_t inner, const void *x,
                                 const void *y, float *acc, cudaStream_t stream)
{
    if (outer < 0 || inner < 0)
        return -1;
    if (outer == 0)
        return 0;
    unsigned blocks = warp_row_blocks(outer, 8);
    if (bf16)
        dot_rows_kernel<uint16_t><<<blocks, 256, 0, stream>>>(
            outer, inner, (const uint16_t *)x, (const uint16_t *)y, acc);
    else
        dot_rows_kernel<float><<<blocks, 256, 0, stream>>>(outer, inner, (const float *)x,
                                                           (const float *)y, acc);
    return launch_status();
}

extern "C" int nnt_cuda_rsqrt_mul_f32(int64_t n, const float *m, const float *n2, float *out,
                                      cudaStream_t stream)
{
    if (n < 0)
        return -1;
    if (n == 0)
        return 0;
    rsqrt_mul_kernel<<<grid_for(n), kThreads, 0, stream>>>(n, m, n2, out);
    return launch_status();
}
