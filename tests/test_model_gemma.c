/* SPDX-License-Identifier: MIT */
/* The Gemma family against transformers (tests/fixtures/gemma_tiny,
 * tests/gen_gemma_fixtures.py): a Gemma3ForCausalLM (GQA 4/1, head_dim 12 != C / NH,
 * query_pre_attn_scalar 20 != head_dim, q/k norms, window 5 < T on layers 0 and 2 and a global
 * layer 1 with its own rope base and linear scaling, tied head) and a Gemma2ForCausalLM (both
 * soft-caps on, untied head), T 16: config.json read (and older key styles, a gemma3 config's
 * text_config), logits, loss and every gradient for four tilings (sequence tiles of 3, 2 and
 * 7 that cut through the window's edge), 10 AdamW steps' losses, greedy generation past the
 * window with and without the key/value cache against transformers' generate, saved as a
 * Hugging Face directory and loaded back bit for bit, activation recompute bit for bit.
 * A Gemma3ForConditionalGeneration (gemma3mm: a vision tower beside the text model, in both
 * of the names its files have): the text model read (the top level's tie, no final
 * soft-cap), its logits and loss equal to transformers' on text alone, saved as a
 * Gemma3ForCausalLM directory (which transformers loads: tests/gen_gemma_fixtures.py
 * --check-saved), what it refuses. LoRA against PEFT 0.21 on both models (gemma3_lora:
 * all-linear; gemma2_lora: PEFT's default targets for Gemma, rsLoRA): 10 AdamW steps from
 * PEFT's initial adapter (losses, the trained adapter's tensors), PEFT's trained adapter
 * loaded (logits) and merged (logits), the default targets' adapter as PEFT's. */
#include "testutil.h"
#include "fixture_st.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define B 2
#define T 16
#define STEPS 10
#define NMODELS 2
#define NTILINGS 4

static const char *const MODELS[NMODELS] = {"gemma3", "gemma2"};

/* Measured (AMD EPYC Zen 4, 2 workers; worst over models and tilings): logits 5.7e-7, loss
 * 8.6e-8, gradients 2.4e-6 (a q_norm weight's), AdamW losses 8.0e-7 (absolute); limits
 * about 10x. */
#define LOGITS_TOL 6e-6
#define LOSS_TOL 1e-6
#define GRAD_TOL 2.4e-5
#define ADAMW_TOL 8e-6

static nnt_ctx *ctx;
static void setup(void) { ctx = test_ctx(); }
static void teardown(void) { EXPECT_OK(nnt_ctx_destroy(ctx)); }

static const char *path_of(const char *name, const char *what)
{
    return fixture_path_in("gemma_tiny", name, what);
}

/* whole; sequence tiles of 3 (the window of 5 spans tiles), heads of 3; sequence tiles of 2,
 * one head, head_dim tiles of 1 (they divide hd / 2 of both models, as the rotation needs);
 * tiles of 7 positions, hidden 5, two heads */
static const struct {
    nnt_tiling t;
    int64_t tok[2];
} TILINGS[NTILINGS] = {
    {{sizeof(nnt_tiling), 0, 0, 0, 0, 0, 0, 0}, {B, T}},
    {{sizeof(nnt_tiling), 1, 3, 5, 7, 9, 3, 0}, {1, 3}},
    {{sizeof(nnt_tiling), 2, 2, 8, 16, 10, 1, 1}, {2, 2}},
    {{sizeof(nnt_tiling), 1, 7, 32, 5, 64, 2, 0}, {1, 7}},
};

/* ---- configuration -------------------------------------------------------------------------- */

static void expect_gemma3(const nnt_model_config *c)
{
    ck_assert_int_eq(c->family, NNT_FAMILY_GEMMA);
    ck_assert(c->vocab == 64 && c->channels == 32 && c->hidden == 48 && c->layers == 3);
    ck_assert(c->heads == 4 && c->kv_heads == 1 && c->head_dim == 12);
    ck_assert(c->query_pre_attn_scalar == 20.0);
    ck_assert(c->sliding_window == 5 && c->window_from == 0 && c->window_global_every == 2);
    ck_assert(c->qk_norm == 1 && c->tied == 1 && c->norm_eps == 1e-5);
    ck_assert(c->attn_softcap == 0.0 && c->final_softcap == 0.0);
    ck_assert(c->rope.theta == 1000.0 && c->rope.scaling == NNT_ROPE_SCALING_LINEAR &&
              c->rope.factor == 2.0);
    ck_assert(c->rope_local_theta == 100.0);
    ck_assert(!c->qkv_bias && !c->out_bias && !c->mlp_bias);
}

static void expect_gemma2(const nnt_model_config *c)
{
    ck_assert_int_eq(c->family, NNT_FAMILY_GEMMA);
    ck_assert(c->heads == 4 && c->kv_heads == 2 && c->head_dim == 10);
    ck_assert(c->query_pre_attn_scalar == 12.0);
    ck_assert(c->sliding_window == 5 && c->window_from == 0 && c->window_global_every == 2);
    ck_assert(c->qk_norm == 0 && c->tied == 0);
    ck_assert(c->attn_softcap == 2.5 && c->final_softcap == 3.0);
    ck_assert(c->rope.theta == 1000.0 && c->rope.scaling == NNT_ROPE_SCALING_NONE);
    ck_assert(c->rope_local_theta == 0.0);
}

