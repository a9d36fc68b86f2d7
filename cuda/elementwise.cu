/* SPDX-License-Identifier: MIT */
/* nnt CUDA kernels: elementwise ops, GELU (tanh and exact), broadcast add, bias+GELU epilogue.
 * Grid-stride loops over int64 indices; every wrapper only enqueues work on `stream`. */
#include "nnt_cuda.h"
#include "kernel_util.cuh"

namespace {

using namespace nnt_cu;

/* GELU, tanh approximation, in the sigmoid form used by the CPU kernel:
 * 0.5 (1 + tanh(u)) == sigmoid(2u), u = sqrt(2/pi) (x + 0.044715 x^3); this keeps full
 * relative accuracy for x << 0 where 1 + tanh(u) would cancel. */
__device__ __forceinline__ float gelu_sig(float x)
{
    const float u = 0.7978845608028654f * x * (1.0f + 0.044715f * x * x);
    return 1.0f / (1.0f + expf(-2.0f * u));
}

__device__ __forceinline__ float gelu_f(float x)
{
    return x * gelu_sig(x);
}

/* gelu'(x) = sig + 2 x sig (1 - sig) u'(x),  u' = sqrt(2/pi) (1 + 3 * 0.044715 x^2) */
__device__ __forceinline__ float gelu_grad_f(float x)
{
    const float sig = gelu_sig(x);
    const float du = 0.7978845608028654f * (1.0f + 3.0f * 0.044715f * x * x);
    return sig + 2.0f * x * sig * (1.0f - sig) * du;
}

/* GELU, exact (erf) form: gelu(x) = x Phi(x), Phi = normcdff (5 ulp, CUDA's documented
 * bound); gelu'(x) = Phi(x) + x phi(x), phi(x) = exp(-x^2 / 2) / sqrt(2 pi) with x^2 / 2 taken
 * exactly as h + l (its rounding would cost up to x^2 / 2 ulp in the tail), as the CPU kernel
 * does. x is clamped to +-16, where Phi(-16) and phi(16) are 0 in float: gelu(-inf) = -0,
 * gelu'(+inf) = 1 and gelu'(-inf) = 0, not NaN; NaN stays NaN (the comparisons are false for
 * it). */
__device__ __forceinline__ float gelu_erf_clamp(float x)
{
    return x < -16.0f ? -16.0f : x > 16.0f ? 16.0f : x;
}

__device__ __forceinline__ float gelu_erf_f(float x)
{
    const float xm = x < -16.0f ? -16.0f : x;
    return __fmul_rn(xm, normcdff(xm));
}

__device__ __forceinline__ float gelu_erf_grad_f(float x)
{
    const float xc = gelu_erf_clamp(x), hx = 0.5f * xc;
    const float h = __fmul_rn(hx, xc), l = fmaf(hx, xc, -h);   /* h + l = x^2 / 2 */
    const float e = expf(-h);
    const float pdf = __fmul_rn(fmaf(-e, l, e), 0.3989422804014327f);   /* e^-h (1 - l) */
    return fmaf(xc, pdf, normcdff(xc));
}

/* kind: 0 the tanh approximation, 1 the exact GELU */
template <int Erf> __device__ __forceinline__ float gelu_any(float x)
{
    return Erf ? gelu_erf_f(x) : gelu_f(x);
}

template <int Erf> __device__ __forceinline__ float gelu_grad_any(float x)
{
    return Erf ? gelu_erf_grad_f(x) : gelu_grad_f(x);
}

template <typename T> __global__ void fill_kernel(int64_t n, T value, T *x)
{
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * blockDim.x)
        x[i] = value;
}

__global__ void scale_kernel(int64_t n, float alpha, float *x)
{
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * blockDim.x)
        x[i] *= alpha;
}

__global__ void axpbyz_kernel(int64_t n, float alpha, const float *__restrict__ x, float beta,
                              const float *y, float *z)   /* z may be y */
{
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * blockDim.x) {
        /* explicit rounding: same operations as the CPU kernel, no FMA contraction */
        if (beta == 0.0f)
            z[i] = alpha * x[i];
        else if (beta == 1.0f)
            z[i] = __fadd_rn(y[i], __fmul_rn(alpha, x[i]));
        else
            z[i] = __fadd_rn(__fmul_rn(alpha, x[i]), __fmul_rn(beta, y[i]));
    }
}

template <int Erf>
__global__ void gelu_fwd_kernel(int64_t n, const float *x, float *y)  /* may run in place */
{
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * blockDim.x)
        y[i] = gelu_any<Erf>(x[i]);
}

