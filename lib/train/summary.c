/* SPDX-License-Identifier: MIT */
/* The run a trainer trains, as text (nnt_trainer_text's SUMMARY, WARNINGS and FILES): what
 * nnt-train prints before its first step and after its last, for any program that reports a
 * run the same way.
 *
 *   summary   "label:     text" lines: the model and where its weights come from, the LoRA
 *             adapters and the trained share of the
 *             parameters, the data and its use, the validation, the tiling, the runtime and
 *             CPU kernels, the optimizer, what MFU counts, a resume and the notes on what it
 *             changes
 *   warnings  too little data for the steps asked (fewer tokens than a step reads, or each
 *             token read more than 100 times)
 *   files     what the trainer wrote: the logs, the checkpoints, the trace
 * The run's paths come from the description nnt_trainer_open records (its options string);
 * a trainer of nnt_trainer_create has none and its lines leave them out. */
#include "trainer_impl.h"
#include "../models/models.h"
#include "../optim/optim.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define add nnt_text_add
#define TRAIN_MAX_EPOCHS 100.0   /* more passes over each token: a warning */

#define member nnt_trainer_option
#define member_number nnt_trainer_option_number

/* The tokens a step reads (B T accum). */
static int64_t per_step(const nnt_trainer *tr)
{
    return tr->o.batch * tr->o.seq * tr->o.accum;
}

/* The model, and where its weights come from: the resumed checkpoint, the source, or a
 * fresh initialisation (the preset a caller's extra_options names, as nnt-train's). */
static void add_model_line(const nnt_trainer *tr, nnt_text *t)
{
    char model[2048], source[4096], preset[256];
    nnt_text m = {model, sizeof model, 0, 0, 0, 0};
    model[0] = '\0';
    nnt_trainer_text_model(tr, &m);
    member(tr->o.extra_options, "model_source", source, sizeof source);
    member(tr->o.extra_options, "preset", preset, sizeof preset);
    add(t, "model:     %s; ", model);
    if (tr->o.resume)
        add(t, "weights of %s", tr->o.resume);
    else if (*source)
        add(t, "weights from %s", source);
    else
        add(t, "fresh init (seed %llu)", (unsigned long long)tr->o.seed);
    add(t, "%s%s\n", *preset ? ", preset " : "", preset);
}

static void add_tuning(const nnt_trainer *tr, nnt_text *t)
{
    nnt_lora_options lo = NNT_LORA_OPTIONS_INIT;
    char peft[4096];
    member(tr->o.extra_options, "load_peft", peft, sizeof peft);
    if (nnt_model_lora_get(tr->model, &lo) == 0)
        add(t, "fine-tune: %s r %lld, alpha %g%s, dropout %g on %s%s%s%s\n",
            lo.dora ? "DoRA" : "LoRA", (long long)lo.rank, lo.alpha,
            lo.rslora ? " (rsLoRA)" : "", lo.dropout, lo.targets,
            nnt_model_lora_head(tr->model) ? ", the classifier's head (" NNT_CLASSIFIER_HEAD
                                             ") trained whole" : "",
            *peft ? " from " : "", peft);
    char base[4096], mode[32];
    member(tr->o.extra_options, "model_source", base, sizeof base);
    member(tr->o.extra_options, "freeze_mode", mode, sizeof mode);
    if (tr->frozen)
        add(t, "trained:   %.3fM of the %.3fM parameters (the rest frozen%s%s%s)\n",
            (double)(tr->params - tr->frozen) / 1e6, (double)tr->params / 1e6,
            *base ? ": the base " : "", base,
            strcmp(mode, "nf4") == 0 ? ", its matrices in NF4" : "");
}

