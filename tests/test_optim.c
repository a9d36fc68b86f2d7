/* SPDX-License-Identifier: MIT */
/* nnt_optim and training state files: AdamW, Adam (L2) and SGD with momentum against a
 * double-precision reference loop (warmup + cosine schedule, clipping, accumulation,
 * per-parameter decay), layers, save/load across tilings, corrupt files, misuse. */
#include "testutil.h"

#include <math.h>
#include <stddef.h>
#include <unistd.h>

/* The larger of two errors; a NaN, once seen, stays (so that the check fails). */
static double worse(double worst, double e)
{
    return worst != worst || e <= worst ? worst : e;
}

#define NP 2          /* parameters per test optimizer */
#define MAXN 64

/* Tolerances (measured on Zen 3 under the BLIS zen3, haswell and generic kernel sets, which
 * agree; the parameters' per-case ones are in optimizer_matches_reference):
 * - LR_TOL, relative: the learning rate is computed in double. nnt_optim_stats' lr is
 *   bit-identical to ref_lr here; the closed forms (decimal constants, cos(pi/4)) are
 *   measured 2.1e-16 (one double rounding) off: a few double ulps.
 * - NORM_TOL, relative: the gradient norm (tiles in double, their sums added in float);
 *   measured 1.1e-8.
 * - ACCUM_TOL, DECAY_TOL, absolute on parameters of size <= 1.5: bit-identical here
 *   (measured 0); 2 float ulps at 1.5 would allow another rounding order. */
#define LR_TOL 1e-15
#define NORM_TOL 1e-7
#define ACCUM_TOL 2.4e-7
#define DECAY_TOL 2.4e-7

static nnt_ctx *ctx;
static char dir[64];

