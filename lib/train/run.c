/* SPDX-License-Identifier: MIT */
/* A run built from its description (nnt_trainer_open): what nnt-train's options name, in
 * nnt-train's order, each part's failure reported under its field's name.
 *
 *   tokenizer   the one named, or the model source's (nnt_tokenizer_of_source), or bytes
 *   model       nnt_model_open of the source or configuration, the tiling's overrides,
 *               recompute; then frozen parameters, a PEFT adapter, LoRA adapters
 *   tokens      the training data, its last val_split held out (whole rows), or val_data;
 *               the validation windows they hold
 *   optimizer   the options with the run's steps and accumulation, the default rates
 *   trainer     nnt_trainer_create, owning all of it, recording the description */
#define _XOPEN_SOURCE 700   /* realpath */
#include "trainer_impl.h"
#include "../layers/layer.h"
#include "../models/models.h"

#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* What nnt_trainer_open builds, released on failure (or handed to the trainer). */
typedef struct run_parts {
    nnt_ctx *ctx;
    nnt_run_config r;
    nnt_trainer_options o;
    nnt_model_config cfg;
    nnt_tiling tiling;
    nnt_tokenizer *tok;
    nnt_tokenizer_kind tok_kind;   /* resolved */
    char *tok_files[3];            /* tokenizer_json, bpe_vocab, bpe_merges resolved (owned) */
    nnt_layer *model;
    nnt_data *data, *val;
    nnt_optim *opt;
    int64_t val_start, val_len, val_batches, train_tokens;
    nnt_model_config resumed_cfg;  /* a resume that names no model: the checkpoint's       */
    char *base;                    /* and its fine-tuning run's base (owned)               */
} run_parts;

static void parts_free(run_parts *p)
{
    nnt_optim_destroy(p->opt);
    nnt_layer_destroy(p->model);
    nnt_data_close(p->data);
    nnt_data_close(p->val);
    nnt_tokenizer_destroy(p->tok);
    for (int i = 0; i < 3; i++)
        free(p->tok_files[i]);
    free(p->base);
}

/* The failure just recorded, again under field's name. */
static int field_fail(const run_parts *p, const char *field, int rc)
{
    return nnt_fail(p->ctx, rc, "%s: %s", field, nnt_ctx_last_error(NULL));
}

/* dir/name, malloc'd. */
static char *path_in(const char *dir, const char *name)
{
    size_t n = strlen(dir) + strlen(name) + 2;
    char *s = malloc(n);
    if (s)
        snprintf(s, n, "%s/%s", dir, name);
    return s;
}

/* A resume that names no model (no model_source, no model_config) takes the checkpoint's:
 * a fine-tuning run's base from the source it recorded (with the checkpoint's configuration
 * where the source has none, as GPT-2 weights), else a model of the checkpoint's
 * configuration that the resume then fills. */
static int resumed_model(run_parts *p)
{
    nnt_train_state st = NNT_TRAIN_STATE_INIT;
    nnt_model_config own;
    char base[4096] = "";
    int rc;
    if (!p->o.resume || p->r.model_source || p->r.model_config)
        return NNT_OK;
    if ((rc = nnt_train_state_info(p->ctx, p->o.resume, &st)))
        return field_fail(p, "resume", rc);
    double frozen = nnt_trainer_option_number(st.options, "frozen", 0);
    if (frozen > 0)   /* a fine-tuning run's base */
        nnt_trainer_option(st.options, "model_source", base, sizeof base);
    nnt_train_state_clear(&st);
    if (frozen > 0 && !*base)   /* its frozen base is in no file: the checkpoint lacks it */
        return nnt_fail(p->ctx, NNT_E_UNSUPPORTED, "resume: %s is the checkpoint of a "
                        "fine-tuning run (%.0f parameter elements frozen) on a freshly "
                        "initialised model: it holds the trained parameters only, and the "
                        "frozen ones were read from no file, so the run cannot be resumed; "
                        "fine-tune a base read from files (model_source; nnt-train --load-hf, "
                        "--load-*) to resume one", p->o.resume, frozen);
    if (*base && !(p->base = strdup(base)))
        return nnt_fail(p->ctx, NNT_E_NOMEM, "nnt_trainer_open: out of memory");
    p->r.model_source = p->base;
    if (p->base && nnt_model_source_config(NULL, p->base, &own) == 0)
        return NNT_OK;   /* (the source has its configuration) */
    if ((rc = nnt_model_train_state_config(p->ctx, p->o.resume, &p->resumed_cfg)))
        return field_fail(p, "resume", rc);
    p->r.model_config = &p->resumed_cfg;
    return NNT_OK;
}

