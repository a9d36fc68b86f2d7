// SPDX-License-Identifier: MIT
/* The routing of one token over E experts, shared by the CPU kernels (cpu/moe.c, C99) and the
 * CUDA ones (cuda/moe.cu: device functions, one thread per token): softmax, the top-k
 * selection as torch.topk makes it on a CPU (ties included), the renormalisation, and the
 * gradient. One copy of the selection, so that a GPU picks the experts a CPU picks for the
 * same probabilities. No library calls but expf (the C library's on the CPU, CUDA's on the
 * GPU: the probabilities agree to rounding). */
#ifndef NNT_CPU_MOE_ROUTE_H
#define NNT_CPU_MOE_ROUTE_H

#include <math.h>
#include <stdint.h>

#ifdef __CUDACC__
#define NNT_MOE_FN static __device__ inline
#else
#define NNT_MOE_FN static inline
#endif

/* ---- top-k as torch.topk(largest, sorted) on CPU ---------------------------------------
 * torch (aten's CPU topk) pairs each value with its index and, for k * 64 > E, runs
 * std::nth_element(begin, begin + k - 1, end, greater-by-value) and then
 * std::sort on the first k - 1; which of equal values are selected follows from libstdc++'s
 * introselect (median-of-three pivot moved to the front, unguarded Hoare partition,
 * insertion sort once a range has at most 3 elements; heap selection after 2 log2(E)
 * rounds). The selection below runs the same steps so that ties pick the experts
 * transformers picks. Values compare by '>' only (NaN never occurs: they are
 * probabilities). */

typedef struct nnt_moe_pair {
    float v;
    int32_t i;
} moe_pair;

NNT_MOE_FN void moe_pair_swap(moe_pair *a, moe_pair *b)
{
    moe_pair t = *a;
    *a = *b;
    *b = t;
}

/* q[r] = the median of q[a], q[b], q[c] (swapped in) */
NNT_MOE_FN void moe_median_to_first(moe_pair *q, int r, int a, int b, int c)
{
    if (q[a].v > q[b].v) {
        if (q[b].v > q[c].v)
            moe_pair_swap(&q[r], &q[b]);
        else if (q[a].v > q[c].v)
            moe_pair_swap(&q[r], &q[c]);
        else
            moe_pair_swap(&q[r], &q[a]);
    } else if (q[a].v > q[c].v)
        moe_pair_swap(&q[r], &q[a]);
    else if (q[b].v > q[c].v)
        moe_pair_swap(&q[r], &q[c]);
    else
        moe_pair_swap(&q[r], &q[b]);
}

/* Hoare partition of [f, l) around q[p] (no bound checks: the median guards both ends) */
NNT_MOE_FN int moe_partition(moe_pair *q, int f, int l, int p)
{
    for (;;) {
        while (q[f].v > q[p].v)
            f++;
        l--;
        while (q[p].v > q[l].v)
            l--;
        if (!(f < l))
            return f;
        moe_pair_swap(&q[f], &q[l]);
        f++;
    }
}

/* Stable insertion sort of [f, l), largest first. */
NNT_MOE_FN void moe_insertion_sort(moe_pair *q, int f, int l)
{
    for (int i = f + 1; i < l; i++) {
        moe_pair v = q[i];
        int j = i;
        if (v.v > q[f].v) {   /* std::move_backward of [f, i) */
            for (; j > f; j--)
                q[j] = q[j - 1];
            q[f] = v;
            continue;
        }
        while (v.v > q[j - 1].v) {
            q[j] = q[j - 1];
            j--;
        }
        q[j] = v;
    }
}

/* libstdc++'s heap with the order '>' (its top the smallest value), used once the
 * introselect depth runs out: sift v down from hole in q[0..len), then back up. */
NNT_MOE_FN void moe_sift_down(moe_pair *q, int hole, int len, moe_pair v)
{
    int top = hole, child = hole;
    while (child < (len - 1) / 2) {
        child = 2 * (child + 1);
        if (q[child - 1].v < q[child].v)   /* comp(child, child - 1): the larger by comp */
            child--;
        q[hole] = q[child];
        hole = child;
    }
    if ((len & 1) == 0 && child == (len - 2) / 2) {
        child = 2 * (child + 1);
        q[hole] = q[child - 1];
        hole = child - 1;
    }
    int parent = (hole - 1) / 2;   /* push back up */
    while (hole > top && q[parent].v > v.v) {
        q[hole] = q[parent];
        hole = parent;
        parent = (hole - 1) / 2;
    }
    q[hole] = v;
}

