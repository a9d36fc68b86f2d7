/* Hugging Face tokenizer.json: BPE models with their normalizers, pre-tokenizers, added tokens
 * and decoders, encoding as the `tokenizers` package does (add_special_tokens=False) and
 * decoding back to bytes. tests/test_hftok.c checks ids and decodes against the package on
 * the fixtures of tests/gen_hftok_fixtures.py.
 *
 * Pieces:
 *   reading      the file is read with lib/io's bounded JSON reader: "model" key by key, its
 *                vocab straight into the tables and its merges (a second pass at their
 *                offset, once the vocab is known); every other section into a small tree.
 *   encode       text -> valid UTF-8 runs (invalid bytes become byte tokens) -> added tokens
 *                (not normalized ones, then normalized ones after the normalizer) -> normalizer
 *                -> pre-tokenizers (a list of pieces) -> BPE per piece.
 *   BPE          symbols in a linked list and a heap of candidate pairs keyed (rank, position):
 *                lowest rank first, leftmost among equals, as the package.
 *   regex        Split patterns through PCRE2 in UTF + UCP mode (Unicode classes from PCRE2's
 *                tables, not ours).
 *   decode       ids -> token strings -> the decoder chain (a list of byte strings). */
#include "hftok.h"
#include "../io/io.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>
#include <utf8proc.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---- byte buffers --------------------------------------------------------------------------- */
typedef struct { char *p; size_t n, cap; } sbuf;

static int sb_put(sbuf *b, const void *s, size_t n)
{
    if (b->n + n > b->cap) {
        size_t c = b->cap ? b->cap : 64;
        while (c < b->n + n)
            c *= 2;
        char *q = realloc(b->p, c);
        if (!q)
            return -1;
        b->p = q;
        b->cap = c;
    }
    if (n)
        memcpy(b->p + b->n, s, n);
    b->n += n;
    return 0;
}

/* ---- a small JSON tree for the configuration sections ------------------------------------- */
enum { JV_NULL, JV_BOOL, JV_NUM, JV_STR, JV_ARR, JV_OBJ };
typedef struct jv {
    int type;
    int b;                        /* JV_BOOL                                                 */
    char *s;                      /* JV_STR (decoded), JV_NUM (the raw text)                 */
    size_t len;
    size_t n;                     /* JV_ARR / JV_OBJ: items                                  */
    char **keys;                  /* JV_OBJ                                                  */
    struct jv *items;
} jv;

static void jv_free(jv *v)
{
    if (!v)
        return;
    free(v->s);
    for (size_t i = 0; i < v->n; i++) {
        jv_free(&v->items[i]);
        if (v->keys)
            free(v->keys[i]);
    }
    free(v->items);
    free(v->keys);
    memset(v, 0, sizeof *v);
}

static int jv_parse(nnt_json *j, jv *v, int depth, const char *ctx);

static int jv_container(nnt_json *j, jv *v, int depth, const char *ctx, int obj)
{
    char close = obj ? '}' : ']';
    j->pos++;
    if (nnt_json_peek(j) == close) {
        j->pos++;
        return 0;
    }
    size_t cap = 0;
    for (;;) {
        if (v->n == cap) {
            cap = cap ? cap * 2 : 4;
            jv *it = realloc(v->items, cap * sizeof *it);
            char **k = obj ? realloc(v->keys, cap * sizeof *k) : NULL;
            if (it)
                v->items = it;
            if (k)
                v->keys = k;
            if (!it || (obj && !k))
                return nnt_io_errf(j->err, j->errlen, NNT_E_NOMEM, "%s: out of memory", j->what);
        }
        memset(&v->items[v->n], 0, sizeof *v->items);
        int rc;
        if (obj) {
            v->keys[v->n] = NULL;
            if ((rc = nnt_json_string(j, &v->keys[v->n], NULL, 1 << 20, 0, ctx)) != 0 ||
                (rc = nnt_json_expect(j, ':', ctx)) != 0) {
                v->n++;
                return rc;
            }
        }
        v->n++;
        if ((rc = jv_parse(j, &v->items[v->n - 1], depth + 1, ctx)) != 0)
            return rc;
        int c = nnt_json_peek(j);
        if (c == close) {
            j->pos++;
            return 0;
        }
        if ((rc = nnt_json_expect(j, ',', ctx)) != 0)
            return rc;
    }
}

static int jv_parse(nnt_json *j, jv *v, int depth, const char *ctx)
{
    memset(v, 0, sizeof *v);
    if (depth > 32)
        return nnt_json_fail(j, "nesting deeper than 32 %s", ctx);
    int c = nnt_json_peek(j);
    if (c == '{' || c == '[') {
        v->type = c == '{' ? JV_OBJ : JV_ARR;
        return jv_container(j, v, depth, ctx, c == '{');
    }
    if (c == '"') {
        v->type = JV_STR;
        return nnt_json_string(j, &v->s, &v->len, 1 << 24, 1, ctx);
    }
    size_t start = j->pos;
    int rc = nnt_json_skip(j, 1, ctx);
    if (rc)
        return rc;
    if (c == 't' || c == 'f') {
        v->type = JV_BOOL;
        v->b = c == 't';
    } else if (c == 'n') {
        v->type = JV_NULL;
    } else {
        v->type = JV_NUM;
        v->len = j->pos - start;
        v->s = malloc(v->len + 1);
        if (!v->s)
            return nnt_io_errf(j->err, j->errlen, NNT_E_NOMEM, "%s: out of memory", j->what);
        memcpy(v->s, j->buf + start, v->len);
        v->s[v->len] = 0;
    }
    return 0;
}

static const jv *jv_get(const jv *o, const char *key)
{
    if (!o || o->type != JV_OBJ)
        return NULL;
    for (size_t i = 0; i < o->n; i++)
        if (strcmp(o->keys[i], key) == 0)
            return &o->items[i];
    return NULL;
}

/* ---- the tokenizer ---------------------------------------------------------------------------- */
/* NFC ... NFKD: Unicode normalization forms, through utf8proc */
enum { NORM_PREPEND, NORM_REPLACE, NORM_NFC, NORM_NFD, NORM_NFKC, NORM_NFKD };
typedef struct { int kind; char *a, *b; size_t alen, blen; } norm_step;

enum { SPLIT_REMOVED, SPLIT_ISOLATED, SPLIT_PREV, SPLIT_NEXT, SPLIT_CONTIGUOUS };
enum { PRE_SPLIT, PRE_BYTELEVEL, PRE_METASPACE };
enum { PREPEND_ALWAYS, PREPEND_FIRST, PREPEND_NEVER };
typedef struct {
    int kind;
    pcre2_code *re;               /* PRE_SPLIT with a regex (NULL: the literal lit)          */
    char *lit;                    /* PRE_SPLIT literal; PRE_METASPACE: the replacement      */
    size_t litlen;
    int behavior;                 /* SPLIT_*                                                 */
    int prefix_space;             /* PRE_BYTELEVEL: add_prefix_space                         */
    int prepend, split;           /* PRE_METASPACE: PREPEND_*, split                         */
} pre_step;

enum { DEC_BYTELEVEL, DEC_REPLACE, DEC_BYTEFALLBACK, DEC_FUSE, DEC_STRIP, DEC_METASPACE };
typedef struct {
    int kind;
    char *a, *b;                  /* REPLACE pattern/content; STRIP, METASPACE: the char     */
    size_t alen, blen;
    long start, stop;             /* STRIP                                                   */
    int prepend;                  /* METASPACE: PREPEND_*                                    */
} dec_step;

typedef struct {
    char *s;
    size_t len;
    int32_t id;
    int normalized, special;
} added_tok;