/* The Gemma 3 of the fixture in the older keys (rope_theta, rope_scaling,
 * rope_local_base_freq, sliding_window_pattern) and as a gemma3 config's text_config; Gemma
 * 2 without layer_types (its alternation) and without the soft-cap keys (30 and 50). */
#define GEMMA3_OLD \
    "\"vocab_size\": 64, \"hidden_size\": 32, \"intermediate_size\": 48, " \
    "\"num_hidden_layers\": 3, \"num_attention_heads\": 4, \"num_key_value_heads\": 1, " \
    "\"head_dim\": 12, \"max_position_embeddings\": 64, \"rms_norm_eps\": 1e-05, " \
    "\"query_pre_attn_scalar\": 20, \"sliding_window\": 5, \"sliding_window_pattern\": 2, " \
    "\"rope_theta\": 1000.0, \"rope_local_base_freq\": 100.0, " \
    "\"rope_scaling\": {\"rope_type\": \"linear\", \"factor\": 2.0}, " \
    "\"hidden_activation\": \"gelu_pytorch_tanh\", \"attn_logit_softcapping\": 7.0"

START_TEST(test_config)
{
    nnt_model_config c = NNT_MODEL_CONFIG_INIT;
    EXPECT_OK(nnt_model_hf_config(ctx, path_of("gemma3", NULL), &c));
    expect_gemma3(&c);
    EXPECT_OK(nnt_model_hf_config(ctx, path_of("gemma2", NULL), &c));
    expect_gemma2(&c);
    test_make_tmpdir("gemma_config");
    test_write_config(test_tmp_path("old"), "{\"architectures\": [\"Gemma3ForCausalLM\"], "
                      "\"model_type\": \"gemma3_text\", " GEMMA3_OLD "}");
    EXPECT_OK(nnt_model_hf_config(ctx, test_tmp_path("old"), &c));
    expect_gemma3(&c);   /* attn_logit_softcapping: no effect in Gemma 3 (transformers') */
    test_write_config(test_tmp_path("mm"),
                      "{\"architectures\": [\"Gemma3ForConditionalGeneration\"], "
                      "\"model_type\": \"gemma3\", \"text_config\": {\"model_type\": "
                      "\"gemma3_text\", " GEMMA3_OLD "}, \"vision_config\": {\"hidden_size\": 8}}");
    EXPECT_OK(nnt_model_hf_config(ctx, test_tmp_path("mm"), &c));
    expect_gemma3(&c);
    /* a text_config that names only what differs from Gemma3TextConfig's defaults, as
     * google/gemma-3-4b-it's does (its keys as recalled: the hub is out of reach here) */
    test_write_config(test_tmp_path("4b"),
                      "{\"architectures\": [\"Gemma3ForConditionalGeneration\"], "
                      "\"model_type\": \"gemma3\", \"text_config\": {\"hidden_size\": 2560, "
                      "\"intermediate_size\": 10240, \"model_type\": \"gemma3_text\", "
                      "\"num_hidden_layers\": 34, \"rope_scaling\": {\"factor\": 8.0, "
                      "\"rope_type\": \"linear\"}, \"sliding_window\": 1024}, "
                      "\"vision_config\": {}}");
    EXPECT_OK(nnt_model_hf_config(ctx, test_tmp_path("4b"), &c));
    ck_assert(c.vocab == 262208 && c.channels == 2560 && c.hidden == 10240 && c.layers == 34);
    ck_assert(c.heads == 8 && c.kv_heads == 4 && c.head_dim == 256 && c.qk_norm == 1);
    ck_assert(c.sliding_window == 1024 && c.window_global_every == 6);
    ck_assert(c.rope.theta == 1000000.0 && c.rope.scaling == NNT_ROPE_SCALING_LINEAR &&
              c.rope.factor == 8.0 && c.rope_local_theta == 10000.0);
    test_write_config(test_tmp_path("g2"), "{\"model_type\": \"gemma2\", \"vocab_size\": 64, "
                      "\"hidden_size\": 32, \"intermediate_size\": 48, \"num_hidden_layers\": 4, "
                      "\"num_attention_heads\": 4, \"sliding_window\": 5}");
    EXPECT_OK(nnt_model_hf_config(ctx, test_tmp_path("g2"), &c));
    ck_assert(c.attn_softcap == 50.0 && c.final_softcap == 30.0 && c.head_dim == 256 &&
              c.kv_heads == 4 && c.query_pre_attn_scalar == 256.0 && c.tied == 1);
    ck_assert(c.window_global_every == 2 && c.sliding_window == 5 && c.rope.theta == 10000.0);
    test_write_config(test_tmp_path("bidir"), "{\"model_type\": \"gemma3_text\", " GEMMA3_OLD
                      ", \"use_bidirectional_attention\": true}");
    EXPECT_FAIL_MSG(nnt_model_hf_config(ctx, test_tmp_path("bidir"), &c), NNT_E_UNSUPPORTED,
                    "use_bidirectional_attention");
    test_write_config(test_tmp_path("act"), "{\"model_type\": \"gemma2\", \"vocab_size\": 64, "
                      "\"hidden_size\": 32, \"intermediate_size\": 48, \"num_hidden_layers\": 2, "
                      "\"num_attention_heads\": 4, \"hidden_activation\": \"silu\"}");
    EXPECT_FAIL_MSG(nnt_model_hf_config(ctx, test_tmp_path("act"), &c), NNT_E_UNSUPPORTED,
                    "hidden_activation");
    test_remove_tmpdir();
    /* another family refuses Gemma's options */
    EXPECT_OK(nnt_model_preset("llama-tiny", &c));
    c.final_softcap = 30.0;
    nnt_layer *l = NULL;
    EXPECT_FAIL_MSG(nnt_model_create(ctx, &c, 1, 8, NULL, &l), NNT_E_INVAL, "final_softcap");
}
END_TEST

