/* SPDX-License-Identifier: MIT */
/* Unpaired preference rows (nnt_trainer_options.dpo_loss NNT_DPO_KTO and
 * _APO_ZERO_UNPAIRED) against TRL 1.16's own KTOTrainer (tests/fixtures/kto_tiny,
 * tests/gen_kto_fixtures.py): a tiny Llama of the chatml tokenizer's 400 ids, 12 training
 * records in rows of T 96 (7 desirable, 5 undesirable), 8 held out, beta 0.3,
 * desirable_weight 1.3, undesirable_weight 0.7, AdamW with weight decay 0.1 on the matrices:
 * the first micro-batch's gradient, 3 steps' losses and kl, the parameters after them and the
 * held-out loss over 3 tilings; B 2 accum 2 (runs of 2 rows: other KL rows); APO-zero
 * unpaired; a resumed run continues against the recorded reference bit for bit; shuffled
 * runs keep their KL rows; the row term's derivative; unpaired records encoded as KTOTrainer
 * tokenizes them; refusals. */
#include "testutil.h"
#include "fixture_st.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#define T 96
#define STEPS 3
#define TRAIN_ROWS 12
#define VAL_ROWS 8

/* Measured (2-core AMD Zen 4; worst over the 3 tilings, B 2 accum 2 and APO-zero): the
 * first gradient rel 5.3e-6, step losses 3.2e-6 (absolute, below 1), kl 4.6e-6 and reward
 * margins 2.4e-5 (APO-zero's; KTO's 7.8e-6: relative above 1), parameters after 3 steps rel
 * 4.5e-6, held-out losses 9.4e-7. About 10x. */
#define GRAD_TOL 5.3e-5
#define LOSS_TOL 3.2e-5
#define KL_TOL 4.6e-5
#define MARGIN_TOL 2.4e-4
#define PARAM_TOL 4.5e-5

static nnt_ctx *ctx;
static void setup(void) { ctx = test_ctx(); }
static void teardown(void) { EXPECT_OK(nnt_ctx_destroy(ctx)); }

static const char *path_of(const char *name)
{
    return fixture_path_in("kto_tiny", name, NULL);
}

/* whole; batch tiles of 2, sequence tiles of 37 (through a row's prompt), heads of 3; batch
 * tiles of 1, sequence tiles of 50, one head */
static const nnt_tiling TILINGS[3] = {
    {sizeof(nnt_tiling), 0, 0, 0, 0, 0, 0, 0},
    {sizeof(nnt_tiling), 2, 37, 5, 7, 9, 3, 0},
    {sizeof(nnt_tiling), 1, 50, 8, 16, 10, 1, 0},
};

typedef struct run_log {
    double loss[STEPS + 1], kl[STEPS + 1], margin[STEPS + 1];
    double val_loss;
} run_log;

static int on_report(const nnt_trainer_report *r, void *user)
{
    run_log *rl = user;
    if (r->event == NNT_TRAINER_STEP && r->step >= 1 && r->step <= STEPS) {
        rl->loss[r->step] = r->loss;
        rl->kl[r->step] = r->kl;
        rl->margin[r->step] = r->dpo_margin;
    }
    if (r->event == NNT_TRAINER_VALIDATION)
        rl->val_loss = r->loss;
    return 0;
}

typedef struct run {
    nnt_layer *model;
    nnt_optim *opt;
    nnt_data *data, *val;
    nnt_trainer *tr;
} run;

typedef struct run_opts {
    int64_t batch, accum;
    int loss, shuffle, update_in_backward;
    const char *checkpoint, *resume;
    int still;   /* 1: lr 0 (the policy stays the reference) */
    double desirable_weight, undesirable_weight;
} run_opts;

/* The fixture's KTO run: B 4, gradients kept after the step, weights 1.3 and 0.7 */
static run_opts fixture_opts(void)
{
    run_opts ro = {4, 1, NNT_DPO_KTO, 0, 0, NULL, NULL, 0, 1.3, 0.7};
    return ro;
}

/* The fixture's model and optimizer (AdamW lr 1e-2, weight decay 0.1 on matrices) and a
 * trainer of the fixture's options on its training and held-out rows. */
