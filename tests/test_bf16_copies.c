/* SPDX-License-Identifier: MIT */
/* The bf16 weight copies of bf16 products kept from step to step: an AdamW update writes a
 * parameter's copy beside its fp32 values (nnt_tensor_adam_step), so the next forward
 * converts no weight, and gives the same bits as a forward that converts every weight
 * afresh (recompute drops the blocks' copies and converts them again). A copy that no
 * update wrote (SGD), or whose weight was written since (a host copy), is converted again.
 * GPT-2 (tied head) and Llama (GQA), two tilings, updates after and during the backward.
 * And the task order by layer (NNT_TASK_ORDER=1) changes no bit. */
#include "testutil.h"

#include <stdint.h>
#include <unistd.h>

enum { B = 2, T = 7, V = 40, STEPS = 4, MAXP = 160 };

enum model_kind { GPT2, LLAMA, NKINDS };
static const char *const KIND_NAMES[NKINDS] = {"gpt2", "llama"};

/* automatic; and sequence 3, channels 10, hidden 16, vocab 16: tiles that divide nothing */
static const nnt_tiling TILINGS[2] = {
    {sizeof(nnt_tiling), 0, 0, 0, 0, 0, 0, 0},
    {sizeof(nnt_tiling), -1, 3, 10, 16, 16, -1, -1},
};

static nnt_layer *make_model(nnt_ctx *ctx, int kind, const nnt_tiling *tl, int recompute)
{
    nnt_model_config c = NNT_MODEL_CONFIG_INIT;
    c.vocab = V, c.max_seq = T, c.layers = 2, c.heads = 4, c.channels = 24;
    if (kind == LLAMA) {
        c.family = NNT_FAMILY_LLAMA;
        c.tied = 0, c.qkv_bias = 0, c.out_bias = 0, c.mlp_bias = 0;
        c.kv_heads = 2, c.hidden = 40, c.norm_eps = 1e-5;
        c.rope.theta = 10000;
    }
    nnt_layer *m = NULL;
    EXPECT_OK(nnt_model_create(ctx, &c, B, T, tl, &m));
    EXPECT_OK(nnt_layer_init(m, 11));
    EXPECT_OK(nnt_layer_set_recompute(m, recompute));
    return m;
}

/* An optimizer of options oo on m's parameters, and the (B, T) token and target tensors */
static nnt_optim *optim_and_io(nnt_ctx *ctx, nnt_layer *m, const nnt_optim_options *oo,
                               nnt_tensor **tok, nnt_tensor **tgt)
{
    nnt_optim *opt = NULL;
    EXPECT_OK(nnt_optim_create(ctx, oo, &opt));
    EXPECT_OK(nnt_optim_add_layer(opt, m));
    int64_t shape[2] = {B, T};
    EXPECT_OK(nnt_tensor_create(ctx, NNT_INT32, 2, shape, NULL, tok));
    EXPECT_OK(nnt_tensor_create(ctx, NNT_INT32, 2, shape, NULL, tgt));
    return opt;
}

static void batch(int s, int32_t *tok, int32_t *tgt)
{
    unsigned long long seed = 91 + (unsigned long long)s;
    int32_t row[B * T + 1];
    for (int i = 0; i < B * T + 1; i++)
        row[i] = (int32_t)(test_rand(&seed) * V);
    memcpy(tok, row, sizeof(int32_t) * B * T);
    memcpy(tgt, row + 1, sizeof(int32_t) * B * T);
}

/* The forward of batch s */
static void forward(nnt_layer *m, nnt_tensor *tok, nnt_tensor *tgt, int s)
{
    int32_t tk[B * T], tg[B * T];
    batch(s, tk, tg);
    EXPECT_OK(nnt_tensor_copy_from_host(tok, tk, sizeof tk));
    EXPECT_OK(nnt_tensor_copy_from_host(tgt, tg, sizeof tg));
    EXPECT_OK(nnt_layer_set_targets(m, tgt));
    EXPECT_OK(nnt_layer_forward(m, tok, NULL));
}

static double forward_loss(nnt_layer *m, nnt_tensor *tok, nnt_tensor *tgt, int s)
{
    double loss = 0;
    forward(m, tok, tgt, s);
    EXPECT_OK(nnt_layer_loss(m, &loss));
    return loss;
}

/* The count of a codelet's tasks in a trace table (0 when it has no row). */
static long table_count(const char *path, const char *codelet)
{
    FILE *f = fopen(path, "r");
    ck_assert_ptr_nonnull(f);
    char line[512], name[128];
    long count = 0, n = 0;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "%127s %ld", name, &n) == 2 && strcmp(name, codelet) == 0)
            count = n;
    fclose(f);
    return count;
}