/* ---- against transformers -------------------------------------------------------------------- */

/* _i = model * NTILINGS + tiling */
START_TEST(test_reference)
{
    const char *name = MODELS[_i / NTILINGS];
    int ti = _i % NTILINGS;
    nnt_st_reader *r = fixture_open_st_path(path_of(name, "reference.safetensors"));
    int32_t *tok = fixture_read_n(r, "tokens", NNT_IO_I32, NULL);
    int32_t *tgt = fixture_read_n(r, "targets", NNT_IO_I32, NULL);
    float *want_logits = fixture_read_n(r, "logits", NNT_IO_F32, NULL);
    float *want_loss = fixture_read_n(r, "loss", NNT_IO_F32, NULL);
    nnt_layer *l = NULL;
    EXPECT_OK(nnt_model_load_hf(ctx, path_of(name, NULL), B, T, &TILINGS[ti].t, &l));
    nnt_tensor *x = fixture_ids(ctx, B, T, tok, TILINGS[ti].tok);
    nnt_tensor *y = fixture_ids(ctx, B, T, tgt, TILINGS[ti].tok);
    double loss = 0.0;
    /* nnt-train's gradient path: dropped gradients, written by the first backward */
    EXPECT_OK(nnt_layer_clear_grad(l));
    EXPECT_OK(nnt_layer_set_targets(l, y));
    nnt_tensor *out = NULL;
    EXPECT_OK(nnt_layer_forward(l, x, &out));
    int64_t n = 0;
    float *logits = test_to_host(out, &n);
    EXPECT_OK(nnt_layer_loss(l, &loss));
    EXPECT_OK(nnt_layer_backward(l, NULL, NULL));
    double el = test_rel_err(logits, want_logits, n);
    double eloss = fabs(loss - want_loss[0]) / want_loss[0], eg = 0.0;
    char worst[256] = "";
    int64_t count = 0;
    EXPECT_OK(nnt_layer_num_params(l, &count, NULL));
    for (int64_t i = 0; i < count; i++) {
        nnt_param_info p = test_param_at(l, i);
        char gname[300];
        snprintf(gname, sizeof gname, "grad.%s", p.name);
        int64_t ng = 0, nw = 0;
        float *want = fixture_read_n(r, gname, NNT_IO_F32, &nw), *got = test_to_host(p.grad, &ng);
        ck_assert_int_eq(ng, nw);
        double e = test_rel_err(got, want, ng);
        if (e >= eg) {
            eg = e;
            snprintf(worst, sizeof worst, "%s", p.name);
        }
        free(want), free(got);
    }
    printf("test_model_gemma %s tiling %d: logits rel %.2e, loss rel %.2e, worst gradient "
           "rel %.2e (%s), %lld parameters\n", name, ti, el, eloss, eg, worst,
           (long long)count);
    EXPECT_TOL(el, LOGITS_TOL, "%s tiling %d: logits", name, ti);
    EXPECT_TOL(eloss, LOSS_TOL, "%s tiling %d: loss", name, ti);
    EXPECT_TOL(eg, GRAD_TOL, "%s tiling %d: gradient of %s", name, ti, worst);
    free(logits), free(tok), free(tgt), free(want_logits), free(want_loss);
    nnt_tensor_destroy(x);
    nnt_tensor_destroy(y);
    nnt_layer_destroy(l);
    nnt_st_close(r);
}
END_TEST

