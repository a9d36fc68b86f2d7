/* SPDX-License-Identifier: MIT */
/* bench_paths: time a GPT-2 124M training step (forward + cross-entropy + backward + AdamW)
 * built two ways through the public API (nnt.h), with the same tiling:
 *
 *   fused    nnt_gpt_create: the NNT_LAYER_GPT layer the library uses for GPT-2 today;
 *   generic  the same model assembled from the generic layers: nnt_layer_embedding_create
 *            (V, T, C), L x nnt_layer_block_create(C, NH, 4C), nnt_layer_layernorm_create
 *            (C, 1e-5), nnt_layer_lm_head_create(embedding), nnt_layer_cross_entropy_create
 *            (-1), in one nnt_layer_sequential_create.
 *
 * What moving GPT-2 onto the generic layers would cost. Not a test: run by hand, results go
 * to bench/RESULTS-llama.md.
 *
 * Usage: bench_paths fused|generic [--steps N] [--batch B] [--seq T]
 * Defaults: B 4, T 64, N 3 timed steps after 2 warm-up steps; V 50257, L 12, C 768, NH 12;
 * tiling nnt_gpt_tiling(ctx, cfg, B, T, NULL) on all CPU workers (default context);
 * random token ids (fixed seed); AdamW lr 1e-4, betas 0.9 0.999, weight decay 0.1, no
 * clipping; both models initialised by nnt_layer_init(seed 1).
 * A step: nnt_layer_clear_grad, nnt_layer_set_targets, nnt_layer_forward, nnt_layer_backward,
 * nnt_layer_loss, nnt_optim_step (which waits for the gradients), then nnt_ctx_wait.
 * Prints each step's loss and time on stderr and "PATH mean X ms/step over N steps" on
 * stdout. */
#include <nnt.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

#define CHECK(call)                                                                          \
    do {                                                                                     \
        int rc_ = (call);                                                                    \
        if (rc_ != 0) {                                                                      \
            fprintf(stderr, "bench_paths: %s: %s: %s\n", #call, nnt_strerror(rc_),           \
                    nnt_ctx_last_error(ctx));                                                \
            return 1;                                                                        \
        }                                                                                    \
    } while (0)

static int usage(void)
{
    fprintf(stderr, "usage: bench_paths fused|generic [--steps N] [--batch B] [--seq T]\n");
    return 2;
}

