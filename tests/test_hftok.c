/* SPDX-License-Identifier: MIT */
/* Hugging Face tokenizer.json through the public API (nnt_tokenizer_hf_load): every case of
 * tests/fixtures/hftok/KIND.cases (ids and decodes computed by the `tokenizers` package, see
 * tests/gen_hftok_fixtures.py; KIND gemma: Gemma's layout, byte fallback included) gives the
 * same ids and the same decode; refusals name the key and value; NULL and empty input; token
 * data read through nnt_data; a large file loads. */
#include "testutil.h"

#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static const char *kinds[] = {"gpt2", "llama3", "smollm", "llama2", "metaspace", "qwen",
                              "gemma"};

static void fixture_path(char *out, size_t n, const char *kind, const char *ext)
{
    const char *top = getenv("top_srcdir");
    snprintf(out, n, "%s/tests/fixtures/hftok/%s.%s", top && *top ? top : ".", kind, ext);
}

static nnt_tokenizer *load_kind(const char *kind)
{
    char path[1024];
    nnt_tokenizer *tok = NULL;
    fixture_path(path, sizeof path, kind, "json");
    EXPECT_OK(nnt_tokenizer_hf_load(path, &tok));
    return tok;
}

static size_t unhex(const char *h, size_t n, char *out)
{
    size_t k = 0;
    for (size_t i = 0; i + 1 < n; i += 2) {
        unsigned v;
        sscanf(h + i, "%2x", &v);
        out[k++] = (char)v;
    }
    return k;
}

static char *slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    ck_assert_msg(f != NULL, "cannot open %s", path);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = malloc((size_t)n + 1);
    ck_assert_int_eq(fread(buf, 1, (size_t)n, f), (size_t)n);
    buf[n] = 0;
    fclose(f);
    *len = (size_t)n;
    return buf;
}

/* Encode and decode every case of one kind; returns the number of cases. */
static size_t check_kind(const char *kind)
{
    char path[1024], line[1 << 16], text[1 << 15], want_dec[1 << 15], got_dec[1 << 16];
    int32_t want[1 << 13], got[1 << 13];
    nnt_tokenizer *tok = load_kind(kind);
    fixture_path(path, sizeof path, kind, "cases");
    FILE *f = fopen(path, "r");
    ck_assert_msg(f != NULL, "cannot open %s", path);
    size_t ncase = 0, bad_ids = 0, bad_dec = 0;
    while (fgets(line, sizeof line, f)) {
        char *t1 = strchr(line, '\t'), *t2 = t1 ? strchr(t1 + 1, '\t') : NULL;
        ck_assert_msg(t2 != NULL, "%s: malformed line %zu", path, ncase + 1);
        size_t len = unhex(line, (size_t)(t1 - line), text);
        size_t nwant = 0;
        for (char *p = t1 + 1; p < t2;) {
            char *end;
            long v = strtol(p, &end, 10);
            if (end == p)
                break;
            want[nwant++] = (int32_t)v;
            p = end;
        }
        int check_dec = t2[1] != '-'; /* "-": invalid UTF-8 in a kind that cannot give it back */
        size_t dlen = unhex(t2 + 1, strcspn(t2 + 1, "\n"), want_dec);
        size_t n = 0, glen = 0;
        EXPECT_OK(nnt_tokenizer_encode(tok, text, len, got, sizeof got / sizeof *got, &n));
        if (n != nwant || memcmp(got, want, n * sizeof *got) != 0) {
            if (bad_ids++ < 5) {
                fprintf(stderr, "%s case %zu: '%.*s': %zu ids, want %zu:", kind, ncase + 1,
                        (int)len, text, n, nwant);
                for (size_t i = 0; i < n && i < 24; i++)
                    fprintf(stderr, " %d%s", got[i], i < nwant && got[i] == want[i] ? "" : "*");
                fprintf(stderr, "\n  want:");
                for (size_t i = 0; i < nwant && i < 24; i++)
                    fprintf(stderr, " %d", want[i]);
                fprintf(stderr, "\n");
            }
        }
        EXPECT_OK(nnt_tokenizer_decode(tok, want, nwant, got_dec, sizeof got_dec, &glen));
        if (check_dec && (glen != dlen || memcmp(got_dec, want_dec, dlen) != 0)) {
            if (bad_dec++ < 5)
                fprintf(stderr, "%s case %zu: decode '%.*s', want '%.*s'\n", kind, ncase + 1,
                        (int)glen, got_dec, (int)dlen, want_dec);
        }
        ncase++;
    }
    fclose(f);
    nnt_tokenizer_destroy(tok);
    ck_assert_msg(bad_ids == 0 && bad_dec == 0, "%s: %zu of %zu cases with other ids, %zu with "
                  "another decode", kind, bad_ids, ncase, bad_dec);
    return ncase;
}

