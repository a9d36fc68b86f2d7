/* SPDX-License-Identifier: MIT */
/* NF4 (4-bit NormalFloat, QLoRA; bitsandbytes' "nf4" with blocksize 64): each block of 64
 * consecutive values keeps its absolute maximum as a float and each value a 4-bit index
 * into a table of 16 values in [-1, 1]. Quantizing scales a block by the reciprocal of its
 * absmax and takes the index of the nearest table value, a value halfway between two going
 * to the lower one (bitsandbytes' CPU quantizer: torch.bucketize on the midpoints);
 * dequantizing multiplies the table value by the absmax in float. Two values a byte, the
 * first in the high half. */
#include "nnt_cpu.h"

#include <math.h>
#include <string.h>

/* The NF4 table as bitsandbytes stores it (float32; the QLoRA paper's normal quantiles). */
static const float nf4_table[16] = {
    -1.0f, -0.6961928009986877f, -0.5250730514526367f, -0.39491748809814453f,
    -0.28444138169288635f, -0.18477343022823334f, -0.09105003625154495f, 0.0f,
    0.07958029955625534f, 0.16093020141124725f, 0.24611230194568634f, 0.33791524171829224f,
    0.44070982933044434f, 0.5626170039176941f, 0.7229568362236023f, 1.0f,
};

const float *nnt_cpu_nf4_table(void)
{
    return nf4_table;
}

/* The index of x (already scaled into [-1, 1]): how many of the 15 midpoints, each the
 * float sum of two neighbours halved, lie strictly below it. */
static unsigned nf4_index(float x)
{
    unsigned q = 0;
    for (int i = 0; i < 15; i++) {
        float mid = (nf4_table[i] + nf4_table[i + 1]) * 0.5f;
        q += x > mid;
    }
    return q;
}

/* One block of NNT_NF4_BLOCK values: its absmax, and its indices packed into 32 bytes. */
static float quantize_block(const float *x, uint8_t *codes)
{
    float absmax = 0.0f;
    for (int i = 0; i < NNT_NF4_BLOCK; i++) {
        float a = fabsf(x[i]);
        absmax = a > absmax ? a : absmax;
    }
    /* bitsandbytes: x * (1 / max(absmax, 1e-38)), clamped to [-1, 1] */
    const float inv = 1.0f / (absmax > 1e-38f ? absmax : 1e-38f);
    for (int i = 0; i < NNT_NF4_BLOCK; i += 2) {
        float s0 = x[i] * inv, s1 = x[i + 1] * inv;
        s0 = s0 < -1.0f ? -1.0f : s0 > 1.0f ? 1.0f : s0;
        s1 = s1 < -1.0f ? -1.0f : s1 > 1.0f ? 1.0f : s1;
        codes[i / 2] = (uint8_t)(nf4_index(s0) << 4 | nf4_index(s1));
    }
    return absmax;
}

void nnt_cpu_nf4_quantize(int64_t n, const void *x, int x_bf16, uint8_t *codes, float *absmax)
{
    float block[NNT_NF4_BLOCK];
    for (int64_t b = 0; b < n / NNT_NF4_BLOCK; b++) {
        const float *src = block;
        if (x_bf16)
            nnt_cpu_bf16_to_f32(NNT_NF4_BLOCK, (const uint16_t *)x + b * NNT_NF4_BLOCK, block);
        else
            src = (const float *)x + b * NNT_NF4_BLOCK;
        absmax[b] = quantize_block(src, codes + b * (NNT_NF4_BLOCK / 2));
    }
}

void nnt_cpu_nf4_dequantize(int64_t n, const uint8_t *codes, const float *absmax, void *y,
                            int y_bf16)
{
    for (int64_t b = 0; b < n / NNT_NF4_BLOCK; b++) {
        float v[16];
        for (int i = 0; i < 16; i++)
            v[i] = nf4_table[i] * absmax[b];
        const uint8_t *c = codes + b * (NNT_NF4_BLOCK / 2);
        if (y_bf16) {
            uint16_t h[16];
            nnt_cpu_f32_to_bf16(16, v, h);
            uint16_t *out = (uint16_t *)y + b * NNT_NF4_BLOCK;
            for (int i = 0; i < NNT_NF4_BLOCK / 2; i++) {
                out[2 * i] = h[c[i] >> 4];
                out[2 * i + 1] = h[c[i] & 15];
            }
        } else {
            float *out = (float *)y + b * NNT_NF4_BLOCK;
            for (int i = 0; i < NNT_NF4_BLOCK / 2; i++) {
                out[2 * i] = v[c[i] >> 4];
                out[2 * i + 1] = v[c[i] & 15];
            }
        }
    }
}
