/* SPDX-License-Identifier: MIT */
/* nnt_optim_update_in_backward: parameters updated during the backward as soon as their
 * gradients are complete give the same losses, parameters and gradient norms, bit for bit,
 * as a separate nnt_optim_step: GPT-2 (a tied head: the table's gradient is complete only
 * after the embedding's backward, the last), Llama with grouped-query attention, q/k norms
 * and some blocks frozen, the same with LoRA adapters, and an MoE model with a dense block;
 * each with two tilings (one with tiles that do not divide the sizes, sequence tiles
 * included), gradient accumulation 2, recompute, AdamW with weight decay and a warmup.
 * The test also checks that the updates really happen in the backward (the parameters
 * change before nnt_optim_step, their gradients are dropped) and the misuse errors. */
#include "testutil.h"

#include <stdint.h>
#include <unistd.h>

enum { B = 2, T = 7, V = 40, STEPS = 3, ACCUM = 2, MAXP = 160 };

enum model_kind { GPT2, LLAMA_FROZEN, LLAMA_LORA, MOE, NKINDS };
static const char *const KIND_NAMES[NKINDS] = {"gpt2", "llama+frozen", "llama+lora", "moe"};

static nnt_model_config config(int kind)
{
    nnt_model_config c = NNT_MODEL_CONFIG_INIT;
    c.vocab = V, c.max_seq = T, c.layers = 3, c.heads = 4, c.channels = 24;
    if (kind == GPT2)
        return c;
    c.family = kind == MOE ? NNT_FAMILY_MOE : NNT_FAMILY_LLAMA;
    c.tied = 0, c.qkv_bias = 0, c.out_bias = 0, c.mlp_bias = 0;
    c.kv_heads = 2, c.hidden = 40, c.qk_norm = 1, c.norm_eps = 1e-5;
    c.rope.theta = 10000;
    if (kind == MOE) {
        c.experts = 4, c.experts_per_token = 2, c.expert_hidden = 12, c.norm_topk_prob = 1;
        c.router_aux_coef = 0.05, c.dense_layers = 1;   /* block 0 dense */
    }
    return c;
}

/* What a run gives: the step losses and norms, every parameter at the end. */
typedef struct result {
    double loss[STEPS], norm[STEPS], lr[STEPS];
    int nparams;
    float *params[MAXP];
    int64_t numel[MAXP];
} result;

static void free_result(result *r)
{
    for (int i = 0; i < r->nparams; i++)
        free(r->params[i]);
}

static void batch(int s, int k, int32_t *tok, int32_t *tgt)
{
    unsigned long long seed = 77 + 10 * (unsigned long long)s + (unsigned long long)k;
    int32_t row[B * T + 1];
    for (int i = 0; i < B * T + 1; i++)
        row[i] = (int32_t)(test_rand(&seed) * V);
    memcpy(tok, row, sizeof(int32_t) * B * T);
    memcpy(tgt, row + 1, sizeof(int32_t) * B * T);
}

static nnt_layer *make_model(nnt_ctx *ctx, int kind, const nnt_tiling *tl)
{
    nnt_model_config c = config(kind);
    nnt_layer *m = NULL;
    EXPECT_OK(nnt_model_create(ctx, &c, B, T, tl, &m));
    EXPECT_OK(nnt_layer_init(m, 11));
    EXPECT_OK(nnt_layer_set_recompute(m, 1));
    int64_t n = 0;
    if (kind == LLAMA_FROZEN || kind == LLAMA_LORA)
        EXPECT_OK(nnt_layer_freeze(m, "model.layers.1.*", 1, &n));
    if (kind == LLAMA_LORA) {
        nnt_lora_options lo = NNT_LORA_OPTIONS_INIT;
        lo.rank = 3, lo.alpha = 5, lo.targets = "q_proj,o_proj,down_proj", lo.freeze_base = 0;
        EXPECT_OK(nnt_model_lora_add(m, &lo));
        /* B starts at zero: give the adapters values, so that they change the numbers */
        int64_t count = 0;
        EXPECT_OK(nnt_layer_num_params(m, &count, NULL));
        unsigned long long seed = 5;
        for (int64_t i = 0; i < count; i++) {
            nnt_param_info p = test_param_at(m, i);
            if (!strstr(p.name, "lora_B"))
                continue;
            int64_t numel = 0;
            EXPECT_OK(nnt_tensor_numel(p.value, &numel));
            float *w = test_random_f32(numel, seed++, -0.1, 0.1);
            EXPECT_OK(nnt_tensor_copy_from_host(p.value, w, (size_t)numel * sizeof *w));
            free(w);
        }
    }
    return m;
}

