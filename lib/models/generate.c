/* Text generation for every model (nnt_model_generate, nnt_gpt_generate): a tree of the
 * generic layers (NNT_LAYER_MODEL, transformer.c), or the one inside a GPT layer.
 *
 * Per new token, on the last w = min(n, window) tokens of the n so far (window: max_seq for
 * a tree, T for a GPT layer), as tokens (1, w) in one tile: the children up to the final
 * norm give the hidden states (1, w, C); their last row is copied on the device into
 * (1, 1, C) and only that row goes through "lm_head", so that V logits are computed and come
 * back instead of (1, w, V) (the head is also w times cheaper). The "loss" child is not run:
 * the targets set for training stay set. There is no key/value cache: every token is a
 * forward over the whole window. */
#include "models.h"
#include "sample.h"

#include "../layers/layer.h"

#include <string.h>

/* What one generation holds. */
typedef struct gen {
    nnt_layer *model;
    int64_t window;          /* the most tokens a forward sees                            */
    int32_t *ids;            // (window) host copy of the window
    nnt_tensor *tokens;      // (1, w) int32, one tile
    nnt_tensor *last;        // (1, 1, C) the final norm's output at the last position
    nnt_sampler sm;
} gen;

static void gen_free(gen *g)
{
    nnt_tensor_destroy(g->tokens);
    nnt_tensor_destroy(g->last);
    free(g->ids);
    nnt_sampler_free(&g->sm);
}

/* No backward may follow: the activations of the earlier forward are overwritten. */
static void cancel_backward(nnt_layer *l)
{
    l->forward_pending = 0;
    for (int i = 0; i < l->nchildren; i++)
        cancel_backward(l->children[i]);
}

/* (Re)create *t as (dtype, ndim, shape) with tile unless it already is one. */
static int ensure(nnt_ctx *ctx, nnt_tensor **t, nnt_dtype dtype, int ndim,
                  const int64_t *shape, const int64_t *tile)
{
    nnt_tensor *x = *t;
    int same = x && x->dtype == dtype && x->ndim == ndim;
    for (int d = 0; same && d < ndim; d++)
        same = x->shape[d] == shape[d] && x->tile[d] == (tile[d] < shape[d] ? tile[d] : shape[d]);
    if (same)
        return NNT_OK;
    nnt_tensor_destroy(x);
    *t = NULL;
    return nnt_tensor_create(ctx, dtype, ndim, shape, tile, t);
}

/* dst (1, 1, C), tiles (1, 1, src's C tile) = the last row of src (1, w, C), any tiling: one
 * copy task per C tile from the tile holding row w - 1. */
static int copy_last_row(nnt_ctx *ctx, nnt_tensor *src, nnt_tensor **dst)
{
    int64_t w = src->shape[1], C = src->shape[2];
    int64_t shape[3] = {1, 1, C}, tile[3] = {1, 1, src->tile[2]};
    NNT_TRY(ensure(ctx, dst, NNT_FP32, 3, shape, tile));
    for (int64_t j = 0; j < src->grid[2]; j++) {
        int64_t coord[3] = {0, (w - 1) / src->tile[1], j}, origin[3], box[3];
        nnt_tensor_tile_box(src, coord, origin, box);
        nnt_copy_box b;
        memset(&b, 0, sizeof b);
        b.shape[0] = box[2];
        b.src_stride[0] = b.dst_stride[0] = 1;
        b.src_offset = (w - 1 - origin[1]) * box[2];   /* row w - 1 of the (1, rows, c) tile */
        starpu_data_handle_t h = src->tiles[nnt_tensor_tile_index(src, coord)].handle;
        NNT_TRY(nnt_insert_copy(ctx, (*dst)->tiles[j].handle, STARPU_W, 1, &h, 1, src->elsize,
                                1, &b));
    }
    nnt_tensor_mark_written(*dst);
    return NNT_OK;
}

/* The logits (V) after the first n tokens into g->sm.logits. Children: the embedding,
 * the blocks, the final norm, the head, the loss. */
