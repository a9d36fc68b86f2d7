/* SPDX-License-Identifier: MIT */
/* The layer framework (internal): what every nnt_layer kind shares, and the vtable a kind
 * fills in. The public functions of nnt.h's "layers" section that work on any layer
 * (forward, backward, targets, loss, parameters, init, destroy, tree queries) live in
 * lib/layers/layer.c and dispatch here; each kind lives in its own file and exposes only
 * its nnt_layer_<kind>_create.
 *
 * A kind
 *   - allocates the layer with nnt_layer_new (which also zeroes impl),
 *   - registers its parameters with nnt_layer_add_param (value, grad, decay flag and the
 *     initialisation rule; owned tensors are destroyed with the layer),
 *   - registers its children with nnt_layer_add_child (a composite owns them),
 *   - implements forward/backward with the public tensor operations only. Output and
 *     input-gradient tensors belong to the layer; nnt_layer_ensure (re)creates such a
 *     tensor when the shape or the tiling of the input changes.
 * The framework checks arguments common to every kind, keeps the forward/backward order
 * (a backward needs its own forward), enumerates parameters with their full dotted names
 * ("h.3.mlp.c_fc.weight") and initialises them.
 */
#ifndef NNT_LAYERS_LAYER_H
#define NNT_LAYERS_LAYER_H

#include "../internal.h"

#define NNT_LAYER_MAGIC 0x6e6e746cu /* "nntl" */
#define NNT_LAYER_MAX_WEIGHT_READS 8   /* attention: q, k, v and the output projection */

/* How nnt_layer_init sets a parameter. */
typedef enum nnt_init_rule {
    NNT_INIT_NORMAL = 0,   /* normal(0, 0.02): matrices, embeddings                         */
    NNT_INIT_NORMAL_PROJ,  /* normal(0, 0.02 / sqrt(2 L)), L = blocks in the tree (0.02 if
                              none): the output projections of attention and MLP           */
    NNT_INIT_ZERO,         /* biases, LayerNorm bias                                       */
    NNT_INIT_ONE,          /* LayerNorm weight                                             */
    NNT_INIT_KAIMING_A     /* a LoRA A (r, in...): uniform(-1/sqrt(in), 1/sqrt(in)), in = the
                              product of the dims after the first (PEFT's kaiming_uniform_
                              with a = sqrt(5), torch's nn.Linear default)                 */
} nnt_init_rule;

typedef struct nnt_layer_param_rec {
    char *name;            /* local name within its layer, e.g. "weight", "wte.weight"     */
    nnt_tensor *value;
    nnt_tensor *grad;      /* same shape and tiling as value                               */
    int decay;             /* weight decay by default                                       */
    nnt_init_rule init;
    int owned;             /* destroy value and grad with the layer                         */
    int grad_dropped;      /* nnt_layer_clear_grad dropped grad: the next backward writes it */
    int frozen;            /* nnt_layer_freeze: grad is NULL (destroyed if owned), the
                              backward computes no gradient for it                         */
    int adapter;           /* a LoRA adapter's matrix (lib/layers/lora.c): trained, saved in
                              PEFT files, never in the model's own files                   */
    int products_only;     /* only matrix products read it, through gl_weight_operand (a
                              linear's or an attention projection's weight): frozen under
                              NNT_PRECISION_BF16 it is kept in bf16 only
                              (nnt_layer_param_narrow)                                     */
    int keep_fp32;         /* frozen with NNT_FREEZE_KEEP_FP32: never narrowed             */
    int nf4;               /* frozen with NNT_FREEZE_NF4: narrowed to NNT_NF4 (whatever the
                              precision) where it would be narrowed to bf16              */
    int output_head;       /* a model's untied lm_head: NNT_FREEZE_NF4 freezes it as
                              NNT_FREEZE (bitsandbytes' 4-bit models leave it unquantized) */
} nnt_layer_param_rec;

