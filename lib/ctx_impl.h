/* SPDX-License-Identifier: MIT */
/* The context's internals shared by its files (lib/ctx*.c; hidden like all of the library's
 * internal functions): see lib/ctx.c's head comment for what each file holds. */
#ifndef NNT_CTX_IMPL_H
#define NNT_CTX_IMPL_H

#include "internal.h"

/* ctx_options.c */
/* Copy the caller's options over the defaults, honouring its size field. */
int ctx_read_options(const nnt_ctx_options *user, nnt_ctx_options *opts);
int ctx_validate_options(const nnt_ctx_options *o);
/* what ('swap directory', ...) at dir: an existing, writable directory, else NNT_E_IO. */
int ctx_check_dir(const char *what, const char *dir);

/* ctx_env.c: the environment variables the context sets (indices into its list) */
enum { LIMIT_CUDA, LIMIT_CPU, SILENT, NOBIND, MPI_NOBIND, RANK_HOME, HWLOC_XML, HWLOC_THIS,
       MAX_SUBMITTED, MIN_SUBMITTED, NVARS };
/* The most tasks submitted and not yet run before a submission waits (ctx_env.c) */
#define NNT_MAX_SUBMITTED 100000
/* Set an environment variable of the list, its earlier value kept for ctx_restore_var. */
void ctx_set_var(int which, const char *value);
/* The variable's earlier value back, if this context set it. */
void ctx_restore_var(int which);
/* Every variable the context set back as it was (at destroy, or a failed create). */
void ctx_restore_limits(void);
/* Set the environment for StarPU's start (rank >= 0: one rank of several). */
int ctx_configure_environment(const nnt_ctx_options *o, int rank);

/* ctx_workers.c */
void ctx_start_cuda_libraries(void);   /* after StarPU started (no-ops without CUDA) */
void ctx_stop_cuda_libraries(void);
/* After the runtime stopped: the RAM scratch (GPU scratch goes with the CUDA libraries). */
void ctx_free_cpu_scratch(void);

/* ctx_tensors.c */
/* Release the tiles of every tensor still alive; the handles stay valid but unusable. */
void ctx_orphan_tensors(nnt_ctx *ctx);

/* ctx_ram.c: StarPU's allocation hooks for the RAM of tiles, freed blocks kept for reuse.
 * Installed after starpu_init when they can stand in for StarPU's plain malloc (no CUDA
 * worker, one NUMA node, NNT_RAM_HOOKS not 0): returns 1, else 0 with *why_not set. budget:
 * the RAM budget in bytes, which sizes the freed blocks kept; swap: a disk swap is
 * registered (the blocks kept are then counted in the budget). Logs (info) which blocks it
 * serves. Removed after starpu_shutdown. */
int ctx_ram_install(int64_t budget, int swap, const char **why_not);
void ctx_ram_remove(void);
size_t ctx_ram_kept_cap(void);   /* bytes of the budget set aside for blocks kept (swap) */

#endif
