/* SPDX-License-Identifier: MIT */
/* Sequence classifiers and reward models (nnt_model_config.num_labels) against transformers'
 * *ForSequenceClassification and TRL's RewardTrainer loss (tests/fixtures/cls_tiny,
 * tests/gen_cls_fixtures.py): the pooling rule (nnt_model_pool_targets), a Llama classifier
 * of 3 labels, a Llama reward model (pairs of rows, the center term off its default) and
 * GPT-2's own classifier: pooled logits, loss, every gradient, 3 AdamW steps over 3 tilings;
 * the trainer on the classifier (labelled rows: loss, accuracy, steps) and the reward model;
 * Hugging Face directories both ways; a classifier built on a language model's directory;
 * LoRA on classifiers as PEFT's task_type SEQ_CLS (the head trained whole beside the
 * adapters: PEFT's initial adapters trained against PEFT's steps, its trained ones read and
 * merged); classifiers trained on values (regression, multi-label: tests/fixtures/cls_values,
 * tests/gen_values_fixtures.py, against transformers' own loss); a source's label names
 * without its model; refusals. */
#include "testutil.h"
#include "fixture_st.h"

#include <math.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#define B 4
#define T 12
#define STEPS 3

/* Measured (2-core AMD Zen 5, worst over the cases and tilings): pooled logits rel 3.0e-7,
 * first losses rel 8.5e-8, gradients rel 5.0e-7, the 3 steps' losses rel 9.3e-6 and the
 * parameters after them rel 2.9e-5 (Adam divides the gradients' elements near 0 by their
 * own size: their small differences grow; GPT-2's key bias, whose gradient is 0 up to
 * rounding, left out). */
#define LOGIT_TOL 3e-6
#define LOSS_TOL 1e-6
#define GRAD_TOL 5e-6
#define STEP_TOL 1e-4
#define PARAM_TOL 3e-4

static nnt_ctx *ctx;
static void setup(void)
{
    ctx = test_ctx();
    test_make_tmpdir("classifier");
}

static void teardown(void)
{
    EXPECT_OK(nnt_ctx_destroy(ctx));
    if (!getenv("NNT_TEST_KEEP"))
        test_remove_tmpdir();
}

static const char *path_of(const char *name)
{
    return fixture_path_in("cls_tiny", name, NULL);
}

/* whole; batch tiles of 2, sequence tiles of 5 (a pooled position in the middle of a tile,
 * a partial edge tile), heads of 3; batch tiles of 1 (chosen and rejected rows apart),
 * sequence tiles of 3 */
static const nnt_tiling TILINGS[3] = {
    {sizeof(nnt_tiling), 0, 0, 0, 0, 0, 0, 0},
    {sizeof(nnt_tiling), 2, 5, 8, 7, 9, 3, 0},
    {sizeof(nnt_tiling), 1, 3, 16, 16, 10, 1, 0},
};


static nnt_layer *load(const char *dir, int ti)
{
    nnt_layer *m = NULL;
    EXPECT_OK(nnt_model_load_hf(ctx, path_of(dir), B, T, &TILINGS[ti], &m));
    return m;
}

/* The forward of rows ids with the pooled targets of labels (NULL: a reward model's) and
 * the model's pad; its loss. */
static double forward_pooled(nnt_layer *m, const int32_t *ids, const int32_t *labels,
                             int32_t *targets)
{
    nnt_model_config cfg;
    EXPECT_OK(nnt_model_config_of(m, &cfg));
    ck_assert_int_eq(cfg.has_pad_token, 1);
    EXPECT_OK(nnt_model_pool_targets(ids, B, T, cfg.pad_token_id, labels, targets));
    nnt_tensor *x = fixture_ids(ctx, B, T, ids, NULL), *y = fixture_ids(ctx, B, T, targets, NULL);
    double loss = 0.0;
    EXPECT_OK(nnt_layer_set_targets(m, y));
    EXPECT_OK(nnt_layer_forward(m, x, NULL));
    EXPECT_OK(nnt_layer_loss(m, &loss));
    nnt_tensor_destroy(x);
    nnt_tensor_destroy(y);
    return loss;
}

/* steps of accum micro-batches */
static nnt_optim *adamw_accum(nnt_layer *m, int64_t accum)
{
    nnt_optim_options oo = NNT_OPTIM_OPTIONS_INIT;
    oo.lr = 1e-2, oo.beta1 = 0.9, oo.beta2 = 0.999, oo.eps = 1e-8, oo.weight_decay = 0.1;
    oo.grad_clip = 0.0, oo.accum_steps = accum;
    nnt_optim *opt = NULL;
    EXPECT_OK(nnt_optim_create(ctx, &oo, &opt));
    EXPECT_OK(nnt_optim_add_layer(opt, m));   /* decay on the matrices, not the norms */
    return opt;
}

static nnt_optim *adamw(nnt_layer *m)
{
    return adamw_accum(m, 1);
}

/* The pooled forward of rows ids (forward_pooled): *el its pooled logits' (L a row) relative
 * error from want_logits; its loss returned. */
static double pooled_err(nnt_layer *m, const int32_t *ids, const int32_t *labels, int64_t L,
                         const float *want_logits, int32_t *targets, double *el)
{
    double loss = forward_pooled(m, ids, labels, targets);
    float logits[B * 8];
    ck_assert_int_le(L, 8);
    EXPECT_OK(nnt_model_pooled_logits(m, logits, B * L));
    *el = test_rel_err(logits, want_logits, B * L);
    return loss;
}

/* The pooled forward of rows ids (forward_pooled) under tiling ti: its pooled logits (L a
 * row) and loss against transformers' / TRL's, within the tolerances; *el the logits'
 * error; the loss returned. */
static double check_pooled(nnt_layer *m, int ti, const int32_t *ids, const int32_t *labels,
                           int64_t L, const float *want_logits, double want_loss,
                           int32_t *targets, double *el)
{
    double loss = pooled_err(m, ids, labels, L, want_logits, targets, el);
    ck_assert_msg(*el < LOGIT_TOL, "tiling %d: pooled logits rel %.3g", ti, *el);
    ck_assert_msg(fabs(loss - want_loss) / want_loss < LOSS_TOL, "tiling %d: loss %.9g, "
                  "transformers %.9g", ti, loss, want_loss);
    return loss;
}

/* A trainer's run of split 0 (B 4, accum 1) or 1 (B 2, accum 2): the model of directory dir
 * in rows of t under tiling ti (its batch tile at most b), an AdamW summing accum
 * micro-batches, the token file at path. */
typedef struct split_run {
    int64_t b, accum;
    nnt_layer *m;
    nnt_optim *opt;
    nnt_data *data;
} split_run;

static split_run split_open(const char *dir, int ti, int split, int64_t t, const char *path)
{
    split_run s = {split ? 2 : B, split ? 2 : 1, NULL, NULL, NULL};
    nnt_tiling tl = TILINGS[ti];
    tl.batch = tl.batch && tl.batch <= s.b ? tl.batch : s.b;
    EXPECT_OK(nnt_model_load_hf(ctx, path_of(dir), s.b, t, &tl, &s.m));
    s.opt = adamw_accum(s.m, s.accum);
    EXPECT_OK(nnt_data_open(path, NNT_DATA_AUTO, NULL, 64, &s.data));
    return s;
}

/* After a split run's STEPS steps (losses got[1..STEPS]): its step losses against want's
 * and its parameters against r's final ones, within the tolerances; *ws and *wp the worst. */
static void check_steps(const split_run *sr, nnt_st_reader *r, int ti, const double *got,
                        const double *want, double *ws, double *wp)
{
    double worst = 0.0;
    for (int st = 1; st <= STEPS; st++)
        worst = fmax(worst, fabs(got[st] - want[st - 1]) / want[st - 1]);
    ck_assert_msg(worst < STEP_TOL, "tiling %d, B %lld: step losses rel %.3g", ti,
                  (long long)sr->b, worst);
    char name[300] = "";
    double ep = fixture_worst_against(sr->m, r, "final", 1, name, sizeof name);
    ck_assert_msg(ep < PARAM_TOL, "tiling %d, B %lld: %s after %d steps rel %.3g", ti,
                  (long long)sr->b, name, STEPS, ep);
    *ws = worst, *wp = ep;
}

static void split_close(split_run *s)
{
    nnt_data_close(s->data);
    nnt_optim_destroy(s->opt);
    nnt_layer_destroy(s->m);
}

/* STEPS AdamW steps on the rows: the worst relative difference of their losses from the
 * fixture's. */
static double train_steps(nnt_layer *m, const int32_t *ids, const int32_t *targets,
                          const double *want)
{
    nnt_optim *opt = adamw(m);
    double worst = 0.0;
    for (int s = 0; s < STEPS; s++) {
        double loss = fixture_train_step(ctx, m, opt, B, T, ids, targets, NULL, NULL, 1,
                                         NULL, NULL);
        worst = fmax(worst, fabs(loss - want[s]) / fabs(want[s]));
    }
    nnt_optim_destroy(opt);
    return worst;
}

START_TEST(pool_rule)
{
    nnt_st_reader *r = fixture_open_st_path(path_of("pool.safetensors"));
    int64_t n = 0;
    int32_t *ids = fixture_read_n(r, "ids", NNT_IO_I32, &n);
    int32_t *want = fixture_read_n(r, "pooled", NNT_IO_I32, NULL);
    const int64_t rows = 6, cols = n / 6;
    int32_t labels[6] = {1, 0, 7, 2, 3, 4}, targets[6 * 7];
    EXPECT_OK(nnt_model_pool_targets(ids, rows, cols, 3, labels, targets));
    for (int64_t b = 0; b < rows; b++)
        for (int64_t t = 0; t < cols; t++)
            ck_assert_msg(targets[b * cols + t] == (t == want[b] ? labels[b] : -1),
                          "row %lld position %lld: %d (transformers pools %d)", (long long)b,
                          (long long)t, targets[b * cols + t], want[b]);
    /* no pad id: the last position; no labels: 0 there */
    EXPECT_OK(nnt_model_pool_targets(ids, rows, cols, -1, NULL, targets));
    for (int64_t i = 0; i < rows * cols; i++)
        ck_assert_int_eq(targets[i], i % cols == cols - 1 ? 0 : -1);
    labels[2] = -1;
    EXPECT_FAIL_MSG(nnt_model_pool_targets(ids, rows, cols, 3, labels, targets), NNT_E_INVAL,
                    "nnt_model_pool_targets");
    EXPECT_FAIL_MSG(nnt_model_pool_targets(NULL, rows, cols, 3, NULL, targets), NNT_E_INVAL,
                    "nnt_model_pool_targets");
    EXPECT_FAIL_MSG(nnt_model_pool_targets(ids, 0, cols, 3, NULL, targets), NNT_E_INVAL,
                    "nnt_model_pool_targets");
    free(ids), free(want);
    nnt_st_close(r);
}
END_TEST

/* llama_cls.safetensors: the rows, labels, pooled positions, transformers' pooled logits,
 * loss and 3 steps' losses (and r, open, for the gradients and parameters) */