typedef struct nnt_layer_vt {
    nnt_layer_kind kind;
    const char *kind_name;                 /* "linear", for messages                         */
    /* y = layer(x); *y is a tensor owned by the layer. Required. */
    int (*forward)(nnt_layer *l, nnt_tensor *x, nnt_tensor **y);
    /* Add parameter gradients; *dx (may be NULL) = d loss / d x, or NULL if none. dy is
     * NULL only for layers with targets. Required. */
    int (*backward)(nnt_layer *l, nnt_tensor *dy, nnt_tensor **dx);
    /* Targets for a layer ending in a loss. NULL: composites pass them to their last child,
     * leaves refuse them. */
    int (*set_targets)(nnt_layer *l, nnt_tensor *targets);
    /* Mean loss of the last forward with targets. NULL: as set_targets. */
    int (*loss)(nnt_layer *l, double *loss);
    /* 1 if this layer (or its last descendant) computes a loss from targets; NULL: as
     * set_targets. */
    int (*has_targets)(const nnt_layer *l);
    /* Blocks this layer counts for NNT_INIT_NORMAL_PROJ, children excluded. NULL: 1 for
     * NNT_LAYER_BLOCK, else 0. */
    int64_t (*num_blocks)(const nnt_layer *l);
    /* Release what the kind allocated besides registered parameters and children
     * (activations, impl contents). May be NULL. */
    void (*destroy)(nnt_layer *l);
    /* nnt_layer_clear_grad for this layer's own parameters. NULL: zero-fill them. */
    int (*clear_grad)(nnt_layer *l);
    /* A layer that registers another tree's parameters as its own (the GPT layer): that
     * tree, where freezing and adapters act, and the call that registers the tree's
     * parameters again after they changed. NULL for every other kind. */
    nnt_layer *(*inner)(nnt_layer *l);
    int (*reregister)(nnt_layer *l);
} nnt_layer_vt;

struct nnt_layer {
    unsigned magic;
    const nnt_layer_vt *vt;
    nnt_ctx *ctx;
    nnt_layer *parent;                     /* the composite that owns it, or NULL            */
    nnt_tensor *positions;                 /* nnt_layer_set_positions on this layer (not
                                              owned), or NULL: see nnt_layer_positions_of */
    int nchildren;
    nnt_layer **children;
    char **child_names;                    /* "h.0", "attn", "0": prefix of their params;
                                              "": none                                       */
    int nparams;
    nnt_layer_param_rec *params;           /* this layer's own parameters                   */
    int forward_pending;                   /* a forward whose backward has not run yet      */
    const char *create_fn;                 /* the public function creating it (a literal)  */
    /* Parameter listing of the subtree, built on the first nnt_layer_param call (the tree
     * does not change after creation). */
    int64_t nlisted;
    char **listed_names;                   /* full dotted names                             */
    nnt_layer_param_rec **listed;
    void *impl;                            /* the kind's data                               */
    /* The names its parameters have in its model's files (a model: its family's, which
     * nnt_layer_freeze matches as well as the tree's): names[i] (malloc'd; NULL where none)
     * for parameter i of nnt_layer_param, n of them. NULL: the tree's names only. */
    int (*file_names)(nnt_layer *l, int64_t n, char **names);
    /* The tensors nnt_layer_ensure made for this layer (addresses of the kind's fields), so
     * that a recomputing block can drop its subtree's activations. */
    int nacts, cap_acts;
    nnt_tensor ***acts;
    /* The weights its products read through gl_weight_operand (its own parameters, or
     * another layer's: a tied table) and the slots of their bf16 copies: what the
     * layer releases after each use besides its own parameters (release_weights). */
    int nweight_reads;
    struct {
        nnt_tensor *weight;
        nnt_tensor **copy;
    } weight_reads[NNT_LAYER_MAX_WEIGHT_READS];
};