NNT_MOE_FN void moe_heap_select(moe_pair *q, int mid, int len)
{
    if (mid > 1)
        for (int parent = (mid - 2) / 2;; parent--) {
            moe_sift_down(q, parent, mid, q[parent]);
            if (parent == 0)
                break;
        }
    for (int i = mid; i < len; i++)
        if (q[i].v > q[0].v) {
            moe_pair v = q[i];
            q[i] = q[0];
            moe_sift_down(q, 0, mid, v);
        }
}

NNT_MOE_FN void moe_nth_element(moe_pair *q, int n, int len)
{
    int f = 0, l = len, depth = 0;
    for (int m = len; m > 1; m >>= 1)
        depth += 2;
    while (l - f > 3) {
        if (depth == 0) {
            moe_heap_select(q + f, n - f + 1, l - f);
            moe_pair_swap(&q[f], &q[n]);
            return;
        }
        depth--;
        moe_median_to_first(q, f, f + 1, f + (l - f) / 2, l - 1);
        int cut = moe_partition(q, f + 1, l, f);
        if (cut <= n)
            f = cut;
        else
            l = cut;
    }
    moe_insertion_sort(q, f, l);
}

/* The first k of q[0..len) in order, largest first, as std::partial_sort leaves them (a heap
 * of the k largest, then sorted by popping it). */
NNT_MOE_FN void moe_partial_sort(moe_pair *q, int k, int len)
{
    moe_heap_select(q, k, len);
    for (int last = k; last > 1;) {
        last--;
        moe_pair v = q[last];
        q[last] = q[0];
        moe_sift_down(q, 0, last, v);
    }
}

/* idx[0..k) = torch.topk(p[0..E), k).indices; q: E pairs of scratch. torch takes the
 * partial sort when k * 64 <= E, else nth_element and a sort of the first k - 1. */
NNT_MOE_FN void moe_topk(int64_t E, int64_t k, const float *p, int32_t *idx, moe_pair *q)
{
    for (int64_t e = 0; e < E; e++) {
        q[e].v = p[e];
        q[e].i = (int32_t)e;
    }
    if (k * 64 <= E) {
        moe_partial_sort(q, (int)k, (int)E);
    } else {
        moe_nth_element(q, (int)k - 1, (int)E);
        moe_insertion_sort(q, 0, (int)k - 1);
    }
    for (int64_t j = 0; j < k; j++)
        idx[j] = q[j].i;
}

/* ---- routing of one token ------------------------------------------------------------------ */

/* p[0..E) = softmax(z) (the sum in double), idx[0..k) = torch.topk(p, k).indices, w[0..k)
 * the chosen probabilities (divided by their sum if norm); q: E pairs of scratch. */
NNT_MOE_FN void nnt_moe_route_row(int64_t E, int64_t k, int norm, const float *z, float *p,
                                  int32_t *idx, float *w, moe_pair *q)
{
    float mx = z[0];
    for (int64_t e = 1; e < E; e++)
        mx = z[e] > mx ? z[e] : mx;
    double sum = 0.0;
    for (int64_t e = 0; e < E; e++) {
        p[e] = expf(z[e] - mx);
        sum += p[e];
    }
    float inv = (float)(1.0 / sum);
    for (int64_t e = 0; e < E; e++)
        p[e] *= inv;
    moe_topk(E, k, p, idx, q);
    float s = 0.0f;
    for (int64_t j = 0; j < k; j++)
        s += p[idx[j]];
    for (int64_t j = 0; j < k; j++)
        w[j] = norm ? p[idx[j]] / s : p[idx[j]];
}

/* dz[0..E) (d loss / d logits) of one token from dw[0..k) through the (renormalised) top-k
 * and the softmax, plus aux[0..E) (NULL: none) on every probability. */
NNT_MOE_FN void nnt_moe_route_bwd_row(int64_t E, int64_t k, int norm, const float *p,
                                      const int32_t *it, const float *wt, const float *dwt,
                                      const float *aux, float *dz)
{
    /* dz doubles as dp (d loss / d probability) first */
    for (int64_t e = 0; e < E; e++)
        dz[e] = aux ? aux[e] : 0.0f;
    if (norm) {   /* w_j = p_j / S: dp_j = (dw_j - sum_m dw_m w_m) / S */
        double s = 0.0, dot = 0.0;
        for (int64_t j = 0; j < k; j++) {
            s += p[it[j]];
            dot += (double)dwt[j] * wt[j];
        }
        for (int64_t j = 0; j < k; j++)
            dz[it[j]] += (float)((dwt[j] - dot) / s);
    } else
        for (int64_t j = 0; j < k; j++)
            dz[it[j]] += dwt[j];
    double pdp = 0.0;   /* softmax: dz_e = p_e (dp_e - sum_f p_f dp_f) */
    for (int64_t e = 0; e < E; e++)
        pdp += (double)p[e] * dz[e];
    for (int64_t e = 0; e < E; e++)
        dz[e] = (float)(p[e] * (dz[e] - pdp));
}

#endif