/* ---- the tokenizer ------------------------------------------------------------------------ */

/* The run's tokenizer: the one named, else the source's, else bytes; the kind and files it
 * was resolved to are recorded. */
static int open_tokenizer(run_parts *p)
{
    const nnt_run_config *r = &p->r;
    const char *named[3] = {r->tokenizer_json, r->bpe_vocab, r->bpe_merges};
    int rc = NNT_OK, kind = r->tokenizer;
    if (kind == NNT_TOKENIZER_AUTO && (r->tokenizer_json || r->bpe_vocab))
        kind = r->tokenizer_json ? NNT_TOKENIZER_JSON : NNT_TOKENIZER_BPE;
    if (kind == NNT_TOKENIZER_AUTO && (rc = nnt_source_tokenizer(r->model_source, &kind,
                                                                 p->tok_files)))
        return field_fail(p, "tokenizer", rc);
    if (kind == NNT_TOKENIZER_AUTO)   /* the source names none */
        kind = NNT_TOKENIZER_BYTES;
    else if (kind == NNT_TOKENIZER_JSON && !r->tokenizer_json && !p->tok_files[0])
        return nnt_fail(p->ctx, NNT_E_INVAL, "tokenizer_json: the json tokenizer needs a "
                        "tokenizer.json");
    else if (kind == NNT_TOKENIZER_BPE && (!r->bpe_vocab || !r->bpe_merges) && !p->tok_files[1])
        return nnt_fail(p->ctx, NNT_E_INVAL, "bpe_vocab: the bpe tokenizer needs bpe_vocab and "
                        "bpe_merges");
    struct stat st;   /* those named (recorded: a directory's tokenizer.json) */
    int of_source = p->tok_files[0] || p->tok_files[1];
    for (int i = 0; i < 3 && !of_source; i++)
        if (named[i] && (kind == NNT_TOKENIZER_JSON) == (i == 0) &&
            !(p->tok_files[i] = i == 0 && stat(named[0], &st) == 0 && S_ISDIR(st.st_mode)
                                    ? path_in(named[0], "tokenizer.json") : strdup(named[i])))
            return nnt_fail(p->ctx, NNT_E_NOMEM, "tokenizer: out of memory");
    p->tok_kind = (nnt_tokenizer_kind)kind;
    if ((rc = nnt_source_tokenizer_open(kind, p->tok_files, &p->tok)))
        return field_fail(p, kind == NNT_TOKENIZER_BPE ? "bpe_vocab" : kind == NNT_TOKENIZER_JSON
                          ? "tokenizer_json" : "tokenizer", rc);
    return NNT_OK;
}

/* ---- the model ------------------------------------------------------------------------- */

/* The run reads pairs of rows (chosen, rejected): DPO, or a reward model (num_labels 1). */
static int reads_pairs(const run_parts *p)
{
    return p->o.dpo_beta > 0 || nnt_model_is_reward(&p->cfg);
}

