/* SPDX-License-Identifier: MIT */
/* bench_gpt2: time training steps (forward + backward + AdamW) of a GPT-2 layer
 * (nnt_gpt_create, nnt_optim AdamW; public API only) on random weights and tokens.
 * Not a test: run by hand, results go to bench/RESULTS.md (older results there were taken
 * with the internal model code, lib/models/gpt2.c, which this program used to call).
 *
 * Usage: bench_gpt2 [--layers L] [--channels C] [--heads NH] [--vocab V] [--context maxT]
 *                   [--batch B] [--seq T] [--steps N] [--tile-batch n] [--tile-seq n]
 *                   [--tile-channels n] [--tile-hidden n] [--tile-vocab n] [--tile-heads n]
 *                   [--tile-head-dim n] [--no-auto-tiling] [--peak GFLOPS] [--cpus N] [--sched NAME] [--mem-cpu MiB]
 *                   [--swap-dir DIR] [--swap-size MiB]
 * Defaults: GPT-2 124M (12, 768, 12, 50257, 1024), B=4, T=64, 3 timed steps after one
 * warm-up step, the automatic tiling of nnt_gpt_tiling for the context's workers (each
 * --tile-X given overrides that dimension, 0 = one tile over the whole dimension;
 * --no-auto-tiling: one tile per dimension unless given), peak 175 GFLOP/s (BLIS sgemm,
 * 2 cores), all cores,
 * StarPU's default scheduler, no RAM budget, no disk swap.
 * --mem-cpu sets the RAM budget StarPU may use for tiles (nnt_ctx_options.mem_cpu_mib);
 * --swap-dir/--swap-size give it a disk to evict tiles to (swap_dir, swap_mib).
 * At the end it prints the peak RSS and the bytes this process read from and wrote to
 * storage (/proc/self/io), to see how much went through the disk swap. */
#include <nnt.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int fail(const char *what, int rc)
{
    fprintf(stderr, "bench_gpt2: %s: %s: %s\n", what, nnt_strerror(rc), nnt_ctx_last_error(NULL));
    return 1;
}

/* Peak resident set (MiB) and storage bytes read and written so far (-1 if unknown). */
static void report_memory_and_io(void)
{
    struct rusage ru;
    long long rd = -1, wr = -1;
    char key[64];
    long long val;
    FILE *f = fopen("/proc/self/io", "r");
    while (f && fscanf(f, "%63[^:]: %lld\n", key, &val) == 2) {
        if (!strcmp(key, "read_bytes")) rd = val;
        else if (!strcmp(key, "write_bytes")) wr = val;
    }
    if (f)
        fclose(f);
    if (getrusage(RUSAGE_SELF, &ru) == 0)
        printf("peak RSS %.0f MiB; ", (double)ru.ru_maxrss / 1024.0);
    printf("storage read %.1f MiB, written %.1f MiB\n", rd < 0 ? -1.0 : (double)rd / 1048576.0,
           wr < 0 ? -1.0 : (double)wr / 1048576.0);
}

static int ends_with(const char *s, const char *tail)
{
    size_t n = strlen(s), k = strlen(tail);
    return n >= k && strcmp(s + n - k, tail) == 0;
}

/* Small random weights (LayerNorm gains 1): enough to time the math without NaNs. */
static int init_weights(nnt_layer *m, unsigned long long seed)
{
    int64_t count = 0;
    int rc = nnt_layer_num_params(m, &count, NULL);
    for (int64_t i = 0; rc == 0 && i < count; i++) {
        nnt_param_info p;
        memset(&p, 0, sizeof p);
        p.size = sizeof p;
        int64_t n = 0;
        if ((rc = nnt_layer_param(m, i, &p)) || (rc = nnt_tensor_numel(p.value, &n)))
            return rc;
        float *w = malloc((size_t)n * sizeof *w);
        if (!w)
            return NNT_E_NOMEM;
        int gain = ends_with(p.name, "ln_1.weight") || ends_with(p.name, "ln_2.weight") ||
                   ends_with(p.name, "ln_f.weight");
        for (int64_t j = 0; j < n; j++) {
            seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
            float u = (float)((seed >> 40) * 0x1p-24) - 0.5f;
            w[j] = gain ? 1.0f : 0.04f * u;
        }
        rc = nnt_tensor_copy_from_host(p.value, w, (size_t)n * sizeof *w);
        free(w);
    }
    return rc;
}

