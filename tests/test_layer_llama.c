/* SPDX-License-Identifier: MIT */
/* Llama-family models built from the public generic layers, against the Hugging Face
 * LlamaForCausalLM and Qwen3ForCausalLM fixtures of tests/fixtures/llama_tiny (see the README
 * there):
 *   - gqa (NH 4 / NKV 2, untied head, no biases, rope theta 500000), mqa (NH 4 / NKV 1,
 *     tied embeddings, q/k/v/o biases, llama3 rope scaling) and qwen3 (q/k norms, head_dim
 *     12 with NH 4 and C 40, NKV 2, tied, q/k/v/o biases): an embedding without position
 *     table, L blocks of nnt_layer_block_create_ex (RMSNorm, GQA attention with rope,
 *     SwiGLU), a final RMSNorm, the head (nnt_layer_linear_create without bias, or the tied
 *     nnt_layer_lm_head_create) and a cross-entropy, in one sequential; the HF weights loaded
 *     by name (a name map below);
 *   - logits, loss and every parameter gradient against HF's, for three tilings (whole;
 *     partial channel / hidden / vocabulary tiles with a heads tile of 3 cutting GQA groups;
 *     one head per tile with head vectors split in tiles of 1);
 *   - 10 AdamW steps through nnt_optim against torch.optim.AdamW's losses (weight decay 0
 *     and 0.1 on the matrices and embeddings: the layers' decay flags).
 * Tolerances about 10x the error measured (tests/tolerances.sh); the fixture is PyTorch's
 * fp32 output, so each error includes PyTorch's rounding. The ceilings were 1e-4
 * (logits, loss, relative), 1e-3 (gradients), 1e-4 (AdamW losses, absolute). */
#include "testutil.h"
#include "fixture_st.h"

#include <math.h>
#include <stdint.h>

/* Measured with tests/tolerances.sh (BLIS kernel sets default, haswell, generic; AMD EPYC),
 * the largest over both models and all tilings: */
#define LOGITS_TOL 3.2e-6  /* normwise relative: 3.2e-7 */
#define LOSS_TOL 1.1e-6    /* relative: 1.1e-7 */
#define GRAD_TOL 8.6e-6    /* normwise relative, the worst parameter (k_proj, its bias, or
                            * post_attention_layernorm, depending on model and tiling): 8.6e-7;
                            * qwen3 (k_norm, k_proj.bias): 1.3e-6 (Zen 4, every BLIS set and
                            * NNT_GEMM=blis, 2026-11-26) */
#define SMOOTH_LOSS_TOL 8.3e-7 /* relative, label smoothing: 8.3e-8 (gqa) */
#define SMOOTH_GRAD_TOL 1.1e-5 /* normwise relative: 1.06e-6 (mqa k_proj.bias) */
#define ADAMW_TOL 5.7e-6   /* max |loss - fixture| over 10 steps: 5.7e-7; qwen3 9.5e-7 */

typedef struct fix_model {
    const char *name;
    int64_t V, C, L, NH, NKV, hidden;
    double eps;
    int tied, bias;
    nnt_rope_options rope;
    int64_t head_dim;   /* 0: C / NH */
    int qk_norm;
} fix_model;

#define NMODELS 3
static const fix_model MODELS[NMODELS] = {
    {"gqa", 61, 32, 2, 4, 2, 48, 1e-5, 0, 0,
     {sizeof(nnt_rope_options), 500000.0, NNT_ROPE_SCALING_NONE, 8.0, 1.0, 4.0, 8192, 32.0,
      1.0, 0.0, 1, 1.0, 0, {0}, {0}, {0}}, 0, 0},
    {"mqa", 53, 24, 2, 4, 1, 40, 1e-6, 1, 1,
     {sizeof(nnt_rope_options), 10000.0, NNT_ROPE_SCALING_LLAMA3, 8.0, 1.0, 4.0, 16, 32.0, 1.0,
      0.0, 1, 1.0, 0, {0}, {0}, {0}}, 0, 0},
    {"qwen3", 67, 40, 2, 4, 2, 56, 1e-6, 1, 1,
     {sizeof(nnt_rope_options), 1000000.0, NNT_ROPE_SCALING_NONE, 8.0, 1.0, 4.0, 8192, 32.0,
      1.0, 0.0, 1, 1.0, 0, {0}, {0}, {0}}, 12, 1},
};

