/* SPDX-License-Identifier: MIT */
/* Models from training checkpoints (public API only): nnt_train_state_save records the model's
 * configuration when the optimizer holds exactly one model's parameters (format version 2),
 * nnt_model_train_state_config reads it back, nnt_model_load_train_state rebuilds the model
 * with the saved parameters on another tiling; files without a model, damaged files and
 * misuse are refused with clear messages, nothing created. */
#include "testutil.h"

#include <math.h>
#include <stdio.h>

static nnt_ctx *ctx;

static void setup(void)
{
    ctx = test_ctx();
    test_make_tmpdir("ckpt");
}

static void teardown(void)
{
    EXPECT_OK(nnt_ctx_destroy(ctx));
    ctx = NULL;
    test_remove_tmpdir();
}

enum { B = 2, T = 8, STEPS = 2 };

/* Case 0: a Llama variant with every field away from its default (GQA, untied, q/k/v biases,
 * eps 1e-6, theta 5e5, llama3 scaling with other factors); case 1: GPT-2 "tiny". */
static nnt_model_config case_config(int i)
{
    nnt_model_config c;
    EXPECT_OK(nnt_model_preset(i == 0 ? "llama-tiny" : "tiny", &c));
    if (i == 0) {
        c.vocab = 61, c.tied = 0, c.qkv_bias = 1, c.out_bias = 1, c.hidden = 40;
        c.norm_eps = 1e-6, c.max_seq = 32;
        c.rope.theta = 500000.0, c.rope.scaling = NNT_ROPE_SCALING_LLAMA3;
        c.rope.factor = 4.0, c.rope.low_freq_factor = 0.5, c.rope.high_freq_factor = 3.0;
        c.rope.original_max_position = 16;
    } else {
        c.vocab = 67, c.max_seq = 16;
    }
    return c;
}

static const nnt_tiling TILING_A = {sizeof(nnt_tiling), 1, 4, 16, 24, 20, 1, 0};
static const nnt_tiling TILING_B = {sizeof(nnt_tiling), 2, 8, 0, 0, 0, 0, 0};

/* STEPS AdamW updates of model on a fixed batch (moments in the file). */
static void train(nnt_layer *model, nnt_optim *opt, int64_t vocab)
{
    int32_t ids[B * (T + 1)];
    for (int i = 0; i < B * (T + 1); i++)
        ids[i] = (int32_t)((i * 5 + i / 3) % vocab);
    nnt_tensor *x = NULL, *y = NULL;
    int64_t shape[2] = {B, T};
    EXPECT_OK(nnt_tensor_create(ctx, NNT_INT32, 2, shape, NULL, &x));
    EXPECT_OK(nnt_tensor_create(ctx, NNT_INT32, 2, shape, NULL, &y));
    EXPECT_OK(nnt_tensor_copy_from_host(x, ids, sizeof(int32_t) * B * T));
    EXPECT_OK(nnt_tensor_copy_from_host(y, ids + 1, sizeof(int32_t) * B * T));
    for (int s = 0; s < STEPS; s++) {
        EXPECT_OK(nnt_layer_zero_grad(model));
        EXPECT_OK(nnt_layer_set_targets(model, y));
        EXPECT_OK(nnt_layer_forward(model, x, NULL));
        EXPECT_OK(nnt_layer_backward(model, NULL, NULL));
        EXPECT_OK(nnt_optim_step(opt));
    }
    nnt_tensor_destroy(x);
    nnt_tensor_destroy(y);
}

/* A trained model of case i saved at path (options "run 7"); the model is returned. */
static nnt_layer *saved_model(int i, const char *path, int64_t steps)
{
    nnt_model_config c = case_config(i);
    nnt_layer *m = NULL;
    EXPECT_OK(nnt_model_create(ctx, &c, B, T, &TILING_A, &m));
    EXPECT_OK(nnt_layer_init(m, 11));
    nnt_optim *opt = NULL;
    EXPECT_OK(nnt_optim_create(ctx, NULL, &opt));
    EXPECT_OK(nnt_optim_add_layer(opt, m));
    if (steps)
        train(m, opt, c.vocab);
    nnt_train_state st = NNT_TRAIN_STATE_INIT;
    st.data_pos = 1234, st.rng[2] = 99;
    st.options = "run 7";
    EXPECT_OK(nnt_train_state_save(opt, path, &st));
    nnt_optim_destroy(opt);
    return m;
}

