/* SPDX-License-Identifier: MIT */
/* Attention by products (cpu/nnt_cpu.h): a block of flash attention computed as strided-
 * batched products over whole chunks of query rows, with row kernels between them, through a
 * table of operations. cuda/attention.cu's row kernels and cublas products make it the CUDA
 * path that runs on tensor cores; the CPU twins here define the row kernels and test the
 * orchestration against the CPU flash kernels (cpu/attention.c). */
#include "nnt_cpu.h"
#include "attn_mask.h"

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
    *kb = nlo(q_pos0 + r0, k_pos0, tk, w);
    *ke = nvis(q_pos0 + r0 + rq - 1, k_pos0, tk);
}

/* One chunk: entries [t0, t0 + cnt) of a run, query rows [r0, r0 + rq), keys [kb, kb + kn);
 * qo, ko: offsets of its first query row and first key in the q-side and kv-side tiles;
 * sq, skv: the strides between entries there. */
typedef struct {
    attn_run run;
    int64_t t0, cnt, r0, rq, kb, kn, qo, ko, sq, skv;
} attn_chunk;

typedef int (*chunk_fn)(const attn_chunk *c, void *arg);

/* fn on every chunk of the block that a query row's keys reach, run by run (per: tk-float
 * rows of scratch a query row takes), in order; the first nonzero return ends it. */
static int for_each_chunk(const nnt_attn_map *mp, int64_t tq, int64_t tk, int64_t hd,
                          int64_t q_pos0, int64_t k_pos0, int64_t w, int per, int64_t ws_floats,
                          chunk_fn fn, void *arg)
{
    if (tq <= 0 || tk <= 0 || mp->nb <= 0 || mp->nh <= 0)
        return 0;
    for (int64_t ri = 0; ri < run_count(mp); ri++) {
        attn_chunk c;
        c.run = run_of(mp, ri);
        attn_chunks ch;
        if (chunks_for(tq, tk, c.run.count, per, ws_floats, &ch))
            return -1;
        c.sq = c.run.qstride * tq * hd, c.skv = c.run.kvstride * tk * hd;
        for (c.t0 = 0; c.t0 < c.run.count; c.t0 += ch.count) {
            c.cnt = c.run.count - c.t0 < ch.count ? c.run.count - c.t0 : ch.count;
            for (c.r0 = 0; c.r0 < tq; c.r0 += ch.rows) {
                int64_t ke;
                c.rq = tq - c.r0 < ch.rows ? tq - c.r0 : ch.rows;
                chunk_keys(c.r0, c.rq, tk, q_pos0, k_pos0, w, &c.kb, &ke);
                c.kn = ke - c.kb;
                if (c.kn <= 0)
                    continue;
                c.qo = (c.run.q0 + c.t0 * c.run.qstride) * tq * hd + c.r0 * hd;
                c.ko = (c.run.kv0 + c.t0 * c.run.kvstride) * tk * hd + c.kb * hd;
                int rc = fn(&c, arg);
                if (rc)
                    return rc;
            }
        }
    }
    return 0;
}

/* a block's arguments, for the chunks */
typedef struct {
    const nnt_attn_products_ops *ops;
    int64_t tq, hd, q_pos0, k_pos0, window;
    const int32_t *qpos;
    float scale, cap;
    const float *q, *k, *v, *dout, *lse, *d;
    float *o_acc, *m, *l, *dq, *dk, *dv, *s, *dp;
} attn_block;

static nnt_attn_rows rows_of(const attn_block *b, const attn_chunk *c)
{
    nnt_attn_rows r = {c->cnt, c->rq, c->kn, b->tq, b->hd, c->r0, c->run.q0, c->run.qstride,
                       c->t0, c->run.bdiv, b->q_pos0, b->k_pos0, c->kb, b->window, b->qpos,
                       b->cap};
    return r;
}

static int fwd_chunk(const attn_chunk *c, void *arg)
{
    const attn_block *b = arg;
    const nnt_attn_products_ops *ops = b->ops;
    const int64_t sp = c->rq * c->kn;
    /* s (cnt, rq, kn) = scale q[r0:] k[kb:]^T */
    int rc = ops->gemm(ops->ctx, 0, 1, c->rq, c->kn, b->hd, b->scale, b->q + c->qo, b->hd, c->sq,
                       b->k + c->ko, b->hd, c->skv, 0.0f, b->s, c->kn, sp, c->cnt);
    nnt_attn_rows r = rows_of(b, c);
    if (rc == 0)
        rc = ops->rows_fwd(ops->ctx, &r, b->s, b->m, b->l, b->o_acc);
    /* o_acc[r0:] += p v[kb:] */
    if (rc == 0)
        rc = ops->gemm(ops->ctx, 0, 0, c->rq, b->hd, c->kn, 1.0f, b->s, c->kn, sp, b->v + c->ko,
                       b->hd, c->skv, 1.0f, b->o_acc + c->qo, b->hd, c->sq, c->cnt);
    return rc;
}

