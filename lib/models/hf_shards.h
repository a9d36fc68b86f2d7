/* SPDX-License-Identifier: MIT */
/* The safetensors files of a Hugging Face checkpoint (internal, lib/models/hf_shards.c):
 * one model.safetensors, or the shards listed by model.safetensors.index.json, read as one
 * set of tensors; and what a sharded save needs (the split, the index, removing the files
 * of an earlier save).
 *
 * Index format (transformers' save_pretrained): a JSON object with
 *   "weight_map": {"<tensor name>": "<shard file name>", ...}   (required, non-empty)
 *   "metadata":   {"total_size": <bytes>, ...} or absent/null   (not used when loading)
 * and any other member ignored. Shard names are plain file names of the index's directory
 * (no '/', no '\\', no ".."). Shards are named model-00001-of-00003.safetensors. */
#ifndef NNT_MODELS_HF_SHARDS_H
#define NNT_MODELS_HF_SHARDS_H

#include "../internal.h"
#include "../io/io.h"

#define NNT_HF_SINGLE "model.safetensors"
#define NNT_HF_INDEX "model.safetensors.index.json"
#define NNT_HF_INDEX_MAX_BYTES (64u << 20)   /* largest index read                        */
#define NNT_HF_MAX_SHARDS 99999              /* the 5 digits of a shard's name            */

/* ---- reading ---------------------------------------------------------------------------- */

typedef struct nnt_hf_weights nnt_hf_weights;

/* dir/model.safetensors when it exists (as transformers, it wins over an index), else the
 * shards of dir/model.safetensors.index.json; neither: NNT_E_IO naming model.safetensors.
 * Sharded, everything is checked here, before any tensor is read: the index (JSON, the
 * weight_map's names and shard names), every shard named opens as a valid safetensors file,
 * every tensor of the map is in its shard, and every tensor of a shard is mapped to that
 * shard (a tensor is in exactly one file). Every shard stays open (one descriptor each,
 * headers only) until nnt_hf_weights_close. Errors name fn, the file and the key. */
int nnt_hf_weights_open(nnt_ctx *ctx, const char *fn, const char *dir, nnt_hf_weights **out);
/* One safetensors file at path as a set of one file. */
int nnt_hf_weights_open_file(nnt_ctx *ctx, const char *fn, const char *path,
                             nnt_hf_weights **out);
void nnt_hf_weights_close(nnt_hf_weights *w);          /* accepts NULL                   */
size_t nnt_hf_weights_count(const nnt_hf_weights *w);  /* tensors of all files            */
size_t nnt_hf_weights_files(const nnt_hf_weights *w);  /* 1, or the number of shards      */
/* The index's path when sharded, else the single file's. */
const char *nnt_hf_weights_source(const nnt_hf_weights *w);
/* Names of the tensors, sorted (bytewise), i < count. */
const char *nnt_hf_weights_name(const nnt_hf_weights *w, size_t i);
/* The tensor called name with the reader and path of its file (r, path may be NULL); NULL
 * when no file has it. */
const nnt_st_entry *nnt_hf_weights_find(const nnt_hf_weights *w, const char *name,
                                        const nnt_st_reader **r, const char **path);

/* ---- writing ---------------------------------------------------------------------------- */

/* The tensors of a save in file order (names, bytes) and the shard of each. */
typedef struct nnt_hf_plan {
    char **names;
    uint64_t *bytes;
    int *shard;               /* 0-based shard of each tensor, after nnt_hf_plan_split   */
    size_t n, cap;
    int nshards;
    uint64_t total;           /* sum of bytes                                            */
    uint64_t elements;        /* sum of the tensors' elements                            */
} nnt_hf_plan;

void nnt_hf_plan_free(nnt_hf_plan *p);                /* the arrays; p itself is the caller's */
/* Append a tensor of numel elements, bytes bytes (name copied). NNT_E_NOMEM with a message
 * in err. */
int nnt_hf_plan_add(nnt_hf_plan *p, const char *name, uint64_t numel, uint64_t bytes,
                    char *err, size_t errlen);
/* Split in file order as transformers does: a shard takes tensors while its data stays
 * within max_bytes; a tensor larger than max_bytes gets a shard of its own; max_bytes 0: one
 * shard. More than NNT_HF_MAX_SHARDS shards: NNT_E_INVAL. */
int nnt_hf_plan_split(nnt_hf_plan *p, uint64_t max_bytes, char *err, size_t errlen);
/* "model-%05d-of-%05d.safetensors" of shard k (0-based) of n into name. */
void nnt_hf_shard_name(int k, int n, char *name, size_t size);
/* Write path (the index) through temp + fsync + rename: metadata (total_parameters,
 * total_size) and the weight_map, names sorted, as transformers writes it. */
int nnt_hf_index_write(const nnt_hf_plan *p, const char *path, char *err, size_t errlen);
/* Remove from dir what an earlier save left that the current one did not write: nshards 0
 * (a single model.safetensors was written): the index and every model-NNNNN-of-MMMMM
 * .safetensors; nshards > 0: model.safetensors and the shards of any other count. Then
 * fsync dir. Files that are absent are fine. */
int nnt_hf_remove_stale(const char *dir, int nshards, char *err, size_t errlen);
/* Remove dir/model.safetensors.index.json if present and fsync dir. */
int nnt_hf_remove_index(const char *dir, char *err, size_t errlen);

#endif
