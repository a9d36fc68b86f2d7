/* SPDX-License-Identifier: MIT */
/* Codelets: one tile converted between float and bfloat16 (buffer 0 the source tile, read;
 * buffer 1 the destination tile of the other dtype, written; same number of elements), and
 * to or from NF4 (quantized or dequantized: CPU only, see nf4_cl). */
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
    int to_nf4;     /* 1: quantize into buffer 1, 0: dequantize buffer 0 */
    int bf16;       /* the other tile holds bf16 (else floats)           */
    int64_t n;
};

static void nf4_cpu(void *buffers[], void *cl_arg)
{
    const struct nf4_args *c = cl_arg;
    void *src = (void *)STARPU_VECTOR_GET_PTR(buffers[0]);
    void *dst = (void *)STARPU_VECTOR_GET_PTR(buffers[1]);
    uint8_t *codes = c->to_nf4 ? dst : src;                           // (n / 2)
    float *absmax = (float *)(void *)(codes + c->n / 2);               // (n / 64)
    if (c->to_nf4)
        nnt_cpu_nf4_quantize(c->n, src, c->bf16, codes, absmax);
    else
        nnt_cpu_nf4_dequantize(c->n, codes, absmax, dst, c->bf16);
}

static struct starpu_perfmodel nf4_model = {
    .type = STARPU_HISTORY_BASED,
    .symbol = "nnt_nf4",
};

/* CPU only: a GPU worker's product reads the dequantized tile the CPU made (StarPU moves
 * it); no CUDA kernel of NF4 exists yet. */
static struct starpu_codelet nf4_cl = {
    .name = "nnt_nf4",
    .cpu_funcs = {nf4_cpu},
    .nbuffers = STARPU_VARIABLE_NBUFFERS,
    .model = &nf4_model,
};

int nnt_insert_convert(nnt_ctx *ctx, nnt_dtype from, nnt_dtype to, int64_t n,
                       starpu_data_handle_t src, starpu_data_handle_t dst,
                       starpu_data_handle_t after)
{
    struct starpu_data_descr bufs[3] = {{src, STARPU_R}, {dst, STARPU_W}, {after, STARPU_R}};
    if (from == NNT_NF4 || to == NNT_NF4) {
        struct nf4_args c = {to == NNT_NF4, (to == NNT_NF4 ? from : to) == NNT_BF16, n};
        return nnt_submit(ctx, &nf4_cl, after ? 3 : 2, bufs, &c, sizeof c);
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