struct nnt_hftok {
    int32_t nids;                 /* largest id + 1                                          */
    size_t *tokoff;               /* per id: offset of its spelling in arena (SIZE_MAX: gap)  */
    uint32_t *toklen;
    sbuf arena;
    uint64_t *vslot;              /* open addressing: hash << 32 | id of a spelling, 0 empty  */
    size_t vmask;
    uint64_t *mkey;               /* (a << 32 | b) + 1, 0 empty                              */
    uint64_t *mval;               /* rank << 32 | merged id                                  */
    size_t mmask, nmerges;
    added_tok *added;
    size_t nadded;
    int32_t *added_of_id;         /* per id: index in added, -1                              */
    unsigned char first_raw[256], first_norm[256]; /* first bytes of added tokens            */
    norm_step *norm;
    size_t nnorm;
    pre_step *pre;
    size_t npre;
    dec_step *dec;
    size_t ndec;
    int has_decoder;
    int bytelevel;                /* a ByteLevel pre-tokenizer: invalid bytes have a token   */
    int byte_fallback, ignore_merges, fuse_unk;
    int32_t unk;                  /* -1: none                                                */
    int32_t byte_id[256];         /* <0xXX> ids (byte_fallback) or -1                        */
    uint32_t byte_cp[256];        /* ByteLevel: byte -> code point                           */
    int16_t cp_byte[324];         /* ... and back (code points < 324), -1                    */
};

static uint64_t fnv(const char *s, size_t n)
{
    uint64_t h = 0xcbf29ce484222325ULL;
    for (size_t i = 0; i < n; i++)
        h = (h ^ (unsigned char)s[i]) * 0x100000001b3ULL;
    return h;
}

static uint64_t mix(uint64_t k)
{
    k ^= k >> 33;
    k *= 0xff51afd7ed558ccdULL;
    k ^= k >> 33;
    return k;
}

/* The slot word of a spelling's hash: the high 32 bits (never 0) and room for the id. */
static uint64_t vocab_tag(uint64_t h) { return (h & 0xffffffff00000000ULL) | 1ULL << 32; }

static int32_t vocab_find(const nnt_hftok *t, const char *s, size_t n)
{
    uint64_t h = fnv(s, n), tag = vocab_tag(h);
    for (size_t i = h & t->vmask;; i = (i + 1) & t->vmask) {
        uint64_t v = t->vslot[i];
        if (v == 0)
            return -1;
        int32_t id = (int32_t)(uint32_t)v;
        if ((v & 0xffffffff00000000ULL) == tag && t->toklen[id] == n &&
            memcmp(t->arena.p + t->tokoff[id], s, n) == 0)
            return id;
    }
}

static int merge_find(const nnt_hftok *t, int32_t a, int32_t b, uint32_t *rank, int32_t *id)
{
    uint64_t key = ((uint64_t)(uint32_t)a << 32 | (uint32_t)b) + 1;
    for (size_t i = mix(key) & t->mmask;; i = (i + 1) & t->mmask) {
        if (t->mkey[i] == 0)
            return 0;
        if (t->mkey[i] == key) {
            *rank = (uint32_t)(t->mval[i] >> 32);
            *id = (int32_t)(uint32_t)t->mval[i];
            return 1;
        }
    }
}

static void merge_put(nnt_hftok *t, int32_t a, int32_t b, uint32_t rank, int32_t id)
{
    uint64_t key = ((uint64_t)(uint32_t)a << 32 | (uint32_t)b) + 1;
    size_t i = mix(key) & t->mmask;
    while (t->mkey[i] != 0 && t->mkey[i] != key)
        i = (i + 1) & t->mmask;
    if (t->mkey[i] == 0)
        t->nmerges++;
    t->mkey[i] = key;
    t->mval[i] = (uint64_t)rank << 32 | (uint32_t)id; /* a later duplicate keeps its rank */
}

static size_t pow2_at_least(size_t n)
{
    size_t p = 16;
    while (p < n)
        p *= 2;
    return p;
}

void nnt_hftok_free(nnt_hftok *t)
{
    if (!t)
        return;
    free(t->tokoff);
    free(t->toklen);
    free(t->arena.p);
    free(t->vslot);
    free(t->mkey);
    free(t->mval);
    for (size_t i = 0; i < t->nadded; i++)
        free(t->added[i].s);
    free(t->added);
    free(t->added_of_id);
    for (size_t i = 0; i < t->nnorm; i++) {
        free(t->norm[i].a);
        free(t->norm[i].b);
    }
    free(t->norm);
    for (size_t i = 0; i < t->npre; i++) {
        pcre2_code_free(t->pre[i].re);
        free(t->pre[i].lit);
    }
    free(t->pre);
    for (size_t i = 0; i < t->ndec; i++) {
        free(t->dec[i].a);
        free(t->dec[i].b);
    }
    free(t->dec);
    free(t);
}

int32_t nnt_hftok_vocab_size(const nnt_hftok *t) { return t ? t->nids : 0; }

static void bytelevel_tables(nnt_hftok *t)
{
    uint32_t extra = 256;
    for (int i = 0; i < 324; i++)
        t->cp_byte[i] = -1;
    for (unsigned b = 0; b < 256; b++) {
        int printable = (b >= 0x21 && b <= 0x7e) || (b >= 0xa1 && b <= 0xac) || b >= 0xae;
        t->byte_cp[b] = printable ? b : extra++;
        t->cp_byte[t->byte_cp[b]] = (int16_t)b;
    }
}

/* ---- loading ---------------------------------------------------------------------------------- */
typedef struct {
    nnt_hftok *t;
    const char *what;             /* the file, for messages                                 */
    char *err;
    size_t errlen;
} loader;

static int unsupported(loader *l, const char *key, const char *value, const char *supported)
{
    return nnt_io_errf(l->err, l->errlen, NNT_E_UNSUPPORTED, "%s: %s \"%s\" is not supported%s%s%s",
                       l->what, key, value, supported ? " (supported: " : "",
                       supported ? supported : "", supported ? ")" : "");
}

static int bad(loader *l, const char *key, const char *what)
{
    return nnt_io_errf(l->err, l->errlen, NNT_E_FORMAT, "%s: %s %s", l->what, key, what);
}

static int nomem(loader *l)
{
    return nnt_io_errf(l->err, l->errlen, NNT_E_NOMEM, "%s: out of host memory", l->what);
}

/* A string member (required unless opt); *s NULL when absent/null and optional. */
static int get_str(loader *l, const jv *o, const char *path, const char *key, int opt,
                   const char **s, size_t *len)
{
    const jv *v = jv_get(o, key);
    *s = NULL;
    if (len)
        *len = 0;
    char k[256];
    snprintf(k, sizeof k, "%s.%s", path, key);
    if (!v || v->type == JV_NULL) {
        if (opt)
            return 0;
        return bad(l, k, "is missing");
    }
    if (v->type != JV_STR)
        return bad(l, k, "is not a string");
    *s = v->s;
    if (len)
        *len = v->len;
    return 0;
}

/* A boolean member; def when absent. */
static int get_bool(loader *l, const jv *o, const char *path, const char *key, int def, int *b)
{
    const jv *v = jv_get(o, key);
    *b = def;
    if (!v || v->type == JV_NULL)
        return 0;
    if (v->type != JV_BOOL) {
        char k[256];
        snprintf(k, sizeof k, "%s.%s", path, key);
        return bad(l, k, "is not true or false");
    }
    *b = v->b;
    return 0;
}

static int get_long(loader *l, const jv *o, const char *path, const char *key, long *out)
{
    const jv *v = jv_get(o, key);
    char k[256], *end;
    snprintf(k, sizeof k, "%s.%s", path, key);
    if (!v || v->type != JV_NUM)
        return bad(l, k, "is not a number");
    *out = strtol(v->s, &end, 10);
    if (*end || *out < 0 || *out > 1000000)
        return bad(l, k, "is not a non-negative integer");
    return 0;
}

