/* SPDX-License-Identifier: MIT */
/* nnt CPU kernels: batched GEMM through oneDNN's matmul primitive (configure
 * --with-onednn; NNT_HAVE_ONEDNN). Same contract as nnt_cpu_gemm_f32, plus bfloat16 operands.
 *
 * oneDNN 2.6 (Debian libdnnl-dev, OpenMP runtime) facts this module follows (design.md):
 * - a primitive used by two threads at once needs dnnl_scratchpad_mode_user and a scratchpad
 *   per thread, else it crashes or gives wrong results: every primitive here is created in
 *   user scratchpad mode, and each cache (one per thread) owns its scratchpad;
 * - creating the same primitive again is cheap (oneDNN's primitive cache): each thread keeps
 *   its own small cache of primitives keyed by shape, strides, transposes, dtypes, alpha, beta;
 * - that cache hands out the primitive first made for any equal key, and equal keys can have
 *   descriptors that differ (the stride of a dimension of size 1 does not count in a key, but
 *   counts in brgemm's choices): the scratchpad and B's layout are taken from the primitive
 *   made (made_from), never from the descriptor it was created from;
 * - a row-major B can run at half the speed of B in the layout the primitive prefers: the
 *   matmul is created with B in format "any" and, when the preferred layout differs, B is
 *   reordered into it first (one pass over B); except where B as stored runs faster, which
 *   is measured per shape (b_layout).
 * Each call runs one OpenMP thread (each StarPU worker owns a core: never oversubscribe). */
#include "nnt_cpu.h"

#ifdef HAVE_CONFIG_H
#include <config.h>
#endif

#ifdef NNT_HAVE_ONEDNN

#include <oneapi/dnnl/dnnl.h>
#include <omp.h>

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Distinct products of one training step fit: a model's GEMM shapes (GPT-2: ~30), and the
 * attention kernels' (chunks against key tiles cut by the diagonal or a window: each a shape
 * of its own, B as stored and reordered while measured). 48 slots missed 5 % of lookups in
 * GPT-2 124M steps at T 1024 (each miss a primitive made again); 256 none. Looked up by the
 * key's hash in a dense array (hash_of). */
#define CACHE_SLOTS 256

/* What makes two products the same primitive. */
struct gemm_key {
    int64_t trans_a, trans_b, m, n, k, lda, ldb, ldc, sa, sb, sc, batch, dtypes;
    int64_t m_packed;   /* B arrives in the layout of the matmul of m_packed rows
                           (nnt_cpu_dnnl_pack); 0: B as stored                        */
    int64_t pack;       /* 1: the entry is that pack (a reorder of B only)             */
    int64_t b_stored;   /* a bf16 product that takes B as stored (takes_b_stored, when the
                           key is made: a context choosing otherwise builds its own)     */
    uint32_t alpha_bits, beta_bits;
};

struct cache_entry {
    struct gemm_key key;
    int used;                     /* 0: empty slot                                            */
    uint64_t last_use;            /* for least-recently-used replacement                      */
    dnnl_primitive_t matmul;
    dnnl_primitive_t reorder_b;   /* B -> the matmul's preferred layout, or NULL (a pack entry:
                                     B -> the packed layout)                                 */
    size_t packed_b_bytes;        /* size of B in that layout                                 */
    size_t scratch_bytes;         /* largest scratchpad of the two primitives                  */
    dnnl_memory_t a, b, c, b_packed, scratch, scratch_reorder;
};

struct nnt_dnnl_cache {
    dnnl_stream_t stream;
    uint64_t clock;
    uint64_t hash[CACHE_SLOTS];   /* each slot's key hashed (hash_of), 0 for an empty slot  */
    unsigned long builds;         /* entries made (lookups that missed)                      */
    struct cache_entry slot[CACHE_SLOTS];
    void *scratch;                /* scratchpad, then packed B, then converted operands        */
    size_t scratch_bytes;
    void *ksum;                   /* the bf16 operands of a product over several k tiles       */
    size_t ksum_bytes;
};

static dnnl_engine_t engine;
static int engine_ok;
static pthread_once_t engine_once = PTHREAD_ONCE_INIT;

static void create_engine(void)
{
    engine_ok = dnnl_engine_create(&engine, dnnl_cpu, 0) == dnnl_success;
}

int nnt_cpu_dnnl_available(void)
{
    pthread_once(&engine_once, create_engine);
    return engine_ok;
}

int nnt_cpu_dnnl_bf16_isa(void)
{
    if (!nnt_cpu_dnnl_available())
        return 0;
    unsigned isa = (unsigned)dnnl_get_effective_cpu_isa();
    return (isa & (unsigned)dnnl_cpu_isa_avx512_core_bf16) ==
           (unsigned)dnnl_cpu_isa_avx512_core_bf16;
}

/* Whether bf16 products go to oneDNN's bf16 matmul where the CPU has one: yes until a
 * context's start chooses (nnt_cpu_gemm_choose_bf16) */
static int bf16_direct = 1;

void nnt_cpu_dnnl_bf16_use(int direct)
{
    bf16_direct = direct != 0;
}

int nnt_cpu_dnnl_bf16_native(void)
{
    return bf16_direct && nnt_cpu_dnnl_bf16_isa();
}

/* What bf16 products do with B tiles larger than a core's L2 cache (nnt_cpu_dnnl_b_mode),
 * chosen by nnt_cpu_dnnl_choose_b when a context starts (before its workers) */
static int b_mode;   /* NNT_DNNL_B_* */
static size_t l2_bytes;

int nnt_cpu_dnnl_choose_b(char *why, size_t len)
{
    const char *v = getenv("NNT_GEMM_BF16_B");
    if (v && *v && strcmp(v, "reorder") != 0 && strcmp(v, "stored") != 0) {
        snprintf(why, len, "NNT_GEMM_BF16_B='%s': use reorder or stored", v);
        return -1;
    }
    l2_bytes = nnt_cpu_l2_bytes();
    if (v && strcmp(v, "reorder") == 0)
        b_mode = NNT_DNNL_B_REORDER;
    else if (v && strcmp(v, "stored") == 0)
        b_mode = nnt_cpu_dnnl_bf16_native() ? NNT_DNNL_B_STORED : NNT_DNNL_B_REORDER;
    else   /* the kernels whose matmul gives the same bits on B as stored (test_b_stored) */
        b_mode = nnt_cpu_dnnl_available() &&
                         dnnl_get_effective_cpu_isa() == dnnl_cpu_isa_avx512_core_bf16
                     ? NNT_DNNL_B_MEASURED
                     : NNT_DNNL_B_REORDER;
    return 0;
}

int nnt_cpu_dnnl_b_mode(void)
{
    return b_mode;
}

