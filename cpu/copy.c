/* SPDX-License-Identifier: MIT */
/* nnt CPU kernels: strided box copy (retiling, head transposes). */
#include "nnt_cpu.h"

#include <string.h>

#define COPY_MAXDIM 8

/* Copy n elements of elsize bytes with element strides ss (src) and ds (dst). */
static void copy_row(int64_t n, size_t elsize, const char *restrict src, int64_t ss,
                     char *restrict dst, int64_t ds)
{
    if (ss == 1 && ds == 1) {
        memcpy(dst, src, (size_t)n * elsize);
        return;
    }
    switch (elsize) {
    case 4: {
        const uint32_t *s = (const uint32_t *)(const void *)src;
        uint32_t *d = (uint32_t *)(void *)dst;
        for (int64_t i = 0; i < n; i++)
            d[i * ds] = s[i * ss];
        break;
    }
    case 2: {
        const uint16_t *s = (const uint16_t *)(const void *)src;
        uint16_t *d = (uint16_t *)(void *)dst;
        for (int64_t i = 0; i < n; i++)
            d[i * ds] = s[i * ss];
        break;
    }
    case 8: {
        const uint64_t *s = (const uint64_t *)(const void *)src;
        uint64_t *d = (uint64_t *)(void *)dst;
        for (int64_t i = 0; i < n; i++)
            d[i * ds] = s[i * ss];
        break;
    }
    default:
        for (int64_t i = 0; i < n; i++)
            memcpy(dst + i * ds * (int64_t)elsize, src + i * ss * (int64_t)elsize, elsize);
    }
}

/* Drop unit dimensions and merge neighbours that are contiguous on both sides.
 * Returns the new number of dimensions (0 means a single element), or -1 if empty. */
static int coalesce(int ndim, const int64_t *shape, const int64_t *ss, const int64_t *ds,
                    int64_t *cshape, int64_t *css, int64_t *cds)
{
    int nd = 0;
    for (int d = 0; d < ndim; d++) {
        if (shape[d] <= 0)
            return -1;
        if (shape[d] == 1)
            continue;
        cshape[nd] = shape[d];
        css[nd] = ss[d];
        cds[nd] = ds[d];
        nd++;
    }
    /* merge from the inside out: dim d-1 folds into d when stride[d-1] == shape[d]*stride[d] */
    int out = 0;
    for (int d = 0; d < nd; d++) {
        if (out > 0 && css[out - 1] == cshape[d] * css[d] && cds[out - 1] == cshape[d] * cds[d]) {
            cshape[out - 1] *= cshape[d];
            css[out - 1] = css[d];
            cds[out - 1] = cds[d];
        } else {
            cshape[out] = cshape[d];
            css[out] = css[d];
            cds[out] = cds[d];
            out++;
        }
    }
    return out;
}

void nnt_cpu_copy_box(int ndim, const int64_t *shape, size_t elsize, const void *src,
                      const int64_t *src_stride, void *dst, const int64_t *dst_stride)
{
    int64_t sh[COPY_MAXDIM], ss[COPY_MAXDIM], ds[COPY_MAXDIM];
    if (ndim < 1 || ndim > COPY_MAXDIM || elsize == 0)
        return;
    int nd = coalesce(ndim, shape, src_stride, dst_stride, sh, ss, ds);
    if (nd < 0)
        return;
    if (nd == 0) {
        memcpy(dst, src, elsize);
        return;
    }
    const char *s = src;
    char *d = dst;
    int64_t es = (int64_t)elsize;
    int64_t idx[COPY_MAXDIM] = {0};
    int inner = nd - 1;
    int64_t soff = 0, doff = 0; /* element offsets of the current row */
    for (;;) {
        copy_row(sh[inner], elsize, s + soff * es, ss[inner], d + doff * es, ds[inner]);
        /* odometer over the outer dimensions */
        int k = inner - 1;
        while (k >= 0) {
            idx[k]++;
            soff += ss[k];
            doff += ds[k];
            if (idx[k] < sh[k])
                break;
            soff -= idx[k] * ss[k];
            doff -= idx[k] * ds[k];
            idx[k] = 0;
            k--;
        }
        if (k < 0)
            break;
    }
}
