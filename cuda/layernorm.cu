/* SPDX-License-Identifier: MIT */
/* nnt CUDA kernels: LayerNorm over the last dimension.
 * Forward and dx: one warp per row, row statistics in double (two passes over the row).
 * dgamma / dbeta: one thread block per 32 columns, 16 row groups, double partial sums reduced
 * in a fixed order (deterministic, no atomics); with nnt_cuda_set_norm_split(1), the rows cut
 * into chunks too when the columns are few (kernel_util.cuh, col_sums_split). */
#include "nnt_cuda.h"
#include "kernel_util.cuh"

namespace {

using namespace nnt_cu;

const int kWarpsPerBlock = 8;
const int kColTile = 32;
const int kRowGroups = 16;

__global__ void ln_fwd_kernel(int64_t rows, int64_t n, float eps, const float *__restrict__ x,
                              const float *__restrict__ gamma, const float *__restrict__ beta,
                              float *__restrict__ y, float *__restrict__ mean,
                              float *__restrict__ rstd)
{
    const int lane = threadIdx.x & 31;
    const int warp = threadIdx.x >> 5;
    for (int64_t r = (int64_t)blockIdx.x * kWarpsPerBlock + warp; r < rows;
         r += (int64_t)gridDim.x * kWarpsPerBlock) {
        const float *xr = x + r * n;
        double s = 0.0;
        for (int64_t j = lane; j < n; j += 32)
            s += (double)xr[j];
        const double mu = warp_sum(s) / (double)n;
        double v = 0.0;
        for (int64_t j = lane; j < n; j += 32) {
            double dlt = (double)xr[j] - mu;
            v += dlt * dlt;
        }
        const double var = warp_sum(v) / (double)n;
        const double rs = 1.0 / sqrt(var + (double)eps);
        const float muf = (float)mu, rsf = (float)rs;
        float *yr = y + r * n;
        /* y = (x - mean) rstd gamma + beta in float with the stored statistics, each operation
         * rounded as on the CPU (no FMA contraction) */
        for (int64_t j = lane; j < n; j += 32) {
            float h = __fmul_rn(__fsub_rn(xr[j], muf), rsf);
            if (gamma)
                h = __fmul_rn(h, gamma[j]);
            yr[j] = beta ? __fadd_rn(h, beta[j]) : h;
        }
        if (lane == 0) {
            mean[r] = muf;
            rstd[r] = rsf;
        }
    }
}

__global__ void ln_bwd_dx_kernel(int64_t rows, int64_t n, const float *__restrict__ x,
                                 const float *__restrict__ dy, const float *__restrict__ gamma,
                                 const float *__restrict__ mean, const float *__restrict__ rstd,
                                 float *__restrict__ dx)
{
    const int lane = threadIdx.x & 31;
    const int warp = threadIdx.x >> 5;
    for (int64_t r = (int64_t)blockIdx.x * kWarpsPerBlock + warp; r < rows;
         r += (int64_t)gridDim.x * kWarpsPerBlock) {
        const float *xr = x + r * n, *dyr = dy + r * n;
        const float mu = mean[r], rs = rstd[r];
        /* xhat = (x - mean) rstd, g = dy gamma in float; row means of g and g xhat in double;
         * dx = rstd (g - mean(g) - xhat mean(g xhat)) */
        double sg = 0.0, sgx = 0.0;
        for (int64_t j = lane; j < n; j += 32) {
            const float xh = __fmul_rn(__fsub_rn(xr[j], mu), rs);
            const float g = gamma ? __fmul_rn(dyr[j], gamma[j]) : dyr[j];
            sg += (double)g;
            sgx += (double)g * (double)xh;
        }
        const float mg = (float)(warp_sum(sg) / (double)n);
        const float mgx = (float)(warp_sum(sgx) / (double)n);
        float *dxr = dx + r * n;
        for (int64_t j = lane; j < n; j += 32) {
            const float xh = __fmul_rn(__fsub_rn(xr[j], mu), rs);
            const float g = gamma ? __fmul_rn(dyr[j], gamma[j]) : dyr[j];
            dxr[j] = __fmul_rn(rs, __fsub_rn(__fsub_rn(g, mg), __fmul_rn(xh, mgx)));
        }
    }
}

/* blockDim (32, 16): column j = blockIdx.x * 32 + tx, rows ty, ty + 16, ... */
__global__ void ln_bwd_params_kernel(int64_t rows, int64_t n, const float *__restrict__ x,
                                     const float *__restrict__ dy,
                                     const float *__restrict__ mean,
                                     const float *__restrict__ rstd, float *__restrict__ dgamma,
                                     float *__restrict__ dbeta)
{
    __shared__ double sg[kRowGroups][kColTile + 1];
    __shared__ double sb[kRowGroups][kColTile + 1];
    const int tx = threadIdx.x, ty = threadIdx.y;
    for (int64_t j0 = (int64_t)blockIdx.x * kColTile; j0 < n; j0 += (int64_t)gridDim.x * kColTile) {
        const int64_t j = j0 + tx;
        double ag = 0.0, ab = 0.0;
        if (j < n) {
            for (int64_t r = ty; r < rows; r += kRowGroups) {
                const float d = dy[r * n + j];
                const float xh = __fmul_rn(__fsub_rn(x[r * n + j], mean[r]), rstd[r]);
                ag += (double)d * (double)xh;
                ab += (double)d;
            }
        }
        sg[ty][tx] = ag;
        sb[ty][tx] = ab;
        __syncthreads();
        if (ty == 0 && j < n) {
            double tg = 0.0, tb = 0.0;
            for (int i = 0; i < kRowGroups; ++i) {
                tg += sg[i][tx];
                tb += sb[i][tx];
            }
            if (dgamma)
                dgamma[j] = (float)((double)dgamma[j] + tg);
            if (dbeta)
                dbeta[j] = (float)((double)dbeta[j] + tb);
        }
        __syncthreads();
    }
}

/* dgamma's and dbeta's terms of row r, column j, for col_sums_split */
struct ln_param_terms {
    int64_t n;
    const float *x, *dy, *mean, *rstd;
    __device__ void operator()(int64_t r, int64_t j, double &g, double &b) const
    {
        const float d = dy[r * n + j];
        const float xh = __fmul_rn(__fsub_rn(x[r * n + j], mean[r]), rstd[r]);
        g += (double)d * (double)xh;
        b += (double)d;
    }
};

} /* namespace */

