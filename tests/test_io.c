/* SPDX-License-Identifier: MIT */
/* File formats (lib/io): safetensors, llm.c checkpoints, token data, text, JSON, UTF-8.
 * Round trips with exact bytes, files made by the reference safetensors library, and for every
 * reader a battery of corrupt inputs that must fail with the documented code and a message.
 * Linked against the io objects alone (libnntio.la): no StarPU, no context. */
#include "testutil.h"

#include "../lib/io/io.h"

#include <dirent.h>
#include <math.h>
#include <signal.h>
#include <stdint.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---- helpers ------------------------------------------------------------------------------- */

static char dir[256];
static char err[NNT_IO_ERRLEN];

static void setup(void)
{
    const char *t = getenv("TMPDIR");
    snprintf(dir, sizeof dir, "%s/nnt-test-io-XXXXXX", t && *t ? t : "/tmp");
    ck_assert_ptr_nonnull(mkdtemp(dir));
}

static void teardown(void)
{
    DIR *d = opendir(dir);
    if (d) {
        struct dirent *e;
        char p[600];
        while ((e = readdir(d)) != NULL) {
            if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
                continue;
            snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
            unlink(p);
        }
        closedir(d);
    }
    rmdir(dir);
}

static const char *path_of(const char *name)
{
    static char p[4][600];
    static int k;
    k = (k + 1) % 4;
    snprintf(p[k], sizeof p[k], "%s/%s", dir, name);
    return p[k];
}

/* Files in the test directory whose name contains s. */
static int count_files(const char *s)
{
    DIR *d = opendir(dir);
    ck_assert_ptr_nonnull(d);
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL)
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..") && strstr(e->d_name, s))
            n++;
    closedir(d);
    return n;
}
#define NO_TEMP_FILES() ck_assert_int_eq(count_files(".tmp-"), 0)

static void write_bytes(const char *path, const void *buf, size_t n)
{
    unlink(path); /* a new file: rewriting a truncated one makes ext4 flush it on close */
    FILE *f = fopen(path, "wb");
    ck_assert_ptr_nonnull(f);
    ck_assert_uint_eq(fwrite(buf, 1, n, f), n);
    ck_assert_int_eq(fclose(f), 0);
}

static unsigned char *read_bytes(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    ck_assert_ptr_nonnull(f);
    fseek(f, 0, SEEK_END);
    long len = ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *b = malloc((size_t)len + 1);
    ck_assert_uint_eq(fread(b, 1, (size_t)len, f), (size_t)len);
    fclose(f);
    *n = (size_t)len;
    return b;
}

