/* SPDX-License-Identifier: MIT */
/* File formats of nnt (internal, not installed): safetensors, llm.c GPT-2 checkpoints, token
 * data (llm.c shards, nanoGPT .bin, plain text with a byte-level tokenizer) and the small
 * bounded JSON reader the safetensors header needs.
 *
 * Plain C99 + POSIX: no StarPU, no tensors, no config.h. Everything reads and writes host
 * buffers, so the layer is tested alone (tests/test_io.c) and fuzzed (tests/fuzz_safetensors.c).
 *
 * Errors: every function that can fail returns 0 or a negative NNT_E_* code of nnt.h and
 * writes a one-line message into the caller's buffer (err, errlen): the file, the field,
 * the tensor and the byte offset where that applies. err may be NULL or errlen 0; a message
 * longer than errlen is truncated. The messages are meant to be forwarded by the caller
 * (nnt_fail needs a context, which this layer does not have). On success err is untouched.
 *   NNT_E_INVAL        bad argument (NULL, bad name, window outside the data, ...)
 *   NNT_E_NOMEM        allocation failed
 *   NNT_E_IO           open/read/write/fsync/rename failed, or a file shrank while open
 *   NNT_E_FORMAT       malformed, truncated or inconsistent file; a value that does not fit
 *                      the requested type (I64 -> I32) or a token id >= vocab
 *   NNT_E_UNSUPPORTED  valid file this layer cannot use: llm.c bf16 checkpoint (version 5),
 *                      safetensors tensor of more than NNT_IO_MAXDIM dimensions, or a dtype
 *                      conversion that is not implemented
 *   NNT_E_STATE        writer used in the wrong order (add after data was written)
 *
 * Readers are immutable after open: concurrent reads from several threads are safe (pread).
 * All multi-byte values in files are little-endian; big-endian hosts are handled.
 * Writers write "PATH.tmp-XXXXXX" next to PATH, fsync it, rename it over PATH and fsync the
 * directory: PATH is either the old file or the complete new one, and the temporary file is
 * removed on every failure. A new file gets mode 0644 (or the mode of the file it replaces).
 */
#ifndef NNT_IO_H
#define NNT_IO_H

#include <stddef.h>
#include <stdint.h>

#include "nnt.h"

#if defined(__GNUC__)
#define NNT_IO_PRINTF(f, a) __attribute__((format(printf, f, a)))
#else
#define NNT_IO_PRINTF(f, a)
#endif

#define NNT_IO_ERRLEN 512          /* a good size for err buffers                          */
#define NNT_IO_MAXDIM 8            /* most dimensions of a tensor                          */
#define NNT_IO_MAXNAME 1024        /* longest tensor name / metadata key, bytes (no NUL)   */
#define NNT_IO_MAXHEADER (100u << 20) /* largest safetensors JSON header, bytes            */
#define NNT_JSON_MAXDEPTH 64       /* deepest nesting nnt_json_skip accepts                */

/* ---- element types (the safetensors set of byte-sized types) ------------------------------ */
typedef enum {
    NNT_IO_BOOL = 0,
    NNT_IO_U8,
    NNT_IO_I8,
    NNT_IO_F8_E5M2,
    NNT_IO_F8_E4M3,
    NNT_IO_I16,
    NNT_IO_U16,
    NNT_IO_F16,
    NNT_IO_BF16,
    NNT_IO_I32,
    NNT_IO_U32,
    NNT_IO_F32,
    NNT_IO_F64,
    NNT_IO_I64,
    NNT_IO_U64,
    NNT_IO_NDTYPES
} nnt_io_dtype;

const char *nnt_io_dtype_name(nnt_io_dtype t);     /* "F32", ...; "?" when out of range     */
size_t nnt_io_dtype_size(nnt_io_dtype t);          /* bytes per element; 0 when out of range */
/* Parse a safetensors dtype name of len bytes; 0 or -1 when unknown. */
int nnt_io_dtype_parse(const char *s, size_t len, nnt_io_dtype *out);

/* ---- safetensors reader -------------------------------------------------------------------- */
typedef struct nnt_st_entry {
    const char *name;              /* NUL-terminated UTF-8, 1..NNT_IO_MAXNAME bytes         */
    nnt_io_dtype dtype;
    int ndim;                      /* 0 (a scalar) .. NNT_IO_MAXDIM                         */
    int64_t shape[NNT_IO_MAXDIM];  /* unused dimensions are 0                               */
    uint64_t numel;                /* product of shape (1 for a scalar)                     */
    uint64_t offset;               /* byte offset of the data from the start of the file    */
    uint64_t nbytes;               /* numel * dtype size                                    */
} nnt_st_entry;

