/* SPDX-License-Identifier: MIT */
/* Direct preference optimization (nnt_trainer_options.dpo_beta > 0): the trainer's steps and
 * validations on pairs of sequences, the loss of DPO (Rafailov et al. 2023) as TRL's
 * DPOTrainer computes it with loss_type "sigmoid":
 *
 *   pi_c, pi_r   the model's log-likelihoods of a pair's chosen and rejected sequences (the
 *                sums over their counted targets of log p(target))
 *   ref_c, ref_r the same under the reference model: the trainer's model before its first
 *                update, computed once for every pair (TRL's precompute_ref_log_probs)
 *   z            beta ((pi_c - ref_c) - (pi_r - ref_r))
 *   loss         mean over the step's pairs of -log sigmoid(z)
 *
 * The data: rows of T tokens (nnt_data_info.block == T, with a loss mask), pair p being rows
 * 2p (chosen) and 2p + 1 (rejected) (nnt-tokenize --preference writes them so). A
 * micro-batch holds B / 2 pairs, each pair's rows side by side (chosen at 2j, rejected at
 * 2j + 1). Its forward gives each target's loss (nnt_layer_target_losses); d loss / d loss_t
 * is the same for every counted target of a row, +beta sigmoid(-z) / (B / 2) on the chosen
 * row and its negative on the rejected one, given to the backward as the targets' weights
 * (nnt_layer_set_target_weights, divisor 1); the optimizer divides the summed gradients by
 * accum: the mean over the step's pairs.
 *
 * The reference log-likelihoods (2 a pair, training and held-out pairs) are recorded in the
 * trainer's checkpoints ("dpo_reference": each double's bits in hex), so that a resumed run
 * continues against the same reference.
 *
 * With rpo_alpha > 0 a DPO loss (sigmoid, IPO, hinge) gets the same nll term as CPO's, of that
 * weight (RPO: TRL's DPOTrainer with loss_type [..., "sft"]).
 *
 * The reference-free losses (NNT_DPO_CPO, _SIMPO, _ORPO: TRL's CPOTrainer and ORPOTrainer)
 * read the same pairs without a reference pass: from the rows' log-likelihoods pi (sums over
 * the counted targets, n of them) or their means a = pi / n, a pair's term as nnt.h writes it,
 * plus a negative log-likelihood term of the micro-batch's chosen rows: the mean of -log p
 * over their counted targets times cpo_alpha (CPO, SimPO), or over every target up to each
 * chosen row's last counted one (ORPO: the prompt's tokens too, as ORPOTrainer's labels are
 * its input ids where the attention mask is 1), weight 1. The micro-batch's loss is the mean
 * of the pair terms plus that term; d loss / d loss_t of a target is the pair term's
 * derivative on its row (a counted target) plus, on a chosen row's nll targets, the term's
 * weight over their number in the micro-batch. A step's and a validation's loss: the mean
 * over their micro-batches (each of B / 2 pairs), as TRL averages its batches.
 *
 * Unpaired rows (NNT_DPO_KTO, _APO_ZERO_UNPAIRED: TRL's KTOTrainer) read one example a row,
 * its label the row's value (1 desirable, 0 undesirable), B rows a micro-batch: the units
 * counted where pairs are (npairs the rows, 2 references a row: its own and its KL row's). The
 * rows are read in runs of B consecutive rows (shuffle: the runs in the shuffled order), so
 * that each row's KL row, its prompt followed by the completion of the row before it in its
 * run (the first taking the last's: TRL's add_kl_completion_ids with the data in order), is
 * always the same and its reference computed once. A row's prompt: its tokens before its
 * first counted one; its completion: from there to its last counted token. KTO's micro-batch:
 * the forward of its KL rows (their log-likelihoods: kl, not differentiated), then its rows'
 * forward and backward; the terms as nnt_dpo_row_loss computes them.
 *
 * A reward model (a model of num_labels 1: a score a token, nnt_layer_pairwise_create's loss)
 * reads the same pairs, as TRL's RewardTrainer trains it: each row's score at its pooled
 * position (nnt_model_pool_targets with the model's pad id), the loss the model's own (the
 * mean over the micro-batch's pairs of -log sigmoid(r_c - r_r), plus reward_center times the
 * mean of (r_c + r_r)^2); no reference. */
#include "trainer_impl.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

struct nnt_dpo {
    uint64_t npairs;               /* training pairs: the training tokens' rows / 2 (unpaired:
                                      the rows of the whole runs of B)                      */
    int64_t val_pairs;             /* held-out pairs: val_len / T / 2 (unpaired: rows)        */
    int64_t per_batch;             /* pairs a micro-batch: B / 2 (unpaired: rows, B)          */
    int unpaired;                  /* KTO, APO-zero unpaired: rows with their labels          */
    int with_kl;                   /* KTO: their KL rows                                      */
    uint8_t *desirable;            /* (npairs + val_pairs) unpaired: each row's label         */
    uint8_t *row_desirable;        /* (B) a micro-batch's rows' labels                       */
    uint8_t *masks;                /* (B T) its rows' masks                                  */
    int32_t *kl_inputs, *kl_targets; /* (B T) its KL rows                                  */
    uint8_t *kl_counts;            /* (B T)                                                 */
    double *kl_logp;               /* (B) their log-likelihoods                              */
    double *ref;                   /* (2 npairs + 2 val_pairs) reference log-likelihoods:
                                      training pairs' rows, then held-out pairs' rows         */
    int ref_ready;
    int ref_free;                  /* a reference-free loss (NNT_DPO_CPO, _SIMPO, _ORPO)      */
    int averaged;                  /* its pair term reads the means a = pi / n (SimPO, ORPO)  */
    double nll_weight;             /* the chosen rows' nll term's weight (0: none)            */
    float *losses, *weights;       /* (B T) a micro-batch's target losses and weights       */
    int32_t *inputs, *targets;     /* (B T)                                                 */
    int32_t *row;                  /* (T) one row's ids                                     */
    uint64_t unshared;             /* reference pass: pairs whose rows start differently    */
    uint64_t *pairs;               /* (B / 2) a micro-batch's pairs                         */
    double *logp;                  /* (B) its rows' log-likelihoods                         */
    int64_t *counted;              /* (B) its rows' counted targets                          */
    uint8_t *counts;               /* (B T) 1: a counted target (the mask's next token)      */
    double *nll;                   /* (B) a row's sum of its nll term's target losses         */
    int64_t *nll_n;                /* (B) and its targets                                     */
    const double **pair_ref;       /* (B / 2) its pairs' reference rows                     */
    double *sorted;                /* (5 B / 2) aot: the references (B), the pairs' terms and
                                      derivatives (3 B / 2)                                  */
    nnt_dpo_ranked *ranks;         /* (B) aot's scratch                                      */
    int reward;                    /* a reward model's pairs (no reference)                   */
    int64_t pad;                   /* its pad id (nnt_model_pool_targets; -1: none)          */
    float *scores;                 /* (B) a micro-batch's pooled scores                       */
};

/* The sums of a micro-batch's pairs (or a validation's). */
typedef struct dpo_sums {
    double loss, correct, margin;
    int64_t pairs;
    double kl;                     /* unpaired: the micro-batches' kl, summed                */
    int64_t batches, margins;      /* their micro-batches, those of both kinds (margin's)    */
} dpo_sums;

