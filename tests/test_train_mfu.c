/* SPDX-License-Identifier: MIT */
/* The trainer's MFU (lib/train/mfu.c, internal): a step faster than a measured peak shows that
 * the peak was measured low (a busy machine at start-up): no MFU from that step on; a peak
 * the user gave is taken as is (an MFU above 1 is theirs to judge); a measured peak is the
 * rate of the fastest rounds in a row (nnt_train_sustained_rate). */
#include "../lib/train/train.h"
#include "testutil.h"

#include <check.h>
#include <math.h>

START_TEST(test_measured_peak_exceeded)
{
    int low = 0;
    ck_assert(fabs(nnt_train_mfu(50e9, 100e9, 1, &low) - 0.5) < 1e-12);
    ck_assert_int_eq(low, 0);
    ck_assert(fabs(nnt_train_mfu(100e9, 100e9, 1, &low) - 1.0) < 1e-12);   /* equal: kept */
    ck_assert_int_eq(low, 0);
    ck_assert(isnan(nnt_train_mfu(101e9, 100e9, 1, &low)));
    ck_assert_int_eq(low, 1);
    ck_assert(isnan(nnt_train_mfu(10e9, 100e9, 1, &low)));   /* later steps: none either */
    ck_assert_int_eq(low, 1);
}
END_TEST

START_TEST(test_given_peak_as_is)
{
    int low = 0;
    ck_assert(fabs(nnt_train_mfu(300e9, 100e9, 0, &low) - 3.0) < 1e-12);
    ck_assert_int_eq(low, 0);
    ck_assert(fabs(nnt_train_mfu(50e9, 100e9, 0, &low) - 0.5) < 1e-12);
}
END_TEST

START_TEST(test_no_peak)
{
    int low = 0;
    ck_assert(isnan(nnt_train_mfu(1e9, 0, 0, &low)));
    ck_assert(isnan(nnt_train_mfu(1e9, 0, 1, &low)));
    ck_assert_int_eq(low, 0);
}
END_TEST

/* The peak's rate: the fastest window of rounds in a row, not the fastest round, nor the
 * mean; every window counted (the first and the last too). */
START_TEST(test_sustained_rate)
{
    /* 2 GFLOP a round; a 1 ms burst alone, then 4 rounds of 2.5 ms: 800 GFLOP/s held */
    double s[8] = {4e-3, 1e-3, 4e-3, 4e-3, 2.5e-3, 2.5e-3, 2.5e-3, 2.5e-3};
    ck_assert(fabs(nnt_train_sustained_rate(s, 8, 4, 2e9) - 800e9) < 1e-3);
    ck_assert(fabs(nnt_train_sustained_rate(s, 8, 1, 2e9) - 2000e9) < 1e-3);   /* the burst */
    ck_assert(fabs(nnt_train_sustained_rate(s, 8, 8, 2e9) - 16e9 / 23e-3) < 1e-3);
    double first[4] = {2e-3, 2e-3, 4e-3, 4e-3};   /* the first window is the fastest */
    ck_assert(fabs(nnt_train_sustained_rate(first, 4, 2, 2e9) - 1000e9) < 1e-3);
    ck_assert(nnt_train_sustained_rate(s, 3, 4, 2e9) == 0);   /* fewer rounds than a window */
    ck_assert(nnt_train_sustained_rate(s, 8, 0, 2e9) == 0);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("train_mfu");
    TCase *tc = tcase_create("mfu");
    tcase_add_test(tc, test_measured_peak_exceeded);
    tcase_add_test(tc, test_given_peak_as_is);
    tcase_add_test(tc, test_no_peak);
    tcase_add_test(tc, test_sustained_rate);
    suite_add_tcase(s, tc);
    return run_suite(s);
}
