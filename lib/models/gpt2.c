/* GPT-2 assembled from the public tensor operations (see gpt2.h for the model, the parameter
 * layout and the tiling). Shapes in comments: B batch, T sequence, C channels, F = 4C MLP
 * hidden, V vocabulary, NH heads, hd = C / NH head dimension, maxT rows of wpe. */
#include "../internal.h"

#include "../io/io.h"
#include "gpt2.h"
#include "models.h"
#include "sample.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- parameter kinds, in llm.c's order ------------------------------------------------ */

enum {
    WTE, WPE, LN1W, LN1B, QKVW, QKVB, ATTPROJW, ATTPROJB,
    LN2W, LN2B, FCW, FCB, FCPROJW, FCPROJB, LNFW, LNFB, NKINDS
};

/* dims: one letter per dimension (see make_tensor); pieces: tensors per layer (q, k, v);
 * decay: weight decay applies (the matrices); hf: Hugging Face name (after "h.<l>." for
 * per-layer ones); hf_in: for HF Conv1D weights, stored (in, out) where llm.c stores
 * (out, in), the letter of the in dimension, else 0. */
static const struct kind {
    const char *name;
    const char *dims;
    int per_layer, pieces, decay;
    const char *hf;
    char hf_in;
} kinds[NKINDS] = {
    {"wte", "VC", 0, 1, 1, "wte.weight", 0},
    {"wpe", "PC", 0, 1, 1, "wpe.weight", 0},
    {"ln1w", "C", 1, 1, 0, "ln_1.weight", 0},
    {"ln1b", "C", 1, 1, 0, "ln_1.bias", 0},
    {"qkvw", "NDC", 1, 3, 1, "attn.c_attn.weight", 'C'},
    {"qkvb", "ND", 1, 3, 0, "attn.c_attn.bias", 0},
    {"attprojw", "CND", 1, 1, 1, "attn.c_proj.weight", 'C'},
    {"attprojb", "C", 1, 1, 0, "attn.c_proj.bias", 0},
    {"ln2w", "C", 1, 1, 0, "ln_2.weight", 0},
    {"ln2b", "C", 1, 1, 0, "ln_2.bias", 0},
    {"fcw", "FC", 1, 1, 1, "mlp.c_fc.weight", 'C'},
    {"fcb", "F", 1, 1, 0, "mlp.c_fc.bias", 0},
    {"fcprojw", "CF", 1, 1, 1, "mlp.c_proj.weight", 'F'},
    {"fcprojb", "C", 1, 1, 0, "mlp.c_proj.bias", 0},
    {"lnfw", "C", 0, 1, 0, "ln_f.weight", 0},
    {"lnfb", "C", 0, 1, 0, "ln_f.bias", 0},
};

/* A parameter tensor with its gradient and Adam moments (NULL until the first step), and
 * for the matrices read by products its bf16 copy under NNT_PRECISION_BF16 (else NULL). */
typedef struct param {
    nnt_tensor *p, *g, *m, *v;
    nnt_tensor *p16;
    int g_cleared;   /* g dropped by nnt_gpt2_clear_grad: the next backward writes it */
} param;

/* What one layer's forward keeps for backward. */
typedef struct layer_acts {
    nnt_tensor *ln1, *ln1_mean, *ln1_rstd;  // (B, T, C), (B, T), (B, T)
    nnt_tensor *qkv[3];                     // (B, NH, T, hd) each: q, k, v
    nnt_tensor *atto;                       // (B, NH, T, hd) attention output
    nnt_tensor *att_lse;                    // (B, NH, T)
    nnt_tensor *atty;                       // (B, T, NH, hd) heads side by side
    nnt_tensor *residual2;                  // (B, T, C)
    nnt_tensor *ln2, *ln2_mean, *ln2_rstd;  // (B, T, C), (B, T), (B, T)
    nnt_tensor *fch, *fch_gelu;             // (B, T, F) pre-activation, GELU output
    nnt_tensor *residual3;                  // (B, T, C)
} layer_acts;

struct nnt_gpt2 {
    nnt_ctx *ctx;
    nnt_gpt2_config cfg;
    nnt_gpt2_tiling tile;        /* resolved: every entry in 1..its dimension          */
    int64_t B, T, hd;
    param *params[NKINDS];       /* count_of(kind) entries: index layer * pieces + piece */
    int64_t step;                /* AdamW steps done                                    */
    int64_t nvalid;              /* targets != ignore in the last forward               */
    int backward_ready;          /* the last forward had targets, no backward since     */
    int loss_ready;              /* losses holds the last forward with targets' losses  */
    int recompute;               /* layers keep only their output; backward recomputes  */
    int acts_missing;            /* a failed nnt_gpt2_set_recompute left no activations  */
    int acts_bf16;               /* ln1, atty, ln2, fch_gelu, lnf are stored as bf16     */
    int float_operands;          /* keep them float even with NNT_PRECISION_BF16 (tests) */

    nnt_tensor *tokens, *targets;    // (B, T) int32
    nnt_tensor *encoded;             // (B, T, C)
    layer_acts *layers;              // [L]; with recompute all but residual3 are shared's
    layer_acts shared;               // with recompute: the one set of block activations
    nnt_tensor *lnf, *lnf_mean, *lnf_rstd;  // (B, T, C), (B, T), (B, T)
    nnt_tensor *logits;              // (B, T, V); backward turns it into d loss / d logits
    nnt_tensor *losses, *lse;        // (B, T)

    /* scratch shared by all layers */
    nnt_tensor *heads;               // (B, T, NH, hd): q/k/v before permute, their grads
    nnt_tensor *dheads[4];           // (B, NH, T, hd): d atto, dq, dk, dv
    nnt_tensor *dres;                // (B, T, C) d loss / d residual stream
    nnt_tensor *dln;                 // (B, T, C) d loss / d LayerNorm output
    nnt_tensor *dx;                  // (B, T, C) LayerNorm input grad before adding
    nnt_tensor *dfch;                // (B, T, F)
};

static int count_of(const nnt_gpt2 *m, int kind)
{
    return (kinds[kind].per_layer ? (int)m->cfg.layers : 1) * kinds[kind].pieces;
}

static param *param_at(nnt_gpt2 *m, int kind, int64_t layer, int piece)
{
    return &m->params[kind][layer * kinds[kind].pieces + piece];
}

static int kind_by_name(const char *name)
{
    for (int k = 0; name && k < NKINDS; k++)
        if (strcmp(kinds[k].name, name) == 0)
            return k;
    return -1;
}

/* ---- tensors by dimension letters ------------------------------------------------------
 * B batch, T sequence, P maxT (wpe rows, sequence tiling), C channels, F hidden 4C,
 * V vocabulary, N heads, D head dim. */

static void dim_of(const nnt_gpt2 *m, char letter, int64_t *size, int64_t *tile)
{
    const nnt_gpt2_config *c = &m->cfg;
    const nnt_gpt2_tiling *t = &m->tile;
    switch (letter) {
    case 'B': *size = m->B; *tile = t->batch; break;
    case 'T': *size = m->T; *tile = t->seq; break;
    case 'P': *size = c->max_seq; *tile = t->seq; break;
    case 'C': *size = c->channels; *tile = t->channels; break;
    case 'F': *size = 4 * c->channels; *tile = t->hidden; break;
    case 'V': *size = c->vocab; *tile = t->vocab; break;
    case 'N': *size = c->heads; *tile = t->heads; break;
    default: *size = m->hd; *tile = t->head_dim; break; /* 'D' */
    }
}

static int make_tensor(nnt_gpt2 *m, nnt_dtype dtype, const char *dims, nnt_tensor **out)
{
    int64_t shape[NNT_MAX_DIMS], tile[NNT_MAX_DIMS];
    int ndim = (int)strlen(dims);
    for (int d = 0; d < ndim; d++)
        dim_of(m, dims[d], &shape[d], &tile[d]);
    return nnt_tensor_create(m->ctx, dtype, ndim, shape, tile, out);
}

static int make_f32(nnt_gpt2 *m, const char *dims, nnt_tensor **out)
{
    return make_tensor(m, NNT_FP32, dims, out);
}

/* The activations that only matrix products read (ln1, atty, ln2, fch_gelu, lnf): stored
 * as bf16 after a forward with NNT_PRECISION_BF16, whose products round them so anyway --
 * the same bits at half the memory. The float results they are converted from pass through
 * scratch that exists anyway (dx, heads, dfch). */
static int make_operand(nnt_gpt2 *m, const char *dims, nnt_tensor **out)
{
    return make_tensor(m, m->acts_bf16 ? NNT_BF16 : NNT_FP32, dims, out);
}

static int64_t numel_of(const nnt_tensor *t)
{
    int64_t n = 1;
    for (int d = 0; d < t->ndim; d++)
        n *= t->shape[d];
    return n;
}

/* ---- creation ------------------------------------------------------------------------- */

static int check_config(nnt_ctx *ctx, const char *fn, const nnt_gpt2_config *c, int64_t B,
                        int64_t T)
{
    if (c->vocab < 1 || c->max_seq < 1 || c->layers < 0 || c->heads < 1 || c->channels < 1)
        return nnt_fail(ctx, NNT_E_INVAL, "%s: bad configuration V=%lld maxT=%lld L=%lld "
                        "NH=%lld C=%lld", fn, (long long)c->vocab, (long long)c->max_seq,
                        (long long)c->layers, (long long)c->heads, (long long)c->channels);
    if (c->channels % c->heads)
        return nnt_fail(ctx, NNT_E_INVAL, "%s: C=%lld is not a multiple of NH=%lld", fn,
                        (long long)c->channels, (long long)c->heads);
    if (c->padded_vocab != 0 && c->padded_vocab < c->vocab)
        return nnt_fail(ctx, NNT_E_INVAL, "%s: padded vocabulary %lld < V=%lld", fn,
                        (long long)c->padded_vocab, (long long)c->vocab);
    if (B < 1 || T < 1 || T > c->max_seq)
        return nnt_fail(ctx, NNT_E_INVAL, "%s: B=%lld, T=%lld must be positive with T <= "
                        "maxT=%lld", fn, (long long)B, (long long)T, (long long)c->max_seq);
    return NNT_OK;
}

/* Tile sizes <= 0 or beyond the dimension become the whole dimension. */
static int64_t resolve_tile(int64_t tile, int64_t size)
{
    return tile <= 0 || tile > size ? size : tile;
}

static void resolve_tiling(nnt_gpt2 *m, const nnt_gpt2_tiling *t)
{
    nnt_gpt2_tiling z = {0, 0, 0, 0, 0, 0, 0};
    if (!t)
        t = &z;
    m->tile.batch = resolve_tile(t->batch, m->B);
    m->tile.seq = resolve_tile(t->seq, m->T);   /* wpe rows: the same tile */
    m->tile.channels = resolve_tile(t->channels, m->cfg.channels);
    m->tile.hidden = resolve_tile(t->hidden, 4 * m->cfg.channels);
    m->tile.vocab = resolve_tile(t->vocab, m->cfg.vocab);
    m->tile.heads = resolve_tile(t->heads, m->cfg.heads);
    m->tile.head_dim = resolve_tile(t->head_dim, m->hd);
}

/* Parameters (content undefined) and zero gradients. */
static int create_params(nnt_gpt2 *m)
{
    for (int k = 0; k < NKINDS; k++) {
        int n = count_of(m, k);
        m->params[k] = calloc((size_t)n, sizeof(param));
        if (!m->params[k])
            return nnt_fail(m->ctx, NNT_E_NOMEM, "nnt_gpt2_create: out of memory");
        for (int i = 0; i < n; i++) {
            param *p = &m->params[k][i];
            NNT_TRY(make_f32(m, kinds[k].dims, &p->p));
            NNT_TRY(make_f32(m, kinds[k].dims, &p->g));
            NNT_TRY(nnt_tensor_fill(p->g, 0.0));
        }
    }
    return NNT_OK;
}

