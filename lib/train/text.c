/* SPDX-License-Identifier: MIT */
/* The trainer's figures as text (nnt_trainer_text): what nnt-train prints, for any program
 * that reports a run the same way.
 *
 *   model    family, sizes and options of the configuration, the parameters (the active ones
 *            of a mixture of experts)
 *   report   a step's line (loss, lr, gradient norm, time, tokens/s, MFU, memory nodes) or a
 *            validation's; live: a short step line with the smoothed loss and the time left
 *   run      this trainer's steps (time, mean rates and MFU, last loss) and validations
 *   memory   the memory nodes' peak use, bytes moved, time waiting for data
 *   summary, warnings, files: the run's description, its warnings, the files written
 *            (summary.c)
 * Lines of fields drop their last fields rather than pass a terminal's width. */
#include "trainer_impl.h"
#include "../models/models.h"
#include "../optim/optim.h"

#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <string.h>

void nnt_text_add(nnt_text *t, const char *fmt, ...)
{
    if (t->full)
        return;
    size_t room = t->cap - t->n;
    va_list ap;
    va_start(ap, fmt);
    int k = vsnprintf(t->buf + t->n, room, fmt, ap);
    va_end(ap);
    if (k < 0 || (t->width > 0 && t->n + (size_t)k >= (size_t)t->width))
        t->full = 1;   /* (the field would reach the width: neither it nor a later one) */
    else if ((size_t)k >= room)
        t->full = t->overflow = 1;
    else
        t->n += (size_t)k;
    t->buf[t->n] = '\0';
}
#define add nnt_text_add

static void format_bytes(char *buf, size_t cap, int64_t bytes)
{
    double v = (double)bytes;
    if (v >= 1024.0 * 1024 * 1024)
        snprintf(buf, cap, "%.2f GiB", v / (1024.0 * 1024 * 1024));
    else
        snprintf(buf, cap, "%.1f MiB", v / (1024.0 * 1024));
}

/* Memory node i's use as "  NAME USED of BUDGET", or (peak) its peak as "NAME peak ..."
 * (", " before all but the first). */
static void add_memory(nnt_text *t, const nnt_mem_stats *ms, int i, int peak)
{
    char used[32], budget[32];
    format_bytes(used, sizeof used, peak ? ms->node[i].peak_bytes : ms->node[i].used_bytes);
    format_bytes(budget, sizeof budget, ms->node[i].budget_bytes);
    add(t, peak ? "%s%s peak %s%s%s" : "%s%s %s%s%s", peak ? (i ? ", " : "") : "  ",
        ms->node[i].name, used, ms->node[i].budget_bytes > 0 ? " of " : "",
        ms->node[i].budget_bytes > 0 ? budget : "");
}

/* "MFU 12.3%" (the number width wide), or "MFU -" for NaN. */
static void add_mfu(nnt_text *t, const char *before, double mfu, int width)
{
    if (isnan(mfu))
        add(t, "%sMFU %*s", before, width + 1, "-");
    else
        add(t, "%sMFU %*.1f%%", before, width, 100 * mfu);
}

/* "; label: weights 1.2 GiB, gradients 3.0 MiB": the kinds of by that moved bytes, in
 * NNT_MEM_* order; nothing when none did. */
static void add_by_kind(nnt_text *t, const char *label, const int64_t *by)
{
    static const char *const names[] = {"weights", "gradients", "optimizer state",
                                        "other tensors", "the library's own tiles"};
    int n = 0;
    for (int k = 0; k < (int)(sizeof names / sizeof names[0]); k++) {
        if (!by[k])
            continue;
        char bytes[32];
        if (by[k] >= 1024 * 1024)
            format_bytes(bytes, sizeof bytes, by[k]);
        else if (by[k] >= 1024)   /* a few partial sums: not "0.0 MiB" */
            snprintf(bytes, sizeof bytes, "%.1f KiB", (double)by[k] / 1024.0);
        else
            snprintf(bytes, sizeof bytes, "%lld B", (long long)by[k]);
        if (n++)
            add(t, ", ");
        else
            add(t, "; %s: ", label);
        add(t, "%s %s", names[k], bytes);
    }
}