typedef struct nnt_st_reader nnt_st_reader;

/* Open and validate a file: the header length (<= NNT_IO_MAXHEADER and <= file size - 8), the
 * JSON (strict: a '{' first, no duplicate keys, no unknown keys in an entry, only whitespace
 * after the object), every entry (known dtype, shape of non-negative integers, data_offsets
 * [begin, end] with begin <= end, (end - begin) == numel * dtype size), and the data layout
 * (entries sorted by begin tile the data section exactly: no gap, no overlap, nothing after).
 * Only the header is read here; data is read by nnt_st_read with pread. */
int nnt_st_open(const char *path, nnt_st_reader **out, char *err, size_t errlen);
/* The same from a memory buffer of len bytes, which must outlive the reader (not copied). */
int nnt_st_open_mem(const void *buf, size_t len, nnt_st_reader **out, char *err, size_t errlen);
void nnt_st_close(nnt_st_reader *r);               /* accepts NULL                          */

size_t nnt_st_count(const nnt_st_reader *r);
/* Entries in file order (by data offset), i < nnt_st_count(r); NULL when out of range. */
const nnt_st_entry *nnt_st_entry_at(const nnt_st_reader *r, size_t i);
const nnt_st_entry *nnt_st_find(const nnt_st_reader *r, const char *name); /* NULL: absent */

/* "__metadata__" pairs, sorted by key. */
size_t nnt_st_metadata_count(const nnt_st_reader *r);
int nnt_st_metadata_at(const nnt_st_reader *r, size_t i, const char **key, const char **value);
const char *nnt_st_metadata_get(const nnt_st_reader *r, const char *key); /* NULL: absent */

/* Read elements [first, first + count) of entry e (row-major) into dst, converted to `want`;
 * dst holds count * nnt_io_dtype_size(want) bytes. Conversions: any type to itself (raw);
 * F32 <- F16, BF16, F64 (rounded); I32 <- I64 (range checked: NNT_E_FORMAT naming the element),
 * I8, U8, I16, U16, U32 (range checked); I64 <- I32, I8, U8, I16, U16, U32.
 * Others: NNT_E_UNSUPPORTED. */
int nnt_st_read(const nnt_st_reader *r, const nnt_st_entry *e, nnt_io_dtype want,
                uint64_t first, uint64_t count, void *dst, char *err, size_t errlen);

/* ---- safetensors writer -------------------------------------------------------------------- */
typedef struct nnt_st_writer nnt_st_writer;

/* Create PATH.tmp-XXXXXX. */
int nnt_st_writer_begin(const char *path, nnt_st_writer **out, char *err, size_t errlen);
/* A "__metadata__" pair (key unique, 1..NNT_IO_MAXNAME bytes; value any UTF-8 without NUL).
 * Only before the first nnt_st_writer_write. */
int nnt_st_writer_meta(nnt_st_writer *w, const char *key, const char *value, char *err,
                       size_t errlen);
/* Declare the next tensor (file order = call order). name: unique, 1..NNT_IO_MAXNAME bytes of
 * UTF-8, not "__metadata__"; ndim 0..NNT_IO_MAXDIM; shape[i] >= 0. data: its elements in dtype,
 * host byte order (written little-endian), borrowed until nnt_st_writer_finish; or NULL to
 * stream them with nnt_st_writer_write. Only before the first nnt_st_writer_write
 * (NNT_E_STATE after). */
int nnt_st_writer_add(nnt_st_writer *w, const char *name, nnt_io_dtype dtype, int ndim,
                      const int64_t *shape, const void *data, char *err, size_t errlen);
/* Append the bytes of the tensors added with data == NULL, in order, in any chunking (a
 * chunk may span tensors; on a big-endian host it must split only between elements). The
 * first call writes the header: every tensor must be declared. */
int nnt_st_writer_write(nnt_st_writer *w, const void *data, size_t nbytes, char *err,
                        size_t errlen);
/* Write what is left (header, borrowed data), check that every streamed tensor got all its
 * bytes, fsync, rename over PATH. Frees w whatever happens; on failure PATH is unchanged and
 * the temporary file is removed. */
int nnt_st_writer_finish(nnt_st_writer *w, char *err, size_t errlen);
/* Discard: remove the temporary file, free w. Accepts NULL. */
void nnt_st_writer_abort(nnt_st_writer *w);

