/* SPDX-License-Identifier: MIT */
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
 *   decode       ids -> token strings -> the decoder chain (a list of byte strings).
 *
 * Files (their shared types and functions: hftok_impl.h):
 *   hftok.c            this one: byte buffers, the JSON tree of the sections, the loader's
 *                      helpers, added tokens, post-processors, the file's top level, freeing;
 *                      encoding's outer loop (UTF-8 runs, added tokens, invalid bytes)
 *   hftok_normalize.c  normalizers
 *   hftok_pretok.c     pre-tokenizers (Split, ByteLevel, Metaspace, Digits)
 *   hftok_model.c      the BPE model: vocab and merges (tables, reading), BPE per piece
 *   hftok_decode.c     decoders */
#include "hftok_impl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---- byte buffers --------------------------------------------------------------------------- */

int hft_sb_put(sbuf *b, const void *s, size_t n)
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

void hft_jv_free(jv *v)
{
    if (!v)
        return;
    free(v->s);
    for (size_t i = 0; i < v->n; i++) {
        hft_jv_free(&v->items[i]);
        if (v->keys)
            free(v->keys[i]);
    }
    free(v->items);
    free(v->keys);
    memset(v, 0, sizeof *v);
}

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
        if ((rc = hft_jv_parse(j, &v->items[v->n - 1], depth + 1, ctx)) != 0)
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

int hft_jv_parse(nnt_json *j, jv *v, int depth, const char *ctx)
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

