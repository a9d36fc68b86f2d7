/* SPDX-License-Identifier: MIT */
/* MXFP4 (OCP microscaling FP4): blocks of 32 e2m1 values sharing one power-of-two scale, the
 * form of gpt-oss's original expert weights. Decoding is exact in fp32: every value is a
 * code of {0, .5, 1, 1.5, 2, 3, 4, 6} times 2^(scale - 127), scale a byte, as transformers
 * decodes it (ldexp), which the OCP specification's NaN scale 0xFF makes an infinity or 0
 * here too; values below fp32's normal range are subnormal, as there. */
#include "io.h"

#include <math.h>

/* e2m1 codes 0..15: bit 3 the sign, then 2 exponent bits and 1 mantissa bit */
static const float FP4_VALUES[16] = {+0.0f, +0.5f, +1.0f, +1.5f, +2.0f, +3.0f, +4.0f, +6.0f,
                                     -0.0f, -0.5f, -1.0f, -1.5f, -2.0f, -3.0f, -4.0f, -6.0f};

void nnt_mxfp4_decode(const uint8_t *blocks, const uint8_t *scales, int64_t rows, int64_t cols,
                      float *out)
{
    int64_t nblocks = cols / 32;
    for (int64_t r = 0; r < rows; r++)
        for (int64_t b = 0; b < nblocks; b++) {
            const uint8_t *in = blocks + (r * nblocks + b) * 16;
            int e = (int)scales[r * nblocks + b] - 127;
            float *o = out + r * cols + b * 32;
            for (int j = 0; j < 16; j++) {
                o[2 * j] = ldexpf(FP4_VALUES[in[j] & 15], e);
                o[2 * j + 1] = ldexpf(FP4_VALUES[in[j] >> 4], e);
            }
        }
}
