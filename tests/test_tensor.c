/* SPDX-License-Identifier: MIT */
/* Tiled tensors: host round trips for many shapes and tilings (partial tiles included),
 * constant fills, random fills that are identical for every tiling, and bfloat16 tensors
 * (storage, copies, fills, conversions). */
#include "testutil.h"

#include <math.h>
#include <stdint.h>

static nnt_ctx *ctx;

static void setup(void) { ctx = test_ctx(); }
static void teardown(void) { EXPECT_OK(nnt_ctx_destroy(ctx)); }

static int64_t product(int n, const int64_t *v)
{
    int64_t p = 1;
    for (int i = 0; i < n; i++)
        p *= v[i];
    return p;
}

struct case_ {
    int ndim;
    int64_t shape[4];
    int64_t tile[4];
};

/* shapes that are multiples of nothing, tiles of 1, partial edge tiles, clamped tiles */
static const struct case_ cases[] = {
    {1, {1}, {1}},
    {1, {37}, {1}},
    {1, {37}, {5}},
    {1, {37}, {37}},
    {1, {37}, {100}},
    {2, {13, 7}, {4, 3}},
    {2, {13, 7}, {13, 1}},
    {2, {13, 7}, {1, 7}},
    {2, {64, 48}, {16, 16}},
    {2, {61, 130}, {32, 64}},
    {3, {3, 5, 7}, {2, 2, 2}},
    {3, {3, 5, 7}, {3, 5, 7}},
    {3, {2, 11, 9}, {1, 4, 5}},
    {4, {2, 3, 5, 7}, {1, 2, 3, 4}},
    {4, {2, 3, 5, 7}, {2, 1, 5, 1}},
};
#define NCASES ((int)(sizeof cases / sizeof *cases))

static int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

START_TEST(round_trip_fp32)
{
    const struct case_ *c = &cases[_i];
    int64_t n = product(c->ndim, c->shape);
    float *in = malloc((size_t)n * sizeof *in), *out = malloc((size_t)n * sizeof *out);
    unsigned long long state = 0x1234567ULL + (unsigned long long)_i;
    for (int64_t k = 0; k < n; k++)
        in[k] = (float)(test_rand(&state) * 2 - 1);
    nnt_tensor *t;
    EXPECT_OK(nnt_tensor_create(ctx, NNT_FP32, c->ndim, c->shape, c->tile, &t));

    int64_t grid[4], tile[4], ntiles, numel;
    int ndim;
    EXPECT_OK(nnt_tensor_ndim(t, &ndim));
    ck_assert_int_eq(ndim, c->ndim);
    EXPECT_OK(nnt_tensor_grid(t, grid));
    EXPECT_OK(nnt_tensor_tile_shape(t, tile));
    EXPECT_OK(nnt_tensor_ntiles(t, &ntiles));
    EXPECT_OK(nnt_tensor_numel(t, &numel));
    ck_assert_int_eq(numel, n);
    int64_t want_tiles = 1;
    for (int d = 0; d < c->ndim; d++) {
        int64_t want_tile = c->tile[d] < c->shape[d] ? c->tile[d] : c->shape[d];
        ck_assert_int_eq(tile[d], want_tile);
        ck_assert_int_eq(grid[d], ceil_div(c->shape[d], want_tile));
        want_tiles *= grid[d];
    }
    ck_assert_int_eq(ntiles, want_tiles);

    EXPECT_OK(nnt_tensor_copy_from_host(t, in, (size_t)n * sizeof *in));
    memset(out, 0xff, (size_t)n * sizeof *out);
    EXPECT_OK(nnt_tensor_copy_to_host(t, out, (size_t)n * sizeof *out));
    ck_assert_int_eq(memcmp(in, out, (size_t)n * sizeof *in), 0);
    EXPECT_OK(nnt_tensor_destroy(t));
    free(in);
    free(out);
}
END_TEST

START_TEST(round_trip_int32)
{
    const struct case_ *c = &cases[_i];
    int64_t n = product(c->ndim, c->shape);
    int32_t *in = malloc((size_t)n * sizeof *in), *out = malloc((size_t)n * sizeof *out);
    for (int64_t k = 0; k < n; k++)
        in[k] = (int32_t)(k * 2654435761u);
    nnt_tensor *t;
    EXPECT_OK(nnt_tensor_create(ctx, NNT_INT32, c->ndim, c->shape, c->tile, &t));
    EXPECT_OK(nnt_tensor_copy_from_host(t, in, (size_t)n * sizeof *in));
    EXPECT_OK(nnt_tensor_copy_to_host(t, out, (size_t)n * sizeof *out));
    ck_assert_int_eq(memcmp(in, out, (size_t)n * sizeof *in), 0);
    EXPECT_OK(nnt_tensor_destroy(t));
    free(in);
    free(out);
}
END_TEST

