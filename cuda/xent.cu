/* SPDX-License-Identifier: MIT */
/* nnt CUDA kernels: softmax cross-entropy with the vocabulary split over blocks.
 * Forward block: one thread block per row, online log-sum-exp per thread, then a fixed-order
 * (max, sum) combination across the block, merged into the running (m, s) of the row. */
#include "nnt_cuda.h"
#include "kernel_util.cuh"

#include <math.h>

namespace {

using namespace nnt_cu;

inline unsigned row_grid(int64_t rows)
{
    return (unsigned)(rows > 65535 * 16 ? 65535 * 16 : rows);
}

/* merge (m2, s2) into (m1, s1): both are (max, sum exp(x - max)); (-inf, 0) is empty */
__device__ __forceinline__ void lse_merge(float &m1, float &s1, float m2, float s2)
{
    const float mx = fmaxf(m1, m2);
    if (mx == -INFINITY) {
        m1 = mx;
        s1 = 0.0f;
        return;
    }
    s1 = s1 * expf(m1 - mx) + s2 * expf(m2 - mx);
    m1 = mx;
}

/* d (NULL: none; label smoothing): the sum of logit - m over the ids [0, v0 + nv), moved
 * from the old m to the new as nnt_cpu_xent_fwd_block_f32 does (the block's raw sum in
 * double, then less nv m). */
__global__ void xent_fwd_kernel(int64_t rows, int64_t nv, int64_t v0,
                                const float *__restrict__ logits, int64_t ld,
                                const int32_t *__restrict__ targets, float *__restrict__ m,
                                float *__restrict__ s, float *__restrict__ tgt,
                                float *__restrict__ d)
{
    __shared__ float sm[kThreads / 32], ss[kThreads / 32];
    __shared__ double sx[kThreads / 32];
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
        const float *row = logits + r * ld;
        float mt = -INFINITY, st = 0.0f;
        double xt = 0.0;
        for (int64_t j = tid; j < nv; j += kThreads) {
            const float x = row[j];
            if (d)   /* (uniform over the grid: no divergence; no double adds without it) */
                xt += x;
            if (x > mt) {
                st = st * expf(mt - x) + 1.0f; /* mt == -inf: 0 * 0 + 1 */
                mt = x;
            } else if (mt != -INFINITY) {
                st += expf(x - mt);
            }
        }
        for (int off = 16; off > 0; off >>= 1) {
            float mo = __shfl_xor_sync(0xffffffffu, mt, off);
            float so = __shfl_xor_sync(0xffffffffu, st, off);
            lse_merge(mt, st, mo, so);
            if (d)
                xt += __shfl_xor_sync(0xffffffffu, xt, off);
        }
        if (lane == 0) {
            sm[warp] = mt;
            ss[warp] = st;
            sx[warp] = xt;
        }
        __syncthreads();
        if (tid == 0) {
            float bm = sm[0], bs = ss[0];
            double bx = sx[0];
            for (int w = 1; w < kThreads / 32; ++w) {
                lse_merge(bm, bs, sm[w], ss[w]);
                bx += sx[w];
            }
            const float mold = m[r];
            float rm = mold, rs = s[r];
            lse_merge(rm, rs, bm, bs);
            m[r] = rm;
            s[r] = rs;
            if (d) {
                const double moved = v0 > 0 && mold != -INFINITY
                                         ? (double)d[r] - (double)v0 * ((double)rm - mold)
                                         : 0.0;
                d[r] = (float)(moved + (bx - (double)nv * rm));
            }
            const int64_t t = targets[r];
            if (t >= v0 && t < v0 + nv)
                tgt[r] = row[t - v0];
        }
        __syncthreads();
    }
}

__global__ void xent_loss_kernel(int64_t rows, const int32_t *__restrict__ targets,
                                 int32_t ignore_index, const float *__restrict__ m,
                                 const float *__restrict__ s, const float *__restrict__ tgt,
                                 float *__restrict__ loss, float *__restrict__ lse)
{
    for (int64_t r = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; r < rows;
         r += (int64_t)gridDim.x * blockDim.x) {
        const float log_s = logf(s[r]);
        loss[r] = targets[r] == ignore_index ? 0.0f : (m[r] - tgt[r]) + log_s;
        if (lse)
            lse[r] = m[r] + log_s;
    }
}

/* eps > 0: label smoothing over vocab ids, as nnt_cpu_xent_bwd_block_f32 (the same
 * operations in the same order) */