START_TEST(test_fixture_cases)
{
    size_t n = check_kind(kinds[_i]);
    ck_assert_uint_ge(n, 1000);
}
END_TEST

/* A fixture file with one substring replaced, written to the temporary directory. */
static const char *variant(const char *kind, const char *from, const char *to)
{
    static char out[1100];
    char path[1024];
    size_t len;
    fixture_path(path, sizeof path, kind, "json");
    char *buf = slurp(path, &len);
    char *hit = strstr(buf, from);
    ck_assert_msg(hit != NULL, "'%s' not in %s", from, path);
    snprintf(out, sizeof out, "%s/tokenizer.json", test_tmpdir());
    FILE *f = fopen(out, "wb");
    fwrite(buf, 1, (size_t)(hit - buf), f);
    fputs(to, f);
    fputs(hit + strlen(from), f);
    fclose(f);
    free(buf);
    return out;
}

static void expect_refused(const char *kind, const char *from, const char *to, int rc,
                           const char *m1, const char *m2)
{
    nnt_tokenizer *tok = (nnt_tokenizer *)1;
    const char *path = variant(kind, from, to);
    EXPECT_FAIL_MSG(nnt_tokenizer_hf_load(path, &tok), rc, "nnt_tokenizer_hf_load");
    ck_assert_ptr_null(tok);
    const char *msg = nnt_ctx_last_error(NULL);
    ck_assert_msg(strstr(msg, path) && strstr(msg, m1) && (!m2 || strstr(msg, m2)),
                  "message '%s' does not name %s, %s and %s", msg, path, m1, m2 ? m2 : "");
}

START_TEST(test_refusals)
{
    test_make_tmpdir("hftok");
    int U = NNT_E_UNSUPPORTED, F = NNT_E_FORMAT;
    expect_refused("gpt2", "\"type\":\"BPE\"", "\"type\":\"WordPiece\"", U, "model.type",
                   "\"WordPiece\"");
    expect_refused("gpt2", "\"normalizer\":null", "\"normalizer\":{\"type\":\"BertNormalizer\"}", U,
                   "normalizer.type", "\"BertNormalizer\"");
    expect_refused("gpt2", "\"post_processor\":null", "\"post_processor\":{\"type\":\"Foo\"}",
                   U, "post_processor.type", "\"Foo\"");
    expect_refused("gpt2", "\"decoder\":{\"type\":\"ByteLevel\"",
                   "\"decoder\":{\"type\":\"WordPiece\"", U, "decoder.type", "\"WordPiece\"");
    expect_refused("llama3", "\"invert\":false", "\"invert\":true", U,
                   "pre_tokenizer.pretokenizers[0].invert", "\"true\"");
    expect_refused("llama3", "{\"type\":\"ByteLevel\",\"add_prefix_space\"",
                   "{\"type\":\"Whitespace\",\"add_prefix_space\"", U,
                   "pre_tokenizer.pretokenizers[1].type", "\"Whitespace\"");
    expect_refused("llama3", "\"behavior\":\"Isolated\"", "\"behavior\":\"Sideways\"", U,
                   "behavior", "\"Sideways\"");
    expect_refused("gpt2", "\"lstrip\":false", "\"lstrip\":true", U, "added_tokens[0].lstrip",
                   NULL);
    expect_refused("gpt2", "\"dropout\":null", "\"dropout\":0.1", U, "model.dropout", "0.1");
    expect_refused("llama3", "(?i:", "(?i", U, "PCRE2", "pattern");
    expect_refused("llama2", "{\"type\":\"Replace\",\"pattern\":{\"String\"",
                   "{\"type\":\"Replace\",\"pattern\":{\"Regex\"", U, "normalizer.normalizers[1]"
                   ".pattern", "Regex");
    /* malformed or inconsistent: NNT_E_FORMAT naming the file (and where) */
    expect_refused("gpt2", "\"version\":\"1.0\"", "\"version\":1.0.0", F, "at byte", NULL);
    expect_refused("gpt2", "\"merges\":[", "\"merges\":[[\"nonexistent\",\"x\"],", F,
                   "model.merges[0]", "nonexistent");
    expect_refused("gpt2", "\"model\":{", "\"modelx\":{", F, "model", "missing");
    expect_refused("llama2", "\"unk_token\":\"<unk>\"", "\"unk_token\":\"<nope>\"", F,
                   "model.unk_token", NULL);
    expect_refused("gpt2", "\"vocab\":{", "\"vocab\":{\"zz\":3,", F, "model.vocab id 3", NULL);
    /* a truncated file */
    char path[1024];
    size_t len;
    fixture_path(path, sizeof path, "gpt2", "json");
    char *buf = slurp(path, &len);
    char tpath[1100];
    snprintf(tpath, sizeof tpath, "%s/truncated.json", test_tmpdir());
    FILE *f = fopen(tpath, "wb");
    fwrite(buf, 1, len / 2, f);
    fclose(f);
    free(buf);
    nnt_tokenizer *tok = NULL;
    EXPECT_FAIL_MSG(nnt_tokenizer_hf_load(tpath, &tok), F, tpath);
    /* a directory: its tokenizer.json (the last variant written) */
    EXPECT_FAIL_MSG(nnt_tokenizer_hf_load(test_tmpdir(), &tok), F, "tokenizer.json");
    snprintf(tpath, sizeof tpath, "%s/missing.json", test_tmpdir());
    EXPECT_FAIL_MSG(nnt_tokenizer_hf_load(tpath, &tok), NNT_E_IO, tpath);
    char dir[1100];
    snprintf(dir, sizeof dir, "%s/empty", test_tmpdir());
    ck_assert_int_eq(mkdir(dir, 0755), 0);
    EXPECT_FAIL_MSG(nnt_tokenizer_hf_load(dir, &tok), NNT_E_IO, "empty/tokenizer.json");
    test_remove_tmpdir();
}
END_TEST

