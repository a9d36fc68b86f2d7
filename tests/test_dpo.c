/* SPDX-License-Identifier: MIT */
/* Direct preference optimization (nnt_trainer_options.dpo_beta) against PyTorch with TRL's
 * loss (tests/fixtures/dpo_tiny, tests/gen_dpo_fixtures.py): a tiny Llama, 8 pairs of rows of
 * T 16 (6 trained, 2 held out), beta 0.3, AdamW with weight decay 0.1 on the matrices:
 * the first step's loss (log 2) and every gradient, 3 steps' losses, reward accuracies and
 * margins, the parameters after them and the held-out pairs' loss over 3 tilings; B 2 with
 * accum 2 the same as B 4; a run resumed from a checkpoint continues against the recorded
 * reference (bit for bit the uninterrupted run); the losses without a reference (CPO,
 * SimPO, ORPO: TRL's CPOTrainer and ORPOTrainer) the same way, resumed without one and
 * validated alone; the weighted cross-entropy backward and the per-target losses it is built
 * on; refusals. */
#include "testutil.h"
#include "fixture_st.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#define B 4
#define T 16
#define STEPS 3
#define TRAIN_ROWS 12
#define ROWS 16

/* Measured (2-core AMD Zen 5; worst over the tilings and B 2 accum 2): first loss log 2 to
 * 1e-12 (the reference is the policy), gradients rel 3.8e-6, step losses 5.1e-6 (absolute),
 * accuracies exact, margins 6.2e-6, parameters after 3 steps rel 1.3e-6, held-out loss
 * 2.3e-6. */
#define GRAD_TOL 3.8e-5
#define LOSS_TOL 5.1e-5
#define MARGIN_TOL 6.2e-5
#define PARAM_TOL 1.3e-5
/* The losses without a reference (2-core AMD Zen 4, 2 tilings each): step and held-out
 * losses 6.9e-7 (relative above 1), margins 4.5e-6, ORPO's gradients rel 2.3e-6, the
 * parameters after 3 steps rel 5.2e-6 (SimPO's up_proj; CPO and ORPO 1.1e-6). */
#define FREE_LOSS_TOL 6.9e-6
#define FREE_PARAM_TOL 5.2e-5

static nnt_ctx *ctx;
static void setup(void) { ctx = test_ctx(); }
static void teardown(void) { EXPECT_OK(nnt_ctx_destroy(ctx)); }

static const char *path_of(const char *name)
{
    return fixture_path_in("dpo_tiny", name, NULL);
}

/* whole; batch tiles of 2 (a pair a tile), sequence tiles of 3, heads of 3; batch tiles of 1
 * (chosen and rejected rows apart), sequence tiles of 5, one head */
static const nnt_tiling TILINGS[3] = {
    {sizeof(nnt_tiling), 0, 0, 0, 0, 0, 0, 0},
    {sizeof(nnt_tiling), 2, 3, 5, 7, 9, 3, 0},
    {sizeof(nnt_tiling), 1, 5, 8, 16, 10, 1, 0},
};

typedef struct run_log {
    double loss[STEPS + 1], accuracy[STEPS + 1], margin[STEPS + 1];
    double val_loss, val_accuracy, val_margin;
} run_log;

static int on_report(const nnt_trainer_report *r, void *user)
{
    run_log *rl = user;
    if (r->event == NNT_TRAINER_STEP && r->step >= 1 && r->step <= STEPS) {
        rl->loss[r->step] = r->loss;
        rl->accuracy[r->step] = r->dpo_accuracy;
        rl->margin[r->step] = r->dpo_margin;
    }
    if (r->event == NNT_TRAINER_VALIDATION) {
        rl->val_loss = r->loss;
        rl->val_accuracy = r->dpo_accuracy;
        rl->val_margin = r->dpo_margin;
    }
    return 0;
}

typedef struct run {
    nnt_layer *model;
    nnt_optim *opt;
    nnt_data *data;
    nnt_trainer *tr;
} run;

/* The fixture's model and optimizer (AdamW lr 1e-2, weight decay 0.1 on matrices) and
 * a trainer of batch b, accum a on the pairs file; checkpoint and resume may be NULL. */
static int loss_kind;   /* open_run's dpo_loss (NNT_DPO_SIGMOID unless a test sets it) */
static double simpo_gamma = 0.5, cpo_alpha = 1.0, rpo_alpha = 0.0;   /* its simpo_gamma, ... */

static run open_run(const nnt_tiling *tl, int64_t b, int64_t a, int update_in_backward,
                    const char *checkpoint, const char *resume, run_log *rl)
{
    run r;
    nnt_tiling t = *tl;
    t.batch = t.batch && t.batch <= b ? t.batch : b;
    EXPECT_OK(nnt_model_load_hf(ctx, path_of("llama"), b, T, &t, &r.model));
    nnt_optim_options oo = NNT_OPTIM_OPTIONS_INIT;
    oo.lr = 1e-2, oo.beta1 = 0.9, oo.beta2 = 0.999, oo.eps = 1e-8, oo.weight_decay = 0.1;
    oo.grad_clip = 0.0, oo.accum_steps = a;
    EXPECT_OK(nnt_optim_create(ctx, &oo, &r.opt));
    EXPECT_OK(nnt_optim_add_layer(r.opt, r.model));   /* (decay: matrices, not norms) */
    EXPECT_OK(nnt_data_open(path_of("pairs.bin"), NNT_DATA_AUTO, NULL, 64, &r.data));
    nnt_trainer_options to = NNT_TRAINER_OPTIONS_INIT;
    to.batch = b, to.seq = T, to.accum = a, to.steps = STEPS, to.seed = 1;
    to.dpo_beta = 0.3, to.dpo_loss = loss_kind;
    to.simpo_gamma = simpo_gamma, to.cpo_alpha = cpo_alpha, to.rpo_alpha = rpo_alpha;
    to.train_tokens = TRAIN_ROWS * T;
    to.val_start = TRAIN_ROWS * T, to.val_len = (ROWS - TRAIN_ROWS) * T, to.val_batches = 1;
    to.update_in_backward = update_in_backward;
    to.checkpoint = checkpoint, to.resume = resume;
    to.callback = on_report, to.user = rl;
    EXPECT_OK(nnt_trainer_create(r.model, r.opt, r.data, &to, &r.tr));
    return r;
}

static void close_run(run *r)
{
    nnt_trainer_destroy(r->tr);
    nnt_data_close(r->data);
    nnt_optim_destroy(r->opt);
    nnt_layer_destroy(r->model);
}


