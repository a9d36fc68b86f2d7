/* SPDX-License-Identifier: MIT */
/* Hugging Face tokenizer.json (the `tokenizers` package's format), internal interface used by
 * lib/data/tokenizer.c. Messages go into (err, errlen) as in lib/io (io.h); the contract and
 * the supported subset are in nnt_tokenizer_hf_load(3). */
#ifndef NNT_HFTOK_H
#define NNT_HFTOK_H

#include <stddef.h>
#include <stdint.h>

#define NNT_HFTOK_MAXFILE (512u << 20) /* largest tokenizer.json, bytes                      */
#define NNT_HFTOK_MAXVOCAB (1 << 24)   /* ids are 0 .. NNT_HFTOK_MAXVOCAB - 1                */

typedef struct nnt_hftok nnt_hftok;

/* Read and check a whole tokenizer.json (path, or a directory holding one); NNT_E_FORMAT (malformed, inconsistent),
 * NNT_E_UNSUPPORTED (a valid component this reader does not implement), NNT_E_IO, NNT_E_NOMEM. */
int nnt_hftok_load(const char *path, nnt_hftok **out, char *err, size_t errlen);
/* The same from memory; messages name `what`. */
int nnt_hftok_load_mem(const char *buf, size_t len, const char *what, nnt_hftok **out,
                       char *err, size_t errlen);
void nnt_hftok_free(nnt_hftok *t);                  /* accepts NULL                        */
int32_t nnt_hftok_vocab_size(const nnt_hftok *t);   /* largest id + 1                      */
/* Encode len bytes; *n gets the id count; more than cap stores the first cap and returns
 * NNT_E_INVAL (out may be NULL with cap 0). Invalid UTF-8 without a byte token:
 * NNT_E_INVAL naming the offset. */
int nnt_hftok_encode(const nnt_hftok *t, const char *text, size_t len, int32_t *out,
                     size_t cap, size_t *n, char *err, size_t errlen);
/* Decode into out (no NUL); *len gets the byte count; more than cap writes nothing and
 * returns NNT_E_INVAL; an id outside the vocabulary is NNT_E_INVAL naming its position. */
int nnt_hftok_decode(const nnt_hftok *t, const int32_t *ids, size_t n, char *out, size_t cap,
                     size_t *len, char *err, size_t errlen);

/* The special ids a TemplateProcessing post-processor puts before (pre) and after (post)
 * one sequence, as the tokenizers package's encode(text, add_special_tokens=True) does (e.g.
 * Llama 3's <|begin_of_text|>); none for other post-processors. */
void nnt_hftok_single_affixes(const nnt_hftok *t, const int32_t **pre, size_t *npre,
                              const int32_t **post, size_t *npost);
#endif
