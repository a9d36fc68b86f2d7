/* SPDX-License-Identifier: MIT */
/* Elementwise tensor operations: scale, axpby, axpbyz (internal), GELU (tanh approximation
 * and exact form) and its backward, soft-capping and its backward (internal: Gemma 2's final
 * logits). Operands of one call have equal shapes and tilings, so tile i of each operand
 * holds the same elements: one task per tile, no ordering between tiles, and the result does
 * not depend on the tiling. (And nnt_tensor_sum_into, internal, whose second operand may be
 * tiled otherwise.) */
#include "../internal.h"

#include <math.h>

/* x (...) = alpha x on every tile of x */
static int scale_tiles(nnt_tensor *x, double alpha)
{
    int rc = NNT_OK;
    for (int64_t i = 0; i < x->ntiles && rc == 0; i++)
        rc = nnt_insert_scale(x->ctx, x->tiles[i].handle, (float)alpha);
    return rc;
}

int nnt_tensor_scale(nnt_tensor *x, double alpha)
{
    int rc = nnt_check_arg("nnt_tensor_scale", "x", x, NNT_FP32, 1);
    return rc ? rc : scale_tiles(x, alpha);
}

int nnt_tensor_axpby(double alpha, nnt_tensor *x, double beta, nnt_tensor *y)
{
    const char *fn = "nnt_tensor_axpby";
    int rc = nnt_check_arg(fn, "x", x, NNT_FP32, 1);
    if (rc == 0)
        rc = nnt_check_arg(fn, "y", y, NNT_FP32, beta != 0.0);
    if (rc == 0)
        rc = nnt_check_same_layout(fn, "x", x, "y", y);
    if (rc)
        return rc;
    if (x == y)   /* y = alpha y + beta y: one factor, no aliased kernel arguments */
        return scale_tiles(y, alpha + beta);
    for (int64_t i = 0; i < y->ntiles && rc == 0; i++)
        rc = nnt_insert_axpby(y->ctx, (float)alpha, x->tiles[i].handle, (float)beta,
                              y->tiles[i].handle);
    if (rc == 0)
        nnt_tensor_mark_written(y);
    return rc;
}

int nnt_tensor_axpbyz(double alpha, nnt_tensor *x, double beta, nnt_tensor *y, nnt_tensor *z)
{
    const char *fn = "nnt_tensor_axpbyz";
    int rc = nnt_check_arg(fn, "x", x, NNT_FP32, 1);
    if (rc == 0)
        rc = nnt_check_arg(fn, "y", y, NNT_FP32, 1);
    if (rc == 0)
        rc = nnt_check_arg(fn, "z", z, NNT_FP32, 0);
    if (rc == 0)
        rc = nnt_check_same_layout(fn, "x", x, "y", y);
    if (rc == 0)
        rc = nnt_check_same_layout(fn, "x", x, "z", z);
    if (rc == 0 && (z == x || z == y || x == y))
        rc = nnt_fail(z->ctx, NNT_E_INVAL, "%s: x, y and z must be three tensors (in place: "
                      "nnt_tensor_axpby)", fn);
    for (int64_t i = 0; i < z->ntiles && rc == 0; i++)
        rc = nnt_insert_axpbyz(z->ctx, (float)alpha, x->tiles[i].handle, (float)beta,
                               y->tiles[i].handle, z->tiles[i].handle);
    if (rc == 0)
        nnt_tensor_mark_written(z);
    return rc;
}

int nnt_tensor_sum_into(nnt_tensor *a, nnt_tensor *b, nnt_tensor *sum)
{
    if (sum == a || sum == b || a == b)
        return nnt_fail(sum->ctx, NNT_E_INVAL, "nnt_tensor_sum_into: a, b and sum must be three "
                        "tensors");
    if (nnt_same_layout(a, b) && nnt_same_layout(a, sum))
        return nnt_tensor_axpbyz(1.0, a, 1.0, b, sum);   /* sum = b + 1 a, as below */
    NNT_TRY(nnt_tensor_copy(b, sum));
    return nnt_tensor_axpby(1.0, a, 1.0, sum);
}

/* y = gelu(x), exact: x Phi(x), else the tanh approximation */
static int gelu_forward(const char *fn, int exact, nnt_tensor *x, nnt_tensor *y)
{
    int rc = nnt_check_arg(fn, "x", x, NNT_FP32, 1);
    if (rc == 0)
        rc = nnt_check_arg(fn, "y", y, NNT_FP32, 0);
    if (rc == 0)
        rc = nnt_check_same_layout(fn, "x", x, "y", y);
    for (int64_t i = 0; rc == 0 && i < y->ntiles; i++)
        rc = nnt_insert_gelu(y->ctx, exact, x->tiles[i].handle, y->tiles[i].handle);
    if (rc == 0)
        nnt_tensor_mark_written(y);
    return rc;
}

