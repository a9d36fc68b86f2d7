/* SPDX-License-Identifier: MIT */
/* The GPT-2 tree of generic layers (nnt_model_build_tree, lib/models/transformer.c) against
 * the GPT layer (nnt_model_create with a GPT-2 configuration, i.e. nnt_gpt_create), which
 * wraps such a tree and must add nothing to it (written when the GPT layer was a separate
 * fused implementation, lib/models/gpt2.c: the checks now guard the wrapper),
 * for the "tiny" preset and a configuration whose vocabulary is no multiple of the vocab
 * tile (V 97, C 48, NH 4, L 2, max_seq 32), each with the automatic tiling and with partial
 * tiles cutting channels, hidden, vocabulary and heads:
 *   - the parameter lists are the same: count, names (unique), shapes, decay flags, order;
 *     nnt_model_config_of gives the same configuration;
 *   - with the fused model's values copied into the tree by name, 5 AdamW steps give the same
 *     losses, and the first backward the same gradients (up to the kernels' order);
 *   - a train state saved from either optimizer loads into the other's (names and shapes
 *     are the key), and training goes on with the same losses;
 *   - nnt_model_generate gives the same greedy tokens on both, also past max_seq (T =
 *     max_seq: the fused layer's window is T, the tree's max_seq);
 *   - the Llama tree is still what nnt_model_create builds (same names);
 *   - nnt_model_save_hf of a tree writes the same bytes as of the fused layer with the same
 *     weights; nnt_model_load_hf_tree of tests/fixtures/gpt2_tiny (F32, BF16, names without
 *     "transformer.") gives the fused loader's parameters bit for bit and its logits, and
 *     refuses a missing or misshaped tensor by name;
 *   - nnt_model_save_llmc of a tree writes the bytes of nnt_gpt_save_llmc with the same
 *     weights; nnt_model_load_llmc (tree) of gpt2_tiny.llmc.bin gives nnt_gpt_load_llmc's parameters bit
 *     for bit and its logits, and refuses a truncated file or a bad magic naming the file.
 * It calls the internal builder, so it links the library's objects. */
#include "testutil.h"

#include "fixture_st.h"
#include "io/io.h"
#include "models/models.h"

#include <math.h>
#include <stdint.h>
#include <sys/stat.h>

enum { B = 2, T = 16, STEPS = 5 };

static nnt_ctx *ctx;

static void setup(void)
{
    ctx = test_ctx();
}

static void teardown(void)
{
    EXPECT_OK(nnt_ctx_destroy(ctx));
    ctx = NULL;
}

/* _i / 2 picks the configuration: the "tiny" preset (V 256, C 64, NH 4, L 2, max_seq 128)
 * or V 97, C 48, NH 4, L 2, max_seq 32. */
static nnt_model_config config(int which)
{
    nnt_model_config c;
    EXPECT_OK(nnt_model_preset("tiny", &c));
    if (which) {
        c.vocab = 97;
        c.channels = 48;
        c.max_seq = 32;
    }
    return c;
}

/* _i % 2 picks the tiling: automatic, or partial tiles (batch 1, seq 5, channels 20,
 * hidden 72, vocab 40, heads 3, head_dim 5) that cut every dimension they can. */
static const nnt_tiling TILINGS[2] = {
    {sizeof(nnt_tiling), 0, 0, 0, 0, 0, 0, 0},
    {sizeof(nnt_tiling), 1, 5, 20, 72, 40, 3, 5},
};

static int64_t num_params(nnt_layer *l)
{
    int64_t n = 0;
    EXPECT_OK(nnt_layer_num_params(l, &n, NULL));
    return n;
}

/* The parameter of l named name (fails the test if none). */
static nnt_param_info param_named(nnt_layer *l, const char *name)
{
    int64_t n = num_params(l);
    for (int64_t i = 0; i < n; i++) {
        nnt_param_info p = test_param_at(l, i);
        if (strcmp(p.name, name) == 0)
            return p;
    }
    ck_abort_msg("no parameter %s", name);
    return test_param_at(l, 0);
}

/* The fused model and the tree of cfg for (b, t) with the same tiling overrides. */
static void make_pair(const nnt_model_config *cfg, int64_t b, int64_t t, const nnt_tiling *tl,
                      nnt_layer **fused, nnt_layer **tree)
{
    nnt_layer_kind kind;
    EXPECT_OK(nnt_model_create(ctx, cfg, b, t, tl, fused));
    EXPECT_OK(nnt_layer_kind_of(*fused, &kind));
    ck_assert_int_eq(kind, NNT_LAYER_GPT);   /* nnt_model_create is not switched yet */
    EXPECT_OK(nnt_model_build_tree(ctx, "test_model_tree", cfg, b, t, tl, tree));
    EXPECT_OK(nnt_layer_kind_of(*tree, &kind));
    ck_assert_int_eq(kind, NNT_LAYER_MODEL);
}

static int64_t numel_of(nnt_tensor *t)
{
    int64_t n = 0;
    EXPECT_OK(nnt_tensor_numel(t, &n));
    return n;
}

/* Copy every parameter value of src into the parameter of dst of the same name. */
static void copy_params(nnt_layer *src, nnt_layer *dst)
{
    int64_t n = num_params(src);
    for (int64_t i = 0; i < n; i++) {
        nnt_param_info p = test_param_at(src, i), q = param_named(dst, p.name);
        int64_t k = 0;
        float *v = test_to_host(p.value, &k);
        ck_assert_int_eq(numel_of(q.value), k);
        EXPECT_OK(nnt_tensor_copy_from_host(q.value, v, (size_t)k * sizeof *v));
        free(v);
    }
}

