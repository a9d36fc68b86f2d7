/* SPDX-License-Identifier: MIT */
/* A model family is one unit: a family added only through the family table
 * (lib/models/family.h) is built, trained, listed, saved and loaded by the library's
 * generic code. The family here exists only in this test: GPT-2's layout (learned positions,
 * multi-head attention without rotary positions, every bias, GELU MLP, tied head) with
 * RMSNorm instead of LayerNorm, its own preset, config.json keys and architecture name, its
 * parameters under their own names in Hugging Face files. Checked:
 *   - nnt_model_family_info lists it after the library's families, with its preset and
 *     architecture; nnt_model_preset finds its preset;
 *   - nnt_model_create builds its tree from the descriptor (names, shapes, RMSNorm blocks),
 *     and it trains exactly as the same model assembled by hand from the public layers
 *     (nnt_layer_embedding_create, _block_create_ex, _rmsnorm_create, _lm_head_create,
 *     cross-entropy in a sequential): the math is the layers', the family adds none;
 *   - nnt_model_save_hf writes its config.json (its architecture, its keys) and weights,
 *     which nnt_model_hf_config / nnt_model_load_hf read back bit for bit; a tensor the
 *     model does not have is refused (the family is strict);
 *   - a training-state file records it, and nnt_model_load_train_state rebuilds it;
 *   - a configuration of a family the table does not have is refused, naming the ones it
 *     has; a config.json whose model_type is not its architecture's is refused, naming both.
 * It registers the family through the internal table, so it links the library's objects. */
#include "testutil.h"
#include "fixture.h"

#include "io/io.h"
#include "models/family.h"
#include "models/models.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

enum { B = 2, T = 12, STEPS = 4, FAMILY_ID = 100 };

/* ---- the test family ------------------------------------------------------------------------ */

static int rms_preset(const char *name, nnt_model_config *c)
{
    if (strcmp(name, "gpt2-rms-tiny") != 0)
        return 0;
    *c = nnt_gpt2_model_config(61, 24, 2, 4, 32);   /* V 61: no multiple of any tile */
    c->family = FAMILY_ID;
    c->norm_eps = 3e-5;   /* not a default: a reader that drops it fails the round trip */
    return 1;
}

static const char *const RMS_PRESETS[] = {"gpt2-rms-tiny", NULL};

static int rms_check(nnt_ctx *ctx, const char *fn, const nnt_model_config *c)
{
    if (c->kv_heads && c->kv_heads != c->heads)
        return nnt_fail(ctx, NNT_E_UNSUPPORTED, "%s: gpt2-rms has no kv_heads", fn);
    return NNT_OK;
}

static const nnt_hf_arch RMS_ARCHS[] = {{"Gpt2RmsTestForCausalLM", "gpt2_rms_test", NULL}};

static int rms_read_hf(const nnt_cfg_in *o, int arch, nnt_model_config *c)
{
    (void)arch;
    NNT_TRY(nnt_cfg_int(o, "vocab_size", 1, 0, &c->vocab));
    NNT_TRY(nnt_cfg_int(o, "n_positions", 1, 0, &c->max_seq));
    NNT_TRY(nnt_cfg_int(o, "n_embd", 1, 0, &c->channels));
    NNT_TRY(nnt_cfg_int(o, "n_layer", 1, 0, &c->layers));
    NNT_TRY(nnt_cfg_int(o, "n_head", 1, 0, &c->heads));
    return nnt_cfg_double(o, "rms_norm_eps", 1, 0, &c->norm_eps);
}

static int rms_hf_arch(nnt_ctx *ctx, const char *fn, const nnt_model_config *c)
{
    (void)ctx;
    (void)fn;
    (void)c;
    return 0;
}

static void rms_write_hf(nnt_cfg_out *t, int arch, const nnt_model_config *c)
{
    (void)arch;
    nnt_cfg_put_int(t, "vocab_size", c->vocab);
    nnt_cfg_put_int(t, "n_positions", c->max_seq);
    nnt_cfg_put_int(t, "n_embd", c->channels);
    nnt_cfg_put_int(t, "n_layer", c->layers);
    nnt_cfg_put_int(t, "n_head", c->heads);
    nnt_cfg_put_double(t, "rms_norm_eps", c->norm_eps);
}

static const char *const RMS_ROWS_FIRST[] = {"self_attn.c_proj.weight", NULL};

