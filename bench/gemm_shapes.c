/* SPDX-License-Identifier: MIT */
/* gemm_shapes.c (issues 16, 41): the matrix products of a training step at the shapes and
 * tilings nnt's automatic tiling gives them for 2 CPU workers, against oneDNN called
 * directly, side by side in one process (rounds interleaved, the best of each).
 *
 *   bench/gemm_shapes [gpt2|smollm2|llama1b|f32] [ROUNDS]
 *
 * gpt2 (GPT-2 124M, B 4 T 64: 256 rows in tiles of 128) and smollm2 (SmolLM2-135M, B 4
 * T 256: 1024 rows in tiles of 512), bf16 products as `--precision bf16` makes them (float
 * activations and gradients, the weights' bf16 copies); for each product of the step:
 *   nnt     the tensor operation (nnt_tensor_gemm: its tasks on 2 StarPU CPU workers,
 *           operands rounded to bf16 inside the tasks, B reordered or packed as the tasks
 *           do it), submit to wait;
 *   dnnl2   oneDNN's matmul on the whole product with 2 OpenMP threads, operands already
 *           bf16 and B as stored (the primitive made beforehand; torch.mm does the same);
 *   task    one tile's task kernel on one thread (nnt_cpu_gemm_dnnl as the codelet calls it:
 *           float operands rounded into scratch, B reordered or read as stored as the
 *           environment's NNT_GEMM_BF16_B, not a variant's, chooses), and
 *   dnnl1   oneDNN's matmul on the same tile, one thread, bf16 operands, B as stored;
 * GFLOP/s, and nnt / dnnl2 and task / dnnl1 (the share of the library's rate reached).
 * GEMM_SHAPES_VARIANTS="before:NNT_GEMM_KSUM=0,NNT_GEMM_PACK=temp after:" measures nnt under
 * each environment (a context each, made anew every round, the variants' order alternating
 * between rounds), the best round of each product kept. B is written again (converted from
 * its float master, or scaled by 1) before each timed product, as a training step rewrites
 * its weights, so that packs of B kept between products are made inside the timing.
 * f32: the older table (issue 16): BLIS against oneDNN, float products of GPT-2's tiles,
 * one core. Needs oneDNN (configure --with-onednn); exits 77 without it. Runs with
 * OMP_WAIT_POLICY=PASSIVE unless the environment sets it (dnnl2's idle OpenMP thread would
 * otherwise spin on a core the next nnt product needs).
 *
 *     make bench/gemm_shapes && nice -n -10 bench/gemm_shapes gpt2 7
 */
#ifdef HAVE_CONFIG_H
#include <config.h>
#endif

#include <nnt.h>

#include "nnt_cpu.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#ifdef NNT_HAVE_ONEDNN
#include <oneapi/dnnl/dnnl.h>
#include <omp.h>

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* ---- f32: BLIS against oneDNN on one core (issue 16) ------------------------------------ */

static const struct {
    int ta, tb;
    long m, n, k;
    float beta;
    const char *name;
} f32_shapes[] = {
    {0, 1, 128, 2304, 768, 0, "qkv forward x W^T"}, {0, 1, 128, 768, 768, 0, "attn proj forward"},
    {0, 1, 128, 1536, 768, 0, "fc forward"},        {0, 1, 128, 768, 1536, 1, "fc proj forward"},
    {0, 1, 128, 7232, 768, 0, "lm head forward"},   {0, 0, 128, 768, 2304, 0, "qkv dX"},
    {0, 0, 128, 768, 1536, 0, "fc dX"},             {1, 0, 2304, 768, 128, 1, "qkv dW"},
    {1, 0, 768, 1536, 128, 1, "fc proj dW"},        {1, 0, 7232, 768, 128, 1, "lm head dW"},
    {0, 0, 128, 1536, 768, 0, "fc proj dX"},
};

