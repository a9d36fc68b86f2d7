/* SPDX-License-Identifier: MIT */
/* Plain text: the byte-level tokenizer (vocab 256, token = byte value) and UTF-8 checks. */
#include "io.h"

void nnt_text_encode(const char *s, size_t n, int32_t *out)
{
    for (size_t i = 0; i < n; i++)
        out[i] = (unsigned char)s[i];
}

int nnt_text_decode(const int32_t *tokens, size_t n, char *out, char *err, size_t errlen)
{
    for (size_t i = 0; i < n; i++) {
        if (tokens[i] < 0 || tokens[i] >= NNT_TEXT_VOCAB)
            return nnt_io_errf(err, errlen, NNT_E_INVAL,
                               "text: token %ld at position %zu is not a byte (0..255)",
                               (long)tokens[i], i);
        out[i] = (char)(unsigned char)tokens[i];
    }
    return 0;
}

int nnt_utf8_decode(const unsigned char *s, size_t n, uint32_t *cp)
{
    if (n == 0)
        return 0;
    unsigned char c = s[0];
    if (c < 0x80) {
        *cp = c;
        return 1;
    }
    size_t k;
    uint32_t v, min;
    if (c >= 0xc2 && c <= 0xdf) {
        k = 2;
        v = c & 0x1f;
        min = 0x80;
    } else if (c >= 0xe0 && c <= 0xef) {
        k = 3;
        v = c & 0x0f;
        min = 0x800;
    } else if (c >= 0xf0 && c <= 0xf4) {
        k = 4;
        v = c & 0x07;
        min = 0x10000;
    } else {
        return 0; /* continuation byte, overlong 0xc0/0xc1, or 0xf5..0xff */
    }
    if (n < k)
        return 0;
    for (size_t i = 1; i < k; i++) {
        if ((s[i] & 0xc0) != 0x80)
            return 0;
        v = v << 6 | (s[i] & 0x3f);
    }
    if (v < min || v > 0x10ffff || (v >= 0xd800 && v <= 0xdfff))
        return 0;
    *cp = v;
    return (int)k;
}

int nnt_utf8_valid(const char *s, size_t n, size_t *bad)
{
    const unsigned char *u = (const unsigned char *)s;
    size_t i = 0;
    while (i < n) {
        if (u[i] < 0x80) {
            i++;
            continue;
        }
        uint32_t cp;
        int k = nnt_utf8_decode(u + i, n - i, &cp);
        if (k == 0) {
            if (bad)
                *bad = i;
            return 0;
        }
        i += (size_t)k;
    }
    return 1;
}
