/* SPDX-License-Identifier: MIT */
/* bitsandbytes' 4-bit (NF4) weights of Hugging Face checkpoints, read as floats
 * (lib/models/bnb4.c). */
#ifndef NNT_MODELS_BNB4_H
#define NNT_MODELS_BNB4_H

#include "models.h"
#include "family.h"
#include "hf_shards.h"

#include "../io/io.h"
#include "nnt_cpu.h"   /* NNT_NF4_BLOCK, the only blocksize read */

/* One quantized weight: its entries (and their readers: a sharded checkpoint may keep them
 * in several files) and its quant state. */
typedef struct nnt_bnb4 {
    const nnt_st_entry *codes, *absmax, *nested_absmax, *nested_map;
    const nnt_st_reader *r_codes, *r_absmax, *r_nested_absmax, *r_nested_map;
    int nd;
    int64_t shape[NNT_IO_MAXDIM];   /* the weight's own shape (the quant state's)          */
    int64_t numel, blocksize;
    int nested;                     /* double quantization: absmax of 8-bit codes            */
    int64_t nested_blocksize;
    float offset;                   /* nested_offset                                         */
    float nested_code[256];
} nnt_bnb4;

/* 1 when entry e (in the file at path) of the checkpoint w is a bitsandbytes 4-bit weight,
 * with q filled and its companions checked (NF4's table, blocksize 64, their sizes); 0 for
 * any other tensor; a negative NNT_E_* naming fn and path for a malformed one, or one of a
 * kind nnt does not read (FP4, another blocksize, codes packed in another dtype). */
int nnt_bnb4_find(nnt_ctx *ctx, const char *fn, const nnt_hf_weights *w, const nnt_st_entry *e,
                  const char *path, nnt_bnb4 *q);
/* Values [offset, offset + count) of the weight (whole blocks), dequantized into dst as
 * bitsandbytes dequantizes them (bit for bit). */
int nnt_bnb4_read(nnt_ctx *ctx, const char *fn, const char *path, const nnt_bnb4 *q,
                  int64_t offset, int64_t count, float *dst);
/* 1 when name is one of the companion tensors of the 4-bit weight called weight. */
int nnt_bnb4_companion(const char *weight, const char *name);

#endif
