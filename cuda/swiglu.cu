/* SPDX-License-Identifier: MIT */
/* nnt CUDA kernels: SwiGLU forward and backward (the twins of cpu/swiglu.c).
 * Grid-stride loops over int64 indices. No __restrict__: any output may be one of the
 * inputs (each element is read before it is written). expf is CUDA's (not bit-identical to
 * the C library's): results agree with the CPU to rounding. */
#include "nnt_cuda.h"
#include "kernel_util.cuh"

namespace {

using namespace nnt_cu;

__global__ void swiglu_fwd_kernel(int64_t n, const float *gate, const float *up, float *y)
{
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * blockDim.x) {
        const float g = gate[i], u = up[i];
        /* silu(g) = g / (1 + exp(-g)), then * up, rounded as on the CPU */
        y[i] = __fmul_rn(__fdiv_rn(g, __fadd_rn(1.0f, expf(-g))), u);
    }
}

__global__ void swiglu_bwd_kernel(int64_t n, const float *gate, const float *up,
                                  const float *dy, float *dgate, float *dup)
{
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * blockDim.x) {
        const float g = gate[i], u = up[i], d = dy[i];
        const float e = expf(-g);
        const float s = __fdiv_rn(1.0f, __fadd_rn(1.0f, e));
        /* silu'(g) = s (1 + g (1 - s)) */
        const float ds = __fmul_rn(s, __fadd_rn(1.0f, __fmul_rn(g, __fsub_rn(1.0f, s))));
        dgate[i] = __fmul_rn(__fmul_rn(d, u), ds);
        dup[i] = __fmul_rn(d, __fdiv_rn(g, __fadd_rn(1.0f, e)));
    }
}

} /* namespace */

extern "C" int nnt_cuda_swiglu_fwd_f32(int64_t n, const float *gate, const float *up, float *y,
                                       cudaStream_t stream)
{
    if (n < 0)
        return -1;
    if (n == 0)
        return 0;
    swiglu_fwd_kernel<<<grid_for(n), kThreads, 0, stream>>>(n, gate, up, y);
    return launch_status();
}

extern "C" int nnt_cuda_swiglu_bwd_f32(int64_t n, const float *gate, const float *up,
                                       const float *dy, float *dgate, float *dup,
                                       cudaStream_t stream)
{
    if (n < 0)
        return -1;
    if (n == 0)
        return 0;
    swiglu_bwd_kernel<<<grid_for(n), kThreads, 0, stream>>>(n, gate, up, dy, dgate, dup);
    return launch_status();
}