static int f32_table(int rounds)
{
    printf("BLIS %s, oneDNN ISA %s\n", nnt_cpu_blis_setup(), nnt_cpu_dnnl_isa());
    nnt_dnnl_cache *cache = nnt_cpu_dnnl_cache_create();
    if (!cache)
        return 77;
    for (size_t i = 0; i < sizeof f32_shapes / sizeof f32_shapes[0]; i++) {
        long m = f32_shapes[i].m, n = f32_shapes[i].n, k = f32_shapes[i].k;
        float *a = malloc(sizeof(float) * m * k), *b = malloc(sizeof(float) * k * n);
        float *c = calloc((size_t)(m * n), sizeof(float));
        if (!a || !b || !c)
            return 1;
        for (long j = 0; j < m * k; j++)
            a[j] = (float)(j % 7) * 0.1f;
        for (long j = 0; j < k * n; j++)
            b[j] = (float)(j % 5) * 0.1f;
        long lda = f32_shapes[i].ta ? m : k, ldb = f32_shapes[i].tb ? k : n;
        double tb = 1e30, td = 1e30;
        for (int r = 0; r <= rounds; r++) {
            double t0 = now();
            nnt_cpu_gemm_f32(f32_shapes[i].ta, f32_shapes[i].tb, m, n, k, 1.0f, a, lda, 0, b, ldb,
                             0, f32_shapes[i].beta, c, n, 0, 1);
            double t1 = now();
            if (nnt_cpu_gemm_dnnl(cache, f32_shapes[i].ta, f32_shapes[i].tb, 0, m, n, k, 1.0f, a,
                                  lda, 0, b, ldb, 0, f32_shapes[i].beta, c, n, 0, 1))
                return 1;
            double t2 = now();
            if (r > 0) {
                tb = t1 - t0 < tb ? t1 - t0 : tb;
                td = t2 - t1 < td ? t2 - t1 : td;
            }
        }
        double fl = 2.0 * m * n * k;
        printf("%-18s m %5ld n %5ld k %5ld  BLIS %6.1f  oneDNN %6.1f GFLOP/s  BLIS/oneDNN "
               "time %.2f\n", f32_shapes[i].name, m, n, k, fl / tb / 1e9, fl / td / 1e9, tb / td);
        free(a);
        free(b);
        free(c);
    }
    nnt_cpu_dnnl_cache_destroy(cache);
    return 0;
}

/* ---- bf16: the step's products, nnt against oneDNN ------------------------------------- */

/* C (M, N) = op(A) op(B); A stored (M, K), or (K, M) when ta; B stored (K, N), or (N, K)
 * when tb; each stored dimension cut in the tile given beside it (0: whole). B is a weight's
 * bf16 copy (b16) or a float activation / gradient. */
struct product {
    const char *name;
    int ta, tb, b16;
    long M, N, K;
    long tm, tn, tk;   /* tiles of C's rows, C's columns, the k dimension */
};

#define P(name, ta, tb, b16, M, N, K, tm, tn, tk) {name, ta, tb, b16, M, N, K, tm, tn, tk}
/* GPT-2 124M, B 4 T 64, 2 workers: rows 128, channels whole, hidden 1536, vocab 7232; the
 * q, k, v weights are 768-row tiles of the (2304, 768) attention weight */
static const struct product gpt2[] = {
    P("fwd qkv x W^T", 0, 1, 1, 256, 2304, 768, 128, 768, 0),
    P("fwd attn proj", 0, 1, 1, 256, 768, 768, 128, 0, 0),
    P("fwd fc", 0, 1, 1, 256, 3072, 768, 128, 1536, 0),
    P("fwd fc proj", 0, 1, 1, 256, 768, 3072, 128, 0, 1536),
    P("fwd lm head", 0, 1, 1, 256, 50257, 768, 128, 7232, 0),
    P("dX qkv dY W", 0, 0, 1, 256, 768, 2304, 128, 0, 768),
    P("dX attn proj", 0, 0, 1, 256, 768, 768, 128, 0, 0),
    P("dX fc", 0, 0, 1, 256, 768, 3072, 128, 0, 1536),
    P("dX fc proj", 0, 0, 1, 256, 3072, 768, 128, 1536, 0),
    P("dX lm head", 0, 0, 1, 256, 768, 50257, 128, 0, 7232),
    P("dW qkv dY^T x", 1, 0, 0, 2304, 768, 256, 768, 0, 128),
    P("dW attn proj", 1, 0, 0, 768, 768, 256, 0, 0, 128),
    P("dW fc", 1, 0, 0, 3072, 768, 256, 1536, 0, 128),
    P("dW fc proj", 1, 0, 0, 768, 3072, 256, 0, 1536, 128),
    P("dW lm head", 1, 0, 0, 50257, 768, 256, 7232, 0, 128),
};
/* SmolLM2-135M, B 4 T 256, 2 workers: rows 512, channels whole (576; k and v 192), hidden
 * 768 (of 1536), vocab 8192 (of 49152) */