#define IO_OK(call)                                                                        \
    do {                                                                                   \
        err[0] = 0;                                                                        \
        int rc_ = (call);                                                                  \
        ck_assert_msg(rc_ == 0, "%s returned %d: %s", #call, rc_, err);                    \
    } while (0)

/* The call fails with code and a message that contains sub (when not NULL). */
#define IO_FAIL(call, code, sub)                                                           \
    do {                                                                                   \
        err[0] = 0;                                                                        \
        int rc_ = (call);                                                                  \
        ck_assert_msg(rc_ == (code), "%s returned %d (%s), expected %d", #call, rc_, err,  \
                      (code));                                                             \
        ck_assert_msg(err[0] != 0, "%s: no message", #call);                               \
        const char *sub_ = (sub);                                                          \
        ck_assert_msg(!sub_ || strstr(err, sub_), "%s: message '%s' lacks '%s'", #call,    \
                      err, sub_ ? sub_ : "");                                              \
    } while (0)

/* A safetensors file: length, header text, datalen data bytes (i & 0xff). */
static unsigned char *st_build(const char *json, size_t jlen, size_t datalen, size_t *n)
{
    *n = 8 + jlen + datalen;
    unsigned char *b = malloc(*n ? *n : 1);
    nnt_io_put_le64(b, jlen);
    memcpy(b + 8, json, jlen);
    for (size_t i = 0; i < datalen; i++)
        b[8 + jlen + i] = (unsigned char)i;
    return b;
}

/* ---- safetensors: round trips ---------------------------------------------------------------- */

struct tensor_case {
    const char *name;
    nnt_io_dtype dtype;
    int ndim;
    int64_t shape[NNT_IO_MAXDIM];
};

static const struct tensor_case tcases[] = {
    {"wte", NNT_IO_F32, 2, {3, 5}},
    {"h.0.attn.bias", NNT_IO_F16, 1, {7}},
    {"bf", NNT_IO_BF16, 3, {2, 1, 3}},
    {"ids32", NNT_IO_I32, 1, {4}},
    {"ids64", NNT_IO_I64, 2, {2, 2}},
    {"scalar", NNT_IO_F32, 0, {0}},
    {"empty", NNT_IO_F32, 1, {0}},
    {"empty2d", NNT_IO_I64, 2, {3, 0}},
    {"bytes", NNT_IO_U8, 1, {5}},
    {"flags", NNT_IO_BOOL, 1, {3}},
    {"dbl", NNT_IO_F64, 3, {1, 1, 2}},
    {"eight", NNT_IO_I8, 8, {1, 2, 1, 1, 1, 1, 1, 2}},
    {"u16", NNT_IO_U16, 1, {3}},
    {"quote\"back\\slash\ttab\x01", NNT_IO_U32, 1, {1}},
    {"caf\xc3\xa9 \xf0\x9f\x98\x80", NNT_IO_I16, 1, {2}},
};
#define NTC ((int)(sizeof tcases / sizeof *tcases))

static uint64_t tc_numel(const struct tensor_case *c)
{
    uint64_t n = 1;
    for (int d = 0; d < c->ndim; d++)
        n *= (uint64_t)c->shape[d];
    return n;
}

static unsigned char *tc_data(int i, size_t *nbytes)
{
    *nbytes = tc_numel(&tcases[i]) * nnt_io_dtype_size(tcases[i].dtype);
    unsigned char *b = malloc(*nbytes ? *nbytes : 1);
    for (size_t k = 0; k < *nbytes; k++)
        b[k] = (unsigned char)(k * 7 + (size_t)i * 31 + 1);
    return b;
}

static void check_all_tensors(nnt_st_reader *r)
{
    ck_assert_uint_eq(nnt_st_count(r), NTC);
    for (int i = 0; i < NTC; i++) {
        const struct tensor_case *c = &tcases[i];
        const nnt_st_entry *e = nnt_st_entry_at(r, (size_t)i); /* file order = add order */
        ck_assert_ptr_nonnull(e);
        ck_assert_str_eq(e->name, c->name);
        ck_assert_ptr_eq(nnt_st_find(r, c->name), e);
        ck_assert_int_eq(e->dtype, c->dtype);
        ck_assert_int_eq(e->ndim, c->ndim);
        for (int d = 0; d < c->ndim; d++)
            ck_assert_int_eq(e->shape[d], c->shape[d]);
        ck_assert_uint_eq(e->numel, tc_numel(c));
        size_t nbytes;
        unsigned char *want = tc_data(i, &nbytes);
        ck_assert_uint_eq(e->nbytes, nbytes);
        unsigned char *got = malloc(nbytes + 1);
        IO_OK(nnt_st_read(r, e, e->dtype, 0, e->numel, got, err, sizeof err));
        ck_assert_int_eq(memcmp(got, want, nbytes), 0);
        if (e->numel > 1) { /* a window */
            size_t es = nnt_io_dtype_size(e->dtype);
            IO_OK(nnt_st_read(r, e, e->dtype, 1, e->numel - 1, got, err, sizeof err));
            ck_assert_int_eq(memcmp(got, want + es, nbytes - es), 0);
        }
        free(got);
        free(want);
    }
    ck_assert_ptr_null(nnt_st_entry_at(r, NTC));
    ck_assert_ptr_null(nnt_st_find(r, "nope"));
    ck_assert_ptr_null(nnt_st_find(r, "wt"));
}

static void write_all_tensors(const char *path, int stream)
{
    nnt_st_writer *w;
    unsigned char *data[NTC];
    size_t nb[NTC];
    IO_OK(nnt_st_writer_begin(path, &w, err, sizeof err));
    IO_OK(nnt_st_writer_meta(w, "format", "pt", err, sizeof err));
    IO_OK(nnt_st_writer_meta(w, "note", "a \"quoted\" caf\xc3\xa9\n", err, sizeof err));
    for (int i = 0; i < NTC; i++) {
        data[i] = tc_data(i, &nb[i]);
        /* stream == 1: every odd tensor is streamed, the others borrowed */
        const void *p = stream && (i % 2) ? NULL : data[i];
        IO_OK(nnt_st_writer_add(w, tcases[i].name, tcases[i].dtype, tcases[i].ndim,
                                tcases[i].shape, p, err, sizeof err));
    }
    if (stream) {
        /* the streamed bytes, concatenated, in chunks of 3 that span tensors */
        size_t total = 0, off = 0;
        for (int i = 1; i < NTC; i += 2)
            total += nb[i];
        unsigned char *all = malloc(total + 1);
        for (int i = 1; i < NTC; i += 2) {
            memcpy(all + off, data[i], nb[i]);
            off += nb[i];
        }
        for (off = 0; off < total; off += 3)
            IO_OK(nnt_st_writer_write(w, all + off, total - off < 3 ? total - off : 3, err,
                                      sizeof err));
        free(all);
    }
    IO_OK(nnt_st_writer_finish(w, err, sizeof err));
    for (int i = 0; i < NTC; i++)
        free(data[i]);
}

START_TEST(st_round_trip)
{
    const char *p = path_of(_i ? "streamed.safetensors" : "model.safetensors");
    write_all_tensors(p, _i);
    NO_TEMP_FILES();
    struct stat st;
    ck_assert_int_eq(stat(p, &st), 0);
    ck_assert_int_eq(st.st_mode & 0777, 0644);

    nnt_st_reader *r;
    IO_OK(nnt_st_open(p, &r, err, sizeof err));
    check_all_tensors(r);
    ck_assert_uint_eq(nnt_st_metadata_count(r), 2);
    const char *k, *v;
    IO_OK(nnt_st_metadata_at(r, 0, &k, &v));
    ck_assert_str_eq(k, "format");
    ck_assert_str_eq(v, "pt");
    ck_assert_str_eq(nnt_st_metadata_get(r, "note"), "a \"quoted\" caf\xc3\xa9\n");
    ck_assert_ptr_null(nnt_st_metadata_get(r, "missing"));
    ck_assert_int_eq(nnt_st_metadata_at(r, 2, &k, &v), NNT_E_INVAL);
    /* data section aligned to 8 bytes, first tensor right after the header */
    uint64_t off0 = nnt_st_entry_at(r, 0)->offset;
    ck_assert_uint_eq(off0 % 8, 0);
    nnt_st_close(r);

    /* the same bytes through the memory reader */
    size_t n;
    unsigned char *b = read_bytes(p, &n);
    IO_OK(nnt_st_open_mem(b, n, &r, err, sizeof err));
    check_all_tensors(r);
    ck_assert_uint_eq(nnt_st_entry_at(r, 0)->offset, off0);
    nnt_st_close(r);
    free(b);
}
END_TEST

/* One small tensor: the exact bytes of the file. */
START_TEST(st_exact_bytes)
{
    const char *p = path_of("one.safetensors");
    const float v[2] = {1.0f, -2.0f};
    const int64_t shape[1] = {2};
    nnt_st_writer *w;
    IO_OK(nnt_st_writer_begin(p, &w, err, sizeof err));
    IO_OK(nnt_st_writer_add(w, "a", NNT_IO_F32, 1, shape, v, err, sizeof err));
    IO_OK(nnt_st_writer_finish(w, err, sizeof err));
    const char *json = "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}";
    size_t jl = strlen(json), pad = (8 - (8 + jl) % 8) % 8, n;
    unsigned char *b = read_bytes(p, &n);
    ck_assert_uint_eq(n, 8 + jl + pad + 8);
    ck_assert_uint_eq(nnt_io_le64(b), jl + pad);
    ck_assert_int_eq(memcmp(b + 8, json, jl), 0);
    for (size_t i = 0; i < pad; i++)
        ck_assert_int_eq(b[8 + jl + i], ' ');
    const unsigned char data[8] = {0, 0, 0x80, 0x3f, 0, 0, 0, 0xc0};
    ck_assert_int_eq(memcmp(b + 8 + jl + pad, data, 8), 0);
    free(b);

    /* no tensors at all */
    p = path_of("none.safetensors");
    IO_OK(nnt_st_writer_begin(p, &w, err, sizeof err));
    IO_OK(nnt_st_writer_finish(w, err, sizeof err));
    b = read_bytes(p, &n);
    ck_assert_uint_eq(n, 16);
    ck_assert_int_eq(memcmp(b + 8, "{}      ", 8), 0);
    free(b);
    nnt_st_reader *r;
    IO_OK(nnt_st_open(p, &r, err, sizeof err));
    ck_assert_uint_eq(nnt_st_count(r), 0);
    ck_assert_uint_eq(nnt_st_metadata_count(r), 0);
    nnt_st_close(r);
    NO_TEMP_FILES();
}
END_TEST

/* A file written by the reference implementation (Python safetensors 0.8.0, numpy save()):
 * its own order, a zero-size tensor sharing an offset, a scalar, space padding. */
static const char ref_header[] =
    "{\"__metadata__\":{\"format\":\"pt\"},\"s\":{\"dtype\":\"I64\",\"shape\":[],\"data_offsets\":"
    "[0,8]},\"a\":{\"dtype\":\"F32\",\"shape\":[2,2],\"data_offsets\":[8,24]},\"e\":{\"dtype\":"
    "\"I32\",\"shape\":[0,3],\"data_offsets\":[24,24]},\"b\":{\"dtype\":\"F16\",\"shape\":[3],"
    "\"data_offsets\":[24,30]}}    ";
static const unsigned char ref_data[30] = {
    0x07, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x80, 0x3f, 0x00, 0x00, 0x00,
    0x40, 0x00, 0x00, 0x40, 0x40, 0x00, 0x00, 0x80, 0x40, 0x00, 0x3c, 0x00, 0xc0, 0x00, 0x38};

START_TEST(st_reference_file)
{
    size_t jl = sizeof ref_header - 1, n = 8 + jl + sizeof ref_data;
    ck_assert_uint_eq(n, 294);
    unsigned char *b = malloc(n);
    nnt_io_put_le64(b, jl);
    memcpy(b + 8, ref_header, jl);
    memcpy(b + 8 + jl, ref_data, sizeof ref_data);
    nnt_st_reader *r;
    IO_OK(nnt_st_open_mem(b, n, &r, err, sizeof err));
    ck_assert_uint_eq(nnt_st_count(r), 4);
    ck_assert_str_eq(nnt_st_entry_at(r, 0)->name, "s");
    ck_assert_str_eq(nnt_st_entry_at(r, 1)->name, "a");
    ck_assert_str_eq(nnt_st_entry_at(r, 2)->name, "e"); /* empty before b at the same offset */
    ck_assert_str_eq(nnt_st_entry_at(r, 3)->name, "b");
    ck_assert_str_eq(nnt_st_metadata_get(r, "format"), "pt");
    int64_t s;
    IO_OK(nnt_st_read(r, nnt_st_find(r, "s"), NNT_IO_I64, 0, 1, &s, err, sizeof err));
    ck_assert_int_eq(s, 7);
    ck_assert_int_eq(nnt_st_find(r, "s")->ndim, 0);
    float a[4], h[3];
    IO_OK(nnt_st_read(r, nnt_st_find(r, "a"), NNT_IO_F32, 0, 4, a, err, sizeof err));
    for (int i = 0; i < 4; i++)
        ck_assert_float_eq(a[i], (float)(i + 1));
    IO_OK(nnt_st_read(r, nnt_st_find(r, "b"), NNT_IO_F32, 0, 3, h, err, sizeof err));
    ck_assert_float_eq(h[0], 1.0f);
    ck_assert_float_eq(h[1], -2.0f);
    ck_assert_float_eq(h[2], 0.5f);
    const nnt_st_entry *e = nnt_st_find(r, "e");
    ck_assert_uint_eq(e->numel, 0);
    ck_assert_uint_eq(e->nbytes, 0);
    IO_OK(nnt_st_read(r, e, NNT_IO_I32, 0, 0, NULL, err, sizeof err));
    nnt_st_close(r);
    free(b);
}
END_TEST

START_TEST(st_conversions)
{
    const uint16_t f16[] = {0x3c00, 0xc000, 0x7bff, 0x0001, 0x8400, 0x7c00, 0xfc00, 0x0000,
                            0x8000, 0x3555};
    const float f16_want[] = {1.0f, -2.0f, 65504.0f, 0x1p-24f, -0x1p-14f, INFINITY, -INFINITY,
                              0.0f, -0.0f, 0.333251953125f};
    const uint16_t bf16[] = {0x3f80, 0xc040, 0x7f80, 0x0001, 0x4049};
    const float bf16_want[] = {1.0f, -3.0f, INFINITY, 0x1p-133f, 3.140625f};
    const double f64[] = {0.1, -1e300, 3.0};
    const int64_t i64[] = {5, -7, INT32_MAX, INT32_MIN, (int64_t)INT32_MAX + 1};
    const int16_t i16[] = {-300, 300};
    const uint32_t u32[] = {7, 0x80000000u};
    const uint16_t nanh = 0x7e00;
    int64_t s10 = 10, s5 = 5, s3 = 3, s2 = 2, s1 = 1;
    const char *p = path_of("conv.safetensors");
    nnt_st_writer *w;
    IO_OK(nnt_st_writer_begin(p, &w, err, sizeof err));
    IO_OK(nnt_st_writer_add(w, "f16", NNT_IO_F16, 1, &s10, f16, err, sizeof err));
    IO_OK(nnt_st_writer_add(w, "bf16", NNT_IO_BF16, 1, &s5, bf16, err, sizeof err));
    IO_OK(nnt_st_writer_add(w, "f64", NNT_IO_F64, 1, &s3, f64, err, sizeof err));
    IO_OK(nnt_st_writer_add(w, "i64", NNT_IO_I64, 1, &s5, i64, err, sizeof err));
    IO_OK(nnt_st_writer_add(w, "i16", NNT_IO_I16, 1, &s2, i16, err, sizeof err));
    IO_OK(nnt_st_writer_add(w, "u32", NNT_IO_U32, 1, &s2, u32, err, sizeof err));
    IO_OK(nnt_st_writer_add(w, "nan", NNT_IO_F16, 1, &s1, &nanh, err, sizeof err));
    IO_OK(nnt_st_writer_finish(w, err, sizeof err));
    nnt_st_reader *r;
    IO_OK(nnt_st_open(p, &r, err, sizeof err));
    float f[10];
    IO_OK(nnt_st_read(r, nnt_st_find(r, "f16"), NNT_IO_F32, 0, 10, f, err, sizeof err));
    for (int i = 0; i < 10; i++) {
        ck_assert_msg(memcmp(&f[i], &f16_want[i], 4) == 0, "f16[%d] = %a, want %a", i,
                      (double)f[i], (double)f16_want[i]);
    }
    IO_OK(nnt_st_read(r, nnt_st_find(r, "nan"), NNT_IO_F32, 0, 1, f, err, sizeof err));
    ck_assert(isnan(f[0]));
    IO_OK(nnt_st_read(r, nnt_st_find(r, "bf16"), NNT_IO_F32, 0, 5, f, err, sizeof err));
    for (int i = 0; i < 5; i++)
        ck_assert_msg(memcmp(&f[i], &bf16_want[i], 4) == 0, "bf16[%d]", i);
    IO_OK(nnt_st_read(r, nnt_st_find(r, "f64"), NNT_IO_F32, 0, 3, f, err, sizeof err));
    ck_assert_float_eq(f[0], 0.1f);
    ck_assert(isinf(f[1]) && f[1] < 0);
    ck_assert_float_eq(f[2], 3.0f);
    int32_t i32[5];
    int64_t i64o[5];
    IO_OK(nnt_st_read(r, nnt_st_find(r, "i64"), NNT_IO_I32, 0, 4, i32, err, sizeof err));
    ck_assert_int_eq(i32[0], 5);
    ck_assert_int_eq(i32[1], -7);
    ck_assert_int_eq(i32[2], INT32_MAX);
    ck_assert_int_eq(i32[3], INT32_MIN);
    IO_FAIL(nnt_st_read(r, nnt_st_find(r, "i64"), NNT_IO_I32, 0, 5, i32, err, sizeof err),
            NNT_E_FORMAT, "element 4: value 2147483648 does not fit in I32");
    IO_OK(nnt_st_read(r, nnt_st_find(r, "i16"), NNT_IO_I32, 0, 2, i32, err, sizeof err));
    ck_assert_int_eq(i32[0], -300);
    ck_assert_int_eq(i32[1], 300);
    IO_OK(nnt_st_read(r, nnt_st_find(r, "i16"), NNT_IO_I64, 0, 2, i64o, err, sizeof err));
    ck_assert_int_eq(i64o[0], -300);
    IO_FAIL(nnt_st_read(r, nnt_st_find(r, "u32"), NNT_IO_I32, 0, 2, i32, err, sizeof err),
            NNT_E_FORMAT, "element 1");
    IO_OK(nnt_st_read(r, nnt_st_find(r, "u32"), NNT_IO_I64, 1, 1, i64o, err, sizeof err));
    ck_assert_int_eq(i64o[0], 0x80000000LL);
    /* what is not implemented, and bad windows */
    IO_FAIL(nnt_st_read(r, nnt_st_find(r, "f16"), NNT_IO_I32, 0, 1, i32, err, sizeof err),
            NNT_E_UNSUPPORTED, "cannot convert F16 to I32");
    IO_FAIL(nnt_st_read(r, nnt_st_find(r, "i64"), NNT_IO_F32, 0, 1, f, err, sizeof err),
            NNT_E_UNSUPPORTED, "'i64'");
    IO_FAIL(nnt_st_read(r, nnt_st_find(r, "f16"), NNT_IO_F32, 5, 6, f, err, sizeof err),
            NNT_E_INVAL, "outside its 10 elements");
    IO_FAIL(nnt_st_read(r, nnt_st_find(r, "f16"), NNT_IO_F32, 11, 0, f, err, sizeof err),
            NNT_E_INVAL, NULL);
    IO_FAIL(nnt_st_read(r, nnt_st_find(r, "f16"), NNT_IO_F32, 1, UINT64_MAX, f, err, sizeof err),
            NNT_E_INVAL, NULL);
    nnt_st_entry fake = *nnt_st_find(r, "f16");
    IO_FAIL(nnt_st_read(r, &fake, NNT_IO_F32, 0, 1, f, err, sizeof err), NNT_E_INVAL,
            "does not belong");
    IO_FAIL(nnt_st_read(r, nnt_st_find(r, "f16"), (nnt_io_dtype)99, 0, 1, f, err, sizeof err),
            NNT_E_INVAL, "bad dtype");
    nnt_st_close(r);
}
END_TEST

START_TEST(st_dtype_names)
{
    for (int t = 0; t < NNT_IO_NDTYPES; t++) {
        const char *n = nnt_io_dtype_name((nnt_io_dtype)t);
        nnt_io_dtype back;
        ck_assert_int_eq(nnt_io_dtype_parse(n, strlen(n), &back), 0);
        ck_assert_int_eq(back, t);
        ck_assert_uint_gt(nnt_io_dtype_size((nnt_io_dtype)t), 0);
    }
    nnt_io_dtype x;
    ck_assert_int_eq(nnt_io_dtype_parse("F3", 2, &x), -1);
    ck_assert_int_eq(nnt_io_dtype_parse("F32 ", 4, &x), -1);
    ck_assert_str_eq(nnt_io_dtype_name((nnt_io_dtype)-1), "?");
    ck_assert_uint_eq(nnt_io_dtype_size(NNT_IO_NDTYPES), 0);
    ck_assert_uint_eq(nnt_io_dtype_size(NNT_IO_BF16), 2);
}
END_TEST

/* Valid headers in unusual but legal spellings. */
static const struct {
    const char *json;
    size_t data;
    size_t count;
} good_headers[] = {
    {"{}", 0, 0},
    {"{}  \n\t\r ", 0, 0},
    {"{ \"__metadata__\" : { } }", 0, 0},
    {"{\n \"a\" : { \"data_offsets\" : [ 0 , 8 ] , \"shape\" : [ 2 ] , \"dtype\" : \"F32\" }\n}\n",
     8, 1},
    {"{\"b\":{\"dtype\":\"U8\",\"shape\":[2],\"data_offsets\":[2,4]},"
     "\"a\":{\"dtype\":\"U8\",\"shape\":[2],\"data_offsets\":[0,2]}}",
     4, 2},
    {"{\"z\":{\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[8,8]},"
     "\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
     "\"y\":{\"dtype\":\"F32\",\"shape\":[5,0],\"data_offsets\":[0,0]}}",
     8, 3},
    {"{\"\\u00e9\\/\\ud83d\\ude00\\\"\\\\\\b\\f\\n\\r\\t\":{\"dtype\":\"BOOL\",\"shape\":[],"
     "\"data_offsets\":[0,1]}}",
     1, 1},
    {"{\"a\":{\"dtype\":\"I8\",\"shape\":[1,1,1,1,1,1,1,1],\"data_offsets\":[0,1]}}", 1, 1},
    {"{\"a\":{\"dtype\":\"F32\",\"shape\":[0,9223372036854775807],\"data_offsets\":[0,0]}}", 0, 1},
    {"{\"__metadata__\":{\"k\":\"\",\"j\":\"\\u0041\"},\"x\":{\"dtype\":\"U64\",\"shape\":[1],"
     "\"data_offsets\":[0,8]}}",
     8, 1},
};
#define NGOOD ((int)(sizeof good_headers / sizeof *good_headers))

START_TEST(st_good_headers)
{
    size_t n, jl = strlen(good_headers[_i].json);
    unsigned char *b = st_build(good_headers[_i].json, jl, good_headers[_i].data, &n);
    nnt_st_reader *r;
    IO_OK(nnt_st_open_mem(b, n, &r, err, sizeof err));
    ck_assert_uint_eq(nnt_st_count(r), good_headers[_i].count);
    for (size_t i = 0; i < nnt_st_count(r); i++) { /* every tensor readable, in file order */
        const nnt_st_entry *e = nnt_st_entry_at(r, i);
        unsigned char out[64];
        IO_OK(nnt_st_read(r, e, e->dtype, 0, e->numel, out, err, sizeof err));
        if (e->nbytes)
            ck_assert_int_eq(out[0], (unsigned char)(e->offset - 8 - jl)); /* st_build's data */
        if (i)
            ck_assert_uint_ge(e->offset, nnt_st_entry_at(r, i - 1)->offset);
    }
    nnt_st_close(r);
    free(b);
}
END_TEST

#define F32E(b, e) "{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[" #b "," #e "]}"
static const struct {
    const char *json;
    size_t data;
    int code;
    const char *msg;
} bad_headers[] = {
    /* framing */
    {"", 0, NNT_E_FORMAT, "does not start with '{'"},
    {" {}", 0, NNT_E_FORMAT, "does not start with '{'"},
    {"[]", 0, NNT_E_FORMAT, "does not start with '{'"},
    {"{", 0, NNT_E_FORMAT, "expected a string (a tensor name), found the end"},
    {"{} x", 0, NNT_E_FORMAT, "trailing data after the JSON value: 'x' at byte 11"},
    {"{}{}", 0, NNT_E_FORMAT, "trailing data"},
    {"{}\0", 0, NNT_E_FORMAT, "trailing data after the JSON value: byte 0x00"},
    {"{\"a\" " F32E(0, 8) "}", 8, NNT_E_FORMAT, "expected ':' after name 'a'"},
    {"{\"a\":" F32E(0, 8) " \"b\":" F32E(8, 16) "}", 16, NNT_E_FORMAT,
     "expected '}' (or ',') after tensor 'a'"},
    /* strings */
    {"{\"a", 0, NNT_E_FORMAT, "unterminated string (a tensor name) at byte 9"},
    {"{\"a\\", 0, NNT_E_FORMAT, "unterminated string"},
    {"{\"a\\q\":{}}", 0, NNT_E_FORMAT, "bad escape '\\q'"},
    {"{\"a\\u12G4\":{}}", 0, NNT_E_FORMAT, "bad \\u escape"},
    {"{\"a\\u12\"}", 0, NNT_E_FORMAT, "bad \\u escape"},
    {"{\"a\\ud800\":{}}", 0, NNT_E_FORMAT, "unpaired high surrogate"},
    {"{\"a\\ud800\\u0041\":{}}", 0, NNT_E_FORMAT, "unpaired high surrogate"},
    {"{\"a\\udc00\":{}}", 0, NNT_E_FORMAT, "unpaired low surrogate"},
    {"{\"a\\u0000\":{}}", 0, NNT_E_FORMAT, "NUL character"},
    {"{\"a\xff\":{}}", 0, NNT_E_FORMAT, "invalid UTF-8"},
    {"{\"a\xc0\x80\":{}}", 0, NNT_E_FORMAT, "invalid UTF-8"},
    {"{\"a\xed\xa0\x80\":{}}", 0, NNT_E_FORMAT, "invalid UTF-8"},
    {"{\"a\xf4\x90\x80\x80\":{}}", 0, NNT_E_FORMAT, "invalid UTF-8"},
    {"{\"a\xe2\x82\":{}}", 0, NNT_E_FORMAT, "invalid UTF-8"},
    {"{\"a\tb\":{}}", 0, NNT_E_FORMAT, "control character 0x09"},
    {"{\"\":" F32E(0, 8) "}", 8, NNT_E_FORMAT, "empty tensor name"},
    /* nesting and wrong types */
    {"{\"a\":[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[]]]}", 0,
     NNT_E_FORMAT, "expected '{' to open tensor 'a', found '['"},
    {"{\"a\":true}", 0, NNT_E_FORMAT, "expected '{' to open tensor 'a'"},
    {"{\"a\":\"F32\"}", 0, NNT_E_FORMAT, "expected '{' to open tensor 'a'"},
    {"{\"a\":{\"dtype\":32,\"shape\":[2],\"data_offsets\":[0,8]}}", 8, NNT_E_FORMAT,
     "expected a string (the dtype of tensor 'a'), found '3'"},
    {"{\"a\":{\"dtype\":\"F32\",\"shape\":\"2\",\"data_offsets\":[0,8]}}", 8, NNT_E_FORMAT,
     "expected '[' to open the shape of tensor 'a'"},
    {"{\"a\":{\"dtype\":\"F32\",\"shape\":[[2]],\"data_offsets\":[0,8]}}", 8, NNT_E_FORMAT,
     "expected a non-negative integer in shape[0] of tensor 'a', found '['"},
    {"{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":\"0,8\"}}", 8, NNT_E_FORMAT,
     "expected '[' to open the data_offsets"},
    {"{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,4,8]}}", 8, NNT_E_FORMAT,
     "to close the data_offsets of tensor 'a' (two numbers)"},
    {"{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[8]}}", 8, NNT_E_FORMAT,
     "between the two data_offsets"},
    {"{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,null]}}", 8, NNT_E_FORMAT,
     "expected a non-negative integer (data_offsets[1] of tensor 'a'), found 'n'"},
    {"{\"__metadata__\":[]}", 0, NNT_E_FORMAT, "expected '{' to open __metadata__"},
    {"{\"__metadata__\":{\"k\":1}}", 0, NNT_E_FORMAT,
     "expected a string (the value of __metadata__ key 'k'), found '1'"},
    {"{\"__metadata__\":{\"k\":[[[[[[[[[[[[[[[[[[[[[[[]]]]]]]]]]]]]]]]]]]]]]]}}", 0,
     NNT_E_FORMAT, "expected a string (the value of __metadata__ key 'k')"},
    {"{\"__metadata__\":{\"\":\"v\"}}", 0, NNT_E_FORMAT, "empty __metadata__ key"},
    {"{\"__metadata__\":{\"k\":\"a\\u0000b\"}}", 0, NNT_E_FORMAT, "NUL character"},
    {"{\"__metadata__\":{\"k\":\"v\" \"j\":\"w\"}}", 0, NNT_E_FORMAT,
     "expected ',' or '}' after __metadata__ key 'k'"},
    /* trailing commas */
    {"{\"a\":" F32E(0, 8) ",}", 8, NNT_E_FORMAT, "expected a string (a tensor name), found '}'"},
    {"{\"a\":{\"dtype\":\"F32\",\"shape\":[2,],\"data_offsets\":[0,8]}}", 8, NNT_E_FORMAT,
     "expected a non-negative integer in shape[1] of tensor 'a', found ']'"},
    {"{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8],}}", 8, NNT_E_FORMAT,
     "expected a string (a key of tensor 'a'), found '}'"},
    {"{\"__metadata__\":{\"k\":\"v\",}}", 0, NNT_E_FORMAT, "(a __metadata__ key), found '}'"},
    {"{,}", 0, NNT_E_FORMAT, "expected a string (a tensor name), found ','"},
    /* duplicates */
    {"{\"a\":" F32E(0, 8) ",\"a\":" F32E(8, 16) "}", 16, NNT_E_FORMAT,
     "duplicate tensor name 'a' at byte 62"},
    {"{\"a\":{\"dtype\":\"F32\",\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", 8,
     NNT_E_FORMAT, "duplicate key 'dtype' in tensor 'a'"},
    {"{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"shape\":[2],\"data_offsets\":[0,8]}}", 8,
     NNT_E_FORMAT, "duplicate key 'shape'"},
    {"{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8],\"data_offsets\":[0,8]}}", 8,
     NNT_E_FORMAT, "duplicate key 'data_offsets'"},
    {"{\"__metadata__\":{\"k\":\"1\",\"k\":\"2\"}}", 0, NNT_E_FORMAT,
     "duplicate __metadata__ key 'k' at byte 33"},
    {"{\"__metadata__\":{},\"__metadata__\":{}}", 0, NNT_E_FORMAT, "duplicate __metadata__"},
    /* numbers */
    {"{\"a\":{\"dtype\":\"F32\",\"shape\":[-1],\"data_offsets\":[0,8]}}", 8, NNT_E_FORMAT,
     "negative number in shape[0] of tensor 'a'"},
    {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1.5],\"data_offsets\":[0,8]}}", 8, NNT_E_FORMAT,
     "number in shape[0] of tensor 'a' is not an integer"},
    {"{\"a\":{\"dtype\":\"F32\",\"shape\":[2e0],\"data_offsets\":[0,8]}}", 8, NNT_E_FORMAT,
     "is not an integer"},
    {"{\"a\":{\"dtype\":\"F32\",\"shape\":[02],\"data_offsets\":[0,8]}}", 8, NNT_E_FORMAT,
     "leading zero"},
    {"{\"a\":{\"dtype\":\"F32\",\"shape\":[+2],\"data_offsets\":[0,8]}}", 8, NNT_E_FORMAT,
     "expected a non-negative integer in shape[0]"},
    {"{\"a\":{\"dtype\":\"F32\",\"shape\":[18446744073709551616],\"data_offsets\":[0,8]}}", 8,
     NNT_E_FORMAT, "does not fit in 64 bits"},
    {"{\"a\":{\"dtype\":\"F32\",\"shape\":[99999999999999999999999],\"data_offsets\":[0,8]}}", 8,
     NNT_E_FORMAT, "does not fit in 64 bits"},
    {"{\"a\":{\"dtype\":\"F32\",\"shape\":[9223372036854775808],\"data_offsets\":[0,8]}}", 8,
     NNT_E_FORMAT, "shape[0] of tensor 'a' is too large"},
    {"{\"a\":{\"dtype\":\"F32\",\"shape\":[4294967296,4294967296,4],\"data_offsets\":[0,0]}}", 0,
     NNT_E_FORMAT, "more than 2^63 elements"},
    {"{\"a\":{\"dtype\":\"F32\",\"shape\":[0,4294967296,4294967296,4],\"data_offsets\":[0,0]}}", 0,
     NNT_E_FORMAT, "more than 2^63 elements"},
    {"{\"a\":{\"dtype\":\"F64\",\"shape\":[2305843009213693952],\"data_offsets\":[0,0]}}", 0,
     NNT_E_FORMAT, "larger than 2^64 bytes"},
    {"{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[-0,8]}}", 8, NNT_E_FORMAT,
     "negative number (data_offsets[0] of tensor 'a')"},
    {"{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8.0]}}", 8, NNT_E_FORMAT,
     "not an integer"},
    {"{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,18446744073709551615]}}", 8,
     NNT_E_FORMAT, "go past the end of the data section (8 bytes)"},
    /* dtypes, keys */
    {"{\"a\":{\"dtype\":\"F33\",\"shape\":[2],\"data_offsets\":[0,8]}}", 8, NNT_E_FORMAT,
     "unknown dtype 'F33' in tensor 'a' at byte 22"},
    {"{\"a\\tb\\n\":{\"dtype\":\"F33\",\"shape\":[2],\"data_offsets\":[0,8]}}", 8, NNT_E_FORMAT,
     "unknown dtype 'F33' in tensor 'a?b?' at byte"},
    {"{\"a\":{\"dtype\":\"f32\",\"shape\":[2],\"data_offsets\":[0,8]}}", 8, NNT_E_FORMAT,
     "unknown dtype 'f32'"},
    {"{\"a\":{\"dtype\":\"\",\"shape\":[2],\"data_offsets\":[0,8]}}", 8, NNT_E_FORMAT,
     "unknown dtype ''"},
    {"{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8],\"foo\":1}}", 8,
     NNT_E_FORMAT, "unknown key 'foo' in tensor 'a'"},
    {"{\"a\":{\"shape\":[2],\"data_offsets\":[0,8]}}", 8, NNT_E_FORMAT,
     "tensor 'a' has no 'dtype'"},
    {"{\"a\":{\"dtype\":\"F32\",\"data_offsets\":[0,8]}}", 8, NNT_E_FORMAT,
     "tensor 'a' has no 'shape'"},
    {"{\"a\":{\"dtype\":\"F32\",\"shape\":[2]}}", 8, NNT_E_FORMAT,
     "tensor 'a' has no 'data_offsets'"},
    {"{\"a\":{}}", 0, NNT_E_FORMAT, "tensor 'a' has no 'dtype'"},
    {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1,1,1,1,1,1,1,1,2],\"data_offsets\":[0,8]}}", 8,
     NNT_E_UNSUPPORTED, "tensor 'a' has more than 8 dimensions"},
    /* offsets against shapes and the data section */
    {"{\"a\":" F32E(0, 8) "}", 4, NNT_E_FORMAT,
     "tensor 'a': data_offsets [0, 8] go past the end of the data section (4 bytes) at byte 13"},
    {"{\"a\":" F32E(0, 8) "}", 12, NNT_E_FORMAT,
     "data bytes [8, 12) (file offset 70 to the end) belong to no tensor"},
    {"{\"a\":" F32E(4, 12) "}", 12, NNT_E_FORMAT,
     "data bytes [0, 4) (file offset 63) belong to no tensor: the next one, 'a'"},
    {"{\"a\":{\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[8,0]}}", 8, NNT_E_FORMAT,
     "data_offsets [8, 0] end before they begin"},
    {"{\"a\":{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[0,8]}}", 8, NNT_E_FORMAT,
     "tensor 'a': data_offsets [0, 8] hold 8 bytes but shape [3] of F32 needs 12"},
    {"{\"a\":{\"dtype\":\"BF16\",\"shape\":[2,2],\"data_offsets\":[0,4]}}", 4, NNT_E_FORMAT,
     "hold 4 bytes but shape [2, 2] of BF16 needs 8"},
    {"{\"a\":{\"dtype\":\"F32\",\"shape\":[],\"data_offsets\":[0,0]}}", 0, NNT_E_FORMAT,
     "hold 0 bytes but shape [] of F32 needs 4"},
    {"{\"a\":" F32E(0, 8) ",\"b\":" F32E(4, 12) "}", 12, NNT_E_FORMAT,
     "tensor 'b' (data_offsets [4, 12], name at byte 62) overlaps tensor 'a' (data_offsets [0, 8])"},
    {"{\"a\":" F32E(0, 8) ",\"b\":" F32E(0, 8) "}", 8, NNT_E_FORMAT, "overlaps"},
    {"{\"a\":" F32E(0, 8) ",\"b\":" F32E(12, 20) "}", 20, NNT_E_FORMAT,
     "data bytes [8, 12) (file offset 125) belong to no tensor: the next one, 'b'"},
};
#define NBAD ((int)(sizeof bad_headers / sizeof *bad_headers))