/* Everything but residual3 (the block output, next block's input). */
static int create_block_scratch(nnt_gpt2 *m, layer_acts *a)
{
    NNT_TRY(make_operand(m, "BTC", &a->ln1));
    NNT_TRY(make_f32(m, "BT", &a->ln1_mean));
    NNT_TRY(make_f32(m, "BT", &a->ln1_rstd));
    for (int i = 0; i < 3; i++)
        NNT_TRY(make_f32(m, "BNTD", &a->qkv[i]));
    NNT_TRY(make_f32(m, "BNTD", &a->atto));
    NNT_TRY(make_f32(m, "BNT", &a->att_lse));
    NNT_TRY(make_operand(m, "BTND", &a->atty));
    NNT_TRY(make_f32(m, "BTC", &a->residual2));
    NNT_TRY(make_operand(m, "BTC", &a->ln2));
    NNT_TRY(make_f32(m, "BT", &a->ln2_mean));
    NNT_TRY(make_f32(m, "BT", &a->ln2_rstd));
    NNT_TRY(make_f32(m, "BTF", &a->fch));
    NNT_TRY(make_operand(m, "BTF", &a->fch_gelu));
    return NNT_OK;
}

/* Layer activations: each layer its own set, or, with recompute, each layer its own
 * residual3 and the rest shared by all (m->shared). */
static int create_layer_acts(nnt_gpt2 *m)
{
    if (m->recompute)
        NNT_TRY(create_block_scratch(m, &m->shared));
    for (int64_t l = 0; l < m->cfg.layers; l++) {
        layer_acts *a = &m->layers[l];
        if (m->recompute)
            *a = m->shared;
        else
            NNT_TRY(create_block_scratch(m, a));
        NNT_TRY(make_f32(m, "BTC", &a->residual3));
    }
    return NNT_OK;
}

static int create_acts(nnt_gpt2 *m)
{
    NNT_TRY(make_tensor(m, NNT_INT32, "BT", &m->tokens));
    NNT_TRY(make_tensor(m, NNT_INT32, "BT", &m->targets));
    NNT_TRY(make_f32(m, "BTC", &m->encoded));
    m->layers = calloc((size_t)(m->cfg.layers ? m->cfg.layers : 1), sizeof(layer_acts));
    if (!m->layers)
        return nnt_fail(m->ctx, NNT_E_NOMEM, "nnt_gpt2_create: out of memory");
    NNT_TRY(create_layer_acts(m));
    NNT_TRY(make_operand(m, "BTC", &m->lnf));
    NNT_TRY(make_f32(m, "BT", &m->lnf_mean));
    NNT_TRY(make_f32(m, "BT", &m->lnf_rstd));
    NNT_TRY(make_f32(m, "BTV", &m->logits));
    NNT_TRY(make_f32(m, "BT", &m->losses));
    NNT_TRY(make_f32(m, "BT", &m->lse));
    NNT_TRY(make_f32(m, "BTND", &m->heads));
    for (int i = 0; i < 4; i++)
        NNT_TRY(make_f32(m, "BNTD", &m->dheads[i]));
    NNT_TRY(make_f32(m, "BTC", &m->dres));
    NNT_TRY(make_f32(m, "BTC", &m->dln));
    NNT_TRY(make_f32(m, "BTC", &m->dx));
    NNT_TRY(make_f32(m, "BTF", &m->dfch));
    return NNT_OK;
}

int nnt_gpt2_create(nnt_ctx *ctx, const nnt_gpt2_config *cfg, const nnt_gpt2_tiling *tiling,
                    int64_t B, int64_t T, nnt_gpt2 **out)
{
    if (!out || !cfg)
        return nnt_fail(ctx, NNT_E_INVAL, "nnt_gpt2_create: %s is NULL", out ? "cfg" : "out");
    *out = NULL;
    NNT_TRY(nnt_ctx_check(ctx, "nnt_gpt2_create"));
    NNT_TRY(check_config(ctx, "nnt_gpt2_create", cfg, B, T));
    nnt_gpt2 *m = calloc(1, sizeof *m);
    if (!m)
        return nnt_fail(ctx, NNT_E_NOMEM, "nnt_gpt2_create: out of memory");
    m->ctx = ctx;
    m->cfg = *cfg;
    if (m->cfg.padded_vocab == 0)
        m->cfg.padded_vocab = cfg->vocab;
    m->B = B;
    m->T = T;
    m->hd = cfg->channels / cfg->heads;
    resolve_tiling(m, tiling);
    int rc = create_params(m);
    if (rc == 0)
        rc = create_acts(m);
    if (rc) {
        nnt_gpt2_destroy(m);
        return rc;
    }
    *out = m;
    return NNT_OK;
}

/* ---- automatic tiling (the rules: nnt_gpt2_auto_tiling in gpt2.h; lib/models/tiling.c) -- */

/* The arguments of the automatic tilings; units: the workers or GPUs to feed. */
static int check_auto_args(const char *fn, const nnt_gpt2_config *cfg, int64_t B, int64_t T,
                           const char *units_name, int units, const nnt_gpt2_tiling *out)
{
    if (!cfg || !out)
        return nnt_fail(NULL, NNT_E_INVAL, "%s: %s is NULL", fn, cfg ? "out" : "cfg");
    NNT_TRY(check_config(NULL, fn, cfg, B, T));
    if (units < 1)
        return nnt_fail(NULL, NNT_E_INVAL, "%s: %s=%d must be >= 1", fn, units_name, units);
    return NNT_OK;
}

static nnt_model_dims dims_of(const nnt_gpt2_config *cfg, int64_t B, int64_t T)
{
    nnt_model_dims d = {B, T, cfg->channels, 4 * cfg->channels, cfg->vocab, cfg->heads};
    return d;
}

static nnt_gpt2_tiling from_tiling(const nnt_tiling *t)
{
    nnt_gpt2_tiling r = {t->batch, t->seq, t->channels, t->hidden, t->vocab, t->heads,
                         t->head_dim};
    return r;
}

int nnt_gpt2_auto_tiling(const nnt_gpt2_config *cfg, int64_t B, int64_t T, int nworkers,
                         nnt_gpt2_tiling *out)
{
    NNT_TRY(check_auto_args("nnt_gpt2_auto_tiling", cfg, B, T, "nworkers", nworkers, out));
    nnt_model_dims d = dims_of(cfg, B, T);
    nnt_tiling t;
    nnt_auto_tiling_cpu(&d, nworkers, &t);
    *out = from_tiling(&t);
    return NNT_OK;
}

int nnt_gpt2_auto_tiling_gpu(const nnt_gpt2_config *cfg, int64_t B, int64_t T, int ngpus,
                             nnt_gpt2_tiling *out)
{
    NNT_TRY(check_auto_args("nnt_gpt2_auto_tiling_gpu", cfg, B, T, "ngpus", ngpus, out));
    nnt_model_dims d = dims_of(cfg, B, T);
    nnt_tiling t;
    nnt_auto_tiling_gpu(&d, ngpus, &t);
    *out = from_tiling(&t);
    return NNT_OK;
}

static void destroy_block_acts(layer_acts *a)
{
    nnt_tensor *all[] = {a->ln1, a->ln1_mean, a->ln1_rstd, a->qkv[0], a->qkv[1], a->qkv[2],
                         a->atto, a->att_lse, a->atty, a->residual2, a->ln2, a->ln2_mean,
                         a->ln2_rstd, a->fch, a->fch_gelu, a->residual3};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        nnt_tensor_destroy(all[i]);
    memset(a, 0, sizeof *a);
}

/* The per-layer activations and, with recompute, the shared set (once). */
static void destroy_layer_acts(nnt_gpt2 *m)
{
    for (int64_t l = 0; m->layers && l < m->cfg.layers; l++) {
        layer_acts *a = &m->layers[l];
        if (m->recompute) {
            nnt_tensor_destroy(a->residual3);
            memset(a, 0, sizeof *a);
        } else {
            destroy_block_acts(a);
        }
    }
    destroy_block_acts(&m->shared);
}

void nnt_gpt2_destroy(nnt_gpt2 *m)
{
    if (!m)
        return;
    for (int k = 0; k < NKINDS; k++) {
        for (int i = 0; m->params[k] && i < count_of(m, k); i++) {
            param *p = &m->params[k][i];
            nnt_tensor_destroy(p->p);
            nnt_tensor_destroy(p->g);
            nnt_tensor_destroy(p->m);
            nnt_tensor_destroy(p->v);
            nnt_tensor_destroy(p->p16);
        }
        free(m->params[k]);
    }
    destroy_layer_acts(m);
    free(m->layers);
    nnt_tensor *all[] = {m->tokens, m->targets, m->encoded, m->lnf, m->lnf_mean, m->lnf_rstd,
                         m->logits, m->losses, m->lse, m->heads, m->dheads[0], m->dheads[1],
                         m->dheads[2], m->dheads[3], m->dres, m->dln, m->dx, m->dfch};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        nnt_tensor_destroy(all[i]);
    free(m);
}

/* Activations for the given recompute and bf16-storage settings (their contents are lost);
 * on failure the old settings again, or, failing that too, none (forward then refuses). */
static int rebuild_acts(nnt_gpt2 *m, int recompute, int bf16)
{
    int old_recompute = m->recompute, old_bf16 = m->acts_bf16, first_rc = NNT_OK;
    for (int attempt = 0; attempt < 2; attempt++) {
        destroy_layer_acts(m);
        nnt_tensor_destroy(m->lnf);
        m->lnf = NULL;
        m->recompute = attempt ? old_recompute : recompute;
        m->acts_bf16 = attempt ? old_bf16 : bf16;
        m->acts_missing = 0;
        int rc = create_layer_acts(m);
        if (rc == 0)
            rc = make_operand(m, "BTC", &m->lnf);
        if (rc == 0)
            return first_rc;   /* NNT_OK, or why the new settings failed */
        if (attempt == 0)
            first_rc = rc;
        m->acts_missing = 1;
    }
    return first_rc;
}

int nnt_gpt2_set_float_operands(nnt_gpt2 *m, int keep)
{
    if (!m)
        return nnt_fail(NULL, NNT_E_INVAL, "nnt_gpt2_set_float_operands: model is NULL");
    m->float_operands = keep != 0;
    return NNT_OK;
}

int nnt_gpt2_set_recompute(nnt_gpt2 *m, int enable)
{
    const char *fn = "nnt_gpt_set_recompute";   /* its public name: the only caller */
    if (!m)
        return nnt_fail(NULL, NNT_E_INVAL, "%s: model is NULL", fn);
    enable = enable != 0;
    if (enable == m->recompute)
        return NNT_OK;
    if (m->backward_ready)
        return nnt_fail(m->ctx, NNT_E_STATE, "%s: between a forward with targets and its "
                        "backward (the saved activations would be lost)", fn);
    return rebuild_acts(m, enable, m->acts_bf16);
}

void nnt_gpt2_get_config(const nnt_gpt2 *m, nnt_gpt2_config *cfg)
{
    *cfg = m->cfg;
}

int64_t nnt_gpt2_num_params(const nnt_gpt2 *m)
{
    int64_t n = 0;
    for (int k = 0; k < NKINDS; k++)
        n += count_of(m, k) * numel_of(m->params[k][0].p);
    return n;
}

int64_t nnt_gpt2_step_count(const nnt_gpt2 *m)
{
    return m->step;
}

/* ---- parameters by llm.c name ------------------------------------------------------- */

static int find_kind(nnt_gpt2 *m, const char *fn, const char *name)
{
    int k = kind_by_name(name);
    if (k < 0)
        return nnt_fail(m->ctx, NNT_E_INVAL, "%s: unknown parameter name '%s'", fn,
                        name ? name : "(null)");
    return k;
}