static int bwd_chunk(const attn_chunk *c, void *arg)
{
    const attn_block *b = arg;
    const nnt_attn_products_ops *ops = b->ops;
    const int64_t sp = c->rq * c->kn, hd = b->hd;
    /* s = scale q k^T, dp = dout v^T (cnt, rq, kn) */
    int rc = ops->gemm(ops->ctx, 0, 1, c->rq, c->kn, hd, b->scale, b->q + c->qo, hd, c->sq,
                       b->k + c->ko, hd, c->skv, 0.0f, b->s, c->kn, sp, c->cnt);
    if (rc == 0)
        rc = ops->gemm(ops->ctx, 0, 1, c->rq, c->kn, hd, 1.0f, b->dout + c->qo, hd, c->sq,
                       b->v + c->ko, hd, c->skv, 0.0f, b->dp, c->kn, sp, c->cnt);
    nnt_attn_rows r = rows_of(b, c);
    if (rc == 0)
        rc = ops->rows_bwd(ops->ctx, &r, b->s, b->dp, b->lse, b->d);
    /* dv[kb:] += p^T dout;  dq[r0:] += scale ds k;  dk[kb:] += scale ds^T q */
    if (rc == 0)
        rc = ops->gemm(ops->ctx, 1, 0, c->kn, hd, c->rq, 1.0f, b->s, c->kn, sp, b->dout + c->qo,
                       hd, c->sq, 1.0f, b->dv + c->ko, hd, c->skv, c->cnt);
    if (rc == 0)
        rc = ops->gemm(ops->ctx, 0, 0, c->rq, hd, c->kn, b->scale, b->dp, c->kn, sp, b->k + c->ko,
                       hd, c->skv, 1.0f, b->dq + c->qo, hd, c->sq, c->cnt);
    if (rc == 0)
        rc = ops->gemm(ops->ctx, 1, 0, c->kn, hd, c->rq, b->scale, b->dp, c->kn, sp, b->q + c->qo,
                       hd, c->sq, 1.0f, b->dk + c->ko, hd, c->skv, c->cnt);
    return rc;
}

int nnt_attn_products_fwd(const nnt_attn_products_ops *ops, const nnt_attn_map *mp, int64_t tq,
                          int64_t tk, int64_t hd, int64_t q_pos0, int64_t k_pos0,
                          int64_t window, const int32_t *qpos, float scale, float cap,
                          const float *q, const float *k, const float *v, float *o_acc,
                          float *m, float *l, float *ws, int64_t ws_floats)
{
    attn_block b = {ops, tq, hd, q_pos0, k_pos0, window, qpos, scale, cap, q, k, v, NULL,
                    NULL, NULL, o_acc, m, l, NULL, NULL, NULL, ws, NULL};
    return for_each_chunk(mp, tq, tk, hd, q_pos0, k_pos0, window, 1, ws_floats, fwd_chunk, &b);
}

int nnt_attn_products_bwd(const nnt_attn_products_ops *ops, const nnt_attn_map *mp, int64_t tq,
                          int64_t tk, int64_t hd, int64_t q_pos0, int64_t k_pos0,
                          int64_t window, const int32_t *qpos, float scale, float cap,
                          const float *q, const float *k, const float *v, const float *dout,
                          const float *lse, const float *d, float *dq, float *dk, float *dv,
                          float *ws, int64_t ws_floats)
{
    /* s and dp: halves of the scratch (chunks_for sizes a chunk to half of it) */
    attn_block b = {ops, tq, hd, q_pos0, k_pos0, window, qpos, scale, cap, q, k, v, dout,
                    lse, d, NULL, NULL, NULL, dq, dk, dv, ws, ws + ws_floats / 2};
    return for_each_chunk(mp, tq, tk, hd, q_pos0, k_pos0, window, 2, ws_floats, bwd_chunk, &b);
}

/* ---- the row kernels' definition (CPU twins; cuda/attention.cu follows it) ----------------- */

/* Row rr of entry e of a chunk: its index in m, l, lse, d (o_acc rows at that hd), and the
 * chunk's keys [*lo, *hi) its query sees (attn_mask.h; *hi <= *lo: none). */
static int64_t row_keys(const nnt_attn_rows *r, int64_t e, int64_t rr, int64_t *lo, int64_t *hi)
{
    const int64_t i = r->r0 + rr, qp = r->q_pos0 + i, end = r->kb + r->keys;
    const int32_t *pb = r->qpos ? r->qpos + ((r->t0 + e) / r->bdiv) * r->tq : NULL;
    *lo = row_lo(qp, r->k_pos0, end, r->window, pb, i) - r->kb;
    *hi = nvis(qp, r->k_pos0, end) - r->kb;
    return (r->q0 + (r->t0 + e) * r->qstride) * r->tq + i;
}

int nnt_cpu_attn_rows_fwd_f32(void *ctx, const nnt_attn_rows *r, float *s, float *m, float *l,
                              float *o_acc)
{
    (void)ctx;
    for (int64_t e = 0; e < r->count; e++)
        for (int64_t rr = 0; rr < r->rows; rr++) {
            int64_t lo, hi;
            const int64_t ri = row_keys(r, e, rr, &lo, &hi);
            float *row = s + (e * r->rows + rr) * r->keys;
            if (hi <= lo) {   /* no key of the chunk: the row is left as it was */
                for (int64_t j = 0; j < r->keys; j++)
                    row[j] = 0.0f;
                continue;
            }
            float bm = -INFINITY;
            for (int64_t j = 0; j < r->keys; j++) {
                if (j < lo || j >= hi) {
                    row[j] = -INFINITY;
                    continue;
                }
                if (r->cap > 0.0f)
                    row[j] = r->cap * tanhf(row[j] / r->cap);
                bm = row[j] > bm ? row[j] : bm;
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
            int64_t lo, hi;
            const int64_t ri = row_keys(r, e, rr, &lo, &hi), at = (e * r->rows + rr) * r->keys;
            float *srow = s + at, *drow = dp + at;
            if (isinf(lse[ri]))   /* a row that sees no key at all */
                hi = lo;
            for (int64_t j = 0; j < r->keys; j++) {
                if (j < lo || j >= hi) {
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
