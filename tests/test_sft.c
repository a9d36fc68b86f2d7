/* SPDX-License-Identifier: MIT */
/* Prompt/answer data with completion-only loss, against TRL 1.16 and transformers
 * (tests/fixtures/sft, tests/gen_sft_fixtures.py):
 *   encode   nnt_sft_encode of {"text"}, {"prompt", "completion"} and {"messages"} records
 *            gives SFTTrainer's input_ids, and its labels' targets (those not -100), with a
 *            ChatML (SmolLM2-style, default system message) and a Llama 3 tokenizer whose
 *            tokenizer_config.json names the template;
 *   loss     the records laid out in rows of T (nnt_token_writer_write_example, padded) and
 *            trained through nnt_trainer with accum 3 on micro-batches of 26, 9 and 19
 *            counted targets: the step's loss and every gradient equal transformers' with
 *            labels -100 and num_items_in_batch (not the mean of the micro-batches' means,
 *            2 % away), and the loss after one SGD step, for three tilings, and with the
 *            rows shuffled (the step's sum is the same whatever the grouping);
 *   format   the token file's extension (header, mask section, rows), packing, padding,
 *            cutting and refusing, read back through nnt_data;
 *   errors   broken records, an empty completion, a role the template does not know, a
 *            chat template nnt does not know;
 *   chat     the templates Qwen2.5, Qwen3, Llama 3.1 and 3.2, Gemma (Gemma 2), Gemma 3,
 *            Phi-3, Phi-3.5, Qwen3-Instruct-2507, DeepSeek-R1-Distill and gpt-oss
 *            publish (their exact text, from TRL's copies), recognised in
 *            tokenizer_config.json or chat_template.jinja: conversations (no system message,
 *            system first or later, several turns, white space trim removes, Unicode white
 *            space, think tags, reasoning_content) give SFTTrainer's input_ids and
 *            assistant-only labels; Llama 3.2's date today by default; tool calls and unknown
 *            keys refused; Gemma's turn rules; Gemma 3's contents as lists of text parts
 *            (images and other parts refused, and lists for the other templates);
 *            gpt-oss's dated system block, developer messages, thinking and its aliases,
 *            reasoning_effort and model_identity, channel tags refused;
 *   prompts  the conversations up to their last user message with the generation prompt
 *            (nnt_sft_encode_prompt) give apply_chat_template's ids, for every template;
 *   tools    records with tools, tool calls and tool responses (Qwen2.5, Qwen3,
 *            Qwen3-Instruct-2507, Llama 3.1 and 3.2, gpt-oss) give SFTTrainer's ids and
 *            labels, their prompts and prompt/completion forms too; the refusals; tojson
 *            against Python's json.dumps. */
#include "testutil.h"
#include "fixture_st.h"
#include "train/train.h"
#include "data/hftok_impl.h"

#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define T 64
#define B 2
#define ACCUM 3
#define NREC 6
/* The day the gpt-oss fixtures are dated (transformers' clock pinned to it) */
#define GPTOSS_DATE "2025-02-03"

/* Measured (AMD EPYC, Zen 3; worst over the tilings): loss rel 2.9e-8, gradients rel 2.1e-6,
 * loss after the update rel 1.6e-7. The wrong averaging (mean of means) is 2.1e-2 away. */
#define LOSS_TOL 3e-7
#define GRAD_TOL 2e-5
#define LOSS2_TOL 1.6e-6

static nnt_ctx *ctx;
static char dir[64];

