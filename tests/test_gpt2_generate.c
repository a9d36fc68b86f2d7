/* SPDX-License-Identifier: MIT */
/* GPT-2 text generation through the public API (nnt_gpt_generate, nnt_model_generate,
 * nnt_sampling) against tests/fixtures/gpt2_tiny (see the README there), the model loaded
 * with nnt_gpt_load_llmc:
 *   - greedy decoding equals Hugging Face's generate token for token (generate.safetensors),
 *     for several tilings, batch sizes and sequence lengths T >= 12, nnt_model_generate
 *     gives the same tokens, and the logits of a forward over the prompt and the first 7
 *     generated tokens equal, at positions 4..11, the scores generate took the argmax of
 *     (within 4e-6 normwise relative: 10x the 3.6e-7 measured on a Zen 3 with BLIS
 *     zen3/haswell/generic);
 *   - sampling (temperature 1, top_k 5) is deterministic for a seed, differs between seeds,
 *     and only ever picks one of the 5 largest logits, checked by recomputing every step's
 *     logits with nnt_layer_forward on the window nnt_gpt_generate(3) describes (the last
 *     min(n, T) tokens: past T the window slides); top_k 1 is greedy; over 400 seeds the
 *     first token's frequencies match softmax(top-5 logits / temperature) for temperatures
 *     1 and 0.5 (within 4 standard deviations: a statistical bound);
 *   - a prompt longer than T: only its last T tokens count;
 *   - the training state (weights, gradients, AdamW moments and step: the nnt_optim's
 *     train-state file and stats) is untouched, a pending backward is cancelled, the targets
 *     stay set;
 *   - bad arguments.
 * The fixture is read with lib/io's safetensors reader, so the test links the library's
 * objects. */
#include "testutil.h"
#include "fixture_st.h"

#include <math.h>
#include <stdint.h>
#include <unistd.h>

/* The fixture's configuration and generation reference. */
enum { V = 67, MAXT = 16, L = 2, NH = 3, C = 24, NPROMPT = 5, NGEN = 8 };

/* A whole entry of generate.safetensors converted to want, malloc'd; checks its size. */
static void *read_entry(const char *name, nnt_io_dtype want, uint64_t numel)
{
    nnt_st_reader *r = fixture_open_st("generate.safetensors");
    const nnt_st_entry *e = NULL;
    void *buf = fixture_read(r, name, want, &e);
    ck_assert_uint_eq(e->numel, numel);
    nnt_st_close(r);
    return buf;
}

/* A model shape: batch, sequence length, tiling. */
typedef struct model_case {
    const char *what;
    int64_t B, T;
    nnt_tiling t;   /* batch, seq, channels, hidden, vocab, heads, head_dim; -1: whole */
} model_case;

#define TILING(b, s, c, h, v, nh, hd) {sizeof(nnt_tiling), b, s, c, h, v, nh, hd}
static const model_case CASES[] = {
    {"B=1 T=16 single tiles", 1, 16, TILING(-1, -1, -1, -1, -1, -1, -1)},
    {"B=2 T=13 all partial, C tile 5 cuts heads", 2, 13, TILING(1, 5, 5, 40, 10, 2, 3)},
    {"B=3 T=12 odd tiles", 3, 12, TILING(2, 7, 9, 25, 33, 1, 5)},
};
#define NCASES ((int)(sizeof CASES / sizeof CASES[0]))

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

static nnt_layer *load_model(const model_case *mc)
{
    nnt_layer *m = NULL;
    EXPECT_OK(nnt_gpt_load_llmc(ctx, fixture_path("gpt2_tiny.llmc.bin"), mc->B, mc->T, &mc->t,
                                &m));
    ck_assert_ptr_nonnull(m);
    return m;
}

static nnt_sampling sampling(double temperature, int64_t top_k, uint64_t seed)
{
    nnt_sampling s = NNT_SAMPLING_INIT;
    s.temperature = temperature;
    s.top_k = top_k;
    s.seed = seed;
    return s;
}

/* The logits (B, T, V) of a forward over seq[0..n) (n <= T) in row 0, token 0 elsewhere,
 * malloc'd. */
