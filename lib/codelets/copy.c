/* SPDX-License-Identifier: MIT */
/* Codelet: fill one destination tile from several source tiles, one strided box each
 * (retiling and dimension permutations). Buffer 0 is the destination tile, buffers
 * 1..nsrc the source tiles. */
#include "../internal.h"
#include "nnt_cpu.h"

#include <stdlib.h>
#include <string.h>

/* Argument block: a header followed by nbox boxes. */
struct copy_args {
    int ndim;
    int nbox;
    size_t elsize;
    nnt_copy_box box[];
};

static void copy_cpu(void *buffers[], void *cl_arg)
{
    const struct copy_args *a = cl_arg;
    char *dst = (char *)STARPU_VECTOR_GET_PTR(buffers[0]);   // (dst tile)
    for (int i = 0; i < a->nbox; i++) {
        const nnt_copy_box *b = &a->box[i];
        const char *src = (const char *)STARPU_VECTOR_GET_PTR(buffers[1 + b->src]);
        nnt_cpu_copy_box(a->ndim, b->shape, a->elsize, src + b->src_offset * (int64_t)a->elsize,
                         b->src_stride, dst + b->dst_offset * (int64_t)a->elsize, b->dst_stride);
    }
}

#ifdef NNT_CUDA_CODELETS
static void copy_cuda(void *buffers[], void *cl_arg)
{
    const struct copy_args *a = cl_arg;
    char *dst = (char *)STARPU_VECTOR_GET_PTR(buffers[0]);
    cudaStream_t stream = nnt_cuda_task_stream();
    for (int i = 0; i < a->nbox; i++) {
        const nnt_copy_box *b = &a->box[i];
        const char *src = (const char *)STARPU_VECTOR_GET_PTR(buffers[1 + b->src]);
        int rc = nnt_cuda_copy_box(a->ndim, b->shape, a->elsize,
                                   src + b->src_offset * (int64_t)a->elsize, b->src_stride,
                                   dst + b->dst_offset * (int64_t)a->elsize, b->dst_stride,
                                   stream);
        if (rc) {
            nnt_task_error("nnt_copy", "CUDA kernel failed (%d)", rc);
            return;
        }
    }
}
#endif

static struct starpu_perfmodel copy_model = {
    .type = STARPU_HISTORY_BASED, .symbol = "nnt_copy"};

static struct starpu_codelet copy_cl = {
    .name = "nnt_copy",
    .cpu_funcs = {copy_cpu},
#ifdef NNT_CUDA_CODELETS
    .cuda_funcs = {copy_cuda},
    .cuda_flags = {STARPU_CUDA_ASYNC},
#endif
    .nbuffers = STARPU_VARIABLE_NBUFFERS,
    .model = &copy_model,
};

int nnt_insert_copy(nnt_ctx *ctx, starpu_data_handle_t dst, enum starpu_data_access_mode mode,
                    int nsrc, const starpu_data_handle_t *src, int ndim, size_t elsize,
                    int nbox, const nnt_copy_box *boxes)
{
    size_t size = sizeof(struct copy_args) + (size_t)nbox * sizeof *boxes;
    struct copy_args *args = malloc(size);
    struct starpu_data_descr *bufs = malloc((size_t)(nsrc + 1) * sizeof *bufs);
    int rc;
    if (!args || !bufs) {
        rc = nnt_fail(ctx, NNT_E_NOMEM, "nnt_copy: out of host memory");
    } else {
        args->ndim = ndim;
        args->nbox = nbox;
        args->elsize = elsize;
        memcpy(args->box, boxes, (size_t)nbox * sizeof *boxes);
        bufs[0].handle = dst;
        bufs[0].mode = mode;
        for (int i = 0; i < nsrc; i++) {
            bufs[1 + i].handle = src[i];
            bufs[1 + i].mode = STARPU_R;
        }
        rc = nnt_submit(ctx, &copy_cl, nsrc + 1, bufs, args, size);
    }
    free(args);
    free(bufs);
    return rc;
}