static void setup(void)
{
    ctx = test_ctx();
    snprintf(dir, sizeof dir, "/tmp/test_sft-XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(dir));
}

static void teardown(void)
{
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    ck_assert_int_eq(system(cmd), 0);
    EXPECT_OK(nnt_ctx_destroy(ctx));
}

static const char *fixture(const char *name)
{
    static char path[2][4200];
    static int k;
    const char *top = getenv("top_srcdir");
    k ^= 1;
    snprintf(path[k], sizeof path[k], "%s/tests/fixtures/sft/%s", top ? top : ".", name);
    return path[k];
}

/* Line i (0-based) of a text file, without its newline, into buf. */
static void read_line(const char *path, int i, char *buf, size_t cap)
{
    FILE *f = fopen(path, "r");
    ck_assert_msg(f != NULL, "cannot open %s", path);
    for (int k = 0; k <= i; k++)
        ck_assert_msg(fgets(buf, (int)cap, f) != NULL, "%s has no line %d", path, i + 1);
    fclose(f);
    buf[strcspn(buf, "\n")] = '\0';
}

/* The numbers after the word of a "word n n n" line. */
static int parse_ints(const char *line, long *out, int cap)
{
    const char *p = strchr(line, ' ');
    int n = 0;
    while (p && *p) {
        char *end;
        long v = strtol(p, &end, 10);
        if (end == p)
            break;
        ck_assert_int_lt(n, cap);
        out[n++] = v;
        p = end;
    }
    return n;
}

static nnt_tokenizer *load_tokenizer(const char *name, char *cfg, size_t cap)
{
    char path[4300];
    snprintf(path, sizeof path, "%s/tokenizer.json", fixture(name));
    nnt_tokenizer *tok = NULL;
    EXPECT_OK(nnt_tokenizer_hf_load(path, &tok));
    snprintf(cfg, cap, "%s", fixture(name));   /* the directory: its tokenizer_config.json */
    return tok;
}

static nnt_sft *open_sft(const nnt_tokenizer *tok, const char *cfg, nnt_chat_template t)
{
    nnt_sft_options so = NNT_SFT_OPTIONS_INIT;
    so.tokenizer_config = cfg;
    so.chat_template = t;
    nnt_sft *s = NULL;
    EXPECT_OK(nnt_sft_create(tok, &so, &s));
    return s;
}

/* record refused by nnt_sft_encode (NNT_E_FORMAT), its message holding says */
static void expect_refused(nnt_sft *s, const char *record, const char *says)
{
    const int32_t *ids;
    const uint8_t *counts;
    size_t n = 0;
    int rc = nnt_sft_encode(s, record, strlen(record), &ids, &counts, &n);
    ck_assert_msg(rc == NNT_E_FORMAT, "%s: rc %d", record, rc);
    ck_assert_msg(strstr(nnt_ctx_last_error(NULL), says) != NULL, "%s: message '%s' does not "
                  "say '%s'", record, nnt_ctx_last_error(NULL), says);
}

/* Programs built against older releases pass the sizes nnt_sft_options had then (before
 * date, before assistant_only: 0.3's): accepted, whatever lies past the size not read (values
 * that would be refused), each record encoded as with the whole structure. */
static void expect_older_sizes(nnt_sft *s, const nnt_tokenizer *tok, const char *cfg)
{
    const size_t sizes[2] = {offsetof(nnt_sft_options, date),
                             offsetof(nnt_sft_options, assistant_only)};
    char line[8192];
    for (int k = 0; k < 2; k++) {
        nnt_sft_options so = NNT_SFT_OPTIONS_INIT;
        so.size = sizes[k], so.tokenizer_config = cfg, so.assistant_only = 3;
        if (k == 0)
            so.all_tokens = 7, so.no_thinking = 5;
        nnt_sft *old = NULL;
        EXPECT_OK(nnt_sft_create(tok, &so, &old));
        for (int r = 0; r < NREC; r++) {
            read_line(fixture("records.jsonl"), r, line, sizeof line);
            const int32_t *ids, *want;
            const uint8_t *counts, *want_counts;
            size_t n = 0, want_n = 0;
            EXPECT_OK(nnt_sft_encode(s, line, strlen(line), &want, &want_counts, &want_n));
            EXPECT_OK(nnt_sft_encode(old, line, strlen(line), &ids, &counts, &n));
            ck_assert_msg(n == want_n && !memcmp(ids, want, n * sizeof *ids) &&
                          !memcmp(counts, want_counts, n), "size %zu: record %d encoded "
                          "otherwise", sizes[k], r + 1);
        }
        nnt_sft_destroy(old);
    }
    nnt_sft_options so = NNT_SFT_OPTIONS_INIT;
    nnt_sft *none = NULL;
    so.size = offsetof(nnt_sft_options, all_tokens);   /* no release's */
    EXPECT_FAIL_MSG(nnt_sft_create(tok, &so, &none), NNT_E_INVAL, "options size");
}

/* _i: 0 chatml, 1 llama3 */
START_TEST(test_encode)
{
    const char *name = _i ? "llama3" : "chatml";
    char cfg[4300], line[8192], expected[4300];
    nnt_tokenizer *tok = load_tokenizer(name, cfg, sizeof cfg);
    nnt_sft *s = open_sft(tok, cfg, NNT_CHAT_AUTO);
    nnt_chat_template t;
    EXPECT_OK(nnt_sft_template_of(s, &t));
    ck_assert_int_eq(t, _i ? NNT_CHAT_LLAMA3 : NNT_CHAT_CHATML);
    snprintf(expected, sizeof expected, "%s.expected", fixture(name));
    for (int r = 0; r < NREC; r++) {
        long want_ids[256], labels[256];
        read_line(expected, 2 * r, line, sizeof line);
        int n = parse_ints(line, want_ids, 256);
        read_line(expected, 2 * r + 1, line, sizeof line);
        ck_assert_int_eq(parse_ints(line, labels, 256), n);
        read_line(fixture("records.jsonl"), r, line, sizeof line);
        const int32_t *ids;
        const uint8_t *counts;
        size_t got = 0;
        EXPECT_OK(nnt_sft_encode(s, line, strlen(line), &ids, &counts, &got));
        ck_assert_msg((int)got == n, "%s record %d: %zu ids, TRL %d", name, r + 1, got, n);
        int targets = 0;
        for (int k = 0; k < n; k++) {
            ck_assert_msg(ids[k] == want_ids[k], "%s record %d: id %d is %d, TRL %ld", name,
                          r + 1, k, ids[k], want_ids[k]);
            /* label 0 is never a target (transformers shifts it away) */
            ck_assert_msg(k == 0 || counts[k] == (labels[k] != -100), "%s record %d: token %d "
                          "counts %d, TRL's label %ld", name, r + 1, k, counts[k], labels[k]);
            targets += k > 0 && counts[k];
        }
        ck_assert_int_gt(targets, 0);
        ck_assert_int_lt(targets, r < 2 ? n : n - 1);   /* text: all but the first; else fewer */
    }
    expect_older_sizes(s, tok, cfg);
    nnt_sft_destroy(s);
    nnt_tokenizer_destroy(tok);
}
END_TEST

static void write_config(const char *path, const char *json)
{
    FILE *f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    fputs(json, f);
    ck_assert_int_eq(fclose(f), 0);
}

/* Every record of records (a .jsonl of the fixture) from line `first` on against NAME.SUFFIX
 * (SFTTrainer's ids and labels) from its entry `at` on; the number of records compared. */
static int compare_against(nnt_sft *s, const char *name, const char *suffix,
                           const char *records, int first, int at)
{
    static char line[16384], want[16384];   /* (the tool records' lines are long) */
    static long want_ids[2048], labels[2048];
    char expected[4300];
    snprintf(expected, sizeof expected, "%s.%s", fixture(name), suffix);
    int r = 0;
    for (;; r++) {
        FILE *f = fopen(fixture(records), "r");
        int have = 0;
        for (int k = 0; k <= first + r && fgets(line, sizeof line, f); k++)
            have = k == first + r;
        fclose(f);
        if (!have)
            break;
        line[strcspn(line, "\n")] = '\0';
        const int32_t *ids;
        const uint8_t *counts;
        size_t got = 0;
        EXPECT_OK(nnt_sft_encode(s, line, strlen(line), &ids, &counts, &got));
        read_line(expected, 2 * (at + r), want, sizeof want);
        int n = parse_ints(want, want_ids, 2048);
        read_line(expected, 2 * (at + r) + 1, want, sizeof want);
        ck_assert_int_eq(parse_ints(want, labels, 2048), n);
        ck_assert_msg((int)got == n, "%s %s record %d: %zu ids, TRL %d", name, records,
                      first + r + 1, got, n);
        int targets = 0;
        for (int k = 0; k < n; k++) {
            ck_assert_msg(ids[k] == want_ids[k], "%s %s record %d: id %d is %d, TRL %ld", name,
                          records, first + r + 1, k, ids[k], want_ids[k]);
            ck_assert_msg(k == 0 || counts[k] == (labels[k] != -100), "%s %s record %d: token "
                          "%d counts %d, TRL's label %ld", name, records, first + r + 1, k,
                          counts[k], labels[k]);
            targets += k > 0 && counts[k];
        }
        ck_assert_int_gt(targets, 0);
        if (strcmp(suffix, "all_expected") == 0)   /* every token after the first */
            ck_assert_int_eq(targets, n - 1);
        else
            ck_assert_int_lt(targets, n - 1);
    }
    return r;
}

/* The same against NAME.expected */
static int compare_records(nnt_sft *s, const char *name, const char *records, int first,
                           int at)
{
    return compare_against(s, name, "expected", records, first, at);
}

/* _i: 0 qwen2_5, 1 qwen3, 2 llama3_1, 3 llama3_2 (dated 03 Feb 2025 as the fixture), 4 gemma
 * (its conversations: no first system message), 5 gemma3 (those, then a first system one, then
 * contents as lists of text parts), 6 phi3 and 7 phi3_5 (the chat records, then an empty
 * system message and a conversation that ends with a user message), 8 qwen3_2507 (the chat
 * records: think tags in a content kept as they are, the assistant's "\n" not counted), 9
 * deepseek_r1 (the chat records, then two system messages and reasoning in both assistant
 * turns), 10 gpt_oss (dated 2025-02-03 as the fixture: the chat records, then gpt-oss's: a
 * developer or system message first, thinking in the last and earlier turns, an assistant
 * message not last, then chat_template_kwargs reasoning_effort and model_identity) */
START_TEST(test_chat_templates)
{
    static const char *const NAMES[] = {"qwen2_5", "qwen3",  "llama3_1", "llama3_2",
                                        "gemma",   "gemma3", "phi3",     "phi3_5",
                                        "qwen3_2507", "deepseek_r1", "gpt_oss"};
    static const char *const BY_NAME[] = {"qwen2.5", "qwen3",  "llama3.1", "llama3.2",
                                          "gemma2",  "gemma3", "phi3",     "phi3.5",
                                          "qwen3-2507", "deepseek-r1", "gpt-oss"};
    static const nnt_chat_template WANT[] = {NNT_CHAT_QWEN2_5, NNT_CHAT_QWEN3, NNT_CHAT_LLAMA3_1,
                                             NNT_CHAT_LLAMA3_2, NNT_CHAT_GEMMA, NNT_CHAT_GEMMA3,
                                             NNT_CHAT_PHI3, NNT_CHAT_PHI3_5,
                                             NNT_CHAT_QWEN3_2507, NNT_CHAT_DEEPSEEK_R1,
                                             NNT_CHAT_GPT_OSS};
    const char *name = NAMES[_i];
    char cfg[4300];
    nnt_tokenizer *tok = load_tokenizer(name, cfg, sizeof cfg);
    for (int forced = 0; forced < 2; forced++) {   /* recognised, then chosen by name */
        nnt_sft_options so = NNT_SFT_OPTIONS_INIT;
        so.tokenizer_config = cfg;
        so.date = _i == 3 ? "03 Feb 2025" : _i == 10 ? GPTOSS_DATE : NULL;
        if (forced)
            EXPECT_OK(nnt_chat_template_from_name(BY_NAME[_i], &so.chat_template));
        nnt_sft *s = NULL;
        EXPECT_OK(nnt_sft_create(tok, &so, &s));
        nnt_chat_template t;
        EXPECT_OK(nnt_sft_template_of(s, &t));
        ck_assert_int_eq(t, WANT[_i]);
        if (_i >= 6) {   /* Phi-3, Phi-3.5, Qwen3-Instruct-2507, DeepSeek-R1, gpt-oss */
            int n = compare_records(s, name, "chat_records.jsonl", 0, 0);
            ck_assert_int_eq(n, 5);
            if (_i <= 7)
                ck_assert_int_eq(compare_records(s, name, "phi3_records.jsonl", 0, n), 2);
            if (_i == 9)
                ck_assert_int_eq(compare_records(s, name, "r1_records.jsonl", 0, n), 1);
            if (_i == 10) {
                ck_assert_int_eq(compare_records(s, name, "gptoss_records.jsonl", 0, n), 5);
                ck_assert_int_eq(compare_records(s, name, "gptoss_kwargs_records.jsonl", 0,
                                                 n + 5), 2);
                /* the kwargs held for their records alone: the chat records again */
                ck_assert_int_eq(compare_records(s, name, "chat_records.jsonl", 0, 0), 5);
            }
            nnt_sft_destroy(s);
            continue;
        }
        if (_i >= 4) {
            int n = compare_records(s, name, "gemma_records.jsonl", 0, 0);
            ck_assert_int_eq(n, 3);
            if (_i == 5) {   /* then a first system message, then contents of text parts */
                ck_assert_int_eq(compare_records(s, name, "gemma3_records.jsonl", 0, n), 2);
                ck_assert_int_eq(compare_records(s, name, "gemma3_parts_records.jsonl", 0,
                                                 n + 2), 2);
            }
            nnt_sft_destroy(s);
            continue;
        }
        int n = compare_records(s, name, "chat_records.jsonl", 0, 0);
        ck_assert_int_eq(n, 5);
        if (_i == 1)
            ck_assert_int_eq(compare_records(s, name, "qwen3_records.jsonl", 0, n), 2);
        nnt_sft_destroy(s);
    }
    if (_i == 2) {   /* Llama 3.1 dated as the 3.2 fixture: its ids (the same tokenizer) */
        nnt_sft_options so = NNT_SFT_OPTIONS_INIT;
        so.tokenizer_config = cfg;
        so.date = "03 Feb 2025";
        nnt_sft *s = NULL;
        EXPECT_OK(nnt_sft_create(tok, &so, &s));
        ck_assert_int_eq(compare_records(s, "llama3_2", "chat_records.jsonl", 0, 0), 5);
        nnt_sft_destroy(s);
    }
    if (_i == 3) {   /* by default today's date, as strftime_now("%d %b %Y") */
        const char *rec = "{\"messages\": [{\"role\": \"user\", \"content\": \"Hi\"}, "
                          "{\"role\": \"assistant\", \"content\": \"Hello!\"}]}";
        char today[2][32];
        int32_t a[256], b[256];
        size_t na = 0, nb = 0;
        for (int k = 0; k < 2; k++) {
            time_t now = time(NULL);
            strftime(today[k], sizeof today[k], "%d %b %Y", localtime(&now));
            nnt_sft_options so = NNT_SFT_OPTIONS_INIT;
            so.tokenizer_config = cfg;
            so.date = k ? today[0] : NULL;
            nnt_sft *s = NULL;
            EXPECT_OK(nnt_sft_create(tok, &so, &s));
            const int32_t *ids;
            const uint8_t *counts;
            size_t got = 0;
            EXPECT_OK(nnt_sft_encode(s, rec, strlen(rec), &ids, &counts, &got));
            memcpy(k ? b : a, ids, got * sizeof *ids);
            *(k ? &nb : &na) = got;
            nnt_sft_destroy(s);
        }
        if (strcmp(today[0], today[1]) == 0) {   /* not across midnight */
            printf("test_sft llama3.2: today is \"%s\"\n", today[0]);
            ck_assert_int_eq(na, nb);
            ck_assert_int_eq(memcmp(a, b, na * sizeof *a), 0);
        }
    }
    nnt_tokenizer_destroy(tok);
}
END_TEST

/* The tokenizers of the prompt and prompt/completion fixtures (_i of test_prompts and
 * test_conversation_pc), and the record sets each is checked on (STEM_prompts.jsonl,
 * STEM_pc.jsonl) */
static const char *const PROMPT_NAMES[] = {"chatml",   "llama3",   "qwen2_5", "qwen3",
                                           "llama3_1", "llama3_2", "gemma",   "gemma3",
                                           "phi3",     "phi3_5",   "qwen3_2507", "deepseek_r1",
                                           "gpt_oss"};
static const char *const PROMPT_SETS[][3] = {
    {"chat", NULL}, {"chat", NULL}, {"chat", NULL}, {"chat", "qwen3"}, {"chat", NULL},
    {"chat", NULL}, {"gemma", NULL}, {"gemma", "gemma3", "gemma3_parts"}, {"chat", "phi3"},
    {"chat", "phi3"}, {"chat", NULL}, {"chat", "r1"}, {"chat", "gptoss"}};

/* The fixture file of record set k of PROMPT_SETS[i] with suffix (NULL: none) */
static const char *prompt_set(int i, int k, const char *suffix, char *path, size_t cap)
{
    if (k >= 3 || !PROMPT_SETS[i][k])
        return NULL;
    snprintf(path, cap, "%s%s", PROMPT_SETS[i][k], suffix);
    return path;
}

/* Each prompt record of set_file (nnt_sft_encode_prompt) against the lines of expected from
 * `at` on (apply_chat_template's ids); the number compared, the last record into last (cap
 * bytes) when not NULL. */
static int compare_prompts(nnt_sft *s, const char *name, const char *expected,
                           const char *set_file, int at, char *last, size_t cap)
{
    static char line[16384], want[16384];
    static long want_ids[2048];
    FILE *f = fopen(fixture(set_file), "r");
    ck_assert_ptr_nonnull(f);
    int k = 0;
    for (; fgets(line, sizeof line, f); k++) {
        line[strcspn(line, "\n")] = '\0';
        const int32_t *ids;
        size_t n = 0;
        EXPECT_OK(nnt_sft_encode_prompt(s, line, strlen(line), &ids, &n));
        read_line(expected, at + k, want, sizeof want);
        int nw = parse_ints(want, want_ids, 2048);
        ck_assert_msg((int)n == nw, "%s %s prompt %d: %zu ids, transformers %d", name, set_file,
                      k + 1, n, nw);
        for (int j = 0; j < nw; j++)
            ck_assert_msg(ids[j] == want_ids[j], "%s %s prompt %d: id %d is %d, transformers "
                          "%ld", name, set_file, k + 1, j, ids[j], want_ids[j]);
        if (last)
            snprintf(last, cap, "%s", line);
    }
    fclose(f);
    return k;
}

/* Prompts for generation (nnt_sft_encode_prompt): each conversation of the fixture's sets up
 * to its last user message gives apply_chat_template's ids with add_generation_prompt=True
 * (NAME.prompts): _i 0 chatml, 1 llama3, 2 qwen2_5, 3 qwen3 (earlier assistant turns without
 * their reasoning), 4 llama3_1, 5 llama3_2, 6 gemma, 7 gemma3, 8 phi3, 9 phi3_5, 10 qwen3_2507,
 * 11 deepseek_r1 (an earlier assistant turn without what precedes its last </think>), 12
 * gpt_oss (dated as its fixture; earlier assistant turns closed by <|end|>, without their
 * thinking), 13 qwen3 with no_thinking (enable_thinking=False: qwen3_nothink.prompts) */
START_TEST(test_prompts)
{
    const int nothink = _i == 13, i = nothink ? 3 : _i;   /* 13: Qwen3's, no_thinking */
    const char *name = PROMPT_NAMES[i], *set_file;
    char set_path[64];
    char cfg[4300], expected[4300], line[8192], want[8192];
    nnt_tokenizer *tok = load_tokenizer(name, cfg, sizeof cfg);
    nnt_sft_options so = NNT_SFT_OPTIONS_INIT;
    so.tokenizer_config = cfg;
    so.date = i == 5 ? "03 Feb 2025" : i == 12 ? GPTOSS_DATE : NULL;
    so.no_thinking = nothink;
    nnt_sft *s = NULL;
    EXPECT_OK(nnt_sft_create(tok, &so, &s));
    snprintf(expected, sizeof expected, "%s.prompts", fixture(nothink ? "qwen3_nothink" : name));
    int k = 0;
    for (int set = 0; (set_file = prompt_set(i, set, "_prompts.jsonl", set_path, 64)); set++)
        k += compare_prompts(s, name, expected, set_file, k, line, sizeof line);
    static const int COUNT[] = {5, 5, 5, 7, 5, 5, 3, 7, 7, 7, 5, 6, 10};   /* sets' prompts */
    ck_assert_int_eq(k, COUNT[i]);
    /* the last conversation's list of messages alone: the same ids */
    const char *list = strchr(line, '['), *end = strrchr(line, ']');
    ck_assert_ptr_nonnull(list);
    long want_ids[256];
    read_line(expected, k - 1, want, sizeof want);
    int nw = parse_ints(want, want_ids, 256);
    const int32_t *lids;
    size_t nl = 0;
    EXPECT_OK(nnt_sft_encode_prompt(s, list, (size_t)(end + 1 - list), &lids, &nl));
    ck_assert_int_eq((int)nl, nw);
    for (int j = 0; j < nw; j++)
        ck_assert_int_eq(lids[j], want_ids[j]);
    /* and as TRL's prompt-only record {"prompt": [...]}, its other members ignored */
    char po[8400];
    snprintf(po, sizeof po, "{\"id\": 3, \"prompt\": %.*s, \"answer\": [1]}",
             (int)(end + 1 - list), list);
    EXPECT_OK(nnt_sft_encode_prompt(s, po, strlen(po), &lids, &nl));
    ck_assert_int_eq((int)nl, nw);
    for (int j = 0; j < nw; j++)
        ck_assert_int_eq(lids[j], want_ids[j]);
    /* a prompt ends with a user message, and is a messages record alone */
    const int32_t *ids;
    size_t n = 0;
    const char *ends = "{\"messages\": [{\"role\": \"user\", \"content\": \"Hi\"}, "
                       "{\"role\": \"assistant\", \"content\": \"Hello!\"}]}";
    EXPECT_FAIL_MSG(nnt_sft_encode_prompt(s, ends, strlen(ends), &ids, &n), NNT_E_FORMAT,
                    "this one is a \"assistant\" message): the model answers it");
    const char *text = "{\"text\": \"Hi\"}", *other = "{\"messages\": [], \"x\": 1}";
    EXPECT_FAIL_MSG(nnt_sft_encode_prompt(s, text, strlen(text), &ids, &n), NNT_E_FORMAT,
                    "a prompt is a record {\"messages\": [...]} (or \"conversations\"; and "
                    "\"tools\"; no other key), or the list of messages alone");
    EXPECT_FAIL_MSG(nnt_sft_encode_prompt(s, other, strlen(other), &ids, &n), NNT_E_FORMAT,
                    "a prompt is a record {\"messages\": [...]}");
    EXPECT_FAIL_MSG(nnt_sft_encode_prompt(s, "[]", 2, &ids, &n), NNT_E_FORMAT,
                    "\"messages\" is not a non-empty array");
    EXPECT_FAIL_MSG(nnt_sft_encode_prompt(s, NULL, 0, NULL, &n), NNT_E_INVAL, "NULL");
    /* the encoder still encodes training records after prompts (the same state) */
    const uint8_t *counts;
    EXPECT_OK(nnt_sft_encode(s, ends, strlen(ends), &ids, &counts, &n));
    ck_assert_int_eq(counts[n - 1], 1);
    nnt_sft_destroy(s);
    nnt_tokenizer_destroy(tok);
}
END_TEST

/* TRL's prompt-only records of text {"prompt": P, ...}: the ids a training row of {"prompt":
 * P, "completion": C} begins with (its ids before the first that counts), which are the
 * tokenizer's own for P (tokenizer(P): Gemma 3's <bos> first, none for SmolLM2's chatml);
 * other members ignored; refusals. _i 0 chatml, 1 gemma3. */
START_TEST(test_prompt_text)
{
    const char *name = _i ? "gemma3" : "chatml";
    char cfg[4300];
    nnt_tokenizer *tok = load_tokenizer(name, cfg, sizeof cfg);
    nnt_sft *s = open_sft(tok, cfg, NNT_CHAT_AUTO);
    static const char *const TEXTS[3] = {"The sky is", "Un caf\u00e9 ", "x"};
    for (int k = 0; k < 3; k++) {
        char rec[256], row[256], lab[256];
        snprintf(rec, sizeof rec, "{\"prompt\": \"%s\", \"completion\": \" blue.\", \"n\": %d}",
                 TEXTS[k], k);
        snprintf(row, sizeof row, "{\"prompt\": \"%s\", \"completion\": \" blue.\"}", TEXTS[k]);
        snprintf(lab, sizeof lab, "{\"text\": \"%s\", \"label\": 0}", TEXTS[k]);
        const int32_t *ids;
        size_t n = 0, nr = 0, nl = 0;
        EXPECT_OK(nnt_sft_encode_prompt(s, rec, strlen(rec), &ids, &n));
        int32_t p[64];
        ck_assert(n > 0 && n <= 64);
        memcpy(p, ids, n * sizeof *ids);
        const uint8_t *counts;
        EXPECT_OK(nnt_sft_encode(s, row, strlen(row), &ids, &counts, &nr));
        size_t first = 0;
        while (first < nr && !counts[first])
            first++;
        ck_assert_msg(first == n, "%s %s: the row counts from %zu, the prompt has %zu ids", name,
                      TEXTS[k], first, n);
        ck_assert(memcmp(ids, p, n * sizeof *p) == 0);
        int64_t label;
        EXPECT_OK(nnt_sft_encode_labelled(s, lab, strlen(lab), &ids, &nl, &label));
        ck_assert_msg(nl == n && memcmp(ids, p, n * sizeof *p) == 0, "%s %s: %zu ids, "
                      "tokenizer(text)'s %zu", name, TEXTS[k], n, nl);
        ck_assert_int_eq(p[0] == 2, _i);   /* Gemma 3: <bos> (2) first; chatml: no bos */
    }
    const int32_t *ids;
    size_t n = 0;
    static const struct {
        const char *record, *says;
    } BAD[4] = {
        {"{\"prompt\": 3}", "\"prompt\" is a string or a list of messages"},
        {"{\"prompt\": \"a\", \"messages\": [{\"role\": \"user\", \"content\": \"b\"}]}",
         "\"prompt\" or \"messages\", not both"},
        {"{\"prompt\": \"a\", \"tools\": [{\"type\": \"function\", \"function\": {\"name\": "
         "\"f\"}}]}", "\"tools\" with a prompt of text"},
        {"{\"prompt\": [{\"role\": \"user\", \"content\": \"a\"}, {\"role\": \"assistant\", "
         "\"content\": \"b\"}]}", "the model answers it"},
    };
    for (int k = 0; k < 4; k++)
        EXPECT_FAIL_MSG(nnt_sft_encode_prompt(s, BAD[k].record, strlen(BAD[k].record), &ids,
                                              &n), NNT_E_FORMAT, BAD[k].says);
    /* an empty text: Gemma 3's <bos> alone; nothing at all for chatml */
    static const char EMPTY[] = "{\"prompt\": \"\"}";
    if (_i) {
        EXPECT_OK(nnt_sft_encode_prompt(s, EMPTY, strlen(EMPTY), &ids, &n));
        ck_assert(n == 1 && ids[0] == 2);
    } else
        EXPECT_FAIL_MSG(nnt_sft_encode_prompt(s, EMPTY, strlen(EMPTY), &ids, &n), NNT_E_FORMAT,
                        "the prompt encodes to no token");
    nnt_sft_destroy(s);
    nnt_tokenizer_destroy(tok);
}
END_TEST

/* Conversational prompt/completion records ({"prompt": [...], "completion": [...]}: each
 * conversation of the fixture's sets split at its last user message) against SFTTrainer with
 * its defaults (NAME.pc_expected: completion_only_loss, the published template; the prompt
 * with its generation prompt, then prompt + completion, counted from where they differ):
 * _i 0 chatml, 1 llama3, 2 qwen2_5, 3 qwen3 (the completion's think block, earlier turns
 * without theirs), 4 llama3_1, 5 llama3_2, 6 gemma, 7 gemma3, 8 phi3, 9 phi3_5 (the closing
 * eos), 10 qwen3_2507, 11 deepseek_r1 (the completion's reasoning dropped, as the published
 * template drops it, and its generation prompt's <think> not in the conversation), 12
 * gpt_oss (the completion's thinking and <|return|>; then records with chat_template_kwargs
 * reasoning_effort and model_identity) */
START_TEST(test_conversation_pc)
{
    static const int COUNT[] = {5, 5, 5, 7, 5, 5, 3, 7, 6, 6, 5, 6, 9};   /* the sets' records */
    char cfg[4300], set_path[64];
    const char *set_file;
    nnt_tokenizer *tok = load_tokenizer(PROMPT_NAMES[_i], cfg, sizeof cfg);
    nnt_sft_options so = NNT_SFT_OPTIONS_INIT;
    so.tokenizer_config = cfg;
    so.date = _i == 5 ? "03 Feb 2025" : _i == 12 ? GPTOSS_DATE : NULL;
    nnt_sft *s = NULL;
    EXPECT_OK(nnt_sft_create(tok, &so, &s));
    int n = 0;
    for (int set = 0; (set_file = prompt_set(_i, set, "_pc.jsonl", set_path, 64)); set++)
        n += compare_against(s, PROMPT_NAMES[_i], "pc_expected", set_file, 0, n);
    ck_assert_int_eq(n, COUNT[_i]);
    if (_i == 12)   /* gpt-oss's with chat_template_kwargs */
        ck_assert_int_eq(compare_against(s, "gpt_oss", "pc_expected", "gptoss_kwargs_pc.jsonl",
                                         0, n), 2);
    if (_i == 3)   /* Qwen3's with chat_template_kwargs {"enable_thinking": false} a record */
        ck_assert_int_eq(compare_against(s, "qwen3_nothink", "pc_expected",
                                         "qwen3_nothink_pc.jsonl", 0, 0), 7);
    /* mixed or empty forms refused */
    const int32_t *ids;
    const uint8_t *counts;
    size_t got = 0;
    const char *mixed = "{\"prompt\": [{\"role\": \"user\", \"content\": \"Hi\"}], "
                        "\"completion\": \"Hello!\"}";
    EXPECT_FAIL_MSG(nnt_sft_encode(s, mixed, strlen(mixed), &ids, &counts, &got), NNT_E_FORMAT,
                    "\"prompt\" and \"completion\" must be both strings or both lists of "
                    "messages");
    const char *empty = "{\"prompt\": [{\"role\": \"user\", \"content\": \"Hi\"}], "
                        "\"completion\": []}";
    EXPECT_FAIL_MSG(nnt_sft_encode(s, empty, strlen(empty), &ids, &counts, &got), NNT_E_FORMAT,
                    "an empty completion: nothing to learn");
    nnt_sft_destroy(s);
    nnt_tokenizer_destroy(tok);
}
END_TEST

/* Tool use against TRL and transformers (tests/fixtures/sft: NAME.tool_expected,
 * .tool_prompts, .tool_pc_expected): _i 0 qwen2_5, 1 qwen3, 2 qwen3_2507 (tool_records:
 * a call and its response, a system message with the tools given as a string of JSON, tools
 * without calls; qwen_tool_records: two calls in a turn and two responses, content beside
 * calls, arguments as a string, a call without its function wrapper, an empty list of
 * tools; qwen3: qwen3_tool_records, reasoning before calls), 3 llama3_1, 4 llama3_2 (dated
 * as the fixture; tool_records, then llama_tool_records: an ipython response of an object,
 * the tools in the system block by chat_template_kwargs tools_in_user_message false, an
 * empty list of tools), 5 gpt_oss (dated as the fixture; tool_records, then
 * gptoss_tool_records: a schema with every kind of parameter its TypeScript namespace
 * writes, thinking before a call dropped when an answer follows, content as a call's
 * analysis, a response of an object, a conversation ending with a response, its built-in
 * tools by chat_template_kwargs builtin_tools):
 * records with assistant-only counts, prompts up to the last user or tool message with the
 * generation prompt, and conversational prompt/completion. */
START_TEST(test_tools)
{
    static const char *const NAMES[] = {"qwen2_5", "qwen3", "qwen3_2507", "llama3_1",
                                        "llama3_2", "gpt_oss"};
    static const char *const SETS[][3] = {{"tool", "qwen_tool", NULL},
                                          {"tool", "qwen_tool", "qwen3_tool"},
                                          {"tool", "qwen_tool", NULL},
                                          {"tool", "llama_tool", NULL},
                                          {"tool", "llama_tool", NULL},
                                          {"tool", "gptoss_tool", NULL}};
    static const int RECORDS[] = {6, 8, 6, 6, 6, 8}, PROMPTS[] = {6, 8, 6, 5, 5, 6},
                     PCS[] = {6, 8, 6, 6, 6, 7};
    const char *name = NAMES[_i];
    char cfg[4300], file[64], expected[4300];
    nnt_tokenizer *tok = load_tokenizer(name, cfg, sizeof cfg);
    nnt_sft_options so = NNT_SFT_OPTIONS_INIT;
    so.tokenizer_config = cfg;
    so.date = _i == 4 ? "03 Feb 2025" : _i == 5 ? GPTOSS_DATE : NULL;
    nnt_sft *s = NULL;
    EXPECT_OK(nnt_sft_create(tok, &so, &s));
    int nrec = 0, npc = 0, nprompt = 0;
    snprintf(expected, sizeof expected, "%s.tool_prompts", fixture(name));
    for (int k = 0; k < 3 && SETS[_i][k]; k++) {
        snprintf(file, sizeof file, "%s_records.jsonl", SETS[_i][k]);
        nrec += compare_against(s, name, "tool_expected", file, 0, nrec);
        snprintf(file, sizeof file, "%s_pc.jsonl", SETS[_i][k]);
        npc += compare_against(s, name, "tool_pc_expected", file, 0, npc);
        snprintf(file, sizeof file, "%s_prompts.jsonl", SETS[_i][k]);
        nprompt += compare_prompts(s, name, expected, file, nprompt, NULL, 0);
    }
    ck_assert_int_eq(nrec, RECORDS[_i]);
    ck_assert_int_eq(npc, PCS[_i]);
    ck_assert_int_eq(nprompt, PROMPTS[_i]);
    nnt_sft_destroy(s);
    /* assistant_only (TRL's assistant_only_loss): the records split at their last user
     * message, whose completions hold calls, tool responses and answers: the training
     * template's rendering, the completion's assistant turns alone counted */
    so.assistant_only = 1;
    EXPECT_OK(nnt_sft_create(tok, &so, &s));
    int nau = 0;
    for (int k = 0; k < 3 && SETS[_i][k]; k++) {
        snprintf(file, sizeof file, "%s_pcu.jsonl", SETS[_i][k]);
        nau += compare_against(s, name, "tool_pc_assistant_expected", file, 0, nau);
    }
    ck_assert_int_eq(nau, RECORDS[_i]);
    nnt_sft_destroy(s);
    nnt_tokenizer_destroy(tok);
}
END_TEST

/* What the tools' records must be: the refusals, each naming what is wrong */
START_TEST(test_tool_refusals)
{
    static const struct {
        const char *tokenizer, *record, *says;
    } BAD[] = {
        {"gemma", "{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}, {\"role\": "
         "\"assistant\", \"content\": \"y\"}], \"tools\": [{\"type\": \"function\"}]}",
         "\"tools\": the Gemma template renders no tools (nnt renders them with the Qwen2.5"},
        {"gemma", "{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}, {\"role\": "
         "\"assistant\", \"content\": \"y\", \"tool_calls\": [{\"function\": {\"name\": \"f\", "
         "\"arguments\": {}}}]}]}", "has tool_calls, which the Gemma template does not render"},
        {"phi3", "{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}, {\"role\": "
         "\"tool\", \"content\": \"y\"}, {\"role\": \"assistant\", \"content\": \"z\"}]}",
         "has role \"tool\": the Phi-3 template renders no tool messages"},
        {"qwen2_5", "{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}, {\"role\": "
         "\"assistant\", \"content\": \"y\"}], \"tools\": {\"type\": \"function\"}}",
         "\"tools\" is not a list of the functions' JSON schemas"},
        {"qwen2_5", "{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}, {\"role\": "
         "\"assistant\", \"content\": \"y\"}], \"tools\": \"[{\\\"a\\\": 1\"}",
         "\"tools\" (a string of JSON)"},
        {"qwen2_5", "{\"text\": \"x\", \"tools\": [{\"a\": 1}]}",
         "\"tools\" in a record of text"},
        {"qwen2_5", "{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}, {\"role\": "
         "\"assistant\", \"tool_calls\": [{\"function\": {\"name\": \"f\"}}]}]}",
         "messages[1].tool_calls[0] has no \"arguments\""},
        {"qwen2_5", "{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}, {\"role\": "
         "\"assistant\", \"tool_calls\": {\"name\": \"f\"}}]}",
         "messages[1].tool_calls is not a list"},
        {"qwen2_5", "{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}, {\"role\": "
         "\"assistant\", \"tool_calls\": []}]}", "messages[1] is not {\"role\": string"},
        {"qwen2_5", "{\"messages\": [{\"role\": \"user\", \"content\": \"x\", \"tool_calls\": "
         "[{\"name\": \"f\", \"arguments\": {}}]}, {\"role\": \"assistant\", \"content\": "
         "\"y\"}]}", "messages[0] has tool_calls: tool calls are an assistant's"},
        {"qwen2_5", "{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}, {\"role\": "
         "\"assistant\", \"content\": \"y\", \"function_call\": {\"name\": \"f\"}}]}",
         "has function_call: OpenAI's older form"},
        {"qwen2_5", "{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}, {\"role\": "
         "\"tool\", \"content\": {\"a\": 1}}, {\"role\": \"assistant\", \"content\": \"y\"}]}",
         "messages[1] is not {\"role\": string, \"content\": string}"},
        {"qwen2_5", "{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}, {\"role\": "
         "\"ipython\", \"content\": \"1\"}, {\"role\": \"assistant\", \"content\": \"y\"}]}",
         "role \"ipython\", which the Qwen2.5 template does not know (system, user, assistant, "
         "tool)"},
        {"llama3_1", "{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}, {\"role\": "
         "\"assistant\", \"tool_calls\": [{\"function\": {\"name\": \"f\", \"arguments\": {}}}, "
         "{\"function\": {\"name\": \"g\", \"arguments\": {}}}]}]}",
         "messages[1] has 2 tool calls: the Llama 3.1 template takes one a message"},
        {"llama3_1", "{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}, {\"role\": "
         "\"assistant\", \"tool_calls\": [{\"name\": \"f\", \"arguments\": {}}]}]}",
         "messages[1].tool_calls[0] is not {\"type\": \"function\", \"function\": {\"name\": "
         "string, \"arguments\": ...}}"},
        {"llama3_1", "{\"messages\": [{\"role\": \"system\", \"content\": \"x\"}, {\"role\": "
         "\"assistant\", \"content\": \"y\"}], \"tools\": [{\"a\": 1}]}",
         "the Llama 3.1 template puts the tools in the first user message, which is "
         "messages[1]: it is not a user's"},
        {"llama3_1", "{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}, {\"role\": "
         "\"assistant\", \"content\": \"y\"}], \"chat_template_kwargs\": "
         "{\"tools_in_user_message\": 1}}", "tools_in_user_message is not true or false"},
        {"llama3_1", "{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}, {\"role\": "
         "\"assistant\", \"content\": \"y\"}], \"chat_template_kwargs\": "
         "{\"builtin_tools\": [\"brave_search\"]}}", "Llama 3.1's built-in tools"},
        {"gpt_oss", "{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}, {\"role\": "
         "\"assistant\", \"content\": \"y\"}], \"chat_template_kwargs\": "
         "{\"builtin_tools\": \"python\"}}", "builtin_tools is not a list"},
        {"llama3_1", "{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}, {\"role\": "
         "\"tool\", \"content\": \"1\", \"id\": \"c1\"}, {\"role\": \"assistant\", \"content\": "
         "\"y\"}]}", "messages[1] has the key \"id\""},
        {"gpt_oss", "{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}, {\"role\": "
         "\"assistant\", \"tool_calls\": [{\"name\": \"f\", \"arguments\": {}}, {\"name\": \"g\", "
         "\"arguments\": {}}]}]}", "messages[1] has 2 tool calls: the gpt-oss template takes one a "
         "message (it renders the first alone)"},
        {"gpt_oss", "{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}, {\"role\": "
         "\"assistant\", \"content\": \"a\", \"thinking\": \"b\", \"tool_calls\": "
         "[{\"name\": \"f\", \"arguments\": {}}]}]}",
         "messages[1] has tool calls with both content and thinking"},
        {"gpt_oss", "{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}, {\"role\": "
         "\"assistant\", \"tool_calls\": [{\"name\": \"f\", \"arguments\": {}, \"content_type\": "
         "1}]}]}", "messages[1].tool_calls[0].content_type is not a string"},
        {"gpt_oss", "{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}, {\"role\": "
         "\"assistant\", \"tool_calls\": [{\"name\": \"f\", \"arguments\": {}}]}, {\"role\": "
         "\"tool\", \"content\": \"1\"}, {\"role\": \"assistant\", \"content\": \"y\"}, "
         "{\"role\": \"tool\", \"content\": \"2\"}, {\"role\": \"assistant\", \"content\": \"z\"}]}",
         "messages[4] is a tool's response without an assistant's tool call before it (since "
         "the last answer)"},
        {"gpt_oss", "{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}, {\"role\": "
         "\"assistant\", \"content\": \"y\"}], \"tools\": [{\"type\": \"function\", \"function\": "
         "{\"name\": \"f\"}}]}", "tools[0] is not {\"type\": \"function\", \"function\": {\"name\": "
         "string, \"description\": string, ...}}"},
        {"gpt_oss", "{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}, {\"role\": "
         "\"assistant\", \"content\": \"y\"}], \"tools\": [{\"type\": \"function\", \"function\": "
         "{\"name\": \"f\", \"description\": \"d\", \"parameters\": {\"type\": \"object\", "
         "\"properties\": {\"v\": {\"oneOf\": [{\"type\": \"string\"}]}}}}}]}",
         "a parameter's schema has oneOf, which nnt does not write"},
        {"gpt_oss", "{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}, {\"role\": "
         "\"assistant\", \"content\": \"y\"}], \"tools\": [{\"type\": \"function\", \"function\": "
         "{\"name\": \"f\", \"description\": \"d\", \"parameters\": {\"type\": \"object\", "
         "\"properties\": {\"v\": {\"type\": \"string\", \"enum\": [\"a\"], \"default\": 1}}}}}]}",
         "f's parameter v: the default of an enum is not a string"},
    };
    for (size_t k = 0; k < sizeof BAD / sizeof BAD[0]; k++) {
        char cfg[4300];
        nnt_tokenizer *tok = load_tokenizer(BAD[k].tokenizer, cfg, sizeof cfg);
        nnt_sft *s = open_sft(tok, cfg, NNT_CHAT_AUTO);
        expect_refused(s, BAD[k].record, BAD[k].says);
        nnt_sft_destroy(s);
        nnt_tokenizer_destroy(tok);
    }
    /* assistant_only is 0 or 1, and not with all_tokens */
    {
        char cfg[4300];
        nnt_tokenizer *tok = load_tokenizer("qwen2_5", cfg, sizeof cfg);
        nnt_sft_options so = NNT_SFT_OPTIONS_INIT;
        nnt_sft *s = NULL;
        so.tokenizer_config = cfg;
        so.assistant_only = 1, so.all_tokens = 1;
        EXPECT_FAIL_MSG(nnt_sft_create(tok, &so, &s), NNT_E_INVAL, "not with all_tokens");
        so.assistant_only = 2, so.all_tokens = 0;
        EXPECT_FAIL_MSG(nnt_sft_create(tok, &so, &s), NNT_E_INVAL, "assistant_only 2");
        nnt_tokenizer_destroy(tok);
    }
    /* transformers drops a message's null values: tool_calls null is no call, content null
     * beside calls no content; a tool's name and tool_call_id are not printed; and the
     * prompt may end with a tool's response */
    char cfg[4300];
    nnt_tokenizer *tok = load_tokenizer("qwen2_5", cfg, sizeof cfg);
    nnt_sft *s = open_sft(tok, cfg, NNT_CHAT_AUTO);
    const char *with_nulls = "{\"messages\": [{\"role\": \"user\", \"content\": \"x\", "
                             "\"tool_calls\": null}, {\"role\": \"assistant\", \"content\": "
                             "null, \"tool_calls\": [{\"name\": \"f\", \"arguments\": {}}]}, "
                             "{\"role\": \"tool\", \"content\": \"1\", \"name\": \"f\", "
                             "\"tool_call_id\": \"c1\"}, {\"role\": \"assistant\", "
                             "\"content\": \"y\"}], \"tools\": null}";
    const char *plain = "{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}, {\"role\": "
                        "\"assistant\", \"tool_calls\": [{\"name\": \"f\", \"arguments\": {}}]}"
                        ", {\"role\": \"tool\", \"content\": \"1\"}, {\"role\": \"assistant\", "
                        "\"content\": \"y\"}]}";
    const int32_t *ids;
    const uint8_t *counts;
    size_t n = 0, n2 = 0, len = 0;
    int32_t first[512];
    EXPECT_OK(nnt_sft_encode(s, with_nulls, strlen(with_nulls), &ids, &counts, &n));
    ck_assert_uint_le(n, 512);
    memcpy(first, ids, n * sizeof *ids);
    EXPECT_OK(nnt_sft_encode(s, plain, strlen(plain), &ids, &counts, &n2));
    ck_assert_uint_eq(n, n2);
    ck_assert_int_eq(memcmp(first, ids, n * sizeof *ids), 0);
    char text[2048];
    EXPECT_OK(nnt_tokenizer_decode(tok, ids, n, text, sizeof text, &len));
    text[len < sizeof text ? len : sizeof text - 1] = '\0';
    ck_assert_str_eq(text, "<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are "
                           "a helpful assistant.<|im_end|>\n<|im_start|>user\nx<|im_end|>\n"
                           "<|im_start|>assistant\n<tool_call>\n{\"name\": \"f\", "
                           "\"arguments\": {}}\n</tool_call><|im_end|>\n<|im_start|>user\n"
                           "<tool_response>\n1\n</tool_response><|im_end|>\n"
                           "<|im_start|>assistant\ny<|im_end|>\n");
    const char *after_tool = "{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}, "
                             "{\"role\": \"assistant\", \"tool_calls\": [{\"name\": \"f\", "
                             "\"arguments\": {}}]}, {\"role\": \"tool\", \"content\": \"1\"}], "
                             "\"tools\": [{\"name\": \"f\"}]}";
    EXPECT_OK(nnt_sft_encode_prompt(s, after_tool, strlen(after_tool), &ids, &n));
    EXPECT_OK(nnt_tokenizer_decode(tok, ids, n, text, sizeof text, &len));
    text[len < sizeof text ? len : sizeof text - 1] = '\0';
    ck_assert_ptr_nonnull(strstr(text, "<tools>\n{\"name\": \"f\"}\n</tools>"));
    ck_assert_ptr_nonnull(strstr(text, "</tool_response><|im_end|>\n<|im_start|>assistant\n"));
    nnt_sft_destroy(s);
    nnt_tokenizer_destroy(tok);
}
END_TEST

/* hft_jv_tojson against Python's json.dumps(json.loads(text), ensure_ascii=False) and with
 * indent=4 (tests/fixtures/sft/tojson.txt): numbers written in many ways (integers of any
 * length, "-0", exponents, what overflows and underflows, the shortest digits of random
 * doubles and of powers of two), every escape, nested and empty containers, a repeated key */
START_TEST(test_tojson)
{
    static char text[8192], pair[16384];
    int values = 0;
    for (;; values++) {
        FILE *f = fopen(fixture("tojson.txt"), "r");
        ck_assert_ptr_nonnull(f);
        int have = 0;
        for (int k = 0; k <= 2 * values + 1 && fgets(k % 2 ? pair : text, k % 2 ? sizeof pair
                                                                             : sizeof text, f);
             k++)
            have = k == 2 * values + 1;
        fclose(f);
        if (!have)
            break;
        text[strcspn(text, "\n")] = '\0';
        pair[strcspn(pair, "\n")] = '\0';
        char err[256];
        nnt_json j;
        jv v, want;
        nnt_json_init(&j, text, strlen(text), 0, "value", err, sizeof err);
        ck_assert_msg(hft_jv_parse(&j, &v, 0, "") == 0, "%s: %s", text, err);
        nnt_json_init(&j, pair, strlen(pair), 0, "pair", err, sizeof err);
        ck_assert_msg(hft_jv_parse(&j, &want, 0, "") == 0, "%s", err);
        ck_assert_int_eq(want.type, JV_ARR);
        for (int indent = 0; indent < 2; indent++) {
            sbuf b = {NULL, 0, 0};
            ck_assert_int_eq(hft_jv_tojson(&b, &v, indent ? 4 : -1), 0);
            const jv *w = &want.items[indent];
            ck_assert_msg(b.n == w->len && memcmp(b.p, w->s, b.n) == 0, "%s (indent %d): "
                          "nnt '%.*s', Python '%s'", text, indent ? 4 : -1, (int)b.n,
                          b.p ? b.p : "", w->s);
            free(b.p);
        }
        hft_jv_free(&v);
        hft_jv_free(&want);
    }
    ck_assert_int_gt(values, 800);
}
END_TEST

/* A record's chat_template_kwargs: Llama 3.2's date_string gives the ids and counts of the
 * date option (themselves checked against SFTTrainer in test_chat_templates) and holds for
 * its record alone; malformed or unknown kwargs are refused. (Qwen3's enable_thinking:
 * test_conversation_pc.) */
START_TEST(test_record_kwargs)
{
    char cfg[4300], line[8192], with[8400];
    nnt_tokenizer *tok = load_tokenizer("llama3_2", cfg, sizeof cfg);
    nnt_sft_options so = NNT_SFT_OPTIONS_INIT;
    so.tokenizer_config = cfg;
    so.date = "03 Feb 2025";
    nnt_sft *dated = NULL, *s = open_sft(tok, cfg, NNT_CHAT_AUTO);
    EXPECT_OK(nnt_sft_create(tok, &so, &dated));
    FILE *f = fopen(fixture("chat_records.jsonl"), "r");
    ck_assert_ptr_nonnull(f);
    int compared = 0;
    while (fgets(line, sizeof line, f)) {
        line[strcspn(line, "\n")] = '\0';
        snprintf(with, sizeof with, "{\"chat_template_kwargs\": {\"date_string\": \"03 Feb "
                 "2025\"}, %s", line + 1);
        const int32_t *ids, *got;
        const uint8_t *counts, *got_counts;
        size_t n = 0, m = 0, again = 0;
        EXPECT_OK(nnt_sft_encode(dated, line, strlen(line), &ids, &counts, &n));
        EXPECT_OK(nnt_sft_encode(s, with, strlen(with), &got, &got_counts, &m));
        ck_assert_int_eq(m, n);
        ck_assert_int_eq(memcmp(got, ids, n * sizeof *ids), 0);
        ck_assert_int_eq(memcmp(got_counts, counts, n), 0);
        /* the next record without kwargs: today's date again (other ids unless today is
         * 03 Feb 2025) */
        EXPECT_OK(nnt_sft_encode(s, line, strlen(line), &got, &got_counts, &again));
        ck_assert(again != n || memcmp(got, ids, n * sizeof *ids) != 0);
        compared++;
    }
    fclose(f);
    ck_assert_int_eq(compared, 5);
    static const char *const BAD[][2] = {
        {"{\"chat_template_kwargs\": 1, \"text\": \"a\"}", "\"chat_template_kwargs\" is not "
                                                              "an object"},
        {"{\"chat_template_kwargs\": {\"enable_thinking\": 0}, \"text\": \"a\"}",
         "enable_thinking is not true or false"},
        {"{\"chat_template_kwargs\": {\"date_string\": \"\"}, \"text\": \"a\"}",
         "date_string is not one line of 1 to 31 bytes"},
        {"{\"chat_template_kwargs\": {\"enable_think\": false}, \"text\": \"a\"}",
         "chat_template_kwargs.enable_think is read by none of the templates nnt renders"}};
    for (int k = 0; k < 4; k++) {
        const int32_t *ids;
        const uint8_t *counts;
        size_t n = 0;
        EXPECT_FAIL_MSG(nnt_sft_encode(s, BAD[k][0], strlen(BAD[k][0]), &ids, &counts, &n),
                        NNT_E_FORMAT, BAD[k][1]);
    }
    nnt_sft_destroy(s);
    nnt_sft_destroy(dated);
    nnt_tokenizer_destroy(tok);
}
END_TEST

/* The ids and counts of two records with s are the same (both encoded) */
static void same_encoding(nnt_sft *s, const char *a, const char *b)
{
    const int32_t *ids;
    const uint8_t *counts;
    size_t n = 0, m = 0;
    EXPECT_OK(nnt_sft_encode(s, a, strlen(a), &ids, &counts, &n));
    int32_t *want = malloc(n * sizeof *want);
    uint8_t *want_counts = malloc(n);
    memcpy(want, ids, n * sizeof *want);
    memcpy(want_counts, counts, n);
    EXPECT_OK(nnt_sft_encode(s, b, strlen(b), &ids, &counts, &m));
    ck_assert_msg(m == n && memcmp(ids, want, n * sizeof *want) == 0 &&
                  memcmp(counts, want_counts, n) == 0, "%s and %s differ", a, b);
    free(want), free(want_counts);
}

#define GPTOSS_USER "{\"role\": \"user\", \"content\": \"Hi\"}"

/* gpt-oss beyond its fixtures: a null thinking is none, thinking wins over
 * reasoning_content, reasoning is its last alias (transformers' aliases), a developer message
 * first is a system one, date_string of chat_template_kwargs is not its date (its template
 * reads strftime_now alone), another role's thinking is not rendered; by default today's date
 * (strftime_now("%Y-%m-%d"), local time); channel tags in an assistant's content or thinking,
 * a kwarg not a string, builtin_tools not a list, broken tools and unknown roles refused;
 * the developer role and thinking are gpt-oss's alone, its kwargs ignored by the other
 * templates. */
START_TEST(test_gpt_oss)
{
    char cfg[4300];
    nnt_tokenizer *tok = load_tokenizer("gpt_oss", cfg, sizeof cfg);
    nnt_sft_options so = NNT_SFT_OPTIONS_INIT;
    so.tokenizer_config = cfg;
    so.date = GPTOSS_DATE;
    nnt_sft *s = NULL;
    EXPECT_OK(nnt_sft_create(tok, &so, &s));
    static const char *const SAME[][2] = {
        {"{\"messages\": [" GPTOSS_USER ", {\"role\": \"assistant\", \"content\": \"Yo\", "
         "\"thinking\": null, \"reasoning\": null}]}",
         "{\"messages\": [" GPTOSS_USER ", {\"role\": \"assistant\", \"content\": \"Yo\"}]}"},
        {"{\"messages\": [" GPTOSS_USER ", {\"role\": \"assistant\", \"content\": \"Yo\", "
         "\"reasoning_content\": \"no\", \"thinking\": \"Greet.\"}]}",
         "{\"messages\": [" GPTOSS_USER ", {\"role\": \"assistant\", \"content\": \"Yo\", "
         "\"thinking\": \"Greet.\"}]}"},
        {"{\"messages\": [" GPTOSS_USER ", {\"role\": \"assistant\", \"content\": \"Yo\", "
         "\"thinking\": null, \"reasoning\": \"Greet.\"}]}",
         "{\"messages\": [" GPTOSS_USER ", {\"role\": \"assistant\", \"content\": \"Yo\", "
         "\"thinking\": \"Greet.\"}]}"},
        {"{\"messages\": [{\"role\": \"developer\", \"content\": \"Be brief.\"}, " GPTOSS_USER
         ", {\"role\": \"assistant\", \"content\": \"Yo\"}]}",
         "{\"messages\": [{\"role\": \"system\", \"content\": \"Be brief.\"}, " GPTOSS_USER
         ", {\"role\": \"assistant\", \"content\": \"Yo\"}]}"},
        {"{\"chat_template_kwargs\": {\"date_string\": \"03 Feb 2025\"}, \"messages\": ["
         GPTOSS_USER ", {\"role\": \"assistant\", \"content\": \"Yo\"}]}",
         "{\"messages\": [" GPTOSS_USER ", {\"role\": \"assistant\", \"content\": \"Yo\"}]}"},
        {"{\"messages\": [{\"role\": \"user\", \"content\": \"Hi\", \"thinking\": \"x\"}, "
         "{\"role\": \"assistant\", \"content\": \"Yo\"}]}",
         "{\"messages\": [" GPTOSS_USER ", {\"role\": \"assistant\", \"content\": \"Yo\"}]}"},
    };
    for (size_t k = 0; k < sizeof SAME / sizeof SAME[0]; k++)
        same_encoding(s, SAME[k][0], SAME[k][1]);
    /* an empty answer with thinking is something to learn; channel tags in a user's content
     * are the user's */
    const char *ok[] = {
        "{\"messages\": [" GPTOSS_USER ", {\"role\": \"assistant\", \"content\": \"\", "
        "\"thinking\": \"Hm.\"}]}",
        "{\"messages\": [{\"role\": \"user\", \"content\": \"<|channel|>final<|message|>\"}, "
        "{\"role\": \"assistant\", \"content\": \"Yo\"}]}"};
    const int32_t *ids;
    const uint8_t *counts;
    size_t n = 0;
    for (int k = 0; k < 2; k++)
        EXPECT_OK(nnt_sft_encode(s, ok[k], strlen(ok[k]), &ids, &counts, &n));
    static const struct {
        const char *record, *says;
    } BAD[] = {
        {"{\"messages\": [" GPTOSS_USER ", {\"role\": \"assistant\", \"content\": \"a"
         "<|channel|>final<|message|>b\"}]}", "messages[1]'s content holds \"<|channel|>final"
         "<|message|>\", which the gpt-oss template refuses: give the analysis as \"thinking\""},
        {"{\"messages\": [" GPTOSS_USER ", {\"role\": \"assistant\", \"content\": \"Yo\", "
         "\"reasoning_content\": \"<|channel|>analysis<|message|>\"}]}",
         "messages[1]'s thinking holds \"<|channel|>analysis<|message|>\""},
        {"{\"messages\": [" GPTOSS_USER ", {\"role\": \"assistant\", \"content\": \"Yo\", "
         "\"thinking\": 3}]}", "(, \"thinking\" or \"reasoning_content\" or \"reasoning\": "
         "string or null)"},
        {"{\"messages\": [" GPTOSS_USER ", {\"role\": \"assistant\", \"content\": \"\", "
         "\"thinking\": \"\"}]}", "messages[1] is an empty assistant message"},
        {"{\"messages\": [" GPTOSS_USER ", {\"role\": \"assistant\", \"content\": \"Yo\", "
         "\"name\": \"a\"}]}", "(role, content, thinking, reasoning_content, reasoning, an assistant's "
         "tool_calls"},
        {"{\"messages\": [" GPTOSS_USER ", {\"role\": \"critic\", \"content\": \"Yo\"}]}",
         "which the gpt-oss template does not know (system, developer, user, assistant, tool)"},
        {"{\"messages\": [" GPTOSS_USER ", {\"role\": \"assistant\", \"content\": \"\", "
         "\"tool_calls\": [{\"type\": \"function\"}]}]}",
         "messages[1].tool_calls[0] has no string \"name\""},
        {"{\"messages\": [" GPTOSS_USER ", {\"role\": \"tool\", \"content\": \"6\"}, "
         "{\"role\": \"assistant\", \"content\": \"Yo\"}]}",
         "messages[1] is a tool's response without an assistant's tool call before it"},
        {"{\"tools\": [{\"type\": \"function\"}], \"messages\": [" GPTOSS_USER ", "
         "{\"role\": \"assistant\", \"content\": \"Yo\"}]}",
         "tools[0] is not {\"type\": \"function\", \"function\": {\"name\": string, "
         "\"description\": string, ...}}"},
        {"{\"chat_template_kwargs\": {\"builtin_tools\": {\"browser\": 1}}, \"messages\": ["
         GPTOSS_USER ", {\"role\": \"assistant\", \"content\": \"Yo\"}]}",
         "chat_template_kwargs.builtin_tools is not a list"},
        {"{\"chat_template_kwargs\": {\"reasoning_effort\": 1}, \"text\": \"a\"}",
         "chat_template_kwargs.reasoning_effort is not a string"},
        {"{\"chat_template_kwargs\": {\"model_identity\": null}, \"text\": \"a\"}",
         "chat_template_kwargs.model_identity is not a string"},
    };
    for (size_t k = 0; k < sizeof BAD / sizeof BAD[0]; k++)
        EXPECT_FAIL_MSG(nnt_sft_encode(s, BAD[k].record, strlen(BAD[k].record), &ids, &counts,
                                       &n), NNT_E_FORMAT, BAD[k].says);
    nnt_sft_destroy(s);
    /* by default today's date, as strftime_now("%Y-%m-%d") */
    char today[2][32], text[2048];
    const char *rec = "{\"messages\": [" GPTOSS_USER ", {\"role\": \"assistant\", "
                      "\"content\": \"Yo\"}]}";
    for (int k = 0; k < 2; k++) {
        time_t now = time(NULL);
        strftime(today[k], sizeof today[k], "%Y-%m-%d", localtime(&now));
    }
    so.date = NULL;
    EXPECT_OK(nnt_sft_create(tok, &so, &s));
    EXPECT_OK(nnt_sft_encode(s, rec, strlen(rec), &ids, &counts, &n));
    size_t len = 0;
    EXPECT_OK(nnt_tokenizer_decode(tok, ids, n, text, sizeof text, &len));
    ck_assert_uint_lt(len, sizeof text);
    text[len] = '\0';
    char want[64];
    snprintf(want, sizeof want, "\nCurrent date: %s\n\n", today[1]);
    if (strcmp(today[0], today[1]) == 0) {   /* not across midnight */
        printf("test_sft gpt-oss: today is \"%s\"\n", today[0]);
        ck_assert_msg(strstr(text, want) != NULL, "%s is not dated %s", text, today[0]);
    }
    nnt_sft_destroy(s);
    /* developer and thinking are gpt-oss's; its kwargs ignored by another template */
    so.chat_template = NNT_CHAT_QWEN3_2507;
    EXPECT_OK(nnt_sft_create(tok, &so, &s));
    const char *dev = "{\"messages\": [{\"role\": \"developer\", \"content\": \"x\"}, "
                      GPTOSS_USER ", {\"role\": \"assistant\", \"content\": \"Yo\"}]}";
    EXPECT_FAIL_MSG(nnt_sft_encode(s, dev, strlen(dev), &ids, &counts, &n), NNT_E_FORMAT,
                    "role \"developer\", which the Qwen3-Instruct-2507 template does not know "
                    "(system, user, assistant, tool)");
    const char *think = "{\"messages\": [" GPTOSS_USER ", {\"role\": \"assistant\", "
                        "\"content\": \"Yo\", \"thinking\": \"x\"}]}";
    EXPECT_FAIL_MSG(nnt_sft_encode(s, think, strlen(think), &ids, &counts, &n), NNT_E_FORMAT,
                    "has the key \"thinking\", which nnt does not render with the "
                    "Qwen3-Instruct-2507 template");
    same_encoding(s, "{\"chat_template_kwargs\": {\"reasoning_effort\": \"high\", "
                     "\"model_identity\": \"M\"}, \"messages\": [" GPTOSS_USER ", {\"role\": "
                     "\"assistant\", \"content\": \"Yo\"}]}", rec);
    nnt_sft_destroy(s);
    nnt_tokenizer_destroy(tok);
}
END_TEST

/* all_tokens (TRL with completion_only_loss=False, without assistant_only_loss): every token
 * counts and conversations are rendered by the published template (NAME.all_expected):
 * _i 0 llama3 (a record of each kind), 1 qwen3 (think blocks only after the last user
 * message, also as prompt/completion), 2 deepseek_r1 (reasoning split off every assistant
 * turn), 3 gpt_oss (dated as its fixture; its own records, also as prompt/completion); then a
 * conversation without an assistant message is taken, and all_tokens 2 refused. */
START_TEST(test_all_tokens)
{
    static const char *const NAMES[] = {"llama3", "qwen3", "deepseek_r1", "gpt_oss"};
    static const char *const SETS[][3] = {
        {"records.jsonl", NULL, NULL},
        {"chat_records.jsonl", "qwen3_records.jsonl", "chat_pc.jsonl"},
        {"chat_records.jsonl", "r1_records.jsonl", "r1_pc.jsonl"},
        {"chat_records.jsonl", "gptoss_records.jsonl", "gptoss_pc.jsonl"}};
    static const int COUNT[] = {6, 12, 7, 14};
    char cfg[4300];
    nnt_tokenizer *tok = load_tokenizer(NAMES[_i], cfg, sizeof cfg);
    nnt_sft_options so = NNT_SFT_OPTIONS_INIT;
    so.tokenizer_config = cfg;
    so.date = _i == 3 ? GPTOSS_DATE : NULL;
    so.all_tokens = 1;
    nnt_sft *s = NULL;
    EXPECT_OK(nnt_sft_create(tok, &so, &s));
    int n = 0;
    for (int set = 0; set < 3 && SETS[_i][set]; set++)
        n += compare_against(s, NAMES[_i], "all_expected", SETS[_i][set], 0, n);
    ck_assert_int_eq(n, COUNT[_i]);
    const char *users = "{\"messages\": [{\"role\": \"user\", \"content\": \"Hi\"}]}";
    const int32_t *ids;
    const uint8_t *counts;
    size_t got = 0;
    EXPECT_OK(nnt_sft_encode(s, users, strlen(users), &ids, &counts, &got));
    ck_assert_uint_gt(got, 1);
    ck_assert_int_eq(counts[got - 1], 1);
    nnt_sft_destroy(s);
    so.all_tokens = 2;
    s = (nnt_sft *)&s;
    EXPECT_FAIL_MSG(nnt_sft_create(tok, &so, &s), NNT_E_INVAL, "all_tokens 2 (use 0 or 1)");
    ck_assert_ptr_null(s);
    so.all_tokens = 0, so.no_thinking = 2;
    EXPECT_FAIL_MSG(nnt_sft_create(tok, &so, &s), NNT_E_INVAL, "no_thinking 2 (use 0 or 1)");
    so.no_thinking = 1;   /* a switch Qwen3's template alone has */
    if (_i != 1)
        EXPECT_FAIL_MSG(nnt_sft_create(tok, &so, &s), NNT_E_INVAL, _i == 0
                        ? "no_thinking: the Llama 3 template has no switch for thinking"
                        : _i == 2 ? "no_thinking: the DeepSeek-R1-Distill template has no switch"
                        : "no_thinking: the gpt-oss template has no switch");
    ck_assert_ptr_null(s);
    nnt_tokenizer_destroy(tok);
}
END_TEST

/* line with each "role", "content" and "messages" key written as ShareGPT's "from", "value"
 * and "conversations" (the fixtures' texts hold none of them quoted) */
static void sharegpt(const char *line, char *out, size_t cap)
{
    static const char *const OLD[] = {"\"role\"", "\"content\"", "\"messages\""};
    static const char *const NEW[] = {"\"from\"", "\"value\"", "\"conversations\""};
    size_t o = 0;
    while (*line && o + 20 < cap) {
        int k = 0;
        while (k < 3 && strncmp(line, OLD[k], strlen(OLD[k])) != 0)
            k++;
        if (k < 3) {
            o += (size_t)snprintf(out + o, cap - o, "%s", NEW[k]);
            line += strlen(OLD[k]);
        } else {
            out[o++] = *line++;
        }
    }
    ck_assert_int_eq(*line, 0);
    out[o] = '\0';
}

/* ShareGPT's keys ({"conversations": [{"from": ..., "value": ...}]}, and from/value in the
 * lists of a conversational prompt/completion and of a prompt) give the ids and counts of
 * the same records with role/content (TRL's maybe_convert_to_chatml renames the keys alone),
 * with ChatML, Qwen3 and Gemma 3's templates; ShareGPT's roles are refused with a hint, and
 * a message with both names of a key is refused. */
START_TEST(test_sharegpt)
{
    static const char *const NAMES[] = {"chatml", "qwen3", "gemma3"};
    static const char *const FILES[][2] = {{"chat_records.jsonl", "chat_pc.jsonl"},
                                           {"qwen3_records.jsonl", "qwen3_pc.jsonl"},
                                           {"gemma3_parts_records.jsonl", "gemma_pc.jsonl"}};
    char cfg[4300], line[8192], renamed[8192];
    nnt_tokenizer *tok = load_tokenizer(NAMES[_i], cfg, sizeof cfg);
    nnt_sft *s = open_sft(tok, cfg, NNT_CHAT_AUTO);
    int compared = 0;
    for (int file = 0; file < 2; file++) {
        FILE *f = fopen(fixture(FILES[_i][file]), "r");
        ck_assert_ptr_nonnull(f);
        while (fgets(line, sizeof line, f)) {
            line[strcspn(line, "\n")] = '\0';
            sharegpt(line, renamed, sizeof renamed);
            ck_assert_str_ne(line, renamed);
            const int32_t *ids;
            const uint8_t *counts;
            size_t n = 0, m = 0;
            EXPECT_OK(nnt_sft_encode(s, line, strlen(line), &ids, &counts, &n));
            int32_t *want = malloc(n * sizeof *want);
            uint8_t *want_counts = malloc(n);
            memcpy(want, ids, n * sizeof *want);
            memcpy(want_counts, counts, n);
            EXPECT_OK(nnt_sft_encode(s, renamed, strlen(renamed), &ids, &counts, &m));
            ck_assert_int_eq(m, n);
            ck_assert_int_eq(memcmp(ids, want, n * sizeof *want), 0);
            ck_assert_int_eq(memcmp(counts, want_counts, n), 0);
            free(want), free(want_counts);
            compared++;
        }
        fclose(f);
    }
    ck_assert_int_ge(compared, 4);
    const int32_t *ids;
    const uint8_t *counts;
    size_t n = 0;
    const char *prompt = "{\"conversations\": [{\"from\": \"user\", \"value\": \"Hi\"}]}";
    const char *same = "{\"messages\": [{\"role\": \"user\", \"content\": \"Hi\"}]}";
    int32_t first[256];
    EXPECT_OK(nnt_sft_encode_prompt(s, same, strlen(same), &ids, &n));
    ck_assert_uint_le(n, 256);
    memcpy(first, ids, n * sizeof *ids);
    size_t m = 0;
    EXPECT_OK(nnt_sft_encode_prompt(s, prompt, strlen(prompt), &ids, &m));
    ck_assert_int_eq(m, n);
    ck_assert_int_eq(memcmp(ids, first, n * sizeof *ids), 0);
    const char *human = "{\"conversations\": [{\"from\": \"human\", \"value\": \"Hi\"}, "
                        "{\"from\": \"gpt\", \"value\": \"Hello!\"}]}";
    EXPECT_FAIL_MSG(nnt_sft_encode(s, human, strlen(human), &ids, &counts, &n), NNT_E_FORMAT,
                    "messages[0] has role \"human\"");
    ck_assert_ptr_nonnull(strstr(nnt_ctx_last_error(NULL), "ShareGPT's human and gpt are not "
                                 "renamed"));
    const char *both = "{\"conversations\": [{\"from\": \"user\", \"role\": \"user\", "
                       "\"value\": \"Hi\"}, {\"from\": \"assistant\", \"value\": \"Hello!\"}]}";
    EXPECT_FAIL_MSG(nnt_sft_encode(s, both, strlen(both), &ids, &counts, &n), NNT_E_FORMAT,
                    "conversations[0] has both \"from\" and \"role\"");
    const char *two = "{\"conversations\": [], \"messages\": []}";
    EXPECT_FAIL_MSG(nnt_sft_encode(s, two, strlen(two), &ids, &counts, &n), NNT_E_FORMAT,
                    "(this one has several)");
    nnt_sft_destroy(s);
    nnt_tokenizer_destroy(tok);
}
END_TEST

/* A configuration with tokenizer_config.json's chat_template, and chat_template.jinja */
static void write_template_dir(const char *d, const char *json_template, const char *jinja)
{
    char path[4300];
    snprintf(path, sizeof path, "%s/tokenizer_config.json", d);
    FILE *f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    fprintf(f, "{\"eos_token\": \"<|im_end|>\", \"pad_token\": \"<|endoftext|>\"%s%s%s}",
            json_template ? ", \"chat_template\": \"" : "", json_template ? json_template : "",
            json_template ? "\"" : "");
    ck_assert_int_eq(fclose(f), 0);
    snprintf(path, sizeof path, "%s/chat_template.jinja", d);
    unlink(path);
    if (jinja) {
        f = fopen(path, "w");
        ck_assert_ptr_nonnull(f);
        fputs(jinja, f);
        ck_assert_int_eq(fclose(f), 0);
    }
}

/* The chat template of a fixture's tokenizer_config.json, its JSON string decoded (\n, \t,
 * \", \\: what these templates use) */
static char *fixture_template(const char *name)
{
    char path[4300];
    snprintf(path, sizeof path, "%s/tokenizer_config.json", fixture(name));
    FILE *f = fopen(path, "rb");
    ck_assert_ptr_nonnull(f);
    static char raw[65536];
    size_t n = fread(raw, 1, sizeof raw - 1, f);
    fclose(f);
    raw[n] = '\0';
    char *p = strstr(raw, "\"chat_template\": \"");
    ck_assert_ptr_nonnull(p);
    p += strlen("\"chat_template\": \"");
    char *out = malloc(n + 1), *o = out;
    for (; *p && *p != '"'; p++) {   /* JSON string: \n \" \\ and \uXXXX (none here) */
        if (*p != '\\') {
            *o++ = *p;
            continue;
        }
        p++;
        *o++ = *p == 'n' ? '\n' : *p == 't' ? '\t' : *p;
    }
    *o = '\0';
    return out;
}

/* chat_template.jinja over tokenizer_config.json's; Qwen2.5 with another default system
 * message; a changed template refused; broken tool calls, unknown roles and keys refused */
START_TEST(test_chat_refusals)
{
    char cfg[4300], sub[200];
    nnt_tokenizer *tok = load_tokenizer("qwen2_5", cfg, sizeof cfg);
    snprintf(sub, sizeof sub, "%s/tmpl", dir);
    ck_assert_int_eq(mkdir(sub, 0755), 0);
    char *qwen3 = fixture_template("qwen3"), *qwen25 = fixture_template("qwen2_5");
    nnt_sft_options so = NNT_SFT_OPTIONS_INIT;
    so.tokenizer_config = sub;
    nnt_sft *s = NULL;
    nnt_chat_template t;
    /* the .jinja file wins, as in transformers */
    write_template_dir(sub, "{{ messages }}", qwen3);
    EXPECT_OK(nnt_sft_create(tok, &so, &s));
    EXPECT_OK(nnt_sft_template_of(s, &t));
    ck_assert_int_eq(t, NNT_CHAT_QWEN3);
    nnt_sft_destroy(s);
    /* Qwen2.5's template with another default system message (as its base models ship) */
    const char *qs = "You are Qwen, created by Alibaba Cloud. You are a helpful assistant.";
    char *other = malloc(strlen(qwen25) + 1), *w = other;
    for (const char *p = qwen25; *p;) {
        if (strncmp(p, qs, strlen(qs)) == 0) {
            w += sprintf(w, "You are a helpful assistant.");
            p += strlen(qs);
        } else {
            *w++ = *p++;
        }
    }
    *w = '\0';
    write_template_dir(sub, NULL, other);
    EXPECT_OK(nnt_sft_create(tok, &so, &s));
    EXPECT_OK(nnt_sft_template_of(s, &t));
    ck_assert_int_eq(t, NNT_CHAT_QWEN2_5);
    const char *rec = "{\"messages\": [{\"role\": \"user\", \"content\": \"Hi\"}, "
                      "{\"role\": \"assistant\", \"content\": \"Hello!\"}]}";
    const int32_t *ids;
    const uint8_t *counts;
    size_t n = 0, len = 0;
    EXPECT_OK(nnt_sft_encode(s, rec, strlen(rec), &ids, &counts, &n));
    char text[1024];
    EXPECT_OK(nnt_tokenizer_decode(tok, ids, n, text, sizeof text, &len));
    text[len < sizeof text ? len : sizeof text - 1] = '\0';
    ck_assert_str_eq(text, "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n"
                           "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\nHello!"
                           "<|im_end|>\n");
    nnt_sft_destroy(s);
    /* one character changed: not the published template */
    other[strlen(other) - 3] = ' ';
    write_template_dir(sub, NULL, other);
    EXPECT_FAIL_MSG(nnt_sft_create(tok, &so, &s), NNT_E_UNSUPPORTED, "chat_template.jinja");
    /* records with tools or keys the template does not render */
    write_template_dir(sub, NULL, qwen3);
    EXPECT_OK(nnt_sft_create(tok, &so, &s));
    static const struct {
        const char *record, *says;
    } BAD[] = {
        {"{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}, {\"role\": "
         "\"assistant\", \"content\": \"\", \"tool_calls\": [{\"type\": \"function\"}]}]}",
         "messages[1].tool_calls[0] has no string \"name\""},
        {"{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}, {\"role\": \"function\", "
         "\"content\": \"6\"}, {\"role\": \"assistant\", \"content\": \"y\"}]}",
         "role \"function\", which the Qwen3 template does not know (system, user, assistant, "
         "tool)"},
        {"{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}, {\"role\": "
         "\"assistant\", \"content\": \"y\"}], \"tools\": [1]}", "tools[0] is not a JSON object"},
        {"{\"messages\": [{\"role\": \"user\", \"content\": \"x\", \"name\": \"a\"}, "
         "{\"role\": \"assistant\", \"content\": \"y\"}]}",
         "messages[0] has the key \"name\", which nnt does not render with the Qwen3 template"},
        {"{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}, {\"role\": "
         "\"assistant\", \"content\": \"\"}]}", "empty assistant message"},
        {"{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}, {\"role\": "
         "\"assistant\", \"content\": \"y\", \"reasoning_content\": 3}]}",
         "\"reasoning_content\" or \"thinking\" or \"reasoning\": string or null"},
        {"{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}, {\"role\": "
         "\"assistant\", \"content\": \"y\", \"thinking\": [1]}]}",
         "\"reasoning_content\" or \"thinking\" or \"reasoning\": string or null"},
    };
    for (size_t k = 0; k < sizeof BAD / sizeof BAD[0]; k++) {
        expect_refused(s, BAD[k].record, BAD[k].says);
    }
    /* transformers hands Qwen3's template its reasoning_content from the first of
     * reasoning_content, thinking, reasoning that is not null (_alias_reasoning_fields):
     * each name renders as reasoning_content does, reasoning_content wins over thinking, a
     * null one is skipped; and the reasoning shows (not the record without it) */
    static const char *const ALIASES[] = {
        "\"reasoning_content\": \"z z\"", "\"thinking\": \"z z\"", "\"reasoning\": \"z z\"",
        "\"reasoning_content\": \"z z\", \"thinking\": \"w\"",
        "\"reasoning_content\": null, \"reasoning\": \"z z\"", NULL};
    int32_t first[256];
    uint8_t first_counts[256];
    size_t nfirst = 0;
    for (int k = 0; k < 6; k++) {
        char rec[256];
        snprintf(rec, sizeof rec, "{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}, "
                 "{\"role\": \"assistant\", \"content\": \"y\"%s%s}]}", ALIASES[k] ? ", " : "",
                 ALIASES[k] ? ALIASES[k] : "");
        EXPECT_OK(nnt_sft_encode(s, rec, strlen(rec), &ids, &counts, &n));
        ck_assert(n <= 256);
        if (k == 0) {
            memcpy(first, ids, n * sizeof *ids), memcpy(first_counts, counts, n);
            nfirst = n;
            continue;
        }
        int same = n == nfirst && memcmp(ids, first, n * sizeof *ids) == 0 &&
                   memcmp(counts, first_counts, n) == 0;
        ck_assert_msg(ALIASES[k] ? same : !same, "Qwen3 reasoning as %s: %s the ids of "
                      "reasoning_content", ALIASES[k] ? ALIASES[k] : "none",
                      same ? "the same as" : "not");
    }
    nnt_sft_destroy(s);
    /* reasoning_content is Qwen3's alone */
    so.chat_template = NNT_CHAT_LLAMA3_1;
    EXPECT_OK(nnt_sft_create(tok, &so, &s));
    const char *r2 = "{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}, "
                     "{\"role\": \"assistant\", \"content\": \"y\", \"reasoning_content\": "
                     "\"z\"}]}";
    EXPECT_FAIL_MSG(nnt_sft_encode(s, r2, strlen(r2), &ids, &counts, &n), NNT_E_FORMAT,
                    "key \"reasoning_content\", which nnt does not render with the Llama 3.1");
    nnt_sft_destroy(s);
    so.date = "";
    EXPECT_FAIL_MSG(nnt_sft_create(tok, &so, &s), NNT_E_INVAL, "date");
    free(qwen3), free(qwen25), free(other);
    nnt_tokenizer_destroy(tok);
}
END_TEST

/* Gemma's rules: Gemma (and Gemma 2) refuse a first system message, which Gemma 3 puts before
 * the first user message; both want users on the even turns; with no tokenizer_config.json
 * the chosen template's bos is <bos>; an assistant message of white space only is refused */
START_TEST(test_gemma_turns)
{
    char cfg[4300];
    nnt_tokenizer *tok = load_tokenizer("gemma3", cfg, sizeof cfg);
    const char *sys_first = "{\"messages\": [{\"role\": \"system\", \"content\": \"Be brief.\"}, "
                            "{\"role\": \"user\", \"content\": \"Hi\"}, {\"role\": "
                            "\"assistant\", \"content\": \"Hello!\"}]}";
    const int32_t *ids;
    const uint8_t *counts;
    size_t n = 0, len = 0;
    nnt_sft *s = open_sft(tok, cfg, NNT_CHAT_GEMMA);
    EXPECT_FAIL_MSG(nnt_sft_encode(s, sys_first, strlen(sys_first), &ids, &counts, &n),
                    NNT_E_FORMAT, "messages[0] is a system message, which the Gemma template "
                    "refuses");
    static const struct {
        const char *record, *says;
    } BAD[] = {
        {"{\"messages\": [{\"role\": \"assistant\", \"content\": \"x\"}, {\"role\": "
         "\"user\", \"content\": \"y\"}]}", "messages[0] is a \"assistant\" message where "
         "the %s template takes a user one"},
        {"{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}, {\"role\": "
         "\"user\", \"content\": \"y\"}, {\"role\": \"assistant\", \"content\": \"z\"}]}",
         "messages[1] is a \"user\" message where the %s template takes an assistant one"},
        {"{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}, {\"role\": "
         "\"assistant\", \"content\": \" \\n\"}]}", "messages[1] is an assistant message of "
         "white space only"},
    };
    for (int g = 0; g < 2; g++) {
        if (g == 1) {
            nnt_sft_destroy(s);
            s = open_sft(tok, cfg, NNT_CHAT_GEMMA3);
        }
        for (size_t k = 0; k < sizeof BAD / sizeof BAD[0]; k++) {
            char says[256];
            snprintf(says, sizeof says, BAD[k].says, g ? "Gemma 3" : "Gemma");
            int rc = nnt_sft_encode(s, BAD[k].record, strlen(BAD[k].record), &ids, &counts, &n);
            ck_assert_msg(rc == NNT_E_FORMAT, "%s: rc %d", BAD[k].record, rc);
            ck_assert_msg(strstr(nnt_ctx_last_error(NULL), says) != NULL,
                          "%s: message '%s' does not say '%s'", BAD[k].record,
                          nnt_ctx_last_error(NULL), says);
        }
    }
    /* Gemma 3 without a tokenizer_config.json: <bos> first, the system text untrimmed */
    nnt_sft_destroy(s);
    s = open_sft(tok, NULL, NNT_CHAT_GEMMA3);
    EXPECT_OK(nnt_sft_encode(s, sys_first, strlen(sys_first), &ids, &counts, &n));
    char text[1024];
    EXPECT_OK(nnt_tokenizer_decode(tok, ids, n, text, sizeof text, &len));
    text[len < sizeof text ? len : sizeof text - 1] = '\0';
    ck_assert_str_eq(text, "<bos><start_of_turn>user\nBe brief.\n\nHi<end_of_turn>\n"
                           "<start_of_turn>model\nHello!<end_of_turn>\n");
    nnt_sft_destroy(s);
    nnt_tokenizer_destroy(tok);
}
END_TEST

/* Gemma 3's contents as lists of parts: text parts trimmed one after another (other keys of a
 * part ignored, as the template ignores them), an empty list nothing; images, other kinds of
 * part, a part without text, a system message of several parts, an assistant's parts of white
 * space only, and lists with another template refused, each naming what is wrong */
START_TEST(test_gemma3_parts)
{
    char cfg[4300], text[1024];
    nnt_tokenizer *tok = load_tokenizer("gemma3", cfg, sizeof cfg);
    nnt_sft *s = open_sft(tok, cfg, NNT_CHAT_GEMMA3);
    const char *rec = "{\"messages\": [{\"role\": \"system\", \"content\": [{\"type\": \"text\", "
                      "\"text\": \" Be brief. \"}]}, {\"role\": \"user\", \"content\": []}, "
                      "{\"role\": \"assistant\", \"content\": [{\"type\": \"text\", \"text\": "
                      "\" Hel\", \"image\": null}, {\"text\": \"lo! \", \"type\": \"text\"}]}]}";
    const int32_t *ids;
    const uint8_t *counts;
    size_t n = 0, len = 0;
    EXPECT_OK(nnt_sft_encode(s, rec, strlen(rec), &ids, &counts, &n));
    EXPECT_OK(nnt_tokenizer_decode(tok, ids, n, text, sizeof text, &len));
    text[len < sizeof text ? len : sizeof text - 1] = '\0';
    ck_assert_str_eq(text, "<bos><start_of_turn>user\n Be brief. \n\n<end_of_turn>\n"
                           "<start_of_turn>model\nHello!<end_of_turn>\n");
    static const struct {
        const char *content, *says;
    } BAD[] = {
        {"[{\"type\": \"image\", \"url\": \"a.png\"}]", "messages[1].content[0] is a part of "
         "type \"image\": nnt trains text models and renders text parts only"},
        {"[{\"type\": \"text\", \"text\": \"x\"}, {\"type\": \"audio\"}]", "messages[1]."
         "content[1] is a part of type \"audio\""},
        {"[{\"type\": \"text\"}]", "messages[1].content[0] is a text part without a string "
         "\"text\""},
        {"[{\"type\": \"text\", \"text\": 3}]", "without a string \"text\""},
        {"[\"x\"]", "messages[1].content[0] is not a part {\"type\": \"text\", \"text\": "
         "string}"},
        {"[{\"text\": \"x\"}]", "messages[1].content[0] is not a part"},
        {"[{\"type\": \"text\", \"text\": \" \"}, {\"type\": \"text\", \"text\": \"\\n\"}]",
         "messages[1] is an assistant message of white space only"},
        {"[]", "messages[1] is an assistant message of white space only"},
        {"3", "messages[1] is not {\"role\": string, \"content\": string or [text parts]}"},
    };
    char bad[512];
    for (size_t k = 0; k < sizeof BAD / sizeof BAD[0]; k++) {
        snprintf(bad, sizeof bad, "{\"messages\": [{\"role\": \"user\", \"content\": \"Hi\"}, "
                 "{\"role\": \"assistant\", \"content\": %s}]}", BAD[k].content);
        int rc = nnt_sft_encode(s, bad, strlen(bad), &ids, &counts, &n);
        ck_assert_msg(rc == NNT_E_FORMAT, "%s: rc %d", bad, rc);
        ck_assert_msg(strstr(nnt_ctx_last_error(NULL), BAD[k].says) != NULL, "%s: message '%s' "
                      "does not say '%s'", bad, nnt_ctx_last_error(NULL), BAD[k].says);
    }
    const char *two = "{\"messages\": [{\"role\": \"system\", \"content\": [{\"type\": \"text\", "
                      "\"text\": \"a\"}, {\"type\": \"text\", \"text\": \"b\"}]}, {\"role\": "
                      "\"user\", \"content\": \"Hi\"}]}";
    EXPECT_FAIL_MSG(nnt_sft_encode_prompt(s, two, strlen(two), &ids, &n), NNT_E_FORMAT,
                    "messages[0], a system message, has 2 parts: the Gemma 3 template renders "
                    "its first alone");
    nnt_sft_destroy(s);
    /* the other templates take strings: a list is refused, not rendered as its text */
    static const nnt_chat_template OTHERS[] = {NNT_CHAT_GEMMA, NNT_CHAT_CHATML, NNT_CHAT_QWEN3,
                                               NNT_CHAT_LLAMA3_1};
    const char *parts = "{\"messages\": [{\"role\": \"user\", \"content\": [{\"type\": \"text\", "
                        "\"text\": \"Hi\"}]}]}";
    for (size_t k = 0; k < sizeof OTHERS / sizeof OTHERS[0]; k++) {
        s = open_sft(tok, NULL, OTHERS[k]);
        EXPECT_FAIL_MSG(nnt_sft_encode_prompt(s, parts, strlen(parts), &ids, &n), NNT_E_FORMAT,
                        "messages[0]'s content is a list of parts, which nnt renders with the "
                        "Gemma 3 template only");
        nnt_sft_destroy(s);
    }
    nnt_tokenizer_destroy(tok);
}
END_TEST

START_TEST(test_templates_and_errors)
{
    char cfg[4300], path[128];
    nnt_tokenizer *tok = load_tokenizer("chatml", cfg, sizeof cfg);
    nnt_sft_options so = NNT_SFT_OPTIONS_INIT;
    nnt_sft *s = NULL;
    /* a template nnt does not know is refused, naming it */
    snprintf(path, sizeof path, "%s/tokenizer_config.json", dir);
    write_config(path, "{\"eos_token\": \"<|im_end|>\", \"chat_template\": \"{% for m in "
                       "messages %}### {{ m['role'] }}: {{ m['content'] }}{% endfor %}\"}");
    so.tokenizer_config = path;
    EXPECT_FAIL_MSG(nnt_sft_create(tok, &so, &s), NNT_E_UNSUPPORTED, "### {{ m['role'] }}");
    ck_assert_ptr_null(s);
    /* ChatML with tools (Qwen2.5's kind): refused, saying why */
    write_config(path, "{\"chat_template\": \"{%- if tools %}{{ tools }}{% endif %}{% for "
                       "message in messages %}{{'<|im_start|>' + message['role'] + '\\\\n' + "
                       "message['content'] + '<|im_end|>' + '\\\\n'}}{% endfor %}\"}");
    EXPECT_FAIL_MSG(nnt_sft_create(tok, &so, &s), NNT_E_UNSUPPORTED, "it has tools");
    /* ... unless the template is given */
    so.chat_template = NNT_CHAT_CHATML;
    EXPECT_OK(nnt_sft_create(tok, &so, &s));
    nnt_sft_destroy(s);
    nnt_chat_template t;
    EXPECT_OK(nnt_chat_template_from_name("llama3", &t));
    ck_assert_int_eq(t, NNT_CHAT_LLAMA3);
    EXPECT_FAIL_MSG(nnt_chat_template_from_name("vicuna", &t), NNT_E_UNSUPPORTED, "vicuna");
    /* no template: messages are refused; text still works */
    write_config(path, "{\"eos_token\": \"<|im_end|>\"}");
    so.chat_template = NNT_CHAT_AUTO;
    EXPECT_OK(nnt_sft_create(tok, &so, &s));
    const int32_t *ids;
    const uint8_t *counts;
    size_t n;
    const char *msg = "{\"messages\": [{\"role\": \"user\", \"content\": \"hi\"}, "
                      "{\"role\": \"assistant\", \"content\": \"yes\"}]}";
    EXPECT_FAIL_MSG(nnt_sft_encode(s, msg, strlen(msg), &ids, &counts, &n), NNT_E_INVAL,
                    "needs a chat template");
    const char *text = "{\"text\": \"hi\"}";
    EXPECT_OK(nnt_sft_encode(s, text, strlen(text), &ids, &counts, &n));
    nnt_sft_destroy(s);
    /* bad records */
    s = open_sft(tok, cfg, NNT_CHAT_AUTO);
    static const struct {
        const char *record, *says;
    } BAD[] = {
        {"{\"text\": \"unterminated}", "the record"},
        {"{\"prompt\": \"Q\", \"completion\": \"\"}", "empty completion"},
        {"{\"prompt\": \"Q\"}", "\"prompt\" without \"completion\""},
        {"{\"messages\": [{\"role\": \"tool\", \"content\": \"x\"}, {\"role\": \"assistant\", "
         "\"content\": \"y\"}]}", "role \"tool\""},
        {"{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}]}", "no assistant message"},
        {"{\"messages\": [{\"role\": \"assistant\", \"content\": \"\"}]}", "empty assistant"},
        {"{\"txt\": \"typo\"}", "has none"},
        {"{\"text\": \"a\", \"extra\": 1}", "unknown key \"extra\""},
        {"[1, 2]", "not a JSON object"},
        {"{\"text\": 5}", "\"text\" is not a string"},
    };
    for (size_t k = 0; k < sizeof BAD / sizeof BAD[0]; k++) {
        expect_refused(s, BAD[k].record, BAD[k].says);
    }
    nnt_sft_destroy(s);
    nnt_tokenizer_destroy(tok);
}
END_TEST

/* Read a whole small file. */
static size_t read_small(const char *path, unsigned char *buf, size_t cap)
{
    FILE *f = fopen(path, "rb");
    ck_assert_ptr_nonnull(f);
    size_t n = fread(buf, 1, cap, f);
    fclose(f);
    return n;
}

static int32_t le32(const unsigned char *p)
{
    return (int32_t)((uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
                     (uint32_t)p[3] << 24);
}

START_TEST(test_token_file)
{
    char path[128];
    snprintf(path, sizeof path, "%s/rows.bin", dir);
    nnt_token_writer_options wo = NNT_TOKEN_WRITER_OPTIONS_INIT;
    wo.mask = 1, wo.block = 8, wo.pack = 1, wo.pad = 99, wo.vocab = 1000;
    nnt_token_writer *w = NULL;
    EXPECT_OK(nnt_token_writer_open(ctx, path, &wo, &w));
    /* packed: 3 + 4 fit in a row of 8, the next 5 starts a new one; 10 is refused (no cut) */
    int32_t a[3] = {1, 2, 3}, b[4] = {4, 5, 6, 7}, c[5] = {8, 9, 10, 11, 12}, d[10];
    uint8_t ca[3] = {1, 0, 1}, cb[4] = {1, 1, 0, 1}, cc[5] = {1, 1, 1, 1, 1};
    for (int i = 0; i < 10; i++)
        d[i] = 20 + i;
    EXPECT_OK(nnt_token_writer_write_example(w, a, ca, 3));
    EXPECT_OK(nnt_token_writer_write_example(w, b, cb, 4));
    EXPECT_OK(nnt_token_writer_write_example(w, c, cc, 5));
    EXPECT_FAIL_MSG(nnt_token_writer_write_example(w, d, NULL, 10), NNT_E_INVAL,
                    "does not fit in a row of 8");
    int32_t bad[2] = {5, 1000};
    EXPECT_FAIL_MSG(nnt_token_writer_write_example(w, bad, NULL, 2), NNT_E_INVAL,
                    "outside 0..999");
    EXPECT_OK(nnt_token_writer_close(w));
    /* header: version 2, flags 3 (mask, example starts), block 8; 16 tokens, then 2 bytes of
     * mask and 2 of example starts */
    unsigned char f[4096];
    size_t size = read_small(path, f, sizeof f);
    ck_assert_uint_eq(size, 1024 + 2 * 16 + 2 + 2);
    ck_assert_int_eq(le32(f), 20240520);
    ck_assert_int_eq(le32(f + 4), 2);
    ck_assert_int_eq(le32(f + 8), 16);
    ck_assert_int_eq(le32(f + 12), 3);
    ck_assert_int_eq(le32(f + 16), 8);
    ck_assert_uint_eq(f[1024 + 34], 0x09);   /* a at 0, b at 3 */
    ck_assert_uint_eq(f[1024 + 35], 0x01);   /* c at 8 */
    static const int32_t want_ids[16] = {1, 2, 3, 4, 5, 6, 7, 99, 8, 9, 10, 11, 12, 99, 99, 99};
    /* a row's and an example's first token never count; pads never */
    static const uint8_t want_counts[16] = {0, 0, 1, 0, 1, 0, 1, 0, 0, 1, 1, 1, 1, 0, 0, 0};
    unsigned m0 = 0, m1 = 0;
    for (int i = 0; i < 8; i++)
        m0 |= (unsigned)want_counts[i] << i, m1 |= (unsigned)want_counts[8 + i] << i;
    ck_assert_uint_eq(f[1024 + 32], m0);
    ck_assert_uint_eq(f[1024 + 33], m1);
    nnt_data *data = NULL;
    EXPECT_OK(nnt_data_open(path, NNT_DATA_AUTO, NULL, 1000, &data));
    nnt_data_info di = NNT_DATA_INFO_INIT;
    EXPECT_OK(nnt_data_info_get(data, &di));
    ck_assert_int_eq(di.format, NNT_DATA_LLMC);
    ck_assert_int_eq(di.tokens, 16);
    ck_assert_int_eq(di.masked, 1);
    ck_assert_int_eq(di.counted, 7);
    ck_assert_int_eq(di.block, 8);
    ck_assert_int_eq(di.starts, 1);
    int32_t ids[20];
    uint8_t counts[20], starts[20];
    EXPECT_OK(nnt_data_read(data, 0, ids, 16));
    EXPECT_OK(nnt_data_read_mask(data, 3, counts, 17));   /* wraps */
    EXPECT_OK(nnt_data_read_starts(data, 3, starts, 17));
    for (int i = 0; i < 16; i++)
        ck_assert_int_eq(ids[i], want_ids[i]);
    for (int i = 0; i < 17; i++) {
        int at = (3 + i) % 16;
        ck_assert_int_eq(counts[i], want_counts[at]);
        ck_assert_int_eq(starts[i], at == 0 || at == 3 || at == 8);
    }
    /* a structure of the size before starts was appended: filled up to block */
    nnt_data_info old = NNT_DATA_INFO_INIT;
    old.size = offsetof(nnt_data_info, starts), old.starts = 7;
    EXPECT_OK(nnt_data_info_get(data, &old));
    ck_assert_int_eq(old.block, 8);
    ck_assert_int_eq(old.starts, 7);
    nnt_data_close(data);
    /* padded (one example a row), cut, 32-bit ids */
    wo.pack = 0, wo.cut = 1, wo.bits = 32, wo.vocab = 0;
    EXPECT_OK(nnt_token_writer_open(ctx, path, &wo, &w));
    EXPECT_OK(nnt_token_writer_write_example(w, a, ca, 3));
    EXPECT_OK(nnt_token_writer_write_example(w, d, NULL, 10));
    EXPECT_OK(nnt_token_writer_close(w));
    size = read_small(path, f, sizeof f);
    ck_assert_uint_eq(size, 1024 + 4 * 16 + 2);
    ck_assert_int_eq(le32(f), 20240801);
    ck_assert_int_eq(le32(f + 4), 8);
    ck_assert_int_eq(le32(f + 1024 + 4 * 3), 99);   /* a's row padded */
    ck_assert_int_eq(le32(f + 1024 + 4 * 15), 27);  /* d cut after 8 */
    ck_assert_uint_eq(f[1024 + 64], 0x04);          /* a: token 2 */
    ck_assert_uint_eq(f[1024 + 65], 0xfe);          /* d: all but its first */
    ck_assert_int_eq(le32(f + 12), 1);              /* padded: no example starts */
    EXPECT_OK(nnt_data_open(path, NNT_DATA_AUTO, NULL, 0, &data));
    EXPECT_OK(nnt_data_info_get(data, &di));
    ck_assert_int_eq(di.starts, 0);
    EXPECT_OK(nnt_data_read_starts(data, 0, starts, 16));
    for (int i = 0; i < 16; i++)
        ck_assert_int_eq(starts[i], 0);
    nnt_data_close(data);
    /* a reader refuses flags it does not know */
    f[12] = 9;
    FILE *o = fopen(path, "wb");
    ck_assert_uint_eq(fwrite(f, 1, size, o), size);
    ck_assert_int_eq(fclose(o), 0);
    EXPECT_FAIL_MSG(nnt_data_open(path, NNT_DATA_AUTO, NULL, 0, &data), NNT_E_FORMAT,
                    "unknown flags 0x9");
    /* the mask needs the option; examples need rows */
    wo.mask = 0;
    EXPECT_OK(nnt_token_writer_open(ctx, path, &wo, &w));
    EXPECT_FAIL_MSG(nnt_token_writer_write_masked(w, a, ca, 3), NNT_E_INVAL, "mask option");
    nnt_token_writer_destroy(w);
    wo.mask = 1, wo.block = 0;
    EXPECT_OK(nnt_token_writer_open(ctx, path, &wo, &w));
    EXPECT_FAIL_MSG(nnt_token_writer_write_example(w, a, ca, 3), NNT_E_INVAL, "block");
    EXPECT_OK(nnt_token_writer_write_masked(w, a, ca, 3));
    EXPECT_OK(nnt_token_writer_close(w));
    EXPECT_OK(nnt_data_open(path, NNT_DATA_AUTO, NULL, 0, &data));
    EXPECT_OK(nnt_data_read_mask(data, 0, counts, 3));
    ck_assert(counts[0] == 1 && counts[1] == 0 && counts[2] == 1);   /* no rows: as given */
    nnt_data_close(data);
    /* rows of 2: the first token of each never counts, whatever the call says */
    wo.block = 2;
    EXPECT_OK(nnt_token_writer_open(ctx, path, &wo, &w));
    uint8_t all[4] = {1, 1, 1, 1};
    EXPECT_OK(nnt_token_writer_write_masked(w, b, all, 4));
    EXPECT_OK(nnt_token_writer_close(w));
    EXPECT_OK(nnt_data_open(path, NNT_DATA_AUTO, NULL, 0, &data));
    EXPECT_OK(nnt_data_read_mask(data, 0, counts, 4));
    ck_assert(counts[0] == 0 && counts[1] == 1 && counts[2] == 0 && counts[3] == 1);
    nnt_data_close(data);
}
END_TEST

/* The llama3 records through nnt_sft and the writer (padded rows of T) into path; checked
 * against the fixture's rows and labels. */
static void write_rows(const char *path, const nnt_st_reader *r)
{
    char cfg[4300], line[8192];
    nnt_tokenizer *tok = load_tokenizer("llama3", cfg, sizeof cfg);
    nnt_sft *s = open_sft(tok, cfg, NNT_CHAT_AUTO);
    nnt_token_writer_options wo = NNT_TOKEN_WRITER_OPTIONS_INIT;
    wo.mask = 1, wo.block = T;
    EXPECT_OK(nnt_sft_pad_id(s, &wo.pad));
    ck_assert_int_eq(wo.pad, 1);   /* pad_token <|end_of_text|>, the fixture's padding */
    nnt_token_writer *w = NULL;
    EXPECT_OK(nnt_token_writer_open(ctx, path, &wo, &w));
    for (int k = 0; k < NREC; k++) {
        read_line(fixture("records.jsonl"), k, line, sizeof line);
        const int32_t *ids;
        const uint8_t *counts;
        size_t n;
        EXPECT_OK(nnt_sft_encode(s, line, strlen(line), &ids, &counts, &n));
        EXPECT_OK(nnt_token_writer_write_example(w, ids, counts, n));
    }
    EXPECT_OK(nnt_token_writer_close(w));
    nnt_sft_destroy(s);
    nnt_tokenizer_destroy(tok);
    int32_t *rows = fixture_read(r, "rows", NNT_IO_I32, NULL);
    int32_t *labels = fixture_read(r, "labels", NNT_IO_I32, NULL);
    nnt_data *data = NULL;
    EXPECT_OK(nnt_data_open(path, NNT_DATA_LLMC, NULL, 0, &data));
    int32_t ids[NREC * T];
    uint8_t counts[NREC * T];
    EXPECT_OK(nnt_data_read(data, 0, ids, NREC * T));
    EXPECT_OK(nnt_data_read_mask(data, 0, counts, NREC * T));
    for (int i = 0; i < NREC * T; i++) {
        ck_assert_msg(ids[i] == rows[i], "row %d token %d", i / T, i % T);
        ck_assert_msg(counts[i] == (i % T && labels[i] != -100), "row %d mask %d", i / T, i % T);
    }
    nnt_data_close(data);
    free(rows), free(labels);
}

static double losses[3];

static int on_report(const nnt_trainer_report *rep, void *user)
{
    (void)user;
    if (rep->event == NNT_TRAINER_STEP && rep->step >= 1 && rep->step <= 2)
        losses[rep->step] = rep->loss;
    return 0;
}

/* whole; batch 1, sequence 5, odd channel/hidden/vocab tiles; sequence 16, one head */
static const struct {
    nnt_tiling t;
    int64_t tile_batch, tile_seq;
} TILINGS[3] = {
    {{sizeof(nnt_tiling), 0, 0, 0, 0, 0, 0, 0}, 0, 0},
    {{sizeof(nnt_tiling), 1, 5, 7, 9, 31, 3, 0}, 1, 5},
    {{sizeof(nnt_tiling), 2, 16, 16, 48, 100, 1, 0}, 2, 16},
};

/* _i 0..2: the tilings, in order; 3: shuffled rows (tiling 1): one step of 3 x 2 rows is the
 * whole epoch in another grouping, and the step's loss and gradient, a sum over its counted
 * targets / N, are the same (the mean of means would not be). */
START_TEST(test_loss)
{
    int shuffle = _i == 3, ti = shuffle ? 1 : _i;
    char path[128];
    snprintf(path, sizeof path, "%s/sft.bin", dir);
    nnt_st_reader *r = fixture_open_st_path(fixture("step.safetensors"));
    write_rows(path, r);
    double *loss1 = fixture_read(r, "loss1", NNT_IO_F64, NULL);
    double *loss2 = fixture_read(r, "loss2", NNT_IO_F64, NULL);
    double *means = fixture_read(r, "mean_of_means", NNT_IO_F64, NULL);
    nnt_layer *model = NULL;
    EXPECT_OK(nnt_model_load_hf(ctx, fixture("model"), B, T, &TILINGS[ti].t, &model));
    nnt_optim_options oo = NNT_OPTIM_OPTIONS_INIT;
    oo.kind = NNT_OPTIM_SGD, oo.lr = 0.5, oo.accum_steps = ACCUM;
    /* the gradients are read after the step: the update after the backward, which keeps
     * them (without clipping the trainer would update during it and drop them) */
    nnt_optim *opt = NULL;
    EXPECT_OK(nnt_optim_create(ctx, &oo, &opt));
    EXPECT_OK(nnt_optim_add_layer(opt, model));
    nnt_data *data = NULL;
    EXPECT_OK(nnt_data_open(path, NNT_DATA_LLMC, NULL, 0, &data));
    nnt_trainer_options to = NNT_TRAINER_OPTIONS_INIT;
    to.batch = B, to.seq = T, to.accum = ACCUM, to.steps = 2, to.callback = on_report;
    to.tile_batch = TILINGS[ti].tile_batch, to.tile_seq = TILINGS[ti].tile_seq;
    to.shuffle = shuffle, to.seed = 11, to.update_in_backward = 0;
    if (shuffle) {   /* the micro-batches group other rows than in order */
        int other = 0;
        for (uint64_t i = 0; i < NREC; i++)
            other |= nnt_shuffled_row(to.seed, NREC, i) / B != i / B;
        ck_assert(other);
    }
    nnt_trainer *tr = NULL;
    EXPECT_OK(nnt_trainer_create(model, opt, data, &to, &tr));
    EXPECT_OK(nnt_trainer_step(tr));
    double e1 = fabs(losses[1] - loss1[0]) / loss1[0], eg = 0;
    char worst[256] = "";
    int64_t count = 0;
    EXPECT_OK(nnt_layer_num_params(model, &count, NULL));
    for (int64_t i = 0; i < count; i++) {
        nnt_param_info p = test_param_at(model, i);
        char gname[300];
        snprintf(gname, sizeof gname, "grad.%s", p.name);
        const nnt_st_entry *e = NULL;
        float *want = fixture_read(r, gname, NNT_IO_F32, &e);
        int64_t n = 0;
        float *got = test_to_host(p.grad, &n);
        ck_assert_int_eq(n, (int64_t)e->numel);
        for (int64_t k = 0; k < n; k++)   /* the optimizer divides the sums by accum */
            got[k] /= ACCUM;
        double err = test_rel_err(got, want, n);
        if (err >= eg)
            eg = err, snprintf(worst, sizeof worst, "%s", p.name);
        free(want), free(got);
    }
    EXPECT_OK(nnt_trainer_step(tr));   /* the same rows again (shuffled: a new order) */
    double e2 = fabs(losses[2] - loss2[0]) / loss2[0];
    printf("test_sft tiling %d: loss %.6f (transformers %.6f, mean of means %.6f) rel %.2e; "
           "worst gradient rel %.2e (%s); after SGD %.6f rel %.2e\n", _i, losses[1], loss1[0],
           means[0], e1, eg, worst, losses[2], e2);
    ck_assert(fabs(means[0] - loss1[0]) / loss1[0] > 1e-2);   /* the rules differ here */
    EXPECT_TOL(e1, LOSS_TOL, "tiling %d: the step's loss", _i);
    EXPECT_TOL(eg, GRAD_TOL, "tiling %d: gradient of %s", _i, worst);
    EXPECT_TOL(e2, LOSS2_TOL, "tiling %d: loss after one SGD step", _i);
    nnt_trainer_destroy(tr);
    nnt_optim_destroy(opt);
    nnt_layer_destroy(model);
    nnt_data_close(data);
    free(loss1), free(loss2), free(means);
    nnt_st_close(r);
}
END_TEST

/* Rows of T tokens are trained with T: another T is refused, naming both. */
START_TEST(test_block_must_match)
{
    char path[128];
    snprintf(path, sizeof path, "%s/sft.bin", dir);
    nnt_st_reader *r = fixture_open_st_path(fixture("step.safetensors"));
    write_rows(path, r);
    nnt_st_close(r);
    nnt_layer *model = NULL;
    EXPECT_OK(nnt_model_load_hf(ctx, fixture("model"), B, 32, NULL, &model));
    nnt_optim_options oo = NNT_OPTIM_OPTIONS_INIT;
    nnt_optim *opt = NULL;
    EXPECT_OK(nnt_optim_create(ctx, &oo, &opt));
    EXPECT_OK(nnt_optim_add_layer(opt, model));
    nnt_data *data = NULL;
    EXPECT_OK(nnt_data_open(path, NNT_DATA_LLMC, NULL, 0, &data));
    nnt_trainer_options to = NNT_TRAINER_OPTIONS_INIT;
    to.batch = B, to.seq = 32, to.steps = 1;
    nnt_trainer *tr = NULL;
    EXPECT_FAIL_MSG(nnt_trainer_create(model, opt, data, &to, &tr), NNT_E_INVAL,
                    "train with seq 64, not 32");
    nnt_optim_destroy(opt);
    nnt_layer_destroy(model);
    nnt_data_close(data);
}
END_TEST

/* tests/fixtures/cls_tiny/NAME (tests/gen_cls_fixtures.py) */
static const char *cls_fixture(const char *name, char *path, size_t cap)
{
    const char *top = getenv("top_srcdir");
    snprintf(path, cap, "%s/tests/fixtures/cls_tiny/%s", top ? top : ".", name);
    return path;
}

/* record refused by nnt_sft_encode_labelled (NNT_E_FORMAT), its message holding says */
static void expect_label_refused(nnt_sft *s, const char *record, const char *says)
{
    const int32_t *ids;
    size_t n = 7;
    int64_t label = 7;
    int rc = nnt_sft_encode_labelled(s, record, strlen(record), &ids, &n, &label);
    ck_assert_msg(rc == NNT_E_FORMAT, "%s: rc %d", record, rc);
    ck_assert_msg(n == 0 && label == -1, "%s: refused, but n %zu, label %lld", record, n,
                  (long long)label);
    ck_assert_msg(strstr(nnt_ctx_last_error(NULL), says) != NULL, "%s: message '%s' does not "
                  "say '%s'", record, nnt_ctx_last_error(NULL), says);
}

/* Classification records (nnt_sft_encode_labelled) against transformers' tokenizer(text)
 * (tests/fixtures/cls_tiny/text_NAME.expected: "label id ..." a record of text_train.jsonl,
 * then text_val.jsonl): _i 0 chatml (no special tokens added), 1 llama3 (its
 * <|begin_of_text|>); the record forms refused. */
START_TEST(test_labelled)
{
    const char *name = _i ? "llama3" : "chatml";
    char cfg[4300], line[8192], want[8192], expected[4300], set[4300], file[64];
    nnt_tokenizer *tok = load_tokenizer(name, cfg, sizeof cfg);
    nnt_sft *s = open_sft(tok, cfg, NNT_CHAT_AUTO);
    snprintf(file, sizeof file, "text_%s.expected", name);
    cls_fixture(file, expected, sizeof expected);
    int at = 0, bos_seen = 0;
    for (int split = 0; split < 2; split++) {
        cls_fixture(split ? "text_val.jsonl" : "text_train.jsonl", set, sizeof set);
        FILE *f = fopen(set, "r");
        ck_assert_msg(f != NULL, "cannot open %s", set);
        while (fgets(line, sizeof line, f)) {
            line[strcspn(line, "\n")] = '\0';
            read_line(expected, at++, want, sizeof want);
            long wanted[512];
            char *end;
            long label = strtol(want, &end, 10);   /* "label id id ..." */
            int n = parse_ints(want, wanted, 512);
            const int32_t *ids;
            size_t got = 0;
            int64_t got_label = -1;
            EXPECT_OK(nnt_sft_encode_labelled(s, line, strlen(line), &ids, &got, &got_label));
            ck_assert_msg(got_label == label, "%s record %d: label %lld, want %ld", name, at,
                          (long long)got_label, label);
            ck_assert_msg((int)got == n, "%s record %d: %zu ids, transformers %d", name, at, got, n);
            for (int k = 0; k < n; k++)
                ck_assert_msg(ids[k] == wanted[k], "%s record %d: id %d is %d, transformers %ld",
                              name, at, k, ids[k], wanted[k]);
            bos_seen += ids[0] == 0;   /* llama3's <|begin_of_text|> is id 0 */
        }
        fclose(f);
    }
    ck_assert_int_eq(at, 16);
    ck_assert_int_eq(bos_seen, _i ? 16 : 0);
    expect_label_refused(s, "{\"text\": \"hi\"}", "no \"label\"");
    expect_label_refused(s, "{\"label\": 1}", "no \"text\"");
    expect_label_refused(s, "{\"text\": 3, \"label\": 1}", "\"text\" is not a string");
    expect_label_refused(s, "{\"text\": \"hi\", \"label\": -1}", "the label -1 is not an integer");
    expect_label_refused(s, "{\"text\": \"hi\", \"label\": 1.5}", "the label 1.5 is not");
    expect_label_refused(s, "{\"text\": \"hi\", \"label\": 1e2}", "the label 1e2 is not");
    expect_label_refused(s, "{\"text\": \"hi\", \"label\": \"pos\"}", "the label \"pos\" is not");
    expect_label_refused(s, "{\"text\": \"hi\", \"label\": true}", "the label a boolean is not");
    expect_label_refused(s, "{\"text\": \"hi\", \"label\": [1]}", "the label a list is not");
    expect_label_refused(s, "{\"text\": \"hi\", \"label\": 2147483647}", "is not an integer");
    expect_label_refused(s, "{\"text\": \"hi\", \"label\": 1, \"idx\": 4}", "unknown key \"idx\"");
    expect_label_refused(s, "[\"hi\", 1]", "not a JSON object");
    expect_label_refused(s, "{\"text\": \"hi\", \"label\": 1", "");   /* malformed */
    if (!_i)   /* (llama3's post-processor gives an empty text its bos) */
        expect_label_refused(s, "{\"text\": \"\", \"label\": 0}", "an empty text");
    const int32_t *ids;
    size_t n = 0;
    int64_t label = -1;
    const char *largest = "{\"label\": 2147483646, \"text\": \"a\"}";
    EXPECT_OK(nnt_sft_encode_labelled(s, largest, strlen(largest), &ids, &n, &label));
    ck_assert_int_eq(label, 2147483646);
    ck_assert_uint_eq(n, _i ? 2 : 1);
    EXPECT_FAIL_MSG(nnt_sft_encode_labelled(s, "{}", 2, &ids, &n, NULL), NNT_E_INVAL,
                    "a NULL argument");

    /* labels by name (nnt_sft_set_label_names): a name gives its index, an index is still
     * taken, another string refused; the names cleared again */
    static const char *const names[3] = {"neg", "n\xc3\xa9utre", "pos"};
    EXPECT_OK(nnt_sft_set_label_names(s, names, 3));
    const char *by_name[4] = {"{\"text\": \"fine\", \"label\": \"pos\"}",
                              "{\"text\": \"fine\", \"label\": \"n\\u00e9utre\"}",
                              "{\"label\": \"neg\", \"text\": \"fine\"}",
                              "{\"text\": \"fine\", \"label\": 1}"};
    const int64_t want_label[4] = {2, 1, 0, 1};
    for (int r = 0; r < 4; r++) {
        EXPECT_OK(nnt_sft_encode_labelled(s, by_name[r], strlen(by_name[r]), &ids, &n, &label));
        ck_assert_msg(label == want_label[r], "%s: label %lld", by_name[r], (long long)label);
    }
    expect_label_refused(s, "{\"text\": \"hi\", \"label\": \"Pos\"}",
                         "the label \"Pos\" is none of the 3 label names");
    expect_label_refused(s, "{\"text\": \"hi\", \"label\": \"po\"}", "none of the 3");
    const char *dup[2] = {"a", "a"}, *bad = "{\"text\": \"fine\", \"label\": \"pos\"}";
    EXPECT_FAIL_MSG(nnt_sft_set_label_names(s, dup, 2), NNT_E_INVAL,
                    "labels 0 and 1 are both named \"a\"");
    EXPECT_FAIL_MSG(nnt_sft_set_label_names(s, names, 0), NNT_E_INVAL,
                    "nnt_sft_set_label_names");
    EXPECT_OK(nnt_sft_encode_labelled(s, bad, strlen(bad), &ids, &n, &label));   /* kept */
    ck_assert_int_eq(label, 2);
    EXPECT_OK(nnt_sft_set_label_names(s, NULL, 0));
    expect_label_refused(s, bad, "the label \"pos\" is not an integer");
    nnt_sft_destroy(s);
    nnt_tokenizer_destroy(tok);
}
END_TEST

static void expect_valued_refused(nnt_sft *s, const char *record, int problem, int64_t k,
                                  const char *says)
{
    const int32_t *ids;
    size_t n = 7;
    float v[4];
    int rc = nnt_sft_encode_valued(s, record, strlen(record), problem, k, &ids, &n, v);
    ck_assert_msg(rc == NNT_E_FORMAT, "%s: rc %d", record, rc);
    ck_assert_msg(n == 0, "%s: refused, but n %zu", record, n);
    ck_assert_msg(strstr(nnt_ctx_last_error(NULL), says) != NULL, "%s: message '%s' does not "
                  "say '%s'", record, nnt_ctx_last_error(NULL), says);
}

/* A token file of rows of 8 carrying k values each, three examples (write_example_values) */
static void write_valued_file(const char *path, int64_t k, float first)
{
    nnt_token_writer_options wo = NNT_TOKEN_WRITER_OPTIONS_INIT;
    wo.mask = 1, wo.block = 8, wo.pad = 99, wo.vocab = 1000, wo.row_values = k, wo.cut = 1;
    nnt_token_writer *w = NULL;
    EXPECT_OK(nnt_token_writer_open(ctx, path, &wo, &w));
    int32_t a[3] = {1, 2, 3}, c[10] = {20, 21, 22, 23, 24, 25, 26, 27, 28, 29};
    uint8_t ca[3] = {0, 0, 1};
    float v[3][3] = {{first, -2.5f, 1e-3f}, {0.25f, 0.5f, 0.75f}, {-1.0f, 3.0e4f, 0.0f}};
    EXPECT_OK(nnt_token_writer_write_example_values(w, a, ca, 3, v[0]));
    EXPECT_OK(nnt_token_writer_write_example_values(w, c, NULL, 10, v[1]));   /* cut to 8 */
    EXPECT_OK(nnt_token_writer_write_example_values(w, a, ca, 2, v[2]));
    EXPECT_OK(nnt_token_writer_close(w));
}

/* Records of classifiers trained on values (nnt_sft_encode_valued): their ids as the
 * labelled records', the values; the rows that carry them in a token file, read back
 * (nnt_data_read_row_values, wrapping); refusals of records, writers and damaged files. */
START_TEST(test_valued)
{
    char cfg[4300];
    nnt_tokenizer *tok = load_tokenizer("llama3", cfg, sizeof cfg);
    nnt_sft *s = open_sft(tok, cfg, NNT_CHAT_AUTO);
    const int32_t *ids, *lids;
    size_t n = 0, ln = 0;
    int64_t label = -1;
    float v[4] = {0};
    const char *lab = "{\"text\": \"Great coffee.\", \"label\": 1}";
    EXPECT_OK(nnt_sft_encode_labelled(s, lab, strlen(lab), &lids, &ln, &label));
    int32_t want[64];
    ck_assert_uint_le(ln, 64);
    memcpy(want, lids, ln * sizeof *lids);
    const char *one = "{\"label\": -0.1, \"text\": \"Great coffee.\"}";
    EXPECT_OK(nnt_sft_encode_valued(s, one, strlen(one), NNT_PROBLEM_REGRESSION, 1, &ids, &n, v));
    ck_assert_uint_eq(n, ln);
    ck_assert(memcmp(ids, want, n * sizeof *ids) == 0);
    ck_assert(v[0] == -0.1f);
    const char *three = "{\"text\": \"Great coffee.\", \"label\": [1, 0.3, 0e0]}";
    EXPECT_OK(nnt_sft_encode_valued(s, three, strlen(three), NNT_PROBLEM_MULTI_LABEL, 3, &ids, &n,
                                    v));
    ck_assert(v[0] == 1.0f && v[1] == 0.3f && v[2] == 0.0f && n == ln);
    const char *big = "{\"text\": \"a\", \"label\": [-12.5, 1e3]}";
    EXPECT_OK(nnt_sft_encode_valued(s, big, strlen(big), NNT_PROBLEM_REGRESSION, 2, &ids, &n, v));
    ck_assert(v[0] == -12.5f && v[1] == 1000.0f);
    const int R = NNT_PROBLEM_REGRESSION, M = NNT_PROBLEM_MULTI_LABEL;
    expect_valued_refused(s, "{\"text\": \"a\"}", R, 1, "no \"label\"");
    expect_valued_refused(s, "{\"text\": \"a\", \"label\": [1, 2]}", R, 3,
                          "a list of 2 values, not a list of as many numbers as the labels (3)");
    expect_valued_refused(s, "{\"text\": \"a\", \"label\": 1}", R, 2, "the label is 1 value");
    const char *listed = "{\"text\": \"a\", \"label\": [1.25]}";   /* one value listed */
    EXPECT_OK(nnt_sft_encode_valued(s, listed, strlen(listed), R, 1, &ids, &n, v));
    ck_assert(v[0] == 1.25f);
    expect_valued_refused(s, "{\"text\": \"a\", \"label\": \"1\"}", R, 1,
                          "value 0 of the label is not a finite number");
    expect_valued_refused(s, "{\"text\": \"a\", \"label\": [0, 1e999]}", R, 2,
                          "value 1 of the label is not a finite number");
    expect_valued_refused(s, "{\"text\": \"a\", \"label\": [0, 1.5]}", M, 2,
                          "value 1 of the label is 1.5: a multi-label classifier's values");
    expect_valued_refused(s, "{\"text\": \"a\", \"label\": [-0.5]}", M, 1, "is -0.5");
    expect_valued_refused(s, "{\"text\": \"a\", \"label\": 1, \"x\": 2}", R, 1,
                          "unknown key \"x\"");
    expect_valued_refused(s, "{\"text\": 1, \"label\": 1}", R, 1, "\"text\" is not a string");
    EXPECT_FAIL_MSG(nnt_sft_encode_valued(s, one, strlen(one), NNT_PROBLEM_DEFAULT, 1, &ids, &n,
                                          v), NNT_E_INVAL, "problem 0");
    EXPECT_FAIL_MSG(nnt_sft_encode_valued(s, one, strlen(one), R, 0, &ids, &n, v), NNT_E_INVAL,
                    "k 0");
    nnt_sft_destroy(s);
    nnt_tokenizer_destroy(tok);

    /* the token file: three rows of 8 and their 3 values */
    char path[256], path2[256], bad[256];
    snprintf(path, sizeof path, "%s/valued.bin", dir);
    write_valued_file(path, 3, 0.5f);
    nnt_data *d = NULL;
    EXPECT_OK(nnt_data_open(path, NNT_DATA_AUTO, NULL, 1000, &d));
    nnt_data_info di = NNT_DATA_INFO_INIT;
    EXPECT_OK(nnt_data_info_get(d, &di));
    ck_assert(di.row_values == 3 && di.block == 8 && di.masked && di.tokens == 24);
    float got[12];
    EXPECT_OK(nnt_data_read_row_values(d, 2, got, 12));   /* rows 2, 0, 1, 2: wrapping */
    const float rows_want[12] = {-1.0f, 3.0e4f, 0.0f, 0.5f, -2.5f, 1e-3f,
                                 0.25f, 0.5f, 0.75f, -1.0f, 3.0e4f, 0.0f};
    ck_assert(memcmp(got, rows_want, sizeof got) == 0);
    EXPECT_OK(nnt_data_read_row_values(d, -1, got, 3));   /* row -1: the last */
    ck_assert(got[0] == -1.0f && got[1] == 3.0e4f);
    int32_t tokens[24];
    uint8_t counts[24];
    EXPECT_OK(nnt_data_read(d, 0, tokens, 24));
    EXPECT_OK(nnt_data_read_mask(d, 0, counts, 24));
    ck_assert(tokens[0] == 1 && tokens[3] == 99 && tokens[8] == 20 && tokens[15] == 27 &&
              tokens[16] == 1 && tokens[17] == 2 && tokens[18] == 99);
    ck_assert(counts[2] == 1 && counts[1] == 0 && counts[8] == 0 && counts[9] == 1 &&
              counts[17] == 0);
    EXPECT_FAIL_MSG(nnt_data_read_row_values(d, 0, got, 4), NNT_E_INVAL, "whole rows of 3");
    nnt_data_close(d);

    /* writers: values need mask, block, no pack; a values writer takes examples with theirs */
    nnt_token_writer_options wo = NNT_TOKEN_WRITER_OPTIONS_INIT;
    wo.mask = 1, wo.block = 8, wo.row_values = 2, wo.pack = 1;
    nnt_token_writer *w = NULL;
    snprintf(path2, sizeof path2, "%s/valued2.bin", dir);
    EXPECT_FAIL_MSG(nnt_token_writer_open(ctx, path2, &wo, &w), NNT_E_INVAL, "row_values 2");
    wo.pack = 0, wo.block = 0;
    EXPECT_FAIL_MSG(nnt_token_writer_open(ctx, path2, &wo, &w), NNT_E_INVAL, "row_values 2");
    wo.block = 8;
    EXPECT_OK(nnt_token_writer_open(ctx, path2, &wo, &w));
    int32_t a[2] = {5, 6};
    float nanv[2] = {1.0f, NAN}, ok2[2] = {1.0f, 2.0f};
    EXPECT_FAIL_MSG(nnt_token_writer_write_example_values(w, a, NULL, 2, nanv), NNT_E_INVAL,
                    "value 1 is nan");
    int64_t count = -1;
    EXPECT_OK(nnt_token_writer_count(w, &count));
    ck_assert_int_eq(count, 0);   /* refused whole */
    EXPECT_FAIL_MSG(nnt_token_writer_write_example(w, a, NULL, 2), NNT_E_INVAL,
                    "nnt_token_writer_write_example_values");
    EXPECT_FAIL_MSG(nnt_token_writer_write(w, a, 2), NNT_E_INVAL, "2 values a row");
    EXPECT_FAIL_MSG(nnt_token_writer_write_masked(w, a, NULL, 2), NNT_E_INVAL, "2 values a row");
    EXPECT_FAIL_MSG(nnt_token_writer_write_example_values(w, a, NULL, 2, NULL), NNT_E_INVAL,
                    "values is NULL");
    EXPECT_OK(nnt_token_writer_write_example_values(w, a, NULL, 2, ok2));
    EXPECT_OK(nnt_token_writer_close(w));
    wo.row_values = 0;
    EXPECT_OK(nnt_token_writer_open(ctx, path2, &wo, &w));
    EXPECT_FAIL_MSG(nnt_token_writer_write_example_values(w, a, NULL, 2, ok2), NNT_E_INVAL,
                    "without the row_values option");
    nnt_token_writer_destroy(w);

    /* damaged files: a value not finite, the section cut short, header[5] 0, and two files
     * of other counts read as one source */
    FILE *f = fopen(path, "rb");
    unsigned char buf[2048];
    size_t size = fread(buf, 1, sizeof buf, f);
    fclose(f);
    ck_assert_uint_eq(size, 1024 + 24 * 2 + 3 + 9 * 4);
    const struct { const char *name; long at, cut; unsigned char byte; const char *says; }
        damage[3] = {{"inf.bin", (long)size - 1, 0, 0xff, "value 2 of row 2 is -inf (row "
                      "values must be finite)"},
                     {"short.bin", -1, 4, 0, "truncated"},
                     {"k0.bin", 20, 0, 0, "row values (flag 0x4) with 0 a row"}};
    for (int k = 0; k < 3; k++) {
        snprintf(bad, sizeof bad, "%s/%s", dir, damage[k].name);
        unsigned char copy[2048];
        memcpy(copy, buf, size);
        if (damage[k].at >= 0)   /* (inf.bin: the last float's exponent all ones, sign set) */
            copy[damage[k].at] = damage[k].byte, copy[damage[k].at - 1] |= k == 0 ? 0x80 : 0;
        f = fopen(bad, "wb");
        fwrite(copy, 1, size - (size_t)damage[k].cut, f);
        fclose(f);
        int rc = nnt_data_open(bad, NNT_DATA_AUTO, NULL, 1000, &d);
        if (rc == 0) {   /* (a value is read when asked for) */
            rc = nnt_data_read_row_values(d, 2, got, 3);
            nnt_data_close(d);
        }
        ck_assert_msg(rc == NNT_E_FORMAT && strstr(nnt_ctx_last_error(NULL), damage[k].says),
                      "%s: rc %d, '%s'", damage[k].name, rc, nnt_ctx_last_error(NULL));
    }
    char pattern[256];
    snprintf(path2, sizeof path2, "%s/two_b.bin", dir);
    write_valued_file(path2, 2, 0.5f);
    snprintf(path2, sizeof path2, "%s/two_a.bin", dir);
    write_valued_file(path2, 3, 0.5f);
    snprintf(pattern, sizeof pattern, "%s/two_*.bin", dir);
    EXPECT_FAIL_MSG(nnt_data_open(pattern, NNT_DATA_AUTO, NULL, 1000, &d), NNT_E_FORMAT,
                    "has 2 values a row but");
    snprintf(path2, sizeof path2, "%s/two_b.bin", dir);
    write_valued_file(path2, 3, 7.0f);   /* two files of 3: one source, rows in order */
    EXPECT_OK(nnt_data_open(pattern, NNT_DATA_AUTO, NULL, 1000, &d));
    EXPECT_OK(nnt_data_read_row_values(d, 3, got, 6));   /* two_b's rows 0 and 1 */
    ck_assert(got[0] == 7.0f && got[3] == 0.25f);
    nnt_data_close(d);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("sft");
    TCase *tc = tcase_create("sft");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 300);
    tcase_add_loop_test(tc, test_encode, 0, 2);
    tcase_add_test(tc, test_templates_and_errors);
    tcase_add_loop_test(tc, test_chat_templates, 0, 11);
    tcase_add_test(tc, test_gemma_turns);
    tcase_add_test(tc, test_gemma3_parts);
    tcase_add_loop_test(tc, test_prompts, 0, 14);
    tcase_add_loop_test(tc, test_prompt_text, 0, 2);
    tcase_add_loop_test(tc, test_conversation_pc, 0, 13);
    tcase_add_loop_test(tc, test_sharegpt, 0, 3);
    tcase_add_loop_test(tc, test_all_tokens, 0, 4);
    tcase_add_test(tc, test_record_kwargs);
    tcase_add_loop_test(tc, test_tools, 0, 6);
    tcase_add_test(tc, test_tool_refusals);
    tcase_add_test(tc, test_tojson);
    tcase_add_test(tc, test_gpt_oss);
    tcase_add_test(tc, test_chat_refusals);
    tcase_add_test(tc, test_token_file);
    tcase_add_loop_test(tc, test_loss, 0, 4);
    tcase_add_test(tc, test_block_must_match);
    tcase_add_loop_test(tc, test_labelled, 0, 2);
    tcase_add_test(tc, test_valued);
    suite_add_tcase(s, tc);
    return run_suite(s);
}