static float *forward_logits(nnt_layer *m, const model_case *mc, const int32_t *seq, int64_t n)
{
    int64_t shape[2] = {mc->B, mc->T}, numel = 0;
    int32_t *ids = calloc((size_t)(mc->B * mc->T), sizeof(int32_t));
    ck_assert_ptr_nonnull(ids);
    memcpy(ids, seq, (size_t)n * sizeof(int32_t));
    nnt_tensor *tok = NULL, *y = NULL;
    EXPECT_OK(nnt_tensor_create(ctx, NNT_INT32, 2, shape, NULL, &tok));
    EXPECT_OK(nnt_tensor_copy_from_host(tok, ids, (size_t)(mc->B * mc->T) * sizeof(int32_t)));
    EXPECT_OK(nnt_layer_forward(m, tok, &y));
    float *all = test_to_host(y, &numel);
    ck_assert_int_eq(numel, mc->B * mc->T * V);
    nnt_tensor_destroy(tok);
    free(ids);
    return all;
}

/* ---- greedy against Hugging Face ----------------------------------------------------- */

START_TEST(test_greedy_matches_hf)
{
    const model_case *mc = &CASES[_i];
    int32_t *prompt = read_entry("prompt", NNT_IO_I32, NPROMPT);
    int32_t *want = read_entry("tokens", NNT_IO_I32, NPROMPT + NGEN);
    float *scores = read_entry("scores", NNT_IO_F32, NGEN * V);
    ck_assert(memcmp(prompt, want, NPROMPT * sizeof(int32_t)) == 0);
    nnt_layer *m = load_model(mc);
    int32_t got[NGEN], again[NGEN], model[NGEN];
    nnt_sampling greedy = sampling(0.0, 5, 99);   /* top_k and seed unused when greedy */
    EXPECT_OK(nnt_gpt_generate(m, prompt, NPROMPT, NGEN, NULL, got));
    for (int i = 0; i < NGEN; i++)
        ck_assert_msg(got[i] == want[NPROMPT + i], "%s: token %d is %d, Hugging Face %d",
                      mc->what, i, (int)got[i], (int)want[NPROMPT + i]);
    /* a forward over prompt + 7 generated tokens: row 0's logits at positions 4..11 are the
     * scores of the 8 steps (causal attention) */
    float *logits = forward_logits(m, mc, want, NPROMPT + NGEN - 1);
    double num = 0.0, den = 0.0, maxd = 0.0;
    for (int i = 0; i < NGEN; i++)
        for (int v = 0; v < V; v++) {
            double d = (double)logits[(NPROMPT - 1 + i) * V + v] - scores[i * V + v];
            num += d * d;
            den += (double)scores[i * V + v] * scores[i * V + v];
            maxd = fabs(d) > maxd ? fabs(d) : maxd;
        }
    /* measured 3.6e-7 (Zen 3, BLIS zen3/haswell/generic, the three cases); 10x */
    EXPECT_TOL(sqrt(num / den), 4e-6, "%s: step logits against HF's scores, normwise "
               "relative", mc->what);
    /* greedy = temperature 0 whatever top_k and seed; and the same again; and the same
     * through nnt_model_generate */
    EXPECT_OK(nnt_gpt_generate(m, prompt, NPROMPT, NGEN, &greedy, again));
    ck_assert(memcmp(got, again, sizeof got) == 0);
    EXPECT_OK(nnt_model_generate(m, prompt, NPROMPT, NGEN, NULL, model));
    ck_assert(memcmp(got, model, sizeof got) == 0);
    printf("test_gpt2_generate greedy [%s]: %d tokens equal HF's; step logits max |diff| %.3g "
           "(relative %.3g)\n", mc->what, NGEN, maxd, sqrt(num / den));
    free(logits);
    nnt_layer_destroy(m);
    free(prompt);
    free(want);
    free(scores);
}
END_TEST

/* ---- sampling ------------------------------------------------------------------------ */

/* Logits (V) after the first n tokens of seq, recomputed as nnt_gpt_generate(3) documents
 * its step: a forward of the (B, T) batch over the last min(T, n) tokens in row 0 (token 0
 * elsewhere), read at the window's last position. */
static void window_logits(nnt_layer *m, const model_case *mc, const int32_t *seq, int64_t n,
                          float *row)
{
    int64_t w = n < mc->T ? n : mc->T;
    float *all = forward_logits(m, mc, seq + n - w, w);
    memcpy(row, all + (w - 1) * V, V * sizeof(float));
    free(all);
}

