/* SPDX-License-Identifier: MIT */
/* nnt CPU kernels: embedding lookup and its gradient, table split over vocabulary blocks. */
#include "nnt_cpu.h"

#include <string.h>

/* out (ntok, nc; ldo): row i = table (nv, nc; ldt) row tok[i] - v0, for tokens in the block */
void nnt_cpu_embedding_gather_f32(int64_t ntok, int64_t nc, const int32_t *tok, int64_t v0,
                                  int64_t nv, const float *table, int64_t ldt, float *out,
                                  int64_t ldo)
{
    for (int64_t i = 0; i < ntok; i++) {
        int64_t t = (int64_t)tok[i] - v0;
        if (t >= 0 && t < nv)
            memcpy(out + i * ldo, table + t * ldt, (size_t)nc * sizeof(float));
    }
}

/* the same from bf16 rows, widened (exact) */
void nnt_cpu_embedding_gather_bf16(int64_t ntok, int64_t nc, const int32_t *tok, int64_t v0,
                                   int64_t nv, const uint16_t *table, int64_t ldt, float *out,
                                   int64_t ldo)
{
    for (int64_t i = 0; i < ntok; i++) {
        int64_t t = (int64_t)tok[i] - v0;
        if (t >= 0 && t < nv)
            nnt_cpu_bf16_to_f32(nc, table + t * ldt, out + i * ldo);
    }
}

/* dtable row tok[i] - v0 += dout row i, i increasing (deterministic) */
void nnt_cpu_embedding_scatter_add_f32(int64_t ntok, int64_t nc, const int32_t *tok,
                                       int64_t v0, int64_t nv, const float *dout, int64_t ldo,
                                       float *dtable, int64_t ldt)
{
    for (int64_t i = 0; i < ntok; i++) {
        int64_t t = (int64_t)tok[i] - v0;
        if (t < 0 || t >= nv)
            continue;
        const float *restrict src = dout + i * ldo;
        float *restrict dst = dtable + t * ldt;
        for (int64_t c = 0; c < nc; c++)
            dst[c] += src[c];
    }
}
