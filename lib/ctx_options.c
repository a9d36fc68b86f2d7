/* SPDX-License-Identifier: MIT */
/* nnt_ctx_options: the defaults (nnt_ctx_options_init, at two symbol versions), reading the
 * caller's structure by its size, and the checks nnt_ctx_create makes before starting anything
 * (workers, scheduler, budgets, MPI, distribution, swap directory and its free space). */
#include "ctx_impl.h"
#include "io/io.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

/* nnt_ctx_options grew in 0.3 (mpi, distribution). A program built against 0.2 passes the
 * shorter structure to nnt_ctx_options_init, which must not write past it: the symbol keeps
 * its 0.2 behaviour at version NNT_0.1 (the defaults of the 0.2 fields, size = their size),
 * and programs built now bind to the NNT_0.3 version, which fills the whole structure.
 * nnt_ctx_create accepts both sizes. */
static int options_init(nnt_ctx_options *opts, size_t size)
{
    static const nnt_ctx_options defaults = NNT_CTX_OPTIONS_INIT;
    if (!opts)
        return nnt_fail(NULL, NNT_E_INVAL, "nnt_ctx_options_init: opts is NULL");
    memcpy(opts, &defaults, size);
    opts->size = size;
    return NNT_OK;
}

#ifdef NNT_SYMBOL_VERSIONS   /* ELF with GNU symbol versions (the shared library's build) */
NNT_API int nnt_ctx_options_init_v0_1(nnt_ctx_options *opts);
NNT_API int nnt_ctx_options_init_v0_3(nnt_ctx_options *opts);
__asm__(".symver nnt_ctx_options_init_v0_1,nnt_ctx_options_init@NNT_0.1");
__asm__(".symver nnt_ctx_options_init_v0_3,nnt_ctx_options_init@@NNT_0.3");

int nnt_ctx_options_init_v0_1(nnt_ctx_options *opts)
{
    return options_init(opts, offsetof(nnt_ctx_options, mpi));
}

int nnt_ctx_options_init_v0_3(nnt_ctx_options *opts)
#else
int nnt_ctx_options_init(nnt_ctx_options *opts)
#endif
{
    return options_init(opts, sizeof *opts);
}

/* The number of ranks of the MPI job an MPI launcher started this process in (Open MPI's
 * mpirun, PMI as srun and MPICH set it, Slurm's own), 1 when none did. */
static int launched_ranks(void)
{
    static const char *const vars[][2] = {{"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"},
                                          {"PMI_RANK", "PMI_SIZE"},
                                          {"SLURM_PROCID", "SLURM_NTASKS"}};
    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++) {
        const char *rank = getenv(vars[i][0]), *size = getenv(vars[i][1]);
        if (rank && size && atoi(size) >= 1)
            return atoi(size);
    }
    return 1;
}

/* Copy the caller's options over the defaults, honouring its size field; mpi -1 resolved. */
int ctx_read_options(const nnt_ctx_options *user, nnt_ctx_options *opts)
{
    nnt_ctx_options defaults;
    nnt_ctx_options_init(&defaults);
    /* 0.2 ended the structure before mpi and distribution */
    NNT_TRY(nnt_read_options("nnt_ctx_create", user, &defaults, opts, sizeof *opts,
                             offsetof(nnt_ctx_options, mpi),
                             "initialise them with NNT_CTX_OPTIONS_INIT or "
                             "nnt_ctx_options_init"));
    if (opts->mpi == -1)   /* an MPI job when a launcher started several ranks */
        opts->mpi = launched_ranks() > 1;
    return NNT_OK;
}

static int sched_exists(const char *name)
{
    struct starpu_sched_policy **policy = starpu_sched_get_predefined_policies();
    for (; policy && *policy; policy++)
        if (strcmp((*policy)->policy_name, name) == 0)
            return 1;
    return 0;
}

int ctx_check_dir(const char *what, const char *dir)
{
    struct stat st;
    if (stat(dir, &st) != 0)
        return nnt_fail(NULL, NNT_E_IO, "nnt_ctx_create: %s '%s': %s", what, dir, strerror(errno));
    if (!S_ISDIR(st.st_mode))
        return nnt_fail(NULL, NNT_E_IO, "nnt_ctx_create: %s '%s' is not a directory", what, dir);
    if (access(dir, W_OK | X_OK) != 0)
        return nnt_fail(NULL, NNT_E_IO, "nnt_ctx_create: %s '%s' is not writable", what, dir);
    return NNT_OK;
}

