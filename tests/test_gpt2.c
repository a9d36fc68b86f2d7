/* GPT-2 end to end against the Hugging Face fixtures of tests/fixtures/gpt2_tiny (see the
 * README there): forward (activations, logits, loss), backward (every parameter gradient),
 * 10 AdamW steps (losses, final parameters) with and without weight decay, agreement across
 * tilings, llm.c checkpoint round trip, bad arguments.
 * The model is loaded from gpt2_tiny.llmc.bin; the references are read with lib/io's
 * safetensors reader. */
#include "testutil.h"
#include "fixture_st.h"

#include "models/gpt2.h"

#include <math.h>
#include <stdint.h>
#include <unistd.h>

/* The fixture's configuration. */
enum { V = 67, MAXT = 16, L = 2, NH = 3, C = 24, B = 2, T = 12, NSTEPS = 10 };

static float *read_f32(const nnt_st_reader *r, const char *name, int64_t *numel)
{
    const nnt_st_entry *e = NULL;
    float *x = fixture_read(r, name, NNT_IO_F32, &e);
    if (numel)
        *numel = (int64_t)e->numel;
    return x;
}

/* ---- llm.c names <-> HF names ------------------------------------------------------ */

static const char *const LLMC_NAMES[16] = {
    "wte", "wpe", "ln1w", "ln1b", "qkvw", "qkvb", "attprojw", "attprojb",
    "ln2w", "ln2b", "fcw", "fcb", "fcprojw", "fcprojb", "lnfw", "lnfb"};

/* HF suffix after "transformer.h.{l}." of each per-layer llm.c parameter, and whether it is
 * a Conv1D weight stored (in, out) that llm.c stores transposed (out, in). */
static const char *hf_layer_suffix(const char *llmc, int *conv1d)
{
    static const struct { const char *llmc, *hf; int conv1d; } map[] = {
        {"ln1w", "ln_1.weight", 0}, {"ln1b", "ln_1.bias", 0},
        {"qkvw", "attn.c_attn.weight", 1}, {"qkvb", "attn.c_attn.bias", 0},
        {"attprojw", "attn.c_proj.weight", 1}, {"attprojb", "attn.c_proj.bias", 0},
        {"ln2w", "ln_2.weight", 0}, {"ln2b", "ln_2.bias", 0},
        {"fcw", "mlp.c_fc.weight", 1}, {"fcb", "mlp.c_fc.bias", 0},
        {"fcprojw", "mlp.c_proj.weight", 1}, {"fcprojb", "mlp.c_proj.bias", 0}};
    for (size_t i = 0; i < sizeof map / sizeof map[0]; i++)
        if (strcmp(map[i].llmc, llmc) == 0) {
            *conv1d = map[i].conv1d;
            return map[i].hf;
        }
    return NULL;
}

/* Tensor prefix + HF name of llm.c parameter llmc (all layers) in llm.c layout into dst
 * (numel floats). */
static void hf_to_llmc(const nnt_st_reader *r, const char *prefix, const char *llmc,
                       float *dst, int64_t numel)
{
    char name[256];
    int conv1d = 0;
    const char *suffix = hf_layer_suffix(llmc, &conv1d);
    if (!suffix) {
        const char *hf = !strcmp(llmc, "wte")    ? "transformer.wte.weight"
                         : !strcmp(llmc, "wpe")  ? "transformer.wpe.weight"
                         : !strcmp(llmc, "lnfw") ? "transformer.ln_f.weight"
                                                 : "transformer.ln_f.bias";
        snprintf(name, sizeof name, "%s%s", prefix, hf);
        int64_t n = 0;
        float *src = read_f32(r, name, &n);
        ck_assert_int_eq(n, numel);
        memcpy(dst, src, (size_t)n * sizeof(float));
        free(src);
        return;
    }
    int64_t per_layer = numel / L;
    for (int l = 0; l < L; l++) {
        snprintf(name, sizeof name, "%stransformer.h.%d.%s", prefix, l, suffix);
        const nnt_st_entry *e = nnt_st_find(r, name);
        ck_assert_msg(e != NULL, "fixture has no tensor %s", name);
        float *src = read_f32(r, name, NULL);
        ck_assert_int_eq((int64_t)e->numel, per_layer);
        float *out = dst + l * per_layer;
        if (conv1d) { /* (in, out) -> (out, in) */
            int64_t in = e->shape[0], on = e->shape[1];
            for (int64_t i = 0; i < in; i++)
                for (int64_t o = 0; o < on; o++)
                    out[o * in + i] = src[i * on + o];
        } else {
            memcpy(out, src, (size_t)per_layer * sizeof(float));
        }
        free(src);
    }
}

/* ---- comparisons -------------------------------------------------------------------- */

/* ||got - want|| / ||want|| over n floats, skipping positions where skip[i] != 0 (skip may
 * be NULL). */
static double rel_err(const float *got, const float *want, int64_t n, const char *skip)
{
    double num = 0.0, den = 0.0;
    for (int64_t i = 0; i < n; i++) {
        if (skip && skip[i])
            continue;
        double d = (double)got[i] - (double)want[i];
        num += d * d;
        den += (double)want[i] * want[i];
    }
    return den > 0.0 ? sqrt(num / den) : sqrt(num);
}

static double max_abs_diff(const float *got, const float *want, int64_t n, const char *skip)
{
    double m = 0.0;
    for (int64_t i = 0; i < n; i++)
        if (!(skip && skip[i]) && fabs((double)got[i] - (double)want[i]) > m)
            m = fabs((double)got[i] - (double)want[i]);
    return m;
}