/* The model of the source or configuration, for batches of (B, T), and its fine-tuning. */
static int open_model(run_parts *p)
{
    const nnt_run_config *r = &p->r;
    const nnt_trainer_options *o = &p->o;
    int rc = NNT_OK;
    if (r->model_config)
        p->cfg = *r->model_config;
    else if (!r->model_source)
        return nnt_fail(p->ctx, NNT_E_INVAL, "model_config: a fresh model needs a "
                        "configuration (or a model_source)");
    else if ((rc = nnt_model_source_config(p->ctx, r->model_source, &p->cfg)))
        return field_fail(p, "model_source", rc);
    if (!p->cfg.vocab)   /* the tokenizer's vocabulary */
        NNT_TRY(nnt_tokenizer_vocab_size(p->tok, &p->cfg.vocab));
    /* a classifier of the source's weights: made in its configuration, then read */
    int relabel = r->num_labels > 0 && r->num_labels != p->cfg.num_labels;
    int repad = r->pad_token_id >= 0 && (!p->cfg.has_pad_token ||
                                         p->cfg.pad_token_id != r->pad_token_id);
    if (r->num_labels < 0 || r->pad_token_id < -1)
        return nnt_fail(p->ctx, NNT_E_INVAL, "num_labels %lld (>= 0), pad_token_id %lld (>= "
                        "-1)", (long long)r->num_labels, (long long)r->pad_token_id);
    int reproblem = r->problem_type >= 0 && r->problem_type != p->cfg.problem_type;
    if (r->problem_type < -1 || r->problem_type > NNT_PROBLEM_MULTI_LABEL)
        return nnt_fail(p->ctx, NNT_E_INVAL, "problem_type %d (-1: the source's, or "
                        "NNT_PROBLEM_*)", r->problem_type);
    if (relabel)
        p->cfg.num_labels = r->num_labels;
    if (repad)
        p->cfg.has_pad_token = 1, p->cfg.pad_token_id = r->pad_token_id;
    if (reproblem)
        p->cfg.problem_type = r->problem_type;
    int hf = nnt_model_source_is_hf(r->model_source);
    if ((relabel || repad || reproblem) && r->model_source && !hf &&
        !nnt_model_source_is_fresh(r->model_source))
        return nnt_fail(p->ctx, NNT_E_INVAL, "num_labels, pad_token_id, problem_type: %s is no "
                        "Hugging Face directory or preset: its model is not made a classifier",
                        r->model_source);
    if ((rc = nnt_model_tiling(p->ctx, &p->cfg, o->batch, o->seq, r->tiling, &p->tiling)))
        return field_fail(p, "tiling", rc);
    /* Fine-tuning a fresh model, or a Hugging Face one in bf16: built with its parameters
     * unwritten, frozen (or given adapters), then initialised from the seed, or read
     * (nnt_model_read_hf; what the directory lacks initialised as nnt_model_create does), so
     * that under bf16 its frozen matrices are never held in fp32 all at once (an 8B preset:
     * 32 GB); else loaded, or (source NULL) created from the seed */
    int tunes = r->lora || (r->freeze && *r->freeze) || (r->load_peft && r->freeze_mode);
    int narrows = r->precision == NNT_PRECISION_BF16 || r->freeze_mode == NNT_FREEZE_NF4;
    int reheaded = hf && (relabel || repad);   /* read into a model of another head or pad */
    int read_late = (tunes && narrows && hf) || reheaded || (reproblem && hf);
    int init_late = tunes && nnt_model_source_is_fresh(r->model_source);
    if (reheaded)   /* the head transformers initialises: from the seed */
        rc = nnt_model_build_init(p->ctx, "nnt_model_create", &p->cfg, o->batch, o->seq,
                                  &p->tiling, o->seed, &p->model);
    else if (read_late || init_late)
        rc = nnt_model_build_uninit(p->ctx, "nnt_model_create", &p->cfg, o->batch, o->seq,
                                    &p->tiling, &p->model);
    else
        rc = nnt_model_open(p->ctx, r->model_source, &p->cfg, o->batch, o->seq, &p->tiling,
                            o->seed, &p->model);
    if (rc)
        return field_fail(p, r->model_source ? "model_source" : "model_config", rc);
    if (r->recompute && (rc = nnt_layer_set_recompute(p->model, 1)))
        return field_fail(p, "recompute", rc);
    NNT_TRY(nnt_model_config_of(p->model, &p->cfg));   /* kv_heads and hidden resolved */
    if (r->lora && r->load_peft)
        return nnt_fail(p->ctx, NNT_E_INVAL, "lora: a PEFT adapter (load_peft) brings its "
                        "own settings: no lora options with it");
    if (r->freeze_mode < 0 || r->freeze_mode > NNT_FREEZE_NF4)
        return nnt_fail(p->ctx, NNT_E_INVAL, "freeze_mode: %d is no nnt_freeze_mode (0, "
                        "NNT_FREEZE, NNT_FREEZE_KEEP_FP32 or NNT_FREEZE_NF4)", r->freeze_mode);
    int mode = r->freeze_mode ? r->freeze_mode : NNT_FREEZE;
    for (const char *s = r->freeze; s && *s;) {
        size_t len = strcspn(s, ",");
        char pat[512];
        snprintf(pat, sizeof pat, "%.*s", (int)len, s);
        if ((rc = nnt_layer_freeze(p->model, pat, mode, NULL)))
            return field_fail(p, "freeze", rc);
        s += len + (s[len] == ',');
    }
    /* the adapter's base frozen in the run's mode first (nnt_model_load_peft then leaves it
     * so) */
    if (r->load_peft && r->freeze_mode && (rc = nnt_layer_freeze(p->model, "*", mode, NULL)))
        return field_fail(p, "freeze_mode", rc);
    if (r->load_peft && (rc = nnt_model_load_peft(p->model, r->load_peft)))
        return field_fail(p, "load_peft", rc);
    nnt_lora_options lora = NNT_LORA_OPTIONS_INIT;   /* r->lora's, as large as the caller's */
    if (r->lora)
        memcpy(&lora, r->lora, r->lora->size < sizeof lora ? r->lora->size : sizeof lora);
    if (r->lora && r->freeze_mode && lora.freeze_base)
        lora.freeze_base = r->freeze_mode;
    if (r->lora && (rc = nnt_model_lora_add(p->model, &lora)))
        return field_fail(p, "lora", rc);
    if (read_late && (rc = nnt_model_read_hf(p->model, r->model_source)))
        return field_fail(p, "model_source", rc);
    if ((read_late || init_late) &&
        (rc = nnt_layer_init_base(p->model, init_late ? o->seed : 0, read_late)))
        return field_fail(p, r->model_source ? "model_source" : "model_config", rc);
    return NNT_OK;
}

