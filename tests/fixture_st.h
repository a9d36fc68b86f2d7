/* SPDX-License-Identifier: MIT */
/* Reading the safetensors files of tests/fixtures (gpt2_tiny by name, others by path or by
 * directory) with lib/io's reader, and the token-id tensors the model tests feed (for the
 * tests that link the library's objects). Check assertions on every failure. */
#ifndef NNT_TEST_FIXTURE_ST_H
#define NNT_TEST_FIXTURE_ST_H

#include "fixture.h"
#include "io/io.h"

#include <math.h>
#include <sys/stat.h>

/* The safetensors file at path (any fixture directory). */
static inline nnt_st_reader *fixture_open_st_path(const char *path)
{
    char err[NNT_IO_ERRLEN];
    nnt_st_reader *r = NULL;
    int rc = nnt_st_open(path, &r, err, sizeof err);
    ck_assert_msg(rc == 0, "opening %s: %s", path, err);
    return r;
}

/* A file of tests/fixtures/gpt2_tiny. */
static inline nnt_st_reader *fixture_open_st(const char *file)
{
    return fixture_open_st_path(fixture_path(file));
}

/* A whole entry converted to want, malloc'd; e (may be NULL) gets its description. */
static inline void *fixture_read(const nnt_st_reader *r, const char *name, nnt_io_dtype want,
                                 const nnt_st_entry **e)
{
    char err[NNT_IO_ERRLEN];
    const nnt_st_entry *ent = nnt_st_find(r, name);
    ck_assert_msg(ent != NULL, "fixture has no tensor %s", name);
    void *buf = malloc((size_t)ent->numel * nnt_io_dtype_size(want) + 1);
    ck_assert_ptr_nonnull(buf);
    int rc = nnt_st_read(r, ent, want, 0, ent->numel, buf, err, sizeof err);
    ck_assert_msg(rc == 0, "reading %s: %s", name, err);
    if (e)
        *e = ent;
    return buf;
}

/* tests/fixtures/DIR/NAME, or NAME.WHAT when what is not NULL, under $top_srcdir (a static
 * buffer: used before the next call). */
static inline const char *fixture_path_in(const char *dir, const char *name, const char *what)
{
    static char path[4200];
    const char *top = getenv("top_srcdir");
    snprintf(path, sizeof path, "%s/tests/fixtures/%s/%s%s%s", top ? top : ".", dir, name,
             what ? "." : "", what ? what : "");
    return path;
}

/* fixture_read with the entry's element count in *n (n may be NULL). */
static inline void *fixture_read_n(const nnt_st_reader *r, const char *name, nnt_io_dtype want,
                                   int64_t *n)
{
    const nnt_st_entry *e = NULL;
    void *buf = fixture_read(r, name, want, &e);
    if (n)
        *n = (int64_t)e->numel;
    return buf;
}

/* A (b, t) int32 tensor of ids, tiles of tile. */
static inline nnt_tensor *fixture_ids(nnt_ctx *ctx, int64_t b, int64_t t, const int32_t *ids,
                                      const int64_t *tile)
{
    int64_t shape[2] = {b, t};
    nnt_tensor *x = NULL;
    ck_assert_int_eq(nnt_tensor_create(ctx, NNT_INT32, 2, shape, tile, &x), 0);
    ck_assert_int_eq(nnt_tensor_copy_from_host(x, ids, (size_t)(b * t) * sizeof(int32_t)), 0);
    return x;
}

/* The largest relative normwise difference over the tensors of want, which got holds with
 * the same names and shapes, and no other (*worst: its name); with values 0, the names and
 * shapes alone are compared (the result is 0). */
static inline double fixture_compare_files(const char *got_path, const char *want_path,
                                           int values, char *worst, size_t wn)
{
    nnt_st_reader *got = fixture_open_st_path(got_path), *want = fixture_open_st_path(want_path);
    double e = 0.0;
    ck_assert_int_eq(nnt_st_count(got), nnt_st_count(want));
    for (size_t i = 0; i < nnt_st_count(want); i++) {
        const nnt_st_entry *w = nnt_st_entry_at(want, i), *g = nnt_st_find(got, w->name);
        ck_assert_msg(g != NULL, "%s has no tensor %s", got_path, w->name);
        ck_assert_int_eq(g->ndim, w->ndim);
        for (int d = 0; d < w->ndim; d++)
            ck_assert_msg(g->shape[d] == w->shape[d], "%s: %s dimension %d is %lld, PEFT's %lld",
                          got_path, w->name, d, (long long)g->shape[d], (long long)w->shape[d]);
        if (!values)
            continue;
        float *a = fixture_read_n(got, w->name, NNT_IO_F32, NULL);
        float *b = fixture_read_n(want, w->name, NNT_IO_F32, NULL);
        double ei = test_rel_err(a, b, (int64_t)w->numel);
        if (ei >= e) {
            e = ei;
            snprintf(worst, wn, "%s", w->name);
        }
        free(a), free(b);
    }
    nnt_st_close(got);
    nnt_st_close(want);
    return e;
}

