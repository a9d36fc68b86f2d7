/* SPDX-License-Identifier: MIT */
/* Codelets of the broadcast add and the reductions, one task per tile (pair):
 *   add_bcast: y (outer, inner) += x (inner)
 *   sum_outer: y (inner) = [beta y +] column sums of x (outer, inner)   (accumulates)
 *   sumsq:     acc (1) = sum of squares of x (n)
 * and DoRA's per-feature products (x, y, z (outer, inner); h per column or per row):
 *   mul_bcast: z = x (h + c) [+ z]
 *   dot_cols:  acc (inner) = [beta acc +] (h) column sums of x y        (accumulates)
 *   dot_rows:  acc (outer) = [beta acc +] row sums of x y, fp32 or bf16  (accumulates);
 *              of x x, NF4 (dot_rows_nf4, CPU only)
 *   rsqrt_mul: out = (m or 1) / sqrt(n2)
 * outer and inner come from the buffer sizes (inner = size of the (inner) buffer). */
#include "../internal.h"
#include "nnt_cpu.h"

/* The first task of an accumulated tile (sum_outer's y, dot_cols' and dot_rows' acc)
 * applies beta (0: it is written, not read); later tasks only accumulate. */
struct acc_args {
    int first;
    float beta;
    int bf16, has_h;   /* dot_rows: bf16 operands; dot_cols: a factor h */
};

/* ---- CPU ------------------------------------------------------------------------------ */

/* The first task of an accumulated tile applies beta to acc (n): zeroes it (0) or scales it */
static void begin_acc_cpu(int first, float beta, int64_t n, float *acc)
{
    if (first && beta == 0.0f)
        nnt_cpu_fill_f32(n, 0.0f, acc);
    else if (first && beta != 1.0f)
        nnt_cpu_scale_f32(n, beta, acc);
}

/* buffers: x (inner) R, y (outer, inner) RW */
static void add_bcast_cpu(void *buffers[], void *cl_arg)
{
    (void)cl_arg;
    int64_t inner = nnt_tile_numel(buffers[0]);
    int64_t outer = nnt_tile_numel(buffers[1]) / inner;
    nnt_cpu_add_bcast_f32(outer, inner, nnt_tile_f32(buffers[0]), nnt_tile_f32(buffers[1]), inner);
}

/* buffers: x (outer, inner) R, y (inner) W (first task, beta == 0) or RW */
static void sum_outer_cpu(void *buffers[], void *cl_arg)
{
    const struct acc_args *a = cl_arg;
    int64_t inner = nnt_tile_numel(buffers[1]);
    int64_t outer = nnt_tile_numel(buffers[0]) / inner;
    float *y = nnt_tile_f32(buffers[1]);   // (inner)
    begin_acc_cpu(a->first, a->beta, inner, y);
    nnt_cpu_sum_outer_f32(outer, inner, nnt_tile_f32(buffers[0]), inner, y);
}

/* buffers: x (n) R, acc (1, a StarPU variable) W */
static void sumsq_cpu(void *buffers[], void *cl_arg)
{
    (void)cl_arg;
    float *acc = (float *)STARPU_VARIABLE_GET_PTR(buffers[1]);
    *acc = 0.0f;
    nnt_cpu_sumsq_f32(nnt_tile_numel(buffers[0]), nnt_tile_f32(buffers[0]), acc);
}


struct mul_bcast_args {
    float c;
    int by_row, accumulate, in_place;
};


/* buffers: x R, h R, z W / RW (in place: h R, z RW) */
static void mul_bcast_cpu(void *buffers[], void *cl_arg)
{
    const struct mul_bcast_args *a = cl_arg;
    int zi = a->in_place ? 1 : 2, hi = a->in_place ? 0 : 1;
    float *z = nnt_tile_f32(buffers[zi]);
    const float *x = a->in_place ? z : nnt_tile_f32(buffers[0]);
    int64_t n = nnt_tile_numel(buffers[zi]), nh = nnt_tile_numel(buffers[hi]);
    int64_t outer = a->by_row ? nh : n / nh;
    nnt_cpu_mul_bcast_f32(outer, n / outer, x, nnt_tile_f32(buffers[hi]), a->c, a->by_row,
                          a->accumulate, z);
}

