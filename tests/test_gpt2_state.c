/* GPT-2 files written by nnt: the Hugging Face safetensors export and the training state
 * (weights + AdamW moments + step + user section). Against the fixtures of
 * tests/fixtures/gpt2_tiny (see the README there):
 *   - save_safetensors: the fixture's model.safetensors loaded and saved again holds the same
 *     tensors byte for byte and reloads to the same parameters;
 *   - resume: 10 AdamW steps in one run and 4 + save + (new context, new model) load + 6 give
 *     bit-identical losses and final parameters;
 *   - the user section round trip, configuration mismatch, truncated and corrupted files
 *     (every header byte and samples of the data flipped), failed saves that must leave the
 *     previous file intact, bad arguments. */
#include "testutil.h"
#include "fixture.h"

#include "io/io.h"
#include "models/gpt2.h"

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

static const char *const LLMC_NAMES[16] = {
    "wte", "wpe", "ln1w", "ln1b", "qkvw", "qkvb", "attprojw", "attprojb",
    "ln2w", "ln2b", "fcw", "fcb", "fcprojw", "fcprojb", "lnfw", "lnfb"};

/* batch, seq, channels, hidden, vocab, heads, head_dim; 0 = whole dimension */
static const nnt_gpt2_tiling TILINGS[] = {
    {0, 0, 0, 0, 0, 0, 0},
    {1, 5, 5, 40, 10, 2, 3},
    {1, 7, 9, 25, 67, 3, 5},
};

/* ---- files ------------------------------------------------------------------------- */

static nnt_st_reader *open_st(const char *path)
{
    char err[NNT_IO_ERRLEN];
    nnt_st_reader *r = NULL;
    int rc = nnt_st_open(path, &r, err, sizeof err);
    ck_assert_msg(rc == 0, "opening %s: %s", path, err);
    return r;
}

/* A whole entry in its own dtype (raw bytes) or converted to want, malloc'd. */
static void *read_entry(const nnt_st_reader *r, const char *name, nnt_io_dtype want)
{
    char err[NNT_IO_ERRLEN];
    const nnt_st_entry *e = nnt_st_find(r, name);
    ck_assert_msg(e != NULL, "no tensor %s", name);
    void *buf = malloc((size_t)e->numel * nnt_io_dtype_size(want) + 1);
    ck_assert_ptr_nonnull(buf);
    int rc = nnt_st_read(r, e, want, 0, e->numel, buf, err, sizeof err);
    ck_assert_msg(rc == 0, "reading %s: %s", name, err);
    return buf;
}

static void spit(const char *path, const unsigned char *buf, size_t len)
{
    FILE *f = fopen(path, "wb");
    ck_assert_msg(f != NULL, "cannot create %s", path);
    ck_assert_int_eq(fwrite(buf, 1, len, f), len);
    ck_assert_int_eq(fclose(f), 0);
}

/* A fresh directory per test; tmp_file gives paths inside it (in 8 rotating buffers: keep
 * no more than 8 at a time). */
static char tmpdir[64];

static const char *tmp_file(const char *name)
{
    static char path[8][320];
    static int which;
    which = (which + 1) % 8;
    snprintf(path[which], sizeof path[which], "%s/%s", tmpdir, name);
    return path[which];
}

/* Number of entries in tmpdir (temporary files left behind show up here). */
static int dir_entries(void)
{
    DIR *d = opendir(tmpdir);
    ck_assert_ptr_nonnull(d);
    int n = 0;
    for (struct dirent *e; (e = readdir(d)) != NULL;)
        n += strcmp(e->d_name, ".") && strcmp(e->d_name, "..");
    closedir(d);
    return n;
}

static void remove_tmpdir(void)
{
    DIR *d = opendir(tmpdir);
    if (!d)
        return;
    for (struct dirent *e; (e = readdir(d)) != NULL;)
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, ".."))
            unlink(tmp_file(e->d_name));
    closedir(d);
    rmdir(tmpdir);
}

/* ---- context and model ------------------------------------------------------------- */

static nnt_ctx *ctx;