/* The positions (B, T) NNT_INT32 that l's forward uses (nnt_layer_set_positions on l or on
 * the nearest ancestor that has them), or NULL: 0 .. T-1 a row. */
nnt_tensor *nnt_layer_positions_of(const nnt_layer *l);

/* The divisor nnt_layer_set_targets_ex gives the cross-entropy layer that takes its targets
 * (through nnt_layer_set_targets' path, on the calling thread); 0 otherwise. */
extern __thread double nnt_layer_targets_divisor;

/* A public create's last step: unless rc already says it failed, initialise l's tree
 * (nnt_layer_init, seed 0); on any failure destroy l and return the status, else *out = l. */
int nnt_layer_finish(nnt_layer *l, int rc, nnt_layer **out);
/* A layer of kind vt in ctx with impl_size zeroed bytes of impl. */
int nnt_layer_new(nnt_ctx *ctx, const nnt_layer_vt *vt, size_t impl_size, const char *fn,
                  nnt_layer **out);
/* Register a parameter (name copied). owned: the layer destroys value and grad. */
int nnt_layer_add_param(nnt_layer *l, const char *name, nnt_tensor *value, nnt_tensor *grad,
                        int decay, nnt_init_rule init, int owned);
/* Create an owned fp32 parameter and its gradient (zero) of the given shape and tiling and
 * register them. *value / *grad (may be NULL) get the tensors. The value is left unwritten:
 * every public create function of a kind with parameters ends with nnt_layer_init(l, 0)
 * (composites: once, for the whole subtree, so the projection rule sees the block count). */
int nnt_layer_new_param(nnt_layer *l, const char *name, int ndim, const int64_t *shape,
                        const int64_t *tile, int decay, nnt_init_rule init,
                        nnt_tensor **value, nnt_tensor **grad);
/* The gradient of l's own parameter value: NULL when it is frozen (nnt_layer_freeze), so a
 * kind's backward computes no gradient for it. Kinds read their gradients through this (a
 * freeze or unfreeze replaces them). */
nnt_tensor *nnt_layer_grad_of(const nnt_layer *l, const nnt_tensor *value);
/* The record of l's own parameter value, or NULL. */
nnt_layer_param_rec *nnt_layer_own_param(const nnt_layer *l, const nnt_tensor *value);
/* Freeze p (mode NNT_FREEZE or NNT_FREEZE_KEEP_FP32: its gradient released; NNT_FREEZE under
 * bf16 products: a matrix only products read narrowed to bf16 now, nnt_layer_param_narrow)
 * or unfreeze it (NNT_UNFREEZE: a zero gradient of its layout again, its values widened to
 * fp32 first if they were kept in bf16). root: the tree it belongs to (its context). */
int nnt_layer_set_frozen(nnt_layer *root, nnt_layer_param_rec *p, int mode);
/* The nnt_freeze_mode of nnt_layer_freeze's freeze argument (new in 0.3): 0 unfreezes,
 * NNT_FREEZE_KEEP_FP32 and NNT_FREEZE_NF4 as they are; any other value (1 as 0.3 documented
 * it) is NNT_FREEZE. Also nnt_lora_options.freeze_base's (non-zero). */
int nnt_layer_freeze_mode(int freeze);
/* A frozen matrix that only products read (products_only), not frozen with keep_fp32, under
 * NNT_PRECISION_BF16: its fp32 values replaced by their bf16 rounding in place
 * (nnt_tensor_retype), which is what every product reads of it in that precision anyway
 * (gl_weight_operand's copy has the same bits): the fp32 values and the bf16 copy give way to
 * one bf16 tensor. Frozen with nf4: quantized to NNT_NF4 in place, whatever the precision.
 * Otherwise nothing. gl_weight_operand calls it before each product. */
