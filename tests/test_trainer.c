/* SPDX-License-Identifier: MIT */
/* nnt_trainer (the training loop of lib/train) against a loop written here with the layer
 * and optimizer calls: accumulated steps, the schedule's lr and the gradient norm in the
 * step reports, validation as the mean over its windows, save + resume in order and
 * shuffled, the stop request, misuse, the run's log (train.csv, val.csv and loss.svg
 * continued across a resume as the uninterrupted run writes them), the peak measured at
 * creation. A tiny GPT-2 on an llm.c token file of random ids.
 * The trainer runs the same tasks in the same order as the loop here: losses, norms and
 * learning rates are compared bit for bit (measured: identical). */
#include "testutil.h"

#include <unistd.h>

#define B 2
#define T 8
#define V 32
#define NTOK 400           /* tokens in the file */
#define HELD 60            /* the last HELD held out */
#define STEPS 6
#define MAXSTEPS 16

static nnt_ctx *ctx;
static char dir[64], path_data[96], path_ckpt[96], path_best[96];

static void setup(void)
{
    ctx = test_ctx();
    snprintf(dir, sizeof dir, "/tmp/test_trainer-XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(dir));
    snprintf(path_data, sizeof path_data, "%s/tokens.bin", dir);
    snprintf(path_ckpt, sizeof path_ckpt, "%s/ckpt.safetensors", dir);
    snprintf(path_best, sizeof path_best, "%s/best.safetensors", dir);
    /* llm.c token shard: 256 int32 header (magic 20240520, version 1, count), uint16 ids */
    FILE *f = fopen(path_data, "wb");
    ck_assert_ptr_nonnull(f);
    int32_t header[256] = {20240520, 1, NTOK};
    fwrite(header, sizeof header, 1, f);
    uint64_t x = 12345;
    for (int i = 0; i < NTOK; i++) {
        x = x * 6364136223846793005ULL + 1442695040888963407ULL;
        uint16_t id = (uint16_t)((x >> 33) % V);
        fwrite(&id, sizeof id, 1, f);
    }
    ck_assert_int_eq(fclose(f), 0);
}

static void teardown(void)
{
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    ck_assert_int_eq(system(cmd), 0);
    EXPECT_OK(nnt_ctx_destroy(ctx));
}

/* A model, its optimizer (AdamW, warmup 2 then cosine to 1e-4 at STEPS, clipping, accum)
 * and the data. */
typedef struct run {
    nnt_layer *model;
    nnt_optim *opt;
    nnt_data *data;
    nnt_trainer *tr;
    nnt_trainer_report rep[MAXSTEPS + 1];   /* step reports by step */
    double val[MAXSTEPS + 1];                /* validation losses by step */
    int nval, stop_at, best_saves;
    int save_at, ckpt_steps[MAXSTEPS + 1], nckpt;   /* nnt_trainer_request_save at step */
} run;

static nnt_optim_options optim_options(int64_t accum)
{
    nnt_optim_options oo = NNT_OPTIM_OPTIONS_INIT;
    oo.lr = 3e-3, oo.schedule = NNT_SCHEDULE_COSINE, oo.warmup_steps = 2;
    oo.total_steps = STEPS, oo.min_lr = 1e-4, oo.grad_clip = 1.0, oo.weight_decay = 0.1;
    oo.accum_steps = accum;
    return oo;
}

static void open_run(run *r, int64_t accum)
{
    memset(r, 0, sizeof *r);
    nnt_model_config c = NNT_MODEL_CONFIG_INIT;
    c.layers = 1, c.channels = 16, c.heads = 2, c.max_seq = T, c.vocab = V;
    EXPECT_OK(nnt_model_create(ctx, &c, B, T, NULL, &r->model));
    EXPECT_OK(nnt_layer_init(r->model, 7));
    nnt_optim_options oo = optim_options(accum);
    EXPECT_OK(nnt_optim_create(ctx, &oo, &r->opt));
    EXPECT_OK(nnt_optim_add_layer(r->opt, r->model));
    EXPECT_OK(nnt_data_open(path_data, NNT_DATA_LLMC, NULL, V, &r->data));
}

static void close_run(run *r)
{
    nnt_trainer_destroy(r->tr);
    nnt_optim_destroy(r->opt);
    nnt_layer_destroy(r->model);
    nnt_data_close(r->data);
}

static int on_report(const nnt_trainer_report *rep, void *user)
{
    run *r = user;
    ck_assert_uint_eq(rep->size, sizeof *rep);
    ck_assert(rep->step >= 0 && rep->step <= MAXSTEPS);
    if (rep->event == NNT_TRAINER_VALIDATION) {
        r->val[rep->step] = rep->loss;
        r->nval++;
        r->best_saves += rep->saved_best;
        return 0;
    }
    if (rep->event == NNT_TRAINER_CHECKPOINT) {
        r->ckpt_steps[r->nckpt++] = (int)rep->step;
        return 0;
    }
    ck_assert_int_eq(rep->event, NNT_TRAINER_STEP);
    r->rep[rep->step] = *rep;
    if (r->stop_at && rep->step == r->stop_at)
        EXPECT_OK(nnt_trainer_request_stop(r->tr));   /* as a signal handler would */
    if (r->save_at && rep->step == r->save_at)
        EXPECT_OK(nnt_trainer_request_save(r->tr));   /* as a SIGUSR1 handler would */
    return 0;
}

static nnt_trainer_options trainer_options(run *r, int64_t accum, int shuffle)
{
    nnt_trainer_options to = NNT_TRAINER_OPTIONS_INIT;
    to.batch = B, to.seq = T, to.accum = accum, to.steps = STEPS, to.seed = 3;
    to.shuffle = shuffle, to.train_tokens = NTOK - HELD;
    to.val_start = NTOK - HELD, to.val_len = HELD, to.val_batches = 2, to.val_every = 0;
    to.callback = on_report, to.user = r;
    return to;
}

/* The window of B*T + 1 tokens at pos (wrapping in [0, n)) into tokens and targets. */
static void load(nnt_data *data, nnt_tensor *tokens, nnt_tensor *targets, int64_t start,
                 int64_t n, int64_t pos)
{
    int32_t w[B * T + 1];
    for (int64_t i = 0; i < B * T + 1; i++)
        EXPECT_OK(nnt_data_read(data, start + (pos + i) % n, &w[i], 1));
    EXPECT_OK(nnt_tensor_copy_from_host(tokens, w, sizeof(int32_t) * B * T));
    EXPECT_OK(nnt_tensor_copy_from_host(targets, w + 1, sizeof(int32_t) * B * T));
}

static void batch_tensors(nnt_tensor **tokens, nnt_tensor **targets)
{
    int64_t shape[2] = {B, T};
    nnt_model_config c = NNT_MODEL_CONFIG_INIT;
    c.layers = 1, c.channels = 16, c.heads = 2, c.max_seq = T, c.vocab = V;
    nnt_tiling tl;
    EXPECT_OK(nnt_model_tiling(ctx, &c, B, T, NULL, &tl));
    int64_t tile[2] = {tl.batch, tl.seq};
    EXPECT_OK(nnt_tensor_create(ctx, NNT_INT32, 2, shape, tile, tokens));
    EXPECT_OK(nnt_tensor_create(ctx, NNT_INT32, 2, shape, tile, targets));
}

/* The schedule, computed here: linear warmup over 2 steps, then cosine to min_lr. */
static double schedule(int64_t s)
{
    const double lr = 3e-3, min_lr = 1e-4, pi = 3.14159265358979323846;
    if (s <= 2)
        return lr * (double)s / 2.0;
    return min_lr + 0.5 * (lr - min_lr) * (1.0 + cos(pi * (double)(s - 2) / (STEPS - 2)));
}

/* The MFU's FLOPs a token: 6 N + 12 L T NH hd with N the parameters products read, so
 * without a lookup table: GPT-2's position table (its token table is the tied head's), an
 * untied Llama's token table (its head has one of its own); _i: GPT-2, untied Llama */
START_TEST(test_flops_per_token)
{
    run a;
    memset(&a, 0, sizeof a);
    nnt_model_config c = NNT_MODEL_CONFIG_INIT;
    if (_i) {
        EXPECT_OK(nnt_model_preset("llama-tiny", &c));   /* L 2, C 64, NH 4, NKV 2, V 256 */
        c.tied = 0, c.max_seq = T, c.vocab = V;
    } else
        c.layers = 1, c.channels = 16, c.heads = 2, c.max_seq = T, c.vocab = V;
    EXPECT_OK(nnt_model_create(ctx, &c, B, T, NULL, &a.model));
    nnt_optim_options oo = optim_options(1);
    EXPECT_OK(nnt_optim_create(ctx, &oo, &a.opt));
    EXPECT_OK(nnt_optim_add_layer(a.opt, a.model));
    EXPECT_OK(nnt_data_open(path_data, NNT_DATA_LLMC, NULL, V, &a.data));
    nnt_trainer_options to = trainer_options(&a, 1, 0);
    to.peak_flops = 1e9;
    EXPECT_OK(nnt_trainer_create(a.model, a.opt, a.data, &to, &a.tr));
    nnt_trainer_info info = NNT_TRAINER_INFO_INIT;
    EXPECT_OK(nnt_trainer_info_get(a.tr, &info));
    int64_t all = 0;
    EXPECT_OK(nnt_layer_num_params(a.model, NULL, &all));
    int64_t hd = c.head_dim ? c.head_dim : c.channels / c.heads;
    /* the lookups: GPT-2's positions (maxT, C); the untied Llama's tokens (V, C) */
    int64_t lookup = _i ? c.vocab * c.channels : c.max_seq * c.channels;
    double want = 6.0 * (double)(all - lookup) + 12.0 * (double)(c.layers * T * c.heads * hd);
    ck_assert_msg(info.flops_per_token == want, "flops per token %.1f, want %.1f",
                  info.flops_per_token, want);
    close_run(&a);
}
END_TEST

/* Accumulated steps (accum 1 and 3) against the loop here: losses, gradient norms, lr. */
START_TEST(test_matches_manual_loop)
{
    int64_t accum = _i ? 3 : 1;
    run a, m;
    open_run(&a, accum);
    nnt_trainer_options to = trainer_options(&a, accum, 0);
    to.peak_flops = 1e9;
    EXPECT_OK(nnt_trainer_create(a.model, a.opt, a.data, &to, &a.tr));
    EXPECT_OK(nnt_trainer_run(a.tr, 0));
    open_run(&m, accum);
    nnt_tensor *tokens, *targets;
    batch_tensors(&tokens, &targets);
    int64_t pos = 0, n = NTOK - HELD;
    nnt_trainer_info info = NNT_TRAINER_INFO_INIT;
    EXPECT_OK(nnt_trainer_info_get(a.tr, &info));
    ck_assert_int_eq(info.step, STEPS);
    for (int64_t s = 1; s <= STEPS; s++) {
        double sum = 0;
        EXPECT_OK(nnt_layer_clear_grad(m.model));
        for (int64_t k = 0; k < accum; k++) {
            double loss;
            load(m.data, tokens, targets, 0, n, pos);
            pos = (pos + B * T) % n;
            EXPECT_OK(nnt_layer_set_targets(m.model, targets));
            EXPECT_OK(nnt_layer_forward(m.model, tokens, NULL));
            EXPECT_OK(nnt_layer_backward(m.model, NULL, NULL));
            EXPECT_OK(nnt_layer_loss(m.model, &loss));
            sum += loss;
        }
        EXPECT_OK(nnt_optim_step(m.opt));
        EXPECT_OK(nnt_ctx_wait(ctx));
        nnt_optim_stats st = {sizeof st, 0, 0, 0};
        EXPECT_OK(nnt_optim_stats_get(m.opt, &st));
        const nnt_trainer_report *r = &a.rep[s];
        ck_assert_int_eq(r->step, s);
        ck_assert_int_eq(r->event, NNT_TRAINER_STEP);
        ck_assert_int_eq(r->steps, STEPS);
        ck_assert_int_eq(r->tokens, B * T * accum);
        ck_assert_msg(r->loss == sum / (double)accum, "step %lld: loss %.17g, loop %.17g",
                      (long long)s, r->loss, sum / (double)accum);
        ck_assert_msg(r->grad_norm == st.grad_norm && r->grad_norm > 0, "step %lld: norm "
                      "%.17g, loop %.17g", (long long)s, r->grad_norm, st.grad_norm);
        /* the lr: the optimizer's own bit for bit; the closed form here within a few double
         * ulps (measured 0 .. 4.3e-19 absolute, on lr <= 3e-3: LR_TOL 1e-17) */
        ck_assert(r->lr == st.lr);
        EXPECT_TOL(fabs(r->lr - schedule(s)), 1e-17, "step %lld: lr", (long long)s);
        ck_assert(r->ms > 0 && r->tokens_per_s > 0);
        /* computed as here: identical (measured 0) */
        ck_assert(r->tokens_per_s == (double)(B * T * accum) / (r->ms / 1e3));
        ck_assert(r->mfu == info.flops_per_token * r->tokens_per_s / 1e9);
        ck_assert_int_eq(r->validates, s == STEPS);
        ck_assert(r->mem_peak_bytes >= r->mem_used_bytes && r->mem_used_bytes >= 0);
    }
    ck_assert_int_eq(a.nval, 1);   /* after the last step only (val_every 0) */
    ck_assert_uint_eq(info.data_pos, (uint64_t)(STEPS * accum * B * T) % (uint64_t)n);
    nnt_tensor_destroy(tokens);
    nnt_tensor_destroy(targets);
    close_run(&a);
    close_run(&m);
}
END_TEST

/* Validation: the mean of the held-out windows' losses; the best one saved. */
START_TEST(test_validation_mean)
{
    run a;
    open_run(&a, 1);
    nnt_trainer_options to = trainer_options(&a, 1, 0);
    to.val_every = 2, to.best_checkpoint = path_best;
    EXPECT_OK(nnt_trainer_create(a.model, a.opt, a.data, &to, &a.tr));
    EXPECT_OK(nnt_trainer_run(a.tr, 4));   /* validations after steps 2 and 4 */
    ck_assert_int_eq(a.nval, 2);
    ck_assert_int_ge(a.best_saves, 1);
    ck_assert(access(path_best, R_OK) == 0);
    double loss = 0, sum = 0;
    EXPECT_OK(nnt_trainer_validate(a.tr, &loss));
    ck_assert(a.val[4] == loss);   /* the weights did not change since */
    nnt_tensor *tokens, *targets;
    batch_tensors(&tokens, &targets);
    for (int k = 0; k < 2; k++) {
        double l;
        load(a.data, tokens, targets, NTOK - HELD, HELD, (int64_t)k * B * T);
        EXPECT_OK(nnt_layer_set_targets(a.model, targets));
        EXPECT_OK(nnt_layer_forward(a.model, tokens, NULL));
        EXPECT_OK(nnt_layer_loss(a.model, &l));
        sum += l;
    }
    ck_assert_msg(loss == sum / 2, "validation %.17g, windows' mean %.17g", loss, sum / 2);
    nnt_trainer_info info = NNT_TRAINER_INFO_INIT;
    EXPECT_OK(nnt_trainer_info_get(a.tr, &info));
    ck_assert(info.best_val_loss == (a.val[2] < a.val[4] ? a.val[2] : a.val[4]));
    nnt_tensor_destroy(tokens);
    nnt_tensor_destroy(targets);
    close_run(&a);
}
END_TEST

/* Save after 3 steps, resume in a new model and optimizer: steps 4..6 bit for bit (in order
 * and shuffled). */
START_TEST(test_resume_bit_exact)
{
    int shuffle = _i;
    run a, b, c;
    open_run(&a, 2);
    nnt_trainer_options to = trainer_options(&a, 2, shuffle);
    EXPECT_OK(nnt_trainer_create(a.model, a.opt, a.data, &to, &a.tr));
    EXPECT_OK(nnt_trainer_run(a.tr, 0));
    open_run(&b, 2);
    to = trainer_options(&b, 2, shuffle);
    to.checkpoint = path_ckpt;
    EXPECT_OK(nnt_trainer_create(b.model, b.opt, b.data, &to, &b.tr));
    EXPECT_OK(nnt_trainer_run(b.tr, 3));
    EXPECT_OK(nnt_trainer_save(b.tr, NULL));
    /* the options string it records, read back member by member */
    nnt_train_state st = NNT_TRAIN_STATE_INIT;
    nnt_model_config cfg = NNT_MODEL_CONFIG_INIT;
    char v[64], want[64];
    int found = 0;
    EXPECT_OK(nnt_train_state_info(NULL, path_ckpt, &st));
    EXPECT_OK(nnt_model_config_of(b.model, &cfg));
    EXPECT_OK(nnt_options_get(st.options, "layers", v, sizeof v, &found));   /* in "model" */
    snprintf(want, sizeof want, "%lld", (long long)cfg.layers);
    ck_assert(found && !strcmp(v, want));
    EXPECT_OK(nnt_options_get(st.options, "step", v, sizeof v, &found));
    ck_assert(found && !strcmp(v, "3"));
    EXPECT_OK(nnt_options_get(st.options, "shuffle", v, sizeof v, &found));
    ck_assert(found && atoi(v) == shuffle);
    nnt_train_state_clear(&st);
    open_run(&c, 2);
    to = trainer_options(&c, 2, shuffle);
    EXPECT_OK(nnt_trainer_create(c.model, c.opt, c.data, &to, &c.tr));
    nnt_layer_init(c.model, 99);   /* other weights: the resume must bring them */
    EXPECT_OK(nnt_trainer_resume(c.tr, path_ckpt));
    nnt_trainer_info ib = NNT_TRAINER_INFO_INIT, ic = NNT_TRAINER_INFO_INIT;
    EXPECT_OK(nnt_trainer_info_get(b.tr, &ib));
    EXPECT_OK(nnt_trainer_info_get(c.tr, &ic));
    ck_assert_int_eq(ic.step, 3);
    ck_assert_uint_eq(ic.data_pos, ib.data_pos);
    ck_assert(!memcmp(ic.rng, ib.rng, sizeof ic.rng));
    EXPECT_OK(nnt_trainer_run(c.tr, 0));
    for (int s = 1; s <= STEPS; s++) {
        const nnt_trainer_report *want = &a.rep[s], *got = s <= 3 ? &b.rep[s] : &c.rep[s];
        ck_assert_int_eq(got->step, s);
        ck_assert_msg(got->loss == want->loss && got->grad_norm == want->grad_norm &&
                      got->lr == want->lr, "shuffle %d step %d: loss %.17g norm %.17g, "
                      "uninterrupted %.17g %.17g", shuffle, s, got->loss, got->grad_norm,
                      want->loss, want->grad_norm);
    }
    ck_assert(c.val[STEPS] == a.val[STEPS]);
    close_run(&a);
    close_run(&b);
    close_run(&c);
}
END_TEST

/* nnt_options_get: members at the top and in nested objects, strings decoded, numbers and
 * literals as written, absent members, a value too long, malformed text. */
START_TEST(test_options_get)
{
    const char *s = "{\"program\": \"nnt-train\", \"model\": {\"vocab\": 256, \"tied\": true}, "
                    "\"lr\": 0.10000000000000001, \"path\": \"/a \\\"b\\\"\\\\c\", "
                    "\"list\": [1, {\"x\": 2}], \"obj\": {\"k\": \"v\"}, \"x\": 3}";
    char v[64];
    int found = -1;
    EXPECT_OK(nnt_options_get(s, "program", v, sizeof v, &found));
    ck_assert(found == 1 && !strcmp(v, "nnt-train"));
    EXPECT_OK(nnt_options_get(s, "vocab", v, sizeof v, &found));
    ck_assert(found == 1 && !strcmp(v, "256"));
    EXPECT_OK(nnt_options_get(s, "tied", v, sizeof v, &found));
    ck_assert(found == 1 && !strcmp(v, "true"));
    EXPECT_OK(nnt_options_get(s, "lr", v, sizeof v, &found));
    ck_assert(found == 1 && !strcmp(v, "0.10000000000000001"));
    EXPECT_OK(nnt_options_get(s, "path", v, sizeof v, &found));
    ck_assert_str_eq(v, "/a \"b\"\\c");
    EXPECT_OK(nnt_options_get(s, "obj", v, sizeof v, &found));
    ck_assert_str_eq(v, "{\"k\": \"v\"}");
    /* inside an array: not a member of an object it holds; the top-level x is found */
    EXPECT_OK(nnt_options_get(s, "x", v, sizeof v, &found));
    ck_assert(found == 1 && !strcmp(v, "3"));
    EXPECT_OK(nnt_options_get(s, "missing", v, sizeof v, &found));
    ck_assert(found == 0 && v[0] == '\0');
    ck_assert_int_eq(nnt_options_get(s, "program", v, 9, &found), NNT_E_INVAL);
    ck_assert_int_eq(nnt_options_get("{\"a\": 1, \"b\" 2}", "b", v, sizeof v, &found),
                     NNT_E_FORMAT);
    ck_assert(strstr(nnt_ctx_last_error(NULL), "nnt_options_get"));
    ck_assert_int_eq(nnt_options_get(NULL, "a", v, sizeof v, &found), NNT_E_INVAL);
}
END_TEST

/* A stop request during step 2 ends the run after it, without its validation. */
START_TEST(test_stop_request)
{
    run a;
    open_run(&a, 1);
    nnt_trainer_options to = trainer_options(&a, 1, 1);
    to.val_every = 1;
    EXPECT_OK(nnt_trainer_create(a.model, a.opt, a.data, &to, &a.tr));
    a.stop_at = 2;
    EXPECT_OK(nnt_trainer_run(a.tr, 0));
    nnt_trainer_info info = NNT_TRAINER_INFO_INIT;
    EXPECT_OK(nnt_trainer_info_get(a.tr, &info));
    ck_assert_int_eq(info.step, 2);
    ck_assert_int_eq(info.stopped, 1);
    ck_assert_int_eq(a.nval, 1);   /* after step 1 only */
    ck_assert_uint_eq(info.data_pos, 2 * B);   /* shuffled: rows read */
    close_run(&a);
}
END_TEST

/* A save request during step 2 writes the checkpoint of step 2 after it and the run goes on
 * to the end (checkpoints of save_every 4 beside it); the file resumes the run bit for bit. */
START_TEST(test_save_request)
{
    run a, c;
    open_run(&a, 1);
    nnt_trainer_options to = trainer_options(&a, 1, 0);
    EXPECT_OK(nnt_trainer_create(a.model, a.opt, a.data, &to, &a.tr));
    ck_assert_int_eq(nnt_trainer_request_save(a.tr), NNT_E_STATE);   /* no checkpoint path */
    ck_assert_int_eq(nnt_trainer_request_save(NULL), NNT_E_INVAL);
    nnt_trainer_destroy(a.tr);
    to.checkpoint = path_ckpt, to.save_every = 4;
    EXPECT_OK(nnt_trainer_create(a.model, a.opt, a.data, &to, &a.tr));
    a.save_at = 2;
    EXPECT_OK(nnt_trainer_run(a.tr, 3));   /* stops after step 3: the file holds step 2 */
    ck_assert_int_eq(a.nckpt, 1);
    ck_assert_int_eq(a.ckpt_steps[0], 2);
    nnt_trainer_info info = NNT_TRAINER_INFO_INIT;
    EXPECT_OK(nnt_trainer_info_get(a.tr, &info));
    ck_assert_int_eq(info.step, 3);
    ck_assert_int_eq(info.stopped, 0);
    open_run(&c, 1);
    to = trainer_options(&c, 1, 0);
    EXPECT_OK(nnt_trainer_create(c.model, c.opt, c.data, &to, &c.tr));
    EXPECT_OK(nnt_trainer_resume(c.tr, path_ckpt));
    EXPECT_OK(nnt_trainer_info_get(c.tr, &info));
    ck_assert_int_eq(info.step, 2);
    EXPECT_OK(nnt_trainer_run(c.tr, 0));
    EXPECT_OK(nnt_trainer_run(a.tr, 0));   /* a goes on: step 4's checkpoint, no other */
    ck_assert_int_eq(a.nckpt, 2);
    ck_assert_int_eq(a.ckpt_steps[1], 4);
    for (int s = 3; s <= STEPS; s++)
        ck_assert_msg(c.rep[s].loss == a.rep[s].loss, "step %d: resumed %.17g, run %.17g", s,
                      c.rep[s].loss, a.rep[s].loss);
    close_run(&a);
    close_run(&c);
}
END_TEST

START_TEST(test_misuse)
{
    run a;
    open_run(&a, 1);
    nnt_trainer *tr = NULL;
    nnt_trainer_options to = trainer_options(&a, 1, 0);
    EXPECT_FAIL_MSG(nnt_trainer_create(a.model, a.opt, a.data, &to, NULL), NNT_E_INVAL,
                    "nnt_trainer_create");
    EXPECT_FAIL_MSG(nnt_trainer_create(NULL, a.opt, a.data, &to, &tr), NNT_E_INVAL,
                    "nnt_trainer_create");
    ck_assert_ptr_null(tr);
    EXPECT_FAIL_MSG(nnt_trainer_create(a.model, a.opt, NULL, &to, &tr), NNT_E_INVAL,
                    "nnt_trainer_create");
    to.val_batches = 100;   /* more than the held-out tokens */
    EXPECT_FAIL_MSG(nnt_trainer_create(a.model, a.opt, a.data, &to, &tr), NNT_E_INVAL,
                    "nnt_trainer_create");
    to = trainer_options(&a, 1, 0);
    to.accum = 2;   /* the optimizer sums 1 micro-batch a step */
    EXPECT_FAIL_MSG(nnt_trainer_create(a.model, a.opt, a.data, &to, &tr), NNT_E_INVAL,
                    "accum 2 micro-batches a step, but the optimizer divides the summed "
                    "gradients by its accum_steps 1");
    ck_assert_ptr_null(tr);
    to = trainer_options(&a, 1, 0);
    to.size = 8;
    EXPECT_FAIL_MSG(nnt_trainer_create(a.model, a.opt, a.data, &to, &tr), NNT_E_INVAL,
                    "nnt_trainer_create");
    to = trainer_options(&a, 1, 0);
    EXPECT_OK(nnt_trainer_create(a.model, a.opt, a.data, &to, &tr));
    EXPECT_FAIL_MSG(nnt_trainer_save(tr, NULL), NNT_E_INVAL, "nnt_trainer_save");
    EXPECT_RC(nnt_trainer_resume(tr, path_ckpt), NNT_E_IO);
    nnt_trainer_info info = NNT_TRAINER_INFO_INIT;
    info.size = 4;
    EXPECT_FAIL_MSG(nnt_trainer_info_get(tr, &info), NNT_E_INVAL, "nnt_trainer_info_get");
    EXPECT_FAIL_MSG(nnt_trainer_run(NULL, 0), NNT_E_INVAL, "nnt_trainer_run");
    EXPECT_RC(nnt_trainer_request_stop(NULL), NNT_E_INVAL);
    nnt_trainer_destroy(NULL);
    nnt_trainer_destroy(tr);
    close_run(&a);
}
END_TEST

/* The lines of path after the first (the header) with the columns up to the n-th comma
 * (0: whole lines), in buf. */
static void log_rows(const char *path, int n, char *buf, size_t cap)
{
    FILE *f = fopen(path, "r");
    char line[1024];
    size_t len = 0;
    ck_assert_ptr_nonnull(f);
    ck_assert_ptr_nonnull(fgets(line, sizeof line, f));
    while (fgets(line, sizeof line, f)) {
        char *c = line;
        for (int k = 0; n && c && k < n; k++)
            c = strchr(c + (k > 0), ',');
        if (c && n)
            strcpy(c, "\n");
        len += (size_t)snprintf(buf + len, cap - len, "%s", line);
    }
    fclose(f);
}

/* log_dir: a run stopped after step 3 and resumed (another trainer) writes the train.csv
 * losses and the val.csv of the uninterrupted run (a resumed log keeps its rows up to the
 * checkpoint's step, not the rows of steps trained after it; val.csv has the first part's
 * last validation besides), a loss.svg with both curves;
 * info counts the validations of the whole run; measure_peak gives a measured peak. */
START_TEST(test_log_dir)
{
    run a, b, c;
    char dir_a[128], dir_b[128], pa[160], pb[160], rows_a[8192], rows_b[8192];
    snprintf(dir_a, sizeof dir_a, "%s/log-a", dir);
    snprintf(dir_b, sizeof dir_b, "%s/log-b/sub", dir);
    open_run(&a, 1);
    nnt_trainer_options to = trainer_options(&a, 1, 0);
    to.val_every = 2, to.log_dir = dir_a, to.program = "test", to.measure_peak = 1;
    EXPECT_OK(nnt_trainer_create(a.model, a.opt, a.data, &to, &a.tr));
    EXPECT_OK(nnt_trainer_run(a.tr, 0));
    nnt_trainer_info ia = NNT_TRAINER_INFO_INIT;
    EXPECT_OK(nnt_trainer_info_get(a.tr, &ia));
    int ncpus = 0, ncuda = 0;
    EXPECT_OK(nnt_ctx_workers(ctx, &ncpus, &ncuda));
    if (ncuda == 0) {
        ck_assert(ia.peak_measured && ia.peak_flops > 0);
        ck_assert(isfinite(a.rep[1].mfu) && a.rep[1].mfu > 0);
    } else {   /* measured on CPU workers only: no peak (nnt_trainer_create(3)), no MFU */
        ck_assert(!ia.peak_measured && ia.peak_flops == 0);
        ck_assert(isnan(a.rep[1].mfu));
    }
    ck_assert_int_eq(ia.validations, 3);   /* steps 2, 4, 6 */
    ck_assert_int_eq(ia.last_val_step, 6);
    ck_assert(ia.last_val_loss == a.val[6]);
    int low = a.val[2] <= a.val[4] && a.val[2] <= a.val[6] ? 2 : a.val[4] <= a.val[6] ? 4 : 6;
    ck_assert_int_eq(ia.lowest_val_step, low);
    ck_assert(ia.lowest_val_loss == a.val[low]);
    /* the interrupted run: 3 steps, then 2 more trained past the checkpoint (their rows are
     * dropped by the resume), then resumed from step 3 */
    open_run(&b, 1);
    to = trainer_options(&b, 1, 0);
    to.val_every = 2, to.log_dir = dir_b, to.checkpoint = path_ckpt, to.program = "test";
    EXPECT_OK(nnt_trainer_create(b.model, b.opt, b.data, &to, &b.tr));
    EXPECT_OK(nnt_trainer_run(b.tr, 3));
    EXPECT_OK(nnt_trainer_save(b.tr, NULL));
    EXPECT_OK(nnt_trainer_run(b.tr, 5));
    nnt_trainer_destroy(b.tr), b.tr = NULL;
    open_run(&c, 1);
    to = trainer_options(&c, 1, 0);
    to.val_every = 2, to.log_dir = dir_b, to.program = "test";
    EXPECT_OK(nnt_trainer_create(c.model, c.opt, c.data, &to, &c.tr));
    EXPECT_OK(nnt_trainer_resume(c.tr, path_ckpt));
    EXPECT_OK(nnt_trainer_run(c.tr, 0));
    nnt_trainer_info ic = NNT_TRAINER_INFO_INIT;
    EXPECT_OK(nnt_trainer_info_get(c.tr, &ic));
    /* steps 2 and 3 (the first part's last) from val.csv, 4 and 6 run here */
    ck_assert_int_eq(ic.validations, 4);
    ck_assert_int_eq(ic.last_val_step, 6);
    ck_assert(ic.last_val_loss == ia.last_val_loss);
    ck_assert(!ic.peak_measured && ic.peak_flops == 0);
    const char *names[2] = {"train.csv", "val.csv"};
    for (int i = 0; i < 2; i++) {
        snprintf(pa, sizeof pa, "%s/%s", dir_a, names[i]);
        snprintf(pb, sizeof pb, "%s/%s", dir_b, names[i]);
        log_rows(pa, i ? 0 : 2, rows_a, sizeof rows_a);   /* step, loss (not ms, memory) */
        log_rows(pb, i ? 0 : 2, rows_b, sizeof rows_b);
        char *third = i ? strstr(rows_b, "\n3,") : NULL;   /* the first part's last */
        if (i) {
            ck_assert_ptr_nonnull(third);
            memmove(third + 1, strchr(third + 1, '\n') + 1, strlen(strchr(third + 1, '\n')));
        }
        ck_assert_str_eq(rows_b, rows_a);
    }
    ck_assert_int_eq(strncmp(rows_a, "2,", 2), 0);   /* val.csv: steps 2, 4, 6 */
    char svg[160];
    snprintf(svg, sizeof svg, "%s/loss.svg", dir_b);
    FILE *f = fopen(svg, "r");
    char text[65536];
    ck_assert_ptr_nonnull(f);
    text[fread(text, 1, sizeof text - 1, f)] = '\0';
    fclose(f);
    ck_assert_ptr_nonnull(strstr(text, "test: GPT-2 L1 C16 NH2, loss per step"));
    ck_assert_ptr_nonnull(strstr(text, "validation (held-out tokens)"));
    snprintf(svg, sizeof svg, "%s/loss.svg.tmp", dir_b);
    ck_assert_int_ne(access(svg, F_OK), 0);
    close_run(&a);
    close_run(&b);
    close_run(&c);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("trainer");
    TCase *tc = tcase_create("trainer");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 300);
    tcase_add_loop_test(tc, test_matches_manual_loop, 0, 2);
    tcase_add_loop_test(tc, test_flops_per_token, 0, 2);
    tcase_add_test(tc, test_validation_mean);
    tcase_add_loop_test(tc, test_resume_bit_exact, 0, 2);
    tcase_add_test(tc, test_stop_request);
    tcase_add_test(tc, test_save_request);
    tcase_add_test(tc, test_misuse);
    tcase_add_test(tc, test_log_dir);
    tcase_add_test(tc, test_options_get);
    suite_add_tcase(s, tc);
    return run_suite(s);
}
