/* SPDX-License-Identifier: MIT */
/* nnt-demo: start a context, make a tiled tensor, fill it, check it, report the workers.
 * Usage: nnt-demo [ROWS COLS TILE_ROWS TILE_COLS]   (default 1000 700 256 256) */
#include <nnt.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

static int die(const char *what, int rc)
{
    fprintf(stderr, "nnt-demo: %s: %s: %s\n", what, nnt_strerror(rc), nnt_ctx_last_error(NULL));
    return 1;
}

static int parse_dims(int argc, char **argv, int64_t shape[2], int64_t tile[2])
{
    int64_t v[4] = {1000, 700, 256, 256};
    if (argc != 1 && argc != 5) {
        fprintf(stderr, "usage: nnt-demo [ROWS COLS TILE_ROWS TILE_COLS]\n");
        return -1;
    }
    for (int i = 1; i < argc; i++) {
        char *end;
        v[i - 1] = strtoll(argv[i], &end, 10);
        if (*end || v[i - 1] <= 0) {
            fprintf(stderr, "nnt-demo: '%s' is not a positive integer\n", argv[i]);
            return -1;
        }
    }
    shape[0] = v[0], shape[1] = v[1], tile[0] = v[2], tile[1] = v[3];
    return 0;
}

int main(int argc, char **argv)
{
    int64_t shape[2], tile[2], grid[2];   // shape (rows, cols), tiles (tile_rows, tile_cols)
    if (parse_dims(argc, argv, shape, tile))
        return 2;

    const char *version;
    nnt_version(NULL, &version);
    nnt_ctx *ctx;
    int rc = nnt_ctx_create(NULL, &ctx);
    if (rc)
        return die("cannot start the runtime", rc);
    int ncpus, ncuda;
    const char *sched;
    nnt_ctx_workers(ctx, &ncpus, &ncuda);
    nnt_ctx_sched(ctx, &sched);
    printf("nnt %s: %d CPU workers, %d CUDA workers, scheduler %s\n", version, ncpus, ncuda, sched);

    nnt_tensor *x;
    if ((rc = nnt_tensor_create(ctx, NNT_FP32, 2, shape, tile, &x)))
        return die("nnt_tensor_create", rc);
    nnt_tensor_grid(x, grid);
    printf("tensor %lld x %lld in tiles of %lld x %lld: grid %lld x %lld\n",
           (long long)shape[0], (long long)shape[1], (long long)tile[0], (long long)tile[1],
           (long long)grid[0], (long long)grid[1]);

    size_t n = (size_t)(shape[0] * shape[1]);
    float *host = malloc(n * sizeof *host);                  // (rows, cols)
    if (!host)
        return die("malloc", -2);
    if ((rc = nnt_tensor_fill_normal(x, 42, 0.0, 1.0)) ||
        (rc = nnt_tensor_copy_to_host(x, host, n * sizeof *host)))
        return die("fill and read back", rc);
    double sum = 0, sumsq = 0;
    for (size_t i = 0; i < n; i++)
        sum += host[i], sumsq += (double)host[i] * host[i];
    double mean = sum / n, std = sqrt(sumsq / n - mean * mean);
    printf("normal fill (seed 42): mean %+.4f, std %.4f over %zu values\n", mean, std, n);

    free(host);
    nnt_tensor_destroy(x);
    if ((rc = nnt_ctx_destroy(ctx)))
        return die("nnt_ctx_destroy", rc);
    int ok = fabs(mean) < 0.05 && fabs(std - 1.0) < 0.05;
    printf("%s\n", ok ? "ok" : "unexpected statistics");
    return ok ? 0 : 1;
}