/* Mask of qkvb (L, 3C): the key bias slices [C, 2C) of every layer. */
static char *key_bias_mask(void)
{
    char *mask = calloc(L * 3 * C, 1);
    ck_assert_ptr_nonnull(mask);
    for (int l = 0; l < L; l++)
        memset(mask + l * 3 * C + C, 1, C);
    return mask;
}

/* ---- model setup ------------------------------------------------------------------- */

typedef struct tiling_case {
    const char *what;
    nnt_gpt2_tiling t;
} tiling_case;

/* batch, seq, channels, hidden, vocab, heads, head_dim; 0 = whole dimension */
static const tiling_case TILINGS[] = {
    {"single tiles", {0, 0, 0, 0, 0, 0, 0}},
    {"all partial, C tile 5 cuts heads, hd split 3", {1, 5, 5, 40, 10, 2, 3}},
    {"C tile 12 cuts head 1, aligned T tiles", {2, 4, 12, 32, 33, 1, 8}},
    {"odd tiles everywhere", {1, 7, 9, 25, 67, 3, 5}},
};
#define NTILINGS ((int)(sizeof TILINGS / sizeof TILINGS[0]))

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

static nnt_gpt2 *load_model(const nnt_gpt2_tiling *t)
{
    nnt_gpt2 *m = NULL;
    EXPECT_OK(nnt_gpt2_load_llmc(ctx, fixture_path("gpt2_tiny.llmc.bin"), t, B, T, &m));
    ck_assert_ptr_nonnull(m);
    return m;
}

/* (B, T) int32 tensor with tiling (tb, tt) from host ids. */
static nnt_tensor *ids_tensor(const int32_t *ids, int64_t tb, int64_t tt)
{
    int64_t shape[2] = {B, T}, tile[2] = {tb, tt};
    nnt_tensor *x = NULL;
    EXPECT_OK(nnt_tensor_create(ctx, NNT_INT32, 2, shape, tile, &x));
    EXPECT_OK(nnt_tensor_copy_from_host(x, ids, B * T * sizeof(int32_t)));
    return x;
}

/* forward on the reference batch; *loss gets the loss */
static void reference_forward(nnt_gpt2 *m, const nnt_st_reader *ref, double *loss)
{
    int32_t *tok = fixture_read(ref, "tokens", NNT_IO_I32, NULL);
    int32_t *tgt = fixture_read(ref, "targets", NNT_IO_I32, NULL);
    nnt_tensor *tokens = ids_tensor(tok, 1, 5), *targets = ids_tensor(tgt, 2, 12);
    EXPECT_OK(nnt_gpt2_forward(m, tokens, targets, loss));
    nnt_tensor_destroy(tokens);
    nnt_tensor_destroy(targets);
    free(tok);
    free(tgt);
}

/* ---- activations -------------------------------------------------------------------- */

/* (B, NH, T, hd) -> the fixture's (B, T, 3C) layout at part offset (q 0, k C, v 2C). */
static void scatter_heads(const float *bnth, float *btc3, int part)
{
    const int hd = C / NH;
    for (int b = 0; b < B; b++)
        for (int h = 0; h < NH; h++)
            for (int t = 0; t < T; t++)
                for (int d = 0; d < hd; d++)
                    btc3[(b * T + t) * 3 * C + part * C + h * hd + d] =
                        bnth[((b * NH + h) * T + t) * hd + d];
}

static double compare_activation(nnt_gpt2 *m, const nnt_st_reader *ref, const char *mine,
                                 const char *theirs)
{
    nnt_tensor *t = nnt_gpt2_activation(m, mine);
    ck_assert_msg(t != NULL, "no activation %s", mine);
    int64_t n = 0, nref = 0;
    float *got = test_to_host(t, &n);
    float *want = read_f32(ref, theirs, &nref);
    ck_assert_int_eq(n, nref);
    double e = rel_err(got, want, n, NULL);
    free(got);
    free(want);
    return e;
}

static double compare_qkv(nnt_gpt2 *m, const nnt_st_reader *ref, int l)
{
    char name[64];
    float *got = malloc(B * T * 3 * C * sizeof(float));
    ck_assert_ptr_nonnull(got);
    for (int part = 0; part < 3; part++) {
        snprintf(name, sizeof name, "h%d.%c", l, "qkv"[part]);
        float *bnth = test_to_host(nnt_gpt2_activation(m, name), NULL);
        scatter_heads(bnth, got, part);
        free(bnth);
    }
    snprintf(name, sizeof name, "act.h%d.qkv", l);
    float *want = read_f32(ref, name, NULL);
    double e = rel_err(got, want, B * T * 3 * C, NULL);
    free(got);
    free(want);
    return e;
}

/* Every activation the fixture has (except the attention probabilities, which a flash
 * attention never forms) within 1e-4 relative. */
static void check_activations(nnt_gpt2 *m, const nnt_st_reader *ref)
{
    static const char *const per_layer[][2] = {
        {"ln1", "ln1"}, {"ln1_mean", "ln1_mean"}, {"ln1_rstd", "ln1_rstd"},
        {"atty", "atty"}, {"residual2", "residual2"}, {"ln2", "ln2"},
        {"ln2_mean", "ln2_mean"}, {"ln2_rstd", "ln2_rstd"}, {"fch", "fch"},
        {"fch_gelu", "fch_gelu"}, {"residual3", "residual3"}};
    static const char *const global[][2] = {
        {"encoded", "act.encoded"}, {"lnf", "act.lnf"}, {"lnf_mean", "act.lnf_mean"},
        {"lnf_rstd", "act.lnf_rstd"}, {"logits", "logits"}};
    char mine[64], theirs[64];
    for (int l = 0; l < L; l++) {
        for (size_t i = 0; i < sizeof per_layer / sizeof per_layer[0]; i++) {
            snprintf(mine, sizeof mine, "h%d.%s", l, per_layer[i][0]);
            snprintf(theirs, sizeof theirs, "act.h%d.%s", l, per_layer[i][1]);
            double e = compare_activation(m, ref, mine, theirs);
            ck_assert_msg(e <= 1e-4, "activation %s: relative error %g", theirs, e);
        }
        double e = compare_qkv(m, ref, l);
        ck_assert_msg(e <= 1e-4, "activation act.h%d.qkv: relative error %g", l, e);
    }
    for (size_t i = 0; i < sizeof global / sizeof global[0]; i++) {
        double e = compare_activation(m, ref, global[i][0], global[i][1]);
        ck_assert_msg(e <= 1e-4, "activation %s: relative error %g", global[i][1], e);
    }
}

