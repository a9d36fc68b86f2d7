/* nnt CPU kernels: softmax cross-entropy with the vocabulary split over blocks. */
#include "nnt_cpu.h"

#include <math.h>

#if NNT_CPU_X86
#include "simd_avx2.h"

/* max of x[0..nv), nv >= 1 */
static NNT_AVX2 float row_max_avx2(int64_t nv, const float *restrict x)
{
    float bm = x[0];
    int64_t j = 0;
    if (nv >= 8) {
        __m256 vm = _mm256_loadu_ps(x);
        for (j = 8; j + 8 <= nv; j += 8)
            vm = _mm256_max_ps(vm, _mm256_loadu_ps(x + j));
        __m128 h = _mm_max_ps(_mm256_castps256_ps128(vm), _mm256_extractf128_ps(vm, 1));
        h = _mm_max_ps(h, _mm_movehl_ps(h, h));
        h = _mm_max_ss(h, _mm_movehdup_ps(h));
        bm = _mm_cvtss_f32(h);
    }
    for (; j < nv; j++)
        bm = x[j] > bm ? x[j] : bm;
    return bm;
}

/* sum of exp(x[j] - mx), 16 partial sums (more accurate than the portable loop's one) */
static NNT_AVX2 float row_sumexp_avx2(int64_t nv, const float *restrict x, float mx)
{
    const __m256 vmx = _mm256_set1_ps(mx);
    __m256 s0 = _mm256_setzero_ps(), s1 = _mm256_setzero_ps();
    int64_t j = 0;
    for (; j + 16 <= nv; j += 16) {
        s0 = _mm256_add_ps(s0, nnt_avx2_exp(_mm256_sub_ps(_mm256_loadu_ps(x + j), vmx)));
        s1 = _mm256_add_ps(s1, nnt_avx2_exp(_mm256_sub_ps(_mm256_loadu_ps(x + j + 8), vmx)));
    }
    for (; j + 8 <= nv; j += 8)
        s0 = _mm256_add_ps(s0, nnt_avx2_exp(_mm256_sub_ps(_mm256_loadu_ps(x + j), vmx)));
    if (j < nv) { /* the tail through the same exp, so an element's value never depends on nv */
        __m256i mask = nnt_avx2_tail_mask(nv - j);
        __m256 e = nnt_avx2_exp(_mm256_sub_ps(_mm256_maskload_ps(x + j, mask), vmx));
        s1 = _mm256_add_ps(s1, _mm256_and_ps(e, _mm256_castsi256_ps(mask)));
    }
    return nnt_avx2_hsum(_mm256_add_ps(s0, s1));
}

/* dx[j] = c exp(x[j] - mx); dx may be x */
static NNT_AVX2 void row_scaled_exp_avx2(int64_t nv, const float *x, float mx, float c,
                                         float *dx)
{
    const __m256 vmx = _mm256_set1_ps(mx), vc = _mm256_set1_ps(c);
    int64_t j = 0;
    for (; j + 8 <= nv; j += 8)
        _mm256_storeu_ps(dx + j, _mm256_mul_ps(vc, nnt_avx2_exp(_mm256_sub_ps(
                                                       _mm256_loadu_ps(x + j), vmx))));
    if (j < nv) {
        __m256i mask = nnt_avx2_tail_mask(nv - j);
        __m256 e = nnt_avx2_exp(_mm256_sub_ps(_mm256_maskload_ps(x + j, mask), vmx));
        _mm256_maskstore_ps(dx + j, mask, _mm256_mul_ps(vc, e));
    }
}
#endif

static float row_max(int64_t nv, const float *restrict x)
{
#if NNT_CPU_X86
    if (nnt_cpu_isa() == NNT_CPU_ISA_AVX2)
        return row_max_avx2(nv, x);
#endif
    float bm = x[0];
    for (int64_t j = 1; j < nv; j++)
        bm = x[j] > bm ? x[j] : bm;
    return bm;
}

static float row_sumexp(int64_t nv, const float *restrict x, float mx)
{
#if NNT_CPU_X86
    if (nnt_cpu_isa() == NNT_CPU_ISA_AVX2)
        return row_sumexp_avx2(nv, x, mx);
#endif
    float sum = 0.0f;
    for (int64_t j = 0; j < nv; j++)
        sum += expf(x[j] - mx);
    return sum;
}

static void row_scaled_exp(int64_t nv, const float *x, float mx, float c, float *dx)
{
#if NNT_CPU_X86
    if (nnt_cpu_isa() == NNT_CPU_ISA_AVX2) {
        row_scaled_exp_avx2(nv, x, mx, c, dx);
        return;
    }
#endif
    for (int64_t j = 0; j < nv; j++)
        dx[j] = c * expf(x[j] - mx);
}

/* logits (rows, nv; leading dim ld) hold vocabulary ids [v0, v0 + nv).
 * Online logsumexp: m = max(m, block max); s = s exp(m_old - m) + sum exp(x - m).
 * tgt[r] is written only by the block that holds targets[r]; an ignore_index outside
 * every block (e.g. -100) is therefore never looked up. */
void nnt_cpu_xent_fwd_block_f32(int64_t rows, int64_t nv, int64_t v0, const float *logits,
                                int64_t ld, const int32_t *targets, float *m, float *s,
                                float *tgt)
{
    if (nv <= 0)
        return;
    for (int64_t r = 0; r < rows; r++) {
        const float *restrict x = logits + r * ld;
        float bm = row_max(nv, x);
        float mnew = m[r] > bm ? m[r] : bm;
        float sum = row_sumexp(nv, x, mnew);
        s[r] = s[r] * expf(m[r] - mnew) + sum;
        m[r] = mnew;
        int64_t t = (int64_t)targets[r] - v0;
        if (t >= 0 && t < nv)
            tgt[r] = x[t];
    }
}

void nnt_cpu_xent_loss_f32(int64_t rows, const int32_t *targets, int32_t ignore_index,
                           const float *m, const float *s, const float *tgt, float *loss,
                           float *lse)
{
    for (int64_t r = 0; r < rows; r++) {
        float log_s = logf(s[r]);
        loss[r] = targets[r] == ignore_index ? 0.0f : (m[r] - tgt[r]) + log_s;
        if (lse)
            lse[r] = m[r] + log_s;
    }
}

/* dlogits (rows, nv; leading dim ld) = scale (softmax - onehot), 0 for ignored rows.
 * dlogits may be logits itself (in place). */
void nnt_cpu_xent_bwd_block_f32(int64_t rows, int64_t nv, int64_t v0, const float *logits,
                                int64_t ld, const int32_t *targets, int32_t ignore_index,
                                const float *m, const float *s, float scale, float *dlogits)
{
    for (int64_t r = 0; r < rows; r++) {
        const float *x = logits + r * ld;
        float *dx = dlogits + r * ld;
        if (targets[r] == ignore_index) {
            for (int64_t j = 0; j < nv; j++)
                dx[j] = 0.0f;
            continue;
        }
        float mr = m[r], c = scale / s[r];
        row_scaled_exp(nv, x, mr, c, dx);
        int64_t t = (int64_t)targets[r] - v0;
        if (t >= 0 && t < nv)
            dx[t] -= scale;
    }
}