/* STEPS AdamW steps of ACCUM micro-batches; inbwd: the last backward of each step updates. */
static void train(int kind, const nnt_tiling *tl, int inbwd, result *r)
{
    memset(r, 0, sizeof *r);
    nnt_ctx *ctx = test_ctx();
    nnt_layer *m = make_model(ctx, kind, tl);
    nnt_optim_options oo = NNT_OPTIM_OPTIONS_INIT;
    oo.lr = 4e-3, oo.weight_decay = 0.1, oo.accum_steps = ACCUM, oo.grad_clip = 0;
    oo.warmup_steps = 2;
    nnt_optim *opt = NULL;
    EXPECT_OK(nnt_optim_create(ctx, &oo, &opt));
    EXPECT_OK(nnt_optim_add_layer(opt, m));
    int64_t shape[2] = {B, T};
    nnt_tensor *tok = NULL, *tgt = NULL;
    EXPECT_OK(nnt_tensor_create(ctx, NNT_INT32, 2, shape, NULL, &tok));
    EXPECT_OK(nnt_tensor_create(ctx, NNT_INT32, 2, shape, NULL, &tgt));
    for (int s = 0; s < STEPS; s++) {
        EXPECT_OK(nnt_layer_clear_grad(m));
        for (int k = 0; k < ACCUM; k++) {
            int32_t tk[B * T], tg[B * T];
            double loss = 0;
            batch(s, k, tk, tg);
            EXPECT_OK(nnt_tensor_copy_from_host(tok, tk, sizeof tk));
            EXPECT_OK(nnt_tensor_copy_from_host(tgt, tg, sizeof tg));
            EXPECT_OK(nnt_layer_set_targets(m, tgt));
            EXPECT_OK(nnt_layer_forward(m, tok, NULL));
            if (inbwd && k == ACCUM - 1)
                EXPECT_OK(nnt_optim_update_in_backward(opt));
            EXPECT_OK(nnt_layer_backward(m, NULL, NULL));
            EXPECT_OK(nnt_layer_loss(m, &loss));
            r->loss[s] += loss;
        }
        EXPECT_OK(nnt_optim_step(opt));
        nnt_optim_stats st = {sizeof st, 0, 0, 0};
        EXPECT_OK(nnt_optim_stats_get(opt, &st));
        ck_assert_int_eq(st.step, s + 1);
        r->norm[s] = st.grad_norm, r->lr[s] = st.lr;
    }
    r->nparams = test_param_values(m, MAXP, r->params, r->numel);
    nnt_tensor_destroy(tok);
    nnt_tensor_destroy(tgt);
    nnt_optim_destroy(opt);
    nnt_layer_destroy(m);
    EXPECT_OK(nnt_ctx_destroy(ctx));
}

/* automatic; and sequence 3, channels 10, hidden 16, vocab 16, head_dim whole: tiles that
 * do not divide T 7, C 24, hidden 40 or V 40 */
static const nnt_tiling TILINGS[2] = {
    {sizeof(nnt_tiling), 0, 0, 0, 0, 0, 0, 0},
    {sizeof(nnt_tiling), -1, 3, 10, 16, 16, -1, -1},
};

START_TEST(test_same_as_step)
{
    int kind = _i / 2;
    const nnt_tiling *tl = &TILINGS[_i % 2];
    result sep, in;
    train(kind, tl, 0, &sep);
    train(kind, tl, 1, &in);
    for (int s = 0; s < STEPS; s++) {
        ck_assert_msg(sep.loss[s] == in.loss[s], "%s tiling %d step %d: loss %.17g, in the "
                      "backward %.17g", KIND_NAMES[kind], _i % 2, s, sep.loss[s], in.loss[s]);
        ck_assert_msg(sep.norm[s] == in.norm[s] && sep.norm[s] > 0, "%s step %d: norm %.17g, "
                      "in the backward %.17g", KIND_NAMES[kind], s, sep.norm[s], in.norm[s]);
        ck_assert(sep.lr[s] == in.lr[s]);
    }
    ck_assert(sep.loss[STEPS - 1] != sep.loss[0]);   /* training changed something */
    ck_assert_int_eq(sep.nparams, in.nparams);
    for (int i = 0; i < sep.nparams; i++)
        ck_assert_msg(!memcmp(sep.params[i], in.params[i], (size_t)sep.numel[i] * sizeof(float)),
                      "%s tiling %d: parameter %d differs", KIND_NAMES[kind], _i % 2, i);
    free_result(&sep);
    free_result(&in);
}
END_TEST

