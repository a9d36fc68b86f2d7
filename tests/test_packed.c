/* SPDX-License-Identifier: MIT */
/* Packed rows trained as TRL's padding-free packing trains them, against transformers
 * (tests/fixtures/packed_tiny, tests/gen_packed_fixtures.py): a batch of 2 rows of T 16 with
 * 3 and 2 prompt/answer examples of uneven lengths, position ids restarting at 0 at each
 * example (nnt_layer_set_positions), targets of the prompts and pads ignored; a Llama
 * (grouped-query attention, rotary positions), a GPT-2 (learned positions) and a Mistral
 * (sliding window 4 inside the examples): logits, loss and every gradient over 3 tilings
 * whose sequence tiles cut through the examples, 4 AdamW steps; positions 0 .. T-1 give the
 * run without positions bit for bit; the token file (nnt_token_writer, pack) records the
 * examples' starts (nnt_data_read_starts), byte for byte as the generator encodes the format,
 * and the trainer trains on it with the examples' positions: its losses equal transformers';
 * with positions known on the host, tile pairs wholly across examples get no task.
 * (tests/check_packed.sh runs nnt-train on the generator's file.) */
#include "testutil.h"
#include "fixture_st.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#define B 2
#define T 16
#define STEPS 4

static const char *const MODELS[] = {"llama", "gpt2", "mistral"};
#define NMODELS 3

/* Measured (2-core host, Zen class; worst over models and tilings): logits rel 6.6e-7, loss
 * rel 2.1e-7, gradients rel 3.2e-6, AdamW losses 3.1e-6 (absolute). */
#define LOGITS_TOL 6.6e-6
#define LOSS_TOL 2.1e-6
#define GRAD_TOL 3.2e-5
#define ADAMW_TOL 3.1e-5

static nnt_ctx *ctx;
static void setup(void) { ctx = test_ctx(); }
static void teardown(void) { EXPECT_OK(nnt_ctx_destroy(ctx)); }

static const char *path_of(const char *name, const char *what)
{
    return fixture_path_in("packed_tiny", name, what);
}

/* whole; sequence tiles of 3 (the examples of row 0 start at 0, 5, 12: tiles cut them),
 * heads of 3; batch tiles of 1, sequence tiles of 5, one head */
static const struct {
    nnt_tiling t;
    int64_t tok[2];
} TILINGS[3] = {
    {{sizeof(nnt_tiling), 0, 0, 0, 0, 0, 0, 0}, {B, T}},
    {{sizeof(nnt_tiling), 2, 3, 5, 7, 9, 3, 0}, {2, 3}},
    {{sizeof(nnt_tiling), 1, 5, 8, 16, 10, 1, 0}, {1, 5}},
};

typedef struct examples {
    int32_t *rows, *positions, *targets;   /* (2 STEPS, T) */
    int32_t *tokens, *counts, *lens;       /* the examples, flattened; their lengths */
    int64_t ntokens, nexamples;
} examples;

static examples read_examples(void)
{
    examples e;
    nnt_st_reader *r = fixture_open_st_path(fixture_path_in("packed_tiny", "examples",
                                                            "safetensors"));
    e.rows = fixture_read_n(r, "rows", NNT_IO_I32, NULL);
    e.positions = fixture_read_n(r, "positions", NNT_IO_I32, NULL);
    e.targets = fixture_read_n(r, "targets", NNT_IO_I32, NULL);
    e.tokens = fixture_read_n(r, "ex_tokens", NNT_IO_I32, &e.ntokens);
    e.counts = fixture_read_n(r, "ex_counts", NNT_IO_I32, NULL);
    e.lens = fixture_read_n(r, "ex_lens", NNT_IO_I32, &e.nexamples);
    nnt_st_close(r);
    return e;
}

static void free_examples(examples *e)
{
    free(e->rows), free(e->positions), free(e->targets), free(e->tokens), free(e->counts);
    free(e->lens);
}

/* One forward and backward of batch s (rows 2s, 2s + 1) with or without the positions;
 * *logits (may be NULL) gets the host logits. */
