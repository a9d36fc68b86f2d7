/* SPDX-License-Identifier: MIT */
/* nnt CPU kernels: causal attention in flash style (online softmax over key blocks).
 *
 * Query rows are processed in chunks of ATTN_CHUNK rows (the backward: up to ATTN_BWD_CHUNK
 * rows, see bwd_chunk_rows): the (chunk, tk) score block is built with products, the softmax is
 * applied row by row, and the products with V (or the gradients) follow. In float, where the
 * CPU has AVX2 or AVX-512F, the products are the band products of cpu/attn_band.c (groups of 8
 * or 6 rows, each given only the keys its rows see; k, and v for the backward, transposed once
 * a call; see band_scratch for where the GEMMs stay); else GEMMs, each group of ATTN_CHUNK rows
 * of a backward chunk given its own keys (chunk_segments). The heap scratch is
 * O(ATTN_BWD_CHUNK * tk) floats at most. If it cannot be allocated, a scratch-free path handles
 * one (query, key) pair at a time. The scratch is the thread's (nnt_cpu_scratch), kept between
 * calls. Each slab's rows are prefetched in one burst before its products (prefetch_rows).
 *
 * Masking: query row i (absolute position q_pos0 + i) sees keys j < nvis(i), where
 * nvis(i) = clamp(q_pos0 + i - k_pos0 + 1, 0, tk). With a sliding window W > 0 (the _window
 * entry points) it sees only the keys of the W positions ending at its own, j >= lo(i) with
 * lo(i) = clamp(q_pos0 + i - W + 1 - k_pos0, 0, tk) (transformers' kv_idx > q_idx - W): each
 * chunk of rows computes the scores of the keys [lo(first row), nvis(last row)) only, and a
 * key block wholly before the window of every row costs nothing.
 *
 * Soft-capping (cap > 0, Gemma 2): each visible score s = scale q.k becomes cap tanh(s / cap)
 * before the softmax, as transformers' eager attention does (divide, tanh, multiply, in
 * float); the backward multiplies the score gradient by 1 - tanh(s / cap)^2.
 *
 * Grouped-query attention: the _gqa entry points take an nnt_attn_map that names the kv slab
 * each q slab reads (several q heads read the same k, v slab in place; nothing is copied),
 * and add the gradients of those q heads into its dk, dv one after another (increasing h).
 *
 * bf16 products (map->bf16, with a oneDNN cache): the operands of every product, q, k, v,
 * dout and the probabilities p and score gradients ds, are rounded to bf16 (to nearest even)
 * and multiplied with float sums, as the GEMMs of NNT_PRECISION_BF16 are; the softmax, the
 * running maxima and sums, and every accumulator stay float. Where the CPU has AVX512-BF16
 * (nnt_cpu_band16_level), hd is even and a call has ATTN_BAND_ROWS query rows or more, those
 * products are the bf16 band products of cpu/attn_band16.c (the float band products' groups,
 * on pairs of bf16 values: see band16_scratch), except the backward of whole blocks; else
 * oneDNN's. Without a cache, or where oneDNN declines, the product runs in float. */
#include "nnt_cpu.h"
#include "attn_mask.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define ATTN_CHUNK 64

/* A call's scratch: slot `slot` of the thread's (nnt_cpu_scratch: kept between calls, never
 * freed here), or NULL, which takes the paths that need less. The tests build a copy of these
 * kernels with malloc defined to fail, for those paths: that copy asks malloc. */
enum { SCRATCH_P, SCRATCH_H16, SCRATCH_ROW, SCRATCH_KT, SCRATCH_B16, SCRATCH_BAND };
static void *attn_scratch(int slot, size_t bytes)
{
#ifdef malloc
    (void)slot;
    return malloc(bytes);
#else
    return nnt_cpu_scratch(slot, bytes);
#endif
}

/* Prefetches of rows [lo, hi) of a (rows, hd) slab, one per cache line. A block task's tiles
 * come from memory more often than from a cache (other tasks ran since they were written), and
 * the products' own loads would fetch them one miss at a time; prefetched in one burst before
 * the slab's products, all the misses are in flight at once. On AMD Zen 5 (bench/RESULTS-
 * window.md) a block's backward with its tiles in memory took 1.11-1.17 ms against 1.31-1.37
 * without (0.92-0.94 with the tiles in cache). Always inlined, as are the helpers that call
 * it: a function of prefetches alone is pure to GCC's interprocedural analysis (-O2), which
 * then drops the calls to it (a first helper over key tiles lost its prefetches so: a bf16
 * backward of whole blocks from memory ran 5-10 % slower). */
#if defined(__GNUC__)
#define ATTN_INLINE static inline __attribute__((always_inline))
#else
#define ATTN_INLINE static inline
#endif
ATTN_INLINE void prefetch_rows(const float *x, int64_t lo, int64_t hi, int64_t hd)
{
#if defined(__GNUC__)
    const char *c = (const char *)(x + lo * hd);
    int64_t bytes = (hi - lo) * hd * (int64_t)sizeof(float);
    for (int64_t b = 0; b < bytes; b += 64)
        __builtin_prefetch(c + b, 0, 3);
#else
    (void)x, (void)lo, (void)hi, (void)hd;
#endif
}

/* the first key of rows [i0, i1) together: the smallest row_lo */
static int64_t chunk_lo(int64_t i0, int64_t i1, int64_t q_pos0, int64_t k_pos0, int64_t tk,
                        int64_t w, const int32_t *pos)
{
    int64_t k0 = row_lo(q_pos0 + i0, k_pos0, tk, w, pos, i0);
    for (int64_t i = i0 + 1; pos && i < i1; i++) {
        int64_t a = row_lo(q_pos0 + i, k_pos0, tk, w, pos, i);
        k0 = a < k0 ? a : k0;
    }
    return k0;
}

/* first query row with at least one visible key (tq if none) */
static inline int64_t first_row(int64_t tq, int64_t q_pos0, int64_t k_pos0)
{
    int64_t i = k_pos0 - q_pos0;
    return i < 0 ? 0 : (i > tq ? tq : i);
}

/* end of the query rows with at least one visible key under window w: rows whose window
 * starts at or before the block's last key, qp - w + 1 <= k_pos0 + tk - 1 */
static inline int64_t end_row(int64_t tq, int64_t tk, int64_t q_pos0, int64_t k_pos0,
                              int64_t w)
{
    if (w <= 0)
        return tq;
    int64_t i = k_pos0 + tk - 1 + w - q_pos0;
    return i < 0 ? 0 : (i > tq ? tq : i);
}

/* The keys [lo[r], hi[r]) row i0 + r of rows [i0, i1) sees, counted from the chunk's first
 * key k0 (none: hi == lo, as for a row whose example starts after the block); with lse (the
 * backward), a row whose lse is -inf sees none. */
static void row_keys(int64_t i0, int64_t i1, int64_t q_pos0, int64_t k_pos0, int64_t tk,
                     int64_t w, const int32_t *pos, int64_t k0, const float *lse, int64_t *lo,
                     int64_t *hi)
{
    for (int64_t i = i0; i < i1; i++) {
        int64_t a = row_lo(q_pos0 + i, k_pos0, tk, w, pos, i) - k0;
        int64_t nv = lse && isinf(lse[i]) ? a : nvis(q_pos0 + i, k_pos0, tk) - k0;
        lo[i - i0] = a;
        hi[i - i0] = nv < a ? a : nv;
    }
}

/* s soft-capped (cap 0: s itself) */
static inline float capped(float s, float cap)
{
    return cap > 0.0f ? cap * tanhf(s / cap) : s;
}

/* The softmax gradient of a capped row: p[j] = exp(cap tanh(s_j / cap) - lse) from the
 * scaled scores s in p, ds[j] = p[j] (ds[j] - d) (1 - tanh^2). */
static void capped_softmax_grad(int64_t n, float *restrict p, float *restrict ds, float lse,
                                float d, float cap)
{
    for (int64_t j = 0; j < n; j++) {
        float t = tanhf(p[j] / cap);
        float e = expf(cap * t - lse);
        p[j] = e;
        ds[j] = e * (ds[j] - d) * (1.0f - t * t);
    }
}

static inline float dot(int64_t n, const float *restrict a, const float *restrict b)
{
    float s = 0.0f;
    for (int64_t i = 0; i < n; i++)
        s += a[i] * b[i];
    return s;
}

/* An operand of the kernels' products: its floats, and under bf16 products the same rounded
 * to bf16 once for all the chunks that read it (NULL: the product rounds the floats). */
typedef struct operand {
    const float *f;
    const uint16_t *h;
} operand;

static operand from(const operand x, int64_t offset)
{
    operand r = {x.f + offset, x.h ? x.h + offset : NULL};
    return r;
}

/* The products' bf16 mode: on dnnl, and for one-row products (the decode steps of
 * generation) `row`, room for a row of A rounded to bf16 values (NULL: none); `scores` (the
 * backward), room for a chunk's p and ds rounded to bf16, each row as the softmax's gradient
 * finishes it (while it is in the cache), for the products that read them (ds read by two:
 * rounded once); NULL: those products round them. */
typedef struct bf16_mode {
    int on;
    float *row;
    uint16_t *scores;
} bf16_mode;

/* One product of the kernels: C = alpha op(A) op(B) + beta C, rows of A and C contiguous
 * (leading dimensions lda, ldb, ldc); bf16.on: with bf16 operands on dnnl (see the top),
 * one row of A against a B rounded once by nnt's bf16 gemv (its bf16 B read as it is, the
 * row rounded into bf16.row), as the layers' one-row products under bf16 precision. */
