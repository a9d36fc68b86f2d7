/* SPDX-License-Identifier: MIT */
/* nnt_model_generate (lib/models/generate.c):
 *   - Llama-family trees with the weights of tests/fixtures/llama_tiny (gqa, mqa, qwen3; loaded by
 *     parameter name, nnt's names being Hugging Face's): greedy decoding of 20 tokens equals
 *     transformers' generate(do_sample=False) (generate.safetensors, written by
 *     tests/gen_llama_generate.py), and with max_seq 8 (the window slides past 8 tokens)
 *     equals the fixture's loop of forwards on the last 8 tokens; three tilings (whole;
 *     partial channel / hidden / vocabulary tiles; one head per tile) so that the last row
 *     is gathered from several channel tiles. The fixture's smallest top-1/top-2 logit
 *     margin is 3.1e-3 (logits about 1.3), so the token equality does not hang on rounding;
 *   - a prompt longer than max_seq gives what its last max_seq tokens give;
 *   - sampling: the same seed gives the same tokens, top_k 1 and temperature 0 are greedy,
 *     other seeds give other tokens;
 *   - a GPT-2 model (nnt_model_create with a GPT-2 configuration) gives nnt_gpt_generate's
 *     tokens, greedy and sampled;
 *   - parameters and gradients are untouched, a pending backward is cancelled, and the
 *     targets stay set: the training step after a generation has the loss and gradients of
 *     the one before it;
 *   - bad arguments, with messages naming nnt_model_generate;
 *   - the key/value cache: 48 greedy tokens equal transformers' (greedy_long), with and
 *     without the cache; on GPT-2 (random) and the untied GQA model, 40 new tokens past a
 *     window of 24 under three tilings: the cached tokens (greedy and sampled) equal the
 *     uncached ones (no_cache), the logits within 1e-5 (measured 6e-7) while it fits the
 *     window and bitwise equal once it slides (the same forwards); top_p, eos and the 0.2
 *     size of nnt_sampling. */
#include "testutil.h"
#include "fixture_st.h"
#include "models/models.h"   /* nnt_model_generate_trace: the logits of every step */
#include "models/sample.h"   /* the sampler: top_k against a sort of every candidate */

#include <math.h>
#include <stddef.h>
#include <stdint.h>

/* The fixture models: Hugging Face directories tests/fixtures/llama_tiny/NAME (gqa: V 61,
 * grouped-query, untied, theta 5e5; mqa: V 53, one kv head, tied, biases, llama3; qwen3: V 67,
 * Qwen3ForCausalLM: q/k norms, head_dim 12 against C 40, tied, biases, theta 1e6). */
typedef struct fix_model {
    const char *name;
    int64_t V;
} fix_model;

#define NMODELS 3
static const fix_model MODELS[NMODELS] = {{"gqa", 61}, {"mqa", 53}, {"qwen3", 67}};

/* The fixture's sizes: prompt, new tokens, window of the sliding reference; the (B, T) of
 * gqa.reference.safetensors. */
enum { NPROMPT = 5, NGEN = 20, WINDOW = 8, MAXPOS = 64, B = 2, T = 8, NGEN_LONG = 48 };

/* channels, hidden, vocab, heads, head_dim tiles (0: automatic) */
static const nnt_tiling TILINGS[3] = {
    {sizeof(nnt_tiling), 0, 0, 0, 0, 0, 0, 0},
    {sizeof(nnt_tiling), 0, 0, 5, 7, 9, 3, 0},
    {sizeof(nnt_tiling), 0, 0, 8, 16, 10, 1, 1},
};

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

/* ---- fixtures and models ------------------------------------------------------------------ */

static nnt_st_reader *open_fixture(const char *file)
{
    char path[4200];
    const char *top = getenv("top_srcdir");
    snprintf(path, sizeof path, "%s/tests/fixtures/llama_tiny/%s", top ? top : ".", file);
    return fixture_open_st_path(path);
}

/* Entry "<model>.<what>" of generate.safetensors as int32 (malloc'd), n elements. */
static int32_t *read_ids(const fix_model *m, const char *what, int64_t n)
{
    nnt_st_reader *r = open_fixture("generate.safetensors");
    char name[64];
    const nnt_st_entry *e = NULL;
    snprintf(name, sizeof name, "%s.%s", m->name, what);
    int32_t *v = fixture_read(r, name, NNT_IO_I32, &e);
    ck_assert_int_eq((int64_t)e->numel, n);
    nnt_st_close(r);
    return v;
}

static float read_min_margin(const fix_model *m, const char *what)
{
    nnt_st_reader *r = open_fixture("generate.safetensors");
    char name[64];
    snprintf(name, sizeof name, "%s.%s_margin", m->name, what);
    float *v = fixture_read(r, name, NNT_IO_F32, NULL), min = INFINITY;
    for (int i = 0; i < NGEN; i++)
        min = v[i] < min ? v[i] : min;
    free(v);
    nnt_st_close(r);
    return min;
}

/* The Llama model of m's config.json for (b, t) with max_seq, tiling *tl, the fixture's
 * weights loaded by name: every parameter found with its element count, as many as the
 * file has. (nnt_model_load_hf cannot change max_seq, which the sliding case needs.) */
static nnt_layer *load_window(const fix_model *m, int64_t max_seq, int64_t b, int64_t t,
                              const nnt_tiling *tl, int64_t window);

static nnt_layer *load(const fix_model *m, int64_t max_seq, int64_t b, int64_t t,
                       const nnt_tiling *tl)
{
    return load_window(m, max_seq, b, t, tl, 0);
}

/* load with a sliding window of window keys on every layer (0: none) */
static nnt_layer *load_window(const fix_model *m, int64_t max_seq, int64_t b, int64_t t,
                              const nnt_tiling *tl, int64_t window)
{
    char dir[4200];
    const char *top = getenv("top_srcdir");
    snprintf(dir, sizeof dir, "%s/tests/fixtures/llama_tiny/%s", top ? top : ".", m->name);
    nnt_model_config c;
    EXPECT_OK(nnt_model_hf_config(ctx, dir, &c));   /* config.json */
    ck_assert_int_eq(c.vocab, m->V);
    c.max_seq = max_seq;
    c.sliding_window = window;
    nnt_layer *l = NULL;
    EXPECT_OK(nnt_model_create(ctx, &c, b, t, tl, &l));
    char file[64];
    snprintf(file, sizeof file, "%s/model.safetensors", m->name);
    nnt_st_reader *r = open_fixture(file);
    int64_t count = 0;
    EXPECT_OK(nnt_layer_num_params(l, &count, NULL));
    ck_assert_int_eq(count, (int64_t)nnt_st_count(r));
    for (int64_t i = 0; i < count; i++) {
        nnt_param_info p = test_param_at(l, i);
        const nnt_st_entry *e = NULL;
        float *v = fixture_read(r, p.name, NNT_IO_F32, &e);
        int64_t want = 0;
        EXPECT_OK(nnt_tensor_numel(p.value, &want));
        ck_assert_msg((int64_t)e->numel == want, "%s: %lld elements, fixture %lld", p.name,
                      (long long)want, (long long)e->numel);
        EXPECT_OK(nnt_tensor_copy_from_host(p.value, v, (size_t)want * sizeof *v));
        free(v);
    }
    nnt_st_close(r);
    return l;
}

static void expect_ids(const int32_t *got, const int32_t *want, int64_t n, const char *what)
{
    for (int64_t i = 0; i < n; i++)
        ck_assert_msg(got[i] == want[i], "%s: token %lld is %d, expected %d", what,
                      (long long)i, (int)got[i], (int)want[i]);
}

static int same_ids(const int32_t *a, const int32_t *b, int64_t n)
{
    return memcmp(a, b, (size_t)n * sizeof *a) == 0;
}

/* ---- greedy against transformers --------------------------------------------------------- */

/* _i = (model * 3 + tiling) * 2 + slide */
START_TEST(test_greedy_hf)
{
    const fix_model *m = &MODELS[_i / 6];
    int ti = _i / 2 % 3, slide = _i % 2;
    const char *what = slide ? "slide" : "greedy";
    int64_t max_seq = slide ? WINDOW : MAXPOS;
    int32_t *prompt = read_ids(m, "prompt", NPROMPT), *want = read_ids(m, what, NGEN);
    int32_t got[NGEN];
    nnt_layer *l = load(m, max_seq, 1, slide ? WINDOW : NPROMPT + NGEN, &TILINGS[ti]);
    EXPECT_OK(nnt_model_generate(l, prompt, NPROMPT, NGEN, NULL, got));
    char label[64];
    snprintf(label, sizeof label, "%s %s tiling %d", m->name, what, ti);
    expect_ids(got, want, NGEN, label);
    printf("test_model_generate %s: %d tokens equal (smallest margin %.2e)\n", label, NGEN,
           (double)read_min_margin(m, what));
    nnt_layer_destroy(l);
    free(prompt);
    free(want);
}
END_TEST

/* Past max_seq only the last max_seq tokens count: a long prompt gives what its tail does. */
START_TEST(test_long_prompt)
{
    const fix_model *m = &MODELS[0];
    nnt_layer *l = load(m, WINDOW, 1, WINDOW, &TILINGS[1]);
    int32_t prompt[13], a[10], b[10];
    for (int i = 0; i < 13; i++)
        prompt[i] = (int32_t)((i * 17 + 3) % m->V);
    EXPECT_OK(nnt_model_generate(l, prompt, 13, 10, NULL, a));
    EXPECT_OK(nnt_model_generate(l, prompt + 13 - WINDOW, WINDOW, 10, NULL, b));
    expect_ids(a, b, 10, "13-token prompt vs its last 8");
    prompt[0] = (int32_t)((prompt[0] + 1) % m->V);   /* outside every window */
    EXPECT_OK(nnt_model_generate(l, prompt, 13, 10, NULL, b));
    expect_ids(a, b, 10, "a change before the window");
    nnt_layer_destroy(l);
}
END_TEST

/* ---- sampling ------------------------------------------------------------------------------ */

START_TEST(test_sampling)
{
    const fix_model *m = &MODELS[0];
    int32_t *prompt = read_ids(m, "prompt", NPROMPT), *greedy = read_ids(m, "greedy", NGEN);
    nnt_layer *l = load(m, MAXPOS, 1, NPROMPT + NGEN, NULL);
    nnt_sampling s = NNT_SAMPLING_INIT;
    int32_t a[NGEN], b[NGEN];
    s.temperature = 1.0;
    s.top_k = 0;
    s.seed = 11;
    EXPECT_OK(nnt_model_generate(l, prompt, NPROMPT, NGEN, &s, a));
    EXPECT_OK(nnt_model_generate(l, prompt, NPROMPT, NGEN, &s, b));
    expect_ids(b, a, NGEN, "the same seed");
    ck_assert_msg(!same_ids(a, greedy, NGEN), "temperature 1 over all tokens gave the greedy "
                  "tokens");
    int differ = 0;
    for (uint64_t seed = 12; seed < 16; seed++) {
        s.seed = seed;
        EXPECT_OK(nnt_model_generate(l, prompt, NPROMPT, NGEN, &s, b));
        differ += !same_ids(a, b, NGEN);
    }
    ck_assert_msg(differ == 4, "only %d of 4 other seeds gave other tokens", differ);
    s.top_k = 1;
    EXPECT_OK(nnt_model_generate(l, prompt, NPROMPT, NGEN, &s, b));
    expect_ids(b, greedy, NGEN, "top_k 1");
    s.top_k = 5;
    s.temperature = 0.0;
    EXPECT_OK(nnt_model_generate(l, prompt, NPROMPT, NGEN, &s, b));
    expect_ids(b, greedy, NGEN, "temperature 0");
    nnt_layer_destroy(l);
    free(prompt);
    free(greedy);
}
END_TEST