/* ---- the tokens ------------------------------------------------------------------------ */

/* The tokenizer must not give ids the model does not have where it encodes text. */
static int check_vocab(run_parts *p)
{
    int64_t v = 0;
    NNT_TRY(nnt_tokenizer_vocab_size(p->tok, &v));
    if (v > p->cfg.vocab)
        return nnt_fail(p->ctx, NNT_E_INVAL, "tokenizer: it has %lld tokens but the model's "
                        "vocab is %lld", (long long)v, (long long)p->cfg.vocab);
    return NNT_OK;
}

/* The held-out tokens (val_data, or the training data's last held_out), the windows a
 * validation reads; text's ids must exist in the model. */
static int open_validation(run_parts *p, int64_t held_out)
{
    const nnt_run_config *r = &p->r;
    int64_t bt = p->o.batch * p->o.seq;
    if (r->val_data) {
        int rc = nnt_data_open(r->val_data, r->data_format, p->tok, p->cfg.vocab, &p->val);
        if (rc)
            return field_fail(p, "val_data", rc);
        NNT_TRY(nnt_data_num_tokens(p->val, &p->val_len));
    } else {
        p->val_start = p->train_tokens, p->val_len = held_out;
    }
    int whole = nnt_held_out_in_rows(reads_pairs(p), p->val ? p->val : p->data);
    int64_t fit = whole ? p->val_len / bt : p->val_len > bt ? (p->val_len - 1) / bt : 0;
    if ((r->val_data || held_out) && fit == 0)
        return nnt_fail(p->ctx, NNT_E_INVAL, "%s: %s holds %lld tokens, fewer than one batch of "
                        "B x T%s = %lld: %s, or smaller batches", r->val_data ? "val_data"
                        : "val_split", r->val_data ? r->val_data : "the held-out part",
                        (long long)p->val_len, whole ? "" : " + 1", (long long)(bt + !whole),
                        r->val_data ? "give more" : "hold out more");
    if (r->val_data || held_out)
        p->val_batches = r->val_batches > 0 && r->val_batches < fit ? r->val_batches : fit;
    nnt_data_format train_format = NNT_DATA_LLMC, val_format = NNT_DATA_LLMC;
    if (p->data)
        NNT_TRY(nnt_data_format_of(p->data, &train_format));
    if (p->val)
        NNT_TRY(nnt_data_format_of(p->val, &val_format));
    return train_format == NNT_DATA_TEXT || val_format == NNT_DATA_TEXT ? check_vocab(p) : NNT_OK;
}

