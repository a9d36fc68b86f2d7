// SPDX-License-Identifier: MIT
/* A model from whatever a user names (nnt_model_source_config, nnt_model_open): a preset, a
 * Hugging Face directory, an llm.c checkpoint, a training checkpoint (or the directory
 * holding checkpoint.safetensors), GPT-2 weights in a safetensors file. */
#include "models.h"
#include "../internal.h"
#include "../io/io.h"

#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

typedef enum source_kind {
    SOURCE_PRESET, SOURCE_HF, SOURCE_LLMC, SOURCE_STATE, SOURCE_WEIGHTS
} source_kind;

#define LLMC_MAGIC 20240326u

/* The kind of the file path: llm.c by its magic, a training state by its metadata, other
 * safetensors files GPT-2 weights. */
static int file_kind(nnt_ctx *ctx, const char *fn, const char *path, source_kind *kind)
{
    unsigned char head[4] = {0, 0, 0, 0};
    FILE *f = fopen(path, "rb");
    size_t got = f ? fread(head, 1, sizeof head, f) : 0;
    if (f)
        fclose(f);
    if (got == sizeof head && nnt_io_le32(head) == LLMC_MAGIC) {
        *kind = SOURCE_LLMC;
        return NNT_OK;
    }
    char err[NNT_IO_ERRLEN];
    nnt_st_reader *r = NULL;
    int rc = nnt_st_open(path, &r, err, sizeof err);
    if (rc)
        return nnt_fail(ctx, rc, "%s: %s is not an llm.c checkpoint (magic %u) nor a "
                        "safetensors file: %s", fn, path, LLMC_MAGIC, err);
    const char *format = nnt_st_metadata_get(r, "format");
    *kind = format && !strcmp(format, "nnt-train-state") ? SOURCE_STATE : SOURCE_WEIGHTS;
    nnt_st_close(r);
    return NNT_OK;
}

/* What source names, and the file or directory to read (path, NNT_MODEL_PATH_MAX bytes). */
static int classify(nnt_ctx *ctx, const char *fn, const char *source, source_kind *kind,
                    char *path)
{
    struct stat st;
    nnt_model_config c;
    if (!source)
        return nnt_fail(ctx, NNT_E_INVAL, "%s: source is NULL", fn);
    if (stat(source, &st) != 0) {
        *kind = SOURCE_PRESET;
        if (nnt_model_preset(source, &c) == 0)
            return NNT_OK;
        return nnt_fail(ctx, NNT_E_IO, "%s: '%s' is neither a file, a directory nor a preset "
                        "(nnt_model_preset)", fn, source);
    }
    if (!S_ISDIR(st.st_mode)) {
        if ((size_t)snprintf(path, NNT_MODEL_PATH_MAX, "%s", source) >= NNT_MODEL_PATH_MAX)
            return nnt_fail(ctx, NNT_E_INVAL, "%s: the path %s is too long", fn, source);
        return file_kind(ctx, fn, path, kind);
    }
    NNT_TRY(nnt_model_path_join(ctx, fn, source, "config.json", path));
    if (stat(path, &st) == 0) {
        *kind = SOURCE_HF;
        snprintf(path, NNT_MODEL_PATH_MAX, "%s", source);   /* (shorter than the join) */
        return NNT_OK;
    }
    *kind = SOURCE_STATE;
    NNT_TRY(nnt_model_path_join(ctx, fn, source, "checkpoint.safetensors", path));
    if (stat(path, &st) == 0)
        return NNT_OK;
    return nnt_fail(ctx, NNT_E_IO, "%s: directory %s holds neither config.json (a Hugging "
                    "Face model) nor checkpoint.safetensors (a training checkpoint)", fn,
                    source);
}

int nnt_model_source_is_fresh(const char *source)
{
    struct stat st;
    nnt_model_config c;
    return !source || (stat(source, &st) != 0 && nnt_model_preset(source, &c) == 0);
}

int nnt_model_source_is_hf(const char *source)
{
    char path[NNT_MODEL_PATH_MAX];
    source_kind kind;
    struct stat st;
    /* (only a directory can be one: no failure recorded for the rest) */
    return source && stat(source, &st) == 0 && S_ISDIR(st.st_mode) &&
           classify(NULL, "nnt_model_source_is_hf", source, &kind, path) == 0 &&
           kind == SOURCE_HF;
}

