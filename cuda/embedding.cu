/* SPDX-License-Identifier: MIT */
/* nnt CUDA kernels: embedding gather and deterministic scatter-add.
 *
 * scatter_add without atomics: thread (j, c) owns column j of every table row r with
 * r % K == c (K row classes, c = blockIdx.y) and walks the tokens in increasing order, so each
 * dtable element receives exactly the CPU's sequence of float additions (bit-identical).
 * Tokens are staged in shared memory in chunks; the class test is uniform across the block,
 * so the walk does not diverge. */
#include "nnt_cuda.h"
#include "kernel_util.cuh"

namespace {

using namespace nnt_cu;

const int kScatterThreads = 128;
const int kTokChunk = 1024;
const int64_t kMaxClasses = 64;

__global__ void gather_kernel(int64_t ntok, int64_t nc, const int32_t *__restrict__ tok,
                              int64_t v0, int64_t nv, const float *__restrict__ table,
                              int64_t ldt, float *__restrict__ out, int64_t ldo)
{
    const int64_t total = ntok * nc;
    for (int64_t t = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; t < total;
         t += (int64_t)gridDim.x * blockDim.x) {
        const int64_t i = t / nc, j = t - i * nc;
        const int64_t r = (int64_t)tok[i] - v0;
        if (r >= 0 && r < nv)
            out[i * ldo + j] = table[r * ldt + j];
    }
}

__global__ void scatter_add_kernel(int64_t ntok, int64_t nc, const int32_t *__restrict__ tok,
                                   int64_t v0, int64_t nv, int64_t nclass,
                                   const float *__restrict__ dout, int64_t ldo,
                                   float *__restrict__ dtable, int64_t ldt)
{
    __shared__ int64_t rows[kTokChunk];
    const int64_t cls = blockIdx.y;
    for (int64_t j0 = (int64_t)blockIdx.x * kScatterThreads; j0 < nc;
         j0 += (int64_t)gridDim.x * kScatterThreads) {
        const int64_t j = j0 + threadIdx.x;
        for (int64_t i0 = 0; i0 < ntok; i0 += kTokChunk) {
            const int64_t cnt = ntok - i0 < kTokChunk ? ntok - i0 : kTokChunk;
            __syncthreads(); /* previous chunk fully consumed */
            for (int64_t s = threadIdx.x; s < cnt; s += kScatterThreads) {
                const int64_t r = (int64_t)tok[i0 + s] - v0;
                rows[s] = (r >= 0 && r < nv && r % nclass == cls) ? r : -1;
            }
            __syncthreads();
            if (j < nc) {
                for (int64_t s = 0; s < cnt; ++s) {
                    const int64_t r = rows[s];
                    if (r >= 0)
                        dtable[r * ldt + j] += dout[(i0 + s) * ldo + j];
                }
            }
        }
    }
}

} /* namespace */

extern "C" int nnt_cuda_embedding_gather_f32(int64_t ntok, int64_t nc, const int32_t *tok,
                                             int64_t v0, int64_t nv, const float *table,
                                             int64_t ldt, float *out, int64_t ldo,
                                             cudaStream_t stream)
{
    if (ntok < 0 || nc < 0 || nv < 0)
        return -1;
    if (ntok == 0 || nc == 0 || nv == 0)
        return 0;
    int64_t total = ntok * nc;
    int64_t b = (total + kThreads - 1) / kThreads;
    if (b > (int64_t)1 << 19)
        b = (int64_t)1 << 19;
    gather_kernel<<<(unsigned)b, kThreads, 0, stream>>>(ntok, nc, tok, v0, nv, table, ldt, out,
                                                        ldo);
    return launch_status();
}

extern "C" int nnt_cuda_embedding_scatter_add_f32(int64_t ntok, int64_t nc, const int32_t *tok,
                                                  int64_t v0, int64_t nv, const float *dout,
                                                  int64_t ldo, float *dtable, int64_t ldt,
                                                  cudaStream_t stream)
{
    if (ntok < 0 || nc < 0 || nv < 0)
        return -1;
    if (ntok == 0 || nc == 0 || nv == 0)
        return 0;
    int64_t cb = (nc + kScatterThreads - 1) / kScatterThreads;
    if (cb > 65535)
        cb = 65535;
    /* enough row classes to give the GPU ~64K threads, at most one class per table row */
    int64_t nclass = 65536 / (cb * kScatterThreads);
    if (nclass > kMaxClasses)
        nclass = kMaxClasses;
    if (nclass > nv)
        nclass = nv;
    if (nclass < 1)
        nclass = 1;
    scatter_add_kernel<<<dim3((unsigned)cb, (unsigned)nclass), kScatterThreads, 0, stream>>>(
        ntok, nc, tok, v0, nv, nclass, dout, ldo, dtable, ldt);
    return launch_status();
}
