/* SPDX-License-Identifier: MIT */
/* Causal self-attention on tiled (B, NH, T, hd) tensors, flash style: no (T, T) matrix is
 * stored. The kernels need whole head vectors, so when hd is split over tiles the operands
 * are retiled into temporaries with a single hd tile and the results are copied back.
 * Grouped-query attention: k, v (dk, dv) may have NKV heads, NKV dividing NH; q head h
 * reads kv head h / G, G = NH / NKV (Hugging Face's repeat_kv), in place: a block task
 * covers the q heads of its q tile that one kv head tile serves (an nnt_attn_map), so a q
 * head tile that spans several kv head tiles gets one task per kv head tile.
 * Forward, per query tile i (b-tile, h-tile, t-tile): one block task per kv head range and
 * key tile j <= i (the first starts the running max m, sum l and accumulator o), then a
 * finalize task. Backward: a prep task per query tile (d = rowsum(dout * o)), then one
 * block task per (i, head range, j <= i) in a fixed order, accumulating into dq_i, dk_j
 * and dv_j (RW, in submission order: the G q heads of a kv head and the query tiles add in
 * a fixed order, so results are bit-identical run to run); the order goes by diagonal j - i
 * so that tasks of one diagonal do not wait for each other (submit_backward).
 * Sliding window W (the _ex functions): query position qp sees keys qp - W < kp <= qp; a
 * (query tile, key tile) pair whose keys all precede the window of the tile's first query
 * gets no task (that is what the window saves), and the kernels skip the rows and keys of
 * a pair that no window reaches. A soft-cap (the _ex functions' softcap, Gemma 2) caps
 * every score inside the kernels. Packed examples (the _ex functions' positions): the
 * kernels mask the keys before each query's example; with positions copied from the host
 * (their values known at submission), a pair whose keys all precede the example of every
 * query of its tile gets no task either (examples_begin). With a window on CPU workers, the
 * pairs of a query tile go in one band task instead (band_tasks, below). */
#include "../internal.h"
#include "nnt_cpu.h" /* nnt_attn_map */

#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

/* ---- argument checks ------------------------------------------------------------------------ */

enum { SIDE_Q, SIDE_KV, SIDE_LSE };

/* n tensors (the first nread are read, so must have been written); side[i] says what
 * all[i] is: q-side (q's layout (B, NH, T, hd); all[0] is q), kv-side (k's layout
 * (B, NKV, T, hd), NKV dividing NH, B and T as q's; the first kv-side tensor is k) or lse
 * (B, NH, T); the tensors from first_out on are outputs and must differ from every other
 * argument. */
static int check_args(const char *fn, int n, nnt_tensor *const *all, const char *const *roles,
                      const int *side, int nread, int first_out, double scale)
{
    int rc = 0;
    for (int i = 0; i < n && rc == 0; i++)
        rc = nnt_check_arg(fn, roles[i], all[i], NNT_FP32, 0);
    for (int i = 0; i < nread && rc == 0; i++)
        rc = nnt_tensor_check_readable(all[i], fn);
    if (rc)
        return rc;
    nnt_tensor *q = all[0], *k = NULL;
    const char *krole = NULL;
    for (int i = 0; i < n && !k; i++)
        if (side[i] == SIDE_KV)
            k = all[i], krole = roles[i];
    if (q->ndim != 4)
        return nnt_fail(q->ctx, NNT_E_SHAPE, "%s: q must have 4 dimensions (B, NH, T, hd), "
                        "not %d", fn, q->ndim);
    if (!isfinite(scale))
        return nnt_fail(q->ctx, NNT_E_INVAL, "%s: scale %g is not finite", fn, scale);
    for (int i = first_out; i < n; i++)
        for (int j = 0; j < i; j++)
            if (all[i] == all[j])
                return nnt_fail(q->ctx, NNT_E_INVAL, "%s: %s and %s are the same tensor", fn,
                                roles[j], roles[i]);
    /* k against q: B and T (shape and tiling) and hd (shape) equal, NKV dividing NH */
    if (k->ndim != 4)
        return nnt_fail(q->ctx, NNT_E_SHAPE, "%s: %s must have 4 dimensions (B, NKV, T, hd), "
                        "not %d", fn, krole, k->ndim);
    if ((rc = nnt_check_dims(fn, "q", q, 0, krole, k, 0, 1)) != 0 ||
        (rc = nnt_check_dims(fn, "q", q, 2, krole, k, 2, 1)) != 0)
        return rc;
    if (k->shape[3] != q->shape[3])
        return nnt_fail(q->ctx, NNT_E_SHAPE, "%s: %s has head dimension %lld, q %lld", fn,
                        krole, (long long)k->shape[3], (long long)q->shape[3]);
    if (k->shape[1] < 1 || q->shape[1] % k->shape[1] != 0)
        return nnt_fail(q->ctx, NNT_E_SHAPE, "%s: the %lld kv heads of %s do not divide the "
                        "%lld heads of q", fn, (long long)k->shape[1], krole,
                        (long long)q->shape[1]);
    for (int i = 1; i < n && rc == 0; i++) {
        if (side[i] == SIDE_Q)
            rc = nnt_check_same_layout(fn, "q", q, roles[i], all[i]);
        else if (side[i] == SIDE_KV)
            rc = nnt_check_same_layout(fn, krole, k, roles[i], all[i]);
        else if (all[i]->ndim != 3)
            rc = nnt_fail(q->ctx, NNT_E_SHAPE, "%s: %s must have 3 dimensions (B, NH, T), "
                          "not %d", fn, roles[i], all[i]->ndim);
        else
            rc = nnt_check_dims(fn, "q", q, 0, roles[i], all[i], 0, 3);
    }
    return rc;
}

/* Geometry of query / key tile (bi, hi, ti) of a tensor with one hd tile: tile index, slab
 * count nbh, rows, first sequence position. */
struct seq_tile {
    int64_t index, nbh, rows, pos0;
    int64_t nh;   /* heads (of its nbh = batch rows x heads slabs) */
};

static struct seq_tile seq_tile(const nnt_tensor *t, int64_t bi, int64_t hi, int64_t ti)
{
    int64_t shape[4];
    struct seq_tile s;
    s.index = (bi * t->grid[1] + hi) * t->grid[2] + ti;
    nnt_tensor_tile_shape_at(t, s.index, shape);
    s.nbh = shape[0] * shape[1];
    s.nh = shape[1];
    s.rows = shape[2];
    s.pos0 = ti * t->tile[2];
    return s;
}

/* ---- head ranges -------------------------------------------------------------------------- */

/* The kv head tiles that q head tile hi reads: [*first, *last]. */
static void kv_tiles_of(const nnt_tensor *q, const nnt_tensor *k, int64_t hi, int64_t *first,
                        int64_t *last)
{
    int64_t g = q->shape[1] / k->shape[1];
    int64_t h0 = hi * q->tile[1], h1 = h0 + q->tile[1];
    h1 = h1 < q->shape[1] ? h1 : q->shape[1];
    *first = h0 / g / k->tile[1];
    *last = (h1 - 1) / g / k->tile[1];
}

