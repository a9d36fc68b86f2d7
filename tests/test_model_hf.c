/* SPDX-License-Identifier: MIT */
/* Hugging Face model directories: nnt_model_hf_config, nnt_model_load_hf, nnt_model_save_hf.
 *   - the llama_tiny directories gqa/ (NH 4 / NKV 2, untied, rope theta 500000), mqa/
 *     (NKV 1, tied, q/k/v/o biases, llama3 rope scaling) and qwen3/ (Qwen3ForCausalLM: q/k
 *     norms, head_dim 12 with C 40 and NH 4), written by transformers' save_pretrained: their
 *     configuration, and logits and loss against transformers' (the
 *     NAME.reference.safetensors of tests/gen_llama_fixtures.py), in two tilings;
 *   - mqa_bf16/ and mqa_fp16/ (the same model saved in bfloat16 / float16): the logits of
 *     transformers' model cast back to fp32 (their reference.safetensors);
 *   - gpt2_tiny (an HF GPT2LMHeadModel directory): logits against its reference;
 *   - save then load: bit-identical parameters and the same configuration, both families
 *     (NNT_HF_KEEP=DIR keeps the saved directories as DIR/gqa, DIR/mqa, DIR/gpt2, DIR/qwen3, for
 *     tests/gen_llama_fixtures.py --check-saved);
 *   - refusals, each with its code, a message naming the key or tensor, and *out NULL. */
#include "testutil.h"
#include "fixture_st.h"

#include <math.h>
#include <stdint.h>
#include <sys/stat.h>
#include <unistd.h>

/* Measured on AMD EPYC (BLIS), the largest over models and tilings: */
#define LOGITS_TOL 3.0e-6  /* normwise relative: 3.2e-7 (gqa, mqa, mqa_bf16, mqa_fp16) */
#define LOSS_TOL 1.0e-6    /* relative: 9.7e-8 */
#define GPT2_TOL 3.0e-6    /* gpt2_tiny logits, normwise relative: 2.7e-7 */

enum { B = 2, T = 8 };

static nnt_ctx *ctx;
static char tmpdir[256];

