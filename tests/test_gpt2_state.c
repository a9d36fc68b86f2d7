/* SPDX-License-Identifier: MIT */
/* Files of a GPT layer through the public API: the Hugging Face safetensors export
 * (nnt_gpt_save_safetensors) and the training state of a GPT trained with an nnt_optim AdamW
 * (nnt_train_state_save / nnt_train_state_load). Against the fixtures of
 * tests/fixtures/gpt2_tiny (see the README there):
 *   - save_safetensors: the fixture's model.safetensors loaded and saved again holds the same
 *     tensors byte for byte (names, dtypes, shapes, values) and reloads to the same parameters;
 *     the llm.c fixture exports to the same file content;
 *   - resume: 10 AdamW steps in one run and 4 + save + (new context, new model, new optimizer)
 *     load + 6 give bit-identical losses and final parameters, for two tilings; a state saved
 *     before any step resumes like the model it was saved from;
 *   - the user section round trip and the file's layout (every parameter under its name and
 *     shape with its values, the AdamW moments after a step), configuration mismatches
 *     (message naming both shapes), truncated and corrupted files (every header byte and
 *     samples of the data flipped) refused with the model untouched, failed saves that must
 *     leave the previous file intact, bad arguments.
 * The state format itself on small tensors (every corruption, other optimizer kinds, SGD,
 * schedules, NULL arguments) is tests/test_optim.c's. The fixture files and the saved files
 * are read with lib/io's safetensors reader (hence the library objects are linked); the
 * model, optimizer and files are made through nnt.h only. */
#include "testutil.h"
#include "fixture_st.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <sys/resource.h>
#ifdef __linux__
#include <sys/fsuid.h>
#endif
#include <sys/stat.h>
#include <unistd.h>

/* The fixture's configuration. */
enum { V = 67, MAXT = 16, L = 2, NH = 3, C = 24, B = 2, T = 12, NSTEPS = 10, SPLIT = 4 };

static const nnt_gpt_config CFG = {sizeof(nnt_gpt_config), V, MAXT, L, NH, C};

/* batch, seq, channels, hidden, vocab, heads, head_dim; -1 = whole dimension */
static const nnt_tiling TILINGS[] = {
    {sizeof(nnt_tiling), -1, -1, -1, -1, -1, -1, -1},
    {sizeof(nnt_tiling), 1, 5, 5, 40, 10, 2, 3},
    {sizeof(nnt_tiling), 1, 7, 9, 25, 67, 3, 5},
};

/* ---- files ------------------------------------------------------------------------- */

static void spit(const char *path, const unsigned char *buf, size_t len)
{
    FILE *f = fopen(path, "wb");
    ck_assert_msg(f != NULL, "cannot create %s", path);
    ck_assert_int_eq(fwrite(buf, 1, len, f), len);
    ck_assert_int_eq(fclose(f), 0);
}

/* Number of entries in the test's directory (temporary files left behind show up here). */
static int dir_entries(void)
{
    DIR *d = opendir(test_tmpdir());
    ck_assert_ptr_nonnull(d);
    int n = 0;
    for (struct dirent *e; (e = readdir(d)) != NULL;)
        n += strcmp(e->d_name, ".") && strcmp(e->d_name, "..");
    closedir(d);
    return n;
}

/* ---- context, model, optimizer ------------------------------------------------------ */

static nnt_ctx *ctx;

static void setup(void)
{
    ctx = test_ctx();
    test_make_tmpdir("test-gpt2-state");
}

static void teardown(void)
{
    if (!getenv("NNT_TEST_KEEP_TMP"))   /* keep the files to inspect them */
        test_remove_tmpdir();
    EXPECT_OK(nnt_ctx_destroy(ctx));
    ctx = NULL;
}

/* The llm.c fixture for batches (b, s). */
static nnt_layer *load_model(const nnt_tiling *t, int64_t b, int64_t s)
{
    nnt_layer *m = NULL;
    EXPECT_OK(nnt_gpt_load_llmc(ctx, fixture_path("gpt2_tiny.llmc.bin"), b, s, t, &m));
    ck_assert_ptr_nonnull(m);
    return m;
}

/* A fresh (nnt_layer_init) model of cfg. */
static nnt_layer *new_model(const nnt_gpt_config *cfg, const nnt_tiling *t, int64_t b,
                            int64_t s)
{
    nnt_layer *m = NULL;
    EXPECT_OK(nnt_gpt_create(ctx, cfg, b, s, t, &m));
    ck_assert_ptr_nonnull(m);
    return m;
}