static const nnt_family RMS_FAMILY = {
    FAMILY_ID, "gpt2-rms", "GPT-2 with RMSNorm (test)", NNT_FAMILY_HAS_BIASES,
    rms_preset, RMS_PRESETS,
    rms_check,
    {"", "wte.weight", "h.", "ln_f", 1, NNT_NORM_RMSNORM, NNT_MLP_GELU, 0, 0, 0, 0, 0, 0, 0, 0},
    NULL,
    RMS_ARCHS, 1, rms_read_hf, rms_hf_arch, rms_write_hf,
    NULL, 0, RMS_ROWS_FIRST, "", 0, 1, "h.",
    NULL, 0, NULL,
    NULL,
    NULL,
    NULL, 0,
    NULL,
    NULL, NULL,
};

/* ---- fixture -------------------------------------------------------------------------------- */

static nnt_ctx *ctx;

static void setup(void)
{
    static int registered;
    if (!registered) {
        EXPECT_OK(nnt_family_register(&RMS_FAMILY));
        registered = 1;
    }
    ctx = test_ctx();
}

static void teardown(void)
{
    EXPECT_OK(nnt_ctx_destroy(ctx));
    ctx = NULL;
}

/* _i % 2: automatic tiles, or partial ones cutting batch, sequence, channels, hidden, vocab,
 * heads and head_dim. */
static const nnt_tiling TILINGS[2] = {
    {sizeof(nnt_tiling), 0, 0, 0, 0, 0, 0, 0},
    {sizeof(nnt_tiling), 1, 5, 12, 40, 16, 3, 5},
};

static nnt_model_config rms_config(void)
{
    nnt_model_config c;
    EXPECT_OK(nnt_model_preset("gpt2-rms-tiny", &c));
    return c;
}

static int64_t num_params(nnt_layer *l)
{
    int64_t n = 0;
    EXPECT_OK(nnt_layer_num_params(l, &n, NULL));
    return n;
}

static float *values(nnt_layer *l, int64_t i, int grad, int64_t *n)
{
    nnt_param_info p = test_param_at(l, i);
    return test_to_host(grad ? p.grad : p.value, n);
}

/* Whether every parameter i of a and b holds the same bits (values, or gradients). */
static void expect_same_params(nnt_layer *a, nnt_layer *b, int grad, const char *what)
{
    int64_t n = num_params(a);
    ck_assert_int_eq(num_params(b), n);
    for (int64_t i = 0; i < n; i++) {
        int64_t na = 0, nb = 0;
        float *x = values(a, i, grad, &na), *y = values(b, i, grad, &nb);
        ck_assert_int_eq(na, nb);
        ck_assert_msg(memcmp(x, y, (size_t)na * sizeof *x) == 0, "%s: %s differs", what,
                      test_param_at(a, i).name);
        free(x);
        free(y);
    }
}

/* ---- the table -------------------------------------------------------------------------------- */