static int open_tokens(run_parts *p)
{
    const nnt_run_config *r = &p->r;
    int64_t n = 0, held_out = 0;
    if (!(r->val_split >= 0 && r->val_split < 1) || r->val_batches < 0)
        return nnt_fail(p->ctx, NNT_E_INVAL, "%s: out of range (0 <= val_split < 1, "
                        "val_batches >= 0)", r->val_batches < 0 ? "val_batches" : "val_split");
    if (r->val_data && r->val_split > 0)
        return nnt_fail(p->ctx, NNT_E_INVAL, "val_split: val_data and val_split exclude each "
                        "other");
    if (p->o.steps == 0 && r->val_data)   /* validation only: no training data read */
        return open_validation(p, 0);
    if (!r->data)
        return nnt_fail(p->ctx, NNT_E_INVAL, "data: no training data");
    int rc = nnt_data_open(r->data, r->data_format, p->tok, p->cfg.vocab, &p->data);
    if (rc) {   /* ids >= vocab in text: the likely cause a tokenizer larger than the model */
        int64_t v = 0;
        rc = field_fail(p, "data", rc);
        nnt_tokenizer_vocab_size(p->tok, &v);
        return rc == NNT_E_FORMAT && v > p->cfg.vocab ? check_vocab(p) : rc;
    }
    NNT_TRY(nnt_data_num_tokens(p->data, &n));
    held_out = (int64_t)((double)n * r->val_split);
    nnt_data_info di = NNT_DATA_INFO_INIT;   /* rows of whole examples: split on a row */
    int unpaired = p->o.dpo_beta > 0 && nnt_dpo_loss_unpaired(p->o.dpo_loss);
    if (nnt_data_info_get(p->data, &di) == 0 && di.block > 0)   /* DPO: on a pair of rows */
        held_out -= held_out % (di.block * (reads_pairs(p) && !unpaired ? 2 : 1));
    p->train_tokens = n - held_out;
    if (p->train_tokens < 2)
        return nnt_fail(p->ctx, NNT_E_INVAL, "data: %s: %lld tokens%s, at least 2 are needed",
                        r->data, (long long)p->train_tokens,
                        held_out ? " left for training by val_split" : "");
    if (p->o.shuffle && (p->train_tokens - 1) / p->o.seq == 0)
        return nnt_fail(p->ctx, NNT_E_INVAL, "shuffle: it reads sequences of T + 1 = %lld "
                        "tokens: %s has %lld training tokens", (long long)p->o.seq + 1, r->data,
                        (long long)p->train_tokens);
    return open_validation(p, held_out);
}

/* ---- the optimizer --------------------------------------------------------------------- */

/* The default peak learning rate: fine-tuning loaded weights 3e-4; from scratch by size, as
 * small models take larger steps (char-level models ~3e-3; GPT-2 124M 6e-4, as nanoGPT and
 * llm.c; GPT-3's 350M and above 3e-4 or less). */
static double default_lr(int loaded, int64_t nparams)
{
    if (loaded)
        return 3e-4;
    return nparams < 10000000 ? 3e-3 : nparams < 200000000 ? 6e-4 : 3e-4;
}

static int open_optimizer(run_parts *p)
{
    static const nnt_optim_options defaults = NNT_OPTIM_OPTIONS_INIT;
    const nnt_trainer_options *o = &p->o;
    nnt_optim_options oo;
    int64_t nparams = 0;
    int rc = nnt_read_options("optim", p->r.optim, &defaults, &oo, sizeof oo, 0,
                              "initialise them with NNT_OPTIM_OPTIONS_INIT");
    NNT_TRY(rc);
    NNT_TRY(nnt_layer_num_params(p->model, NULL, &nparams));
    /* (a preset's name is no file: a fresh model) */
    if (oo.lr < 0)
        oo.lr = default_lr(p->r.model_source && access(p->r.model_source, F_OK) == 0, nparams);
    if (oo.min_lr < 0)
        oo.min_lr = oo.lr / 10;
    if (oo.min_lr > oo.lr)
        return nnt_fail(p->ctx, NNT_E_INVAL, "min_lr: %g is above the learning rate %g",
                        oo.min_lr, oo.lr);
    /* validation only (steps 0): no step, no schedule to end */
    oo.schedule = o->steps ? oo.schedule : NNT_SCHEDULE_CONSTANT;
    oo.total_steps = o->steps, oo.accum_steps = o->accum;
    if (oo.schedule == NNT_SCHEDULE_WSD && oo.decay_steps == 0)   /* a tenth of the run */
        oo.decay_steps = (o->steps + 9) / 10;
    if ((rc = nnt_optim_create(p->ctx, &oo, &p->opt)) ||
        (rc = nnt_optim_add_layer(p->opt, p->model)))
        return field_fail(p, "optim", rc);
    return NNT_OK;
}

