/* SPDX-License-Identifier: MIT */
/* nnt CUDA kernels: GEMM through cuBLAS / cuBLASLt.
 *
 * Row-major trick: a row-major (r, c) matrix with leading dimension ld is the column-major
 * (c, r) matrix with the same ld, i.e. its transpose. So row-major C = op(A) op(B) is computed
 * as column-major C^T = op(B)^T op(A)^T: pass B first, A second, and swap m and n. */
#include "nnt_cuda.h"
#include "kernel_util.cuh"

#include <limits.h>

namespace {

using namespace nnt_cu;

inline int blas_status(cublasStatus_t s)
{
    return s == CUBLAS_STATUS_SUCCESS ? 0 : -(int)s;
}

/* C = beta C (k == 0: no product to add); beta == 0 writes zeros without reading C. */
__global__ void scale_c_kernel(int64_t m, int64_t n, float beta, float *c, int64_t ldc,
                               int64_t stride_c, int64_t batch)
{
    int64_t per = m * n, total = per * batch;
    for (int64_t t = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; t < total;
         t += (int64_t)gridDim.x * blockDim.x) {
        int64_t bi = t / per, r = t - bi * per;
        int64_t i = r / n, j = r - i * n;
        float *p = c + bi * stride_c + i * ldc + j;
        *p = beta == 0.0f ? 0.0f : beta * *p;
    }
}

/* The cases without a product (k == 0 or alpha == 0). Returns 0 when nothing is left to do
 * (done: bad arguments give -1 or a launch status in *status), 1 when the caller must run
 * the product. */
int gemm_trivial(int64_t m, int64_t n, int64_t k, float alpha, float beta, float *c,
                 int64_t ldc, int64_t stride_c, int64_t batch, cublasHandle_t handle,
                 cudaStream_t stream, int *status)
{
    *status = 0;
    if (m < 0 || n < 0 || k < 0 || batch < 0 || !handle) {
        *status = -1;
        return 0;
    }
    if (m == 0 || n == 0 || batch == 0)
        return 0;
    if (k > 0 && alpha != 0.0f)
        return 1;   /* alpha 0: A and B are not read (NaN in them does not leak), as on the CPU */
    if (beta == 1.0f)
        return 0;
    int64_t total = m * n * batch;
    int64_t blocks = (total + 255) / 256;
    if (blocks > (int64_t)1 << 19)
        blocks = (int64_t)1 << 19;
    scale_c_kernel<<<(unsigned)blocks, 256, 0, stream>>>(m, n, beta, c, ldc, stride_c, batch);
    *status = launch_status();
    return 0;
}

/* C = alpha op(A) op(B) + beta C through cublasGemmStridedBatchedEx: A and B of type ab,
 * C float, the given compute type. Row-major trick (top of the file): the column-major
 * problem (n x k) (k x m) = (n x m), first operand B, second A. */
int gemm_ex(int trans_a, int trans_b, int64_t m, int64_t n, int64_t k, float alpha,
            const void *a, int64_t lda, int64_t stride_a, const void *b, int64_t ldb,
            int64_t stride_b, float beta, float *c, int64_t ldc, int64_t stride_c,
            int64_t batch, cudaDataType_t ab, cublasComputeType_t compute,
            cublasHandle_t handle, cudaStream_t stream)
{
    int status;
    if (!gemm_trivial(m, n, k, alpha, beta, c, ldc, stride_c, batch, handle, stream, &status))
        return status;
    cublasStatus_t st = cublasSetPointerMode(handle, CUBLAS_POINTER_MODE_HOST);
    if (st != CUBLAS_STATUS_SUCCESS)
        return blas_status(st);
    const cublasOperation_t opb = trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
    const cublasOperation_t opa = trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
#if defined(CUBLAS_VER_MAJOR) && CUBLAS_VER_MAJOR >= 12
    st = cublasGemmStridedBatchedEx_64(handle, opb, opa, n, m, k, &alpha, b, ab, ldb, stride_b,
                                       a, ab, lda, stride_a, &beta, c, CUDA_R_32F, ldc, stride_c,
                                       batch, compute, CUBLAS_GEMM_DEFAULT);
#else
    if (m > INT_MAX || n > INT_MAX || k > INT_MAX || lda > INT_MAX || ldb > INT_MAX ||
        ldc > INT_MAX || batch > INT_MAX)
        return -1;
    st = cublasGemmStridedBatchedEx(handle, opb, opa, (int)n, (int)m, (int)k, &alpha, b, ab,
                                    (int)ldb, stride_b, a, ab, (int)lda, stride_a, &beta, c,
                                    CUDA_R_32F, (int)ldc, stride_c, (int)batch, compute,
                                    CUBLAS_GEMM_DEFAULT);
#endif
    (void)stream; /* the handle is bound to the stream by the caller */
    return blas_status(st);
}

__global__ void round_kernel(int64_t n, int drop, const float *x, float *y)
{
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * blockDim.x)
        y[i] = __uint_as_float(round_bits(__float_as_uint(x[i]), drop));
}

