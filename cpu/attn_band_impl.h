/* SPDX-License-Identifier: MIT */
/* nnt CPU kernels: the band products of the attention kernels, written once for a vector
 * width and an operand type (internal; included by cpu/attn_band.c once per instruction set,
 * and by cpu/attn_band16.c for bf16 pairs, which define first):
 *   BAND(name)  the name with the set's suffix       BAND_T     the set's target attribute
 *   VF, VW      vector type, floats in one            MR         rows (keys) of a full group
 *   v_zero() v_bcast(x) v_load(p) v_loadn(p, n) v_store(p, x) v_storen(p, x, n) v_fma(a, b, c)
 *   v_mul(a, b)  on floats (the results c; v_loadn: the first n lanes, n may be <= 0 or >= VW,
 *   the rest 0; v_storen: the first n);
 *   BAND_E, VB  the operands' element (a float, or a pair of bf16 values in 32 bits) and a
 *   vector of VW of them; v_bload(p) v_bloadn(p, n) v_bzero() their loads; v_abcast(p) the
 *   element at p in every lane; v_dot(acc, x, b) acc plus the lanes' products of x and b (for
 *   pairs: both products of a lane's pair);
 *   BAND_IN0(k) BAND_IN1(k) the inner dimension's steps for elements [k0, k1) of the sums over
 *   keys (ab) and query rows (atb): from BAND_IN0(k0) to BAND_IN1(k1) (floats: k0, k1; pairs:
 *   k0 / 2, (k1 + 1) / 2); abt's inner dimension comes in steps already (hd, or hd / 2 pairs);
 *   all of them are undefined at the end
 * A tile is R rows (R = MR, 4, 2 or 1: groups of MR rows, the last few rows in groups of 4, 2
 * and 1) by one or two vectors of columns, held in registers; its sum over the product's inner
 * dimension runs in increasing order, one fused multiply-add a step. R is a constant in each
 * tile (the group functions of each R are functions of their own: inlined into one, GCC ran out
 * of registers and kept a tile's operand on the stack, a third slower). */

#define BAND_INLINE static inline BAND_T __attribute__((always_inline))
#define BAND_GROUP static BAND_T __attribute__((noinline))

/* ---- abt: c = alpha a b^T, b given transposed ------------------------------------------- */

/* c (R x ncol, ldc) = alpha a bt over hd: a's R rows at a (lda); bt (hd, ldbt) from the
 * tile's first column; NV vectors of columns (2, or 1 for a narrow last tile). full: ncol ==
 * NV VW (no masks). */
BAND_INLINE void BAND(abt_tile)(int R, int NV, int full, int64_t ncol, int64_t hd, float alpha,
                                const BAND_E *a, int64_t lda, const BAND_E *bt, int64_t ldbt,
                                float *c, int64_t ldc)
{
    VF acc0[MR], acc1[MR];
    const BAND_E *ar[MR];
#pragma GCC unroll 16
    for (int r = 0; r < R; r++) {
        acc0[r] = acc1[r] = v_zero();
        ar[r] = a + r * lda;
    }
    for (int64_t d = 0; d < hd; d++) {
        const BAND_E *b = bt + d * ldbt;
        VB b0 = full ? v_bload(b) : v_bloadn(b, ncol);
        VB b1 = NV == 1 ? v_bzero() : full ? v_bload(b + VW) : v_bloadn(b + VW, ncol - VW);
#pragma GCC unroll 16
        for (int r = 0; r < R; r++) {
            VB x = v_abcast(ar[r] + d);
            acc0[r] = v_dot(acc0[r], x, b0);
            if (NV == 2)
                acc1[r] = v_dot(acc1[r], x, b1);
        }
    }
    VF al = v_bcast(alpha);
#pragma GCC unroll 16
    for (int r = 0; r < R; r++) {
        float *cr = c + r * ldc;
        if (full) {
            v_store(cr, v_mul(al, acc0[r]));
            if (NV == 2)
                v_store(cr + VW, v_mul(al, acc1[r]));
        } else {
            v_storen(cr, v_mul(al, acc0[r]), ncol);
            if (NV == 2)
                v_storen(cr + VW, v_mul(al, acc1[r]), ncol - VW);
        }
    }
}

/* One group of R rows of abt: the keys [k0, k1) in tiles of 2 VW columns, the last one
 * masked (and of one vector where no more is left) */