/* dx = dy gelu'(x) of the same form */
static int gelu_backward(const char *fn, int exact, nnt_tensor *x, nnt_tensor *dy,
                         nnt_tensor *dx)
{
    int rc = nnt_check_arg(fn, "x", x, NNT_FP32, 1);
    if (rc == 0)
        rc = nnt_check_arg(fn, "dy", dy, NNT_FP32, 1);
    if (rc == 0)
        rc = nnt_check_arg(fn, "dx", dx, NNT_FP32, 0);
    if (rc == 0)
        rc = nnt_check_same_layout(fn, "x", x, "dy", dy);
    if (rc == 0)
        rc = nnt_check_same_layout(fn, "dx", dx, "dy", dy);
    for (int64_t i = 0; rc == 0 && i < dx->ntiles; i++)
        rc = nnt_insert_gelu_bwd(dx->ctx, exact, x->tiles[i].handle, dy->tiles[i].handle,
                                 dx->tiles[i].handle);
    if (rc == 0)
        nnt_tensor_mark_written(dx);
    return rc;
}

int nnt_tensor_gelu(nnt_tensor *x, nnt_tensor *y)
{
    return gelu_forward("nnt_tensor_gelu", 0, x, y);
}

int nnt_tensor_gelu_backward(nnt_tensor *x, nnt_tensor *dy, nnt_tensor *dx)
{
    return gelu_backward("nnt_tensor_gelu_backward", 0, x, dy, dx);
}

int nnt_tensor_gelu_erf(nnt_tensor *x, nnt_tensor *y)
{
    return gelu_forward("nnt_tensor_gelu_erf", 1, x, y);
}

int nnt_tensor_gelu_erf_backward(nnt_tensor *x, nnt_tensor *dy, nnt_tensor *dx)
{
    return gelu_backward("nnt_tensor_gelu_erf_backward", 1, x, dy, dx);
}

static int check_cap(const char *fn, nnt_tensor *x, double cap)
{
    if (!(cap > 0.0) || !isfinite(cap))
        return nnt_fail(x->ctx, NNT_E_INVAL, "%s: cap %g must be finite and > 0", fn, cap);
    return NNT_OK;
}

int nnt_tensor_softcap(nnt_tensor *x, double cap, nnt_tensor *y)
{
    const char *fn = "nnt_tensor_softcap";
    int rc = nnt_check_arg(fn, "x", x, NNT_FP32, 1);
    if (rc == 0)
        rc = nnt_check_arg(fn, "y", y, NNT_FP32, 0);
    if (rc == 0)
        rc = nnt_check_same_layout(fn, "x", x, "y", y);
    if (rc == 0)
        rc = check_cap(fn, x, cap);
    for (int64_t i = 0; rc == 0 && i < y->ntiles; i++)
        rc = nnt_insert_softcap(y->ctx, (float)cap, x->tiles[i].handle, y->tiles[i].handle);
    if (rc == 0)
        nnt_tensor_mark_written(y);
    return rc;
}

int nnt_tensor_softcap_backward(nnt_tensor *x, double cap, nnt_tensor *dy, nnt_tensor *dx)
{
    const char *fn = "nnt_tensor_softcap_backward";
    int rc = nnt_check_arg(fn, "x", x, NNT_FP32, 1);
    if (rc == 0)
        rc = nnt_check_arg(fn, "dy", dy, NNT_FP32, 1);
    if (rc == 0)
        rc = nnt_check_arg(fn, "dx", dx, NNT_FP32, 0);
    if (rc == 0)
        rc = nnt_check_same_layout(fn, "x", x, "dy", dy);
    if (rc == 0)
        rc = nnt_check_same_layout(fn, "dx", dx, "dy", dy);
    if (rc == 0)
        rc = check_cap(fn, x, cap);
    for (int64_t i = 0; rc == 0 && i < dx->ntiles; i++)
        rc = nnt_insert_softcap_bwd(dx->ctx, (float)cap, x->tiles[i].handle,
                                    dy->tiles[i].handle, dx->tiles[i].handle);
    if (rc == 0)
        nnt_tensor_mark_written(dx);
    return rc;
}