typedef struct cls_ref {
    nnt_st_reader *r;
    int32_t *ids, *labels, *pooled;   /* labels: a classifier's of one label a row, else NULL */
    float *values;                    /* a classifier's trained on values (B, L), else NULL */
    float *logits;
    double *loss, *losses;
} cls_ref;

/* The reference at path: valued, a classifier trained on values (tests/gen_values_fixtures.py),
 * else one of labels */
static cls_ref cls_ref_read_at(const char *path, int valued)
{
    cls_ref c;
    c.r = fixture_open_st_path(path);
    c.ids = fixture_read_n(c.r, "ids", NNT_IO_I32, NULL);
    c.labels = valued ? NULL : fixture_read_n(c.r, "labels", NNT_IO_I32, NULL);
    c.values = valued ? fixture_read_n(c.r, "values", NNT_IO_F32, NULL) : NULL;
    c.pooled = fixture_read_n(c.r, "pooled", NNT_IO_I32, NULL);
    c.logits = fixture_read_n(c.r, "logits", NNT_IO_F32, NULL);
    c.loss = fixture_read_n(c.r, "loss", NNT_IO_F64, NULL);
    c.losses = fixture_read_n(c.r, "losses", NNT_IO_F64, NULL);
    return c;
}

static cls_ref cls_ref_read(void)
{
    return cls_ref_read_at(path_of("llama_cls.safetensors"), 0);
}

static void cls_ref_free(cls_ref *c)
{
    free(c->ids), free(c->labels), free(c->values), free(c->pooled), free(c->logits);
    free(c->loss), free(c->losses);
    nnt_st_close(c->r);
}

/* Loop index: the tiling. */
START_TEST(llama_classifier)
{
    cls_ref c = cls_ref_read();
    nnt_st_reader *r = c.r;
    int32_t *ids = c.ids, *labels = c.labels, *pooled = c.pooled;
    float *want_logits = c.logits;
    double *want_loss = c.loss, *want_losses = c.losses;
    nnt_layer *m = load("llama_cls", _i);
    nnt_model_config cfg;
    EXPECT_OK(nnt_model_config_of(m, &cfg));
    ck_assert_int_eq(cfg.num_labels, 3);
    ck_assert_int_eq(cfg.pad_token_id, 0);
    int32_t targets[B * T];
    EXPECT_OK(nnt_layer_zero_grad(m));
    double el = 0.0;
    double loss = check_pooled(m, _i, ids, labels, 3, want_logits, want_loss[0], targets, &el);
    for (int b = 0; b < B; b++)   /* the positions transformers pools */
        ck_assert_int_eq(targets[b * T + pooled[b]], labels[b]);
    float logits[B * 3];
    EXPECT_OK(nnt_layer_backward(m, NULL, NULL));
    EXPECT_FAIL_MSG(nnt_model_pooled_logits(m, logits, B * 3), NNT_E_STATE,
                    "nnt_model_pooled_logits");   /* the backward overwrote the logits */
    char worst[300] = "";
    double eg = fixture_worst_against(m, r, "grad", 0, worst, sizeof worst);
    ck_assert_msg(eg < GRAD_TOL, "tiling %d: gradient of %s rel %.3g", _i, worst, eg);
    double es = train_steps(m, ids, targets, want_losses);
    ck_assert_msg(es < STEP_TOL, "tiling %d: step losses rel %.3g", _i, es);
    double ep = fixture_worst_against(m, r, "final", 1, worst, sizeof worst);
    ck_assert_msg(ep < PARAM_TOL, "tiling %d: %s after %d steps rel %.3g", _i, worst, STEPS, ep);
    fprintf(stderr, "llama classifier tiling %d: logits %.3g loss %.3g grad %.3g steps %.3g "
            "params %.3g\n", _i, el, fabs(loss - want_loss[0]) / want_loss[0], eg, es, ep);
    nnt_layer_destroy(m);
    cls_ref_free(&c);
}
END_TEST

/* Loop index: the tiling. */
START_TEST(reward_model)
{
    nnt_st_reader *r = fixture_open_st_path(path_of("llama_rm.safetensors"));
    int32_t *ids = fixture_read_n(r, "ids", NNT_IO_I32, NULL);
    float *want_rewards = fixture_read_n(r, "rewards", NNT_IO_F32, NULL);
    double *want_plain = fixture_read_n(r, "loss_plain", NNT_IO_F64, NULL);
    double *want_loss = fixture_read_n(r, "loss", NNT_IO_F64, NULL);
    double *want_losses = fixture_read_n(r, "losses", NNT_IO_F64, NULL);
    nnt_layer *m = load("llama_rm", _i);
    nnt_model_config cfg;
    EXPECT_OK(nnt_model_config_of(m, &cfg));
    ck_assert_int_eq(cfg.num_labels, 1);
    int32_t targets[B * T];
    double er = 0.0;   /* center 0: TRL's default */
    check_pooled(m, _i, ids, NULL, 1, want_rewards, want_plain[0], targets, &er);
    EXPECT_OK(nnt_layer_set_pairwise_center(m, 0.25));
    EXPECT_OK(nnt_layer_zero_grad(m));
    double loss = forward_pooled(m, ids, NULL, targets);
    ck_assert_msg(fabs(loss - want_loss[0]) / want_loss[0] < LOSS_TOL, "tiling %d: loss %.9g "
                  "with the center term, TRL %.9g", _i, loss, want_loss[0]);
    EXPECT_OK(nnt_layer_backward(m, NULL, NULL));
    char worst[300] = "";
    double eg = fixture_worst_against(m, r, "grad", 0, worst, sizeof worst);
    ck_assert_msg(eg < GRAD_TOL, "tiling %d: gradient of %s rel %.3g", _i, worst, eg);
    double es = train_steps(m, ids, targets, want_losses);
    ck_assert_msg(es < STEP_TOL, "tiling %d: step losses rel %.3g", _i, es);
    double ep = fixture_worst_against(m, r, "final", 1, worst, sizeof worst);
    ck_assert_msg(ep < PARAM_TOL, "tiling %d: %s after %d steps rel %.3g", _i, worst, STEPS, ep);
    fprintf(stderr, "reward model tiling %d: rewards %.3g loss %.3g grad %.3g steps %.3g "
            "params %.3g\n", _i, er, fabs(loss - want_loss[0]) / want_loss[0], eg, es, ep);
    nnt_layer_destroy(m);
    free(ids), free(want_rewards), free(want_plain), free(want_loss), free(want_losses);
    nnt_st_close(r);
}
END_TEST

/* fixture_compare_files without the key bias (the middle third of c_attn.bias): its
 * gradient is mathematically 0 and its updates Adam-normalised noise on both sides (as in
 * tests/test_gpt2.c). */
static double compare_but_key_bias(const char *got_path, const char *want_path, char *worst,
                                   size_t wn)
{
    nnt_st_reader *got = fixture_open_st_path(got_path), *want = fixture_open_st_path(want_path);
    double e = 0.0;
    ck_assert_int_eq(nnt_st_count(got), nnt_st_count(want));
    for (size_t i = 0; i < nnt_st_count(want); i++) {
        const char *name = nnt_st_entry_at(want, i)->name;
        int64_t n = 0, ng = 0;
        float *a = fixture_read_n(got, name, NNT_IO_F32, &ng);
        float *b = fixture_read_n(want, name, NNT_IO_F32, &n);
        ck_assert_int_eq(n, ng);
        const char *suffix = "attn.c_attn.bias";
        size_t len = strlen(name);
        if (len > strlen(suffix) && strcmp(name + len - strlen(suffix), suffix) == 0)
            for (int64_t k = n / 3; k < 2 * n / 3; k++)
                a[k] = b[k] = 0.0f;
        double ei = test_rel_err(a, b, n);
        if (ei >= e) {
            e = ei;
            snprintf(worst, wn, "%s", name);
        }
        free(a), free(b);
    }
    nnt_st_close(got);
    nnt_st_close(want);
    return e;
}

/* Loop index: the tiling. GPT-2's classifier class, its parameters compared through the
 * directory nnt saves after the steps. */
START_TEST(gpt2_classifier)
{
    nnt_st_reader *r = fixture_open_st_path(path_of("gpt2_cls.safetensors"));
    int32_t *ids = fixture_read_n(r, "ids", NNT_IO_I32, NULL);
    int32_t *labels = fixture_read_n(r, "labels", NNT_IO_I32, NULL);
    float *want_logits = fixture_read_n(r, "logits", NNT_IO_F32, NULL);
    double *want_loss = fixture_read_n(r, "loss", NNT_IO_F64, NULL);
    double *want_losses = fixture_read_n(r, "losses", NNT_IO_F64, NULL);
    nnt_layer *m = load("gpt2_cls", _i);
    nnt_model_config cfg;
    EXPECT_OK(nnt_model_config_of(m, &cfg));
    ck_assert_int_eq(cfg.family, NNT_FAMILY_GPT2);
    ck_assert_int_eq(cfg.num_labels, 2);
    ck_assert_int_eq(cfg.pad_token_id, 5);
    int32_t targets[B * T];
    double el = 0.0;
    double loss = check_pooled(m, _i, ids, labels, 2, want_logits, want_loss[0], targets, &el);
    double es = train_steps(m, ids, targets, want_losses);
    ck_assert_msg(es < STEP_TOL, "tiling %d: step losses rel %.3g", _i, es);
    const char *dir = test_tmp_path("gpt2_cls_saved");
    EXPECT_OK(nnt_model_save_hf(m, dir));
    char saved[800], worst[300] = "";
    snprintf(saved, sizeof saved, "%s/model.safetensors", dir);
    double ep = compare_but_key_bias(saved, path_of("gpt2_cls_final.safetensors"), worst,
                                     sizeof worst);
    ck_assert_msg(ep < PARAM_TOL, "tiling %d: %s after %d steps rel %.3g", _i, worst, STEPS, ep);
    nnt_model_config back;
    EXPECT_OK(nnt_model_hf_config(ctx, dir, &back));
    ck_assert_int_eq(back.num_labels, 2);
    ck_assert_int_eq(back.has_pad_token, 1);
    ck_assert_int_eq(back.pad_token_id, 5);
    fprintf(stderr, "gpt2 classifier tiling %d (%s): logits %.3g loss %.3g steps %.3g params %.3g\n",
            _i, worst, el, fabs(loss - want_loss[0]) / want_loss[0], es, ep);
    nnt_layer_destroy(m);
    free(ids), free(labels), free(want_logits), free(want_loss), free(want_losses);
    nnt_st_close(r);
}
END_TEST

/* The text of file (config.json, adapter_config.json) in a saved directory */
static char *file_text(const char *dir, const char *file)
{
    char path[4400];
    snprintf(path, sizeof path, "%s/%s", dir, file);
    FILE *f = fopen(path, "rb");
    ck_assert_ptr_nonnull(f);
    static char buf[16384];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    buf[n] = '\0';
    fclose(f);
    return buf;
}

/* Saved and loaded back: the same configuration and parameters, bit for bit; the config
 * names transformers' classifier class, its labels and pad id. */