/* buffers: x R, y R, [h R,] acc (inner) W / RW */
static void dot_cols_cpu(void *buffers[], void *cl_arg)
{
    const struct acc_args *a = cl_arg;
    void *acc_buf = buffers[a->has_h ? 3 : 2];
    int64_t inner = nnt_tile_numel(acc_buf), outer = nnt_tile_numel(buffers[0]) / inner;
    float *acc = nnt_tile_f32(acc_buf);
    begin_acc_cpu(a->first, a->beta, inner, acc);
    nnt_cpu_dot_cols_f32(outer, inner, nnt_tile_f32(buffers[0]), nnt_tile_f32(buffers[1]),
                         a->has_h ? nnt_tile_f32(buffers[2]) : NULL, acc);
}

/* buffers: x R, y R, acc (outer) W / RW */
static void dot_rows_cpu(void *buffers[], void *cl_arg)
{
    const struct acc_args *a = cl_arg;
    int64_t outer = nnt_tile_numel(buffers[2]), inner = nnt_tile_numel(buffers[0]) / outer;
    float *acc = nnt_tile_f32(buffers[2]);
    begin_acc_cpu(a->first, a->beta, outer, acc);
    if (a->bf16)
        nnt_cpu_dot_rows_bf16(outer, inner, (const uint16_t *)STARPU_VECTOR_GET_PTR(buffers[0]),
                              (const uint16_t *)STARPU_VECTOR_GET_PTR(buffers[1]), acc);
    else
        nnt_cpu_dot_rows_f32(outer, inner, nnt_tile_f32(buffers[0]), nnt_tile_f32(buffers[1]),
                             acc);
}

/* buffers: x (an NF4 tile: codes, then absmax) R, acc (outer) W / RW: acc += the squares of
 * x's rows */
static void dot_rows_nf4_cpu(void *buffers[], void *cl_arg)
{
    const struct acc_args *a = cl_arg;
    int64_t outer = nnt_tile_numel(buffers[1]);
    int64_t n = nnt_cpu_nf4_values(nnt_tile_numel(buffers[0]));
    const uint8_t *codes = (const uint8_t *)STARPU_VECTOR_GET_PTR(buffers[0]);
    float *acc = nnt_tile_f32(buffers[1]);
    begin_acc_cpu(a->first, a->beta, outer, acc);
    nnt_cpu_nf4_sumsq_rows(outer, n / outer, codes, nnt_cpu_nf4_absmax(codes, n), acc);
}

/* buffers: [m R,] n2 R, out W; cl_arg: has m */
static void rsqrt_mul_cpu(void *buffers[], void *cl_arg)
{
    int has_m = *(const int *)cl_arg;
    nnt_cpu_rsqrt_mul_f32(nnt_tile_numel(buffers[has_m]), has_m ? nnt_tile_f32(buffers[0]) : NULL,
                          nnt_tile_f32(buffers[has_m]), nnt_tile_f32(buffers[has_m + 1]));
}

/* ---- CUDA ----------------------------------------------------------------------------- */

#ifdef NNT_CUDA_CODELETS
static int begin_acc_cuda(int first, float beta, int64_t n, float *acc, cudaStream_t stream)
{
    if (first && beta == 0.0f)
        return nnt_cuda_fill_f32(n, 0.0f, acc, stream);
    if (first && beta != 1.0f)
        return nnt_cuda_scale_f32(n, beta, acc, stream);
    return 0;
}

