/* SPDX-License-Identifier: MIT */
/* NNT_NF4 (4-bit NormalFloat, QLoRA's frozen base) against bitsandbytes 0.50 (CPU) and
 * transformers + PEFT (tests/gen_nf4_fixtures.py, tests/fixtures/nf4): quantization and
 * dequantization bit for bit in several tilings, host copies in bitsandbytes' form, products
 * with an NF4 B, refusals; then a tiny Llama whose matrices are frozen in NF4 with LoRA
 * adapters trained on it, against PEFT on transformers' bitsandbytes 4-bit model. */
#include "testutil.h"
#include "fixture_st.h"

#include "models/bnb4.h"

#include <stdint.h>

static nnt_ctx *ctx;
static void setup(void) { ctx = test_ctx(); }
static void teardown(void) { EXPECT_OK(nnt_ctx_destroy(ctx)); }

static const char *nf4_fixture(const char *name) { return fixture_path_in("nf4", name, NULL); }

/* The quantization cases of quant.safetensors: (rows, cols) of src.<case> */
static const struct {
    const char *name;
    int64_t rows, cols;
} QCASES[] = {{"randn", 6, 256}, {"zeros_mixed", 2, 128}, {"midpoints", 2, 128},
              {"bf16vals", 4, 192}};
#define NQCASES 4

/* tiles of (rows, cols): whole; one block a tile; 5 rows of two blocks (whole rows where the
 * rows are shorter: the runs of a tile then cross rows); two whole rows */
static const int64_t QTILES[4][2] = {{0, 0}, {1, 64}, {5, 128}, {2, 0}};
#define NQTILES 4

/* A 2-D tensor of dtype in tiles of tile (0: the dimension whole). */
static nnt_tensor *make(nnt_dtype dtype, int64_t rows, int64_t cols, const int64_t *tile)
{
    int64_t shape[2] = {rows, cols}, t[2] = {tile[0] ? tile[0] : rows, tile[1] ? tile[1] : cols};
    nnt_tensor *x = NULL;
    EXPECT_OK(nnt_tensor_create(ctx, dtype, 2, shape, t, &x));
    return x;
}

/* Bytes of an NF4 tensor of n elements in host form: codes, then absmax. */
static size_t nf4_bytes(int64_t n) { return (size_t)(n / 2 + n / 64 * 4); }

/* want's n bytes equal got's (what: the message). */
static void same_bytes(const void *got, const void *want, size_t n, const char *what)
{
    const unsigned char *g = got, *w = want;
    for (size_t i = 0; i < n; i++)
        ck_assert_msg(g[i] == w[i], "%s: byte %zu is 0x%02x, bitsandbytes' 0x%02x", what, i,
                      g[i], w[i]);
}

/* host values src of dtype (rows, cols) in tiles of tile, quantized by nnt_tensor_convert:
 * the bytes want (bitsandbytes' codes then absmax) */
static void quantized_as(nnt_dtype dtype, const void *src, int64_t rows, int64_t cols,
                         const int64_t *tile, const unsigned char *want, const char *what)
{
    const int64_t n = rows * cols;
    unsigned char *got = malloc(nf4_bytes(n));
    nnt_tensor *x = make(dtype, rows, cols, tile), *q = make(NNT_NF4, rows, cols, tile);
    EXPECT_OK(nnt_tensor_copy_from_host(x, src, (size_t)n * (dtype == NNT_BF16 ? 2 : 4)));
    EXPECT_OK(nnt_tensor_convert(x, q));
    EXPECT_OK(nnt_tensor_copy_to_host(q, got, nf4_bytes(n)));
    same_bytes(got, want, nf4_bytes(n), what);
    nnt_tensor_destroy(x), nnt_tensor_destroy(q);
    free(got);
}

/* _i = case * NQTILES + tiling: quantized from fp32 (and from bf16 for bf16vals) as
 * bitsandbytes quantizes, dequantized to fp32 and bf16 as it dequantizes, bitsandbytes'
 * bytes read in through nnt_tensor_copy_from_host */
START_TEST(test_quantize)
{
    const int c = _i / NQTILES, ti = _i % NQTILES;
    const int64_t rows = QCASES[c].rows, cols = QCASES[c].cols, n = rows * cols;
    const int64_t *tile = QTILES[ti];
    char key[64], what[128];
    nnt_st_reader *r = fixture_open_st_path(nf4_fixture("quant.safetensors"));
    snprintf(key, sizeof key, "src.%s", QCASES[c].name);
    float *src = fixture_read(r, key, NNT_IO_F32, NULL);
    snprintf(key, sizeof key, "codes.%s", QCASES[c].name);
    uint8_t *codes = fixture_read(r, key, NNT_IO_U8, NULL);
    snprintf(key, sizeof key, "absmax.%s", QCASES[c].name);
    float *absmax = fixture_read(r, key, NNT_IO_F32, NULL);
    unsigned char *want = malloc(nf4_bytes(n)), *got = malloc(nf4_bytes(n));
    memcpy(want, codes, (size_t)n / 2);
    memcpy(want + n / 2, absmax, (size_t)n / 64 * 4);

    snprintf(what, sizeof what, "%s tiling %d, from fp32", QCASES[c].name, ti);
    quantized_as(NNT_FP32, src, rows, cols, tile, want, what);
    if (strcmp(QCASES[c].name, "bf16vals") == 0) {   /* the same values held in bf16 */
        uint16_t *src16 = fixture_read(r, "src16.bf16vals", NNT_IO_BF16, NULL);
        snprintf(what, sizeof what, "%s tiling %d, from bf16", QCASES[c].name, ti);
        quantized_as(NNT_BF16, src16, rows, cols, tile, want, what);
        free(src16);
    }

    /* bitsandbytes' own bytes in, in another tiling; dequantized both ways */
    const int64_t *other = QTILES[(ti + 1) % NQTILES];
    nnt_tensor *p = make(NNT_NF4, rows, cols, other), *d32 = make(NNT_FP32, rows, cols, other);
    nnt_tensor *d16 = make(NNT_BF16, rows, cols, other);
    EXPECT_OK(nnt_tensor_copy_from_host(p, want, nf4_bytes(n)));
    EXPECT_OK(nnt_tensor_convert(p, d32));
    EXPECT_OK(nnt_tensor_convert(p, d16));
    snprintf(key, sizeof key, "deq32.%s", QCASES[c].name);
    float *deq32 = fixture_read(r, key, NNT_IO_F32, NULL), *g32 = malloc((size_t)n * 4);
    snprintf(key, sizeof key, "deq16.%s", QCASES[c].name);
    uint16_t *deq16 = fixture_read(r, key, NNT_IO_BF16, NULL), *g16 = malloc((size_t)n * 2);
    EXPECT_OK(nnt_tensor_copy_to_host(d32, g32, (size_t)n * 4));
    EXPECT_OK(nnt_tensor_copy_to_host(d16, g16, (size_t)n * 2));
    snprintf(what, sizeof what, "%s tiling %d, dequantized to fp32", QCASES[c].name, ti);
    same_bytes(g32, deq32, (size_t)n * 4, what);
    snprintf(what, sizeof what, "%s tiling %d, dequantized to bf16", QCASES[c].name, ti);
    same_bytes(g16, deq16, (size_t)n * 2, what);
    /* and out again as they came in */
    EXPECT_OK(nnt_tensor_copy_to_host(p, got, nf4_bytes(n)));
    snprintf(what, sizeof what, "%s tiling %d, host form", QCASES[c].name, ti);
    same_bytes(got, want, nf4_bytes(n), what);

    nnt_tensor_destroy(p), nnt_tensor_destroy(d32), nnt_tensor_destroy(d16);
    free(src), free(codes), free(absmax), free(want), free(got);
    free(deq32), free(g32), free(deq16), free(g16);
    nnt_st_close(r);
}
END_TEST