/* AdamW lr 1e-3, weight decay 0.1 (on the layer's default decay flags), every parameter. */
static nnt_optim *new_optim(nnt_layer *m)
{
    nnt_optim_options o = NNT_OPTIM_OPTIONS_INIT;
    o.kind = NNT_OPTIM_ADAMW;
    o.lr = 1e-3;
    o.weight_decay = 0.1;
    nnt_optim *opt = NULL;
    EXPECT_OK(nnt_optim_create(ctx, &o, &opt));
    EXPECT_OK(nnt_optim_add_layer(opt, m));
    return opt;
}

static int64_t step_of(const nnt_optim *opt)
{
    nnt_optim_stats st = {sizeof st, 0, 0, 0};
    EXPECT_OK(nnt_optim_stats_get(opt, &st));
    return st.step;
}

static int64_t param_count(const nnt_layer *m)
{
    int64_t n = 0;
    EXPECT_OK(nnt_layer_num_params(m, &n, NULL));
    return n;
}

/* All parameters, one after the other in nnt_layer_param's order, malloc'd. */
static float *export_params(nnt_layer *m, int64_t *total)
{
    int64_t count = 0, n = 0, at = 0;
    EXPECT_OK(nnt_layer_num_params(m, &count, &n));
    float *all = malloc((size_t)n * sizeof(float));
    ck_assert_ptr_nonnull(all);
    for (int64_t i = 0; i < count; i++) {
        nnt_tensor *v = test_param_at(m, i).value;
        int64_t k = 0;
        EXPECT_OK(nnt_tensor_numel(v, &k));
        ck_assert_int_le(at + k, n);
        EXPECT_OK(nnt_tensor_copy_to_host(v, all + at, (size_t)k * sizeof(float)));
        at += k;
    }
    ck_assert_int_eq(at, n);
    *total = n;
    return all;
}

