/* SPDX-License-Identifier: MIT */
/* gpt-oss (GptOssForCausalLM, the MoE family) against transformers (tests/fixtures/gptoss_tiny,
 * tests/gen_gptoss_fixtures.py): a tiny random model with attention sinks, q/k/v/o biases,
 * windows of 5 on blocks 0 and 2 (T 16), YaRN without truncation, head_dim 12 (not C / NH),
 * 4 experts of which each token takes 2 (top 2 of the router's logits with its bias, a
 * softmax over them), expert biases and the clamped SwiGLU with limit 1.5 (about a fifth of
 * the gate values and a third of the up values clamped). Checked: nnt_model_load_hf of
 * transformers' directory (its stacked experts); logits, loss and every gradient (sinks,
 * router and expert biases included) for 3 tilings; 10 AdamW steps; greedy generation with
 * the key/value cache past the window; the directory saved (stacked as transformers writes
 * it) and read back bit for bit; the MXFP4 experts of the original checkpoints; the presets'
 * parameter counts. */
#include "testutil.h"
#include "fixture_st.h"
#include "models/models.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#define B 2
#define T 16
#define STEPS 10

/* Measured (AMD EPYC Zen 4, worst over the tilings, relative): logits 1.5e-6, loss 1.7e-7,
 * gradients 2.0e-5 (a router's bias), AdamW losses 3.6e-7; the MXFP4 model's logits 1.7e-6,
 * loss 5.2e-8. */
#define LOGITS_TOL 1.5e-5
#define LOSS_TOL 1.5e-6
#define GRAD_TOL 2e-4
#define ADAMW_TOL 3.5e-6

static nnt_ctx *ctx;
static void setup(void) { ctx = test_ctx(); }
static void teardown(void) { EXPECT_OK(nnt_ctx_destroy(ctx)); }

static const char *path_of(const char *name, const char *what)
{
    return fixture_path_in("gptoss_tiny", name, what);
}

/* whole; batch 1, sequence 3 (tiles across the window's edge), channels 5, hidden 7, heads
 * 3 of 4 (the sinks' tiles follow), head_dim 3 of 12; batch 2, sequence 2, channels 8,
 * hidden 16, heads 2 */
static const struct {
    nnt_tiling t;
    int64_t tok[2];
} TILINGS[3] = {
    {{sizeof(nnt_tiling), 0, 0, 0, 0, 0, 0, 0}, {B, T}},
    {{sizeof(nnt_tiling), 1, 3, 5, 7, 9, 3, 3}, {1, 3}},
    {{sizeof(nnt_tiling), 2, 2, 8, 16, 10, 2, 0}, {2, 2}},
};

/* The gradient transformers has for nnt's parameter name (n elements of shape (rows, cols)
 * as nnt holds it) from the reference file: under the same name, or (an expert's) gathered
 * from the block's stacked gradients, written here from transformers' layout: gate_up_proj
 * (E, C, 2 I) with gate, up interleaved, gate_up_proj_bias (E, 2 I), down_proj (E, I, C),
 * down_proj_bias (E, C). */
static float *want_grad(nnt_st_reader *r, const char *name, int64_t n)
{
    char stack[300], proj[16], kind[8];
    int layer = 0, e = 0;
    if (sscanf(name, "model.layers.%d.mlp.experts.%d.%15[a-z]_proj.%7s", &layer, &e, proj,
               kind) != 4) {
        char gname[300];
        snprintf(gname, sizeof gname, "grad.%s", name);
        int64_t nw = 0;
        float *w = fixture_read_n(r, gname, NNT_IO_F32, &nw);
        ck_assert_int_eq(nw, n);
        return w;
    }
    const int64_t E = 4, C = 32, I = 24;
    int down = strcmp(proj, "down") == 0, up = strcmp(proj, "up") == 0;
    int bias = strcmp(kind, "bias") == 0;
    snprintf(stack, sizeof stack, "grad.model.layers.%d.mlp.experts.%s%s", layer,
             down ? "down_proj" : "gate_up_proj", bias ? "_bias" : "");
    float *all = fixture_read_n(r, stack, NNT_IO_F32, NULL), *w = malloc((size_t)n * 4);
    for (int64_t i = 0; i < n; i++) {
        int64_t at;
        if (down && bias)   /* (C) */
            at = e * C + i;
        else if (down)      /* (C, I): [e, i % I, i / I] of (E, I, C) */
            at = e * I * C + (i % I) * C + i / I;
        else if (bias)      /* (I): [e, 2 i + up] of (E, 2 I) */
            at = e * 2 * I + 2 * i + up;
        else                /* (I, C): [e, i % C, 2 (i / C) + up] of (E, C, 2 I) */
            at = e * C * 2 * I + (i % C) * 2 * I + 2 * (i / C) + up;
        ck_assert(at < E * 2 * I * C);
        w[i] = all[at];
    }
    free(all);
    return w;
}