START_TEST(test_table)
{
    nnt_family_info f = NNT_FAMILY_INFO_INIT;
    EXPECT_OK(nnt_model_family_info(0, &f));
    ck_assert_int_eq(f.family, NNT_FAMILY_GPT2);
    ck_assert_str_eq(f.name, "gpt2");
    ck_assert_str_eq(f.architectures, "GPT2LMHeadModel");
    ck_assert_str_eq(f.presets, "gpt2, gpt2-medium, gpt2-large, gpt2-xl, tiny");
    ck_assert_uint_eq(f.features, NNT_FAMILY_HAS_LLMC);
    EXPECT_OK(nnt_model_family_info(1, &f));
    ck_assert_int_eq(f.family, NNT_FAMILY_LLAMA);
    ck_assert_str_eq(f.architectures, "LlamaForCausalLM, MistralForCausalLM, Qwen2ForCausalLM, "
                                      "Qwen3ForCausalLM, SmolLM3ForCausalLM");
    ck_assert_str_eq(f.model_types, "llama, mistral, qwen2, qwen3, smollm3");
    ck_assert(f.features & NNT_FAMILY_HAS_KV_HEADS);
    ck_assert(f.features & NNT_FAMILY_HAS_NOPE);
    ck_assert(f.features & NNT_FAMILY_HAS_ROPE);
    ck_assert(!(f.features & NNT_FAMILY_HAS_LLMC));
    EXPECT_OK(nnt_model_family_info(2, &f));
    ck_assert_int_eq(f.family, NNT_FAMILY_GEMMA);
    ck_assert_str_eq(f.architectures, "Gemma3ForCausalLM, Gemma2ForCausalLM, "
                                      "Gemma3ForConditionalGeneration");
    ck_assert_str_eq(f.presets, "gemma3-270m, gemma3-1b, gemma2-2b");
    ck_assert(f.features & NNT_FAMILY_HAS_SOFTCAP);
    EXPECT_OK(nnt_model_family_info(3, &f));
    ck_assert_int_eq(f.family, NNT_FAMILY_MOE);
    ck_assert_str_eq(f.architectures, "MixtralForCausalLM, Qwen3MoeForCausalLM, "
                                      "OlmoeForCausalLM, Qwen2MoeForCausalLM, "
                                      "GptOssForCausalLM");
    ck_assert(f.features & NNT_FAMILY_HAS_MOE);
    ck_assert(f.features & NNT_FAMILY_HAS_QK_NORM_WHOLE);
    EXPECT_OK(nnt_model_family_info(4, &f));
    ck_assert_int_eq(f.family, NNT_FAMILY_OLMO);
    ck_assert_str_eq(f.architectures, "Olmo2ForCausalLM, Olmo3ForCausalLM");
    ck_assert_str_eq(f.model_types, "olmo2, olmo3");
    ck_assert_str_eq(f.presets, "olmo2-1b, olmo2-7b");
    ck_assert(f.features & NNT_FAMILY_HAS_QK_NORM_WHOLE);
    ck_assert(f.features & NNT_FAMILY_HAS_WINDOW && f.features & NNT_FAMILY_HAS_LOCAL_ROPE);
    ck_assert(!(f.features & NNT_FAMILY_HAS_MOE));
    EXPECT_OK(nnt_model_family_info(5, &f));
    ck_assert_int_eq(f.family, NNT_FAMILY_PHI3);
    ck_assert_str_eq(f.architectures, "Phi3ForCausalLM");
    ck_assert_str_eq(f.model_types, "phi3");
    ck_assert_str_eq(f.presets, "phi3-mini, phi4-mini");
    ck_assert(f.features & NNT_FAMILY_HAS_PARTIAL_ROTARY && f.features & NNT_FAMILY_HAS_WINDOW);
    ck_assert(!(f.features & NNT_FAMILY_HAS_BIASES) && !(f.features & NNT_FAMILY_HAS_QK_NORM));
    EXPECT_OK(nnt_model_family_info(6, &f));
    ck_assert_int_eq(f.family, NNT_FAMILY_PHI);
    ck_assert_str_eq(f.architectures, "PhiForCausalLM");
    ck_assert_str_eq(f.model_types, "phi");
    ck_assert_str_eq(f.presets, "phi-1.5, phi-2");
    ck_assert(f.features & NNT_FAMILY_HAS_PARTIAL_ROTARY && f.features & NNT_FAMILY_HAS_UNTIED);
    ck_assert(!(f.features & NNT_FAMILY_HAS_BIASES) && !(f.features & NNT_FAMILY_HAS_WINDOW));
    EXPECT_OK(nnt_model_family_info(7, &f));
    ck_assert_int_eq(f.family, NNT_FAMILY_GRANITE);
    ck_assert_str_eq(f.architectures, "GraniteForCausalLM");
    ck_assert_str_eq(f.presets, "");
    ck_assert(f.features & NNT_FAMILY_HAS_MULTIPLIERS && f.features & NNT_FAMILY_HAS_BIASES);
    EXPECT_OK(nnt_model_family_info(8, &f));
    ck_assert_int_eq(f.family, NNT_FAMILY_STABLELM);
    ck_assert_str_eq(f.architectures, "StableLmForCausalLM");
    ck_assert_str_eq(f.presets, "stablelm-2-1.6b, stablelm-3b");
    ck_assert(f.features & NNT_FAMILY_HAS_PARTIAL_ROTARY &&
              !(f.features & NNT_FAMILY_HAS_HEAD_DIM));
    EXPECT_OK(nnt_model_family_info(9, &f));
    ck_assert_int_eq(f.family, NNT_FAMILY_GPTNEOX);
    ck_assert_str_eq(f.architectures, "GPTNeoXForCausalLM");
    ck_assert_str_eq(f.model_types, "gpt_neox");
    ck_assert_str_eq(f.presets, "pythia-70m, pythia-160m, pythia-410m, pythia-1b, pythia-1.4b, "
                     "pythia-2.8b, pythia-6.9b, pythia-12b");
    ck_assert(f.features & NNT_FAMILY_HAS_SERIAL_BLOCKS && f.features & NNT_FAMILY_HAS_BIASES &&
              !(f.features & NNT_FAMILY_HAS_KV_HEADS));
    EXPECT_OK(nnt_model_family_info(10, &f));
    ck_assert_int_eq(f.family, NNT_FAMILY_STARCODER2);
    ck_assert_str_eq(f.architectures, "Starcoder2ForCausalLM");
    ck_assert_str_eq(f.model_types, "starcoder2");
    ck_assert_str_eq(f.presets, "starcoder2-3b, starcoder2-7b, starcoder2-15b");
    ck_assert(f.features & NNT_FAMILY_HAS_WINDOW && f.features & NNT_FAMILY_HAS_BIASES &&
              f.features & NNT_FAMILY_HAS_KV_HEADS &&
              !(f.features & NNT_FAMILY_HAS_PARTIAL_ROTARY));
    EXPECT_OK(nnt_model_family_info(11, &f));
    ck_assert_int_eq(f.family, NNT_FAMILY_GPTBIGCODE);
    ck_assert_str_eq(f.architectures, "GPTBigCodeForCausalLM");
    ck_assert_str_eq(f.model_types, "gpt_bigcode");
    ck_assert_str_eq(f.presets, "tiny-starcoder, santacoder, starcoder");
    ck_assert(f.features & NNT_FAMILY_HAS_KV_HEADS && f.features & NNT_FAMILY_HAS_GELU_CHOICE &&
              !(f.features & NNT_FAMILY_HAS_ROPE) && !(f.features & NNT_FAMILY_HAS_BIASES));
    EXPECT_OK(nnt_model_family_info(12, &f));
    ck_assert_int_eq(f.family, NNT_FAMILY_FALCON);
    ck_assert_str_eq(f.architectures, "FalconForCausalLM");
    ck_assert_str_eq(f.model_types, "falcon");
    ck_assert_str_eq(f.presets, "falcon-7b, falcon-40b");
    ck_assert(f.features & NNT_FAMILY_HAS_PARALLEL_NORMS &&
              f.features & NNT_FAMILY_HAS_SERIAL_BLOCKS && f.features & NNT_FAMILY_HAS_ROPE &&
              !(f.features & NNT_FAMILY_HAS_PARTIAL_ROTARY));
    EXPECT_OK(nnt_model_family_info(13, &f));
    ck_assert_int_eq(f.family, FAMILY_ID);
    ck_assert_str_eq(f.title, "GPT-2 with RMSNorm (test)");
    ck_assert_str_eq(f.presets, "gpt2-rms-tiny");
    ck_assert_str_eq(f.architectures, "Gpt2RmsTestForCausalLM");
    EXPECT_FAIL_MSG(nnt_model_family_info(14, &f), NNT_E_INVAL, "no family 14");
    EXPECT_FAIL_MSG(nnt_model_family_info(-1, &f), NNT_E_INVAL, "no family -1");
    EXPECT_FAIL_MSG(nnt_model_family_info(0, NULL), NNT_E_INVAL, "info is NULL");
    f.size = 8;
    EXPECT_FAIL_MSG(nnt_model_family_info(0, &f), NNT_E_INVAL, "NNT_FAMILY_INFO_INIT");
    /* the preset lookup spans every family; an unknown name lists them all */
    nnt_model_config c = rms_config();
    ck_assert_int_eq(c.family, FAMILY_ID);
    ck_assert_double_eq(c.norm_eps, 3e-5);
    EXPECT_FAIL_MSG(nnt_model_preset("nope", &c), NNT_E_INVAL, "tiny, llama-tiny");
    ck_assert_ptr_nonnull(strstr(nnt_ctx_last_error(NULL), "qwen3-0.6b, smollm3-3b, gemma3-270m"));
    ck_assert_ptr_nonnull(strstr(nnt_ctx_last_error(NULL), "gemma2-2b, moe-tiny"));
    ck_assert_ptr_nonnull(strstr(nnt_ctx_last_error(NULL),
                                 "qwen1.5-moe-a2.7b, gpt-oss-20b, gpt-oss-120b, "
                                 "gpt-oss-tiny, olmo2-1b, olmo2-7b, phi3-mini, phi4-mini, "
                                 "phi-1.5, phi-2, stablelm-2-1.6b, stablelm-3b, "
                                 "pythia-70m, pythia-160m"));
    ck_assert_ptr_nonnull(strstr(nnt_ctx_last_error(NULL),
                                 "pythia-12b, starcoder2-3b, starcoder2-7b, starcoder2-15b"));
    ck_assert_ptr_nonnull(strstr(nnt_ctx_last_error(NULL), "starcoder2-15b, tiny-starcoder, "
                                 "santacoder, starcoder, falcon-7b, falcon-40b, "
                                 "gpt2-rms-tiny"));
    /* the table refuses a second family of the same id */
    ck_assert_int_eq(nnt_family_register(&RMS_FAMILY), NNT_E_BUSY);
}
END_TEST

