/* SPDX-License-Identifier: MIT */
/* bitsandbytes' 4-bit weights in Hugging Face checkpoints (transformers' load_in_4bit models
 * saved with save_pretrained, as the "-bnb-4bit" repositories publish them). A quantized
 * weight W of shape (out, in) is stored as
 *   W                                   U8 (numel / 2, 1): two 4-bit codes a byte, the first
 *                                       in the high half, the flattened tensor's order
 *   W.absmax                            F32 (numel / blocksize): each block's absmax; or, with
 *                                       double quantization, U8 codes of a second level:
 *   W.nested_absmax, W.nested_quant_map F32 (blocks / nested_blocksize), F32 (256): absmax[i]
 *                                       = nested_quant_map[code] * nested_absmax[i / nested
 *                                       blocksize] + nested_offset, in float
 *   W.quant_map                         F32 (16): the 4-bit code's values (NF4's)
 *   W.quant_state.bitsandbytes__nf4     U8: a JSON object: quant_type, blocksize, dtype, shape,
 *                                       and nested_blocksize, nested_offset with double
 *                                       quantization
 * Facts from bitsandbytes 0.50 and transformers 5 (tests/gen_nf4_fixtures.py checks them).
 * Read as floats, exactly as bitsandbytes dequantizes: table value times absmax. */
#include "bnb4.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define BNB4_STATE_NF4 ".quant_state.bitsandbytes__nf4"
#define BNB4_STATE_FP4 ".quant_state.bitsandbytes__fp4"

/* The companion tensor name + suffix (NULL if absent), its reader in *r. */
static const nnt_st_entry *companion(const nnt_hf_weights *w, const char *name,
                                     const char *suffix, const nnt_st_reader **r)
{
    char full[NNT_IO_MAXNAME + 64];
    snprintf(full, sizeof full, "%s%s", name, suffix);
    return nnt_hf_weights_find(w, full, r, NULL);
}

/* A whole small entry of r as dtype (count values), into dst. */
static int read_all(nnt_ctx *ctx, const char *fn, const char *path, const nnt_st_reader *r,
                    const nnt_st_entry *e, nnt_io_dtype dtype, void *dst)
{
    char err[NNT_IO_ERRLEN];
    if (nnt_st_read(r, e, dtype, 0, e->numel, dst, err, sizeof err))
        return nnt_fail(ctx, NNT_E_FORMAT, "%s: %s: %s", fn, path, err);
    return NNT_OK;
}

/* The quant_state JSON of q: quant type nf4, its blocksize, shape and nested settings. */
static int read_state(nnt_ctx *ctx, const char *fn, const char *path, const nnt_st_reader *r,
                      const nnt_st_entry *state, nnt_bnb4 *q)
{
    if (state->dtype != NNT_IO_U8 || state->numel > 65536)
        return nnt_fail(ctx, NNT_E_FORMAT, "%s: %s: %s is not a bitsandbytes quant state (U8 "
                        "JSON)", fn, path, state->name);
    char *text = malloc((size_t)state->numel + 1);
    if (!text)
        return nnt_fail(ctx, NNT_E_NOMEM, "%s: out of memory", fn);
    nnt_cfg_in *o = NULL;
    int rc = read_all(ctx, fn, path, r, state, NNT_IO_U8, text);
    if (rc == 0)
        rc = nnt_cfg_parse(ctx, fn, state->name, text, (size_t)state->numel, &o);
    free(text);
    char *type = NULL;
    int32_t shape[NNT_IO_MAXDIM];
    int64_t nd = 0;
    double offset = 0.0;
    if (rc == 0 && (rc = nnt_cfg_string(o, "quant_type", &type)) == 0 &&
        (!type || strcmp(type, "nf4") != 0))
        rc = nnt_fail(ctx, NNT_E_UNSUPPORTED, "%s: %s: %s: quant_type %s (nf4 only)", fn, path,
                      state->name, type ? type : "absent");
    free(type);
    if (rc == 0)
        rc = nnt_cfg_int(o, "blocksize", 1, 0, &q->blocksize);
    if (rc == 0)
        rc = nnt_cfg_int_list(o, "shape", "a list of dimensions", shape, NNT_IO_MAXDIM, &nd);
    if (rc == 0 && q->nested)
        rc = nnt_cfg_int(o, "nested_blocksize", 1, 0, &q->nested_blocksize);
    if (rc == 0 && q->nested)
        rc = nnt_cfg_double(o, "nested_offset", 1, 0.0, &offset);
    nnt_cfg_close(o);
    if (rc)
        return rc;
    q->nd = (int)nd;
    q->numel = 1;
    for (int d = 0; d < q->nd; d++) {
        q->shape[d] = shape[d];
        q->numel = shape[d] > 0 && q->numel <= INT64_MAX / shape[d] ? q->numel * shape[d] : 0;
    }
    q->offset = (float)offset;   /* bitsandbytes keeps it as a float32 */
    if (q->blocksize != NNT_NF4_BLOCK)
        return nnt_fail(ctx, NNT_E_UNSUPPORTED, "%s: %s: %s: blocksize %lld (bitsandbytes' "
                        "default %d only)", fn, path, state->name, (long long)q->blocksize,
                        NNT_NF4_BLOCK);
    if (nd < 1 || q->numel <= 0 || q->numel % NNT_NF4_BLOCK != 0 ||
        (q->nested && (q->nested_blocksize < 1 || q->nested_blocksize > (1 << 20))))
        return nnt_fail(ctx, NNT_E_FORMAT, "%s: %s: %s: shape of %lld values, not whole blocks "
                        "of %d, or nested_blocksize %lld", fn, path, state->name,
                        (long long)q->numel, NNT_NF4_BLOCK, (long long)q->nested_blocksize);
    return NNT_OK;
}

