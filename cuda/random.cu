/* nnt CUDA kernels: deterministic random fill, bit-identical to nnt_cpu_fill_random_f32.
 *
 * Element with global row-major linear index idx (uint64):
 *   z = seed + (idx + 1) * 0x9E3779B97F4A7C15; z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9;
 *   z = (z ^ (z >> 27)) * 0x94D049BB133111EB; z ^= z >> 31;
 *   u1 = ((z >> 40) + 0.5) * 2^-24; u2 = (((z >> 8) & 0xFFFFFF) + 0.5) * 2^-24   (exact)
 *   dist 0: (float)(a + (b - a) * u1)
 *   dist 1: (float)(a + b * sqrt(-2 log u1) * cos(2 pi u2))
 * All arithmetic in double with explicit round-to-nearest intrinsics so that nvcc cannot
 * contract a multiply and an add into an FMA (the CPU rounds each operation separately). */
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

__global__ void fill_random_kernel(TileDesc td, int64_t total, uint64_t seed, int dist, float a,
                                   float b, float *__restrict__ out)
{
    const double two_pi = 2.0 * 3.14159265358979323846; /* == 2.0 * M_PI exactly */
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
        const double u1 = ((double)(z >> 40) + 0.5) * 0x1p-24;
        double val;
        if (dist == 0) {
            val = __dadd_rn(da, __dmul_rn(__dsub_rn(db, da), u1));
        } else {
            const double u2 = ((double)((z >> 8) & 0xFFFFFFULL) + 0.5) * 0x1p-24;
            const double r = sqrt(__dmul_rn(-2.0, log(u1)));
            const double c = cos(__dmul_rn(two_pi, u2));
            val = __dadd_rn(da, __dmul_rn(__dmul_rn(db, r), c));
        }
        out[t] = (float)val;
    }
}

} /* namespace */

extern "C" int nnt_cuda_fill_random_f32(int ndim, const int64_t *global_shape,
                                        const int64_t *tile_origin, const int64_t *tile_shape,
                                        uint64_t seed, int dist, float a, float b, float *out,
                                        cudaStream_t stream)
{
    if (ndim < 1 || ndim > NNT_CUDA_MAX_NDIM || !global_shape || !tile_origin || !tile_shape ||
        (dist != 0 && dist != 1))
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