START_TEST(st_bad_headers)
{
    const char *json = bad_headers[_i].json;
    size_t jl = strlen(json), n;
    if (strcmp(json, "{}") == 0)
        jl = 3; /* the "{}\0" case */
    unsigned char *b = st_build(json, jl, bad_headers[_i].data, &n);
    nnt_st_reader *r = (nnt_st_reader *)1;
    err[0] = 0;
    int rc = nnt_st_open_mem(b, n, &r, err, sizeof err);
    ck_assert_msg(rc == bad_headers[_i].code, "case %d (%s): rc %d (%s)", _i, json, rc, err);
    ck_assert_msg(strstr(err, bad_headers[_i].msg) != NULL, "case %d: message '%s' lacks '%s'",
                  _i, err, bad_headers[_i].msg);
    ck_assert_msg(strncmp(err, "<memory>: ", 10) == 0, "message '%s'", err);
    ck_assert_ptr_null(r);
    /* the same from a file: same code, the path in the message */
    const char *p = path_of("bad.safetensors");
    write_bytes(p, b, n);
    err[0] = 0;
    rc = nnt_st_open(p, &r, err, sizeof err);
    ck_assert_msg(rc == bad_headers[_i].code, "case %d (file): rc %d (%s)", _i, rc, err);
    ck_assert_msg(strncmp(err, p, strlen(p)) == 0, "message '%s'", err);
    ck_assert_ptr_null(r);
    free(b);
}
END_TEST