typedef struct result {
    double loss[STEPS];
    int nparams;
    float *params[MAXP];
    int64_t numel[MAXP];
    long converts;   /* weight conversions in steps 2..STEPS */
} result;

static void free_result(result *r)
{
    for (int i = 0; i < r->nparams; i++)
        free(r->params[i]);
}

/* STEPS steps of optimizer kind ok under bf16 products; inbwd: updates in the backward
 * (else after it, with clipping) */
static void train(int kind, const nnt_tiling *tl, int recompute, nnt_optim_kind ok, int inbwd,
                  result *r)
{
    memset(r, 0, sizeof *r);
    test_make_tmpdir("test-bf16-copies");
    nnt_ctx *ctx = test_ctx();
    EXPECT_OK(nnt_ctx_set_precision(ctx, NNT_PRECISION_BF16));
    nnt_layer *m = make_model(ctx, kind, tl, recompute);
    nnt_optim_options oo = NNT_OPTIM_OPTIONS_INIT;
    oo.kind = ok, oo.lr = 4e-3, oo.weight_decay = 0.1, oo.momentum = 0.8;
    oo.grad_clip = inbwd ? 0 : 0.7;   /* below the norms here: the scaled update */
    nnt_tensor *tok = NULL, *tgt = NULL;
    nnt_optim *opt = optim_and_io(ctx, m, &oo, &tok, &tgt);
    for (int s = 0; s < STEPS; s++) {
        if (s == 1)
            EXPECT_OK(nnt_trace_start(ctx));
        EXPECT_OK(nnt_layer_clear_grad(m));
        forward(m, tok, tgt, s);
        if (inbwd)
            EXPECT_OK(nnt_optim_update_in_backward(opt));
        EXPECT_OK(nnt_layer_backward(m, NULL, NULL));
        EXPECT_OK(nnt_layer_loss(m, &r->loss[s]));
        EXPECT_OK(nnt_optim_step(opt));
    }
    EXPECT_OK(nnt_trace_stop(ctx, NULL, test_tmp_path("table.txt")));
    r->converts = table_count(test_tmp_path("table.txt"), "nnt_convert");
    r->nparams = test_param_values(m, MAXP, r->params, r->numel);
    nnt_tensor_destroy(tok);
    nnt_tensor_destroy(tgt);
    nnt_optim_destroy(opt);
    nnt_layer_destroy(m);
    EXPECT_OK(nnt_ctx_destroy(ctx));
    test_remove_tmpdir();
}

static void expect_same(const result *kept, const result *fresh, const char *what)
{
    for (int s = 0; s < STEPS; s++)
        ck_assert_msg(kept->loss[s] == fresh->loss[s], "%s step %d: loss %.17g with the copies "
                      "kept, %.17g converted afresh", what, s, kept->loss[s], fresh->loss[s]);
    ck_assert_msg(kept->loss[STEPS - 1] != kept->loss[0], "%s: training changed nothing", what);
    ck_assert_int_eq(kept->nparams, fresh->nparams);
    for (int i = 0; i < kept->nparams; i++)
        ck_assert_msg(!memcmp(kept->params[i], fresh->params[i],
                              (size_t)kept->numel[i] * sizeof(float)),
                      "%s: parameter %d differs", what, i);
}

/* AdamW writes the copies: no conversion after the first step, the bits of converting */
START_TEST(test_adamw_writes_copies)
{
    int kind = _i / 4, inbwd = (_i / 2) % 2;
    const nnt_tiling *tl = &TILINGS[_i % 2];
    char what[96];
    snprintf(what, sizeof what, "%s tiling %d, updates %s the backward", KIND_NAMES[kind],
             _i % 2, inbwd ? "in" : "after");
    result kept, fresh;
    train(kind, tl, 0, NNT_OPTIM_ADAMW, inbwd, &kept);
    train(kind, tl, 1, NNT_OPTIM_ADAMW, inbwd, &fresh);
    expect_same(&kept, &fresh, what);
    ck_assert_msg(kept.converts == 0, "%s: %ld weight conversions after the first step with the "
                  "copies kept", what, kept.converts);
    /* the blocks' copies (dropped by recompute) converted in each forward and recompute */
    ck_assert_msg(fresh.converts > 0, "%s: no conversion with recompute", what);
    free_result(&kept);
    free_result(&fresh);
}
END_TEST

/* SGD leaves the copies as they were: the forward converts the updated weights again */
START_TEST(test_sgd_converts)
{
    const nnt_tiling *tl = &TILINGS[_i];
    result kept, fresh;
    train(LLAMA, tl, 0, NNT_OPTIM_SGD, 0, &kept);
    train(LLAMA, tl, 1, NNT_OPTIM_SGD, 0, &fresh);
    expect_same(&kept, &fresh, "llama, SGD");
    ck_assert_msg(kept.converts > 0, "SGD: the updated weights were not converted again");
    free_result(&kept);
    free_result(&fresh);
}
END_TEST

