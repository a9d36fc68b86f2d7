/* SPDX-License-Identifier: MIT */
/* What StarPU 1.3 allocates for a tile (lib/ctx_alloc.c, internal): the rounding to 16 KiB
 * blocks of what it suballocates (at most 4 MiB), and the bound on its 32 MiB chunks, checked
 * against a replay of StarPU's own chunk allocator (src/datawizard/malloc.c of 1.3.10,
 * starpu_malloc_on_node_flags, for allocations without frees: the first chunk in its list
 * order with a free run long enough takes the request, a chunk left with a run of at least
 * twice the request moves to the front, a new chunk goes to the front). The public budget
 * checks that use it are in test_api (ctx_budget_counts_pinned_chunks). */
#include "../lib/ctx_alloc.h"
#include "testutil.h"

#include <check.h>
#include <stdlib.h>

#define MIB ((int64_t)1 << 20)
#define KIB ((int64_t)1 << 10)
#define BLOCKS_PER_CHUNK 2048   /* 32 MiB of 16 KiB blocks */

/* StarPU's chunk list, for allocations without frees: each chunk's free blocks are one run at
 * its end. */
typedef struct {
    int free_run[4096];   /* in list order */
    int n;
} chunk_list;

static void move_to_front(chunk_list *c, int i)
{
    int run = c->free_run[i];
    for (int j = i; j > 0; j--)
        c->free_run[j] = c->free_run[j - 1];
    c->free_run[0] = run;
}

/* One suballocation of bytes (at most 4 MiB) as starpu_malloc_on_node_flags places it. */
static void replay_alloc(chunk_list *c, int64_t bytes)
{
    int nblocks = (int)((bytes + 16 * KIB - 1) / (16 * KIB));
    if (nblocks == 0)
        nblocks = 1;
    for (int i = 0; i < c->n; i++) {
        if (c->free_run[i] < nblocks)
            continue;
        int had = c->free_run[i];
        c->free_run[i] -= nblocks;
        if (had >= 2 * nblocks)
            move_to_front(c, i);
        return;
    }
    ck_assert_int_lt(c->n, 4096);
    c->free_run[c->n] = BLOCKS_PER_CHUNK - nblocks;   /* a new chunk, at the front */
    move_to_front(c, c->n);
    c->n++;
}

START_TEST(test_rounding)
{
    ck_assert_int_eq(nnt_alloc_bytes(1, 1), 16 * KIB);
    ck_assert_int_eq(nnt_alloc_bytes(16 * KIB, 1), 16 * KIB);
    ck_assert_int_eq(nnt_alloc_bytes(16 * KIB + 1, 1), 32 * KIB);
    ck_assert_int_eq(nnt_alloc_bytes(3000, 1), 16 * KIB);
    /* 4 MiB exactly is suballocated (size <= CHUNK_SIZE / 8), one byte more is not */
    ck_assert_int_eq(nnt_alloc_suballocated(4 * MIB), 1);
    ck_assert_int_eq(nnt_alloc_bytes(4 * MIB, 1), 4 * MIB);
    ck_assert_int_eq(nnt_alloc_suballocated(4 * MIB + 1), 0);
    ck_assert_int_eq(nnt_alloc_bytes(4 * MIB + 1, 1), 4 * MIB + 1);
    ck_assert_int_eq(nnt_alloc_bytes(4 * MIB - 1, 1), 4 * MIB);
    /* without chunks (no CUDA worker, or pinning off): as asked */
    ck_assert_int_eq(nnt_alloc_bytes(3000, 0), 3000);
    ck_assert_int_eq(nnt_alloc_bytes(4 * MIB + 1, 0), 4 * MIB + 1);
}
END_TEST

/* The worst case for first-fit without frees: seven 4 MiB tiles and one of 16 KiB fill 1793
 * blocks, and the next 4 MiB (256 blocks) does not fit the 255 left: a chunk per 1793
 * blocks. The bound (7/8 of a chunk, 1792 blocks) holds it; 2048 blocks would not. */