/* A product with an NF4 B gives the bits of the same product with B dequantized (to fp32
 * for float products, to bf16 for bf16 ones): x W^T (a linear's forward) and dy W (its
 * input gradient), in tiles that cut both; 19 rows, more than the row products take */
START_TEST(test_gemm)
{
    const nnt_precision precision = _i ? NNT_PRECISION_BF16 : NNT_PRECISION_FP32;
    const int64_t M = 19, N = 48, K = 192;
    EXPECT_OK(nnt_ctx_set_precision(ctx, precision));
    nnt_tensor *w32 = make(NNT_FP32, N, K, (int64_t[]){16, 64});
    nnt_tensor *w = make(NNT_NF4, N, K, (int64_t[]){16, 64});
    nnt_tensor *wd = make(_i ? NNT_BF16 : NNT_FP32, N, K, (int64_t[]){16, 64});
    EXPECT_OK(nnt_tensor_fill_normal(w32, 7, 0.0, 0.5));
    EXPECT_OK(nnt_tensor_convert(w32, w));
    EXPECT_OK(nnt_tensor_convert(w, wd));
    nnt_tensor *x = make(NNT_FP32, M, K, (int64_t[]){3, 64});
    nnt_tensor *dy = make(NNT_FP32, M, N, (int64_t[]){3, 16});
    EXPECT_OK(nnt_tensor_fill_normal(x, 8, 0.0, 1.0));
    EXPECT_OK(nnt_tensor_fill_normal(dy, 9, 0.0, 1.0));
    nnt_tensor *y[2] = {make(NNT_FP32, M, N, (int64_t[]){3, 16}),
                        make(NNT_FP32, M, N, (int64_t[]){3, 16})};
    nnt_tensor *dx[2] = {make(NNT_FP32, M, K, (int64_t[]){3, 64}),
                         make(NNT_FP32, M, K, (int64_t[]){3, 64})};
    for (int k = 0; k < 2; k++) {
        nnt_tensor *b = k ? wd : w;
        EXPECT_OK(nnt_tensor_gemm(NNT_NOTRANS, NNT_TRANS, 1.0, x, b, 0.0, y[k], 1, 0));
        EXPECT_OK(nnt_tensor_gemm(NNT_NOTRANS, NNT_NOTRANS, 1.0, dy, b, 0.0, dx[k], 1, 0));
    }
    float *y0 = test_to_host(y[0], NULL), *y1 = test_to_host(y[1], NULL);
    float *d0 = test_to_host(dx[0], NULL), *d1 = test_to_host(dx[1], NULL);
    ck_assert_msg(memcmp(y0, y1, (size_t)(M * N) * 4) == 0, "precision %d: x W^T with an NF4 W "
                  "differs from the product with W dequantized", (int)precision);
    ck_assert_msg(memcmp(d0, d1, (size_t)(M * K) * 4) == 0, "precision %d: dy W with an NF4 W "
                  "differs from the product with W dequantized", (int)precision);
    /* and the quantization shows: W in NF4 is not W */
    nnt_tensor *y32 = make(NNT_FP32, M, N, (int64_t[]){3, 16});
    EXPECT_OK(nnt_tensor_gemm(NNT_NOTRANS, NNT_TRANS, 1.0, x, w32, 0.0, y32, 1, 0));
    float *yf = test_to_host(y32, NULL);
    double e = test_rel_err(y0, yf, M * N);
    ck_assert_msg(e > 1e-3 && e < 0.2, "precision %d: NF4's product %.3g from fp32's", (int)precision, e);
    free(y0), free(y1), free(d0), free(d1), free(yf);
    nnt_tensor *all[] = {w32, w, wd, x, dy, y[0], y[1], dx[0], dx[1], y32};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        nnt_tensor_destroy(all[i]);
}
END_TEST

/* The row products of generation's decode steps (at most 16 rows, one sequence or several side
 * by side: the gemm codelet reads the NF4 tiles as they are, nnt_cpu_nf4_rows, x's rows 4 at a
 * time). _i = precision (fp32, bf16, tf32) * 3 + W's
 * tiling: k tiles of 64 summed one after the other; W whole (one task, k 192); rows of 96
 * in tiles of 2 rows (blocks cross rows: dequantized a group of rows at a time). One row
 * gives the bits of the product with W dequantized (under bf16 products, where AVX512-BF16
 * sums pairs, nearly: W dequantized to bf16), with the alpha, beta and bias of a linear; 7
 * rows (a group of 4, then 3) give each row's bits of one row, and the tasks that ran are the
 * NF4 codelet's; 17 rows are dequantized first (the tasks say so; the bits of the product on
 * W dequantized). One row of dy W (W not transposed) too. */
enum { XROWS = 7, XMANY = 17 };
/* With CUDA workers the products on a float W run on cuBLAS and the NF4 row products on the
 * CPU workers: the bits differ, the values agree within this (measured on an H200,
 * 2026-12-04: 1.5e-7 under fp32 precision, 1.2e-7 under tf32; dy W's one row: the same bits,
 * both dequantized first). */