static int dupstr(loader *l, const char *s, size_t n, char **out, size_t *outlen)
{
    *out = malloc(n + 1);
    if (!*out)
        return nomem(l);
    memcpy(*out, s, n);
    (*out)[n] = 0;
    if (outlen)
        *outlen = n;
    return 0;
}

/* {"String": s} -> literal (*re NULL) or {"Regex": r} -> compiled (when allowed). */
static int get_pattern(loader *l, const jv *o, const char *path, int regex_ok, char **lit,
                       size_t *litlen, pcre2_code **re)
{
    char k[256];
    snprintf(k, sizeof k, "%s.pattern", path);
    const jv *p = jv_get(o, "pattern");
    *lit = NULL;
    *re = NULL;
    if (!p || p->type != JV_OBJ || p->n != 1 || p->items[0].type != JV_STR)
        return bad(l, k, "is not {\"String\": ...} or {\"Regex\": ...}");
    const jv *v = &p->items[0];
    if (strcmp(p->keys[0], "String") == 0)
        return dupstr(l, v->s, v->len, lit, litlen);
    if (strcmp(p->keys[0], "Regex") != 0)
        return bad(l, k, "is not {\"String\": ...} or {\"Regex\": ...}");
    if (!regex_ok)
        return unsupported(l, k, "Regex", "String");
    int ecode;
    PCRE2_SIZE eoff;
    *re = pcre2_compile((PCRE2_SPTR)v->s, v->len, PCRE2_UTF | PCRE2_UCP, &ecode, &eoff, NULL);
    if (!*re) {
        char msg[256];
        pcre2_get_error_message(ecode, (PCRE2_UCHAR *)msg, sizeof msg);
        return nnt_io_errf(l->err, l->errlen, NNT_E_UNSUPPORTED, "%s: %s: PCRE2 cannot compile "
                           "the regex (%s at offset %zu)", l->what, k, msg, (size_t)eoff);
    }
    pcre2_jit_compile(*re, PCRE2_JIT_COMPLETE); /* optional: the interpreter is used without */
    return 0;
}

static const char *type_of(loader *l, const jv *o, const char *path, int *rc)
{
    const char *s;
    *rc = 0;
    if (o->type != JV_OBJ) {
        *rc = bad(l, path, "is not an object or null");
        return NULL;
    }
    *rc = get_str(l, o, path, "type", 0, &s, NULL);
    return s;
}

/* Grow an array of steps by one zeroed element. */
static void *push_step(loader *l, void **arr, size_t *n, size_t size, int *rc)
{
    char *a = realloc(*arr, (*n + 1) * size);
    if (!a) {
        *rc = nomem(l);
        return NULL;
    }
    *arr = a;
    memset(a + *n * size, 0, size);
    return a + (*n)++ * size;
}

typedef int (*section_fn)(loader *l, const jv *o, const char *path);

/* Sequence {"<list>": [...]} or a single item. */
static int each_item(loader *l, const jv *o, const char *path, const char *list, section_fn fn)
{
    int rc;
    const char *type = type_of(l, o, path, &rc);
    if (rc)
        return rc;
    if (strcmp(type, "Sequence") != 0)
        return fn(l, o, path);
    const jv *a = jv_get(o, list);
    char k[256];
    snprintf(k, sizeof k, "%s.%s", path, list);
    if (!a || a->type != JV_ARR)
        return bad(l, k, "is not an array");
    for (size_t i = 0; i < a->n; i++) {
        char ki[300];
        snprintf(ki, sizeof ki, "%s[%zu]", k, i);
        if ((rc = each_item(l, &a->items[i], ki, list, fn)) != 0)
            return rc;
    }
    return 0;
}

static int normalizer_item(loader *l, const jv *o, const char *path)
{
    int rc;
    const char *type = type_of(l, o, path, &rc), *s;
    size_t n;
    char k[256];
    snprintf(k, sizeof k, "%s.type", path);
    if (rc)
        return rc;
    nnt_hftok *t = l->t;
    norm_step *st;
    if (strcmp(type, "Prepend") == 0) {
        if ((rc = get_str(l, o, path, "prepend", 0, &s, &n)) != 0 ||
            !(st = push_step(l, (void **)&t->norm, &t->nnorm, sizeof *st, &rc)))
            return rc;
        st->kind = NORM_PREPEND;
        return dupstr(l, s, n, &st->a, &st->alen);
    }
    if (strcmp(type, "Replace") == 0) {
        if ((rc = get_str(l, o, path, "content", 0, &s, &n)) != 0 ||
            !(st = push_step(l, (void **)&t->norm, &t->nnorm, sizeof *st, &rc)))
            return rc;
        st->kind = NORM_REPLACE;
        pcre2_code *re;
        if ((rc = dupstr(l, s, n, &st->b, &st->blen)) != 0 ||
            (rc = get_pattern(l, o, path, 0, &st->a, &st->alen, &re)) != 0)
            return rc;
        if (st->alen == 0)
            return bad(l, path, "replaces an empty pattern");
        return 0;
    }
    static const char *const forms[4] = {"NFC", "NFD", "NFKC", "NFKD"};
    for (int f = 0; f < 4; f++) {
        if (strcmp(type, forms[f]) == 0) {
            if (!(st = push_step(l, (void **)&t->norm, &t->nnorm, sizeof *st, &rc)))
                return rc;
            st->kind = NORM_NFC + f;
            return 0;
        }
    }
    return unsupported(l, k, type, "Sequence, Prepend, Replace, NFC, NFD, NFKC, NFKD");
}

