/* SPDX-License-Identifier: MIT */
/* nnt_trainer: the training loop every program shares (nnt-train's, moved here).
 *
 *   step        gradients dropped; per micro-batch: B*T + 1 tokens (or B shuffled sequences
 *               of T + 1), forward with targets, backward, its loss; one optimizer update
 *   validation  the mean loss of the same held-out windows each time (forward only), the
 *               best one saved
 *   checkpoint  nnt_train_state_save (temporary file, fsync, rename) with the data position,
 *               the rng words and an options string recording the run's configuration
 *               (record.c, which also resumes)
 *   log         log_dir: train.csv and val.csv, rebuilt on resume (rows up to its step), the
 *               loss curve's SVG; the CPU workers' GEMM peak measured at creation
 *   creation    the options checked and copied, a resume, a previous run's files kept
 *               (keep.c); nnt_trainer_open's trainers own their parts (run.c)
 * Only the public API is called on the model, the optimizer and the data, except that the
 * optimizer's options are read for the info and the options string. */
#include "trainer_impl.h"
#include "../optim/optim.h"
#include "../models/models.h"
#include "../layers/generic.h"

#include <errno.h>
#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static uint64_t splitmix64(uint64_t *x)
{
    uint64_t z = (*x += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

int nnt_trainer_check(const nnt_trainer *tr, const char *fn)
{
    if (!tr || tr->magic != NNT_TRAINER_MAGIC)
        return nnt_fail(NULL, NNT_E_INVAL, "%s: the trainer is NULL or not a trainer", fn);
    return nnt_ctx_check(tr->ctx, fn);
}

static char *copy_string(const char *s, int *failed)
{
    char *c = s ? strdup(s) : NULL;
    if (s && !c)
        *failed = 1;
    return c;
}

static void free_strings(nnt_trainer_options *o)
{
    free((char *)o->checkpoint), free((char *)o->best_checkpoint), free((char *)o->trace);
    free((char *)o->trace_table), free((char *)o->program), free((char *)o->extra_options);
    free((char *)o->log_dir), free((char *)o->resume), free((char *)o->keep_also);
}

/* dpo_label_smoothing and discopop_tau: in range, and label smoothing only with the losses
 * that read it (TRL's robust: in [0, 0.5); exo_pair: in (0, 1), log e being in its loss) */
static int check_loss_parameters(nnt_ctx *ctx, const char *fn, const nnt_trainer_options *o)
{
    double e = o->dpo_label_smoothing;
    if (!(o->discopop_tau > 0) || !isfinite(o->discopop_tau))
        return nnt_fail(ctx, NNT_E_INVAL, "%s: discopop_tau %g (> 0; TRL's default 0.05)", fn,
                        o->discopop_tau);
    const int flips = o->dpo_loss == NNT_DPO_ROBUST || o->dpo_loss == NNT_DPO_AOT ||
                      o->dpo_loss == NNT_DPO_AOT_UNPAIRED;
    if (flips && !(e >= 0 && e < 0.5))
        return nnt_fail(ctx, NNT_E_INVAL, "%s: dpo_label_smoothing %g: robust DPO's and AOT's "
                        "flip probability is in [0, 0.5)", fn, e);
    if (o->dpo_loss == NNT_DPO_EXO_PAIR && !(e > 0 && e < 1))
        return nnt_fail(ctx, NNT_E_INVAL, "%s: dpo_label_smoothing %g: EXO's epsilon is in "
                        "(0, 1) (its paper: 1e-3)", fn, e);
    if (e != 0 && !flips && o->dpo_loss != NNT_DPO_EXO_PAIR)
        return nnt_fail(ctx, NNT_E_INVAL, "%s: dpo_label_smoothing %g is for NNT_DPO_ROBUST, "
                        "_EXO_PAIR, _AOT and _AOT_UNPAIRED", fn, e);
    return NNT_OK;
}

/* rows: the held-out tokens are read in whole rows (nnt_held_out_in_rows). */
static int check_options(nnt_ctx *ctx, const char *fn, const nnt_trainer_options *o,
                         const nnt_data *data, int rows)
{
    if (o->batch < 1 || o->seq < 1 || o->accum < 1 || o->steps < 0 || o->train_tokens < 0 ||
        o->tile_batch < 0 || o->tile_seq < 0 || o->val_batches < 0 || o->val_every < 0 ||
        o->save_every < 0 || o->trace_steps < 1 || !(o->peak_flops >= 0) ||
        o->val_start < 0 || o->val_len < 0)
        return nnt_fail(ctx, NNT_E_INVAL, "%s: batch, seq, accum, trace_steps must be >= 1; "
                        "steps, train_tokens, tiles, val_*, save_every, peak_flops >= 0", fn);
    if (!data && o->steps > 0)
        return nnt_fail(ctx, NNT_E_INVAL, "%s: no training data (NULL is for steps 0)", fn);
    if (!(o->dpo_beta >= 0) || !isfinite(o->dpo_beta))
        return nnt_fail(ctx, NNT_E_INVAL, "%s: dpo_beta %g (> 0: DPO; 0: none)", fn, o->dpo_beta);
    if (o->dpo_loss < NNT_DPO_SIGMOID || o->dpo_loss > NNT_DPO_AOT_UNPAIRED)
        return nnt_fail(ctx, NNT_E_INVAL, "%s: dpo_loss %d (an nnt_dpo_loss: NNT_DPO_SIGMOID "
                        "to NNT_DPO_AOT_UNPAIRED)", fn, o->dpo_loss);
    NNT_TRY(check_loss_parameters(ctx, fn, o));
    if (!(o->desirable_weight >= 0) || !isfinite(o->desirable_weight) ||
        !(o->undesirable_weight >= 0) || !isfinite(o->undesirable_weight))
        return nnt_fail(ctx, NNT_E_INVAL, "%s: desirable_weight %g, undesirable_weight %g (each "
                        ">= 0)", fn, o->desirable_weight, o->undesirable_weight);
    if (!(o->simpo_gamma >= 0) || !isfinite(o->simpo_gamma) || !(o->cpo_alpha >= 0) ||
        !isfinite(o->cpo_alpha) || !(o->rpo_alpha >= 0) || !isfinite(o->rpo_alpha))
        return nnt_fail(ctx, NNT_E_INVAL, "%s: simpo_gamma %g, cpo_alpha %g, rpo_alpha %g (each "
                        ">= 0)", fn, o->simpo_gamma, o->cpo_alpha, o->rpo_alpha);
    if (o->rpo_alpha > 0 && (!(o->dpo_beta > 0) || nnt_dpo_loss_free(o->dpo_loss) ||
                             nnt_dpo_loss_unpaired(o->dpo_loss)))
        return nnt_fail(ctx, NNT_E_INVAL, "%s: rpo_alpha %g adds the chosen sequences' nll to "
                        "a DPO loss on pairs against a reference (dpo_beta > 0; not CPO, SimPO, "
                        "ORPO, KTO or APO-zero unpaired); CPO's and SimPO's weight is cpo_alpha",
                        fn, o->rpo_alpha);
    if (o->early_stop < 0 || !(o->early_stop_delta >= 0) || !isfinite(o->early_stop_delta))
        return nnt_fail(ctx, NNT_E_INVAL, "%s: early_stop %lld, early_stop_delta %g (each >= 0)",
                        fn, (long long)o->early_stop, o->early_stop_delta);
    if (o->early_stop > 0 && o->val_batches == 0)
        return nnt_fail(ctx, NNT_E_INVAL, "%s: early_stop %lld stops on the validation loss: "
                        "it needs validations (val_batches > 0)", fn, (long long)o->early_stop);
    if (!(o->label_smoothing >= 0 && o->label_smoothing < 1))
        return nnt_fail(ctx, NNT_E_INVAL, "%s: label_smoothing %g is outside [0, 1)", fn,
                        o->label_smoothing);
    if (o->label_smoothing > 0 && o->dpo_beta > 0)
        return nnt_fail(ctx, NNT_E_INVAL, "%s: label_smoothing %g smooths the language-model "
                        "loss; preference losses (dpo_beta %g) read log-likelihoods", fn,
                        o->label_smoothing, o->dpo_beta);
    if (!(o->neftune_alpha >= 0) || !isfinite(o->neftune_alpha))
        return nnt_fail(ctx, NNT_E_INVAL, "%s: neftune_alpha %g (>= 0; 0: none)", fn,
                        o->neftune_alpha);
    if (o->neftune_alpha > 0 && o->dpo_beta > 0)
        return nnt_fail(ctx, NNT_E_INVAL, "%s: neftune_alpha %g: not with preference losses "
                        "(dpo_beta %g), whose reference passes would see noise or not", fn,
                        o->neftune_alpha, o->dpo_beta);
    if (!(o->reward_center >= 0) || !isfinite(o->reward_center))
        return nnt_fail(ctx, NNT_E_INVAL, "%s: reward_center %g (>= 0; 0: none)", fn,
                        o->reward_center);
    if (o->dpo_beta > 0 && !data && !nnt_dpo_loss_free(o->dpo_loss))   /* (its reference: the
                                                                           training pairs' too) */
        return nnt_fail(ctx, NNT_E_INVAL, "%s: DPO (dpo_beta %g) needs the training pairs, "
                        "also to validate", fn, o->dpo_beta);
    if (o->update_in_backward < -1 || o->update_in_backward > 1)
        return nnt_fail(ctx, NNT_E_INVAL, "%s: update_in_backward %d (use -1, 0 or 1)", fn,
                        o->update_in_backward);
    if (o->val_batches > 0 &&
        o->val_len < o->val_batches * o->batch * o->seq + (rows ? 0 : 1))
        return nnt_fail(ctx, NNT_E_INVAL, "%s: %lld validation windows of B x T%s tokens "
                        "need more than the %lld held-out tokens", fn,
                        (long long)o->val_batches, rows ? "" : " + 1",
                        (long long)o->val_len);
    if (o->val_batches > 0 && !o->val_data && !data)
        return nnt_fail(ctx, NNT_E_INVAL, "%s: validation without data", fn);
    if (o->trace && !o->trace_table)
        return nnt_fail(ctx, NNT_E_INVAL, "%s: trace without trace_table", fn);
    return NNT_OK;
}

/* Data laid out in rows (nnt-tokenize --seq: whole examples a row) is read with T = its row
 * length, in whole rows: the range [start, start + len) must begin and end on one. */
static int check_block(const nnt_trainer *tr, const char *fn, const nnt_data_info *di,
                       const char *what, int64_t len, int64_t start)
{
    int64_t T = tr->o.seq, block = di->block;
    if (!block)
        return NNT_OK;
    if (block != T)
        return nnt_fail(tr->ctx, NNT_E_INVAL, "%s: the %s is rows of %lld tokens (examples "
                        "laid out for T = %lld by nnt-tokenize --seq): train with seq %lld, not "
                        "%lld", fn, what, (long long)block, (long long)block, (long long)block,
                        (long long)T);
    if (start % block || (len % block && start + len != di->tokens))
        return nnt_fail(tr->ctx, NNT_E_INVAL, "%s: the %s is rows of %lld tokens, but its "
                        "tokens [%lld, %lld) cut a row: split it on a multiple of %lld", fn,
                        what, (long long)block, (long long)start, (long long)(start + len),
                        (long long)block);
    return NNT_OK;
}

nnt_data *nnt_trainer_val_source(const nnt_trainer *tr)
{
    const nnt_trainer_options *o = &tr->o;
    return o->val_batches > 0 ? (o->val_data ? o->val_data : tr->data) : NULL;
}

int nnt_held_out_in_rows(int pairs, const nnt_data *val)
{
    nnt_data_info di = NNT_DATA_INFO_INIT;
    if (pairs)
        return 1;
    return val && nnt_data_info_get(val, &di) == 0 && di.block > 0;
}

/* A classifier of several labels trains on labelled examples: each text then its label, the
 * one target that counts (nnt-tokenize --num-labels): data with a loss mask, whose counted
 * targets are checked below num_labels as micro-batches are read (upload_batch). */
static int classifier_prepare(nnt_trainer *tr, const char *fn, int64_t labels)
{
    if (labels < 2)
        return NNT_OK;
    tr->labels = labels;
    nnt_data *sources[2] = {tr->data, nnt_trainer_val_source(tr)};
    for (int k = 0; k < 2; k++) {
        nnt_data_info di = NNT_DATA_INFO_INIT;
        if (sources[k] && nnt_data_info_get(sources[k], &di) == 0 && !di.masked)
            return nnt_fail(tr->ctx, NNT_E_INVAL, "%s: a classifier of %lld labels trains on "
                            "labelled examples, each text followed by its label, the one "
                            "target that counts (nnt-tokenize --num-labels; nnt_sft_encode_"
                            "labelled): the %s has no loss mask", fn, (long long)labels,
                            k ? "held-out data" : "training data");
    }
    return NNT_OK;
}

int nnt_trainer_multi_label(const nnt_trainer *tr)
{
    return tr->values_k > 0 && tr->values_problem == NNT_PROBLEM_MULTI_LABEL;
}

int nnt_trainer_has_accuracy(const nnt_trainer *tr)
{
    return tr->labels > 0 || nnt_trainer_multi_label(tr);
}

const char *nnt_trainer_values_kind(const nnt_trainer *tr)
{
    return tr->values_problem == NNT_PROBLEM_REGRESSION ? "regression" : "multi-label";
}

/* A classifier trained on values (regression, multi-label) trains on rows that carry them:
 * each text then a token that counts, its pooled position (nnt-tokenize --problem-type;
 * nnt_token_writer_write_example_values), as many values a row as it has labels. */
static int values_prepare(nnt_trainer *tr, const char *fn, const nnt_model_config *cfg)
{
    tr->values_problem = cfg->problem_type;
    const char *kind = nnt_trainer_values_kind(tr);
    nnt_data *sources[2] = {tr->data, nnt_trainer_val_source(tr)};
    for (int k = 0; k < 2; k++) {
        nnt_data_info di = NNT_DATA_INFO_INIT;
        if (sources[k] && nnt_data_info_get(sources[k], &di) == 0 &&
            (!di.masked || di.row_values != cfg->num_labels))
            return nnt_fail(tr->ctx, NNT_E_INVAL, "%s: a %s classifier of %lld labels trains on "
                            "rows that carry %lld values each, each text followed by one "
                            "target that counts (nnt-tokenize --problem-type; nnt_token_writer_"
                            "write_example_values): the %s %s", fn, kind,
                            (long long)cfg->num_labels, (long long)cfg->num_labels,
                            k ? "held-out data" : "training data",
                            !di.masked ? "has no loss mask" : di.row_values ? "carries another "
                            "number of values a row" : "carries no values");
    }
    if (tr->o.dpo_beta > 0)
        return nnt_fail(tr->ctx, NNT_E_INVAL, "%s: dpo_beta: a %s classifier is not trained on "
                        "preference pairs", fn, kind);
    tr->values_k = cfg->num_labels;
    tr->values = malloc((size_t)(tr->o.batch * tr->values_k) * sizeof *tr->values);
    return tr->values ? NNT_OK : nnt_fail(tr->ctx, NNT_E_NOMEM, "%s: out of memory", fn);
}

/* Whether v is one of the n tensors of set. */
static int among(const nnt_tensor *v, const nnt_tensor *const *set, int n)
{
    for (int k = 0; k < n; k++)
        if (v == set[k])
            return 1;
    return 0;
}

/* neftune_alpha: set on the model's embedding (its own setting put back at destroy). */
static int noise_prepare(nnt_trainer *tr)
{
    if (tr->o.neftune_alpha == 0.0)
        return NNT_OK;
    gl_embedding_noise_of(tr->model, &tr->noise_before, &tr->noise_seed_before);
    NNT_TRY(nnt_layer_set_neftune(tr->model, tr->o.neftune_alpha, tr->o.seed));
    tr->noise_set = 1;
    return NNT_OK;
}

/* label_smoothing: set on the model's loss layer (its own setting put back at destroy). */
static int smoothing_prepare(nnt_trainer *tr, const char *fn, const nnt_model_config *cfg)
{
    double eps = tr->o.label_smoothing;
    if (eps == 0.0)
        return NNT_OK;
    if (cfg->num_labels > 0)
        return nnt_fail(tr->ctx, NNT_E_INVAL, "%s: label_smoothing %g smooths a language "
                        "model's loss over its vocabulary; a %s's loss is not that one", fn,
                        eps, nnt_model_is_reward(cfg) ? "reward model" : "classifier");
    tr->smoothing_before = gl_cross_entropy_smoothing(tr->model);
    NNT_TRY(nnt_layer_set_label_smoothing(tr->model, eps));
    tr->smoothing_set = 1;
    return NNT_OK;
}

/* The data's split, the batch tensors and buffers, the rng, the FLOPs of a token. */
static int prepare(nnt_trainer *tr, const char *fn)
{
    const nnt_trainer_options *o = &tr->o;
    int64_t n = 0;
    if (tr->data) {
        NNT_TRY(nnt_data_num_tokens(tr->data, &n));
        tr->ntokens = o->train_tokens > 0 && o->train_tokens < n ? o->train_tokens : n;
        tr->held_out = n - tr->ntokens;
        if (tr->ntokens < 2)
            return nnt_fail(tr->ctx, NNT_E_INVAL, "%s: %lld training tokens, at least 2 are "
                            "needed", fn, (long long)tr->ntokens);
        nnt_data_info di = NNT_DATA_INFO_INIT;
        NNT_TRY(nnt_data_info_get(tr->data, &di));
        NNT_TRY(check_block(tr, fn, &di, "training data", tr->ntokens, 0));
        tr->masked = di.masked;
        tr->nrows = (uint64_t)(tr->ntokens - 1) / (uint64_t)o->seq;
        if (di.block)   /* a row's T + 1-th token starts the next row: never a target */
            tr->nrows = (uint64_t)tr->ntokens / (uint64_t)o->seq;
        if (o->shuffle && tr->nrows == 0)
            return nnt_fail(tr->ctx, NNT_E_INVAL, "%s: shuffle reads sequences of T + 1 = "
                            "%lld tokens: the data has %lld training tokens", fn,
                            (long long)o->seq + 1, (long long)tr->ntokens);
    }
    nnt_model_config cfg = NNT_MODEL_CONFIG_INIT;
    int64_t count = 0;
    double trained = 0.0, frozen = 0.0;   /* elements read by products */
    NNT_TRY(nnt_model_config_of(tr->model, &cfg));
    NNT_TRY(nnt_layer_num_params(tr->model, &count, NULL));
    /* the tables only lookups read (an untied token table, positions): no FLOPs */
    nnt_layer *tree = tr->model->vt->inner ? tr->model->vt->inner(tr->model) : tr->model;
    const nnt_tensor *lookups[8];
    int nlookups = gl_lookup_tables(tree, lookups, 8);
    nlookups = nlookups < 8 ? nlookups : 8;
    /* mixture of experts: a token goes through k of the E experts of a block */
    double active = cfg.experts > 0 ? (double)cfg.experts_per_token / (double)cfg.experts : 1.0;
    for (int64_t i = 0; i < count; i++) {
        nnt_param_info p;
        int64_t n = 0;
        memset(&p, 0, sizeof p);
        p.size = sizeof p;
        NNT_TRY(nnt_layer_param(tr->model, i, &p));
        NNT_TRY(nnt_tensor_numel(p.value, &n));
        tr->params += n, tr->frozen += p.frozen ? n : 0;
        if (among(p.value, lookups, nlookups))
            continue;
        *(p.frozen ? &frozen : &trained) += (double)n * (strstr(p.name, "experts.") ? active : 1.0);
    }
    uint64_t sum;   /* the base as loaded: before a bf16 product rounds a frozen matrix */
    if (tr->frozen > 0)
        NNT_TRY(nnt_trainer_base_checksum(tr, NNT_BASE_SUM_WORDS, &sum));
    /* a frozen parameter: its forward and input-gradient products, no weight gradient */
    tr->flops_per_token = 6.0 * trained + 4.0 * frozen +
                          12.0 * (double)(cfg.layers * o->seq) * (double)(cfg.heads * cfg.head_dim);
    int64_t tile[2] = {o->tile_batch, o->tile_seq}, shape[2] = {o->batch, o->seq};
    if (!tile[0] || !tile[1]) {
        nnt_tiling tl;
        NNT_TRY(nnt_model_tiling(tr->ctx, &cfg, o->batch, o->seq, NULL, &tl));
        tile[0] = tile[0] ? tile[0] : tl.batch, tile[1] = tile[1] ? tile[1] : tl.seq;
    }
    NNT_TRY(nnt_tensor_create(tr->ctx, NNT_INT32, 2, shape, tile, &tr->tokens));
    NNT_TRY(nnt_tensor_create(tr->ctx, NNT_INT32, 2, shape, tile, &tr->targets));
    if (o->val_batches > 0 && (o->val_data || tr->data)) {
        nnt_data_info vi = NNT_DATA_INFO_INIT;
        NNT_TRY(nnt_data_info_get(o->val_data ? o->val_data : tr->data, &vi));
        NNT_TRY(check_block(tr, fn, &vi, "held-out data", o->val_len, o->val_start));
    }
    tr->window = malloc(((size_t)(o->batch * o->seq) + 1) * sizeof *tr->window);
    tr->mask = malloc((size_t)(o->batch * o->seq));
    tr->kept = malloc((size_t)(o->batch * o->seq) * sizeof *tr->kept);
    if (o->shuffle)
        tr->rows = malloc(((size_t)(2 * o->batch * o->seq + o->seq) + 1) * sizeof *tr->rows);
    if (!tr->window || !tr->mask || !tr->kept || (o->shuffle && !tr->rows))
        return nnt_fail(tr->ctx, NNT_E_NOMEM, "%s: batch buffers", fn);
    uint64_t sm = o->seed;
    for (int i = 0; i < 4; i++)
        tr->rng[i] = splitmix64(&sm);
    nnt_optim_stats stats = {sizeof stats, 0, 0, 0};
    NNT_TRY(nnt_optim_stats_get(tr->opt, &stats));
    tr->done = stats.step;
    NNT_TRY(smoothing_prepare(tr, fn, &cfg));
    NNT_TRY(noise_prepare(tr));
    if (cfg.problem_type != NNT_PROBLEM_DEFAULT)
        NNT_TRY(values_prepare(tr, fn, &cfg));
    else
        NNT_TRY(classifier_prepare(tr, fn, cfg.num_labels));
    /* pairs (DPO, a reward model) for training or held out: validations alone (steps 0) too */
    nnt_data *pairs = tr->data ? tr->data : nnt_trainer_val_source(tr);
    return pairs ? nnt_dpo_prepare(tr, fn) : NNT_OK;
}

/* The CPU workers' GEMM rate: a (W x 512, 1024) x (1024, 1024) product cut into one 512-row
 * tile per worker (one task each, about 1 GFLOP), measured in rounds of one product each.
 * The first rounds are slow (first touch of the tiles, the kernels' set-up and their
 * per-shape choices, the cores' clocks) and one round alone varies by about 10 % on a shared
 * host, so the rate is that of the best PEAK_WINDOW rounds in a row (about 20 ms, a rate the
 * workers sustain, as a step's products must) among PEAK_ROUNDS after PEAK_WARMUP. 0 when
 * it cannot be measured (e.g. a RAM budget below the tiles' 10 MiB). */
enum { PEAK_WARMUP = 3, PEAK_ROUNDS = 32, PEAK_WINDOW = 8 };

static double measure_peak(nnt_ctx *ctx, int ncpus)
{
    int64_t w = ncpus > 0 ? ncpus : 1, rows = 512, n = 1024;
    int64_t shape_a[2] = {w * rows, n}, tile_a[2] = {rows, n}, shape_b[2] = {n, n};
    nnt_tensor *a = NULL, *b = NULL, *c = NULL;
    double seconds[PEAK_ROUNDS], best = 0;
    int measured = 0;
    if (!nnt_tensor_create(ctx, NNT_FP32, 2, shape_a, tile_a, &a) &&
        !nnt_tensor_create(ctx, NNT_FP32, 2, shape_b, shape_b, &b) &&
        !nnt_tensor_create(ctx, NNT_FP32, 2, shape_a, tile_a, &c) &&
        !nnt_tensor_fill(a, 0.5) && !nnt_tensor_fill(b, 0.25) && !nnt_ctx_wait(ctx)) {
        for (int round = 0; round < PEAK_WARMUP + PEAK_ROUNDS; round++) {
            double start = now_s();
            if (nnt_tensor_gemm(NNT_NOTRANS, NNT_NOTRANS, 1.0, a, b, 0.0, c, 1, 0) ||
                nnt_ctx_wait(ctx))
                break;
            if (round >= PEAK_WARMUP)
                seconds[measured++] = now_s() - start;
        }
    }
    if (measured == PEAK_ROUNDS)
        best = nnt_train_sustained_rate(seconds, PEAK_ROUNDS, PEAK_WINDOW,
                                        2.0 * (double)(w * rows) * (double)n * (double)n);
    nnt_tensor_destroy(a);
    nnt_tensor_destroy(b);
    nnt_tensor_destroy(c);
    return best;
}

/* ---- the log: train.csv, val.csv, loss.svg ------------------------------------------------ */

static char *log_path(const nnt_trainer *tr, const char *name)
{
    size_t n = strlen(tr->o.log_dir) + strlen(name) + 2;
    char *p = malloc(n);
    if (p)
        snprintf(p, n, "%s/%s", tr->o.log_dir, name);
    return p;
}

/* Append (step, loss) to a curve of *n points with room for *cap. */
static int add_point(nnt_train_point **curve, int64_t *n, int64_t *cap, int64_t step,
                     double loss)
{
    if (*n == *cap) {
        int64_t more = *cap ? 2 * *cap : 1024;
        nnt_train_point *c = realloc(*curve, (size_t)more * sizeof *c);
        if (!c)
            return NNT_E_NOMEM;
        *curve = c, *cap = more;
    }
    (*curve)[(*n)++] = (nnt_train_point){step, loss};
    return NNT_OK;
}

/* A validation's loss: the curve, the last and the lowest, and the validations in a row
 * that did not improve (as transformers' EarlyStoppingCallback counts them: an improvement is
 * a loss below the lowest before it by more than early_stop_delta; the first is none). */
static int add_validation(nnt_trainer *tr, int64_t step, double loss)
{
    int first = tr->nvalidations++ == 0;
    tr->stale = first || loss < tr->low_val - tr->o.early_stop_delta ? 0 : tr->stale + 1;
    tr->last_val_step = step, tr->last_val = loss;
    if (loss < tr->low_val || first)
        tr->low_val = loss, tr->low_val_step = step;
    return tr->logs_open ? add_point(&tr->val_curve, &tr->nval, &tr->cap_val, step, loss)
                         : NNT_OK;
}

/* A log with header, through a temporary file and a rename, left open for its rows; on
 * resume it first gets the rows of steps 1..done of the file there (when it has this
 * header), their points added to the curve (val: the validations). */
static int start_log(nnt_trainer *tr, const char *name, const char *header, int val, FILE **out)
{
    char *path = log_path(tr, name), *tmp = log_path(tr, val ? "val.csv.tmp" : "train.csv.tmp");
    FILE *old = path && tmp && tr->done ? fopen(path, "r") : NULL;
    FILE *f = path && tmp ? fopen(tmp, "w") : NULL;
    char line[1024];
    int rc = f ? NNT_OK : NNT_E_IO;
    if (f)
        fputs(header, f);
    if (old && (!fgets(line, sizeof line, old) || strcmp(line, header)))
        fclose(old), old = NULL;
    for (int64_t prev = 0; !rc && old && fgets(line, sizeof line, old);) {
        char *end;
        int64_t step = strtoll(line, &end, 10);
        double loss = *end == ',' ? strtod(end + 1, NULL) : NAN;
        size_t n = strlen(line);
        if (step <= prev || step > tr->done || !isfinite(loss) || line[n - 1] != '\n')
            break;
        fputs(line, f), prev = step;
        if (!val)
            rc = add_point(&tr->curve, &tr->ncurve, &tr->cap_curve, step, loss);
        else   /* (counted already when the checkpoint recorded its validations) */
            rc = tr->vals_resumed ? add_point(&tr->val_curve, &tr->nval, &tr->cap_val, step, loss)
                                  : add_validation(tr, step, loss);
    }
    if (old)
        fclose(old);
    if (f && (fflush(f) || fsync(fileno(f)) || rename(tmp, path)))
        rc = NNT_E_IO;
    if (rc == NNT_E_IO)
        rc = nnt_fail(tr->ctx, NNT_E_IO, "nnt_trainer: cannot write %s: %s",
                      path ? path : name, strerror(errno));
    if (rc && f)
        fclose(f), remove(tmp), f = NULL;
    *out = f;
    free(path), free(tmp);
    return path && tmp ? rc : nnt_fail(tr->ctx, NNT_E_NOMEM, "nnt_trainer: out of memory");
}

/* val.csv's first line: the step, loss and tokens of each validation, and a classifier's
 * metrics */
static const char *val_header(const nnt_trainer *tr)
{
    if (tr->values_k)
        return nnt_trainer_multi_label(tr) ? "step,val_loss,tokens,accuracy,exact_match,f1\n"
                                           : "step,val_loss,tokens,mae\n";
    return tr->labels ? "step,val_loss,tokens,accuracy\n" : "step,val_loss,tokens\n";
}

/* log_dir's files, before the first step of the trainer (rank 0; not for steps 0). */
static int open_logs(nnt_trainer *tr)
{
    if (!tr->o.log_dir || tr->logs_open || tr->rank != 0 || tr->o.steps == 0)
        return NNT_OK;
    if (nnt_io_make_dirs(tr->o.log_dir))
        return nnt_fail(tr->ctx, NNT_E_IO, "nnt_trainer: cannot create directory %s: %s",
                        tr->o.log_dir, strerror(errno));
    nnt_mem_stats ms;
    memset(&ms, 0, sizeof ms);
    ms.size = sizeof ms;
    char header[1024] = "step,loss,lr,grad_norm,ms,tokens_per_s,mfu";
    if (nnt_ctx_mem_stats(tr->ctx, &ms, 0) == 0)
        tr->mem_nodes = ms.nnodes;
    for (int i = 0; i < tr->mem_nodes; i++)
        snprintf(header + strlen(header), sizeof header - strlen(header),
                 ",%s_used_mib,%s_peak_mib", ms.node[i].name, ms.node[i].name);
    strcat(header, "\n");
    tr->logs_open = 1;   /* (the validations of val.csv go into its curve) */
    if (!tr->vals_resumed)   /* (else the checkpoint's count stands) */
        tr->nvalidations = 0, tr->low_val = HUGE_VAL, tr->low_val_step = tr->last_val_step = 0;
    NNT_TRY(start_log(tr, "train.csv", header, 0, &tr->csv));
    return tr->o.val_batches > 0
               ? start_log(tr, "val.csv", val_header(tr), 1, &tr->val_csv)
               : NNT_OK;
}

/* A step's row of train.csv (ms: the memory after it) and its point. */
static int log_step(nnt_trainer *tr, const nnt_trainer_report *r, const nnt_mem_stats *ms)
{
    if (!tr->csv)
        return NNT_OK;
    fprintf(tr->csv, "%lld,%.9g,%.9g,%.9g,%.3f,%.1f,", (long long)r->step, r->loss, r->lr,
            r->grad_norm, r->ms, r->tokens_per_s);
    if (!isnan(r->mfu))   /* empty when the peak is not known */
        fprintf(tr->csv, "%.6f", r->mfu);
    for (int i = 0; i < tr->mem_nodes; i++) {
        int have = i < ms->nnodes;
        fprintf(tr->csv, ",%.3f,%.3f", have ? ms->node[i].used_bytes / 1048576.0 : 0.0,
                have ? ms->node[i].peak_bytes / 1048576.0 : 0.0);
    }
    fputc('\n', tr->csv);
    if (fflush(tr->csv))
        return nnt_fail(tr->ctx, NNT_E_IO, "nnt_trainer: cannot write train.csv: %s",
                        strerror(errno));
    if (add_point(&tr->curve, &tr->ncurve, &tr->cap_curve, r->step, r->loss))
        return nnt_fail(tr->ctx, NNT_E_NOMEM, "nnt_trainer: loss history: out of memory");
    return NNT_OK;
}

/* loss.svg: "<program>: <family> L.. C.. NH.., loss per step". */
static int write_svg(nnt_trainer *tr)
{
    if (!tr->logs_open)
        return NNT_OK;
    nnt_model_config c = NNT_MODEL_CONFIG_INIT;
    nnt_family_info fi = NNT_FAMILY_INFO_INIT;
    char title[200];
    const char *family = "?";
    nnt_model_config_of(tr->model, &c);
    for (int i = 0; nnt_model_family_info(i, &fi) == 0; i++)
        if (fi.family == c.family)
            family = fi.title;
    snprintf(title, sizeof title, "%s: %s L%lld C%lld NH%lld, loss per step", tr->o.program,
             family, (long long)c.layers, (long long)c.channels, (long long)c.heads);
    char *path = log_path(tr, "loss.svg");
    int rc = path ? nnt_train_svg_write(path, tr->curve, tr->ncurve, tr->val_curve, tr->nval,
                                        title) : (errno = ENOMEM, -1);
    if (rc)
        rc = nnt_fail(tr->ctx, NNT_E_IO, "nnt_trainer: cannot write %s: %s",
                      path ? path : "loss.svg", strerror(errno));
    free(path);
    return rc;
}

int nnt_trainer_read_options(const char *fn, const nnt_trainer_options *user,
                             nnt_trainer_options *o)
{
    static const nnt_trainer_options defaults = NNT_TRAINER_OPTIONS_INIT;
    static const size_t older[] = {
        offsetof(nnt_trainer_options, dpo_beta),      /* before 0.3's DPO */
        offsetof(nnt_trainer_options, simpo_gamma),   /* 0.3 */
        offsetof(nnt_trainer_options, early_stop),    /* 0.4 before early stopping */
        offsetof(nnt_trainer_options, label_smoothing),   /* 0.4 before label smoothing */
        offsetof(nnt_trainer_options, dpo_label_smoothing),   /* 0.4 before TRL's others */
    };
    return nnt_read_options_sizes(fn, user, &defaults, o, sizeof *o, older,
                                  sizeof older / sizeof *older,
                                  "initialise them with NNT_TRAINER_OPTIONS_INIT");
}

NNT_API int nnt_trainer_create(nnt_layer *model, nnt_optim *opt, nnt_data *data,
                               const nnt_trainer_options *opts, nnt_trainer **out)
{
    const char *fn = "nnt_trainer_create";
    if (!out)
        return nnt_fail(NULL, NNT_E_INVAL, "%s: out is NULL", fn);
    *out = NULL;
    NNT_TRY(nnt_optim_check(opt, fn));
    if (!model)
        return nnt_fail(opt->ctx, NNT_E_INVAL, "%s: model is NULL", fn);
    nnt_trainer_options o;
    NNT_TRY(nnt_trainer_read_options(fn, opts, &o));
    /* the step's gradients are the sum of its accum micro-batches' and the optimizer divides
     * them by its accum_steps: another count would scale them (SGD's rate, the clipping) */
    if (o.accum >= 1 && o.accum != opt->opts.accum_steps)
        return nnt_fail(opt->ctx, NNT_E_INVAL, "%s: accum %lld micro-batches a step, but the "
                        "optimizer divides the summed gradients by its accum_steps %lld: give "
                        "both the same", fn, (long long)o.accum,
                        (long long)opt->opts.accum_steps);
    nnt_model_config mc;   /* a reward model (num_labels 1) reads pairs of rows, as DPO */
    int reward = nnt_model_config_of(model, &mc) == 0 && nnt_model_is_reward(&mc);
    int rows = nnt_held_out_in_rows(o.dpo_beta > 0 || reward, o.val_data ? o.val_data : data);
    NNT_TRY(check_options(opt->ctx, fn, &o, data, rows));
    nnt_trainer *tr = calloc(1, sizeof *tr);
    if (!tr)
        return nnt_fail(opt->ctx, NNT_E_NOMEM, "%s: out of memory", fn);
    int failed = 0;
    tr->magic = NNT_TRAINER_MAGIC;
    tr->ctx = opt->ctx, tr->model = model, tr->opt = opt, tr->data = data, tr->o = o;
    tr->o.checkpoint = copy_string(o.checkpoint, &failed);
    tr->o.best_checkpoint = copy_string(o.best_checkpoint, &failed);
    tr->o.trace = copy_string(o.trace, &failed);
    tr->o.trace_table = copy_string(o.trace_table, &failed);
    tr->o.program = copy_string(o.program ? o.program : "nnt", &failed);
    tr->o.extra_options = copy_string(o.extra_options, &failed);
    tr->o.log_dir = copy_string(o.log_dir, &failed);
    tr->o.resume = copy_string(o.resume, &failed);
    tr->o.keep_also = copy_string(o.keep_also, &failed);
    tr->best_val = HUGE_VAL, tr->low_val = HUGE_VAL, tr->peak = o.peak_flops;
    int nranks = 1, ncpus = 0, ncuda = 0;
    nnt_ctx_rank(tr->ctx, &tr->rank, &nranks);
    nnt_ctx_workers(tr->ctx, &ncpus, &ncuda);
    int rc = failed ? nnt_fail(tr->ctx, NNT_E_NOMEM, "%s: out of memory", fn) : prepare(tr, fn);
    if (!rc && o.update_in_backward == 1 && !nnt_optim_can_update_in_backward(opt))
        rc = nnt_fail(tr->ctx, NNT_E_STATE, "%s: update_in_backward 1, but the optimizer %s", fn,
                      opt->opts.grad_clip > 0 ? "clips the global gradient norm (grad_clip): "
                      "every gradient is needed before the first update"
                      : "cannot (no parameters added by layer, or armed already)");
    if (!rc && o.measure_peak && ncuda == 0) {
        double measured = measure_peak(tr->ctx, ncpus);
        if (measured > 0)
            tr->peak = measured, tr->peak_measured = 1;
    }
    if (!rc && o.resume && (rc = nnt_trainer_resume(tr, o.resume)))
        rc = nnt_fail(tr->ctx, rc, "resume: %s", nnt_ctx_last_error(NULL));
    if (!rc)
        rc = nnt_trainer_keep_previous(tr);
    if (!rc && tr->o.log_dir && tr->rank == 0 && nnt_io_make_dirs(tr->o.log_dir))
        rc = nnt_fail(tr->ctx, NNT_E_IO, "log_dir: cannot create directory '%s': %s",
                      tr->o.log_dir, strerror(errno));
    if (rc) {
        nnt_trainer_destroy(tr);
        return rc;
    }
    tr->until = o.steps;
    *out = tr;
    return NNT_OK;
}

NNT_API void nnt_trainer_destroy(nnt_trainer *tr)
{
    if (!tr || tr->magic != NNT_TRAINER_MAGIC)
        return;
    nnt_trainer_release_signals(tr);
    tr->magic = 0;
    if (tr->smoothing_set)
        nnt_layer_set_label_smoothing(tr->model, tr->smoothing_before);
    if (tr->noise_set)
        nnt_layer_set_neftune(tr->model, tr->noise_before, tr->noise_seed_before);
    nnt_tensor_destroy(tr->tokens);
    nnt_tensor_destroy(tr->positions);
    free(tr->pos_host);
    nnt_tensor_destroy(tr->targets);
    free(tr->window), free(tr->rows), free(tr->mask), free(tr->kept), free(tr->values);
    nnt_dpo_free(tr);
    if (tr->csv)
        fclose(tr->csv);
    if (tr->val_csv)
        fclose(tr->val_csv);
    free(tr->curve), free(tr->val_curve), free(tr->kept_previous), free(tr->resumed_options);
    free_strings(&tr->o);
    if (tr->owns) {   /* nnt_trainer_open's: what it was built from */
        nnt_optim_destroy(tr->opt);
        nnt_layer_destroy(tr->model);
        nnt_data_close(tr->data);
        nnt_data_close(tr->val_owned);
        nnt_tokenizer_destroy(tr->tok);
    }
    free(tr);
}

/* ---- reading the data ------------------------------------------------------------------ */

/* n tokens of the range [start, start + len) of data into ids, from offset pos of the range,
 * wrapping to the range's start (never into tokens outside it, e.g. the held-out ones). */
static int read_range(nnt_data *data, int64_t start, int64_t len, uint64_t pos, int32_t *ids,
                      int64_t n)
{
    int64_t at = (int64_t)(pos % (uint64_t)len);
    while (n > 0) {
        int64_t run = len - at < n ? len - at : n;
        NNT_TRY(nnt_data_read(data, start + at, ids, run));
        ids += run, n -= run, at = 0;
    }
    return NNT_OK;
}

/* The same for the loss mask. */
static int read_range_mask(nnt_data *data, int64_t start, int64_t len, uint64_t pos,
                           uint8_t *counts, int64_t n)
{
    int64_t at = (int64_t)(pos % (uint64_t)len);
    while (n > 0) {
        int64_t run = n < len - at ? n : len - at;
        NNT_TRY(nnt_data_read_mask(data, start + at, counts, run));
        counts += run, n -= run, at = 0;
    }
    return NNT_OK;
}


/* (B, T) inputs and (B, T) targets into the input tensors; with masked, the targets whose
 * tr->mask is 0 ignored. */
static int upload_batch(nnt_trainer *tr, const int32_t *inputs, const int32_t *targets,
                        int masked)
{
    size_t n = (size_t)(tr->o.batch * tr->o.seq), bytes = n * sizeof(int32_t);
    if (masked) {   /* (the targets overlap the inputs in a window: a copy) */
        for (size_t i = 0; i < n; i++)
            tr->kept[i] = tr->mask[i] ? targets[i] : NNT_TRAINER_IGNORE;
        targets = tr->kept;
    }
    for (size_t i = 0; tr->labels && i < n; i++)   /* (a classifier's data is masked) */
        if (tr->mask[i] && (targets[i] < 0 || targets[i] >= tr->labels))
            return nnt_fail(tr->ctx, NNT_E_FORMAT, "nnt_trainer: a classifier of %lld labels, "
                            "but a target that counts is %d (the data's counted targets must "
                            "be labels below num_labels: nnt-tokenize --num-labels)",
                            (long long)tr->labels, (int)targets[i]);
    NNT_TRY(nnt_tensor_copy_from_host(tr->tokens, inputs, bytes));
    return nnt_tensor_copy_from_host(tr->targets, targets, bytes);
}

/* The loss mask of the (B, T) targets of the window at offset pos of a range of data, or of
 * shuffled rows pos .. pos + B - 1, into tr->mask; *counted (may be NULL) gets their sum. */
static int batch_mask(nnt_trainer *tr, nnt_data *data, int64_t start, int64_t len,
                      uint64_t pos, int rows, int64_t *counted)
{
    int64_t B = tr->o.batch, T = tr->o.seq;
    if (rows)
        for (int64_t b = 0; b < B; b++) {
            uint64_t r = nnt_shuffled_row(tr->o.seed, tr->nrows, pos + (uint64_t)b);
            NNT_TRY(nnt_data_read_mask(data, (int64_t)r * T + 1, tr->mask + b * T, T));
        }
    else
        NNT_TRY(read_range_mask(data, start, len, pos + 1, tr->mask, B * T));
    if (counted) {
        int64_t c = 0;
        for (int64_t i = 0; i < B * T; i++)
            c += tr->mask[i];
        *counted = c;
    }
    return NNT_OK;
}

/* Packed data (a file that records its examples' starts, nnt-tokenize --pack): the inputs'
 * positions in their examples (0 at a start and at a row's first token, else one more than
 * the token before) given to the model for the next forward and backward (as TRL's padding-
 * free packing: each example its own positions and attention); other data: none. The inputs
 * are the window at offset pos of a range of data, or shuffled rows pos .. pos + B - 1. */
static int batch_positions(nnt_trainer *tr, nnt_data *data, int64_t start, int64_t len,
                           uint64_t pos, int rows)
{
    nnt_data_info di = NNT_DATA_INFO_INIT;
    NNT_TRY(nnt_data_info_get(data, &di));
    if (!di.starts)
        return nnt_layer_set_positions(tr->model, NULL);
    int64_t B = tr->o.batch, T = tr->o.seq;
    if (!tr->positions) {
        NNT_TRY(nnt_tensor_create(tr->ctx, NNT_INT32, 2, tr->tokens->shape, tr->tokens->tile,
                                  &tr->positions));
        if (!(tr->pos_host = malloc((size_t)(B * T) * (sizeof(int32_t) + 1))))
            return nnt_fail(tr->ctx, NNT_E_NOMEM, "nnt_trainer: positions: out of memory");
    }
    uint8_t *starts = (uint8_t *)(tr->pos_host + B * T);
    for (int64_t b = 0; b < B; b++) {
        if (rows) {
            uint64_t r = nnt_shuffled_row(tr->o.seed, tr->nrows, pos + (uint64_t)b);
            NNT_TRY(nnt_data_read_starts(data, (int64_t)r * T, starts + b * T, T));
        } else {
            int64_t at = (int64_t)((pos + (uint64_t)(b * T)) % (uint64_t)len);
            NNT_TRY(nnt_data_read_starts(data, start + at, starts + b * T, T));
        }
        for (int64_t t = 0, p = 0; t < T; t++, p++) {   /* a row starts at 0 */
            p = starts[b * T + t] ? 0 : p;   /* so does each example */
            tr->pos_host[b * T + t] = (int32_t)p;
        }
    }
    NNT_TRY(nnt_tensor_copy_from_host(tr->positions, tr->pos_host,
                                      (size_t)(B * T) * sizeof(int32_t)));
    return nnt_layer_set_positions(tr->model, tr->positions);
}

/* A classifier trained on values: the values of the B rows of the window at offset pos of a
 * range of data (row-aligned: rows of T), or of shuffled rows pos .. pos + B - 1, given to
 * the model for the next forwards; other models: nothing. */
static int batch_values(nnt_trainer *tr, nnt_data *data, int64_t start, int64_t len,
                        uint64_t pos, int rows)
{
    int64_t B = tr->o.batch, T = tr->o.seq, k = tr->values_k;
    if (!k)
        return NNT_OK;
    for (int64_t b = 0; b < B; b++) {
        int64_t at = rows ? (int64_t)nnt_shuffled_row(tr->o.seed, tr->nrows, pos + (uint64_t)b) * T
                          : start + (int64_t)((pos + (uint64_t)(b * T)) % (uint64_t)len);
        if (at % T)
            return nnt_fail(tr->ctx, NNT_E_STATE, "nnt_trainer: a window at token %lld is not "
                            "a row's start (rows of %lld)", (long long)at, (long long)T);
        NNT_TRY(nnt_data_read_row_values(data, at / T, tr->values + b * k, k));
    }
    return nnt_layer_set_label_values(tr->model, tr->values, B * k);
}

/* The window of B*T + 1 tokens at offset pos of a range of data: inputs window[0..BT),
 * targets window[1..BT] (masked: those not counting ignored). */
static int load_window(nnt_trainer *tr, nnt_data *data, int64_t start, int64_t len,
                       uint64_t pos, int masked)
{
    NNT_TRY(read_range(data, start, len, pos, tr->window, tr->o.batch * tr->o.seq + 1));
    if (masked)
        NNT_TRY(batch_mask(tr, data, start, len, pos, 0, NULL));
    NNT_TRY(batch_positions(tr, data, start, len, pos, 0));
    NNT_TRY(batch_values(tr, data, start, len, pos, 0));
    return upload_batch(tr, tr->window, tr->window + 1, masked);
}

/* shuffle: rows pos .. pos + B - 1 of the shuffled order: each row is T + 1 tokens at row * T
 * of the training tokens, its first T the inputs of a sequence, its last T the targets. */
static int load_rows(nnt_trainer *tr, uint64_t pos)
{
    int64_t B = tr->o.batch, T = tr->o.seq;
    int32_t *inputs = tr->rows, *targets = tr->rows + B * T, *row = tr->rows + 2 * B * T;
    for (int64_t b = 0; b < B; b++) {
        uint64_t r = nnt_shuffled_row(tr->o.seed, tr->nrows, pos + (uint64_t)b);
        NNT_TRY(nnt_data_read(tr->data, (int64_t)r * T, row, T + 1));
        memcpy(inputs + b * T, row, (size_t)T * sizeof *row);
        memcpy(targets + b * T, row + 1, (size_t)T * sizeof *row);
    }
    if (tr->masked)
        NNT_TRY(batch_mask(tr, tr->data, 0, tr->ntokens, pos, 1, NULL));
    NNT_TRY(batch_positions(tr, tr->data, 0, tr->ntokens, pos, 1));
    NNT_TRY(batch_values(tr, tr->data, 0, tr->ntokens, pos, 1));
    return upload_batch(tr, inputs, targets, tr->masked);
}

/* How far a micro-batch moves the data position: B * T tokens, or B rows (shuffle). */
static uint64_t batch_advance(const nnt_trainer *tr)
{
    if (tr->dpo)   /* pairs */
        return nnt_dpo_advance(tr);
    return (uint64_t)(tr->o.shuffle ? tr->o.batch : tr->o.batch * tr->o.seq);
}

/* divisor: what the summed loss of the micro-batch's counted targets is divided by (0: their
 * number, the mean). */
/* Whether the step's last backward updates the parameters (nnt_optim_update_in_backward):
 * the option's 0 or 1, or (-1) whenever the optimizer allows it (no clipping, parameters
 * added by layer) unless NNT_UPDATE_IN_BACKWARD=0 (for comparisons: the same results). */
int nnt_trainer_updates_in_backward(const nnt_trainer *tr)
{
    const char *env = getenv("NNT_UPDATE_IN_BACKWARD");
    if (tr->o.update_in_backward >= 0)
        return tr->o.update_in_backward;
    return nnt_optim_can_update_in_backward(tr->opt) && !(env && strcmp(env, "0") == 0);
}

/* last: the step's last micro-batch. */
static int micro_batch(nnt_trainer *tr, uint64_t pos, double divisor, int last, double *loss)
{
    NNT_TRY(tr->o.shuffle ? load_rows(tr, pos)
                          : load_window(tr, tr->data, 0, tr->ntokens, pos, tr->masked));
    /* The loss is read after the backward is submitted, so that the workers have the
     * backward's tasks while this thread waits for the forward's end. */
    NNT_TRY(nnt_layer_set_targets_ex(tr->model, tr->targets, divisor));
    NNT_TRY(nnt_layer_forward(tr->model, tr->tokens, NULL));
    if (last && nnt_trainer_updates_in_backward(tr))
        NNT_TRY(nnt_optim_update_in_backward(tr->opt));
    NNT_TRY(nnt_layer_backward(tr->model, NULL, NULL));
    NNT_TRY(nnt_layer_set_positions(tr->model, NULL));   /* (sampling uses none) */
    return nnt_layer_loss(tr->model, loss);
}

/* ---- checkpoints ------------------------------------------------------------------------ */

static int save_at(nnt_trainer *tr, const char *path, int64_t step)
{
    nnt_train_state st = NNT_TRAIN_STATE_INIT;
    st.data_pos = tr->data_pos;
    memcpy(st.rng, tr->rng, sizeof st.rng);
    NNT_TRY(nnt_trainer_options_string(tr, step, &st.options));
    int rc = nnt_train_state_save(tr->opt, path, &st);
    free(st.options);
    if (rc == NNT_OK && tr->o.checkpoint && !strcmp(path, tr->o.checkpoint))
        tr->checkpoint_saved = 1;
    return rc;
}

int64_t nnt_trainer_steps(const nnt_trainer *tr)
{
    nnt_optim_stats stats = {sizeof stats, 0, 0, 0};
    nnt_optim_stats_get(tr->opt, &stats);
    return stats.step;
}

NNT_API int nnt_trainer_save(nnt_trainer *tr, const char *path)
{
    NNT_TRY(nnt_trainer_check(tr, "nnt_trainer_save"));
    if (!path && !(path = tr->o.checkpoint))
        return nnt_fail(tr->ctx, NNT_E_INVAL, "nnt_trainer_save: no path and no checkpoint "
                        "option");
    return save_at(tr, path, nnt_trainer_steps(tr));
}

/* ---- steps and validation ---------------------------------------------------------------- */

static int callback(nnt_trainer *tr, const nnt_trainer_report *r)
{
    if (tr->o.callback && tr->o.callback(r, tr->o.user))
        tr->stop = 1;
    return NNT_OK;
}

/* The memory nodes' statistics now (no node when they cannot be read), and their totals
 * into r. */
static void read_memory(nnt_trainer *tr, nnt_mem_stats *ms, nnt_trainer_report *r)
{
    memset(ms, 0, sizeof *ms);
    ms->size = sizeof *ms;
    if (nnt_ctx_mem_stats(tr->ctx, ms, 0))
        ms->nnodes = 0;
    for (int i = 0; i < ms->nnodes; i++)
        r->mem_used_bytes += ms->node[i].used_bytes, r->mem_peak_bytes += ms->node[i].peak_bytes;
}

/* What a validation counts of a classifier's examples */
typedef struct val_counts {
    int64_t examples;    /* examples                                                    */
    int64_t labels;      /* their labels (a single-label classifier's: the examples)      */
    int64_t hits;        /* the labels right                                             */
    int64_t exact;       /* multi-label: the examples whose every label is right         */
    int64_t tp, fp, fn;  /* multi-label: the labels' true and false positives, false negatives */
    double abs_err;      /* regression: the sum of |prediction - value| over the values  */
} val_counts;

/* A classifier on values' last forward (of targets) counted into c: a multi-label one's
 * labels (right: sigmoid(logit) above 0.5 when the value is), a regression's errors. */
static int count_values(nnt_trainer *tr, val_counts *c)
{
    int64_t k = tr->values_k, n = tr->o.batch * k;
    int multi = nnt_trainer_multi_label(tr);
    float *logits = malloc((size_t)n * sizeof *logits);
    if (!logits)
        return nnt_fail(tr->ctx, NNT_E_NOMEM, "nnt_trainer_validate: out of memory");
    int rc = nnt_model_pooled_logits(tr->model, logits, n);
    for (int64_t b = 0; rc == 0 && b < tr->o.batch; b++) {
        int64_t right = 0;
        for (int64_t j = b * k; j < (b + 1) * k; j++) {
            int said = logits[j] > 0.0f, is = tr->values[j] > 0.5f;
            right += said == is;
            c->tp += multi && said && is, c->fp += multi && said && !is;
            c->fn += multi && !said && is;
            c->abs_err += multi ? 0.0 : fabs((double)logits[j] - tr->values[j]);
        }
        c->examples++, c->labels += k, c->hits += multi ? right : 0, c->exact += right == k;
    }
    free(logits);
    return rc;
}

/* The validation's metrics of a classifier from c into r */
static void report_counts(const nnt_trainer *tr, const val_counts *c, nnt_trainer_report *r)
{
    int64_t positives = 2 * c->tp + c->fp + c->fn;
    int multi = nnt_trainer_multi_label(tr);
    r->examples = c->examples;
    r->accuracy = nnt_trainer_has_accuracy(tr) && c->labels ? (double)c->hits / (double)c->labels
                                                           : 0.0;
    r->exact_match = multi && c->examples ? (double)c->exact / (double)c->examples : 0.0;
    r->f1 = multi && positives ? 2.0 * (double)c->tp / (double)positives : 0.0;
    r->mae = tr->values_k && !multi && c->labels ? c->abs_err / (double)c->labels : 0.0;
}

/* The cross-entropy of the validation windows into r->loss. */
static int xent_validation(nnt_trainer *tr, nnt_trainer_report *r)
{
    const nnt_trainer_options *o = &tr->o;
    int64_t bt = o->batch * o->seq;
    nnt_data *src = o->val_data ? o->val_data : tr->data;
    nnt_data_info di = NNT_DATA_INFO_INIT;
    NNT_TRY(nnt_data_info_get(src, &di));
    /* masked: the mean over every counted target of the windows (as a training step) */
    double divisor = 0, sum = 0;
    for (int64_t k = 0, counted; di.masked && k < o->val_batches; k++) {
        NNT_TRY(batch_mask(tr, src, o->val_start, o->val_len, (uint64_t)(k * bt), 0,
                           &counted));
        divisor += (double)counted;
    }
    divisor /= (double)o->val_batches;
    int rc = NNT_OK;
    val_counts vc;   /* a classifier's */
    memset(&vc, 0, sizeof vc);
    tr->ctx->no_dropout = 1;   /* an evaluation: the adapters' dropout off */
    for (int64_t k = 0; k < o->val_batches && rc == 0; k++) {
        double loss = 0.0;
        int64_t h = 0, c = 0;
        rc = load_window(tr, src, o->val_start, o->val_len, (uint64_t)(k * bt), di.masked);
        if (rc == 0)
            rc = nnt_layer_set_targets_ex(tr->model, tr->targets, divisor);
        if (rc == 0)
            rc = nnt_layer_forward(tr->model, tr->tokens, NULL);
        if (rc == 0)
            rc = nnt_layer_loss(tr->model, &loss);
        if (rc == 0 && tr->labels)
            rc = nnt_model_label_hits(tr->model, &h, &c);
        else if (rc == 0 && tr->values_k)   /* (multi-label: labels; regression: errors) */
            rc = count_values(tr, &vc);
        sum += loss, vc.hits += h, vc.labels += c, vc.examples += c;
    }
    nnt_layer_set_positions(tr->model, NULL);
    tr->ctx->no_dropout = 0;
    r->loss = sum / (double)o->val_batches;
    report_counts(tr, &vc, r);
    return rc;
}

static int validate_at(nnt_trainer *tr, int64_t step, double *out)
{
    const nnt_trainer_options *o = &tr->o;
    if (o->val_batches == 0)
        return nnt_fail(tr->ctx, NNT_E_INVAL, "nnt_trainer_validate: no held-out tokens "
                        "(val_batches 0)");
    double start = now_s();
    nnt_trainer_report r;
    memset(&r, 0, sizeof r);   /* the loss (DPO: and the rewards) */
    NNT_TRY(tr->dpo ? nnt_dpo_validate(tr, &r) : xent_validation(tr, &r));
    r.size = sizeof r, r.event = NNT_TRAINER_VALIDATION, r.step = step, r.steps = o->steps;
    r.ms = 1e3 * (now_s() - start);
    r.tokens = o->val_batches * o->batch * o->seq, r.mfu = NAN;
    tr->validations_run++, tr->validation_s += r.ms / 1e3;
    if (o->best_checkpoint && r.loss < tr->best_val) {
        double before = tr->best_val;
        tr->best_val = r.loss;   /* recorded in the file */
        int rc = save_at(tr, o->best_checkpoint, step);
        if (rc) {
            tr->best_val = before;
            return rc;
        }
        r.saved_best = 1;
    }
    nnt_mem_stats ms;
    read_memory(tr, &ms, &r);
    if (out)
        *out = r.loss;
    tr->last_val_accuracy = r.accuracy;
    tr->last_val_exact = r.exact_match, tr->last_val_f1 = r.f1, tr->last_val_mae = r.mae;
    if (add_validation(tr, step, r.loss))
        return nnt_fail(tr->ctx, NNT_E_NOMEM, "nnt_trainer: loss history: out of memory");
    if (tr->val_csv) {
        fprintf(tr->val_csv, "%lld,%.9g,%lld", (long long)step, r.loss, (long long)r.tokens);
        if (nnt_trainer_has_accuracy(tr))
            fprintf(tr->val_csv, ",%.9g", r.accuracy);
        if (nnt_trainer_multi_label(tr))
            fprintf(tr->val_csv, ",%.9g,%.9g", r.exact_match, r.f1);
        else if (tr->values_k)
            fprintf(tr->val_csv, ",%.9g", r.mae);
        fputc('\n', tr->val_csv);
        if (fflush(tr->val_csv))
            return nnt_fail(tr->ctx, NNT_E_IO, "nnt_trainer: cannot write val.csv: %s",
                            strerror(errno));
    }
    return callback(tr, &r);
}

NNT_API int nnt_trainer_validate(nnt_trainer *tr, double *loss)
{
    NNT_TRY(nnt_trainer_check(tr, "nnt_trainer_validate"));
    return validate_at(tr, nnt_trainer_steps(tr), loss);
}

/* Tracing covers trace_steps steps, from the second step of this run (the first one warms
 * up), or the first when the run has a single step. */
static int trace_control(nnt_trainer *tr, int64_t step, int after)
{
    const nnt_trainer_options *o = &tr->o;
    if (!o->trace)
        return NNT_OK;
    int64_t first = tr->done + (tr->until - tr->done > 1 ? 2 : 1);
    if (!after && step == first && !tr->tracing) {
        NNT_TRY(nnt_trace_start(tr->ctx));
        tr->tracing = 1;
    }
    if (after && tr->tracing && (step == first + o->trace_steps - 1 || step == tr->until)) {
        tr->tracing = 0;
        NNT_TRY(nnt_trace_stop(tr->ctx, o->trace, o->trace_table));
        tr->traced = 1;
    }
    return NNT_OK;
}

/* A step of many tasks whose bodies are shorter on average than the runtime's own cost of a
 * task (about 3-5 us to submit, schedule and finish one: 344k tasks of 1 us ran at 4.2 us a
 * task on 2 CPU workers, AMD Zen 4): a tiling cut too fine, said once with what to change.
 * CPU workers only (a CUDA task's body is its launch). */
enum { SMALL_TASKS_MIN = 50000 };   /* fewer: the runtime's cost is under about 0.2 s a step */
#define SMALL_TASK_US 10.0            /* a mean body under it: the runtime's cost rivals it  */

static void warn_small_tasks(nnt_trainer *tr, int64_t step, double ms)
{
    int64_t tasks = 0, busy_ns = 0;
    int ncpus = 0, ncuda = 0;
    if (tr->small_tasks_said || tr->rank != 0)
        return;
    nnt_stats_tasks(&tasks, &busy_ns, 0);
    nnt_ctx_workers(tr->ctx, &ncpus, &ncuda);
    double mean_us = (double)busy_ns / 1e3 / (double)(tasks ? tasks : 1);
    if (ncuda > 0 || tasks < SMALL_TASKS_MIN || mean_us >= SMALL_TASK_US)
        return;
    tr->small_tasks_said = 1;
    char tiles[192] = "";
    nnt_text tt = {tiles, sizeof tiles, 0, 0, 0, 0};
    if (tr->tiling_known) {
        nnt_text_add(&tt, " (");
        nnt_trainer_text_tiling(tr, &tt);
        nnt_text_add(&tt, ")");
    }
    nnt_log(NNT_LOG_WARN, "step %lld ran %lld tasks of %.1f us of work each on average, "
            "less than the runtime spends on a task: the %d CPU workers were busy %.0f %% of "
            "the step. The tiles are too small for this model%s: larger tiles make fewer, "
            "larger tasks (nnt_tiling; nnt-train --tile-channels, --tile-hidden, --tile-seq, "
            "--tile-heads, 0: chosen for the model)", (long long)step, (long long)tasks,
            mean_us, ncpus, 100.0 * (double)busy_ns / 1e6 / (ms * (ncpus > 0 ? ncpus : 1)),
            tiles);
}

/* The cross-entropy micro-batches of a step (forwards and backwards): their loss into
 * r->loss. */
static int xent_micro_batches(nnt_trainer *tr, int64_t step, nnt_trainer_report *r)
{
    const nnt_trainer_options *o = &tr->o;
    /* masked data: the step's loss is the summed loss of its counted targets divided by
     * their number N, as transformers' Trainer does (num_items_in_batch), not the mean of
     * the micro-batches' means: each micro-batch divides by N / accum, and the optimizer
     * divides the summed gradients by accum. Without a mask every micro-batch counts B T
     * targets and both rules are one. */
    double divisor = 0, sum = 0;
    for (int64_t k = 0, counted; tr->masked && k < o->accum; k++) {
        NNT_TRY(batch_mask(tr, tr->data, 0, tr->ntokens,
                           tr->data_pos + (uint64_t)k * batch_advance(tr), o->shuffle,
                           &counted));
        divisor += (double)counted;
    }
    divisor /= (double)o->accum;
    if (tr->masked && divisor == 0 && !tr->no_targets_said && tr->rank == 0) {
        tr->no_targets_said = 1;   /* (transformers would divide by 0 here) */
        nnt_log(NNT_LOG_WARN, "step %lld: no token of its %lld rows counts in the loss (their "
                "examples' answers cut away at T %lld, or masked out): its loss is 0, and only "
                "the optimizer's momentum and weight decay move the weights (said once)",
                (long long)step, (long long)(o->batch * o->accum), (long long)o->seq);
    }
    int rc = NNT_OK;
    for (int64_t k = 0; k < o->accum && rc == 0; k++) {
        double loss = 0.0;
        /* the micro-batch's number draws the adapters' dropout masks: a resumed run the
         * same as the uninterrupted one */
        tr->ctx->dropout_pass = step * o->accum + k + 1;
        rc = micro_batch(tr, tr->data_pos + (uint64_t)k * batch_advance(tr), divisor,
                         k == o->accum - 1, &loss);
        sum += loss;
    }
    tr->ctx->dropout_pass = 0;
    r->loss = sum / (double)o->accum;
    return rc;
}

/* One update: its loss, lr, gradient norm and time into r. */
static int train_step(nnt_trainer *tr, int64_t step, nnt_trainer_report *r)
{
    const nnt_trainer_options *o = &tr->o;
    if (tr->dpo)   /* the reference pass before the first step, not timed with it */
        NNT_TRY(nnt_dpo_reference(tr));
    double start = now_s();
    nnt_stats_tasks(NULL, NULL, 1);   /* the step's tasks, for warn_small_tasks */
    /* dropped, not zero-filled: the first backward writes them (no traffic for old values) */
    NNT_TRY(nnt_layer_clear_grad(tr->model));
    nnt_trainer_report m;   /* the micro-batches' loss (DPO: and the rewards) */
    memset(&m, 0, sizeof m);
    NNT_TRY(tr->dpo ? nnt_dpo_step(tr, step, &m) : xent_micro_batches(tr, step, &m));
    NNT_TRY(nnt_optim_step(tr->opt));
    NNT_TRY(nnt_ctx_wait(tr->ctx));
    tr->data_pos += (uint64_t)o->accum * batch_advance(tr);
    if (!o->shuffle)   /* (DPO: pairs, a multiple of their number) */
        tr->data_pos %= tr->dpo ? nnt_dpo_units(tr) : (uint64_t)tr->ntokens;
    nnt_optim_stats stats = {sizeof stats, 0, 0, 0};
    NNT_TRY(nnt_optim_stats_get(tr->opt, &stats));
    memset(r, 0, sizeof *r);
    r->size = sizeof *r, r->event = NNT_TRAINER_STEP, r->step = step, r->steps = o->steps;
    r->loss = m.loss, r->ms = 1e3 * (now_s() - start);
    r->lr = stats.lr, r->grad_norm = stats.grad_norm;
    r->dpo_accuracy = m.dpo_accuracy, r->dpo_margin = m.dpo_margin, r->kl = m.kl;
    r->tokens = o->batch * o->seq * o->accum;
    r->tokens_per_s = (double)r->tokens / (r->ms / 1e3);
    int low = tr->peak_low;
    r->mfu = nnt_train_mfu(tr->flops_per_token * r->tokens_per_s, tr->peak, tr->peak_measured,
                           &tr->peak_low);
    warn_small_tasks(tr, step, r->ms);
    if (tr->peak_low && !low && tr->rank == 0)   /* (said once, as a warning) */
        nnt_log(NNT_LOG_WARN, "step %lld ran at %.1f GFLOP/s, above the peak of %.1f GFLOP/s "
                "measured at start (the machine was busy?): no MFU from here on; a given "
                "peak_flops (nnt-train --peak-gflops) is taken as is", (long long)step,
                tr->flops_per_token * r->tokens_per_s / 1e9, tr->peak / 1e9);
    return NNT_OK;
}

/* A validation after this step: every val_every steps and after the last; not after a stop
 * request, nor while a trace records (its timeline and table are the training steps'). */
static int validates(const nnt_trainer *tr, int64_t step)
{
    return tr->o.val_batches > 0 && !tr->stopping && !tr->tracing &&
           ((tr->o.val_every > 0 && step % tr->o.val_every == 0) || step == tr->until);
}

/* v[0..n) = their maximum over the ranks of an MPI job (collective); one process: as is. */
static int ranks_max(nnt_trainer *tr, int64_t *v, int n)
{
    return tr->ctx->mpi && tr->ctx->nranks > 1 ? nnt_mpi_max(tr->ctx, v, n) : NNT_OK;
}

/* The stop and save requests of every rank, agreed at a step boundary: a signal may reach
 * one rank only, and the ranks must stop, validate and save together (each of those is
 * collective). One process: its own requests. Returns whether a save was asked for. */
static int agree_requests(nnt_trainer *tr, int *save)
{
    int64_t asked[2] = {tr->stop != 0, tr->save != 0};
    NNT_TRY(ranks_max(tr, asked, 2));
    tr->stopping = asked[0] != 0;
    if (save)
        *save = asked[1] != 0;
    return NNT_OK;
}

/* early_stop: after a validation, stop when it made early_stop in a row without an
 * improvement. Rank 0 decides (it alone replays a resumed run's val.csv); every rank stops. */
static int early_stop(nnt_trainer *tr, int64_t step)
{
    if (tr->o.early_stop == 0)
        return NNT_OK;
    int64_t stop = tr->rank == 0 && tr->stale >= tr->o.early_stop;
    NNT_TRY(ranks_max(tr, &stop, 1));
    if (stop)
        tr->stopping = 1, tr->early_stop_step = step;
    return NNT_OK;
}

static int one_step(nnt_trainer *tr)
{
    int64_t step = nnt_trainer_steps(tr) + 1;
    nnt_trainer_report r;
    NNT_TRY(trace_control(tr, step, 0));
    NNT_TRY(train_step(tr, step, &r));
    tr->ms_rest += tr->steps_run++ ? r.ms : 0.0, tr->last_loss = r.loss, tr->ms_sum += r.ms;
    tr->loss_ema = tr->steps_run > 1 ? 0.9 * tr->loss_ema + 0.1 * r.loss : r.loss;
    NNT_TRY(trace_control(tr, step, 1));
    nnt_mem_stats ms;   /* read once for the report and the log */
    read_memory(tr, &ms, &r);
    r.validates = validates(tr, step) && isfinite(r.loss);
    NNT_TRY(log_step(tr, &r, &ms));
    callback(tr, &r);
    if (!isfinite(r.loss))
        return nnt_fail(tr->ctx, NNT_E_STATE, "the loss is not finite at step %lld: a lower "
                        "learning rate?", (long long)step);
    int save_asked;
    if (tr->save_refused) {
        tr->save_refused = 0;
        nnt_log(NNT_LOG_WARN, "a checkpoint was asked for (SIGUSR1) after step %lld, but the "
                "trainer has no checkpoint path: nothing written", (long long)step);
    }
    NNT_TRY(agree_requests(tr, &save_asked));
    if (r.validates && !tr->stopping) {   /* (a stop asked for during the report: none) */
        NNT_TRY(validate_at(tr, step, NULL));
        NNT_TRY(early_stop(tr, step));
    }
    int periodic = tr->o.save_every > 0 && step % tr->o.save_every == 0 && step < tr->until;
    if (tr->o.checkpoint && (periodic || save_asked)) {
        tr->save = 0;
        NNT_TRY(save_at(tr, tr->o.checkpoint, step));
        nnt_trainer_report c;
        memset(&c, 0, sizeof c);
        c.size = sizeof c, c.event = NNT_TRAINER_CHECKPOINT, c.step = step;
        c.steps = tr->o.steps, c.requested = save_asked;
        callback(tr, &c);
    }
    return NNT_OK;
}

NNT_API int nnt_trainer_step(nnt_trainer *tr)
{
    NNT_TRY(nnt_trainer_check(tr, "nnt_trainer_step"));
    if (!tr->data)
        return nnt_fail(tr->ctx, NNT_E_STATE, "nnt_trainer_step: no training data");
    double start = now_s();
    int rc = open_logs(tr);
    rc = rc ? rc : one_step(tr);
    tr->run_s += now_s() - start;
    return rc;
}

NNT_API int nnt_trainer_run(nnt_trainer *tr, int64_t until)
{
    NNT_TRY(nnt_trainer_check(tr, "nnt_trainer_run"));
    if (tr->o.steps == 0)   /* validation only, of the model as loaded or resumed */
        return validate_at(tr, nnt_trainer_steps(tr), NULL);
    tr->until = until > 0 && until < tr->o.steps ? until : tr->o.steps;
    double start = now_s();
    int rc = open_logs(tr);
    if (!rc)
        rc = agree_requests(tr, NULL);
    while (!rc && !tr->stopping && nnt_trainer_steps(tr) < tr->until)
        rc = one_step(tr);
    if (tr->tracing) {   /* stopped before the traced steps' end */
        tr->tracing = 0;
        int trc = nnt_trace_stop(tr->ctx, tr->o.trace, tr->o.trace_table);
        tr->traced |= trc == NNT_OK;
        rc = rc ? rc : trc;
    }
    tr->until = tr->o.steps;
    rc = rc ? rc : write_svg(tr);
    tr->run_s += now_s() - start;
    return rc;
}

NNT_API int nnt_trainer_request_stop(nnt_trainer *tr)
{
    if (!tr)
        return NNT_E_INVAL;
    tr->stop = 1;
    return NNT_OK;
}

NNT_API int nnt_trainer_request_save(nnt_trainer *tr)
{
    if (!tr)
        return NNT_E_INVAL;
    if (!tr->o.checkpoint)
        return NNT_E_STATE;   /* no message: this may run in a signal handler */
    tr->save = 1;
    return NNT_OK;
}

static void fill_info(const nnt_trainer *tr, nnt_trainer_info *info)
{
    info->step = nnt_trainer_steps(tr), info->data_pos = tr->data_pos;
    memcpy(info->rng, tr->rng, sizeof info->rng);
    info->stopped = tr->stopping, info->best_val_loss = tr->best_val;
    info->stop_signal = tr->stop_signal;
    info->flops_per_token = tr->flops_per_token;
    info->peak_flops = tr->peak, info->peak_measured = tr->peak_measured;
    info->validations = tr->nvalidations;
    info->last_val_step = tr->last_val_step, info->last_val_loss = tr->last_val;
    info->lowest_val_step = tr->low_val_step;
    info->lowest_val_loss = tr->nvalidations ? tr->low_val : 0.0;
    info->train_tokens = tr->ntokens, info->held_out = tr->held_out;
    info->val_tokens = tr->o.val_len, info->val_batches = tr->o.val_batches;
    info->params = tr->params, info->frozen = tr->frozen;
    info->lr = tr->opt->opts.lr, info->min_lr = tr->opt->opts.min_lr;
    info->tokenizer = tr->owns ? tr->tok_kind : NNT_TOKENIZER_AUTO;
    info->kept_previous = tr->kept_previous;
    info->steps_run = tr->steps_run, info->last_loss = tr->last_loss;
    info->step_ms = tr->steps_run > 1 ? tr->ms_rest / (double)(tr->steps_run - 1) : 0.0;
    info->validations_run = tr->validations_run, info->validation_s = tr->validation_s;
    info->tokens_per_s = info->step_ms > 0 ? (double)(tr->o.batch * tr->o.seq * tr->o.accum) /
                                                 (info->step_ms / 1e3) : 0.0;
    info->mfu = tr->peak > 0 ? tr->flops_per_token * info->tokens_per_s / tr->peak : NAN;
    /* (a mean above the measured peak: it was measured low) */
    info->peak_low = tr->peak_low || (tr->peak_measured && info->mfu > 1);
    if (tr->peak_measured && info->peak_low)
        info->mfu = NAN;
    info->early_stop_step = tr->early_stop_step;
}

NNT_API int nnt_trainer_info_get(const nnt_trainer *tr, nnt_trainer_info *info)
{
    const char *fn = "nnt_trainer_info_get";
    NNT_TRY(nnt_trainer_check(tr, fn));
    if (!info)
        return nnt_fail(tr->ctx, NNT_E_INVAL, "%s: info is NULL", fn);
    size_t size = info->size;   /* 0.3's: the fields before early_stop_step */
    NNT_TRY(nnt_check_struct_size(tr->ctx, fn, "info", size, sizeof *info,
                                  offsetof(nnt_trainer_info, early_stop_step),
                                  "initialise it with NNT_TRAINER_INFO_INIT"));
    nnt_trainer_info all;
    memset(&all, 0, sizeof all);
    fill_info(tr, &all);
    all.size = size;
    memcpy(info, &all, size);
    return NNT_OK;
}