__global__ void to_bf16_kernel(int64_t n, const float *x, uint16_t *y)
{
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * blockDim.x)
        y[i] = (uint16_t)(round_bits(__float_as_uint(x[i]), 16) >> 16);
}

__global__ void from_bf16_kernel(int64_t n, const uint16_t *x, float *y)
{
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * blockDim.x)
        y[i] = __uint_as_float((uint32_t)x[i] << 16);
}

unsigned blocks_for(int64_t n)
{
    int64_t blocks = (n + 255) / 256;
    return (unsigned)(blocks > ((int64_t)1 << 16) ? ((int64_t)1 << 16) : blocks);
}

/* Operand type and compute type of a math mode. */
int math_types(int math, cudaDataType_t *ab, cublasComputeType_t *compute)
{
    switch (math) {
    case NNT_CUDA_MATH_F32:
        *ab = CUDA_R_32F;
        *compute = CUBLAS_COMPUTE_32F;
        return 0;
    case NNT_CUDA_MATH_TF32:
        *ab = CUDA_R_32F;
        *compute = CUBLAS_COMPUTE_32F_FAST_TF32;
        return 0;
    case NNT_CUDA_MATH_BF16:
        *ab = CUDA_R_16BF;
        *compute = CUBLAS_COMPUTE_32F;
        return 0;
    default:
        return -1;
    }
}

} /* namespace */

extern "C" int nnt_cuda_gemm(int math, int trans_a, int trans_b, int64_t m, int64_t n,
                             int64_t k, float alpha, const void *a, int64_t lda,
                             int64_t stride_a, const void *b, int64_t ldb, int64_t stride_b,
                             float beta, float *c, int64_t ldc, int64_t stride_c, int64_t batch,
                             cublasHandle_t handle, cudaStream_t stream)
{
    cudaDataType_t ab;
    cublasComputeType_t compute;
    if (math_types(math, &ab, &compute))
        return -1;
    return gemm_ex(trans_a, trans_b, m, n, k, alpha, a, lda, stride_a, b, ldb, stride_b, beta,
                   c, ldc, stride_c, batch, ab, compute, handle, stream);
}

extern "C" int nnt_cuda_gemm_f32(int trans_a, int trans_b, int64_t m, int64_t n, int64_t k,
                                 float alpha, const float *a, int64_t lda, int64_t stride_a,
                                 const float *b, int64_t ldb, int64_t stride_b, float beta,
                                 float *c, int64_t ldc, int64_t stride_c, int64_t batch,
                                 cublasHandle_t handle, cudaStream_t stream)
{
    return nnt_cuda_gemm(NNT_CUDA_MATH_F32, trans_a, trans_b, m, n, k, alpha, a, lda, stride_a,
                         b, ldb, stride_b, beta, c, ldc, stride_c, batch, handle, stream);
}

extern "C" int nnt_cuda_gemm_tf32(int trans_a, int trans_b, int64_t m, int64_t n, int64_t k,
                                  float alpha, const float *a, int64_t lda, int64_t stride_a,
                                  const float *b, int64_t ldb, int64_t stride_b, float beta,
                                  float *c, int64_t ldc, int64_t stride_c, int64_t batch,
                                  cublasHandle_t handle, cudaStream_t stream)
{
    return nnt_cuda_gemm(NNT_CUDA_MATH_TF32, trans_a, trans_b, m, n, k, alpha, a, lda, stride_a,
                         b, ldb, stride_b, beta, c, ldc, stride_c, batch, handle, stream);
}

