/* SPDX-License-Identifier: MIT */
/* The tokenizer a model source comes with (nnt_tokenizer_of_source), the one rule of
 * nnt_trainer_open, nnt-train and nnt-generate: a directory's tokenizer.json, else its
 * vocab.json and merges.txt, else the checkpoint.safetensors it holds; a training
 * checkpoint's, as its run recorded it; none otherwise. */
#include "trainer_impl.h"

#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static int readable(const char *path)
{
    return path && access(path, R_OK) == 0;
}

static char *path_in(const char *dir, const char *name)
{
    size_t n = strlen(dir) + strlen(name) + 2;
    char *s = malloc(n);
    if (s)
        snprintf(s, n, "%s/%s", dir, name);
    return s;
}

/* A training checkpoint's tokenizer as its run recorded it (options: its options string). */
static int recorded(const char *path, const char *options, int *kind, char *files[3])
{
    static const char *const keys[3] = {"tokenizer_json", "bpe_vocab", "bpe_merges"};
    char name[16], file[4096];
    int found = 0;
    if (!options || nnt_options_get(options, "tokenizer", name, sizeof name, &found) || !found)
        return NNT_OK;   /* none recorded */
    *kind = !strcmp(name, "bytes") ? NNT_TOKENIZER_BYTES : !strcmp(name, "bpe")
            ? NNT_TOKENIZER_BPE : !strcmp(name, "json") ? NNT_TOKENIZER_JSON : -2;
    if (*kind == -2)
        return nnt_fail(NULL, NNT_E_FORMAT, "nnt_tokenizer_of_source: %s records the tokenizer "
                        "'%s', not bytes, bpe or json", path, name);
    int first = *kind == NNT_TOKENIZER_JSON ? 0 : 1, last = *kind == NNT_TOKENIZER_BPE ? 2 : 0;
    for (int i = first; *kind != NNT_TOKENIZER_BYTES && i <= last; i++) {
        found = 0;
        if (nnt_options_get(options, keys[i], file, sizeof file, &found) || !found ||
            !readable(file))
            return nnt_fail(NULL, NNT_E_IO, "nnt_tokenizer_of_source: %s was trained with the "
                            "%s tokenizer of %s, which is not there", path, name,
                            found ? file : "(no file recorded)");
        if (!(files[i] = strdup(file)))
            return nnt_fail(NULL, NNT_E_NOMEM, "nnt_tokenizer_of_source: out of memory");
    }
    return NNT_OK;
}

int nnt_source_tokenizer(const char *source, int *kind, char *files[3])
{
    struct stat st;
    *kind = NNT_TOKENIZER_AUTO;
    if (!source || stat(source, &st) != 0)
        return NNT_OK;   /* none, or a preset */
    char *json = NULL, *vocab = NULL, *merges = NULL, *ckpt = NULL;
    int rc = NNT_OK, dir = S_ISDIR(st.st_mode);
    if (dir && (!(json = path_in(source, "tokenizer.json")) ||
                !(vocab = path_in(source, "vocab.json")) ||
                !(merges = path_in(source, "merges.txt")) ||
                !(ckpt = path_in(source, "checkpoint.safetensors"))))
        rc = nnt_fail(NULL, NNT_E_NOMEM, "nnt_tokenizer_of_source: out of memory");
    else if (dir && readable(json))
        *kind = NNT_TOKENIZER_JSON, files[0] = json, json = NULL;
    else if (dir && readable(vocab) && readable(merges))
        *kind = NNT_TOKENIZER_BPE, files[1] = vocab, files[2] = merges, vocab = merges = NULL;
    else if (!dir || readable(ckpt)) {
        nnt_train_state ts = NNT_TRAIN_STATE_INIT;
        const char *path = dir ? ckpt : source;
        /* (not a training checkpoint, e.g. an llm.c file: no tokenizer named) */
        if (nnt_train_state_info(NULL, path, &ts) == NNT_OK)
            rc = recorded(path, ts.options, kind, files);
        nnt_train_state_clear(&ts);
    }
    free(json), free(vocab), free(merges), free(ckpt);
    return rc;
}

int nnt_source_tokenizer_open(int kind, char *const files[3], nnt_tokenizer **out)
{
    if (kind == NNT_TOKENIZER_BYTES)
        return nnt_tokenizer_bytes_create(out);
    if (kind == NNT_TOKENIZER_BPE)
        return nnt_tokenizer_bpe_load(files[1], files[2], out);
    if (kind == NNT_TOKENIZER_JSON)   /* (a directory: its tokenizer.json) */
        return nnt_tokenizer_hf_load(files[0], out);
    return nnt_fail(NULL, NNT_E_INVAL, "tokenizer: %d is not a tokenizer kind", kind);
}

NNT_API int nnt_tokenizer_of_source(const char *source, nnt_tokenizer **out)
{
    char *files[3] = {NULL, NULL, NULL};
    int kind = NNT_TOKENIZER_AUTO;
    if (!out)
        return nnt_fail(NULL, NNT_E_INVAL, "nnt_tokenizer_of_source: out is NULL");
    *out = NULL;
    int rc = nnt_source_tokenizer(source, &kind, files);
    if (rc == NNT_OK && kind != NNT_TOKENIZER_AUTO)
        rc = nnt_source_tokenizer_open(kind, files, out);
    for (int i = 0; i < 3; i++)
        free(files[i]);
    return rc;
}
