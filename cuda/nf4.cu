/* SPDX-License-Identifier: MIT */
/* nnt CUDA kernels: NF4 (4-bit NormalFloat, bitsandbytes' "nf4", blocks of 64) dequantized,
 * the twin of nnt_cpu_nf4_dequantize (cpu/nf4.c): a value is its table value times its
 * block's absmax in float (one rounding), to bfloat16 that float rounded to nearest even.
 * The same operations in the same order: the same bits. Quantizing stays on the CPU (once,
 * when weights are read). */
#include "nnt_cuda.h"
#include "kernel_util.cuh"

namespace {

using namespace nnt_cu;

const int64_t kBlock = 64;   /* NNT_NF4_BLOCK: values a block, one absmax each */

/* The 16 table values, passed by value (the CPU's table: nnt_cpu_nf4_table). */
struct nf4_table {
    float v[16];
};

/* Thread i: byte i of the codes, values 2i (its high half) and 2i + 1 (its low half). */
template <int Bf16>
__global__ void dequantize_kernel(int64_t bytes, const uint8_t *codes, const float *absmax,
                                  nf4_table table, void *y)
{
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < bytes;
         i += (int64_t)gridDim.x * blockDim.x) {
        const uint8_t c = codes[i];
        const float a = absmax[(2 * i) / kBlock];
        const float hi = __fmul_rn(table.v[c >> 4], a), lo = __fmul_rn(table.v[c & 15], a);
        if (Bf16) {
            uint16_t *o = (uint16_t *)y;
            o[2 * i] = (uint16_t)(round_bits(__float_as_uint(hi), 16) >> 16);
            o[2 * i + 1] = (uint16_t)(round_bits(__float_as_uint(lo), 16) >> 16);
        } else {
            float *o = (float *)y;
            o[2 * i] = hi;
            o[2 * i + 1] = lo;
        }
    }
}

} /* namespace */

extern "C" int nnt_cuda_nf4_dequantize(int64_t n, const uint8_t *codes, const float *absmax,
                                       const float *table, void *y, int y_bf16,
                                       cudaStream_t stream)
{
    if (n < 0 || n % kBlock || !table)
        return -1;
    if (n == 0)
        return 0;
    nf4_table t;
    for (int i = 0; i < 16; i++)
        t.v[i] = table[i];
    const int64_t bytes = n / 2;
    if (y_bf16)
        dequantize_kernel<1><<<grid_for(bytes), kThreads, 0, stream>>>(bytes, codes, absmax, t, y);
    else
        dequantize_kernel<0><<<grid_for(bytes), kThreads, 0, stream>>>(bytes, codes, absmax, t, y);
    return launch_status();
}