/* ---- MXFP4 (mxfp4.c) ------------------------------------------------------------------------ */
/* Decode rows x cols MXFP4 values (cols a multiple of 32) into out (row-major fp32): blocks
 * holds rows x cols/32 blocks of 16 bytes, scales rows x cols/32 bytes. Element 2j of a block
 * is the low nibble of its byte j, 2j + 1 the high one; a nibble is an e2m1 code (+0 .5 1 1.5
 * 2 3 4 6, bit 3 the sign) and the value code * 2^(scale - 127) (exact). */
void nnt_mxfp4_decode(const uint8_t *blocks, const uint8_t *scales, int64_t rows, int64_t cols,
                      float *out);

/* ---- llm.c GPT-2 checkpoint (fp32, version 3) ---------------------------------------------- */
#define NNT_LLMC_MAGIC 20240326
#define NNT_LLMC_VERSION_FP32 3
#define NNT_LLMC_VERSION_BF16 5
#define NNT_LLMC_HEADER_BYTES 1024    /* 256 int32 */
#define NNT_LLMC_NPARAMS 16

typedef struct nnt_llmc_config {
    int32_t max_seq_len;           /* maxT: header[2]                                       */
    int32_t vocab_size;            /* V:    header[3]                                       */
    int32_t num_layers;            /* L:    header[4]                                       */
    int32_t num_heads;             /* NH:   header[5]                                       */
    int32_t channels;              /* C:    header[6]                                       */
    int32_t padded_vocab_size;     /* Vp:   header[7]                                       */
} nnt_llmc_config;

typedef struct nnt_llmc_param {
    const char *name;              /* wte, wpe, ln1w, ln1b, qkvw, qkvb, attprojw, attprojb,
                                      ln2w, ln2b, fcw, fcb, fcprojw, fcprojb, lnfw, lnfb      */
    int ndim;                      /* 1..3                                                  */
    int64_t shape[3];              /* e.g. qkvw (L, 3C, C): linear weights are (out, in)    */
    uint64_t numel;
    uint64_t offset;               /* byte offset in the file                               */
} nnt_llmc_param;

/* Validate a configuration (all positive, Vp >= V, C % NH == 0, total size without overflow)
 * and lay the 16 parameters out; *total_params (may be NULL) gets the number of floats. */
int nnt_llmc_layout(const nnt_llmc_config *cfg, nnt_llmc_param params[NNT_LLMC_NPARAMS],
                    uint64_t *total_params, char *err, size_t errlen);

typedef struct nnt_llmc_reader nnt_llmc_reader;

/* Read the header and check it: magic, version 3 (5 = bf16: NNT_E_UNSUPPORTED; others
 * NNT_E_FORMAT), the configuration, and file size == 1024 + 4 * total parameters exactly. */
int nnt_llmc_open(const char *path, nnt_llmc_reader **out, char *err, size_t errlen);
void nnt_llmc_close(nnt_llmc_reader *r);           /* accepts NULL                          */
const nnt_llmc_config *nnt_llmc_config_of(const nnt_llmc_reader *r);
/* i < NNT_LLMC_NPARAMS; NULL when out of range / name unknown. */
const nnt_llmc_param *nnt_llmc_param_at(const nnt_llmc_reader *r, int i);
const nnt_llmc_param *nnt_llmc_find(const nnt_llmc_reader *r, const char *name);
/* Elements [first, first + count) of parameter i (row-major) into dst. */
int nnt_llmc_read(const nnt_llmc_reader *r, int i, uint64_t first, uint64_t count, float *dst,
                  char *err, size_t errlen);

/* Streaming writer: begin writes the header (after nnt_llmc_layout's checks), write appends
 * floats of the parameters in order in any chunking, finish checks the count, fsyncs and
 * renames (and frees w whatever happens); abort discards. */
typedef struct nnt_llmc_writer nnt_llmc_writer;
int nnt_llmc_writer_begin(const char *path, const nnt_llmc_config *cfg, nnt_llmc_writer **out,
                          char *err, size_t errlen);
int nnt_llmc_writer_write(nnt_llmc_writer *w, const float *data, size_t count, char *err,
                          size_t errlen);
int nnt_llmc_writer_finish(nnt_llmc_writer *w, char *err, size_t errlen);
void nnt_llmc_writer_abort(nnt_llmc_writer *w);    /* accepts NULL                          */
/* All at once: params[i] holds parameter i (nnt_llmc_layout order). */
int nnt_llmc_write(const char *path, const nnt_llmc_config *cfg,
                   const float *const params[NNT_LLMC_NPARAMS], char *err, size_t errlen);

