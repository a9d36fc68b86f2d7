/* SPDX-License-Identifier: MIT */
/* CPU GEMM backends (issue 16): oneDNN's kernel (cpu/gemm_dnnl.c) against BLIS's
 * (nnt_cpu_gemm_f32) and a naive double reference on many shapes; its bf16-operand variant;
 * its per-thread caches; and through the public API the backend choice (NNT_GEMM) and a
 * small model's training losses under each backend. Skips (77) when built without oneDNN. */
#include "testutil.h"
#include "fixture.h"
#include "nnt_cpu.h"

/* lib/internal.h (which needs StarPU's) */
unsigned long nnt_gemm_kept_live(void);
void nnt_gemm_kept_bytes(int64_t *now, int64_t *peak);
int nnt_tensor_retype(nnt_tensor *t, nnt_dtype dtype);

#include <pthread.h>
#include <stdint.h>

/* ---- helpers --------------------------------------------------------------------------- */

struct shape {
    int ta, tb;
    int64_t m, n, k, batch;
    int64_t pad_a, pad_b, pad_c;   /* extra elements at the end of each stored row         */
    float alpha, beta;
};

struct problem {
    struct shape s;
    int64_t lda, ldb, ldc, sa, sb, sc;
    float *a, *b, *c0;   /* operands and C's initial contents                                 */
};

static float *random_floats(int64_t n, unsigned long long *state)
{
    float *x = malloc((size_t)(n > 0 ? n : 1) * sizeof *x);
    ck_assert_ptr_nonnull(x);
    for (int64_t i = 0; i < n; i++)
        x[i] = (float)(2.0 * test_rand(state) - 1.0);
    return x;
}

static struct problem make_problem(const struct shape *s, unsigned long long seed)
{
    struct problem p;
    p.s = *s;
    int64_t ar = s->ta ? s->k : s->m, ac = s->ta ? s->m : s->k;
    int64_t br = s->tb ? s->n : s->k, bc = s->tb ? s->k : s->n;
    p.lda = ac + s->pad_a;
    p.ldb = bc + s->pad_b;
    p.ldc = s->n + s->pad_c;
    p.sa = ar * p.lda + 3;   /* batch strides with a gap, to catch a dense assumption */
    p.sb = br * p.ldb + 5;
    p.sc = s->m * p.ldc + 7;
    p.a = random_floats(p.sa * s->batch, &seed);
    p.b = random_floats(p.sb * s->batch, &seed);
    p.c0 = random_floats(p.sc * s->batch, &seed);
    return p;
}

static void free_problem(struct problem *p)
{
    free(p->a);
    free(p->b);
    free(p->c0);
}

/* C's initial contents; with beta == 0 NaN, which the product must not read. */
static float *initial_c(const struct problem *p)
{
    int64_t n = p->sc * p->s.batch;
    float *c = malloc((size_t)n * sizeof *c);
    ck_assert_ptr_nonnull(c);
    for (int64_t i = 0; i < n; i++)
        c[i] = p->s.beta == 0.0f ? NAN : p->c0[i];
    return c;
}

static double a_at(const struct problem *p, int64_t bi, int64_t i, int64_t l)
{
    return p->a[bi * p->sa + (p->s.ta ? l * p->lda + i : i * p->lda + l)];
}

static double b_at(const struct problem *p, int64_t bi, int64_t l, int64_t j)
{
    return p->b[bi * p->sb + (p->s.tb ? j * p->ldb + l : l * p->ldb + j)];
}

/* Largest |got - exact| over C's elements, each divided by |alpha| sum |a||b| + |beta c0|
 * (the size of what float rounding acts on); cells outside C (padding, gaps) must be as
 * they were. */
static double scaled_error(const struct problem *p, const float *got)
{
    const struct shape *s = &p->s;
    double worst = 0.0;
    for (int64_t bi = 0; bi < s->batch; bi++)
        for (int64_t i = 0; i < s->m; i++)
            for (int64_t j = 0; j < s->n; j++) {
                double sum = 0.0, mag = 0.0;
                for (int64_t l = 0; l < s->k; l++) {
                    double t = a_at(p, bi, i, l) * b_at(p, bi, l, j);
                    sum += t;
                    mag += fabs(t);
                }
                double c0 = s->beta == 0.0f ? 0.0 : p->c0[bi * p->sc + i * p->ldc + j];
                double want = s->alpha * sum + s->beta * c0;
                double scale = fabs(s->alpha) * mag + fabs(s->beta * c0) + 1e-30;
                double e = fabs(got[bi * p->sc + i * p->ldc + j] - want) / scale;
                if (!(e <= worst))   /* NaN counts as the worst */
                    worst = isnan(e) ? INFINITY : e;
            }
    return worst;
}

/* Cells outside the m x n matrices unchanged (the padding of each row, the batch gaps). */
static void expect_outside_untouched(const struct problem *p, const float *got,
                                     const float *before, const char *what)
{
    for (int64_t bi = 0; bi < p->s.batch; bi++)
        for (int64_t off = 0; off < p->sc; off++) {
            int64_t i = off / p->ldc, j = off % p->ldc;
            if (i < p->s.m && j < p->s.n)
                continue;
            int64_t at = bi * p->sc + off;
            ck_assert_msg(memcmp(&got[at], &before[at], sizeof(float)) == 0,
                          "%s: element %lld outside C was written", what, (long long)at);
        }
}

static int run_dnnl(nnt_dnnl_cache *cache, const struct problem *p, float *c)
{
    const struct shape *s = &p->s;
    return nnt_cpu_gemm_dnnl(cache, s->ta, s->tb, 0, s->m, s->n, s->k, s->alpha, p->a,
                             p->lda, p->sa, p->b, p->ldb, p->sb, s->beta, c, p->ldc, p->sc,
                             s->batch);
}

static void run_blis(const struct problem *p, float *c)
{
    const struct shape *s = &p->s;
    nnt_cpu_gemm_f32(s->ta, s->tb, s->m, s->n, s->k, s->alpha, p->a, p->lda, p->sa, p->b,
                     p->ldb, p->sb, s->beta, c, p->ldc, p->sc, s->batch);
}

/* ---- f32: oneDNN against BLIS and the reference ------------------------------------------- */

/* Every transpose pair on: odd sizes, padded rows, batches with gaps, beta 0 / 1 / other,
 * alpha 1 / other, k 0, m 1 (BLIS's gemv path), n 1. */
static const struct shape SHAPES[] = {
    {0, 0, 7, 3, 7, 1, 0, 0, 0, 1.0f, 1.0f},     {0, 1, 13, 17, 19, 1, 1, 2, 3, 1.0f, 0.0f},
    {1, 0, 33, 5, 64, 2, 0, 3, 1, 0.5f, 1.0f},   {1, 1, 1, 29, 31, 3, 2, 0, 0, 1.0f, 0.0f},
    {0, 1, 1, 40, 24, 1, 0, 0, 0, 1.0f, 1.0f},   {0, 0, 65, 1, 33, 1, 1, 1, 1, 1.0f, -0.75f},
    {0, 0, 5, 6, 0, 2, 0, 0, 2, 1.0f, 0.0f},     {1, 0, 9, 4, 0, 1, 0, 0, 0, 1.0f, 2.0f},
    {0, 1, 128, 96, 64, 1, 0, 0, 0, 0.125f, 0.0f}, {1, 0, 96, 64, 128, 1, 4, 4, 4, 1.0f, 1.0f},
    {0, 0, 64, 80, 96, 4, 0, 0, 0, 1.0f, 0.0f},  {1, 1, 31, 37, 41, 2, 3, 5, 7, -1.0f, 0.5f},
    {0, 1, 12, 12, 8, 6, 0, 0, 0, 0.353553f, 0.0f}, {0, 0, 2, 300, 3, 1, 0, 0, 0, 1.0f, 1.0f},
};
#define NSHAPES ((int)(sizeof SHAPES / sizeof SHAPES[0]))

/* Measured on Zen 3 (oneDNN 2.6.3, avx2; BLIS 0.9 zen3) over SHAPES: largest scaled error
 * 2.1e-7 for oneDNN and for BLIS (float rounding: a few units of 2^-24 relative to
 * sum |a||b|). A wrong transpose, stride or beta gives errors of order 1. */
#define F32_TOL 2e-6

static void check_shape(nnt_dnnl_cache *cache, const struct shape *s, int idx, double *worst)
{
    struct problem p = make_problem(s, 1000 + (unsigned long long)idx);
    float *cd = initial_c(&p), *cb = initial_c(&p), *before = initial_c(&p);
    ck_assert_int_eq(run_dnnl(cache, &p, cd), 0);
    run_blis(&p, cb);
    double ed = scaled_error(&p, cd), eb = scaled_error(&p, cb);
    char what[96];
    snprintf(what, sizeof what, "shape %d (%s%s m %lld n %lld k %lld batch %lld beta %g)", idx,
             s->ta ? "T" : "N", s->tb ? "T" : "N", (long long)s->m, (long long)s->n,
             (long long)s->k, (long long)s->batch, s->beta);
    EXPECT_TOL(ed, F32_TOL, "oneDNN %s against the reference", what);
    EXPECT_TOL(eb, F32_TOL, "BLIS %s against the reference", what);
    expect_outside_untouched(&p, cd, before, what);
    worst[0] = ed > worst[0] ? ed : worst[0];
    worst[1] = eb > worst[1] ? eb : worst[1];
    free(cd);
    free(cb);
    free(before);
    free_problem(&p);
}

/* _i 0: B as stored; 1: B reordered first into the layout the matmul prefers (the path of
 * AVX-512 hosts, whose matmul wants B blocked; here it is forced). */
START_TEST(test_f32_shapes)
{
    nnt_cpu_dnnl_reorder_plain(_i);
    nnt_dnnl_cache *cache = nnt_cpu_dnnl_cache_create();
    ck_assert_ptr_nonnull(cache);
    double worst[2] = {0.0, 0.0};
    for (int i = 0; i < NSHAPES; i++)
        check_shape(cache, &SHAPES[i], i, worst);
    for (int i = NSHAPES - 1; i >= 0; i--)   /* again, from the cache, in another order */
        check_shape(cache, &SHAPES[i], i, worst);
    printf("test_gemm_backends f32 (%s B): largest scaled error oneDNN %.2e, BLIS %.2e\n",
           _i ? "reordered" : "stored", worst[0], worst[1]);
    nnt_cpu_dnnl_cache_destroy(cache);
    nnt_cpu_dnnl_reorder_plain(0);
}
END_TEST

/* More distinct products than a cache holds, twice: entries are replaced and rebuilt, and
 * every result stays right. */
START_TEST(test_cache_replacement)
{
    nnt_dnnl_cache *cache = nnt_cpu_dnnl_cache_create();
    double worst[2] = {0.0, 0.0};
    for (int round = 0; round < 2; round++)
        for (int i = 0; i < 70; i++) {
            struct shape s = {i % 2, (i / 2) % 2, 3 + i, 5 + i % 7, 4 + i % 5, 1, 0, 0, 0,
                              1.0f, (float)(i % 3 == 0)};
            check_shape(cache, &s, i, worst);
        }
    nnt_cpu_dnnl_cache_destroy(cache);
}
END_TEST

/* ---- oneDNN's cache handing out another descriptor's primitive ------------------------------ */

struct other_product {
    const struct problem *p;
    int rc;
};

static void run_other(void *arg)   /* as another thread would, between descriptor and primitive */
{
    struct other_product *o = arg;
    nnt_dnnl_cache *cache = nnt_cpu_dnnl_cache_create();
    float *c = initial_c(o->p);
    o->rc = cache ? run_dnnl(cache, o->p, c) : -1;
    free(c);
    nnt_cpu_dnnl_cache_destroy(cache);
}

/* A (m, 1) stored as a column (lda 1) and as a row (A^T, lda m) is one key to oneDNN's
 * primitive cache (a stride of a dimension of size 1 does not count), but on AVX-512 its
 * brgemm matmul copies the transposed A and asks for more scratchpad (m 5: 1088 bytes
 * against 640). When the transposed product's primitive enters oneDNN's cache between
 * the other's descriptor and primitive (two workers starting at once), the primitive
 * handed out needs more scratchpad than that descriptor said: sized by the descriptor,
 * it wrote past its scratchpad into the reordered B, and a column of the product came out
 * wrong. _i: B as stored, or reordered (the path of AVX-512 hosts, forced). The shapes are
 * used by no other test, so oneDNN's cache starts without them. */
START_TEST(test_cached_primitive)
{
    nnt_cpu_dnnl_reorder_plain(_i);
    struct shape col = {0, 0, 5 + 2 * _i, 24, 1, 1, 0, 0, 0, 0.3125f, 1.0f};
    struct shape row = col;
    row.ta = 1;
    struct problem pc = make_problem(&col, 31), pr = make_problem(&row, 32);
    struct other_product other = {&pr, -1};
    nnt_dnnl_cache *cache = nnt_cpu_dnnl_cache_create();
    float *c = initial_c(&pc), *before = initial_c(&pc);
    nnt_cpu_dnnl_between(run_other, &other);
    ck_assert_int_eq(run_dnnl(cache, &pc, c), 0);
    nnt_cpu_dnnl_between(NULL, NULL);
    ck_assert_int_eq(other.rc, 0);
    EXPECT_TOL(scaled_error(&pc, c), F32_TOL, "the column product after the row one");
    expect_outside_untouched(&pc, c, before, "the column product");
    free(c);
    free(before);
    free_problem(&pc);
    free_problem(&pr);
    nnt_cpu_dnnl_cache_destroy(cache);
    nnt_cpu_dnnl_reorder_plain(0);
}
END_TEST

