/* SPDX-License-Identifier: MIT */
/* A run built from its description (nnt_trainer_open) against one built here piece by piece
 * (nnt_model_create, nnt_layer_init, nnt_optim_create, nnt_data_open, nnt_trainer_create with
 * the held-out split computed here): the same losses, norms, rates and validations bit for
 * bit, and the figures of nnt_trainer_info; the run's description in its checkpoints; a
 * fine-tuning run (LoRA with dropout on a frozen base) resumed bit for bit, a base of other
 * weights or shapes refused; a previous run's files kept; the tokenizer of a model source;
 * the texts of nnt_trainer_text; the failures naming their field. A tiny GPT-2 on an llm.c
 * token file of random ids. */
#define _XOPEN_SOURCE 700   /* realpath */
#include "testutil.h"

#include <math.h>
#include <signal.h>
#include <stddef.h>
#include <sys/stat.h>
#include <unistd.h>

#define B 2
#define T 8
#define V 32
#define NTOK 400           /* tokens in the file */
#define STEPS 8
#define ACCUM 3            /* 8 steps of 3 x 16 tokens wrap past the 340 trained on */

static nnt_ctx *ctx;
static char dir[64], path_data[96], path_ckpt[96];

static void write_tokens(const char *path, int n)
{
    /* llm.c token shard: 256 int32 header (magic 20240520, version 1, count), uint16 ids */
    FILE *f = fopen(path, "wb");
    ck_assert_ptr_nonnull(f);
    int32_t header[256] = {20240520, 1, n};
    fwrite(header, sizeof header, 1, f);
    uint64_t x = 12345;
    for (int i = 0; i < n; i++) {
        x = x * 6364136223846793005ULL + 1442695040888963407ULL;
        uint16_t id = (uint16_t)((x >> 33) % V);
        fwrite(&id, sizeof id, 1, f);
    }
    ck_assert_int_eq(fclose(f), 0);
}