START_TEST(st_bad_lengths)
{
    nnt_st_reader *r;
    unsigned char b[64];
    memset(b, ' ', sizeof b);
    memcpy(b + 8, "{}", 2);
    /* shorter than the length field */
    for (size_t n = 0; n < 8; n++)
        IO_FAIL(nnt_st_open_mem(b, n, &r, err, sizeof err), NNT_E_FORMAT,
                "too short for the 8-byte header length");
    const uint64_t lens[] = {UINT64_MAX, (uint64_t)1 << 63, ((uint64_t)100 << 20) + 1, 57, 1000};
    const char *msgs[] = {"exceeds the limit", "exceeds the limit", "exceeds the limit",
                          "goes past the end of the file (64 bytes)",
                          "header length 1000 (bytes 0-7) goes past the end"};
    for (int i = 0; i < 5; i++) {
        nnt_io_put_le64(b, lens[i]);
        IO_FAIL(nnt_st_open_mem(b, sizeof b, &r, err, sizeof err), NNT_E_FORMAT, msgs[i]);
        write_bytes(path_of("len.safetensors"), b, sizeof b);
        IO_FAIL(nnt_st_open(path_of("len.safetensors"), &r, err, sizeof err), NNT_E_FORMAT,
                msgs[i]);
    }
    nnt_io_put_le64(b, 56); /* the header is the whole rest: "{}" + spaces, valid */
    IO_OK(nnt_st_open_mem(b, sizeof b, &r, err, sizeof err));
    nnt_st_close(r);
    nnt_io_put_le64(b, 0);
    IO_FAIL(nnt_st_open_mem(b, sizeof b, &r, err, sizeof err), NNT_E_FORMAT,
            "does not start with '{' at byte 8");
    /* a name longer than the limit */
    char *json = malloc(2000);
    strcpy(json, "{\"");
    memset(json + 2, 'x', NNT_IO_MAXNAME + 1);
    strcpy(json + 3 + NNT_IO_MAXNAME, "\":{}}");
    size_t n;
    unsigned char *f = st_build(json, strlen(json), 0, &n);
    IO_FAIL(nnt_st_open_mem(f, n, &r, err, sizeof err), NNT_E_FORMAT,
            "string (a tensor name) longer than 1024 bytes at byte 9");
    free(f);
    json[2 + NNT_IO_MAXNAME] = 0; /* exactly the limit: fine */
    strcat(json, "\":{\"dtype\":\"U8\",\"shape\":[],\"data_offsets\":[0,1]}}");
    f = st_build(json, strlen(json), 1, &n);
    IO_OK(nnt_st_open_mem(f, n, &r, err, sizeof err));
    ck_assert_uint_eq(strlen(nnt_st_entry_at(r, 0)->name), NNT_IO_MAXNAME);
    nnt_st_close(r);
    free(f);
    free(json);
    /* not there, a directory, NULL arguments */
    IO_FAIL(nnt_st_open(path_of("missing.safetensors"), &r, err, sizeof err), NNT_E_IO,
            "cannot open");
    IO_FAIL(nnt_st_open(dir, &r, err, sizeof err), NNT_E_IO, "not a regular file");
    ck_assert_int_eq(mkfifo(path_of("fifo"), 0600), 0); /* must not block in open */
    IO_FAIL(nnt_st_open(path_of("fifo"), &r, err, sizeof err), NNT_E_IO, "not a regular file");
    IO_FAIL(nnt_st_open(NULL, &r, err, sizeof err), NNT_E_INVAL, NULL);
    IO_FAIL(nnt_st_open_mem(NULL, 5, &r, err, sizeof err), NNT_E_INVAL, NULL);
    /* err may be NULL */
    ck_assert_int_eq(nnt_st_open_mem(b, 3, &r, NULL, 0), NNT_E_FORMAT);
    ck_assert_int_eq(nnt_st_open_mem(b, 3, &r, err, 1), NNT_E_FORMAT);
    ck_assert_int_eq(err[0], 0);
}
END_TEST

/* Every proper prefix of a valid file is rejected with NNT_E_FORMAT (memory and file). */
START_TEST(st_truncated)
{
    const char *p = path_of("full.safetensors");
    write_all_tensors(p, 0);
    size_t n;
    unsigned char *b = read_bytes(p, &n);
    nnt_st_reader *r;
    IO_OK(nnt_st_open_mem(b, n, &r, err, sizeof err));
    nnt_st_close(r);
    const char *q = path_of("prefix.safetensors");
    for (size_t len = 0; len < n; len++) {
        unsigned char *c = malloc(len ? len : 1); /* exact size: ASan/valgrind see overreads */
        memcpy(c, b, len);
        err[0] = 0;
        int rc = nnt_st_open_mem(c, len, &r, err, sizeof err);
        ck_assert_msg(rc == NNT_E_FORMAT && err[0], "prefix %zu: rc %d (%s)", len, rc, err);
        write_bytes(q, c, len);
        rc = nnt_st_open(q, &r, err, sizeof err);
        ck_assert_msg(rc == NNT_E_FORMAT && err[0], "file prefix %zu: rc %d (%s)", len, rc, err);
        free(c);
    }
    /* and one byte more is rejected too */
    unsigned char *c = malloc(n + 1);
    memcpy(c, b, n);
    c[n] = 0;
    IO_FAIL(nnt_st_open_mem(c, n + 1, &r, err, sizeof err), NNT_E_FORMAT, "belong to no tensor");
    free(c);
    free(b);
}
END_TEST

/* Flip every byte of the header of a valid file: never a crash, a clean status or success. */
START_TEST(st_corrupt_bytes)
{
    const char *p = path_of("full.safetensors");
    write_all_tensors(p, 0);
    size_t n;
    unsigned char *b = read_bytes(p, &n);
    size_t hend = 8 + (size_t)nnt_io_le64(b);
    const unsigned char vals[] = {0, '"', '\\', '{', '}', '[', ']', ',', ':', '-', '9', 0xff, 0x80};
    int fails = 0;
    for (size_t i = 0; i < hend; i++)
        for (size_t v = 0; v < sizeof vals; v++) {
            unsigned char old = b[i];
            if (old == vals[v])
                continue;
            b[i] = vals[v];
            nnt_st_reader *r;
            err[0] = 0;
            int rc = nnt_st_open_mem(b, n, &r, err, sizeof err);
            if (rc == 0) {
                for (size_t k = 0; k < nnt_st_count(r); k++) {
                    const nnt_st_entry *e = nnt_st_entry_at(r, k);
                    ck_assert_uint_le(e->offset + e->nbytes, n);
                }
                nnt_st_close(r);
            } else {
                ck_assert_msg(rc == NNT_E_FORMAT || rc == NNT_E_UNSUPPORTED, "rc %d", rc);
                ck_assert(err[0] != 0);
                fails++;
            }
            b[i] = old;
        }
    ck_assert_int_gt(fails, 0);
    free(b);
}
END_TEST

/* ---- safetensors writer: failures leave the old file and no temporary file ---------------- */

static void assert_old_intact(const char *p)
{
    nnt_st_reader *r;
    IO_OK(nnt_st_open(p, &r, err, sizeof err));
    check_all_tensors(r);
    nnt_st_close(r);
    NO_TEMP_FILES();
}