extern "C" int nnt_cuda_gemm_bf16(int trans_a, int trans_b, int64_t m, int64_t n, int64_t k,
                                  float alpha, const uint16_t *a, int64_t lda, int64_t stride_a,
                                  const uint16_t *b, int64_t ldb, int64_t stride_b, float beta,
                                  float *c, int64_t ldc, int64_t stride_c, int64_t batch,
                                  cublasHandle_t handle, cudaStream_t stream)
{
    return nnt_cuda_gemm(NNT_CUDA_MATH_BF16, trans_a, trans_b, m, n, k, alpha, a, lda, stride_a,
                         b, ldb, stride_b, beta, c, ldc, stride_c, batch, handle, stream);
}

extern "C" int nnt_cuda_round_f32(int64_t n, int bits, const float *x, float *y,
                                  cudaStream_t stream)
{
    if (n < 0 || bits < 1 || bits > 22)
        return -1;
    if (n == 0)
        return 0;
    round_kernel<<<blocks_for(n), 256, 0, stream>>>(n, 23 - bits, x, y);
    return launch_status();
}

extern "C" int nnt_cuda_f32_to_bf16(int64_t n, const float *x, uint16_t *y, cudaStream_t stream)
{
    if (n < 0)
        return -1;
    if (n == 0)
        return 0;
    to_bf16_kernel<<<blocks_for(n), 256, 0, stream>>>(n, x, y);
    return launch_status();
}

namespace {

/* One cuBLASLt matmul, column-major view (top of the file): D (n x m, ld n) =
 * epi(alpha opA(B) opB(A) + beta C [+ bias]) with C == D (the row-major (m, n) c); aux (if
 * any) is the epilogue's auxiliary matrix, leading dimension n (GELU_AUX: written, the
 * pre-activation; DGELU: read). Operands of type ab, float C/D, the given compute type.
 * Returns 0, or 1 when cuBLASLt refuses it in any way (no algorithm, not supported, an
 * attribute it rejects for this combination of types and epilogue): cuBLASLt checks before
 * it launches, so nothing was enqueued and the caller falls back to the unfused path, which
 * reports a real CUDA failure itself.                                                      */
struct lt_problem {
    int trans_a, trans_b;
    int64_t m, n, k;
    float alpha, beta;
    const void *a, *b;
    int64_t lda, ldb;
    cudaDataType_t ab;
    cublasComputeType_t compute;
};

int lt_matmul(cublasLtHandle_t lt, const lt_problem &p, const float *bias, float *d,
              cublasLtEpilogue_t epi, float *aux, void *workspace, size_t workspace_size,
              cudaStream_t stream)
{
    cublasLtMatmulDesc_t op = NULL;
    cublasLtMatrixLayout_t la = NULL, lb = NULL, ld = NULL;
    cublasLtMatmulPreference_t pref = NULL;
    cublasLtMatmulHeuristicResult_t heur;
    int nres = 0, ret = 0;
    cublasStatus_t st;
    const cublasOperation_t opa = p.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N; /* Lt's A is our B */
    const cublasOperation_t opb = p.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N; /* Lt's B is our A */
    const int64_t ldd = p.n;
    uint64_t rows, cols;

#define LT_TRY(call)                                                                            \
    do {                                                                                        \
        st = (call);                                                                            \
        if (st != CUBLAS_STATUS_SUCCESS) {                                                      \
            ret = 1; /* refused (not supported, invalid value for this combination, ...) */     \
            goto done;                                                                          \
        }                                                                                       \
    } while (0)

    LT_TRY(cublasLtMatmulDescCreate(&op, p.compute, CUDA_R_32F));
    LT_TRY(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSA, &opa, sizeof(opa)));
    LT_TRY(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSB, &opb, sizeof(opb)));
    LT_TRY(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof(epi)));
    if (bias)
        LT_TRY(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias,
                                              sizeof(bias)));
    if (aux) {
        LT_TRY(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, &aux,
                                              sizeof(aux)));
        LT_TRY(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, &ldd,
                                              sizeof(ldd)));
    }
    /* stored (pre-op) shapes of the column-major views */
    rows = (uint64_t)(p.trans_b ? p.k : p.n);
    cols = (uint64_t)(p.trans_b ? p.n : p.k);
    LT_TRY(cublasLtMatrixLayoutCreate(&la, p.ab, rows, cols, p.ldb));
    rows = (uint64_t)(p.trans_a ? p.m : p.k);
    cols = (uint64_t)(p.trans_a ? p.k : p.m);
    LT_TRY(cublasLtMatrixLayoutCreate(&lb, p.ab, rows, cols, p.lda));
    LT_TRY(cublasLtMatrixLayoutCreate(&ld, CUDA_R_32F, (uint64_t)p.n, (uint64_t)p.m, ldd));
    LT_TRY(cublasLtMatmulPreferenceCreate(&pref));
    LT_TRY(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                                &workspace_size, sizeof(workspace_size)));
    LT_TRY(cublasLtMatmulAlgoGetHeuristic(lt, op, la, lb, ld, ld, pref, 1, &heur, &nres));
    if (nres < 1) {
        ret = 1;
        goto done;
    }
    LT_TRY(cublasLtMatmul(lt, op, &p.alpha, p.b, la, p.a, lb, &p.beta, d, ld, d, ld, &heur.algo,
                          workspace, workspace_size, stream));