/* ---- gradients ---------------------------------------------------------------------- */

static float *export_all(nnt_gpt2 *m, int which, const char *name, int64_t *numel)
{
    int64_t n = 0;
    EXPECT_OK(nnt_gpt2_param_numel(m, name, &n));
    float *buf = malloc((size_t)n * sizeof(float));
    ck_assert_ptr_nonnull(buf);
    EXPECT_OK(nnt_gpt2_export(m, which, name, buf, (size_t)n));
    *numel = n;
    return buf;
}

/* Every gradient within 1e-3 normwise relative; the key bias (mathematically 0, rounding
 * noise in the fixture) within 1e-6 absolute. */
static void check_gradients(nnt_gpt2 *m, const nnt_st_reader *ref, const char *what)
{
    char *kmask = key_bias_mask();
    double worst = 0.0, kb = 0.0;
    int worst_k = 0;
    for (int k = 0; k < 16; k++) {
        int64_t n = 0;
        float *got = export_all(m, NNT_GPT2_GRADS, LLMC_NAMES[k], &n);
        float *want = malloc((size_t)n * sizeof(float));
        ck_assert_ptr_nonnull(want);
        hf_to_llmc(ref, "grad.", LLMC_NAMES[k], want, n);
        int is_qkvb = strcmp(LLMC_NAMES[k], "qkvb") == 0;
        double e = rel_err(got, want, n, is_qkvb ? kmask : NULL);
        ck_assert_msg(e <= 1e-3, "%s: gradient of %s: relative error %g", what, LLMC_NAMES[k], e);
        if (e > worst) {
            worst = e;
            worst_k = k;
        }
        if (is_qkvb) {
            for (int64_t i = 0; i < n; i++)
                if (kmask[i] && fabs(got[i]) > kb)
                    kb = fabs(got[i]);
            ck_assert_msg(kb <= 1e-6, "%s: key bias gradient %g is not ~0", what, kb);
        }
        free(got);
        free(want);
    }
    printf("test_gpt2 gradients [%s]: worst relative error %.2e (%s), |key bias grad| <= %.2e\n",
           what, worst, LLMC_NAMES[worst_k], kb);
    free(kmask);
}

/* Forward and backward on the reference batch with tiling _i, against the fixture. */
START_TEST(test_reference_step)
{
    const tiling_case *tc = &TILINGS[_i];
    nnt_st_reader *ref = fixture_open_st("reference.safetensors");
    nnt_gpt2 *m = load_model(&tc->t);
    double loss = 0.0;
    reference_forward(m, ref, &loss);
    float *want_loss = read_f32(ref, "loss", NULL);
    double le = fabs(loss - want_loss[0]) / fabs(want_loss[0]);
    ck_assert_msg(le <= 1e-4, "%s: loss %.9g, fixture %.9g", tc->what, loss, want_loss[0]);
    check_activations(m, ref);
    EXPECT_OK(nnt_gpt2_backward(m));
    /* backward turned the logits into d loss / d logits */
    double de = compare_activation(m, ref, "logits", "act_grad.logits");
    ck_assert_msg(de <= 1e-4, "%s: dlogits relative error %g", tc->what, de);
    check_gradients(m, ref, tc->what);
    printf("test_gpt2 reference [%s]: loss %.9f (fixture %.9f, rel %.2e), dlogits rel %.2e\n",
           tc->what, loss, want_loss[0], le, de);
    free(want_loss);
    nnt_gpt2_destroy(m);
    nnt_st_close(ref);
}
END_TEST

/* nnt_gpt2_auto_tiling of the fixture's configuration for 1, 2 and 16 workers (_i): the
 * loss and dlogits match the fixture like the hand-written tilings. (At C = 24 every GEMM
 * is far below the 100 MFLOP task size, so the heuristic picks one tile everywhere.) */
static const int AUTO_WORKERS[] = {1, 2, 16};

START_TEST(test_auto_tiling_fixture)
{
    nnt_gpt2_config cfg = {V, 0, MAXT, L, NH, C};
    nnt_gpt2_tiling t;
    EXPECT_OK(nnt_gpt2_auto_tiling(&cfg, B, T, AUTO_WORKERS[_i], &t));
    nnt_st_reader *ref = fixture_open_st("reference.safetensors");
    nnt_gpt2 *m = load_model(&t);
    double loss = 0.0;
    reference_forward(m, ref, &loss);
    float *want_loss = read_f32(ref, "loss", NULL);
    double le = fabs(loss - want_loss[0]) / fabs(want_loss[0]);
    ck_assert_msg(le <= 1e-4, "auto %d workers: loss %.9g, fixture %.9g", AUTO_WORKERS[_i],
                  loss, want_loss[0]);
    EXPECT_OK(nnt_gpt2_backward(m));
    double de = compare_activation(m, ref, "logits", "act_grad.logits");
    ck_assert_msg(de <= 1e-4, "auto %d workers: dlogits relative error %g", AUTO_WORKERS[_i],
                  de);
    printf("test_gpt2 auto tiling [%d workers: %lld %lld %lld %lld %lld %lld %lld]: loss %.9f "
           "(fixture %.9f, rel %.2e), dlogits rel %.2e\n", AUTO_WORKERS[_i],
           (long long)t.batch, (long long)t.seq, (long long)t.channels, (long long)t.hidden,
           (long long)t.vocab, (long long)t.heads, (long long)t.head_dim, loss, want_loss[0],
           le, de);
    free(want_loss);
    nnt_gpt2_destroy(m);
    nnt_st_close(ref);
}
END_TEST