/* ---- threads: one cache each, the same primitive at once ----------------------------------- */

struct thread_job {
    struct problem *p;
    float *c;
    int rc;
};

static void *thread_main(void *arg)
{
    struct thread_job *job = arg;
    nnt_dnnl_cache *cache = nnt_cpu_dnnl_cache_create();
    job->rc = cache ? 0 : -1;
    for (int r = 0; r < 20 && job->rc == 0; r++)
        job->rc = run_dnnl(cache, job->p, job->c);
    nnt_cpu_dnnl_cache_destroy(cache);
    return NULL;
}

START_TEST(test_threads)
{
    struct shape s = {0, 1, 96, 160, 200, 2, 0, 0, 0, 1.0f, 0.0f};
    struct problem p = make_problem(&s, 77);
    struct thread_job job[2];
    pthread_t th[2];
    for (int t = 0; t < 2; t++) {
        job[t] = (struct thread_job){&p, initial_c(&p), -1};
        ck_assert_int_eq(pthread_create(&th[t], NULL, thread_main, &job[t]), 0);
    }
    for (int t = 0; t < 2; t++) {
        pthread_join(th[t], NULL);
        ck_assert_int_eq(job[t].rc, 0);
        EXPECT_TOL(scaled_error(&p, job[t].c), F32_TOL, "thread %d's product", t);
        free(job[t].c);
    }
    free_problem(&p);
}
END_TEST

/* ---- bf16 operands ----------------------------------------------------------------------- */

/* _i: which operands are stored in bf16 (0 neither, 1 A, 2 B, 3 both), the products bf16
 * (NNT_DNNL_BF16); a float operand is rounded to bf16 by the kernel. Against BLIS on the
 * operands expanded to float: the same products, summed in another order. On a CPU without
 * bf16 dot products oneDNN either has no bf16 matmul (AVX2: the kernel declines, -1, and
 * leaves C alone) or emulates one (AVX-512 without BF16, e.g. Skylake: the same products);
 * nnt itself expands bf16 operands there (nnt_cpu_dnnl_bf16_native), so neither case is
 * on its path. */
#define BF16_TOL 1e-6   /* scaled, as F32_TOL: float summation order only (Zen 4: 2.45e-7) */
START_TEST(test_bf16_operands)
{
    int a16 = _i & 1, b16 = (_i >> 1) & 1;
    const int64_t m = 37, n = 45, k = 70, batch = 2;
    unsigned long long seed = 9;
    float *af = random_floats(batch * m * k, &seed), *bf = random_floats(batch * n * k, &seed);
    uint16_t *ah = malloc((size_t)(batch * m * k) * 2), *bh = malloc((size_t)(batch * n * k) * 2);
    nnt_cpu_f32_to_bf16(batch * m * k, af, ah);
    nnt_cpu_f32_to_bf16(batch * n * k, bf, bh);
    float *ax = malloc((size_t)(batch * m * k) * 4), *bx = malloc((size_t)(batch * n * k) * 4);
    nnt_cpu_bf16_to_f32(batch * m * k, ah, ax);   /* what the expanded path multiplies */
    nnt_cpu_bf16_to_f32(batch * n * k, bh, bx);
    float *cd = calloc((size_t)(batch * m * n), 4), *cb = calloc((size_t)(batch * m * n), 4);
    nnt_dnnl_cache *cache = nnt_cpu_dnnl_cache_create();
    int dtypes = NNT_DNNL_BF16 | (a16 ? NNT_DNNL_A_BF16 : 0) | (b16 ? NNT_DNNL_B_BF16 : 0);
    int rc = nnt_cpu_gemm_dnnl(cache, 0, 1, dtypes, m, n, k, 1.0f, a16 ? (void *)ah : af, k,
                               m * k, b16 ? (void *)bh : bf, k, n * k, 0.0f, cd, n, m * n, batch);
    if (!nnt_cpu_dnnl_bf16_isa() && rc == -1) {
        printf("test_gemm_backends bf16: oneDNN ISA %s has no bf16 dot products: the kernel "
               "declined as it may; the bf16 products themselves are not tested here\n",
               nnt_cpu_dnnl_isa());
        for (int64_t i = 0; i < batch * m * n; i++)
            ck_assert_msg(cd[i] == 0.0f, "C written by a declined bf16 product");
    } else {   /* native, or emulated by oneDNN (avx512_core): the same products */
        ck_assert_int_eq(rc, 0);
        nnt_cpu_gemm_f32(0, 1, m, n, k, 1.0f, ax, k, m * k, bx, k, n * k, 0.0f, cb, n, m * n,
                         batch);
        double worst = 0.0;
        for (int64_t i = 0; i < batch * m * n; i++) {
            double e = fabs((double)cd[i] - cb[i]) / (fabs(cb[i]) + 1.0);
            worst = e > worst ? e : worst;
        }
        EXPECT_TOL(worst, BF16_TOL, "bf16 operands (A %d, B %d) against the expanded product",
                   a16, b16);
        printf("test_gemm_backends bf16 (A %d, B %d): %.2e from the expanded product%s\n", a16,
               b16, worst, nnt_cpu_dnnl_bf16_isa() ? "" : " (bf16 emulated by oneDNN)");
    }
    nnt_cpu_dnnl_cache_destroy(cache);
    free(af), free(bf), free(ah), free(bh), free(ax), free(bx), free(cd), free(cb);
}
END_TEST

/* ---- B as stored (NNT_GEMM_BF16_B) --------------------------------------------------------- */

/* A bf16 product on a B larger than a core's L2 cache, with B reordered into the blocked
 * layout first (reorder) and as stored (stored): where oneDNN's avx512_core_bf16 kernels
 * measure which is faster (the default there), the same bits (nnt relies on it: the same
 * kernel, the same order of the sums); elsewhere within the bf16 tolerance. Both
 * orientations of B (x W^T and dY W), a float A rounded by the kernel and a bf16 A, m 512, 128
 * and a short 61; and stored taken only for such products (the default's first run of a
 * shape is its first trial, as stored: measurements forgotten before it). */
static float *b_stored_product(const char *mode, int tb, int a16, int64_t m, int64_t n,
                               int64_t k, const void *a, const uint16_t *b, size_t *l2)
{
    char why[128];
    setenv("NNT_GEMM_BF16_B", mode, 1);
    ck_assert_int_eq(nnt_cpu_dnnl_choose_b(why, sizeof why), 0);
    nnt_cpu_dnnl_b_forget(NULL);
    *l2 = nnt_cpu_dnnl_bf16_b_stored();
    nnt_dnnl_cache *cache = nnt_cpu_dnnl_cache_create();   /* no primitive of the other mode */
    ck_assert_ptr_nonnull(cache);
    unsigned long before = nnt_cpu_dnnl_stored_matmuls();
    float *c = calloc((size_t)(m * n), sizeof *c);
    ck_assert_int_eq(nnt_cpu_gemm_dnnl(cache, 0, tb, NNT_DNNL_BF16 | NNT_DNNL_B_BF16 |
                                       (a16 ? NNT_DNNL_A_BF16 : 0), m, n, k, 1.0f, a, k, 0, b,
                                       tb ? k : n, 0, 0.0f, c, n, 0, 1), 0);
    /* the matmul took B as stored exactly when the mode says so (on this B and m) */
    ck_assert_uint_eq(nnt_cpu_dnnl_stored_matmuls() - before, *l2 > 0);
    nnt_cpu_dnnl_cache_destroy(cache);
    return c;
}

START_TEST(test_b_stored)
{
    if (!nnt_cpu_dnnl_bf16_isa()) {
        printf("test_gemm_backends B as stored: oneDNN ISA %s has no bf16 dot products: not "
               "used\n", nnt_cpu_dnnl_isa());
        return;
    }
    const int tb = _i & 1, a16 = (_i >> 1) & 1;
    const int64_t ms[3] = {128, 61, 512}, m = ms[_i >> 2], n = 1024, k = 2048;   /* B 4 MiB */
    unsigned long long seed = 0x73746f72ULL + (unsigned long long)_i;
    float *af = random_floats(m * k, &seed), *bf = random_floats(k * n, &seed);
    uint16_t *ah = malloc((size_t)(m * k) * 2), *bh = malloc((size_t)(k * n) * 2);
    nnt_cpu_f32_to_bf16(m * k, af, ah);
    nnt_cpu_f32_to_bf16(k * n, bf, bh);
    const void *a = a16 ? (const void *)ah : (const void *)af;
    const char *saved = getenv("NNT_GEMM_BF16_B");
    char *restore = saved ? strdup(saved) : NULL;
    size_t l2_reorder = 0, l2_stored = 0, l2_default = 0;
    float *reorder = b_stored_product("reorder", tb, a16, m, n, k, a, bh, &l2_reorder);
    float *stored = b_stored_product("stored", tb, a16, m, n, k, a, bh, &l2_stored);
    float *dflt = b_stored_product("", tb, a16, m, n, k, a, bh, &l2_default);
    ck_assert_uint_eq(l2_reorder, 0);
    ck_assert_uint_gt(l2_stored, 0);
    int relied = strcmp(nnt_cpu_dnnl_isa(), "avx512_core_bf16") == 0;
    ck_assert_msg(relied == (l2_default > 0), "the default takes B as stored on %s: %d",
                  nnt_cpu_dnnl_isa(), l2_default > 0);
    double worst = 0.0;
    int64_t differ = 0;
    for (int64_t i = 0; i < m * n; i++) {
        double e = fabs((double)stored[i] - reorder[i]) / (fabs(reorder[i]) + 1.0);
        worst = e > worst ? e : worst;
        differ += stored[i] != reorder[i];
    }
    if (relied)
        ck_assert_msg(differ == 0, "B as stored: %lld of %lld elements differ from the reordered "
                      "B's (worst %.2e)", (long long)differ, (long long)(m * n), worst);
    else
        EXPECT_TOL(worst, BF16_TOL, "B as stored against the reordered B on %s",
                   nnt_cpu_dnnl_isa());
    ck_assert_int_eq(memcmp(dflt, relied ? stored : reorder, (size_t)(m * n) * 4), 0);
    printf("test_gemm_backends B as stored (tb %d, A bf16 %d, m %lld): %lld elements differ "
           "from the reordered B's on %s (L2 %zu KiB)\n", tb, a16, (long long)m,
           (long long)differ, nnt_cpu_dnnl_isa(), l2_stored >> 10);
    char why[128];
    setenv("NNT_GEMM_BF16_B", "blocked", 1);   /* not a value */
    ck_assert_int_eq(nnt_cpu_dnnl_choose_b(why, sizeof why), -1);
    ck_assert_msg(strstr(why, "NNT_GEMM_BF16_B") != NULL, "%s", why);
    if (restore)   /* the process's own choice again */
        setenv("NNT_GEMM_BF16_B", restore, 1);
    else
        unsetenv("NNT_GEMM_BF16_B");
    ck_assert_int_eq(nnt_cpu_dnnl_choose_b(why, sizeof why), 0);
    free(restore);
    free(af), free(bf), free(ah), free(bh), free(reorder), free(stored), free(dflt);
}
END_TEST

/* The measured choice of B's layout (the default with oneDNN's avx512_core_bf16 kernels):
 * each shape's first 4 products alternate between B as stored and reordered, and the shape
 * keeps the faster (trial times replaced by fakes, so the verdicts are known); a shape
 * without a verdict is not packed, nor does the pack's question use up its trials; the
 * products give the same bits whichever way they ran; real timings give a verdict too. */
static double stored_slower(int stored, double measured)
{
    (void)measured;
    return stored ? 2e-3 : 1e-3;
}
static double stored_faster(int stored, double measured)
{
    (void)measured;
    return stored ? 1e-3 : 2e-3;
}

static void b_measured_runs(int tb, int64_t m, int64_t n, int64_t k, int runs, const float *a,
                            const uint16_t *b, float *c0, unsigned long *stored_built)
{
    nnt_dnnl_cache *cache = nnt_cpu_dnnl_cache_create();
    ck_assert_ptr_nonnull(cache);
    unsigned long before = nnt_cpu_dnnl_stored_matmuls();
    float *c = malloc((size_t)(m * n) * sizeof *c);
    ck_assert_ptr_nonnull(c);
    for (int r = 0; r < runs; r++) {
        ck_assert_int_eq(nnt_cpu_gemm_dnnl(cache, 0, tb, NNT_DNNL_BF16 | NNT_DNNL_B_BF16, m, n, k,
                                           1.0f, a, k, 0, b, tb ? k : n, 0, 0.0f, c, n, 0, 1),
                         0);
        if (r == 0 && c0[0] != c0[0])   /* NaN: the first result of the shape, the reference */
            memcpy(c0, c, (size_t)(m * n) * sizeof *c);
        else
            ck_assert_msg(memcmp(c, c0, (size_t)(m * n) * sizeof *c) == 0,
                          "run %d of (tb %d, m %lld) differs from the first", r, tb,
                          (long long)m);
    }
    *stored_built = nnt_cpu_dnnl_stored_matmuls() - before;
    nnt_cpu_dnnl_cache_destroy(cache);
    free(c);
}