static void add_data(const nnt_trainer *tr, nnt_text *t)
{
    static const char *const kinds[] = {"bytes", "GPT-2 BPE", "tokenizer.json"};
    const nnt_trainer_options *o = &tr->o;
    nnt_data_format format = NNT_DATA_TEXT;
    char path[4096];
    if (!tr->data)
        return add(t, "data:      none: steps 0 only validate\n");
    nnt_data_format_of(tr->data, &format);
    member(o->extra_options, "data", path, sizeof path);
    add(t, "data:      %s%s", path, *path ? ", " : "");
    if (format != NNT_DATA_TEXT)
        add(t, "%s token file", format == NNT_DATA_LLMC ? "llm.c" : "nanoGPT");
    else if ((unsigned)tr->tok_kind < 3)
        add(t, "text, %s tokenizer", kinds[tr->tok_kind]);
    else
        add(t, "text");
    add(t, ": %lld tokens", (long long)tr->ntokens);
    if (tr->held_out)
        add(t, " to train on (the last %lld held out)", (long long)tr->held_out);
    add(t, "; %lld tokens a step (B %lld x T %lld x accum %lld), %.2f epochs in %lld steps%s\n",
        (long long)per_step(tr), (long long)o->batch, (long long)o->seq, (long long)o->accum,
        (double)per_step(tr) * (double)o->steps / (double)(tr->ntokens ? tr->ntokens : 1),
        (long long)o->steps, o->shuffle ? "; shuffled: its sequences of T + 1 tokens in a new "
                                          "order each epoch" : "");
    char loss[256];
    nnt_dpo_describe(o, loss, sizeof loss);
    if (o->dpo_beta > 0 && nnt_dpo_loss_unpaired(o->dpo_loss))
        add(t, "loss:      %s: %lld rows, each labelled desirable or undesirable, in runs of %lld "
            "a micro-batch%s%s; the reference: the model before its first update, a forward "
            "of every row%s before the first step%s\n", loss, (long long)nnt_dpo_units(tr),
            (long long)o->batch, o->shuffle ? " (the runs in a new order each epoch)" : "",
            o->dpo_loss == NNT_DPO_KTO ? ", each row's prompt also followed by the completion "
            "of the row before it in its run (KL rows: kl, the mean of their log ratios against "
            "the reference, at least 0)" : "", o->dpo_loss == NNT_DPO_KTO ? " and KL row" : "",
            tr->resumed_options ? " (or the resumed checkpoint's)" : "");
    else if (o->dpo_beta > 0)
        add(t, "loss:      %s: %lld pairs of rows (chosen, rejected), %lld a micro-batch%s; "
            "%s%s\n", loss, (long long)(tr->nrows / 2), (long long)(o->batch / 2),
            o->shuffle ? ", in a new order each epoch" : "",
            nnt_dpo_loss_free(o->dpo_loss) ? "no reference model" : "the reference: the "
            "model before its first update, a forward of every pair before the first step",
            !nnt_dpo_loss_free(o->dpo_loss) && tr->resumed_options ?
            " (or the resumed checkpoint's)" : "");
    if (o->label_smoothing > 0)
        add(t, "loss:      the cross-entropy against the next token's one-hot times %g plus "
            "%g / V on every id (label smoothing %g, transformers' LabelSmoother): the training "
            "and validation losses are the smoothed ones\n", 1.0 - o->label_smoothing,
            o->label_smoothing, o->label_smoothing);
    nnt_model_config mc;
    int have_mc = nnt_model_config_of(tr->model, &mc) == 0;
    if (o->neftune_alpha > 0 && have_mc)
        add(t, "noise:     NEFTune: the embeddings of each training forward plus uniform noise "
            "in +-%g / sqrt(T C) = +-%g (transformers' neftune_noise_alpha); none in "
            "validations\n", o->neftune_alpha,
            o->neftune_alpha / sqrt((double)o->seq * (double)mc.channels));
    if (!(o->dpo_beta > 0) && have_mc && nnt_model_is_reward(&mc))
        add(t, "loss:      a reward model's (TRL's RewardTrainer: -log sigmoid(r_chosen - "
            "r_rejected)%s, r a row's score at its last token that is not padding, id %lld): "
            "%lld pairs of rows (chosen, rejected), %lld a micro-batch%s\n",
            o->reward_center > 0 ? " + center (r_chosen + r_rejected)^2" : "",
            (long long)mc.pad_token_id, (long long)(tr->nrows / 2), (long long)(o->batch / 2),
            o->shuffle ? ", in a new order each epoch" : "");
    if (tr->labels)
        add(t, "loss:      a classifier's cross-entropy over its %lld labels at each example's "
            "last token (transformers' single_label_classification), the label the token "
            "after it in the data; validation: loss and accuracy\n", (long long)tr->labels);
    if (tr->values_k)
        add(t, "loss:      %s over its %lld %s at each example's last token (transformers' "
            "%s), the values its data row carries%s\n",
            mc.problem_type == NNT_PROBLEM_REGRESSION ? "a regression's mean squared error"
                                                      : "a multi-label classifier's binary "
                                                        "cross-entropy with logits",
            (long long)tr->values_k, mc.problem_type == NNT_PROBLEM_REGRESSION ? "values"
                                                                               : "labels",
            mc.problem_type == NNT_PROBLEM_REGRESSION ? "regression"
                                                      : "multi_label_classification",
            mc.problem_type == NNT_PROBLEM_REGRESSION
                ? "; validation: loss and mean absolute error"
                : "; validation: loss, label accuracy (each label's probability above 0.5 "
                  "when its value is), exact match (every label of an example right) and "
                  "micro F1");
}

