/* SPDX-License-Identifier: MIT */
/* The GPT layer (NNT_LAYER_GPT) and the nnt_gpt_* functions, through the public API only,
 * against the Hugging Face fixtures of tests/fixtures/gpt2_tiny (see the README there):
 *   - nnt_gpt_load_safetensors, targets, forward: logits within 3e-6 normwise relative and
 *     the loss within 3e-7 relative of GPT2LMHeadModel's; backward: every gradient,
 *     enumerated with nnt_layer_param and mapped to its HF name, within 8e-6 normwise
 *     relative, for several tilings (channel tiles cutting heads, split head dims, targets
 *     on vocabulary tile edges, automatic); each tolerance about 10x the error measured
 *     (see "tolerances" below);
 *   - 10 AdamW steps against torch.optim.AdamW's losses (within 2e-5), and with TF32 and
 *     bf16 GEMM operands (within 4e-3 and 1e-2 of the fp32 losses, and not within 2e-5);
 *   - the parameter names, count (HF's), decay flags;
 *   - llm.c and safetensors save/load round trips give identical weights and logits;
 *   - greedy generation equals HF's generate; sampling is deterministic per seed;
 *   - nnt_layer_init: deterministic, tiling-independent, GPT-2's distributions;
 *   - presets, nnt_gpt_tiling, and the errors.
 * The fixture files are read with lib/io's safetensors reader (hence the library objects
 * are linked); everything about the model goes through nnt.h. */
#include "testutil.h"
#include "fixture_st.h"

#include <math.h>
#include <stdint.h>
#include <unistd.h>

/* The fixture's configuration. */
enum { V = 67, MAXT = 16, L = 2, NH = 3, C = 24, HD = C / NH, B = 2, T = 12 };

static const nnt_gpt_config FIXTURE_CFG = {sizeof(nnt_gpt_config), V, MAXT, L, NH, C};

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

/* ---- tolerances -----------------------------------------------------------------------
 * About 10x the largest error measured (tests/tolerances.sh) on AMD Zen 3 under the BLIS
 * kernel sets zen3, haswell and generic, over several runs; "Zen 5" is the figure measured
 * on another host (Intel/AMD Zen 5) with the old suite. The fixture is PyTorch's fp32
 * output, so each error includes PyTorch's rounding as well as ours. With these, LayerNorm
 * without eps (loss off by 2e-6 relative, logits by ~5e-5, gradients by ~8e-5) fails every
 * reference step; the GELU coefficient 0.04471 for 0.044715 (logits 1.2e-6, gradients
 * 3.2e-6: 4x the rounding) does not, test_layers' leaf does. */
#define LOSS_TOL 3e-7          /* |loss - fixture| / fixture: 3.3e-8 (Zen 3, Zen 5) */
#define LOGITS_TOL 3e-6        /* normwise relative: 2.9e-7 (Zen 3, generic; 2.7e-7 zen3 and
                                * haswell, Zen 5) */
#define GRAD_TOL 8e-6          /* normwise relative, the worst parameter (h.0.attn.k.weight):
                                * 7.7e-7 (Zen 3, generic; 7.1e-7 zen3 and haswell; 6.5e-7
                                * Zen 5) */
#define GRAD_KBIAS_TOL 7e-8    /* max |key bias gradient| (exactly 0 in exact arithmetic):
                                * 6.8e-9 (Zen 3, generic; 6.2e-9 zen3 and haswell) */
#define ACCUM_TOL 1e-7         /* normwise relative, two backwards vs 2x one: 0, bit-identical
                                * on Zen 3 (one tile: the second gradient is added in one
                                * exact step); one float rounding for a backend that
                                * accumulates inside the GEMM */
#define ADAMW_TOL 2e-5         /* max |loss - fixture| over 10 fp32 AdamW steps: 2.2e-6 (Zen
                                * 3, generic; 2.1e-6 zen3 and haswell, Zen 5) */
#define TF32_TOL 4e-3          /* max |loss - fp32 fixture|, TF32 operands: 3.7e-4 (Zen 3;
                                * 2.8e-4 generic) */
#define BF16_TOL 1e-2          /* the same, bf16 operands: 2.3e-3 (Zen 3; 1.8e-3 Zen 5, with V
                                * tile 10 then): 10x would pass the goal for bf16 training,
                                * 1e-2, which stays (ratio 0.23) */
/* Statistical bounds on nnt_layer_init's values, not rounding errors: the generator is the
 * library's own, so the measured deviations are the same on every host. */
#define INIT_STD_TOL 0.06      /* |std - want| / want, >= 4096 samples, so one standard error
                                * is ~1.1%: about 5 of them; measured 0.016 */
#define INIT_MEAN_SIGMAS 5.0   /* |mean| in standard errors: measured 2.3 (of 42 tensors) */
#define INIT_LOSS_TOL 0.2      /* |initial loss - ln V| of a fresh model: measured 0.057 */

/* ---- fixture files ------------------------------------------------------------------ */

/* ---- helpers -------------------------------------------------------------------------- */

static nnt_tiling tiling_of(int64_t b, int64_t s, int64_t c, int64_t h, int64_t v, int64_t nh,
                            int64_t hd)
{
    nnt_tiling t = {sizeof(nnt_tiling), b, s, c, h, v, nh, hd};
    return t;
}

/* (rows, cols) int32 tensor from host ids, tiles (tr, tc). */
static nnt_tensor *ids_tensor(const int32_t *ids, int64_t rows, int64_t cols, int64_t tr,
                              int64_t tc)
{
    int64_t shape[2] = {rows, cols}, tile[2] = {tr, tc};
    nnt_tensor *x = NULL;
    EXPECT_OK(nnt_tensor_create(ctx, NNT_INT32, 2, shape, tile, &x));
    EXPECT_OK(nnt_tensor_copy_from_host(x, ids, (size_t)(rows * cols) * sizeof(int32_t)));
    return x;
}

static nnt_param_info param_at(nnt_layer *gpt, int64_t i)
{
    nnt_param_info p;
    memset(&p, 0, sizeof p);
    p.size = sizeof p;
    EXPECT_OK(nnt_layer_param(gpt, i, &p));
    return p;
}

static nnt_layer *load_fixture(const nnt_tiling *t, int64_t b, int64_t s)
{
    nnt_layer *gpt = NULL;
    EXPECT_OK(nnt_gpt_load_safetensors(ctx, fixture_path("model.safetensors"), &FIXTURE_CFG,
                                       b, s, t, &gpt));
    ck_assert_ptr_nonnull(gpt);
    return gpt;
}

/* ---- our parameter names -> the fixture's HF tensors ------------------------------------ */

/* The HF tensor holding parameter `name` (prefix + "transformer." + HF name) and how to
 * gather it: HF Conv1D weights are (in, out_all), ours (out, in) is the column block
 * [offset, offset + out) transposed; *conv1d says which. Biases of c_attn: the slice at
 * offset. */
static void hf_source(const char *name, const char *prefix, char *hf, size_t len, int *conv1d,
                      int64_t *offset)
{
    int layer = -1;
    char rest[64] = "";
    *conv1d = 0;
    *offset = 0;
    if (sscanf(name, "h.%d.%63s", &layer, rest) != 2) {
        snprintf(hf, len, "%stransformer.%s", prefix, name);
        return;
    }
    const char *qkv = strchr("qkv", rest[5]);
    if (strncmp(rest, "attn.", 5) == 0 && rest[5] && qkv && rest[6] == '.') {
        int part = (int)(qkv - "qkv");
        *offset = part * C;
        *conv1d = strcmp(rest + 7, "weight") == 0;
        snprintf(hf, len, "%stransformer.h.%d.attn.c_attn.%s", prefix, layer, rest + 7);
        return;
    }
    *conv1d = strstr(rest, "c_proj.weight") != NULL || strstr(rest, "c_fc.weight") != NULL;
    snprintf(hf, len, "%stransformer.h.%d.%s", prefix, layer, rest);
}

