// SPDX-License-Identifier: MIT
/* LoRA adapters of a model (nnt_model_lora_add, _merge, nnt_model_save_peft, _load_peft): which
 * modules get one (Hugging Face module names, as PEFT's target_modules match them), the PEFT
 * files. The adapters' math is lib/layers/lora.c's; the layers that hold them (linear,
 * attention) list the modules they can carry (gl_lora_modules).
 *
 * A module's name is its path in the model tree ("model.layers.0.self_attn.q_proj",
 * "h.0.attn.c_attn"), its Hugging Face name the family's prefix before it
 * ("transformer.h.0.attn.c_attn"), its PEFT tensors "base_model.model.<HF name>.lora_A.weight"
 * (r, in) and ".lora_B.weight" (out, r), 2-D as PEFT's nn.Linear adapters (GPT-2's Conv1D
 * modules too: PEFT transposes only when merging). GPT-2's c_attn B (3C, r) holds nnt's q, k
 * and v parts one after the other, as c_attn's own weight holds q, k and v. */
#include "models.h"
#include "family.h"

#include "../io/io.h"
#include "../layers/generic.h"

#include <errno.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define PEFT_PREFIX "base_model.model."
#define PEFT_CONFIG "adapter_config.json"
#define PEFT_WEIGHTS "adapter_model.safetensors"
#define MODULE_MAX 512
#define HEAD NNT_CLASSIFIER_HEAD   /* a classifier's head: trained whole beside the adapters */

/* ---- the modules of a model ------------------------------------------------------------- */

/* One module an adapter can go on: the layer holding it, its name there ("" for a linear
 * layer itself), its path in the tree and its Hugging Face name. */
typedef struct lora_module {
    nnt_layer *layer;
    const char *name;
    char path[MODULE_MAX], hf[MODULE_MAX];
    int top;                  /* a child of the model itself (lm_head) */
    nnt_layer *moe;           /* an expert's module: its MoE layer (NULL: none)             */
    int64_t expert;           /* its expert (-1: not an expert's)                          */
    int router;               /* a MoE layer's router                                       */
    int interleaved;          /* an expert's: the stack's gate and up rows alternate
                                 (gpt-oss), not gate's then up's (transformers 5's)          */
    char param[MODULE_MAX + 16];   /* PEFT's target parameter: an expert's module its
                                      stacked tensor's HF name
                                      ("model.layers.0.mlp.experts.gate_up_proj"), a router
                                      its weight's; else ""                                 */
} lora_module;

typedef int (*module_fn)(const lora_module *m, void *arg);

/* How a family names the modules in its files: its prefix and its renames (hf_rename). */
typedef struct module_naming {
    const nnt_family *f;
    const nnt_model_config *cfg;
} module_naming;

/* Whether m is a classifier's head (a child of the model itself). */
static int is_score(const lora_module *m)
{
    return m->top && strcmp(m->path, HEAD) == 0;
}

/* m's Hugging Face name: the family's prefix and its name for the module's path (a
 * classifier's head: "score" in every family's files). */
static void module_hf_name(const module_naming *mn, lora_module *m)
{
    if (is_score(m)) {
        snprintf(m->hf, sizeof m->hf, "%s", HEAD);
        return;
    }
    char renamed[MODULE_MAX];
    snprintf(renamed, sizeof renamed, "%s", m->path);
    if (mn->f->hf_rename)
        mn->f->hf_rename(mn->cfg, m->path, renamed, sizeof renamed);
    snprintf(m->hf, sizeof m->hf, "%s%s", mn->f->hf_prefix ? mn->f->hf_prefix : "", renamed);
}

/* Where a module lies under a MoE layer (each_module_in): its MoE layer and expert, or the
 * router. */
typedef struct moe_place {
    nnt_layer *moe;
    int64_t expert;
    int router;
} moe_place;

/* An expert's module m (path "<block>.mlp.experts.<e>.gate_up_proj" or "...down_proj"): the
 * HF name of the stacked tensor its adapter is part of, and whether that stack interleaves
 * gate and up (the family stacks expert 0's gate_proj in a file tensor of its own: gpt-oss). */
static void expert_param_name(const module_naming *mn, lora_module *m)
{
    const char *x = strstr(m->path, ".experts."), *after = x ? x + 9 : NULL;
    while (after && *after >= '0' && *after <= '9')
        after++;
    if (!x || !after || *after != '.') {
        m->param[0] = '\0';
        return;
    }
    snprintf(m->param, sizeof m->param, "%s%.*s.experts.%s",
             mn->f->hf_prefix ? mn->f->hf_prefix : "", (int)(x - m->path), m->path, after + 1);
    char gate[MODULE_MAX + 32];
    nnt_hf_stack stack;
    snprintf(gate, sizeof gate, "%.*s.experts.0.gate_proj.weight", (int)(x - m->path), m->path);
    m->interleaved = mn->f->hf_stack && mn->f->hf_stack(mn->cfg, gate, &stack) == 1;
}

static int each_module_in(nnt_layer *l, const char *prefix, const module_naming *mn, int depth,
                          moe_place place, module_fn f, void *arg)
{
    const char *const *mods = gl_lora_modules(l);
    for (int i = 0; mods && mods[i]; i++) {
        lora_module m = {l, mods[i], "", "", depth == 1, place.moe, place.expert, place.router,
                         0, ""};
        size_t n = strlen(prefix);
        if (mods[i][0])
            snprintf(m.path, sizeof m.path, "%s%s", prefix, mods[i]);
        else   /* the layer itself: its path without the trailing dot */
            snprintf(m.path, sizeof m.path, "%.*s", (int)(n ? n - 1 : 0), prefix);
        module_hf_name(mn, &m);
        if (m.expert >= 0)
            expert_param_name(mn, &m);
        else if (m.router) {   /* by transformers 5's name (Mixtral's too: "mlp.gate") */
            snprintf(m.hf, sizeof m.hf, "%s%s", mn->f->hf_prefix ? mn->f->hf_prefix : "",
                     m.path);
            snprintf(m.param, sizeof m.param, "%s.weight", m.hf);
        }
        NNT_TRY(f(&m, arg));
    }
    int64_t E = gl_moe_experts(l);
    for (int c = 0; c < l->nchildren; c++) {
        char sub[MODULE_MAX];
        const char *name = l->child_names[c];
        snprintf(sub, sizeof sub, "%s%s%s", prefix, name, name[0] ? "." : "");
        moe_place below = place;
        if (E > 0)   /* the router, the experts, the shared expert's layers */
            below = (moe_place){c >= 1 && c <= E ? l : NULL, c >= 1 && c <= E ? c - 1 : -1,
                                c == 0};
        NNT_TRY(each_module_in(l->children[c], sub, mn, depth + 1, below, f, arg));
    }
    return NNT_OK;
}

/* The tree that holds a model's layers (a GPT layer's tree, or the model itself) and the
 * Hugging Face prefix of its family; NNT_E_INVAL naming fn for a layer that is no model. */
static int tree_of(nnt_layer *model, const char *fn, nnt_layer **tree, const nnt_family **f)
{
    nnt_model_config cfg;
    NNT_TRY(nnt_model_config_get(model, fn, &cfg));
    *tree = model->vt->inner ? model->vt->inner(model) : model;
    *f = nnt_family_find(cfg.family);
    return NNT_OK;
}

static int each_module(nnt_layer *model, const nnt_family *f, module_fn fn, void *arg)
{
    nnt_layer *tree = model->vt->inner ? model->vt->inner(model) : model;
    nnt_model_config cfg;
    NNT_TRY(nnt_model_config_get(model, "nnt_model_lora", &cfg));
    module_naming mn = {f, &cfg};
    return each_module_in(tree, "", &mn, 0, (moe_place){NULL, -1, 0}, fn, arg);
}

/* ---- targets ------------------------------------------------------------------------------ */

/* A comma-separated list of module names (PEFT's target_modules as a list): a module is a
 * target when its Hugging Face name is one of them or ends with "." and one; "all-linear":
 * every module but the model's own lm_head (PEFT's shorthand). The experts of a MoE layer are
 * targets through the names of their stacked tensors (PEFT's target_parameters), those ending
 * with "experts.gate_up_proj" or "experts.down_proj" (all the experts of a block together);
 * a router also through its weight's name ("mlp.gate.weight"). */
