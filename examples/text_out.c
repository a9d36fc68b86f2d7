/* SPDX-License-Identifier: MIT */
/* Decoded text written to a terminal (examples/text_out.h). */
#include "text_out.h"

size_t text_out_escaped(FILE *f, const unsigned char *s, size_t len, int final)
{
    size_t k = 0;
    while (k < len) {
        int u = s[k] >= 0xf0 && s[k] <= 0xf4 ? 4 : s[k] >= 0xe0 && s[k] < 0xf0 ? 3
                : s[k] >= 0xc2 && s[k] < 0xe0 ? 2 : 0;
        int have = u ? ((size_t)u > len - k ? (int)(len - k) : u) : 0;
        for (int b = 1; b < have; b++)
            if ((s[k + b] & 0xc0) != 0x80)
                u = have = 0;
        if (u && have < u && !final)
            break;   /* the rest of the character may come later */
        if (u && have == u)
            fwrite(s + k, 1, (size_t)u, f), k += (size_t)u;
        else if (s[k] == '\n' || s[k] == '\t' || (s[k] >= 0x20 && s[k] < 0x7f))
            fputc(s[k++], f);
        else
            fprintf(f, "\\x%02x", s[k++]);
    }
    return k;
}
