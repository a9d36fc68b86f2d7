/* SPDX-License-Identifier: MIT */
/* Automatic tiling of a transformer (any family): the rules documented in models.h, for a
 * model of C channels, an MLP of F inner columns and V vocabulary columns, and the
 * resolution of a caller's overrides against them (nnt_gpt_tiling, nnt_model_tiling). */
#include "models.h"

#include <math.h>

#define AUTO_MIN_TASK_FLOP 1e8      /* ~1.25 ms at ~80 GFLOP/s per core                  */
#define AUTO_MIN_ROW_TASK_FLOP 1e7  /* ~0.12 ms: a row tile's MLP product, to give each
                                       worker rows at all (the runtime's ~4 us a task is
                                       ~3 % of it; an idle worker costs up to half)      */
#define AUTO_MIN_ROWS 64            /* rows (B*T) per row tile                             */
#define AUTO_MAX_ROWS 512           /* beyond this, more row tiles even with few workers   */
#define AUTO_MIN_COLS 128           /* hidden / vocab tile widths                          */
#define AUTO_MAX_VOCAB 8192         /* vocab tile width cap (logits tile rows x 8192)      */
#define AUTO_ALIGN 64               /* hidden / vocab tiles: multiples of 64 columns       */

static int64_t ceil_div(int64_t a, int64_t b)
{
    return (a + b - 1) / b;
}

static int64_t min64(int64_t a, int64_t b)
{
    return a < b ? a : b;
}

static int64_t max64(int64_t a, int64_t b)
{
    return a > b ? a : b;
}

/* Number of row tiles wanted over M = B*T rows: one per worker (the GEMMs whose columns are
 * the whole C -- q, k, v, the output projections -- get their parallelism from rows only),
 * at most AUTO_MAX_ROWS rows a tile, at least AUTO_MIN_ROWS, and an MLP down-projection
 * task (2 rows F C flops) of at least AUTO_MIN_ROW_TASK_FLOP. */
static int64_t auto_row_tiles(const nnt_model_dims *d, int nworkers)
{
    int64_t M = d->B * d->T;
    int64_t want = max64(nworkers, ceil_div(M, AUTO_MAX_ROWS));
    double down = 2.0 * (double)M * (double)d->C * (double)d->F;
    int64_t by_flops = (int64_t)(down / AUTO_MIN_ROW_TASK_FLOP);
    int64_t cap = max64(1, min64(M / AUTO_MIN_ROWS, by_flops));
    return min64(want, cap);
}

/* Batch and seq tiles giving at most `rows` row tiles: split the batch first, then the
 * sequence (each sequence in equal pieces). Returns the row tiles obtained. */
static int64_t auto_split_rows(int64_t B, int64_t T, int64_t rows, nnt_tiling *out)
{
    if (rows <= B) {
        out->batch = ceil_div(B, rows);
        out->seq = T;
        return ceil_div(B, out->batch);
    }
    out->batch = 1;
    out->seq = ceil_div(T, ceil_div(rows, B));
    return B * ceil_div(T, out->seq);
}

/* Column tile for a GEMM with N columns, K = C, `rowtile` rows a task: `tiles` tiles wanted,
 * widened to AUTO_MIN_COLS and to AUTO_MIN_TASK_FLOP a task, rounded up to AUTO_ALIGN. */
static int64_t auto_col_tile(int64_t N, int64_t C, int64_t rowtile, int64_t tiles)
{
    int64_t t = ceil_div(N, max64(tiles, 1));
    int64_t by_flops = (int64_t)ceil(AUTO_MIN_TASK_FLOP / (2.0 * (double)rowtile * (double)C));
    t = max64(t, max64(AUTO_MIN_COLS, by_flops));
    t = ceil_div(t, AUTO_ALIGN) * AUTO_ALIGN;
    return t >= N ? 0 : t;
}

/* Whole batch / seq tiles are reported as 0, like every other whole dimension. */
static void whole_rows_as_zero(const nnt_model_dims *d, nnt_tiling *t)
{
    if (t->batch >= d->B)
        t->batch = 0;
    if (t->seq >= d->T)
        t->seq = 0;
}