enum { B = 2, T = 8, STEPS = 10 };

static nnt_ctx *ctx;

static void setup(void)
{
    ctx = test_ctx();
}

static void teardown(void)
{
    EXPECT_OK(nnt_ctx_destroy(ctx));
    ctx = NULL;
}

/* ---- fixture files ---------------------------------------------------------------------- */

/* NAME.<what>.safetensors; "model": the Hugging Face directory's NAME/model.safetensors. */
static nnt_st_reader *open_st(const fix_model *m, const char *what)
{
    char path[4200];
    const char *top = getenv("top_srcdir");
    snprintf(path, sizeof path, "%s/tests/fixtures/llama_tiny/%s%s%s.safetensors",
             top ? top : ".", m->name, strcmp(what, "model") ? "." : "/", what);
    return fixture_open_st_path(path);
}

/* A whole entry as want (malloc'd); *n (may be NULL) its element count. */
/* ---- the model ------------------------------------------------------------------------ */

/* The HF name of a parameter of the sequential: "0.wte.weight" the embedding,
 * "<1+i>.<rest>" block i ("model.layers.<i>.<rest>": the block's children and the
 * attention's and MLP's parameters already have HF's names), "<L+1>.weight" the final
 * norm, "<L+2>.weight" the untied head. */
static void hf_name(const fix_model *m, const char *name, char *out, size_t size)
{
    char *rest = NULL;
    long i = strtol(name, &rest, 10);
    ck_assert(rest && *rest == '.');
    rest++;
    if (i == 0 && strcmp(rest, "wte.weight") == 0)
        snprintf(out, size, "model.embed_tokens.weight");
    else if (i >= 1 && i <= m->L)
        snprintf(out, size, "model.layers.%ld.%s", i - 1, rest);
    else if (i == m->L + 1 && strcmp(rest, "weight") == 0)
        snprintf(out, size, "model.norm.weight");
    else if (i == m->L + 2 && strcmp(rest, "weight") == 0)
        snprintf(out, size, "lm_head.weight");
    else
        ck_abort_msg("no HF name for %s", name);
}

/* The tilings: whole; partial C / hidden / V tiles with a heads tile of 3 (q tiles 3 + 1:
 * the first cuts a GQA group of gqa; mqa's one kv head serves both); one head per tile
 * with head vectors in tiles of 1. The untied head is a linear layer: its V tile is the
 * hidden entry. The tokens' (B, T) tiles. */
static const struct {
    nnt_tiling t;
    int64_t tok[2];
} TILINGS[3] = {
    {{sizeof(nnt_tiling), 0, 0, 0, 0, 0, 0, 0}, {B, T}},
    {{sizeof(nnt_tiling), 0, 0, 5, 7, 9, 3, 0}, {1, 3}},
    {{sizeof(nnt_tiling), 0, 0, 8, 16, 10, 1, 1}, {2, 5}},
};

static nnt_layer *build(const fix_model *m, const nnt_tiling *t)
{
    nnt_attention_options ao = NNT_ATTENTION_OPTIONS_INIT;
    ao.kv_heads = m->NKV;
    ao.qkv_bias = m->bias;
    ao.out_bias = m->bias;
    ao.rope = &m->rope;
    ao.head_dim = m->head_dim;
    ao.qk_norm = m->qk_norm;
    ao.qk_norm_eps = m->eps;
    nnt_mlp_options mo = NNT_MLP_OPTIONS_INIT;
    mo.kind = NNT_MLP_SWIGLU;
    mo.bias = 0;
    nnt_block_options bo = NNT_BLOCK_OPTIONS_INIT;
    bo.norm = NNT_NORM_RMSNORM;
    bo.norm_eps = m->eps;
    bo.attention = &ao;
    bo.mlp = &mo;
    int64_t L = m->L, n = L + 4;
    nnt_layer *kids[16] = {NULL}, *seq = NULL;
    EXPECT_OK(nnt_layer_embedding_create(ctx, m->V, 0, m->C, t, &kids[0]));
    for (int64_t i = 0; i < L; i++)
        EXPECT_OK(nnt_layer_block_create_ex(ctx, m->C, m->NH, m->hidden, &bo, t, &kids[1 + i]));
    EXPECT_OK(nnt_layer_rmsnorm_create(ctx, m->C, m->eps, t, &kids[L + 1]));
    if (m->tied)
        EXPECT_OK(nnt_layer_lm_head_create(kids[0], &kids[L + 2]));
    else
        EXPECT_OK(nnt_layer_linear_create(ctx, m->C, m->V, 0, t, &kids[L + 2]));
    EXPECT_OK(nnt_layer_cross_entropy_create(ctx, -100, &kids[L + 3]));
    EXPECT_OK(nnt_layer_sequential_create(ctx, (int)n, kids, &seq));
    return seq;
}

