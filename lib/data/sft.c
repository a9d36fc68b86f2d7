// SPDX-License-Identifier: MIT
/* nnt_sft: prompt/answer records (JSON Lines, TRL's dataset forms) to token ids and which of
 * them count as targets in the loss, as TRL 1.16's SFTTrainer prepares them:
 *   {"text": T}                      ids of T + eos, with the special tokens the tokenizer's
 *                                    post-processor adds (tokenizer(text), e.g. Llama 3's
 *                                    <|begin_of_text|>); every target counts
 *   {"prompt": P, "completion": C}   ids of P + C + eos the same way; the targets after the
 *                                    longest common prefix of those ids and P's count
 *                                    (completion_only_loss); P and C lists of messages: the
 *                                    published template's rendering of P with its generation
 *                                    prompt against that of P + C, the targets from where
 *                                    they differ (TRL's conversational prompt/completion)
 *   {"messages": [{"role", "content"}, ...]}
 *                                    rendered with a chat template (ChatML, Llama 3, and
 *                                    Qwen2.5's, Qwen3's, Llama 3.1's and 3.2's, Gemma's (also
 *                                    Gemma 2's), Gemma 3's, Phi-3's, Phi-3.5's,
 *                                    Qwen3-Instruct-2507's, DeepSeek-R1-Distill's and
 *                                    gpt-oss's (harmony) as published)
 *                                    and encoded without added special tokens
 *                                    (apply_chat_template); the tokens that overlap an
 *                                    assistant turn's span count (assistant_only_loss with
 *                                    TRL's training templates): ChatML and Qwen2.5 "\n" CONTENT
 *                                    "<|im_end|>\n" after "<|im_start|>assistant", Qwen3
 *                                    "<think>\n" REASONING "\n</think>\n\n" CONTENT
 *                                    "<|im_end|>\n" after "<|im_start|>assistant\n", Llama 3
 *                                    and 3.1+ trim(CONTENT) "<|eot_id|>" after the header,
 *                                    Gemma and Gemma 3 trim(CONTENT) "<end_of_turn>\n" after
 *                                    "<start_of_turn>model\n", Phi-3 and Phi-3.5 CONTENT
 *                                    "<|end|>\n" after "<|assistant|>\n" (and the closing eos
 *                                    after a last assistant message), Qwen3-Instruct-2507
 *                                    CONTENT "<|im_end|>\n" after "<|im_start|>assistant\n",
 *                                    DeepSeek-R1 R1_ASSISTANT CONTENT R1_EOS (its reasoning
 *                                    kept: TRL's deepseek_r1_distill_training.jinja),
 *                                    gpt-oss the whole "<|start|>assistant..." of a turn to
 *                                    its "<|end|>" or "<|return|>" (the last turn's analysis
 *                                    channel with it: TRL's gptoss_training.jinja)
 * With all_tokens every token counts, conversations rendered as published (TRL with
 * completion_only_loss=False and without assistant_only_loss).
 * A record's "chat_template_kwargs" (enable_thinking, date_string, reasoning_effort,
 * model_identity, tools_in_user_message) hold for it alone.
 * Tools (a record's "tools", assistants' "tool_calls", "tool" messages) as Qwen2.5's,
 * Qwen3's, Qwen3-Instruct-2507's (Hermes' <tools>, <tool_call>, <tool_response>), Llama
 * 3.1's and 3.2's (JSON calls, tools in the first user message, ipython responses) and
 * gpt-oss's templates (a TypeScript namespace, lib/data/harmony.c; calls on the commentary
 * channel) render them, their JSON as the templates' tojson (lib/data/tojson.c); a call
 * counts with its assistant turn, a response does not.
 * ShareGPT's {"conversations": [{"from", "value"}, ...]} is taken as "messages", from and
 * value as role and content in every list (TRL's maybe_convert_to_chatml).
 * eos is appended to text and completions unless they end with it (TRL's add_eos). The JSON
 * is read with hftok's small tree over lib/io's bounded reader. */
#include "../internal.h"
#include "../io/io.h"
#include "hftok_impl.h"

#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

struct nnt_sft {
    const nnt_tokenizer *tok;
    nnt_chat_template tmpl;
    char *system;                 /* ChatML: the template's default system message, or NULL */
    char date[32];                /* Llama 3.1+: the system block's date                      */
    char *eos;                    /* tokenizer_config.json's eos_token, or NULL              */
    char *bos;                    /* its bos_token, or NULL                                  */
    char *pad;                    /* its pad_token, or NULL                                  */
    int32_t pad_id;               /* the id of pad (else eos) when it is one token, else 0   */
    const int32_t *pre, *post;    /* the post-processor's special ids around a sequence      */
    size_t npre, npost;
    int32_t *ids;                 /* (n) the last record's ids                               */
    uint8_t *counts;              /* (n) 1: counts as a target                               */
    size_t n, cap;
    int32_t *pair_ids;            /* (npair) a preference record's chosen sequence           */
    uint8_t *pair_counts;
    size_t npair, pair_cap;
    int label;                    /* nnt_sft_encode_unpaired: the record's label (1: true)    */
    int32_t *a, *b;               /* scratch encodings                                       */
    size_t acap, bcap;
    sbuf text;                    /* the rendered text                                       */
    int all_tokens;               /* every token counts (nnt_sft_options.all_tokens)         */
    int assistant_only;           /* prompt/completion: its assistant turns alone count     */
    int no_thinking;              /* Qwen3 prompts: enable_thinking=False                    */
    int prompt;                   /* rendering a prompt for generation (nnt_sft_encode_prompt) */
    int published;                /* rendering as the published template does (a prompt, and
                                     a conversational prompt/completion), not as TRL's
                                     training variant (Qwen3's, DeepSeek-R1's)               */
    size_t last_query;            /* Qwen3 published: the index of the last user message     */
    const jv *effort, *identity;  /* gpt-oss: the record's chat_template_kwargs
                                     reasoning_effort and model_identity (NULL: the
                                     template's defaults), strings of the record's tree     */
    const jv *tools;              /* the record's "tools" (an array; NULL: none), of the
                                     record's tree or of tools_tree                         */
    jv tools_tree;                /* "tools" given as a string: its JSON read               */
    int tools_in_system;          /* Llama 3.1+: the tools in the system block
                                     (tools_in_user_message false), not the first user's   */
    const jv *call;               /* gpt-oss: the name of the last tool call (since the last
                                     answer), which a tool's response comes from           */
    int builtin;                  /* gpt-oss: the record's builtin_tools, a non-empty list: 1
                                     + 2 (browser) + 4 (python); 0: none                    */
    char **label_names;           /* classification records' labels by name (nlabel_names)  */
    int64_t nlabel_names;
};

static const char *template_name(nnt_chat_template t);

/* the templates' names (nnt_chat_template_from_name), for the messages */
#define TEMPLATE_NAMES \
    "chatml, llama3, qwen2.5, qwen3, llama3.1, llama3.2, gemma, gemma3, phi3, phi3.5, " \
    "qwen3-2507, deepseek-r1, gpt-oss"

/* DeepSeek-R1-Distill's special tokens: fullwidth bars (U+FF5C) around them, U+2581 between
 * the words (split strings: a hex escape would take the letter after it) */
#define R1_BAR "\xef\xbd\x9c"
#define R1_SPACE "\xe2\x96\x81"
#define R1_BOS "<" R1_BAR "begin" R1_SPACE "of" R1_SPACE "sentence" R1_BAR ">"
#define R1_EOS "<" R1_BAR "end" R1_SPACE "of" R1_SPACE "sentence" R1_BAR ">"
#define R1_USER "<" R1_BAR "User" R1_BAR ">"
#define R1_ASSISTANT "<" R1_BAR "Assistant" R1_BAR ">"

/* ---- tokenizer_config.json ------------------------------------------------------------------ */

static int read_whole(const char *path, char **out, size_t *len, const char *fn)
{
    char err[NNT_IO_ERRLEN];
    int fd;
    uint64_t size;
    int rc = nnt_io_open_read(path, &fd, &size, err, sizeof err);
    if (rc)
        return nnt_fail(NULL, rc, "%s: %s", fn, err);
    char *buf = size < (64u << 20) ? malloc((size_t)size + 1) : NULL;
    if (!buf) {
        close(fd);
        return nnt_fail(NULL, size < (64u << 20) ? NNT_E_NOMEM : NNT_E_FORMAT, "%s: %s: %llu "
                        "bytes: %s", fn, path, (unsigned long long)size,
                        size < (64u << 20) ? "out of host memory" : "larger than 64 MiB");
    }
    rc = nnt_io_pread(fd, buf, (size_t)size, 0, path, err, sizeof err);
    close(fd);
    if (rc) {
        free(buf);
        return nnt_fail(NULL, rc, "%s: %s", fn, err);
    }
    buf[size] = '\0';
    *out = buf;
    *len = (size_t)size;
    return NNT_OK;
}

/* A token given as a string or as {"content": string} (older files); NULL when absent. */
static const char *token_text(const jv *v)
{
    if (v && v->type == JV_OBJ)
        v = hft_jv_get(v, "content");
    return v && v->type == JV_STR ? v->s : NULL;
}

/* The template with whitespace, "\n"/"\t" escapes and Jinja's whitespace-control dashes
 * removed and double quotes made single: what the recognised forms are compared on. */
static char *normalize_template(const char *s)
{
    size_t n = strlen(s);
    char *o = malloc(n + 1), *p = o;
    if (!o)
        return NULL;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f')
            continue;
        if (c == '\\' && (s[i + 1] == 'n' || s[i + 1] == 't')) {
            i++;
            continue;
        }
        int after_open = i >= 2 && s[i - 2] == '{' && (s[i - 1] == '%' || s[i - 1] == '{');
        int before_close = (s[i + 1] == '%' || s[i + 1] == '}') && s[i + 2] == '}';
        if (c == '-' && (after_open || before_close))
            continue;
        *p++ = c == '"' ? '\'' : c;
    }
    *p = '\0';
    return o;
}

/* 1 when the normalized template contains the normalized fragment. */
static int has(const char *norm, const char *fragment)
{
    char *f = normalize_template(fragment);
    int yes = f && strstr(norm, f) != NULL;
    free(f);
    return yes;
}

/* ChatML's default system message (SmolLM2: rendered when the first message is not a system
 * one): the text between "<|im_start|>system" + newline and "<|im_end|>" in the template. */
static int default_system(const char *raw, char **out)
{
    const char *s = strstr(raw, "<|im_start|>system");
    *out = NULL;
    if (!s)
        return NNT_OK;
    s += strlen("<|im_start|>system");
    if (s[0] == '\\' && s[1] == 'n')
        s += 2;
    else if (s[0] == '\n')
        s++;
    const char *e = strstr(s, "<|im_end|>");
    if (!e)
        return NNT_OK;
    char *o = malloc((size_t)(e - s) + 1), *p = o;
    if (!o)
        return NNT_E_NOMEM;
    for (; s < e; s++) {
        if (s[0] == '\\' && s[1] == 'n')
            *p++ = '\n', s++;
        else
            *p++ = *s;
    }
    *p = '\0';
    *out = o;
    return NNT_OK;
}

/* The published templates nnt renders, recognised by identity as TRL recognises them: the
 * FNV-1a 64 hash of the template's exact text (Qwen2.5's with its default system message
 * replaced by "@SYSTEM@", so that the Qwen2.5 checkpoints whose default differs are the same
 * template); TRL 1.16 ships each verbatim (trl/chat_templates/<name>.jinja). */
static const struct {
    const char *name;
    uint64_t hash;
    nnt_chat_template t;
} KNOWN[] = {
    {"qwen2_5.jinja (Qwen2.5 Instruct)", 0xe17e3a21eb01a12fULL, NNT_CHAT_QWEN2_5},
    {"qwen3.jinja (Qwen3)", 0x959a4551391a6549ULL, NNT_CHAT_QWEN3},
    {"llama3_1.jinja (Llama 3.1)", 0x60848a05837ce656ULL, NNT_CHAT_LLAMA3_1},
    {"llama3_2.jinja (Llama 3.2)", 0x0ac29b9538e2befaULL, NNT_CHAT_LLAMA3_2},
    {"gemma.jinja (Gemma, Gemma 2)", 0x5c10ee65212d93b3ULL, NNT_CHAT_GEMMA},
    {"gemma3.jinja (Gemma 3)", 0xc90dea00b85c935dULL, NNT_CHAT_GEMMA3},
    {"phi3.jinja (Phi-3)", 0xecebdb26677c663dULL, NNT_CHAT_PHI3},
    {"phi3_5.jinja (Phi-3.5)", 0xcf278cde387a54c8ULL, NNT_CHAT_PHI3_5},
    {"qwen3_instruct_2507.jinja (Qwen3-*-Instruct-2507)", 0x3751fe8ea48448abULL,
     NNT_CHAT_QWEN3_2507},
    {"deepseek_r1_distill.jinja (DeepSeek-R1-Distill)", 0x845fdf813c637ee2ULL,
     NNT_CHAT_DEEPSEEK_R1},
    {"gptoss.jinja (gpt-oss)", 0x5da66262d54a9064ULL, NNT_CHAT_GPT_OSS},
};

#define QWEN_SYSTEM "You are Qwen, created by Alibaba Cloud. You are a helpful assistant."

/* Qwen2.5's default system message: the text of the literal '<|im_start|>system\n' TEXT
 * '<|im_end|>\n' (a Jinja string, \n as two characters) that holds no quote; NULL if none. */
static const char *qwen_system(const char *raw, size_t *len)
{
    static const char open[] = "'<|im_start|>system\\n";
    for (const char *p = strstr(raw, open); p; p = strstr(p + 1, open)) {
        const char *t = p + strlen(open), *e = strstr(t, "<|im_end|>\\n'");
        if (e && e > t && memchr(t, '\'', (size_t)(e - t)) == NULL) {
            *len = (size_t)(e - t);
            return t;
        }
    }
    return NULL;
}

/* The hash of raw with every occurrence of sys[0..n) (if any) replaced by "@SYSTEM@". */
static uint64_t template_hash(const char *raw, const char *sys, size_t n)
{
    uint64_t h = NNT_FNV_OFFSET;
    for (const char *p = raw; *p;) {
        if (sys && n && strncmp(p, sys, n) == 0) {
            h = nnt_fnv1a_bytes(h, "@SYSTEM@", 8);
            p += n;
        } else {
            h = nnt_fnv1a_bytes(h, p, 1);
            p++;
        }
    }
    return h;
}

/* A Jinja string's text with its \n escapes made newlines (malloc'd; NULL: no memory). */
static char *unescape(const char *t, size_t n)
{
    char *o = malloc(n + 1), *p = o;
    for (size_t i = 0; o && i < n; i++) {
        if (t[i] == '\\' && i + 1 < n && t[i + 1] == 'n')
            *p++ = '\n', i++;
        else
            *p++ = t[i];
    }
    if (o)
        *p = '\0';
    return o;
}

/* One of KNOWN by its text: 1 (*t and, for Qwen2.5, *system set), 0 not one, < 0 failed. */
static int recognise_known(const char *raw, nnt_chat_template *t, char **system)
{
    size_t n = 0;
    const char *sys = qwen_system(raw, &n);
    uint64_t plain = template_hash(raw, NULL, 0), sub = sys ? template_hash(raw, sys, n) : 0;
    for (size_t k = 0; k < sizeof KNOWN / sizeof KNOWN[0]; k++) {
        if (KNOWN[k].hash != (KNOWN[k].t == NNT_CHAT_QWEN2_5 ? sub : plain))
            continue;
        *t = KNOWN[k].t;
        if (*t == NNT_CHAT_QWEN2_5 && !(*system = unescape(sys, n)))
            return NNT_E_NOMEM;
        return 1;
    }
    return 0;
}