/* The slabs of query tile (bi, hi) that kv head tile hk serves, as a block task's map. */
static nnt_attn_map head_range(const nnt_tensor *q, const nnt_tensor *k, int64_t bi,
                               int64_t hi, int64_t hk)
{
    int64_t g = q->shape[1] / k->shape[1], shape[4];
    nnt_tensor_tile_shape_at(q, (bi * q->grid[1] + hi) * q->grid[2] * q->grid[3], shape);
    int64_t h0 = hi * q->tile[1], h1 = h0 + shape[1];          /* q heads of the tile      */
    int64_t k0 = hk * k->tile[1], k1 = k0 + k->tile[1];         /* kv heads of kv tile hk   */
    k1 = k1 < k->shape[1] ? k1 : k->shape[1];
    int64_t a = h0 > k0 * g ? h0 : k0 * g, b = h1 < k1 * g ? h1 : k1 * g;   /* served */
    nnt_attn_map m = {shape[0], b - a, shape[1], a - h0, k1 - k0, g, a - k0 * g, 0};
    return m;
}

/* ---- forward ------------------------------------------------------------------------------ */

/* Tasks of query tile (bi, hi, i); q, o with one hd tile (B, NH, T, hd), k, v with one
 * hd tile (B, NKV, T, hd), m, l, lse (B, NH, T). */
/* the key tile kt lies wholly before the window of every query of a tile whose first
 * query is at q_pos0 (window 0: never) */
static int before_window(const struct seq_tile *kt, int64_t q_pos0, int64_t window)
{
    return window > 0 && kt->pos0 + kt->rows - 1 <= q_pos0 - window;
}

/* Positions whose values are known on the host (copied from it: nnt_tensor.ids_host): the
 * earliest key the queries of tile (bi, *, ti) of q can see, the first token of the earliest
 * example among its rows (q's row t the query at past + t); -1 when unknown (no positions, or
 * values written by tasks or a fill). A key tile wholly before it is wholly across examples
 * for every query of the tile: the pair gets no task (the kernels would change nothing). */
static int64_t examples_begin(const nnt_tensor *pos, const nnt_tensor *q, int64_t bi,
                              int64_t ti, int64_t past)
{
    if (!pos || pos->ids_host_n != q->shape[0] * q->shape[2] || !pos->ids_host)
        return -1;
    int64_t B = q->shape[0], T = q->shape[2], lo = past + T;
    int64_t b0 = bi * q->tile[0], b1 = b0 + q->tile[0] < B ? b0 + q->tile[0] : B;
    int64_t t0 = ti * q->tile[2], t1 = t0 + q->tile[2] < T ? t0 + q->tile[2] : T;
    for (int64_t b = b0; b < b1; b++)
        for (int64_t t = t0; t < t1; t++) {
            int64_t p = pos->ids_host[b * T + t], qp = past + t;
            p = p < 0 ? 0 : (p > qp ? qp : p);
            lo = qp - p < lo ? qp - p : lo;
        }
    return lo;
}

/* the key tile kt ends before begin, the earliest key a query tile sees (-1: unknown) */
static int across_examples(const struct seq_tile *kt, int64_t begin)
{
    return begin >= 0 && kt->pos0 + kt->rows - 1 < begin;
}

/* The handle of the positions tile of query tile (bi, *, ti), or NULL without positions. */
static starpu_data_handle_t pos_tile(const nnt_tensor *pos, int64_t bi, int64_t ti)
{
    return pos ? pos->tiles[bi * pos->grid[1] + ti].handle : NULL;
}

/* ---- band tasks ----------------------------------------------------------------------------- */

/* On CPU workers a sliding window's pairs go by band tasks: one task a query tile over all the
 * key tiles it reaches (nnt_insert_attn_fwd_band), which keeps the query tile's q, o (dout,
 * dq) in cache from one key tile to the next, starts and finishes its outputs there (no fill,
 * finalize or prep tasks, no m, l, d temporaries) and submits a third of the tasks (T 4096, W
 * 512, tiles of 256: the window's attention 1.02-1.04x faster through the op,
 * bench/RESULTS-window.md). The backward's band task of query tile i adds into dk and dv of
 * its L key tiles (L the longest band), so the tasks go in runs of neighbouring query tiles
 * (backward_runs): within a run one after another, the runs in parallel, and every dk_j, dv_j
 * adds its query tiles in a fixed order. The forward's tasks, all independent, go from the
 * last query tile down: the short bands of the sequence's start come last and fill the
 * workers' tail (the window's forward 14.2-14.4 -> 13.4-13.6 ms on 2 workers, tiles of 256). */

/* the map covers every slab of its q-side tile and of its kv-side tile */
static int map_covers_tiles(const nnt_attn_map *m)
{
    return m->q_h0 == 0 && m->nh == m->q_hs && m->gofs / m->group == 0 &&
           (m->gofs + m->nh - 1) / m->group == m->kv_hs - 1;
}

/* The first key tile that query tile (bi, hi, i) pairs with: the tiles before it are wholly
 * before the window, or the examples, of each of its queries, and as both drop a prefix its
 * pairs are the key tiles [band_first, i]. */
static int64_t band_first(const nnt_tensor *q, const nnt_tensor *k, int64_t bi, int64_t hi,
                          int64_t hk, int64_t i, int64_t window, const nnt_tensor *pos)
{
    struct seq_tile qt = seq_tile(q, bi, hi, i);
    int64_t begin = examples_begin(pos, q, bi, i, 0), j = 0;
    for (; j < i; j++) {
        struct seq_tile kt = seq_tile(k, bi, hk, j);
        if (!before_window(&kt, qt.pos0, window) && !across_examples(&kt, begin))
            break;
    }
    return j;
}

/* The longest band of the query tiles of (bi, hi) against kv head tile hk, in key tiles */
static int64_t band_longest(const nnt_tensor *q, const nnt_tensor *k, int64_t bi, int64_t hi,
                            int64_t hk, int64_t window, const nnt_tensor *pos)
{
    int64_t longest = 0;
    for (int64_t i = 0; i < q->grid[2]; i++) {
        int64_t n = i - band_first(q, k, bi, hi, hk, i, window, pos) + 1;
        longest = n > longest ? n : longest;
    }
    return longest;
}

/* Whether a band task's backward keeps the kv rows its row chunks read within a core's L2
 * cache: k, k^T, v^T, dk and dv (floats) over a chunk's keys, the window's and those of one
 * chunk of query rows (cpu/attention.c: 64 rows against a band of several key tiles, and 15
 * keys of alignment), at most the band's `band_keys`. Heads of 64, W 512: 0.74 MiB, within
 * the 1 and 2 MiB of AMD Zen 4/5 and the Intel Xeon measured, where the band tasks ran the
 * window's attention 1.02-1.05x faster than the blocks (bench/RESULTS-window.md); gemma3-
 * 270m's heads of 256, W 512: 3 MiB, where the blocks' backward (1.3 MiB of such rows a
 * block of 256 keys) took 3-8 % less worker time in a training step and 8-10 % less time
 * through the op (Intel Xeon, 2 MiB L2). */
