/* SPDX-License-Identifier: MIT */
/* nnt CUDA kernels: causal attention, flash style, on one (query block, key block) pair.
 *
 * Thread layout shared by the three block kernels: 256 threads = 32 groups of 8 lanes. A group
 * owns one "row" of the tile (a query row in the forward and dq kernels, a key row in the
 * dk/dv kernel); each lane of the group computes 4 of the 32 scores of that row against the
 * current chunk and owns the head-dimension entries d = lane8 + 8 u of the row's accumulators
 * (u < HDMAX / 8, registers). Chunks of the other operand are staged in shared memory with an
 * odd row pitch (no bank conflicts); the 8 lanes of a group live in one warp, so per-row
 * reductions are 3 shuffles and the score row is passed through shared memory with __syncwarp.
 *
 *   fwd:   block = (32 query rows, slab); loops over 32-key chunks up to the causal limit
 *          (from the first row's sliding window on, when there is one: keys qp - w < kp);
 *          online softmax update of (m, l, o_acc) exactly as the CPU kernel defines it.
 *   dq:    block = (32 query rows, slab); loops over key chunks, recomputes p from lse,
 *          ds = p (dout.v - d), dq += scale ds k.
 *   dk/dv: block = (32 key rows, kv slab); loops over the q heads that read the kv slab (in
 *          increasing order) and, for each, over query chunks from the first query that can
 *          see the tile: dv += p^T dout, dk += scale ds^T q.
 * Grouped-query attention: the slabs come from an nnt_attn_map (cpu/nnt_cpu.h): fwd and dq
 * blocks run over the q slabs and read the kv slab each one maps to; dk/dv blocks run over
 * the kv slabs, so the q heads of a group add into registers of one thread, in a fixed order.
 * Packed examples (qpos, the queries' positions (nb, tq), or NULL): the query at qp with
 * position p (clamped to [0, qp]) also masks the keys before qp - p, its example's first
 * token, as the CPU kernels do; the chunks start where they did (a superset).
 * No atomics: every output element is owned by exactly one thread. head_dim <= 256; the
 * register footprint is chosen by a template bucket (64, 128, 256). */
#include "nnt_cuda.h"
#include "kernel_util.cuh"

#include <math.h>

namespace {

using namespace nnt_cu;

const int kBR = 32;      /* rows per block */
const int kBC = 32;      /* chunk length */
const int kPerLane = 4;  /* scores per lane: kBC / 8 */

__host__ __device__ inline int pitch_for(int hd)
{
    return (hd % 2 == 0) ? hd + 1 : hd; /* odd pitch: 8 rows hit 8 different banks */
}

__device__ __forceinline__ float group_max(float v)
{
    v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, 1));
    v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, 2));
    v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, 4));
    return v;
}

__device__ __forceinline__ float group_sum(float v)
{
    v += __shfl_xor_sync(0xffffffffu, v, 1);
    v += __shfl_xor_sync(0xffffffffu, v, 2);
    v += __shfl_xor_sync(0xffffffffu, v, 4);
    return v;
}

/* rows [row0, row0 + nrows) of a (total, hd) matrix into shared memory, zero padded */
__device__ __forceinline__ void load_rows(float *dst, int pitch, const float *src, int64_t row0,
                                          int64_t total, int hd, int nrows)
{
    for (int idx = threadIdx.x; idx < nrows * hd; idx += kThreads) {
        const int r = idx / hd, d = idx - r * hd;
        const int64_t gr = row0 + r;
        dst[r * pitch + d] = gr < total ? src[gr * hd + d] : 0.0f;
    }
}

/* q slab / kv slab of slab s = b * nh + h of a map (cpu/nnt_cpu.h) */
__device__ __forceinline__ int64_t q_slab_of(const nnt_attn_map &mp, int64_t s)
{
    const int64_t b = s / mp.nh, h = s - b * mp.nh;
    return b * mp.q_hs + mp.q_h0 + h;
}

__device__ __forceinline__ int64_t kv_slab_of(const nnt_attn_map &mp, int64_t s)
{
    const int64_t b = s / mp.nh, h = s - b * mp.nh;
    return b * mp.kv_hs + (mp.gofs + h) / mp.group;
}

/* kv heads (relative to the kv block's first) that the q heads of a map read: [lo, lo + n) */
__host__ __device__ inline int64_t kv_first(const nnt_attn_map &mp)
{
    return mp.gofs / mp.group;
}

__host__ __device__ inline int64_t kv_count(const nnt_attn_map &mp)
{
    return mp.nh > 0 ? (mp.gofs + mp.nh - 1) / mp.group - mp.gofs / mp.group + 1 : 0;
}

/* Gemma 2's soft-capped score cap tanh(s / cap) (cap 0: s), and with the factor the
 * gradient of the capped score takes, 1 - tanh^2 (1 without a cap). */
__device__ __forceinline__ float capped(float s, float cap)
{
    return cap > 0.0f ? cap * tanhf(s / cap) : s;
}

__device__ __forceinline__ float capped_grad(float s, float cap, float *g)
{
    if (!(cap > 0.0f))
        return s;
    const float t = tanhf(s / cap);
    *g = 1.0f - t * t;
    return cap * t;
}

/* first key of a block (at k_pos0) inside the sliding window w of the query at qp (0: none) */
__host__ __device__ inline int64_t key_begin(int64_t qp, int64_t k_pos0, int64_t w)
{
    const int64_t b = qp - w + 1 - k_pos0;
    return w > 0 && b > 0 ? b : 0;
}

/* the first key position the query at qp of batch row b (of the map) sees: its example's
 * first token, qp - pos clamped to [0, qp] (qpos NULL: 0, every earlier key) */