/* NNT_GEMM_BF16_B set to value (NULL: unset) and the layout mode chosen again; returns the
 * value the variable had (NULL: unset), for b_mode_restore. */
static char *b_mode_set(const char *value)
{
    char why[128];
    const char *saved = getenv("NNT_GEMM_BF16_B");
    char *old = saved ? strdup(saved) : NULL;
    if (value)
        setenv("NNT_GEMM_BF16_B", value, 1);
    else
        unsetenv("NNT_GEMM_BF16_B");
    ck_assert_int_eq(nnt_cpu_dnnl_choose_b(why, sizeof why), 0);
    return old;
}

/* The variable as b_mode_set found it, its mode chosen again, no shape measured */
static void b_mode_restore(char *old)
{
    char *unused = b_mode_set(old);
    nnt_cpu_dnnl_b_forget(NULL);
    free(unused);
    free(old);
}

START_TEST(test_b_measured)
{
    char *restore = b_mode_set(NULL);
    if (nnt_cpu_dnnl_b_mode() != NNT_DNNL_B_MEASURED) {
        printf("test_gemm_backends B measured: oneDNN ISA %s: B's layout not measured (mode "
               "%d)\n", nnt_cpu_dnnl_isa(), nnt_cpu_dnnl_b_mode());
        ck_assert_int_eq(nnt_cpu_dnnl_b_mode(), NNT_DNNL_B_REORDER);
    } else {
        /* B over L2 in bf16: 2 MiB over AMD Zen 4's 1 MiB, 4 MiB over an Intel Xeon's 2 */
        const int64_t m = 64, k = 1024;
        int64_t n = 1024;
        while ((size_t)(n * k) * 2 <= nnt_cpu_dnnl_bf16_b_stored())
            n *= 2;
        unsigned long long seed = 0x6d656173ULL;
        float *a = random_floats(m * k, &seed), *bf = random_floats(k * n, &seed);
        uint16_t *b = malloc((size_t)(k * n) * 2);
        float *c0 = malloc((size_t)(m * n) * sizeof *c0);
        nnt_cpu_f32_to_bf16(k * n, bf, b);
        for (int tb = 0; tb < 2; tb++) {
            c0[0] = NAN;
            unsigned long built = 0;
            /* stored slower: trials stored, reordered, stored, reordered; kept: reordered */
            nnt_cpu_dnnl_b_forget(stored_slower);
            ck_assert_int_eq(nnt_cpu_dnnl_b_verdict(tb, 1, m, n, k), -1);
            ck_assert_uint_eq(nnt_cpu_dnnl_pack_bytes(tb, NNT_DNNL_BF16, m, n, k), 0);
            b_measured_runs(tb, m, n, k, 3, a, b, c0, &built);
            ck_assert_int_eq(nnt_cpu_dnnl_b_verdict(tb, 1, m, n, k), -1);   /* 3 of 4 runs */
            ck_assert_uint_eq(built, 1);   /* one entry as stored, made by the first trial */
            b_measured_runs(tb, m, n, k, 3, a, b, c0, &built);
            ck_assert_int_eq(nnt_cpu_dnnl_b_verdict(tb, 1, m, n, k), 0);
            ck_assert_uint_eq(built, 0);   /* the 4th trial and 2 runs: all reordered */
            ck_assert_uint_gt(nnt_cpu_dnnl_pack_bytes(tb, NNT_DNNL_BF16, m, n, k), 0);
            /* stored faster: kept as stored, never packed */
            nnt_cpu_dnnl_b_forget(stored_faster);
            b_measured_runs(tb, m, n, k, 4, a, b, c0, &built);
            ck_assert_int_eq(nnt_cpu_dnnl_b_verdict(tb, 1, m, n, k), 1);
            ck_assert_uint_eq(nnt_cpu_dnnl_pack_bytes(tb, NNT_DNNL_BF16, m, n, k), 0);
            b_measured_runs(tb, m, n, k, 2, a, b, c0, &built);
            ck_assert_uint_eq(built, 1);
            /* the real clock: some verdict after 4 runs */
            nnt_cpu_dnnl_b_forget(NULL);
            b_measured_runs(tb, m, n, k, 4, a, b, c0, &built);
            int v = nnt_cpu_dnnl_b_verdict(tb, 1, m, n, k);
            ck_assert_msg(v == 0 || v == 1, "no verdict after 4 runs: %d", v);
            printf("test_gemm_backends B measured (tb %d, m %lld, n %lld, k %lld): this CPU "
                   "keeps B %s\n", tb, (long long)m, (long long)n, (long long)k,
                   v ? "as stored" : "reordered");
        }
        /* B within L2: never measured, its blocked layout packed */
        nnt_cpu_dnnl_b_forget(NULL);
        ck_assert_uint_gt(nnt_cpu_dnnl_pack_bytes(1, NNT_DNNL_BF16, 64, 256, 256), 0);
        free(a), free(bf), free(b), free(c0);
    }
    b_mode_restore(restore);
}
END_TEST

/* Every unpacked product's shape is measured, float products and small B tiles too (the
 * attention kernels' products: 64 rows against a key tile, A transposed for dk and dv, alpha
 * and beta): both ways give the same bits, the verdict is kept per dtype, and a float verdict
 * leaves the bf16 products of that shape unmeasured. */
struct measured_case {
    int bf16, a16, ta, tb;   /* bf16 products (a16: A already bf16); A and B transposed */
    int64_t m, n, k, lda, ldc;
    float alpha, beta;
};
static const struct measured_case measured_cases[] = {
    {0, 0, 0, 1, 64, 256, 64, 64, 256, 0.125f, 0.0f},    /* scores: q k^T               */
    {0, 0, 0, 0, 64, 64, 191, 256, 64, 1.0f, 1.0f},      /* o += p v, p's rows of 256   */
    {0, 0, 1, 0, 191, 64, 64, 256, 64, 0.125f, 1.0f},    /* dk += ds^T q                */
    {0, 0, 0, 1, 61, 63, 64, 64, 63, 1.0f, 0.0f},        /* odd sizes                   */
    {0, 0, 0, 0, 512, 768, 768, 768, 768, 1.0f, 1.0f},   /* a model's tile, B 2.25 MiB  */
    {1, 0, 0, 1, 64, 255, 64, 64, 255, 0.125f, 0.0f},    /* bf16, float operands        */
    {1, 1, 1, 0, 256, 64, 64, 256, 64, 1.0f, 1.0f},      /* bf16 A, transposed          */
};

static void measured_case_runs(const struct measured_case *mc, int runs, const void *a,
                               const void *b, const float *c_in, float *c0,
                               unsigned long *stored_built)
{
    const int64_t m = mc->m, n = mc->n, k = mc->k, ldb = mc->tb ? k : n;
    const int dtypes = mc->bf16 ? NNT_DNNL_BF16 | NNT_DNNL_B_BF16 | (mc->a16 ? NNT_DNNL_A_BF16 : 0)
                                : 0;
    nnt_dnnl_cache *cache = nnt_cpu_dnnl_cache_create();
    ck_assert_ptr_nonnull(cache);
    unsigned long before = nnt_cpu_dnnl_stored_matmuls();
    float *c = malloc((size_t)(m * mc->ldc) * sizeof *c);
    ck_assert_ptr_nonnull(c);
    for (int r = 0; r < runs; r++) {
        memcpy(c, c_in, (size_t)(m * mc->ldc) * sizeof *c);
        ck_assert_int_eq(nnt_cpu_gemm_dnnl(cache, mc->ta, mc->tb, dtypes, m, n, k, mc->alpha, a,
                                           mc->lda, 0, b, ldb, 0, mc->beta, c, mc->ldc, 0, 1),
                         0);
        if (c0[0] != c0[0])   /* NaN: the first result of the shape, the reference */
            memcpy(c0, c, (size_t)(m * mc->ldc) * sizeof *c);
        else
            ck_assert_msg(memcmp(c, c0, (size_t)(m * mc->ldc) * sizeof *c) == 0,
                          "run %d of (%lld, %lld, %lld) differs from the first", r,
                          (long long)m, (long long)n, (long long)k);
    }
    *stored_built = nnt_cpu_dnnl_stored_matmuls() - before;
    nnt_cpu_dnnl_cache_destroy(cache);
    free(c);
}

START_TEST(test_b_measured_small)
{
    const struct measured_case *mc = &measured_cases[_i];
    char *restore = b_mode_set(NULL);
    if (nnt_cpu_dnnl_b_mode() != NNT_DNNL_B_MEASURED || (mc->bf16 && !nnt_cpu_dnnl_bf16_isa())) {
        printf("test_gemm_backends B measured, case %d: oneDNN ISA %s: not measured (mode %d)\n",
               _i, nnt_cpu_dnnl_isa(), nnt_cpu_dnnl_b_mode());
    } else {
        const int64_t m = mc->m, n = mc->n, k = mc->k, tb = mc->tb;
        const int64_t a_len = (mc->ta ? k : m) * mc->lda;
        unsigned long long seed = 0x736d616cULL + (unsigned long long)_i;
        float *af = random_floats(a_len, &seed), *bf = random_floats(k * n, &seed);
        float *c_in = random_floats(m * mc->ldc, &seed), *c0 = malloc((size_t)(m * mc->ldc) * 4);
        uint16_t *ah = malloc((size_t)a_len * 2), *bh = malloc((size_t)(k * n) * 2);
        nnt_cpu_f32_to_bf16(a_len, af, ah);
        nnt_cpu_f32_to_bf16(k * n, bf, bh);
        const void *a = mc->a16 ? (const void *)ah : (const void *)af;
        const void *b = mc->bf16 ? (const void *)bh : (const void *)bf;
        /* does the matmul (of A as stored, lda k) want B blocked, so that a run as stored is
         * a matmul made so? */
        int blocked = nnt_cpu_dnnl_pack_bytes((int)tb, mc->bf16 ? NNT_DNNL_BF16 : 0, m, n, k) > 0;
        unsigned long built = 0;
        c0[0] = NAN;
        nnt_cpu_dnnl_b_forget(stored_faster);
        measured_case_runs(mc, 6, a, b, c_in, c0, &built);
        ck_assert_int_eq(nnt_cpu_dnnl_b_verdict((int)tb, mc->bf16, m, n, k), 1);
        ck_assert_int_eq(nnt_cpu_dnnl_b_verdict((int)tb, !mc->bf16, m, n, k), -1);
        if (!mc->ta && mc->lda == k)   /* A as pack_bytes asks: the 2 trials' entry */
            ck_assert_uint_eq(built, (unsigned long)blocked);
        else
            ck_assert_uint_le(built, 1);
        nnt_cpu_dnnl_b_forget(stored_slower);
        measured_case_runs(mc, 6, a, b, c_in, c0, &built);
        ck_assert_int_eq(nnt_cpu_dnnl_b_verdict((int)tb, mc->bf16, m, n, k), 0);
        printf("test_gemm_backends B measured, case %d (%s, ta %d, tb %d, %lld x %lld x %lld): "
               "B %s, the same bits both ways\n", _i, mc->bf16 ? "bf16" : "float", mc->ta,
               mc->tb, (long long)m, (long long)n, (long long)k,
               blocked ? "wanted blocked" : "wanted as stored");
        free(af), free(bf), free(c_in), free(c0), free(ah), free(bh);
    }
    b_mode_restore(restore);
}
END_TEST

/* The per-thread cache of primitives: a shape run again is found (no primitive made again),
 * and more shapes than it keeps replace the least recently used ones, every product right
 * (against the same product on BLIS) while entries come and go. */
static void cache_product(nnt_dnnl_cache *cache, int64_t n, const float *a, const float *b,
                          float *c, float *want)
{
    const int64_t m = 3, k = 5;   /* A (m, k), B (n, k) transposed, n the shape's mark */
    ck_assert_int_eq(nnt_cpu_gemm_dnnl(cache, 0, 1, 0, m, n, k, 1.0f, a, k, 0, b, k, 0, 0.0f, c,
                                       n, 0, 1), 0);
    nnt_cpu_gemm_f32(0, 1, m, n, k, 1.0f, a, k, 0, b, k, 0, 0.0f, want, n, 0, 1);
    for (int64_t i = 0; i < m * n; i++)
        ck_assert_msg(fabsf(c[i] - want[i]) <= 1e-5f * (1.0f + fabsf(want[i])),
                      "n %lld element %lld: %g against %g", (long long)n, (long long)i,
                      (double)c[i], (double)want[i]);
}