static int behavior_of(loader *l, const jv *o, const char *path, int *b)
{
    static const char *names[] = {"Removed", "Isolated", "MergedWithPrevious", "MergedWithNext",
                                  "Contiguous"};
    const char *s;
    int rc = get_str(l, o, path, "behavior", 0, &s, NULL);
    if (rc)
        return rc;
    for (int i = 0; i < 5; i++)
        if (strcmp(s, names[i]) == 0) {
            *b = i;
            return 0;
        }
    char k[256];
    snprintf(k, sizeof k, "%s.behavior", path);
    return unsupported(l, k, s, "Removed, Isolated, MergedWithPrevious, MergedWithNext, "
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

static int prepend_scheme(loader *l, const jv *o, const char *path, int *scheme)
{
    const char *s;
    int rc = get_str(l, o, path, "prepend_scheme", 1, &s, NULL), b;
    if (rc)
        return rc;
    if (!s) { /* older files: add_prefix_space */
        rc = get_bool(l, o, path, "add_prefix_space", 1, &b);
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
        return unsupported(l, k, s, "always, first, never");
    }
    return 0;
}

static int one_char(loader *l, const jv *o, const char *path, const char *key, char **s,
                    size_t *n)
{
    const char *v;
    size_t len;
    uint32_t cp;
    int rc = get_str(l, o, path, key, 0, &v, &len);
    if (rc)
        return rc;
    if (len == 0 || (size_t)nnt_utf8_decode((const unsigned char *)v, len, &cp) != len) {
        char k[256];
        snprintf(k, sizeof k, "%s.%s", path, key);
        return bad(l, k, "is not one character");
    }
    return dupstr(l, v, len, s, n);
}

static int pretokenizer_item(loader *l, const jv *o, const char *path)
{
    int rc, b;
    const char *type = type_of(l, o, path, &rc);
    char k[256];
    snprintf(k, sizeof k, "%s.type", path);
    if (rc)
        return rc;
    nnt_hftok *t = l->t;
    pre_step *st = NULL;
    if (strcmp(type, "Split") == 0) {
        if (!(st = push_step(l, (void **)&t->pre, &t->npre, sizeof *st, &rc)))
            return rc;
        st->kind = PRE_SPLIT;
        if ((rc = get_pattern(l, o, path, 1, &st->lit, &st->litlen, &st->re)) != 0 ||
            (rc = behavior_of(l, o, path, &st->behavior)) != 0 ||
            (rc = get_bool(l, o, path, "invert", 0, &b)) != 0)
            return rc;
        if (b) {
            snprintf(k, sizeof k, "%s.invert", path);
            return unsupported(l, k, "true", "false");
        }
        if (!st->re && st->litlen == 0)
            return bad(l, path, "splits on an empty string");
        return 0;
    }
    if (strcmp(type, "Digits") == 0) {
        if ((rc = get_bool(l, o, path, "individual_digits", 0, &b)) != 0 ||
            !(st = push_step(l, (void **)&t->pre, &t->npre, sizeof *st, &rc)))
            return rc;
        st->kind = PRE_SPLIT;
        st->behavior = b ? SPLIT_ISOLATED : SPLIT_CONTIGUOUS;
        return compile_fixed(l, "\\p{N}", &st->re);
    }
    if (strcmp(type, "ByteLevel") == 0) {
        int prefix, use_regex;
        if ((rc = get_bool(l, o, path, "add_prefix_space", 1, &prefix)) != 0 ||
            (rc = get_bool(l, o, path, "use_regex", 1, &use_regex)) != 0 ||
            !(st = push_step(l, (void **)&t->pre, &t->npre, sizeof *st, &rc)))
            return rc;
        st->kind = PRE_BYTELEVEL;
        st->prefix_space = prefix;
        st->behavior = SPLIT_ISOLATED;
        t->bytelevel = 1;
        return use_regex ? compile_fixed(l, GPT2_PATTERN, &st->re) : 0;
    }
    if (strcmp(type, "Metaspace") == 0) {
        if (!(st = push_step(l, (void **)&t->pre, &t->npre, sizeof *st, &rc)))
            return rc;
        st->kind = PRE_METASPACE;
        st->behavior = SPLIT_NEXT;
        if ((rc = one_char(l, o, path, "replacement", &st->lit, &st->litlen)) != 0 ||
            (rc = prepend_scheme(l, o, path, &st->prepend)) != 0)
            return rc;
        return get_bool(l, o, path, "split", 1, &st->split);
    }
    return unsupported(l, k, type, "Sequence, Split, ByteLevel, Metaspace, Digits");
}

static int decoder_item(loader *l, const jv *o, const char *path)
{
    int rc;
    const char *type = type_of(l, o, path, &rc), *s;
    size_t n;
    char k[256];
    snprintf(k, sizeof k, "%s.type", path);
    if (rc)
        return rc;
    nnt_hftok *t = l->t;
    dec_step *st;
    if (!(st = push_step(l, (void **)&t->dec, &t->ndec, sizeof *st, &rc)))
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
        if ((rc = get_str(l, o, path, "content", 0, &s, &n)) != 0 ||
            (rc = dupstr(l, s, n, &st->b, &st->blen)) != 0 ||
            (rc = get_pattern(l, o, path, 0, &st->a, &st->alen, &re)) != 0)
            return rc;
        if (st->alen == 0)
            return bad(l, path, "replaces an empty pattern");
    } else if (strcmp(type, "Strip") == 0) {
        st->kind = DEC_STRIP;
        if ((rc = one_char(l, o, path, "content", &st->a, &st->alen)) != 0 ||
            (rc = get_long(l, o, path, "start", &st->start)) != 0 ||
            (rc = get_long(l, o, path, "stop", &st->stop)) != 0)
            return rc;
    } else if (strcmp(type, "Metaspace") == 0) {
        st->kind = DEC_METASPACE;
        if ((rc = one_char(l, o, path, "replacement", &st->a, &st->alen)) != 0 ||
            (rc = prepend_scheme(l, o, path, &st->prepend)) != 0)
            return rc;
    } else {
        return unsupported(l, k, type, "Sequence, ByteLevel, Replace, ByteFallback, Fuse, "
                           "Strip, Metaspace");
    }
    return 0;
}

/* Post-processors only add special tokens (encode is add_special_tokens=False) or offsets. */
static int postprocessor_item(loader *l, const jv *o, const char *path)
{
    int rc;
    const char *type = type_of(l, o, path, &rc);
    char k[256];
    snprintf(k, sizeof k, "%s.type", path);
    if (rc)
        return rc;
    if (strcmp(type, "ByteLevel") == 0 || strcmp(type, "TemplateProcessing") == 0 ||
        strcmp(type, "RobertaProcessing") == 0 || strcmp(type, "BertProcessing") == 0)
        return 0;
    return unsupported(l, k, type, "Sequence, ByteLevel, TemplateProcessing, "
                       "RobertaProcessing, BertProcessing");
}

static int section(loader *l, const jv *o, const char *name, const char *list, section_fn fn)
{
    if (!o || o->type == JV_NULL)
        return 0;
    if (fn == decoder_item)
        l->t->has_decoder = 1;
    return each_item(l, o, name, list, fn);
}

static int added_tokens(loader *l, const jv *a)
{
    nnt_hftok *t = l->t;
    if (!a || a->type == JV_NULL)
        return 0;
    if (a->type != JV_ARR)
        return bad(l, "added_tokens", "is not an array");
    t->added = calloc(a->n ? a->n : 1, sizeof *t->added);
    if (!t->added)
        return nomem(l);
    for (size_t i = 0; i < a->n; i++) {
        const jv *o = &a->items[i];
        char p[64], k[96];
        snprintf(p, sizeof p, "added_tokens[%zu]", i);
        if (o->type != JV_OBJ)
            return bad(l, p, "is not an object");
        static const char *refused[] = {"single_word", "lstrip", "rstrip"};
        int rc, b;
        for (int f = 0; f < 3; f++) {
            if ((rc = get_bool(l, o, p, refused[f], 0, &b)) != 0)
                return rc;
            snprintf(k, sizeof k, "%s.%s", p, refused[f]);
            if (b)
                return unsupported(l, k, "true", "false");
        }
        added_tok *at = &t->added[t->nadded++];
        const char *s;
        size_t n;
        long id;
        if ((rc = get_str(l, o, p, "content", 0, &s, &n)) != 0 ||
            (rc = dupstr(l, s, n, &at->s, &at->len)) != 0 ||
            (rc = get_bool(l, o, p, "special", 0, &at->special)) != 0 ||
            (rc = get_bool(l, o, p, "normalized", !at->special, &at->normalized)) != 0 ||
            (rc = get_long(l, o, p, "id", &id)) != 0)
            return rc;
        if (n == 0)
            return bad(l, p, "has an empty content");
        if (id >= NNT_HFTOK_MAXVOCAB)
            return bad(l, p, "has an id too large");
        at->id = (int32_t)id;
        if (at->id >= t->nids)
            t->nids = at->id + 1;
        unsigned char *first = at->normalized ? t->first_norm : t->first_raw;
        first[(unsigned char)at->s[0]] = 1;
    }
    return 0;
}

/* model.vocab: {"spelling": id, ...} straight into the arena; ids checked unique. */
typedef struct { size_t off; uint32_t len; int32_t id; } ventry;

static int read_vocab(loader *l, nnt_json *j, ventry **ve, size_t *nve)
{
    int rc = nnt_json_expect(j, '{', "to open model.vocab");
    size_t cap = 0;
    if (rc)
        return rc;
    if (nnt_json_peek(j) == '}') {
        j->pos++;
        return 0;
    }
    for (;;) {
        char *s;
        size_t n;
        uint64_t id;
        if ((rc = nnt_json_string(j, &s, &n, 1 << 16, 1, "as a model.vocab token")) != 0)
            return rc;
        if ((rc = nnt_json_expect(j, ':', "after a model.vocab token")) != 0 ||
            (rc = nnt_json_u64(j, &id, "as a model.vocab id")) != 0) {
            free(s);
            return rc;
        }
        if (id >= NNT_HFTOK_MAXVOCAB) {
            free(s);
            return nnt_json_fail(j, "model.vocab id %llu too large", (unsigned long long)id);
        }
        if (*nve == cap) {
            cap = cap ? cap * 2 : 1024;
            ventry *e = realloc(*ve, cap * sizeof *e);
            if (!e) {
                free(s);
                return nomem(l);
            }
            *ve = e;
        }
        (*ve)[*nve] = (ventry){l->t->arena.n, (uint32_t)n, (int32_t)id};
        rc = sb_put(&l->t->arena, s, n);
        free(s);
        if (rc)
            return nomem(l);
        ++*nve;
        int c = nnt_json_peek(j);
        if (c == '}') {
            j->pos++;
            return 0;
        }
        if ((rc = nnt_json_expect(j, ',', "in model.vocab")) != 0)
            return rc;
    }
}

static int build_vocab(loader *l, const ventry *ve, size_t nve)
{
    nnt_hftok *t = l->t;
    for (size_t i = 0; i < nve; i++)
        if (ve[i].id >= t->nids)
            t->nids = ve[i].id + 1;
    size_t nid = t->nids ? (size_t)t->nids : 1;
    t->tokoff = malloc(nid * sizeof *t->tokoff);
    t->toklen = calloc(nid, sizeof *t->toklen);
    t->vmask = pow2_at_least(2 * nve + 2) - 1;
    t->vslot = calloc(t->vmask + 1, sizeof *t->vslot);
    if (!t->tokoff || !t->toklen || !t->vslot)
        return nomem(l);
    for (size_t i = 0; i < nid; i++)
        t->tokoff[i] = SIZE_MAX;
    for (size_t i = 0; i < nve; i++) {
        const char *s = t->arena.p + ve[i].off;
        if (t->tokoff[ve[i].id] != SIZE_MAX) {
            char k[64];
            snprintf(k, sizeof k, "model.vocab id %ld", (long)ve[i].id);
            return bad(l, k, "is given to two tokens");
        }
        if (vocab_find(t, s, ve[i].len) >= 0)
            return bad(l, "model.vocab", "lists a token twice");
        t->tokoff[ve[i].id] = ve[i].off;
        t->toklen[ve[i].id] = ve[i].len;
        uint64_t hash = fnv(s, ve[i].len);
        size_t h = hash & t->vmask;
        while (t->vslot[h] != 0)
            h = (h + 1) & t->vmask;
        t->vslot[h] = vocab_tag(hash) | (uint32_t)ve[i].id;
    }
    return 0;
}

static int merge_token(loader *l, nnt_json *j, const char *s, size_t n, size_t rank, int32_t *id)
{
    *id = vocab_find(l->t, s, n);
    if (*id < 0)
        return nnt_json_fail(j, "model.merges[%zu]: \"%.*s\" is not in model.vocab", rank,
                             (int)(n > 64 ? 64 : n), s);
    return 0;
}

/* One merge: "a b" or ["a", "b"]; a, b and ab must be tokens. */
static int read_merge(loader *l, nnt_json *j, size_t rank, sbuf *tmp)
{
    char *a = NULL, *b = NULL;
    size_t na, nb;
    int rc;
    if (nnt_json_peek(j) == '[') {
        j->pos++;
        if ((rc = nnt_json_string(j, &a, &na, 1 << 16, 1, "in model.merges")) != 0 ||
            (rc = nnt_json_expect(j, ',', "in a model.merges pair")) != 0 ||
            (rc = nnt_json_string(j, &b, &nb, 1 << 16, 1, "in model.merges")) != 0 ||
            (rc = nnt_json_expect(j, ']', "to close a model.merges pair")) != 0)
            goto out;
    } else {
        if ((rc = nnt_json_string(j, &a, &na, 1 << 17, 1, "in model.merges")) != 0)
            goto out;
        char *sp = memchr(a, ' ', na);
        if (!sp || memchr(sp + 1, ' ', na - (size_t)(sp + 1 - a))) {
            rc = nnt_json_fail(j, "model.merges[%zu] is not two tokens separated by one space",
                               rank);
            goto out;
        }
        b = a;
        a = NULL;
        nb = na - (size_t)(sp + 1 - b);
        na = (size_t)(sp - b);
        if ((rc = dupstr(l, b, na, &a, NULL)) != 0)
            goto out;
        memmove(b, sp + 1, nb);
    }
    int32_t ia, ib, iab;
    tmp->n = 0;
    if (sb_put(tmp, a, na) || sb_put(tmp, b, nb)) {
        rc = nomem(l);
        goto out;
    }
    if ((rc = merge_token(l, j, a, na, rank, &ia)) == 0 &&
        (rc = merge_token(l, j, b, nb, rank, &ib)) == 0 &&
        (rc = merge_token(l, j, tmp->p, tmp->n, rank, &iab)) == 0)
        merge_put(l->t, ia, ib, (uint32_t)rank, iab);
out:
    free(a);
    free(b);
    return rc;
}

static int read_merges(loader *l, const char *buf, size_t len, size_t off)
{
    nnt_hftok *t = l->t;
    nnt_json j;
    nnt_json_init(&j, buf + off, len - off, off, l->what, l->err, l->errlen);
    /* count first to size the table */
    size_t count = 0;
    for (size_t i = 0, depth = 0, instr = 0; i < j.len; i++) {
        char c = j.buf[i];
        if (instr) {
            if (c == '\\')
                i++;
            else if (c == '"')
                instr = 0;
        } else if (c == '"') {
            instr = 1;
            count += depth == 1;
        } else if (c == '[') {
            count += depth == 1;
            depth++;
        } else if (c == ']' && --depth == 0) {
            break;
        }
    }
    t->mmask = pow2_at_least(2 * count + 2) - 1;
    t->mkey = calloc(t->mmask + 1, sizeof *t->mkey);
    t->mval = malloc((t->mmask + 1) * sizeof *t->mval);
    if (!t->mkey || !t->mval)
        return nomem(l);
    int rc = nnt_json_expect(&j, '[', "to open model.merges");
    if (rc || nnt_json_peek(&j) == ']')
        return rc;
    sbuf tmp = {0};
    for (size_t rank = 0;; rank++) {
        if ((rc = read_merge(l, &j, rank, &tmp)) != 0)
            break;
        if (nnt_json_peek(&j) == ']')
            break;
        if ((rc = nnt_json_expect(&j, ',', "in model.merges")) != 0)
            break;
    }
    free(tmp.p);
    return rc;
}

typedef struct {
    ventry *ve;
    size_t nve;
    size_t merges_off;            /* 0: no merges                                            */
    jv unk;                       /* model.unk_token                                         */
} model_raw;

static int model_key(loader *l, nnt_json *j, const char *key, model_raw *m)
{
    nnt_hftok *t = l->t;
    jv v;
    int rc;
    if (strcmp(key, "vocab") == 0)
        return read_vocab(l, j, &m->ve, &m->nve);
    if (strcmp(key, "merges") == 0) {
        m->merges_off = j->base + j->pos;
        nnt_json_peek(j);
        m->merges_off = j->base + j->pos;
        return nnt_json_skip(j, 3, "in model.merges");
    }
    if ((rc = jv_parse(j, &v, 0, "in model")) != 0) {
        jv_free(&v);
        return rc;
    }
    char k[128];
    snprintf(k, sizeof k, "model.%s", key);
    if (strcmp(key, "type") == 0) {
        if (v.type != JV_STR)
            rc = bad(l, k, "is not a string");
        else if (strcmp(v.s, "BPE") != 0)
            rc = unsupported(l, k, v.s, "BPE");
    } else if (strcmp(key, "unk_token") == 0) {
        m->unk = v;
        return 0;
    } else if (strcmp(key, "dropout") == 0) {
        if (v.type != JV_NULL && !(v.type == JV_NUM && strtod(v.s, NULL) == 0))
            rc = unsupported(l, k, v.type == JV_NUM ? v.s : "?", "null");
    } else if (strcmp(key, "continuing_subword_prefix") == 0 ||
               strcmp(key, "end_of_word_suffix") == 0) {
        if (v.type != JV_NULL && !(v.type == JV_STR && v.len == 0))
            rc = unsupported(l, k, v.type == JV_STR ? v.s : "?", "null");
    } else if (strcmp(key, "fuse_unk") == 0 || strcmp(key, "byte_fallback") == 0 ||
               strcmp(key, "ignore_merges") == 0) {
        int *dst = key[0] == 'f' ? &t->fuse_unk : key[0] == 'b' ? &t->byte_fallback
                                                                : &t->ignore_merges;
        if (v.type != JV_BOOL)
            rc = bad(l, k, "is not true or false");
        else
            *dst = v.b;
    }
    jv_free(&v);
    return rc;
}

static int read_model(loader *l, nnt_json *j, model_raw *m, int *has_type)
{
    int rc = nnt_json_expect(j, '{', "to open model");
    if (rc || nnt_json_peek(j) == '}')
        return rc ? rc : nnt_json_fail(j, "model is empty");
    for (;;) {
        char *key;
        if ((rc = nnt_json_string(j, &key, NULL, 256, 0, "as a key of model")) != 0)
            return rc;
        if ((rc = nnt_json_expect(j, ':', "after a key of model")) == 0)
            rc = model_key(l, j, key, m);
        *has_type |= strcmp(key, "type") == 0;
        free(key);
        if (rc)
            return rc;
        if (nnt_json_peek(j) == '}') {
            j->pos++;
            return 0;
        }
        if ((rc = nnt_json_expect(j, ',', "in model")) != 0)
            return rc;
    }
}

enum { S_ADDED, S_NORM, S_PRE, S_POST, S_DEC, S_COUNT };
static const char *section_names[S_COUNT] = {"added_tokens", "normalizer", "pre_tokenizer",
                                             "post_processor", "decoder"};

static int read_top(loader *l, nnt_json *j, model_raw *m, jv *sec, int *has_model)
{
    int rc = nnt_json_expect(j, '{', "to open the tokenizer object"), has_type = 0;
    if (rc)
        return rc;
    if (nnt_json_peek(j) != '}')
        for (;;) {
            char *key;
            if ((rc = nnt_json_string(j, &key, NULL, 256, 0, "as a top-level key")) != 0)
                return rc;
            int s = S_COUNT;
            for (int i = 0; i < S_COUNT; i++)
                if (strcmp(key, section_names[i]) == 0)
                    s = i;
            if ((rc = nnt_json_expect(j, ':', "after a top-level key")) == 0) {
                if (strcmp(key, "model") == 0) {
                    *has_model = 1;
                    rc = read_model(l, j, m, &has_type);
                } else if (s < S_COUNT) {
                    jv_free(&sec[s]);
                    rc = jv_parse(j, &sec[s], 0, key);
                } else {
                    rc = nnt_json_skip(j, NNT_JSON_MAXDEPTH, key);
                }
            }
            free(key);
            if (rc)
                return rc;
            if (nnt_json_peek(j) == '}')
                break;
            if ((rc = nnt_json_expect(j, ',', "between top-level keys")) != 0)
                return rc;
        }
    j->pos++;
    if ((rc = nnt_json_end(j)) != 0)
        return rc;
    if (!*has_model)
        return bad(l, "model", "is missing");
    if (!has_type)
        return bad(l, "model.type", "is missing");
    return 0;
}

static int finish(loader *l, const char *buf, size_t len, model_raw *m, jv *sec)
{
    nnt_hftok *t = l->t;
    int rc;
    if ((rc = added_tokens(l, &sec[S_ADDED])) != 0 || (rc = build_vocab(l, m->ve, m->nve)) != 0)
        return rc;
    if (m->merges_off) {
        if ((rc = read_merges(l, buf, len, m->merges_off)) != 0)
            return rc;
    } else {
        t->mmask = 15;
        t->mkey = calloc(16, sizeof *t->mkey);
        t->mval = calloc(16, sizeof *t->mval);
        if (!t->mkey || !t->mval)
            return nomem(l);
    }
    t->added_of_id = malloc((size_t)(t->nids ? t->nids : 1) * sizeof *t->added_of_id);
    if (!t->added_of_id)
        return nomem(l);
    memset(t->added_of_id, 0xff, (size_t)(t->nids ? t->nids : 1) * sizeof *t->added_of_id);
    for (size_t i = 0; i < t->nadded; i++)
        t->added_of_id[t->added[i].id] = (int32_t)i;
    t->unk = -1;
    if (m->unk.type == JV_STR) {
        t->unk = vocab_find(t, m->unk.s, m->unk.len);
        if (t->unk < 0)
            return bad(l, "model.unk_token", "is not in model.vocab");
    } else if (m->unk.type != JV_NULL) {
        return bad(l, "model.unk_token", "is not a string or null");
    }
    for (int b = 0; b < 256; b++) {
        char s[8];
        snprintf(s, sizeof s, "<0x%02X>", b);
        t->byte_id[b] = vocab_find(t, s, 6);
    }
    bytelevel_tables(t);
    if ((rc = section(l, &sec[S_NORM], "normalizer", "normalizers", normalizer_item)) != 0 ||
        (rc = section(l, &sec[S_PRE], "pre_tokenizer", "pretokenizers", pretokenizer_item)) ||
        (rc = section(l, &sec[S_POST], "post_processor", "processors", postprocessor_item)) ||
        (rc = section(l, &sec[S_DEC], "decoder", "decoders", decoder_item)) != 0)
        return rc;
    return 0;
}

int nnt_hftok_load_mem(const char *buf, size_t len, const char *what, nnt_hftok **out,
                       char *err, size_t errlen)
{
    *out = NULL;
    loader l = {calloc(1, sizeof(nnt_hftok)), what ? what : "tokenizer.json", err, errlen};
    if (!l.t)
        return nomem(&l);
    model_raw m = {0};
    m.unk.type = JV_NULL;
    jv sec[S_COUNT];
    memset(sec, 0, sizeof sec);
    nnt_json j;
    nnt_json_init(&j, buf, len, 0, l.what, err, errlen);
    int has_model = 0;
    int rc = read_top(&l, &j, &m, sec, &has_model);
    if (!rc)
        rc = finish(&l, buf, len, &m, sec);
    free(m.ve);
    jv_free(&m.unk);
    for (int i = 0; i < S_COUNT; i++)
        jv_free(&sec[i]);
    if (rc) {
        nnt_hftok_free(l.t);
        return rc;
    }
    *out = l.t;
    return 0;
}

static int nnt_hftok_load_file(const char *path, nnt_hftok **out, char *err, size_t errlen);

int nnt_hftok_load(const char *path, nnt_hftok **out, char *err, size_t errlen)
{
    struct stat st;
    char *joined = NULL;
    *out = NULL;
    if (stat(path, &st) == 0 && S_ISDIR(st.st_mode)) { /* a model directory */
        size_t n = strlen(path);
        if (!(joined = malloc(n + 16)))
            return nnt_io_errf(err, errlen, NNT_E_NOMEM, "%s: out of host memory", path);
        snprintf(joined, n + 16, "%s/tokenizer.json", path);
        path = joined;
    }
    int rc = nnt_hftok_load_file(path, out, err, errlen);
    free(joined);
    return rc;
}

static int nnt_hftok_load_file(const char *path, nnt_hftok **out, char *err, size_t errlen)
{
    int fd;
    uint64_t size;
    int rc = nnt_io_open_read(path, &fd, &size, err, errlen);
    if (rc)
        return rc;
    if (size > NNT_HFTOK_MAXFILE) {
        close(fd);
        return nnt_io_errf(err, errlen, NNT_E_FORMAT, "%s: %llu bytes, more than the %u a "
                           "tokenizer.json may have", path, (unsigned long long)size,
                           NNT_HFTOK_MAXFILE);
    }
    char *buf = malloc(size ? (size_t)size : 1);
    if (!buf) {
        close(fd);
        return nnt_io_errf(err, errlen, NNT_E_NOMEM, "%s: out of host memory", path);
    }
    rc = nnt_io_pread(fd, buf, (size_t)size, 0, path, err, errlen);
    close(fd);
    if (!rc)
        rc = nnt_hftok_load_mem(buf, (size_t)size, path, out, err, errlen);
    free(buf);
    return rc;
}

/* ---- encoding --------------------------------------------------------------------------------- */
typedef struct { size_t off, len; int at0; } span; /* at0: starts at offset 0 of the text    */

typedef struct {
    const nnt_hftok *t;
    int32_t *out;
    size_t cap, n;
    sbuf norm;                    /* the normalized segment                                  */
    sbuf buf[2];                  /* piece text: the current one and the next               */
    span *sp[2];                  /* pieces into buf[cur] / buf[!cur]                        */
    size_t nsp[2], spcap[2];
    int cur;
    int32_t *sid, *nxt, *prv;     /* BPE symbols                                            */
    uint64_t *heap;
    size_t wcap;
    pcre2_match_data *md;
    char *err;
    size_t errlen;
} enc;

static int enc_nomem(enc *e)
{
    return nnt_io_errf(e->err, e->errlen, NNT_E_NOMEM, "out of host memory while encoding");
}

static void emit(enc *e, int32_t id)
{
    if (e->out && e->n < e->cap)
        e->out[e->n] = id;
    e->n++;
}

static int push_span(enc *e, int which, size_t off, size_t len, int at0)
{
    if (len == 0)
        return 0;
    if (e->nsp[which] == e->spcap[which]) {
        size_t c = e->spcap[which] ? 2 * e->spcap[which] : 64;
        span *s = realloc(e->sp[which], c * sizeof *s);
        if (!s)
            return enc_nomem(e);
        e->sp[which] = s;
        e->spcap[which] = c;
    }
    e->sp[which][e->nsp[which]++] = (span){off, len, at0};
    return 0;
}

static int work_arrays(enc *e, size_t m)
{
    if (m <= e->wcap)
        return 0;
    size_t c = m < 64 ? 64 : m;
    free(e->sid);
    free(e->nxt);
    free(e->prv);
    free(e->heap);
    e->sid = malloc(c * sizeof *e->sid);
    e->nxt = malloc(c * sizeof *e->nxt);
    e->prv = malloc(c * sizeof *e->prv);
    e->heap = malloc(3 * c * sizeof *e->heap);
    e->wcap = c;
    if (!e->sid || !e->nxt || !e->prv || !e->heap) {
        e->wcap = 0;
        return enc_nomem(e);
    }
    return 0;
}

static void heap_push(uint64_t *h, size_t *n, uint64_t v)
{
    size_t i = (*n)++;
    while (i > 0 && h[(i - 1) / 2] > v) {
        h[i] = h[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    h[i] = v;
}

static uint64_t heap_pop(uint64_t *h, size_t *n)
{
    uint64_t top = h[0], last = h[--*n];
    size_t i = 0;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= *n)
            break;
        if (c + 1 < *n && h[c + 1] < h[c])
            c++;
        if (h[c] >= last)
            break;
        h[i] = h[c];
        i = c;
    }
    if (*n)
        h[i] = last;
    return top;
}

static void push_pair(enc *e, size_t *nh, int32_t i)
{
    uint32_t rank;
    int32_t id;
    int32_t j = e->nxt[i];
    if (j >= 0 && merge_find(e->t, e->sid[i], e->sid[j], &rank, &id))
        heap_push(e->heap, nh, (uint64_t)rank << 32 | (uint32_t)i);
}

/* The model's first symbols of a piece: its characters' tokens; a character that is not a
 * token: its <0xXX> byte tokens (byte_fallback, all present), else unk (consecutive ones fused
 * with fuse_unk), else nothing (as the package). */
static size_t initial_symbols(enc *e, const char *s, size_t len)
{
    const nnt_hftok *t = e->t;
    size_t m = 0;
    int last_unk = 0;
    for (size_t i = 0; i < len;) {
        uint32_t cp;
        size_t k = (size_t)nnt_utf8_decode((const unsigned char *)s + i, len - i, &cp);
        k = k ? k : 1;
        int32_t id = vocab_find(t, s + i, k);
        int bytes = t->byte_fallback;
        for (size_t b = 0; bytes && id < 0 && b < k; b++)
            bytes = t->byte_id[(unsigned char)s[i + b]] >= 0;
        if (id >= 0) {
            e->sid[m++] = id;
            last_unk = 0;
        } else if (bytes) {
            for (size_t b = 0; b < k; b++)
                e->sid[m++] = t->byte_id[(unsigned char)s[i + b]];
        } else if (t->unk >= 0 && !(t->fuse_unk && last_unk)) {
            e->sid[m++] = t->unk;
            last_unk = 1;
        }
        i += k;
    }
    return m;
}

/* BPE over one piece: the lowest-ranked adjacent pair first, leftmost among equal ranks. */
static int bpe_piece(enc *e, const char *s, size_t len)
{
    const nnt_hftok *t = e->t;
    if (t->ignore_merges) {
        int32_t id = vocab_find(t, s, len);
        if (id >= 0) {
            emit(e, id);
            return 0;
        }
    }
    if (work_arrays(e, len))
        return NNT_E_NOMEM;
    size_t m = initial_symbols(e, s, len), nh = 0;
    for (size_t i = 0; i < m; i++) {
        e->nxt[i] = i + 1 < m ? (int32_t)i + 1 : -1;
        e->prv[i] = (int32_t)i - 1;
    }
    for (size_t i = 0; i + 1 < m; i++)
        push_pair(e, &nh, (int32_t)i);
    while (nh) {
        uint64_t v = heap_pop(e->heap, &nh);
        int32_t i = (int32_t)(uint32_t)v, j = e->nxt[i], id;
        uint32_t rank;
        if (e->sid[i] < 0 || j < 0 || !merge_find(t, e->sid[i], e->sid[j], &rank, &id) ||
            rank != (uint32_t)(v >> 32))
            continue;
        e->sid[i] = id;
        e->sid[j] = -1;
        e->nxt[i] = e->nxt[j];
        if (e->nxt[j] >= 0)
            e->prv[e->nxt[j]] = i;
        if (e->prv[i] >= 0)
            push_pair(e, &nh, e->prv[i]);
        push_pair(e, &nh, i);
    }
    for (int32_t i = m ? 0 : -1; i >= 0; i = e->nxt[i])
        emit(e, e->sid[i]);
    return 0;
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
        if (pend && (rc = push_span(e, out, p->off + pend_s, pend_e - pend_s,             \
                                    p->at0 && pend_s == 0)) != 0)                         \
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
                if (sb_put(ob, u, n))
                    return enc_nomem(e);
            }
        } else if (st->kind == PRE_BYTELEVEL) {
            if (st->prefix_space && s[0] != ' ' && sb_put(ob, " ", 1))
                return enc_nomem(e);
            if (sb_put(ob, s, p.len))
                return enc_nomem(e);
        } else { /* PRE_METASPACE */
            int starts = p.len >= st->litlen && memcmp(s, st->lit, st->litlen) == 0;
            starts |= s[0] == ' ';
            if (!starts && (st->prepend == PREPEND_ALWAYS || (st->prepend == PREPEND_FIRST && p.at0)))
                if (sb_put(ob, st->lit, st->litlen))
                    return enc_nomem(e);
            for (size_t k = 0; k < p.len; k++)
                if (s[k] == ' ' ? sb_put(ob, st->lit, st->litlen) : sb_put(ob, s + k, 1))
                    return enc_nomem(e);
        }
        if ((rc = push_span(e, out, start, ob->n - start, p.at0)) != 0)
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
static int pretokenize_and_model(enc *e, const char *s, size_t len, int at0)
{
    const nnt_hftok *t = e->t;
    int rc;
    e->cur = 0;
    e->buf[0].n = 0;
    e->nsp[0] = 0;
    if (sb_put(&e->buf[0], s, len))
        return enc_nomem(e);
    if ((rc = push_span(e, 0, 0, len, at0)) != 0)
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
        if ((rc = bpe_piece(e, e->buf[e->cur].p + p->off, p->len)) != 0)
            return rc;
    }
    return 0;
}