/* The largest, over the parameters of a, of max |a - b| / max(max |a|, floor) for their
 * values (grad 0) or gradients (grad 1) and the same-named ones of b, floor being 1e-4 of
 * the largest max |a| of all: a tensor whose gradient is 0 in exact arithmetic (attn.k.bias:
 * the softmax ignores the same shift q.b of every key) holds rounding noise only. *worst
 * names that parameter. */
static double max_rel_diff(nnt_layer *a, nnt_layer *b, int grad, const char **worst)
{
    int64_t n = num_params(a);
    double *d = calloc((size_t)n, sizeof *d), *m = calloc((size_t)n, sizeof *m), top = 0.0;
    ck_assert(d && m);
    for (int64_t i = 0; i < n; i++) {
        nnt_param_info p = test_param_at(a, i), q = param_named(b, p.name);
        int64_t k = 0;
        float *x = test_to_host(grad ? p.grad : p.value, &k);
        float *y = test_to_host(grad ? q.grad : q.value, NULL);
        for (int64_t j = 0; j < k; j++) {
            d[i] = fmax(d[i], fabs((double)x[j] - (double)y[j]));
            m[i] = fmax(m[i], fabs((double)x[j]));
            if (isnan(x[j]) || isnan(y[j]))
                d[i] = INFINITY;
        }
        top = fmax(top, m[i]);
        free(x);
        free(y);
    }
    double worst_rel = 0.0;
    for (int64_t i = 0; i < n; i++) {
        double rel = d[i] > 0.0 ? d[i] / fmax(m[i], 1e-4 * top) : 0.0;
        if (getenv("TREE_DEBUG") && rel > 1e-7)
            printf("  %s: max|diff| %.3e max|a| %.3e\n", test_param_at(a, i).name, d[i], m[i]);
        if (rel > worst_rel) {
            worst_rel = rel;
            *worst = test_param_at(a, i).name;
        }
    }
    free(d);
    free(m);
    return worst_rel;
}

/* ---- the parameter lists -------------------------------------------------------------------- */

static void expect_same_lists(nnt_layer *fused, nnt_layer *tree)
{
    int64_t n = num_params(fused), numel_f = 0, numel_t = 0;
    ck_assert_int_eq(num_params(tree), n);
    EXPECT_OK(nnt_layer_num_params(fused, NULL, &numel_f));
    EXPECT_OK(nnt_layer_num_params(tree, NULL, &numel_t));
    ck_assert_int_eq(numel_t, numel_f);
    for (int64_t i = 0; i < n; i++) {
        nnt_param_info p = test_param_at(fused, i), q = test_param_at(tree, i);
        ck_assert_msg(strcmp(p.name, q.name) == 0, "parameter %lld: %s in the tree, %s fused",
                      (long long)i, q.name, p.name);
        ck_assert_msg(p.decay == q.decay, "%s: decay %d in the tree, %d fused", p.name, q.decay,
                      p.decay);
        int nd = 0, nq = 0;
        int64_t sp[NNT_MAX_DIMS], sq[NNT_MAX_DIMS];
        EXPECT_OK(nnt_tensor_ndim(p.value, &nd));
        EXPECT_OK(nnt_tensor_ndim(q.value, &nq));
        ck_assert_int_eq(nq, nd);
        EXPECT_OK(nnt_tensor_shape(p.value, sp));
        EXPECT_OK(nnt_tensor_shape(q.value, sq));
        for (int d = 0; d < nd; d++)
            ck_assert_msg(sp[d] == sq[d], "%s: dim %d is %lld in the tree, %lld fused", p.name,
                          d, (long long)sq[d], (long long)sp[d]);
        for (int64_t j = 0; j < i; j++)
            ck_assert_msg(strcmp(test_param_at(tree, j).name, q.name) != 0, "%s listed twice",
                          q.name);
    }
}

static void expect_same_config(const nnt_model_config *a, const nnt_model_config *b)
{
    const int64_t ia[] = {a->family, a->vocab, a->max_seq, a->layers, a->heads, a->kv_heads,
                          a->channels, a->hidden, a->tied, a->qkv_bias, a->out_bias,
                          a->mlp_bias, a->rope.scaling, a->rope.original_max_position};
    const int64_t ib[] = {b->family, b->vocab, b->max_seq, b->layers, b->heads, b->kv_heads,
                          b->channels, b->hidden, b->tied, b->qkv_bias, b->out_bias,
                          b->mlp_bias, b->rope.scaling, b->rope.original_max_position};
    for (size_t i = 0; i < sizeof ia / sizeof ia[0]; i++)
        ck_assert_msg(ia[i] == ib[i], "nnt_model_config_of: field %zu is %lld fused, %lld in "
                      "the tree", i, (long long)ia[i], (long long)ib[i]);
    const double da[] = {a->norm_eps, a->rope.theta, a->rope.factor, a->rope.low_freq_factor,
                         a->rope.high_freq_factor};
    const double db[] = {b->norm_eps, b->rope.theta, b->rope.factor, b->rope.low_freq_factor,
                         b->rope.high_freq_factor};
    for (size_t i = 0; i < sizeof da / sizeof da[0]; i++)
        ck_assert_msg(da[i] == db[i], "nnt_model_config_of: double field %zu is %g fused, %g "
                      "in the tree", i, da[i], db[i]);
}

