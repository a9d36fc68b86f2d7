/* SPDX-License-Identifier: MIT */
/* Checksums and strict number parsing for checkpoint metadata (see io.h). */
#include "io.h"

#include <string.h>

#define FNV_PRIME 0x100000001b3ULL

uint64_t nnt_fnv1a_bytes(uint64_t h, const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++)
        h = (h ^ (unsigned char)s[i]) * FNV_PRIME;
    return h;
}

uint64_t nnt_fnv1a_floats(uint64_t h, const float *x, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        uint32_t bits;
        memcpy(&bits, &x[i], sizeof bits);
        h = (h ^ bits) * FNV_PRIME;
    }
    return h;
}

uint64_t nnt_fnv1a_u64(uint64_t h, uint64_t w)
{
    for (int i = 0; i < 8; i++, w >>= 8)
        h = (h ^ (w & 0xff)) * FNV_PRIME;
    return h;
}

static uint64_t load_le64(const unsigned char *p)
{
    uint64_t w = 0;
    for (int i = 7; i >= 0; i--)   /* compilers make this one load on little-endian hosts */
        w = w << 8 | p[i];
    return w;
}

uint64_t nnt_hash_words(const void *data, size_t n)
{
    const unsigned char *p = data;
    uint64_t lane[4] = {NNT_FNV_OFFSET, NNT_FNV_OFFSET, NNT_FNV_OFFSET, NNT_FNV_OFFSET};
    size_t blocks = n / 32;
    for (size_t b = 0; b < blocks; b++, p += 32)
        for (int j = 0; j < 4; j++) {
            uint64_t h = (lane[j] ^ load_le64(p + 8 * j)) * FNV_PRIME;
            lane[j] = h ^ (h >> 32);
        }
    uint64_t h = NNT_FNV_OFFSET;
    for (int j = 0; j < 4; j++)
        h = nnt_fnv1a_u64(h, lane[j]);
    h = nnt_fnv1a_bytes(h, (const char *)p, n % 32);
    return nnt_fnv1a_u64(h, (uint64_t)n);
}

int nnt_meta_parse_u64(const char *s, uint64_t *out, const char **end)
{
    uint64_t v = 0;
    const char *p = s;
    for (; *p >= '0' && *p <= '9'; p++) {
        unsigned d = (unsigned)(*p - '0');
        if (v > (UINT64_MAX - d) / 10)
            return -1;
        v = v * 10 + d;
    }
    if (p == s || (s[0] == '0' && p - s > 1))
        return -1;
    *out = v;
    *end = p;
    return 0;
}

int nnt_meta_parse_u64_all(const char *s, uint64_t *out)
{
    const char *end = NULL;
    return nnt_meta_parse_u64(s, out, &end) || *end ? -1 : 0;
}

int nnt_meta_parse_rng(const char *s, uint64_t rng[4])
{
    if (*s++ != '[')
        return -1;
    for (int i = 0; i < 4; i++)
        if (nnt_meta_parse_u64(s, &rng[i], &s) || *s++ != (i < 3 ? ',' : ']'))
            return -1;
    return *s ? -1 : 0;
}

int nnt_meta_parse_hex64(const char *s, uint64_t *out)
{
    uint64_t v = 0;
    for (int i = 0; i < 16; i++) {
        char c = s[i];
        if (c >= '0' && c <= '9')
            v = v << 4 | (uint64_t)(c - '0');
        else if (c >= 'a' && c <= 'f')
            v = v << 4 | (uint64_t)(c - 'a' + 10);
        else
            return -1;
    }
    *out = v;
    return s[16] ? -1 : 0;
}