/* The model of directory name (gptoss or gptoss-mxfp4) in tiling ti, run forward on its
 * reference's tokens and targets (and backward with backward): the relative errors of its
 * logits and loss against transformers'; the model and the reference file stay open. */
typedef struct ref_run {
    nnt_layer *l;
    nnt_st_reader *r;
    double loss, el, eloss;
} ref_run;

static ref_run run_reference(const char *name, int ti, int backward)
{
    ref_run run = {NULL, fixture_open_st_path(path_of(name, "reference.safetensors")), 0, 0, 0};
    int32_t *tok = fixture_read_n(run.r, "tokens", NNT_IO_I32, NULL);
    int32_t *tgt = fixture_read_n(run.r, "targets", NNT_IO_I32, NULL);
    float *want_logits = fixture_read_n(run.r, "logits", NNT_IO_F32, NULL);
    float *want_loss = fixture_read_n(run.r, "loss", NNT_IO_F32, NULL);
    EXPECT_OK(nnt_model_load_hf(ctx, path_of(name, NULL), B, T, &TILINGS[ti].t, &run.l));
    nnt_tensor *x = fixture_ids(ctx, B, T, tok, TILINGS[ti].tok);
    nnt_tensor *y = fixture_ids(ctx, B, T, tgt, TILINGS[ti].tok), *out = NULL;
    EXPECT_OK(nnt_layer_clear_grad(run.l));
    EXPECT_OK(nnt_layer_set_targets(run.l, y));
    EXPECT_OK(nnt_layer_forward(run.l, x, &out));
    int64_t n = 0;
    float *logits = test_to_host(out, &n);
    EXPECT_OK(nnt_layer_loss(run.l, &run.loss));
    if (backward)
        EXPECT_OK(nnt_layer_backward(run.l, NULL, NULL));
    run.el = test_rel_err(logits, want_logits, n);
    run.eloss = fabs(run.loss - want_loss[0]) / want_loss[0];
    free(logits), free(tok), free(tgt), free(want_logits), free(want_loss);
    nnt_tensor_destroy(x);
    nnt_tensor_destroy(y);
    return run;
}

/* _i: tiling */
START_TEST(test_reference)
{
    int ti = _i;
    nnt_model_config cfg = NNT_MODEL_CONFIG_INIT;
    EXPECT_OK(nnt_model_hf_config(ctx, path_of("gptoss", NULL), &cfg));
    ck_assert_int_eq(cfg.family, NNT_FAMILY_MOE);
    ck_assert(cfg.attn_sinks && cfg.moe_bias && cfg.swiglu_limit == 1.5 &&
              cfg.swiglu_alpha == 1.702 && cfg.qkv_bias && cfg.out_bias && cfg.experts == 4 &&
              cfg.experts_per_token == 2 && cfg.norm_topk_prob && cfg.head_dim == 12 &&
              cfg.sliding_window == 5 && cfg.rope.scaling == NNT_ROPE_SCALING_YARN &&
              !cfg.rope.truncate && cfg.router_aux_coef == 0.0);
    ref_run run = run_reference("gptoss", ti, 1);
    double eg = 0.0;
    char worst[256] = "";
    int sinks = 0;
    int64_t count = 0;
    EXPECT_OK(nnt_layer_num_params(run.l, &count, NULL));
    for (int64_t i = 0; i < count; i++) {
        nnt_param_info p = test_param_at(run.l, i);
        int64_t ng = 0;
        float *got = test_to_host(p.grad, &ng), *want = want_grad(run.r, p.name, ng);
        double e = test_rel_err(got, want, ng);
        sinks += strstr(p.name, "self_attn.sinks") != NULL;
        if (e >= eg) {
            eg = e;
            snprintf(worst, sizeof worst, "%s", p.name);
        }
        free(want), free(got);
    }
    ck_assert_int_eq(sinks, 3);
    printf("test_model_gptoss tiling %d: logits rel %.2e, loss rel %.2e (%.6f), worst gradient "
           "rel %.2e (%s)\n", ti, run.el, run.eloss, run.loss, eg, worst);
    EXPECT_TOL(run.el, LOGITS_TOL, "tiling %d: logits", ti);
    EXPECT_TOL(run.eloss, LOSS_TOL, "tiling %d: loss", ti);
    EXPECT_TOL(eg, GRAD_TOL, "tiling %d: gradient of %s", ti, worst);
    nnt_layer_destroy(run.l);
    nnt_st_close(run.r);
}
END_TEST

