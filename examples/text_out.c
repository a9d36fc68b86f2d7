/* SPDX-License-Identifier: MIT */
/* Decoded text written to a terminal (examples/text_out.h). */
#include "text_out.h"

/* The bytes of the UTF-8 character s[0..len) starts with (2 to 4), 0 when s[0] starts none;
 * *have: those of them there (fewer when cut off by the end); 0 when a byte is not a
 * continuation byte. */
static int utf8_char(const unsigned char *s, size_t len, int *have)
{
    int u = s[0] >= 0xf0 && s[0] <= 0xf4 ? 4 : s[0] >= 0xe0 && s[0] < 0xf0 ? 3
            : s[0] >= 0xc2 && s[0] < 0xe0 ? 2 : 0;
    *have = u ? ((size_t)u > len ? (int)len : u) : 0;
    for (int b = 1; b < *have; b++)
        if ((s[b] & 0xc0) != 0x80)
            u = *have = 0;
    return u;
}

size_t text_out_escaped(FILE *f, const unsigned char *s, size_t len, int final)
{
    size_t k = 0;
    while (k < len) {
        int have, u = utf8_char(s + k, len - k, &have);
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

void text_out_json(FILE *f, const unsigned char *s, size_t len)
{
    fputc('"', f);
    for (size_t k = 0; k < len;) {
        int have, u = utf8_char(s + k, len - k, &have);
        if (u && have == u)
            fwrite(s + k, 1, (size_t)u, f), k += (size_t)u;
        else if (s[k] == '"' || s[k] == '\\')
            fprintf(f, "\\%c", s[k++]);
        else if (s[k] == '\n' || s[k] == '\t')
            fputs(s[k++] == '\n' ? "\\n" : "\\t", f);
        else if (s[k] < 0x20 || s[k] == 0x7f)
            fprintf(f, "\\u%04x", s[k++]);
        else if (s[k] < 0x80)
            fputc(s[k++], f);
        else
            fputs("\\ufffd", f), k++;
    }
    fputc('"', f);
}