size_t nnt_cpu_dnnl_bf16_b_stored(void)
{
    return b_mode != NNT_DNNL_B_REORDER ? l2_bytes : 0;
}

const char *nnt_cpu_dnnl_isa(void)
{
    if (!nnt_cpu_dnnl_available())
        return "unavailable";
    switch (dnnl_get_effective_cpu_isa()) {
    case dnnl_cpu_isa_avx512_core_amx:
        return "avx512_core_amx";
    case dnnl_cpu_isa_avx512_core_bf16:
        return "avx512_core_bf16";
    case dnnl_cpu_isa_avx512_core_vnni:
        return "avx512_core_vnni";
    case dnnl_cpu_isa_avx512_core:
        return "avx512_core";
    case dnnl_cpu_isa_avx2_vnni:
        return "avx2_vnni";
    case dnnl_cpu_isa_avx2:
        return "avx2";
    default:
        return "other";
    }
}

nnt_dnnl_cache *nnt_cpu_dnnl_cache_create(void)
{
    if (!nnt_cpu_dnnl_available())
        return NULL;
    nnt_dnnl_cache *c = calloc(1, sizeof *c);
    if (c && dnnl_stream_create(&c->stream, engine, dnnl_stream_default_flags) != dnnl_success) {
        free(c);
        c = NULL;
    }
    return c;
}

static void entry_clear(struct cache_entry *e)
{
    if (e->matmul)
        dnnl_primitive_destroy(e->matmul);
    if (e->reorder_b)
        dnnl_primitive_destroy(e->reorder_b);
    dnnl_memory_t *mems[] = {&e->a, &e->b, &e->c, &e->b_packed, &e->scratch, &e->scratch_reorder};
    for (size_t i = 0; i < sizeof mems / sizeof mems[0]; i++)
        if (*mems[i])
            dnnl_memory_destroy(*mems[i]);
    memset(e, 0, sizeof *e);
}

unsigned long nnt_cpu_dnnl_cache_builds(const nnt_dnnl_cache *c)
{
    return c ? c->builds : 0;
}

int nnt_cpu_dnnl_cache_slots(void)
{
    return CACHE_SLOTS;
}

void nnt_cpu_dnnl_cache_destroy(nnt_dnnl_cache *c)
{
    if (!c)
        return;
    for (int i = 0; i < CACHE_SLOTS; i++)
        entry_clear(&c->slot[i]);
    dnnl_stream_destroy(c->stream);
    free(c->scratch);
    free(c->ksum);
    free(c);
}

/* ---- descriptors --------------------------------------------------------------------------- */

/* A stored row-major matrix of `rows` x `cols` as the logical (batch, r, c) operand: op(X) =
 * X^T swaps the strides. A batch stride of 0 with batch > 1 broadcasts (batch dim 1). */
static int operand_md(dnnl_memory_desc_t *md, int trans, int64_t r, int64_t c, int64_t ld,
                      int64_t batch_stride, int64_t batch, dnnl_data_type_t dt)
{
    int64_t rs = trans ? 1 : ld, cs = trans ? ld : 1;
    if (batch == 1) {
        dnnl_dims_t dims = {r, c}, strides = {rs, cs};
        return dnnl_memory_desc_init_by_strides(md, 2, dims, dt, strides) != dnnl_success;
    }
    dnnl_dims_t dims = {batch_stride ? batch : 1, r, c};
    dnnl_dims_t strides = {batch_stride ? batch_stride : r * c, rs, cs};
    return dnnl_memory_desc_init_by_strides(md, 3, dims, dt, strides) != dnnl_success;
}

/* The attributes: user scratchpad; output scale alpha; beta != 0: a sum post-op (C read). */
static dnnl_primitive_attr_t make_attr(float alpha, float beta)
{
    dnnl_primitive_attr_t attr = NULL;
    dnnl_post_ops_t ops = NULL;
    int bad = dnnl_primitive_attr_create(&attr) != dnnl_success;
    bad = bad || dnnl_primitive_attr_set_scratchpad_mode(attr, dnnl_scratchpad_mode_user);
    if (!bad && alpha != 1.0f)
        bad = dnnl_primitive_attr_set_output_scales(attr, 1, 0, &alpha) != dnnl_success;
    if (!bad && beta != 0.0f) {
        bad = dnnl_post_ops_create(&ops) != dnnl_success ||
              dnnl_post_ops_append_sum(ops, beta) != dnnl_success ||
              dnnl_primitive_attr_set_post_ops(attr, ops) != dnnl_success;
        if (ops)
            dnnl_post_ops_destroy(ops);
    }
    if (bad && attr) {
        dnnl_primitive_attr_destroy(attr);
        attr = NULL;
    }
    return attr;
}

static size_t scratchpad_bytes(const_dnnl_primitive_desc_t pd)
{
    const dnnl_memory_desc_t *md = dnnl_primitive_desc_query_md(pd, dnnl_query_scratchpad_md, 0);
    return md ? dnnl_memory_desc_get_size(md) : 0;
}

/* The descriptor the primitive p was made from, which says what p runs with: its
 * scratchpad and its weights' layout. Not necessarily the descriptor p was created from:
 * oneDNN's primitive cache hands out a primitive made earlier, maybe by another thread,
 * for any equal key, and two descriptors of one key can differ. A (m, 1) stored as a column
 * (lda 1) or as a row (A^T, lda m) is one key (a dimension of size 1 has no stride that
 * counts), but oneDNN 2.6's brgemm matmul (avx512_core) copies a transposed A and asks for
 * more scratchpad: 640 bytes against 960 (m 3) or 1088 (m 5). When the two workers of a
 * fresh process built both at once, the descriptor of one could come before the other's
 * primitive entered the cache: given 640 bytes, the primitive wrote past its scratchpad
 * into the reordered B that follows it, and a column of the product came out wrong (the
 * attention's dq over a key block of one row: tests/test_packed failed in 2 to 12 of 400
 * fresh processes; tests/test_gemm_backends test_cached_primitive makes it happen at will).
 * NULL when oneDNN cannot say. */
static const_dnnl_primitive_desc_t made_from(dnnl_primitive_t p)
{
    const_dnnl_primitive_desc_t pd = NULL;
    return dnnl_primitive_get_primitive_desc(p, &pd) == dnnl_success ? pd : NULL;
}

/* A memory object of descriptor md with no data yet (the handle is set at each call); none
 * (NULL, success) for an empty descriptor (a primitive without scratchpad). */
static int make_memory(dnnl_memory_t *mem, const dnnl_memory_desc_t *md)
{
    if (!md || dnnl_memory_desc_get_size(md) == 0)
        return 0;
    return dnnl_memory_create(mem, md, engine, DNNL_MEMORY_NONE) != dnnl_success;
}