/* The fixture's values of parameter `name` (numel floats) in our layout, malloc'd. */
static float *hf_values(const nnt_st_reader *r, const char *prefix, const char *name,
                        int64_t numel)
{
    char hf[160];
    int conv1d = 0;
    int64_t offset = 0;
    hf_source(name, prefix, hf, sizeof hf, &conv1d, &offset);
    const nnt_st_entry *e = NULL;
    float *src = fixture_read(r, hf, NNT_IO_F32, &e);
    float *dst = malloc((size_t)numel * sizeof(float));
    ck_assert_ptr_nonnull(dst);
    if (conv1d) {
        int64_t in = e->shape[0], all = e->shape[1], out = numel / in;
        ck_assert_int_eq(out * in, numel);
        for (int64_t o = 0; o < out; o++)
            for (int64_t i = 0; i < in; i++)
                dst[o * in + i] = src[i * all + offset + o];
    } else {
        ck_assert_int_ge((int64_t)e->numel, offset + numel);
        memcpy(dst, src + offset, (size_t)numel * sizeof(float));
    }
    free(src);
    return dst;
}

/* ---- forward / backward against the fixture ---------------------------------------------- */

typedef struct tiling_case {
    const char *what;
    nnt_tiling t;
    int automatic;          /* use NULL (automatic) instead of t */
} tiling_case;

/* The vocabulary tile 9 of the second puts targets of the fixture's batch on the first id
 * of a tile (36, 54) and on the last (17, 26, 44, 53): a tile edge off by one in the
 * cross-entropy changes the loss (the tile edges of the other tilings, 0, 32, 33, 65 and
 * 66, hold no target of the batch). */
static const tiling_case TILINGS[] = {
    {"whole dimensions", {sizeof(nnt_tiling), -1, -1, -1, -1, -1, -1, -1}, 0},
    {"all partial, C tile 5 cuts heads, hd split 3, V tile 9",
     {sizeof(nnt_tiling), 1, 5, 5, 40, 9, 2, 3}, 0},
    {"C tile 12 cuts head 1, T tiles 4", {sizeof(nnt_tiling), 2, 4, 12, 32, 33, 1, 8}, 0},
    {"automatic", {sizeof(nnt_tiling), 0, 0, 0, 0, 0, 0, 0}, 1},
};
#define NTILINGS ((int)(sizeof TILINGS / sizeof TILINGS[0]))

/* forward with the fixture's targets; returns the logits (host) */
static float *reference_forward(nnt_layer *gpt, const nnt_st_reader *ref, double *loss)
{
    int32_t *tok = fixture_read(ref, "tokens", NNT_IO_I32, NULL);
    int32_t *tgt = fixture_read(ref, "targets", NNT_IO_I32, NULL);
    nnt_tensor *tokens = ids_tensor(tok, B, T, 1, 5), *targets = ids_tensor(tgt, B, T, 2, 12);
    EXPECT_OK(nnt_layer_set_targets(gpt, targets));
    nnt_tensor_destroy(targets);   /* the layer copied them */
    nnt_tensor *y = NULL;
    EXPECT_OK(nnt_layer_forward(gpt, tokens, &y));
    ck_assert_ptr_nonnull(y);
    int64_t shape[3] = {0, 0, 0};
    int ndim = 0;
    EXPECT_OK(nnt_tensor_ndim(y, &ndim));
    ck_assert_int_eq(ndim, 3);
    EXPECT_OK(nnt_tensor_shape(y, shape));
    ck_assert(shape[0] == B && shape[1] == T && shape[2] == V);
    EXPECT_OK(nnt_layer_loss(gpt, loss));
    float *logits = test_to_host(y, NULL);
    nnt_tensor_destroy(tokens);
    free(tok);
    free(tgt);
    return logits;
}

/* Every gradient within GRAD_TOL normwise relative of the fixture's; the key biases
 * (mathematically 0, rounding noise in the fixture) within GRAD_KBIAS_TOL absolute. */
static void check_gradients(nnt_layer *gpt, const nnt_st_reader *ref, const char *what)
{
    int64_t count = 0;
    EXPECT_OK(nnt_layer_num_params(gpt, &count, NULL));
    double worst = 0.0;
    const char *worst_name = "";
    for (int64_t i = 0; i < count; i++) {
        nnt_param_info p = param_at(gpt, i);
        int64_t n = 0;
        float *got = test_to_host(p.grad, &n);
        float *want = hf_values(ref, "grad.", p.name, n);
        if (strstr(p.name, "attn.k.bias")) {
            double big = 0.0;
            for (int64_t j = 0; j < n; j++)
                big = fabs(got[j]) > big ? fabs(got[j]) : big;
            EXPECT_TOL(big, GRAD_KBIAS_TOL, "%s: %s is not ~0", what, p.name);
        } else {
            double e = test_rel_err(got, want, n);
            EXPECT_TOL(e, GRAD_TOL, "%s: gradient of %s, relative error", what, p.name);
            if (e > worst) {
                worst = e;
                worst_name = p.name;
            }
        }
        free(got);
        free(want);
    }
    printf("test_layer_gpt gradients [%s]: worst relative error %.2e (%s)\n", what, worst,
           worst_name);
}

/* _i = tiling + NTILINGS * clear: the gradients of the fresh layer (zero-filled), or dropped
 * first by nnt_layer_clear_grad as nnt-train does (the backward then writes them) */
START_TEST(test_reference_step)
{
    const tiling_case *tc = &TILINGS[_i % NTILINGS];
    const int clear = _i / NTILINGS;
    nnt_st_reader *ref = fixture_open_st("reference.safetensors");
    nnt_layer *gpt = load_fixture(tc->automatic ? NULL : &tc->t, B, T);
    if (clear)
        EXPECT_OK(nnt_layer_clear_grad(gpt));
    double loss = 0.0;
    float *logits = reference_forward(gpt, ref, &loss);
    float *want_logits = fixture_read(ref, "logits", NNT_IO_F32, NULL);
    float *want_loss = fixture_read(ref, "loss", NNT_IO_F32, NULL);
    double le = fabs(loss - want_loss[0]) / fabs(want_loss[0]);
    double ge = test_rel_err(logits, want_logits, B * T * V);
    EXPECT_TOL(le, LOSS_TOL, "%s: loss %.9g, fixture %.9g, relative error", tc->what, loss,
               want_loss[0]);
    EXPECT_TOL(ge, LOGITS_TOL, "%s: logits relative error", tc->what);
    nnt_tensor *dx = (nnt_tensor *)&dx;   /* must become NULL */
    EXPECT_OK(nnt_layer_backward(gpt, NULL, &dx));
    ck_assert_ptr_null(dx);
    check_gradients(gpt, ref, clear ? "after clear_grad" : tc->what);
    printf("test_layer_gpt reference [%s]: loss %.9f (fixture %.9f, rel %.2e), logits rel "
           "%.2e\n", tc->what, loss, want_loss[0], le, ge);
    free(logits);
    free(want_logits);
    free(want_loss);
    nnt_layer_destroy(gpt);
    nnt_st_close(ref);
}
END_TEST

/* Gradients accumulate over two backwards; zero_grad clears them; no targets: no loss. */
START_TEST(test_accumulate_and_targets)
{
    nnt_st_reader *ref = fixture_open_st("reference.safetensors");
    nnt_layer *gpt = load_fixture(NULL, B, T);
    double loss = 0.0, loss2 = 0.0;
    free(reference_forward(gpt, ref, &loss));
    EXPECT_OK(nnt_layer_backward(gpt, NULL, NULL));
    nnt_param_info p = param_at(gpt, 4);   /* h.0.attn.q.weight */
    ck_assert_str_eq(p.name, "h.0.attn.q.weight");
    int64_t n = 0;
    float *once = test_to_host(p.grad, &n);
    free(reference_forward(gpt, ref, &loss2));
    ck_assert(loss == loss2);
    EXPECT_OK(nnt_layer_backward(gpt, NULL, NULL));
    float *twice = test_to_host(p.grad, NULL);
    for (int64_t i = 0; i < n; i++)
        once[i] *= 2.0f;   /* exact */
    EXPECT_TOL(test_rel_err(twice, once, n), ACCUM_TOL, "gradient after two backwards vs 2x after "
               "one, normwise relative");
    EXPECT_OK(nnt_layer_zero_grad(gpt));
    float *zero = test_to_host(p.grad, NULL);
    for (int64_t i = 0; i < n; i++)
        ck_assert(zero[i] == 0.0f);
    /* forgetting the targets: forward computes no loss (the loss stays the last forward's
     * with targets), backward has nothing to do */
    EXPECT_OK(nnt_layer_set_targets(gpt, NULL));
    int32_t *tok = fixture_read(ref, "tokens", NNT_IO_I32, NULL);
    nnt_tensor *tokens = ids_tensor(tok, B, T, B, T);
    EXPECT_OK(nnt_layer_forward(gpt, tokens, NULL));
    EXPECT_OK(nnt_layer_loss(gpt, &loss2));
    ck_assert(loss2 == loss);
    EXPECT_FAIL_MSG(nnt_layer_backward(gpt, NULL, NULL), NNT_E_STATE, "nnt_layer_backward");
    nnt_tensor_destroy(tokens);
    free(tok);
    free(once);
    free(twice);
    free(zero);
    nnt_layer_destroy(gpt);
    nnt_st_close(ref);
}
END_TEST