/* entry in 0..size (0 = whole) */
static void expect_tile_in(int64_t tile, int64_t size, const char *what)
{
    ck_assert_msg(tile >= 0 && tile <= size, "%s tile %lld outside 0..%lld", what,
                  (long long)tile, (long long)size);
}

/* The heuristic on bigger configurations (no model built): valid tile sizes everywhere,
 * the documented choice for GPT-2 124M, and the bad arguments. */
START_TEST(test_auto_tiling_rules)
{
    const nnt_gpt2_config cfgs[] = {
        {50257, 50304, 1024, 12, 12, 768}, {50257, 0, 1024, 6, 8, 512},
        {50257, 0, 1024, 24, 16, 1024}, {V, 0, MAXT, L, NH, C}, {1, 0, 1, 0, 1, 1}};
    const int64_t bts[][2] = {{1, 1}, {4, 64}, {3, 7}, {16, 1024}, {1, 1024}};
    const int workers[] = {1, 2, 3, 16, 64};
    for (size_t c = 0; c < sizeof cfgs / sizeof cfgs[0]; c++)
        for (size_t b = 0; b < sizeof bts / sizeof bts[0]; b++)
            for (size_t w = 0; w < sizeof workers / sizeof workers[0]; w++) {
                const nnt_gpt2_config *g = &cfgs[c];
                int64_t bb = bts[b][0], tt = bts[b][1];
                if (tt > g->max_seq)
                    continue;
                nnt_gpt2_tiling t;
                EXPECT_OK(nnt_gpt2_auto_tiling(g, bb, tt, workers[w], &t));
                expect_tile_in(t.batch, bb, "batch");
                expect_tile_in(t.seq, tt, "seq");
                expect_tile_in(t.channels, g->channels, "channels");
                expect_tile_in(t.hidden, 4 * g->channels, "hidden");
                expect_tile_in(t.vocab, g->vocab, "vocab");
                expect_tile_in(t.heads, g->heads, "heads");
                expect_tile_in(t.head_dim, g->channels / g->heads, "head_dim");
                ck_assert(t.channels == 0 && t.heads == 0 && t.head_dim == 0);
            }
    /* 124M, B=4, T=64, 2 workers: batch 2, hidden 1536, vocab 7 tiles of 7232 */
    nnt_gpt2_tiling t;
    EXPECT_OK(nnt_gpt2_auto_tiling(&cfgs[0], 4, 64, 2, &t));
    ck_assert_int_eq(t.batch, 2);
    ck_assert_int_eq(t.seq, 0);
    ck_assert_int_eq(t.hidden, 1536);
    ck_assert_int_eq(t.vocab, 7232);
    /* one worker: one row tile; the lm head still in <= 8192-column tiles */
    EXPECT_OK(nnt_gpt2_auto_tiling(&cfgs[0], 4, 64, 1, &t));
    ck_assert_int_eq(t.batch, 0);
    ck_assert_int_eq(t.seq, 0);
    ck_assert(t.vocab > 0 && t.vocab <= 8192);
    /* bad arguments leave *out untouched */
    nnt_gpt2_config bad = cfgs[0];
    nnt_gpt2_tiling keep = {7, 7, 7, 7, 7, 7, 7};
    t = keep;
    EXPECT_FAIL_MSG(nnt_gpt2_auto_tiling(NULL, 4, 64, 2, &t), NNT_E_INVAL,
                    "nnt_gpt2_auto_tiling");
    EXPECT_FAIL_MSG(nnt_gpt2_auto_tiling(&bad, 4, 64, 2, NULL), NNT_E_INVAL,
                    "nnt_gpt2_auto_tiling");
    EXPECT_FAIL_MSG(nnt_gpt2_auto_tiling(&bad, 4, 64, 0, &t), NNT_E_INVAL,
                    "nnt_gpt2_auto_tiling");
    EXPECT_FAIL_MSG(nnt_gpt2_auto_tiling(&bad, 0, 64, 2, &t), NNT_E_INVAL,
                    "nnt_gpt2_auto_tiling");
    EXPECT_FAIL_MSG(nnt_gpt2_auto_tiling(&bad, 4, 1025, 2, &t), NNT_E_INVAL,
                    "nnt_gpt2_auto_tiling");
    bad.heads = 5;   /* C = 768 not a multiple of 5 */
    EXPECT_FAIL_MSG(nnt_gpt2_auto_tiling(&bad, 4, 64, 2, &t), NNT_E_INVAL,
                    "nnt_gpt2_auto_tiling");
    ck_assert(memcmp(&t, &keep, sizeof t) == 0);
}
END_TEST

/* The GPU rule: valid tilings everywhere; one row tile per GPU (none under 64 rows), every
 * other dimension whole but the vocabulary (<= 8192 columns, multiples of 64); the documented
 * example; the bad arguments. */