/* What the chat template of a tokenizer_config.json is (NONE: it has none). */
static int recognise(const char *path, const char *raw, nnt_chat_template *t, char **system)
{
    static const char fn[] = "nnt_sft_create";
    *system = NULL;
    int known = recognise_known(raw, t, system);
    if (known)
        return known < 0 ? nnt_fail(NULL, NNT_E_NOMEM, "%s: out of host memory", fn) : NNT_OK;
    char *norm = normalize_template(raw);
    if (!norm)
        return nnt_fail(NULL, NNT_E_NOMEM, "%s: out of host memory", fn);
    int chatml = has(norm, "'<|im_start|>' + message['role'] + '\\n' + message['content'] + "
                           "'<|im_end|>'") ||
                 has(norm, "'<|im_start|>' + message.role + '\\n' + message.content + "
                           "'<|im_end|>'");
    int llama3 = has(norm, "'<|start_header_id|>' + message['role'] + '<|end_header_id|>\\n\\n'"
                           " + message['content'] | trim + '<|eot_id|>'") &&
                 strstr(norm, "bos_token");
    const char *extra = strstr(norm, "tool") ? "tools"
                      : strstr(norm, "think") || strstr(norm, "reasoning") ? "reasoning"
                      : strstr(norm, "CuttingKnowledge") ? "a dated system message (Llama 3.1+)"
                      : NULL;
    int rc = NNT_OK;
    if ((chatml || llama3) && !extra) {
        *t = chatml ? NNT_CHAT_CHATML : NNT_CHAT_LLAMA3;
        if (chatml && has(norm, "messages[0]['role'] != 'system'") &&
            default_system(raw, system))
            rc = nnt_fail(NULL, NNT_E_NOMEM, "%s: out of host memory", fn);
    } else {
        char head[61];
        size_t k = 0;
        for (const char *p = raw; *p && k < 60; p++)
            head[k++] = *p == '\n' ? ' ' : *p;
        head[k] = '\0';
        rc = nnt_fail(NULL, NNT_E_UNSUPPORTED, "%s: %s: chat_template \"%s%s\" is not one nnt "
                      "knows%s%s (plain ChatML as SmolLM2 uses it, Llama 3's headers, and "
                      "Qwen2.5's, Qwen3's, Llama 3.1's, 3.2's, Gemma's, Gemma 3's, Phi-3's, "
                      "Phi-3.5's, Qwen3-Instruct-2507's, DeepSeek-R1-Distill's and gpt-oss's "
                      "templates exactly as their models publish them): give the template to "
                      "render with (nnt-tokenize --chat-template " TEMPLATE_NAMES ")",
                      fn, path, head, raw[k] ? "..." : "", extra ? ": it has " : "",
                      extra ? extra : "");
    }
    free(norm);
    return rc;
}

/* The chat_template.jinja beside the configuration file path, which transformers reads
 * instead of tokenizer_config.json's chat_template when it is there: 0 and *text (malloc'd)
 * or NULL when there is none. */
static int read_jinja(const char *path, char **text, char **where)
{
    static const char fn[] = "nnt_sft_create";
    const char *slash = strrchr(path, '/');
    size_t dir = slash ? (size_t)(slash - path) + 1 : 0, len = 0;
    *text = NULL;
    *where = malloc(dir + 20);
    if (!*where)
        return nnt_fail(NULL, NNT_E_NOMEM, "%s: out of host memory", fn);
    snprintf(*where, dir + 20, "%.*schat_template.jinja", (int)dir, path);
    if (access(*where, F_OK) != 0)
        return NNT_OK;
    return read_whole(*where, text, &len, fn);
}

/* eos_token, bos_token and the chat template of tokenizer_config.json (a file, or a
 * directory's), or of the chat_template.jinja beside it. */
static int read_config(nnt_sft *s, const char *path, int want_template)
{
    static const char fn[] = "nnt_sft_create";
    char *file = NULL, *buf = NULL, *jinja = NULL, *jinja_path = NULL;
    size_t len = strlen(path);
    if (len > 5 && strcmp(path + len - 5, ".json") != 0) {   /* a directory */
        file = malloc(len + 24);
        if (!file)
            return nnt_fail(NULL, NNT_E_NOMEM, "%s: out of host memory", fn);
        snprintf(file, len + 24, "%s/tokenizer_config.json", path);
        path = file;
    }
    int rc = read_whole(path, &buf, &len, fn);
    if (rc == 0 && want_template)
        rc = read_jinja(path, &jinja, &jinja_path);
    jv root;
    memset(&root, 0, sizeof root);
    if (rc == 0) {
        char err[NNT_IO_ERRLEN];
        nnt_json j;
        nnt_json_init(&j, buf, len, 0, path, err, sizeof err);
        rc = hft_jv_parse(&j, &root, 0, "in tokenizer_config.json");
        if (rc == 0)
            rc = nnt_json_end(&j);
        if (rc == 0 && root.type != JV_OBJ)
            rc = nnt_json_fail(&j, "is not a JSON object");
        if (rc)
            rc = nnt_fail(NULL, rc, "%s: %s", fn, err);
    }
    const char *eos = rc == 0 ? token_text(hft_jv_get(&root, "eos_token")) : NULL;
    const char *pad = rc == 0 ? token_text(hft_jv_get(&root, "pad_token")) : NULL;
    const char *bos = rc == 0 ? token_text(hft_jv_get(&root, "bos_token")) : NULL;
    if ((eos && (s->eos = strdup(eos)) == NULL) || (pad && (s->pad = strdup(pad)) == NULL) ||
        (bos && (s->bos = strdup(bos)) == NULL))
        rc = nnt_fail(NULL, NNT_E_NOMEM, "%s: out of host memory", fn);
    const jv *tmpl = rc == 0 && want_template ? hft_jv_get(&root, "chat_template") : NULL;
    if (rc == 0 && jinja)
        rc = recognise(jinja_path, jinja, &s->tmpl, &s->system);
    else if (tmpl && tmpl->type == JV_STR)
        rc = recognise(path, tmpl->s, &s->tmpl, &s->system);
    else if (tmpl && tmpl->type != JV_NULL)
        rc = nnt_fail(NULL, NNT_E_UNSUPPORTED, "%s: %s: chat_template is not one string (named "
                      "templates): give the template to render with (" TEMPLATE_NAMES ")", fn,
                      path);
    hft_jv_free(&root);
    free(buf);
    free(file);
    free(jinja);
    free(jinja_path);
    return rc;
}

NNT_API int nnt_chat_template_from_name(const char *name, nnt_chat_template *out)
{
    if (!name || !out)
        return nnt_fail(NULL, NNT_E_INVAL, "nnt_chat_template_from_name: %s is NULL",
                        name ? "out" : "name");
    static const struct {
        const char *name;
        nnt_chat_template t;
    } NAMES[] = {{"chatml", NNT_CHAT_CHATML}, {"llama3", NNT_CHAT_LLAMA3},
                 {"qwen2.5", NNT_CHAT_QWEN2_5}, {"qwen3", NNT_CHAT_QWEN3},
                 {"llama3.1", NNT_CHAT_LLAMA3_1}, {"llama3.2", NNT_CHAT_LLAMA3_2},
                 {"gemma", NNT_CHAT_GEMMA}, {"gemma2", NNT_CHAT_GEMMA},
                 {"gemma3", NNT_CHAT_GEMMA3}, {"phi3", NNT_CHAT_PHI3},
                 {"phi3.5", NNT_CHAT_PHI3_5}, {"qwen3-2507", NNT_CHAT_QWEN3_2507},
                 {"deepseek-r1", NNT_CHAT_DEEPSEEK_R1}, {"gpt-oss", NNT_CHAT_GPT_OSS},
                 {"none", NNT_CHAT_NONE}};
    for (size_t k = 0; k < sizeof NAMES / sizeof NAMES[0]; k++)
        if (strcmp(name, NAMES[k].name) == 0) {
            *out = NAMES[k].t;
            return NNT_OK;
        }
    return nnt_fail(NULL, NNT_E_UNSUPPORTED, "chat template \"%s\" is not one nnt knows "
                    "(" TEMPLATE_NAMES ", gemma2, none)", name);
}

void nnt_sft_destroy(nnt_sft *s)
{
    if (!s)
        return;
    free(s->system), free(s->eos), free(s->bos), free(s->pad);
    free(s->ids), free(s->counts), free(s->a), free(s->b);
    free(s->pair_ids), free(s->pair_counts);
    free(s->text.p);
    nnt_label_names_free(s->label_names, s->nlabel_names);
    hft_jv_free(&s->tools_tree);
    free(s);
}

/* Llama 3.1+'s and gpt-oss's date: the option's, else the template's default: 3.1's
 * date_string, 3.2's strftime_now("%d %b %Y") (local time; the month's English abbreviation,
 * as Python's C locale writes it), gpt-oss's strftime_now("%Y-%m-%d"). */
static void set_date(nnt_sft *s, const char *date)
{
    static const char *const MONTHS[] = {"Jan", "Feb", "Mar", "Apr", "May", "Jun",
                                         "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};
    time_t now = time(NULL);
    struct tm tm;
    if (date)
        snprintf(s->date, sizeof s->date, "%s", date);
    else if (s->tmpl == NNT_CHAT_LLAMA3_2 && localtime_r(&now, &tm))
        snprintf(s->date, sizeof s->date, "%02d %s %04d", tm.tm_mday, MONTHS[tm.tm_mon % 12],
                 tm.tm_year + 1900);
    else if (s->tmpl == NNT_CHAT_GPT_OSS && localtime_r(&now, &tm))
        snprintf(s->date, sizeof s->date, "%04d-%02d-%02d", tm.tm_year + 1900, tm.tm_mon + 1,
                 tm.tm_mday);
    else
        snprintf(s->date, sizeof s->date, "26 Jul 2024");
}

NNT_API int nnt_sft_create(const nnt_tokenizer *tok, const nnt_sft_options *opts, nnt_sft **out)
{
    static const char fn[] = "nnt_sft_create";
    if (!out)
        return nnt_fail(NULL, NNT_E_INVAL, "%s: out is NULL", fn);
    *out = NULL;
    if (!tok)
        return nnt_fail(NULL, NNT_E_INVAL, "%s: tok is NULL", fn);
    static const nnt_sft_options defaults = NNT_SFT_OPTIONS_INIT;
    nnt_sft_options o;
    static const size_t older[] = {offsetof(nnt_sft_options, date),   /* before 0.3's date */
                                   offsetof(nnt_sft_options, assistant_only)};   /* 0.3 */
    NNT_TRY(nnt_read_options_sizes(fn, opts, &defaults, &o, sizeof o, older,
                                   sizeof older / sizeof *older,
                                   "initialise them with NNT_SFT_OPTIONS_INIT"));
    if ((unsigned)o.chat_template > NNT_CHAT_GPT_OSS)
        return nnt_fail(NULL, NNT_E_INVAL, "%s: chat_template %d", fn, (int)o.chat_template);
    if (o.all_tokens != 0 && o.all_tokens != 1)
        return nnt_fail(NULL, NNT_E_INVAL, "%s: all_tokens %d (use 0 or 1)", fn, o.all_tokens);
    if ((o.assistant_only != 0 && o.assistant_only != 1) || (o.assistant_only && o.all_tokens))
        return nnt_fail(NULL, NNT_E_INVAL, "%s: assistant_only %d (use 0 or 1; not with "
                        "all_tokens)", fn, o.assistant_only);
    if (o.no_thinking != 0 && o.no_thinking != 1)
        return nnt_fail(NULL, NNT_E_INVAL, "%s: no_thinking %d (use 0 or 1)", fn,
                        o.no_thinking);
    if (o.date && (!*o.date || strlen(o.date) >= 32 || strchr(o.date, '\n')))
        return nnt_fail(NULL, NNT_E_INVAL, "%s: date \"%s\" (one line of at most 31 bytes, as "
                        "\"26 Jul 2024\")", fn, o.date);
    nnt_sft *s = calloc(1, sizeof *s);
    if (!s)
        return nnt_fail(NULL, NNT_E_NOMEM, "%s: out of host memory", fn);
    s->tok = tok;
    s->all_tokens = o.all_tokens;
    s->assistant_only = o.assistant_only;
    s->no_thinking = o.no_thinking;
    s->tmpl = o.chat_template == NNT_CHAT_AUTO ? NNT_CHAT_NONE : o.chat_template;
    int rc = o.tokenizer_config
                 ? read_config(s, o.tokenizer_config, o.chat_template == NNT_CHAT_AUTO)
                 : NNT_OK;
    if (rc == 0 && s->tmpl == NNT_CHAT_QWEN2_5 && !s->system && !(s->system = strdup(QWEN_SYSTEM)))
        rc = nnt_fail(NULL, NNT_E_NOMEM, "%s: out of host memory", fn);
    if (rc) {
        nnt_sft_destroy(s);
        return rc;
    }
    if (s->no_thinking && s->tmpl != NNT_CHAT_QWEN3) {
        rc = nnt_fail(NULL, NNT_E_INVAL, "%s: no_thinking: the %s template has no switch for "
                      "thinking (Qwen3's enable_thinking)", fn,
                      s->tmpl == NNT_CHAT_NONE ? "(no)" : template_name(s->tmpl));
        nnt_sft_destroy(s);
        return rc;
    }
    set_date(s, o.date);
    nnt_tokenizer_single_affixes(tok, &s->pre, &s->npre, &s->post, &s->npost);
    const char *pad = s->pad ? s->pad : s->eos;   /* TRL: pad_token, else eos_token */
    int32_t id[2];
    size_t n = 0;
    if (pad && nnt_tokenizer_encode(tok, pad, strlen(pad), id, 2, &n) == 0 && n == 1)
        s->pad_id = id[0];
    *out = s;
    return NNT_OK;
}

NNT_API int nnt_sft_pad_id(const nnt_sft *s, int32_t *id)
{
    if (!s || !id)
        return nnt_fail(NULL, NNT_E_INVAL, "nnt_sft_pad_id: %s is NULL", s ? "id" : "s");
    *id = s->pad_id;
    return NNT_OK;
}

NNT_API int nnt_sft_template_of(const nnt_sft *s, nnt_chat_template *t)
{
    if (!s || !t)
        return nnt_fail(NULL, NNT_E_INVAL, "nnt_sft_template_of: %s is NULL", s ? "t" : "s");
    *t = s->tmpl;
    return NNT_OK;
}

/* ---- encoding ------------------------------------------------------------------------------ */

/* ids of text[0..len) into *buf (room *cap, grown), *n of them. */
static int encode(nnt_sft *s, const char *text, size_t len, int32_t **buf, size_t *cap,
                  size_t *n)
{
    size_t want = len + 16;
    for (int round = 0; round < 2; round++) {
        if (*cap < want) {
            int32_t *b = realloc(*buf, want * sizeof *b);
            if (!b)
                return nnt_fail(NULL, NNT_E_NOMEM, "nnt_sft_encode: out of host memory");
            *buf = b, *cap = want;
        }
        int rc = nnt_tokenizer_encode(s->tok, text, len, *buf, *cap, n);
        if (rc == 0)
            return NNT_OK;
        if (rc != NNT_E_INVAL || *n <= *cap)
            return rc;
        want = *n;
    }
    return nnt_fail(NULL, NNT_E_RUNTIME, "nnt_sft_encode: the tokenizer's count changed");
}

static size_t common_prefix(const int32_t *a, size_t na, const int32_t *b, size_t nb)
{
    size_t k = 0;
    while (k < na && k < nb && a[k] == b[k])
        k++;
    return k;
}

/* s->ids = pre + ids(text) + post (affix 1) or ids(text) (affix 0); no target counts yet. */
static int encode_record(nnt_sft *s, const char *text, size_t len, int affix)
{
    size_t n;
    NNT_TRY(encode(s, text, len, &s->a, &s->acap, &n));
    size_t total = n + (affix ? s->npre + s->npost : 0);
    if (total > s->cap) {
        int32_t *ids = realloc(s->ids, total * sizeof *ids);
        uint8_t *c = ids ? realloc(s->counts, total) : NULL;
        if (ids)
            s->ids = ids;
        if (c)
            s->counts = c;
        if (!ids || !c)
            return nnt_fail(NULL, NNT_E_NOMEM, "nnt_sft_encode: out of host memory");
        s->cap = total;
    }
    size_t k = 0;
    if (affix)
        memcpy(s->ids, s->pre, s->npre * sizeof *s->ids), k = s->npre;
    memcpy(s->ids + k, s->a, n * sizeof *s->ids);
    if (affix)
        memcpy(s->ids + k + n, s->post, s->npost * sizeof *s->ids);
    s->n = total;
    memset(s->counts, 0, total);
    return NNT_OK;
}

/* The tokens that overlap text[from, to) of the record in s->ids (encoded from text without
 * affixes) count: those from the first where the ids of text[0, from) and the record part,
 * to the last that the ids of text[0, to) do not hold whole. */
static int count_span(nnt_sft *s, const char *text, size_t from, size_t to)
{
    size_t n;
    NNT_TRY(encode(s, text, from, &s->b, &s->bcap, &n));
    size_t first = common_prefix(s->b, n, s->ids, s->n);
    NNT_TRY(encode(s, text, to, &s->b, &s->bcap, &n));
    size_t p = common_prefix(s->b, n, s->ids, s->n);
    size_t end = p == n ? p : p + 1;
    for (size_t i = first; i < end && i < s->n; i++)
        s->counts[i] = 1;
    return NNT_OK;
}

static int put(nnt_sft *s, const char *str, size_t n)
{
    return hft_sb_put(&s->text, str, n) ? nnt_fail(NULL, NNT_E_NOMEM, "nnt_sft_encode: out of "
                                                   "host memory") : NNT_OK;
}

static int puts0(nnt_sft *s, const char *str)
{
    return put(s, str, strlen(str));
}

/* str + eos unless it ends with eos already (TRL's add_eos). */
static int put_with_eos(nnt_sft *s, const jv *v)
{
    NNT_TRY(put(s, v->s, v->len));
    size_t e = s->eos ? strlen(s->eos) : 0;
    if (e && !(v->len >= e && memcmp(v->s + v->len - e, s->eos, e) == 0))
        NNT_TRY(puts0(s, s->eos));
    return NNT_OK;
}

/* ---- chat templates ------------------------------------------------------------------------ */

/* The bytes of the white-space character at s (n bytes left), as Python's str.isspace
 * (Jinja's trim is str.strip()) sees it: ASCII \t \n \v \f \r, \x1c-\x1f and space, U+0085,
 * U+00A0, U+1680, U+2000-U+200A, U+2028, U+2029, U+202F, U+205F, U+3000; 0 if none. */
static size_t space_at(const char *s, size_t n)
{
    const unsigned char *u = (const unsigned char *)s;
    if (n == 0)
        return 0;
    if (u[0] < 0x80)
        return (u[0] >= 0x09 && u[0] <= 0x0d) || (u[0] >= 0x1c && u[0] <= 0x20);
    unsigned cp;
    size_t len;
    if ((u[0] & 0xe0) == 0xc0 && n >= 2)
        cp = (u[0] & 0x1fu) << 6 | (u[1] & 0x3fu), len = 2;
    else if ((u[0] & 0xf0) == 0xe0 && n >= 3)
        cp = (u[0] & 0x0fu) << 12 | (u[1] & 0x3fu) << 6 | (u[2] & 0x3fu), len = 3;
    else
        return 0;
    int white = cp == 0x85 || cp == 0xa0 || cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200a) ||
                cp == 0x2028 || cp == 0x2029 || cp == 0x202f || cp == 0x205f || cp == 0x3000;
    return white ? len : 0;
}