/* ---- activation recompute ------------------------------------------------------------- */

/* Every gradient of a equal to b's: bit for bit (bits), or as numbers (+0 == -0). */
static void expect_grads_equal(nnt_layer *a, nnt_layer *b, int bits, const char *what)
{
    int64_t count = 0;
    EXPECT_OK(nnt_layer_num_params(a, &count, NULL));
    for (int64_t i = 0; i < count; i++) {
        nnt_param_info pa = param_at(a, i), pb = param_at(b, i);
        int64_t n = 0;
        float *ga = test_to_host(pa.grad, &n), *gb = test_to_host(pb.grad, NULL);
        if (bits)
            ck_assert_msg(memcmp(ga, gb, (size_t)n * sizeof(float)) == 0,
                          "%s: gradient of %s differs", what, pa.name);
        for (int64_t j = 0; !bits && j < n; j++)
            ck_assert_msg(ga[j] == gb[j], "%s: %s[%lld]: %.9g vs %.9g", what, pa.name,
                          (long long)j, ga[j], gb[j]);
        free(ga);
        free(gb);
    }
}

/* With recompute: the same loss, logits and gradients bit for bit, for tilings with one
 * and with many tiles; no switching between a forward and its backward; switching off
 * and on again between steps keeps it exact. */
START_TEST(test_recompute)
{
    const tiling_case *tc = &TILINGS[_i];
    nnt_st_reader *ref = fixture_open_st("reference.safetensors");
    nnt_layer *plain = load_fixture(&tc->t, B, T), *rec = load_fixture(&tc->t, B, T);
    EXPECT_OK(nnt_gpt_set_recompute(rec, 1));
    EXPECT_OK(nnt_gpt_set_recompute(rec, 1));   /* already on: nothing to do */
    for (int round = 0; round < 2; round++) {
        double loss_plain = 0.0, loss_rec = 0.0;
        float *lp = reference_forward(plain, ref, &loss_plain);
        float *lr = reference_forward(rec, ref, &loss_rec);
        ck_assert_msg(loss_plain == loss_rec, "%s: loss %.9g vs %.9g with recompute", tc->what,
                      loss_plain, loss_rec);
        ck_assert(memcmp(lp, lr, (size_t)(B * T * V) * sizeof(float)) == 0);
        EXPECT_FAIL_MSG(nnt_gpt_set_recompute(rec, 0), NNT_E_STATE, "nnt_gpt_set_recompute");
        EXPECT_OK(nnt_layer_backward(plain, NULL, NULL));
        EXPECT_OK(nnt_layer_backward(rec, NULL, NULL));
        expect_grads_equal(plain, rec, 1, tc->what);
        if (round == 0)
            check_gradients(rec, ref, tc->what);
        /* off and on again: the activations are recreated */
        EXPECT_OK(nnt_gpt_set_recompute(rec, 0));
        EXPECT_OK(nnt_gpt_set_recompute(rec, 7));
        free(lp);
        free(lr);
    }
    EXPECT_FAIL_MSG(nnt_gpt_set_recompute(NULL, 1), NNT_E_INVAL, "nnt_gpt_set_recompute");
    nnt_layer *emb = NULL;
    EXPECT_OK(nnt_layer_embedding_create(ctx, V, MAXT, C, NULL, &emb));
    EXPECT_FAIL_MSG(nnt_gpt_set_recompute(emb, 1), NNT_E_INVAL, "nnt_gpt_set_recompute");
    nnt_layer_destroy(emb);
    nnt_layer_destroy(plain);
    nnt_layer_destroy(rec);
    nnt_st_close(ref);
}
END_TEST

/* RAM taken by one forward + backward of a deeper model (L blocks, random weights), measured
 * as the growth of the context's peak RAM use during them over its use after creation (the
 * peak, not the use after the backward: since blocks release their activations once their
 * backward is done, with or without recompute, both models end the backward with about the
 * same use). */
static int64_t step_memory(int recompute, int blocks)
{
    nnt_gpt_config cfg = {sizeof cfg, 64, 32, blocks, 2, 32};
    nnt_layer *gpt = NULL;
    EXPECT_OK(nnt_gpt_create(ctx, &cfg, 2, 32, NULL, &gpt));
    EXPECT_OK(nnt_gpt_set_recompute(gpt, recompute));
    EXPECT_OK(nnt_layer_zero_grad(gpt));   /* gradients in memory before: activations measured */
    EXPECT_OK(nnt_ctx_wait(ctx));
    nnt_mem_stats before, after;
    memset(&before, 0, sizeof before);
    before.size = sizeof before, after = before;
    EXPECT_OK(nnt_ctx_mem_stats(ctx, &before, 1));   /* the peak restarts from now */
    int32_t ids[2 * 32];
    for (int i = 0; i < 2 * 32; i++)
        ids[i] = (i * 7) % 64;
    nnt_tensor *tokens = ids_tensor(ids, 2, 32, 2, 32);
    EXPECT_OK(nnt_layer_set_targets(gpt, tokens));
    EXPECT_OK(nnt_layer_forward(gpt, tokens, NULL));
    EXPECT_OK(nnt_layer_backward(gpt, NULL, NULL));
    EXPECT_OK(nnt_ctx_wait(ctx));
    EXPECT_OK(nnt_ctx_mem_stats(ctx, &after, 0));
    nnt_tensor_destroy(tokens);
    nnt_layer_destroy(gpt);
    return after.node[0].peak_bytes - before.node[0].used_bytes;
}

/* Recompute must save at least 80% of the 16 (B, T, C)-sized tensors per block but one
 * that it does not keep: L blocks -> (L - 1) * 16 * B T C floats. Measured with recompute
 * first, so that buffers StarPU may cache after the first model can only make the plain
 * model's growth smaller (the check stricter). The peak depends on the schedule (a block's
 * recompute may start while the block above is still in its backward): with 6 blocks, runs
 * saved 523776 to 663000 bytes of 655360, once 512 bytes short of 80 %; 12 blocks leave the
 * same one- or two-block slack a smaller share. Without recompute nothing is saved, so a
 * recompute that keeps activations still fails. */
START_TEST(test_recompute_memory)
{
    if (test_ctx_has_cuda(ctx)) {
        /* StarPU takes pinned RAM and GPU memory in 32 MiB chunks and places tiles of up to
         * 4 MiB inside them: the memory statistics do not move for this model (0 and 0
         * bytes on an H200) */
        printf("test_layer_gpt recompute memory: NOT MEASURED with CUDA workers (StarPU "
               "allocates 32 MiB chunks there)\n");
        return;
    }
    const int blocks = 12;
    int64_t rec = step_memory(1, blocks), plain = step_memory(0, blocks);
    int64_t expected = (blocks - 1) * 16 * 2 * 32 * 32 * (int64_t)sizeof(float);
    printf("test_layer_gpt recompute memory: forward + backward takes %lld bytes of RAM "
           "without recompute, %lld with (expected saving %lld)\n", (long long)plain,
           (long long)rec, (long long)expected);
    ck_assert_msg(plain - rec >= expected * 8 / 10, "recompute saved %lld bytes, expected "
                  "about %lld", (long long)(plain - rec), (long long)expected);
}
END_TEST

/* ---- clear_grad ---------------------------------------------------------------------------- */

