/* SPDX-License-Identifier: MIT */
/* nnt CUDA kernels: mixture of experts (the twins of cpu/moe.c).
 *
 * Routing: one thread per token, running the same per-token code as the CPU
 * (cpu/moe_route.h: softmax, torch.topk's CPU selection with its tie rule, renormalisation),
 * its E (value, index) pairs of scratch in shared memory; the probabilities differ from the
 * CPU's by expf's rounding only, and equal probabilities choose the same experts.
 *
 * Row maps (m triples (a, b, slot) in device memory): gather and scatter-add give the CPU's
 * bits (one product, one sum per element, rounded as on the CPU; no FMA contraction).
 * Deterministic without atomics: the rows b a scatter-add writes are distinct within one
 * call (an expert's rows hold each token once), so each destination element is written by
 * one thread; the calls on one destination tile are ordered by StarPU (mode RW) in the
 * order they were submitted, expert after expert, as on the CPU. weight_grad and the
 * shared gate's backward: one warp per row, the sum in double in a fixed order. */
#include "nnt_cuda.h"
#include "nnt_cpu.h"   /* NNT_MOE_MAX_EXPERTS */
#include "kernel_util.cuh"
#include "moe_route.h"

namespace {

using namespace nnt_cu;

const int kWarpsPerBlock = 8;
/* shared memory for the routing's pairs: 48 KiB, the default without opt-in */
const int kRouteShared = 48 * 1024;

__global__ void route_kernel(int64_t n, int64_t E, int64_t k, int norm, const float *logits,
                             float *probs, int32_t *idx, float *w)
{
    extern __shared__ moe_pair pairs[];
    moe_pair *q = pairs + (int64_t)threadIdx.x * E;
    for (int64_t t = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; t < n;
         t += (int64_t)gridDim.x * blockDim.x)
        nnt_moe_route_row(E, k, norm, logits + t * E, probs + t * E, idx + t * k, w + t * k,
                          q);
}

__global__ void route_bwd_kernel(int64_t n, int64_t E, int64_t k, int norm, const float *probs,
                                 const int32_t *idx, const float *w, const float *dw,
                                 const float *aux, float *dlogits)
{
    for (int64_t t = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; t < n;
         t += (int64_t)gridDim.x * blockDim.x)
        nnt_moe_route_bwd_row(E, k, norm, probs + t * E, idx + t * k, w + t * k, dw + t * k,
                              aux, dlogits + t * E);
}

/* one thread per element of the m rows of width */
__global__ void gather_kernel(int64_t width, int64_t m, const int32_t *map, const float *src,
                              const float *w, int64_t k, float *dst)
{
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < m * width;
         i += (int64_t)gridDim.x * blockDim.x) {
        const int64_t r = i / width, c = i % width;
        const float s = src[(int64_t)map[3 * r] * width + c];
        dst[(int64_t)map[3 * r + 1] * width + c] =
            w ? __fmul_rn(w[(int64_t)map[3 * r] * k + map[3 * r + 2]], s) : s;
    }
}

__global__ void scatter_add_kernel(int64_t width, int64_t m, const int32_t *map,
                                   const float *src, const float *w, int64_t k, float *dst)
{
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < m * width;
         i += (int64_t)gridDim.x * blockDim.x) {
        const int64_t r = i / width, c = i % width, b = map[3 * r + 1];
        const float a = w ? w[b * k + map[3 * r + 2]] : 1.0f;
        float *d = dst + b * width + c;
        *d = __fadd_rn(*d, __fmul_rn(a, src[(int64_t)map[3 * r] * width + c]));
    }
}

/* one warp per map row */
__global__ void weight_grad_kernel(int64_t width, int64_t m, const int32_t *map,
                                   const float *dy, const float *y, int64_t k, float *dw)
{
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    for (int64_t r = (int64_t)blockIdx.x * kWarpsPerBlock + warp; r < m;
         r += (int64_t)gridDim.x * kWarpsPerBlock) {
        const float *g = dy + (int64_t)map[3 * r] * width;
        const float *v = y + (int64_t)map[3 * r + 1] * width;
        double dot = 0.0;
        for (int64_t c = lane; c < width; c += 32)
            dot += (double)g[c] * v[c];
        dot = warp_sum(dot);
        if (lane == 0) {
            float *d = dw + (int64_t)map[3 * r] * k + map[3 * r + 2];
            *d = __fadd_rn(*d, (float)dot);
        }
    }
}

__device__ __forceinline__ float sigmoid(float z)
{
    return __fdiv_rn(1.0f, __fadd_rn(1.0f, expf(-z)));
}

__global__ void shared_add_kernel(int64_t n, int64_t width, const float *z, const float *s,
                                  float *y)
{
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n * width;
         i += (int64_t)gridDim.x * blockDim.x)
        y[i] = __fadd_rn(y[i], __fmul_rn(sigmoid(z[i / width]), s[i]));
}