/* _i = model * 2 + (tiling 1 or 2) */
START_TEST(test_adamw)
{
    const char *name = MODELS[_i / 2];
    int ti = 1 + _i % 2;
    nnt_st_reader *r = fixture_open_st_path(path_of(name, "train.safetensors"));
    int32_t *tok = fixture_read_n(r, "train_tokens", NNT_IO_I32, NULL);
    int32_t *tgt = fixture_read_n(r, "train_targets", NNT_IO_I32, NULL);
    float *want = fixture_read_n(r, "losses", NNT_IO_F32, NULL);
    nnt_layer *l = NULL;
    EXPECT_OK(nnt_model_load_hf(ctx, path_of(name, NULL), B, T, &TILINGS[ti].t, &l));
    nnt_optim_options oo = NNT_OPTIM_OPTIONS_INIT;
    oo.lr = 1e-3;
    oo.beta1 = 0.9;
    oo.beta2 = 0.999;
    oo.eps = 1e-8;
    oo.weight_decay = 0.0;
    nnt_optim *opt = NULL;
    EXPECT_OK(nnt_optim_create(ctx, &oo, &opt));
    EXPECT_OK(nnt_optim_add_layer(opt, l));
    double worst = 0.0;
    for (int s = 0; s < STEPS; s++) {
        double loss = fixture_train_step(ctx, l, opt, B, T, tok + s * B * T, tgt + s * B * T,
                                         TILINGS[ti].tok, TILINGS[ti].tok, 1, NULL, NULL);
        worst = fmax(worst, fabs(loss - want[s]));
    }
    printf("test_model_gemma %s adamw tiling %d: max |loss - fixture| %.2e over %d steps\n",
           name, ti, worst, STEPS);
    EXPECT_TOL(worst, ADAMW_TOL, "%s adamw", name);
    nnt_optim_destroy(opt);
    nnt_layer_destroy(l);
    nnt_st_close(r);
    free(tok), free(tgt), free(want);
}
END_TEST

/* greedy generation past the window equals transformers' generate; _i = model * 2 + (0: the
 * key/value cache, 1: none) */
START_TEST(test_generate)
{
    const char *name = MODELS[_i / 2];
    nnt_st_reader *r = fixture_open_st_path(path_of(name, "generate.safetensors"));
    int64_t np = 0, ng = 0;
    int32_t *prompt = fixture_read_n(r, "prompt", NNT_IO_I32, &np);
    int32_t *greedy = fixture_read_n(r, "greedy", NNT_IO_I32, &ng);
    nnt_layer *l = NULL;
    EXPECT_OK(nnt_model_load_hf(ctx, path_of(name, NULL), 1, ng, NULL, &l));
    nnt_sampling s = NNT_SAMPLING_INIT;
    s.temperature = 0.0;   /* greedy */
    s.no_cache = _i % 2;
    int32_t *out = calloc((size_t)ng, sizeof *out);
    EXPECT_OK(nnt_model_generate(l, prompt, np, ng - np, &s, out));
    for (int64_t i = 0; i < ng - np; i++)
        ck_assert_msg(out[i] == greedy[np + i], "%s (%s): token %lld is %d, transformers %d",
                      name, s.no_cache ? "no cache" : "cache", (long long)i, out[i],
                      greedy[np + i]);
    free(out), free(prompt), free(greedy);
    nnt_layer_destroy(l);
    nnt_st_close(r);
}
END_TEST

static void same_config(const nnt_model_config *a, const nnt_model_config *b)
{
    ck_assert(a->family == b->family && a->vocab == b->vocab && a->max_seq == b->max_seq);
    ck_assert(a->layers == b->layers && a->heads == b->heads && a->kv_heads == b->kv_heads);
    ck_assert(a->channels == b->channels && a->hidden == b->hidden && a->head_dim == b->head_dim);
    ck_assert(a->norm_eps == b->norm_eps && a->tied == b->tied && a->qk_norm == b->qk_norm);
    ck_assert(a->qkv_bias == b->qkv_bias && a->out_bias == b->out_bias &&
              a->mlp_bias == b->mlp_bias);
    ck_assert(a->rope.theta == b->rope.theta && a->rope.scaling == b->rope.scaling);
    ck_assert(a->rope.scaling == NNT_ROPE_SCALING_NONE || a->rope.factor == b->rope.factor);
    ck_assert(a->sliding_window == b->sliding_window && a->window_from == b->window_from &&
              a->window_global_every == b->window_global_every);
    ck_assert(a->query_pre_attn_scalar == b->query_pre_attn_scalar);
    ck_assert(a->attn_softcap == b->attn_softcap && a->final_softcap == b->final_softcap);
    ck_assert(a->rope_local_theta == b->rope_local_theta);
}

/* saved as a Hugging Face directory and loaded back: the same configuration, every parameter
 * bit for bit, the same logits bit for bit */