typedef struct targets {
    char *list;               /* the names, NUL-separated                                  */
    int n, all_linear;
    int hits[64];             /* modules each name matched                                  */
    const char *names[64];
} targets;

static int targets_parse(nnt_ctx *ctx, const char *fn, const char *text, targets *t)
{
    memset(t, 0, sizeof *t);
    if (strcmp(text, "all-linear") == 0) {
        t->all_linear = 1;
        return NNT_OK;
    }
    t->list = malloc(strlen(text) + 1);
    if (!t->list)
        return nnt_fail(ctx, NNT_E_NOMEM, "%s: out of memory", fn);
    memcpy(t->list, text, strlen(text) + 1);
    for (char *s = t->list; s;) {
        char *comma = strchr(s, ',');
        if (comma)
            *comma = '\0';
        while (*s == ' ')
            s++;
        size_t n = strlen(s);
        while (n && s[n - 1] == ' ')
            s[--n] = '\0';
        if (!*s || t->n == 64) {
            free(t->list);
            return nnt_fail(ctx, NNT_E_INVAL, "%s: targets '%s': %s", fn, text,
                            *s ? "more than 64 names" : "an empty name");
        }
        t->names[t->n++] = s;
        s = comma ? comma + 1 : NULL;
    }
    return NNT_OK;
}

static int ends_with_name(const char *path, const char *name)
{
    size_t n = strlen(path), k = strlen(name);
    return n == k ? strcmp(path, name) == 0
                  : n > k && path[n - k - 1] == '.' && strcmp(path + n - k, name) == 0;
}

/* 1 when name names experts' stacked tensors: "...experts.gate_up_proj", "...experts.down_proj" */
static int expert_target(const char *name)
{
    return ends_with_name(name, "experts.gate_up_proj") ||
           ends_with_name(name, "experts.down_proj");
}

/* Whether m is a model's output head: its lm_head, a classifier's score. */
static int is_head(const lora_module *m)
{
    return is_score(m) || (m->top && strcmp(m->path, "lm_head") == 0);
}

/* Whether m is a target (its name counted). */
static int targets_match(targets *t, const lora_module *m)
{
    if (t->all_linear)   /* (PEFT leaves the output layer out) */
        return !is_head(m);
    int hit = 0;
    for (int i = 0; i < t->n; i++) {
        int yes = m->expert >= 0 ? expert_target(t->names[i]) &&
                                       ends_with_name(m->param, t->names[i])
                                 : ends_with_name(m->hf, t->names[i]) ||
                                       (m->router && ends_with_name(m->param, t->names[i]));
        if (yes && m->expert <= 0)   /* (a stack's name counts once a block) */
            t->hits[i]++;
        hit |= yes;
    }
    return hit;
}

/* ---- adding -------------------------------------------------------------------------------- */

/* PEFT's rank_pattern and alpha_pattern: a module's rank or alpha by the last names of its
 * name (a module's, an expert stack's or a router weight's), as PEFT's "(.*\.)?(KEY)$"
 * matches them; keys "NAME" and ".*\.NAME" (\. for a dot), no other regular expression. */
typedef struct lora_patterns {
    int n;
    char name[16][MODULE_MAX];
    double value[16];
    int rank[16];             /* a rank (else an alpha) */
} lora_patterns;

/* The value of the first pattern of kind rank (1) or alpha (0) m's names end with, or dflt */
static double pattern_of(const lora_patterns *p, const lora_module *m, int rank, double dflt)
{
    for (int i = 0; p && i < p->n; i++)
        if (p->rank[i] == rank && (ends_with_name(m->hf, p->name[i]) ||
                                   (m->param[0] && ends_with_name(m->param, p->name[i]))))
            return p->value[i];
    return dflt;
}

typedef struct add_pass {
    targets *t;
    int attach;               /* 0: count the matches; 1: attach */
    int64_t rank;
    double alpha, dropout;
    int rslora, dora;
    const lora_patterns *pat; /* PEFT's rank_pattern and alpha_pattern (NULL: none) */
    uint64_t seed;
    int64_t matched;
    char seen[1024];          /* module names of the model, for messages */
} add_pass;

static int add_one(const lora_module *m, void *arg)
{
    add_pass *a = arg;
    const char *last = strrchr(m->hf, '.');   /* the family's name of the module */
    last = last ? last + 1 : m->hf;
    char named[MODULE_MAX + 32];   /* the experts' by their stacks' names */
    if (m->expert >= 0) {   /* (not the family's per-expert names: Mixtral's w2) */
        const char *stack = strrchr(m->param, '.');
        snprintf(named, sizeof named, "experts.%s", stack ? stack + 1 : m->param), last = named;
    }
    if (!strstr(a->seen, last) && strlen(a->seen) + strlen(last) + 3 < sizeof a->seen)
        snprintf(a->seen + strlen(a->seen), sizeof a->seen - strlen(a->seen), "%s%s",
                 a->seen[0] ? ", " : "", last);
    if (!targets_match(a->t, m))
        return NNT_OK;
    if (is_score(m))
        return nnt_fail(m->layer->ctx, NNT_E_INVAL, "nnt_model_lora_add: target '%s' is the "
                        "classifier's head, trained whole beside the adapters (PEFT's "
                        "modules_to_save), not adapted", HEAD);
    a->matched++;
    if (m->expert >= 0 && a->dropout > 0)
        return nnt_fail(m->layer->ctx, NNT_E_INVAL, "nnt_model_lora_add: lora_dropout %g on "
                        "the experts' %s: PEFT adapts the experts' stacked tensors without "
                        "dropout (its target_parameters refuse it)", a->dropout, m->param);
    if (m->expert >= 0 && a->dora)
        return nnt_fail(m->layer->ctx, NNT_E_UNSUPPORTED, "nnt_model_lora_add: DoRA on the "
                        "experts' %s: PEFT adapts the experts' stacked tensors without DoRA "
                        "(its target_parameters)", m->param);
    if (!a->attach)
        return NNT_OK;
    double r = pattern_of(a->pat, m, 1, (double)a->rank), alpha = pattern_of(a->pat, m, 0,
                                                                               a->alpha);
    NNT_TRY(gl_lora_attach(m->layer, m->name, (int64_t)r,
                           a->rslora ? alpha / sqrt(r) : alpha / r));
    gl_lora *lo = gl_lora_of(m->layer, m->name);
    uint64_t h = 0xcbf29ce484222325ull;   /* each module its own masks: FNV-1a of its name */
    for (const unsigned char *c = (const unsigned char *)m->path; *c; c++)
        h = (h ^ *c) * 0x100000001b3ull;
    lo->dropout = a->dropout;
    lo->seed = a->seed ^ h;
    return a->dora ? gl_lora_dora_add(m->layer, lo) : NNT_OK;
}

static int dora_init_one(const lora_module *m, void *arg)
{
    (void)arg;
    gl_lora *lo = gl_lora_of(m->layer, m->name);
    return lo ? gl_lora_dora_init(m->layer, lo) : NNT_OK;
}

static int read_lora_options(nnt_ctx *ctx, const char *fn, const nnt_lora_options *user,
                             nnt_lora_options *o)
{
    static const nnt_lora_options defaults = NNT_LORA_OPTIONS_INIT;
    static const size_t older[] = {offsetof(nnt_lora_options, dora)};   /* 0.3 */
    NNT_TRY(nnt_read_options_sizes(fn, user, &defaults, o, sizeof *o, older,
                                   sizeof older / sizeof older[0],
                                   "initialise them with NNT_LORA_OPTIONS_INIT"));
    if (o->rank < 1 || o->rank > 65536)
        return nnt_fail(ctx, NNT_E_INVAL, "%s: rank %lld must be in [1, 65536]", fn,
                        (long long)o->rank);
    if (!(o->alpha > 0.0) || !isfinite(o->alpha))
        return nnt_fail(ctx, NNT_E_INVAL, "%s: alpha %g must be finite and > 0", fn, o->alpha);
    if (!(o->dropout >= 0.0 && o->dropout < 1.0))
        return nnt_fail(ctx, NNT_E_INVAL, "%s: dropout %g must be in [0, 1)", fn, o->dropout);
    if (o->dora != 0 && o->dora != 1)
        return nnt_fail(ctx, NNT_E_INVAL, "%s: dora %d is neither 0 nor 1", fn, o->dora);
    return NNT_OK;
}