int nnt_gpt2_param_tensors(nnt_gpt2 *m, const char *name, int64_t layer, int piece,
                           nnt_tensor **value, nnt_tensor **grad)
{
    const char *fn = "nnt_gpt2_param_tensors";
    int k = find_kind(m, fn, name);
    if (k < 0)
        return k;
    int64_t nlayers = kinds[k].per_layer ? m->cfg.layers : 1;
    if (layer < 0 || layer >= nlayers || piece < 0 || piece >= kinds[k].pieces)
        return nnt_fail(m->ctx, NNT_E_INVAL, "%s: %s has no layer %lld piece %d", fn, name,
                        (long long)layer, piece);
    param *p = param_at(m, k, layer, piece);
    if (value)
        *value = p->p;
    if (grad)
        *grad = p->g;
    return NNT_OK;
}

int nnt_gpt2_param_numel(const nnt_gpt2 *m, const char *name, int64_t *numel)
{
    int k = kind_by_name(name);
    if (k < 0 || !numel)
        return nnt_fail(m->ctx, NNT_E_INVAL, "nnt_gpt2_param_numel: unknown parameter name "
                        "'%s' or NULL numel", name ? name : "(null)");
    *numel = count_of(m, k) * numel_of(m->params[k][0].p);
    return NNT_OK;
}

/* Pieces of a kind lie one after the other in llm.c's layout (layer-major, then q, k, v). */
static int check_count(nnt_gpt2 *m, const char *fn, int k, size_t count)
{
    int64_t want = count_of(m, k) * numel_of(m->params[k][0].p);
    if ((int64_t)count != want)
        return nnt_fail(m->ctx, NNT_E_INVAL, "%s: %s holds %lld floats, not %zu", fn,
                        kinds[k].name, (long long)want, count);
    return NNT_OK;
}

int nnt_gpt2_export(nnt_gpt2 *m, int which, const char *name, float *dst, size_t count)
{
    const char *fn = "nnt_gpt2_export";
    int k = find_kind(m, fn, name);
    if (k < 0)
        return k;
    if (!dst || (which != NNT_GPT2_PARAMS && which != NNT_GPT2_GRADS))
        return nnt_fail(m->ctx, NNT_E_INVAL, "%s: NULL dst or bad which = %d", fn, which);
    NNT_TRY(check_count(m, fn, k, count));
    int64_t n = numel_of(m->params[k][0].p);
    for (int i = 0; i < count_of(m, k); i++) {
        nnt_tensor *t = which == NNT_GPT2_PARAMS ? m->params[k][i].p : m->params[k][i].g;
        NNT_TRY(nnt_tensor_copy_to_host(t, dst + i * n, (size_t)n * sizeof(float)));
    }
    return NNT_OK;
}

int nnt_gpt2_import(nnt_gpt2 *m, const char *name, const float *src, size_t count)
{
    const char *fn = "nnt_gpt2_import";
    int k = find_kind(m, fn, name);
    if (k < 0)
        return k;
    if (!src)
        return nnt_fail(m->ctx, NNT_E_INVAL, "%s: src is NULL", fn);
    NNT_TRY(check_count(m, fn, k, count));
    int64_t n = numel_of(m->params[k][0].p);
    for (int i = 0; i < count_of(m, k); i++)
        NNT_TRY(nnt_tensor_copy_from_host(m->params[k][i].p, src + i * n, (size_t)n * sizeof(float)));
    return NNT_OK;
}

/* ---- llm.c checkpoints -------------------------------------------------------------- */

static int io_fail(nnt_ctx *ctx, const char *fn, int rc, const char *err)
{
    return nnt_fail(ctx, rc, "%s: %s", fn, err);
}

/* Read every parameter from the checkpoint; wte: its first V rows. */
static int load_params(nnt_gpt2 *m, const nnt_llmc_reader *r, const char *fn)
{
    char err[NNT_IO_ERRLEN];
    for (int k = 0; k < NKINDS; k++) {
        int64_t n = count_of(m, k) * numel_of(m->params[k][0].p);
        float *buf = malloc((size_t)n * sizeof(float));
        if (!buf)
            return nnt_fail(m->ctx, NNT_E_NOMEM, "%s: out of memory", fn);
        const nnt_llmc_param *p = nnt_llmc_find(r, kinds[k].name);
        int rc = NNT_OK;
        if (!p)
            rc = nnt_fail(m->ctx, NNT_E_FORMAT, "%s: no parameter %s", fn, kinds[k].name);
        else if ((rc = nnt_llmc_read(r, k, 0, (uint64_t)n, buf, err, sizeof err)))
            rc = io_fail(m->ctx, fn, rc, err);
        else
            rc = nnt_gpt2_import(m, kinds[k].name, buf, (size_t)n);
        free(buf);
        NNT_TRY(rc);
    }
    return NNT_OK;
}

int nnt_gpt2_load_llmc(nnt_ctx *ctx, const char *path, const nnt_gpt2_tiling *tiling,
                       int64_t B, int64_t T, nnt_gpt2 **out)
{
    const char *fn = "nnt_gpt2_load_llmc";
    char err[NNT_IO_ERRLEN];
    if (!path || !out)
        return nnt_fail(ctx, NNT_E_INVAL, "%s: %s is NULL", fn, path ? "out" : "path");
    *out = NULL;
    nnt_llmc_reader *r = NULL;
    int rc = nnt_llmc_open(path, &r, err, sizeof err);
    if (rc)
        return io_fail(ctx, fn, rc, err);
    const nnt_llmc_config *lc = nnt_llmc_config_of(r);
    nnt_gpt2_config cfg = {lc->vocab_size, lc->padded_vocab_size, lc->max_seq_len,
                           lc->num_layers, lc->num_heads, lc->channels};
    nnt_gpt2 *m = NULL;
    rc = nnt_gpt2_create(ctx, &cfg, tiling, B, T, &m);
    if (rc == 0)
        rc = load_params(m, r, fn);
    nnt_llmc_close(r);
    if (rc) {
        nnt_gpt2_destroy(m);
        return rc;
    }
    *out = m;
    return NNT_OK;
}

int nnt_gpt2_llmc_config(nnt_ctx *ctx, const char *path, nnt_gpt2_config *cfg)
{
    const char *fn = "nnt_gpt2_llmc_config";
    char err[NNT_IO_ERRLEN];
    if (!path || !cfg)
        return nnt_fail(ctx, NNT_E_INVAL, "%s: %s is NULL", fn, path ? "cfg" : "path");
    nnt_llmc_reader *r = NULL;
    int rc = nnt_llmc_open(path, &r, err, sizeof err);
    if (rc)
        return io_fail(ctx, fn, rc, err);
    const nnt_llmc_config *lc = nnt_llmc_config_of(r);
    nnt_gpt2_config c = {lc->vocab_size, lc->padded_vocab_size, lc->max_seq_len,
                         lc->num_layers, lc->num_heads, lc->channels};
    nnt_llmc_close(r);
    *cfg = c;
    return NNT_OK;
}

int nnt_gpt2_save_llmc(nnt_gpt2 *m, const char *path)
{
    const char *fn = "nnt_gpt2_save_llmc";
    char err[NNT_IO_ERRLEN];
    if (!path)
        return nnt_fail(m->ctx, NNT_E_INVAL, "%s: path is NULL", fn);
    nnt_llmc_config lc = {(int32_t)m->cfg.max_seq, (int32_t)m->cfg.vocab,
                          (int32_t)m->cfg.layers, (int32_t)m->cfg.heads,
                          (int32_t)m->cfg.channels, (int32_t)m->cfg.padded_vocab};
    float *bufs[NKINDS] = {NULL};
    int rc = NNT_OK;
    for (int k = 0; k < NKINDS && rc == 0; k++) {
        int64_t n = count_of(m, k) * numel_of(m->params[k][0].p);
        int64_t alloc = k == WTE ? m->cfg.padded_vocab * m->cfg.channels : n;
        bufs[k] = calloc((size_t)alloc, sizeof(float));   /* wte's padding rows stay 0 */
        if (!bufs[k])
            rc = nnt_fail(m->ctx, NNT_E_NOMEM, "%s: out of memory", fn);
        else
            rc = nnt_gpt2_export(m, NNT_GPT2_PARAMS, kinds[k].name, bufs[k], (size_t)n);
    }
    if (rc == 0 && (rc = nnt_llmc_write(path, &lc, (const float *const *)bufs, err, sizeof err)))
        rc = io_fail(m->ctx, fn, rc, err);
    for (int k = 0; k < NKINDS; k++)
        free(bufs[k]);
    return rc;
}

/* ---- Hugging Face safetensors ---------------------------------------------------- */

/* The entry of kind k, layer l, with or without the "transformer." prefix; its name in
 * name. */
static const nnt_st_entry *hf_find(const nnt_st_reader *r, int k, int64_t l, char *name,
                                   size_t len)
{
    static const char *const prefixes[2] = {"transformer.", ""};
    for (int i = 0; i < 2; i++) {
        if (kinds[k].per_layer)
            snprintf(name, len, "%sh.%lld.%s", prefixes[i], (long long)l, kinds[k].hf);
        else
            snprintf(name, len, "%s%s", prefixes[i], kinds[k].hf);
        const nnt_st_entry *e = nnt_st_find(r, name);
        if (e)
            return e;
    }
    return NULL;
}

/* The HF shape of one layer's slice of kind k (n floats): Conv1D weights (in, n / in),
 * wte and wpe (n / C, C), the others (n). */
static int hf_shape(const nnt_gpt2 *m, int k, int64_t n, int64_t *shape)
{
    int64_t in = 0, tile = 0;
    if (kinds[k].hf_in) {
        dim_of(m, kinds[k].hf_in, &in, &tile);
        shape[0] = in;
        shape[1] = n / in;
        return 2;
    }
    if (k == WTE || k == WPE) {
        shape[0] = n / m->cfg.channels;
        shape[1] = m->cfg.channels;
        return 2;
    }
    shape[0] = n;
    return 1;
}

/* Layer l's slice of kind k (n floats) in llm.c layout into dst (tmp: n floats). */
static int hf_read_slice(nnt_gpt2 *m, const nnt_st_reader *r, int k, int64_t l, int64_t n,
                         float *dst, float *tmp, const char *fn)
{
    char name[NNT_IO_MAXNAME + 1], err[NNT_IO_ERRLEN];
    const nnt_st_entry *e = hf_find(r, k, l, name, sizeof name);
    if (!e)
        return nnt_fail(m->ctx, NNT_E_FORMAT, "%s: no tensor %s", fn, name);
    int64_t shape[2];
    int ndim = hf_shape(m, k, n, shape);
    if (e->ndim != ndim || e->shape[0] != shape[0] || (ndim == 2 && e->shape[1] != shape[1]))
        return nnt_fail(m->ctx, NNT_E_FORMAT, "%s: %s has shape (%lld, %lld) (%d dims), "
                        "expected (%lld, %lld) (%d dims)", fn, name, (long long)e->shape[0],
                        (long long)(e->ndim > 1 ? e->shape[1] : 0), e->ndim,
                        (long long)shape[0], (long long)(ndim > 1 ? shape[1] : 0), ndim);
    float *into = kinds[k].hf_in ? tmp : dst;
    int rc = nnt_st_read(r, e, NNT_IO_F32, 0, (uint64_t)n, into, err, sizeof err);
    if (rc)
        return io_fail(m->ctx, fn, rc, err);
    if (kinds[k].hf_in) /* (in, out) -> (out, in) */
        for (int64_t i = 0; i < shape[0]; i++)
            for (int64_t o = 0; o < shape[1]; o++)
                dst[o * shape[0] + i] = tmp[i * shape[1] + o];
    return NNT_OK;
}

