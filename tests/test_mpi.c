/* SPDX-License-Identifier: MIT */
/* Runs under mpirun (tests/check_mpi.sh) or alone; not a Check suite (Check forks, MPI
 * does not survive a fork). Modes:
 *   test_mpi train OUT MPI DIST BATCH SEQ CHANNELS HIDDEN VOCAB
 *       GPT-2 "tiny" on fixed tokens (B 4, T 32), 10 AdamW steps with gradient clipping,
 *       the given tiling (0: automatic). MPI 0/1, DIST root|sharded|data, or
 *       sharded-release|data-release (nnt_ctx_options.release_weights). Each rank writes
 *       OUT.<rank>: "rank R of N", "yield V" (OMPI_MCA_mpi_yield_when_idle after the
 *       context's creation), "owned BYTES" (nnt_mem_stats.owned_bytes after the first
 *       step: parameters, gradients, moments, activations), "held BYTES" (the RAM node's
 *       used_bytes after the second step's backward, before its update), "loss S %.17g",
 *       "norm S %.17g", "peak BYTES" (the RAM node's peak_bytes over the steps), "params %a"
 *       (sum of every parameter read back on this rank after the steps) and "param_bytes
 *       BYTES" (4 x the model's parameter count); then
 *       nnt_train_state_save to OUT.ckpt.<rank> (only rank 0 writes a file; it is there
 *       on every rank when the call returns).
 *   test_mpi moe OUT MPI DIST DIR
 *       The mixture-of-experts model of the Hugging Face directory DIR (its routing read on
 *       every rank), B 2, T 16 on fixed tokens, tiles of 1 sequence, 8 tokens, 16
 *       channels and 16 hidden units, 6 AdamW steps; each rank writes OUT.<rank>: "rank R of
 *       N", "loss S %.17g" (with the load-balancing loss), "owned BYTES" after the last
 *       step and "params %a" (the sum of every parameter read back on this rank).
 *   test_mpi generate OUT MPI DIST DIR
 *       The model of the Hugging Face directory DIR (tiles of 8 channels, 16 hidden units,
 *       one head), 3 sequences of 40 sampled tokens side by side (nnt_model_generate_n,
 *       seed 5, top_k 0) after a prompt of 5, then 3 prompts of 5, 2 and 4 tokens side by
 *       side (nnt_model_generate_batch, seeds 5, 6, 7); each rank writes OUT.<rank>: "rank R
 *       of N", then "ids R: ..." a sequence of the first, "batch R: ..." of the second.
 *   test_mpi options
 *       Every rank creates an MPI context with options that differ across ranks (rank 1 asks
 *       for another distribution) and expects NNT_E_INVAL with the message; then rank 1
 *       alone gives an invalid distribution: it gets its own message, rank 0 "another rank";
 *       the same for release_weights.
 *       Then a sharded context with a 32 MiB RAM budget: a 48 MiB tensor (24 MiB a rank)
 *       is refused on every rank (NNT_E_NOMEM, every rank's tiles counted), 16 MiB fit.
 *       Then without a budget (unless STARPU_LIMIT_CPU_MEM is set): each rank's default is
 *       its share of 15/16 of the memory available, OMPI_COMM_WORLD_LOCAL_SIZE ranks on this
 *       node sharing it, and a tensor over it is refused naming the share.
 *   test_mpi unsupported
 *       A library built without StarPU-MPI refuses mpi = 1 with NNT_E_UNSUPPORTED.
 *   test_mpi [local]
 *       Without MPI (any build): nnt_ctx_rank gives 0 of 1 and refuses a NULL context; mpi,
 *       distribution and release_weights values out of range are refused.
 * Exit 0 on success, 1 on failure (the reason on stderr). */
#define _POSIX_C_SOURCE 200809L   /* setenv */
#include "nnt.h"
#include "meminfo.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define B 4
#define T 32
#define STEPS 10

static int fail(const char *what, int rc)
{
    fprintf(stderr, "test_mpi: %s: %s (%s)\n", what, nnt_strerror(rc), nnt_ctx_last_error(NULL));
    return 1;
}