static void expect_same_config(const nnt_model_config *a, const nnt_model_config *b)
{
    ck_assert_int_eq(a->family, b->family);
    ck_assert_int_eq(a->vocab, b->vocab);
    ck_assert_int_eq(a->max_seq, b->max_seq);
    ck_assert_int_eq(a->layers, b->layers);
    ck_assert_int_eq(a->heads, b->heads);
    ck_assert_int_eq(a->kv_heads ? a->kv_heads : a->heads, b->kv_heads ? b->kv_heads : b->heads);
    ck_assert_int_eq(a->channels, b->channels);
    ck_assert_int_eq(a->hidden ? a->hidden : 4 * a->channels,
                     b->hidden ? b->hidden : 4 * b->channels);
    ck_assert(a->norm_eps == b->norm_eps);
    ck_assert_int_eq(a->tied, b->tied);
    ck_assert_int_eq(a->qkv_bias, b->qkv_bias);
    ck_assert_int_eq(a->out_bias, b->out_bias);
    ck_assert_int_eq(a->mlp_bias, b->mlp_bias);
    if (a->family == NNT_FAMILY_LLAMA) {
        ck_assert(a->rope.theta == b->rope.theta);
        ck_assert_int_eq(a->rope.scaling, b->rope.scaling);
        ck_assert(a->rope.factor == b->rope.factor);
        ck_assert(a->rope.low_freq_factor == b->rope.low_freq_factor);
        ck_assert(a->rope.high_freq_factor == b->rope.high_freq_factor);
        ck_assert_int_eq(a->rope.original_max_position, b->rope.original_max_position);
    }
}

/* Every parameter of a and b: same names, bit-identical values. */
static void expect_same_params(nnt_layer *a, nnt_layer *b)
{
    int64_t na = 0, nb = 0;
    EXPECT_OK(nnt_layer_num_params(a, &na, NULL));
    EXPECT_OK(nnt_layer_num_params(b, &nb, NULL));
    ck_assert_int_eq(na, nb);
    for (int64_t i = 0; i < na; i++) {
        nnt_param_info pa = test_param_at(a, i), pb = test_param_at(b, i);
        ck_assert_str_eq(pa.name, pb.name);
        int64_t n = 0, m = 0;
        float *va = test_to_host(pa.value, &n), *vb = test_to_host(pb.value, &m);
        ck_assert_int_eq(n, m);
        ck_assert_msg(memcmp(va, vb, (size_t)n * sizeof(float)) == 0, "%s differs", pa.name);
        free(va);
        free(vb);
    }
}