/* [*b, *e) with white space stripped at both ends (Jinja's trim). */
static void trim(const char **b, const char **e)
{
    size_t k;
    while (*b < *e && (k = space_at(*b, (size_t)(*e - *b))) > 0)
        *b += k;
    while (*e > *b) {
        const char *last = *e - 1;   /* the start of the last character */
        while (last > *b && ((unsigned char)*last & 0xc0) == 0x80 && *e - last < 4)
            last--;
        if ((k = space_at(last, (size_t)(*e - last))) == 0 || last + k != *e)
            break;
        *e = last;
    }
}

static const char *template_name(nnt_chat_template t)
{
    static const char *const NAMES[] = {"", "", "ChatML", "Llama 3", "Qwen2.5", "Qwen3",
                                        "Llama 3.1", "Llama 3.2", "Gemma", "Gemma 3",
                                        "Phi-3", "Phi-3.5", "Qwen3-Instruct-2507",
                                        "DeepSeek-R1-Distill", "gpt-oss"};
    return (unsigned)t < sizeof NAMES / sizeof NAMES[0] ? NAMES[t] : "";
}

static int is_llama31(nnt_chat_template t)
{
    return t == NNT_CHAT_LLAMA3_1 || t == NNT_CHAT_LLAMA3_2;
}

/* Gemma 3's content as a list of parts: each {"type": "text", "text": string} (the template
 * renders their texts trimmed, one after another; other keys of a part it ignores); an image
 * or another kind of part refused (nnt trains text models). */
static int content_parts(const jv *content, size_t i)
{
    static const char fn[] = "nnt_sft_encode";
    for (size_t k = 0; k < content->n; k++) {
        const jv *part = &content->items[k];
        const jv *type = hft_jv_get(part, "type"), *text = hft_jv_get(part, "text");
        if (part->type != JV_OBJ || !type || type->type != JV_STR)
            return nnt_fail(NULL, NNT_E_FORMAT, "%s: messages[%zu].content[%zu] is not a part "
                            "{\"type\": \"text\", \"text\": string}", fn, i, k);
        if (strcmp(type->s, "text") != 0)
            return nnt_fail(NULL, NNT_E_FORMAT, "%s: messages[%zu].content[%zu] is a part of "
                            "type \"%s\": nnt trains text models and renders text parts only",
                            fn, i, k, type->s);
        if (!text || text->type != JV_STR)
            return nnt_fail(NULL, NNT_E_FORMAT, "%s: messages[%zu].content[%zu] is a text part "
                            "without a string \"text\"", fn, i, k);
    }
    return NNT_OK;
}

/* The names of a message's reasoning, in the order transformers takes them for what a
 * template reads (_alias_reasoning_fields): gpt-oss's "thinking" (thinking itself, else the
 * first of the others), and Qwen3's "reasoning_content" (the first of reasoning_content,
 * thinking, reasoning) */
static const char *const GPTOSS_THINKING[] = {"thinking", "reasoning_content", "reasoning"};
static const char *const QWEN3_REASONING[] = {"reasoning_content", "thinking", "reasoning"};

/* The reasoning of message m as transformers hands it to the template: the first of names
 * (GPTOSS_THINKING, QWEN3_REASONING) that is not null (apply_chat_template drops null
 * values); NULL if none. *bad: one of them is neither a string nor null. */
static const jv *reasoning_of(const jv *m, const char *const *names, int *bad)
{
    const jv *found = NULL;
    *bad = 0;
    for (int k = 0; k < 3; k++) {
        const jv *v = hft_jv_get(m, names[k]);
        if (v && v->type != JV_NULL && v->type != JV_STR)
            *bad = 1;
        if (!found && v && v->type == JV_STR)
            found = v;
    }
    return found;
}

/* 1 when text[0, n) holds what */
static int holds(const char *text, size_t n, const char *what)
{
    size_t w = strlen(what);
    for (size_t k = 0; k + w <= n; k++)
        if (memcmp(text + k, what, w) == 0)
            return 1;
    return 0;
}

/* gpt-oss's template refuses an assistant's content or thinking that holds a channel tag */
static int gptoss_no_channel(const jv *v, size_t i, const char *field)
{
    static const char *const TAGS[] = {"<|channel|>analysis<|message|>",
                                       "<|channel|>final<|message|>"};
    for (int k = 0; v && k < 2; k++)
        if (holds(v->s, v->len, TAGS[k]))
            return nnt_fail(NULL, NNT_E_FORMAT, "nnt_sft_encode: messages[%zu]'s %s holds "
                            "\"%s\", which the gpt-oss template refuses: give the analysis as "
                            "\"thinking\" and the final answer as \"content\", without channel "
                            "tags", i, field, TAGS[k]);
    return NNT_OK;
}

/* The templates that render tools: Qwen2.5's, Qwen3's, Qwen3-Instruct-2507's (Hermes'
 * <tools>, <tool_call>, <tool_response>), Llama 3.1's and 3.2's (JSON calls, ipython) and
 * gpt-oss's (harmony: a TypeScript namespace, calls on the commentary channel) */
static int has_tools(nnt_chat_template t)
{
    return t == NNT_CHAT_QWEN2_5 || t == NNT_CHAT_QWEN3 || t == NNT_CHAT_QWEN3_2507 ||
           is_llama31(t) || t == NNT_CHAT_GPT_OSS;
}

#define TOOL_TEMPLATES "Qwen2.5, Qwen3, Qwen3-Instruct-2507, Llama 3.1, Llama 3.2 and gpt-oss"

/* m's value of key, NULL when absent or null (apply_chat_template drops a message's null
 * values before the template sees them) */
static const jv *field(const jv *m, const char *key)
{
    const jv *v = hft_jv_get(m, key);
    return v && v->type != JV_NULL ? v : NULL;
}

static char nothing[1];
static const jv EMPTY = {JV_STR, 0, nothing, 0, 0, NULL, NULL};   /* content "" */

/* What the templates read of a tool call: its function's name, arguments (any JSON value; a
 * string Qwen3 prints as it is, the others quote) and gpt-oss's content_type (NULL: none) */
typedef struct tool_call {
    const jv *name, *arguments, *content_type;
} tool_call;

/* Tool call k of messages[i]: its function is its "function" object when it has one, else
 * the call itself (Qwen's and gpt-oss's templates take either; Llama's want the "function"
 * object); checked, into *c. */
static int call_parts(const jv *call, size_t i, size_t k, nnt_chat_template t, tool_call *c)
{
    static const char fn[] = "nnt_sft_encode";
    const jv *f = call->type == JV_OBJ ? hft_jv_get(call, "function") : NULL;
    if (call->type != JV_OBJ || (f && f->type != JV_OBJ) || (!f && is_llama31(t)))
        return nnt_fail(NULL, NNT_E_FORMAT, "%s: messages[%zu].tool_calls[%zu] is not {\"type\": "
                        "\"function\", \"function\": {\"name\": string, \"arguments\": ...}}%s",
                        fn, i, k, is_llama31(t) ? "" : " (or {\"name\", \"arguments\"})");
    if (!f)
        f = call;
    c->name = hft_jv_get(f, "name");
    c->arguments = hft_jv_get(f, "arguments");
    c->content_type = hft_jv_get(f, "content_type");
    if (!c->name || c->name->type != JV_STR || !c->arguments)
        return nnt_fail(NULL, NNT_E_FORMAT, "%s: messages[%zu].tool_calls[%zu] has %s", fn, i, k,
                        !c->name || c->name->type != JV_STR ? "no string \"name\""
                                                            : "no \"arguments\"");
    if (t == NNT_CHAT_GPT_OSS && c->content_type && c->content_type->type != JV_STR)
        return nnt_fail(NULL, NNT_E_FORMAT, "%s: messages[%zu].tool_calls[%zu].content_type is "
                        "not a string", fn, i, k);
    return NNT_OK;
}

/* An assistant's tool calls checked: a list of calls (call_parts), one exactly for Llama's
 * templates ("This model only supports single tool-calls at once!") and gpt-oss's (it
 * renders the first alone: nnt refuses to drop the others) */
static int check_calls(const jv *calls, size_t i, nnt_chat_template t)
{
    static const char fn[] = "nnt_sft_encode";
    if (!has_tools(t))
        return nnt_fail(NULL, NNT_E_FORMAT, "%s: messages[%zu] has tool_calls, which the %s "
                        "template does not render (nnt renders tools with the " TOOL_TEMPLATES
                        " templates)", fn, i, template_name(t));
    if (calls->type != JV_ARR)
        return nnt_fail(NULL, NNT_E_FORMAT, "%s: messages[%zu].tool_calls is not a list", fn, i);
    if ((is_llama31(t) || t == NNT_CHAT_GPT_OSS) && calls->n != 1)
        return nnt_fail(NULL, NNT_E_FORMAT, "%s: messages[%zu] has %zu tool calls: the %s "
                        "template takes one a message (%s)", fn, i, calls->n, template_name(t),
                        is_llama31(t) ? "\"This model only supports single tool-calls at "
                                        "once!\"" : "it renders the first alone");
    tool_call c;
    for (size_t k = 0; k < calls->n; k++)
        NNT_TRY(call_parts(&calls->items[k], i, k, t, &c));
    return NNT_OK;
}

/* 1 for a tool's response: role "tool" (Llama's also "ipython") */
static int is_tool_role(const char *r, nnt_chat_template t)
{
    return strcmp(r, "tool") == 0 || (is_llama31(t) && strcmp(r, "ipython") == 0);
}

/* The keys a message may have beyond role and content: the reasoning (gpt-oss, Qwen3), an
 * assistant's tool_calls, a tool response's name and tool_call_id (no template prints
 * them) */
static int known_key(const char *key, const char *role, nnt_chat_template t)
{
    int reasoning = t == NNT_CHAT_GPT_OSS || t == NNT_CHAT_QWEN3;
    if (!strcmp(key, "role") || !strcmp(key, "content"))
        return 1;
    if (reasoning && (!strcmp(key, GPTOSS_THINKING[0]) || !strcmp(key, GPTOSS_THINKING[1]) ||
                      !strcmp(key, GPTOSS_THINKING[2])))
        return 1;
    if (!strcmp(key, "tool_calls"))
        return strcmp(role, "assistant") == 0;
    return has_tools(t) && is_tool_role(role, t) &&
           (!strcmp(key, "name") || !strcmp(key, "tool_call_id"));
}

/* One message checked: its role (system, user or assistant; gpt-oss: or developer; the
 * templates with tools: or tool, Llama's also ipython), its content (a string; Gemma 3: or
 * a list of text parts; absent for an assistant's tool calls; a tool's for Llama: or an
 * object or a list, which it prints as JSON), and for Qwen3 its reasoning_content, for
 * gpt-oss its thinking (reasoning_of: either from any of the three names transformers
 * aliases) (NULL when absent), an assistant's tool_calls (NULL when absent); the keys nnt
 * renders, no others (null values are absent, as apply_chat_template drops them). */
static int message_parts(const jv *m, size_t i, nnt_chat_template t, const jv **role,
                         const jv **content, const jv **reasoning, const jv **calls)
{
    static const char fn[] = "nnt_sft_encode";
    int gptoss = t == NNT_CHAT_GPT_OSS, qwen3 = t == NNT_CHAT_QWEN3, bad = 0;
    *role = field(m, "role");
    *content = field(m, "content");
    *calls = field(m, "tool_calls");
    *reasoning = m->type != JV_OBJ ? NULL
                 : gptoss ? reasoning_of(m, GPTOSS_THINKING, &bad)
                 : qwen3 ? reasoning_of(m, QWEN3_REASONING, &bad) : NULL;
    int parts = *content && (*content)->type == JV_ARR;
    const char *r = *role && (*role)->type == JV_STR ? (*role)->s : "";
    int tool = has_tools(t) && is_tool_role(r, t), assistant = strcmp(r, "assistant") == 0;
    int json_content = tool && (is_llama31(t) || gptoss) && *content &&
                       ((*content)->type == JV_OBJ || (*content)->type == JV_ARR);
    if (parts && t != NNT_CHAT_GEMMA3 && !json_content)
        return nnt_fail(NULL, NNT_E_FORMAT, "%s: messages[%zu]'s content is a list of parts, "
                        "which nnt renders with the Gemma 3 template only (the %s template "
                        "takes a string)", fn, i, template_name(t));
    if (*calls && m->type == JV_OBJ)   /* (before the content, which calls may stand for) */
        NNT_TRY(check_calls(*calls, i, t));
    if (!*content && assistant && *calls && (*calls)->n > 0)
        *content = &EMPTY;   /* (calls without content) */
    if (m->type != JV_OBJ || !*role || (*role)->type != JV_STR || !*content ||
        ((*content)->type != JV_STR && !parts && !json_content) ||
        (*reasoning && (*reasoning)->type != JV_STR) || bad)
        return nnt_fail(NULL, NNT_E_FORMAT, "%s: messages[%zu] is not {\"role\": string, "
                        "\"content\": string%s}%s", fn, i,
                        gptoss ? " (, \"thinking\" or \"reasoning_content\" or \"reasoning\": "
                                 "string or null)"
                        : qwen3 ? " (, \"reasoning_content\" or \"thinking\" or \"reasoning\": "
                                  "string or null)"
                        : t == NNT_CHAT_GEMMA3 ? " or [text parts]" : "",
                        has_tools(t) ? " (an assistant's content may be left out beside "
                                       "tool_calls)" : "");
    if (parts && !json_content)
        NNT_TRY(content_parts(*content, i));
    for (size_t k = 0; k < m->n; k++) {
        const char *key = m->keys[k];
        if (m->items[k].type == JV_NULL || known_key(key, r, t))
            continue;
        if (!strcmp(key, "tool_calls") || !strcmp(key, "function_call"))
            return nnt_fail(NULL, NNT_E_FORMAT, "%s: messages[%zu] has %s: %s", fn, i, key,
                            !strcmp(key, "function_call")
                            ? "OpenAI's older form: give tool_calls [{\"type\": \"function\", "
                              "\"function\": {\"name\", \"arguments\"}}]"
                            : "tool calls are an assistant's");
        return nnt_fail(NULL, NNT_E_FORMAT, "%s: messages[%zu] has the key \"%s\", which nnt "
                        "does not render with the %s template (role, content%s%s)", fn, i, key,
                        template_name(t),
                        gptoss ? ", thinking, reasoning_content, reasoning"
                        : qwen3 ? ", reasoning_content, thinking, reasoning" : "",
                        has_tools(t) ? ", an assistant's tool_calls, a tool's name and "
                                       "tool_call_id" : "");
    }
    if (!has_tools(t) && (!strcmp(r, "tool") || !strcmp(r, "ipython") ||
                          !strcmp(r, "function")))
        return nnt_fail(NULL, NNT_E_FORMAT, "%s: messages[%zu] has role \"%s\": the %s template "
                        "renders no tool messages (nnt renders tools with the " TOOL_TEMPLATES
                        " templates)", fn, i, r, template_name(t));
    if (strcmp(r, "system") && strcmp(r, "user") && !assistant && !tool &&
        !(gptoss && strcmp(r, "developer") == 0))
        return nnt_fail(NULL, NNT_E_FORMAT, "%s: messages[%zu] has role \"%s\", which the %s "
                        "template does not know (system, %suser, assistant%s)%s", fn, i, r,
                        template_name(t), gptoss ? "developer, " : "",
                        is_llama31(t) ? ", tool, ipython" : has_tools(t) ? ", tool" : "",
                        strcmp(r, "human") == 0 || strcmp(r, "gpt") == 0
                        ? "; ShareGPT's human and gpt are not renamed, as TRL does not rename "
                          "them: write user and assistant" : "");
    int called = *calls && (*calls)->n > 0;
    if (assistant && !parts && (*content)->len == 0 && !called &&
        !(*reasoning && (*reasoning)->len > 0))
        return nnt_fail(NULL, NNT_E_FORMAT, "%s: messages[%zu] is an empty assistant message: "
                        "nothing to learn", fn, i);
    if (gptoss && assistant) {
        NNT_TRY(gptoss_no_channel(*content, i, "content"));
        NNT_TRY(gptoss_no_channel(*reasoning, i, "thinking"));
        if (called && (*content)->len > 0 && *reasoning && (*reasoning)->len > 0)
            return nnt_fail(NULL, NNT_E_FORMAT, "%s: messages[%zu] has tool calls with both "
                            "content and thinking, which the gpt-oss template refuses (\"Put "
                            "the analysis message in one or the other, but not both.\")", fn, i);
    }
    return NNT_OK;
}