START_TEST(test_save_roundtrip)
{
    const char *name = MODELS[_i];
    nnt_layer *a = NULL, *b = NULL;
    EXPECT_OK(nnt_model_load_hf(ctx, path_of(name, NULL), B, T, &TILINGS[1].t, &a));
    test_make_tmpdir("gemma");
    const char *dir = test_tmp_path(name);
    EXPECT_OK(nnt_model_save_hf(a, dir));
    EXPECT_OK(nnt_model_load_hf(ctx, dir, B, T, &TILINGS[1].t, &b));
    nnt_model_config ca = NNT_MODEL_CONFIG_INIT, cb = NNT_MODEL_CONFIG_INIT;
    EXPECT_OK(nnt_model_config_of(a, &ca));
    EXPECT_OK(nnt_model_config_of(b, &cb));
    if (_i == 0)
        expect_gemma3(&cb);
    else
        expect_gemma2(&cb);
    same_config(&ca, &cb);
    int64_t na = 0, nb = 0;
    EXPECT_OK(nnt_layer_num_params(a, &na, NULL));
    EXPECT_OK(nnt_layer_num_params(b, &nb, NULL));
    ck_assert_int_eq(na, nb);
    for (int64_t i = 0; i < na; i++) {
        nnt_param_info pa = test_param_at(a, i), pb = test_param_at(b, i);
        ck_assert_str_eq(pa.name, pb.name);
        int64_t n1 = 0, n2 = 0;
        float *x1 = test_to_host(pa.value, &n1), *x2 = test_to_host(pb.value, &n2);
        ck_assert_int_eq(n1, n2);
        ck_assert_msg(memcmp(x1, x2, (size_t)n1 * sizeof *x1) == 0, "%s differs", pa.name);
        free(x1), free(x2);
    }
    nnt_st_reader *r = fixture_open_st_path(path_of(name, "reference.safetensors"));
    int32_t *tok = fixture_read_n(r, "tokens", NNT_IO_I32, NULL);
    nnt_tensor *x = fixture_ids(ctx, B, T, tok, TILINGS[1].tok), *ya = NULL, *yb = NULL;
    EXPECT_OK(nnt_layer_forward(a, x, &ya));
    EXPECT_OK(nnt_layer_forward(b, x, &yb));
    int64_t n1 = 0, n2 = 0;
    float *la = test_to_host(ya, &n1), *lb = test_to_host(yb, &n2);
    ck_assert(n1 == n2 && memcmp(la, lb, (size_t)n1 * sizeof *la) == 0);
    free(la), free(lb), free(tok);
    nnt_tensor_destroy(x);
    nnt_st_close(r);
    nnt_layer_destroy(a);
    nnt_layer_destroy(b);
    test_remove_tmpdir();
}
END_TEST

/* With activation recompute (the four-norm block's forward rerun in its backward) the
 * gradients are the same, bit for bit; _i: the model */
START_TEST(test_recompute)
{
    const char *name = MODELS[_i];
    nnt_st_reader *r = fixture_open_st_path(path_of(name, "reference.safetensors"));
    int32_t *tok = fixture_read_n(r, "tokens", NNT_IO_I32, NULL);
    int32_t *tgt = fixture_read_n(r, "targets", NNT_IO_I32, NULL);
    nnt_layer *l[2] = {NULL, NULL};
    for (int k = 0; k < 2; k++) {
        EXPECT_OK(nnt_model_load_hf(ctx, path_of(name, NULL), B, T, &TILINGS[3].t, &l[k]));
        if (k)
            EXPECT_OK(nnt_layer_set_recompute(l[k], 1));
        nnt_tensor *x = fixture_ids(ctx, B, T, tok, TILINGS[3].tok);
        nnt_tensor *y = fixture_ids(ctx, B, T, tgt, TILINGS[3].tok);
        EXPECT_OK(nnt_layer_clear_grad(l[k]));
        EXPECT_OK(nnt_layer_set_targets(l[k], y));
        EXPECT_OK(nnt_layer_forward(l[k], x, NULL));
        EXPECT_OK(nnt_layer_backward(l[k], NULL, NULL));
        EXPECT_OK(nnt_layer_set_targets(l[k], NULL));
        nnt_tensor_destroy(x);
        nnt_tensor_destroy(y);
    }
    int64_t count = 0;
    EXPECT_OK(nnt_layer_num_params(l[0], &count, NULL));
    for (int64_t i = 0; i < count; i++) {
        nnt_param_info a = test_param_at(l[0], i), b = test_param_at(l[1], i);
        int64_t n1 = 0, n2 = 0;
        float *g1 = test_to_host(a.grad, &n1), *g2 = test_to_host(b.grad, &n2);
        ck_assert_msg(n1 == n2 && memcmp(g1, g2, (size_t)n1 * sizeof *g1) == 0,
                      "%s: gradient of %s differs with recompute", name, a.name);
        free(g1), free(g2);
    }
    nnt_layer_destroy(l[0]);
    nnt_layer_destroy(l[1]);
    free(tok), free(tgt);
    nnt_st_close(r);
}
END_TEST

/* ---- Gemma3ForConditionalGeneration ------------------------------------------------------ */

/* its two namings: Google's (and save_pretrained's), transformers' modules */
static const char *const MM_DIRS[2] = {"gemma3mm", "gemma3mm_modules"};

/* the text model of both: gemma3's configuration, the top level's tie (the text_config says
 * false) and no final soft-cap (the text_config says 3.0: Gemma3ForConditionalGeneration
 * applies none) */
START_TEST(test_mm_config)
{
    for (int d = 0; d < 2; d++) {
        nnt_model_config c = NNT_MODEL_CONFIG_INIT;
        EXPECT_OK(nnt_model_hf_config(ctx, path_of(MM_DIRS[d], NULL), &c));
        expect_gemma3(&c);
    }
}
END_TEST

/* The logits and the loss of the text model of either directory (_i / 2) against
 * transformers' Gemma3ForConditionalGeneration on text alone, tilings 1 and 3 (_i % 2). */
