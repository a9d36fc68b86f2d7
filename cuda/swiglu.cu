/* SPDX-License-Identifier: MIT */
/* nnt CUDA kernels: SwiGLU and gpt-oss's clamped SwiGLU, forward and backward (the twins of
 * cpu/swiglu.c).
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

/* gpt-oss's clamps as the CPU writes them (a NaN stays NaN; fminf would drop it) */
__device__ __forceinline__ float clamp_gate(float g, float limit)
{
    return g > limit ? limit : g;
}

__device__ __forceinline__ float clamp_up(float u, float limit)
{
    const float m = u > limit ? limit : u;
    return m < -limit ? -limit : m;
}

__global__ void swiglu_clamp_fwd_kernel(int64_t n, float alpha, float limit, const float *gate,
                                        const float *up, float *y)
{
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * blockDim.x) {
        const float gc = clamp_gate(gate[i], limit);
        const float u1 = __fadd_rn(clamp_up(up[i], limit), 1.0f);
        /* gc sigmoid(alpha gc) (uc + 1), rounded as on the CPU */
        const float s = __fdiv_rn(1.0f, __fadd_rn(1.0f, expf(-__fmul_rn(alpha, gc))));
        y[i] = __fmul_rn(__fmul_rn(gc, s), u1);
    }
}

__global__ void swiglu_clamp_bwd_kernel(int64_t n, float alpha, float limit, const float *gate,
                                        const float *up, const float *dy, float *dgate,
                                        float *dup)
{
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * blockDim.x) {
        const float g = gate[i], u = up[i], d = dy[i];
        const float gc = clamp_gate(g, limit);
        const float u1 = __fadd_rn(clamp_up(u, limit), 1.0f);
        const float a = __fmul_rn(alpha, gc);
        const float s = __fdiv_rn(1.0f, __fadd_rn(1.0f, expf(-a)));
        /* d/dgc [gc sigmoid(alpha gc)] = s (1 + a (1 - s)); nothing through the clamps at
         * or beyond the limits (torch.clamp's gradient) */
        const float ds = __fmul_rn(s, __fadd_rn(1.0f, __fmul_rn(a, __fsub_rn(1.0f, s))));
        dgate[i] = g < limit ? __fmul_rn(__fmul_rn(d, u1), ds) : 0.0f;
        dup[i] = -limit < u && u < limit ? __fmul_rn(d, __fmul_rn(gc, s)) : 0.0f;
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

extern "C" int nnt_cuda_swiglu_clamp_fwd_f32(int64_t n, float alpha, float limit,
                                             const float *gate, const float *up, float *y,
                                             cudaStream_t stream)
{
    if (n < 0)
        return -1;
    if (n == 0)
        return 0;
    swiglu_clamp_fwd_kernel<<<grid_for(n), kThreads, 0, stream>>>(n, alpha, limit, gate, up, y);
    return launch_status();
}

extern "C" int nnt_cuda_swiglu_clamp_bwd_f32(int64_t n, float alpha, float limit,
                                             const float *gate, const float *up,
                                             const float *dy, float *dgate, float *dup,
                                             cudaStream_t stream)
{
    if (n < 0)
        return -1;
    if (n == 0)
        return 0;
    swiglu_clamp_bwd_kernel<<<grid_for(n), kThreads, 0, stream>>>(n, alpha, limit, gate, up,
                                                                  dy, dgate, dup);
    return launch_status();
}
