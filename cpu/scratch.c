/* SPDX-License-Identifier: MIT */
/* nnt CPU kernels: scratch kept per thread between calls (nnt_cpu_scratch). The attention
 * kernels take up to a few MB of scratch a call; taken from malloc and freed at the end of
 * each call, glibc gave it back to the system (the heap's top past its trim threshold), and
 * every call paid the page faults again: 14 % of the time of a bf16 backward block on AMD
 * Zen 5 (one thread, bench/RESULTS-window.md). A thread's buffers are freed when it exits.
 * They start on a cache line (SCRATCH_ALIGN): malloc's large blocks start 16 bytes into a
 * page, and every 64-byte store of the band products' transposes into such a buffer then
 * split over two lines (Intel Xeon, 2 MiB L2: a (768, 64) slab transposed in 18.8 us, 6.7 us
 * into a buffer on a line boundary). */
#include "nnt_cpu.h"

#include <pthread.h>
#include <stdlib.h>

#define SCRATCH_ALIGN 64

typedef struct scratch {
    void *buf[NNT_CPU_SCRATCH_SLOTS];
    size_t size[NNT_CPU_SCRATCH_SLOTS];
} scratch;

static pthread_key_t scratch_key;
static pthread_once_t scratch_once = PTHREAD_ONCE_INIT;
static int scratch_key_ok;

static void scratch_release(void *p)
{
    scratch *s = p;
    for (int i = 0; i < NNT_CPU_SCRATCH_SLOTS; i++)
        free(s->buf[i]);
    free(s);
}

static void scratch_make_key(void)
{
    scratch_key_ok = pthread_key_create(&scratch_key, scratch_release) == 0;
}

void *nnt_cpu_scratch(int slot, size_t bytes)
{
    pthread_once(&scratch_once, scratch_make_key);
    if (!scratch_key_ok || slot < 0 || slot >= NNT_CPU_SCRATCH_SLOTS)
        return NULL;
    scratch *s = pthread_getspecific(scratch_key);
    if (!s) {
        s = calloc(1, sizeof *s);
        if (!s || pthread_setspecific(scratch_key, s) != 0) {
            free(s);
            return NULL;
        }
    }
    if (s->size[slot] < bytes || !s->buf[slot]) {
        free(s->buf[slot]);
        if (posix_memalign(&s->buf[slot], SCRATCH_ALIGN, bytes ? bytes : 1) != 0)
            s->buf[slot] = NULL;
        s->size[slot] = s->buf[slot] ? bytes : 0;
    }
    return s->buf[slot];
}