const char *nnt_dpo_loss_name(int loss)
{
    static const char *const NAMES[] = {"sigmoid", "ipo", "hinge", "cpo", "simpo", "orpo",
                                        "kto", "apo_zero_unpaired", "robust", "exo_pair",
                                        "nca_pair", "bco_pair", "sppo_hard", "apo_zero",
                                        "apo_down", "discopop", "sigmoid_norm", "aot",
                                        "aot_unpaired"};
    const int n = (int)(sizeof NAMES / sizeof *NAMES);
    return loss >= 0 && loss < n ? NAMES[loss] : "?";   /* = nnt_dpo_loss */
}

int nnt_dpo_loss_free(int loss)
{
    return loss == NNT_DPO_CPO || loss == NNT_DPO_SIMPO || loss == NNT_DPO_ORPO;
}

int nnt_dpo_loss_unpaired(int loss)
{
    return loss == NNT_DPO_KTO || loss == NNT_DPO_APO_ZERO_UNPAIRED;
}

const char *nnt_dpo_kind(const nnt_trainer *tr)
{
    static const char *const KINDS[8] = {"DPO", "DPO", "DPO", "CPO", "SimPO", "ORPO", "KTO",
                                         "APO-zero"};
    int loss = tr->o.dpo_loss;
    if (tr->dpo && tr->dpo->reward)
        return "reward model";
    return loss >= 0 && loss < 8 ? KINDS[loss] : loss <= NNT_DPO_AOT_UNPAIRED ? "DPO" : "?";
}

/* ", label_smoothing E" or ", discopop_tau T" for the losses that take one, else "" (a
 * static buffer) */
static const char *loss_parameter(const nnt_trainer_options *o)
{
    static char buf[48];
    buf[0] = '\0';
    if (o->dpo_loss == NNT_DPO_ROBUST || o->dpo_loss == NNT_DPO_EXO_PAIR ||
        o->dpo_loss == NNT_DPO_AOT || o->dpo_loss == NNT_DPO_AOT_UNPAIRED)
        snprintf(buf, sizeof buf, ", label_smoothing %g", o->dpo_label_smoothing);
    else if (o->dpo_loss == NNT_DPO_DISCOPOP)
        snprintf(buf, sizeof buf, ", discopop_tau %g", o->discopop_tau);
    return buf;
}

int nnt_dpo_describe(const nnt_trainer_options *o, char *buf, size_t cap)
{
    switch (o->dpo_loss) {
    case NNT_DPO_CPO:
        return snprintf(buf, cap, "CPO, beta %g (TRL's CPOTrainer, loss_type sigmoid, "
                        "cpo_alpha %g)", o->dpo_beta, o->cpo_alpha);
    case NNT_DPO_SIMPO:
        return snprintf(buf, cap, "SimPO, beta %g (TRL's CPOTrainer, loss_type simpo, "
                        "simpo_gamma %g, cpo_alpha %g)", o->dpo_beta, o->simpo_gamma,
                        o->cpo_alpha);
    case NNT_DPO_ORPO:
        return snprintf(buf, cap, "ORPO, beta (lambda) %g (TRL's ORPOTrainer)", o->dpo_beta);
    case NNT_DPO_KTO:
    case NNT_DPO_APO_ZERO_UNPAIRED:
        return snprintf(buf, cap, "%s, beta %g (TRL's KTOTrainer, loss_type %s, "
                        "desirable_weight %g, undesirable_weight %g)",
                        o->dpo_loss == NNT_DPO_KTO ? "KTO" : "APO-zero unpaired", o->dpo_beta,
                        nnt_dpo_loss_name(o->dpo_loss), o->desirable_weight,
                        o->undesirable_weight);
    default:
        if (o->rpo_alpha > 0)
            return snprintf(buf, cap, "DPO, beta %g, and rpo_alpha %g times the chosen "
                            "sequences' nll (RPO: TRL's loss_type [%s, sft], loss_weights "
                            "[1, %g])", o->dpo_beta, o->rpo_alpha,
                            nnt_dpo_loss_name(o->dpo_loss), o->rpo_alpha);
        return snprintf(buf, cap, "DPO, beta %g (TRL's loss_type %s%s)", o->dpo_beta,
                        nnt_dpo_loss_name(o->dpo_loss), loss_parameter(o));
    }
}

void nnt_dpo_free(nnt_trainer *tr)
{
    nnt_dpo *d = tr->dpo;
    if (!d)
        return;
    free(d->ref), free(d->losses), free(d->weights), free(d->inputs), free(d->targets);
    free(d->row), free(d->pairs), free(d->logp), free((void *)d->pair_ref);
    free(d->counted), free(d->scores), free(d->counts), free(d->nll), free(d->nll_n);
    free(d->sorted), free(d->ranks);
    free(d->desirable), free(d->row_desirable), free(d->masks), free(d->kl_inputs);
    free(d->kl_targets), free(d->kl_counts), free(d->kl_logp);
    free(d);
    tr->dpo = NULL;
}

/* Unpaired rows: the runs of B rows of a source (k 0: training, 1: held out) of rows rows,
 * which must carry their label. */
static int unpaired_rows(nnt_trainer *tr, const char *fn, int k, const char *what,
                         const nnt_data_info *di, int64_t rows)
{
    nnt_dpo *d = tr->dpo;
    int64_t B = tr->o.batch, whole = rows / B * B;
    const char *kind = nnt_dpo_kind(tr);
    if (di->row_values != 1)
        return nnt_fail(tr->ctx, NNT_E_INVAL, "%s: %s reads rows that carry their label, one "
                        "value a row (1: desirable, 0: undesirable; nnt-tokenize --unpaired); "
                        "the %s %s", fn, kind, what, di->row_values ? "carries several"
                        : "carries none");
    if (whole == 0)
        return nnt_fail(tr->ctx, NNT_E_INVAL, "%s: %s reads runs of B = %lld rows; the %s has "
                        "%lld", fn, kind, (long long)B, what, (long long)rows);
    if (whole < rows && tr->rank == 0)
        nnt_log(NNT_LOG_WARN, "%s: the last %lld rows of the %s are not read: %s reads runs of "
                "B = %lld rows (TRL would read them as a smaller batch)", kind,
                (long long)(rows - whole), what, kind, (long long)B);
    if (k == 0)
        d->npairs = (uint64_t)whole;
    else
        d->val_pairs = whole;
    return NNT_OK;
}

/* Unpaired rows: each row's label from its value (1 or 0), training rows then held-out ones. */
static int read_labels(nnt_trainer *tr, const char *fn, nnt_data *const sources[2])
{
    nnt_dpo *d = tr->dpo;
    uint64_t n = d->npairs + (uint64_t)d->val_pairs;
    float *values = malloc((n ? n : 1) * sizeof *values);
    d->desirable = malloc(n ? n : 1);
    if (!values || !d->desirable) {
        free(values);
        return nnt_fail(tr->ctx, NNT_E_NOMEM, "%s: out of memory", fn);
    }
    int rc = NNT_OK;
    if (d->npairs)
        rc = nnt_data_read_row_values(sources[0], 0, values, (int64_t)d->npairs);
    if (rc == 0 && d->val_pairs)
        rc = nnt_data_read_row_values(sources[1], tr->o.val_start / tr->o.seq,
                                      values + d->npairs, d->val_pairs);
    for (uint64_t i = 0; rc == 0 && i < n; i++) {
        if (values[i] != 0.0f && values[i] != 1.0f)
            rc = nnt_fail(tr->ctx, NNT_E_FORMAT, "%s: the %s's row %llu has the label %g: an "
                          "unpaired row's value is 1 (desirable) or 0 (undesirable)", fn,
                          i < d->npairs ? "training data" : "held-out data",
                          (unsigned long long)(i < d->npairs ? i : i - d->npairs),
                          (double)values[i]);
        d->desirable[i] = values[i] == 1.0f;
    }
    free(values);
    return rc;
}