START_TEST(fill_constant)
{
    const struct case_ *c = &cases[_i];
    int64_t n = product(c->ndim, c->shape);
    float *f = malloc((size_t)n * sizeof *f);
    int32_t *k = malloc((size_t)n * sizeof *k);
    nnt_tensor *tf, *ti;
    EXPECT_OK(nnt_tensor_create(ctx, NNT_FP32, c->ndim, c->shape, c->tile, &tf));
    EXPECT_OK(nnt_tensor_create(ctx, NNT_INT32, c->ndim, c->shape, c->tile, &ti));
    EXPECT_OK(nnt_tensor_fill(tf, -2.75));
    EXPECT_OK(nnt_tensor_fill(ti, -123456));
    EXPECT_OK(nnt_tensor_copy_to_host(tf, f, (size_t)n * sizeof *f));
    EXPECT_OK(nnt_tensor_copy_to_host(ti, k, (size_t)n * sizeof *k));
    for (int64_t j = 0; j < n; j++) {
        ck_assert_float_eq(f[j], -2.75f);
        ck_assert_int_eq(k[j], -123456);
    }
    EXPECT_OK(nnt_tensor_destroy(tf));
    EXPECT_OK(nnt_tensor_destroy(ti));
    free(f);
    free(k);
}
END_TEST

/* ---- bfloat16 tensors -------------------------------------------------------------------- */

/* bfloat16 from a float by an independent rounding: frexp / nearbyint (ties to even), for
 * the normal, finite values used here; the bits are the float's upper half. */
static uint16_t bf16_of(float x)
{
    int e;
    double m = frexp(x, &e);   /* before e is read */
    float r = (float)ldexp(nearbyint(ldexp(m, 8)), e - 8);
    uint32_t u;
    memcpy(&u, &r, sizeof u);
    return (uint16_t)(u >> 16);
}

static float float_of_bf16(uint16_t h)
{
    uint32_t u = (uint32_t)h << 16;
    float x;
    memcpy(&x, &u, sizeof x);
    return x;
}

/* Host round trip (bit patterns), fill, copy to another tiling, permute, and conversions
 * both ways against the independent rounding; float -> bf16 -> float is the rounding. */