static int read_memory(const nnt_trainer *tr, nnt_mem_stats *ms)
{
    memset(ms, 0, sizeof *ms);
    ms->size = sizeof *ms;
    if (nnt_ctx_mem_stats(tr->ctx, ms, 0))
        ms->nnodes = 0;
    return ms->nnodes;
}

/* The configuration's family and sizes, then what its family lets it choose. */
void nnt_trainer_text_model(const nnt_trainer *tr, nnt_text *t)
{
    nnt_model_config c = NNT_MODEL_CONFIG_INIT;
    nnt_family_info fam = NNT_FAMILY_INFO_INIT, f = NNT_FAMILY_INFO_INIT;
    nnt_model_config_of(tr->model, &c);
    for (int i = 0; nnt_model_family_info(i, &f) == 0; i++)
        if (f.family == c.family)
            fam = f;
    unsigned has = fam.features;
    add(t, "%s L %lld, C %lld, NH %lld", fam.title ? fam.title : "?", (long long)c.layers,
        (long long)c.channels, (long long)c.heads);
    if (has & NNT_FAMILY_HAS_KV_HEADS)
        add(t, ", NKV %lld", (long long)c.kv_heads);
    if (c.head_dim * c.heads != c.channels)
        add(t, ", head dim %lld", (long long)c.head_dim);
    if (c.qk_norm)
        add(t, c.qk_norm == 2 ? ", q/k norms over the projections" : ", q/k norm");
    if (has & NNT_FAMILY_HAS_HIDDEN)
        add(t, ", hidden %lld", (long long)c.hidden);
    add(t, ", V %lld, context %lld", (long long)c.vocab, (long long)c.max_seq);
    const char *const *names = c.num_labels > 1 ? nnt_model_label_names_of(tr->model) : NULL;
    static const char *const kinds[] = {"classifier of %lld labels", "regression of %lld "
                                        "values", "multi-label classifier of %lld labels"};
    if (nnt_model_is_reward(&c))
        add(t, ", a reward model (a score head)");
    else if (c.num_labels > 0) {
        add(t, ", a ");
        add(t, kinds[c.problem_type], (long long)c.num_labels);
        add(t, " (a score head%s", names ? "; labels " : ")");
    }
    for (int64_t k = 0; names && k < c.num_labels && k < 8; k++)   /* (id2label's names) */
        add(t, "%s%s%s", k ? ", " : "", names[k],
            k + 1 == c.num_labels ? ")" : k == 7 ? ", ...)" : "");
    if (has & NNT_FAMILY_HAS_ROPE)
        add(t, ", %s head, rope theta %g%s", c.tied ? "tied" : "untied", c.rope.theta,
            c.rope.scaling == NNT_ROPE_SCALING_LLAMA3   ? " (llama3 scaling)"
            : c.rope.scaling == NNT_ROPE_SCALING_LINEAR ? " (linear scaling)"
            : c.rope.scaling == NNT_ROPE_SCALING_YARN   ? " (yarn scaling)"
            : c.rope.scaling == NNT_ROPE_SCALING_LONGROPE ? " (longrope scaling)" : "");
    int64_t hd = c.head_dim ? c.head_dim : c.channels / c.heads;
    int64_t rotary = nnt_rope_rotary_dim(&c.rope, hd);
    if ((has & NNT_FAMILY_HAS_ROPE) && rotary != hd)
        add(t, " on %lld of %lld dimensions a head", (long long)rotary, (long long)hd);
    if (c.rope_local_theta > 0.0)
        add(t, ", windowed layers' rope theta %g", c.rope_local_theta);
    if (nnt_model_nope_any(&c)) {
        int64_t nope = 0;
        for (int64_t i = 0; i < c.layers; i++)
            nope += NNT_MODEL_NOPE_LAYER(&c, i);
        add(t, ", no rope on %lld of the %lld layers", (long long)nope, (long long)c.layers);
    }
    if (c.sliding_window > 0 && nnt_model_window_listed(&c)) {
        int64_t windowed = 0;
        for (int64_t i = 0; i < c.layers; i++)
            windowed += nnt_model_block_window(&c, i);
        add(t, ", window %lld on %lld of the %lld layers (layer_types)",
            (long long)c.sliding_window, (long long)windowed, (long long)c.layers);
    } else if (c.sliding_window > 0 && c.window_global_every > 0)
        add(t, ", window %lld (every %lld%s layer global)", (long long)c.sliding_window,
            (long long)c.window_global_every, c.window_global_every == 2 ? "nd"
            : c.window_global_every == 3 ? "rd" : "th");
    else if (c.sliding_window > 0)
        add(t, ", window %lld from layer %lld", (long long)c.sliding_window,
            (long long)c.window_from);
    if (c.attn_sinks)
        add(t, ", attention sinks");
    if (c.query_pre_attn_scalar > 0.0)
        add(t, ", query_pre_attn_scalar %g", c.query_pre_attn_scalar);
    if (c.attn_softcap > 0.0 || c.final_softcap > 0.0)
        add(t, ", soft-caps %g (scores) %g (logits)", c.attn_softcap, c.final_softcap);
    if (has & NNT_FAMILY_HAS_GELU_CHOICE)   /* either GELU */
        add(t, ", %s GELU", nnt_model_mlp_kind(&c) == NNT_MLP_GELU_ERF ? "exact" : "tanh");
    if (has & NNT_FAMILY_HAS_SERIAL_BLOCKS) {   /* GPT-NeoX's and Falcon's arrangements */
        int parallel = nnt_model_block_parallel(&c);
        add(t, ", attention and MLP %s", parallel ? "side by side" : "one after the other");
        if (parallel && has & NNT_FAMILY_HAS_PARALLEL_NORMS)   /* Falcon's: on how many norms */
            add(t, " on %s", parallel == 2 ? "two norms" : "one norm");
    }
    if (has & NNT_FAMILY_HAS_MULTIPLIERS) {   /* Granite's, as applied */
        double m[4];
        nnt_model_multipliers(&c, m);
        add(t, ", multipliers %g (embedding) %g (residual) %g (scores), logits / %g", m[0],
            m[1], m[2], m[3]);
    }
    /* mixture of experts: the parameters a token runs through (blocks as nnt.h's
     * nnt_model_config says: experts, moe_every, dense_layers) */
    int64_t idle = 0;
    if ((has & NNT_FAMILY_HAS_MOE) && c.experts > 0) {
        int64_t I = c.expert_hidden ? c.expert_hidden : c.hidden, sparse = 0;
        for (int64_t i = 0; i < c.layers; i++)
            sparse += (c.moe_every <= 1 || (i + 1) % c.moe_every == 0) &&
                      !NNT_MODEL_DENSE_LAYER(&c, i);
        int64_t expert = 3 * c.channels * I + (c.moe_bias ? 2 * I + c.channels : 0);
        idle = sparse * (c.experts - c.experts_per_token) * expert;
        add(t, ", %lld of %lld blocks with %lld experts of %lld, top %lld", (long long)sparse,
            (long long)c.layers, (long long)c.experts, (long long)I,
            (long long)c.experts_per_token);
        if (c.shared_expert_hidden > 0)
            add(t, " and a shared expert of %lld", (long long)c.shared_expert_hidden);
        if (c.swiglu_limit > 0.0)   /* gpt-oss's */
            add(t, " (clamped SwiGLU, limit %g, alpha %g%s)", c.swiglu_limit,
                c.swiglu_alpha > 0.0 ? c.swiglu_alpha : 1.702, c.moe_bias ? ", biases" : "");
    }
    add(t, ": %.3fM parameters", (double)tr->params / 1e6);
    if (idle)
        add(t, ", %.3fM active", (double)(tr->params - idle) / 1e6);
}