static int band_backward_fits(int64_t window, int64_t band_keys, int64_t hd)
{
    int64_t keys = window + 64 + 15;
    keys = keys < band_keys ? keys : band_keys;
    return 5 * keys * hd * (int64_t)sizeof(float) <= (int64_t)nnt_cpu_l2_bytes();
}

/* Whether the attention of q (one hd tile) against k goes by band tasks: a window, no CUDA
 * worker (the band codelets are the CPU's; CUDA's blocks are unchanged), NNT_ATTN_BAND_TASKS
 * not 0, every q head tile reading one kv head tile whole, bands of at most
 * NNT_ATTN_BAND_MAX key tiles, for the backward at least two runs of L query tiles (L the
 * longest band: backward_runs) a (batch, head) tile and as many runs, over the (batch, head)
 * tiles, as the context has CPU workers, and the rows of its chunks within L2
 * (band_backward_fits; NNT_ATTN_BAND_TASKS=2 asks neither, to measure those rules), and under
 * a RAM
 * budget a band task's tiles (5 q-side and 4 kv-side tiles a key tile at most) within a
 * quarter of it (a block task has 7 to 9). (The backward's blocks run a diagonal's tasks in
 * parallel, L times as many as the band tasks' runs, or classes before: in a list-scheduling
 * model of T 4096, tiles of 256, W 512 (L 3, classes of 5), the band tasks' span was 16, 8, 6
 * and 6 block-units on 2, 4, 8 and 16 workers, the blocks' 15, 7.5, 4 and 2; through the op
 * the band tasks ran the window 1.02-1.04x faster on 2 workers, above.) */
static int band_tasks(const nnt_tensor *q, const nnt_tensor *k, int64_t window,
                      const nnt_tensor *pos, int backward)
{
    const char *env = getenv("NNT_ATTN_BAND_TASKS");
    if (window <= 0 || q->ctx->ncuda > 0 || (env && strcmp(env, "0") == 0))
        return 0;
    int64_t longest = 0;
    for (int64_t bi = 0; bi < q->grid[0]; bi++)
        for (int64_t hi = 0; hi < q->grid[1]; hi++) {
            int64_t hk0, hk1;
            kv_tiles_of(q, k, hi, &hk0, &hk1);
            nnt_attn_map map = head_range(q, k, bi, hi, hk0);
            if (hk0 != hk1 || !map_covers_tiles(&map))
                return 0;
            int64_t n = band_longest(q, k, bi, hi, hk0, window, pos);
            longest = n > longest ? n : longest;
        }
    int64_t shape[4];   /* the largest q tile's (kv tiles are no larger) */
    nnt_tensor_tile_shape_at(q, 0, shape);
    int64_t tile_bytes = shape[0] * shape[1] * shape[2] * shape[3] * (int64_t)sizeof(float);
    nnt_ctx *ctx = q->ctx;
    if (ctx->ram_budget > 0 && (5 + 4 * longest) * tile_bytes > ctx->ram_budget / 4)
        return 0;
    if (longest > NNT_ATTN_BAND_MAX)
        return 0;
    if (!backward)
        return 1;
    if (q->grid[2] < 2 * longest)
        return 0;
    if (env && strcmp(env, "2") == 0)   /* benchmarks: the two rules below off */
        return 1;
    int64_t runs = q->grid[0] * q->grid[1] * (q->grid[2] / longest);   /* the most */
    int64_t kshape[4];   /* the largest key tile's */
    nnt_tensor_tile_shape_at(k, 0, kshape);
    return runs >= ctx->ncpus && band_backward_fits(window, longest * kshape[2], q->shape[3]);
}

/* The band task of query tile (bi, hi, i) against kv head tile hk (map: their slabs); the
 * tile index of each of its key tiles in kidx. */
static struct nnt_attn_band_task band_task(const nnt_attn_map *map, const nnt_tensor *q,
                                           const nnt_tensor *k, int64_t bi, int64_t hi,
                                           int64_t hk, int64_t i, float scale, int64_t window,
                                           float cap, nnt_tensor *pos, int64_t *kidx)
{
    struct nnt_attn_band_task t;
    struct seq_tile qt = seq_tile(q, bi, hi, i);
    memset(&t, 0, sizeof t);
    t.map = map;
    t.tq = qt.rows, t.hd = q->shape[3], t.q_pos0 = qt.pos0, t.window = window;
    t.scale = scale, t.cap = cap;
    t.pos = pos_tile(pos, bi, i);
    int64_t first = band_first(q, k, bi, hi, hk, i, window, pos);
    t.n = (int)(i - first + 1);
    for (int j = 0; j < t.n; j++) {
        struct seq_tile kt = seq_tile(k, bi, hk, first + j);
        t.tk[j] = kt.rows, t.k_pos0[j] = kt.pos0, kidx[j] = kt.index;
    }
    return t;
}

/* The forward band task of query tile (bi, hi, i) against kv head tile hk (map) */
static int forward_band(nnt_tensor *const *w, nnt_tensor *lse, const nnt_attn_map *map,
                        int64_t bi, int64_t hi, int64_t hk, int64_t i, float scale,
                        int64_t window, float cap, nnt_tensor *pos)
{
    nnt_tensor *q = w[0], *k = w[1], *v = w[2], *o = w[3];
    int64_t kidx[NNT_ATTN_BAND_MAX];
    struct nnt_attn_band_task t = band_task(map, q, k, bi, hi, hk, i, scale, window, cap, pos,
                                            kidx);
    starpu_data_handle_t kv[2 * NNT_ATTN_BAND_MAX];
    for (int j = 0; j < t.n; j++)
        kv[2 * j] = k->tiles[kidx[j]].handle, kv[2 * j + 1] = v->tiles[kidx[j]].handle;
    int64_t qi = seq_tile(q, bi, hi, i).index;
    return nnt_insert_attn_fwd_band(q->ctx, &t, q->tiles[qi].handle, o->tiles[qi].handle,
                                    lse->tiles[qi].handle, kv);
}

/* w: q, k, v, o as submit_forward's. Per (batch tile, q head tile), the query tiles from the
 * last down (the long bands first). */
static int forward_bands(nnt_tensor *const *w, nnt_tensor *lse, float scale, int64_t window,
                         float cap, nnt_tensor *pos)
{
    nnt_tensor *q = w[0], *k = w[1];
    int rc = 0;
    for (int64_t bi = 0; bi < q->grid[0] && rc == 0; bi++)
        for (int64_t hi = 0; hi < q->grid[1] && rc == 0; hi++) {
            int64_t hk, hk1;
            kv_tiles_of(q, k, hi, &hk, &hk1);
            nnt_attn_map map = head_range(q, k, bi, hi, hk);
            for (int64_t i = q->grid[2] - 1; i >= 0 && rc == 0; i--)
                rc = forward_band(w, lse, &map, bi, hi, hk, i, scale, window, cap, pos);
        }
    return rc;
}

