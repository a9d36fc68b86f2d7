/* SPDX-License-Identifier: MIT */
/* nnt CPU kernels: how the band products (cpu/attn_band.c, float; cpu/attn_band16.c, bf16
 * pairs) cut rows and keys into groups (internal, included by both). */
#ifndef NNT_ATTN_BAND_GROUPS_H
#define NNT_ATTN_BAND_GROUPS_H

#include <stdint.h>

/* The keys [*k0, *k1) of a group of rows: from the smallest lo to the largest hi of its
 * rows that see any key (lo < hi). Returns 0 when none does. */
static inline int band_group_keys(int64_t rows, const int64_t *lo, const int64_t *hi,
                                  int64_t *k0, int64_t *k1)
{
    int64_t a = INT64_MAX, b = INT64_MIN;
    for (int64_t r = 0; r < rows; r++)
        if (lo[r] < hi[r]) {
            a = lo[r] < a ? lo[r] : a;
            b = hi[r] > b ? hi[r] : b;
        }
    *k0 = a;
    *k1 = b;
    return a < b;
}

/* The rows of the next group of n left: mr while at least mr are left, then 4, 2 and 1
 * (at most 3 groups smaller than mr: the tiles' row counts are constants) */
static inline int band_group_rows(int64_t n, int mr)
{
    return n >= mr ? mr : n >= 4 ? 4 : n >= 2 ? 2 : 1;
}

/* A group of rows' place (1, 2, 4 or mr rows) in the tables of group functions */
static inline int band_group_slot(int rows)
{
    return rows == 1 ? 0 : rows == 2 ? 1 : rows == 4 ? 2 : 3;
}

/* The rows [*i0, *i1) from the first to the last that sees any of the keys [j0, j1).
 * Returns 0 when none does. */
static inline int band_key_rows(int64_t m, const int64_t *lo, const int64_t *hi, int64_t j0,
                                int64_t j1, int64_t *i0, int64_t *i1)
{
    int64_t a = -1, b = -1;
    for (int64_t r = 0; r < m; r++)
        if (lo[r] < hi[r] && lo[r] < j1 && hi[r] > j0) {
            a = a < 0 ? r : a;
            b = r;
        }
    *i0 = a;
    *i1 = b + 1;
    return a >= 0;
}

/* band_key_rows for key groups of increasing keys, as atb takes them: where lo and hi do not
 * decrease over the rows that see any key (the diagonal, a window: every block but packed
 * examples'), the rows that see a group are an interval whose ends only move forward, found
 * in O(m) for all the groups together instead of O(m) each; else the scan. */
typedef struct band_rows {
    int monotone;
    int64_t a, b, last;   /* monotone: the first row that may see the next group; the first
                             not yet looked at for its end; the last seen with lo < j1 */
} band_rows;

static inline band_rows band_rows_start(int64_t m, const int64_t *lo, const int64_t *hi)
{
    band_rows c = {1, 0, 0, -1};
    int64_t pl = INT64_MIN, ph = INT64_MIN;
    for (int64_t r = 0; r < m && c.monotone; r++)
        if (lo[r] < hi[r]) {
            c.monotone = lo[r] >= pl && hi[r] >= ph;
            pl = lo[r];
            ph = hi[r];
        }
    return c;
}

/* band_key_rows(m, lo, hi, j0, j1, i0, i1) for the next group [j0, j1) (j0 at least the
 * previous group's j1) */
static inline int band_rows_next(band_rows *c, int64_t m, const int64_t *lo, const int64_t *hi,
                                 int64_t j0, int64_t j1, int64_t *i0, int64_t *i1)
{
    if (!c->monotone)
        return band_key_rows(m, lo, hi, j0, j1, i0, i1);
    while (c->a < m && (lo[c->a] >= hi[c->a] || hi[c->a] <= j0))
        c->a++;   /* empty, or ends before this group (and so before the next ones) */
    for (; c->b < m && (lo[c->b] >= hi[c->b] || lo[c->b] < j1); c->b++)
        if (lo[c->b] < hi[c->b])
            c->last = c->b;   /* starts before the group's end */
    if (c->a >= m || c->last < c->a)
        return 0;
    *i0 = c->a;
    *i1 = c->last + 1;
    return 1;
}

#endif