/* clear_grad: the weight and bias gradients are unreadable until the backward, which then
 * gives what zero_grad + backward gives, and a second backward adds; LayerNorm and wpe
 * gradients read as 0; an optimizer step without a backward is refused. */
START_TEST(test_clear_grad)
{
    const tiling_case *tc = &TILINGS[_i];
    nnt_st_reader *ref = fixture_open_st("reference.safetensors");
    nnt_layer *zeroed = load_fixture(&tc->t, B, T), *cleared = load_fixture(&tc->t, B, T);
    for (int round = 0; round < 2; round++) {
        EXPECT_OK(nnt_layer_zero_grad(zeroed));
        EXPECT_OK(nnt_layer_clear_grad(cleared));
        int64_t count = 0;
        EXPECT_OK(nnt_layer_num_params(cleared, &count, NULL));
        for (int64_t i = 0; i < count; i++) {
            nnt_param_info p = param_at(cleared, i);
            int64_t n = 0;
            EXPECT_OK(nnt_tensor_numel(p.grad, &n));
            float *buf = malloc((size_t)n * sizeof(float));
            ck_assert_ptr_nonnull(buf);
            int dropped = strstr(p.name, "ln_") == NULL && strcmp(p.name, "wpe.weight") != 0;
            int rc = nnt_tensor_copy_to_host(p.grad, buf, (size_t)n * sizeof(float));
            if (dropped) {
                ck_assert_msg(rc == NNT_E_STATE, "%s: reading a cleared gradient gave %d",
                              p.name, rc);
            } else {
                ck_assert_msg(rc == NNT_OK, "%s: %s", p.name, nnt_ctx_last_error(ctx));
                for (int64_t j = 0; j < n; j++)
                    ck_assert(buf[j] == 0.0f);
            }
            free(buf);
        }
        if (round == 0) {   /* no backward yet: the optimizer cannot read the gradients */
            nnt_optim_options oo = NNT_OPTIM_OPTIONS_INIT;
            nnt_optim *opt = NULL;
            EXPECT_OK(nnt_optim_create(ctx, &oo, &opt));
            EXPECT_OK(nnt_optim_add_layer(opt, cleared));
            EXPECT_RC(nnt_optim_step(opt), NNT_E_STATE);
            nnt_optim_destroy(opt);
        }
        double lz = 0.0, lc = 0.0;
        for (int pass = 0; pass < 2; pass++) {   /* the second backward adds */
            free(reference_forward(zeroed, ref, &lz));
            free(reference_forward(cleared, ref, &lc));
            ck_assert(lz == lc);
            EXPECT_OK(nnt_layer_backward(zeroed, NULL, NULL));
            EXPECT_OK(nnt_layer_backward(cleared, NULL, NULL));
            expect_grads_equal(zeroed, cleared, 0, tc->what);
        }
    }
    /* the generic kinds (0.3): linear layers drop their gradients like the GPT layer,
     * LayerNorm zero-fills */
    nnt_layer *lin = NULL, *ln = NULL;
    EXPECT_OK(nnt_layer_linear_create(ctx, 4, 3, NNT_LINEAR_BIAS, NULL, &lin));
    EXPECT_OK(nnt_layer_clear_grad(lin));
    nnt_param_info w = param_at(lin, 0);
    float g1[12];
    EXPECT_RC(nnt_tensor_copy_to_host(w.grad, g1, sizeof g1), NNT_E_STATE);
    nnt_layer_destroy(lin);
    EXPECT_OK(nnt_layer_layernorm_create(ctx, 4, 1e-5, NULL, &ln));
    EXPECT_OK(nnt_layer_clear_grad(ln));
    float *g = test_to_host(param_at(ln, 0).grad, NULL);
    for (int j = 0; j < 4; j++)
        ck_assert(g[j] == 0.0f);
    free(g);
    nnt_layer_destroy(ln);
    EXPECT_FAIL_MSG(nnt_layer_clear_grad(NULL), NNT_E_INVAL, "nnt_layer_clear_grad");
    nnt_layer_destroy(zeroed);
    nnt_layer_destroy(cleared);
    nnt_st_close(ref);
}
END_TEST

/* ---- parameters -------------------------------------------------------------------------- */

START_TEST(test_params)
{
    nnt_layer *gpt = load_fixture(NULL, B, T);
    nnt_layer_kind kind = 0;
    int nchildren = -1;
    EXPECT_OK(nnt_layer_kind_of(gpt, &kind));
    ck_assert_int_eq(kind, NNT_LAYER_GPT);
    EXPECT_OK(nnt_layer_num_children(gpt, &nchildren));
    ck_assert_int_eq(nchildren, 0);
    nnt_gpt_config cfg;
    EXPECT_OK(nnt_gpt_config_of(gpt, &cfg));
    ck_assert(cfg.size == sizeof cfg && cfg.vocab == V && cfg.max_seq == MAXT &&
              cfg.layers == L && cfg.heads == NH && cfg.channels == C);
    /* HF's parameter count: every tensor of the fixture (lm_head is tied, not stored) */
    nnt_st_reader *r = fixture_open_st("model.safetensors");
    int64_t hf_numel = 0;
    for (size_t i = 0; i < nnt_st_count(r); i++)
        hf_numel += (int64_t)nnt_st_entry_at(r, i)->numel;
    nnt_st_close(r);
    int64_t count = 0, numel = 0;
    EXPECT_OK(nnt_layer_num_params(gpt, &count, &numel));
    ck_assert_int_eq(count, 4 + 16 * L);
    ck_assert_int_eq(numel, hf_numel);
    ck_assert_int_eq(numel, V * C + MAXT * C + L * (12 * C * C + 13 * C) + 2 * C);
    /* the names in order, shapes, and decay flags */
    static const char *const block[16] = {
        "ln_1.weight", "ln_1.bias", "attn.q.weight", "attn.k.weight", "attn.v.weight",
        "attn.q.bias", "attn.k.bias", "attn.v.bias", "attn.c_proj.weight", "attn.c_proj.bias",
        "ln_2.weight", "ln_2.bias", "mlp.c_fc.weight", "mlp.c_fc.bias", "mlp.c_proj.weight",
        "mlp.c_proj.bias"};
    char want[64];
    for (int64_t i = 0; i < count; i++) {
        nnt_param_info p = param_at(gpt, i);
        if (i < 2)
            snprintf(want, sizeof want, "%s", i ? "wpe.weight" : "wte.weight");
        else if (i >= count - 2)
            snprintf(want, sizeof want, "%s", i == count - 2 ? "ln_f.weight" : "ln_f.bias");
        else
            snprintf(want, sizeof want, "h.%d.%s", (int)((i - 2) / 16), block[(i - 2) % 16]);
        ck_assert_str_eq(p.name, want);
        int matrix = strstr(p.name, "weight") && !strstr(p.name, "ln_");
        ck_assert_msg(p.decay == matrix, "%s: decay %d", p.name, p.decay);
        int ndim = 0;
        EXPECT_OK(nnt_tensor_ndim(p.value, &ndim));
        if (strstr(p.name, "attn.q.weight") || strstr(p.name, "attn.c_proj.weight")) {
            int64_t shape[3], want3[2][3] = {{NH, HD, C}, {C, NH, HD}};
            ck_assert_int_eq(ndim, 3);
            EXPECT_OK(nnt_tensor_shape(p.value, shape));
            int w = strstr(p.name, "c_proj") != NULL;
            ck_assert(memcmp(shape, want3[w], sizeof shape) == 0);
        }
    }
    /* the weights are the fixture's */
    r = fixture_open_st("model.safetensors");
    for (int64_t i = 0; i < count; i++) {
        nnt_param_info p = param_at(gpt, i);
        int64_t n = 0;
        float *got = test_to_host(p.value, &n);
        float *hf = hf_values(r, "", p.name, n);
        ck_assert_msg(memcmp(got, hf, (size_t)n * sizeof(float)) == 0, "%s differs from the "
                      "file", p.name);
        free(got);
        free(hf);
    }
    nnt_st_close(r);
    nnt_layer_destroy(gpt);
}
END_TEST

/* ---- save / load ---------------------------------------------------------------------------- */