START_TEST(test_mm_reference)
{
    const char *dir = MM_DIRS[_i / 2];
    int ti = _i % 2 ? 3 : 1;
    nnt_st_reader *r = fixture_open_st_path(path_of("gemma3mm", "reference.safetensors"));
    int32_t *tok = fixture_read_n(r, "tokens", NNT_IO_I32, NULL);
    int32_t *tgt = fixture_read_n(r, "targets", NNT_IO_I32, NULL);
    float *want_logits = fixture_read_n(r, "logits", NNT_IO_F32, NULL);
    float *want_loss = fixture_read_n(r, "loss", NNT_IO_F32, NULL);
    nnt_layer *l = NULL;
    EXPECT_OK(nnt_model_load_hf(ctx, path_of(dir, NULL), B, T, &TILINGS[ti].t, &l));
    nnt_tensor *x = fixture_ids(ctx, B, T, tok, TILINGS[ti].tok);
    nnt_tensor *y = fixture_ids(ctx, B, T, tgt, TILINGS[ti].tok), *out = NULL;
    double loss = 0.0;
    int64_t n = 0;
    EXPECT_OK(nnt_layer_set_targets(l, y));
    EXPECT_OK(nnt_layer_forward(l, x, &out));
    EXPECT_OK(nnt_layer_loss(l, &loss));
    float *logits = test_to_host(out, &n);
    double el = test_rel_err(logits, want_logits, n);
    double eloss = fabs(loss - want_loss[0]) / want_loss[0];
    printf("test_model_gemma %s tiling %d: logits rel %.2e, loss rel %.2e\n", dir, ti, el,
           eloss);
    EXPECT_TOL(el, LOGITS_TOL, "%s tiling %d: logits", dir, ti);
    EXPECT_TOL(eloss, LOSS_TOL, "%s tiling %d: loss", dir, ti);
    free(logits), free(tok), free(tgt), free(want_logits), free(want_loss);
    nnt_tensor_destroy(x);
    nnt_tensor_destroy(y);
    nnt_layer_destroy(l);
    nnt_st_close(r);
}
END_TEST

/* The file's text (malloc'd, NUL-terminated). */
static char *slurp_text(const char *path)
{
    FILE *f = fopen(path, "rb");
    ck_assert_msg(f != NULL, "cannot open %s", path);
    fseek(f, 0, SEEK_END);
    long len = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = malloc((size_t)len + 1);
    ck_assert(buf && fread(buf, 1, (size_t)len, f) == (size_t)len);
    buf[len] = '\0';
    fclose(f);
    return buf;
}

/* Saved: a Gemma3ForCausalLM directory of the text model alone (no vision tensor: the strict
 * loader would refuse one), loaded back bit for bit. */
START_TEST(test_mm_save)
{
    nnt_layer *a = NULL, *b = NULL;
    EXPECT_OK(nnt_model_load_hf(ctx, path_of("gemma3mm", NULL), B, T, &TILINGS[1].t, &a));
    test_make_tmpdir("gemma_mm");
    const char *dir = test_tmp_path("saved");
    EXPECT_OK(nnt_model_save_hf(a, dir));
    char *cfg = slurp_text(test_tmp_path("saved/config.json"));
    ck_assert_msg(strstr(cfg, "\"architectures\": [\"Gemma3ForCausalLM\"]") &&
                  strstr(cfg, "\"model_type\": \"gemma3_text\"") &&
                  strstr(cfg, "\"final_logit_softcapping\": null") &&
                  strstr(cfg, "\"tie_word_embeddings\": true") && !strstr(cfg, "vision"),
                  "saved config.json:\n%s", cfg);
    free(cfg);
    EXPECT_OK(nnt_model_load_hf(ctx, dir, B, T, &TILINGS[1].t, &b));
    nnt_model_config cb = NNT_MODEL_CONFIG_INIT;
    EXPECT_OK(nnt_model_config_of(b, &cb));
    expect_gemma3(&cb);
    int64_t na = 0, nb = 0;
    EXPECT_OK(nnt_layer_num_params(a, &na, NULL));
    EXPECT_OK(nnt_layer_num_params(b, &nb, NULL));
    ck_assert_int_eq(na, nb);
    for (int64_t i = 0; i < na; i++) {
        nnt_param_info pa = test_param_at(a, i), pb = test_param_at(b, i);
        int64_t n1 = 0, n2 = 0;
        float *x1 = test_to_host(pa.value, &n1), *x2 = test_to_host(pb.value, &n2);
        ck_assert_str_eq(pa.name, pb.name);
        ck_assert_msg(n1 == n2 && memcmp(x1, x2, (size_t)n1 * sizeof *x1) == 0, "%s differs",
                      pa.name);
        free(x1), free(x2);
    }
    if (getenv("NNT_GEMMA_MM_KEEP"))   /* for tests/gen_gemma_fixtures.py --check-saved */
        printf("test_model_gemma: saved in %s (kept)\n", dir);
    else
        test_remove_tmpdir();
    nnt_layer_destroy(a);
    nnt_layer_destroy(b);
}
END_TEST

/* dir: gemma3mm's config.json and its weights without the tensor drop and with a scalar
 * tensor extra (either NULL). */