/* The updates happen in the backward: before nnt_optim_step every trained parameter has
 * changed and its gradient holds nothing; frozen ones are untouched; the step then only
 * completes (its count and lr). */
START_TEST(test_updates_in_backward)
{
    nnt_ctx *ctx = test_ctx();
    nnt_layer *m = make_model(ctx, LLAMA_FROZEN, &TILINGS[1]);
    nnt_optim_options oo = NNT_OPTIM_OPTIONS_INIT;
    oo.lr = 1e-2, oo.grad_clip = 0;
    nnt_optim *opt = NULL;
    EXPECT_OK(nnt_optim_create(ctx, &oo, &opt));
    EXPECT_OK(nnt_optim_add_layer(opt, m));
    int64_t count = 0, shape[2] = {B, T};
    EXPECT_OK(nnt_layer_num_params(m, &count, NULL));
    ck_assert_int_le(count, MAXP);
    float *before[MAXP];
    for (int i = 0; i < count; i++)
        before[i] = test_to_host(test_param_at(m, i).value, NULL);
    nnt_tensor *tok = NULL, *tgt = NULL;
    EXPECT_OK(nnt_tensor_create(ctx, NNT_INT32, 2, shape, NULL, &tok));
    EXPECT_OK(nnt_tensor_create(ctx, NNT_INT32, 2, shape, NULL, &tgt));
    int32_t tk[B * T], tg[B * T];
    batch(0, 0, tk, tg);
    EXPECT_OK(nnt_tensor_copy_from_host(tok, tk, sizeof tk));
    EXPECT_OK(nnt_tensor_copy_from_host(tgt, tg, sizeof tg));
    EXPECT_OK(nnt_layer_clear_grad(m));
    EXPECT_OK(nnt_layer_set_targets(m, tgt));
    EXPECT_OK(nnt_layer_forward(m, tok, NULL));
    EXPECT_OK(nnt_optim_update_in_backward(opt));
    EXPECT_FAIL_MSG(nnt_optim_update_in_backward(opt), NNT_E_STATE,
                    "nnt_optim_update_in_backward");   /* armed already */
    EXPECT_OK(nnt_layer_backward(m, NULL, NULL));
    int trained = 0, frozen = 0;
    for (int i = 0; i < count; i++) {
        nnt_param_info p = test_param_at(m, i);
        int64_t n = 0;
        float *now = test_to_host(p.value, &n);
        int changed = memcmp(now, before[i], (size_t)n * sizeof(float)) != 0;
        if (p.frozen) {
            ck_assert_msg(!changed, "frozen %s changed", p.name);
            frozen++;
        } else {
            ck_assert_msg(changed, "%s was not updated in the backward", p.name);
            float *g = malloc((size_t)n * sizeof *g);
            EXPECT_RC(nnt_tensor_copy_to_host(p.grad, g, (size_t)n * sizeof *g), NNT_E_STATE);
            free(g);   /* dropped */
            trained++;
        }
        free(now);
        free(before[i]);
    }
    ck_assert(trained > 0 && frozen > 0);
    EXPECT_OK(nnt_optim_step(opt));
    nnt_optim_stats st = {sizeof st, 0, 0, 0};
    EXPECT_OK(nnt_optim_stats_get(opt, &st));
    ck_assert_int_eq(st.step, 1);
    ck_assert(st.lr == 1e-2 && st.grad_norm > 0);
    /* the next backward without clearing the dropped gradients: an error, not garbage */
    EXPECT_OK(nnt_layer_forward(m, tok, NULL));
    EXPECT_FAIL_MSG(nnt_layer_backward(m, NULL, NULL), NNT_E_STATE, "no data");
    nnt_tensor_destroy(tok);
    nnt_tensor_destroy(tgt);
    nnt_optim_destroy(opt);
    nnt_layer_destroy(m);
    EXPECT_OK(nnt_ctx_destroy(ctx));
}
END_TEST