static void setup(void)
{
    ctx = test_ctx();
    snprintf(tmpdir, sizeof tmpdir, "/tmp/nnt-test-hf-XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(tmpdir));
}

static void rm_dir(const char *dir)
{
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    ck_assert_int_eq(system(cmd), 0);
}

static void teardown(void)
{
    EXPECT_OK(nnt_ctx_destroy(ctx));
    ctx = NULL;
    rm_dir(tmpdir);
}

/* ---- paths and files ------------------------------------------------------------------- */

/* tests/fixtures/<sub> (static buffer, one of four in turn). */
static const char *fix(const char *sub)
{
    static char paths[4][4200];
    static int next;
    char *p = paths[next++ % 4];
    const char *top = getenv("top_srcdir");
    snprintf(p, 4200, "%s/tests/fixtures/%s", top ? top : ".", sub);
    return p;
}

static const char *in_tmp(const char *name)
{
    static char paths[4][600];
    static int next;
    char *p = paths[next++ % 4];
    snprintf(p, 600, "%s/%s", tmpdir, name);
    return p;
}

static void write_file(const char *path, const void *data, size_t len)
{
    FILE *f = fopen(path, "wb");
    ck_assert_ptr_nonnull(f);
    ck_assert_uint_eq(fwrite(data, 1, len, f), len);
    ck_assert_int_eq(fclose(f), 0);
}

static void write_str(const char *path, const char *text)
{
    write_file(path, text, strlen(text));
}

static void copy_file(const char *from, const char *to, size_t drop_tail)
{
    size_t len = 0;
    unsigned char *buf = slurp(from, &len);
    ck_assert(len > drop_tail);
    write_file(to, buf, len - drop_tail);
    free(buf);
}

/* ---- running a model ------------------------------------------------------------------- */

static nnt_tensor *ids_tensor(const int32_t *ids, int64_t b, int64_t t)
{
    int64_t shape[2] = {b, t};
    nnt_tensor *x = NULL;
    EXPECT_OK(nnt_tensor_create(ctx, NNT_INT32, 2, shape, NULL, &x));
    EXPECT_OK(nnt_tensor_copy_from_host(x, ids, (size_t)(b * t) * sizeof(int32_t)));
    return x;
}

/* The model's logits (and *loss) on the reference's tokens and targets (b, t); the logits'
 * normwise relative error against want_logits (want_n elements). */
static double run(nnt_layer *l, const nnt_st_reader *ref, const float *want_logits,
                  int64_t want_n, int64_t b, int64_t t, double *loss)
{
    int32_t *tok = fixture_read(ref, "tokens", NNT_IO_I32, NULL);
    int32_t *tgt = fixture_read(ref, "targets", NNT_IO_I32, NULL);
    nnt_tensor *x = ids_tensor(tok, b, t), *y = ids_tensor(tgt, b, t), *out = NULL;
    /* without targets a Llama model's forward returns the logits, with them the loss */
    EXPECT_OK(nnt_layer_forward(l, x, &out));
    int64_t n = 0;
    float *logits = test_to_host(out, &n);
    ck_assert_int_eq(n, want_n);
    double err = test_rel_err(logits, want_logits, n);
    EXPECT_OK(nnt_layer_set_targets(l, y));
    EXPECT_OK(nnt_layer_forward(l, x, NULL));
    EXPECT_OK(nnt_layer_loss(l, loss));
    free(logits);
    free(tok);
    free(tgt);
    EXPECT_OK(nnt_tensor_destroy(x));
    EXPECT_OK(nnt_tensor_destroy(y));
    return err;
}

/* ---- (a) the fixtures' directories against transformers ------------------------------- */

#define NMODELS 3
static const char *const NAMES[NMODELS] = {"gqa", "mqa", "qwen3"};

static const nnt_tiling TILINGS[2] = {
    {sizeof(nnt_tiling), 0, 0, 0, 0, 0, 0, 0},
    {sizeof(nnt_tiling), 1, 3, 5, 7, 9, 3, 0},
};

START_TEST(test_config)
{
    nnt_model_config c;
    EXPECT_OK(nnt_model_hf_config(ctx, fix("llama_tiny/gqa"), &c));
    ck_assert_int_eq(c.family, NNT_FAMILY_LLAMA);
    ck_assert(c.vocab == 61 && c.channels == 32 && c.hidden == 48 && c.layers == 2);
    ck_assert(c.heads == 4 && c.kv_heads == 2 && c.max_seq == 64);
    ck_assert(c.norm_eps == 1e-5 && !c.tied && !c.qkv_bias && !c.out_bias && !c.mlp_bias);
    ck_assert(c.rope.theta == 500000.0 && c.rope.scaling == NNT_ROPE_SCALING_NONE);
    EXPECT_OK(nnt_model_hf_config(ctx, fix("llama_tiny/mqa"), &c));
    ck_assert(c.vocab == 53 && c.channels == 24 && c.kv_heads == 1 && c.norm_eps == 1e-6);
    ck_assert(c.tied && c.qkv_bias && c.out_bias && !c.mlp_bias);
    ck_assert(c.rope.theta == 10000.0 && c.rope.scaling == NNT_ROPE_SCALING_LLAMA3);
    ck_assert(c.rope.factor == 8.0 && c.rope.low_freq_factor == 1.0);
    ck_assert(c.rope.high_freq_factor == 4.0 && c.rope.original_max_position == 16);
    ck_assert(c.head_dim == 6 && !c.qk_norm);   /* written by transformers 5: C / NH */
    EXPECT_OK(nnt_model_hf_config(ctx, fix("llama_tiny/qwen3"), &c));
    ck_assert(c.family == NNT_FAMILY_LLAMA && c.vocab == 67 && c.channels == 40);
    ck_assert(c.heads == 4 && c.kv_heads == 2 && c.head_dim == 12 && c.qk_norm);
    ck_assert(c.tied && c.qkv_bias && c.out_bias && !c.mlp_bias && c.norm_eps == 1e-6);
    ck_assert(c.rope.theta == 1e6 && c.rope.scaling == NNT_ROPE_SCALING_NONE);
    EXPECT_OK(nnt_model_hf_config(ctx, fix("gpt2_tiny"), &c));
    ck_assert(c.family == NNT_FAMILY_GPT2 && c.vocab == 67 && c.max_seq == 16);
    ck_assert(c.channels == 24 && c.heads == 3 && c.layers == 2 && c.tied);
}
END_TEST

/* _i = model * 2 + tiling */
START_TEST(test_reference)
{
    const char *name = NAMES[_i / 2];
    char dir[64], ref_name[64];
    snprintf(dir, sizeof dir, "llama_tiny/%s", name);
    snprintf(ref_name, sizeof ref_name, "llama_tiny/%s.reference.safetensors", name);
    nnt_st_reader *ref = fixture_open_st_path(fix(ref_name));
    const nnt_st_entry *e = NULL;
    float *want = fixture_read(ref, "logits", NNT_IO_F32, &e);
    float *want_loss = fixture_read(ref, "loss", NNT_IO_F32, NULL);
    nnt_layer *l = NULL;
    EXPECT_OK(nnt_model_load_hf(ctx, fix(dir), B, T, &TILINGS[_i % 2], &l));
    double loss = 0.0, el = run(l, ref, want, (int64_t)e->numel, B, T, &loss);
    double eloss = fabs(loss - want_loss[0]) / want_loss[0];
    printf("test_model_hf %s tiling %d: logits rel %.2e, loss rel %.2e\n", name, _i % 2, el,
           eloss);
    EXPECT_TOL(el, LOGITS_TOL, "%s tiling %d: logits", name, _i % 2);
    EXPECT_TOL(eloss, LOSS_TOL, "%s tiling %d: loss", name, _i % 2);
    nnt_layer_destroy(l);
    free(want);
    free(want_loss);
    nnt_st_close(ref);
}
END_TEST

/* ---- (b) bf16 and fp16 files ------------------------------------------------------------ */

/* _i: 0 bf16, 1 fp16. Their logits differ from the fp32 model's by 3.5e-3 / 5.0e-4 (the
 * generator's output), so the fp32 tolerance shows the conversion is exact. */
START_TEST(test_half)
{
    const char *dir = _i ? "llama_tiny/mqa_fp16" : "llama_tiny/mqa_bf16";
    const char *ref_name = _i ? "llama_tiny/mqa_fp16/reference.safetensors"
                              : "llama_tiny/mqa_bf16/reference.safetensors";
    nnt_st_reader *tokens = fixture_open_st_path(fix("llama_tiny/mqa.reference.safetensors"));
    nnt_st_reader *ref = fixture_open_st_path(fix(ref_name));
    float *want = fixture_read(ref, "logits", NNT_IO_F32, NULL);
    float *want32 = fixture_read(tokens, "logits", NNT_IO_F32, NULL);
    nnt_layer *l = NULL;
    EXPECT_OK(nnt_model_load_hf(ctx, fix(dir), B, T, &TILINGS[1], &l));
    double loss = 0.0, e = run(l, tokens, want, B * T * 53, B, T, &loss);
    double e32 = test_rel_err(want, want32, B * T * 53);
    printf("test_model_hf %s: logits rel %.2e (the fp32 model's differ by %.2e)\n", dir, e,
           e32);
    EXPECT_TOL(e, LOGITS_TOL, "%s: logits", dir);
    ck_assert(e32 > 100 * LOGITS_TOL);
    nnt_layer_destroy(l);
    free(want);
    free(want32);
    nnt_st_close(ref);
    nnt_st_close(tokens);
}
END_TEST

START_TEST(test_gpt2)
{
    nnt_st_reader *ref = fixture_open_st("reference.safetensors");
    float *want = fixture_read(ref, "logits", NNT_IO_F32, NULL);
    nnt_layer *l = NULL;
    nnt_layer_kind kind;
    EXPECT_OK(nnt_model_load_hf(ctx, fix("gpt2_tiny"), 2, 12, NULL, &l));
    EXPECT_OK(nnt_layer_kind_of(l, &kind));
    ck_assert_int_eq(kind, NNT_LAYER_GPT);
    double loss = 0.0, e = run(l, ref, want, 2 * 12 * 67, 2, 12, &loss);
    printf("test_model_hf gpt2_tiny: logits rel %.2e\n", e);
    EXPECT_TOL(e, GPT2_TOL, "gpt2_tiny: logits");
    nnt_layer_destroy(l);
    free(want);
    nnt_st_close(ref);
}
END_TEST

/* ---- (c) save, load again ------------------------------------------------------------- */

static void expect_same_params(nnt_layer *a, nnt_layer *b)
{
    int64_t na = 0, nb = 0;
    EXPECT_OK(nnt_layer_num_params(a, &na, NULL));
    EXPECT_OK(nnt_layer_num_params(b, &nb, NULL));
    ck_assert_int_eq(na, nb);
    for (int64_t i = 0; i < na; i++) {
        nnt_param_info pa = {sizeof pa, NULL, NULL, NULL, 0, 0}, pb = pa;
        EXPECT_OK(nnt_layer_param(a, i, &pa));
        EXPECT_OK(nnt_layer_param(b, i, &pb));
        ck_assert_str_eq(pa.name, pb.name);
        int64_t n = 0, m = 0;
        float *va = test_to_host(pa.value, &n), *vb = test_to_host(pb.value, &m);
        ck_assert_int_eq(n, m);
        ck_assert_msg(memcmp(va, vb, (size_t)n * sizeof *va) == 0, "%s differs", pa.name);
        free(va);
        free(vb);
    }
}

static void expect_same_config(nnt_layer *a, nnt_layer *b)
{
    nnt_model_config ca, cb;
    EXPECT_OK(nnt_model_config_of(a, &ca));
    EXPECT_OK(nnt_model_config_of(b, &cb));
    ck_assert(ca.family == cb.family && ca.vocab == cb.vocab && ca.max_seq == cb.max_seq);
    ck_assert(ca.layers == cb.layers && ca.heads == cb.heads && ca.kv_heads == cb.kv_heads);
    ck_assert(ca.channels == cb.channels && ca.hidden == cb.hidden);
    ck_assert(ca.norm_eps == cb.norm_eps && ca.tied == cb.tied && ca.qkv_bias == cb.qkv_bias);
    ck_assert(ca.out_bias == cb.out_bias && ca.mlp_bias == cb.mlp_bias);
    ck_assert(ca.head_dim == cb.head_dim && ca.qk_norm == cb.qk_norm);
    if (ca.family != NNT_FAMILY_LLAMA && ca.family != NNT_FAMILY_PHI3)
        return;
    ck_assert(ca.rope.theta == cb.rope.theta && ca.rope.scaling == cb.rope.scaling);
    ck_assert(ca.rope.partial_rotary_factor == cb.rope.partial_rotary_factor);
    if (ca.rope.scaling == NNT_ROPE_SCALING_LONGROPE)
        ck_assert(ca.rope.factor == cb.rope.factor &&
                  ca.rope.original_max_position == cb.rope.original_max_position &&
                  ca.rope.attention_factor == cb.rope.attention_factor &&
                  ca.rope.nfactors == cb.rope.nfactors &&
                  !memcmp(ca.rope.short_factor, cb.rope.short_factor,
                          sizeof ca.rope.short_factor) &&
                  !memcmp(ca.rope.long_factor, cb.rope.long_factor, sizeof ca.rope.long_factor));
    if (ca.rope.scaling == NNT_ROPE_SCALING_LLAMA3)
        ck_assert(ca.rope.factor == cb.rope.factor &&
                  ca.rope.low_freq_factor == cb.rope.low_freq_factor &&
                  ca.rope.high_freq_factor == cb.rope.high_freq_factor &&
                  ca.rope.original_max_position == cb.rope.original_max_position);
}

/* _i: 0 gqa, 1 mqa, 2 gpt2_tiny, 3 qwen3 */
START_TEST(test_round_trip)
{
    static const char *const dirs[4] = {"llama_tiny/gqa", "llama_tiny/mqa", "gpt2_tiny",
                                        "llama_tiny/qwen3"};
    static const char *const keep_names[4] = {"gqa", "mqa", "gpt2", "qwen3"};
    static const char *const archs[4] = {"LlamaForCausalLM", "LlamaForCausalLM",
                                         "GPT2LMHeadModel", "Qwen3ForCausalLM"};
    const char *keep = getenv("NNT_HF_KEEP");
    char out[600];
    if (keep && *keep) {
        mkdir(keep, 0755);
        snprintf(out, sizeof out, "%s/%s", keep, keep_names[_i]);
    } else {
        snprintf(out, sizeof out, "%s/saved", tmpdir);
    }
    int64_t b = _i == 2 ? 2 : B, t = _i == 2 ? 12 : T;
    nnt_layer *a = NULL, *c = NULL;
    EXPECT_OK(nnt_model_load_hf(ctx, fix(dirs[_i]), b, t, NULL, &a));
    EXPECT_OK(nnt_model_save_hf(a, out));
    EXPECT_OK(nnt_model_save_hf(a, out));   /* over an existing directory */
    EXPECT_OK(nnt_model_load_hf(ctx, out, b, t, &TILINGS[1], &c));
    expect_same_config(a, c);
    expect_same_params(a, c);
    /* a tied model's file has no lm_head.weight; the untied one has */
    char path[700];
    snprintf(path, sizeof path, "%s/model.safetensors", out);
    nnt_st_reader *r = fixture_open_st_path(path);
    ck_assert_int_eq(nnt_st_find(r, "lm_head.weight") != NULL, _i == 0);
    nnt_st_close(r);
    snprintf(path, sizeof path, "%s/config.json", out);
    size_t len = 0;
    char *json = (char *)slurp(path, &len), quoted[64];
    snprintf(quoted, sizeof quoted, "\"%s\"", archs[_i]);
    ck_assert_msg(strstr(json, quoted) != NULL, "%s: no %s", path, quoted);
    free(json);
    nnt_layer_destroy(a);
    nnt_layer_destroy(c);
}
END_TEST

/* A model of cfg saved into tmp/name: its config.json says each of words (NULL-ended), and
 * it loads again with the same configuration and parameters. */
static void expect_saved_as(const nnt_model_config *cfg, const char *name,
                            const char *const *words)
{
    nnt_layer *a = NULL, *c = NULL;
    EXPECT_OK(nnt_model_create(ctx, cfg, 1, 4, NULL, &a));
    EXPECT_OK(nnt_model_save_hf(a, in_tmp(name)));
    size_t len = 0;
    char path[700];
    snprintf(path, sizeof path, "%s/config.json", in_tmp(name));
    char *json = (char *)slurp(path, &len);
    for (int i = 0; words[i]; i++)
        ck_assert_msg(strstr(json, words[i]) != NULL, "%s: no %s", path, words[i]);
    free(json);
    EXPECT_OK(nnt_model_load_hf(ctx, in_tmp(name), 1, 4, NULL, &c));
    expect_same_config(a, c);
    expect_same_params(a, c);
    nnt_layer_destroy(c);
    nnt_layer_destroy(a);
}

/* A Llama model of the preset saves as Qwen2 when only q, k, v have biases. */
START_TEST(test_save_qwen2)
{
    nnt_model_config cfg;
    EXPECT_OK(nnt_model_preset("llama-tiny", &cfg));
    cfg.qkv_bias = 1;
    expect_saved_as(&cfg, "qwen", (const char *const[]){"\"Qwen2ForCausalLM\"", NULL});
    /* o_proj with a bias but q, k, v without: no such architecture */
    cfg.qkv_bias = 0;
    cfg.out_bias = 1;
    nnt_layer *a = NULL;
    EXPECT_OK(nnt_model_create(ctx, &cfg, 1, 4, NULL, &a));
    EXPECT_FAIL_MSG(nnt_model_save_hf(a, in_tmp("none")), NNT_E_UNSUPPORTED, "out_bias");
    nnt_layer_destroy(a);
}
END_TEST

static void write_config(const char *dir, const char *arch, const char *extra);

/* The rope keys as transformers 5.24's configuration classes read them (each expectation
 * checked with AutoConfig.from_pretrained): rope_scaling, when given and not empty, replaces
 * rope_parameters; a rope_theta inside it wins over the top level's; a yarn or longrope
 * object without original_max_position_embeddings takes max_position_embeddings (64). */
START_TEST(test_rope_keys)
{
    static const struct {
        const char *extra;
        int scaling;
        double theta, factor;
        int64_t orig;
    } CASES[] = {
        {"\"rope_scaling\": {\"rope_type\": \"yarn\", \"factor\": 4.0}",
         NNT_ROPE_SCALING_YARN, 10000.0, 4.0, 64},
        {"\"rope_theta\": 5000.0, \"rope_scaling\": {\"rope_type\": \"linear\", \"factor\": 2.0, "
         "\"rope_theta\": 777.0}", NNT_ROPE_SCALING_LINEAR, 777.0, 2.0, 0},
        {"\"rope_parameters\": {\"rope_type\": \"default\", \"rope_theta\": 100.0}, "
         "\"rope_scaling\": {\"rope_type\": \"linear\", \"factor\": 2.0}",
         NNT_ROPE_SCALING_LINEAR, 10000.0, 2.0, 0},
        {"\"rope_scaling\": {}, \"rope_parameters\": {\"rope_type\": \"linear\", \"factor\": "
         "3.0, \"rope_theta\": 50.0}", NNT_ROPE_SCALING_LINEAR, 50.0, 3.0, 0},
        {"\"rope_scaling\": {\"rope_type\": \"longrope\", \"short_factor\": [1.0, 1.5, 2.0, "
         "2.5], \"long_factor\": [2.0, 3.0, 4.0, 5.0]}", NNT_ROPE_SCALING_LONGROPE, 10000.0,
         1.0, 64},
    };
    for (size_t i = 0; i < sizeof CASES / sizeof *CASES; i++) {
        nnt_model_config cfg;
        write_config(in_tmp("rk"), "LlamaForCausalLM", CASES[i].extra);
        EXPECT_OK(nnt_model_hf_config(ctx, in_tmp("rk"), &cfg));
        ck_assert_msg(cfg.rope.scaling == CASES[i].scaling && cfg.rope.theta == CASES[i].theta &&
                          cfg.rope.factor == CASES[i].factor &&
                          (!CASES[i].orig || cfg.rope.original_max_position == CASES[i].orig),
                      "case %zu: scaling %d theta %g factor %g original %lld", i,
                      cfg.rope.scaling, cfg.rope.theta, cfg.rope.factor,
                      (long long)cfg.rope.original_max_position);
    }
    nnt_model_config cfg;
    write_config(in_tmp("rk"), "LlamaForCausalLM", CASES[4].extra);
    EXPECT_OK(nnt_model_hf_config(ctx, in_tmp("rk"), &cfg));
    ck_assert(cfg.rope.nfactors == 4 && cfg.rope.short_factor[1] == 1.5f &&
              cfg.rope.long_factor[3] == 5.0f);
    /* Phi3Config: its original_max_position_embeddings (default 4096) replaces the rope
     * object's; "yarn" (and the older "su", which transformers 5.24 can no longer read) is
     * longrope; partial_rotary_factor from the top level */
    static const char F[] = "\"short_factor\": [1.0, 1.5, 2.0, 2.5], \"long_factor\": [2.0, 3.0, "
                            "4.0, 5.0]";
    static const struct {
        const char *extra;
        int64_t orig;
        double factor, partial;
    } PHI3[] = {
        {"\"original_max_position_embeddings\": 16, \"rope_scaling\": {\"type\": \"yarn\", "
         "\"original_max_position_embeddings\": 32, %s}", 16, 4.0, 1.0},
        {"\"rope_scaling\": {\"type\": \"longrope\", \"original_max_position_embeddings\": 32, "
         "%s}", 4096, 64.0 / 4096.0, 1.0},
        {"\"original_max_position_embeddings\": 16, \"rope_scaling\": {\"type\": \"su\", %s}", 16,
         4.0, 1.0},
        {"\"partial_rotary_factor\": 0.5, \"rope_scaling\": {\"type\": \"longrope\", "
         "\"short_factor\": [1.0, 2.0], \"long_factor\": [3.0, 4.0], \"factor\": 3.0}%.0s", 4096,
         3.0, 0.5},
    };
    /* PhiConfig: partial_rotary_factor 0.5 unless the top level or the rope object read
     * (rope_scaling when given, else rope_parameters) has one, the object's first; as
     * AutoConfig.from_pretrained reads each (transformers 5.24) */
    static const struct {
        const char *extra;
        double partial, theta;
    } PHI[] = {
        {"\"rope_theta\": 300.0, \"resid_pdrop\": 0.1", 0.5, 300.0},   /* as Phi-2 */
        {"\"partial_rotary_factor\": 0.75", 0.75, 10000.0},
        {"\"rope_parameters\": {\"rope_type\": \"default\", \"rope_theta\": 100.0, "
         "\"partial_rotary_factor\": 0.25}", 0.25, 100.0},
        {"\"partial_rotary_factor\": 0.75, \"rope_parameters\": {\"rope_type\": \"default\", "
         "\"rope_theta\": 100.0, \"partial_rotary_factor\": 0.25}", 0.25, 100.0},
        {"\"rope_scaling\": {\"rope_type\": \"linear\", \"factor\": 2.0, "
         "\"partial_rotary_factor\": 0.75}", 0.75, 10000.0},
        {"\"partial_rotary_factor\": 0.75, \"rope_scaling\": {\"rope_type\": \"linear\", "
         "\"factor\": 2.0}", 0.75, 10000.0},
        {"\"rope_scaling\": {\"rope_type\": \"linear\", \"factor\": 2.0}, "
         "\"rope_parameters\": {\"rope_type\": \"default\", \"partial_rotary_factor\": 0.25}",
         0.5, 10000.0},
    };
    for (size_t i = 0; i < sizeof PHI / sizeof *PHI; i++) {
        write_config(in_tmp("rk"), "PhiForCausalLM", PHI[i].extra);
        EXPECT_OK(nnt_model_hf_config(ctx, in_tmp("rk"), &cfg));
        ck_assert_msg(cfg.family == NNT_FAMILY_PHI &&
                          cfg.rope.partial_rotary_factor == PHI[i].partial &&
                          cfg.rope.theta == PHI[i].theta,
                      "phi case %zu: partial %g theta %g", i, cfg.rope.partial_rotary_factor,
                      cfg.rope.theta);
    }
    /* GraniteConfig: each multiplier 1 when absent, the scores' scale too (not 1 / sqrt(hd)) */
    write_config(in_tmp("rk"), "GraniteForCausalLM", "\"logits_scaling\": 16.0");
    EXPECT_OK(nnt_model_hf_config(ctx, in_tmp("rk"), &cfg));
    ck_assert(cfg.family == NNT_FAMILY_GRANITE && cfg.embedding_multiplier == 1.0 &&
              cfg.residual_multiplier == 1.0 && cfg.attention_multiplier == 1.0 &&
              cfg.logits_scaling == 16.0 && cfg.rope.theta == 10000.0);
    /* StableLmConfig: partial_rotary_factor 0.25 unless given */
    write_config(in_tmp("rk"), "StableLmForCausalLM", "\"num_key_value_heads\": 2");
    EXPECT_OK(nnt_model_hf_config(ctx, in_tmp("rk"), &cfg));
    ck_assert(cfg.family == NNT_FAMILY_STABLELM && cfg.rope.partial_rotary_factor == 0.25 &&
              cfg.kv_heads == 2 && cfg.qkv_bias == 0);
    for (size_t i = 0; i < sizeof PHI3 / sizeof *PHI3; i++) {
        char extra[512];
        snprintf(extra, sizeof extra, PHI3[i].extra, F);
        write_config(in_tmp("rk"), "Phi3ForCausalLM", extra);
        EXPECT_OK(nnt_model_hf_config(ctx, in_tmp("rk"), &cfg));
        ck_assert_msg(cfg.family == NNT_FAMILY_PHI3 &&
                          cfg.rope.scaling == NNT_ROPE_SCALING_LONGROPE &&
                          cfg.rope.original_max_position == PHI3[i].orig &&
                          cfg.rope.factor == PHI3[i].factor &&
                          cfg.rope.partial_rotary_factor == PHI3[i].partial,
                      "phi3 case %zu: original %lld factor %g partial %g", i,
                      (long long)cfg.rope.original_max_position, cfg.rope.factor,
                      cfg.rope.partial_rotary_factor);
    }
    write_config(in_tmp("rk"), "LlamaForCausalLM", CASES[4].extra);
    EXPECT_OK(nnt_model_hf_config(ctx, in_tmp("rk"), &cfg));
    /* and back: saved, the longrope object reads back the same */
    expect_saved_as(&cfg, "longrope", (const char *const[]){
        "\"rope_type\": \"longrope\", \"short_factor\": [1, 1.5, 2, 2.5], \"long_factor\": "
        "[2, 3, 4, 5], \"factor\": 1.0, \"original_max_position_embeddings\": 64", NULL});
}
END_TEST

/* A Llama model with q/k norms saves as Qwen3, its head_dim (24, NH 4, C 64) kept. */
START_TEST(test_save_qwen3)
{
    nnt_model_config cfg;
    EXPECT_OK(nnt_model_preset("llama-tiny", &cfg));
    cfg.qk_norm = 1;
    cfg.head_dim = 24;
    expect_saved_as(&cfg, "qwen3", (const char *const[]){"\"Qwen3ForCausalLM\"",
                                                          "\"head_dim\": 24", NULL});
    nnt_layer *a = NULL;
    /* q, k, v biases without o_proj's: Qwen2's, which has no q/k norms */
    cfg.qkv_bias = 1;
    EXPECT_OK(nnt_model_create(ctx, &cfg, 1, 4, NULL, &a));
    EXPECT_FAIL_MSG(nnt_model_save_hf(a, in_tmp("none")), NNT_E_UNSUPPORTED, "qk_norm=1");
    nnt_layer_destroy(a);
    /* Qwen3Config's head_dim is 128 when config.json has none (C 32 / NH 4 would be 8) */
    write_config(in_tmp("q3"), "Qwen3ForCausalLM", "\"num_key_value_heads\": 2");
    EXPECT_OK(nnt_model_hf_config(ctx, in_tmp("q3"), &cfg));
    ck_assert(cfg.head_dim == 128 && cfg.qk_norm && !cfg.qkv_bias && !cfg.out_bias);
    write_config(in_tmp("q3"), "Qwen3ForCausalLM", "\"head_dim\": null, "
                 "\"num_key_value_heads\": 2");
    EXPECT_OK(nnt_model_hf_config(ctx, in_tmp("q3"), &cfg));
    ck_assert_int_eq(cfg.head_dim, 128);
    write_config(in_tmp("l"), "LlamaForCausalLM", "");
    EXPECT_OK(nnt_model_hf_config(ctx, in_tmp("l"), &cfg));
    ck_assert(cfg.head_dim == 0 && !cfg.qk_norm);
}
END_TEST

/* config.json of architecture arch with L layers, the sliding window 3 and the layer_types
 * list of the letters of kinds (S sliding, F full), into dir */
static void write_listed(const char *dir, const char *arch, int64_t L, const char *kinds)
{
    size_t cap = (size_t)L * 24 + 1024, n = 0;
    char *text = malloc(cap), path[700];
    ck_assert_ptr_nonnull(text);
    n += (size_t)snprintf(text, cap,
                          "{\"architectures\": [\"%s\"], \"vocab_size\": 61, \"hidden_size\": "
                          "32, \"intermediate_size\": 48, \"num_hidden_layers\": %lld, "
                          "\"num_attention_heads\": 4, \"num_key_value_heads\": 2, "
                          "\"head_dim\": 8, \"max_position_embeddings\": 64, \"rms_norm_eps\": "
                          "1e-06, \"use_sliding_window\": true, \"sliding_window\": 3, "
                          "\"layer_types\": [", arch, (long long)L);
    for (int64_t i = 0; i < L; i++)
        n += (size_t)snprintf(text + n, cap - n, "%s\"%s\"", i ? ", " : "",
                              kinds[i % strlen(kinds)] == 'S' ? "sliding_attention"
                                                               : "full_attention");
    snprintf(text + n, cap - n, "]}");
    mkdir(dir, 0755);
    snprintf(path, sizeof path, "%s/config.json", dir);
    write_str(path, text);
    free(text);
}

/* A layer_types list read as the rule that says it (window_from, window_global_every where
 * the family has it) or else as window_full_layers, the blocks the model builds with a window
 * those of the list, and saved back as the same list; lists past 512 layers with no rule are
 * refused. */
static const struct {
    const char *arch, *kinds;
    int64_t layers, from, every;
    uint64_t full;   /* window_full_layers[0] */
} LISTED[] = {
    {"Gemma3ForCausalLM", "FSSFS", 5, 0, 0, 0x9},       /* no rule: blocks 0 and 3 full     */
    {"Gemma3ForCausalLM", "SSF", 6, 0, 3, 0},           /* every 3rd full: the rule         */
    {"Gemma2ForCausalLM", "SFFSSF", 6, 0, 0, 0x26},     /* blocks 1, 2, 5 full              */
    {"Qwen3ForCausalLM", "SF", 2, 0, 0, 0x2},           /* Qwen3 has no every-N rule        */
    {"Qwen2ForCausalLM", "FFS", 3, 2, 0, 0},            /* from block 2: max_window_layers  */
    {"Qwen2ForCausalLM", "SFS", 3, 0, 0, 0x2},
};

START_TEST(test_layer_types_listed)
{
    const char *dir = in_tmp("listed"), *saved = in_tmp("listed_saved");
    write_listed(dir, LISTED[_i].arch, LISTED[_i].layers, LISTED[_i].kinds);
    nnt_model_config cfg, back;
    EXPECT_OK(nnt_model_hf_config(ctx, dir, &cfg));
    ck_assert_int_eq(cfg.sliding_window, 3);
    ck_assert_int_eq(cfg.window_from, LISTED[_i].from);
    ck_assert_int_eq(cfg.window_global_every, LISTED[_i].every);
    ck_assert_msg(cfg.window_full_layers[0] == LISTED[_i].full, "%s %s: window_full_layers %#llx",
                  LISTED[_i].arch, LISTED[_i].kinds,
                  (unsigned long long)cfg.window_full_layers[0]);
    for (int w = 1; w < NNT_MODEL_MAX_WINDOW_LAYER / 64; w++)
        ck_assert(cfg.window_full_layers[w] == 0);
    nnt_layer *m = NULL;
    EXPECT_OK(nnt_model_create(ctx, &cfg, 1, 4, NULL, &m));
    EXPECT_OK(nnt_model_save_hf(m, saved));
    EXPECT_OK(nnt_model_hf_config(ctx, saved, &back));
    ck_assert_int_eq(back.window_from, cfg.window_from);
    ck_assert_int_eq(back.window_global_every, cfg.window_global_every);
    ck_assert(memcmp(back.window_full_layers, cfg.window_full_layers,
                     sizeof cfg.window_full_layers) == 0);
    /* the saved list, layer by layer */
    char path[700], *text;
    snprintf(path, sizeof path, "%s/config.json", saved);
    size_t len = 0;
    text = (char *)slurp(path, &len);
    const char *p = strstr(text, "\"layer_types\"");
    int64_t L = LISTED[_i].layers;
    if (LISTED[_i].every == 0 && LISTED[_i].full == 0 && !strstr(LISTED[_i].arch, "Gemma"))
        ck_assert_ptr_null(p);   /* Qwen2's max_window_layers says it */
    for (int64_t i = 0; p && i < L; i++) {
        p = strchr(p + (i ? 1 : 15), '"');
        ck_assert_ptr_nonnull(p);
        int sliding = LISTED[_i].kinds[i % strlen(LISTED[_i].kinds)] == 'S';
        ck_assert_msg(strncmp(p + 1, sliding ? "sliding_attention" : "full_attention",
                              sliding ? 17 : 14) == 0, "%s %s: layer %lld saved as %.20s",
                      LISTED[_i].arch, LISTED[_i].kinds, (long long)i, p);
        p = strchr(p + 1, '"');
    }
    free(text);
    nnt_layer_destroy(m);
}
END_TEST

START_TEST(test_layer_types_long)
{
    const char *dir = in_tmp("long");
    nnt_model_config cfg;
    write_listed(dir, "Gemma3ForCausalLM", 512, "SFF");   /* blocks 1, 2, 4, 5, ... 511 */
    EXPECT_OK(nnt_model_hf_config(ctx, dir, &cfg));
    ck_assert(NNT_MODEL_WINDOW_FULL(&cfg, 511) && !NNT_MODEL_WINDOW_FULL(&cfg, 510) &&
              NNT_MODEL_WINDOW_FULL(&cfg, 64) && !NNT_MODEL_WINDOW_FULL(&cfg, 63));
    write_listed(dir, "Gemma3ForCausalLM", 513, "SFF");
    EXPECT_FAIL_MSG(nnt_model_hf_config(ctx, dir, &cfg), NNT_E_UNSUPPORTED, "layer_types");
    write_listed(dir, "Gemma3ForCausalLM", 600, "SSF");   /* a rule says it, whatever L */
    EXPECT_OK(nnt_model_hf_config(ctx, dir, &cfg));
    ck_assert_int_eq(cfg.window_global_every, 3);
}
END_TEST

/* ---- (d) refusals -------------------------------------------------------------------- */

/* A config.json of gqa's sizes with extra members (a JSON fragment after a comma, or ""). */
static void write_config(const char *dir, const char *arch, const char *extra)
{
    char text[2048], path[700];
    snprintf(text, sizeof text,
             "{\"architectures\": [\"%s\"], \"vocab_size\": 61, \"hidden_size\": 32, "
             "\"intermediate_size\": 48, \"num_hidden_layers\": 2, \"num_attention_heads\": 4, "
             "\"max_position_embeddings\": 64, "
             "\"rms_norm_eps\": 1e-05%s%s}", arch, *extra ? ", " : "", extra);
    mkdir(dir, 0755);
    snprintf(path, sizeof path, "%s/config.json", dir);
    write_file(path, text, strlen(text));
}

/* Both config and load refuse with code and a message naming what. */
static void expect_refused(const char *dir, int code, const char *what)
{
    nnt_model_config cfg;
    nnt_layer *l = (nnt_layer *)&cfg;   /* any non-NULL value: must come back NULL */
    EXPECT_FAIL_MSG(nnt_model_hf_config(ctx, dir, &cfg), code, what);
    EXPECT_FAIL_MSG(nnt_model_load_hf(ctx, dir, B, T, NULL, &l), code, what);
    ck_assert_ptr_null(l);
    ck_assert_ptr_nonnull(strstr(nnt_ctx_last_error(ctx), "nnt_model_load_hf"));
}

static const struct {
    const char *arch, *extra;
    int code;
    const char *what;
} BAD_CONFIGS[] = {
    {"BertForMaskedLM", "", NNT_E_UNSUPPORTED, "architectures[0] \"BertForMaskedLM\""},
    {"LlamaForCausalLM",
     "\"rope_scaling\": {\"rope_type\": \"longrope\", \"factor\": 4.0}", NNT_E_FORMAT,
     "rope_scaling.short_factor must be a list of numbers"},
    {"LlamaForCausalLM",
     "\"rope_scaling\": {\"rope_type\": \"longrope\", \"short_factor\": [1, 2, 3, 4], "
     "\"long_factor\": [1, 2, 3]}", NNT_E_FORMAT, "rope_scaling.long_factor"},
    {"LlamaForCausalLM",
     "\"rope_scaling\": {\"rope_type\": \"longrope\", \"short_factor\": [1, 2, 3], "
     "\"long_factor\": [1, 2, 3]}", NNT_E_INVAL, "the rotary dimension 8 needs 4"},
    {"LlamaForCausalLM",
     "\"rope_scaling\": {\"rope_type\": \"longrope\", \"short_factor\": [1, \"a\"], "
     "\"long_factor\": [1, 2]}", NNT_E_FORMAT, "rope_scaling.short_factor"},
    {"LlamaForCausalLM", "\"rope_scaling\": {\"rope_type\": \"su\", \"factor\": 4.0}",
     NNT_E_UNSUPPORTED, "rope_scaling.rope_type \"su\" is not supported"},
    {"LlamaForCausalLM", "\"rope_scaling\": {\"rope_type\": \"yarn\"}",
     NNT_E_FORMAT, "rope_scaling.factor"},
    {"LlamaForCausalLM", "\"partial_rotary_factor\": 0.5", NNT_E_UNSUPPORTED,
     "partial_rotary_factor"},
    /* Phi-3: nnt trains without dropout; its rope is default or longrope */
    {"Phi3ForCausalLM", "\"resid_pdrop\": 1.5", NNT_E_FORMAT, "resid_pdrop must be a probability"},
    {"PhiForCausalLM", "\"embd_pdrop\": -0.1", NNT_E_FORMAT, "embd_pdrop must be a probability"},
    {"PhiForCausalLM", "\"tie_word_embeddings\": true", NNT_E_UNSUPPORTED,
     "tie_word_embeddings true is not supported"},
    {"PhiForCausalLM", "\"qk_layernorm\": true", NNT_E_UNSUPPORTED, "qk_layernorm"},
    {"PhiForCausalLM", "\"hidden_act\": \"relu\"", NNT_E_UNSUPPORTED, "hidden_act"},
    {"StableLmForCausalLM", "\"num_key_value_heads\": 4, \"qk_layernorm\": true",
     NNT_E_UNSUPPORTED, "qk_layernorm true is not supported"},
    {"StableLmForCausalLM", "\"num_key_value_heads\": 4, \"use_parallel_residual\": true",
     NNT_E_UNSUPPORTED, "use_parallel_residual true is not supported"},
    {"StableLmForCausalLM", "", NNT_E_INVAL, "kv_heads=32 does not divide heads=4"},
    {"GraniteForCausalLM", "\"logits_scaling\": 0", NNT_E_FORMAT,
     "logits_scaling must be a finite number > 0"},
    {"GraniteForCausalLM", "\"residual_multiplier\": -0.2", NNT_E_FORMAT,
     "residual_multiplier must be a finite number > 0"},
    {"Phi3ForCausalLM", "\"rope_scaling\": {\"type\": \"linear\", \"factor\": 2.0}",
     NNT_E_UNSUPPORTED, "rope_type"},
    {"Phi3ForCausalLM", "\"partial_rotary_factor\": 0.375", NNT_E_INVAL,
     "= 3 must be even"},   /* (int)(hd 8 x 0.375) */
    {"Phi3ForCausalLM", "\"sliding_window\": 0", NNT_E_FORMAT, "sliding_window"},
    {"LlamaForCausalLM", "\"rope_parameters\": {\"rope_type\": \"dynamic\", \"factor\": 2.0}",
     NNT_E_UNSUPPORTED, "rope_parameters.rope_type \"dynamic\""},
    {"LlamaForCausalLM", "\"rope_scaling\": {\"type\": \"dynamic\", \"factor\": 2.0}",
     NNT_E_UNSUPPORTED, "rope_scaling.type \"dynamic\""},
    {"LlamaForCausalLM", "\"rope_scaling\": {\"rope_type\": \"llama3\", \"factor\": 8.0}",
     NNT_E_FORMAT, "rope_scaling.low_freq_factor"},
    /* sliding windows are read (tests/test_model_window.c); malformed ones are refused */
    {"MistralForCausalLM", "\"sliding_window\": -3", NNT_E_FORMAT, "sliding_window"},
    {"Qwen2ForCausalLM", "\"use_sliding_window\": true, \"layer_types\": "
     "[\"sliding_attention\", \"full_attention\", \"sliding_attention\"]", NNT_E_UNSUPPORTED,
     "layer_types"},
    {"LlamaForCausalLM", "\"head_dim\": 15", NNT_E_INVAL, "even head_dim (15)"},
    {"LlamaForCausalLM", "\"head_dim\": 0", NNT_E_FORMAT, "head_dim"},
    {"Qwen3ForCausalLM", "\"head_dim\": 9, \"num_key_value_heads\": 2", NNT_E_INVAL,
     "even head_dim (9)"},
    /* no num_key_value_heads: Qwen2Config's 32 (transformers 5.24), not the heads */
    {"Qwen2ForCausalLM", "", NNT_E_INVAL, "kv_heads=32 does not divide heads=4"},
    {"Qwen3ForCausalLM", "\"use_sliding_window\": true, \"sliding_window\": 0", NNT_E_FORMAT,
     "sliding_window must be a positive integer or null"},
    {"LlamaForCausalLM", "\"hidden_act\": \"gelu\"", NNT_E_UNSUPPORTED, "hidden_act \"gelu\""},
    {"LlamaForCausalLM", "\"rms_norm_eps\": \"small\"", NNT_E_FORMAT, "rms_norm_eps"},
    {"LlamaForCausalLM", "\"num_key_value_heads\": 3", NNT_E_INVAL, "kv_heads=3"},
    {"LlamaForCausalLM", "\"num_key_value_heads\": 2.5", NNT_E_FORMAT, "num_key_value_heads"},
    {"LlamaForCausalLM", "\"rope_theta\": -1.0", NNT_E_INVAL, "theta"},
};

START_TEST(test_bad_config)
{
    const char *dir = in_tmp("bad");
    write_config(dir, BAD_CONFIGS[_i].arch, BAD_CONFIGS[_i].extra);
    expect_refused(dir, BAD_CONFIGS[_i].code, BAD_CONFIGS[_i].what);
}
END_TEST

START_TEST(test_bad_json)
{
    const char *dir = in_tmp("bad"), *cfg = in_tmp("bad/config.json");
    expect_refused(dir, NNT_E_IO, "config.json");             /* no directory */
    mkdir(dir, 0755);
    expect_refused(dir, NNT_E_IO, "config.json");             /* no config.json */
    write_str(cfg, "{\"vocab_size\": 61,");
    expect_refused(dir, NNT_E_FORMAT, "config.json");         /* truncated */
    write_str(cfg, "{\"vocab_size\": 61, \"vocab_size\": 62}");
    expect_refused(dir, NNT_E_FORMAT, "duplicate key \"vocab_size\"");
    write_str(cfg, "{\"vocab_size\": 61}");
    expect_refused(dir, NNT_E_FORMAT, "neither architectures nor model_type");
    write_str(cfg, "{\"model_type\": \"gpt2\", \"n_positions\": 16}");
    expect_refused(dir, NNT_E_FORMAT, "no key vocab_size");
    write_str(cfg, "{\"model_type\": \"t5\"}");
    expect_refused(dir, NNT_E_UNSUPPORTED, "model_type \"t5\"");
    /* GPT-2 keys */
    const char *gpt = "{\"model_type\": \"gpt2\", \"vocab_size\": 67, \"n_positions\": 16, "
                      "\"n_embd\": 24, \"n_layer\": 2, \"n_head\": 3, \"n_inner\": 64}";
    write_str(cfg, gpt);
    expect_refused(dir, NNT_E_UNSUPPORTED, "n_inner 64");
    gpt = "{\"model_type\": \"gpt2\", \"vocab_size\": 67, \"n_positions\": 16, \"n_embd\": 24, "
          "\"n_layer\": 2, \"n_head\": 3, \"activation_function\": \"relu\"}";
    write_str(cfg, gpt);
    expect_refused(dir, NNT_E_UNSUPPORTED, "activation_function \"relu\"");
}
END_TEST

/* gqa's config with a model.safetensors written from gqa's tensors, skipping `skip` and
 * giving `reshape` the transposed shape; extra: an additional tensor's name (or NULL). */
static void write_weights(const char *dir, const char *skip, const char *reshape,
                          const char *extra)
{
    char err[NNT_IO_ERRLEN], path[700];
    nnt_st_reader *r = fixture_open_st_path(fix("llama_tiny/gqa/model.safetensors"));
    mkdir(dir, 0755);
    snprintf(path, sizeof path, "%s/config.json", dir);
    copy_file(fix("llama_tiny/gqa/config.json"), path, 0);
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    nnt_st_writer *w = NULL;
    EXPECT_OK(nnt_st_writer_begin(path, &w, err, sizeof err));
    float *bufs[64] = {NULL}, one = 1.0f;
    size_t nb = 0;
    for (size_t i = 0; i < nnt_st_count(r); i++) {
        const nnt_st_entry *e = nnt_st_entry_at(r, i);
        if (skip && strcmp(e->name, skip) == 0)
            continue;
        int64_t shape[NNT_IO_MAXDIM];
        memcpy(shape, e->shape, sizeof shape);
        if (reshape && strcmp(e->name, reshape) == 0) {
            shape[0] = e->shape[1];
            shape[1] = e->shape[0];
        }
        ck_assert(nb < 64);
        bufs[nb] = fixture_read(r, e->name, NNT_IO_F32, NULL);
        EXPECT_OK(nnt_st_writer_add(w, e->name, NNT_IO_F32, e->ndim, shape, bufs[nb++], err,
                                    sizeof err));
    }
    if (extra)
        EXPECT_OK(nnt_st_writer_add(w, extra, NNT_IO_F32, 0, NULL, &one, err, sizeof err));
    EXPECT_OK(nnt_st_writer_finish(w, err, sizeof err));
    for (size_t i = 0; i < nb; i++)
        free(bufs[i]);
    nnt_st_close(r);
}

/* Load-only refusal (the configuration is fine). */
static void expect_load_refused(const char *dir, int code, const char *what)
{
    nnt_layer *l = (nnt_layer *)&code;
    EXPECT_FAIL_MSG(nnt_model_load_hf(ctx, dir, B, T, NULL, &l), code, what);
    ck_assert_ptr_null(l);
}

START_TEST(test_bad_weights)
{
    char dir[600];
    snprintf(dir, sizeof dir, "%s", in_tmp("w"));
    write_weights(dir, "model.layers.1.mlp.up_proj.weight", NULL, NULL);
    expect_load_refused(dir, NNT_E_FORMAT, "no tensor model.layers.1.mlp.up_proj.weight");
    write_weights(dir, "lm_head.weight", NULL, NULL);   /* untied */
    expect_load_refused(dir, NNT_E_FORMAT, "no tensor lm_head.weight");
    write_weights(dir, NULL, "model.layers.0.self_attn.k_proj.weight", NULL);
    expect_load_refused(dir, NNT_E_FORMAT,
                        "model.layers.0.self_attn.k_proj.weight has shape (32, 16), "
                        "expected (16, 32)");
    write_weights(dir, NULL, NULL, "model.layers.0.self_attn.extra");
    expect_load_refused(dir, NNT_E_FORMAT, "unknown tensor model.layers.0.self_attn.extra");
    /* a known buffer is ignored */
    nnt_layer *l = NULL;
    write_weights(dir, NULL, NULL, "model.layers.0.self_attn.rotary_emb.inv_freq");
    EXPECT_OK(nnt_model_load_hf(ctx, dir, B, T, NULL, &l));
    nnt_layer_destroy(l);
    /* truncated file */
    copy_file(fix("llama_tiny/gqa/model.safetensors"), in_tmp("w/model.safetensors"), 100);
    expect_load_refused(dir, NNT_E_FORMAT, "model.safetensors");
    /* no weights; an index without a weight_map (sharded: tests/test_model_shards.c) */
    unlink(in_tmp("w/model.safetensors"));
    expect_load_refused(dir, NNT_E_IO, "model.safetensors");
    write_file(in_tmp("w/model.safetensors.index.json"), "{}", 2);
    expect_load_refused(dir, NNT_E_FORMAT, "model.safetensors.index.json: no key weight_map");
    /* a batch the model cannot take */
    copy_file(fix("llama_tiny/gqa/model.safetensors"), in_tmp("w/model.safetensors"), 0);
    EXPECT_FAIL_MSG(nnt_model_load_hf(ctx, dir, B, 65, NULL, &l), NNT_E_INVAL, "max_seq=64");
    ck_assert_ptr_null(l);
}
END_TEST

START_TEST(test_null_args)
{
    nnt_model_config cfg;
    nnt_layer *l = NULL;
    EXPECT_FAIL_MSG(nnt_model_hf_config(ctx, NULL, &cfg), NNT_E_INVAL, "nnt_model_hf_config");
    EXPECT_FAIL_MSG(nnt_model_hf_config(ctx, fix("gpt2_tiny"), NULL), NNT_E_INVAL, "cfg");
    EXPECT_FAIL_MSG(nnt_model_load_hf(ctx, NULL, B, T, NULL, &l), NNT_E_INVAL, "dir");
    EXPECT_FAIL_MSG(nnt_model_load_hf(ctx, fix("gpt2_tiny"), B, T, NULL, NULL), NNT_E_INVAL,
                    "out");
    EXPECT_FAIL_MSG(nnt_model_save_hf(NULL, in_tmp("x")), NNT_E_INVAL, "nnt_model_save_hf");
    EXPECT_OK(nnt_model_load_hf(ctx, fix("llama_tiny/mqa"), B, T, NULL, &l));
    EXPECT_FAIL_MSG(nnt_model_save_hf(l, NULL), NNT_E_INVAL, "dir");
    write_file(in_tmp("file"), "x", 1);
    EXPECT_FAIL_MSG(nnt_model_save_hf(l, in_tmp("file")), NNT_E_IO, "not a directory");
    nnt_layer_destroy(l);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("model_hf");
    TCase *tc = tcase_create("hf");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, test_config);
    tcase_add_loop_test(tc, test_reference, 0, 2 * NMODELS);
    tcase_add_loop_test(tc, test_half, 0, 2);
    tcase_add_test(tc, test_gpt2);
    tcase_add_loop_test(tc, test_round_trip, 0, 4);
    tcase_add_test(tc, test_save_qwen2);
    tcase_add_test(tc, test_save_qwen3);
    tcase_add_test(tc, test_rope_keys);
    tcase_add_loop_test(tc, test_layer_types_listed, 0, (int)(sizeof LISTED / sizeof LISTED[0]));
    tcase_add_test(tc, test_layer_types_long);
    tcase_add_loop_test(tc, test_bad_config, 0, (int)(sizeof BAD_CONFIGS / sizeof BAD_CONFIGS[0]));
    tcase_add_test(tc, test_bad_json);
    tcase_add_test(tc, test_bad_weights);
    tcase_add_test(tc, test_null_args);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return run_suite(suite());
}
