/* SPDX-License-Identifier: MIT */
/* nnt CPU kernels: which instruction set the elementwise kernels use (run-time choice). */
#include "nnt_cpu.h"

#include <unistd.h>

#include <stdlib.h>
#include <string.h>

/* -1: not chosen yet. nnt_ctx_create names the choice (nnt_cpu_isa_name) before StarPU
 * starts its workers, so the workers see the value written then (thread creation orders
 * it); a kernel called outside a context (tests) computes the same value if it races. */
static int isa_level = -1;
static int isa_forced = -1;

static int cpu_has_avx2(void)
{
#if NNT_CPU_X86
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
#else
    return 0;
#endif
}

static int isa_detect(void)
{
    const char *env = getenv("NNT_CPU_ISA");
    if (env && strcmp(env, "generic") == 0)
        return NNT_CPU_ISA_GENERIC;
    return cpu_has_avx2() ? NNT_CPU_ISA_AVX2 : NNT_CPU_ISA_GENERIC;
}

int nnt_cpu_isa(void)
{
    int level = isa_forced >= 0 ? isa_forced : isa_level;
    if (level < 0) {
        level = isa_detect();
        isa_level = level;
    }
    return level;
}

void nnt_cpu_isa_force(int level)
{
    if (level == NNT_CPU_ISA_AVX2 && !cpu_has_avx2())
        level = NNT_CPU_ISA_GENERIC;
    isa_forced = level < 0 ? -1 : level;
    if (level < 0)
        isa_level = -1; /* NNT_CPU_ISA is read again at the next call */
}

/* The AVX-512 level the AVX2 path may use: 2 AVX512-BF16 (with AVX-512F), 1 AVX-512F, 0
 * neither (feature tests), at most the level forced (tests); 0 off the AVX2 path. */
static int avx512_forced = -1;

static int avx512_detect(void)
{
#if NNT_CPU_X86
    __builtin_cpu_init();
    if (!__builtin_cpu_supports("avx512f"))
        return 0;
    return __builtin_cpu_supports("avx512bf16") ? 2 : 1;
#else
    return 0;
#endif
}

int nnt_cpu_avx512(void)
{
    static int level = -1;   /* the same answer from any thread */
    if (nnt_cpu_isa() != NNT_CPU_ISA_AVX2)
        return 0;
    if (level < 0)
        level = avx512_detect();
    return avx512_forced >= 0 && avx512_forced < level ? avx512_forced : level;
}

int nnt_cpu_avx512_force(int level)
{
    avx512_forced = level < 0 ? -1 : level;
    return nnt_cpu_avx512();
}

const char *nnt_cpu_isa_name(void)
{
    return nnt_cpu_isa() == NNT_CPU_ISA_AVX2 ? "avx2" : "generic";
}

size_t nnt_cpu_l2_bytes(void)
{
#ifdef _SC_LEVEL2_CACHE_SIZE
    long l2 = sysconf(_SC_LEVEL2_CACHE_SIZE);
#else
    long l2 = 0;
#endif
    return l2 > 0 ? (size_t)l2 : (size_t)1 << 20;   /* unknown: 1 MiB */
}