#define TOL_ROWS_CUDA 1.5e-6
/* a row with an NF4 W (CPU) against the same product on a float W (the same bits on CPU
 * workers; within a tolerance where a CUDA worker took the float product) */
static void same_product(const float *nf4, const float *dequantized, int64_t n,
                         nnt_precision precision, int tiling, const char *what)
{
    int ncpus = 0, ncuda = 0;
    EXPECT_OK(nnt_ctx_workers(ctx, &ncpus, &ncuda));
    if (ncuda == 0) {
        ck_assert_msg(memcmp(nf4, dequantized, (size_t)n * 4) == 0, "precision %d tiling %d: "
                      "%s with an NF4 W differs from the product with W dequantized",
                      (int)precision, tiling, what);
        return;
    }
    double e = test_rel_err(nf4, dequantized, n);
    double tol = TOL_ROWS_CUDA;
    printf("test_nf4 rows: precision %d tiling %d %s: %.3g from W dequantized (a CUDA "
           "worker's product)\n", (int)precision, tiling, what, e);
    test_tol_note(__FILE__, __LINE__, e, tol);
    ck_assert_msg(e <= tol, "precision %d tiling %d: %s with an NF4 W %.3g from the product "
                  "with W dequantized on a CUDA worker", (int)precision, tiling, what, e);
}

START_TEST(test_gemm_rows)
{
    static const nnt_precision precisions[3] = {NNT_PRECISION_FP32, NNT_PRECISION_BF16,
                                                NNT_PRECISION_TF32};
    static const int64_t tilings[3][4] = {/* K, W's tile (rows, cols), x's k tile */
                                          {192, 16, 64, 64}, {192, 48, 192, 192},
                                          {96, 2, 96, 96}};
    const nnt_precision precision = precisions[_i / 3];
    const int64_t *tl = tilings[_i % 3], N = 48, K = tl[0];
    EXPECT_OK(nnt_ctx_set_precision(ctx, precision));
    nnt_tensor *w32 = make(NNT_FP32, N, K, (int64_t[]){tl[1], tl[2]});
    nnt_tensor *w = make(NNT_NF4, N, K, (int64_t[]){tl[1], tl[2]});
    nnt_tensor *wd = make(precision == NNT_PRECISION_BF16 ? NNT_BF16 : NNT_FP32, N, K,
                          (int64_t[]){tl[1], tl[2]});
    EXPECT_OK(nnt_tensor_fill_normal(w32, 11, 0.0, 0.5));
    EXPECT_OK(nnt_tensor_convert(w32, w));
    EXPECT_OK(nnt_tensor_convert(w, wd));
    int64_t bshape[1] = {N}, btile[1] = {tl[1]};
    nnt_tensor *bias = NULL;
    EXPECT_OK(nnt_tensor_create(ctx, NNT_FP32, 1, bshape, btile, &bias));
    EXPECT_OK(nnt_tensor_fill_normal(bias, 12, 0.0, 1.0));
    nnt_tensor *x = make(NNT_FP32, XMANY, K, (int64_t[]){XMANY, tl[3]});
    EXPECT_OK(nnt_tensor_fill_normal(x, 13, 0.0, 1.0));
    float *xs = test_to_host(x, NULL);
    test_make_tmpdir("nf4-rows");
    const char *table = test_tmp_path("table.txt");
    float *row[XROWS][2];   /* each row of x alone: NF4 W, dequantized W */
    for (int r = 0; r < XROWS; r++) {
        nnt_tensor *x1 = make(NNT_FP32, 1, K, (int64_t[]){1, tl[3]});
        EXPECT_OK(nnt_tensor_copy_from_host(x1, xs + r * K, (size_t)K * 4));
        for (int k = 0; k < 2; k++) {
            nnt_tensor *y = make(NNT_FP32, 1, N, (int64_t[]){1, tl[1]});
            EXPECT_OK(nnt_tensor_fill(y, 0.25 * (r + 1)));
            if (r == 0 && k == 0)
                EXPECT_OK(nnt_trace_start(ctx));
            /* y = 0.5 x W^T + 0.75 y, then + bias: a linear's product with its epilogue */
            EXPECT_OK(nnt_tensor_gemm(NNT_NOTRANS, NNT_TRANS, 0.5, x1, k ? wd : w, 0.75, y, 1,
                                      0));
            EXPECT_OK(nnt_tensor_gemm_ex(NNT_NOTRANS, NNT_TRANS, 1.0, x1, k ? wd : w, 1.0, y, 1,
                                         0, NNT_EPILOGUE_BIAS, bias, NULL));
            if (r == 0 && k == 0) {
                EXPECT_OK(nnt_trace_stop(ctx, NULL, table));
                ck_assert_int_eq(test_traced_count(table, "nnt_gemm_nf4"),
                                 2 * (N / tl[1]) * (K / tl[3]));
                /* nothing dequantized */
                ck_assert_int_eq(test_traced_count(table, "nnt_nf4"), 0);
            }
            row[r][k] = test_to_host(y, NULL);
            nnt_tensor_destroy(y);
        }
        if (precision == NNT_PRECISION_BF16) {   /* AVX512-BF16's dot products: their order */
            double e = test_rel_err(row[r][0], row[r][1], N);
            printf("test_nf4 rows: bf16 tiling %d row %d: %.3g from W dequantized\n", _i % 3, r,
                   e);
            ck_assert_msg(e < 1e-6, "bf16 tiling %d row %d: one row with an NF4 W %.3g from the "
                          "product with W dequantized", _i % 3, r, e);
        } else {
            char what[32];
            snprintf(what, sizeof what, "row %d", r);
            same_product(row[r][0], row[r][1], N, precision, _i % 3, what);
        }
        nnt_tensor_destroy(x1);
    }
    {   /* one row of dy W (W not transposed: dequantized first), as with W dequantized */
        nnt_tensor *dy = make(NNT_FP32, 1, N, (int64_t[]){1, tl[1]}), *dx[2];
        EXPECT_OK(nnt_tensor_copy_from_host(dy, xs, (size_t)N * 4));
        float *got[2];
        for (int k = 0; k < 2; k++) {
            dx[k] = make(NNT_FP32, 1, K, (int64_t[]){1, tl[2]});
            EXPECT_OK(nnt_tensor_gemm(NNT_NOTRANS, NNT_NOTRANS, 1.0, dy, k ? wd : w, 0.0, dx[k],
                                      1, 0));
            got[k] = test_to_host(dx[k], NULL);
        }
        same_product(got[0], got[1], K, precision, _i % 3, "one row of dy W");
        free(got[0]), free(got[1]);
        nnt_tensor_destroy(dy), nnt_tensor_destroy(dx[0]), nnt_tensor_destroy(dx[1]);
    }
    for (int many = 0; many < 2; many++) {   /* XROWS rows as they are, XMANY dequantized */
        const int64_t rows = many ? XMANY : XROWS;
        nnt_tensor *xr = make(NNT_FP32, rows, K, (int64_t[]){rows, tl[3]});
        nnt_tensor *yr = make(NNT_FP32, rows, N, (int64_t[]){rows, tl[1]});
        float *yinit = malloc((size_t)(rows * N) * 4);   /* each row's start as above */
        for (int64_t i = 0; i < rows * N; i++)
            yinit[i] = 0.25f * (float)(i / N + 1);
        EXPECT_OK(nnt_tensor_copy_from_host(xr, xs, (size_t)(rows * K) * 4));
        EXPECT_OK(nnt_tensor_copy_from_host(yr, yinit, (size_t)(rows * N) * 4));
        EXPECT_OK(nnt_trace_start(ctx));
        EXPECT_OK(nnt_tensor_gemm(NNT_NOTRANS, NNT_TRANS, 0.5, xr, w, 0.75, yr, 1, 0));
        EXPECT_OK(nnt_tensor_gemm_ex(NNT_NOTRANS, NNT_TRANS, 1.0, xr, w, 1.0, yr, 1, 0,
                                     NNT_EPILOGUE_BIAS, bias, NULL));
        EXPECT_OK(nnt_trace_stop(ctx, NULL, table));
        int64_t rows_tasks = test_traced_count(table, "nnt_gemm_nf4");
        int64_t dequant_tasks = test_traced_count(table, "nnt_nf4");
        ck_assert_msg(many ? rows_tasks == 0 && dequant_tasks > 0
                           : rows_tasks == 2 * (N / tl[1]) * (K / tl[3]) && dequant_tasks == 0,
                      "%lld rows: %lld row tasks, %lld dequantizations", (long long)rows,
                      (long long)rows_tasks, (long long)dequant_tasks);
        float *got = test_to_host(yr, NULL), *ref = NULL;
        if (many) {   /* the same product on W dequantized: the same bits */
            EXPECT_OK(nnt_tensor_copy_from_host(yr, yinit, (size_t)(rows * N) * 4));
            EXPECT_OK(nnt_tensor_gemm(NNT_NOTRANS, NNT_TRANS, 0.5, xr, wd, 0.75, yr, 1, 0));
            EXPECT_OK(nnt_tensor_gemm_ex(NNT_NOTRANS, NNT_TRANS, 1.0, xr, wd, 1.0, yr, 1, 0,
                                         NNT_EPILOGUE_BIAS, bias, NULL));
            ref = test_to_host(yr, NULL);
        }
        for (int r = 0; r < rows; r++)
            ck_assert_msg(memcmp(got + r * N, many ? ref + r * N : row[r][0],
                                 (size_t)N * 4) == 0, "precision %d tiling %d: row %d of %lld "
                          "rows differs from %s", (int)precision, _i % 3, r, (long long)rows,
                          many ? "the product on W dequantized" : "the row alone");
        free(ref);
        free(yinit), free(got);
        nnt_tensor_destroy(xr), nnt_tensor_destroy(yr);
    }
    free(xs);
    for (int r = 0; r < XROWS; r++)
        free(row[r][0]), free(row[r][1]);
    nnt_tensor *all[] = {w32, w, wd, bias, x};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        nnt_tensor_destroy(all[i]);
}
END_TEST