__device__ __forceinline__ int64_t example_begin(const int32_t *qpos, int64_t b, int64_t tq,
                                                 int64_t row, int64_t qp)
{
    if (!qpos)
        return 0;
    const int64_t p = qpos[b * tq + row];
    return qp - (p < 0 ? 0 : (p > qp ? qp : p));
}

/* ---- forward ------------------------------------------------------------------------------ */

template <int HDMAX>
__global__ void __launch_bounds__(kThreads)
attn_fwd_kernel(nnt_attn_map mp, int64_t tq, int64_t tk, int hd, int64_t q_pos0, int64_t k_pos0,
                int64_t w, const int32_t *__restrict__ qpos, float scale, float cap,
                const float *__restrict__ q, const float *__restrict__ k,
                const float *__restrict__ v, float *__restrict__ o_acc, float *__restrict__ m,
                float *__restrict__ l)
{
    constexpr int ND = HDMAX / 8;
    extern __shared__ float smem[];
    const int pitch = pitch_for(hd);
    float *sQ = smem;
    float *sK = sQ + kBR * pitch;
    float *sV = sK + kBC * pitch;
    float *sP = sV + kBC * pitch; /* kBR x (kBC + 1) */
    const int tid = threadIdx.x, g = tid >> 3, l8 = tid & 7;
    const int64_t r0 = (int64_t)blockIdx.x * kBR;
    const int64_t row = r0 + g;
    const bool valid = row < tq;
    const int64_t qpos0 = q_pos0 + row;   /* the query's sequence index */
    const int64_t rlast = (r0 + kBR < tq ? r0 + kBR : tq) - 1;
    /* keys visible to at least one row of the tile: positions <= q_pos0 + rlast */
    int64_t kend = q_pos0 + rlast - k_pos0 + 1;
    if (kend > tk)
        kend = tk;
    /* sliding window w > 0: keys from the first row's window on */
    const int64_t kbeg = key_begin(q_pos0 + r0, k_pos0, w);

    const int64_t nslab = mp.nb * mp.nh;
    for (int64_t s = blockIdx.y; s < nslab; s += gridDim.y) {
        const int64_t slab = q_slab_of(mp, s), kslab = kv_slab_of(mp, s);
        const float *qs = q + slab * tq * hd;
        const float *ks = k + kslab * tk * hd;
        const float *vs = v + kslab * tk * hd;
        const int64_t ri = slab * tq + row;
        const int64_t qlo = valid ? example_begin(qpos, s / mp.nh, tq, row, qpos0) : 0;

        __syncthreads(); /* previous slab done with shared memory */
        load_rows(sQ, pitch, qs, r0, tq, hd, kBR);

        float mr = valid ? m[ri] : -INFINITY;
        float lr = valid ? l[ri] : 0.0f;
        float acc[ND];
#pragma unroll
        for (int u = 0; u < ND; ++u) {
            const int d = l8 + 8 * u;
            acc[u] = (valid && d < hd) ? o_acc[ri * hd + d] : 0.0f;
        }

        for (int64_t c0 = kbeg; c0 < kend; c0 += kBC) {
            __syncthreads(); /* everyone done with the previous chunk */
            load_rows(sK, pitch, ks, c0, tk, hd, kBC);
            load_rows(sV, pitch, vs, c0, tk, hd, kBC);
            __syncthreads();

            float sc[kPerLane];
#pragma unroll
            for (int jj = 0; jj < kPerLane; ++jj)
                sc[jj] = 0.0f;
            for (int d = 0; d < hd; ++d) {
                const float qd = sQ[g * pitch + d];
#pragma unroll
                for (int jj = 0; jj < kPerLane; ++jj)
                    sc[jj] += qd * sK[(l8 + 8 * jj) * pitch + d];
            }
            float cmax = -INFINITY;
#pragma unroll
            for (int jj = 0; jj < kPerLane; ++jj) {
                const int64_t key = c0 + l8 + 8 * jj;
                const bool ok = valid && key < tk && k_pos0 + key <= qpos0 &&
                                (w <= 0 || k_pos0 + key > qpos0 - w) && k_pos0 + key >= qlo;
                sc[jj] = ok ? capped(scale * sc[jj], cap) : -INFINITY;
                cmax = fmaxf(cmax, sc[jj]);
            }
            cmax = group_max(cmax);
            const float mnew = fmaxf(mr, cmax);
            float alpha = 1.0f, psum = 0.0f;
            if (mnew != -INFINITY) {
                alpha = expf(mr - mnew); /* mr == -inf: 0 */
#pragma unroll
                for (int jj = 0; jj < kPerLane; ++jj) {
                    const float p = expf(sc[jj] - mnew); /* masked: exp(-inf) = 0 */
                    sP[g * (kBC + 1) + l8 + 8 * jj] = p;
                    psum += p;
                }
            } else {
#pragma unroll
                for (int jj = 0; jj < kPerLane; ++jj)
                    sP[g * (kBC + 1) + l8 + 8 * jj] = 0.0f;
            }
            psum = group_sum(psum);
            if (mnew != -INFINITY) {
                lr = lr * alpha + psum;
                mr = mnew;
            }
            __syncwarp();
#pragma unroll
            for (int u = 0; u < ND; ++u)
                acc[u] *= alpha;
            const int cn = (int)(tk - c0 < kBC ? tk - c0 : kBC);
            for (int c = 0; c < cn; ++c) {
                const float p = sP[g * (kBC + 1) + c];
#pragma unroll
                for (int u = 0; u < ND; ++u) {
                    const int d = l8 + 8 * u;
                    if (d < hd)
                        acc[u] += p * sV[c * pitch + d];
                }
            }
        }

        if (valid) {
            if (l8 == 0) {
                m[ri] = mr;
                l[ri] = lr;
            }
#pragma unroll
            for (int u = 0; u < ND; ++u) {
                const int d = l8 + 8 * u;
                if (d < hd)
                    o_acc[ri * hd + d] = acc[u];
            }
        }
    }
}