/* 10 AdamW steps (betas 0.9, 0.95, weight decay 0.1 on the weights and sinks, none on biases
 * and norms, as transformers' Trainer groups them) against torch.optim.AdamW's losses */
START_TEST(test_adamw)
{
    nnt_st_reader *r = fixture_open_st_path(path_of("gptoss", "train.safetensors"));
    int32_t *tok = fixture_read_n(r, "train_tokens", NNT_IO_I32, NULL);
    int32_t *tgt = fixture_read_n(r, "train_targets", NNT_IO_I32, NULL);
    float *want = fixture_read_n(r, "losses", NNT_IO_F32, NULL);
    float *lr = fixture_read_n(r, "lr", NNT_IO_F32, NULL);
    float *b1 = fixture_read_n(r, "beta1", NNT_IO_F32, NULL);
    float *b2 = fixture_read_n(r, "beta2", NNT_IO_F32, NULL);
    float *eps = fixture_read_n(r, "eps", NNT_IO_F32, NULL);
    float *wd = fixture_read_n(r, "weight_decay", NNT_IO_F32, NULL);
    nnt_layer *l = NULL;
    EXPECT_OK(nnt_model_load_hf(ctx, path_of("gptoss", NULL), B, T, &TILINGS[1].t, &l));
    nnt_optim_options oo = NNT_OPTIM_OPTIONS_INIT;
    oo.lr = lr[0], oo.beta1 = b1[0], oo.beta2 = b2[0], oo.eps = eps[0];
    oo.weight_decay = wd[0];
    nnt_optim *opt = NULL;
    EXPECT_OK(nnt_optim_create(ctx, &oo, &opt));
    EXPECT_OK(nnt_optim_add_layer(opt, l));
    double worst = 0.0;
    for (int s = 0; s < STEPS; s++) {
        double loss = fixture_train_step(ctx, l, opt, B, T, tok + s * B * T, tgt + s * B * T,
                                         TILINGS[1].tok, TILINGS[1].tok, 1, NULL, NULL);
        worst = fmax(worst, fabs(loss - want[s]) / want[s]);
    }
    printf("test_model_gptoss adamw: max rel |loss - fixture| %.2e over %d steps (%.4f -> "
           "%.4f)\n", worst, STEPS, want[0], want[STEPS - 1]);
    EXPECT_TOL(worst, ADAMW_TOL, "adamw");
    nnt_optim_destroy(opt);
    nnt_layer_destroy(l);
    nnt_st_close(r);
    free(tok), free(tgt), free(want), free(lr), free(b1), free(b2), free(eps), free(wd);
}
END_TEST

/* greedy generation with the cache (12 tokens after 4: the windowed blocks' caches slide)
 * equals transformers' generate */
