/* SPDX-License-Identifier: MIT */
/* kernels_gbs.c (issue 16): nnt's non-GEMM CPU kernels against a copy loop, one thread.
 *
 * Each kernel runs on the tile sizes nnt's automatic tiling gives GPT-2 124M at B 4, T 64
 * with 2 workers (128 rows; channels 768, hidden tile 1536, vocabulary tile 7232; AdamW on
 * a 768 x 3072 weight and on a 7232 x 768 embedding tile), best of many calls after a
 * warm-up; GB/s counts the bytes the kernel must read + write. Next to each, a copy loop
 * (memcpy) moving the same number of bytes (reads = writes = half) over buffers of the same size,
 * so cache effects are alike; a 256 MiB copy loop is printed last as the DRAM figure.
 * NNT_CPU_ISA=generic|avx2 picks the kernels' path (where the library has that switch).
 * Build against the kernel sources alone (no StarPU, BLIS or oneDNN needed):
 *
 *     cc -O2 -Icpu bench/kernels_gbs.c cpu/elementwise.c cpu/xent.c cpu/softmax.c \
 *        cpu/layernorm.c cpu/rmsnorm.c cpu/swiglu.c cpu/optim.c $(ls cpu/isa.c 2>/dev/null) -lm \
 *        -o /tmp/kernels_gbs && /tmp/kernels_gbs
 */
#define _POSIX_C_SOURCE 200809L
#include "nnt_cpu.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define ROWS 128
#define C 768
#define HID 1536
#define VOC 7232
#define MIN_SECONDS 0.25

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static float *buf(int64_t n, float lo, float hi, unsigned seed)
{
    float *p = malloc((size_t)n * sizeof *p);
    if (!p) {
        fprintf(stderr, "out of memory\n");
        exit(1);
    }
    for (int64_t i = 0; i < n; i++) {
        seed = seed * 1664525u + 1013904223u;
        p[i] = lo + (hi - lo) * (float)(seed >> 8) / 16777216.0f;
    }
    return p;
}

/* ---- the kernels at their tile sizes -------------------------------------------------------- */

static float *g_a, *g_b, *g_c, *g_d, *g_e, *g_m, *g_s, *g_t, *g_cx, *g_cy;
static int32_t g_tgt[ROWS];
static int64_t g_n;

static void k_gelu_fwd(void) { nnt_cpu_gelu_fwd_f32(g_n, g_a, g_c); }
static void k_gelu_bwd(void) { nnt_cpu_gelu_bwd_f32(g_n, g_a, g_b, g_c); }
static void k_bias_gelu(void) { nnt_cpu_bias_gelu_f32(ROWS, HID, g_d, g_a, g_c); }
static void k_swiglu_fwd(void) { nnt_cpu_swiglu_fwd_f32(g_n, g_a, g_b, g_c); }
static void k_swiglu_bwd(void) { nnt_cpu_swiglu_bwd_f32(g_n, g_a, g_b, g_d, g_c, g_e); }
static void k_ln_fwd(void) { nnt_cpu_layernorm_fwd_f32(ROWS, C, 1e-5f, g_a, g_d, g_e, g_c, g_m, g_s); }
static void k_ln_bwd(void)
{
    nnt_cpu_layernorm_bwd_f32(ROWS, C, g_a, g_b, g_d, g_m, g_s, g_c, g_e, g_t);
}
static void k_rms_fwd(void) { nnt_cpu_rmsnorm_fwd_f32(ROWS, C, 1e-5f, g_a, g_d, g_c, g_s); }
static void k_rms_bwd(void) { nnt_cpu_rmsnorm_bwd_f32(ROWS, C, g_a, g_b, g_d, g_s, g_c, g_e); }
static void k_xent_fwd(void)
{
    for (int r = 0; r < ROWS; r++) {
        g_m[r] = -INFINITY;
        g_s[r] = 0.0f;
    }
    nnt_cpu_xent_fwd_block_f32(ROWS, VOC, 0, g_a, VOC, g_tgt, g_m, g_s, g_t);
}
static void k_xent_bwd(void)
{
    nnt_cpu_xent_bwd_block_f32(ROWS, VOC, 0, g_a, VOC, g_tgt, -100, g_m, g_s, NULL, 1.0f / ROWS, g_c);
}
static void k_adamw(void)
{
    nnt_cpu_adam_step_f32(g_n, 1, 1e-4f, 0.9f, 0.999f, 1e-8f, 0.1f, 0.1f, 0.002f, 1.0f, g_a,
                          g_b, g_c, g_d);
}

