/* SPDX-License-Identifier: MIT */
/* tokenizer.json decoders (part of the reader, hftok.c): the "decoder" section's items
 * (Sequence, ByteLevel, Replace, ByteFallback, Fuse, Strip, Metaspace) and decoding: ids ->
 * token strings -> the decoder chain (a list of byte strings) -> bytes. */
#include "hftok_impl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int hft_decoder_item(loader *l, const jv *o, const char *path)
{
    int rc;
    const char *type = hft_type_of(l, o, path, &rc), *s;
    size_t n;
    char k[256];
    snprintf(k, sizeof k, "%s.type", path);
    if (rc)
        return rc;
    nnt_hftok *t = l->t;
    dec_step *st;
    if (!(st = hft_push_step(l, (void **)&t->dec, &t->ndec, sizeof *st, &rc)))
        return rc;
    if (strcmp(type, "ByteLevel") == 0) {
        st->kind = DEC_BYTELEVEL;
    } else if (strcmp(type, "ByteFallback") == 0) {
        st->kind = DEC_BYTEFALLBACK;
    } else if (strcmp(type, "Fuse") == 0) {
        st->kind = DEC_FUSE;
    } else if (strcmp(type, "Replace") == 0) {
        pcre2_code *re;
        st->kind = DEC_REPLACE;
        if ((rc = hft_get_str(l, o, path, "content", 0, &s, &n)) != 0 ||
            (rc = hft_dupstr(l, s, n, &st->b, &st->blen)) != 0 ||
            (rc = hft_get_pattern(l, o, path, 0, &st->a, &st->alen, &re)) != 0)
            return rc;
        if (st->alen == 0)
            return hft_bad(l, path, "replaces an empty pattern");
    } else if (strcmp(type, "Strip") == 0) {
        st->kind = DEC_STRIP;
        if ((rc = hft_one_char(l, o, path, "content", &st->a, &st->alen)) != 0 ||
            (rc = hft_get_long(l, o, path, "start", &st->start)) != 0 ||
            (rc = hft_get_long(l, o, path, "stop", &st->stop)) != 0)
            return rc;
    } else if (strcmp(type, "Metaspace") == 0) {
        st->kind = DEC_METASPACE;
        if ((rc = hft_one_char(l, o, path, "replacement", &st->a, &st->alen)) != 0 ||
            (rc = hft_prepend_scheme(l, o, path, &st->prepend)) != 0)
            return rc;
    } else {
        return hft_unsupported(l, k, type, "Sequence, ByteLevel, Replace, ByteFallback, Fuse, "
                               "Strip, Metaspace");
    }
    return 0;
}

/* ---- decoding --------------------------------------------------------------------------------- */
/* A list of token strings: spans into one buffer. */
typedef struct {
    sbuf b;
    size_t *off, *len;
    size_t n, cap;
} toklist;

static int tl_add(toklist *l, const char *s, size_t n)
{
    if (l->n == l->cap) {
        size_t c = l->cap ? 2 * l->cap : 64;
        size_t *o = realloc(l->off, c * sizeof *o), *q;
        if (!o)
            return -1;
        l->off = o;
        q = realloc(l->len, c * sizeof *q);
        if (!q)
            return -1;
        l->len = q;
        l->cap = c;
    }
    l->off[l->n] = l->b.n;
    l->len[l->n] = n;
    l->n++;
    return hft_sb_put(&l->b, s, n);
}

/* Append to the last token. */
static int tl_cat(toklist *l, const char *s, size_t n)
{
    l->len[l->n - 1] += n;
    return hft_sb_put(&l->b, s, n);
}

static void tl_free(toklist *l)
{
    free(l->b.p);
    free(l->off);
    free(l->len);
}

