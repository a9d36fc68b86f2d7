/* SPDX-License-Identifier: MIT */
/* Mutation fuzzing of nnt's file readers, for a sanitizer build (not part of make check).
 *
 * Each iteration copies one fixture, mutates it (a truncation, or 1-4 bytes: a bit flip, a
 * random byte, JSON punctuation, NUL, a UTF-8 continuation byte, or a letter or digit for
 * another), and loads it: a tokenizer.json (then encodes and decodes a text, and decodes
 * out-of-range ids), a config.json beside an intact model.safetensors, or a
 * model.safetensors whose header region is mutated (Llama's, gpt-oss's with stacked
 * experts, or its MXFP4 blocks and scales, bitsandbytes' 4-bit Llama with and without
 * double quantization), or prompt/answer data: a record of
 * tests/fixtures/sft/records.jsonl, chat_prompts.jsonl, gemma3_parts_records.jsonl (lists
 * of text parts), r1_records.jsonl (system messages, reasoning), chat_pc.jsonl
 * (conversational prompt/completion), qwen3_nothink_pc.jsonl (chat_template_kwargs) or
 * gptoss_records.jsonl (developer messages, thinking) or tool_records.jsonl,
 * qwen_tool_records.jsonl, llama_tool_records.jsonl, gptoss_tool_records.jsonl (tools,
 * calls, responses; gpt-oss's TypeScript namespace) encoded
 * (nnt_sft_encode_prompt,
 * nnt_sft_encode) and laid out in rows of a token file (nnt_token_writer_write_example, read
 * back through nnt_data with its mask), or a tokenizer_config.json (Llama 3's, ChatML's,
 * Gemma 3's, Qwen3's, Qwen3-Instruct-2507's, DeepSeek-R1-Distill's, gpt-oss's, Qwen2.5's,
 * Llama 3.1's) whose chat
 * template is recognised or refused (nnt_sft_create), or a PEFT adapter directory of MoE
 * experts (PEFT's Mixtral all-linear with its rank_pattern, gpt-oss's experts, Mixtral's
 * router and one block's down_proj; tests/fixtures/lora_tiny) with a mutated
 * adapter_config.json or safetensors header, loaded on its base (nnt_model_load_peft).
 * Loads may succeed or fail; what it
 * looks for is a crash, a hang or a sanitizer report. Build and run (iterations and seed
 * optional):
 *
 *   BUILD configured with CFLAGS="-O1 -g -fsanitize=address,undefined" LDFLAGS=same
 *   make -C BUILD tests/fuzz_loaders
 *   ASAN_OPTIONS=detect_leaks=0 UBSAN_OPTIONS=halt_on_error=1 \
 *       BUILD/tests/fuzz_loaders SRCDIR [ITERATIONS [SEED]]
 *
 * 2026-11-26, 9000 iterations: no report (tokenizer 482 loaded / 2518 refused, config
 * 653 / 2347, safetensors 141 / 2859). 2026-11-28, with prompt/answer data, 3000 iterations:
 * no report (records or configuration 216 taken / 534 refused). 2026-11-30, with prompts and
 * Gemma 3's and Qwen3's configurations, 2000 iterations (seed 7): no report (70 / 430).
 * 2026-12-01, with Qwen3-Instruct-2507's and DeepSeek-R1-Distill's configurations and R1's
 * records, 40000 iterations (seed 12): no report (1134 / 8866); with conversational
 * prompt/completion records too, 30000 iterations (seed 14): no report (896 / 6604); with
 * records holding chat_template_kwargs too, 30000 iterations (seed 15): no report (843 / 6657).
 * 2026-12-01, with gpt-oss's configuration and records too, 30000 iterations (seed 16): no
 * report (792 / 6708). With gpt-oss's model directories (stacked and MXFP4 experts) too,
 * 20000 iterations (seed 17): no report (config.json 1173 / 3827, safetensors header 254 /
 * 4746). 2026-12-01, with the tool records (Qwen's, Llama's, gpt-oss's) and Qwen2.5's and
 * Llama 3.1's configurations too, 30000 iterations (seed 19): no report (records or
 * configuration 707 / 6793). 2026-12-02, with PEFT adapters of MoE experts too, 5000
 * iterations (seed 20): no report (adapters 131 loaded / 869 refused). */