/* ---- token data ------------------------------------------------------------------------------ */
#define NNT_TOK_MAGIC 20240520
#define NNT_TOK_VERSION 1
#define NNT_TOK_HEADER_BYTES 1024     /* 256 int32 */
/* 32-bit tokens (vocabularies above 65535): llm.c's Llama 3 shard header (tokens.c says why) */
#define NNT_TOK_MAGIC32 20240801
#define NNT_TOK_VERSION32 7
/* nnt's extension (tokens.c): version + 1, header[3] flags, header[4] block */
#define NNT_TOK_FLAG_MASK 1u          /* a loss-mask section follows the tokens             */
#define NNT_TOK_FLAG_STARTS 2u        /* an example-start section follows (the mask's)      */
#define NNT_TOK_FLAG_VALUES 4u        /* a row-values section follows the others: header[5]
                                         float32 values a row (classifiers on values)    */

typedef enum {
    NNT_TOK_AUTO = 0,   /* llm.c magic in the first 4 bytes: LLMC; else name ends in ".bin":
                           NANOGPT; else TEXT                                               */
    NNT_TOK_LLMC = 1,   /* header 256 int32 (magic, version 1, count), then count uint16     */
    NNT_TOK_NANOGPT = 2,/* uint16 stream, no header (nanoGPT train.bin / val.bin)            */
    NNT_TOK_TEXT = 3,   /* any bytes; byte-level tokenizer: token = byte value (vocab 256)   */
    NNT_TOK_LLMC32 = 4  /* header 256 int32 (magic 20240801, version 7, count), then count
                           uint32 (ids 0..2^31 - 1). Opening as LLMC or LLMC32 reads either
                           kind, as the magic says; AUTO finds both by the magic             */
} nnt_tok_format;

typedef struct nnt_tok_reader nnt_tok_reader;

/* Open and check the file (LLMC: magic, version, count >= 0, size == 1024 + 2 * count, or
 * 4 * count for LLMC32;
 * NANOGPT: even size). vocab > 0: nnt_tok_read rejects ids >= vocab (NNT_E_FORMAT naming the
 * position); vocab == 0: no check. The file is not loaded: windows are read with pread. */
int nnt_tok_open(const char *path, nnt_tok_format format, int32_t vocab, nnt_tok_reader **out,
                 char *err, size_t errlen);
void nnt_tok_close(nnt_tok_reader *r);             /* accepts NULL                          */
uint64_t nnt_tok_count(const nnt_tok_reader *r);
nnt_tok_format nnt_tok_format_of(const nnt_tok_reader *r); /* the resolved format          */
/* Tokens [start, start + count) into out (NNT_E_INVAL when the window leaves the file;
 * wrapping around is the caller's business). */
int nnt_tok_read(const nnt_tok_reader *r, uint64_t start, size_t count, int32_t *out,
                 char *err, size_t errlen);
/* The extension: 1 when the file has a loss mask; its rows (0: none); out[i] = 1 when token
 * start + i counts as a target, else 0 (a file without a mask: all 1). */
int nnt_tok_has_mask(const nnt_tok_reader *r);
uint64_t nnt_tok_block(const nnt_tok_reader *r);
int nnt_tok_read_mask(const nnt_tok_reader *r, uint64_t start, size_t count, uint8_t *out,
                      char *err, size_t errlen);
/* 1 when the file records where examples start (flag bit 1: packed rows); out[i] = 1 when
 * token start + i is an example's first token, else 0 (a file without the section: all 0). */
int nnt_tok_has_starts(const nnt_tok_reader *r);
int nnt_tok_read_starts(const nnt_tok_reader *r, uint64_t start, size_t count, uint8_t *out,
                        char *err, size_t errlen);
/* The values each row of the file carries (flag bit 2: rows of a classifier trained on
 * values; 0: none); out gets rows [row, row + nrows) of them, row by row (NNT_E_INVAL when
 * they leave the file, NNT_E_FORMAT naming a value that is not finite). */
int64_t nnt_tok_row_values(const nnt_tok_reader *r);
int nnt_tok_read_values(const nnt_tok_reader *r, uint64_t row, size_t nrows, float *out,
                        char *err, size_t errlen);
/* Write n tokens in format (not AUTO) through temp + fsync + rename: LLMC and NANOGPT need
 * ids in 0..65535 (LLMC: n <= INT32_MAX), LLMC32 ids >= 0, TEXT ids in 0..255. */
int nnt_tok_write(const char *path, nnt_tok_format format, const int32_t *tokens, size_t n,
                  char *err, size_t errlen);