/* A backward pending from the last forward cannot run once adapters come or go (their
 * activations): it is refused (NNT_E_STATE) as one without a forward. */
static void cancel_backward(nnt_layer *model)
{
    model->forward_pending = 0;
    nnt_gpt_cancel_backward(model);
}

/* A classifier's head weight ("score.weight"), NULL for a language model. */
static nnt_layer_param_rec *head_param(nnt_layer *tree)
{
    int64_t count = 0;
    if (nnt_layer_num_params(tree, &count, NULL))
        return NULL;
    for (int64_t i = 0; i < count; i++)
        if (strcmp(tree->listed_names[i], HEAD ".weight") == 0)
            return nnt_layer_listed(tree, i);
    return NULL;
}

/* Every parameter but the adapters and keep (a classifier's head, trained whole; NULL: none)
 * frozen (PEFT's get_peft_model) in mode (an nnt_freeze_mode); those frozen already left as
 * they are. check: only whether each fits NF4 (NNT_FREEZE_NF4), nothing changed. */
static int freeze_base(nnt_layer *tree, int mode, int check, const char *fn,
                       const nnt_layer_param_rec *keep)
{
    int64_t count = 0;
    NNT_TRY(nnt_layer_num_params(tree, &count, NULL));
    for (int64_t i = 0; i < count; i++) {
        nnt_layer_param_rec *p = nnt_layer_listed(tree, i);
        if (p->adapter || p->frozen)
            continue;
        if (p == keep)   /* a classifier's head, trained whole */
            continue;
        if (!check)
            NNT_TRY(nnt_layer_set_frozen(tree, p, mode));
        else if (mode == NNT_FREEZE_NF4)
            NNT_TRY(nnt_layer_nf4_fits(tree, p, tree->listed_names[i], fn));
    }
    return NNT_OK;
}

static void unload(nnt_layer *l);

/* Adapters on the targets of o (checked) in model, with A initialised from o->seed and B zero;
 * targets that match no module refused before anything changes. head: a classifier's head
 * is trained whole beside them (unfrozen, never frozen by o->freeze_base) and saved with them
 * (PEFT's modules_to_save). */
static int lora_add(nnt_layer *model, const char *fn, const nnt_lora_options *o,
                    const char *targets_text, const lora_patterns *pat, int head)
{
    nnt_layer *tree = NULL;
    const nnt_family *f = NULL;
    NNT_TRY(tree_of(model, fn, &tree, &f));
    nnt_model_lora *st = nnt_model_lora_of(tree);
    if (st->on)
        return nnt_fail(model->ctx, NNT_E_STATE, "%s: the model has LoRA adapters already "
                        "(merge them first: nnt_model_lora_merge)", fn);
    nnt_layer_param_rec *keep = head ? head_param(tree) : NULL;
    if (head && !keep)
        return nnt_fail(model->ctx, NNT_E_INVAL, "%s: the model has no classifier's head "
                        "(%s.weight) to train beside the adapters", fn, HEAD);
    cancel_backward(model);
    if (o->freeze_base)   /* the base fits NF4, before anything changes */
        NNT_TRY(freeze_base(tree, nnt_layer_freeze_mode(o->freeze_base), 1, fn, keep));
    targets t;
    NNT_TRY(targets_parse(model->ctx, fn, targets_text, &t));
    add_pass a = {&t, 0, o->rank, o->alpha, o->dropout, o->rslora != 0, o->dora, pat, o->seed,
                  0, ""};
    int rc = each_module(model, f, add_one, &a);
    for (int i = 0; rc == 0 && i < t.n; i++)
        if (t.hits[i] == 0)
            rc = nnt_fail(model->ctx, NNT_E_INVAL, "%s: target module '%s' matches no module of "
                          "this %s model (its modules: %s; or all-linear)", fn, t.names[i],
                          f->title, a.seen);
    if (rc == 0 && a.matched == 0)
        rc = nnt_fail(model->ctx, NNT_E_INVAL, "%s: no module to adapt", fn);
    if (rc == 0) {
        a.attach = 1;
        a.matched = 0;
        rc = each_module(model, f, add_one, &a);
    }
    free(t.list);
    nnt_layer_params_changed(tree);
    if (rc == 0)
        rc = nnt_layer_init_adapters(tree, o->seed);
    if (rc == 0 && o->dora)   /* the magnitudes: the base rows' norms */
        rc = each_module(model, f, dora_init_one, NULL);
    if (rc == 0 && o->freeze_base)
        rc = freeze_base(tree, nnt_layer_freeze_mode(o->freeze_base), 0, fn, keep);
    if (rc == 0 && keep && keep->frozen)   /* PEFT's modules_to_save are trained */
        rc = nnt_layer_set_frozen(tree, keep, NNT_UNFREEZE);
    if (rc == 0 && model->vt->reregister)
        rc = model->vt->reregister(model);
    if (rc && a.attach) {   /* no adapter left behind (out of memory, ...) */
        unload(tree);
        nnt_layer_params_changed(tree);
    }
    if (rc == 0) {
        st->on = 1;
        st->head = head;
        st->rank = o->rank;
        st->alpha = o->alpha;
        st->rslora = o->rslora != 0;
        st->dropout = o->dropout;
        st->dora = o->dora;
        snprintf(st->targets, sizeof st->targets, "%s", targets_text);
        st->rank_pattern[0] = st->alpha_pattern[0] = '\0';
    }
    return rc;
}

NNT_API int nnt_model_lora_add(nnt_layer *model, const nnt_lora_options *opts)
{
    const char *fn = "nnt_model_lora_add";
    NNT_TRY(nnt_layer_check(model, fn));
    nnt_lora_options o;
    NNT_TRY(read_lora_options(model->ctx, fn, opts, &o));
    nnt_layer *tree = NULL;
    const nnt_family *f = NULL;
    NNT_TRY(tree_of(model, fn, &tree, &f));
    nnt_model_config cfg;
    NNT_TRY(nnt_model_config_get(model, fn, &cfg));
    const char *targets = o.targets          ? o.targets
                          : f->lora_targets ? f->lora_targets
                                            : "all-linear";
    /* a classifier's head trained whole (PEFT's task_type SEQ_CLS: modules_to_save) */
    return lora_add(model, fn, &o, targets, NULL, cfg.num_labels > 0);
}

/* ---- merging --------------------------------------------------------------------------------- */

static int merge_tree(nnt_layer *l)
{
    NNT_TRY(gl_lora_merge_all(l));
    for (int c = 0; c < l->nchildren; c++)
        NNT_TRY(merge_tree(l->children[c]));
    return NNT_OK;
}

NNT_API int nnt_model_lora_merge(nnt_layer *model)
{
    const char *fn = "nnt_model_lora_merge";
    NNT_TRY(nnt_layer_check(model, fn));
    nnt_layer *tree = NULL;
    const nnt_family *f = NULL;
    NNT_TRY(tree_of(model, fn, &tree, &f));
    nnt_model_lora *st = nnt_model_lora_of(tree);
    if (!st->on)
        return nnt_fail(model->ctx, NNT_E_STATE, "%s: the model has no LoRA adapter", fn);
    cancel_backward(model);
    /* W += s B A in full float, whatever the products' precision */
    nnt_precision precision = NNT_PRECISION_FP32;
    NNT_TRY(nnt_ctx_precision(model->ctx, &precision));
    NNT_TRY(nnt_ctx_set_precision(model->ctx, NNT_PRECISION_FP32));
    int rc = merge_tree(tree);
    nnt_ctx_set_precision(model->ctx, precision);
    nnt_layer_params_changed(tree);
    if (rc == 0 && model->vt->reregister)
        rc = model->vt->reregister(model);
    if (rc == 0)
        st->on = st->head = 0;   /* (a classifier's head is the model's own) */
    return rc;
}

int nnt_model_lora_head(nnt_layer *model)
{
    nnt_layer *tree = model->vt->inner ? model->vt->inner(model) : model;
    const nnt_model_lora *st = nnt_model_lora_of(tree);
    return st && st->on && st->head;
}

