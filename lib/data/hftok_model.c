/* SPDX-License-Identifier: MIT */
/* tokenizer.json's model (part of the reader, hftok.c): BPE. The vocab and merges tables (open
 * addressing), "model" read key by key from the file (vocab straight into the arena, merges in a
 * second pass at their offset), and BPE over one piece: symbols in a linked list and a heap of
 * candidate pairs keyed (rank, position), lowest rank first, leftmost among equals. */
#include "hftok_impl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

int32_t hft_vocab_find(const nnt_hftok *t, const char *s, size_t n)
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

/* model.vocab: {"spelling": id, ...} straight into the arena; ids checked unique. */

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
                return hft_nomem(l);
            }
            *ve = e;
        }
        (*ve)[*nve] = (ventry){l->t->arena.n, (uint32_t)n, (int32_t)id};
        rc = hft_sb_put(&l->t->arena, s, n);
        free(s);
        if (rc)
            return hft_nomem(l);
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

int hft_build_vocab(loader *l, const ventry *ve, size_t nve)
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
        return hft_nomem(l);
    for (size_t i = 0; i < nid; i++)
        t->tokoff[i] = SIZE_MAX;
    for (size_t i = 0; i < nve; i++) {
        const char *s = t->arena.p + ve[i].off;
        if (t->tokoff[ve[i].id] != SIZE_MAX) {
            char k[64];
            snprintf(k, sizeof k, "model.vocab id %ld", (long)ve[i].id);
            return hft_bad(l, k, "is given to two tokens");
        }
        if (hft_vocab_find(t, s, ve[i].len) >= 0)
            return hft_bad(l, "model.vocab", "lists a token twice");
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
    *id = hft_vocab_find(l->t, s, n);
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
        if ((rc = hft_dupstr(l, b, na, &a, NULL)) != 0)
            goto out;
        memmove(b, sp + 1, nb);
    }
    int32_t ia, ib, iab;
    tmp->n = 0;
    if (hft_sb_put(tmp, a, na) || hft_sb_put(tmp, b, nb)) {
        rc = hft_nomem(l);
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

int hft_read_merges(loader *l, const char *buf, size_t len, size_t off)
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
        return hft_nomem(l);
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
    if ((rc = hft_jv_parse(j, &v, 0, "in model")) != 0) {
        hft_jv_free(&v);
        return rc;
    }
    char k[128];
    snprintf(k, sizeof k, "model.%s", key);
    if (strcmp(key, "type") == 0) {
        if (v.type != JV_STR)
            rc = hft_bad(l, k, "is not a string");
        else if (strcmp(v.s, "BPE") != 0)
            rc = hft_unsupported(l, k, v.s, "BPE");
    } else if (strcmp(key, "unk_token") == 0) {
        m->unk = v;
        return 0;
    } else if (strcmp(key, "dropout") == 0) {
        if (v.type != JV_NULL && !(v.type == JV_NUM && strtod(v.s, NULL) == 0))
            rc = hft_unsupported(l, k, v.type == JV_NUM ? v.s : "?", "null");
    } else if (strcmp(key, "continuing_subword_prefix") == 0 ||
               strcmp(key, "end_of_word_suffix") == 0) {
        if (v.type != JV_NULL && !(v.type == JV_STR && v.len == 0))
            rc = hft_unsupported(l, k, v.type == JV_STR ? v.s : "?", "null");
    } else if (strcmp(key, "fuse_unk") == 0 || strcmp(key, "byte_fallback") == 0 ||
               strcmp(key, "ignore_merges") == 0) {
        int *dst = key[0] == 'f' ? &t->fuse_unk : key[0] == 'b' ? &t->byte_fallback
                                                                : &t->ignore_merges;
        if (v.type != JV_BOOL)
            rc = hft_bad(l, k, "is not true or false");
        else
            *dst = v.b;
    }
    hft_jv_free(&v);
    return rc;
}

int hft_read_model(loader *l, nnt_json *j, model_raw *m, int *has_type)
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
        return hft_enc_nomem(e);
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
        int32_t id = hft_vocab_find(t, s + i, k);
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
int hft_bpe_piece(enc *e, const char *s, size_t len)
{
    const nnt_hftok *t = e->t;
    if (t->ignore_merges) {
        int32_t id = hft_vocab_find(t, s, len);
        if (id >= 0) {
            hft_emit(e, id);
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
        hft_emit(e, e->sid[i]);
    return 0;
}