/* Reorder user B into the matmul's layout `want` (when it differs): the reorder primitive
 * and its memory objects. 0 or -1. */
static int make_reorder_b(struct cache_entry *e, const dnnl_memory_desc_t *user,
                          const dnnl_memory_desc_t *want)
{
    dnnl_primitive_attr_t attr = make_attr(1.0f, 0.0f);
    dnnl_primitive_desc_t pd = NULL;
    int bad = !attr || dnnl_reorder_primitive_desc_create(&pd, user, engine, want, engine,
                                                           attr) != dnnl_success;
    bad = bad || dnnl_primitive_create(&e->reorder_b, pd) != dnnl_success;
    const_dnnl_primitive_desc_t run = bad ? NULL : made_from(e->reorder_b);
    bad = bad || !run;
    if (!bad) {
        size_t s = scratchpad_bytes(run);
        if (s > e->scratch_bytes)
            e->scratch_bytes = s;
        bad = make_memory(&e->scratch_reorder,
                          dnnl_primitive_desc_query_md(run, dnnl_query_scratchpad_md, 0));
    }
    if (pd)
        dnnl_primitive_desc_destroy(pd);
    if (attr)
        dnnl_primitive_attr_destroy(attr);
    e->packed_b_bytes = dnnl_memory_desc_get_size(want);
    return bad || make_memory(&e->b_packed, want) ? -1 : 0;
}

/* Whether the matmul of pd wants B in a blocked (packed) layout. */
static int is_blocked(const_dnnl_primitive_desc_t pd)
{
    const dnnl_memory_desc_t *md = dnnl_primitive_desc_query_md(pd, dnnl_query_weights_md, 0);
    return md && md->format_kind == dnnl_blocked && md->format_desc.blocking.inner_nblks > 0;
}

/* ---- B as stored or reordered: measured per shape ---------------------------------------
 * A product can run on B as stored although its matmul prefers a blocked layout: oneDNN's
 * brgemm then copies B's blocks as it goes, and on its avx512_core_bf16 kernels gives the
 * bits of the blocked layout, in bf16 and in float (the same kernel, the same order of the
 * sums; test_b_stored, test_b_measured_small). Which is faster depends on the CPU and the
 * shape: the reorder pass over B weighs on a product in proportion to 1 / m, and its cost
 * differs between CPUs and between B's orientations. Measured (bench/RESULTS-bf16.md, bench/RESULTS-window.md):
 * AMD Zen 4, 1 MiB L2: 128- and 256-row products of GPT-2's 768 x 768 tiles and of its head
 * faster as stored (steps 0.91-0.98x), 512 rows and more 1-4 % slower as stored; AMD Zen 5,
 * 1 MiB L2: Llama-3.2-1B's x W^T products of 512 rows (B 2048 x 2048 and larger) 0.69-0.74
 * of oneDNN's rate after a reorder against 0.91-1.00 as stored (steps 1.16x faster), its
 * dY W products the same either way; AMD Zen 5, the attention kernels' small products (64
 * rows, B of 64 x 256 and smaller): 1.1-1.4x faster on B as stored in float, 1.2-1.6x in
 * bf16. So no fixed rule: the first B_TRIALS products of each shape (trans_b, dtype, m, n,
 * k) alternate between the two ways, each timed on its thread's CPU clock, and the shape
 * keeps the way whose faster run was faster, for the rest of the process (both give the
 * same bits, so which way a product ran never shows in its result). NNT_GEMM_BF16_B forces
 * one way for bf16 products on a B beyond L2, and "reorder" every product's. */
#define B_TRIALS 4      /* 2 runs each way: the first run of a way may find cold caches */
#define B_SHAPES 1024   /* shapes measured; more shapes than that take the fallback      */

struct b_shape {
    int64_t trans_b, bf16, m, n, k;
    int used, claimed, done;   /* trial runs handed out and finished                    */
    double best[2];            /* the fastest run on a reordered B [0] and as stored [1] */
    int verdict;               /* -1 while measured, else the way kept (1: as stored)    */
};
static struct b_shape b_shapes[B_SHAPES];
static pthread_mutex_t b_lock = PTHREAD_MUTEX_INITIALIZER;
static double (*b_trial_time)(int stored, double measured);   /* tests */

/* Where no measurement decides (its runs still going, or no slot left): Zen 4's rule. */
static int b_fallback(int64_t m)
{
    return m <= 256;
}

/* Whether a bf16 product's B (k x n) is one whose layout the mode chooses: larger than L2. */
static int b_eligible(int64_t n, int64_t k)
{
    size_t l2 = nnt_cpu_dnnl_bf16_b_stored();
    return l2 > 0 && (size_t)(n * k) * 2 > l2;
}

/* The slot of a shape (trans_b and bf16 0 or 1), taken when new if take; NULL when the table
 * is full, or the shape is new and not taken. b_lock held. */
static struct b_shape *b_slot(int64_t trans_b, int64_t bf16, int64_t m, int64_t n, int64_t k,
                              int take)
{
    uint64_t h = (uint64_t)(m * 31 + n) * 0x9e3779b97f4a7c15ull ^
                 (uint64_t)(k * 4 + bf16 * 2 + trans_b);
    for (int probe = 0; probe < B_SHAPES; probe++) {
        struct b_shape *s = &b_shapes[(h + (uint64_t)probe) % B_SHAPES];
        if (!s->used) {
            if (take)
                *s = (struct b_shape){trans_b, bf16, m, n, k, 1, 0, 0, {1e300, 1e300}, -1};
            return take ? s : NULL;
        }
        if (s->trans_b == trans_b && s->bf16 == bf16 && s->m == m && s->n == n && s->k == k)
            return s;
    }
    return NULL;
}

/* The way a product of m rows (bf16 products or float) on B (k x n, trans_b) takes B: 1 as
 * stored, 0 reordered. *trial: the slot whose measurement this run is, else NULL. measure 0
 * (a bf16 pack's decision, made on the submitting thread): the verdict when there is one,
 * else as stored (no pack: the products' own runs then measure the shape). */
static int b_layout(int64_t trans_b, int bf16, int64_t m, int64_t n, int64_t k, int measure,
                    struct b_shape **trial)
{
    *trial = NULL;
    int large = bf16 && b_eligible(n, k);   /* what NNT_GEMM_BF16_B=stored decides */
    if (b_mode == NNT_DNNL_B_REORDER || (!large && b_mode != NNT_DNNL_B_MEASURED))
        return 0;
    if (b_mode == NNT_DNNL_B_STORED)
        return 1;
    pthread_mutex_lock(&b_lock);
    struct b_shape *s = b_slot(trans_b != 0, bf16 != 0, m, n, k, 1);
    int way = s ? (s->verdict >= 0 ? s->verdict : measure ? -1 : 1) : b_fallback(m);
    if (way < 0) {
        if (s->claimed < B_TRIALS) {
            way = s->claimed++ % 2 == 0;   /* as stored first, then reordered, ... */
            *trial = s;
        } else {
            way = b_fallback(m);   /* the shape's last trial runs still going */
        }
    }
    pthread_mutex_unlock(&b_lock);
    return way;
}

