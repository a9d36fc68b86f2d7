/* SPDX-License-Identifier: MIT */
/* Attention by products (cpu/nnt_cpu.h): a block of flash attention computed as strided-
 * batched products over whole chunks of query rows, with row kernels between them, through a
 * table of operations. cuda/attention.cu's row kernels and cublas products make it the CUDA
 * path that runs on tensor cores; the CPU twins here define the row kernels and test the
 * orchestration against the CPU flash kernels (cpu/attention.c). */
#include "nnt_cpu.h"

#include <math.h>

/* A run of slabs one product covers: entry t reads q-side slab q0 + t qstride and kv-side
 * slab kv0 + t kvstride, batch row t / bdiv. */
typedef struct {
    int64_t q0, qstride, kv0, kvstride, count, bdiv;
} attn_run;

/* every slab of the blocks, q heads of each kv head in order: `group` runs */
static int map_is_whole(const nnt_attn_map *mp)
{
    return mp->nh == mp->q_hs && mp->q_h0 == 0 && mp->gofs == 0 &&
           mp->q_hs == mp->group * mp->kv_hs;
}

static int64_t run_count(const nnt_attn_map *mp)
{
    return map_is_whole(mp) ? mp->group : mp->nh;
}

static attn_run run_of(const nnt_attn_map *mp, int64_t i)
{
    if (map_is_whole(mp)) {   /* q slab (b kv_hs + j) group + i reads kv slab b kv_hs + j */
        attn_run r = {i, mp->group, 0, 1, mp->nb * mp->kv_hs, mp->kv_hs};
        return r;
    }
    attn_run r = {mp->q_h0 + i, mp->q_hs, (mp->gofs + i) / mp->group, mp->kv_hs, mp->nb, 1};
    return r;
}

/* the chunking: up to `rows` query rows of up to `count` entries a product, within ws
 * (per entry and row, `per` rows of tk floats: the forward's s, the backward's s and dp) */
typedef struct {
    int64_t rows, count;
} attn_chunks;

static int chunks_for(int64_t tq, int64_t tk, int64_t most, int per, int64_t ws_floats,
                      attn_chunks *c)
{
    int64_t r = tq < 256 ? tq : 256;
    int64_t n = ws_floats / (per * r * tk);
    if (n < 1) {
        r = ws_floats / (per * tk);
        n = 1;
    }
    if (r < 1)
        return -1;
    c->rows = r;
    c->count = n < most ? n : most;
    return 0;
}

/* keys [kb, ke) of the block that rows [r0, r0 + rq) may see: from the first row's window
 * start (examples start later still: a superset) to the last row's own key */
static void chunk_keys(int64_t r0, int64_t rq, int64_t tk, int64_t q_pos0, int64_t k_pos0,
                       int64_t w, int64_t *kb, int64_t *ke)
{
    int64_t b = w > 0 ? q_pos0 + r0 - w + 1 - k_pos0 : 0;
    int64_t e = q_pos0 + r0 + rq - 1 - k_pos0 + 1;
    *kb = b < 0 ? 0 : (b > tk ? tk : b);
    *ke = e < 0 ? 0 : (e > tk ? tk : e);
}

int nnt_attn_products_fwd(const nnt_attn_products_ops *ops, const nnt_attn_map *mp, int64_t tq,
                          int64_t tk, int64_t hd, int64_t q_pos0, int64_t k_pos0,
                          int64_t window, const int32_t *qpos, float scale, float cap,
                          const float *q, const float *k, const float *v, float *o_acc,
                          float *m, float *l, float *ws, int64_t ws_floats)
{
    if (tq <= 0 || tk <= 0 || mp->nb <= 0 || mp->nh <= 0)
        return 0;
    for (int64_t ri = 0; ri < run_count(mp); ri++) {
        attn_run run = run_of(mp, ri);
        attn_chunks ch;
        if (chunks_for(tq, tk, run.count, 1, ws_floats, &ch))
            return -1;
        const int64_t sq = run.qstride * tq * hd, skv = run.kvstride * tk * hd;
        for (int64_t t0 = 0; t0 < run.count; t0 += ch.count) {
            int64_t cnt = run.count - t0 < ch.count ? run.count - t0 : ch.count;
            const int64_t qoff = (run.q0 + t0 * run.qstride) * tq * hd;
            const int64_t kvoff = (run.kv0 + t0 * run.kvstride) * tk * hd;
            for (int64_t r0 = 0; r0 < tq; r0 += ch.rows) {
                int64_t rq = tq - r0 < ch.rows ? tq - r0 : ch.rows, kb, ke;
                chunk_keys(r0, rq, tk, q_pos0, k_pos0, window, &kb, &ke);
                int64_t kn = ke - kb;
                if (kn <= 0)
                    continue;
                /* s (cnt, rq, kn) = scale q[r0:] k[kb:ke]^T */
                int rc = ops->gemm(ops->ctx, 0, 1, rq, kn, hd, scale, q + qoff + r0 * hd, hd,
                                   sq, k + kvoff + kb * hd, hd, skv, 0.0f, ws, kn, rq * kn, cnt);
                nnt_attn_rows r = {cnt, rq, kn, tq, hd, r0, run.q0, run.qstride, t0,
                                   run.bdiv, q_pos0, k_pos0, kb, window, qpos, cap};
                if (rc == 0)
                    rc = ops->rows_fwd(ops->ctx, &r, ws, m, l, o_acc);
                /* o_acc[r0:] += p v[kb:ke] */
                if (rc == 0)
                    rc = ops->gemm(ops->ctx, 0, 0, rq, hd, kn, 1.0f, ws, kn, rq * kn,
                                   v + kvoff + kb * hd, hd, skv, 1.0f, o_acc + qoff + r0 * hd,
                                   hd, sq, cnt);
                if (rc)
                    return rc;
            }
        }
    }
    return 0;
}