/* ---- backward: dq ------------------------------------------------------------------------- */

template <int HDMAX>
__global__ void __launch_bounds__(kThreads)
attn_bwd_dq_kernel(nnt_attn_map mp, int64_t tq, int64_t tk, int hd, int64_t q_pos0,
                   int64_t k_pos0, int64_t w, const int32_t *__restrict__ qpos, float scale,
                   float cap, const float *__restrict__ q, const float *__restrict__ k,
                   const float *__restrict__ v, const float *__restrict__ dout,
                   const float *__restrict__ lse, const float *__restrict__ dd,
                   float *__restrict__ dq)
{
    constexpr int ND = HDMAX / 8;
    extern __shared__ float smem[];
    const int pitch = pitch_for(hd);
    float *sQ = smem;
    float *sO = sQ + kBR * pitch; /* dout rows */
    float *sK = sO + kBR * pitch;
    float *sV = sK + kBC * pitch;
    float *sS = sV + kBC * pitch; /* ds, kBR x (kBC + 1) */
    const int tid = threadIdx.x, g = tid >> 3, l8 = tid & 7;
    const int64_t r0 = (int64_t)blockIdx.x * kBR;
    const int64_t row = r0 + g;
    const bool valid = row < tq;
    const int64_t qpos0 = q_pos0 + row;   /* the query's sequence index */
    const int64_t rlast = (r0 + kBR < tq ? r0 + kBR : tq) - 1;
    int64_t kend = q_pos0 + rlast - k_pos0 + 1;
    if (kend > tk)
        kend = tk;
    const int64_t kbeg = key_begin(q_pos0 + r0, k_pos0, w);
    if (kend <= kbeg)
        return; /* whole tile masked: nothing to add (uniform across the block) */

    const int64_t nslab = mp.nb * mp.nh;
    for (int64_t s = blockIdx.y; s < nslab; s += gridDim.y) {
        const int64_t slab = q_slab_of(mp, s), kslab = kv_slab_of(mp, s);
        const float *qs = q + slab * tq * hd;
        const float *os = dout + slab * tq * hd;
        const float *ks = k + kslab * tk * hd;
        const float *vs = v + kslab * tk * hd;
        const int64_t ri = slab * tq + row;
        const int64_t qlo = valid ? example_begin(qpos, s / mp.nh, tq, row, qpos0) : 0;

        __syncthreads();
        load_rows(sQ, pitch, qs, r0, tq, hd, kBR);
        load_rows(sO, pitch, os, r0, tq, hd, kBR);
        const float lr = valid ? lse[ri] : -INFINITY;
        const float dr = valid ? dd[ri] : 0.0f;

        float acc[ND];
#pragma unroll
        for (int u = 0; u < ND; ++u)
            acc[u] = 0.0f;

        for (int64_t c0 = kbeg; c0 < kend; c0 += kBC) {
            __syncthreads();
            load_rows(sK, pitch, ks, c0, tk, hd, kBC);
            load_rows(sV, pitch, vs, c0, tk, hd, kBC);
            __syncthreads();

            float sc[kPerLane], dp[kPerLane];
#pragma unroll
            for (int jj = 0; jj < kPerLane; ++jj) {
                sc[jj] = 0.0f;
                dp[jj] = 0.0f;
            }
            for (int d = 0; d < hd; ++d) {
                const float qd = sQ[g * pitch + d];
                const float od = sO[g * pitch + d];
#pragma unroll
                for (int jj = 0; jj < kPerLane; ++jj) {
                    const int c = l8 + 8 * jj;
                    sc[jj] += qd * sK[c * pitch + d];
                    dp[jj] += od * sV[c * pitch + d];
                }
            }
#pragma unroll
            for (int jj = 0; jj < kPerLane; ++jj) {
                const int64_t key = c0 + l8 + 8 * jj;
                const bool ok = valid && key < tk && k_pos0 + key <= qpos0 &&
                                (w <= 0 || k_pos0 + key > qpos0 - w) && lr != -INFINITY &&
                                k_pos0 + key >= qlo;
                float gc = 1.0f;
                const float sv = capped_grad(scale * sc[jj], cap, &gc);
                const float p = ok ? expf(sv - lr) : 0.0f;
                sS[g * (kBC + 1) + l8 + 8 * jj] = p * (dp[jj] - dr) * gc;
            }
            __syncwarp();
            const int cn = (int)(tk - c0 < kBC ? tk - c0 : kBC);
            for (int c = 0; c < cn; ++c) {
                const float ds = sS[g * (kBC + 1) + c];
#pragma unroll
                for (int u = 0; u < ND; ++u) {
                    const int d = l8 + 8 * u;
                    if (d < hd)
                        acc[u] += ds * sK[c * pitch + d];
                }
            }
        }

        if (valid) {
#pragma unroll
            for (int u = 0; u < ND; ++u) {
                const int d = l8 + 8 * u;
                if (d < hd)
                    dq[ri * hd + d] += scale * acc[u];
            }
        }
    }
}

/* ---- backward: dk, dv --------------------------------------------------------------------- */