/* ---- the tree, against the same model from the public layers ------------------------------ */

/* GPT-2's block with RMSNorm, the options the family gives the layers. */
static nnt_layer *by_hand(const nnt_model_config *c, const nnt_tiling *t)
{
    nnt_tiling r;
    EXPECT_OK(nnt_model_tiling(ctx, c, B, T, t, &r));
    nnt_block_options bo = NNT_BLOCK_OPTIONS_INIT;
    bo.norm = NNT_NORM_RMSNORM;
    bo.norm_eps = c->norm_eps;
    int64_t L = c->layers, n = L + 4;
    nnt_layer *kids[8] = {NULL}, *seq = NULL;
    EXPECT_OK(nnt_layer_embedding_create(ctx, c->vocab, c->max_seq, c->channels, &r, &kids[0]));
    for (int64_t i = 0; i < L; i++)
        EXPECT_OK(nnt_layer_block_create_ex(ctx, c->channels, c->heads, 4 * c->channels, &bo,
                                            &r, &kids[1 + i]));
    EXPECT_OK(nnt_layer_rmsnorm_create(ctx, c->channels, c->norm_eps, &r, &kids[L + 1]));
    EXPECT_OK(nnt_layer_lm_head_create(kids[0], &kids[L + 2]));
    EXPECT_OK(nnt_layer_cross_entropy_create(ctx, -1, &kids[L + 3]));
    EXPECT_OK(nnt_layer_sequential_create(ctx, (int)n, kids, &seq));
    return seq;
}