static int gen_logits(gen *g, const int32_t *prompt, int64_t nprompt, const int32_t *out,
                      int64_t n)
{
    nnt_layer *m = g->model;
    int64_t w = n < g->window ? n : g->window, shape[2] = {1, w};
    for (int64_t j = 0; j < w; j++)
        g->ids[j] = nnt_generate_token_at(prompt, nprompt, out, n - w + j);
    NNT_TRY(ensure(m->ctx, &g->tokens, NNT_INT32, 2, shape, shape));
    NNT_TRY(nnt_tensor_copy_from_host(g->tokens, g->ids, (size_t)w * sizeof *g->ids));
    nnt_tensor *x = g->tokens, *logits = NULL;   // (1, w) -> (1, w, C)
    for (int i = 0; i < m->nchildren - 2; i++)
        NNT_TRY(nnt_layer_forward(m->children[i], x, &x));
    NNT_TRY(copy_last_row(m->ctx, x, &g->last));
    NNT_TRY(nnt_layer_forward(m->children[m->nchildren - 2], g->last, &logits));   // (1, 1, V)
    return nnt_tensor_copy_to_host(logits, g->sm.logits, (size_t)g->sm.V * sizeof(float));
}

static int tree_generate(nnt_layer *model, const char *fn, int64_t window, int64_t V,
                         const int32_t *prompt, int64_t nprompt, int64_t ngen,
                         const nnt_sampling *s, int32_t *out)
{
    nnt_layer *loss = model->nchildren >= 3 ? model->children[model->nchildren - 1] : NULL;
    if (!loss || loss->vt->kind != NNT_LAYER_CROSS_ENTROPY)
        return nnt_fail(model->ctx, NNT_E_INVAL, "%s: the model does not end in a head and a "
                        "cross-entropy layer", fn);
    gen g;
    memset(&g, 0, sizeof g);
    g.model = model;
    g.window = window;
    int rc = s ? nnt_sampler_init(&g.sm, model->ctx, fn, V, s->temperature, s->top_k, s->seed)
               : nnt_sampler_init(&g.sm, model->ctx, fn, V, 0.0, 0, 0);
    g.ids = rc ? NULL : malloc((size_t)window * sizeof *g.ids);
    if (rc == 0 && !g.ids)
        rc = nnt_fail(model->ctx, NNT_E_NOMEM, "%s: out of memory", fn);
    for (int64_t i = 0; i < ngen && rc == 0; i++) {
        rc = gen_logits(&g, prompt, nprompt, out, nprompt + i);
        if (rc == 0)
            rc = nnt_sampler_pick(&g.sm, model->ctx, fn, &out[i]);
    }
    cancel_backward(model);
    gen_free(&g);
    return rc;
}

int nnt_model_run_generate(nnt_layer *model, const char *fn, const int32_t *prompt,
                           int64_t nprompt, int64_t ngen, const nnt_sampling *s,
                           int32_t *out)
{
    nnt_model_config cfg;
    NNT_TRY(nnt_model_config_get(model, fn, &cfg));
    if (s)
        NNT_TRY(nnt_check_struct_size(model->ctx, fn, "s->size", s->size, sizeof(nnt_sampling),
                                      "initialise it with NNT_SAMPLING_INIT"));
    NNT_TRY(nnt_generate_check(model->ctx, fn, cfg.vocab, prompt, nprompt, ngen,
                               s ? s->temperature : 0.0, s ? s->top_k : 0, out));
    if (ngen == 0)
        return NNT_OK;
    int64_t window = cfg.max_seq;
    nnt_layer *tree = nnt_gpt_tree(model, &window);
    if (tree)   /* the layer's activations are the tree's: no backward after this */
        nnt_gpt_cancel_backward(model);
    return tree_generate(tree ? tree : model, fn, window, cfg.vocab, prompt, nprompt, ngen, s,
                         out);
}

NNT_API int nnt_model_generate(nnt_layer *model, const int32_t *prompt, int64_t nprompt,
                               int64_t ngen, const nnt_sampling *s, int32_t *out)
{
    return nnt_model_run_generate(model, "nnt_model_generate", prompt, nprompt, ngen, s, out);
}