static run open_run(const nnt_tiling *tl, const run_opts *ro, run_log *rl)
{
    run r;
    nnt_tiling t = *tl;
    t.batch = t.batch && t.batch <= ro->batch ? t.batch : ro->batch;
    EXPECT_OK(nnt_model_load_hf(ctx, path_of("llama"), ro->batch, T, &t, &r.model));
    nnt_optim_options oo = NNT_OPTIM_OPTIONS_INIT;
    oo.lr = ro->still ? 0.0 : 1e-2, oo.beta1 = 0.9, oo.beta2 = 0.999, oo.eps = 1e-8, oo.weight_decay = 0.1;
    oo.grad_clip = 0.0, oo.accum_steps = ro->accum;
    EXPECT_OK(nnt_optim_create(ctx, &oo, &r.opt));
    EXPECT_OK(nnt_optim_add_layer(r.opt, r.model));   /* (decay: matrices, not norms) */
    EXPECT_OK(nnt_data_open(path_of("train.bin"), NNT_DATA_AUTO, NULL, 400, &r.data));
    EXPECT_OK(nnt_data_open(path_of("val.bin"), NNT_DATA_AUTO, NULL, 400, &r.val));
    nnt_trainer_options to = NNT_TRAINER_OPTIONS_INIT;
    to.batch = ro->batch, to.seq = T, to.accum = ro->accum, to.steps = STEPS, to.seed = 5;
    to.shuffle = ro->shuffle;
    to.dpo_beta = 0.3, to.dpo_loss = ro->loss;
    to.desirable_weight = ro->desirable_weight, to.undesirable_weight = ro->undesirable_weight;
    to.val_data = r.val, to.val_start = 0, to.val_len = VAL_ROWS * T;
    to.val_batches = VAL_ROWS / ro->batch;
    to.update_in_backward = ro->update_in_backward;
    to.checkpoint = ro->checkpoint, to.resume = ro->resume;
    to.callback = on_report, to.user = rl;
    EXPECT_OK(nnt_trainer_create(r.model, r.opt, r.data, &to, &r.tr));
    return r;
}

static void close_run(run *r)
{
    nnt_trainer_destroy(r->tr);
    nnt_data_close(r->data);
    nnt_data_close(r->val);
    nnt_optim_destroy(r->opt);
    nnt_layer_destroy(r->model);
}

/* the larger of two errors, NaN when either is (fmax would drop it) */
static double worse(double a, double b)
{
    return isnan(a) || isnan(b) ? NAN : a > b ? a : b;
}

/* The run's 3 steps' losses (and kl: the mean of each step's micro-batches'), its parameters
 * after them and its held-out loss against the fixture's keys under prefix. */
static void expect_run(nnt_st_reader *r, const char *prefix, const char *what, const run *x,
                       const run_log *rl, int64_t accum)
{
    char name[64], worst[256] = "";
    snprintf(name, sizeof name, "%slosses", prefix);
    double *losses = fixture_read_n(r, name, NNT_IO_F64, NULL);
    snprintf(name, sizeof name, "%skl", prefix);
    double *kl = fixture_read_n(r, name, NNT_IO_F64, NULL);
    snprintf(name, sizeof name, "%seval_loss", prefix);
    double *val = fixture_read_n(r, name, NNT_IO_F64, NULL);
    snprintf(name, sizeof name, "%smargins", prefix);
    double *margins = fixture_read_n(r, name, NNT_IO_F64, NULL);
    double el = 0, ek = 0, em = 0;
    for (int s = 0; s < STEPS; s++) {
        double want_kl = 0;
        for (int64_t k = 0; k < accum; k++)
            want_kl += kl[s * accum + k] / (double)accum;
        el = worse(el, fabs(rl->loss[s + 1] - losses[s]));
        ek = worse(ek, fabs(rl->kl[s + 1] - want_kl) / fmax(1.0, want_kl));
        em = worse(em, fabs(rl->margin[s + 1] - margins[s]) / fmax(1.0, fabs(margins[s])));
    }
    snprintf(name, sizeof name, "%sfinal", prefix);
    double ep = fixture_worst_against(x->model, r, name, 1, worst, sizeof worst);
    double ev = fabs(rl->val_loss - val[0]);
    printf("test_kto %s: losses %.2e, kl %.2e, margins %.2e (relative above 1), parameters rel "
           "%.2e (%s), held-out loss %.2e\n", what, el, ek, em, ep, worst, ev);
    EXPECT_TOL(el, LOSS_TOL, "%s: step losses", what);
    EXPECT_TOL(ek, KL_TOL, "%s: kl", what);
    EXPECT_TOL(em, MARGIN_TOL, "%s: reward margins", what);
    EXPECT_TOL(ep, PARAM_TOL, "%s: parameter %s after %d steps", what, worst, STEPS);
    EXPECT_TOL(ev, LOSS_TOL, "%s: held-out loss", what);
    free(losses), free(kl), free(val), free(margins);
}