int nnt_dpo_prepare(nnt_trainer *tr, const char *fn)
{
    const nnt_trainer_options *o = &tr->o;
    int64_t B = o->batch, T = o->seq;
    nnt_model_config mc;
    int model = nnt_model_config_of(tr->model, &mc) == 0;   /* (else a layer of the caller's) */
    int reward = model && nnt_model_is_reward(&mc);
    if (model && mc.num_labels > 0 && o->dpo_beta > 0) {
        char what[64] = "reward model (num_labels 1)";
        if (!reward)
            snprintf(what, sizeof what, "classifier of %lld labels", (long long)mc.num_labels);
        return nnt_fail(tr->ctx, NNT_E_INVAL, "%s: DPO (dpo_beta %g) trains a language model, "
                        "not a %s", fn, o->dpo_beta, what);
    }
    if (o->reward_center > 0 && !reward)
        return nnt_fail(tr->ctx, NNT_E_INVAL, "%s: reward_center %g is for reward models (a "
                        "model of num_labels 1)", fn, o->reward_center);
    if (o->dpo_beta == 0 && !reward)   /* (its range checked with the other options) */
        return NNT_OK;
    int unpaired = !reward && nnt_dpo_loss_unpaired(o->dpo_loss);
    const char *what_run = reward ? "a reward model" : unpaired ? nnt_dpo_kind(tr) : "DPO";
    if (unpaired && o->dpo_loss == NNT_DPO_KTO && B < 2)
        return nnt_fail(tr->ctx, NNT_E_INVAL, "%s: KTO estimates its kl from the other rows of "
                        "a micro-batch: the batch must be at least 2 (TRL refuses 1 too)", fn);
    if (B % 2 && !unpaired)
        return nnt_fail(tr->ctx, NNT_E_INVAL, "%s: %s takes pairs: the batch must be even, "
                        "not %lld", fn, what_run, (long long)B);
    if (reward && !mc.has_pad_token)
        return nnt_fail(tr->ctx, NNT_E_INVAL, "%s: a reward model pools each row at its last "
                        "token that is not padding: its configuration needs the pad id "
                        "(pad_token_id; TRL's: the tokenizer's pad_token, else eos_token)", fn);
    if (reward)
        NNT_TRY(nnt_layer_set_pairwise_center(tr->model, o->reward_center));
    nnt_dpo *d = calloc(1, sizeof *d);
    if (!d)
        return nnt_fail(tr->ctx, NNT_E_NOMEM, "%s: out of memory", fn);
    tr->dpo = d;
    d->per_batch = unpaired ? B : B / 2;
    d->reward = reward;
    d->unpaired = unpaired;
    d->with_kl = unpaired && o->dpo_loss == NNT_DPO_KTO;
    d->ref_free = !reward && nnt_dpo_loss_free(o->dpo_loss);
    d->averaged = d->ref_free && o->dpo_loss != NNT_DPO_CPO;
    d->nll_weight = !d->ref_free ? o->rpo_alpha
                    : o->dpo_loss == NNT_DPO_ORPO ? 1.0 : o->cpo_alpha;
    d->ref_ready = reward || d->ref_free;   /* no reference */
    d->pad = reward ? mc.pad_token_id : -1;   /* (a reward model has one: checked above) */
    nnt_data *sources[2] = {tr->data, nnt_trainer_val_source(tr)};
    const char *what[2] = {"training data", "held-out data"};
    int64_t len[2] = {tr->ntokens, o->val_len};
    for (int k = 0; k < 2; k++) {
        if (!sources[k])
            continue;
        nnt_data_info di = NNT_DATA_INFO_INIT;
        NNT_TRY(nnt_data_info_get(sources[k], &di));
        if (di.block != T || !di.masked || di.starts)
            return nnt_fail(tr->ctx, NNT_E_INVAL, "%s: %s reads %s of T = %lld tokens with a "
                            "loss mask, one example a row (nnt-tokenize %s --seq %lld); the %s "
                            "%s", fn, what_run, unpaired ? "rows" : "pairs of rows",
                            (long long)T, unpaired ? "--unpaired" : "--preference",
                            (long long)T, what[k], di.starts ? "packs several examples a row"
                            : di.block ? "has rows of another length" : "is not in rows");
        int64_t rows = len[k] / T;
        if (unpaired) {
            NNT_TRY(unpaired_rows(tr, fn, k, what[k], &di, rows));
            continue;
        }
        if (rows < 2 || rows % 2)
            return nnt_fail(tr->ctx, NNT_E_INVAL, "%s: %s reads pairs of rows (chosen, "
                            "rejected); the %s has %lld rows of %lld tokens: an even number "
                            "(at least 2) is needed", fn, what_run, what[k], (long long)rows,
                            (long long)T);
        if (k == 0)
            d->npairs = (uint64_t)rows / 2;
        else
            d->val_pairs = rows / 2;
    }
    if (unpaired)
        NNT_TRY(read_labels(tr, fn, sources));
    size_t bt = (size_t)(B * T);
    size_t nref = d->ref_free ? 0 : 2 * ((size_t)d->npairs + (size_t)d->val_pairs);
    d->ref = malloc((nref ? nref : 1) * sizeof *d->ref);
    d->losses = malloc(bt * sizeof *d->losses);
    d->weights = malloc(bt * sizeof *d->weights);
    d->inputs = malloc(bt * sizeof *d->inputs);
    d->targets = malloc(bt * sizeof *d->targets);
    d->row = malloc((size_t)T * sizeof *d->row);
    d->pairs = malloc((size_t)d->per_batch * sizeof *d->pairs);
    d->logp = malloc((size_t)B * sizeof *d->logp);
    d->pair_ref = malloc((size_t)d->per_batch * sizeof *d->pair_ref);
    d->counted = malloc((size_t)B * sizeof *d->counted);
    d->scores = malloc((size_t)B * sizeof *d->scores);
    d->counts = malloc(bt);
    d->nll = malloc((size_t)B * sizeof *d->nll);
    d->nll_n = malloc((size_t)B * sizeof *d->nll_n);
    d->row_desirable = malloc((size_t)B);
    d->masks = malloc(bt);
    d->kl_inputs = malloc(bt * sizeof *d->kl_inputs);
    d->kl_targets = malloc(bt * sizeof *d->kl_targets);
    d->kl_counts = malloc(bt);
    d->kl_logp = malloc((size_t)B * sizeof *d->kl_logp);
    d->sorted = malloc(5 * (size_t)d->per_batch * sizeof *d->sorted);
    d->ranks = malloc(2 * (size_t)d->per_batch * sizeof *d->ranks);
    if (!d->sorted || !d->ranks || !d->ref || !d->losses || !d->weights || !d->inputs ||
        !d->targets || !d->row || !d->pairs || !d->logp || !d->pair_ref || !d->counted ||
        !d->scores || !d->counts || !d->nll || !d->nll_n || !d->row_desirable || !d->masks ||
        !d->kl_inputs || !d->kl_targets || !d->kl_counts || !d->kl_logp)
        return nnt_fail(tr->ctx, NNT_E_NOMEM, "%s: DPO buffers: out of memory", fn);
    return NNT_OK;
}

uint64_t nnt_dpo_advance(const nnt_trainer *tr)
{
    return (uint64_t)tr->dpo->per_batch;
}