START_TEST(test_params)
{
    nnt_model_config cfg = config(_i / 2), got_f, got_t;
    nnt_layer *fused = NULL, *tree = NULL;
    make_pair(&cfg, B, T, &TILINGS[_i % 2], &fused, &tree);
    expect_same_lists(fused, tree);
    /* first, last and a block's names as nnt_gpt_create(3) lists them */
    int64_t n = num_params(tree);
    ck_assert_int_eq(n, 2 + 16 * cfg.layers + 2);
    ck_assert_str_eq(test_param_at(tree, 0).name, "wte.weight");
    ck_assert_str_eq(test_param_at(tree, 1).name, "wpe.weight");
    ck_assert_str_eq(test_param_at(tree, 6).name, "h.0.attn.v.weight");
    ck_assert_str_eq(test_param_at(tree, 17).name, "h.0.mlp.c_proj.bias");
    ck_assert_str_eq(test_param_at(tree, n - 1).name, "ln_f.bias");
    /* the same names get the same initial values (nnt_layer_init seeds by name) */
    const char *worst = "";
    double d = max_rel_diff(fused, tree, 0, &worst);
    ck_assert_msg(d == 0.0, "initial values differ by %g (%s)", d, worst);
    /* nnt_model_config_of: the same configuration, hidden and kv_heads resolved */
    EXPECT_OK(nnt_model_config_of(fused, &got_f));
    EXPECT_OK(nnt_model_config_of(tree, &got_t));
    ck_assert_int_eq(got_t.family, NNT_FAMILY_GPT2);
    ck_assert_int_eq(got_t.hidden, 4 * cfg.channels);
    ck_assert_int_eq(got_t.kv_heads, cfg.heads);
    expect_same_config(&got_f, &got_t);
    nnt_layer_destroy(fused);
    nnt_layer_destroy(tree);
}
END_TEST

/* The builder checks as nnt_model_create does, naming its caller. */
START_TEST(test_errors)
{
    nnt_model_config cfg = config(0);
    nnt_layer *tree = (nnt_layer *)&cfg;
    cfg.hidden = 100;
    EXPECT_FAIL_MSG(nnt_model_build_tree(ctx, "caller_fn", &cfg, B, T, NULL, &tree),
                    NNT_E_UNSUPPORTED, "caller_fn");
    ck_assert_ptr_null(tree);
    cfg = config(0);
    EXPECT_FAIL_MSG(nnt_model_build_tree(ctx, "caller_fn", &cfg, B, cfg.max_seq + 1, NULL,
                                         &tree), NNT_E_INVAL, "caller_fn");
    EXPECT_FAIL_MSG(nnt_model_build_tree(ctx, "caller_fn", NULL, B, T, NULL, &tree),
                    NNT_E_INVAL, "caller_fn");
    EXPECT_FAIL_MSG(nnt_model_build_tree(ctx, "caller_fn", &cfg, B, T, NULL, NULL),
                    NNT_E_INVAL, "caller_fn");
}
END_TEST

/* The Llama tree of the builder has nnt_model_create's parameters. */
START_TEST(test_llama_same)
{
    nnt_model_config cfg;
    EXPECT_OK(nnt_model_preset("llama-tiny", &cfg));
    cfg.tied = 0;
    nnt_layer *a = NULL, *b = NULL;
    nnt_tiling tl = TILINGS[1];
    tl.head_dim = 0;   /* rope: whole head_dim tiles or tiles dividing hd / 2 */
    EXPECT_OK(nnt_model_create(ctx, &cfg, B, T, &tl, &a));
    EXPECT_OK(nnt_model_build_tree(ctx, "test_model_tree", &cfg, B, T, &tl, &b));
    expect_same_lists(a, b);
    ck_assert_str_eq(test_param_at(b, 0).name, "model.embed_tokens.weight");
    ck_assert_str_eq(test_param_at(b, num_params(b) - 1).name, "lm_head.weight");
    nnt_layer_destroy(a);
    nnt_layer_destroy(b);
}
END_TEST

/* ---- training ------------------------------------------------------------------------------ */

/* Token ids and targets of step s, tiled as the model's batches. */
typedef struct batches {
    nnt_tensor *tok[STEPS + 2], *tgt[STEPS + 2];
} batches;

static void make_batches(const nnt_model_config *cfg, const nnt_tiling *tl, batches *bt)
{
    nnt_tiling r;
    EXPECT_OK(nnt_model_tiling(ctx, cfg, B, T, tl, &r));
    int64_t shape[2] = {B, T}, tile[2] = {r.batch, r.seq};
    unsigned long long state = 0x5eed1234ull;
    int32_t ids[2 * B * T];
    for (int s = 0; s < STEPS + 2; s++) {
        for (int i = 0; i < 2 * B * T; i++)
            ids[i] = (int32_t)(test_rand(&state) * (double)cfg->vocab);
        EXPECT_OK(nnt_tensor_create(ctx, NNT_INT32, 2, shape, tile, &bt->tok[s]));
        EXPECT_OK(nnt_tensor_create(ctx, NNT_INT32, 2, shape, tile, &bt->tgt[s]));
        EXPECT_OK(nnt_tensor_copy_from_host(bt->tok[s], ids, sizeof ids / 2));
        EXPECT_OK(nnt_tensor_copy_from_host(bt->tgt[s], ids + B * T, sizeof ids / 2));
    }
}

static void free_batches(batches *bt)
{
    for (int s = 0; s < STEPS + 2; s++) {
        nnt_tensor_destroy(bt->tok[s]);
        nnt_tensor_destroy(bt->tgt[s]);
    }
}

