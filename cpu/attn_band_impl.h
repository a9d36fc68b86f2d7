/* SPDX-License-Identifier: MIT */
/* nnt CPU kernels: the band products of the attention kernels, written once for a vector
 * width (internal; included by cpu/attn_band.c once per instruction set, which defines first):
 *   BAND(name)  the name with the set's suffix       BAND_T     the set's target attribute
 *   VF, VW      vector type, floats in one            MR         rows (keys) of a tile
 *   v_zero() v_bcast(x) v_load(p) v_loadn(p, n) v_store(p, x) v_storen(p, x, n) v_fma(a, b, c)
 *   (v_loadn: the first n lanes, n may be <= 0 or >= VW, the rest 0; v_storen: the first n)
 * A tile is MR rows by 2 VW columns held in 2 MR accumulators; its sum over the product's
 * inner dimension runs in increasing order, one fused multiply-add a step. */

#define BAND_INLINE static inline BAND_T __attribute__((always_inline))

/* The first row of a tile's MR rows that exists, clamped: rows past `rows` read the last one
 * (computed, not stored). */
#define BAND_ROW(r, rows) ((r) < (rows) ? (r) : (rows) - 1)

/* c (rows x ncol, ldc) = alpha a bt over hd: a's rows at a (lda), bt (hd, ldbt) from the
 * tile's first column. full: ncol == 2 VW (no masks). */
BAND_INLINE void BAND(abt_tile)(int full, int rows, int64_t ncol, int64_t hd, float alpha,
                                const float *a, int64_t lda, const float *bt, int64_t ldbt,
                                float *c, int64_t ldc)
{
    VF acc0[MR], acc1[MR];
    const float *ar[MR];
#pragma GCC unroll 16
    for (int r = 0; r < MR; r++) {
        acc0[r] = acc1[r] = v_zero();
        ar[r] = a + BAND_ROW(r, rows) * lda;
    }
    for (int64_t d = 0; d < hd; d++) {
        const float *b = bt + d * ldbt;
        VF b0 = full ? v_load(b) : v_loadn(b, ncol);
        VF b1 = full ? v_load(b + VW) : v_loadn(b + VW, ncol - VW);
#pragma GCC unroll 16
        for (int r = 0; r < MR; r++) {
            VF x = v_bcast(ar[r][d]);
            acc0[r] = v_fma(x, b0, acc0[r]);
            acc1[r] = v_fma(x, b1, acc1[r]);
        }
    }
    VF al = v_bcast(alpha);
#pragma GCC unroll 16
    for (int r = 0; r < MR; r++) {
        if (r >= rows)
            break;
        float *cr = c + r * ldc;
        if (full) {
            v_store(cr, v_mul(al, acc0[r]));
            v_store(cr + VW, v_mul(al, acc1[r]));
        } else {
            v_storen(cr, v_mul(al, acc0[r]), ncol);
            v_storen(cr + VW, v_mul(al, acc1[r]), ncol - VW);
        }
    }
}

/* c (rows x ncol, ldc) += alpha sum over j in [j0, j1) of p[r][j] b[j][..]: p's rows at p
 * (ldp), b's rows (ldb) from the tile's first column. */
BAND_INLINE void BAND(ab_tile)(int full, int rows, int64_t ncol, int64_t j0, int64_t j1,
                               float alpha, const float *p, int64_t ldp, const float *b,
                               int64_t ldb, float *c, int64_t ldc)
{
    VF acc0[MR], acc1[MR];
    const float *pr[MR];
#pragma GCC unroll 16
    for (int r = 0; r < MR; r++) {
        acc0[r] = acc1[r] = v_zero();
        pr[r] = p + BAND_ROW(r, rows) * ldp;
    }
    for (int64_t j = j0; j < j1; j++) {
        const float *bj = b + j * ldb;
        VF b0 = full ? v_load(bj) : v_loadn(bj, ncol);
        VF b1 = full ? v_load(bj + VW) : v_loadn(bj + VW, ncol - VW);
#pragma GCC unroll 16
        for (int r = 0; r < MR; r++) {
            VF x = v_bcast(pr[r][j]);
            acc0[r] = v_fma(x, b0, acc0[r]);
            acc1[r] = v_fma(x, b1, acc1[r]);
        }
    }
    VF al = v_bcast(alpha);
#pragma GCC unroll 16
    for (int r = 0; r < MR; r++) {
        if (r >= rows)
            break;
        float *cr = c + r * ldc;
        if (full) {
            v_store(cr, v_fma(al, acc0[r], v_load(cr)));
            v_store(cr + VW, v_fma(al, acc1[r], v_load(cr + VW)));
        } else {
            v_storen(cr, v_fma(al, acc0[r], v_loadn(cr, ncol)), ncol);
            v_storen(cr + VW, v_fma(al, acc1[r], v_loadn(cr + VW, ncol - VW)), ncol - VW);
        }
    }
}

/* c (nkeys x ncol, ldc: rows for the keys from the tile's first) += alpha sum over i in
 * [i0, i1) of p[i][key] a[i][..]: p from the tile's first key (ldp), a's rows (lda) from the
 * tile's first column. */
