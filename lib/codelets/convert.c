/* SPDX-License-Identifier: MIT */
/* Codelets: one tile converted between float and bfloat16 (buffer 0 the source tile, read;
 * buffer 1 the destination tile of the other dtype, written; same number of elements), and
 * to or from NF4 (quantized on CPU workers, dequantized on any worker). */
#include "../internal.h"
#include "nnt_cpu.h"

struct convert_args {
    int to_bf16;   /* 1: float -> bf16 (round to nearest even), 0: bf16 -> float (exact) */
};

static void convert_cpu(void *buffers[], void *cl_arg)
{
    const struct convert_args *c = cl_arg;
    int64_t n = nnt_tile_numel(buffers[0]);
    void *src = (void *)STARPU_VECTOR_GET_PTR(buffers[0]);   // (n)
    void *dst = (void *)STARPU_VECTOR_GET_PTR(buffers[1]);   // (n)
    if (c->to_bf16)
        nnt_cpu_f32_to_bf16(n, src, dst);
    else
        nnt_cpu_bf16_to_f32(n, src, dst);
}

#ifdef NNT_CUDA_CODELETS
static void convert_cuda(void *buffers[], void *cl_arg)
{
    const struct convert_args *c = cl_arg;
    int64_t n = nnt_tile_numel(buffers[0]);
    void *src = (void *)STARPU_VECTOR_GET_PTR(buffers[0]);
    void *dst = (void *)STARPU_VECTOR_GET_PTR(buffers[1]);
    cudaStream_t stream = nnt_cuda_task_stream();
    int rc = c->to_bf16 ? nnt_cuda_f32_to_bf16(n, src, dst, stream)
                        : nnt_cuda_bf16_to_f32(n, src, dst, stream);
    if (rc)
        nnt_task_error("nnt_convert", "CUDA kernel failed (%d)", rc);
}
#endif

/* The default footprint (the buffers' sizes in order) tells the two directions apart. */
static struct starpu_perfmodel convert_model = {
    .type = STARPU_HISTORY_BASED,
    .symbol = "nnt_convert",
};

static struct starpu_codelet convert_cl = {
    .name = "nnt_convert",
    .cpu_funcs = {convert_cpu},
#ifdef NNT_CUDA_CODELETS
    .cuda_funcs = {convert_cuda},
    .cuda_flags = {STARPU_CUDA_ASYNC},
#endif
    .nbuffers = STARPU_VARIABLE_NBUFFERS,
    .model = &convert_model,
};

/* ---- NF4 ---------------------------------------------------------------------------------- */

/* n elements: buffer 0 read, buffer 1 written; the NF4 one is its codes (n / 2 bytes) then
 * its blocks' absmax (n / 64 floats), the other floats or bf16. A buffer 2, read, only
 * orders the task after its writer (nnt_insert_convert's after). */
struct nf4_args {
    int bf16;       /* the other tile holds bf16 (else floats) */
    int64_t n;
};

/* Quantizing: CPU only (once, when weights are read or converted). */
static void nf4_quantize_cpu(void *buffers[], void *cl_arg)
{
    const struct nf4_args *c = cl_arg;
    const void *src = (const void *)STARPU_VECTOR_GET_PTR(buffers[0]);   // (n)
    uint8_t *codes = (uint8_t *)STARPU_VECTOR_GET_PTR(buffers[1]);      // (n / 2)
    nnt_cpu_nf4_quantize(c->n, src, c->bf16, codes, nnt_cpu_nf4_absmax(codes, c->n));
}

static void nf4_dequantize_cpu(void *buffers[], void *cl_arg)
{
    const struct nf4_args *c = cl_arg;
    const uint8_t *codes = (const uint8_t *)STARPU_VECTOR_GET_PTR(buffers[0]);   // (n / 2)
    void *dst = (void *)STARPU_VECTOR_GET_PTR(buffers[1]);                         // (n)
    nnt_cpu_nf4_dequantize(c->n, codes, nnt_cpu_nf4_absmax(codes, c->n), dst, c->bf16);
}

