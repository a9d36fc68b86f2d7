/* SPDX-License-Identifier: MIT */
/* The trainer's shuffled reading (nnt_trainer_options.shuffle): the order in which training
 * sequences are read, stateless (a function of the seed and the count of sequences read), so
 * that a resumed run continues it exactly. */
#include "train.h"

/* splitmix64's finaliser: a well-mixed 64-bit function of x. */
static uint64_t mix64(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ULL;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
    return x ^ (x >> 31);
}

/* A permutation of [0, 4^half): a 4-round Feistel network on two halves of `half` bits,
 * its round functions keyed by key. */
static uint64_t feistel(uint64_t key, unsigned half, uint64_t x)
{
    uint64_t mask = (1ULL << half) - 1, left = x >> half, right = x & mask;
    for (uint64_t round = 0; round < 4; round++) {
        uint64_t f = mix64(key ^ (round << 56) ^ right) & mask;
        uint64_t next = left ^ f;
        left = right, right = next;
    }
    return left << half | right;
}

uint64_t nnt_shuffled_row(uint64_t seed, uint64_t nrows, uint64_t i)
{
    if (nrows <= 1)
        return 0;
    uint64_t epoch = i / nrows, x = i % nrows, key = mix64(mix64(seed) ^ mix64(epoch));
    unsigned half = 1;
    while (half < 32 && (1ULL << (2 * half)) < nrows)
        half++;
    /* cycle walking: the Feistel permutation of the smallest power of 4 >= nrows, applied
     * again until it lands in [0, nrows), is a permutation of [0, nrows) (fewer than 4 tries
     * on average) */
    do
        x = feistel(key, half, x);
    while (x >= nrows);
    return x;
}