/* What NF4 tensors refuse, each with a message naming the function */
START_TEST(test_refusals)
{
    nnt_tensor *t = NULL, *q = make(NNT_NF4, 4, 128, (int64_t[]){2, 64});
    nnt_tensor *f = make(NNT_FP32, 4, 128, (int64_t[]){2, 64});
    int64_t bad_shape[2] = {3, 96}, tile32[2] = {4, 32};
    int64_t s3[3] = {4, 2, 32}, t3[3] = {1, 1, 32}, t3ok[3] = {1, 2, 32};
    /* blocks that the shape or the tiles would cut */
    EXPECT_FAIL_MSG(nnt_tensor_create(ctx, NNT_NF4, 2, bad_shape, NULL, &t), NNT_E_SHAPE,
                    "nnt_tensor_create");
    EXPECT_FAIL_MSG(nnt_tensor_create(ctx, NNT_NF4, 2, (int64_t[]){4, 128}, tile32, &t),
                    NNT_E_SHAPE, "nnt_tensor_create");
    EXPECT_FAIL_MSG(nnt_tensor_create(ctx, NNT_NF4, 3, s3, t3, &t), NNT_E_SHAPE,
                    "nnt_tensor_create");
    EXPECT_FAIL_MSG(nnt_tensor_create(ctx, NNT_NF4, 2, (int64_t[]){4, 96}, (int64_t[]){1, 96},
                                      &t), NNT_E_SHAPE, "nnt_tensor_create");
    /* runs of 2 rows of 96 (3 blocks), but the last tile one row (1.5 blocks) */
    EXPECT_FAIL_MSG(nnt_tensor_create(ctx, NNT_NF4, 2, (int64_t[]){3, 96}, (int64_t[]){2, 96},
                                      &t), NNT_E_SHAPE, "nnt_tensor_create");
    EXPECT_OK(nnt_tensor_create(ctx, NNT_NF4, 3, s3, t3ok, &t));   /* runs of 2 x 32 */
    nnt_tensor_destroy(t);
    /* one tile of 3 blocks, which cross rows (bitsandbytes' blocks of the flat tensor) */
    EXPECT_OK(nnt_tensor_create(ctx, NNT_NF4, 2, (int64_t[]){2, 96}, NULL, &t));
    nnt_tensor_destroy(t);
    /* unwritten, fills, copies, A of a product, the wrong host size, NF4 to NF4 */
    EXPECT_OK(nnt_tensor_fill(f, 1.0));
    EXPECT_FAIL_MSG(nnt_tensor_convert(q, f), NNT_E_STATE, "nnt_tensor_convert");
    EXPECT_FAIL_MSG(nnt_tensor_fill(q, 0.0), NNT_E_UNSUPPORTED, "nnt_tensor_fill");
    EXPECT_OK(nnt_tensor_convert(f, q));
    nnt_tensor *q2 = make(NNT_NF4, 4, 128, (int64_t[]){2, 64});
    EXPECT_FAIL_MSG(nnt_tensor_copy(q, q2), NNT_E_UNSUPPORTED, "nnt_tensor_copy");
    EXPECT_FAIL_MSG(nnt_tensor_convert(q, q2), NNT_E_SHAPE, "nnt_tensor_convert");
    nnt_tensor *c = make(NNT_FP32, 128, 128, (int64_t[]){64, 64});
    EXPECT_FAIL_MSG(nnt_tensor_gemm(NNT_TRANS, NNT_NOTRANS, 1.0, q, f, 0.0, c, 1, 0),
                    NNT_E_SHAPE, "nnt_tensor_gemm");
    unsigned char buf[4 * 128];
    EXPECT_FAIL_MSG(nnt_tensor_copy_to_host(q, buf, 4 * 128 * 4), NNT_E_SHAPE,
                    "nnt_tensor_copy_to_host");
    EXPECT_OK(nnt_tensor_copy_to_host(q, buf, nf4_bytes(4 * 128)));
    /* every value 1: code 15, absmax 1 */
    for (int i = 0; i < 4 * 128 / 2; i++)
        ck_assert_int_eq(buf[i], 0xff);
    float one = 1.0f;
    ck_assert(memcmp(buf + 4 * 128 / 2, &one, 4) == 0);
    nnt_dtype dt = NNT_FP32;
    EXPECT_OK(nnt_tensor_dtype(q, &dt));
    ck_assert_int_eq(dt, NNT_NF4);
    nnt_tensor_destroy(q), nnt_tensor_destroy(q2), nnt_tensor_destroy(f), nnt_tensor_destroy(c);
}
END_TEST