#ifdef NNT_CUDA_CODELETS
static void nf4_dequantize_cuda(void *buffers[], void *cl_arg)
{
    const struct nf4_args *c = cl_arg;
    const uint8_t *codes = (const uint8_t *)STARPU_VECTOR_GET_PTR(buffers[0]);   // (n / 2)
    void *dst = (void *)STARPU_VECTOR_GET_PTR(buffers[1]);                         // (n)
    if (nnt_cuda_nf4_dequantize(c->n, codes, nnt_cpu_nf4_absmax(codes, c->n),
                                nnt_cpu_nf4_table(), dst, c->bf16, nnt_cuda_task_stream()))
        nnt_task_error("nnt_nf4", "CUDA kernel failed");
}
#endif

static struct starpu_perfmodel nf4_quantize_model = {
    .type = STARPU_HISTORY_BASED,
    .symbol = "nnt_nf4_quantize",
};

static struct starpu_codelet nf4_quantize_cl = {
    .name = "nnt_nf4_quantize",
    .cpu_funcs = {nf4_quantize_cpu},
    .nbuffers = STARPU_VARIABLE_NBUFFERS,
    .model = &nf4_quantize_model,
};

/* Dequantizing (every product with an NF4 operand of more than 16 rows): on CUDA workers
 * too, so that a GPU's products read NF4 tiles (4.5 bits a weight) moved once and
 * dequantized there. */
static struct starpu_perfmodel nf4_model = {
    .type = STARPU_HISTORY_BASED,
    .symbol = "nnt_nf4",
};

static struct starpu_codelet nf4_cl = {
    .name = "nnt_nf4",
    .cpu_funcs = {nf4_dequantize_cpu},
#ifdef NNT_CUDA_CODELETS
    .cuda_funcs = {nf4_dequantize_cuda},
    .cuda_flags = {STARPU_CUDA_ASYNC},
#endif
    .nbuffers = STARPU_VARIABLE_NBUFFERS,
    .model = &nf4_model,
};

int nnt_insert_convert(nnt_ctx *ctx, nnt_dtype from, nnt_dtype to, int64_t n,
                       starpu_data_handle_t src, starpu_data_handle_t dst,
                       starpu_data_handle_t after)
{
    struct starpu_data_descr bufs[3] = {{src, STARPU_R}, {dst, STARPU_W}, {after, STARPU_R}};
    if (from == NNT_NF4 || to == NNT_NF4) {
        struct nf4_args c = {(to == NNT_NF4 ? from : to) == NNT_BF16, n};
        return nnt_submit(ctx, to == NNT_NF4 ? &nf4_quantize_cl : &nf4_cl, after ? 3 : 2, bufs,
                          &c, sizeof c);
    }
    struct convert_args c = {to == NNT_BF16};
    return nnt_submit(ctx, &convert_cl, 2, bufs, &c, sizeof c);
}

/* buffers: a float tile (n) R, count (1) int32 W: how many of its values bf16 cannot hold.
 * CPU only (run once on a table that is to be kept in bf16). */
static void inexact_cpu(void *buffers[], void *cl_arg)
{
    (void)cl_arg;
    int64_t n = nnt_tile_numel(buffers[0]);
    int64_t count = nnt_cpu_bf16_inexact_f32(n, (const float *)STARPU_VECTOR_GET_PTR(buffers[0]));
    *(int32_t *)STARPU_VECTOR_GET_PTR(buffers[1]) =
        count > INT32_MAX ? INT32_MAX : (int32_t)count;
}

static struct starpu_perfmodel inexact_model = {
    .type = STARPU_HISTORY_BASED,
    .symbol = "nnt_bf16_inexact",
};

static struct starpu_codelet inexact_cl = {
    .name = "nnt_bf16_inexact",
    .cpu_funcs = {inexact_cpu},
    .nbuffers = STARPU_VARIABLE_NBUFFERS,
    .model = &inexact_model,
};

int nnt_insert_bf16_inexact(nnt_ctx *ctx, starpu_data_handle_t src, starpu_data_handle_t count)
{
    struct starpu_data_descr bufs[2] = {{src, STARPU_R}, {count, STARPU_W}};
    return nnt_submit(ctx, &inexact_cl, 2, bufs, NULL, 0);
}