/* KTO, B 4: the first micro-batch's gradient, then the run. _i: the tiling */
START_TEST(test_kto)
{
    nnt_st_reader *r = fixture_open_st_path(path_of("reference.safetensors"));
    run_log rl;
    memset(&rl, 0, sizeof rl);
    run_opts ro = fixture_opts();
    run x = open_run(&TILINGS[_i], &ro, &rl);
    EXPECT_OK(nnt_trainer_step(x.tr));
    char worst[256] = "", what[32];
    double eg = fixture_worst_against(x.model, r, "kto.grad", 0, worst, sizeof worst);
    printf("test_kto tiling %d: first loss %.9f kl %.3g, worst gradient rel %.2e (%s)\n", _i,
           rl.loss[1], rl.kl[1], eg, worst);
    /* the policy is the reference: each term w (1 - sigmoid(0)), rows 0-3 T, F, T, T */
    ck_assert_double_eq_tol(rl.loss[1], (3 * 1.3 + 0.7) / 4 * 0.5, 1e-12);
    ck_assert_double_eq_tol(rl.kl[1], 0.0, 1e-12);
    EXPECT_TOL(eg, GRAD_TOL, "tiling %d: gradient of %s", _i, worst);
    EXPECT_OK(nnt_trainer_run(x.tr, 0));   /* steps 2, 3 and the validation */
    snprintf(what, sizeof what, "kto tiling %d", _i);
    expect_run(r, "kto.", what, &x, &rl, 1);
    close_run(&x);
    nnt_st_close(r);
}
END_TEST

/* B 2 accum 2 (KTOTrainer's per_device_train_batch_size 2, gradient_accumulation_steps 2:
 * runs of 2 rows, their own KL rows, a kl each), parameters updated during the backward; and
 * APO-zero unpaired (no KL rows). _i: 0 accum, 1 APO */
START_TEST(test_accum_apo)
{
    nnt_st_reader *r = fixture_open_st_path(path_of("reference.safetensors"));
    run_log rl;
    memset(&rl, 0, sizeof rl);
    run_opts ro = fixture_opts();
    ro.batch = _i ? 4 : 2, ro.accum = _i ? 1 : 2, ro.update_in_backward = -1;
    ro.loss = _i ? NNT_DPO_APO_ZERO_UNPAIRED : NNT_DPO_KTO;
    run x = open_run(&TILINGS[_i ? 2 : 1], &ro, &rl);
    EXPECT_OK(nnt_trainer_run(x.tr, 0));
    expect_run(r, _i ? "apo." : "accum.", _i ? "apo_zero_unpaired" : "B 2 accum 2", &x, &rl,
               ro.accum);
    close_run(&x);
    nnt_st_close(r);
}
END_TEST

/* A checkpoint after step 2 resumed by a new trainer: step 3 against the recorded reference
 * (rows and KL rows), bit for bit the uninterrupted run's */
START_TEST(test_resume)
{
    test_make_tmpdir("kto");
    char ckpt[4200];
    snprintf(ckpt, sizeof ckpt, "%s", test_tmp_path("ckpt.safetensors"));
    run_log whole, first, second;
    memset(&whole, 0, sizeof whole), memset(&first, 0, sizeof first);
    memset(&second, 0, sizeof second);
    run_opts ro = fixture_opts();
    ro.update_in_backward = -1;
    run x = open_run(&TILINGS[0], &ro, &whole);
    EXPECT_OK(nnt_trainer_run(x.tr, 0));
    close_run(&x);
    ro.checkpoint = ckpt;
    x = open_run(&TILINGS[0], &ro, &first);
    EXPECT_OK(nnt_trainer_run(x.tr, 2));
    EXPECT_OK(nnt_trainer_save(x.tr, NULL));
    close_run(&x);
    ro.checkpoint = NULL, ro.resume = ckpt;
    x = open_run(&TILINGS[0], &ro, &second);
    EXPECT_OK(nnt_trainer_run(x.tr, 0));
    printf("test_kto resume: step 3 loss %.17g kl %.17g (whole run %.17g, %.17g)\n",
           second.loss[3], second.kl[3], whole.loss[3], whole.kl[3]);
    ck_assert(second.loss[1] == 0 && second.loss[2] == 0);   /* not run again */
    ck_assert_double_eq(second.loss[3], whole.loss[3]);
    ck_assert_double_eq(second.kl[3], whole.kl[3]);
    ck_assert_double_eq(second.margin[3], whole.margin[3]);
    ck_assert_double_eq(second.val_loss, whole.val_loss);
    close_run(&x);
    test_remove_tmpdir();
}
END_TEST

/* Shuffled, the policy kept the reference (lr 0): the runs of B rows in a new order, each
 * row with its run's KL row (the reference's: kl exactly 0) and each run read once in an
 * epoch (3 steps: each step's loss the labels' of its run, the 3 runs' all seen) */
