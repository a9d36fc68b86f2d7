// SPDX-License-Identifier: MIT
/* Mixture-of-experts kernels: the routing of n tokens over E experts (softmax, top-k as
 * torch.topk selects on CPU, optional renormalisation) and its gradient, and the row maps
 * that gather tokens into an expert's rows and scatter its outputs back. */
#include "nnt_cpu.h"

#include <math.h>
#include <string.h>

/* ---- top-k as torch.topk(largest, sorted) on CPU -----------------------------------------
 * torch (aten's CPU topk) pairs each value with its index and, for k * 64 > E, runs
 * std::nth_element(begin, begin + k - 1, end, greater-by-value) and then
 * std::sort on the first k - 1; which of equal values are selected follows from libstdc++'s
 * introselect (median-of-three pivot moved to the front, unguarded Hoare partition,
 * insertion sort once a range has at most 3 elements; heap selection after 2 log2(E)
 * rounds). The selection below runs the same steps so that ties pick the experts
 * transformers picks. Values compare by '>' only (NaN never occurs: they are
 * probabilities). */

typedef struct moe_pair {
    float v;
    int32_t i;
} moe_pair;

static void pair_swap(moe_pair *a, moe_pair *b)
{
    moe_pair t = *a;
    *a = *b;
    *b = t;
}

/* q[r] = the median of q[a], q[b], q[c] (swapped in) */
static void median_to_first(moe_pair *q, int r, int a, int b, int c)
{
    if (q[a].v > q[b].v) {
        if (q[b].v > q[c].v)
            pair_swap(&q[r], &q[b]);
        else if (q[a].v > q[c].v)
            pair_swap(&q[r], &q[c]);
        else
            pair_swap(&q[r], &q[a]);
    } else if (q[a].v > q[c].v)
        pair_swap(&q[r], &q[a]);
    else if (q[b].v > q[c].v)
        pair_swap(&q[r], &q[c]);
    else
        pair_swap(&q[r], &q[b]);
}

/* Hoare partition of [f, l) around q[p] (no bound checks: the median guards both ends) */
static int partition(moe_pair *q, int f, int l, int p)
{
    for (;;) {
        while (q[f].v > q[p].v)
            f++;
        l--;
        while (q[p].v > q[l].v)
            l--;
        if (!(f < l))
            return f;
        pair_swap(&q[f], &q[l]);
        f++;
    }
}