START_TEST(test_generate)
{
    nnt_st_reader *r = fixture_open_st_path(path_of("gptoss", "generate.safetensors"));
    int64_t np = 0, ng = 0;
    int32_t *prompt = fixture_read_n(r, "prompt", NNT_IO_I32, &np);
    int32_t *greedy = fixture_read_n(r, "greedy", NNT_IO_I32, &ng);
    nnt_layer *l = NULL;
    EXPECT_OK(nnt_model_load_hf(ctx, path_of("gptoss", NULL), 1, ng, NULL, &l));
    int32_t *out = calloc((size_t)ng, sizeof *out);
    EXPECT_OK(nnt_model_generate(l, prompt, np, ng - np, NULL, out));
    for (int64_t i = 0; i < ng - np; i++)
        ck_assert_msg(out[i] == greedy[np + i], "token %lld is %d, transformers %d",
                      (long long)i, out[i], greedy[np + i]);
    free(out), free(prompt), free(greedy);
    nnt_layer_destroy(l);
    nnt_st_close(r);
}
END_TEST

/* saved and read back: the configuration, the experts stacked under transformers' names and
 * shapes, the same logits bit for bit */
START_TEST(test_save_roundtrip)
{
    nnt_layer *l = NULL, *back = NULL;
    EXPECT_OK(nnt_model_load_hf(ctx, path_of("gptoss", NULL), B, T, NULL, &l));
    test_make_tmpdir("gptoss");
    const char *dir = test_tmp_path("saved");
    EXPECT_OK(nnt_model_save_hf(l, dir));
    nnt_model_config a = NNT_MODEL_CONFIG_INIT, b = NNT_MODEL_CONFIG_INIT;
    EXPECT_OK(nnt_model_config_of(l, &a));
    EXPECT_OK(nnt_model_hf_config(ctx, dir, &b));
    ck_assert(a.attn_sinks == b.attn_sinks && a.moe_bias == b.moe_bias &&
              a.swiglu_limit == b.swiglu_limit && a.swiglu_alpha == b.swiglu_alpha &&
              a.sliding_window == b.sliding_window && a.experts == b.experts &&
              a.rope.truncate == b.rope.truncate && a.rope.factor == b.rope.factor &&
              a.head_dim == b.head_dim);
    for (int64_t i = 0; i < a.layers; i++)
        ck_assert_int_eq(nnt_model_block_window(&a, i), nnt_model_block_window(&b, i));
    char file[4300];
    snprintf(file, sizeof file, "%s/model.safetensors", dir);
    nnt_st_reader *saved = fixture_open_st_path(file);
    static const struct {
        const char *name;
        int nd;
        int64_t shape[3];
    } STACKED[] = {{"model.layers.2.mlp.experts.gate_up_proj", 3, {4, 32, 48}},
                   {"model.layers.2.mlp.experts.gate_up_proj_bias", 2, {4, 48, 0}},
                   {"model.layers.2.mlp.experts.down_proj", 3, {4, 24, 32}},
                   {"model.layers.2.mlp.experts.down_proj_bias", 2, {4, 32, 0}},
                   {"model.layers.2.mlp.router.bias", 1, {4, 0, 0}},
                   {"model.layers.2.self_attn.sinks", 1, {4, 0, 0}}};
    for (size_t k = 0; k < sizeof STACKED / sizeof STACKED[0]; k++) {
        const nnt_st_entry *e = nnt_st_find(saved, STACKED[k].name);
        ck_assert_msg(e != NULL, "no %s in the saved file", STACKED[k].name);
        ck_assert_int_eq(e->ndim, STACKED[k].nd);
        for (int d = 0; d < STACKED[k].nd; d++)
            ck_assert_int_eq(e->shape[d], STACKED[k].shape[d]);
    }
    ck_assert(nnt_st_find(saved, "model.layers.0.mlp.experts.0.gate_proj.weight") == NULL);
    nnt_st_close(saved);
    EXPECT_OK(nnt_model_load_hf(ctx, dir, B, T, &TILINGS[2].t, &back));
    nnt_st_reader *r = fixture_open_st_path(path_of("gptoss", "reference.safetensors"));
    int32_t *tok = fixture_read_n(r, "tokens", NNT_IO_I32, NULL);
    nnt_tensor *x = fixture_ids(ctx, B, T, tok, TILINGS[0].tok), *y1 = NULL, *y2 = NULL;
    nnt_tensor *x2 = fixture_ids(ctx, B, T, tok, TILINGS[2].tok);
    EXPECT_OK(nnt_layer_forward(l, x, &y1));
    int64_t n = 0, count = 0;
    float *l1 = test_to_host(y1, &n);
    EXPECT_OK(nnt_layer_forward(back, x2, &y2));
    float *l2 = test_to_host(y2, &n);
    double e = test_rel_err(l2, l1, n);
    EXPECT_TOL(e, LOGITS_TOL, "logits of the saved directory (another tiling)");
    EXPECT_OK(nnt_layer_num_params(l, &count, NULL));   /* every parameter bit for bit */
    for (int64_t i = 0; i < count; i++) {
        nnt_param_info p = test_param_at(l, i), q = test_param_at(back, i);
        ck_assert_str_eq(p.name, q.name);
        int64_t n1 = 0, n2 = 0;
        float *v1 = test_to_host(p.value, &n1), *v2 = test_to_host(q.value, &n2);
        ck_assert_int_eq(n1, n2);
        ck_assert_msg(memcmp(v1, v2, (size_t)n1 * sizeof *v1) == 0, "%s differs", p.name);
        free(v1), free(v2);
    }
    free(l1), free(l2), free(tok);
    nnt_tensor_destroy(x);
    nnt_tensor_destroy(x2);
    nnt_st_close(r);
    nnt_layer_destroy(l);
    nnt_layer_destroy(back);
    test_remove_tmpdir();
}
END_TEST

