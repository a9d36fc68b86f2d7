/* SPDX-License-Identifier: MIT */
/* GPT-2 byte-level BPE tokenizer (lib/io/bpe.c).
 * Every case of tests/fixtures/bpe/cases.txt (ids computed by Hugging Face's GPT2Tokenizer from
 * the vocab.json + merges.txt there) must be reproduced exactly and decode back to its text;
 * then hand-made tokenizers for the BPE order, invalid UTF-8, the buffer contracts, corrupt
 * files (each failing with NNT_E_FORMAT and a message naming the place), random mutations of
 * valid files (no crash), long inputs and the speed on megabytes of text.
 * Linked against the io objects alone (libnntio.la): no StarPU, no context. */
#include "testutil.h"

#include "../lib/io/io.h"

#include <dirent.h>
#include <stdint.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static char err[NNT_IO_ERRLEN];

static const char *fixture_dir(void)
{
    static char d[1024];
    const char *top = getenv("top_srcdir");
    snprintf(d, sizeof d, "%s/tests/fixtures/bpe", top && *top ? top : ".");
    return d;
}

static char *read_all(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    ck_assert_msg(f != NULL, "cannot open %s", path);
    size_t cap = 1 << 16, len = 0;
    char *b = malloc(cap + 1);
    ck_assert_ptr_nonnull(b);
    size_t k;
    while ((k = fread(b + len, 1, cap - len, f)) > 0) {
        len += k;
        if (len == cap) {
            cap *= 2;
            b = realloc(b, cap + 1);
            ck_assert_ptr_nonnull(b);
        }
    }
    fclose(f);
    b[len] = 0;
    *n = len;
    return b;
}

static nnt_bpe *load_fixture(void)
{
    nnt_bpe *b = NULL;
    int rc = nnt_bpe_load(fixture_dir(), &b, err, sizeof err);
    ck_assert_msg(rc == 0, "nnt_bpe_load(%s): %d %s", fixture_dir(), rc, err);
    ck_assert_ptr_nonnull(b);
    return b;
}

/* GPT-2's bytes_to_unicode, written independently of bpe.c: the UTF-8 of byte x's character. */
static size_t byte_char(unsigned x, char out[2])
{
    unsigned cp = x, n = 0;
    int printable = (x >= 0x21 && x <= 0x7e) || (x >= 0xa1 && x <= 0xac) || x >= 0xae;
    if (!printable) {
        for (unsigned y = 0; y < x; y++)
            n += !((y >= 0x21 && y <= 0x7e) || (y >= 0xa1 && y <= 0xac) || y >= 0xae);
        cp = 256 + n;
    }
    if (cp < 0x80) {
        out[0] = (char)cp;
        return 1;
    }
    out[0] = (char)(0xc0 | cp >> 6);
    out[1] = (char)(0x80 | (cp & 0x3f));
    return 2;
}

/* Encode into a fresh array (freed by the caller); asserts success. */
static int32_t *enc(const nnt_bpe *b, const char *s, size_t len, size_t *n)
{
    int32_t *ids = malloc((len ? len : 1) * sizeof *ids);
    ck_assert_ptr_nonnull(ids);
    int rc = nnt_bpe_encode(b, s, len, ids, len, n, err, sizeof err);
    ck_assert_msg(rc == 0, "encode: %d %s", rc, err);
    ck_assert_uint_le(*n, len);
    return ids;
}

/* decode(ids) must give back s[0..len). */
static void check_roundtrip(const nnt_bpe *b, const int32_t *ids, size_t n, const char *s,
                            size_t len, const char *what)
{
    char *back = malloc(len + 1);
    ck_assert_ptr_nonnull(back);
    size_t bl = 0;
    int rc = nnt_bpe_decode(b, ids, n, back, len + 1, &bl, err, sizeof err);
    ck_assert_msg(rc == 0, "%s: decode: %d %s", what, rc, err);
    ck_assert_msg(bl == len && memcmp(back, s, len) == 0, "%s: decode gives %zu bytes, not %zu",
                  what, bl, len);
    free(back);
}

/* ---- Hugging Face fixtures ------------------------------------------------------------------ */