/* Where the assistant turns are in s->text: [at[2k], at[2k + 1]) the part that counts. */
typedef struct turns {
    size_t at[2 * 64];
    size_t n;
} turns;

static int turn_begin(turns *a)
{
    if (a->n == 64)
        return nnt_fail(NULL, NNT_E_FORMAT, "nnt_sft_encode: more than 64 assistant messages");
    return NNT_OK;
}

static int is_gemma(nnt_chat_template t)
{
    return t == NNT_CHAT_GEMMA || t == NNT_CHAT_GEMMA3;
}

/* The ChatML templates: plain ChatML, and Qwen2.5's, Qwen3's and Qwen3-Instruct-2507's */
static int is_chatml(nnt_chat_template t)
{
    return t == NNT_CHAT_CHATML || t == NNT_CHAT_QWEN2_5 || t == NNT_CHAT_QWEN3 ||
           t == NNT_CHAT_QWEN3_2507;
}

/* tokenizer_config.json's bos_token, else the template's */
static const char *bos_of(const nnt_sft *s)
{
    if (s->bos)
        return s->bos;
    return is_gemma(s->tmpl) ? "<bos>"
         : s->tmpl == NNT_CHAT_DEEPSEEK_R1 ? R1_BOS : "<|begin_of_text|>";
}

/* v as the templates' tojson writes it (indent < 0: on one line) */
static int put_json(nnt_sft *s, const jv *v, int indent)
{
    return hft_jv_tojson(&s->text, v, indent) ? nnt_fail(NULL, NNT_E_NOMEM, "nnt_sft_encode: "
                                                         "out of host memory") : NNT_OK;
}

/* An assistant's tool calls as Qwen's templates write them after its content: each
 * "<tool_call>\n{\"name\": \"NAME\", \"arguments\": ARGUMENTS}\n</tool_call>", after a
 * newline (Qwen2.5: every one; Qwen3 and 3-Instruct-2507: all but a first one after no
 * content); the arguments as tojson writes them (Qwen3 and 3-Instruct-2507: a string as it
 * is). */
static int put_qwen_calls(nnt_sft *s, const jv *calls, size_t i, int content)
{
    int qwen25 = s->tmpl == NNT_CHAT_QWEN2_5;
    for (size_t k = 0; calls && k < calls->n; k++) {
        tool_call c;
        call_parts(&calls->items[k], i, k, s->tmpl, &c);   /* (checked by message_parts) */
        if (qwen25 || content || k > 0)
            NNT_TRY(puts0(s, "\n"));
        NNT_TRY(puts0(s, "<tool_call>\n{\"name\": \""));
        NNT_TRY(put(s, c.name->s, c.name->len));
        NNT_TRY(puts0(s, "\", \"arguments\": "));
        if (c.arguments->type == JV_STR && !qwen25)
            NNT_TRY(put(s, c.arguments->s, c.arguments->len));
        else
            NNT_TRY(put_json(s, c.arguments, -1));
        NNT_TRY(puts0(s, "}\n</tool_call>"));
    }
    return NNT_OK;
}

static int render_qwen_tool(nnt_sft *s, const jv *msgs, size_t i, const jv *content);

/* ChatML (and Qwen2.5; Qwen3-Instruct-2507; Qwen3's other messages than an assistant's):
 * <|im_start|>ROLE\nCONTENT<|im_end|>\n; an assistant's "\n" CONTENT "<|im_end|>\n" counts
 * (TRL's qwen2_5_training.jinja), Qwen3-Instruct-2507's without the "\n"
 * (its qwen3_instruct_2507_training.jinja); tool calls after the content (put_qwen_calls;
 * Qwen2.5's "\n" CONTENT only when there is content); a tool's response render_qwen_tool's. */
static int render_chatml(nnt_sft *s, const jv *msgs, size_t i, const jv *role,
                         const jv *content, const jv *calls, turns *a)
{
    int assistant = strcmp(role->s, "assistant") == 0, called = calls && calls->n > 0;
    if (is_tool_role(role->s, s->tmpl))
        return render_qwen_tool(s, msgs, i, content);
    NNT_TRY(puts0(s, "<|im_start|>"));
    NNT_TRY(put(s, role->s, role->len));
    size_t newline = s->text.n;
    if (!(called && s->tmpl == NNT_CHAT_QWEN2_5 && content->len == 0))
        NNT_TRY(puts0(s, "\n"));
    if (assistant)
        a->at[2 * a->n] = s->tmpl == NNT_CHAT_QWEN3_2507 ? s->text.n : newline;
    NNT_TRY(put(s, content->s, content->len));
    NNT_TRY(put_qwen_calls(s, called ? calls : NULL, i, content->len > 0));
    NNT_TRY(puts0(s, "<|im_end|>\n"));
    if (assistant)
        a->at[2 * a->n++ + 1] = s->text.n;
    return NNT_OK;
}

/* ChatML's start (Qwen's too): without tools, the default system message (SmolLM2's,
 * Qwen2.5's) when the first message is not a system one; with tools (a non-empty list), Qwen's
 * system block: <|im_start|>system\n, the first system message's content (Qwen2.5: else its
 * default one) and "\n\n", then the tools, each as tojson writes it on a line of its own in
 * <tools></tools>, and how to call them; *skip 1 when the first message went into it. */
static int chatml_start(nnt_sft *s, const jv *msgs, int *skip)
{
    const jv *role = field(&msgs->items[0], "role");
    const jv *content = field(&msgs->items[0], "content");
    int system = strcmp(role->s, "system") == 0;
    *skip = 0;
    if (!s->tools || s->tools->n == 0) {
        if (!s->system || system)
            return NNT_OK;
        NNT_TRY(puts0(s, "<|im_start|>system\n"));
        NNT_TRY(puts0(s, s->system));
        return puts0(s, "<|im_end|>\n");
    }
    *skip = system;
    NNT_TRY(puts0(s, "<|im_start|>system\n"));
    if (*skip)
        NNT_TRY(put(s, content->s, content->len));
    else if (s->tmpl == NNT_CHAT_QWEN2_5)
        NNT_TRY(puts0(s, s->system));
    if (*skip || s->tmpl == NNT_CHAT_QWEN2_5)
        NNT_TRY(puts0(s, "\n\n"));
    NNT_TRY(puts0(s, "# Tools\n\nYou may call one or more functions to assist with the user "
                     "query.\n\nYou are provided with function signatures within <tools>"
                     "</tools> XML tags:\n<tools>"));
    for (size_t k = 0; k < s->tools->n; k++) {
        NNT_TRY(puts0(s, "\n"));
        NNT_TRY(put_json(s, &s->tools->items[k], -1));
    }
    return puts0(s, "\n</tools>\n\nFor each function call, return a json object with function "
                    "name and arguments within <tool_call></tool_call> XML tags:\n<tool_call>\n"
                    "{\"name\": <function-name>, \"arguments\": <args-json-object>}\n"
                    "</tool_call><|im_end|>\n");
}

/* A tool's response in Qwen's templates: "\n<tool_response>\nCONTENT\n</tool_response>" in
 * a user turn that a run of tool messages shares (opened by the first, closed by the last) */
static int render_qwen_tool(nnt_sft *s, const jv *msgs, size_t i, const jv *content)
{
    const jv *prev = i > 0 ? field(&msgs->items[i - 1], "role") : NULL;
    const jv *next = i + 1 < msgs->n ? field(&msgs->items[i + 1], "role") : NULL;
    if (!prev || strcmp(prev->s, "tool") != 0)
        NNT_TRY(puts0(s, "<|im_start|>user"));
    NNT_TRY(puts0(s, "\n<tool_response>\n"));
    NNT_TRY(put(s, content->s, content->len));
    NNT_TRY(puts0(s, "\n</tool_response>"));
    return !next || strcmp(next->s, "tool") != 0 ? puts0(s, "<|im_end|>\n") : NNT_OK;
}

/* The text of content (a string, or part k of a list of text parts) */
static const jv *content_text(const jv *content, size_t k)
{
    return content->type == JV_STR ? content : hft_jv_get(&content->items[k], "text");
}

/* [*c, *e): the text of content's part k (a string: k 0), trimmed */
static void part_trimmed(const jv *content, size_t k, const char **c, const char **e)
{
    const jv *text = content_text(content, k);
    *c = text->s, *e = text->s + text->len;
    trim(c, e);
}

/* messages[i]'s trimmed content (a list's text parts each trimmed, one after another) and the
 * turn's end marker, counted for an assistant (Llama 3's and Gemma's turns); an assistant
 * message of white space only is refused */
static int put_trimmed(nnt_sft *s, size_t i, int assistant, const jv *content, const char *end,
                       turns *a)
{
    size_t nparts = content->type == JV_STR ? 1 : content->n, start = s->text.n;
    for (size_t k = 0; k < nparts; k++) {
        const char *c, *e;
        part_trimmed(content, k, &c, &e);
        NNT_TRY(put(s, c, (size_t)(e - c)));
    }
    if (assistant && s->text.n == start)   /* (the record's text is dropped with the error) */
        return nnt_fail(NULL, NNT_E_FORMAT, "nnt_sft_encode: messages[%zu] is an assistant "
                        "message of white space only: nothing to learn", i);
    if (assistant)
        a->at[2 * a->n] = start;
    NNT_TRY(puts0(s, end));
    if (assistant)
        a->at[2 * a->n++ + 1] = s->text.n;
    return NNT_OK;
}

/* Llama 3.1's and 3.2's tool call after the assistant header, counted with its
 * <|eot_id|> (as nnt's training variant of their templates marks it): {"name": "NAME",
 * "parameters": ARGUMENTS} with the arguments as tojson writes them (its content is not
 * rendered: the templates drop it) */
static int render_llama_call(nnt_sft *s, size_t i, const jv *calls, turns *a)
{
    tool_call c;
    call_parts(&calls->items[0], i, 0, s->tmpl, &c);   /* (checked by message_parts) */
    NNT_TRY(puts0(s, "<|start_header_id|>assistant<|end_header_id|>\n\n"));
    a->at[2 * a->n] = s->text.n;
    NNT_TRY(puts0(s, "{\"name\": \""));
    NNT_TRY(put(s, c.name->s, c.name->len));
    NNT_TRY(puts0(s, "\", \"parameters\": "));
    NNT_TRY(put_json(s, c.arguments, -1));
    NNT_TRY(puts0(s, "}<|eot_id|>"));
    a->at[2 * a->n++ + 1] = s->text.n;
    return NNT_OK;
}

/* Llama 3's header and trimmed content; an assistant's content and <|eot_id|> count. Llama
 * 3.1's and 3.2's tool calls (render_llama_call), and a tool's (or ipython's) response
 * under the ipython header, its content as tojson writes it (a string quoted: the templates
 * take a string for an iterable). */
static int render_llama3(nnt_sft *s, size_t i, const jv *role, const jv *content,
                         const jv *calls, turns *a)
{
    if (calls)
        return render_llama_call(s, i, calls, a);
    if (is_llama31(s->tmpl) && is_tool_role(role->s, s->tmpl)) {
        NNT_TRY(puts0(s, "<|start_header_id|>ipython<|end_header_id|>\n\n"));
        NNT_TRY(put_json(s, content, -1));
        return puts0(s, "<|eot_id|>");
    }
    NNT_TRY(puts0(s, "<|start_header_id|>"));
    NNT_TRY(put(s, role->s, role->len));
    NNT_TRY(puts0(s, "<|end_header_id|>\n\n"));
    return put_trimmed(s, i, strcmp(role->s, "assistant") == 0, content, "<|eot_id|>", a);
}

/* [*c, *e): the trimmed content of msgs' message i */
static void trimmed_content(const jv *msgs, size_t i, const char **c, const char **e)
{
    const jv *content = field(&msgs->items[i], "content");
    *c = content->s, *e = content->s + content->len;
    trim(c, e);
}

/* Llama 3.1's and 3.2's tools: how to call them, then each as tojson(indent=4) writes it
 * and a blank line; intro the first sentence (the system block's or the user turn's) */
static int put_llama_tools(nnt_sft *s, const char *intro)
{
    NNT_TRY(puts0(s, intro));
    NNT_TRY(puts0(s, "Respond in the format {\"name\": function name, \"parameters\": "
                     "dictionary of argument name and its value}.Do not use variables.\n\n"));
    for (size_t k = 0; k < s->tools->n; k++) {
        NNT_TRY(put_json(s, &s->tools->items[k], 4));
        NNT_TRY(puts0(s, "\n\n"));
    }
    return NNT_OK;
}

/* Llama 3.1 and 3.2: bos, the system block ("Environment: ipython" with tools, the knowledge
 * and today's dates, the tools when tools_in_user_message is false, then the first message's
 * trimmed content when it is a system one); with tools and tools_in_user_message (their
 * default), the tools in a user turn before the first message after it, which must be a
 * user's; then the other messages as Llama 3's. Returns in *skip the messages that went
 * into these blocks. */
static int render_llama31_system(nnt_sft *s, const jv *msgs, int *skip)
{
    static const char fn[] = "nnt_sft_encode";
    const jv *role = field(&msgs->items[0], "role");
    const char *c, *e;
    *skip = strcmp(role->s, "system") == 0;
    NNT_TRY(puts0(s, bos_of(s)));
    NNT_TRY(puts0(s, "<|start_header_id|>system<|end_header_id|>\n\n"));
    if (s->tools)
        NNT_TRY(puts0(s, "Environment: ipython\n"));
    NNT_TRY(puts0(s, "Cutting Knowledge Date: December 2023\nToday Date: "));
    NNT_TRY(puts0(s, s->date));
    NNT_TRY(puts0(s, "\n\n"));
    if (s->tools && s->tools_in_system)
        NNT_TRY(put_llama_tools(s, "You have access to the following functions. To call a "
                                   "function, please respond with JSON for a function call."));
    if (*skip) {
        trimmed_content(msgs, 0, &c, &e);
        NNT_TRY(put(s, c, (size_t)(e - c)));
    }
    NNT_TRY(puts0(s, "<|eot_id|>"));
    if (!s->tools || s->tools_in_system)
        return NNT_OK;
    size_t first = (size_t)*skip;
    role = first < msgs->n ? field(&msgs->items[first], "role") : NULL;
    if (!role || strcmp(role->s, "user") != 0)
        return nnt_fail(NULL, NNT_E_FORMAT, "%s: the %s template puts the tools in the first "
                        "user message, which is messages[%zu]: %s (or give "
                        "chat_template_kwargs {\"tools_in_user_message\": false})", fn,
                        template_name(s->tmpl), first,
                        role ? "it is not a user's" : "there is none");
    NNT_TRY(puts0(s, "<|start_header_id|>user<|end_header_id|>\n\n"));
    NNT_TRY(put_llama_tools(s, "Given the following functions, please respond with a JSON for a "
                               "function call with its proper arguments that best answers the "
                               "given prompt.\n\n"));
    trimmed_content(msgs, first, &c, &e);
    NNT_TRY(put(s, c, (size_t)(e - c)));
    *skip = (int)first + 1;
    return puts0(s, "<|eot_id|>");
}