static double step(nnt_layer *l, const examples *e, int s, const int64_t *tok_tile,
                   int with_pos, float **logits, int64_t *n)
{
    nnt_tensor *x = fixture_ids(ctx, B, T, e->rows + s * B * T, tok_tile);
    nnt_tensor *y = fixture_ids(ctx, B, T, e->targets + s * B * T, tok_tile);
    nnt_tensor *p = fixture_ids(ctx, B, T, e->positions + s * B * T, tok_tile);
    double loss = 0.0;
    EXPECT_OK(nnt_layer_set_positions(l, with_pos ? p : NULL));
    EXPECT_OK(nnt_layer_zero_grad(l));
    EXPECT_OK(nnt_layer_set_targets(l, y));
    nnt_tensor *out = NULL;
    EXPECT_OK(nnt_layer_forward(l, x, &out));
    if (logits)
        *logits = test_to_host(out, n);
    EXPECT_OK(nnt_layer_loss(l, &loss));
    EXPECT_OK(nnt_layer_backward(l, NULL, NULL));
    EXPECT_OK(nnt_layer_set_positions(l, NULL));
    nnt_tensor_destroy(x);
    nnt_tensor_destroy(y);
    nnt_tensor_destroy(p);
    return loss;
}

/* _i = model * 3 + tiling */
START_TEST(test_reference)
{
    const char *name = MODELS[_i / 3];
    int ti = _i % 3;
    examples e = read_examples();
    nnt_st_reader *r = fixture_open_st_path(path_of(name, "reference.safetensors"));
    float *want_logits = fixture_read_n(r, "logits", NNT_IO_F32, NULL);
    float *want_loss = fixture_read_n(r, "loss", NNT_IO_F32, NULL);
    nnt_layer *l = NULL;
    EXPECT_OK(nnt_model_load_hf(ctx, path_of(name, NULL), B, T, &TILINGS[ti].t, &l));
    float *logits = NULL;
    int64_t n = 0;
    double loss = step(l, &e, 0, TILINGS[ti].tok, 1, &logits, &n);
    double el = test_rel_err(logits, want_logits, n);
    double eloss = fabs(loss - want_loss[0]) / want_loss[0], eg = 0.0;
    char worst[256] = "";
    int64_t count = 0, checked_gpt2 = 0;
    EXPECT_OK(nnt_layer_num_params(l, &count, NULL));
    for (int64_t i = 0; i < count; i++) {
        nnt_param_info p = test_param_at(l, i);
        char gname[300];
        snprintf(gname, sizeof gname, "grad.%s", p.name);
        if (!nnt_st_find(r, gname)) {   /* GPT-2: transformer.NAME, same layout unless the
                                           file's Conv1D (in, out) matrices (c_attn split
                                           into q, k, v; c_fc, c_proj: the AdamW losses) */
            snprintf(gname, sizeof gname, "grad.transformer.%s", p.name);
            if (!nnt_st_find(r, gname) || strstr(p.name, "attn") || strstr(p.name, "mlp"))
                continue;
            checked_gpt2++;
        }
        int64_t ng = 0, nw = 0;
        float *want = fixture_read_n(r, gname, NNT_IO_F32, &nw), *got = test_to_host(p.grad, &ng);
        ck_assert_int_eq(ng, nw);
        double err = test_rel_err(got, want, ng);
        if (err >= eg) {
            eg = err;
            snprintf(worst, sizeof worst, "%s", p.name);
        }
        free(want), free(got);
    }
    if (strcmp(name, "gpt2") == 0)   /* wte, wpe, ln_1, ln_2, ln_f: 2 + 2 * 2 * 2 + 2 */
        ck_assert_int_eq(checked_gpt2, 12);
    printf("test_packed %s tiling %d: logits rel %.2e, loss rel %.2e, worst gradient rel %.2e "
           "(%s)\n", name, ti, el, eloss, eg, worst);
    EXPECT_TOL(el, LOGITS_TOL, "%s tiling %d: logits", name, ti);
    EXPECT_TOL(eloss, LOSS_TOL, "%s tiling %d: loss", name, ti);
    EXPECT_TOL(eg, GRAD_TOL, "%s tiling %d: gradient of %s", name, ti, worst);
    free(logits), free(want_logits), free(want_loss);
    free_examples(&e);
    nnt_layer_destroy(l);
    nnt_st_close(r);
}
END_TEST