static void setup(void)
{
    ctx = test_ctx();
    snprintf(dir, sizeof dir, "/tmp/test_trainer_open-XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(dir));
    snprintf(path_data, sizeof path_data, "%s/tokens.bin", dir);
    snprintf(path_ckpt, sizeof path_ckpt, "%s/ckpt.safetensors", dir);
    write_tokens(path_data, NTOK);
}

static void teardown(void)
{
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    ck_assert_int_eq(system(cmd), 0);
    EXPECT_OK(nnt_ctx_destroy(ctx));
}

static nnt_model_config tiny_config(void)
{
    nnt_model_config c = NNT_MODEL_CONFIG_INIT;
    c.layers = 1, c.channels = 16, c.heads = 2, c.max_seq = T, c.vocab = V;
    return c;
}

/* The reports of a run, by step. */
typedef struct reports {
    nnt_trainer_report step[STEPS + 1], last;
    double val[STEPS + 1];
    int nval;
} reports;

static int on_report(const nnt_trainer_report *rep, void *user)
{
    reports *r = user;
    ck_assert(rep->step >= 0 && rep->step <= STEPS);
    if (rep->event == NNT_TRAINER_VALIDATION)
        r->val[rep->step] = rep->loss, r->nval++;
    else if (rep->event == NNT_TRAINER_STEP)
        r->step[rep->step] = *rep, r->last = *rep;
    return 0;
}

static nnt_trainer_options loop_options(reports *r)
{
    nnt_trainer_options to = NNT_TRAINER_OPTIONS_INIT;
    to.batch = B, to.seq = T, to.accum = ACCUM, to.steps = STEPS, to.seed = 7;
    to.val_every = 4, to.callback = on_report, to.user = r;
    return to;
}

/* AdamW with the learning rates left to nnt_trainer_open's defaults (lr < 0, min_lr < 0). */
static nnt_optim_options optim_options(void)
{
    nnt_optim_options oo = NNT_OPTIM_OPTIONS_INIT;
    oo.lr = -1, oo.min_lr = -1, oo.schedule = NNT_SCHEDULE_COSINE, oo.warmup_steps = 2;
    oo.grad_clip = 1.0, oo.weight_decay = 0.1;
    return oo;
}

/* The run of nnt_trainer_open: the configuration, the token file, the last 0.15 held out, at
 * most 5 validation windows of it. */
static nnt_run_config run_config(const nnt_model_config *c, const nnt_optim_options *oo)
{
    nnt_run_config run = NNT_RUN_CONFIG_INIT;
    run.model_config = c, run.data = path_data, run.data_format = NNT_DATA_LLMC;
    run.val_split = 0.15, run.val_batches = 5, run.optim = oo;
    return run;
}

static void expect_same_report(const nnt_trainer_report *a, const nnt_trainer_report *b)
{
    ck_assert_msg(a->loss == b->loss && a->lr == b->lr && a->grad_norm == b->grad_norm,
                  "step %lld: loss %.9g / %.9g, lr %.9g / %.9g, norm %.9g / %.9g",
                  (long long)a->step, a->loss, b->loss, a->lr, b->lr, a->grad_norm,
                  b->grad_norm);
}

/* nnt_trainer_open against the same run built here: 340 tokens trained on (400 - 60 held
 * out, floor(400 x 0.15)), 3 validation windows (all that 60 tokens hold of B T + 1 = 17),
 * the default rates 3e-3 and 3e-4 of a model under 10M parameters. */
START_TEST(test_open_matches_create)
{
    nnt_model_config c = tiny_config();
    nnt_optim_options oo = optim_options();
    nnt_run_config run = run_config(&c, &oo);
    reports ra, rb;
    memset(&ra, 0, sizeof ra), memset(&rb, 0, sizeof rb);
    nnt_trainer_options to = loop_options(&ra);
    nnt_trainer *tr = NULL;
    EXPECT_OK(nnt_trainer_open(ctx, &run, &to, &tr));
    nnt_trainer_info ti = NNT_TRAINER_INFO_INIT;
    EXPECT_OK(nnt_trainer_info_get(tr, &ti));
    ck_assert_int_eq(ti.train_tokens, 340);
    ck_assert_int_eq(ti.held_out, 60);
    ck_assert_int_eq(ti.val_tokens, 60);
    ck_assert_int_eq(ti.val_batches, 3);
    ck_assert(ti.lr == 3e-3 && ti.min_lr == 3e-3 / 10);
    ck_assert_int_eq(ti.tokenizer, NNT_TOKENIZER_BYTES);   /* no source: bytes */
    ck_assert_int_eq(ti.frozen, 0);
    nnt_layer *model = NULL;
    nnt_data *data = NULL;
    nnt_tokenizer *tok = NULL;
    nnt_optim *opt = NULL;
    int64_t numel = 0, vocab = 0;
    EXPECT_OK(nnt_trainer_parts(tr, &model, &opt, &data, &tok));
    ck_assert(model && opt && data && tok);
    EXPECT_OK(nnt_layer_num_params(model, NULL, &numel));
    ck_assert_int_eq(ti.params, numel);
    EXPECT_OK(nnt_tokenizer_vocab_size(tok, &vocab));
    ck_assert_int_eq(vocab, 256);
    EXPECT_OK(nnt_trainer_run(tr, 0));
    nnt_trainer_destroy(tr);   /* (and what it built) */

    /* the same run, piece by piece */
    nnt_layer *m = NULL;
    nnt_optim *o = NULL;
    nnt_data *d = NULL;
    EXPECT_OK(nnt_model_create(ctx, &c, B, T, NULL, &m));
    EXPECT_OK(nnt_layer_init(m, 7));
    oo.lr = 3e-3, oo.min_lr = 3e-3 / 10, oo.total_steps = STEPS, oo.accum_steps = ACCUM;
    EXPECT_OK(nnt_optim_create(ctx, &oo, &o));
    EXPECT_OK(nnt_optim_add_layer(o, m));
    EXPECT_OK(nnt_data_open(path_data, NNT_DATA_LLMC, NULL, V, &d));
    to = loop_options(&rb);
    to.train_tokens = 340, to.val_start = 340, to.val_len = 60, to.val_batches = 3;
    EXPECT_OK(nnt_trainer_create(m, o, d, &to, &tr));
    EXPECT_OK(nnt_trainer_run(tr, 0));
    for (int s = 1; s <= STEPS; s++)
        expect_same_report(&ra.step[s], &rb.step[s]);
    ck_assert_int_eq(ra.nval, 2);   /* after steps 4 and 8 */
    ck_assert_int_eq(rb.nval, 2);
    ck_assert(ra.val[4] == rb.val[4] && ra.val[8] == rb.val[8]);
    EXPECT_OK(nnt_trainer_parts(tr, NULL, NULL, NULL, &tok));
    ck_assert_ptr_null(tok);   /* (nnt_trainer_create's: none) */
    nnt_trainer_destroy(tr);
    nnt_optim_destroy(o);
    nnt_layer_destroy(m);
    nnt_data_close(d);
}
END_TEST

/* Programs built against older releases pass the sizes their headers gave the structures
 * that grew since: nnt_run_config before freeze_mode (0.3), nnt_trainer_options before
 * simpo_gamma (0.3), before dpo_beta and before label_smoothing (0.4 in development),
 * nnt_trainer_info before early_stop_step (0.3: only the bytes of its size written). Accepted, whatever lies past the size not read
 * (values that would be refused), the run the whole structures give; a size no release had
 * is refused naming it. */
START_TEST(test_older_sizes)
{
    nnt_model_config c = tiny_config();
    nnt_optim_options oo = optim_options();
    nnt_run_config run = run_config(&c, &oo);
    reports ra, rb;
    memset(&ra, 0, sizeof ra), memset(&rb, 0, sizeof rb);
    nnt_trainer_options to = loop_options(&ra);
    nnt_trainer *tr = NULL;
    EXPECT_OK(nnt_trainer_open(ctx, &run, &to, &tr));
    EXPECT_OK(nnt_trainer_run(tr, 2));
    nnt_trainer_destroy(tr);
    const size_t to_sizes[3] = {offsetof(nnt_trainer_options, simpo_gamma),
                                offsetof(nnt_trainer_options, dpo_beta),
                                offsetof(nnt_trainer_options, label_smoothing)};
    for (int k = 0; k < 3; k++) {
        nnt_run_config old_run = run;
        old_run.size = offsetof(nnt_run_config, freeze_mode);
        old_run.freeze_mode = 77, old_run.num_labels = -3, old_run.problem_type = 9;
        memset(&rb, 0, sizeof rb);
        nnt_trainer_options old_to = loop_options(&rb);
        old_to.size = to_sizes[k];
        old_to.label_smoothing = 7;
        if (k < 2)
            old_to.simpo_gamma = -1, old_to.rpo_alpha = 5, old_to.desirable_weight = -1;
        if (k == 1)
            old_to.dpo_beta = -2, old_to.reward_center = -1;
        EXPECT_OK(nnt_trainer_open(ctx, &old_run, &old_to, &tr));
        EXPECT_OK(nnt_trainer_run(tr, 2));
        nnt_trainer_info ti;   /* 0.3's: the fields its size holds, nothing after them */
        memset(&ti, 0xab, sizeof ti);
        ti.size = offsetof(nnt_trainer_info, early_stop_step);
        EXPECT_OK(nnt_trainer_info_get(tr, &ti));
        ck_assert_int_eq(ti.step, 2);
        ck_assert_int_eq(ti.stop_signal, 0);
        for (size_t b = offsetof(nnt_trainer_info, early_stop_step); b < sizeof ti; b++)
            ck_assert_msg(((unsigned char *)&ti)[b] == 0xab, "byte %zu past 0.3's info written",
                          b);
        nnt_trainer_destroy(tr);
        for (int s = 1; s <= 2; s++)
            expect_same_report(&ra.step[s], &rb.step[s]);
    }
    nnt_trainer_options between = loop_options(&rb);
    between.size = offsetof(nnt_trainer_options, cpo_alpha);
    EXPECT_FAIL_MSG(nnt_trainer_open(ctx, &run, &between, &tr), NNT_E_INVAL, "options size");
    nnt_run_config run_between = run;
    run_between.size = offsetof(nnt_run_config, num_labels);
    EXPECT_FAIL_MSG(nnt_trainer_open(ctx, &run_between, &to, &tr), NNT_E_INVAL,
                    "options size");
}
END_TEST

/* The step after which transformers' EarlyStoppingCallback(patience, threshold) stops a run
 * with these validation losses (val[1..n], one a step), or 0: it counts the validations in a
 * row whose loss is not below the best before it by more than threshold. */
static int hf_early_stop(const double *val, int n, int patience, double threshold)
{
    double best = 0;
    for (int s = 1, counter = 0; s <= n; s++) {
        counter = s == 1 || (val[s] < best && best - val[s] > threshold) ? 0 : counter + 1;
        best = s == 1 || val[s] < best ? val[s] : best;
        if (counter >= patience)
            return s;
    }
    return 0;
}

/* early_stop: a run validated every step (losses of random tokens go up and down) stops after
 * the step transformers' rule names, for a delta of 0 and for a delta at which that step
 * differs, with the validations of the run without it up to there; info says so; resumed
 * a step before it, the same. Bad values and early_stop without validations are refused. */
START_TEST(test_early_stop)
{
    nnt_model_config c = tiny_config();
    nnt_optim_options oo = optim_options();
    nnt_run_config run = run_config(&c, &oo);
    reports ra;
    memset(&ra, 0, sizeof ra);
    nnt_trainer_options to = loop_options(&ra);
    to.val_every = 1;
    nnt_trainer *tr = NULL;
    EXPECT_OK(nnt_trainer_open(ctx, &run, &to, &tr));
    EXPECT_OK(nnt_trainer_run(tr, 0));
    nnt_trainer_destroy(tr);
    ck_assert_int_eq(ra.nval, STEPS);
    int stop0 = hf_early_stop(ra.val, STEPS, 2, 0.0), stop_d = 0;
    double delta = 0;
    for (int s = 2; s <= STEPS && !stop_d; s++) {   /* the smallest delta that changes it */
        double d = fabs(ra.val[s] - ra.val[s - 1]);
        int at = hf_early_stop(ra.val, STEPS, 2, d);
        if (at != stop0 && at > 0 && (!delta || d < delta))
            delta = d, stop_d = at;
    }
    ck_assert_msg(stop_d > 0, "no delta changes the early stop (%d) of these losses", stop0);
    const double deltas[2] = {0.0, delta};
    const int want[2] = {stop0, stop_d};
    for (int k = 0; k < 2; k++) {
        reports rb;
        memset(&rb, 0, sizeof rb);
        to = loop_options(&rb);
        to.val_every = 1, to.early_stop = 2, to.early_stop_delta = deltas[k];
        EXPECT_OK(nnt_trainer_open(ctx, &run, &to, &tr));
        EXPECT_OK(nnt_trainer_run(tr, 0));
        nnt_trainer_info ti = NNT_TRAINER_INFO_INIT;
        EXPECT_OK(nnt_trainer_info_get(tr, &ti));
        nnt_trainer_destroy(tr);
        int last = want[k] ? want[k] : STEPS;
        printf("early_stop 2, delta %.6g: stopped after step %lld (transformers' rule: %d)\n",
               deltas[k], (long long)ti.early_stop_step, want[k]);
        ck_assert_int_eq(ti.early_stop_step, want[k]);
        ck_assert_int_eq(ti.stopped, want[k] > 0);
        ck_assert_int_eq(ti.steps_run, last);
        ck_assert_int_eq(rb.nval, last);
        for (int s = 1; s <= last; s++)
            ck_assert_msg(rb.val[s] == ra.val[s], "validation %d: %.9g, without early stop "
                          "%.9g", s, rb.val[s], ra.val[s]);
    }
    /* stopped a step before the early stop (one validation without an improvement counted),
     * saved and resumed without a log_dir: the count goes on, the stop is at the same step,
     * and the lowest and last validations are those of the run in one go */
    ck_assert_int_ge(stop0, 3);
    nnt_trainer_info whole = NNT_TRAINER_INFO_INIT, resumed = NNT_TRAINER_INFO_INIT;
    reports rc1, rc2;
    memset(&rc1, 0, sizeof rc1), memset(&rc2, 0, sizeof rc2);
    to = loop_options(&rc1);
    to.val_every = 1, to.early_stop = 2, to.checkpoint = path_ckpt;
    EXPECT_OK(nnt_trainer_open(ctx, &run, &to, &tr));
    EXPECT_OK(nnt_trainer_run(tr, 0));
    EXPECT_OK(nnt_trainer_info_get(tr, &whole));
    nnt_trainer_destroy(tr);
    EXPECT_OK(nnt_trainer_open(ctx, &run, &to, &tr));
    EXPECT_OK(nnt_trainer_run(tr, stop0 - 1));
    EXPECT_OK(nnt_trainer_save(tr, NULL));
    nnt_trainer_destroy(tr);
    to = loop_options(&rc2);
    to.val_every = 1, to.early_stop = 2, to.checkpoint = path_ckpt, to.resume = path_ckpt;
    EXPECT_OK(nnt_trainer_open(ctx, &run, &to, &tr));
    EXPECT_OK(nnt_trainer_run(tr, 0));
    EXPECT_OK(nnt_trainer_info_get(tr, &resumed));
    nnt_trainer_destroy(tr);
    printf("early_stop 2 resumed after step %d: stopped after step %lld (in one go %lld); "
           "lowest validation %.9g at step %lld\n", stop0 - 1,
           (long long)resumed.early_stop_step, (long long)whole.early_stop_step,
           resumed.lowest_val_loss, (long long)resumed.lowest_val_step);
    ck_assert_int_eq(whole.early_stop_step, stop0);
    ck_assert_int_eq(resumed.early_stop_step, stop0);
    ck_assert(resumed.lowest_val_step == whole.lowest_val_step &&
              resumed.lowest_val_loss == whole.lowest_val_loss &&
              resumed.last_val_step == whole.last_val_step &&
              resumed.last_val_loss == whole.last_val_loss);
    to = loop_options(&ra);
    to.early_stop = -1;
    EXPECT_FAIL_MSG(nnt_trainer_open(ctx, &run, &to, &tr), NNT_E_INVAL, "early_stop -1");
    to.early_stop = 2, to.early_stop_delta = -0.5;
    EXPECT_FAIL_MSG(nnt_trainer_open(ctx, &run, &to, &tr), NNT_E_INVAL, "early_stop_delta -0.5");
    to.early_stop_delta = 0, run.val_split = 0;   /* nothing held out */
    EXPECT_FAIL_MSG(nnt_trainer_open(ctx, &run, &to, &tr), NNT_E_INVAL, "needs validations");
}
END_TEST

/* The mean loss of model on the first B x T + 1 tokens of the data file (a forward). */
static double loss_on_data(nnt_layer *model)
{
    int32_t ids[B * T + 1];
    FILE *f = fopen(path_data, "rb");
    ck_assert_ptr_nonnull(f);
    uint16_t raw[B * T + 1];
    ck_assert_int_eq(fseek(f, 1024, SEEK_SET), 0);   /* llm.c's header */
    ck_assert_int_eq(fread(raw, 2, B * T + 1, f), B * T + 1);
    fclose(f);
    for (int i = 0; i <= B * T; i++)
        ids[i] = raw[i];
    int64_t shape[2] = {B, T};
    nnt_tensor *x = NULL, *y = NULL;
    EXPECT_OK(nnt_tensor_create(ctx, NNT_INT32, 2, shape, NULL, &x));
    EXPECT_OK(nnt_tensor_create(ctx, NNT_INT32, 2, shape, NULL, &y));
    EXPECT_OK(nnt_tensor_copy_from_host(x, ids, sizeof(int32_t) * B * T));
    EXPECT_OK(nnt_tensor_copy_from_host(y, ids + 1, sizeof(int32_t) * B * T));
    double loss = 0;
    EXPECT_OK(nnt_layer_set_targets(model, y));
    EXPECT_OK(nnt_layer_forward(model, x, NULL));
    EXPECT_OK(nnt_layer_loss(model, &loss));
    EXPECT_OK(nnt_layer_set_targets(model, NULL));
    nnt_tensor_destroy(x), nnt_tensor_destroy(y);
    return loss;
}

/* The run of test_open_matches_create built piece by piece (nnt_trainer_create) with the
 * trainer options' label_smoothing and neftune_alpha, on a model whose layers got
 * set_model's settings first (NULL: none); the model is kept in *model (with its optimizer
 * and data, freed by free_pieces). */
typedef struct pieces {
    nnt_layer *m;
    nnt_optim *o;
    nnt_data *d;
} pieces;

static void run_pieces(void (*set_model)(nnt_layer *), double smoothing, double neftune,
                       reports *rb, pieces *p)
{
    nnt_model_config c = tiny_config();
    nnt_optim_options oo = optim_options();
    memset(rb, 0, sizeof *rb);
    EXPECT_OK(nnt_model_create(ctx, &c, B, T, NULL, &p->m));
    EXPECT_OK(nnt_layer_init(p->m, 7));
    if (set_model)
        set_model(p->m);
    oo.lr = 3e-3, oo.min_lr = 3e-3 / 10, oo.total_steps = STEPS, oo.accum_steps = ACCUM;
    EXPECT_OK(nnt_optim_create(ctx, &oo, &p->o));
    EXPECT_OK(nnt_optim_add_layer(p->o, p->m));
    EXPECT_OK(nnt_data_open(path_data, NNT_DATA_LLMC, NULL, V, &p->d));
    nnt_trainer_options to = loop_options(rb);
    to.train_tokens = 340, to.val_start = 340, to.val_len = 60, to.val_batches = 3;
    to.label_smoothing = smoothing, to.neftune_alpha = neftune;
    nnt_trainer *tr = NULL;
    EXPECT_OK(nnt_trainer_create(p->m, p->o, p->d, &to, &tr));
    EXPECT_OK(nnt_trainer_run(tr, 0));
    nnt_trainer_destroy(tr);
}

static void free_pieces(pieces *p)
{
    nnt_optim_destroy(p->o);
    nnt_layer_destroy(p->m);
    nnt_data_close(p->d);
}

/* Every step's report and the validations after steps 4 and 8 of a and b equal. */
static void expect_same_run(const reports *a, const reports *b)
{
    for (int s = 1; s <= STEPS; s++)
        expect_same_report(&a->step[s], &b->step[s]);
    ck_assert_msg(a->val[4] > 0 && a->val[4] == b->val[4] && a->val[8] == b->val[8],
                  "validations after steps 4 and 8: %.9g %.9g / %.9g %.9g", a->val[4],
                  a->val[8], b->val[4], b->val[8]);
}

static void smoothing_03(nnt_layer *m)
{
    EXPECT_OK(nnt_layer_set_label_smoothing(m, 0.3));
}

/* label_smoothing: the run (steps and validations) of nnt_trainer_open with it is bit for bit
 * the run of a model whose loss layer has it (nnt_layer_set_label_smoothing) under a trainer
 * without it, and the run of that model without it and a trainer with it; another run than
 * without it. The trainer puts the model's own setting back when destroyed. Refused: values
 * outside [0, 1), with dpo_beta, on a classifier. */
START_TEST(test_label_smoothing)
{
    nnt_model_config c = tiny_config();
    nnt_optim_options oo = optim_options();
    nnt_run_config run = run_config(&c, &oo);
    reports ra, rp, rb;
    memset(&ra, 0, sizeof ra), memset(&rp, 0, sizeof rp);
    nnt_trainer_options to = loop_options(&ra);
    to.label_smoothing = 0.3;
    nnt_trainer *tr = NULL;
    EXPECT_OK(nnt_trainer_open(ctx, &run, &to, &tr));
    EXPECT_OK(nnt_trainer_run(tr, 0));
    nnt_trainer_destroy(tr);
    to = loop_options(&rp);   /* plain */
    EXPECT_OK(nnt_trainer_open(ctx, &run, &to, &tr));
    EXPECT_OK(nnt_trainer_run(tr, 0));
    nnt_trainer_destroy(tr);
    ck_assert_msg(ra.step[1].loss != rp.step[1].loss && ra.val[4] != rp.val[4],
                  "smoothed: loss %.9g, val %.9g; plain %.9g, %.9g", ra.step[1].loss,
                  ra.val[4], rp.step[1].loss, rp.val[4]);
    for (int k = 0; k < 2; k++) {   /* 0: the layer's setting, 1: the trainer's */
        pieces p;
        run_pieces(k == 0 ? smoothing_03 : NULL, k == 1 ? 0.3 : 0.0, 0.0, &rb, &p);
        expect_same_run(&ra, &rb);
        /* after the trainer: the model's own setting (0.3 set here, or none) */
        double kept = loss_on_data(p.m);
        EXPECT_OK(nnt_layer_set_label_smoothing(p.m, 0.0));
        double plain = loss_on_data(p.m);
        ck_assert_msg(k == 0 ? kept != plain : kept == plain, "model %d after its trainer: "
                      "loss %.9g, without smoothing %.9g", k, kept, plain);
        free_pieces(&p);
    }
    to = loop_options(&ra);
    to.label_smoothing = 1.0;
    EXPECT_FAIL_MSG(nnt_trainer_open(ctx, &run, &to, &tr), NNT_E_INVAL, "label_smoothing 1 ");
    to.label_smoothing = -0.25;
    EXPECT_FAIL_MSG(nnt_trainer_open(ctx, &run, &to, &tr), NNT_E_INVAL, "outside [0, 1)");
    to.label_smoothing = 0.1, to.dpo_beta = 0.1;
    EXPECT_FAIL_MSG(nnt_trainer_open(ctx, &run, &to, &tr), NNT_E_INVAL, "preference losses");
    to.dpo_beta = 0, run.num_labels = 3;
    EXPECT_FAIL_MSG(nnt_trainer_open(ctx, &run, &to, &tr), NNT_E_INVAL,
                    "a classifier's loss is not");
}
END_TEST

static void neftune_5(nnt_layer *m)
{
    EXPECT_OK(nnt_layer_set_neftune(m, 5.0, 7));   /* loop_options' seed */
}

/* neftune_alpha: the run of nnt_trainer_open with it (5) is another run than without from
 * its first step, and the same twice; bit for bit the run of a model with
 * nnt_layer_set_neftune(5, the trainer's seed) under a trainer without it, and of a trainer
 * with it; a validation before training is the plain one (no noise in validations); the
 * trainer puts the model's own setting back. Refused: negative, with dpo_beta. */
START_TEST(test_neftune)
{
    nnt_model_config c = tiny_config();
    nnt_optim_options oo = optim_options();
    nnt_run_config run = run_config(&c, &oo);
    reports ra, ra2, rp, rb;
    memset(&ra, 0, sizeof ra), memset(&ra2, 0, sizeof ra2), memset(&rp, 0, sizeof rp);
    nnt_trainer *tr = NULL;
    double v_noisy = 0, v_plain = 0;
    reports *runs[3] = {&ra, &ra2, &rp};
    for (int k = 0; k < 3; k++) {
        nnt_trainer_options to = loop_options(runs[k]);
        to.neftune_alpha = k < 2 ? 5.0 : 0.0;
        EXPECT_OK(nnt_trainer_open(ctx, &run, &to, &tr));
        if (k != 1)
            EXPECT_OK(nnt_trainer_validate(tr, k == 0 ? &v_noisy : &v_plain));
        EXPECT_OK(nnt_trainer_run(tr, 0));
        nnt_trainer_destroy(tr);
    }
    ck_assert_msg(v_noisy == v_plain, "validation before training: %.9g with NEFTune, %.9g "
                  "without", v_noisy, v_plain);
    ck_assert_msg(ra.step[1].loss != rp.step[1].loss, "step 1: loss %.9g with NEFTune, as "
                  "without", ra.step[1].loss);
    expect_same_run(&ra, &ra2);
    for (int k = 0; k < 2; k++) {   /* 0: the layer's setting, 1: the trainer's */
        pieces p;
        run_pieces(k == 0 ? neftune_5 : NULL, 0.0, k == 1 ? 5.0 : 0.0, &rb, &p);
        expect_same_run(&ra, &rb);
        free_pieces(&p);
    }
    /* the trainer's noise taken off its model again: the plain run after it */
    pieces p;
    run_pieces(NULL, 0.0, 5.0, &rb, &p);
    nnt_trainer_options to = loop_options(&rb);
    to.train_tokens = 340, to.val_start = 340, to.val_len = 60, to.val_batches = 3;
    EXPECT_OK(nnt_layer_init(p.m, 7));
    nnt_optim_destroy(p.o);
    oo.lr = 3e-3, oo.min_lr = 3e-3 / 10, oo.total_steps = STEPS, oo.accum_steps = ACCUM;
    EXPECT_OK(nnt_optim_create(ctx, &oo, &p.o));
    EXPECT_OK(nnt_optim_add_layer(p.o, p.m));
    memset(&rb, 0, sizeof rb);
    EXPECT_OK(nnt_trainer_create(p.m, p.o, p.d, &to, &tr));
    EXPECT_OK(nnt_trainer_run(tr, 0));
    nnt_trainer_destroy(tr);
    expect_same_run(&rp, &rb);
    free_pieces(&p);
    to = loop_options(&ra);
    to.neftune_alpha = -1;
    EXPECT_FAIL_MSG(nnt_trainer_open(ctx, &run, &to, &tr), NNT_E_INVAL, "neftune_alpha -1");
    to.neftune_alpha = 5, to.dpo_beta = 0.1;
    EXPECT_FAIL_MSG(nnt_trainer_open(ctx, &run, &to, &tr), NNT_E_INVAL, "preference losses");
}
END_TEST

/* The value of key in the options string of the checkpoint at path. */
static void saved_value(const char *path, const char *key, char *buf, size_t cap)
{
    nnt_train_state st = NNT_TRAIN_STATE_INIT;
    int found = 0;
    EXPECT_OK(nnt_train_state_info(NULL, path, &st));
    EXPECT_OK(nnt_options_get(st.options, key, buf, cap, &found));
    ck_assert_msg(found, "%s records no \"%s\": %s", path, key, st.options);
    nnt_train_state_clear(&st);
}

/* Whether the run recorded in the training state at path has key. */
static int has_value(const char *path, const char *key)
{
    nnt_train_state st = NNT_TRAIN_STATE_INIT;
    char buf[64];
    int found = 0;
    EXPECT_OK(nnt_train_state_info(NULL, path, &st));
    EXPECT_OK(nnt_options_get(st.options, key, buf, sizeof buf, &found));
    nnt_train_state_clear(&st);
    return found;
}

/* The run's first 3 steps, reported into part, saved at path (its checkpoint). */
static void save_first_steps(const nnt_run_config *run, reports *part, const char *path)
{
    nnt_trainer_options to = loop_options(part);
    nnt_trainer *tr = NULL;
    to.checkpoint = path;
    EXPECT_OK(nnt_trainer_open(ctx, run, &to, &tr));
    EXPECT_OK(nnt_trainer_run(tr, 3));
    EXPECT_OK(nnt_trainer_save(tr, NULL));
    nnt_trainer_destroy(tr);
}

/* A LoRA run (dropout 0.1: its masks follow the micro-batch's number) on a frozen fresh base
 * of seed 7: stopped after step 3, saved, and resumed by a trainer of the same description,
 * its steps 4..8 are the uninterrupted run's bit for bit. The checkpoint records the run; a
 * base of other weights (seed 8), of another shape, or with nothing frozen is refused before
 * anything changes, naming it. A checkpoint with the older checksum of the base resumes too. */
START_TEST(test_fine_tune_resume)
{
    nnt_model_config c = tiny_config();
    nnt_optim_options oo = optim_options();
    nnt_lora_options lo = NNT_LORA_OPTIONS_INIT;
    lo.rank = 2, lo.alpha = 4, lo.dropout = 0.1, lo.targets = "c_attn,c_fc", lo.seed = 5;
    nnt_run_config run = run_config(&c, &oo);
    run.val_split = 0, run.lora = &lo, run.freeze = "wpe.*";
    reports full, part, rest;
    memset(&full, 0, sizeof full), memset(&part, 0, sizeof part), memset(&rest, 0, sizeof rest);
    nnt_trainer_options to = loop_options(&full);
    nnt_trainer *tr = NULL;
    EXPECT_OK(nnt_trainer_open(ctx, &run, &to, &tr));
    EXPECT_OK(nnt_trainer_run(tr, 0));
    nnt_trainer_destroy(tr);
    to = loop_options(&part);
    to.checkpoint = path_ckpt;
    EXPECT_OK(nnt_trainer_open(ctx, &run, &to, &tr));
    EXPECT_OK(nnt_trainer_run(tr, 3));
    EXPECT_OK(nnt_trainer_save(tr, NULL));
    nnt_trainer_info ti = NNT_TRAINER_INFO_INIT;
    EXPECT_OK(nnt_trainer_info_get(tr, &ti));
    ck_assert(ti.frozen > 0 && ti.frozen < ti.params);
    nnt_trainer_destroy(tr);

    char text[4096], *abs = realpath(path_data, NULL);
    ck_assert_ptr_nonnull(abs);
    saved_value(path_ckpt, "data", text, sizeof text);
    ck_assert_str_eq(text, abs);
    free(abs);
    saved_value(path_ckpt, "frozen", text, sizeof text);
    ck_assert_int_eq(atoll(text), ti.frozen);
    saved_value(path_ckpt, "base_checksum2", text, sizeof text);
    ck_assert_uint_eq(strlen(text), 16);
    const char *const want[][2] = {{"lora_rank", "2"}, {"lora_alpha", "4"},
                                   {"lora_targets", "c_attn,c_fc"}, {"freeze", "wpe.*"},
                                   {"tokenizer", "bytes"}, {"data_format", "llmc"},
                                   {"val_batches", "5"}, {"precision", "fp32"},
                                   {"program", "nnt"}};
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        saved_value(path_ckpt, want[i][0], text, sizeof text);
        ck_assert_str_eq(text, want[i][1]);
    }

    to = loop_options(&rest);
    to.checkpoint = path_ckpt, to.resume = path_ckpt;
    EXPECT_OK(nnt_trainer_open(ctx, &run, &to, &tr));
    EXPECT_OK(nnt_trainer_info_get(tr, &ti));
    ck_assert_int_eq(ti.step, 3);
    EXPECT_OK(nnt_trainer_run(tr, 0));
    nnt_trainer_destroy(tr);
    for (int s = 1; s <= STEPS; s++)
        expect_same_report(&full.step[s], s <= 3 ? &part.step[s] : &rest.step[s]);

    to.seed = 8;   /* a base of other weights (the same shapes) */
    EXPECT_RC(nnt_trainer_open(ctx, &run, &to, &tr), NNT_E_FORMAT);
    ck_assert_ptr_null(tr);
    ck_assert_ptr_nonnull(strstr(nnt_ctx_last_error(NULL), "the base model changed since"));
    ck_assert(!strncmp(nnt_ctx_last_error(NULL), "resume: ", 8));

    /* a checkpoint of the older kind (FNV-1a over the base's bytes, "base_checksum"):
     * resumed as before, bit for bit, and a base of other weights refused the same way */
    setenv("NNT_TEST_BASE_CHECKSUM_FNV", "1", 1);
    save_first_steps(&run, &part, path_ckpt);
    unsetenv("NNT_TEST_BASE_CHECKSUM_FNV");
    saved_value(path_ckpt, "base_checksum", text, sizeof text);
    ck_assert_uint_eq(strlen(text), 16);
    ck_assert(!has_value(path_ckpt, "base_checksum2"));
    memset(&rest, 0, sizeof rest);
    to = loop_options(&rest);
    to.checkpoint = path_ckpt, to.resume = path_ckpt;
    EXPECT_OK(nnt_trainer_open(ctx, &run, &to, &tr));
    EXPECT_OK(nnt_trainer_run(tr, 0));
    nnt_trainer_destroy(tr);
    for (int s = 4; s <= STEPS; s++)
        expect_same_report(&full.step[s], &rest.step[s]);
    to.seed = 8;
    EXPECT_RC(nnt_trainer_open(ctx, &run, &to, &tr), NNT_E_FORMAT);
    ck_assert_ptr_nonnull(strstr(nnt_ctx_last_error(NULL), "the base model changed since"));
    to.seed = 7, c.channels = 24;
    EXPECT_RC(nnt_trainer_open(ctx, &run, &to, &tr), NNT_E_SHAPE);
    ck_assert_ptr_nonnull(strstr(nnt_ctx_last_error(NULL), "channels 16, this trainer's 24"));
    c.channels = 16, run.lora = NULL, run.freeze = NULL;
    EXPECT_RC(nnt_trainer_open(ctx, &run, &to, &tr), NNT_E_FORMAT);
    ck_assert_ptr_nonnull(strstr(nnt_ctx_last_error(NULL), "frozen parameter elements, "
                                 "this trainer's model 0"));
    /* the other way: a run without frozen parameters resumed as a fine-tuning one */
    to.resume = NULL;
    EXPECT_OK(nnt_trainer_open(ctx, &run, &to, &tr));   /* (nothing frozen) */
    EXPECT_OK(nnt_trainer_save(tr, NULL));
    nnt_trainer_destroy(tr);
    run.lora = &lo, to.resume = path_ckpt;
    EXPECT_RC(nnt_trainer_open(ctx, &run, &to, &tr), NNT_E_FORMAT);
    ck_assert_ptr_nonnull(strstr(nnt_ctx_last_error(NULL), "run had 0 frozen parameter "
                                 "elements, this trainer's model"));
}
END_TEST