/* The same streamed: tokens written as they come, through temp + fsync + rename; the llm.c
 * header gets its count at finish. vocab > 0: ids must also be below vocab (which must fit
 * the format). A refused write (an id out of range, LLMC's 2^31 - 1 tokens exceeded: NNT_E_INVAL
 * naming the token and its position in the file) writes nothing of its call and the writer
 * stays usable; after an I/O error only finish (which then fails) and abort remain. finish
 * and abort free w; abort and a failed finish remove the temporary file. */
typedef struct nnt_tok_writer nnt_tok_writer;
int nnt_tok_writer_begin(const char *path, nnt_tok_format format, int64_t vocab,
                         nnt_tok_writer **out, char *err, size_t errlen);
int nnt_tok_writer_write(nnt_tok_writer *w, const int32_t *tokens, size_t n, char *err,
                         size_t errlen);
uint64_t nnt_tok_writer_count(const nnt_tok_writer *w);   /* tokens written so far      */
/* Before the first token (LLMC, LLMC32): nnt's extended header, with a loss mask (masked) and
 * rows of block tokens (0: none; finish then refuses a count that is not whole rows). The
 * mask is held in memory (n / 8 bytes) and written after the tokens at finish. */
int nnt_tok_writer_extend(nnt_tok_writer *w, int masked, uint64_t block, char *err,
                          size_t errlen);
/* Before the first token, after extend: the file records where examples start (held in
 * memory like the mask, written after it at finish). */
int nnt_tok_writer_record_starts(nnt_tok_writer *w, char *err, size_t errlen);
/* Before the first token, after extend with rows: every row carries k values (held in
 * memory, written after the other sections at finish, which refuses a row without them). */
int nnt_tok_writer_record_values(nnt_tok_writer *w, int64_t k, char *err, size_t errlen);
/* The values (k finite floats) of row `row` (given once for each row; NNT_E_INVAL else). */
int nnt_tok_writer_row_values(nnt_tok_writer *w, uint64_t row, const float *values, char *err,
                              size_t errlen);
/* The next token written starts an example (a writer that records starts). */
int nnt_tok_writer_mark_start(nnt_tok_writer *w, char *err, size_t errlen);
/* As nnt_tok_writer_write; counts[i] != 0: token i counts as a target (NULL: all do; a
 * writer without a mask takes only NULL). A row's first token never counts. */
int nnt_tok_writer_write_masked(nnt_tok_writer *w, const int32_t *tokens, const uint8_t *counts,
                                size_t n, char *err, size_t errlen);
int nnt_tok_writer_finish(nnt_tok_writer *w, char *err, size_t errlen);
void nnt_tok_writer_abort(nnt_tok_writer *w);             /* accepts NULL               */
/* The 1024-byte llm.c header for n tokens: 16-bit (wide == 0) or 32-bit (wide != 0). */
void nnt_tok_header(unsigned char h[NNT_TOK_HEADER_BYTES], int wide, size_t n);

/* ---- text: byte-level tokenizer and UTF-8 ------------------------------------------------- */
#define NNT_TEXT_VOCAB 256
/* out[i] = (unsigned char)s[i]. */
void nnt_text_encode(const char *s, size_t n, int32_t *out);
/* out[i] = tokens[i] as a byte (out gets no NUL); NNT_E_INVAL naming the first id > 255. */
int nnt_text_decode(const int32_t *tokens, size_t n, char *out, char *err, size_t errlen);
/* Decode one UTF-8 sequence of s[0..n): its length (1..4) with *cp set, or 0 when invalid
 * (truncated, overlong, surrogate, > U+10FFFF, stray continuation byte). */
int nnt_utf8_decode(const unsigned char *s, size_t n, uint32_t *cp);
/* 1 when s[0..n) is valid UTF-8; else 0 with *bad (may be NULL) the first bad byte offset. */
int nnt_utf8_valid(const char *s, size_t n, size_t *bad);

/* ---- bounded JSON pull reader (json.c) ------------------------------------------------------ */
/* Reads a text of len bytes held by the caller; positions in messages are `base` + offset, so
 * a safetensors header reports file offsets. Messages start with `what` (e.g. the file). */
typedef struct nnt_json {
    const char *buf;
    size_t len, pos, base;
    const char *what;
    char *err;
    size_t errlen;
} nnt_json;

void nnt_json_init(nnt_json *j, const char *buf, size_t len, size_t base, const char *what,
                   char *err, size_t errlen);