#define BAND_ABT_G(RR)                                                                        \
    BAND_GROUP void BAND(abt_g##RR)(int64_t k0, int64_t k1, int64_t hd, float alpha,          \
                                    const BAND_E *a, int64_t lda, const BAND_E *bt,           \
                                    int64_t ldbt, float *c, int64_t ldc)                      \
    {                                                                                         \
        int64_t j = k0;                                                                       \
        for (; j + 2 * VW <= k1; j += 2 * VW)                                                 \
            BAND(abt_tile)(RR, 2, 1, 2 * VW, hd, alpha, a, lda, bt + j, ldbt, c + j, ldc);    \
        if (j + VW < k1)                                                                      \
            BAND(abt_tile)(RR, 2, 0, k1 - j, hd, alpha, a, lda, bt + j, ldbt, c + j, ldc);    \
        else if (j < k1)                                                                      \
            BAND(abt_tile)(RR, 1, 0, k1 - j, hd, alpha, a, lda, bt + j, ldbt, c + j, ldc);    \
    }
BAND_ABT_G(MR)
BAND_ABT_G(4)
BAND_ABT_G(2)
BAND_ABT_G(1)
#undef BAND_ABT_G
static void (*const BAND(abt_gs)[4])(int64_t, int64_t, int64_t, float, const BAND_E *, int64_t,
                                     const BAND_E *, int64_t, float *, int64_t) = {
    BAND(abt_g1), BAND(abt_g2), BAND(abt_g4), BAND(abt_gMR)};   /* by band_group_slot */

static BAND_T void BAND(abt)(int64_t m, int64_t hd, float alpha, const BAND_E *a, int64_t lda,
                             const BAND_E *bt, int64_t ldbt, const int64_t *lo,
                             const int64_t *hi, float *c, int64_t ldc)
{
    for (int64_t g = 0; g < m;) {
        int rows = band_group_rows(m - g, MR);
        int64_t k0, k1;
        if (band_group_keys(rows, lo + g, hi + g, &k0, &k1)) {
            /* from a whole vector of bt (on a cache line where bt is: the attention kernels'
             * k^T): a window's groups start 1 or 9 keys past one, and every load of bt split
             * over two lines; the scores before the group's first key are no row's, and no
             * product reads them (T 4096, W 512, one thread, Intel Xeon: the window's
             * kernels 2-4 % faster) */
            k0 -= k0 % VW;
            BAND(abt_gs)[band_group_slot(rows)](k0, k1, hd, alpha, a + g * lda, lda, bt, ldbt,
                                                c + g * ldc, ldc);
        }
        g += rows;
    }
}

/* ---- ab and atb: c += alpha (sums over keys or query rows) ---------------------------- */