/* Rank of token among the logits: how many are larger, or equal with a lower id. */
static int rank_of(const float *row, int32_t token)
{
    int rank = 0;
    for (int v = 0; v < V; v++)
        rank += row[v] > row[token] || (row[v] == row[token] && v < token);
    return rank;
}

enum { SAMPLE_PROMPT = 5, SAMPLE_GEN = 24 };   /* 29 tokens: the window slides past T */

START_TEST(test_sampling_top_k)
{
    const model_case *mc = &CASES[_i];
    static const int32_t prompt[SAMPLE_PROMPT] = {11, 42, 7, 3, 60};
    int32_t a[SAMPLE_GEN], b[SAMPLE_GEN], c[SAMPLE_GEN], seq[SAMPLE_PROMPT + SAMPLE_GEN];
    float row[V];
    nnt_layer *m = load_model(mc);
    nnt_sampling s = sampling(1.0, 5, 1234);
    EXPECT_OK(nnt_gpt_generate(m, prompt, SAMPLE_PROMPT, SAMPLE_GEN, &s, a));
    EXPECT_OK(nnt_gpt_generate(m, prompt, SAMPLE_PROMPT, SAMPLE_GEN, &s, b));
    ck_assert_msg(memcmp(a, b, sizeof a) == 0, "%s: same seed, different tokens", mc->what);
    s.seed = 1235;
    EXPECT_OK(nnt_gpt_generate(m, prompt, SAMPLE_PROMPT, SAMPLE_GEN, &s, c));
    ck_assert_msg(memcmp(a, c, sizeof a) != 0, "%s: seeds 1234 and 1235 gave the same %d "
                  "tokens", mc->what, SAMPLE_GEN);
    /* every pick among the top 5 of its step's logits; not always the top 1 */
    memcpy(seq, prompt, sizeof prompt);
    memcpy(seq + SAMPLE_PROMPT, a, sizeof a);
    int hist[5] = {0};
    for (int i = 0; i < SAMPLE_GEN; i++) {
        window_logits(m, mc, seq, SAMPLE_PROMPT + i, row);
        int r = rank_of(row, a[i]);
        ck_assert_msg(r < 5, "%s: step %d picked token %d of rank %d", mc->what, i, (int)a[i],
                      r);
        hist[r]++;
    }
    ck_assert_msg(hist[0] < SAMPLE_GEN, "%s: every pick was the argmax", mc->what);
    /* top_k 1 is greedy, whatever the temperature */
    nnt_sampling one = sampling(2.5, 1, 7);
    EXPECT_OK(nnt_gpt_generate(m, prompt, SAMPLE_PROMPT, SAMPLE_GEN, &one, b));
    EXPECT_OK(nnt_gpt_generate(m, prompt, SAMPLE_PROMPT, SAMPLE_GEN, NULL, c));
    ck_assert(memcmp(b, c, sizeof b) == 0);
    memcpy(seq + SAMPLE_PROMPT, c, sizeof c);
    for (int i = 0; i < SAMPLE_GEN; i++) {
        window_logits(m, mc, seq, SAMPLE_PROMPT + i, row);
        ck_assert_msg(rank_of(row, c[i]) == 0, "%s: greedy step %d is not the argmax",
                      mc->what, i);
    }
    printf("test_gpt2_generate sampling [%s]: temperature 1, top_k 5, seed 1234 -> ranks 0..4 "
           "picked %d %d %d %d %d times over %d steps (window slides after %lld)\n", mc->what,
           hist[0], hist[1], hist[2], hist[3], hist[4], SAMPLE_GEN, (long long)mc->T);
    nnt_layer_destroy(m);
}
END_TEST

/* The first token over NSEEDS seeds follows softmax(top-5 logits / temperature): each
 * frequency within 4 standard deviations of its probability (the seeds are fixed, so this
 * is deterministic; it catches a wrong temperature, normalisation or candidate set). This
 * bound is statistical, not a rounding tolerance: the measured worst, 2.4 standard
 * deviations (temperature 1; 1.2 at 0.5), is sampling noise of 400 draws that no
 * tightening can remove, so it stays at 4 (a rounding change of the logits would have to
 * move a draw across a cumulative-probability boundary to change it at all). */
enum { NSEEDS = 400 };