static float *logits_of(nnt_layer *gpt, const int32_t *ids)
{
    nnt_tensor *tokens = ids_tensor(ids, B, T, B, T), *y = NULL;
    EXPECT_OK(nnt_layer_forward(gpt, tokens, &y));
    float *out = test_to_host(y, NULL);
    nnt_tensor_destroy(tokens);
    return out;
}

static void expect_same_params(nnt_layer *a, nnt_layer *b)
{
    int64_t na = 0, nb = 0;
    EXPECT_OK(nnt_layer_num_params(a, &na, NULL));
    EXPECT_OK(nnt_layer_num_params(b, &nb, NULL));
    ck_assert_int_eq(na, nb);
    for (int64_t i = 0; i < na; i++) {
        nnt_param_info pa = param_at(a, i), pb = param_at(b, i);
        ck_assert_str_eq(pa.name, pb.name);
        int64_t n = 0;
        float *va = test_to_host(pa.value, &n), *vb = test_to_host(pb.value, NULL);
        ck_assert_msg(memcmp(va, vb, (size_t)n * sizeof(float)) == 0, "%s differs", pa.name);
        free(va);
        free(vb);
    }
}

static void temp_path(char *path, size_t len, const char *suffix)
{
    snprintf(path, len, "/tmp/nnt_test_layer_gpt_%ld%s", (long)getpid(), suffix);
}

START_TEST(test_round_trips)
{
    nnt_tiling t = tiling_of(1, 5, 5, 40, 10, 2, 3);
    nnt_layer *gpt = load_fixture(&t, B, T), *back = NULL;
    int32_t ids[B * T];
    for (int i = 0; i < B * T; i++)
        ids[i] = (int32_t)((i * 37 + 11) % V);
    float *want = logits_of(gpt, ids);
    char path[256];
    /* llm.c */
    temp_path(path, sizeof path, ".bin");
    EXPECT_OK(nnt_gpt_save_llmc(gpt, path));
    EXPECT_OK(nnt_gpt_load_llmc(ctx, path, B, T, &t, &back));
    expect_same_params(gpt, back);
    float *got = logits_of(back, ids);
    ck_assert(memcmp(got, want, B * T * V * sizeof(float)) == 0);
    nnt_gpt_config cfg;
    EXPECT_OK(nnt_gpt_config_of(back, &cfg));
    ck_assert(cfg.vocab == V && cfg.max_seq == MAXT && cfg.layers == L && cfg.heads == NH &&
              cfg.channels == C);
    free(got);
    nnt_layer_destroy(back);
    back = NULL;
    ck_assert_int_eq(unlink(path), 0);
    /* safetensors */
    temp_path(path, sizeof path, ".safetensors");
    EXPECT_OK(nnt_gpt_save_safetensors(gpt, path));
    EXPECT_OK(nnt_gpt_load_safetensors(ctx, path, &FIXTURE_CFG, B, T, &t, &back));
    expect_same_params(gpt, back);
    got = logits_of(back, ids);
    ck_assert(memcmp(got, want, B * T * V * sizeof(float)) == 0);
    free(got);
    nnt_layer_destroy(back);
    ck_assert_int_eq(unlink(path), 0);
    /* the fixture's llm.c file holds the same model */
    EXPECT_OK(nnt_gpt_load_llmc(ctx, fixture_path("gpt2_tiny.llmc.bin"), B, T, &t, &back));
    expect_same_params(gpt, back);
    nnt_layer_destroy(back);
    free(want);
    nnt_layer_destroy(gpt);
}
END_TEST

/* ---- generation ------------------------------------------------------------------------------ */

enum { NPROMPT = 5, NGEN = 8 };

START_TEST(test_generate)
{
    nnt_st_reader *r = fixture_open_st("generate.safetensors");
    int32_t *prompt = fixture_read(r, "prompt", NNT_IO_I32, NULL);
    int32_t *want = fixture_read(r, "tokens", NNT_IO_I32, NULL);
    nnt_st_close(r);
    nnt_layer *gpt = NULL;
    nnt_tiling t = tiling_of(1, 5, 5, 40, 10, 2, 3);
    EXPECT_OK(nnt_gpt_load_llmc(ctx, fixture_path("gpt2_tiny.llmc.bin"), 2, 13, &t, &gpt));
    int32_t got[NGEN], again[NGEN], other[NGEN];
    EXPECT_OK(nnt_gpt_generate(gpt, prompt, NPROMPT, NGEN, NULL, got));
    for (int i = 0; i < NGEN; i++)
        ck_assert_msg(got[i] == want[NPROMPT + i], "token %d is %d, Hugging Face %d", i,
                      (int)got[i], (int)want[NPROMPT + i]);
    nnt_sampling s = NNT_SAMPLING_INIT;
    s.temperature = 0.0;
    EXPECT_OK(nnt_gpt_generate(gpt, prompt, NPROMPT, NGEN, &s, again));
    ck_assert(memcmp(got, again, sizeof got) == 0);
    /* sampling: the same seed gives the same tokens, another seed others */
    s.temperature = 1.0;
    s.top_k = 0;
    s.seed = 42;
    EXPECT_OK(nnt_gpt_generate(gpt, prompt, NPROMPT, NGEN, &s, got));
    EXPECT_OK(nnt_gpt_generate(gpt, prompt, NPROMPT, NGEN, &s, again));
    ck_assert(memcmp(got, again, sizeof got) == 0);
    s.seed = 43;
    EXPECT_OK(nnt_gpt_generate(gpt, prompt, NPROMPT, NGEN, &s, other));
    ck_assert(memcmp(got, other, sizeof got) != 0);
    for (int i = 0; i < NGEN; i++)
        ck_assert(got[i] >= 0 && got[i] < V);
    /* generation cancels a pending backward (the activations are overwritten) */
    int32_t ids[2 * 13];
    for (int i = 0; i < 2 * 13; i++)
        ids[i] = (int32_t)(i % V);
    nnt_tensor *tokens = ids_tensor(ids, 2, 13, 2, 13);
    EXPECT_OK(nnt_layer_set_targets(gpt, tokens));
    EXPECT_OK(nnt_layer_forward(gpt, tokens, NULL));
    EXPECT_OK(nnt_gpt_generate(gpt, prompt, NPROMPT, 1, NULL, got));
    EXPECT_FAIL_MSG(nnt_layer_backward(gpt, NULL, NULL), NNT_E_STATE, "nnt_layer_backward");
    nnt_tensor_destroy(tokens);
    /* bad arguments */
    s.size = 0;
    EXPECT_FAIL_MSG(nnt_gpt_generate(gpt, prompt, NPROMPT, NGEN, &s, got), NNT_E_INVAL,
                    "nnt_gpt_generate");
    EXPECT_FAIL_MSG(nnt_gpt_generate(gpt, NULL, NPROMPT, NGEN, NULL, got), NNT_E_INVAL,
                    "nnt_gpt_generate");
    EXPECT_FAIL_MSG(nnt_gpt_generate(gpt, prompt, 0, NGEN, NULL, got), NNT_E_INVAL,
                    "nnt_gpt_generate");
    int32_t bad = V;
    EXPECT_FAIL_MSG(nnt_gpt_generate(gpt, &bad, 1, NGEN, NULL, got), NNT_E_INVAL,
                    "nnt_gpt_generate");
    EXPECT_FAIL_MSG(nnt_gpt_generate(NULL, prompt, NPROMPT, NGEN, NULL, got), NNT_E_INVAL,
                    "nnt_gpt_generate");
    nnt_layer_destroy(gpt);
    free(prompt);
    free(want);
}
END_TEST

/* ---- initialisation --------------------------------------------------------------------------- */

static void moments(const float *x, int64_t n, double *mean, double *std)
{
    double s = 0.0, s2 = 0.0;
    for (int64_t i = 0; i < n; i++) {
        s += x[i];
        s2 += (double)x[i] * x[i];
    }
    *mean = s / (double)n;
    *std = sqrt(s2 / (double)n - *mean * *mean);
}