START_TEST(bf16_tensors)
{
    const struct case_ *c = &cases[_i];
    int64_t n = product(c->ndim, c->shape);
    float *in = malloc((size_t)n * sizeof *in), *back = malloc((size_t)n * sizeof *back);
    uint16_t *h = malloc((size_t)n * sizeof *h), *got = malloc((size_t)n * sizeof *got);
    unsigned long long state = 0xbf16ULL + (unsigned long long)_i;
    for (int64_t k = 0; k < n; k++)
        in[k] = (float)((test_rand(&state) * 2 - 1) * 1000.0);
    nnt_tensor *f, *b, *b2, *f2;
    nnt_dtype dt;
    EXPECT_OK(nnt_tensor_create(ctx, NNT_FP32, c->ndim, c->shape, c->tile, &f));
    EXPECT_OK(nnt_tensor_create(ctx, NNT_BF16, c->ndim, c->shape, c->tile, &b));
    EXPECT_OK(nnt_tensor_create(ctx, NNT_BF16, c->ndim, c->shape, NULL, &b2));
    EXPECT_OK(nnt_tensor_create(ctx, NNT_FP32, c->ndim, c->shape, c->tile, &f2));
    EXPECT_OK(nnt_tensor_dtype(b, &dt));
    ck_assert_int_eq(dt, NNT_BF16);

    /* float -> bf16 -> host: the rounded bits; -> float: their exact values */
    EXPECT_OK(nnt_tensor_copy_from_host(f, in, (size_t)n * sizeof *in));
    EXPECT_OK(nnt_tensor_convert(f, b));
    EXPECT_OK(nnt_tensor_copy_to_host(b, got, (size_t)n * sizeof *got));
    EXPECT_OK(nnt_tensor_convert(b, f2));
    EXPECT_OK(nnt_tensor_copy_to_host(f2, back, (size_t)n * sizeof *back));
    for (int64_t k = 0; k < n; k++) {
        ck_assert_msg(got[k] == bf16_of(in[k]), "element %lld: %a -> 0x%04x, expected 0x%04x",
                      (long long)k, (double)in[k], got[k], bf16_of(in[k]));
        ck_assert_msg(back[k] == float_of_bf16(got[k]), "element %lld back", (long long)k);
    }
    EXPECT_FAIL_MSG(nnt_tensor_copy_to_host(b, got, (size_t)n * sizeof(float)), NNT_E_SHAPE,
                    "nnt_tensor_copy_to_host");   /* the byte count of floats */

    /* host bits -> bf16 -> another tiling -> host */
    for (int64_t k = 0; k < n; k++)
        h[k] = (uint16_t)(k * 40503u + 7u);
    EXPECT_OK(nnt_tensor_copy_from_host(b, h, (size_t)n * sizeof *h));
    EXPECT_OK(nnt_tensor_copy(b, b2));
    memset(got, 0, (size_t)n * sizeof *got);
    EXPECT_OK(nnt_tensor_copy_to_host(b2, got, (size_t)n * sizeof *got));
    ck_assert_int_eq(memcmp(h, got, (size_t)n * sizeof *h), 0);

    /* fill: the value rounded once */
    EXPECT_OK(nnt_tensor_fill(b, 1.0 + 1.0 / 256 + 1.0 / 1024));   /* above the tie: up */
    EXPECT_OK(nnt_tensor_copy_to_host(b, got, (size_t)n * sizeof *got));
    for (int64_t k = 0; k < n; k++)
        ck_assert_uint_eq(got[k], 0x3F81u);

    /* float ops refuse bf16 tensors, naming the dtypes */
    EXPECT_FAIL_MSG(nnt_tensor_scale(b, 2.0), NNT_E_SHAPE, "nnt_tensor_scale");
    ck_assert_ptr_nonnull(strstr(nnt_ctx_last_error(ctx), "NNT_BF16"));
    EXPECT_FAIL_MSG(nnt_tensor_fill_uniform(b, 1, 0.0, 1.0), NNT_E_UNSUPPORTED,
                    "nnt_tensor_fill_uniform");
    EXPECT_FAIL_MSG(nnt_tensor_copy(f, b), NNT_E_SHAPE, "nnt_tensor_copy");
    int one_tile = 1;   /* b2 is a single tile: then the tilings agree */
    for (int d = 0; d < c->ndim; d++)
        one_tile &= c->tile[d] >= c->shape[d];
    if (one_tile)
        EXPECT_OK(nnt_tensor_convert(f, b2));
    else
        EXPECT_FAIL_MSG(nnt_tensor_convert(f, b2), NNT_E_SHAPE, "nnt_tensor_convert");
    EXPECT_FAIL_MSG(nnt_tensor_convert(NULL, b), NNT_E_INVAL, "nnt_tensor_convert");
    EXPECT_FAIL_MSG(nnt_tensor_convert(f, NULL), NNT_E_INVAL, "nnt_tensor_convert");
    EXPECT_OK(nnt_tensor_destroy(f));
    EXPECT_OK(nnt_tensor_destroy(b));
    EXPECT_OK(nnt_tensor_destroy(b2));
    EXPECT_OK(nnt_tensor_destroy(f2));
    free(in), free(back), free(h), free(got);
}
END_TEST

