// SPDX-License-Identifier: MIT
/* A JSON value of hftok's small tree written as the chat templates' tojson filter writes it:
 * transformers' tojson is Python's json.dumps(x, ensure_ascii=False, indent=...) of the value
 * json.loads gives for the record's text, so
 *   - an object's keys in their order (a key given twice: at its first place with its last
 *     value, as a Python dict keeps it);
 *   - separators ", " and ": " (indent < 0), or a newline and indent spaces a level with ","
 *     and ": " (indent >= 0; an empty object or array "{}" / "[]");
 *   - strings with " \ and the control characters escaped (\n \r \t \b \f, the others
 *     \u00xx), everything else as it is (ensure_ascii=False);
 *   - numbers as Python prints what json.loads makes of them: an integer (no fraction or
 *     exponent) as its digits ("-0" is 0), any other number as the repr of the nearest double:
 *     the shortest digits that read back to it, fixed ("0.0001", "100.0") for decimal
 *     exponents -4 to 15 and exponent form ("1e-05", "1.5e+16") outside, and "Infinity" or
 *     "-Infinity" for what overflows. */
#include "../internal.h"
#include "hftok_impl.h"

#include <locale.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int put(sbuf *b, const char *s, size_t n)
{
    return hft_sb_put(b, s, n) ? NNT_E_NOMEM : NNT_OK;
}

static int puts0(sbuf *b, const char *s)
{
    return put(b, s, strlen(s));
}

/* A JSON string, json.dumps' escapes with ensure_ascii=False */
static int put_string(sbuf *b, const char *s, size_t n)
{
    NNT_TRY(puts0(b, "\""));
    size_t run = 0;   /* s[run, k): bytes that need no escape */
    for (size_t k = 0; k < n; k++) {
        unsigned char c = (unsigned char)s[k];
        char esc[8];
        if (c == '"' || c == '\\')
            snprintf(esc, sizeof esc, "\\%c", c);
        else if (c == '\n' || c == '\r' || c == '\t' || c == '\b' || c == '\f')
            snprintf(esc, sizeof esc, "\\%c", c == '\n' ? 'n' : c == '\r' ? 'r' : c == '\t' ? 't'
                                              : c == '\b' ? 'b' : 'f');
        else if (c < 0x20)
            snprintf(esc, sizeof esc, "\\u%04x", c);
        else
            continue;
        NNT_TRY(put(b, s + run, k - run));
        NNT_TRY(puts0(b, esc));
        run = k + 1;
    }
    NNT_TRY(put(b, s + run, n - run));
    return puts0(b, "\"");
}

/* The digits (into digits, no point; their number returned) and the exponent of buf,
 * "d.ddde+XX" (%e's form) */
static size_t e_digits(const char *buf, char *digits, int *exp10)
{
    const char *e = strchr(buf, 'e');
    size_t n = 0;
    *exp10 = atoi(e + 1);
    for (const char *p = buf; p < e; p++)
        if (*p >= '0' && *p <= '9')
            digits[n++] = *p;
    return n;
}

/* buf (%e's form) with its last digit moved by step (+1 or -1), carried */
static void nudge(char *buf, int step)
{
    char digits[24];
    int exp10;
    size_t n = e_digits(buf, digits, &exp10), k = n;
    while (k-- > 0) {   /* add step to the last digit, carrying */
        int d = digits[k] - '0' + step;
        digits[k] = (char)('0' + (d + 10) % 10);
        if (d >= 0 && d <= 9)
            break;
    }
    if (step > 0 && k == (size_t)-1) {   /* 9.99 + 1: 10.00, one more digit */
        memmove(digits + 1, digits, n++);
        digits[0] = '1';
        exp10++;
    }
    size_t lead = 0;   /* 1.00 - 1: 0.99 */
    while (lead + 1 < n && digits[lead] == '0')
        lead++, exp10--;
    snprintf(buf, 40, "%c.%.*se%d", digits[lead], (int)(n - lead - 1), digits + lead + 1, exp10);
}

/* The shortest digits of x (> 0, finite) that read back to x, the nearest such to x (as
 * Python's repr): *digits (no point, no trailing zeros) and *exp10 with x ~ d1.d2d3... x
 * 10^exp10. At each length the nearest digits, then (a power of two, whose neighbours are
 * closer below than above) the next ones above and below. In the C locale. */
static void shortest_digits(double x, char *digits, int *exp10)
{
    char buf[40];
    for (int prec = 1; prec <= 17; prec++) {
        snprintf(buf, sizeof buf, "%.*e", prec - 1, x);
        if (strtod(buf, NULL) == x || prec == 17)
            break;
        char up[40], down[40];
        memcpy(up, buf, sizeof up);
        memcpy(down, buf, sizeof down);
        nudge(up, +1);
        nudge(down, -1);
        int above = strtod(up, NULL) == x;
        if (above || strtod(down, NULL) == x) {
            memcpy(buf, above ? up : down, sizeof buf);
            break;
        }
    }
    size_t n = e_digits(buf, digits, exp10);
    while (n > 1 && digits[n - 1] == '0')
        n--;
    digits[n] = '\0';
}