START_TEST(test_misuse)
{
    nnt_ctx *ctx = test_ctx();
    nnt_layer *m = make_model(ctx, GPT2, &TILINGS[0]);
    nnt_optim_options oo = NNT_OPTIM_OPTIONS_INIT;
    nnt_optim *opt = NULL, *other = NULL;
    EXPECT_FAIL_MSG(nnt_optim_update_in_backward(NULL), NNT_E_INVAL,
                    "nnt_optim_update_in_backward");
    oo.grad_clip = 0.5;
    EXPECT_OK(nnt_optim_create(ctx, &oo, &opt));
    EXPECT_OK(nnt_optim_add_layer(opt, m));
    EXPECT_FAIL_MSG(nnt_optim_update_in_backward(opt), NNT_E_STATE, "grad_clip");
    nnt_optim_destroy(opt);
    oo.grad_clip = 0;
    EXPECT_OK(nnt_optim_create(ctx, &oo, &opt));
    EXPECT_FAIL_MSG(nnt_optim_update_in_backward(opt), NNT_E_STATE, "no parameters");
    nnt_param_info p = test_param_at(m, 0);
    EXPECT_OK(nnt_optim_add_param(opt, "w", p.value, p.grad, 1));
    EXPECT_FAIL_MSG(nnt_optim_update_in_backward(opt), NNT_E_STATE, "nnt_optim_add_layer");
    nnt_optim_destroy(opt);
    EXPECT_OK(nnt_optim_create(ctx, &oo, &opt));
    EXPECT_OK(nnt_optim_add_layer(opt, m));
    EXPECT_OK(nnt_optim_create(ctx, &oo, &other));
    EXPECT_OK(nnt_optim_add_layer(other, m));
    EXPECT_OK(nnt_optim_update_in_backward(opt));
    EXPECT_FAIL_MSG(nnt_optim_update_in_backward(other), NNT_E_STATE, "another optimizer");
    nnt_optim_destroy(opt);   /* armed: disarms */
    EXPECT_OK(nnt_optim_update_in_backward(other));
    nnt_optim_destroy(other);
    nnt_layer_destroy(m);
    EXPECT_OK(nnt_ctx_destroy(ctx));
}
END_TEST


/* The trainer (nnt_trainer_run) updates in the backward when grad_clip is 0: the same
 * losses and norms as with update_in_backward 0 (the separate step), and the trained
 * parameters' gradients hold nothing after the run (they were dropped in the backward);
 * update_in_backward 1 is refused with clipping. */
typedef struct trainer_run {
    double loss[STEPS + 1], norm[STEPS + 1];
} trainer_run;

static int on_step(const nnt_trainer_report *r, void *user)
{
    trainer_run *tr = user;
    if (r->event == NNT_TRAINER_STEP && r->step >= 1 && r->step <= STEPS)
        tr->loss[r->step] = r->loss, tr->norm[r->step] = r->grad_norm;
    return 0;
}

static int run_trainer(const char *tokens, int update_in_backward, trainer_run *out)
{
    memset(out, 0, sizeof *out);
    nnt_ctx *ctx = test_ctx();
    nnt_layer *m = make_model(ctx, LLAMA_FROZEN, &TILINGS[1]);
    nnt_optim_options oo = NNT_OPTIM_OPTIONS_INIT;
    oo.lr = 4e-3, oo.weight_decay = 0.1, oo.accum_steps = ACCUM, oo.grad_clip = 0;
    nnt_optim *opt = NULL;
    nnt_data *data = NULL;
    nnt_trainer *tr = NULL;
    EXPECT_OK(nnt_optim_create(ctx, &oo, &opt));
    EXPECT_OK(nnt_optim_add_layer(opt, m));
    EXPECT_OK(nnt_data_open(tokens, NNT_DATA_LLMC, NULL, V, &data));
    nnt_trainer_options to = NNT_TRAINER_OPTIONS_INIT;
    to.batch = B, to.seq = T, to.tile_seq = 3, to.accum = ACCUM, to.steps = STEPS;
    to.callback = on_step, to.user = out, to.update_in_backward = update_in_backward;
    EXPECT_OK(nnt_trainer_create(m, opt, data, &to, &tr));
    EXPECT_OK(nnt_trainer_run(tr, 0));
    /* the last trained parameter's gradient: dropped, or still there */
    int64_t count = 0;
    EXPECT_OK(nnt_layer_num_params(m, &count, NULL));
    nnt_param_info p = test_param_at(m, count - 1);
    int64_t n = 0;
    EXPECT_OK(nnt_tensor_numel(p.grad, &n));
    float *g = malloc((size_t)n * sizeof *g);
    int rc = nnt_tensor_copy_to_host(p.grad, g, (size_t)n * sizeof *g);
    free(g);
    nnt_trainer_destroy(tr);
    nnt_data_close(data);
    nnt_optim_destroy(opt);
    nnt_layer_destroy(m);
    EXPECT_OK(nnt_ctx_destroy(ctx));
    return rc;
}