START_TEST(save_load_round_trip)
{
    static const char *const dirs[] = {"llama_cls", "llama_rm"};
    static const char *const arch[] = {"\"LlamaForSequenceClassification\"",
                                       "\"LlamaForSequenceClassification\""};
    for (int k = 0; k < 2; k++) {
        nnt_layer *m = load(dirs[k], 1), *back = NULL;
        const char *dir = test_tmp_path(dirs[k]);
        EXPECT_OK(nnt_model_save_hf(m, dir));
        const char *text = file_text(dir, "config.json");
        ck_assert_msg(strstr(text, arch[k]) != NULL, "%s", text);
        ck_assert_msg(strstr(text, "\"pad_token_id\": 0") != NULL, "%s", text);
        ck_assert_msg(strstr(text, k ? "\"id2label\": {\"0\": \"LABEL_0\"}"
                                     : "\"2\": \"LABEL_2\"") != NULL, "%s", text);
        EXPECT_OK(nnt_model_load_hf(ctx, dir, B, T, NULL, &back));
        nnt_model_config a, b;
        EXPECT_OK(nnt_model_config_of(m, &a));
        EXPECT_OK(nnt_model_config_of(back, &b));
        ck_assert_int_eq(a.num_labels, b.num_labels);
        ck_assert_int_eq(b.has_pad_token, 1);
        ck_assert_int_eq(a.pad_token_id, b.pad_token_id);
        int64_t count = 0, count2 = 0;
        EXPECT_OK(nnt_layer_num_params(m, &count, NULL));
        EXPECT_OK(nnt_layer_num_params(back, &count2, NULL));
        ck_assert_int_eq(count, count2);
        for (int64_t i = 0; i < count; i++) {
            nnt_param_info p = test_param_at(m, i), q = test_param_at(back, i);
            ck_assert_str_eq(p.name, q.name);
            int64_t n = 0;
            float *x = test_to_host(p.value, &n), *y = test_to_host(q.value, NULL);
            ck_assert_msg(memcmp(x, y, (size_t)n * sizeof *x) == 0, "%s changed", p.name);
            free(x), free(y);
        }
        nnt_layer_destroy(back);
        nnt_layer_destroy(m);
    }
}
END_TEST

/* A classifier on a language model's directory (transformers'
 * AutoModelForSequenceClassification.from_pretrained of a causal model): every parameter
 * but the head is the file's, the head keeps its initialisation, the file's lm_head is not
 * read. */
START_TEST(classifier_from_language_model)
{
    nnt_model_config cfg;
    EXPECT_OK(nnt_model_hf_config(ctx, path_of("llama_lm"), &cfg));
    ck_assert_int_eq(cfg.num_labels, 0);
    cfg.num_labels = 3;
    nnt_layer *m = NULL;
    EXPECT_OK(nnt_model_create(ctx, &cfg, B, T, NULL, &m));
    int64_t count = 0, score = -1;
    EXPECT_OK(nnt_layer_num_params(m, &count, NULL));
    for (int64_t i = 0; i < count; i++)
        if (strcmp(test_param_at(m, i).name, "score.weight") == 0)
            score = i;
    ck_assert_int_eq(score, count - 1);
    int64_t n = 0;
    float *init = test_to_host(test_param_at(m, score).value, &n);
    ck_assert_int_eq(n, 3 * 32);
    EXPECT_OK(nnt_model_read_hf(m, path_of("llama_lm")));
    char file[4300];
    snprintf(file, sizeof file, "%s/model.safetensors", path_of("llama_lm"));
    nnt_st_reader *r = fixture_open_st_path(file);
    for (int64_t i = 0; i < count; i++) {
        nnt_param_info p = test_param_at(m, i);
        float *got = test_to_host(p.value, &n);
        if (i == score) {
            ck_assert_msg(memcmp(got, init, (size_t)n * sizeof *got) == 0, "score changed");
        } else {
            int64_t nw = 0;
            float *want = fixture_read_n(r, p.name, NNT_IO_F32, &nw);
            ck_assert_int_eq(n, nw);
            ck_assert_msg(memcmp(got, want, (size_t)n * sizeof *got) == 0, "%s", p.name);
            free(want);
        }
        free(got);
    }
    nnt_st_close(r);
    /* a classifier's directory is no language model's, nor one of other labels */
    nnt_layer *lm = NULL;
    cfg.num_labels = 0;
    EXPECT_OK(nnt_model_hf_config(ctx, path_of("llama_cls"), &cfg));
    cfg.num_labels = 0;
    EXPECT_OK(nnt_model_create(ctx, &cfg, B, T, NULL, &lm));
    EXPECT_FAIL_MSG(nnt_model_read_hf(lm, path_of("llama_cls")), NNT_E_SHAPE, "num_labels");
    EXPECT_FAIL_MSG(nnt_model_read_hf(m, path_of("llama_rm")), NNT_E_SHAPE, "num_labels");
    nnt_layer_destroy(lm);
    free(init);
    nnt_layer_destroy(m);
}
END_TEST

START_TEST(refusals)
{
    nnt_layer *m = load("llama_rm", 0), *c = load("llama_cls", 0);
    int32_t prompt[2] = {1, 2}, out[4];
    EXPECT_FAIL_MSG(nnt_model_generate(c, prompt, 2, 2, NULL, out), NNT_E_INVAL,
                    "classifier");
    float buf[B * 3];
    EXPECT_FAIL_MSG(nnt_model_pooled_logits(c, buf, B * 3), NNT_E_STATE,
                    "nnt_model_pooled_logits");
    EXPECT_FAIL_MSG(nnt_layer_set_pairwise_center(c, 0.1), NNT_E_INVAL,
                    "nnt_layer_set_pairwise_center");
    EXPECT_FAIL_MSG(nnt_layer_set_pairwise_center(m, -1.0), NNT_E_INVAL,
                    "nnt_layer_set_pairwise_center");
    EXPECT_FAIL_MSG(nnt_layer_set_pairwise_center(m, NAN), NNT_E_INVAL,
                    "nnt_layer_set_pairwise_center");

    /* a reward model's targets pool one position a row */
    int32_t ids[B * T], targets[B * T];
    for (int i = 0; i < B * T; i++)
        ids[i] = 1 + i % 60;
    EXPECT_OK(nnt_model_pool_targets(ids, B, T, -1, NULL, targets));
    targets[T + 3] = 0;   /* row 1: two */
    nnt_tensor *x = fixture_ids(ctx, B, T, ids, NULL), *y = fixture_ids(ctx, B, T, targets, NULL);
    EXPECT_OK(nnt_layer_set_targets(m, y));
    EXPECT_FAIL_MSG(nnt_layer_forward(m, x, NULL), NNT_E_INVAL, "row 1");
    targets[T + 3] = -1, targets[2 * T - 1] = -1;   /* row 1: none */
    nnt_tensor_destroy(y);
    y = fixture_ids(ctx, B, T, targets, NULL);
    EXPECT_OK(nnt_layer_set_targets(m, y));
    EXPECT_FAIL_MSG(nnt_layer_forward(m, x, NULL), NNT_E_INVAL, "row 1");
    /* a label out of range for a classifier */
    int32_t labels[B] = {0, 1, 3, 2};
    EXPECT_OK(nnt_model_pool_targets(ids, B, T, -1, labels, targets));
    nnt_tensor_destroy(y);
    y = fixture_ids(ctx, B, T, targets, NULL);
    EXPECT_OK(nnt_layer_set_targets(c, y));
    EXPECT_FAIL_MSG(nnt_layer_forward(c, x, NULL), NNT_E_INVAL, "outside [0, 3)");
    nnt_tensor_destroy(x);
    nnt_tensor_destroy(y);
    nnt_layer_destroy(m);
    nnt_layer_destroy(c);

    /* pairs: an odd B */
    nnt_layer *odd = NULL;
    EXPECT_OK(nnt_model_load_hf(ctx, path_of("llama_rm"), 3, T, NULL, &odd));
    EXPECT_OK(nnt_model_pool_targets(ids, 3, T, -1, NULL, targets));
    x = fixture_ids(ctx, 3, T, ids, NULL), y = fixture_ids(ctx, 3, T, targets, NULL);
    EXPECT_OK(nnt_layer_set_targets(odd, y));
    EXPECT_FAIL_MSG(nnt_layer_forward(odd, x, NULL), NNT_E_SHAPE, "B is 3");
    nnt_tensor_destroy(x);
    nnt_tensor_destroy(y);
    nnt_layer_destroy(odd);

    /* configurations */
    nnt_model_config cfg;
    EXPECT_OK(nnt_model_preset("llama-tiny", &cfg));
    cfg.num_labels = -1;
    EXPECT_FAIL_MSG(nnt_model_create(ctx, &cfg, B, T, NULL, &m), NNT_E_INVAL, "num_labels");
    cfg.num_labels = 2, cfg.has_pad_token = 1, cfg.pad_token_id = -3;
    EXPECT_FAIL_MSG(nnt_model_create(ctx, &cfg, B, T, NULL, &m), NNT_E_INVAL, "pad_token_id");
    EXPECT_FAIL_MSG(nnt_layer_pairwise_create(ctx, -1, -0.5, &m), NNT_E_INVAL,
                    "nnt_layer_pairwise_create");
    /* transformers has no Granite classifier */
    EXPECT_OK(nnt_model_preset("llama-tiny", &cfg));
    cfg.family = NNT_FAMILY_GRANITE, cfg.num_labels = 2;
    EXPECT_OK(nnt_model_create(ctx, &cfg, 2, T, NULL, &m));
    EXPECT_FAIL_MSG(nnt_model_save_hf(m, test_tmp_path("granite_cls")), NNT_E_UNSUPPORTED,
                    "GraniteForCausalLM");
    nnt_layer_destroy(m);
}
END_TEST


/* The frozen state of m's parameters: *head whether "score.weight" is, the count of the
 * others that are not (the adapters' when the base is frozen). */
static int64_t trainable_but_head(nnt_layer *m, int *head)
{
    int64_t n = 0, count = 0;
    EXPECT_OK(nnt_layer_num_params(m, &count, NULL));
    *head = -1;
    for (int64_t i = 0; i < count; i++) {
        nnt_param_info info = {sizeof info, NULL, NULL, NULL, 0, 0};
        EXPECT_OK(nnt_layer_param(m, i, &info));
        if (strcmp(info.name, "score.weight") == 0)
            *head = info.frozen;
        else
            n += !info.frozen;
    }
    return n;
}

/* Measured (AMD EPYC Zen 4, 2 cores, worst over the cases and tilings): the 3 steps' losses
 * rel 3.3e-6, the pooled logits after them 6.6e-6, the adapters and the head 6.5e-6; PEFT's
 * trained file read 1.4e-7 and merged 1.0e-7 (LOGIT_TOL). */
#define LORA_STEP_TOL 3e-5
#define LORA_LOGIT_TOL 7e-5
#define LORA_PARAM_TOL 7e-5