uint64_t nnt_dpo_units(const nnt_trainer *tr)
{
    return tr->dpo->npairs;
}

/* Row r (of T tokens at first + r T of data) into the micro-batch's row b: its inputs, and its
 * targets (the next token where the mask counts it, else ignored; the row's last input has
 * none: the next row's first token is never a target). ORPO's chosen rows (b even) target
 * every next token up to the last counted one (its nll' term), counts telling the counted. */
static int load_row(nnt_trainer *tr, nnt_data *data, int64_t first, int64_t r, int64_t b)
{
    nnt_dpo *d = tr->dpo;
    int64_t T = tr->o.seq;
    NNT_TRY(nnt_data_read(data, first + r * T, d->row, T));
    uint8_t *mask = d->masks + b * T;   /* (kept: unpaired rows' KL rows read it) */
    NNT_TRY(nnt_data_read_mask(data, first + r * T, mask, T));
    int32_t *in = d->inputs + b * T, *tg = d->targets + b * T;
    if (b % 2 && !d->ref_ready && !d->unpaired)   /* reference pass, a rejected row: the
                                                     prompt starts both */
        d->unshared += d->row[0] != in[-T];
    memcpy(in, d->row, (size_t)T * sizeof *in);
    uint8_t *counts = d->counts + b * T;
    int64_t last = -1;   /* the last counted target */
    for (int64_t t = 0; t < T; t++) {
        counts[t] = t + 1 < T && mask[t + 1];
        last = counts[t] ? t : last;
    }
    int whole = b % 2 == 0 && d->ref_free && tr->o.dpo_loss == NNT_DPO_ORPO;
    for (int64_t t = 0; t < T; t++)
        tg[t] = counts[t] || (whole && t <= last) ? d->row[t + 1] : NNT_TRAINER_IGNORE;
    return NNT_OK;
}

/* The pair read i-th from a range of npairs pairs: in order, or (shuffle) the trainer's
 * shuffled order over pairs. Unpaired rows: the row read i-th, the runs of B rows in order
 * or in the shuffled order over runs. */
static uint64_t pair_at(const nnt_trainer *tr, uint64_t npairs, uint64_t i, int shuffle)
{
    uint64_t B = (uint64_t)tr->o.batch;
    if (!shuffle)
        return i % npairs;
    return tr->dpo->unpaired ? nnt_shuffled_row(tr->o.seed, npairs / B, i / B) * B + i % B
                             : nnt_shuffled_row(tr->o.seed, npairs, i);
}

/* The rows' tokens and targets (inputs, targets: B T) into the trainer's tensors. */
static int upload_rows(nnt_trainer *tr, const int32_t *inputs, const int32_t *targets)
{
    size_t bytes = (size_t)(tr->o.batch * tr->o.seq) * sizeof(int32_t);
    NNT_TRY(nnt_layer_set_positions(tr->model, NULL));
    NNT_TRY(nnt_tensor_copy_from_host(tr->tokens, inputs, bytes));
    return nnt_tensor_copy_from_host(tr->targets, targets, bytes);
}

/* Unpaired row b's KL row: its prompt (the tokens before its first counted one) followed by
 * the completion (its first to its last counted token) of row prev, cut to T, into the KL
 * buffers, those tokens counting; NNT_E_FORMAT for a row without a counted token. */
static int kl_row(nnt_trainer *tr, int64_t b, int64_t prev)
{
    nnt_dpo *d = tr->dpo;
    int64_t T = tr->o.seq, prompt = -1, from = -1, to = -1;
    const uint8_t *mb = d->masks + b * T, *mp = d->masks + prev * T;
    for (int64_t t = 0; t < T; t++) {
        prompt = prompt < 0 && mb[t] ? t : prompt;
        from = from < 0 && mp[t] ? t : from;
        to = mp[t] ? t + 1 : to;
    }
    if (prompt < 0 || from < 0)
        return nnt_fail(tr->ctx, NNT_E_FORMAT, "nnt_trainer: %s: row %llu has no completion "
                        "(no token that counts): its prompt and completion cannot be told",
                        nnt_dpo_kind(tr), (unsigned long long)d->pairs[prompt < 0 ? b : prev]);
    int32_t *in = d->kl_inputs + b * T, *tg = d->kl_targets + b * T;
    uint8_t *counts = d->kl_counts + b * T;
    int64_t n = prompt + (to - from) < T ? prompt + (to - from) : T;
    memcpy(in, d->inputs + b * T, (size_t)prompt * sizeof *in);
    memcpy(in + prompt, d->inputs + prev * T + from, (size_t)(n - prompt) * sizeof *in);
    for (int64_t t = n; t < T; t++)
        in[t] = 0;   /* (padding after the row: it changes nothing before it) */
    for (int64_t t = 0; t < T; t++) {
        counts[t] = t + 1 >= prompt && t + 1 < n;
        tg[t] = counts[t] ? in[t + 1] : NNT_TRAINER_IGNORE;
    }
    return NNT_OK;
}

/* The micro-batch of pairs i .. i + B/2 - 1 of the training or (held_out) held-out range
 * (npairs pairs): its tokens and targets into the trainer's tensors, the pairs' numbers into pairs.
 * Unpaired rows: rows i .. i + B - 1, their labels, and their KL rows (KTO), on the host. */
static int load_pairs(nnt_trainer *tr, int held_out, uint64_t npairs, uint64_t i, int shuffle,
                      uint64_t *pairs)
{
    nnt_dpo *d = tr->dpo;
    int64_t B = tr->o.batch;
    nnt_data *data = !held_out ? tr->data : tr->o.val_data ? tr->o.val_data : tr->data;
    int64_t first = held_out ? tr->o.val_start : 0;
    if (d->unpaired) {
        const uint8_t *labels = d->desirable + (held_out ? d->npairs : 0);
        for (int64_t b = 0; b < B; b++) {
            pairs[b] = pair_at(tr, npairs, i + (uint64_t)b, shuffle);
            d->row_desirable[b] = labels[pairs[b]];
            NNT_TRY(load_row(tr, data, first, (int64_t)pairs[b], b));
        }
        for (int64_t b = 0; d->with_kl && b < B; b++)
            NNT_TRY(kl_row(tr, b, (b + B - 1) % B));
        return NNT_OK;
    }
    for (int64_t j = 0; j < d->per_batch; j++) {
        pairs[j] = pair_at(tr, npairs, i + (uint64_t)j, shuffle);
        for (int side = 0; side < 2; side++)
            NNT_TRY(load_row(tr, data, first, (int64_t)(2 * pairs[j]) + side, 2 * j + side));
    }
    if (d->reward)   /* each row's score at its pooled position */
        NNT_TRY(nnt_model_pool_targets(d->inputs, tr->o.batch, tr->o.seq, d->pad, NULL,
                                       d->targets));
    return upload_rows(tr, d->inputs, d->targets);
}

/* The forward of the uploaded rows (their targets, counts: B T); logp[b] the log-likelihood
 * of row b (its counted targets), and the sums of its nll term (d->nll, d->nll_n: every
 * target it has). */