/* A weight written from the host after an update that wrote its copy: the next forward
 * reads the new values (the same loss as a model given them afresh). */
START_TEST(test_host_write_converts)
{
    nnt_ctx *ctx = test_ctx();
    EXPECT_OK(nnt_ctx_set_precision(ctx, NNT_PRECISION_BF16));
    nnt_layer *m = make_model(ctx, GPT2, &TILINGS[1], 0);
    nnt_layer *twin = make_model(ctx, GPT2, &TILINGS[1], 0);
    nnt_optim_options oo = NNT_OPTIM_OPTIONS_INIT;
    oo.lr = 1e-2, oo.grad_clip = 0;
    nnt_tensor *tok = NULL, *tgt = NULL;
    nnt_optim *opt = optim_and_io(ctx, m, &oo, &tok, &tgt);
    for (int s = 0; s < 2; s++) {
        EXPECT_OK(nnt_layer_clear_grad(m));
        forward(m, tok, tgt, s);
        EXPECT_OK(nnt_layer_backward(m, NULL, NULL));
        EXPECT_OK(nnt_optim_step(opt));
    }
    /* the twin gets the trained values; then both get new values in every matrix */
    int64_t count = 0;
    EXPECT_OK(nnt_layer_num_params(m, &count, NULL));
    int changed = 0;
    for (int64_t i = 0; i < count; i++) {
        nnt_param_info p = test_param_at(m, i), q = test_param_at(twin, i);
        int64_t n = 0;
        float *w = test_to_host(p.value, &n);
        EXPECT_OK(nnt_tensor_copy_from_host(q.value, w, (size_t)n * sizeof *w));
        int ndim = 0;
        EXPECT_OK(nnt_tensor_ndim(p.value, &ndim));
        if (ndim == 2) {
            for (int64_t j = 0; j < n; j++)
                w[j] = 0.5f * w[j] + 0.01f;
            EXPECT_OK(nnt_tensor_copy_from_host(p.value, w, (size_t)n * sizeof *w));
            EXPECT_OK(nnt_tensor_copy_from_host(q.value, w, (size_t)n * sizeof *w));
            changed++;
        }
        free(w);
    }
    ck_assert_int_ge(changed, 4);
    double loss = forward_loss(m, tok, tgt, 5), want = forward_loss(twin, tok, tgt, 5);
    ck_assert_msg(loss == want, "loss %.17g after the host write, %.17g with the values given "
                  "afresh", loss, want);
    nnt_tensor_destroy(tok);
    nnt_tensor_destroy(tgt);
    nnt_optim_destroy(opt);
    nnt_layer_destroy(m);
    nnt_layer_destroy(twin);
    EXPECT_OK(nnt_ctx_destroy(ctx));
}
END_TEST

/* NNT_TASK_ORDER=1 (tasks prioritized by layer): the same bits as the default (StarPU's
 * default priority for every task); the context's kernels line names the order only when on */
START_TEST(test_task_order_on)
{
    result on, off;
    train(GPT2, &TILINGS[1], 0, NNT_OPTIM_ADAMW, 1, &off);
    nnt_ctx *ctx = test_ctx();
    const char *desc = NULL;
    EXPECT_OK(nnt_ctx_kernels(ctx, &desc));
    ck_assert_msg(!strstr(desc, "prioritized"), "by default: %s", desc);
    EXPECT_OK(nnt_ctx_destroy(ctx));
    setenv("NNT_TASK_ORDER", "1", 1);
    train(GPT2, &TILINGS[1], 0, NNT_OPTIM_ADAMW, 1, &on);
    ctx = test_ctx();
    EXPECT_OK(nnt_ctx_kernels(ctx, &desc));
    ck_assert_msg(strstr(desc, "prioritized by layer") != NULL, "NNT_TASK_ORDER=1 but: %s",
                  desc);
    EXPECT_OK(nnt_ctx_destroy(ctx));
    unsetenv("NNT_TASK_ORDER");
    expect_same(&on, &off, "gpt2, NNT_TASK_ORDER=1 against the default");
    free_result(&on);
    free_result(&off);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("bf16_copies");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 300);
    tcase_add_loop_test(tc, test_adamw_writes_copies, 0, 4 * NKINDS);
    tcase_add_loop_test(tc, test_sgd_converts, 0, 2);
    tcase_add_test(tc, test_host_write_converts);
    tcase_add_test(tc, test_task_order_on);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return run_suite(suite());
}