const jv *hft_jv_get(const jv *o, const char *key)
{
    if (!o || o->type != JV_OBJ)
        return NULL;
    for (size_t i = 0; i < o->n; i++)
        if (strcmp(o->keys[i], key) == 0)
            return &o->items[i];
    return NULL;
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

int hft_unsupported(loader *l, const char *key, const char *value, const char *supported)
{
    return nnt_io_errf(l->err, l->errlen, NNT_E_UNSUPPORTED, "%s: %s \"%s\" is not supported%s%s%s",
                       l->what, key, value, supported ? " (supported: " : "",
                       supported ? supported : "", supported ? ")" : "");
}

int hft_bad(loader *l, const char *key, const char *what)
{
    return nnt_io_errf(l->err, l->errlen, NNT_E_FORMAT, "%s: %s %s", l->what, key, what);
}

int hft_nomem(loader *l)
{
    return nnt_io_errf(l->err, l->errlen, NNT_E_NOMEM, "%s: out of host memory", l->what);
}

/* A string member (required unless opt); *s NULL when absent/null and optional. */
int hft_get_str(loader *l, const jv *o, const char *path, const char *key, int opt,
                const char **s, size_t *len)
{
    const jv *v = hft_jv_get(o, key);
    *s = NULL;
    if (len)
        *len = 0;
    char k[256];
    snprintf(k, sizeof k, "%s.%s", path, key);
    if (!v || v->type == JV_NULL) {
        if (opt)
            return 0;
        return hft_bad(l, k, "is missing");
    }
    if (v->type != JV_STR)
        return hft_bad(l, k, "is not a string");
    *s = v->s;
    if (len)
        *len = v->len;
    return 0;
}

/* A boolean member; def when absent. */
int hft_get_bool(loader *l, const jv *o, const char *path, const char *key, int def, int *b)
{
    const jv *v = hft_jv_get(o, key);
    *b = def;
    if (!v || v->type == JV_NULL)
        return 0;
    if (v->type != JV_BOOL) {
        char k[256];
        snprintf(k, sizeof k, "%s.%s", path, key);
        return hft_bad(l, k, "is not true or false");
    }
    *b = v->b;
    return 0;
}

int hft_get_long(loader *l, const jv *o, const char *path, const char *key, long *out)
{
    const jv *v = hft_jv_get(o, key);
    char k[256], *end;
    snprintf(k, sizeof k, "%s.%s", path, key);
    if (!v || v->type != JV_NUM)
        return hft_bad(l, k, "is not a number");
    *out = strtol(v->s, &end, 10);
    if (*end || *out < 0 || *out > 1000000)
        return hft_bad(l, k, "is not a non-negative integer");
    return 0;
}

int hft_dupstr(loader *l, const char *s, size_t n, char **out, size_t *outlen)
{
    *out = malloc(n + 1);
    if (!*out)
        return hft_nomem(l);
    memcpy(*out, s, n);
    (*out)[n] = 0;
    if (outlen)
        *outlen = n;
    return 0;
}

/* {"String": s} -> literal (*re NULL) or {"Regex": r} -> compiled (when allowed). */
int hft_get_pattern(loader *l, const jv *o, const char *path, int regex_ok, char **lit,
                    size_t *litlen, pcre2_code **re)
{
    char k[256];
    snprintf(k, sizeof k, "%s.pattern", path);
    const jv *p = hft_jv_get(o, "pattern");
    *lit = NULL;
    *re = NULL;
    if (!p || p->type != JV_OBJ || p->n != 1 || p->items[0].type != JV_STR)
        return hft_bad(l, k, "is not {\"String\": ...} or {\"Regex\": ...}");
    const jv *v = &p->items[0];
    if (strcmp(p->keys[0], "String") == 0)
        return hft_dupstr(l, v->s, v->len, lit, litlen);
    if (strcmp(p->keys[0], "Regex") != 0)
        return hft_bad(l, k, "is not {\"String\": ...} or {\"Regex\": ...}");
    if (!regex_ok)
        return hft_unsupported(l, k, "Regex", "String");
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

const char *hft_type_of(loader *l, const jv *o, const char *path, int *rc)
{
    const char *s;
    *rc = 0;
    if (o->type != JV_OBJ) {
        *rc = hft_bad(l, path, "is not an object or null");
        return NULL;
    }
    *rc = hft_get_str(l, o, path, "type", 0, &s, NULL);
    return s;
}

/* Grow an array of steps by one zeroed element. */
void *hft_push_step(loader *l, void **arr, size_t *n, size_t size, int *rc)
{
    char *a = realloc(*arr, (*n + 1) * size);
    if (!a) {
        *rc = hft_nomem(l);
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
    const char *type = hft_type_of(l, o, path, &rc);
    if (rc)
        return rc;
    if (strcmp(type, "Sequence") != 0)
        return fn(l, o, path);
    const jv *a = hft_jv_get(o, list);
    char k[256];
    snprintf(k, sizeof k, "%s.%s", path, list);
    if (!a || a->type != JV_ARR)
        return hft_bad(l, k, "is not an array");
    for (size_t i = 0; i < a->n; i++) {
        char ki[300];
        snprintf(ki, sizeof ki, "%s[%zu]", k, i);
        if ((rc = each_item(l, &a->items[i], ki, list, fn)) != 0)
            return rc;
    }
    return 0;
}


/* TemplateProcessing's "single" template: the ids of its special tokens before and after
 * the sequence ($A), from its special_tokens map, kept for nnt_hftok_single_affixes. */
static int template_single(loader *l, const jv *o, const char *path)
{
    const jv *single = hft_jv_get(o, "single"), *specials = hft_jv_get(o, "special_tokens");
    char k[300];
    snprintf(k, sizeof k, "%s.single", path);
    if (!single)
        return 0;
    if (single->type != JV_ARR)
        return hft_bad(l, k, "is not an array");
    int after = 0;
    for (size_t i = 0; i < single->n; i++) {
        const jv *it = &single->items[i], *sp = hft_jv_get(it, "SpecialToken");
        if (hft_jv_get(it, "Sequence")) {
            after = 1;
            continue;
        }
        const jv *id = sp ? hft_jv_get(sp, "id") : NULL;
        const jv *entry = id && id->type == JV_STR && specials ? hft_jv_get(specials, id->s)
                                                               : NULL;
        const jv *ids = entry ? hft_jv_get(entry, "ids") : NULL;
        if (!ids || ids->type != JV_ARR)
            return hft_bad(l, k, "names a special token without ids in special_tokens");
        for (size_t j = 0; j < ids->n; j++) {
            size_t *n = after ? &l->t->nsingle_post : &l->t->nsingle_pre;
            int32_t *dst = after ? l->t->single_post : l->t->single_pre;
            const jv *v = &ids->items[j];
            char *end = NULL;
            long x = v->type == JV_NUM ? strtol(v->s, &end, 10) : -1;
            if (x < 0 || x >= NNT_HFTOK_MAXVOCAB || (end && *end) || *n == 8)
                return hft_bad(l, k, "has a special token id that is not a small integer, or "
                               "more than 8 of them");
            dst[(*n)++] = (int32_t)x;
        }
    }
    return 0;
}

/* Post-processors only add special tokens (encode is add_special_tokens=False) or offsets;
 * TemplateProcessing's for one sequence are kept (nnt_hftok_single_affixes). */
static int postprocessor_item(loader *l, const jv *o, const char *path)
{
    int rc;
    const char *type = hft_type_of(l, o, path, &rc);
    char k[256];
    snprintf(k, sizeof k, "%s.type", path);
    if (rc)
        return rc;
    if (strcmp(type, "TemplateProcessing") == 0)
        return template_single(l, o, path);
    if (strcmp(type, "ByteLevel") == 0 ||
        strcmp(type, "RobertaProcessing") == 0 || strcmp(type, "BertProcessing") == 0)
        return 0;
    return hft_unsupported(l, k, type, "Sequence, ByteLevel, TemplateProcessing, "
                           "RobertaProcessing, BertProcessing");
}

static int section(loader *l, const jv *o, const char *name, const char *list, section_fn fn)
{
    if (!o || o->type == JV_NULL)
        return 0;
    if (fn == hft_decoder_item)
        l->t->has_decoder = 1;
    return each_item(l, o, name, list, fn);
}

static int added_tokens(loader *l, const jv *a)
{
    nnt_hftok *t = l->t;
    if (!a || a->type == JV_NULL)
        return 0;
    if (a->type != JV_ARR)
        return hft_bad(l, "added_tokens", "is not an array");
    t->added = calloc(a->n ? a->n : 1, sizeof *t->added);
    if (!t->added)
        return hft_nomem(l);
    for (size_t i = 0; i < a->n; i++) {
        const jv *o = &a->items[i];
        char p[64], k[96];
        snprintf(p, sizeof p, "added_tokens[%zu]", i);
        if (o->type != JV_OBJ)
            return hft_bad(l, p, "is not an object");
        static const char *refused[] = {"single_word", "lstrip", "rstrip"};
        int rc, b;
        for (int f = 0; f < 3; f++) {
            if ((rc = hft_get_bool(l, o, p, refused[f], 0, &b)) != 0)
                return rc;
            snprintf(k, sizeof k, "%s.%s", p, refused[f]);
            if (b)
                return hft_unsupported(l, k, "true", "false");
        }
        added_tok *at = &t->added[t->nadded++];
        const char *s;
        size_t n;
        long id;
        if ((rc = hft_get_str(l, o, p, "content", 0, &s, &n)) != 0 ||
            (rc = hft_dupstr(l, s, n, &at->s, &at->len)) != 0 ||
            (rc = hft_get_bool(l, o, p, "special", 0, &at->special)) != 0 ||
            (rc = hft_get_bool(l, o, p, "normalized", !at->special, &at->normalized)) != 0 ||
            (rc = hft_get_long(l, o, p, "id", &id)) != 0)
            return rc;
        if (n == 0)
            return hft_bad(l, p, "has an empty content");
        if (id >= NNT_HFTOK_MAXVOCAB)
            return hft_bad(l, p, "has an id too large");
        at->id = (int32_t)id;
        if (at->id >= t->nids)
            t->nids = at->id + 1;
        unsigned char *first = at->normalized ? t->first_norm : t->first_raw;
        first[(unsigned char)at->s[0]] = 1;
    }
    return 0;
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
                    rc = hft_read_model(l, j, m, &has_type);
                } else if (s < S_COUNT) {
                    hft_jv_free(&sec[s]);
                    rc = hft_jv_parse(j, &sec[s], 0, key);
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
        return hft_bad(l, "model", "is missing");
    if (!has_type)
        return hft_bad(l, "model.type", "is missing");
    return 0;
}

static int finish(loader *l, const char *buf, size_t len, model_raw *m, jv *sec)
{
    nnt_hftok *t = l->t;
    int rc;
    if ((rc = added_tokens(l, &sec[S_ADDED])) != 0 || (rc = hft_build_vocab(l, m->ve, m->nve)) != 0)
        return rc;
    if (m->merges_off) {
        if ((rc = hft_read_merges(l, buf, len, m->merges_off)) != 0)
            return rc;
    } else {
        t->mmask = 15;
        t->mkey = calloc(16, sizeof *t->mkey);
        t->mval = calloc(16, sizeof *t->mval);
        if (!t->mkey || !t->mval)
            return hft_nomem(l);
    }
    t->added_of_id = malloc((size_t)(t->nids ? t->nids : 1) * sizeof *t->added_of_id);
    if (!t->added_of_id)
        return hft_nomem(l);
    memset(t->added_of_id, 0xff, (size_t)(t->nids ? t->nids : 1) * sizeof *t->added_of_id);
    for (size_t i = 0; i < t->nadded; i++)
        t->added_of_id[t->added[i].id] = (int32_t)i;
    t->unk = -1;
    if (m->unk.type == JV_STR) {
        t->unk = hft_vocab_find(t, m->unk.s, m->unk.len);
        if (t->unk < 0)
            return hft_bad(l, "model.unk_token", "is not in model.vocab");
    } else if (m->unk.type != JV_NULL) {
        return hft_bad(l, "model.unk_token", "is not a string or null");
    }
    for (int b = 0; b < 256; b++) {
        char s[8];
        snprintf(s, sizeof s, "<0x%02X>", b);
        t->byte_id[b] = hft_vocab_find(t, s, 6);
    }
    bytelevel_tables(t);
    if ((rc = section(l, &sec[S_NORM], "normalizer", "normalizers", hft_normalizer_item)) != 0 ||
        (rc = section(l, &sec[S_PRE], "pre_tokenizer", "pretokenizers", hft_pretokenizer_item)) ||
        (rc = section(l, &sec[S_POST], "post_processor", "processors", postprocessor_item)) ||
        (rc = section(l, &sec[S_DEC], "decoder", "decoders", hft_decoder_item)) != 0)
        return rc;
    return 0;
}

int nnt_hftok_load_mem(const char *buf, size_t len, const char *what, nnt_hftok **out,
                       char *err, size_t errlen)
{
    *out = NULL;
    loader l = {calloc(1, sizeof(nnt_hftok)), what ? what : "tokenizer.json", err, errlen};
    if (!l.t)
        return hft_nomem(&l);
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
    hft_jv_free(&m.unk);
    for (int i = 0; i < S_COUNT; i++)
        hft_jv_free(&sec[i]);
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

int hft_enc_nomem(enc *e)
{
    return nnt_io_errf(e->err, e->errlen, NNT_E_NOMEM, "out of host memory while encoding");
}

void hft_emit(enc *e, int32_t id)
{
    if (e->out && e->n < e->cap)
        e->out[e->n] = id;
    e->n++;
}

int hft_push_span(enc *e, int which, size_t off, size_t len, int at0)
{
    if (len == 0)
        return 0;
    if (e->nsp[which] == e->spcap[which]) {
        size_t c = e->spcap[which] ? 2 * e->spcap[which] : 64;
        span *s = realloc(e->sp[which], c * sizeof *s);
        if (!s)
            return hft_enc_nomem(e);
        e->sp[which] = s;
        e->spcap[which] = c;
    }
    e->sp[which][e->nsp[which]++] = (span){off, len, at0};
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
        hft_emit(e, a->id);
        i += a->len;
        start = i;
    }
    if (len > start)
        return fn(e, s + start, len - start, at0 && start == 0);
    return 0;
}

static int normalized_text(enc *e, const char *s, size_t len, int at0)
{
    return hft_pretokenize_and_model(e, s, len, at0);
}

/* Normalize a segment between raw added tokens, then cut at the normalized added tokens. */
static int raw_text(enc *e, const char *s, size_t len, int at0)
{
    const nnt_hftok *t = e->t;
    if (t->nnorm == 0)
        return split_added(e, s, len, at0, 1, normalized_text);
    sbuf *nb = &e->norm;
    nb->n = 0;
    if (hft_sb_put(nb, s, len) || hft_normalize(t, nb))
        return hft_enc_nomem(e);
    /* normalized text can be split further on normalized added tokens; it lives in e->norm,
     * which pretokenize_and_model does not touch */
    return split_added(e, nb->p, nb->n, at0, 1, normalized_text);
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
        int32_t id = hft_vocab_find(t, u, n);
        if (id >= 0) {
            hft_emit(e, id);
            return 0;
        }
    }
    if (t->byte_fallback && t->byte_id[b] >= 0) {
        hft_emit(e, t->byte_id[b]);
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
    int rc = e.md ? 0 : hft_enc_nomem(&e);
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

void nnt_hftok_single_affixes(const nnt_hftok *t, const int32_t **pre, size_t *npre,
                              const int32_t **post, size_t *npost)
{
    *pre = t->single_pre, *npre = t->nsingle_pre;
    *post = t->single_post, *npost = t->nsingle_post;
}