START_TEST(test_null_and_empty)
{
    nnt_tokenizer *tok = NULL;
    EXPECT_FAIL_MSG(nnt_tokenizer_hf_load(NULL, &tok), NNT_E_INVAL, "nnt_tokenizer_hf_load");
    char path[1024];
    fixture_path(path, sizeof path, "llama3", "json");
    EXPECT_FAIL_MSG(nnt_tokenizer_hf_load(path, NULL), NNT_E_INVAL, "nnt_tokenizer_hf_load");
    tok = load_kind("llama3");
    int64_t vocab = 0;
    EXPECT_OK(nnt_tokenizer_vocab_size(tok, &vocab));
    ck_assert_int_eq(vocab, 1201); /* 1200 trained + "nnt_added" */
    int32_t ids[64];
    size_t n = 99, len = 99;
    EXPECT_OK(nnt_tokenizer_encode(tok, NULL, 0, ids, 64, &n));
    ck_assert_uint_eq(n, 0);
    EXPECT_OK(nnt_tokenizer_encode(tok, "", 0, NULL, 0, &n));
    ck_assert_uint_eq(n, 0);
    char text[64];
    EXPECT_OK(nnt_tokenizer_decode(tok, NULL, 0, text, sizeof text, &len));
    ck_assert_uint_eq(len, 0);
    ck_assert_str_eq(text, "");
    /* counting, a buffer too small, bad ids */
    const char *s = "Hello <|eot_id|> world 12345";
    EXPECT_OK(nnt_tokenizer_encode(tok, s, strlen(s), NULL, 0, &n));
    size_t all = n;
    ck_assert_uint_ge(all, 5);
    EXPECT_FAIL_MSG(nnt_tokenizer_encode(tok, s, strlen(s), ids, 2, &n), NNT_E_INVAL,
                    "nnt_tokenizer_encode");
    ck_assert_uint_eq(n, all);
    EXPECT_OK(nnt_tokenizer_encode(tok, s, strlen(s), ids, 64, &n));
    size_t eot = 0;
    for (size_t i = 0; i < n; i++)
        eot += ids[i] == 2;
    ck_assert_uint_eq(eot, 1); /* <|eot_id|> kept whole */
    EXPECT_FAIL_MSG(nnt_tokenizer_decode(tok, ids, n, text, 4, &len), NNT_E_INVAL,
                    "nnt_tokenizer_decode");
    ck_assert_uint_eq(len, strlen(s) + 1);
    EXPECT_OK(nnt_tokenizer_decode(tok, ids, n, text, sizeof text, &len));
    ck_assert_str_eq(text, s);
    int32_t badid[2] = {5, 1201};
    EXPECT_FAIL_MSG(nnt_tokenizer_decode(tok, badid, 2, text, sizeof text, &len), NNT_E_INVAL,
                    "position 1");
    nnt_tokenizer_destroy(tok);
}
END_TEST

