/* SPDX-License-Identifier: MIT */
/* SwiGLU on tiled tensors: y = silu(gate) * up and its gradient, one task per tile (all
 * operands share one layout); GeGLU (Gemma: gelu_tanh(gate) * up) the same way. Outputs may be inputs (in place): the codelets give StarPU
 * each distinct tile once; the backward's two outputs must differ. */
#include "../internal.h"

/* Every tensor of all[0..n) FP32 with all[0]'s layout; the first nread readable. */
static int check_args(const char *fn, int n, nnt_tensor *const *all,
                      const char *const *roles, int nread)
{
    int rc = 0;
    for (int i = 0; i < n && rc == 0; i++)
        rc = nnt_check_arg(fn, roles[i], all[i], NNT_FP32, i < nread);
    for (int i = 1; i < n && rc == 0; i++)
        rc = nnt_check_same_layout(fn, roles[0], all[0], roles[i], all[i]);
    return rc;
}

static int glu_forward(const char *fn, int gelu, nnt_tensor *gate, nnt_tensor *up,
                       nnt_tensor *y)
{
    static const char *const roles[3] = {"gate", "up", "y"};
    nnt_tensor *all[3] = {gate, up, y};
    int rc = check_args(fn, 3, all, roles, 2);
    for (int64_t i = 0; rc == 0 && i < y->ntiles; i++)
        rc = nnt_insert_swiglu(y->ctx, gelu, gate->tiles[i].handle, up->tiles[i].handle,
                               y->tiles[i].handle);
    if (rc == 0)
        nnt_tensor_mark_written(y);
    return rc;
}

static int glu_backward(const char *fn, int gelu, nnt_tensor *gate, nnt_tensor *up,
                        nnt_tensor *dy, nnt_tensor *dgate, nnt_tensor *dup)
{
    static const char *const roles[5] = {"gate", "up", "dy", "dgate", "dup"};
    nnt_tensor *all[5] = {gate, up, dy, dgate, dup};
    int rc = check_args(fn, 5, all, roles, 3);
    if (rc == 0 && dgate == dup)
        rc = nnt_fail(gate->ctx, NNT_E_INVAL, "%s: dgate and dup are the same tensor", fn);
    for (int64_t i = 0; rc == 0 && i < dgate->ntiles; i++)
        rc = nnt_insert_swiglu_bwd(dgate->ctx, gelu, gate->tiles[i].handle, up->tiles[i].handle,
                                   dy->tiles[i].handle, dgate->tiles[i].handle,
                                   dup->tiles[i].handle);
    if (rc == 0) {
        nnt_tensor_mark_written(dgate);
        nnt_tensor_mark_written(dup);
    }
    return rc;
}

int nnt_tensor_swiglu(nnt_tensor *gate, nnt_tensor *up, nnt_tensor *y)
{
    return glu_forward("nnt_tensor_swiglu", 0, gate, up, y);
}

int nnt_tensor_swiglu_backward(nnt_tensor *gate, nnt_tensor *up, nnt_tensor *dy,
                               nnt_tensor *dgate, nnt_tensor *dup)
{
    return glu_backward("nnt_tensor_swiglu_backward", 0, gate, up, dy, dgate, dup);
}

int nnt_tensor_geglu(nnt_tensor *gate, nnt_tensor *up, nnt_tensor *y)
{
    return glu_forward("nnt_tensor_geglu", 1, gate, up, y);
}

int nnt_tensor_geglu_backward(nnt_tensor *gate, nnt_tensor *up, nnt_tensor *dy,
                              nnt_tensor *dgate, nnt_tensor *dup)
{
    return glu_backward("nnt_tensor_geglu_backward", 1, gate, up, dy, dgate, dup);
}