/* ---- a 4-bit base with LoRA adapters (QLoRA) ---------------------------------------------- */

enum { B = 2, T = 16, V = 64, STEPS = 10 };

/* tests/fixtures/nf4/a[/b] */
static const char *fx(const char *a, const char *b)
{
    static char path[4][4200];
    static int k;
    const char *top = getenv("top_srcdir");
    k = (k + 1) % 4;
    snprintf(path[k], sizeof path[k], "%s/tests/fixtures/nf4/%s%s%s", top ? top : ".", a,
             b ? "/" : "", b ? b : "");
    return path[k];
}

/* whole; hidden in blocks (64 of 128: down_proj's inputs cut in two), odd vocab and rows;
 * the same with recompute and rows of (1, 3). The heads stay whole: o_proj's inputs in tiles
 * of fewer than 4 heads of 16 would cut NF4's blocks (test_refusals) */
static const struct {
    nnt_tiling t;
    int64_t tok[2];
    int recompute;
} QLORA_TILINGS[3] = {
    {{sizeof(nnt_tiling), 0, 0, 0, 0, 0, 0, 0}, {B, T}, 0},
    {{sizeof(nnt_tiling), 2, 5, 64, 64, 9, 0, 0}, {2, 5}, 0},
    {{sizeof(nnt_tiling), 1, 3, 64, 64, 32, 0, 0}, {1, 3}, 1},
};

/* The Llama base of the fixture, its matrices frozen in NF4 (tiling ti) */
static nnt_layer *nf4_llama(int ti)
{
    nnt_layer *l = NULL;
    int64_t n = 0;
    EXPECT_OK(nnt_model_load_hf(ctx, fx("llama", NULL), B, T, &QLORA_TILINGS[ti].t, &l));
    EXPECT_OK(nnt_layer_freeze(l, "*", NNT_FREEZE_NF4, &n));
    if (QLORA_TILINGS[ti].recompute)
        EXPECT_OK(nnt_layer_set_recompute(l, 1));
    return l;
}

/* How many parameters of l are held in NF4, and that the untied head is not */
static int count_nf4(nnt_layer *l)
{
    int64_t count = 0;
    int nf4 = 0;
    EXPECT_OK(nnt_layer_num_params(l, &count, NULL));
    for (int64_t i = 0; i < count; i++) {
        nnt_param_info p = test_param_at(l, i);
        nnt_dtype dt = NNT_FP32;
        EXPECT_OK(nnt_tensor_dtype(p.value, &dt));
        nf4 += dt == NNT_NF4;
        if (strstr(p.name, "lm_head") || strstr(p.name, "embed") || strstr(p.name, "norm"))
            ck_assert_msg(dt == NNT_FP32, "%s is not kept in fp32", p.name);
    }
    return nf4;
}

/* A tiling whose o_proj tiles hold 2 heads of 16 (runs of 32 values) refused by name before
 * anything changes, frozen before keeping fp32 values or not */
START_TEST(test_qlora_tiling_refused)
{
    nnt_tiling t = QLORA_TILINGS[0].t;
    t.heads = 2;
    nnt_layer *l = NULL;
    EXPECT_OK(nnt_model_load_hf(ctx, fx("llama", NULL), B, T, &t, &l));
    if (_i)
        EXPECT_OK(nnt_layer_freeze(l, "*", NNT_FREEZE_KEEP_FP32, NULL));
    EXPECT_FAIL_MSG(nnt_layer_freeze(l, "*", NNT_FREEZE_NF4, NULL), NNT_E_SHAPE,
                    "nnt_layer_freeze");
    ck_assert_msg(strstr(nnt_ctx_last_error(NULL), "o_proj.weight") != NULL, "%s",
                  nnt_ctx_last_error(NULL));
    ck_assert_int_eq(count_nf4(l), 0);
    nnt_layer_destroy(l);
}
END_TEST

/* _i = tiling: the logits of the NF4 base against transformers' 4-bit model's
 * (BitsAndBytesConfig nf4, compute in fp32) */