/* Invalid UTF-8: a byte token when there is one (checked on the fixtures), else an error
 * naming the offset. */
START_TEST(test_invalid_utf8_without_byte_tokens)
{
    test_make_tmpdir("hftok");
    const char *path = variant("metaspace", "\"byte_fallback\":true", "\"byte_fallback\":false");
    nnt_tokenizer *tok = NULL;
    EXPECT_OK(nnt_tokenizer_hf_load(path, &tok));
    int32_t ids[16];
    size_t n;
    EXPECT_OK(nnt_tokenizer_encode(tok, "ab", 2, ids, 16, &n));
    nnt_tokenizer *again = NULL;
    EXPECT_OK(nnt_tokenizer_hf_load(test_tmpdir(), &again)); /* the directory's tokenizer.json */
    nnt_tokenizer_destroy(again);
    EXPECT_FAIL_MSG(nnt_tokenizer_encode(tok, "ab\xff", 3, ids, 16, &n), NNT_E_INVAL,
                    "offset 2");
    EXPECT_FAIL_MSG(nnt_tokenizer_encode(tok, "ab\xff", 3, NULL, 0, &n), NNT_E_INVAL,
                    "0xff");
    nnt_tokenizer_destroy(tok);
    test_remove_tmpdir();
}
END_TEST

/* ignore_merges: a pre-token that is a token is taken whole, even when the merges would not
 * reach it; no decoder: tokens joined with spaces. Expected values printed by the package. */
START_TEST(test_ignore_merges)
{
    test_make_tmpdir("hftok");
    char path[1100];
    snprintf(path, sizeof path, "%s/tokenizer.json", test_tmpdir());
    for (int im = 0; im < 2; im++) {
        FILE *f = fopen(path, "wb");
        fprintf(f, "{\"version\":\"1.0\",\"added_tokens\":[],\"normalizer\":null,"
                "\"pre_tokenizer\":null,\"post_processor\":null,\"decoder\":null,\"model\":"
                "{\"type\":\"BPE\",\"ignore_merges\":%s,\"vocab\":{\"a\":0,\"b\":1,\"c\":2,"
                "\"ab\":3,\"bc\":4,\"abc\":5},\"merges\":[\"b c\",\"a b\"]}}",
                im ? "true" : "false");
        fclose(f);
        nnt_tokenizer *tok = NULL;
        EXPECT_OK(nnt_tokenizer_hf_load(path, &tok));
        int32_t ids[8];
        size_t n, len;
        char text[32];
        EXPECT_OK(nnt_tokenizer_encode(tok, "abc", 3, ids, 8, &n));
        if (im) {
            ck_assert_uint_eq(n, 1);
            ck_assert_int_eq(ids[0], 5);
        } else {
            ck_assert_uint_eq(n, 2);
            ck_assert_int_eq(ids[0], 0);
            ck_assert_int_eq(ids[1], 4);
        }
        EXPECT_OK(nnt_tokenizer_encode(tok, "abcabc", 6, ids, 8, &n));
        ck_assert_uint_eq(n, 4);
        EXPECT_OK(nnt_tokenizer_decode(tok, ids, n, text, sizeof text, &len));
        ck_assert_str_eq(text, "a bc a bc");
        nnt_tokenizer_destroy(tok);
    }
    test_remove_tmpdir();
}
END_TEST