/* What GPT-2's initialisation gives parameter p of a model with nblocks blocks. */
static void check_init_distribution(const nnt_param_info *p, int nblocks)
{
    int64_t n = 0;
    float *x = test_to_host(p->value, &n);
    const char *name = p->name;
    if (strstr(name, "ln_") && strstr(name, "weight")) {
        for (int64_t i = 0; i < n; i++)
            ck_assert_msg(x[i] == 1.0f, "%s[%lld] = %g", name, (long long)i, x[i]);
    } else if (strstr(name, "bias")) {
        for (int64_t i = 0; i < n; i++)
            ck_assert_msg(x[i] == 0.0f, "%s[%lld] = %g", name, (long long)i, x[i]);
    } else {
        double mean = 0.0, std = 0.0;
        double want = strstr(name, "c_proj") ? 0.02 / sqrt(2.0 * nblocks) : 0.02;
        moments(x, n, &mean, &std);
        /* n >= 4096 samples: the std estimate is within ~1.1% (1 sigma) */
        EXPECT_TOL(fabs(std - want) / want, INIT_STD_TOL, "%s: std %g, want %g, relative "
                   "deviation", name, std, want);
        EXPECT_TOL(fabs(mean) / (want / sqrt((double)n)), INIT_MEAN_SIGMAS,
                   "%s: mean %g, in standard errors", name, mean);
    }
    free(x);
}

START_TEST(test_init)
{
    nnt_gpt_config cfg;
    EXPECT_OK(nnt_gpt_preset("tiny", &cfg));
    nnt_tiling a = tiling_of(-1, -1, -1, -1, -1, -1, -1), b = tiling_of(1, 7, 24, 100, 50, 3, 5);
    nnt_layer *ga = NULL, *gb = NULL;
    EXPECT_OK(nnt_gpt_create(ctx, &cfg, 2, 16, &a, &ga));
    EXPECT_OK(nnt_gpt_create(ctx, &cfg, 1, 16, &b, &gb));
    /* created with seed 0, the same on any tiling */
    expect_same_params(ga, gb);
    int64_t count = 0;
    EXPECT_OK(nnt_layer_num_params(ga, &count, NULL));
    for (int64_t i = 0; i < count; i++) {
        nnt_param_info p = param_at(ga, i);
        check_init_distribution(&p, (int)cfg.layers);
    }
    /* seed 7: deterministic, tiling-independent, not seed 0's */
    nnt_param_info p0 = param_at(ga, 0);
    int64_t n = 0;
    float *seed0 = test_to_host(p0.value, &n);
    EXPECT_OK(nnt_layer_init(ga, 7));
    EXPECT_OK(nnt_layer_init(gb, 7));
    expect_same_params(ga, gb);
    float *seed7 = test_to_host(p0.value, NULL);
    ck_assert(memcmp(seed0, seed7, (size_t)n * sizeof(float)) != 0);
    EXPECT_OK(nnt_layer_init(ga, 0));
    float *again = test_to_host(p0.value, NULL);
    ck_assert(memcmp(seed0, again, (size_t)n * sizeof(float)) == 0);
    /* the parameters of two matrices of the same shape differ (own streams) */
    nnt_param_info q = param_at(ga, 4), k = param_at(ga, 5);
    float *vq = test_to_host(q.value, &n), *vk = test_to_host(k.value, NULL);
    ck_assert(memcmp(vq, vk, (size_t)n * sizeof(float)) != 0);
    free(seed0);
    free(seed7);
    free(again);
    free(vq);
    free(vk);
    nnt_layer_destroy(ga);
    nnt_layer_destroy(gb);
}
END_TEST

/* A freshly created model trains: the loss of a batch goes down after a few SGD steps on
 * its gradient (written with the tensor ops: value -= lr * grad; lr 0.1: at 0.5 the loss
 * overshoots back up after 3 steps). */
START_TEST(test_create_forward_backward)
{
    nnt_gpt_config cfg;
    EXPECT_OK(nnt_gpt_preset("tiny", &cfg));
    cfg.vocab = 32;
    cfg.max_seq = 8;
    nnt_layer *gpt = NULL;
    EXPECT_OK(nnt_gpt_create(ctx, &cfg, 2, 8, NULL, &gpt));
    int32_t tok[16], tgt[16];
    for (int i = 0; i < 16; i++) {
        tok[i] = (int32_t)(i % 8);
        tgt[i] = (int32_t)((i + 1) % 8);
    }
    nnt_tensor *tokens = NULL, *targets = NULL;
    int64_t shape[2] = {2, 8};
    EXPECT_OK(nnt_tensor_create(ctx, NNT_INT32, 2, shape, NULL, &tokens));
    EXPECT_OK(nnt_tensor_create(ctx, NNT_INT32, 2, shape, NULL, &targets));
    EXPECT_OK(nnt_tensor_copy_from_host(tokens, tok, sizeof tok));
    EXPECT_OK(nnt_tensor_copy_from_host(targets, tgt, sizeof tgt));
    EXPECT_OK(nnt_layer_set_targets(gpt, targets));
    double first = 0.0, last = 0.0;
    int64_t count = 0;
    EXPECT_OK(nnt_layer_num_params(gpt, &count, NULL));
    for (int step = 0; step < 8; step++) {
        EXPECT_OK(nnt_layer_zero_grad(gpt));
        EXPECT_OK(nnt_layer_forward(gpt, tokens, NULL));
        EXPECT_OK(nnt_layer_loss(gpt, step ? &last : &first));
        EXPECT_OK(nnt_layer_backward(gpt, NULL, NULL));
        for (int64_t i = 0; i < count; i++) {
            nnt_param_info p = param_at(gpt, i);
            EXPECT_OK(nnt_tensor_axpby(-0.1, p.grad, 1.0, p.value));
        }
    }
    /* untrained: about ln(V) */
    EXPECT_TOL(fabs(first - log(32.0)), INIT_LOSS_TOL, "initial loss %g, ln V = %g", first,
               log(32.0));
    ck_assert_msg(last < first - 0.1, "loss %g -> %g did not go down", first, last);
    nnt_tensor_destroy(tokens);
    nnt_tensor_destroy(targets);
    nnt_layer_destroy(gpt);
}
END_TEST

/* ---- training with the public optimizer against the fixture --------------------------------- */

/* The fixture's protocol (train.json): 10 steps of torch.optim.AdamW, lr 1e-3, betas (0.9,
 * 0.999), eps 1e-8, weight decay 0 (_i == 0) or 0.1 on the matrices and embeddings only;
 * loss recorded before each update. Here through nnt_optim_add_layer (the layer's decay
 * flags) and nnt_optim_step, two tilings. */
/* 10 fixture steps on tiling ti with weight decay wd and GEMM operands of the given
 * precision. Returns the largest |loss - fixture's| over the steps, *at its step. */
static double train_fixture(int ti, double wd, nnt_precision precision, int clear, int *at)
{
    nnt_st_reader *tr = fixture_open_st("train.safetensors");
    int32_t *tok = fixture_read(tr, "train_tokens", NNT_IO_I32, NULL);
    int32_t *tgt = fixture_read(tr, "train_targets", NNT_IO_I32, NULL);
    float *want = fixture_read(tr, wd == 0.0 ? "losses_wd0" : "losses_wd01", NNT_IO_F32, NULL);
    nnt_layer *gpt = load_fixture(&TILINGS[ti].t, B, T);
    nnt_optim_options oo = NNT_OPTIM_OPTIONS_INIT;
    oo.lr = 1e-3;
    oo.weight_decay = wd;
    nnt_optim *opt = NULL;
    EXPECT_OK(nnt_optim_create(ctx, &oo, &opt));
    EXPECT_OK(nnt_optim_add_layer(opt, gpt));
    EXPECT_OK(nnt_ctx_set_precision(ctx, precision));
    double worst = 0.0;
    for (int s = 0; s < 10; s++) {
        nnt_tensor *x = ids_tensor(tok + s * B * T, B, T, 1, 5);
        nnt_tensor *y = ids_tensor(tgt + s * B * T, B, T, 2, 12);
        double loss = 0.0;
        EXPECT_OK(clear ? nnt_layer_clear_grad(gpt) : nnt_layer_zero_grad(gpt));
        EXPECT_OK(nnt_layer_set_targets(gpt, y));
        EXPECT_OK(nnt_layer_forward(gpt, x, NULL));
        EXPECT_OK(nnt_layer_loss(gpt, &loss));
        EXPECT_OK(nnt_layer_backward(gpt, NULL, NULL));
        EXPECT_OK(nnt_optim_step(opt));
        nnt_tensor_destroy(x);
        nnt_tensor_destroy(y);
        double d = fabs(loss - want[s]);
        if (d > worst || s == 0) {
            worst = d;
            *at = s;
        }
        ck_assert_msg(isfinite(loss), "precision %d, wd %g step %d: loss %g", (int)precision,
                      wd, s, loss);
    }
    EXPECT_OK(nnt_ctx_set_precision(ctx, NNT_PRECISION_FP32));
    nnt_optim_stats st;
    memset(&st, 0, sizeof st);
    st.size = sizeof st;
    EXPECT_OK(nnt_optim_stats_get(opt, &st));
    ck_assert_int_eq(st.step, 10);
    nnt_optim_destroy(opt);
    nnt_layer_destroy(gpt);
    nnt_st_close(tr);
    free(tok);
    free(tgt);
    free(want);
    return worst;
}