START_TEST(test_auto_tiling_gpu)
{
    const nnt_gpt2_config cfgs[] = {
        {50257, 50304, 1024, 12, 12, 768}, {50257, 0, 1024, 48, 25, 1600}, {V, 0, MAXT, L, NH, C},
        {1, 0, 1, 0, 1, 1}};
    const int64_t bts[][2] = {{1, 1}, {4, 64}, {3, 7}, {8, 1024}, {1, 1024}};
    const int gpus[] = {1, 2, 8};
    for (size_t c = 0; c < sizeof cfgs / sizeof cfgs[0]; c++)
        for (size_t b = 0; b < sizeof bts / sizeof bts[0]; b++)
            for (size_t w = 0; w < sizeof gpus / sizeof gpus[0]; w++) {
                const nnt_gpt2_config *g = &cfgs[c];
                int64_t bb = bts[b][0], tt = bts[b][1];
                if (tt > g->max_seq)
                    continue;
                nnt_gpt2_tiling t;
                EXPECT_OK(nnt_gpt2_auto_tiling_gpu(g, bb, tt, gpus[w], &t));
                expect_tile_in(t.batch, bb, "batch");
                expect_tile_in(t.seq, tt, "seq");
                expect_tile_in(t.vocab, g->vocab, "vocab");
                ck_assert(t.channels == 0 && t.hidden == 0 && t.heads == 0 && t.head_dim == 0);
                int64_t rb = t.batch ? t.batch : bb, rt = t.seq ? t.seq : tt;
                int64_t row_tiles = ((bb + rb - 1) / rb) * ((tt + rt - 1) / rt);
                ck_assert_int_le(row_tiles, gpus[w]);
                if (row_tiles > 1)
                    ck_assert_int_ge(rb * rt, 64);
                ck_assert(t.vocab == 0 || (t.vocab <= 8192 && t.vocab % 64 == 0));
            }
    /* GPT-2 at B = 8, T = 1024 on one GPU: one row tile, vocab 7 tiles of 7232 */
    nnt_gpt2_tiling t;
    EXPECT_OK(nnt_gpt2_auto_tiling_gpu(&cfgs[0], 8, 1024, 1, &t));
    ck_assert(t.batch == 0 && t.seq == 0 && t.hidden == 0);
    ck_assert_int_eq(t.vocab, 7232);
    /* two GPUs: the batch in two */
    EXPECT_OK(nnt_gpt2_auto_tiling_gpu(&cfgs[0], 8, 1024, 2, &t));
    ck_assert_int_eq(t.batch, 4);
    ck_assert_int_eq(t.seq, 0);
    nnt_gpt2_tiling keep = {7, 7, 7, 7, 7, 7, 7};
    t = keep;
    EXPECT_FAIL_MSG(nnt_gpt2_auto_tiling_gpu(&cfgs[0], 8, 1024, 0, &t), NNT_E_INVAL,
                    "nnt_gpt2_auto_tiling_gpu");
    EXPECT_FAIL_MSG(nnt_gpt2_auto_tiling_gpu(NULL, 8, 1024, 1, &t), NNT_E_INVAL,
                    "nnt_gpt2_auto_tiling_gpu");
    EXPECT_FAIL_MSG(nnt_gpt2_auto_tiling_gpu(&cfgs[0], 8, 1025, 1, &t), NNT_E_INVAL,
                    "nnt_gpt2_auto_tiling_gpu");
    ck_assert(memcmp(&t, &keep, sizeof t) == 0);
}
END_TEST

/* Gradients accumulate: two forward/backward pairs without zero_grad give twice the
 * gradients; zero_grad resets them. */
START_TEST(test_grad_accumulation)
{
    nnt_st_reader *ref = fixture_open_st("reference.safetensors");
    nnt_gpt2 *m = load_model(&TILINGS[1].t);
    double loss = 0.0, s1 = 0.0, s2 = 0.0, s0 = -1.0;
    reference_forward(m, ref, &loss);
    EXPECT_OK(nnt_gpt2_backward(m));
    EXPECT_OK(nnt_gpt2_grad_sumsq(m, &s1));
    reference_forward(m, ref, &loss);
    EXPECT_OK(nnt_gpt2_backward(m));
    EXPECT_OK(nnt_gpt2_grad_sumsq(m, &s2));
    ck_assert_msg(fabs(s2 - 4.0 * s1) <= 1e-5 * s2, "sumsq %g after two backwards, %g after "
                  "one", s2, s1);
    EXPECT_OK(nnt_gpt2_zero_grad(m));
    EXPECT_OK(nnt_gpt2_grad_sumsq(m, &s0));
    ck_assert(s0 == 0.0);
    nnt_gpt2_destroy(m);
    nnt_st_close(ref);
}
END_TEST

/* The same forward loss (and logits) for every tiling: bit-identical or within 1e-6. */
START_TEST(test_tilings_agree)
{
    nnt_st_reader *ref = fixture_open_st("reference.safetensors");
    double loss[NTILINGS];
    float *logits[NTILINGS];
    for (int i = 0; i < NTILINGS; i++) {
        nnt_gpt2 *m = load_model(&TILINGS[i].t);
        reference_forward(m, ref, &loss[i]);
        logits[i] = test_to_host(nnt_gpt2_activation(m, "logits"), NULL);
        nnt_gpt2_destroy(m);
    }
    for (int i = 0; i < NTILINGS; i++) {
        double dl = fabs(loss[i] - loss[0]);
        double dg = max_abs_diff(logits[i], logits[0], B * T * V, NULL);
        printf("test_gpt2 tiling [%s]: loss %.9f, |loss - loss[0]| %.3g%s, max |logits - "
               "logits[0]| %.3g\n", TILINGS[i].what, loss[i], dl,
               loss[i] == loss[0] ? " (bit-identical)" : "", dg);
        ck_assert_msg(dl <= 1e-6, "%s: loss %.12g differs from %.12g", TILINGS[i].what,
                      loss[i], loss[0]);
        ck_assert_msg(dg <= 1e-5, "%s: logits differ by %g", TILINGS[i].what, dg);
    }
    for (int i = 0; i < NTILINGS; i++)
        free(logits[i]);
    nnt_st_close(ref);
}
END_TEST