static nnt_optim *make_optim(nnt_layer *model)
{
    nnt_optim_options oo = NNT_OPTIM_OPTIONS_INIT;
    oo.lr = 1e-3;
    oo.weight_decay = 0.1;
    oo.grad_clip = 1.0;
    nnt_optim *opt = NULL;
    EXPECT_OK(nnt_optim_create(ctx, &oo, &opt));
    EXPECT_OK(nnt_optim_add_layer(opt, model));
    return opt;
}

/* 1: the tree's gradients are cleared as nnt-train does (nnt_layer_clear_grad: dropped,
 * written by the next backward), the fused layer's still zero-filled (test_training) */
static int tree_clear;

/* Forward and backward of batch s; returns the loss. */
static double forward_backward(nnt_layer *m, const batches *bt, int s, int clear)
{
    double loss = 0.0;
    EXPECT_OK(clear ? nnt_layer_clear_grad(m) : nnt_layer_zero_grad(m));
    EXPECT_OK(nnt_layer_set_targets(m, bt->tgt[s]));
    EXPECT_OK(nnt_layer_forward(m, bt->tok[s], NULL));
    EXPECT_OK(nnt_layer_backward(m, NULL, NULL));
    EXPECT_OK(nnt_layer_loss(m, &loss));
    return loss;
}

/* Both models train on the same batches s0 .. s1 - 1; the losses must agree. */
static double train_both(nnt_layer *fused, nnt_optim *of, nnt_layer *tree, nnt_optim *ot,
                         const batches *bt, int s0, int s1, const char *what)
{
    double worst = 0.0;
    for (int s = s0; s < s1; s++) {
        double lf = forward_backward(fused, bt, s, 0);
        double lt = forward_backward(tree, bt, s, tree_clear);
        double rel = fabs(lf - lt) / fabs(lf);
        printf("test_model_tree %s step %d: loss %.7f fused, %.7f tree (rel diff %.2e)\n",
               what, s, lf, lt, rel);
        worst = fmax(worst, rel);
        if (s == 0) {
            const char *name = "";
            double g = max_rel_diff(fused, tree, 1, &name);
            printf("test_model_tree %s: first gradients, largest max|diff| / max|grad| "
                   "%.2e (%s)\n", what, g, name);
            /* measured (CPU, this machine): 0 with the automatic tiling (the same
             * kernels in the same order), 9.9e-7 with the partial tiles (attn.k.bias, pure
             * rounding noise ~3e-11 against the floor 1e-4 * 0.4; the other tensors at most
             * 5e-7, e.g. ln_1.weight 7e-10 / 1.5e-3) */
            EXPECT_TOL(g, 1e-5, "%s: gradient of %s", what, name);
        }
        EXPECT_OK(nnt_optim_step(of));
        EXPECT_OK(nnt_optim_step(ot));
    }
    return worst;
}

/* _i % 4: (config, tiling); 4 <= _i < 8: both with activation recompute
 * (nnt_layer_set_recompute: the fused layer's own, the tree's blocks'), which changes no bit
 * on either side; _i >= 8: the tree's gradients cleared by nnt_layer_clear_grad (tree_clear),
 * the fused layer's zero-filled. */
START_TEST(test_training)
{
    int recompute = _i >= 4 && _i < 8;
    tree_clear = _i >= 8;
    nnt_model_config cfg = config(_i % 4 / 2);
    const nnt_tiling *tl = &TILINGS[_i % 2];
    nnt_layer *fused = NULL, *tree = NULL;
    make_pair(&cfg, B, T, tl, &fused, &tree);
    if (recompute) {
        EXPECT_OK(nnt_layer_set_recompute(fused, 1));
        EXPECT_OK(nnt_layer_set_recompute(tree, 1));
    }
    EXPECT_OK(nnt_layer_init(fused, 42));   /* other values than the tree's */
    copy_params(fused, tree);
    batches bt;
    make_batches(&cfg, tl, &bt);
    nnt_optim *of = make_optim(fused), *ot = make_optim(tree);
    char what[64];
    snprintf(what, sizeof what, "config %d tiling %d%s%s", _i % 4 / 2, _i % 2,
             recompute ? " recompute" : "", tree_clear ? " tree clear_grad" : "");
    double worst = train_both(fused, of, tree, ot, &bt, 0, STEPS, what);
    /* measured: at most 2.9e-8 relative (half an fp32 ulp of losses ~5.5 and ~4.6) over
     * the four cases, 0 at step 0 with the automatic tiling; 1.9e-7 with a CUDA worker
     * (H200) */
    EXPECT_TOL(worst, test_ctx_has_cuda(ctx) ? 2e-6 : 3e-7, "%s: losses of %d AdamW steps",
               what, STEPS);
    nnt_optim_destroy(of);
    nnt_optim_destroy(ot);
    free_batches(&bt);
    nnt_layer_destroy(fused);
    nnt_layer_destroy(tree);
}
END_TEST

/* ---- train state across --------------------------------------------------------------------- */