static int forward_rows(nnt_trainer *tr, const int32_t *targets, const uint8_t *counts,
                        double *logp)
{
    nnt_dpo *d = tr->dpo;
    int64_t B = tr->o.batch, T = tr->o.seq;
    NNT_TRY(nnt_layer_set_targets_ex(tr->model, tr->targets, 1.0));
    NNT_TRY(nnt_layer_forward(tr->model, tr->tokens, NULL));
    NNT_TRY(nnt_layer_target_losses(tr->model, d->losses, B * T));
    for (int64_t b = 0; b < B; b++) {
        double sum = 0, all = 0;   /* ignored targets hold 0 */
        d->counted[b] = 0, d->nll_n[b] = 0;
        for (int64_t t = 0; t < T; t++) {
            float loss = d->losses[b * T + t];
            int counted = counts[b * T + t];
            sum += counted ? loss : 0.0f;
            all += loss;
            d->counted[b] += counted;
            d->nll_n[b] += targets[b * T + t] != NNT_TRAINER_IGNORE;
        }
        logp[b] = -sum;
        d->nll[b] = all;
        if (d->averaged && !d->counted[b])   /* (TRL: 0 / 0) */
            return nnt_fail(tr->ctx, NNT_E_FORMAT, "nnt_trainer: pair %llu's %s row has no "
                            "counted target: %s averages each sequence's log-likelihood over "
                            "its counted targets", (unsigned long long)d->pairs[b / 2],
                            b % 2 ? "rejected" : "chosen", nnt_dpo_kind(tr));
    }
    return NNT_OK;
}

/* The forwards of the loaded micro-batch: of its KL rows first (KTO: d->kl_logp, no
 * gradient wanted), then of its rows (logp), whose backward may follow. */
static int forward_logps(nnt_trainer *tr, double *logp)
{
    nnt_dpo *d = tr->dpo;
    if (d->with_kl) {
        NNT_TRY(upload_rows(tr, d->kl_inputs, d->kl_targets));
        NNT_TRY(forward_rows(tr, d->kl_targets, d->kl_counts, d->kl_logp));
    }
    if (d->unpaired)
        NNT_TRY(upload_rows(tr, d->inputs, d->targets));
    return forward_rows(tr, d->targets, d->counts, logp);
}

/* log(1 - e^x) for x < 0, and its derivative -1 / expm1(-x) (x = 0, where it is -inf: a
 * row the model gives probability 1 in float, taken just below) */
static double log1mexp(double x, double *dx)
{
    x = x < -1e-12 ? x : -1e-12;
    *dx = -1.0 / expm1(-x);
    return x < -0.6931471805599453 ? log1p(-exp(x)) : log(-expm1(x));
}

/* ORPO's pair term -beta log sigmoid(o), o the log odds ratio of the means ac, ar; *dc, *dr
 * its derivatives by them */
static double orpo_term(double beta, double ac, double ar, double *dc, double *dr)
{
    double gc, gr;
    double odds = (ac - ar) - (log1mexp(ac, &gc) - log1mexp(ar, &gr));
    double s = beta / (1.0 + exp(odds));   /* beta sigmoid(-odds) = -d term / d odds */
    *dc = -s * (1.0 - gc), *dr = -s * (-1.0 + gr);
    return beta * nnt_softplus(-odds);
}

static double sigmoid(double x)
{
    return 1.0 / (1.0 + exp(-x));
}

/* -log sigmoid(z) = softplus(-z), and beta times its derivative by z in *g: the term of DPO,
 * SimPO and sigmoid_norm */
static double sigmoid_term(double z, double beta, double *g)
{
    *g = -beta / (1.0 + exp(z));
    return nnt_softplus(-z);
}

/* The pair terms of TRL's loss types that are functions of z = beta (lc - lr) alone: the term,
 * and beta times its derivative by z in *g (its derivative by lc) */
static double z_term(const nnt_trainer_options *o, double z, double *g)
{
    if (o->dpo_loss != NNT_DPO_ROBUST && o->dpo_loss != NNT_DPO_EXO_PAIR &&
        o->dpo_loss != NNT_DPO_DISCOPOP)   /* NNT_DPO_SIGMOID, _CPO */
        return sigmoid_term(z, o->dpo_beta, g);
    double beta = o->dpo_beta, e = o->dpo_label_smoothing, sp = sigmoid(z), sm = sigmoid(-z);
    switch (o->dpo_loss) {
    case NNT_DPO_ROBUST:   /* ((1 - e) softplus(-z) - e softplus(z)) / (1 - 2 e) */
        *g = beta * (-(1.0 - e) * sm - e * sp) / (1.0 - 2.0 * e);
        return ((1.0 - e) * nnt_softplus(-z) - e * nnt_softplus(z)) / (1.0 - 2.0 * e);
    case NNT_DPO_EXO_PAIR: {   /* sp (ls(z) - log(1 - e)) + sm (ls(-z) - log e) */
        double a = log1p(-e), b = log(e);
        *g = beta * sp * sm * (z - a + b);   /* (ls(z) - ls(-z) = z) */
        return sp * (-nnt_softplus(-z) - a) + sm * (-nnt_softplus(z) - b);
    }
    default: {   /* NNT_DPO_DISCOPOP: softplus(-z) (1 - m) + exp(-z) m, m = sigmoid(z / tau) */
        double tau = o->discopop_tau, m = sigmoid(z / tau), dm = m * (1.0 - m) / tau;
        double ex = exp(-z), lg = nnt_softplus(-z);
        *g = beta * (-sm * (1.0 - m) - ex * m + dm * (ex - lg));
        return lg * (1.0 - m) + ex * m;
    }
    }
}

/* The pair terms of TRL's loss types of the chosen and rejected log ratios apart (NCA, BCO,
 * SPPO, APO): the term, its derivatives by lc and lr */
static double side_terms(const nnt_trainer_options *o, double lc, double lr, double *dc,
                         double *dr)
{
    double beta = o->dpo_beta, c = beta * lc, r = beta * lr;
    double sc = sigmoid(c), sr = sigmoid(r), sz = sigmoid(c - r);
    switch (o->dpo_loss) {
    case NNT_DPO_NCA_PAIR:
        *dc = beta * (-(1.0 - sc) + 0.5 * sc), *dr = beta * 0.5 * sr;
        return nnt_softplus(-c) + 0.5 * nnt_softplus(c) + 0.5 * nnt_softplus(r);
    case NNT_DPO_BCO_PAIR:
        *dc = -beta * (1.0 - sc), *dr = beta * sr;
        return nnt_softplus(-c) + nnt_softplus(r);
    case NNT_DPO_SPPO_HARD: {
        double ec = lc - 0.5 / beta, er = lr + 0.5 / beta;
        *dc = 2.0 * ec, *dr = 2.0 * er;
        return ec * ec + er * er;
    }
    case NNT_DPO_APO_ZERO:
        *dc = -beta * sc * (1.0 - sc), *dr = beta * sr * (1.0 - sr);
        return 1.0 - sc + sr;
    default:   /* NNT_DPO_APO_DOWN */
        *dc = beta * sc * (1.0 - sc) - beta * sz * (1.0 - sz), *dr = beta * sz * (1.0 - sz);
        return sc + 1.0 - sz;
    }
}

static int by_value(const void *pa, const void *pb)
{
    const nnt_dpo_ranked *a = pa, *b = pb;
    if (a->v != b->v)
        return a->v < b->v ? -1 : 1;
    return (a->j > b->j) - (a->j < b->j);
}

