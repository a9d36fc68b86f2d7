/* SPDX-License-Identifier: MIT */
/* MXFP4 decoding (lib/io/mxfp4.c) against transformers' own (tests/gen_gptoss_fixtures.py):
 * convert_moe_packed_tensors of blocks holding every byte value with scale bytes 112..143,
 * and the experts of gptoss-mxfp4/model.safetensors as transformers loads them with
 * Mxfp4Config(dequantize=True). Decoding is exact: compared bit for bit. Linked against the
 * io objects alone (libnntio.la). */
#include "testutil.h"

#include "../lib/io/io.h"

#include <stdint.h>

static char err[NNT_IO_ERRLEN];

static const char *fixture(const char *name)
{
    static char p[2][1024];
    static int k;
    const char *top = getenv("top_srcdir");
    k = (k + 1) % 2;
    snprintf(p[k], sizeof p[k], "%s/tests/fixtures/gptoss_tiny/%s", top && *top ? top : ".",
             name);
    return p[k];
}

static nnt_st_reader *open_fixture(const char *name)
{
    nnt_st_reader *r = NULL;
    int rc = nnt_st_open(fixture(name), &r, err, sizeof err);
    ck_assert_msg(rc == 0, "%s: %s", fixture(name), err);
    return r;
}

/* Entry name of r: present, of dtype and nd dims shape. */
static const nnt_st_entry *entry(const nnt_st_reader *r, const char *name, nnt_io_dtype dtype,
                                 int nd, const int64_t *shape)
{
    const nnt_st_entry *e = nnt_st_find(r, name);
    ck_assert_msg(e != NULL, "no tensor %s", name);
    ck_assert_msg(e->dtype == dtype, "%s is %s", name, nnt_io_dtype_name(e->dtype));
    ck_assert_int_eq(e->ndim, nd);
    for (int d = 0; d < nd; d++)
        ck_assert_msg(e->shape[d] == shape[d], "%s: dim %d is %lld, expected %lld", name, d,
                      (long long)e->shape[d], (long long)shape[d]);
    return e;
}

/* e's elements (numel) as dtype, malloc'd. */
static void *read_entry(const nnt_st_reader *r, const nnt_st_entry *e, nnt_io_dtype dtype)
{
    void *buf = malloc((size_t)e->numel * nnt_io_dtype_size(dtype) + 1);
    ck_assert_ptr_nonnull(buf);
    int rc = nnt_st_read(r, e, dtype, 0, e->numel, buf, err, sizeof err);
    ck_assert_msg(rc == 0, "%s: %s", e->name, err);
    return buf;
}

/* The same bits (+0 and -0 differ, as they do in the files). */
static void same_bits(const float *got, const float *want, int64_t n, const char *what)
{
    for (int64_t i = 0; i < n; i++)
        ck_assert_msg(memcmp(&got[i], &want[i], sizeof(float)) == 0,
                      "%s: element %lld is %a, expected %a", what, (long long)i,
                      (double)got[i], (double)want[i]);
}

/* Every byte value in the blocks, scale bytes 112..143: decoding (16, 64) then swapping the
 * last two dimensions gives transformers' (1, 64, 16). */
START_TEST(wide)
{
    nnt_st_reader *r = open_fixture("gptoss-mxfp4.reference.safetensors");
    const int64_t bs[4] = {1, 16, 2, 16}, ss[3] = {1, 16, 2}, ws[3] = {1, 64, 16};
    uint8_t *blocks = read_entry(r, entry(r, "dequant.wide.blocks", NNT_IO_U8, 4, bs),
                                 NNT_IO_U8);
    uint8_t *scales = read_entry(r, entry(r, "dequant.wide.scales", NNT_IO_U8, 3, ss),
                                 NNT_IO_U8);
    float *want = read_entry(r, entry(r, "dequant.wide", NNT_IO_F32, 3, ws), NNT_IO_F32);
    /* the fixture is what the test says: every byte value, the scale bytes 112..143 */
    for (int i = 0; i < 512; i++)
        ck_assert_int_eq(blocks[i], i % 256);
    for (int i = 0; i < 32; i++)
        ck_assert_int_eq(scales[i], 112 + i);
    float dec[16 * 64], swapped[64 * 16];
    nnt_mxfp4_decode(blocks, scales, 16, 64, dec);
    for (int r0 = 0; r0 < 16; r0++)
        for (int c = 0; c < 64; c++)
            swapped[c * 16 + r0] = dec[r0 * 64 + c];
    same_bits(swapped, want, 64 * 16, "dequant.wide");
    free(blocks);
    free(scales);
    free(want);
    nnt_st_close(r);
}
END_TEST