START_TEST(test_shuffle)
{
    run_log rl;
    memset(&rl, 0, sizeof rl);
    run_opts ro = fixture_opts();
    ro.shuffle = 1, ro.update_in_backward = -1, ro.still = 1;
    run x = open_run(&TILINGS[1], &ro, &rl);
    EXPECT_OK(nnt_trainer_run(x.tr, 0));
    /* rows 0-3 T F T T, 4-7 F T T F, 8-11 T F T F (train.jsonl): each term w / 2 */
    double run0 = (3 * 1.3 + 0.7) / 8, other = (2 * 1.3 + 2 * 0.7) / 8, seen = 0;
    for (int s = 1; s <= STEPS; s++) {
        printf("test_kto shuffled step %d: loss %.9f kl %.3g\n", s, rl.loss[s], rl.kl[s]);
        ck_assert_double_eq_tol(rl.kl[s], 0.0, 1e-12);
        ck_assert(fabs(rl.loss[s] - run0) < 1e-12 || fabs(rl.loss[s] - other) < 1e-12);
        seen += rl.loss[s];
    }
    ck_assert_double_eq_tol(seen, run0 + 2 * other, 1e-12);   /* run 0 once */
    close_run(&x);
}
END_TEST

/* Only undesirable rows weighed (desirable_weight 0): the updates push every completion's
 * log-likelihood down, the KL rows' too, so that the mean log ratio of a micro-batch's KL rows
 * is below 0 after the first step; kl is clamped at 0 (TRL's clamp(min=0)), exactly. */
START_TEST(test_kl_clamped)
{
    run_log rl;
    memset(&rl, 0, sizeof rl);
    run_opts ro = fixture_opts();
    ro.update_in_backward = -1, ro.desirable_weight = 0.0, ro.undesirable_weight = 1.0;
    run x = open_run(&TILINGS[0], &ro, &rl);
    EXPECT_OK(nnt_trainer_run(x.tr, 0));
    printf("test_kto undesirable only: kl %.3g %.3g %.3g, losses %.6f %.6f %.6f\n", rl.kl[1],
           rl.kl[2], rl.kl[3], rl.loss[1], rl.loss[2], rl.loss[3]);
    for (int s = 1; s <= STEPS; s++)
        ck_assert_msg(rl.kl[s] == 0.0, "step %d: kl %.17g, not clamped at 0", s, rl.kl[s]);
    ck_assert_double_eq_tol(rl.loss[1], 0.5 / 4, 1e-12);   /* rows 0-3: 1 undesirable */
    ck_assert(rl.loss[3] < rl.loss[1]);
    close_run(&x);
}
END_TEST

/* (internal: lib/train/trainer_impl.h; the test links the library's objects) */
double nnt_dpo_row_loss(const nnt_trainer_options *o, double lr, double kl, int desirable,
                        double *dlr);

/* The row term against its formula and its derivative against central differences (h 1e-6,
 * double), for both losses and labels, beta 0.3 and 2, kl 0 and 1.5, log ratios of either
 * sign (relative above 1e-2). Measured: 1.3e-8 at worst; tolerance 1.3e-7. */
START_TEST(test_row_loss)
{
    static const double LR[5] = {-7.5, -1.25, 0.0, 0.5, 3.0};
    nnt_trainer_options o = NNT_TRAINER_OPTIONS_INIT;
    o.desirable_weight = 1.3, o.undesirable_weight = 0.7;
    const double h = 1e-6;
    double worst = 0.0;
    for (int k = 0; k < 2; k++)
        for (int b = 0; b < 2; b++)
            for (int good = 0; good < 2; good++)
                for (int i = 0; i < 5; i++)
                    for (int q = 0; q < 2; q++) {
                        o.dpo_loss = k ? NNT_DPO_APO_ZERO_UNPAIRED : NNT_DPO_KTO;
                        o.dpo_beta = b ? 2.0 : 0.3;
                        double lr = LR[i], kl = q ? 1.5 : 0.0, d, x, w = good ? 1.3 : 0.7;
                        double got = nnt_dpo_row_loss(&o, lr, kl, good, &d);
                        /* KTO: w (1 - sigmoid(beta (lr - kl))) or w (1 - sigmoid(beta (kl -
                         * lr))); APO-zero: w (1 - sigmoid(beta lr)) or w sigmoid(beta lr) */
                        double z = k ? o.dpo_beta * lr : o.dpo_beta * (lr - kl);
                        double s = 1.0 / (1.0 + exp(-z));
                        double want = w * (good ? 1.0 - s : k ? s : 1.0 - 1.0 / (1.0 + exp(z)));
                        double f = (nnt_dpo_row_loss(&o, lr + h, kl, good, &x) -
                                    nnt_dpo_row_loss(&o, lr - h, kl, good, &x)) / (2 * h);
                        double e = fabs(d - f) / fmax(fabs(f), 1e-2);
                        worst = fmax(worst, e);
                        ck_assert_msg(fabs(got - want) < 1e-14, "loss %d beta %g label %d lr %g "
                                      "kl %g: %.17g, formula %.17g", k, o.dpo_beta, good, lr, kl,
                                      got, want);
                        ck_assert_msg(e < 1.3e-7, "loss %d beta %g label %d lr %g kl %g: d/dlr "
                                      "%.9g (differences %.9g)", k, o.dpo_beta, good, lr, kl, d,
                                      f);
                    }
    printf("test_kto row derivatives: worst relative %.2e\n", worst);
}
END_TEST