template <int Erf>
__global__ void gelu_bwd_kernel(int64_t n, const float *x, const float *dy,
                                float *dx)  /* may run in place */
{
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * blockDim.x)
        dx[i] = dy[i] * gelu_grad_any<Erf>(x[i]);
}

__global__ void add_bcast_kernel(int64_t outer, int64_t inner, const float *__restrict__ x,
                                 float *__restrict__ y, int64_t ldy)
{
    int64_t total = outer * inner;
    for (int64_t t = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; t < total;
         t += (int64_t)gridDim.x * blockDim.x) {
        int64_t o = t / inner, i = t - o * inner;
        y[o * ldy + i] += x[i];
    }
}

template <int Erf>
__global__ void bias_gelu_kernel(int64_t m, int64_t n, const float *__restrict__ bias,
                                 float *__restrict__ pre, float *__restrict__ out)
{
    int64_t total = m * n;
    for (int64_t t = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; t < total;
         t += (int64_t)gridDim.x * blockDim.x) {
        float p = pre[t];
        if (bias) {
            p += bias[t % n];
            pre[t] = p;
        }
        out[t] = gelu_any<Erf>(p);
    }
}

__global__ void geglu_fwd_kernel(int64_t n, const float *gate, const float *up, float *y)
{
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * blockDim.x) {
        const float g = gate[i], u = up[i];
        y[i] = __fmul_rn(gelu_f(g), u);
    }
}

__global__ void geglu_bwd_kernel(int64_t n, const float *gate, const float *up,
                                 const float *dy, float *dgate, float *dup)
{
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * blockDim.x) {
        const float g = gate[i], u = up[i], d = dy[i];
        dgate[i] = __fmul_rn(__fmul_rn(d, u), gelu_grad_f(g));
        dup[i] = __fmul_rn(d, gelu_f(g));
    }
}

__global__ void softcap_fwd_kernel(int64_t n, float cap, const float *x, float *y)
{
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * blockDim.x)
        y[i] = __fmul_rn(tanhf(__fdiv_rn(x[i], cap)), cap);
}

__global__ void softcap_bwd_kernel(int64_t n, float cap, const float *x, const float *dy,
                                   float *dx)
{
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * blockDim.x) {
        const float t = tanhf(__fdiv_rn(x[i], cap));
        dx[i] = __fmul_rn(dy[i], __fsub_rn(1.0f, __fmul_rn(t, t)));
    }
}

/* The launches of the GELU kernels of either form (Erf 0: tanh, 1: exact) */
template <int Erf> int gelu_fwd(int64_t n, const float *x, float *y, cudaStream_t stream)
{
    if (n <= 0)
        return n < 0 ? -1 : 0;
    gelu_fwd_kernel<Erf><<<grid_for(n), kThreads, 0, stream>>>(n, x, y);
    return launch_status();
}

template <int Erf>
int gelu_bwd(int64_t n, const float *x, const float *dy, float *dx, cudaStream_t stream)
{
    if (n <= 0)
        return n < 0 ? -1 : 0;
    gelu_bwd_kernel<Erf><<<grid_for(n), kThreads, 0, stream>>>(n, x, dy, dx);
    return launch_status();
}

template <int Erf>
int bias_gelu(int64_t m, int64_t n, const float *bias, float *pre, float *out,
              cudaStream_t stream)
{
    if (m < 0 || n < 0)
        return -1;
    if (m == 0 || n == 0)
        return 0;
    bias_gelu_kernel<Erf><<<grid_for(m * n), kThreads, 0, stream>>>(m, n, bias, pre, out);
    return launch_status();
}

} /* namespace */