START_TEST(test_trainer)
{
    char dir[] = "/tmp/test_optim_backward-XXXXXX", path[64];
    ck_assert_ptr_nonnull(mkdtemp(dir));
    snprintf(path, sizeof path, "%s/tokens.bin", dir);
    FILE *f = fopen(path, "wb");   /* llm.c tokens: 256 int32 header, uint16 ids */
    ck_assert_ptr_nonnull(f);
    int32_t header[256] = {20240520, 1, 300};
    fwrite(header, sizeof header, 1, f);
    unsigned long long seed = 9;
    for (int i = 0; i < 300; i++) {
        uint16_t id = (uint16_t)(test_rand(&seed) * V);
        fwrite(&id, sizeof id, 1, f);
    }
    ck_assert_int_eq(fclose(f), 0);
    trainer_run sep, in;
    int rc_sep = run_trainer(path, 0, &sep);   /* update_in_backward 0: the separate step */
    int rc_in = run_trainer(path, -1, &in);    /* the default: in the backward, no clipping */
    ck_assert_int_eq(rc_sep, NNT_OK);        /* the separate step leaves the gradients */
    ck_assert_int_eq(rc_in, NNT_E_STATE);    /* updated in the backward: dropped */
    for (int s = 1; s <= STEPS; s++) {
        ck_assert_msg(sep.loss[s] == in.loss[s] && sep.loss[s] > 0, "trainer step %d: loss "
                      "%.17g, in the backward %.17g", s, sep.loss[s], in.loss[s]);
        ck_assert(sep.norm[s] == in.norm[s] && sep.norm[s] > 0);
    }
    trainer_run on;   /* update_in_backward 1: the same as the default here */
    ck_assert_int_eq(run_trainer(path, 1, &on), NNT_E_STATE);
    ck_assert(memcmp(on.loss, in.loss, sizeof on.loss) == 0);
    /* 1 with a clipping optimizer, or a value out of range: refused at creation */
    nnt_ctx *ctx = test_ctx();
    nnt_layer *m = make_model(ctx, LLAMA_FROZEN, &TILINGS[1]);
    nnt_optim_options oo = NNT_OPTIM_OPTIONS_INIT;
    oo.grad_clip = 1.0;
    nnt_optim *opt = NULL;
    nnt_data *data = NULL;
    nnt_trainer *tr = NULL;
    EXPECT_OK(nnt_optim_create(ctx, &oo, &opt));
    EXPECT_OK(nnt_optim_add_layer(opt, m));
    EXPECT_OK(nnt_data_open(path, NNT_DATA_LLMC, NULL, V, &data));
    nnt_trainer_options to = NNT_TRAINER_OPTIONS_INIT;
    to.batch = B, to.seq = T, to.steps = 1, to.update_in_backward = 1;
    EXPECT_FAIL_MSG(nnt_trainer_create(m, opt, data, &to, &tr), NNT_E_STATE, "grad_clip");
    to.update_in_backward = 2;
    EXPECT_FAIL_MSG(nnt_trainer_create(m, opt, data, &to, &tr), NNT_E_INVAL, "update_in_backward");
    nnt_data_close(data);
    nnt_optim_destroy(opt);
    nnt_layer_destroy(m);
    EXPECT_OK(nnt_ctx_destroy(ctx));
    remove(path);
    rmdir(dir);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("optim_backward");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 300);
    tcase_add_loop_test(tc, test_same_as_step, 0, 2 * NKINDS);
    tcase_add_test(tc, test_updates_in_backward);
    tcase_add_test(tc, test_misuse);
    tcase_add_test(tc, test_trainer);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return run_suite(suite());
}