/* positions 0 .. T-1 in every row: the run without positions, bit for bit */
START_TEST(test_plain_positions)
{
    const char *name = MODELS[_i / 3];
    int ti = _i % 3;
    examples e = read_examples();
    for (int64_t i = 0; i < 2 * STEPS * T; i++)
        e.positions[i] = (int32_t)(i % T);
    float *logits[2] = {NULL, NULL};
    double loss[2];
    int64_t n = 0;
    float *grads[2][64];
    int64_t count = 0, ng[64];
    for (int w = 0; w < 2; w++) {
        nnt_layer *l = NULL;
        EXPECT_OK(nnt_model_load_hf(ctx, path_of(name, NULL), B, T, &TILINGS[ti].t, &l));
        loss[w] = step(l, &e, 1, TILINGS[ti].tok, w, &logits[w], &n);
        EXPECT_OK(nnt_layer_num_params(l, &count, NULL));
        ck_assert_int_le(count, 64);
        for (int64_t i = 0; i < count; i++)
            grads[w][i] = test_to_host(test_param_at(l, i).grad, &ng[i]);
        nnt_layer_destroy(l);
    }
    ck_assert_msg(loss[0] == loss[1], "%s: loss %.17g with positions 0 .. T-1, %.17g without",
                  name, loss[1], loss[0]);
    ck_assert(memcmp(logits[0], logits[1], (size_t)n * sizeof(float)) == 0);
    for (int64_t i = 0; i < count; i++) {
        ck_assert(memcmp(grads[0][i], grads[1][i], (size_t)ng[i] * sizeof(float)) == 0);
        free(grads[0][i]), free(grads[1][i]);
    }
    free(logits[0]), free(logits[1]);
    free_examples(&e);
}
END_TEST

START_TEST(test_adamw)
{
    const char *name = MODELS[_i];
    examples e = read_examples();
    nnt_st_reader *r = fixture_open_st_path(path_of(name, "train.safetensors"));
    float *want = fixture_read_n(r, "losses", NNT_IO_F32, NULL);
    nnt_layer *l = NULL;
    EXPECT_OK(nnt_model_load_hf(ctx, path_of(name, NULL), B, T, &TILINGS[1].t, &l));
    nnt_optim_options oo = NNT_OPTIM_OPTIONS_INIT;
    oo.lr = 1e-3;
    oo.beta1 = 0.9;
    oo.beta2 = 0.999;
    oo.eps = 1e-8;
    oo.weight_decay = 0.0;
    nnt_optim *opt = NULL;
    EXPECT_OK(nnt_optim_create(ctx, &oo, &opt));
    EXPECT_OK(nnt_optim_add_layer(opt, l));
    double worst = 0.0;
    for (int s = 0; s < STEPS; s++) {
        double loss = step(l, &e, s, TILINGS[1].tok, 1, NULL, NULL);
        EXPECT_OK(nnt_optim_step(opt));
        worst = fmax(worst, fabs(loss - want[s]));
    }
    printf("test_packed %s adamw: max |loss - fixture| %.2e over %d steps\n", name, worst,
           STEPS);
    EXPECT_TOL(worst, ADAMW_TOL, "%s adamw", name);
    nnt_optim_destroy(opt);
    nnt_layer_destroy(l);
    nnt_st_close(r);
    free(want);
    free_examples(&e);
}
END_TEST

/* The examples through nnt_token_writer (mask, block T, pack, pad 0) into path: the file
 * records their starts; it reads back as the fixture's rows, targets and positions. */
