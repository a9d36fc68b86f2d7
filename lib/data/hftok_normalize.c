/* SPDX-License-Identifier: MIT */
/* tokenizer.json normalizers (part of the reader, hftok.c): the "normalizer" section's items
 * (Sequence, Prepend, Replace with a string pattern, NFC, NFD, NFKC, NFKD) and their chain
 * applied to a text segment, the Unicode forms through utf8proc as the `tokenizers` package. */
#include "hftok_impl.h"

#include <utf8proc.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int hft_normalizer_item(loader *l, const jv *o, const char *path)
{
    int rc;
    const char *type = hft_type_of(l, o, path, &rc), *s;
    size_t n;
    char k[256];
    snprintf(k, sizeof k, "%s.type", path);
    if (rc)
        return rc;
    nnt_hftok *t = l->t;
    norm_step *st;
    if (strcmp(type, "Prepend") == 0) {
        if ((rc = hft_get_str(l, o, path, "prepend", 0, &s, &n)) != 0 ||
            !(st = hft_push_step(l, (void **)&t->norm, &t->nnorm, sizeof *st, &rc)))
            return rc;
        st->kind = NORM_PREPEND;
        return hft_dupstr(l, s, n, &st->a, &st->alen);
    }
    if (strcmp(type, "Replace") == 0) {
        if ((rc = hft_get_str(l, o, path, "content", 0, &s, &n)) != 0 ||
            !(st = hft_push_step(l, (void **)&t->norm, &t->nnorm, sizeof *st, &rc)))
            return rc;
        st->kind = NORM_REPLACE;
        pcre2_code *re;
        if ((rc = hft_dupstr(l, s, n, &st->b, &st->blen)) != 0 ||
            (rc = hft_get_pattern(l, o, path, 0, &st->a, &st->alen, &re)) != 0)
            return rc;
        if (st->alen == 0)
            return hft_bad(l, path, "replaces an empty pattern");
        return 0;
    }
    static const char *const forms[4] = {"NFC", "NFD", "NFKC", "NFKD"};
    for (int f = 0; f < 4; f++) {
        if (strcmp(type, forms[f]) == 0) {
            if (!(st = hft_push_step(l, (void **)&t->norm, &t->nnorm, sizeof *st, &rc)))
                return rc;
            st->kind = NORM_NFC + f;
            return 0;
        }
    }
    return hft_unsupported(l, k, type, "Sequence, Prepend, Replace, NFC, NFD, NFKC, NFKD");
}

/* out = the normalization form kind (NORM_NFC ...) of in (valid UTF-8: the text was cut at
 * invalid bytes before): canonical (NFC, NFD) or compatibility (NFKC, NFKD) decomposition,
 * composed again for NFC / NFKC, as the `tokenizers` package's normalizers. -1: out of
 * memory (utf8proc fails on nothing else with valid input). */
static int unicode_form(int kind, const sbuf *in, sbuf *out)
{
    utf8proc_option_t opt = UTF8PROC_STABLE;
    opt |= kind == NORM_NFC || kind == NORM_NFKC ? UTF8PROC_COMPOSE : UTF8PROC_DECOMPOSE;
    if (kind == NORM_NFKC || kind == NORM_NFKD)
        opt |= UTF8PROC_COMPAT;
    if (in->n == 0)
        return 0;
    utf8proc_uint8_t *res = NULL;
    utf8proc_ssize_t n = utf8proc_map((const utf8proc_uint8_t *)in->p, (utf8proc_ssize_t)in->n,
                                      &res, opt);
    int rc = n < 0 ? -1 : hft_sb_put(out, res, (size_t)n);
    free(res);
    return rc;
}

/* Apply the normalizer chain to nb in place. -1: out of memory. */
int hft_normalize(const nnt_hftok *t, sbuf *nb)
{
    sbuf tmp = {0};
    for (size_t k = 0; k < t->nnorm; k++) {
        const norm_step *st = &t->norm[k];
        tmp.n = 0;
        if (st->kind == NORM_PREPEND) {
            if (nb->n && (hft_sb_put(&tmp, st->a, st->alen) || hft_sb_put(&tmp, nb->p, nb->n)))
                goto oom;
        } else if (st->kind != NORM_REPLACE) {
            if (unicode_form(st->kind, nb, &tmp))
                goto oom;
        } else {
            for (size_t i = 0; i < nb->n;) {
                int hit = i + st->alen <= nb->n && memcmp(nb->p + i, st->a, st->alen) == 0;
                if (hit ? hft_sb_put(&tmp, st->b, st->blen) : hft_sb_put(&tmp, nb->p + i, 1))
                    goto oom;
                i += hit ? st->alen : 1;
            }
        }
        sbuf sw = *nb;
        *nb = tmp;
        tmp = sw;
    }
    free(tmp.p);
    return 0;
oom:
    free(tmp.p);
    return -1;
}