BAND_INLINE void BAND(atb_tile)(int full, int nkeys, int64_t ncol, int64_t i0, int64_t i1,
                                float alpha, const float *p, int64_t ldp, const float *a,
                                int64_t lda, float *c, int64_t ldc)
{
    VF acc0[MR], acc1[MR];
    int key[MR];
#pragma GCC unroll 16
    for (int r = 0; r < MR; r++) {
        acc0[r] = acc1[r] = v_zero();
        key[r] = BAND_ROW(r, nkeys);
    }
    for (int64_t i = i0; i < i1; i++) {
        const float *ai = a + i * lda, *pi = p + i * ldp;
        VF a0 = full ? v_load(ai) : v_loadn(ai, ncol);
        VF a1 = full ? v_load(ai + VW) : v_loadn(ai + VW, ncol - VW);
#pragma GCC unroll 16
        for (int r = 0; r < MR; r++) {
            VF x = v_bcast(pi[key[r]]);
            acc0[r] = v_fma(x, a0, acc0[r]);
            acc1[r] = v_fma(x, a1, acc1[r]);
        }
    }
    VF al = v_bcast(alpha);
#pragma GCC unroll 16
    for (int r = 0; r < MR; r++) {
        if (r >= nkeys)
            break;
        float *cr = c + r * ldc;
        if (full) {
            v_store(cr, v_fma(al, acc0[r], v_load(cr)));
            v_store(cr + VW, v_fma(al, acc1[r], v_load(cr + VW)));
        } else {
            v_storen(cr, v_fma(al, acc0[r], v_loadn(cr, ncol)), ncol);
            v_storen(cr + VW, v_fma(al, acc1[r], v_loadn(cr + VW, ncol - VW)), ncol - VW);
        }
    }
}

/* ---- whole products over a band (the contracts: nnt_cpu.h, "band products") ------------ */

static BAND_T void BAND(abt)(int64_t m, int64_t hd, float alpha, const float *a, int64_t lda,
                             const float *bt, int64_t ldbt, const int64_t *lo,
                             const int64_t *hi, float *c, int64_t ldc)
{
    for (int64_t g = 0; g < m; g += MR) {
        int rows = m - g < MR ? (int)(m - g) : MR;
        int64_t k0, k1;
        if (!band_group_keys(rows, lo + g, hi + g, &k0, &k1))
            continue;
        const float *ag = a + g * lda;
        float *cg = c + g * ldc;
        int64_t j = k0;
        for (; j + 2 * VW <= k1; j += 2 * VW)
            BAND(abt_tile)(1, rows, 2 * VW, hd, alpha, ag, lda, bt + j, ldbt, cg + j, ldc);
        if (j < k1)
            BAND(abt_tile)(0, rows, k1 - j, hd, alpha, ag, lda, bt + j, ldbt, cg + j, ldc);
    }
}

static BAND_T void BAND(ab)(int64_t m, int64_t hd, float alpha, const float *p, int64_t ldp,
                            const float *b, int64_t ldb, const int64_t *lo, const int64_t *hi,
                            float *c, int64_t ldc)
{
    for (int64_t g = 0; g < m; g += MR) {
        int rows = m - g < MR ? (int)(m - g) : MR;
        int64_t k0, k1;
        if (!band_group_keys(rows, lo + g, hi + g, &k0, &k1))
            continue;
        const float *pg = p + g * ldp;
        float *cg = c + g * ldc;
        int64_t x = 0;
        for (; x + 2 * VW <= hd; x += 2 * VW)
            BAND(ab_tile)(1, rows, 2 * VW, k0, k1, alpha, pg, ldp, b + x, ldb, cg + x, ldc);
        if (x < hd)
            BAND(ab_tile)(0, rows, hd - x, k0, k1, alpha, pg, ldp, b + x, ldb, cg + x, ldc);
    }
}

static BAND_T void BAND(atb)(int64_t m, int64_t nk, int64_t hd, float alpha, const float *p,
                             int64_t ldp, const float *a, int64_t lda, const int64_t *lo,
                             const int64_t *hi, float *c, int64_t ldc)
{
    int64_t k0, k1;
    if (m <= 0 || !band_group_keys(m, lo, hi, &k0, &k1))
        return;
    k1 = k1 < nk ? k1 : nk;
    for (int64_t j = k0; j < k1; j += MR) {
        int nkeys = k1 - j < MR ? (int)(k1 - j) : MR;
        int64_t i0, i1;
        if (!band_key_rows(m, lo, hi, j, j + nkeys, &i0, &i1))
            continue;
        float *cj = c + j * ldc;
        int64_t x = 0;
        for (; x + 2 * VW <= hd; x += 2 * VW)
            BAND(atb_tile)(1, nkeys, 2 * VW, i0, i1, alpha, p + j, ldp, a + x, lda, cj + x,
                           ldc);
        if (x < hd)
            BAND(atb_tile)(0, nkeys, hd - x, i0, i1, alpha, p + j, ldp, a + x, lda, cj + x,
                           ldc);
    }
}

#undef BAND_INLINE
#undef BAND_ROW