static void write_packed(const examples *e, const char *path)
{
    nnt_token_writer_options wo = NNT_TOKEN_WRITER_OPTIONS_INIT;
    wo.bits = 16, wo.vocab = 64, wo.mask = 1, wo.block = T, wo.pack = 1, wo.pad = 0;
    nnt_token_writer *w = NULL;
    EXPECT_OK(nnt_token_writer_open(ctx, path, &wo, &w));
    for (int64_t x = 0, at = 0; x < e->nexamples; at += e->lens[x++]) {
        uint8_t counts[T];
        for (int64_t i = 0; i < e->lens[x]; i++)
            counts[i] = (uint8_t)e->counts[at + i];
        EXPECT_OK(nnt_token_writer_write_example(w, e->tokens + at, counts,
                                                 (size_t)e->lens[x]));
    }
    EXPECT_OK(nnt_token_writer_close(w));
    /* byte for byte the generator's own encoding of the format (examples.bin) */
    static char got[8192], want[8192];
    FILE *a = fopen(path, "rb"), *b = fopen(path_of("examples", "bin"), "rb");
    ck_assert_ptr_nonnull(a);
    ck_assert_ptr_nonnull(b);
    size_t ng = fread(got, 1, sizeof got, a), nw = fread(want, 1, sizeof want, b);
    fclose(a), fclose(b);
    ck_assert_uint_eq(ng, 1024 + 2 * 2 * STEPS * T + 2 * (2 * STEPS * T / 8));
    ck_assert_uint_eq(ng, nw);
    ck_assert_msg(memcmp(got, want, ng) == 0, "the written file differs from examples.bin");
    nnt_data *d = NULL;
    EXPECT_OK(nnt_data_open(path, NNT_DATA_AUTO, NULL, 64, &d));
    nnt_data_info di = NNT_DATA_INFO_INIT;
    EXPECT_OK(nnt_data_info_get(d, &di));
    ck_assert_int_eq(di.starts, 1);
    ck_assert_int_eq(di.block, T);
    ck_assert_int_eq(di.tokens, 2 * STEPS * T);
    int32_t ids[2 * STEPS * T];
    uint8_t starts[2 * STEPS * T], counts[2 * STEPS * T + 1];
    EXPECT_OK(nnt_data_read(d, 0, ids, 2 * STEPS * T));
    EXPECT_OK(nnt_data_read_starts(d, 0, starts, 2 * STEPS * T));
    EXPECT_OK(nnt_data_read_mask(d, 0, counts, 2 * STEPS * T + 1));
    for (int64_t i = 0, p = 0; i < 2 * STEPS * T; i++, p++) {
        p = starts[i] ? 0 : p;
        ck_assert_msg(i % T || starts[i], "row %lld starts no example", (long long)(i / T));
        ck_assert_int_eq(ids[i], e->rows[i]);
        ck_assert_int_eq(p, e->positions[i]);
        ck_assert_int_eq(counts[i + 1] ? ids[(i + 1) % (2 * STEPS * T)] : -1, e->targets[i]);
    }
    nnt_data_close(d);
}

static double train_losses[STEPS + 1];
static int on_step(const nnt_trainer_report *r, void *user)
{
    (void)user;
    if (r->event == NNT_TRAINER_STEP && r->step >= 1 && r->step <= STEPS)
        train_losses[r->step] = r->loss;
    return 0;
}

/* nnt-train's path: the packed file through the trainer (AdamW as the fixture's, no
 * clipping): its losses are transformers' with per-example positions and attention */