START_TEST(test_qlora_logits)
{
    nnt_st_reader *r = fixture_open_st_path(fx("qlora.reference.safetensors", NULL));
    int32_t *tok = fixture_read_n(r, "tokens", NNT_IO_I32, NULL);
    int64_t n = 0;
    float *want = fixture_read_n(r, "nf4_logits", NNT_IO_F32, &n);
    float *plain = fixture_read_n(r, "base_logits", NNT_IO_F32, NULL);
    nnt_layer *l = nf4_llama(_i);
    ck_assert_int_eq(count_nf4(l), 2 * 7);   /* q, k, v, o, gate, up, down of 2 blocks */
    float *got = fixture_logits(ctx, l, B, T, tok, QLORA_TILINGS[_i].tok);
    double e = test_rel_err(got, want, n), e_plain = test_rel_err(got, plain, n);
    printf("test_nf4 qlora logits tiling %d: rel %.2e against bitsandbytes' (%.2e against the "
           "unquantized base's)\n", _i, e, e_plain);
    /* measured: 9.8e-7 (the quantization itself moves them by e_plain, 0.53) */
    EXPECT_TOL(e, 1e-5, "tiling %d: NF4 logits", _i);
    ck_assert_msg(e_plain > 1e-2, "tiling %d: the base was not quantized (%.3g)", _i, e_plain);
    nnt_layer_destroy(l);
    free(tok), free(want), free(plain), free(got);
    nnt_st_close(r);
}
END_TEST

/* QLoRA, and QDoRA (PEFT's use_dora on the 4-bit base: the norms of the dequantized rows) */
static const char *const ADAPTER_CASES[2] = {"qlora", "qdora"};
/* the adapters' tolerance: qlora measured 9.2e-6 (layer 1's q_proj B); qdora 6.9e-5 (layer
 * 1's q_proj A: Adam amplifies rounding where a gradient is near 0, and DoRA's norms are
 * sums of another order than PyTorch's) */
static const double ADAPTER_TOLS[2] = {1e-4, 7e-4};

/* _i = case * 3 + tiling: PEFT's initial adapter on the NF4 base, 10 AdamW steps against
 * PEFT's on transformers' 4-bit model; the frozen base unchanged */
START_TEST(test_qlora_train)
{
    const char *name = ADAPTER_CASES[_i / 3];
    char refname[64];
    snprintf(refname, sizeof refname, "%s.reference.safetensors", name);
    nnt_st_reader *r = fixture_open_st_path(fx(refname, NULL));
    int ti = _i % 3;
    nnt_layer *l = nf4_llama(ti);
    EXPECT_OK(nnt_model_load_peft(l, fx(name, "init")));
    ck_assert_int_eq(count_nf4(l), 2 * 7);
    nnt_optim *opt = fixture_peft_adamw(ctx, l);
    double eloss = fixture_peft_train(ctx, l, opt, r, B, T, STEPS, QLORA_TILINGS[ti].tok);
    test_make_tmpdir("nf4");
    EXPECT_OK(nnt_model_save_peft(l, test_tmp_path("trained")));
    char worst[300] = "", file[4300];
    snprintf(file, sizeof file, "%s/adapter_model.safetensors", test_tmp_path("trained"));
    double ea = fixture_compare_files(file, fx(name, "trained/adapter_model.safetensors"), 1,
                                      worst, sizeof worst);
    int32_t *tok = fixture_read_n(r, "tokens", NNT_IO_I32, NULL);
    int64_t n = 0;
    float *want = fixture_read_n(r, "logits", NNT_IO_F32, &n);
    float *got = fixture_logits(ctx, l, B, T, tok, QLORA_TILINGS[ti].tok);
    double el = test_rel_err(got, want, n);
    printf("test_nf4 %s tiling %d: losses rel %.2e, adapters rel %.2e (%s), logits %.2e\n",
           name, ti, eloss, ea, worst, el);
    /* measured: losses 3.3e-7 (qdora 4.1e-7), logits 3.2e-6 (4.3e-6) */
    EXPECT_TOL(eloss, 5e-6, "%s tiling %d: losses", name, ti);
    EXPECT_TOL(ea, ADAPTER_TOLS[_i / 3], "%s tiling %d: adapter %s", name, ti, worst);
    EXPECT_TOL(el, 3e-5, "%s tiling %d: trained logits", name, ti);
    ck_assert_int_eq(count_nf4(l), 2 * 7);
    /* merged into the NF4 base (quantized again), as PEFT's merge_and_unload */
    EXPECT_OK(nnt_model_lora_merge(l));
    ck_assert_int_eq(count_nf4(l), 2 * 7);
    float *wm = fixture_read_n(r, "merged_logits", NNT_IO_F32, NULL);
    float *gm = fixture_logits(ctx, l, B, T, tok, QLORA_TILINGS[ti].tok);
    double em = test_rel_err(gm, wm, n), moved = test_rel_err(wm, want, n);
    printf("test_nf4 %s tiling %d: merged logits rel %.2e (the merge moves them by %.2e)\n",
           name, ti, em, moved);
    /* measured: 1.4e-6, qdora 2.0e-6 (every weight quantized again to bitsandbytes' codes) */
    EXPECT_TOL(em, 1e-5, "%s tiling %d: merged logits", name, ti);
    test_remove_tmpdir();
    free(tok), free(want), free(got), free(wm), free(gm);
    nnt_optim_destroy(opt);
    nnt_layer_destroy(l);
    nnt_st_close(r);
}
END_TEST

/* ---- bitsandbytes' 4-bit checkpoints ---------------------------------------------------- */

/* The logits of the checkpoint dir (fx) read into a model of its configuration: as floats
 * (nf4 0: bitsandbytes' values dequantized) or into matrices frozen in NF4 first (nf4 1) */
static float *checkpoint_logits(const char *dir, int nf4, nnt_layer **out)
{
    nnt_model_config cfg = NNT_MODEL_CONFIG_INIT;
    nnt_layer *l = NULL;
    EXPECT_OK(nnt_model_hf_config(ctx, fx(dir, NULL), &cfg));
    EXPECT_OK(nnt_model_create_empty(ctx, &cfg, B, T, &QLORA_TILINGS[1].t, &l));
    if (nf4)
        EXPECT_OK(nnt_layer_freeze(l, "*", NNT_FREEZE_NF4, NULL));
    EXPECT_OK(nnt_model_read_hf(l, fx(dir, NULL)));
    nnt_st_reader *r = fixture_open_st_path(fx("qlora.reference.safetensors", NULL));
    int32_t *tok = fixture_read_n(r, "tokens", NNT_IO_I32, NULL);
    float *got = fixture_logits(ctx, l, B, T, tok, QLORA_TILINGS[1].tok);
    free(tok);
    nnt_st_close(r);
    *out = l;
    return got;
}