NNT_API int nnt_model_lora_get(const nnt_layer *model, nnt_lora_options *opts)
{
    const char *fn = "nnt_model_lora_get";
    NNT_TRY(nnt_layer_check(model, fn));
    if (!opts || opts->size < offsetof(nnt_lora_options, dora))
        return nnt_fail(model->ctx, NNT_E_INVAL, "%s: opts is NULL or its size is not set "
                        "(NNT_LORA_OPTIONS_INIT)", fn);
    nnt_layer *tree = NULL;
    const nnt_family *f = NULL;
    NNT_TRY(tree_of((nnt_layer *)model, fn, &tree, &f));
    nnt_model_lora *st = nnt_model_lora_of(tree);
    if (!st->on)
        return nnt_fail(model->ctx, NNT_E_STATE, "%s: the model has no LoRA adapter", fn);
    opts->rank = st->rank;
    opts->alpha = st->alpha;
    opts->rslora = st->rslora;
    opts->dropout = st->dropout;
    opts->targets = st->targets;
    if (opts->size >= offsetof(nnt_lora_options, dora) + sizeof opts->dora)
        opts->dora = st->dora;
    return NNT_OK;
}

/* ---- the PEFT tensors ----------------------------------------------------------------------- */

/* What a pass over the adapters of a model does with each: its two PEFT tensors. */
typedef struct peft_tensor {
    char name[MODULE_MAX + 48];
    int64_t rows, cols;       /* PEFT's 2-D shape                                          */
    nnt_tensor *part[3];      /* nnt's tensors whose data follow one another in it         */
    int nparts;
    int64_t part_n[3];        /* the parts' elements                                       */
    int64_t groups;           /* > 0: in the file the parts' rows go key/value head by key/value
                                 head (GPT-NeoX's query_key_value, GPT-BigCode's c_attn:
                                 nnt_rows_by_group)                                         */
    nnt_layer *moe;           /* an experts' stack (stack_io; part[] unused): its MoE layer */
    int stack;                /* 1 gate_up_proj, 2 down_proj                                */
    int is_b;                 /* its lora_B (else lora_A)                                   */
    int interleaved;          /* gate_up's rows: gate's and up's alternate                  */
    int vector;               /* 1-D (rows): DoRA's lora_magnitude_vector                   */
} peft_tensor;

typedef int (*peft_fn)(const peft_tensor *t, void *arg);

typedef struct peft_pass {
    peft_fn fn;
    void *arg;
    const nnt_family *f;
} peft_pass;

static int64_t numel_of(const nnt_tensor *t)
{
    return nnt_box_numel(t->ndim, t->shape);
}

/* Expert e's adapter of a MoE layer's stack (1 gate_up_proj, 2 down_proj), or NULL */
static gl_lora *expert_lora(nnt_layer *moe, int stack, int64_t e)
{
    nnt_layer *x = moe->children[1 + e];   /* a SwiGLU MLP: gate_proj, up_proj, down_proj */
    return stack == 1 ? gl_lora_of(x, "gate_up_proj") : gl_lora_of(x->children[2], "");
}

/* The PEFT tensors of the experts' stack whose expert 0's module is m: PEFT's adapter of a
 * 3-D parameter, E adapters of rank r in two tensors, "<block>.mlp.experts.lora_A.weight"
 * (E r, in), expert e's A rows e r .. e r + r - 1, and ".lora_B.weight" (out, r E), expert
 * e's B column j its column j E + e (PEFT's ParamWrapper); gate_up_proj's under
 * "experts.base_layer." when down_proj has adapters too (PEFT nests its wrappers so). */
static int peft_of_stack(const lora_module *m, peft_pass *p)
{
    int gate_up = strcmp(m->name, "gate_up_proj") == 0;
    gl_lora *lo = gl_lora_of(m->layer, m->name);
    int64_t E = gl_moe_experts(m->moe), r = lo->a->shape[0], out = 0;
    for (int i = 0; i < lo->nparts; i++)
        out += numel_of(lo->b[i]) / r;
    int nested = gate_up && expert_lora(m->moe, 2, 0) != NULL;
    size_t stem = strlen(m->param) - strlen(gate_up ? ".gate_up_proj" : ".down_proj");
    peft_tensor a = {"", r * E, numel_of(lo->a) / r, {NULL}, 0, {0}, 0, m->moe,
                     gate_up ? 1 : 2, 0, m->interleaved, 0};
    peft_tensor b = a;
    snprintf(a.name, sizeof a.name, PEFT_PREFIX "%.*s%s.lora_A.weight", (int)stem, m->param,
             nested ? ".base_layer" : "");
    snprintf(b.name, sizeof b.name, PEFT_PREFIX "%.*s%s.lora_B.weight", (int)stem, m->param,
             nested ? ".base_layer" : "");
    b.rows = out, b.cols = r * E, b.is_b = 1;
    NNT_TRY(p->fn(&a, p->arg));
    return p->fn(&b, p->arg);
}

/* The PEFT tensors of module m's adapter (none without one). */
static int peft_of_module(const lora_module *m, void *arg)
{
    peft_pass *p = arg;
    gl_lora *lo = gl_lora_of(m->layer, m->name);
    if (!lo || m->expert > 0)   /* (the experts of a block: one stack, with expert 0) */
        return NNT_OK;
    if (m->expert == 0)
        return peft_of_stack(m, p);
    peft_tensor a = {"", lo->a->shape[0], numel_of(lo->a) / lo->a->shape[0], {lo->a}, 1,
                     {numel_of(lo->a)}, 0, NULL, 0, 0, 0, 0};
    snprintf(a.name, sizeof a.name, PEFT_PREFIX "%s.lora_A.weight", m->hf);
    NNT_TRY(p->fn(&a, p->arg));
    peft_tensor b = {"", 0, lo->a->shape[0], {NULL}, lo->nparts, {0}, 0, NULL, 0, 0, 0, 0};
    if (p->f->layout.fused_lora == 2 && lo->nparts == 3)   /* q (NH, hd, r), k, v (NKV, hd, r) */
        b.groups = lo->b[1]->shape[0];
    snprintf(b.name, sizeof b.name, PEFT_PREFIX "%s.lora_B.weight", m->hf);
    peft_tensor mag = b;   /* DoRA's (out): its rows as B's */
    snprintf(mag.name, sizeof mag.name, PEFT_PREFIX "%s.lora_magnitude_vector", m->hf);
    mag.cols = 1, mag.vector = 1;
    for (int i = 0; i < lo->nparts; i++) {
        b.part[i] = lo->b[i];
        b.part_n[i] = numel_of(lo->b[i]);
        b.rows += b.part_n[i] / lo->a->shape[0];
        mag.part[i] = lo->m[i];
        mag.part_n[i] = b.part_n[i] / lo->a->shape[0];
    }
    mag.rows = b.rows;
    NNT_TRY(p->fn(&b, p->arg));
    return lo->dora ? p->fn(&mag, p->arg) : NNT_OK;
}

/* The PEFT tensors of a model's adapters, then its classifier's head when it is trained
 * beside them (PEFT's modules_to_save: "base_model.model.score.weight", (num_labels, C)). */
static int each_peft(nnt_layer *model, const nnt_family *f, peft_fn fn, void *arg)
{
    peft_pass p = {fn, arg, f};
    NNT_TRY(each_module(model, f, peft_of_module, &p));
    nnt_layer *tree = model->vt->inner ? model->vt->inner(model) : model;
    nnt_layer_param_rec *hp = nnt_model_lora_of(tree)->head ? head_param(tree) : NULL;
    if (!hp)
        return NNT_OK;
    int64_t n = numel_of(hp->value);
    peft_tensor h = {PEFT_PREFIX HEAD ".weight", hp->value->shape[0], n / hp->value->shape[0],
                     {hp->value}, 1, {n}, 0, NULL, 0, 0, 0, 0};
    return fn(&h, arg);
}

/* The tensors part[0..n) one after the other in buf: copied into it (load 0) or from it */
static int parts_io(nnt_tensor *const *part, int n, float *buf, int load)
{
    for (int i = 0; i < n; buf += numel_of(part[i]), i++) {
        size_t bytes = (size_t)numel_of(part[i]) * sizeof *buf;
        NNT_TRY(load ? nnt_tensor_copy_from_host(part[i], buf, bytes)
                     : nnt_tensor_copy_to_host(part[i], buf, bytes));
    }
    return NNT_OK;
}