/* A step's line: in full, or live (the smoothed loss and the time the remaining steps and
 * validations take at this trainer's means); a validation's. */
static void add_report(const nnt_trainer *tr, nnt_text *t, const nnt_trainer_report *r,
                       int live)
{
    int64_t steps = tr->o.steps, ve = tr->o.val_every;
    int digits = snprintf(NULL, 0, "%lld", (long long)steps);
    nnt_mem_stats ms;
    int unpaired = tr->dpo && nnt_dpo_loss_unpaired(tr->o.dpo_loss) && tr->o.dpo_beta > 0;
    if (r->event == NNT_TRAINER_VALIDATION && unpaired)   /* TRL's kl and rewards/margins */
        return add(t, "val  %*lld/%lld  loss %.6f  kl %.4f  rewards: margin %.4f  on %lld "
                   "held-out tokens (%.2f s)", digits, (long long)r->step, (long long)steps,
                   r->loss, r->kl, r->dpo_margin, (long long)r->tokens, r->ms / 1e3);
    if (r->event == NNT_TRAINER_VALIDATION && tr->dpo)
        return add(t, "val  %*lld/%lld  loss %.6f  rewards: accuracy %.3f, margin %.4f  on %lld "
                   "held-out tokens (%.2f s)", digits, (long long)r->step, (long long)steps,
                   r->loss, r->dpo_accuracy, r->dpo_margin, (long long)r->tokens, r->ms / 1e3);
    if (r->event == NNT_TRAINER_VALIDATION && tr->labels)
        return add(t, "val  %*lld/%lld  loss %.6f  accuracy %.4f  on %lld held-out examples "
                   "(%.2f s)", digits, (long long)r->step, (long long)steps, r->loss,
                   r->accuracy, (long long)r->examples, r->ms / 1e3);
    if (r->event == NNT_TRAINER_VALIDATION && nnt_trainer_multi_label(tr))
        return add(t, "val  %*lld/%lld  loss %.6f  label accuracy %.4f  exact match %.4f  "
                   "micro F1 %.4f  on %lld held-out examples (%.2f s)", digits,
                   (long long)r->step, (long long)steps, r->loss, r->accuracy, r->exact_match,
                   r->f1, (long long)r->examples, r->ms / 1e3);
    if (r->event == NNT_TRAINER_VALIDATION && tr->values_k)   /* a regression */
        return add(t, "val  %*lld/%lld  loss (MSE) %.6f  MAE %.6f  on %lld held-out examples "
                   "(%.2f s)", digits, (long long)r->step, (long long)steps, r->loss, r->mae,
                   (long long)r->examples, r->ms / 1e3);
    if (r->event == NNT_TRAINER_VALIDATION)
        return add(t, "val  %*lld/%lld  loss %.6f  on %lld held-out tokens (%.2f s)", digits,
                   (long long)r->step, (long long)steps, r->loss, (long long)r->tokens,
                   r->ms / 1e3);
    if (r->event != NNT_TRAINER_STEP)
        return add(t, "checkpoint of step %lld written", (long long)r->step);
    if (live) {
        double s = tr->ms_sum / (double)(tr->steps_run ? tr->steps_run : 1) *
                   (double)(steps - r->step) / 1e3;
        if (tr->validations_run && ve > 0)   /* the validations left, this step's included */
            s += tr->validation_s / (double)tr->validations_run *
                 (double)(steps / ve - (r->step - 1) / ve + (steps % ve != 0));
        add(t, "step %lld/%lld  loss %.4f (avg %.4f)", (long long)r->step, (long long)steps,
            r->loss, tr->loss_ema);
        if (s >= 60)
            add(t, "  ETA %lldm%02llds", (long long)(s / 60), (long long)s % 60);
        else
            add(t, "  ETA %.1fs", s);
        add(t, "  %.0f tok/s", r->tokens_per_s);
        add_mfu(t, "  ", r->mfu, 0);
    } else {
        add(t, "step %*lld/%lld  loss %.6f", digits, (long long)r->step, (long long)steps,
            r->loss);
        if (unpaired)   /* TRL's kl and rewards/margins */
            add(t, "  kl %.4f  margin %.4f", r->kl, r->dpo_margin);
        else if (tr->dpo)   /* TRL's rewards/accuracies and rewards/margins */
            add(t, "  acc %.3f  margin %.4f", r->dpo_accuracy, r->dpo_margin);
        add(t, "  lr %.3e", r->lr);
        add(t, "  norm %7.4f", r->grad_norm);
        add(t, "  %8.1f ms", r->ms);
        add(t, "  %8.0f tok/s", r->tokens_per_s);
        add_mfu(t, "  ", r->mfu, 5);
    }
    for (int i = 0; i < read_memory(tr, &ms); i++)
        add_memory(t, &ms, i, 0);
}