/* The RAM StarPU had allocated at most since the last call (which resets the peak). */
static int64_t ram_peak(void)
{
    nnt_mem_stats ms;
    memset(&ms, 0, sizeof ms);
    ms.size = sizeof ms;
    EXPECT_OK(nnt_ctx_mem_stats(ctx, &ms, 1));
    ck_assert_int_ge(ms.nnodes, 1);
    return ms.node[0].peak_bytes;
}

/* The parameters of a model on the host: name, dtype, frozen flag, bytes. */
typedef struct host_params {
    int64_t n;
    char name[128][64];
    nnt_dtype dtype[128];
    int frozen[128];
    size_t bytes[128];
    char *value[128];
} host_params;

static void read_params(nnt_layer *model, host_params *h)
{
    EXPECT_OK(nnt_layer_num_params(model, &h->n, NULL));
    ck_assert_int_le(h->n, 128);
    for (int64_t i = 0; i < h->n; i++) {
        nnt_param_info p;
        memset(&p, 0, sizeof p);
        p.size = sizeof p;
        int64_t numel = 0;
        EXPECT_OK(nnt_layer_param(model, i, &p));
        EXPECT_OK(nnt_tensor_dtype(p.value, &h->dtype[i]));
        EXPECT_OK(nnt_tensor_numel(p.value, &numel));
        snprintf(h->name[i], sizeof h->name[i], "%s", p.name);
        h->frozen[i] = p.frozen;
        h->bytes[i] = (size_t)numel * (h->dtype[i] == NNT_BF16 ? 2 : 4);
        ck_assert_ptr_nonnull(h->value[i] = malloc(h->bytes[i]));
        EXPECT_OK(nnt_tensor_copy_to_host(p.value, h->value[i], h->bytes[i]));
    }
}