/* ---- the record ------------------------------------------------------------------------- */

/* Members appended to a JSON object's text *s (length *n): "key": value. */
typedef struct members {
    char *s;
    size_t n, cap;
    int failed;
} members;

static void add_raw(members *m, const char *text)
{
    size_t k = strlen(text);
    if (m->failed || (m->n + k + 1 > m->cap && (m->cap = 2 * (m->n + k + 1),
                                                 !(m->s = realloc(m->s, m->cap)))))
        return (void)(m->failed = 1);
    memcpy(m->s + m->n, text, k + 1);
    m->n += k;
}

/* "key": "value" (JSON-escaped; control characters as '?'), or "key": number. path: made
 * absolute when it names a file (a pattern stays as it is). */
static void add_member(members *m, const char *key, const char *str, int path, double num)
{
    char *abs = path && str ? realpath(str, NULL) : NULL, head[96];
    snprintf(head, sizeof head, "%s\"%s\": ", m->n ? ", " : "", key);
    add_raw(m, head);
    if (!str) {
        snprintf(head, sizeof head, "%.17g", num);
        return add_raw(m, head);
    }
    add_raw(m, "\"");
    for (const char *c = abs ? abs : str; *c; c++) {
        char one[3] = {*c, 0, 0};
        if (*c == '"' || *c == '\\')
            one[0] = '\\', one[1] = *c;
        else if ((unsigned char)*c < 0x20)
            one[0] = '?';
        add_raw(m, one);
    }
    add_raw(m, "\"");
    free(abs);
}

/* The run's description as the members nnt_trainer_open(3) lists, then the caller's. */
static char *run_members(const run_parts *p)
{
    static const char *const kinds[] = {"bytes", "bpe", "json"};
    static const char *const formats[] = {"auto", "text", "llmc", "nanogpt"};
    static const char *const precisions[] = {"fp32", "tf32", "bf16"};
    const nnt_run_config *r = &p->r;
    const nnt_tiling none = NNT_TILING_INIT, *t = r->tiling ? r->tiling : &none;
    const char *const tok_keys[3] = {"tokenizer_json", "bpe_vocab", "bpe_merges"};
    members m = {NULL, 0, 0, 0};
    add_raw(&m, "");
    if (r->model_source)
        add_member(&m, "model_source", r->model_source, 1, 0);
    add_member(&m, "tokenizer", kinds[p->tok_kind], 0, 0);
    for (int i = 0; i < 3; i++)
        if (p->tok_files[i])
            add_member(&m, tok_keys[i], p->tok_files[i], 1, 0);
    if (r->data)
        add_member(&m, "data", r->data, 1, 0);
    add_member(&m, "data_format", (unsigned)r->data_format < 4 ? formats[r->data_format] : "?",
               0, 0);
    if (r->val_data)
        add_member(&m, "val_data", r->val_data, 1, 0);
    add_member(&m, "val_split", NULL, 0, r->val_split);
    add_member(&m, "val_batches", NULL, 0, (double)r->val_batches);
    add_member(&m, "precision", (unsigned)r->precision < 3 ? precisions[r->precision] : "?",
               0, 0);
    add_member(&m, "recompute", NULL, 0, r->recompute != 0);
    const int64_t tiles[6] = {t->batch, t->seq, t->channels, t->hidden, t->vocab, t->heads};
    const char *const tile_keys[6] = {"tile_batch", "tile_seq", "tile_channels",
                                      "tile_hidden", "tile_vocab", "tile_heads"};
    for (int i = 0; i < 6; i++)
        add_member(&m, tile_keys[i], NULL, 0, (double)tiles[i]);
    if (r->freeze)
        add_member(&m, "freeze", r->freeze, 0, 0);
    if (r->freeze_mode == NNT_FREEZE_NF4 || r->freeze_mode == NNT_FREEZE_KEEP_FP32)
        add_member(&m, "freeze_mode", r->freeze_mode == NNT_FREEZE_NF4 ? "nf4" : "keep_fp32",
                   0, 0);
    if (r->load_peft)
        add_member(&m, "load_peft", r->load_peft, 1, 0);
    if (r->lora) {
        add_member(&m, "lora_rank", NULL, 0, (double)r->lora->rank);
        add_member(&m, "lora_alpha", NULL, 0, r->lora->alpha);
        add_member(&m, "lora_dropout", NULL, 0, r->lora->dropout);
        add_member(&m, "lora_rslora", NULL, 0, r->lora->rslora != 0);
        if (r->lora->size > offsetof(nnt_lora_options, dora) && r->lora->dora)
            add_member(&m, "lora_dora", NULL, 0, 1);
        if (r->lora->targets)
            add_member(&m, "lora_targets", r->lora->targets, 0, 0);
    }
    if (p->o.extra_options && *p->o.extra_options) {
        add_raw(&m, ", ");
        add_raw(&m, p->o.extra_options);
    }
    if (m.failed)
        free(m.s);
    return m.failed ? NULL : m.s;
}