static void product(nnt_dnnl_cache *dnnl, bf16_mode bf16, int trans_a, int trans_b,
                    int64_t m, int64_t n, int64_t k, float alpha, operand a, int64_t lda,
                    operand b, int64_t ldb, float beta, float *c, int64_t ldc)
{
    if (bf16.row && m == 1 && !trans_a && b.h && k > 0) {   /* row: bf16 on dnnl */
        nnt_cpu_round_f32(k, 7, a.f, bf16.row);   /* bf16's 7 explicit mantissa bits */
        nnt_cpu_gemv_bf16(trans_b, 1, n, k, alpha, bf16.row, b.h, ldb, beta, c);
        return;
    }
    int dtypes = NNT_DNNL_BF16 | (a.h ? NNT_DNNL_A_BF16 : 0) | (b.h ? NNT_DNNL_B_BF16 : 0);
    if (bf16.on && dnnl &&
        nnt_cpu_gemm_dnnl(dnnl, trans_a, trans_b, dtypes, m, n, k, alpha,
                          a.h ? (const void *)a.h : a.f, lda, 0, b.h ? (const void *)b.h : b.f,
                          ldb, 0, beta, c, ldc, 0, 1) == 0)
        return;
    nnt_cpu_product_f32(dnnl, trans_a, trans_b, m, n, k, alpha, a.f, lda, 0, b.f, ldb, 0, beta,
                        c, ldc, 0, 1);
}

/* The operand of the rows x hd floats x, of which the products read rows [lo, hi): with a bf16
 * copy of those rows in h (at the same offsets) when there is h (bf16 products with scratch
 * for it), made here; else the floats alone. */
static operand rounded(const float *x, int64_t lo, int64_t hi, int64_t hd, uint16_t *h)
{
    operand r = {x, NULL};
    if (h) {
        if (hi > lo)
            nnt_cpu_f32_to_bf16((hi - lo) * hd, x + lo * hd, h + lo * hd);
        r.h = h;
    }
    return r;
}

/* Scratch for bf16 copies of rows x hd elements and of score blocks of `scores` elements
 * (bf16 products on dnnl), or NULL (none needed, or no memory: the products then round their
 * operands themselves). */
static uint16_t *bf16_scratch(const nnt_attn_map *mp, nnt_dnnl_cache *dnnl, int64_t rows,
                              int64_t hd, int64_t scores)
{
    return mp->bf16 && dnnl ? attn_scratch(SCRATCH_H16,
                                           (size_t)(rows * hd + scores) * sizeof(uint16_t))
                            : NULL;
}

/* Row r of a score block (nk floats at x) rounded into the block's bf16 copy, if any. */
static void round_row(const bf16_mode bf16, int64_t block, int64_t r, int64_t nk,
                      const float *x)
{
    if (bf16.scores)
        nnt_cpu_f32_to_bf16(nk, x, bf16.scores + block + r * nk);
}

/* Room for one row of A of the one-row products (k is tk or hd), with the bf16 copies h16
 * (else NULL: those products run on dnnl). */
static float *row_scratch(const uint16_t *h16, int64_t tk, int64_t hd)
{
    return h16 ? attn_scratch(SCRATCH_ROW, (size_t)(tk > hd ? tk : hd) * sizeof(float)) : NULL;
}

/* Whether every query row of the block sees every key of it (no diagonal, window or example
 * start cuts it) */
static int block_whole(int64_t tq, int64_t tk, int64_t q_pos0, int64_t k_pos0, int64_t window,
                       const int32_t *qpos)
{
    return !qpos && nvis(q_pos0, k_pos0, tk) == tk &&
           nlo(q_pos0 + tq - 1, k_pos0, tk, window) == 0;
}

/* The leading dimension of the band products' transposed operands (kt, vt: hd rows of tk
 * keys, floats or bf16 pairs): tk rounded up to 16 words (a cache line: see aligned_keys) and
 * 16 words more, so that rows of 1024 keys, 4 KiB apart, do not all fall into the same sets
 * of the L1 cache. Blocks of 1024 x 1024 (8 heads of 64, one thread, AMD Zen 5): a whole
 * block's forward 10.2 ms against 11.65 at a leading dimension of tk, its backward 23.5-23.8
 * against 26.1-26.3, a diagonal block's 5.38 and 11.6-11.7 against 6.02-6.04 and 13.0
 * (bench/RESULTS-window.md). */
static int64_t band_ld(int64_t tk)
{
    return (tk + 15) / 16 * 16 + 16;
}

/* The keys [*klo, *khi) of a call whose k, v rows are prepared (prefetched, transposed,
 * rounded to bf16) widened to multiples of 16 keys (khi at most tk): with the scratch on a
 * cache line and band_ld a multiple of 16, each 16 keys of a transposed row are one line. A
 * window's band starts one key past a multiple of 16 (T 4096, W 512, tiles of 256: keys [1,
 * 767)), and every store of its transposes split over two lines: (768, 64) transposed in 18.8
 * us against 6.7 aligned (Intel Xeon, one thread, hot). The extra keys are the call's own
 * rows (no product reads their columns). */
static void aligned_keys(int64_t *klo, int64_t *khi, int64_t tk)
{
    *klo -= *klo % 16;
    *khi = (*khi + 15) / 16 * 16 < tk ? (*khi + 15) / 16 * 16 : tk;
}

/* Room for n transposed (hd, band_ld(tk)) operands of the band products (cpu/attn_band.c),
 * which the kernels use for their float products where the CPU has AVX2 or AVX-512F; NULL:
 * the GEMMs. Measured on AMD Zen 5, one thread, a block of 256 x 256 (bench/RESULTS-window.md):
 * the band products take 0.91-0.98 of the GEMMs' time for the forward of a whole block,
 * 0.80-0.85 for a block the diagonal or a window's edge cuts, 0.78-0.97 for the backward of a
 * cut block (heads of 64, 128 and 256; with AVX-512 and with AVX2 alone), and 0.91-0.97 for
 * the backward of a whole block with AVX-512 (heads of 64: 1.47-1.48 ms against 1.58-1.59; 128:
 * 1.41-1.43 against 1.46-1.47; 256: 1.35-1.36 against 1.39-1.40), 1.00 with AVX2 alone (2.74
 * against 2.75-2.76). Not these where the products are bf16 (on dnnl: the bf16 band products,
 * else oneDNN's); the GEMMs also on the portable path, without scratch p or memory, and below
 * ATTN_BAND_ROWS query rows, as in generation's decode steps (there the transposes would cost
 * as much as the products, and the GEMMs' one-row path streams k and v once). */
#define ATTN_BAND_ROWS 8
static float *band_scratch(const float *p, const nnt_attn_map *mp, nnt_dnnl_cache *dnnl, int n,
                           int64_t rows, int64_t tk, int64_t hd)
{
    if (!p || (mp->bf16 && dnnl) || rows < ATTN_BAND_ROWS || nnt_cpu_band_level() <= 0)
        return NULL;
    return attn_scratch(SCRATCH_KT, (size_t)(n * band_ld(tk) * hd) * sizeof(float));
}

/* The end of a score row of n floats whose keys are [a, nv): without h, cleared outside them
 * for the products that read it; with h (the bf16 band products), rounded to bf16 into h with
 * zeros outside (the floats there are not read again) */
static void close_row(float *x, int64_t a, int64_t nv, int64_t n, uint16_t *h)
{
    a = a < n ? a : n;
    nv = nv > a ? (nv < n ? nv : n) : a;
    if (h) {   /* the zeros written: nnt_cpu_f32_to_bf16's bits for 0.0f */
        memset(h, 0, (size_t)a * sizeof *h);
        nnt_cpu_f32_to_bf16(nv - a, x + a, h + a);
        memset(h + nv, 0, (size_t)(n - nv) * sizeof *h);
        return;
    }
    for (int64_t j = 0; j < a; j++)
        x[j] = 0.0f;
    for (int64_t j = nv; j < n; j++)
        x[j] = 0.0f;
}

/* Scratch of the bf16 band products (cpu/attn_band16.c), which the kernels use for their bf16
 * products where nnt_cpu_band16_level() says (AVX512-BF16), hd is even and a call has at
 * least ATTN_BAND_ROWS query rows, except the backward of whole blocks (`bwd_whole`: oneDNN's,
 * 0.95-1.02 ms against 1.03-1.10 for a block of 256 x 256 with 8 heads of 64, one thread, AMD
 * Zen 5; a cut block's backward 0.65-0.67 against 0.87-1.00, its forward 0.33-0.34 against
 * 0.36-0.38: bench/RESULTS-window.md): their operands as bf16 pairs along each sum (nnt_cpu.h,
 * "bf16 band products"). kt: k's pairs transposed, (hd / 2, tk), for q k^T; vt (backward):
 * v's, for dout v^T; kv2: the pair rows of v (forward: p v) or of k (backward: ds k), ((tk +
 * 1) / 2 + 1, hd); per chunk: s16, bf16 rows of the score blocks (forward p; backward p then
 * ds: p's only with a soft-cap), (ch, tk + 1) each; (backward) pp, dsp: the row pairs of p
 * and ds, (ch / 2 + 1, tk) each; qp, dop: those of the chunk's q and dout rows, (ch / 2 + 1,
 * hd) each. One allocation, at kt. */
typedef struct band16 {
    uint32_t *kt, *vt, *kv2, *pp, *dsp, *qp, *dop;
    uint16_t *s16;
} band16;

static band16 *band16_scratch(band16 *b, const float *p, const uint16_t *h16,
                              const nnt_attn_map *mp, int bwd, int bwd_whole, int64_t rows,
                              int64_t ch, int64_t tk, int64_t hd)
{
    if (!p || !h16 || !mp->bf16 || hd % 2 != 0 || rows < ATTN_BAND_ROWS || bwd_whole ||
        nnt_cpu_band16_level() <= 0)
        return NULL;
    int64_t nkt = hd / 2 * band_ld(tk), nkv2 = ((tk + 1) / 2 + 1) * hd, ns = ch * (tk + 1);
    int64_t nrp = (ch / 2 + 1) * tk, nqp = (ch / 2 + 1) * hd;
    int64_t words = nkt * (bwd ? 2 : 1) + nkv2 + (bwd ? 2 * nrp + 2 * nqp : 0) +
                    (ns * (bwd ? 2 : 1) + 1) / 2;
    uint32_t *w = attn_scratch(SCRATCH_B16, (size_t)words * sizeof(uint32_t));
    if (!w)
        return NULL;   /* the GEMMs */
    memset(b, 0, sizeof *b);
    b->kt = w;
    w += nkt;
    if (bwd) {
        b->vt = w;
        w += nkt;
    }
    b->kv2 = w;
    w += nkv2;
    if (bwd) {
        b->pp = w;
        b->dsp = w + nrp;
        b->qp = w + 2 * nrp;
        b->dop = w + 2 * nrp + nqp;
        w += 2 * nrp + 2 * nqp;
    }
    b->s16 = (uint16_t *)w;
    return b;
}