/* LoRA on a fresh base under bf16 products: nnt_trainer_open builds the model with its
 * parameters unwritten, adds the adapters (freezing the base), then initialises the base
 * from the seed, each frozen matrix straight to bf16, one at a time. The parameters are the
 * bits of a model opened from the seed and given the same adapters afterwards (written in
 * fp32 first, then narrowed), and the RAM at the peak (each in a context of its own) is less
 * by at least half what the frozen matrices take more in fp32 than in bf16 (measured on AMD
 * Zen 4, L 4: 7.0 MB against 12.7-13.0 MB, the frozen matrices 6.3 MB more in fp32; without the
 * wait after each narrowed matrix 10.5-10.7 MB). */
START_TEST(test_fine_tune_fresh_bf16)
{
    nnt_model_config c = tiny_config();
    c.layers = 4, c.channels = 256, c.heads = 4;
    nnt_optim_options oo = optim_options();
    nnt_lora_options lo = NNT_LORA_OPTIONS_INIT;
    lo.rank = 2, lo.alpha = 4, lo.targets = "c_attn,c_fc", lo.seed = 5;
    nnt_run_config run = run_config(&c, &oo);
    run.val_split = 0, run.lora = &lo, run.precision = NNT_PRECISION_BF16;
    nnt_trainer_options to = loop_options(NULL);
    to.callback = NULL, to.measure_peak = 0;   /* (its start-up GEMMs would set the peak) */

    static host_params got, want;
    ram_peak();
    nnt_trainer *tr = NULL;
    EXPECT_OK(nnt_trainer_open(ctx, &run, &to, &tr));
    EXPECT_OK(nnt_ctx_wait(ctx));
    int64_t peak_open = ram_peak();
    nnt_layer *model = NULL;
    EXPECT_OK(nnt_trainer_parts(tr, &model, NULL, NULL, NULL));
    read_params(model, &got);
    nnt_trainer_destroy(tr);

    EXPECT_OK(nnt_ctx_destroy(ctx));   /* (StarPU's cache of freed buffers goes with it) */
    ctx = test_ctx();
    EXPECT_OK(nnt_ctx_set_precision(ctx, NNT_PRECISION_BF16));
    ram_peak();
    nnt_layer *ref = NULL;
    EXPECT_OK(nnt_model_open(ctx, NULL, &c, B, T, NULL, to.seed, &ref));
    EXPECT_OK(nnt_ctx_wait(ctx));   /* every matrix written in fp32 (else the peak depends on
                                       how far the workers got before the narrowing) */
    EXPECT_OK(nnt_model_lora_add(ref, &lo));
    EXPECT_OK(nnt_ctx_wait(ctx));
    int64_t peak_ref = ram_peak();
    read_params(ref, &want);
    nnt_layer_destroy(ref);

    int64_t narrowed = 0;
    ck_assert_int_eq(got.n, want.n);
    for (int64_t i = 0; i < got.n; i++) {
        ck_assert_str_eq(got.name[i], want.name[i]);
        ck_assert_msg(got.dtype[i] == want.dtype[i] && got.bytes[i] == want.bytes[i] &&
                      got.frozen[i] == want.frozen[i], "%s: dtype %d / %d, %zu / %zu bytes, "
                      "frozen %d / %d", got.name[i], (int)got.dtype[i], (int)want.dtype[i],
                      got.bytes[i], want.bytes[i], got.frozen[i], want.frozen[i]);
        ck_assert_msg(memcmp(got.value[i], want.value[i], got.bytes[i]) == 0, "%s: other "
                      "values than the model opened from seed %llu", got.name[i],
                      (unsigned long long)to.seed);
        narrowed += got.dtype[i] == NNT_BF16 ? (int64_t)got.bytes[i] : 0;   /* fp32 - bf16 */
        free(got.value[i]), free(want.value[i]);
    }
    ck_assert_msg(narrowed > 0, "no matrix kept in bf16");
    ck_assert_msg(peak_open <= peak_ref - narrowed / 2, "RAM peak %lld opening the run, "
                  "%lld opening the model then adding adapters: frozen matrices were held in "
                  "fp32 (%lld bytes more than in bf16)", (long long)peak_open,
                  (long long)peak_ref, (long long)narrowed);
    printf("test_trainer_open fine_tune_fresh_bf16: the parameters of the model opened from "
           "the seed; RAM peak %lld bytes against %lld (frozen matrices: %lld bytes more in "
           "fp32)\n", (long long)peak_open, (long long)peak_ref, (long long)narrowed);
}
END_TEST