/* int32 <-> bf16 is refused; a never-written source too; equal dtypes copy. */
START_TEST(convert_errors)
{
    int64_t shape[2] = {4, 6}, tile[2] = {2, 3};
    nnt_tensor *i32, *b, *f, *g;
    EXPECT_OK(nnt_tensor_create(ctx, NNT_INT32, 2, shape, tile, &i32));
    EXPECT_OK(nnt_tensor_create(ctx, NNT_BF16, 2, shape, tile, &b));
    EXPECT_OK(nnt_tensor_create(ctx, NNT_FP32, 2, shape, tile, &f));
    EXPECT_OK(nnt_tensor_create(ctx, NNT_FP32, 2, shape, tile, &g));
    EXPECT_FAIL_MSG(nnt_tensor_convert(b, f), NNT_E_STATE, "nnt_tensor_convert");
    EXPECT_OK(nnt_tensor_fill(i32, 3));
    EXPECT_FAIL_MSG(nnt_tensor_convert(i32, b), NNT_E_SHAPE, "nnt_tensor_convert");
    ck_assert_ptr_nonnull(strstr(nnt_ctx_last_error(ctx), "NNT_INT32"));
    EXPECT_OK(nnt_tensor_fill(f, -0.5));
    EXPECT_OK(nnt_tensor_convert(f, g));   /* equal dtypes: a copy */
    float out[24];
    EXPECT_OK(nnt_tensor_copy_to_host(g, out, sizeof out));
    for (int k = 0; k < 24; k++)
        ck_assert_float_eq(out[k], -0.5f);
    EXPECT_OK(nnt_tensor_destroy(i32));
    EXPECT_OK(nnt_tensor_destroy(b));
    EXPECT_OK(nnt_tensor_destroy(f));
    EXPECT_OK(nnt_tensor_destroy(g));
}
END_TEST

/* Fill with the given tiling and read back. */
static float *random_tensor(int ndim, const int64_t *shape, const int64_t *tile, int normal,
                            uint64_t seed)
{
    int64_t n = product(ndim, shape);
    float *out = malloc((size_t)n * sizeof *out);
    nnt_tensor *t;
    EXPECT_OK(nnt_tensor_create(ctx, NNT_FP32, ndim, shape, tile, &t));
    if (normal)
        EXPECT_OK(nnt_tensor_fill_normal(t, seed, 0.5, 2.0));
    else
        EXPECT_OK(nnt_tensor_fill_uniform(t, seed, -3.0, 5.0));
    EXPECT_OK(nnt_tensor_copy_to_host(t, out, (size_t)n * sizeof *out));
    EXPECT_OK(nnt_tensor_destroy(t));
    return out;
}

START_TEST(random_fill_is_tiling_invariant)
{
    int normal = _i;
    int64_t shape[3] = {5, 17, 23};
    int64_t tilings[][3] = {{5, 17, 23}, {1, 1, 1}, {2, 5, 7}, {3, 16, 4}, {5, 1, 23}, {9, 99, 99}};
    int64_t n = product(3, shape);
    float *ref = random_tensor(3, shape, NULL, normal, 2024);
    for (size_t k = 0; k < sizeof tilings / sizeof *tilings; k++) {
        float *other = random_tensor(3, shape, tilings[k], normal, 2024);
        ck_assert_msg(memcmp(ref, other, (size_t)n * sizeof *ref) == 0,
                      "tiling %zu gives different values", k);
        free(other);
    }
    float *reseeded = random_tensor(3, shape, NULL, normal, 2025);
    int64_t same = 0;
    for (int64_t j = 0; j < n; j++)
        same += ref[j] == reseeded[j];
    ck_assert_int_lt(same, n / 100 + 1);
    free(reseeded);
    free(ref);
}
END_TEST

START_TEST(random_fill_statistics)
{
    int64_t shape[2] = {300, 400}, tile[2] = {128, 96};
    int64_t n = product(2, shape);
    float *u = random_tensor(2, shape, tile, 0, 11);
    float *g = random_tensor(2, shape, tile, 1, 11);
    double su = 0, sg = 0, sg2 = 0, lo = 1e9, hi = -1e9;
    for (int64_t j = 0; j < n; j++) {
        su += u[j];
        lo = fmin(lo, u[j]);
        hi = fmax(hi, u[j]);
        sg += g[j];
        sg2 += (double)g[j] * g[j];
    }
    double mean_g = sg / n, std_g = sqrt(sg2 / n - mean_g * mean_g);
    ck_assert_double_ge(lo, -3.0);
    ck_assert_double_lt(hi, 5.0);
    /* Statistical bounds, not rounding errors: 120000 draws give the means a standard error
     * of 2.31 / 346 = 0.0067 (uniform) and 2 / 346 = 0.0058 (normal), the std one of
     * 2 / 490 = 0.0041; the bounds are 4.5, 3.5 and 4.9 of those. The stream is fixed
     * (seed 11): measured 8.5e-3, 5.0e-3 and 1.1e-4 (Zen 3; BLIS plays no part). */
    EXPECT_TOL(fabs(su / n - 1.0), 0.03, "uniform(-3, 5): mean %g", su / n);
    EXPECT_TOL(fabs(mean_g - 0.5), 0.02, "normal(0.5, 2): mean %g", mean_g);
    EXPECT_TOL(fabs(std_g - 2.0), 0.02, "normal(0.5, 2): std %g", std_g);
    free(u);
    free(g);
}
END_TEST

