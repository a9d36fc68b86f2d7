/* SPDX-License-Identifier: MIT */
/* nnt CUDA kernels: deterministic random fill, bit-identical to nnt_cpu_fill_random_f32.
 *
 * Element with global row-major linear index idx (uint64):
 *   z = seed + (idx + 1) * 0x9E3779B97F4A7C15; z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9;
 *   z = (z ^ (z >> 27)) * 0x94D049BB133111EB; z ^= z >> 31;
 *   dist 0: u = ((z >> 40) + 0.5) * 2^-24 (exact), (float)(a + (b - a) * u) in double
 *   dist 1: u1 = ((z >> 40) + 1) * 2^-24, u2 = ((z >> 8) & 0xFFFFFF) * 2^-24 (exact in
 *           float), a + b sqrt(-2 log u1) cos(2 pi u2) in float with cpu/random.c's
 *           polynomials (log by exponent and mantissa, cos by quadrant), each multiply-add
 *           fused and every other step one correctly rounded operation.
 * Explicit round-to-nearest intrinsics throughout, so that nvcc neither contracts a multiply
 * and an add the CPU keeps apart nor uses approximate division or square root. */
#include "nnt_cuda.h"
#include "kernel_util.cuh"

namespace {

using namespace nnt_cu;

struct TileDesc {
    int ndim;
    int64_t tile[NNT_CUDA_MAX_NDIM];
    int64_t origin[NNT_CUDA_MAX_NDIM];
    uint64_t gstride[NNT_CUDA_MAX_NDIM]; /* row-major strides of the global tensor */
};

__device__ __forceinline__ uint64_t mix(uint64_t seed, uint64_t idx)
{
    uint64_t z = seed + (idx + 1ULL) * 0x9E3779B97F4A7C15ULL;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    z ^= z >> 31;
    return z;
}

__constant__ float LOG_P[9] = {7.0376836292e-2f,  -1.1514610310e-1f, 1.1676998740e-1f,
                               -1.2420140846e-1f, 1.4249322787e-1f,  -1.6668057665e-1f,
                               2.0000714765e-1f,  -2.4999993993e-1f, 3.3333331174e-1f};

/* log(x), x in (0, 1]: cpu/random.c's log_unit */
__device__ __forceinline__ float log_unit(float x)
{
    unsigned bits = __float_as_uint(x);
    int e = (int)(bits >> 23) - 126;
    float m = __uint_as_float((bits & 0x007FFFFFu) | 0x3F000000u);
    const int small = m < 0.70710678118654752f;
    e -= small;
    m = __fsub_rn(small ? __fadd_rn(m, m) : m, 1.0f);
    float z = __fmul_rn(m, m), p = LOG_P[0];
    for (int i = 1; i < 9; i++)
        p = __fmaf_rn(p, m, LOG_P[i]);
    float y = __fmul_rn(__fmul_rn(p, m), z), ef = (float)e;
    y = __fmaf_rn(ef, -2.12194440e-4f, y);
    y = __fmaf_rn(-0.5f, z, y);
    return __fmaf_rn(ef, 0.693359375f, __fadd_rn(m, y));
}

/* cos(2 pi u), u in [0, 1): cpu/random.c's cos_turn */
__device__ __forceinline__ float cos_turn(float u)
{
    float w = __fmul_rn(4.0f, u), k = rintf(w), f = __fsub_rn(w, k);
    float t = __fmul_rn(f, 1.57079632679489662f), s = __fmul_rn(t, t);
    float ps = __fmaf_rn(__fmaf_rn(-1.9515295891e-4f, s, 8.3321608736e-3f), s,
                         -1.6666654611e-1f);
    float sin_t = __fmaf_rn(__fmul_rn(ps, s), t, t);
    float pc = __fmaf_rn(__fmaf_rn(2.443315711809948e-5f, s, -1.388731625493765e-3f), s,
                         4.166664568298827e-2f);
    float cos_t = __fmaf_rn(__fmul_rn(pc, s), s, __fmaf_rn(-0.5f, s, 1.0f));
    const int q = (int)k & 3;
    const float v = (q & 1) ? sin_t : cos_t;
    return (q == 1 || q == 2) ? -v : v;
}

__global__ void fill_random_kernel(TileDesc td, int64_t total, uint64_t seed, int dist, float a,
                                   float b, float *__restrict__ out)
{
    const double da = (double)a, db = (double)b;
    for (int64_t t = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; t < total;
         t += (int64_t)gridDim.x * blockDim.x) {
        int64_t rem = t;
        uint64_t idx = 0;
        for (int d = td.ndim - 1; d >= 0; --d) {
            int64_t i = rem % td.tile[d];
            rem /= td.tile[d];
            idx += (uint64_t)(td.origin[d] + i) * td.gstride[d];
        }
        const uint64_t z = mix(seed, idx);
        if (dist == 2) {   /* dropout in place, as the CPU kernel */
            const double u = ((double)(z >> 40) + 0.5) * 0x1p-24;
            out[t] = u < da ? 0.0f : __fmul_rn(out[t], b);
        } else if (dist == 0) {
            const double u = ((double)(z >> 40) + 0.5) * 0x1p-24;
            out[t] = (float)__dadd_rn(da, __dmul_rn(__dsub_rn(db, da), u));
        } else {
            const float u1 = __fmul_rn((float)((int)(z >> 40) + 1), 0x1p-24f);
            const float u2 = __fmul_rn((float)(int)((z >> 8) & 0xFFFFFFULL), 0x1p-24f);
            const float r = __fsqrt_rn(__fmul_rn(-2.0f, log_unit(u1)));
            out[t] = __fmaf_rn(__fmul_rn(b, r), cos_turn(u2), a);
        }
    }
}

} /* namespace */

extern "C" int nnt_cuda_fill_random_f32(int ndim, const int64_t *global_shape,
                                        const int64_t *tile_origin, const int64_t *tile_shape,
                                        uint64_t seed, int dist, float a, float b, float *out,
                                        cudaStream_t stream)
{
    if (ndim < 1 || ndim > NNT_CUDA_MAX_NDIM || !global_shape || !tile_origin || !tile_shape ||
        (dist != 0 && dist != 1 && dist != 2))
        return -1;
    TileDesc td;
    td.ndim = ndim;
    int64_t total = 1;
    uint64_t stride = 1;
    for (int d = ndim - 1; d >= 0; --d) {
        if (tile_shape[d] < 0 || tile_origin[d] < 0 ||
            tile_origin[d] + tile_shape[d] > global_shape[d])
            return -1;
        td.tile[d] = tile_shape[d];
        td.origin[d] = tile_origin[d];
        td.gstride[d] = stride;
        stride *= (uint64_t)global_shape[d];
        total *= tile_shape[d];
    }
    if (total == 0)
        return 0;
    int64_t blocks = (total + kThreads - 1) / kThreads;
    if (blocks > (int64_t)1 << 19)
        blocks = (int64_t)1 << 19;
    fill_random_kernel<<<(unsigned)blocks, kThreads, 0, stream>>>(td, total, seed, dist, a, b,
                                                                  out);
    cudaError_t e = cudaGetLastError();
    return e == cudaSuccess ? 0 : -(int)e;
}