#undef LT_TRY
done:
    if (pref)
        cublasLtMatmulPreferenceDestroy(pref);
    if (ld)
        cublasLtMatrixLayoutDestroy(ld);
    if (lb)
        cublasLtMatrixLayoutDestroy(lb);
    if (la)
        cublasLtMatrixLayoutDestroy(la);
    if (op)
        cublasLtMatmulDescDestroy(op);
    return ret;
}

} /* namespace */

extern "C" int nnt_cuda_gemm_lt(cublasLtHandle_t lt, int math, int epilogue, int trans_a,
                                int trans_b, int64_t m, int64_t n, int64_t k, float alpha,
                                const void *a, int64_t lda, const void *b, int64_t ldb,
                                float beta, float *c, const float *bias, float *aux,
                                void *workspace, size_t workspace_size, cudaStream_t stream)
{
    lt_problem p = {trans_a, trans_b, m, n, k, alpha, beta, a, b, lda, ldb, CUDA_R_32F,
                    CUBLAS_COMPUTE_32F};
    if (!lt || m < 0 || n < 0 || k < 0 || !c || math_types(math, &p.ab, &p.compute))
        return -1;
    if (m == 0 || n == 0 || k == 0 || alpha == 0.0f)
        return 1; /* nothing for cuBLASLt: the plain path handles the trivial cases */
    if (!workspace)
        workspace_size = 0;
    switch (epilogue) {
    case NNT_CUDA_EPI_NONE:
        return lt_matmul(lt, p, NULL, c, CUBLASLT_EPILOGUE_DEFAULT, NULL, workspace,
                         workspace_size, stream);
    case NNT_CUDA_EPI_BIAS:
        return lt_matmul(lt, p, bias, c, bias ? CUBLASLT_EPILOGUE_BIAS : CUBLASLT_EPILOGUE_DEFAULT,
                         NULL, workspace, workspace_size, stream);
    case NNT_CUDA_EPI_BIAS_GELU:
        /* the product must be whole and fresh; EPILOGUE_AUX_LD a multiple of 8 */
        if (!aux || alpha != 1.0f || beta != 0.0f || n % 8 != 0)
            return 1;
        return lt_matmul(lt, p, bias, aux,
                         bias ? CUBLASLT_EPILOGUE_GELU_AUX_BIAS : CUBLASLT_EPILOGUE_GELU_AUX, c,
                         workspace, workspace_size, stream);
    case NNT_CUDA_EPI_DGELU:
        if (!aux || alpha != 1.0f || beta != 0.0f || n % 8 != 0)
            return 1;
        return lt_matmul(lt, p, NULL, c, CUBLASLT_EPILOGUE_DGELU, aux, workspace,
                         workspace_size, stream);
    default:
        return -1;
    }
}

extern "C" int nnt_cuda_bf16_to_f32(int64_t n, const uint16_t *x, float *y, cudaStream_t stream)
{
    if (n < 0)
        return -1;
    if (n == 0)
        return 0;
    from_bf16_kernel<<<blocks_for(n), 256, 0, stream>>>(n, x, y);
    return launch_status();
}