/* a and b hold the same parameters (names, order, bits). */
static void expect_same_params(nnt_layer *a, nnt_layer *b, const char *what)
{
    int64_t count = param_count(a);
    ck_assert_int_eq(count, param_count(b));
    for (int64_t i = 0; i < count; i++) {
        nnt_param_info pa = test_param_at(a, i), pb = test_param_at(b, i);
        ck_assert_str_eq(pa.name, pb.name);
        int64_t na = 0, nb = 0;
        float *va = test_to_host(pa.value, &na), *vb = test_to_host(pb.value, &nb);
        ck_assert_int_eq(na, nb);
        ck_assert_msg(memcmp(va, vb, (size_t)na * sizeof(float)) == 0, "%s: %s differs", what,
                      pa.name);
        free(va);
        free(vb);
    }
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

/* ---- training on the fixture's batches ---------------------------------------------- */

typedef struct batches {
    int32_t *tokens, *targets;   /* (NSTEPS, B, T) */
} batches;

static batches read_batches(void)
{
    nnt_st_reader *r = fixture_open_st("train.safetensors");
    batches b = {fixture_read(r, "train_tokens", NNT_IO_I32, NULL),
                 fixture_read(r, "train_targets", NNT_IO_I32, NULL)};
    nnt_st_close(r);
    return b;
}

static void free_batches(batches *b)
{
    free(b->tokens);
    free(b->targets);
}

/* Steps [from, to) of the fixture protocol; losses[s] for each. */
static void train(nnt_layer *m, nnt_optim *opt, const batches *b, int from, int to,
                  double *losses)
{
    for (int s = from; s < to; s++) {
        nnt_tensor *x = ids_tensor(b->tokens + s * B * T, 2, 4);
        nnt_tensor *y = ids_tensor(b->targets + s * B * T, 1, 12);
        EXPECT_OK(nnt_layer_set_targets(m, y));
        EXPECT_OK(nnt_layer_zero_grad(m));
        EXPECT_OK(nnt_layer_forward(m, x, NULL));
        EXPECT_OK(nnt_layer_loss(m, &losses[s]));
        EXPECT_OK(nnt_layer_backward(m, NULL, NULL));
        EXPECT_OK(nnt_optim_step(opt));
        nnt_tensor_destroy(x);
        nnt_tensor_destroy(y);
    }
}

/* ---- Hugging Face export ---------------------------------------------------------- */

/* Every tensor of a's file is in b's with the same dtype, shape and bytes, and the other
 * way round (same count). */
static void expect_same_entries(const nnt_st_reader *a, const nnt_st_reader *b)
{
    ck_assert_uint_eq(nnt_st_count(a), nnt_st_count(b));
    for (size_t i = 0; i < nnt_st_count(a); i++) {
        const nnt_st_entry *ea = nnt_st_entry_at(a, i);
        const nnt_st_entry *eb = nnt_st_find(b, ea->name);
        ck_assert_msg(eb != NULL, "saved file lacks %s", ea->name);
        ck_assert_int_eq(ea->dtype, eb->dtype);
        ck_assert_int_eq(ea->ndim, eb->ndim);
        for (int d = 0; d < ea->ndim; d++)
            ck_assert_int_eq(ea->shape[d], eb->shape[d]);
        ck_assert_uint_eq(ea->nbytes, eb->nbytes);
        void *da = fixture_read(a, ea->name, ea->dtype, NULL);
        void *db = fixture_read(b, ea->name, eb->dtype, NULL);
        ck_assert_msg(memcmp(da, db, (size_t)ea->nbytes) == 0, "%s: bytes differ", ea->name);
        free(da);
        free(db);
    }
}

START_TEST(test_save_safetensors)
{
    const char *path = test_tmp_path("saved.safetensors");
    nnt_layer *a = NULL, *b = NULL;
    EXPECT_OK(nnt_gpt_load_safetensors(ctx, fixture_path("model.safetensors"), &CFG, B, T,
                                       &TILINGS[2], &a));
    EXPECT_OK(nnt_gpt_save_safetensors(a, path));
    EXPECT_OK(nnt_gpt_load_safetensors(ctx, path, &CFG, B, T, &TILINGS[1], &b));
    expect_same_params(a, b, "reloaded HF export");
    nnt_st_reader *fix = fixture_open_st("model.safetensors"), *got = fixture_open_st_path(path);
    expect_same_entries(fix, got);
    ck_assert_ptr_null(nnt_st_find(got, "lm_head.weight"));
    ck_assert_str_eq(nnt_st_metadata_get(got, "format"), "pt");
    nnt_st_close(fix);
    nnt_st_close(got);
    /* the llm.c fixture exports to the same tensors too */
    nnt_layer *c = load_model(NULL, B, T);
    EXPECT_OK(nnt_gpt_save_safetensors(c, path));
    fix = fixture_open_st("model.safetensors");
    got = fixture_open_st_path(path);
    expect_same_entries(fix, got);
    nnt_st_close(fix);
    nnt_st_close(got);
    ck_assert_int_eq(dir_entries(), 1);   /* no temporary file left */
    /* (a NULL path: tests/test_layer_gpt.c, test_errors) */
    EXPECT_FAIL_MSG(nnt_gpt_save_safetensors(NULL, path), NNT_E_INVAL,
                    "nnt_gpt_save_safetensors");
    EXPECT_FAIL_MSG(nnt_gpt_save_safetensors(c, "/nonexistent-dir/x.safetensors"), NNT_E_IO,
                    "nnt_gpt_save_safetensors");
    nnt_layer_destroy(a);
    nnt_layer_destroy(b);
    nnt_layer_destroy(c);
}
END_TEST

/* ---- resuming --------------------------------------------------------------------- */

/* 10 steps in one run == 4 steps, save, new context, model and optimizer, load, 6 steps:
 * the same bits for every loss and every final parameter. Loop index: the tiling. */
START_TEST(test_resume_bit_exact)
{
    const nnt_tiling *tiling = &TILINGS[_i];
    const char *path = test_tmp_path("state.safetensors");
    batches b = read_batches();
    double straight[NSTEPS], resumed[NSTEPS];
    int64_t n1 = 0, n2 = 0;

    nnt_layer *m = load_model(tiling, B, T);
    nnt_optim *opt = new_optim(m);
    train(m, opt, &b, 0, NSTEPS, straight);
    float *want = export_params(m, &n1);
    nnt_optim_destroy(opt);
    nnt_layer_destroy(m);
    EXPECT_OK(nnt_ctx_destroy(ctx));

    ctx = test_ctx();
    m = load_model(tiling, B, T);
    opt = new_optim(m);
    train(m, opt, &b, 0, SPLIT, resumed);
    nnt_train_state st = {sizeof st, SPLIT, {1, 2, 3, 4}, "{\"lr\": 0.001}"};
    EXPECT_OK(nnt_train_state_save(opt, path, &st));
    nnt_optim_destroy(opt);
    nnt_layer_destroy(m);
    EXPECT_OK(nnt_ctx_destroy(ctx));

    /* a fresh model (nnt_layer_init's weights, not the fixture's) gets everything from the
     * file */
    ctx = test_ctx();
    m = new_model(&CFG, tiling, B, T);
    opt = new_optim(m);
    nnt_train_state got = NNT_TRAIN_STATE_INIT;
    EXPECT_OK(nnt_train_state_load(opt, path, &got));
    ck_assert_int_eq(step_of(opt), SPLIT);
    ck_assert_uint_eq(got.data_pos, SPLIT);
    for (int i = 0; i < 4; i++)
        ck_assert_uint_eq(got.rng[i], (uint64_t)i + 1);
    ck_assert_str_eq(got.options, "{\"lr\": 0.001}");
    train(m, opt, &b, (int)got.data_pos, NSTEPS, resumed);
    nnt_train_state_clear(&got);
    ck_assert_int_eq(step_of(opt), NSTEPS);
    float *have = export_params(m, &n2);
    ck_assert_int_eq(n1, n2);
    for (int s = 0; s < NSTEPS; s++)
        ck_assert_msg(memcmp(&straight[s], &resumed[s], sizeof(double)) == 0,
                      "step %d: loss %.17g resumed, %.17g straight", s, resumed[s], straight[s]);
    ck_assert_msg(memcmp(want, have, (size_t)n1 * sizeof(float)) == 0,
                  "final parameters differ after resuming");
    /* and it trained */
    ck_assert(resumed[NSTEPS - 1] < resumed[0]);
    printf("test_gpt2_state resume [tiling %d]: 10 losses and %lld final parameters "
           "bit-identical (last loss %.9f)\n", _i, (long long)n1, resumed[NSTEPS - 1]);
    free(want);
    free(have);
    nnt_optim_destroy(opt);
    nnt_layer_destroy(m);
    free_batches(&b);
}
END_TEST

/* A state saved before any step (no moments yet) resumes like the model it was saved from. */
START_TEST(test_resume_from_step0)
{
    const char *path = test_tmp_path("state0");
    batches b = read_batches();
    double l1[NSTEPS], l2[NSTEPS];
    nnt_layer *a = load_model(&TILINGS[1], B, T), *c = new_model(&CFG, &TILINGS[1], B, T);
    nnt_optim *oa = new_optim(a), *oc = new_optim(c);
    EXPECT_OK(nnt_train_state_save(oa, path, NULL));
    train(a, oa, &b, 0, 2, l1);
    EXPECT_OK(nnt_train_state_load(oc, path, NULL));
    ck_assert_int_eq(step_of(oc), 0);
    train(c, oc, &b, 0, 2, l2);
    ck_assert(memcmp(l1, l2, 2 * sizeof(double)) == 0);
    expect_same_params(a, c, "resumed from step 0");
    nnt_optim_destroy(oa);
    nnt_optim_destroy(oc);
    nnt_layer_destroy(a);
    nnt_layer_destroy(c);
    free_batches(&b);
}
END_TEST

/* ---- user section, layout, configuration --------------------------------------------- */

/* "(d0, d1, ...)" of a tensor's shape. */
static void shape_str(nnt_tensor *t, char *buf, size_t cap)
{
    int nd = 0;
    int64_t shape[NNT_MAX_DIMS];
    EXPECT_OK(nnt_tensor_ndim(t, &nd));
    EXPECT_OK(nnt_tensor_shape(t, shape));
    size_t used = (size_t)snprintf(buf, cap, "(");
    for (int d = 0; d < nd && used < cap; d++)
        used += (size_t)snprintf(buf + used, cap - used, "%s%lld", d ? ", " : "",
                                 (long long)shape[d]);
    if (used < cap)
        snprintf(buf + used, cap - used, ")");
}

/* The file's entry prefix.name has the shape of t, and (values) its contents. */
static void expect_entry(const nnt_st_reader *r, const char *prefix, const char *name,
                         nnt_tensor *t, int values)
{
    char full[256];
    snprintf(full, sizeof full, "%s.%s", prefix, name);
    const nnt_st_entry *e = nnt_st_find(r, full);
    ck_assert_msg(e != NULL, "the state has no %s", full);
    int nd = 0;
    int64_t shape[NNT_MAX_DIMS];
    EXPECT_OK(nnt_tensor_ndim(t, &nd));
    EXPECT_OK(nnt_tensor_shape(t, shape));
    ck_assert_int_eq(e->dtype, NNT_IO_F32);
    ck_assert_int_eq(e->ndim, nd);
    for (int d = 0; d < nd; d++)
        ck_assert_int_eq(e->shape[d], shape[d]);
    if (values) {
        int64_t n = 0;
        float *want = test_to_host(t, &n);
        float *got = fixture_read(r, full, NNT_IO_F32, NULL);
        ck_assert_int_eq(e->numel, n);
        ck_assert_msg(memcmp(want, got, (size_t)n * sizeof(float)) == 0, "%s: values differ",
                      full);
        free(want);
        free(got);
    }
}

START_TEST(test_user_section)
{
    const char *path = test_tmp_path("state");
    /* quotes, backslash, control characters, non-ASCII UTF-8 */
    const char *opts = "{\"data\": \"a\\\\b \\\"q\\\"\", \"note\": \"tab\there\nline\", "
                       "\"\xc3\xa9t\xc3\xa9\": [1, 2.5e-3]}";
    nnt_layer *m = load_model(&TILINGS[1], B, T);
    nnt_optim *om = new_optim(m);
    nnt_train_state st = {sizeof st, UINT64_MAX, {0, 1, UINT64_MAX, 0x0123456789abcdefULL},
                          NULL};
    st.options = (char *)opts;
    EXPECT_OK(nnt_train_state_save(om, path, &st));
    /* B, T and the tiling may differ */
    nnt_layer *other = new_model(&CFG, &TILINGS[2], 1, 5);
    nnt_optim *oo = new_optim(other);
    nnt_train_state got = {sizeof got, 7, {7, 7, 7, 7}, NULL};
    EXPECT_OK(nnt_train_state_load(oo, path, &got));
    ck_assert_uint_eq(got.data_pos, UINT64_MAX);
    for (int i = 0; i < 4; i++)
        ck_assert_uint_eq(got.rng[i], st.rng[i]);
    ck_assert_str_eq(got.options, opts);
    ck_assert_int_eq(step_of(oo), 0);
    expect_same_params(m, other, "other tiling, B and T");
    nnt_train_state_clear(&got);
    ck_assert_ptr_null(got.options);
    /* no user section: zeros and "" */
    EXPECT_OK(nnt_train_state_save(om, path, NULL));
    got.data_pos = 7;
    got.rng[1] = 7;
    EXPECT_OK(nnt_train_state_load(oo, path, &got));
    ck_assert_uint_eq(got.data_pos, 0);
    ck_assert_uint_eq(got.rng[0] | got.rng[1] | got.rng[2] | got.rng[3], 0);
    ck_assert_str_eq(got.options, "");
    nnt_train_state_clear(&got);

    /* the file's layout before any step: every parameter under its name, with its shape
     * and values, nothing else */
    int64_t count = param_count(m);
    nnt_st_reader *r = fixture_open_st_path(path);
    ck_assert_uint_eq(nnt_st_count(r), (size_t)count);
    for (int64_t i = 0; i < count; i++) {
        nnt_param_info p = test_param_at(m, i);
        expect_entry(r, "param", p.name, p.value, 1);
    }
    const nnt_st_entry *e = nnt_st_find(r, "param.wte.weight");
    ck_assert(e && e->ndim == 2 && e->shape[0] == V && e->shape[1] == C);
    e = nnt_st_find(r, "param.h.1.attn.q.weight");
    ck_assert(e && e->ndim == 3 && e->shape[0] == NH && e->shape[1] == C / NH &&
              e->shape[2] == C);
    ck_assert_str_eq(nnt_st_metadata_get(r, "format"), "nnt-train-state");
    ck_assert_str_eq(nnt_st_metadata_get(r, "optimizer"), "adamw");
    ck_assert_str_eq(nnt_st_metadata_get(r, "step"), "0");
    ck_assert_str_eq(nnt_st_metadata_get(r, "rng"), "[0,0,0,0]");
    nnt_st_close(r);

    /* after a step: the parameters and both AdamW moments of each */
    batches b = read_batches();
    double loss[1];
    train(m, om, &b, 0, 1, loss);
    free_batches(&b);
    EXPECT_OK(nnt_train_state_save(om, path, NULL));
    r = fixture_open_st_path(path);
    ck_assert_uint_eq(nnt_st_count(r), 3 * (size_t)count);
    for (int64_t i = 0; i < count; i++) {
        nnt_param_info p = test_param_at(m, i);
        expect_entry(r, "param", p.name, p.value, 1);
        expect_entry(r, "adam_m", p.name, p.value, 0);
        expect_entry(r, "adam_v", p.name, p.value, 0);
    }
    e = nnt_st_find(r, "adam_v.h.0.attn.q.weight");
    ck_assert(e && e->ndim == 3 && e->shape[0] == NH && e->shape[1] == C / NH &&
              e->shape[2] == C);
    ck_assert_str_eq(nnt_st_metadata_get(r, "step"), "1");
    nnt_st_close(r);
    nnt_optim_destroy(om);
    nnt_optim_destroy(oo);
    nnt_layer_destroy(m);
    nnt_layer_destroy(other);
}
END_TEST

/* Loading into a model of another configuration fails, naming the file and both shapes
 * (both parameter counts when the number of layers differs), and changes nothing. */
START_TEST(test_config_mismatch)
{
    const char *path = test_tmp_path("state");
    nnt_layer *m = load_model(NULL, B, T);
    nnt_optim *om = new_optim(m);
    EXPECT_OK(nnt_train_state_save(om, path, NULL));
    nnt_gpt_config bad[5];
    for (int i = 0; i < 5; i++)
        bad[i] = CFG;
    bad[0].heads = 4;              /* heads: q, k, v (NH, hd, C) */
    bad[1].layers = 1;             /* layers: fewer parameters */
    bad[2].vocab = V + 1;          /* vocabulary: wte */
    bad[3].max_seq = MAXT - 1;     /* maxT: wpe */
    bad[4].channels = 2 * C;       /* channels: all */
    int64_t count = param_count(m);
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        nnt_layer *o = new_model(&bad[i], NULL, B, T < bad[i].max_seq ? T : bad[i].max_seq);
        nnt_optim *oo = new_optim(o);
        int64_t n = 0;
        float *before = export_params(o, &n);
        /* what the message must name: the first parameter of o (in the optimizer's order)
         * whose shape differs from the saved one and both its shapes, or the two counts */
        char want1[160] = "", want2[160] = "", want3[160] = "";
        int64_t ocount = param_count(o);
        if (ocount != count) {
            snprintf(want1, sizeof want1, "%lld tensors", (long long)count);
            snprintf(want2, sizeof want2, "not %lld", (long long)ocount);
        } else {
            for (int64_t k = 0; k < ocount && !*want1; k++) {
                nnt_param_info po = test_param_at(o, k);
                for (int64_t j = 0; j < count; j++) {
                    nnt_param_info pm = test_param_at(m, j);
                    if (strcmp(pm.name, po.name))
                        continue;
                    shape_str(pm.value, want1, sizeof want1);
                    shape_str(po.value, want2, sizeof want2);
                    snprintf(want3, sizeof want3, "param.%s", po.name);
                    if (!strcmp(want1, want2))
                        want1[0] = want2[0] = want3[0] = 0;
                    break;
                }
            }
            ck_assert_msg(*want1, "case %zu: no parameter of another shape", i);
        }
        nnt_train_state st = {sizeof st, 42, {0, 0, 0, 0}, NULL};
        EXPECT_FAIL_MSG(nnt_train_state_load(oo, path, &st), NNT_E_FORMAT,
                        "nnt_train_state_load");
        const char *msg = nnt_ctx_last_error(NULL);
        ck_assert_msg(strstr(msg, want1) && strstr(msg, want2) && strstr(msg, want3) &&
                      strstr(msg, path), "case %zu: message '%s' does not name %s, %s, %s "
                      "and the file", i, msg, want1, want2, want3);
        ck_assert_uint_eq(st.data_pos, 42);
        ck_assert_ptr_null(st.options);
        ck_assert_int_eq(step_of(oo), 0);
        int64_t n2 = 0;
        float *after = export_params(o, &n2);
        ck_assert_msg(n == n2 && memcmp(before, after, (size_t)n * sizeof(float)) == 0,
                      "case %zu: the model changed", i);
        free(before);
        free(after);
        nnt_optim_destroy(oo);
        nnt_layer_destroy(o);
    }
    nnt_optim_destroy(om);
    nnt_layer_destroy(m);
}
END_TEST