static void add_bcast_cuda(void *buffers[], void *cl_arg)
{
    (void)cl_arg;
    int64_t inner = nnt_tile_numel(buffers[0]);
    int64_t outer = nnt_tile_numel(buffers[1]) / inner;
    int rc = nnt_cuda_add_bcast_f32(outer, inner, nnt_tile_f32(buffers[0]), nnt_tile_f32(buffers[1]),
                                    inner, nnt_cuda_task_stream());
    if (rc)
        nnt_task_error("nnt_add_bcast", "CUDA kernel failed (%d)", rc);
}

static void sum_outer_cuda(void *buffers[], void *cl_arg)
{
    const struct acc_args *a = cl_arg;
    cudaStream_t stream = nnt_cuda_task_stream();
    int64_t inner = nnt_tile_numel(buffers[1]);
    int64_t outer = nnt_tile_numel(buffers[0]) / inner;
    float *y = nnt_tile_f32(buffers[1]);
    int rc = begin_acc_cuda(a->first, a->beta, inner, y, stream);
    if (rc == 0)
        rc = nnt_cuda_sum_outer_f32(outer, inner, nnt_tile_f32(buffers[0]), inner, y, stream);
    if (rc)
        nnt_task_error("nnt_sum_outer", "CUDA kernel failed (%d)", rc);
}

static void sumsq_cuda(void *buffers[], void *cl_arg)
{
    (void)cl_arg;
    cudaStream_t stream = nnt_cuda_task_stream();
    float *acc = (float *)STARPU_VARIABLE_GET_PTR(buffers[1]);
    /* the partial sums in the worker's scratch (stream-ordered: no earlier task still uses
     * it); without scratch memory, one block does the whole tile */
    double *partials = nnt_worker_scratch(NNT_CUDA_SUMSQ_PARTIALS * sizeof(double));
    int rc = nnt_cuda_fill_f32(1, 0.0f, acc, stream);
    if (rc == 0)
        rc = nnt_cuda_sumsq_f32(nnt_tile_numel(buffers[0]), nnt_tile_f32(buffers[0]), acc,
                                partials, stream);
    if (rc)
        nnt_task_error("nnt_sumsq", "CUDA kernel failed (%d)", rc);
}
static void mul_bcast_cuda(void *buffers[], void *cl_arg)
{
    const struct mul_bcast_args *a = cl_arg;
    int zi = a->in_place ? 1 : 2, hi = a->in_place ? 0 : 1;
    float *z = nnt_tile_f32(buffers[zi]);
    const float *x = a->in_place ? z : nnt_tile_f32(buffers[0]);
    int64_t n = nnt_tile_numel(buffers[zi]), nh = nnt_tile_numel(buffers[hi]);
    int64_t outer = a->by_row ? nh : n / nh;
    int rc = nnt_cuda_mul_bcast_f32(outer, n / outer, x, nnt_tile_f32(buffers[hi]), a->c,
                                    a->by_row, a->accumulate, z, nnt_cuda_task_stream());
    if (rc)
        nnt_task_error("nnt_mul_bcast", "CUDA kernel failed (%d)", rc);
}

static void dot_cols_cuda(void *buffers[], void *cl_arg)
{
    const struct acc_args *a = cl_arg;
    cudaStream_t stream = nnt_cuda_task_stream();
    void *acc_buf = buffers[a->has_h ? 3 : 2];
    int64_t inner = nnt_tile_numel(acc_buf), outer = nnt_tile_numel(buffers[0]) / inner;
    float *acc = nnt_tile_f32(acc_buf);
    int rc = begin_acc_cuda(a->first, a->beta, inner, acc, stream);
    if (rc == 0)
        rc = nnt_cuda_dot_cols_f32(outer, inner, nnt_tile_f32(buffers[0]),
                                   nnt_tile_f32(buffers[1]),
                                   a->has_h ? nnt_tile_f32(buffers[2]) : NULL, acc, stream);
    if (rc)
        nnt_task_error("nnt_dot_cols", "CUDA kernel failed (%d)", rc);
}