static int load_hf_params(nnt_gpt2 *m, const nnt_st_reader *r, const char *fn)
{
    for (int k = 0; k < NKINDS; k++) {
        int64_t n = count_of(m, k) * numel_of(m->params[k][0].p);
        int64_t nl = kinds[k].per_layer ? m->cfg.layers : 1;
        int64_t slice = nl ? n / nl : 0;
        float *buf = malloc((size_t)n * sizeof(float) + 1);
        float *tmp = malloc((size_t)slice * sizeof(float) + 1);
        int rc = buf && tmp ? NNT_OK : nnt_fail(m->ctx, NNT_E_NOMEM, "%s: out of memory", fn);
        for (int64_t l = 0; l < nl && rc == 0; l++)
            rc = hf_read_slice(m, r, k, l, slice, buf + l * slice, tmp, fn);
        if (rc == 0)
            rc = nnt_gpt2_import(m, kinds[k].name, buf, (size_t)n);
        free(buf);
        free(tmp);
        NNT_TRY(rc);
    }
    return NNT_OK;
}

int nnt_gpt2_load_safetensors(nnt_ctx *ctx, const char *path, const nnt_gpt2_config *cfg,
                              const nnt_gpt2_tiling *tiling, int64_t B, int64_t T,
                              nnt_gpt2 **out)
{
    const char *fn = "nnt_gpt2_load_safetensors";
    char err[NNT_IO_ERRLEN];
    if (!path || !out)
        return nnt_fail(ctx, NNT_E_INVAL, "%s: %s is NULL", fn, path ? "out" : "path");
    *out = NULL;
    nnt_gpt2 *m = NULL;
    NNT_TRY(nnt_gpt2_create(ctx, cfg, tiling, B, T, &m));
    nnt_st_reader *r = NULL;
    int rc = nnt_st_open(path, &r, err, sizeof err);
    if (rc)
        rc = io_fail(ctx, fn, rc, err);
    else
        rc = load_hf_params(m, r, fn);
    nnt_st_close(r);
    if (rc) {
        nnt_gpt2_destroy(m);
        return rc;
    }
    *out = m;
    return NNT_OK;
}

/* ---- forward ------------------------------------------------------------------------ */

static const int SWAP_BT_NH[4] = {0, 2, 1, 3};   /* (B, T, NH, hd) <-> (B, NH, T, hd) */

static nnt_tensor *p_of(nnt_gpt2 *m, int kind, int64_t layer, int piece)
{
    return param_at(m, kind, layer, piece)->p;
}

/* A weight as a matrix product's operand: its bf16 copy when the forward made one. */
static nnt_tensor *w_of(nnt_gpt2 *m, int kind, int64_t layer, int piece)
{
    param *p = param_at(m, kind, layer, piece);
    return p->p16 ? p->p16 : p->p;
}

static nnt_tensor *g_of(nnt_gpt2 *m, int kind, int64_t layer, int piece)
{
    return param_at(m, kind, layer, piece)->g;
}

static double attention_scale(const nnt_gpt2 *m)
{
    return 1.0 / sqrt((double)m->hd);
}

/* y = LayerNorm(x) with the parameters (kw, kb) of layer l; into a bf16 y through the float
 * scratch dx (free in the forward; in a recompute its backward use is already done). */
static int layernorm_into(nnt_gpt2 *m, nnt_tensor *x, int kw, int kb, int64_t l, nnt_tensor *y,
                          nnt_tensor *mean, nnt_tensor *rstd)
{
    nnt_tensor *out = y->dtype == NNT_FP32 ? y : m->dx;   // (B, T, C)
    NNT_TRY(nnt_tensor_layernorm(x, p_of(m, kw, l, 0), p_of(m, kb, l, 0), NNT_GPT2_LN_EPS, out,
                                 mean, rstd));
    return out == y ? NNT_OK : nnt_tensor_convert(out, y);
}

/* x (B, T, C) -> q, k, v, atto, atty, residual2 = x + attn(ln_1(x)). */
static int forward_attention(nnt_gpt2 *m, int64_t l, nnt_tensor *x)
{
    layer_acts *a = &m->layers[l];
    NNT_TRY(layernorm_into(m, x, LN1W, LN1B, l, a->ln1, a->ln1_mean, a->ln1_rstd));
    for (int i = 0; i < 3; i++) {
        /* heads (B, T, NH, hd) = ln1 (B, T, C) W_i^T (NH, hd, C) + b_i (NH, hd) */
        NNT_TRY(nnt_tensor_gemm_ex(NNT_NOTRANS, NNT_TRANS, 1.0, a->ln1, w_of(m, QKVW, l, i), 0.0,
                               m->heads, 1, 0, NNT_EPILOGUE_BIAS, p_of(m, QKVB, l, i), NULL));
        NNT_TRY(nnt_tensor_permute(m->heads, SWAP_BT_NH, a->qkv[i]));
    }
    NNT_TRY(nnt_tensor_attention(a->qkv[0], a->qkv[1], a->qkv[2], attention_scale(m), a->atto,
                             a->att_lse));
    if (a->atty->dtype == NNT_FP32) {
        NNT_TRY(nnt_tensor_permute(a->atto, SWAP_BT_NH, a->atty));
    } else {   /* through heads (B, T, NH, hd), free once q, k, v are permuted out */
        NNT_TRY(nnt_tensor_permute(a->atto, SWAP_BT_NH, m->heads));
        NNT_TRY(nnt_tensor_convert(m->heads, a->atty));
    }
    /* residual2 (B, T, C) = x + atty (B, T, NH, hd) attprojw^T (C, NH, hd) + attprojb */
    NNT_TRY(nnt_tensor_copy(x, a->residual2));
    return nnt_tensor_gemm_ex(NNT_NOTRANS, NNT_TRANS, 1.0, a->atty, w_of(m, ATTPROJW, l, 0),
                              1.0, a->residual2, 2, 0, NNT_EPILOGUE_BIAS,
                              p_of(m, ATTPROJB, l, 0), NULL);
}

/* residual2 -> ln2, fch, fch_gelu, and with output residual3 = residual2 +
 * mlp(ln_2(residual2)) (a recompute in backward does not need residual3 again). */
static int forward_mlp(nnt_gpt2 *m, int64_t l, int output)
{
    layer_acts *a = &m->layers[l];
    NNT_TRY(layernorm_into(m, a->residual2, LN2W, LN2B, l, a->ln2, a->ln2_mean, a->ln2_rstd));
    /* fch (B, T, F) = ln2 fcw^T (F, C) + fcb; fch_gelu = gelu(fch), into a bf16 fch_gelu
     * through the float scratch dfch (its backward use comes after a recompute) */
    nnt_tensor *gelu = a->fch_gelu->dtype == NNT_FP32 ? a->fch_gelu : m->dfch;   // (B, T, F)
    NNT_TRY(nnt_tensor_gemm_ex(NNT_NOTRANS, NNT_TRANS, 1.0, a->ln2, w_of(m, FCW, l, 0), 0.0,
                           a->fch, 1, 0, NNT_EPILOGUE_BIAS_GELU, p_of(m, FCB, l, 0), gelu));
    if (gelu != a->fch_gelu)
        NNT_TRY(nnt_tensor_convert(gelu, a->fch_gelu));
    if (!output)
        return NNT_OK;
    /* residual3 (B, T, C) = residual2 + fch_gelu fcprojw^T (C, F) + fcprojb */
    NNT_TRY(nnt_tensor_copy(a->residual2, a->residual3));
    return nnt_tensor_gemm_ex(NNT_NOTRANS, NNT_TRANS, 1.0, a->fch_gelu, w_of(m, FCPROJW, l, 0),
                              1.0, a->residual3, 1, 0, NNT_EPILOGUE_BIAS, p_of(m, FCPROJB, l, 0),
                              NULL);
}

/* Input of layer l's block: the embedding or the previous block's output. */
static nnt_tensor *block_input(nnt_gpt2 *m, int64_t l)
{
    return l == 0 ? m->encoded : m->layers[l - 1].residual3;
}

/* (B, T) int32 src into the model's dst, checking the shape. */
static int take_ids(nnt_gpt2 *m, const char *fn, const char *role, nnt_tensor *src,
                    nnt_tensor *dst)
{
    NNT_TRY(nnt_tensor_check_readable(src, fn));
    NNT_TRY(nnt_check_dtype(fn, role, src, NNT_INT32));
    if (src->ndim != 2 || src->shape[0] != m->B || src->shape[1] != m->T)
        return nnt_fail(m->ctx, NNT_E_SHAPE, "%s: %s must be (B, T) = (%lld, %lld)", fn, role,
                        (long long)m->B, (long long)m->T);
    return nnt_tensor_copy(src, dst);
}

/* Validate the targets on the host and count the positions that are not ignored. */
static int count_targets(nnt_gpt2 *m, const char *fn)
{
    size_t n = (size_t)(m->B * m->T);
    int32_t *ids = malloc(n * sizeof(int32_t));
    if (!ids)
        return nnt_fail(m->ctx, NNT_E_NOMEM, "%s: out of memory", fn);
    int rc = nnt_tensor_copy_to_host(m->targets, ids, n * sizeof(int32_t));
    m->nvalid = 0;
    for (size_t i = 0; rc == 0 && i < n; i++) {
        if (ids[i] == NNT_GPT2_IGNORE)
            continue;
        if (ids[i] < 0 || ids[i] >= m->cfg.vocab)
            rc = nnt_fail(m->ctx, NNT_E_INVAL, "%s: target %d at position %zu is outside "
                          "[0, %lld)", fn, (int)ids[i], i, (long long)m->cfg.vocab);
        m->nvalid++;
    }
    free(ids);
    return rc;
}

/* Mean of the per-position losses over the valid positions, summed in double. */
static int mean_loss(nnt_gpt2 *m, double *loss)
{
    size_t n = (size_t)(m->B * m->T);
    float *l = malloc(n * sizeof(float));
    if (!l)
        return nnt_fail(m->ctx, NNT_E_NOMEM, "nnt_gpt2_loss: out of memory");
    int rc = nnt_tensor_copy_to_host(m->losses, l, n * sizeof(float));
    double sum = 0.0;
    for (size_t i = 0; i < n; i++)
        sum += l[i];   /* ignored positions hold 0 */
    free(l);
    *loss = m->nvalid ? sum / (double)m->nvalid : 0.0;
    return rc;
}

/* Layer l's activations are next read by its backward, which runs in reverse layer order:
 * mark them wont_use so that, under a memory budget, StarPU evicts the earliest layers'
 * first. residual3 is the next layer's input, needed at once: not marked. A hint only. */
static void hint_saved_for_backward(layer_acts *a)
{
    nnt_tensor *saved[] = {a->ln1, a->ln1_mean, a->ln1_rstd, a->qkv[0], a->qkv[1], a->qkv[2],
                           a->atto, a->att_lse, a->atty, a->residual2, a->ln2, a->ln2_mean,
                           a->ln2_rstd, a->fch, a->fch_gelu};
    for (size_t i = 0; i < sizeof saved / sizeof saved[0]; i++)
        nnt_tensor_wont_use(saved[i]);
}

static int is_product_weight(int kind)
{
    return kind == WTE || kind == QKVW || kind == ATTPROJW || kind == FCW || kind == FCPROJW;
}

/* bf16 != 0: the weight matrices the products read get bf16 copies, converted from the fp32
 * master weights once per forward (round to nearest even: the bits each product's own
 * rounding of the fp32 tile would give, so results do not change) and read by the forward,
 * the recompute and the backward; the optimizer keeps updating the fp32 masters. bf16 == 0
 * (or a failure): no copies, the products read the masters. */
