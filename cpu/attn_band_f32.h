/* SPDX-License-Identifier: MIT */
/* nnt CPU kernels: the float operands of the band products' template (attn_band_impl.h), which
 * cpu/attn_band.c includes before it for each instruction set (no guard: the template undefines
 * them at its end). v_load, v_loadn, v_bcast, v_fma and v_zero are the set's. */
#define BAND_E float
#define VB VF
#define v_bload(p) v_load(p)
#define v_bloadn(p, n) v_loadn((p), (n))
#define v_bzero() v_zero()
#define v_abcast(p) v_bcast(*(p))
#define v_dot(acc, x, b) v_fma((x), (b), (acc))
#define BAND_IN0(k) (k)
#define BAND_IN1(k) (k)