static const struct product smollm2[] = {
    P("fwd q / o", 0, 1, 1, 1024, 576, 576, 512, 0, 0),
    P("fwd k / v", 0, 1, 1, 1024, 192, 576, 512, 0, 0),
    P("fwd gate / up", 0, 1, 1, 1024, 1536, 576, 512, 768, 0),
    P("fwd down", 0, 1, 1, 1024, 576, 1536, 512, 0, 768),
    P("fwd lm head", 0, 1, 1, 1024, 49152, 576, 512, 8192, 0),
    P("dX q / o", 0, 0, 1, 1024, 576, 576, 512, 0, 0),
    P("dX k / v", 0, 0, 1, 1024, 576, 192, 512, 0, 0),
    P("dX gate / up", 0, 0, 1, 1024, 576, 1536, 512, 0, 768),
    P("dX down", 0, 0, 1, 1024, 1536, 576, 512, 768, 0),
    P("dX lm head", 0, 0, 1, 1024, 576, 49152, 512, 0, 8192),
    P("dW q / o", 1, 0, 0, 576, 576, 1024, 0, 0, 512),
    P("dW k / v", 1, 0, 0, 192, 576, 1024, 0, 0, 512),
    P("dW gate / up", 1, 0, 0, 1536, 576, 1024, 768, 0, 512),
    P("dW down", 1, 0, 0, 576, 1536, 1024, 0, 768, 512),
    P("dW lm head", 1, 0, 0, 49152, 576, 1024, 8192, 0, 512),
};
/* Llama-3.2-1B, B 4 T 256, 2 workers, LoRA r 16 on a frozen base (issue 38): rows 512,
 * channels whole (2048; k and v 512), hidden 4096 (of 8192), vocab 8064 (of 128256); no
 * weight gradient of the base; the adapters' products of q_proj (A (16, 2048), B (2048,
 * 16), float) */
static const struct product llama1b[] = {
    P("fwd q / o", 0, 1, 1, 1024, 2048, 2048, 512, 0, 0),
    P("fwd k / v", 0, 1, 1, 1024, 512, 2048, 512, 0, 0),
    P("fwd gate / up", 0, 1, 1, 1024, 8192, 2048, 512, 4096, 0),
    P("fwd down", 0, 1, 1, 1024, 2048, 8192, 512, 0, 4096),
    P("fwd lm head", 0, 1, 1, 1024, 128256, 2048, 512, 8064, 0),
    P("dX q / o", 0, 0, 1, 1024, 2048, 2048, 512, 0, 0),
    P("dX k / v", 0, 0, 1, 1024, 2048, 512, 512, 0, 0),
    P("dX gate / up", 0, 0, 1, 1024, 2048, 8192, 512, 0, 4096),
    P("dX down", 0, 0, 1, 1024, 8192, 2048, 512, 4096, 0),
    P("dX lm head", 0, 0, 1, 1024, 2048, 128256, 512, 0, 8064),
    P("lora x A^T", 0, 1, 0, 1024, 16, 2048, 512, 0, 0),
    P("lora u B^T", 0, 1, 0, 1024, 2048, 16, 512, 0, 0),
    P("lora dB g^T u", 1, 0, 0, 2048, 16, 1024, 0, 0, 512),
    P("lora du g B", 0, 0, 0, 1024, 16, 2048, 512, 0, 0),
    P("lora dA du^T x", 1, 0, 0, 16, 2048, 1024, 0, 0, 512),
    P("lora dx du A", 0, 0, 0, 1024, 2048, 16, 512, 0, 0),
};
#undef P