/* A resume that names no model takes the checkpoint's: a LoRA run on the Llama directory of
 * tests/fixtures/lora_tiny/llama (its base), stopped after step 3 and resumed with neither
 * model_source nor model_config, goes on bit for bit and names its base; a run on a fresh
 * model resumed so gets a model of the checkpoint's configuration. */
START_TEST(test_resume_takes_model)
{
    const char *top = getenv("top_srcdir") ? getenv("top_srcdir") : ".";
    char base[512], text[16384], *abs;
    snprintf(base, sizeof base, "%s/tests/fixtures/lora_tiny/llama", top);
    ck_assert_ptr_nonnull(abs = realpath(base, NULL));
    nnt_optim_options oo = optim_options();
    nnt_lora_options lo = NNT_LORA_OPTIONS_INIT;
    lo.rank = 2, lo.alpha = 4, lo.targets = "q_proj,down_proj";
    nnt_run_config run = run_config(NULL, &oo);
    run.model_source = base, run.val_split = 0, run.lora = &lo, run.tokenizer = NNT_TOKENIZER_BYTES;
    reports full, part, rest;
    memset(&full, 0, sizeof full), memset(&part, 0, sizeof part), memset(&rest, 0, sizeof rest);
    nnt_trainer_options to = loop_options(&full);
    nnt_trainer *tr = NULL;
    EXPECT_OK(nnt_trainer_open(ctx, &run, &to, &tr));
    EXPECT_OK(nnt_trainer_run(tr, 0));
    nnt_trainer_destroy(tr);
    save_first_steps(&run, &part, path_ckpt);
    to = loop_options(&rest);
    to.checkpoint = path_ckpt, to.resume = path_ckpt;
    run.model_source = NULL;   /* (and no model_config): the checkpoint's */
    EXPECT_OK(nnt_trainer_open(ctx, &run, &to, &tr));
    EXPECT_OK(nnt_trainer_text(tr, NNT_TRAINER_TEXT_SUMMARY, NULL, 0, text, sizeof text));
    char want[1024];
    snprintf(want, sizeof want, "(the rest frozen: the base %s)", abs);
    ck_assert_msg(strstr(text, want) != NULL, "'%s' has no '%s'", text, want);
    EXPECT_OK(nnt_trainer_run(tr, 0));
    nnt_trainer_destroy(tr);
    for (int s = 1; s <= STEPS; s++)
        expect_same_report(&full.step[s], s <= 3 ? &part.step[s] : &rest.step[s]);
    free(abs);

    /* a fresh model's run: resumed into a model of the checkpoint's configuration */
    nnt_model_config c = tiny_config();
    run = run_config(&c, &oo);
    to = loop_options(&part);
    to.checkpoint = path_ckpt, to.steps = 3;
    EXPECT_OK(nnt_trainer_open(ctx, &run, &to, &tr));
    EXPECT_OK(nnt_trainer_run(tr, 2));
    EXPECT_OK(nnt_trainer_save(tr, NULL));
    nnt_trainer_destroy(tr);
    run.model_config = NULL, to.resume = path_ckpt;
    EXPECT_OK(nnt_trainer_open(ctx, &run, &to, &tr));
    nnt_trainer_info ti = NNT_TRAINER_INFO_INIT;
    EXPECT_OK(nnt_trainer_info_get(tr, &ti));
    ck_assert_int_eq(ti.step, 2);
    EXPECT_OK(nnt_trainer_run(tr, 0));
    nnt_trainer_destroy(tr);
}
END_TEST

static void copy_file(const char *from, const char *to)
{
    char cmd[512];
    snprintf(cmd, sizeof cmd, "cp '%s' '%s'", from, to);
    ck_assert_int_eq(system(cmd), 0);
}

static int exists(const char *dir_, const char *name)
{
    char p[256];
    struct stat st;
    snprintf(p, sizeof p, "%s/%s", dir_, name);
    return stat(p, &st) == 0;
}