/* A swap larger than the free space of its file system would fail in the middle of a run,
 * when StarPU writes a tile there (StarPU's disk backend aborts on a failed write), so it is
 * refused here with the numbers. Space taken later by other programs is not foreseen. */
static int check_free_space(const char *dir, int64_t swap_mib)
{
    struct statvfs fs;
    if (statvfs(dir, &fs) != 0)
        return nnt_fail(NULL, NNT_E_IO, "nnt_ctx_create: swap directory '%s': %s", dir,
                        strerror(errno));
    double free_mib = (double)fs.f_bavail * (double)fs.f_frsize / (1024.0 * 1024.0);
    if ((double)swap_mib > free_mib)
        return nnt_fail(NULL, NNT_E_NOMEM, "nnt_ctx_create: swap_mib %lld is more than the "
                        "%.0f MiB free on the file system of '%s'", (long long)swap_mib,
                        free_mib, dir);
    return NNT_OK;
}

int ctx_validate_options(const nnt_ctx_options *o)
{
    if (o->ncpus < -1)
        return nnt_fail(NULL, NNT_E_INVAL, "nnt_ctx_create: ncpus %d (use -1 for all cores)", o->ncpus);
    if (o->ncuda < -1)
        return nnt_fail(NULL, NNT_E_INVAL, "nnt_ctx_create: ncuda %d (use -1 for all GPUs)", o->ncuda);
    if (o->ncpus == 0 && o->ncuda == 0)
        return nnt_fail(NULL, NNT_E_INVAL, "nnt_ctx_create: ncpus and ncuda are both 0: no workers");
#ifndef STARPU_USE_CUDA
    if (o->ncuda > 0)
        return nnt_fail(NULL, NNT_E_UNSUPPORTED, "nnt_ctx_create: %d CUDA devices requested but "
                        "StarPU was built without CUDA (configure nnt --with-starpu=PREFIX of a "
                        "CUDA-enabled StarPU)", o->ncuda);
#endif
    if (o->sched && !sched_exists(o->sched))
        return nnt_fail(NULL, NNT_E_INVAL, "nnt_ctx_create: unknown scheduler '%s' (try lws, "
                        "eager, dmda, dmdas)", o->sched);
    if (o->mem_gpu_mib < 0 || o->mem_cpu_mib < 0)
        return nnt_fail(NULL, NNT_E_INVAL, "nnt_ctx_create: negative memory budget "
                        "(gpu %lld MiB, cpu %lld MiB)", (long long)o->mem_gpu_mib,
                        (long long)o->mem_cpu_mib);
    if (o->mpi != 0 && o->mpi != 1)
        return nnt_fail(NULL, NNT_E_INVAL, "nnt_ctx_create: mpi %d (use 0, 1 or -1)", o->mpi);
    if (o->distribution != NNT_DIST_ROOT && o->distribution != NNT_DIST_SHARDED &&
        o->distribution != NNT_DIST_DATA)
        return nnt_fail(NULL, NNT_E_INVAL, "nnt_ctx_create: distribution %d is none of "
                        "NNT_DIST_ROOT (0), NNT_DIST_SHARDED (1), NNT_DIST_DATA (2)",
                        o->distribution);
    if (o->release_weights != 0 && o->release_weights != 1)
        return nnt_fail(NULL, NNT_E_INVAL, "nnt_ctx_create: release_weights %d (use 0 or 1)",
                        o->release_weights);
    if (!o->swap_dir && o->swap_mib != 0)
        return nnt_fail(NULL, NNT_E_INVAL, "nnt_ctx_create: swap_mib %lld without swap_dir",
                        (long long)o->swap_mib);
    if (o->swap_dir) {   /* last: it looks at the disk */
        if (o->swap_mib * 1024 * 1024 < STARPU_DISK_SIZE_MIN)
            return nnt_fail(NULL, NNT_E_INVAL, "nnt_ctx_create: swap_mib %lld is below the "
                            "minimum of %d MiB", (long long)o->swap_mib,
                            STARPU_DISK_SIZE_MIN / (1024 * 1024));
        if (nnt_io_make_dirs(o->swap_dir))   /* (created when missing) */
            return nnt_fail(NULL, NNT_E_IO, "nnt_ctx_create: swap directory '%s': cannot "
                            "create it: %s", o->swap_dir, strerror(errno));
        NNT_TRY(ctx_check_dir("swap directory", o->swap_dir));
        return check_free_space(o->swap_dir, o->swap_mib);
    }
    return NNT_OK;
}