static const char *loadavg(void)
{
    static char buf[64];
    FILE *f = fopen("/proc/loadavg", "r");
    if (!f || !fgets(buf, sizeof buf, f))
        snprintf(buf, sizeof buf, "?\n");
    if (f)
        fclose(f);
    return buf;
}

static long whole(long tile, long size) { return tile > 0 && tile < size ? tile : size; }

/* A oneDNN matmul on bf16 operands as stored (B's layout too), C float, made for the
 * calling thread count; run() times it. */
struct direct {
    dnnl_engine_t engine;
    dnnl_stream_t stream;
    dnnl_primitive_t mm;
    dnnl_memory_t a, b, c, scratch;
};

static int direct_make(struct direct *d, int ta, int tb, long m, long n, long k, void *a,
                       void *b, float *c)
{
    dnnl_memory_desc_t amd, bmd, cmd;
    dnnl_dims_t ad = {m, k}, bd = {k, n}, cd = {m, n};
    dnnl_dims_t as = {ta ? 1 : k, ta ? m : 1}, bs = {tb ? 1 : n, tb ? k : 1};
    dnnl_matmul_desc_t desc;
    dnnl_primitive_desc_t pd = NULL;
    memset(d, 0, sizeof *d);
    if (dnnl_engine_create(&d->engine, dnnl_cpu, 0) ||
        dnnl_stream_create(&d->stream, d->engine, dnnl_stream_default_flags) ||
        dnnl_memory_desc_init_by_strides(&amd, 2, ad, dnnl_bf16, as) ||
        dnnl_memory_desc_init_by_strides(&bmd, 2, bd, dnnl_bf16, bs) ||
        dnnl_memory_desc_init_by_tag(&cmd, 2, cd, dnnl_f32, dnnl_ab) ||
        dnnl_matmul_desc_init(&desc, &amd, &bmd, NULL, &cmd) ||
        dnnl_primitive_desc_create(&pd, &desc, NULL, d->engine, NULL) ||
        dnnl_primitive_create(&d->mm, pd))
        return -1;
    const dnnl_memory_desc_t *smd = dnnl_primitive_desc_query_md(pd, dnnl_query_scratchpad_md, 0);
    int bad = dnnl_memory_create(&d->a, &amd, d->engine, a) ||
              dnnl_memory_create(&d->b, &bmd, d->engine, b) ||
              dnnl_memory_create(&d->c, &cmd, d->engine, c) ||
              (smd && dnnl_memory_desc_get_size(smd) &&
               dnnl_memory_create(&d->scratch, smd, d->engine, DNNL_MEMORY_ALLOCATE));
    dnnl_primitive_desc_destroy(pd);
    return bad ? -1 : 0;
}

static int direct_run(struct direct *d)
{
    dnnl_exec_arg_t args[4] = {{DNNL_ARG_SRC, d->a}, {DNNL_ARG_WEIGHTS, d->b},
                               {DNNL_ARG_DST, d->c}, {DNNL_ARG_SCRATCHPAD, d->scratch}};
    return dnnl_primitive_execute(d->mm, d->stream, d->scratch ? 4 : 3, args) ||
           dnnl_stream_wait(d->stream);
}

static void direct_free(struct direct *d)
{
    dnnl_memory_t *mems[] = {&d->a, &d->b, &d->c, &d->scratch};
    for (int i = 0; i < 4; i++)
        if (*mems[i])
            dnnl_memory_destroy(*mems[i]);
    if (d->mm)
        dnnl_primitive_destroy(d->mm);
    if (d->stream)
        dnnl_stream_destroy(d->stream);
    if (d->engine)
        dnnl_engine_destroy(d->engine);
}

