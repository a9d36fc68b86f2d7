/* SPDX-License-Identifier: MIT */
/* tokenizer.json pre-tokenizers (part of the reader, hftok.c): the "pre_tokenizer" section's
 * items (Sequence, Split, ByteLevel, Metaspace, Digits) and the splitting of normalized text
 * into pieces (PCRE2 in UTF + UCP mode for regex patterns), each piece then given to the model
 * (hft_bpe_piece, hftok_model.c). */
#include "hftok_impl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int behavior_of(loader *l, const jv *o, const char *path, int *b)
{
    static const char *names[] = {"Removed", "Isolated", "MergedWithPrevious", "MergedWithNext",
                                  "Contiguous"};
    const char *s;
    int rc = hft_get_str(l, o, path, "behavior", 0, &s, NULL);
    if (rc)
        return rc;
    for (int i = 0; i < 5; i++)
        if (strcmp(s, names[i]) == 0) {
            *b = i;
            return 0;
        }
    char k[256];
    snprintf(k, sizeof k, "%s.behavior", path);
    return hft_unsupported(l, k, s, "Removed, Isolated, MergedWithPrevious, MergedWithNext, "
                           "Contiguous");
}

static int compile_fixed(loader *l, const char *pat, pcre2_code **re)
{
    int ecode;
    PCRE2_SIZE eoff;
    *re = pcre2_compile((PCRE2_SPTR)pat, PCRE2_ZERO_TERMINATED, PCRE2_UTF | PCRE2_UCP, &ecode,
                        &eoff, NULL);
    if (!*re)
        return nnt_io_errf(l->err, l->errlen, NNT_E_UNSUPPORTED, "%s: PCRE2 cannot compile "
                           "\"%s\" (no Unicode support?)", l->what, pat);
    pcre2_jit_compile(*re, PCRE2_JIT_COMPLETE);
    return 0;
}

#define GPT2_PATTERN "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+"

int hft_prepend_scheme(loader *l, const jv *o, const char *path, int *scheme)
{
    const char *s;
    int rc = hft_get_str(l, o, path, "prepend_scheme", 1, &s, NULL), b;
    if (rc)
        return rc;
    if (!s) { /* older files: add_prefix_space */
        rc = hft_get_bool(l, o, path, "add_prefix_space", 1, &b);
        *scheme = b ? PREPEND_ALWAYS : PREPEND_NEVER;
        return rc;
    }
    if (strcmp(s, "always") == 0)
        *scheme = PREPEND_ALWAYS;
    else if (strcmp(s, "first") == 0)
        *scheme = PREPEND_FIRST;
    else if (strcmp(s, "never") == 0)
        *scheme = PREPEND_NEVER;
    else {
        char k[256];
        snprintf(k, sizeof k, "%s.prepend_scheme", path);
        return hft_unsupported(l, k, s, "always, first, never");
    }
    return 0;
}

int hft_one_char(loader *l, const jv *o, const char *path, const char *key, char **s,
                 size_t *n)
{
    const char *v;
    size_t len;
    uint32_t cp;
    int rc = hft_get_str(l, o, path, key, 0, &v, &len);
    if (rc)
        return rc;
    if (len == 0 || (size_t)nnt_utf8_decode((const unsigned char *)v, len, &cp) != len) {
        char k[256];
        snprintf(k, sizeof k, "%s.%s", path, key);
        return hft_bad(l, k, "is not one character");
    }
    return hft_dupstr(l, v, len, s, n);
}