#define TRY(call)                        \
    do {                                 \
        int rc_ = (call);                \
        if (rc_)                         \
            return fail(#call, rc_);     \
    } while (0)

/* Sum of every parameter in double, read back on this rank (a collective read). */
static int params_sum(nnt_layer *model, double *sum)
{
    int64_t count = 0;
    TRY(nnt_layer_num_params(model, &count, NULL));
    *sum = 0.0;
    for (int64_t i = 0; i < count; i++) {
        nnt_param_info info = {sizeof info, NULL, NULL, NULL, 0, 0};
        int64_t n = 0;
        TRY(nnt_layer_param(model, i, &info));
        TRY(nnt_tensor_numel(info.value, &n));
        float *v = malloc((size_t)n * sizeof *v);
        if (!v)
            return fail("malloc", NNT_E_NOMEM);
        int rc = nnt_tensor_copy_to_host(info.value, v, (size_t)n * sizeof *v);
        for (int64_t j = 0; rc == 0 && j < n; j++)
            *sum += v[j];
        free(v);
        TRY(rc);
    }
    return 0;
}

/* The memory statistics once every submitted task is done. */
static int mem_stats_now(nnt_ctx *ctx, nnt_mem_stats *ms)
{
    memset(ms, 0, sizeof *ms);
    ms->size = sizeof *ms;
    int rc = nnt_ctx_wait(ctx);
    return rc ? rc : nnt_ctx_mem_stats(ctx, ms, 0);
}

static int train_steps(nnt_ctx *ctx, const nnt_tiling *tiling, FILE *out, const char *ckpt)
{
    nnt_model_config cfg = NNT_MODEL_CONFIG_INIT;
    TRY(nnt_model_preset("tiny", &cfg));
    nnt_layer *model = NULL;
    TRY(nnt_model_create(ctx, &cfg, B, T, tiling, &model));
    TRY(nnt_layer_init(model, 7));
    int32_t ids[B * (T + 1)];
    for (int i = 0; i < B * (T + 1); i++)
        ids[i] = (int32_t)((i * 7 + i / 5 + (i * i) % 11) % cfg.vocab);
    int64_t shape[2] = {B, T}, tile[2] = {tiling->batch ? tiling->batch : B, T};
    nnt_tensor *x = NULL, *y = NULL;
    TRY(nnt_tensor_create(ctx, NNT_INT32, 2, shape, tile, &x));
    TRY(nnt_tensor_create(ctx, NNT_INT32, 2, shape, tile, &y));
    TRY(nnt_tensor_copy_from_host(x, ids, sizeof(int32_t) * B * T));
    TRY(nnt_tensor_copy_from_host(y, ids + B, sizeof(int32_t) * B * T));
    nnt_optim_options oo = NNT_OPTIM_OPTIONS_INIT;
    oo.lr = 1e-2, oo.weight_decay = 0.1, oo.grad_clip = 1.0;
    nnt_optim *opt = NULL;
    TRY(nnt_optim_create(ctx, &oo, &opt));
    TRY(nnt_optim_add_layer(opt, model));
    for (int s = 0; s < STEPS; s++) {
        double loss = 0;
        nnt_optim_stats st = {sizeof st, 0, 0, 0};
        TRY(nnt_layer_zero_grad(model));
        TRY(nnt_layer_set_targets(model, y));
        TRY(nnt_layer_forward(model, x, NULL));
        TRY(nnt_layer_backward(model, NULL, NULL));
        TRY(nnt_layer_loss(model, &loss));
        nnt_mem_stats ms;
        if (s == 1) {   /* what a backward leaves allocated, before the update */
            TRY(mem_stats_now(ctx, &ms));
            fprintf(out, "held %lld\n", (long long)ms.node[0].used_bytes);
        }
        TRY(nnt_optim_step(opt));
        TRY(nnt_optim_stats_get(opt, &st));
        if (s == 0) {
            TRY(mem_stats_now(ctx, &ms));
            fprintf(out, "owned %lld\n", (long long)ms.owned_bytes);
        }
        fprintf(out, "loss %d %.17g\nnorm %d %.17g\n", s + 1, loss, s + 1, st.grad_norm);
    }
    nnt_mem_stats ms;
    TRY(mem_stats_now(ctx, &ms));
    fprintf(out, "peak %lld\n", (long long)ms.node[0].peak_bytes);
    double sum = 0;
    TRY(params_sum(model, &sum));
    fprintf(out, "params %a\n", sum);
    int64_t numel = 0;
    TRY(nnt_layer_num_params(model, NULL, &numel));
    fprintf(out, "param_bytes %lld\n", (long long)numel * 4);
    TRY(nnt_train_state_save(opt, ckpt, NULL));   /* under MPI rank 0 alone writes */
    nnt_optim_destroy(opt);
    nnt_tensor_destroy(x);
    nnt_tensor_destroy(y);
    nnt_layer_destroy(model);
    return 0;
}

/* The context of the modes "OUT MPI DIST ...": one CPU worker, MPI (argv[3]) and the
 * distribution (argv[4]: data, else sharded); its rank and size. */
static int mode_ctx(char **argv, nnt_ctx **ctx, int *rank, int *size)
{
    nnt_ctx_options o = NNT_CTX_OPTIONS_INIT;
    o.ncpus = 1;
    o.mpi = atoi(argv[3]);
    o.distribution = strcmp(argv[4], "data") == 0 ? NNT_DIST_DATA : NNT_DIST_SHARDED;
    int rc = nnt_ctx_create(&o, ctx);
    return rc ? rc : nnt_ctx_rank(*ctx, rank, size);
}

/* OUT.<rank>, opened for writing, its first line "rank R of N"; NULL (reported) on failure */
static FILE *rank_file(const char *out, int rank, int size)
{
    char path[4096];
    snprintf(path, sizeof path, "%s.%d", out, rank);
    FILE *f = fopen(path, "w");
    if (!f)
        perror(path);
    else
        fprintf(f, "rank %d of %d\n", rank, size);
    return f;
}

static int train(int argc, char **argv)
{
    if (argc != 10) {
        fprintf(stderr, "usage: test_mpi train OUT MPI DIST BATCH SEQ CHANNELS HIDDEN VOCAB\n");
        return 2;
    }
    nnt_ctx_options o = NNT_CTX_OPTIONS_INIT;
    o.ncpus = 1;
    o.mpi = atoi(argv[3]);
    o.distribution = strncmp(argv[4], "sharded", 7) == 0 ? NNT_DIST_SHARDED
                     : strncmp(argv[4], "data", 4) == 0  ? NNT_DIST_DATA
                                                         : NNT_DIST_ROOT;
    o.release_weights = strstr(argv[4], "-release") != NULL;
    nnt_tiling tiling = NNT_TILING_INIT;
    tiling.batch = atoll(argv[5]), tiling.seq = atoll(argv[6]);
    tiling.channels = atoll(argv[7]), tiling.hidden = atoll(argv[8]);
    tiling.vocab = atoll(argv[9]);
    nnt_ctx *ctx = NULL;
    TRY(nnt_ctx_create(&o, &ctx));
    int rank = -1, size = -1;
    TRY(nnt_ctx_rank(ctx, &rank, &size));
    if (!o.mpi && (rank != 0 || size != 1)) {
        fprintf(stderr, "test_mpi: nnt_ctx_rank without MPI gave %d of %d\n", rank, size);
        return 1;
    }
    FILE *out = rank_file(argv[2], rank, size);
    if (!out)
        return 1;
    char path[4096];
    /* Open MPI's yield_when_idle as nnt left it for MPI_Init (1 unless the user set it) */
    const char *yield = getenv("OMPI_MCA_mpi_yield_when_idle");
    fprintf(out, "yield %s\n", yield ? yield : "unset");
    snprintf(path, sizeof path, "%s.ckpt.%d", argv[2], rank);
    int rc = train_steps(ctx, &tiling, out, path);
    /* a save returns on every rank once rank 0's file is in place (nnt_mpi_saved): a rank
     * that exited at once with a signal's status would make mpirun end rank 0's write */
    snprintf(path, sizeof path, "%s.ckpt.0", argv[2]);
    if (rc == 0 && access(path, R_OK) != 0) {
        fprintf(stderr, "test_mpi: rank %d: nnt_train_state_save returned before rank 0 "
                "wrote %s\n", rank, path);
        rc = 1;
    }
    if (fclose(out) != 0)
        rc = 1;
    int drc = nnt_ctx_destroy(ctx);
    return rc ? rc : drc ? fail("nnt_ctx_destroy", drc) : 0;
}

/* mode moe: see the header */
static int moe(int argc, char **argv)
{
    enum { MB = 2, MT = 16, MSTEPS = 6 };
    if (argc != 6) {
        fprintf(stderr, "usage: test_mpi moe OUT MPI DIST DIR\n");
        return 2;
    }
    nnt_ctx *ctx = NULL;
    int rank = 0, size = 1;
    TRY(mode_ctx(argv, &ctx, &rank, &size));
    nnt_tiling tiling = NNT_TILING_INIT;
    tiling.batch = 1, tiling.seq = 8, tiling.channels = 16, tiling.hidden = 16;
    nnt_layer *model = NULL;
    TRY(nnt_model_load_hf(ctx, argv[5], MB, MT, &tiling, &model));
    nnt_model_config cfg = NNT_MODEL_CONFIG_INIT;
    TRY(nnt_model_config_of(model, &cfg));
    int32_t ids[MB * MT + MB];
    for (int i = 0; i < MB * MT + MB; i++)
        ids[i] = (int32_t)((i * 7 + i / 5 + (i * i) % 11) % cfg.vocab);
    int64_t shape[2] = {MB, MT}, tile[2] = {1, 8};
    nnt_tensor *x = NULL, *y = NULL;
    TRY(nnt_tensor_create(ctx, NNT_INT32, 2, shape, tile, &x));
    TRY(nnt_tensor_create(ctx, NNT_INT32, 2, shape, tile, &y));
    TRY(nnt_tensor_copy_from_host(x, ids, sizeof(int32_t) * MB * MT));
    TRY(nnt_tensor_copy_from_host(y, ids + MB, sizeof(int32_t) * MB * MT));
    nnt_optim_options oo = NNT_OPTIM_OPTIONS_INIT;
    oo.lr = 1e-2;
    nnt_optim *opt = NULL;
    TRY(nnt_optim_create(ctx, &oo, &opt));
    TRY(nnt_optim_add_layer(opt, model));
    FILE *out = rank_file(argv[2], rank, size);
    if (!out)
        return 1;
    for (int s = 0; s < MSTEPS; s++) {
        double loss = 0;
        TRY(nnt_layer_zero_grad(model));
        TRY(nnt_layer_set_targets(model, y));
        TRY(nnt_layer_forward(model, x, NULL));
        TRY(nnt_layer_backward(model, NULL, NULL));
        TRY(nnt_layer_loss(model, &loss));
        TRY(nnt_optim_step(opt));
        fprintf(out, "loss %d %.17g\n", s + 1, loss);
    }
    nnt_mem_stats ms;
    TRY(mem_stats_now(ctx, &ms));
    fprintf(out, "owned %lld\n", (long long)ms.owned_bytes);
    double sum = 0;
    TRY(params_sum(model, &sum));
    fprintf(out, "params %a\n", sum);
    int rc = fclose(out) != 0;
    nnt_optim_destroy(opt);
    nnt_tensor_destroy(x);
    nnt_tensor_destroy(y);
    nnt_layer_destroy(model);
    int drc = nnt_ctx_destroy(ctx);
    return rc ? 1 : drc ? fail("nnt_ctx_destroy", drc) : 0;
}

static int generate(int argc, char **argv)
{
    enum { NSEQ = 3, NGEN = 40 };
    if (argc != 6) {
        fprintf(stderr, "usage: test_mpi generate OUT MPI DIST DIR\n");
        return 2;
    }
    nnt_ctx *ctx = NULL;
    int rank = 0, size = 1;
    TRY(mode_ctx(argv, &ctx, &rank, &size));
    nnt_tiling tiling = NNT_TILING_INIT;
    tiling.channels = 8, tiling.hidden = 16, tiling.heads = 1;
    nnt_layer *model = NULL;
    TRY(nnt_model_load_hf(ctx, argv[5], 1, 45, &tiling, &model));
    const int32_t prompt[5] = {1, 40, 7, 3, 22};
    int32_t out[NSEQ * NGEN];
    nnt_sampling s = NNT_SAMPLING_INIT;
    s.top_k = 0;
    s.seed = 5;
    TRY(nnt_model_generate_n(model, prompt, 5, NSEQ, NGEN, &s, out));
    const int32_t p2[2] = {9, 4}, p3[4] = {30, 2, 17, 8};
    const int32_t *prompts[NSEQ] = {prompt, p2, p3};
    const int64_t lens[NSEQ] = {5, 2, 4};
    const uint64_t seeds[NSEQ] = {5, 6, 7};
    int32_t batch[NSEQ * NGEN];
    TRY(nnt_model_generate_batch(model, NSEQ, prompts, lens, seeds, NGEN, &s, batch));
    FILE *f = rank_file(argv[2], rank, size);
    if (!f)
        return 1;
    for (int k = 0; k < 2 * NSEQ; k++) {
        const int32_t *row = (k < NSEQ ? out : batch) + (k % NSEQ) * NGEN;
        fprintf(f, "%s %d:", k < NSEQ ? "ids" : "batch", k % NSEQ);
        for (int j = 0; j < NGEN; j++)
            fprintf(f, " %d", (int)row[j]);
        fprintf(f, "\n");
    }
    int rc = fclose(f) != 0;
    nnt_layer_destroy(model);
    int drc = nnt_ctx_destroy(ctx);
    return rc ? 1 : drc ? fail("nnt_ctx_destroy", drc) : 0;
}

/* Without a budget, the ranks on one node share 15/16 of the memory available at start
 * (OMPI_COMM_WORLD_LOCAL_SIZE of them; each took it all before): each rank's default budget
 * is its share (within 1/64 of what was available: other processes take or free memory
 * meanwhile), and a tensor beyond it is refused naming the share. */
static int default_budget_shared(void)
{
    const char *local = getenv("OMPI_COMM_WORLD_LOCAL_SIZE");
    if (getenv("STARPU_LIMIT_CPU_MEM") || !local || atoi(local) < 1)
        return 0;
    int ranks = atoi(local);
    int64_t avail = mem_available();
    nnt_ctx_options o = NNT_CTX_OPTIONS_INIT;
    o.ncpus = 1;
    o.mpi = 1;
    nnt_ctx *ctx = NULL;
    TRY(nnt_ctx_create(&o, &ctx));
    nnt_mem_stats ms;
    int rc = mem_stats_now(ctx, &ms);
    int64_t budget = rc == 0 ? ms.node[0].budget_bytes : 0, want = (avail - avail / 16) / ranks;
    if (rc == 0 && avail > 0 && llabs((long long)(budget - want)) >= avail / 64) {
        fprintf(stderr, "test_mpi: default RAM budget %lld with %d ranks on this node, %lld "
                "available at start: not its share %lld\n", (long long)budget, ranks,
                (long long)avail, (long long)want);
        rc = 1;
    }
    /* a sharded tensor of which each rank holds a bit more than the budget: refused */
    int64_t share = budget / 4 + 1024, shape[1] = {share * 2}, tile[1] = {share};
    nnt_tensor *t = NULL;
    char said[160];
    snprintf(said, sizeof said, "default RAM budget (15/16 of the memory available when the "
             "context started, shared by the %d ranks on this node)", ranks);
    int trc = rc ? 0 : nnt_tensor_create(ctx, NNT_FP32, 1, shape, tile, &t);
    if (!rc && ranks > 1 && (trc != NNT_E_NOMEM || !strstr(nnt_ctx_last_error(ctx), said))) {
        fprintf(stderr, "test_mpi: a tensor over the default budget gave %d (%s)\n", trc,
                nnt_ctx_last_error(ctx));
        rc = 1;
    } else if (!rc) {
        fprintf(stderr, "test_mpi: as expected: default budget %.1f MiB of %.1f MiB available "
                "with %d ranks on this node: %s\n", budget / 1048576.0, avail / 1048576.0,
                ranks, nnt_ctx_last_error(ctx));
    }
    nnt_tensor_destroy(t);
    int drc = nnt_ctx_destroy(ctx);
    return rc ? rc : drc ? fail("nnt_ctx_destroy", drc) : 0;
}

/* create with o, expect want and a message containing needle */
static int expect_create_fails(const nnt_ctx_options *o, int want, const char *needle)
{
    nnt_ctx *ctx = NULL;
    int rc = nnt_ctx_create(o, &ctx);
    const char *msg = nnt_ctx_last_error(NULL);
    if (rc != want || !strstr(msg, needle)) {
        fprintf(stderr, "test_mpi: nnt_ctx_create gave %d (%s), expected %d with '%s'\n", rc,
                msg, want, needle);
        if (rc == 0)
            nnt_ctx_destroy(ctx);
        return 1;
    }
    fprintf(stderr, "test_mpi: as expected: %s\n", msg);
    return 0;
}

static int options(void)
{
    const char *r = getenv("OMPI_COMM_WORLD_RANK");
    if (!r) {
        fprintf(stderr, "test_mpi: options must run under Open MPI's mpirun\n");
        return 1;
    }
    int rank = atoi(r);
    nnt_ctx_options o = NNT_CTX_OPTIONS_INIT;
    o.ncpus = 1;
    o.mpi = 1;
    o.distribution = rank == 1 ? NNT_DIST_SHARDED : NNT_DIST_ROOT;
    if (expect_create_fails(&o, NNT_E_INVAL, "different options"))
        return 1;
    o.distribution = rank == 1 ? 7 : NNT_DIST_ROOT;
    if (expect_create_fails(&o, NNT_E_INVAL, rank == 1 ? "distribution 7" : "another rank"))
        return 1;
    o.distribution = NNT_DIST_SHARDED, o.release_weights = rank == 1;
    if (expect_create_fails(&o, NNT_E_INVAL, "different options (mpi, distribution, "
                                             "release_weights)"))
        return 1;
    o.release_weights = rank == 1 ? -1 : 0;
    if (expect_create_fails(&o, NNT_E_INVAL, rank == 1 ? "release_weights -1" : "another rank"))
        return 1;
    o.release_weights = 0;
    /* the RAM budget counts every rank's tiles on every rank, so all refuse alike: 2 x 24
     * MiB of a sharded tensor (24 MiB a rank) exceed 32 MiB; 2 x 8 MiB fit */
    o.distribution = NNT_DIST_SHARDED, o.mem_cpu_mib = 32;
    nnt_ctx *ctx = NULL;
    TRY(nnt_ctx_create(&o, &ctx));
    int64_t big[1] = {2 * 6 * 1024 * 1024}, half[1] = {6 * 1024 * 1024};
    int64_t small[1] = {2 * 2 * 1024 * 1024}, small_tile[1] = {2 * 1024 * 1024};
    nnt_tensor *t = NULL;
    int rc = nnt_tensor_create(ctx, NNT_FP32, 1, big, half, &t);
    const char *msg = nnt_ctx_last_error(ctx);
    if (rc != NNT_E_NOMEM || t || !strstr(msg, "every rank's tiles counted")) {
        fprintf(stderr, "test_mpi: 48 MiB under a 32 MiB budget gave %d (%s)\n", rc, msg);
        rc = 1;
    } else {
        fprintf(stderr, "test_mpi: as expected: %s\n", msg);
        rc = nnt_tensor_create(ctx, NNT_FP32, 1, small, small_tile, &t);
        if (rc)
            fprintf(stderr, "test_mpi: 16 MiB under a 32 MiB budget gave %d (%s)\n", rc,
                    nnt_ctx_last_error(ctx));
        nnt_tensor_destroy(t);
    }
    int drc = nnt_ctx_destroy(ctx);
    return rc ? 1 : drc ? fail("nnt_ctx_destroy", drc) : default_budget_shared();
}

static int unsupported(void)
{
    nnt_ctx_options o = NNT_CTX_OPTIONS_INIT;
    o.ncpus = 1;
    o.mpi = 1;
    return expect_create_fails(&o, NNT_E_UNSUPPORTED, "without StarPU-MPI");
}

static int local(void)
{
    nnt_ctx_options o = NNT_CTX_OPTIONS_INIT;
    o.ncpus = 1;
    o.distribution = 7;
    if (expect_create_fails(&o, NNT_E_INVAL, "distribution 7 is none of"))
        return 1;
    o.distribution = NNT_DIST_SHARDED, o.mpi = 2;
    if (expect_create_fails(&o, NNT_E_INVAL, "mpi 2 (use 0, 1 or -1)"))
        return 1;
    /* checked with a swap directory too (its checks used to end the validation) */
    const char *tmpdir = getenv("TMPDIR");
    o.swap_dir = tmpdir && *tmpdir ? tmpdir : "/tmp", o.swap_mib = 1024;
    if (expect_create_fails(&o, NNT_E_INVAL, "mpi 2 (use 0, 1 or -1)"))
        return 1;
    o.mpi = 0, o.distribution = 7;
    if (expect_create_fails(&o, NNT_E_INVAL, "distribution 7 is none of"))
        return 1;
    o.distribution = NNT_DIST_SHARDED, o.release_weights = 2;
    if (expect_create_fails(&o, NNT_E_INVAL, "release_weights 2 (use 0 or 1)"))
        return 1;
    o.release_weights = 0;
    o.distribution = NNT_DIST_SHARDED, o.swap_dir = NULL, o.swap_mib = 0;
    o.mpi = -1;   /* as the launcher says: a job of one rank is one process */
    setenv("PMI_RANK", "0", 1), setenv("PMI_SIZE", "1", 1);
    nnt_ctx *ctx = NULL;
    int rank = -1, size = -1;
    TRY(nnt_ctx_create(&o, &ctx));
    int rc = nnt_ctx_rank(ctx, &rank, &size);
    int rc_null = nnt_ctx_rank(NULL, &rank, NULL);
    int rc_nulls = nnt_ctx_rank(ctx, NULL, NULL);
    TRY(nnt_ctx_destroy(ctx));
    if (rc || rank != 0 || size != 1 || rc_null != NNT_E_INVAL || rc_nulls) {
        fprintf(stderr, "test_mpi: nnt_ctx_rank without MPI: %d, %d of %d; NULL context %d; "
                "NULL outputs %d\n", rc, rank, size, rc_null, rc_nulls);
        return 1;
    }
    return 0;
}

int main(int argc, char **argv)
{
    if (argc >= 2 && strcmp(argv[1], "train") == 0)
        return train(argc, argv);
    if (argc >= 2 && strcmp(argv[1], "moe") == 0)
        return moe(argc, argv);
    if (argc >= 2 && strcmp(argv[1], "generate") == 0)
        return generate(argc, argv);
    if (argc == 2 && strcmp(argv[1], "options") == 0)
        return options();
    if (argc == 2 && strcmp(argv[1], "unsupported") == 0)
        return unsupported();
    if (argc == 1 || (argc == 2 && strcmp(argv[1], "local") == 0))
        return local();   /* also what make check runs (test_mpi is a check program) */
    fprintf(stderr, "usage: test_mpi train ... | moe ... | generate ... | options | "
            "unsupported | local\n");
    return 2;
}