/* The product's tensors in nnt (A float; B bf16 or float; C float) with the model's tiles. */
struct nnt_side {
    nnt_tensor *a, *b32, *b, *c;
};

static int nnt_side_make(nnt_ctx *ctx, const struct product *p, struct nnt_side *s)
{
    long am = p->ta ? p->K : p->M, ak = p->ta ? p->M : p->K;        /* stored A rows, cols */
    long at0 = p->ta ? p->tk : p->tm, at1 = p->ta ? p->tm : p->tk;
    long bm = p->tb ? p->N : p->K, bk = p->tb ? p->K : p->N;
    long bt0 = p->tb ? p->tn : p->tk, bt1 = p->tb ? p->tk : p->tn;
    int64_t ash[2] = {am, ak}, ati[2] = {whole(at0, am), whole(at1, ak)};
    int64_t bsh[2] = {bm, bk}, bti[2] = {whole(bt0, bm), whole(bt1, bk)};
    int64_t csh[2] = {p->M, p->N}, cti[2] = {whole(p->tm, p->M), whole(p->tn, p->N)};
    memset(s, 0, sizeof *s);
    int rc = nnt_tensor_create(ctx, NNT_FP32, 2, ash, ati, &s->a);
    if (!rc)
        rc = nnt_tensor_create(ctx, NNT_FP32, 2, bsh, bti, &s->b32);
    if (!rc)
        rc = nnt_tensor_create(ctx, NNT_FP32, 2, csh, cti, &s->c);
    if (!rc)
        rc = nnt_tensor_fill_normal(s->a, 1, 0.0, 1.0);
    if (!rc)
        rc = nnt_tensor_fill_normal(s->b32, 2, 0.0, 0.02);
    s->b = s->b32;
    if (!rc && p->b16) {
        rc = nnt_tensor_create(ctx, NNT_BF16, 2, bsh, bti, &s->b);
        if (!rc)
            rc = nnt_tensor_convert(s->b32, s->b);
    }
    return rc ? rc : nnt_ctx_wait(ctx);
}

static void nnt_side_free(struct nnt_side *s)
{
    nnt_tensor_destroy(s->a);
    if (s->b != s->b32)
        nnt_tensor_destroy(s->b);
    nnt_tensor_destroy(s->b32);
    nnt_tensor_destroy(s->c);
}

/* Random-ish bf16 and float buffers of n elements. */
static uint16_t *bf16_buffer(long n)
{
    uint16_t *x = malloc((size_t)n * 2);
    for (long i = 0; x && i < n; i++)
        x[i] = (uint16_t)(0x3c00 + (i * 7919) % 1024);
    return x;
}

static float *f32_buffer(long n)
{
    float *x = malloc((size_t)n * 4);
    for (long i = 0; x && i < n; i++)
        x[i] = (float)((i * 7919) % 1024) / 1024.0f - 0.5f;
    return x;
}

/* The environment of a variant: "NAME:VAR=VALUE,VAR=VALUE" ("NAME:" none); every
 * variable any variant names is unset first. */
#define MAX_VARIANTS 4

struct variant {
    char name[32];
    char vars[8][64];
    int nvars;
};

static int parse_variants(const char *spec, struct variant *v)
{
    int n = 0;
    char buf[1024];
    snprintf(buf, sizeof buf, "%s", spec);
    for (char *save = NULL, *tok = strtok_r(buf, " ", &save); tok && n < MAX_VARIANTS;
         tok = strtok_r(NULL, " ", &save), n++) {
        char *colon = strchr(tok, ':');
        memset(&v[n], 0, sizeof v[n]);
        if (colon)
            *colon = 0;
        snprintf(v[n].name, sizeof v[n].name, "%s", tok);
        for (char *s2 = NULL, *var = colon ? strtok_r(colon + 1, ",", &s2) : NULL;
             var && v[n].nvars < 8; var = strtok_r(NULL, ",", &s2))
            snprintf(v[n].vars[v[n].nvars++], 64, "%s", var);
    }
    return n;
}

