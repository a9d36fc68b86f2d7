/* SPDX-License-Identifier: MIT */
/* Per-worker resources, created on demand or at start-up and freed when the context stops:
 * scratch memory (RAM or GPU memory), the CPU workers' oneDNN primitive caches, the CUDA
 * workers' cuBLASLt handles and workspaces. */
#include "ctx_impl.h"
#include "nnt_cpu.h"

#include <stdlib.h>
#include <string.h>

/* Per worker: scratch memory grown on demand (the GEMM codelet's rounded or converted
 * operands), in RAM for CPU workers and on the GPU for CUDA workers. Only its own worker
 * touches an entry while the runtime runs. */
static struct {
    void *ptr;
    size_t bytes;
    int on_gpu;
} worker_scratch[STARPU_NMAXWORKERS];

#ifdef NNT_CUDA_CODELETS
/* stream-ordered, so the worker's earlier tasks may still use the old block */
static void *grow_gpu_scratch(int w, size_t bytes)
{
    cudaStream_t stream = starpu_cuda_get_local_stream();
    void *p = NULL;
    if (worker_scratch[w].ptr)
        cudaFreeAsync(worker_scratch[w].ptr, stream);
    worker_scratch[w].ptr = NULL;
    worker_scratch[w].bytes = 0;
    if (cudaMallocAsync(&p, bytes, stream) != cudaSuccess) {
        (void)cudaGetLastError();   /* not sticky: do not leave it to the next launch check */
        return NULL;
    }
    worker_scratch[w].on_gpu = 1;
    return p;
}
#endif

void *nnt_worker_scratch(size_t bytes)
{
    int w = starpu_worker_get_id();
    if (w < 0 || w >= STARPU_NMAXWORKERS)
        return NULL;
    if (worker_scratch[w].ptr && worker_scratch[w].bytes >= bytes)
        return worker_scratch[w].ptr;
    size_t want = bytes + bytes / 4 + 64;   /* headroom: tile sizes vary a little; never 0 */
    void *p;
#ifdef NNT_CUDA_CODELETS
    if (starpu_worker_get_type(w) == STARPU_CUDA_WORKER)
        p = grow_gpu_scratch(w, want);
    else
#endif
    {
        free(worker_scratch[w].ptr);   /* the old content is not needed */
        p = malloc(want);
    }
    worker_scratch[w].ptr = p;
    worker_scratch[w].bytes = p ? want : 0;
    return p;
}

static nnt_dnnl_cache *worker_dnnl[STARPU_NMAXWORKERS];

static nnt_dnnl_cache *worker_dnnl_cache(void)
{
    int w = starpu_worker_get_id();
    if (w < 0 || w >= STARPU_NMAXWORKERS)
        return NULL;
    if (!worker_dnnl[w])
        worker_dnnl[w] = nnt_cpu_dnnl_cache_create();
    return worker_dnnl[w];
}

nnt_dnnl_cache *nnt_worker_product_cache(void)
{
    return nnt_cpu_gemm_backend() == NNT_GEMM_ONEDNN ? worker_dnnl_cache() : NULL;
}

/* After the runtime stopped: the RAM scratch (GPU scratch goes with the CUDA libraries). */
void ctx_free_cpu_scratch(void)
{
    for (int w = 0; w < STARPU_NMAXWORKERS; w++) {
        nnt_cpu_dnnl_cache_destroy(worker_dnnl[w]);
        worker_dnnl[w] = NULL;
    }
    for (int w = 0; w < STARPU_NMAXWORKERS; w++) {
        if (worker_scratch[w].on_gpu)
            continue;
        free(worker_scratch[w].ptr);
        worker_scratch[w].ptr = NULL;
        worker_scratch[w].bytes = 0;
    }
}

#ifdef NNT_CUDA_CODELETS
/* Per CUDA worker: a cuBLASLt handle and a workspace for fused GEMM epilogues. */
#define NNT_LT_WORKSPACE (32u << 20)
static struct {
    cublasLtHandle_t handle;
    void *workspace;
} cuda_lt[STARPU_NMAXWORKERS];

static void lt_init_worker(void *arg)
{
    (void)arg;
    int w = starpu_worker_get_id();
    if (cublasLtCreate(&cuda_lt[w].handle) != CUBLAS_STATUS_SUCCESS)
        cuda_lt[w].handle = NULL;
    if (cudaMalloc(&cuda_lt[w].workspace, NNT_LT_WORKSPACE) != cudaSuccess)
        cuda_lt[w].workspace = NULL;
}

static void lt_free_worker(void *arg)
{
    (void)arg;
    int w = starpu_worker_get_id();
    if (cuda_lt[w].handle)
        cublasLtDestroy(cuda_lt[w].handle);
    if (cuda_lt[w].workspace)
        cudaFree(cuda_lt[w].workspace);
    cuda_lt[w].handle = NULL;
    cuda_lt[w].workspace = NULL;
    if (worker_scratch[w].on_gpu && worker_scratch[w].ptr) {
        cudaFreeAsync(worker_scratch[w].ptr, starpu_cuda_get_local_stream());
        cudaStreamSynchronize(starpu_cuda_get_local_stream());
    }
    worker_scratch[w].ptr = NULL;
    worker_scratch[w].bytes = 0;
    worker_scratch[w].on_gpu = 0;
}

cudaStream_t nnt_cuda_task_stream(void)
{
    (void)cudaGetLastError();
    return starpu_cuda_get_local_stream();
}

int nnt_cuda_worker_lt(cublasLtHandle_t *handle, void **workspace, size_t *workspace_size)
{
    int w = starpu_worker_get_id();
    if (w < 0 || !cuda_lt[w].handle || !cuda_lt[w].workspace)
        return -1;
    *handle = cuda_lt[w].handle;
    *workspace = cuda_lt[w].workspace;
    *workspace_size = NNT_LT_WORKSPACE;
    return 0;
}

void ctx_start_cuda_libraries(void)
{
    if (starpu_cuda_worker_get_count() == 0)
        return;
    starpu_cublas_init();
    starpu_execute_on_each_worker(lt_init_worker, NULL, STARPU_CUDA);
}

void ctx_stop_cuda_libraries(void)
{
    if (starpu_cuda_worker_get_count() == 0)
        return;
    starpu_execute_on_each_worker(lt_free_worker, NULL, STARPU_CUDA);
    starpu_cublas_shutdown();
}
#else
void ctx_start_cuda_libraries(void) {}
void ctx_stop_cuda_libraries(void) {}
#endif