/* The run's 3 steps (losses, reward accuracies and margins), its parameters after them and its
 * held-out pairs against the fixture's keys under prefix ("" or "K." of a loss K); the losses
 * compared relative above 1 (DPO's below it: absolute). */
static void expect_run(nnt_st_reader *r, const char *prefix, const char *what, const run *x,
                       const run_log *rl, double loss_tol, double param_tol)
{
    static const char *const KEYS[6] = {"losses", "accuracies", "margins", "val_loss",
                                        "val_accuracy", "val_margin"};
    double *v[6];
    char name[64], worst[256] = "";
    for (int i = 0; i < 6; i++) {
        snprintf(name, sizeof name, "%s%s", prefix, KEYS[i]);
        v[i] = fixture_read_n(r, name, NNT_IO_F64, NULL);
    }
    double el = 0, em = 0;
    for (int s = 0; s < STEPS; s++) {
        el = fmax(el, fabs(rl->loss[s + 1] - v[0][s]) / fmax(1.0, v[0][s]));
        em = fmax(em, fabs(rl->margin[s + 1] - v[2][s]));
        ck_assert_double_eq(rl->accuracy[s + 1], v[1][s]);
    }
    snprintf(name, sizeof name, "%sfinal", prefix);
    double ep = fixture_worst_against(x->model, r, name, 1, worst, sizeof worst);
    double ev = fabs(rl->val_loss - v[3][0]) / fmax(1.0, v[3][0]);
    printf("test_dpo %s: losses %.2e (relative above 1), margins %.2e, parameters rel %.2e "
           "(%s), held-out loss %.2e\n", what, el, em, ep, worst, ev);
    EXPECT_TOL(el, loss_tol, "%s: step losses", what);
    EXPECT_TOL(em, MARGIN_TOL, "%s: margins", what);
    EXPECT_TOL(ep, param_tol, "%s: parameter %s after %d steps", what, worst, STEPS);
    EXPECT_TOL(ev, loss_tol, "%s: held-out loss", what);
    ck_assert_double_eq(rl->val_accuracy, v[4][0]);
    ck_assert_double_eq_tol(rl->val_margin, v[5][0], MARGIN_TOL);
    for (int i = 0; i < 6; i++)
        free(v[i]);
}

/* _i: the tiling */
START_TEST(test_reference)
{
    nnt_st_reader *r = fixture_open_st_path(path_of("reference.safetensors"));
    run_log rl;
    memset(&rl, 0, sizeof rl);
    run x = open_run(&TILINGS[_i], B, 1, 0, NULL, NULL, &rl);   /* gradients kept */
    EXPECT_OK(nnt_trainer_step(x.tr));
    char worst[256] = "", what[32];
    double eg = fixture_worst_against(x.model, r, "grad", 0, worst, sizeof worst);
    printf("test_dpo tiling %d: first loss %.9f (log 2 %.9f), worst gradient rel %.2e (%s)\n",
           _i, rl.loss[1], log(2.0), eg, worst);
    ck_assert_double_eq_tol(rl.loss[1], log(2.0), 1e-12);
    EXPECT_TOL(eg, GRAD_TOL, "tiling %d: gradient of %s", _i, worst);
    EXPECT_OK(nnt_trainer_run(x.tr, 0));   /* steps 2, 3 and the validation */
    snprintf(what, sizeof what, "tiling %d", _i);
    expect_run(r, "", what, &x, &rl, LOSS_TOL, PARAM_TOL);
    close_run(&x);
    nnt_st_close(r);
}
END_TEST

/* B 2 (one pair) and accum 2: the mean over the step's pairs, the same steps as B 4, and the
 * parameters updated during the backward (the default) */
START_TEST(test_accum)
{
    nnt_st_reader *r = fixture_open_st_path(path_of("reference.safetensors"));
    double *losses = fixture_read_n(r, "losses", NNT_IO_F64, NULL);
    run_log rl;
    memset(&rl, 0, sizeof rl);
    run x = open_run(&TILINGS[1], 2, 2, -1, NULL, NULL, &rl);
    EXPECT_OK(nnt_trainer_run(x.tr, 0));
    double el = 0;
    for (int s = 0; s < STEPS; s++)
        el = fmax(el, fabs(rl.loss[s + 1] - losses[s]));
    char worst[256] = "";
    double ep = fixture_worst_against(x.model, r, "final", 1, worst, sizeof worst);
    printf("test_dpo B 2 accum 2: losses %.2e, parameters rel %.2e (%s)\n", el, ep, worst);
    EXPECT_TOL(el, LOSS_TOL, "accum 2: step losses");
    EXPECT_TOL(ep, PARAM_TOL, "accum 2: parameter %s", worst);
    close_run(&x);
    free(losses);
    nnt_st_close(r);
}
END_TEST

/* The losses without a reference (TRL 1.16's CPOTrainer loss_type "sigmoid" with cpo_alpha
 * 0.6, "simpo" with simpo_gamma 0.7 and cpo_alpha 0.4, ORPOTrainer; beta 0.3) and RPO (DPO's
 * sigmoid loss plus rpo_alpha 0.5 times the chosen nll: DPOTrainer's loss_type ["sigmoid",
 * "sft"]): 3 steps' losses, accuracies, margins, the parameters after them and the held-out
 * loss, each loss under two tilings; ORPO's first gradient too (its nll term reads the
 * prompts' tokens). _i: the loss (i % 4) and the tiling. */