/* Stable insertion sort of [f, l), largest first. */
static void insertion_sort(moe_pair *q, int f, int l)
{
    for (int i = f + 1; i < l; i++) {
        moe_pair v = q[i];
        int j = i;
        if (v.v > q[f].v) {
            memmove(q + f + 1, q + f, (size_t)(i - f) * sizeof *q);
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
static void sift_down(moe_pair *q, int hole, int len, moe_pair v)
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

static void heap_select(moe_pair *q, int mid, int len)
{
    if (mid > 1)
        for (int parent = (mid - 2) / 2;; parent--) {
            sift_down(q, parent, mid, q[parent]);
            if (parent == 0)
                break;
        }
    for (int i = mid; i < len; i++)
        if (q[i].v > q[0].v) {
            moe_pair v = q[i];
            q[i] = q[0];
            sift_down(q, 0, mid, v);
        }
}

static void nth_element(moe_pair *q, int n, int len)
{
    int f = 0, l = len, depth = 0;
    for (int m = len; m > 1; m >>= 1)
        depth += 2;
    while (l - f > 3) {
        if (depth == 0) {
            heap_select(q + f, n - f + 1, l - f);
            pair_swap(&q[f], &q[n]);
            return;
        }
        depth--;
        median_to_first(q, f, f + 1, f + (l - f) / 2, l - 1);
        int cut = partition(q, f + 1, l, f);
        if (cut <= n)
            f = cut;
        else
            l = cut;
    }
    insertion_sort(q, f, l);
}

/* The first k of q[0..len) in order, largest first, as std::partial_sort leaves them (a heap
 * of the k largest, then sorted by popping it). */
static void partial_sort(moe_pair *q, int k, int len)
{
    heap_select(q, k, len);
    for (int last = k; last > 1;) {
        last--;
        moe_pair v = q[last];
        q[last] = q[0];
        sift_down(q, 0, last, v);
    }
}

/* idx[0..k) = torch.topk(p[0..E), k).indices; q: E pairs of scratch. torch takes the
 * partial sort when k * 64 <= E, else nth_element and a sort of the first k - 1. */
static void topk(int64_t E, int64_t k, const float *p, int32_t *idx, moe_pair *q)
{
    for (int64_t e = 0; e < E; e++) {
        q[e].v = p[e];
        q[e].i = (int32_t)e;
    }
    if (k * 64 <= E) {
        partial_sort(q, (int)k, (int)E);
    } else {
        nth_element(q, (int)k - 1, (int)E);
        insertion_sort(q, 0, (int)k - 1);
    }
    for (int64_t j = 0; j < k; j++)
        idx[j] = q[j].i;
}

/* ---- routing ------------------------------------------------------------------------------ */

void nnt_cpu_moe_route_f32(int64_t n, int64_t E, int64_t k, int norm, const float *logits,
                           float *probs, int32_t *idx, float *w)
{
    moe_pair q[NNT_MOE_MAX_EXPERTS];
    for (int64_t t = 0; t < n; t++) {
        const float *z = logits + t * E;
        float *p = probs + t * E;
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
        topk(E, k, p, idx + t * k, q);
        float s = 0.0f;
        for (int64_t j = 0; j < k; j++)
            s += p[idx[t * k + j]];
        for (int64_t j = 0; j < k; j++)
            w[t * k + j] = norm ? p[idx[t * k + j]] / s : p[idx[t * k + j]];
    }
}

void nnt_cpu_moe_route_bwd_f32(int64_t n, int64_t E, int64_t k, int norm, const float *probs,
                               const int32_t *idx, const float *w, const float *dw,
                               const float *aux, float *dlogits)
{
    for (int64_t t = 0; t < n; t++) {
        const float *p = probs + t * E;
        const int32_t *it = idx + t * k;
        const float *wt = w + t * k, *dwt = dw + t * k;
        float *dz = dlogits + t * E;
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
}

/* ---- row maps ----------------------------------------------------------------------------- */

void nnt_cpu_moe_gather_f32(int64_t width, int64_t m, const int32_t *map, const float *src,
                            const float *w, int64_t k, float *dst)
{
    for (int64_t r = 0; r < m; r++) {
        const float *s = src + (int64_t)map[3 * r] * width;
        float *d = dst + (int64_t)map[3 * r + 1] * width;
        if (!w) {
            memcpy(d, s, (size_t)width * sizeof *d);
            continue;
        }
        float a = w[(int64_t)map[3 * r] * k + map[3 * r + 2]];
        for (int64_t c = 0; c < width; c++)
            d[c] = a * s[c];
    }
}

void nnt_cpu_moe_scatter_add_f32(int64_t width, int64_t m, const int32_t *map,
                                 const float *src, const float *w, int64_t k, float *dst)
{
    for (int64_t r = 0; r < m; r++) {
        const float *s = src + (int64_t)map[3 * r] * width;
        float *d = dst + (int64_t)map[3 * r + 1] * width;
        float a = w ? w[(int64_t)map[3 * r + 1] * k + map[3 * r + 2]] : 1.0f;
        for (int64_t c = 0; c < width; c++)
            d[c] += a * s[c];
    }
}

void nnt_cpu_moe_weight_grad_f32(int64_t width, int64_t m, const int32_t *map,
                                 const float *dy, const float *y, int64_t k, float *dw)
{
    for (int64_t r = 0; r < m; r++) {
        const float *g = dy + (int64_t)map[3 * r] * width;
        const float *v = y + (int64_t)map[3 * r + 1] * width;
        double dot = 0.0;
        for (int64_t c = 0; c < width; c++)
            dot += (double)g[c] * v[c];
        dw[(int64_t)map[3 * r] * k + map[3 * r + 2]] += (float)dot;
    }
}

/* ---- the shared expert's sigmoid gate ------------------------------------------------------ */

static float sigmoid(float z)
{
    return 1.0f / (1.0f + expf(-z));
}

void nnt_cpu_moe_shared_add_f32(int64_t n, int64_t width, const float *z, const float *s,
                                float *y)
{
    for (int64_t r = 0; r < n; r++) {
        float g = sigmoid(z[r]);
        for (int64_t c = 0; c < width; c++)
            y[r * width + c] += g * s[r * width + c];
    }
}

void nnt_cpu_moe_shared_bwd_f32(int64_t n, int64_t width, int accumulate, const float *z,
                                const float *s, const float *dy, float *ds, float *dz)
{
    for (int64_t r = 0; r < n; r++) {
        float g = sigmoid(z[r]);
        double dot = 0.0;
        for (int64_t c = 0; c < width; c++) {
            ds[r * width + c] = g * dy[r * width + c];
            dot += (double)dy[r * width + c] * s[r * width + c];
        }
        float d = (float)((double)g * (1.0 - (double)g) * dot);
        dz[r] = accumulate ? dz[r] + d : d;
    }
}