/* The pairs of a kv slab for the bf16 band products: k's transposed (and v's: backward),
 * and the pair rows of kv (v forward, k backward), from their bf16 rows [a, b) (a even; b
 * even or tk) */
static void band16_slab(const band16 *b16, const uint16_t *k16, const uint16_t *v16,
                        const uint16_t *kv16, int64_t a, int64_t b, int64_t tk, int64_t hd)
{
    int64_t hd2 = hd / 2;
    nnt_cpu_band_transpose(b - a, hd2, k16 + a * hd, b16->kt + a, band_ld(tk));
    if (b16->vt)
        nnt_cpu_band_transpose(b - a, hd2, v16 + a * hd, b16->vt + a, band_ld(tk));
    nnt_cpu_bf16_pair_rows(b - a, hd, kv16 + a * hd, hd, b16->kv2 + a / 2 * hd, hd);
}

/* ---- a call's keys in segments ----------------------------------------------------------- */

/* The keys of a call's kv slab, as segments of rows: a block's key tile is one, a band task's
 * query tile takes the key tiles of its band at once (nnt_cpu_attn_fwd_band_f32: one band of
 * keys, as if the tiles were one, with one softmax a row over it). Segment s holds the call's
 * keys [at[s], at[s + 1]), its rows of k, v (backward: dk, dv) from its first key. */
#define ATTN_SEGS 8
#define ATTN_SEG_ROWS 256   /* the most query rows of a chunk (forward and backward) */
typedef struct kv_segs {
    int n;
    int64_t at[ATTN_SEGS + 1];
    const float *k[ATTN_SEGS], *v[ATTN_SEGS];
    float *dk[ATTN_SEGS], *dv[ATTN_SEGS];
} kv_segs;

enum { SEG_K, SEG_V, SEG_DK, SEG_DV };

/* segment s's rows of k, v, dk or dv */
static const float *seg_rows(const kv_segs *sg, int which, int s)
{
    return which == SEG_K ? sg->k[s] : which == SEG_V ? sg->v[s] : which == SEG_DK ? sg->dk[s]
                                                                                 : sg->dv[s];
}

/* kv slab skv of the key tiles of a call (each tile's slabs of its own rows) */
static void slab_segs(const nnt_attn_keys *keys, int64_t skv, int64_t hd, kv_segs *sg)
{
    sg->n = keys->n;
    sg->at[0] = 0;
    for (int s = 0; s < keys->n; s++) {
        const int64_t at = skv * keys->tk[s] * hd;
        sg->k[s] = keys->k[s] + at;
        sg->v[s] = keys->v[s] + at;
        sg->dk[s] = keys->dk ? keys->dk[s] + at : NULL;
        sg->dv[s] = keys->dv ? keys->dv[s] + at : NULL;
        sg->at[s + 1] = sg->at[s] + keys->tk[s];
    }
}

/* The key tiles `keys` as one block of keys: *tk keys from position *k_pos0 (the tiles'
 * positions follow one another); -1 with more tiles than ATTN_SEGS */
static int keys_block(const nnt_attn_keys *keys, int64_t *tk, int64_t *k_pos0)
{
    *tk = 0, *k_pos0 = keys->n > 0 ? keys->k_pos0[0] : 0;
    for (int j = 0; j < keys->n; j++)
        *tk += keys->tk[j];
    return keys->n > ATTN_SEGS ? -1 : 0;
}

/* The call's keys [a, b) that segment s holds: [*sa, *sb); 0 if none */
static int seg_keys(const kv_segs *sg, int s, int64_t a, int64_t b, int64_t *sa, int64_t *sb)
{
    *sa = a > sg->at[s] ? a : sg->at[s];
    *sb = b < sg->at[s + 1] ? b : sg->at[s + 1];
    return *sb > *sa;
}

/* rows [a, b) of the segments' k, v, dk or dv, prefetched (ATTN_INLINE: see prefetch_rows) */
ATTN_INLINE void segs_prefetch(const kv_segs *sg, int which, int64_t a, int64_t b, int64_t hd)
{
    int64_t sa, sb;
    for (int s = 0; s < sg->n; s++)
        if (seg_keys(sg, s, a, b, &sa, &sb))
            prefetch_rows(seg_rows(sg, which, s), sa - sg->at[s], sb - sg->at[s], hd);
}

/* rows [a, b) of the segments' k or v, transposed into xt (ld) at columns [a, b) */
static void segs_transpose(const kv_segs *sg, int which, int64_t a, int64_t b, int64_t hd,
                           float *xt, int64_t ld)
{
    int64_t sa, sb;
    for (int s = 0; s < sg->n; s++)
        if (seg_keys(sg, s, a, b, &sa, &sb))
            nnt_cpu_band_transpose(sb - sa, hd, seg_rows(sg, which, s) + (sa - sg->at[s]) * hd,
                                   xt + sa, ld);
}

/* The operand of the segments' k or v rows [a, b): the floats of a single segment (the GEMM
 * paths read them; NULL with more), and with h their bf16 copy, made here, at the same rows */
static operand segs_operand(const kv_segs *sg, int which, int64_t a, int64_t b, int64_t hd,
                            uint16_t *h)
{
    operand r = {sg->n == 1 ? seg_rows(sg, which, 0) : NULL, h};
    int64_t sa, sb;
    for (int s = 0; h && s < sg->n; s++)
        if (seg_keys(sg, s, a, b, &sa, &sb))
            nnt_cpu_f32_to_bf16((sb - sa) * hd, seg_rows(sg, which, s) + (sa - sg->at[s]) * hd,
                                h + sa * hd);
    return r;
}

/* The keys [lo[r], hi[r]) of rows (from key k0) within keys [k0 + ca, k0 + cb), from k0 + ca */
static void clip_keys(int64_t rows, const int64_t *lo, const int64_t *hi, int64_t ca,
                      int64_t cb, int64_t *slo, int64_t *shi)
{
    for (int64_t r = 0; r < rows; r++) {
        int64_t a = lo[r] < ca ? ca : (lo[r] > cb ? cb : lo[r]);
        int64_t b = hi[r] < ca ? ca : (hi[r] > cb ? cb : hi[r]);
        slo[r] = a - ca, shi[r] = b - ca;
    }
}

/* c[r][..] += alpha sum_j p[r][j] x[k0 + j][..] over each row's keys [lo[r], hi[r]) (p's
 * columns: keys from k0), x the rows of the segments' k or v: a band product a segment (the
 * sums of each segment's keys added to c in turn) */
static void segs_ab(const kv_segs *sg, int which, int64_t rows, int64_t k0, int64_t nk,
                    int64_t hd, float alpha, const float *p, int64_t ldp, const int64_t *lo,
                    const int64_t *hi, float *c, int64_t ldc)
{
    int64_t slo[ATTN_SEG_ROWS], shi[ATTN_SEG_ROWS], sa, sb;
    for (int s = 0; s < sg->n; s++) {
        if (!seg_keys(sg, s, k0, k0 + nk, &sa, &sb))
            continue;
        clip_keys(rows, lo, hi, sa - k0, sb - k0, slo, shi);
        const float *x = seg_rows(sg, which, s) + (sa - sg->at[s]) * hd;
        nnt_cpu_band_ab(rows, hd, alpha, p + (sa - k0), ldp, x, hd, slo, shi, c, ldc);
    }
}

/* The segments' dk (dk 1) or dv rows k0 + j += alpha sum_r p[r][j] a[r][..] over the rows
 * that see key k0 + j (p's columns: keys from k0; pairs: p and a as the bf16 band products'
 * row pairs, nnt_cpu_band16_atb): a band product a segment, each key's sum the same as in one */
static void segs_atb(const kv_segs *sg, int dk, int pairs, int64_t rows, int64_t k0, int64_t nk,
                     int64_t hd, float alpha, const void *p, int64_t ldp, const void *a,
                     int64_t lda, const int64_t *lo, const int64_t *hi)
{
    int64_t slo[ATTN_SEG_ROWS], shi[ATTN_SEG_ROWS], sa, sb;
    for (int s = 0; s < sg->n; s++) {
        if (!seg_keys(sg, s, k0, k0 + nk, &sa, &sb))
            continue;
        clip_keys(rows, lo, hi, sa - k0, sb - k0, slo, shi);
        float *c = (dk ? sg->dk[s] : sg->dv[s]) + (sa - sg->at[s]) * hd;
        if (pairs)
            nnt_cpu_band16_atb(rows, sb - sa, hd, alpha, (const uint32_t *)p + (sa - k0), ldp,
                               a, lda, slo, shi, c, hd);
        else
            nnt_cpu_band_atb(rows, sb - sa, hd, alpha, (const float *)p + (sa - k0), ldp, a,
                             lda, slo, shi, c, hd);
    }
}

/* ---- forward ---------------------------------------------------------------------------- */

/* A chunk's first score column: the rows' first key k0 rounded down where band products
 * compute the scores, to an even key for the bf16 ones (their key pairs), to a multiple of 16
 * for the float ones (kt + k0, vt + k0 on a cache line: see aligned_keys); k0 for the GEMMs */
static int64_t chunk_key0(int64_t k0, const band16 *b16, const float *kt)
{
    return b16 ? k0 - (k0 & 1) : kt ? k0 - k0 % 16 : k0;
}