template <int HDMAX>
__global__ void __launch_bounds__(kThreads)
attn_bwd_dkdv_kernel(nnt_attn_map mp, int64_t tq, int64_t tk, int hd, int64_t q_pos0,
                     int64_t k_pos0, int64_t w, const int32_t *__restrict__ qpos, float scale,
                     float cap, const float *__restrict__ q,
                     const float *__restrict__ k, const float *__restrict__ v,
                     const float *__restrict__ dout, const float *__restrict__ lse,
                     const float *__restrict__ dd, float *__restrict__ dk,
                     float *__restrict__ dv)
{
    constexpr int ND = HDMAX / 8;
    extern __shared__ float smem[];
    const int pitch = pitch_for(hd);
    float *sK = smem;
    float *sV = sK + kBC * pitch;
    float *sQ = sV + kBC * pitch;
    float *sO = sQ + kBR * pitch;
    float *sP = sO + kBR * pitch;    /* p^T,  kBC x (kBR + 1) */
    float *sS = sP + kBC * (kBR + 1); /* ds^T, kBC x (kBR + 1) */
    float *sL = sS + kBC * (kBR + 1); /* lse of the query chunk */
    float *sD = sL + kBR;             /* d of the query chunk */
    const int tid = threadIdx.x, g = tid >> 3, l8 = tid & 7;
    const int64_t c0 = (int64_t)blockIdx.x * kBC;
    const int64_t key = c0 + g;
    const bool valid = key < tk;
    const int64_t kpos = k_pos0 + key;
    /* first query row that sees the first key of the tile */
    int64_t qstart = k_pos0 + c0 - q_pos0;
    if (qstart < 0)
        qstart = 0;
    /* sliding window w > 0: query rows up to the last whose window holds the tile's last key */
    int64_t qend = tq;
    if (w > 0) {
        const int64_t clast = (c0 + kBC < tk ? c0 + kBC : tk) - 1;
        qend = k_pos0 + clast + w - q_pos0;
        qend = qend < 0 ? 0 : (qend > tq ? tq : qend);
    }
    if (qstart >= qend)
        return; /* whole tile masked (uniform across the block) */

    /* one kv slab per s: kv head j of batch row b, read by the q heads [hlo, hhi) */
    const int64_t nkv = kv_count(mp), kv0 = kv_first(mp), nslab = mp.nb * nkv;
    for (int64_t s = blockIdx.y; s < nslab; s += gridDim.y) {
        const int64_t b = s / nkv, j = kv0 + (s - b * nkv);
        const int64_t kslab = b * mp.kv_hs + j;
        int64_t hlo = j * mp.group - mp.gofs, hhi = hlo + mp.group;
        hlo = hlo < 0 ? 0 : hlo;
        hhi = hhi > mp.nh ? mp.nh : hhi;
        const float *ks = k + kslab * tk * hd;
        const float *vs = v + kslab * tk * hd;
        const int64_t ki = kslab * tk + key;

        __syncthreads();
        load_rows(sK, pitch, ks, c0, tk, hd, kBC);
        load_rows(sV, pitch, vs, c0, tk, hd, kBC);

        float adk[ND], adv[ND];
#pragma unroll
        for (int u = 0; u < ND; ++u) {
            adk[u] = 0.0f;
            adv[u] = 0.0f;
        }

        for (int64_t h = hlo; h < hhi; ++h) {
            const int64_t slab = b * mp.q_hs + mp.q_h0 + h;
            const float *qs = q + slab * tq * hd;
            const float *os = dout + slab * tq * hd;
            for (int64_t r0 = qstart; r0 < qend; r0 += kBR) {
                __syncthreads();
                load_rows(sQ, pitch, qs, r0, tq, hd, kBR);
                load_rows(sO, pitch, os, r0, tq, hd, kBR);
                if (tid < kBR) {
                    const int64_t r = r0 + tid;
                    sL[tid] = r < tq ? lse[slab * tq + r] : -INFINITY;
                    sD[tid] = r < tq ? dd[slab * tq + r] : 0.0f;
                }
                __syncthreads();

                float sc[kPerLane], dp[kPerLane];
#pragma unroll
                for (int jj = 0; jj < kPerLane; ++jj) {
                    sc[jj] = 0.0f;
                    dp[jj] = 0.0f;
                }
                for (int d = 0; d < hd; ++d) {
                    const float kd = sK[g * pitch + d];
                    const float vd = sV[g * pitch + d];
#pragma unroll
                    for (int jj = 0; jj < kPerLane; ++jj) {
                        const int r = l8 + 8 * jj;
                        sc[jj] += sQ[r * pitch + d] * kd;
                        dp[jj] += sO[r * pitch + d] * vd;
                    }
                }
#pragma unroll
                for (int jj = 0; jj < kPerLane; ++jj) {
                    const int r = l8 + 8 * jj;
                    const int64_t qr = r0 + r;
                    const float lr = sL[r];
                    const bool ok = valid && qr < tq && kpos <= q_pos0 + qr &&
                                    (w <= 0 || kpos > q_pos0 + qr - w) && lr != -INFINITY &&
                                    kpos >= example_begin(qpos, b, tq, qr, q_pos0 + qr);
                    float gc = 1.0f;
                    const float sv = capped_grad(scale * sc[jj], cap, &gc);
                    const float p = ok ? expf(sv - lr) : 0.0f;
                    sP[g * (kBR + 1) + r] = p;
                    sS[g * (kBR + 1) + r] = p * (dp[jj] - sD[r]) * gc;
                }
                __syncwarp();
                const int rn = (int)(tq - r0 < kBR ? tq - r0 : kBR);
                for (int r = 0; r < rn; ++r) {
                    const float p = sP[g * (kBR + 1) + r];
                    const float ds = sS[g * (kBR + 1) + r];
#pragma unroll
                    for (int u = 0; u < ND; ++u) {
                        const int d = l8 + 8 * u;
                        if (d < hd) {
                            adv[u] += p * sO[r * pitch + d];
                            adk[u] += ds * sQ[r * pitch + d];
                        }
                    }
                }
            }
        } /* q heads of the kv slab */

        if (valid) {
#pragma unroll
            for (int u = 0; u < ND; ++u) {
                const int d = l8 + 8 * u;
                if (d < hd) {
                    dv[ki * hd + d] += adv[u];
                    dk[ki * hd + d] += scale * adk[u];
                }
            }
        }
    }
}