START_TEST(test_free_losses)
{
    static const char *const NAMES[4] = {"cpo", "simpo", "orpo", "rpo"};
    static const int KINDS[4] = {NNT_DPO_CPO, NNT_DPO_SIMPO, NNT_DPO_ORPO, NNT_DPO_SIGMOID};
    static const double GAMMA[4] = {0.5, 0.7, 0.5, 0.5}, ALPHA[4] = {0.6, 0.4, 1.0, 1.0};
    int k = _i % 4, tiling = (_i + _i / 4) % 3;
    nnt_st_reader *r = fixture_open_st_path(path_of("reference.safetensors"));
    run_log rl;
    memset(&rl, 0, sizeof rl);
    loss_kind = KINDS[k], simpo_gamma = GAMMA[k], cpo_alpha = ALPHA[k];
    rpo_alpha = k == 3 ? 0.5 : 0.0;   /* RPO: DPO's sigmoid loss + 0.5 nll */
    run x = open_run(&TILINGS[tiling], B, 1, 0, NULL, NULL, &rl);   /* gradients kept */
    loss_kind = NNT_DPO_SIGMOID, simpo_gamma = 0.5, cpo_alpha = 1.0, rpo_alpha = 0.0;
    EXPECT_OK(nnt_trainer_step(x.tr));
    char worst[256] = "", prefix[16], what[32];
    if (KINDS[k] == NNT_DPO_ORPO) {
        double eg = fixture_worst_against(x.model, r, "orpo.grad", 0, worst, sizeof worst);
        printf("test_dpo orpo tiling %d: worst gradient rel %.2e (%s)\n", tiling, eg, worst);
        EXPECT_TOL(eg, GRAD_TOL, "orpo tiling %d: gradient of %s", tiling, worst);
    }
    EXPECT_OK(nnt_trainer_run(x.tr, 0));   /* steps 2, 3 and the validation */
    snprintf(prefix, sizeof prefix, "%s.", NAMES[k]);
    snprintf(what, sizeof what, "%s tiling %d", NAMES[k], tiling);
    expect_run(r, prefix, what, &x, &rl, FREE_LOSS_TOL, FREE_PARAM_TOL);
    close_run(&x);
    nnt_st_close(r);
}
END_TEST

/* (internal: nnt_dpo_pair_loss, nnt_dpo_loss_name, nnt_dpo_sorted_terms; the test links the
 * library's objects) */
#include "train/trainer_impl.h"

/* Every pair term's derivatives against central differences of the term itself (h 1e-6,
 * in double), for each loss at beta 0.3 and 2, over log ratios of either sign and counts of
 * 1, 3 and 17 (SimPO's gamma 0.7; ORPO's log-likelihoods below 0; hinge away from its kink).
 * Measured: relative 3.3e-8 at worst (the differences' own error); tolerance 3.3e-7. */
START_TEST(test_pair_derivatives)
{
    static const int KINDS[15] = {NNT_DPO_SIGMOID, NNT_DPO_IPO, NNT_DPO_HINGE, NNT_DPO_CPO,
                                  NNT_DPO_SIMPO, NNT_DPO_ORPO, NNT_DPO_ROBUST,
                                  NNT_DPO_EXO_PAIR, NNT_DPO_NCA_PAIR, NNT_DPO_BCO_PAIR,
                                  NNT_DPO_SPPO_HARD, NNT_DPO_APO_ZERO, NNT_DPO_APO_DOWN,
                                  NNT_DPO_DISCOPOP, NNT_DPO_SIGMOID_NORM};
    static const double LC[4] = {-12.5, -3.25, -0.75, 2.0}, LR[4] = {-9.0, -4.5, -0.5, 1.25};
    static const int64_t N[3] = {1, 3, 17};
    nnt_trainer_options o = NNT_TRAINER_OPTIONS_INIT;
    o.simpo_gamma = 0.7;
    const double h = 1e-6;
    double worst = 0.0;
    o.discopop_tau = 0.4;   /* (its default 0.05 bends too sharply for the differences) */
    for (int k = 0; k < 15; k++)
        for (int b = 0; b < 2; b++)
            for (int i = 0; i < 4; i++)
                for (int j = 0; j < 4; j++)
                    for (int n = 0; n < 3; n++) {
                        o.dpo_loss = KINDS[k], o.dpo_beta = b ? 2.0 : 0.3;
                        o.dpo_label_smoothing = KINDS[k] == NNT_DPO_ROBUST     ? 0.2
                                                : KINDS[k] == NNT_DPO_EXO_PAIR ? 0.01
                                                                               : 0.0;
                        double lc = LC[i], lr = LR[j], dc, dr, x, y;
                        int64_t nc = N[n], nr = N[2 - n];
                        if (KINDS[k] == NNT_DPO_ORPO && (lc >= 0 || lr >= 0))
                            continue;   /* (log-likelihoods: below 0) */
                        if (KINDS[k] == NNT_DPO_HINGE &&
                            fabs(1.0 - o.dpo_beta * (lc - lr)) < 1e-3)
                            continue;   /* (the kink) */
                        nnt_dpo_pair_loss(&o, lc, lr, nc, nr, &dc, &dr);
                        double fc = (nnt_dpo_pair_loss(&o, lc + h, lr, nc, nr, &x, &y) -
                                     nnt_dpo_pair_loss(&o, lc - h, lr, nc, nr, &x, &y)) / (2 * h);
                        double fr = (nnt_dpo_pair_loss(&o, lc, lr + h, nc, nr, &x, &y) -
                                     nnt_dpo_pair_loss(&o, lc, lr - h, nc, nr, &x, &y)) / (2 * h);
                        /* (the differences' error grows with the loss: EXO's -log e) */
                        double L = fabs(nnt_dpo_pair_loss(&o, lc, lr, nc, nr, &x, &y));
                        double floor = 1e-3 * fmax(1.0, L);
                        double ec = fabs(dc - fc) / fmax(fabs(fc), floor);
                        double er = fabs(dr - fr) / fmax(fabs(fr), floor);
                        worst = fmax(worst, fmax(ec, er));
                        ck_assert_msg(ec < 3.3e-7 && er < 3.3e-7, "loss %d beta %g lc %g lr %g nc "
                                      "%lld nr %lld: d/dlc %.9g (differences %.9g), d/dlr %.9g "
                                      "(%.9g)", KINDS[k], o.dpo_beta, lc, lr, (long long)nc,
                                      (long long)nr, dc, fc, dr, fr);
                    }
    printf("test_dpo pair derivatives: worst relative %.2e\n", worst);
}
END_TEST

/* TRL's other loss types against the reference on pairs (robust, exo_pair, nca_pair,
 * bco_pair, sppo_hard, apo_zero, apo_down, discopop, sigmoid_norm): the pair term and its
 * derivatives by the two log ratios at 42 points of either sign and several counts, at beta
 * 0.3 and 2, against TRL's own lines for each loss_type run in float64 with autograd
 * (tests/gen_dpo_loss_types.py: loss_types.safetensors): the losses within 1e-13 relative,
 * the derivatives 1e-4 (TRL's autograd loses digits where sigmoid saturates). */
/* aot and aot_unpaired on a micro-batch of 7 pairs (label smoothing 0.1 and 0, beta 0.3 and
 * 2), as the trainer takes them (nnt_dpo_sorted_terms): the terms' sum and each pair's
 * derivatives by its two policy log-likelihoods as TRL's (its per_sequence_loss a sorted
 * position each, autograd through its torch.sort). Measured:
 * 5.6e-16 relative; tolerance 1e-13. */