static void dot_rows_cuda(void *buffers[], void *cl_arg)
{
    const struct acc_args *a = cl_arg;
    cudaStream_t stream = nnt_cuda_task_stream();
    int64_t outer = nnt_tile_numel(buffers[2]), inner = nnt_tile_numel(buffers[0]) / outer;
    float *acc = nnt_tile_f32(buffers[2]);
    int rc = begin_acc_cuda(a->first, a->beta, outer, acc, stream);
    if (rc == 0)
        rc = nnt_cuda_dot_rows(a->bf16, outer, inner, (void *)STARPU_VECTOR_GET_PTR(buffers[0]),
                               (void *)STARPU_VECTOR_GET_PTR(buffers[1]), acc, stream);
    if (rc)
        nnt_task_error("nnt_dot_rows", "CUDA kernel failed (%d)", rc);
}

static void rsqrt_mul_cuda(void *buffers[], void *cl_arg)
{
    int has_m = *(const int *)cl_arg;
    int rc = nnt_cuda_rsqrt_mul_f32(nnt_tile_numel(buffers[has_m]),
                                    has_m ? nnt_tile_f32(buffers[0]) : NULL,
                                    nnt_tile_f32(buffers[has_m]),
                                    nnt_tile_f32(buffers[has_m + 1]), nnt_cuda_task_stream());
    if (rc)
        nnt_task_error("nnt_rsqrt_mul", "CUDA kernel failed (%d)", rc);
}
#define NNT_CUDA_FUNCS(f) .cuda_funcs = {f}, .cuda_flags = {STARPU_CUDA_ASYNC},
#else
#define NNT_CUDA_FUNCS(f)
#endif

/* ---- codelets ------------------------------------------------------------------------- */

/* The first task of an accumulated tile also zeroes or scales it: hash that with the
 * sizes. */
static uint32_t acc_footprint(struct starpu_task *task)
{
    const struct acc_args *a = task->cl_arg;
    uint32_t kind = a->first ? (a->beta == 0.0f ? 1u : a->beta == 1.0f ? 0u : 2u) : 0u;
    uint32_t h = 0;
    for (unsigned i = 0; i < STARPU_TASK_GET_NBUFFERS(task); i++)
        h = starpu_hash_crc32c_be(
            (uint32_t)starpu_vector_get_nx(STARPU_TASK_GET_HANDLE(task, i)), h);
    return starpu_hash_crc32c_be(kind, h);
}

static struct starpu_perfmodel add_bcast_model = {
    .type = STARPU_HISTORY_BASED, .symbol = "nnt_add_bcast"};
static struct starpu_perfmodel sum_outer_model = {
    .type = STARPU_HISTORY_BASED, .symbol = "nnt_sum_outer", .footprint = acc_footprint};
static struct starpu_perfmodel sumsq_model = {
    .type = STARPU_HISTORY_BASED, .symbol = "nnt_sumsq"};

static struct starpu_codelet add_bcast_cl = {
    .name = "nnt_add_bcast",
    .cpu_funcs = {add_bcast_cpu},
    NNT_CUDA_FUNCS(add_bcast_cuda)
    .nbuffers = STARPU_VARIABLE_NBUFFERS,
    .model = &add_bcast_model,
};

static struct starpu_codelet sum_outer_cl = {
    .name = "nnt_sum_outer",
    .cpu_funcs = {sum_outer_cpu},
    NNT_CUDA_FUNCS(sum_outer_cuda)
    .nbuffers = STARPU_VARIABLE_NBUFFERS,
    .model = &sum_outer_model,
};

static struct starpu_codelet sumsq_cl = {
    .name = "nnt_sumsq",
    .cpu_funcs = {sumsq_cpu},
    NNT_CUDA_FUNCS(sumsq_cuda)
    .nbuffers = STARPU_VARIABLE_NBUFFERS,
    .model = &sumsq_model,
};