static void write_mm(const char *dir, const char *drop, const char *extra)
{
    char path[800], err[NNT_IO_ERRLEN];
    nnt_st_reader *r = fixture_open_st_path(path_of("gemma3mm/model", "safetensors"));
    ck_assert_int_eq(mkdir(dir, 0755), 0);
    char *cfg = slurp_text(path_of("gemma3mm/config", "json"));
    snprintf(path, sizeof path, "%s/config.json", dir);
    FILE *f = fopen(path, "w");
    ck_assert(f && fputs(cfg, f) >= 0 && fclose(f) == 0);
    free(cfg);
    nnt_st_writer *w = NULL;
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    EXPECT_OK(nnt_st_writer_begin(path, &w, err, sizeof err));
    size_t count = nnt_st_count(r);
    float **bufs = calloc(count, sizeof *bufs), one = 1.0f;
    for (size_t i = 0; i < count; i++) {
        const nnt_st_entry *e = nnt_st_entry_at(r, i);
        if (drop && strcmp(e->name, drop) == 0)
            continue;
        bufs[i] = fixture_read(r, e->name, NNT_IO_F32, NULL);
        EXPECT_OK(nnt_st_writer_add(w, e->name, NNT_IO_F32, e->ndim, e->shape, bufs[i], err,
                                    sizeof err));
    }
    if (extra)
        EXPECT_OK(nnt_st_writer_add(w, extra, NNT_IO_F32, 0, NULL, &one, err, sizeof err));
    EXPECT_OK(nnt_st_writer_finish(w, err, sizeof err));
    for (size_t i = 0; i < count; i++)
        free(bufs[i]);
    free(bufs);
    nnt_st_close(r);
}

/* What a Gemma3ForConditionalGeneration directory may lack and may not hold: a vision tensor
 * is not needed, a text tensor is (named as the file names it); a tensor of neither the
 * vision tower nor the text model under the file's naming is refused, the text model's
 * names without the nesting included. */
START_TEST(test_mm_refusals)
{
    static const struct {
        const char *drop, *extra;
        int code;
        const char *msg;
    } CASES[] = {
        {"vision_tower.post_layernorm.weight", "multi_modal_projector.new", 0, NULL},
        {"language_model.model.layers.1.mlp.up_proj.weight", NULL, NNT_E_FORMAT,
         "no tensor language_model.model.layers.1.mlp.up_proj.weight"},
        {NULL, "model.layers.0.input_layernorm.weight", NNT_E_FORMAT,
         "unknown tensor model.layers.0.input_layernorm.weight"},
        {NULL, "language_model.model.layers.0.extra", NNT_E_FORMAT,
         "unknown tensor language_model.model.layers.0.extra"},
        {NULL, "language_model.lm_head.bias", NNT_E_FORMAT,
         "unknown tensor language_model.lm_head.bias"},
    };
    test_make_tmpdir("gemma_mm_bad");
    for (size_t k = 0; k < sizeof CASES / sizeof CASES[0]; k++) {
        char name[16];
        snprintf(name, sizeof name, "case%zu", k);
        const char *dir = test_tmp_path(name);
        write_mm(dir, CASES[k].drop, CASES[k].extra);
        nnt_layer *l = NULL;
        if (!CASES[k].code) {
            EXPECT_OK(nnt_model_load_hf(ctx, dir, B, T, NULL, &l));
            nnt_layer_destroy(l);
        } else {
            EXPECT_FAIL_MSG(nnt_model_load_hf(ctx, dir, B, T, NULL, &l), CASES[k].code,
                            CASES[k].msg);
            ck_assert_ptr_null(l);
        }
    }
    test_remove_tmpdir();
}
END_TEST

/* ---- LoRA against PEFT ---------------------------------------------------------------------- */

static const char *const LORAS[2][2] = {{"gemma3_lora", "gemma3"}, {"gemma2_lora", "gemma2"}};

/* Measured (AMD EPYC Zen 4, 2 workers; worst over cases and tilings): losses 2.9e-7,
 * adapters 1.1e-5 (relative normwise; a lora_B of q_proj: B starts at 0 and Adam's first
 * steps, about lr sign(g), carry the gradients' last bits into it, as in test_lora),
 * logits 4.6e-7, merged logits 4.6e-7; limits about 10x. */
#define LORA_LOSS_TOL 3e-6
#define LORA_ADAPTER_TOL 1e-4
#define LORA_LOGITS_TOL 5e-6

/* PEFT's initial adapter, 10 AdamW steps as PEFT's (lr 1e-2, weight decay 0.05): the losses
 * and the trained adapter's tensors; _i = case * 2 + (tiling 1 or 3) */