/* What val.csv's lines hold */
static const char *val_columns(const nnt_trainer *tr)
{
    if (tr->values_k)
        return nnt_trainer_multi_label(tr)
                   ? "validation log: step, loss on the held-out tokens, tokens, label "
                     "accuracy, exact match, micro F1"
                   : "validation log: step, loss on the held-out tokens, tokens, mean "
                     "absolute error";
    return tr->labels ? "validation log: step, loss on the held-out tokens, tokens, accuracy"
                      : "validation log: step, loss on the held-out tokens, tokens";
}

static void add_validation(const nnt_trainer *tr, nnt_text *t)
{
    const nnt_trainer_options *o = &tr->o;
    char path[4096];
    if (!o->val_batches)
        return add(t, "validate:  no (held-out tokens: val_data or val_split)\n");
    member(o->extra_options, "val_data", path, sizeof path);
    add(t, "validate:  ");
    if (*path)
        add(t, "%s, %lld tokens", path, (long long)o->val_len);
    else if (member_number(o->extra_options, "val_split", 0) > 0)
        add(t, "the last %lld tokens of the data (split %g)", (long long)o->val_len,
            member_number(o->extra_options, "val_split", 0));
    else
        add(t, "%lld held-out tokens", (long long)o->val_len);
    add(t, ": %lld batch%s of B x T (%lld tokens) ", (long long)o->val_batches,
        o->val_batches > 1 ? "es" : "", (long long)(o->val_batches * o->batch * o->seq));
    if (o->steps == 0)
        return add(t, "once, without training (steps 0)\n");
    if (o->val_every > 1)
        add(t, "every %lld steps", (long long)o->val_every);
    else
        add(t, "every step");
    add(t, " and after the last%s", o->trace ? " (not during the traced steps)" : "");
    if (o->early_stop > 0)
        add(t, "; the run stops after %lld in a row without a loss below the lowest before "
            "by more than %g", (long long)o->early_stop, o->early_stop_delta);
    add(t, "\n");
}

void nnt_trainer_text_tiling(const nnt_trainer *tr, nnt_text *t)
{
    const nnt_tiling *g = &tr->tiling;
    add(t, "batch %lld, seq %lld, channels %lld, hidden %lld, vocab %lld, heads %lld",
        (long long)g->batch, (long long)g->seq, (long long)g->channels, (long long)g->hidden,
        (long long)g->vocab, (long long)g->heads);
}