/* ---- finalize and prep -------------------------------------------------------------------- */

__global__ void attn_finalize_kernel(int64_t rows, int64_t hd, float *__restrict__ o,
                                     const float *__restrict__ m, const float *__restrict__ l,
                                     float *__restrict__ lse)
{
    const int64_t stride = (int64_t)gridDim.x * blockDim.x;
    const int64_t t0 = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    for (int64_t t = t0; t < rows * hd; t += stride) {
        const float lv = l[t / hd];
        o[t] = lv > 0.0f ? o[t] * (1.0f / lv) : 0.0f;
    }
    for (int64_t r = t0; r < rows; r += stride)
        lse[r] = l[r] > 0.0f ? m[r] + logf(l[r]) : -INFINITY;
}

__global__ void attn_prep_kernel(int64_t rows, int64_t hd, const float *__restrict__ o,
                                 const float *__restrict__ dout, float *__restrict__ d)
{
    const int lane = threadIdx.x & 31;
    const int64_t wpb = blockDim.x / 32;
    for (int64_t r = blockIdx.x * wpb + (threadIdx.x >> 5); r < rows; r += gridDim.x * wpb) {
        float s = 0.0f;
        for (int64_t j = lane; j < hd; j += 32)
            s += dout[r * hd + j] * o[r * hd + j];
        for (int off = 16; off > 0; off >>= 1)
            s += __shfl_xor_sync(0xffffffffu, s, off);
        if (lane == 0)
            d[r] = s;
    }
}

/* ---- attention sinks (gpt-oss) ------------------------------------------------------------ */

/* one thread a row: lse' = log(exp(lse) + exp(sink)), the row times exp(lse - lse') */
__global__ void attn_sink_fwd_kernel(int64_t nh, int64_t tq, int64_t rows, int64_t hd,
                                     const float *__restrict__ sinks, float *__restrict__ o,
                                     float *__restrict__ lse)
{
    const int64_t stride = (int64_t)gridDim.x * blockDim.x;
    for (int64_t r = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; r < rows; r += stride) {
        const float sink = sinks[(r / tq) % nh], L = lse[r];
        const float hi = L > sink ? L : sink, lo = L > sink ? sink : L;
        const float Lp = hi + log1pf(expf(lo - hi)), f = expf(L - Lp);
        for (int64_t c = 0; c < hd; c++)
            o[r * hd + c] *= f;
        lse[r] = Lp;
    }
}

/* one block a head: dsinks[h] -= sum over its rows of exp(sink - lse) (dout . o), the rows'
 * terms in double, summed in a fixed tree (deterministic) */
__global__ void attn_sink_bwd_kernel(int64_t nb, int64_t nh, int64_t tq, int64_t hd,
                                     const float *__restrict__ sinks,
                                     const float *__restrict__ o,
                                     const float *__restrict__ dout,
                                     const float *__restrict__ lse, float *__restrict__ dsinks)
{
    __shared__ double part[256];
    const int64_t h = blockIdx.x, n = nb * tq;
    double acc = 0.0;
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
        const int64_t r = ((i / tq) * nh + h) * tq + i % tq;
        double dot = 0.0;
        for (int64_t c = 0; c < hd; c++)
            dot += (double)dout[r * hd + c] * (double)o[r * hd + c];
        acc += exp((double)sinks[h] - (double)lse[r]) * dot;
    }
    part[threadIdx.x] = acc;
    __syncthreads();
    for (int w = 128; w > 0; w >>= 1) {
        if ((int)threadIdx.x < w)
            part[threadIdx.x] += part[threadIdx.x + w];
        __syncthreads();
    }
    if (threadIdx.x == 0)
        dsinks[h] -= (float)part[0];
}

/* ---- launch helpers ----------------------------------------------------------------------- */

/* opt in to more than 48 KiB of dynamic shared memory (host-side attribute, no sync) */
template <typename Kernel>
int allow_smem(Kernel kernel, size_t smem)
{
    if (smem <= 48 * 1024)
        return 0;
    cudaError_t e =
        cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem);
    return e == cudaSuccess ? 0 : -(int)e;
}

inline dim3 grid_for(int64_t tiles, int64_t nbh)
{
    return dim3((unsigned)tiles, (unsigned)(nbh > 65535 ? 65535 : nbh));
}

bool bad_sizes(const nnt_attn_map &mp, int64_t tq, int64_t tk, int64_t hd)
{
    return mp.nb < 0 || mp.nh < 0 || mp.q_hs < 0 || mp.q_h0 < 0 || mp.kv_hs < 0 ||
           mp.group <= 0 || mp.gofs < 0 || tq < 0 || tk < 0 || hd < 0 ||
           hd > NNT_CUDA_ATTN_MAX_HD || (tq + kBR - 1) / kBR > 0x7fffffff ||
           (tk + kBC - 1) / kBC > 0x7fffffff;
}

template <int HDMAX>
int fwd_launch(const nnt_attn_map &mp, int64_t tq, int64_t tk, int hd, int64_t q_pos0,
               int64_t k_pos0, int64_t w, const int32_t *qpos, float scale, float cap,
               const float *q, const float *k, const float *v,
               float *o_acc, float *m, float *l, cudaStream_t stream)
{
    const int pitch = pitch_for(hd);
    const size_t smem = sizeof(float) * ((size_t)(kBR + 2 * kBC) * pitch + kBR * (kBC + 1));
    const dim3 grid = grid_for((tq + kBR - 1) / kBR, mp.nb * mp.nh);
    int ret = allow_smem(attn_fwd_kernel<HDMAX>, smem);
    if (ret)
        return ret;
    attn_fwd_kernel<HDMAX><<<grid, kThreads, smem, stream>>>(mp, tq, tk, hd, q_pos0, k_pos0,
                                                            w, qpos, scale, cap, q, k, v, o_acc,
                                                            m, l);
    return launch_status();
}