/* ---- repetition penalty, n-gram bans and the warpers against transformers' processors ---- */

/* tests/fixtures/llama_tiny/sampling.safetensors (tests/gen_sampling_fixtures.py) */
enum { SV = 300 };

/* NoRepeatNGramLogitsProcessor's bans (proc.ngram<N>) after each prefix of proc.ngram_seq,
 * the prefix split as all prompt and as one prompt token and the rest generated: the banned
 * tokens -inf in nnt_sampler_penalize's logits, every other logit unchanged */
static void sampler_ngram_hf(nnt_st_reader *r)
{
    int64_t nseq = 0, nlen = 0;
    int32_t *seq = fixture_read_n(r, "proc.ngram_seq", NNT_IO_I32, &nseq);
    int32_t *lens = fixture_read_n(r, "proc.ngram_len", NNT_IO_I32, &nlen);
    float logits[SV];
    for (int v = 0; v < SV; v++)
        logits[v] = (float)((v * 37) % 23) - 11.0f;
    int banned_somewhere = 0;
    for (int n = 1; n <= 4; n++) {
        char name[32];
        snprintf(name, sizeof name, "proc.ngram%d", n);
        int32_t *want = fixture_read(r, name, NNT_IO_I32, NULL);
        nnt_sampler sm;
        EXPECT_OK(nnt_sampler_init(&sm, ctx, "test", SV, 1.0, 0));
        sm.no_repeat_ngram = n;
        for (int64_t p = 0; p < nlen * 2; p++) {
            const int64_t len = lens[p / 2], np = p % 2 ? 1 : len;
            const nnt_sample_seq q = {seq, np, seq + np, len - np};
            const float *got = nnt_sampler_penalize(&sm, logits, &q);
            ck_assert_ptr_nonnull(got);
            for (int v = 0; v < SV; v++) {
                const int ban = want[p / 2 * SV + v];
                ck_assert_msg(ban ? got[v] == -INFINITY : got[v] == logits[v],
                              "no_repeat_ngram_size %d after %lld tokens (%lld of them the "
                              "prompt): token %d %s, transformers %s it", n, (long long)len,
                              (long long)np, v, got[v] == -INFINITY ? "banned" : "not banned",
                              ban ? "bans" : "does not ban");
                banned_somewhere += ban;
            }
        }
        nnt_sampler_free(&sm);
        free(want);
    }
    ck_assert_int_gt(banned_somewhere, 40);
    free(seq), free(lens);
}

/* RepetitionPenaltyLogitsProcessor of 1.3 and 0.8 on logits on a grid (ties, zeros, both
 * signs) for a sequence with repeats, split as prompt and generated tokens several ways: the
 * same bits (a float multiply or divide per token seen, once however often it is seen); a
 * sampler penalizing again gives them again. NoRepeatNGramLogitsProcessor of sizes 1 to 4
 * after 12 prefixes of a sequence of 5 distinct ids, split as prompt and generated tokens two
 * ways: the same tokens banned (-inf), the others' logits as they were. Then the candidates
 * transformers' temperature, top_k, top_p, min_p, typical, epsilon and eta warpers leave, in
 * generate's order, for 20 settings: the same set. */
START_TEST(test_sampler_hf)
{
    nnt_st_reader *r = open_fixture("sampling.safetensors");
    int64_t nv = 0, nids = 0;
    float *logits = fixture_read_n(r, "proc.logits", NNT_IO_F32, &nv);
    int32_t *ids = fixture_read_n(r, "proc.ids", NNT_IO_I32, &nids);
    ck_assert_int_eq(nv, SV);
    static const int penalties[2] = {130, 80};
    for (int pi = 0; pi < 2; pi++) {
        char name[32];
        snprintf(name, sizeof name, "proc.rep%d", penalties[pi]);
        float *want = fixture_read(r, name, NNT_IO_F32, NULL);
        nnt_sampler sm;
        EXPECT_OK(nnt_sampler_init(&sm, ctx, "test", SV, 1.0, 0));
        sm.repetition_penalty = penalties[pi] / 100.0;
        const int64_t splits[3] = {nids, 23, 1};
        for (int si = 0; si < 3 * 2; si++) {   /* each split twice: the stamps start over */
            const nnt_sample_seq q = {ids, splits[si / 2], ids + splits[si / 2],
                                      nids - splits[si / 2]};
            const float *got = nnt_sampler_penalize(&sm, logits, &q);
            ck_assert_ptr_nonnull(got);
            for (int v = 0; v < SV; v++)
                ck_assert_msg(memcmp(&got[v], &want[v], sizeof *got) == 0, "repetition_penalty "
                              "%g, prompt %lld: token %d: %.9g, transformers' %.9g",
                              sm.repetition_penalty, (long long)splits[si / 2], v,
                              (double)got[v], (double)want[v]);
        }
        nnt_sampler_free(&sm);
        free(want);
    }
    free(logits), free(ids);
    sampler_ngram_hf(r);
    int64_t nparams = 0;
    float *wl = fixture_read_n(r, "warp.logits", NNT_IO_F32, &nv);
    double *params = fixture_read_n(r, "warp.params", NNT_IO_F64, &nparams);
    int32_t *kept = fixture_read(r, "warp.kept", NNT_IO_I32, NULL);
    int min_p_cuts = 0, typical_cuts = 0, epsilon_cuts = 0, eta_cuts = 0;
    for (int64_t c = 0; c < nparams / 7; c++) {
        const double *pc = params + 7 * c;
        nnt_sampler sm;
        EXPECT_OK(nnt_sampler_init(&sm, ctx, "test", SV, pc[0], (int64_t)pc[1]));
        sm.top_p = pc[2];
        sm.min_p = pc[3];
        sm.typical_p = pc[4];
        sm.epsilon_cutoff = pc[5];
        sm.eta_cutoff = pc[6];
        double max = wl[0];
        for (int v = 1; v < SV; v++)
            max = fmax(max, wl[v]);
        int64_t k = nnt_sampler_candidates(&sm, wl, &max);
        ck_assert_int_gt(k, 0);
        int32_t mask[SV] = {0};
        for (int64_t j = 0; j < k; j++)
            mask[sm.cand[j].id] = 1;
        int64_t hf = 0;
        for (int v = 0; v < SV; v++) {
            hf += kept[c * SV + v];
            ck_assert_msg(mask[v] == kept[c * SV + v], "temperature %g top_k %g top_p %g min_p "
                          "%g typical_p %g epsilon_cutoff %g eta_cutoff %g: token %d %s, "
                          "transformers %s it (%lld candidates, %lld there)", pc[0], pc[1],
                          pc[2], pc[3], pc[4], pc[5], pc[6], v, mask[v] ? "kept" : "dropped",
                          kept[c * SV + v] ? "keeps" : "drops", (long long)k, (long long)hf);
        }
        double top = -INFINITY;   /* *max: the largest logit of the candidates */
        for (int64_t j = 0; j < k; j++)
            top = fmax(top, sm.cand[j].logit);
        ck_assert_msg(max == top, "case %lld: max %g, the candidates' %g", (long long)c, max,
                      top);
        min_p_cuts += pc[3] > 0.0 && pc[3] < 1.0;
        typical_cuts += pc[4] < 1.0;
        epsilon_cuts += pc[5] > 0.0;
        eta_cuts += pc[6] > 0.0;
        nnt_sampler_free(&sm);
    }
    ck_assert_int_ge(min_p_cuts, 5);
    ck_assert(typical_cuts >= 5 && epsilon_cuts >= 3 && eta_cuts >= 4);
    free(wl), free(params), free(kept);
    nnt_st_close(r);
}
END_TEST

/* Greedy generation with a repetition penalty (1.3 on gqa, 0.8 on qwen3: tokens discouraged
 * and encouraged) against transformers' generate(repetition_penalty=...), which differs from
 * plain greedy decoding in both; then no_repeat_ngram_size 2 on gqa, 3 with the penalty of
 * 0.8 on qwen3 (generate(no_repeat_ngram_size=...)); one sequence with the cache, without
 * it, two side by side (generate_n), and beside another prompt (generate_batch), _i = bans *
 * 4 + model * 2 + tiling. */
START_TEST(test_repetition_penalty_hf)
{
    const fix_model *m = &MODELS[_i / 2 % 2 ? 2 : 0];
    const int bans = _i >= 4;
    const char *kind = bans ? "ngram" : "rep";
    nnt_st_reader *r = open_fixture("sampling.safetensors");
    char name[64];
    snprintf(name, sizeof name, "%s.rep_prompt", m->name);
    int32_t *prompt = fixture_read(r, name, NNT_IO_I32, NULL);
    snprintf(name, sizeof name, "%s.%s_greedy", m->name, kind);
    int32_t *want = fixture_read(r, name, NNT_IO_I32, NULL);
    snprintf(name, sizeof name, "%s.%s_margin", m->name, kind);
    float *margin = fixture_read(r, name, NNT_IO_F32, NULL), least = INFINITY;
    for (int i = 0; i < NGEN; i++)
        least = fminf(least, margin[i]);
    snprintf(name, sizeof name, "%s.rep_greedy", m->name);
    int32_t *penalized = fixture_read(r, name, NNT_IO_I32, NULL);
    nnt_st_close(r);
    int32_t *greedy = read_ids(m, "greedy", NGEN), got[2 * NGEN];
    if (!bans)
        penalized[0] = -1;   /* (the check below is the bans' alone) */
    ck_assert_msg(!same_ids(want, greedy, NGEN), "the fixture's %s changes nothing", kind);
    ck_assert_msg(!same_ids(want, penalized, NGEN), "the fixture's bans change nothing "
                  "against the penalty alone");
    nnt_layer *l = load(m, MAXPOS, 1, NPROMPT + NGEN, &TILINGS[_i % 2 ? 1 : 0]);
    nnt_sampling s = NNT_SAMPLING_INIT;
    s.temperature = 0.0;
    s.repetition_penalty = m == &MODELS[0] ? (bans ? 1.0 : 1.3) : 0.8;
    s.no_repeat_ngram_size = bans ? (m == &MODELS[0] ? 2 : 3) : 0;
    char label[96];
    for (int way = 0; way < 3; way++) {
        s.no_cache = way == 1;
        if (way < 2)
            EXPECT_OK(nnt_model_generate(l, prompt, NPROMPT, NGEN, &s, got));
        else
            EXPECT_OK(nnt_model_generate_n(l, prompt, NPROMPT, 2, NGEN, &s, got));
        for (int q = 0; q < (way == 2 ? 2 : 1); q++) {
            snprintf(label, sizeof label, "%s repetition_penalty %g no_repeat_ngram_size %lld "
                     "%s %d", m->name, s.repetition_penalty, (long long)s.no_repeat_ngram_size,
                     way == 0 ? "cache" : way == 1 ? "no cache" : "n", q);
            expect_ids(got + q * NGEN, want, NGEN, label);
        }
    }
    /* side by side with another prompt of another length (padded on the left inside): each
     * row penalized by its own sequence, as when alone */
    const int32_t other[3] = {7, 7, 30}, *prompts[2] = {other, prompt};
    const int64_t lens[2] = {3, NPROMPT};
    int32_t alone[NGEN];
    EXPECT_OK(nnt_model_generate(l, other, 3, NGEN, &s, alone));
    EXPECT_OK(nnt_model_generate_batch(l, 2, prompts, lens, NULL, NGEN, &s, got));
    expect_ids(got, alone, NGEN, "batch: the other prompt as alone");
    expect_ids(got + NGEN, want, NGEN, "batch: transformers' ids");
    printf("test_model_generate %s repetition_penalty %g no_repeat_ngram_size %lld tiling %d: "
           "%d tokens equal transformers' (smallest margin %.2e)\n", m->name,
           s.repetition_penalty, (long long)s.no_repeat_ngram_size, _i % 2, NGEN,
           (double)least);
    nnt_layer_destroy(l);
    free(prompt), free(want), free(margin), free(greedy), free(penalized);
}
END_TEST