/* The same tiling twice gives the same bits. */
START_TEST(test_deterministic)
{
    nnt_st_reader *ref = fixture_open_st("reference.safetensors");
    double loss[2];
    float *grads[2];
    int64_t n = 0;
    for (int r = 0; r < 2; r++) {
        nnt_gpt2 *m = load_model(&TILINGS[3].t);
        reference_forward(m, ref, &loss[r]);
        EXPECT_OK(nnt_gpt2_backward(m));
        grads[r] = export_all(m, NNT_GPT2_GRADS, "qkvw", &n);
        nnt_gpt2_destroy(m);
    }
    ck_assert(loss[0] == loss[1]);
    ck_assert(memcmp(grads[0], grads[1], (size_t)n * sizeof(float)) == 0);
    free(grads[0]);
    free(grads[1]);
    nnt_st_close(ref);
}
END_TEST

/* ---- bf16 storage of product operands ------------------------------------------------- */

/* One bf16 forward + backward with the product operands stored as bf16 (storage 1) or float:
 * the loss, the logits, every gradient; and the RAM the step's tiles took. With recompute
 * the shared block activations are the ones stored. */
struct bf16_run {
    double loss;
    float *logits, *grads[16];
    int64_t numel[16];
    int64_t ram;
};

static struct bf16_run bf16_step(const nnt_gpt2_tiling *t, int recompute, int storage)
{
    struct bf16_run r;
    nnt_st_reader *ref = fixture_open_st("reference.safetensors");
    nnt_mem_stats before, after;
    memset(&before, 0, sizeof before);
    before.size = after.size = sizeof before;
    EXPECT_OK(nnt_ctx_wait(ctx));
    EXPECT_OK(nnt_ctx_mem_stats(ctx, &before, 0));
    nnt_gpt2 *m = load_model(t);
    EXPECT_OK(nnt_gpt2_set_recompute(m, recompute));
    EXPECT_OK(nnt_gpt2_set_float_operands(m, !storage));
    EXPECT_OK(nnt_ctx_set_precision(ctx, NNT_PRECISION_BF16));
    reference_forward(m, ref, &r.loss);
    EXPECT_OK(nnt_gpt2_backward(m));
    EXPECT_OK(nnt_ctx_set_precision(ctx, NNT_PRECISION_FP32));
    nnt_dtype dt;
    EXPECT_OK(nnt_tensor_dtype(nnt_gpt2_activation(m, "lnf"), &dt));
    ck_assert_int_eq(dt, storage ? NNT_BF16 : NNT_FP32);
    EXPECT_OK(nnt_ctx_wait(ctx));
    EXPECT_OK(nnt_ctx_mem_stats(ctx, &after, 0));
    r.ram = after.node[0].used_bytes - before.node[0].used_bytes;
    r.logits = test_to_host(nnt_gpt2_activation(m, "logits"), NULL);
    for (int k = 0; k < 16; k++)
        r.grads[k] = export_all(m, NNT_GPT2_GRADS, LLMC_NAMES[k], &r.numel[k]);
    nnt_gpt2_destroy(m);
    nnt_st_close(ref);
    return r;
}

static void bf16_free(struct bf16_run *r)
{
    free(r->logits);
    for (int k = 0; k < 16; k++)
        free(r->grads[k]);
}

/* Loop index: tiling * 2 + recompute. With NNT_PRECISION_BF16 the GPT stores the activations
 * that only products read (ln1, atty, ln2, fch_gelu, lnf) as bf16 and gives the products
 * bf16 copies of the weight matrices: the loss, the logits and every gradient are the bits
 * of the run that keeps both float (whose products round them to bf16 anyway), and the RAM
 * changes by exactly the bytes expected. */
START_TEST(test_bf16_storage)
{
    const nnt_gpt2_tiling *t = &TILINGS[_i / 2].t;
    int recompute = _i & 1;
    struct bf16_run keep = bf16_step(t, recompute, 0), half = bf16_step(t, recompute, 1);
    ck_assert_msg(half.loss == keep.loss, "loss %.9g with bf16 storage, %.9g without",
                  half.loss, keep.loss);
    ck_assert(memcmp(half.logits, keep.logits, (size_t)(B * T * V) * sizeof(float)) == 0);
    for (int k = 0; k < 16; k++)
        ck_assert_msg(memcmp(half.grads[k], keep.grads[k], (size_t)keep.numel[k] *
                             sizeof(float)) == 0, "%s gradient differs", LLMC_NAMES[k]);
    /* per block ln1, atty, ln2 (B T C each) and fch_gelu (4 B T C) once per stored set, plus
     * lnf (B T C): half their bytes are saved; the bf16 weight copies of wte (V C) and per
     * block qkvw, attprojw, fcw, fcprojw (12 C C) take 2 bytes a weight more */
    int64_t sets = recompute ? 1 : L, btc = (int64_t)B * T * C;
    int64_t saved = (sets * 7 * btc + btc) * 2;
    int64_t copies = ((int64_t)V * C + 12LL * L * C * C) * 2;
    printf("test_gpt2 bf16 storage [%s, recompute %d]: step RAM %lld -> %lld bytes (activations "
           "save %lld, weight copies take %lld)\n", TILINGS[_i / 2].what, recompute,
           (long long)keep.ram, (long long)half.ram, (long long)saved, (long long)copies);
    ck_assert_msg(keep.ram - half.ram == saved - copies, "bf16 storage saved %lld bytes, "
                  "expected %lld - %lld", (long long)(keep.ram - half.ram), (long long)saved,
                  (long long)copies);
    bf16_free(&keep);
    bf16_free(&half);
}
END_TEST