START_TEST(test_dnnl_cache)
{
    if (!nnt_cpu_dnnl_available()) {
        printf("test_gemm_backends primitive cache: no oneDNN\n");
        return;
    }
    const int slots = nnt_cpu_dnnl_cache_slots(), shapes = slots + slots / 2;
    char *restore = b_mode_set("reorder");   /* one entry a shape: none measured both ways */
    unsigned long long seed = 0x63616368ULL;
    float *a = random_floats(3 * 5, &seed), *b = random_floats((int64_t)shapes * 5, &seed);
    float *c = malloc((size_t)shapes * 3 * sizeof *c), *want = malloc((size_t)shapes * 3 * 4);
    nnt_dnnl_cache *cache = nnt_cpu_dnnl_cache_create();
    ck_assert_ptr_nonnull(cache);
    for (int round = 0; round < 3; round++)   /* 8 shapes: made once, then found */
        for (int64_t n = 1; n <= 8; n++)
            cache_product(cache, n, a, b, c, want);
    ck_assert_uint_eq(nnt_cpu_dnnl_cache_builds(cache), 8);
    for (int64_t n = 1; n <= shapes; n++)   /* more than it keeps: n 1 to 8 found again */
        cache_product(cache, n, a, b, c, want);
    ck_assert_uint_eq(nnt_cpu_dnnl_cache_builds(cache), (unsigned long)shapes);
    for (int64_t n = shapes; n > shapes - slots; n--)   /* the last `slots` shapes: all kept */
        cache_product(cache, n, a, b, c, want);
    ck_assert_uint_eq(nnt_cpu_dnnl_cache_builds(cache), (unsigned long)shapes);
    cache_product(cache, 1, a, b, c, want);   /* replaced by now: made again */
    ck_assert_uint_eq(nnt_cpu_dnnl_cache_builds(cache), (unsigned long)shapes + 1);
    printf("test_gemm_backends primitive cache: %d slots, %d shapes, %lu primitives made\n",
           slots, shapes, nnt_cpu_dnnl_cache_builds(cache));
    nnt_cpu_dnnl_cache_destroy(cache);
    free(a), free(b), free(c), free(want);
    b_mode_restore(restore);
}
END_TEST

/* ---- B packed once (nnt_cpu_dnnl_pack) --------------------------------------------------- */

/* A product on a packed B must give the bits of the same product on B as stored: the same
 * kernel on the same rounded operands, only B's reorder happens elsewhere. For any m (the
 * layout is chosen for m_packed rows), both orientations of B, a bf16 or float B, bf16
 * products or float products on operands rounded to `bits`, a transposed A, alpha, beta.
 * Plain layouts are packed too here (nnt_cpu_dnnl_reorder_plain), so that hosts whose matmul
 * takes B as stored (AVX2) run the same code. */
struct pack_case {
    int ta, tb, b16, bf16, bits;   /* bf16: bf16 products; bits: float products' rounding */
    int64_t m, m_packed, n, k;
    float alpha, beta;
};

static const struct pack_case PACK_CASES[] = {
    {0, 1, 1, 1, 0, 128, 128, 96, 80, 1.0f, 0.0f},   /* forward X W^T on the bf16 copy */
    {0, 0, 1, 1, 0, 61, 64, 70, 33, 1.0f, 1.0f},     /* dX = dY W, a short last row tile */
    {1, 0, 0, 1, 0, 40, 40, 37, 50, 0.5f, 1.0f},     /* dW = dY^T X, float X rounded by the pack */
    {0, 1, 0, 0, 0, 1, 32, 45, 64, 1.0f, 0.0f},      /* float products, one row */
    {0, 1, 0, 0, 7, 50, 50, 33, 70, 1.0f, -0.5f},    /* bf16 precision without bf16 products */
    {1, 1, 1, 0, 0, 20, 48, 100, 17, 2.0f, 0.0f},    /* a bf16 B expanded for float products */
    {0, 0, 0, 0, 10, 9, 16, 64, 128, 1.0f, 1.0f},    /* TF32 rounding */
};
#define NPACK ((int)(sizeof PACK_CASES / sizeof PACK_CASES[0]))

static float *rounded(const float *x, int64_t n, int bits)
{
    float *y = malloc((size_t)n * sizeof *y);
    ck_assert_ptr_nonnull(y);
    if (bits)
        nnt_cpu_round_f32(n, bits, x, y);
    else
        memcpy(y, x, (size_t)n * sizeof *y);
    return y;
}

START_TEST(test_packed)
{
    const struct pack_case *pc = &PACK_CASES[_i];
    const int64_t m = pc->m, n = pc->n, k = pc->k;
    nnt_cpu_dnnl_reorder_plain(1);
    nnt_dnnl_cache *cache = nnt_cpu_dnnl_cache_create();
    size_t bytes =
        nnt_cpu_dnnl_pack_bytes(pc->tb, pc->bf16 ? NNT_DNNL_BF16 : 0, pc->m_packed, n, k);
    if (pc->bf16 && !nnt_cpu_dnnl_bf16_isa()) {
        ck_assert_msg(bytes == 0, "bf16 products packed for on a CPU without them");
        printf("test_gemm_backends packed case %d: no bf16 products on oneDNN ISA %s: not "
               "packed, as it must\n", _i, nnt_cpu_dnnl_isa());
        nnt_cpu_dnnl_cache_destroy(cache);
        nnt_cpu_dnnl_reorder_plain(0);
        return;
    }
    ck_assert_msg(bytes >= (size_t)(n * k) * (pc->bf16 ? 2 : 4), "case %d: %zu packed bytes",
                  _i, bytes);
    unsigned long long seed = 40 + (unsigned long long)_i;
    float *af = random_floats(m * k, &seed), *bf = random_floats(n * k, &seed);
    float *c0 = random_floats(m * n, &seed);
    uint16_t *bh = malloc((size_t)(n * k) * 2);
    nnt_cpu_f32_to_bf16(n * k, bf, bh);
    const void *b_src = pc->b16 ? (const void *)bh : bf;
    /* the stored-B product's operands, rounded as the packed side rounds them */
    float *a_op = rounded(af, m * k, pc->bf16 ? 0 : pc->bits), *b_op = NULL;
    if (!pc->bf16 && pc->b16) {
        b_op = malloc((size_t)(n * k) * 4);
        nnt_cpu_bf16_to_f32(n * k, bh, b_op);
    } else if (!pc->bf16) {
        b_op = rounded(bf, n * k, pc->bits);
    }
    int dt_stored = pc->bf16 ? NNT_DNNL_BF16 | (pc->b16 ? NNT_DNNL_B_BF16 : 0) : 0;
    const void *b_stored = pc->bf16 ? b_src : b_op;
    void *packed = NULL;
    ck_assert_int_eq(posix_memalign(&packed, 64, bytes), 0);
    unsigned long packs0, packed0, reordered0, packs1, packed1, reordered1;
    nnt_cpu_dnnl_pack_counts(&packs0, &packed0, &reordered0);
    ck_assert_int_eq(nnt_cpu_dnnl_pack(cache, pc->tb, (pc->bf16 ? NNT_DNNL_BF16 : 0) |
                                       (pc->b16 ? NNT_DNNL_B_BF16 : 0), pc->bits, pc->m_packed,
                                       n, k, b_src, packed), 0);
    float *cs = malloc((size_t)(m * n) * 4), *cp = malloc((size_t)(m * n) * 4);
    for (int64_t i = 0; i < m * n; i++)
        cs[i] = cp[i] = pc->beta == 0.0f ? NAN : c0[i];   /* beta 0: C must not be read */
    int64_t lda = pc->ta ? m : k;
    ck_assert_int_eq(nnt_cpu_gemm_dnnl(cache, pc->ta, pc->tb, dt_stored, m, n, k, pc->alpha,
                                       a_op, lda, 0, b_stored, pc->tb ? k : n, 0, pc->beta, cs,
                                       n, 0, 1), 0);
    ck_assert_int_eq(nnt_cpu_gemm_dnnl_packed(cache, pc->ta, pc->bf16 ? NNT_DNNL_BF16 : 0, m, n,
                                              k, pc->alpha, a_op, lda, packed, pc->m_packed,
                                              pc->beta, cp, n), 0);
    nnt_cpu_dnnl_pack_counts(&packs1, &packed1, &reordered1);
    ck_assert_msg(packs1 == packs0 + 1 && packed1 == packed0 + 1, "pack counts %lu %lu",
                  packs1 - packs0, packed1 - packed0);
    for (int64_t i = 0; i < m * n; i++)
        ck_assert_msg(memcmp(&cs[i], &cp[i], 4) == 0 && !isnan(cp[i]),
                      "case %d: C[%lld] = %.9g on the packed B, %.9g on B as stored", _i,
                      (long long)i, cp[i], cs[i]);
    ck_assert_int_eq(nnt_cpu_gemm_dnnl_packed(cache, pc->ta, 0, m, n, k, 1.0f, a_op, lda,
                                              packed, 0, 0.0f, cp, n), -1);   /* no m_packed */
    printf("test_gemm_backends packed case %d (%s%s m %lld of %lld, n %lld, k %lld, %s B, %s "
           "products): the bits of B as stored (%zu packed bytes%s)\n", _i, pc->ta ? "T" : "N",
           pc->tb ? "T" : "N", (long long)m, (long long)pc->m_packed, (long long)n, (long long)k,
           pc->b16 ? "bf16" : "float", pc->bf16 ? "bf16" : "float", bytes,
           reordered1 > reordered0 ? ", reordered again for this m" : "");
    free(af), free(bf), free(c0), free(bh), free(a_op), free(b_op), free(packed), free(cs);
    free(cp);
    nnt_cpu_dnnl_cache_destroy(cache);
    nnt_cpu_dnnl_reorder_plain(0);
}
END_TEST

/* ---- bf16 products summed over k tiles in one matmul (nnt_cpu_gemm_dnnl_ksum) ----------- */