/* ---- the GPT-2 path -------------------------------------------------------------------------- */

START_TEST(test_gpt2_path)
{
    nnt_model_config c = NNT_MODEL_CONFIG_INIT;
    c.vocab = 67;
    c.max_seq = 16;
    c.layers = 2;
    c.heads = 3;
    c.channels = 24;
    nnt_layer *l = NULL;
    EXPECT_OK(nnt_model_create(ctx, &c, 2, 12, NULL, &l));
    nnt_layer_kind kind;
    EXPECT_OK(nnt_layer_kind_of(l, &kind));
    ck_assert_int_eq(kind, NNT_LAYER_GPT);
    EXPECT_OK(nnt_layer_init(l, 5));
    int32_t prompt[3] = {1, 40, 7}, a[NGEN], b[NGEN];   /* 23 tokens: slides past T 12 */
    nnt_sampling s = NNT_SAMPLING_INIT;
    s.top_k = 5;
    s.seed = 3;
    const nnt_sampling *ss[2] = {NULL, &s};
    for (int i = 0; i < 2; i++) {
        EXPECT_OK(nnt_model_generate(l, prompt, 3, NGEN, ss[i], a));
        EXPECT_OK(nnt_gpt_generate(l, prompt, 3, NGEN, ss[i], b));
        expect_ids(a, b, NGEN, i ? "gpt2 sampled" : "gpt2 greedy");
    }
    s.temperature = -1.0;
    EXPECT_FAIL_MSG(nnt_model_generate(l, prompt, 3, NGEN, &s, a), NNT_E_INVAL,
                    "nnt_model_generate: temperature");
    nnt_layer_destroy(l);
}
END_TEST

/* nnt_model_generate_text: a model of 300 ids with the byte tokenizer (256): the same tokens
 * as nnt_model_generate on the prompt's bytes, the runs of byte ids decoded, the others as
 * "<id>"; an empty prompt and NULLs refused. */
START_TEST(test_generate_text)
{
    nnt_model_config c = NNT_MODEL_CONFIG_INIT;
    c.vocab = 300, c.max_seq = 32, c.layers = 1, c.heads = 2, c.channels = 16;
    nnt_layer *l = NULL;
    nnt_tokenizer *tok = NULL;
    EXPECT_OK(nnt_model_create(ctx, &c, 1, 32, NULL, &l));
    EXPECT_OK(nnt_layer_init(l, 11));
    EXPECT_OK(nnt_tokenizer_bytes_create(&tok));
    nnt_sampling s = NNT_SAMPLING_INIT;
    s.top_k = 0, s.seed = 9;   /* near-uniform logits: ids >= 256 among the 24 */
    int32_t ids[3 + 24] = {'A', 'b', '\n'};
    EXPECT_OK(nnt_model_generate(l, ids, 3, 24, &s, ids + 3));
    char want[512], *text = NULL;
    size_t n = 0, len = 0;
    int above = 0;
    for (int i = 0; i < 27; i++) {
        above += ids[i] >= 256;
        if (ids[i] >= 256)
            n += (size_t)snprintf(want + n, sizeof want - n, "<%d>", (int)ids[i]);
        else
            want[n++] = (char)ids[i];
    }
    ck_assert_msg(above > 0 && above < 24, "%d ids of 24 above the bytes", above);
    EXPECT_OK(nnt_model_generate_text(l, tok, "Ab\n", 24, &s, &text, &len));
    ck_assert_ptr_nonnull(text);
    ck_assert_uint_eq(len, n);
    ck_assert_mem_eq(text, want, n);
    ck_assert_int_eq(text[n], '\0');
    free(text);
    text = (char *)1;
    EXPECT_FAIL_MSG(nnt_model_generate_text(l, tok, "", 4, &s, &text, NULL), NNT_E_INVAL,
                    "gives no token");
    ck_assert_ptr_null(text);
    EXPECT_RC(nnt_model_generate_text(l, NULL, "A", 4, &s, &text, NULL), NNT_E_INVAL);
    EXPECT_RC(nnt_model_generate_text(l, tok, "A", 4, &s, NULL, NULL), NNT_E_INVAL);
    nnt_tokenizer_destroy(tok);
    nnt_layer_destroy(l);
}
END_TEST

/* ---- training state ---------------------------------------------------------------------- */

/* Every parameter's value (grad 0) or gradient (grad 1), concatenated (malloc'd). */
static float *snapshot(nnt_layer *l, int grad, int64_t *total)
{
    int64_t count = 0, numel = 0, at = 0;
    EXPECT_OK(nnt_layer_num_params(l, &count, &numel));
    float *all = malloc((size_t)numel * sizeof *all);
    ck_assert_ptr_nonnull(all);
    for (int64_t i = 0; i < count; i++) {
        nnt_param_info p = test_param_at(l, i);
        int64_t n = 0;
        EXPECT_OK(nnt_tensor_numel(p.value, &n));
        EXPECT_OK(nnt_tensor_copy_to_host(grad ? p.grad : p.value, all + at,
                                          (size_t)n * sizeof *all));
        at += n;
    }
    *total = numel;
    return all;
}

static nnt_tensor *ids_tensor(const int32_t *ids)
{
    int64_t shape[2] = {B, T};
    nnt_tensor *x = NULL;
    EXPECT_OK(nnt_tensor_create(ctx, NNT_INT32, 2, shape, shape, &x));
    EXPECT_OK(nnt_tensor_copy_from_host(x, ids, sizeof(int32_t) * B * T));
    return x;
}

static double train_step(nnt_layer *l, nnt_tensor *x)
{
    double loss = 0.0;
    EXPECT_OK(nnt_layer_zero_grad(l));
    EXPECT_OK(nnt_layer_forward(l, x, NULL));
    EXPECT_OK(nnt_layer_loss(l, &loss));
    EXPECT_OK(nnt_layer_backward(l, NULL, NULL));
    return loss;
}

/* _i = model */
START_TEST(test_training_state)
{
    const fix_model *m = &MODELS[_i];
    char file[64];
    snprintf(file, sizeof file, "%s.reference.safetensors", m->name);
    nnt_st_reader *r = open_fixture(file);
    int32_t *tok = fixture_read(r, "tokens", NNT_IO_I32, NULL);
    int32_t *tgt = fixture_read(r, "targets", NNT_IO_I32, NULL);
    float *want = fixture_read(r, "loss", NNT_IO_F32, NULL);
    nnt_st_close(r);
    nnt_layer *l = load(m, MAXPOS, B, T, &TILINGS[1]);
    nnt_tensor *x = ids_tensor(tok), *y = ids_tensor(tgt);
    EXPECT_OK(nnt_layer_set_targets(l, y));
    double before = train_step(l, x);
    ck_assert_msg(fabs(before - want[0]) < 1e-5 * want[0], "loss %.9g, fixture %.9g", before,
                  (double)want[0]);
    int64_t np = 0, ng = 0;
    float *p0 = snapshot(l, 0, &np), *g0 = snapshot(l, 1, &ng);
    EXPECT_OK(nnt_layer_forward(l, x, NULL));   /* pending: generation cancels it */
    int32_t prompt[3] = {1, 2, 3}, out[NGEN];
    EXPECT_OK(nnt_model_generate(l, prompt, 3, NGEN, NULL, out));
    EXPECT_FAIL_MSG(nnt_layer_backward(l, NULL, NULL), NNT_E_STATE, "nnt_layer_backward");
    float *p1 = snapshot(l, 0, &np), *g1 = snapshot(l, 1, &ng);
    ck_assert_msg(memcmp(p0, p1, (size_t)np * sizeof *p0) == 0, "parameters changed");
    ck_assert_msg(memcmp(g0, g1, (size_t)ng * sizeof *g0) == 0, "gradients changed");
    /* the targets are still set: the same step again */
    double after = train_step(l, x);
    float *g2 = snapshot(l, 1, &ng);
    ck_assert_msg(after == before, "loss %.9g after generation, %.9g before", after, before);
    ck_assert_msg(memcmp(g0, g2, (size_t)ng * sizeof *g0) == 0, "gradients after generation "
                  "differ");
    free(p0);
    free(p1);
    free(g0);
    free(g1);
    free(g2);
    free(tok);
    free(tgt);
    free(want);
    nnt_tensor_destroy(x);
    nnt_tensor_destroy(y);
    nnt_layer_destroy(l);
}
END_TEST

/* ---- the key/value cache ------------------------------------------------------------------ */

/* 48 greedy tokens (the cache holds up to 53 positions) against transformers, with and
 * without the cache. _i = model * 3 + tiling */
START_TEST(test_greedy_hf_long)
{
    const fix_model *m = &MODELS[_i / 3];
    int ti = _i % 3;
    int32_t *prompt = read_ids(m, "prompt", NPROMPT), *want = read_ids(m, "greedy_long", NGEN_LONG);
    int32_t got[NGEN_LONG];
    nnt_layer *l = load(m, MAXPOS, 1, NPROMPT + NGEN_LONG, &TILINGS[ti]);
    nnt_sampling s = NNT_SAMPLING_INIT;
    s.temperature = 0.0;
    char label[64];
    for (int no_cache = 0; no_cache < 2; no_cache++) {
        s.no_cache = no_cache;
        EXPECT_OK(nnt_model_generate(l, prompt, NPROMPT, NGEN_LONG, &s, got));
        snprintf(label, sizeof label, "%s greedy_long tiling %d%s", m->name, ti,
                 no_cache ? " no_cache" : "");
        expect_ids(got, want, NGEN_LONG, label);
    }
    printf("test_model_generate %s: %d tokens equal with and without the cache\n", label,
           NGEN_LONG);
    nnt_layer_destroy(l);
    free(prompt);
    free(want);
}
END_TEST

enum { KV_WINDOW = 24, KV_NGEN = 40 };   /* 5 + 40 tokens: the window slides after 24 */

/* A random GPT-2 (model 0) or the GQA fixture model (untied, GQA; model 1), window 24. */
static nnt_layer *kv_model(int model, const nnt_tiling *tl, int64_t *V)
{
    if (model == 1) {
        *V = MODELS[0].V;
        return load(&MODELS[0], KV_WINDOW, 1, KV_WINDOW, tl);
    }
    nnt_model_config c = NNT_MODEL_CONFIG_INIT;
    c.vocab = *V = 67;
    c.max_seq = KV_WINDOW;
    c.layers = 2;
    c.heads = 3;
    c.channels = 24;
    nnt_layer *l = NULL;
    EXPECT_OK(nnt_model_create(ctx, &c, 1, KV_WINDOW, tl, &l));
    EXPECT_OK(nnt_layer_init(l, 9));
    return l;
}

/* Measured (max over models, tilings, greedy and sampled): 6.0e-7 within the window (the
 * one-row products of the decode steps round differently: BLIS's gemv); once it slides 0
 * (the same forwards). */