/* One slab, rows [i0, i1) with scratch p of (i1 - i0, tk) floats.
 * q, o: (tq, hd); k, v: (tk, hd) (the GEMMs), or in segments sg (the band products: v's
 * rows); m, l: (tq). Every row sees at least one key. */
static void fwd_chunk(nnt_dnnl_cache *dnnl, bf16_mode bf16, int64_t i0, int64_t i1, int64_t tk,
                      int64_t hd, int64_t q_pos0, int64_t k_pos0, int64_t w, const int32_t *pos,
                      float scale, float cap, operand q, operand k, operand v, const kv_segs *sg,
                      const float *kt, const band16 *b16, float *o, float *m, float *l, float *p)
{
    int64_t rows = i1 - i0;
    int64_t k0 = chunk_key0(chunk_lo(i0, i1, q_pos0, k_pos0, tk, w, pos), b16, kt);
    int64_t nk = nvis(q_pos0 + i1 - 1, k_pos0, tk) - k0;     /* to the last row's last    */
    if (nk <= 0)
        return;   /* (positions) no row sees a key of the block */
    int64_t ldp = b16 ? nk + (nk & 1) : nk;   /* p's rows (b16: whole key pairs, 0 padded) */
    int64_t lo[ATTN_CHUNK], hi[ATTN_CHUNK];   /* (rows) each row's keys, from k0 */
    row_keys(i0, i1, q_pos0, k_pos0, tk, w, pos, k0, NULL, lo, hi);
    /* p (rows, nk) = scale * q[i0:i1] k[k0:k0 + nk]^T: with kt or b16, the band products over
     * the rows' own keys */
    if (b16) {
        nnt_cpu_band16_abt(rows, hd / 2, scale, (const uint32_t *)(q.h + i0 * hd), hd / 2,
                           b16->kt + k0, band_ld(tk), lo, hi, p, ldp);
    } else if (kt) {
        nnt_cpu_band_abt(rows, hd, scale, q.f + i0 * hd, hd, kt + k0, band_ld(tk), lo, hi, p, nk);
    } else {
        product(dnnl, bf16, 0, 1, rows, nk, hd,
                scale, from(q, i0 * hd), hd, from(k, k0 * hd), hd, 0.0f, p, nk);
    }
    for (int64_t r = 0; r < rows; r++) {
        int64_t i = i0 + r, a = lo[r], nv = hi[r];   /* visible: [a, nv) of p's row */
        float *restrict pr = p + r * ldp;
        uint16_t *h = b16 ? b16->s16 + r * ldp : NULL;   /* (b16) p's bf16 row */
        if (nv <= a) {   /* (positions) the row's example starts after the block */
            close_row(pr, 0, 0, ldp, h);
            continue;
        }
        if (cap > 0.0f)
            for (int64_t j = a; j < nv; j++)
                pr[j] = capped(pr[j], cap);
        float bm = nnt_cpu_row_max_f32(nv - a, pr + a);     /* nv - a >= 1 */
        float mnew = m[i] > bm ? m[i] : bm;
        float sum = nnt_cpu_row_exp_f32(nv - a, pr + a, mnew);
        close_row(pr, a, nv, ldp, h);   /* b16: rounded as the softmax ends the row */
        if (m[i] != mnew) {   /* the running maximum moved: rescale (alpha 0 when m was -inf) */
            float alpha = expf(m[i] - mnew);
            l[i] *= alpha;
            nnt_cpu_scale_f32(hd, alpha, o + i * hd);
        }
        l[i] += sum;
        m[i] = mnew;
    }
    /* o[i0:i1] (rows, hd) += p (rows, nk) v[k0:k0 + nk] (nk, hd) */
    if (b16) {
        nnt_cpu_band16_ab(rows, hd, 1.0f, (const uint32_t *)b16->s16, ldp / 2,
                          b16->kv2 + k0 / 2 * hd, hd, lo, hi, o + i0 * hd, hd);
        return;
    }
    if (kt) {
        segs_ab(sg, SEG_V, rows, k0, nk, hd, 1.0f, p, nk, lo, hi, o + i0 * hd, hd);
        return;
    }
    const operand pv = {p, NULL};
    product(dnnl, bf16, 0, 0, rows, hd, nk, 1.0f, pv, nk, from(v, k0 * hd), hd, 1.0f,
            o + i0 * hd, hd);
}

/* Scratch-free fallback for one query row: online softmax one key at a time. */
static void fwd_row_noscratch(int64_t nv, int64_t hd, float scale, float cap,
                              const float *restrict qi,
                              const float *restrict k, const float *restrict v,
                              float *restrict oi, float *mi, float *li)
{
    for (int64_t j = 0; j < nv; j++) {
        float s = capped(scale * dot(hd, qi, k + j * hd), cap);
        if (s > *mi) {
            float alpha = expf(*mi - s);
            for (int64_t c = 0; c < hd; c++)
                oi[c] *= alpha;
            *li *= alpha;
            *mi = s;
        }
        float pj = expf(s - *mi);
        *li += pj;
        const float *restrict vj = v + j * hd;
        for (int64_t c = 0; c < hd; c++)
            oi[c] += pj * vj[c];
    }
}

/* q slab and kv slab of slab s = b * nh + h of a map */
static inline int64_t map_q_slab(const nnt_attn_map *mp, int64_t b, int64_t h)
{
    return b * mp->q_hs + mp->q_h0 + h;
}

static inline int64_t map_kv_slab(const nnt_attn_map *mp, int64_t b, int64_t h)
{
    return b * mp->kv_hs + (mp->gofs + h) / mp->group;
}

/* nnt_cpu_attn_fwd_packed_f32 over the key tiles `keys` in turn as one block of keys (their
 * positions follow one another): with more than one, -1 where the band products are not
 * available (nothing written; one call a tile then), else 0 */
static int fwd_tiles(nnt_dnnl_cache *dnnl, const nnt_attn_map *mp, int64_t tq, int64_t hd,
                     int64_t q_pos0, int64_t window, const int32_t *qpos, float scale,
                     float cap, const nnt_attn_keys *keys, const float *q, float *o_acc,
                     float *m, float *l)
{
    int64_t tk, k_pos0;
    if (keys_block(keys, &tk, &k_pos0) != 0)
        return -1;
    int64_t r0 = first_row(tq, q_pos0, k_pos0);
    int64_t r1 = tk <= 0 ? 0 : end_row(tq, tk, q_pos0, k_pos0, window);
    if (mp->nb <= 0 || mp->nh <= 0 || mp->group <= 0 || tk <= 0 || hd <= 0 || r0 >= r1)
        return 0; /* empty, or the whole block lies above the diagonal or before the window */
    int64_t ch = r1 - r0 < ATTN_CHUNK ? r1 - r0 : ATTN_CHUNK;
    float *p = attn_scratch(SCRATCH_P, (size_t)(ch * (tk + 1)) * sizeof(float));   /* b16: pairs */
    /* q, k, v rounded (p is rounded by its product: rounding each row as the softmax ends it
     * was no faster here) */
    uint16_t *h16 = p ? bf16_scratch(mp, dnnl, tq + 2 * tk, hd, 0) : NULL;
    int64_t klo = nlo(q_pos0 + r0, k_pos0, tk, window), khi = nvis(q_pos0 + r1 - 1, k_pos0, tk);
    const bf16_mode bf16 = {mp->bf16 != 0, row_scratch(h16, tk, hd), NULL};
    float *kt = band_scratch(p, mp, dnnl, 1, r1 - r0, tk, hd);   /* (hd, tk) k^T, or NULL */
    band16 b16s, *b16 = band16_scratch(&b16s, p, h16, mp, 0, 0, r1 - r0, ch, tk, hd);
    if (keys->n > 1 && !kt && !b16)
        return -1;   /* segments: the band products' alone */
    aligned_keys(&klo, &khi, tk);
    operand qs = {NULL, NULL}, ks = {NULL, NULL}, vs = {NULL, NULL};
    kv_segs sg;
    int64_t kv_done = -1;   /* the kv slab sg, ks, vs (and kt) hold */
    for (int64_t b = 0; b < mp->nb; b++)
        for (int64_t h = 0; h < mp->nh; h++) {
            int64_t sq = map_q_slab(mp, b, h), skv = map_kv_slab(mp, b, h);
            const float *qb = q + sq * tq * hd;
            float *ob = o_acc + sq * tq * hd, *mb = m + sq * tq, *lb = l + sq * tq;
            const int32_t *pb = qpos ? qpos + b * tq : NULL;   /* (tq) positions of row b */
            const int kv_new = skv != kv_done;   /* q heads of one kv head follow one another */
            if (kv_new)
                slab_segs(keys, skv, hd, &sg);
            kv_done = skv;
            if (p) {   /* the rows the chunks read: queries [r0, r1), keys [klo, khi) */
                prefetch_rows(qb, r0, r1, hd);
                prefetch_rows(ob, r0, r1, hd);
                if (kv_new) {
                    segs_prefetch(&sg, SEG_K, klo, khi, hd);
                    segs_prefetch(&sg, SEG_V, klo, khi, hd);
                }
                qs = rounded(qb, r0, r1, hd, h16);
                if (kv_new) {
                    ks = segs_operand(&sg, SEG_K, klo, khi, hd, h16 ? h16 + tq * hd : NULL);
                    vs = segs_operand(&sg, SEG_V, klo, khi, hd,
                                      h16 ? h16 + (tq + tk) * hd : NULL);
                    if (kt)
                        segs_transpose(&sg, SEG_K, klo, khi, hd, kt, band_ld(tk));
                    if (b16)
                        band16_slab(b16, ks.h, NULL, vs.h, klo, khi, tk, hd);
                }
            }
            for (int64_t i0 = r0; i0 < r1; i0 += ch) {
                int64_t i1 = i0 + ch < r1 ? i0 + ch : r1;
                if (p) {
                    fwd_chunk(dnnl, bf16, i0, i1, tk, hd, q_pos0, k_pos0, window, pb,
                              scale, cap, qs, ks, vs, &sg, kt, b16, ob, mb, lb, p);
                    continue;
                }
                for (int64_t i = i0; i < i1; i++) {   /* one segment (above) */
                    int64_t a = row_lo(q_pos0 + i, k_pos0, tk, window, pb, i);
                    fwd_row_noscratch(nvis(q_pos0 + i, k_pos0, tk) - a, hd, scale, cap,
                                      qb + i * hd, sg.k[0] + a * hd, sg.v[0] + a * hd,
                                      ob + i * hd, mb + i, lb + i);
                }
            }
        }
    return 0;
}