/* (trainer_impl.h) */
void nnt_dpo_sorted_terms(const nnt_trainer_options *o, const double *p, const double *r,
                          int64_t n, nnt_dpo_ranked *ranks, double *term, double *dc,
                          double *dr)
{
    const int paired = o->dpo_loss == NNT_DPO_AOT;
    nnt_dpo_ranked *rx = ranks, *ry = ranks + n;
    for (int64_t j = 0; j < n; j++) {
        const double rc = r ? r[2 * j] : 0.0, rr = r ? r[2 * j + 1] : 0.0;
        rx[j] = (nnt_dpo_ranked){paired ? p[2 * j] - p[2 * j + 1] : p[2 * j] - rc, j};
        ry[j] = (nnt_dpo_ranked){paired ? rc - rr : p[2 * j + 1] - rr, j};
    }
    qsort(rx, (size_t)n, sizeof *rx, by_value);
    qsort(ry, (size_t)n, sizeof *ry, by_value);
    const double beta = o->dpo_beta, e = o->dpo_label_smoothing;
    for (int64_t i = 0; i < n; i++) {
        double z = beta * (rx[i].v - ry[i].v);
        double g = beta * (-(1.0 - e) * sigmoid(-z) + e * sigmoid(z));
        term[rx[i].j] = (1.0 - e) * nnt_softplus(-z) + e * nnt_softplus(z);
        dc[rx[i].j] = g;   /* (aot: y is the reference's; aot_unpaired: y holds p_r) */
        if (paired)
            dr[rx[i].j] = -g;
        else
            dr[ry[i].j] = -g;
    }
}

/* (trainer_impl.h) */
double nnt_dpo_pair_loss(const nnt_trainer_options *o, double lc, double lr, int64_t nc,
                         int64_t nr, double *dc, double *dr)
{
    double beta = o->dpo_beta, z = beta * (lc - lr);
    switch (o->dpo_loss) {
    case NNT_DPO_NCA_PAIR:
    case NNT_DPO_BCO_PAIR:
    case NNT_DPO_SPPO_HARD:
    case NNT_DPO_APO_ZERO:
    case NNT_DPO_APO_DOWN:
        return side_terms(o, lc, lr, dc, dr);
    case NNT_DPO_SIGMOID:
    case NNT_DPO_CPO:   /* (its lc, lr the log-likelihoods) */
    case NNT_DPO_ROBUST:
    case NNT_DPO_EXO_PAIR:
    case NNT_DPO_DISCOPOP: {
        double g, loss = z_term(o, z, &g);
        *dc = g, *dr = -g;
        return loss;
    }
    case NNT_DPO_SIGMOID_NORM: {   /* per-token averages (TRL: counts at least 1) */
        double ac = nc > 1 ? (double)nc : 1.0, ar = nr > 1 ? (double)nr : 1.0, g;
        double loss = sigmoid_term(beta * (lc / ac - lr / ar), beta, &g);
        *dc = g / ac, *dr = -g / ar;
        return loss;
    }
    default:
        break;
    }
    if (o->dpo_loss == NNT_DPO_SIMPO || o->dpo_loss == NNT_DPO_ORPO) {
        double ac = lc / (double)nc, ar = lr / (double)nr, loss, g;   /* (nc, nr >= 1) */
        if (o->dpo_loss == NNT_DPO_ORPO) {
            loss = orpo_term(beta, ac, ar, dc, dr);
        } else {
            loss = sigmoid_term(beta * (ac - ar) - o->simpo_gamma, beta, &g);
            *dc = g, *dr = -g;
        }
        *dc /= (double)nc, *dr /= (double)nr;
        return loss;
    }
    if (o->dpo_loss == NNT_DPO_IPO) {   /* per-token averages (TRL: counts at least 1) */
        double ac = nc > 1 ? (double)nc : 1.0, ar = nr > 1 ? (double)nr : 1.0;
        double e = lc / ac - lr / ar - 1.0 / (2.0 * beta);
        *dc = 2.0 * e / ac, *dr = -2.0 * e / ar;
        return e * e;
    }
    /* NNT_DPO_HINGE, the one left (aot's terms are nnt_dpo_sorted_terms', the unpaired rows'
     * nnt_dpo_row_loss's): relu(1 - z); its gradient 0 at the kink */
    double g = 1.0 - z > 0 ? -beta : 0.0;
    *dc = g, *dr = -g;
    return 1.0 - z > 0 ? 1.0 - z : 0.0;
}

/* The reference-free losses' nll term of the loaded micro-batch: its weight times the mean
 * loss of its chosen rows' nll targets; *per_target d term / d loss_t of each of them */
static double nll_term(const nnt_dpo *d, double *per_target)
{
    double sum = 0;
    int64_t n = 0;
    for (int64_t j = 0; j < d->per_batch; j++)
        sum += d->nll[2 * j], n += d->nll_n[2 * j];
    *per_target = n ? d->nll_weight / (double)n : 0.0;
    return n ? d->nll_weight * sum / (double)n : 0.0;
}

/* The pairs' losses and rewards into s; with weights, the targets' weights of d loss / d
 * loss_t for the micro-batch's loss (the mean over its pairs, plus the nll term of a
 * reference-free loss). ref: the pairs' reference rows (NULL: none). */
static void pair_terms(nnt_trainer *tr, const double *logp, const double *const *ref,
                       dpo_sums *s, float *weights)
{
    nnt_dpo *d = tr->dpo;
    int64_t T = tr->o.seq;
    double beta = tr->o.dpo_beta, per_target = 0.0;
    if (d->nll_weight > 0)   /* (counted once a pair: the sums are divided by the pairs) */
        s->loss += nll_term(d, &per_target) * (double)d->per_batch;
    const int sorted = tr->o.dpo_loss == NNT_DPO_AOT || tr->o.dpo_loss == NNT_DPO_AOT_UNPAIRED;
    const int64_t n = d->per_batch;
    double *r = d->sorted, *term = r + 2 * n, *dc = term + n, *dr = dc + n;
    for (int64_t j = 0; sorted && ref && j < n; j++)   /* (aot: the pairs together) */
        r[2 * j] = ref[j][0], r[2 * j + 1] = ref[j][1];
    if (sorted)
        nnt_dpo_sorted_terms(&tr->o, logp, ref ? r : NULL, n, d->ranks, term, dc, dr);
    for (int64_t j = 0; j < d->per_batch; j++) {
        double lc = logp[2 * j] - (ref ? ref[j][0] : 0.0);
        double lr = logp[2 * j + 1] - (ref ? ref[j][1] : 0.0);
        double chosen = beta * lc, rejected = beta * lr;   /* the rewards, as TRL's */
        if (d->averaged)   /* (SimPO's and ORPO's: of the means) */
            chosen /= (double)d->counted[2 * j], rejected /= (double)d->counted[2 * j + 1];
        double dpi[2];
        if (sorted)
            s->loss += term[j], dpi[0] = dc[j], dpi[1] = dr[j];
        else
            s->loss += nnt_dpo_pair_loss(&tr->o, lc, lr, d->counted[2 * j],
                                         d->counted[2 * j + 1], &dpi[0], &dpi[1]);
        s->correct += chosen > rejected;
        s->margin += chosen - rejected;
        s->pairs++;
        if (!weights)
            continue;
        /* pi = -sum of the row's losses: d loss / d loss_t = -d loss / d pi, over the pairs
         * (an ignored target's weight multiplies nothing: its gradient row is 0) */
        for (int side = 0; side < 2; side++) {
            int64_t b = 2 * j + side;
            double w = -dpi[side] / (double)d->per_batch, nll = side ? 0.0 : per_target;
            for (int64_t t = 0; t < T; t++)   /* (the nll term: the row's every target) */
                weights[b * T + t] = (float)((d->counts[b * T + t] ? w : 0.0) + nll);
        }
    }
}