/* _i = (wd 0.1) + 2 * clear: gradients cleared before each step by nnt_layer_zero_grad or
 * nnt_layer_clear_grad (nnt-train's path: dropped, then written by the backward) */
START_TEST(test_train_adamw_fixture)
{
    const double wd = _i % 2 == 0 ? 0.0 : 0.1;
    const int clear = _i / 2;
    int at = 0;
    double worst = train_fixture(_i % 2, wd, NNT_PRECISION_FP32, clear, &at);
    printf("test_layer_gpt adamw [wd %g, %s]: max |loss - fixture| %.3g over 10 steps\n", wd,
           clear ? "clear_grad" : "zero_grad", worst);
    EXPECT_TOL(worst, ADAMW_TOL, "fp32, wd %g, clear %d, step %d: |loss - fixture|", wd, clear,
               at);
}
END_TEST

/* The same 10 steps with TF32 and bf16 GEMM operands: within TF32_TOL and BF16_TOL of the
 * fp32 losses of the fixture (1e-2 is the goal for bf16 training), and visibly away from
 * them (the operands really were rounded: fp32 is within ~2e-6). Two tilings each. */
START_TEST(test_train_precision)
{
    nnt_precision p = _i < 2 ? NNT_PRECISION_TF32 : NNT_PRECISION_BF16;
    int ti = _i & 1, at = 0;
    double worst = train_fixture(ti, 0.1, p, _i & 1, &at);   /* tiling 1: clear_grad */
    printf("test_layer_gpt adamw [%s, tiling %d]: max |loss - fp32 fixture| %.3g over 10 steps\n",
           p == NNT_PRECISION_TF32 ? "tf32" : "bf16", ti, worst);
    if (p == NNT_PRECISION_TF32)
        EXPECT_TOL(worst, TF32_TOL, "tf32, tiling %d, step %d: |loss - fp32 fixture|", ti, at);
    else
        EXPECT_TOL(worst, BF16_TOL, "bf16, tiling %d, step %d: |loss - fp32 fixture|", ti, at);
    ck_assert_msg(worst > 2e-5, "%s losses within %g of fp32: operands not rounded?",
                  p == NNT_PRECISION_TF32 ? "tf32" : "bf16", worst);
}
END_TEST

/* ---- presets and tiling ----------------------------------------------------------------------- */

START_TEST(test_presets)
{
    static const struct { const char *name; int64_t V, maxT, L, NH, C; } want[] = {
        {"gpt2", 50257, 1024, 12, 12, 768}, {"gpt2-medium", 50257, 1024, 24, 16, 1024},
        {"gpt2-large", 50257, 1024, 36, 20, 1280}, {"gpt2-xl", 50257, 1024, 48, 25, 1600},
        {"tiny", 256, 128, 2, 4, 64}};
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        nnt_gpt_config cfg;
        memset(&cfg, 0, sizeof cfg);
        EXPECT_OK(nnt_gpt_preset(want[i].name, &cfg));
        ck_assert(cfg.size == sizeof cfg && cfg.vocab == want[i].V &&
                  cfg.max_seq == want[i].maxT && cfg.layers == want[i].L &&
                  cfg.heads == want[i].NH && cfg.channels == want[i].C);
    }
    nnt_gpt_config init = NNT_GPT_CONFIG_INIT, gpt2;
    EXPECT_OK(nnt_gpt_preset("gpt2", &gpt2));
    ck_assert(memcmp(&init, &gpt2, sizeof init) == 0);
    EXPECT_FAIL_MSG(nnt_gpt_preset("gpt3", &gpt2), NNT_E_INVAL, "gpt2-medium");
    EXPECT_FAIL_MSG(nnt_gpt_preset(NULL, &gpt2), NNT_E_INVAL, "nnt_gpt_preset");
    EXPECT_FAIL_MSG(nnt_gpt_preset("tiny", NULL), NNT_E_INVAL, "nnt_gpt_preset");
}
END_TEST

START_TEST(test_tiling)
{
    nnt_gpt_config cfg;
    EXPECT_OK(nnt_gpt_preset("gpt2", &cfg));
    nnt_tiling out;
    /* automatic: every entry in 1..its dimension */
    EXPECT_OK(nnt_gpt_tiling(ctx, &cfg, 4, 64, NULL, &out));
    const int64_t dims[7] = {4, 64, 768, 3072, 50257, 12, 64};
    const int64_t *got = &out.batch;
    ck_assert(out.size == sizeof out);
    for (int d = 0; d < 7; d++)
        ck_assert_msg(got[d] >= 1 && got[d] <= dims[d], "entry %d = %lld", d,
                      (long long)got[d]);
    /* whole channels, heads, head_dim (the heuristic keeps them whole), vocab split */
    ck_assert(out.channels == 768 && out.heads == 12 && out.head_dim == 64);
    ck_assert(out.vocab < 50257);
    /* overrides: -1 whole, > 0 that size clamped, 0 automatic */
    nnt_tiling o = tiling_of(-1, 16, 5000, 100, 0, 5, -1), auto_ = out;
    EXPECT_OK(nnt_gpt_tiling(ctx, &cfg, 4, 64, &o, &out));
    ck_assert(out.batch == 4 && out.seq == 16 && out.channels == 768 && out.hidden == 100 &&
              out.vocab == auto_.vocab && out.heads == 5 && out.head_dim == 64);
    /* the fixture is far below the task size: one tile everywhere */
    EXPECT_OK(nnt_gpt_tiling(ctx, &FIXTURE_CFG, B, T, NULL, &out));
    const int64_t fdims[7] = {B, T, C, 4 * C, V, NH, HD};
    for (int d = 0; d < 7; d++)
        ck_assert_int_eq(got[d], fdims[d]);
    /* errors */
    o = tiling_of(0, -2, 0, 0, 0, 0, 0);
    EXPECT_FAIL_MSG(nnt_gpt_tiling(ctx, &cfg, 4, 64, &o, &out), NNT_E_INVAL, "seq");
    o.size = 0;
    EXPECT_FAIL_MSG(nnt_gpt_tiling(ctx, &cfg, 4, 64, &o, &out), NNT_E_INVAL, "nnt_gpt_tiling");
    EXPECT_FAIL_MSG(nnt_gpt_tiling(ctx, &cfg, 4, 2000, NULL, &out), NNT_E_INVAL,
                    "nnt_gpt_tiling");
    EXPECT_FAIL_MSG(nnt_gpt_tiling(ctx, NULL, 4, 64, NULL, &out), NNT_E_INVAL,
                    "nnt_gpt_tiling");
    EXPECT_FAIL_MSG(nnt_gpt_tiling(ctx, &cfg, 4, 64, NULL, NULL), NNT_E_INVAL,
                    "nnt_gpt_tiling");
    EXPECT_FAIL_MSG(nnt_gpt_tiling(NULL, &cfg, 4, 64, NULL, &out), NNT_E_INVAL,
                    "nnt_gpt_tiling");
}
END_TEST

/* ---- errors -------------------------------------------------------------------------------------- */

static void write_file(const char *path, const void *data, size_t len)
{
    FILE *f = fopen(path, "wb");
    ck_assert_ptr_nonnull(f);
    ck_assert_int_eq(fwrite(data, 1, len, f), len);
    ck_assert_int_eq(fclose(f), 0);
}

