/* SPDX-License-Identifier: MIT */
/* bench_generate: time text generation (nnt_model_generate, public API only) of a model of a
 * preset's shapes with random weights (nnt_layer_init), with and without the key/value cache.
 * Not a test: run by hand (bench/bench_generate.sh), results go to bench/RESULTS-generate.md.
 *
 * Usage: bench_generate [--model PRESET] [--prompt N] [--new N] [--cpus N] [--no-cache]
 *                       [--rounds N] [--seed S] [--tile-channels N] [--tile-hidden N]
 *                       [--precision fp32|tf32|bf16] [--freeze none|bf16|fp32|nf4]
 *                       [--samples N] [--ragged] [--temperature T] [--top-k K]
 * Defaults: gpt2, prompt 64 random ids, 128 new tokens (greedy), 2 CPU workers, the cache, one
 * untimed warm-up generation of 8 tokens, then 1 timed round. Prints per round the time of
 * the whole call (prefill included) and new tokens / s, and the first new ids (so that runs
 * with and without the cache can be compared). --freeze freezes every parameter after the
 * init (nnt_layer_freeze): bf16 NNT_FREEZE (the matrices in bf16 under bf16 products), fp32
 * NNT_FREEZE_KEEP_FP32, nf4 NNT_FREEZE_NF4 (the matrices in NF4, QLoRA's base).
 * --samples N (N > 1): each round times N sequences side by side (nnt_model_generate_n) and
 * then the same N one after another (nnt_model_generate with seeds S + r), and prints both
 * rates (new tokens of all sequences a second) and their ratio. --ragged with --samples N:
 * N different prompts of lengths from --prompt down to about half of it (prompt r of
 * ragged_len: the ids of one random sequence from a different start each) side by side
 * (nnt_model_generate_batch, seeds S + r) against the same one after another.
 * --temperature (default 0: greedy) and --top-k (default 40) choose the sampling. */
#include <nnt.h>

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

static int fail(const char *what, int rc)
{
    fprintf(stderr, "bench_generate: %s: %s: %s\n", what, nnt_strerror(rc),
            nnt_ctx_last_error(NULL));
    return 1;
}