static int hexval(char c)
{
    return c >= '0' && c <= '9' ? c - '0' : c >= 'A' && c <= 'F' ? c - 'A' + 10
         : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

/* "<0xXX>" -> the byte, or -1. */
static int byte_token(const char *s, size_t n)
{
    if (n != 6 || memcmp(s, "<0x", 3) != 0 || s[5] != '>')
        return -1;
    int h = hexval(s[3]), l = hexval(s[4]);
    return h < 0 || l < 0 ? -1 : h * 16 + l;
}

static int dec_step_apply(const nnt_hftok *t, const dec_step *st, const toklist *in, toklist *o)
{
    int pending_bytes = 0; /* ByteFallback: the last output token collects bytes */
    if ((st->kind == DEC_BYTELEVEL || st->kind == DEC_FUSE) && tl_add(o, "", 0))
        return -1;
    for (size_t i = 0; i < in->n; i++) {
        const char *s = in->b.p + in->off[i];
        size_t n = in->len[i];
        switch (st->kind) {
        case DEC_FUSE:
            if (tl_cat(o, s, n))
                return -1;
            break;
        case DEC_BYTELEVEL: {
            /* every character back to its byte, or the token as written */
            size_t k = 0, nb = 0;
            unsigned char tmp[256], *bytes = n <= sizeof tmp ? tmp : malloc(n);
            if (!bytes)
                return -1;
            while (k < n) {
                uint32_t cp;
                int c = nnt_utf8_decode((const unsigned char *)s + k, n - k, &cp);
                if (c <= 0 || cp >= 324 || t->cp_byte[cp] < 0)
                    break;
                bytes[nb++] = (unsigned char)t->cp_byte[cp];
                k += (size_t)c;
            }
            int rc = k == n ? tl_cat(o, (const char *)bytes, nb) : tl_cat(o, s, n);
            if (bytes != tmp)
                free(bytes);
            if (rc)
                return -1;
            break;
        }
        case DEC_BYTEFALLBACK: {
            int b = byte_token(s, n);
            char c = (char)b;
            if (b >= 0 && pending_bytes ? tl_cat(o, &c, 1) : b >= 0 ? tl_add(o, &c, 1)
                                                                    : tl_add(o, s, n))
                return -1;
            pending_bytes = b >= 0;
            break;
        }
        case DEC_REPLACE:
        case DEC_METASPACE: {
            const char *pat = st->a;
            size_t plen = st->alen;
            const char *rep = st->kind == DEC_REPLACE ? st->b : " ";
            size_t rlen = st->kind == DEC_REPLACE ? st->blen : 1;
            if (st->kind == DEC_METASPACE && i == 0 && st->prepend != PREPEND_NEVER)
                rlen = 0;
            if (tl_add(o, "", 0))
                return -1;
            for (size_t k = 0; k < n;) {
                int hit = k + plen <= n && memcmp(s + k, pat, plen) == 0;
                if (hit ? tl_cat(o, rep, rlen) : tl_cat(o, s + k, 1))
                    return -1;
                k += hit ? plen : 1;
            }
            break;
        }
        default: { /* DEC_STRIP: up to start leading and stop trailing copies of the char */
            size_t a = 0, z = n, c = st->alen;
            for (long k = 0; k < st->start && a + c <= z && memcmp(s + a, st->a, c) == 0; k++)
                a += c;
            for (long k = 0; k < st->stop && z >= a + c && memcmp(s + z - c, st->a, c) == 0; k++)
                z -= c;
            if (tl_add(o, s + a, z - a))
                return -1;
        }
        }
    }
    return 0;
}

int nnt_hftok_decode(const nnt_hftok *t, const int32_t *ids, size_t n, char *out, size_t cap,
                     size_t *len, char *err, size_t errlen)
{
    toklist a = {0}, b = {0};
    int rc = 0;
    *len = 0;
    for (size_t i = 0; i < n && !rc; i++) {
        int32_t id = ids[i];
        int ok = id >= 0 && id < t->nids && (t->added_of_id[id] >= 0 || t->tokoff[id] != SIZE_MAX);
        if (!ok) {
            tl_free(&a);
            return nnt_io_errf(err, errlen, NNT_E_INVAL, "id %ld at position %zu is not in the "
                               "vocabulary (0..%ld with gaps)", (long)id, i, (long)t->nids - 1);
        }
        const added_tok *at = t->added_of_id[id] >= 0 ? &t->added[t->added_of_id[id]] : NULL;
        rc = at ? tl_add(&a, at->s, at->len) : tl_add(&a, t->arena.p + t->tokoff[id], t->toklen[id]);
    }
    for (size_t k = 0; k < t->ndec && !rc; k++) {
        b.b.n = 0;
        b.n = 0;
        rc = dec_step_apply(t, &t->dec[k], &a, &b);
        toklist sw = a;
        a = b;
        b = sw;
    }
    size_t total = 0;
    for (size_t i = 0; i < a.n; i++)
        total += a.len[i] + (!t->has_decoder && i > 0);
    if (rc) {
        rc = nnt_io_errf(err, errlen, NNT_E_NOMEM, "out of host memory while decoding");
    } else if (total > cap) {
        *len = total;
        rc = nnt_io_errf(err, errlen, NNT_E_INVAL, "%zu bytes do not fit in a buffer of %zu",
                         total, cap);
    } else {
        size_t p = 0;
        for (size_t i = 0; i < a.n; i++) {
            if (!t->has_decoder && i > 0) /* no decoder: the package joins with spaces */
                out[p++] = ' ';
            if (a.len[i] > 0)   /* an empty list may have no buffer (memcpy from NULL) */
                memcpy(out + p, a.b.p + a.off[i], a.len[i]);
            p += a.len[i];
        }
        *len = total;
    }
    tl_free(&a);
    tl_free(&b);
    return rc;
}