/* The longest added token (of the given normalized flag) at s[0..len), or NULL. */
static const added_tok *added_at(const nnt_hftok *t, const char *s, size_t len, int normalized)
{
    const added_tok *best = NULL;
    for (size_t i = 0; i < t->nadded; i++) {
        const added_tok *a = &t->added[i];
        if (a->normalized == normalized && a->len <= len && (!best || a->len > best->len) &&
            memcmp(a->s, s, a->len) == 0)
            best = a;
    }
    return best;
}

/* Cut s at the added tokens of one kind; the text between goes to fn. */
typedef int (*text_fn)(enc *e, const char *s, size_t len, int at0);

static int split_added(enc *e, const char *s, size_t len, int at0, int normalized, text_fn fn)
{
    const nnt_hftok *t = e->t;
    const unsigned char *first = normalized ? t->first_norm : t->first_raw;
    size_t start = 0;
    int rc;
    for (size_t i = 0; i < len;) {
        const added_tok *a = first[(unsigned char)s[i]] ? added_at(t, s + i, len - i, normalized)
                                                         : NULL;
        if (!a) {
            i++;
            continue;
        }
        if (i > start && (rc = fn(e, s + start, i - start, at0 && start == 0)) != 0)
            return rc;
        emit(e, a->id);
        i += a->len;
        start = i;
    }
    if (len > start)
        return fn(e, s + start, len - start, at0 && start == 0);
    return 0;
}