static int sync_bf16_weights(nnt_gpt2 *m, int bf16)
{
    int rc = NNT_OK;
    for (int k = 0; k < NKINDS; k++)
        for (int i = 0; is_product_weight(k) && i < count_of(m, k); i++) {
            param *p = &m->params[k][i];
            if (bf16 && rc == NNT_OK && !p->p16)
                rc = nnt_tensor_create(m->ctx, NNT_BF16, p->p->ndim, p->p->shape, p->p->tile,
                                       &p->p16);
            if (bf16 && rc == NNT_OK)
                rc = nnt_tensor_convert(p->p, p->p16);
        }
    if (bf16 && rc == NNT_OK)
        return NNT_OK;
    for (int k = 0; k < NKINDS; k++)
        for (int i = 0; is_product_weight(k) && i < count_of(m, k); i++) {
            nnt_tensor_destroy(m->params[k][i].p16);
            m->params[k][i].p16 = NULL;
        }
    return rc;
}

int nnt_gpt2_forward(nnt_gpt2 *m, nnt_tensor *tokens, nnt_tensor *targets, double *loss)
{
    const char *fn = "nnt_gpt2_forward";
    if (!m || !tokens)
        return nnt_fail(m ? m->ctx : NULL, NNT_E_INVAL, "%s: %s is NULL", fn,
                        m ? "tokens" : "model");
    m->backward_ready = 0;
    if (m->acts_missing)
        return nnt_fail(m->ctx, NNT_E_STATE, "%s: the activations could not be recreated (by "
                        "nnt_gpt2_set_recompute or a change of precision); call it again", fn);
    nnt_precision precision = NNT_PRECISION_FP32;
    nnt_ctx_precision(m->ctx, &precision);
    int bf16 = precision == NNT_PRECISION_BF16 && !m->float_operands;
    if (bf16 != m->acts_bf16)
        NNT_TRY(rebuild_acts(m, m->recompute, bf16));
    NNT_TRY(take_ids(m, fn, "tokens", tokens, m->tokens));
    NNT_TRY(sync_bf16_weights(m, bf16));
    NNT_TRY(nnt_tensor_embedding(m->tokens, p_of(m, WTE, 0, 0), p_of(m, WPE, 0, 0), m->encoded));
    for (int64_t l = 0; l < m->cfg.layers; l++) {
        NNT_TRY(forward_attention(m, l, block_input(m, l)));
        NNT_TRY(forward_mlp(m, l, 1));
        if (!m->recompute)   /* the shared set is overwritten by the next layer at once */
            hint_saved_for_backward(&m->layers[l]);
    }
    nnt_tensor *x = block_input(m, m->cfg.layers);
    NNT_TRY(layernorm_into(m, x, LNFW, LNFB, 0, m->lnf, m->lnf_mean, m->lnf_rstd));
    /* logits (B, T, V) = lnf (B, T, C) wte^T (V, C) */
    NNT_TRY(nnt_tensor_gemm(NNT_NOTRANS, NNT_TRANS, 1.0, m->lnf, w_of(m, WTE, 0, 0), 0.0,
                        m->logits, 1, 0));
    if (!targets)
        return NNT_OK;
    m->loss_ready = 0;
    NNT_TRY(take_ids(m, fn, "targets", targets, m->targets));
    NNT_TRY(count_targets(m, fn));
    NNT_TRY(nnt_tensor_cross_entropy(m->logits, m->targets, NNT_GPT2_IGNORE, m->losses, m->lse));
    m->backward_ready = 1;
    m->loss_ready = 1;
    return loss ? mean_loss(m, loss) : NNT_OK;
}

int nnt_gpt2_loss(nnt_gpt2 *m, double *loss)
{
    if (!m || !loss)
        return nnt_fail(m ? m->ctx : NULL, NNT_E_INVAL, "nnt_gpt2_loss: %s is NULL",
                        m ? "loss" : "model");
    if (!m->loss_ready)
        return nnt_fail(m->ctx, NNT_E_STATE, "nnt_gpt2_loss: no forward with targets");
    return mean_loss(m, loss);
}

/* ---- backward ----------------------------------------------------------------------- */

/* The beta of the first gradient contribution to a parameter in this backward: 0 (write)
 * after nnt_gpt2_clear_grad dropped the gradient, else 1 (add). Consumes the mark. */
static double grad_beta(nnt_gpt2 *m, int kind, int64_t layer, int piece)
{
    param *p = param_at(m, kind, layer, piece);
    double beta = p->g_cleared ? 0.0 : 1.0;
    p->g_cleared = 0;
    return beta;
}

/* Linear layer y = x W^T + b backward, x (B, T, in...), W (out..., in...), dy (B, T, out...):
 * dx = dy W (written, or added with beta_dx = 1), dW (+)= dy^T x, db (+)= sum over (B, T) of
 * dy, for parameter pieces (kw, kb) of layer l (written after a clear_grad, else added).
 * nout: the number of out dimensions (the contracted ones of dx = dy W). */
static int linear_backward(nnt_gpt2 *m, nnt_tensor *x, nnt_tensor *dy, nnt_tensor *dx,
                           double beta_dx, int kw, int kb, int64_t l, int piece, int nout)
{
    NNT_TRY(nnt_tensor_gemm(NNT_NOTRANS, NNT_NOTRANS, 1.0, dy, w_of(m, kw, l, piece), beta_dx,
                            dx, nout, 0));
    NNT_TRY(nnt_tensor_gemm(NNT_TRANS, NNT_NOTRANS, 1.0, dy, x, grad_beta(m, kw, l, piece),
                            g_of(m, kw, l, piece), 2, 0));
    return nnt_tensor_sum_leading(1.0, dy, grad_beta(m, kb, l, piece), g_of(m, kb, l, piece));
}

/* dres holds d loss / d residual3 of layer l; on return d loss / d residual2. */
static int backward_mlp(nnt_gpt2 *m, int64_t l)
{
    layer_acts *a = &m->layers[l];
    /* dfch (B, T, F) = (dres fcprojw) * gelu'(fch) */
    NNT_TRY(nnt_tensor_gemm_ex(NNT_NOTRANS, NNT_NOTRANS, 1.0, m->dres, w_of(m, FCPROJW, l, 0),
                           0.0, m->dfch, 1, 0, NNT_EPILOGUE_DGELU, NULL, a->fch));
    NNT_TRY(nnt_tensor_gemm(NNT_TRANS, NNT_NOTRANS, 1.0, m->dres, a->fch_gelu,
                            grad_beta(m, FCPROJW, l, 0), g_of(m, FCPROJW, l, 0), 2, 0));
    NNT_TRY(nnt_tensor_sum_leading(1.0, m->dres, grad_beta(m, FCPROJB, l, 0),
                                   g_of(m, FCPROJB, l, 0)));
    /* dln (B, T, C) = dfch fcw; fcw, fcb grads */
    NNT_TRY(linear_backward(m, a->ln2, m->dfch, m->dln, 0.0, FCW, FCB, l, 0, 1));
    NNT_TRY(nnt_tensor_layernorm_backward(a->residual2, p_of(m, LN2W, l, 0), a->ln2_mean,
                                      a->ln2_rstd, m->dln, m->dx, g_of(m, LN2W, l, 0),
                                      g_of(m, LN2B, l, 0)));
    return nnt_tensor_axpby(1.0, m->dx, 1.0, m->dres);
}

/* dres holds d loss / d residual2 of layer l; on return d loss / d x (the block input). */
static int backward_attention(nnt_gpt2 *m, int64_t l, nnt_tensor *x)
{
    layer_acts *a = &m->layers[l];
    nnt_tensor *datto = m->dheads[0], *dqkv[3] = {m->dheads[1], m->dheads[2], m->dheads[3]};
    /* heads (B, T, NH, hd) = d atty = dres (B, T, C) attprojw (C, NH, hd) */
    NNT_TRY(linear_backward(m, a->atty, m->dres, m->heads, 0.0, ATTPROJW, ATTPROJB, l, 0, 1));
    NNT_TRY(nnt_tensor_permute(m->heads, SWAP_BT_NH, datto));
    NNT_TRY(nnt_tensor_attention_backward(a->qkv[0], a->qkv[1], a->qkv[2], a->atto, a->att_lse,
                                      datto, attention_scale(m), dqkv[0], dqkv[1], dqkv[2]));
    for (int i = 0; i < 3; i++) {
        /* dln (B, T, C) (+)= d heads_i (B, T, NH, hd) W_i (NH, hd, C) */
        NNT_TRY(nnt_tensor_permute(dqkv[i], SWAP_BT_NH, m->heads));
        NNT_TRY(linear_backward(m, a->ln1, m->heads, m->dln, i ? 1.0 : 0.0, QKVW, QKVB, l, i,
                                2));
    }
    NNT_TRY(nnt_tensor_layernorm_backward(x, p_of(m, LN1W, l, 0), a->ln1_mean, a->ln1_rstd, m->dln,
                                      m->dx, g_of(m, LN1W, l, 0), g_of(m, LN1B, l, 0)));
    return nnt_tensor_axpby(1.0, m->dx, 1.0, m->dres);
}

int nnt_gpt2_backward(nnt_gpt2 *m)
{
    if (!m)
        return nnt_fail(NULL, NNT_E_INVAL, "nnt_gpt2_backward: model is NULL");
    if (!m->backward_ready)
        return nnt_fail(m->ctx, NNT_E_STATE, "nnt_gpt2_backward: no forward with targets "
                        "since the last backward");
    m->backward_ready = 0;
    double scale = m->nvalid ? 1.0 / (double)m->nvalid : 0.0;
    /* logits becomes d loss / d logits (B, T, V) */
    NNT_TRY(nnt_tensor_cross_entropy_backward(m->logits, m->targets, NNT_GPT2_IGNORE, m->lse, scale,
                                          m->logits));
    /* dln (B, T, C) = dlogits wte (V, C); dwte += dlogits^T lnf (lm_head half) */
    NNT_TRY(nnt_tensor_gemm(NNT_NOTRANS, NNT_NOTRANS, 1.0, m->logits, w_of(m, WTE, 0, 0), 0.0, m->dln,
                        1, 0));
    NNT_TRY(nnt_tensor_gemm(NNT_TRANS, NNT_NOTRANS, 1.0, m->logits, m->lnf,
                            grad_beta(m, WTE, 0, 0), g_of(m, WTE, 0, 0), 2, 0));
    NNT_TRY(nnt_tensor_layernorm_backward(block_input(m, m->cfg.layers), p_of(m, LNFW, 0, 0),
                                      m->lnf_mean, m->lnf_rstd, m->dln, m->dres,
                                      g_of(m, LNFW, 0, 0), g_of(m, LNFB, 0, 0)));
    for (int64_t l = m->cfg.layers - 1; l >= 0; l--) {
        /* The shared set still holds the last layer's activations from the forward. */
        if (m->recompute && l < m->cfg.layers - 1) {
            NNT_TRY(forward_attention(m, l, block_input(m, l)));
            NNT_TRY(forward_mlp(m, l, 0));
        }
        NNT_TRY(backward_mlp(m, l));
        NNT_TRY(backward_attention(m, l, block_input(m, l)));
    }
    return nnt_tensor_embedding_backward(m->tokens, m->dres, g_of(m, WTE, 0, 0),
                                         g_of(m, WPE, 0, 0));
}

/* ---- gradients and the optimizer ---------------------------------------------------- */

/* Gradients the backward writes first with a GEMM or a sum (beta 0 possible); the others
 * (LayerNorm parameters, added by its backward kernel, and wpe, scattered into) are
 * zero-filled by nnt_gpt2_clear_grad. */
static int written_first(int kind)
{
    return kind == WTE || kind == QKVW || kind == QKVB || kind == ATTPROJW ||
           kind == ATTPROJB || kind == FCW || kind == FCB || kind == FCPROJW || kind == FCPROJB;
}