static void apply_variant(const struct variant *all, int n, const struct variant *v)
{
    for (int i = 0; i < n; i++)
        for (int j = 0; j < all[i].nvars; j++) {
            char name[64];
            snprintf(name, sizeof name, "%s", all[i].vars[j]);
            char *eq = strchr(name, '=');
            if (eq)
                *eq = 0;
            unsetenv(name);
        }
    for (int j = 0; j < v->nvars; j++) {
        char name[64];
        snprintf(name, sizeof name, "%s", v->vars[j]);
        char *eq = strchr(name, '=');
        if (eq) {
            *eq = 0;
            setenv(name, eq + 1, 1);
        }
    }
}

/* The best times of one product: nnt under each variant, and the direct calls. */
struct best {
    double nnt[MAX_VARIANTS], dnnl2, task, dnnl1;
};

static double min2(double a, double b) { return a < b ? a : b; }

/* One round of product p in ctx: its tensors and primitives made, one untimed call of
 * each, then three timed calls of each (nnt, dnnl2, dnnl1, task), kept where best. (With
 * one timed call, a worker that had not run the shape in the untimed call made its oneDNN
 * primitive inside the timing: 0.20 of oneDNN's rate for a product measured at 0.56.) */
static int product_round(nnt_ctx *ctx, const struct product *p, int vi, struct best *b)
{
    long m = whole(p->tm, p->M), n = whole(p->tn, p->N), k = whole(p->tk, p->K);
    struct nnt_side s;
    struct direct d2, d1;
    uint16_t *a16 = bf16_buffer(p->M * p->K), *b16 = bf16_buffer(p->K * p->N);
    uint16_t *ta16 = bf16_buffer(m * k), *tb16 = bf16_buffer(k * n);
    float *c2 = f32_buffer(p->M * p->N), *c1 = f32_buffer(m * n), *tc = f32_buffer(m * n);
    float *ta32 = f32_buffer(m * k), *tb32 = f32_buffer(k * n);
    nnt_dnnl_cache *cache = nnt_cpu_dnnl_cache_create();
    int rc = !a16 || !b16 || !ta16 || !tb16 || !c2 || !c1 || !tc || !ta32 || !tb32 || !cache;
    rc = rc || nnt_side_make(ctx, p, &s);
    omp_set_num_threads(2);
    rc = rc || direct_make(&d2, p->ta, p->tb, p->M, p->N, p->K, a16, b16, c2);
    omp_set_num_threads(1);
    rc = rc || direct_make(&d1, p->ta, p->tb, m, n, k, ta16, tb16, c1);
    const void *tb = p->b16 ? (const void *)tb16 : (const void *)tb32;
    for (int r = 0; r < 4 && !rc; r++) {   /* r 0: warm-up; 1-3 timed */
        /* B written again, as a step writes a weight (its bf16 copy, once a forward) between
         * its products: what nnt derived from it (packs) is made again inside the timing */
        rc = p->b16 ? nnt_tensor_convert(s.b32, s.b) : nnt_tensor_scale(s.b, 1.0);
        rc = rc || nnt_ctx_wait(ctx);
        double t0 = now();
        rc = nnt_tensor_gemm(p->ta ? NNT_TRANS : NNT_NOTRANS, p->tb ? NNT_TRANS : NNT_NOTRANS,
                             1.0, s.a, s.b, 0.0, s.c, 1, 0);
        rc = rc || nnt_ctx_wait(ctx);
        double t1 = now();
        omp_set_num_threads(2);
        rc = rc || direct_run(&d2);
        double t2 = now();
        omp_set_num_threads(1);
        rc = rc || direct_run(&d1);
        double t3 = now();
        int dtypes = NNT_DNNL_BF16 | (p->b16 ? NNT_DNNL_B_BF16 : 0);
        rc = rc || nnt_cpu_gemm_dnnl(cache, p->ta, p->tb, dtypes, m, n, k, 1.0f, ta32,
                                     p->ta ? m : k, 0, tb, p->tb ? k : n, 0, 0.0f, tc, n, 0, 1);
        double t4 = now();
        if (r >= 1) {
            b->nnt[vi] = min2(b->nnt[vi], t1 - t0);
            b->dnnl2 = min2(b->dnnl2, t2 - t1);
            b->dnnl1 = min2(b->dnnl1, t3 - t2);
            b->task = min2(b->task, t4 - t3);
        }
    }
    nnt_side_free(&s);
    direct_free(&d2);
    direct_free(&d1);
    nnt_cpu_dnnl_cache_destroy(cache);
    free(a16), free(b16), free(ta16), free(tb16), free(c2), free(c1), free(tc), free(ta32);
    free(tb32);
    return rc;
}