/* ---- damaged files ---------------------------------------------------------------- */

/* Load must fail with NNT_E_FORMAT and change neither the model (checked when before is
 * given), the optimizer's step (3) nor st. */
static void expect_format_error(nnt_layer *m, nnt_optim *opt, const char *path,
                                const float *before, int64_t n, const char *what)
{
    nnt_train_state st = {sizeof st, 42, {0, 0, 0, 0}, NULL};
    int rc = nnt_train_state_load(opt, path, &st);
    ck_assert_msg(rc == NNT_E_FORMAT, "%s: load returned %d (%s)", what, rc,
                  nnt_ctx_last_error(NULL));
    ck_assert_msg(strstr(nnt_ctx_last_error(NULL), "nnt_train_state_load") != NULL,
                  "%s: message '%s'", what, nnt_ctx_last_error(NULL));
    ck_assert(st.data_pos == 42 && st.options == NULL);
    ck_assert(st.rng[0] == 0 && st.rng[3] == 0);
    ck_assert_int_eq(step_of(opt), 3);
    if (before) {
        int64_t n2 = 0;
        float *after = export_params(m, &n2);
        ck_assert_msg(n2 == n && memcmp(before, after, (size_t)n * sizeof(float)) == 0,
                      "%s: the model changed", what);
        free(after);
    }
}