/* Zero every gradient, or (drop) drop those the backward can write first. */
static int reset_grads(nnt_gpt2 *m, const char *fn, int drop)
{
    if (!m)
        return nnt_fail(NULL, NNT_E_INVAL, "%s: model is NULL", fn);
    for (int k = 0; k < NKINDS; k++)
        for (int i = 0; i < count_of(m, k); i++) {
            param *p = &m->params[k][i];
            p->g_cleared = drop && written_first(k);
            if (p->g_cleared)
                nnt_tensor_invalidate(p->g);
            else
                NNT_TRY(nnt_tensor_fill(p->g, 0.0));
        }
    return NNT_OK;
}

int nnt_gpt2_zero_grad(nnt_gpt2 *m)
{
    return reset_grads(m, "nnt_gpt2_zero_grad", 0);
}

int nnt_gpt2_clear_grad(nnt_gpt2 *m)
{
    return reset_grads(m, "nnt_gpt2_clear_grad", 1);
}

int nnt_gpt2_grad_sumsq(nnt_gpt2 *m, double *sumsq)
{
    if (!m || !sumsq)
        return nnt_fail(m ? m->ctx : NULL, NNT_E_INVAL, "nnt_gpt2_grad_sumsq: NULL argument");
    int n = 0;
    for (int k = 0; k < NKINDS; k++)
        n += count_of(m, k);
    nnt_tensor **all = malloc((size_t)n * sizeof *all);
    if (!all)
        return nnt_fail(m->ctx, NNT_E_NOMEM, "nnt_gpt2_grad_sumsq: out of memory");
    n = 0;
    for (int k = 0; k < NKINDS; k++)
        for (int i = 0; i < count_of(m, k); i++)
            all[n++] = m->params[k][i].g;
    int rc = nnt_tensors_sumsq(n, all, sumsq);
    free(all);
    return rc;
}

/* Zero moments for every parameter (first step). */
static int create_moments(nnt_gpt2 *m)
{
    for (int k = 0; k < NKINDS; k++)
        for (int i = 0; i < count_of(m, k); i++) {
            param *p = &m->params[k][i];
            if (p->m)
                continue;
            NNT_TRY(make_f32(m, kinds[k].dims, &p->m));
            NNT_TRY(make_f32(m, kinds[k].dims, &p->v));
            NNT_TRY(nnt_tensor_fill(p->m, 0.0));
            NNT_TRY(nnt_tensor_fill(p->v, 0.0));
        }
    return NNT_OK;
}

int nnt_gpt2_adamw_step(nnt_gpt2 *m, const nnt_adam_options *opts)
{
    const char *fn = "nnt_gpt2_adamw_step";
    if (!m || !opts)
        return nnt_fail(m ? m->ctx : NULL, NNT_E_INVAL, "%s: NULL argument", fn);
    if (opts->size != sizeof(nnt_adam_options) || !opts->decoupled)
        return nnt_fail(m->ctx, NNT_E_INVAL, "%s: options need size = sizeof(nnt_adam_options) "
                        "and decoupled = 1", fn);
    NNT_TRY(create_moments(m));
    int64_t step = m->step + 1;
    for (int k = 0; k < NKINDS; k++) {
        nnt_adam_options o = *opts;
        if (!kinds[k].decay)
            o.weight_decay = 0.0;
        for (int i = 0; i < count_of(m, k); i++) {
            param *p = &m->params[k][i];
            NNT_TRY(nnt_tensor_adam_step(&o, step, p->p, p->g, p->m, p->v));
        }
    }
    m->step = step;
    return NNT_OK;
}

/* ---- text generation ---------------------------------------------------------------- */

/* What one nnt_gpt2_generate call holds. */
typedef struct gen_state {
    nnt_tensor *tokens;    // (B, T) int32: the window in row 0, token 0 elsewhere
    nnt_tensor *select;    // (1, B, T) one-hot at (0, last position of the window)
    nnt_tensor *row;       // (1, V) logits of that position: select . logits
    int32_t *ids;          // (B, T) host copy of tokens
    float *onehot;         // (B, T) host copy of select
    nnt_sampler sm;        // its logits: the host copy of row
} gen_state;

static void gen_free(gen_state *g)
{
    nnt_tensor_destroy(g->tokens);
    nnt_tensor_destroy(g->select);
    nnt_tensor_destroy(g->row);
    free(g->ids);
    free(g->onehot);
    nnt_sampler_free(&g->sm);
}

static int gen_alloc(nnt_gpt2 *m, const nnt_gpt2_sampling *s, gen_state *g)
{
    const char *fn = "nnt_gpt2_generate";
    int64_t V = m->cfg.vocab, n = m->B * m->T;
    int64_t sel_shape[3] = {1, m->B, m->T}, sel_tile[3] = {1, m->tile.batch, m->tile.seq};
    int64_t row_shape[2] = {1, V}, row_tile[2] = {1, m->tile.vocab};
    if (s)
        NNT_TRY(nnt_sampler_init(&g->sm, m->ctx, fn, V, s->temperature, s->top_k, s->seed));
    else
        NNT_TRY(nnt_sampler_init(&g->sm, m->ctx, fn, V, 0.0, 0, 0));
    g->ids = calloc((size_t)n, sizeof *g->ids);
    g->onehot = calloc((size_t)n, sizeof *g->onehot);
    if (!g->ids || !g->onehot)
        return nnt_fail(m->ctx, NNT_E_NOMEM, "%s: out of memory", fn);
    NNT_TRY(make_tensor(m, NNT_INT32, "BT", &g->tokens));
    NNT_TRY(nnt_tensor_create(m->ctx, NNT_FP32, 3, sel_shape, sel_tile, &g->select));
    return nnt_tensor_create(m->ctx, NNT_FP32, 2, row_shape, row_tile, &g->row);
}

/* The logits (V) after the first n tokens of the sequence into g->sm.logits: a forward on
 * the last w = min(T, n) of them in row 0, then row = onehot(0, w - 1) . logits on the
 * device (exact: every other term is 0 times a finite logit) so that only V floats come
 * back instead of (B, T, V). */
static int gen_logits(nnt_gpt2 *m, gen_state *g, const int32_t *prompt, int64_t nprompt,
                      const int32_t *out, int64_t n)
{
    int64_t w = n < m->T ? n : m->T, V = m->cfg.vocab, bt = m->B * m->T;
    for (int64_t j = 0; j < w; j++)   /* the rest of ids stays 0 (padding) */
        g->ids[j] = nnt_generate_token_at(prompt, nprompt, out, n - w + j);
    memset(g->onehot, 0, (size_t)bt * sizeof *g->onehot);
    g->onehot[w - 1] = 1.0f;
    NNT_TRY(nnt_tensor_copy_from_host(g->tokens, g->ids, (size_t)bt * sizeof *g->ids));
    NNT_TRY(nnt_gpt2_forward(m, g->tokens, NULL, NULL));
    NNT_TRY(nnt_tensor_copy_from_host(g->select, g->onehot, (size_t)bt * sizeof *g->onehot));
    /* row (1, V) = select (1, B, T) . logits (B, T, V), contracting (B, T) */
    NNT_TRY(nnt_tensor_gemm(NNT_NOTRANS, NNT_NOTRANS, 1.0, g->select, m->logits, 0.0, g->row, 2,
                        0));
    return nnt_tensor_copy_to_host(g->row, g->sm.logits, (size_t)V * sizeof *g->sm.logits);
}

int nnt_gpt2_generate(nnt_gpt2 *m, const int32_t *prompt, int64_t nprompt, int64_t ngen,
                      const nnt_gpt2_sampling *s, int32_t *out)
{
    const char *fn = "nnt_gpt2_generate";
    if (!m)
        return nnt_fail(NULL, NNT_E_INVAL, "%s: model is NULL", fn);
    NNT_TRY(nnt_generate_check(m->ctx, fn, m->cfg.vocab, prompt, nprompt, ngen,
                               s ? s->temperature : 0.0, s ? s->top_k : 0, out));
    if (ngen == 0)
        return NNT_OK;
    gen_state g;
    memset(&g, 0, sizeof g);
    int rc = gen_alloc(m, s, &g);
    for (int64_t i = 0; i < ngen && rc == 0; i++) {
        rc = gen_logits(m, &g, prompt, nprompt, out, nprompt + i);
        if (rc == 0)
            rc = nnt_sampler_pick(&g.sm, m->ctx, fn, &out[i]);
    }
    gen_free(&g);
    return rc;
}

/* ---- activations by name ------------------------------------------------------------ */

static nnt_tensor *layer_activation(layer_acts *a, const char *name)
{
    static const char *names[] = {"ln1", "ln1_mean", "ln1_rstd", "q", "k", "v", "atto",
                                  "att_lse", "atty", "residual2", "ln2", "ln2_mean",
                                  "ln2_rstd", "fch", "fch_gelu", "residual3"};
    nnt_tensor *all[] = {a->ln1, a->ln1_mean, a->ln1_rstd, a->qkv[0], a->qkv[1], a->qkv[2],
                         a->atto, a->att_lse, a->atty, a->residual2, a->ln2, a->ln2_mean,
                         a->ln2_rstd, a->fch, a->fch_gelu, a->residual3};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (strcmp(names[i], name) == 0)
            return all[i];
    return NULL;
}

nnt_tensor *nnt_gpt2_activation(nnt_gpt2 *m, const char *name)
{
    if (!m || !name)
        return NULL;
    int l = -1, used = 0;
    if (sscanf(name, "h%d.%n", &l, &used) == 1 && used > 0)
        return l >= 0 && l < m->cfg.layers ? layer_activation(&m->layers[l], name + used) : NULL;
    static const char *names[] = {"encoded", "lnf", "lnf_mean", "lnf_rstd", "logits",
                                  "losses"};
    nnt_tensor *all[] = {m->encoded, m->lnf, m->lnf_mean, m->lnf_rstd, m->logits, m->losses};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (strcmp(names[i], name) == 0)
            return all[i];
    return NULL;
}

/* ---- saving: Hugging Face safetensors and the training state ------------------------- */

enum { FIELD_P, FIELD_M, FIELD_V, NFIELDS };   /* weights, Adam moments m and v */

static nnt_tensor *field_of(const param *p, int field)
{
    return field == FIELD_P ? p->p : field == FIELD_M ? p->m : p->v;
}

/* Floats of one piece of kind k (e.g. one of q, k, v of qkvw) and of one layer's slice. */
static int64_t piece_numel(const nnt_gpt2 *m, int k)
{
    int64_t n = 1, size = 0, tile = 0;
    for (const char *d = kinds[k].dims; *d; d++) {
        dim_of(m, *d, &size, &tile);
        n *= size;
    }
    return n;
}

static int64_t slice_numel(const nnt_gpt2 *m, int k)
{
    return kinds[k].pieces * piece_numel(m, k);
}

static int64_t layers_of(const nnt_gpt2 *m, int k)
{
    return kinds[k].per_layer ? m->cfg.layers : 1;
}

/* The largest slice of any kind (wte's unless the MLP is bigger). */
static int64_t max_slice_numel(const nnt_gpt2 *m)
{
    int64_t most = 1;
    for (int k = 0; k < NKINDS; k++)
        most = slice_numel(m, k) > most ? slice_numel(m, k) : most;
    return most;
}

/* Layer l's slice of kind k (slice_numel floats, llm.c layout: the pieces one after the
 * other) of one field into dst; moments the model does not have yet are zeros. */
static int slice_to_host(nnt_gpt2 *m, int k, int64_t l, int field, float *dst)
{
    int64_t n = piece_numel(m, k);
    for (int i = 0; i < kinds[k].pieces; i++) {
        nnt_tensor *t = field_of(param_at(m, k, l, i), field);
        if (!t)
            memset(dst + i * n, 0, (size_t)n * sizeof(float));
        else
            NNT_TRY(nnt_tensor_copy_to_host(t, dst + i * n, (size_t)n * sizeof(float)));
    }
    return NNT_OK;
}