/* The values of the e2m1 table at scale byte 127 (2^0), by hand: a decoder whose table, nibble
 * order or scale bias is off fails here by itself. */
START_TEST(table)
{
    static const float values[16] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f,
                                     -0.0f, -0.5f, -1.0f, -1.5f, -2.0f, -3.0f, -4.0f, -6.0f};
    uint8_t blocks[16], scales[1] = {127};
    float out[32];
    for (int j = 0; j < 16; j++)
        blocks[j] = (uint8_t)(j | (15 - j) << 4);   /* low nibble j, high 15 - j */
    nnt_mxfp4_decode(blocks, scales, 1, 32, out);
    for (int j = 0; j < 16; j++) {
        same_bits(&out[2 * j], &values[j], 1, "low nibble");
        same_bits(&out[2 * j + 1], &values[15 - j], 1, "high nibble");
    }
    scales[0] = 130;   /* 2^3 */
    nnt_mxfp4_decode(blocks, scales, 1, 32, out);
    ck_assert_float_eq(out[14], 48.0f);    /* code 7 (6) x 8 */
    ck_assert_float_eq(out[3], -32.0f);    /* code 14 (-4) x 8 */
    scales[0] = 0;     /* 2^-127: subnormal, still exact */
    nnt_mxfp4_decode(blocks, scales, 1, 32, out);
    ck_assert_float_eq(out[2], ldexpf(0.5f, -127));
    scales[0] = 255;   /* 2^128: 6 x 2^128 overflows, as in transformers */
    nnt_mxfp4_decode(blocks, scales, 1, 32, out);
    ck_assert(isinf(out[14]) && out[14] > 0);
}
END_TEST

/* Layer 0's experts of gptoss-mxfp4/model.safetensors: <name>_blocks (E, R, K/32, 16) and
 * _scales (E, R, K/32) decode expert by expert to (R, K), which transposed is transformers'
 * expert of dequant.<name>.0 (E, K, R). gate_up_proj: R 2I = 64, K C = 64; down_proj: R C
 * = 64, K I = 32. */
static void experts(const char *name, int64_t E, int64_t R, int64_t K)
{
    char n[128];
    nnt_st_reader *m = open_fixture("gptoss-mxfp4/model.safetensors");
    nnt_st_reader *ref = open_fixture("gptoss-mxfp4.reference.safetensors");
    const int64_t bs[4] = {E, R, K / 32, 16}, ss[3] = {E, R, K / 32}, ws[3] = {E, K, R};
    snprintf(n, sizeof n, "model.layers.0.mlp.experts.%s_blocks", name);
    uint8_t *blocks = read_entry(m, entry(m, n, NNT_IO_U8, 4, bs), NNT_IO_U8);
    snprintf(n, sizeof n, "model.layers.0.mlp.experts.%s_scales", name);
    uint8_t *scales = read_entry(m, entry(m, n, NNT_IO_U8, 3, ss), NNT_IO_U8);
    snprintf(n, sizeof n, "dequant.%s.0", name);
    float *want = read_entry(ref, entry(ref, n, NNT_IO_F32, 3, ws), NNT_IO_F32);
    float *dec = malloc((size_t)(R * K) * sizeof(float));
    float *got = malloc((size_t)(E * K * R) * sizeof(float));
    ck_assert(dec && got);
    int nonzero = 0;
    for (int64_t e = 0; e < E; e++) {
        nnt_mxfp4_decode(blocks + e * R * (K / 32) * 16, scales + e * R * (K / 32), R, K, dec);
        for (int64_t r = 0; r < R; r++)
            for (int64_t k = 0; k < K; k++) {
                got[e * K * R + k * R + r] = dec[r * K + k];
                nonzero += dec[r * K + k] != 0.0f;
            }
    }
    ck_assert_int_gt(nonzero, (int)(E * R * K / 2));   /* random nibbles: mostly non-zero */
    same_bits(got, want, E * K * R, n);
    free(blocks);
    free(scales);
    free(want);
    free(dec);
    free(got);
    nnt_st_close(m);
    nnt_st_close(ref);
}

START_TEST(gate_up_proj)
{
    experts("gate_up_proj", 4, 64, 64);
}
END_TEST

START_TEST(down_proj)
{
    experts("down_proj", 4, 64, 32);
}
END_TEST

static Suite *mxfp4_suite(void)
{
    Suite *s = suite_create("mxfp4");
    TCase *tc = tcase_create("decode");
    tcase_add_test(tc, table);
    tcase_add_test(tc, wide);
    tcase_add_test(tc, gate_up_proj);
    tcase_add_test(tc, down_proj);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) { return run_suite(mxfp4_suite()); }