/* ---- training ----------------------------------------------------------------------- */

/* 10 AdamW steps as the fixture's protocol, with weight decay 0 (_i == 0) or 0.1. */
START_TEST(test_train_adamw)
{
    const double wd = _i == 0 ? 0.0 : 0.1;
    const char *tag = _i == 0 ? "wd0" : "wd01";
    const nnt_gpt2_tiling *tiling = &TILINGS[_i == 0 ? 0 : 1].t;
    char name[128];
    nnt_st_reader *tr = fixture_open_st("train.safetensors");
    int32_t *tok = fixture_read(tr, "train_tokens", NNT_IO_I32, NULL);
    int32_t *tgt = fixture_read(tr, "train_targets", NNT_IO_I32, NULL);
    snprintf(name, sizeof name, "losses_%s", tag);
    float *want = read_f32(tr, name, NULL);
    nnt_gpt2 *m = load_model(tiling);
    nnt_adam_options opts = NNT_ADAM_OPTIONS_INIT;
    opts.lr = 1e-3;
    opts.weight_decay = wd;
    double maxd = 0.0;
    for (int s = 0; s < NSTEPS; s++) {
        nnt_tensor *x = ids_tensor(tok + s * B * T, 2, 4), *y = ids_tensor(tgt + s * B * T, 1, 12);
        double loss = 0.0;
        EXPECT_OK(nnt_gpt2_zero_grad(m));
        EXPECT_OK(nnt_gpt2_forward(m, x, y, &loss));
        EXPECT_OK(nnt_gpt2_backward(m));
        EXPECT_OK(nnt_gpt2_adamw_step(m, &opts));
        nnt_tensor_destroy(x);
        nnt_tensor_destroy(y);
        double d = fabs(loss - want[s]);
        maxd = d > maxd ? d : maxd;
        ck_assert_msg(d <= 1e-4, "%s step %d: loss %.9f, fixture %.9f", tag, s, loss, want[s]);
    }
    ck_assert_int_eq(nnt_gpt2_step_count(m), NSTEPS);
    /* final parameters, except the key bias (its updates are Adam-normalised noise) */
    char *kmask = key_bias_mask();
    double maxp = 0.0;
    snprintf(name, sizeof name, "final_%s.", tag);
    for (int k = 0; k < 16; k++) {
        int64_t n = 0;
        float *got = export_all(m, NNT_GPT2_PARAMS, LLMC_NAMES[k], &n);
        float *ref = malloc((size_t)n * sizeof(float));
        ck_assert_ptr_nonnull(ref);
        hf_to_llmc(tr, name, LLMC_NAMES[k], ref, n);
        double d = max_abs_diff(got, ref, n, strcmp(LLMC_NAMES[k], "qkvb") ? NULL : kmask);
        maxp = d > maxp ? d : maxp;
        ck_assert_msg(d <= 1e-5, "%s: final %s differs by %g", tag, LLMC_NAMES[k], d);
        free(got);
        free(ref);
    }
    printf("test_gpt2 train [%s]: max |loss - fixture| %.3g over %d steps, max |final param - "
           "fixture| %.3g (key bias excluded)\n", tag, maxd, NSTEPS, maxp);
    free(kmask);
    nnt_gpt2_destroy(m);
    free(tok);
    free(tgt);
    free(want);
    nnt_st_close(tr);
}
END_TEST

/* ---- checkpoints and arguments ------------------------------------------------------ */

/* Saving the loaded fixture gives the same bytes (wte padded with zero rows again). */
START_TEST(test_save_llmc_roundtrip)
{
    char path[] = "/tmp/nnt-test-gpt2-XXXXXX";
    int fd = mkstemp(path);
    ck_assert_int_ge(fd, 0);
    close(fd);
    nnt_gpt2 *m = load_model(&TILINGS[1].t);
    ck_assert_int_eq(nnt_gpt2_num_params(m), 16488);
    EXPECT_OK(nnt_gpt2_save_llmc(m, path));
    nnt_gpt2_destroy(m);
    size_t n1 = 0, n2 = 0;
    unsigned char *a = slurp(fixture_path("gpt2_tiny.llmc.bin"), &n1);
    unsigned char *b = slurp(path, &n2);
    ck_assert_uint_eq(n1, n2);
    ck_assert(memcmp(a, b, n1) == 0);
    free(a);
    free(b);
    unlink(path);
}
END_TEST

/* The HF safetensors file gives the same parameters, bit for bit, as the llm.c checkpoint,
 * and so the same loss. */