/* "transformer.h.<l>.<hf>" or "transformer.<hf>". */
static void hf_name(int k, int64_t l, char *name, size_t len)
{
    if (kinds[k].per_layer)
        snprintf(name, len, "transformer.h.%lld.%s", (long long)l, kinds[k].hf);
    else
        snprintf(name, len, "transformer.%s", kinds[k].hf);
}

/* llm.c (out, in) -> HF Conv1D (in, out), shape (in, out) given. */
static void to_conv1d(const float *src, float *dst, const int64_t shape[2])
{
    for (int64_t i = 0; i < shape[0]; i++)
        for (int64_t o = 0; o < shape[1]; o++)
            dst[i * shape[1] + o] = src[o * shape[0] + i];
}

/* Declare every HF tensor (streamed), in llm.c's order, layer by layer. */
static int hf_declare(nnt_gpt2 *m, nnt_st_writer *w, char *err, size_t errlen)
{
    char name[256];
    for (int k = 0; k < NKINDS; k++)
        for (int64_t l = 0; l < layers_of(m, k); l++) {
            int64_t shape[2];
            int ndim = hf_shape(m, k, slice_numel(m, k), shape);
            hf_name(k, l, name, sizeof name);
            int rc = nnt_st_writer_add(w, name, NNT_IO_F32, ndim, shape, NULL, err, errlen);
            if (rc)
                return rc;
        }
    return NNT_OK;
}

/* Stream the HF tensors declared by hf_declare. io: set when the failure is lib/io's (the
 * message is in err), else the context has it. */
static int hf_stream(nnt_gpt2 *m, nnt_st_writer *w, float *buf, float *tmp, int *io, char *err,
                     size_t errlen)
{
    for (int k = 0; k < NKINDS; k++)
        for (int64_t l = 0; l < layers_of(m, k); l++) {
            int64_t n = slice_numel(m, k), shape[2];
            NNT_TRY(slice_to_host(m, k, l, FIELD_P, buf));
            hf_shape(m, k, n, shape);
            if (kinds[k].hf_in)
                to_conv1d(buf, tmp, shape);
            *io = 1;
            NNT_TRY(nnt_st_writer_write(w, kinds[k].hf_in ? tmp : buf, (size_t)n * sizeof(float),
                                    err, errlen));
            *io = 0;
        }
    return NNT_OK;
}

int nnt_gpt2_save_safetensors(nnt_gpt2 *m, const char *path)
{
    const char *fn = "nnt_gpt2_save_safetensors";
    char err[NNT_IO_ERRLEN];
    if (!m || !path)
        return nnt_fail(m ? m->ctx : NULL, NNT_E_INVAL, "%s: %s is NULL", fn,
                        m ? "path" : "model");
    int64_t most = max_slice_numel(m);
    float *buf = malloc((size_t)most * sizeof(float)), *tmp = malloc((size_t)most * sizeof(float));
    if (!buf || !tmp) {
        free(buf);
        free(tmp);
        return nnt_fail(m->ctx, NNT_E_NOMEM, "%s: out of memory", fn);
    }
    nnt_st_writer *w = NULL;
    int io = 1;
    int rc = nnt_st_writer_begin(path, &w, err, sizeof err);
    if (rc == 0)
        rc = nnt_st_writer_meta(w, "format", "pt", err, sizeof err);
    if (rc == 0)
        rc = hf_declare(m, w, err, sizeof err);
    if (rc == 0)
        rc = hf_stream(m, w, buf, tmp, &io, err, sizeof err);
    if (rc == 0) {
        io = 1;
        rc = nnt_st_writer_finish(w, err, sizeof err);   /* frees w */
        w = NULL;
    }
    nnt_st_writer_abort(w);
    free(buf);
    free(tmp);
    return rc && io ? io_fail(m->ctx, fn, rc, err) : rc;
}

/* ---- training state ------------------------------------------------------------------ */

#define STATE_FORMAT "nnt-gpt2-train-state"
#define STATE_VERSION "1"
#define STATE_NTENSORS (NFIELDS * NKINDS)

/* Metadata keys in checksum order; the two checksums last (not hashed). */
enum {
    META_FORMAT, META_VERSION, META_V, META_VP, META_MAXT, META_L, META_NH, META_C, META_STEP,
    META_DATA_POS, META_RNG, META_OPTIONS, META_CHECKSUM, META_DATA_CHECKSUM, NMETA
};
static const char *const meta_keys[NMETA] = {
    "format", "format_version", "V", "Vp", "maxT", "L", "NH", "C", "step", "data_pos", "rng",
    "options", "meta_checksum", "data_checksum"};
static const char *const field_prefix[NFIELDS] = {"param.", "adam_m.", "adam_v."};

/* The metadata values in meta_keys order, each with its NUL. */
static uint64_t hash_meta(const char *const values[NMETA])
{
    uint64_t h = NNT_FNV_OFFSET;
    for (int i = 0; i < META_CHECKSUM; i++)
        h = nnt_fnv1a_bytes(h, values[i], strlen(values[i]) + 1);
    return h;
}

/* llm.c shape of kind k: (L, slice...) for per-layer kinds; slices are (out, in) matrices,
 * (rows, C) for wte/wpe, or vectors. */
static int llmc_shape(const nnt_gpt2 *m, int k, int64_t *shape)
{
    int nd = 0;
    int64_t n = slice_numel(m, k), in = 0, tile = 0;
    if (kinds[k].per_layer)
        shape[nd++] = m->cfg.layers;
    if (kinds[k].hf_in || k == WTE || k == WPE) {
        if (kinds[k].hf_in)
            dim_of(m, kinds[k].hf_in, &in, &tile);
        else
            in = m->cfg.channels;
        shape[nd++] = n / in;
        shape[nd++] = in;
    } else {
        shape[nd++] = n;
    }
    return nd;
}

static void state_tensor_name(int field, int k, char *name, size_t len)
{
    snprintf(name, len, "%s%s", field_prefix[field], kinds[k].name);
}

/* Checksum of every tensor, streamed in file order. */
static int state_checksum(nnt_gpt2 *m, float *buf, uint64_t *sum)
{
    uint64_t h = NNT_FNV_OFFSET;
    for (int f = 0; f < NFIELDS; f++)
        for (int k = 0; k < NKINDS; k++)
            for (int64_t l = 0; l < layers_of(m, k); l++) {
                NNT_TRY(slice_to_host(m, k, l, f, buf));
                h = nnt_fnv1a_floats(h, buf, (size_t)slice_numel(m, k));
            }
    *sum = h;
    return NNT_OK;
}

/* Metadata pairs and tensor declarations (io errors: message in err). */
static int state_declare(nnt_gpt2 *m, nnt_st_writer *w, const char *const values[NMETA],
                         char *err, size_t errlen)
{
    char name[64];
    int rc = NNT_OK;
    for (int i = 0; i < NMETA && rc == 0; i++)
        rc = nnt_st_writer_meta(w, meta_keys[i], values[i], err, errlen);
    for (int f = 0; f < NFIELDS && rc == 0; f++)
        for (int k = 0; k < NKINDS && rc == 0; k++) {
            int64_t shape[3];
            int ndim = llmc_shape(m, k, shape);
            state_tensor_name(f, k, name, sizeof name);
            rc = nnt_st_writer_add(w, name, NNT_IO_F32, ndim, shape, NULL, err, errlen);
        }
    return rc;
}

static int state_stream(nnt_gpt2 *m, nnt_st_writer *w, float *buf, int *io, char *err,
                        size_t errlen)
{
    for (int f = 0; f < NFIELDS; f++)
        for (int k = 0; k < NKINDS; k++)
            for (int64_t l = 0; l < layers_of(m, k); l++) {
                NNT_TRY(slice_to_host(m, k, l, f, buf));
                *io = 1;
                NNT_TRY(nnt_st_writer_write(w, buf, (size_t)slice_numel(m, k) * sizeof(float),
                                        err, errlen));
                *io = 0;
            }
    return NNT_OK;
}

/* Decimal strings of the metadata (text: NMETA buffers of 96 bytes, options apart). */
static void state_values(const nnt_gpt2 *m, const nnt_gpt2_train_state *st,
                         char text[][96], const char *values[NMETA])
{
    static const nnt_gpt2_train_state none = {0, {0, 0, 0, 0}, NULL};
    const nnt_gpt2_config *c = &m->cfg;
    const int64_t ints[] = {c->vocab, c->padded_vocab, c->max_seq, c->layers, c->heads,
                            c->channels, m->step};
    if (!st)
        st = &none;
    values[META_FORMAT] = STATE_FORMAT;
    values[META_VERSION] = STATE_VERSION;
    for (int i = META_V; i <= META_STEP; i++) {
        snprintf(text[i], 96, "%lld", (long long)ints[i - META_V]);
        values[i] = text[i];
    }
    snprintf(text[META_DATA_POS], 96, "%llu", (unsigned long long)st->data_pos);
    snprintf(text[META_RNG], 96, "[%llu,%llu,%llu,%llu]", (unsigned long long)st->rng[0],
             (unsigned long long)st->rng[1], (unsigned long long)st->rng[2],
             (unsigned long long)st->rng[3]);
    values[META_DATA_POS] = text[META_DATA_POS];
    values[META_RNG] = text[META_RNG];
    values[META_OPTIONS] = st->options ? st->options : "";
    snprintf(text[META_CHECKSUM], 96, "%016llx", (unsigned long long)hash_meta(values));
    values[META_CHECKSUM] = text[META_CHECKSUM];
    values[META_DATA_CHECKSUM] = "";
}

int nnt_gpt2_save_state(nnt_gpt2 *m, const char *path, const nnt_gpt2_train_state *st)
{
    const char *fn = "nnt_gpt2_save_state";
    char err[NNT_IO_ERRLEN], text[NMETA][96];
    const char *values[NMETA];
    if (!m || !path)
        return nnt_fail(m ? m->ctx : NULL, NNT_E_INVAL, "%s: %s is NULL", fn,
                        m ? "path" : "model");
    state_values(m, st, text, values);
    float *buf = malloc((size_t)max_slice_numel(m) * sizeof(float));
    if (!buf)
        return nnt_fail(m->ctx, NNT_E_NOMEM, "%s: out of memory", fn);
    uint64_t sum = 0;
    int rc = state_checksum(m, buf, &sum);   /* first pass: nothing written yet */
    if (rc) {
        free(buf);
        return rc;
    }
    snprintf(text[META_DATA_CHECKSUM], 96, "%016llx", (unsigned long long)sum);
    values[META_DATA_CHECKSUM] = text[META_DATA_CHECKSUM];
    nnt_st_writer *w = NULL;
    int io = 1;
    rc = nnt_st_writer_begin(path, &w, err, sizeof err);
    if (rc == 0)
        rc = state_declare(m, w, values, err, sizeof err);
    if (rc == 0)
        rc = state_stream(m, w, buf, &io, err, sizeof err);
    if (rc == 0) {
        io = 1;
        rc = nnt_st_writer_finish(w, err, sizeof err);   /* frees w */
        w = NULL;
    }
    nnt_st_writer_abort(w);
    free(buf);
    return rc && io ? io_fail(m->ctx, fn, rc, err) : rc;
}

/* ---- reading a state ---------------------------------------------------------------- */

typedef struct state_meta {
    const char *values[NMETA];   /* borrowed from the reader */
    nnt_gpt2_config cfg;
    int64_t step;
    uint64_t data_pos, rng[4], data_checksum;
} state_meta;