#define FIXTURE_OK(call)                                                                   \
    do {                                                                                   \
        int rc_ = (call);                                                                  \
        ck_assert_msg(rc_ == 0, "%s returned %d (%s)", #call, rc_,                        \
                      nnt_ctx_last_error(NULL));                                           \
    } while (0)

/* One step of the fixtures' training loops on the (b, t) batch of tokens tok and targets tgt
 * (ids tensors in tiles xtile and ytile): the gradients dropped (drop 1: nnt_layer_clear_grad,
 * the trainer's way) or zero-filled (0), the forward with the targets and its loss, then
 * at(user) (NULL: nothing) while the forward's activations are held, the backward and opt's
 * step. Returns the loss. */
static inline double fixture_train_step(nnt_ctx *ctx, nnt_layer *l, nnt_optim *opt, int64_t b,
                                        int64_t t, const int32_t *tok, const int32_t *tgt,
                                        const int64_t *xtile, const int64_t *ytile, int drop,
                                        void (*at)(void *), void *user)
{
    nnt_tensor *x = fixture_ids(ctx, b, t, tok, xtile);
    nnt_tensor *y = fixture_ids(ctx, b, t, tgt, ytile);
    double loss = 0.0;
    FIXTURE_OK(drop ? nnt_layer_clear_grad(l) : nnt_layer_zero_grad(l));
    FIXTURE_OK(nnt_layer_set_targets(l, y));
    FIXTURE_OK(nnt_layer_forward(l, x, NULL));
    FIXTURE_OK(nnt_layer_loss(l, &loss));
    if (at)
        at(user);
    FIXTURE_OK(nnt_layer_backward(l, NULL, NULL));
    FIXTURE_OK(nnt_optim_step(opt));
    nnt_tensor_destroy(x);
    nnt_tensor_destroy(y);
    return loss;
}

/* The worst relative difference of the model's parameters (value 1) or gradients (0) from
 * the fixture's PREFIX.<name> tensors (every parameter: Hugging Face's names). */
static inline double fixture_worst_against(nnt_layer *l, nnt_st_reader *r, const char *prefix,
                                           int value, char *worst, size_t wn)
{
    int64_t count = 0;
    double e = 0.0;
    EXPECT_OK(nnt_layer_num_params(l, &count, NULL));
    ck_assert_int_ge(count, 10);
    for (int64_t i = 0; i < count; i++) {
        nnt_param_info p = test_param_at(l, i);
        char name[300];
        snprintf(name, sizeof name, "%s.%s", prefix, p.name);
        int64_t ng = 0, nw = 0;
        float *want = fixture_read_n(r, name, NNT_IO_F32, &nw);
        float *got = test_to_host(value ? p.value : p.grad, &ng);
        ck_assert_int_eq(ng, nw);
        double ei = test_rel_err(got, want, ng);
        if (ei >= e) {
            e = ei;
            snprintf(worst, wn, "%s", p.name);
        }
        free(want), free(got);
    }
    return e;
}

/* dir/adapter_config.json with text, dir/adapter_model.safetensors a copy of src's */
static inline void fixture_write_adapter(const char *dir, const char *config, const char *src)
{
    char path[4300];
    mkdir(dir, 0755);
    snprintf(path, sizeof path, "%s/adapter_config.json", dir);
    FILE *f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    fputs(config, f);
    fclose(f);
    size_t len = 0;
    unsigned char *buf = slurp(src, &len);
    snprintf(path, sizeof path, "%s/adapter_model.safetensors", dir);
    f = fopen(path, "wb");
    ck_assert_ptr_nonnull(f);
    ck_assert_int_eq(fwrite(buf, 1, len, f), len);
    fclose(f);
    free(buf);
}

/* ---- the PEFT fixtures (tests/gen_lora_fixtures.py, gen_gemma_fixtures.py,
 * gen_window_fixtures.py) ------------------------------------------------------------------ */