START_TEST(st_writer_failures)
{
    const char *p = path_of("model.safetensors");
    write_all_tensors(p, 0);
    int64_t s2 = 2, neg = -1;
    float v[2] = {1, 2};
    nnt_st_writer *w;

    /* a streamed tensor that never got its bytes */
    IO_OK(nnt_st_writer_begin(p, &w, err, sizeof err));
    ck_assert_int_eq(count_files(".tmp-"), 1);
    IO_OK(nnt_st_writer_add(w, "a", NNT_IO_F32, 1, &s2, NULL, err, sizeof err));
    IO_OK(nnt_st_writer_add(w, "b", NNT_IO_F32, 1, &s2, v, err, sizeof err));
    IO_OK(nnt_st_writer_write(w, v, 4, err, sizeof err));
    IO_FAIL(nnt_st_writer_finish(w, err, sizeof err), NNT_E_INVAL,
            "tensor 'a' got 4 of its 8 bytes");
    assert_old_intact(p);

    /* too many bytes; add after the data started; argument errors keep the writer usable */
    IO_OK(nnt_st_writer_begin(p, &w, err, sizeof err));
    IO_FAIL(nnt_st_writer_add(w, "", NNT_IO_F32, 1, &s2, v, err, sizeof err), NNT_E_INVAL,
            "tensor name of 0 bytes");
    IO_FAIL(nnt_st_writer_add(w, "__metadata__", NNT_IO_F32, 1, &s2, v, err, sizeof err),
            NNT_E_INVAL, "not a tensor name");
    IO_FAIL(nnt_st_writer_add(w, "bad\xff", NNT_IO_F32, 1, &s2, v, err, sizeof err), NNT_E_INVAL,
            "not UTF-8 (byte 3)");
    IO_FAIL(nnt_st_writer_add(w, "x", NNT_IO_F32, 1, &neg, v, err, sizeof err), NNT_E_INVAL,
            "shape[0] = -1");
    IO_FAIL(nnt_st_writer_add(w, "x", NNT_IO_F32, 9, &s2, v, err, sizeof err), NNT_E_INVAL,
            "bad ndim 9");
    IO_FAIL(nnt_st_writer_add(w, "x", NNT_IO_NDTYPES, 1, &s2, v, err, sizeof err), NNT_E_INVAL,
            "bad dtype");
    IO_FAIL(nnt_st_writer_meta(w, "k", "bad\xc3", err, sizeof err), NNT_E_INVAL, "not UTF-8");
    IO_OK(nnt_st_writer_meta(w, "k", "v", err, sizeof err));
    IO_FAIL(nnt_st_writer_meta(w, "k", "w", err, sizeof err), NNT_E_INVAL,
            "duplicate metadata key 'k'");
    IO_OK(nnt_st_writer_add(w, "a", NNT_IO_F32, 1, &s2, NULL, err, sizeof err));
    IO_FAIL(nnt_st_writer_add(w, "a", NNT_IO_F32, 1, &s2, v, err, sizeof err), NNT_E_INVAL,
            "duplicate tensor name 'a'");
    IO_FAIL(nnt_st_writer_write(w, v, 12, err, sizeof err), NNT_E_INVAL,
            "12 bytes written but only 8 more are expected");
    IO_OK(nnt_st_writer_write(w, v, 8, err, sizeof err));
    IO_FAIL(nnt_st_writer_add(w, "c", NNT_IO_F32, 1, &s2, v, err, sizeof err), NNT_E_STATE,
            "after the data was started");
    IO_FAIL(nnt_st_writer_meta(w, "j", "v", err, sizeof err), NNT_E_STATE, NULL);
    nnt_st_writer_abort(w);
    assert_old_intact(p);
    nnt_st_writer_abort(NULL);

    /* a directory that does not exist */
    IO_FAIL(nnt_st_writer_begin(path_of("nodir/x.safetensors"), &w, err, sizeof err), NNT_E_IO,
            "cannot create a temporary file");
    ck_assert_ptr_null(w);
    IO_FAIL(nnt_st_writer_begin("", &w, err, sizeof err), NNT_E_INVAL, NULL);
}
END_TEST

/* A real write error (file size limit: EFBIG) during finish. */
START_TEST(st_writer_io_error)
{
    const char *p = path_of("model.safetensors");
    write_all_tensors(p, 0);
    struct rlimit old, lim;
    ck_assert_int_eq(getrlimit(RLIMIT_FSIZE, &old), 0);
    void (*oldsig)(int) = signal(SIGXFSZ, SIG_IGN);
    lim = old;
    lim.rlim_cur = 100000;
    ck_assert_int_eq(setrlimit(RLIMIT_FSIZE, &lim), 0);
    size_t n = 1 << 20;
    unsigned char *big = calloc(n, 1);
    int64_t shape = (int64_t)n;
    nnt_st_writer *w;
    int rc_begin = nnt_st_writer_begin(p, &w, err, sizeof err), rc = -100;
    if (rc_begin == 0) {
        nnt_st_writer_add(w, "big", NNT_IO_U8, 1, &shape, big, err, sizeof err);
        err[0] = 0;
        rc = nnt_st_writer_finish(w, err, sizeof err);
    }
    /* the same with the llm.c and token writers */
    nnt_llmc_config cfg = {64, 100, 2, 2, 256, 128}; /* > 1M floats */
    nnt_llmc_writer *lw;
    char lerr[NNT_IO_ERRLEN] = "";
    int lrc = nnt_llmc_writer_begin(path_of("ckpt.bin"), &cfg, &lw, lerr, sizeof lerr);
    if (lrc == 0) {
        float *zeros = calloc(n, 4);
        lrc = nnt_llmc_writer_write(lw, zeros, n / 4, lerr, sizeof lerr);
        if (lrc == 0)
            lrc = nnt_llmc_writer_write(lw, zeros, n / 4, lerr, sizeof lerr);
        int lrc2 = nnt_llmc_writer_finish(lw, NULL, 0);
        if (lrc == 0)
            lrc = lrc2;
        free(zeros);
    }
    setrlimit(RLIMIT_FSIZE, &old);
    signal(SIGXFSZ, oldsig);
    ck_assert_int_eq(rc_begin, 0);
    ck_assert_msg(rc == NNT_E_IO, "finish returned %d (%s)", rc, err);
    ck_assert_msg(strstr(err, "write error") != NULL, "message '%s'", err);
    ck_assert_msg(lrc == NNT_E_IO, "llm.c writer returned %d (%s)", lrc, lerr);
    ck_assert_int_eq(access(path_of("ckpt.bin"), F_OK), -1);
    assert_old_intact(p);
    free(big);
}
END_TEST

/* Replacing a file keeps its mode; the streamed rewrite has the same content. */
START_TEST(st_replace_keeps_mode)
{
    const char *p = path_of("m.safetensors");
    write_all_tensors(p, 0);
    ck_assert_int_eq(chmod(p, 0600), 0);
    write_all_tensors(p, 1);
    struct stat st;
    ck_assert_int_eq(stat(p, &st), 0);
    ck_assert_int_eq(st.st_mode & 0777, 0600);
    assert_old_intact(p);
}
END_TEST

/* ---- JSON and UTF-8 ---------------------------------------------------------------------- */

START_TEST(json_skip)
{
    static const char *good[] = {
        "0", "-0", "1.5e-3", "-12.25E+4", "\"s\\u00e9\\n\"", "true", "false", "null", "[]", "{}",
        "[1,[2,[3,{\"a\":[]}]],\"x\"]", " { \"a\" : { \"b\" : [ null , true ] } } ",
        "{\"\":\"\"}",
    };
    static const struct {
        const char *s;
        const char *msg;
    } bad[] = {
        {"", "expected a value"},          {"01", "trailing data"},
        {"1.", "malformed number"},        {"-", "malformed number"},
        {"1e", "malformed number"},        {".5", "expected a value"},
        {"tru", "bad literal"},            {"nul", "bad literal"},
        {"[1,]", "expected a value"},      {"[1 2]", "expected ',' or ']'"},
        {"{\"a\":1,}", "expected a key"},  {"{\"a\" 1}", "expected ':'"},
        {"{1:2}", "expected a key"},       {"[", "expected a value"},
        {"{\"a\":1", "expected ',' or '}'"}, {"\"abc", "unterminated string"},
        {"[\"\\x\"]", "bad escape"},       {"[] []", "trailing data"},
        {"+1", "expected a value"},        {"[1}", "expected ',' or ']'"},
    };
    nnt_json j;
    for (size_t i = 0; i < sizeof good / sizeof *good; i++) {
        nnt_json_init(&j, good[i], strlen(good[i]), 0, "t", err, sizeof err);
        err[0] = 0;
        int rc = nnt_json_skip(&j, NNT_JSON_MAXDEPTH, "(test)");
        ck_assert_msg(rc == 0 && nnt_json_end(&j) == 0, "'%s': %s", good[i], err);
    }
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        nnt_json_init(&j, bad[i].s, strlen(bad[i].s), 0, "t", err, sizeof err);
        err[0] = 0;
        int rc = nnt_json_skip(&j, NNT_JSON_MAXDEPTH, "(test)");
        if (rc == 0)
            rc = nnt_json_end(&j);
        ck_assert_msg(rc == NNT_E_FORMAT, "'%s' accepted", bad[i].s);
        ck_assert_msg(strstr(err, bad[i].msg) != NULL, "'%s': message '%s' lacks '%s'", bad[i].s,
                      err, bad[i].msg);
        ck_assert_msg(strncmp(err, "t: ", 3) == 0, "message '%s'", err);
    }
    /* depth: exactly the limit is fine, one more is not, a million does not recurse */
    size_t big = 1000000;
    char *s = malloc(2 * big + 1);
    for (int depth = NNT_JSON_MAXDEPTH; depth <= NNT_JSON_MAXDEPTH + 1; depth++) {
        memset(s, '[', (size_t)depth);
        memset(s + depth, ']', (size_t)depth);
        nnt_json_init(&j, s, 2 * (size_t)depth, 0, "t", err, sizeof err);
        int rc = nnt_json_skip(&j, NNT_JSON_MAXDEPTH, "(deep)");
        ck_assert_int_eq(rc, depth > NNT_JSON_MAXDEPTH ? NNT_E_FORMAT : 0);
    }
    ck_assert_ptr_nonnull(strstr(err, "nesting deeper than 64 (deep) at byte 64"));
    memset(s, '[', big);
    nnt_json_init(&j, s, big, 0, "t", err, sizeof err);
    ck_assert_int_eq(nnt_json_skip(&j, 1000, "(deep)"), NNT_E_FORMAT);
    free(s);
}
END_TEST

START_TEST(json_numbers_strings)
{
    nnt_json j;
    uint64_t v;
    const char *s = "18446744073709551615 0 7";
    nnt_json_init(&j, s, strlen(s), 0, "t", err, sizeof err);
    IO_OK(nnt_json_u64(&j, &v, "x"));
    ck_assert(v == UINT64_MAX);
    IO_OK(nnt_json_u64(&j, &v, "x"));
    ck_assert(v == 0);
    IO_OK(nnt_json_u64(&j, &v, "x"));
    ck_assert(v == 7);
    IO_OK(nnt_json_end(&j));
    char *out;
    size_t n;
    s = "\"a\\u0000b\\ud834\\udd1e\\u00e9\"";
    nnt_json_init(&j, s, strlen(s), 0, "t", err, sizeof err);
    IO_OK(nnt_json_string(&j, &out, &n, 100, 1, "x"));
    ck_assert_uint_eq(n, 3 + 4 + 2);
    ck_assert_int_eq(memcmp(out, "a\0b\xf0\x9d\x84\x9e\xc3\xa9", 9), 0);
    free(out);
    nnt_json_init(&j, s, strlen(s), 0, "t", err, sizeof err);
    IO_FAIL(nnt_json_string(&j, &out, &n, 8, 1, "x"), NNT_E_FORMAT, "longer than 8 bytes");
    ck_assert_ptr_null(out);
    nnt_json_init(&j, "\"a", 1, 0, "t", err, sizeof err); /* the buffer ends before 'a' */
    IO_FAIL(nnt_json_string(&j, &out, &n, 8, 1, "x"), NNT_E_FORMAT, "unterminated");
}
END_TEST