START_TEST(test_errors)
{
    nnt_layer *gpt = load_fixture(NULL, B, T), *other = NULL;
    int32_t ids[B * (T + 1)];
    memset(ids, 0, sizeof ids);
    /* backward without a forward */
    EXPECT_FAIL_MSG(nnt_layer_backward(gpt, NULL, NULL), NNT_E_STATE, "nnt_layer_backward");
    double loss = 0.0;
    EXPECT_FAIL_MSG(nnt_layer_loss(gpt, &loss), NNT_E_STATE, "nnt_layer_loss");
    /* wrong token shape and dtype */
    nnt_tensor *wrong = ids_tensor(ids, B, T + 1, B, T + 1);
    EXPECT_FAIL_MSG(nnt_layer_forward(gpt, wrong, NULL), NNT_E_SHAPE, "(2, 13)");
    EXPECT_FAIL_MSG(nnt_layer_set_targets(gpt, wrong), NNT_E_SHAPE, "(B, T) = (2, 12)");
    nnt_tensor_destroy(wrong);
    int64_t shape[2] = {B, T};
    nnt_tensor *f32 = NULL;
    EXPECT_OK(nnt_tensor_create(ctx, NNT_FP32, 2, shape, NULL, &f32));
    EXPECT_OK(nnt_tensor_fill(f32, 1.0));
    EXPECT_FAIL_MSG(nnt_layer_forward(gpt, f32, NULL), NNT_E_SHAPE, "NNT_INT32");
    nnt_tensor_destroy(f32);
    /* a target outside the vocabulary */
    ids[3] = V;
    nnt_tensor *targets = ids_tensor(ids, B, T, B, T), *tokens = ids_tensor(ids + 1, B, T, B, T);
    ids[4] = 0;
    EXPECT_OK(nnt_layer_set_targets(gpt, targets));
    EXPECT_FAIL_MSG(nnt_layer_forward(gpt, targets, NULL), NNT_E_INVAL, "nnt_layer_forward");
    nnt_tensor_destroy(targets);
    nnt_tensor_destroy(tokens);
    /* creation */
    nnt_gpt_config cfg = FIXTURE_CFG;
    EXPECT_FAIL_MSG(nnt_gpt_create(ctx, NULL, B, T, NULL, &other), NNT_E_INVAL,
                    "nnt_gpt_create");
    EXPECT_FAIL_MSG(nnt_gpt_create(ctx, &cfg, B, T, NULL, NULL), NNT_E_INVAL,
                    "nnt_gpt_create");
    EXPECT_FAIL_MSG(nnt_gpt_create(NULL, &cfg, B, T, NULL, &other), NNT_E_INVAL,
                    "nnt_gpt_create");
    EXPECT_FAIL_MSG(nnt_gpt_create(ctx, &cfg, B, MAXT + 1, NULL, &other), NNT_E_INVAL,
                    "max_seq");
    ck_assert_ptr_null(other);
    cfg.channels = 25;
    EXPECT_FAIL_MSG(nnt_gpt_create(ctx, &cfg, B, T, NULL, &other), NNT_E_INVAL,
                    "multiple of heads");
    cfg = FIXTURE_CFG;
    cfg.size = 8;
    EXPECT_FAIL_MSG(nnt_gpt_create(ctx, &cfg, B, T, NULL, &other), NNT_E_INVAL, "cfg->size");
    nnt_tiling bad = tiling_of(0, 0, 0, -7, 0, 0, 0);
    EXPECT_FAIL_MSG(nnt_gpt_create(ctx, &FIXTURE_CFG, B, T, &bad, &other), NNT_E_INVAL,
                    "nnt_gpt_create");
    /* other functions */
    nnt_gpt_config got;
    EXPECT_FAIL_MSG(nnt_gpt_config_of(NULL, &got), NNT_E_INVAL, "nnt_gpt_config_of");
    EXPECT_FAIL_MSG(nnt_gpt_config_of(gpt, NULL), NNT_E_INVAL, "nnt_gpt_config_of");
    EXPECT_FAIL_MSG(nnt_gpt_save_llmc(gpt, NULL), NNT_E_INVAL, "nnt_gpt_save_llmc");
    EXPECT_FAIL_MSG(nnt_gpt_save_llmc(NULL, "/tmp/x"), NNT_E_INVAL, "nnt_gpt_save_llmc");
    EXPECT_FAIL_MSG(nnt_gpt_save_safetensors(gpt, NULL), NNT_E_INVAL,
                    "nnt_gpt_save_safetensors");
    EXPECT_FAIL_MSG(nnt_gpt_save_llmc(gpt, "/nonexistent-dir/x.bin"), NNT_E_IO,
                    "nnt_gpt_save_llmc");
    /* loading */
    EXPECT_FAIL_MSG(nnt_gpt_load_llmc(ctx, NULL, B, T, NULL, &other), NNT_E_INVAL,
                    "nnt_gpt_load_llmc");
    EXPECT_FAIL_MSG(nnt_gpt_load_llmc(ctx, fixture_path("gpt2_tiny.llmc.bin"), B, T, NULL,
                                      NULL), NNT_E_INVAL, "nnt_gpt_load_llmc");
    EXPECT_FAIL_MSG(nnt_gpt_load_llmc(ctx, fixture_path("gpt2_tiny.llmc.bin"), B, MAXT + 1,
                                      NULL, &other), NNT_E_INVAL, "nnt_gpt_load_llmc");
    EXPECT_FAIL_MSG(nnt_gpt_load_llmc(ctx, fixture_path("no-such-file.bin"), B, T, NULL,
                                      &other), NNT_E_IO, "nnt_gpt_load_llmc");
    EXPECT_FAIL_MSG(nnt_gpt_load_safetensors(ctx, fixture_path("model.safetensors"), NULL, B,
                                             T, NULL, &other), NNT_E_INVAL,
                    "nnt_gpt_load_safetensors");
    cfg = FIXTURE_CFG;
    cfg.channels = 30;
    cfg.heads = 3;
    EXPECT_FAIL_MSG(nnt_gpt_load_safetensors(ctx, fixture_path("model.safetensors"), &cfg, B,
                                             T, NULL, &other), NNT_E_FORMAT,
                    "nnt_gpt_load_safetensors");
    ck_assert_ptr_null(other);
    /* corrupt llm.c files: a bad magic, and a truncated checkpoint */
    size_t len = 0;
    unsigned char *file = slurp(fixture_path("gpt2_tiny.llmc.bin"), &len);
    char path[256];
    temp_path(path, sizeof path, ".corrupt.bin");
    write_file(path, file, len / 2);
    EXPECT_FAIL_MSG(nnt_gpt_load_llmc(ctx, path, B, T, NULL, &other), NNT_E_FORMAT,
                    "nnt_gpt_load_llmc");
    file[0] ^= 0x5a;
    write_file(path, file, len);
    EXPECT_FAIL_MSG(nnt_gpt_load_llmc(ctx, path, B, T, NULL, &other), NNT_E_FORMAT,
                    "nnt_gpt_load_llmc");
    ck_assert_ptr_null(other);
    ck_assert_int_eq(unlink(path), 0);
    free(file);
    nnt_layer_destroy(gpt);
    nnt_layer_destroy(NULL);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("layer_gpt");
    TCase *tc = tcase_create("gpt");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 120);
    tcase_add_loop_test(tc, test_reference_step, 0, 2 * NTILINGS);
    tcase_add_test(tc, test_accumulate_and_targets);
    tcase_add_loop_test(tc, test_recompute, 0, 3);
    tcase_add_test(tc, test_recompute_memory);
    tcase_add_loop_test(tc, test_clear_grad, 0, 3);
    tcase_add_test(tc, test_params);
    tcase_add_test(tc, test_round_trips);
    tcase_add_test(tc, test_generate);
    tcase_add_test(tc, test_init);
    tcase_add_test(tc, test_create_forward_backward);
    tcase_add_loop_test(tc, test_train_precision, 0, 4);
    tcase_add_loop_test(tc, test_train_adamw_fixture, 0, 4);
    tcase_add_test(tc, test_presets);
    tcase_add_test(tc, test_tiling);
    tcase_add_test(tc, test_errors);
    suite_add_tcase(s, tc);
    return run_suite(s);
}