/* ---- nnt_trainer_open ------------------------------------------------------------------- */

NNT_API int nnt_trainer_open(nnt_ctx *ctx, const nnt_run_config *run,
                             const nnt_trainer_options *opts, nnt_trainer **out)
{
    const char *fn = "nnt_trainer_open";
    static const nnt_run_config run_defaults = NNT_RUN_CONFIG_INIT;
    run_parts p;
    memset(&p, 0, sizeof p);
    p.ctx = ctx;
    if (!out)
        return nnt_fail(ctx, NNT_E_INVAL, "%s: out is NULL", fn);
    *out = NULL;
    NNT_TRY(nnt_ctx_check(ctx, fn));
    static const size_t run_older[] = {offsetof(nnt_run_config, freeze_mode),    /* 0.3 */
                                       offsetof(nnt_run_config, problem_type)};
    NNT_TRY(nnt_read_options_sizes(fn, run, &run_defaults, &p.r, sizeof p.r, run_older,
                                   sizeof run_older / sizeof *run_older,
                                   "initialise it with NNT_RUN_CONFIG_INIT"));
    NNT_TRY(nnt_trainer_read_options(fn, opts, &p.o));
    if (p.o.batch < 1 || p.o.seq < 1 || p.o.accum < 1 || p.o.steps < 0)
        return nnt_fail(ctx, NNT_E_INVAL, "%s: batch, seq and accum must be >= 1, steps >= 0",
                        fn);
    int rc = nnt_ctx_set_precision(ctx, p.r.precision);
    if (rc)
        return field_fail(&p, "precision", rc);
    char *record = NULL;
    nnt_trainer *tr = NULL;
    if (!(rc = resumed_model(&p)) && !(rc = open_tokenizer(&p)) && !(rc = open_model(&p)) && !(rc = open_tokens(&p)) &&
        !(rc = open_optimizer(&p)) && !(record = run_members(&p)))
        rc = nnt_fail(ctx, NNT_E_NOMEM, "%s: out of memory", fn);
    if (!rc) {
        nnt_trainer_options o = p.o;
        o.tile_batch = p.tiling.batch, o.tile_seq = p.tiling.seq;
        o.train_tokens = p.train_tokens, o.val_data = p.val;
        o.val_start = p.val_start, o.val_len = p.val_len, o.val_batches = p.val_batches;
        o.extra_options = record;
        rc = nnt_trainer_create(p.model, p.opt, p.data, &o, &tr);
    }
    free(record);
    if (rc) {
        parts_free(&p);
        return rc;
    }
    tr->owns = 1, tr->tok = p.tok, tr->tok_kind = p.tok_kind, tr->val_owned = p.val;
    tr->tiling = p.tiling, tr->tiling_known = 1;
    for (int i = 0; i < 3; i++)
        free(p.tok_files[i]);
    free(p.base);
    *out = tr;
    return NNT_OK;
}

NNT_API int nnt_trainer_parts(const nnt_trainer *tr, nnt_layer **model, nnt_optim **opt,
                              nnt_data **data, nnt_tokenizer **tok)
{
    NNT_TRY(nnt_trainer_check(tr, "nnt_trainer_parts"));
    if (model)
        *model = tr->model;
    if (opt)
        *opt = tr->opt;
    if (data)
        *data = tr->data;
    if (tok)
        *tok = tr->tok;
    return NNT_OK;
}