/* Gemma's and Gemma 3's start: bos, and a first system message (*skip 1): Gemma 3 puts its
 * content (a list's first part: a single one) and "\n\n" (not trimmed) before the first
 * turn's (*prefix), Gemma's refuses it. */
static int gemma_start(nnt_sft *s, const jv *msgs, int *skip, const jv **prefix)
{
    const jv *role = hft_jv_get(&msgs->items[0], "role");
    *skip = strcmp(role->s, "system") == 0;
    *prefix = *skip ? hft_jv_get(&msgs->items[0], "content") : NULL;
    if (*skip && s->tmpl == NNT_CHAT_GEMMA)
        return nnt_fail(NULL, NNT_E_FORMAT, "nnt_sft_encode: messages[0] is a system message, "
                        "which the Gemma template refuses (\"System role not supported\"; "
                        "Gemma 3's puts it before the first user message)");
    if (*prefix && (*prefix)->type == JV_ARR) {
        if ((*prefix)->n != 1)
            return nnt_fail(NULL, NNT_E_FORMAT, "nnt_sft_encode: messages[0], a system "
                            "message, has %zu parts: the Gemma 3 template renders its first "
                            "alone (give one)", (*prefix)->n);
        *prefix = content_text(*prefix, 0);
    }
    return puts0(s, bos_of(s));
}

/* Gemma's and Gemma 3's turn `turn` (from 0, after a first system message), messages[i]:
 * users on the even turns and the other roles on the odd ones, as the templates require; each
 * <start_of_turn>ROLE\n, (turn 0) the prefix and "\n\n", trim(CONTENT) <end_of_turn>\n, an
 * assistant's ROLE "model" and its trimmed content and <end_of_turn>\n counted (TRL's
 * gemma_training.jinja and gemma3_training.jinja). */
static int render_gemma(nnt_sft *s, size_t i, size_t turn, const jv *role, const jv *content,
                        const jv *prefix, turns *a)
{
    int user = strcmp(role->s, "user") == 0, assistant = strcmp(role->s, "assistant") == 0;
    if (user != (turn % 2 == 0))
        return nnt_fail(NULL, NNT_E_FORMAT, "nnt_sft_encode: messages[%zu] is a \"%s\" message "
                        "where the %s template takes %s (\"Conversation roles must alternate "
                        "user/assistant/user/assistant/...\")", i, role->s,
                        template_name(s->tmpl), user ? "an assistant one" : "a user one");
    NNT_TRY(puts0(s, "<start_of_turn>"));
    NNT_TRY(assistant ? puts0(s, "model") : put(s, role->s, role->len));
    NNT_TRY(puts0(s, "\n"));
    if (prefix && turn == 0) {
        NNT_TRY(put(s, prefix->s, prefix->len));
        NNT_TRY(puts0(s, "\n\n"));
    }
    return put_trimmed(s, i, assistant, content, "<end_of_turn>\n", a);
}

static int is_phi3(nnt_chat_template t)
{
    return t == NNT_CHAT_PHI3 || t == NNT_CHAT_PHI3_5;
}

/* Phi-3's and Phi-3.5's message: <|ROLE|>\n CONTENT<|end|>\n (Phi-3.5: nothing for a system
 * message whose content is empty); an assistant's CONTENT<|end|>\n counted (TRL's
 * phi3_training.jinja and phi3_5_training.jinja). */
static int render_phi3(nnt_sft *s, const jv *role, const jv *content, turns *a)
{
    int assistant = strcmp(role->s, "assistant") == 0;
    if (s->tmpl == NNT_CHAT_PHI3_5 && strcmp(role->s, "system") == 0 && content->len == 0)
        return NNT_OK;
    NNT_TRY(puts0(s, "<|"));
    NNT_TRY(put(s, role->s, role->len));
    NNT_TRY(puts0(s, "|>\n"));
    if (assistant)
        a->at[2 * a->n] = s->text.n;
    NNT_TRY(put(s, content->s, content->len));
    NNT_TRY(puts0(s, "<|end|>\n"));
    if (assistant)
        a->at[2 * a->n++ + 1] = s->text.n;
    return NNT_OK;
}

/* Phi-3's end of a conversation: eos_token (nothing without one), counted when the last
 * message is an assistant's (its training template puts it in the last turn's span). */
static int phi3_end(nnt_sft *s, const jv *last_role, turns *a)
{
    NNT_TRY(puts0(s, s->eos ? s->eos : ""));
    if (strcmp(last_role->s, "assistant") == 0 && a->n > 0)
        a->at[2 * a->n - 1] = s->text.n;
    return NNT_OK;
}

/* text[0, n) after the last occurrence of what in it (all of it if none). */
static const char *after_last(const char *text, size_t n, const char *what, size_t *left)
{
    size_t w = strlen(what);
    const char *from = text;
    for (size_t k = 0; k + w <= n; k++)
        if (memcmp(text + k, what, w) == 0)
            from = text + k + w;
    *left = n - (size_t)(from - text);
    return from;
}

/* Qwen3 as TRL trains it (qwen3_training.jinja): every assistant turn is "<|im_start|>
 * assistant\n" then, counted, "<think>\n" REASONING "\n</think>\n\n" ANSWER "<|im_end|>\n";
 * REASONING is reasoning_content, else what content holds between its last <think> before
 * its first </think> and that </think> (newlines stripped), ANSWER what follows its last
 * </think> (leading newlines stripped), then the tool calls (put_qwen_calls). Users, and
 * system messages after the first, are ChatML. */
static int render_qwen3(nnt_sft *s, const jv *msgs, size_t i, const jv *role,
                        const jv *content, const jv *reasoning, const jv *calls, turns *a)
{
    int last = i + 1 == msgs->n;
    if (strcmp(role->s, "assistant") != 0)   /* Qwen3 has no default system message */
        return render_chatml(s, msgs, i, role, content, NULL, a);
    const char *answer = content->s, *think = "", *close;
    size_t alen = content->len, tlen = 0;
    if (reasoning) {
        think = reasoning->s, tlen = reasoning->len;
    } else if ((close = strstr(content->s, "</think>")) != NULL) {
        size_t before = (size_t)(close - content->s);
        while (before > 0 && content->s[before - 1] == '\n')   /* rstrip('\n') */
            before--;
        think = after_last(content->s, before, "<think>", &tlen);
        while (tlen > 0 && *think == '\n')   /* lstrip('\n') */
            think++, tlen--;
        answer = after_last(content->s, content->len, "</think>", &alen);
    }
    /* the published template renders the think block only after the last user message, in
     * the last message or where there is reasoning; TRL's training variant in every turn */
    int block = !s->published || (i > s->last_query && (last || tlen > 0));
    while (tlen > 0 && *think == '\n')   /* reasoning_content.strip('\n') */
        think++, tlen--;
    while (tlen > 0 && think[tlen - 1] == '\n')
        tlen--;
    NNT_TRY(puts0(s, "<|im_start|>assistant\n"));
    while (answer != content->s && alen > 0 && *answer == '\n')   /* (split: lstrip('\n')) */
        answer++, alen--;
    size_t said = alen;   /* the template's content, which decides the first call's newline */
    if (!block) {   /* the published template's answer alone */
        NNT_TRY(put(s, answer, alen));
        NNT_TRY(put_qwen_calls(s, calls, i, said > 0));
        return puts0(s, "<|im_end|>\n");
    }
    while (alen > 0 && *answer == '\n')   /* content.lstrip('\n') */
        answer++, alen--;
    a->at[2 * a->n] = s->text.n;
    NNT_TRY(puts0(s, "<think>\n"));
    NNT_TRY(put(s, think, tlen));
    NNT_TRY(puts0(s, "\n</think>\n\n"));
    NNT_TRY(put(s, answer, alen));
    NNT_TRY(put_qwen_calls(s, calls, i, said > 0));
    NNT_TRY(puts0(s, "<|im_end|>\n"));
    a->at[2 * a->n++ + 1] = s->text.n;
    return NNT_OK;
}

/* DeepSeek-R1-Distill's start: bos and the content of the last system message (the only
 * place system messages appear), as they are. */
static int r1_start(nnt_sft *s, const jv *msgs)
{
    const jv *system = NULL;
    for (size_t i = 0; i < msgs->n; i++) {
        const jv *role = hft_jv_get(&msgs->items[i], "role");
        if (strcmp(role->s, "system") == 0)
            system = hft_jv_get(&msgs->items[i], "content");
    }
    NNT_TRY(puts0(s, bos_of(s)));
    return system ? put(s, system->s, system->len) : NNT_OK;
}

/* DeepSeek-R1-Distill's message: R1_USER CONTENT for a user, R1_ASSISTANT CONTENT R1_EOS
 * counted for an assistant (TRL's deepseek_r1_distill_training.jinja keeps CONTENT whole; in a
 * prompt, the published template's, what follows its last </think>), nothing for a system
 * message (r1_start put the last one first). */
static int render_r1(nnt_sft *s, const jv *role, const jv *content, turns *a)
{
    if (strcmp(role->s, "user") == 0) {
        NNT_TRY(puts0(s, R1_USER));
        return put(s, content->s, content->len);
    }
    if (strcmp(role->s, "assistant") != 0)
        return NNT_OK;
    size_t alen = content->len, tag = s->text.n;   /* the assistant tag counts too */
    const char *answer = s->published ? after_last(content->s, alen, "</think>", &alen)
                                   : content->s;
    NNT_TRY(puts0(s, R1_ASSISTANT));
    NNT_TRY(put(s, answer, alen));
    NNT_TRY(puts0(s, R1_EOS));
    a->at[2 * a->n] = tag;
    a->at[2 * a->n++ + 1] = s->text.n;
    return NNT_OK;
}

#define GPTOSS_IDENTITY "You are ChatGPT, a large language model trained by OpenAI."

/* gpt-oss's start: the system block (the model identity, the knowledge cutoff, the date, the
 * reasoning effort: a record's chat_template_kwargs model_identity and reasoning_effort, else
 * the template's defaults; then the channels, and with tools where their calls go), then
 * the developer block: a first system or developer message's content (*skip 1) as its
 * instructions, and the tools (hft_harmony_tools), left out when it has neither. */
static int gptoss_start(nnt_sft *s, const jv *msgs, int *skip)
{
    int tools = s->tools && s->tools->n > 0;
    NNT_TRY(puts0(s, "<|start|>system<|message|>"));
    NNT_TRY(s->identity ? put(s, s->identity->s, s->identity->len)
                        : puts0(s, GPTOSS_IDENTITY));
    NNT_TRY(puts0(s, "\nKnowledge cutoff: 2024-06\nCurrent date: "));
    NNT_TRY(puts0(s, s->date));
    NNT_TRY(puts0(s, "\n\nReasoning: "));
    NNT_TRY(s->effort ? put(s, s->effort->s, s->effort->len) : puts0(s, "medium"));
    NNT_TRY(puts0(s, "\n\n"));
    if (s->builtin && hft_harmony_builtin(&s->text, s->builtin & 2, s->builtin & 4))
        return nnt_fail(NULL, NNT_E_NOMEM, "nnt_sft_encode: out of host memory");
    NNT_TRY(puts0(s, "# Valid channels: analysis, commentary, final. Channel must be "
                     "included for every message."));
    if (tools)
        NNT_TRY(puts0(s, "\nCalls to these tools must go to the commentary channel: "
                         "'functions'."));
    NNT_TRY(puts0(s, "<|end|>"));
    const jv *role = field(&msgs->items[0], "role");
    const jv *content = field(&msgs->items[0], "content");
    *skip = strcmp(role->s, "system") == 0 || strcmp(role->s, "developer") == 0;
    int instructions = *skip && content->len > 0;
    if (!instructions && !tools)
        return NNT_OK;
    NNT_TRY(puts0(s, "<|start|>developer<|message|>"));
    if (instructions) {
        NNT_TRY(puts0(s, "# Instructions\n\n"));
        NNT_TRY(put(s, content->s, content->len));
        NNT_TRY(puts0(s, "\n\n"));
    }
    if (tools) {
        NNT_TRY(puts0(s, "# Tools\n\n"));
        NNT_TRY(hft_harmony_tools(&s->text, s->tools));
    }
    return puts0(s, "<|end|>");
}

/* 1 when an assistant message without tool calls follows messages[i] (gpt-oss then drops
 * the analysis of the call at i) */
static int final_after(const jv *msgs, size_t i)
{
    for (size_t k = i + 1; k < msgs->n; k++) {
        const jv *role = field(&msgs->items[k], "role");
        if (strcmp(role->s, "assistant") == 0 && !field(&msgs->items[k], "tool_calls"))
            return 1;
    }
    return 0;
}

/* gpt-oss's tool call (one a message), all of it counted: its content or thinking, unless a
 * final answer follows, as <|start|>assistant<|channel|>analysis<|message|>...<|end|>; then
 * <|start|>assistant to=functions.NAME<|channel|>commentary TYPE<|message|>ARGUMENTS<|call|>
 * (TYPE the call's content_type, else json; the arguments as JSON). The name is kept for the
 * tool responses that follow (s->call). */
static int render_gptoss_call(nnt_sft *s, const jv *msgs, size_t i, const jv *content,
                              const jv *thinking, const jv *calls, turns *a)
{
    tool_call c;
    call_parts(&calls->items[0], i, 0, s->tmpl, &c);   /* (checked by message_parts) */
    const jv *analysis = content->len > 0 ? content
                         : thinking && thinking->len > 0 ? thinking : NULL;
    a->at[2 * a->n] = s->text.n;
    if (analysis && !final_after(msgs, i)) {
        NNT_TRY(puts0(s, "<|start|>assistant<|channel|>analysis<|message|>"));
        NNT_TRY(put(s, analysis->s, analysis->len));
        NNT_TRY(puts0(s, "<|end|>"));
    }
    NNT_TRY(puts0(s, "<|start|>assistant to=functions."));
    NNT_TRY(put(s, c.name->s, c.name->len));
    NNT_TRY(puts0(s, "<|channel|>commentary "));
    NNT_TRY(c.content_type ? put(s, c.content_type->s, c.content_type->len)
                           : puts0(s, "json"));
    NNT_TRY(puts0(s, "<|message|>"));
    NNT_TRY(put_json(s, c.arguments, -1));
    NNT_TRY(puts0(s, "<|call|>"));
    a->at[2 * a->n++ + 1] = s->text.n;
    s->call = c.name;
    return NNT_OK;
}

/* gpt-oss's tool response: <|start|>functions.NAME to=assistant<|channel|>commentary
 * <|message|>CONTENT<|end|>, NAME the last call's, the content as JSON (a string quoted) */
static int render_gptoss_tool(nnt_sft *s, size_t i, const jv *content)
{
    if (!s->call)
        return nnt_fail(NULL, NNT_E_FORMAT, "nnt_sft_encode: messages[%zu] is a tool's response "
                        "without an assistant's tool call before it (since the last answer), "
                        "which the gpt-oss template refuses", i);
    NNT_TRY(puts0(s, "<|start|>functions."));
    NNT_TRY(put(s, s->call->s, s->call->len));
    NNT_TRY(puts0(s, " to=assistant<|channel|>commentary<|message|>"));
    NNT_TRY(put_json(s, content, -1));
    return puts0(s, "<|end|>");
}

/* gpt-oss's message: a user's <|start|>user<|message|>CONTENT<|end|>; an assistant's
 * <|start|>assistant<|channel|>final<|message|>CONTENT<|end|>, or, the last message of a
 * conversation without the generation prompt, its THINKING (when it has one) as
 * <|start|>assistant<|channel|>analysis<|message|>THINKING<|end|> first and <|return|> for
 * the final answer's <|end|> (earlier turns drop their thinking); all of it counted (TRL's
 * gptoss_training.jinja); system and developer messages after the first render nothing. */