START_TEST(test_sampling_distribution)
{
    const model_case *mc = &CASES[0];
    static const int32_t prompt[SAMPLE_PROMPT] = {11, 42, 7, 3, 60};
    const double temperature = _i == 0 ? 1.0 : 0.5;
    float row[V];
    int counts[V] = {0};
    nnt_layer *m = load_model(mc);
    window_logits(m, mc, prompt, SAMPLE_PROMPT, row);
    for (int seed = 0; seed < NSEEDS; seed++) {
        nnt_sampling s = sampling(temperature, 5, (uint64_t)seed);
        int32_t tok = -1;
        EXPECT_OK(nnt_gpt_generate(m, prompt, SAMPLE_PROMPT, 1, &s, &tok));
        ck_assert(tok >= 0 && tok < V);
        counts[tok]++;
    }
    double max = row[0], z = 0.0, worst = 0.0;
    int worst_v = 0;
    for (int v = 0; v < V; v++)
        max = row[v] > max ? row[v] : max;
    for (int v = 0; v < V; v++)
        z += rank_of(row, v) < 5 ? exp((row[v] - max) / temperature) : 0.0;
    for (int v = 0; v < V; v++) {
        double p = rank_of(row, v) < 5 ? exp((row[v] - max) / temperature) / z : 0.0;
        double f = (double)counts[v] / NSEEDS, sd = sqrt(p * (1.0 - p) / NSEEDS);
        ck_assert_msg(p > 0.0 || counts[v] == 0, "token %d outside the top 5 sampled", v);
        if (p > 0.0 && fabs(f - p) / sd > worst) {
            worst = fabs(f - p) / sd;
            worst_v = v;
        }
    }
    EXPECT_TOL(worst, 4.0, "temperature %g: token %d sampled with frequency %.4f, probability "
               "%.4f: |difference| in standard deviations", temperature, worst_v,
               (double)counts[worst_v] / NSEEDS,
               exp((row[worst_v] - max) / temperature) / z);
    printf("test_gpt2_generate distribution [temperature %g]: %d seeds, worst |frequency - "
           "probability| = %.2f standard deviations\n", temperature, NSEEDS, worst);
    nnt_layer_destroy(m);
}
END_TEST

/* A prompt longer than T (the window, T = 4 < max_seq here): only its last T tokens are
 * seen. */
START_TEST(test_long_prompt_window)
{
    const model_case mc = {"B=1 T=4", 1, 4, TILING(-1, 3, -1, -1, -1, -1, -1)};
    static const int32_t prompt[7] = {50, 1, 2, 11, 42, 7, 3}, tail[4] = {11, 42, 7, 3};
    int32_t a[6], b[6];
    nnt_layer *m = load_model(&mc);
    nnt_sampling s = sampling(0.8, 0, 77);
    EXPECT_OK(nnt_gpt_generate(m, prompt, 7, 6, &s, a));
    EXPECT_OK(nnt_gpt_generate(m, tail, 4, 6, &s, b));
    ck_assert(memcmp(a, b, sizeof a) == 0);
    nnt_layer_destroy(m);
}
END_TEST

/* ---- the training state -------------------------------------------------------------- */

/* Every gradient, concatenated in parameter order, malloc'd. */
static float *all_grads(nnt_layer *m, int64_t *total)
{
    int64_t count = 0, n = 0, at = 0;
    EXPECT_OK(nnt_layer_num_params(m, &count, &n));
    float *g = malloc((size_t)n * sizeof(float));
    ck_assert_ptr_nonnull(g);
    for (int64_t i = 0; i < count; i++) {
        nnt_param_info p;
        memset(&p, 0, sizeof p);
        p.size = sizeof p;
        EXPECT_OK(nnt_layer_param(m, i, &p));
        int64_t nk = 0;
        EXPECT_OK(nnt_tensor_numel(p.grad, &nk));
        EXPECT_OK(nnt_tensor_copy_to_host(p.grad, g + at, (size_t)nk * sizeof(float)));
        at += nk;
    }
    ck_assert_int_eq(at, n);
    *total = n;
    return g;
}

static int64_t optim_step_count(const nnt_optim *opt)
{
    nnt_optim_stats st;
    memset(&st, 0, sizeof st);
    st.size = sizeof st;
    EXPECT_OK(nnt_optim_stats_get(opt, &st));
    return st.step;
}

/* One AdamW step and a second forward/backward, then generate (nnt_gpt_generate, then
 * nnt_model_generate): weights, moments, step (the optimizer's saved training state, byte
 * for byte, and its stats) and gradients are unchanged; the pending backward is cancelled;
 * the targets stay set (a forward gives the loss of before). */
