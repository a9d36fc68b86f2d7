/* SPDX-License-Identifier: MIT */
/* SwiGLU on tiled tensors: y = silu(gate) * up and its gradient, one task per tile (all
 * operands share one layout); GeGLU (Gemma: gelu_tanh(gate) * up) and gpt-oss's clamped
 * SwiGLU (gc sigmoid(alpha gc) (uc + 1), gc = min(gate, limit), uc = clamp(up, -limit,
 * limit)) the same way. Outputs may be inputs (in place): the codelets give StarPU each
 * distinct tile once; the backward's two outputs must differ. */
#include "../internal.h"

#include <math.h>

/* Every tensor of all[0..n) FP32 with all[0]'s layout; the first nread readable; act a
 * known kind, its alpha and limit usable (> 0 and finite as floats) when it is the clamped
 * SwiGLU. */
static int check_args(const char *fn, const nnt_glu_act *act, int n, nnt_tensor *const *all,
                      const char *const *roles, int nread)
{
    int rc = 0;
    for (int i = 0; i < n && rc == 0; i++)
        rc = nnt_check_arg(fn, roles[i], all[i], NNT_FP32, i < nread);
    for (int i = 1; i < n && rc == 0; i++)
        rc = nnt_check_same_layout(fn, roles[0], all[0], roles[i], all[i]);
    if (rc == 0 && (act->kind < NNT_GLU_SILU || act->kind > NNT_GLU_SILU_CLAMP))
        rc = nnt_fail(all[0]->ctx, NNT_E_INVAL, "%s: unknown activation %d", fn, act->kind);
    if (rc == 0 && act->kind == NNT_GLU_SILU_CLAMP &&
        !(act->alpha > 0.0f && isfinite(act->alpha) && act->limit > 0.0f &&
          isfinite(act->limit)))
        rc = nnt_fail(all[0]->ctx, NNT_E_INVAL, "%s: alpha %g and limit %g must be > 0 and "
                      "finite", fn, (double)act->alpha, (double)act->limit);
    return rc;
}

static int glu_forward(const char *fn, const nnt_glu_act *act, nnt_tensor *gate,
                       nnt_tensor *up, nnt_tensor *y)
{
    static const char *const roles[3] = {"gate", "up", "y"};
    nnt_tensor *all[3] = {gate, up, y};
    int rc = check_args(fn, act, 3, all, roles, 2);
    for (int64_t i = 0; rc == 0 && i < y->ntiles; i++)
        rc = nnt_insert_swiglu(y->ctx, act, gate->tiles[i].handle, up->tiles[i].handle,
                               y->tiles[i].handle);
    if (rc == 0)
        nnt_tensor_mark_written(y);
    return rc;
}

static int glu_backward(const char *fn, const nnt_glu_act *act, nnt_tensor *gate,
                        nnt_tensor *up, nnt_tensor *dy, nnt_tensor *dgate, nnt_tensor *dup)
{
    static const char *const roles[5] = {"gate", "up", "dy", "dgate", "dup"};
    nnt_tensor *all[5] = {gate, up, dy, dgate, dup};
    int rc = check_args(fn, act, 5, all, roles, 3);
    if (rc == 0 && dgate == dup)
        rc = nnt_fail(gate->ctx, NNT_E_INVAL, "%s: dgate and dup are the same tensor", fn);
    for (int64_t i = 0; rc == 0 && i < dgate->ntiles; i++)
        rc = nnt_insert_swiglu_bwd(dgate->ctx, act, gate->tiles[i].handle, up->tiles[i].handle,
                                   dy->tiles[i].handle, dgate->tiles[i].handle,
                                   dup->tiles[i].handle);
    if (rc == 0) {
        nnt_tensor_mark_written(dgate);
        nnt_tensor_mark_written(dup);
    }
    return rc;
}

static const nnt_glu_act silu_act = {NNT_GLU_SILU, 0.0f, 0.0f};
static const nnt_glu_act gelu_act = {NNT_GLU_GELU_TANH, 0.0f, 0.0f};

int nnt_tensor_swiglu(nnt_tensor *gate, nnt_tensor *up, nnt_tensor *y)
{
    return glu_forward("nnt_tensor_swiglu", &silu_act, gate, up, y);
}

int nnt_tensor_swiglu_backward(nnt_tensor *gate, nnt_tensor *up, nnt_tensor *dy,
                               nnt_tensor *dgate, nnt_tensor *dup)
{
    return glu_backward("nnt_tensor_swiglu_backward", &silu_act, gate, up, dy, dgate, dup);
}

int nnt_tensor_geglu(nnt_tensor *gate, nnt_tensor *up, nnt_tensor *y)
{
    return glu_forward("nnt_tensor_geglu", &gelu_act, gate, up, y);
}

int nnt_tensor_geglu_backward(nnt_tensor *gate, nnt_tensor *up, nnt_tensor *dy,
                              nnt_tensor *dgate, nnt_tensor *dup)
{
    return glu_backward("nnt_tensor_geglu_backward", &gelu_act, gate, up, dy, dgate, dup);
}

/* Errors name the operation of act's kind (an unknown kind: nnt_tensor_glu). */
static const char *glu_name(const nnt_glu_act *act, int backward)
{
    static const char *const names[3][2] = {
        {"nnt_tensor_swiglu", "nnt_tensor_swiglu_backward"},
        {"nnt_tensor_geglu", "nnt_tensor_geglu_backward"},
        {"nnt_tensor_swiglu_clamp", "nnt_tensor_swiglu_clamp_backward"}};
    if (act->kind < NNT_GLU_SILU || act->kind > NNT_GLU_SILU_CLAMP)
        return backward ? "nnt_tensor_glu_backward" : "nnt_tensor_glu";
    return names[act->kind][backward];
}

int nnt_tensor_glu(const nnt_glu_act *act, nnt_tensor *gate, nnt_tensor *up, nnt_tensor *y)
{
    return glu_forward(glu_name(act, 0), act, gate, up, y);
}

int nnt_tensor_glu_backward(const nnt_glu_act *act, nnt_tensor *gate, nnt_tensor *up,
                            nnt_tensor *dy, nnt_tensor *dgate, nnt_tensor *dup)
{
    return glu_backward(glu_name(act, 1), act, gate, up, dy, dgate, dup);
}
