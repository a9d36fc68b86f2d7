/* SPDX-License-Identifier: MIT */
/* Tokenizers and token data (nnt_tokenizer_*, nnt_data_*), through the public API only.
 * The byte tokenizer against byte values; the BPE tokenizer against the Hugging Face ids of
 * tests/fixtures/bpe/cases.txt; token sources against files written here byte by byte
 * (llm.c shards, nanoGPT .bin, text, a directory with links, several files by a pattern),
 * with windows checked against (pos mod N) element by element; nnt_token_writer's files
 * against the same hand-made shards, byte for byte. No context: errors come from
 * nnt_ctx_last_error(NULL). */
#define _DEFAULT_SOURCE
#include "testutil.h"

#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>
#include <unistd.h>

#define LAST_ERROR() nnt_ctx_last_error(NULL)
#define EXPECT_MSG(piece)                                                                  \
    ck_assert_msg(strstr(LAST_ERROR(), piece) != NULL, "message '%s' lacks '%s'",          \
                  LAST_ERROR(), piece)

static void write_bytes(const char *path, const void *data, size_t n)
{
    FILE *f = fopen(path, "wb");
    ck_assert_msg(f != NULL, "cannot create %s", path);
    ck_assert_uint_eq(fwrite(data, 1, n, f), n);
    ck_assert_int_eq(fclose(f), 0);
}

static void put_le32(unsigned char *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (unsigned char)(v >> (8 * i));
}

/* An llm.c token shard: 256 int32 header (magic, version, count), then uint16 tokens;
 * count_field is what header[2] says (normally n). */
static void write_llmc(const char *path, uint32_t magic, uint32_t version,
                       uint32_t count_field, const uint16_t *tok, size_t n)
{
    size_t size = 1024 + 2 * n;
    unsigned char *b = calloc(1, size);
    ck_assert_ptr_nonnull(b);
    put_le32(b, magic);
    put_le32(b + 4, version);
    put_le32(b + 8, count_field);
    for (size_t i = 0; i < n; i++) {
        b[1024 + 2 * i] = (unsigned char)tok[i];
        b[1024 + 2 * i + 1] = (unsigned char)(tok[i] >> 8);
    }
    write_bytes(path, b, size);
    free(b);
}

/* A nanoGPT .bin: uint16 little-endian tokens, no header. */
static void write_nanogpt(const char *path, const uint16_t *tok, size_t n)
{
    unsigned char *b = malloc(2 * n + 1);
    ck_assert_ptr_nonnull(b);
    for (size_t i = 0; i < n; i++) {
        b[2 * i] = (unsigned char)tok[i];
        b[2 * i + 1] = (unsigned char)(tok[i] >> 8);
    }
    write_bytes(path, b, 2 * n);
    free(b);
}

static const char *fixture(const char *name)
{
    static char p[2][1024];
    static int next;
    const char *top = getenv("top_srcdir");
    char *b = p[next++ % 2];
    snprintf(b, sizeof p[0], "%s/tests/fixtures/bpe/%s", top && *top ? top : ".", name);
    return b;
}

/* ---- the byte tokenizer ------------------------------------------------------------------ */

START_TEST(test_bytes_roundtrip)
{
    nnt_tokenizer *tok = NULL;
    EXPECT_OK(nnt_tokenizer_bytes_create(&tok));
    int64_t v = 0;
    EXPECT_OK(nnt_tokenizer_vocab_size(tok, &v));
    ck_assert_int_eq(v, 256);

    /* all 256 byte values, NUL included */
    char all[256];
    for (int i = 0; i < 256; i++)
        all[i] = (char)(unsigned char)(255 - i);
    int32_t ids[300];
    size_t n = 0;
    EXPECT_OK(nnt_tokenizer_encode(tok, all, 256, ids, 300, &n));
    ck_assert_uint_eq(n, 256);
    for (int i = 0; i < 256; i++)
        ck_assert_int_eq(ids[i], 255 - i);
    char back[300];
    size_t len = 0;
    EXPECT_OK(nnt_tokenizer_decode(tok, ids, n, back, sizeof back, &len));
    ck_assert_uint_eq(len, 256);
    ck_assert_int_eq(memcmp(back, all, 256), 0);
    ck_assert_int_eq(back[256], 0);

    /* UTF-8 text: one id per byte, the byte's value */
    const char *s = "h\xc3\xa9llo, \xe4\xb8\x96\xe7\x95\x8c \xf0\x9f\x98\x80!";
    size_t sl = strlen(s);
    EXPECT_OK(nnt_tokenizer_encode(tok, s, sl, ids, 300, &n));
    ck_assert_uint_eq(n, sl);
    ck_assert_int_eq(ids[1], 0xc3);
    ck_assert_int_eq(ids[2], 0xa9);
    EXPECT_OK(nnt_tokenizer_decode(tok, ids, n, back, sizeof back, &len));
    ck_assert_uint_eq(len, sl);
    ck_assert_str_eq(back, s);

    /* empty text */
    EXPECT_OK(nnt_tokenizer_encode(tok, NULL, 0, NULL, 0, &n));
    ck_assert_uint_eq(n, 0);
    EXPECT_OK(nnt_tokenizer_decode(tok, NULL, 0, back, 1, &len));
    ck_assert_uint_eq(len, 0);
    ck_assert_int_eq(back[0], 0);
    nnt_tokenizer_destroy(tok);
    nnt_tokenizer_destroy(NULL);
}
END_TEST

START_TEST(test_bytes_buffers)
{
    nnt_tokenizer *tok = NULL;
    EXPECT_OK(nnt_tokenizer_bytes_create(&tok));
    const char *s = "abcdef";
    int32_t ids[8] = {-5, -5, -5, -5, -5, -5, -5, -5};
    size_t n = 99;
    EXPECT_OK(nnt_tokenizer_encode(tok, s, 6, NULL, 0, &n)); /* count only */
    ck_assert_uint_eq(n, 6);
    n = 0;
    EXPECT_FAIL_MSG(nnt_tokenizer_encode(tok, s, 6, ids, 4, &n), NNT_E_INVAL,
                    "nnt_tokenizer_encode");
    ck_assert_uint_eq(n, 6);
    ck_assert(ids[0] == 'a' && ids[3] == 'd' && ids[4] == -5); /* the first cap stored */

    const int32_t hi[] = {'h', 'i'};
    char buf[4] = "xyz";
    size_t len = 0;
    EXPECT_FAIL_MSG(nnt_tokenizer_decode(tok, hi, 2, NULL, 0, &len), NNT_E_INVAL,
                    "nnt_tokenizer_decode");
    ck_assert_uint_eq(len, 3); /* the size needed: 2 bytes and the NUL */
    EXPECT_RC(nnt_tokenizer_decode(tok, hi, 2, buf, 2, &len), NNT_E_INVAL);
    ck_assert_uint_eq(len, 3);
    ck_assert_int_eq(buf[0], 'x');   /* nothing written */
    EXPECT_OK(nnt_tokenizer_decode(tok, hi, 2, buf, 3, &len));
    ck_assert_uint_eq(len, 2);
    ck_assert_str_eq(buf, "hi");

    const int32_t bad[] = {'a', 256, 'b'}, neg[] = {-1};
    EXPECT_FAIL_MSG(nnt_tokenizer_decode(tok, bad, 3, buf, 4, &len), NNT_E_INVAL,
                    "position 1");
    EXPECT_RC(nnt_tokenizer_decode(tok, neg, 1, buf, 4, &len), NNT_E_INVAL);

    /* NULL arguments */
    int64_t v;
    EXPECT_RC(nnt_tokenizer_bytes_create(NULL), NNT_E_INVAL);
    EXPECT_RC(nnt_tokenizer_vocab_size(NULL, &v), NNT_E_INVAL);
    EXPECT_RC(nnt_tokenizer_vocab_size(tok, NULL), NNT_E_INVAL);
    EXPECT_RC(nnt_tokenizer_encode(NULL, s, 6, ids, 8, &n), NNT_E_INVAL);
    EXPECT_RC(nnt_tokenizer_encode(tok, NULL, 6, ids, 8, &n), NNT_E_INVAL);
    EXPECT_RC(nnt_tokenizer_encode(tok, s, 6, ids, 8, NULL), NNT_E_INVAL);
    EXPECT_RC(nnt_tokenizer_decode(NULL, hi, 2, buf, 4, &len), NNT_E_INVAL);
    EXPECT_RC(nnt_tokenizer_decode(tok, NULL, 2, buf, 4, &len), NNT_E_INVAL);
    EXPECT_RC(nnt_tokenizer_decode(tok, hi, 2, NULL, 4, &len), NNT_E_INVAL);
    EXPECT_RC(nnt_tokenizer_decode(tok, hi, 2, buf, 4, NULL), NNT_E_INVAL);
    nnt_tokenizer_destroy(tok);
}
END_TEST