/* The backward band task of query tile (bi, hi, i) against kv head tile hk (map); touched[t]:
 * dk, dv tile t has had its first task */
static int backward_band(nnt_tensor *const *w, char *touched, const nnt_attn_map *map,
                         int64_t bi, int64_t hi, int64_t hk, int64_t i, float scale,
                         int64_t window, float cap, nnt_tensor *pos)
{
    nnt_tensor *q = w[0], *k = w[1], *v = w[2], *dk = w[7], *dv = w[8];
    int64_t kidx[NNT_ATTN_BAND_MAX], qi = seq_tile(q, bi, hi, i).index;
    struct nnt_attn_band_task t = band_task(map, q, k, bi, hi, hk, i, scale, window, cap, pos,
                                            kidx);
    starpu_data_handle_t h[5], kv[4 * NNT_ATTN_BAND_MAX];
    const int roles[5] = {0, 3, 5, 4, 6};   /* q, o, dout, lse, dq */
    for (int x = 0; x < 5; x++)
        h[x] = w[roles[x]]->tiles[qi].handle;
    for (int j = 0; j < t.n; j++) {
        int64_t kj = kidx[j];
        kv[4 * j] = k->tiles[kj].handle, kv[4 * j + 1] = v->tiles[kj].handle;
        kv[4 * j + 2] = dk->tiles[kj].handle, kv[4 * j + 3] = dv->tiles[kj].handle;
        t.start[j] = !touched[kj];
        touched[kj] = 1;
    }
    return nnt_insert_attn_bwd_band(q->ctx, &t, h, kv);
}

/* The query-key pairs of query tile (bi, hi, i) under window (0: causal), examples aside: a
 * band task's work */
static int64_t tile_pairs(const nnt_tensor *q, int64_t bi, int64_t hi, int64_t i,
                          int64_t window)
{
    struct seq_tile qt = seq_tile(q, bi, hi, i);
    int64_t pairs = 0;
    for (int64_t r = 0; r < qt.rows; r++) {
        int64_t keys = qt.pos0 + r + 1;
        pairs += window > 0 && keys > window ? window : keys;
    }
    return pairs;
}

/* The backward's band tasks of one (batch, head) tile in `parts` runs of neighbouring query
 * tiles of about equal work (pairs), each run's tasks one after another (a task shares all but
 * one of its key tiles with the next: they are still in the caches), the runs side by side:
 * the runs' tasks go in turn, the first of each run, then the second, ..., so that a task
 * waits only for the tasks before it in its run and, at a run's end, for the first tasks of
 * the next run (parts is at most nt / L, so that runs hold about L tasks or more; splitting by
 * pairs gives the last runs, of whole bands, fewer tasks than the first, whose bands are
 * short: their first tasks may then also wait on a neighbour's). One thread, the backward's
 * band tasks of T 4096 in tiles of 256, W 512, 8 heads of 64, tiles from memory (AMD Zen 5):
 * 48.2-48.4 ms in sequence order against 50.5-51.9 taken by classes (query tiles L apart, all
 * independent within a class), the order before 2026-11-30 (bench/RESULTS-window.md). */
#define NNT_ATTN_RUNS_MAX 64
static int backward_runs(nnt_tensor *const *w, char *touched, const nnt_attn_map *map,
                         int64_t bi, int64_t hi, int64_t hk, int64_t parts, float scale,
                         int64_t window, float cap, nnt_tensor *pos)
{
    nnt_tensor *q = w[0];
    const int64_t nt = q->grid[2];
    int64_t total = 0, start[NNT_ATTN_RUNS_MAX + 1], done = 0;
    for (int64_t i = 0; i < nt; i++)
        total += tile_pairs(q, bi, hi, i, window);
    start[0] = 0;   /* run p - 1: [start[p - 1], start[p]), to the tile whose middle passes
                     * p / parts of the work (the largest run the least) */
    for (int64_t p = 1, i = 0, sum = 0; p <= parts; p++) {
        for (int64_t c; i < nt; i++, sum += c) {
            c = tile_pairs(q, bi, hi, i, window);
            if (p < parts && 2 * sum + c > 2 * (total * p / parts))
                break;
        }
        start[p] = i;
    }
    int rc = 0;
    for (int64_t r = 0; done < nt && rc == 0; r++)
        for (int64_t p = 0; p < parts && rc == 0; p++)
            if (start[p] + r < start[p + 1]) {
                rc = backward_band(w, touched, map, bi, hi, hk, start[p] + r, scale, window, cap,
                                   pos);
                done++;
            }
    return rc;
}

/* w: q, k, v, o, lse, dout, dq, dk, dv as submit_backward's. Per (batch tile, q head tile), in
 * runs (backward_runs): as many in all as the context has CPU workers, where each tile's
 * sequence holds enough (at least L query tiles a run). */
static int backward_bands(nnt_tensor *const *w, float scale, int64_t window, float cap,
                          nnt_tensor *pos)
{
    nnt_tensor *q = w[0], *k = w[1], *dk = w[7];
    char *touched = calloc((size_t)dk->ntiles, 1);
    int rc = touched ? 0 : nnt_fail(q->ctx, NNT_E_NOMEM, "nnt_tensor_attention_backward: out "
                                    "of memory");
    const int64_t tiles = q->grid[0] * q->grid[1];
    for (int64_t bi = 0; bi < q->grid[0] && rc == 0; bi++)
        for (int64_t hi = 0; hi < q->grid[1] && rc == 0; hi++) {
            int64_t hk, hk1;
            kv_tiles_of(q, k, hi, &hk, &hk1);
            nnt_attn_map map = head_range(q, k, bi, hi, hk);
            int64_t L = band_longest(q, k, bi, hi, hk, window, pos);
            int64_t parts = (q->ctx->ncpus + tiles - 1) / tiles, most = q->grid[2] / L;
            parts = parts < most ? parts : most;
            parts = parts < NNT_ATTN_RUNS_MAX ? parts : NNT_ATTN_RUNS_MAX;
            rc = backward_runs(w, touched, &map, bi, hi, hk, parts > 1 ? parts : 1, scale,
                               window, cap, pos);
        }
    free(touched);
    return rc;
}

/* ---- blocks ------------------------------------------------------------------------------- */