static void add_runtime(const nnt_trainer *tr, nnt_text *t)
{
    static const char *const dists[] = {"root", "sharded", "data"};
    static const char *const precisions[] = {"fp32", "tf32", "bf16"};
    const char *sched = "?", *kernels = "?";
    int ncpus = 0, ncuda = 0, rank = 0, nranks = 1;
    nnt_precision precision = NNT_PRECISION_FP32;
    if (tr->tiling_known) {
        add(t, "tiling:    ");
        nnt_trainer_text_tiling(tr, t);
        add(t, ", head_dim %lld\n", (long long)tr->tiling.head_dim);
    }
    nnt_ctx_sched(tr->ctx, &sched);
    nnt_ctx_kernels(tr->ctx, &kernels);
    nnt_ctx_workers(tr->ctx, &ncpus, &ncuda);
    nnt_ctx_rank(tr->ctx, &rank, &nranks);
    nnt_ctx_precision(tr->ctx, &precision);
    add(t, "runtime:   ");
    if (tr->ctx->mpi)
        add(t, "%d MPI ranks (distribution %s%s), each ", nranks,
            (unsigned)tr->ctx->distribution < 3 ? dists[tr->ctx->distribution] : "?",
            tr->ctx->release_weights ? ", weights released after use" : "");
    /* bf16 operands multiplied as floats on a CPU whose bf16 dot products measured slower */
    int bf16_expanded = precision == NNT_PRECISION_BF16 && ncuda == 0 && tr->ctx->bf16_expanded;
    add(t, "%d CPU workers, %d CUDA workers, scheduler %s; %s GEMM operands%s%s\nkernels:   %s\n",
        ncpus, ncuda, sched, (unsigned)precision < 3 ? precisions[precision] : "?",
        bf16_expanded ? " (multiplied as fp32: this CPU's bf16 dot products are slower, so "
                        "bf16 is no faster than fp32 here)" : "",
        member_number(tr->o.extra_options, "recompute", 0) ? "; activation recompute" : "",
        kernels);
}

static void add_optimizer(const nnt_trainer *tr, nnt_text *t)
{
    const nnt_optim_options *p = &tr->opt->opts;
    if (tr->o.steps == 0)   /* (validation only: no update) */
        return;
    char decay[64] = "";
    if (p->schedule == NNT_SCHEDULE_WSD)
        snprintf(decay, sizeof decay, ", the last %lld steps' decay %s",
                 (long long)p->decay_steps, nnt_decay_shape_name(p->decay_shape));
    add(t, "optimizer: %s, lr %g (%s schedule, warmup %lld%s, min %g), betas %g %g, eps %g, "
        "weight decay %g, momentum %g, grad clip %g; %s\n", nnt_optim_kind_name(p->kind),
        p->lr, nnt_schedule_name(p->schedule), (long long)p->warmup_steps, decay, p->min_lr,
        p->beta1, p->beta2, p->eps, p->weight_decay, p->momentum, p->grad_clip,
        nnt_trainer_updates_in_backward(tr) ? "each parameter updated during the backward"
                                            : "the update after the backward");
}

/* What MFU counts, and against which peak. */
static void add_mfu_basis(const nnt_trainer *tr, nnt_text *t)
{
    int ncpus = 0, ncuda = 0;
    nnt_ctx_workers(tr->ctx, &ncpus, &ncuda);
    if (tr->o.steps == 0)
        return;
    if (tr->peak <= 0)
        return add(t, "MFU:       not computed: no peak%s\n", ncuda ? " (CUDA workers run tasks "
                   "and their peak is not known: give one)" : "");
    add(t, "MFU:       6 N + %s12 L T NH hd = %.1f MFLOP a token (N without the lookup tables) "
        "against a peak of %.1f GFLOP/s (%s)\n", tr->frozen ? "4 Nfrozen + " : "",
        tr->flops_per_token / 1e6, tr->peak / 1e9,
        tr->peak_measured ? "measured at start: one 512 x 1024 x 1024 GEMM task per CPU worker, "
                            "at the training's precision, the fastest 8 of 32 rounds in a row"
        : tr->o.measure_peak ? "nominal: it could not be measured" : "given");
}