/* Loop index: case (0: lora_cls_qv, 1: lora_cls_all) * 3 + tiling. PEFT's initial adapter of a
 * classifier (task_type SEQ_CLS: the score head trained whole beside the adapters, PEFT's
 * modules_to_save) loaded and trained 3 AdamW steps against PEFT's: the losses, the pooled
 * logits after them, the adapters and the head nnt_model_save_peft writes against PEFT's
 * trained file; PEFT's trained file read gives PEFT's logits; merged, merge_and_unload's. */
START_TEST(lora_classifier)
{
    static const char *const names[] = {"lora_cls_qv", "lora_cls_all"};
    static const int64_t adapted[] = {2 * 2 * 2, 2 * 7 * 2};   /* layers x modules x (A, B) */
    const char *name = names[_i / 3];
    int ti = _i % 3, head = 0;
    char path[300], worst[300] = "";
    cls_ref c = cls_ref_read();
    snprintf(path, sizeof path, "%s.safetensors", name);
    nnt_st_reader *r = fixture_open_st_path(path_of(path));
    double *want_losses = fixture_read_n(r, "losses", NNT_IO_F64, NULL);
    float *want_logits = fixture_read_n(r, "logits", NNT_IO_F32, NULL);
    float *want_merged = fixture_read_n(r, "merged_logits", NNT_IO_F32, NULL);
    nnt_layer *m = load("llama_cls", ti);
    EXPECT_OK(nnt_layer_freeze(m, "score.*", NNT_FREEZE, NULL));   /* trained all the same */
    snprintf(path, sizeof path, "%s/init", name);
    EXPECT_OK(nnt_model_load_peft(m, path_of(path)));
    ck_assert_int_eq(trainable_but_head(m, &head), adapted[_i / 3]);
    ck_assert_int_eq(head, 0);
    int32_t targets[B * T];
    EXPECT_OK(nnt_model_pool_targets(c.ids, B, T, 0, c.labels, targets));
    double es = train_steps(m, c.ids, targets, want_losses);
    double el = 0.0;
    pooled_err(m, c.ids, c.labels, 3, want_logits, targets, &el);
    ck_assert_msg(el < LORA_LOGIT_TOL, "%s tiling %d: pooled logits rel %.3g", name, ti, el);
    ck_assert_msg(es < LORA_STEP_TOL, "%s tiling %d: step losses rel %.3g", name, ti, es);
    EXPECT_OK(nnt_model_save_peft(m, test_tmp_path("trained")));
    snprintf(path, sizeof path, "%s/trained/adapter_model.safetensors", name);
    double ea = fixture_compare_files(test_tmp_path("trained/adapter_model.safetensors"),
                                      path_of(path), 1, worst, sizeof worst);
    ck_assert_msg(ea < LORA_PARAM_TOL, "%s tiling %d: %s rel %.3g", name, ti, worst, ea);
    char *conf = file_text(test_tmp_path("trained"), "adapter_config.json");
    ck_assert_msg(strstr(conf, "\"modules_to_save\": [\"classifier\", \"score\"]") &&
                  strstr(conf, "\"task_type\": \"SEQ_CLS\""), "%s", conf);

    /* PEFT's trained adapter read: PEFT's logits */
    nnt_layer *p = load("llama_cls", ti);
    snprintf(path, sizeof path, "%s/trained", name);
    EXPECT_OK(nnt_model_load_peft(p, path_of(path)));
    double er = 0.0, em = 0.0;
    pooled_err(p, c.ids, c.labels, 3, want_logits, targets, &er);
    EXPECT_OK(nnt_model_lora_merge(p));   /* merged: the head stays the trained one */
    ck_assert_int_eq(trainable_but_head(p, &head), 0);
    ck_assert_int_eq(head, 0);
    pooled_err(p, c.ids, c.labels, 3, want_merged, targets, &em);
    ck_assert_msg(er < LOGIT_TOL && em < LOGIT_TOL, "%s tiling %d: PEFT's trained adapter read "
                  "rel %.3g, merged %.3g", name, ti, er, em);
    fprintf(stderr, "%s tiling %d: steps %.3g logits %.3g adapters %.3g; PEFT's read %.3g, "
            "merged %.3g\n", name, ti, es, el, ea, er, em);
    nnt_layer_destroy(p);
    nnt_layer_destroy(m);
    free(want_losses), free(want_logits), free(want_merged);
    nnt_st_close(r);
    cls_ref_free(&c);
}
END_TEST

/* LoRA added to a classifier: all-linear leaves the head out and trains it whole, a frozen
 * head unfrozen, the head refused as a target; a reward model's adapters save its head (1, C);
 * a classifier's adapter refused on a language model, other modules_to_save refused. */
START_TEST(lora_classifier_add)
{
    nnt_layer *m = load("llama_cls", 0);
    int head = 0;
    EXPECT_OK(nnt_layer_freeze(m, "*", NNT_FREEZE, NULL));
    nnt_lora_options lo = NNT_LORA_OPTIONS_INIT;
    lo.targets = "all-linear";
    EXPECT_OK(nnt_model_lora_add(m, &lo));
    ck_assert_int_eq(trainable_but_head(m, &head), 2 * 7 * 2);
    ck_assert_int_eq(head, 0);
    EXPECT_OK(nnt_model_lora_merge(m));
    lo.targets = "q_proj,score";
    EXPECT_FAIL_MSG(nnt_model_lora_add(m, &lo), NNT_E_INVAL, "classifier's head");
    nnt_layer_destroy(m);

    nnt_layer *rm = load("llama_rm", 0);
    lo.targets = NULL, lo.rank = 2;
    EXPECT_OK(nnt_model_lora_add(rm, &lo));
    EXPECT_OK(nnt_model_save_peft(rm, test_tmp_path("rm")));
    nnt_st_reader *f = fixture_open_st_path(test_tmp_path("rm/adapter_model.safetensors"));
    const nnt_st_entry *e = nnt_st_find(f, "base_model.model.score.weight");
    ck_assert_msg(e && e->ndim == 2 && e->shape[0] == 1 && e->shape[1] == 32,
                  "the reward model's head in its adapter file");
    ck_assert_int_eq(nnt_st_count(f), 2 * 2 * 2 + 1);   /* q_proj, v_proj: Llama's default */
    nnt_st_close(f);
    nnt_layer_destroy(rm);

    nnt_layer *lm = NULL;
    EXPECT_OK(nnt_model_load_hf(ctx, path_of("llama_lm"), B, T, NULL, &lm));
    EXPECT_FAIL_MSG(nnt_model_load_peft(lm, path_of("lora_cls_qv/trained")), NNT_E_INVAL,
                    "load it on a classifier");
    /* modules_to_save naming another module */
    char *conf = file_text(path_of("lora_cls_qv/trained"), "adapter_config.json");
    char *at = strstr(conf, "\"classifier\",");   /* (file_text's buffer has room) */
    ck_assert_ptr_nonnull(at);
    memmove(at + 14, at + 12, strlen(at + 12) + 1);
    memcpy(at, "\"embed_tokens\"", 14);
    ck_assert_ptr_nonnull(strstr(conf, "[\n    \"embed_tokens\","));
    nnt_layer *c = load("llama_cls", 0);
    fixture_write_adapter(test_tmp_path("other"), conf,
                       path_of("lora_cls_qv/trained/adapter_model.safetensors"));
    EXPECT_FAIL_MSG(nnt_model_load_peft(c, test_tmp_path("other")), NNT_E_UNSUPPORTED,
                    "embed_tokens");
    nnt_layer_destroy(c);
    nnt_layer_destroy(lm);
}
END_TEST

/* Each of model's labels named as want (NULL: transformers' defaults, LABEL_k) */
static void expect_names(const nnt_layer *m, const char *const *want, const char *where)
{
    char name[300], dflt[32];
    for (int k = 0; k < 3; k++) {
        snprintf(dflt, sizeof dflt, "LABEL_%d", k);
        EXPECT_OK(nnt_model_label_name(m, k, name, sizeof name));
        ck_assert_msg(strcmp(name, want ? want[k] : dflt) == 0, "%s: label %d named '%s', "
                      "not '%s'", where, k, name, want ? want[k] : dflt);
    }
}

/* A classifier's label names: read from transformers' id2label (escapes, a non-ASCII name),
 * written back and read again, kept by training-state files (read by
 * nnt_model_load_train_state and nnt_train_state_load), the defaults LABEL_k; refusals. */
START_TEST(label_names)
{
    static const char *const names[3] = {"n\xc3\xa9gatif", "say \"maybe\"", "positive\\ok"};
    nnt_layer *m = load("llama_named", 1), *c = load("llama_cls", 0);
    expect_names(m, names, "llama_named");
    expect_names(c, NULL, "llama_cls");
    EXPECT_OK(nnt_model_save_hf(m, test_tmp_path("named")));
    const char *text = file_text(test_tmp_path("named"), "config.json");
    ck_assert_msg(strstr(text, "\"id2label\": {\"0\": \"n\xc3\xa9gatif\", \"1\": \"say "
                               "\\\"maybe\\\"\", \"2\": \"positive\\\\ok\"}") &&
                  strstr(text, "\"label2id\": {\"n\xc3\xa9gatif\": 0, \"say \\\"maybe\\\"\": "
                               "1, \"positive\\\\ok\": 2}"), "%s", text);
    nnt_layer *back = NULL;
    EXPECT_OK(nnt_model_load_hf(ctx, test_tmp_path("named"), B, T, NULL, &back));
    expect_names(back, names, "saved and loaded");
    EXPECT_OK(nnt_model_read_hf(c, test_tmp_path("named")));   /* a classifier's: its names */
    expect_names(c, names, "read into llama_cls");
    EXPECT_OK(nnt_model_set_label_names(c, NULL, 0));
    expect_names(c, NULL, "names cleared");

    /* training-state files */
    nnt_optim *opt = adamw(m);
    nnt_train_state st = NNT_TRAIN_STATE_INIT;
    EXPECT_OK(nnt_train_state_save(opt, test_tmp_path("state.safetensors"), &st));
    nnt_layer *from_state = NULL;
    EXPECT_OK(nnt_model_load_train_state(ctx, test_tmp_path("state.safetensors"), B, T, NULL,
                                         NULL, &from_state));
    expect_names(from_state, names, "nnt_model_load_train_state");
    nnt_optim *copt = adamw(c);
    EXPECT_OK(nnt_train_state_load(copt, test_tmp_path("state.safetensors"), NULL));
    expect_names(c, names, "nnt_train_state_load");

    /* refusals */
    const char *two[2] = {"a", "b"}, *dup[3] = {"a", "b", "a"}, *empty[3] = {"a", "", "c"};
    const char *ctl[3] = {"a", "b\tc", "d"}, *null[3] = {"a", NULL, "c"};
    char long_name[300];
    memset(long_name, 'x', 256);
    long_name[256] = '\0';
    const char *longs[3] = {"a", "b", long_name};
    const char *fn = "nnt_model_set_label_names";
    EXPECT_FAIL_NAMING(nnt_model_set_label_names(c, two, 2), NNT_E_INVAL, fn, "3 labels");
    EXPECT_FAIL_NAMING(nnt_model_set_label_names(c, NULL, 3), NNT_E_INVAL, fn, "n 3");
    EXPECT_FAIL_NAMING(nnt_model_set_label_names(c, dup, 3), NNT_E_INVAL, fn,
                       "labels 0 and 2 are both named \"a\"");
    EXPECT_FAIL_NAMING(nnt_model_set_label_names(c, empty, 3), NNT_E_INVAL, fn,
                       "label 1 is empty");
    EXPECT_FAIL_NAMING(nnt_model_set_label_names(c, ctl, 3), NNT_E_INVAL, fn, "0x09");
    EXPECT_FAIL_NAMING(nnt_model_set_label_names(c, null, 3), NNT_E_INVAL, fn, "NULL");
    EXPECT_FAIL_NAMING(nnt_model_set_label_names(c, longs, 3), NNT_E_INVAL, fn, "too long");
    expect_names(c, names, "after the refusals");   /* refused calls change nothing */
    char small[8];
    EXPECT_FAIL_NAMING(nnt_model_label_name(c, 0, small, sizeof small), NNT_E_INVAL,
                       "nnt_model_label_name", "size 8");
    EXPECT_FAIL_NAMING(nnt_model_label_name(c, 3, long_name, sizeof long_name), NNT_E_INVAL,
                       "nnt_model_label_name", "label 3 of 3");
    nnt_layer *lm = NULL;
    EXPECT_OK(nnt_model_load_hf(ctx, path_of("llama_lm"), B, T, NULL, &lm));
    EXPECT_FAIL_NAMING(nnt_model_set_label_names(lm, two, 2), NNT_E_INVAL, fn, "classifier");
    /* id2label's keys not the labels 0 .. 2 */
    char *bad = file_text(test_tmp_path("named"), "config.json");
    char *key = strstr(bad, "\"2\": \"positive");
    ck_assert_ptr_nonnull(key);
    key[1] = '7';
    test_write_config(test_tmp_path("badnames"), bad);
    char weights[4400];
    snprintf(weights, sizeof weights, "%s/model.safetensors", test_tmp_path("named"));
    ck_assert_int_eq(symlink(weights, test_tmp_path("badnames/model.safetensors")), 0);
    nnt_layer *none = NULL;
    EXPECT_FAIL_NAMING(nnt_model_load_hf(ctx, test_tmp_path("badnames"), B, T, NULL, &none),
                       NNT_E_FORMAT, "nnt_model_load_hf", "id2label's key \"7\"");
    ck_assert_ptr_null(none);
    nnt_optim_destroy(opt);
    nnt_optim_destroy(copt);
    nnt_layer_destroy(lm);
    nnt_layer_destroy(from_state);
    nnt_layer_destroy(back);
    nnt_layer_destroy(c);
    nnt_layer_destroy(m);
}
END_TEST

