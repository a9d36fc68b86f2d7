/* SPDX-License-Identifier: MIT */
/* nnt CUDA kernels: rotary position embedding, rotate-half pairs (the twin of cpu/rope.c).
 * One thread per pair (row, i), grid-stride over int64 indices. The frequency table (at most
 * NNT_CUDA_ROPE_MAX_N entries, a host array) travels by value in the kernel's parameters,
 * so nothing is allocated or copied. Angle, cosine and sine in double as on the CPU (CUDA's
 * cos / sin, like the C library's, are within an ulp of double), rounded to float and
 * multiplied by scale in float; the rotation in float with each operation rounded (no FMA
 * contraction), as on the CPU. */
#include "nnt_cuda.h"
#include "kernel_util.cuh"

namespace {

using namespace nnt_cu;

struct freq_table {
    float f[NNT_CUDA_ROPE_MAX_N];
};

/* No __restrict__: y_lo may be x_lo and y_hi x_hi (in place); a thread reads both values of
 * its pair before writing them, and no other thread touches them. */
/* pos NULL: row r at position pos0 + r % nt; else at pos[(r / (nh nt)) nt + r % nt], the
 * position of its token (batch row r / (nh nt) of the tile, packed examples). */
__global__ void rope_kernel(int64_t rows, int64_t nt, int64_t n, int64_t pos0,
                            const int32_t *pos, int64_t nh, int sign, float scale,
                            freq_table tab,
                            const float *x_lo, const float *x_hi, int64_t ldx, float *y_lo,
                            float *y_hi, int64_t ldy)
{
    const int64_t total = rows * n;
    for (int64_t k = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; k < total;
         k += (int64_t)gridDim.x * blockDim.x) {
        const int64_t r = k / n, i = k - r * n, t = r % nt;
        const int64_t at = pos ? (int64_t)pos[r / (nh * nt) * nt + t] : pos0 + t;
        const double a = (double)at * (double)tab.f[i];
        const float c = __fmul_rn((float)cos(a), scale);
        const float s = __fmul_rn((float)(sign < 0 ? -sin(a) : sin(a)), scale);
        const float lo = x_lo[r * ldx + i], hi = x_hi[r * ldx + i];
        y_lo[r * ldy + i] = __fsub_rn(__fmul_rn(lo, c), __fmul_rn(hi, s));
        y_hi[r * ldy + i] = __fadd_rn(__fmul_rn(hi, c), __fmul_rn(lo, s));
    }
}

} /* namespace */

/* pos NULL: nnt_cuda_rope_f32; else positions (nbh / nh, nt) on the device */
static int rope(int64_t nbh, int64_t nt, int64_t n, int64_t pos0, const int32_t *pos,
                int64_t nh, int sign, float scale, const float *inv_freq, const float *x_lo,
                const float *x_hi, int64_t ldx, float *y_lo, float *y_hi, int64_t ldy,
                cudaStream_t stream)
{
    if (nbh < 0 || nt < 0 || n < 0 || n > NNT_CUDA_ROPE_MAX_N || ldx < n || ldy < n ||
        (pos && (nh <= 0 || nbh % nh)))
        return -1;
    if (nbh == 0 || nt == 0 || n == 0)
        return 0;
    freq_table tab;
    for (int64_t i = 0; i < n; i++)
        tab.f[i] = inv_freq[i];
    for (int64_t i = n; i < NNT_CUDA_ROPE_MAX_N; i++)
        tab.f[i] = 0.0f;
    rope_kernel<<<grid_for(nbh * nt * n), kThreads, 0, stream>>>(
        nbh * nt, nt, n, pos0, pos, nh, sign, scale, tab, x_lo, x_hi, ldx, y_lo, y_hi, ldy);
    return launch_status();
}

extern "C" int nnt_cuda_rope_f32(int64_t nbh, int64_t nt, int64_t n, int64_t pos0, int sign,
                                 float scale, const float *inv_freq, const float *x_lo,
                                 const float *x_hi, int64_t ldx, float *y_lo, float *y_hi,
                                 int64_t ldy, cudaStream_t stream)
{
    return rope(nbh, nt, n, pos0, NULL, 1, sign, scale, inv_freq, x_lo, x_hi, ldx, y_lo, y_hi,
                ldy, stream);
}

extern "C" int nnt_cuda_rope_pos_f32(int64_t nb, int64_t nh, int64_t nt, int64_t n,
                                     const int32_t *pos, int sign, float scale,
                                     const float *inv_freq,
                                     const float *x_lo, const float *x_hi, int64_t ldx,
                                     float *y_lo, float *y_hi, int64_t ldy, cudaStream_t stream)
{
    if (!pos || nb < 0 || nh <= 0)
        return -1;
    return rope(nb * nh, nt, n, 0, pos, nh, sign, scale, inv_freq, x_lo, x_hi, ldx, y_lo, y_hi,
                ldy, stream);
}