static void sorted_losses_trl(nnt_st_reader *r)
{
    int64_t n = 0;
    double *batch = fixture_read_n(r, "batch", NNT_IO_F64, &n);
    n /= 4;
    static const char *const NAMES[2] = {"aot", "aot_unpaired"};
    double term[16], dc[16], dr[16], p[32], ref[32], worst = 0.0;
    nnt_dpo_ranked ranks[32];
    ck_assert_int_le(n, 16);
    for (int k = 0; k < 2; k++)
        for (int b = 0; b < 2; b++) {
            nnt_trainer_options o = NNT_TRAINER_OPTIONS_INIT;
            o.dpo_loss = k ? NNT_DPO_AOT_UNPAIRED : NNT_DPO_AOT, o.dpo_beta = b ? 2.0 : 0.3;
            o.dpo_label_smoothing = k ? 0.0 : 0.1;
            for (int64_t j = 0; j < n; j++) {   /* (pi_c, pi_r, ref_c, ref_r) */
                p[2 * j] = batch[4 * j], p[2 * j + 1] = batch[4 * j + 1];
                ref[2 * j] = batch[4 * j + 2], ref[2 * j + 1] = batch[4 * j + 3];
            }
            nnt_dpo_sorted_terms(&o, p, ref, n, ranks, term, dc, dr);
            char name[64];
            double *want[3], sum = 0.0, want_sum = 0.0;
            static const char *const WHAT[3] = {"loss", "dc", "dr"};
            for (int w = 0; w < 3; w++) {
                snprintf(name, sizeof name, "%s.b%d.%s", NAMES[k], b, WHAT[w]);
                want[w] = fixture_read(r, name, NNT_IO_F64, NULL);
            }
            for (int64_t j = 0; j < n; j++) {
                sum += term[j], want_sum += want[0][j];
                const double got[2] = {dc[j], dr[j]};   /* by pi_c, pi_r */
                for (int w = 0; w < 2; w++) {
                    double e = fabs(got[w] - want[w + 1][j]) / fabs(want[w + 1][j]);
                    worst = fmax(worst, e);
                    ck_assert_msg(e < 1e-13, "%s beta %g pair %lld: d/d%s %.17g, TRL's %.17g",
                                  NAMES[k], o.dpo_beta, (long long)j, w ? "pi_r" : "pi_c",
                                  got[w], want[w + 1][j]);
                }
            }
            double e = fabs(sum - want_sum) / fabs(want_sum);
            worst = fmax(worst, e);
            ck_assert_msg(e < 1e-13, "%s beta %g: the terms sum to %.17g, TRL's %.17g",
                          NAMES[k], o.dpo_beta, sum, want_sum);
            for (int w = 0; w < 3; w++)
                free(want[w]);
        }
    printf("test_dpo aot, aot_unpaired: %lld pairs, worst relative %.2e\n", (long long)n,
           worst);
    free(batch);
}

START_TEST(test_loss_types_trl)
{
    nnt_st_reader *r = fixture_open_st_path(path_of("loss_types.safetensors"));
    int64_t np = 0, nk = 0;
    double *pts = fixture_read_n(r, "points", NNT_IO_F64, &np);
    double *params = fixture_read_n(r, "params", NNT_IO_F64, &nk);
    np /= 4, nk /= 3;
    ck_assert_int_eq(nk, NNT_DPO_SIGMOID_NORM - NNT_DPO_ROBUST + 1);
    double worst[2] = {0.0, 0.0};   /* the losses, their derivatives */
    /* measured 1.2e-14 and 1.2e-5 (the derivatives' at the exo_pair point below, against
     * TRL's autograd; the others' 1e-10 or less) */
    const double tol[2] = {1e-13, 1e-4};
    for (int64_t k = 0; k < nk; k++)
        for (int b = 0; b < 2; b++) {
            nnt_trainer_options o = NNT_TRAINER_OPTIONS_INIT;
            o.dpo_loss = (int)params[3 * k], o.dpo_beta = b ? 2.0 : 0.3;
            o.dpo_label_smoothing = params[3 * k + 1], o.discopop_tau = params[3 * k + 2];
            char name[64];
            double *want[3];
            static const char *const WHAT[3] = {"loss", "dc", "dr"};
            for (int w = 0; w < 3; w++) {
                snprintf(name, sizeof name, "%s.b%d.%s", nnt_dpo_loss_name(o.dpo_loss), b,
                         WHAT[w]);
                want[w] = fixture_read(r, name, NNT_IO_F64, NULL);
            }
            for (int64_t i = 0; i < np; i++) {
                const double *p = pts + 4 * i;
                double got[3];
                got[0] = nnt_dpo_pair_loss(&o, p[0], p[1], (int64_t)p[2], (int64_t)p[3],
                                           &got[1], &got[2]);
                for (int w = 0; w < 3; w++) {
                    /* (relative; absolute below 1e-10: TRL's autograd derivatives of
                     * exo_pair at z = -37 are 1.2e-15 off their 7.5e-15) */
                    double e = fabs(got[w] - want[w][i]) / fmax(fabs(want[w][i]), 1e-10);
                    if (got[w] == want[w][i])
                        e = 0.0;
                    worst[w > 0] = fmax(worst[w > 0], e);
                    ck_assert_msg(e < tol[w > 0], "%s beta %g lc %g lr %g nc %g nr %g: %s %.17g, "
                                  "TRL's %.17g", nnt_dpo_loss_name(o.dpo_loss), o.dpo_beta,
                                  p[0], p[1], p[2], p[3], WHAT[w], got[w], want[w][i]);
                }
            }
            for (int w = 0; w < 3; w++)
                free(want[w]);
        }
    printf("test_dpo TRL's other loss types: %lld points x %lld losses x 2 betas, worst "
           "relative %.2e (losses), %.2e (derivatives)\n", (long long)np, (long long)nk,
           worst[0], worst[1]);
    sorted_losses_trl(r);
    free(pts), free(params);
    nnt_st_close(r);
}
END_TEST

/* TRL's other loss types, IPO (the log ratios averaged over each sequence's counted targets)
 * and hinge: 3 steps' losses and the parameters after them. _i: 0 IPO, 1 hinge. */