/* Between an experts' stack of the file (buf, t->rows x t->cols floats) and the experts'
 * adapters: A's rows expert after expert; B's column j E + e expert e's column j, its rows
 * the parts' (gate_up_proj: gate's then up's, or alternating when interleaved). */
static int stack_io(const peft_tensor *t, float *buf, int load)
{
    int64_t E = gl_moe_experts(t->moe), r = t->is_b ? t->cols / E : t->rows / E;
    int64_t n = t->is_b ? t->rows * r : r * t->cols;   /* one expert's elements */
    float *one = malloc((size_t)n * sizeof *one + 1);
    if (!one)
        return nnt_fail(t->moe->ctx, NNT_E_NOMEM, "nnt_model_save_peft: out of memory");
    int rc = NNT_OK;
    for (int64_t e = 0; rc == 0 && e < E; e++) {
        gl_lora *lo = expert_lora(t->moe, t->stack, e);
        if (!t->is_b) {   /* A_e (r, in): rows e r .. */
            rc = parts_io(&lo->a, 1, buf + e * n, load);
            continue;
        }
        int64_t half = lo->nparts == 2 ? numel_of(lo->b[0]) / r : t->rows;   /* gate's rows */
        if (!load)
            rc = parts_io(lo->b, lo->nparts, one, 0);
        for (int64_t o = 0; rc == 0 && o < t->rows; o++) {
            /* file row o: part p's row q, in one (the parts one after the other) */
            int64_t p = lo->nparts == 1 ? 0 : t->interleaved ? o % 2 : o / half;
            int64_t q = lo->nparts == 1 ? o : t->interleaved ? o / 2 : o % half;
            float *mine = one + (p * half + q) * r, *file = buf + o * t->cols + e;
            for (int64_t j = 0; j < r; j++) {
                if (load)
                    mine[j] = file[j * E];
                else
                    file[j * E] = mine[j];
            }
        }
        if (rc == 0 && load)
            rc = parts_io(lo->b, lo->nparts, one, 1);
    }
    free(one);
    return rc;
}

/* ---- saving ------------------------------------------------------------------------------ */

typedef struct peft_save {
    nnt_st_writer *w;
    float *buf, *tmp;           /* tmp: the rows of a per-head tensor reordered */
    int64_t most;
    int regroups;               /* a declared tensor's rows go head by head: tmp is needed */
    int io;                    /* the failure is lib/io's (message in err) */
    char err[NNT_IO_ERRLEN];
} peft_save;

static int declare_peft(const peft_tensor *t, void *arg)
{
    peft_save *s = arg;
    int64_t shape[2] = {t->rows, t->cols};
    s->most = t->rows * t->cols > s->most ? t->rows * t->cols : s->most;
    s->regroups |= t->groups != 0;
    s->io = 1;
    int rc = nnt_st_writer_add(s->w, t->name, NNT_IO_F32, t->vector ? 1 : 2, shape, NULL, s->err,
                               sizeof s->err);
    s->io = rc != 0;
    return rc;
}

static int write_peft(const peft_tensor *t, void *arg)
{
    peft_save *s = arg;
    int64_t total = t->rows * t->cols;
    NNT_TRY(t->moe ? stack_io(t, s->buf, 0) : parts_io(t->part, t->nparts, s->buf, 0));
    if (t->groups)   /* nnt's q, k, v -> the file's key/value heads one after the other */
        nnt_rows_by_group(s->buf, s->tmp, t->nparts, t->part_n, t->groups, 0);
    s->io = 1;
    int rc = nnt_st_writer_write(s->w, t->groups ? s->tmp : s->buf, (size_t)total * sizeof(float),
                                 s->err, sizeof s->err);
    s->io = rc != 0;
    return rc;
}

static int save_weights(nnt_layer *model, const char *fn, const nnt_family *f, const char *path)
{
    peft_save s = {NULL, NULL, NULL, 0, 0, 1, ""};
    int rc = nnt_st_writer_begin(path, &s.w, s.err, sizeof s.err);
    if (rc == 0)
        rc = nnt_st_writer_meta(s.w, "format", "pt", s.err, sizeof s.err);
    s.io = rc != 0;
    if (rc == 0)
        rc = each_peft(model, f, declare_peft, &s);
    size_t bytes = (size_t)(s.most ? s.most : 1) * sizeof(float);
    if (rc == 0 && (!(s.buf = malloc(bytes)) || (s.regroups && !(s.tmp = malloc(bytes))))) {
        rc = NNT_E_NOMEM;
        s.io = 1;
        snprintf(s.err, sizeof s.err, "out of memory");
    }
    if (rc == 0)
        rc = each_peft(model, f, write_peft, &s);
    if (rc == 0) {
        s.io = 1;
        rc = nnt_st_writer_finish(s.w, s.err, sizeof s.err);   /* frees w */
        s.w = NULL;
    }
    nnt_st_writer_abort(s.w);
    free(s.buf);
    free(s.tmp);
    return rc && s.io ? nnt_fail(model->ctx, rc, "%s: %s", fn, s.err) : rc;
}

/* A JSON string of s (module names and paths: no control characters). */
static void put_json_string(nnt_cfg_out *t, const char *s)
{
    nnt_cfg_add(t, "\"");
    for (; *s; s++)
        nnt_cfg_add(t, *s == '"' || *s == '\\' ? "\\%c" : "%c", *s);
    nnt_cfg_add(t, "\"");
}

/* The targets of a model whose experts or routers have adapters, as PEFT names them:
 * target_modules the last names of the other modules with adapters (each once), and
 * target_parameters the stacks' and routers' weights, by their whole names. */
typedef struct explicit_targets {
    nnt_cfg_out modules, params;
    int nmodules, nparams;
    char seen[4096];   /* ",name," of the modules written */
} explicit_targets;

static int explicit_one(const lora_module *m, void *arg)
{
    explicit_targets *x = arg;
    if (!gl_lora_of(m->layer, m->name) || m->expert > 0)
        return NNT_OK;
    if (m->expert == 0 || m->router) {
        nnt_cfg_add(&x->params, "%s", x->nparams++ ? ", " : "");
        put_json_string(&x->params, m->param);
        return NNT_OK;
    }
    const char *last = strrchr(m->hf, '.');
    last = last ? last + 1 : m->hf;
    char key[MODULE_MAX + 2];
    snprintf(key, sizeof key, ",%s,", last);
    if (strstr(x->seen, key))
        return NNT_OK;
    if (strlen(x->seen) + strlen(key) < sizeof x->seen)
        strcat(x->seen, key);
    nnt_cfg_add(&x->modules, "%s", x->nmodules++ ? ", " : "");
    put_json_string(&x->modules, last);
    return NNT_OK;
}

/* adapter_config.json as PEFT 0.21 writes it for a LoRA of these settings; x: the explicit
 * targets of a model with experts' or routers' adapters (NULL: the settings' targets). */