/* The resumed checkpoint, and what this run does differently from the run that wrote it. */
static void add_resume(const nnt_trainer *tr, nnt_text *t)
{
    const nnt_trainer_options *o = &tr->o;
    const char *saved = tr->resumed_options;
    if (!o->resume || !tr->done)
        return;
    add(t, "resumed:   %s at step %lld, data position %llu\n", o->resume, (long long)tr->done,
        (unsigned long long)tr->data_pos);
    if (!saved)
        return;
    if (member_number(saved, "batch", o->batch) != o->batch ||
        member_number(saved, "seq", o->seq) != o->seq ||
        member_number(saved, "accum", o->accum) != o->accum)
        add(t, "note:      the checkpoint was trained with another batch, seq or accum: the "
               "data order differs from an uninterrupted run\n");
    double held = member_number(saved, "held_out", -1);   /* -1: not recorded */
    if (held >= 0 ? held != (double)tr->held_out : tr->held_out != 0)
        add(t, "note:      the checkpoint held out %.0f tokens of the data, this run %lld: the "
               "training tokens and their order differ\n", held < 0 ? 0 : held,
            (long long)tr->held_out);
    double steps = member_number(saved, "steps", (double)o->steps);
    if (steps != (double)o->steps && o->steps > 0)
        add(t, "note:      the checkpoint was trained with %.0f steps: the learning-rate "
               "schedule now ends at step %lld instead\n", steps, (long long)o->steps);
    double shuffled = member_number(saved, "shuffle", -1);   /* -1: not recorded */
    if (shuffled < 0 ? o->shuffle : shuffled != o->shuffle)
        add(t, "note:      the checkpoint read the data %s, this run %s: the data position "
               "restarts at 0\n", o->shuffle ? "in order" : "shuffled",
            o->shuffle ? "shuffles it" : "reads it in order");
}

void nnt_trainer_text_summary(const nnt_trainer *tr, nnt_text *t)
{
    add_model_line(tr, t);
    add_tuning(tr, t);
    add_data(tr, t);
    add_validation(tr, t);
    add_runtime(tr, t);
    add_optimizer(tr, t);
    add_mfu_basis(tr, t);
    add_resume(tr, t);
    if (t->n && t->buf[t->n - 1] == '\n')   /* (no newline at the end) */
        t->buf[--t->n] = '\0';
}

void nnt_trainer_text_warnings(const nnt_trainer *tr, nnt_text *t)
{
    int64_t steps = tr->o.steps, ntokens = tr->ntokens, step = per_step(tr);
    double epochs = (double)step * (double)steps / (double)(ntokens ? ntokens : 1);
    if (!tr->data || steps <= 0 || (ntokens >= step && epochs <= TRAIN_MAX_EPOCHS))
        return;
    add(t, "too little data: %lld training tokens for %lld steps of %lld tokens (B %lld x T "
        "%lld x accum %lld) = %.0f passes over each token (%s): the model will memorise them; "
        "give more data or fewer steps", (long long)ntokens, (long long)steps, (long long)step,
        (long long)tr->o.batch, (long long)tr->o.seq, (long long)tr->o.accum, epochs,
        ntokens < step ? "fewer tokens than one step reads" : "more than 100");
}

/* One file: "  PATH  (what)" on a line of its own. */
static void add_file(nnt_text *t, const char *dir, const char *name, const char *what)
{
    add(t, "%s  %s%s%s  (%s)", t->n ? "\n" : "", dir ? dir : "", dir ? "/" : "", name, what);
}

void nnt_trainer_text_files(const nnt_trainer *tr, nnt_text *t)
{
    const nnt_trainer_options *o = &tr->o;
    char best[96];
    if (tr->logs_open) {
        add_file(t, o->log_dir, "train.csv",
                 "log: step, loss, lr, grad norm, ms, tokens/s, MFU, memory");
        add_file(t, o->log_dir, "loss.svg", "loss curve");
    }
    if (tr->logs_open && o->val_batches)
        add_file(t, o->log_dir, "val.csv", val_columns(tr));
    snprintf(best, sizeof best, "checkpoint of the lowest validation loss, %.6f", tr->best_val);
    if (o->best_checkpoint && tr->best_val < HUGE_VAL)
        add_file(t, NULL, o->best_checkpoint, best);
    if (tr->checkpoint_saved)
        add_file(t, NULL, o->checkpoint, tr->frozen
                 ? "checkpoint of the trained parameters and their optimizer state: continue "
                   "with nnt-train --resume"
                 : "checkpoint: continue with nnt-train --resume, generate with nnt-generate "
                   "--checkpoint");
    if (tr->traced) {
        add_file(t, NULL, o->trace, "trace timeline");
        add_file(t, NULL, o->trace_table, "per-op table");
    }
}
