/* SPDX-License-Identifier: MIT */
/* A bounded JSON pull reader (RFC 8259) over a buffer held by the caller: the safetensors header
 * is read with it schema-first (objects, strings, non-negative integers), nnt_json_skip
 * validates and skips any value without recursion. Never reads past buf + len. */
#include "io.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void nnt_json_init(nnt_json *j, const char *buf, size_t len, size_t base, const char *what,
                   char *err, size_t errlen)
{
    j->buf = buf;
    j->len = len;
    j->pos = 0;
    j->base = base;
    j->what = what ? what : "json";
    j->err = err;
    j->errlen = errlen;
}

int nnt_json_fail(nnt_json *j, const char *fmt, ...)
{
    if (j->err && j->errlen) {
        int n = snprintf(j->err, j->errlen, "%s: ", j->what);
        size_t used = n < 0 ? 0 : (size_t)n;
        if (used < j->errlen) {
            va_list ap;
            va_start(ap, fmt);
            n = vsnprintf(j->err + used, j->errlen - used, fmt, ap);
            va_end(ap);
            used += n < 0 ? 0 : (size_t)n;
        }
        if (used < j->errlen)
            snprintf(j->err + used, j->errlen - used, " at byte %zu", j->base + j->pos);
    }
    return NNT_E_FORMAT;
}