NNT_API int nnt_model_source_config(nnt_ctx *ctx, const char *source, nnt_model_config *cfg)
{
    const char *fn = "nnt_model_source_config";
    char path[NNT_MODEL_PATH_MAX];
    source_kind kind;
    if (!cfg)
        return nnt_fail(ctx, NNT_E_INVAL, "%s: cfg is NULL", fn);
    NNT_TRY(classify(ctx, fn, source, &kind, path));
    switch (kind) {
    case SOURCE_PRESET:
        return nnt_model_preset(source, cfg);
    case SOURCE_HF:
        return nnt_model_hf_config(ctx, path, cfg);
    case SOURCE_LLMC:
        return nnt_model_llmc_config(ctx, fn, path, cfg);
    case SOURCE_STATE:
        return nnt_model_train_state_config(ctx, path, cfg);
    case SOURCE_WEIGHTS:
        break;
    }
    return nnt_fail(ctx, NNT_E_INVAL, "%s: %s holds weights without a configuration: give "
                    "it to nnt_model_open (GPT-2)", fn, path);
}

NNT_API int nnt_model_source_label_name(nnt_ctx *ctx, const char *source, int64_t k,
                                        char *buf, size_t size)
{
    const char *fn = "nnt_model_source_label_name";
    char path[NNT_MODEL_PATH_MAX];
    source_kind kind;
    nnt_model_config cfg;
    if (!buf || size == 0)
        return nnt_fail(ctx, NNT_E_INVAL, "%s: buf %p, size %zu", fn, (void *)buf, size);
    NNT_TRY(classify(ctx, fn, source, &kind, path));
    NNT_TRY(nnt_model_source_config(ctx, source, &cfg));
    if (cfg.num_labels < 1 || k < 0 || k >= cfg.num_labels)
        return nnt_fail(ctx, NNT_E_INVAL, "%s: label %lld of %s: %s", fn, (long long)k, source,
                        cfg.num_labels < 1 ? "a language model, not a classifier (num_labels 0)"
                                           : "not one of its labels");
    char **names = NULL;   /* (presets and llm.c files are language models) */
    NNT_TRY(kind == SOURCE_HF
                ? nnt_model_label_names_read_dir(ctx, fn, path, cfg.num_labels, &names)
                : nnt_model_train_state_label_names(ctx, fn, path, cfg.num_labels, &names));
    int rc = nnt_label_name_into(ctx, fn, (const char *const *)names, k, buf, size);
    nnt_label_names_free(names, cfg.num_labels);
    return rc;
}

/* Created from cfg (or the preset's) and initialised from seed. */
static int create(nnt_ctx *ctx, const char *preset, const nnt_model_config *cfg, int64_t B,
                  int64_t T, const nnt_tiling *tiling, uint64_t seed, nnt_layer **out)
{
    nnt_model_config c;
    if (!cfg && !preset)
        return nnt_fail(ctx, NNT_E_INVAL, "nnt_model_open: source and cfg are NULL");
    if (!cfg)
        NNT_TRY(nnt_model_preset(preset, &c));
    /* initialised once, at seed (not first at 0 by nnt_model_create) */
    return nnt_model_build_init(ctx, "nnt_model_create", cfg ? cfg : &c, B, T, tiling, seed, out);
}

/* GPT-2 weights of a safetensors file, in the configuration cfg. */
static int load_weights(nnt_ctx *ctx, const char *path, const nnt_model_config *cfg,
                        int64_t B, int64_t T, const nnt_tiling *tiling, nnt_layer **out)
{
    if (!cfg)
        return nnt_fail(ctx, NNT_E_INVAL, "nnt_model_open: %s holds weights without a "
                        "configuration: give cfg", path);
    nnt_gpt_config g = {sizeof g, cfg->vocab, cfg->max_seq, cfg->layers, cfg->heads,
                        cfg->channels};
    return nnt_gpt_load_safetensors(ctx, path, &g, B, T, tiling, out);
}

NNT_API int nnt_model_open(nnt_ctx *ctx, const char *source, const nnt_model_config *cfg,
                           int64_t B, int64_t T, const nnt_tiling *tiling, uint64_t seed,
                           nnt_layer **out)
{
    char path[NNT_MODEL_PATH_MAX];
    source_kind kind = SOURCE_PRESET;
    if (!out)
        return nnt_fail(ctx, NNT_E_INVAL, "nnt_model_open: out is NULL");
    *out = NULL;
    if (source)
        NNT_TRY(classify(ctx, "nnt_model_open", source, &kind, path));
    switch (kind) {
    case SOURCE_PRESET:
        return create(ctx, source, cfg, B, T, tiling, seed, out);
    case SOURCE_HF:
        return nnt_model_load_hf(ctx, path, B, T, tiling, out);
    case SOURCE_LLMC:
        return nnt_gpt_load_llmc(ctx, path, B, T, tiling, out);
    case SOURCE_STATE:
        return nnt_model_load_train_state(ctx, path, B, T, tiling, NULL, out);
    case SOURCE_WEIGHTS:
        break;
    }
    return load_weights(ctx, path, cfg, B, T, tiling, out);
}