static int config_text(nnt_ctx *ctx, const char *fn, const nnt_model_lora *st, int conv1d,
                       const explicit_targets *x, char **out)
{
    nnt_cfg_out t = {NULL, 0, 0, 0, 0};
    nnt_cfg_add(&t, "{\n  \"alpha_pattern\": %s,\n  \"auto_mapping\": null,\n"
                "  \"base_model_name_or_path\": null,\n  \"bias\": \"none\",\n"
                "  \"exclude_modules\": null,\n  \"fan_in_fan_out\": %s,\n"
                "  \"inference_mode\": true,\n  \"init_lora_weights\": true,\n"
                "  \"layers_pattern\": null,\n  \"layers_to_transform\": null,\n"
                "  \"lora_alpha\": ", st->alpha_pattern[0] ? st->alpha_pattern : "{}",
                conv1d ? "true" : "false");
    char num[64];
    snprintf(num, sizeof num, "%.17g", st->alpha);
    nnt_cfg_add(&t, "%s%s,\n  \"lora_bias\": false,\n  \"lora_dropout\": ", num,
                strpbrk(num, ".en") ? "" : ".0");
    snprintf(num, sizeof num, "%.17g", st->dropout);
    nnt_cfg_add(&t, "%s%s,\n  \"modules_to_save\": %s,\n  \"peft_type\": \"LORA\",\n"
                "  \"r\": %lld,\n  \"rank_pattern\": %s,\n  \"revision\": null,\n"
                "  \"target_modules\": ", num, strpbrk(num, ".en") ? "" : ".0",
                st->head ? "[\"classifier\", \"" HEAD "\"]" : "null", (long long)st->rank,
                st->rank_pattern[0] ? st->rank_pattern : "{}");
    if (x) {
        nnt_cfg_add(&t, "[%s],\n  \"target_parameters\": [%s]",
                    x->modules.buf ? x->modules.buf : "", x->params.buf ? x->params.buf : "");
        t.oom |= x->modules.oom || x->params.oom;
    } else if (strcmp(st->targets, "all-linear") == 0) {
        nnt_cfg_add(&t, "\"all-linear\"");
    } else {
        nnt_cfg_add(&t, "[");
        const char *s = st->targets;
        for (int first = 1; *s; first = 0) {
            const char *comma = strchr(s, ',');
            size_t n = comma ? (size_t)(comma - s) : strlen(s);
            char name[MODULE_MAX];
            snprintf(name, sizeof name, "%.*s", (int)n, s);
            char *b = name, *e = name + strlen(name);
            while (*b == ' ')
                b++;
            while (e > b && e[-1] == ' ')
                *--e = '\0';
            nnt_cfg_add(&t, "%s", first ? "" : ", ");
            put_json_string(&t, b);
            s = comma ? comma + 1 : s + n;
        }
        nnt_cfg_add(&t, "]");
    }
    nnt_cfg_add(&t, ",\n  \"task_type\": \"%s\",\n  \"use_dora\": %s,\n"
                "  \"use_rslora\": %s\n}\n", st->head ? "SEQ_CLS" : "CAUSAL_LM",
                st->dora ? "true" : "false", st->rslora ? "true" : "false");
    if (t.oom) {
        free(t.buf);
        return nnt_fail(ctx, NNT_E_NOMEM, "%s: out of memory", fn);
    }
    *out = t.buf;
    return NNT_OK;
}

static int make_dir(nnt_ctx *ctx, const char *fn, const char *dir)
{
    struct stat sb;
    if (!nnt_io_writes())
        return NNT_OK;   /* rank > 0 of an MPI job: rank 0 creates it */
    if (mkdir(dir, 0755) != 0 && errno != EEXIST)
        return nnt_fail(ctx, NNT_E_IO, "%s: cannot create directory %s: %s", fn, dir,
                        strerror(errno));
    if (stat(dir, &sb) != 0 || !S_ISDIR(sb.st_mode))
        return nnt_fail(ctx, NNT_E_IO, "%s: %s is not a directory", fn, dir);
    return NNT_OK;
}

NNT_API int nnt_model_save_peft(nnt_layer *model, const char *dir)
{
    const char *fn = "nnt_model_save_peft";
    NNT_TRY(nnt_layer_check(model, fn));
    if (!dir)
        return nnt_fail(model->ctx, NNT_E_INVAL, "%s: dir is NULL", fn);
    nnt_layer *tree = NULL;
    const nnt_family *f = NULL;
    NNT_TRY(tree_of(model, fn, &tree, &f));
    const nnt_model_lora *st = nnt_model_lora_of(tree);
    if (!st->on)
        return nnt_fail(model->ctx, NNT_E_STATE, "%s: the model has no LoRA adapter", fn);
    char path[NNT_MODEL_PATH_MAX], err[NNT_IO_ERRLEN];
    NNT_TRY(make_dir(model->ctx, fn, dir));
    NNT_TRY(nnt_model_path_join(model->ctx, fn, dir, PEFT_WEIGHTS, path));
    NNT_TRY(save_weights(model, fn, f, path));
    char *text = NULL;
    NNT_TRY(nnt_model_path_join(model->ctx, fn, dir, PEFT_CONFIG, path));
    explicit_targets x;
    memset(&x, 0, sizeof x);
    int rc0 = each_module(model, f, explicit_one, &x);
    /* GPT-2's modules are Conv1D: PEFT records fan_in_fan_out for them */
    if (rc0 == 0)
        rc0 = config_text(model->ctx, fn, st, f->hf_specs != NULL, x.nparams ? &x : NULL,
                          &text);
    free(x.modules.buf);
    free(x.params.buf);
    NNT_TRY(rc0);
    nnt_io_out *o = NULL;
    int rc = nnt_io_out_begin(path, &o, err, sizeof err);
    if (rc == 0)
        rc = nnt_io_out_write(o, text, strlen(text), err, sizeof err);
    if (rc == 0) {
        rc = nnt_io_out_commit(o, err, sizeof err);   /* frees o */
        o = NULL;
    }
    nnt_io_out_abort(o);
    free(text);
    return rc ? nnt_fail(model->ctx, rc, "%s: %s", fn, err) : NNT_OK;
}

/* ---- loading ------------------------------------------------------------------------------ */

/* Keys of adapter_config.json nnt reads or that change nothing nnt computes; any other key is
 * refused unless it is null, false, "", [] or {} (an option at its default). */
static const char *const KNOWN_KEYS[] = {
    "r", "lora_alpha", "lora_dropout", "use_rslora", "target_modules", "peft_type", "bias",
    "task_type", "base_model_name_or_path", "revision", "inference_mode", "auto_mapping",
    "fan_in_fan_out", "init_lora_weights", "peft_version", "megatron_core",
    "qalora_group_size", "target_parameters", "rank_pattern", "alpha_pattern",
    "modules_to_save", "use_dora", NULL};

/* An option nnt does not implement, refused when set (not null, false, [] or {}). */
static const char *const UNSUPPORTED_KEYS[] = {
    "layers_to_transform", "layers_pattern", "lora_bias", "exclude_modules", "use_qalora",
    "trainable_token_indices", "layer_replication", "alora_invocation_tokens", NULL};

static int in_list(const char *const *list, const char *key)
{
    for (int i = 0; list[i]; i++)
        if (strcmp(list[i], key) == 0)
            return 1;
    return 0;
}

/* The value of key is at its default: null, false, "", [], {}. */
static int at_default(const nnt_cfg_in *o, const char *key)
{
    char text[16];
    nnt_cfg_text(o, key, text, sizeof text);
    return nnt_cfg_is_empty(o, key) || strcmp(text, "false") == 0 || strcmp(text, "\"\"") == 0;
}

/* target_parameters (PEFT's adapters of parameters) added to the targets *raw (malloc'd,
 * comma-separated; NULL: none yet): the experts' stacks "...experts.gate_up_proj",
 * "...experts.down_proj" ("experts." put before a bare "gate_up_proj" or "down_proj"), and a
 * router's weight "mlp.gate.weight", by its module's name ("mlp.gate"). Another parameter is
 * refused. */
static int read_target_parameters(nnt_ctx *ctx, const char *fn, const nnt_cfg_in *c, char **raw)
{
    char *list = NULL;
    NNT_TRY(nnt_cfg_string_list(c, "target_parameters", &list));
    nnt_cfg_out t = {NULL, 0, 0, 0, 0};
    nnt_cfg_add(&t, "%s", *raw ? *raw : "");
    int rc = NNT_OK;
    for (char *p = list; rc == 0 && p && *p;) {
        char *comma = strchr(p, ',');
        size_t n = comma ? (size_t)(comma - p) : strlen(p);
        char name[MODULE_MAX];
        snprintf(name, sizeof name, "%.*s", (int)n, p);
        size_t len = strlen(name);
        int weight = len > 7 && strcmp(name + len - 7, ".weight") == 0;
        if (weight)
            name[len - 7] = '\0';
        int bare = strcmp(name, "gate_up_proj") == 0 || strcmp(name, "down_proj") == 0;
        if (!weight && !bare && !expert_target(name))
            rc = nnt_fail(ctx, NNT_E_UNSUPPORTED, "%s: target_parameters \"%s\": nnt adapts the "
                          "experts' stacked tensors (\"mlp.experts.gate_up_proj\", "
                          "\"mlp.experts.down_proj\") and modules' weights (\"mlp.gate.weight\")",
                          fn, name);
        nnt_cfg_add(&t, "%s%s%s", t.len ? "," : "", bare ? "experts." : "", name);
        p = comma ? comma + 1 : p + n;
    }
    free(list);
    if (rc == 0 && t.oom)
        rc = nnt_fail(ctx, NNT_E_NOMEM, "%s: out of memory", fn);
    if (rc) {
        free(t.buf);
        return rc;
    }
    free(*raw);
    *raw = t.buf;
    return NNT_OK;
}