static int forward_query_tile(nnt_tensor *const *w, nnt_tensor *m, nnt_tensor *l,
                              nnt_tensor *lse, float scale, int64_t window, float cap,
                              nnt_tensor *pos, int64_t bi, int64_t hi, int64_t i)
{
    nnt_tensor *q = w[0], *k = w[1], *v = w[2], *o = w[3];
    int64_t hd = q->shape[3], hk0, hk1;
    struct seq_tile qt = seq_tile(q, bi, hi, i);
    /* the lse, m, l tile has the same index: same leading grid, hd grid 1 */
    int rc = 0, first = 1;
    int64_t begin = examples_begin(pos, q, bi, i, 0);
    kv_tiles_of(q, k, hi, &hk0, &hk1);
    for (int64_t hk = hk0; hk <= hk1 && rc == 0; hk++) {
        nnt_attn_map map = head_range(q, k, bi, hi, hk);
        for (int64_t j = 0; j <= i && rc == 0; j++) {
            struct seq_tile kt = seq_tile(k, bi, hk, j);
            if (kt.pos0 > qt.pos0 + qt.rows - 1)
                break;   /* every key after every query: fully masked */
            if (before_window(&kt, qt.pos0, window) || across_examples(&kt, begin))
                continue;   /* every key before every query's window, or example */
            starpu_data_handle_t h[6] = {q->tiles[qt.index].handle, k->tiles[kt.index].handle,
                                         v->tiles[kt.index].handle, o->tiles[qt.index].handle,
                                         m->tiles[qt.index].handle, l->tiles[qt.index].handle};
            rc = nnt_insert_attn_fwd_block(q->ctx, &map, qt.rows, kt.rows, hd, qt.pos0,
                                           kt.pos0, window, scale, cap, h, first,
                                           pos_tile(pos, bi, i));
            first = 0;
        }
    }
    if (rc == 0)
        rc = nnt_insert_attn_fwd_finalize(q->ctx, qt.nbh, qt.rows, hd,
                                          o->tiles[qt.index].handle, m->tiles[qt.index].handle,
                                          l->tiles[qt.index].handle, lse->tiles[qt.index].handle);
    return rc;
}

static int submit_forward(nnt_tensor *const *w, nnt_tensor *lse, float scale, int64_t window,
                          float cap, nnt_tensor *pos)
{
    nnt_tensor *q = w[0], *m = NULL, *l = NULL;
    if (band_tasks(q, w[1], window, pos, 0))
        return forward_bands(w, lse, scale, window, cap, pos);
    int rc = nnt_temp_create(q->ctx, NNT_FP32, 3, lse->shape, lse->tile, &m);
    if (rc == 0)
        rc = nnt_temp_create(q->ctx, NNT_FP32, 3, lse->shape, lse->tile, &l);
    for (int64_t bi = 0; bi < q->grid[0] && rc == 0; bi++)
        for (int64_t hi = 0; hi < q->grid[1] && rc == 0; hi++)
            for (int64_t i = 0; i < q->grid[2] && rc == 0; i++)
                rc = forward_query_tile(w, m, l, lse, scale, window, cap, pos, bi, hi, i);
    nnt_temp_release(m);
    nnt_temp_release(l);
    return rc;
}

/* positions (B, T) NNT_INT32 of q (B, NH, T, hd): readable, q's B and T shape and tiling */
static int check_positions(const char *fn, const nnt_tensor *q, nnt_tensor *pos)
{
    NNT_TRY(nnt_check_arg(fn, "positions", pos, NNT_INT32, 1));
    if (pos->ndim != 2 || q->ndim != 4)
        return nnt_fail(q->ctx, NNT_E_SHAPE, "%s: positions must have 2 dimensions (B, T), not "
                        "%d", fn, pos->ndim);
    NNT_TRY(nnt_check_dims(fn, "q", q, 0, "positions", pos, 0, 1));
    NNT_TRY(nnt_check_dims(fn, "q", q, 2, "positions", pos, 1, 1));
    return NNT_OK;
}

/* sinks (or dsinks) (NH) fp32 of q (B, NH, T, hd): tiled as q's heads */
static int check_sinks(const char *fn, const char *role, const nnt_tensor *q, nnt_tensor *s)
{
    NNT_TRY(nnt_check_arg(fn, role, s, NNT_FP32, 0));
    if (q->ndim != 4 || s->ndim != 1 || s->shape[0] != q->shape[1] || s->tile[0] != q->tile[1])
        return nnt_fail(q->ctx, NNT_E_SHAPE, "%s: %s must be (NH = %lld) tiled as q's heads "
                        "(%lld)", fn, role, (long long)(q->ndim == 4 ? q->shape[1] : 0),
                        (long long)(q->ndim == 4 ? q->tile[1] : 0));
    return NNT_OK;
}

/* What an _ex call's opts ask for: the scale (0: 1 / sqrt(hd)), window, soft-cap, positions,
 * sinks and their gradient (NULL: none). */
struct op_opts {
    double scale;
    int64_t window;
    float cap;
    nnt_tensor *pos, *sinks, *dsinks;
};

/* The options of an _ex call's opts for q's head dimension (opts NULL: the plain call's scale
 * as given, nothing else). */
static int read_options(const char *fn, nnt_tensor *q, const nnt_tensor_attention_options *opts,
                        double scale, struct op_opts *out)
{
    memset(out, 0, sizeof *out);
    out->scale = scale;
    if (!opts)
        return NNT_OK;
    NNT_TRY(nnt_check_arg(fn, "q", q, NNT_FP32, 0));
    nnt_ctx *ctx = q->ctx;
    int64_t hd = q->ndim == 4 ? q->shape[3] : 1;
    nnt_tensor_attention_options o;
    const size_t before_pos = offsetof(nnt_tensor_attention_options, positions);
    NNT_TRY(nnt_check_struct_size(ctx, fn, "opts->size", opts->size,
                                  sizeof(nnt_tensor_attention_options), before_pos,
                                  "initialise it with NNT_TENSOR_ATTENTION_OPTIONS_INIT"));
    memset(&o, 0, sizeof o);
    memcpy(&o, opts, opts->size);   /* a size without positions or sinks: none */
    if (o.positions)
        NNT_TRY(check_positions(fn, q, o.positions));
    if (o.sinks)
        NNT_TRY(check_sinks(fn, "sinks", q, o.sinks));
    if (o.dsinks && !o.sinks)
        return nnt_fail(ctx, NNT_E_INVAL, "%s: dsinks without sinks", fn);
    if (o.dsinks)
        NNT_TRY(check_sinks(fn, "dsinks", q, o.dsinks));
    if (o.window < 0)
        return nnt_fail(ctx, NNT_E_INVAL, "%s: window %lld is negative (0: none)", fn,
                        (long long)o.window);
    if (!(o.softcap >= 0.0) || !isfinite(o.softcap))
        return nnt_fail(ctx, NNT_E_INVAL, "%s: softcap %g must be finite and >= 0 (0: none)",
                        fn, o.softcap);
    out->scale = o.scale != 0.0 ? o.scale : 1.0 / sqrt((double)(hd > 0 ? hd : 1));
    out->window = o.window;
    out->cap = (float)o.softcap;
    out->pos = o.positions;
    out->sinks = o.sinks;
    out->dsinks = o.dsinks;
    return NNT_OK;
}

/* The sinks on every query tile of o (one hd tile) and lse, after the softmax's own; or with
 * dsinks, their gradient from o, dout, lse (the forward's) added to dsinks (the tiles of a
 * head tile in order). */
