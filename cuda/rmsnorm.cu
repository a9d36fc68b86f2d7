/* SPDX-License-Identifier: MIT */
/* nnt CUDA kernels: RMSNorm over the last dimension (the twins of cpu/rmsnorm.c).
 * Forward and dx: one warp per row, the row's mean square / mean(g xhat) in double.
 * dgamma: one thread block per 32 columns, 16 row groups, double partial sums reduced in a
 * fixed order (deterministic, no atomics), as for LayerNorm. */
#include "nnt_cuda.h"
#include "kernel_util.cuh"

namespace {

using namespace nnt_cu;

const int kWarpsPerBlock = 8;
const int kColTile = 32;
const int kRowGroups = 16;

__global__ void rms_fwd_kernel(int64_t rows, int64_t n, float eps, const float *__restrict__ x,
                               const float *__restrict__ gamma, float *__restrict__ y,
                               float *__restrict__ rstd)
{
    const int lane = threadIdx.x & 31;
    const int warp = threadIdx.x >> 5;
    for (int64_t r = (int64_t)blockIdx.x * kWarpsPerBlock + warp; r < rows;
         r += (int64_t)gridDim.x * kWarpsPerBlock) {
        const float *xr = x + r * n;
        double sq = 0.0;
        for (int64_t j = lane; j < n; j += 32)
            sq += (double)xr[j] * (double)xr[j];
        const double rs = 1.0 / sqrt(warp_sum(sq) / (double)n + (double)eps);
        const float rsf = (float)rs;
        float *yr = y + r * n;
        /* y = x rstd gamma in float, each operation rounded as on the CPU (no FMA) */
        for (int64_t j = lane; j < n; j += 32)
            yr[j] = __fmul_rn(__fmul_rn(xr[j], rsf), gamma[j]);
        if (lane == 0)
            rstd[r] = rsf;
    }
}

__global__ void rms_bwd_dx_kernel(int64_t rows, int64_t n, const float *__restrict__ x,
                                  const float *__restrict__ dy,
                                  const float *__restrict__ gamma,
                                  const float *__restrict__ rstd, float *__restrict__ dx)
{
    const int lane = threadIdx.x & 31;
    const int warp = threadIdx.x >> 5;
    for (int64_t r = (int64_t)blockIdx.x * kWarpsPerBlock + warp; r < rows;
         r += (int64_t)gridDim.x * kWarpsPerBlock) {
        const float *xr = x + r * n, *dyr = dy + r * n;
        const float rs = rstd[r];
        /* xhat = x rstd, g = dy gamma in float; mean(g xhat) in double;
         * dx = rstd (g - xhat mean(g xhat)) */
        double sgx = 0.0;
        for (int64_t j = lane; j < n; j += 32) {
            const float xh = __fmul_rn(xr[j], rs);
            const float g = __fmul_rn(dyr[j], gamma[j]);
            sgx += (double)g * (double)xh;
        }
        const float mgx = (float)(warp_sum(sgx) / (double)n);
        float *dxr = dx + r * n;
        for (int64_t j = lane; j < n; j += 32) {
            const float xh = __fmul_rn(xr[j], rs);
            const float g = __fmul_rn(dyr[j], gamma[j]);
            dxr[j] = __fmul_rn(rs, __fsub_rn(g, __fmul_rn(xh, mgx)));
        }
    }
}

/* blockDim (32, 16): column j = blockIdx.x * 32 + tx, rows ty, ty + 16, ... */
__global__ void rms_bwd_gamma_kernel(int64_t rows, int64_t n, const float *__restrict__ x,
                                     const float *__restrict__ dy,
                                     const float *__restrict__ rstd,
                                     float *__restrict__ dgamma)
{
    __shared__ double sg[kRowGroups][kColTile + 1];
    const int tx = threadIdx.x, ty = threadIdx.y;
    for (int64_t j0 = (int64_t)blockIdx.x * kColTile; j0 < n; j0 += (int64_t)gridDim.x * kColTile) {
        const int64_t j = j0 + tx;
        double ag = 0.0;
        if (j < n) {
            for (int64_t r = ty; r < rows; r += kRowGroups) {
                const float xh = __fmul_rn(x[r * n + j], rstd[r]);
                ag += (double)dy[r * n + j] * (double)xh;
            }
        }
        sg[ty][tx] = ag;
        __syncthreads();
        if (ty == 0 && j < n) {
            double tg = 0.0;
            for (int i = 0; i < kRowGroups; ++i)
                tg += sg[i][tx];
            dgamma[j] = (float)((double)dgamma[j] + tg);
        }
        __syncthreads();
    }
}

/* dgamma's term of row r, column j, for col_sums_split */
struct rms_gamma_terms {
    int64_t n;
    const float *x, *dy, *rstd;
    __device__ void operator()(int64_t r, int64_t j, double &g, double &unused) const
    {
        (void)unused;
        const float xh = __fmul_rn(x[r * n + j], rstd[r]);
        g += (double)dy[r * n + j] * (double)xh;
    }
};

} /* namespace */

extern "C" int nnt_cuda_rmsnorm_fwd_f32(int64_t rows, int64_t n, float eps, const float *x,
                                        const float *gamma, float *y, float *rstd,
                                        cudaStream_t stream)
{
    if (rows < 0 || n < 0)
        return -1;
    if (rows == 0 || n == 0)
        return 0;
    const unsigned blocks = warp_row_blocks(rows, kWarpsPerBlock);
    rms_fwd_kernel<<<blocks, 32 * kWarpsPerBlock, 0, stream>>>(rows, n, eps, x, gamma,
                                                                         y, rstd);
    return launch_status();
}

extern "C" int nnt_cuda_rmsnorm_bwd_f32(int64_t rows, int64_t n, const float *x, const float *dy,
                                        const float *gamma, const float *rstd, float *dx,
                                        float *dgamma, cudaStream_t stream)
{
    if (rows < 0 || n < 0)
        return -1;
    if (rows == 0 || n == 0)
        return 0;
    const unsigned blocks = warp_row_blocks(rows, kWarpsPerBlock);
    rms_bwd_dx_kernel<<<blocks, 32 * kWarpsPerBlock, 0, stream>>>(rows, n, x, dy,
                                                                            gamma, rstd, dx);
    int ret = launch_status();
    if (ret || !dgamma)
        return ret;
    if (norm_split) {
        const rms_gamma_terms t = {n, x, dy, rstd};
        if ((ret = col_sums_split(rows, n, t, dgamma, (float *)NULL, stream)) <= 0)
            return ret;
    }
    int64_t cb = (n + kColTile - 1) / kColTile;
    if (cb > 65535)
        cb = 65535;
    rms_bwd_gamma_kernel<<<(unsigned)cb, dim3(kColTile, kRowGroups), 0, stream>>>(rows, n, x, dy,
                                                                                  rstd, dgamma);
    return launch_status();
}