int nnt_attn_products_bwd(const nnt_attn_products_ops *ops, const nnt_attn_map *mp, int64_t tq,
                          int64_t tk, int64_t hd, int64_t q_pos0, int64_t k_pos0,
                          int64_t window, const int32_t *qpos, float scale, float cap,
                          const float *q, const float *k, const float *v, const float *dout,
                          const float *lse, const float *d, float *dq, float *dk, float *dv,
                          float *ws, int64_t ws_floats)
{
    if (tq <= 0 || tk <= 0 || mp->nb <= 0 || mp->nh <= 0)
        return 0;
    for (int64_t ri = 0; ri < run_count(mp); ri++) {
        attn_run run = run_of(mp, ri);
        attn_chunks ch;
        if (chunks_for(tq, tk, run.count, 2, ws_floats, &ch))
            return -1;
        float *s = ws, *dp = ws + ch.count * ch.rows * tk;
        const int64_t sq = run.qstride * tq * hd, skv = run.kvstride * tk * hd;
        for (int64_t t0 = 0; t0 < run.count; t0 += ch.count) {
            int64_t cnt = run.count - t0 < ch.count ? run.count - t0 : ch.count;
            const int64_t qoff = (run.q0 + t0 * run.qstride) * tq * hd;
            const int64_t kvoff = (run.kv0 + t0 * run.kvstride) * tk * hd;
            for (int64_t r0 = 0; r0 < tq; r0 += ch.rows) {
                int64_t rq = tq - r0 < ch.rows ? tq - r0 : ch.rows, kb, ke;
                chunk_keys(r0, rq, tk, q_pos0, k_pos0, window, &kb, &ke);
                int64_t kn = ke - kb, sp = rq * kn;
                if (kn <= 0)
                    continue;
                const int64_t iq = qoff + r0 * hd, ik = kvoff + kb * hd;
                /* s = scale q k^T, dp = dout v^T (cnt, rq, kn) */
                int rc = ops->gemm(ops->ctx, 0, 1, rq, kn, hd, scale, q + iq, hd, sq, k + ik, hd,
                                   skv, 0.0f, s, kn, sp, cnt);
                if (rc == 0)
                    rc = ops->gemm(ops->ctx, 0, 1, rq, kn, hd, 1.0f, dout + iq, hd, sq, v + ik,
                                   hd, skv, 0.0f, dp, kn, sp, cnt);
                nnt_attn_rows r = {cnt, rq, kn, tq, hd, r0, run.q0, run.qstride, t0,
                                   run.bdiv, q_pos0, k_pos0, kb, window, qpos, cap};
                if (rc == 0)
                    rc = ops->rows_bwd(ops->ctx, &r, s, dp, lse, d);
                /* dv[kb:] += p^T dout;  dq[r0:] += scale ds k;  dk[kb:] += scale ds^T q */
                if (rc == 0)
                    rc = ops->gemm(ops->ctx, 1, 0, kn, hd, rq, 1.0f, s, kn, sp, dout + iq, hd, sq,
                                   1.0f, dv + ik, hd, skv, cnt);
                if (rc == 0)
                    rc = ops->gemm(ops->ctx, 0, 0, rq, hd, kn, scale, dp, kn, sp, k + ik, hd,
                                   skv, 1.0f, dq + iq, hd, sq, cnt);
                if (rc == 0)
                    rc = ops->gemm(ops->ctx, 1, 0, kn, hd, rq, scale, dp, kn, sp, q + iq, hd, sq,
                                   1.0f, dk + ik, hd, skv, cnt);
                if (rc)
                    return rc;
            }
        }
    }
    return 0;
}

/* ---- the row kernels' definition (CPU twins; cuda/attention.cu follows it) ----------------- */

