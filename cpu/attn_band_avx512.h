/* SPDX-License-Identifier: MIT */
/* nnt CPU kernels: the AVX-512 float vectors of the band products' template (attn_band_impl.h):
 * tiles of 8 rows by 32 columns, the results c in __m512. Included before the template by
 * cpu/attn_band.c (float operands) and cpu/attn_band16.c (bf16 pairs), after simd_avx512.h
 * (no guard: the template undefines these at its end). */
#define VF __m512
#define VW 16
#define MR 8
#define v_zero() _mm512_setzero_ps()
#define v_bcast(x) _mm512_set1_ps(x)
#define v_load(p) _mm512_loadu_ps(p)
#define v_loadn(p, n) _mm512_maskz_loadu_ps(nnt_avx512_maskn(n), (p))
#define v_store(p, x) _mm512_storeu_ps((p), (x))
#define v_storen(p, x, n) _mm512_mask_storeu_ps((p), nnt_avx512_maskn(n), (x))
#define v_fma(a, b, c) _mm512_fmadd_ps((a), (b), (c))
#define v_mul(a, b) _mm512_mul_ps((a), (b))