void nnt_cpu_attn_fwd_packed_f32(nnt_dnnl_cache *dnnl, const nnt_attn_map *mp, int64_t tq,
                                 int64_t tk, int64_t hd, int64_t q_pos0, int64_t k_pos0,
                                 int64_t window, const int32_t *qpos, float scale, float cap,
                                 const float *q, const float *k, const float *v, float *o_acc,
                                 float *m, float *l)
{
    const nnt_attn_keys one = {1, &tk, &k_pos0, &k, &v, NULL, NULL, NULL};
    (void)fwd_tiles(dnnl, mp, tq, hd, q_pos0, window, qpos, scale, cap, &one, q, o_acc, m, l);
}

void nnt_cpu_attn_fwd_window_f32(nnt_dnnl_cache *dnnl, const nnt_attn_map *mp, int64_t tq,
                                 int64_t tk, int64_t hd, int64_t q_pos0, int64_t k_pos0,
                                 int64_t window, float scale, float cap, const float *q,
                                 const float *k, const float *v, float *o_acc, float *m,
                                 float *l)
{
    nnt_cpu_attn_fwd_packed_f32(dnnl, mp, tq, tk, hd, q_pos0, k_pos0, window, NULL, scale, cap,
                                q, k, v, o_acc, m, l);
}

void nnt_cpu_attn_fwd_gqa_f32(nnt_dnnl_cache *dnnl, const nnt_attn_map *mp, int64_t tq,
                              int64_t tk, int64_t hd, int64_t q_pos0, int64_t k_pos0,
                              float scale, const float *q, const float *k, const float *v,
                              float *o_acc, float *m, float *l)
{
    nnt_cpu_attn_fwd_window_f32(dnnl, mp, tq, tk, hd, q_pos0, k_pos0, 0, scale, 0.0f, q, k, v,
                                o_acc, m, l);
}

void nnt_cpu_attn_fwd_block_f32(int64_t nbh, int64_t tq, int64_t tk, int64_t hd,
                                int64_t q_pos0, int64_t k_pos0, float scale, const float *q,
                                const float *k, const float *v, float *o_acc, float *m,
                                float *l)
{
    const nnt_attn_map mha = {nbh, 1, 1, 0, 1, 1, 0, 0};
    nnt_cpu_attn_fwd_gqa_f32(NULL, &mha, tq, tk, hd, q_pos0, k_pos0, scale, q, k, v, o_acc, m,
                             l);
}

/* A row of the finalize: o /= l (o 0 where l is 0); lse = m + log(l) (-inf where l is 0). The
 * build vectorises nnt_cpu_scale_f32 (configure's -fvect-cost-model=dynamic): a (8, 256, 64)
 * tile in 12 us, about what an AVX2 row took (10.7), against 35.6 scalar (AMD Zen 5). */
static void finalize_row(int64_t hd, float *orow, float m, float l, float *lse)
{
    if (l > 0.0f) {
        nnt_cpu_scale_f32(hd, 1.0f / l, orow);
        *lse = m + logf(l);
    } else {
        memset(orow, 0, (size_t)hd * sizeof *orow);
        *lse = -INFINITY;
    }
}

/* d of a row: the double sum of dout o (the AVX2 path in two 4-lane partial sums, then the
 * tail: another order of the same double additions, d the same to float rounding) */
static float prep_row(int64_t hd, const float *restrict orow, const float *restrict drow)
{
    double s = 0.0;
    for (int64_t c = 0; c < hd; c++)
        s += (double)orow[c] * drow[c];
    return (float)s;
}

#if NNT_CPU_X86
#include "simd_avx2.h"

static NNT_AVX2 float prep_row_avx2(int64_t hd, const float *restrict orow,
                                    const float *restrict drow)
{
    __m256d s0 = _mm256_setzero_pd(), s1 = _mm256_setzero_pd();
    int64_t c = 0, n8 = hd & ~(int64_t)7;
    for (; c < n8; c += 8) {
        __m256 a = _mm256_loadu_ps(orow + c), b = _mm256_loadu_ps(drow + c);
        s0 = _mm256_add_pd(s0, _mm256_mul_pd(nnt_avx2_lo_pd(a), nnt_avx2_lo_pd(b)));
        s1 = _mm256_add_pd(s1, _mm256_mul_pd(nnt_avx2_hi_pd(a), nnt_avx2_hi_pd(b)));
    }
    double s = nnt_avx2_hsum_pd(_mm256_add_pd(s0, s1));
    for (; c < hd; c++)
        s += (double)orow[c] * drow[c];
    return (float)s;
}
#endif

void nnt_cpu_attn_fwd_finalize_f32(int64_t nbh, int64_t tq, int64_t hd, float *o,
                                   const float *m, const float *l, float *lse)
{
    for (int64_t r = 0; r < nbh * tq; r++)
        finalize_row(hd, o + r * hd, m[r], l[r], lse + r);
}

/* ---- attention sinks (gpt-oss) ---------------------------------------------------------- */

/* A sink logit S of a head joins each of its rows' softmax denominators and takes no value:
 * lse' = log(exp(lse) + exp(S)), o' = o exp(lse - lse'). (A row without a key, lse -inf,
 * gets o' = 0, lse' = S.) */
void nnt_cpu_attn_sink_fwd_f32(int64_t nb, int64_t nh, int64_t tq, int64_t hd,
                               const float *sinks, float *o, float *lse)
{
    for (int64_t s = 0; s < nb * nh; s++) {
        float sink = sinks[s % nh];
        for (int64_t t = 0; t < tq; t++) {
            int64_t r = s * tq + t;
            float L = lse[r], hi = L > sink ? L : sink, lo = L > sink ? sink : L;
            float Lp = hi + log1pf(expf(lo - hi));
            nnt_cpu_scale_f32(hd, expf(L - Lp), o + r * hd);
            lse[r] = Lp;
        }
    }
}

/* dsinks[h] -= sum over the rows of head h of p_sink (dout . o), p_sink = exp(S - lse), with
 * o and lse the sink's (o', lse'): the gradient of a softmax entry whose value is 0. Each
 * head's sum in double over its slabs and rows in order, then added once. */
void nnt_cpu_attn_sink_bwd_f32(int64_t nb, int64_t nh, int64_t tq, int64_t hd,
                               const float *sinks, const float *o, const float *dout,
                               const float *lse, float *dsinks)
{
    for (int64_t h = 0; h < nh; h++) {
        double acc = 0.0;
        for (int64_t b = 0; b < nb; b++)
            for (int64_t t = 0; t < tq; t++) {
                int64_t r = (b * nh + h) * tq + t;
                double dot = 0.0;
                for (int64_t c = 0; c < hd; c++)
                    dot += (double)dout[r * hd + c] * (double)o[r * hd + c];
                acc += exp((double)sinks[h] - (double)lse[r]) * dot;
            }
        dsinks[h] -= (float)acc;
    }
}

/* ---- backward --------------------------------------------------------------------------- */

void nnt_cpu_attn_bwd_prep_f32(int64_t nbh, int64_t tq, int64_t hd, const float *o,
                               const float *dout, float *d)
{
    float (*row)(int64_t, const float *, const float *) = prep_row;
#if NNT_CPU_X86
    if (nnt_cpu_isa() == NNT_CPU_ISA_AVX2)
        row = prep_row_avx2;
#endif
    for (int64_t r = 0; r < nbh * tq; r++)
        d[r] = row(hd, o + r * hd, dout + r * hd);
}

/* ---- the backward's chunks, in segments -------------------------------------------------- */

/* The backward takes query rows in chunks of up to ATTN_BWD_CHUNK rows (its products of dk
 * and dv then sum more rows at once: a chunk's dk, dv rows are read and written once for
 * them all), as long as the chunk's two score blocks stay within ATTN_BWD_SCRATCH floats each;
 * and it gives each group of ATTN_CHUNK rows of a chunk only the keys its rows see, so that a
 * chunk against the diagonal or a window's edge computes no more scores than chunks of
 * ATTN_CHUNK rows would. On AMD Zen 5 (tiles of 256, 64-dim heads, bench/RESULTS-window.md)
 * the backward of a block the diagonal or a window's edge cuts took 6-7 % less time than in
 * chunks of 64 rows, of a whole block the same. */
#define ATTN_BWD_CHUNK 256
#define ATTN_BWD_SCRATCH 65536
#define ATTN_GROUPS (ATTN_BWD_CHUNK / ATTN_CHUNK)
#if ATTN_BWD_CHUNK > ATTN_SEG_ROWS || ATTN_CHUNK > ATTN_SEG_ROWS
#error "segs_ab and segs_atb take chunks of at most ATTN_SEG_ROWS rows"
#endif

/* The backward's rows a chunk against blocks of tk keys: a multiple of ATTN_CHUNK */
static int64_t bwd_chunk_rows(int64_t tk)
{
    int64_t rows = ATTN_BWD_SCRATCH / (tk > 0 ? tk : 1) / ATTN_CHUNK * ATTN_CHUNK;
    return rows < ATTN_CHUNK ? ATTN_CHUNK : (rows > ATTN_BWD_CHUNK ? ATTN_BWD_CHUNK : rows);
}

/* Keys [k0, k1) of a chunk's score blocks (their columns) and the rows [r0, r1) of the chunk
 * (from its first) that see any of them: one product each. */