/* ---- the BPE tokenizer --------------------------------------------------------------------- */

static nnt_tokenizer *load_bpe(void)
{
    nnt_tokenizer *tok = NULL;
    EXPECT_OK(nnt_tokenizer_bpe_load(fixture("vocab.json"), fixture("merges.txt"), &tok));
    ck_assert_ptr_nonnull(tok);
    return tok;
}

static int hexval(int c)
{
    return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

/* One line "HEX|IDS" of cases.txt: the text (malloc'd) and the expected ids. */
static char *parse_case(char *line, size_t *len, int32_t *expect, size_t *nexp, size_t cap)
{
    char *bar = strchr(line, '|');
    ck_assert_ptr_nonnull(bar);
    *len = (size_t)(bar - line) / 2;
    char *text = malloc(*len + 1);
    ck_assert_ptr_nonnull(text);
    for (size_t i = 0; i < *len; i++)
        text[i] = (char)(hexval(line[2 * i]) << 4 | hexval(line[2 * i + 1]));
    *nexp = 0;
    for (char *p = bar + 1; *p;) {
        char *e;
        long v = strtol(p, &e, 10);
        ck_assert(e > p && *nexp < cap);
        expect[(*nexp)++] = (int32_t)v;
        p = *e == ' ' ? e + 1 : e;
    }
    return text;
}

START_TEST(test_bpe_fixture)
{
    nnt_tokenizer *tok = load_bpe();
    int64_t v = 0;
    EXPECT_OK(nnt_tokenizer_vocab_size(tok, &v));
    ck_assert_int_eq(v, 973);

    FILE *f = fopen(fixture("cases.txt"), "r");
    ck_assert_ptr_nonnull(f);
    static char line[1 << 16];
    enum { CAP = 8192 };
    static int32_t expect[CAP], got[CAP];
    static char back[CAP * 8];
    size_t ncases = 0;
    while (fgets(line, sizeof line, f)) {
        line[strcspn(line, "\n")] = 0;
        if (line[0] == '#')
            continue;
        size_t len, nexp, n = 0, bl = 0;
        char *text = parse_case(line, &len, expect, &nexp, CAP);
        EXPECT_OK(nnt_tokenizer_encode(tok, text, len, NULL, 0, &n)); /* count only */
        ck_assert_uint_eq(n, nexp);
        EXPECT_OK(nnt_tokenizer_encode(tok, text, len, got, CAP, &n));
        ck_assert_msg(n == nexp && memcmp(got, expect, n * sizeof *got) == 0,
                      "case %zu: %zu ids, Hugging Face %zu", ncases, n, nexp);
        EXPECT_OK(nnt_tokenizer_decode(tok, got, n, back, sizeof back, &bl));
        ck_assert_msg(bl == len && memcmp(back, text, len) == 0 && back[len] == 0,
                      "case %zu: decode gives %zu bytes, not %zu", ncases, bl, len);
        free(text);
        ncases++;
    }
    fclose(f);
    ck_assert_uint_eq(ncases, 284);
    nnt_tokenizer_destroy(tok);
}
END_TEST

START_TEST(test_bpe_buffers_and_errors)
{
    nnt_tokenizer *tok = load_bpe();
    const char *s = "Hello, world! It's a test.<|endoftext|>";
    size_t sl = strlen(s), n = 0, n2 = 0;
    int32_t full[64], part[4] = {-7, -7, -7, -7};
    EXPECT_OK(nnt_tokenizer_encode(tok, s, sl, full, 64, &n));
    ck_assert_uint_gt(n, 4);
    ck_assert_int_eq(full[n - 1], 972); /* the special token */
    EXPECT_FAIL_MSG(nnt_tokenizer_encode(tok, s, sl, part, 3, &n2), NNT_E_INVAL,
                    "nnt_tokenizer_encode");
    ck_assert_uint_eq(n2, n);
    ck_assert(part[0] == full[0] && part[2] == full[2] && part[3] == -7);

    char buf[64];
    size_t len = 0;
    EXPECT_RC(nnt_tokenizer_decode(tok, full, n, NULL, 0, &len), NNT_E_INVAL);
    ck_assert_uint_eq(len, sl + 1);
    memset(buf, 'x', sizeof buf);
    EXPECT_RC(nnt_tokenizer_decode(tok, full, n, buf, sl, &len), NNT_E_INVAL);
    ck_assert_uint_eq(len, sl + 1);
    ck_assert_int_eq(buf[0], 'x');
    EXPECT_OK(nnt_tokenizer_decode(tok, full, n, buf, sl + 1, &len));
    ck_assert_uint_eq(len, sl);
    ck_assert_str_eq(buf, s);
    const int32_t bad[] = {full[0], 973};
    EXPECT_FAIL_MSG(nnt_tokenizer_decode(tok, bad, 2, buf, sizeof buf, &len), NNT_E_INVAL,
                    "position 1");
    EXPECT_RC(nnt_tokenizer_decode(tok, bad, 2, NULL, 0, &len), NNT_E_INVAL);
    EXPECT_MSG("position 1");
    nnt_tokenizer_destroy(tok);

    /* loading: missing files, a corrupt file, NULL arguments */
    nnt_tokenizer *t2 = (nnt_tokenizer *)buf;
    EXPECT_FAIL_MSG(nnt_tokenizer_bpe_load("/nonexistent-nnt/vocab.json", fixture("merges.txt"),
                                           &t2), NNT_E_IO, "nnt_tokenizer_bpe_load");
    ck_assert_ptr_null(t2);
    EXPECT_MSG("/nonexistent-nnt/vocab.json");
    test_make_tmpdir("test-data");
    write_bytes(test_tmp_path("vocab.json"), "{\"a\": 0}", 8);
    EXPECT_RC(nnt_tokenizer_bpe_load(test_tmp_path("vocab.json"), fixture("merges.txt"), &t2),
              NNT_E_FORMAT);
    EXPECT_MSG("vocab.json");
    write_bytes(test_tmp_path("merges.txt"), "#version: 0.2\nnot-a-pair\n", 25);
    EXPECT_RC(nnt_tokenizer_bpe_load(fixture("vocab.json"), test_tmp_path("merges.txt"), &t2),
              NNT_E_FORMAT);
    EXPECT_MSG("line 2");
    test_remove_tmpdir();
    EXPECT_RC(nnt_tokenizer_bpe_load(NULL, fixture("merges.txt"), &t2), NNT_E_INVAL);
    EXPECT_RC(nnt_tokenizer_bpe_load(fixture("vocab.json"), NULL, &t2), NNT_E_INVAL);
    EXPECT_RC(nnt_tokenizer_bpe_load(fixture("vocab.json"), fixture("merges.txt"), NULL),
              NNT_E_INVAL);
}
END_TEST

/* ---- token data -------------------------------------------------------------------------- */

static void expect_format(const nnt_data *d, nnt_data_format want)
{
    nnt_data_format got = NNT_DATA_AUTO;
    EXPECT_OK(nnt_data_format_of(d, &got));
    ck_assert_int_eq(got, want);
}

static nnt_data *open_ok(const char *path, nnt_data_format fmt, const nnt_tokenizer *tok,
                         int64_t vocab, int64_t want_count)
{
    nnt_data *d = NULL;
    EXPECT_OK(nnt_data_open(path, fmt, tok, vocab, &d));
    ck_assert_ptr_nonnull(d);
    int64_t n = -1;
    EXPECT_OK(nnt_data_num_tokens(d, &n));
    ck_assert_msg(n == want_count, "%s: %lld tokens, expected %lld", path, (long long)n,
                  (long long)want_count);
    return d;
}

/* Windows at many positions (wrapping, several laps, negative) against ref[(pos mod N)]. */
static void check_windows(nnt_data *d, const int32_t *ref, int64_t count)
{
    const int64_t pos[] = {0, 1, count / 2, count - 1, count - 3, count, count + 5,
                           7 * count + 2, -1, -count - 4, INT64_MAX, INT64_MIN};
    const int64_t lens[] = {0, 1, 5, count, count + 7, 2 * count + 3};
    int32_t *got = malloc((size_t)(2 * count + 3) * sizeof *got);
    ck_assert_ptr_nonnull(got);
    for (size_t p = 0; p < sizeof pos / sizeof pos[0]; p++)
        for (size_t l = 0; l < sizeof lens / sizeof lens[0]; l++) {
            int64_t n = lens[l];
            EXPECT_OK(nnt_data_read(d, pos[p], got, n));
            int64_t start = pos[p] % count;
            if (start < 0)
                start += count;
            for (int64_t i = 0; i < n; i++)
                ck_assert_msg(got[i] == ref[(start + i) % count],
                              "pos %lld, n %lld: token %lld is %d, expected %d",
                              (long long)pos[p], (long long)n, (long long)i, got[i],
                              ref[(start + i) % count]);
        }
    free(got);
}

START_TEST(test_llmc_and_nanogpt)
{
    test_make_tmpdir("test-data");
    enum { N = 20011 }; /* crosses the reader's 8192-token chunks */
    static uint16_t tok[N];
    static int32_t ref[N];
    for (int i = 0; i < N; i++) {
        tok[i] = (uint16_t)((i * 7919u + 13u) % 50257u);
        ref[i] = tok[i];
    }
    /* llm.c shard, named .bin (the magic wins) and with another name */
    write_llmc(test_tmp_path("shard_000.bin"), 20240520, 1, N, tok, N);
    write_llmc(test_tmp_path("shard.tokens"), 20240520, 1, N, tok, N);
    nnt_data *d = open_ok(test_tmp_path("shard_000.bin"), NNT_DATA_AUTO, NULL, 50257, N);
    check_windows(d, ref, N);
    expect_format(d, NNT_DATA_LLMC);
    nnt_data_close(d);
    d = open_ok(test_tmp_path("shard.tokens"), NNT_DATA_AUTO, NULL, 0, N);
    check_windows(d, ref, N);
    nnt_data_close(d);
    d = open_ok(test_tmp_path("shard.tokens"), NNT_DATA_LLMC, NULL, 0, N);
    nnt_data_close(d);

    /* nanoGPT: AUTO by the .bin name; another name is text unless the format is given */
    write_nanogpt(test_tmp_path("train.bin"), tok, N);
    write_nanogpt(test_tmp_path("train.u16"), tok, N);
    d = open_ok(test_tmp_path("train.bin"), NNT_DATA_AUTO, NULL, 50257, N);
    check_windows(d, ref, N);
    expect_format(d, NNT_DATA_NANOGPT);
    nnt_data_close(d);
    d = open_ok(test_tmp_path("train.u16"), NNT_DATA_NANOGPT, NULL, 0, N);
    check_windows(d, ref, N);
    nnt_data_close(d);
    d = open_ok(test_tmp_path("train.u16"), NNT_DATA_AUTO, NULL, 0, 2 * N); /* bytes */
    expect_format(d, NNT_DATA_TEXT);
    int32_t two[2];
    EXPECT_OK(nnt_data_read(d, 0, two, 2));
    ck_assert_int_eq(two[0], tok[0] & 0xff);
    ck_assert_int_eq(two[1], tok[0] >> 8);
    nnt_data_close(d);
    /* an llm.c shard read as nanoGPT: header words become tokens */
    d = open_ok(test_tmp_path("shard.tokens"), NNT_DATA_NANOGPT, NULL, 0, 512 + N);
    EXPECT_OK(nnt_data_read(d, 0, two, 2));
    ck_assert_int_eq(two[0], 20240520 & 0xffff);
    ck_assert_int_eq(two[1], 20240520 >> 16);
    nnt_data_close(d);
    test_remove_tmpdir();
}
END_TEST

/* 32-bit llm.c shards (magic 20240801, version 7, uint32 ids: Llama 3's 128256 ids) */
static void write_llmc32(const char *path, uint32_t magic, uint32_t version,
                         uint32_t count_field, const int32_t *tok, size_t n)
{
    size_t size = 1024 + 4 * n;
    unsigned char *b = calloc(1, size);
    ck_assert_ptr_nonnull(b);
    put_le32(b, magic);
    put_le32(b + 4, version);
    put_le32(b + 8, count_field);
    for (size_t i = 0; i < n; i++)
        put_le32(b + 1024 + 4 * i, (uint32_t)tok[i]);
    write_bytes(path, b, size);
    free(b);
}

START_TEST(test_llmc32)
{
    test_make_tmpdir("test-data");
    enum { N = 20011 };
    static int32_t ref[N];
    for (int i = 0; i < N; i++)
        ref[i] = (int32_t)((i * 104729u + 5u) % 128256u);
    ref[17] = 128255;
    ref[18] = 65536; /* would be 0 if read as 16-bit */
    write_llmc32(test_tmp_path("l3_000.bin"), 20240801, 7, N, ref, N);
    nnt_data *d = open_ok(test_tmp_path("l3_000.bin"), NNT_DATA_AUTO, NULL, 128256, N);
    expect_format(d, NNT_DATA_LLMC);
    check_windows(d, ref, N);
    nnt_data_close(d);
    d = open_ok(test_tmp_path("l3_000.bin"), NNT_DATA_LLMC, NULL, 0, N);
    check_windows(d, ref, N);
    nnt_data_close(d);
    /* the vocabulary is checked above 65536 too: 128255 is not below 128255 */
    d = open_ok(test_tmp_path("l3_000.bin"), NNT_DATA_AUTO, NULL, 128255, N);
    int32_t got[32];
    EXPECT_OK(nnt_data_read(d, 0, got, 17));
    EXPECT_RC(nnt_data_read(d, 0, got, 32), NNT_E_FORMAT);
    EXPECT_MSG("token 128255 at position 17");
    nnt_data_close(d);
    /* refusals name the file: truncated, wrong version for the magic */
    write_llmc32(test_tmp_path("l3_cut.bin"), 20240801, 7, N + 1, ref, N);
    EXPECT_RC(nnt_data_open(test_tmp_path("l3_cut.bin"), NNT_DATA_AUTO, NULL, 0, &d),
              NNT_E_FORMAT);
    EXPECT_MSG("l3_cut.bin");
    EXPECT_MSG("truncated");
    ck_assert_ptr_null(d);
    write_llmc32(test_tmp_path("l3_v.bin"), 20240801, 1, 16, ref, 16);
    EXPECT_RC(nnt_data_open(test_tmp_path("l3_v.bin"), NNT_DATA_LLMC, NULL, 0, &d),
              NNT_E_FORMAT);
    EXPECT_MSG("l3_v.bin");
    EXPECT_MSG("unknown version 1");
}
END_TEST

START_TEST(test_vocab_rejection)
{
    test_make_tmpdir("test-data");
    uint16_t tok[40];
    for (int i = 0; i < 40; i++)
        tok[i] = (uint16_t)(i * 3);
    tok[25] = 5000;
    write_llmc(test_tmp_path("a.bin"), 20240520, 1, 40, tok, 40);
    write_nanogpt(test_tmp_path("b.bin"), tok, 40);
    for (int f = 0; f < 2; f++) {
        /* checked when read: windows without position 25 are fine */
        nnt_data *d = open_ok(test_tmp_path(f ? "b.bin" : "a.bin"), NNT_DATA_AUTO, NULL, 200, 40);
        int32_t ids[80];
        EXPECT_OK(nnt_data_read(d, 0, ids, 25));
        EXPECT_OK(nnt_data_read(d, 26, ids, 39)); /* 26..39, then 0..24 */
        EXPECT_FAIL_MSG(nnt_data_read(d, 20, ids, 10), NNT_E_FORMAT, "nnt_data_read");
        EXPECT_MSG("position 25");
        EXPECT_RC(nnt_data_read(d, 30, ids, 40), NNT_E_FORMAT); /* through the wrap */
        EXPECT_MSG("position 25");
        nnt_data_close(d);
        d = open_ok(test_tmp_path(f ? "b.bin" : "a.bin"), NNT_DATA_AUTO, NULL, 5001, 40);
        EXPECT_OK(nnt_data_read(d, 0, ids, 80));
        ck_assert_int_eq(ids[65], 5000);
        nnt_data_close(d);
    }
    /* text is checked at open */
    const char *text = "hello world"; /* 'w' (119) at position 6 is the first id >= 112 */
    write_bytes(test_tmp_path("t.txt"), text, strlen(text));
    nnt_data *d = (nnt_data *)tok;
    EXPECT_FAIL_MSG(nnt_data_open(test_tmp_path("t.txt"), NNT_DATA_TEXT, NULL, 112, &d),
                    NNT_E_FORMAT, "nnt_data_open");
    ck_assert_ptr_null(d);
    EXPECT_MSG("position 6");
    d = open_ok(test_tmp_path("t.txt"), NNT_DATA_AUTO, NULL, 120, 11);
    nnt_data_close(d);
    test_remove_tmpdir();
}
END_TEST

START_TEST(test_text_and_directory)
{
    test_make_tmpdir("test-data");
    const char *a = "First file: caf\xc3\xa9.\n", *b = "second, with \0 a NUL\n";
    size_t al = strlen(a), bl = 21;
    ck_assert_int_eq(mkdir(test_tmp_path("corpus"), 0755), 0);
    write_bytes(test_tmp_path("corpus/b_second"), b, bl);
    write_bytes(test_tmp_path("corpus/a_first.txt"), a, al);
    const char *o = "outside the directory\n";
    size_t ol = strlen(o);
    write_bytes(test_tmp_path("outside.txt"), o, ol);
    ck_assert_int_eq(symlink("../outside.txt", test_tmp_path("corpus/c_link")), 0); /* followed */
    ck_assert_int_eq(symlink("a_first.txt", test_tmp_path("corpus/c_same")), 0);  /* a again: once */
    ck_assert_int_eq(symlink("missing", test_tmp_path("corpus/d_dangling")), 0);  /* skipped  */
    ck_assert_int_eq(mkdir(test_tmp_path("corpus/e_subdir"), 0755), 0);           /* skipped  */
    write_bytes(test_tmp_path("corpus/e_subdir/x"), "not read", 8);
    ck_assert_int_eq(symlink("e_subdir", test_tmp_path("corpus/f_dirlink")), 0);  /* skipped  */
    write_bytes(test_tmp_path("corpus/B_upper"), "UP", 2);   /* 'B' < 'a': bytewise order first */

    /* bytes: ids are the bytes of B_upper, a_first.txt, b_second, c_link (= outside.txt);
     * c_same is a_first.txt under another name: read once, at its first name */
    size_t total = 2 + al + bl + ol;
    char *cat = malloc(total);
    memcpy(cat, "UP", 2);
    memcpy(cat + 2, a, al);
    memcpy(cat + 2 + al, b, bl);
    memcpy(cat + 2 + al + bl, o, ol);
    int32_t *ref = malloc(total * sizeof *ref);
    for (size_t i = 0; i < total; i++)
        ref[i] = (unsigned char)cat[i];
    for (int f = 0; f < 2; f++) {
        nnt_data *d = open_ok(test_tmp_path("corpus"), f ? NNT_DATA_TEXT : NNT_DATA_AUTO, NULL, 256,
                              (int64_t)total);
        check_windows(d, ref, (int64_t)total);
        nnt_data_close(d);
    }
    /* with a trailing slash, and through an explicit byte tokenizer */
    nnt_tokenizer *bytes = NULL;
    EXPECT_OK(nnt_tokenizer_bytes_create(&bytes));
    char slash[700];
    snprintf(slash, sizeof slash, "%s/", test_tmp_path("corpus"));
    nnt_data *d = open_ok(slash, NNT_DATA_AUTO, bytes, 0, (int64_t)total);
    nnt_tokenizer_destroy(bytes);  /* the source does not need it any more */
    check_windows(d, ref, (int64_t)total);
    nnt_data_close(d);

    /* BPE: each file encoded on its own, the id sequences concatenated */
    nnt_tokenizer *bpe = load_bpe();
    const char *files[] = {"UP", a, b, o};
    const size_t lens[] = {2, al, bl, ol};
    int32_t *bref = malloc(total * sizeof *bref);
    size_t bn = 0, k;
    for (int i = 0; i < 4; i++) {
        EXPECT_OK(nnt_tokenizer_encode(bpe, files[i], lens[i], bref + bn, total - bn, &k));
        bn += k;
    }
    ck_assert_uint_lt(bn, total);
    d = open_ok(test_tmp_path("corpus"), NNT_DATA_AUTO, bpe, 973, (int64_t)bn);
    check_windows(d, bref, (int64_t)bn);
    nnt_data_close(d);
    /* a single text file through BPE, AUTO and TEXT; vocab below the tokenizer's: rejected */
    write_bytes(test_tmp_path("one.txt"), a, al);
    EXPECT_OK(nnt_tokenizer_encode(bpe, a, al, bref, total, &k));
    d = open_ok(test_tmp_path("one.txt"), NNT_DATA_AUTO, bpe, 0, (int64_t)k);
    check_windows(d, bref, (int64_t)k);
    nnt_data_close(d);
    int64_t maxid = 0;
    for (size_t i = 0; i < k; i++)
        maxid = bref[i] > maxid ? bref[i] : maxid;
    EXPECT_RC(nnt_data_open(test_tmp_path("one.txt"), NNT_DATA_TEXT, bpe, maxid, &d), NNT_E_FORMAT);
    nnt_tokenizer_destroy(bpe);
    free(bref);
    free(ref);
    free(cat);
    test_remove_tmpdir();
}
END_TEST

START_TEST(test_bad_files)
{
    test_make_tmpdir("test-data");
    uint16_t tok[16] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16};
    nnt_data *d = NULL;
    /* missing */
    EXPECT_FAIL_MSG(nnt_data_open(test_tmp_path("nope.bin"), NNT_DATA_AUTO, NULL, 0, &d), NNT_E_IO,
                    "nnt_data_open");
    EXPECT_MSG("nope.bin");
    ck_assert_ptr_null(d);
    EXPECT_RC(nnt_data_open(test_tmp_path("nope"), NNT_DATA_TEXT, NULL, 0, &d), NNT_E_IO);
    /* corrupt llm.c headers: version, count vs size (both ways), negative count */
    write_llmc(test_tmp_path("v.bin"), 20240520, 3, 16, tok, 16);   /* 2: the extension */
    EXPECT_RC(nnt_data_open(test_tmp_path("v.bin"), NNT_DATA_AUTO, NULL, 0, &d), NNT_E_FORMAT);
    EXPECT_MSG("version");
    write_llmc(test_tmp_path("c.bin"), 20240520, 1, 17, tok, 16);
    EXPECT_RC(nnt_data_open(test_tmp_path("c.bin"), NNT_DATA_AUTO, NULL, 0, &d), NNT_E_FORMAT);
    EXPECT_MSG("truncated");
    write_llmc(test_tmp_path("c2.bin"), 20240520, 1, 15, tok, 16);
    EXPECT_RC(nnt_data_open(test_tmp_path("c2.bin"), NNT_DATA_LLMC, NULL, 0, &d), NNT_E_FORMAT);
    write_llmc(test_tmp_path("neg.bin"), 20240520, 1, 0xffffffffu, tok, 16);
    EXPECT_RC(nnt_data_open(test_tmp_path("neg.bin"), NNT_DATA_LLMC, NULL, 0, &d), NNT_E_FORMAT);
    /* LLMC forced on a file without the magic, or too short for the header */
    write_llmc(test_tmp_path("m.bin"), 12345, 1, 16, tok, 16);
    EXPECT_RC(nnt_data_open(test_tmp_path("m.bin"), NNT_DATA_LLMC, NULL, 0, &d), NNT_E_FORMAT);
    EXPECT_MSG("magic");
    write_bytes(test_tmp_path("short"), "\x88\xd8\x34\x01", 4); /* the magic, then nothing */
    EXPECT_RC(nnt_data_open(test_tmp_path("short"), NNT_DATA_AUTO, NULL, 0, &d), NNT_E_FORMAT);
    EXPECT_MSG("header");
    /* nanoGPT of odd size */
    write_bytes(test_tmp_path("odd.bin"), "abcde", 5);
    EXPECT_FAIL_MSG(nnt_data_open(test_tmp_path("odd.bin"), NNT_DATA_AUTO, NULL, 0, &d),
                    NNT_E_FORMAT, "odd size");
    /* no tokens: an empty file, an empty shard, a directory without regular files */
    write_bytes(test_tmp_path("empty.txt"), "", 0);
    EXPECT_RC(nnt_data_open(test_tmp_path("empty.txt"), NNT_DATA_AUTO, NULL, 0, &d), NNT_E_FORMAT);
    EXPECT_MSG("no tokens");
    write_llmc(test_tmp_path("zero.bin"), 20240520, 1, 0, tok, 0);
    EXPECT_RC(nnt_data_open(test_tmp_path("zero.bin"), NNT_DATA_AUTO, NULL, 0, &d), NNT_E_FORMAT);
    ck_assert_int_eq(mkdir(test_tmp_path("emptydir"), 0755), 0);
    ck_assert_int_eq(mkdir(test_tmp_path("emptydir/sub"), 0755), 0);
    EXPECT_RC(nnt_data_open(test_tmp_path("emptydir"), NNT_DATA_AUTO, NULL, 0, &d), NNT_E_FORMAT);
    EXPECT_MSG("no regular files");
    /* a directory is text only */
    EXPECT_RC(nnt_data_open(test_tmp_path("emptydir"), NNT_DATA_LLMC, NULL, 0, &d), NNT_E_IO);
    EXPECT_RC(nnt_data_open(test_tmp_path("emptydir"), NNT_DATA_NANOGPT, NULL, 0, &d), NNT_E_IO);
    ck_assert_ptr_null(d);
    test_remove_tmpdir();
}
END_TEST