#define KV_LOGIT_TOL 1e-5

/* Cached against uncached, greedy and sampled. _i = model * 3 + tiling */
START_TEST(test_cache_equals_no_cache)
{
    int model = _i / 3, ti = _i % 3;
    int64_t V = 0;
    nnt_layer *l = kv_model(model, &TILINGS[ti], &V);
    const int32_t prompt[NPROMPT] = {1, 40, 7, 3, 22};
    int32_t a[KV_NGEN], b[KV_NGEN];
    float *la = malloc((size_t)(KV_NGEN * V) * sizeof *la);
    float *lb = malloc((size_t)(KV_NGEN * V) * sizeof *lb);
    nnt_sampling s = NNT_SAMPLING_INIT;
    s.top_k = 0;
    s.seed = 5;
    for (int sampled = 0; sampled < 2; sampled++) {
        s.temperature = sampled ? 1.0 : 0.0;
        s.no_cache = 0;
        EXPECT_OK(nnt_model_generate_trace(l, "test", prompt, NPROMPT, KV_NGEN, &s, a, la));
        s.no_cache = 1;
        EXPECT_OK(nnt_model_generate_trace(l, "test", prompt, NPROMPT, KV_NGEN, &s, b, lb));
        char label[64];
        snprintf(label, sizeof label, "%s %s tiling %d", model ? "gqa" : "gpt2",
                 sampled ? "sampled" : "greedy", ti);
        expect_ids(a, b, KV_NGEN, label);
        double within = 0, after = 0;
        for (int64_t i = 0; i < KV_NGEN; i++)
            for (int64_t v = 0; v < V; v++) {
                double d = fabs((double)la[i * V + v] - lb[i * V + v]);
                if (NPROMPT + i <= KV_WINDOW)
                    within = fmax(within, d);
                else
                    after = fmax(after, d);
            }
        EXPECT_TOL(within, KV_LOGIT_TOL, "%s: logits with and without the cache", label);
        ck_assert_msg(after == 0.0, "%s: logits differ by %g once the window slides", label,
                      after);
        printf("test_model_generate cache %s: %d tokens equal; max |logit difference| %.2e "
               "within the window, %.2e after\n", label, KV_NGEN, within, after);
    }
    free(la);
    free(lb);
    nnt_layer_destroy(l);
}
END_TEST

/* The settings of case c of test_sampling_replay into s and sm (c 4: all of them) */
static void replay_settings(int c, nnt_sampling *s, nnt_sampler *sm)
{
    s->typical_p = sm->typical_p = c == 0 || c == 4 ? 0.6 : 1.0;
    s->epsilon_cutoff = sm->epsilon_cutoff = c == 1 || c == 4 ? 0.02 : 0.0;
    s->eta_cutoff = sm->eta_cutoff = c == 2 || c == 4 ? 0.9 : 0.0;
    s->no_repeat_ngram_size = sm->no_repeat_ngram = c == 3 || c == 4 ? 1 : 0;
    s->repetition_penalty = sm->repetition_penalty = c == 4 ? 1.2 : 1.0;
}

/* Sampled generation (the GQA fixture, 40 tokens past its window) with typical_p, each
 * cutoff, n-gram bans and all of them with a repetition penalty: every token is the one a
 * sampler with those settings picks from the step's logits (traced), the sequence so far
 * and the seed's generator; a sampler without the setting picks otherwise somewhere (the
 * setting reached the picks). */
START_TEST(test_sampling_replay)
{
    int64_t V = 0;
    nnt_layer *l = kv_model(1, &TILINGS[1], &V);
    const int32_t prompt[NPROMPT] = {1, 40, 7, 3, 22};
    int32_t got[KV_NGEN];
    float *logits = malloc((size_t)(KV_NGEN * V) * sizeof *logits);
    for (int c = 0; c < 5; c++) {
        nnt_sampling s = NNT_SAMPLING_INIT;
        s.top_k = 0, s.temperature = 1.3, s.seed = 21 + (uint64_t)c;
        nnt_sampler with, without;
        EXPECT_OK(nnt_sampler_init(&with, ctx, "test", V, s.temperature, 0));
        EXPECT_OK(nnt_sampler_init(&without, ctx, "test", V, s.temperature, 0));
        replay_settings(c, &s, &with);
        EXPECT_OK(nnt_model_generate_trace(l, "test", prompt, NPROMPT, KV_NGEN, &s, got,
                                           logits));
        uint64_t rw[4], ro[4];
        nnt_sampler_seed(rw, s.seed);
        nnt_sampler_seed(ro, s.seed);
        int differ = 0;
        for (int64_t i = 0; i < KV_NGEN; i++) {
            const nnt_sample_seq q = {prompt, NPROMPT, got, i};
            int32_t tw = -1, to = -1;
            EXPECT_OK(nnt_sampler_pick(&with, ctx, "test", logits + i * V, &q, rw, &tw));
            EXPECT_OK(nnt_sampler_pick(&without, ctx, "test", logits + i * V, &q, ro, &to));
            ck_assert_msg(tw == got[i], "case %d token %lld: generate %d, the sampler %d", c,
                          (long long)i, (int)got[i], (int)tw);
            differ += to != tw;
        }
        ck_assert_msg(differ > 0, "case %d: the setting changes no token", c);
        printf("test_model_generate replay case %d: %d tokens as the sampler's; %d of them "
               "otherwise without the setting\n", c, KV_NGEN, differ);
        nnt_sampler_free(&with);
        nnt_sampler_free(&without);
    }
    /* no_repeat_ngram_size 1 bans every token seen: past V tokens none is left (greedy) */
    nnt_sampling s = NNT_SAMPLING_INIT;
    s.temperature = 0.0, s.no_repeat_ngram_size = 1;
    int32_t *many = malloc((size_t)V * sizeof *many);
    EXPECT_FAIL_MSG(nnt_model_generate(l, prompt, NPROMPT, V, &s, many), NNT_E_STATE,
                    "nnt_model_generate: no_repeat_ngram_size 1 bans every token");
    free(many);
    free(logits);
    nnt_layer_destroy(l);
}
END_TEST

/* What on_token saw: the tokens in order, and whether each index came in turn. */
typedef struct seen {
    int32_t ids[64];
    int n, out_of_order;
} seen;

static void record_token(void *arg, int64_t i, int32_t token)
{
    seen *w = arg;
    if (i != w->n || w->n >= 64)
        w->out_of_order = 1;
    else
        w->ids[w->n++] = token;
}

START_TEST(test_top_p_eos)
{
    const fix_model *m = &MODELS[0];
    int32_t *prompt = read_ids(m, "prompt", NPROMPT), *greedy = read_ids(m, "greedy", NGEN);
    nnt_layer *l = load(m, MAXPOS, 1, NPROMPT + NGEN, NULL);
    nnt_sampling s = NNT_SAMPLING_INIT;
    int32_t a[NGEN], b[NGEN];
    s.top_k = 0;
    s.seed = 11;
    s.top_p = 1e-9;   /* the nucleus is the best token */
    EXPECT_OK(nnt_model_generate(l, prompt, NPROMPT, NGEN, &s, a));
    expect_ids(a, greedy, NGEN, "top_p 1e-9");
    s.top_p = 1.0;   /* all: plain sampling, which is not greedy here (test_sampling) */
    EXPECT_OK(nnt_model_generate(l, prompt, NPROMPT, NGEN, &s, a));
    s.top_p = 0.999999;
    EXPECT_OK(nnt_model_generate(l, prompt, NPROMPT, NGEN, &s, b));
    ck_assert_msg(!same_ids(a, greedy, NGEN), "top_p 1 gave the greedy tokens");
    /* eos: greedy until the 4th token, then eos everywhere */
    s.temperature = 0.0;
    s.eos = greedy[3];
    EXPECT_OK(nnt_model_generate(l, prompt, NPROMPT, NGEN, &s, a));
    int first = 0;
    while (greedy[first] != s.eos)
        first++;
    expect_ids(a, greedy, first + 1, "eos: up to the first eos");
    for (int i = first + 1; i < NGEN; i++)
        ck_assert_msg(a[i] == s.eos, "eos: token %d is %d, not eos %d", i, (int)a[i],
                      (int)s.eos);
    /* on_token: every new token in order as it is chosen, the eos token the last call */
    seen w = {{0}, 0, 0};
    s.on_token = record_token;
    s.on_token_arg = &w;
    EXPECT_OK(nnt_model_generate(l, prompt, NPROMPT, NGEN, &s, a));
    ck_assert_msg(!w.out_of_order && w.n == first + 1, "on_token with eos: %d calls, want %d",
                  w.n, first + 1);
    expect_ids(w.ids, a, first + 1, "on_token with eos");
    /* eos_ids: the first of the list met stops, the rest is that id */
    s.eos = -1;
    s.on_token = NULL;
    int32_t list[3] = {(int32_t)m->V - 1, greedy[5], greedy[2]};
    int stop = 0;
    while (greedy[stop] != greedy[5] && greedy[stop] != greedy[2])
        stop++;
    for (int i = 0; i < 3; i++)   /* (greedy never picks V - 1 before its stop here) */
        ck_assert_msg(greedy[i] != list[0], "the fixture's greedy token %d is V - 1", i);
    s.eos_ids = list;
    s.n_eos_ids = 3;
    EXPECT_OK(nnt_model_generate(l, prompt, NPROMPT, NGEN, &s, a));
    expect_ids(a, greedy, stop + 1, "eos_ids: up to the first of them");
    for (int i = stop + 1; i < NGEN; i++)
        ck_assert_msg(a[i] == greedy[stop], "eos_ids: token %d is %d, not %d", i, (int)a[i],
                      (int)greedy[stop]);
    s.eos = greedy[0];   /* with eos too: the earlier stop */
    EXPECT_OK(nnt_model_generate(l, prompt, NPROMPT, NGEN, &s, a));
    ck_assert_int_eq(a[1], greedy[0]);
    s.eos = -1;
    s.n_eos_ids = 0;
    s.on_token = record_token;
    w.n = 0;
    EXPECT_OK(nnt_model_generate(l, prompt, NPROMPT, NGEN, &s, a));
    ck_assert_msg(!w.out_of_order && w.n == NGEN, "on_token: %d calls, want %d", w.n, NGEN);
    expect_ids(w.ids, greedy, NGEN, "on_token");
    /* the 0.2 size: greedy as before */
    s = (nnt_sampling)NNT_SAMPLING_INIT;
    s.temperature = 0.0;
    s.eos = 1;   /* beyond the 0.2 size: not read */
    s.size = offsetof(nnt_sampling, top_p);
    EXPECT_OK(nnt_model_generate(l, prompt, NPROMPT, NGEN, &s, a));
    expect_ids(a, greedy, NGEN, "the 0.2 size");
    const char *fn = "nnt_model_generate";
    s = (nnt_sampling)NNT_SAMPLING_INIT;
    double bad_p[3] = {0.0, 1.5, NAN};
    for (int i = 0; i < 3; i++) {
        s.top_p = bad_p[i];
        EXPECT_FAIL_MSG(nnt_model_generate(l, prompt, NPROMPT, 4, &s, a), NNT_E_INVAL,
                        "nnt_model_generate: top_p");
    }
    s.top_p = 1.0;
    s.eos = (int32_t)m->V;
    EXPECT_FAIL_MSG(nnt_model_generate(l, prompt, NPROMPT, 4, &s, a), NNT_E_INVAL,
                    "nnt_model_generate: eos 61 must be -1 (none) or in [0, 61)");
    s.eos = -2;
    EXPECT_FAIL_MSG(nnt_model_generate(l, prompt, NPROMPT, 4, &s, a), NNT_E_INVAL, fn);
    s.eos = -1;
    int32_t bad_ids[2] = {3, (int32_t)m->V};
    s.eos_ids = bad_ids;
    s.n_eos_ids = 2;
    EXPECT_FAIL_MSG(nnt_model_generate(l, prompt, NPROMPT, 4, &s, a), NNT_E_INVAL,
                    "nnt_model_generate: eos_ids[1] 61 must be in [0, 61)");
    s.eos_ids = NULL;
    EXPECT_FAIL_MSG(nnt_model_generate(l, prompt, NPROMPT, 4, &s, a), NNT_E_INVAL,
                    "eos_ids: NULL with n_eos_ids > 0");
    s.n_eos_ids = -1;
    EXPECT_FAIL_MSG(nnt_model_generate(l, prompt, NPROMPT, 4, &s, a), NNT_E_INVAL,
                    "n_eos_ids is negative");
    /* the size before eos_ids: not read */
    s = (nnt_sampling)NNT_SAMPLING_INIT;
    s.temperature = 0.0;
    s.eos_ids = bad_ids;
    s.n_eos_ids = 2;
    s.size = offsetof(nnt_sampling, eos_ids);
    EXPECT_OK(nnt_model_generate(l, prompt, NPROMPT, NGEN, &s, a));
    expect_ids(a, greedy, NGEN, "the size before eos_ids");
    /* 0.3's last size, before repetition_penalty: not read (a penalty of 1.3 would change
     * gqa's greedy tokens: test_repetition_penalty_hf) */
    s = (nnt_sampling)NNT_SAMPLING_INIT;
    s.temperature = 0.0;
    s.repetition_penalty = 1.3;
    s.min_p = 7.0;
    s.size = offsetof(nnt_sampling, repetition_penalty);
    EXPECT_OK(nnt_model_generate(l, prompt, NPROMPT, NGEN, &s, a));
    expect_ids(a, greedy, NGEN, "the size before repetition_penalty");
    s.size = sizeof s;
    EXPECT_FAIL_MSG(nnt_model_generate(l, prompt, NPROMPT, 4, &s, a), NNT_E_INVAL,
                    "nnt_model_generate: min_p 7 must be in [0, 1]");
    s.min_p = 0.0;
    double bad_penalty[3] = {0.0, -1.0, INFINITY};
    for (int i = 0; i < 3; i++) {
        s.repetition_penalty = bad_penalty[i];
        EXPECT_FAIL_MSG(nnt_model_generate(l, prompt, NPROMPT, 4, &s, a), NNT_E_INVAL,
                        "nnt_model_generate: repetition_penalty");
        s.repetition_penalty = 1.0;
        const double bad_cut[3] = {-0.1, 1.0, NAN}, bad_typical[3] = {0.0, 1.5, NAN};
        s.typical_p = bad_typical[i];
        EXPECT_FAIL_MSG(nnt_model_generate(l, prompt, NPROMPT, 4, &s, a), NNT_E_INVAL,
                        "nnt_model_generate: typical_p");
        s.typical_p = 1.0;
        s.epsilon_cutoff = bad_cut[i];
        EXPECT_FAIL_MSG(nnt_model_generate(l, prompt, NPROMPT, 4, &s, a), NNT_E_INVAL,
                        "nnt_model_generate: epsilon_cutoff");
        s.epsilon_cutoff = 0.0;
        s.eta_cutoff = bad_cut[i];
        EXPECT_FAIL_MSG(nnt_model_generate(l, prompt, NPROMPT, 4, &s, a), NNT_E_INVAL,
                        "nnt_model_generate: eta_cutoff");
        s.eta_cutoff = 0.0;
        s.no_repeat_ngram_size = -1 - i;
        EXPECT_FAIL_MSG(nnt_model_generate(l, prompt, NPROMPT, 4, &s, a), NNT_E_INVAL,
                        "nnt_model_generate: no_repeat_ngram_size");
        s.no_repeat_ngram_size = 0;
    }
    nnt_layer_destroy(l);
    free(prompt);
    free(greedy);
}
END_TEST