static int submit_sinks(nnt_tensor *o, nnt_tensor *lse, nnt_tensor *sinks, nnt_tensor *dout,
                        nnt_tensor *dsinks)
{
    int rc = 0;
    for (int64_t bi = 0; bi < o->grid[0] && rc == 0; bi++)
        for (int64_t hi = 0; hi < o->grid[1] && rc == 0; hi++)
            for (int64_t i = 0; i < o->grid[2] && rc == 0; i++) {
                struct seq_tile qt = seq_tile(o, bi, hi, i);
                int64_t nh = qt.nh, nb = qt.nbh / nh, hd = o->shape[3];
                starpu_data_handle_t ot = o->tiles[qt.index].handle,
                                     lt = lse->tiles[qt.index].handle,
                                     st = sinks->tiles[hi].handle;
                rc = dsinks ? nnt_insert_attn_sink_bwd(o->ctx, nb, nh, qt.rows, hd, ot,
                                                       dout->tiles[qt.index].handle, lt, st,
                                                       dsinks->tiles[hi].handle)
                            : nnt_insert_attn_sink_fwd(o->ctx, nb, nh, qt.rows, hd, ot, lt, st);
            }
    if (rc == 0 && dsinks)
        nnt_tensor_mark_written(dsinks);
    return rc;
}

static int attention_forward(const char *fn, nnt_tensor *q, nnt_tensor *k, nnt_tensor *v,
                             const nnt_tensor_attention_options *opts, double scale,
                             nnt_tensor *o, nnt_tensor *lse)
{
    static const char *const roles[5] = {"q", "k", "v", "o", "lse"};
    static const int side[5] = {SIDE_Q, SIDE_KV, SIDE_KV, SIDE_Q, SIDE_LSE};
    nnt_tensor *all[5] = {q, k, v, o, lse};
    struct op_opts oo;
    int rc = read_options(fn, q, opts, scale, &oo);
    if (rc == 0)
        rc = check_args(fn, 5, all, roles, side, 3, 3, oo.scale);
    if (rc == 0 && oo.sinks)
        rc = nnt_tensor_check_readable(oo.sinks, fn);
    if (rc)
        return rc;
    nnt_tensor *w[4] = {NULL, NULL, NULL, NULL};   /* q, k, v, o with one hd tile */
    if ((rc = nnt_whole_last_in(q, &w[0])) == 0 && (rc = nnt_whole_last_in(k, &w[1])) == 0 &&
        (rc = nnt_whole_last_in(v, &w[2])) == 0 && (rc = nnt_whole_last_out(o, &w[3])) == 0)
        rc = submit_forward(w, lse, (float)oo.scale, oo.window, oo.cap, oo.pos);
    if (rc == 0 && oo.sinks)
        rc = submit_sinks(w[3], lse, oo.sinks, NULL, NULL);
    if (rc == 0)
        nnt_tensor_mark_written(lse);
    rc = nnt_whole_last_finish(w[3], o, rc);
    for (int i = 0; i < 3; i++)
        nnt_whole_last_drop(w[i], all[i]);
    return rc;
}

int nnt_tensor_attention(nnt_tensor *q, nnt_tensor *k, nnt_tensor *v, double scale,
                         nnt_tensor *o, nnt_tensor *lse)
{
    return attention_forward("nnt_tensor_attention", q, k, v, NULL, scale, o, lse);
}

NNT_API int nnt_tensor_attention_ex(nnt_tensor *q, nnt_tensor *k, nnt_tensor *v,
                                    const nnt_tensor_attention_options *opts, nnt_tensor *o,
                                    nnt_tensor *lse)
{
    static const nnt_tensor_attention_options defaults = NNT_TENSOR_ATTENTION_OPTIONS_INIT;
    return attention_forward("nnt_tensor_attention_ex", q, k, v, opts ? opts : &defaults, 0.0,
                             o, lse);
}

/* ---- backward ----------------------------------------------------------------------------- */

/* w: q, k, v, o, lse, dout, dq, dk, dv (one hd tile each; lse (B, NH, T)); d like lse.
 * The block tasks of a (batch tile, q head tile) go by diagonal d = j - i of (query tile i,
 * key tile j), the farthest first, then by i and kv head tile: dq_i adds its key tiles in
 * increasing j, dk_j and dv_j their query tiles in decreasing i, each in a fixed order (the
 * results are bit-identical run to run). A task then waits only for tasks of earlier
 * diagonals: a chain of dependencies holds at most one task per diagonal (a window that
 * reaches b key tiles: b), where increasing i for dk_j too made every task (i, j) wait for
 * (i - 1, j) and (i, j - 1), a chain through the whole band (two tasks per query tile). */
static int submit_backward(nnt_tensor *const *w, nnt_tensor *d, float scale, int64_t window,
                           float cap, nnt_tensor *pos)
{
    nnt_tensor *q = w[0], *k = w[1], *v = w[2], *o = w[3], *lse = w[4], *dout = w[5],
               *dq = w[6], *dk = w[7], *dv = w[8];
    int64_t hd = q->shape[3], nt = q->grid[2];
    /* touched_*[t]: dq, dk, dv tile t has had its first (initialising) task */
    char *touched_kv = calloc((size_t)dk->ntiles, 1), *touched_q = calloc((size_t)dq->ntiles, 1);
    int rc = touched_kv && touched_q ? 0 : nnt_fail(q->ctx, NNT_E_NOMEM,
                                                    "nnt_tensor_attention_backward: out of "
                                                    "memory");
    for (int64_t bi = 0; bi < q->grid[0] && rc == 0; bi++)
        for (int64_t hi = 0; hi < q->grid[1] && rc == 0; hi++)
            for (int64_t i = 0; i < nt && rc == 0; i++) {
                struct seq_tile qt = seq_tile(q, bi, hi, i);
                rc = nnt_insert_attn_bwd_prep(q->ctx, qt.nbh, qt.rows, hd,
                                              o->tiles[qt.index].handle,
                                              dout->tiles[qt.index].handle,
                                              d->tiles[qt.index].handle);
            }
    for (int64_t bi = 0; bi < q->grid[0] && rc == 0; bi++)
        for (int64_t hi = 0; hi < q->grid[1] && rc == 0; hi++) {
            int64_t hk0, hk1;
            kv_tiles_of(q, k, hi, &hk0, &hk1);
            for (int64_t dj = -(nt - 1); dj <= 0 && rc == 0; dj++)
                for (int64_t i = -dj; i < nt && rc == 0; i++) {
                    struct seq_tile qt = seq_tile(q, bi, hi, i);
                    int64_t qi = qt.index, j = i + dj;
                    int64_t begin = examples_begin(pos, q, bi, i, 0);
                    for (int64_t hk = hk0; hk <= hk1 && rc == 0; hk++) {
                        nnt_attn_map map = head_range(q, k, bi, hi, hk);
                        struct seq_tile kt = seq_tile(k, bi, hk, j);
                        int64_t kj = kt.index;
                        if (before_window(&kt, qt.pos0, window) ||
                            across_examples(&kt, begin))
                            continue;   /* no query of the tile sees these keys */
                        starpu_data_handle_t h[9] = {
                            q->tiles[qi].handle, k->tiles[kj].handle, v->tiles[kj].handle,
                            dout->tiles[qi].handle, lse->tiles[qi].handle, d->tiles[qi].handle,
                            dq->tiles[qi].handle, dk->tiles[kj].handle, dv->tiles[kj].handle};
                        rc = nnt_insert_attn_bwd_block(q->ctx, &map, qt.rows, kt.rows, hd,
                                                       qt.pos0, kt.pos0, window, scale, cap, h,
                                                       !touched_q[qi], !touched_kv[kj],
                                                       pos_tile(pos, bi, i));
                        touched_q[qi] = 1;
                        touched_kv[kj] = 1;
                    }
                }
        }
    free(touched_kv);
    free(touched_q);
    return rc;
}