/* repr(float(text)) as Python writes it */
static int put_float(sbuf *b, const char *text)
{
    double x = strtod(text, NULL);
    if (isinf(x))
        return puts0(b, x < 0 ? "-Infinity" : "Infinity");
    if (x == 0)
        return puts0(b, signbit(x) ? "-0.0" : "0.0");
    char digits[24], out[64];
    int exp10;
    shortest_digits(fabs(x), digits, &exp10);
    size_t nd = strlen(digits), k = 0;
    if (x < 0)
        out[k++] = '-';
    if (exp10 < -4 || exp10 >= 16) {   /* d[.ddd]e+XX */
        out[k++] = digits[0];
        if (nd > 1) {
            out[k++] = '.';
            memcpy(out + k, digits + 1, nd - 1), k += nd - 1;
        }
        snprintf(out + k, sizeof out - k, "e%c%02d", exp10 < 0 ? '-' : '+', abs(exp10));
    } else if (exp10 < 0) {            /* 0.000ddd */
        out[k++] = '0', out[k++] = '.';
        for (int z = 0; z < -exp10 - 1; z++)
            out[k++] = '0';
        memcpy(out + k, digits, nd), k += nd;
        out[k] = '\0';
    } else {                           /* ddd.ddd, ddd000.0 */
        size_t whole = (size_t)exp10 + 1;
        for (size_t i = 0; i < whole; i++)
            out[k++] = i < nd ? digits[i] : '0';
        out[k++] = '.';
        if (nd > whole)
            memcpy(out + k, digits + whole, nd - whole), k += nd - whole;
        else
            out[k++] = '0';
        out[k] = '\0';
    }
    return puts0(b, out);
}

/* A number's raw JSON text as Python prints the value json.loads makes of it */
static int put_number(sbuf *b, const jv *v)
{
    if (strpbrk(v->s, ".eE"))
        return put_float(b, v->s);
    const char *d = v->s[0] == '-' ? v->s + 1 : v->s;   /* an int: its digits ("-0": 0) */
    return puts0(b, strcmp(d, "0") == 0 ? "0" : v->s);
}

static int newline(sbuf *b, int indent, int level)
{
    NNT_TRY(puts0(b, "\n"));
    for (int i = 0; i < indent * level; i++)
        NNT_TRY(puts0(b, " "));
    return NNT_OK;
}

/* 1 when o's key k is given again before it (a later one stands for it) */
int hft_jv_repeated(const jv *o, size_t k)
{
    for (size_t e = 0; e < k; e++)
        if (strcmp(o->keys[e], o->keys[k]) == 0)
            return 1;
    return 0;
}

/* The last value of o's key k */
const jv *hft_jv_last_value(const jv *o, size_t k)
{
    size_t last = k;
    for (size_t e = k + 1; e < o->n; e++)
        if (strcmp(o->keys[e], o->keys[k]) == 0)
            last = e;
    return &o->items[last];
}

static int dump(sbuf *b, const jv *v, int indent, int level);

static int dump_container(sbuf *b, const jv *v, int indent, int level)
{
    int obj = v->type == JV_OBJ, first = 1;
    NNT_TRY(puts0(b, obj ? "{" : "["));
    for (size_t k = 0; k < v->n; k++) {
        if (obj && hft_jv_repeated(v, k))
            continue;
        if (!first)
            NNT_TRY(puts0(b, indent < 0 ? ", " : ","));
        if (indent >= 0)
            NNT_TRY(newline(b, indent, level + 1));
        first = 0;
        if (obj) {
            NNT_TRY(put_string(b, v->keys[k], strlen(v->keys[k])));
            NNT_TRY(puts0(b, ": "));
        }
        NNT_TRY(dump(b, obj ? hft_jv_last_value(v, k) : &v->items[k], indent, level + 1));
    }
    if (indent >= 0 && !first)
        NNT_TRY(newline(b, indent, level));
    return puts0(b, obj ? "}" : "]");
}

static int dump(sbuf *b, const jv *v, int indent, int level)
{
    switch (v->type) {
    case JV_NULL: return puts0(b, "null");
    case JV_BOOL: return puts0(b, v->b ? "true" : "false");
    case JV_NUM: return put_number(b, v);
    case JV_STR: return put_string(b, v->s, v->len);
    default: return dump_container(b, v, indent, level);
    }
}

int hft_jv_tojson(sbuf *b, const jv *v, int indent)
{
    /* numbers read and written in the C locale, whatever the program's LC_NUMERIC */
    locale_t c = newlocale(LC_NUMERIC_MASK, "C", (locale_t)0);
    locale_t old = c ? uselocale(c) : (locale_t)0;
    int rc = dump(b, v, indent, 0);
    if (c) {
        uselocale(old);
        freelocale(c);
    }
    return rc;
}