/* _i: 0 fused -> tree, 1 tree -> fused. */
START_TEST(test_state_across)
{
    nnt_model_config cfg = config(1);
    const nnt_tiling *tl = &TILINGS[_i % 2 ? 0 : 1];
    nnt_layer *fused = NULL, *tree = NULL;
    make_pair(&cfg, B, T, tl, &fused, &tree);
    nnt_layer *src = _i ? tree : fused, *dst = _i ? fused : tree;
    EXPECT_OK(nnt_layer_init(src, 3));
    batches bt;
    make_batches(&cfg, tl, &bt);
    nnt_optim *os = make_optim(src), *od = make_optim(dst);
    for (int s = 0; s < 2; s++) {
        forward_backward(src, &bt, s, 0);
        EXPECT_OK(nnt_optim_step(os));
    }
    test_make_tmpdir("model_tree");
    const char *path = test_tmp_path("state.safetensors");
    nnt_train_state st = NNT_TRAIN_STATE_INIT;
    st.data_pos = 1234;
    EXPECT_OK(nnt_train_state_save(os, path, &st));
    nnt_train_state back = NNT_TRAIN_STATE_INIT;
    EXPECT_OK(nnt_train_state_load(od, path, &back));
    ck_assert_int_eq(back.data_pos, 1234);
    nnt_train_state_clear(&back);
    nnt_optim_stats stats = {sizeof stats, 0, 0.0, 0.0};
    EXPECT_OK(nnt_optim_stats_get(od, &stats));
    ck_assert_int_eq(stats.step, 2);
    const char *worst = "";
    double d = max_rel_diff(src, dst, 0, &worst);
    ck_assert_msg(d == 0.0, "loaded values differ by %g (%s)", d, worst);
    /* the moments came along: the next updates give the same losses */
    nnt_layer *fz = _i ? dst : src, *tr = _i ? src : dst;
    nnt_optim *ofz = _i ? od : os, *otr = _i ? os : od;
    double rel = train_both(fz, ofz, tr, otr, &bt, 2, STEPS, _i ? "tree -> fused" :
                            "fused -> tree");
    /* measured: at most 2.0e-8 */
    EXPECT_TOL(rel, 2e-7, "losses after the load");
    test_remove_tmpdir();
    nnt_optim_destroy(os);
    nnt_optim_destroy(od);
    free_batches(&bt);
    nnt_layer_destroy(fused);
    nnt_layer_destroy(tree);
}
END_TEST

/* ---- generation ------------------------------------------------------------------------------ */

/* _i % 2: the tiling; _i / 2: 0 a short generation (B 2, T 16), 1 one past max_seq 32 with
 * T = max_seq, so that both windows slide alike (the fused layer's window is T, the
 * tree's max_seq). */
START_TEST(test_generate)
{
    nnt_model_config cfg = config(1);
    int slide = _i / 2;
    int64_t b = slide ? 1 : B, t = slide ? cfg.max_seq : T, ngen = slide ? 40 : 10;
    nnt_layer *fused = NULL, *tree = NULL;
    make_pair(&cfg, b, t, &TILINGS[_i % 2], &fused, &tree);
    /* the head is tied: with small positions the next token is the current one; large
     * ones make it depend on the position, so that the tokens differ */
    EXPECT_OK(nnt_layer_init(fused, 11));
    EXPECT_OK(nnt_tensor_scale(param_named(fused, "wpe.weight").value, 20.0));
    copy_params(fused, tree);
    int32_t prompt[5] = {3, 14, 15, 92, 65}, a[40], c[40];
    EXPECT_OK(nnt_model_generate(fused, prompt, 5, ngen, NULL, a));
    EXPECT_OK(nnt_model_generate(tree, prompt, 5, ngen, NULL, c));
    int distinct = 0;
    for (int64_t i = 0; i < ngen; i++) {
        ck_assert_msg(a[i] == c[i], "token %lld: %d fused, %d tree", (long long)i, (int)a[i],
                      (int)c[i]);
        int seen = 0;
        for (int64_t j = 0; j < i; j++)
            seen |= a[j] == a[i];
        distinct += !seen;
        if (getenv("TREE_DEBUG"))
            printf(" %d", (int)a[i]);
    }
    printf("test_model_tree generate %d: %lld tokens equal, %d distinct\n", _i,
           (long long)ngen, distinct);
    ck_assert_msg(distinct > 2, "only %d distinct tokens", distinct);
    nnt_layer_destroy(fused);
    nnt_layer_destroy(tree);
}
END_TEST

/* ---- Hugging Face files ------------------------------------------------------------------------ */

static unsigned char *read_all(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    ck_assert_msg(f != NULL, "cannot open %s", path);
    ck_assert_int_eq(fseek(f, 0, SEEK_END), 0);
    long n = ftell(f);
    ck_assert(n >= 0);
    rewind(f);
    unsigned char *buf = malloc((size_t)n + 1);
    ck_assert_ptr_nonnull(buf);
    ck_assert_uint_eq(fread(buf, 1, (size_t)n, f), (size_t)n);
    fclose(f);
    *len = (size_t)n;
    return buf;
}

static void expect_same_file(const char *a, const char *b)
{
    size_t na = 0, nb = 0;
    unsigned char *x = read_all(a, &na), *y = read_all(b, &nb);
    ck_assert_msg(na == nb && memcmp(x, y, na) == 0, "%s (%zu bytes) and %s (%zu bytes) differ",
                  a, na, b, nb);
    free(x);
    free(y);
}