static void copy_values(nnt_layer *src, nnt_layer *dst)
{
    int64_t n = num_params(src);
    for (int64_t i = 0; i < n; i++) {
        int64_t k = 0, want = 0;
        float *v = values(src, i, 0, &k);
        nnt_param_info q = test_param_at(dst, i);
        EXPECT_OK(nnt_tensor_numel(q.value, &want));
        ck_assert_int_eq(k, want);
        EXPECT_OK(nnt_tensor_copy_from_host(q.value, v, (size_t)k * sizeof *v));
        free(v);
    }
}

static nnt_optim *adamw(nnt_layer *model)
{
    nnt_optim_options oo = NNT_OPTIM_OPTIONS_INIT;
    oo.lr = 3e-3;
    oo.weight_decay = 0.1;
    nnt_optim *opt = NULL;
    EXPECT_OK(nnt_optim_create(ctx, &oo, &opt));
    EXPECT_OK(nnt_optim_add_layer(opt, model));
    return opt;
}

static nnt_tensor *ids(int64_t vocab, const int64_t *tile, unsigned long long *state)
{
    int64_t shape[2] = {B, T};
    int32_t v[B * T];
    for (int i = 0; i < B * T; i++)
        v[i] = (int32_t)(test_rand(state) * (double)vocab);
    nnt_tensor *x = NULL;
    EXPECT_OK(nnt_tensor_create(ctx, NNT_INT32, 2, shape, tile, &x));
    EXPECT_OK(nnt_tensor_copy_from_host(x, v, sizeof v));
    return x;
}