/* The model of m in tiling t with the fixture's weights: every parameter found under its
 * HF name with its element count, and as many parameters as the file has tensors. */
static nnt_layer *load(const fix_model *m, const nnt_tiling *t)
{
    nnt_layer *l = build(m, t);
    nnt_st_reader *r = open_st(m, "model");
    int64_t count = 0;
    EXPECT_OK(nnt_layer_num_params(l, &count, NULL));
    ck_assert_int_eq(count, (int64_t)nnt_st_count(r));
    for (int64_t i = 0; i < count; i++) {
        nnt_param_info p = test_param_at(l, i);
        char name[256];
        int64_t n = 0, want = 0;
        hf_name(m, p.name, name, sizeof name);
        float *v = fixture_read_n(r, name, NNT_IO_F32, &n);
        EXPECT_OK(nnt_tensor_numel(p.value, &want));
        ck_assert_msg(n == want, "%s (%s): %lld elements, fixture %lld", p.name, name,
                      (long long)want, (long long)n);
        EXPECT_OK(nnt_tensor_copy_from_host(p.value, v, (size_t)n * sizeof *v));
        free(v);
    }
    nnt_st_close(r);
    return l;
}

/* ---- logits, loss, gradients ------------------------------------------------------------ */

/* Every gradient of l against the fixture r's grad.<HF name> (normwise relative): the
 * largest above *eg goes into *eg, its parameter's HF name and suffix into worst. */
static void worst_gradient(const fix_model *m, nnt_layer *l, nnt_st_reader *r,
                           const char *suffix, double *eg, char *worst, size_t cap)
{
    int64_t count = 0;
    EXPECT_OK(nnt_layer_num_params(l, &count, NULL));
    for (int64_t i = 0; i < count; i++) {
        nnt_param_info p = test_param_at(l, i);
        char name[256], gname[300];
        hf_name(m, p.name, name, sizeof name);
        snprintf(gname, sizeof gname, "grad.%s", name);
        int64_t ng = 0, nw = 0;
        float *want = fixture_read_n(r, gname, NNT_IO_F32, &nw);
        float *got = test_to_host(p.grad, &ng);
        ck_assert_int_eq(ng, nw);
        double e = test_rel_err(got, want, ng);
        if (e >= *eg) {
            *eg = e;
            snprintf(worst, cap, "%s%s", name, suffix);
        }
        free(want);
        free(got);
    }
}