START_TEST(test_loss_kinds)
{
    static const char *const NAMES[2] = {"ipo", "hinge"};
    nnt_st_reader *r = fixture_open_st_path(path_of("reference.safetensors"));
    char name[64];
    snprintf(name, sizeof name, "%s.losses", NAMES[_i]);
    double *losses = fixture_read_n(r, name, NNT_IO_F64, NULL);
    run_log rl;
    memset(&rl, 0, sizeof rl);
    loss_kind = _i ? NNT_DPO_HINGE : NNT_DPO_IPO;
    run x = open_run(&TILINGS[1], B, 1, -1, NULL, NULL, &rl);
    loss_kind = NNT_DPO_SIGMOID;
    EXPECT_OK(nnt_trainer_run(x.tr, 0));
    double el = 0;
    for (int s = 0; s < STEPS; s++)
        el = fmax(el, fabs(rl.loss[s + 1] - losses[s]) / fmax(1.0, losses[s]));
    char worst[256] = "", prefix[64];
    snprintf(prefix, sizeof prefix, "%s.final", NAMES[_i]);
    double ep = fixture_worst_against(x.model, r, prefix, 1, worst, sizeof worst);
    printf("test_dpo %s: losses %.2e (relative above 1), parameters rel %.2e (%s)\n", NAMES[_i],
           el, ep, worst);
    EXPECT_TOL(el, LOSS_TOL, "%s: step losses", NAMES[_i]);
    EXPECT_TOL(ep, PARAM_TOL, "%s: parameter %s", NAMES[_i], worst);
    close_run(&x);
    free(losses);
    nnt_st_close(r);
}
END_TEST

/* A checkpoint after step 2 resumed by a new trainer (its model loaded anew): step 3 against
 * the recorded reference, bit for bit the uninterrupted run's (the reference recomputed from
 * the trained weights would give another loss) */
/* _i 1: ORPO, whose checkpoint records no reference; its model after the run validated
 * alone (steps 0, no training data: no reference needed) gives the run's held-out loss */
START_TEST(test_resume)
{
    loss_kind = _i ? NNT_DPO_ORPO : NNT_DPO_SIGMOID;
    test_make_tmpdir("dpo");
    char ckpt[4200];
    snprintf(ckpt, sizeof ckpt, "%s", test_tmp_path("ckpt.safetensors"));
    run_log whole, first, second;
    memset(&whole, 0, sizeof whole), memset(&first, 0, sizeof first);
    memset(&second, 0, sizeof second);
    run x = open_run(&TILINGS[0], B, 1, -1, NULL, NULL, &whole);
    EXPECT_OK(nnt_trainer_run(x.tr, 0));
    close_run(&x);
    x = open_run(&TILINGS[0], B, 1, -1, ckpt, NULL, &first);
    EXPECT_OK(nnt_trainer_run(x.tr, 2));
    EXPECT_OK(nnt_trainer_save(x.tr, NULL));
    close_run(&x);
    x = open_run(&TILINGS[0], B, 1, -1, NULL, ckpt, &second);
    EXPECT_OK(nnt_trainer_run(x.tr, 0));
    printf("test_dpo resume: step 3 loss %.17g (whole run %.17g), held-out %.17g (%.17g)\n",
           second.loss[3], whole.loss[3], second.val_loss, whole.val_loss);
    ck_assert(second.loss[1] == 0 && second.loss[2] == 0);   /* not run again */
    ck_assert_double_eq(second.loss[3], whole.loss[3]);
    ck_assert_double_eq(second.margin[3], whole.margin[3]);
    ck_assert_double_eq(second.val_loss, whole.val_loss);
    if (_i) {
        nnt_trainer_destroy(x.tr);
        nnt_trainer_options to = NNT_TRAINER_OPTIONS_INIT;
        to.batch = B, to.seq = T, to.steps = 0, to.dpo_beta = 0.3, to.dpo_loss = loss_kind;
        to.val_data = x.data, to.val_start = TRAIN_ROWS * T;
        to.val_len = (ROWS - TRAIN_ROWS) * T, to.val_batches = 1;
        EXPECT_OK(nnt_trainer_create(x.model, x.opt, NULL, &to, &x.tr));
        double alone = 0;
        EXPECT_OK(nnt_trainer_validate(x.tr, &alone));
        printf("test_dpo orpo validated alone: %.17g\n", alone);
        ck_assert_double_eq(alone, whole.val_loss);
    }
    loss_kind = NNT_DPO_SIGMOID;
    close_run(&x);
    test_remove_tmpdir();
}
END_TEST

/* The pieces: per-target losses (their mean is the layer's loss), and the backward with the
 * targets' weights: each row's gradient the unweighted one times its weight, weights of 1
 * the plain backward bit for bit, NULL back to it */