int hft_pretokenizer_item(loader *l, const jv *o, const char *path)
{
    int rc, b;
    const char *type = hft_type_of(l, o, path, &rc);
    char k[256];
    snprintf(k, sizeof k, "%s.type", path);
    if (rc)
        return rc;
    nnt_hftok *t = l->t;
    pre_step *st = NULL;
    if (strcmp(type, "Split") == 0) {
        if (!(st = hft_push_step(l, (void **)&t->pre, &t->npre, sizeof *st, &rc)))
            return rc;
        st->kind = PRE_SPLIT;
        if ((rc = hft_get_pattern(l, o, path, 1, &st->lit, &st->litlen, &st->re)) != 0 ||
            (rc = behavior_of(l, o, path, &st->behavior)) != 0 ||
            (rc = hft_get_bool(l, o, path, "invert", 0, &b)) != 0)
            return rc;
        if (b) {
            snprintf(k, sizeof k, "%s.invert", path);
            return hft_unsupported(l, k, "true", "false");
        }
        if (!st->re && st->litlen == 0)
            return hft_bad(l, path, "splits on an empty string");
        return 0;
    }
    if (strcmp(type, "Digits") == 0) {
        if ((rc = hft_get_bool(l, o, path, "individual_digits", 0, &b)) != 0 ||
            !(st = hft_push_step(l, (void **)&t->pre, &t->npre, sizeof *st, &rc)))
            return rc;
        st->kind = PRE_SPLIT;
        st->behavior = b ? SPLIT_ISOLATED : SPLIT_CONTIGUOUS;
        return compile_fixed(l, "\\p{N}", &st->re);
    }
    if (strcmp(type, "ByteLevel") == 0) {
        int prefix, use_regex;
        if ((rc = hft_get_bool(l, o, path, "add_prefix_space", 1, &prefix)) != 0 ||
            (rc = hft_get_bool(l, o, path, "use_regex", 1, &use_regex)) != 0 ||
            !(st = hft_push_step(l, (void **)&t->pre, &t->npre, sizeof *st, &rc)))
            return rc;
        st->kind = PRE_BYTELEVEL;
        st->prefix_space = prefix;
        st->behavior = SPLIT_ISOLATED;
        t->bytelevel = 1;
        return use_regex ? compile_fixed(l, GPT2_PATTERN, &st->re) : 0;
    }
    if (strcmp(type, "Metaspace") == 0) {
        if (!(st = hft_push_step(l, (void **)&t->pre, &t->npre, sizeof *st, &rc)))
            return rc;
        st->kind = PRE_METASPACE;
        st->behavior = SPLIT_NEXT;
        if ((rc = hft_one_char(l, o, path, "replacement", &st->lit, &st->litlen)) != 0 ||
            (rc = hft_prepend_scheme(l, o, path, &st->prepend)) != 0)
            return rc;
        return hft_get_bool(l, o, path, "split", 1, &st->split);
    }
    return hft_unsupported(l, k, type, "Sequence, Split, ByteLevel, Metaspace, Digits");
}

/* Split each current piece at the matches of a step (regex or literal) with its behavior. */
static int find_match(enc *e, const pre_step *st, const char *s, size_t len, size_t from,
                      size_t *ms, size_t *me)
{
    if (!st->re) {
        for (size_t i = from; i + st->litlen <= len; i++)
            if (memcmp(s + i, st->lit, st->litlen) == 0) {
                *ms = i;
                *me = i + st->litlen;
                return 1;
            }
        return 0;
    }
    for (;;) {
        int rc = pcre2_match(st->re, (PCRE2_SPTR)s, len, from, PCRE2_NO_UTF_CHECK, e->md, NULL);
        if (rc < 0)
            return rc == PCRE2_ERROR_NOMATCH ? 0 : rc;
        PCRE2_SIZE *ov = pcre2_get_ovector_pointer(e->md);
        if (ov[1] > ov[0]) {
            *ms = ov[0];
            *me = ov[1];
            return 1;
        }
        /* an empty match: look again one character further */
        from = ov[0] + 1;
        while (from < len && ((unsigned char)s[from] & 0xc0) == 0x80)
            from++;
        if (from > len)
            return 0;
    }
}

static int split_piece(enc *e, const pre_step *st, const span *p)
{
    const char *s = e->buf[e->cur].p + p->off;
    int out = !e->cur, rc;
    /* segments (start, end, is_match) in order, then the behavior */
    size_t pos = 0, ms, me, pend_s = 0, pend_e = 0;
    int pend = 0, pend_match = 0; /* a pending output piece not yet pushed */
#define FLUSH()                                                                           \
    do {                                                                                  \
        if (pend && (rc = hft_push_span(e, out, p->off + pend_s, pend_e - pend_s,         \
                                        p->at0 && pend_s == 0)) != 0)                     \
            return rc;                                                                    \
        pend = 0;                                                                         \
    } while (0)
    for (;;) {
        int found = find_match(e, st, s, p->len, pos, &ms, &me);
        if (found < 0)
            return nnt_io_errf(e->err, e->errlen, NNT_E_INVAL, "regex match failed (PCRE2 "
                               "error %d)", found);
        size_t gs = pos, ge = found ? ms : p->len;
        for (int seg = 0; seg < 1 + found; seg++) {
            size_t a = seg ? ms : gs, b = seg ? me : ge;
            int is_match = seg;
            if (a == b)
                continue;
            switch (st->behavior) {
            case SPLIT_REMOVED:
                FLUSH();
                if (!is_match)
                    pend = 1, pend_s = a, pend_e = b;
                break;
            case SPLIT_ISOLATED:
                FLUSH();
                pend = 1, pend_s = a, pend_e = b;
                break;
            case SPLIT_PREV: /* a match joins the non-match before it */
                if (is_match && pend && !pend_match) {
                    pend_e = b;
                    pend_match = 1;
                    break;
                }
                FLUSH();
                pend = 1, pend_s = a, pend_e = b, pend_match = is_match;
                break;
            case SPLIT_NEXT: /* a match joins the non-match after it */
                if (!is_match && pend && pend_match && pend_e == a) {
                    pend_e = b;
                    pend_match = 0;
                    break;
                }
                FLUSH();
                pend = 1, pend_s = a, pend_e = b, pend_match = is_match;
                break;
            default: /* SPLIT_CONTIGUOUS: runs of matches together */
                if (is_match && pend && pend_match && pend_e == a) {
                    pend_e = b;
                    break;
                }
                FLUSH();
                pend = 1, pend_s = a, pend_e = b, pend_match = is_match;
                break;
            }
        }
        if (!found)
            break;
        pos = me;
    }
    FLUSH();
#undef FLUSH
    return 0;
}