template <int HDMAX>
int bwd_launch(const nnt_attn_map &mp, int64_t tq, int64_t tk, int hd, int64_t q_pos0,
               int64_t k_pos0, int64_t w, const int32_t *qpos, float scale, float cap,
               const float *q, const float *k, const float *v,
               const float *dout, const float *lse, const float *d, float *dq, float *dk,
               float *dv, cudaStream_t stream)
{
    const int pitch = pitch_for(hd);
    /* dq: one block row per q slab */
    size_t smem = sizeof(float) * ((size_t)(2 * kBR + 2 * kBC) * pitch + kBR * (kBC + 1));
    dim3 grid = grid_for((tq + kBR - 1) / kBR, mp.nb * mp.nh);
    int ret = allow_smem(attn_bwd_dq_kernel<HDMAX>, smem);
    if (ret)
        return ret;
    attn_bwd_dq_kernel<HDMAX><<<grid, kThreads, smem, stream>>>(
        mp, tq, tk, hd, q_pos0, k_pos0, w, qpos, scale, cap, q, k, v, dout, lse, d, dq);
    ret = launch_status();
    if (ret)
        return ret;
    /* dk, dv: one block row per kv slab read */
    smem = sizeof(float) *
           ((size_t)(2 * kBR + 2 * kBC) * pitch + 2 * kBC * (kBR + 1) + 2 * kBR);
    grid = grid_for((tk + kBC - 1) / kBC, mp.nb * kv_count(mp));
    ret = allow_smem(attn_bwd_dkdv_kernel<HDMAX>, smem);
    if (ret)
        return ret;
    attn_bwd_dkdv_kernel<HDMAX><<<grid, kThreads, smem, stream>>>(
        mp, tq, tk, hd, q_pos0, k_pos0, w, qpos, scale, cap, q, k, v, dout, lse, d, dk, dv);
    return launch_status();
}

} /* namespace */

extern "C" int nnt_cuda_attn_fwd_packed_f32(const nnt_attn_map *map, int64_t tq, int64_t tk,
                                            int64_t hd, int64_t q_pos0, int64_t k_pos0,
                                            int64_t window, const int32_t *qpos, float scale,
                                            float cap, const float *q, const float *k,
                                            const float *v, float *o_acc, float *m, float *l,
                                            cudaStream_t stream)
{
    if (!map || bad_sizes(*map, tq, tk, hd) || window < 0)
        return -1;
    const nnt_attn_map mp = *map;
    if (mp.nb == 0 || mp.nh == 0 || tq == 0 || tk == 0 || hd == 0)
        return 0; /* as on the CPU: nothing to do (hd == 0 leaves m, l alone) */
    const int h = (int)hd;
    if (h <= 64)
        return fwd_launch<64>(mp, tq, tk, h, q_pos0, k_pos0, window, qpos, scale, cap, q, k,
                              v, o_acc, m, l, stream);
    if (h <= 128)
        return fwd_launch<128>(mp, tq, tk, h, q_pos0, k_pos0, window, qpos, scale, cap, q, k,
                               v, o_acc, m, l, stream);
    return fwd_launch<256>(mp, tq, tk, h, q_pos0, k_pos0, window, qpos, scale, cap, q, k, v,
                           o_acc, m, l, stream);
}

extern "C" int nnt_cuda_attn_fwd_window_f32(const nnt_attn_map *map, int64_t tq, int64_t tk,
                                            int64_t hd, int64_t q_pos0, int64_t k_pos0,
                                            int64_t window, float scale, float cap, const float *q,
                                            const float *k, const float *v, float *o_acc,
                                            float *m, float *l, cudaStream_t stream)
{
    return nnt_cuda_attn_fwd_packed_f32(map, tq, tk, hd, q_pos0, k_pos0, window, NULL, scale,
                                        cap, q, k, v, o_acc, m, l, stream);
}

extern "C" int nnt_cuda_attn_fwd_gqa_f32(const nnt_attn_map *map, int64_t tq, int64_t tk,
                                         int64_t hd, int64_t q_pos0, int64_t k_pos0,
                                         float scale, const float *q, const float *k,
                                         const float *v, float *o_acc, float *m, float *l,
                                         cudaStream_t stream)
{
    return nnt_cuda_attn_fwd_window_f32(map, tq, tk, hd, q_pos0, k_pos0, 0, scale, 0.0f, q, k, v,
                                        o_acc, m, l, stream);
}

extern "C" int nnt_cuda_attn_fwd_block_f32(int64_t nbh, int64_t tq, int64_t tk, int64_t hd,
                                           int64_t q_pos0, int64_t k_pos0, float scale,
                                           const float *q, const float *k, const float *v,
                                           float *o_acc, float *m, float *l,
                                           cudaStream_t stream)
{
    const nnt_attn_map mha = {nbh, 1, 1, 0, 1, 1, 0, 0};
    return nnt_cuda_attn_fwd_gqa_f32(&mha, tq, tk, hd, q_pos0, k_pos0, scale, q, k, v, o_acc,
                                     m, l, stream);
}