static int render_gptoss(nnt_sft *s, const jv *msgs, size_t i, const jv *role,
                         const jv *content, const jv *thinking, const jv *calls, turns *a)
{
    int last = i + 1 == msgs->n;
    if (calls)
        return render_gptoss_call(s, msgs, i, content, thinking, calls, a);
    if (is_tool_role(role->s, s->tmpl))
        return render_gptoss_tool(s, i, content);
    if (strcmp(role->s, "user") == 0) {
        NNT_TRY(puts0(s, "<|start|>user<|message|>"));
        NNT_TRY(put(s, content->s, content->len));
        return puts0(s, "<|end|>");
    }
    if (strcmp(role->s, "assistant") != 0)
        return NNT_OK;
    int closing = last && !s->prompt;   /* loop.last and not add_generation_prompt */
    a->at[2 * a->n] = s->text.n;
    if (closing && thinking) {
        NNT_TRY(puts0(s, "<|start|>assistant<|channel|>analysis<|message|>"));
        NNT_TRY(put(s, thinking->s, thinking->len));
        NNT_TRY(puts0(s, "<|end|>"));
    }
    NNT_TRY(puts0(s, "<|start|>assistant<|channel|>final<|message|>"));
    NNT_TRY(put(s, content->s, content->len));
    NNT_TRY(puts0(s, closing ? "<|return|>" : "<|end|>"));
    a->at[2 * a->n++ + 1] = s->text.n;
    s->call = NULL;   /* (a tool's response needs a call after the answer) */
    return NNT_OK;
}

/* The generation prompt the templates add after the messages (add_generation_prompt) */
static const char *generation_prompt(nnt_chat_template t)
{
    if (t == NNT_CHAT_GPT_OSS)
        return "<|start|>assistant";
    if (t == NNT_CHAT_DEEPSEEK_R1)
        return R1_ASSISTANT "<think>\n";
    if (t == NNT_CHAT_LLAMA3 || is_llama31(t))
        return "<|start_header_id|>assistant<|end_header_id|>\n\n";
    if (is_phi3(t))
        return "<|assistant|>\n";
    return is_gemma(t) ? "<start_of_turn>model\n" : "<|im_start|>assistant\n";
}

/* Qwen3's last query: the index of the last user message whose content is not a tool's
 * response (<tool_response>...</tool_response>), as its template finds it; the last message
 * when there is none. */
static size_t last_query(const jv *msgs)
{
    static const char open[] = "<tool_response>", close[] = "</tool_response>";
    for (size_t i = msgs->n; i-- > 0;) {
        const jv *role = hft_jv_get(&msgs->items[i], "role");
        const jv *c = hft_jv_get(&msgs->items[i], "content");
        if (strcmp(role->s, "user") != 0 || !c || c->type != JV_STR)
            continue;
        int tool = c->len >= sizeof open - 1 + sizeof close - 1 &&
                   memcmp(c->s, open, sizeof open - 1) == 0 &&
                   memcmp(c->s + c->len - (sizeof close - 1), close, sizeof close - 1) == 0;
        if (!tool)
            return i;
    }
    return msgs->n - 1;
}

/* "messages": the rendered text into s->text, the assistant spans counted; for a prompt
 * (s->prompt) the last message a user's, then the generation prompt, nothing counted; for
 * the whole of a conversational prompt/completion (s->published alone) the ids, nothing
 * counted (the caller counts the completion). */
static int encode_messages(nnt_sft *s, const jv *msgs)
{
    static const char fn[] = "nnt_sft_encode";
    if (s->tmpl == NNT_CHAT_NONE)
        return nnt_fail(NULL, NNT_E_INVAL, "%s: a \"messages\" record needs a chat template "
                        "(the tokenizer_config.json's, or " TEMPLATE_NAMES ")", fn);
    if (msgs->type != JV_ARR || msgs->n == 0)
        return nnt_fail(NULL, NNT_E_FORMAT, "%s: \"messages\" is not a non-empty array", fn);
    turns a;
    a.n = 0;
    const jv *role, *content, *reasoning, *calls;
    for (size_t i = 0; i < msgs->n; i++)   /* every message checked before any is rendered */
        NNT_TRY(message_parts(&msgs->items[i], i, s->tmpl, &role, &content, &reasoning,
                              &calls));
    if (s->prompt && strcmp(role->s, "user") != 0 && !is_tool_role(role->s, s->tmpl))
        return nnt_fail(NULL, NNT_E_FORMAT, "%s: a prompt's last message is a user's%s (this "
                        "one is a \"%s\" message): the model answers it", fn,
                        has_tools(s->tmpl) ? " or a tool's" : "", role->s);
    int skip = 0;
    const jv *prefix = NULL;   /* Gemma 3: the first system message's content */
    s->call = NULL;
    if (s->tmpl == NNT_CHAT_QWEN3)   /* (its renderer alone reads it) */
        s->last_query = last_query(msgs);
    if (is_chatml(s->tmpl))
        NNT_TRY(chatml_start(s, msgs, &skip));
    else if (is_llama31(s->tmpl))
        NNT_TRY(render_llama31_system(s, msgs, &skip));
    else if (s->tmpl == NNT_CHAT_LLAMA3)
        NNT_TRY(puts0(s, bos_of(s)));
    else if (is_gemma(s->tmpl))
        NNT_TRY(gemma_start(s, msgs, &skip, &prefix));
    else if (s->tmpl == NNT_CHAT_DEEPSEEK_R1)
        NNT_TRY(r1_start(s, msgs));
    else if (s->tmpl == NNT_CHAT_GPT_OSS)
        NNT_TRY(gptoss_start(s, msgs, &skip));
    for (size_t i = (size_t)skip; i < msgs->n; i++) {
        message_parts(&msgs->items[i], i, s->tmpl, &role, &content, &reasoning, &calls);
        if (strcmp(role->s, "assistant") == 0)
            NNT_TRY(turn_begin(&a));
        if (is_gemma(s->tmpl))
            NNT_TRY(render_gemma(s, i, i - (size_t)skip, role, content, prefix, &a));
        else if (s->tmpl == NNT_CHAT_LLAMA3 || is_llama31(s->tmpl))
            NNT_TRY(render_llama3(s, i, role, content, calls, &a));
        else if (s->tmpl == NNT_CHAT_QWEN3)
            NNT_TRY(render_qwen3(s, msgs, i, role, content, reasoning, calls, &a));
        else if (is_phi3(s->tmpl))
            NNT_TRY(render_phi3(s, role, content, &a));
        else if (s->tmpl == NNT_CHAT_DEEPSEEK_R1)
            NNT_TRY(render_r1(s, role, content, &a));
        else if (s->tmpl == NNT_CHAT_GPT_OSS)
            NNT_TRY(render_gptoss(s, msgs, i, role, content, reasoning, calls, &a));
        else
            NNT_TRY(render_chatml(s, msgs, i, role, content, calls, &a));
    }
    if (is_phi3(s->tmpl) && !s->prompt)
        NNT_TRY(phi3_end(s, role, &a));
    if (s->prompt) {
        NNT_TRY(puts0(s, generation_prompt(s->tmpl)));
        if (s->no_thinking)   /* Qwen3's enable_thinking=False */
            NNT_TRY(puts0(s, "<think>\n\n</think>\n\n"));
        return encode_record(s, s->text.p, s->text.n, 0);
    }
    if (s->published)
        return encode_record(s, s->text.p, s->text.n, 0);
    if (a.n == 0)
        return nnt_fail(NULL, NNT_E_FORMAT, "%s: no assistant message: nothing to learn", fn);
    NNT_TRY(encode_record(s, s->text.p, s->text.n, 0));
    for (size_t k = 0; k < a.n; k++)
        NNT_TRY(count_span(s, s->text.p, a.at[2 * k], a.at[2 * k + 1]));
    return NNT_OK;
}

/* {"prompt": [messages], "completion": [messages]} as TRL's SFTTrainer takes a conversational
 * prompt/completion by default (completion_only_loss, the tokenizer's own template): the
 * prompt rendered with the generation prompt (as nnt_sft_encode_prompt), then the prompt and
 * the completion as one conversation without it; the tokens from where the two first differ
 * count. Both rendered as the published template renders them; with assistant_only (TRL's
 * assistant_only_loss) both as the training template renders them, and of the completion
 * the assistant turns' tokens alone count. */
static int encode_conversation_pc(nnt_sft *s, const jv *prompt, const jv *completion)
{
    static const char fn[] = "nnt_sft_encode";
    if (prompt->n == 0 || completion->n == 0)
        return nnt_fail(NULL, NNT_E_FORMAT, "%s: %s: nothing to learn", fn, prompt->n == 0
                        ? "an empty list of prompt messages" : "an empty completion");
    s->prompt = 1, s->published = !s->assistant_only;
    int rc = encode_messages(s, prompt);
    s->prompt = 0;
    size_t np = s->n;
    int32_t *ids = rc == 0 ? malloc((np ? np : 1) * sizeof *ids) : NULL;
    jv all = *prompt;
    all.items = ids ? malloc((prompt->n + completion->n) * sizeof *all.items) : NULL;
    if (rc == 0 && !all.items)
        rc = nnt_fail(NULL, NNT_E_NOMEM, "%s: out of host memory", fn);
    if (rc == 0) {   /* the two lists as one (the messages themselves shared) */
        memcpy(ids, s->ids, np * sizeof *ids);
        memcpy(all.items, prompt->items, prompt->n * sizeof *all.items);
        memcpy(all.items + prompt->n, completion->items, completion->n * sizeof *all.items);
        all.n = prompt->n + completion->n;
        s->text.n = 0;
        rc = encode_messages(s, &all);
    }
    if (rc == 0) {   /* the completion: from where the prompt's ids and these differ */
        size_t same = common_prefix(ids, np, s->ids, s->n);
        if (s->assistant_only)   /* (its assistant turns counted by encode_messages) */
            memset(s->counts, 0, same);
        else
            memset(s->counts + same, 1, s->n - same);
    }
    s->published = 0;
    free(all.items);
    free(ids);
    return rc;
}

/* chat_template_kwargs.builtin_tools: gpt-oss's "browser" and "python" (a list; another
 * name the template ignores, as it does), described in its system block; Llama 3.1's refused
 * (its calls of them are not implemented); the other templates ignore it. */
static int record_builtin(nnt_sft *s, const jv *v)
{
    static const char fn[] = "nnt_sft_encode";
    if (v->type != JV_ARR && v->type != JV_NULL)
        return nnt_fail(NULL, NNT_E_FORMAT, "%s: chat_template_kwargs.builtin_tools is not a "
                        "list", fn);
    if (s->tmpl == NNT_CHAT_LLAMA3_1 && v->type == JV_ARR)
        return nnt_fail(NULL, NNT_E_FORMAT, "%s: chat_template_kwargs.builtin_tools: Llama "
                        "3.1's built-in tools (brave_search, wolfram_alpha, code_interpreter) "
                        "are not implemented: give them as \"tools\"", fn);
    s->builtin = v->type == JV_ARR && v->n > 0;
    for (size_t k = 0; s->builtin && k < v->n; k++) {
        const jv *t = &v->items[k];
        if (t->type == JV_STR && strcmp(t->s, "browser") == 0)
            s->builtin |= 2;
        else if (t->type == JV_STR && strcmp(t->s, "python") == 0)
            s->builtin |= 4;
    }
    return NNT_OK;
}

/* A record's chat_template_kwargs (TRL passes them to apply_chat_template): those the
 * templates nnt renders read, enable_thinking (Qwen3's; a bool), date_string (Llama 3.1
 * and 3.2's; a string as the date option), reasoning_effort and model_identity (gpt-oss's;
 * strings), tools_in_user_message (Llama 3.1 and 3.2's; a bool), set in s for this record
 * (the other templates ignore them, as theirs do);
 * builtin_tools (record_builtin), another key refused, to catch a
 * misnamed one. */
static int record_kwargs(nnt_sft *s, const jv *kw)
{
    static const char fn[] = "nnt_sft_encode";
    if (kw->type != JV_OBJ)
        return nnt_fail(NULL, NNT_E_FORMAT, "%s: \"chat_template_kwargs\" is not an object", fn);
    for (size_t k = 0; k < kw->n; k++) {
        const jv *v = &kw->items[k];
        if (strcmp(kw->keys[k], "enable_thinking") == 0) {
            if (v->type != JV_BOOL)
                return nnt_fail(NULL, NNT_E_FORMAT, "%s: chat_template_kwargs.enable_thinking "
                                "is not true or false", fn);
            s->no_thinking = s->tmpl == NNT_CHAT_QWEN3 && !v->b;
        } else if (strcmp(kw->keys[k], "date_string") == 0) {
            if (v->type != JV_STR || v->len == 0 || v->len >= sizeof s->date ||
                memchr(v->s, '\n', v->len))
                return nnt_fail(NULL, NNT_E_FORMAT, "%s: chat_template_kwargs.date_string is "
                                "not one line of 1 to 31 bytes (\"26 Jul 2024\")", fn);
            if (s->tmpl != NNT_CHAT_GPT_OSS)   /* (gpt-oss's date is strftime_now's) */
                memcpy(s->date, v->s, v->len + 1);
        } else if (strcmp(kw->keys[k], "reasoning_effort") == 0 ||
                   strcmp(kw->keys[k], "model_identity") == 0) {
            if (v->type != JV_STR)
                return nnt_fail(NULL, NNT_E_FORMAT, "%s: chat_template_kwargs.%s is not a "
                                "string", fn, kw->keys[k]);
            *(kw->keys[k][0] == 'r' ? &s->effort : &s->identity) = v;
        } else if (strcmp(kw->keys[k], "tools_in_user_message") == 0) {
            if (v->type != JV_BOOL)
                return nnt_fail(NULL, NNT_E_FORMAT, "%s: chat_template_kwargs."
                                "tools_in_user_message is not true or false", fn);
            s->tools_in_system = !v->b;
        } else if (strcmp(kw->keys[k], "builtin_tools") == 0) {
            NNT_TRY(record_builtin(s, v));
        } else {
            return nnt_fail(NULL, NNT_E_FORMAT, "%s: chat_template_kwargs.%s is read by none "
                            "of the templates nnt renders (enable_thinking, date_string, "
                            "reasoning_effort, model_identity, tools_in_user_message)", fn,
                            kw->keys[k]);
        }
    }
    return NNT_OK;
}

/* A record's "tools" (TRL passes them to apply_chat_template): a list of JSON objects (the
 * functions' schemas), or a string of that list's JSON (TRL json.loads it); null: none. A
 * template without tools refuses a non-empty list. s->tools set for this record. */
static int record_tools(nnt_sft *s, const jv *tools)
{
    static const char fn[] = "nnt_sft_encode";
    if (tools->type == JV_NULL)
        return NNT_OK;
    if (tools->type == JV_STR) {
        char err[NNT_IO_ERRLEN];
        nnt_json j;
        nnt_json_init(&j, tools->s, tools->len, 0, "\"tools\" (a string of JSON)", err,
                      sizeof err);
        int rc = hft_jv_parse(&j, &s->tools_tree, 0, "in the record's tools");
        if (rc == 0)
            rc = nnt_json_end(&j);
        if (rc)
            return nnt_fail(NULL, rc, "%s: %s", fn, err);
        tools = &s->tools_tree;
    }
    if (tools->type != JV_ARR)
        return nnt_fail(NULL, NNT_E_FORMAT, "%s: \"tools\" is not a list of the functions' JSON "
                        "schemas (or a string of it)", fn);
    for (size_t k = 0; k < tools->n; k++)
        if (tools->items[k].type != JV_OBJ)
            return nnt_fail(NULL, NNT_E_FORMAT, "%s: tools[%zu] is not a JSON object (a "
                            "function's schema, {\"type\": \"function\", \"function\": "
                            "{...}})", fn, k);
    if (tools->n > 0 && !has_tools(s->tmpl))
        return nnt_fail(NULL, NNT_E_FORMAT, "%s: \"tools\": the %s template renders no tools "
                        "(nnt renders them with the " TOOL_TEMPLATES " templates)", fn,
                        s->tmpl == NNT_CHAT_NONE ? "(no)" : template_name(s->tmpl));
    s->tools = tools;
    return NNT_OK;
}