/* Several files as one stream: a pattern (llm.c's "fineweb_train_*.bin"), its files in byte
 * order of their names, windows across their boundaries; 16- and 32-bit llm.c shards
 * together; nanoGPT files; text files; a directory of token files refused (it would be read
 * as text), and patterns that match nothing or mix formats. */
START_TEST(test_patterns)
{
    test_make_tmpdir("test-data");
    enum { A = 9000, B = 17, C = 12001 };   /* the first crosses the reader's 8192 chunks */
    static uint16_t tok[A + B + C];
    static int32_t ref[A + B + C], ref32[A + B + C];
    for (int i = 0; i < A + B + C; i++) {
        tok[i] = (uint16_t)((i * 7919u + 13u) % 50257u);
        ref[i] = tok[i];
        ref32[i] = i >= A && i < A + B ? 70000 + i : ref[i];   /* the middle shard 32-bit */
    }
    ck_assert_int_eq(mkdir(test_tmp_path("fw"), 0755), 0);
    /* written out of order; the val shard and other files must not match the pattern */
    write_llmc(test_tmp_path("fw/train_002.bin"), 20240520, 1, C, tok + A + B, C);
    write_llmc(test_tmp_path("fw/train_000.bin"), 20240520, 1, A, tok, A);
    write_llmc(test_tmp_path("fw/train_001.bin"), 20240520, 1, B, tok + A, B);
    write_llmc(test_tmp_path("fw/val_000.bin"), 20240520, 1, 5, tok, 5);
    ck_assert_int_eq(mkdir(test_tmp_path("fw/train_dir.bin"), 0755), 0);   /* not a file */
    char pat[1024];
    snprintf(pat, sizeof pat, "%s/train_*.bin", test_tmp_path("fw"));
    nnt_data *d = open_ok(pat, NNT_DATA_AUTO, NULL, 50257, A + B + C);
    expect_format(d, NNT_DATA_LLMC);
    check_windows(d, ref, A + B + C);
    nnt_data_close(d);
    d = open_ok(pat, NNT_DATA_LLMC, NULL, 0, A + B + C);
    check_windows(d, ref, A + B + C);
    nnt_data_close(d);
    /* a 32-bit shard between 16-bit ones; an id >= vocab in it is named by its file */
    write_llmc32(test_tmp_path("fw/train_001.bin"), 20240801, 7, B, ref32 + A, B);
    d = open_ok(pat, NNT_DATA_AUTO, NULL, 128256, A + B + C);
    check_windows(d, ref32, A + B + C);
    nnt_data_close(d);
    d = open_ok(pat, NNT_DATA_AUTO, NULL, 70000, A + B + C);
    int32_t got[64];
    EXPECT_OK(nnt_data_read(d, A - 3, got, 3));
    EXPECT_RC(nnt_data_read(d, A - 3, got, 10), NNT_E_FORMAT);
    EXPECT_MSG("train_001.bin");
    nnt_data_close(d);
    /* a directory of token files is refused, naming a pattern; given as text it is bytes */
    EXPECT_RC(nnt_data_open(test_tmp_path("fw"), NNT_DATA_AUTO, NULL, 0, &d), NNT_E_FORMAT);
    EXPECT_MSG("llm.c token shards");
    EXPECT_MSG("pattern");
    ck_assert_ptr_null(d);
    EXPECT_RC(nnt_data_open(test_tmp_path("fw"), NNT_DATA_LLMC, NULL, 0, &d), NNT_E_IO);
    EXPECT_MSG("pattern");
    d = open_ok(test_tmp_path("fw"), NNT_DATA_TEXT, NULL, 0,
                4 * 1024 + 2 * (A + C + 5) + 4 * B);
    nnt_data_close(d);

    /* nanoGPT files by a pattern (AUTO: by the .bin names); a pattern mixing formats */
    ck_assert_int_eq(mkdir(test_tmp_path("ng"), 0755), 0);
    write_nanogpt(test_tmp_path("ng/part_b.bin"), tok + A, B + C);
    write_nanogpt(test_tmp_path("ng/part_a.bin"), tok, A);
    snprintf(pat, sizeof pat, "%s/part_?.bin", test_tmp_path("ng"));
    d = open_ok(pat, NNT_DATA_AUTO, NULL, 50257, A + B + C);
    expect_format(d, NNT_DATA_NANOGPT);
    check_windows(d, ref, A + B + C);
    nnt_data_close(d);
    write_llmc(test_tmp_path("ng/part_c.bin"), 20240520, 1, 5, tok, 5);
    snprintf(pat, sizeof pat, "%s/part_[abc].bin", test_tmp_path("ng"));
    EXPECT_RC(nnt_data_open(pat, NNT_DATA_AUTO, NULL, 0, &d), NNT_E_FORMAT);
    EXPECT_MSG("part_c.bin");
    EXPECT_MSG("one format");
    write_bytes(test_tmp_path("ng/part_d.bin"), "abcd", 4);   /* a .bin of text: nanoGPT */
    write_bytes(test_tmp_path("ng/notes_1.txt"), "hello ", 6);
    write_bytes(test_tmp_path("ng/notes_2.txt"), "world", 5);
    snprintf(pat, sizeof pat, "%s/notes_*.txt", test_tmp_path("ng"));
    d = open_ok(pat, NNT_DATA_AUTO, NULL, 256, 11);   /* text files: concatenated bytes */
    expect_format(d, NNT_DATA_TEXT);
    EXPECT_OK(nnt_data_read(d, 0, got, 11));
    for (int i = 0; i < 11; i++)
        ck_assert_int_eq(got[i], "hello world"[i]);
    nnt_data_close(d);
    snprintf(pat, sizeof pat, "%s/*", test_tmp_path("ng"));
    EXPECT_RC(nnt_data_open(pat, NNT_DATA_AUTO, NULL, 0, &d), NNT_E_FORMAT);
    EXPECT_MSG("mixes text");
    /* nothing matches */
    snprintf(pat, sizeof pat, "%s/none_*.bin", test_tmp_path("ng"));
    EXPECT_RC(nnt_data_open(pat, NNT_DATA_AUTO, NULL, 0, &d), NNT_E_IO);
    EXPECT_MSG("no file matches");
    ck_assert_ptr_null(d);
    test_remove_tmpdir();
}
END_TEST