/* _i: the four (config, tiling) pairs: save_hf of the tree = save_hf of the fused layer. */
START_TEST(test_save_hf)
{
    nnt_model_config cfg = config(_i / 2);
    nnt_layer *fused = NULL, *tree = NULL;
    make_pair(&cfg, B, T, &TILINGS[_i % 2], &fused, &tree);
    EXPECT_OK(nnt_layer_init(fused, 7));
    copy_params(fused, tree);
    test_make_tmpdir("model_tree_hf");
    char a[700], b[700], fa[800], fb[800];
    snprintf(a, sizeof a, "%s", test_tmp_path("fused"));
    snprintf(b, sizeof b, "%s", test_tmp_path("tree"));
    EXPECT_OK(nnt_model_save_hf(fused, a));
    EXPECT_OK(nnt_model_save_hf(tree, b));
    snprintf(fa, sizeof fa, "%s/model.safetensors", a);
    snprintf(fb, sizeof fb, "%s/model.safetensors", b);
    expect_same_file(fa, fb);
    snprintf(fa, sizeof fa, "%s/config.json", a);
    snprintf(fb, sizeof fb, "%s/config.json", b);
    expect_same_file(fa, fb);
    /* and the tree reads it back bit for bit */
    nnt_layer *back = NULL;
    EXPECT_OK(nnt_model_load_hf_tree(ctx, b, B, T, &TILINGS[_i % 2], &back));
    const char *worst = "";
    double d = max_rel_diff(tree, back, 0, &worst);
    ck_assert_msg(d == 0.0, "read back: %s differs by %g", worst, d);
    nnt_layer_destroy(back);
    test_remove_tmpdir();
    nnt_layer_destroy(fused);
    nnt_layer_destroy(tree);
}
END_TEST

static const char *fix(const char *sub)
{
    static char p[2][4200];
    static int next;
    char *s = p[next++ % 2];
    const char *top = getenv("top_srcdir");
    snprintf(s, 4200, "%s/tests/fixtures/%s", top ? top : ".", sub);
    return s;
}

/* A copy of gpt2_tiny in the temporary dir sub: every tensor but skip, reshape with its two
 * dims swapped, names without "transformer." when strip, BF16 (truncated) when bf16. */
static const char *gpt2_copy(const char *sub, const char *skip, const char *reshape,
                             int strip, int bf16)
{
    static char dir[700];
    char err[NNT_IO_ERRLEN], path[800];
    snprintf(dir, sizeof dir, "%s", test_tmp_path(sub));
    ck_assert_int_eq(mkdir(dir, 0755), 0);
    size_t len = 0;
    unsigned char *cfg = read_all(fix("gpt2_tiny/config.json"), &len);
    snprintf(path, sizeof path, "%s/config.json", dir);
    FILE *f = fopen(path, "wb");
    ck_assert(f && fwrite(cfg, 1, len, f) == len && fclose(f) == 0);
    free(cfg);
    nnt_st_reader *r = fixture_open_st_path(fix("gpt2_tiny/model.safetensors"));
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    nnt_st_writer *w = NULL;
    EXPECT_OK(nnt_st_writer_begin(path, &w, err, sizeof err));
    void *bufs[64] = {NULL};
    size_t nb = 0;
    for (size_t i = 0; i < nnt_st_count(r); i++) {
        const nnt_st_entry *e = nnt_st_entry_at(r, i);
        if (skip && strcmp(e->name, skip) == 0)
            continue;
        int64_t shape[NNT_IO_MAXDIM];
        memcpy(shape, e->shape, sizeof shape);
        if (reshape && strcmp(e->name, reshape) == 0) {
            shape[0] = e->shape[1];
            shape[1] = e->shape[0];
        }
        float *v = fixture_read(r, e->name, NNT_IO_F32, NULL);
        if (bf16) {
            uint16_t *h = (uint16_t *)v;   /* in place: h[j] is written after v[j] is read */
            for (uint64_t j = 0; j < e->numel; j++) {
                uint32_t bits;
                memcpy(&bits, &v[j], sizeof bits);
                h[j] = (uint16_t)(bits >> 16);
            }
        }
        ck_assert(nb < 64);
        bufs[nb++] = v;
        const char *name = e->name;
        if (strip && strncmp(name, "transformer.", 12) == 0)
            name += 12;
        EXPECT_OK(nnt_st_writer_add(w, name, bf16 ? NNT_IO_BF16 : NNT_IO_F32, e->ndim, shape,
                                    v, err, sizeof err));
    }
    EXPECT_OK(nnt_st_writer_finish(w, err, sizeof err));
    for (size_t i = 0; i < nb; i++)
        free(bufs[i]);
    nnt_st_close(r);
    return dir;
}

/* The logits of the fixture's reference tokens (2, 12). */
static float *gpt2_logits(nnt_layer *l, int64_t *n)
{
    nnt_st_reader *ref = fixture_open_st_path(fix("gpt2_tiny/reference.safetensors"));
    int32_t *tok = fixture_read(ref, "tokens", NNT_IO_I32, NULL);
    int64_t shape[2] = {2, 12};
    nnt_tensor *x = NULL, *out = NULL;
    EXPECT_OK(nnt_tensor_create(ctx, NNT_INT32, 2, shape, NULL, &x));
    EXPECT_OK(nnt_tensor_copy_from_host(x, tok, 24 * sizeof(int32_t)));
    EXPECT_OK(nnt_layer_forward(l, x, &out));
    float *v = test_to_host(out, n);
    nnt_tensor_destroy(x);
    free(tok);
    nnt_st_close(ref);
    return v;
}

/* A tree loaded from a file against the fused layer loaded from it: the same parameter list
 * and values; returns the normwise relative difference of their logits on the fixture's
 * tokens. */
