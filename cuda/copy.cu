/* SPDX-License-Identifier: MIT */
/* nnt CUDA kernels: strided box copy (retiling, head transposes).
 *
 * The host wrapper rewrites the box in bytes: it appends the element as an innermost dimension
 * of elsize bytes, drops unit dimensions, merges dimensions that are contiguous on both sides
 * and then picks the widest word (16, 8, 4, 2 or 1 bytes) that divides the innermost run, all
 * outer strides and both base addresses. The kernel copies words with a grid-stride loop over
 * the linear index of the (at most 9-dimensional) box. */
#include "nnt_cuda.h"
#include "kernel_util.cuh"

namespace {

using namespace nnt_cu;

const int kMaxDims = NNT_CUDA_MAX_NDIM + 1;

struct Box {
    int ndim;
    int64_t shape[kMaxDims];
    int64_t sstride[kMaxDims]; /* in words */
    int64_t dstride[kMaxDims]; /* in words */
};

template <typename W>
__global__ void copy_box_kernel(Box box, int64_t total, const W *__restrict__ src,
                                W *__restrict__ dst)
{
    for (int64_t t = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; t < total;
         t += (int64_t)gridDim.x * blockDim.x) {
        int64_t rem = t, so = 0, doff = 0;
        for (int d = box.ndim - 1; d >= 0; --d) {
            int64_t sd = box.shape[d];
            int64_t i = rem % sd;
            rem /= sd;
            so += i * box.sstride[d];
            doff += i * box.dstride[d];
        }
        dst[doff] = src[so];
    }
}

template <typename W>
int launch(const Box &box, int64_t total, const void *src, void *dst, cudaStream_t stream)
{
    int64_t b = (total + kThreads - 1) / kThreads;
    if (b > (int64_t)1 << 19)
        b = (int64_t)1 << 19;
    copy_box_kernel<W><<<(unsigned)b, kThreads, 0, stream>>>(box, total, (const W *)src,
                                                             (W *)dst);
    cudaError_t e = cudaGetLastError();
    return e == cudaSuccess ? 0 : -(int)e;
}

} /* namespace */

extern "C" int nnt_cuda_copy_box(int ndim, const int64_t *shape, size_t elsize,
                                 const void *src, const int64_t *src_stride,
                                 void *dst, const int64_t *dst_stride, cudaStream_t stream)
{
    if (ndim < 1 || ndim > NNT_CUDA_MAX_NDIM || elsize == 0 || !shape || !src_stride ||
        !dst_stride)
        return -1;
    for (int d = 0; d < ndim; ++d) {
        if (shape[d] < 0)
            return -1;
        if (shape[d] == 0)
            return 0;
    }

    /* 1. dimensions in bytes, element appended as the innermost dimension */
    int64_t sh[kMaxDims], ss[kMaxDims], ds[kMaxDims];
    int nd = 0;
    const int64_t es = (int64_t)elsize;
    for (int d = 0; d < ndim; ++d) {
        if (shape[d] == 1)
            continue; /* unit dimensions do not move anything */
        sh[nd] = shape[d];
        ss[nd] = src_stride[d] * es;
        ds[nd] = dst_stride[d] * es;
        ++nd;
    }
    sh[nd] = es;
    ss[nd] = 1;
    ds[nd] = 1;
    ++nd;

    /* 2. merge d with d + 1 when contiguous on both sides (from the inside out) */
    int64_t msh[kMaxDims], mss[kMaxDims], mds[kMaxDims];
    int mn = 0;
    for (int d = nd - 1; d >= 0; --d) {
        if (mn > 0 && ss[d] == msh[mn - 1] * mss[mn - 1] && ds[d] == msh[mn - 1] * mds[mn - 1]) {
            msh[mn - 1] *= sh[d];
        } else {
            msh[mn] = sh[d];
            mss[mn] = ss[d];
            mds[mn] = ds[d];
            ++mn;
        }
    }
    /* msh[0] is now the innermost dimension (byte stride 1 on both sides) */

    /* 3. widest word dividing the innermost run, every other stride and both addresses */
    int64_t w = 16;
    uintptr_t sa = (uintptr_t)src, da = (uintptr_t)dst;
    while (w > 1) {
        bool ok = msh[0] % w == 0 && sa % (uintptr_t)w == 0 && da % (uintptr_t)w == 0;
        for (int d = 1; ok && d < mn; ++d)
            ok = mss[d] % w == 0 && mds[d] % w == 0;
        if (ok)
            break;
        w >>= 1;
    }

    Box box;
    box.ndim = mn;
    int64_t total = 1;
    for (int d = 0; d < mn; ++d) {
        int o = mn - 1 - d; /* kernel wants row-major: outermost first */
        box.shape[o] = d == 0 ? msh[0] / w : msh[d];
        box.sstride[o] = d == 0 ? 1 : mss[d] / w;
        box.dstride[o] = d == 0 ? 1 : mds[d] / w;
        total *= box.shape[o];
    }

    switch (w) {
    case 16: return launch<uint4>(box, total, src, dst, stream);
    case 8: return launch<uint2>(box, total, src, dst, stream);
    case 4: return launch<unsigned int>(box, total, src, dst, stream);
    case 2: return launch<unsigned short>(box, total, src, dst, stream);
    default: return launch<unsigned char>(box, total, src, dst, stream);
    }
}