/* This trainer's steps (none with steps 0) and the validations, a line each. */
static void add_run(const nnt_trainer *tr, nnt_text *t)
{
    nnt_trainer_info ti = NNT_TRAINER_INFO_INIT;
    nnt_trainer_info_get(tr, &ti);
    if (tr->o.steps > 0)
        add(t, "trained steps %lld..%lld in %.2f s", (long long)(tr->done + 1),
            (long long)(tr->done + tr->steps_run), tr->run_s);
    if (tr->o.steps > 0 && tr->steps_run > 1) {
        add(t, ": %.1f ms/step, %.0f tokens/s", ti.step_ms, ti.tokens_per_s);
        if (!isnan(ti.mfu))
            add_mfu(t, ", ", ti.mfu, 0);
        add(t, " (mean without the first step)");
    }
    if (tr->o.steps > 0 && tr->steps_run)
        add(t, "; last loss %.6f", tr->last_loss);
    if (ti.validations && tr->dpo)   /* (a DPO loss has no perplexity) */
        add(t, "%svalidation: %s loss %.6f at step %lld (lowest %.6f at step %lld)",
            t->n ? "\n" : "", nnt_dpo_kind(tr), ti.last_val_loss,
            (long long)ti.last_val_step,
            ti.lowest_val_loss, (long long)ti.lowest_val_step);
    else if (ti.validations && tr->labels)   /* (nor has a classifier's) */
        add(t, "%svalidation: classifier loss %.6f, accuracy %.4f at step %lld (lowest loss "
            "%.6f at step %lld)", t->n ? "\n" : "", ti.last_val_loss, tr->last_val_accuracy,
            (long long)ti.last_val_step, ti.lowest_val_loss, (long long)ti.lowest_val_step);
    else if (ti.validations && nnt_trainer_multi_label(tr))
        add(t, "%svalidation: %s loss %.6f, label accuracy %.4f, exact match %.4f, micro F1 "
            "%.4f at step %lld (lowest loss %.6f at step %lld)", t->n ? "\n" : "",
            nnt_trainer_values_kind(tr), ti.last_val_loss, tr->last_val_accuracy,
            tr->last_val_exact, tr->last_val_f1, (long long)ti.last_val_step,
            ti.lowest_val_loss, (long long)ti.lowest_val_step);
    else if (ti.validations && tr->values_k)   /* (nor a regression's) */
        add(t, "%svalidation: %s loss (MSE) %.6f, MAE %.6f at step %lld (lowest loss %.6f at "
            "step %lld)", t->n ? "\n" : "", nnt_trainer_values_kind(tr), ti.last_val_loss,
            tr->last_val_mae, (long long)ti.last_val_step, ti.lowest_val_loss,
            (long long)ti.lowest_val_step);
    else if (ti.validations)
        add(t, "%svalidation: loss %.6f (perplexity %.4g) at step %lld (lowest %.6f at step "
            "%lld)", t->n ? "\n" : "", ti.last_val_loss, exp(ti.last_val_loss),
            (long long)ti.last_val_step, ti.lowest_val_loss, (long long)ti.lowest_val_step);
    if (ti.validations && tr->validations_run)
        add(t, "; %lld validation%s in %.2f s%s", (long long)tr->validations_run,
            tr->validations_run > 1 ? "s" : "", tr->validation_s,
            tr->o.steps ? " of the training time" : "");
}