/* nnt_model_hf_eos_ids: generation_config.json's eos_token_id (an id or a list) before
 * config.json's, then its text_config's; null or absent: none; bad values and no file refused */
static void write_file(const char *dir, const char *name, const char *text)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    fputs(text, f);
    ck_assert_int_eq(fclose(f), 0);
}

static void expect_eos(const char *dir, int64_t want_n, const int32_t *want)
{
    int32_t ids[4] = {-7, -7, -7, -7};
    int64_t n = -5;
    EXPECT_OK(nnt_model_hf_eos_ids(dir, ids, 2, &n));
    ck_assert_int_eq(n, want_n);
    for (int64_t i = 0; i < 4; i++)
        ck_assert_int_eq(ids[i], i < want_n && i < 2 ? want[i] : -7);
}

START_TEST(test_hf_eos_ids)
{
    char dir[] = "/tmp/test_eos-XXXXXX", path[512];
    ck_assert_ptr_nonnull(mkdtemp(dir));
    const char *fn = "nnt_model_hf_eos_ids";
    int64_t n = 0;
    EXPECT_FAIL_MSG(nnt_model_hf_eos_ids(dir, NULL, 0, &n), NNT_E_IO, "neither");
    write_file(dir, "config.json", "{\"eos_token_id\": 2, \"vocab_size\": 10}");
    expect_eos(dir, 1, (int32_t[]){2});
    write_file(dir, "generation_config.json", "{\"eos_token_id\": null}");
    expect_eos(dir, 1, (int32_t[]){2});   /* null: config.json's */
    write_file(dir, "generation_config.json", "{\"eos_token_id\": [1, 106, 7]}");
    expect_eos(dir, 3, (int32_t[]){1, 106});   /* 3 named, the first cap (2) written */
    EXPECT_OK(nnt_model_hf_eos_ids(dir, NULL, 0, &n));   /* the count alone */
    ck_assert_int_eq(n, 3);
    write_file(dir, "generation_config.json", "{\"eos_token_id\": []}");
    expect_eos(dir, 1, (int32_t[]){2});
    snprintf(path, sizeof path, "%s/generation_config.json", dir);
    unlink(path);
    write_file(dir, "config.json", "{\"text_config\": {\"eos_token_id\": [1, 106]}}");
    expect_eos(dir, 2, (int32_t[]){1, 106});   /* a multimodal Gemma 3's */
    write_file(dir, "config.json", "{\"vocab_size\": 10}");
    expect_eos(dir, 0, NULL);
    static const char *const BAD[] = {"{\"eos_token_id\": \"</s>\"}",
                                      "{\"eos_token_id\": -1}",
                                      "{\"eos_token_id\": [1, 2.5]}",
                                      "{\"eos_token_id\": 4294967296}",
                                      "{\"eos_token_id\": [1, 2}",
                                      "{\"eos_token_id\": 2.5}",
                                      "{\"eos_token_id\": 1e3}"};
    for (int i = 0; i < 7; i++) {
        write_file(dir, "config.json", BAD[i]);
        int rc = nnt_model_hf_eos_ids(dir, NULL, 0, &n);
        ck_assert_msg(rc == NNT_E_FORMAT, "%s: rc %d", BAD[i], rc);
        ck_assert_msg(strstr(nnt_ctx_last_error(NULL), "eos_token_id") != NULL ||
                      strstr(nnt_ctx_last_error(NULL), "config.json") != NULL,
                      "%s: '%s'", BAD[i], nnt_ctx_last_error(NULL));
    }
    EXPECT_FAIL_MSG(nnt_model_hf_eos_ids(NULL, NULL, 0, &n), NNT_E_INVAL, fn);
    EXPECT_FAIL_MSG(nnt_model_hf_eos_ids(dir, NULL, 2, &n), NNT_E_INVAL, "ids is NULL");
    EXPECT_FAIL_MSG(nnt_model_hf_eos_ids(dir, NULL, 0, NULL), NNT_E_INVAL, "n is NULL");
    snprintf(path, sizeof path, "rm -rf %s", dir);
    ck_assert_int_eq(system(path), 0);
}
END_TEST

/* nnt_model_hf_sampling: generation_config.json's temperature, top_k and top_p into the
 * fields it names (values off nnt's defaults, so that a field read as another would show),
 * the others kept; no file: nothing; out of range, wrong types and bad JSON refused naming
 * the file and key */
