/* Task submission shared by the codelets: argument blocks, any number of buffers, and the
 * mapping of StarPU's errors to NNT_E_*. */
#include "../internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

int nnt_submit(nnt_ctx *ctx, struct starpu_codelet *cl, int nbuf,
               const struct starpu_data_descr *bufs, const void *args, size_t args_size)
{
    void *copy = malloc(args_size ? args_size : 1);   /* freed by StarPU with the task */
    if (!copy)
        return nnt_fail(ctx, NNT_E_NOMEM, "%s: out of host memory", cl->name);
    memcpy(copy, args, args_size);
    int rc = starpu_task_insert(cl, STARPU_DATA_MODE_ARRAY, bufs, nbuf,
                                STARPU_CL_ARGS, copy, args_size, 0);
    if (rc == -ENODEV)
        return nnt_fail(ctx, NNT_E_UNSUPPORTED, "%s: no worker can run this task", cl->name);
    if (rc != 0)
        return nnt_fail(ctx, NNT_E_RUNTIME, "%s: task submission failed: %s", cl->name,
                        strerror(-rc));
    return NNT_OK;
}
