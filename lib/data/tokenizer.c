/* SPDX-License-Identifier: MIT */
/* nnt_tokenizer: the public face of the tokenizers: the byte-level one (token = byte value,
 * vocab 256), GPT-2's byte-level BPE of lib/io (vocab.json + merges.txt) and Hugging Face
 * tokenizer.json files (hftok.c and its pieces, hftok_impl.h).
 * No context is involved: failures are recorded as the calling thread's last error
 * (nnt_ctx_last_error(NULL)). A tokenizer is immutable after creation, so concurrent
 * encode/decode calls on one tokenizer are safe. */
#include "../internal.h"
#include "../io/io.h"
#include "hftok.h"

#include <stdlib.h>
#include <string.h>

typedef enum { TOK_BYTES, TOK_BPE, TOK_HF } tok_kind;

struct nnt_tokenizer {
    tok_kind kind;
    nnt_bpe *bpe;                 /* TOK_BPE only                                          */
    nnt_hftok *hf;                /* TOK_HF only                                           */
};

int nnt_tokenizer_bytes_create(nnt_tokenizer **out)
{
    if (!out)
        return nnt_fail(NULL, NNT_E_INVAL, "nnt_tokenizer_bytes_create: out is NULL");
    *out = calloc(1, sizeof **out);
    if (!*out)
        return nnt_fail(NULL, NNT_E_NOMEM, "nnt_tokenizer_bytes_create: out of host memory");
    (*out)->kind = TOK_BYTES;
    return NNT_OK;
}

int nnt_tokenizer_bpe_load(const char *vocab_json, const char *merges_txt, nnt_tokenizer **out)
{
    if (!out)
        return nnt_fail(NULL, NNT_E_INVAL, "nnt_tokenizer_bpe_load: out is NULL");
    *out = NULL;
    if (!vocab_json || !merges_txt)
        return nnt_fail(NULL, NNT_E_INVAL, "nnt_tokenizer_bpe_load: %s path is NULL",
                        vocab_json ? "merges.txt" : "vocab.json");
    nnt_tokenizer *tok = calloc(1, sizeof *tok);
    if (!tok)
        return nnt_fail(NULL, NNT_E_NOMEM, "nnt_tokenizer_bpe_load: out of host memory");
    char err[NNT_IO_ERRLEN];
    int rc = nnt_bpe_load_files(vocab_json, merges_txt, &tok->bpe, err, sizeof err);
    if (rc) {
        free(tok);
        return nnt_fail(NULL, rc, "nnt_tokenizer_bpe_load: %s", err);
    }
    tok->kind = TOK_BPE;
    *out = tok;
    return NNT_OK;
}

int nnt_tokenizer_hf_load(const char *tokenizer_json, nnt_tokenizer **out)
{
    if (!out)
        return nnt_fail(NULL, NNT_E_INVAL, "nnt_tokenizer_hf_load: out is NULL");
    *out = NULL;
    if (!tokenizer_json)
        return nnt_fail(NULL, NNT_E_INVAL, "nnt_tokenizer_hf_load: tokenizer_json is NULL");
    nnt_tokenizer *tok = calloc(1, sizeof *tok);
    if (!tok)
        return nnt_fail(NULL, NNT_E_NOMEM, "nnt_tokenizer_hf_load: out of host memory");
    char err[NNT_IO_ERRLEN];
    int rc = nnt_hftok_load(tokenizer_json, &tok->hf, err, sizeof err);
    if (rc) {
        free(tok);
        return nnt_fail(NULL, rc, "nnt_tokenizer_hf_load: %s", err);
    }
    tok->kind = TOK_HF;
    *out = tok;
    return NNT_OK;
}

void nnt_tokenizer_destroy(nnt_tokenizer *tok)
{
    if (!tok)
        return;
    nnt_hftok_free(tok->hf);
    nnt_bpe_free(tok->bpe);
    free(tok);
}

int nnt_tokenizer_vocab_size(const nnt_tokenizer *tok, int64_t *vocab)
{
    if (!tok || !vocab)
        return nnt_fail(NULL, NNT_E_INVAL, "nnt_tokenizer_vocab_size: %s is NULL",
                        tok ? "vocab" : "tokenizer");
    *vocab = tok->kind == TOK_BPE  ? nnt_bpe_vocab_size(tok->bpe)
           : tok->kind == TOK_HF ? nnt_hftok_vocab_size(tok->hf)
                                 : NNT_TEXT_VOCAB;
    return NNT_OK;
}