START_TEST(test_hf_sampling)
{
    char dir[] = "/tmp/test_sampling-XXXXXX", path[512];
    ck_assert_ptr_nonnull(mkdtemp(dir));
    nnt_sampling s = NNT_SAMPLING_INIT;
    unsigned found = 99;
    s.seed = 17;
    EXPECT_OK(nnt_model_hf_sampling(dir, &s, &found));   /* no file */
    ck_assert(found == 0 && s.temperature == 1.0 && s.top_k == 40 && s.top_p == 1.0);
    write_file(dir, "generation_config.json", "{\"do_sample\": true, \"temperature\": 0.6, "
               "\"top_p\": 0.9, \"top_k\": 20, \"eos_token_id\": [1, 2]}");
    EXPECT_OK(nnt_model_hf_sampling(dir, &s, &found));
    ck_assert_uint_eq(found, NNT_HF_SAMPLING_TEMPERATURE | NNT_HF_SAMPLING_TOP_K |
                             NNT_HF_SAMPLING_TOP_P);
    ck_assert(s.temperature == 0.6 && s.top_k == 20 && s.top_p == 0.9 && s.seed == 17);
    s = (nnt_sampling)NNT_SAMPLING_INIT;
    write_file(dir, "generation_config.json", "{\"top_p\": 0.95, \"top_k\": null}");
    EXPECT_OK(nnt_model_hf_sampling(dir, &s, &found));   /* (null: not named) */
    ck_assert(s.temperature == 1.0 && s.top_k == 40 && s.top_p == 0.95);
    ck_assert(found & NNT_HF_SAMPLING_TOP_P);
    ck_assert(!(found & NNT_HF_SAMPLING_TEMPERATURE));
    /* Qwen2.5-Instruct's kind: repetition_penalty and min_p taken (new in 0.4) */
    write_file(dir, "generation_config.json", "{\"repetition_penalty\": 1.05, \"min_p\": 0.1, "
               "\"top_k\": 20}");
    s = (nnt_sampling)NNT_SAMPLING_INIT;
    EXPECT_OK(nnt_model_hf_sampling(dir, &s, &found));
    ck_assert_uint_eq(found, NNT_HF_SAMPLING_REPETITION_PENALTY | NNT_HF_SAMPLING_MIN_P |
                             NNT_HF_SAMPLING_TOP_K);
    ck_assert(s.repetition_penalty == 1.05 && s.min_p == 0.1 && s.top_k == 20);
    /* typical_p, the cutoffs and n-gram bans (also new in 0.4); a size without them: not
     * written, not found */
    write_file(dir, "generation_config.json", "{\"typical_p\": 0.4, \"epsilon_cutoff\": 3e-4, "
               "\"eta_cutoff\": 0.002, \"no_repeat_ngram_size\": 3, \"min_p\": 0.05}");
    s = (nnt_sampling)NNT_SAMPLING_INIT;
    EXPECT_OK(nnt_model_hf_sampling(dir, &s, &found));
    ck_assert_uint_eq(found, NNT_HF_SAMPLING_TYPICAL_P | NNT_HF_SAMPLING_EPSILON_CUTOFF |
                             NNT_HF_SAMPLING_ETA_CUTOFF | NNT_HF_SAMPLING_NO_REPEAT_NGRAM_SIZE |
                             NNT_HF_SAMPLING_MIN_P);
    ck_assert(s.typical_p == 0.4 && s.epsilon_cutoff == 3e-4 && s.eta_cutoff == 0.002 &&
              s.no_repeat_ngram_size == 3 && s.min_p == 0.05);
    s = (nnt_sampling)NNT_SAMPLING_INIT;
    s.size = offsetof(nnt_sampling, typical_p);
    EXPECT_OK(nnt_model_hf_sampling(dir, &s, &found));
    ck_assert_uint_eq(found, NNT_HF_SAMPLING_MIN_P);
    ck_assert(s.typical_p == 1.0 && s.epsilon_cutoff == 0.0 && s.eta_cutoff == 0.0 &&
              s.no_repeat_ngram_size == 0 && s.min_p == 0.05);
    static const char *const BAD[] = {"{\"temperature\": -0.5}", "{\"top_p\": 0}",
                                      "{\"top_p\": 1.01}", "{\"top_k\": -3}",
                                      "{\"top_k\": \"20\"}", "{\"temperature\": 0.7,}",
                                      "{\"top_k\": 4294967296}", "{\"repetition_penalty\": 0}",
                                      "{\"min_p\": 1.5}", "{\"min_p\": -0.1}",
                                      "{\"typical_p\": 0}", "{\"typical_p\": 1.2}",
                                      "{\"epsilon_cutoff\": 1}", "{\"eta_cutoff\": -0.01}",
                                      "{\"no_repeat_ngram_size\": -2}",
                                      "{\"min_p\": 0.1, \"no_repeat_ngram_size\": 2.5}"};
    static const char *const KEY[] = {"temperature", "top_p", "top_p", "top_k", "top_k",
                                      "generation_config.json", "top_k", "repetition_penalty",
                                      "min_p", "min_p", "typical_p", "typical_p",
                                      "epsilon_cutoff", "eta_cutoff", "no_repeat_ngram_size",
                                      "no_repeat_ngram_size"};
    for (int i = 0; i < (int)(sizeof BAD / sizeof *BAD); i++) {
        write_file(dir, "generation_config.json", BAD[i]);
        s = (nnt_sampling)NNT_SAMPLING_INIT;
        int rc = nnt_model_hf_sampling(dir, &s, &found);
        ck_assert_msg(rc == NNT_E_FORMAT && strstr(nnt_ctx_last_error(NULL), KEY[i]) &&
                      strstr(nnt_ctx_last_error(NULL), "generation_config.json"),
                      "%s: rc %d '%s'", BAD[i], rc, nnt_ctx_last_error(NULL));
        ck_assert_msg(s.temperature == 1.0 && s.top_k == 40 && s.top_p == 1.0 &&
                      s.repetition_penalty == 1.0 && s.min_p == 0.0 && s.typical_p == 1.0 &&
                      s.epsilon_cutoff == 0.0 && s.eta_cutoff == 0.0 &&
                      s.no_repeat_ngram_size == 0, "%s: s changed", BAD[i]);
    }
    EXPECT_FAIL_MSG(nnt_model_hf_sampling(NULL, &s, &found), NNT_E_INVAL, "dir is NULL");
    EXPECT_FAIL_MSG(nnt_model_hf_sampling(dir, NULL, &found), NNT_E_INVAL, "s is NULL");
    EXPECT_FAIL_MSG(nnt_model_hf_sampling(dir, &s, NULL), NNT_E_INVAL, "found is NULL");
    snprintf(path, sizeof path, "rm -rf %s", dir);
    ck_assert_int_eq(system(path), 0);
}
END_TEST

/* ---- errors ------------------------------------------------------------------------------ */

/* ---- several sequences side by side (nnt_model_generate_n) -------------------------------- */

enum { NSEQ = 3 };

/* What on_token saw of nnt_model_generate_n: the indices into out, in order. */
typedef struct seen_n {
    int64_t idx[NSEQ * KV_NGEN];
    int32_t tok[NSEQ * KV_NGEN];
    int n;
} seen_n;

static void record_token_n(void *arg, int64_t i, int32_t token)
{
    seen_n *w = arg;
    if (w->n < NSEQ * KV_NGEN) {
        w->idx[w->n] = i;
        w->tok[w->n++] = token;
    }
}

/* Measured (max over models, tilings, greedy and sampled): 4.8e-7 between a sequence of the
 * batch and the same sequence alone (the products over NSEQ rows round otherwise than over
 * one: the decode steps' one-row kernels against the GEMMs). */
#define BATCH_LOGIT_TOL 5e-6

/* nnt_model_generate_n against nnt_model_generate a sequence at a time: a random GPT-2
 * (positions from its table), the GQA fixture, and the GQA fixture with a window of 5 keys
 * on every layer (caches of 2 W - 1 rows and a spare pair sliding along), 40 tokens past a
 * context of 24 (the cache, then forwards over the last 24 tokens of every sequence), three
 * tilings. Row r is the generation with seed + r: the same tokens, logits within
 * BATCH_LOGIT_TOL; greedy rows all the greedy tokens; with an eos that ends some rows early
 * the rows of one at a time with that eos, on_token called once per token produced (eos
 * included) with its index in out, the step's sequences in order; without the cache the
 * tokens of the cache. _i = model * 3 + tiling */
START_TEST(test_generate_n)
{
    int model = _i / 3, ti = _i % 3;
    int64_t V = 0;
    nnt_layer *l = model < 2 ? kv_model(model, &TILINGS[ti], &V)
                             : load_window(&MODELS[0], KV_WINDOW, 1, KV_WINDOW, &TILINGS[ti], 5);
    V = model < 2 ? V : MODELS[0].V;
    const int32_t prompt[NPROMPT] = {1, 40, 7, 3, 22};
    enum { N = NSEQ * KV_NGEN };
    int32_t batch[N], one[KV_NGEN], nocache[N];
    float *lbatch = malloc((size_t)(N * V) * sizeof *lbatch);
    float *lone = malloc((size_t)(KV_NGEN * V) * sizeof *lone);
    nnt_sampling s = NNT_SAMPLING_INIT;
    s.top_k = 0;
    const char *names[3] = {"gpt2", "gqa", "gqa window 5"};
    char label[96];
    double worst = 0;
    for (int sampled = 0; sampled < 2; sampled++) {
        s.temperature = sampled ? 0.9 : 0.0;
        s.seed = 5;
        s.eos = -1;
        snprintf(label, sizeof label, "%s %s tiling %d", names[model],
                 sampled ? "sampled" : "greedy", ti);
        EXPECT_OK(nnt_model_generate_n_trace(l, "test", prompt, NPROMPT, NSEQ, KV_NGEN, &s,
                                             batch, lbatch));
        for (int r = 0; r < NSEQ; r++) {
            s.seed = 5 + (uint64_t)r;
            EXPECT_OK(nnt_model_generate_trace(l, "test", prompt, NPROMPT, KV_NGEN, &s, one,
                                               lone));
            char what[128];
            snprintf(what, sizeof what, "%s sequence %d", label, r);
            expect_ids(batch + r * KV_NGEN, one, KV_NGEN, what);
            if (!sampled && r > 0)
                expect_ids(batch + r * KV_NGEN, batch, KV_NGEN, "greedy rows");
            for (int64_t k = 0; k < KV_NGEN * V; k++)
                worst = fmax(worst, fabs((double)lbatch[r * KV_NGEN * V + k] - lone[k]));
        }
        if (sampled)   /* the rows are not one another's */
            ck_assert_msg(!same_ids(batch, batch + KV_NGEN, KV_NGEN) &&
                          !same_ids(batch + KV_NGEN, batch + 2 * KV_NGEN, KV_NGEN),
                          "%s: two sequences drew the same tokens", label);
        s.seed = 5;
        s.no_cache = 1;
        EXPECT_OK(nnt_model_generate_n(l, prompt, NPROMPT, NSEQ, KV_NGEN, &s, nocache));
        s.no_cache = 0;
        expect_ids(nocache, batch, N, "without the cache");
    }
    EXPECT_TOL(worst, BATCH_LOGIT_TOL, "%s: logits of the batch against one at a time", label);
    /* eos: sequence 1's token 6, so that sequence 1 ends at 6 and the others where they meet
     * it (or never) */
    s.temperature = 0.9;
    s.seed = 5;
    EXPECT_OK(nnt_model_generate_n(l, prompt, NPROMPT, NSEQ, KV_NGEN, &s, batch));
    s.eos = batch[KV_NGEN + 6];
    seen_n w;
    memset(&w, 0, sizeof w);
    s.on_token = record_token_n;
    s.on_token_arg = &w;
    EXPECT_OK(nnt_model_generate_n(l, prompt, NPROMPT, NSEQ, KV_NGEN, &s, batch));
    s.on_token = NULL;
    int ends[NSEQ], calls = 0, ended_early = 0;
    for (int r = 0; r < NSEQ; r++) {
        s.seed = 5 + (uint64_t)r;
        EXPECT_OK(nnt_model_generate(l, prompt, NPROMPT, KV_NGEN, &s, one));
        expect_ids(batch + r * KV_NGEN, one, KV_NGEN, "eos: a sequence against one alone");
        ends[r] = KV_NGEN - 1;
        for (int j = 0; j < KV_NGEN; j++)
            if (one[j] == s.eos) {
                ends[r] = j;
                break;
            }
        calls += ends[r] + 1;
        ended_early += ends[r] < KV_NGEN - 1;
    }
    ck_assert_msg(ends[1] <= 6 && ended_early < NSEQ, "eos %d: ends %d %d %d", (int)s.eos,
                  ends[0], ends[1], ends[2]);
    ck_assert_msg(w.n == calls, "on_token: %d calls, want %d", w.n, calls);
    int k = 0;   /* step j: the sequences still going, in order */
    for (int j = 0; j < KV_NGEN; j++)
        for (int r = 0; r < NSEQ; r++)
            if (j <= ends[r]) {
                ck_assert_msg(w.idx[k] == (int64_t)r * KV_NGEN + j && w.tok[k] ==
                              batch[r * KV_NGEN + j], "on_token call %d: index %lld token %d, "
                              "want %d, %d", k, (long long)w.idx[k], (int)w.tok[k],
                              r * KV_NGEN + j, (int)batch[r * KV_NGEN + j]);
                k++;
            }
    printf("test_model_generate generate_n %s: %d sequences of %d tokens equal one at a time; "
           "max |logit difference| %.2e; eos ends %d %d %d\n", label, NSEQ, KV_NGEN, worst,
           ends[0], ends[1], ends[2]);
    free(lbatch);
    free(lone);
    nnt_layer_destroy(l);
}
END_TEST

/* ---- prompts of their own side by side ----------------------------------------------------- */

enum { NB = 4, LONGEST = 10, NGEN_B = 14 };   /* 10 + 14 - 1 = 23 positions: within 24 */
static const int32_t B_PROMPTS[NB][LONGEST] = {
    {1, 40, 7, 3, 22}, {17}, {2, 9, 31, 4, 4, 50, 8, 12, 6, 30}, {44, 0, 19}};
static const int64_t B_LENS[NB] = {5, 1, 10, 3};
static const uint64_t B_SEEDS[NB] = {5, 11, 5, 2};   /* two rows with one seed */