extern "C" {

int nnt_cuda_geglu_fwd_f32(int64_t n, const float *gate, const float *up, float *y,
                           cudaStream_t stream)
{
    if (n <= 0)
        return n < 0 ? -1 : 0;
    geglu_fwd_kernel<<<grid_for(n), kThreads, 0, stream>>>(n, gate, up, y);
    return launch_status();
}

int nnt_cuda_geglu_bwd_f32(int64_t n, const float *gate, const float *up, const float *dy,
                           float *dgate, float *dup, cudaStream_t stream)
{
    if (n <= 0)
        return n < 0 ? -1 : 0;
    geglu_bwd_kernel<<<grid_for(n), kThreads, 0, stream>>>(n, gate, up, dy, dgate, dup);
    return launch_status();
}

int nnt_cuda_softcap_fwd_f32(int64_t n, float cap, const float *x, float *y, cudaStream_t stream)
{
    if (n <= 0 || !(cap > 0.0f))
        return n < 0 || !(cap > 0.0f) ? -1 : 0;
    softcap_fwd_kernel<<<grid_for(n), kThreads, 0, stream>>>(n, cap, x, y);
    return launch_status();
}

int nnt_cuda_softcap_bwd_f32(int64_t n, float cap, const float *x, const float *dy, float *dx,
                             cudaStream_t stream)
{
    if (n <= 0 || !(cap > 0.0f))
        return n < 0 || !(cap > 0.0f) ? -1 : 0;
    softcap_bwd_kernel<<<grid_for(n), kThreads, 0, stream>>>(n, cap, x, dy, dx);
    return launch_status();
}


int nnt_cuda_fill_f32(int64_t n, float value, float *x, cudaStream_t stream)
{
    if (n <= 0)
        return n < 0 ? -1 : 0;
    fill_kernel<float><<<grid_for(n), kThreads, 0, stream>>>(n, value, x);
    return launch_status();
}

int nnt_cuda_fill_i32(int64_t n, int32_t value, int32_t *x, cudaStream_t stream)
{
    if (n <= 0)
        return n < 0 ? -1 : 0;
    fill_kernel<int32_t><<<grid_for(n), kThreads, 0, stream>>>(n, value, x);
    return launch_status();
}

int nnt_cuda_fill_u16(int64_t n, uint16_t value, uint16_t *x, cudaStream_t stream)
{
    if (n <= 0)
        return n < 0 ? -1 : 0;
    fill_kernel<uint16_t><<<grid_for(n), kThreads, 0, stream>>>(n, value, x);
    return launch_status();
}

int nnt_cuda_scale_f32(int64_t n, float alpha, float *x, cudaStream_t stream)
{
    if (n <= 0)
        return n < 0 ? -1 : 0;
    scale_kernel<<<grid_for(n), kThreads, 0, stream>>>(n, alpha, x);
    return launch_status();
}

int nnt_cuda_axpbyz_f32(int64_t n, float alpha, const float *x, float beta, const float *y,
                        float *z, cudaStream_t stream)
{
    if (n <= 0)
        return n < 0 ? -1 : 0;
    axpbyz_kernel<<<grid_for(n), kThreads, 0, stream>>>(n, alpha, x, beta, y, z);
    return launch_status();
}

int nnt_cuda_axpby_f32(int64_t n, float alpha, const float *x, float beta, float *y,
                       cudaStream_t stream)
{
    return nnt_cuda_axpbyz_f32(n, alpha, x, beta, y, y, stream);
}

int nnt_cuda_gelu_fwd_f32(int64_t n, const float *x, float *y, cudaStream_t stream)
{
    return gelu_fwd<0>(n, x, y, stream);
}

int nnt_cuda_gelu_bwd_f32(int64_t n, const float *x, const float *dy, float *dx,
                          cudaStream_t stream)
{
    return gelu_bwd<0>(n, x, dy, dx, stream);
}

int nnt_cuda_gelu_erf_fwd_f32(int64_t n, const float *x, float *y, cudaStream_t stream)
{
    return gelu_fwd<1>(n, x, y, stream);
}

int nnt_cuda_gelu_erf_bwd_f32(int64_t n, const float *x, const float *dy, float *dx,
                              cudaStream_t stream)
{
    return gelu_bwd<1>(n, x, dy, dx, stream);
}

int nnt_cuda_add_bcast_f32(int64_t outer, int64_t inner, const float *x, float *y, int64_t ldy,
                           cudaStream_t stream)
{
    if (outer < 0 || inner < 0 || (outer > 1 && ldy < inner))
        return -1;
    if (outer == 0 || inner == 0)
        return 0;
    add_bcast_kernel<<<grid_for(outer * inner), kThreads, 0, stream>>>(outer, inner, x, y, ldy);
    return launch_status();
}

int nnt_cuda_bias_gelu_f32(int64_t m, int64_t n, const float *bias, float *pre, float *out,
                           cudaStream_t stream)
{
    return bias_gelu<0>(m, n, bias, pre, out, stream);
}

int nnt_cuda_bias_gelu_erf_f32(int64_t m, int64_t n, const float *bias, float *pre,
                               float *out, cudaStream_t stream)
{
    return bias_gelu<1>(m, n, bias, pre, out, stream);
}

} /* extern "C" */