/* One run of the trainer into log_dir out (its checkpoint there), keep_previous as given. */
static void run_into(const char *out, int keep, const char *resume, char *kept, size_t cap)
{
    nnt_model_config c = tiny_config();
    nnt_optim_options oo = optim_options();
    oo.warmup_steps = 1;   /* (below the 2 steps) */
    nnt_run_config run = run_config(&c, &oo);
    char ckpt[128];
    reports r;
    memset(&r, 0, sizeof r);
    snprintf(ckpt, sizeof ckpt, "%s/checkpoint.safetensors", out);
    nnt_trainer_options to = loop_options(&r);
    to.steps = 2, to.log_dir = out, to.checkpoint = ckpt, to.resume = resume;
    to.keep_previous = keep, to.keep_also = "model.bin,none.txt";
    nnt_trainer *tr = NULL;
    nnt_trainer_info ti = NNT_TRAINER_INFO_INIT;
    EXPECT_OK(nnt_trainer_open(ctx, &run, &to, &tr));
    EXPECT_OK(nnt_trainer_info_get(tr, &ti));
    snprintf(kept, cap, "%s", ti.kept_previous ? ti.kept_previous : "");
    EXPECT_OK(nnt_trainer_run(tr, 0));
    EXPECT_OK(nnt_trainer_save(tr, NULL));
    nnt_trainer_destroy(tr);
}

/* keep_previous: a second run into one directory moves the first's checkpoint, logs and the
 * names of keep_also to previous-1, a third run's predecessor to previous-2; a run resuming
 * the checkpoint there, or without keep_previous, moves nothing. */
START_TEST(test_keep_previous)
{
    char out[128], kept[256], want[160], prev[160];
    snprintf(out, sizeof out, "%s/out", dir);
    run_into(out, 1, NULL, kept, sizeof kept);
    ck_assert_str_eq(kept, "");   /* nothing there */
    snprintf(prev, sizeof prev, "%s/model.bin", out);
    FILE *f = fopen(prev, "w");
    ck_assert_ptr_nonnull(f);
    fclose(f);
    run_into(out, 1, NULL, kept, sizeof kept);
    snprintf(want, sizeof want, "%s/previous-1", out);
    ck_assert_str_eq(kept, want);
    ck_assert(exists(want, "checkpoint.safetensors") && exists(want, "train.csv") &&
              exists(want, "loss.svg") && exists(want, "model.bin"));
    ck_assert(!exists(out, "model.bin") && exists(out, "checkpoint.safetensors"));
    run_into(out, 1, NULL, kept, sizeof kept);
    snprintf(want, sizeof want, "%s/previous-2", out);
    ck_assert_str_eq(kept, want);
    snprintf(prev, sizeof prev, "%s/checkpoint.safetensors", out);
    run_into(out, 1, prev, kept, sizeof kept);   /* (its own checkpoint: continued) */
    ck_assert_str_eq(kept, "");
    snprintf(want, sizeof want, "%s/copy.safetensors", out);
    copy_file(prev, want);
    run_into(out, 1, want, kept, sizeof kept);   /* (another file of the directory: too) */
    ck_assert_str_eq(kept, "");
    run_into(out, 0, NULL, kept, sizeof kept);
    ck_assert_str_eq(kept, "");
    ck_assert(!exists(out, "previous-3"));
}
END_TEST


static int64_t source_vocab(const char *source, int want_rc)
{
    nnt_tokenizer *tok = (nnt_tokenizer *)1;
    int64_t v = 0;
    EXPECT_RC(nnt_tokenizer_of_source(source, &tok), want_rc);
    if (tok)
        EXPECT_OK(nnt_tokenizer_vocab_size(tok, &v));
    nnt_tokenizer_destroy(tok);
    return v;
}

/* nnt_tokenizer_of_source: a directory's tokenizer.json (before its vocab.json and
 * merges.txt), its vocab.json and merges.txt, none; a checkpoint's recorded tokenizer (the
 * file, or its directory), refused naming the file once it is gone; none for NULL, a preset,
 * a token file. */
START_TEST(test_tokenizer_of_source)
{
    const char *top = getenv("top_srcdir") ? getenv("top_srcdir") : ".";
    char json[1024], bpe[512], both[128], path[1024];
    snprintf(json, sizeof json, "%s/tests/fixtures/hftok/llama3.json", top);   /* 1201 */
    snprintf(bpe, sizeof bpe, "%s/tests/fixtures/bpe", top);   /* GPT-2's files, cut */
    snprintf(both, sizeof both, "%s/both", dir);
    ck_assert_int_eq(mkdir(both, 0777), 0);
    snprintf(path, sizeof path, "%s/tokenizer.json", both);
    copy_file(json, path);
    snprintf(path, sizeof path, "%s/vocab.json", both);
    snprintf(json, sizeof json, "%s/vocab.json", bpe);
    copy_file(json, path);
    nnt_tokenizer *ref = NULL;
    int64_t bpe_vocab = 0;
    snprintf(path, sizeof path, "%s/merges.txt", bpe);
    EXPECT_OK(nnt_tokenizer_bpe_load(json, path, &ref));
    EXPECT_OK(nnt_tokenizer_vocab_size(ref, &bpe_vocab));
    nnt_tokenizer_destroy(ref);
    ck_assert_int_eq(source_vocab(both, NNT_OK), 1201);
    ck_assert_int_eq(source_vocab(bpe, NNT_OK), bpe_vocab);
    ck_assert(bpe_vocab > 256 && bpe_vocab != 1201);
    ck_assert_int_eq(source_vocab(dir, NNT_OK), 0);   /* (no tokenizer files) */
    ck_assert_int_eq(source_vocab(NULL, NNT_OK), 0);
    ck_assert_int_eq(source_vocab("gpt2", NNT_OK), 0);
    ck_assert_int_eq(source_vocab(path_data, NNT_OK), 0);

    /* a run with the json tokenizer of both/tokenizer.json, its checkpoint in ckdir */
    nnt_model_config c = tiny_config();
    c.vocab = 1201;
    nnt_optim_options oo = optim_options();
    oo.warmup_steps = 0;   /* (one step) */
    nnt_run_config run = run_config(&c, &oo);
    char ckdir[128], ckpt[160];
    snprintf(ckdir, sizeof ckdir, "%s/run", dir);
    snprintf(ckpt, sizeof ckpt, "%s/checkpoint.safetensors", ckdir);
    snprintf(path, sizeof path, "%s/tokenizer.json", both);
    run.tokenizer = NNT_TOKENIZER_JSON, run.tokenizer_json = both, run.val_split = 0;
    reports r;
    nnt_trainer_options to = loop_options(&r);
    to.steps = 1, to.log_dir = ckdir, to.checkpoint = ckpt;
    nnt_trainer *tr = NULL;
    EXPECT_OK(nnt_trainer_open(ctx, &run, &to, &tr));
    EXPECT_OK(nnt_trainer_run(tr, 0));
    EXPECT_OK(nnt_trainer_save(tr, NULL));
    nnt_trainer_destroy(tr);
    ck_assert_int_eq(source_vocab(ckpt, NNT_OK), 1201);
    ck_assert_int_eq(source_vocab(ckdir, NNT_OK), 1201);
    ck_assert_int_eq(unlink(path), 0);
    ck_assert_int_eq(source_vocab(ckpt, NNT_E_IO), 0);
    ck_assert_ptr_nonnull(strstr(nnt_ctx_last_error(NULL), "tokenizer.json, which is not there"));
    /* the same with GPT-2's files (both recorded) */
    char vocab_json[1024], merges_txt[1024];
    snprintf(vocab_json, sizeof vocab_json, "%s/vocab.json", bpe);
    snprintf(merges_txt, sizeof merges_txt, "%s/merges.txt", bpe);
    run.tokenizer = NNT_TOKENIZER_BPE, run.tokenizer_json = NULL;
    run.bpe_vocab = vocab_json, run.bpe_merges = merges_txt;
    EXPECT_OK(nnt_trainer_open(ctx, &run, &to, &tr));
    EXPECT_OK(nnt_trainer_run(tr, 0));
    EXPECT_OK(nnt_trainer_save(tr, NULL));
    nnt_trainer_destroy(tr);
    ck_assert_int_eq(source_vocab(ckpt, NNT_OK), bpe_vocab);
}
END_TEST

/* nnt_trainer_text: the model, a step's line in full and cut to a width, a live line, a
 * validation's, the run's and the memory's summaries, as nnt-train prints them. */