/* The documented value of element idx (see nnt_cpu_fill_random_f32), recomputed here. */
static float documented_uniform(uint64_t seed, uint64_t idx, double a, double b)
{
    uint64_t z = seed + (idx + 1) * 0x9E3779B97F4A7C15ULL;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    z ^= z >> 31;
    return (float)(a + (b - a) * (((double)(z >> 40) + 0.5) * 0x1p-24));
}

START_TEST(random_fill_follows_documented_stream)
{
    int64_t shape[2] = {4, 9}, tile[2] = {3, 4};
    float *u = random_tensor(2, shape, tile, 0, 99);
    for (uint64_t idx = 0; idx < 36; idx++)
        ck_assert_float_eq(u[idx], documented_uniform(99, idx, -3.0, 5.0));
    free(u);
}
END_TEST

START_TEST(writes_and_tasks_are_ordered)
{
    int64_t shape[2] = {50, 30}, tile[2] = {16, 7};
    float in[1500], out[1500];
    for (int j = 0; j < 1500; j++)
        in[j] = (float)j;
    nnt_tensor *t;
    EXPECT_OK(nnt_tensor_create(ctx, NNT_FP32, 2, shape, tile, &t));
    for (int round = 0; round < 3; round++) {
        EXPECT_OK(nnt_tensor_copy_from_host(t, in, sizeof in));
        EXPECT_OK(nnt_tensor_fill(t, round));             /* task after the host write */
        EXPECT_OK(nnt_tensor_copy_to_host(t, out, sizeof out));
        for (int j = 0; j < 1500; j++)
            ck_assert_float_eq(out[j], (float)round);
        EXPECT_OK(nnt_tensor_fill_uniform(t, 5, 0, 1));
        EXPECT_OK(nnt_tensor_copy_from_host(t, in, sizeof in));   /* host write after a task */
        EXPECT_OK(nnt_tensor_copy_to_host(t, out, sizeof out));
        ck_assert_int_eq(memcmp(in, out, sizeof in), 0);
    }
    EXPECT_OK(nnt_ctx_wait(ctx));
    EXPECT_OK(nnt_tensor_destroy(t));
}
END_TEST

START_TEST(many_small_tiles)
{
    int64_t shape[2] = {120, 110}, tile[2] = {1, 1};
    int64_t n = product(2, shape);
    float *ref = random_tensor(2, shape, NULL, 1, 3);
    float *tiny = random_tensor(2, shape, tile, 1, 3);
    ck_assert_int_eq(memcmp(ref, tiny, (size_t)n * sizeof *ref), 0);
    free(ref);
    free(tiny);
}
END_TEST

START_TEST(destroy_with_pending_work)
{
    for (int k = 0; k < 20; k++) {
        nnt_tensor *t;
        EXPECT_OK(nnt_tensor_create(ctx, NNT_FP32, 2, (int64_t[]){256, 256}, (int64_t[]){64, 64}, &t));
        EXPECT_OK(nnt_tensor_fill_normal(t, (uint64_t)k, 0, 1));
        EXPECT_OK(nnt_tensor_destroy(t));
    }
    EXPECT_OK(nnt_ctx_wait(ctx));
}
END_TEST

static Suite *tensor_suite(void)
{
    Suite *s = suite_create("tensor");
    TCase *tc = tcase_create("tensor");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_loop_test(tc, round_trip_fp32, 0, NCASES);
    tcase_add_loop_test(tc, round_trip_int32, 0, NCASES);
    tcase_add_loop_test(tc, fill_constant, 0, NCASES);
    tcase_add_loop_test(tc, bf16_tensors, 0, NCASES);
    tcase_add_test(tc, convert_errors);
    tcase_add_loop_test(tc, random_fill_is_tiling_invariant, 0, 2);
    tcase_add_test(tc, random_fill_statistics);
    tcase_add_test(tc, random_fill_follows_documented_stream);
    tcase_add_test(tc, writes_and_tasks_are_ordered);
    tcase_add_test(tc, many_small_tiles);
    tcase_add_test(tc, destroy_with_pending_work);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return run_suite(tensor_suite());
}