/* _i = model * 3 + tiling */
START_TEST(test_reference)
{
    const fix_model *m = &MODELS[_i / 3];
    int ti = _i % 3;
    nnt_st_reader *r = open_st(m, "reference");
    int32_t *tok = fixture_read_n(r, "tokens", NNT_IO_I32, NULL);
    int32_t *tgt = fixture_read_n(r, "targets", NNT_IO_I32, NULL);
    float *want_logits = fixture_read_n(r, "logits", NNT_IO_F32, NULL);
    float *want_loss = fixture_read_n(r, "loss", NNT_IO_F32, NULL);
    nnt_layer *l = load(m, &TILINGS[ti].t);
    nnt_tensor *x = fixture_ids(ctx, B, T, tok, TILINGS[ti].tok);
    nnt_tensor *y = fixture_ids(ctx, B, T, tgt, (int64_t[2]){1, 4});
    /* without targets the sequential ends in the logits */
    nnt_tensor *out = NULL;
    EXPECT_OK(nnt_layer_forward(l, x, &out));
    int64_t n = 0;
    float *logits = test_to_host(out, &n);
    ck_assert_int_eq(n, B * T * m->V);
    double el = test_rel_err(logits, want_logits, n);
    /* with targets: the loss, then every gradient */
    double loss = 0.0;
    EXPECT_OK(nnt_layer_zero_grad(l));
    EXPECT_OK(nnt_layer_set_targets(l, y));
    EXPECT_OK(nnt_layer_forward(l, x, NULL));
    EXPECT_OK(nnt_layer_loss(l, &loss));
    EXPECT_OK(nnt_layer_backward(l, NULL, NULL));
    double eloss = fabs(loss - want_loss[0]) / want_loss[0], eg = 0.0;
    char worst[300] = "";
    /* round 0: zero-filled gradients (nnt_layer_zero_grad); round 1: nnt-train's path,
     * nnt_layer_clear_grad (linear, attention and embedding gradients dropped, the backward
     * writes them), against the same reference */
    for (int round = 0; round < 2; round++) {
        if (round == 1) {
            EXPECT_OK(nnt_layer_clear_grad(l));
            EXPECT_OK(nnt_layer_forward(l, x, NULL));
            EXPECT_OK(nnt_layer_backward(l, NULL, NULL));
        }
        worst_gradient(m, l, r, round ? " after clear_grad" : "", &eg, worst, sizeof worst);
    }
    printf("test_layer_llama %s tiling %d: logits rel %.2e, loss rel %.2e, worst gradient "
           "rel %.2e (%s)\n", m->name, ti, el, eloss, eg, worst);
    EXPECT_TOL(el, LOGITS_TOL, "%s tiling %d: logits", m->name, ti);
    EXPECT_TOL(eloss, LOSS_TOL, "%s tiling %d: loss", m->name, ti);
    EXPECT_TOL(eg, GRAD_TOL, "%s tiling %d: gradient of %s", m->name, ti, worst);
    free(logits);
    free(tok);
    free(tgt);
    free(want_logits);
    free(want_loss);
    nnt_tensor_destroy(x);
    nnt_tensor_destroy(y);
    nnt_layer_destroy(l);
    nnt_st_close(r);
}
END_TEST

/* ---- label smoothing ------------------------------------------------------------------------ */

/* _i = model (gqa, mqa) * 3 + tiling: the loss and every gradient with
 * nnt_layer_set_label_smoothing against transformers' LabelSmoother on the same model
 * (tests/fixtures/smoothing: targets with 3 ignored positions, eps 0.1 and 0.25), through
 * nnt-train's path (nnt_layer_clear_grad). */
START_TEST(test_smoothed)
{
    const fix_model *m = &MODELS[_i / 3];
    int ti = _i % 3;
    nnt_st_reader *r = fixture_open_st_path(fixture_path_in("smoothing", m->name,
                                                            "safetensors"));
    int32_t *tok = fixture_read_n(r, "tokens", NNT_IO_I32, NULL);
    int32_t *tgt = fixture_read_n(r, "targets", NNT_IO_I32, NULL);
    float *eps = fixture_read_n(r, "eps", NNT_IO_F32, NULL);
    float *want_loss = fixture_read_n(r, "loss", NNT_IO_F32, NULL);
    nnt_layer *l = load(m, &TILINGS[ti].t);
    nnt_tensor *x = fixture_ids(ctx, B, T, tok, TILINGS[ti].tok);
    nnt_tensor *y = fixture_ids(ctx, B, T, tgt, (int64_t[2]){1, 4});
    double loss = 0.0, eg = 0.0;
    EXPECT_OK(nnt_layer_set_targets(l, y));
    EXPECT_OK(nnt_layer_set_label_smoothing(l, eps[0]));
    EXPECT_OK(nnt_layer_clear_grad(l));
    EXPECT_OK(nnt_layer_forward(l, x, NULL));
    EXPECT_OK(nnt_layer_loss(l, &loss));
    EXPECT_OK(nnt_layer_backward(l, NULL, NULL));
    double eloss = fabs(loss - want_loss[0]) / want_loss[0];
    char worst[300] = "";
    worst_gradient(m, l, r, "", &eg, worst, sizeof worst);
    printf("test_layer_llama %s smoothed %g, tiling %d: loss rel %.2e, worst gradient rel "
           "%.2e (%s)\n", m->name, (double)eps[0], ti, eloss, eg, worst);
    EXPECT_TOL(eloss, SMOOTH_LOSS_TOL, "%s tiling %d: smoothed loss", m->name, ti);
    EXPECT_TOL(eg, SMOOTH_GRAD_TOL, "%s tiling %d: smoothed gradient of %s", m->name, ti,
               worst);
    /* off again: the plain loss of the same targets, above the smoothed one's difference */
    double plain = 0.0;
    EXPECT_OK(nnt_layer_set_label_smoothing(l, 0.0));
    EXPECT_OK(nnt_layer_forward(l, x, NULL));
    EXPECT_OK(nnt_layer_loss(l, &plain));
    ck_assert_msg(fabs(plain - loss) > 1e-5 * loss, "smoothing off: loss %.9g, smoothed %.9g",
                  plain, loss);
    EXPECT_FAIL_MSG(nnt_layer_set_label_smoothing(l, 1.0), NNT_E_INVAL, "outside [0, 1)");
    EXPECT_FAIL_MSG(nnt_layer_set_label_smoothing(l, -0.1), NNT_E_INVAL, "outside [0, 1)");
    free(tok), free(tgt), free(eps), free(want_loss);
    nnt_tensor_destroy(x);
    nnt_tensor_destroy(y);
    nnt_layer_destroy(l);
    nnt_st_close(r);
}
END_TEST