/* Entry e of the 4-bit weight called weight has dtype and numel values (what: its role, for
 * the message). */
static int check_entry(nnt_ctx *ctx, const char *fn, const char *path, const char *weight,
                       const nnt_st_entry *e, nnt_io_dtype dtype, int64_t numel,
                       const char *what)
{
    if (e && e->dtype == dtype && (int64_t)e->numel == numel)
        return NNT_OK;
    if (!e)
        return nnt_fail(ctx, NNT_E_FORMAT, "%s: %s: the bitsandbytes 4-bit weight %s has no "
                        "%s (%s.%s)", fn, path, weight, what, weight, what);
    return nnt_fail(ctx, NNT_E_FORMAT, "%s: %s: %s (the %s) is %s of %llu values, expected %s "
                    "of %lld", fn, path, e->name, what, nnt_io_dtype_name(e->dtype),
                    (unsigned long long)e->numel, nnt_io_dtype_name(dtype), (long long)numel);
}

int nnt_bnb4_find(nnt_ctx *ctx, const char *fn, const nnt_hf_weights *w, const nnt_st_entry *e,
                  const char *path, nnt_bnb4 *q)
{
    memset(q, 0, sizeof *q);
    const nnt_st_reader *rs = NULL;
    const nnt_st_entry *state = companion(w, e->name, BNB4_STATE_NF4, &rs);
    if (!state && companion(w, e->name, BNB4_STATE_FP4, &rs))
        return nnt_fail(ctx, NNT_E_UNSUPPORTED, "%s: %s: %s is a bitsandbytes FP4 weight (NF4 "
                        "only)", fn, path, e->name);
    if (!state)
        return 0;   /* a plain tensor */
    if (e->dtype != NNT_IO_U8)
        return nnt_fail(ctx, NNT_E_UNSUPPORTED, "%s: %s: %s is a bitsandbytes 4-bit weight "
                        "packed in %s (bnb_4bit_quant_storage uint8 only)", fn, path, e->name,
                        nnt_io_dtype_name(e->dtype));
    q->codes = e;
    nnt_hf_weights_find(w, e->name, &q->r_codes, NULL);
    q->absmax = companion(w, e->name, ".absmax", &q->r_absmax);
    q->nested_absmax = companion(w, e->name, ".nested_absmax", &q->r_nested_absmax);
    q->nested_map = companion(w, e->name, ".nested_quant_map", &q->r_nested_map);
    q->nested = q->nested_absmax != NULL || q->nested_map != NULL;
    NNT_TRY(read_state(ctx, fn, path, rs, state, q));
    const nnt_st_reader *rm = NULL;
    const nnt_st_entry *map = companion(w, e->name, ".quant_map", &rm);
    const int64_t blocks = q->numel / NNT_NF4_BLOCK;
    NNT_TRY(check_entry(ctx, fn, path, e->name, e, NNT_IO_U8, q->numel / 2, "codes"));
    NNT_TRY(check_entry(ctx, fn, path, e->name, map, NNT_IO_F32, 16, "quant_map"));
    NNT_TRY(check_entry(ctx, fn, path, e->name, q->absmax, q->nested ? NNT_IO_U8 : NNT_IO_F32,
                        blocks, "absmax"));
    float table[16];
    NNT_TRY(read_all(ctx, fn, path, rm, map, NNT_IO_F32, table));
    if (memcmp(table, nnt_cpu_nf4_table(), sizeof table) != 0)
        return nnt_fail(ctx, NNT_E_UNSUPPORTED, "%s: %s: %s is not NF4's table", fn, path,
                        map->name);
    if (!q->nested)
        return 1;
    const int64_t nested_blocks = (blocks + q->nested_blocksize - 1) / q->nested_blocksize;
    NNT_TRY(check_entry(ctx, fn, path, e->name, q->nested_absmax, NNT_IO_F32, nested_blocks,
                        "nested_absmax"));
    NNT_TRY(check_entry(ctx, fn, path, e->name, q->nested_map, NNT_IO_F32, 256,
                        "nested_quant_map"));
    NNT_TRY(read_all(ctx, fn, path, q->r_nested_map, q->nested_map, NNT_IO_F32,
                     q->nested_code));
    return 1;
}