/* The host form of model parameter name (NF4) against the checkpoint's codes and absmax */
static void same_as_file(nnt_layer *l, const char *dir, const char *name)
{
    int64_t count = 0;
    nnt_tensor *v = NULL;
    EXPECT_OK(nnt_layer_num_params(l, &count, NULL));
    for (int64_t i = 0; i < count && !v; i++) {
        nnt_param_info p = test_param_at(l, i);
        if (strcmp(p.name, name) == 0)
            v = p.value;
    }
    ck_assert_msg(v != NULL, "no parameter %s", name);
    int64_t n = 0;
    EXPECT_OK(nnt_tensor_numel(v, &n));
    char key[256];
    nnt_st_reader *r = fixture_open_st_path(fx(dir, "model.safetensors"));
    uint8_t *codes = fixture_read(r, name, NNT_IO_U8, NULL);
    snprintf(key, sizeof key, "%s.absmax", name);
    float *absmax = fixture_read(r, key, NNT_IO_F32, NULL);
    unsigned char *got = malloc(nf4_bytes(n)), *want = malloc(nf4_bytes(n));
    memcpy(want, codes, (size_t)n / 2);
    memcpy(want + n / 2, absmax, (size_t)n / 64 * 4);
    EXPECT_OK(nnt_tensor_copy_to_host(v, got, nf4_bytes(n)));
    same_bytes(got, want, nf4_bytes(n), name);
    free(codes), free(absmax), free(got), free(want);
    nnt_st_close(r);
}

/* llama_bnb (fp32 absmax) and llama_bnb_dq (double quantization): as floats, their logits
 * are transformers' 4-bit model's; read into NF4 matrices, the same, and the codes and absmax
 * of the file kept as they are */
START_TEST(test_bnb_checkpoint)
{
    const char *dir = _i ? "llama_bnb_dq" : "llama_bnb";
    nnt_st_reader *r = fixture_open_st_path(fx("qlora.reference.safetensors", NULL));
    int64_t n = 0;
    float *want = fixture_read_n(r, _i ? "dq_logits" : "nf4_logits", NNT_IO_F32, &n);
    nnt_layer *plain = NULL, *quantized = NULL;
    float *got = checkpoint_logits(dir, 0, &plain);
    float *got4 = checkpoint_logits(dir, 1, &quantized);
    ck_assert_int_eq(count_nf4(plain), 0);
    ck_assert_int_eq(count_nf4(quantized), 2 * 7);
    double e = test_rel_err(got, want, n), e4 = test_rel_err(got4, want, n);
    printf("test_nf4 %s: logits rel %.2e as floats, %.2e in NF4\n", dir, e, e4);
    /* measured: 9.7e-7 both ways (llama_bnb), 1.0e-6 (llama_bnb_dq) */
    EXPECT_TOL(e, 1e-5, "%s as floats", dir);
    EXPECT_TOL(e4, 1e-5, "%s in NF4", dir);
    if (!_i)   /* fp32 absmax: the file's bytes themselves */
        same_as_file(quantized, dir, "model.layers.1.mlp.down_proj.weight");
    nnt_layer_destroy(plain), nnt_layer_destroy(quantized);
    free(want), free(got), free(got4);
    nnt_st_close(r);
}
END_TEST

/* A copy of llama_bnb in dir with entry `drop` left out, entry `zero` zeroed and entry `bf16`
 * (U8) stored as BF16 of its bytes (NULL: none) */
static void write_broken(const char *dir, const char *drop, const char *zero, const char *bf16)
{
    char err[NNT_IO_ERRLEN], path[4300];
    test_make_tmpdir("bnb");
    snprintf(path, sizeof path, "%s", test_tmp_path(dir));
    mkdir(path, 0755);
    nnt_st_reader *r = fixture_open_st_path(fx("llama_bnb", "model.safetensors"));
    nnt_st_writer *w = NULL;
    snprintf(path, sizeof path, "%s/model.safetensors", test_tmp_path(dir));
    ck_assert_int_eq(nnt_st_writer_begin(path, &w, err, sizeof err), 0);
    void **bufs = calloc(nnt_st_count(r), sizeof *bufs);   /* written at the finish */
    for (size_t i = 0; i < nnt_st_count(r); i++) {
        const nnt_st_entry *e = nnt_st_entry_at(r, i);
        if (drop && strcmp(e->name, drop) == 0)
            continue;
        bufs[i] = fixture_read(r, e->name, e->dtype, NULL);
        if (zero && strcmp(e->name, zero) == 0)
            memset(bufs[i], 0, (size_t)e->nbytes);
        int64_t half[2] = {e->shape[0] / 2, 1};
        int packed = bf16 && strcmp(e->name, bf16) == 0;   /* bnb_4bit_quant_storage bf16 */
        ck_assert_int_eq(nnt_st_writer_add(w, e->name, packed ? NNT_IO_BF16 : e->dtype, e->ndim,
                                           packed ? half : e->shape, bufs[i], err, sizeof err),
                         0);
    }
    ck_assert_int_eq(nnt_st_writer_finish(w, err, sizeof err), 0);
    for (size_t i = 0; i < nnt_st_count(r); i++)
        free(bufs[i]);
    free(bufs);
    nnt_st_close(r);
    FILE *in = fopen(fx("llama_bnb", "config.json"), "rb");
    snprintf(path, sizeof path, "%s/config.json", test_tmp_path(dir));
    FILE *out = fopen(path, "wb");
    ck_assert(in && out);
    char block[4096];
    size_t k;
    while ((k = fread(block, 1, sizeof block, in)) > 0)
        ck_assert_uint_eq(fwrite(block, 1, k, out), k);
    fclose(in), fclose(out);
}

/* A 4-bit weight without its absmax, without its quant state, whose code table is not
 * NF4's, or packed in bf16: refused naming it */
START_TEST(test_bnb_refusals)
{
    const char *w = "model.layers.0.self_attn.q_proj.weight";
    char name[32];
    static const struct {
        const char *drop, *zero, *bf16, *says;
        int rc;
    } cases[] = {{".absmax", NULL, NULL, "absmax", NNT_E_FORMAT},
                 {NULL, ".quant_map", NULL, "NF4's table", NNT_E_UNSUPPORTED},
                 {".quant_state.bitsandbytes__nf4", NULL, NULL, "is U8", NNT_E_UNSUPPORTED},
                 {NULL, NULL, "", "packed in BF16", NNT_E_UNSUPPORTED}};
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        char drop[256] = "", zero[256] = "", bf16[256] = "";
        if (cases[c].drop)
            snprintf(drop, sizeof drop, "%s%s", w, cases[c].drop);
        if (cases[c].zero)
            snprintf(zero, sizeof zero, "%s%s", w, cases[c].zero);
        if (cases[c].bf16)
            snprintf(bf16, sizeof bf16, "%s%s", w, cases[c].bf16);
        snprintf(name, sizeof name, "broken%zu", c);
        write_broken(name, *drop ? drop : NULL, *zero ? zero : NULL, *bf16 ? bf16 : NULL);
        nnt_layer *l = NULL;
        EXPECT_FAIL_MSG(nnt_model_load_hf(ctx, test_tmp_path(name), B, T, NULL, &l),
                        cases[c].rc, "nnt_model_load_hf");
        ck_assert_ptr_null(l);
        const char *msg = nnt_ctx_last_error(NULL);
        ck_assert_msg(strstr(msg, cases[c].says) && strstr(msg, "q_proj"), "case %zu: '%s'", c,
                      msg);
        test_remove_tmpdir();
    }
}
END_TEST

