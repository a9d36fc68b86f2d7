/* SPDX-License-Identifier: MIT */
/* Out-of-core training: a small GPT-2 (nnt_gpt_create, trained with an nnt_optim AdamW)
 * with a RAM budget far below its state (parameters + gradients + two AdamW moments) and a
 * disk swap directory (nnt_ctx_options) must give losses and final parameters bit-identical
 * to the same model, same tiling, trained without limits. Public API only, but for
 * test_default_gpu_budget and test_optim_on_cpu_marks (internal functions and structures: the
 * library's objects are linked).
 *
 * The model (L=4, C=128, NH=4, V=1024, T=32) has 0.93M parameters: 14 MiB of training
 * state, plus activations. The budget is 1 MiB, StarPU's smallest (STARPU_LIMIT_CPU_MEM is
 * in MiB): 14 times below the state. The tiles are small enough (at most 64 KiB: logits and
 * wte) that every task's buffers fit in it; a task whose buffers do not fit, or a swap too
 * small for what does not fit in RAM, makes StarPU spin forever (see bench/RESULTS-ooc.md),
 * which here would end in Check's timeout.
 * The run with the budget must really have put data on the disk: the swap directory must
 * hold at least half of the state when training ends.
 * Both runs are done with the schedulers lws and dmda.
 * (nnt's swap uses StarPU's stdio backend by default, NNT_SWAP_BACKEND=unistd the plain
 * one: the O_DIRECT one aborts the process on the first tile whose size is not a multiple of
 * the page size.)
 * Each test also checks that the budget of the limited run does not outlive its context. */
#include "testutil.h"
#include "internal.h"
#include "optim/optim.h"

#include <dirent.h>
#include <stdint.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

enum { V = 1024, MAXT = 32, L = 4, NH = 4, C = 128, B = 2, T = 32, NSTEPS = 4 };
enum { BUDGET_MIB = 1, SWAP_MIB = 256 };

/* batch, seq whole (-1); channels 64, hidden 128, vocab 256; heads, head_dim whole */
static const nnt_tiling TILING = {sizeof(nnt_tiling), -1, -1, 64, 128, 256, -1, -1};

enum { MAXP = 128 };   /* at most this many parameter tensors (the model has 4 + 16 L) */

/* What one training run produced. */
typedef struct run_result {
    double loss[NSTEPS];
    int nparams;
    char *names[MAXP];     /* parameter names, nnt_layer_param's order */
    float *params[MAXP];   /* final parameters */
    int64_t numel[MAXP];
    int64_t state_bytes;   /* 16 bytes per parameter */
    int64_t swap_bytes;    /* bytes in the swap directory at the end (0 without swap) */
    int64_t written;       /* bytes the process wrote to storage (/proc/self/io; -1: none) */
    nnt_mem_stats mem;     /* the context's, at the end */
    double seconds;        /* wall time of the whole run, context start to shutdown */
} run_result;

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void free_result(run_result *r)
{
    for (int i = 0; i < r->nparams; i++) {
        free(r->names[i]);
        free(r->params[i]);
    }
}

static int ends_with(const char *s, const char *tail)
{
    size_t n = strlen(s), k = strlen(tail);
    return n >= k && !strcmp(s + n - k, tail);
}

/* Small random weights (biases included), LayerNorm gains 1, from a fixed seed. */
static void init_weights(nnt_layer *m)
{
    unsigned long long seed = 0x9e3779b97f4a7c15ULL;
    int64_t count = 0;
    EXPECT_OK(nnt_layer_num_params(m, &count, NULL));
    for (int64_t i = 0; i < count; i++) {
        nnt_param_info p = test_param_at(m, i);
        int64_t n = 0;
        EXPECT_OK(nnt_tensor_numel(p.value, &n));
        float *w = malloc((size_t)n * sizeof *w);
        ck_assert_ptr_nonnull(w);
        int gain = ends_with(p.name, "ln_1.weight") || ends_with(p.name, "ln_2.weight") ||
                   ends_with(p.name, "ln_f.weight");
        for (int64_t j = 0; j < n; j++)
            w[j] = gain ? 1.0f : (float)(0.08 * (test_rand(&seed) - 0.5));
        EXPECT_OK(nnt_tensor_copy_from_host(p.value, w, (size_t)n * sizeof *w));
        free(w);
    }
}

/* Random tokens (B, T) and their targets (the next token; the last ignored). Every step
 * trains on this one batch, so the loss must fall. */
static void batch(int32_t *tok, int32_t *tgt)
{
    unsigned long long seed = 1000;
    for (int i = 0; i < B * T; i++)
        tok[i] = (int32_t)(test_rand(&seed) * V);
    for (int i = 0; i < B * T; i++)
        tgt[i] = i % T == T - 1 ? -1 : tok[i + 1];   /* -1: ignored by the GPT layer */
}