int nnt_layer_param_narrow(nnt_ctx *ctx, nnt_layer_param_rec *p);
/* Whether p, to be frozen with NNT_FREEZE_NF4, can be kept in NF4 where it would be (its
 * tiles hold whole blocks: nnt_nf4_view); NNT_E_SHAPE naming it (name, for fn) if not. */
int nnt_layer_nf4_fits(const nnt_layer *l, const nnt_layer_param_rec *p, const char *name,
                       const char *fn);
/* Remove l's own parameter value (its tensors destroyed when owned). */
void nnt_layer_remove_param(nnt_layer *l, const nnt_tensor *value);
/* The parameters of l's subtree changed (added, removed, frozen): forget the listings of l
 * and of its ancestors, and let a GPT layer whose tree this is register them again. */
int nnt_layer_params_changed(nnt_layer *l);
/* The record of the i-th parameter of l's listing (nnt_layer_num_params built it). */
nnt_layer_param_rec *nnt_layer_listed(nnt_layer *l, int64_t i);
/* Initialise the adapters' parameters of l's tree (nnt_layer_init's rules, from seed). */
int nnt_layer_init_adapters(nnt_layer *l, uint64_t seed);
/* The seed of a random draw (a dropout mask, embedding noise) of pass number pass of a
 * layer whose own seed is seed: both mixed as the parameters' seeds are (layer.c). */
uint64_t gl_pass_seed(uint64_t seed, int64_t pass);
/* nnt_layer_init of every parameter but the adapters' (unwritten: only those never written,
 * as a checkpoint read into the model leaves them): for a model made by
 * nnt_model_build_uninit, after its freezing, so that frozen matrices go to bf16 one at a
 * time instead of the whole model being written in fp32 first. */
int nnt_layer_init_base(nnt_layer *l, uint64_t seed, int unwritten);
/* Count in the memory budget, now, every parameter value of l's tree that a build with
 * deferred initialisation left uncounted (nnt_tensor_count_first_write), or refuse them
 * (NNT_E_NOMEM naming fn): for a model about to be written whole in fp32. */
int nnt_layer_count_values(nnt_layer *l, const char *fn);
/* Forget the activation slot t (a field about to be freed, e.g. an adapter's). */
void nnt_layer_forget_activation(nnt_layer *l, nnt_tensor **t);

/* Append an owned child under name (copied). Its parameters are listed as
 * "<name>.<its name>"; name "" adds no prefix (GPT-2's embedding, whose parameters are
 * "wte.weight" and "wpe.weight" already), so the caller keeps the full names unique: nothing
 * checks it. On failure the child is NOT destroyed. */
int nnt_layer_add_child(nnt_layer *l, const char *name, nnt_layer *child);

/* *t is a tensor of exactly (dtype, ndim, shape, tile) in l's context: kept if it already
 * is one, else (re)created (the old one destroyed). Contents are undefined after a
 * re-creation. t must be a field of the layer's impl (it is remembered, for
 * nnt_layer_drop_activations): every tensor made this way is an activation or scratch that
 * a forward recomputes. */
int nnt_layer_ensure(nnt_layer *l, nnt_tensor **t, nnt_dtype dtype, int ndim,
                     const int64_t *shape, const int64_t *tile);
/* nnt_layer_ensure with the placement hint of the tensor it creates (nnt_tensor.rows);
 * nnt_layer_ensure itself creates activations (B, T, ...): NNT_ROWS_BT. 0 for what is
 * shaped like a parameter (weight copies, position rows). */
int nnt_layer_ensure_placed(nnt_layer *l, nnt_tensor **t, nnt_dtype dtype, int ndim,
                            const int64_t *shape, const int64_t *tile, unsigned rows);

/* nnt_layer_ensure for a tensor of beside's shape and tiling whose tiles live where
 * beside's do (a weight's bf16 copy: converted on the weight's rank, only the copy travels),
 * of beside's kind (NNT_MEM_*: a weight's copy counts as weights). Not an activation: kept
 * from step to step (the optimizer's update writes it too, nnt_tensor_adam_step) until the
 * layer goes or nnt_layer_drop_weight_copies. */