static void setup(void)
{
    ctx = test_ctx();
    snprintf(dir, sizeof dir, "/tmp/test_optim-XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(dir));
}

static void teardown(void)
{
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    ck_assert_int_eq(system(cmd), 0);
    EXPECT_OK(nnt_ctx_destroy(ctx));
}

/* ---- test parameters: (5, 7) tiled (2, 3) and (6) tiled (4); partial edge tiles ---------- */

static const int64_t shapes[NP][2] = {{5, 7}, {6, 0}};
static const int ndims[NP] = {2, 1};
static const char *const names[NP] = {"w", "b"};

typedef struct set {
    nnt_tensor *value[NP], *grad[NP];
    float host_value[NP][MAXN];
    double ref[NP][MAXN], m[NP][MAXN], v[NP][MAXN];   /* reference values and state */
} set;

static int numel(int i)
{
    return (int)(shapes[i][0] * (ndims[i] == 2 ? shapes[i][1] : 1));
}

static nnt_tensor *make(int i, const int64_t *tile)
{
    nnt_tensor *t = NULL;
    EXPECT_OK(nnt_tensor_create(ctx, NNT_FP32, ndims[i], shapes[i], tile, &t));
    return t;
}

/* Tensors with the given tiles (tiling 0: (2, 3) / (4); 1: (3, 2) / (5)); values from seed. */
static void make_set(set *s, int tiling, unsigned long long seed)
{
    static const int64_t tiles[2][NP][2] = {{{2, 3}, {4, 0}}, {{3, 2}, {5, 0}}};
    memset(s, 0, sizeof *s);
    for (int i = 0; i < NP; i++) {
        s->value[i] = make(i, tiles[tiling][i]);
        s->grad[i] = make(i, tiles[tiling][i]);
        for (int k = 0; k < numel(i); k++) {
            s->host_value[i][k] = (float)(2 * test_rand(&seed) - 1);
            s->ref[i][k] = s->host_value[i][k];
        }
        EXPECT_OK(nnt_tensor_copy_from_host(s->value[i], s->host_value[i],
                                            (size_t)numel(i) * sizeof(float)));
    }
}

static void free_set(set *s)
{
    for (int i = 0; i < NP; i++) {
        EXPECT_OK(nnt_tensor_destroy(s->value[i]));
        EXPECT_OK(nnt_tensor_destroy(s->grad[i]));
    }
}

static void read_values(set *s, float out[NP][MAXN])
{
    for (int i = 0; i < NP; i++)
        EXPECT_OK(nnt_tensor_copy_to_host(s->value[i], out[i], (size_t)numel(i) * sizeof(float)));
}

/* Gradients of update `step` (deterministic in it), summed over accum micro-batches; g gets
 * their sum in double. */
static void set_grads(set *s, int step, int accum, double g[NP][MAXN])
{
    float host[MAXN];
    for (int i = 0; i < NP; i++) {
        unsigned long long seed = 1000u * (unsigned)step + 17u * (unsigned)i + 1u;
        for (int k = 0; k < numel(i); k++) {
            float sum = 0;
            for (int a = 0; a < accum; a++)
                sum += (float)(3 * test_rand(&seed) - 1.5);
            /* every fourth element's gradient around 1e-4, where Adam's sqrt(v) + eps and
             * sqrt(v + eps) differ by half, the next one's around 1e-8, where eps dominates */
            sum *= k % 4 == 1 ? 1e-4f : k % 4 == 2 ? 1e-8f : 1.0f;
            host[k] = sum;
            g[i][k] = sum;
        }
        EXPECT_OK(nnt_tensor_copy_from_host(s->grad[i], host, (size_t)numel(i) * sizeof(float)));
    }
}

/* ---- the reference (double precision, PyTorch semantics) -------------------------------- */

static double ref_lr(const nnt_optim_options *o, int64_t s)
{
    if (s <= o->warmup_steps)
        return o->lr * (double)s / (double)o->warmup_steps;
    if (o->schedule == NNT_SCHEDULE_CONSTANT)
        return o->lr;
    if (s >= o->total_steps)
        return o->min_lr;
    double t = (double)(s - o->warmup_steps) / (double)(o->total_steps - o->warmup_steps);
    return o->min_lr + (o->lr - o->min_lr) * 0.5 * (1 + cos(acos(-1.0) * t));
}

/* One update of the reference; returns the gradient norm after the accum division. */
static double ref_step(set *s, const nnt_optim_options *o, const int decay[NP], int64_t step,
                       double g[NP][MAXN])
{
    double sumsq = 0;
    for (int i = 0; i < NP; i++)
        for (int k = 0; k < numel(i); k++)
            sumsq += g[i][k] * g[i][k];
    double scale = 1.0 / (double)o->accum_steps, norm = sqrt(sumsq) * scale;
    if (o->grad_clip > 0 && norm > o->grad_clip)
        scale *= o->grad_clip / (norm + 1e-6);
    double lr = ref_lr(o, step);
    for (int i = 0; i < NP; i++) {
        double wd = decay[i] ? o->weight_decay : 0;
        for (int k = 0; k < numel(i); k++) {
            double *p = &s->ref[i][k], *m = &s->m[i][k], *v = &s->v[i][k];
            double gi = g[i][k] * scale;
            if (o->kind == NNT_OPTIM_SGD) {
                gi += wd * *p;
                *m = step == 1 ? gi : o->momentum * *m + gi;
                *p -= lr * (o->momentum != 0 ? *m : gi);
                continue;
            }
            if (o->kind == NNT_OPTIM_ADAM)
                gi += wd * *p;
            else
                *p *= 1 - lr * wd;
            *m = o->beta1 * *m + (1 - o->beta1) * gi;
            *v = o->beta2 * *v + (1 - o->beta2) * gi * gi;
            double mh = *m / (1 - pow(o->beta1, (double)step));
            double vh = *v / (1 - pow(o->beta2, (double)step));
            *p -= lr * mh / (sqrt(vh) + o->eps);
        }
    }
    return norm;
}

static nnt_optim *make_optim(const nnt_optim_options *o, set *s, const int decay[NP])
{
    nnt_optim *opt = NULL;
    EXPECT_OK(nnt_optim_create(ctx, o, &opt));
    for (int i = 0; i < NP; i++)   /* decay flipped by set_decay below */
        EXPECT_OK(nnt_optim_add_param(opt, names[i], s->value[i], s->grad[i], !decay[i]));
    for (int i = 0; i < NP; i++)
        EXPECT_OK(nnt_optim_set_decay(opt, names[i], decay[i]));
    return opt;
}

/* The parameters against the reference: |got - want| <= tol (1 + |want|) for each; the
 * largest |got - want| / (1 + |want|) is the check's error reported (test_tol_note) under
 * the caller's line. */
#define expect_close(...) expect_close_at(__LINE__, __VA_ARGS__)
static void expect_close_at(int line, set *s, double tol, int step)
{
    float got[NP][MAXN];
    read_values(s, got);
    double worst = 0.0;
    for (int i = 0; i < NP; i++)
        for (int k = 0; k < numel(i); k++) {
            double e = fabs(got[i][k] - s->ref[i][k]) / (1 + fabs(s->ref[i][k]));
            worst = worse(worst, e);
        }
    test_tol_note(__FILE__, line, worst, tol);
    for (int i = 0; i < NP; i++)
        for (int k = 0; k < numel(i); k++) {
            double want = s->ref[i][k];
            ck_assert_msg(fabs(got[i][k] - want) <= tol * (1 + fabs(want)),
                          "step %d, %s[%d]: %.9g, reference %.9g (line %d)", step, names[i], k,
                          (double)got[i][k], want, line);
        }
}

static unsigned char *read_file(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    ck_assert_ptr_nonnull(f);
    fseek(f, 0, SEEK_END);
    *len = (size_t)ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *buf = malloc(*len);
    ck_assert_ptr_nonnull(buf);
    ck_assert_uint_eq(fread(buf, 1, *len, f), *len);
    fclose(f);
    return buf;
}

static void write_file(const char *path, const unsigned char *buf, size_t len)
{
    FILE *f = fopen(path, "wb");
    ck_assert_ptr_nonnull(f);
    ck_assert_uint_eq(fwrite(buf, 1, len, f), len);
    ck_assert_int_eq(fclose(f), 0);
}

static int contains(const unsigned char *buf, size_t len, const char *s)
{
    size_t n = strlen(s);
    for (size_t i = 0; i + n <= len; i++)
        if (memcmp(buf + i, s, n) == 0)
            return 1;
    return 0;
}

static void state_path(char *path, size_t len, const char *name)
{
    snprintf(path, len, "%s/%s", dir, name);
}

/* Options of case c (see optimizer_matches_reference). */
static nnt_optim_options case_options(int c)
{
    nnt_optim_options o = NNT_OPTIM_OPTIONS_INIT;
    o.lr = 0.01;
    o.weight_decay = 0.1;
    switch (c) {
    case 0:                              /* AdamW, constant */
        break;
    case 1:                              /* Adam with L2, betas changed */
        o.kind = NNT_OPTIM_ADAM;
        o.beta1 = 0.8;
        o.beta2 = 0.95;
        o.eps = 1e-6;
        break;
    case 2:                              /* SGD with momentum */
        o.kind = NNT_OPTIM_SGD;
        o.momentum = 0.9;
        o.lr = 0.05;
        break;
    case 3:                              /* plain SGD (no buffer) */
        o.kind = NNT_OPTIM_SGD;
        o.lr = 0.05;
        break;
    case 4:                              /* AdamW, warmup + cosine, clipping, accumulation */
        o.schedule = NNT_SCHEDULE_COSINE;
        o.warmup_steps = 2;
        o.total_steps = 5;
        o.min_lr = 0.0025;  /* not 0 and not lr / 10: a cosine to 0 or to lr / 10 differs */
        o.grad_clip = 0.4;  /* not 1, where clip and clip^2 agree; below the norms (1.8 ..
                               2.5 measured), so it triggers every step */
        o.accum_steps = 3;
        o.beta1 = 0.85;     /* AdamW (decoupled) with betas and eps other than the defaults */
        o.beta2 = 0.97;
        o.eps = 1e-3;       /* large enough to move the update (|g| ~ 0.1) */
        break;
    case 5:                              /* SGD momentum, clipping that never triggers */
        o.kind = NNT_OPTIM_SGD;
        o.momentum = 0.5;
        o.grad_clip = 1e6;
        o.accum_steps = 2;
        break;
    }
    return o;
}

/* Six updates of every case against the reference: parameters after each, the reported lr
 * and gradient norm; parameter 0 decays, parameter 1 does not. */
START_TEST(optimizer_matches_reference)
{
    /* |got - want| / (1 + |want|) of the parameters, per case (case_options), measured
     * (Zen 3, BLIS zen3/haswell/generic alike): AdamW 3.3e-7, Adam 4.2e-8, SGD momentum
     * 6.3e-8, SGD 5.9e-8, AdamW cosine/clip/accum 1.8e-7, SGD accum 4.6e-8; about 10x */
    static const double step_tol[6] = {3e-6, 4e-7, 6e-7, 6e-7, 2e-6, 5e-7};
    static const int decay[NP] = {1, 0};
    nnt_optim_options o = case_options(_i);
    set s;
    make_set(&s, 0, 42);
    nnt_optim *opt = make_optim(&o, &s, decay);
    int clipped = 0;
    for (int step = 1; step <= 6; step++) {
        double g[NP][MAXN];
        set_grads(&s, step, (int)o.accum_steps, g);
        double norm = ref_step(&s, &o, decay, step, g);
        clipped += o.grad_clip > 0 && norm > o.grad_clip;
        EXPECT_OK(nnt_optim_step(opt));
        expect_close(&s, step_tol[_i], step);
        nnt_optim_stats st = {sizeof st, -1, -1, -1};
        EXPECT_OK(nnt_optim_stats_get(opt, &st));
        ck_assert_int_eq(st.step, step);
        EXPECT_TOL(fabs(st.lr - ref_lr(&o, step)), LR_TOL * ref_lr(&o, step),
                   "case %d, step %d: lr %.17g, reference %.17g", _i, step, st.lr,
                   ref_lr(&o, step));
        EXPECT_TOL(fabs(st.grad_norm - norm) / norm, NORM_TOL,
                   "case %d, step %d: gradient norm %.12g, reference %.12g", _i, step,
                   st.grad_norm, norm);
    }
    if (_i == 4)
        ck_assert_msg(clipped == 6, "clipping triggered only %d times", clipped);
    nnt_optim_destroy(opt);
    free_set(&s);
}
END_TEST

/* Gradients summed over 3 micro-batches with accum_steps 3 update like their mean with 1. */
START_TEST(accumulation_equals_mean)
{
    set a, b;
    make_set(&a, 0, 7);
    make_set(&b, 1, 7);
    nnt_optim_options o = NNT_OPTIM_OPTIONS_INIT, o3 = o;
    o3.accum_steps = 3;
    static const int decay[NP] = {1, 1};
    nnt_optim *opt1 = make_optim(&o, &a, decay), *opt3 = make_optim(&o3, &b, decay);
    for (int step = 1; step <= 3; step++) {
        for (int i = 0; i < NP; i++) {
            float sum[MAXN], mean[MAXN];
            for (int k = 0; k < numel(i); k++) {
                sum[k] = 0.75f * (float)(k % 5) - 1.0f + 0.25f * (float)step;
                mean[k] = sum[k] / 3;
                /* AdamW hardly sees a gradient's scale where sqrt(v) >> eps: every other
                 * element near 1e-8 (2^-27), where it does (a missed division by 3 shows) */
                if (k % 2)
                    mean[k] *= 0x1p-27f;
                sum[k] = mean[k] * 3;
            }
            EXPECT_OK(nnt_tensor_copy_from_host(a.grad[i], mean, (size_t)numel(i) * 4));
            EXPECT_OK(nnt_tensor_copy_from_host(b.grad[i], sum, (size_t)numel(i) * 4));
        }
        EXPECT_OK(nnt_optim_step(opt1));
        EXPECT_OK(nnt_optim_step(opt3));
    }
    float x[NP][MAXN], y[NP][MAXN];
    read_values(&a, x);
    read_values(&b, y);
    double worst = 0.0;
    for (int i = 0; i < NP; i++)
        for (int k = 0; k < numel(i); k++) {
            double e = fabs((double)x[i][k] - y[i][k]);
            worst = worse(worst, e);
        }
    EXPECT_TOL(worst, ACCUM_TOL, "accumulated vs mean gradients: parameters differ");
    nnt_optim_destroy(opt1);
    nnt_optim_destroy(opt3);
    free_set(&a);
    free_set(&b);
}
END_TEST

/* nnt_optim_lr_at against the closed form: warmup, cosine, the floor after total_steps. */
START_TEST(schedule_matches_closed_form)
{
    nnt_optim_options o = NNT_OPTIM_OPTIONS_INIT;
    o.lr = 6e-4;
    o.min_lr = 6e-5;
    o.warmup_steps = 10;
    o.total_steps = 110;
    o.schedule = NNT_SCHEDULE_COSINE;
    nnt_optim *opt = NULL;
    EXPECT_OK(nnt_optim_create(ctx, &o, &opt));
    static const struct {
        int64_t step;
        double want;
    } at[] = {
        {1, 6e-5},                                    /* warmup: lr / 10      */
        {10, 6e-4},                                   /* the end of warmup    */
        {60, 3.3e-4},                                 /* half way: the mean   */
        {35, 6e-5 + 5.4e-4 * (1 + 0.70710678118654752) / 2},   /* cos(pi/4) */
        {110, 6e-5},                                  /* total_steps: min_lr  */
        {5000, 6e-5},                                 /* and after it         */
    };
    double lr = 0;
    for (size_t i = 0; i < sizeof at / sizeof *at; i++) {
        EXPECT_OK(nnt_optim_lr_at(opt, at[i].step, &lr));
        EXPECT_TOL(fabs(lr - at[i].want) / at[i].want, LR_TOL,
                   "lr at step %lld: %.17g, want %.17g", (long long)at[i].step, lr, at[i].want);
    }
    EXPECT_FAIL_MSG(nnt_optim_lr_at(opt, 0, &lr), NNT_E_INVAL, "nnt_optim_lr_at");
    EXPECT_FAIL_MSG(nnt_optim_lr_at(opt, 1, NULL), NNT_E_INVAL, "nnt_optim_lr_at");
    nnt_optim_destroy(opt);
    o.schedule = NNT_SCHEDULE_CONSTANT;   /* constant, no warmup */
    o.warmup_steps = 0;
    EXPECT_OK(nnt_optim_create(ctx, &o, &opt));
    EXPECT_OK(nnt_optim_lr_at(opt, 1, &lr));
    ck_assert_double_eq(lr, 6e-4);
    EXPECT_OK(nnt_optim_lr_at(opt, 1000000, &lr));
    ck_assert_double_eq(lr, 6e-4);
    nnt_optim_destroy(opt);
}
END_TEST

/* The learning rates of transformers' schedules (tests/fixtures/schedules/hf_lr.txt, from
 * tests/gen_schedule_fixtures.py: linear, cosine with min_lr, warmup-stable-decay with each
 * decay shape) at nnt's update s, their scheduler's rate after s steps. Measured at most
 * 4.9e-16 relative (a double rounding or two: the order of the products differs); the
 * warmup of nnt's WSD from 0, transformers' from min_lr: those steps against lr s / warmup. */
START_TEST(schedules_match_transformers)
{
    char path[4200];
    const char *top = getenv("top_srcdir");
    snprintf(path, sizeof path, "%s/tests/fixtures/schedules/hf_lr.txt", top ? top : ".");
    FILE *f = fopen(path, "r");
    ck_assert_msg(f != NULL, "%s: cannot open", path);
    char line[256], name[64];
    int cases = 0;
    double worst = 0;
    while (fgets(line, sizeof line, f)) {
        if (strncmp(line, "case ", 5) != 0)
            continue;
        nnt_optim_options o = NNT_OPTIM_OPTIONS_INIT;
        int sched = 0, shape = 0;
        long long warmup = 0, total = 0, decay = 0, from = 0, count = 0;
        ck_assert_int_eq(sscanf(line, "case %63s %d %d %lf %lf %lld %lld %lld %lld %lld", name,
                                &sched, &shape, &o.lr, &o.min_lr, &warmup, &total, &decay,
                                &from, &count), 10);
        o.schedule = (nnt_schedule)sched, o.decay_shape = (nnt_decay_shape)shape;
        o.warmup_steps = warmup, o.total_steps = total, o.decay_steps = decay;
        nnt_optim *opt = NULL;
        EXPECT_OK(nnt_optim_create(ctx, &o, &opt));
        double lr = 0;
        for (long long s = 1; s < from; s++) {   /* nnt's warmup where transformers' differs */
            EXPECT_OK(nnt_optim_lr_at(opt, s, &lr));
            EXPECT_TOL(fabs(lr - o.lr * (double)s / (double)warmup), LR_TOL * o.lr,
                       "%s: lr at warmup step %lld: %.17g", name, s, lr);
        }
        for (long long i = 0; i < count; i++) {
            long long step = 0;
            double want = 0;
            ck_assert_msg(fgets(line, sizeof line, f) && sscanf(line, "%lld %lf", &step,
                                                                 &want) == 2,
                          "%s: %s: step %lld missing", path, name, from + i);
            EXPECT_OK(nnt_optim_lr_at(opt, step, &lr));
            double err = fabs(lr - want) / (want > 0 ? want : o.lr);
            worst = err > worst ? err : worst;
            EXPECT_TOL(err, LR_TOL, "%s: lr at step %lld: %.17g, transformers %.17g", name,
                       step, lr, want);
        }
        nnt_optim_destroy(opt);
        cases++;
    }
    fclose(f);
    ck_assert_int_eq(cases, 7);
    printf("schedules: 7 cases, largest relative difference %.3g\n", worst);
}
END_TEST

/* A linear layer's parameters come with their names and decay flags: with zero gradients
 * AdamW only decays, so the weight shrinks by (1 - lr wd) and the bias stays. */
START_TEST(add_layer_takes_names_and_decay_flags)
{
    nnt_layer *lin = NULL;
    EXPECT_OK(nnt_layer_linear_create(ctx, 4, 3, NNT_LINEAR_BIAS, NULL, &lin));
    nnt_optim_options o = NNT_OPTIM_OPTIONS_INIT;
    o.lr = 0.1;
    o.weight_decay = 0.5;
    nnt_optim *opt = NULL;
    EXPECT_OK(nnt_optim_create(ctx, &o, &opt));
    EXPECT_OK(nnt_optim_add_layer(opt, lin));
    int64_t count = 0;
    EXPECT_OK(nnt_layer_num_params(lin, &count, NULL));
    ck_assert_int_eq(count, 2);
    float before[2][12], after[2][12];
    int64_t n[2];
    for (int64_t i = 0; i < count; i++) {
        nnt_param_info info = {sizeof info, NULL, NULL, NULL, 0, 0};
        EXPECT_OK(nnt_layer_param(lin, i, &info));
        ck_assert_int_eq(info.decay, strcmp(info.name, "weight") == 0);
        EXPECT_OK(nnt_optim_set_decay(opt, info.name, info.decay));   /* known names */
        EXPECT_OK(nnt_tensor_fill(info.grad, 0.0));
        EXPECT_OK(nnt_tensor_fill(info.value, 0.5 + (double)i));
        EXPECT_OK(nnt_tensor_numel(info.value, &n[i]));
        EXPECT_OK(nnt_tensor_copy_to_host(info.value, before[i], (size_t)n[i] * 4));
    }
    /* adding the same tree again: every name is taken, nothing is added */
    EXPECT_FAIL_MSG(nnt_optim_add_layer(opt, lin), NNT_E_INVAL, "nnt_optim_add_layer");
    EXPECT_FAIL_MSG(nnt_optim_set_decay(opt, "nope", 1), NNT_E_INVAL, "nnt_optim_set_decay");
    EXPECT_OK(nnt_optim_step(opt));
    for (int64_t i = 0; i < count; i++) {
        nnt_param_info info = {sizeof info, NULL, NULL, NULL, 0, 0};
        EXPECT_OK(nnt_layer_param(lin, i, &info));
        EXPECT_OK(nnt_tensor_copy_to_host(info.value, after[i], (size_t)n[i] * 4));
        float factor = info.decay ? 1.0f - 0.1f * 0.5f : 1.0f;
        double worst = 0.0;
        for (int64_t k = 0; k < n[i]; k++) {
            double e = fabs((double)after[i][k] - (double)(before[i][k] * factor));
            worst = worse(worst, e);
        }
        EXPECT_TOL(worst, DECAY_TOL, "%s: not decayed by %g", info.name, (double)factor);
    }
    nnt_optim_stats st = {sizeof st, 0, 0, 0};
    EXPECT_OK(nnt_optim_stats_get(opt, &st));
    ck_assert_double_eq(st.grad_norm, 0.0);
    /* a state file names the tensors after the layer's parameters */
    char path[128];
    state_path(path, sizeof path, "layer.safetensors");
    EXPECT_OK(nnt_train_state_save(opt, path, NULL));
    size_t len = 0;
    unsigned char *file = read_file(path, &len);
    static const char *const want[] = {"\"param.weight\"", "\"param.bias\"",
                                       "\"adam_m.weight\"", "\"adam_v.bias\"",
                                       "\"optimizer\":\"adamw\"",
                                       "\"format\":\"nnt-train-state\""};
    for (int i = 0; i < 6; i++)
        ck_assert_msg(contains(file, len, want[i]), "%s not in the file", want[i]);
    free(file);
    nnt_optim_destroy(opt);
    nnt_layer_destroy(lin);
}
END_TEST

/* ---- training state ---------------------------------------------------------------------- */

static void run_steps(nnt_optim *opt, set *s, int from, int to, int accum)
{
    for (int step = from; step <= to; step++) {
        double g[NP][MAXN];
        set_grads(s, step, accum, g);
        EXPECT_OK(nnt_optim_step(opt));
    }
}

/* Save after 3 updates, load into tensors of another tiling (and other values), continue:
 * the parameters are bit-identical to those of an uninterrupted run, the user section comes
 * back. Cases: AdamW with a schedule and accumulation, SGD with momentum, plain SGD. */
START_TEST(save_load_resumes_bit_identical)
{
    static const int decay[NP] = {1, 0};
    static const int cases[] = {4, 2, 3, 1};
    nnt_optim_options o = case_options(cases[_i]);
    o.grad_clip = 0;   /* the norm's summation order depends on the tiling */
    char path[128];
    state_path(path, sizeof path, "state.safetensors");
    set a, b;
    make_set(&a, 0, 3);
    make_set(&b, 1, 99);
    nnt_optim *oa = make_optim(&o, &a, decay), *ob = make_optim(&o, &b, decay);
    run_steps(oa, &a, 1, 3, (int)o.accum_steps);
    nnt_train_state st = NNT_TRAIN_STATE_INIT;
    st.data_pos = 123456789012345ULL;
    st.rng[0] = 1;
    st.rng[3] = UINT64_MAX;
    st.options = "{\"lr\": 0.01}";
    EXPECT_OK(nnt_train_state_save(oa, path, &st));
    run_steps(oa, &a, 4, 6, (int)o.accum_steps);
    nnt_train_state got = NNT_TRAIN_STATE_INIT;
    EXPECT_OK(nnt_train_state_load(ob, path, &got));
    ck_assert_uint_eq(got.data_pos, st.data_pos);
    ck_assert_uint_eq(got.rng[0], 1);
    ck_assert_uint_eq(got.rng[1], 0);
    ck_assert_uint_eq(got.rng[3], UINT64_MAX);
    ck_assert_str_eq(got.options, st.options);
    ck_assert_uint_eq(got.size, sizeof got);
    nnt_train_state_clear(&got);
    ck_assert_ptr_null(got.options);
    ck_assert_uint_eq(got.size, sizeof got);
    nnt_optim_stats stats = {sizeof stats, 0, 0, 0};
    EXPECT_OK(nnt_optim_stats_get(ob, &stats));
    ck_assert_int_eq(stats.step, 3);
    run_steps(ob, &b, 4, 6, (int)o.accum_steps);
    float x[NP][MAXN], y[NP][MAXN];
    read_values(&a, x);
    read_values(&b, y);
    for (int i = 0; i < NP; i++)
        ck_assert_msg(memcmp(x[i], y[i], (size_t)numel(i) * sizeof(float)) == 0,
                      "case %d: parameter %s differs after resuming", _i, names[i]);
    /* a state saved before any update: no state tensors; loading restarts at step 0 */
    nnt_optim *oc = make_optim(&o, &a, decay);
    EXPECT_OK(nnt_train_state_save(oc, path, NULL));
    EXPECT_OK(nnt_train_state_load(ob, path, &got));
    ck_assert_str_eq(got.options, "");
    ck_assert_uint_eq(got.data_pos, 0);
    ck_assert_uint_eq(got.rng[3], 0);
    nnt_train_state_clear(&got);
    EXPECT_OK(nnt_optim_stats_get(ob, &stats));
    ck_assert_int_eq(stats.step, 0);
    ck_assert_double_eq(stats.lr, 0.0);
    read_values(&b, y);
    for (int i = 0; i < NP; i++)
        ck_assert(memcmp(x[i], y[i], (size_t)numel(i) * sizeof(float)) == 0);
    nnt_optim_destroy(oa);
    nnt_optim_destroy(ob);
    nnt_optim_destroy(oc);
    free_set(&a);
    free_set(&b);
}
END_TEST

/* Loading path must fail with NNT_E_FORMAT (message containing what, if not NULL) and leave
 * the optimizer's parameters and step as they were. */
static void expect_rejected(nnt_optim *opt, set *s, const char *path, const char *what)
{
    float before[NP][MAXN], after[NP][MAXN];
    read_values(s, before);
    nnt_train_state st = NNT_TRAIN_STATE_INIT;
    EXPECT_FAIL_MSG(nnt_train_state_load(opt, path, &st), NNT_E_FORMAT, "nnt_train_state_load");
    if (what)
        ck_assert_msg(strstr(nnt_ctx_last_error(NULL), what), "'%s' does not say '%s'",
                      nnt_ctx_last_error(NULL), what);
    ck_assert_ptr_null(st.options);
    read_values(s, after);
    for (int i = 0; i < NP; i++)
        ck_assert(memcmp(before[i], after[i], (size_t)numel(i) * sizeof(float)) == 0);
    nnt_optim_stats stats = {sizeof stats, 0, 0, 0};
    EXPECT_OK(nnt_optim_stats_get(opt, &stats));
    ck_assert_int_eq(stats.step, 1);
}

/* Replace the first occurrence of from by to (same length) in buf. */
static void patch(unsigned char *buf, size_t len, const char *from, const char *to)
{
    size_t n = strlen(from);
    for (size_t i = 0; i + n <= len; i++)
        if (memcmp(buf + i, from, n) == 0) {
            memcpy(buf + i, to, n);
            return;
        }
    ck_abort_msg("'%s' not found in the file", from);
}

START_TEST(corrupt_files_are_rejected_untouched)
{
    static const int decay[NP] = {1, 0};
    nnt_optim_options o = NNT_OPTIM_OPTIONS_INIT;
    char good[128], bad[128];
    state_path(good, sizeof good, "good.safetensors");
    state_path(bad, sizeof bad, "bad.safetensors");
    set a;
    make_set(&a, 0, 5);
    nnt_optim *opt = make_optim(&o, &a, decay);
    run_steps(opt, &a, 1, 1, 1);
    EXPECT_OK(nnt_train_state_save(opt, good, NULL));
    size_t len = 0;
    unsigned char *file = read_file(good, &len);
    /* truncated anywhere (every byte of the header, every 7th of the data) */
    for (size_t cut = 0; cut < len; cut += cut < 600 ? 1 : 7) {
        write_file(bad, file, cut);
        expect_rejected(opt, &a, bad, NULL);
    }
    unsigned char *copy = malloc(len);
    ck_assert_ptr_nonnull(copy);
    /* one bit flipped anywhere (every byte of the header, every 7th of the data) */
    for (size_t at = 0; at < len; at += at < 600 ? 1 : 7) {
        memcpy(copy, file, len);
        copy[at] ^= 0x01;
        write_file(bad, copy, len);
        expect_rejected(opt, &a, bad, NULL);
    }
    memcpy(copy, file, len);   /* a flipped bit in the last data byte */
    copy[len - 1] ^= 0x10;
    write_file(bad, copy, len);
    expect_rejected(opt, &a, bad, "data checksum");
    memcpy(copy, file, len);   /* and in a byte in the middle of the data */
    copy[len - 250] ^= 0x01;
    write_file(bad, copy, len);
    expect_rejected(opt, &a, bad, "data checksum");
    memcpy(copy, file, len);
    patch(copy, len, "nnt-train-state", "nnt-train-stats");
    write_file(bad, copy, len);
    expect_rejected(opt, &a, bad, "format");
    memcpy(copy, file, len);   /* a tensor renamed: b -> c */
    patch(copy, len, "\"param.b\"", "\"param.c\"");
    write_file(bad, copy, len);
    expect_rejected(opt, &a, bad, "param.b");
    memcpy(copy, file, len);   /* the step changed: the metadata checksum */
    patch(copy, len, "\"step\":\"1\"", "\"step\":\"2\"");
    write_file(bad, copy, len);
    expect_rejected(opt, &a, bad, "metadata checksum");
    free(copy);
    free(file);
    /* a file of another optimizer: other names, other shapes, another kind */
    nnt_tensor *v = NULL, *g = NULL, *v2 = NULL, *g2 = NULL;
    int64_t shape[2] = {5, 6};
    EXPECT_OK(nnt_tensor_create(ctx, NNT_FP32, 2, shape, NULL, &v));
    EXPECT_OK(nnt_tensor_create(ctx, NNT_FP32, 2, shape, NULL, &g));
    EXPECT_OK(nnt_tensor_create(ctx, NNT_FP32, 1, &shapes[1][0], NULL, &v2));
    EXPECT_OK(nnt_tensor_create(ctx, NNT_FP32, 1, &shapes[1][0], NULL, &g2));
    EXPECT_OK(nnt_tensor_fill(v, 1.0));
    EXPECT_OK(nnt_tensor_fill(g, 1.0));
    EXPECT_OK(nnt_tensor_fill(v2, 1.0));
    EXPECT_OK(nnt_tensor_fill(g2, 1.0));
    nnt_optim *other = NULL;
    EXPECT_OK(nnt_optim_create(ctx, &o, &other));
    EXPECT_OK(nnt_optim_add_param(other, "w", v, g, 1));   /* (5, 6), not (5, 7) */
    EXPECT_OK(nnt_optim_add_param(other, "b", v2, g2, 0));
    EXPECT_OK(nnt_optim_step(other));
    EXPECT_OK(nnt_train_state_save(other, bad, NULL));
    expect_rejected(opt, &a, bad, "param.w");
    nnt_optim_destroy(other);
    EXPECT_OK(nnt_optim_create(ctx, &o, &other));
    EXPECT_OK(nnt_optim_add_param(other, "x", v2, g2, 0));   /* other names and count */
    EXPECT_OK(nnt_optim_step(other));
    EXPECT_OK(nnt_train_state_save(other, bad, NULL));
    expect_rejected(opt, &a, bad, "tensors");
    nnt_optim_destroy(other);
    o.kind = NNT_OPTIM_SGD;
    o.momentum = 0.9;
    set b;
    make_set(&b, 1, 6);
    other = make_optim(&o, &b, decay);
    run_steps(other, &b, 1, 1, 1);
    EXPECT_OK(nnt_train_state_save(other, bad, NULL));
    expect_rejected(opt, &a, bad, "sgd");
    nnt_optim_destroy(other);
    free_set(&b);
    write_file(bad, (const unsigned char *)"not a file", 10);
    expect_rejected(opt, &a, bad, NULL);
    nnt_tensor *all[4] = {v, g, v2, g2};
    for (int i = 0; i < 4; i++)
        EXPECT_OK(nnt_tensor_destroy(all[i]));
    EXPECT_OK(nnt_train_state_load(opt, good, NULL));   /* the good file still loads */
    nnt_optim_destroy(opt);
    free_set(&a);
}
END_TEST

/* ---- misuse ------------------------------------------------------------------------------ */

static void expect_bad_options(nnt_optim_options o, const char *field)
{
    nnt_optim *opt = (nnt_optim *)&o;
    EXPECT_FAIL_MSG(nnt_optim_create(ctx, &o, &opt), NNT_E_INVAL, "nnt_optim_create");
    ck_assert_ptr_null(opt);
    ck_assert_msg(strstr(nnt_ctx_last_error(NULL), field), "'%s' does not name %s",
                  nnt_ctx_last_error(NULL), field);
}

START_TEST(bad_options_are_rejected)
{
    const nnt_optim_options d = NNT_OPTIM_OPTIONS_INIT;
    nnt_optim_options o = d;
    o.size = sizeof o - 8;
    expect_bad_options(o, "size");
    o.size = sizeof o + 8;   /* a program built against a newer library */
    nnt_optim *none = NULL;
    EXPECT_FAIL_MSG(nnt_optim_create(ctx, &o, &none), NNT_E_UNSUPPORTED, "nnt_optim_create");
    ck_assert_ptr_null(none);
    o = d, o.kind = (nnt_optim_kind)7;
    expect_bad_options(o, "kind");
    o = d, o.lr = -1e-3;
    expect_bad_options(o, "lr");
    o = d, o.lr = NAN;
    expect_bad_options(o, "lr");
    o = d, o.beta1 = 1.0;
    expect_bad_options(o, "beta1");
    o = d, o.beta2 = -0.1;
    expect_bad_options(o, "beta2");
    o = d, o.eps = 0;
    expect_bad_options(o, "eps");
    o = d, o.momentum = -0.5;
    expect_bad_options(o, "momentum");
    o = d, o.weight_decay = INFINITY;
    expect_bad_options(o, "weight_decay");
    o = d, o.grad_clip = -1;
    expect_bad_options(o, "grad_clip");
    o = d, o.accum_steps = 0;
    expect_bad_options(o, "accum_steps");
    o = d, o.warmup_steps = -1;
    expect_bad_options(o, "warmup_steps");
    o = d, o.schedule = (nnt_schedule)5;
    expect_bad_options(o, "schedule");
    o = d, o.schedule = NNT_SCHEDULE_COSINE, o.warmup_steps = 10, o.total_steps = 10;
    expect_bad_options(o, "total_steps");
    o = d, o.schedule = NNT_SCHEDULE_COSINE, o.total_steps = 10, o.min_lr = 1;
    expect_bad_options(o, "min_lr");
    o = d, o.schedule = NNT_SCHEDULE_LINEAR, o.total_steps = 10, o.min_lr = 1;
    expect_bad_options(o, "the linear schedule needs min_lr");
    o = d, o.schedule = NNT_SCHEDULE_WSD, o.warmup_steps = 3, o.total_steps = 10;
    expect_bad_options(o, "decay_steps (0)");   /* none: a WSD without its decay */
    o.decay_steps = 8;   /* past the warmup */
    expect_bad_options(o, "decay_steps (8) <= total_steps - warmup_steps (10 - 3)");
    o.decay_steps = 7, o.decay_shape = (nnt_decay_shape)3;
    expect_bad_options(o, "decay_shape = 3");
    o = d, o.decay_steps = -1;
    expect_bad_options(o, "decay_steps = -1");
    o = d, o.size = offsetof(nnt_optim_options, decay_shape);   /* neither 0.3's nor 0.4's */
    expect_bad_options(o, "options size");
    nnt_optim *old = NULL;   /* 0.3's size: the fields after it keep their defaults */
    o = d, o.size = offsetof(nnt_optim_options, decay_steps), o.decay_shape = (nnt_decay_shape)9;
    EXPECT_OK(nnt_optim_create(ctx, &o, &old));
    nnt_optim_destroy(old);
    nnt_optim *opt = NULL;
    EXPECT_FAIL_MSG(nnt_optim_create(ctx, &d, NULL), NNT_E_INVAL, "nnt_optim_create");
    EXPECT_OK(nnt_optim_create(ctx, NULL, &opt));   /* NULL options: the defaults */
    nnt_optim_destroy(opt);
    nnt_optim_destroy(NULL);
    nnt_train_state_clear(NULL);
}
END_TEST

START_TEST(misuse_is_rejected)
{
    set s;
    make_set(&s, 0, 1);
    nnt_optim *opt = NULL;
    EXPECT_OK(nnt_optim_create(ctx, NULL, &opt));
    const char *afn = "nnt_optim_add_param";
    EXPECT_FAIL_MSG(nnt_optim_step(opt), NNT_E_STATE, "nnt_optim_step");   /* no parameters */
    EXPECT_FAIL_MSG(nnt_optim_add_param(NULL, "w", s.value[0], s.grad[0], 1), NNT_E_INVAL, afn);
    EXPECT_FAIL_MSG(nnt_optim_add_param(opt, NULL, s.value[0], s.grad[0], 1), NNT_E_INVAL, afn);
    EXPECT_FAIL_MSG(nnt_optim_add_param(opt, "", s.value[0], s.grad[0], 1), NNT_E_INVAL, afn);
    EXPECT_FAIL_MSG(nnt_optim_add_param(opt, "w", NULL, s.grad[0], 1), NNT_E_INVAL, afn);
    EXPECT_FAIL_MSG(nnt_optim_add_param(opt, "w", s.value[0], NULL, 1), NNT_E_INVAL, afn);
    EXPECT_FAIL_MSG(nnt_optim_add_param(opt, "w", s.value[0], s.value[0], 1), NNT_E_INVAL, afn);
    EXPECT_FAIL_MSG(nnt_optim_add_param(opt, "w", s.value[0], s.grad[1], 1), NNT_E_SHAPE, afn);
    nnt_tensor *retiled = make(0, (const int64_t[]){3, 3});
    EXPECT_FAIL_MSG(nnt_optim_add_param(opt, "w", s.value[0], retiled, 1), NNT_E_SHAPE, afn);
    EXPECT_OK(nnt_optim_add_param(opt, "w", s.value[0], s.grad[0], 1));
    EXPECT_FAIL_MSG(nnt_optim_add_param(opt, "w", s.value[1], s.grad[1], 1), NNT_E_INVAL, afn);
    EXPECT_FAIL_MSG(nnt_optim_add_param(opt, "x", s.value[0], s.grad[0], 1), NNT_E_INVAL, afn);
    EXPECT_FAIL_MSG(nnt_optim_add_layer(opt, NULL), NNT_E_INVAL, "nnt_optim_add_layer");
    EXPECT_FAIL_MSG(nnt_optim_add_layer(NULL, NULL), NNT_E_INVAL, "nnt_optim_add_layer");
    EXPECT_FAIL_MSG(nnt_optim_set_decay(opt, NULL, 1), NNT_E_INVAL, "nnt_optim_set_decay");
    EXPECT_FAIL_MSG(nnt_optim_set_decay(NULL, "w", 1), NNT_E_INVAL, "nnt_optim_set_decay");
    EXPECT_FAIL_MSG(nnt_optim_step(NULL), NNT_E_INVAL, "nnt_optim_step");
    nnt_optim_stats st = {sizeof st - 1, 0, 0, 0};
    EXPECT_FAIL_MSG(nnt_optim_stats_get(opt, &st), NNT_E_INVAL, "nnt_optim_stats_get");
    EXPECT_FAIL_MSG(nnt_optim_stats_get(opt, NULL), NNT_E_INVAL, "nnt_optim_stats_get");
    EXPECT_FAIL_MSG(nnt_optim_stats_get(NULL, &st), NNT_E_INVAL, "nnt_optim_stats_get");
    double lr = 0;
    EXPECT_FAIL_MSG(nnt_optim_lr_at(NULL, 1, &lr), NNT_E_INVAL, "nnt_optim_lr_at");
    st.size = sizeof st;
    EXPECT_OK(nnt_optim_stats_get(opt, &st));   /* before any step */
    ck_assert_int_eq(st.step, 0);
    ck_assert_double_eq(st.grad_norm, 0.0);
    /* the gradient was never written: refused before anything changes */
    EXPECT_FAIL_MSG(nnt_optim_step(opt), NNT_E_STATE, "nnt_optim_step");
    /* the message names the parameter and keeps the tensor check's reason intact */
    const char *why = nnt_ctx_last_error(NULL);
    const char *want = "nnt_optim_step: parameter 'w': the tensor holds no data: nothing was "
                       "written to it";
    ck_assert_msg(strncmp(why, want, strlen(want)) == 0, "garbled message '%s'", why);
    EXPECT_OK(nnt_tensor_fill(s.grad[0], 1.0));
    EXPECT_OK(nnt_optim_step(opt));
    EXPECT_FAIL_MSG(nnt_optim_add_param(opt, "b", s.value[1], s.grad[1], 0), NNT_E_STATE, afn);
    char path[128];
    state_path(path, sizeof path, "x.safetensors");
    const char *sfn = "nnt_train_state_save", *lfn = "nnt_train_state_load";
    nnt_train_state ts = NNT_TRAIN_STATE_INIT;
    EXPECT_FAIL_MSG(nnt_train_state_save(NULL, path, NULL), NNT_E_INVAL, sfn);
    EXPECT_FAIL_MSG(nnt_train_state_save(opt, NULL, NULL), NNT_E_INVAL, sfn);
    ts.size = 8;
    EXPECT_FAIL_MSG(nnt_train_state_save(opt, path, &ts), NNT_E_INVAL, sfn);
    EXPECT_FAIL_MSG(nnt_train_state_load(opt, path, &ts), NNT_E_INVAL, lfn);
    EXPECT_FAIL_MSG(nnt_train_state_load(NULL, path, NULL), NNT_E_INVAL, lfn);
    EXPECT_FAIL_MSG(nnt_train_state_load(opt, NULL, NULL), NNT_E_INVAL, lfn);
    ck_assert_int_ne(nnt_train_state_load(opt, path, NULL), NNT_OK);   /* no such file */
    state_path(path, sizeof path, "no/such/dir/x.safetensors");
    ck_assert_int_ne(nnt_train_state_save(opt, path, NULL), NNT_OK);
    nnt_optim_destroy(opt);
    EXPECT_OK(nnt_tensor_destroy(retiled));
    free_set(&s);
}
END_TEST

static Suite *optim_suite(void)
{
    Suite *s = suite_create("optim");
    TCase *tc = tcase_create("optim");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 60);
    tcase_add_loop_test(tc, optimizer_matches_reference, 0, 6);
    tcase_add_test(tc, accumulation_equals_mean);
    tcase_add_test(tc, schedule_matches_closed_form);
    tcase_add_test(tc, schedules_match_transformers);
    tcase_add_test(tc, add_layer_takes_names_and_decay_flags);
    tcase_add_loop_test(tc, save_load_resumes_bit_identical, 0, 4);
    tcase_add_test(tc, corrupt_files_are_rejected_untouched);
    tcase_add_test(tc, bad_options_are_rejected);
    tcase_add_test(tc, misuse_is_rejected);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return run_suite(optim_suite());
}