START_TEST(test_roundtrip)
{
    const char *path = test_tmp_path("ckpt.safetensors");
    nnt_layer *m = saved_model(_i, path, STEPS);
    nnt_model_config want, got;
    EXPECT_OK(nnt_model_config_of(m, &want));
    EXPECT_OK(nnt_model_train_state_config(NULL, path, &got));   /* no context needed */
    expect_same_config(&want, &got);
    memset(&got, 0xab, sizeof got);   /* the whole structure written, reserved words 0 */
    EXPECT_OK(nnt_model_train_state_config(ctx, path, &got));
    expect_same_config(&want, &got);
    for (size_t i = 0; i < sizeof got.reserved / sizeof got.reserved[0]; i++)
        ck_assert_msg(got.reserved[i] == 0, "reserved[%zu] 0x%llx", i,
                      (unsigned long long)got.reserved[i]);
    for (size_t i = 0; i < sizeof got.rope.reserved / sizeof got.rope.reserved[0]; i++)
        ck_assert(got.rope.reserved[i] == 0);

    /* the caller's section alone, without a context */
    nnt_train_state info = NNT_TRAIN_STATE_INIT;
    EXPECT_OK(nnt_train_state_info(NULL, path, &info));
    ck_assert_str_eq(info.options, "run 7");
    ck_assert_uint_eq(info.data_pos, 1234);
    ck_assert_uint_eq(info.rng[2], 99);
    nnt_train_state_clear(&info);

    /* rebuilt on another tiling and (B, T): the same parameters, the caller's section */
    nnt_train_state st = NNT_TRAIN_STATE_INIT;
    nnt_layer *back = NULL;
    EXPECT_OK(nnt_model_load_train_state(ctx, path, 1, 5, &TILING_B, &st, &back));
    ck_assert_ptr_nonnull(back);
    ck_assert_str_eq(st.options, "run 7");
    ck_assert_uint_eq(st.data_pos, 1234);
    ck_assert_uint_eq(st.rng[2], 99);
    nnt_train_state_clear(&st);
    nnt_model_config back_cfg;
    EXPECT_OK(nnt_model_config_of(back, &back_cfg));
    expect_same_config(&want, &back_cfg);
    nnt_layer_kind k0, k1;
    EXPECT_OK(nnt_layer_kind_of(m, &k0));
    EXPECT_OK(nnt_layer_kind_of(back, &k1));
    ck_assert_int_eq(k0, k1);
    expect_same_params(m, back);

    /* the same greedy continuation as the trained model */
    int32_t prompt[3] = {1, 2, 3}, g0[4], g1[4];
    EXPECT_OK(nnt_model_generate(m, prompt, 3, 4, NULL, g0));
    EXPECT_OK(nnt_model_generate(back, prompt, 3, 4, NULL, g1));
    ck_assert(memcmp(g0, g1, sizeof g0) == 0);

    /* a rebuilt model records itself again; the file resumes an optimizer over it */
    nnt_optim *opt = NULL;
    EXPECT_OK(nnt_optim_create(ctx, NULL, &opt));
    EXPECT_OK(nnt_optim_add_layer(opt, back));
    EXPECT_OK(nnt_train_state_load(opt, path, NULL));
    nnt_optim_stats stats = {sizeof stats, 0, 0, 0};
    EXPECT_OK(nnt_optim_stats_get(opt, &stats));
    ck_assert_int_eq(stats.step, STEPS);
    const char *again = test_tmp_path("again.safetensors");
    EXPECT_OK(nnt_train_state_save(opt, again, NULL));
    EXPECT_OK(nnt_model_train_state_config(ctx, again, &got));
    expect_same_config(&want, &got);
    nnt_optim_destroy(opt);
    nnt_layer_destroy(back);
    nnt_layer_destroy(m);
}
END_TEST

/* A state saved before any update (no moments) rebuilds the initial model. */
START_TEST(test_step0)
{
    const char *path = test_tmp_path("step0.safetensors");
    nnt_layer *m = saved_model(1, path, 0);
    nnt_layer *back = NULL;
    EXPECT_OK(nnt_model_load_train_state(ctx, path, B, T, NULL, NULL, &back));
    expect_same_params(m, back);
    nnt_layer_destroy(back);
    nnt_layer_destroy(m);
}
END_TEST