int nnt_layer_ensure_beside(nnt_layer *l, nnt_tensor **t, nnt_dtype dtype,
                            const nnt_tensor *beside);
/* Release the weight copies (gl_weight_operand) of l's subtree, as
 * nnt_layer_drop_activations releases activations: a block that recomputes keeps none
 * between its forward and its backward. */
void nnt_layer_drop_weight_copies(nnt_layer *l);

/* Drop every tensor that nnt_layer_ensure made in l's subtree, except keep and keep2 (either
 * may be NULL): each is released
 * (nnt_temp_release: its tiles unregistered after the work already submitted on them, its
 * memory and its share of the context's budget given back) and its field set to NULL, so
 * that the next forward creates it again. */
void nnt_layer_drop_activations(nnt_layer *l, const nnt_tensor *keep,
                                const nnt_tensor *keep2);

/* A kind's clear_grad for parameters whose gradients its backward writes with a beta
 * (GEMMs, row sums): every gradient of l's own parameters is dropped (invalidated: no
 * zero-fill pass, nothing kept or written back under a memory budget) and marked, and the
 * kind's backward takes the beta of each from nnt_layer_grad_beta. */
int nnt_layer_drop_grads(nnt_layer *l);
/* The beta with which a backward adds into the gradient grad of one of l's parameters: 0
 * (write) for the first backward after nnt_layer_drop_grads, which this call records, else 1
 * (accumulate). */
double nnt_layer_grad_beta(nnt_layer *l, const nnt_tensor *grad);

/* The gradients a layer's own backward writes (its children's excluded): those of its
 * parameters that are not frozen (own 1), and of the other layers' weights its products
 * read (own 0: a tied table); none for a layer that registers another tree's parameters
 * (the GPT layer: that tree's layers write them). fn is called once per value; a nonzero
 * return stops the walk and is returned. _tree: every layer of l's subtree (children
 * first-to-last, depth first, and the tree inside a GPT layer). */
typedef int (*nnt_layer_grad_fn)(void *user, nnt_layer *l, nnt_tensor *value, int own);
int nnt_layer_each_grad(nnt_layer *l, nnt_layer_grad_fn fn, void *user);
int nnt_layer_each_grad_tree(nnt_layer *l, nnt_layer_grad_fn fn, void *user);

/* Releasing received weights (nnt_ctx_options.release_weights; every call below does
 * nothing without it, or while a generation runs on rank 0: it reads every weight for each
 * token and keeps them, having checked that they fit). nnt_layer_forward and
 * nnt_layer_backward make every rank drop the copies it received of the weights the layer
 * just used: its own parameters and those noted here. */
/* Note that l's products read w, or *copy (its bf16 copy, a field of l's impl) when that is
 * set. Kept across forwards (once per copy slot). */
int nnt_layer_note_weight_read(nnt_layer *l, nnt_tensor *w, nnt_tensor **copy);
/* After l's forward or backward was submitted (nnt_layer_forward and _backward call it; a
 * forward that bypasses them, gl_forward_cached's, too). Collective: every rank submits the
 * same layers in the same order. */
void nnt_layer_release_weights(nnt_layer *l);
/* Before a chain submits its next child: wait until prev_input (the input of the child it
 * submitted last, NULL for none) is computed on this rank, so that the gathers of at most
 * two children's weights are ahead of the computation (without it every gather of a
 * forward or backward would be posted at once, and held at once). */
int nnt_layer_release_window(nnt_layer *l, nnt_tensor *prev_input);

/* 0 if l is a live layer, else NNT_E_INVAL naming fn. */
int nnt_layer_check(const nnt_layer *l, const char *fn);

/* Composites run their children through the public nnt_layer_forward / nnt_layer_backward,
 * which keep each child's own forward/backward order. */

#endif