/* buf's lines broken before column width (a terminal's): after the last ", ", "; " or
 * "  " that fits past the labels' column, else the last space, else where they must; the
 * rest of a line goes on indented to column 11 (the labels'). */
static int wrap(char *buf, size_t cap, int width)
{
    const size_t indent = 11;
    size_t n = strlen(buf), o = 0;
    char *src = malloc(n + 1);
    if (!src)
        return NNT_E_NOMEM;
    memcpy(src, buf, n + 1);
    for (const char *s = src; *s;) {
        size_t len = strcspn(s, "\n"), col = 0;
        while (len + col >= (size_t)width) {   /* room: width - 1 - col */
            size_t room = (size_t)width - 1 - col, cut = 0, any = 0;
            for (size_t i = col <= indent ? indent + 1 - col : 1; i < room; i++)
                if (s[i] == ' ') {
                    any = i;
                    if (s[i - 1] == ',' || s[i - 1] == ';' || s[i + 1] == ' ')
                        cut = i;
                }
            cut = cut ? cut : any ? any : room;
            if (o + cut + indent + 2 >= cap)
                break;
            memcpy(buf + o, s, cut), o += cut;
            buf[o++] = '\n', memset(buf + o, ' ', indent), o += indent, col = indent;
            for (s += cut, len -= cut; len && *s == ' '; s++, len--)
                ;
        }
        if (o + len + 2 >= cap)
            return free(src), NNT_E_INVAL;
        memcpy(buf + o, s, len), o += len, s += len;
        if (*s == '\n')
            buf[o++] = *s++;
    }
    buf[o] = '\0';
    free(src);
    return NNT_OK;
}