#include <nnt.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static uint64_t rng = 88172645463325252ull;

static uint64_t next(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

static unsigned char *read_all(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "fuzz_loaders: cannot open %s\n", path);
        exit(2);
    }
    fseek(f, 0, SEEK_END);
    *n = (size_t)ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *b = malloc(*n + 1);
    if (!b || fread(b, 1, *n, f) != *n) {
        fprintf(stderr, "fuzz_loaders: cannot read %s\n", path);
        exit(2);
    }
    fclose(f);
    return b;
}

static void write_all(const char *path, const unsigned char *b, size_t n)
{
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(b, 1, n, f) != n || fclose(f) != 0) {
        fprintf(stderr, "fuzz_loaders: cannot write %s\n", path);
        exit(2);
    }
}

/* Mutates b (n bytes) within its first span bytes (0: all); returns the new length. */
static size_t mutate(unsigned char *b, size_t n, size_t span)
{
    static const char punct[] = "{}[]\",:0123456789-eE.\\u";
    if (n == 0)
        return 0;
    if (span == 0 || span > n)
        span = n;
    int kind = (int)(next() % 9);
    if (kind == 0)
        return (size_t)(next() % n);   /* truncated */
    for (int k = 1 + (int)(next() % 4); k > 0; k--) {
        size_t at = (size_t)(next() % span);
        unsigned char c = b[at];
        switch (kind) {
        case 1: b[at] = (unsigned char)(c ^ (1u << (next() % 8))); break;
        case 2: b[at] = (unsigned char)next(); break;
        case 3: b[at] = (unsigned char)punct[next() % (sizeof punct - 1)]; break;
        case 4: b[at] = 0; break;
        case 5: b[at] = (unsigned char)(0x80 | (next() & 0x3f)); break;
        default:   /* same class, other value: keeps most JSON valid */
            if (c >= 'a' && c <= 'z')
                b[at] = (unsigned char)('a' + next() % 26);
            else if (c >= '0' && c <= '9')
                b[at] = (unsigned char)('0' + next() % 10);
        }
    }
    return n;
}

/* Copy of src mutated within its first span bytes, written to dst. */
static void mutated_copy(const char *src, const char *dst, size_t span_of_header)
{
    size_t n;
    unsigned char *b = read_all(src, &n);
    size_t span = 0;
    if (span_of_header && n >= 8) {   /* safetensors: 8-byte length, then the JSON header */
        uint64_t len = 0;
        memcpy(&len, b, 8);
        span = len < n - 8 ? (size_t)len + 8 : n;
    }
    n = mutate(b, n, span);
    write_all(dst, b, n);
    free(b);
}

static void plain_copy(const char *src, const char *dst)
{
    size_t n;
    unsigned char *b = read_all(src, &n);
    write_all(dst, b, n);
    free(b);
}

/* 1 when the mutated tokenizer loaded (and was used), 0 when refused. */
static int try_tokenizer(const char *path)
{
    nnt_tokenizer *tok = NULL;
    if (nnt_tokenizer_hf_load(path, &tok) != NNT_OK)
        return 0;
    static const char text[] = "Hello, world! \xc3\x84\xc3\x96 12345 \n\t  the quick brown fox";
    int32_t ids[512];
    size_t nids = 0, len = 0;
    char out[4096];
    if (nnt_tokenizer_encode(tok, text, sizeof text - 1, ids, 512, &nids) == NNT_OK)
        nnt_tokenizer_decode(tok, ids, nids, out, sizeof out, &len);
    const int32_t odd[8] = {0, 1, 2, 3, 100000, -1, 5, 7};
    nnt_tokenizer_decode(tok, odd, 8, out, sizeof out, &len);
    nnt_tokenizer_destroy(tok);
    return 1;
}

/* Prompt/answer data: one record (len bytes) through an encoder over tok and the writer of
 * rows of 16 (cut), read back; or, with config, an encoder made from a mutated
 * tokenizer_config.json. 1 when it was taken. */