typedef struct segment {
    int64_t k0, k1, r0, r1;
} segment;

/* x inserted into the n sorted values of v */
static void insert_sorted(int64_t *v, int n, int64_t x)
{
    for (; n > 0 && v[n - 1] > x; n--)
        v[n] = v[n - 1];
    v[n] = x;
}

/* The segments of rows [i0, i1), keys counted from the block's key kbase (the chunk's first):
 * the bounds of every group's keys, sorted, cut the keys into segments, and each goes to the
 * rows of the first to the last group that sees all of it. Adjacent segments of the same rows
 * are joined. Returns their number, at most 2 ATTN_GROUPS - 1 (0: no row sees a key). */
static int chunk_segments(int64_t i0, int64_t i1, int64_t q_pos0, int64_t k_pos0, int64_t tk,
                          int64_t w, const int32_t *pos, int64_t kbase, segment *sg)
{
    int64_t lo[ATTN_GROUPS], hi[ATTN_GROUPS], cut[2 * ATTN_GROUPS];
    int ng = 0, nc = 0, ns = 0;
    for (int64_t g0 = i0; g0 < i1; g0 += ATTN_CHUNK, ng++) {
        int64_t g1 = g0 + ATTN_CHUNK < i1 ? g0 + ATTN_CHUNK : i1;
        lo[ng] = chunk_lo(g0, g1, q_pos0, k_pos0, tk, w, pos) - kbase;
        hi[ng] = nvis(q_pos0 + g1 - 1, k_pos0, tk) - kbase;
        insert_sorted(cut, nc++, lo[ng]);
        insert_sorted(cut, nc++, hi[ng]);
    }
    for (int c = 0; c + 1 < nc; c++) {
        int64_t a = cut[c], b = cut[c + 1];
        int first = -1, last = -1;
        for (int g = 0; g < ng && b > a; g++)
            if (lo[g] <= a && hi[g] >= b) {
                first = first < 0 ? g : first;
                last = g;
            }
        if (first < 0)
            continue;   /* an empty cut, or (positions) keys no group sees */
        int64_t r0 = first * ATTN_CHUNK, r1 = (last + 1) * ATTN_CHUNK;
        r1 = r1 < i1 - i0 ? r1 : i1 - i0;
        if (ns > 0 && sg[ns - 1].k1 == a && sg[ns - 1].r0 == r0 && sg[ns - 1].r1 == r1) {
            sg[ns - 1].k1 = b;
            continue;
        }
        segment s = {a, b, r0, r1};
        sg[ns++] = s;
    }
    return ns;
}

/* The softmax gradient of a row of a chunk's score blocks over its keys [a, nv): p (the scaled
 * scores in, the probabilities out) and ds (dout v^T in, the scores' gradient out) */
static void grad_row(int64_t a, int64_t nv, float *restrict pr, float *restrict dsr, float lse,
                     float d, float cap)
{
    if (cap > 0.0f)
        capped_softmax_grad(nv - a, pr + a, dsr + a, lse, d, cap);
    else
        nnt_cpu_row_softmax_grad_f32(nv - a, pr + a, dsr + a, lse, d);
}

/* bwd_chunk by the bf16 band products: keys [k0, k0 + nk) (k0 even), p and ds in rows of
 * whole key pairs, rounded to bf16 as each row ends, the five products over the rows' own
 * keys. q and dout with their bf16 rows (q.h, dout.h). */
static void bwd_chunk16(int64_t i0, int64_t i1, int64_t tk, int64_t hd, int64_t q_pos0,
                        int64_t k_pos0, int64_t w, const int32_t *pos, int64_t k0, int64_t nk,
                        float scale, float cap, operand q, operand dout, const band16 *b16,
                        const float *lse, const float *d, float *dq, const kv_segs *sg,
                        float *p, float *ds)
{
    int64_t rows = i1 - i0, ldp = nk + (nk & 1), hd2 = hd / 2;
    int64_t lo[ATTN_BWD_CHUNK], hi[ATTN_BWD_CHUNK];   /* (rows) each row's keys, from k0 */
    row_keys(i0, i1, q_pos0, k_pos0, tk, w, pos, k0, lse, lo, hi);
    const uint32_t *q32 = (const uint32_t *)(q.h + i0 * hd);
    const uint32_t *do32 = (const uint32_t *)(dout.h + i0 * hd);
    nnt_cpu_band16_abt(rows, hd2, scale, q32, hd2, b16->kt + k0, band_ld(tk), lo, hi, p, ldp);
    nnt_cpu_band16_abt(rows, hd2, 1.0f, do32, hd2, b16->vt + k0, band_ld(tk), lo, hi, ds, ldp);
    /* p and ds ended and rounded: ds's bf16 rows and the row pairs of both, without a
     * soft-cap in one pass a pair of rows (an (8, 256, 64) block cut by the window's edge:
     * its backward 0.618-0.622 ms against 0.647-0.653 in four passes, one thread, AMD Zen 5,
     * bench/RESULTS-window.md) */
    uint16_t *p16 = b16->s16, *ds16 = b16->s16 + rows * ldp;
    if (cap > 0.0f || nnt_cpu_band16_grad_rows(rows, nk, ldp, p, ds, lo, hi, lse + i0, d + i0,
                                               ds16, b16->pp, b16->dsp, tk) != 0) {
        for (int64_t r = 0; r < rows; r++) {
            grad_row(lo[r], hi[r], p + r * ldp, ds + r * ldp, lse[i0 + r], d[i0 + r], cap);
            close_row(p + r * ldp, lo[r], hi[r], ldp, p16 + r * ldp);
            close_row(ds + r * ldp, lo[r], hi[r], ldp, ds16 + r * ldp);
        }
        nnt_cpu_bf16_pair_rows(rows, nk, p16, ldp, b16->pp, tk);
        nnt_cpu_bf16_pair_rows(rows, nk, ds16, ldp, b16->dsp, tk);
    }
    /* the row pairs of q and dout for the sums over rows */
    nnt_cpu_bf16_pair_rows(rows, hd, q.h + i0 * hd, hd, b16->qp, hd);
    nnt_cpu_bf16_pair_rows(rows, hd, dout.h + i0 * hd, hd, b16->dop, hd);
    /* dv[k0:] += p^T dout;  dq[i0:i1] += scale ds k[k0:];  dk[k0:] += scale ds^T q */
    segs_atb(sg, 0, 1, rows, k0, nk, hd, 1.0f, b16->pp, tk, b16->dop, hd, lo, hi);
    nnt_cpu_band16_ab(rows, hd, scale, (const uint32_t *)ds16, ldp / 2, b16->kv2 + k0 / 2 * hd,
                      hd, lo, hi, dq + i0 * hd, hd);
    segs_atb(sg, 1, 1, rows, k0, nk, hd, scale, b16->dsp, tk, b16->qp, hd, lo, hi);
}

/* One slab, rows [i0, i1); scratch p and ds of (i1 - i0, tk) floats each.
 * q, dout, dq: (tq, hd); k, v, dk, dv: (tk, hd); lse, d: (tq). */
static void bwd_chunk(nnt_dnnl_cache *dnnl, bf16_mode bf16, int64_t i0, int64_t i1, int64_t tk,
                      int64_t hd, int64_t q_pos0, int64_t k_pos0, int64_t w, const int32_t *pos,
                      float scale, float cap, operand q, operand k, operand v, operand dout,
                      const kv_segs *kv, const float *kt, const float *vt, const band16 *b16,
                      const float *lse, const float *d, float *dq, float *p, float *ds)
{
    float *dk = kv->dk[0], *dv = kv->dv[0];   /* the GEMMs: one segment */
    int64_t rows = i1 - i0;
    int64_t k0 = chunk_key0(chunk_lo(i0, i1, q_pos0, k_pos0, tk, w, pos), b16, kt);
    int64_t nk = nvis(q_pos0 + i1 - 1, k_pos0, tk) - k0;
    if (nk <= 0)
        return;   /* (positions) no row sees a key of the block */
    if (b16) {
        bwd_chunk16(i0, i1, tk, hd, q_pos0, k_pos0, w, pos, k0, nk, scale, cap, q, dout, b16,
                    lse, d, dq, kv, p, ds);
        return;
    }
    const uint16_t *p16 = bf16.scores, *ds16 = p16 ? p16 + rows * nk : NULL;
    const operand pc = {p, p16}, dsc = {ds, ds16};
    segment sg[2 * ATTN_GROUPS];
    int64_t lo[ATTN_BWD_CHUNK], hi[ATTN_BWD_CHUNK];   /* (rows) each row's keys, from k0 */
    row_keys(i0, i1, q_pos0, k_pos0, tk, w, pos, k0, lse, lo, hi);
    int ns = 0;
    if (kt) {   /* the band products: p, ds over the rows' own keys */
        nnt_cpu_band_abt(rows, hd, scale, q.f + i0 * hd, hd, kt + k0, band_ld(tk), lo, hi, p, nk);
        nnt_cpu_band_abt(rows, hd, 1.0f, dout.f + i0 * hd, hd, vt + k0, band_ld(tk), lo, hi, ds,
                         nk);
    } else {
        ns = chunk_segments(i0, i1, q_pos0, k_pos0, tk, w, pos, k0, sg);
    }
    /* p (rows, nk) = scale q k[k0:]^T;  ds (rows, nk) = dout v[k0:]^T, segment by segment
     * (what no segment covers is outside its rows' keys, set to 0 below) */
    for (int s = 0; s < ns; s++) {
        int64_t m = sg[s].r1 - sg[s].r0, n = sg[s].k1 - sg[s].k0, c = sg[s].r0 * nk + sg[s].k0;
        int64_t iq = (i0 + sg[s].r0) * hd, ik = (k0 + sg[s].k0) * hd;
        product(dnnl, bf16, 0, 1, m, n, hd, scale, from(q, iq), hd, from(k, ik), hd, 0.0f,
                p + c, nk);
        product(dnnl, bf16, 0, 1, m, n, hd, 1.0f, from(dout, iq), hd, from(v, ik), hd, 0.0f,
                ds + c, nk);
    }
    for (int64_t r = 0; r < rows; r++) {   /* [lo, hi): empty with lse -inf */
        float *restrict pr = p + r * nk, *restrict dsr = ds + r * nk;
        grad_row(lo[r], hi[r], pr, dsr, lse[i0 + r], d[i0 + r], cap);
        close_row(pr, lo[r], hi[r], nk, NULL);
        close_row(dsr, lo[r], hi[r], nk, NULL);
        round_row(bf16, 0, r, nk, pr);
        round_row(bf16, rows * nk, r, nk, dsr);
    }
    /* dv[k0:] += p^T dout;  dq[i0:i1] += scale ds k[k0:];  dk[k0:] += scale ds^T q, segment
     * by segment or over the band (p and ds are 0 outside each row's keys) */
    if (kt) {
        segs_atb(kv, 0, 0, rows, k0, nk, hd, 1.0f, p, nk, dout.f + i0 * hd, hd, lo, hi);
        segs_ab(kv, SEG_K, rows, k0, nk, hd, scale, ds, nk, lo, hi, dq + i0 * hd, hd);
        segs_atb(kv, 1, 0, rows, k0, nk, hd, scale, ds, nk, q.f + i0 * hd, hd, lo, hi);
    }
    for (int s = 0; s < ns; s++) {
        int64_t m = sg[s].r1 - sg[s].r0, n = sg[s].k1 - sg[s].k0, c = sg[s].r0 * nk + sg[s].k0;
        int64_t iq = (i0 + sg[s].r0) * hd, ik = (k0 + sg[s].k0) * hd;
        product(dnnl, bf16, 1, 0, n, hd, m, 1.0f, from(pc, c), nk, from(dout, iq), hd, 1.0f,
                dv + ik, hd);
        product(dnnl, bf16, 0, 0, m, hd, n, scale, from(dsc, c), nk, from(k, ik), hd, 1.0f,
                dq + iq, hd);
        product(dnnl, bf16, 1, 0, n, hd, m, scale, from(dsc, c), nk, from(q, iq), hd, 1.0f,
                dk + ik, hd);
    }
}