/* Parse and check every metadata value (NNT_E_FORMAT naming the key). */
static int read_state_meta(nnt_ctx *ctx, const char *fn, const char *path,
                           const nnt_st_reader *r, state_meta *sm)
{
    for (int i = 0; i < NMETA; i++) {
        sm->values[i] = nnt_st_metadata_get(r, meta_keys[i]);
        if (!sm->values[i])
            return nnt_fail(ctx, NNT_E_FORMAT, "%s: %s: no metadata key '%s' (not a GPT-2 "
                            "training state)", fn, path, meta_keys[i]);
    }
    if (strcmp(sm->values[META_FORMAT], STATE_FORMAT) != 0)
        return nnt_fail(ctx, NNT_E_FORMAT, "%s: %s: format is '%s', not '%s'", fn, path,
                        sm->values[META_FORMAT], STATE_FORMAT);
    if (strcmp(sm->values[META_VERSION], STATE_VERSION) != 0)
        return nnt_fail(ctx, NNT_E_FORMAT, "%s: %s: format_version '%s' is not %s", fn, path,
                        sm->values[META_VERSION], STATE_VERSION);
    int64_t *ints[] = {&sm->cfg.vocab, &sm->cfg.padded_vocab, &sm->cfg.max_seq,
                       &sm->cfg.layers, &sm->cfg.heads, &sm->cfg.channels, &sm->step};
    for (int i = META_V; i <= META_STEP; i++) {
        uint64_t v = 0;
        if (nnt_meta_parse_u64_all(sm->values[i], &v) || v > INT64_MAX)
            return nnt_fail(ctx, NNT_E_FORMAT, "%s: %s: metadata '%s' = '%s' is not a "
                            "non-negative integer", fn, path, meta_keys[i], sm->values[i]);
        *ints[i - META_V] = (int64_t)v;
    }
    if (nnt_meta_parse_u64_all(sm->values[META_DATA_POS], &sm->data_pos))
        return nnt_fail(ctx, NNT_E_FORMAT, "%s: %s: metadata 'data_pos' = '%s' is not an "
                        "unsigned 64-bit integer", fn, path, sm->values[META_DATA_POS]);
    if (nnt_meta_parse_rng(sm->values[META_RNG], sm->rng))
        return nnt_fail(ctx, NNT_E_FORMAT, "%s: %s: metadata 'rng' = '%s' is not "
                        "[s0,s1,s2,s3]", fn, path, sm->values[META_RNG]);
    uint64_t meta_sum = 0;
    for (int i = META_CHECKSUM; i <= META_DATA_CHECKSUM; i++)
        if (nnt_meta_parse_hex64(sm->values[i], i == META_CHECKSUM ? &meta_sum : &sm->data_checksum))
            return nnt_fail(ctx, NNT_E_FORMAT, "%s: %s: metadata '%s' = '%s' is not 16 "
                            "lowercase hex digits", fn, path, meta_keys[i], sm->values[i]);
    if (meta_sum != hash_meta(sm->values))
        return nnt_fail(ctx, NNT_E_FORMAT, "%s: %s: the metadata checksum %016llx does not "
                        "match (corrupted file)", fn, path, (unsigned long long)meta_sum);
    const nnt_gpt2_config *c = &sm->cfg;
    if (c->vocab < 1 || c->padded_vocab < c->vocab || c->max_seq < 1 || c->heads < 1 ||
        c->channels < 1 || c->channels % c->heads)
        return nnt_fail(ctx, NNT_E_FORMAT, "%s: %s: bad configuration V=%lld Vp=%lld "
                        "maxT=%lld L=%lld NH=%lld C=%lld", fn, path, (long long)c->vocab,
                        (long long)c->padded_vocab, (long long)c->max_seq,
                        (long long)c->layers, (long long)c->heads, (long long)c->channels);
    return NNT_OK;
}

static int open_state(nnt_ctx *ctx, const char *fn, const char *path, nnt_st_reader **r,
                      state_meta *sm)
{
    char err[NNT_IO_ERRLEN];
    int rc = nnt_st_open(path, r, err, sizeof err);
    if (rc)
        return io_fail(ctx, fn, rc, err);
    rc = read_state_meta(ctx, fn, path, *r, sm);
    if (rc) {
        nnt_st_close(*r);
        *r = NULL;
    }
    return rc;
}

static int check_state_config(nnt_gpt2 *m, const char *fn, const char *path,
                              const nnt_gpt2_config *c)
{
    const nnt_gpt2_config *h = &m->cfg;
    if (c->vocab == h->vocab && c->max_seq == h->max_seq && c->layers == h->layers &&
        c->heads == h->heads && c->channels == h->channels)
        return NNT_OK;
    return nnt_fail(m->ctx, NNT_E_SHAPE, "%s: %s holds a model with V=%lld maxT=%lld L=%lld "
                    "NH=%lld C=%lld, this model has V=%lld maxT=%lld L=%lld NH=%lld C=%lld",
                    fn, path, (long long)c->vocab, (long long)c->max_seq,
                    (long long)c->layers, (long long)c->heads, (long long)c->channels,
                    (long long)h->vocab, (long long)h->max_seq, (long long)h->layers,
                    (long long)h->heads, (long long)h->channels);
}

/* Exactly the 3 x 16 tensors, F32, with the model's llm.c shapes. */
static int check_state_tensors(nnt_gpt2 *m, const char *fn, const char *path,
                               const nnt_st_reader *r)
{
    char name[64];
    if (nnt_st_count(r) != STATE_NTENSORS)
        return nnt_fail(m->ctx, NNT_E_FORMAT, "%s: %s holds %zu tensors, not %d", fn, path,
                        nnt_st_count(r), STATE_NTENSORS);
    for (int f = 0; f < NFIELDS; f++)
        for (int k = 0; k < NKINDS; k++) {
            int64_t shape[3];
            int ndim = llmc_shape(m, k, shape), same = 1;
            state_tensor_name(f, k, name, sizeof name);
            const nnt_st_entry *e = nnt_st_find(r, name);
            if (!e)
                return nnt_fail(m->ctx, NNT_E_FORMAT, "%s: %s: no tensor %s", fn, path, name);
            for (int d = 0; d < ndim; d++)
                same = same && e->ndim == ndim && e->shape[d] == shape[d];
            if (e->dtype != NNT_IO_F32 || !same)
                return nnt_fail(m->ctx, NNT_E_FORMAT, "%s: %s: tensor %s is %s with %d "
                                "dimensions, not F32 of the model's llm.c shape (%d "
                                "dimensions)", fn, path, name, nnt_io_dtype_name(e->dtype),
                                e->ndim, ndim);
        }
    return NNT_OK;
}

/* Elements [first, first + n) of e into buf. */
static int read_floats(nnt_ctx *ctx, const char *fn, const nnt_st_reader *r,
                       const nnt_st_entry *e, uint64_t first, uint64_t n, float *buf)
{
    char err[NNT_IO_ERRLEN];
    int rc = nnt_st_read(r, e, NNT_IO_F32, first, n, buf, err, sizeof err);
    return rc ? io_fail(ctx, fn, rc, err) : NNT_OK;
}

/* The checksum over every tensor in file order must be the stored one. */
static int verify_state_checksum(nnt_gpt2 *m, const char *fn, const char *path,
                                 const nnt_st_reader *r, const state_meta *sm, float *buf,
                                 uint64_t chunk)
{
    uint64_t h = NNT_FNV_OFFSET;
    for (size_t i = 0; i < nnt_st_count(r); i++) {
        const nnt_st_entry *e = nnt_st_entry_at(r, i);
        for (uint64_t at = 0; at < e->numel; at += chunk) {
            uint64_t n = e->numel - at < chunk ? e->numel - at : chunk;
            NNT_TRY(read_floats(m->ctx, fn, r, e, at, n, buf));
            h = nnt_fnv1a_floats(h, buf, (size_t)n);
        }
    }
    if (h != sm->data_checksum)
        return nnt_fail(m->ctx, NNT_E_FORMAT, "%s: %s: data checksum %016llx does not match "
                        "the stored %016llx (corrupted file)", fn, path, (unsigned long long)h,
                        (unsigned long long)sm->data_checksum);
    return NNT_OK;
}

/* Every piece of every field from the file (buf: one piece). */
static int import_state(nnt_gpt2 *m, const char *fn, const nnt_st_reader *r, float *buf)
{
    char name[64];
    for (int f = 0; f < NFIELDS; f++)
        for (int k = 0; k < NKINDS; k++) {
            state_tensor_name(f, k, name, sizeof name);
            const nnt_st_entry *e = nnt_st_find(r, name);
            int64_t n = piece_numel(m, k);
            for (int64_t l = 0; l < layers_of(m, k); l++)
                for (int i = 0; i < kinds[k].pieces; i++) {
                    uint64_t first = (uint64_t)((l * kinds[k].pieces + i) * n);
                    NNT_TRY(read_floats(m->ctx, fn, r, e, first, (uint64_t)n, buf));
                    NNT_TRY(nnt_tensor_copy_from_host(field_of(param_at(m, k, l, i), f), buf,
                                                  (size_t)n * sizeof(float)));
                }
        }
    return NNT_OK;
}

static int user_section(nnt_gpt2 *m, const char *fn, const state_meta *sm,
                        nnt_gpt2_train_state *st)
{
    size_t n = strlen(sm->values[META_OPTIONS]);
    char *options = malloc(n + 1);
    if (!options)
        return nnt_fail(m->ctx, NNT_E_NOMEM, "%s: out of memory", fn);
    memcpy(options, sm->values[META_OPTIONS], n + 1);
    st->data_pos = sm->data_pos;
    memcpy(st->rng, sm->rng, sizeof st->rng);
    st->options = options;
    return NNT_OK;
}

/* Everything is checked before the model changes: structure, config, checksum. */
static int load_state_from(nnt_gpt2 *m, const char *fn, const char *path,
                           const nnt_st_reader *r, const state_meta *sm,
                           nnt_gpt2_train_state *st)
{
    NNT_TRY(check_state_config(m, fn, path, &sm->cfg));
    NNT_TRY(check_state_tensors(m, fn, path, r));
    uint64_t chunk = (uint64_t)max_slice_numel(m);
    float *buf = malloc((size_t)chunk * sizeof(float));
    if (!buf)
        return nnt_fail(m->ctx, NNT_E_NOMEM, "%s: out of memory", fn);
    nnt_gpt2_train_state got = {0, {0, 0, 0, 0}, NULL};
    int rc = verify_state_checksum(m, fn, path, r, sm, buf, chunk);
    if (rc == 0 && st)
        rc = user_section(m, fn, sm, &got);
    if (rc == 0)
        rc = create_moments(m);
    if (rc == 0)
        rc = import_state(m, fn, r, buf);
    if (rc == 0)
        rc = nnt_gpt2_zero_grad(m);
    free(buf);
    if (rc) {
        free(got.options);
        return rc;
    }
    m->step = sm->step;
    m->backward_ready = 0;
    if (st)
        *st = got;
    return NNT_OK;
}

int nnt_gpt2_load_state(nnt_gpt2 *m, const char *path, nnt_gpt2_train_state *st)
{
    const char *fn = "nnt_gpt2_load_state";
    if (!m || !path)
        return nnt_fail(m ? m->ctx : NULL, NNT_E_INVAL, "%s: %s is NULL", fn,
                        m ? "path" : "model");
    nnt_st_reader *r = NULL;
    state_meta sm;
    NNT_TRY(open_state(m->ctx, fn, path, &r, &sm));
    int rc = load_state_from(m, fn, path, r, &sm, st);
    nnt_st_close(r);
    return rc;
}

int nnt_gpt2_state_config(nnt_ctx *ctx, const char *path, nnt_gpt2_config *cfg)
{
    const char *fn = "nnt_gpt2_state_config";
    if (!path || !cfg)
        return nnt_fail(ctx, NNT_E_INVAL, "%s: %s is NULL", fn, path ? "cfg" : "path");
    nnt_st_reader *r = NULL;
    state_meta sm;
    NNT_TRY(open_state(ctx, fn, path, &r, &sm));
    nnt_st_close(r);
    *cfg = sm.cfg;
    return NNT_OK;
}

void nnt_gpt2_train_state_clear(nnt_gpt2_train_state *st)
{
    if (!st)
        return;
    free(st->options);
    memset(st, 0, sizeof *st);
}