static struct starpu_perfmodel mul_bcast_model = {
    .type = STARPU_HISTORY_BASED, .symbol = "nnt_mul_bcast"};
static struct starpu_perfmodel dot_cols_model = {
    .type = STARPU_HISTORY_BASED, .symbol = "nnt_dot_cols", .footprint = acc_footprint};
static struct starpu_perfmodel dot_rows_model = {
    .type = STARPU_HISTORY_BASED, .symbol = "nnt_dot_rows", .footprint = acc_footprint};
static struct starpu_perfmodel dot_rows_nf4_model = {
    .type = STARPU_HISTORY_BASED, .symbol = "nnt_dot_rows_nf4", .footprint = acc_footprint};
static struct starpu_perfmodel rsqrt_mul_model = {
    .type = STARPU_HISTORY_BASED, .symbol = "nnt_rsqrt_mul"};

static struct starpu_codelet mul_bcast_cl = {
    .name = "nnt_mul_bcast",
    .cpu_funcs = {mul_bcast_cpu},
    NNT_CUDA_FUNCS(mul_bcast_cuda)
    .nbuffers = STARPU_VARIABLE_NBUFFERS,
    .model = &mul_bcast_model,
};

static struct starpu_codelet dot_cols_cl = {
    .name = "nnt_dot_cols",
    .cpu_funcs = {dot_cols_cpu},
    NNT_CUDA_FUNCS(dot_cols_cuda)
    .nbuffers = STARPU_VARIABLE_NBUFFERS,
    .model = &dot_cols_model,
};

static struct starpu_codelet dot_rows_cl = {
    .name = "nnt_dot_rows",
    .cpu_funcs = {dot_rows_cpu},
    NNT_CUDA_FUNCS(dot_rows_cuda)
    .nbuffers = STARPU_VARIABLE_NBUFFERS,
    .model = &dot_rows_model,
};

/* CPU only, as NF4's products (lib/codelets/gemm.c) */
static struct starpu_codelet dot_rows_nf4_cl = {
    .name = "nnt_dot_rows_nf4",
    .cpu_funcs = {dot_rows_nf4_cpu},
    .nbuffers = STARPU_VARIABLE_NBUFFERS,
    .model = &dot_rows_nf4_model,
};

static struct starpu_codelet rsqrt_mul_cl = {
    .name = "nnt_rsqrt_mul",
    .cpu_funcs = {rsqrt_mul_cpu},
    NNT_CUDA_FUNCS(rsqrt_mul_cuda)
    .nbuffers = STARPU_VARIABLE_NBUFFERS,
    .model = &rsqrt_mul_model,
};

/* ---- submission ----------------------------------------------------------------------- */

static const char no_args;   /* add_bcast and sumsq take no arguments */

/* An accumulated tile's access: only written by a first task with beta 0 */
static enum starpu_data_access_mode acc_mode(int first, float beta)
{
    return first && beta == 0.0f ? STARPU_W : STARPU_RW;
}

/* y (outer, inner) += x (inner) broadcast over the rows of the y tile */
int nnt_insert_add_bcast(nnt_ctx *ctx, starpu_data_handle_t x, starpu_data_handle_t y)
{
    struct starpu_data_descr bufs[2] = {{x, STARPU_R}, {y, STARPU_RW}};
    return nnt_submit(ctx, &add_bcast_cl, 2, bufs, &no_args, 0);
}

/* y (inner) += column sums of x (outer, inner); first: y = beta y before (beta == 0: y is
 * only written) */
int nnt_insert_sum_outer(nnt_ctx *ctx, starpu_data_handle_t x, starpu_data_handle_t y,
                         int first, float beta)
{
    struct acc_args args = {first, beta, 0, 0};
    struct starpu_data_descr bufs[2] = {{x, STARPU_R}, {y, acc_mode(first, beta)}};
    return nnt_submit(ctx, &sum_outer_cl, 2, bufs, &args, sizeof args);
}