static int is_ws(int c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

int nnt_json_peek(nnt_json *j)
{
    while (j->pos < j->len && is_ws((unsigned char)j->buf[j->pos]))
        j->pos++;
    return j->pos < j->len ? (unsigned char)j->buf[j->pos] : -1;
}

/* The next byte for a message: "'x'", "byte 0x01" or "end of header". */
static const char *describe(nnt_json *j, char *tmp, size_t n)
{
    if (j->pos >= j->len)
        return "the end of the text";
    unsigned char c = (unsigned char)j->buf[j->pos];
    if (c >= 0x20 && c < 0x7f)
        snprintf(tmp, n, "'%c'", c);
    else
        snprintf(tmp, n, "byte 0x%02x", c);
    return tmp;
}

int nnt_json_expect(nnt_json *j, char c, const char *context)
{
    if (nnt_json_peek(j) == (unsigned char)c) {
        j->pos++;
        return 0;
    }
    char tmp[16];
    return nnt_json_fail(j, "expected '%c' %s, found %s", c, context, describe(j, tmp, sizeof tmp));
}

static int hex4(const char *s, unsigned *out)
{
    unsigned v = 0;
    for (int i = 0; i < 4; i++) {
        int c = (unsigned char)s[i], d;
        if (c >= '0' && c <= '9')
            d = c - '0';
        else if (c >= 'a' && c <= 'f')
            d = c - 'a' + 10;
        else if (c >= 'A' && c <= 'F')
            d = c - 'A' + 10;
        else
            return -1;
        v = v << 4 | (unsigned)d;
    }
    *out = v;
    return 0;
}

static size_t put_utf8(unsigned char *o, uint32_t cp)
{
    if (cp < 0x80) {
        o[0] = (unsigned char)cp;
        return 1;
    }
    if (cp < 0x800) {
        o[0] = (unsigned char)(0xc0 | cp >> 6);
        o[1] = (unsigned char)(0x80 | (cp & 0x3f));
        return 2;
    }
    if (cp < 0x10000) {
        o[0] = (unsigned char)(0xe0 | cp >> 12);
        o[1] = (unsigned char)(0x80 | (cp >> 6 & 0x3f));
        o[2] = (unsigned char)(0x80 | (cp & 0x3f));
        return 3;
    }
    o[0] = (unsigned char)(0xf0 | cp >> 18);
    o[1] = (unsigned char)(0x80 | (cp >> 12 & 0x3f));
    o[2] = (unsigned char)(0x80 | (cp >> 6 & 0x3f));
    o[3] = (unsigned char)(0x80 | (cp & 0x3f));
    return 4;
}

/* Scan (and, when o != NULL, decode into o) a string whose opening quote is at j->pos.
 * On success j->pos is past the closing quote and *n the decoded length. The decoded form is
 * never longer than the raw one (escapes shrink, raw bytes are copied), so o needs the raw
 * length; the caller sizes it after a first scan. */
static int scan_string(nnt_json *j, unsigned char *o, size_t *n, size_t maxlen, int nul_ok,
                       const char *context)
{
    size_t start = j->pos, len = 0;
    j->pos++; /* opening quote */
    for (;;) {
        if (j->pos >= j->len) {
            j->pos = start;
            return nnt_json_fail(j, "unterminated string %s", context);
        }
        unsigned char c = (unsigned char)j->buf[j->pos];
        if (c == '"') {
            j->pos++;
            *n = len;
            return 0;
        }
        uint32_t cp;
        size_t k;
        unsigned char tmp[4];
        if (c < 0x20)
            return nnt_json_fail(j, "control character 0x%02x in string %s", c, context);
        if (c == '\\') {
            if (j->pos + 1 >= j->len) {
                j->pos = start;
                return nnt_json_fail(j, "unterminated string %s", context);
            }
            char e = j->buf[j->pos + 1];
            switch (e) {
            case '"': cp = '"'; break;
            case '\\': cp = '\\'; break;
            case '/': cp = '/'; break;
            case 'b': cp = '\b'; break;
            case 'f': cp = '\f'; break;
            case 'n': cp = '\n'; break;
            case 'r': cp = '\r'; break;
            case 't': cp = '\t'; break;
            case 'u': {
                unsigned hi, lo;
                if (j->len - j->pos < 6 || hex4(j->buf + j->pos + 2, &hi) != 0)
                    return nnt_json_fail(j, "bad \\u escape (4 hex digits needed) in string %s",
                                         context);
                if (hi >= 0xdc00 && hi <= 0xdfff)
                    return nnt_json_fail(j, "unpaired low surrogate \\u%04x in string %s", hi,
                                         context);
                if (hi >= 0xd800 && hi <= 0xdbff) {
                    if (j->len - j->pos < 12 || j->buf[j->pos + 6] != '\\' ||
                        j->buf[j->pos + 7] != 'u' || hex4(j->buf + j->pos + 8, &lo) != 0 ||
                        lo < 0xdc00 || lo > 0xdfff)
                        return nnt_json_fail(j, "unpaired high surrogate \\u%04x in string %s",
                                             hi, context);
                    cp = 0x10000 + ((uint32_t)(hi - 0xd800) << 10) + (lo - 0xdc00);
                    j->pos += 6;
                } else {
                    cp = hi;
                }
                j->pos += 4; /* plus the 2 below */
                break;
            }
            default:
                if ((unsigned char)e >= 0x20 && (unsigned char)e < 0x7f)
                    return nnt_json_fail(j, "bad escape '\\%c' in string %s", e, context);
                return nnt_json_fail(j, "bad escape (byte 0x%02x) in string %s",
                                     (unsigned char)e, context);
            }
            if (cp == 0 && !nul_ok)
                return nnt_json_fail(j, "NUL character (\\u0000) in string %s", context);
            k = put_utf8(tmp, cp);
            j->pos += 2;
        } else if (c < 0x80) {
            tmp[0] = c;
            k = 1;
            j->pos++;
        } else {
            k = (size_t)nnt_utf8_decode((const unsigned char *)j->buf + j->pos, j->len - j->pos,
                                        &cp);
            if (k == 0)
                return nnt_json_fail(j, "invalid UTF-8 in string %s", context);
            memcpy(tmp, j->buf + j->pos, k);
            j->pos += k;
        }
        if (len + k > maxlen) {
            j->pos = start;
            return nnt_json_fail(j, "string %s longer than %zu bytes", context, maxlen);
        }
        if (o)
            memcpy(o + len, tmp, k);
        len += k;
    }
}

int nnt_json_string(nnt_json *j, char **out, size_t *outlen, size_t maxlen, int nul_ok,
                    const char *context)
{
    *out = NULL;
    if (nnt_json_peek(j) != '"') {
        char tmp[16];
        return nnt_json_fail(j, "expected a string %s, found %s", context,
                             describe(j, tmp, sizeof tmp));
    }
    size_t start = j->pos, n;
    int rc = scan_string(j, NULL, &n, maxlen, nul_ok, context);
    if (rc)
        return rc;
    char *s = malloc(n + 1);
    if (!s)
        return nnt_io_errf(j->err, j->errlen, NNT_E_NOMEM, "%s: out of memory for a string of %zu bytes",
                           j->what, n);
    j->pos = start;
    scan_string(j, (unsigned char *)s, &n, maxlen, nul_ok, context); /* succeeded before */
    s[n] = 0;
    *out = s;
    if (outlen)
        *outlen = n;
    return 0;
}

int nnt_json_u64(nnt_json *j, uint64_t *out, const char *context)
{
    int c = nnt_json_peek(j);
    char tmp[16];
    if (c == '-')
        return nnt_json_fail(j, "negative number %s (a non-negative integer is needed)", context);
    if (c < '0' || c > '9')
        return nnt_json_fail(j, "expected a non-negative integer %s, found %s", context,
                             describe(j, tmp, sizeof tmp));
    size_t start = j->pos;
    uint64_t v = 0;
    while (j->pos < j->len && j->buf[j->pos] >= '0' && j->buf[j->pos] <= '9') {
        unsigned d = (unsigned)(j->buf[j->pos] - '0');
        if (v > (UINT64_MAX - d) / 10) {
            j->pos = start;
            return nnt_json_fail(j, "integer %s does not fit in 64 bits", context);
        }
        v = v * 10 + d;
        j->pos++;
    }
    if (j->buf[start] == '0' && j->pos - start > 1) {
        j->pos = start;
        return nnt_json_fail(j, "integer %s with a leading zero", context);
    }
    if (j->pos < j->len && (j->buf[j->pos] == '.' || j->buf[j->pos] == 'e' || j->buf[j->pos] == 'E')) {
        j->pos = start;
        return nnt_json_fail(j, "number %s is not an integer", context);
    }
    *out = v;
    return 0;
}

/* Any JSON number: -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)? */
static int skip_number(nnt_json *j, const char *context)
{
    size_t start = j->pos;
    const char *b = j->buf;
#define DIGIT(i) ((i) < j->len && b[i] >= '0' && b[i] <= '9')
    size_t p = j->pos;
    if (p < j->len && b[p] == '-')
        p++;
    if (!DIGIT(p))
        goto bad;
    if (b[p] == '0')
        p++;
    else
        while (DIGIT(p))
            p++;
    if (p < j->len && b[p] == '.') {
        p++;
        if (!DIGIT(p))
            goto bad;
        while (DIGIT(p))
            p++;
    }
    if (p < j->len && (b[p] == 'e' || b[p] == 'E')) {
        p++;
        if (p < j->len && (b[p] == '+' || b[p] == '-'))
            p++;
        if (!DIGIT(p))
            goto bad;
        while (DIGIT(p))
            p++;
    }
#undef DIGIT
    j->pos = p;
    return 0;
bad:
    j->pos = start;
    return nnt_json_fail(j, "malformed number %s", context);
}

int nnt_json_skip(nnt_json *j, int maxdepth, const char *context)
{
    char stack[NNT_JSON_MAXDEPTH];
    int sp = 0, rc;
    char tmp[16];
    if (maxdepth > NNT_JSON_MAXDEPTH)
        maxdepth = NNT_JSON_MAXDEPTH;
    for (;;) {
        /* a value */
        int c = nnt_json_peek(j);
        size_t n;
        if (c == '{' || c == '[') {
            if (sp >= maxdepth)
                return nnt_json_fail(j, "nesting deeper than %d %s", maxdepth, context);
            stack[sp++] = (char)c;
            j->pos++;
            int close = c == '{' ? '}' : ']';
            if (nnt_json_peek(j) == close) {
                j->pos++;
                sp--;
            } else if (c == '{') {
                if (nnt_json_peek(j) != '"')
                    return nnt_json_fail(j, "expected a key string %s, found %s", context,
                                         describe(j, tmp, sizeof tmp));
                if ((rc = scan_string(j, NULL, &n, SIZE_MAX, 1, context)) != 0 ||
                    (rc = nnt_json_expect(j, ':', context)) != 0)
                    return rc;
                continue;
            } else {
                continue;
            }
        } else if (c == '"') {
            if ((rc = scan_string(j, NULL, &n, SIZE_MAX, 1, context)) != 0)
                return rc;
        } else if (c == '-' || (c >= '0' && c <= '9')) {
            if ((rc = skip_number(j, context)) != 0)
                return rc;
        } else if (c == 't' || c == 'f' || c == 'n') {
            const char *lit = c == 't' ? "true" : c == 'f' ? "false" : "null";
            size_t l = strlen(lit);
            if (j->len - j->pos < l || memcmp(j->buf + j->pos, lit, l) != 0)
                return nnt_json_fail(j, "bad literal %s", context);
            j->pos += l;
        } else {
            return nnt_json_fail(j, "expected a value %s, found %s", context,
                                 describe(j, tmp, sizeof tmp));
        }
        /* after a value: close containers or go on to the next element */
        for (;;) {
            if (sp == 0)
                return 0;
            char top = stack[sp - 1];
            int close = top == '{' ? '}' : ']';
            c = nnt_json_peek(j);
            if (c == close) {
                j->pos++;
                sp--;
                continue;
            }
            if (c != ',')
                return nnt_json_fail(j, "expected ',' or '%c' %s, found %s", close, context,
                                     describe(j, tmp, sizeof tmp));
            j->pos++;
            if (top == '{') {
                if (nnt_json_peek(j) != '"')
                    return nnt_json_fail(j, "expected a key string %s, found %s", context,
                                         describe(j, tmp, sizeof tmp));
                if ((rc = scan_string(j, NULL, &n, SIZE_MAX, 1, context)) != 0 ||
                    (rc = nnt_json_expect(j, ':', context)) != 0)
                    return rc;
            }
            break;
        }
    }
}

int nnt_json_end(nnt_json *j)
{
    char tmp[16];
    if (nnt_json_peek(j) != -1)
        return nnt_json_fail(j, "trailing data after the JSON value: %s", describe(j, tmp, sizeof tmp));
    return 0;
}