/* Scratch-free fallback for one query row, one key at a time. */
static void bwd_row_noscratch(int64_t nv, int64_t hd, float scale, float cap,
                              const float *restrict qi,
                              const float *restrict k, const float *restrict v,
                              const float *restrict doi, float lsei, float di,
                              float *restrict dqi, float *restrict dk, float *restrict dv)
{
    for (int64_t j = 0; j < nv; j++) {
        const float *restrict kj = k + j * hd, *restrict vj = v + j * hd;
        float *restrict dkj = dk + j * hd, *restrict dvj = dv + j * hd;
        float s = scale * dot(hd, qi, kj), g = 1.0f;
        if (cap > 0.0f) {
            float t = tanhf(s / cap);
            s = cap * t;
            g = 1.0f - t * t;
        }
        float pj = expf(s - lsei);
        float dsj = pj * (dot(hd, doi, vj) - di) * g;
        for (int64_t c = 0; c < hd; c++) {
            dvj[c] += pj * doi[c];
            dqi[c] += scale * dsj * kj[c];
            dkj[c] += scale * dsj * qi[c];
        }
    }
}

/* nnt_cpu_attn_bwd_packed_f32 over the key tiles `keys` (with dk, dv) in turn as one block of
 * keys, as fwd_tiles: -1 (nothing written) where more than one would need the GEMMs */
static int bwd_tiles(nnt_dnnl_cache *dnnl, const nnt_attn_map *mp, int64_t tq, int64_t hd,
                     int64_t q_pos0, int64_t window, const int32_t *qpos, float scale,
                     float cap, const nnt_attn_keys *keys, const float *q, const float *dout,
                     const float *lse, const float *d, float *dq)
{
    int64_t tk, k_pos0;
    if (keys_block(keys, &tk, &k_pos0) != 0)
        return -1;
    int64_t r0 = first_row(tq, q_pos0, k_pos0);
    int64_t r1 = tk <= 0 ? 0 : end_row(tq, tk, q_pos0, k_pos0, window);
    if (mp->nb <= 0 || mp->nh <= 0 || mp->group <= 0 || tk <= 0 || hd <= 0 || r0 >= r1)
        return 0;
    int64_t ch = bwd_chunk_rows(tk);
    ch = r1 - r0 < ch ? r1 - r0 : ch;
    float *p = attn_scratch(SCRATCH_P, (size_t)(2 * ch * (tk + 1)) * sizeof(float));
    /* q, dout, k, v rounded, and p, ds */
    uint16_t *h16 = p ? bf16_scratch(mp, dnnl, 2 * tq + 2 * tk, hd, 2 * ch * tk) : NULL;
    int64_t klo = nlo(q_pos0 + r0, k_pos0, tk, window), khi = nvis(q_pos0 + r1 - 1, k_pos0, tk);
    const bf16_mode bf16 = {mp->bf16 != 0, row_scratch(h16, tk, hd),
                            h16 ? h16 + (2 * tq + 2 * tk) * hd : NULL};
    /* k^T, v^T (hd, tk each), or NULL */
    int whole = block_whole(tq, tk, q_pos0, k_pos0, window, qpos);
    float *kt = band_scratch(p, mp, dnnl, 2, r1 - r0, tk, hd);
    float *vt = kt ? kt + band_ld(tk) * hd : NULL;
    band16 b16s, *b16 = band16_scratch(&b16s, p, h16, mp, 1, whole, r1 - r0, ch, tk, hd);
    if (keys->n > 1 && !kt && !b16)
        return -1;   /* segments: the band products' alone */
    aligned_keys(&klo, &khi, tk);
    operand qs = {NULL, NULL}, dos = {NULL, NULL}, ks = {NULL, NULL}, vs = {NULL, NULL};
    kv_segs sg;
    int64_t kv_done = -1;   /* the kv slab sg, ks, vs (and kt, vt) hold */
    for (int64_t b = 0; b < mp->nb; b++)
        for (int64_t h = 0; h < mp->nh; h++) {
            int64_t sq = map_q_slab(mp, b, h), skv = map_kv_slab(mp, b, h), oq = sq * tq * hd;
            const float *lb = lse + sq * tq, *db = d + sq * tq;
            const int32_t *pb = qpos ? qpos + b * tq : NULL;   /* (tq) positions of row b */
            const int kv_new = skv != kv_done;
            if (kv_new)
                slab_segs(keys, skv, hd, &sg);
            kv_done = skv;
            if (p) {   /* the rows the chunks read, as in the forward */
                prefetch_rows(q + oq, r0, r1, hd);
                prefetch_rows(dout + oq, r0, r1, hd);
                prefetch_rows(dq + oq, r0, r1, hd);
                for (int x = SEG_K; kv_new && x <= SEG_DV; x++)
                    segs_prefetch(&sg, x, klo, khi, hd);
                qs = rounded(q + oq, r0, r1, hd, h16);
                dos = rounded(dout + oq, r0, r1, hd, h16 ? h16 + tq * hd : NULL);
                if (kv_new) {
                    ks = segs_operand(&sg, SEG_K, klo, khi, hd,
                                      h16 ? h16 + 2 * tq * hd : NULL);
                    vs = segs_operand(&sg, SEG_V, klo, khi, hd,
                                      h16 ? h16 + (2 * tq + tk) * hd : NULL);
                    if (kt) {
                        segs_transpose(&sg, SEG_K, klo, khi, hd, kt, band_ld(tk));
                        segs_transpose(&sg, SEG_V, klo, khi, hd, vt, band_ld(tk));
                    }
                    if (b16)
                        band16_slab(b16, ks.h, vs.h, ks.h, klo, khi, tk, hd);
                }
            }
            for (int64_t i0 = r0; i0 < r1; i0 += ch) {
                int64_t i1 = i0 + ch < r1 ? i0 + ch : r1;
                if (p) {
                    bwd_chunk(dnnl, bf16, i0, i1, tk, hd, q_pos0, k_pos0, window, pb,
                              scale, cap, qs, ks, vs, dos, &sg, kt, vt, b16, lb, db, dq + oq,
                              p, p + ch * (tk + 1));
                    continue;
                }
                for (int64_t i = i0; i < i1; i++) {   /* one segment (above) */
                    int64_t a = row_lo(q_pos0 + i, k_pos0, tk, window, pb, i);
                    int64_t nv = isinf(lb[i]) ? 0 : nvis(q_pos0 + i, k_pos0, tk) - a;
                    bwd_row_noscratch(nv, hd, scale, cap, q + oq + i * hd, sg.k[0] + a * hd,
                                      sg.v[0] + a * hd, dout + oq + i * hd, lb[i], db[i],
                                      dq + oq + i * hd, sg.dk[0] + a * hd, sg.dv[0] + a * hd);
                }
            }
        }
    return 0;
}

void nnt_cpu_attn_bwd_packed_f32(nnt_dnnl_cache *dnnl, const nnt_attn_map *mp, int64_t tq,
                                 int64_t tk, int64_t hd, int64_t q_pos0, int64_t k_pos0,
                                 int64_t window, const int32_t *qpos, float scale, float cap,
                                 const float *q, const float *k, const float *v,
                                 const float *dout, const float *lse, const float *d,
                                 float *dq, float *dk, float *dv)
{
    const nnt_attn_keys one = {1, &tk, &k_pos0, &k, &v, &dk, &dv, NULL};
    (void)bwd_tiles(dnnl, mp, tq, hd, q_pos0, window, qpos, scale, cap, &one, q, dout, lse, d,
                    dq);
}

