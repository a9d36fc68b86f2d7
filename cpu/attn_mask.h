/* SPDX-License-Identifier: MIT */
/* nnt CPU kernels: which keys of a key block a query sees (internal; the flash kernels,
 * cpu/attention.c, and the attention by products, cpu/attn_products.c). Keys are counted from
 * the block's first, at position k_pos0; the query is at position qp. */
#ifndef NNT_CPU_ATTN_MASK_H
#define NNT_CPU_ATTN_MASK_H

#include <stdint.h>

/* number of keys in the block visible to the query at absolute position qp */
static inline int64_t nvis(int64_t qp, int64_t k_pos0, int64_t tk)
{
    int64_t n = qp - k_pos0 + 1;
    return n < 0 ? 0 : (n > tk ? tk : n);
}

/* first key in the block visible to the query at qp under window w (0: none) */
static inline int64_t nlo(int64_t qp, int64_t k_pos0, int64_t tk, int64_t w)
{
    if (w <= 0)
        return 0;
    int64_t n = qp - w + 1 - k_pos0;
    return n < 0 ? 0 : (n > tk ? tk : n);
}

/* first key in the block visible to the query at qp: the window's (w 0: none) and, with
 * positions, its example's: the query at position pos sees the pos keys before it and itself
 * (pos clamped to [0, qp]), the keys from qp - pos on */
static inline int64_t row_lo(int64_t qp, int64_t k_pos0, int64_t tk, int64_t w,
                             const int32_t *pos, int64_t i)
{
    int64_t n = nlo(qp, k_pos0, tk, w);
    if (pos) {
        int64_t p = pos[i] < 0 ? 0 : (pos[i] > qp ? qp : pos[i]);
        int64_t s = qp - p - k_pos0;
        s = s < 0 ? 0 : (s > tk ? tk : s);
        n = s > n ? s : n;
    }
    return n;
}

#endif /* NNT_CPU_ATTN_MASK_H */