/* PEFT's rank_pattern (rank 1) or alpha_pattern (0) of c into pat, its JSON text into text
 * ("" when empty): an object of keys "NAME" or ".*\\.NAME" and numbers (ranks whole). */
static int read_patterns(nnt_ctx *ctx, const char *fn, const nnt_cfg_in *c, const char *key,
                         int rank, lora_patterns *pat, char *text, size_t size)
{
    text[0] = '\0';
    if (nnt_cfg_is_empty(c, key))
        return NNT_OK;
    nnt_cfg_text(c, key, text, size);
    size_t len = strlen(text);
    if (len + 1 >= size)
        return nnt_fail(ctx, NNT_E_UNSUPPORTED, "%s: %s is longer than %zu bytes", fn, key,
                        size - 1);
    char err[NNT_IO_ERRLEN];
    nnt_json j;
    nnt_json_init(&j, text, len, 0, key, err, sizeof err);
    int rc = nnt_json_expect(&j, '{', "");
    for (int first = 1; rc == 0 && nnt_json_peek(&j) != '}'; first = 0) {
        char *name = NULL;
        if (!first)
            rc = nnt_json_expect(&j, ',', "");
        if (rc == 0)
            rc = nnt_json_string(&j, &name, NULL, MODULE_MAX - 1, 0, "");
        if (rc == 0)
            rc = nnt_json_expect(&j, ':', "");
        size_t at = j.pos;
        if (rc == 0 && (nnt_json_peek(&j) == '"' || (rc = nnt_json_skip(&j, 1, "")) != 0 ||
                        pat->n == 16))
            rc = rc ? rc : nnt_json_fail(&j, "a number of at most 16 patterns expected");
        if (rc == 0) {   /* ".*\.NAME" or NAME: its last names */
            const char *s = strncmp(name, ".*\\.", 4) == 0 ? name + 4 : name;
            char *o = pat->name[pat->n];
            for (; *s && rc == 0; s++) {
                if (s[0] == '\\' && s[1] == '.')
                    *o++ = '.', s++;
                else if (strchr("*+?[](){}|^$\\", *s))
                    rc = nnt_cfg_unsupported(c, key, name, "a regular expression; keys NAME "
                                             "or .*\\.NAME");
                else
                    *o++ = *s;
            }
            *o = '\0';
            char num[64];
            snprintf(num, sizeof num, "%.*s", (int)(j.pos - at), text + at);
            pat->value[pat->n] = strtod(num, NULL);
            pat->rank[pat->n] = rank;
            if (rc == 0 && (!(pat->value[pat->n] > 0) ||
                            (rank && (pat->value[pat->n] != (double)(int64_t)pat->value[pat->n] ||
                                      pat->value[pat->n] > 65536))))
                rc = nnt_cfg_unsupported(c, key, num, rank ? "a rank of 1 to 65536"
                                                           : "an alpha > 0");
            pat->n++;
        }
        free(name);
    }
    if (rc == 0)
        rc = nnt_json_expect(&j, '}', "");
    if (rc && rc != NNT_E_UNSUPPORTED && rc != NNT_E_NOMEM)
        rc = nnt_fail(ctx, rc, "%s: %s", fn, err);
    return rc;
}

/* PEFT's modules_to_save: *head 1 when it names a classifier's head ("score"; PEFT's task
 * type SEQ_CLS lists "classifier" and "score", the heads' names in transformers' classes,
 * of which a model has one); another module is refused. */
static int read_modules_to_save(const nnt_cfg_in *c, int *head)
{
    *head = 0;
    if (nnt_cfg_is_empty(c, "modules_to_save"))
        return NNT_OK;
    char *list = NULL;
    NNT_TRY(nnt_cfg_string_list(c, "modules_to_save", &list));
    int rc = NNT_OK;
    for (char *p = list; rc == 0 && p && *p;) {
        char *comma = strchr(p, ',');
        if (comma)
            *comma = '\0';
        if (strcmp(p, HEAD) == 0)
            *head = 1;
        else if (strcmp(p, "classifier") != 0)
            rc = nnt_cfg_unsupported(c, "modules_to_save", p, "a classifier's head (\"" HEAD
                                     "\"); nnt trains no other module whole beside adapters");
        p = comma ? comma + 1 : NULL;
    }
    free(list);
    return rc;
}

/* The settings of adapter_config.json into *o (targets into *targets, malloc'd), its
 * rank_pattern and alpha_pattern into pat and text, *head whether it trains a classifier's
 * head (read_modules_to_save). */
static int read_config(nnt_ctx *ctx, const char *fn, const char *path, nnt_lora_options *o,
                       char **targets, lora_patterns *pat, char text[2][1024], int *head)
{
    nnt_cfg_in *c = NULL;
    NNT_TRY(nnt_cfg_open(ctx, fn, path, &c));
    int rc = NNT_OK;
    for (size_t i = 0; rc == 0 && i < nnt_cfg_count(c); i++) {
        const char *key = nnt_cfg_key_at(c, i);
        if (in_list(KNOWN_KEYS, key) || at_default(c, key))
            continue;
        char value[128];
        nnt_cfg_text(c, key, value, sizeof value);
        rc = nnt_cfg_unsupported(c, key, value, in_list(UNSUPPORTED_KEYS, key)
                                     ? "nnt's LoRA has no such option"
                                     : "an option nnt does not know");
    }
    static const char *const peft_types[] = {"LORA"};
    static const char *const biases[] = {"none"};
    int which = 0;
    int64_t rank = 0;
    char *raw = NULL;
    if (rc == 0)
        rc = nnt_cfg_choice(c, "peft_type", "LORA", peft_types, 1, &which);
    if (rc == 0)
        rc = nnt_cfg_choice(c, "bias", "none", biases, 1, &which);
    if (rc == 0)
        rc = nnt_cfg_int(c, "r", 1, 8, &rank);
    if (rc == 0)
        rc = nnt_cfg_double(c, "lora_alpha", 0, 8.0, &o->alpha);
    if (rc == 0)
        rc = nnt_cfg_double(c, "lora_dropout", 0, 0.0, &o->dropout);
    if (rc == 0)
        rc = nnt_cfg_bool(c, "use_rslora", 0, &o->rslora);
    if (rc == 0)
        rc = nnt_cfg_bool(c, "use_dora", 0, &o->dora);
    if (rc == 0)
        rc = nnt_cfg_string_list(c, "target_modules", &raw);
    if (rc == 0) {
        char text[8];
        nnt_cfg_text(c, "target_modules", text, sizeof text);
        if (text[0] == '"' && strcmp(raw, "all-linear") != 0)
            rc = nnt_cfg_unsupported(c, "target_modules", raw, "a regular expression; a list "
                                     "of module names or all-linear");
        if (rc == 0 && text[0] == '"' && !nnt_cfg_is_empty(c, "target_parameters"))
            rc = nnt_cfg_unsupported(c, "target_parameters", "(a list)", "all-linear with "
                                     "target_parameters; give target_modules as a list");
    }
    if (rc == 0)
        rc = read_target_parameters(ctx, fn, c, &raw);
    if (rc == 0)
        rc = read_modules_to_save(c, head);
    if (rc == 0)
        rc = read_patterns(ctx, fn, c, "rank_pattern", 1, pat, text[0], 1024);
    if (rc == 0)
        rc = read_patterns(ctx, fn, c, "alpha_pattern", 0, pat, text[1], 1024);
    if (rc == 0 && (!raw || !*raw))
        rc = nnt_fail(ctx, NNT_E_FORMAT, "%s: %s: no target_modules (or target_parameters)", fn,
                      path);
    o->rank = rank;
    nnt_cfg_close(c);
    if (rc) {
        free(raw);
        return rc;
    }
    *targets = raw;
    return NNT_OK;
}