static int attention_backward(const char *fn, nnt_tensor *q, nnt_tensor *k, nnt_tensor *v,
                              nnt_tensor *o, nnt_tensor *lse, nnt_tensor *dout,
                              const nnt_tensor_attention_options *opts, double scale,
                              nnt_tensor *dq, nnt_tensor *dk, nnt_tensor *dv)
{
    static const char *const roles[9] = {"q", "k", "v", "o", "lse", "dout", "dq", "dk", "dv"};
    static const int side[9] = {SIDE_Q, SIDE_KV, SIDE_KV, SIDE_Q, SIDE_LSE,
                                SIDE_Q, SIDE_Q, SIDE_KV, SIDE_KV};
    nnt_tensor *all[9] = {q, k, v, o, lse, dout, dq, dk, dv};
    struct op_opts oo;
    int rc = read_options(fn, q, opts, scale, &oo);
    if (rc == 0)
        rc = check_args(fn, 9, all, roles, side, 6, 6, oo.scale);
    if (rc == 0 && oo.dsinks)
        rc = nnt_tensor_check_readable(oo.dsinks, fn);
    if (rc)
        return rc;
    float sc = (float)oo.scale;
    nnt_tensor *w[9] = {NULL, NULL, NULL, NULL, lse, NULL, NULL, NULL, NULL}, *d = NULL;
    for (int i = 0; i < 9 && rc == 0; i++)
        if (i != 4)
            rc = i < 6 ? nnt_whole_last_in(all[i], &w[i]) : nnt_whole_last_out(all[i], &w[i]);
    /* with sinks, o and lse are the forward's (the sinks in the softmax): the probabilities
     * exp(s - lse) and d = dout . o are those of the softmax with the sinks, so the blocks
     * need nothing else; the sinks' own gradient is one more pass */
    if (rc == 0 && band_tasks(w[0], w[1], oo.window, oo.pos, 1)) {
        rc = backward_bands(w, sc, oo.window, oo.cap, oo.pos);
    } else if (rc == 0) {
        rc = nnt_temp_create(q->ctx, NNT_FP32, 3, lse->shape, lse->tile, &d);
        if (rc == 0)
            rc = submit_backward(w, d, sc, oo.window, oo.cap, oo.pos);
    }
    if (rc == 0 && oo.dsinks)
        rc = submit_sinks(w[3], lse, oo.sinks, w[5], oo.dsinks);
    nnt_temp_release(d);
    for (int i = 6; i < 9; i++)
        rc = nnt_whole_last_finish(w[i], all[i], rc);
    for (int i = 0; i < 6; i++)
        if (i != 4)
            nnt_whole_last_drop(w[i], all[i]);
    return rc;
}

int nnt_tensor_attention_backward(nnt_tensor *q, nnt_tensor *k, nnt_tensor *v, nnt_tensor *o,
                                  nnt_tensor *lse, nnt_tensor *dout, double scale,
                                  nnt_tensor *dq, nnt_tensor *dk, nnt_tensor *dv)
{
    return attention_backward("nnt_tensor_attention_backward", q, k, v, o, lse, dout, NULL,
                              scale, dq, dk, dv);
}

NNT_API int nnt_tensor_attention_backward_ex(nnt_tensor *q, nnt_tensor *k, nnt_tensor *v,
                                             nnt_tensor *o, nnt_tensor *lse, nnt_tensor *dout,
                                             const nnt_tensor_attention_options *opts,
                                             nnt_tensor *dq, nnt_tensor *dk, nnt_tensor *dv)
{
    static const nnt_tensor_attention_options defaults = NNT_TENSOR_ATTENTION_OPTIONS_INIT;
    return attention_backward("nnt_tensor_attention_backward_ex", q, k, v, o, lse, dout,
                              opts ? opts : &defaults, 0.0, dq, dk, dv);
}

/* ---- queries after cached keys -------------------------------------------------------------- */

/* q, o (B, NH, Tq, hd) of one layout; k, v (B, NKV, Tk, hd) of one layout, B and its tiling
 * as q's, NKV dividing NH, hd as q's; 0 <= k_pos0 <= past, past - k_pos0 + Tq <= Tk. */
static int check_kv_args(const char *fn, nnt_tensor *const *all, int64_t past, int64_t k_pos0,
                         double scale)
{
    static const char *const roles[4] = {"q", "k", "v", "o"};
    int rc = 0;
    for (int i = 0; i < 4 && rc == 0; i++)
        rc = nnt_check_arg(fn, roles[i], all[i], NNT_FP32, 0);
    for (int i = 0; i < 3 && rc == 0; i++)
        rc = nnt_tensor_check_readable(all[i], fn);
    if (rc)
        return rc;
    nnt_tensor *q = all[0], *k = all[1];
    for (int i = 0; i < 4; i++)
        if (all[i]->ndim != 4)
            return nnt_fail(q->ctx, NNT_E_SHAPE, "%s: %s must have 4 dimensions (B, heads, T, "
                            "hd), not %d", fn, roles[i], all[i]->ndim);
    for (int i = 0; i < 3; i++)
        if (all[3] == all[i])
            return nnt_fail(q->ctx, NNT_E_INVAL, "%s: %s and o are the same tensor", fn,
                            roles[i]);
    if (!isfinite(scale))
        return nnt_fail(q->ctx, NNT_E_INVAL, "%s: scale %g is not finite", fn, scale);
    if ((rc = nnt_check_dims(fn, "q", q, 0, "k", k, 0, 1)) != 0 ||
        (rc = nnt_check_same_layout(fn, "k", k, "v", all[2])) != 0 ||
        (rc = nnt_check_same_layout(fn, "q", q, "o", all[3])) != 0)
        return rc;
    if (k->shape[3] != q->shape[3])
        return nnt_fail(q->ctx, NNT_E_SHAPE, "%s: k has head dimension %lld, q %lld", fn,
                        (long long)k->shape[3], (long long)q->shape[3]);
    if (q->shape[1] % k->shape[1] != 0)
        return nnt_fail(q->ctx, NNT_E_SHAPE, "%s: the %lld kv heads of k do not divide the "
                        "%lld heads of q", fn, (long long)k->shape[1], (long long)q->shape[1]);
    if (k_pos0 < 0 || past < k_pos0 || past - k_pos0 > k->shape[2] - q->shape[2])
        return nnt_fail(q->ctx, NNT_E_INVAL, "%s: past %lld and the %lld queries of q do not "
                        "fit in the %lld keys of k from position %lld (0 <= past - k_pos0 <= "
                        "Tk - Tq)", fn, (long long)past, (long long)q->shape[2],
                        (long long)k->shape[2], (long long)k_pos0);
    return NNT_OK;
}

