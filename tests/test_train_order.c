/* SPDX-License-Identifier: MIT */
/* The trainer's shuffled order (lib/train/order.c, nnt-train --shuffle): every epoch a
 * permutation of the rows, a different one each epoch and each seed, the same one for the
 * same seed. */
#include "../lib/train/train.h"
#include "testutil.h"

#include <check.h>
#include <stdlib.h>
#include <string.h>

/* rows of the cases: small, around powers of 2 and 4 (the Feistel domain), larger */
static const uint64_t sizes[] = {1, 2, 3, 4, 5, 7, 15, 16, 17, 63, 64, 65, 100, 1000, 4095,
                                 4096, 4097, 65539, 1000003};

START_TEST(test_permutation)
{
    uint64_t n = sizes[_i];
    unsigned char *seen = calloc(n, 1);
    uint64_t *first = malloc(n * sizeof *first);
    ck_assert(seen && first);
    for (uint64_t epoch = 0; epoch < 3; epoch++) {
        memset(seen, 0, n);
        uint64_t same_as_first = 0, in_place = 0;
        for (uint64_t j = 0; j < n; j++) {
            /* (plain tests in the loop: each Check assertion is a write to a pipe) */
            uint64_t r = nnt_shuffled_row(7, n, epoch * n + j);
            if (r >= n || seen[r] || r != nnt_shuffled_row(7, n, epoch * n + j))
                ck_abort_msg("rows %llu, epoch %llu: row %llu out of range, read twice or not "
                             "the same when asked again", (unsigned long long)n,
                             (unsigned long long)epoch, (unsigned long long)r);
            seen[r] = 1;
            if (epoch == 0)
                first[j] = r;
            same_as_first += epoch > 0 && first[j] == r;
            in_place += r == j;
        }
        /* a new order each epoch, not the data's own: with 100 rows or more, at most a few
         * rows keep their place (1 expected of a random permutation) */
        if (n >= 100) {
            ck_assert_msg(in_place < 10, "rows %llu, epoch %llu: %llu rows in place",
                          (unsigned long long)n, (unsigned long long)epoch,
                          (unsigned long long)in_place);
            ck_assert_msg(epoch == 0 || same_as_first < 10, "rows %llu: epoch %llu repeats "
                          "%llu positions of epoch 0", (unsigned long long)n,
                          (unsigned long long)epoch, (unsigned long long)same_as_first);
        }
    }
    free(seen);
    free(first);
}
END_TEST

START_TEST(test_seeds)
{
    uint64_t n = 1000, same = 0;
    for (uint64_t j = 0; j < n; j++)
        same += nnt_shuffled_row(1, n, j) == nnt_shuffled_row(2, n, j);
    ck_assert_msg(same < 10, "seeds 1 and 2 give %llu rows at the same place",
                  (unsigned long long)same);
    /* a large data set: rows of the first epoch spread over the whole range */
    uint64_t big = 1000000000000ULL, lo = big, hi = 0;
    for (uint64_t j = 0; j < 1000; j++) {
        uint64_t r = nnt_shuffled_row(3, big, j);
        if (r >= big)
            ck_abort_msg("row %llu of %llu", (unsigned long long)r, (unsigned long long)big);
        lo = r < lo ? r : lo, hi = r > hi ? r : hi;
    }
    ck_assert_msg(lo < big / 100 && hi > big - big / 100, "1000 rows of 1e12 in [%llu, %llu]",
                  (unsigned long long)lo, (unsigned long long)hi);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("train_order");
    TCase *c = tcase_create("order");
    tcase_add_loop_test(c, test_permutation, 0, (int)(sizeof sizes / sizeof sizes[0]));
    tcase_add_test(c, test_seeds);
    suite_add_tcase(s, c);
    return run_suite(s);
}