static int encode_bytes(const char *text, size_t len, int32_t *ids, size_t cap, size_t *n)
{
    *n = len;
    if (!ids)
        return NNT_OK;
    nnt_text_encode(text, len < cap ? len : cap, ids);
    if (len > cap)
        return nnt_fail(NULL, NNT_E_INVAL, "nnt_tokenizer_encode: %zu ids do not fit in a "
                        "buffer of %zu", len, cap);
    return NNT_OK;
}

static int encode_bpe(const nnt_tokenizer *tok, const char *text, size_t len, int32_t *ids,
                      size_t cap, size_t *n)
{
    char err[NNT_IO_ERRLEN];
    int rc = tok->kind == TOK_HF
                 ? nnt_hftok_encode(tok->hf, text, len, ids, ids ? cap : 0, n, err, sizeof err)
                 : nnt_bpe_encode(tok->bpe, text, len, ids, ids ? cap : 0, n, err, sizeof err);
    /* the arguments were checked, so NNT_E_INVAL means "did not fit": fine when counting */
    if (rc == NNT_E_INVAL && !ids && tok->kind == TOK_BPE)
        return NNT_OK;
    if (rc)
        return nnt_fail(NULL, rc, "nnt_tokenizer_encode: %s", err);
    return NNT_OK;
}

int nnt_tokenizer_encode(const nnt_tokenizer *tok, const char *text, size_t len, int32_t *ids,
                         size_t cap, size_t *n)
{
    if (n)
        *n = 0;
    if (!tok || !n || (!text && len))
        return nnt_fail(NULL, NNT_E_INVAL, "nnt_tokenizer_encode: %s is NULL",
                        !tok ? "tokenizer" : !n ? "n" : "text");
    if (tok->kind != TOK_BYTES)
        return encode_bpe(tok, text, len, ids, cap, n);
    return encode_bytes(text, len, ids, cap, n);
}

static int decode_bytes(const int32_t *ids, size_t n, char *text, size_t cap, size_t *len)
{
    for (size_t i = 0; i < n; i++)
        if (ids[i] < 0 || ids[i] >= NNT_TEXT_VOCAB)
            return nnt_fail(NULL, NNT_E_INVAL, "nnt_tokenizer_decode: id %ld at position %zu "
                            "is not a byte (0..255)", (long)ids[i], i);
    if (n >= cap) {
        *len = n + 1;
        return nnt_fail(NULL, NNT_E_INVAL, "nnt_tokenizer_decode: %zu bytes and the NUL do "
                        "not fit in a buffer of %zu", n, cap);
    }
    for (size_t i = 0; i < n; i++)
        text[i] = (char)(unsigned char)ids[i];
    text[n] = '\0';
    *len = n;
    return NNT_OK;
}

static int decode_bpe(const nnt_tokenizer *tok, const int32_t *ids, size_t n, char *text,
                      size_t cap, size_t *len)
{
    char err[NNT_IO_ERRLEN];
    size_t room = cap ? cap - 1 : 0, need = 0;
    int rc = tok->kind == TOK_HF
                 ? nnt_hftok_decode(tok->hf, ids, n, cap ? text : NULL, room, &need, err,
                                    sizeof err)
                 : nnt_bpe_decode(tok->bpe, ids, n, cap ? text : NULL, room, &need, err,
                                  sizeof err);
    /* the decoders set need only once every id is valid */
    if ((rc == NNT_E_INVAL && need > room) || (rc == 0 && cap == 0)) {
        *len = need + 1;
        return nnt_fail(NULL, NNT_E_INVAL, "nnt_tokenizer_decode: %zu bytes and the NUL do "
                        "not fit in a buffer of %zu", need, cap);
    }
    if (rc)
        return nnt_fail(NULL, rc, "nnt_tokenizer_decode: %s", err);
    text[need] = '\0';
    *len = need;
    return NNT_OK;
}

int nnt_tokenizer_decode(const nnt_tokenizer *tok, const int32_t *ids, size_t n, char *text,
                         size_t cap, size_t *len)
{
    if (len)
        *len = 0;
    if (!tok || !len || (!ids && n) || (!text && cap))
        return nnt_fail(NULL, NNT_E_INVAL, "nnt_tokenizer_decode: %s is NULL",
                        !tok ? "tokenizer" : !len ? "len" : !text && cap ? "text" : "ids");
    if (tok->kind != TOK_BYTES)
        return decode_bpe(tok, ids, n, text, cap, len);
    return decode_bytes(ids, n, text, cap, len);
}

void nnt_tokenizer_single_affixes(const nnt_tokenizer *tok, const int32_t **pre, size_t *npre,
                                  const int32_t **post, size_t *npost)
{
    static const int32_t none[1] = {0};
    *pre = *post = none, *npre = *npost = 0;
    if (tok && tok->kind == TOK_HF)
        nnt_hftok_single_affixes(tok->hf, pre, npre, post, npost);
}