START_TEST(test_weights)
{
    nnt_st_reader *r = fixture_open_st_path(path_of("pairs.safetensors"));
    int32_t *rows = fixture_read_n(r, "rows", NNT_IO_I32, NULL);
    int32_t *counts = fixture_read_n(r, "counts", NNT_IO_I32, NULL);
    int32_t tgt[B * T];
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++)
            tgt[b * T + t] = t + 1 < T && counts[b * T + t + 1] ? rows[b * T + t + 1] : -1;
    nnt_layer *l = NULL;
    EXPECT_OK(nnt_model_load_hf(ctx, path_of("llama"), B, T, &TILINGS[1], &l));
    int64_t tile[2] = {2, 3};
    nnt_tensor *x = fixture_ids(ctx, B, T, rows, tile), *y = fixture_ids(ctx, B, T, tgt, tile);
    float losses[B * T], w[B * T], ones[B * T];
    double loss = 0, sum = 0;
    int64_t counted = 0;
    EXPECT_RC(nnt_layer_target_losses(l, losses, B * T), NNT_E_STATE);   /* no forward yet */
    EXPECT_OK(nnt_layer_set_targets(l, y));
    EXPECT_OK(nnt_layer_forward(l, x, NULL));
    EXPECT_OK(nnt_layer_loss(l, &loss));
    EXPECT_RC(nnt_layer_target_losses(l, losses, B * T - 1), NNT_E_SHAPE);
    EXPECT_OK(nnt_layer_target_losses(l, losses, B * T));
    for (int i = 0; i < B * T; i++) {
        sum += losses[i], counted += tgt[i] >= 0;
        if (tgt[i] < 0)
            ck_assert(losses[i] == 0.0f);
        w[i] = (float)(0.25 * (i % 7) - 0.6), ones[i] = 1.0f;
    }
    ck_assert_double_eq_tol(sum / (double)counted, loss, 1e-6 * loss);
    /* the gradients of three backwards of the same forward: plain, weights 1, weighted */
    int64_t count = 0;
    EXPECT_OK(nnt_layer_num_params(l, &count, NULL));
    float *grads[3];
    int64_t ng = 0;
    nnt_param_info head = test_param_at(l, count - 1);   /* lm_head.weight */
    ck_assert_str_eq(head.name, "lm_head.weight");
    const float *weights[3] = {NULL, ones, w};
    for (int k = 0; k < 3; k++) {
        EXPECT_OK(nnt_layer_set_targets(l, y));   /* (resets the weights) */
        EXPECT_OK(nnt_layer_forward(l, x, NULL));
        EXPECT_OK(nnt_layer_zero_grad(l));
        EXPECT_OK(nnt_layer_set_target_weights(l, weights[k], B * T));
        EXPECT_OK(nnt_layer_backward(l, NULL, NULL));
        grads[k] = test_to_host(head.grad, &ng);
    }
    ck_assert(memcmp(grads[0], grads[1], (size_t)ng * sizeof(float)) == 0);
    /* lm_head's gradient is sum_r dlogits[r]^T h[r]: with weights, sum_r w_r dlogits[r]^T h[r]
     * -- compared through the logits' gradient op directly below; here it must differ */
    ck_assert(test_rel_err(grads[2], grads[0], ng) > 0.1);
    /* the op: dlogits of weighted rows = w_r times the plain ones */
    int64_t lshape[2] = {6, 10}, ltile[2] = {4, 3}, rshape[1] = {6}, rtile[1] = {4};
    nnt_tensor *logits, *tg, *lse, *loss_t, *wt, *d0, *d1;
    EXPECT_OK(nnt_tensor_create(ctx, NNT_FP32, 2, lshape, ltile, &logits));
    EXPECT_OK(nnt_tensor_fill_normal(logits, 3, 0.0, 2.0));
    int32_t tids[6] = {1, 9, -1, 0, 5, 7};
    float wr[6] = {0.5f, -2.0f, 3.0f, 0.0f, 1.25f, -0.75f};
    EXPECT_OK(nnt_tensor_create(ctx, NNT_INT32, 1, rshape, rtile, &tg));
    EXPECT_OK(nnt_tensor_copy_from_host(tg, tids, sizeof tids));
    EXPECT_OK(nnt_tensor_create(ctx, NNT_FP32, 1, rshape, rtile, &lse));
    EXPECT_OK(nnt_tensor_create(ctx, NNT_FP32, 1, rshape, rtile, &loss_t));
    EXPECT_OK(nnt_tensor_create(ctx, NNT_FP32, 1, rshape, rtile, &wt));
    EXPECT_OK(nnt_tensor_copy_from_host(wt, wr, sizeof wr));
    EXPECT_OK(nnt_tensor_create(ctx, NNT_FP32, 2, lshape, ltile, &d0));
    EXPECT_OK(nnt_tensor_create(ctx, NNT_FP32, 2, lshape, ltile, &d1));
    EXPECT_OK(nnt_tensor_cross_entropy(logits, tg, -1, loss_t, lse));
    EXPECT_OK(nnt_tensor_cross_entropy_backward(logits, tg, -1, lse, 0.5, d0));
    EXPECT_OK(nnt_tensor_cross_entropy_backward_ex(logits, tg, -1, lse, 0.5, wt, d1));
    int64_t n0 = 0, n1 = 0;
    float *a = test_to_host(d0, &n0), *b = test_to_host(d1, &n1);
    for (int i = 0; i < 60; i++)   /* (the product rounded in another order: 1 ulp) */
        ck_assert_msg(fabsf(b[i] - wr[i / 10] * a[i]) <= 1.2e-7f * fabsf(wr[i / 10] * a[i]) + 1e-12f,
                      "row %d column %d: %g, want %g", i / 10, i % 10, b[i], wr[i / 10] * a[i]);
    /* weights must have lse's layout */
    int64_t other[1] = {3};
    nnt_tensor *bad = NULL;
    EXPECT_OK(nnt_tensor_create(ctx, NNT_FP32, 1, rshape, other, &bad));
    EXPECT_OK(nnt_tensor_fill(bad, 1.0));
    EXPECT_RC(nnt_tensor_cross_entropy_backward_ex(logits, tg, -1, lse, 0.5, bad, d1),
               NNT_E_SHAPE);
    nnt_tensor *all[] = {logits, tg, lse, loss_t, wt, d0, d1, bad, x, y};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        nnt_tensor_destroy(all[i]);
    float inf[B * T];
    memcpy(inf, w, sizeof w);
    inf[5] = INFINITY;
    EXPECT_RC(nnt_layer_set_target_weights(l, inf, B * T), NNT_E_INVAL);
    for (int k = 0; k < 3; k++)
        free(grads[k]);
    free(a), free(b), free(rows), free(counts);
    nnt_layer_destroy(l);
    nnt_st_close(r);
}
END_TEST

/* A line's ids after its key ("chosen 1 2 3"), into ids (at most cap); their number. */
/* Preference records (explicit and implicit prompts, text and conversations) encoded as
 * TRL's DPOTrainer tokenizes them (tests/gen_dpo_tok_fixtures.py): the chosen and rejected
 * sequences, and the completions counted from the prompt's end on. _i: chatml, llama3. */