/* Skip whitespace; the next byte (0..255) or -1 at the end. Does not consume it. */
int nnt_json_peek(nnt_json *j);
/* Skip whitespace and consume byte c; NNT_E_FORMAT "expected 'c' <context>" otherwise. */
int nnt_json_expect(nnt_json *j, char c, const char *context);
/* A string: escapes (\" \\ \/ \b \f \n \r \t \uXXXX with surrogate pairs) decoded, raw bytes
 * UTF-8 checked, control characters rejected. *out (malloc'd, NUL-terminated, caller frees)
 * and *outlen (may be NULL) get the decoded bytes; more than maxlen decoded bytes or an
 * embedded NUL (\u0000) when nul_ok == 0 are NNT_E_FORMAT. */
int nnt_json_string(nnt_json *j, char **out, size_t *outlen, size_t maxlen, int nul_ok,
                    const char *context);
/* A non-negative integer without fraction or exponent that fits in uint64_t. */
int nnt_json_u64(nnt_json *j, uint64_t *out, const char *context);
/* Skip one value of any type, validating it; nesting deeper than maxdepth (<=
 * NNT_JSON_MAXDEPTH) is NNT_E_FORMAT. Iterative: no recursion. */
int nnt_json_skip(nnt_json *j, int maxdepth, const char *context);
/* Only whitespace is left. */
int nnt_json_end(nnt_json *j);
/* NNT_E_FORMAT with "<what>: <message> at byte <base + pos>". */
int nnt_json_fail(nnt_json *j, const char *fmt, ...) NNT_IO_PRINTF(2, 3);

/* ---- helpers shared by the io sources (defined in file.c) -------------------------------- */
/* Format a message into err and return code. */
int nnt_io_errf(char *err, size_t errlen, int code, const char *fmt, ...) NNT_IO_PRINTF(4, 5);
/* Open a regular file read-only; *size gets its size. */
int nnt_io_open_read(const char *path, int *fd, uint64_t *size, char *err, size_t errlen);
/* Read exactly n bytes at off; a short read is NNT_E_IO ("file shrank"). */
int nnt_io_pread(int fd, void *buf, size_t n, uint64_t off, const char *path, char *err,
                 size_t errlen);
/* mkdir -p path (0777 less the umask): 0 when path is then a directory, else -1 with errno
 * set (ENOTDIR: something else is there). */
int nnt_io_make_dirs(const char *path);

typedef struct nnt_io_out nnt_io_out;  /* a file being written through temp + rename */
/* Whether this process writes files (1, the default). 0 on the ranks > 0 of an MPI job
 * (nnt_ctx_create): they take part in every collective read of a save, and nnt_io_out_*
 * then discard the bytes (no file, no temporary), and the savers create and remove
 * nothing, so that rank 0 alone writes each file. */
void nnt_io_set_writer(int writes);
int nnt_io_writes(void);
/* A hook for what a writer tells the user without failing (NULL: nothing; the library sets
 * its log's warning): the stale temporary files nnt_io_out_begin removed. */
void nnt_io_set_note(void (*note)(const char *msg));
/* Start a file at path: a temporary file beside it ("<path>.tmp-XXXXXX", held under an
 * exclusive lock while it is written), after removing the temporary files of earlier saves
 * into path that no live save holds. */
int nnt_io_out_begin(const char *path, nnt_io_out **out, char *err, size_t errlen);
/* The file will be total bytes: its space is allocated now, so that a full file system is a
 * clear error (naming the bytes needed and free) before anything is written. */
int nnt_io_out_reserve(nnt_io_out *o, uint64_t total, char *err, size_t errlen);
int nnt_io_out_write(nnt_io_out *o, const void *buf, size_t n, char *err, size_t errlen);
/* Write n elements of elsize bytes (1, 2, 4, 8) held in host order, as little-endian. */
int nnt_io_out_write_le(nnt_io_out *o, const void *buf, size_t n, size_t elsize, char *err,
                        size_t errlen);
uint64_t nnt_io_out_size(const nnt_io_out *o);     /* bytes written so far                  */
/* Overwrite n bytes at off, within the bytes written so far (a header whose contents are
 * known at the end); nothing on a rank that does not write. */
int nnt_io_out_pwrite(nnt_io_out *o, const void *buf, size_t n, uint64_t off, char *err,
                      size_t errlen);
const char *nnt_io_out_path(const nnt_io_out *o);  /* the final path, for messages           */
/* Flush, fsync, close, rename over the path, fsync the directory; frees o. On failure the
 * temporary file is removed. */
int nnt_io_out_commit(nnt_io_out *o, char *err, size_t errlen);
void nnt_io_out_abort(nnt_io_out *o);              /* remove the temporary file; NULL ok    */