/* AdamW as the fixtures' torch.optim.AdamW (lr 1e-2, weight decay 0.05, betas 0.9, 0.999,
 * eps 1e-8) over l's trainable parameters, for steps of accum micro-batches. */
static inline nnt_optim *fixture_peft_adamw_accum(nnt_ctx *ctx, nnt_layer *l, int64_t accum)
{
    nnt_optim_options oo = NNT_OPTIM_OPTIONS_INIT;
    oo.lr = 1e-2;
    oo.weight_decay = 0.05;
    oo.accum_steps = accum;
    nnt_optim *opt = NULL;
    FIXTURE_OK(nnt_optim_create(ctx, &oo, &opt));
    FIXTURE_OK(nnt_optim_add_layer(opt, l));
    return opt;
}

static inline nnt_optim *fixture_peft_adamw(nnt_ctx *ctx, nnt_layer *l)
{
    return fixture_peft_adamw_accum(ctx, l, 1);
}

/* The fixture r's steps training steps (train_tokens, train_targets (steps, b, t) in tiles of
 * tile; its losses), gradients dropped as the trainer drops them: the worst relative loss
 * difference. */
static inline double fixture_peft_train(nnt_ctx *ctx, nnt_layer *l, nnt_optim *opt,
                                        const nnt_st_reader *r, int64_t b, int64_t t,
                                        int steps, const int64_t *tile)
{
    int32_t *tok = fixture_read_n(r, "train_tokens", NNT_IO_I32, NULL);
    int32_t *tgt = fixture_read_n(r, "train_targets", NNT_IO_I32, NULL);
    float *want = fixture_read_n(r, "losses", NNT_IO_F32, NULL);
    double worst = 0.0;
    for (int s = 0; s < steps; s++) {
        double loss = fixture_train_step(ctx, l, opt, b, t, tok + s * b * t, tgt + s * b * t,
                                         tile, tile, 1, NULL, NULL);
        worst = fmax(worst, fabs(loss - want[s]) / want[s]);
    }
    free(tok), free(tgt), free(want);
    return worst;
}

/* The logits (b, t, V) of tokens tok in tiles of tile, without targets (malloc'd). */
static inline float *fixture_logits(nnt_ctx *ctx, nnt_layer *l, int64_t b, int64_t t,
                                    const int32_t *tok, const int64_t *tile)
{
    nnt_tensor *x = fixture_ids(ctx, b, t, tok, tile), *out = NULL;
    FIXTURE_OK(nnt_layer_set_targets(l, NULL));
    FIXTURE_OK(nnt_layer_forward(l, x, &out));
    float *v = test_to_host(out, NULL);
    nnt_tensor_destroy(x);
    return v;
}

/* PEFT's adapter directory `adapter` loaded on the model of the Hugging Face directory base
 * (tiling, the ids in tiles of tile): e[0] its logits of the reference's tokens against the
 * reference's logits, e[1] after nnt_model_lora_merge against its merged_logits, e[2] the
 * base model's own logits against the reference's (how far the adapter moves them). */
static inline void fixture_peft_logits(nnt_ctx *ctx, const char *base, const char *adapter,
                                       const char *reference, const nnt_tiling *tiling,
                                       const int64_t *tile, int64_t b, int64_t t, double e[3])
{
    nnt_st_reader *r = fixture_open_st_path(reference);
    int32_t *tok = fixture_read_n(r, "tokens", NNT_IO_I32, NULL);
    int64_t n = 0;
    float *want = fixture_read_n(r, "logits", NNT_IO_F32, &n);
    float *want_merged = fixture_read_n(r, "merged_logits", NNT_IO_F32, NULL);
    nnt_layer *l = NULL;
    FIXTURE_OK(nnt_model_load_hf(ctx, base, b, t, tiling, &l));
    float *plain = fixture_logits(ctx, l, b, t, tok, tile);
    FIXTURE_OK(nnt_model_load_peft(l, adapter));
    float *got = fixture_logits(ctx, l, b, t, tok, tile);
    FIXTURE_OK(nnt_model_lora_merge(l));
    float *merged = fixture_logits(ctx, l, b, t, tok, tile);
    e[0] = test_rel_err(got, want, n);
    e[1] = test_rel_err(merged, want_merged, n);
    e[2] = test_rel_err(plain, want, n);
    free(tok), free(want), free(want_merged), free(plain), free(got), free(merged);
    nnt_layer_destroy(l);
    nnt_st_close(r);
}

#endif
