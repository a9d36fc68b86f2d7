/* Task submission shared by the codelets: argument blocks and error mapping. */
#include "../internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

int nnt_submit_1(nnt_tensor *t, struct starpu_codelet *cl, starpu_data_handle_t h,
                 const void *args, size_t args_size)
{
    void *copy = malloc(args_size);   /* freed by StarPU with the task (STARPU_CL_ARGS) */
    if (!copy)
        return nnt_fail(t->ctx, NNT_E_NOMEM, "%s: out of host memory", cl->name);
    memcpy(copy, args, args_size);
    int rc = starpu_task_insert(cl, STARPU_W, h, STARPU_CL_ARGS, copy, args_size, 0);
    if (rc == -ENODEV)
        return nnt_fail(t->ctx, NNT_E_UNSUPPORTED, "%s: no worker can run this task", cl->name);
    if (rc != 0)
        return nnt_fail(t->ctx, NNT_E_RUNTIME, "%s: task submission failed: %s", cl->name,
                        strerror(-rc));
    return NNT_OK;
}