/* Bytes of the regular files under dir (StarPU's unistd backend keeps one file per tile
 * in numbered subdirectories); with unlink_all, remove them and the directories too. */
static int64_t walk_dir(const char *dir, int unlink_all, int depth)
{
    int64_t total = 0;
    DIR *d = opendir(dir);
    if (!d)
        return 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        char path[4096];
        struct stat st;
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
            continue;
        if ((size_t)snprintf(path, sizeof path, "%s/%s", dir, e->d_name) >= sizeof path ||
            lstat(path, &st) != 0)
            continue;
        if (S_ISDIR(st.st_mode) && depth < 4)
            total += walk_dir(path, unlink_all, depth + 1);
        else if (S_ISREG(st.st_mode)) {
            total += (int64_t)st.st_size;
            if (unlink_all)
                unlink(path);
        }
    }
    closedir(d);
    if (unlink_all)
        rmdir(dir);
    return total;
}

/* write_bytes of /proc/self/io: what this process made the kernel write to storage
 * (-1 where the file is missing). */
static int64_t bytes_written(void)
{
    FILE *f = fopen("/proc/self/io", "r");
    char line[128];
    long long v = -1;
    while (f && fgets(line, sizeof line, f))
        if (sscanf(line, "write_bytes: %lld", &v) == 1)
            break;
    if (f)
        fclose(f);
    return v;
}

/* Create a context with opts, train NSTEPS AdamW steps (inbwd: each updating the
 * parameters during the backward, nnt_optim_update_in_backward), copy the parameters out. */
static void train(const nnt_ctx_options *opts, int inbwd, run_result *r)
{
    nnt_ctx *ctx = NULL;
    nnt_layer *m = NULL;
    nnt_optim *opt = NULL;
    nnt_tensor *tok = NULL, *tgt = NULL;
    const nnt_gpt_config cfg = {sizeof(nnt_gpt_config), V, MAXT, L, NH, C};
    int64_t bt[2] = {B, T}, count = 0, numel = 0;
    int32_t tok_host[B * T], tgt_host[B * T];
    memset(r, 0, sizeof *r);
    double t0 = now();
    int64_t written0 = bytes_written();
    EXPECT_OK(nnt_ctx_create(opts, &ctx));
    EXPECT_OK(nnt_gpt_create(ctx, &cfg, B, T, &TILING, &m));
    init_weights(m);
    EXPECT_OK(nnt_tensor_create(ctx, NNT_INT32, 2, bt, NULL, &tok));
    EXPECT_OK(nnt_tensor_create(ctx, NNT_INT32, 2, bt, NULL, &tgt));
    nnt_optim_options adam = NNT_OPTIM_OPTIONS_INIT;
    adam.kind = NNT_OPTIM_ADAMW;
    adam.lr = 1e-3;
    adam.weight_decay = 0.1;
    EXPECT_OK(nnt_optim_create(ctx, &adam, &opt));
    EXPECT_OK(nnt_optim_add_layer(opt, m));
    batch(tok_host, tgt_host);
    EXPECT_OK(nnt_tensor_copy_from_host(tok, tok_host, sizeof tok_host));
    EXPECT_OK(nnt_tensor_copy_from_host(tgt, tgt_host, sizeof tgt_host));
    EXPECT_OK(nnt_layer_set_targets(m, tgt));
    for (int s = 0; s < NSTEPS; s++) {
        EXPECT_OK(nnt_layer_zero_grad(m));
        EXPECT_OK(nnt_layer_forward(m, tok, NULL));
        EXPECT_OK(nnt_layer_loss(m, &r->loss[s]));
        if (inbwd)
            EXPECT_OK(nnt_optim_update_in_backward(opt));
        EXPECT_OK(nnt_layer_backward(m, NULL, NULL));
        EXPECT_OK(nnt_optim_step(opt));
        EXPECT_OK(nnt_ctx_wait(ctx));
    }
    EXPECT_OK(nnt_layer_num_params(m, &count, &numel));
    ck_assert_int_le(count, MAXP);
    r->nparams = (int)count;
    for (int i = 0; i < r->nparams; i++) {
        nnt_param_info p = test_param_at(m, i);
        r->names[i] = strdup(p.name);
        r->params[i] = test_to_host(p.value, &r->numel[i]);
    }
    r->state_bytes = 16 * numel;
    if (opts->swap_dir)
        r->swap_bytes = walk_dir(opts->swap_dir, 0, 0);
    r->written = written0 < 0 ? -1 : bytes_written() - written0;
    r->mem.size = sizeof r->mem;
    EXPECT_OK(nnt_ctx_mem_stats(ctx, &r->mem, 0));
    nnt_tensor_destroy(tok);
    nnt_tensor_destroy(tgt);
    nnt_optim_destroy(opt);
    nnt_layer_destroy(m);
    EXPECT_OK(nnt_ctx_destroy(ctx));
    r->seconds = now() - t0;
}