/* ---- 10 AdamW steps ----------------------------------------------------------------------- */

/* _i = model * 4 + (weight decay 0.1) * 2 + clear: gradients cleared before each step by
 * nnt_layer_zero_grad or, as nnt-train does, by nnt_layer_clear_grad (dropped) */
START_TEST(test_adamw)
{
    const fix_model *m = &MODELS[_i / 4];
    double wd = _i / 2 % 2 ? 0.1 : 0.0;
    int clear = _i % 2;
    nnt_st_reader *r = open_st(m, "train");
    int32_t *tok = fixture_read_n(r, "train_tokens", NNT_IO_I32, NULL);
    int32_t *tgt = fixture_read_n(r, "train_targets", NNT_IO_I32, NULL);
    float *want = fixture_read_n(r, wd == 0.0 ? "losses_wd0" : "losses_wd01", NNT_IO_F32, NULL);
    nnt_layer *l = load(m, &TILINGS[1].t);
    nnt_optim_options oo = NNT_OPTIM_OPTIONS_INIT;
    oo.lr = 1e-3;
    oo.beta1 = 0.9;
    oo.beta2 = 0.999;
    oo.eps = 1e-8;
    oo.weight_decay = wd;
    nnt_optim *opt = NULL;
    EXPECT_OK(nnt_optim_create(ctx, &oo, &opt));
    EXPECT_OK(nnt_optim_add_layer(opt, l));
    double worst = 0.0;
    for (int s = 0; s < STEPS; s++) {
        double loss = fixture_train_step(ctx, l, opt, B, T, tok + s * B * T, tgt + s * B * T,
                                         TILINGS[1].tok, (int64_t[2]){2, 3}, clear, NULL, NULL);
        double d = fabs(loss - want[s]);
        worst = d > worst ? d : worst;
    }
    printf("test_layer_llama %s adamw [wd %g, %s]: max |loss - fixture| %.2e over %d steps\n",
           m->name, wd, clear ? "clear_grad" : "zero_grad", worst, STEPS);
    EXPECT_TOL(worst, ADAMW_TOL, "%s adamw wd %g clear %d", m->name, wd, clear);
    nnt_optim_destroy(opt);
    nnt_layer_destroy(l);
    nnt_st_close(r);
    free(tok);
    free(tgt);
    free(want);
}
END_TEST

static Suite *llama_suite(void)
{
    Suite *s = suite_create("layer_llama");
    TCase *tc = tcase_create("layer_llama");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 120);
    tcase_add_loop_test(tc, test_reference, 0, 3 * NMODELS);
    tcase_add_loop_test(tc, test_adamw, 0, 4 * NMODELS);
    tcase_add_loop_test(tc, test_smoothed, 0, 2 * 3);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return run_suite(llama_suite());
}