static double loaded_logits_rel(nnt_layer *fused, nnt_layer *tree)
{
    nnt_layer_kind kind;
    EXPECT_OK(nnt_layer_kind_of(tree, &kind));
    ck_assert_int_eq(kind, NNT_LAYER_MODEL);
    expect_same_lists(fused, tree);
    const char *worst = "";
    double d = max_rel_diff(fused, tree, 0, &worst);
    ck_assert_msg(d == 0.0, "loaded values differ by %g (%s)", d, worst);
    int64_t n = 0, m = 0;
    float *a = gpt2_logits(fused, &n), *b = gpt2_logits(tree, &m);
    ck_assert_int_eq(n, 2 * 12 * 67);
    ck_assert_int_eq(m, n);
    double rel = test_rel_err(b, a, n);
    free(a);
    free(b);
    return rel;
}

/* _i: 0 the fixture, 1 its BF16 copy, 2 names without "transformer.": the tree and the
 * fused layer load the same parameters and give the same logits. */
START_TEST(test_load_hf)
{
    test_make_tmpdir("model_tree_hf");
    const char *dir = _i == 0 ? fix("gpt2_tiny") : gpt2_copy("copy", NULL, NULL, _i == 2, _i == 1);
    nnt_layer *fused = NULL, *tree = NULL;
    nnt_layer_kind kind;
    EXPECT_OK(nnt_model_load_hf(ctx, dir, 2, 12, NULL, &fused));
    EXPECT_OK(nnt_layer_kind_of(fused, &kind));
    ck_assert_int_eq(kind, NNT_LAYER_GPT);
    EXPECT_OK(nnt_model_load_hf_tree(ctx, dir, 2, 12, NULL, &tree));
    double rel = loaded_logits_rel(fused, tree);
    printf("test_model_tree load_hf %d: logits tree vs fused, normwise rel %.2e\n", _i, rel);
    /* measured (CPU, this machine): 1.96e-7 (F32, either naming), 1.68e-7 (BF16): the
     * tree's kernels in another order than the fused layer's */
    EXPECT_TOL(rel, 2e-6, "gpt2_tiny logits, tree against fused");
    nnt_layer_destroy(fused);
    nnt_layer_destroy(tree);
    test_remove_tmpdir();
}
END_TEST

/* A missing or misshaped tensor is refused by name, *out NULL. */
START_TEST(test_load_hf_bad)
{
    test_make_tmpdir("model_tree_hf");
    nnt_layer *l = (nnt_layer *)&l;
    const char *dir = gpt2_copy("skip", "transformer.h.1.mlp.c_fc.bias", NULL, 0, 0);
    EXPECT_FAIL_MSG(nnt_model_load_hf_tree(ctx, dir, 2, 12, NULL, &l), NNT_E_FORMAT,
                    "nnt_model_load_hf_tree: ");
    EXPECT_FAIL_MSG(nnt_model_load_hf_tree(ctx, dir, 2, 12, NULL, &l), NNT_E_FORMAT,
                    "no tensor transformer.h.1.mlp.c_fc.bias");
    ck_assert_ptr_null(l);
    l = (nnt_layer *)&l;
    dir = gpt2_copy("shape", NULL, "transformer.h.0.attn.c_attn.weight", 0, 0);
    EXPECT_FAIL_MSG(nnt_model_load_hf_tree(ctx, dir, 2, 12, NULL, &l), NNT_E_FORMAT,
                    "transformer.h.0.attn.c_attn.weight has shape (72, 24), expected (24, 72)");
    ck_assert_ptr_null(l);
    l = (nnt_layer *)&l;
    EXPECT_FAIL_MSG(nnt_model_load_hf_tree(ctx, fix("gpt2_tiny"), 2, 17, NULL, &l),
                    NNT_E_INVAL, "nnt_model_load_hf_tree");
    ck_assert_ptr_null(l);
    test_remove_tmpdir();
}
END_TEST

/* ---- llm.c checkpoints ------------------------------------------------------------------------- */

/* _i: the four (config, tiling) pairs: the tree's llm.c checkpoint = nnt_gpt_save_llmc's of
 * the fused layer with the same weights, byte for byte, and it reads back bit for bit. */
START_TEST(test_save_llmc)
{
    nnt_model_config cfg = config(_i / 2);
    nnt_layer *fused = NULL, *tree = NULL, *back = (nnt_layer *)&back;
    make_pair(&cfg, B, T, &TILINGS[_i % 2], &fused, &tree);
    EXPECT_OK(nnt_layer_init(fused, 7));
    copy_params(fused, tree);
    test_make_tmpdir("model_tree_llmc");
    char a[700], b[700];
    snprintf(a, sizeof a, "%s", test_tmp_path("fused.bin"));
    snprintf(b, sizeof b, "%s", test_tmp_path("tree.bin"));
    EXPECT_OK(nnt_gpt_save_llmc(fused, a));
    EXPECT_OK(nnt_model_save_llmc(tree, "test_save_llmc", b));
    expect_same_file(a, b);
    EXPECT_OK(nnt_model_load_llmc(ctx, "test_save_llmc", b, B, T, &TILINGS[_i % 2], 1,
                                  &back));
    expect_same_lists(tree, back);
    const char *worst = "";
    double d = max_rel_diff(tree, back, 0, &worst);
    ck_assert_msg(d == 0.0, "read back: %s differs by %g", worst, d);
    nnt_layer_destroy(back);
    test_remove_tmpdir();
    nnt_layer_destroy(fused);
    nnt_layer_destroy(tree);
}
END_TEST

/* _i % 2: the tiling. The fixture gpt2_tiny.llmc.bin (V 67, Vp 72: padding rows skipped)
 * into a tree gives nnt_gpt_load_llmc's parameters bit for bit, by name, and its logits. */