/* the original checkpoints' layout: bf16 tensors, gpt-oss-20b's config.json keys
 * (rope_scaling, rope_theta, no swiglu_alpha, quantization_config) and the experts as MXFP4
 * blocks and scales: transformers' logits and loss of the dequantized model, for 2 tilings */
START_TEST(test_mxfp4)
{
    int ti = 2 * _i;   /* tilings 0 and 2 (head_dim 16 here) */
    nnt_model_config cfg = NNT_MODEL_CONFIG_INIT;
    EXPECT_OK(nnt_model_hf_config(ctx, path_of("gptoss-mxfp4", NULL), &cfg));
    ck_assert(cfg.swiglu_alpha == 1.702 && cfg.rope.theta == 150000.0 &&
              cfg.rope.scaling == NNT_ROPE_SCALING_YARN && !cfg.rope.truncate);
    ref_run run = run_reference("gptoss-mxfp4", ti, 0);
    printf("test_model_gptoss mxfp4 tiling %d: logits rel %.2e, loss rel %.2e (%.6f)\n", ti,
           run.el, run.eloss, run.loss);
    EXPECT_TOL(run.el, LOGITS_TOL, "mxfp4 tiling %d: logits", ti);
    EXPECT_TOL(run.eloss, LOSS_TOL, "mxfp4 tiling %d: loss", ti);
    nnt_layer_destroy(run.l);
    nnt_st_close(run.r);
}
END_TEST

/* gpt-oss-20b and -120b: transformers 5.24's GptOssForCausalLM of their configurations on
 * the meta device, 20,914,757,184 and 116,829,156,672 parameters; nnt's model of the tiny
 * configuration holds as many parameters as transformers' (the reference's gradients) */
