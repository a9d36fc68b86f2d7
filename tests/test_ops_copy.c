/* SPDX-License-Identifier: MIT */
/* nnt_tensor_copy (retiling) and nnt_tensor_permute for any pair of tilings. */
#include "testutil.h"

#include <stdint.h>

static nnt_ctx *ctx;

static void setup(void) { ctx = test_ctx(); }
static void teardown(void) { EXPECT_OK(nnt_ctx_destroy(ctx)); }

static int64_t numel(int nd, const int64_t *s)
{
    int64_t n = 1;
    for (int d = 0; d < nd; d++)
        n *= s[d];
    return n;
}

static nnt_tensor *make(nnt_dtype dt, int nd, const int64_t *shape, const int64_t *tile,
                        const void *data)
{
    nnt_tensor *t;
    EXPECT_OK(nnt_tensor_create(ctx, dt, nd, shape, tile, &t));
    if (data)
        EXPECT_OK(nnt_tensor_copy_from_host(t, data, (size_t)numel(nd, shape) * 4));
    return t;
}

/* Host reference: out[j] = in[i] where out dim d is in dim perm[d]. */
static void host_permute(int nd, const int64_t *shape, const int *perm, const float *in, float *out)
{
    int64_t in_stride[8], out_shape[8], idx[8] = {0};
    int64_t s = 1;
    for (int d = nd - 1; d >= 0; d--)
        in_stride[d] = s, s *= shape[d];
    for (int d = 0; d < nd; d++)
        out_shape[d] = shape[perm[d]];
    for (int64_t j = 0; j < s; j++) {
        int64_t off = 0;
        for (int d = 0; d < nd; d++)
            off += idx[d] * in_stride[perm[d]];
        out[j] = in[off];
        for (int d = nd - 1; d >= 0 && ++idx[d] == out_shape[d]; d--)
            idx[d] = 0;
    }
}

static float *random_data(int64_t n, unsigned long long seed)
{
    float *v = malloc((size_t)n * sizeof *v);
    for (int64_t i = 0; i < n; i++)
        v[i] = (float)(test_rand(&seed) * 2 - 1);
    return v;
}

START_TEST(copy_between_tilings)
{
    int64_t shape[3] = {7, 13, 10};
    int64_t tilings[][3] = {{7, 13, 10}, {1, 1, 1}, {3, 4, 5}, {2, 13, 3}, {7, 5, 10}, {4, 6, 7}};
    int nt = (int)(sizeof tilings / sizeof *tilings);
    int64_t n = numel(3, shape);
    float *in = random_data(n, 77), *out = malloc((size_t)n * sizeof *out);
    for (int a = 0; a < nt; a++) {
        nnt_tensor *src = make(NNT_FP32, 3, shape, tilings[a], in);
        for (int b = 0; b < nt; b++) {
            nnt_tensor *dst = make(NNT_FP32, 3, shape, tilings[b], NULL);
            EXPECT_OK(nnt_tensor_copy(src, dst));
            EXPECT_OK(nnt_tensor_copy_to_host(dst, out, (size_t)n * sizeof *out));
            ck_assert_msg(memcmp(in, out, (size_t)n * sizeof *in) == 0, "tilings %d -> %d", a, b);
            EXPECT_OK(nnt_tensor_destroy(dst));
        }
        EXPECT_OK(nnt_tensor_destroy(src));
    }
    free(in);
    free(out);
}
END_TEST

START_TEST(copy_int32_and_many_sources)
{
    /* one destination tile gathering 120 source tiles: several tasks on the same tile */
    int64_t shape[2] = {10, 12}, one[2] = {1, 1};
    int32_t in[120], out[120];
    for (int i = 0; i < 120; i++)
        in[i] = i * 7919 - 400000;
    nnt_tensor *src = make(NNT_INT32, 2, shape, one, in);
    nnt_tensor *dst = make(NNT_INT32, 2, shape, NULL, NULL);
    EXPECT_OK(nnt_tensor_copy(src, dst));
    EXPECT_OK(nnt_tensor_copy_to_host(dst, out, sizeof out));
    ck_assert_int_eq(memcmp(in, out, sizeof in), 0);
    EXPECT_OK(nnt_tensor_destroy(src));
    EXPECT_OK(nnt_tensor_destroy(dst));
}
END_TEST

struct perm_case {
    int nd;
    int64_t shape[4];
    int perm[4];
    int64_t src_tile[4];
    int64_t dst_tile[4];
};

static const struct perm_case perm_cases[] = {
    {2, {9, 14}, {1, 0}, {9, 14}, {14, 9}},
    {2, {9, 14}, {1, 0}, {4, 5}, {3, 2}},
    {2, {9, 14}, {1, 0}, {1, 14}, {14, 1}},
    {3, {5, 6, 7}, {2, 0, 1}, {2, 3, 4}, {7, 5, 6}},
    {3, {5, 6, 7}, {2, 0, 1}, {5, 6, 7}, {3, 2, 5}},
    {3, {5, 6, 7}, {0, 1, 2}, {2, 5, 3}, {4, 4, 4}},
    /* (B, T, NH, hd) -> (B, NH, T, hd), heads split unevenly on both sides */
    {4, {2, 11, 6, 8}, {0, 2, 1, 3}, {1, 4, 6, 8}, {2, 2, 11, 8}},
    {4, {2, 11, 6, 8}, {0, 2, 1, 3}, {2, 3, 4, 5}, {1, 4, 5, 3}},
    {4, {2, 11, 6, 8}, {3, 2, 1, 0}, {1, 1, 1, 1}, {8, 6, 11, 2}},
};