int nnt_bnb4_companion(const char *weight, const char *name)
{
    static const char *const suffixes[] = {".absmax", ".quant_map", ".nested_absmax",
                                           ".nested_quant_map", BNB4_STATE_NF4};
    size_t n = strlen(weight);
    if (strncmp(name, weight, n) != 0)
        return 0;
    for (size_t i = 0; i < sizeof suffixes / sizeof suffixes[0]; i++)
        if (strcmp(name + n, suffixes[i]) == 0)
            return 1;
    return 0;
}

/* The absmax of blocks [b0, b0 + nb) of q into dst: read, or dequantized from the nested
 * level (a product then a sum, each rounded to float, as bitsandbytes computes them). */
static int read_absmax(const nnt_bnb4 *q, int64_t b0, int64_t nb, float *dst, char *err,
                       size_t errlen)
{
    if (!q->nested)
        return nnt_st_read(q->r_absmax, q->absmax, NNT_IO_F32, (uint64_t)b0, (uint64_t)nb, dst,
                           err, errlen);
    uint8_t *a8 = malloc((size_t)nb + 1);
    int64_t n0 = b0 / q->nested_blocksize, nn = (b0 + nb - 1) / q->nested_blocksize - n0 + 1;
    float *scale = malloc((size_t)nn * sizeof *scale);
    int rc = a8 && scale ? 0 : NNT_E_NOMEM;
    if (rc)
        snprintf(err, errlen, "out of memory");
    if (rc == 0)
        rc = nnt_st_read(q->r_absmax, q->absmax, NNT_IO_U8, (uint64_t)b0, (uint64_t)nb, a8, err,
                         errlen);
    if (rc == 0)
        rc = nnt_st_read(q->r_nested_absmax, q->nested_absmax, NNT_IO_F32, (uint64_t)n0,
                         (uint64_t)nn, scale, err, errlen);
    for (int64_t i = 0; rc == 0 && i < nb; i++) {
        float v = q->nested_code[a8[i]] * scale[(b0 + i) / q->nested_blocksize - n0];
        dst[i] = v + q->offset;
    }
    free(a8);
    free(scale);
    return rc;
}

int nnt_bnb4_read(nnt_ctx *ctx, const char *fn, const char *path, const nnt_bnb4 *q,
                  int64_t offset, int64_t count, float *dst)
{
    char err[NNT_IO_ERRLEN];
    if (offset < 0 || count < 0 || offset % NNT_NF4_BLOCK || count % NNT_NF4_BLOCK ||
        offset + count > q->numel)
        return nnt_fail(ctx, NNT_E_FORMAT, "%s: %s: values [%lld, %lld) of the 4-bit weight %s "
                        "are no whole blocks of it", fn, path, (long long)offset,
                        (long long)(offset + count), q->codes->name);
    const int64_t b0 = offset / NNT_NF4_BLOCK, nb = count / NNT_NF4_BLOCK;
    uint8_t *codes = malloc((size_t)count / 2 + 1);
    float *absmax = malloc((size_t)nb * sizeof *absmax + 1);
    if (!codes || !absmax) {
        free(codes), free(absmax);
        return nnt_fail(ctx, NNT_E_NOMEM, "%s: out of memory", fn);
    }
    int rc = nnt_st_read(q->r_codes, q->codes, NNT_IO_U8, (uint64_t)(offset / 2),
                         (uint64_t)(count / 2), codes, err, sizeof err);
    if (rc == 0)
        rc = read_absmax(q, b0, nb, absmax, err, sizeof err);
    if (rc == 0)
        nnt_cpu_nf4_dequantize(count, codes, absmax, dst, 0);
    free(codes);
    free(absmax);
    return rc ? nnt_fail(ctx, rc == NNT_E_NOMEM ? rc : NNT_E_FORMAT, "%s: %s: %s", fn, path, err)
              : NNT_OK;
}