extern "C" int nnt_cuda_attn_fwd_finalize_f32(int64_t nbh, int64_t tq, int64_t hd, float *o,
                                              const float *m, const float *l, float *lse,
                                              cudaStream_t stream)
{
    if (nbh < 0 || tq < 0 || hd < 0)
        return -1;
    const int64_t rows = nbh * tq;
    if (rows == 0)
        return 0;
    int64_t work = rows * (hd > 1 ? hd : 1);
    int64_t b = (work + 255) / 256;
    if (b > (int64_t)1 << 19)
        b = (int64_t)1 << 19;
    attn_finalize_kernel<<<(unsigned)b, 256, 0, stream>>>(rows, hd, o, m, l, lse);
    return launch_status();
}

extern "C" int nnt_cuda_attn_bwd_prep_f32(int64_t nbh, int64_t tq, int64_t hd, const float *o,
                                          const float *dout, float *d, cudaStream_t stream)
{
    if (nbh < 0 || tq < 0 || hd < 0)
        return -1;
    const int64_t rows = nbh * tq;
    if (rows == 0)
        return 0;
    int64_t b = (rows + 7) / 8;
    if (b > (int64_t)1 << 19)
        b = (int64_t)1 << 19;
    attn_prep_kernel<<<(unsigned)b, 256, 0, stream>>>(rows, hd, o, dout, d);
    return launch_status();
}

extern "C" int nnt_cuda_attn_sink_fwd_f32(int64_t nb, int64_t nh, int64_t tq, int64_t hd,
                                          const float *sinks, float *o, float *lse,
                                          cudaStream_t stream)
{
    if (nb < 0 || nh < 0 || tq < 0 || hd < 0)
        return -1;
    const int64_t rows = nb * nh * tq;
    if (rows == 0)
        return 0;
    int64_t b = (rows + 255) / 256;
    if (b > (int64_t)1 << 19)
        b = (int64_t)1 << 19;
    attn_sink_fwd_kernel<<<(unsigned)b, 256, 0, stream>>>(nh, tq, rows, hd, sinks, o, lse);
    return launch_status();
}

extern "C" int nnt_cuda_attn_sink_bwd_f32(int64_t nb, int64_t nh, int64_t tq, int64_t hd,
                                          const float *sinks, const float *o,
                                          const float *dout, const float *lse, float *dsinks,
                                          cudaStream_t stream)
{
    if (nb < 0 || nh < 0 || tq < 0 || hd < 0 || nh > 65535)
        return -1;
    if (nb * nh * tq == 0)
        return 0;
    attn_sink_bwd_kernel<<<(unsigned)nh, 256, 0, stream>>>(nb, nh, tq, hd, sinks, o, dout, lse,
                                                           dsinks);
    return launch_status();
}

extern "C" int nnt_cuda_attn_bwd_packed_f32(const nnt_attn_map *map, int64_t tq, int64_t tk,
                                            int64_t hd, int64_t q_pos0, int64_t k_pos0,
                                            int64_t window, const int32_t *qpos, float scale,
                                            float cap, const float *q, const float *k,
                                            const float *v, const float *dout, const float *lse,
                                            const float *d, float *dq, float *dk, float *dv,
                                            cudaStream_t stream)
{
    if (!map || bad_sizes(*map, tq, tk, hd) || window < 0)
        return -1;
    const nnt_attn_map mp = *map;
    if (mp.nb == 0 || mp.nh == 0 || tq == 0 || tk == 0 || hd == 0)
        return 0; /* as on the CPU: nothing to do */
    const int h = (int)hd;
    if (h <= 64)
        return bwd_launch<64>(mp, tq, tk, h, q_pos0, k_pos0, window, qpos, scale, cap, q, k,
                              v, dout, lse, d, dq, dk, dv, stream);
    if (h <= 128)
        return bwd_launch<128>(mp, tq, tk, h, q_pos0, k_pos0, window, qpos, scale, cap, q, k,
                               v, dout, lse, d, dq, dk, dv, stream);
    return bwd_launch<256>(mp, tq, tk, h, q_pos0, k_pos0, window, qpos, scale, cap, q, k, v,
                           dout, lse, d, dq, dk, dv, stream);
}

extern "C" int nnt_cuda_attn_bwd_window_f32(const nnt_attn_map *map, int64_t tq, int64_t tk,
                                            int64_t hd, int64_t q_pos0, int64_t k_pos0,
                                            int64_t window, float scale, float cap, const float *q,
                                            const float *k, const float *v, const float *dout,
                                            const float *lse, const float *d, float *dq,
                                            float *dk, float *dv, cudaStream_t stream)
{
    return nnt_cuda_attn_bwd_packed_f32(map, tq, tk, hd, q_pos0, k_pos0, window, NULL, scale,
                                        cap, q, k, v, dout, lse, d, dq, dk, dv, stream);
}

extern "C" int nnt_cuda_attn_bwd_gqa_f32(const nnt_attn_map *map, int64_t tq, int64_t tk,
                                         int64_t hd, int64_t q_pos0, int64_t k_pos0,
                                         float scale, const float *q, const float *k,
                                         const float *v, const float *dout, const float *lse,
                                         const float *d, float *dq, float *dk, float *dv,
                                         cudaStream_t stream)
{
    return nnt_cuda_attn_bwd_window_f32(map, tq, tk, hd, q_pos0, k_pos0, 0, scale, 0.0f, q, k, v,
                                        dout, lse, d, dq, dk, dv, stream);
}

extern "C" int nnt_cuda_attn_bwd_block_f32(int64_t nbh, int64_t tq, int64_t tk, int64_t hd,
                                           int64_t q_pos0, int64_t k_pos0, float scale,
                                           const float *q, const float *k, const float *v,
                                           const float *dout, const float *lse, const float *d,
                                           float *dq, float *dk, float *dv, cudaStream_t stream)
{
    const nnt_attn_map mha = {nbh, 1, 1, 0, 1, 1, 0, 0};
    return nnt_cuda_attn_bwd_gqa_f32(&mha, tq, tk, hd, q_pos0, k_pos0, scale, q, k, v, dout,
                                     lse, d, dq, dk, dv, stream);
}

