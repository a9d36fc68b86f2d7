/* SPDX-License-Identifier: MIT */
/* nnt CUDA kernels: optimizer steps on one parameter block (grid-stride, elementwise). */
#include "nnt_cuda.h"
#include "kernel_util.cuh"

#include <math.h>

namespace {

using namespace nnt_cu;

/* Same operations in the same order as the CPU kernel, each rounded separately (__f*_rn
 * stop nvcc from contracting into FMAs; sqrtf and '/' are IEEE on the device), so the GPU
 * step reproduces the CPU step bit for bit when the CPU build does not contract either. */
__global__ void adam_kernel(int64_t n, float step, float inv_sqrt_bc2, float decay, float l2,
                            float beta1, float beta2, float eps, float grad_scale,
                            const float *__restrict__ g, float *__restrict__ p,
                            float *__restrict__ m, float *__restrict__ v)
{
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * blockDim.x) {
        const float p0 = p[i];
        const float gi = __fadd_rn(__fmul_rn(grad_scale, g[i]), __fmul_rn(l2, p0));
        const float pi = __fmul_rn(p0, decay);
        const float mi = __fadd_rn(__fmul_rn(beta1, m[i]), __fmul_rn(1.0f - beta1, gi));
        const float vi = __fadd_rn(__fmul_rn(beta2, v[i]), __fmul_rn(__fmul_rn(1.0f - beta2, gi), gi));
        m[i] = mi;
        v[i] = vi;
        const float denom = __fadd_rn(__fmul_rn(sqrtf(vi), inv_sqrt_bc2), eps);
        p[i] = __fsub_rn(pi, __fdiv_rn(__fmul_rn(step, mi), denom));
    }
}

__global__ void sgd_kernel(int64_t n, float lr, float momentum, float wd, float grad_scale,
                           int first_step, const float *__restrict__ g, float *__restrict__ p,
                           float *__restrict__ buf)
{
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * blockDim.x) {
        const float pi = p[i];
        const float gi = __fadd_rn(__fmul_rn(grad_scale, g[i]), __fmul_rn(wd, pi));
        float b = gi;
        if (buf) {
            if (!first_step)
                b = __fadd_rn(__fmul_rn(momentum, buf[i]), gi);
            buf[i] = b;
        }
        p[i] = __fsub_rn(pi, __fmul_rn(lr, b));
    }
}

} /* namespace */

extern "C" int nnt_cuda_adam_step_f32(int64_t n, int decoupled, float lr, float beta1,
                                      float beta2, float eps, float weight_decay, float bc1,
                                      float bc2, float grad_scale, const float *g, float *p,
                                      float *m, float *v, cudaStream_t stream)
{
    if (n < 0)
        return -1;
    if (n == 0)
        return 0;
    /* the same scalar preparation as the CPU kernel (PyTorch's formulation):
     * denom = sqrt(v) / sqrt(bc2) + eps;  p = p (1 - lr wd) - (lr / bc1) m / denom */
    const float step = lr / bc1;
    const float inv_sqrt_bc2 = 1.0f / sqrtf(bc2);
    const float decay = decoupled ? 1.0f - lr * weight_decay : 1.0f;
    const float l2 = decoupled ? 0.0f : weight_decay;
    adam_kernel<<<grid_for(n), kThreads, 0, stream>>>(n, step, inv_sqrt_bc2, decay, l2, beta1,
                                                      beta2, eps, grad_scale, g, p, m, v);
    return launch_status();
}

/* buf may be NULL (plain SGD without momentum state: p -= lr * g'). */
extern "C" int nnt_cuda_sgd_step_f32(int64_t n, float lr, float momentum, float weight_decay,
                                     float grad_scale, int first_step, const float *g, float *p,
                                     float *buf, cudaStream_t stream)
{
    if (n < 0)
        return -1;
    if (n == 0)
        return 0;
    sgd_kernel<<<grid_for(n), kThreads, 0, stream>>>(n, lr, momentum, weight_decay, grad_scale,
                                                     first_step, g, p, buf);
    return launch_status();
}