static double step(nnt_layer *m, nnt_optim *o, nnt_tensor *x, nnt_tensor *y)
{
    double loss = 0.0;
    EXPECT_OK(nnt_layer_zero_grad(m));
    EXPECT_OK(nnt_layer_set_targets(m, y));
    EXPECT_OK(nnt_layer_forward(m, x, NULL));
    EXPECT_OK(nnt_layer_backward(m, NULL, NULL));
    EXPECT_OK(nnt_layer_loss(m, &loss));
    EXPECT_OK(nnt_optim_step(o));
    return loss;
}

START_TEST(test_tree)
{
    nnt_model_config c = rms_config(), got;
    nnt_layer *model = NULL;
    nnt_layer_kind kind;
    EXPECT_OK(nnt_model_create(ctx, &c, B, T, &TILINGS[_i], &model));
    EXPECT_OK(nnt_layer_kind_of(model, &kind));
    ck_assert_int_eq(kind, NNT_LAYER_MODEL);   /* no build function: the generic tree */
    EXPECT_OK(nnt_model_config_of(model, &got));
    ck_assert_int_eq(got.family, FAMILY_ID);
    /* the descriptor's names: embedding and position table, RMSNorm blocks, final norm */
    int64_t n = num_params(model);
    ck_assert_int_eq(n, 2 + 14 * c.layers + 1);   /* RMSNorms have no bias */
    ck_assert_str_eq(test_param_at(model, 0).name, "wte.weight");
    ck_assert_str_eq(test_param_at(model, 1).name, "wpe.weight");
    ck_assert_str_eq(test_param_at(model, 2).name, "h.0.input_layernorm.weight");
    ck_assert_str_eq(test_param_at(model, n - 1).name, "ln_f.weight");
    /* the same model by hand from the public layers trains to the same bits */
    nnt_layer *hand = by_hand(&c, &TILINGS[_i]);
    EXPECT_OK(nnt_layer_init(model, 7));
    copy_values(model, hand);
    nnt_optim *om = adamw(model), *oh = adamw(hand);
    nnt_tiling r;
    EXPECT_OK(nnt_model_tiling(ctx, &c, B, T, &TILINGS[_i], &r));
    int64_t tile[2] = {r.batch, r.seq};
    unsigned long long state = 0xfa111ull;
    double first = 0.0, last = 0.0;
    for (int s = 0; s < STEPS; s++) {
        nnt_tensor *x = ids(c.vocab, tile, &state), *y = ids(c.vocab, tile, &state);
        double lm = step(model, om, x, y), lh = step(hand, oh, x, y);
        printf("test_family tiling %d step %d: loss %.9f family, %.9f by hand\n", _i, s, lm,
               lh);
        /* measured: equal (the same layers, tasks and tiles) */
        ck_assert_msg(lm == lh, "step %d: loss %.9g from the family, %.9g by hand", s, lm, lh);
        if (s == 0) {
            expect_same_params(model, hand, 1, "first gradients");
            first = lm;
        }
        last = lm;
        nnt_tensor_destroy(x);
        nnt_tensor_destroy(y);
    }
    expect_same_params(model, hand, 0, "values after the steps");
    ck_assert_msg(isfinite(first) && fabs(first - log((double)c.vocab)) < 0.5,
                  "first loss %g is not near log(V)", first);
    ck_assert_msg(last < first, "loss %g after %d steps, %g at first", last, STEPS, first);
    nnt_optim_destroy(om);
    nnt_optim_destroy(oh);
    nnt_layer_destroy(hand);
    nnt_layer_destroy(model);
}
END_TEST

/* ---- files -------------------------------------------------------------------------------- */