static int bf16_table(const char *model, int rounds)
{
    const struct product *ps = smollm2;
    size_t np = sizeof smollm2 / sizeof smollm2[0];
    if (strcmp(model, "gpt2") == 0)
        ps = gpt2, np = sizeof gpt2 / sizeof gpt2[0];
    else if (strcmp(model, "llama1b") == 0)
        ps = llama1b, np = sizeof llama1b / sizeof llama1b[0];
    if (!nnt_cpu_dnnl_bf16_native()) {
        printf("SKIP: oneDNN's ISA %s has no bf16 dot products\n", nnt_cpu_dnnl_isa());
        return 77;
    }
    struct variant v[MAX_VARIANTS];
    const char *spec = getenv("GEMM_SHAPES_VARIANTS");
    int nv = parse_variants(spec && *spec ? spec : "nnt:", v);
    struct best *best = malloc(np * sizeof *best);
    if (!best || nv < 1)
        return 1;
    for (size_t i = 0; i < np; i++) {
        best[i].dnnl2 = best[i].task = best[i].dnnl1 = 1e30;
        for (int j = 0; j < MAX_VARIANTS; j++)
            best[i].nnt[j] = 1e30;
    }
    int rc = 0;
    const char *kernels[MAX_VARIANTS] = {NULL};
    printf("load at start %s", loadavg());
    for (int r = 0; r < rounds && !rc; r++)
        for (int vi = 0; vi < nv && !rc; vi++) {
            int order = r % 2 ? nv - 1 - vi : vi;   /* alternate which variant goes first */
            apply_variant(v, nv, &v[order]);
            nnt_ctx_options o = NNT_CTX_OPTIONS_INIT;
            o.ncpus = 2;
            o.ncuda = 0;
            o.sched = "lws";
            nnt_ctx *ctx = NULL;
            rc = nnt_ctx_create(&o, &ctx);
            if (!rc)
                rc = nnt_ctx_set_precision(ctx, NNT_PRECISION_BF16);
            if (!rc && !kernels[order]) {
                const char *desc = "";
                nnt_ctx_kernels(ctx, &desc);
                kernels[order] = strdup(desc);
            }
            for (size_t i = 0; i < np && !rc; i++)
                rc = product_round(ctx, &ps[i], order, &best[i]);
            if (rc)
                fprintf(stderr, "gemm_shapes: failed (%d): %s\n", rc, nnt_ctx_last_error(ctx));
            nnt_ctx_destroy(ctx);
        }
    if (rc) {
        free(best);
        return 1;
    }
    printf("%s bf16 products, best of %d rounds (variants and direct calls interleaved); "
           "load %s", model, rounds, loadavg());
    for (int vi = 0; vi < nv; vi++)
        printf("- %s (%s%s%s): %s\n", v[vi].name, v[vi].nvars ? "" : "no variable",
               v[vi].nvars ? v[vi].vars[0] : "", v[vi].nvars > 1 ? ", ..." : "", kernels[vi]);
    printf("\n| product | M x N x K | tile m x n x k |");
    for (int vi = 0; vi < nv; vi++)
        printf(" %s GF/s |", v[vi].name);
    printf(" dnnl2 GF/s |");
    for (int vi = 0; vi < nv; vi++)
        printf(" %s/dnnl2 |", v[vi].name);
    printf(" task GF/s | dnnl1 GF/s | task/dnnl1 |\n|---|---|---|");
    for (int vi = 0; vi < 2 * nv + 4; vi++)
        printf("---:|");
    printf("\n");
    double sum[MAX_VARIANTS + 1] = {0}, flops = 0;
    for (size_t i = 0; i < np; i++) {
        const struct product *p = &ps[i];
        long m = whole(p->tm, p->M), n = whole(p->tn, p->N), k = whole(p->tk, p->K);
        double fl = 2.0 * p->M * p->N * p->K, tf = 2.0 * m * n * k;
        printf("| %s | %ld x %ld x %ld | %ld x %ld x %ld |", p->name, p->M, p->N, p->K, m, n, k);
        for (int vi = 0; vi < nv; vi++)
            printf(" %.1f |", fl / best[i].nnt[vi] * 1e-9);
        printf(" %.1f |", fl / best[i].dnnl2 * 1e-9);
        for (int vi = 0; vi < nv; vi++)
            printf(" %.2f |", best[i].dnnl2 / best[i].nnt[vi]);
        printf(" %.1f | %.1f | %.2f |\n", tf / best[i].task * 1e-9, tf / best[i].dnnl1 * 1e-9,
               best[i].dnnl1 / best[i].task);
        for (int vi = 0; vi < nv; vi++)
            sum[vi] += best[i].nnt[vi];
        sum[nv] += best[i].dnnl2;
        flops += fl;
    }
    printf("\nall products once (sum of the best times):");
    for (int vi = 0; vi < nv; vi++)
        printf(" %s %.1f ms (%.1f GFLOP/s, %.2f of dnnl2);", v[vi].name, sum[vi] * 1e3,
               flops / sum[vi] * 1e-9, sum[nv] / sum[vi]);
    printf(" dnnl2 %.1f ms (%.1f GFLOP/s)\n", sum[nv] * 1e3, flops / sum[nv] * 1e-9);
    free(best);
    return 0;
}