static int try_sft(const nnt_tokenizer *tok, const char *config, const char *record,
                   size_t len, const char *out)
{
    nnt_sft_options so = NNT_SFT_OPTIONS_INIT;
    so.tokenizer_config = config;
    nnt_sft *s = NULL;
    if (nnt_sft_create(tok, &so, &s) != NNT_OK)
        return 0;
    const int32_t *ids;
    const uint8_t *counts;
    size_t n = 0;
    const int32_t *prompt;
    size_t np = 0;
    if (nnt_sft_encode_prompt(s, record, len, &prompt, &np) == NNT_OK && np > 0)
        (void)prompt[np - 1];   /* a conversation's prompt: its ids readable */
    int ok = nnt_sft_encode(s, record, len, &ids, &counts, &n) == NNT_OK;
    nnt_token_writer_options wo = NNT_TOKEN_WRITER_OPTIONS_INIT;
    wo.mask = 1, wo.block = 16, wo.cut = 1, wo.pack = (int)(next() % 2);
    nnt_token_writer *w = NULL;
    if (ok && nnt_token_writer_open(NULL, out, &wo, &w) == NNT_OK) {
        if (nnt_token_writer_write_example(w, ids, counts, n) == NNT_OK &&
            nnt_token_writer_close(w) == NNT_OK) {
            nnt_data *d = NULL;
            uint8_t mask[40];
            int32_t back[40];
            if (nnt_data_open(out, NNT_DATA_LLMC, NULL, 0, &d) == NNT_OK) {
                nnt_data_read(d, 3, back, 40);
                nnt_data_read_mask(d, 3, mask, 40);
                nnt_data_close(d);
            }
        } else {
            nnt_token_writer_destroy(w);
        }
    }
    nnt_sft_destroy(s);
    return ok;
}

/* A PEFT adapter directory on its base model (nnt_model_load_peft). 1 when it was taken. */
static int try_peft(nnt_ctx *ctx, const char *base, const char *dir)
{
    nnt_layer *model = NULL;
    if (nnt_model_load_hf(ctx, base, 2, 8, NULL, &model) != NNT_OK)
        return 0;
    int ok = nnt_model_load_peft(model, dir) == NNT_OK;
    nnt_layer_destroy(model);
    return ok;
}