START_TEST(test_encode_preference)
{
    static const char *const NAMES[2] = {"chatml", "llama3"};
    char dir[4200], path[4300], line[16384];
    snprintf(dir, sizeof dir, "%s", fixture_path_in("sft", NAMES[_i], NULL));
    snprintf(path, sizeof path, "%s/tokenizer.json", dir);
    nnt_tokenizer *tok = NULL;
    EXPECT_OK(nnt_tokenizer_hf_load(path, &tok));
    nnt_sft_options so = NNT_SFT_OPTIONS_INIT;
    so.tokenizer_config = dir;
    nnt_sft *s = NULL;
    EXPECT_OK(nnt_sft_create(tok, &so, &s));
    FILE *rec = fopen(fixture_path_in("dpo_tiny", "preference.jsonl", NULL), "r");
    char expected[4200];
    snprintf(expected, sizeof expected, "%s", fixture_path_in("dpo_tiny", NAMES[_i], "expected"));
    FILE *exp = fopen(expected, "r");
    ck_assert(rec && exp);
    int records = 0;
    static int32_t want[2][4096];
    char record[8192];
    while (fgets(record, sizeof record, rec)) {
        size_t np = 0, nw[2];
        ck_assert(fgets(line, sizeof line, exp) && sscanf(line, "prompt %zu", &np) == 1);
        for (int side = 0; side < 2; side++) {
            ck_assert(fgets(line, sizeof line, exp) != NULL);
            nw[side] = fixture_parse_ids(line, side ? "rejected" : "chosen", want[side], 4096);
        }
        const int32_t *ids[2];
        const uint8_t *counts[2];
        size_t n[2];
        EXPECT_OK(nnt_sft_encode_preference(s, record, strlen(record) - 1, ids, counts, n));
        for (int side = 0; side < 2; side++) {
            ck_assert_msg(n[side] == nw[side], "%s record %d side %d: %zu ids, TRL's %zu",
                          NAMES[_i], records, side, n[side], nw[side]);
            for (size_t i = 0; i < n[side]; i++) {
                ck_assert_msg(ids[side][i] == want[side][i], "%s record %d side %d: id %zu is "
                              "%d, TRL's %d", NAMES[_i], records, side, i, ids[side][i],
                              want[side][i]);
                ck_assert_msg(i == 0 || counts[side][i] == (i >= np), "%s record %d side %d: "
                              "count %zu is %d (the prompt has %zu ids)", NAMES[_i], records,
                              side, i, counts[side][i], np);
            }
        }
        records++;
    }
    ck_assert_int_eq(records, 7);
    /* refusals: no rejected, an unknown key, mixed kinds, an empty side without a prompt */
    static const char *const BAD[4] = {
        "{\"prompt\": \"a\", \"chosen\": \"b\"}",
        "{\"prompt\": \"a\", \"chosen\": \"b\", \"rejected\": \"c\", \"score\": 1}",
        "{\"prompt\": \"a\", \"chosen\": \"b\", \"rejected\": [{\"role\": \"assistant\", "
        "\"content\": \"c\"}]}",
        "{\"chosen\": \"\", \"rejected\": \"c\"}"};
    for (int k = 0; k < 4; k++) {
        const int32_t *ids[2];
        const uint8_t *counts[2];
        size_t n[2];
        EXPECT_RC(nnt_sft_encode_preference(s, BAD[k], strlen(BAD[k]), ids, counts, n),
                  NNT_E_FORMAT);
    }
    fclose(rec), fclose(exp);
    nnt_sft_destroy(s);
    nnt_tokenizer_destroy(tok);
}
END_TEST

/* TRL's extract_prompt at the byte level (a bytes tokenizer: a token a byte, so the first
 * counted position is where the prompt ends): the space before the first differing word goes
 * to the completions; completions differing inside a two-byte character share its first
 * byte, which goes to them; one completion the other's beginning: all but the shorter's last
 * character is prompt; conversations: the shared messages. */
START_TEST(test_extract_prompt)
{
    static const struct {
        const char *record;
        size_t prompt;   /* bytes of the prompt TRL extracts */
    } CASES[3] = {
        {"{\"chosen\": \"Water boils at 100.\", \"rejected\": \"Water boils at 50.\"}", 14},
        {"{\"chosen\": \"Un caf\u00e9.\", \"rejected\": \"Un caf\u00e8.\"}", 6},
        {"{\"chosen\": \"abc\", \"rejected\": \"abcd\"}", 2},
    };
    nnt_tokenizer *tok = NULL;
    EXPECT_OK(nnt_tokenizer_bytes_create(&tok));
    nnt_sft *s = NULL;
    EXPECT_OK(nnt_sft_create(tok, NULL, &s));
    for (int k = 0; k < 3; k++) {
        const int32_t *ids[2];
        const uint8_t *counts[2];
        size_t n[2];
        EXPECT_OK(nnt_sft_encode_preference(s, CASES[k].record, strlen(CASES[k].record), ids,
                                            counts, n));
        for (int side = 0; side < 2; side++)
            for (size_t i = 1; i < n[side]; i++)
                ck_assert_msg(counts[side][i] == (i >= CASES[k].prompt), "case %d side %d: "
                              "count %zu is %d (a prompt of %zu bytes)", k, side, i,
                              counts[side][i], CASES[k].prompt);
    }
    nnt_sft_destroy(s);
    nnt_tokenizer_destroy(tok);
}
END_TEST

/* Refusals at creation: an odd batch, a negative beta, data not in rows with a mask, an odd
 * number of rows */