/* The record's kind from its keys; other keys are refused, to catch a misnamed one. */
static int encode_value(nnt_sft *s, const jv *root)
{
    static const char fn[] = "nnt_sft_encode";
    if (root->type != JV_OBJ)
        return nnt_fail(NULL, NNT_E_FORMAT, "%s: the record is not a JSON object", fn);
    const jv *text = hft_jv_get(root, "text"), *prompt = hft_jv_get(root, "prompt"),
             *completion = hft_jv_get(root, "completion"),
             *messages = hft_jv_get(root, "messages"),
             *conversations = hft_jv_get(root, "conversations");
    int kinds = (text != NULL) + (prompt || completion) + (messages != NULL) +
                (conversations != NULL);
    if (kinds != 1)
        return nnt_fail(NULL, NNT_E_FORMAT, "%s: a record has one of \"text\", \"prompt\" with "
                        "\"completion\", \"messages\" or \"conversations\" (this one has %s)",
                        fn, kinds ? "several" : "none");
    for (size_t i = 0; i < root->n; i++)
        if (strcmp(root->keys[i], "text") && strcmp(root->keys[i], "prompt") &&
            strcmp(root->keys[i], "completion") && strcmp(root->keys[i], "messages") &&
            strcmp(root->keys[i], "conversations") &&
            strcmp(root->keys[i], "chat_template_kwargs") && strcmp(root->keys[i], "tools"))
            return nnt_fail(NULL, NNT_E_FORMAT, "%s: unknown key \"%s\" (text, prompt, "
                            "completion, messages, conversations, chat_template_kwargs, tools)",
                            fn, root->keys[i]);
    const jv *kwargs = hft_jv_get(root, "chat_template_kwargs"), *tools = hft_jv_get(root, "tools");
    if (kwargs)
        NNT_TRY(record_kwargs(s, kwargs));
    if (tools)
        NNT_TRY(record_tools(s, tools));
    if (s->tools && s->tools->n > 0 && !messages && !conversations &&
        !(prompt && prompt->type == JV_ARR))
        return nnt_fail(NULL, NNT_E_FORMAT, "%s: \"tools\" in a record of text: the tools go "
                        "with conversations (\"messages\", or prompt and completion as lists "
                        "of messages)", fn);
    if (messages || conversations)
        return encode_messages(s, messages ? messages : conversations);
    if (text) {
        if (text->type != JV_STR)
            return nnt_fail(NULL, NNT_E_FORMAT, "%s: \"text\" is not a string", fn);
        NNT_TRY(put_with_eos(s, text));
        NNT_TRY(encode_record(s, s->text.p, s->text.n, 1));
        memset(s->counts, 1, s->n);
        return NNT_OK;
    }
    if (!prompt || !completion)
        return nnt_fail(NULL, NNT_E_FORMAT, "%s: \"%s\" without \"%s\"", fn,
                        prompt ? "prompt" : "completion", prompt ? "completion" : "prompt");
    if (prompt->type == JV_ARR && completion->type == JV_ARR)
        return encode_conversation_pc(s, prompt, completion);
    if (prompt->type != JV_STR || completion->type != JV_STR)
        return nnt_fail(NULL, NNT_E_FORMAT, "%s: \"prompt\" and \"completion\" must be both "
                        "strings or both lists of messages", fn);
    if (completion->len == 0)
        return nnt_fail(NULL, NNT_E_FORMAT, "%s: empty completion: nothing to learn", fn);
    /* the prompt's ids alone, with the affixes (TRL tokenizes both with them) */
    size_t np;
    NNT_TRY(encode(s, prompt->s, prompt->len, &s->b, &s->bcap, &np));
    NNT_TRY(put(s, prompt->s, prompt->len));
    NNT_TRY(put_with_eos(s, completion));
    NNT_TRY(encode_record(s, s->text.p, s->text.n, 1));
    size_t k = common_prefix(s->pre, s->npre, s->ids, s->n);
    if (k == s->npre)
        k += common_prefix(s->b, np, s->ids + k, s->n - k);
    if (k == s->npre + np)   /* the prompt's post affix too, as far as it agrees */
        k += common_prefix(s->post, s->npost, s->ids + k, s->n - k);
    memset(s->counts + k, 1, s->n - k);
    return NNT_OK;
}

/* ShareGPT's messages {"from": R, "value": C} as {"role": R, "content": C}, as TRL's
 * maybe_convert_to_chatml renames them in the lists of prompt, completion, messages and
 * conversations (the roles as they are: "human" and "gpt" are not renamed). A message with
 * both names of one key is refused. */
static int rename_from_value(jv *list, const char *name)
{
    static const char *const OLD[2] = {"from", "value"}, *const NEW[2] = {"role", "content"};
    for (size_t i = 0; list && list->type == JV_ARR && i < list->n; i++) {
        jv *m = &list->items[i];
        for (size_t k = 0; m->type == JV_OBJ && k < m->n; k++)
            for (int w = 0; w < 2; w++) {
                if (strcmp(m->keys[k], OLD[w]) != 0)
                    continue;
                if (hft_jv_get(m, NEW[w]))
                    return nnt_fail(NULL, NNT_E_FORMAT, "nnt_sft_encode: %s[%zu] has both "
                                    "\"%s\" and \"%s\"", name, i, OLD[w], NEW[w]);
                char *key = strdup(NEW[w]);
                if (!key)
                    return nnt_fail(NULL, NNT_E_NOMEM, "nnt_sft_encode: out of host memory");
                free(m->keys[k]);
                m->keys[k] = key;
            }
    }
    return NNT_OK;
}

static int preference_view(const char *fn, const jv *root, int which, jv *view, jv parts[4],
                           char *keys[4]);
static int unpaired_view(const char *fn, const jv *root, jv *view, jv parts[4], char *keys[4],
                         int *label);

/* A prompt-only record {"prompt": P, ...} (TRL's form; its other members, a dataset's other
 * columns, ignored) for generation: P a list of messages rendered as a "messages" prompt is,
 * with the record's chat_template_kwargs and tools; P a string: the ids a training row of
 * {"prompt": P, "completion": C} begins with (the tokenizer's special tokens before the text,
 * e.g. a bos, then the text's ids). */
static int encode_prompt_only(nnt_sft *s, const jv *root, const jv *p)
{
    static const char fn[] = "nnt_sft_encode_prompt";
    if (hft_jv_get(root, "messages") || hft_jv_get(root, "conversations"))
        return nnt_fail(NULL, NNT_E_FORMAT, "%s: a prompt record has \"prompt\" or "
                        "\"messages\", not both", fn);
    const jv *kwargs = hft_jv_get(root, "chat_template_kwargs"), *tools = hft_jv_get(root, "tools");
    if (p->type == JV_STR) {
        if (tools && tools->type == JV_ARR && tools->n > 0)
            return nnt_fail(NULL, NNT_E_FORMAT, "%s: \"tools\" with a prompt of text: the "
                            "tools go with a prompt of messages", fn);
        NNT_TRY(encode_record(s, p->s, p->len, 1));
        s->n -= s->npost;   /* (the text is continued: no affix after it) */
        if (s->n == 0)
            return nnt_fail(NULL, NNT_E_FORMAT, "%s: the prompt encodes to no token", fn);
        return NNT_OK;
    }
    if (p->type != JV_ARR)
        return nnt_fail(NULL, NNT_E_FORMAT, "%s: \"prompt\" is a string or a list of "
                        "messages", fn);
    if (kwargs)
        NNT_TRY(record_kwargs(s, kwargs));
    if (tools)
        NNT_TRY(record_tools(s, tools));
    return encode_messages(s, p);
}

/* One JSON value of len bytes (a record) into *root, the caller's to free; malformed or
 * followed by more: NNT_E_FORMAT naming fn, nothing to free. */
static int parse_record(const char *fn, const char *record, size_t len, jv *root)
{
    char err[NNT_IO_ERRLEN];
    nnt_json j;
    nnt_json_init(&j, record ? record : "", len, 0, "the record", err, sizeof err);
    int rc = hft_jv_parse(&j, root, 0, "in the record");
    if (rc == 0 && (rc = nnt_json_end(&j)) != 0)
        hft_jv_free(root);
    return rc ? nnt_fail(NULL, rc, "%s: %s", fn, err) : NNT_OK;
}

/* nnt_sft_encode, or (prompt) nnt_sft_encode_prompt's rendering, or (pref 0 or 1) the chosen
 * or rejected sequence of a preference record, or (pref 2) an unpaired record's sequence, its
 * label into s->label; by: the public function reading a record's view (its name in the
 * messages about it) */
static int encode_json(nnt_sft *s, const char *by, const char *record, size_t len, int prompt,
                       int pref)
{
    static const char fn[] = "nnt_sft_encode";
    jv root;
    NNT_TRY(parse_record(fn, record, len, &root));
    int rc = NNT_OK;
    static const char *const LISTS[] = {"prompt", "completion", "messages", "conversations",
                                        "chosen", "rejected"};
    for (int k = 0; rc == 0 && k < 6; k++)
        rc = rename_from_value(root.type == JV_OBJ ? (jv *)hft_jv_get(&root, LISTS[k]) : NULL,
                               LISTS[k]);
    if (rc == 0 && root.type == JV_ARR)
        rc = rename_from_value(&root, "messages");
    if (rc) {
        hft_jv_free(&root);
        return rc;
    }
    s->prompt = prompt;
    s->published = prompt || s->all_tokens;   /* TRL without assistant_only_loss: as published */
    s->text.n = 0;
    const jv *messages = root.type == JV_ARR ? &root : hft_jv_get(&root, "messages");
    if (!messages && root.type == JV_OBJ)
        messages = hft_jv_get(&root, "conversations");
    const jv *tools = root.type == JV_OBJ ? hft_jv_get(&root, "tools") : NULL;
    jv view, parts[4];   /* a preference record's side: {"prompt": P, "completion": C, ...} */
    char *keys[4];
    if (pref == 2)
        rc = unpaired_view(by, &root, &view, parts, keys, &s->label);
    else if (pref >= 0)
        rc = preference_view(by, &root, pref, &view, parts, keys);
    const jv *prompt_only = prompt && root.type == JV_OBJ ? hft_jv_get(&root, "prompt") : NULL;
    if (rc == 0 && (!prompt || prompt_only)) {   /* a record's chat_template_kwargs hold for
                                                    it alone */
        int no_thinking = s->no_thinking;
        char date[sizeof s->date];
        memcpy(date, s->date, sizeof date);
        rc = prompt ? encode_prompt_only(s, &root, prompt_only)
                    : encode_value(s, pref >= 0 ? &view : &root);
        if (rc == 0 && s->all_tokens && !prompt)
            memset(s->counts, 1, s->n);
        s->no_thinking = no_thinking;
        memcpy(s->date, date, sizeof date);
    }
    else if (rc == 0 && (!messages || (root.type == JV_OBJ && root.n != 1 + (tools != NULL))))
        rc = nnt_fail(NULL, NNT_E_FORMAT, "%s: a prompt is a record {\"messages\": [...]} (or "
                      "\"conversations\"; and \"tools\"; no other key), or the list of "
                      "messages alone, or {\"prompt\": text or messages, ...}", fn);
    else if (rc == 0 && (!tools || (rc = record_tools(s, tools)) == 0))
        rc = encode_messages(s, messages);
    /* what held for this record alone: options back, the record's tree's values gone */
    s->prompt = 0;
    s->published = 0;
    s->effort = s->identity = s->tools = NULL;
    s->builtin = s->tools_in_system = 0;
    hft_jv_free(&s->tools_tree);
    hft_jv_free(&root);
    return rc;
}

NNT_API int nnt_sft_encode_prompt(nnt_sft *s, const char *record, size_t len,
                                  const int32_t **ids, size_t *n)
{
    if (!s || (!record && len) || !ids || !n)
        return nnt_fail(NULL, NNT_E_INVAL, "nnt_sft_encode_prompt: a NULL argument");
    *ids = NULL, *n = 0;
    NNT_TRY(encode_json(s, "nnt_sft_encode_prompt", record, len, 1, -1));
    *ids = s->ids, *n = s->n;
    return NNT_OK;
}

NNT_API int nnt_sft_encode(nnt_sft *s, const char *record, size_t len, const int32_t **ids,
                           const uint8_t **counts, size_t *n)
{
    static const char fn[] = "nnt_sft_encode";
    if (!s || (!record && len) || !ids || !counts || !n)
        return nnt_fail(NULL, NNT_E_INVAL, "%s: a NULL argument", fn);
    *ids = NULL, *counts = NULL, *n = 0;
    NNT_TRY(encode_json(s, fn, record, len, 0, -1));
    *ids = s->ids, *counts = s->counts, *n = s->n;
    return NNT_OK;
}

/* ---- preference records (TRL's DPO forms) ------------------------------------------------- */

/* Python's == on JSON values: objects equal with their keys in any order. */
static int jv_equal(const jv *a, const jv *b)
{
    if (a->type != b->type)
        return 0;
    switch (a->type) {
    case JV_NULL:
        return 1;
    case JV_BOOL:
        return a->b == b->b;
    case JV_NUM:   /* the raw text: 1 and 1.0 differ here, as int and float do not in Python */
    case JV_STR:
        return a->len == b->len && memcmp(a->s, b->s, a->len) == 0;
    case JV_ARR:
        if (a->n != b->n)
            return 0;
        for (size_t i = 0; i < a->n; i++)
            if (!jv_equal(&a->items[i], &b->items[i]))
                return 0;
        return 1;
    default:
        if (a->n != b->n)
            return 0;
        for (size_t i = 0; i < a->n; i++) {
            const jv *other = hft_jv_get(b, a->keys[i]);
            if (!other || !jv_equal(&a->items[i], other))
                return 0;
        }
        return 1;
    }
}

/* TRL's extract_prompt on chosen and rejected (both strings or both lists): the index where
 * they first differ (a string's: at a character's first byte, one back when the character
 * before is a space); when one is the other's beginning, the last index of the shorter, as
 * the loop TRL runs leaves it. */
static size_t shared_prefix(const jv *c, const jv *r)
{
    size_t n = c->type == JV_STR ? (c->len < r->len ? c->len : r->len) : (c->n < r->n ? c->n : r->n);
    for (size_t i = 0; i < n; i++) {
        if (c->type == JV_STR ? c->s[i] == r->s[i] : jv_equal(&c->items[i], &r->items[i]))
            continue;
        while (c->type == JV_STR && i > 0 && ((unsigned char)c->s[i] & 0xC0) == 0x80)
            i--;   /* (a UTF-8 continuation byte: back to its character's first byte) */
        if (c->type == JV_STR && i > 0 && c->s[i - 1] == ' ')
            i--;
        return i;
    }
    return n - 1;
}

/* parts[k]: a slice [from, from + n) of v (a string's bytes, a list's items), borrowed. */
static void slice(const jv *v, size_t from, size_t n, jv *part)
{
    *part = *v;
    if (v->type == JV_STR)
        part->s = v->s + from, part->len = n;
    else
        part->items = v->items + from, part->n = n;
}

/* The record's side which (0 chosen, 1 rejected) as a prompt/completion record in *view,
 * whose items are parts and keys keys (the items borrowed from root: nothing to free). */
static int preference_view(const char *fn, const jv *root, int which, jv *view, jv parts[4],
                           char *keys[4])
{
    static const char *const KEYS[4] = {"prompt", "completion", "chat_template_kwargs", "tools"};
    if (root->type != JV_OBJ)
        return nnt_fail(NULL, NNT_E_FORMAT, "%s: the record is not a JSON object", fn);
    for (size_t i = 0; i < root->n; i++)
        if (strcmp(root->keys[i], "prompt") && strcmp(root->keys[i], "chosen") &&
            strcmp(root->keys[i], "rejected") && strcmp(root->keys[i], "chat_template_kwargs") &&
            strcmp(root->keys[i], "tools"))
            return nnt_fail(NULL, NNT_E_FORMAT, "%s: unknown key \"%s\" (prompt, chosen, "
                            "rejected, chat_template_kwargs, tools)", fn, root->keys[i]);
    const jv *prompt = hft_jv_get(root, "prompt"), *chosen = hft_jv_get(root, "chosen"),
             *rejected = hft_jv_get(root, "rejected");
    if (!chosen || !rejected)
        return nnt_fail(NULL, NNT_E_FORMAT, "%s: a preference record has \"chosen\" and "
                        "\"rejected\" (and \"prompt\", or a prompt they share)", fn);
    int text = chosen->type == JV_STR;
    if ((!text && chosen->type != JV_ARR) || rejected->type != chosen->type)
        return nnt_fail(NULL, NNT_E_FORMAT, "%s: \"chosen\" and \"rejected\" must be both "
                        "strings or both lists of messages", fn);
    const jv *side = which ? rejected : chosen;
    if (prompt) {
        parts[0] = *prompt, parts[1] = *side;
    } else {   /* the prompt they share (TRL's extract_prompt) */
        size_t nc = text ? chosen->len : chosen->n, nr = text ? rejected->len : rejected->n;
        if (nc == 0 || nr == 0)
            return nnt_fail(NULL, NNT_E_FORMAT, "%s: an empty \"%s\" without a \"prompt\"",
                            fn, nc == 0 ? "chosen" : "rejected");
        size_t k = shared_prefix(chosen, rejected);
        slice(chosen, 0, k, &parts[0]);
        slice(side, k, (text ? side->len : side->n) - k, &parts[1]);
    }
    size_t n = 2;
    keys[0] = (char *)KEYS[0], keys[1] = (char *)KEYS[1];   /* (never written through) */
    for (int k = 2; k < 4; k++) {
        const jv *v = hft_jv_get(root, KEYS[k]);
        if (v)
            parts[n] = *v, keys[n] = (char *)KEYS[k], n++;
    }
    memset(view, 0, sizeof *view);
    view->type = JV_OBJ, view->n = n, view->keys = keys, view->items = parts;
    return NNT_OK;
}