namespace nnt_cu {
int norm_split = 0;
}

extern "C" void nnt_cuda_set_norm_split(int on)
{
    nnt_cu::norm_split = on != 0;
}

extern "C" int nnt_cuda_layernorm_fwd_f32(int64_t rows, int64_t n, float eps, const float *x,
                                          const float *gamma, const float *beta, float *y,
                                          float *mean, float *rstd, cudaStream_t stream)
{
    if (rows < 0 || n < 0)
        return -1;
    if (rows == 0 || n == 0)
        return 0;
    const unsigned blocks = warp_row_blocks(rows, kWarpsPerBlock);
    ln_fwd_kernel<<<blocks, 32 * kWarpsPerBlock, 0, stream>>>(rows, n, eps, x, gamma,
                                                                        beta, y, mean, rstd);
    return launch_status();
}

extern "C" int nnt_cuda_layernorm_bwd_f32(int64_t rows, int64_t n, const float *x,
                                          const float *dy, const float *gamma,
                                          const float *mean, const float *rstd, float *dx,
                                          float *dgamma, float *dbeta, cudaStream_t stream)
{
    if (rows < 0 || n < 0)
        return -1;
    if (rows == 0 || n == 0)
        return 0;
    const unsigned blocks = warp_row_blocks(rows, kWarpsPerBlock);
    ln_bwd_dx_kernel<<<blocks, 32 * kWarpsPerBlock, 0, stream>>>(rows, n, x, dy, gamma,
                                                                           mean, rstd, dx);
    int ret = launch_status();
    if (ret || (!dgamma && !dbeta))
        return ret;
    if (norm_split) {
        const ln_param_terms t = {n, x, dy, mean, rstd};
        if ((ret = col_sums_split(rows, n, t, dgamma, dbeta, stream)) <= 0)
            return ret;
    }
    int64_t cb = (n + kColTile - 1) / kColTile;
    if (cb > 65535)
        cb = 65535;
    ln_bwd_params_kernel<<<(unsigned)cb, dim3(kColTile, kRowGroups), 0, stream>>>(
        rows, n, x, dy, mean, rstd, dgamma, dbeta);
    return launch_status();
}