START_TEST(test_training_state_untouched)
{
    const model_case *mc = &CASES[1];
    char p1[] = "/tmp/nnt-test-gen-XXXXXX", p2[] = "/tmp/nnt-test-gen-XXXXXX";
    int fd1 = mkstemp(p1), fd2 = mkstemp(p2);
    ck_assert(fd1 >= 0 && fd2 >= 0);
    close(fd1);
    close(fd2);
    nnt_layer *m = load_model(mc);
    int64_t shape[2] = {mc->B, mc->T}, n = mc->B * mc->T;
    int32_t *ids = malloc((size_t)n * sizeof(int32_t));
    ck_assert_ptr_nonnull(ids);
    for (int64_t i = 0; i < n; i++)
        ids[i] = (int32_t)((3 * i + 1) % V);
    nnt_tensor *x = NULL, *y = NULL;
    EXPECT_OK(nnt_tensor_create(ctx, NNT_INT32, 2, shape, NULL, &x));
    EXPECT_OK(nnt_tensor_create(ctx, NNT_INT32, 2, shape, NULL, &y));
    EXPECT_OK(nnt_tensor_copy_from_host(x, ids, (size_t)n * sizeof(int32_t)));
    for (int64_t i = 0; i < n; i++)
        ids[i] = (int32_t)((3 * i + 4) % V);
    EXPECT_OK(nnt_tensor_copy_from_host(y, ids, (size_t)n * sizeof(int32_t)));
    nnt_optim_options oo = NNT_OPTIM_OPTIONS_INIT;
    oo.kind = NNT_OPTIM_ADAMW;
    oo.lr = 1e-3;
    oo.weight_decay = 0.1;
    nnt_optim *opt = NULL;
    EXPECT_OK(nnt_optim_create(ctx, &oo, &opt));
    EXPECT_OK(nnt_optim_add_layer(opt, m));
    EXPECT_OK(nnt_layer_set_targets(m, y));
    EXPECT_OK(nnt_layer_forward(m, x, NULL));
    EXPECT_OK(nnt_layer_backward(m, NULL, NULL));
    EXPECT_OK(nnt_optim_step(opt));
    EXPECT_OK(nnt_layer_forward(m, x, NULL));
    EXPECT_OK(nnt_layer_backward(m, NULL, NULL));   /* gradients of the second step, not yet
                                                       applied */
    double loss0 = 0.0, loss1 = -1.0;
    EXPECT_OK(nnt_layer_forward(m, x, NULL));   /* a backward is pending */
    EXPECT_OK(nnt_layer_loss(m, &loss0));
    int64_t ng = 0, ng2 = 0;
    float *g0 = all_grads(m, &ng);
    EXPECT_OK(nnt_train_state_save(opt, p1, NULL));
    static const int32_t prompt[3] = {5, 6, 7};
    int32_t out[20];
    nnt_sampling s = sampling(1.0, 0, 3);
    EXPECT_OK(nnt_gpt_generate(m, prompt, 3, 20, &s, out));
    EXPECT_FAIL_MSG(nnt_layer_backward(m, NULL, NULL), NNT_E_STATE, "nnt_layer_backward");
    EXPECT_OK(nnt_model_generate(m, prompt, 3, 20, &s, out));
    EXPECT_FAIL_MSG(nnt_layer_backward(m, NULL, NULL), NNT_E_STATE, "nnt_layer_backward");
    ck_assert_int_eq(optim_step_count(opt), 1);
    float *g1 = all_grads(m, &ng2);
    ck_assert_int_eq(ng, ng2);
    ck_assert_msg(memcmp(g0, g1, (size_t)ng * sizeof(float)) == 0, "gradients changed");
    EXPECT_OK(nnt_train_state_save(opt, p2, NULL));
    size_t n1 = 0, n2 = 0;
    unsigned char *a = slurp(p1, &n1), *b = slurp(p2, &n2);
    ck_assert_uint_eq(n1, n2);
    ck_assert_msg(memcmp(a, b, n1) == 0, "weights, moments or step changed");
    /* the targets stay set: the same forward gives the same loss */
    EXPECT_OK(nnt_layer_forward(m, x, NULL));
    EXPECT_OK(nnt_layer_loss(m, &loss1));
    ck_assert_msg(loss1 == loss0, "loss %.9g after generating, %.9g before", loss1, loss0);
    free(a);
    free(b);
    free(g0);
    free(g1);
    free(ids);
    nnt_tensor_destroy(x);
    nnt_tensor_destroy(y);
    nnt_optim_destroy(opt);
    nnt_layer_destroy(m);
    unlink(p1);
    unlink(p2);
}
END_TEST