START_TEST(test_load_safetensors)
{
    nnt_st_reader *ref = fixture_open_st("reference.safetensors");
    nnt_gpt2_config cfg = {V, 0, MAXT, L, NH, C};
    nnt_gpt2 *hf = NULL, *lc = load_model(&TILINGS[2].t);
    EXPECT_OK(nnt_gpt2_load_safetensors(ctx, fixture_path("model.safetensors"), &cfg,
                                        &TILINGS[2].t, B, T, &hf));
    for (int k = 0; k < 16; k++) {
        int64_t n1 = 0, n2 = 0;
        float *a = export_all(hf, NNT_GPT2_PARAMS, LLMC_NAMES[k], &n1);
        float *b = export_all(lc, NNT_GPT2_PARAMS, LLMC_NAMES[k], &n2);
        ck_assert_int_eq(n1, n2);
        ck_assert_msg(memcmp(a, b, (size_t)n1 * sizeof(float)) == 0, "%s differs",
                      LLMC_NAMES[k]);
        free(a);
        free(b);
    }
    double l1 = 0.0, l2 = 0.0;
    reference_forward(hf, ref, &l1);
    reference_forward(lc, ref, &l2);
    ck_assert(l1 == l2);
    nnt_gpt2_destroy(hf);
    nnt_gpt2_destroy(lc);
    /* a configuration that does not fit the file */
    cfg.max_seq = T;
    EXPECT_FAIL_MSG(nnt_gpt2_load_safetensors(ctx, fixture_path("model.safetensors"), &cfg,
                                              NULL, B, T, &hf),
                    NNT_E_FORMAT, "transformer.wpe.weight");
    ck_assert_ptr_null(hf);
    nnt_st_close(ref);
}
END_TEST

START_TEST(test_bad_arguments)
{
    nnt_gpt2 *m = load_model(NULL);
    float buf[4];
    int64_t n = 0;
    EXPECT_FAIL_MSG(nnt_gpt2_backward(m), NNT_E_STATE, "nnt_gpt2_backward");
    EXPECT_FAIL_MSG(nnt_gpt2_export(m, NNT_GPT2_PARAMS, "nope", buf, 4), NNT_E_INVAL,
                    "nnt_gpt2_export");
    EXPECT_FAIL_MSG(nnt_gpt2_export(m, NNT_GPT2_PARAMS, "lnfw", buf, 4), NNT_E_INVAL,
                    "nnt_gpt2_export");
    EXPECT_FAIL_MSG(nnt_gpt2_param_numel(m, "qkv", &n), NNT_E_INVAL, "nnt_gpt2_param_numel");
    EXPECT_OK(nnt_gpt2_param_numel(m, "qkvw", &n));
    ck_assert_int_eq(n, L * 3 * C * C);
    /* tokens of the wrong shape */
    int64_t shape[2] = {B, T - 1};
    nnt_tensor *x = NULL;
    EXPECT_OK(nnt_tensor_create(ctx, NNT_INT32, 2, shape, NULL, &x));
    EXPECT_OK(nnt_tensor_fill(x, 1));
    EXPECT_FAIL_MSG(nnt_gpt2_forward(m, x, NULL, NULL), NNT_E_SHAPE, "nnt_gpt2_forward");
    nnt_tensor_destroy(x);
    /* a target outside the vocabulary */
    int32_t ids[B * T];
    for (int i = 0; i < B * T; i++)
        ids[i] = i % V;
    nnt_tensor *tok = ids_tensor(ids, 2, 12);
    ids[5] = V;
    nnt_tensor *tgt = ids_tensor(ids, 2, 12);
    EXPECT_FAIL_MSG(nnt_gpt2_forward(m, tok, tgt, NULL), NNT_E_INVAL, "nnt_gpt2_forward");
    /* forward without targets: logits only, no backward */
    EXPECT_OK(nnt_gpt2_forward(m, tok, NULL, NULL));
    EXPECT_FAIL_MSG(nnt_gpt2_backward(m), NNT_E_STATE, "nnt_gpt2_backward");
    nnt_adam_options bad = NNT_ADAM_OPTIONS_INIT;
    bad.decoupled = 0;
    EXPECT_FAIL_MSG(nnt_gpt2_adamw_step(m, &bad), NNT_E_INVAL, "nnt_gpt2_adamw_step");
    nnt_tensor_destroy(tok);
    nnt_tensor_destroy(tgt);
    nnt_gpt2_destroy(m);
    nnt_gpt2 *m2 = NULL;
    nnt_gpt2_config cfg = {V, 0, MAXT, L, 5, C};   /* C not a multiple of NH */
    EXPECT_FAIL_MSG(nnt_gpt2_create(ctx, &cfg, NULL, B, T, &m2), NNT_E_INVAL, "nnt_gpt2_create");
    cfg.heads = NH;
    EXPECT_FAIL_MSG(nnt_gpt2_create(ctx, &cfg, NULL, B, MAXT + 1, &m2), NNT_E_INVAL,
                    "nnt_gpt2_create");
    EXPECT_FAIL_MSG(nnt_gpt2_load_llmc(ctx, fixture_path("model.safetensors"), NULL, B, T, &m2),
                    NNT_E_FORMAT, "nnt_gpt2_load_llmc");
    ck_assert_ptr_null(m2);
}
END_TEST

static Suite *gpt2_suite(void)
{
    Suite *s = suite_create("gpt2");
    TCase *tc = tcase_create("reference");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 120);
    tcase_add_loop_test(tc, test_reference_step, 0, NTILINGS);
    tcase_add_loop_test(tc, test_auto_tiling_fixture, 0, 3);
    tcase_add_test(tc, test_auto_tiling_rules);
    tcase_add_test(tc, test_auto_tiling_gpu);
    tcase_add_test(tc, test_grad_accumulation);
    tcase_add_test(tc, test_tilings_agree);
    tcase_add_test(tc, test_deterministic);
    tcase_add_loop_test(tc, test_bf16_storage, 0, 2 * NTILINGS);
    tcase_add_loop_test(tc, test_train_adamw, 0, 2);
    tcase_add_test(tc, test_save_llmc_roundtrip);
    tcase_add_test(tc, test_load_safetensors);
    tcase_add_test(tc, test_bad_arguments);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return run_suite(gpt2_suite());
}