/* Each label of the classifier source names named as want (NULL: LABEL_k), through
 * nnt_model_source_label_name */
static void expect_source_names(const char *source, const char *const *want, const char *where)
{
    char name[300], dflt[32];
    for (int k = 0; k < 3; k++) {
        snprintf(dflt, sizeof dflt, "LABEL_%d", k);
        EXPECT_OK(nnt_model_source_label_name(ctx, source, k, name, sizeof name));
        ck_assert_msg(strcmp(name, want ? want[k] : dflt) == 0, "%s: label %d named '%s', "
                      "not '%s'", where, k, name, want ? want[k] : dflt);
    }
}

/* A source's label names without its model (nnt_model_source_label_name): a directory's
 * id2label (escapes, a non-ASCII name; names holding commas), the defaults, a training
 * checkpoint's (the file and the directory holding it), what the loaded model says;
 * refusals. */
START_TEST(source_label_names)
{
    static const char *const names[3] = {"n\xc3\xa9gatif", "say \"maybe\"", "positive\\ok"};
    static const char *const commas[3] = {"so, so", "a,b", ","};
    expect_source_names(path_of("llama_named"), names, "llama_named");
    expect_source_names(path_of("llama_cls"), NULL, "llama_cls");
    nnt_layer *m = load("llama_cls", 0);
    EXPECT_OK(nnt_model_set_label_names(m, commas, 3));
    EXPECT_OK(nnt_model_save_hf(m, test_tmp_path("commas")));
    expect_source_names(test_tmp_path("commas"), commas, "names with commas, saved");
    nnt_layer *back = NULL;
    EXPECT_OK(nnt_model_load_hf(ctx, test_tmp_path("commas"), B, T, NULL, &back));
    expect_names(back, commas, "names with commas, loaded");

    /* a training checkpoint: the file, and the directory holding checkpoint.safetensors */
    ck_assert_int_eq(mkdir(test_tmp_path("ck"), 0755), 0);
    nnt_optim *opt = adamw(m);
    nnt_train_state st = NNT_TRAIN_STATE_INIT;
    EXPECT_OK(nnt_train_state_save(opt, test_tmp_path("ck/checkpoint.safetensors"), &st));
    expect_source_names(test_tmp_path("ck/checkpoint.safetensors"), commas, "checkpoint file");
    expect_source_names(test_tmp_path("ck"), commas, "checkpoint directory");
    EXPECT_OK(nnt_model_set_label_names(m, NULL, 0));
    EXPECT_OK(nnt_train_state_save(opt, test_tmp_path("plain.safetensors"), &st));
    expect_source_names(test_tmp_path("plain.safetensors"), NULL, "checkpoint, no names");

    /* refusals */
    const char *fn = "nnt_model_source_label_name";
    char buf[64], small[6];
    EXPECT_FAIL_NAMING(nnt_model_source_label_name(ctx, path_of("llama_named"), 3, buf,
                                                   sizeof buf), NNT_E_INVAL, fn,
                       "not one of its labels");
    EXPECT_FAIL_NAMING(nnt_model_source_label_name(ctx, path_of("llama_named"), -1, buf,
                                                   sizeof buf), NNT_E_INVAL, fn,
                       "label -1");
    EXPECT_FAIL_NAMING(nnt_model_source_label_name(ctx, path_of("llama_named"), 0, small,
                                                   sizeof small), NNT_E_INVAL, fn, "size 6");
    EXPECT_FAIL_NAMING(nnt_model_source_label_name(ctx, path_of("llama_lm"), 0, buf,
                                                   sizeof buf), NNT_E_INVAL, fn,
                       "a language model");
    EXPECT_FAIL_NAMING(nnt_model_source_label_name(NULL, "gpt2", 0, buf, sizeof buf),
                       NNT_E_INVAL, fn, "a language model");
    EXPECT_FAIL_NAMING(nnt_model_source_label_name(ctx, path_of("llama_named"), 0, NULL, 8),
                       NNT_E_INVAL, fn, "buf");
    EXPECT_FAIL_NAMING(nnt_model_source_label_name(ctx, test_tmp_path("absent"), 0, buf,
                                                   sizeof buf), NNT_E_IO, fn, "absent");
    char *bad = file_text(test_tmp_path("commas"), "config.json");
    char *key = strstr(bad, "\"2\": \",\"");   /* id2label's third key */
    ck_assert_ptr_nonnull(key);
    key[1] = '7';
    test_write_config(test_tmp_path("badnames"), bad);
    EXPECT_FAIL_NAMING(nnt_model_source_label_name(ctx, test_tmp_path("badnames"), 0, buf,
                                                   sizeof buf), NNT_E_FORMAT, fn,
                       "id2label's key \"7\"");
    nnt_optim_destroy(opt);
    nnt_layer_destroy(back);
    nnt_layer_destroy(m);
}
END_TEST

/* Loop index: case * 3 + tiling. Classifiers trained on values (nnt_model_config.problem_type:
 * transformers' "regression" and "multi_label_classification", tests/gen_values_fixtures.py)
 * against the model's own loss in transformers: pooled logits, loss, every gradient, 3 AdamW
 * steps and the parameters after them. A one-label directory reads as a reward model, so reg1
 * is built with its problem_type and its weights read in. */
/* Measured (2-core AMD Zen 4, the 3 cases over 3 tilings, the library's step and the
 * trainer's): pooled logits rel 2.2e-7, first losses 7.1e-8, gradients 5.0e-7 (LOGIT_TOL,
 * LOSS_TOL, GRAD_TOL above hold them at about 10x), the 3 steps' losses 2.1e-6 and the
 * parameters after them 1.3e-5: */
#define VALUES_STEP_TOL 2e-5
#define VALUES_PARAM_TOL 1.5e-4
static const struct {
    const char *name;
    int64_t L;
    int problem;
} VALUE_CASES[3] = {{"reg3", 3, NNT_PROBLEM_REGRESSION},
                    {"multi3", 3, NNT_PROBLEM_MULTI_LABEL},
                    {"reg1", 1, NNT_PROBLEM_REGRESSION}};

static const char *values_path(const char *name)
{
    return fixture_path_in("cls_values", name, NULL);
}

/* The classifier of values case c under tiling ti */
static nnt_layer *values_model(int c, int ti)
{
    const char *dir = values_path(VALUE_CASES[c].name);
    nnt_layer *m = NULL;
    nnt_model_config cfg;
    EXPECT_OK(nnt_model_hf_config(ctx, dir, &cfg));
    ck_assert_int_eq(cfg.num_labels, VALUE_CASES[c].L);
    if (VALUE_CASES[c].L == 1) {   /* read as a reward model: built with its problem */
        ck_assert_int_eq(cfg.problem_type, NNT_PROBLEM_DEFAULT);
        cfg.problem_type = VALUE_CASES[c].problem;
        EXPECT_OK(nnt_model_create(ctx, &cfg, B, T, &TILINGS[ti], &m));
        EXPECT_OK(nnt_model_read_hf(m, dir));
    } else {
        ck_assert_int_eq(cfg.problem_type, VALUE_CASES[c].problem);
        EXPECT_OK(nnt_model_load_hf(ctx, dir, B, T, &TILINGS[ti], &m));
    }
    return m;
}

/* A values case's reference (tests/gen_values_fixtures.py) */
static cls_ref values_ref_read(int c)
{
    char ref[4400];
    snprintf(ref, sizeof ref, "%s.safetensors", values_path(VALUE_CASES[c].name));
    return cls_ref_read_at(ref, 1);
}