/* Files whose optimizer did not hold one model alone record none (version 1, as before). */
START_TEST(test_no_model)
{
    nnt_model_config c = case_config(1), got;
    nnt_layer *m = NULL, *other = NULL;
    EXPECT_OK(nnt_model_create(ctx, &c, B, T, NULL, &m));
    EXPECT_OK(nnt_model_create(ctx, &c, B, T, NULL, &other));
    nnt_tensor *w = NULL, *g = NULL;
    int64_t shape[1] = {4};
    EXPECT_OK(nnt_tensor_create(ctx, NNT_FP32, 1, shape, NULL, &w));
    EXPECT_OK(nnt_tensor_create(ctx, NNT_FP32, 1, shape, NULL, &g));
    EXPECT_OK(nnt_tensor_fill(w, 1.0));
    const char *path = test_tmp_path("plain.safetensors");
    for (int k = 0; k < 3; k++) {
        nnt_optim *opt = NULL;
        EXPECT_OK(nnt_optim_create(ctx, NULL, &opt));
        if (k == 0) {   /* plain parameters */
            EXPECT_OK(nnt_optim_add_param(opt, "w", w, g, 1));
        } else if (k == 1) {   /* a model and one more parameter */
            EXPECT_OK(nnt_optim_add_layer(opt, m));
            EXPECT_OK(nnt_optim_add_param(opt, "extra", w, g, 1));
        } else {   /* a layer that is not a model */
            nnt_layer *lin = NULL;
            EXPECT_OK(nnt_layer_linear_create(ctx, 4, 4, 1, NULL, &lin));
            EXPECT_OK(nnt_optim_add_layer(opt, lin));
            EXPECT_OK(nnt_train_state_save(opt, path, NULL));
            nnt_optim_destroy(opt);
            nnt_layer_destroy(lin);
            opt = NULL;
        }
        if (opt) {
            EXPECT_OK(nnt_train_state_save(opt, path, NULL));
            nnt_optim_destroy(opt);
        }
        EXPECT_FAIL_MSG(nnt_model_train_state_config(ctx, path, &got), NNT_E_FORMAT,
                        "nnt_model_train_state_config");
        ck_assert_ptr_nonnull(strstr(nnt_ctx_last_error(ctx), "records no model"));
        nnt_layer *back = (nnt_layer *)1;
        EXPECT_FAIL_MSG(nnt_model_load_train_state(ctx, path, B, T, NULL, NULL, &back),
                        NNT_E_FORMAT, "nnt_model_load_train_state");
        ck_assert_ptr_null(back);
    }
    /* two models in one optimizer: none recorded either */
    nnt_optim *opt = NULL;
    EXPECT_OK(nnt_optim_create(ctx, NULL, &opt));
    EXPECT_OK(nnt_optim_add_layer(opt, m));
    nnt_layer *seq = NULL;
    EXPECT_OK(nnt_layer_linear_create(ctx, 4, 4, 1, NULL, &seq));
    EXPECT_OK(nnt_optim_add_layer(opt, seq));
    EXPECT_OK(nnt_train_state_save(opt, path, NULL));
    EXPECT_FAIL_MSG(nnt_model_train_state_config(ctx, path, &got), NNT_E_FORMAT,
                    "nnt_model_train_state_config");
    nnt_optim_destroy(opt);
    nnt_layer_destroy(seq);
    nnt_tensor_destroy(w);
    nnt_tensor_destroy(g);
    nnt_layer_destroy(other);
    nnt_layer_destroy(m);
}
END_TEST

static long file_size(const char *path)
{
    FILE *f = fopen(path, "rb");
    ck_assert_ptr_nonnull(f);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fclose(f);
    return n;
}

/* Flip one byte at offset off (from the end when < 0). */
static void flip_byte(const char *path, long off)
{
    FILE *f = fopen(path, "r+b");
    ck_assert_ptr_nonnull(f);
    fseek(f, off, off < 0 ? SEEK_END : SEEK_SET);
    int c = fgetc(f);
    fseek(f, -1, SEEK_CUR);
    fputc(c ^ 0x10, f);
    fclose(f);
}

static void copy_file(const char *from, const char *to, long keep)
{
    FILE *in = fopen(from, "rb"), *out = fopen(to, "wb");
    ck_assert(in && out);
    for (long i = 0; i < keep; i++)
        fputc(fgetc(in), out);
    fclose(in);
    fclose(out);
}

static void expect_refused(const char *path, int rc, const char *words)
{
    nnt_layer *back = (nnt_layer *)1;
    EXPECT_FAIL_MSG(nnt_model_load_train_state(ctx, path, B, T, NULL, NULL, &back), rc,
                    "nnt_model_load_train_state");
    ck_assert_ptr_null(back);
    ck_assert_msg(strstr(nnt_ctx_last_error(ctx), words), "'%s' not in: %s", words,
                  nnt_ctx_last_error(ctx));
}