/* Measured (max over models, tilings, greedy and sampled): 6.6e-7 between a row of the batch
 * and its prompt alone (products over 4 rows against one, as nnt_model_generate_n's). */
#define RAGGED_LOGIT_TOL 7e-6

/* A model of test_generate_batch: 0 GPT-2 (random, positions from its table), 1 the GQA
 * fixture, 2 the GQA fixture with a window of 5 keys on every layer (shorter than most
 * prompts: pads, window and caches of 2 W - 1 = 9 rows together; the longest prompt more
 * than those rows), 3 the Qwen3 fixture (q/k
 * norms); context 24. */
static nnt_layer *batch_model(int model, const nnt_tiling *tl, int64_t *V)
{
    if (model < 2)
        return kv_model(model, tl, V);
    *V = MODELS[model == 2 ? 0 : 2].V;
    return model == 2 ? load_window(&MODELS[0], KV_WINDOW, 1, KV_WINDOW, tl, 5)
                      : load(&MODELS[2], KV_WINDOW, 1, KV_WINDOW, tl);
}

/* Prompts of a batch, their lengths and seeds */
typedef struct batch_in {
    int64_t n;
    const int32_t *const *prompts;
    const int64_t *lens;
    const uint64_t *seeds;
} batch_in;

/* Row r of out (b->n, ngen), logits trace (b->n, ngen, V) against prompt r generated alone
 * with seed b->seeds[r]: the same tokens; the largest |logit difference| returned. */
static double against_alone(nnt_layer *l, int64_t V, nnt_sampling s, const batch_in *b,
                            int64_t ngen, const int32_t *out, const float *trace,
                            const char *label)
{
    int32_t *one = malloc((size_t)ngen * sizeof *one);
    float *lone = malloc((size_t)(ngen * V) * sizeof *lone);
    double worst = 0;
    for (int64_t r = 0; r < b->n; r++) {
        s.seed = b->seeds[r];
        EXPECT_OK(nnt_model_generate_trace(l, "test", b->prompts[r], b->lens[r], ngen, &s, one,
                                           lone));
        char what[160];
        snprintf(what, sizeof what, "%s: prompt %lld (%lld tokens) against it alone", label,
                 (long long)r, (long long)b->lens[r]);
        expect_ids(out + r * ngen, one, ngen, what);
        for (int64_t k = 0; k < ngen * V; k++)
            worst = fmax(worst, fabs((double)trace[r * ngen * V + k] - lone[k]));
    }
    free(one);
    free(lone);
    return worst;
}

/* nnt_model_generate_batch of 4 prompts of 5, 1, 10 and 3 tokens against each alone
 * (nnt_model_generate, seed B_SEEDS[r]), on batch_model's models and three tilings, greedy
 * and sampled: the same tokens, logits within RAGGED_LOGIT_TOL; the same with 7 rows of
 * which 3 repeat a prompt (the same pointer, or a copy), with seeds of their own, and one
 * differs from another in its last id alone; with an eos that ends some
 * rows early, on_token told each token once with its index in out, the step's rows in order;
 * 30 new tokens (past the context of 24) and no_cache: the prompts one after another, the
 * logits of each alone bit for bit. _i = model * 3 + tiling */
START_TEST(test_generate_batch)
{
    int model = _i / 3, ti = _i % 3;
    int64_t V = 0;
    nnt_layer *l = batch_model(model, &TILINGS[ti], &V);
    const int32_t *prompts[NB] = {B_PROMPTS[0], B_PROMPTS[1], B_PROMPTS[2], B_PROMPTS[3]};
    const batch_in in = {NB, prompts, B_LENS, B_SEEDS};
    /* prompts repeated (one a copy): a distinct prompt's forward once, its caches copied;
     * the last differs from the one before in its last id alone */
    int32_t copy2[LONGEST];
    const int32_t other3[3] = {44, 0, 20};
    memcpy(copy2, B_PROMPTS[2], sizeof copy2);
    const int32_t *rep_prompts[7] = {B_PROMPTS[0], B_PROMPTS[2], B_PROMPTS[0], B_PROMPTS[1],
                                     copy2, B_PROMPTS[3], other3};
    const int64_t rep_lens[7] = {B_LENS[0], B_LENS[2], B_LENS[0], B_LENS[1], B_LENS[2],
                                 B_LENS[3], 3};
    const uint64_t rep_seeds[7] = {5, 6, 7, 5, 8, 9, 9};
    const batch_in rep = {7, rep_prompts, rep_lens, rep_seeds};
    enum { N = NB * NGEN_B, NLONG = 30 };
    int32_t *out = malloc((size_t)(7 * NLONG) * sizeof *out);
    float *trace = malloc((size_t)(7 * NLONG * V) * sizeof *trace);
    nnt_sampling s = NNT_SAMPLING_INIT;
    s.top_k = 0;
    const char *names[4] = {"gpt2", "gqa", "gqa window 5", "qwen3"};
    char label[96];
    double worst = 0;
    for (int sampled = 0; sampled < 2; sampled++) {
        s.temperature = sampled ? 0.9 : 0.0;
        snprintf(label, sizeof label, "%s %s tiling %d", names[model],
                 sampled ? "sampled" : "greedy", ti);
        EXPECT_OK(nnt_model_generate_batch_trace(l, "test", NB, prompts, B_LENS, B_SEEDS,
                                                 NGEN_B, &s, out, trace));
        worst = fmax(worst, against_alone(l, V, s, &in, NGEN_B, out, trace, label));
        EXPECT_OK(nnt_model_generate_batch_trace(l, "test", rep.n, rep_prompts, rep_lens,
                                                 rep_seeds, NGEN_B, &s, out, trace));
        worst = fmax(worst, against_alone(l, V, s, &rep, NGEN_B, out, trace, label));
        if (sampled)   /* one prompt, two seeds: two continuations */
            ck_assert_msg(!same_ids(out, out + 2 * NGEN_B, NGEN_B), "%s: prompt 0 with "
                          "seeds 5 and 7 drew the same tokens", label);
    }
    EXPECT_TOL(worst, RAGGED_LOGIT_TOL, "%s: logits of the batch against one at a time", label);
    /* seeds NULL: s's seed + r; an eos (row 2's token 4) ending rows early */
    s.seed = 3;
    EXPECT_OK(nnt_model_generate_batch(l, NB, prompts, B_LENS, NULL, NGEN_B, &s, out));
    s.eos = out[2 * NGEN_B + 4];
    seen_n w;
    memset(&w, 0, sizeof w);
    s.on_token = record_token_n;
    s.on_token_arg = &w;
    EXPECT_OK(nnt_model_generate_batch(l, NB, prompts, B_LENS, NULL, NGEN_B, &s, out));
    s.on_token = NULL;
    int ends[NB], calls = 0, k = 0;
    for (int r = 0; r < NB; r++) {
        int32_t one[NGEN_B];
        s.seed = 3 + (uint64_t)r;
        EXPECT_OK(nnt_model_generate(l, B_PROMPTS[r], B_LENS[r], NGEN_B, &s, one));
        expect_ids(out + r * NGEN_B, one, NGEN_B, "eos: a row against its prompt alone");
        for (ends[r] = 0; ends[r] < NGEN_B - 1 && one[ends[r]] != s.eos; ends[r]++)
            ;
        calls += ends[r] + 1;
    }
    ck_assert_msg(ends[2] <= 4, "eos %d: row 2 ends at %d", (int)s.eos, ends[2]);
    ck_assert_msg(w.n == calls, "on_token: %d calls, want %d", w.n, calls);
    for (int j = 0; j < NGEN_B; j++)
        for (int r = 0; r < NB; r++)
            if (j <= ends[r]) {
                ck_assert_msg(w.idx[k] == (int64_t)r * NGEN_B + j &&
                              w.tok[k] == out[r * NGEN_B + j], "on_token call %d: index %lld "
                              "token %d, want %d, %d", k, (long long)w.idx[k], (int)w.tok[k],
                              r * NGEN_B + j, (int)out[r * NGEN_B + j]);
                k++;
            }
    /* past the context, and without the cache: one after another, each alone's logits */
    s.eos = -1;
    s.temperature = 0.9;
    for (int nocache = 0; nocache < 2; nocache++) {
        int64_t ngen = nocache ? NGEN_B : NLONG;
        s.no_cache = nocache;
        EXPECT_OK(nnt_model_generate_batch_trace(l, "test", NB, prompts, B_LENS, B_SEEDS, ngen,
                                                 &s, out, trace));
        double d = against_alone(l, V, s, &in, ngen, out, trace, nocache ? "no cache" :
                                 "past the context");
        ck_assert_msg(d == 0.0, "%s: one after another, logits differ by %g from alone",
                      label, d);
    }
    printf("test_model_generate generate_batch %s: %d prompts of 5, 1, 10, 3 tokens equal each "
           "alone; max |logit difference| %.2e; eos ends %d %d %d %d\n", label, NB, worst,
           ends[0], ends[1], ends[2], ends[3]);
    free(out);
    free(trace);
    nnt_layer_destroy(l);
}
END_TEST

/* ---- the sampler's top_k ----------------------------------------------------------------- */

typedef struct ref_cand {
    float logit;
    int32_t id;
} ref_cand;

static int ref_cmp(const void *pa, const void *pb)   /* larger logit first, then lower id */
{
    const ref_cand *a = pa, *b = pb;
    if (a->logit != b->logit)
        return a->logit > b->logit ? -1 : 1;
    return (a->id > b->id) - (a->id < b->id);
}

/* top_k (the k best found without sorting every candidate) against the sort of all of them:
 * logits with many ties (at the k-th place too), the k best by (logit, id) found by a sort
 * here, every other logit set so low that its weight is exactly 0, then drawn by the path
 * that sorts all candidates (top_k 0, a nucleus of nearly everything); the same generator
 * seed: the same 400 tokens for k 1, 2, 7, 40 and V - 1, and temperatures 0.6 and 2. */
START_TEST(test_sampler_top_k)
{
    enum { V = 300, DRAWS = 400 };
    float logits[V], masked[V];
    ref_cand sorted[V];
    for (int v = 0; v < V; v++) {   /* 24 distinct values: ties everywhere */
        logits[v] = (float)((v * 7919) % 24) * 0.25f - 3.0f;
        sorted[v].logit = logits[v];
        sorted[v].id = v;
    }
    qsort(sorted, V, sizeof *sorted, ref_cmp);
    const int64_t ks[5] = {1, 2, 7, 40, V - 1};
    const double temps[2] = {0.6, 2.0};
    for (int ki = 0; ki < 5; ki++)
        for (int ti = 0; ti < 2; ti++) {
            int64_t k = ks[ki];
            for (int v = 0; v < V; v++)
                masked[v] = -1e6f;   /* exp(-1e6 / T) is 0 in double */
            for (int64_t j = 0; j < k; j++)
                masked[sorted[j].id] = sorted[j].logit;
            nnt_sampler a, b;
            EXPECT_OK(nnt_sampler_init(&a, ctx, "test", V, temps[ti], k));
            EXPECT_OK(nnt_sampler_init(&b, ctx, "test", V, temps[ti], 0));
            a.top_p = 1.0;
            b.top_p = 1.0 - 1e-12;   /* the sort of every candidate */
            uint64_t ra[4], rb[4];
            nnt_sampler_seed(ra, 99 + (uint64_t)k);
            nnt_sampler_seed(rb, 99 + (uint64_t)k);
            int distinct = 0;
            int32_t first = -1;
            for (int d = 0; d < DRAWS; d++) {
                int32_t ta = -1, tb = -2;
                EXPECT_OK(nnt_sampler_pick(&a, ctx, "test", logits, NULL, ra, &ta));
                EXPECT_OK(nnt_sampler_pick(&b, ctx, "test", masked, NULL, rb, &tb));
                ck_assert_msg(ta == tb, "top_k %lld temperature %g draw %d: %d, the sort of "
                              "all %d", (long long)k, temps[ti], d, (int)ta, (int)tb);
                ck_assert_msg(masked[ta] > -1e6f, "top_k %lld: token %d is not among the k "
                              "best", (long long)k, (int)ta);
                first = d ? first : ta;
                distinct |= ta != first;
            }
            ck_assert_msg(k == 1 || distinct, "top_k %lld: every draw the same token",
                          (long long)k);
            nnt_sampler_free(&a);
            nnt_sampler_free(&b);
        }
}
END_TEST