static const char *const SCHEDULERS[] = {"lws", "dmda"};

/* Which tensors moved (nnt_mem_stats's *_by arrays). Under the budget the weights and Adam's
 * moments (each 3.5x the budget) went to the disk and came back; the separate update keeps
 * every gradient until the step, so they went too; the tensors' kinds account for the bytes
 * moved, the library's own tiles (partial sums; packed tiles are off under a swap) for at
 * most 1 %. In RAM nothing moved. */
static void check_kinds(const nnt_mem_stats *ooc, const nnt_mem_stats *ram, int inbwd)
{
    const int named[] = {NNT_MEM_WEIGHTS, NNT_MEM_GRADIENTS, NNT_MEM_OPTIM_STATE,
                         NNT_MEM_TENSORS};
    int64_t to = 0, from = 0;
    for (int i = 0; i < 4; i++) {
        to += ooc->to_disk_by[named[i]];
        from += ooc->from_disk_by[named[i]];
    }
    fprintf(stderr, "  to / from the disk, MiB: weights %.2f / %.2f, gradients %.2f / %.2f, "
            "moments %.2f / %.2f, other tensors %.2f / %.2f, the library's %.2f / %.2f\n",
            ooc->to_disk_by[0] / 1048576.0, ooc->from_disk_by[0] / 1048576.0,
            ooc->to_disk_by[1] / 1048576.0, ooc->from_disk_by[1] / 1048576.0,
            ooc->to_disk_by[2] / 1048576.0, ooc->from_disk_by[2] / 1048576.0,
            ooc->to_disk_by[3] / 1048576.0, ooc->from_disk_by[3] / 1048576.0,
            ooc->to_disk_by[4] / 1048576.0, ooc->from_disk_by[4] / 1048576.0);
    ck_assert(ooc->to_disk_by[NNT_MEM_WEIGHTS] > 0 && ooc->from_disk_by[NNT_MEM_WEIGHTS] > 0);
    ck_assert(ooc->to_disk_by[NNT_MEM_OPTIM_STATE] > 0 &&
              ooc->from_disk_by[NNT_MEM_OPTIM_STATE] > 0);
    if (!inbwd)
        ck_assert(ooc->to_disk_by[NNT_MEM_GRADIENTS] > 0);
    /* StarPU's bus counters (the totals) add without a lock and miss a transfer now and
     * then (31 KiB of 102 MiB seen); the kinds are counted under one: equal within 1 % */
    ck_assert_int_le(100 * llabs(to - ooc->bytes_to_disk), ooc->bytes_to_disk);
    ck_assert_int_le(100 * llabs(from - ooc->bytes_from_disk), ooc->bytes_from_disk);
    ck_assert_int_le(100 * ooc->to_disk_by[NNT_MEM_INTERNAL], ooc->bytes_to_disk);
    ck_assert_int_le(100 * ooc->from_disk_by[NNT_MEM_INTERNAL], ooc->bytes_from_disk);
    for (int k = 0; k < NNT_MEM_KINDS; k++) {
        ck_assert(ram->to_disk_by[k] == 0 && ram->from_disk_by[k] == 0);
        ck_assert(ooc->to_gpu_by[k] == 0 && ooc->from_gpu_by[k] == 0);   /* no GPU here */
    }
}

/* _i: the scheduler (bit 0); bit 1: the limited run updates the parameters during the
 * backward (the reference does not: the same losses and parameters either way). */