/* The chatml tokenizer's nnt_sft */
static nnt_sft *chatml_sft(nnt_tokenizer **tok)
{
    char dir[4200], path[4300];
    snprintf(dir, sizeof dir, "%s", fixture_path_in("sft", "chatml", NULL));
    snprintf(path, sizeof path, "%s/tokenizer.json", dir);
    EXPECT_OK(nnt_tokenizer_hf_load(path, tok));
    nnt_sft_options so = NNT_SFT_OPTIONS_INIT;
    so.tokenizer_config = dir;
    nnt_sft *s = NULL;
    EXPECT_OK(nnt_sft_create(*tok, &so, &s));
    return s;
}

/* The fixture's NAME.jsonl records (*rec) and KTOTrainer's rows of them, NAME.expected
 * (*exp). */
static void open_records(const char *name, FILE **rec, FILE **exp)
{
    char file[64];
    snprintf(file, sizeof file, "%s.jsonl", name);
    *rec = fopen(path_of(file), "r");
    snprintf(file, sizeof file, "%s.expected", name);
    *exp = fopen(path_of(file), "r");
    ck_assert(*rec && *exp);
}

/* A row against the next "prompt N" / "ids ..." lines of exp (KTOTrainer's). */
static void expect_row(FILE *exp, const char *what, const int32_t *ids, const uint8_t *counts,
                       size_t n)
{
    char line[4096];
    int32_t want[512];
    size_t np = 0;
    ck_assert(fgets(line, sizeof line, exp) && sscanf(line, "prompt %zu", &np) == 1);
    ck_assert(fgets(line, sizeof line, exp) != NULL);
    size_t nw = fixture_parse_ids(line, "ids", want, 512);
    ck_assert_msg(n == nw, "%s: %zu ids, TRL's %zu", what, n, nw);
    for (size_t i = 0; i < n; i++) {
        ck_assert_msg(ids[i] == want[i], "%s: id %zu is %d, TRL's %d", what, i, ids[i],
                      want[i]);
        ck_assert_msg(counts[i] == (i >= np), "%s: count %zu is %d (the prompt has %zu ids)",
                      what, i, counts[i], np);
    }
}

/* Unpaired records of text (eos added to a completion without it; a prompt ending inside a
 * word, whose completion starts where the tokenizations first differ) encoded as KTOTrainer
 * tokenizes them (text.expected), with their labels, by nnt_sft_encode_unpaired and (rows)
 * nnt_sft_encode_unpaired_rows; refusals */
START_TEST(test_encode_unpaired)
{
    int by_rows = _i;
    char record[4096], what[64];
    nnt_tokenizer *tok = NULL;
    nnt_sft *s = chatml_sft(&tok);
    FILE *rec, *exp;
    open_records("text", &rec, &exp);
    static const int LABELS[4] = {1, 0, 1, 0};
    int records = 0;
    while (fgets(record, sizeof record, rec)) {
        const int32_t *ids[2];
        const uint8_t *counts[2];
        size_t n[2];
        int good[2] = {-1, -1}, rows = 1;
        if (by_rows)
            EXPECT_OK(nnt_sft_encode_unpaired_rows(s, record, strlen(record) - 1, ids, counts,
                                                   n, good, &rows));
        else
            EXPECT_OK(nnt_sft_encode_unpaired(s, record, strlen(record) - 1, &ids[0],
                                              &counts[0], &n[0], &good[0]));
        ck_assert_int_eq(rows, 1);
        ck_assert_int_eq(good[0], LABELS[records]);
        snprintf(what, sizeof what, "record %d", records);
        expect_row(exp, what, ids[0], counts[0], n[0]);
        records++;
    }
    ck_assert_int_eq(records, 4);
    static const struct {
        const char *record, *says;
    } BAD[5] = {
        {"{\"prompt\": \"a\", \"completion\": \"b\"}", "\"label\""},
        {"{\"prompt\": \"a\", \"completion\": \"b\", \"label\": 1}", "true"},
        {"{\"prompt\": \"a\", \"completion\": \"b\", \"label\": \"yes\"}", "true"},
        {"{\"prompt\": \"a\", \"chosen\": \"b\", \"rejected\": \"c\", \"label\": true}",
         "paired"},
        {"{\"completion\": \"b\", \"label\": false}", "\"prompt\""},
    };
    for (int k = 0; k < 5; k++) {
        const int32_t *ids[2];
        const uint8_t *counts[2];
        size_t n[2];
        int good[2], rows;
        const char *by = by_rows ? "nnt_sft_encode_unpaired_rows: " : "nnt_sft_encode_unpaired: ";
        if (by_rows && k == 3) {   /* (a paired record with a label: an unknown key) */
            EXPECT_RC(nnt_sft_encode_unpaired_rows(s, BAD[k].record, strlen(BAD[k].record),
                                                   ids, counts, n, good, &rows), NNT_E_FORMAT);
            ck_assert_msg(strstr(nnt_ctx_last_error(NULL), "unknown key \"label\"") != NULL,
                          "%s", nnt_ctx_last_error(NULL));
            continue;
        }
        EXPECT_RC(by_rows ? nnt_sft_encode_unpaired_rows(s, BAD[k].record, strlen(BAD[k].record),
                                                         ids, counts, n, good, &rows)
                          : nnt_sft_encode_unpaired(s, BAD[k].record, strlen(BAD[k].record),
                                                    &ids[0], &counts[0], &n[0], &good[0]),
                  NNT_E_FORMAT);
        ck_assert_msg(strstr(nnt_ctx_last_error(NULL), BAD[k].says) != NULL &&
                      strstr(nnt_ctx_last_error(NULL), by) != NULL, "%s: %s", BAD[k].record,
                      nnt_ctx_last_error(NULL));
    }
    const int32_t *ids[2];
    const uint8_t *counts[2];
    size_t n[2];
    int good[2], rows;
    EXPECT_RC(nnt_sft_encode_unpaired(s, "{}", 2, &ids[0], &counts[0], &n[0], NULL),
              NNT_E_INVAL);
    EXPECT_RC(nnt_sft_encode_unpaired_rows(s, "{}", 2, ids, counts, n, good, NULL), NNT_E_INVAL);
    EXPECT_RC(nnt_sft_encode_unpaired_rows(s, "{}", 2, ids, counts, n, NULL, &rows),
              NNT_E_INVAL);
    fclose(rec), fclose(exp);
    nnt_sft_destroy(s);
    nnt_tokenizer_destroy(tok);
}
END_TEST