/* nnt_data reads text through the tokenizer: the same ids as encode. */
START_TEST(test_data_text)
{
    test_make_tmpdir("hftok");
    char path[1100];
    snprintf(path, sizeof path, "%s/corpus.txt", test_tmpdir());
    const char *s = "Ελληνικά and English<|end_of_text|> 2024\r\n🙂 tabs\there.\n";
    FILE *f = fopen(path, "wb");
    fputs(s, f);
    fclose(f);
    nnt_tokenizer *tok = load_kind("llama3");
    int32_t want[128], got[128];
    size_t n;
    EXPECT_OK(nnt_tokenizer_encode(tok, s, strlen(s), want, 128, &n));
    nnt_data *d = NULL;
    EXPECT_OK(nnt_data_open(path, NNT_DATA_TEXT, tok, 1201, &d));
    nnt_tokenizer_destroy(tok);
    int64_t nt = 0;
    EXPECT_OK(nnt_data_num_tokens(d, &nt));
    ck_assert_int_eq(nt, (int64_t)n);
    EXPECT_OK(nnt_data_read(d, 0, got, (int64_t)n));
    ck_assert_mem_eq(got, want, n * sizeof *got);
    nnt_data_close(d);
    /* more ids than bytes: a Metaspace tokenizer prepends its word marker ("a" -> 2 ids) */
    const char *one = "a";
    f = fopen(path, "wb");
    fputs(one, f);
    fclose(f);
    tok = load_kind("metaspace");
    EXPECT_OK(nnt_tokenizer_encode(tok, one, 1, want, 128, &n));
    ck_assert_uint_gt(n, 1);
    EXPECT_OK(nnt_data_open(path, NNT_DATA_TEXT, tok, 0, &d));
    nnt_tokenizer_destroy(tok);
    EXPECT_OK(nnt_data_num_tokens(d, &nt));
    ck_assert_int_eq(nt, (int64_t)n);
    EXPECT_OK(nnt_data_read(d, 0, got, (int64_t)n));
    ck_assert_mem_eq(got, want, n * sizeof *got);
    nnt_data_close(d);
    test_remove_tmpdir();
}
END_TEST

/* A Llama-3-sized file (128k tokens, 280k merges) is written and loaded; the time is printed.
 * Tokens: "t<i>" (ids 0..NV-1), the added token NV, "0".."9", "00".."99", "000".."999", "t".
 * Merges: digits into 2- and 3-digit tokens, then "t<i/10>" + "<i%10>" -> "t<i>" and the
 * alternatives "t<i/100>" + "<i%100>" and "t<i/1000>" + "<i%1000>" (as Llama 3 has several
 * merges to one token), up to NM merges. */
enum { NV = 128000, NM = 280000 };

static int write_large(const char *path)
{
    FILE *f = fopen(path, "wb");
    int id = NV + 1, nm = 0;
    fputs("{\"version\":\"1.0\",\"added_tokens\":[{\"id\":128000,\"content\":"
          "\"<|begin_of_text|>\",\"single_word\":false,\"lstrip\":false,\"rstrip\":false,"
          "\"normalized\":false,\"special\":true}],\"normalizer\":null,\"pre_tokenizer\":null,"
          "\"post_processor\":null,\"decoder\":{\"type\":\"Fuse\"},\"model\":{\"type\":"
          "\"BPE\",\"dropout\":null,\"unk_token\":null,\"vocab\":{", f);
    for (int i = 0; i < NV; i++)
        fprintf(f, "\"t%d\":%d,", i, i);
    for (int d = 0; d < 10; d++)
        fprintf(f, "\"%d\":%d,", d, id++);
    for (int d = 0; d < 100; d++)
        fprintf(f, "\"%02d\":%d,", d, id++);
    for (int d = 0; d < 1000; d++)
        fprintf(f, "\"%03d\":%d,", d, id++);
    fprintf(f, "\"t\":%d},\"merges\":[", id++);
    for (int d = 0; d < 100; d++, nm++)
        fprintf(f, "%s\"%d %d\"", nm ? "," : "", d / 10, d % 10);
    for (int d = 0; d < 1000; d++, nm++)
        fprintf(f, ",[\"%02d\",\"%d\"]", d / 10, d % 10);
    for (int d = 1; d < 10; d++, nm++)
        fprintf(f, ",[\"t\",\"%d\"]", d);
    for (int i = 10; i < NV; i++, nm++)
        fprintf(f, ",[\"t%d\",\"%d\"]", i / 10, i % 10);
    for (int i = 100; i < NV && nm < NM; i++, nm++)
        fprintf(f, ",[\"t%d\",\"%02d\"]", i / 100, i % 100);
    for (int i = 1000; i < NV && nm < NM; i++, nm++)
        fprintf(f, ",[\"t%d\",\"%03d\"]", i / 1000, i % 1000);
    fputs("]}}", f);
    fclose(f);
    return nm;
}