static int try_model(nnt_ctx *ctx, const char *dir)
{
    nnt_layer *model = NULL;
    if (nnt_model_load_hf(ctx, dir, 2, 8, NULL, &model) != NNT_OK)
        return 0;
    nnt_layer_destroy(model);
    return 1;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: fuzz_loaders SRCDIR [ITERATIONS [SEED]]\n");
        return 2;
    }
    const char *src = argv[1];
    long iters = argc > 2 ? atol(argv[2]) : 3000;
    if (argc > 3)
        rng = strtoull(argv[3], NULL, 10) | 1;
    static const char *const toks[] = {"gpt2", "llama2", "llama3", "metaspace", "smollm"};
    char work[] = "/tmp/nnt-fuzz-XXXXXX";
    if (!mkdtemp(work))
        return 2;
    char tok_path[512], model_dir[512], cfg[1024], st[1024], fix_cfg[1024], fix_st[1024];
    snprintf(tok_path, sizeof tok_path, "%s/tokenizer.json", work);
    snprintf(model_dir, sizeof model_dir, "%s/model", work);
    snprintf(cfg, sizeof cfg, "%s/config.json", model_dir);
    snprintf(st, sizeof st, "%s/model.safetensors", model_dir);
    /* the model directories: Llama's, gpt-oss's (stacked experts) and its MXFP4 one,
     * bitsandbytes' 4-bit Llama (fp32 absmax, and double quantization) */
    static const char *const MODEL_DIRS[5] = {"llama_tiny/gqa", "gptoss_tiny/gptoss",
                                              "gptoss_tiny/gptoss-mxfp4", "nf4/llama_bnb",
                                              "nf4/llama_bnb_dq"};
    mkdir(model_dir, 0755);

    nnt_ctx_options opts = NNT_CTX_OPTIONS_INIT;
    opts.ncpus = 1;
    nnt_ctx *ctx = NULL;
    if (nnt_ctx_create(&opts, &ctx) != NNT_OK) {
        fprintf(stderr, "fuzz_loaders: %s\n", nnt_ctx_last_error(NULL));
        return 2;
    }
    nnt_log_set_level(NNT_LOG_ERROR);
    long loaded[5] = {0, 0, 0, 0, 0}, refused[5] = {0, 0, 0, 0, 0};
    /* PEFT adapters of MoE experts (target_parameters, stacked tensors, rank_pattern) on
     * their bases */
    static const char *const ADAPTERS[3][2] = {{"mixtral", "mixtral_all"},
                                               {"gptoss", "gptoss_experts"},
                                               {"mixtral", "mixtral_down"}};
    char peft_dir[1024], peft_cfg[1100], peft_st[1100];
    snprintf(peft_dir, sizeof peft_dir, "%s/peft", work);
    snprintf(peft_cfg, sizeof peft_cfg, "%s/adapter_config.json", peft_dir);
    snprintf(peft_st, sizeof peft_st, "%s/adapter_model.safetensors", peft_dir);
    mkdir(peft_dir, 0755);
    char sft_tok[1024], sft_cfg[1024], sft_records[1024], sft_prompts[1024], sft_parts[1024],
        sft_r1[1024], sft_pc[1024], sft_kw[1024], sft_oss[1024], sft_tools[4][1024],
        cfg_copy[1024], rows[1024];
    snprintf(sft_tok, sizeof sft_tok, "%s/tests/fixtures/sft/llama3/tokenizer.json", src);
    snprintf(sft_cfg, sizeof sft_cfg, "%s/tests/fixtures/sft/%%s/tokenizer_config.json", src);
    snprintf(sft_records, sizeof sft_records, "%s/tests/fixtures/sft/records.jsonl", src);
    snprintf(sft_prompts, sizeof sft_prompts, "%s/tests/fixtures/sft/chat_prompts.jsonl", src);
    snprintf(sft_parts, sizeof sft_parts, "%s/tests/fixtures/sft/gemma3_parts_records.jsonl",
             src);
    snprintf(sft_r1, sizeof sft_r1, "%s/tests/fixtures/sft/r1_records.jsonl", src);
    snprintf(sft_pc, sizeof sft_pc, "%s/tests/fixtures/sft/chat_pc.jsonl", src);
    snprintf(sft_kw, sizeof sft_kw, "%s/tests/fixtures/sft/qwen3_nothink_pc.jsonl", src);
    snprintf(sft_oss, sizeof sft_oss, "%s/tests/fixtures/sft/gptoss_records.jsonl", src);
    static const char *const TOOL_SETS[4] = {"tool_records", "qwen_tool_records",
                                             "llama_tool_records", "gptoss_tool_records"};
    for (int k = 0; k < 4; k++)
        snprintf(sft_tools[k], sizeof sft_tools[k], "%s/tests/fixtures/sft/%s.jsonl", src,
                 TOOL_SETS[k]);
    snprintf(cfg_copy, sizeof cfg_copy, "%s/tokenizer_config.json", work);
    snprintf(rows, sizeof rows, "%s/rows.bin", work);
    nnt_tokenizer *stok = NULL;
    size_t nrecs[11] = {0};
    unsigned char *recs[11] = {read_all(sft_records, &nrecs[0]), read_all(sft_prompts, &nrecs[1]),
                               read_all(sft_parts, &nrecs[2]), read_all(sft_r1, &nrecs[3]),
                               read_all(sft_pc, &nrecs[4]),      read_all(sft_kw, &nrecs[5]),
                               read_all(sft_oss, &nrecs[6]),
                               read_all(sft_tools[0], &nrecs[7]),
                               read_all(sft_tools[1], &nrecs[8]),
                               read_all(sft_tools[2], &nrecs[9]),
                               read_all(sft_tools[3], &nrecs[10])};
    /* the records of each set */
    static const size_t LINES[11] = {6, 5, 2, 1, 5, 7, 5, 3, 3, 3, 3};
    static const char *const CONFIGS[] = {"llama3",     "chatml",      "gemma3",  "qwen3",
                                          "qwen3_2507", "deepseek_r1", "gpt_oss", "qwen2_5",
                                          "llama3_1"};
    if (nnt_tokenizer_hf_load(sft_tok, &stok) != NNT_OK) {
        fprintf(stderr, "fuzz_loaders: %s\n", nnt_ctx_last_error(NULL));
        return 2;
    }
    for (long it = 0; it < iters; it++) {
        int what = (int)(it % 5);
        int ok;
        if (what == 0) {
            char fix[1024];
            snprintf(fix, sizeof fix, "%s/tests/fixtures/hftok/%s.json", src, toks[next() % 5]);
            mutated_copy(fix, tok_path, 0);
            ok = try_tokenizer(tok_path);
        } else if (what == 1 || what == 2) {
            const char *dir = MODEL_DIRS[next() % 5];
            snprintf(fix_cfg, sizeof fix_cfg, "%s/tests/fixtures/%s/config.json", src, dir);
            snprintf(fix_st, sizeof fix_st, "%s/tests/fixtures/%s/model.safetensors", src, dir);
            if (what == 1)
                mutated_copy(fix_cfg, cfg, 0), plain_copy(fix_st, st);
            else
                plain_copy(fix_cfg, cfg), mutated_copy(fix_st, st, 1);
            ok = try_model(ctx, model_dir);
        } else if (what == 4) {
            int a = (int)(next() % 3);
            char from[1200], base[1200];
            snprintf(base, sizeof base, "%s/tests/fixtures/lora_tiny/%s", src, ADAPTERS[a][0]);
            snprintf(from, sizeof from, "%s/tests/fixtures/lora_tiny/%s/trained/", src,
                     ADAPTERS[a][1]);
            size_t at = strlen(from);
            int cfg_mutated = next() % 2 == 0;
            snprintf(from + at, sizeof from - at, "adapter_config.json");
            cfg_mutated ? mutated_copy(from, peft_cfg, 0) : plain_copy(from, peft_cfg);
            snprintf(from + at, sizeof from - at, "adapter_model.safetensors");
            cfg_mutated ? plain_copy(from, peft_st) : mutated_copy(from, peft_st, 1);
            ok = try_peft(ctx, base, peft_dir);
        } else {
            char which[1024];
            snprintf(which, sizeof which, sft_cfg, CONFIGS[next() % 9]);
            /* training records, conversations' prompts, Gemma 3's lists of parts, R1's,
             * conversational prompt/completion, those with chat_template_kwargs, gpt-oss's,
             * tool use (Qwen's, Llama's, gpt-oss's) */
            int set = (int)(next() % 11);
            const unsigned char *records = recs[set];
            size_t nrec = nrecs[set];
            unsigned char line[2048];
            size_t start = 0, len = 0, k = (size_t)(next() % LINES[set]);
            for (size_t i = 0, l = 0; i < nrec; i++)   /* line k of the records */
                if (records[i] == '\n') {
                    if (l++ == k) {
                        len = i - start;
                        break;
                    }
                    start = i + 1;
                }
            len = len < sizeof line ? len : sizeof line;
            memcpy(line, records + start, len);
            int config = next() % 4 == 0;   /* a mutated config, or a mutated record */
            if (config)
                mutated_copy(which, cfg_copy, 0);
            else
                plain_copy(which, cfg_copy), len = mutate(line, len, 0);
            ok = try_sft(stok, cfg_copy, (const char *)line, len, rows);
        }
        ok ? loaded[what]++ : refused[what]++;
    }
    printf("fuzz_loaders: %ld iterations: tokenizer.json %ld loaded / %ld refused, config.json "
           "%ld / %ld, safetensors header %ld / %ld, prompt/answer records or "
           "tokenizer_config.json %ld / %ld, PEFT adapters %ld / %ld\n", iters, loaded[0],
           refused[0], loaded[1], refused[1], loaded[2], refused[2], loaded[3], refused[3],
           loaded[4], refused[4]);
    nnt_tokenizer_destroy(stok);
    for (int k = 0; k < 11; k++)
        free(recs[k]);
    unlink(cfg_copy);
    unlink(rows);
    unlink(peft_cfg);
    unlink(peft_st);
    rmdir(peft_dir);
    nnt_ctx_destroy(ctx);
    unlink(tok_path);
    unlink(cfg);
    unlink(st);
    rmdir(model_dir);
    rmdir(work);
    return 0;
}