START_TEST(test_errors)
{
    nnt_layer *l = NULL;
    EXPECT_OK(nnt_model_load_hf(ctx, path_of("llama"), 3, T, NULL, &l));
    nnt_optim_options oo = NNT_OPTIM_OPTIONS_INIT;
    nnt_optim *opt = NULL;
    EXPECT_OK(nnt_optim_create(ctx, &oo, &opt));
    EXPECT_OK(nnt_optim_add_layer(opt, l));
    nnt_data *d = NULL;
    EXPECT_OK(nnt_data_open(path_of("pairs.bin"), NNT_DATA_AUTO, NULL, 64, &d));
    nnt_trainer_options to = NNT_TRAINER_OPTIONS_INIT;
    to.batch = 3, to.seq = T, to.steps = 1, to.dpo_beta = 0.1;
    nnt_trainer *tr = NULL;
    EXPECT_RC(nnt_trainer_create(l, opt, d, &to, &tr), NNT_E_INVAL);   /* B 3 */
    ck_assert(strstr(nnt_ctx_last_error(ctx), "even") != NULL);
    nnt_layer_destroy(l);
    EXPECT_OK(nnt_model_load_hf(ctx, path_of("llama"), 2, T, NULL, &l));
    nnt_optim_destroy(opt);
    EXPECT_OK(nnt_optim_create(ctx, &oo, &opt));
    EXPECT_OK(nnt_optim_add_layer(opt, l));
    to.batch = 2, to.dpo_beta = -0.1;
    EXPECT_RC(nnt_trainer_create(l, opt, d, &to, &tr), NNT_E_INVAL);
    to.dpo_beta = NAN;
    EXPECT_RC(nnt_trainer_create(l, opt, d, &to, &tr), NNT_E_INVAL);
    to.dpo_beta = 0.1, to.dpo_loss = NNT_DPO_AOT_UNPAIRED + 1;
    EXPECT_RC(nnt_trainer_create(l, opt, d, &to, &tr), NNT_E_INVAL);
    /* the label smoothing of robust DPO (below 0.5) and EXO (above 0), for them alone; a
     * DiscoPOP tau above 0 */
    const struct {
        int loss;
        double e, tau;
        const char *says;
    } bad[6] = {{NNT_DPO_ROBUST, 0.5, 0.05, "robust DPO's and AOT's flip probability"},
                {NNT_DPO_EXO_PAIR, 0.0, 0.05, "EXO's epsilon"},
                {NNT_DPO_EXO_PAIR, 1.0, 0.05, "EXO's epsilon"},
                {NNT_DPO_SIGMOID, 0.1, 0.05, "is for NNT_DPO_ROBUST, _EXO_PAIR, _AOT"},
                {NNT_DPO_DISCOPOP, 0.0, 0.0, "discopop_tau 0"},
                {NNT_DPO_AOT, 0.5, 0.05, "AOT's flip probability is in [0, 0.5)"}};
    for (int i = 0; i < 6; i++) {
        to.dpo_loss = bad[i].loss, to.dpo_label_smoothing = bad[i].e;
        to.discopop_tau = bad[i].tau;
        EXPECT_FAIL_MSG(nnt_trainer_create(l, opt, d, &to, &tr), NNT_E_INVAL, bad[i].says);
    }
    to.dpo_label_smoothing = 0.0, to.discopop_tau = 0.05;
    to.dpo_loss = NNT_DPO_SIMPO, to.simpo_gamma = -0.5;
    EXPECT_RC(nnt_trainer_create(l, opt, d, &to, &tr), NNT_E_INVAL);
    ck_assert(strstr(nnt_ctx_last_error(ctx), "simpo_gamma") != NULL);
    to.simpo_gamma = 0.5, to.cpo_alpha = NAN;
    EXPECT_RC(nnt_trainer_create(l, opt, d, &to, &tr), NNT_E_INVAL);
    to.cpo_alpha = 1.0, to.dpo_loss = NNT_DPO_ORPO, to.rpo_alpha = 0.5;   /* (cpo_alpha's) */
    EXPECT_RC(nnt_trainer_create(l, opt, d, &to, &tr), NNT_E_INVAL);
    ck_assert(strstr(nnt_ctx_last_error(ctx), "rpo_alpha") != NULL);
    to.rpo_alpha = 0.0, to.dpo_loss = NNT_DPO_SIGMOID;
    to.dpo_beta = 0.1, to.steps = 0;   /* validation only: the reference needs the pairs */
    EXPECT_RC(nnt_trainer_create(l, opt, NULL, &to, &tr), NNT_E_INVAL);
    ck_assert(strstr(nnt_ctx_last_error(ctx), "training pairs") != NULL);
    to.steps = 1;
    to.dpo_beta = 0.1, to.train_tokens = 3 * T;   /* 3 rows: a pair and half of one */
    EXPECT_RC(nnt_trainer_create(l, opt, d, &to, &tr), NNT_E_INVAL);
    ck_assert(strstr(nnt_ctx_last_error(ctx), "even number") != NULL);
    nnt_data_close(d);
    /* a plain token file (no rows, no mask) */
    test_make_tmpdir("dpo_errors");
    const char *plain = test_tmp_path("plain.bin");
    nnt_token_writer *w = NULL;
    EXPECT_OK(nnt_token_writer_open(NULL, plain, NULL, &w));
    int32_t ids[4 * T];
    for (int i = 0; i < 4 * T; i++)
        ids[i] = i % 64;
    EXPECT_OK(nnt_token_writer_write(w, ids, 4 * T));
    EXPECT_OK(nnt_token_writer_close(w));
    EXPECT_OK(nnt_data_open(plain, NNT_DATA_AUTO, NULL, 64, &d));
    to.train_tokens = 0;
    EXPECT_RC(nnt_trainer_create(l, opt, d, &to, &tr), NNT_E_INVAL);
    ck_assert(strstr(nnt_ctx_last_error(ctx), "nnt-tokenize --preference") != NULL);
    nnt_data_close(d);
    /* SimPO and ORPO average a row's log-likelihood over its counted targets: a pair whose
     * chosen row has none is refused when read (TRL divides 0 by 0) */
    const char *empty = test_tmp_path("empty.bin");
    nnt_token_writer_options wo = NNT_TOKEN_WRITER_OPTIONS_INIT;
    wo.mask = 1, wo.block = T;
    uint8_t counts[2 * T] = {0};
    for (int t = T + 3; t < T + 6; t++)   /* the rejected row: 3 counted tokens */
        counts[t] = 1;
    EXPECT_OK(nnt_token_writer_open(NULL, empty, &wo, &w));
    EXPECT_OK(nnt_token_writer_write_masked(w, ids, counts, 2 * T));
    EXPECT_OK(nnt_token_writer_close(w));
    EXPECT_OK(nnt_data_open(empty, NNT_DATA_AUTO, NULL, 64, &d));
    for (int k = 0; k < 2; k++) {
        to.dpo_loss = k ? NNT_DPO_ORPO : NNT_DPO_SIMPO;
        EXPECT_OK(nnt_trainer_create(l, opt, d, &to, &tr));
        EXPECT_RC(nnt_trainer_step(tr), NNT_E_FORMAT);
        ck_assert(strstr(nnt_ctx_last_error(ctx), "pair 0's chosen row has no counted") != NULL);
        nnt_trainer_destroy(tr);
    }
    to.dpo_loss = NNT_DPO_CPO;   /* (sums: a row of none counts 0) */
    EXPECT_OK(nnt_trainer_create(l, opt, d, &to, &tr));
    EXPECT_OK(nnt_trainer_step(tr));
    nnt_trainer_destroy(tr);
    nnt_data_close(d);
    test_remove_tmpdir();
    nnt_optim_destroy(opt);
    nnt_layer_destroy(l);
}
END_TEST

static Suite *dpo_suite(void)
{
    Suite *s = suite_create("dpo");
    TCase *tc = tcase_create("dpo");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 240);
    tcase_add_loop_test(tc, test_reference, 0, 3);
    tcase_add_test(tc, test_accum);
    tcase_add_loop_test(tc, test_loss_kinds, 0, 2);
    tcase_add_loop_test(tc, test_resume, 0, 2);
    tcase_add_loop_test(tc, test_free_losses, 0, 8);
    tcase_add_test(tc, test_pair_derivatives);
    tcase_add_test(tc, test_loss_types_trl);
    tcase_add_test(tc, test_weights);
    tcase_add_loop_test(tc, test_encode_preference, 0, 2);
    tcase_add_test(tc, test_extract_prompt);
    tcase_add_test(tc, test_errors);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return run_suite(dpo_suite());
}