START_TEST(test_budget_matches_ram)
{
    int sched = _i & 1, inbwd = _i >> 1;
    /* the reference: no budget, no swap (also none inherited from the environment) */
    unsetenv("STARPU_LIMIT_CPU_MEM");
    nnt_ctx_options opts = NNT_CTX_OPTIONS_INIT;
    opts.ncuda = 0;
    opts.sched = SCHEDULERS[sched];
    run_result ram, ooc;
    train(&opts, 0, &ram);
    ck_assert_int_gt(ram.state_bytes, 12 * BUDGET_MIB * 1048576LL);

    const char *tmp = getenv("TMPDIR");
    char dir[4096];
    snprintf(dir, sizeof dir, "%s/nnt-test-ooc-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    ck_assert_ptr_nonnull(mkdtemp(dir));
    opts.mem_cpu_mib = BUDGET_MIB;
    opts.swap_dir = dir;
    opts.swap_mib = SWAP_MIB;
    train(&opts, inbwd, &ooc);
    walk_dir(dir, 1, 0);
    ck_assert_msg(getenv("STARPU_LIMIT_CPU_MEM") == NULL, "the budget outlived its context");

    for (int s = 0; s < NSTEPS; s++)
        ck_assert_msg(ram.loss[s] == ooc.loss[s], "%s: step %d: loss %.17g in RAM, %.17g with "
                      "a %d MiB budget", SCHEDULERS[sched], s, ram.loss[s], ooc.loss[s],
                      BUDGET_MIB);
    ck_assert_int_eq(ram.nparams, ooc.nparams);
    for (int i = 0; i < ram.nparams; i++) {
        ck_assert_str_eq(ram.names[i], ooc.names[i]);
        ck_assert_int_eq(ram.numel[i], ooc.numel[i]);
        ck_assert_msg(!memcmp(ram.params[i], ooc.params[i], (size_t)ram.numel[i] * sizeof(float)),
                      "%s: parameter %s differs after %d steps", SCHEDULERS[sched], ram.names[i],
                      NSTEPS);
    }
    fprintf(stderr, "%s%s: state %.1f MiB, RAM budget %d MiB, %.1f MiB in the swap directory "
            "at the end, %.1f MiB written; losses %.6f -> %.6f, bit-identical; %.1f s in RAM, "
            "%.1f s with the budget\n", SCHEDULERS[sched], inbwd ? ", updates in the backward"
            : "", (double)ooc.state_bytes / 1048576.0, BUDGET_MIB,
            (double)ooc.swap_bytes / 1048576.0, (double)ooc.written / 1048576.0,
            ooc.loss[0], ooc.loss[NSTEPS - 1], ram.seconds, ooc.seconds);
    /* the disk's share of the traffic: both directions used, within the total; nothing
     * without a swap */
    ck_assert(ooc.mem.bytes_to_disk > 0 && ooc.mem.bytes_from_disk > 0);
    ck_assert(ooc.mem.bytes_to_disk + ooc.mem.bytes_from_disk <= ooc.mem.bytes_moved);
    ck_assert(ram.mem.bytes_to_disk == 0 && ram.mem.bytes_from_disk == 0);
    fprintf(stderr, "  moved %.1f MiB: %.1f MiB to the disk, %.1f MiB from it\n",
            (double)ooc.mem.bytes_moved / 1048576.0, (double)ooc.mem.bytes_to_disk / 1048576.0,
            (double)ooc.mem.bytes_from_disk / 1048576.0);
    check_kinds(&ooc.mem, &ram.mem, inbwd);
    /* the budget run must really have used the disk */
    ck_assert_msg(2 * ooc.swap_bytes >= ooc.state_bytes, "%s: only %lld bytes in the swap "
                  "directory for %lld bytes of state", SCHEDULERS[sched],
                  (long long)ooc.swap_bytes, (long long)ooc.state_bytes);
    /* and training must have trained */
    ck_assert(ram.loss[NSTEPS - 1] < ram.loss[0]);
    free_result(&ram);
    free_result(&ooc);
}
END_TEST

/* A tensor of n tiles of tile floats filled with v (its RAM allocated and written); waited. */
static nnt_tensor *ram_filled(nnt_ctx *ctx, int n, int64_t tile, double v)
{
    nnt_tensor *t = NULL;
    EXPECT_OK(nnt_tensor_create(ctx, NNT_FP32, 1, (int64_t[]){n * tile}, (int64_t[]){tile}, &t));
    EXPECT_OK(nnt_tensor_fill(t, v));
    EXPECT_OK(nnt_ctx_wait(ctx));
    return t;
}

/* Every element of t is v. */
static void ram_check(nnt_tensor *t, double v)
{
    int64_t n = 0;
    EXPECT_OK(nnt_tensor_numel(t, &n));
    float *host = malloc((size_t)n * sizeof *host);
    ck_assert_ptr_nonnull(host);
    EXPECT_OK(nnt_tensor_copy_to_host(t, host, (size_t)n * sizeof *host));
    for (int64_t k = 0; k < n; k++)
        if (host[k] != (float)v)
            ck_abort_msg("element %lld: %g, not %g", (long long)k, host[k], v);
    free(host);
}

/* Under a swap the RAM of tiles of 1 MiB and more comes from nnt's hooks (lib/ctx_ram.c),
 * which keep a freed tile's block for the next tile of its size. 12 tensors of 16 tiles of
 * 2 MiB (384 MiB) under a 128 MiB budget (of which 4 MiB for the blocks kept): each filled
 * with its own value, then all read back in turn, twice, through tiles evicted and fetched
 * again. Every value must be right (a block handed out twice, or too short, shows here),
 * blocks must have been reused, and the kept ones stay within their 4 MiB; a task needing
 * the budget but the kept room is refused. Then in RAM (lib/ctx_ram.c's peak rule). */
START_TEST(test_ram_hooks)
{
    enum { NT = 12, TILES = 16, TILE = 512 * 1024 };   /* floats: tiles of 2 MiB */
    const char *tmp = getenv("TMPDIR");
    char dir[4096];
    snprintf(dir, sizeof dir, "%s/nnt-test-ram-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    ck_assert_ptr_nonnull(mkdtemp(dir));
    unsetenv("STARPU_LIMIT_CPU_MEM");
    nnt_ctx_options opts = NNT_CTX_OPTIONS_INIT;
    opts.ncuda = 0;
    opts.mem_cpu_mib = 128;
    opts.swap_dir = dir;
    opts.swap_mib = 1024;
    nnt_ctx *ctx = NULL;
    EXPECT_OK(nnt_ctx_create(&opts, &ctx));
    nnt_tensor *t[NT];
    int64_t shape[1] = {(int64_t)TILES * TILE}, tile[1] = {TILE};
    for (int i = 0; i < NT; i++) {
        EXPECT_OK(nnt_tensor_create(ctx, NNT_FP32, 1, shape, tile, &t[i]));
        EXPECT_OK(nnt_tensor_fill(t[i], i + 0.5));
    }
    float *host = malloc((size_t)shape[0] * sizeof *host);
    ck_assert_ptr_nonnull(host);
    for (int pass = 0; pass < 2; pass++)
        for (int i = 0; i < NT; i++) {
            EXPECT_OK(nnt_tensor_copy_to_host(t[i], host, (size_t)shape[0] * sizeof *host));
            for (int64_t k = 0; k < shape[0]; k++)
                if (host[k] != (float)(i + 0.5))
                    ck_abort_msg("pass %d, tensor %d, element %lld: %g, not %g", pass, i,
                                 (long long)k, host[k], i + 0.5);
        }
    free(host);
    nnt_ram_stats rs;
    nnt_ram_stats_get(&rs);
    fprintf(stderr, "RAM hooks: %lld blocks handed out, %lld mapped, %lld reused, %lld bytes "
            "kept\n", (long long)rs.blocks, (long long)rs.mapped, (long long)rs.reused,
            (long long)rs.kept_bytes);
    ck_assert_int_ge(rs.blocks, 128 / 2);   /* (StarPU reuses some chunks itself) */
    ck_assert_int_eq(rs.blocks, rs.mapped + rs.reused);
    ck_assert_int_gt(rs.reused, 0);
    ck_assert_int_le(rs.kept_bytes, 4 << 20);
    nnt_mem_stats ms = {.size = sizeof ms};
    EXPECT_OK(nnt_ctx_mem_stats(ctx, &ms, 0));
    ck_assert_int_le(ms.node[0].peak_bytes, 128LL << 20);   /* the kept room included */
    ck_assert(ms.bytes_to_disk > 0 && ms.to_disk_by[NNT_MEM_TENSORS] > 0);
    for (int i = 0; i < NT; i++)
        nnt_tensor_destroy(t[i]);
    /* the room kept is not the tasks': a tile of 126 MiB fits the budget, not what is left of
     * it (StarPU would wait for memory forever), and is refused; one of 120 MiB is not */
    nnt_tensor *one = NULL;
    EXPECT_OK(nnt_tensor_create(ctx, NNT_FP32, 1, (int64_t[]){126 << 18}, NULL, &one));
    EXPECT_FAIL_MSG(nnt_tensor_fill(one, 1.0), NNT_E_NOMEM, "kept for reusing freed tiles");
    nnt_tensor_destroy(one);
    EXPECT_OK(nnt_tensor_create(ctx, NNT_FP32, 1, (int64_t[]){120 << 18}, NULL, &one));
    EXPECT_OK(nnt_tensor_fill(one, 1.0));
    EXPECT_OK(nnt_ctx_wait(ctx));
    nnt_tensor_destroy(one);
    EXPECT_OK(nnt_ctx_destroy(ctx));
    walk_dir(dir, 1, 0);

    /* in RAM (no swap, no budget: StarPU frees a tile's RAM when it goes): the hooks too,
     * freed blocks kept while they and the blocks in use stay under 9/8 of the peak in use */
    opts.swap_dir = NULL;
    opts.swap_mib = 0;
    opts.mem_cpu_mib = 0;
    EXPECT_OK(nnt_ctx_create(&opts, &ctx));
    const int64_t two = 2 << 20, three = 3 << 20;
    nnt_tensor *a = ram_filled(ctx, 16, two / 4, 1.5);            /* 32 MiB in use */
    /* each at its own cache-line offset in its first page (no two tiles 4 KiB apart) */
    uintptr_t offsets[16];
    for (int i = 0; i < 16; i++) {
        offsets[i] = (uintptr_t)starpu_data_get_local_ptr(a->tiles[i].handle) % 4096;
        ck_assert_msg(offsets[i] % 64 == 0, "tile %d at offset %lu", i, (unsigned long)offsets[i]);
        for (int j = 0; j < i; j++)
            ck_assert_msg(offsets[i] != offsets[j], "tiles %d and %d both at offset %lu", j, i,
                          (unsigned long)offsets[i]);
    }
    nnt_tensor_destroy(a);
    nnt_ram_stats_get(&rs);
    ck_assert_int_eq(rs.mapped, 16);
    ck_assert_int_eq(rs.kept_bytes, 16 * two);                    /* all 16 kept */
    ck_assert_int_eq(rs.live_bytes, 0);
    ck_assert_int_eq(rs.peak_bytes, 16 * two);
    nnt_tensor *b = ram_filled(ctx, 16, two / 4, 2.5);            /* their blocks again */
    nnt_ram_stats_get(&rs);
    ck_assert_int_eq(rs.mapped, 16);
    ck_assert_int_eq(rs.reused, 16);
    ck_assert_int_eq(rs.kept_bytes, 0);
    nnt_tensor *c = ram_filled(ctx, 8, three / 4, 3.5);           /* 24 MiB more: peak 56 */
    nnt_tensor_destroy(b);
    nnt_ram_stats_get(&rs);
    ck_assert_int_eq(rs.peak_bytes, 16 * two + 8 * three);
    ck_assert_int_eq(rs.kept_bytes, 16 * two);
    /* 16 new blocks of 3 MiB: each takes the room of the oldest kept ones beyond 9/8 of the
     * peak, and at the new peak (72 MiB in use) 3 of them are left (6 MiB, of 9) */
    nnt_tensor *d = ram_filled(ctx, 16, three / 4, 4.5);
    nnt_ram_stats_get(&rs);
    ck_assert_int_eq(rs.mapped, 16 + 8 + 16);
    ck_assert_int_eq(rs.live_bytes, 24 * three);
    ck_assert_int_eq(rs.peak_bytes, 24 * three);
    ck_assert_int_eq(rs.kept_bytes, 3 * two);
    ram_check(c, 3.5);
    ram_check(d, 4.5);
    nnt_tensor_destroy(c);
    nnt_tensor_destroy(d);
    nnt_ram_stats_get(&rs);
    ck_assert_int_eq(rs.kept_bytes, 3 * two + 24 * three);
    EXPECT_OK(nnt_ctx_destroy(ctx));
    nnt_ram_stats_get(&rs);
    ck_assert_int_eq(rs.kept_bytes, 0);                           /* unmapped at the end */
}
END_TEST

/* In RAM the blocks kept for reuse never take the tiles past the budget (lib/ctx_ram.c),
 * even where 9/8 of the peak would allow it: with NNT_HOST_RAM_MIB=96 the default budget
 * is 90 MiB (15/16), of which a quarter (22.5 MiB) may be kept. 84 MiB of tiles of 3 MiB
 * (the peak), 24 MiB of them freed (7 kept: 21 MiB, the quarter), then 10 MiB of tiles of
 * 2 MiB: 70 MiB in use and 21 kept would make 91, over the budget (under the 94.5 of 9/8 of
 * the peak), so one kept block goes: 18 MiB kept. */
START_TEST(test_ram_kept_within_budget)
{
    setenv("NNT_HOST_RAM_MIB", "96", 1);
    nnt_ctx_options opts = NNT_CTX_OPTIONS_INIT;
    opts.ncuda = 0;
    nnt_ctx *ctx = NULL;
    EXPECT_OK(nnt_ctx_create(&opts, &ctx));
    unsetenv("NNT_HOST_RAM_MIB");
    nnt_mem_stats ms;
    memset(&ms, 0, sizeof ms);
    ms.size = sizeof ms;
    EXPECT_OK(nnt_ctx_mem_stats(ctx, &ms, 0));
    ck_assert_int_eq(ms.node[0].budget_bytes, (int64_t)90 << 20);
    const int64_t two = 2 << 20, three = 3 << 20;
    nnt_ram_stats rs;
    nnt_tensor *a = ram_filled(ctx, 20, three / 4, 1.0), *b = ram_filled(ctx, 8, three / 4, 2.0);
    nnt_tensor_destroy(b);
    nnt_ram_stats_get(&rs);
    ck_assert_int_eq(rs.peak_bytes, 28 * three);
    ck_assert_int_eq(rs.kept_bytes, 7 * three);
    nnt_tensor *c = ram_filled(ctx, 5, two / 4, 3.0);
    nnt_ram_stats_get(&rs);
    ck_assert_int_eq(rs.live_bytes, 20 * three + 5 * two);
    ck_assert_int_eq(rs.kept_bytes, 6 * three);
    ram_check(a, 1.0);
    ram_check(c, 3.0);
    nnt_tensor_destroy(a);
    nnt_tensor_destroy(c);
    EXPECT_OK(nnt_ctx_destroy(ctx));
}
END_TEST

/* In RAM, a base frozen in bf16 and initialised writes each matrix in fp32 and converts it
 * (lib/layers/layer.c init_listed): those fp32 tiles' blocks will not come again, and the
 * initialisation's end (nnt_ram_settle) takes the peak back to the blocks in use, so the
 * blocks kept are at most an eighth of them, not the fp32 copies of the last matrices (with
 * an 8B base: 5.6 GiB kept through the whole run, 2026-12-01). The steps that follow keep
 * what they free again under 9/8 of their own peak. */
START_TEST(test_ram_settles_after_init)
{
    nnt_ctx_options opts = NNT_CTX_OPTIONS_INIT;
    opts.ncuda = 0;
    nnt_ctx *ctx = NULL;
    EXPECT_OK(nnt_ctx_create(&opts, &ctx));
    nnt_model_config c;
    EXPECT_OK(nnt_model_preset("llama-tiny", &c));
    /* 2 blocks of C 256, hidden 1024: matrices of 0.25 to 1 MiB in fp32, one tile each */
    c.vocab = 512, c.max_seq = 16, c.channels = 256, c.heads = 4, c.kv_heads = 4;
    c.hidden = 1024, c.layers = 2;
    EXPECT_OK(nnt_ctx_set_precision(ctx, NNT_PRECISION_BF16));
    nnt_layer *m = NULL;
    nnt_tiling whole = NNT_TILING_INIT;
    whole.seq = 16, whole.channels = 256, whole.hidden = 1024, whole.vocab = 512;
    EXPECT_OK(nnt_model_create_empty(ctx, &c, 1, 16, &whole, &m));
    nnt_lora_options lo = NNT_LORA_OPTIONS_INIT;
    lo.rank = 4;
    EXPECT_OK(nnt_model_lora_add(m, &lo));
    nnt_ram_stats before, rs;
    nnt_ram_stats_get(&before);
    EXPECT_OK(nnt_layer_init(m, 7));
    EXPECT_OK(nnt_ctx_wait(ctx));
    nnt_ram_stats_get(&rs);
    printf("test_ooc settle: %lld blocks mapped for the initialisation, %.2f MiB in use, "
           "%.2f MiB kept\n", (long long)(rs.mapped - before.mapped),
           (double)rs.live_bytes / 1048576.0, (double)rs.kept_bytes / 1048576.0);
    ck_assert_int_gt(rs.mapped - before.mapped, 14);   /* the 14 matrices' fp32 tiles, mapped */
    ck_assert_int_eq(rs.peak_bytes, rs.live_bytes);
    ck_assert_int_le(rs.kept_bytes, rs.live_bytes / 8);
    nnt_layer_destroy(m);
    EXPECT_OK(nnt_ctx_destroy(ctx));
}
END_TEST

/* NNT_OPTIM_ON=cpu (lib/ctx.c): a task that writes a weight's or an optimizer state's tile
 * is one nnt_submit keeps on the CPU workers when CUDA workers exist; one that writes a
 * gradient or an activation, or only reads weights, is not; without the variable none is.
 * Here (no GPU) the tiles' marks after a training step and the rule on them. */
static int writes_host_side(nnt_ctx *ctx, nnt_tensor *t, enum starpu_data_access_mode mode)
{
    struct starpu_data_descr d[2] = {{t->tiles[0].handle, mode}, {NULL, STARPU_W}};
    nnt_tensor *out = NULL;   /* an activation the task writes beside it */
    const int64_t shape[1] = {4};
    EXPECT_OK(nnt_tensor_create(ctx, NNT_FP32, 1, shape, NULL, &out));
    d[1].handle = out->tiles[0].handle;
    int host = nnt_task_writes_host_side(ctx, 2, d);
    nnt_tensor_destroy(out);
    return host;
}

START_TEST(test_optim_on_cpu_marks)
{
    const nnt_gpt_config cfg = {sizeof(nnt_gpt_config), V, MAXT, 1, NH, C};
    for (int on = 0; on < 2; on++) {
        if (on)
            setenv("NNT_OPTIM_ON", "cpu", 1);
        else
            unsetenv("NNT_OPTIM_ON");
        nnt_ctx *ctx = test_ctx();
        nnt_layer *m = NULL;
        nnt_optim *opt = NULL;
        nnt_tensor *tok = NULL, *tgt = NULL;
        int64_t bt[2] = {B, T};
        int32_t tok_host[B * T], tgt_host[B * T];
        EXPECT_OK(nnt_gpt_create(ctx, &cfg, B, T, &TILING, &m));
        init_weights(m);
        EXPECT_OK(nnt_tensor_create(ctx, NNT_INT32, 2, bt, NULL, &tok));
        EXPECT_OK(nnt_tensor_create(ctx, NNT_INT32, 2, bt, NULL, &tgt));
        batch(tok_host, tgt_host);
        EXPECT_OK(nnt_tensor_copy_from_host(tok, tok_host, sizeof tok_host));
        EXPECT_OK(nnt_tensor_copy_from_host(tgt, tgt_host, sizeof tgt_host));
        EXPECT_OK(nnt_layer_set_targets(m, tgt));
        nnt_optim_options adam = NNT_OPTIM_OPTIONS_INIT;
        EXPECT_OK(nnt_optim_create(ctx, &adam, &opt));
        EXPECT_OK(nnt_optim_add_layer(opt, m));
        EXPECT_OK(nnt_layer_zero_grad(m));
        EXPECT_OK(nnt_layer_forward(m, tok, NULL));
        EXPECT_OK(nnt_layer_backward(m, NULL, NULL));
        EXPECT_OK(nnt_optim_step(opt));
        EXPECT_OK(nnt_ctx_wait(ctx));
        ck_assert_int_eq(ctx->optim_on_cpu, on);
        ck_assert_int_ge(opt->nparams, 4);
        for (int i = 0; i < opt->nparams; i++) {
            const nnt_optim_param *p = &opt->params[i];
            for (int64_t t = 0; t < p->value->ntiles; t++)
                ck_assert_msg(nnt_handle_is_host_side(p->value->tiles[t].handle) &&
                              !nnt_handle_is_gradient(p->value->tiles[t].handle),
                              "%s: tile %lld not marked a weight's", p->name, (long long)t);
            for (int k = 0; k < 2; k++)
                ck_assert_msg(p->state[k] && nnt_handle_is_host_side(p->state[k]->tiles[0].handle),
                              "%s: state %d not marked host side", p->name, k);
            ck_assert_msg(nnt_handle_is_gradient(p->grad->tiles[0].handle) &&
                          !nnt_handle_is_host_side(p->grad->tiles[0].handle),
                          "%s: gradient marked host side, or not a gradient", p->name);
            ck_assert_int_eq(writes_host_side(ctx, p->value, STARPU_RW), on);
            ck_assert_int_eq(writes_host_side(ctx, p->state[0], STARPU_W), on);
            ck_assert_int_eq(writes_host_side(ctx, p->value, STARPU_R), 0);
            ck_assert_int_eq(writes_host_side(ctx, p->grad, STARPU_RW), 0);
        }
        nnt_tensor_destroy(tok);
        nnt_tensor_destroy(tgt);
        nnt_optim_destroy(opt);
        nnt_layer_destroy(m);
        EXPECT_OK(nnt_ctx_destroy(ctx));
    }
    setenv("NNT_OPTIM_ON", "gpu", 1);   /* neither value: refused, named */
    nnt_ctx *ctx = NULL;
    EXPECT_FAIL_MSG(nnt_ctx_create(NULL, &ctx), NNT_E_INVAL, "NNT_OPTIM_ON=gpu");
    unsetenv("NNT_OPTIM_ON");
}
END_TEST

/* The default GPU budget leaves max(1.5 GiB, 1/16 of the card) to what StarPU does not count;
 * a card smaller than two reserves gets half. */
START_TEST(test_default_gpu_budget)
{
    ck_assert_int_eq(nnt_default_gpu_budget_mib(81559), 81559 - 81559 / 16);   /* H100 80 GB */
    ck_assert_int_eq(nnt_default_gpu_budget_mib(143771), 143771 - 143771 / 16); /* H200 */
    ck_assert_int_eq(nnt_default_gpu_budget_mib(16384), 16384 - 1536);
    ck_assert_int_eq(nnt_default_gpu_budget_mib(24576), 24576 - 1536);         /* 1/16 = 1536 */
    ck_assert_int_eq(nnt_default_gpu_budget_mib(4096), 4096 - 1536);
    ck_assert_int_eq(nnt_default_gpu_budget_mib(3072), 1536);
    ck_assert_int_eq(nnt_default_gpu_budget_mib(2048), 1024);
}
END_TEST

static Suite *ooc_suite(void)
{
    Suite *s = suite_create("ooc");
    TCase *tc = tcase_create("budget");
    tcase_set_timeout(tc, 120);
    tcase_add_loop_test(tc, test_budget_matches_ram, 0, 4);
    tcase_add_test(tc, test_default_gpu_budget);
    tcase_add_test(tc, test_ram_hooks);
    tcase_add_test(tc, test_ram_settles_after_init);
    tcase_add_test(tc, test_ram_kept_within_budget);
    tcase_add_test(tc, test_optim_on_cpu_marks);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return run_suite(ooc_suite());
}