START_TEST(label_values)
{
    const int c = _i / 3, ti = _i % 3;
    const int64_t L = VALUE_CASES[c].L;
    cls_ref v = values_ref_read(c);
    nnt_st_reader *r = v.r;
    const int32_t *ids = v.ids, *pooled = v.pooled;
    const float *values = v.values, *want_logits = v.logits;
    const double *want_loss = v.loss, *want_losses = v.losses;
    nnt_layer *m = values_model(c, ti);
    nnt_model_config cfg;
    EXPECT_OK(nnt_model_config_of(m, &cfg));
    ck_assert_int_eq(cfg.problem_type, VALUE_CASES[c].problem);
    EXPECT_OK(nnt_layer_set_label_values(m, values, B * L));
    int32_t targets[B * T];
    EXPECT_OK(nnt_layer_zero_grad(m));
    double el = 0.0;
    double loss = check_pooled(m, ti, ids, NULL, L, want_logits, want_loss[0], targets, &el);
    for (int b = 0; b < B; b++)   /* the positions transformers pools */
        ck_assert_int_ne(targets[b * T + pooled[b]], -1);
    EXPECT_OK(nnt_layer_backward(m, NULL, NULL));
    char worst[300] = "";
    double eg = fixture_worst_against(m, r, "grad", 0, worst, sizeof worst);
    ck_assert_msg(eg < GRAD_TOL, "%s tiling %d: gradient of %s rel %.3g", VALUE_CASES[c].name,
                  ti, worst, eg);
    double es = train_steps(m, ids, targets, want_losses);
    ck_assert_msg(es < VALUES_STEP_TOL, "%s tiling %d: step losses rel %.3g",
                  VALUE_CASES[c].name, ti, es);
    double ep = fixture_worst_against(m, r, "final", 1, worst, sizeof worst);
    ck_assert_msg(ep < VALUES_PARAM_TOL, "%s tiling %d: %s after %d steps rel %.3g",
                  VALUE_CASES[c].name, ti, worst, STEPS, ep);
    fprintf(stderr, "%s tiling %d: logits %.3g loss %.3g grad %.3g steps %.3g params %.3g (%s)\n",
            VALUE_CASES[c].name, ti, el, fabs(loss - want_loss[0]) / want_loss[0], eg, es, ep,
            worst);
    nnt_layer_destroy(m);
    cls_ref_free(&v);
}
END_TEST

/* Classifiers on values: config.json's problem_type written and read back (transformers'
 * names), a one-label directory a reward model whatever its problem_type, label hits refused;
 * refusals of the values (their count, range, absence), of problem types, and of the
 * trainer. */
static void write_labelled(const char *path, const int32_t *ids, const int32_t *pooled,
                           const int32_t *labels);
static void write_valued(const char *path, const int32_t *ids, const int32_t *pooled,
                         const float *values, int64_t L);

START_TEST(label_values_refusals)
{
    nnt_layer *m = values_model(1, 0), *back = NULL, *cls = load("llama_cls", 0);
    EXPECT_OK(nnt_model_save_hf(m, test_tmp_path("multi")));
    const char *text = file_text(test_tmp_path("multi"), "config.json");
    ck_assert_msg(strstr(text, "\"problem_type\": \"multi_label_classification\""), "%s", text);
    EXPECT_OK(nnt_model_load_hf(ctx, test_tmp_path("multi"), B, T, NULL, &back));
    nnt_model_config cfg;
    EXPECT_OK(nnt_model_config_of(back, &cfg));
    ck_assert_int_eq(cfg.problem_type, NNT_PROBLEM_MULTI_LABEL);
    EXPECT_OK(nnt_model_config_of(cls, &cfg));   /* single-label: no problem_type written */
    ck_assert_int_eq(cfg.problem_type, NNT_PROBLEM_DEFAULT);
    EXPECT_OK(nnt_model_save_hf(cls, test_tmp_path("single")));
    ck_assert_ptr_null(strstr(file_text(test_tmp_path("single"), "config.json"),
                              "problem_type"));

    const char *fn = "nnt_layer_set_label_values";
    float v[B * 3] = {0}, big[B * 3] = {0}, nan_v[B * 3] = {0};
    big[5] = 1.5f;
    nan_v[2] = NAN;
    EXPECT_FAIL_NAMING(nnt_layer_set_label_values(cls, v, B * 3), NNT_E_INVAL, fn,
                       "no label-values loss");
    EXPECT_FAIL_NAMING(nnt_layer_set_label_values(m, big, B * 3), NNT_E_INVAL, fn,
                       "value 5 is 1.5 (multi-label: in [0, 1])");
    EXPECT_FAIL_NAMING(nnt_layer_set_label_values(m, nan_v, B * 3), NNT_E_INVAL, fn, "value 2");
    EXPECT_FAIL_NAMING(nnt_layer_set_label_values(m, v, 0), NNT_E_INVAL, fn, "n 0");
    nnt_layer *reg = values_model(0, 0);
    EXPECT_OK(nnt_layer_set_label_values(reg, big, B * 3));   /* regression: any finite value */
    nnt_layer_destroy(reg);

    /* a forward with targets: the values' count, or none */
    nnt_st_reader *r = fixture_open_st_path(values_path("multi3.safetensors"));
    int32_t *ids = fixture_read_n(r, "ids", NNT_IO_I32, NULL), targets[B * T];
    EXPECT_OK(nnt_model_pool_targets(ids, B, T, 0, NULL, targets));
    nnt_tensor *x = fixture_ids(ctx, B, T, ids, NULL), *y = fixture_ids(ctx, B, T, targets, NULL);
    EXPECT_OK(nnt_layer_set_targets(m, y));
    EXPECT_FAIL_NAMING(nnt_layer_forward(m, x, NULL), NNT_E_STATE, "nnt_layer_forward",
                       "0 label values for 4 rows of 3 labels");
    EXPECT_OK(nnt_layer_set_label_values(m, v, B * 2));
    EXPECT_FAIL_NAMING(nnt_layer_forward(m, x, NULL), NNT_E_SHAPE, "nnt_layer_forward",
                       "8 label values for 4 rows of 3 labels");
    EXPECT_OK(nnt_layer_set_label_values(m, v, B * 3));
    EXPECT_OK(nnt_layer_forward(m, x, NULL));
    double loss = 0.0;
    EXPECT_OK(nnt_layer_loss(m, &loss));
    ck_assert(isfinite(loss) && loss > 0.0);
    EXPECT_OK(nnt_layer_set_label_values(m, NULL, 0));   /* forgotten */
    EXPECT_FAIL_NAMING(nnt_layer_forward(m, x, NULL), NNT_E_STATE, "nnt_layer_forward",
                       "0 label values");

    /* configurations: problem types out of range, on a language model; config.json's */
    nnt_model_config bad;
    EXPECT_OK(nnt_model_config_of(cls, &bad));
    bad.problem_type = 3;
    nnt_layer *none = NULL;
    EXPECT_FAIL_NAMING(nnt_model_create(ctx, &bad, B, T, NULL, &none), NNT_E_INVAL,
                       "nnt_model_create", "problem_type 3");
    bad.problem_type = NNT_PROBLEM_REGRESSION, bad.num_labels = 0;
    EXPECT_FAIL_NAMING(nnt_model_create(ctx, &bad, B, T, NULL, &none), NNT_E_INVAL,
                       "nnt_model_create", "0 for a language model");
    EXPECT_FAIL_NAMING(nnt_layer_label_values_create(ctx, -1, NNT_PROBLEM_DEFAULT, &none),
                       NNT_E_INVAL, "nnt_layer_label_values_create", "problem 0");
    /* the layer alone: rows of 3 positions, then of 7 (its buffers follow), a loss from the
     * pooled logits */
    nnt_layer *lv = NULL;
    EXPECT_OK(nnt_layer_label_values_create(ctx, -1, NNT_PROBLEM_REGRESSION, &lv));
    float y2[2 * 2] = {1.0f, -1.0f, 0.5f, 2.0f};
    EXPECT_OK(nnt_layer_set_label_values(lv, y2, 4));
    for (int64_t t = 3; t <= 7; t += 4) {
        int64_t zs[3] = {2, t, 2}, ts[2] = {2, t};
        float z[2 * 7 * 2];
        int32_t tg[2 * 7];
        for (int64_t i = 0; i < 2 * t * 2; i++)
            z[i] = 0.25f * (float)i;
        for (int64_t i = 0; i < 2 * t; i++)
            tg[i] = i == 1 || i == t + t - 1 ? 0 : -1;   /* row 0 at 1, row 1 at its last */
        nnt_tensor *zt = NULL, *tt = NULL, *out = NULL;
        EXPECT_OK(nnt_tensor_create(ctx, NNT_FP32, 3, zs, NULL, &zt));
        EXPECT_OK(nnt_tensor_create(ctx, NNT_INT32, 2, ts, NULL, &tt));
        EXPECT_OK(nnt_tensor_copy_from_host(zt, z, sizeof(float) * (size_t)(2 * t * 2)));
        EXPECT_OK(nnt_tensor_copy_from_host(tt, tg, sizeof(int32_t) * (size_t)(2 * t)));
        EXPECT_OK(nnt_layer_set_targets(lv, tt));
        EXPECT_OK(nnt_layer_forward(lv, zt, &out));
        double lsum = 0.0, got_loss = 0.0;
        const float *p0 = z + 2, *p1 = z + (2 * t - 1) * 2;   /* the pooled logits */
        for (int k = 0; k < 2; k++)
            lsum += (p0[k] - y2[k]) * (p0[k] - y2[k]) + (p1[k] - y2[2 + k]) * (p1[k] - y2[2 + k]);
        EXPECT_OK(nnt_layer_loss(lv, &got_loss));
        ck_assert_msg(fabs(got_loss - lsum / 4) < 1e-12, "T %lld: loss %.9g, want %.9g",
                      (long long)t, got_loss, lsum / 4);
        EXPECT_OK(nnt_layer_backward(lv, NULL, NULL));
        nnt_tensor_destroy(zt);
        nnt_tensor_destroy(tt);
    }
    nnt_layer_destroy(lv);
    char *conf = file_text(test_tmp_path("multi"), "config.json");
    char *at = strstr(conf, "multi_label_classification");
    memcpy(at, "multi_label_classifiers", 23);
    test_write_config(test_tmp_path("badtype"), conf);
    EXPECT_FAIL_NAMING(nnt_model_hf_config(ctx, test_tmp_path("badtype"), &cfg),
                       NNT_E_UNSUPPORTED, "problem_type", "multi_label_classifiersion");
    ck_assert_ptr_null(none);

    /* the trainer reads the values from the rows of token files: data without them */
    nnt_token_writer *w = NULL;
    EXPECT_OK(nnt_token_writer_open(NULL, test_tmp_path("ids.bin"), NULL, &w));
    EXPECT_OK(nnt_token_writer_write(w, ids, B * T));
    EXPECT_OK(nnt_token_writer_close(w));
    nnt_data *data = NULL;
    EXPECT_OK(nnt_data_open(test_tmp_path("ids.bin"), NNT_DATA_AUTO, NULL, 64, &data));
    nnt_trainer_options to = NNT_TRAINER_OPTIONS_INIT;
    to.steps = 1, to.batch = B, to.seq = T;
    nnt_optim *opt = adamw(m);
    nnt_trainer *tr = NULL;
    EXPECT_FAIL_NAMING(nnt_trainer_create(m, opt, data, &to, &tr), NNT_E_INVAL,
                       "nnt_trainer_create", "the training data has no loss mask");
    ck_assert_ptr_null(tr);
    nnt_data_close(data);
    int32_t pooled_at[B] = {T - 1, T - 1, T - 1, T - 1};
    write_labelled(test_tmp_path("labelled.bin"), ids, pooled_at, (const int32_t[]){0, 1, 2, 0});
    EXPECT_OK(nnt_data_open(test_tmp_path("labelled.bin"), NNT_DATA_AUTO, NULL, 400, &data));
    to.seq = T + 1;
    EXPECT_FAIL_NAMING(nnt_trainer_create(m, opt, data, &to, &tr), NNT_E_INVAL,
                       "nnt_trainer_create", "the training data carries no values");
    nnt_data_close(data);
    write_valued(test_tmp_path("valued2.bin"), ids, pooled_at, v, 2);   /* 2 values, not 3 */
    EXPECT_OK(nnt_data_open(test_tmp_path("valued2.bin"), NNT_DATA_AUTO, NULL, 400, &data));
    EXPECT_FAIL_NAMING(nnt_trainer_create(m, opt, data, &to, &tr), NNT_E_INVAL,
                       "nnt_trainer_create", "carries another number of values a row");
    nnt_data_close(data);
    write_valued(test_tmp_path("valued3.bin"), ids, pooled_at, v, 3);
    EXPECT_OK(nnt_data_open(test_tmp_path("valued3.bin"), NNT_DATA_AUTO, NULL, 400, &data));
    to.dpo_beta = 0.1;
    EXPECT_FAIL_NAMING(nnt_trainer_create(m, opt, data, &to, &tr), NNT_E_INVAL,
                       "nnt_trainer_create", "not trained on preference pairs");
    to.dpo_beta = 0;
    EXPECT_OK(nnt_trainer_create(m, opt, data, &to, &tr));
    nnt_trainer_destroy(tr);
    tr = NULL;
    ck_assert_ptr_null(tr);
    nnt_data_close(data);
    nnt_optim_destroy(opt);
    nnt_tensor_destroy(x);
    nnt_tensor_destroy(y);
    free(ids);
    nnt_st_close(r);
    nnt_layer_destroy(cls);
    nnt_layer_destroy(back);
    nnt_layer_destroy(m);
}
END_TEST