START_TEST(test_trainer)
{
    const char *name = MODELS[_i];
    examples e = read_examples();
    test_make_tmpdir("packed");
    const char *path = test_tmp_path("packed.bin");
    write_packed(&e, path);
    nnt_st_reader *r = fixture_open_st_path(path_of(name, "train.safetensors"));
    float *want = fixture_read_n(r, "losses", NNT_IO_F32, NULL);
    nnt_layer *l = NULL;
    EXPECT_OK(nnt_model_load_hf(ctx, path_of(name, NULL), B, T, &TILINGS[1].t, &l));
    nnt_optim_options oo = NNT_OPTIM_OPTIONS_INIT;
    oo.lr = 1e-3, oo.beta1 = 0.9, oo.beta2 = 0.999, oo.eps = 1e-8, oo.weight_decay = 0.0;
    oo.grad_clip = 0.0;
    nnt_optim *opt = NULL;
    EXPECT_OK(nnt_optim_create(ctx, &oo, &opt));
    EXPECT_OK(nnt_optim_add_layer(opt, l));
    nnt_data *d = NULL;
    EXPECT_OK(nnt_data_open(path, NNT_DATA_AUTO, NULL, 64, &d));
    nnt_trainer_options to = NNT_TRAINER_OPTIONS_INIT;
    to.batch = B, to.seq = T, to.accum = 1, to.steps = STEPS, to.seed = 1;
    to.tile_batch = TILINGS[1].tok[0], to.tile_seq = TILINGS[1].tok[1];
    to.callback = on_step;
    nnt_trainer *tr = NULL;
    EXPECT_OK(nnt_trainer_create(l, opt, d, &to, &tr));
    EXPECT_OK(nnt_trainer_run(tr, 0));
    double worst = 0.0;
    for (int s = 0; s < STEPS; s++)
        worst = fmax(worst, fabs(train_losses[s + 1] - want[s]));
    printf("test_packed %s trainer: max |loss - fixture| %.2e over %d steps\n", name, worst,
           STEPS);
    EXPECT_TOL(worst, ADAMW_TOL, "%s trainer", name);
    nnt_trainer_destroy(tr);
    nnt_data_close(d);
    nnt_optim_destroy(opt);
    nnt_layer_destroy(l);
    nnt_st_close(r);
    free(want);
    free_examples(&e);
    test_remove_tmpdir();
}
END_TEST

/* The attention op with positions known on the host (copied from it) gives no task to a
 * (query tile, key tile) pair wholly across examples, and the same bits as with the same
 * positions written by tasks (not known: every pair j <= i gets its task). Tiles of 3 of
 * rows 0-1 of the fixture (examples at 0, 5, 12 and 0, 9). */
