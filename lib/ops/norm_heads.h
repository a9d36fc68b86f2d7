// SPDX-License-Identifier: MIT
/* RMSNorm of each token's whole projection (B, T, H, hd) over its H hd values (OLMoE's q and
 * k norms), internal: the tiles must hold whole (H, hd) rows; gamma (H hd) one tile; rstd
 * (B, T) tiled as x's first two dimensions. One task per tile of tokens (the RMSNorm
 * kernels with rows of H hd). The backward accumulates into dgamma. */
#ifndef NNT_OPS_NORM_HEADS_H
#define NNT_OPS_NORM_HEADS_H

#include "../internal.h"

int nnt_rmsnorm_heads(nnt_tensor *x, nnt_tensor *gamma, double eps, nnt_tensor *y,
                      nnt_tensor *rstd);
int nnt_rmsnorm_heads_backward(nnt_tensor *x, nnt_tensor *gamma, nnt_tensor *rstd,
                               nnt_tensor *dy, nnt_tensor *dx, nnt_tensor *dgamma);

#endif