static void setup(void)
{
    ctx = test_ctx();
    snprintf(tmpdir, sizeof tmpdir, "/tmp/nnt-test-gpt2-state-XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(tmpdir));
}

static void teardown(void)
{
    if (!getenv("NNT_TEST_KEEP_TMP"))   /* keep the files to inspect them */
        remove_tmpdir();
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

static float *export_all(nnt_gpt2 *m, const char *name, int64_t *numel)
{
    int64_t n = 0;
    EXPECT_OK(nnt_gpt2_param_numel(m, name, &n));
    float *buf = malloc((size_t)n * sizeof(float));
    ck_assert_ptr_nonnull(buf);
    EXPECT_OK(nnt_gpt2_export(m, NNT_GPT2_PARAMS, name, buf, (size_t)n));
    *numel = n;
    return buf;
}

/* All parameters, the 16 llm.c tensors one after the other, malloc'd. */
static float *export_params(nnt_gpt2 *m, int64_t *total)
{
    int64_t n = nnt_gpt2_num_params(m), at = 0;
    float *all = malloc((size_t)n * sizeof(float));
    ck_assert_ptr_nonnull(all);
    for (int k = 0; k < 16; k++) {
        int64_t nk = 0;
        float *p = export_all(m, LLMC_NAMES[k], &nk);
        memcpy(all + at, p, (size_t)nk * sizeof(float));
        at += nk;
        free(p);
    }
    ck_assert_int_eq(at, n);
    *total = n;
    return all;
}

static void expect_same_params(nnt_gpt2 *a, nnt_gpt2 *b, const char *what)
{
    for (int k = 0; k < 16; k++) {
        int64_t na = 0, nb = 0;
        float *pa = export_all(a, LLMC_NAMES[k], &na);
        float *pb = export_all(b, LLMC_NAMES[k], &nb);
        ck_assert_int_eq(na, nb);
        ck_assert_msg(memcmp(pa, pb, (size_t)na * sizeof(float)) == 0, "%s: %s differs", what,
                      LLMC_NAMES[k]);
        free(pa);
        free(pb);
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
    nnt_st_reader *r = open_st(fixture_path("train.safetensors"));
    batches b = {read_entry(r, "train_tokens", NNT_IO_I32),
                 read_entry(r, "train_targets", NNT_IO_I32)};
    nnt_st_close(r);
    return b;
}

static void free_batches(batches *b)
{
    free(b->tokens);
    free(b->targets);
}

/* Steps [from, to) of the fixture protocol with AdamW lr 1e-3, wd 0.1; losses[s] for each. */
static void train(nnt_gpt2 *m, const batches *b, int from, int to, double *losses)
{
    nnt_adam_options opts = NNT_ADAM_OPTIONS_INIT;
    opts.lr = 1e-3;
    opts.weight_decay = 0.1;
    for (int s = from; s < to; s++) {
        nnt_tensor *x = ids_tensor(b->tokens + s * B * T, 2, 4);
        nnt_tensor *y = ids_tensor(b->targets + s * B * T, 1, 12);
        EXPECT_OK(nnt_gpt2_zero_grad(m));
        EXPECT_OK(nnt_gpt2_forward(m, x, y, &losses[s]));
        EXPECT_OK(nnt_gpt2_backward(m));
        EXPECT_OK(nnt_gpt2_adamw_step(m, &opts));
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
        void *da = read_entry(a, ea->name, ea->dtype), *db = read_entry(b, ea->name, eb->dtype);
        ck_assert_msg(memcmp(da, db, (size_t)ea->nbytes) == 0, "%s: bytes differ", ea->name);
        free(da);
        free(db);
    }
}

START_TEST(test_save_safetensors)
{
    const nnt_gpt2_config cfg = {V, 0, MAXT, L, NH, C};
    const char *path = tmp_file("saved.safetensors");
    nnt_gpt2 *a = NULL, *b = NULL;
    EXPECT_OK(nnt_gpt2_load_safetensors(ctx, fixture_path("model.safetensors"), &cfg,
                                        &TILINGS[2], B, T, &a));
    EXPECT_OK(nnt_gpt2_save_safetensors(a, path));
    EXPECT_OK(nnt_gpt2_load_safetensors(ctx, path, &cfg, &TILINGS[1], B, T, &b));
    expect_same_params(a, b, "reloaded HF export");
    nnt_st_reader *fix = open_st(fixture_path("model.safetensors")), *got = open_st(path);
    expect_same_entries(fix, got);
    ck_assert_ptr_null(nnt_st_find(got, "lm_head.weight"));
    ck_assert_str_eq(nnt_st_metadata_get(got, "format"), "pt");
    nnt_st_close(fix);
    nnt_st_close(got);
    /* the llm.c fixture exports to the same tensors too */
    nnt_gpt2 *c = load_model(NULL);
    EXPECT_OK(nnt_gpt2_save_safetensors(c, path));
    fix = open_st(fixture_path("model.safetensors"));
    got = open_st(path);
    expect_same_entries(fix, got);
    nnt_st_close(fix);
    nnt_st_close(got);
    ck_assert_int_eq(dir_entries(), 1);   /* no temporary file left */
    EXPECT_FAIL_MSG(nnt_gpt2_save_safetensors(c, NULL), NNT_E_INVAL,
                    "nnt_gpt2_save_safetensors");
    EXPECT_FAIL_MSG(nnt_gpt2_save_safetensors(c, "/nonexistent-dir/x.safetensors"), NNT_E_IO,
                    "nnt_gpt2_save_safetensors");
    nnt_gpt2_destroy(a);
    nnt_gpt2_destroy(b);
    nnt_gpt2_destroy(c);
}
END_TEST

/* ---- resuming --------------------------------------------------------------------- */

/* 10 steps in one run == 4 steps, save, new context and model, load, 6 steps: the same
 * bits for every loss and every final parameter. Loop index: the tiling. */
START_TEST(test_resume_bit_exact)
{
    const nnt_gpt2_tiling *tiling = &TILINGS[_i];
    const char *path = tmp_file("state.safetensors");
    batches b = read_batches();
    double straight[NSTEPS], resumed[NSTEPS];
    int64_t n1 = 0, n2 = 0;

    nnt_gpt2 *m = load_model(tiling);
    train(m, &b, 0, NSTEPS, straight);
    float *want = export_params(m, &n1);
    nnt_gpt2_destroy(m);
    EXPECT_OK(nnt_ctx_destroy(ctx));

    ctx = test_ctx();
    m = load_model(tiling);
    train(m, &b, 0, SPLIT, resumed);
    nnt_gpt2_train_state st = {SPLIT, {1, 2, 3, 4}, "{\"lr\": 0.001}"};
    EXPECT_OK(nnt_gpt2_save_state(m, path, &st));
    nnt_gpt2_destroy(m);
    EXPECT_OK(nnt_ctx_destroy(ctx));

    ctx = test_ctx();
    nnt_gpt2_config cfg;
    EXPECT_OK(nnt_gpt2_state_config(ctx, path, &cfg));
    ck_assert(cfg.vocab == V && cfg.padded_vocab == 72 && cfg.max_seq == MAXT &&
              cfg.layers == L && cfg.heads == NH && cfg.channels == C);
    EXPECT_OK(nnt_gpt2_create(ctx, &cfg, tiling, B, T, &m));
    nnt_gpt2_train_state got = {0, {0, 0, 0, 0}, NULL};
    EXPECT_OK(nnt_gpt2_load_state(m, path, &got));
    ck_assert_int_eq(nnt_gpt2_step_count(m), SPLIT);
    ck_assert_uint_eq(got.data_pos, SPLIT);
    ck_assert_str_eq(got.options, "{\"lr\": 0.001}");
    train(m, &b, (int)got.data_pos, NSTEPS, resumed);
    nnt_gpt2_train_state_clear(&got);
    ck_assert_int_eq(nnt_gpt2_step_count(m), NSTEPS);
    float *have = export_params(m, &n2);
    ck_assert_int_eq(n1, n2);
    for (int s = 0; s < NSTEPS; s++)
        ck_assert_msg(memcmp(&straight[s], &resumed[s], sizeof(double)) == 0,
                      "step %d: loss %.17g resumed, %.17g straight", s, resumed[s], straight[s]);
    ck_assert_msg(memcmp(want, have, (size_t)n1 * sizeof(float)) == 0,
                  "final parameters differ after resuming");
    printf("test_gpt2_state resume [tiling %d]: 10 losses and %lld final parameters "
           "bit-identical (last loss %.9f)\n", _i, (long long)n1, resumed[NSTEPS - 1]);
    free(want);
    free(have);
    nnt_gpt2_destroy(m);
    free_batches(&b);
}
END_TEST

/* A state saved before any step (no moments yet) resumes like a fresh model. */
START_TEST(test_resume_from_step0)
{
    const char *path = tmp_file("state0");
    batches b = read_batches();
    double l1[NSTEPS], l2[NSTEPS];
    nnt_gpt2 *a = load_model(&TILINGS[1]), *c = NULL;
    EXPECT_OK(nnt_gpt2_save_state(a, path, NULL));
    train(a, &b, 0, 2, l1);
    const nnt_gpt2_config cfg = {V, 0, MAXT, L, NH, C};
    EXPECT_OK(nnt_gpt2_create(ctx, &cfg, &TILINGS[1], B, T, &c));
    EXPECT_OK(nnt_gpt2_load_state(c, path, NULL));
    ck_assert_int_eq(nnt_gpt2_step_count(c), 0);
    train(c, &b, 0, 2, l2);
    ck_assert(memcmp(l1, l2, 2 * sizeof(double)) == 0);
    expect_same_params(a, c, "resumed from step 0");
    nnt_gpt2_destroy(a);
    nnt_gpt2_destroy(c);
    free_batches(&b);
}
END_TEST

/* ---- user section, configuration ------------------------------------------------- */

START_TEST(test_user_section)
{
    const char *path = tmp_file("state");
    /* quotes, backslash, control characters, non-ASCII UTF-8 */
    const char *opts = "{\"data\": \"a\\\\b \\\"q\\\"\", \"note\": \"tab\there\nline\", "
                       "\"\xc3\xa9t\xc3\xa9\": [1, 2.5e-3]}";
    nnt_gpt2 *m = load_model(&TILINGS[1]), *other = NULL;
    nnt_gpt2_train_state st = {UINT64_MAX, {0, 1, UINT64_MAX, 0x0123456789abcdefULL}, NULL};
    st.options = (char *)opts;
    EXPECT_OK(nnt_gpt2_save_state(m, path, &st));
    /* B, T and the tiling may differ */
    const nnt_gpt2_config cfg = {V, 0, MAXT, L, NH, C};
    EXPECT_OK(nnt_gpt2_create(ctx, &cfg, &TILINGS[2], 1, 5, &other));
    nnt_gpt2_train_state got = {7, {7, 7, 7, 7}, NULL};
    EXPECT_OK(nnt_gpt2_load_state(other, path, &got));
    ck_assert_uint_eq(got.data_pos, UINT64_MAX);
    for (int i = 0; i < 4; i++)
        ck_assert_uint_eq(got.rng[i], st.rng[i]);
    ck_assert_str_eq(got.options, opts);
    ck_assert_int_eq(nnt_gpt2_step_count(other), 0);
    expect_same_params(m, other, "other tiling, B and T");
    nnt_gpt2_train_state_clear(&got);
    ck_assert_ptr_null(got.options);
    nnt_gpt2_train_state_clear(NULL);
    /* no user section: zeros and "" */
    EXPECT_OK(nnt_gpt2_save_state(m, path, NULL));
    EXPECT_OK(nnt_gpt2_load_state(other, path, &got));
    ck_assert_uint_eq(got.data_pos, 0);
    ck_assert_uint_eq(got.rng[0] | got.rng[1] | got.rng[2] | got.rng[3], 0);
    ck_assert_str_eq(got.options, "");
    nnt_gpt2_train_state_clear(&got);
    /* the file's layout */
    nnt_st_reader *r = open_st(path);
    ck_assert_uint_eq(nnt_st_count(r), 48);
    const nnt_st_entry *e = nnt_st_find(r, "adam_v.qkvw");
    ck_assert_ptr_nonnull(e);
    ck_assert(e->ndim == 3 && e->shape[0] == L && e->shape[1] == 3 * C && e->shape[2] == C);
    e = nnt_st_find(r, "param.wte");
    ck_assert(e && e->ndim == 2 && e->shape[0] == V && e->shape[1] == C);
    ck_assert_str_eq(nnt_st_metadata_get(r, "format"), "nnt-gpt2-train-state");
    ck_assert_str_eq(nnt_st_metadata_get(r, "NH"), "3");
    ck_assert_str_eq(nnt_st_metadata_get(r, "rng"), "[0,0,0,0]");
    nnt_st_close(r);
    nnt_gpt2_destroy(m);
    nnt_gpt2_destroy(other);
}
END_TEST

/* Loading into a model of another configuration fails, naming both. */
START_TEST(test_config_mismatch)
{
    const char *path = tmp_file("state");
    nnt_gpt2 *m = load_model(NULL);
    EXPECT_OK(nnt_gpt2_save_state(m, path, NULL));
    const nnt_gpt2_config bad[] = {
        {V, 0, MAXT, L, 4, C},        /* heads */
        {V, 0, MAXT, 1, NH, C},       /* layers */
        {V + 1, 0, MAXT, L, NH, C},   /* vocabulary */
        {V, 0, MAXT - 1, L, NH, C},   /* maxT */
        {V, 0, MAXT, L, NH, 2 * C},   /* channels */
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        nnt_gpt2 *o = NULL;
        EXPECT_OK(nnt_gpt2_create(ctx, &bad[i], NULL, B, T, &o));
        nnt_gpt2_train_state st = {42, {0, 0, 0, 0}, NULL};
        EXPECT_FAIL_MSG(nnt_gpt2_load_state(o, path, &st), NNT_E_SHAPE, "nnt_gpt2_load_state");
        const char *msg = nnt_ctx_last_error(NULL);
        ck_assert_msg(strstr(msg, "NH=3") && strstr(msg, path), "message: %s", msg);
        ck_assert_uint_eq(st.data_pos, 42);
        ck_assert_ptr_null(st.options);
        ck_assert_int_eq(nnt_gpt2_step_count(o), 0);
        nnt_gpt2_destroy(o);
    }
    nnt_gpt2_destroy(m);
}
END_TEST

/* ---- damaged files ---------------------------------------------------------------- */

/* Load must fail with NNT_E_FORMAT and change neither the model nor st. */
static void expect_format_error(nnt_gpt2 *m, const char *path, const float *before,
                                int64_t n, const char *what)
{
    nnt_gpt2_train_state st = {42, {0, 0, 0, 0}, NULL};
    int rc = nnt_gpt2_load_state(m, path, &st);
    ck_assert_msg(rc == NNT_E_FORMAT, "%s: load returned %d (%s)", what, rc,
                  nnt_ctx_last_error(NULL));
    ck_assert_msg(strstr(nnt_ctx_last_error(NULL), "nnt_gpt2_load_state") != NULL,
                  "%s: message '%s'", what, nnt_ctx_last_error(NULL));
    ck_assert(st.data_pos == 42 && st.options == NULL);
    ck_assert_int_eq(nnt_gpt2_step_count(m), 3);
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
    const char *path = tmp_file("state"), *bad = tmp_file("bad");
    batches b = read_batches();
    double losses[NSTEPS];
    nnt_gpt2 *m = load_model(&TILINGS[1]);
    train(m, &b, 0, 3, losses);
    nnt_gpt2_train_state st = {3, {5, 6, 7, 8}, "{\"batch\": 2}"};
    EXPECT_OK(nnt_gpt2_save_state(m, path, &st));
    int64_t n = 0;
    float *before = export_params(m, &n);
    size_t len = 0;
    unsigned char *file = slurp(path, &len);
    size_t header = 8 + (size_t)nnt_io_le64(file);
    ck_assert_uint_lt(header, len);

    /* truncations */
    const size_t cuts[] = {0, 1, 7, 8, 9, header / 2, header - 1, header, header + 1,
                           header + 4, (header + len) / 2, len - 4, len - 1};
    for (size_t i = 0; i < sizeof cuts / sizeof cuts[0]; i++) {
        char what[64];
        snprintf(what, sizeof what, "truncated to %zu of %zu bytes", cuts[i], len);
        spit(bad, file, cuts[i]);
        expect_format_error(m, bad, i < 3 ? before : NULL, n, what);
    }
    /* a byte appended */
    file[len] = 0;
    spit(bad, file, len + 1);
    expect_format_error(m, bad, NULL, n, "one byte appended");

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
        expect_format_error(m, bad, NULL, n, what);
        ck_assert_int_eq(pwrite(fd, &file[at], 1, (off_t)at), 1);
        flips++;
    }
    /* the last float of the last tensor */
    unsigned char c = file[len - 1] ^ 0x80;
    ck_assert_int_eq(pwrite(fd, &c, 1, (off_t)(len - 1)), 1);
    expect_format_error(m, bad, before, n, "last byte flipped");
    close(fd);

    /* a safetensors file that is not a state; a missing file */
    expect_format_error(m, fixture_path("model.safetensors"), before, n, "HF model file");
    EXPECT_FAIL_MSG(nnt_gpt2_load_state(m, tmp_file("missing"), NULL), NNT_E_IO,
                    "nnt_gpt2_load_state");
    /* the intact file still loads */
    EXPECT_OK(nnt_gpt2_load_state(m, path, NULL));
    printf("test_gpt2_state: %zu-byte state (header %zu): %zu truncations and %d bit flips "
           "rejected with NNT_E_FORMAT\n", len, header, sizeof cuts / sizeof cuts[0], flips);
    free(before);
    free(file);
    nnt_gpt2_destroy(m);
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
    const char *path = tmp_file("state");
    nnt_gpt2 *m = load_model(NULL);
    nnt_gpt2_train_state st = {1, {1, 1, 1, 1}, "old"};
    EXPECT_OK(nnt_gpt2_save_state(m, path, &st));
    size_t len = 0;
    unsigned char *old = slurp(path, &len);

    /* options that are not UTF-8: refused after the temporary file was created */
    st.options = "bad \xff byte";
    st.data_pos = 2;
    int rc = nnt_gpt2_save_state(m, path, &st);
    ck_assert_int_ne(rc, 0);
    ck_assert(strstr(nnt_ctx_last_error(NULL), "nnt_gpt2_save_state") != NULL);
    expect_unchanged(path, old, len, "invalid options");

    /* the disk fills up half way (a file size limit makes write() fail with EFBIG) */
    struct rlimit was, small = {16384, 16384};
    ck_assert_int_eq(getrlimit(RLIMIT_FSIZE, &was), 0);
    small.rlim_max = was.rlim_max;
    signal(SIGXFSZ, SIG_IGN);
    ck_assert_int_eq(setrlimit(RLIMIT_FSIZE, &small), 0);
    st.options = "new";
    EXPECT_FAIL_MSG(nnt_gpt2_save_state(m, path, &st), NNT_E_IO, "nnt_gpt2_save_state");
    EXPECT_FAIL_MSG(nnt_gpt2_save_safetensors(m, path), NNT_E_IO, "nnt_gpt2_save_safetensors");
    ck_assert_int_eq(setrlimit(RLIMIT_FSIZE, &was), 0);
    expect_unchanged(path, old, len, "file size limit");

    /* an unwritable directory. Root writes anyway, so as root the save runs with the
     * file-system uid of nobody (setfsuid: this thread only, and it drops the capabilities
     * that override permissions); where that is not possible the case is not run and says so */
    ck_assert_int_eq(chmod(tmpdir, 0555), 0);
    int as_nobody = 0, can_run = geteuid() != 0;
#ifdef __linux__
    if (!can_run) {
        setfsuid(65534);
        as_nobody = can_run = setfsuid((uid_t)-1) == 65534;
    }
#endif
    if (can_run) {
        EXPECT_FAIL_MSG(nnt_gpt2_save_state(m, path, &st), NNT_E_IO, "nnt_gpt2_save_state");
        EXPECT_FAIL_MSG(nnt_gpt2_save_safetensors(m, path), NNT_E_IO, "nnt_gpt2_save_safetensors");
    } else {
        printf("test_gpt2_state: NOT RUN: the read-only directory case (root, no setfsuid)\n");
    }
#ifdef __linux__
    if (as_nobody) {
        setfsuid(0);
        ck_assert_int_eq(setfsuid((uid_t)-1), 0);
    }
#endif
    ck_assert_int_eq(chmod(tmpdir, 0755), 0);
    expect_unchanged(path, old, len, "read-only directory");
    EXPECT_FAIL_MSG(nnt_gpt2_save_state(m, "/nonexistent-dir/state", &st), NNT_E_IO,
                    "nnt_gpt2_save_state");

    /* the old state is still good; a successful save replaces it */
    nnt_gpt2_train_state got = {0, {0, 0, 0, 0}, NULL};
    EXPECT_OK(nnt_gpt2_load_state(m, path, &got));
    ck_assert_str_eq(got.options, "old");
    nnt_gpt2_train_state_clear(&got);
    EXPECT_OK(nnt_gpt2_save_state(m, path, &st));
    EXPECT_OK(nnt_gpt2_load_state(m, path, &got));
    ck_assert_str_eq(got.options, "new");
    ck_assert_uint_eq(got.data_pos, 2);
    nnt_gpt2_train_state_clear(&got);
    ck_assert_int_eq(dir_entries(), 1);
    free(old);
    nnt_gpt2_destroy(m);
}
END_TEST

START_TEST(test_bad_arguments)
{
    nnt_gpt2 *m = load_model(NULL);
    nnt_gpt2_config cfg;
    EXPECT_FAIL_MSG(nnt_gpt2_save_state(NULL, "x", NULL), NNT_E_INVAL, "nnt_gpt2_save_state");
    EXPECT_FAIL_MSG(nnt_gpt2_save_state(m, NULL, NULL), NNT_E_INVAL, "nnt_gpt2_save_state");
    EXPECT_FAIL_MSG(nnt_gpt2_load_state(NULL, "x", NULL), NNT_E_INVAL, "nnt_gpt2_load_state");
    EXPECT_FAIL_MSG(nnt_gpt2_load_state(m, NULL, NULL), NNT_E_INVAL, "nnt_gpt2_load_state");
    EXPECT_FAIL_MSG(nnt_gpt2_state_config(ctx, NULL, &cfg), NNT_E_INVAL,
                    "nnt_gpt2_state_config");
    EXPECT_FAIL_MSG(nnt_gpt2_state_config(ctx, fixture_path("model.safetensors"), &cfg),
                    NNT_E_FORMAT, "nnt_gpt2_state_config");
    EXPECT_FAIL_MSG(nnt_gpt2_save_safetensors(NULL, "x"), NNT_E_INVAL,
                    "nnt_gpt2_save_safetensors");
    /* a model whose parameters were never set cannot be saved */
    const nnt_gpt2_config c = {V, 0, MAXT, L, NH, C};
    nnt_gpt2 *fresh = NULL;
    EXPECT_OK(nnt_gpt2_create(ctx, &c, NULL, B, T, &fresh));
    ck_assert_int_ne(nnt_gpt2_save_state(fresh, tmp_file("never"), NULL), 0);
    ck_assert_int_eq(dir_entries(), 0);
    nnt_gpt2_destroy(fresh);
    nnt_gpt2_destroy(m);
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
    tcase_add_test(tc, test_bad_arguments);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return run_suite(gpt2_state_suite());
}