/* Checking the file against the model's adapters, then reading it. */
typedef struct peft_load {
    nnt_ctx *ctx;
    const char *fn, *path;
    nnt_st_reader *r;
    int fill;                 /* 0: check; 1: read into the tensors                        */
    size_t found;             /* tensors of the file the model has                         */
    const nnt_st_entry **seen;   /* those tensors (found of them, room for the file's)    */
    char err[NNT_IO_ERRLEN];
} peft_load;

static int load_one(const peft_tensor *t, void *arg)
{
    peft_load *g = arg;
    const nnt_st_entry *e = nnt_st_find(g->r, t->name);
    if (!e)
        return nnt_fail(g->ctx, NNT_E_FORMAT, "%s: %s has no tensor %s (the model's adapter of "
                        "that module)", g->fn, g->path, t->name);
    if (!g->fill) {
        if (g->found < nnt_st_count(g->r))
            g->seen[g->found] = e;
        g->found++;
        if (t->vector && (e->ndim != 1 || e->shape[0] != t->rows))
            return nnt_fail(g->ctx, NNT_E_SHAPE, "%s: %s: tensor %s has %d dims, first %lld, the "
                            "model's is (%lld): another base model?", g->fn, g->path, t->name,
                            e->ndim, (long long)(e->ndim ? e->shape[0] : 0), (long long)t->rows);
        if (!t->vector && (e->ndim != 2 || e->shape[0] != t->rows || e->shape[1] != t->cols))
            return nnt_fail(g->ctx, NNT_E_SHAPE, "%s: %s: tensor %s is (%lld, %lld), the model's "
                            "is (%lld, %lld): another base model?", g->fn, g->path, t->name,
                            (long long)e->shape[0], (long long)(e->ndim > 1 ? e->shape[1] : 0),
                            (long long)t->rows, (long long)t->cols);
        return NNT_OK;
    }
    int64_t total = t->rows * t->cols;
    float *buf = malloc((size_t)total * sizeof *buf + 1);
    float *tmp = t->groups ? malloc((size_t)total * sizeof *tmp + 1) : NULL;
    int rc = buf && (tmp || !t->groups) ? NNT_OK
                                        : nnt_fail(g->ctx, NNT_E_NOMEM, "%s: out of memory", g->fn);
    if (rc == 0 && (rc = nnt_st_read(g->r, e, NNT_IO_F32, 0, (uint64_t)total,
                                     t->groups ? tmp : buf, g->err, sizeof g->err)))
        rc = nnt_fail(g->ctx, rc, "%s: %s", g->fn, g->err);
    if (rc == 0 && t->groups)   /* the file's key/value heads one after the other -> nnt's parts */
        nnt_rows_by_group(tmp, buf, t->nparts, t->part_n, t->groups, 1);
    if (rc == 0)
        rc = t->moe ? stack_io(t, buf, 1) : parts_io(t->part, t->nparts, buf, 1);
    free(buf);
    free(tmp);
    return rc;
}

/* Remove the adapters just added (a load that failed after adding them). */
static void unload(nnt_layer *l)
{
    const char *const *mods = gl_lora_modules(l);
    for (int i = 0; mods && mods[i]; i++)
        gl_lora_remove(l, mods[i]);
    for (int c = 0; c < l->nchildren; c++)
        unload(l->children[c]);
}

NNT_API int nnt_model_load_peft(nnt_layer *model, const char *dir)
{
    const char *fn = "nnt_model_load_peft";
    NNT_TRY(nnt_layer_check(model, fn));
    if (!dir)
        return nnt_fail(model->ctx, NNT_E_INVAL, "%s: dir is NULL", fn);
    nnt_layer *tree = NULL;
    const nnt_family *f = NULL;
    NNT_TRY(tree_of(model, fn, &tree, &f));
    if (nnt_model_lora_of(tree)->on)
        return nnt_fail(model->ctx, NNT_E_STATE, "%s: the model has LoRA adapters already "
                        "(merge them first: nnt_model_lora_merge)", fn);
    char path[NNT_MODEL_PATH_MAX], wpath[NNT_MODEL_PATH_MAX];
    NNT_TRY(nnt_model_path_join(model->ctx, fn, dir, PEFT_CONFIG, path));
    NNT_TRY(nnt_model_path_join(model->ctx, fn, dir, PEFT_WEIGHTS, wpath));
    nnt_lora_options o = NNT_LORA_OPTIONS_INIT;
    char *targets = NULL, pat_text[2][1024];
    lora_patterns pat;
    memset(&pat, 0, sizeof pat);
    int head = 0;
    NNT_TRY(read_config(model->ctx, fn, path, &o, &targets, &pat, pat_text, &head));
    o.freeze_base = 0;   /* after the file was read */
    nnt_model_config cfg;
    int rc = nnt_model_config_get(model, fn, &cfg);
    if (rc == 0 && head && cfg.num_labels == 0)
        rc = nnt_fail(model->ctx, NNT_E_INVAL, "%s: %s trains a classifier's head beside its "
                      "adapters (modules_to_save \"%s\", task_type SEQ_CLS): load it on a "
                      "classifier (nnt_model_config.num_labels; nnt-train and nnt-generate "
                      "--num-labels N), not a language model", fn, path, HEAD);
    if (rc) {
        free(targets);
        return rc;
    }
    nnt_layer_param_rec *hp = head ? head_param(tree) : NULL;
    int hp_frozen = hp && hp->frozen;   /* (frozen again if the load fails) */
    peft_load g = {model->ctx, fn, wpath, NULL, 0, 0, NULL, ""};
    rc = nnt_st_open(wpath, &g.r, g.err, sizeof g.err);
    if (rc)
        rc = nnt_fail(model->ctx, rc, "%s: %s", fn, g.err);
    if (rc == 0 && (o.rank < 1 || o.rank > 65536 || !(o.alpha > 0.0) ||
                    !(o.dropout >= 0.0 && o.dropout < 1.0)))
        rc = nnt_fail(model->ctx, NNT_E_FORMAT, "%s: %s: r %lld, lora_alpha %g or lora_dropout "
                      "%g out of range", fn, path, (long long)o.rank, o.alpha, o.dropout);
    if (rc == 0)
        rc = lora_add(model, fn, &o, targets, &pat, head);
    if (rc == 0) {   /* written back by nnt_model_save_peft */
        nnt_model_lora *st = nnt_model_lora_of(tree);
        snprintf(st->rank_pattern, sizeof st->rank_pattern, "%s", pat_text[0]);
        snprintf(st->alpha_pattern, sizeof st->alpha_pattern, "%s", pat_text[1]);
    }
    free(targets);
    if (rc) {
        nnt_st_close(g.r);
        return rc;
    }
    g.seen = calloc(nnt_st_count(g.r) + 1, sizeof *g.seen);
    rc = g.seen ? each_peft(model, f, load_one, &g)
                : nnt_fail(model->ctx, NNT_E_NOMEM, "%s: out of memory", fn);
    for (size_t i = 0; rc == 0 && i < nnt_st_count(g.r); i++) {
        const nnt_st_entry *e = nnt_st_entry_at(g.r, i);
        int known = 0;
        for (size_t k = 0; k < g.found && !known; k++)
            known = g.seen[k] == e;
        if (!known)   /* an adapter of a module this model has not (more layers?) */
            rc = nnt_fail(model->ctx, NNT_E_FORMAT, "%s: %s: tensor %s is no adapter of this "
                          "model's targets (another base model, or other targets?)", fn, wpath,
                          e->name);
    }
    free(g.seen);
    if (rc == 0) {
        g.fill = 1;
        rc = each_peft(model, f, load_one, &g);
    }
    nnt_st_close(g.r);
    if (rc == 0) {   /* the base frozen, as PEFT's from_pretrained leaves it */
        rc = freeze_base(tree, NNT_FREEZE, 0, fn, hp);
        if (rc == 0 && model->vt->reregister)
            rc = model->vt->reregister(model);
        return rc;
    }
    unload(tree);   /* the model as it was */
    nnt_model_lora_of(tree)->on = nnt_model_lora_of(tree)->head = 0;
    if (hp_frozen && !hp->frozen)
        nnt_layer_set_frozen(tree, hp, NNT_FREEZE);
    nnt_layer_params_changed(tree);
    if (model->vt->reregister)
        model->vt->reregister(model);
    return rc;
}