/* (trainer_impl.h) */
double nnt_dpo_row_loss(const nnt_trainer_options *o, double lr, double kl, int desirable,
                        double *dlr)
{
    double beta = o->dpo_beta, w = desirable ? o->desirable_weight : o->undesirable_weight;
    double sign = desirable ? 1.0 : -1.0;
    /* KTO: z = beta (lr - kl) or beta (kl - lr), the term w (1 - sigmoid(z)) = w sigmoid(-z);
     * APO-zero: z = beta lr, the term w (1 - sigmoid(z)) or w sigmoid(z) */
    double z = o->dpo_loss == NNT_DPO_KTO ? sign * beta * (lr - kl) : sign * beta * lr;
    double sz = sigmoid(z), term = sigmoid(-z);
    *dlr = -w * sz * (1.0 - sz) * sign * beta;   /* d term / d z = -w sigmoid'(z) */
    return w * term;
}

/* The unpaired rows' terms of the loaded micro-batch (logp: its rows' log-likelihoods, ref
 * their reference pairs (the row's, its KL row's)): its loss (the mean over its rows, summed
 * into s as DPO's pairs are), kl and margin into s; with weights, d loss / d loss_t. */
static void unpaired_terms(nnt_trainer *tr, const double *logp, const double *const *ref,
                           dpo_sums *s, float *weights)
{
    nnt_dpo *d = tr->dpo;
    int64_t B = tr->o.batch, T = tr->o.seq;
    double kl = 0.0, sum[2] = {0.0, 0.0};
    int64_t count[2] = {0, 0};
    if (d->with_kl) {   /* (not differentiated: a constant of the terms) */
        for (int64_t b = 0; b < B; b++)
            kl += d->kl_logp[b] - ref[b][1];
        kl = kl / (double)B > 0.0 ? kl / (double)B : 0.0;
    }
    for (int64_t b = 0; b < B; b++) {
        int good = d->row_desirable[b];
        double lr = logp[b] - ref[b][0], dlr;
        s->loss += nnt_dpo_row_loss(&tr->o, lr, kl, good, &dlr);
        sum[good] += tr->o.dpo_beta * lr, count[good]++;   /* the rewards, as TRL's */
        for (int64_t t = 0; weights && t < T; t++)   /* pi = -sum of the row's losses */
            weights[b * T + t] = (float)(d->counts[b * T + t] ? -dlr / (double)B : 0.0);
    }
    s->pairs += B;
    s->kl += kl, s->batches++;
    if (count[0] && count[1])
        s->margin += sum[1] / (double)count[1] - sum[0] / (double)count[0], s->margins++;
}

/* The terms of the loaded micro-batch (its references from ref, 2 a pair or a row) into s,
 * and with weights d loss / d loss_t. */
static void terms(nnt_trainer *tr, const double *ref, dpo_sums *s, float *weights)
{
    nnt_dpo *d = tr->dpo;
    for (int64_t j = 0; j < d->per_batch; j++)   /* (unpaired: B rows) */
        d->pair_ref[j] = ref + 2 * d->pairs[j];
    if (d->unpaired)
        unpaired_terms(tr, d->logp, d->pair_ref, s, weights);
    else
        pair_terms(tr, d->logp, d->ref_free ? NULL : d->pair_ref, s, weights);
}

/* The reference log-likelihoods of every pair (training, then held-out), once: the model as
 * it is now, forwards only, without the adapters' dropout. Unpaired rows: each row's and its
 * KL row's (KTO; else 0). */
int nnt_dpo_reference(nnt_trainer *tr)
{
    nnt_dpo *d = tr->dpo;
    int64_t P = d->per_batch;
    if (d->ref_ready)
        return NNT_OK;
    if (tr->rank == 0)
        nnt_log(NNT_LOG_INFO, "%s: the reference log-likelihoods of %llu training and %lld "
                "held-out %s (forwards of the model before its first update)",
                nnt_dpo_kind(tr), (unsigned long long)d->npairs, (long long)d->val_pairs,
                !d->unpaired ? "pairs" : d->with_kl ? "rows and their KL rows" : "rows");
    int rc = NNT_OK;
    tr->ctx->no_dropout = 1;
    for (int k = 0; k < 2 && rc == 0; k++) {
        uint64_t n = k ? (uint64_t)d->val_pairs : d->npairs;
        double *out = d->ref + (k ? 2 * d->npairs : 0);
        for (uint64_t i = 0; i < n && rc == 0; i += (uint64_t)P) {
            rc = load_pairs(tr, k, n, i, 0, d->pairs);
            if (rc == 0)
                rc = forward_logps(tr, d->logp);
            for (int64_t j = 0; rc == 0 && !d->unpaired && j < P && i + (uint64_t)j < n; j++)
                memcpy(out + 2 * d->pairs[j], d->logp + 2 * j, 2 * sizeof *d->logp);
            for (int64_t b = 0; rc == 0 && d->unpaired && b < P; b++) {
                out[2 * d->pairs[b]] = d->logp[b];
                out[2 * d->pairs[b] + 1] = d->with_kl ? d->kl_logp[b] : 0.0;
            }
        }
    }
    tr->ctx->no_dropout = 0;
    NNT_TRY(rc);
    d->ref_ready = 1;
    /* rows of unrelated examples (a token file of nnt-tokenize --jsonl) seldom start alike */
    uint64_t pairs = d->npairs + (uint64_t)d->val_pairs;
    if (tr->rank == 0 && d->unshared > pairs / 2)
        nnt_log(NNT_LOG_WARN, "DPO: %llu of the %llu pairs have a chosen and a rejected "
                "sequence that start with different tokens, where a pair's prompt starts "
                "both: is the data pairs of rows (nnt-tokenize --preference, nnt-train --data "
                "FILE.jsonl of preference records), not one example a row?",
                (unsigned long long)d->unshared, (unsigned long long)pairs);
    return NNT_OK;
}

/* A reward model's forward of the loaded micro-batch: its loss (the mean over its pairs)
 * and the pairs' accuracy and margin into s. */
static int reward_forward(nnt_trainer *tr, dpo_sums *s)
{
    nnt_dpo *d = tr->dpo;
    double loss = 0.0;
    NNT_TRY(nnt_layer_set_targets(tr->model, tr->targets));
    NNT_TRY(nnt_layer_forward(tr->model, tr->tokens, NULL));
    NNT_TRY(nnt_layer_loss(tr->model, &loss));
    NNT_TRY(nnt_model_pooled_logits(tr->model, d->scores, tr->o.batch));
    s->loss += loss * (double)d->per_batch;
    for (const float *r = d->scores; r < d->scores + 2 * d->per_batch; r += 2) {
        s->correct += r[0] > r[1];   /* (chosen, rejected) */
        s->margin += (double)r[0] - r[1];
    }
    s->pairs += d->per_batch;
    return NNT_OK;
}

/* One micro-batch of training pairs from position pos: forward, weights, backward. */
static int micro_batch(nnt_trainer *tr, uint64_t pos, int last, dpo_sums *s)
{
    nnt_dpo *d = tr->dpo;
    NNT_TRY(load_pairs(tr, 0, d->npairs, pos, tr->o.shuffle, d->pairs));
    if (d->reward) {
        NNT_TRY(reward_forward(tr, s));
        if (last && nnt_trainer_updates_in_backward(tr))
            NNT_TRY(nnt_optim_update_in_backward(tr->opt));
        return nnt_layer_backward(tr->model, NULL, NULL);
    }
    NNT_TRY(forward_logps(tr, d->logp));
    terms(tr, d->ref, s, d->weights);
    NNT_TRY(nnt_layer_set_target_weights(tr->model, d->weights, tr->o.batch * tr->o.seq));
    if (last && nnt_trainer_updates_in_backward(tr))
        NNT_TRY(nnt_optim_update_in_backward(tr->opt));
    return nnt_layer_backward(tr->model, NULL, NULL);
}