START_TEST(test_null_arguments)
{
    test_make_tmpdir("test-data");
    write_bytes(test_tmp_path("t.txt"), "abc", 3);
    nnt_data *d = NULL;
    EXPECT_FAIL_MSG(nnt_data_open(NULL, NNT_DATA_AUTO, NULL, 0, &d), NNT_E_INVAL,
                    "nnt_data_open");
    EXPECT_RC(nnt_data_open(test_tmp_path("t.txt"), NNT_DATA_AUTO, NULL, 0, NULL), NNT_E_INVAL);
    EXPECT_RC(nnt_data_open(test_tmp_path("t.txt"), (nnt_data_format)4, NULL, 0, &d), NNT_E_INVAL);
    EXPECT_RC(nnt_data_open(test_tmp_path("t.txt"), (nnt_data_format)-1, NULL, 0, &d), NNT_E_INVAL);
    EXPECT_RC(nnt_data_open(test_tmp_path("t.txt"), NNT_DATA_AUTO, NULL, -1, &d), NNT_E_INVAL);
    ck_assert_ptr_null(d);
    d = open_ok(test_tmp_path("t.txt"), NNT_DATA_AUTO, NULL, 0, 3);
    int64_t n;
    int32_t ids[4];
    EXPECT_FAIL_MSG(nnt_data_num_tokens(NULL, &n), NNT_E_INVAL, "nnt_data_num_tokens");
    nnt_data_format fmt;
    EXPECT_FAIL_MSG(nnt_data_format_of(NULL, &fmt), NNT_E_INVAL, "nnt_data_format_of");
    EXPECT_FAIL_MSG(nnt_data_format_of(d, NULL), NNT_E_INVAL, "nnt_data_format_of");
    EXPECT_RC(nnt_data_num_tokens(d, NULL), NNT_E_INVAL);
    EXPECT_FAIL_MSG(nnt_data_read(NULL, 0, ids, 1), NNT_E_INVAL, "nnt_data_read");
    EXPECT_RC(nnt_data_read(d, 0, NULL, 1), NNT_E_INVAL);
    EXPECT_RC(nnt_data_read(d, 0, ids, -1), NNT_E_INVAL);
    EXPECT_OK(nnt_data_read(d, 0, NULL, 0));
    EXPECT_OK(nnt_data_read(d, 2, ids, 4));
    ck_assert(ids[0] == 'c' && ids[1] == 'a' && ids[2] == 'b' && ids[3] == 'c');
    nnt_data_close(d);
    nnt_data_close(NULL);
    test_remove_tmpdir();
}
END_TEST