typedef struct rm_log {
    double loss[STEPS + 1], accuracy[STEPS + 1], margin[STEPS + 1], val_loss;
} rm_log;

static int on_report(const nnt_trainer_report *r, void *user)
{
    rm_log *l = user;
    if (r->event == NNT_TRAINER_STEP && r->step >= 1 && r->step <= STEPS) {
        l->loss[r->step] = r->loss;
        l->accuracy[r->step] = r->dpo_accuracy;
        l->margin[r->step] = r->dpo_margin;
    }
    if (r->event == NNT_TRAINER_VALIDATION)
        l->val_loss = r->loss;
    return 0;
}

/* Loop index: the tiling. nnt_trainer on a reward model: the fixture's pairs written as the
 * rows of a token file (twice: the training pairs, then the same as held-out pairs), 3 steps
 * with reward_center 0.25: TRL's losses, the first step's accuracy and margin from the
 * rewards; B 2 with accum 2 the same steps; the held-out loss the last weights'. */
START_TEST(reward_trainer)
{
    nnt_st_reader *r = fixture_open_st_path(path_of("llama_rm.safetensors"));
    int32_t *ids = fixture_read_n(r, "ids", NNT_IO_I32, NULL);
    float *rewards = fixture_read_n(r, "rewards", NNT_IO_F32, NULL);
    double *want = fixture_read_n(r, "losses", NNT_IO_F64, NULL);
    const char *path = test_tmp_path("pairs.bin");
    nnt_token_writer_options wo = NNT_TOKEN_WRITER_OPTIONS_INIT;
    wo.mask = 1, wo.block = T, wo.pad = 0;
    nnt_token_writer *w = NULL;
    uint8_t counts[B * T];
    for (int i = 0; i < B * T; i++)
        counts[i] = ids[i] != 0;   /* (the mask is not read: the score is pooled) */
    EXPECT_OK(nnt_token_writer_open(NULL, path, &wo, &w));
    for (int k = 0; k < 2; k++)
        EXPECT_OK(nnt_token_writer_write_masked(w, (const int32_t *)ids, counts, B * T));
    EXPECT_OK(nnt_token_writer_close(w));
    double accuracy = 0.0, margin = 0.0;
    for (int p = 0; p < B / 2; p++) {
        accuracy += (rewards[2 * p] > rewards[2 * p + 1]) / (double)(B / 2);
        margin += (rewards[2 * p] - rewards[2 * p + 1]) / (double)(B / 2);
    }
    for (int split = 0; split < 2; split++) {   /* B 4; B 2 with accum 2 */
        split_run sr = split_open("llama_rm", _i, split, T, path);
        int64_t b = sr.b;
        rm_log log;
        memset(&log, 0, sizeof log);
        nnt_trainer_options to = NNT_TRAINER_OPTIONS_INIT;
        to.batch = b, to.seq = T, to.accum = sr.accum, to.steps = STEPS, to.seed = 1;
        to.reward_center = 0.25, to.train_tokens = B * T;
        to.val_start = B * T, to.val_len = B * T, to.val_batches = split ? 2 : 1;
        to.update_in_backward = 0;
        to.callback = on_report, to.user = &log;
        nnt_trainer *tr = NULL;
        EXPECT_OK(nnt_trainer_create(sr.m, sr.opt, sr.data, &to, &tr));
        EXPECT_OK(nnt_trainer_run(tr, STEPS));
        double worst = 0.0, ep = 0.0;
        check_steps(&sr, r, _i, log.loss, want, &worst, &ep);
        ck_assert_msg(fabs(log.accuracy[1] - accuracy) < 1e-12, "accuracy %g, want %g",
                      log.accuracy[1], accuracy);
        ck_assert_msg(fabs(log.margin[1] - margin) < 2e-7,   /* measured 1.7e-8 */
                      "margin %.9g, want %.9g", log.margin[1], margin);
        /* the held-out pairs are the training ones, after the steps */
        ck_assert_msg(log.val_loss > 0 && log.val_loss < want[STEPS - 1], "held-out loss %g "
                      "after the steps (the last step's %g before its update)", log.val_loss,
                      want[STEPS - 1]);
        fprintf(stderr, "reward trainer tiling %d B %lld: steps %.3g params %.3g margin "
                "%.9g/%.9g\n", _i, (long long)b, worst, ep, log.margin[1], margin);
        nnt_trainer_destroy(tr);
        split_close(&sr);
    }
    free(ids), free(rewards), free(want);
    nnt_st_close(r);
}
END_TEST

typedef struct cls_log {
    double loss[STEPS + 1], val_loss, accuracy;
    int64_t examples;
} cls_log;

static int on_cls_report(const nnt_trainer_report *r, void *user)
{
    cls_log *l = user;
    if (r->event == NNT_TRAINER_STEP && r->step >= 1 && r->step <= STEPS)
        l->loss[r->step] = r->loss;
    if (r->event == NNT_TRAINER_VALIDATION)
        l->val_loss = r->loss, l->accuracy = r->accuracy, l->examples = r->examples;
    return 0;
}

/* llama_cls's rows as a classifier trains on them (nnt-tokenize --num-labels): each row's
 * tokens up to its pooled position, then its label (the one target that counts), padded
 * with 0 to rows of T + 1 (row 0 fills T); twice (the rows, then the same held out). */
static void write_labelled(const char *path, const int32_t *ids, const int32_t *pooled,
                           const int32_t *labels)
{
    nnt_token_writer_options wo = NNT_TOKEN_WRITER_OPTIONS_INIT;
    wo.mask = 1, wo.block = T + 1, wo.pad = 0;
    nnt_token_writer *w = NULL;
    EXPECT_OK(nnt_token_writer_open(NULL, path, &wo, &w));
    for (int k = 0; k < 2; k++)
        for (int b = 0; b < B; b++) {
            int32_t row[T + 1];
            uint8_t counts[T + 1] = {0};
            int n = pooled[b] + 1;
            memcpy(row, ids + b * T, (size_t)n * sizeof *row);
            row[n] = labels[b], counts[n] = 1;
            EXPECT_OK(nnt_token_writer_write_example(w, row, counts, (size_t)n + 1));
        }
    EXPECT_OK(nnt_token_writer_close(w));
}

/* Loop index: the tiling. nnt_trainer on a classifier of 3 labels (llama_cls, rows of
 * T + 1): a validation before any step gives transformers' loss and the accuracy of its
 * pooled logits; 3 steps (B 4; B 2 with accum 2) transformers' losses and parameters. */
START_TEST(classifier_trainer)
{
    cls_ref c = cls_ref_read();
    nnt_st_reader *r = c.r;
    const int32_t *labels = c.labels;
    const float *logits = c.logits;
    const double *want_loss = c.loss, *want = c.losses;
    const char *path = test_tmp_path("labelled.bin");
    write_labelled(path, c.ids, c.pooled, labels);
    int hits = 0;   /* transformers' pooled logits' argmax */
    for (int b = 0; b < B; b++) {
        int best = 0;
        for (int k = 1; k < 3; k++)
            best = logits[b * 3 + k] > logits[b * 3 + best] ? k : best;
        hits += best == labels[b];
    }
    ck_assert_int_gt(hits, 0);   /* (the fixture's: 2 of 4, neither none nor all) */
    ck_assert_int_lt(hits, B);
    for (int split = 0; split < 2; split++) {   /* B 4; B 2 with accum 2 */
        split_run sr = split_open("llama_cls", _i, split, T + 1, path);
        int64_t b = sr.b;
        cls_log log;
        memset(&log, 0, sizeof log);
        nnt_trainer_options to = NNT_TRAINER_OPTIONS_INIT;
        to.batch = b, to.seq = T + 1, to.accum = sr.accum, to.steps = STEPS, to.seed = 1;
        to.train_tokens = B * (T + 1), to.val_start = B * (T + 1), to.val_len = B * (T + 1);
        to.val_batches = split ? 2 : 1, to.update_in_backward = 0;
        to.callback = on_cls_report, to.user = &log;
        nnt_trainer *tr = NULL;
        EXPECT_OK(nnt_trainer_create(sr.m, sr.opt, sr.data, &to, &tr));
        double val = 0.0;
        EXPECT_OK(nnt_trainer_validate(tr, &val));
        ck_assert_msg(fabs(val - want_loss[0]) / want_loss[0] < LOSS_TOL, "tiling %d, B %lld: "
                      "held-out loss %.9g, transformers %.9g", _i, (long long)b, val,
                      want_loss[0]);
        ck_assert_msg(log.examples == B && log.accuracy == (double)hits / B, "tiling %d, B "
                      "%lld: accuracy %g of %lld examples, transformers' logits %d of %d", _i,
                      (long long)b, log.accuracy, (long long)log.examples, hits, B);
        EXPECT_OK(nnt_trainer_run(tr, STEPS));
        double worst = 0.0, ep = 0.0;
        check_steps(&sr, r, _i, log.loss, want, &worst, &ep);
        fprintf(stderr, "classifier trainer tiling %d B %lld: steps %.3g params %.3g\n", _i,
                (long long)b, worst, ep);
        nnt_trainer_destroy(tr);
        split_close(&sr);
    }
    cls_ref_free(&c);
}
END_TEST

/* A values case's rows as its trainer reads them (nnt_token_writer_write_example_values):
 * each row's tokens up to its pooled position, then a token 0 (the one target that counts),
 * padded with 0 to rows of T + 1, and the row's L values; twice (the rows, then the same held
 * out). */