START_TEST(utf8)
{
    static const struct {
        const char *s;
        int ok;
        size_t bad;
    } cases[] = {
        {"", 1, 0},
        {"plain", 1, 0},
        {"caf\xc3\xa9", 1, 0},
        {"\xe2\x82\xac \xf0\x9f\x98\x80 \xf4\x8f\xbf\xbf", 1, 0},
        {"a\x80", 0, 1},
        {"\xc0\xaf", 0, 0},
        {"\xc1\xbf", 0, 0},
        {"ab\xe0\x80\xaf", 0, 2},
        {"\xed\xa0\x80", 0, 0},
        {"\xf4\x90\x80\x80", 0, 0},
        {"\xf5\x80\x80\x80", 0, 0},
        {"x\xe2\x82", 0, 1},
        {"\xf0\x9f\x98", 0, 0},
        {"\xc3(", 0, 0},
        {"\xff", 0, 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        size_t bad = 999;
        int ok = nnt_utf8_valid(cases[i].s, strlen(cases[i].s), &bad);
        ck_assert_msg(ok == cases[i].ok, "case %zu", i);
        if (!ok)
            ck_assert_uint_eq(bad, cases[i].bad);
    }
    uint32_t cp;
    ck_assert_int_eq(nnt_utf8_decode((const unsigned char *)"\xf0\x9f\x98\x80", 4, &cp), 4);
    ck_assert_uint_eq(cp, 0x1f600);
    ck_assert_int_eq(nnt_utf8_decode((const unsigned char *)"\xf0\x9f\x98\x80", 3, &cp), 0);
    ck_assert_int_eq(nnt_utf8_decode((const unsigned char *)"", 0, &cp), 0);
}
END_TEST

START_TEST(text_codec)
{
    const char s[] = "h\xc3\xa9llo\n\0\xff";
    int32_t t[sizeof s - 1];
    char back[sizeof s];
    nnt_text_encode(s, sizeof s - 1, t);
    ck_assert_int_eq(t[0], 'h');
    ck_assert_int_eq(t[1], 0xc3);
    ck_assert_int_eq(t[8], 0xff);
    ck_assert_int_eq(t[7], 0);
    IO_OK(nnt_text_decode(t, sizeof s - 1, back, err, sizeof err));
    ck_assert_int_eq(memcmp(back, s, sizeof s - 1), 0);
    t[3] = 256;
    IO_FAIL(nnt_text_decode(t, sizeof s - 1, back, err, sizeof err), NNT_E_INVAL,
            "token 256 at position 3");
    t[3] = -1;
    IO_FAIL(nnt_text_decode(t, sizeof s - 1, back, err, sizeof err), NNT_E_INVAL, NULL);
}
END_TEST

/* ---- llm.c checkpoints ------------------------------------------------------------------------ */

static const nnt_llmc_config small_cfg = {8, 10, 2, 2, 4, 12}; /* maxT V L NH C Vp */

static float **llmc_params(const nnt_llmc_config *cfg, nnt_llmc_param *p, uint64_t *total)
{
    IO_OK(nnt_llmc_layout(cfg, p, total, err, sizeof err));
    float **v = malloc(NNT_LLMC_NPARAMS * sizeof *v);
    for (int i = 0; i < NNT_LLMC_NPARAMS; i++) {
        v[i] = malloc(p[i].numel * sizeof **v);
        for (uint64_t k = 0; k < p[i].numel; k++)
            v[i][k] = (float)i * 1000.0f + (float)k + 0.25f;
    }
    return v;
}

static void free_params(float **v)
{
    for (int i = 0; i < NNT_LLMC_NPARAMS; i++)
        free(v[i]);
    free(v);
}

START_TEST(llmc_layout_shapes)
{
    nnt_llmc_param p[NNT_LLMC_NPARAMS];
    uint64_t total;
    IO_OK(nnt_llmc_layout(&small_cfg, p, &total, err, sizeof err));
    /* Vp C | maxT C | L C | L C | L 3C C | L 3C | L C C | L C | L C | L C | L 4C C | L 4C |
     * L C 4C | L C | C | C */
    static const int64_t want[NNT_LLMC_NPARAMS][4] = {
        {2, 12, 4}, {2, 8, 4},     {2, 2, 4},     {2, 2, 4},  {3, 2, 12, 4}, {2, 2, 12},
        {3, 2, 4, 4}, {2, 2, 4},   {2, 2, 4},     {2, 2, 4},  {3, 2, 16, 4}, {2, 2, 16},
        {3, 2, 4, 16}, {2, 2, 4},  {1, 4},        {1, 4},
    };
    static const char *names[NNT_LLMC_NPARAMS] = {
        "wte", "wpe", "ln1w", "ln1b", "qkvw", "qkvb", "attprojw", "attprojb", "ln2w", "ln2b",
        "fcw", "fcb", "fcprojw", "fcprojb", "lnfw", "lnfb"};
    uint64_t off = 1024, sum = 0;
    for (int i = 0; i < NNT_LLMC_NPARAMS; i++) {
        ck_assert_str_eq(p[i].name, names[i]);
        ck_assert_int_eq(p[i].ndim, want[i][0]);
        uint64_t n = 1;
        for (int d = 0; d < p[i].ndim; d++) {
            ck_assert_int_eq(p[i].shape[d], want[i][1 + d]);
            n *= (uint64_t)want[i][1 + d];
        }
        ck_assert_uint_eq(p[i].numel, n);
        ck_assert_uint_eq(p[i].offset, off);
        off += 4 * n;
        sum += n;
    }
    ck_assert_uint_eq(total, sum);
    /* GPT-2 124M: 124,475,904 parameters with Vp = 50304 (llm.c's number) */
    nnt_llmc_config g = {1024, 50257, 12, 12, 768, 50304};
    IO_OK(nnt_llmc_layout(&g, NULL, &total, err, sizeof err));
    ck_assert_uint_eq(total, 124475904);
    /* bad configurations */
    nnt_llmc_config c = small_cfg;
    c.num_layers = 0;
    IO_FAIL(nnt_llmc_layout(&c, p, NULL, err, sizeof err), NNT_E_INVAL,
            "num_layers (header[4]) = 0 must be positive");
    c = small_cfg;
    c.padded_vocab_size = 9;
    IO_FAIL(nnt_llmc_layout(&c, p, NULL, err, sizeof err), NNT_E_INVAL,
            "padded_vocab_size (header[7]) = 9 is smaller than vocab_size");
    c = small_cfg;
    c.num_heads = 3;
    IO_FAIL(nnt_llmc_layout(&c, p, NULL, err, sizeof err), NNT_E_INVAL,
            "not a multiple of num_heads");
    c = (nnt_llmc_config){INT32_MAX, INT32_MAX, INT32_MAX, 1, INT32_MAX, INT32_MAX};
    IO_FAIL(nnt_llmc_layout(&c, p, NULL, err, sizeof err), NNT_E_INVAL, "more than 2^63 bytes");
    IO_FAIL(nnt_llmc_layout(NULL, p, NULL, err, sizeof err), NNT_E_INVAL, NULL);
}
END_TEST

START_TEST(llmc_round_trip)
{
    nnt_llmc_param p[NNT_LLMC_NPARAMS];
    uint64_t total;
    float **v = llmc_params(&small_cfg, p, &total);
    const char *path = path_of("gpt2.bin");
    IO_OK(nnt_llmc_write(path, &small_cfg, (const float *const *)v, err, sizeof err));
    NO_TEMP_FILES();
    size_t n;
    unsigned char *b = read_bytes(path, &n);
    ck_assert_uint_eq(n, 1024 + 4 * total);
    const int32_t hdr[8] = {20240326, 3, 8, 10, 2, 2, 4, 12};
    for (int i = 0; i < 256; i++)
        ck_assert_int_eq((int32_t)nnt_io_le32(b + 4 * i), i < 8 ? hdr[i] : 0);
    for (int i = 0; i < NNT_LLMC_NPARAMS; i++)
        for (uint64_t k = 0; k < p[i].numel; k++) {
            float f;
            uint32_t bits = nnt_io_le32(b + p[i].offset + 4 * k);
            memcpy(&f, &bits, 4);
            ck_assert(f == v[i][k]);
        }

    /* the streaming writer, in odd chunks, gives the same bytes */
    const char *path2 = path_of("gpt2-stream.bin");
    nnt_llmc_writer *w;
    IO_OK(nnt_llmc_writer_begin(path2, &small_cfg, &w, err, sizeof err));
    float *all = malloc(total * sizeof *all);
    uint64_t off = 0;
    for (int i = 0; i < NNT_LLMC_NPARAMS; i++) {
        memcpy(all + off, v[i], p[i].numel * sizeof *all);
        off += p[i].numel;
    }
    for (off = 0; off < total; off += 7)
        IO_OK(nnt_llmc_writer_write(w, all + off, total - off < 7 ? total - off : 7, err,
                                    sizeof err));
    IO_OK(nnt_llmc_writer_finish(w, err, sizeof err));
    size_t n2;
    unsigned char *b2 = read_bytes(path2, &n2);
    ck_assert_uint_eq(n2, n);
    ck_assert_int_eq(memcmp(b, b2, n), 0);
    free(b2);
    free(all);

    nnt_llmc_reader *r;
    IO_OK(nnt_llmc_open(path, &r, err, sizeof err));
    const nnt_llmc_config *c = nnt_llmc_config_of(r);
    ck_assert_int_eq(c->max_seq_len, 8);
    ck_assert_int_eq(c->vocab_size, 10);
    ck_assert_int_eq(c->num_layers, 2);
    ck_assert_int_eq(c->num_heads, 2);
    ck_assert_int_eq(c->channels, 4);
    ck_assert_int_eq(c->padded_vocab_size, 12);
    for (int i = 0; i < NNT_LLMC_NPARAMS; i++) {
        const nnt_llmc_param *q = nnt_llmc_param_at(r, i);
        ck_assert_ptr_eq(nnt_llmc_find(r, q->name), q);
        ck_assert_uint_eq(q->offset, p[i].offset);
        float *got = malloc(q->numel * sizeof *got);
        IO_OK(nnt_llmc_read(r, i, 0, q->numel, got, err, sizeof err));
        ck_assert_int_eq(memcmp(got, v[i], q->numel * sizeof *got), 0);
        IO_OK(nnt_llmc_read(r, i, q->numel - 1, 1, got, err, sizeof err));
        ck_assert(got[0] == v[i][q->numel - 1]);
        free(got);
    }
    float x;
    IO_FAIL(nnt_llmc_read(r, 0, 48, 1, &x, err, sizeof err), NNT_E_INVAL,
            "wte: elements [48, 48 + 1) outside its 48 elements");
    IO_FAIL(nnt_llmc_read(r, 16, 0, 1, &x, err, sizeof err), NNT_E_INVAL, NULL);
    ck_assert_ptr_null(nnt_llmc_param_at(r, 16));
    ck_assert_ptr_null(nnt_llmc_param_at(r, -1));
    ck_assert_ptr_null(nnt_llmc_find(r, "lm_head"));
    nnt_llmc_close(r);
    nnt_llmc_close(NULL);
    free(b);
    free_params(v);
}
END_TEST

/* Write a checkpoint header with the given fields and `extra` bytes of parameters. */
static void llmc_file(const char *path, const int32_t h8[8], long extra)
{
    unsigned char h[1024];
    memset(h, 0, sizeof h);
    for (int i = 0; i < 8; i++)
        nnt_io_put_le32(h + 4 * i, (uint32_t)h8[i]);
    size_t n = 1024 + (size_t)(extra > 0 ? extra : 0);
    unsigned char *b = calloc(n, 1);
    memcpy(b, h, 1024);
    write_bytes(path, b, n);
    free(b);
}

START_TEST(llmc_corrupt)
{
    nnt_llmc_param p[NNT_LLMC_NPARAMS];
    uint64_t total;
    float **v = llmc_params(&small_cfg, p, &total);
    const char *path = path_of("gpt2.bin"), *q = path_of("bad.bin");
    IO_OK(nnt_llmc_write(path, &small_cfg, (const float *const *)v, err, sizeof err));
    size_t n;
    unsigned char *b = read_bytes(path, &n);
    nnt_llmc_reader *r;
    /* every truncation */
    for (size_t len = 0; len < n; len++) {
        write_bytes(q, b, len);
        err[0] = 0;
        int rc = nnt_llmc_open(q, &r, err, sizeof err);
        ck_assert_msg(rc == NNT_E_FORMAT && err[0], "prefix %zu: rc %d (%s)", len, rc, err);
        ck_assert(strstr(err, len < 1024 ? "too short" : "truncated") != NULL);
    }
    /* one byte too many */
    unsigned char *c = malloc(n + 1);
    memcpy(c, b, n);
    c[n] = 0;
    write_bytes(q, c, n + 1);
    IO_FAIL(nnt_llmc_open(q, &r, err, sizeof err), NNT_E_FORMAT, "extra bytes at the end");
    free(c);
    /* header fields */
    const long ok = (long)(4 * total);
    static const struct {
        int32_t h[8];
        int code;
        const char *msg;
    } cases[] = {
        {{20240327, 3, 8, 10, 2, 2, 4, 12}, NNT_E_FORMAT, "bad magic 20240327 in header[0]"},
        {{20240520, 1, 8, 10, 2, 2, 4, 12}, NNT_E_FORMAT, "not an llm.c GPT-2 checkpoint"},
        {{20240326, 5, 8, 10, 2, 2, 4, 12}, NNT_E_UNSUPPORTED, "bf16 checkpoints are not supported"},
        {{20240326, 4, 8, 10, 2, 2, 4, 12}, NNT_E_FORMAT, "unknown version 4 in header[1]"},
        {{20240326, 1, 8, 10, 2, 2, 4, 12}, NNT_E_FORMAT, "unknown version 1"},
        {{20240326, 3, 0, 10, 2, 2, 4, 12}, NNT_E_FORMAT, "max_seq_len (header[2]) = 0"},
        {{20240326, 3, 8, -10, 2, 2, 4, 12}, NNT_E_FORMAT, "vocab_size (header[3]) = -10"},
        {{20240326, 3, 8, 10, 2, 0, 4, 12}, NNT_E_FORMAT, "num_heads (header[5]) = 0"},
        {{20240326, 3, 8, 10, 2, 2, -4, 12}, NNT_E_FORMAT, "channels (header[6]) = -4"},
        {{20240326, 3, 8, 10, 2, 2, 4, 9}, NNT_E_FORMAT, "smaller than vocab_size"},
        {{20240326, 3, 8, 10, 2, 3, 4, 12}, NNT_E_FORMAT, "not a multiple of num_heads"},
        {{20240326, 3, 8, 10, 3, 2, 4, 12}, NNT_E_FORMAT, "needs 1024 + 4 * "},
        {{20240326, 3, 9, 10, 2, 2, 4, 12}, NNT_E_FORMAT, "(truncated)"},
        {{20240326, 3, 7, 10, 2, 2, 4, 12}, NNT_E_FORMAT, "(extra bytes at the end)"},
        {{20240326, 3, INT32_MAX, INT32_MAX, INT32_MAX, 1, INT32_MAX, INT32_MAX}, NNT_E_FORMAT,
         "more than 2^63 bytes"},
        {{20240326, 3, 1, 1, 65536, 1, 65536, 1}, NNT_E_FORMAT, "needs 1024 + 4 * "},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        llmc_file(q, cases[i].h, ok);
        r = (nnt_llmc_reader *)1;
        err[0] = 0;
        int rc = nnt_llmc_open(q, &r, err, sizeof err);
        ck_assert_msg(rc == cases[i].code, "case %zu: rc %d (%s)", i, rc, err);
        ck_assert_msg(strstr(err, cases[i].msg) != NULL, "case %zu: '%s' lacks '%s'", i, err,
                      cases[i].msg);
        ck_assert_msg(strncmp(err, q, strlen(q)) == 0, "case %zu: '%s'", i, err);
        ck_assert_ptr_null(r);
    }
    IO_FAIL(nnt_llmc_open(path_of("none.bin"), &r, err, sizeof err), NNT_E_IO, "cannot open");
    IO_FAIL(nnt_llmc_open(NULL, &r, err, sizeof err), NNT_E_INVAL, NULL);
    free(b);
    free_params(v);
}
END_TEST

START_TEST(llmc_writer_failures)
{
    nnt_llmc_param p[NNT_LLMC_NPARAMS];
    uint64_t total;
    float **v = llmc_params(&small_cfg, p, &total);
    const char *path = path_of("gpt2.bin");
    IO_OK(nnt_llmc_write(path, &small_cfg, (const float *const *)v, err, sizeof err));
    size_t n;
    unsigned char *b = read_bytes(path, &n);
    nnt_llmc_writer *w;
    IO_OK(nnt_llmc_writer_begin(path, &small_cfg, &w, err, sizeof err));
    IO_OK(nnt_llmc_writer_write(w, v[0], 10, err, sizeof err));
    IO_FAIL(nnt_llmc_writer_finish(w, err, sizeof err), NNT_E_INVAL, "floats missing");
    IO_OK(nnt_llmc_writer_begin(path, &small_cfg, &w, err, sizeof err));
    float *big = calloc(total + 1, sizeof *big);
    IO_FAIL(nnt_llmc_writer_write(w, big, total + 1, err, sizeof err), NNT_E_INVAL,
            "more are expected");
    nnt_llmc_writer_abort(w);
    nnt_llmc_writer_abort(NULL);
    nnt_llmc_config bad = small_cfg;
    bad.channels = 5;
    IO_FAIL(nnt_llmc_writer_begin(path, &bad, &w, err, sizeof err), NNT_E_INVAL,
            "not a multiple of num_heads");
    float *missing[NNT_LLMC_NPARAMS];
    memcpy(missing, v, sizeof missing);
    missing[7] = NULL;
    IO_FAIL(nnt_llmc_write(path, &small_cfg, (const float *const *)missing, err, sizeof err),
            NNT_E_INVAL, "params[7] (attprojb) is NULL");
    IO_FAIL(nnt_llmc_write(path_of("no/dir.bin"), &small_cfg, (const float *const *)v, err,
                           sizeof err),
            NNT_E_IO, "cannot create");
    size_t n2;
    unsigned char *b2 = read_bytes(path, &n2);
    ck_assert_uint_eq(n2, n);
    ck_assert_int_eq(memcmp(b, b2, n), 0);
    NO_TEMP_FILES();
    free(b);
    free(b2);
    free(big);
    free_params(v);
}
END_TEST

/* ---- token data ------------------------------------------------------------------------------ */

#define NTOK 20011 /* more than one 8192-token read chunk, odd */

static int32_t *tok_data(int32_t max)
{
    int32_t *t = malloc(NTOK * sizeof *t);
    for (int i = 0; i < NTOK; i++)
        t[i] = (int32_t)(((uint32_t)i * 2654435761u) % (uint32_t)max); /* below max */
    t[0] = max;
    t[1] = 0;
    return t;
}

START_TEST(tok_round_trip)
{
    static const struct {
        nnt_tok_format f;
        const char *name;
        int32_t max;
        size_t header, es;
    } fm[] = {
        {NNT_TOK_LLMC, "shard_000001.bin", 65535, 1024, 2},
        {NNT_TOK_NANOGPT, "train.bin", 65535, 0, 2},
        {NNT_TOK_TEXT, "input.txt", 255, 0, 1},
        {NNT_TOK_LLMC32, "llama3_000001.bin", 128255, 1024, 4}, /* Llama 3's last id */
    };
    for (int k = 0; k < (int)(sizeof fm / sizeof *fm); k++) {
        int32_t *t = tok_data(fm[k].max);
        const char *p = path_of(fm[k].name);
        IO_OK(nnt_tok_write(p, fm[k].f, t, NTOK, err, sizeof err));
        NO_TEMP_FILES();
        size_t n;
        unsigned char *b = read_bytes(p, &n);
        ck_assert_uint_eq(n, fm[k].header + fm[k].es * NTOK);
        if (fm[k].header) {
            int wide = fm[k].f == NNT_TOK_LLMC32;
            ck_assert_int_eq(nnt_io_le32(b), wide ? 20240801 : 20240520);
            ck_assert_int_eq(nnt_io_le32(b + 4), wide ? 7 : 1);
            ck_assert_int_eq(nnt_io_le32(b + 8), NTOK);
            for (int i = 3; i < 256; i++)
                ck_assert_int_eq(nnt_io_le32(b + 4 * i), 0);
        }
        for (int i = 0; i < NTOK; i++)
            ck_assert_int_eq(fm[k].es == 4   ? (int32_t)nnt_io_le32(b + 1024 + 4 * (size_t)i)
                             : fm[k].es == 2 ? nnt_io_le16(b + fm[k].header + 2 * (size_t)i)
                                             : b[i],
                             t[i]);
        free(b);
        for (int autodetect = 0; autodetect < 2; autodetect++) {
            nnt_tok_reader *r;
            IO_OK(nnt_tok_open(p, autodetect ? NNT_TOK_AUTO : fm[k].f, 0, &r, err, sizeof err));
            ck_assert_int_eq(nnt_tok_format_of(r), fm[k].f);
            ck_assert_uint_eq(nnt_tok_count(r), NTOK);
            int32_t *got = malloc(NTOK * sizeof *got);
            IO_OK(nnt_tok_read(r, 0, NTOK, got, err, sizeof err));
            ck_assert_int_eq(memcmp(got, t, NTOK * sizeof *got), 0);
            /* windows anywhere, chunk boundaries included */
            const size_t starts[] = {0, 1, 8191, 8192, 8193, NTOK - 5, NTOK};
            for (size_t s = 0; s < sizeof starts / sizeof *starts; s++)
                for (size_t cnt = 0; cnt <= 9000 && starts[s] + cnt <= NTOK; cnt += 4499) {
                    memset(got, 0xff, NTOK * sizeof *got);
                    IO_OK(nnt_tok_read(r, starts[s], cnt, got, err, sizeof err));
                    ck_assert_int_eq(memcmp(got, t + starts[s], cnt * sizeof *got), 0);
                    ck_assert_int_eq(got[cnt], -1);
                }
            IO_FAIL(nnt_tok_read(r, NTOK - 1, 2, got, err, sizeof err), NNT_E_INVAL,
                    "outside the 20011 tokens");
            IO_FAIL(nnt_tok_read(r, UINT64_MAX, 1, got, err, sizeof err), NNT_E_INVAL, NULL);
            IO_OK(nnt_tok_read(r, NTOK, 0, NULL, err, sizeof err));
            nnt_tok_close(r);
            /* vocabulary checks: the largest id is token 0 */
            IO_OK(nnt_tok_open(p, fm[k].f, fm[k].max + 1, &r, err, sizeof err));
            IO_OK(nnt_tok_read(r, 0, NTOK, got, err, sizeof err));
            nnt_tok_close(r);
            IO_OK(nnt_tok_open(p, fm[k].f, fm[k].max, &r, err, sizeof err));
            IO_OK(nnt_tok_read(r, 1, NTOK - 1, got, err, sizeof err));
            char want[128];
            snprintf(want, sizeof want, "token %d at position 0 (byte %zu) is not below the "
                                        "vocabulary size %d",
                     fm[k].max, fm[k].header, fm[k].max);
            IO_FAIL(nnt_tok_read(r, 0, 3, got, err, sizeof err), NNT_E_FORMAT, want);
            nnt_tok_close(r);
            free(got);
        }
        free(t);
    }
    nnt_tok_close(NULL);
    /* GPT-2 vocabulary: 50257 is the first bad id */
    int32_t g[3] = {50256, 50257, 7};
    const char *p = path_of("g.bin");
    IO_OK(nnt_tok_write(p, NNT_TOK_NANOGPT, g, 3, err, sizeof err));
    nnt_tok_reader *r;
    IO_OK(nnt_tok_open(p, NNT_TOK_AUTO, 50257, &r, err, sizeof err));
    ck_assert_int_eq(nnt_tok_format_of(r), NNT_TOK_NANOGPT);
    int32_t o[3];
    IO_FAIL(nnt_tok_read(r, 0, 3, o, err, sizeof err), NNT_E_FORMAT,
            "token 50257 at position 1 (byte 2)");
    IO_OK(nnt_tok_read(r, 2, 1, o, err, sizeof err));
    ck_assert_int_eq(o[0], 7);
    nnt_tok_close(r);
    /* empty files */
    IO_OK(nnt_tok_write(p, NNT_TOK_LLMC, g, 0, err, sizeof err));
    IO_OK(nnt_tok_open(p, NNT_TOK_AUTO, 0, &r, err, sizeof err));
    ck_assert_int_eq(nnt_tok_format_of(r), NNT_TOK_LLMC);
    ck_assert_uint_eq(nnt_tok_count(r), 0);
    nnt_tok_close(r);
    write_bytes(p, "", 0);
    IO_OK(nnt_tok_open(p, NNT_TOK_NANOGPT, 0, &r, err, sizeof err));
    ck_assert_uint_eq(nnt_tok_count(r), 0);
    nnt_tok_close(r);
}
END_TEST

START_TEST(tok_text)
{
    const char *p = path_of("tiny.txt");
    const char s[] = "First Citizen:\nBefore we proceed any further, hear me speak. caf\xc3\xa9";
    write_bytes(p, s, sizeof s - 1);
    nnt_tok_reader *r;
    IO_OK(nnt_tok_open(p, NNT_TOK_AUTO, NNT_TEXT_VOCAB, &r, err, sizeof err));
    ck_assert_int_eq(nnt_tok_format_of(r), NNT_TOK_TEXT);
    ck_assert_uint_eq(nnt_tok_count(r), sizeof s - 1);
    int32_t t[sizeof s], e[sizeof s];
    IO_OK(nnt_tok_read(r, 0, sizeof s - 1, t, err, sizeof err));
    nnt_text_encode(s, sizeof s - 1, e);
    ck_assert_int_eq(memcmp(t, e, (sizeof s - 1) * sizeof *t), 0);
    ck_assert_int_eq(t[sizeof s - 2], 0xa9);
    nnt_tok_close(r);
    /* a text vocabulary smaller than 256 rejects the larger bytes */
    IO_OK(nnt_tok_open(p, NNT_TOK_TEXT, 128, &r, err, sizeof err));
    IO_FAIL(nnt_tok_read(r, 0, sizeof s - 1, t, err, sizeof err), NNT_E_FORMAT,
            "token 195 at position 64");
    nnt_tok_close(r);
}
END_TEST

static void shard(const char *path, int32_t magic, int32_t version, int32_t count, size_t ntok)
{
    size_t n = 1024 + 2 * ntok;
    unsigned char *b = calloc(n, 1);
    nnt_io_put_le32(b, (uint32_t)magic);
    nnt_io_put_le32(b + 4, (uint32_t)version);
    nnt_io_put_le32(b + 8, (uint32_t)count);
    write_bytes(path, b, n);
    free(b);
}

START_TEST(tok_corrupt)
{
    const char *p = path_of("shard.bin");
    nnt_tok_reader *r;
    int32_t t[100];
    for (int i = 0; i < 100; i++)
        t[i] = i * 600;
    IO_OK(nnt_tok_write(p, NNT_TOK_LLMC, t, 100, err, sizeof err));
    size_t n;
    unsigned char *b = read_bytes(p, &n);
    const char *q = path_of("cut.bin");
    for (size_t len = 0; len < n; len++) {
        write_bytes(q, b, len);
        err[0] = 0;
        int rc = nnt_tok_open(q, NNT_TOK_LLMC, 0, &r, err, sizeof err);
        ck_assert_msg(rc == NNT_E_FORMAT && err[0], "prefix %zu: %d (%s)", len, rc, err);
        ck_assert(strstr(err, len < 1024 ? "too short for the 1024-byte header" : "truncated"));
    }
    free(b);
    shard(q, 20240520, 1, 100, 101);
    IO_FAIL(nnt_tok_open(q, NNT_TOK_LLMC, 0, &r, err, sizeof err), NNT_E_FORMAT,
            "1226 bytes, but header[2] = 100 tokens needs 1024 + 2 * 100 = 1224 bytes (extra "
            "bytes at the end)");
    shard(q, 20240520, 1, 101, 100);
    IO_FAIL(nnt_tok_open(q, NNT_TOK_LLMC, 0, &r, err, sizeof err), NNT_E_FORMAT, "(truncated)");
    shard(q, 20240520, 1, -1, 0);
    IO_FAIL(nnt_tok_open(q, NNT_TOK_LLMC, 0, &r, err, sizeof err), NNT_E_FORMAT,
            "negative token count -1 in header[2]");
    shard(q, 20240326, 1, 100, 100);
    IO_FAIL(nnt_tok_open(q, NNT_TOK_LLMC, 0, &r, err, sizeof err), NNT_E_FORMAT,
            "bad magic 20240326 in header[0] (expected 20240520 for 16-bit or 20240801 for 32-bit "
            "tokens)");
    shard(q, 20240520, 3, 100, 100);   /* (2 is nnt's extension, tests/test_sft.c) */
    IO_FAIL(nnt_tok_open(q, NNT_TOK_LLMC, 0, &r, err, sizeof err), NNT_E_FORMAT,
            "unknown version 3 in header[1]");
    /* 32-bit shards: every prefix refused, version and size tied to the magic, ids < 2^31 */
    IO_OK(nnt_tok_write(p, NNT_TOK_LLMC32, t, 100, err, sizeof err));
    b = read_bytes(p, &n);
    ck_assert_uint_eq(n, 1024 + 4 * 100);
    for (size_t len = 0; len < n; len++) {
        write_bytes(q, b, len);
        err[0] = 0;
        int rc = nnt_tok_open(q, NNT_TOK_LLMC32, 0, &r, err, sizeof err);
        ck_assert_msg(rc == NNT_E_FORMAT && strstr(err, q) &&
                          strstr(err, "(llm.c 32-bit token shard)") &&
                          strstr(err, len < 1024 ? "too short for the 1024-byte header"
                                                 : "needs 1024 + 4 * 100 = 1424 bytes (truncated)"),
                      "prefix %zu: %d (%s)", len, rc, err);
    }
    nnt_io_put_le32(b + 1024 + 4 * 7, 0x80000000u);
    write_bytes(q, b, n);
    IO_OK(nnt_tok_open(q, NNT_TOK_LLMC, 0, &r, err, sizeof err)); /* LLMC opens either kind */
    ck_assert_int_eq(nnt_tok_format_of(r), NNT_TOK_LLMC32);
    int32_t w[8];
    IO_OK(nnt_tok_read(r, 0, 7, w, err, sizeof err));
    ck_assert_int_eq(w[6], 6 * 600);
    IO_FAIL(nnt_tok_read(r, 0, 8, w, err, sizeof err), NNT_E_FORMAT,
            "token 2147483648 at position 7 is above 2^31 - 1");
    nnt_tok_close(r);
    free(b);
    shard(q, 20240801, 1, 100, 100);
    IO_FAIL(nnt_tok_open(q, NNT_TOK_AUTO, 0, &r, err, sizeof err), NNT_E_FORMAT,
            "unknown version 1 in header[1] (expected 7 after magic 20240801)");
    shard(q, 20240520, 7, 100, 100);
    IO_FAIL(nnt_tok_open(q, NNT_TOK_LLMC32, 0, &r, err, sizeof err), NNT_E_FORMAT,
            "unknown version 7 in header[1] (expected 1 after magic 20240520)");
    shard(q, 20240801, 7, 50, 100); /* 200 token bytes: 50 uint32 */
    IO_OK(nnt_tok_open(q, NNT_TOK_AUTO, 0, &r, err, sizeof err));
    ck_assert_uint_eq(nnt_tok_count(r), 50);
    nnt_tok_close(r);
    /* AUTO on a .bin without the magic: nanoGPT, and an odd size is an error */
    write_bytes(q, "abc", 3);
    IO_FAIL(nnt_tok_open(q, NNT_TOK_AUTO, 0, &r, err, sizeof err), NNT_E_FORMAT,
            "odd size 3 bytes");
    IO_FAIL(nnt_tok_open(q, NNT_TOK_NANOGPT, 0, &r, err, sizeof err), NNT_E_FORMAT,
            "nanoGPT token file");
    /* arguments */
    IO_FAIL(nnt_tok_open(q, (nnt_tok_format)7, 0, &r, err, sizeof err), NNT_E_INVAL, NULL);
    IO_FAIL(nnt_tok_open(q, NNT_TOK_TEXT, -1, &r, err, sizeof err), NNT_E_INVAL, NULL);
    IO_FAIL(nnt_tok_open(path_of("none.bin"), NNT_TOK_AUTO, 0, &r, err, sizeof err), NNT_E_IO,
            "cannot open");
    IO_FAIL(nnt_tok_open(dir, NNT_TOK_TEXT, 0, &r, err, sizeof err), NNT_E_IO,
            "not a regular file");
    /* writer */
    t[50] = 65536;
    IO_FAIL(nnt_tok_write(p, NNT_TOK_NANOGPT, t, 100, err, sizeof err), NNT_E_INVAL,
            "token 65536 at position 50 is outside 0..65535");
    t[50] = -2;
    IO_FAIL(nnt_tok_write(p, NNT_TOK_LLMC, t, 100, err, sizeof err), NNT_E_INVAL, NULL);
    IO_FAIL(nnt_tok_write(p, NNT_TOK_TEXT, t, 100, err, sizeof err), NNT_E_INVAL,
            "token 600 at position 1 is outside 0..255");
    IO_FAIL(nnt_tok_write(p, NNT_TOK_AUTO, t, 100, err, sizeof err), NNT_E_INVAL, NULL);
    IO_OK(nnt_tok_open(p, NNT_TOK_LLMC, 0, &r, err, sizeof err)); /* the old file is intact */
    ck_assert_uint_eq(nnt_tok_count(r), 100);
    int32_t o;
    IO_OK(nnt_tok_read(r, 99, 1, &o, err, sizeof err));
    ck_assert_int_eq(o, 99 * 600);
    nnt_tok_close(r);
    NO_TEMP_FILES();
}
END_TEST

/* ---- checksums ------------------------------------------------------------------------ */

/* nnt_hash_words against its specification (io.h) as a separate Python program computed it
 * (bytes (37 i + 11) mod 256, lengths around the 32-byte blocks): a change of the function
 * would make every recorded base checksum (nnt_trainer) stale. Then: one bit flipped
 * anywhere, in a word's high or low half or in the tail, changes it. */
START_TEST(hash_words_known)
{
    static const struct {
        size_t n;
        uint64_t want;
    } cases[] = {{0, 0x9f455a3c21ea74c5ULL},   {1, 0xdb04e080e5c65b8bULL},
                 {31, 0x646d034f8623f6feULL},  {32, 0xdc1736afe47d302aULL},
                 {33, 0x551881e50cc52132ULL},  {100, 0x3c44bbf00eae3bdbULL},
                 {1000, 0x0f7131e34683b051ULL}};
    unsigned char buf[1000];
    for (size_t i = 0; i < sizeof buf; i++)
        buf[i] = (unsigned char)((i * 37 + 11) & 0xff);
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++)
        ck_assert_msg(nnt_hash_words(buf, cases[c].n) == cases[c].want,
                      "%zu bytes: %016llx, not %016llx", cases[c].n,
                      (unsigned long long)nnt_hash_words(buf, cases[c].n),
                      (unsigned long long)cases[c].want);
    uint64_t base = nnt_hash_words(buf, 100);
    for (size_t i = 0; i < 100; i++)
        for (int bit = 0; bit < 8; bit++) {
            buf[i] ^= (unsigned char)(1u << bit);
            ck_assert_msg(nnt_hash_words(buf, 100) != base, "byte %zu bit %d", i, bit);
            buf[i] ^= (unsigned char)(1u << bit);
        }
}
END_TEST