/* A trial run of way `stored` took `seconds` of its thread's CPU time. */
static void b_measured(struct b_shape *s, int stored, double seconds)
{
    if (b_trial_time)
        seconds = b_trial_time(stored, seconds);
    pthread_mutex_lock(&b_lock);
    if (seconds < s->best[stored])
        s->best[stored] = seconds;
    if (++s->done == B_TRIALS)
        s->verdict = s->best[1] <= s->best[0];
    pthread_mutex_unlock(&b_lock);
}

static double thread_seconds(void)
{
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

int nnt_cpu_dnnl_b_verdict(int trans_b, int bf16, int64_t m, int64_t n, int64_t k)
{
    pthread_mutex_lock(&b_lock);
    const struct b_shape *s = b_slot(trans_b != 0, bf16 != 0, m, n, k, 0);
    int v = s ? s->verdict : -1;
    pthread_mutex_unlock(&b_lock);
    return v;
}

void nnt_cpu_dnnl_b_forget(double (*trial_time)(int stored, double measured))
{
    pthread_mutex_lock(&b_lock);
    memset(b_shapes, 0, sizeof b_shapes);
    b_trial_time = trial_time;
    pthread_mutex_unlock(&b_lock);
}

/* Tests: a function run between a matmul's descriptor and its primitive (in entry_build). */
static void (*between_fn)(void *);
static void *between_arg;
void nnt_cpu_dnnl_between(void (*fn)(void *), void *arg)
{
    between_fn = fn;
    between_arg = arg;
}

/* Tests: reorder B also into a preferred plain layout (else B is used as stored then), and
 * pack B into such a layout too (else nnt_cpu_dnnl_pack_bytes declines). */
static int reorder_plain;
void nnt_cpu_dnnl_reorder_plain(int on) { reorder_plain = on; }

/* The layout in which the matmul of m rows (A (m, k) as stored, C (m, n) float, products of
 * dtype dt) wants B (k, n): 0 and md when it is a blocked one (B worth packing), 1 when it
 * wants B as stored (unless tests pack plain layouts too), -1 when oneDNN fails. Whether a
 * bf16 product takes a blocked B as stored all the same is b_layout's choice, made by the
 * pack's decision (nnt_cpu_dnnl_pack_bytes), not here: a pack decided on is built. */
static int packed_md(dnnl_memory_desc_t *md, int64_t m, int64_t n, int64_t k,
                     dnnl_data_type_t dt)
{
    dnnl_memory_desc_t a_md, b_any, c_md;
    dnnl_dims_t a_dims = {m, k}, b_dims = {k, n}, c_dims = {m, n};
    dnnl_matmul_desc_t desc;
    if (dnnl_memory_desc_init_by_tag(&a_md, 2, a_dims, dt, dnnl_ab) != dnnl_success ||
        dnnl_memory_desc_init_by_tag(&b_any, 2, b_dims, dt, dnnl_format_tag_any) != dnnl_success ||
        dnnl_memory_desc_init_by_tag(&c_md, 2, c_dims, dnnl_f32, dnnl_ab) != dnnl_success ||
        dnnl_matmul_desc_init(&desc, &a_md, &b_any, NULL, &c_md) != dnnl_success)
        return -1;
    dnnl_primitive_attr_t attr = make_attr(1.0f, 0.0f);
    dnnl_primitive_desc_t pd = NULL;
    int rc = !attr || dnnl_primitive_desc_create(&pd, &desc, attr, engine, NULL) != dnnl_success
                 ? -1
                 : !is_blocked(pd) && !reorder_plain;
    if (rc == 0)
        *md = *dnnl_primitive_desc_query_md(pd, dnnl_query_weights_md, 0);
    if (pd)
        dnnl_primitive_desc_destroy(pd);
    if (attr)
        dnnl_primitive_attr_destroy(attr);
    return rc;
}

static unsigned long products_done, packs_done, packed_done, packed_reordered;   /* atomic */
static unsigned long ksum_done, stored_built;   /* atomic */
unsigned long nnt_cpu_dnnl_stored_matmuls(void)
{
    return __atomic_load_n(&stored_built, __ATOMIC_RELAXED);
}

unsigned long nnt_cpu_dnnl_ksum_products(void)
{
    return __atomic_load_n(&ksum_done, __ATOMIC_RELAXED);
}

unsigned long nnt_cpu_dnnl_products(void)
{
    return __atomic_load_n(&products_done, __ATOMIC_RELAXED);
}

void nnt_cpu_dnnl_pack_counts(unsigned long *packs, unsigned long *packed_products,
                              unsigned long *reordered)
{
    *packs = __atomic_load_n(&packs_done, __ATOMIC_RELAXED);
    *packed_products = __atomic_load_n(&packed_done, __ATOMIC_RELAXED);
    *reordered = __atomic_load_n(&packed_reordered, __ATOMIC_RELAXED);
}

/* A pack entry: the reorder of B (k, n) as stored (trans_b, ldb; bf16 when key->dtypes has
 * NNT_DNNL_B_BF16) into the layout of the matmul of m_packed rows (product dtype: bf16 when
 * key->dtypes has NNT_DNNL_BF16). 0 or -1. */
static int pack_build(struct cache_entry *e, const struct gemm_key *key)
{
    dnnl_data_type_t from = (key->dtypes & NNT_DNNL_B_BF16) ? dnnl_bf16 : dnnl_f32;
    dnnl_data_type_t to = (key->dtypes & NNT_DNNL_BF16) ? dnnl_bf16 : dnnl_f32;
    dnnl_memory_desc_t user, want;
    e->key = *key;
    e->used = 1;
    if (operand_md(&user, (int)key->trans_b, key->k, key->n, key->ldb, 0, 1, from) ||
        packed_md(&want, key->m_packed, key->n, key->k, to) != 0)
        return -1;
    return make_memory(&e->b, &user) || make_reorder_b(e, &user, &want) ? -1 : 0;
}

/* The matmul for key (and B's reorder when the matmul prefers another layout). 0 or -1. */
static int entry_build(struct cache_entry *e, const struct gemm_key *key, float alpha, float beta)
{
    if (key->pack)
        return pack_build(e, key);
    dnnl_data_type_t ta = (key->dtypes & 1) ? dnnl_bf16 : dnnl_f32;
    dnnl_data_type_t tb = (key->dtypes & 2) ? dnnl_bf16 : dnnl_f32;
    dnnl_memory_desc_t a_md, b_md, b_any, c_md;
    if (operand_md(&a_md, (int)key->trans_a, key->m, key->k, key->lda, key->sa, key->batch, ta) ||
        operand_md(&c_md, 0, key->m, key->n, key->ldc, key->sc, key->batch, dnnl_f32))
        return -1;
    if (key->m_packed ? packed_md(&b_md, key->m_packed, key->n, key->k, tb) != 0
                      : operand_md(&b_md, (int)key->trans_b, key->k, key->n, key->ldb, key->sb,
                                   key->batch, tb))
        return -1;
    b_any = b_md;
    if (dnnl_memory_desc_init_by_tag(&b_any, b_md.ndims, b_md.dims, tb, dnnl_format_tag_any))
        return -1;
    dnnl_matmul_desc_t desc;
    if (dnnl_matmul_desc_init(&desc, &a_md, &b_any, NULL, &c_md) != dnnl_success)
        return -1;
    dnnl_primitive_attr_t attr = make_attr(alpha, beta);
    dnnl_primitive_desc_t pd = NULL;
    int bad = !attr || dnnl_primitive_desc_create(&pd, &desc, attr, engine, NULL) != dnnl_success;
    /* key->b_stored: b_layout's choice for this product, made with the key */
    const int may_plain = !bad && !key->m_packed && !reorder_plain;
    const int stored = may_plain && key->b_stored && is_blocked(pd);
    if (stored)
        __atomic_fetch_add(&stored_built, 1, __ATOMIC_RELAXED);
    if (may_plain && (stored || !is_blocked(pd))) {
        /* it wants a plain layout (a GEMM-based implementation), or takes B as stored faster
         * than after a reorder: B as it is stored (a packed B is always reordered into the
         * layout the matmul wants, should that differ) */
        dnnl_primitive_desc_destroy(pd);
        pd = NULL;
        bad = dnnl_matmul_desc_init(&desc, &a_md, &b_md, NULL, &c_md) != dnnl_success ||
              dnnl_primitive_desc_create(&pd, &desc, attr, engine, NULL) != dnnl_success;
    }
    if (!bad && between_fn) {
        void (*fn)(void *) = between_fn;
        between_fn = NULL;   /* once: the products it runs build their own entries */
        fn(between_arg);
    }
    bad = bad || dnnl_primitive_create(&e->matmul, pd) != dnnl_success;
    const_dnnl_primitive_desc_t run = bad ? NULL : made_from(e->matmul);
    bad = bad || !run;
    if (!bad) {
        const dnnl_memory_desc_t *want = dnnl_primitive_desc_query_md(run, dnnl_query_weights_md, 0);
        e->scratch_bytes = scratchpad_bytes(run);
        bad = make_memory(&e->a, &a_md) || make_memory(&e->b, &b_md) ||
              make_memory(&e->c, &c_md) ||
              make_memory(&e->scratch, dnnl_primitive_desc_query_md(run, dnnl_query_scratchpad_md, 0));
        if (!bad && !dnnl_memory_desc_equal(want, &b_md))
            bad = make_reorder_b(e, &b_md, want);
    }
    if (pd)
        dnnl_primitive_desc_destroy(pd);
    if (attr)
        dnnl_primitive_attr_destroy(attr);
    e->key = *key;
    e->used = 1;
    return bad ? -1 : 0;
}

/* A key's hash, never 0 (the mark of an empty slot). */
static uint64_t hash_of(const struct gemm_key *key)
{
    uint64_t w[sizeof *key / sizeof(uint64_t)], h = 0x9e3779b97f4a7c15ull;
    memcpy(w, key, sizeof w);
    for (size_t i = 0; i < sizeof w / sizeof w[0]; i++)
        h = (h ^ w[i]) * 0xff51afd7ed558ccdull;
    return (h ^ (h >> 29)) | 1;
}

/* The entry for key: found, or built in the least recently used slot. NULL on failure. */
static struct cache_entry *lookup(nnt_dnnl_cache *c, const struct gemm_key *key, float alpha,
                                  float beta)
{
    const uint64_t h = hash_of(key);
    c->clock++;
    for (int i = 0; i < CACHE_SLOTS; i++)
        if (c->hash[i] == h && memcmp(&c->slot[i].key, key, sizeof *key) == 0) {
            c->slot[i].last_use = c->clock;
            return &c->slot[i];
        }
    int v = 0;   /* the victim: an empty slot, else the least recently used */
    for (int i = 0; i < CACHE_SLOTS && c->hash[v] != 0; i++)
        if (c->hash[i] == 0 || c->slot[i].last_use < c->slot[v].last_use)
            v = i;
    struct cache_entry *victim = &c->slot[v];
    entry_clear(victim);
    c->hash[v] = 0;
    c->builds++;
    if (entry_build(victim, key, alpha, beta)) {
        entry_clear(victim);
        return NULL;
    }
    c->hash[v] = h;
    victim->last_use = c->clock;
    return victim;
}

/* ---- execution --------------------------------------------------------------------------- */

/* The cache's buffer of at least `bytes` (64-byte aligned), or NULL. */
static void *cache_buffer(nnt_dnnl_cache *c, size_t bytes)
{
    if (c->scratch && c->scratch_bytes >= bytes)
        return c->scratch;
    free(c->scratch);
    size_t want = (bytes + bytes / 4 + 4096 + 63) / 64 * 64;
    c->scratch = NULL;
    c->scratch_bytes = 0;
    if (posix_memalign(&c->scratch, 64, want) == 0)
        c->scratch_bytes = want;
    return c->scratch;
}

static size_t round64(size_t n) { return (n + 63) / 64 * 64; }

/* A float operand converted to bf16 densely into dst, batch by batch, row by row (stored
 * rows x cols with leading dimension ld); the new ld is cols, the new batch stride rows*cols. */
static void to_bf16_dense(const float *x, int64_t rows, int64_t cols, int64_t ld, int64_t stride,
                          int64_t batch, uint16_t *dst)
{
    for (int64_t b = 0; b < batch; b++)
        for (int64_t r = 0; r < rows; r++)
            nnt_cpu_f32_to_bf16(cols, x + b * stride + r * ld, dst + (b * rows + r) * cols);
}

/* C = beta C for each batch without reading C when beta == 0 (k == 0 or alpha == 0). */
static void scale_only(int64_t m, int64_t n, float beta, float *c, int64_t ldc, int64_t sc,
                       int64_t batch)
{
    for (int64_t i = 0; i < batch; i++)
        for (int64_t r = 0; r < m; r++) {
            float *row = c + i * sc + r * ldc;
            for (int64_t j = 0; j < n; j++)
                row[j] = beta == 0.0f ? 0.0f : row[j] * beta;
        }
}

static int run_entry(nnt_dnnl_cache *c, struct cache_entry *e, const void *a, const void *b,
                     float *cm, void *buf)
{
    char *scratch = buf, *packed = scratch + round64(e->scratch_bytes);
    int bad = dnnl_memory_set_data_handle(e->a, (void *)a) ||
              dnnl_memory_set_data_handle(e->b, (void *)b) ||
              dnnl_memory_set_data_handle(e->c, cm) ||
              (e->scratch && dnnl_memory_set_data_handle(e->scratch, scratch));
    if (!bad && e->reorder_b) {
        bad = dnnl_memory_set_data_handle(e->b_packed, packed) ||
              (e->scratch_reorder && dnnl_memory_set_data_handle(e->scratch_reorder, scratch));
        dnnl_exec_arg_t rargs[] = {{DNNL_ARG_FROM, e->b}, {DNNL_ARG_TO, e->b_packed},
                                   {DNNL_ARG_SCRATCHPAD, e->scratch_reorder}};
        bad = bad || dnnl_primitive_execute(e->reorder_b, c->stream, e->scratch_reorder ? 3 : 2,
                                            rargs);
    }
    dnnl_exec_arg_t args[] = {{DNNL_ARG_SRC, e->a},
                              {DNNL_ARG_WEIGHTS, e->reorder_b ? e->b_packed : e->b},
                              {DNNL_ARG_DST, e->c},
                              {DNNL_ARG_SCRATCHPAD, e->scratch}};
    bad = bad || dnnl_primitive_execute(e->matmul, c->stream, e->scratch ? 4 : 3, args);
    bad = bad || dnnl_stream_wait(c->stream);
    if (!bad)
        __atomic_fetch_add(&products_done, 1, __ATOMIC_RELAXED);
    if (!bad && e->key.m_packed) {
        __atomic_fetch_add(&packed_done, 1, __ATOMIC_RELAXED);
        if (e->reorder_b)
            __atomic_fetch_add(&packed_reordered, 1, __ATOMIC_RELAXED);
    }
    return bad ? -1 : 0;
}

/* One thread's product; m_packed > 0: b is B packed for the matmul of m_packed rows
 * (nnt_cpu_dnnl_pack, in the product's dtype; batch 1, trans_b and ldb unused). */
static int gemm_one_thread(nnt_dnnl_cache *cache, int trans_a, int trans_b, int dtypes,
                           int64_t m, int64_t n, int64_t k, float alpha,
                           const void *a, int64_t lda, int64_t stride_a, const void *b,
                           int64_t ldb, int64_t stride_b, int64_t m_packed, float beta,
                           float *c, int64_t ldc, int64_t stride_c, int64_t batch)
{
    if (m <= 0 || n <= 0 || batch <= 0)
        return 0;
    if (k <= 0 || alpha == 0.0f) {
        scale_only(m, n, beta, c, ldc, stride_c, batch);
        return 0;
    }
    if (!cache || (batch > 1 && stride_c == 0) || (m_packed && batch != 1))
        return -1;

    /* bf16 products: a float operand becomes bf16 (dense), as the precision rounds it */
    int a_bf16 = dtypes & NNT_DNNL_A_BF16, b_bf16 = dtypes & NNT_DNNL_B_BF16;
    int any_bf16 = a_bf16 || b_bf16 || (dtypes & NNT_DNNL_BF16);
    int64_t ar = trans_a ? k : m, ac = trans_a ? m : k, br = trans_b ? n : k, bc = trans_b ? k : n;
    size_t conv_a = any_bf16 && !a_bf16 ? (size_t)(batch * ar * ac) * 2 : 0;
    size_t conv_b = any_bf16 && !b_bf16 && !m_packed ? (size_t)(batch * br * bc) * 2 : 0;
    struct gemm_key key;
    memset(&key, 0, sizeof key);
    key = (struct gemm_key){trans_a != 0, m_packed ? 0 : trans_b != 0, m, n, k,
                            conv_a ? ac : lda, m_packed ? 0 : conv_b ? bc : ldb, ldc,
                            batch > 1 ? (conv_a ? ar * ac : stride_a) : 0,
                            batch > 1 ? (conv_b ? br * bc : stride_b) : 0,
                            batch > 1 ? stride_c : 0, batch, any_bf16 ? 3 : 0, m_packed, 0,
                            0, 0, 0};
    struct b_shape *trial = NULL;
    if (!m_packed)
        key.b_stored = b_layout(trans_b, any_bf16, m, n, k, 1, &trial);
    memcpy(&key.alpha_bits, &alpha, sizeof alpha);
    memcpy(&key.beta_bits, &beta, sizeof beta);
    struct cache_entry *e = lookup(cache, &key, alpha, beta);
    if (!e)
        return -1;
    size_t head = round64(e->scratch_bytes) + round64(e->packed_b_bytes);
    char *buf = cache_buffer(cache, head + round64(conv_a) + conv_b);
    if (!buf)
        return -1;
    if (conv_a) {
        to_bf16_dense(a, ar, ac, lda, stride_a, batch, (uint16_t *)(buf + head));
        a = buf + head;
    }
    if (conv_b) {
        to_bf16_dense(b, br, bc, ldb, stride_b, batch, (uint16_t *)(buf + head + round64(conv_a)));
        b = buf + head + round64(conv_a);
    }
    if (!trial)
        return run_entry(cache, e, a, b, c, buf);
    double start = thread_seconds();
    int rc = run_entry(cache, e, a, b, c, buf);
    if (rc == 0)
        b_measured(trial, (int)key.b_stored, thread_seconds() - start);
    return rc;
}

/* The pack on one thread: B (k, n) as stored, made the product's dtype as the precision
 * rounds it, reordered into `packed`. */
static int pack_one_thread(nnt_dnnl_cache *cache, int trans_b, int dtypes, int bits,
                           int64_t m, int64_t n, int64_t k, const void *b, void *packed)
{
    int to_bf16 = (dtypes & NNT_DNNL_BF16) != 0, b_bf16 = (dtypes & NNT_DNNL_B_BF16) != 0;
    int64_t br = trans_b ? n : k, bc = trans_b ? k : n;
    /* rounded by nnt's kernels first, as the unpacked products round B: a float B of a bf16
     * product to bf16, a float B of a float product to `bits` mantissa bits */
    size_t conv = !b_bf16 && (to_bf16 || bits) ? (size_t)(br * bc) * (to_bf16 ? 2 : 4) : 0;
    struct gemm_key key;
    memset(&key, 0, sizeof key);
    key.trans_b = trans_b != 0;
    key.n = n;
    key.k = k;
    key.ldb = bc;
    key.dtypes = (to_bf16 ? NNT_DNNL_BF16 : 0) | (b_bf16 || to_bf16 ? NNT_DNNL_B_BF16 : 0);
    key.m_packed = m;
    key.pack = 1;
    if (!cache || m <= 0 || n <= 0 || k <= 0)
        return -1;
    struct cache_entry *e = lookup(cache, &key, 1.0f, 0.0f);
    if (!e)
        return -1;
    size_t head = round64(e->scratch_bytes);
    char *buf = cache_buffer(cache, head + conv);
    if (!buf)
        return -1;
    if (conv && to_bf16)
        nnt_cpu_f32_to_bf16(br * bc, b, (uint16_t *)(buf + head));
    else if (conv)
        nnt_cpu_round_f32(br * bc, bits, b, (float *)(buf + head));
    int bad = dnnl_memory_set_data_handle(e->b, conv ? (void *)(buf + head) : (void *)b) ||
              dnnl_memory_set_data_handle(e->b_packed, packed) ||
              (e->scratch_reorder && dnnl_memory_set_data_handle(e->scratch_reorder, buf));
    dnnl_exec_arg_t args[] = {{DNNL_ARG_FROM, e->b}, {DNNL_ARG_TO, e->b_packed},
                              {DNNL_ARG_SCRATCHPAD, e->scratch_reorder}};
    bad = bad || dnnl_primitive_execute(e->reorder_b, cache->stream,
                                        e->scratch_reorder ? 3 : 2, args);
    bad = bad || dnnl_stream_wait(cache->stream);
    if (!bad)
        __atomic_fetch_add(&packs_done, 1, __ATOMIC_RELAXED);
    return bad ? -1 : 0;
}

int nnt_cpu_gemm_dnnl(nnt_dnnl_cache *cache, int trans_a, int trans_b, int dtypes,
                      int64_t m, int64_t n, int64_t k, float alpha, const void *a, int64_t lda,
                      int64_t stride_a, const void *b, int64_t ldb, int64_t stride_b,
                      float beta, float *c, int64_t ldc, int64_t stride_c, int64_t batch)
{
    /* this thread's OpenMP teams, for the primitives created (oneDNN plans for the thread
     * count of their creation) and run: one thread (one core a worker); the caller's
     * setting back afterwards (the start-up measurement runs in the application's thread) */
    int threads = omp_get_max_threads();
    omp_set_num_threads(1);
    int rc = gemm_one_thread(cache, trans_a, trans_b, dtypes, m, n, k, alpha, a, lda,
                             stride_a, b, ldb, stride_b, 0, beta, c, ldc, stride_c, batch);
    omp_set_num_threads(threads);
    return rc;
}

size_t nnt_cpu_dnnl_pack_bytes(int trans_b, int dtypes, int64_t m, int64_t n, int64_t k)
{
    if (!nnt_cpu_dnnl_available() || m <= 0 || n <= 0 || k <= 0)
        return 0;
    if ((dtypes & NNT_DNNL_BF16) && !nnt_cpu_dnnl_bf16_isa())
        return 0;
    struct b_shape *unused;
    if ((dtypes & NNT_DNNL_BF16) && !reorder_plain && b_eligible(n, k) &&
        b_layout(trans_b, 1, m, n, k, 0, &unused))
        return 0;   /* the products take B as stored */
    dnnl_memory_desc_t md;
    int threads = omp_get_max_threads();   /* the layout the workers' primitives will want */
    omp_set_num_threads(1);
    int rc = packed_md(&md, m, n, k, (dtypes & NNT_DNNL_BF16) ? dnnl_bf16 : dnnl_f32);
    omp_set_num_threads(threads);
    return rc == 0 ? dnnl_memory_desc_get_size(&md) : 0;
}

int nnt_cpu_dnnl_pack(nnt_dnnl_cache *cache, int trans_b, int dtypes, int bits, int64_t m,
                      int64_t n, int64_t k, const void *b, void *packed)
{
    int threads = omp_get_max_threads();
    omp_set_num_threads(1);
    int rc = pack_one_thread(cache, trans_b, dtypes, bits, m, n, k, b, packed);
    omp_set_num_threads(threads);
    return rc;
}

int nnt_cpu_gemm_dnnl_packed(nnt_dnnl_cache *cache, int trans_a, int dtypes, int64_t m,
                             int64_t n, int64_t k, float alpha, const void *a, int64_t lda,
                             const void *packed, int64_t m_packed, float beta, float *c,
                             int64_t ldc)
{
    if (m_packed <= 0)
        return -1;
    int threads = omp_get_max_threads();
    omp_set_num_threads(1);
    int rc = gemm_one_thread(cache, trans_a, 0, dtypes & ~NNT_DNNL_B_BF16, m, n, k, alpha, a,
                             lda, 0, packed, 0, 0, m_packed, beta, c, ldc, 0, 1);
    omp_set_num_threads(threads);
    return rc;
}

/* Rows of a tile as bf16 into dst: `rows` rows of `cols` elements (leading dimension ld in
 * the tile, dld in dst), float rounded by nnt_cpu_f32_to_bf16, bf16 copied. */
static void rows_to_bf16(const void *src, int is_bf16, int64_t rows, int64_t cols, int64_t ld,
                         uint16_t *dst, int64_t dld)
{
    for (int64_t r = 0; r < rows; r++) {
        if (is_bf16)
            memcpy(dst + r * dld, (const uint16_t *)src + r * ld, (size_t)cols * 2);
        else
            nnt_cpu_f32_to_bf16(cols, (const float *)src + r * ld, dst + r * dld);
    }
}

/* One operand of the k-summed product, its nk tiles side by side along k, as bf16 in dst:
 * k_major (the tiles are (k_i, w) row-major: A^T or B) stacks them, else (w, k_i) tiles
 * (A or B^T) are joined row by row into (w, K). */
static void join_k(const void *const *tiles, int is_bf16, int nk, const int64_t *k, int64_t w,
                   int k_major, int64_t ktotal, uint16_t *dst)
{
    int64_t off = 0;
    for (int i = 0; i < nk; i++) {
        if (k_major)
            rows_to_bf16(tiles[i], is_bf16, k[i], w, w, dst + off * w, w);
        else
            rows_to_bf16(tiles[i], is_bf16, w, k[i], k[i], dst + off, ktotal);
        off += k[i];
    }
}

int nnt_cpu_gemm_dnnl_ksum(nnt_dnnl_cache *cache, int trans_a, int trans_b, int dtypes,
                           int64_t m, int64_t n, int nk, const int64_t *k, float alpha,
                           const void *const *a, const void *const *b, float beta, float *c,
                           int64_t ldc)
{
    int64_t ktotal = 0;
    for (int i = 0; i < nk; i++)
        ktotal += k[i];
    if (!cache || nk < 1 || m <= 0 || n <= 0)
        return m <= 0 || n <= 0 ? 0 : -1;
    size_t a_bytes = (size_t)(m * ktotal) * 2, bytes = a_bytes + (size_t)(ktotal * n) * 2 + 64;
    if (cache->ksum_bytes < bytes) {
        free(cache->ksum);
        cache->ksum_bytes = 0;
        if (posix_memalign(&cache->ksum, 64, bytes + bytes / 4) != 0) {
            cache->ksum = NULL;
            return -1;
        }
        cache->ksum_bytes = bytes + bytes / 4;
    }
    uint16_t *acat = cache->ksum, *bcat = (uint16_t *)((char *)cache->ksum + round64(a_bytes));
    join_k(a, dtypes & NNT_DNNL_A_BF16, nk, k, m, trans_a, ktotal, acat);    // (K, m) | (m, K)
    join_k(b, dtypes & NNT_DNNL_B_BF16, nk, k, n, !trans_b, ktotal, bcat);   // (K, n) | (n, K)
    int threads = omp_get_max_threads();
    omp_set_num_threads(1);
    int rc = gemm_one_thread(cache, trans_a, trans_b,
                             NNT_DNNL_BF16 | NNT_DNNL_A_BF16 | NNT_DNNL_B_BF16, m, n, ktotal,
                             alpha, acat, trans_a ? m : ktotal, 0, bcat, trans_b ? ktotal : n,
                             0, 0, beta, c, ldc, 0, 1);
    omp_set_num_threads(threads);
    if (rc == 0)
        __atomic_fetch_add(&ksum_done, 1, __ATOMIC_RELAXED);
    return rc;
}

#else /* !NNT_HAVE_ONEDNN: the backend is absent; callers check nnt_cpu_dnnl_available */

int nnt_cpu_dnnl_available(void) { return 0; }
int nnt_cpu_dnnl_bf16_isa(void) { return 0; }
int nnt_cpu_dnnl_bf16_native(void) { return 0; }
void nnt_cpu_dnnl_bf16_use(int direct) { (void)direct; }
size_t nnt_cpu_dnnl_bf16_b_stored(void) { return 0; }
int nnt_cpu_dnnl_b_mode(void) { return NNT_DNNL_B_REORDER; }
int nnt_cpu_dnnl_b_verdict(int trans_b, int bf16, int64_t m, int64_t n, int64_t k)
{
    (void)trans_b, (void)bf16, (void)m, (void)n, (void)k;
    return -1;
}
void nnt_cpu_dnnl_b_forget(double (*trial_time)(int stored, double measured))
{
    (void)trial_time;
}
int nnt_cpu_dnnl_choose_b(char *why, size_t len) { (void)why, (void)len; return 0; }
const char *nnt_cpu_dnnl_isa(void) { return "not compiled in"; }
nnt_dnnl_cache *nnt_cpu_dnnl_cache_create(void) { return NULL; }
void nnt_cpu_dnnl_cache_destroy(nnt_dnnl_cache *c) { (void)c; }
unsigned long nnt_cpu_dnnl_cache_builds(const nnt_dnnl_cache *c) { (void)c; return 0; }
int nnt_cpu_dnnl_cache_slots(void) { return 0; }
void nnt_cpu_dnnl_reorder_plain(int on) { (void)on; }
void nnt_cpu_dnnl_between(void (*fn)(void *), void *arg) { (void)fn, (void)arg; }
unsigned long nnt_cpu_dnnl_products(void) { return 0; }
unsigned long nnt_cpu_dnnl_ksum_products(void) { return 0; }
unsigned long nnt_cpu_dnnl_stored_matmuls(void) { return 0; }
void nnt_cpu_dnnl_pack_counts(unsigned long *packs, unsigned long *packed_products,
                              unsigned long *reordered)
{
    *packs = *packed_products = *reordered = 0;
}
size_t nnt_cpu_dnnl_pack_bytes(int trans_b, int dtypes, int64_t m, int64_t n, int64_t k)
{
    (void)trans_b;
    (void)dtypes, (void)m, (void)n, (void)k;
    return 0;
}

int nnt_cpu_dnnl_pack(nnt_dnnl_cache *cache, int trans_b, int dtypes, int bits, int64_t m,
                      int64_t n, int64_t k, const void *b, void *packed)
{
    (void)cache, (void)trans_b, (void)dtypes, (void)bits, (void)m, (void)n, (void)k, (void)b;
    (void)packed;
    return -1;
}

int nnt_cpu_gemm_dnnl_packed(nnt_dnnl_cache *cache, int trans_a, int dtypes, int64_t m,
                             int64_t n, int64_t k, float alpha, const void *a, int64_t lda,
                             const void *packed, int64_t m_packed, float beta, float *c,
                             int64_t ldc)
{
    (void)cache, (void)trans_a, (void)dtypes, (void)m, (void)n, (void)k, (void)alpha, (void)a;
    (void)lda, (void)packed, (void)m_packed, (void)beta, (void)c, (void)ldc;
    return -1;
}

int nnt_cpu_gemm_dnnl_ksum(nnt_dnnl_cache *cache, int trans_a, int trans_b, int dtypes,
                           int64_t m, int64_t n, int nk, const int64_t *k, float alpha,
                           const void *const *a, const void *const *b, float beta, float *c,
                           int64_t ldc)
{
    (void)cache, (void)trans_a, (void)trans_b, (void)dtypes, (void)m, (void)n, (void)nk;
    (void)k, (void)alpha, (void)a, (void)b, (void)beta, (void)c, (void)ldc;
    return -1;
}

int nnt_cpu_gemm_dnnl(nnt_dnnl_cache *cache, int trans_a, int trans_b, int dtypes,
                      int64_t m, int64_t n, int64_t k, float alpha, const void *a, int64_t lda,
                      int64_t stride_a, const void *b, int64_t ldb, int64_t stride_b,
                      float beta, float *c, int64_t ldc, int64_t stride_c, int64_t batch)
{
    (void)cache, (void)trans_a, (void)trans_b, (void)dtypes, (void)m, (void)n;
    (void)k, (void)alpha, (void)a, (void)lda, (void)stride_a, (void)b, (void)ldb;
    (void)stride_b, (void)beta, (void)c, (void)ldc, (void)stride_c, (void)batch;
    return -1;
}

#endif