static int hexval(int c)
{
    return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

START_TEST(test_hf_cases)
{
    nnt_bpe *b = load_fixture();
    ck_assert_int_eq(nnt_bpe_vocab_size(b), 973);
    ck_assert_uint_eq(nnt_bpe_merge_count(b), 716);
    ck_assert_int_eq(nnt_bpe_eot(b), 972);
    ck_assert_int_eq(nnt_bpe_token_id(b, NNT_BPE_EOT, strlen(NNT_BPE_EOT)), 972);
    ck_assert_int_eq(nnt_bpe_token_id(b, "!", 1), 0);         /* GPT-2 order: '!' first */
    ck_assert_int_eq(nnt_bpe_token_id(b, "\xc4\xa0", 2), 220); /* 'Ġ' (space) as in GPT-2 */
    ck_assert_int_eq(nnt_bpe_token_id(b, "nope-not-a-token", 16), -1);

    char path[1100];
    snprintf(path, sizeof path, "%s/cases.txt", fixture_dir());
    size_t flen;
    char *f = read_all(path, &flen);
    size_t ncases = 0, nids_total = 0, bytes_total = 0;
    char *line = f;
    while (line < f + flen) {
        char *nl = memchr(line, '\n', (size_t)(f + flen - line));
        ck_assert_ptr_nonnull(nl);
        *nl = 0;
        if (line[0] != '#') {
            char *bar = strchr(line, '|');
            ck_assert_ptr_nonnull(bar);
            size_t hl = (size_t)(bar - line);
            ck_assert_uint_eq(hl % 2, 0);
            size_t len = hl / 2;
            char *text = malloc(len + 1);
            for (size_t i = 0; i < len; i++) {
                int hi = hexval(line[2 * i]), lo = hexval(line[2 * i + 1]);
                ck_assert(hi >= 0 && lo >= 0);
                text[i] = (char)(hi << 4 | lo);
            }
            size_t nexp = 0;
            int32_t *expect = malloc((strlen(bar) + 1) * sizeof *expect);
            for (char *p = bar + 1; *p;) {
                char *e;
                long v = strtol(p, &e, 10);
                ck_assert(e > p);
                expect[nexp++] = (int32_t)v;
                p = *e == ' ' ? e + 1 : e;
            }
            size_t n;
            int32_t *got = enc(b, text, len, &n);
            size_t first = 0;
            while (first < n && first < nexp && got[first] == expect[first])
                first++;
            ck_assert_msg(n == nexp && first == n,
                          "case %zu (%.60s...): %zu ids, Hugging Face %zu; first difference at "
                          "%zu: %ld vs %ld",
                          ncases, line, n, nexp, first, first < n ? (long)got[first] : -1L,
                          first < nexp ? (long)expect[first] : -1L);
            check_roundtrip(b, got, n, text, len, "fixture case");
            nids_total += n;
            bytes_total += len;
            ncases++;
            free(got);
            free(expect);
            free(text);
        }
        line = nl + 1;
    }
    ck_assert_uint_eq(ncases, 284);
    printf("test_bpe: %zu Hugging Face cases reproduced (%zu bytes, %zu ids)\n", ncases,
           bytes_total, nids_total);
    free(f);
    nnt_bpe_free(b);
}
END_TEST

/* Loading by directory (with and without a trailing slash) and by file names. */
START_TEST(test_load_paths)
{
    nnt_bpe *b = NULL;
    char d[1100], v[1200], m[1200];
    snprintf(d, sizeof d, "%s/", fixture_dir());
    ck_assert_int_eq(nnt_bpe_load(d, &b, err, sizeof err), 0);
    nnt_bpe_free(b);
    snprintf(v, sizeof v, "%s/vocab.json", fixture_dir());
    snprintf(m, sizeof m, "%s/merges.txt", fixture_dir());
    ck_assert_int_eq(nnt_bpe_load_files(v, m, &b, err, sizeof err), 0);
    ck_assert_int_eq(nnt_bpe_vocab_size(b), 973);
    nnt_bpe_free(b);

    b = (nnt_bpe *)&err; /* must be reset on failure */
    ck_assert_int_eq(nnt_bpe_load("/nonexistent-nnt-dir", &b, err, sizeof err), NNT_E_IO);
    ck_assert_ptr_null(b);
    ck_assert_ptr_nonnull(strstr(err, "/nonexistent-nnt-dir/vocab.json"));
    ck_assert_int_eq(nnt_bpe_load_files(v, fixture_dir(), &b, err, sizeof err), NNT_E_IO);
    ck_assert_ptr_nonnull(strstr(err, "not a regular file"));
    ck_assert_int_eq(nnt_bpe_load(NULL, &b, err, sizeof err), NNT_E_INVAL);
    ck_assert_int_eq(nnt_bpe_load(d, NULL, err, sizeof err), NNT_E_INVAL);
    ck_assert_int_eq(nnt_bpe_load_files(NULL, m, &b, NULL, 0), NNT_E_INVAL);
    nnt_bpe_free(NULL);
    ck_assert_int_eq(nnt_bpe_vocab_size(NULL), 0);
    ck_assert_int_eq(nnt_bpe_eot(NULL), -1);

    /* a file over NNT_BPE_MAXFILE (sparse) */
    const char *t = getenv("TMPDIR");
    char big[600];
    snprintf(big, sizeof big, "%s/nnt-test-bpe-XXXXXX", t && *t ? t : "/tmp");
    int fd = mkstemp(big);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(ftruncate(fd, (off_t)NNT_BPE_MAXFILE + 1), 0);
    close(fd);
    ck_assert_int_eq(nnt_bpe_load_files(v, big, &b, err, sizeof err), NNT_E_FORMAT);
    ck_assert_ptr_nonnull(strstr(err, "larger than"));
    ck_assert_int_eq(nnt_bpe_load_files(big, m, &b, err, sizeof err), NNT_E_FORMAT);
    unlink(big);
}
END_TEST

/* ---- hand-made tokenizers ------------------------------------------------------------------- */

/* A vocab.json with the 256 byte tokens (ids 0..255 in byte order, raw UTF-8 or \u escapes
 * when `escaped`) followed by `extra` (", \"tok\": id ..." or ""). */
static char *byte_vocab(const char *extra, int escaped, size_t *len)
{
    size_t cap = 8192 + strlen(extra), n = 0;
    char *s = malloc(cap);
    ck_assert_ptr_nonnull(s);
    s[n++] = '{';
    for (unsigned x = 0; x < 256; x++) {
        char c[2];
        size_t k = byte_char(x, c);
        n += (size_t)snprintf(s + n, cap - n, "%s\"", x ? ", " : "");
        if (k == 1 && (c[0] == '"' || c[0] == '\\')) {
            s[n++] = '\\';
            s[n++] = c[0];
        } else if (escaped && k == 2) {
            unsigned cp = ((unsigned)(c[0] & 0x1f) << 6) | (unsigned)(c[1] & 0x3f);
            n += (size_t)snprintf(s + n, cap - n, "\\u%04X", cp);
        } else {
            memcpy(s + n, c, k);
            n += k;
        }
        n += (size_t)snprintf(s + n, cap - n, "\": %u", x);
    }
    n += (size_t)snprintf(s + n, cap - n, "%s}\n", extra);
    *len = n;
    return s;
}

static nnt_bpe *load_strings(const char *extra, int escaped, const char *merges)
{
    size_t vl;
    char *v = byte_vocab(extra, escaped, &vl);
    nnt_bpe *b = NULL;
    int rc = nnt_bpe_load_mem(v, vl, merges, strlen(merges), &b, err, sizeof err);
    ck_assert_msg(rc == 0, "load_mem: %d %s", rc, err);
    free(v);
    return b;
}

static void expect_ids(const nnt_bpe *b, const char *s, const int32_t *want, size_t nwant)
{
    size_t n;
    int32_t *got = enc(b, s, strlen(s), &n);
    ck_assert_msg(n == nwant, "\"%s\": %zu ids, expected %zu", s, n, nwant);
    for (size_t i = 0; i < n; i++)
        ck_assert_msg(got[i] == want[i], "\"%s\": id %zu is %d, expected %d", s, i, got[i],
                      want[i]);
    check_roundtrip(b, got, n, s, strlen(s), s);
    free(got);
}
#define EXPECT_IDS(b, s, ...)                                                              \
    do {                                                                                   \
        const int32_t w_[] = {__VA_ARGS__};                                                \
        expect_ids(b, s, w_, sizeof w_ / sizeof w_[0]);                                    \
    } while (0)

#define EXTRA_HELLO ", \"he\": 256, \"ll\": 257, \"hell\": 258, \"hello\": 259, " \
                    "\"\\u0120w\": 260, \"or\": 261, \"\\u0120wor\": 262, \"ab\": 263, " \
                    "\"bc\": 264, \"aa\": 265"

START_TEST(test_merge_order)
{
    const char *merges = "#version: 0.2\nh e\nl l\nhe ll\nhell o\n\xc4\xa0 w\no r\n\xc4\xa0w or\n"
                         "a b\nb c\na a\n";
    for (int escaped = 0; escaped < 2; escaped++) {
        nnt_bpe *b = load_strings(EXTRA_HELLO, escaped, merges);
        ck_assert_int_eq(nnt_bpe_vocab_size(b), 266);
        ck_assert_int_eq(nnt_bpe_eot(b), -1);
        EXPECT_IDS(b, "hello world", 259, 262, 'l', 'd');
        EXPECT_IDS(b, "abc", 263, 'c');    /* "a b" ranks before "b c" */
        EXPECT_IDS(b, "aaa", 265, 'a');    /* leftmost first among equal ranks */
        EXPECT_IDS(b, "aaaa", 265, 265);
        EXPECT_IDS(b, "hellohello", 259, 259);
        /* "<|endoftext|>" is not in this vocabulary: plain text */
        EXPECT_IDS(b, "<|endoftext|>", '<', '|', 'e', 'n', 'd', 'o', 'f', 't', 'e', 'x', 't',
                   '|', '>');
        nnt_bpe_free(b);
    }
    /* the other rank order: "b c" first */
    nnt_bpe *b = load_strings(EXTRA_HELLO, 0, "b c\na b\n");
    EXPECT_IDS(b, "abc", 'a', 264);
    ck_assert_uint_eq(nnt_bpe_merge_count(b), 2);
    nnt_bpe_free(b);
    /* a repeated pair keeps its later rank; CRLF lines; no final newline; no #version */
    b = load_strings(EXTRA_HELLO, 0, "a b\r\nb c\r\na b");
    EXPECT_IDS(b, "abc", 'a', 264);
    ck_assert_uint_eq(nnt_bpe_merge_count(b), 2);
    nnt_bpe_free(b);
    /* no merges at all: one id per byte */
    b = load_strings("", 0, "");
    EXPECT_IDS(b, "hi there", 'h', 'i', ' ', 't', 'h', 'e', 'r', 'e'); /* id = byte here */
    nnt_bpe_free(b);
}
END_TEST

/* Ids of the byte tokens in the fixture vocabulary, for texts HF cannot encode. */
START_TEST(test_invalid_utf8)
{
    nnt_bpe *b = load_fixture();
    int32_t bid[256];
    for (unsigned x = 0; x < 256; x++) {
        char c[2];
        size_t k = byte_char(x, c);
        bid[x] = nnt_bpe_token_id(b, c, k);
        ck_assert_int_ge(bid[x], 0);
    }
    /* an invalid byte between letters is a piece of its own: ids = enc(a) + [byte] + enc(b) */
    static const char *bad[] = {"\xff", "\xc3", "\x80", "\xc0\xaf", "\xed\xa0\x80",
                                "\xf4\x90\x80\x80", "\xf8"};
    for (size_t t = 0; t < sizeof bad / sizeof bad[0]; t++) {
        char text[64];
        size_t bl = strlen(bad[t]);
        snprintf(text, sizeof text, "hello%sworld", bad[t]);
        size_t n, n1, n2;
        int32_t *ids = enc(b, text, strlen(text), &n);
        int32_t *a = enc(b, "hello", 5, &n1), *c = enc(b, "world", 5, &n2);
        if (bl == 1) {
            ck_assert_uint_eq(n, n1 + 1 + n2);
            ck_assert_int_eq(ids[n1], bid[(unsigned char)bad[t][0]]);
        }
        ck_assert_int_eq(memcmp(ids, a, n1 * sizeof *a), 0);
        ck_assert_int_eq(memcmp(ids + n - n2, c, n2 * sizeof *c), 0);
        check_roundtrip(b, ids, n, text, strlen(text), "invalid UTF-8");
        free(ids);
        free(a);
        free(c);
    }
    /* a truncated sequence at the very end, and NUL bytes */
    static const char nul[] = "a\0b \0\0 c\xe2\x82";
    size_t n;
    int32_t *ids = enc(b, nul, sizeof nul - 1, &n);
    check_roundtrip(b, ids, n, nul, sizeof nul - 1, "NUL bytes");
    free(ids);
    nnt_bpe_free(b);
}
END_TEST

START_TEST(test_buffers_and_flags)
{
    nnt_bpe *b = load_fixture();
    const char *s = "Hello, world! It's a test.";
    size_t len = strlen(s), n = 0, n2 = 0;
    int32_t *full = enc(b, s, len, &n);
    ck_assert_uint_gt(n, 3);
    /* sizing call and a short buffer: every id counted, the first cap stored */
    ck_assert_int_eq(nnt_bpe_encode(b, s, len, NULL, 0, &n2, err, sizeof err), NNT_E_INVAL);
    ck_assert_uint_eq(n2, n);
    ck_assert_ptr_nonnull(strstr(err, "do not fit"));
    int32_t part[3] = {-7, -7, -7};
    ck_assert_int_eq(nnt_bpe_encode(b, s, len, part, 2, &n2, err, sizeof err), NNT_E_INVAL);
    ck_assert_uint_eq(n2, n);
    ck_assert(part[0] == full[0] && part[1] == full[1] && part[2] == -7);
    /* empty text */
    ck_assert_int_eq(nnt_bpe_encode(b, NULL, 0, NULL, 0, &n2, err, sizeof err), 0);
    ck_assert_uint_eq(n2, 0);
    /* bad arguments */
    ck_assert_int_eq(nnt_bpe_encode(NULL, s, len, part, 3, &n2, err, sizeof err), NNT_E_INVAL);
    ck_assert_int_eq(nnt_bpe_encode(b, NULL, 3, part, 3, &n2, err, sizeof err), NNT_E_INVAL);
    ck_assert_int_eq(nnt_bpe_encode(b, s, len, part, 3, NULL, err, sizeof err), NNT_E_INVAL);
    ck_assert_int_eq(nnt_bpe_encode_ex(b, s, len, 2, part, 3, &n2, err, sizeof err),
                     NNT_E_INVAL);

    /* decode: sizing, short buffer (nothing written), bad ids */
    size_t bl = 0;
    ck_assert_int_eq(nnt_bpe_decode(b, full, n, NULL, 0, &bl, err, sizeof err), NNT_E_INVAL);
    ck_assert_uint_eq(bl, len);
    char buf[64];
    memset(buf, 'x', sizeof buf);
    ck_assert_int_eq(nnt_bpe_decode(b, full, n, buf, len - 1, &bl, err, sizeof err),
                     NNT_E_INVAL);
    ck_assert_int_eq(buf[0], 'x');
    ck_assert_int_eq(nnt_bpe_decode(b, full, n, buf, len, &bl, err, sizeof err), 0);
    ck_assert_int_eq(memcmp(buf, s, len), 0);
    int32_t badid[3] = {full[0], 973, full[1]};
    ck_assert_int_eq(nnt_bpe_decode(b, badid, 3, buf, sizeof buf, &bl, err, sizeof err),
                     NNT_E_INVAL);
    ck_assert_ptr_nonnull(strstr(err, "id 973 at position 1"));
    badid[1] = -1;
    ck_assert_int_eq(nnt_bpe_decode(b, badid, 3, buf, sizeof buf, &bl, err, sizeof err),
                     NNT_E_INVAL);
    ck_assert_int_eq(nnt_bpe_decode(b, NULL, 0, NULL, 0, &bl, err, sizeof err), 0);
    ck_assert_uint_eq(bl, 0);
    free(full);

    /* the special token, and NNT_BPE_NO_SPECIAL: "<|" "endoftext" "|>" as text */
    const char *t = "a<|endoftext|>b";
    int32_t ids[32], ids2[32];
    ck_assert_int_eq(nnt_bpe_encode(b, t, strlen(t), ids, 32, &n, err, sizeof err), 0);
    ck_assert_uint_eq(n, 3);
    ck_assert_int_eq(ids[1], 972);
    ck_assert_int_eq(nnt_bpe_encode_ex(b, t, strlen(t), NNT_BPE_NO_SPECIAL, ids2, 32, &n2, err,
                                       sizeof err), 0);
    ck_assert_uint_gt(n2, 3);
    size_t k = 0, m;
    int32_t *piece;
    const char *parts[] = {"a", "<|", "endoftext", "|>", "b"};
    for (size_t i = 0; i < 5; i++) {
        piece = enc(b, parts[i], strlen(parts[i]), &m);
        ck_assert_int_eq(memcmp(ids2 + k, piece, m * sizeof *piece), 0);
        k += m;
        free(piece);
    }
    ck_assert_uint_eq(k, n2);
    ck_assert_int_eq(nnt_bpe_decode(b, ids, n, buf, sizeof buf, &bl, err, sizeof err), 0);
    ck_assert_uint_eq(bl, strlen(t));
    ck_assert_int_eq(memcmp(buf, t, bl), 0);
    nnt_bpe_free(b);
}
END_TEST

/* ---- corrupt files -------------------------------------------------------------------------- */

typedef struct {
    const char *vocab;             /* NULL: the 256 byte tokens + EXTRA_HELLO                */
    const char *merges;
    const char *want;              /* a piece of the message                                */
} bad_case;

START_TEST(test_corrupt)
{
    static const bad_case cases[] = {
        {"[]", "", "expected '{'"},
        {"", "", "expected '{'"},
        {"{\"a\": 0", "", "expected '}' or ','"},
        {"{\"a\": -1}", "", "negative"},
        {"{\"a\": 1.5}", "", "not an integer"},
        {"{\"a\": \"1\"}", "", "non-negative integer"},
        {"{\"a\": 4194304}", "", "is not below 4194304"},
        {"{\"a\": 99999999999999999999}", "", "64 bits"},
        {"{\"\": 0}", "", "empty token"},
        {"{\"a\": 0, \"a\": 1}", "", "duplicate token \"a\""},
        {"{\"a\": 0, \"b\": 0}", "", "id 0 of token \"b\" is already the id of \"a\""},
        {"{\"a\": 0} x", "", "at byte 9"},
        {"{\"a\xff\": 0}", "", "invalid UTF-8"},
        {"{\"a\x01\": 0}", "", "control character"},
        {"{\"\\ud800\": 0}", "", "surrogate"},
        {"{\"\\q\": 0}", "", "bad escape"},
        {"{\"a\" 0}", "", "expected ':'"},
        {"{\"a\": 0}", "", "no token for byte 0x00"},
        {"{}", "", "no token for byte 0x00"},
        {NULL, "h e\nxyz w\n", "line 2: token \"xyz\" is not in the vocabulary"},
        {NULL, "h e\nhe\n", "line 2: \"he\" is not two tokens"},
        {NULL, "h  e\n", "line 1: \"h  e\" is not two tokens"},
        {NULL, " h\n", "line 1"},
        {NULL, "h \n", "line 1"},
        {NULL, "h e\n\nl l\n", "line 2: empty line"},
        {NULL, "#version: 0.2\nh e\nq\xc4\xa0 w\n", "line 3: token \"q\\xc4\\xa0\""},
        {NULL, "h e\nh l\n", "line 2: the merged token \"hl\" is not in the vocabulary"},
        {NULL, "\xef\xbb\xbf#version: 0.2\nh e\n", "line 1"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        size_t vl;
        char *v = cases[i].vocab ? strdup(cases[i].vocab) : byte_vocab(EXTRA_HELLO, 0, &vl);
        if (cases[i].vocab)
            vl = strlen(v);
        nnt_bpe *b = (nnt_bpe *)&err;
        err[0] = 0;
        int rc = nnt_bpe_load_mem(v, vl, cases[i].merges, strlen(cases[i].merges), &b, err,
                                  sizeof err);
        const char *want = cases[i].want;
        ck_assert_msg(rc == NNT_E_FORMAT, "case %zu: rc %d (%s)", i, rc, err);
        ck_assert_ptr_null(b);
        ck_assert_msg(strstr(err, want) != NULL, "case %zu: message \"%s\" lacks \"%s\"", i, err,
                      want);
        ck_assert_msg(strstr(err, cases[i].vocab ? "vocab.json" : "merges.txt") != NULL,
                      "case %zu: message \"%s\" does not name the file", i, err);
        free(v);
    }
    /* a token longer than NNT_BPE_MAXTOKEN */
    size_t big = NNT_BPE_MAXTOKEN + 1;
    char *v = malloc(big + 16);
    v[0] = '{';
    v[1] = '"';
    memset(v + 2, 'a', big);
    strcpy(v + 2 + big, "\": 0}");
    nnt_bpe *b = NULL;
    ck_assert_int_eq(nnt_bpe_load_mem(v, strlen(v), "", 0, &b, err, sizeof err), NNT_E_FORMAT);
    ck_assert_ptr_nonnull(strstr(err, "longer than 4096 bytes"));
    free(v);
    ck_assert_int_eq(nnt_bpe_load_mem(NULL, 3, "", 0, &b, err, sizeof err), NNT_E_INVAL);
}
END_TEST

/* Random mutations of a valid pair of files: loading fails cleanly or gives a tokenizer that
 * round-trips; never a crash (the suite runs under the sanitizers in CI builds too). */
START_TEST(test_mutations)
{
    size_t vl;
    char *v0 = byte_vocab(EXTRA_HELLO ", \"<|endoftext|>\": 300", 1, &vl);
    const char *m0 = "#version: 0.2\nh e\nl l\nhe ll\nhell o\n\xc4\xa0 w\no r\n\xc4\xa0w or\na b\n";
    size_t ml = strlen(m0);
    char *v = malloc(vl + 1), *m = malloc(ml + 1);
    unsigned long long st = 0x9e3779b97f4a7c15ull;
    int loaded = 0;
    static const char sample[] = "hello world <|endoftext|> abc\xff '";
    for (int it = 0; it < 3000; it++) {
        memcpy(v, v0, vl);
        memcpy(m, m0, ml);
        size_t cv = vl, cm = ml;
        int k = 1 + (int)(test_rand(&st) * 3);
        for (int j = 0; j < k; j++) {
            int in_vocab = test_rand(&st) < 0.5;
            char *p = in_vocab ? v : m;
            size_t *c = in_vocab ? &cv : &cm;
            double r = test_rand(&st);
            if (*c == 0)
                continue;
            size_t at = (size_t)(test_rand(&st) * (double)*c);
            if (r < 0.6)
                p[at] = (char)(test_rand(&st) * 256);
            else if (r < 0.8)
                *c = at; /* truncate */
            else
                p[at] = "\"\\{}:, \n0u"[(int)(test_rand(&st) * 10)];
        }
        nnt_bpe *b = NULL;
        int rc = nnt_bpe_load_mem(v, cv, m, cm, &b, err, sizeof err);
        ck_assert_msg(rc == 0 || rc == NNT_E_FORMAT, "iteration %d: rc %d (%s)", it, rc, err);
        if (rc == 0) {
            loaded++;
            size_t n;
            int32_t *ids = enc(b, sample, sizeof sample - 1, &n);
            check_roundtrip(b, ids, n, sample, sizeof sample - 1, "mutated tokenizer");
            free(ids);
            nnt_bpe_free(b);
        } else {
            ck_assert_ptr_null(b);
            ck_assert_uint_gt(strlen(err), 0);
        }
    }
    printf("test_bpe: 3000 mutated tokenizers, %d still valid\n", loaded);
    free(v);
    free(m);
    free(v0);
}
END_TEST

/* ---- long inputs and speed ----------------------------------------------------------------- */

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

START_TEST(test_long_inputs)
{
    nnt_bpe *b = load_fixture();
    /* single pre-tokens of 1 MiB (letters, spaces, digits, CJK), random bytes */
    size_t len = 1 << 20;
    char *s = malloc(len);
    const char *fills[] = {"a", " ", "7", "\xe4\xb8\xad", "\xc3\xa9", "ab",
                           "thequickbrownfox"};
    for (size_t f = 0; f <= sizeof fills / sizeof fills[0]; f++) {
        unsigned long long st = 12345 + f;
        if (f < sizeof fills / sizeof fills[0]) {
            size_t k = strlen(fills[f]);
            for (size_t i = 0; i < len; i++)
                s[i] = fills[f][i % k];
        } else {
            for (size_t i = 0; i < len; i++)
                s[i] = (char)(test_rand(&st) * 256);
        }
        double t0 = now();
        size_t n;
        int32_t *ids = enc(b, s, len, &n);
        double t1 = now();
        check_roundtrip(b, ids, n, s, len, "long input");
        printf("test_bpe: 1 MiB of %s: %zu ids in %.3f s\n",
               f < sizeof fills / sizeof fills[0] ? fills[f] : "random bytes", n, t1 - t0);
        ck_assert(t1 - t0 < 20.0);
        free(ids);
    }
    free(s);

    /* throughput on text: the corpus case (the last line of cases.txt) repeated to 4 MiB */
    char path[1100];
    snprintf(path, sizeof path, "%s/cases.txt", fixture_dir());
    size_t flen;
    char *f = read_all(path, &flen);
    ck_assert(flen > 1);
    char *last = f + flen - 1;
    *last = 0;
    char *start = strrchr(f, '\n') + 1;
    size_t hl = (size_t)(strchr(start, '|') - start), cl = hl / 2;
    len = 4u << 20;
    s = malloc(len);
    for (size_t i = 0; i < cl; i++)
        s[i] = (char)(hexval(start[2 * i]) << 4 | hexval(start[2 * i + 1]));
    for (size_t i = cl; i < len; i++)
        s[i] = s[i % cl];
    double t0 = now();
    size_t n;
    int32_t *ids = enc(b, s, len, &n);
    double t1 = now();
    check_roundtrip(b, ids, n, s, len, "4 MiB of text");
    printf("test_bpe: 4 MiB of text: %zu ids in %.3f s (%.1f MB/s)\n", n, t1 - t0,
           (double)len / 1e6 / (t1 - t0));
    free(ids);
    free(s);
    free(f);
    nnt_bpe_free(b);
}
END_TEST

/* Random texts from pieces the pre-tokenizer treats specially: round trip, n <= bytes, and
 * encoding is a function of the pieces between special tokens. */
START_TEST(test_random_roundtrip)
{
    nnt_bpe *b = load_fixture();
    static const char *pool[] = {"a", "Z", "the", " ", "  ", "\n", "\t", "\r\n", "'", "'s",
                                 "'ll", "7", "42", ".", "!?", "\xc3\xa9", "\xc3\x9f",
                                 "\xd0\x96", "\xe4\xb8\xad", "\xf0\x9f\x98\x80", "\xc2\xa0",
                                 "\xe3\x80\x80", "\xcc\x81", "\xc2\xb2", "\xff", "\x80",
                                 "<|endoftext|>", "<|", "\0"};
    const size_t np = sizeof pool / sizeof pool[0];
    unsigned long long st = 777;
    char s[512];
    for (int it = 0; it < 2000; it++) {
        size_t len = 0;
        int k = (int)(test_rand(&st) * 40);
        for (int j = 0; j < k; j++) {
            size_t p = (size_t)(test_rand(&st) * (double)np);
            size_t pl = p == np - 1 ? 1 : strlen(pool[p]);
            memcpy(s + len, pool[p], pl);
            len += pl;
        }
        size_t n;
        int32_t *ids = enc(b, s, len, &n);
        check_roundtrip(b, ids, n, s, len, "random text");
        free(ids);
    }
    nnt_bpe_free(b);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("bpe");
    TCase *tc = tcase_create("bpe");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, test_hf_cases);
    tcase_add_test(tc, test_load_paths);
    tcase_add_test(tc, test_merge_order);
    tcase_add_test(tc, test_invalid_utf8);
    tcase_add_test(tc, test_buffers_and_flags);
    tcase_add_test(tc, test_corrupt);
    tcase_add_test(tc, test_mutations);
    tcase_add_test(tc, test_random_roundtrip);
    tcase_add_test(tc, test_long_inputs);
    suite_add_tcase(s, tc);
    return run_suite(s);
}