/* one warp per row */
__global__ void shared_bwd_kernel(int64_t n, int64_t width, int accumulate, const float *z,
                                  const float *s, const float *dy, float *ds, float *dz)
{
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    for (int64_t r = (int64_t)blockIdx.x * kWarpsPerBlock + warp; r < n;
         r += (int64_t)gridDim.x * kWarpsPerBlock) {
        const float g = sigmoid(z[r]);
        double dot = 0.0;
        for (int64_t c = lane; c < width; c += 32) {
            const int64_t i = r * width + c;
            const float d = dy[i];
            ds[i] = __fmul_rn(g, d);
            dot += (double)d * s[i];
        }
        dot = warp_sum(dot);
        if (lane == 0) {
            const float d = (float)((double)g * (1.0 - (double)g) * dot);
            dz[r] = accumulate ? __fadd_rn(dz[r], d) : d;
        }
    }
}

} /* namespace */

extern "C" int nnt_cuda_moe_route_f32(int64_t n, int64_t E, int64_t k, int norm,
                                      const float *logits, float *probs, int32_t *idx,
                                      float *w, cudaStream_t stream)
{
    if (n < 0 || E < 1 || E > NNT_MOE_MAX_EXPERTS || k < 1 || k > E)
        return n == 0 ? 0 : -1;
    if (n == 0)
        return 0;
    int64_t threads = kRouteShared / (E * (int64_t)sizeof(moe_pair));
    threads = threads > 128 ? 128 : threads < 1 ? 1 : threads;
    int64_t blocks = (n + threads - 1) / threads;
    blocks = blocks > 65535 ? 65535 : blocks;
    route_kernel<<<(unsigned)blocks, (unsigned)threads,
                   (size_t)(threads * E) * sizeof(moe_pair), stream>>>(n, E, k, norm, logits,
                                                                       probs, idx, w);
    return launch_status();
}

extern "C" int nnt_cuda_moe_route_bwd_f32(int64_t n, int64_t E, int64_t k, int norm,
                                          const float *probs, const int32_t *idx,
                                          const float *w, const float *dw, const float *aux,
                                          float *dlogits, cudaStream_t stream)
{
    if (n < 0 || E < 1 || k < 1 || k > E)
        return -1;
    if (n == 0)
        return 0;
    const unsigned threads = 128;
    int64_t blocks = (n + threads - 1) / threads;
    blocks = blocks > 65535 ? 65535 : blocks;
    route_bwd_kernel<<<(unsigned)blocks, threads, 0, stream>>>(n, E, k, norm, probs, idx, w,
                                                                dw, aux, dlogits);
    return launch_status();
}

extern "C" int nnt_cuda_moe_gather_f32(int64_t width, int64_t m, const int32_t *map,
                                       const float *src, const float *w, int64_t k,
                                       float *dst, cudaStream_t stream)
{
    if (width < 0 || m < 0)
        return -1;
    if (width == 0 || m == 0)
        return 0;
    gather_kernel<<<grid_for(m * width), kThreads, 0, stream>>>(width, m, map, src, w, k, dst);
    return launch_status();
}

extern "C" int nnt_cuda_moe_scatter_add_f32(int64_t width, int64_t m, const int32_t *map,
                                            const float *src, const float *w, int64_t k,
                                            float *dst, cudaStream_t stream)
{
    if (width < 0 || m < 0)
        return -1;
    if (width == 0 || m == 0)
        return 0;
    scatter_add_kernel<<<grid_for(m * width), kThreads, 0, stream>>>(width, m, map, src, w, k,
                                                                     dst);
    return launch_status();
}

extern "C" int nnt_cuda_moe_weight_grad_f32(int64_t width, int64_t m, const int32_t *map,
                                            const float *dy, const float *y, int64_t k,
                                            float *dw, cudaStream_t stream)
{
    if (width < 0 || m < 0)
        return -1;
    if (m == 0)
        return 0;
    weight_grad_kernel<<<warp_row_blocks(m, kWarpsPerBlock), 32 * kWarpsPerBlock, 0,
                         stream>>>(width, m, map, dy, y, k, dw);
    return launch_status();
}

extern "C" int nnt_cuda_moe_shared_add_f32(int64_t n, int64_t width, const float *z,
                                           const float *s, float *y, cudaStream_t stream)
{
    if (n < 0 || width < 0)
        return -1;
    if (n == 0 || width == 0)
        return 0;
    shared_add_kernel<<<grid_for(n * width), kThreads, 0, stream>>>(n, width, z, s, y);
    return launch_status();
}

extern "C" int nnt_cuda_moe_shared_bwd_f32(int64_t n, int64_t width, int accumulate,
                                           const float *z, const float *s, const float *dy,
                                           float *ds, float *dz, cudaStream_t stream)
{
    if (n < 0 || width < 0)
        return -1;
    if (n == 0)
        return 0;
    shared_bwd_kernel<<<warp_row_blocks(n, kWarpsPerBlock), 32 * kWarpsPerBlock, 0,
                        stream>>>(n, width, accumulate, z, s, dy, ds, dz);
    return launch_status();
}
