/* SPDX-License-Identifier: MIT */
/* The tokenizer.json reader's internals, shared by its pieces (not installed, not exported:
 * the library builds with -fvisibility=hidden and a version script):
 *   hftok.c            the tokenizer, loading (sections, added tokens), encoding's outer loop
 *   hftok_normalize.c  normalizers: reading them, applying the chain (NFC ... through utf8proc)
 *   hftok_pretok.c     pre-tokenizers: reading them, splitting text into pieces (PCRE2)
 *   hftok_model.c      the model: vocab and merges tables, reading them, BPE over one piece
 *   hftok_decode.c     decoders: reading them, ids -> bytes
 * lib/data/hftok.h is the interface the rest of the library uses. */
#ifndef NNT_HFTOK_IMPL_H
#define NNT_HFTOK_IMPL_H

#include "hftok.h"
#include "../io/io.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <stddef.h>
#include <stdint.h>

/* ---- byte buffers --------------------------------------------------------------------------- */
typedef struct { char *p; size_t n, cap; } sbuf;

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
    int32_t single_pre[8], single_post[8]; /* TemplateProcessing "single": the special ids
                                     before and after the sequence (encode with
                                     add_special_tokens=True)                                */
    size_t nsingle_pre, nsingle_post;
    int bytelevel;                /* a ByteLevel pre-tokenizer: invalid bytes have a token   */
    int byte_fallback, ignore_merges, fuse_unk;
    int32_t unk;                  /* -1: none                                                */
    int32_t byte_id[256];         /* <0xXX> ids (byte_fallback) or -1                        */
    uint32_t byte_cp[256];        /* ByteLevel: byte -> code point                           */
    int16_t cp_byte[324];         /* ... and back (code points < 324), -1                    */
};

/* ---- loading ---------------------------------------------------------------------------------- */
typedef struct {
    nnt_hftok *t;
    const char *what;             /* the file, for messages                                 */
    char *err;
    size_t errlen;
} loader;

/* ---- the model (hftok_model.c) -------------------------------------------------------------- */
/* model.vocab entries: spelling (offset, length in the arena) and id */
typedef struct { size_t off; uint32_t len; int32_t id; } ventry;
typedef struct {
    ventry *ve;
    size_t nve;
    size_t merges_off;            /* 0: no merges                                            */
    jv unk;                       /* model.unk_token                                         */
} model_raw;

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

/* ---- shared functions (hftok.c) ------------------------------------------------------------- */
int hft_sb_put(sbuf *b, const void *s, size_t n); /* -1: out of memory                           */
void hft_jv_free(jv *v);
int hft_jv_parse(nnt_json *j, jv *v, int depth, const char *ctx);
const jv *hft_jv_get(const jv *o, const char *key);
/* v appended to b as the chat templates' tojson (Python's json.dumps, ensure_ascii=False)
 * writes json.loads' value of it: indent < 0 one line, else that many spaces a level
 * (tojson(indent=4)); 0 or NNT_E_NOMEM (lib/data/tojson.c) */
int hft_jv_tojson(sbuf *b, const jv *v, int indent);
/* An object's keys as a Python dict holds them: key k is repeated when given before k too
 * (skip it), and its value is the last one given (lib/data/tojson.c) */
int hft_jv_repeated(const jv *o, size_t k);
const jv *hft_jv_last_value(const jv *o, size_t k);
/* gpt-oss's tools (a list of function schemas) appended to b as its template writes them in
 * the developer message: "## functions" and a TypeScript namespace; 0, or an error (set)
 * naming what its template cannot write (lib/data/harmony.c) */
int hft_harmony_tools(sbuf *b, const jv *tools);
/* gpt-oss's system block's "# Tools" of its built-in tools (chat_template_kwargs
 * builtin_tools): the browser's namespace and the python tool's description, those given */
int hft_harmony_builtin(sbuf *b, int browser, int python);
/* Loading: messages naming the key (path), returning the status. */
int hft_unsupported(loader *l, const char *key, const char *value, const char *supported);
int hft_bad(loader *l, const char *key, const char *what);
int hft_nomem(loader *l);
int hft_get_str(loader *l, const jv *o, const char *path, const char *key, int opt,
                const char **s, size_t *n);
int hft_get_bool(loader *l, const jv *o, const char *path, const char *key, int def, int *b);
int hft_get_long(loader *l, const jv *o, const char *path, const char *key, long *out);
int hft_dupstr(loader *l, const char *s, size_t n, char **out, size_t *outlen);
int hft_get_pattern(loader *l, const jv *o, const char *path, int regex_ok, char **lit,
                    size_t *litlen, pcre2_code **re);
const char *hft_type_of(loader *l, const jv *o, const char *path, int *rc);
void *hft_push_step(loader *l, void **arr, size_t *n, size_t size, int *rc);
/* Encoding */
int hft_enc_nomem(enc *e);
void hft_emit(enc *e, int32_t id);
int hft_push_span(enc *e, int which, size_t off, size_t len, int at0);

/* ---- the pieces: one section item each (loading), and what encoding or decoding calls ------- */
int hft_normalizer_item(loader *l, const jv *o, const char *path);     /* hftok_normalize.c */
int hft_normalize(const nnt_hftok *t, sbuf *nb);  /* the chain, in place; -1: out of memory    */
int hft_pretokenizer_item(loader *l, const jv *o, const char *path);   /* hftok_pretok.c    */
/* Metaspace's prepend_scheme (PREPEND_*) and a one-character member (also for decoders). */
int hft_prepend_scheme(loader *l, const jv *o, const char *path, int *scheme);
int hft_one_char(loader *l, const jv *o, const char *path, const char *key, char **s,
                 size_t *n);
/* Pre-tokenize s (normalized text) and run the model on each piece. */
int hft_pretokenize_and_model(enc *e, const char *s, size_t len, int at0);
int32_t hft_vocab_find(const nnt_hftok *t, const char *s, size_t n);    /* hftok_model.c     */
int hft_read_model(loader *l, nnt_json *j, model_raw *m, int *has_type);
int hft_build_vocab(loader *l, const ventry *ve, size_t nve);
int hft_read_merges(loader *l, const char *buf, size_t len, size_t off);
int hft_bpe_piece(enc *e, const char *s, size_t len);
int hft_decoder_item(loader *l, const jv *o, const char *path);        /* hftok_decode.c    */

#endif