NNT_API int nnt_trainer_text(const nnt_trainer *tr, nnt_trainer_text_kind what,
                             const nnt_trainer_report *report, int width, char *buf, size_t cap)
{
    const char *fn = "nnt_trainer_text";
    NNT_TRY(nnt_trainer_check(tr, fn));
    int on_report = what == NNT_TRAINER_TEXT_REPORT || what == NNT_TRAINER_TEXT_LIVE;
    if (!buf || !cap || (on_report && !report) || (unsigned)what > NNT_TRAINER_TEXT_FILES)
        return nnt_fail(tr->ctx, NNT_E_INVAL, "%s: buf NULL, cap 0, no report for a report's "
                        "line, or what %d unknown", fn, (int)what);
    nnt_text t = {buf, cap, 0, on_report ? width : 0, 0, 0};
    nnt_mem_stats ms;
    buf[0] = '\0';
    if (what == NNT_TRAINER_TEXT_MODEL)
        nnt_trainer_text_model(tr, &t);
    else if (on_report)
        add_report(tr, &t, report, what == NNT_TRAINER_TEXT_LIVE);
    else if (what == NNT_TRAINER_TEXT_RUN)
        add_run(tr, &t);
    else if (what == NNT_TRAINER_TEXT_SUMMARY)
        nnt_trainer_text_summary(tr, &t);
    else if (what == NNT_TRAINER_TEXT_WARNINGS)
        nnt_trainer_text_warnings(tr, &t);
    else if (what == NNT_TRAINER_TEXT_FILES)
        nnt_trainer_text_files(tr, &t);
    else if (read_memory(tr, &ms)) {   /* since the runtime started */
        char moved[32];
        for (int i = 0; i < ms.nnodes; i++)
            add_memory(&t, &ms, i, 1);
        int64_t packs = 0;
        nnt_gemm_kept_bytes(NULL, &packs);
        if (packs > 0) {   /* outside the nodes' counts (lib/ops/gemm.c) */
            char packed[32];
            format_bytes(packed, sizeof packed, packs);
            add(&t, ", and %s of packed weights kept for the products", packed);
        }
        struct rusage ru;   /* with the libraries, buffers and heap outside the nodes' counts */
        if (getrusage(RUSAGE_SELF, &ru) == 0 && ru.ru_maxrss > 0) {
            char resident[32];
            format_bytes(resident, sizeof resident, (int64_t)ru.ru_maxrss * 1024);
            add(&t, "; process peak %s resident", resident);
        }
        format_bytes(moved, sizeof moved, ms.bytes_moved);
        add(&t, "; %s moved between nodes", moved);
        if (ms.bytes_to_disk || ms.bytes_from_disk) {
            char down[32], up[32];
            format_bytes(down, sizeof down, ms.bytes_to_disk);
            format_bytes(up, sizeof up, ms.bytes_from_disk);
            add(&t, " (%s written to disk, %s read back)", down, up);
            add_by_kind(&t, "written to disk", ms.to_disk_by);
            add_by_kind(&t, "read back", ms.from_disk_by);
        }
        add_by_kind(&t, "to the GPUs", ms.to_gpu_by);
        add_by_kind(&t, "back from them", ms.from_gpu_by);
        add(&t, "; %.3f s of worker time waiting for data", ms.transfer_wait_s);
    }
    int rc = t.overflow ? NNT_E_INVAL : NNT_OK;
    if (!rc && !on_report && width >= 24)
        rc = wrap(buf, cap, width);
    if (rc == NNT_E_NOMEM)
        return nnt_fail(tr->ctx, rc, "%s: out of memory", fn);
    if (rc)
        return nnt_fail(tr->ctx, NNT_E_INVAL, "%s: the text does not fit in %zu bytes", fn, cap);
    return NNT_OK;
}