static void report_sums(const nnt_dpo *d, nnt_trainer_report *r, const dpo_sums *s)
{
    double n = s->pairs > 0 ? (double)s->pairs : 1.0;
    r->loss = s->loss / n;
    r->dpo_accuracy = s->correct / n;
    r->dpo_margin = s->margin / n;
    if (d->unpaired) {   /* (TRL: the margins of the micro-batches of both kinds) */
        r->dpo_margin = s->margins ? s->margin / (double)s->margins : 0.0;
        r->kl = s->batches ? s->kl / (double)s->batches : 0.0;
    }
}

int nnt_dpo_step(nnt_trainer *tr, int64_t step, nnt_trainer_report *r)
{
    const nnt_trainer_options *o = &tr->o;
    nnt_dpo *d = tr->dpo;
    NNT_TRY(nnt_dpo_reference(tr));
    dpo_sums s = {0, 0, 0, 0, 0, 0, 0};
    int rc = NNT_OK;
    for (int64_t k = 0; k < o->accum && rc == 0; k++) {
        tr->ctx->dropout_pass = step * o->accum + k + 1;   /* as trainer.c's micro-batches */
        rc = micro_batch(tr, tr->data_pos + (uint64_t)k * (uint64_t)d->per_batch,
                         k == o->accum - 1, &s);
    }
    tr->ctx->dropout_pass = 0;
    NNT_TRY(rc);
    report_sums(d, r, &s);
    return NNT_OK;
}

int nnt_dpo_validate(nnt_trainer *tr, nnt_trainer_report *r)
{
    const nnt_trainer_options *o = &tr->o;
    nnt_dpo *d = tr->dpo;
    NNT_TRY(nnt_dpo_reference(tr));
    const double *val_ref = d->ref + 2 * d->npairs;
    dpo_sums s = {0, 0, 0, 0, 0, 0, 0};
    int rc = NNT_OK;
    tr->ctx->no_dropout = 1;
    for (int64_t k = 0; k < o->val_batches && rc == 0; k++) {
        uint64_t i = (uint64_t)(k * d->per_batch);
        rc = load_pairs(tr, 1, (uint64_t)d->val_pairs, i, 0, d->pairs);
        if (rc == 0 && d->reward) {
            rc = reward_forward(tr, &s);
            continue;
        }
        if (rc == 0)
            rc = forward_logps(tr, d->logp);
        if (rc == 0)
            terms(tr, val_ref, &s, NULL);
    }
    tr->ctx->no_dropout = 0;
    NNT_TRY(rc);
    report_sums(d, r, &s);
    return NNT_OK;
}

/* ---- the reference in checkpoints ---------------------------------------------------------- */

int nnt_dpo_members(const nnt_trainer *tr, char **out)
{
    *out = NULL;
    const nnt_dpo *d = tr->dpo;
    if (!d)
        return NNT_OK;
    if (d->reward) {
        char buf[64];
        snprintf(buf, sizeof buf, ", \"reward_center\": %.17g", tr->o.reward_center);
        return (*out = strdup(buf)) ? NNT_OK
                                    : nnt_fail(tr->ctx, NNT_E_NOMEM, "nnt_trainer: out of memory");
    }
    size_t nref = d->ref_ready && !d->ref_free ? 2 * ((size_t)d->npairs + (size_t)d->val_pairs) : 0;
    size_t cap = 256 + 16 * nref;
    char *s = malloc(cap);
    if (!s)
        return nnt_fail(tr->ctx, NNT_E_NOMEM, "nnt_trainer: DPO: out of memory");
    int n = snprintf(s, cap, ", \"dpo_beta\": %.17g, \"dpo_loss\": \"%s\", \"dpo_pairs\": %llu, "
                     "\"dpo_val_pairs\": %lld", tr->o.dpo_beta,
                     nnt_dpo_loss_name(tr->o.dpo_loss), (unsigned long long)d->npairs,
                     (long long)d->val_pairs);
    if (d->ref_free) {   /* no reference */
        snprintf(s + n, cap - (size_t)n, ", \"simpo_gamma\": %.17g, \"cpo_alpha\": %.17g",
                 tr->o.simpo_gamma, tr->o.cpo_alpha);
        *out = s;
        return NNT_OK;
    }
    if (d->unpaired)
        n += snprintf(s + n, cap - (size_t)n, ", \"desirable_weight\": %.17g, "
                      "\"undesirable_weight\": %.17g", tr->o.desirable_weight,
                      tr->o.undesirable_weight);
    n += snprintf(s + n, cap - (size_t)n, ", \"rpo_alpha\": %.17g, \"dpo_label_smoothing\": "
                  "%.17g, \"discopop_tau\": %.17g, \"dpo_reference\": \"", tr->o.rpo_alpha,
                  tr->o.dpo_label_smoothing, tr->o.discopop_tau);
    char *at = s + n;
    for (size_t i = 0; i < nref; i++) {
        uint64_t bits;
        memcpy(&bits, &d->ref[i], sizeof bits);
        for (int k = 15; k >= 0; k--)
            *at++ = "0123456789abcdef"[(bits >> (4 * k)) & 15];
    }
    memcpy(at, "\"", 2);
    *out = s;
    return NNT_OK;
}

/* hex digit's value, or -1 */
static int hex_value(char c)
{
    return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

int nnt_dpo_resume(nnt_trainer *tr, const char *fn, const char *path, const char *options)
{
    nnt_dpo *d = tr->dpo;
    if (!d || d->reward || d->ref_free || !options)
        return NNT_OK;
    size_t cap = strlen(options) + 1;
    char *hex = malloc(cap);
    if (!hex)
        return nnt_fail(tr->ctx, NNT_E_NOMEM, "%s: out of memory", fn);
    int found = 0, rc = nnt_options_get(options, "dpo_reference", hex, cap, &found);
    if (rc || !found || !*hex) {   /* not a DPO run's (or saved before its reference) */
        free(hex);
        return rc;
    }
    size_t nref = 2 * ((size_t)d->npairs + (size_t)d->val_pairs);
    double pairs = nnt_trainer_option_number(options, "dpo_pairs", -1);
    double val_pairs = nnt_trainer_option_number(options, "dpo_val_pairs", -1);
    if (pairs != (double)d->npairs || val_pairs != (double)d->val_pairs ||
        strlen(hex) != 16 * nref) {
        free(hex);
        return nnt_fail(tr->ctx, NNT_E_FORMAT, "%s: %s: the checkpoint's DPO run had %.0f "
                        "training and %.0f held-out pairs, this trainer %llu and %lld: give it "
                        "the same data and split", fn, path, pairs, val_pairs,
                        (unsigned long long)d->npairs, (long long)d->val_pairs);
    }
    for (size_t i = 0; i < nref; i++) {
        uint64_t bits = 0;
        for (int k = 0; k < 16; k++) {
            int v = hex_value(hex[16 * i + (size_t)k]);
            if (v < 0) {
                free(hex);
                return nnt_fail(tr->ctx, NNT_E_FORMAT, "%s: %s: dpo_reference is not hex", fn,
                                path);
            }
            bits = bits << 4 | (uint64_t)v;
        }
        memcpy(&d->ref[i], &bits, sizeof bits);
    }
    free(hex);
    d->ref_ready = 1;   /* the recorded reference, not recomputed */
    return NNT_OK;
}