/* ---- arguments ----------------------------------------------------------------------- */

START_TEST(test_bad_arguments)
{
    const char *fn = "nnt_gpt_generate";
    nnt_layer *m = load_model(&CASES[0]);
    int32_t prompt[3] = {1, 2, 3}, out[4] = {-7, -7, -7, -7};
    nnt_sampling s = sampling(1.0, 5, 1);
    EXPECT_FAIL_MSG(nnt_gpt_generate(NULL, prompt, 3, 4, &s, out), NNT_E_INVAL, fn);
    EXPECT_FAIL_MSG(nnt_gpt_generate(m, NULL, 3, 4, &s, out), NNT_E_INVAL, fn);
    EXPECT_FAIL_MSG(nnt_gpt_generate(m, prompt, 3, 4, &s, NULL), NNT_E_INVAL, fn);
    EXPECT_FAIL_MSG(nnt_gpt_generate(m, prompt, 0, 4, &s, out), NNT_E_INVAL, fn);
    EXPECT_FAIL_MSG(nnt_gpt_generate(m, prompt, -1, 4, &s, out), NNT_E_INVAL, fn);
    EXPECT_FAIL_MSG(nnt_gpt_generate(m, prompt, 3, -1, &s, out), NNT_E_INVAL, fn);
    EXPECT_FAIL_MSG(nnt_gpt_generate(m, prompt, 3, INT64_MAX, &s, out), NNT_E_INVAL, fn);
    prompt[1] = V;
    EXPECT_FAIL_MSG(nnt_gpt_generate(m, prompt, 3, 4, &s, out), NNT_E_INVAL, fn);
    EXPECT_FAIL_MSG(nnt_gpt_generate(m, prompt, 3, 4, &s, out), NNT_E_INVAL, "position 1");
    prompt[1] = -1;
    EXPECT_FAIL_MSG(nnt_gpt_generate(m, prompt, 3, 4, &s, out), NNT_E_INVAL, "position 1");
    prompt[1] = 2;
    const double bad_temps[] = {-1.0, -0.0 - 1e-300, NAN, INFINITY};
    for (size_t i = 0; i < sizeof bad_temps / sizeof bad_temps[0]; i++) {
        s.temperature = bad_temps[i];
        EXPECT_FAIL_MSG(nnt_gpt_generate(m, prompt, 3, 4, &s, out), NNT_E_INVAL,
                        "temperature");
    }
    s.temperature = 1.0;
    s.top_k = -1;
    EXPECT_FAIL_MSG(nnt_gpt_generate(m, prompt, 3, 4, &s, out), NNT_E_INVAL, fn);
    EXPECT_FAIL_MSG(nnt_gpt_generate(m, prompt, 3, 4, &s, out), NNT_E_INVAL, "top_k");
    for (int i = 0; i < 4; i++)
        ck_assert_int_eq(out[i], -7);   /* nothing written by a failed call */
    /* ngen 0: nothing to do, out may be NULL; top_k beyond V means all */
    s.top_k = 5;
    EXPECT_OK(nnt_gpt_generate(m, prompt, 3, 0, &s, NULL));
    s.top_k = 1000;
    EXPECT_OK(nnt_gpt_generate(m, prompt, 3, 4, &s, out));
    for (int i = 0; i < 4; i++)
        ck_assert(out[i] >= 0 && out[i] < V);
    nnt_layer_destroy(m);
}
END_TEST

static Suite *generate_suite(void)
{
    Suite *s = suite_create("gpt2_generate");
    TCase *tc = tcase_create("generate");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 120);
    tcase_add_loop_test(tc, test_greedy_matches_hf, 0, NCASES);
    tcase_add_loop_test(tc, test_sampling_top_k, 0, NCASES);
    tcase_add_loop_test(tc, test_sampling_distribution, 0, 2);
    tcase_add_test(tc, test_long_prompt_window);
    tcase_add_test(tc, test_training_state_untouched);
    tcase_add_test(tc, test_bad_arguments);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return run_suite(generate_suite());
}