void nnt_auto_tiling_cpu(const nnt_model_dims *d, int nworkers, nnt_tiling *out)
{
    nnt_tiling t = NNT_TILING_INIT;   /* channels, heads, head_dim: whole */
    int64_t rows = auto_split_rows(d->B, d->T, auto_row_tiles(d, nworkers), &t);
    int64_t rowtile = ceil_div(d->B * d->T, rows);
    /* up-projection (N = F): >= 2 tasks per worker; F is also K of the down-projection */
    t.hidden = auto_col_tile(d->F, d->C, rowtile, ceil_div(2 * (int64_t)nworkers, rows));
    /* lm head (N = V): >= 2 tasks per worker and tiles of at most AUTO_MAX_VOCAB columns */
    int64_t nv = max64(ceil_div(2 * (int64_t)nworkers, rows), ceil_div(d->V, AUTO_MAX_VOCAB));
    t.vocab = auto_col_tile(d->V, d->C, rowtile, nv);
    whole_rows_as_zero(d, &t);
    *out = t;
}

void nnt_auto_tiling_gpu(const nnt_model_dims *d, int ngpus, nnt_tiling *out)
{
    nnt_tiling t = NNT_TILING_INIT;   /* channels, hidden, heads, head_dim: whole */
    auto_split_rows(d->B, d->T, max64(1, min64(ngpus, d->B * d->T / AUTO_MIN_ROWS)), &t);
    int64_t nv = ceil_div(d->V, AUTO_MAX_VOCAB);
    int64_t vt = ceil_div(ceil_div(d->V, nv), AUTO_ALIGN) * AUTO_ALIGN;
    t.vocab = vt >= d->V ? 0 : vt;
    whole_rows_as_zero(d, &t);
    *out = t;
}

/* One entry: 0 takes the automatic value (0 there: the whole dimension), -1 the whole
 * dimension, > 0 that size clamped to the dimension. */
static int resolve_entry(nnt_ctx *ctx, const char *fn, const char *what, int64_t want,
                         int64_t automatic, int64_t size, int64_t *out)
{
    if (want < -1)
        return nnt_fail(ctx, NNT_E_INVAL, "%s: tiling %s = %lld (use 0 automatic, -1 whole "
                        "dimension or a tile size > 0)", fn, what, (long long)want);
    int64_t t = want == 0 ? automatic : want;
    *out = t <= 0 || t > size ? size : t;
    return NNT_OK;
}

int nnt_model_resolve_tiling(nnt_ctx *ctx, const char *fn, const nnt_model_dims *d,
                             const nnt_tiling *overrides, nnt_tiling *out)
{
    if (overrides && overrides->size < sizeof(nnt_tiling))
        return nnt_fail(ctx, NNT_E_INVAL, "%s: overrides->size %zu < sizeof(nnt_tiling) %zu "
                        "(initialise it with NNT_TILING_INIT)", fn, overrides->size,
                        sizeof(nnt_tiling));
    nnt_tiling none = NNT_TILING_INIT, a;
    const nnt_tiling *o = overrides ? overrides : &none;
    int ncpus = 0, ncuda = 0;
    NNT_TRY(nnt_ctx_workers(ctx, &ncpus, &ncuda));
    if (ncuda > 0)   /* GPU tasks must be large: see nnt_auto_tiling_gpu */
        nnt_auto_tiling_gpu(d, ncuda, &a);
    else
        nnt_auto_tiling_cpu(d, ncpus > 0 ? ncpus : 1, &a);
    nnt_tiling r = NNT_TILING_INIT;
    NNT_TRY(resolve_entry(ctx, fn, "batch", o->batch, a.batch, d->B, &r.batch));
    NNT_TRY(resolve_entry(ctx, fn, "seq", o->seq, a.seq, d->T, &r.seq));
    NNT_TRY(resolve_entry(ctx, fn, "channels", o->channels, a.channels, d->C, &r.channels));
    NNT_TRY(resolve_entry(ctx, fn, "hidden", o->hidden, a.hidden, d->F, &r.hidden));
    NNT_TRY(resolve_entry(ctx, fn, "vocab", o->vocab, a.vocab, d->V, &r.vocab));
    NNT_TRY(resolve_entry(ctx, fn, "heads", o->heads, a.heads, d->NH, &r.heads));
    NNT_TRY(resolve_entry(ctx, fn, "head_dim", o->head_dim, a.head_dim,
                          d->HD ? d->HD : d->C / d->NH, &r.head_dim));
    *out = r;
    return NNT_OK;
}