START_TEST(test_lora_train)
{
    const char *name = LORAS[_i / 2][0], *base = LORAS[_i / 2][1];
    int ti = _i % 2 ? 3 : 1;
    char dir[4300], file[4400], worst[300] = "";
    nnt_st_reader *r = fixture_open_st_path(path_of(name, "reference.safetensors"));
    nnt_layer *l = NULL;
    EXPECT_OK(nnt_model_load_hf(ctx, path_of(base, NULL), B, T, &TILINGS[ti].t, &l));
    snprintf(dir, sizeof dir, "%s/init", path_of(name, NULL));
    EXPECT_OK(nnt_model_load_peft(l, dir));
    nnt_optim *opt = fixture_peft_adamw(ctx, l);
    double eloss = fixture_peft_train(ctx, l, opt, r, B, T, STEPS, TILINGS[ti].tok);
    test_make_tmpdir("gemma_lora");
    EXPECT_OK(nnt_model_save_peft(l, test_tmp_path("trained")));
    snprintf(file, sizeof file, "%s/adapter_model.safetensors", test_tmp_path("trained"));
    snprintf(dir, sizeof dir, "%s/trained/adapter_model.safetensors", path_of(name, NULL));
    double ea = fixture_compare_files(file, dir, 1, worst, sizeof worst);
    printf("test_model_gemma %s tiling %d: losses rel %.2e, adapters rel %.2e (%s)\n", name, ti,
           eloss, ea, worst);
    EXPECT_TOL(eloss, LORA_LOSS_TOL, "%s tiling %d: losses", name, ti);
    EXPECT_TOL(ea, LORA_ADAPTER_TOL, "%s tiling %d: adapter %s", name, ti, worst);
    test_remove_tmpdir();
    nnt_optim_destroy(opt);
    nnt_layer_destroy(l);
    nnt_st_close(r);
}
END_TEST

/* PEFT's trained adapter loaded: PEFT's logits; merged: merge_and_unload's; _i: the case */
START_TEST(test_lora_load_merge)
{
    const char *name = LORAS[_i][0], *base = LORAS[_i][1];
    char dir[4300], ref[4300];
    double e[3];
    snprintf(dir, sizeof dir, "%s/trained", path_of(name, NULL));
    snprintf(ref, sizeof ref, "%s", path_of(name, "reference.safetensors"));
    fixture_peft_logits(ctx, path_of(base, NULL), dir, ref, &TILINGS[2].t, TILINGS[2].tok, B,
                        T, e);
    printf("test_model_gemma %s: logits with PEFT's adapter rel %.2e (the base's %.2e away), "
           "merged rel %.2e\n", name, e[0], e[2], e[1]);
    ck_assert_msg(e[2] > 100 * LORA_LOGITS_TOL, "%s: the adapter moves the logits too little",
                  name);
    EXPECT_TOL(e[0], LORA_LOGITS_TOL, "%s: logits with PEFT's adapter", name);
    EXPECT_TOL(e[1], LORA_LOGITS_TOL, "%s: merged logits", name);
}
END_TEST

/* The family's default targets (nnt_lora_options.targets NULL) are PEFT's for Gemma: the
 * adapter's tensors have the names and shapes of PEFT's (gemma2_lora was made without
 * target_modules); all-linear's are too (gemma3_lora). */
START_TEST(test_lora_targets)
{
    for (int c = 0; c < 2; c++) {
        char file[4400], want[4300], unused[8];
        nnt_layer *l = NULL;
        EXPECT_OK(nnt_model_load_hf(ctx, path_of(LORAS[c][1], NULL), B, T, NULL, &l));
        nnt_lora_options lo = NNT_LORA_OPTIONS_INIT;
        lo.rank = 4;
        lo.targets = c == 0 ? "all-linear" : NULL;
        EXPECT_OK(nnt_model_lora_add(l, &lo));
        EXPECT_OK(nnt_model_lora_get(l, &lo));
        if (c == 1)
            ck_assert_str_eq(lo.targets, "q_proj,v_proj");
        test_make_tmpdir("gemma_lora_targets");
        EXPECT_OK(nnt_model_save_peft(l, test_tmp_path("a")));
        snprintf(file, sizeof file, "%s/adapter_model.safetensors", test_tmp_path("a"));
        snprintf(want, sizeof want, "%s/init/adapter_model.safetensors",
                 path_of(LORAS[c][0], NULL));
        fixture_compare_files(file, want, 0, unused, sizeof unused);
        test_remove_tmpdir();
        nnt_layer_destroy(l);
    }
}
END_TEST

static Suite *gemma_suite(void)
{
    Suite *s = suite_create("model_gemma");
    TCase *tc = tcase_create("model_gemma");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 240);
    tcase_add_test(tc, test_config);
    tcase_add_loop_test(tc, test_reference, 0, NTILINGS * NMODELS);
    tcase_add_loop_test(tc, test_adamw, 0, 2 * NMODELS);
    tcase_add_loop_test(tc, test_generate, 0, 2 * NMODELS);
    tcase_add_loop_test(tc, test_save_roundtrip, 0, NMODELS);
    tcase_add_loop_test(tc, test_recompute, 0, NMODELS);
    tcase_add_test(tc, test_mm_config);
    tcase_add_loop_test(tc, test_mm_reference, 0, 4);
    tcase_add_test(tc, test_mm_save);
    tcase_add_test(tc, test_mm_refusals);
    tcase_add_loop_test(tc, test_lora_train, 0, 4);
    tcase_add_loop_test(tc, test_lora_load_merge, 0, 2);
    tcase_add_test(tc, test_lora_targets);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return run_suite(gemma_suite());
}