START_TEST(test_large_load)
{
    test_make_tmpdir("hftok");
    char path[1100];
    snprintf(path, sizeof path, "%s/large.json", test_tmpdir());
    int nm = write_large(path);
    size_t len;
    free(slurp(path, &len));
    struct timespec a, b;
    nnt_tokenizer *tok = NULL;
    clock_gettime(CLOCK_MONOTONIC, &a);
    EXPECT_OK(nnt_tokenizer_hf_load(path, &tok));
    clock_gettime(CLOCK_MONOTONIC, &b);
    double s = (double)(b.tv_sec - a.tv_sec) + 1e-9 * (double)(b.tv_nsec - a.tv_nsec);
    fprintf(stderr, "test_hftok: loaded a %zu-byte tokenizer.json (%d tokens, %d merges) in "
            "%.3f s\n", len, NV + 1112, nm, s);
    ck_assert_int_ge(nm, NM);
    int64_t vocab = 0;
    EXPECT_OK(nnt_tokenizer_vocab_size(tok, &vocab));
    ck_assert_int_eq(vocab, NV + 1112);
    int32_t ids[8];
    size_t n;
    /* "00" merges (rank 0) before t+1, then 0+0... the lowest ranks win: t 1 2 3 4 5 ->
     * "12" "34" (digit pairs first) -> t + ... : the result must be one of the t<i> chains */
    EXPECT_OK(nnt_tokenizer_encode(tok, "t12345", 6, ids, 8, &n));
    char out[32];
    size_t olen;
    EXPECT_OK(nnt_tokenizer_decode(tok, ids, n, out, sizeof out, &olen));
    ck_assert_str_eq(out, "t12345");
    EXPECT_OK(nnt_tokenizer_encode(tok, "t7", 2, ids, 8, &n));
    ck_assert_uint_eq(n, 1);
    ck_assert_int_eq(ids[0], 7);
    nnt_tokenizer_destroy(tok);
    test_remove_tmpdir();
}
END_TEST

/* Truncated and corrupted files: a clean error or a working tokenizer, never a crash. */
START_TEST(test_mutations)
{
    test_make_tmpdir("hftok");
    char path[1024], tpath[1100];
    size_t len;
    fixture_path(path, sizeof path, _i ? "llama2" : "llama3", "json");
    char *buf = slurp(path, &len);
    snprintf(tpath, sizeof tpath, "%s/mutant.json", test_tmpdir());
    unsigned long long rng = 15;
    const char *text = "Hello, wörld 123 <|eot_id|> <s> ▁x \xff";
    for (int k = 0; k < 400; k++) {
        char *m = malloc(len);
        memcpy(m, buf, len);
        size_t mlen = len;
        if (k < 100) {
            mlen = (size_t)(test_rand(&rng) * (double)len);
        } else {
            static const char repl[] = "{}[]\",:0-9\\ \x80\xff" "a";
            for (int r = 0; r < 1 + k % 3; r++)
                m[(size_t)(test_rand(&rng) * (double)len)] =
                    repl[(size_t)(test_rand(&rng) * (sizeof repl - 1))];
        }
        FILE *f = fopen(tpath, "wb");
        fwrite(m, 1, mlen, f);
        fclose(f);
        free(m);
        nnt_tokenizer *tok = NULL;
        int rc = nnt_tokenizer_hf_load(tpath, &tok);
        ck_assert_msg(rc == 0 || rc == NNT_E_FORMAT || rc == NNT_E_UNSUPPORTED,
                      "mutant %d: rc %d (%s)", k, rc, nnt_ctx_last_error(NULL));
        if (rc) {
            ck_assert_msg(strstr(nnt_ctx_last_error(NULL), tpath) != NULL,
                          "mutant %d: message '%s' does not name the file", k,
                          nnt_ctx_last_error(NULL));
            continue;
        }
        int32_t ids[256];
        char out[1024];
        size_t n = 0, olen;
        rc = nnt_tokenizer_encode(tok, text, strlen(text), ids, 256, &n);
        ck_assert_msg(rc == 0 || rc == NNT_E_INVAL, "mutant %d: encode rc %d", k, rc);
        if (rc == 0)
            nnt_tokenizer_decode(tok, ids, n, out, sizeof out, &olen);
        nnt_tokenizer_destroy(tok);
    }
    free(buf);
    test_remove_tmpdir();
}
END_TEST

int main(void)
{
    Suite *s = suite_create("hftok");
    TCase *tc = tcase_create("hftok");
    tcase_set_timeout(tc, 300);
    tcase_add_loop_test(tc, test_fixture_cases, 0, (int)(sizeof kinds / sizeof *kinds));
    tcase_add_test(tc, test_refusals);
    tcase_add_test(tc, test_null_and_empty);
    tcase_add_test(tc, test_invalid_utf8_without_byte_tokens);
    tcase_add_test(tc, test_ignore_merges);
    tcase_add_test(tc, test_data_text);
    tcase_add_loop_test(tc, test_mutations, 0, 2);
    tcase_add_test(tc, test_large_load);
    suite_add_tcase(s, tc);
    return run_suite(s);
}