/* c (R x ncol, ldc) += alpha (acc0, acc1): the end of ab's and atb's tiles */
BAND_INLINE void BAND(add_tile)(int R, int full, int64_t ncol, float alpha, const VF *acc0,
                                const VF *acc1, float *c, int64_t ldc)
{
    VF al = v_bcast(alpha);
#pragma GCC unroll 16
    for (int r = 0; r < R; r++) {
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

/* c (R x ncol, ldc) += alpha sum over steps t in [t0, t1) of x_r(t) b[t][..], x_r(t) =
 * x[r * ldxr + t * ldxt]: for ab p's rows (ldxr ldp, ldxt 1), for atb p's columns at the tile's
 * keys (ldxr 1, ldxt ldp); b's rows (ldb) from the tile's first column. */
BAND_INLINE void BAND(sum_tile)(int R, int full, int64_t ncol, int64_t t0, int64_t t1,
                                float alpha, const BAND_E *x, int64_t ldxr, int64_t ldxt,
                                const BAND_E *b, int64_t ldb, float *c, int64_t ldc)
{
    VF acc0[MR], acc1[MR];
    const BAND_E *xr[MR];
#pragma GCC unroll 16
    for (int r = 0; r < R; r++) {
        acc0[r] = acc1[r] = v_zero();
        xr[r] = x + r * ldxr;
    }
    for (int64_t t = t0; t < t1; t++) {
        const BAND_E *bt = b + t * ldb;
        VB b0 = full ? v_bload(bt) : v_bloadn(bt, ncol);
        VB b1 = full ? v_bload(bt + VW) : v_bloadn(bt + VW, ncol - VW);
        int64_t off = t * ldxt;
#pragma GCC unroll 16
        for (int r = 0; r < R; r++) {
            VB xv = v_abcast(xr[r] + off);
            acc0[r] = v_dot(acc0[r], xv, b0);
            acc1[r] = v_dot(acc1[r], xv, b1);
        }
    }
    BAND(add_tile)(R, full, ncol, alpha, acc0, acc1, c, ldc);
}

/* One group of R rows (ab) or keys (atb): the sum over elements [e0, e1) of the inner dimension
 * (keys for ab, query rows for atb), hd columns in tiles of 2 VW, the last one masked */
#define BAND_SUM_G(RR)                                                                        \
    BAND_GROUP void BAND(sum_g##RR)(int64_t e0, int64_t e1, int64_t hd, float alpha,          \
                                    const BAND_E *x, int64_t ldxr, int64_t ldxt,              \
                                    const BAND_E *b, int64_t ldb, float *c, int64_t ldc)      \
    {                                                                                         \
        int64_t col = 0, t0 = BAND_IN0(e0), t1 = BAND_IN1(e1);                                \
        for (; col + 2 * VW <= hd; col += 2 * VW)                                             \
            BAND(sum_tile)(RR, 1, 2 * VW, t0, t1, alpha, x, ldxr, ldxt, b + col, ldb,         \
                           c + col, ldc);                                                     \
        if (col < hd)                                                                         \
            BAND(sum_tile)(RR, 0, hd - col, t0, t1, alpha, x, ldxr, ldxt, b + col, ldb,       \
                           c + col, ldc);                                                     \
    }
BAND_SUM_G(MR)
BAND_SUM_G(4)
BAND_SUM_G(2)
BAND_SUM_G(1)
#undef BAND_SUM_G
static void (*const BAND(sum_gs)[4])(int64_t, int64_t, int64_t, float, const BAND_E *, int64_t,
                                     int64_t, const BAND_E *, int64_t, float *, int64_t) = {
    BAND(sum_g1), BAND(sum_g2), BAND(sum_g4), BAND(sum_gMR)};   /* by band_group_slot */

/* ---- ab: c += alpha p b ------------------------------------------------------------------ */

static BAND_T void BAND(ab)(int64_t m, int64_t hd, float alpha, const BAND_E *p, int64_t ldp,
                            const BAND_E *b, int64_t ldb, const int64_t *lo, const int64_t *hi,
                            float *c, int64_t ldc)
{
    for (int64_t g = 0; g < m;) {
        int rows = band_group_rows(m - g, MR);
        int64_t k0, k1;
        if (band_group_keys(rows, lo + g, hi + g, &k0, &k1)) {
            BAND(sum_gs)[band_group_slot(rows)](k0, k1, hd, alpha, p + g * ldp, ldp, 1, b,
                                                ldb, c + g * ldc, ldc);
        }
        g += rows;
    }
}

/* ---- atb: c += alpha p^T a --------------------------------------------------------------- */

static BAND_T void BAND(atb)(int64_t m, int64_t nk, int64_t hd, float alpha, const BAND_E *p,
                             int64_t ldp, const BAND_E *a, int64_t lda, const int64_t *lo,
                             const int64_t *hi, float *c, int64_t ldc)
{
    int64_t k0, k1;
    if (m <= 0 || !band_group_keys(m, lo, hi, &k0, &k1))
        return;
    k1 = k1 < nk ? k1 : nk;
    band_rows seen = band_rows_start(m, lo, hi);
    for (int64_t j = k0; j < k1;) {
        int nkeys = band_group_rows(k1 - j, MR);
        int64_t i0, i1;
        if (band_rows_next(&seen, m, lo, hi, j, j + nkeys, &i0, &i1)) {
            BAND(sum_gs)[band_group_slot(nkeys)](i0, i1, hd, alpha, p + j, 1, ldp, a, lda,
                                                 c + j * ldc, ldc);
        }
        j += nkeys;
    }
}

#undef BAND_INLINE
#undef BAND_GROUP
/* the including file's parameters, for the next instruction set */
#undef BAND
#undef BAND_T
#undef VF
#undef VW
#undef MR
#undef v_zero
#undef v_bcast
#undef v_load
#undef v_loadn
#undef v_store
#undef v_storen
#undef v_fma
#undef v_mul
#undef BAND_E
#undef VB
#undef v_bload
#undef v_bloadn
#undef v_bzero
#undef v_abcast
#undef v_dot
#undef BAND_IN0
#undef BAND_IN1