START_TEST(test_text)
{
    nnt_model_config c = tiny_config();
    nnt_optim_options oo = optim_options();
    nnt_run_config run = run_config(&c, &oo);
    reports r;
    memset(&r, 0, sizeof r);
    nnt_trainer_options to = loop_options(&r);
    nnt_trainer *tr = NULL;
    char text[1024], want[1024];
    EXPECT_OK(nnt_trainer_open(ctx, &run, &to, &tr));
    EXPECT_OK(nnt_trainer_run(tr, 2));
    nnt_trainer_info ti = NNT_TRAINER_INFO_INIT;
    EXPECT_OK(nnt_trainer_info_get(tr, &ti));

    EXPECT_OK(nnt_trainer_text(tr, NNT_TRAINER_TEXT_MODEL, NULL, 0, text, sizeof text));
    snprintf(want, sizeof want, "GPT-2 L 1, C 16, NH 2, V 32, context 8: %.3fM parameters",
             (double)ti.params / 1e6);
    ck_assert_str_eq(text, want);

    const nnt_trainer_report *s2 = &r.step[2];
    EXPECT_OK(nnt_trainer_text(tr, NNT_TRAINER_TEXT_REPORT, s2, 0, text, sizeof text));
    int n = snprintf(want, sizeof want, "step 2/8  loss %.6f  lr %.3e  norm %7.4f  %8.1f ms  "
                     "%8.0f tok/s  MFU ", s2->loss, s2->lr, s2->grad_norm, s2->ms,
                     s2->tokens_per_s);
    ck_assert_msg(!strncmp(text, want, (size_t)n), "'%s' is not '%s...'", text, want);
    EXPECT_OK(nnt_trainer_text(tr, NNT_TRAINER_TEXT_REPORT, s2, 40, text, sizeof text));
    snprintf(want, sizeof want, "step 2/8  loss %.6f  lr %.3e", s2->loss, s2->lr);
    ck_assert_str_eq(text, want);   /* (37 columns: the norm would pass 40) */
    EXPECT_OK(nnt_trainer_text(tr, NNT_TRAINER_TEXT_REPORT, s2, 37, text, sizeof text));
    snprintf(want, sizeof want, "step 2/8  loss %.6f", s2->loss);
    ck_assert_str_eq(text, want);   /* (a line never reaches the last column) */
    EXPECT_OK(nnt_trainer_text(tr, NNT_TRAINER_TEXT_LIVE, s2, 0, text, sizeof text));
    snprintf(want, sizeof want, "step 2/8  loss %.4f (avg %.4f)  ETA ", s2->loss,
             0.9 * r.step[1].loss + 0.1 * s2->loss);
    ck_assert_msg(!strncmp(text, want, strlen(want)), "'%s' is not '%s...'", text, want);

    nnt_trainer_report v = *s2;
    v.event = NNT_TRAINER_VALIDATION, v.step = 4, v.loss = 3.25, v.tokens = 48, v.ms = 1250;
    EXPECT_OK(nnt_trainer_text(tr, NNT_TRAINER_TEXT_REPORT, &v, 0, text, sizeof text));
    ck_assert_str_eq(text, "val  4/8  loss 3.250000  on 48 held-out tokens (1.25 s)");

    EXPECT_OK(nnt_trainer_text(tr, NNT_TRAINER_TEXT_RUN, NULL, 0, text, sizeof text));
    snprintf(want, sizeof want, "trained steps 1..2 in ");
    ck_assert_msg(!strncmp(text, want, strlen(want)), "'%s'", text);
    snprintf(want, sizeof want, ": %.1f ms/step, %.0f tokens/s", ti.step_ms, ti.tokens_per_s);
    ck_assert_msg(strstr(text, want) != NULL, "'%s' has no '%s'", text, want);
    snprintf(want, sizeof want, " (mean without the first step); last loss %.6f", s2->loss);
    ck_assert_msg(strstr(text, want) != NULL, "'%s' has no '%s'", text, want);
    /* the validation after the run's last step (2) */
    snprintf(want, sizeof want, "\nvalidation: loss %.6f (perplexity %.4g) at step 2 (lowest "
             "%.6f at step 2); 1 validation in ", r.val[2], exp(r.val[2]), r.val[2]);
    ck_assert_msg(strstr(text, want) != NULL, "'%s' has no '%s'", text, want);
    ck_assert_int_eq(ti.steps_run, 2);
    ck_assert(ti.step_ms == r.step[2].ms && ti.last_loss == s2->loss);

    EXPECT_OK(nnt_trainer_text(tr, NNT_TRAINER_TEXT_MEMORY, NULL, 0, text, sizeof text));
    ck_assert_ptr_nonnull(strstr(text, " moved between nodes; "));
    /* the process's resident peak (getrusage) holds at least the tiles' RAM peak */
    const char *ram = strstr(text, "RAM peak "), *rss = strstr(text, "; process peak ");
    ck_assert_msg(ram && rss, "'%s'", text);
    double ram_v = 0, rss_v = 0;
    char ram_u[4] = "", rss_u[4] = "";
    ck_assert_int_eq(sscanf(ram + strlen("RAM peak "), "%lf %3s", &ram_v, ram_u), 2);
    ck_assert_int_eq(sscanf(rss + strlen("; process peak "), "%lf %3s", &rss_v, rss_u), 2);
    ram_v *= strcmp(ram_u, "GiB") == 0 ? 1024 : 1, rss_v *= strcmp(rss_u, "GiB") == 0 ? 1024 : 1;
    ck_assert_msg(rss_v >= ram_v && rss_v > 1.0, "'%s'", text);
    EXPECT_RC(nnt_trainer_text(tr, NNT_TRAINER_TEXT_MODEL, NULL, 0, text, 8), NNT_E_INVAL);
    EXPECT_RC(nnt_trainer_text(tr, NNT_TRAINER_TEXT_REPORT, NULL, 0, text, sizeof text),
              NNT_E_INVAL);
    nnt_trainer_destroy(tr);
}
END_TEST

/* The line of text that starts with label (the text's own buffer is changed). */
static const char *line_of(char *text, const char *label)
{
    for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n"))
        if (!strncmp(line, label, strlen(label)))
            return line;
    return "";
}

/* nnt_trainer_text's SUMMARY, WARNINGS and FILES: the data, validation, optimizer and MFU
 * lines of the run; the files after its logs and checkpoint; too little data; a resume with
 * another accum and order, noted. */
START_TEST(test_text_summary)
{
    nnt_model_config c = tiny_config();
    nnt_optim_options oo = optim_options();
    nnt_run_config run = run_config(&c, &oo);
    reports r;
    memset(&r, 0, sizeof r);
    nnt_trainer_options to = loop_options(&r);
    char out[128], text[16384], want[1024], copy[16384];
    snprintf(out, sizeof out, "%s/out/logs", dir);   /* (created by the trainer) */
    to.log_dir = out, to.checkpoint = path_ckpt;
    nnt_trainer *tr = NULL;
    EXPECT_OK(nnt_trainer_open(ctx, &run, &to, &tr));
    EXPECT_OK(nnt_trainer_text(tr, NNT_TRAINER_TEXT_SUMMARY, NULL, 0, text, sizeof text));
    ck_assert_int_ne(text[strlen(text) - 1], '\n');
    /* 340 tokens trained on, 48 a step: 8 x 48 / 340 = 1.13 epochs; 3 windows of 60 */
    snprintf(want, sizeof want, "data:      %s, llm.c token file: 340 tokens to train on (the "
             "last 60 held out); 48 tokens a step (B 2 x T 8 x accum 3), 1.13 epochs in 8 "
             "steps", path_data);
    ck_assert_str_eq(line_of(strcpy(copy, text), "data:"), want);
    ck_assert_str_eq(line_of(strcpy(copy, text), "validate:"), "validate:  the last 60 tokens "
                     "of the data (split 0.15): 3 batches of B x T (48 tokens) every 4 steps "
                     "and after the last");
    ck_assert_str_eq(line_of(strcpy(copy, text), "optimizer:"), "optimizer: adamw, lr 0.003 "
                     "(cosine schedule, warmup 2, min 0.0003), betas 0.9 0.999, eps 1e-08, "
                     "weight decay 0.1, momentum 0, grad clip 1; the update after the "
                     "backward");
    ck_assert_str_eq(line_of(strcpy(copy, text), "MFU:"), "MFU:       not computed: no peak");
    ck_assert_str_eq(line_of(strcpy(copy, text), "tiling:"), "tiling:    batch 2, seq 8, "
                     "channels 16, hidden 64, vocab 32, heads 2, head_dim 8");
    ck_assert_ptr_null(strstr(text, "resumed:"));
    /* width 60: every line before column 60, a continuation indented 11, at a space: the
     * same text once the breaks are spaces again */
    char wrapped[16384], *w = wrapped, *line;
    EXPECT_OK(nnt_trainer_text(tr, NNT_TRAINER_TEXT_SUMMARY, NULL, 60, wrapped, sizeof wrapped));
    ck_assert(strlen(wrapped) > strlen(text));
    for (line = strtok(strcpy(copy, wrapped), "\n"); line; line = strtok(NULL, "\n"))
        ck_assert_msg(strlen(line) < 60, "'%s': %zu columns", line, strlen(line));
    for (char *r = wrapped; *r;)
        if (!strncmp(r, "\n           ", 12))
            *w++ = ' ', r += 12;
        else
            *w++ = *r++;
    *w = '\0';
    ck_assert_str_eq(wrapped, text);
    EXPECT_OK(nnt_trainer_text(tr, NNT_TRAINER_TEXT_WARNINGS, NULL, 0, text, sizeof text));
    ck_assert_str_eq(text, "");
    EXPECT_OK(nnt_trainer_text(tr, NNT_TRAINER_TEXT_FILES, NULL, 0, text, sizeof text));
    ck_assert_str_eq(text, "");   /* nothing written yet */
    EXPECT_OK(nnt_trainer_run(tr, 4));
    EXPECT_OK(nnt_trainer_save(tr, NULL));
    EXPECT_OK(nnt_trainer_text(tr, NNT_TRAINER_TEXT_FILES, NULL, 0, text, sizeof text));
    snprintf(want, sizeof want, "  %s/train.csv  (log: step, loss, lr, grad norm, ms, tokens/s, "
             "MFU, memory)\n  %s/loss.svg  (loss curve)\n  %s/val.csv  (validation log: step, "
             "loss on the held-out tokens, tokens)\n  %s  (checkpoint: continue with nnt-train "
             "--resume, generate with nnt-generate --checkpoint)", out, out, out, path_ckpt);
    ck_assert_str_eq(text, want);
    nnt_trainer_destroy(tr);

    /* resumed at step 4 with accum 2, shuffled, 20 steps: 2 x 16 x 20 / 340 = 1.9 passes */
    to.accum = 2, to.shuffle = 1, to.steps = 20, to.resume = path_ckpt, to.log_dir = NULL;
    EXPECT_OK(nnt_trainer_open(ctx, &run, &to, &tr));
    EXPECT_OK(nnt_trainer_text(tr, NNT_TRAINER_TEXT_SUMMARY, NULL, 0, text, sizeof text));
    snprintf(want, sizeof want, "resumed:   %s at step 4, data position 0", path_ckpt);
    ck_assert_str_eq(line_of(strcpy(copy, text), "resumed:"), want);
    ck_assert_ptr_nonnull(strstr(text, "\nnote:      the checkpoint was trained with another "
                                       "batch, seq or accum: the data order differs"));
    ck_assert_ptr_nonnull(strstr(text, "\nnote:      the checkpoint was trained with 8 steps: "
                                       "the learning-rate schedule now ends at step 20"));
    ck_assert_ptr_nonnull(strstr(text, "\nnote:      the checkpoint read the data in order, "
                                       "this run shuffles it: the data position restarts at 0"));
    ck_assert_ptr_null(strstr(text, "checkpoint held out"));
    nnt_trainer_destroy(tr);

    /* 1000 steps of 32 tokens over 340: 94 passes, no warning; 1100: 104, one */
    to.resume = NULL, to.shuffle = 0, to.steps = 1000;
    EXPECT_OK(nnt_trainer_open(ctx, &run, &to, &tr));
    EXPECT_OK(nnt_trainer_text(tr, NNT_TRAINER_TEXT_WARNINGS, NULL, 0, text, sizeof text));
    ck_assert_str_eq(text, "");
    nnt_trainer_destroy(tr);
    to.steps = 1100;
    EXPECT_OK(nnt_trainer_open(ctx, &run, &to, &tr));
    EXPECT_OK(nnt_trainer_text(tr, NNT_TRAINER_TEXT_WARNINGS, NULL, 0, text, sizeof text));
    ck_assert_str_eq(text, "too little data: 340 training tokens for 1100 steps of 32 tokens "
                     "(B 2 x T 8 x accum 2) = 104 passes over each token (more than 100): the "
                     "model will memorise them; give more data or fewer steps");
    nnt_trainer_destroy(tr);
}
END_TEST