/* ---- nnt_token_writer --------------------------------------------------------------------- */

/* The bytes of a file (malloc'd), *n its size. */
static unsigned char *read_bytes(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    ck_assert_msg(f != NULL, "cannot open %s", path);
    ck_assert_int_eq(fseek(f, 0, SEEK_END), 0);
    long size = ftell(f);
    ck_assert_int_ge(size, 0);
    rewind(f);
    unsigned char *b = malloc((size_t)size + 1);
    ck_assert_ptr_nonnull(b);
    ck_assert_uint_eq(fread(b, 1, (size_t)size, f), (size_t)size);
    fclose(f);
    *n = (size_t)size;
    return b;
}

static void expect_same_file(const char *got, const char *want)
{
    size_t ng, nw;
    unsigned char *g = read_bytes(got, &ng), *w = read_bytes(want, &nw);
    ck_assert_msg(ng == nw, "%s: %zu bytes, expected %zu", got, ng, nw);
    for (size_t i = 0; i < ng; i++)
        ck_assert_msg(g[i] == w[i], "%s: byte %zu is %u, expected %u", got, i, g[i], w[i]);
    free(g);
    free(w);
}

/* Nothing but the names given (no temporary file left behind) in the test directory. */
static void expect_dir_holds(int n, const char *const *names)
{
    char cmd[800];
    snprintf(cmd, sizeof cmd, "ls -A '%s' | wc -l", test_tmpdir());
    FILE *p = popen(cmd, "r");
    ck_assert_ptr_nonnull(p);
    int count = -1;
    ck_assert_int_eq(fscanf(p, "%d", &count), 1);
    pclose(p);
    ck_assert_msg(count == n, "%s holds %d entries, expected %d", test_tmpdir(), count, n);
    for (int i = 0; i < n; i++)
        ck_assert_msg(access(test_tmp_path(names[i]), F_OK) == 0, "%s is missing", names[i]);
}

