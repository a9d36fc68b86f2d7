/* SPDX-License-Identifier: MIT */
/* What a trainer's checkpoints record besides the tensors, and what a resume checks and takes
 * from it.
 *
 *   options string  a JSON object: the program, the step, the model's configuration, the
 *                   batches, the optimizer's options, the data's split and order, validation
 *                   and checkpoints, the best validation loss; with frozen parameters their
 *                   element count and checksum (the base a fine-tuning run trained on); then
 *                   the run's description (nnt_trainer_open) and the caller's members
 *   resume          the checkpoint's model configuration and frozen base against this
 *                   trainer's (nothing is changed when they differ), then the parameters, the
 *                   optimizer, the data position (restarted in another order), the rng and
 *                   the best validation loss */
#include "trainer_impl.h"
#include "../io/io.h"
#include "../optim/optim.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* The checksum of the frozen parameters, in the model's order, of one kind:
 *  NNT_BASE_SUM_WORDS ("base_checksum2", what checkpoints record): FNV-1a 64 over each one's
 *    name (with its NUL) and the 8 little-endian bytes of nnt_hash_words of its elements as
 *    stored (at memory speed);
 *  NNT_BASE_SUM_FNV ("base_checksum", what checkpoints recorded before): FNV-1a 64 over each
 *    one's name (with its NUL) and its elements as stored, a byte at a time (about 1 GB/s:
 *    2.9 s for Llama-3.2-1B's bf16 base), computed only to resume such a checkpoint.
 * The words kind is computed when the trainer is created (nnt_trainer_base_checksum): before
 * any forward, since under bf16 products a frozen matrix is then kept in bf16 (its rounding),
 * while the base a resume loads is not yet; the byte kind when a resume asks for it (before
 * the resumed run's first forward). */
int nnt_trainer_base_checksum(nnt_trainer *tr, int kind, uint64_t *sum)
{
    int64_t count = 0, most = 1;
    int words = kind == NNT_BASE_SUM_WORDS;
    uint64_t *known = words ? &tr->base_sum : &tr->base_sum_fnv;
    if (tr->base_known & kind)
        return *sum = *known, NNT_OK;
    NNT_TRY(nnt_layer_num_params(tr->model, &count, NULL));
    for (int pass = 0; pass < 2; pass++) {   /* the largest one, then the sum */
        uint64_t h = NNT_FNV_OFFSET;
        char *buf = pass ? malloc((size_t)most) : NULL;
        int rc = pass && !buf ? nnt_fail(tr->ctx, NNT_E_NOMEM, "nnt_trainer: out of memory")
                              : NNT_OK;
        for (int64_t i = 0; i < count && rc == NNT_OK; i++) {
            nnt_param_info p;
            nnt_dtype dt = NNT_FP32;
            int64_t n = 0;
            memset(&p, 0, sizeof p);
            p.size = sizeof p;
            if ((rc = nnt_layer_param(tr->model, i, &p)) || !p.frozen ||
                (rc = nnt_tensor_numel(p.value, &n)) || (rc = nnt_tensor_dtype(p.value, &dt)))
                continue;
            size_t bytes = (size_t)nnt_dtype_bytes(dt, n);
            if (!pass) {
                most = (int64_t)bytes > most ? (int64_t)bytes : most;
                continue;
            }
            h = nnt_fnv1a_bytes(h, p.name, strlen(p.name) + 1);
            if ((rc = nnt_tensor_copy_to_host(p.value, buf, bytes)) == NNT_OK)
                h = words ? nnt_fnv1a_u64(h, nnt_hash_words(buf, bytes))
                          : nnt_fnv1a_bytes(h, buf, bytes);
        }
        free(buf);
        NNT_TRY(rc);
        *known = h;
    }
    tr->base_known |= kind;
    return *sum = *known, NNT_OK;
}

/* The run's configuration as a JSON object: the model (what a resume checks), the batches,
 * the optimizer, the data's split and order, validation and checkpoints, the frozen base,
 * then the caller's members. */
int nnt_trainer_options_string(nnt_trainer *tr, int64_t step, char **out)
{
    const nnt_trainer_options *o = &tr->o;
    const nnt_optim_options *oo = &tr->opt->opts;
    nnt_model_config c = NNT_MODEL_CONFIG_INIT;
    char best[40] = "", base[96] = "", decay[80] = "", early[96] = "", tuning[96] = "";
    char vals[256] = "";
    uint64_t sum = 0;
    *out = NULL;
    NNT_TRY(nnt_model_config_of(tr->model, &c));
    /* NNT_TEST_BASE_CHECKSUM_FNV=1 (tests): the byte kind under its older key, as
     * checkpoints recorded it before the words kind */
    const char *v = getenv("NNT_TEST_BASE_CHECKSUM_FNV");
    int fnv = v && !strcmp(v, "1");
    if (tr->frozen > 0)
        NNT_TRY(nnt_trainer_base_checksum(tr, fnv ? NNT_BASE_SUM_FNV : NNT_BASE_SUM_WORDS, &sum));
    snprintf(base, sizeof base, ", \"frozen\": %lld", (long long)tr->frozen);
    if (tr->frozen > 0)
        snprintf(base + strlen(base), sizeof base - strlen(base), ", \"%s\": \"%016llx\"",
                 fnv ? "base_checksum" : "base_checksum2", (unsigned long long)sum);
    char *dpo = NULL;   /* DPO: beta and the reference */
    NNT_TRY(nnt_dpo_members(tr, &dpo));
    size_t cap = 4096 + strlen(o->program) + (o->extra_options ? strlen(o->extra_options) : 0) +
                 (dpo ? strlen(dpo) : 0);
    char *s = malloc(cap);
    if (!s) {
        free(dpo);
        return nnt_fail(tr->ctx, NNT_E_NOMEM, "nnt_trainer: out of memory");
    }
    if (oo->schedule == NNT_SCHEDULE_WSD)
        snprintf(decay, sizeof decay, ", \"decay_steps\": %lld, \"decay_shape\": \"%s\"",
                 (long long)oo->decay_steps, nnt_decay_shape_name(oo->decay_shape));
    if (o->best_checkpoint && tr->best_val < HUGE_VAL)
        snprintf(best, sizeof best, ", \"best_val\": %.17g", tr->best_val);
    if (o->early_stop > 0)
        snprintf(early, sizeof early, ", \"early_stop\": %lld, \"early_stop_delta\": %.17g",
                 (long long)o->early_stop, o->early_stop_delta);
    if (tr->nvalidations > 0)   /* the validations so far: early_stop's count, the lowest */
        snprintf(vals, sizeof vals, ", \"validations\": %lld, \"val_stale\": %lld, "
                 "\"val_low\": %.17g, \"val_low_step\": %lld, \"val_last\": %.17g, "
                 "\"val_last_step\": %lld", (long long)tr->nvalidations, (long long)tr->stale,
                 tr->low_val, (long long)tr->low_val_step, tr->last_val,
                 (long long)tr->last_val_step);
    if (o->label_smoothing > 0)
        snprintf(tuning, sizeof tuning, ", \"label_smoothing\": %.17g", o->label_smoothing);
    if (o->neftune_alpha > 0)
        snprintf(tuning + strlen(tuning), sizeof tuning - strlen(tuning),
                 ", \"neftune_alpha\": %.17g", o->neftune_alpha);
    snprintf(s, cap,
             "{\"program\": \"%s\", \"step\": %lld, \"model\": {\"family\": %d, "
             "\"vocab\": %lld, \"max_seq\": %lld, \"layers\": %lld, \"heads\": %lld, "
             "\"kv_heads\": %lld, \"channels\": %lld, \"hidden\": %lld, \"head_dim\": %lld, "
             "\"qk_norm\": %d}, \"batch\": %lld, \"seq\": %lld, \"accum\": %lld, "
             "\"steps\": %lld, \"seed\": %lld, \"optim\": \"%s\", \"lr\": %.17g, "
             "\"beta1\": %.17g, \"beta2\": %.17g, \"eps\": %.17g, \"weight_decay\": %.17g, "
             "\"momentum\": %.17g, \"grad_clip\": %.17g, \"schedule\": \"%s\", "
             "\"warmup\": %lld%s, \"min_lr\": %.17g, \"held_out\": %lld, \"shuffle\": %d, "
             "\"val_every\": %lld%s%s%s, \"save_every\": %lld, \"save_best\": %d%s%s%s%s%s}",
             o->program, (long long)step, c.family, (long long)c.vocab, (long long)c.max_seq,
             (long long)c.layers, (long long)c.heads, (long long)c.kv_heads,
             (long long)c.channels, (long long)c.hidden, (long long)c.head_dim, c.qk_norm,
             (long long)o->batch, (long long)o->seq, (long long)o->accum, (long long)o->steps,
             (long long)o->seed, nnt_optim_kind_name(oo->kind), oo->lr, oo->beta1, oo->beta2,
             oo->eps, oo->weight_decay, oo->momentum, oo->grad_clip,
             nnt_schedule_name(oo->schedule), (long long)oo->warmup_steps, decay, oo->min_lr,
             (long long)tr->held_out, o->shuffle, (long long)o->val_every, early, vals, tuning,
             (long long)o->save_every, o->best_checkpoint != NULL, best, base, dpo ? dpo : "",
             o->extra_options && *o->extra_options ? ", " : "",
             o->extra_options ? o->extra_options : "");
    free(dpo);
    *out = s;
    return NNT_OK;
}

/* Integer or real value of "key": in an options string; def when absent. */
const char *nnt_trainer_option(const char *options, const char *key, char *buf, size_t cap)
{
    size_t n = options ? strlen(options) : 0;
    char *object = options ? malloc(n + 3) : NULL;
    int found = 0;
    if (object)   /* (braces around bare members) */
        snprintf(object, n + 3, options[0] == '{' ? "%s" : "{%s}", options);
    if (!object || nnt_options_get(object, key, buf, cap, &found) || !found)
        buf[0] = '\0';
    free(object);
    return buf;
}

double nnt_trainer_option_number(const char *options, const char *key, double dflt)
{
    char buf[64];
    return *nnt_trainer_option(options, key, buf, sizeof buf) ? strtod(buf, NULL) : dflt;
}

/* The model configuration the options string records (when it records one) must be this
 * trainer's: the sizes (the family, kv_heads, hidden, head_dim and qk_norm only where
 * recorded: older checkpoints lack them); the tensors' shapes are checked by the load. */
static int check_model(nnt_trainer *tr, const char *fn, const char *path, const char *options)
{
    static const char *const keys[10] = {"vocab", "max_seq", "layers", "heads", "channels",
                                         "family", "kv_heads", "hidden", "head_dim",
                                         "qk_norm"};
    nnt_model_config c = NNT_MODEL_CONFIG_INIT;
    char text[4096];
    int found = 0;
    if (!options || nnt_options_get(options, "model", text, sizeof text, &found) || !found)
        return NNT_OK;   /* none recorded */
    NNT_TRY(nnt_model_config_of(tr->model, &c));
    const int64_t have[10] = {c.vocab, c.max_seq, c.layers, c.heads, c.channels, c.family,
                              c.kv_heads, c.hidden, c.head_dim, c.qk_norm};
    for (int i = 0; i < 10; i++) {
        double v = nnt_trainer_option_number(options, keys[i], -1);
        if (v != (double)have[i] && (i < 5 || v != -1))
            return nnt_fail(tr->ctx, NNT_E_SHAPE, "%s: %s: the checkpoint's model has %s %lld, "
                            "this trainer's %lld", fn, path, keys[i], (long long)v,
                            (long long)have[i]);
    }
    return NNT_OK;
}

/* A fine-tuning run's checkpoint holds its trained parameters only: the frozen ones (the
 * base) must be those it was trained with, in number of elements and in checksum. */
static int check_base(nnt_trainer *tr, const char *fn, const char *path, const char *options)
{
    double frozen = nnt_trainer_option_number(options, "frozen", -1);   /* -1: before it was recorded */
    char text[32];
    int found = 0;
    uint64_t sum = 0, want = 0;
    if (frozen >= 0 && frozen != (double)tr->frozen)
        return nnt_fail(tr->ctx, NNT_E_FORMAT, "%s: %s: the checkpoint's run had %.0f frozen "
                        "parameter elements, this trainer's model %lld: %s", fn, path, frozen,
                        (long long)tr->frozen, frozen > 0 ? "give it the base model it was "
                        "trained on, with the same frozen parameters and adapters"
                        : "give it the model it was trained as (nothing frozen)");
    if (frozen <= 0 || !options)
        return NNT_OK;   /* (a checkpoint of a run without frozen parameters) */
    /* the words checksum, or the byte one of a checkpoint saved before it */
    int kind = NNT_BASE_SUM_WORDS;
    NNT_TRY(nnt_options_get(options, "base_checksum2", text, sizeof text, &found));
    if (!found) {
        kind = NNT_BASE_SUM_FNV;
        NNT_TRY(nnt_options_get(options, "base_checksum", text, sizeof text, &found));
    }
    if (!found)
        return NNT_OK;
    NNT_TRY(nnt_trainer_base_checksum(tr, kind, &sum));
    if (nnt_meta_parse_hex64(text, &want) || want != sum)
        return nnt_fail(tr->ctx, NNT_E_FORMAT, "%s: %s: the frozen parameters (the base model) "
                        "are not those the checkpoint's run trained on: their checksum is "
                        "%016llx, the checkpoint's %s (the base model changed since)", fn, path,
                        (unsigned long long)sum, text);
    return NNT_OK;
}

/* The validations before the checkpoint, as its options recorded them (a checkpoint without
 * them: none here, and log_dir's val.csv, if any, counts them again): early_stop's count
 * goes on where it was, and the lowest and last stay known without a log_dir */
static void resume_validations(nnt_trainer *tr, const char *options)
{
    double n = nnt_trainer_option_number(options, "validations", 0);
    tr->vals_resumed = n > 0;
    if (n <= 0)
        return;
    tr->nvalidations = (int64_t)n;
    tr->stale = (int64_t)nnt_trainer_option_number(options, "val_stale", 0);
    tr->low_val = nnt_trainer_option_number(options, "val_low", HUGE_VAL);
    tr->low_val_step = (int64_t)nnt_trainer_option_number(options, "val_low_step", 0);
    tr->last_val = nnt_trainer_option_number(options, "val_last", 0);
    tr->last_val_step = (int64_t)nnt_trainer_option_number(options, "val_last_step", 0);
}

NNT_API int nnt_trainer_resume(nnt_trainer *tr, const char *path)
{
    const char *fn = "nnt_trainer_resume";
    NNT_TRY(nnt_trainer_check(tr, fn));
    if (!path)
        return nnt_fail(tr->ctx, NNT_E_INVAL, "%s: path is NULL", fn);
    nnt_train_state st = NNT_TRAIN_STATE_INIT;
    NNT_TRY(nnt_train_state_info(tr->ctx, path, &st));   /* checked before anything changes */
    int rc = check_model(tr, fn, path, st.options);
    if (rc == NNT_OK)
        rc = check_base(tr, fn, path, st.options);
    if (rc == NNT_OK)   /* (its size checked too, before anything changes) */
        rc = nnt_dpo_resume(tr, fn, path, st.options);
    nnt_train_state_clear(&st);
    NNT_TRY(rc);
    NNT_TRY(nnt_train_state_load(tr->opt, path, &st));
    /* saved in the other order (or before the order was recorded: in order): restart at 0 */
    double shuffled = nnt_trainer_option_number(st.options, "shuffle", -1);
    if (shuffled < 0 ? tr->o.shuffle : shuffled != tr->o.shuffle)
        st.data_pos = 0;
    /* (no training tokens under steps 0: the position is not used) */
    tr->data_pos = tr->o.shuffle || !tr->ntokens ? st.data_pos
                                                 : st.data_pos % (uint64_t)tr->ntokens;
    memcpy(tr->rng, st.rng, sizeof tr->rng);
    free(tr->resumed_options);   /* (for nnt_trainer_text's notes; NULL: out of memory) */
    tr->resumed_options = st.options ? strdup(st.options) : NULL;
    /* the best checkpoint's loss, when it is still there */
    double best = nnt_trainer_option_number(st.options, "best_val", HUGE_VAL);
    tr->best_val = tr->o.best_checkpoint && access(tr->o.best_checkpoint, R_OK) == 0
                       ? best : HUGE_VAL;
    resume_validations(tr, st.options);
    nnt_train_state_clear(&st);
    tr->done = nnt_trainer_steps(tr);
    return NNT_OK;
}