/* Little-endian loads and stores. */
static inline uint16_t nnt_io_le16(const unsigned char *p)
{
    return (uint16_t)(p[0] | (p[1] << 8));
}
static inline uint32_t nnt_io_le32(const unsigned char *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
static inline uint64_t nnt_io_le64(const unsigned char *p)
{
    return (uint64_t)nnt_io_le32(p) | (uint64_t)nnt_io_le32(p + 4) << 32;
}
static inline void nnt_io_put_le32(unsigned char *p, uint32_t v)
{
    p[0] = (unsigned char)v;
    p[1] = (unsigned char)(v >> 8);
    p[2] = (unsigned char)(v >> 16);
    p[3] = (unsigned char)(v >> 24);
}
static inline void nnt_io_put_le64(unsigned char *p, uint64_t v)
{
    nnt_io_put_le32(p, (uint32_t)v);
    nnt_io_put_le32(p + 4, (uint32_t)(v >> 32));
}
static inline int nnt_io_host_le(void)
{
    const uint16_t one = 1;
    return *(const unsigned char *)&one == 1;
}
/* Reverse the bytes of n elements of elsize bytes in place (big-endian hosts). */
static inline void nnt_io_bswap(void *buf, size_t n, size_t elsize)
{
    unsigned char *p = (unsigned char *)buf;
    for (size_t i = 0; i < n; i++, p += elsize)
        for (size_t a = 0, b = elsize - 1; a < b; a++, b--) {
            unsigned char t = p[a];
            p[a] = p[b];
            p[b] = t;
        }
}

/* ---- GPT-2 byte-level BPE tokenizer (bpe.c) ------------------------------------------------ */
/* Hugging Face / OpenAI GPT-2 tokenizer files, read locally (never downloaded):
 *   vocab.json  one JSON object {"token": id, ...}: tokens are strings in GPT-2's byte-level
 *               alphabet (every byte mapped to a printable character by bytes_to_unicode;
 *               \uXXXX escapes and raw UTF-8 both accepted), ids non-negative integers below
 *               NNT_BPE_MAXVOCAB, unique (gaps allowed); no duplicate or empty tokens; the 256
 *               single-byte tokens must all be present.
 *   merges.txt  lines "a b" (exactly one space; "\r\n" accepted), rank = order of the line;
 *               lines starting with "#version" are skipped; a, b and "ab" must be tokens of
 *               vocab.json. A final newline is optional; other empty lines are errors. A pair
 *               listed twice keeps its later rank (as the tokenizers library does).
 * Anything else is NNT_E_FORMAT naming the file and the byte offset (vocab.json) or the line
 * (merges.txt); files larger than NNT_BPE_MAXFILE are NNT_E_FORMAT.
 *
 * Encoding is that of transformers' GPT2Tokenizer (tokenizers' ByteLevel pre-tokenizer with
 * add_prefix_space=False and GPT-2's regex, then BPE: the lowest-ranked adjacent pair first,
 * leftmost among equals, until no listed pair is left): the text is split at each literal
 * "<|endoftext|>" (when that token is in vocab.json, and unless NNT_BPE_NO_SPECIAL), which
 * becomes its id, and every piece is pre-tokenized with
 *   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
 * (hand-written matcher; \p{L} and \p{N} from tables measured on the tokenizers library, \s =
 * U+0009..000D, 0020, 0085, 00A0, 1680, 2000..200A, 2028, 2029, 202F, 205F, 3000). Bytes that
 * are not valid UTF-8 (which Hugging Face cannot receive) each count as one character of the
 * [^\s\p{L}\p{N}] class. Every byte sequence is encodable, and decode(encode(t)) == t.
 *
 * The tokenizer is immutable after loading: concurrent encode/decode calls are safe. */
#define NNT_BPE_MAXFILE (64u << 20)   /* largest vocab.json / merges.txt, bytes              */
#define NNT_BPE_MAXVOCAB (1 << 22)    /* ids are 0 .. NNT_BPE_MAXVOCAB - 1                   */
#define NNT_BPE_MAXTOKEN 4096         /* longest token of vocab.json / merges.txt, bytes     */
#define NNT_BPE_EOT "<|endoftext|>"   /* the special token                                   */
#define NNT_BPE_NO_SPECIAL 1u         /* encode flag: "<|endoftext|>" in text is plain text  */

typedef struct nnt_bpe nnt_bpe;

/* dir/vocab.json and dir/merges.txt. */
int nnt_bpe_load(const char *dir, nnt_bpe **out, char *err, size_t errlen);
int nnt_bpe_load_files(const char *vocab_path, const char *merges_path, nnt_bpe **out,
                       char *err, size_t errlen);
/* The same from memory (the buffers are not kept); messages name "vocab.json"/"merges.txt". */
int nnt_bpe_load_mem(const char *vocab, size_t vocab_len, const char *merges, size_t merges_len,
                     nnt_bpe **out, char *err, size_t errlen);
void nnt_bpe_free(nnt_bpe *bpe);                   /* accepts NULL                          */
/* Largest id + 1 (the embedding rows a model needs); 0 for NULL. */
int32_t nnt_bpe_vocab_size(const nnt_bpe *bpe);
size_t nnt_bpe_merge_count(const nnt_bpe *bpe);    /* distinct merge pairs                  */
int32_t nnt_bpe_eot(const nnt_bpe *bpe);           /* id of "<|endoftext|>", or -1          */
/* Id of a token spelled as in vocab.json (len bytes), or -1. */
int32_t nnt_bpe_token_id(const nnt_bpe *bpe, const char *token, size_t len);

/* Encode len bytes of text (any bytes; NUL is an ordinary byte) into ids. Never more ids than
 * bytes, so cap >= len always suffices. *n gets the number of ids; when it exceeds cap the
 * call still counts them all, stores the first cap, and returns NNT_E_INVAL (out may be NULL
 * with cap 0 to size a buffer). NNT_E_NOMEM when the work arrays (about 20 bytes per byte of
 * the longest pre-token) cannot be allocated. */
int nnt_bpe_encode(const nnt_bpe *bpe, const char *text, size_t len, int32_t *out, size_t cap,
                   size_t *n, char *err, size_t errlen);
/* The same with flags (0 or NNT_BPE_NO_SPECIAL). */
int nnt_bpe_encode_ex(const nnt_bpe *bpe, const char *text, size_t len, unsigned flags,
                      int32_t *out, size_t cap, size_t *n, char *err, size_t errlen);
/* Decode n ids into bytes (no NUL appended): each token's characters mapped back through
 * bytes_to_unicode (a token with a character outside that alphabet gives its UTF-8 bytes as
 * written). *len gets the byte count; when it exceeds cap nothing is written and the call
 * returns NNT_E_INVAL (out may be NULL with cap 0). An id outside the vocabulary is
 * NNT_E_INVAL naming its position. The bytes are not UTF-8 checked (Hugging Face replaces
 * invalid sequences with U+FFFD). */
int nnt_bpe_decode(const nnt_bpe *bpe, const int32_t *ids, size_t n, char *out, size_t cap,
                   size_t *len, char *err, size_t errlen);

/* ---- checksums and strict numbers of checkpoint metadata (meta.c) ------------------------
 * Training-state files (lib/optim/state.c) keep decimal numbers and
 * 64-bit FNV-1a checksums as safetensors metadata strings. */
#define NNT_FNV_OFFSET 0xcbf29ce484222325ULL
/* h = (h ^ byte) * 0x100000001b3 over n bytes / over the 32 bits of each of n floats. */
uint64_t nnt_fnv1a_bytes(uint64_t h, const char *s, size_t n);
uint64_t nnt_fnv1a_floats(uint64_t h, const float *x, size_t n);
/* The same over the 8 bytes of w in little-endian order. */
uint64_t nnt_fnv1a_u64(uint64_t h, uint64_t w);
/* A checksum of n bytes at memory speed, where FNV-1a's one multiply a byte in one chain
 * runs at about 1 GB/s: the bytes as little-endian 64-bit words in four lanes, word i to
 * lane i % 4, each lane h = (h ^ w) * 0x100000001b3, h ^= h >> 32 (so that the words' high
 * bits reach the low ones), from the FNV offset basis; the last n % 32 bytes go through
 * FNV-1a after the lanes, then n, each as 8 little-endian bytes (FNV-1a). The same value on
 * every host. */
uint64_t nnt_hash_words(const void *data, size_t n);
/* Strict decimal: digits only, no leading zero (but "0"), fits in uint64_t; *end gets the
 * byte after the digits. 0, or -1 when malformed. */
int nnt_meta_parse_u64(const char *s, uint64_t *out, const char **end);
/* The whole string is one such number. */
int nnt_meta_parse_u64_all(const char *s, uint64_t *out);
/* "[a,b,c,d]" of such numbers, nothing after. */
int nnt_meta_parse_rng(const char *s, uint64_t rng[4]);
/* Exactly 16 lowercase hex digits. */
int nnt_meta_parse_hex64(const char *s, uint64_t *out);

#endif
