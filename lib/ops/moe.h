// SPDX-License-Identifier: MIT
/* Mixture-of-experts operations (internal): the routing of tokens over experts and the row
 * maps between activations (B, T, C) and an expert's gathered rows (n, C). The token lists
 * of an expert are host data, known once the routing's ids were read (lib/layers/moe.c). */
#ifndef NNT_OPS_MOE_H
#define NNT_OPS_MOE_H

#include "../internal.h"

/* Experts of one layer at most (the kernels' scratch: cpu/nnt_cpu.h) */
#ifndef NNT_MOE_MAX_EXPERTS
#define NNT_MOE_MAX_EXPERTS 1024
#endif

/* The tokens of one expert: n (token, slot) pairs in token order; token b T + t of a
 * (B, T, ...) activation, slot its place among the token's k choices. */
typedef struct nnt_moe_rows {
    int64_t n;
    int32_t *token, *slot;
} nnt_moe_rows;

/* logits (B, T, E), E in one tile -> probs (B, T, E) (logits' layout), idx (B, T, k) int32
 * and w (B, T, k) fp32 (k in one tile, B and T tiled as logits): softmax, torch.topk's
 * selection, the k weights renormalised to sum 1 when norm. One task per tile of tokens. */
int nnt_moe_route(nnt_tensor *logits, int64_t k, int norm, nnt_tensor *probs, nnt_tensor *idx,
                  nnt_tensor *w);
/* dlogits (probs' layout) from dw (w's layout) through the top-k weights and the softmax;
 * aux (E floats, NULL: none) is added to the gradient of every token's probabilities. */
int nnt_moe_route_backward(nnt_tensor *probs, nnt_tensor *idx, nnt_tensor *w, int norm,
                           nnt_tensor *dw, const float *aux, nnt_tensor *dlogits);
/* xe (n, C) = x[token] (B, T, C), each row times w[token, slot] when w (B, T, k) is given.
 * xe's channel tiling is x's. */
int nnt_moe_gather(nnt_tensor *x, nnt_tensor *w, const nnt_moe_rows *rows, nnt_tensor *xe);
/* y[token] += ye (n, C) row, times w[token, slot] when w is given (y written before). */
int nnt_moe_scatter_add(nnt_tensor *ye, nnt_tensor *w, const nnt_moe_rows *rows,
                        nnt_tensor *y);
/* dw[token, slot] += dy[token] . ye row (dw (B, T, k) written before). */
int nnt_moe_weight_grad(nnt_tensor *dy, nnt_tensor *ye, const nnt_moe_rows *rows,
                        nnt_tensor *dw);

/* y (B, T, C) += sigmoid(z) s: z (B, T, 1), its last dimension one tile and its tokens
 * tiled as y's; s in y's layout (the shared expert's output and gate, Qwen2-MoE). */
int nnt_moe_shared_add(nnt_tensor *z, nnt_tensor *s, nnt_tensor *y);
/* Its gradient: ds = sigmoid(z) dy (s's layout), dz = sigmoid'(z) sum over channels of
 * dy s (z's layout; the channel tiles summed in order). */
int nnt_moe_shared_backward(nnt_tensor *z, nnt_tensor *s, nnt_tensor *dy, nnt_tensor *ds,
                            nnt_tensor *dz);

/* codelets (lib/codelets/moe.c) */
int nnt_insert_moe_route(nnt_ctx *ctx, int64_t E, int64_t k, int norm,
                         starpu_data_handle_t logits, starpu_data_handle_t probs,
                         starpu_data_handle_t idx, starpu_data_handle_t w);
int nnt_insert_moe_route_bwd(nnt_ctx *ctx, int64_t E, int64_t k, int norm, const float *aux,
                             starpu_data_handle_t probs, starpu_data_handle_t idx,
                             starpu_data_handle_t w, starpu_data_handle_t dw,
                             starpu_data_handle_t dlogits);
/* first: the task writes the tile's first rows (mode W; the later tasks on it RW) */
int nnt_insert_moe_gather(nnt_ctx *ctx, int64_t width, int64_t k, int64_t m,
                          const int32_t *map, starpu_data_handle_t src, starpu_data_handle_t w,
                          starpu_data_handle_t dst, int first);
int nnt_insert_moe_scatter_add(nnt_ctx *ctx, int64_t width, int64_t k, int64_t m,
                               const int32_t *map, starpu_data_handle_t src,
                               starpu_data_handle_t w, starpu_data_handle_t dst);
int nnt_insert_moe_weight_grad(nnt_ctx *ctx, int64_t width, int64_t k, int64_t m,
                               const int32_t *map, starpu_data_handle_t dy,
                               starpu_data_handle_t y, starpu_data_handle_t dw);
int nnt_insert_moe_shared_add(nnt_ctx *ctx, int64_t width, starpu_data_handle_t z,
                              starpu_data_handle_t s, starpu_data_handle_t y);
/* accumulate: dz is added to (a later channel tile's task; mode RW, else W) */
int nnt_insert_moe_shared_bwd(nnt_ctx *ctx, int64_t width, int accumulate,
                              starpu_data_handle_t z, starpu_data_handle_t s,
                              starpu_data_handle_t dy, starpu_data_handle_t ds,
                              starpu_data_handle_t dz);

#endif