static int normalized_text(enc *e, const char *s, size_t len, int at0)
{
    return pretokenize_and_model(e, s, len, at0);
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
    int rc = n < 0 ? -1 : sb_put(out, res, (size_t)n);
    free(res);
    return rc;
}

/* Normalize a segment between raw added tokens, then cut at the normalized added tokens. */
static int raw_text(enc *e, const char *s, size_t len, int at0)
{
    const nnt_hftok *t = e->t;
    if (t->nnorm == 0)
        return split_added(e, s, len, at0, 1, normalized_text);
    sbuf *nb = &e->norm, tmp = {0};
    nb->n = 0;
    if (sb_put(nb, s, len))
        return enc_nomem(e);
    for (size_t k = 0; k < t->nnorm; k++) {
        const norm_step *st = &t->norm[k];
        tmp.n = 0;
        if (st->kind == NORM_PREPEND) {
            if (nb->n && (sb_put(&tmp, st->a, st->alen) || sb_put(&tmp, nb->p, nb->n)))
                goto oom;
        } else if (st->kind != NORM_REPLACE) {
            if (unicode_form(st->kind, nb, &tmp))
                goto oom;
        } else {
            for (size_t i = 0; i < nb->n;) {
                int hit = i + st->alen <= nb->n && memcmp(nb->p + i, st->a, st->alen) == 0;
                if (hit ? sb_put(&tmp, st->b, st->blen) : sb_put(&tmp, nb->p + i, 1))
                    goto oom;
                i += hit ? st->alen : 1;
            }
        }
        sbuf sw = *nb;
        *nb = tmp;
        tmp = sw;
    }
    free(tmp.p);
    /* normalized text can be split further on normalized added tokens; it lives in e->norm,
     * which pretokenize_and_model does not touch */
    return split_added(e, nb->p, nb->n, at0, 1, normalized_text);
oom:
    free(tmp.p);
    return enc_nomem(e);
}

