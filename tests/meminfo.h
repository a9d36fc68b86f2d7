/* SPDX-License-Identifier: MIT */
/* The kernel's MemAvailable, for the tests of the default RAM budget (a Check suite's and
 * test_mpi's, which is not one). */
#ifndef NNT_TEST_MEMINFO_H
#define NNT_TEST_MEMINFO_H

#include <stdint.h>
#include <stdio.h>

/* MemAvailable of /proc/meminfo in bytes (0: unknown). */
static inline int64_t mem_available(void)
{
    FILE *f = fopen("/proc/meminfo", "r");
    char line[256];
    long long kib = 0;
    while (f && fgets(line, sizeof line, f))
        if (sscanf(line, "MemAvailable: %lld kB", &kib) == 1)
            break;
    if (f)
        fclose(f);
    return (int64_t)kib * 1024;
}

#endif