START_TEST(test_files)
{
    nnt_model_config c = rms_config(), back;
    nnt_layer *model = NULL, *loaded = NULL;
    EXPECT_OK(nnt_model_create(ctx, &c, B, T, &TILINGS[1], &model));
    EXPECT_OK(nnt_layer_init(model, 11));
    test_make_tmpdir("family");
    char dir[4096];
    snprintf(dir, sizeof dir, "%s", test_tmp_path("hf"));
    EXPECT_OK(nnt_model_save_hf(model, dir));
    /* config.json: its architecture and its keys */
    char path[4200];
    snprintf(path, sizeof path, "%s/config.json", dir);
    FILE *f = fopen(path, "r");
    ck_assert_ptr_nonnull(f);
    char text[2048] = "";
    size_t len = fread(text, 1, sizeof text - 1, f);
    text[len] = '\0';
    fclose(f);
    ck_assert_msg(strstr(text, "\"architectures\": [\"Gpt2RmsTestForCausalLM\"]") &&
                  strstr(text, "\"model_type\": \"gpt2_rms_test\"") &&
                  strstr(text, "\"n_embd\": 32") && strstr(text, "\"rms_norm_eps\": 3e-05"),
                  "config.json:\n%s", text);
    EXPECT_OK(nnt_model_hf_config(ctx, dir, &back));
    ck_assert_int_eq(back.family, FAMILY_ID);
    ck_assert_int_eq(back.vocab, c.vocab);
    ck_assert_int_eq(back.layers, c.layers);
    ck_assert_double_eq(back.norm_eps, c.norm_eps);
    /* the weights under the model's own names, back bit for bit in another tiling */
    EXPECT_OK(nnt_model_load_hf(ctx, dir, B, T, &TILINGS[0], &loaded));
    expect_same_params(model, loaded, 0, "loaded from its Hugging Face directory");
    nnt_layer_destroy(loaded);
    nnt_st_reader *r = NULL;
    char err[256];
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    EXPECT_OK(nnt_st_open(path, &r, err, sizeof err));
    ck_assert_ptr_nonnull(nnt_st_find(r, "h.1.self_attn.c_proj.weight"));
    const nnt_st_entry *e = nnt_st_find(r, "h.1.self_attn.c_proj.weight");
    ck_assert_int_eq(e->ndim, 2);   /* (C, NH, hd) is (C, NH hd): the family's rows_first */
    ck_assert_int_eq(e->shape[0], c.channels);
    nnt_st_close(r);
    /* a training state records the family; the model comes back from it */
    nnt_optim *opt = adamw(model);
    snprintf(path, sizeof path, "%s", test_tmp_path("state.safetensors"));
    nnt_train_state st = NNT_TRAIN_STATE_INIT;
    EXPECT_OK(nnt_train_state_save(opt, path, &st));
    EXPECT_OK(nnt_model_train_state_config(ctx, path, &back));
    ck_assert_int_eq(back.family, FAMILY_ID);
    EXPECT_OK(nnt_model_load_train_state(ctx, path, B, T, NULL, NULL, &loaded));
    expect_same_params(model, loaded, 0, "loaded from a training state");
    nnt_layer_destroy(loaded);
    nnt_optim_destroy(opt);
    nnt_layer_destroy(model);
    test_remove_tmpdir();
}
END_TEST

START_TEST(test_unknown_family)
{
    nnt_model_config c = rms_config();
    nnt_layer *model = NULL;
    c.family = 77;
    EXPECT_FAIL_MSG(nnt_model_create(ctx, &c, B, T, NULL, &model), NNT_E_INVAL,
                    "unknown family 77");
    ck_assert_ptr_nonnull(strstr(nnt_ctx_last_error(ctx), "1 (Llama)"));
    ck_assert_ptr_nonnull(strstr(nnt_ctx_last_error(ctx), "100 (GPT-2 with RMSNorm (test))"));
    ck_assert_ptr_null(model);
    /* the family's own check runs */
    c = rms_config();
    c.kv_heads = 2;
    EXPECT_FAIL_MSG(nnt_model_create(ctx, &c, B, T, NULL, &model), NNT_E_UNSUPPORTED,
                    "gpt2-rms has no kv_heads");
}
END_TEST

/* config.json: architectures[0] chooses the family; a model_type beside it must be that
 * architecture's (read as Llama before: a "bert" model_type beside LlamaForCausalLM). */
/* ---- the docs name every family -------------------------------------------------------- */

/* top_srcdir/rel, whole (NUL-terminated, malloc'd) */
static char *source_text(const char *rel)
{
    const char *top = getenv("top_srcdir");
    char path[4096];
    size_t len = 0;
    snprintf(path, sizeof path, "%s/%s", top && *top ? top : ".", rel);
    return (char *)slurp(path, &len);
}

/* Each item of list ("a, b, c") in text (what: the file, for the message). */
static void expect_each(const char *list, const char *text, const char *what, const char *fmt)
{
    char item[256], want[300];
    for (const char *p = list; *p;) {
        size_t n = strcspn(p, ",");
        ck_assert_uint_lt(n, sizeof item);
        memcpy(item, p, n);
        item[n] = '\0';
        snprintf(want, sizeof want, fmt, item);
        ck_assert_msg(strstr(text, want) != NULL, "%s does not name '%s'", what, want);
        p += n;
        p += strspn(p, ", ");
    }
}