/* One invalid byte: its ByteLevel token, else its <0xXX> token. */
static int invalid_byte(enc *e, unsigned char b, size_t off)
{
    const nnt_hftok *t = e->t;
    if (t->bytelevel) {
        char u[2];
        uint32_t cp = t->byte_cp[b];
        size_t n = cp < 0x80 ? (u[0] = (char)cp, 1)
                             : (u[0] = (char)(0xc0 | cp >> 6), u[1] = (char)(0x80 | (cp & 0x3f)), 2);
        int32_t id = vocab_find(t, u, n);
        if (id >= 0) {
            emit(e, id);
            return 0;
        }
    }
    if (t->byte_fallback && t->byte_id[b] >= 0) {
        emit(e, t->byte_id[b]);
        return 0;
    }
    return nnt_io_errf(e->err, e->errlen, NNT_E_INVAL, "byte 0x%02x at offset %zu is not valid "
                       "UTF-8 and this tokenizer has no token for it (no ByteLevel "
                       "pre-tokenizer or <0x%02X> byte token)", b, off, b);
}

int nnt_hftok_encode(const nnt_hftok *t, const char *text, size_t len, int32_t *out,
                     size_t cap, size_t *n, char *err, size_t errlen)
{
    enc e;
    memset(&e, 0, sizeof e);
    e.t = t;
    e.out = out;
    e.cap = out ? cap : 0;
    e.err = err;
    e.errlen = errlen;
    *n = 0;
    e.md = pcre2_match_data_create(4, NULL);
    int rc = e.md ? 0 : enc_nomem(&e);
    size_t start = 0;
    for (size_t i = 0; !rc && i <= len;) {
        uint32_t cp;
        int k = i < len ? nnt_utf8_decode((const unsigned char *)text + i, len - i, &cp) : 0;
        if (k > 0) {
            i += (size_t)k;
            continue;
        }
        /* a valid run [start, i) ends: encoded alone, as the package would encode it */
        if (i > start)
            rc = split_added(&e, text + start, i - start, 1, 0, raw_text);
        if (!rc && i < len)
            rc = invalid_byte(&e, (unsigned char)text[i], i);
        start = ++i;
    }
    *n = e.n;
    pcre2_match_data_free(e.md);
    free(e.norm.p);
    for (int b = 0; b < 2; b++) {
        free(e.buf[b].p);
        free(e.sp[b]);
    }
    free(e.sid);
    free(e.nxt);
    free(e.prv);
    free(e.heap);
    if (!rc && out && e.n > cap)
        rc = nnt_io_errf(err, errlen, NNT_E_INVAL, "%zu ids do not fit in a buffer of %zu",
                         e.n, cap);
    return rc;
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
    return sb_put(&l->b, s, n);
}

/* Append to the last token. */
static int tl_cat(toklist *l, const char *s, size_t n)
{
    l->len[l->n - 1] += n;
    return sb_put(&l->b, s, n);
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