/* ---- suite -------------------------------------------------------------------------------- */

static Suite *io_suite(void)
{
    Suite *s = suite_create("io");
    TCase *tc = tcase_create("safetensors");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_loop_test(tc, st_round_trip, 0, 2);
    tcase_add_test(tc, st_exact_bytes);
    tcase_add_test(tc, st_reference_file);
    tcase_add_test(tc, st_conversions);
    tcase_add_test(tc, st_dtype_names);
    tcase_add_loop_test(tc, st_good_headers, 0, NGOOD);
    tcase_add_loop_test(tc, st_bad_headers, 0, NBAD);
    tcase_add_test(tc, st_bad_lengths);
    tcase_add_test(tc, st_truncated);
    tcase_add_test(tc, st_corrupt_bytes);
    tcase_add_test(tc, st_writer_failures);
    tcase_add_test(tc, st_writer_io_error);
    tcase_add_test(tc, st_replace_keeps_mode);
    suite_add_tcase(s, tc);

    tc = tcase_create("json");
    tcase_add_test(tc, json_skip);
    tcase_add_test(tc, json_numbers_strings);
    tcase_add_test(tc, utf8);
    tcase_add_test(tc, text_codec);
    suite_add_tcase(s, tc);

    tc = tcase_create("llmc");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, llmc_layout_shapes);
    tcase_add_test(tc, llmc_round_trip);
    tcase_add_test(tc, llmc_corrupt);
    tcase_add_test(tc, llmc_writer_failures);
    suite_add_tcase(s, tc);

    tc = tcase_create("tokens");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, tok_round_trip);
    tcase_add_test(tc, tok_text);
    tcase_add_test(tc, tok_corrupt);
    suite_add_tcase(s, tc);

    tc = tcase_create("checksums");
    tcase_add_test(tc, hash_words_known);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) { return run_suite(io_suite()); }