/* The overrides of nnt_gpt_tiling: a tile given on the command line (0 = whole dimension,
 * nnt_tiling's -1), else automatic (0) or, without auto tiling, the whole dimension. */
static int64_t override_of(int64_t given, int auto_tiling)
{
    if (given > 0)
        return given;
    return given == 0 || !auto_tiling ? -1 : 0;
}

int main(int argc, char **argv)
{
    nnt_gpt_config cfg = NNT_GPT_CONFIG_INIT;
    /* -1: not given on the command line (auto tiling or one tile) */
    nnt_tiling given = {sizeof(nnt_tiling), -1, -1, -1, -1, -1, -1, -1};
    nnt_tiling tiling = NNT_TILING_INIT;
    int auto_tiling = 1;
    int64_t B = 4, T = 64, steps = 3;
    double peak = 175.0;
    nnt_ctx_options opts = NNT_CTX_OPTIONS_INIT;
    for (int i = 1; i < argc; i += 2) {
        const char *k = argv[i];
        if (!strcmp(k, "--no-auto-tiling")) {
            auto_tiling = 0;
            i--;
            continue;
        }
        if (i + 1 >= argc) {
            fprintf(stderr, "bench_gpt2: option %s needs a value\n", k);
            return 2;
        }
        double v = atof(argv[i + 1]);
        if (!strcmp(k, "--layers")) cfg.layers = (int64_t)v;
        else if (!strcmp(k, "--channels")) cfg.channels = (int64_t)v;
        else if (!strcmp(k, "--heads")) cfg.heads = (int64_t)v;
        else if (!strcmp(k, "--vocab")) cfg.vocab = (int64_t)v;
        else if (!strcmp(k, "--context")) cfg.max_seq = (int64_t)v;
        else if (!strcmp(k, "--batch")) B = (int64_t)v;
        else if (!strcmp(k, "--seq")) T = (int64_t)v;
        else if (!strcmp(k, "--steps")) steps = (int64_t)v;
        else if (!strcmp(k, "--tile-batch")) given.batch = (int64_t)v;
        else if (!strcmp(k, "--tile-seq")) given.seq = (int64_t)v;
        else if (!strcmp(k, "--tile-channels")) given.channels = (int64_t)v;
        else if (!strcmp(k, "--tile-hidden")) given.hidden = (int64_t)v;
        else if (!strcmp(k, "--tile-vocab")) given.vocab = (int64_t)v;
        else if (!strcmp(k, "--tile-heads")) given.heads = (int64_t)v;
        else if (!strcmp(k, "--tile-head-dim")) given.head_dim = (int64_t)v;
        else if (!strcmp(k, "--peak")) peak = v;
        else if (!strcmp(k, "--cpus")) opts.ncpus = (int)v;
        else if (!strcmp(k, "--sched")) opts.sched = argv[i + 1];
        else if (!strcmp(k, "--mem-cpu")) opts.mem_cpu_mib = (int64_t)v;
        else if (!strcmp(k, "--swap-dir")) opts.swap_dir = argv[i + 1];
        else if (!strcmp(k, "--swap-size")) opts.swap_mib = (int64_t)v;
        else {
            fprintf(stderr, "bench_gpt2: unknown option %s\n", k);
            return 2;
        }
    }
    nnt_ctx *ctx;
    nnt_layer *m;
    nnt_optim *opt;
    nnt_tensor *tok, *tgt;
    int rc = nnt_ctx_create(&opts, &ctx);
    if (rc)
        return fail("context", rc);
    int ncpus = 0;
    const char *sched = "?";
    nnt_ctx_workers(ctx, &ncpus, NULL);
    nnt_ctx_sched(ctx, &sched);
    nnt_tiling over = {sizeof(nnt_tiling), override_of(given.batch, auto_tiling),
        override_of(given.seq, auto_tiling), override_of(given.channels, auto_tiling),
        override_of(given.hidden, auto_tiling), override_of(given.vocab, auto_tiling),
        override_of(given.heads, auto_tiling), override_of(given.head_dim, auto_tiling)};
    if ((rc = nnt_gpt_tiling(ctx, &cfg, B, T, &over, &tiling)))
        return fail("tiling", rc);
    printf("tiling (%s; tile sizes): batch %lld, seq %lld, channels %lld, hidden %lld, vocab "
           "%lld, heads %lld, head_dim %lld\n", auto_tiling ? "auto" : "no auto",
           (long long)tiling.batch, (long long)tiling.seq, (long long)tiling.channels,
           (long long)tiling.hidden, (long long)tiling.vocab, (long long)tiling.heads,
           (long long)tiling.head_dim);
    if ((rc = nnt_gpt_create(ctx, &cfg, B, T, &tiling, &m)) || (rc = init_weights(m, 42)))
        return fail("model", rc);
    int64_t bt[2] = {B, T};
    int32_t *host = malloc((size_t)(B * T) * sizeof *host);
    if ((rc = nnt_tensor_create(ctx, NNT_INT32, 2, bt, NULL, &tok)) ||
        (rc = nnt_tensor_create(ctx, NNT_INT32, 2, bt, NULL, &tgt)))
        return fail("tokens", rc);
    nnt_optim_options adam = NNT_OPTIM_OPTIONS_INIT;
    adam.kind = NNT_OPTIM_ADAMW;
    adam.lr = 1e-4;
    adam.weight_decay = 0.1;
    if ((rc = nnt_optim_create(ctx, &adam, &opt)) || (rc = nnt_optim_add_layer(opt, m)))
        return fail("optimizer", rc);
    int64_t numel = 0;
    if ((rc = nnt_layer_num_params(m, NULL, &numel)))
        return fail("model", rc);
    double nparams = (double)numel;
    /* 6 N per token for the matrices, plus attention scores and values: 6 L T C per token
     * forward-and-backward of QK^T and PV (causal half counted as full, as usual). */
    double flops = 6.0 * nparams * (double)(B * T) +
                   12.0 * (double)(cfg.layers * B * T * T * cfg.channels);
    printf("GPT-2 L=%lld C=%lld NH=%lld V=%lld: %.1fM parameters; B=%lld T=%lld; %d CPU "
           "workers, %s; %.1f GFLOP/step\n", (long long)cfg.layers, (long long)cfg.channels,
           (long long)cfg.heads, (long long)cfg.vocab, nparams / 1e6, (long long)B, (long long)T,
           ncpus, sched, flops / 1e9);
    printf("state (params, grads, 2 Adam moments): %.0f MiB; RAM budget %lld MiB, swap %s "
           "(%lld MiB)\n", 16.0 * nparams / 1048576.0, (long long)opts.mem_cpu_mib,
           opts.swap_dir ? opts.swap_dir : "none", (long long)opts.swap_mib);
    fflush(stdout);
    double total = 0;
    for (int64_t s = 0; s <= steps; s++) {
        unsigned long long seed = 7 + (unsigned long long)s;
        for (int64_t j = 0; j < B * T; j++) {
            seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
            host[j] = (int32_t)((seed >> 33) % (unsigned long long)cfg.vocab);
        }
        double loss = 0, t0 = now();
        if ((rc = nnt_tensor_copy_from_host(tok, host, (size_t)(B * T) * sizeof *host)) ||
            (rc = nnt_tensor_copy_from_host(tgt, host, (size_t)(B * T) * sizeof *host)) ||
            (rc = nnt_layer_set_targets(m, tgt)) || (rc = nnt_layer_zero_grad(m)) ||
            (rc = nnt_layer_forward(m, tok, NULL)) || (rc = nnt_layer_loss(m, &loss)) ||
            (rc = nnt_layer_backward(m, NULL, NULL)) || (rc = nnt_optim_step(opt)) ||
            (rc = nnt_ctx_wait(ctx)))
            return fail("step", rc);
        double dt = now() - t0;
        if (s > 0)
            total += dt;
        printf("step %lld%s: loss %.4f, %.0f ms, %.0f tokens/s, %.1f GFLOP/s (MFU %.1f%% of "
               "%.0f)\n", (long long)s, s == 0 ? " (warm-up)" : "", loss, dt * 1e3,
               (double)(B * T) / dt, flops / dt / 1e9, 100 * flops / dt / 1e9 / peak, peak);
        fflush(stdout);
    }
    if (steps > 0)
        printf("mean of %lld steps: %.0f ms/step, %.0f tokens/s, MFU %.1f%%\n", (long long)steps,
               total / (double)steps * 1e3, (double)(B * T * steps) / total,
               100 * flops * (double)steps / total / 1e9 / peak);
    free(host);
    nnt_tensor_destroy(tok);
    nnt_tensor_destroy(tgt);
    nnt_optim_destroy(opt);
    nnt_layer_destroy(m);
    nnt_ctx_destroy(ctx);
    report_memory_and_io();
    return 0;
}