/* Double quantization over two nested blocks (quant.safetensors' dq case: 260 blocks of 64,
 * nested blocks of 256): nnt_bnb4_read of a weight stored as a checkpoint stores it gives
 * table[code] times bitsandbytes' dequantized absmax, in whole and in parts */
START_TEST(test_bnb_nested)
{
    char err[NNT_IO_ERRLEN], path[4300];
    nnt_st_reader *r = fixture_open_st_path(nf4_fixture("quant.safetensors"));
    int64_t n2 = 0, nb = 0;
    uint8_t *codes = fixture_read_n(r, "dq.codes", NNT_IO_U8, &n2);
    uint8_t *a8 = fixture_read_n(r, "dq.absmax8", NNT_IO_U8, &nb);
    float *nested = fixture_read(r, "dq.nested_absmax", NNT_IO_F32, NULL);
    float *offset = fixture_read(r, "dq.offset", NNT_IO_F32, NULL);
    float *ncode = fixture_read(r, "dq.nested_code", NNT_IO_F32, NULL);
    float *absmax = fixture_read(r, "dq.absmax", NNT_IO_F32, NULL);
    float *table = fixture_read(r, "nf4_code", NNT_IO_F32, NULL);
    const int64_t n = 2 * n2;
    ck_assert_int_eq(n, 2 * 8320);
    ck_assert_int_eq(nb, 260);
    char state[256];
    int len = snprintf(state, sizeof state, "{\"quant_type\": \"nf4\", \"blocksize\": 64, "
                       "\"dtype\": \"float32\", \"shape\": [2, 8320], \"nested_blocksize\": "
                       "256, \"nested_dtype\": \"float32\", \"nested_offset\": %.9g}",
                       (double)offset[0]);
    test_make_tmpdir("dq");
    snprintf(path, sizeof path, "%s", test_tmp_path("w.safetensors"));
    nnt_st_writer *w = NULL;
    ck_assert_int_eq(nnt_st_writer_begin(path, &w, err, sizeof err), 0);
    const struct {
        const char *name;
        nnt_io_dtype dtype;
        int64_t n;
        const void *data;
    } parts[] = {{"w", NNT_IO_U8, n2, codes}, {"w.absmax", NNT_IO_U8, nb, a8},
                 {"w.nested_absmax", NNT_IO_F32, 2, nested},
                 {"w.nested_quant_map", NNT_IO_F32, 256, ncode},
                 {"w.quant_map", NNT_IO_F32, 16, table},
                 {"w.quant_state.bitsandbytes__nf4", NNT_IO_U8, len, state}};
    for (size_t i = 0; i < sizeof parts / sizeof parts[0]; i++)
        ck_assert_int_eq(nnt_st_writer_add(w, parts[i].name, parts[i].dtype, 1, &parts[i].n,
                                           parts[i].data, err, sizeof err), 0);
    ck_assert_int_eq(nnt_st_writer_finish(w, err, sizeof err), 0);
    nnt_hf_weights *hw = NULL;
    EXPECT_OK(nnt_hf_weights_open_file(ctx, "test", path, &hw));
    const nnt_st_entry *e = nnt_hf_weights_find(hw, "w", NULL, NULL);
    ck_assert_ptr_nonnull(e);
    nnt_bnb4 q;
    ck_assert_int_eq(nnt_bnb4_find(ctx, "test", hw, e, path, &q), 1);
    ck_assert_int_eq(q.nested, 1);
    float *got = malloc((size_t)n * sizeof *got);
    EXPECT_OK(nnt_bnb4_read(ctx, "test", path, &q, 0, n, got));
    for (int64_t i = 0; i < n; i++) {
        int code = (codes[i / 2] >> (i % 2 ? 0 : 4)) & 15;
        float want = table[code] * absmax[i / 64];
        ck_assert_msg(memcmp(&got[i], &want, 4) == 0, "value %lld: %.9g, bitsandbytes' %.9g",
                      (long long)i, (double)got[i], (double)want);
    }
    /* a part that starts in the second nested block */
    EXPECT_OK(nnt_bnb4_read(ctx, "test", path, &q, 64 * 257, 64 * 3, got));
    for (int64_t i = 0; i < 64 * 3; i++) {
        int64_t k = 64 * 257 + i;
        float want = table[(codes[k / 2] >> (k % 2 ? 0 : 4)) & 15] * absmax[k / 64];
        ck_assert(memcmp(&got[i], &want, 4) == 0);
    }
    EXPECT_FAIL_MSG(nnt_bnb4_read(ctx, "test", path, &q, 32, 64, got), NNT_E_FORMAT, "test");
    nnt_hf_weights_close(hw);
    test_remove_tmpdir();
    free(codes), free(a8), free(nested), free(offset), free(ncode), free(absmax), free(table);
    free(got);
    nnt_st_close(r);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("nf4");
    TCase *tc = tcase_create("nf4");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 300);
    tcase_add_loop_test(tc, test_quantize, 0, NQCASES * NQTILES);
    tcase_add_loop_test(tc, test_gemm, 0, 2);
    tcase_add_loop_test(tc, test_gemm_rows, 0, 9);
    tcase_add_test(tc, test_refusals);
    tcase_add_loop_test(tc, test_qlora_tiling_refused, 0, 2);
    tcase_add_loop_test(tc, test_qlora_logits, 0, 3);
    tcase_add_loop_test(tc, test_qlora_train, 0, 6);
    tcase_add_loop_test(tc, test_bnb_checkpoint, 0, 2);
    tcase_add_test(tc, test_bnb_refusals);
    tcase_add_test(tc, test_bnb_nested);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) { return run_suite(suite()); }