START_TEST(test_load_llmc)
{
    const char *path = fix("gpt2_tiny/gpt2_tiny.llmc.bin");
    nnt_layer *fused = NULL, *tree = NULL;
    EXPECT_OK(nnt_gpt_load_llmc(ctx, path, 2, 12, &TILINGS[_i % 2], &fused));
    EXPECT_OK(nnt_model_load_llmc(ctx, "test_load_llmc", path, 2, 12, &TILINGS[_i % 2], 1,
                                  &tree));
    double rel = loaded_logits_rel(fused, tree);
    printf("test_model_tree load_llmc %d: logits tree vs fused, normwise rel %.2e\n", _i, rel);
    /* measured (CPU, this machine): 1.96e-7 (automatic tiling), 2.03e-7 (partial tiles) */
    EXPECT_TOL(rel, 2e-6, "gpt2_tiny.llmc.bin logits, tree against fused");
    nnt_layer_destroy(fused);
    nnt_layer_destroy(tree);
}
END_TEST

/* A copy of the fixture in the temporary dir: drop the last drop bytes, or put magic in
 * header[0]. */
static const char *llmc_copy(const char *name, size_t drop, int32_t magic)
{
    static char path[700];
    size_t len = 0;
    unsigned char *buf = read_all(fix("gpt2_tiny/gpt2_tiny.llmc.bin"), &len);
    ck_assert(len > drop + 4);
    if (magic)
        memcpy(buf, &magic, sizeof magic);   /* little-endian host, as the tests assume */
    snprintf(path, sizeof path, "%s", test_tmp_path(name));
    FILE *f = fopen(path, "wb");
    ck_assert(f && fwrite(buf, 1, len - drop, f) == len - drop && fclose(f) == 0);
    free(buf);
    return path;
}

/* A truncated file, a bad magic, a Llama tree: refused, naming the function and the file,
 * *out NULL. */
START_TEST(test_load_llmc_bad)
{
    test_make_tmpdir("model_tree_llmc");
    nnt_layer *l = (nnt_layer *)&l;
    const char *path = llmc_copy("short.bin", 4, 0);
    EXPECT_FAIL_MSG(nnt_model_load_llmc(ctx, "test_load_llmc_bad", path, 2, 12, NULL, 1, &l),
                    NNT_E_FORMAT, "test_load_llmc_bad: ");
    EXPECT_FAIL_MSG(nnt_model_load_llmc(ctx, "test_load_llmc_bad", path, 2, 12, NULL, 1, &l),
                    NNT_E_FORMAT, path);
    EXPECT_FAIL_MSG(nnt_model_load_llmc(ctx, "test_load_llmc_bad", path, 2, 12, NULL, 1, &l),
                    NNT_E_FORMAT, "truncated");
    ck_assert_ptr_null(l);
    l = (nnt_layer *)&l;
    path = llmc_copy("magic.bin", 0, 20240327);
    EXPECT_FAIL_MSG(nnt_model_load_llmc(ctx, "test_load_llmc_bad", path, 2, 12, NULL, 1, &l),
                    NNT_E_FORMAT, "test_load_llmc_bad: ");
    EXPECT_FAIL_MSG(nnt_model_load_llmc(ctx, "test_load_llmc_bad", path, 2, 12, NULL, 1, &l),
                    NNT_E_FORMAT, path);
    EXPECT_FAIL_MSG(nnt_model_load_llmc(ctx, "test_load_llmc_bad", path, 2, 12, NULL, 1, &l),
                    NNT_E_FORMAT, "bad magic");
    ck_assert_ptr_null(l);
    l = (nnt_layer *)&l;   /* T 17 > maxT 16 */
    EXPECT_FAIL_MSG(nnt_model_load_llmc(ctx, "test_load_llmc_bad",
                                        fix("gpt2_tiny/gpt2_tiny.llmc.bin"), 2, 17, NULL, 1,
                                        &l),
                    NNT_E_INVAL, "test_load_llmc_bad");
    ck_assert_ptr_null(l);
    nnt_model_config c;
    nnt_layer *llama = NULL;
    EXPECT_OK(nnt_model_preset("llama-tiny", &c));
    EXPECT_OK(nnt_model_build_tree(ctx, "test_load_llmc_bad", &c, 1, 8, NULL, &llama));
    EXPECT_FAIL_MSG(nnt_model_save_llmc(llama, "test_load_llmc_bad",
                                        test_tmp_path("llama.bin")),
                    NNT_E_INVAL, "GPT-2 models only");
    nnt_layer_destroy(llama);
    test_remove_tmpdir();
}
END_TEST

static Suite *tree_suite(void)
{
    Suite *s = suite_create("model_tree");
    TCase *tc = tcase_create("model_tree");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 120);
    tcase_add_loop_test(tc, test_params, 0, 4);
    tcase_add_test(tc, test_errors);
    tcase_add_test(tc, test_llama_same);
    tcase_add_loop_test(tc, test_training, 0, 12);
    tcase_add_loop_test(tc, test_state_across, 0, 2);
    tcase_add_loop_test(tc, test_generate, 0, 4);
    tcase_add_loop_test(tc, test_save_hf, 0, 4);
    tcase_add_loop_test(tc, test_load_hf, 0, 3);
    tcase_add_test(tc, test_load_hf_bad);
    tcase_add_loop_test(tc, test_save_llmc, 0, 4);
    tcase_add_loop_test(tc, test_load_llmc, 0, 2);
    tcase_add_test(tc, test_load_llmc_bad);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return run_suite(tree_suite());
}