/* Rewrite every current piece into the other buffer: ByteLevel (prefix space, byte mapping)
 * or Metaspace (spaces replaced, prefix). */
static int rewrite_pieces(enc *e, const pre_step *st, int map)
{
    const nnt_hftok *t = e->t;
    int in = e->cur, out = !e->cur, rc;
    sbuf *ob = &e->buf[out];
    ob->n = 0;
    e->nsp[out] = 0;
    for (size_t i = 0; i < e->nsp[in]; i++) {
        span p = e->sp[in][i];
        const char *s = e->buf[in].p + p.off;
        size_t start = ob->n;
        if (st->kind == PRE_BYTELEVEL && map) {
            for (size_t k = 0; k < p.len; k++) {
                unsigned char u[4];
                uint32_t cp = t->byte_cp[(unsigned char)s[k]];
                size_t n = cp < 0x80 ? (u[0] = (unsigned char)cp, 1)
                                     : (u[0] = (unsigned char)(0xc0 | cp >> 6),
                                        u[1] = (unsigned char)(0x80 | (cp & 0x3f)), 2);
                if (hft_sb_put(ob, u, n))
                    return hft_enc_nomem(e);
            }
        } else if (st->kind == PRE_BYTELEVEL) {
            if (st->prefix_space && s[0] != ' ' && hft_sb_put(ob, " ", 1))
                return hft_enc_nomem(e);
            if (hft_sb_put(ob, s, p.len))
                return hft_enc_nomem(e);
        } else { /* PRE_METASPACE */
            int starts = p.len >= st->litlen && memcmp(s, st->lit, st->litlen) == 0;
            starts |= s[0] == ' ';
            if (!starts && (st->prepend == PREPEND_ALWAYS || (st->prepend == PREPEND_FIRST && p.at0)))
                if (hft_sb_put(ob, st->lit, st->litlen))
                    return hft_enc_nomem(e);
            for (size_t k = 0; k < p.len; k++)
                if (s[k] == ' ' ? hft_sb_put(ob, st->lit, st->litlen) : hft_sb_put(ob, s + k, 1))
                    return hft_enc_nomem(e);
        }
        if ((rc = hft_push_span(e, out, start, ob->n - start, p.at0)) != 0)
            return rc;
    }
    e->cur = out;
    return 0;
}

static int split_pieces(enc *e, const pre_step *st)
{
    int in = e->cur, out = !e->cur, rc;
    e->nsp[out] = 0;
    for (size_t i = 0; i < e->nsp[in]; i++)
        if ((rc = split_piece(e, st, &e->sp[in][i])) != 0)
            return rc;
    /* the spans point into buf[in]: swap the span lists only */
    span *tmp = e->sp[in];
    size_t tcap = e->spcap[in];
    e->sp[in] = e->sp[out];
    e->spcap[in] = e->spcap[out];
    e->nsp[in] = e->nsp[out];
    e->sp[out] = tmp;
    e->spcap[out] = tcap;
    e->nsp[out] = 0;
    return 0;
}

/* Pre-tokenize s (normalized text) and run the model on each piece. */
int hft_pretokenize_and_model(enc *e, const char *s, size_t len, int at0)
{
    const nnt_hftok *t = e->t;
    int rc;
    e->cur = 0;
    e->buf[0].n = 0;
    e->nsp[0] = 0;
    if (hft_sb_put(&e->buf[0], s, len))
        return hft_enc_nomem(e);
    if ((rc = hft_push_span(e, 0, 0, len, at0)) != 0)
        return rc;
    for (size_t k = 0; k < t->npre; k++) {
        const pre_step *st = &t->pre[k];
        if (st->kind == PRE_SPLIT) {
            rc = split_pieces(e, st);
        } else if (st->kind == PRE_BYTELEVEL) {
            if ((rc = rewrite_pieces(e, st, 0)) == 0 && (!st->re || (rc = split_pieces(e, st)) == 0))
                rc = rewrite_pieces(e, st, 1);
        } else {
            pre_step sp = *st;
            sp.re = NULL;
            if ((rc = rewrite_pieces(e, st, 0)) == 0 && st->split)
                rc = split_pieces(e, &sp);
        }
        if (rc)
            return rc;
    }
    for (size_t i = 0; i < e->nsp[e->cur]; i++) {
        const span *p = &e->sp[e->cur][i];
        if ((rc = hft_bpe_piece(e, e->buf[e->cur].p + p->off, p->len)) != 0)
            return rc;
    }
    return 0;
}