/* The first counted position of n counts (n when none). */
static size_t first_counted(const uint8_t *counts, size_t n)
{
    size_t k = 0;
    while (k < n && !counts[k])
        k++;
    return k;
}

/* A preference record's two sides (fn: the public function reading it): the chosen sequence
 * into s->pair_ids / pair_counts (npair), the rejected one into s->ids / counts. */
static int encode_sides(nnt_sft *s, const char *fn, const char *record, size_t len)
{
    NNT_TRY(encode_json(s, fn, record, len, 0, 0));
    if (s->n > s->pair_cap) {
        int32_t *pi = realloc(s->pair_ids, s->n * sizeof *pi);
        if (pi)
            s->pair_ids = pi;
        uint8_t *pc = pi ? realloc(s->pair_counts, s->n) : NULL;
        if (!pc)
            return nnt_fail(NULL, NNT_E_NOMEM, "%s: out of host memory", fn);
        s->pair_counts = pc, s->pair_cap = s->n;
    }
    memcpy(s->pair_ids, s->ids, s->n * sizeof *s->ids);
    memcpy(s->pair_counts, s->counts, s->n);
    s->npair = s->n;
    return encode_json(s, fn, record, len, 0, 1);
}

NNT_API int nnt_sft_encode_preference(nnt_sft *s, const char *record, size_t len,
                                      const int32_t *ids[2], const uint8_t *counts[2],
                                      size_t n[2])
{
    static const char fn[] = "nnt_sft_encode_preference";
    if (!s || (!record && len) || !ids || !counts || !n)
        return nnt_fail(NULL, NNT_E_INVAL, "%s: a NULL argument", fn);
    ids[0] = ids[1] = NULL, counts[0] = counts[1] = NULL, n[0] = n[1] = 0;
    NNT_TRY(encode_sides(s, fn, record, len));
    /* TRL's completions both start where the shorter shared prefix of the prompt ends */
    size_t k0 = first_counted(s->pair_counts, s->npair), k1 = first_counted(s->counts, s->n);
    size_t k = k0 < k1 ? k0 : k1;
    if (k0 < s->npair)
        memset(s->pair_counts + k, 1, k0 - k);
    if (k1 < s->n)
        memset(s->counts + k, 1, k1 - k);
    ids[0] = s->pair_ids, counts[0] = s->pair_counts, n[0] = s->npair;
    ids[1] = s->ids, counts[1] = s->counts, n[1] = s->n;
    return NNT_OK;
}

/* ---- classification records ----------------------------------------------------------------- */

NNT_API int nnt_sft_set_label_names(nnt_sft *s, const char *const *names, int64_t n)
{
    static const char fn[] = "nnt_sft_set_label_names";
    if (!s || !names != !n || n < 0)
        return nnt_fail(NULL, NNT_E_INVAL, "%s: s %p, names %p, n %lld (NULL and 0: none)", fn,
                        (void *)s, (const void *)names, (long long)n);
    char **copy = NULL;
    NNT_TRY(nnt_label_names_copy(NULL, fn, names, n, &copy));
    nnt_label_names_free(s->label_names, s->nlabel_names);
    s->label_names = copy, s->nlabel_names = n;
    return NNT_OK;
}

/* A label given by its name (s's label names): its index, else -1 */
static int64_t label_by_name(const nnt_sft *s, const jv *v)
{
    for (int64_t k = 0; v->type == JV_STR && k < s->nlabel_names; k++)
        if (strlen(s->label_names[k]) == v->len && memcmp(s->label_names[k], v->s, v->len) == 0)
            return k;
    return -1;
}

/* A JSON number that is an integer in [0, 2^31 - 1) written as one (digits only) into *out. */
static int label_value(const jv *v, int64_t *out)
{
    if (v->type != JV_NUM || v->len == 0 || v->len > 10)
        return -1;
    int64_t k = 0;
    for (size_t i = 0; i < v->len; i++) {
        unsigned digit = (unsigned)(unsigned char)v->s[i] - (unsigned)'0';
        if (digit > 9)
            return -1;
        k = k * 10 + digit;
    }
    if (k > INT32_MAX - 1)
        return -1;
    *out = k;
    return 0;
}

/* The members of a classification record root (an object of "text" and "label" only, its
 * text a string): *text and *label (NULL: absent); form names the record's form in the
 * messages. 0, else a failure naming fn. */
static int record_members(const char *fn, const jv *root, const char *form, const jv **text,
                          const jv **label)
{
    *text = root->type == JV_OBJ ? hft_jv_get(root, "text") : NULL;
    *label = root->type == JV_OBJ ? hft_jv_get(root, "label") : NULL;
    if (root->type != JV_OBJ)
        return nnt_fail(NULL, NNT_E_FORMAT, "%s: the record is not a JSON object", fn);
    for (size_t i = 0; i < root->n; i++)
        if (strcmp(root->keys[i], "text") && strcmp(root->keys[i], "label"))
            return nnt_fail(NULL, NNT_E_FORMAT, "%s: unknown key \"%s\" (a %s is {\"text\": "
                            "T, \"label\": %s})", fn, root->keys[i], form,
                            strstr(form, "values") ? "V" : "K");
    if (!*text || (*text)->type != JV_STR)
        return nnt_fail(NULL, NNT_E_FORMAT, "%s: %s (a %s is {\"text\": T, \"label\": %s})",
                        fn, *text ? "\"text\" is not a string" : "no \"text\"", form,
                        strstr(form, "values") ? "V" : "K");
    return NNT_OK;
}

/* A classification record's text encoded as tokenizer(text) encodes it (at least a token) */
static int record_text_ids(nnt_sft *s, const char *fn, const jv *text)
{
    NNT_TRY(encode_record(s, text->s, text->len, 1));
    if (s->n == 0)
        return nnt_fail(NULL, NNT_E_FORMAT, "%s: an empty text (no token to classify)", fn);
    return NNT_OK;
}

/* A JSON number (its raw text) as a finite float into *out: 0, else -1 */
static int number_value(const jv *v, float *out)
{
    char buf[64];
    if (v->type != JV_NUM || v->len == 0 || v->len >= sizeof buf)
        return -1;
    memcpy(buf, v->s, v->len);
    buf[v->len] = '\0';
    char *end = NULL;
    double d = strtod(buf, &end);
    if (*end || !isfinite(d) || !isfinite((float)d))
        return -1;
    *out = (float)d;
    return 0;
}

/* The k values of a valued record's label (a number when k is 1, else a list of k numbers;
 * multi-label: each in [0, 1]) into values; 0, else a failure naming fn. */
static int record_values(const char *fn, const jv *label, int64_t k, int multi, float *values)
{
    const char *want = k == 1 ? "a number (or a list of one)"
                              : "a list of as many numbers as the labels";
    if (!label)
        return nnt_fail(NULL, NNT_E_FORMAT, "%s: no \"label\" (a record of a classifier trained "
                        "on values is {\"text\": T, \"label\": V}, V %s)", fn, want);
    int list = label->type == JV_ARR;
    if ((list && (int64_t)label->n != k) || (!list && k != 1))
        return nnt_fail(NULL, NNT_E_FORMAT, "%s: the label is %s%lld value%s, not %s (%lld)",
                        fn, list ? "a list of " : "", list ? (long long)label->n : 1LL,
                        !list || label->n == 1 ? "" : "s", want, (long long)k);
    for (int64_t i = 0; i < k; i++) {
        const jv *v = list ? &label->items[i] : label;
        if (number_value(v, &values[i]))
            return nnt_fail(NULL, NNT_E_FORMAT, "%s: value %lld of the label is not a finite "
                            "number", fn, (long long)i);
        if (multi && !(values[i] >= 0.0f && values[i] <= 1.0f))
            return nnt_fail(NULL, NNT_E_FORMAT, "%s: value %lld of the label is %g: a multi-"
                            "label classifier's values are in [0, 1] (1: the text has the "
                            "label)", fn, (long long)i, (double)values[i]);
    }
    return NNT_OK;
}

NNT_API int nnt_sft_encode_valued(nnt_sft *s, const char *record, size_t len, int problem,
                                  int64_t k, const int32_t **ids, size_t *n, float *values)
{
    static const char fn[] = "nnt_sft_encode_valued";
    if (!s || (!record && len) || !ids || !n || !values || k < 1 ||
        (problem != NNT_PROBLEM_REGRESSION && problem != NNT_PROBLEM_MULTI_LABEL))
        return nnt_fail(NULL, NNT_E_INVAL, "%s: a NULL argument, k %lld (>= 1) or problem %d "
                        "(NNT_PROBLEM_REGRESSION, NNT_PROBLEM_MULTI_LABEL)", fn, (long long)k,
                        problem);
    *ids = NULL, *n = 0;
    jv root;
    NNT_TRY(parse_record(fn, record, len, &root));
    const jv *text = NULL, *label = NULL;
    int rc = record_members(fn, &root, "record of values", &text, &label);
    if (rc == 0)
        rc = record_values(fn, label, k, problem == NNT_PROBLEM_MULTI_LABEL, values);
    if (rc == 0)
        rc = record_text_ids(s, fn, text);
    hft_jv_free(&root);
    if (rc)
        return rc;
    *ids = s->ids, *n = s->n;
    return NNT_OK;
}

NNT_API int nnt_sft_encode_labelled(nnt_sft *s, const char *record, size_t len,
                                    const int32_t **ids, size_t *n, int64_t *label)
{
    static const char fn[] = "nnt_sft_encode_labelled";
    if (!s || (!record && len) || !ids || !n || !label)
        return nnt_fail(NULL, NNT_E_INVAL, "%s: a NULL argument", fn);
    *ids = NULL, *n = 0, *label = -1;
    jv root;
    NNT_TRY(parse_record(fn, record, len, &root));
    const jv *text = NULL, *value = NULL;
    int64_t k = -1;
    int rc = record_members(fn, &root, "classification record", &text, &value);
    if (rc == 0 && value && s->nlabel_names && value->type == JV_STR &&
        (k = label_by_name(s, value)) < 0)
        rc = nnt_fail(NULL, NNT_E_FORMAT, "%s: the label \"%.*s\" is none of the %lld label "
                      "names (\"%s\", ...)", fn, (int)(value->len < 40 ? value->len : 40),
                      value->s, (long long)s->nlabel_names, s->label_names[0]);
    if (rc == 0 && k < 0 && (!value || label_value(value, &k))) {
        static const char *const TYPES[] = {"null", "a boolean", "", "", "a list", "an object"};
        int shown = value && (value->type == JV_NUM || value->type == JV_STR);
        int width = shown ? (int)(value->len < 40 ? value->len : 40) : 16;
        const char *quote = shown && value->type == JV_STR ? "\"" : "";
        rc = nnt_fail(NULL, NNT_E_FORMAT, "%s: %s%s%.*s%s%s (the label is its class's index, "
                      "an integer from 0 below 2^31 - 1, or its name given to "
                      "nnt_sft_set_label_names)", fn, value ? "the label " : "no "
                      "\"label\"", quote, width, shown ? value->s : value ? TYPES[value->type]
                      : "", quote, value ? " is not an integer >= 0" : "");
    }
    if (rc == 0)
        rc = record_text_ids(s, fn, text);
    hft_jv_free(&root);
    if (rc)
        return rc;
    *ids = s->ids, *n = s->n, *label = k;
    return NNT_OK;
}

/* ---- unpaired preference records (TRL's KTO form) ------------------------------------------ */

/* An unpaired record as a prompt/completion record in *view (its members but the label,
 * borrowed from root), its label (1 true, 0 false) into *label. */
static int unpaired_view(const char *fn, const jv *root, jv *view, jv parts[4], char *keys[4],
                         int *label)
{
    if (root->type != JV_OBJ)
        return nnt_fail(NULL, NNT_E_FORMAT, "%s: the record is not a JSON object", fn);
    size_t n = 0;
    const jv *lab = NULL;
    for (size_t i = 0; i < root->n; i++) {
        const char *key = root->keys[i];
        if (!strcmp(key, "label")) {
            lab = &root->items[i];
            continue;
        }
        if (strcmp(key, "prompt") && strcmp(key, "completion") &&
            strcmp(key, "chat_template_kwargs") && strcmp(key, "tools"))
            return nnt_fail(NULL, NNT_E_FORMAT, "%s: unknown key \"%s\" (prompt, completion, "
                            "label, chat_template_kwargs, tools)%s", fn, key,
                            !strcmp(key, "chosen") || !strcmp(key, "rejected") ?
                            ": a paired preference record, where an unpaired one is read "
                            "(nnt_sft_encode_unpaired_rows reads it as two)" : "");
        parts[n] = root->items[i], keys[n] = root->keys[i], n++;
    }
    if (!hft_jv_get(root, "prompt") || !hft_jv_get(root, "completion") || !lab)
        return nnt_fail(NULL, NNT_E_FORMAT, "%s: an unpaired record has \"prompt\", "
                        "\"completion\" and \"label\" (true: desirable, false: undesirable)",
                        fn);
    if (lab->type != JV_BOOL)
        return nnt_fail(NULL, NNT_E_FORMAT, "%s: \"label\" is true (a desirable completion) "
                        "or false (an undesirable one), not another JSON value", fn);
    *label = lab->b != 0;
    memset(view, 0, sizeof *view);
    view->type = JV_OBJ, view->n = n, view->keys = keys, view->items = parts;
    return NNT_OK;
}

NNT_API int nnt_sft_encode_unpaired(nnt_sft *s, const char *record, size_t len,
                                    const int32_t **ids, const uint8_t **counts, size_t *n,
                                    int *desirable)
{
    static const char fn[] = "nnt_sft_encode_unpaired";
    if (!s || (!record && len) || !ids || !counts || !n || !desirable)
        return nnt_fail(NULL, NNT_E_INVAL, "%s: a NULL argument", fn);
    *ids = NULL, *counts = NULL, *n = 0, *desirable = 0;
    NNT_TRY(encode_json(s, fn, record, len, 0, 2));
    *ids = s->ids, *counts = s->counts, *n = s->n, *desirable = s->label;
    return NNT_OK;
}

/* 1 into *paired when the record (a JSON value) is an object with "chosen" or "rejected". */
static int record_paired(const char *fn, const char *record, size_t len, int *paired)
{
    jv root;
    NNT_TRY(parse_record(fn, record, len, &root));
    *paired = root.type == JV_OBJ &&
              (hft_jv_get(&root, "chosen") != NULL || hft_jv_get(&root, "rejected") != NULL);
    hft_jv_free(&root);
    return NNT_OK;
}

NNT_API int nnt_sft_encode_unpaired_rows(nnt_sft *s, const char *record, size_t len,
                                         const int32_t *ids[2], const uint8_t *counts[2],
                                         size_t n[2], int desirable[2], int *rows)
{
    static const char fn[] = "nnt_sft_encode_unpaired_rows";
    if (!s || (!record && len) || !ids || !counts || !n || !desirable || !rows)
        return nnt_fail(NULL, NNT_E_INVAL, "%s: a NULL argument", fn);
    ids[0] = ids[1] = NULL, counts[0] = counts[1] = NULL, n[0] = n[1] = 0;
    desirable[0] = desirable[1] = 0, *rows = 0;
    int paired = 0;
    NNT_TRY(record_paired(fn, record, len, &paired));
    if (!paired) {
        NNT_TRY(encode_json(s, fn, record, len, 0, 2));
        ids[0] = s->ids, counts[0] = s->counts, n[0] = s->n, desirable[0] = s->label;
        *rows = 1;
        return NNT_OK;
    }
    /* TRL's unpair_preference_dataset: {"prompt", "completion": chosen, "label": true} and
     * {"prompt", "completion": rejected, "label": false}, each tokenized alone */
    NNT_TRY(encode_sides(s, fn, record, len));
    ids[0] = s->pair_ids, counts[0] = s->pair_counts, n[0] = s->npair, desirable[0] = 1;
    ids[1] = s->ids, counts[1] = s->counts, n[1] = s->n, desirable[1] = 0;
    *rows = 2;
    return NNT_OK;
}