/* Paired records of text (a prompt given; prompts the sides share, cut at a space and inside
 * a word; a rejected completion ending with eos) as KTOTrainer unpairs and tokenizes them
 * (text_paired.expected): two rows, chosen (desirable) then rejected, each counting from its
 * own completion; a conversation's sides (paired_train.jsonl's first record) equal to the
 * unpaired records of its prompt and each side; refusals */
START_TEST(test_encode_unpaired_rows)
{
    char record[4096], what[64];
    nnt_tokenizer *tok = NULL;
    nnt_sft *s = chatml_sft(&tok);
    FILE *rec, *exp;
    open_records("text_paired", &rec, &exp);
    const int32_t *ids[2];
    const uint8_t *counts[2];
    size_t n[2];
    int good[2], rows = 0, records = 0;
    while (fgets(record, sizeof record, rec)) {
        EXPECT_OK(nnt_sft_encode_unpaired_rows(s, record, strlen(record) - 1, ids, counts, n,
                                               good, &rows));
        ck_assert_int_eq(rows, 2);
        ck_assert(good[0] == 1 && good[1] == 0);
        for (int k = 0; k < 2; k++) {
            snprintf(what, sizeof what, "record %d's %s row", records, k ? "rejected" : "chosen");
            expect_row(exp, what, ids[k], counts[k], n[k]);
        }
        records++;
    }
    ck_assert_int_eq(records, 3);
    fclose(rec), fclose(exp);
    /* a conversation: each side as the unpaired record {prompt, completion: side, label} */
    static const char PAIRED[] =
        "{\"prompt\": [{\"role\": \"system\", \"content\": \"Be brief.\"}, {\"role\": \"user\", "
        "\"content\": \"Name a fruit.\"}], \"chosen\": [{\"role\": \"assistant\", \"content\": "
        "\"An apple.\"}], \"rejected\": [{\"role\": \"assistant\", \"content\": \"A chair.\"}]}";
    static const char *const SIDES[2] = {
        "{\"prompt\": [{\"role\": \"system\", \"content\": \"Be brief.\"}, {\"role\": \"user\", "
        "\"content\": \"Name a fruit.\"}], \"completion\": [{\"role\": \"assistant\", \"content\": "
        "\"An apple.\"}], \"label\": true}",
        "{\"prompt\": [{\"role\": \"system\", \"content\": \"Be brief.\"}, {\"role\": \"user\", "
        "\"content\": \"Name a fruit.\"}], \"completion\": [{\"role\": \"assistant\", \"content\": "
        "\"A chair.\"}], \"label\": false}"};
    EXPECT_OK(nnt_sft_encode_unpaired_rows(s, PAIRED, strlen(PAIRED), ids, counts, n, good,
                                           &rows));
    ck_assert_int_eq(rows, 2);
    size_t n0 = n[0];
    int32_t chosen[256];
    uint8_t chosen_counts[256];
    ck_assert(n0 <= 256);
    memcpy(chosen, ids[0], n0 * sizeof *chosen);
    memcpy(chosen_counts, counts[0], n0);
    int32_t rejected[256];
    uint8_t rejected_counts[256];
    size_t n1 = n[1];
    ck_assert(n1 <= 256);
    memcpy(rejected, ids[1], n1 * sizeof *rejected);
    memcpy(rejected_counts, counts[1], n1);
    for (int k = 0; k < 2; k++) {
        const int32_t *one;
        const uint8_t *one_counts;
        size_t m;
        int label;
        EXPECT_OK(nnt_sft_encode_unpaired(s, SIDES[k], strlen(SIDES[k]), &one, &one_counts, &m,
                                          &label));
        ck_assert_int_eq(label, !k);
        ck_assert_uint_eq(m, k ? n1 : n0);
        ck_assert(memcmp(one, k ? rejected : chosen, m * sizeof *one) == 0);
        ck_assert(memcmp(one_counts, k ? rejected_counts : chosen_counts, m) == 0);
    }
    static const struct {
        const char *record, *says;
    } BAD[4] = {
        {"{\"prompt\": \"a\", \"chosen\": \"b\"}", "\"chosen\" and \"rejected\""},
        {"{\"chosen\": \"b\", \"rejected\": [{\"role\": \"assistant\", \"content\": \"c\"}]}",
         "both strings or both lists"},
        {"{\"chosen\": \"\", \"rejected\": \"c\"}", "an empty \"chosen\""},
        {"[{\"role\": \"user\", \"content\": \"a\"}]", "not a JSON object"},
    };
    for (int k = 0; k < 4; k++) {
        EXPECT_RC(nnt_sft_encode_unpaired_rows(s, BAD[k].record, strlen(BAD[k].record), ids,
                                               counts, n, good, &rows), NNT_E_FORMAT);
        ck_assert_msg(strstr(nnt_ctx_last_error(NULL), BAD[k].says) != NULL &&
                      strstr(nnt_ctx_last_error(NULL), "nnt_sft_encode_unpaired_rows: ") != NULL,
                      "%s: %s", BAD[k].record, nnt_ctx_last_error(NULL));
        ck_assert_int_eq(rows, 0);
    }
    nnt_sft_destroy(s);
    nnt_tokenizer_destroy(tok);
}
END_TEST

