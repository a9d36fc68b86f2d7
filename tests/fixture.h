/* SPDX-License-Identifier: MIT */
/* Helpers shared by the tests that read tests/fixtures/gpt2_tiny (Check assertions). */
#ifndef NNT_TEST_FIXTURE_H
#define NNT_TEST_FIXTURE_H

#include <check.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Path of a file of tests/fixtures/gpt2_tiny (under $top_srcdir, set by make check). The
 * result lives in a static buffer until the next call. */
static inline char *fixture_path(const char *file)
{
    static char path[4200];
    const char *top = getenv("top_srcdir");
    snprintf(path, sizeof path, "%s/tests/fixtures/gpt2_tiny/%s", top ? top : ".", file);
    return path;
}

/* The ids of an expected file's line "KEY id id ...", at most cap of them, into ids; the
 * count. */
static inline size_t fixture_parse_ids(const char *line, const char *key, int32_t *ids,
                                       size_t cap)
{
    size_t k = strlen(key), n = 0;
    ck_assert_msg(strncmp(line, key, k) == 0 && line[k] == ' ', "expected \"%s ...\": %s", key,
                  line);
    char *end = NULL;
    for (const char *at = line + k; n < cap; at = end) {
        long v = strtol(at, &end, 10);
        if (end == at)
            break;
        ids[n++] = (int32_t)v;
    }
    return n;
}

/* A whole file, malloc'd and NUL-terminated (one byte past *len, its size). */
static inline unsigned char *slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    ck_assert_msg(f != NULL, "cannot open %s", path);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *buf = malloc((size_t)n + 1);
    ck_assert_ptr_nonnull(buf);
    ck_assert_int_eq(fread(buf, 1, (size_t)n, f), (size_t)n);
    fclose(f);
    buf[n] = 0;   /* callers use text files as strings (strstr, fputs) */
    *len = (size_t)n;
    return buf;
}

#endif