/* nnt_trainer_handle_signals: SIGUSR1 during step 2 writes a checkpoint after it (reported
 * as requested) and the run goes on; SIGTERM during step 3 stops it after that step
 * (stop_signal), and a second SIGTERM reaches the handler there was before; off, every
 * action is the one before; a second trainer is refused while the first holds them. */
static volatile sig_atomic_t earlier_handler_calls;
static void earlier_handler(int sig)
{
    (void)sig;
    earlier_handler_calls++;
}

typedef struct signal_run {
    int64_t steps, checkpoints_requested;
} signal_run;

static int raise_on_report(const nnt_trainer_report *rep, void *user)
{
    signal_run *sr = user;
    if (rep->event == NNT_TRAINER_CHECKPOINT)
        sr->checkpoints_requested += rep->requested;
    if (rep->event != NNT_TRAINER_STEP)
        return 0;
    sr->steps++;
    if (rep->step == 2)
        raise(SIGUSR1);
    if (rep->step == 3)
        raise(SIGTERM);
    return 0;
}

START_TEST(test_signals)
{
    nnt_model_config c = tiny_config();
    nnt_optim_options oo = optim_options();
    nnt_run_config run = run_config(&c, &oo);
    nnt_trainer_options to = NNT_TRAINER_OPTIONS_INIT;
    signal_run sr = {0, 0};
    to.batch = B, to.seq = T, to.steps = STEPS, to.callback = raise_on_report, to.user = &sr;
    to.checkpoint = path_ckpt;
    struct sigaction mine, now, usr1_before, int_before;
    ck_assert_int_eq(sigaction(SIGUSR1, NULL, &usr1_before), 0);
    ck_assert_int_eq(sigaction(SIGINT, NULL, &int_before), 0);
    memset(&mine, 0, sizeof mine);
    mine.sa_handler = earlier_handler;
    sigemptyset(&mine.sa_mask);
    ck_assert_int_eq(sigaction(SIGTERM, &mine, NULL), 0);
    nnt_trainer *tr = NULL, *other = NULL;
    EXPECT_OK(nnt_trainer_open(ctx, &run, &to, &tr));
    EXPECT_OK(nnt_trainer_open(ctx, &run, &to, &other));
    EXPECT_OK(nnt_trainer_handle_signals(tr, 1));
    EXPECT_FAIL_MSG(nnt_trainer_handle_signals(other, 1), NNT_E_STATE, "another trainer");
    EXPECT_RC(nnt_trainer_handle_signals(tr, 2), NNT_E_INVAL);
    EXPECT_OK(nnt_trainer_run(tr, 0));
    nnt_trainer_info ti = NNT_TRAINER_INFO_INIT;
    EXPECT_OK(nnt_trainer_info_get(tr, &ti));
    ck_assert_int_eq(ti.step, 3);   /* stopped after the step the signal came in */
    ck_assert_int_eq(ti.stop_signal, SIGTERM);
    ck_assert_int_eq(sr.checkpoints_requested, 1);
    nnt_train_state st = NNT_TRAIN_STATE_INIT;
    EXPECT_OK(nnt_train_state_info(NULL, path_ckpt, &st));   /* SIGUSR1's, of step 2 */
    nnt_train_state_clear(&st);
    ck_assert_int_eq(earlier_handler_calls, 0);
    raise(SIGTERM);   /* the second: the action there was before */
    ck_assert_int_eq(earlier_handler_calls, 1);
    EXPECT_OK(nnt_trainer_handle_signals(tr, 0));
    ck_assert_int_eq(sigaction(SIGUSR1, NULL, &now), 0);
    ck_assert(now.sa_handler == usr1_before.sa_handler);
    nnt_trainer_destroy(tr);
    EXPECT_OK(nnt_trainer_handle_signals(other, 1));   /* free again */
    nnt_trainer_destroy(other);   /* (puts them back) */
    ck_assert_int_eq(sigaction(SIGINT, NULL, &now), 0);
    ck_assert(now.sa_handler == int_before.sa_handler);
    signal(SIGTERM, SIG_DFL);
}
END_TEST

/* A failure about one field of the description names it first. */
static void expect_field_failure(const nnt_run_config *run, const nnt_trainer_options *to,
                                 int want, const char *field)
{
    nnt_trainer *tr = (nnt_trainer *)1;
    EXPECT_RC(nnt_trainer_open(ctx, run, to, &tr), want);
    ck_assert_ptr_null(tr);
    const char *m = nnt_ctx_last_error(NULL);
    ck_assert_msg(!strncmp(m, field, strlen(field)) && m[strlen(field)] == ':',
                  "'%s' does not start with %s:", m, field);
}

START_TEST(test_open_failures)
{
    nnt_model_config c = tiny_config();
    nnt_optim_options oo = optim_options();
    nnt_lora_options lo = NNT_LORA_OPTIONS_INIT;
    reports r;
    nnt_trainer_options to = loop_options(&r);
    char small[96], tiny[96], missing[96];
    snprintf(small, sizeof small, "%s/small.bin", dir);
    snprintf(tiny, sizeof tiny, "%s/tiny.bin", dir);
    snprintf(missing, sizeof missing, "%s/none.bin", dir);
    write_tokens(small, 10);   /* fewer than B T + 1 */
    write_tokens(tiny, 6);     /* fewer than T + 1 */
    nnt_run_config run = run_config(&c, &oo);
    run.val_split = 1.0;
    expect_field_failure(&run, &to, NNT_E_INVAL, "val_split");
    run = run_config(&c, &oo), run.val_split = 0, run.val_data = small;
    expect_field_failure(&run, &to, NNT_E_INVAL, "val_data");
    ck_assert_ptr_nonnull(strstr(nnt_ctx_last_error(NULL), "fewer than one batch"));
    run = run_config(&c, &oo), run.data = missing;
    expect_field_failure(&run, &to, NNT_E_IO, "data");
    run = run_config(&c, &oo), run.val_split = 0, run.data = tiny, to.shuffle = 1;
    expect_field_failure(&run, &to, NNT_E_INVAL, "shuffle");
    to.shuffle = 0;
    run = run_config(&c, &oo), run.lora = &lo, run.load_peft = dir;
    expect_field_failure(&run, &to, NNT_E_INVAL, "lora");
    run = run_config(&c, &oo), run.freeze = "nothing.*";
    expect_field_failure(&run, &to, NNT_E_INVAL, "freeze");
    oo.lr = 0.01, oo.min_lr = 0.5;
    run = run_config(&c, &oo);
    expect_field_failure(&run, &to, NNT_E_INVAL, "min_lr");
    run = run_config(NULL, &oo);
    expect_field_failure(&run, &to, NNT_E_INVAL, "model_config");
}
END_TEST

int main(void)
{
    Suite *s = suite_create("trainer_open");
    TCase *tc = tcase_create("core");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, test_open_matches_create);
    tcase_add_test(tc, test_older_sizes);
    tcase_add_test(tc, test_early_stop);
    tcase_add_test(tc, test_label_smoothing);
    tcase_add_test(tc, test_neftune);
    tcase_add_test(tc, test_fine_tune_resume);
    tcase_add_test(tc, test_keep_previous);
    tcase_add_test(tc, test_tokenizer_of_source);
    tcase_add_test(tc, test_text);
    tcase_add_test(tc, test_text_summary);
    tcase_add_test(tc, test_signals);
    tcase_add_test(tc, test_resume_takes_model);
    tcase_add_test(tc, test_open_failures);
    tcase_add_test(tc, test_fine_tune_fresh_bf16);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