START_TEST(test_bound_worst_case)
{
    chunk_list c = {{0}, 0};
    int64_t small = 0;
    for (int rep = 0; rep < 100; rep++) {
        for (int i = 0; i < 7; i++) {
            replay_alloc(&c, 4 * MIB);
            small += nnt_alloc_bytes(4 * MIB, 1);
        }
        replay_alloc(&c, 100);
        small += nnt_alloc_bytes(100, 1);
        ck_assert_int_le(c.n, nnt_alloc_chunks(small));
    }
    replay_alloc(&c, 4 * MIB);
    small += nnt_alloc_bytes(4 * MIB, 1);
    ck_assert_int_eq(c.n, 101);
    ck_assert_int_le(c.n, nnt_alloc_chunks(small));
    ck_assert_int_eq(nnt_alloc_chunks(small), 101);   /* exact here */
}
END_TEST

/* Tiles that pack without waste: the bound is at most 1/7 above the chunks taken. */
START_TEST(test_bound_tight)
{
    ck_assert_int_eq(nnt_alloc_chunks(0), 0);
    ck_assert_int_eq(nnt_alloc_chunks(16 * KIB), 1);
    ck_assert_int_eq(nnt_alloc_chunks(28 * MIB), 1);
    ck_assert_int_eq(nnt_alloc_chunks(28 * MIB + 16 * KIB), 2);
    chunk_list c = {{0}, 0};
    for (int i = 0; i < 7 * BLOCKS_PER_CHUNK; i++)
        replay_alloc(&c, 16 * KIB);
    ck_assert_int_eq(c.n, 7);
    ck_assert_int_eq(nnt_alloc_chunks(7 * 32 * MIB), 8);
}
END_TEST

/* Random sizes up to 4 MiB (fixed seed), and runs of equal tiles as a model's are: the replayed
 * chunks never exceed the bound, after every allocation. */
START_TEST(test_bound_random)
{
    srand(42);
    for (int trial = 0; trial < 20; trial++) {
        chunk_list c = {{0}, 0};
        int64_t small = 0;
        for (int i = 0; i < 600; i++) {
            int64_t bytes;
            if (trial % 2)
                bytes = 1 + (int64_t)rand() % (4 * MIB);
            else   /* a few sizes, repeated, like tiles of a tiled model */
                bytes = (int64_t[]){768 * 768 * 4, 3 * 256 * 1024, 50257 * 4, 4 * MIB, 3072 * 2,
                                    200 * KIB}[rand() % 6];
            replay_alloc(&c, bytes);
            small += nnt_alloc_bytes(bytes, 1);
            ck_assert_int_le(c.n, nnt_alloc_chunks(small));
        }
    }
}
END_TEST

START_TEST(test_need_and_kept)
{
    /* 5 MiB whole, 1 MiB of blocks in one chunk, 4 empty chunks kept */
    ck_assert_int_eq(nnt_alloc_need(5 * MIB, 1 * MIB, 4), 5 * MIB + 5 * 32 * MIB);
    ck_assert_int_eq(nnt_alloc_need(0, 29 * MIB, 0), 64 * MIB);
    ck_assert_int_eq(nnt_alloc_need(7 * MIB, 0, 0), 7 * MIB);
    /* at most 4 empty chunks, and never more than the peak left empty */
    ck_assert_int_eq(nnt_alloc_kept(2, 10), 4);
    ck_assert_int_eq(nnt_alloc_kept(2, 3), 1);
    ck_assert_int_eq(nnt_alloc_kept(3, 3), 0);
    ck_assert_int_eq(nnt_alloc_kept(0, 6), 4);
    ck_assert_int_eq(nnt_alloc_kept(5, 2), 0);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("ctx_alloc");
    TCase *tc = tcase_create("rule");
    tcase_add_test(tc, test_rounding);
    tcase_add_test(tc, test_bound_worst_case);
    tcase_add_test(tc, test_bound_tight);
    tcase_add_test(tc, test_bound_random);
    tcase_add_test(tc, test_need_and_kept);
    suite_add_tcase(s, tc);
    return run_suite(s);
}