START_TEST(test_truncated_and_corrupt)
{
    const char *path = test_tmp_path("state"), *bad = test_tmp_path("bad");
    batches b = read_batches();
    double losses[NSTEPS];
    nnt_layer *m = load_model(&TILINGS[1], B, T);
    nnt_optim *opt = new_optim(m);
    train(m, opt, &b, 0, 3, losses);
    nnt_train_state st = {sizeof st, 3, {5, 6, 7, 8}, "{\"batch\": 2}"};
    EXPECT_OK(nnt_train_state_save(opt, path, &st));
    int64_t n = 0;
    float *before = export_params(m, &n);
    size_t len = 0;
    unsigned char *file = slurp(path, &len);
    ck_assert_uint_ge(len, 8);
    size_t header = 8 + (size_t)nnt_io_le64(file);
    ck_assert_uint_lt(header, len);

    /* truncations */
    const size_t cuts[] = {0, 1, 7, 8, 9, header / 2, header - 1, header, header + 1,
                           header + 4, (header + len) / 2, len - 4, len - 1};
    for (size_t i = 0; i < sizeof cuts / sizeof cuts[0]; i++) {
        char what[64];
        snprintf(what, sizeof what, "truncated to %zu of %zu bytes", cuts[i], len);
        spit(bad, file, cuts[i]);
        expect_format_error(m, opt, bad, i < 3 ? before : NULL, n, what);
    }
    /* a byte appended */
    file[len] = 0;
    spit(bad, file, len + 1);
    expect_format_error(m, opt, bad, NULL, n, "one byte appended");

    /* one bit flipped: every header byte, and data bytes spread over every tensor */
    spit(bad, file, len);
    int fd = open(bad, O_WRONLY);
    ck_assert_int_ge(fd, 0);
    int flips = 0;
    for (size_t at = 0; at < len; at += at < header ? 1 : 997) {
        unsigned char c = (unsigned char)(file[at] ^ (1u << (at % 8)));
        char what[64];
        snprintf(what, sizeof what, "bit %u of byte %zu flipped", (unsigned)(at % 8), at);
        ck_assert_int_eq(pwrite(fd, &c, 1, (off_t)at), 1);
        expect_format_error(m, opt, bad, NULL, n, what);
        ck_assert_int_eq(pwrite(fd, &file[at], 1, (off_t)at), 1);
        flips++;
    }
    /* the last float of the last tensor */
    unsigned char c = file[len - 1] ^ 0x80;
    ck_assert_int_eq(pwrite(fd, &c, 1, (off_t)(len - 1)), 1);
    expect_format_error(m, opt, bad, before, n, "last byte flipped");
    close(fd);

    /* a safetensors file that is not a state; a missing file */
    expect_format_error(m, opt, fixture_path("model.safetensors"), before, n, "HF model file");
    EXPECT_FAIL_MSG(nnt_train_state_load(opt, test_tmp_path("missing"), NULL), NNT_E_IO,
                    "nnt_train_state_load");
    /* the intact file still loads */
    EXPECT_OK(nnt_train_state_load(opt, path, NULL));
    ck_assert_int_eq(step_of(opt), 3);
    printf("test_gpt2_state: %zu-byte state (header %zu): %zu truncations and %d bit flips "
           "rejected with NNT_E_FORMAT\n", len, header, sizeof cuts / sizeof cuts[0], flips);
    free(before);
    free(file);
    nnt_optim_destroy(opt);
    nnt_layer_destroy(m);
    free_batches(&b);
}
END_TEST