int main(int argc, char **argv)
{
    const char *preset = "gpt2";
    long nprompt = 64, ngen = 128, cpus = 2, rounds = 1, no_cache = 0, seed = 1, nseq = 1;
    int ragged = 0;
    long top_k = 40;
    double temperature = 0.0;
    const char *precision = "fp32", *freeze = "none";
    nnt_tiling tl = NNT_TILING_INIT;
    for (int i = 1; i < argc; i++) {
        const char *k = argv[i];
        if (!strcmp(k, "--no-cache")) {
            no_cache = 1;
            continue;
        }
        if (!strcmp(k, "--ragged")) {
            ragged = 1;
            continue;
        }
        if (i + 1 >= argc) {
            fprintf(stderr, "bench_generate: %s needs a value\n", k);
            return 2;
        }
        const char *v = argv[++i];
        if (!strcmp(k, "--model")) preset = v;
        else if (!strcmp(k, "--prompt")) nprompt = atol(v);
        else if (!strcmp(k, "--new")) ngen = atol(v);
        else if (!strcmp(k, "--cpus")) cpus = atol(v);
        else if (!strcmp(k, "--rounds")) rounds = atol(v);
        else if (!strcmp(k, "--seed")) seed = atol(v);
        else if (!strcmp(k, "--tile-channels")) tl.channels = atol(v);
        else if (!strcmp(k, "--tile-hidden")) tl.hidden = atol(v);
        else if (!strcmp(k, "--precision")) precision = v;
        else if (!strcmp(k, "--freeze")) freeze = v;
        else if (!strcmp(k, "--samples")) nseq = atol(v);
        else if (!strcmp(k, "--temperature")) temperature = atof(v);
        else if (!strcmp(k, "--top-k")) top_k = atol(v);
        else {
            fprintf(stderr, "bench_generate: unknown option %s\n", k);
            return 2;
        }
    }
    static const char *const names[] = {"fp32", "tf32", "bf16"};   /* = nnt_precision */
    int pi = 2;
    while (pi >= 0 && strcmp(precision, names[pi]))
        pi--;
    nnt_precision prec = (nnt_precision)(pi < 0 ? 0 : pi);
    if (pi < 0) {
        fprintf(stderr, "bench_generate: --precision %s: use fp32, tf32 or bf16\n", precision);
        return 2;
    }
    static const char *const modes[] = {"none", "bf16", "fp32", "nf4"};   /* = nnt_freeze_mode */
    int fi = 3;
    while (fi >= 0 && strcmp(freeze, modes[fi]))
        fi--;
    if (fi < 0) {
        fprintf(stderr, "bench_generate: --freeze %s: use none, bf16, fp32 or nf4\n", freeze);
        return 2;
    }
    if (nprompt < 1 || ngen < 1 || rounds < 1 || nseq < 1) {
        fprintf(stderr, "bench_generate: --prompt, --new, --rounds and --samples must be "
                ">= 1\n");
        return 2;
    }
    nnt_model_config cfg;
    int rc = nnt_model_preset(preset, &cfg);
    if (rc)
        return fail("nnt_model_preset", rc);
    nnt_ctx_options opts = NNT_CTX_OPTIONS_INIT;
    opts.ncpus = (int)cpus;
    nnt_ctx *ctx = NULL;
    if ((rc = nnt_ctx_create(&opts, &ctx)) || (rc = nnt_ctx_set_precision(ctx, prec)))
        return fail("nnt_ctx_create", rc);
    nnt_layer *model = NULL;
    int64_t T = nprompt + ngen < cfg.max_seq ? nprompt + ngen : cfg.max_seq;
    nnt_tiling used;
    if ((rc = nnt_model_tiling(ctx, &cfg, 1, T, &tl, &used)))
        return fail("nnt_model_tiling", rc);
    printf("# tiling: batch %lld seq %lld channels %lld hidden %lld vocab %lld heads %lld\n",
           (long long)used.batch, (long long)used.seq, (long long)used.channels,
           (long long)used.hidden, (long long)used.vocab, (long long)used.heads);
    if ((rc = nnt_model_create(ctx, &cfg, 1, T, &tl, &model)) ||
        (rc = nnt_layer_init(model, (uint64_t)seed)))
        return fail("nnt_model_create", rc);
    if (fi > 0 && (rc = nnt_layer_freeze(model, "*", fi, NULL)))
        return fail("nnt_layer_freeze", rc);
    int32_t *prompt = malloc((size_t)nprompt * sizeof *prompt);
    int32_t *out = malloc((size_t)(ngen * nseq) * sizeof *out);
    srand((unsigned)seed);
    for (long i = 0; i < nprompt; i++)
        prompt[i] = (int32_t)(rand() % cfg.vocab);
    /* --ragged: prompt r the ragged_len(r) ids from position r of the random sequence */
    int32_t *all = malloc((size_t)(nprompt + nseq) * sizeof *all);
    const int32_t **prompts = malloc((size_t)nseq * sizeof *prompts);
    int64_t *lens = malloc((size_t)nseq * sizeof *lens);
    for (long i = 0; i < nprompt + nseq; i++)
        all[i] = (int32_t)(rand() % cfg.vocab);
    for (long r = 0; r < nseq; r++) {
        prompts[r] = all + r;
        lens[r] = nprompt - r * (nprompt / 2) / nseq;
    }
    nnt_sampling s = NNT_SAMPLING_INIT;
    s.temperature = temperature;
    s.top_k = top_k;
    s.no_cache = (int)no_cache;
    if ((rc = ragged ? nnt_model_generate_batch(model, nseq, prompts, lens, NULL,
                                                ngen < 8 ? ngen : 8, &s, out)
                     : nnt_model_generate_n(model, prompt, nprompt, nseq, ngen < 8 ? ngen : 8,
                                            &s, out)))
        return fail("the warm-up", rc);
    printf("# %s, prompt %ld%s, %ld new tokens, %ld sequences, temperature %g top_k %ld, %ld "
           "CPU workers, %s, %s products, frozen: %s\n", preset, nprompt,
           ragged ? " down to about half (a prompt each)" : "", ngen, nseq, temperature, top_k,
           cpus, no_cache ? "no cache" : "key/value cache", precision, freeze);
    for (long r = 0; r < rounds; r++) {
        double t0 = now();
        if (ragged)
            rc = nnt_model_generate_batch(model, nseq, prompts, lens, NULL, ngen, &s, out);
        else
            rc = nnt_model_generate_n(model, prompt, nprompt, nseq, ngen, &s, out);
        if (rc)
            return fail(ragged ? "nnt_model_generate_batch" : "nnt_model_generate_n", rc);
        double dt = now() - t0;
        printf("round %ld: %.3f s, %.2f tokens/s; first ids", r + 1, dt,
               (double)(ngen * nseq) / dt);
        for (long i = 0; i < ngen && i < 8; i++)
            printf(" %d", (int)out[i]);
        if (nseq > 1) {   /* the same sequences one after another */
            nnt_sampling one = s;
            double t1 = now();
            for (long q = 0; q < nseq; q++) {
                one.seed = s.seed + (uint64_t)q;
                if ((rc = ragged ? nnt_model_generate(model, prompts[q], lens[q], ngen, &one, out)
                                 : nnt_model_generate(model, prompt, nprompt, ngen, &one, out)))
                    return fail("nnt_model_generate", rc);
            }
            double dt1 = now() - t1;
            printf("; one at a time %.3f s, %.2f tokens/s; side by side / one at a time %.2fx",
                   dt1, (double)(ngen * nseq) / dt1, dt1 / dt);
        }
        printf("\n");
    }
    free(prompt);
    free(out);
    free(all);
    free(prompts);
    free(lens);
    nnt_layer_destroy(model);
    nnt_ctx_destroy(ctx);
    return 0;
}