static void write_valued(const char *path, const int32_t *ids, const int32_t *pooled,
                         const float *values, int64_t L)
{
    nnt_token_writer_options wo = NNT_TOKEN_WRITER_OPTIONS_INIT;
    wo.mask = 1, wo.block = T + 1, wo.pad = 0, wo.row_values = L;
    nnt_token_writer *w = NULL;
    EXPECT_OK(nnt_token_writer_open(NULL, path, &wo, &w));
    for (int k = 0; k < 2; k++)
        for (int b = 0; b < B; b++) {
            int32_t row[T + 1];
            uint8_t counts[T + 1] = {0};
            int n = pooled[b] + 1;
            memcpy(row, ids + b * T, (size_t)n * sizeof *row);
            row[n] = 0, counts[n] = 1;
            EXPECT_OK(nnt_token_writer_write_example_values(w, row, counts, (size_t)n + 1,
                                                            values + b * L));
        }
    EXPECT_OK(nnt_token_writer_close(w));
}

/* Loop index: case * 3 + tiling. nnt_trainer on a classifier trained on values (the token
 * file's row values): a validation before any step gives transformers' loss; 3 steps (B 4;
 * B 2 with accum 2; shuffled rows: the same rows in another order) its losses and
 * parameters. */
START_TEST(values_trainer)
{
    const int c = _i / 3, ti = _i % 3;
    const int64_t L = VALUE_CASES[c].L;
    cls_ref vr = values_ref_read(c);
    nnt_st_reader *r = vr.r;
    const double *want_loss = vr.loss, *want = vr.losses;
    const int32_t *ids = vr.ids, *pooled = vr.pooled;
    const float *values = vr.values;
    const char *path = test_tmp_path("valued.bin");
    write_valued(path, ids, pooled, values, L);
    nnt_data_info di = NNT_DATA_INFO_INIT;
    for (int split = 0; split < 3; split++) {   /* B 4; B 2 with accum 2; B 4 shuffled */
        nnt_layer *m = values_model(c, ti);
        int64_t b = split == 1 ? 2 : B, accum = split == 1 ? 2 : 1;
        nnt_optim *opt = adamw_accum(m, accum);
        nnt_data *data = NULL;
        EXPECT_OK(nnt_data_open(path, NNT_DATA_AUTO, NULL, 400, &data));
        EXPECT_OK(nnt_data_info_get(data, &di));
        ck_assert_int_eq(di.row_values, L);
        cls_log log;
        memset(&log, 0, sizeof log);
        nnt_trainer_options to = NNT_TRAINER_OPTIONS_INIT;
        to.batch = b, to.seq = T + 1, to.accum = accum, to.steps = STEPS, to.seed = 1;
        to.train_tokens = B * (T + 1), to.val_start = B * (T + 1), to.val_len = B * (T + 1);
        to.val_batches = split == 1 ? 2 : 1, to.update_in_backward = 0, to.shuffle = split == 2;
        to.callback = on_cls_report, to.user = &log;
        nnt_trainer *tr = NULL;
        EXPECT_OK(nnt_trainer_create(m, opt, data, &to, &tr));
        double val = 0.0;
        EXPECT_OK(nnt_trainer_validate(tr, &val));
        ck_assert_msg(fabs(val - want_loss[0]) / want_loss[0] < LOSS_TOL, "%s tiling %d, split "
                      "%d: held-out loss %.9g, transformers %.9g", VALUE_CASES[c].name, ti,
                      split, val, want_loss[0]);
        EXPECT_OK(nnt_trainer_run(tr, STEPS));
        double worst = 0.0;
        for (int st = 1; st <= STEPS; st++)
            worst = fmax(worst, fabs(log.loss[st] - want[st - 1]) / want[st - 1]);
        ck_assert_msg(worst < VALUES_STEP_TOL, "%s tiling %d, split %d: step losses rel %.3g",
                      VALUE_CASES[c].name, ti, split, worst);
        char name[300] = "";
        double ep = fixture_worst_against(m, r, "final", 1, name, sizeof name);
        ck_assert_msg(ep < VALUES_PARAM_TOL, "%s tiling %d, split %d: %s after %d steps rel "
                      "%.3g", VALUE_CASES[c].name, ti, split, name, STEPS, ep);
        fprintf(stderr, "%s trainer tiling %d split %d: steps %.3g params %.3g\n",
                VALUE_CASES[c].name, ti, split, worst, ep);
        nnt_trainer_destroy(tr);
        nnt_data_close(data);
        nnt_optim_destroy(opt);
        nnt_layer_destroy(m);
    }
    cls_ref_free(&vr);
}
END_TEST

/* A classifier's data: labelled (a loss mask), its counted targets below num_labels; DPO
 * refused. */
START_TEST(classifier_trainer_refusals)
{
    nnt_layer *m = load("llama_cls", 0);
    nnt_optim *opt = adamw(m);
    const char *plain = test_tmp_path("plain.bin"), *ids_bin = test_tmp_path("ids.bin");
    int32_t ids[3 * B * T];
    uint8_t counts[3 * B * T];
    for (int i = 0; i < 3 * B * T; i++)   /* the counted targets 3: num_labels, not below */
        ids[i] = i % T == T - 1 ? 3 : 1 + i % 50, counts[i] = i % T == T - 1;
    nnt_token_writer *w = NULL;
    EXPECT_OK(nnt_token_writer_open(NULL, plain, NULL, &w));
    EXPECT_OK(nnt_token_writer_write(w, ids, 3 * B * T));
    EXPECT_OK(nnt_token_writer_close(w));
    nnt_token_writer_options wo = NNT_TOKEN_WRITER_OPTIONS_INIT;
    wo.mask = 1;
    EXPECT_OK(nnt_token_writer_open(NULL, ids_bin, &wo, &w));
    EXPECT_OK(nnt_token_writer_write_masked(w, ids, counts, 3 * B * T));
    EXPECT_OK(nnt_token_writer_close(w));
    nnt_trainer_options to = NNT_TRAINER_OPTIONS_INIT;
    to.batch = B, to.seq = T, to.steps = 1;
    nnt_trainer *tr = NULL;
    nnt_data *data = NULL;
    EXPECT_OK(nnt_data_open(plain, NNT_DATA_AUTO, NULL, 64, &data));
    EXPECT_FAIL_MSG(nnt_trainer_create(m, opt, data, &to, &tr), NNT_E_INVAL,
                    "a classifier of 3 labels trains on labelled examples");
    nnt_data_close(data);
    EXPECT_OK(nnt_data_open(ids_bin, NNT_DATA_AUTO, NULL, 64, &data));
    to.dpo_beta = 0.1;
    EXPECT_FAIL_MSG(nnt_trainer_create(m, opt, data, &to, &tr), NNT_E_INVAL,
                    "not a classifier of 3 labels");
    to.dpo_beta = 0;
    EXPECT_OK(nnt_trainer_create(m, opt, data, &to, &tr));
    EXPECT_FAIL_MSG(nnt_trainer_step(tr), NNT_E_FORMAT, "a target that counts is 3");
    nnt_trainer_destroy(tr);
    nnt_data_close(data);
    nnt_optim_destroy(opt);
    nnt_layer_destroy(m);
}
END_TEST

START_TEST(reward_trainer_refusals)
{
    nnt_layer *m = load("llama_rm", 0);
    nnt_optim *opt = adamw(m);
    nnt_data *data = NULL;
    const char *path = test_tmp_path("rows.bin");
    nnt_token_writer_options wo = NNT_TOKEN_WRITER_OPTIONS_INIT;
    wo.mask = 1, wo.block = T;
    nnt_token_writer *w = NULL;
    int32_t ids[3 * T];
    uint8_t counts[3 * T];
    for (int i = 0; i < 3 * T; i++)
        ids[i] = 1 + i % 50, counts[i] = 1;
    EXPECT_OK(nnt_token_writer_open(NULL, path, &wo, &w));
    EXPECT_OK(nnt_token_writer_write_masked(w, ids, counts, 3 * T));
    EXPECT_OK(nnt_token_writer_close(w));
    EXPECT_OK(nnt_data_open(path, NNT_DATA_AUTO, NULL, 64, &data));
    nnt_trainer_options to = NNT_TRAINER_OPTIONS_INIT;
    to.batch = B, to.seq = T, to.steps = 1;
    nnt_trainer *tr = NULL;
    EXPECT_FAIL_MSG(nnt_trainer_create(m, opt, data, &to, &tr), NNT_E_INVAL,
                    "an even number");   /* 3 rows */
    to.dpo_beta = 0.1;
    EXPECT_FAIL_MSG(nnt_trainer_create(m, opt, data, &to, &tr), NNT_E_INVAL,
                    "not a reward model");
    to.dpo_beta = 0, to.reward_center = -1;
    EXPECT_FAIL_MSG(nnt_trainer_create(m, opt, data, &to, &tr), NNT_E_INVAL, "reward_center");
    nnt_optim_destroy(opt);
    nnt_layer_destroy(m);
    /* a language model takes no reward_center; a reward model without a pad id is refused */
    nnt_model_config cfg;
    EXPECT_OK(nnt_model_hf_config(ctx, path_of("llama_lm"), &cfg));
    EXPECT_OK(nnt_model_create(ctx, &cfg, B, T, NULL, &m));
    opt = adamw(m);
    to.reward_center = 0.5;
    EXPECT_FAIL_MSG(nnt_trainer_create(m, opt, data, &to, &tr), NNT_E_INVAL,
                    "for reward models");
    nnt_optim_destroy(opt);
    nnt_layer_destroy(m);
    cfg.num_labels = 1;
    EXPECT_OK(nnt_model_create(ctx, &cfg, B, T, NULL, &m));
    opt = adamw(m);
    to.reward_center = 0;
    EXPECT_FAIL_MSG(nnt_trainer_create(m, opt, data, &to, &tr), NNT_E_INVAL, "pad id");
    nnt_optim_destroy(opt);
    nnt_layer_destroy(m);
    nnt_data_close(data);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("classifier");
    TCase *tc = tcase_create("classifier");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, pool_rule);
    tcase_add_loop_test(tc, classifier_trainer, 0, 3);
    tcase_add_test(tc, classifier_trainer_refusals);
    tcase_add_loop_test(tc, llama_classifier, 0, 3);
    tcase_add_loop_test(tc, reward_model, 0, 3);
    tcase_add_loop_test(tc, gpt2_classifier, 0, 3);
    tcase_add_test(tc, save_load_round_trip);
    tcase_add_test(tc, classifier_from_language_model);
    tcase_add_test(tc, refusals);
    tcase_add_loop_test(tc, lora_classifier, 0, 6);
    tcase_add_test(tc, lora_classifier_add);
    tcase_add_test(tc, label_names);
    tcase_add_test(tc, source_label_names);
    tcase_add_loop_test(tc, label_values, 0, 9);
    tcase_add_test(tc, label_values_refusals);
    tcase_add_loop_test(tc, values_trainer, 0, 9);
    tcase_add_loop_test(tc, reward_trainer, 0, 3);
    tcase_add_test(tc, reward_trainer_refusals);
    suite_add_tcase(s, tc);
    return run_suite(s);
}