__global__ void xent_bwd_kernel(int64_t rows, int64_t nv, int64_t v0,
                                const float *logits, int64_t ld,
                                const int32_t *__restrict__ targets, int32_t ignore_index,
                                const float *__restrict__ m, const float *__restrict__ s,
                                const float *__restrict__ w, float scale, float eps,
                                int64_t vocab, float *dlogits)  /* may run in place */
{
    for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
        const int32_t t = targets[r];
        float *drow = dlogits + r * ld;
        if (t == ignore_index) {
            for (int64_t j = threadIdx.x; j < nv; j += blockDim.x)
                drow[j] = 0.0f;
            continue;
        }
        const float *row = logits + r * ld;
        const float sr = w ? scale * w[r] : scale;   /* this row's factor */
        const float mr = m[r], c = sr / s[r];
        const float uniform = eps > 0.0f ? sr * eps / (float)vocab : 0.0f;
        const int64_t jt = (int64_t)t - v0;
        for (int64_t j = threadIdx.x; j < nv; j += blockDim.x) {
            const float g = c * expf(row[j] - mr);
            float v = j == jt ? g - sr : g;
            if (eps > 0.0f) {
                v -= uniform;
                if (j == jt)
                    v += sr * eps;   /* the one-hot's weight is 1 - eps */
            }
            drow[j] = v;
        }
    }
}

__global__ void xent_smooth_loss_kernel(int64_t rows, const int32_t *__restrict__ targets,
                                        int32_t ignore_index, float eps, int64_t vocab,
                                        const float *__restrict__ s,
                                        const float *__restrict__ d, float *__restrict__ loss)
{
    for (int64_t r = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; r < rows;
         r += (int64_t)gridDim.x * blockDim.x) {
        if (targets[r] == ignore_index)
            continue;
        const float uniform = logf(s[r]) - d[r] / (float)vocab;   /* lse - mean logit */
        loss[r] = (1.0f - eps) * loss[r] + eps * uniform;
    }
}

} /* namespace */

extern "C" int nnt_cuda_xent_fwd_block_f32(int64_t rows, int64_t nv, int64_t v0,
                                           const float *logits, int64_t ld,
                                           const int32_t *targets, float *m, float *s,
                                           float *tgt, float *d, cudaStream_t stream)
{
    if (rows < 0 || nv < 0)
        return -1;
    if (rows == 0 || nv == 0)
        return 0;
    xent_fwd_kernel<<<row_grid(rows), kThreads, 0, stream>>>(rows, nv, v0, logits, ld, targets, m,
                                                             s, tgt, d);
    return launch_status();
}

extern "C" int nnt_cuda_xent_loss_f32(int64_t rows, const int32_t *targets,
                                      int32_t ignore_index, const float *m, const float *s,
                                      const float *tgt, float *loss, float *lse,
                                      cudaStream_t stream)
{
    if (rows < 0)
        return -1;
    if (rows == 0)
        return 0;
    int64_t b = (rows + kThreads - 1) / kThreads;
    if (b > (int64_t)1 << 19)
        b = (int64_t)1 << 19;
    xent_loss_kernel<<<(unsigned)b, kThreads, 0, stream>>>(rows, targets, ignore_index, m, s, tgt,
                                                           loss, lse);
    return launch_status();
}

extern "C" int nnt_cuda_xent_bwd_block_f32(int64_t rows, int64_t nv, int64_t v0,
                                           const float *logits, int64_t ld,
                                           const int32_t *targets, int32_t ignore_index,
                                           const float *m, const float *s, const float *w,
                                           float scale, float eps, int64_t vocab,
                                           float *dlogits, cudaStream_t stream)
{
    if (rows < 0 || nv < 0 || (eps > 0.0f && vocab < 1))
        return -1;
    if (rows == 0 || nv == 0)
        return 0;
    xent_bwd_kernel<<<row_grid(rows), kThreads, 0, stream>>>(rows, nv, v0, logits, ld, targets,
                                                             ignore_index, m, s, w, scale, eps,
                                                             vocab, dlogits);
    return launch_status();
}

extern "C" int nnt_cuda_xent_smooth_loss_f32(int64_t rows, const int32_t *targets,
                                             int32_t ignore_index, float eps, int64_t vocab,
                                             const float *s, const float *d, float *loss,
                                             cudaStream_t stream)
{
    if (rows < 0 || vocab < 1)
        return -1;
    if (rows == 0)
        return 0;
    int64_t b = (rows + kThreads - 1) / kThreads;
    if (b > (int64_t)1 << 19)
        b = (int64_t)1 << 19;
    xent_smooth_loss_kernel<<<(unsigned)b, kThreads, 0, stream>>>(rows, targets, ignore_index,
                                                                  eps, vocab, s, d, loss);
    return launch_status();
}