int main(int argc, char **argv)
{
    /* GNU OpenMP's threads spin for milliseconds after a parallel region by default: after
     * each dnnl2 call its second thread took a core from the StarPU workers of the next
     * product (GPT-2's 256 x 768 x 2304 input gradient read 0.42 of dnnl2's rate, 0.89
     * without). The policy is read when libgomp loads: the program runs itself again. */
    if (!getenv("OMP_WAIT_POLICY")) {
        setenv("OMP_WAIT_POLICY", "PASSIVE", 1);
        execv("/proc/self/exe", argv);
        perror("gemm_shapes: execv /proc/self/exe");   /* and on, spinning */
    }
    const char *what = argc > 1 ? argv[1] : "gpt2";
    int rounds = argc > 2 ? atoi(argv[2]) : 5;
    if (rounds < 1)
        rounds = 1;
    if (!nnt_cpu_dnnl_available()) {
        printf("SKIP: no oneDNN\n");
        return 77;
    }
    if (strcmp(what, "f32") == 0)
        return f32_table(rounds);
    if (strcmp(what, "gpt2") && strcmp(what, "smollm2") && strcmp(what, "llama1b")) {
        fprintf(stderr, "usage: gemm_shapes [gpt2|smollm2|f32] [ROUNDS]\n");
        return 2;
    }
    nnt_cpu_blis_setup();
    /* this program's own copy of the kernels (the task column): B as the environment says,
     * as nnt_ctx_create chooses it for the library's */
    char why[128];
    if (nnt_cpu_dnnl_choose_b(why, sizeof why) != 0) {
        fprintf(stderr, "gemm_shapes: %s\n", why);
        return 2;
    }
    return bf16_table(what, rounds);
}

#else

int main(void)
{
    printf("SKIP: this nnt was built without oneDNN (configure --with-onednn)\n");
    return 77;
}

#endif