/* top_p over a vocabulary of 40000 (the nucleus found among the first 64, then V / 32,
 * without sorting every candidate, or by the sort of all when it is larger): the nucleus computed
 * here by a sort of every candidate (logits on a grid of 1/16: ties), then drawn as the top_k
 * path draws its n best; the same generator seed: the same 200 tokens, for peaked, medium
 * and flat logits, temperatures 0.7 and 1.5 and top_p 0.3, 0.9 and 0.97. Every way of
 * finding the nucleus is taken (nuclei within 64, within V / 32 and larger). */
START_TEST(test_sampler_top_p)
{
    enum { V = 40000, DRAWS = 200 };
    float *logits = malloc(V * sizeof *logits);
    ref_cand *sorted = malloc(V * sizeof *sorted);
    ck_assert(logits && sorted);
    const double scales[3] = {6.0, 1.5, 0.25}, temps[2] = {0.7, 1.5}, ps[3] = {0.3, 0.9, 0.97};
    int64_t most = 0, least = V, mid = 0;   /* mid: nuclei past the first 64, within V / 32 */
    uint64_t x = 12345;
    for (int si = 0; si < 3; si++)
        for (int ti = 0; ti < 2; ti++)
            for (int pi = 0; pi < 3; pi++) {
                double max = -HUGE_VAL, total = 0.0, acc = 0.0;
                for (int v = 0; v < V; v++) {   /* a sum of 4 uniforms: near normal */
                    double u = 0.0;
                    for (int r = 0; r < 4; r++) {
                        x = x * 6364136223846793005ULL + 1442695040888963407ULL;
                        u += (double)(x >> 11) * 0x1p-53 - 0.5;
                    }
                    logits[v] = (float)(round(u * scales[si] * 16.0) / 16.0);
                    sorted[v].logit = logits[v];
                    sorted[v].id = v;
                    max = fmax(max, logits[v]);
                }
                qsort(sorted, V, sizeof *sorted, ref_cmp);
                for (int v = 0; v < V; v++)
                    total += exp((sorted[v].logit - max) / temps[ti]);
                int64_t n = 0;
                while (n < V && acc < ps[pi] * total)
                    acc += exp((sorted[n++].logit - max) / temps[ti]);
                ck_assert(n >= 1 && n < V);
                most = n > most ? n : most;
                least = n < least ? n : least;
                mid += n > 64 && n <= V / 32;
                nnt_sampler a, b;
                EXPECT_OK(nnt_sampler_init(&a, ctx, "test", V, temps[ti], 0));
                EXPECT_OK(nnt_sampler_init(&b, ctx, "test", V, temps[ti], n));
                a.top_p = ps[pi];
                b.top_p = 1.0;
                uint64_t ra[4], rb[4];
                nnt_sampler_seed(ra, 7 + (uint64_t)n);
                nnt_sampler_seed(rb, 7 + (uint64_t)n);
                for (int d = 0; d < DRAWS; d++) {
                    int32_t ta = -1, tb = -2;
                    EXPECT_OK(nnt_sampler_pick(&a, ctx, "test", logits, NULL, ra, &ta));
                    EXPECT_OK(nnt_sampler_pick(&b, ctx, "test", logits, NULL, rb, &tb));
                    ck_assert_msg(ta == tb, "scale %g temperature %g top_p %g (nucleus %lld): "
                                  "draw %d: %d, the nucleus's %d", scales[si], temps[ti],
                                  ps[pi], (long long)n, d, (int)ta, (int)tb);
                }
                nnt_sampler_free(&a);
                nnt_sampler_free(&b);
            }
    printf("test_sampler_top_p: nuclei of %lld to %lld tokens of %d, %lld between 64 and "
           "V / 32\n", (long long)least, (long long)most, V, (long long)mid);
    ck_assert(least <= 64 && most > V / 32 && mid > 0);
    free(logits);
    free(sorted);
}
END_TEST

START_TEST(test_errors)
{
    const char *fn = "nnt_model_generate";
    const fix_model *m = &MODELS[1];
    nnt_layer *l = load(m, WINDOW, 1, WINDOW, NULL), *lin = NULL;
    int32_t prompt[2] = {3, 4}, out[4];
    nnt_sampling s = NNT_SAMPLING_INIT;
    EXPECT_FAIL_MSG(nnt_model_generate(NULL, prompt, 2, 4, NULL, out), NNT_E_INVAL, fn);
    EXPECT_OK(nnt_layer_linear_create(ctx, 4, 4, 0, NULL, &lin));
    EXPECT_FAIL_MSG(nnt_model_generate(lin, prompt, 2, 4, NULL, out), NNT_E_INVAL,
                    "nnt_model_generate: the layer is a linear layer, not a model");
    EXPECT_FAIL_MSG(nnt_model_generate(l, NULL, 2, 4, NULL, out), NNT_E_INVAL,
                    "nnt_model_generate: prompt is NULL");
    EXPECT_FAIL_MSG(nnt_model_generate(l, prompt, 2, 4, NULL, NULL), NNT_E_INVAL,
                    "nnt_model_generate: out is NULL");
    EXPECT_FAIL_MSG(nnt_model_generate(l, prompt, 0, 4, NULL, out), NNT_E_INVAL, fn);
    EXPECT_FAIL_MSG(nnt_model_generate(l, prompt, 2, -1, NULL, out), NNT_E_INVAL, fn);
    prompt[1] = (int32_t)m->V;
    EXPECT_FAIL_MSG(nnt_model_generate(l, prompt, 2, 4, NULL, out), NNT_E_INVAL,
                    "nnt_model_generate: prompt token 53 at position 1 is outside [0, 53)");
    prompt[1] = -1;
    EXPECT_FAIL_MSG(nnt_model_generate(l, prompt, 2, 4, NULL, out), NNT_E_INVAL, fn);
    prompt[1] = 4;
    s.size = sizeof s - 1;
    EXPECT_FAIL_MSG(nnt_model_generate(l, prompt, 2, 4, &s, out), NNT_E_INVAL,
                    "nnt_model_generate: s->size");
    s.size = sizeof s;
    s.temperature = NAN;
    EXPECT_FAIL_MSG(nnt_model_generate(l, prompt, 2, 4, &s, out), NNT_E_INVAL,
                    "nnt_model_generate: temperature");
    s.temperature = 1.0;
    s.top_k = -1;
    EXPECT_FAIL_MSG(nnt_model_generate(l, prompt, 2, 4, &s, out), NNT_E_INVAL,
                    "nnt_model_generate: top_k");
    /* nothing to do: out may be NULL */
    EXPECT_OK(nnt_model_generate(l, prompt, 2, 0, NULL, NULL));
    /* several sequences: at least one, and nseq x ngen an array's size */
    EXPECT_FAIL_MSG(nnt_model_generate_n(l, prompt, 2, 0, 4, NULL, out), NNT_E_INVAL,
                    "nnt_model_generate_n: nseq = 0 must be >= 1");
    EXPECT_FAIL_MSG(nnt_model_generate_n(l, prompt, 2, INT64_MAX / 2, 4, NULL, out),
                    NNT_E_INVAL, "nnt_model_generate_n: nseq");
    EXPECT_FAIL_MSG(nnt_model_generate_n(l, prompt, 2, 2, 4, NULL, NULL), NNT_E_INVAL,
                    "nnt_model_generate_n: out is NULL");
    EXPECT_FAIL_MSG(nnt_model_generate_n(NULL, prompt, 2, 2, 4, NULL, out), NNT_E_INVAL,
                    "nnt_model_generate_n");
    /* prompts of their own: each checked, named by its index */
    int32_t bad[1] = {(int32_t)m->V};
    const int32_t *prompts[3] = {prompt, prompt, bad};
    int64_t lens[3] = {2, 1, 1};
    EXPECT_FAIL_MSG(nnt_model_generate_batch(l, 3, prompts, lens, NULL, 4, NULL, out),
                    NNT_E_INVAL, "nnt_model_generate_batch: prompt 2: prompt token 53 at "
                    "position 0 is outside [0, 53)");
    prompts[2] = NULL;
    EXPECT_FAIL_MSG(nnt_model_generate_batch(l, 3, prompts, lens, NULL, 4, NULL, out),
                    NNT_E_INVAL, "nnt_model_generate_batch: prompt 2: prompt is NULL");
    lens[1] = 0;
    EXPECT_FAIL_MSG(nnt_model_generate_batch(l, 2, prompts, lens, NULL, 4, NULL, out),
                    NNT_E_INVAL, "nnt_model_generate_batch: prompt 1: nprompt = 0");
    EXPECT_FAIL_MSG(nnt_model_generate_batch(l, 2, NULL, lens, NULL, 4, NULL, out),
                    NNT_E_INVAL, "nnt_model_generate_batch: prompts or nprompts is NULL");
    EXPECT_FAIL_MSG(nnt_model_generate_batch(l, 0, prompts, lens, NULL, 4, NULL, out),
                    NNT_E_INVAL, "nnt_model_generate_batch: nseq = 0");
    EXPECT_FAIL_MSG(nnt_model_generate_batch(l, 1, prompts, lens, NULL, 4, NULL, NULL),
                    NNT_E_INVAL, "nnt_model_generate_batch: prompt 0: out is NULL");
    nnt_layer_destroy(lin);
    nnt_layer_destroy(l);
}
END_TEST

static Suite *generate_suite(void)
{
    Suite *s = suite_create("model_generate");
    TCase *tc = tcase_create("model_generate");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 120);
    tcase_add_loop_test(tc, test_greedy_hf, 0, 6 * NMODELS);
    tcase_add_test(tc, test_long_prompt);
    tcase_add_test(tc, test_sampling);
    tcase_add_test(tc, test_sampler_top_p);
    tcase_add_test(tc, test_gpt2_path);
    tcase_add_test(tc, test_generate_text);
    tcase_add_loop_test(tc, test_training_state, 0, NMODELS);
    tcase_add_test(tc, test_errors);
    tcase_add_loop_test(tc, test_greedy_hf_long, 0, 3 * NMODELS);
    tcase_add_loop_test(tc, test_cache_equals_no_cache, 0, 6);
    tcase_add_test(tc, test_top_p_eos);
    tcase_add_test(tc, test_hf_eos_ids);
    tcase_add_test(tc, test_hf_sampling);
    tcase_add_loop_test(tc, test_generate_n, 0, 9);
    tcase_add_loop_test(tc, test_generate_batch, 0, 12);
    tcase_add_test(tc, test_sampler_top_k);
    tcase_add_test(tc, test_sampler_hf);
    tcase_add_loop_test(tc, test_repetition_penalty_hf, 0, 8);
    tcase_add_test(tc, test_sampling_replay);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return run_suite(generate_suite());
}