/* bf16 bit pattern of x (round to nearest even, as nnt_cpu_f32_to_bf16; finite x) */
static uint16_t to_bf16_bits(float x)
{
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    return (uint16_t)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

static float bf16_value(uint16_t h)
{
    uint32_t u = (uint32_t)h << 16;
    float x;
    memcpy(&x, &u, sizeof x);
    return x;
}

/* Loop index: bit 0 trans_a, bit 1 trans_b, bit 2 A's tiles bf16, bit 3 B's. Three k tiles
 * of 5, 16 and 7 (sizes that do not line up with oneDNN's blocks), joined by the kernel:
 * the bits of one nnt_cpu_gemm_dnnl product on operands the test joins itself (the same
 * matmul on the same bf16 values), within float summation of a double reference on the
 * bf16-rounded operands, and far from the first k tile alone (a join that dropped tiles). */
START_TEST(test_ksum)
{
    if (!nnt_cpu_dnnl_bf16_isa()) {
        printf("test_gemm_backends ksum: oneDNN ISA %s has no bf16 dot products: not used\n",
               nnt_cpu_dnnl_isa());
        return;
    }
    enum { NK = 3, M = 37, N = 29, K = 28 };
    const int64_t kt[NK] = {5, 16, 7};
    int ta = _i & 1, tb = (_i >> 1) & 1, a16 = (_i >> 2) & 1, b16 = (_i >> 3) & 1;
    unsigned long long seed = 0x6b73756dULL + (unsigned long long)_i;
    float *af = random_floats(M * K, &seed), *bf = random_floats(K * N, &seed);
    float *c0 = random_floats(M * N, &seed);
    uint16_t *aj = malloc(M * K * 2), *bj = malloc(K * N * 2);   /* joined, as the test sees it */
    void *at[NK], *bt[NK];
    int64_t off = 0;
    for (int t = 0; t < NK; t++) {
        /* tile t: A (M, kt) or (kt, M), B (kt, N) or (N, kt); values from op(A) (M, K), op(B) */
        at[t] = malloc((size_t)(M * kt[t]) * 4);
        bt[t] = malloc((size_t)(kt[t] * N) * 4);
        for (int64_t i = 0; i < M; i++)
            for (int64_t l = 0; l < kt[t]; l++) {
                float v = af[i * K + off + l];
                int64_t at_i = ta ? l * M + i : i * kt[t] + l;
                if (a16)
                    ((uint16_t *)at[t])[at_i] = to_bf16_bits(v);
                else
                    ((float *)at[t])[at_i] = v;
                aj[ta ? (off + l) * M + i : i * K + off + l] = to_bf16_bits(v);
            }
        for (int64_t l = 0; l < kt[t]; l++)
            for (int64_t j = 0; j < N; j++) {
                float v = bf[(off + l) * N + j];
                int64_t bt_i = tb ? j * kt[t] + l : l * N + j;
                if (b16)
                    ((uint16_t *)bt[t])[bt_i] = to_bf16_bits(v);
                else
                    ((float *)bt[t])[bt_i] = v;
                bj[tb ? j * K + off + l : (off + l) * N + j] = to_bf16_bits(v);
            }
        off += kt[t];
    }
    nnt_dnnl_cache *cache = nnt_cpu_dnnl_cache_create();
    ck_assert_ptr_nonnull(cache);
    float *got = malloc(M * N * 4), *want = malloc(M * N * 4), *first = malloc(M * N * 4);
    memcpy(got, c0, M * N * 4);
    memcpy(want, c0, M * N * 4);
    memcpy(first, c0, M * N * 4);
    const float alpha = 0.75f, beta = 0.5f;
    unsigned long before = nnt_cpu_dnnl_ksum_products();
    ck_assert_int_eq(nnt_cpu_gemm_dnnl_ksum(cache, ta, tb, (a16 ? NNT_DNNL_A_BF16 : 0) |
                                            (b16 ? NNT_DNNL_B_BF16 : 0), M, N, NK, kt, alpha,
                                            (const void *const *)at, (const void *const *)bt,
                                            beta, got, N), 0);
    ck_assert_uint_eq(nnt_cpu_dnnl_ksum_products(), before + 1);
    ck_assert_int_eq(nnt_cpu_gemm_dnnl(cache, ta, tb, NNT_DNNL_BF16 | NNT_DNNL_A_BF16 |
                                       NNT_DNNL_B_BF16, M, N, K, alpha, aj, ta ? M : K, 0, bj,
                                       tb ? K : N, 0, beta, want, N, 0, 1), 0);
    ck_assert_int_eq(nnt_cpu_gemm_dnnl_ksum(cache, ta, tb, (a16 ? NNT_DNNL_A_BF16 : 0) |
                                            (b16 ? NNT_DNNL_B_BF16 : 0), M, N, 1, kt, alpha,
                                            (const void *const *)at, (const void *const *)bt,
                                            beta, first, N), 0);
    double worst = 0.0, far = 0.0;
    for (int64_t i = 0; i < M; i++)
        for (int64_t j = 0; j < N; j++) {
            double ref = 0.0, scale = fabs(beta * c0[i * N + j]);
            for (int64_t l = 0; l < K; l++) {
                double t = (double)bf16_value(aj[ta ? l * M + i : i * K + l]) *
                           (double)bf16_value(bj[tb ? j * K + l : l * N + j]);
                ref += t;
                scale += fabs(alpha * t);
            }
            ref = alpha * ref + beta * c0[i * N + j];
            double e = fabs(got[i * N + j] - ref) / (scale + 1e-3);
            double f = fabs(first[i * N + j] - ref) / (scale + 1e-3);
            worst = e > worst ? e : worst;
            far = f > far ? f : far;
        }
    ck_assert_msg(memcmp(got, want, M * N * 4) == 0, "case %d: not the bits of the product on "
                  "the joined operands", _i);
    /* measured (Zen 4): 1.0e-7 at most over the 16 cases; the first tile alone: > 0.6 */
    ck_assert_msg(worst < 1e-6, "case %d: error %.3g against the reference", _i, worst);
    ck_assert_msg(far > 1e-2, "case %d: the first tile alone is as close (%.3g)", _i, far);
    printf("test_gemm_backends ksum case %d (%s%s, %s A, %s B tiles): the joined product's "
           "bits, error %.2e (first tile alone %.2e)\n", _i, ta ? "T" : "N", tb ? "T" : "N",
           a16 ? "bf16" : "float", b16 ? "bf16" : "float", worst, far);
    for (int t = 0; t < NK; t++)
        free(at[t]), free(bt[t]);
    free(af), free(bf), free(c0), free(aj), free(bj), free(got), free(want), free(first);
    nnt_cpu_dnnl_cache_destroy(cache);
}
END_TEST

/* ---- the backend through the public API ------------------------------------------------- */

/* A context with NNT_GEMM=gemm; "onednn/expanded": oneDNN with NNT_GEMM_BF16=expanded. A
 * plain "onednn" takes oneDNN's bf16 products directly where the CPU has them
 * (NNT_GEMM_BF16=direct, whatever the start-up measurement would choose here), the products
 * the tests below are about. */
static nnt_ctx *ctx_with(const char *gemm)
{
    const size_t len = strcspn(gemm, "/");
    char name[16];
    snprintf(name, sizeof name, "%.*s", (int)len, gemm);
    setenv("NNT_GEMM", name, 1);
    if (gemm[len] == '/')
        setenv("NNT_GEMM_BF16", gemm + len + 1, 1);
    else if (strcmp(name, "onednn") == 0 && nnt_cpu_dnnl_bf16_isa())
        setenv("NNT_GEMM_BF16", "direct", 1);
    nnt_ctx *ctx = test_ctx();
    unsetenv("NNT_GEMM");
    unsetenv("NNT_GEMM_BF16");
    return ctx;
}

/* nnt_ctx_create with var=value refused (NNT_E_INVAL, no context) with an error holding
 * msg; var unset after */
static void expect_refused(const char *var, const char *value, const char *msg)
{
    nnt_ctx *bad = NULL;
    setenv(var, value, 1);
    EXPECT_FAIL_MSG(nnt_ctx_create(NULL, &bad), NNT_E_INVAL, "nnt_ctx_create");
    ck_assert_msg(strstr(nnt_ctx_last_error(NULL), msg), "%s=%s: %s", var, value,
                  nnt_ctx_last_error(NULL));
    ck_assert_ptr_null(bad);
    unsetenv(var);
}

START_TEST(test_choice)
{
    const char *desc = NULL;
    nnt_ctx *ctx = ctx_with("blis");
    EXPECT_OK(nnt_ctx_kernels(ctx, &desc));
    ck_assert_msg(strstr(desc, "CPU GEMM BLIS: NNT_GEMM=blis"), "kernels: %s", desc);
    ck_assert_msg(strstr(desc, "BLIS kernels "), "kernels: %s", desc);
    EXPECT_FAIL_MSG(nnt_ctx_kernels(ctx, NULL), NNT_E_INVAL, "nnt_ctx_kernels");
    EXPECT_OK(nnt_ctx_destroy(ctx));
    EXPECT_FAIL_MSG(nnt_ctx_kernels(NULL, &desc), NNT_E_INVAL, "nnt_ctx_kernels");
    ctx = ctx_with("onednn");
    EXPECT_OK(nnt_ctx_kernels(ctx, &desc));
    ck_assert_msg(strstr(desc, "CPU GEMM oneDNN (ISA "), "kernels: %s", desc);
    EXPECT_OK(nnt_ctx_destroy(ctx));
    ctx = ctx_with("measure");
    EXPECT_OK(nnt_ctx_kernels(ctx, &desc));
    ck_assert_msg(strstr(desc, "NNT_GEMM=measure: measured: oneDNN "), "kernels: %s", desc);
    printf("test_gemm_backends measure: %s\n", desc);
    EXPECT_OK(nnt_ctx_destroy(ctx));
    unsetenv("NNT_GEMM");
    ctx = test_ctx();   /* no NNT_GEMM: the feature test decides */
    EXPECT_OK(nnt_ctx_kernels(ctx, &desc));
    const char *isa = nnt_cpu_dnnl_isa();
    int avx = strncmp(isa, "avx512", 6) == 0 || strncmp(isa, "avx2", 4) == 0;
    ck_assert_msg(strstr(desc, avx ? "CPU GEMM oneDNN (ISA avx" : "CPU GEMM BLIS: default"),
                  "kernels (oneDNN ISA %s): %s", isa, desc);
    printf("test_gemm_backends default: %s\n", desc);
    EXPECT_OK(nnt_ctx_destroy(ctx));
    expect_refused("NNT_GEMM", "mkl", "NNT_GEMM='mkl'");
}
END_TEST

/* How bf16 products are made (NNT_GEMM_BF16, else measured at start where oneDNN has bf16
 * dot products), said in nnt_ctx_kernels and followed by the codelets' test
 * (nnt_cpu_dnnl_bf16_native); values other than direct and expanded, and direct where it
 * cannot be, refused. */
START_TEST(test_choice_bf16)
{
    const char *desc = NULL;
    const int isa = nnt_cpu_dnnl_bf16_isa();
    nnt_ctx *ctx = test_ctx();   /* the default */
    EXPECT_OK(nnt_ctx_kernels(ctx, &desc));
    if (strstr(desc, "CPU GEMM oneDNN") && isa) {
        ck_assert_msg(strstr(desc, nnt_cpu_dnnl_bf16_native()
                                       ? "bf16 operands direct, measured: bf16 products "
                                       : "bf16 operands expanded to fp32, measured: bf16 "
                                         "products "),
                      "kernels: %s", desc);
        /* the choice follows the rates: direct unless bf16 takes over 1.25x fp32's time */
        double bf16_rate = 0.0, f32_rate = 0.0;
        ck_assert_int_eq(sscanf(strstr(desc, "measured: bf16 products "),
                                "measured: bf16 products %lf, float %lf", &bf16_rate,
                                &f32_rate), 2);
        ck_assert_msg(nnt_cpu_dnnl_bf16_native() == (f32_rate <= 1.25 * bf16_rate),
                      "bf16 %.1f, fp32 %.1f GFLOP/s: %s chosen", bf16_rate, f32_rate,
                      nnt_cpu_dnnl_bf16_native() ? "direct" : "expanded");
    } else {
        ck_assert_msg(!strstr(desc, "measured: bf16"), "kernels: %s", desc);
        ck_assert_int_eq(nnt_cpu_dnnl_bf16_native(), 0);
    }
    printf("test_gemm_backends bf16 default: %s\n", desc);
    EXPECT_OK(nnt_ctx_destroy(ctx));
    ctx = ctx_with("onednn/expanded");
    EXPECT_OK(nnt_ctx_kernels(ctx, &desc));
    ck_assert_int_eq(nnt_cpu_dnnl_bf16_native(), 0);
    ck_assert_msg(strstr(desc, isa ? "bf16 operands expanded to fp32, NNT_GEMM_BF16=expanded)"
                                   : "bf16 operands expanded to fp32)"),
                  "kernels: %s", desc);
    EXPECT_OK(nnt_ctx_destroy(ctx));
    if (isa) {
        ctx = ctx_with("onednn/direct");
        EXPECT_OK(nnt_ctx_kernels(ctx, &desc));
        ck_assert_int_eq(nnt_cpu_dnnl_bf16_native(), 1);
        ck_assert_msg(strstr(desc, "bf16 operands direct, NNT_GEMM_BF16=direct)"), "%s", desc);
        EXPECT_OK(nnt_ctx_destroy(ctx));
    } else {
        expect_refused("NNT_GEMM_BF16", "direct", "NNT_GEMM_BF16=direct, but");
    }
    setenv("NNT_GEMM", "blis", 1);
    expect_refused("NNT_GEMM_BF16", "direct",
                   "NNT_GEMM_BF16=direct, but BLIS computes the products");
    unsetenv("NNT_GEMM");
    expect_refused("NNT_GEMM_BF16", "amx", "NNT_GEMM_BF16='amx'");
}
END_TEST

/* The fixture's tiny GPT-2 (V 67, C 24, 2 layers), B 2 x T 12, trained 6 AdamW steps on
 * one batch of random tokens: its losses. */
enum { V = 67, B = 2, T = 12, STEPS = 6 };

/* STEPS steps on one batch: the loss of each; recompute: the blocks' activations recomputed
 * in the backward; live (NULL: not asked): the kept packs registered after each step. */
static void train_losses_run(const char *gemm, nnt_precision prec, const nnt_tiling *tiling,
                             int recompute, double *loss, unsigned long *live)
{
    nnt_ctx *ctx = ctx_with(gemm);
    nnt_layer *gpt = NULL;
    EXPECT_OK(nnt_gpt_load_llmc(ctx, fixture_path("gpt2_tiny.llmc.bin"), B, T, tiling, &gpt));
    if (recompute)
        EXPECT_OK(nnt_layer_set_recompute(gpt, 1));
    nnt_optim_options oo = NNT_OPTIM_OPTIONS_INIT;
    nnt_optim *opt = NULL;
    EXPECT_OK(nnt_optim_create(ctx, &oo, &opt));
    EXPECT_OK(nnt_optim_add_layer(opt, gpt));
    EXPECT_OK(nnt_ctx_set_precision(ctx, prec));
    unsigned long long seed = 5;
    int64_t shape[2] = {B, T};
    int32_t tok[B * T], tgt[B * T];   /* one batch, learnt step after step */
    for (int i = 0; i < B * T; i++) {
        tok[i] = (int32_t)(test_rand(&seed) * V);
        tgt[i] = (int32_t)(test_rand(&seed) * V);
    }
    for (int s = 0; s < STEPS; s++) {
        nnt_tensor *x = NULL, *y = NULL;
        EXPECT_OK(nnt_tensor_create(ctx, NNT_INT32, 2, shape, shape, &x));
        EXPECT_OK(nnt_tensor_create(ctx, NNT_INT32, 2, shape, shape, &y));
        EXPECT_OK(nnt_tensor_copy_from_host(x, tok, sizeof tok));
        EXPECT_OK(nnt_tensor_copy_from_host(y, tgt, sizeof tgt));
        EXPECT_OK(nnt_layer_zero_grad(gpt));
        EXPECT_OK(nnt_layer_set_targets(gpt, y));
        EXPECT_OK(nnt_layer_forward(gpt, x, NULL));
        EXPECT_OK(nnt_layer_loss(gpt, &loss[s]));
        EXPECT_OK(nnt_layer_backward(gpt, NULL, NULL));
        EXPECT_OK(nnt_optim_step(opt));
        nnt_tensor_destroy(x);
        nnt_tensor_destroy(y);
        if (live) {
            EXPECT_OK(nnt_ctx_wait(ctx));
            live[s] = nnt_gemm_kept_live();
        }
    }
    nnt_optim_destroy(opt);
    nnt_layer_destroy(gpt);
    EXPECT_OK(nnt_ctx_destroy(ctx));
}

static void train_losses_tiled(const char *gemm, nnt_precision prec, const nnt_tiling *tiling,
                               double *loss)
{
    train_losses_run(gemm, prec, tiling, 0, loss, NULL);
}

static void train_losses(const char *gemm, nnt_precision prec, double *loss)
{
    train_losses_tiled(gemm, prec, NULL, loss);
}

/* Relative loss differences, BLIS against oneDNN (fallback forced either way) over the 6
 * steps. fp32: 9.6e-9 on Zen 3, 0 on Zen 4 (AVX-512: both accumulate each element in k
 * order). bf16 operands: 4.2e-9 on Zen 3 (no bf16 dot products: both expand bf16 to fp32,
 * so float summation order only); on Zen 4 (AVX512-BF16: oneDNN multiplies the bf16
 * operands itself) 7.6e-6 at step 0 (the forward), growing to 1.3e-4 by step 5: a product
 * that differs in its last bit can round an activation to the neighbouring bf16 value (a
 * 2^-8 step) for the next product, and training carries the differences on. The first
 * loss is the sharp check. Float tiles read as bf16 bits (a bug these tolerances missed
 * while only AVX2 hosts ran them) made the losses NaN. */
#define LOSS_F32_TOL 1e-7
#define LOSS_BF16_FIRST_TOL 8e-5
#define LOSS_BF16_TOL 1.3e-3
/* oneDNN's float products on the bf16 operands expanded (NNT_GEMM_BF16=expanded) against
 * BLIS's on the same: float summation order only, as fp32 (0 on the Intel Xeon with
 * AVX512-BF16, every step) */
#define LOSS_EXPANDED_TOL 1e-7

/* _i 0: fp32, 1: bf16 operands */
START_TEST(test_model_losses)
{
    nnt_precision prec = _i ? NNT_PRECISION_BF16 : NNT_PRECISION_FP32;
    double lb[STEPS], ld[STEPS], worst = 0.0;
    unsigned long before = nnt_cpu_dnnl_products();
    train_losses("blis", prec, lb);
    ck_assert_msg(nnt_cpu_dnnl_products() == before, "NNT_GEMM=blis: oneDNN computed %lu "
                  "products", nnt_cpu_dnnl_products() - before);
    train_losses("onednn", prec, ld);
    /* oneDNN really computed the products (some of them: one-row products go to BLIS) */
    ck_assert_msg(nnt_cpu_dnnl_products() > before, "NNT_GEMM=onednn: oneDNN computed no "
                  "product: did the GEMM codelet use it?");
    for (int s = 0; s < STEPS; s++) {
        double e = fabs(ld[s] - lb[s]) / fabs(lb[s]);
        double tol = !_i ? LOSS_F32_TOL : s == 0 ? LOSS_BF16_FIRST_TOL : LOSS_BF16_TOL;
        EXPECT_TOL(e, tol, "%s step %d: loss oneDNN %.9g, BLIS %.9g, relative",
                   _i ? "bf16" : "fp32", s, ld[s], lb[s]);
        worst = e > worst ? e : worst;
    }
    ck_assert_msg(lb[STEPS - 1] < lb[0], "training did not lower the loss (%g -> %g)", lb[0],
                  lb[STEPS - 1]);
    printf("test_gemm_backends model %s: losses %.6f .. %.6f, oneDNN vs BLIS at most %.2e "
           "relative (step 0: %.2e), %lu products by oneDNN\n", _i ? "bf16" : "fp32", lb[0],
           lb[STEPS - 1], worst, fabs(ld[0] - lb[0]) / fabs(lb[0]),
           nnt_cpu_dnnl_products() - before);
    if (!_i || !nnt_cpu_dnnl_bf16_isa())
        return;   /* the products above were float ones already */
    double le[STEPS], worst_e = 0.0;
    unsigned long before_e = nnt_cpu_dnnl_products();
    train_losses("onednn/expanded", prec, le);
    ck_assert_msg(nnt_cpu_dnnl_products() > before_e, "NNT_GEMM_BF16=expanded: no product "
                  "by oneDNN");
    for (int s = 0; s < STEPS; s++) {
        double e = fabs(le[s] - lb[s]) / fabs(lb[s]);
        EXPECT_TOL(e, LOSS_EXPANDED_TOL, "bf16 expanded step %d: loss oneDNN %.9g, BLIS %.9g, "
                   "relative", s, le[s], lb[s]);
        worst_e = e > worst_e ? e : worst_e;
    }
    printf("test_gemm_backends model bf16 expanded (NNT_GEMM_BF16=expanded): oneDNN vs BLIS "
           "at most %.2e relative (direct at step 0: %.2e)\n", worst_e,
           fabs(ld[0] - lb[0]) / fabs(lb[0]));
}
END_TEST

/* B tiles packed once per product (lib/ops/gemm.c) through the public API: with rows cut
 * into 4 tiles (and channels, hidden and vocab into 3) every weight tile is read by 4 row
 * tiles and every activation tile by the 3 tiles of a weight gradient, so the products
 * pack their B tiles; NNT_GEMM_PACK=0 keeps them as stored. The losses must be the same
 * bits (the same kernels on the same rounded operands). _i % 2 0: fp32, 1: bf16 operands
 * (bf16 products where the CPU has them, else float products on rounded operands); _i / 2:
 * the tiling above, then tiles that leave rows, columns and k values over (row tiles of
 * 5, 5 and 2 (T 12): products of another m than the packing's; C 23 + 1: one-column and
 * one-k tiles; hidden 5 x 19 + 1 and V 3 x 22 + 1: the weight gradients of the MLP and the
 * head have a one-row tile beside packing ones), then row tiles of one token. A one-row
 * product takes another kernel (gemv) with B as stored, so it must not read a packed B:
 * the sweep of 2026-11-26 found 1-ulp differences, and 2 MPI ranks (which do not pack)
 * differing from one process, there. Plain layouts are packed too
 * (nnt_cpu_dnnl_reorder_plain), so that AVX2 hosts run the path. */
START_TEST(test_model_packed)
{
    nnt_precision prec = _i % 2 ? NNT_PRECISION_BF16 : NNT_PRECISION_FP32;
    static const int64_t tilings[3][5] = {   /* batch, seq, channels, hidden, vocab */
        {1, T / 2, 8, 32, 23}, {1, 5, 23, 19, 22}, {1, 1, 8, 32, 23}};
    const int64_t *tl = tilings[_i / 2];
    nnt_tiling tiling = NNT_TILING_INIT;
    tiling.batch = tl[0];
    tiling.seq = tl[1];
    tiling.channels = tl[2];
    tiling.hidden = tl[3];
    tiling.vocab = tl[4];
    double stored[STEPS], packed[STEPS];
    unsigned long packs0, products0, again0, packs1, products1, again1, packs2, products2, again2;
    nnt_cpu_dnnl_reorder_plain(1);
    nnt_cpu_dnnl_pack_counts(&packs0, &products0, &again0);
    setenv("NNT_GEMM_PACK", "0", 1);
    train_losses_tiled("onednn", prec, &tiling, stored);
    unsetenv("NNT_GEMM_PACK");
    nnt_cpu_dnnl_pack_counts(&packs1, &products1, &again1);
    ck_assert_msg(packs1 == packs0 && products1 == products0, "NNT_GEMM_PACK=0 packed %lu "
                  "tiles", packs1 - packs0);
    train_losses_tiled("onednn", prec, &tiling, packed);
    nnt_cpu_dnnl_pack_counts(&packs2, &products2, &again2);
    nnt_cpu_dnnl_reorder_plain(0);
    /* measured (Zen 4, and under ONEDNN_MAX_CPU_ISA=AVX2), the first tiling: 1236 tiles
     * packed for 4536 products over the 6 steps; each packed tile is read by 3 or more
     * products (the others pack fewer: the weight gradients' activation tiles) */
    ck_assert_msg(packs2 - packs1 >= (unsigned long)STEPS * (_i < 2 ? 100 : 10) &&
                  products2 - products1 >= 3 * (packs2 - packs1),
                  "%lu B tiles packed for %lu products: the packed path did not run",
                  packs2 - packs1, products2 - products1);
    for (int s = 0; s < STEPS; s++)
        ck_assert_msg(memcmp(&stored[s], &packed[s], sizeof(double)) == 0,
                      "%s tiling %d step %d: loss %.17g with packed B tiles, %.17g with B as "
                      "stored", _i % 2 ? "bf16" : "fp32", _i / 2, s, packed[s], stored[s]);
    printf("test_gemm_backends model %s tiling %d packed: %lu B tiles packed for %lu products "
           "(%lu reordered again), losses the same bits as with B as stored (%.6f .. %.6f)\n",
           _i % 2 ? "bf16" : "fp32", _i / 2, packs2 - packs1, products2 - products1,
           again2 - again1, packed[0], packed[STEPS - 1]);
}
END_TEST

/* A weight-gradient-like product under NNT_PRECISION_BF16 through the public API: C (65,
 * 48) = A^T B with A (40, 65) and B (40, 48) cut into k tiles of 16, 16 and 8 and C into row
 * tiles of 32, 32 and 1: the two multi-row C tiles are one task each over their three k
 * tiles (nnt_cpu_gemm_dnnl_ksum), the one-row tile keeps its row kernel. Against a double
 * reference on the bf16-rounded operands; with NNT_GEMM_KSUM=0 (one task a k tile) within
 * the same tolerance and no joined product; bf16 operand tensors give the bits of float
 * ones; a second run gives the same bits. */
static float *ksum_product(int ksum, int as_bf16, const float *ah, const float *bh,
                           unsigned long *joined)
{
    if (!ksum)
        setenv("NNT_GEMM_KSUM", "0", 1);
    nnt_ctx *ctx = ctx_with("onednn");
    unsetenv("NNT_GEMM_KSUM");
    const char *desc = NULL;
    EXPECT_OK(nnt_ctx_kernels(ctx, &desc));
    ck_assert_msg(!strstr(desc, "sum their k tiles") == !ksum, "ksum %d: %s", ksum, desc);
    EXPECT_OK(nnt_ctx_set_precision(ctx, NNT_PRECISION_BF16));
    nnt_tensor *a = NULL, *b = NULL, *c = NULL, *a32 = NULL, *b32 = NULL;
    EXPECT_OK(nnt_tensor_create(ctx, NNT_FP32, 2, (int64_t[]){40, 65}, (int64_t[]){16, 32},
                                &a32));
    EXPECT_OK(nnt_tensor_create(ctx, NNT_FP32, 2, (int64_t[]){40, 48}, (int64_t[]){16, 48},
                                &b32));
    EXPECT_OK(nnt_tensor_create(ctx, NNT_FP32, 2, (int64_t[]){65, 48}, (int64_t[]){32, 48}, &c));
    EXPECT_OK(nnt_tensor_copy_from_host(a32, ah, 40 * 65 * sizeof(float)));
    EXPECT_OK(nnt_tensor_copy_from_host(b32, bh, 40 * 48 * sizeof(float)));
    a = a32, b = b32;
    if (as_bf16) {
        EXPECT_OK(nnt_tensor_create(ctx, NNT_BF16, 2, (int64_t[]){40, 65}, (int64_t[]){16, 32},
                                    &a));
        EXPECT_OK(nnt_tensor_create(ctx, NNT_BF16, 2, (int64_t[]){40, 48}, (int64_t[]){16, 48},
                                    &b));
        EXPECT_OK(nnt_tensor_convert(a32, a));
        EXPECT_OK(nnt_tensor_convert(b32, b));
    }
    unsigned long before = nnt_cpu_dnnl_ksum_products();
    EXPECT_OK(nnt_tensor_gemm(NNT_TRANS, NNT_NOTRANS, 1.0, a, b, 0.0, c, 1, 0));
    float *out = test_to_host(c, NULL);
    *joined = nnt_cpu_dnnl_ksum_products() - before;
    if (as_bf16) {
        EXPECT_OK(nnt_tensor_destroy(a));
        EXPECT_OK(nnt_tensor_destroy(b));
    }
    EXPECT_OK(nnt_tensor_destroy(a32));
    EXPECT_OK(nnt_tensor_destroy(b32));
    EXPECT_OK(nnt_tensor_destroy(c));
    EXPECT_OK(nnt_ctx_destroy(ctx));
    return out;
}

START_TEST(test_model_ksum)
{
    if (!nnt_cpu_dnnl_bf16_isa()) {
        printf("test_gemm_backends api ksum: oneDNN ISA %s has no bf16 dot products: the "
               "tasks are not joined\n", nnt_cpu_dnnl_isa());
        return;
    }
    unsigned long long seed = 0x6b73756d32ULL;
    float *ah = random_floats(40 * 65, &seed), *bh = random_floats(40 * 48, &seed);
    unsigned long j1, j2, j3, j0;
    float *c1 = ksum_product(1, 0, ah, bh, &j1), *c2 = ksum_product(1, 0, ah, bh, &j2);
    float *c3 = ksum_product(1, 1, ah, bh, &j3), *c0 = ksum_product(0, 0, ah, bh, &j0);
    ck_assert_msg(j1 == 2 && j2 == 2 && j3 == 2 && j0 == 0, "joined products %lu %lu %lu, "
                  "NNT_GEMM_KSUM=0 %lu (2, 2, 2, 0 expected)", j1, j2, j3, j0);
    ck_assert_msg(memcmp(c1, c2, 65 * 48 * 4) == 0, "two runs differ");
    ck_assert_msg(memcmp(c1, c3, 65 * 48 * 4) == 0, "bf16 tensors: not the bits of float ones");
    double worst = 0.0, worst0 = 0.0;
    int differ = 0;
    for (int64_t i = 0; i < 65; i++)
        for (int64_t j = 0; j < 48; j++) {
            double ref = 0.0, scale = 0.0;
            for (int64_t l = 0; l < 40; l++) {
                double t = (double)bf16_value(to_bf16_bits(ah[l * 65 + i])) *
                           (double)bf16_value(to_bf16_bits(bh[l * 48 + j]));
                ref += t;
                scale += fabs(t);
            }
            double e = fabs(c1[i * 48 + j] - ref) / (scale + 1e-3);
            double e0 = fabs(c0[i * 48 + j] - ref) / (scale + 1e-3);
            worst = e > worst ? e : worst;
            worst0 = e0 > worst0 ? e0 : worst0;
            differ += c1[i * 48 + j] != c0[i * 48 + j];
        }
    /* measured (Zen 4): 6.4e-8 joined, 5.5e-8 a task a k tile */
    ck_assert_msg(worst < 1e-6 && worst0 < 1e-6, "errors %.3g joined, %.3g a task a k tile",
                  worst, worst0);
    printf("test_gemm_backends api ksum: 2 joined tasks, error %.2e (%.2e a task a k tile; "
           "%d of %d elements differ between the two), bf16 tensors the same bits\n", worst,
           worst0, differ, 65 * 48);
    free(ah), free(bh), free(c0), free(c1), free(c2), free(c3);
}
END_TEST

/* B tiles kept packed between products (lib/ops/gemm.c, ctx->pack_keep): C = A W^T with A
 * in 3 row tiles of 8 (each W tile read by 3 row tiles) and W (40, 24) in tiles of 16 x 24
 * (one of 8 rows at the edge); repeated on the same W it packs nothing more; after W is
 * changed by a task (scale), by a host copy or by a conversion into it (a bf16 copy under
 * NNT_PRECISION_BF16) it packs again and gives the product of the new W (the bits of
 * NNT_GEMM_PACK=0's, where each product reorders W itself). _i: 0 fp32, 1 bf16 (W a bf16
 * copy: bf16 products pack for each product, keeping nothing, with the same bits). Plain layouts are packed too (nnt_cpu_dnnl_reorder_plain), so that AVX2 hosts run
 * the path. */
static float *kept_product(nnt_ctx *ctx, nnt_tensor *a, nnt_tensor *w, nnt_tensor *c)
{
    EXPECT_OK(nnt_tensor_gemm(NNT_NOTRANS, NNT_TRANS, 1.0, a, w, 0.0, c, 1, 0));
    (void)ctx;
    return test_to_host(c, NULL);
}

static void kept_run(int keep, int bf16, float *out[5], unsigned long packs[5])
{
    if (!keep)
        setenv("NNT_GEMM_PACK", "0", 1);
    nnt_ctx *ctx = ctx_with("onednn");
    unsetenv("NNT_GEMM_PACK");
    const char *desc = NULL;
    EXPECT_OK(nnt_ctx_kernels(ctx, &desc));
    ck_assert_msg(!strstr(desc, "packed and kept while unchanged") == !keep, "%s", desc);
    if (bf16)
        EXPECT_OK(nnt_ctx_set_precision(ctx, NNT_PRECISION_BF16));
    nnt_tensor *a = NULL, *w32 = NULL, *w = NULL, *c = NULL;
    EXPECT_OK(nnt_tensor_create(ctx, NNT_FP32, 2, (int64_t[]){24, 24}, (int64_t[]){8, 24}, &a));
    EXPECT_OK(nnt_tensor_create(ctx, NNT_FP32, 2, (int64_t[]){40, 24}, (int64_t[]){16, 24},
                                &w32));
    EXPECT_OK(nnt_tensor_create(ctx, NNT_FP32, 2, (int64_t[]){24, 40}, (int64_t[]){8, 16}, &c));
    EXPECT_OK(nnt_tensor_fill_normal(a, 1, 0.0, 1.0));
    EXPECT_OK(nnt_tensor_fill_normal(w32, 2, 0.0, 1.0));
    w = w32;
    if (bf16) {
        EXPECT_OK(nnt_tensor_create(ctx, NNT_BF16, 2, (int64_t[]){40, 24}, (int64_t[]){16, 24},
                                    &w));
        EXPECT_OK(nnt_tensor_convert(w32, w));
    }
    unsigned long p0, q, r;
    nnt_cpu_dnnl_pack_counts(&p0, &q, &r);
    float host[40 * 24];
    for (int i = 0; i < 40 * 24; i++)
        host[i] = (float)((i * 37) % 101) / 50.0f - 1.0f;
    for (int step = 0; step < 5; step++) {
        if (step == 2)   /* a task writes W */
            EXPECT_OK(nnt_tensor_scale(bf16 ? w32 : w, -0.5));
        if (step == 3)   /* the host writes W */
            EXPECT_OK(nnt_tensor_copy_from_host(w32, host, sizeof host));
        if (step == 4)   /* a task writes W again, the same way */
            EXPECT_OK(nnt_tensor_scale(w32, 2.0));
        if (bf16 && step >= 2)
            EXPECT_OK(nnt_tensor_convert(w32, w));
        out[step] = kept_product(ctx, a, w, c);
        EXPECT_OK(nnt_ctx_wait(ctx));
        nnt_cpu_dnnl_pack_counts(&packs[step], &q, &r);
        packs[step] -= p0;
    }
    if (bf16)
        EXPECT_OK(nnt_tensor_destroy(w));
    EXPECT_OK(nnt_tensor_destroy(w32));
    EXPECT_OK(nnt_tensor_destroy(a));
    EXPECT_OK(nnt_tensor_destroy(c));
    EXPECT_OK(nnt_ctx_destroy(ctx));
}

START_TEST(test_model_kept)
{
    int bf16 = _i;
    if (bf16 && !nnt_cpu_dnnl_bf16_isa()) {
        printf("test_gemm_backends api kept bf16: oneDNN ISA %s has no bf16 dot products: "
               "bf16 products are not packed\n", nnt_cpu_dnnl_isa());
        return;
    }
    nnt_cpu_dnnl_reorder_plain(1);
    float *kept[5], *stored[5];
    unsigned long pk[5], ps[5];
    kept_run(1, bf16, kept, pk);
    kept_run(0, bf16, stored, ps);
    nnt_cpu_dnnl_reorder_plain(0);
    /* 3 W tiles: float products pack them at the first product, not at the second, again
     * after each change; bf16 products pack them for each product (not kept) */
    static const unsigned long want[2][5] = {{3, 3, 6, 9, 12}, {3, 6, 9, 12, 15}};
    ck_assert_msg(pk[0] == want[bf16][0] && pk[1] == want[bf16][1] && pk[2] == want[bf16][2] &&
                  pk[3] == want[bf16][3] && pk[4] == want[bf16][4],
                  "packs after each product: %lu %lu %lu %lu %lu (%lu %lu %lu %lu %lu expected)",
                  pk[0], pk[1], pk[2], pk[3], pk[4], want[bf16][0], want[bf16][1],
                  want[bf16][2], want[bf16][3], want[bf16][4]);
    ck_assert_msg(ps[4] == 0, "NNT_GEMM_PACK=0 packed %lu tiles", ps[4]);
    for (int step = 0; step < 5; step++) {
        ck_assert_msg(memcmp(kept[step], stored[step], 24 * 40 * sizeof(float)) == 0,
                      "%s product %d: kept packs give other bits than W as stored",
                      bf16 ? "bf16" : "fp32", step);
        if (step > 1)
            ck_assert_msg(memcmp(kept[step], kept[step - 1], 24 * 40 * sizeof(float)) != 0,
                          "product %d: W changed but the product did not", step);
    }
    ck_assert_msg(memcmp(kept[0], kept[1], 24 * 40 * sizeof(float)) == 0, "repeat differs");
    printf("test_gemm_backends api kept %s: packs after each product %lu %lu %lu %lu %lu, "
           "the bits of W as stored\n", bf16 ? "bf16" : "fp32", pk[0], pk[1], pk[2], pk[3],
           pk[4]);
    for (int step = 0; step < 5; step++)
        free(kept[step]), free(stored[step]);
}
END_TEST

/* A (24, 256) in 3 row tiles, W (3072, 256) in 3 tiles of 1 MiB and C = A W^T (24, 3072):
 * every tile of W read by 3 row tiles of A, so packed and kept where room allows. */
static void capped_operands(nnt_ctx *ctx, nnt_tensor **a, nnt_tensor **w, nnt_tensor **c)
{
    EXPECT_OK(nnt_tensor_create(ctx, NNT_FP32, 2, (int64_t[]){24, 256}, (int64_t[]){8, 256},
                                a));
    EXPECT_OK(nnt_tensor_create(ctx, NNT_FP32, 2, (int64_t[]){3072, 256},
                                (int64_t[]){1024, 256}, w));
    EXPECT_OK(nnt_tensor_create(ctx, NNT_FP32, 2, (int64_t[]){24, 3072}, (int64_t[]){8, 1024},
                                c));
}

/* The kept packs' cap (NNT_GEMM_PACK_KEEP_MIB): W (3072, 256) in 3 tiles of 1 MiB read by 3
 * row tiles of A; with a cap of 2 MiB two tiles are kept packed and the third read as stored
 * (packed again for no product), with 0 none, without a cap all three; the packs in use
 * never pass the cap, and the products' bits are those of W as stored (NNT_GEMM_PACK=0).
 * Then the cap's text in the kernels' description. */
static void capped_run(const char *cap, float **out, unsigned long *packs, int64_t *peak)
{
    if (!cap)
        setenv("NNT_GEMM_PACK", "0", 1);
    else if (*cap)
        setenv("NNT_GEMM_PACK_KEEP_MIB", cap, 1);
    nnt_ctx *ctx = ctx_with("onednn");
    unsetenv("NNT_GEMM_PACK");
    unsetenv("NNT_GEMM_PACK_KEEP_MIB");
    const char *desc = NULL;
    EXPECT_OK(nnt_ctx_kernels(ctx, &desc));
    if (cap)
        ck_assert_msg(strstr(desc, *cap ? "kept while unchanged (up to " : "") != NULL &&
                      strstr(desc, *cap ? " MiB, NNT_GEMM_PACK_KEEP_MIB; beyond, read as "
                             "stored)" : "iB, an eighth of the RAM available at start; "
                             "beyond, read as stored)") != NULL, "%s", desc);
    nnt_tensor *a = NULL, *w = NULL, *c = NULL;
    capped_operands(ctx, &a, &w, &c);
    EXPECT_OK(nnt_tensor_fill_normal(a, 1, 0.0, 1.0));
    EXPECT_OK(nnt_tensor_fill_normal(w, 2, 0.0, 1.0));
    unsigned long p0, q, r;
    nnt_cpu_dnnl_pack_counts(&p0, &q, &r);
    for (int k = 0; k < 2; k++) {   /* twice: what was kept is not packed again */
        free(*out);
        *out = kept_product(ctx, a, w, c);
        EXPECT_OK(nnt_ctx_wait(ctx));
        int64_t now = 0;
        nnt_gemm_kept_bytes(&now, peak);
        if (cap && *cap)
            ck_assert_msg(now <= (int64_t)atoi(cap) << 20, "cap %s MiB: %lld bytes of kept "
                          "packs", cap, (long long)now);
    }
    nnt_cpu_dnnl_pack_counts(packs, &q, &r);
    *packs -= p0;
    EXPECT_OK(nnt_tensor_destroy(a));
    EXPECT_OK(nnt_tensor_destroy(w));
    EXPECT_OK(nnt_tensor_destroy(c));
    EXPECT_OK(nnt_ctx_destroy(ctx));
}

/* The kept packs take only the room the RAM budget leaves beside the tiles (they live
 * outside StarPU's counts): NNT_HOST_RAM_MIB=64 gives a default budget of 60 MiB and a cap
 * of 8 MiB; with 54 MiB more of tiles beside the product's 3.3, about 2.7 MiB are left and
 * two of W's three tiles are kept packed, the third read as stored; without them all three.
 * filler_mib < 0: the 54 MiB made after products that kept all three (as an optimizer's
 * moments come after the first forward): W's packs are given back (the room is now under
 * their 3 MiB), then two kept again. The products' bits are the same either way. */
/* mib MiB of zeros in tiles of 1 MiB, beside the product's tensors */
static nnt_tensor *filler_of(nnt_ctx *ctx, int64_t mib)
{
    nnt_tensor *filler = NULL;
    EXPECT_OK(nnt_tensor_create(ctx, NNT_FP32, 1, (int64_t[]){mib << 18}, (int64_t[]){1 << 18},
                                &filler));
    EXPECT_OK(nnt_tensor_fill(filler, 0.0));
    return filler;
}

static void roomed_run(int64_t filler_mib, float **out, unsigned long *packs, int64_t *now)
{
    setenv("NNT_HOST_RAM_MIB", "64", 1);
    nnt_ctx *ctx = ctx_with("onednn");
    unsetenv("NNT_HOST_RAM_MIB");
    nnt_tensor *a = NULL, *w = NULL, *c = NULL, *filler = NULL;
    capped_operands(ctx, &a, &w, &c);
    if (filler_mib > 0)
        filler = filler_of(ctx, filler_mib);
    EXPECT_OK(nnt_tensor_fill_normal(a, 1, 0.0, 1.0));
    EXPECT_OK(nnt_tensor_fill_normal(w, 2, 0.0, 1.0));
    unsigned long p0, q, r;
    nnt_cpu_dnnl_pack_counts(&p0, &q, &r);
    if (filler_mib < 0) {   /* all three kept, then the filler takes their room */
        free(*out);
        *out = kept_product(ctx, a, w, c);
        EXPECT_OK(nnt_ctx_wait(ctx));
        int64_t before = 0, after = 0;
        nnt_gemm_kept_bytes(&before, NULL);
        filler = filler_of(ctx, -filler_mib);
        EXPECT_OK(nnt_ctx_wait(ctx));
        nnt_gemm_kept_bytes(&after, NULL);
        printf("test_gemm_backends kept packs given back: %lld bytes kept, %lld once 54 MiB "
               "of tiles came\n", (long long)before, (long long)after);
        ck_assert_msg(before >= 3 << 20 && after == 0, "kept packs %lld bytes, then %lld "
                      "with 54 MiB more of tiles", (long long)before, (long long)after);
        nnt_cpu_dnnl_pack_counts(&p0, &q, &r);
    }
    for (int k = 0; k < 2; k++) {
        free(*out);
        *out = kept_product(ctx, a, w, c);
        EXPECT_OK(nnt_ctx_wait(ctx));
    }
    nnt_cpu_dnnl_pack_counts(packs, &q, &r);
    *packs -= p0;
    nnt_gemm_kept_bytes(now, NULL);
    nnt_tensor_destroy(filler);
    EXPECT_OK(nnt_tensor_destroy(a));
    EXPECT_OK(nnt_tensor_destroy(w));
    EXPECT_OK(nnt_tensor_destroy(c));
    EXPECT_OK(nnt_ctx_destroy(ctx));
}

START_TEST(test_kept_in_budget_room)
{
    nnt_cpu_dnnl_reorder_plain(1);
    float *out[3] = {NULL, NULL, NULL};
    unsigned long packs[3];
    int64_t now[3];
    roomed_run(54, &out[0], &packs[0], &now[0]);
    roomed_run(0, &out[1], &packs[1], &now[1]);
    roomed_run(-54, &out[2], &packs[2], &now[2]);
    nnt_cpu_dnnl_reorder_plain(0);
    printf("test_gemm_backends kept packs in the budget's room: %lu tiles packed, %lld bytes "
           "kept (54 MiB of tiles beside); %lu, %lld (none); %lu, %lld (54 MiB after)\n",
           packs[0], (long long)now[0], packs[1], (long long)now[1], packs[2],
           (long long)now[2]);
    ck_assert_msg(packs[0] == 2 && packs[1] == 3 && packs[2] == 2, "tiles packed: %lu with "
                  "little room, %lu with room, %lu once the room went", packs[0], packs[1],
                  packs[2]);
    ck_assert(now[0] <= (int64_t)27 << 17);   /* within the 2.7 MiB left */
    ck_assert(now[2] <= (int64_t)27 << 17);
    for (int k = 0; k < 3; k += 2)
        ck_assert_msg(memcmp(out[k], out[1], 24 * 3072 * sizeof(float)) == 0, "other bits");
    free(out[0]), free(out[1]), free(out[2]);
}
END_TEST

START_TEST(test_model_kept_cap)
{
    nnt_cpu_dnnl_reorder_plain(1);
    static const char *const CAPS[] = {"2", "0", "", NULL};
    static const unsigned long WANT[] = {2, 0, 3, 0};
    float *out[4] = {NULL, NULL, NULL, NULL};
    unsigned long packs[4];
    int64_t peak[4];
    for (int k = 0; k < 4; k++)
        capped_run(CAPS[k], &out[k], &packs[k], &peak[k]);
    nnt_cpu_dnnl_reorder_plain(0);
    for (int k = 0; k < 4; k++) {
        ck_assert_msg(packs[k] == WANT[k], "cap %s: %lu tiles packed (%lu expected)",
                      CAPS[k] ? CAPS[k] : "(NNT_GEMM_PACK=0)", packs[k], WANT[k]);
        ck_assert_msg(memcmp(out[k], out[3], 24 * 3072 * sizeof(float)) == 0, "cap %s: other "
                      "bits than W as stored", CAPS[k] ? CAPS[k] : "-");
    }
    ck_assert_msg(peak[0] > (1 << 20) && peak[0] <= (2 << 20) && peak[2] > (2 << 20),
                  "peaks of kept packs: %lld with a cap of 2 MiB, %lld without", (long long)peak[0],
                  (long long)peak[2]);
    printf("test_gemm_backends api kept cap: tiles packed %lu (2 MiB), %lu (0), %lu (none); peak "
           "bytes %lld, %lld\n", packs[0], packs[1], packs[2], (long long)peak[0],
           (long long)peak[2]);
    for (int k = 0; k < 4; k++)
        free(out[k]);
}
END_TEST

/* A tensor given new tiles by a change of storage type (a frozen matrix narrowed to bf16 and
 * widened again, as nnt_layer_init does) drops the packs of its old tiles: its new tiles
 * count their writes from 0 again, so a pack of the old ones made at the same count would
 * pass for current, and the product would read the values from before the rounding. */
START_TEST(test_kept_after_retype)
{
    nnt_cpu_dnnl_reorder_plain(1);
    nnt_ctx *ctx = ctx_with("onednn");
    nnt_tensor *a = NULL, *w = NULL, *w2 = NULL, *c = NULL;
    EXPECT_OK(nnt_tensor_create(ctx, NNT_FP32, 2, (int64_t[]){24, 24}, (int64_t[]){8, 24}, &a));
    EXPECT_OK(nnt_tensor_create(ctx, NNT_FP32, 2, (int64_t[]){40, 24}, (int64_t[]){16, 24}, &w));
    EXPECT_OK(nnt_tensor_create(ctx, NNT_FP32, 2, (int64_t[]){40, 24}, (int64_t[]){16, 24}, &w2));
    EXPECT_OK(nnt_tensor_create(ctx, NNT_FP32, 2, (int64_t[]){24, 40}, (int64_t[]){8, 16}, &c));
    EXPECT_OK(nnt_tensor_fill_normal(a, 1, 0.0, 1.0));
    float host[40 * 24];
    for (int i = 0; i < 40 * 24; i++)   /* one write from the host; not bf16 values */
        host[i] = (float)((i * 37) % 101) / 50.0f - 1.0f + 1e-4f;
    EXPECT_OK(nnt_tensor_copy_from_host(w, host, sizeof host));
    unsigned long live = nnt_gemm_kept_live();
    float *before = kept_product(ctx, a, w, c);
    ck_assert_msg(nnt_gemm_kept_live() > live, "no pack kept: the path did not run");
    EXPECT_OK(nnt_tensor_retype(w, NNT_BF16));   /* rounded */
    EXPECT_OK(nnt_tensor_retype(w, NNT_FP32));   /* new tiles, written once */
    float *after = kept_product(ctx, a, w, c);
    EXPECT_OK(nnt_tensor_copy_to_host(w, host, sizeof host));
    EXPECT_OK(nnt_tensor_copy_from_host(w2, host, sizeof host));
    float *fresh = kept_product(ctx, a, w2, c);
    ck_assert_msg(memcmp(after, fresh, 24 * 40 * sizeof(float)) == 0, "after the retype the "
                  "product reads other values than a fresh tensor of the rounded weights");
    ck_assert_msg(memcmp(after, before, 24 * 40 * sizeof(float)) != 0, "rounding the weights "
                  "changed no product");
    free(before), free(after), free(fresh);
    EXPECT_OK(nnt_tensor_destroy(a));
    EXPECT_OK(nnt_tensor_destroy(w));
    EXPECT_OK(nnt_tensor_destroy(w2));
    EXPECT_OK(nnt_tensor_destroy(c));
    EXPECT_OK(nnt_ctx_destroy(ctx));
    nnt_cpu_dnnl_reorder_plain(0);
}
END_TEST

/* Packs kept on activations that recompute releases every step (the weight gradients' B is
 * a block's activation: tiling 0 of test_model_packed) go with them: a released tensor took
 * its packs' handles and RAM along, step after step, before 2026-11-29 (the default nnt-train
 * run with --recompute left 4 layouts a step behind). The losses are the bits of the run
 * without recompute (the same kernels on the same tiles); no pack is left once the context
 * went. */
START_TEST(test_recompute_releases_packs)
{
    nnt_tiling tiling = NNT_TILING_INIT;
    tiling.batch = 1;
    tiling.seq = T / 2;
    tiling.channels = 8;
    tiling.hidden = 32;
    tiling.vocab = 23;
    double kept[STEPS], again[STEPS];
    unsigned long live[STEPS], before = nnt_gemm_kept_live();
    nnt_cpu_dnnl_reorder_plain(1);
    train_losses_run("onednn", NNT_PRECISION_FP32, &tiling, 0, kept, NULL);
    train_losses_run("onednn", NNT_PRECISION_FP32, &tiling, 1, again, live);
    nnt_cpu_dnnl_reorder_plain(0);
    ck_assert_msg(live[0] > before, "no pack kept: the path did not run");
    for (int s = 1; s < STEPS; s++)
        ck_assert_msg(live[s] == live[0], "kept packs registered after step %d: %lu, after "
                      "step 0: %lu (released activations left theirs)", s, live[s], live[0]);
    ck_assert_msg(nnt_gemm_kept_live() == before, "%lu kept packs left after the context went",
                  nnt_gemm_kept_live() - before);
    for (int s = 0; s < STEPS; s++)
        ck_assert_msg(memcmp(&kept[s], &again[s], sizeof(double)) == 0, "step %d: loss %.17g "
                      "with recompute, %.17g without", s, again[s], kept[s]);
    printf("test_gemm_backends api recompute: %lu kept packs after each of %d steps, none "
           "after the context; losses the bits of the run without recompute\n", live[0], STEPS);
}
END_TEST

static Suite *backends_suite(void)
{
    Suite *s = suite_create("gemm_backends");
    TCase *k = tcase_create("kernel");
    tcase_add_loop_test(k, test_f32_shapes, 0, 2);
    tcase_add_test(k, test_cache_replacement);
    tcase_add_test(k, test_threads);
    tcase_add_loop_test(k, test_cached_primitive, 0, 2);
    tcase_add_loop_test(k, test_bf16_operands, 0, 4);
    tcase_add_loop_test(k, test_packed, 0, NPACK);
    tcase_add_loop_test(k, test_ksum, 0, 16);
    tcase_add_loop_test(k, test_b_stored, 0, 12);
    tcase_add_test(k, test_b_measured);
    tcase_add_test(k, test_dnnl_cache);
    tcase_add_loop_test(k, test_b_measured_small, 0,
                        (int)(sizeof measured_cases / sizeof measured_cases[0]));
    suite_add_tcase(s, k);
    TCase *api = tcase_create("api");
    tcase_add_test(api, test_choice);
    tcase_add_test(api, test_choice_bf16);
    tcase_add_loop_test(api, test_model_losses, 0, 2);
    tcase_add_loop_test(api, test_model_packed, 0, 6);
    tcase_add_test(api, test_model_ksum);
    tcase_add_loop_test(api, test_model_kept, 0, 2);
    tcase_add_test(api, test_model_kept_cap);
    tcase_add_test(api, test_kept_in_budget_room);
    tcase_add_test(api, test_recompute_releases_packs);
    tcase_add_test(api, test_kept_after_retype);
    suite_add_tcase(s, api);
    return s;
}

int main(void)
{
    if (!nnt_cpu_dnnl_available()) {
        printf("SKIP: this nnt was built without oneDNN (configure --with-onednn; Debian "
               "libdnnl-dev): only BLIS computes CPU products\n");
        return 77;
    }
    nnt_cpu_blis_setup();
    SRunner *sr = srunner_create(backends_suite());
    srunner_run_all(sr, CK_ENV); /* CK_VERBOSITY=verbose: every test and its result */
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