/* ---- failed saves keep the previous file -------------------------------------------- */

static void expect_unchanged(const char *path, const unsigned char *old, size_t len,
                             const char *what)
{
    size_t n = 0;
    unsigned char *now = slurp(path, &n);
    ck_assert_msg(n == len && memcmp(now, old, len) == 0, "%s: the previous file changed",
                  what);
    free(now);
    ck_assert_msg(dir_entries() == 1, "%s: a temporary file was left behind", what);
}

START_TEST(test_failed_save_keeps_old)
{
    const char *path = test_tmp_path("state");
    nnt_layer *m = load_model(NULL, B, T);
    nnt_optim *opt = new_optim(m);
    nnt_train_state st = {sizeof st, 1, {1, 1, 1, 1}, "old"};
    EXPECT_OK(nnt_train_state_save(opt, path, &st));
    size_t len = 0;
    unsigned char *old = slurp(path, &len);
    ck_assert_uint_gt(len, 16384);   /* larger than the file size limit below */

    /* options that are not UTF-8: refused after the temporary file was created */
    st.options = "bad \xff byte";
    st.data_pos = 2;
    int rc = nnt_train_state_save(opt, path, &st);
    ck_assert_int_ne(rc, 0);
    ck_assert(strstr(nnt_ctx_last_error(NULL), "nnt_train_state_save") != NULL);
    expect_unchanged(path, old, len, "invalid options");

    /* the disk fills up half way (a file size limit makes write() fail with EFBIG) */
    struct rlimit was, small = {16384, 16384};
    ck_assert_int_eq(getrlimit(RLIMIT_FSIZE, &was), 0);
    small.rlim_max = was.rlim_max;
    signal(SIGXFSZ, SIG_IGN);
    ck_assert_int_eq(setrlimit(RLIMIT_FSIZE, &small), 0);
    st.options = "new";
    EXPECT_FAIL_MSG(nnt_train_state_save(opt, path, &st), NNT_E_IO, "nnt_train_state_save");
    EXPECT_FAIL_MSG(nnt_gpt_save_safetensors(m, path), NNT_E_IO, "nnt_gpt_save_safetensors");
    ck_assert_int_eq(setrlimit(RLIMIT_FSIZE, &was), 0);
    expect_unchanged(path, old, len, "file size limit");

    /* an unwritable directory. Root writes anyway, so as root the save runs with the
     * file-system uid of nobody (setfsuid: this thread only, and it drops the capabilities
     * that override permissions); where that is not possible the case is not run and says so */
    ck_assert_int_eq(chmod(test_tmpdir(), 0555), 0);
    int as_nobody = 0, can_run = geteuid() != 0;
#ifdef __linux__
    if (!can_run) {
        setfsuid(65534);
        as_nobody = can_run = setfsuid((uid_t)-1) == 65534;
    }
#endif
    if (can_run) {
        EXPECT_FAIL_MSG(nnt_train_state_save(opt, path, &st), NNT_E_IO, "nnt_train_state_save");
        EXPECT_FAIL_MSG(nnt_gpt_save_safetensors(m, path), NNT_E_IO, "nnt_gpt_save_safetensors");
    } else {
        printf("test_gpt2_state: NOT RUN: the read-only directory case (root, no setfsuid)\n");
    }
#ifdef __linux__
    if (as_nobody) {
        setfsuid(0);
        ck_assert_int_eq(setfsuid((uid_t)-1), 0);
    }
#endif
    ck_assert_int_eq(chmod(test_tmpdir(), 0755), 0);
    expect_unchanged(path, old, len, "read-only directory");
    EXPECT_FAIL_MSG(nnt_train_state_save(opt, "/nonexistent-dir/state", &st), NNT_E_IO,
                    "nnt_train_state_save");

    /* the old state is still good; a successful save replaces it */
    nnt_train_state got = NNT_TRAIN_STATE_INIT;
    EXPECT_OK(nnt_train_state_load(opt, path, &got));
    ck_assert_str_eq(got.options, "old");
    ck_assert_uint_eq(got.data_pos, 1);
    nnt_train_state_clear(&got);
    EXPECT_OK(nnt_train_state_save(opt, path, &st));
    EXPECT_OK(nnt_train_state_load(opt, path, &got));
    ck_assert_str_eq(got.options, "new");
    ck_assert_uint_eq(got.data_pos, 2);
    nnt_train_state_clear(&got);
    ck_assert_int_eq(dir_entries(), 1);
    free(old);
    nnt_optim_destroy(opt);
    nnt_layer_destroy(m);
}
END_TEST