START_TEST(test_presets)
{
    static const struct {
        const char *name;
        int64_t layers, experts, total;
    } WANT[] = {{"gpt-oss-20b", 24, 32, 20914757184}, {"gpt-oss-120b", 36, 128, 116829156672}};
    for (size_t i = 0; i < sizeof WANT / sizeof WANT[0]; i++) {
        nnt_model_config c = NNT_MODEL_CONFIG_INIT;
        EXPECT_OK(nnt_model_preset(WANT[i].name, &c));
        ck_assert(c.family == NNT_FAMILY_MOE && c.layers == WANT[i].layers &&
                  c.experts == WANT[i].experts && c.attn_sinks && c.moe_bias &&
                  c.swiglu_limit == 7.0 && c.sliding_window == 128);
        /* per block: attention with biases and sinks, router with bias, experts with biases,
         * two norms */
        int64_t C = c.channels, NH = c.heads, KV = c.kv_heads, hd = c.head_dim, E = c.experts;
        int64_t I = c.expert_hidden;
        int64_t attn = C * NH * hd * 2 + 2 * C * KV * hd + (NH + 2 * KV) * hd + C + NH;
        int64_t mlp = E * C + E + E * (3 * C * I + 2 * I + C);
        int64_t total = c.vocab * C * 2 + C + c.layers * (attn + mlp + 2 * C);
        ck_assert_msg(total == WANT[i].total, "%s: %lld parameters, transformers %lld",
                      WANT[i].name, (long long)total, (long long)WANT[i].total);
    }
    nnt_layer *l = NULL;
    int64_t built = 0;
    EXPECT_OK(nnt_model_load_hf(ctx, path_of("gptoss", NULL), 1, 8, NULL, &l));
    EXPECT_OK(nnt_layer_num_params(l, NULL, &built));
    /* the fixture's model: V 64, C 32, NH 4, NKV 2, hd 12, L 3, E 4, I 24 */
    int64_t attn = 32 * 48 * 2 + 2 * 32 * 24 + 48 + 48 + 32 + 4;
    int64_t mlp = 4 * 32 + 4 + 4 * (3 * 32 * 24 + 2 * 24 + 32);
    ck_assert_int_eq(built, 64 * 32 * 2 + 32 + 3 * (attn + mlp + 64));
    nnt_layer_destroy(l);
}
END_TEST

/* config.json both ways off the defaults: a model without windows and without rope scaling
 * (which GptOssConfig would take as its YaRN default without a rope object) reads back as
 * itself; the gpt-oss fields are refused outside the MoE family */
START_TEST(test_config_roundtrip)
{
    nnt_model_config c = NNT_MODEL_CONFIG_INIT, back = NNT_MODEL_CONFIG_INIT;
    EXPECT_OK(nnt_model_hf_config(ctx, path_of("gptoss", NULL), &c));
    c.sliding_window = 0, c.window_global_every = 0;
    memset(c.window_full_layers, 0, sizeof c.window_full_layers);
    nnt_rope_options plain = NNT_ROPE_OPTIONS_INIT;
    plain.theta = 50000.0;
    c.rope = plain;
    c.swiglu_limit = 3.25, c.swiglu_alpha = 1.5;
    nnt_layer *l = NULL;
    EXPECT_OK(nnt_model_create(ctx, &c, 1, 8, NULL, &l));
    test_make_tmpdir("gptoss-cfg");
    const char *dir = test_tmp_path("plain");
    EXPECT_OK(nnt_model_save_hf(l, dir));
    EXPECT_OK(nnt_model_hf_config(ctx, dir, &back));
    ck_assert_int_eq(back.sliding_window, 0);
    ck_assert_int_eq(back.rope.scaling, NNT_ROPE_SCALING_NONE);
    ck_assert(back.rope.theta == 50000.0 && back.swiglu_limit == 3.25 &&
              back.swiglu_alpha == 1.5 && back.attn_sinks && back.moe_bias);
    nnt_layer_destroy(l);
    test_remove_tmpdir();
    nnt_model_config llama = NNT_MODEL_CONFIG_INIT;
    EXPECT_OK(nnt_model_preset("llama-tiny", &llama));
    llama.attn_sinks = 1;
    EXPECT_FAIL_MSG(nnt_model_create(ctx, &llama, 1, 8, NULL, &l), NNT_E_INVAL,
                    "are gpt-oss's (the MoE family)");
}
END_TEST

static Suite *gptoss_suite(void)
{
    Suite *s = suite_create("model_gptoss");
    TCase *tc = tcase_create("gptoss");
    tcase_set_timeout(tc, 300);
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_loop_test(tc, test_reference, 0, 3);
    tcase_add_test(tc, test_adamw);
    tcase_add_test(tc, test_generate);
    tcase_add_test(tc, test_save_roundtrip);
    tcase_add_loop_test(tc, test_mxfp4, 0, 2);
    tcase_add_test(tc, test_presets);
    tcase_add_test(tc, test_config_roundtrip);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return run_suite(gptoss_suite());
}