/* ---- attention by products: the row kernels (twins of cpu/attn_products.c's) ---------------- */

namespace {

const int kRowWarps = 8;   /* rows (warps) a block */

/* Row x of a chunk (entry x / rows): its index in m, l, lse, d (o_acc rows at that hd), and
 * the chunk's keys [*lo, *hi) its query sees: from its window's and its example's first key
 * (key_begin, example_begin) to its own (*hi <= *lo: none) */
__device__ __forceinline__ int64_t row_of(const nnt_attn_rows &r, int64_t x, int64_t *lo,
                                          int64_t *hi)
{
    const int64_t e = x / r.rows, i = r.r0 + (x - e * r.rows), qp = r.q_pos0 + i;
    const int64_t ex = example_begin(r.qpos, (r.t0 + e) / r.bdiv, r.tq, i, qp) - r.k_pos0;
    const int64_t a = key_begin(qp, r.k_pos0, r.window);
    *lo = (a > ex ? a : ex) - r.kb;
    *hi = qp - r.k_pos0 + 1 - r.kb;
    return (r.q0 + (r.t0 + e) * r.qstride) * r.tq + i;
}

__global__ void rows_fwd_kernel(nnt_attn_rows r, float *s, float *m, float *l, float *o_acc)
{
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int64_t total = r.count * r.rows;
    for (int64_t x = (int64_t)blockIdx.x * kRowWarps + warp; x < total;
         x += (int64_t)gridDim.x * kRowWarps) {
        int64_t lo, hi;
        const int64_t ri = row_of(r, x, &lo, &hi);
        float *row = s + x * r.keys;
        float bm = -INFINITY;
        bool seen = false;
        for (int64_t j = lane; j < r.keys; j += 32) {
            if (j < lo || j >= hi) {
                row[j] = -INFINITY;
                continue;
            }
            seen = true;
            float v = row[j];
            if (r.cap > 0.0f)
                row[j] = v = r.cap * tanhf(v / r.cap);
            bm = fmaxf(bm, v);
        }
        seen = __any_sync(0xffffffffu, seen);
        if (!seen) {   /* no key of the chunk: the row is left as it was */
            for (int64_t j = lane; j < r.keys; j += 32)
                row[j] = 0.0f;
            continue;
        }
        bm = warp_max(bm);
        const float mold = m[ri], mnew = fmaxf(mold, bm);
        const float alpha = expf(mold - mnew);   /* 0 when m was -inf */
        float sum = 0.0f;
        for (int64_t j = lane; j < r.keys; j += 32) {
            const float p = expf(row[j] - mnew);   /* masked: exp(-inf) = 0 */
            row[j] = p;
            sum += p;
        }
        sum = warp_sum(sum);
        for (int64_t c = lane; c < r.hd; c += 32)
            o_acc[ri * r.hd + c] *= alpha;
        __syncwarp();
        if (lane == 0) {
            l[ri] = l[ri] * alpha + sum;
            m[ri] = mnew;
        }
    }
}

__global__ void rows_bwd_kernel(nnt_attn_rows r, float *s, float *dp, const float *lse,
                                const float *d)
{
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int64_t total = r.count * r.rows;
    for (int64_t x = (int64_t)blockIdx.x * kRowWarps + warp; x < total;
         x += (int64_t)gridDim.x * kRowWarps) {
        int64_t lo, hi;
        const int64_t ri = row_of(r, x, &lo, &hi);
        float *srow = s + x * r.keys, *drow = dp + x * r.keys;
        const float lsei = lse[ri], di = d[ri];
        const bool none = isinf(lsei);   /* a row that sees no key at all */
        for (int64_t j = lane; j < r.keys; j += 32) {
            if (none || j < lo || j >= hi) {
                srow[j] = drow[j] = 0.0f;
                continue;
            }
            float v = srow[j], g = 1.0f;
            if (r.cap > 0.0f) {
                const float t = tanhf(v / r.cap);
                v = r.cap * t;
                g = 1.0f - t * t;
            }
            const float p = expf(v - lsei);
            srow[j] = p;
            drow[j] = p * (drow[j] - di) * g;
        }
    }
}

/* -1 for a bad chunk, 0 for an empty one, 1 for one to launch */
int rows_check(const nnt_attn_rows *r)
{
    if (!r || r->count < 0 || r->rows < 0 || r->keys < 0 || r->bdiv < 1)
        return -1;
    return r->count > 0 && r->rows > 0 && r->keys > 0;
}

} /* namespace */

extern "C" int nnt_cuda_attn_rows_fwd_f32(const nnt_attn_rows *r, float *s, float *m, float *l,
                                          float *o_acc, cudaStream_t stream)
{
    const int c = rows_check(r);
    if (c <= 0)
        return c;
    rows_fwd_kernel<<<warp_row_blocks(r->count * r->rows, kRowWarps), 32 * kRowWarps, 0,
                      stream>>>(*r, s, m, l, o_acc);
    return launch_status();
}

extern "C" int nnt_cuda_attn_rows_bwd_f32(const nnt_attn_rows *r, float *s, float *dp,
                                          const float *lse, const float *d, cudaStream_t stream)
{
    const int c = rows_check(r);
    if (c <= 0)
        return c;
    rows_bwd_kernel<<<warp_row_blocks(r->count * r->rows, kRowWarps), 32 * kRowWarps, 0,
                      stream>>>(*r, s, dp, lse, d);
    return launch_status();
}