/* Tasks of query tile (bi, hi, i), its rows at positions past + i * tile: one block task per
 * kv head range and key tile holding a key at or before its last query (key row r at
 * position k_pos0 + r) and not wholly before every query's window or example (pos: the
 * queries' positions in their examples, or NULL), then a finalize. */
static int kv_query_tile(nnt_tensor *const *w, nnt_tensor *const *mll, int64_t past,
                         int64_t k_pos0, float scale, int64_t window, float cap,
                         nnt_tensor *pos, int64_t bi, int64_t hi, int64_t i)
{
    nnt_tensor *q = w[0], *k = w[1], *v = w[2], *o = w[3], *m = mll[0], *l = mll[1];
    int64_t hd = q->shape[3], hk0, hk1;
    struct seq_tile qt = seq_tile(q, bi, hi, i);
    int64_t q_pos0 = past + qt.pos0, q_last = q_pos0 + qt.rows - 1;
    int64_t begin = examples_begin(pos, q, bi, i, past);
    int rc = 0, first = 1;
    kv_tiles_of(q, k, hi, &hk0, &hk1);
    for (int64_t hk = hk0; hk <= hk1 && rc == 0; hk++) {
        nnt_attn_map map = head_range(q, k, bi, hi, hk);
        for (int64_t j = 0; j < k->grid[2] && k_pos0 + j * k->tile[2] <= q_last && rc == 0;
             j++) {
            struct seq_tile kt = seq_tile(k, bi, hk, j);
            kt.pos0 += k_pos0;
            if (before_window(&kt, q_pos0, window) || across_examples(&kt, begin))
                continue;   /* keys older than every query's window or example: not read */
            starpu_data_handle_t h[6] = {q->tiles[qt.index].handle, k->tiles[kt.index].handle,
                                         v->tiles[kt.index].handle, o->tiles[qt.index].handle,
                                         m->tiles[qt.index].handle, l->tiles[qt.index].handle};
            rc = nnt_insert_attn_fwd_block(q->ctx, &map, qt.rows, kt.rows, hd, q_pos0,
                                           kt.pos0, window, scale, cap, h, first,
                                           pos_tile(pos, bi, i));
            first = 0;
        }
    }
    if (rc == 0)
        rc = nnt_insert_attn_fwd_finalize(q->ctx, qt.nbh, qt.rows, hd,
                                          o->tiles[qt.index].handle, m->tiles[qt.index].handle,
                                          l->tiles[qt.index].handle,
                                          mll[2]->tiles[qt.index].handle);
    return rc;
}

/* w: q, k, v, o with one hd tile; m, l and lse are temporaries (B, NH, Tq) (lse read by the
 * sinks only). */
static int submit_kv(nnt_tensor *const *w, int64_t past, int64_t k_pos0, float scale,
                     int64_t window, float cap, nnt_tensor *pos, nnt_tensor *sinks)
{
    nnt_tensor *q = w[0], *mll[3] = {NULL, NULL, NULL};
    int64_t shape[3] = {q->shape[0], q->shape[1], q->shape[2]};
    int64_t tile[3] = {q->tile[0], q->tile[1], q->tile[2]};
    int rc = 0;
    for (int i = 0; i < 3 && rc == 0; i++)
        rc = nnt_temp_create(q->ctx, NNT_FP32, 3, shape, tile, &mll[i]);
    for (int64_t bi = 0; bi < q->grid[0] && rc == 0; bi++)
        for (int64_t hi = 0; hi < q->grid[1] && rc == 0; hi++)
            for (int64_t i = 0; i < q->grid[2] && rc == 0; i++)
                rc = kv_query_tile(w, mll, past, k_pos0, scale, window, cap, pos, bi, hi, i);
    if (rc == 0 && sinks)   /* (the lse of the rows is mll[2]) */
        rc = submit_sinks(w[3], mll[2], sinks, NULL, NULL);
    for (int i = 0; i < 3; i++)
        nnt_temp_release(mll[i]);
    return rc;
}

static int attention_kv(const char *fn, nnt_tensor *q, nnt_tensor *k, nnt_tensor *v,
                        int64_t past, int64_t k_pos0, const nnt_tensor_attention_options *opts,
                        double scale, nnt_tensor *o)
{
    nnt_tensor *all[4] = {q, k, v, o};
    struct op_opts oo;
    int rc = read_options(fn, q, opts, scale, &oo);
    if (rc == 0)
        rc = check_kv_args(fn, all, past, k_pos0, oo.scale);
    if (rc == 0 && oo.sinks)
        rc = nnt_tensor_check_readable(oo.sinks, fn);
    if (rc)
        return rc;
    nnt_tensor *w[4] = {NULL, NULL, NULL, NULL};   /* q, k, v, o with one hd tile */
    if ((rc = nnt_whole_last_in(q, &w[0])) == 0 && (rc = nnt_whole_last_in(k, &w[1])) == 0 &&
        (rc = nnt_whole_last_in(v, &w[2])) == 0 && (rc = nnt_whole_last_out(o, &w[3])) == 0)
        rc = submit_kv(w, past, k_pos0, (float)oo.scale, oo.window, oo.cap, oo.pos, oo.sinks);
    rc = nnt_whole_last_finish(w[3], o, rc);
    for (int i = 0; i < 3; i++)
        nnt_whole_last_drop(w[i], all[i]);
    return rc;
}

int nnt_tensor_attention_kv(nnt_tensor *q, nnt_tensor *k, nnt_tensor *v, int64_t past,
                            double scale, nnt_tensor *o)
{
    return attention_kv("nnt_tensor_attention_kv", q, k, v, past, 0, NULL, scale, o);
}

int nnt_tensor_attention_kv_from(nnt_tensor *q, nnt_tensor *k, nnt_tensor *v, int64_t past,
                                 int64_t k_pos0, const nnt_tensor_attention_options *opts,
                                 nnt_tensor *o)
{
    static const nnt_tensor_attention_options defaults = NNT_TENSOR_ATTENTION_OPTIONS_INIT;
    return attention_kv("nnt_tensor_attention_kv_ex", q, k, v, past, k_pos0,
                        opts ? opts : &defaults, 0.0, o);
}

NNT_API int nnt_tensor_attention_kv_ex(nnt_tensor *q, nnt_tensor *k, nnt_tensor *v,
                                       int64_t past, const nnt_tensor_attention_options *opts,
                                       nnt_tensor *o)
{
    return nnt_tensor_attention_kv_from(q, k, v, past, 0, opts, o);
}