/* acc (a one-float StarPU variable) = sum of squares of x (n), accumulated in double */
int nnt_insert_sumsq(nnt_ctx *ctx, starpu_data_handle_t x, starpu_data_handle_t acc)
{
    struct starpu_data_descr bufs[2] = {{x, STARPU_R}, {acc, STARPU_W}};
    return nnt_submit(ctx, &sumsq_cl, 2, bufs, &no_args, 0);
}

/* z = x (h + c) [+ z] per column of h (by_row: per row); x == z: in place */
int nnt_insert_mul_bcast(nnt_ctx *ctx, starpu_data_handle_t x, starpu_data_handle_t h, float c,
                         int by_row, int accumulate, starpu_data_handle_t z)
{
    struct mul_bcast_args args = {c, by_row, accumulate, x == z};
    if (x == z) {
        struct starpu_data_descr bufs[2] = {{h, STARPU_R}, {z, STARPU_RW}};
        return nnt_submit(ctx, &mul_bcast_cl, 2, bufs, &args, sizeof args);
    }
    struct starpu_data_descr bufs[3] = {{x, STARPU_R}, {h, STARPU_R},
                                        {z, accumulate ? STARPU_RW : STARPU_W}};
    return nnt_submit(ctx, &mul_bcast_cl, 3, bufs, &args, sizeof args);
}

/* acc (inner) += (h) column sums of x y (outer, inner); first: acc = beta acc before */
int nnt_insert_dot_cols(nnt_ctx *ctx, starpu_data_handle_t x, starpu_data_handle_t y,
                        starpu_data_handle_t h, starpu_data_handle_t acc, int first, float beta)
{
    struct acc_args args = {first, beta, 0, h != NULL};
    struct starpu_data_descr bufs[4] = {{x, STARPU_R}, {y, STARPU_R}, {h, STARPU_R},
                                        {acc, acc_mode(first, beta)}};
    if (!h)
        bufs[2] = bufs[3];
    return nnt_submit(ctx, &dot_cols_cl, h ? 4 : 3, bufs, &args, sizeof args);
}

/* acc (outer) += row sums of x y (outer, inner), bf16 or fp32; first: acc = beta acc before */
int nnt_insert_dot_rows(nnt_ctx *ctx, int bf16, starpu_data_handle_t x, starpu_data_handle_t y,
                        starpu_data_handle_t acc, int first, float beta)
{
    struct acc_args args = {first, beta, bf16, 0};
    struct starpu_data_descr bufs[3] = {{x, STARPU_R}, {y, STARPU_R}, {acc, acc_mode(first, beta)}};
    return nnt_submit(ctx, &dot_rows_cl, 3, bufs, &args, sizeof args);
}

/* acc (outer) += the sums of squares of the rows of an NF4 tile x (outer, inner); first:
 * acc = beta acc before */
int nnt_insert_dot_rows_nf4(nnt_ctx *ctx, starpu_data_handle_t x, starpu_data_handle_t acc,
                            int first, float beta)
{
    struct acc_args args = {first, beta, 0, 0};
    struct starpu_data_descr bufs[2] = {{x, STARPU_R}, {acc, acc_mode(first, beta)}};
    return nnt_submit(ctx, &dot_rows_nf4_cl, 2, bufs, &args, sizeof args);
}

/* out = (m, or 1 when NULL) / sqrt(n2) */
int nnt_insert_rsqrt_mul(nnt_ctx *ctx, starpu_data_handle_t m, starpu_data_handle_t n2,
                         starpu_data_handle_t out)
{
    int has_m = m != NULL;
    struct starpu_data_descr bufs[3] = {{m, STARPU_R}, {n2, STARPU_R}, {out, STARPU_W}};
    return nnt_submit(ctx, &rsqrt_mul_cl, has_m ? 3 : 2, has_m ? bufs : bufs + 1, &has_m,
                      sizeof has_m);
}