/* Write ref in pieces of growing sizes (and empty ones). */
static void write_in_pieces(nnt_token_writer *w, const int32_t *ref, size_t n)
{
    size_t done = 0, k = 0;
    while (done < n) {
        size_t piece = (k * k * 37) % 9001;
        if (piece > n - done)
            piece = n - done;
        EXPECT_OK(nnt_token_writer_write(w, ref + done, piece));
        done += piece;
        k++;
    }
    int64_t count = -1;
    EXPECT_OK(nnt_token_writer_count(w, &count));
    ck_assert_int_eq(count, (int64_t)n);
}

START_TEST(test_token_writer)
{
    test_make_tmpdir("test-data");
    enum { N = 70001 }; /* above 2^16: the count field is not a 16-bit one */
    static int32_t ref[N];
    static uint16_t ref16[N];
    for (int i = 0; i < N; i++) {
        ref[i] = (int32_t)((i * 104729u + 3u) % 50257u);
        ref16[i] = (uint16_t)ref[i];
    }
    ref[5] = 0;
    ref16[5] = 0;
    ref[6] = 50256;
    ref16[6] = 50256;

    /* 16-bit (the default for a vocabulary that fits): the bytes of a hand-made shard */
    nnt_token_writer_options o = NNT_TOKEN_WRITER_OPTIONS_INIT;
    o.vocab = 50257;
    nnt_token_writer *w = NULL;
    EXPECT_OK(nnt_token_writer_open(NULL, test_tmp_path("w16.bin"), &o, &w));
    ck_assert_ptr_nonnull(w);
    write_in_pieces(w, ref, N);
    EXPECT_OK(nnt_token_writer_close(w));
    write_llmc(test_tmp_path("h16.bin"), 20240520, 1, N, ref16, N);
    expect_same_file(test_tmp_path("w16.bin"), test_tmp_path("h16.bin"));
    nnt_data *d = open_ok(test_tmp_path("w16.bin"), NNT_DATA_AUTO, NULL, 50257, N);
    expect_format(d, NNT_DATA_LLMC);
    check_windows(d, ref, N);
    nnt_data_close(d);
    /* a program of 0.3 (options without row_values; what lies past its size not read): the
     * same file */
    nnt_token_writer_options o03 = o;
    o03.size = offsetof(nnt_token_writer_options, row_values), o03.row_values = -5;
    EXPECT_OK(nnt_token_writer_open(NULL, test_tmp_path("w16old.bin"), &o03, &w));
    write_in_pieces(w, ref, N);
    EXPECT_OK(nnt_token_writer_close(w));
    expect_same_file(test_tmp_path("w16old.bin"), test_tmp_path("h16.bin"));
    ck_assert_int_eq(remove(test_tmp_path("w16old.bin")), 0);

    /* 32-bit: chosen by a vocabulary above 65536, or asked for */
    static int32_t ref32[N];
    for (int i = 0; i < N; i++)
        ref32[i] = (int32_t)((i * 104729u + 5u) % 128256u);
    ref32[17] = 128255;
    ref32[18] = 65536;
    o.vocab = 128256;
    EXPECT_OK(nnt_token_writer_open(NULL, test_tmp_path("w32.bin"), &o, &w));
    write_in_pieces(w, ref32, N);
    EXPECT_OK(nnt_token_writer_close(w));
    write_llmc32(test_tmp_path("h32.bin"), 20240801, 7, N, ref32, N);
    expect_same_file(test_tmp_path("w32.bin"), test_tmp_path("h32.bin"));
    d = open_ok(test_tmp_path("w32.bin"), NNT_DATA_LLMC, NULL, 128256, N);
    check_windows(d, ref32, N);
    nnt_data_close(d);
    nnt_token_writer_options o32 = NNT_TOKEN_WRITER_OPTIONS_INIT;
    o32.bits = 32;   /* GPT-2's ids in the 32-bit kind */
    EXPECT_OK(nnt_token_writer_open(NULL, test_tmp_path("w32b.bin"), &o32, &w));
    EXPECT_OK(nnt_token_writer_write(w, ref, N));
    EXPECT_OK(nnt_token_writer_close(w));
    write_llmc32(test_tmp_path("h32b.bin"), 20240801, 7, N, ref, N);
    expect_same_file(test_tmp_path("w32b.bin"), test_tmp_path("h32b.bin"));

    /* no ids, default options: a valid empty shard (header only, count 0) */
    EXPECT_OK(nnt_token_writer_open(NULL, test_tmp_path("w0.bin"), NULL, &w));
    EXPECT_OK(nnt_token_writer_write(w, NULL, 0));
    EXPECT_OK(nnt_token_writer_close(w));
    write_llmc(test_tmp_path("h0.bin"), 20240520, 1, 0, ref16, 0);
    expect_same_file(test_tmp_path("w0.bin"), test_tmp_path("h0.bin"));

    /* out-of-range ids: refused naming the id and its position in the file; nothing of the
     * call is written and the writer goes on */
    o.vocab = 50257;
    EXPECT_OK(nnt_token_writer_open(NULL, test_tmp_path("wr.bin"), &o, &w));
    EXPECT_OK(nnt_token_writer_write(w, ref, 100));
    int32_t bad[4] = {1, 2, 50257, 3};
    EXPECT_RC(nnt_token_writer_write(w, bad, 4), NNT_E_INVAL);
    EXPECT_MSG("nnt_token_writer_write");
    EXPECT_MSG("wr.bin");
    EXPECT_MSG("token 50257 at position 102");
    EXPECT_MSG("50257 ids");
    bad[2] = -1;
    EXPECT_RC(nnt_token_writer_write(w, bad, 4), NNT_E_INVAL);
    EXPECT_MSG("token -1 at position 102");
    EXPECT_OK(nnt_token_writer_write(w, ref + 100, N - 100));
    EXPECT_OK(nnt_token_writer_close(w));
    expect_same_file(test_tmp_path("wr.bin"), test_tmp_path("h16.bin"));
    /* without a vocabulary, the format's range: 65535 fits 16 bits, 65536 does not */
    EXPECT_OK(nnt_token_writer_open(NULL, test_tmp_path("wf.bin"), NULL, &w));
    bad[2] = 65535;
    EXPECT_OK(nnt_token_writer_write(w, bad, 4));
    bad[1] = 65536;
    EXPECT_RC(nnt_token_writer_write(w, bad, 4), NNT_E_INVAL);
    EXPECT_MSG("token 65536 at position 5 is outside 0..65535");
    nnt_token_writer_destroy(w);
    EXPECT_OK(nnt_token_writer_open(NULL, test_tmp_path("wf.bin"), &o32, &w));
    bad[1] = INT32_MIN;
    EXPECT_RC(nnt_token_writer_write(w, bad, 4), NNT_E_INVAL);
    EXPECT_MSG("at position 1 is outside 0..2147483647");
    nnt_token_writer_destroy(w);

    /* an abandoned writer leaves no file, and an older file at its path as it was */
    const char *kept[] = {"w16.bin", "h16.bin", "w32.bin", "h32.bin", "w32b.bin", "h32b.bin",
                          "w0.bin", "h0.bin", "wr.bin"};
    expect_dir_holds(9, kept);
    EXPECT_OK(nnt_token_writer_open(NULL, test_tmp_path("gone.bin"), NULL, &w));
    EXPECT_OK(nnt_token_writer_write(w, ref, 1000));
    nnt_token_writer_destroy(w);
    EXPECT_OK(nnt_token_writer_open(NULL, test_tmp_path("w0.bin"), NULL, &w));
    EXPECT_OK(nnt_token_writer_write(w, ref, 1000));
    nnt_token_writer_destroy(w);
    nnt_token_writer_destroy(NULL);
    expect_dir_holds(9, kept);
    expect_same_file(test_tmp_path("w0.bin"), test_tmp_path("h0.bin"));

    /* a path in a directory that does not exist: a clear NNT_E_IO at open */
    w = (nnt_token_writer *)&o; /* set to NULL on failure */
    EXPECT_RC(nnt_token_writer_open(NULL, test_tmp_path("no/such/dir/x.bin"), NULL, &w),
              NNT_E_IO);
    ck_assert_ptr_null(w);
    EXPECT_MSG("nnt_token_writer_open");
    EXPECT_MSG("no/such/dir/x.bin");
    EXPECT_MSG("No such file or directory");
    /* the directory removed while writing: close fails and reports it */
    ck_assert_int_eq(mkdir(test_tmp_path("sub"), 0755), 0);
    EXPECT_OK(nnt_token_writer_open(NULL, test_tmp_path("sub/x.bin"), NULL, &w));
    EXPECT_OK(nnt_token_writer_write(w, ref, 10));
    char cmd[800];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", test_tmp_path("sub"));
    ck_assert_int_eq(system(cmd), 0);
    EXPECT_RC(nnt_token_writer_close(w), NNT_E_IO);
    EXPECT_MSG("nnt_token_writer_close");
    EXPECT_MSG("sub/x.bin");
    ck_assert_int_ne(access(test_tmp_path("sub/x.bin"), F_OK), 0);

    /* bad arguments and options */
    EXPECT_RC(nnt_token_writer_open(NULL, test_tmp_path("a.bin"), NULL, NULL), NNT_E_INVAL);
    EXPECT_RC(nnt_token_writer_open(NULL, NULL, NULL, &w), NNT_E_INVAL);
    ck_assert_ptr_null(w);
    EXPECT_RC(nnt_token_writer_open(NULL, "", NULL, &w), NNT_E_INVAL);
    nnt_token_writer_options ob = NNT_TOKEN_WRITER_OPTIONS_INIT;
    ob.bits = 8;
    EXPECT_RC(nnt_token_writer_open(NULL, test_tmp_path("a.bin"), &ob, &w), NNT_E_INVAL);
    EXPECT_MSG("bits 8");
    ob.bits = 16;
    ob.vocab = 128256;
    EXPECT_RC(nnt_token_writer_open(NULL, test_tmp_path("a.bin"), &ob, &w), NNT_E_INVAL);
    EXPECT_MSG("128256");
    ob.bits = 0;
    ob.vocab = -1;
    EXPECT_RC(nnt_token_writer_open(NULL, test_tmp_path("a.bin"), &ob, &w), NNT_E_INVAL);
    ob.vocab = 0;
    ob.size = 4;
    EXPECT_RC(nnt_token_writer_open(NULL, test_tmp_path("a.bin"), &ob, &w), NNT_E_INVAL);
    ck_assert_ptr_null(w);
    EXPECT_RC(nnt_token_writer_write(NULL, ref, 1), NNT_E_INVAL);
    EXPECT_RC(nnt_token_writer_close(NULL), NNT_E_INVAL);
    EXPECT_RC(nnt_token_writer_count(NULL, NULL), NNT_E_INVAL);
    EXPECT_OK(nnt_token_writer_open(NULL, test_tmp_path("a.bin"), NULL, &w));
    EXPECT_RC(nnt_token_writer_write(w, NULL, 3), NNT_E_INVAL);
    EXPECT_RC(nnt_token_writer_count(w, NULL), NNT_E_INVAL);
    nnt_token_writer_destroy(w);
    expect_dir_holds(9, kept);
    test_remove_tmpdir();
}
END_TEST

int main(void)
{
    Suite *s = suite_create("data");
    TCase *tc = tcase_create("data");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_bytes_roundtrip);
    tcase_add_test(tc, test_bytes_buffers);
    tcase_add_test(tc, test_bpe_fixture);
    tcase_add_test(tc, test_bpe_buffers_and_errors);
    tcase_add_test(tc, test_llmc_and_nanogpt);
    tcase_add_test(tc, test_llmc32);
    tcase_add_test(tc, test_vocab_rejection);
    tcase_add_test(tc, test_text_and_directory);
    tcase_add_test(tc, test_bad_files);
    tcase_add_test(tc, test_patterns);
    tcase_add_test(tc, test_null_arguments);
    tcase_add_test(tc, test_token_writer);
    suite_add_tcase(s, tc);
    return run_suite(s);
}
