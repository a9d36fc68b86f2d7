/* SPDX-License-Identifier: MIT */
/* bench_hf_shards: the host memory of loading and saving a Hugging Face checkpoint (sharded
 * or not) through the public API, to be run under /usr/bin/time -f %M (peak RSS). Not a
 * test: run by hand, results in bench/RESULTS-shards.md.
 *
 * Usage: bench_hf_shards create PRESET
 *        bench_hf_shards save PRESET DIR SHARD_BYTES   (0: one model.safetensors)
 *        bench_hf_shards load DIR
 * create: nnt_model_create(PRESET) for B 1, T 16 (initialised), then exit: the model's own
 *         footprint, the baseline of the two others;
 * save:   the same, then nnt_model_save_hf_ex(DIR, max_shard_bytes SHARD_BYTES);
 * load:   nnt_model_load_hf(DIR) for B 1, T 16.
 * Prints the parameters, their fp32 bytes and the seconds of the step on stdout. */
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

static int fail(nnt_ctx *ctx, const char *what, int rc)
{
    fprintf(stderr, "bench_hf_shards: %s: %s\n", what, nnt_ctx_last_error(ctx));
    return rc ? 1 : 0;
}

static void report(nnt_layer *model, const char *what, double seconds)
{
    int64_t n = 0;
    nnt_layer_num_params(model, NULL, &n);
    printf("%s: %lld parameters, %.3f GB fp32, %.1f s\n", what, (long long)n,
           (double)n * 4 / 1e9, seconds);
}

int main(int argc, char **argv)
{
    if (argc < 3 || (!strcmp(argv[1], "save") && argc != 5)) {
        fprintf(stderr, "usage: bench_hf_shards create PRESET | save PRESET DIR SHARD_BYTES | "
                        "load DIR\n");
        return 2;
    }
    nnt_ctx *ctx = NULL;
    nnt_layer *model = NULL;
    int rc = nnt_ctx_create(NULL, &ctx);
    if (rc)
        return fail(NULL, "nnt_ctx_create", rc);
    double t0 = now();
    if (!strcmp(argv[1], "load")) {
        if ((rc = nnt_model_load_hf(ctx, argv[2], 1, 16, NULL, &model)))
            return fail(ctx, "nnt_model_load_hf", rc);
        report(model, "load", now() - t0);
    } else {
        nnt_model_config cfg;
        if ((rc = nnt_model_preset(argv[2], &cfg)))
            return fail(NULL, "nnt_model_preset", rc);
        if ((rc = nnt_model_create(ctx, &cfg, 1, 16, NULL, &model)))
            return fail(ctx, "nnt_model_create", rc);
        nnt_ctx_wait(ctx);
        report(model, "create", now() - t0);
        if (!strcmp(argv[1], "save")) {
            nnt_hf_save_options o = NNT_HF_SAVE_OPTIONS_INIT;
            o.max_shard_bytes = strtoull(argv[4], NULL, 10);
            t0 = now();
            if ((rc = nnt_model_save_hf_ex(model, argv[3], &o)))
                return fail(ctx, "nnt_model_save_hf_ex", rc);
            report(model, "save", now() - t0);
        }
    }
    nnt_layer_destroy(model);
    nnt_ctx_destroy(ctx);
    return 0;
}