void nnt_cpu_attn_bwd_window_f32(nnt_dnnl_cache *dnnl, const nnt_attn_map *mp, int64_t tq,
                                 int64_t tk, int64_t hd, int64_t q_pos0, int64_t k_pos0,
                                 int64_t window, float scale, float cap, const float *q,
                                 const float *k, const float *v, const float *dout,
                                 const float *lse, const float *d, float *dq, float *dk,
                                 float *dv)
{
    nnt_cpu_attn_bwd_packed_f32(dnnl, mp, tq, tk, hd, q_pos0, k_pos0, window, NULL, scale, cap,
                                q, k, v, dout, lse, d, dq, dk, dv);
}

void nnt_cpu_attn_bwd_gqa_f32(nnt_dnnl_cache *dnnl, const nnt_attn_map *mp, int64_t tq,
                              int64_t tk, int64_t hd, int64_t q_pos0, int64_t k_pos0,
                              float scale, const float *q, const float *k, const float *v,
                              const float *dout, const float *lse, const float *d, float *dq,
                              float *dk, float *dv)
{
    nnt_cpu_attn_bwd_window_f32(dnnl, mp, tq, tk, hd, q_pos0, k_pos0, 0, scale, 0.0f, q, k, v,
                                dout, lse, d, dq, dk, dv);
}

void nnt_cpu_attn_bwd_block_f32(int64_t nbh, int64_t tq, int64_t tk, int64_t hd,
                                int64_t q_pos0, int64_t k_pos0, float scale, const float *q,
                                const float *k, const float *v, const float *dout,
                                const float *lse, const float *d, float *dq, float *dk,
                                float *dv)
{
    const nnt_attn_map mha = {nbh, 1, 1, 0, 1, 1, 0, 0};
    nnt_cpu_attn_bwd_gqa_f32(NULL, &mha, tq, tk, hd, q_pos0, k_pos0, scale, q, k, v, dout,
                             lse, d, dq, dk, dv);
}

/* ---- a query tile over its band of key tiles ------------------------------------------------ */

/* The q heads [h, *h1) of batch row b of a map that read one kv slab (q heads of one kv head
 * follow one another), as a map of their own over that batch row: q-side and kv-side
 * pointers then start at batch row b. */
static nnt_attn_map slab_run(const nnt_attn_map *mp, int64_t b, int64_t h, int64_t *h1)
{
    int64_t skv = map_kv_slab(mp, b, h), e = h + 1;
    while (e < mp->nh && map_kv_slab(mp, b, e) == skv)
        e++;
    *h1 = e;
    nnt_attn_map run = {1, e - h, mp->q_hs, mp->q_h0 + h, mp->kv_hs, mp->group, mp->gofs + h,
                        mp->bf16};
    return run;
}

/* Key tiles [j0, j0 + n) of a band (n <= ATTN_SEGS) from batch row b (kv_hs kv slabs a batch
 * row), as keys of their own in r */
typedef struct band_keys {
    int64_t tk[ATTN_SEGS], kp[ATTN_SEGS];
    const float *k[ATTN_SEGS], *v[ATTN_SEGS];
    float *dk[ATTN_SEGS], *dv[ATTN_SEGS];
    nnt_attn_keys keys;
} band_keys;

static const nnt_attn_keys *band_row(const nnt_attn_keys *keys, int j0, int n, int64_t b,
                                     int64_t kv_hs, int64_t hd, band_keys *r)
{
    for (int j = 0; j < n; j++) {
        const int64_t tk = keys->tk[j0 + j], at = b * kv_hs * tk * hd;
        r->tk[j] = tk, r->kp[j] = keys->k_pos0[j0 + j];
        r->k[j] = keys->k[j0 + j] + at, r->v[j] = keys->v[j0 + j] + at;
        r->dk[j] = keys->dk ? keys->dk[j0 + j] + at : NULL;
        r->dv[j] = keys->dv ? keys->dv[j0 + j] + at : NULL;
    }
    nnt_attn_keys x = {n, r->tk, r->kp, r->k, r->v, keys->dk ? r->dk : NULL,
                       keys->dv ? r->dv : NULL, NULL};
    r->keys = x;
    return &r->keys;
}

/* The band drivers take a run's key tiles in one call of the kernels (fwd_tiles, bwd_tiles: one
 * softmax a row over the whole band, each group of rows' keys in one product of scores) where
 * the band products are available, else one call a key tile. A query tile of (8, 256, 64) over
 * a band of 3 key tiles of 256, window 512 (one thread, hot, AMD Zen 5): forward 1.43 ms
 * against 1.53-1.59 a key tile at a time, backward 3.09-3.12 against 3.19-3.26; tiles of 512
 * (a band of 2): 2.83-2.86 against 3.00-3.07, 6.21-6.24 against 6.22-6.29. The forward's
 * band tasks of T 4096 in tiles of 256 in sequence, one thread, tiles from memory: 22.4-22.9 ms
 * against 23.7 (bench/RESULTS-window.md). */
int nnt_cpu_attn_fwd_band_f32(nnt_dnnl_cache *dnnl, const nnt_attn_map *mp, int64_t tq,
                              int64_t hd, int64_t q_pos0, int64_t window, const int32_t *qpos,
                              float scale, float cap, const nnt_attn_keys *keys, const float *q,
                              float *o, float *lse)
{
    if (mp->nb <= 0 || mp->nh <= 0 || mp->group <= 0 || tq <= 0 || hd <= 0)
        return 0;
    float *ml = attn_scratch(SCRATCH_BAND, (size_t)(2 * mp->q_hs * tq) * sizeof(float));
    if (!ml)
        return -1;
    float *m = ml, *l = ml + mp->q_hs * tq;   /* (q_hs, tq) each, as a batch row of lse */
    band_keys bk;
    for (int64_t b = 0; b < mp->nb; b++) {
        const int64_t qrow = b * mp->q_hs * tq;   /* batch row b of the q-side tiles */
        const int32_t *pb = qpos ? qpos + b * tq : NULL;
        for (int64_t h = 0, h1; h < mp->nh; h = h1) {
            nnt_attn_map run = slab_run(mp, b, h, &h1);
            for (int64_t s = run.q_h0; s < run.q_h0 + run.nh; s++) {   /* o 0, m -inf, l 0 */
                nnt_cpu_fill_f32(tq * hd, 0.0f, o + (qrow + s * tq) * hd);
                nnt_cpu_fill_f32(tq, -INFINITY, m + s * tq);
                nnt_cpu_fill_f32(tq, 0.0f, l + s * tq);
            }
            if (keys->n > ATTN_SEGS ||
                fwd_tiles(dnnl, &run, tq, hd, q_pos0, window, pb, scale, cap,
                          band_row(keys, 0, keys->n, b, mp->kv_hs, hd, &bk), q + qrow * hd,
                          o + qrow * hd, m, l) != 0)
                for (int j = 0; j < keys->n; j++)
                    fwd_tiles(dnnl, &run, tq, hd, q_pos0, window, pb, scale, cap,
                              band_row(keys, j, 1, b, mp->kv_hs, hd, &bk), q + qrow * hd,
                              o + qrow * hd, m, l);
            for (int64_t s = run.q_h0; s < run.q_h0 + run.nh; s++)
                nnt_cpu_attn_fwd_finalize_f32(1, tq, hd, o + (qrow + s * tq) * hd, m + s * tq,
                                              l + s * tq, lse + qrow + s * tq);
        }
    }
    return 0;
}

int nnt_cpu_attn_bwd_band_f32(nnt_dnnl_cache *dnnl, const nnt_attn_map *mp, int64_t tq,
                              int64_t hd, int64_t q_pos0, int64_t window, const int32_t *qpos,
                              float scale, float cap, const nnt_attn_keys *keys, const float *q,
                              const float *o, const float *dout, const float *lse, float *dq)
{
    if (mp->nb <= 0 || mp->nh <= 0 || mp->group <= 0 || tq <= 0 || hd <= 0)
        return 0;
    float *d = attn_scratch(SCRATCH_BAND, (size_t)(mp->q_hs * tq) * sizeof(float));
    if (!d)
        return -1;   /* (q_hs, tq): rowsum(dout o) of a batch row */
    band_keys bk;
    for (int64_t b = 0; b < mp->nb; b++) {
        const int64_t qrow = b * mp->q_hs * tq;
        const int32_t *pb = qpos ? qpos + b * tq : NULL;
        for (int64_t h = 0, h1; h < mp->nh; h = h1) {
            nnt_attn_map run = slab_run(mp, b, h, &h1);
            const int64_t skv = run.gofs / run.group;   /* the run's kv slab in its batch row */
            for (int64_t s = run.q_h0; s < run.q_h0 + run.nh; s++) {   /* d; dq 0 */
                int64_t at = (qrow + s * tq) * hd;
                nnt_cpu_attn_bwd_prep_f32(1, tq, hd, o + at, dout + at, d + s * tq);
                nnt_cpu_fill_f32(tq * hd, 0.0f, dq + at);
            }
            for (int j = 0; j < keys->n; j++) {   /* the first sums into this kv slab */
                const int64_t tk = keys->tk[j], at = (b * mp->kv_hs + skv) * tk * hd;
                if (keys->start[j]) {
                    nnt_cpu_fill_f32(tk * hd, 0.0f, keys->dk[j] + at);
                    nnt_cpu_fill_f32(tk * hd, 0.0f, keys->dv[j] + at);
                }
            }
            if (keys->n > ATTN_SEGS ||
                bwd_tiles(dnnl, &run, tq, hd, q_pos0, window, pb, scale, cap,
                          band_row(keys, 0, keys->n, b, mp->kv_hs, hd, &bk), q + qrow * hd,
                          dout + qrow * hd, lse + qrow, d, dq + qrow * hd) != 0)
                for (int j = 0; j < keys->n; j++)
                    bwd_tiles(dnnl, &run, tq, hd, q_pos0, window, pb, scale, cap,
                              band_row(keys, j, 1, b, mp->kv_hs, hd, &bk), q + qrow * hd,
                              dout + qrow * hd, lse + qrow, d, dq + qrow * hd);
        }
    }
    return 0;
}