/* Damaged files: nothing is created, the message says what is wrong. */
START_TEST(test_damaged)
{
    const char *path = test_tmp_path("good.safetensors");
    const char *bad = test_tmp_path("bad.safetensors");
    nnt_layer *m = saved_model(0, path, STEPS);
    long size = file_size(path);
    copy_file(path, bad, size);
    flip_byte(bad, -3);   /* in the last second moment: read for the checksum only */
    expect_refused(bad, NNT_E_FORMAT, "data checksum");
    copy_file(path, bad, size / 2);
    expect_refused(bad, NNT_E_FORMAT, "");
    copy_file(path, bad, 4);
    expect_refused(bad, NNT_E_FORMAT, "");
    /* the model record sits in the header: a changed byte of it breaks the metadata checksum */
    copy_file(path, bad, size);
    FILE *f = fopen(bad, "r+b");
    char head[8192];
    size_t n = fread(head, 1, sizeof head, f);
    const char *key = "num_hidden_layers\\\": 2";   /* escaped inside the metadata string */
    size_t klen = strlen(key), at = 0;
    while (at + klen <= n && memcmp(head + at, key, klen) != 0)
        at++;
    ck_assert_uint_lt(at + klen, n + 1);
    fseek(f, (long)(at + klen - 1), SEEK_SET);
    fputc('3', f);
    fclose(f);
    expect_refused(bad, NNT_E_FORMAT, "metadata checksum");
    expect_refused(test_tmp_path("missing.safetensors"), NNT_E_IO, "missing.safetensors");
    nnt_train_state info = NNT_TRAIN_STATE_INIT;
    EXPECT_FAIL_MSG(nnt_train_state_info(ctx, bad, &info), NNT_E_FORMAT, "metadata checksum");
    ck_assert_ptr_null(info.options);
    EXPECT_FAIL_MSG(nnt_train_state_info(NULL, NULL, &info), NNT_E_INVAL, "nnt_train_state_info");
    EXPECT_FAIL_MSG(nnt_train_state_info(NULL, path, NULL), NNT_E_INVAL, "nnt_train_state_info");
    info.size = 4;
    EXPECT_FAIL_MSG(nnt_train_state_info(NULL, path, &info), NNT_E_INVAL, "nnt_train_state_info");
    nnt_layer_destroy(m);
}
END_TEST

START_TEST(test_misuse)
{
    const char *path = test_tmp_path("ckpt.safetensors");
    nnt_layer *m = saved_model(1, path, 0);
    nnt_model_config cfg;
    nnt_layer *back = NULL;
    EXPECT_FAIL_MSG(nnt_model_train_state_config(ctx, NULL, &cfg), NNT_E_INVAL,
                    "nnt_model_train_state_config");
    EXPECT_FAIL_MSG(nnt_model_train_state_config(ctx, path, NULL), NNT_E_INVAL,
                    "nnt_model_train_state_config");
    EXPECT_FAIL_MSG(nnt_model_load_train_state(ctx, NULL, B, T, NULL, NULL, &back), NNT_E_INVAL,
                    "nnt_model_load_train_state");
    EXPECT_FAIL_MSG(nnt_model_load_train_state(ctx, path, B, T, NULL, NULL, NULL), NNT_E_INVAL,
                    "nnt_model_load_train_state");
    EXPECT_RC(nnt_model_load_train_state(NULL, path, B, T, NULL, NULL, &back), NNT_E_INVAL);
    nnt_train_state small = NNT_TRAIN_STATE_INIT;
    small.size = 8;
    EXPECT_FAIL_MSG(nnt_model_load_train_state(ctx, path, B, T, NULL, &small, &back),
                    NNT_E_INVAL, "nnt_model_load_train_state");
    /* T beyond the recorded max_seq (16) */
    back = (nnt_layer *)1;
    int rc = nnt_model_load_train_state(ctx, path, 1, 17, NULL, NULL, &back);
    ck_assert_int_lt(rc, 0);
    ck_assert_ptr_null(back);
    ck_assert_ptr_nonnull(strstr(nnt_ctx_last_error(ctx), "nnt_model_load_train_state"));
    nnt_layer_destroy(m);
}
END_TEST

static Suite *ckpt_suite(void)
{
    Suite *s = suite_create("model_ckpt");
    TCase *tc = tcase_create("model_ckpt");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 120);
    tcase_add_loop_test(tc, test_roundtrip, 0, 2);
    tcase_add_test(tc, test_step0);
    tcase_add_test(tc, test_no_model);
    tcase_add_test(tc, test_damaged);
    tcase_add_test(tc, test_misuse);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return run_suite(ckpt_suite());
}