int main(int argc, char **argv)
{
    const int warmup = 2;
    int64_t B = 4, T = 64;
    int steps = 3;
    if (argc < 2)
        return usage();
    int generic;
    if (!strcmp(argv[1], "fused"))
        generic = 0;
    else if (!strcmp(argv[1], "generic"))
        generic = 1;
    else
        return usage();
    for (int i = 2; i < argc; i++) {
        if (i + 1 >= argc)
            return usage();
        if (!strcmp(argv[i], "--steps"))
            steps = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--batch"))
            B = atoll(argv[++i]);
        else if (!strcmp(argv[i], "--seq"))
            T = atoll(argv[++i]);
        else
            return usage();
    }
    if (steps < 1 || B < 1 || T < 1)
        return usage();

    nnt_ctx *ctx = NULL;
    CHECK(nnt_ctx_create(NULL, &ctx));
    nnt_gpt_config cfg = NNT_GPT_CONFIG_INIT; /* GPT-2 124M */
    const int64_t V = cfg.vocab, C = cfg.channels, NH = cfg.heads;
    const int L = (int)cfg.layers;
    if (T > cfg.max_seq)
        return usage();
    cfg.max_seq = T; /* as the generic embedding (V, T, C): the same position table */
    nnt_tiling tl;
    CHECK(nnt_gpt_tiling(ctx, &cfg, B, T, NULL, &tl));
    int ncpu = 0;
    CHECK(nnt_ctx_workers(ctx, &ncpu, NULL));
    fprintf(stderr,
            "bench_paths %s: GPT-2 L %d C %lld NH %lld V %lld, B %lld T %lld, %d CPU workers; "
            "tiling batch %lld seq %lld channels %lld hidden %lld vocab %lld heads %lld "
            "head_dim %lld\n",
            argv[1], L, (long long)C, (long long)NH, (long long)V, (long long)B, (long long)T,
            ncpu, (long long)tl.batch, (long long)tl.seq, (long long)tl.channels,
            (long long)tl.hidden, (long long)tl.vocab, (long long)tl.heads,
            (long long)tl.head_dim);

    nnt_layer *model = NULL;
    if (generic) {
        nnt_layer **k = calloc((size_t)L + 4, sizeof *k);
        if (!k)
            return 1;
        CHECK(nnt_layer_embedding_create(ctx, V, T, C, &tl, &k[0]));
        for (int l = 0; l < L; l++)
            CHECK(nnt_layer_block_create(ctx, C, NH, 4 * C, &tl, &k[1 + l]));
        CHECK(nnt_layer_layernorm_create(ctx, C, 1e-5, &tl, &k[L + 1]));
        CHECK(nnt_layer_lm_head_create(k[0], &k[L + 2]));
        CHECK(nnt_layer_cross_entropy_create(ctx, -1, &k[L + 3]));
        CHECK(nnt_layer_sequential_create(ctx, L + 4, k, &model));
        free(k);
    } else {
        CHECK(nnt_gpt_create(ctx, &cfg, B, T, &tl, &model));
    }
    CHECK(nnt_layer_init(model, 1));
    int64_t nparams = 0;
    CHECK(nnt_layer_num_params(model, NULL, &nparams));

    /* Random token ids and targets in [0, V), xorshift64 with a fixed seed. */
    nnt_tensor *tok = NULL, *tgt = NULL;
    const int64_t shape[2] = { B, T }, tile[2] = { tl.batch, tl.seq };
    CHECK(nnt_tensor_create(ctx, NNT_INT32, 2, shape, tile, &tok));
    CHECK(nnt_tensor_create(ctx, NNT_INT32, 2, shape, tile, &tgt));
    int32_t *ids = malloc((size_t)(2 * B * T) * sizeof *ids);
    if (!ids)
        return 1;
    uint64_t x = 0x9e3779b97f4a7c15ULL;
    for (int64_t i = 0; i < 2 * B * T; i++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        ids[i] = (int32_t)(x % (uint64_t)V);
    }
    const size_t nbytes = (size_t)(B * T) * sizeof *ids;
    CHECK(nnt_tensor_copy_from_host(tok, ids, nbytes));
    CHECK(nnt_tensor_copy_from_host(tgt, ids + B * T, nbytes));
    free(ids);

    nnt_optim_options oo = NNT_OPTIM_OPTIONS_INIT;
    oo.lr = 1e-4;
    oo.weight_decay = 0.1;
    nnt_optim *opt = NULL;
    CHECK(nnt_optim_create(ctx, &oo, &opt));
    CHECK(nnt_optim_add_layer(opt, model));
    CHECK(nnt_ctx_wait(ctx));

    double sum = 0.0;
    for (int s = 0; s < warmup + steps; s++) {
        double t0 = now(), loss = 0.0;
        CHECK(nnt_layer_clear_grad(model));
        CHECK(nnt_layer_set_targets(model, tgt));
        CHECK(nnt_layer_forward(model, tok, NULL));
        CHECK(nnt_layer_backward(model, NULL, NULL));
        CHECK(nnt_layer_loss(model, &loss));
        CHECK(nnt_optim_step(opt));
        CHECK(nnt_ctx_wait(ctx));
        double dt = now() - t0;
        if (s >= warmup)
            sum += dt;
        fprintf(stderr, "%s step %d%s loss %.6f %.1f ms\n", argv[1], s + 1,
                s < warmup ? " (warm-up)" : "", loss, 1e3 * dt);
    }
    printf("%s mean %.1f ms/step over %d steps (after %d warm-up); %.3fM parameters\n",
           argv[1], 1e3 * sum / steps, steps, warmup, (double)nparams / 1e6);

    nnt_optim_destroy(opt);
    nnt_tensor_destroy(tok);
    nnt_tensor_destroy(tgt);
    nnt_layer_destroy(model);
    CHECK(nnt_ctx_destroy(ctx));
    return 0;
}