START_TEST(test_skipped_pairs)
{
    examples e = read_examples();
    const int64_t NH = 2, HD = 8, TT = 3;
    int64_t qs[4] = {B, NH, T, HD}, qt[4] = {1, NH, TT, HD}, ls[3] = {B, NH, T};
    int64_t ps[2] = {B, T}, pt[2] = {1, TT}, swap_t[2] = {T, B}, swap_tt[2] = {TT, 1};
    static const int SWAP[2] = {1, 0};
    nnt_tensor *t[9], *known = fixture_ids(ctx, B, T, e.positions, pt), *swapped, *unknown;
    EXPECT_OK(nnt_tensor_create(ctx, NNT_INT32, 2, swap_t, swap_tt, &swapped));
    EXPECT_OK(nnt_tensor_create(ctx, NNT_INT32, 2, ps, pt, &unknown));
    EXPECT_OK(nnt_tensor_permute(known, SWAP, swapped));   /* written by tasks: not known */
    EXPECT_OK(nnt_tensor_permute(swapped, SWAP, unknown));
    for (int i = 0; i < 9; i++)   /* q k v o dout dq dk dv, lse */
        EXPECT_OK(nnt_tensor_create(ctx, NNT_FP32, i < 8 ? 4 : 3, i < 8 ? qs : ls, qt, &t[i]));
    static const int INPUTS[4] = {0, 1, 2, 4};   /* q, k, v, dout */
    for (int i = 0; i < 4; i++) {
        int64_t n = B * NH * T * HD;
        float *r = test_random_f32(n, 70 + (unsigned)i, -1, 1);
        EXPECT_OK(nnt_tensor_copy_from_host(t[INPUTS[i]], r, (size_t)n * sizeof *r));
        free(r);
    }
    test_make_tmpdir("packed-trace");
    float *out[2][4];
    long long tasks[2][2];
    for (int w = 0; w < 2; w++) {
        nnt_tensor_attention_options ao = NNT_TENSOR_ATTENTION_OPTIONS_INIT;
        ao.positions = w ? unknown : known;
        const char *table = test_tmp_path("table.txt");
        EXPECT_OK(nnt_trace_start(ctx));
        EXPECT_OK(nnt_tensor_attention_ex(t[0], t[1], t[2], &ao, t[3], t[8]));
        EXPECT_OK(nnt_tensor_attention_backward_ex(t[0], t[1], t[2], t[3], t[8], t[4], &ao, t[5],
                                                   t[6], t[7]));
        EXPECT_OK(nnt_trace_stop(ctx, NULL, table));
        tasks[w][0] = test_traced_count(table, "nnt_attn_fwd_block");
        tasks[w][1] = test_traced_count(table, "nnt_attn_bwd_block");
        int64_t n;
        for (int i = 0; i < 4; i++)   /* o, dq, dk, dv */
            out[w][i] = test_to_host(t[i ? 4 + i : 3], &n);
    }
    /* the pairs (i, j <= i) of tiles of 3 whose keys reach an example of the query tile */
    long long want = 0, all = 0;
    for (int64_t b = 0; b < B; b++)
        for (int64_t i = 0; i * TT < T; i++)
            for (int64_t j = 0; j <= i; j++) {
                int64_t begin = T;
                for (int64_t r = i * TT; r < (i + 1) * TT && r < T; r++)
                    begin = r - e.positions[b * T + r] < begin ? r - e.positions[b * T + r]
                                                               : begin;
                want += (j + 1) * TT - 1 >= begin;
                all++;
            }
    printf("test_packed skipped pairs: %lld of %lld tile pairs get tasks (forward %lld, "
           "backward %lld; positions not known on the host: %lld, %lld)\n", want, all,
           tasks[0][0], tasks[0][1], tasks[1][0], tasks[1][1]);
    ck_assert_int_eq(tasks[0][0], want);
    ck_assert_int_eq(tasks[0][1], want);
    ck_assert_int_eq(tasks[1][0], all);
    ck_assert_int_eq(tasks[1][1], all);
    ck_assert_int_lt(want, all);
    for (int i = 0; i < 4; i++) {
        ck_assert_msg(memcmp(out[0][i], out[1][i], (size_t)(B * NH * T * HD) * sizeof(float))
                      == 0, "output %d differs when pairs are skipped", i);
        free(out[0][i]), free(out[1][i]);
    }
    /* filled (every position 0): the values copied before are forgotten, nothing skipped */
    EXPECT_OK(nnt_tensor_fill(known, 0.0));
    nnt_tensor_attention_options ao = NNT_TENSOR_ATTENTION_OPTIONS_INIT;
    ao.positions = known;
    const char *table = test_tmp_path("table.txt");
    EXPECT_OK(nnt_trace_start(ctx));
    EXPECT_OK(nnt_tensor_attention_ex(t[0], t[1], t[2], &ao, t[3], t[8]));
    EXPECT_OK(nnt_trace_stop(ctx, NULL, table));
    ck_assert_int_eq(test_traced_count(table, "nnt_attn_fwd_block"), all);
    for (int i = 0; i < 9; i++)
        nnt_tensor_destroy(t[i]);
    nnt_tensor_destroy(known), nnt_tensor_destroy(swapped), nnt_tensor_destroy(unknown);
    test_remove_tmpdir();
    free_examples(&e);
}
END_TEST

static Suite *packed_suite(void)
{
    Suite *s = suite_create("packed");
    TCase *tc = tcase_create("packed");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 240);
    tcase_add_loop_test(tc, test_reference, 0, 3 * NMODELS);
    tcase_add_loop_test(tc, test_plain_positions, 0, 3 * NMODELS);
    tcase_add_loop_test(tc, test_adamw, 0, NMODELS);
    tcase_add_loop_test(tc, test_trainer, 0, NMODELS);
    tcase_add_test(tc, test_skipped_pairs);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return run_suite(packed_suite());
}