/* Whether the query at qp (position p from qpos, or none) sees the key at kp. */
static inline int key_seen(int64_t qp, int64_t kp, int64_t w, const int32_t *pos)
{
    if (kp > qp || (w > 0 && kp <= qp - w))
        return 0;
    if (pos) {
        int64_t p = *pos < 0 ? 0 : (*pos > qp ? qp : *pos);
        return kp >= qp - p;
    }
    return 1;
}

static inline const int32_t *row_pos(const nnt_attn_rows *r, int64_t e, int64_t i)
{
    return r->qpos ? r->qpos + ((r->t0 + e) / r->bdiv) * r->tq + i : NULL;
}

static inline int64_t row_index(const nnt_attn_rows *r, int64_t e, int64_t i)
{
    return (r->q0 + (r->t0 + e) * r->qstride) * r->tq + i;
}

int nnt_cpu_attn_rows_fwd_f32(void *ctx, const nnt_attn_rows *r, float *s, float *m, float *l,
                              float *o_acc)
{
    (void)ctx;
    for (int64_t e = 0; e < r->count; e++)
        for (int64_t rr = 0; rr < r->rows; rr++) {
            const int64_t i = r->r0 + rr, qp = r->q_pos0 + i, ri = row_index(r, e, i);
            const int32_t *pos = row_pos(r, e, i);
            float *row = s + (e * r->rows + rr) * r->keys;
            float bm = -INFINITY;
            int seen = 0;
            for (int64_t j = 0; j < r->keys; j++) {
                if (!key_seen(qp, r->k_pos0 + r->kb + j, r->window, pos)) {
                    row[j] = -INFINITY;
                    continue;
                }
                seen = 1;
                if (r->cap > 0.0f)
                    row[j] = r->cap * tanhf(row[j] / r->cap);
                bm = row[j] > bm ? row[j] : bm;
            }
            if (!seen) {   /* no key of the chunk: the row is left as it was */
                for (int64_t j = 0; j < r->keys; j++)
                    row[j] = 0.0f;
                continue;
            }
            const float mnew = m[ri] > bm ? m[ri] : bm;
            const float alpha = expf(m[ri] - mnew);   /* 0 when m was -inf */
            float sum = 0.0f;
            for (int64_t j = 0; j < r->keys; j++) {
                row[j] = expf(row[j] - mnew);   /* masked: exp(-inf) = 0 */
                sum += row[j];
            }
            l[ri] = l[ri] * alpha + sum;
            m[ri] = mnew;
            for (int64_t c = 0; c < r->hd; c++)
                o_acc[ri * r->hd + c] *= alpha;
        }
    return 0;
}

int nnt_cpu_attn_rows_bwd_f32(void *ctx, const nnt_attn_rows *r, float *s, float *dp,
                              const float *lse, const float *d)
{
    (void)ctx;
    for (int64_t e = 0; e < r->count; e++)
        for (int64_t rr = 0; rr < r->rows; rr++) {
            const int64_t i = r->r0 + rr, qp = r->q_pos0 + i, ri = row_index(r, e, i);
            const int32_t *pos = row_pos(r, e, i);
            float *srow = s + (e * r->rows + rr) * r->keys, *drow = dp + (e * r->rows + rr) * r->keys;
            const int none = isinf(lse[ri]);   /* a row that sees no key at all */
            for (int64_t j = 0; j < r->keys; j++) {
                if (none || !key_seen(qp, r->k_pos0 + r->kb + j, r->window, pos)) {
                    srow[j] = drow[j] = 0.0f;
                    continue;
                }
                float x = srow[j], g = 1.0f;
                if (r->cap > 0.0f) {
                    const float t = tanhf(x / r->cap);
                    x = r->cap * t;
                    g = 1.0f - t * t;
                }
                const float p = expf(x - lse[ri]);
                srow[j] = p;
                drow[j] = p * (drow[j] - d[ri]) * g;
            }
        }
    return 0;
}

static int cpu_gemm(void *ctx, int trans_a, int trans_b, int64_t m, int64_t n, int64_t k,
                    float alpha, const float *a, int64_t lda, int64_t stride_a, const float *b,
                    int64_t ldb, int64_t stride_b, float beta, float *c, int64_t ldc,
                    int64_t stride_c, int64_t batch)
{
    (void)ctx;
    nnt_cpu_gemm_f32(trans_a, trans_b, m, n, k, alpha, a, lda, stride_a, b, ldb, stride_b, beta,
                     c, ldc, stride_c, batch);
    return 0;
}

const nnt_attn_products_ops nnt_cpu_attn_products_ops = {
    NULL, cpu_gemm, nnt_cpu_attn_rows_fwd_f32, nnt_cpu_attn_rows_bwd_f32,
};