/* rows of T with a mask and one value each (labels), n of them; counted: whether rows count
 * from their 40th token on */
static void write_rows(const char *path, int n, const float *labels, int counted)
{
    nnt_token_writer_options wo = NNT_TOKEN_WRITER_OPTIONS_INIT;
    wo.mask = 1, wo.block = T, wo.row_values = 1;
    nnt_token_writer *w = NULL;
    EXPECT_OK(nnt_token_writer_open(NULL, path, &wo, &w));
    int32_t ids[T];
    uint8_t counts[T];
    for (int r = 0; r < n; r++) {
        for (int t = 0; t < T; t++)
            ids[t] = (r * 7 + t) % 400, counts[t] = counted && t >= 40 && t < 60;
        EXPECT_OK(nnt_token_writer_write_example_values(w, ids, counts, T, &labels[r]));
    }
    EXPECT_OK(nnt_token_writer_close(w));
}

START_TEST(test_errors)
{
    nnt_layer *l = NULL;
    EXPECT_OK(nnt_model_load_hf(ctx, path_of("llama"), 1, T, NULL, &l));
    nnt_optim_options oo = NNT_OPTIM_OPTIONS_INIT;
    nnt_optim *opt = NULL;
    EXPECT_OK(nnt_optim_create(ctx, &oo, &opt));
    EXPECT_OK(nnt_optim_add_layer(opt, l));
    nnt_data *d = NULL;
    EXPECT_OK(nnt_data_open(path_of("train.bin"), NNT_DATA_AUTO, NULL, 400, &d));
    nnt_trainer_options to = NNT_TRAINER_OPTIONS_INIT;
    to.batch = 1, to.seq = T, to.steps = 1, to.dpo_beta = 0.1, to.dpo_loss = NNT_DPO_KTO;
    nnt_trainer *tr = NULL;
    EXPECT_RC(nnt_trainer_create(l, opt, d, &to, &tr), NNT_E_INVAL);   /* KTO: B 1 */
    ck_assert(strstr(nnt_ctx_last_error(ctx), "at least 2") != NULL);
    to.dpo_loss = NNT_DPO_APO_ZERO_UNPAIRED;   /* (no kl: B 1 will do) */
    EXPECT_OK(nnt_trainer_create(l, opt, d, &to, &tr));
    EXPECT_OK(nnt_trainer_step(tr));
    nnt_trainer_destroy(tr);
    nnt_layer_destroy(l);
    nnt_optim_destroy(opt);
    EXPECT_OK(nnt_model_load_hf(ctx, path_of("llama"), 4, T, NULL, &l));
    EXPECT_OK(nnt_optim_create(ctx, &oo, &opt));
    EXPECT_OK(nnt_optim_add_layer(opt, l));
    to.batch = 4, to.dpo_loss = NNT_DPO_KTO, to.desirable_weight = -1.0;
    EXPECT_RC(nnt_trainer_create(l, opt, d, &to, &tr), NNT_E_INVAL);
    ck_assert(strstr(nnt_ctx_last_error(ctx), "desirable_weight") != NULL);
    to.desirable_weight = 1.0, to.undesirable_weight = NAN;
    EXPECT_RC(nnt_trainer_create(l, opt, d, &to, &tr), NNT_E_INVAL);
    to.undesirable_weight = 1.0, to.rpo_alpha = 0.5;   /* (DPO's) */
    EXPECT_RC(nnt_trainer_create(l, opt, d, &to, &tr), NNT_E_INVAL);
    ck_assert(strstr(nnt_ctx_last_error(ctx), "rpo_alpha") != NULL);
    to.rpo_alpha = 0.0, to.train_tokens = 3 * T;   /* fewer rows than a run of B */
    EXPECT_RC(nnt_trainer_create(l, opt, d, &to, &tr), NNT_E_INVAL);
    ck_assert(strstr(nnt_ctx_last_error(ctx), "runs of B = 4 rows") != NULL);
    to.train_tokens = 0;
    nnt_data_close(d);
    /* pairs without labels (DPO's rows) */
    EXPECT_OK(nnt_data_open(fixture_path_in("dpo_tiny", "pairs.bin", NULL), NNT_DATA_AUTO, NULL,
                            400, &d));
    to.seq = 16;
    nnt_layer_destroy(l);
    nnt_optim_destroy(opt);
    EXPECT_OK(nnt_model_load_hf(ctx, path_of("llama"), 4, 16, NULL, &l));
    EXPECT_OK(nnt_optim_create(ctx, &oo, &opt));
    EXPECT_OK(nnt_optim_add_layer(opt, l));
    EXPECT_RC(nnt_trainer_create(l, opt, d, &to, &tr), NNT_E_INVAL);
    ck_assert(strstr(nnt_ctx_last_error(ctx), "carries none") != NULL);
    nnt_data_close(d);
    nnt_layer_destroy(l);
    nnt_optim_destroy(opt);
    to.seq = T;
    EXPECT_OK(nnt_model_load_hf(ctx, path_of("llama"), 4, T, NULL, &l));
    EXPECT_OK(nnt_optim_create(ctx, &oo, &opt));
    EXPECT_OK(nnt_optim_add_layer(opt, l));
    /* a label other than 0 and 1; a row without a counted token (no prompt and completion
     * to tell: refused when read) */
    test_make_tmpdir("kto_errors");
    const char *half = test_tmp_path("half.bin"), *none = test_tmp_path("none.bin");
    static const float HALF[4] = {1, 0, 0.5f, 1}, GOOD[4] = {1, 0, 0, 1};
    write_rows(half, 4, HALF, 1);
    EXPECT_OK(nnt_data_open(half, NNT_DATA_AUTO, NULL, 400, &d));
    EXPECT_RC(nnt_trainer_create(l, opt, d, &to, &tr), NNT_E_FORMAT);
    ck_assert(strstr(nnt_ctx_last_error(ctx), "row 2 has the label 0.5") != NULL);
    nnt_data_close(d);
    write_rows(none, 4, GOOD, 0);
    EXPECT_OK(nnt_data_open(none, NNT_DATA_AUTO, NULL, 400, &d));
    EXPECT_OK(nnt_trainer_create(l, opt, d, &to, &tr));
    EXPECT_RC(nnt_trainer_step(tr), NNT_E_FORMAT);
    ck_assert(strstr(nnt_ctx_last_error(ctx), "has no completion") != NULL);
    nnt_trainer_destroy(tr);
    nnt_data_close(d);
    test_remove_tmpdir();
    nnt_optim_destroy(opt);
    nnt_layer_destroy(l);
}
END_TEST

static Suite *kto_suite(void)
{
    Suite *s = suite_create("kto");
    TCase *tc = tcase_create("core");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 240);
    tcase_add_loop_test(tc, test_kto, 0, 3);
    tcase_add_loop_test(tc, test_accum_apo, 0, 2);
    tcase_add_test(tc, test_resume);
    tcase_add_test(tc, test_shuffle);
    tcase_add_test(tc, test_kl_clamped);
    tcase_add_test(tc, test_row_loss);
    tcase_add_loop_test(tc, test_encode_unpaired, 0, 2);
    tcase_add_test(tc, test_encode_unpaired_rows);
    tcase_add_test(tc, test_errors);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return run_suite(kto_suite());
}