/* A parameter that was never written cannot be saved, and no file is left (a GPT layer's
 * parameters are always written: nnt_gpt_create initialises them, so a bare tensor stands
 * for the never-set model of the old internal API). The NULL arguments of
 * nnt_train_state_save / _load are tests/test_optim.c's (misuse_is_rejected). */
START_TEST(test_unwritten_not_saved)
{
    int64_t shape[2] = {3, 4};
    nnt_tensor *v = NULL, *g = NULL;
    EXPECT_OK(nnt_tensor_create(ctx, NNT_FP32, 2, shape, NULL, &v));
    EXPECT_OK(nnt_tensor_create(ctx, NNT_FP32, 2, shape, NULL, &g));
    nnt_optim *opt = NULL;
    EXPECT_OK(nnt_optim_create(ctx, NULL, &opt));
    EXPECT_OK(nnt_optim_add_param(opt, "w", v, g, 1));
    /* (the message names nnt_tensor_copy_to_host, not nnt_train_state_save: reported) */
    EXPECT_RC(nnt_train_state_save(opt, test_tmp_path("never"), NULL), NNT_E_STATE);
    ck_assert_int_eq(dir_entries(), 0);
    nnt_optim_destroy(opt);
    EXPECT_OK(nnt_tensor_destroy(v));
    EXPECT_OK(nnt_tensor_destroy(g));
}
END_TEST

static Suite *gpt2_state_suite(void)
{
    Suite *s = suite_create("gpt2_state");
    TCase *tc = tcase_create("state");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_save_safetensors);
    tcase_add_loop_test(tc, test_resume_bit_exact, 0, 2);
    tcase_add_test(tc, test_resume_from_step0);
    tcase_add_test(tc, test_user_section);
    tcase_add_test(tc, test_config_mismatch);
    tcase_add_test(tc, test_truncated_and_corrupt);
    tcase_add_test(tc, test_failed_save_keeps_old);
    tcase_add_test(tc, test_unwritten_not_saved);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return run_suite(gpt2_state_suite());
}