START_TEST(permute_matches_reference)
{
    const struct perm_case *c = &perm_cases[_i];
    int64_t n = numel(c->nd, c->shape), dst_shape[4];
    for (int d = 0; d < c->nd; d++)
        dst_shape[d] = c->shape[c->perm[d]];
    float *in = random_data(n, 1000 + (unsigned long long)_i);
    float *want = malloc((size_t)n * sizeof *want), *got = malloc((size_t)n * sizeof *got);
    host_permute(c->nd, c->shape, c->perm, in, want);
    nnt_tensor *src = make(NNT_FP32, c->nd, c->shape, c->src_tile, in);
    nnt_tensor *dst = make(NNT_FP32, c->nd, dst_shape, c->dst_tile, NULL);
    EXPECT_OK(nnt_tensor_permute(src, c->perm, dst));
    EXPECT_OK(nnt_tensor_copy_to_host(dst, got, (size_t)n * sizeof *got));
    ck_assert_int_eq(memcmp(want, got, (size_t)n * sizeof *got), 0);

    /* and back: the inverse permutation restores the input */
    int inv[4];
    for (int d = 0; d < c->nd; d++)
        inv[c->perm[d]] = d;
    nnt_tensor *back = make(NNT_FP32, c->nd, c->shape, c->dst_tile, NULL);
    EXPECT_OK(nnt_tensor_permute(dst, inv, back));
    EXPECT_OK(nnt_tensor_copy_to_host(back, got, (size_t)n * sizeof *got));
    ck_assert_int_eq(memcmp(in, got, (size_t)n * sizeof *got), 0);
    EXPECT_OK(nnt_tensor_destroy(src));
    EXPECT_OK(nnt_tensor_destroy(dst));
    EXPECT_OK(nnt_tensor_destroy(back));
    free(in);
    free(want);
    free(got);
}
END_TEST

START_TEST(copy_rejects_bad_arguments)
{
    int64_t s23[2] = {2, 3}, s32[2] = {3, 2}, s6[1] = {6};
    float data[6] = {1, 2, 3, 4, 5, 6};
    nnt_tensor *a = make(NNT_FP32, 2, s23, NULL, data);
    nnt_tensor *b = make(NNT_FP32, 2, s32, NULL, NULL);
    nnt_tensor *c = make(NNT_FP32, 1, s6, NULL, NULL);
    nnt_tensor *i = make(NNT_INT32, 2, s23, NULL, NULL);
    nnt_tensor *fresh = make(NNT_FP32, 2, s23, NULL, NULL);
    EXPECT_FAIL_MSG(nnt_tensor_copy(a, b), NNT_E_SHAPE, "nnt_tensor_copy");
    EXPECT_FAIL_MSG(nnt_tensor_copy(a, c), NNT_E_SHAPE, "nnt_tensor_copy");
    EXPECT_FAIL_MSG(nnt_tensor_copy(a, i), NNT_E_SHAPE, "nnt_tensor_copy");
    EXPECT_FAIL_MSG(nnt_tensor_copy(a, a), NNT_E_INVAL, "nnt_tensor_copy");
    EXPECT_FAIL_MSG(nnt_tensor_copy(NULL, a), NNT_E_INVAL, "nnt_tensor_copy");
    EXPECT_FAIL_MSG(nnt_tensor_copy(a, NULL), NNT_E_INVAL, "nnt_tensor_copy");
    EXPECT_FAIL_MSG(nnt_tensor_copy(fresh, b), NNT_E_STATE, "nnt_tensor_copy");
    EXPECT_FAIL_MSG(nnt_tensor_permute(a, NULL, b), NNT_E_INVAL, "nnt_tensor_permute");
    EXPECT_FAIL_MSG(nnt_tensor_permute(a, (int[]){0, 0}, b), NNT_E_INVAL, "nnt_tensor_permute");
    EXPECT_FAIL_MSG(nnt_tensor_permute(a, (int[]){0, 2}, b), NNT_E_INVAL, "nnt_tensor_permute");
    EXPECT_FAIL_MSG(nnt_tensor_permute(a, (int[]){0, 1}, b), NNT_E_SHAPE, "nnt_tensor_permute");
    EXPECT_OK(nnt_tensor_permute(a, (int[]){1, 0}, b));
    float t[6];
    EXPECT_OK(nnt_tensor_copy_to_host(b, t, sizeof t));
    ck_assert_float_eq(t[1], 4.0f);   /* b[0][1] = a[1][0] */
    EXPECT_OK(nnt_tensor_destroy(a));
    EXPECT_OK(nnt_tensor_destroy(b));
    EXPECT_OK(nnt_tensor_destroy(c));
    EXPECT_OK(nnt_tensor_destroy(i));
    EXPECT_OK(nnt_tensor_destroy(fresh));
}
END_TEST

int main(void)
{
    Suite *s = suite_create("ops-copy");
    TCase *tc = tcase_create("copy");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, copy_between_tilings);
    tcase_add_test(tc, copy_int32_and_many_sources);
    tcase_add_loop_test(tc, permute_matches_reference, 0,
                        (int)(sizeof perm_cases / sizeof *perm_cases));
    tcase_add_test(tc, copy_rejects_bad_arguments);
    suite_add_tcase(s, tc);
    return run_suite(s);
}