/* memcpy: GCC 12 at -O2 leaves a plain copy loop scalar (a float a cycle, ~26 GB/s hot),
 * which would understate what the memory system gives */
static void k_copy(void)
{
    memcpy(g_cy, g_cx, (size_t)g_n * sizeof(float));
}

static double best_seconds(void (*fn)(void))
{
    fn();
    double best = 1e30, t_all = now();
    int reps = 0;
    while (reps < 5 || now() - t_all < MIN_SECONDS) {
        double t0 = now();
        fn();
        double dt = now() - t0;
        best = dt < best ? dt : best;
        reps++;
    }
    return best;
}

struct kcase {
    const char *name;
    void (*fn)(void);
    int64_t n;       /* elements per operand array */
    double bytes;    /* bytes the kernel must read + write */
};

int main(void)
{
    const int64_t nh = (int64_t)ROWS * HID, nc = (int64_t)ROWS * C, nx = (int64_t)ROWS * VOC;
    const int64_t nw = (int64_t)C * 3072, ne = (int64_t)VOC * C;
    int64_t nmax = ne > nx ? ne : nx;
    g_a = buf(nmax, -3, 3, 1);
    g_b = buf(nmax, -1, 1, 2);
    g_c = buf(nmax, 0, 1, 3);
    g_d = buf(nmax, 0.5f, 1.5f, 4);
    g_e = buf(nmax, 0, 1, 5);
    g_m = buf(ROWS, 0, 1, 6);
    g_s = buf(ROWS, 0.5f, 1, 7);
    g_t = buf(nmax, 0, 1, 8);
    g_cx = buf(4 * ne, 0, 1, 11); /* the copy loop's, up to AdamW's 28 B an element */
    g_cy = buf(4 * ne, 0, 1, 12);
    for (int r = 0; r < ROWS; r++)
        g_tgt[r] = (r * 977) % VOC;
    double f = 4.0;
    struct kcase cases[] = {
        {"gelu fwd (128 x 1536)", k_gelu_fwd, nh, f * 2 * nh},
        {"gelu bwd (128 x 1536)", k_gelu_bwd, nh, f * 3 * nh},
        {"bias+gelu (128 x 1536)", k_bias_gelu, nh, f * 3 * nh},
        {"swiglu fwd (128 x 1536)", k_swiglu_fwd, nh, f * 3 * nh},
        {"swiglu bwd (128 x 1536)", k_swiglu_bwd, nh, f * 5 * nh},
        {"layernorm fwd (128 x 768)", k_ln_fwd, nc, f * 2 * nc},
        {"layernorm bwd (128 x 768)", k_ln_bwd, nc, f * 3 * nc},
        {"rmsnorm fwd (128 x 768)", k_rms_fwd, nc, f * 2 * nc},
        {"rmsnorm bwd (128 x 768)", k_rms_bwd, nc, f * 3 * nc},
        {"xent fwd (128 x 7232)", k_xent_fwd, nx, f * nx},
        {"xent bwd (128 x 7232)", k_xent_bwd, nx, f * 2 * nx},
        {"adamw (768 x 3072)", k_adamw, nw, f * 7 * nw},
        {"adamw (7232 x 768)", k_adamw, ne, f * 7 * ne},
    };
    const char *isa = getenv("NNT_CPU_ISA");
    printf("nnt CPU kernels, one thread, NNT_CPU_ISA=%s; copy = a copy loop moving the same "
           "bytes\n", isa ? isa : "(unset)");
    printf("%-26s %9s %8s %8s %6s\n", "kernel", "us", "GB/s", "copy", "ratio");
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct kcase *k = &cases[i];
        g_n = k->n;
        if (k->fn == k_xent_bwd)
            k_xent_fwd(); /* m, s of these logits */
        double t = best_seconds(k->fn);
        g_n = (int64_t)(k->bytes / 8.0); /* reads = writes = half the bytes */
        double tc = best_seconds(k_copy);
        double gbs = k->bytes / t / 1e9, cgbs = k->bytes / tc / 1e9;
        printf("%-26s %9.1f %8.2f %8.2f %6.2f\n", k->name, t * 1e6, gbs, cgbs, gbs / cgbs);
    }
    /* DRAM: 256 MiB each way */
    free(g_cx);
    free(g_cy);
    g_n = (int64_t)64 << 20;
    g_cx = buf(g_n, 0, 1, 9);
    g_cy = buf(g_n, 0, 1, 10);
    double tc = best_seconds(k_copy);
    printf("copy loop 256 MiB (DRAM): %.2f GB/s\n", 8.0 * (double)g_n / tc / 1e9);
    return 0;
}