/* Every family of the library's table (not this test's) is in README (its title and
 * architectures), in nnt_model_hf_config(3)'s table of architectures and in
 * nnt_model_create(3)'s table of presets, so that a family added without its docs fails. */
START_TEST(test_documented)
{
    char *readme = source_text("README");
    char *hf = source_text("man/man3/nnt_model_hf_config.3");
    char *create = source_text("man/man3/nnt_model_create.3");
    nnt_family_info f = NNT_FAMILY_INFO_INIT;
    int n = 0;
    for (int i = 0; nnt_model_family_info(i, &f) == 0; i++) {
        if (f.family == FAMILY_ID)
            continue;
        n++;
        expect_each(f.title, readme, "README", "%s");
        expect_each(f.architectures, readme, "README", "%s");
        expect_each(f.architectures, hf, "nnt_model_hf_config.3", ".It %s Ta");
        if (*f.presets)
            expect_each(f.presets, create, "nnt_model_create.3", ".It %s Ta");
    }
    ck_assert_int_eq(n, 13);
    free(readme);
    free(hf);
    free(create);
}
END_TEST

START_TEST(test_config_agreement)
{
    const char *llama = "{\"architectures\": [\"LlamaForCausalLM\"], \"model_type\": \"%s\", "
                        "\"vocab_size\": 61, \"hidden_size\": 32, \"intermediate_size\": 40, "
                        "\"num_hidden_layers\": 1, \"num_attention_heads\": 4, "
                        "\"max_position_embeddings\": 16}";
    char text[512];
    nnt_model_config c;
    snprintf(text, sizeof text, llama, "llama");
    EXPECT_OK(nnt_model_config_parse(ctx, "caller", "cfg.json", text, strlen(text), &c));
    ck_assert_int_eq(c.family, NNT_FAMILY_LLAMA);
    snprintf(text, sizeof text, llama, "bert");
    EXPECT_FAIL_MSG(nnt_model_config_parse(ctx, "caller", "cfg.json", text, strlen(text), &c),
                    NNT_E_UNSUPPORTED, "architectures[0] \"LlamaForCausalLM\" and model_type "
                    "\"bert\" disagree (LlamaForCausalLM has model_type \"llama\")");
    /* another family's type, and the test family's own pair */
    snprintf(text, sizeof text, llama, "gpt2");
    EXPECT_FAIL_MSG(nnt_model_config_parse(ctx, "caller", "cfg.json", text, strlen(text), &c),
                    NNT_E_UNSUPPORTED, "model_type \"gpt2\" disagree");
    snprintf(text, sizeof text, llama, "mistral");   /* the same family, another architecture */
    EXPECT_FAIL_MSG(nnt_model_config_parse(ctx, "caller", "cfg.json", text, strlen(text), &c),
                    NNT_E_UNSUPPORTED, "model_type \"mistral\" disagree");
    const char *rms = "{\"architectures\": [\"Gpt2RmsTestForCausalLM\"], \"model_type\": "
                      "\"gpt2_rms_test\", \"vocab_size\": 61, \"n_positions\": 24, \"n_embd\": 32, "
                      "\"n_layer\": 1, \"n_head\": 4, \"rms_norm_eps\": 1e-6}";
    EXPECT_OK(nnt_model_config_parse(ctx, "caller", "cfg.json", rms, strlen(rms), &c));
    ck_assert_int_eq(c.family, FAMILY_ID);
    const char *num = "{\"architectures\": [\"LlamaForCausalLM\"], \"model_type\": 3}";
    EXPECT_FAIL_MSG(nnt_model_config_parse(ctx, "caller", "cfg.json", num, strlen(num), &c),
                    NNT_E_FORMAT, "model_type must be a string");
}
END_TEST

static Suite *family_suite(void)
{
    Suite *s = suite_create("family");
    TCase *tc = tcase_create("family");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_table);
    tcase_add_loop_test(tc, test_tree, 0, 2);
    tcase_add_test(tc, test_files);
    tcase_add_test(tc, test_unknown_family);
    tcase_add_test(tc, test_config_agreement);
    tcase_add_test(tc, test_documented);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return run_suite(family_suite());
}
