/* Hugging Face model directories (nnt_model_hf_config, nnt_model_load_hf, nnt_model_save_hf):
 * config.json read with lib/io's JSON reader and mapped onto an nnt_model_config, and
 * model.safetensors read and written under the Hugging Face parameter names.
 *
 * A Llama-family model's parameters already carry HF's names (lib/models/transformer.c);
 * only the shapes differ: nnt keeps the heads apart, HF has 2-D matrices in the same memory
 * order, so an nnt shape (d0, ..., dk) is HF's
 *   (d0 * ... * d(k-1), dk)   weights of q/k/v_proj (NH, hd, C), embeddings, MLP, lm_head
 *   (d0, d1 * ... * dk)       o_proj.weight (C, NH, hd)
 *   (d0 * ... * dk)           biases and norms (1-D in HF).
 * A GPT-2 model (the GPT layer of nnt_gpt_create, or the tree of nnt_model_build_tree inside
 * it: the same parameter names) is mapped onto HF's GPT2LMHeadModel file (GPT2_HF: c_attn =
 * q, k, v; Conv1D weights transposed); nnt_gpt_load_safetensors and
 * nnt_gpt_save_safetensors are these functions too. */
#include "models.h"
#include "hf_shards.h"

#include "../io/io.h"
#include "../layers/layer.h"

#include <errno.h>
#include <locale.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define CONFIG_MAX_BYTES (16u << 20)   /* largest config.json read                          */
#define PATH_MAX_BYTES 4096

/* ---- config.json as a table of top-level values ----------------------------------------- */

typedef struct jkey {
    char *name;
    size_t start, end;                 /* the value's bytes in buf                          */
} jkey;

/* One JSON object: its keys and their values' spans. Messages name the file and prefix
 * ("" at the top level, "rope_scaling." inside that object). */
typedef struct jobj {
    nnt_ctx *ctx;
    const char *fn, *file, *prefix;
    const char *buf;
    jkey *keys;
    size_t n, cap;
} jobj;

static void jobj_free(jobj *o)
{
    for (size_t i = 0; i < o->n; i++)
        free(o->keys[i].name);
    free(o->keys);
    o->keys = NULL;
    o->n = o->cap = 0;
}

static int jobj_add(jobj *o, char *name, size_t start, size_t end)
{
    if (o->n == o->cap) {
        size_t cap = o->cap ? 2 * o->cap : 32;
        jkey *k = realloc(o->keys, cap * sizeof *k);
        if (!k) {
            free(name);
            return nnt_fail(o->ctx, NNT_E_NOMEM, "%s: out of memory", o->fn);
        }
        o->keys = k;
        o->cap = cap;
    }
    o->keys[o->n].name = name;
    o->keys[o->n].start = start;
    o->keys[o->n].end = end;
    o->n++;
    return NNT_OK;
}

static const jkey *jobj_find(const jobj *o, const char *name)
{
    for (size_t i = 0; i < o->n; i++)
        if (strcmp(o->keys[i].name, name) == 0)
            return &o->keys[i];
    return NULL;
}

/* One "key": value pair of the object j is in, recorded in o (duplicates refused). */
static int parse_member(nnt_json *j, jobj *o)
{
    char *name = NULL;
    NNT_TRY(nnt_json_string(j, &name, NULL, NNT_IO_MAXNAME, 0, "(a key)"));   /* j: in buf + base */
    if (jobj_find(o, name)) {
        int rc = nnt_json_fail(j, "duplicate key \"%s%s\"", o->prefix, name);
        free(name);
        return rc;
    }
    int rc = nnt_json_expect(j, ':', "after a key");
    size_t start = 0;
    if (rc == 0) {
        nnt_json_peek(j);
        start = j->base + j->pos;
        rc = nnt_json_skip(j, NNT_JSON_MAXDEPTH, name);
    }
    if (rc) {
        free(name);
        return rc;
    }
    return jobj_add(o, name, start, j->base + j->pos);
}

/* The object j is at (a '{' next): every member into o. JSON errors are in err. */
static int parse_object(nnt_json *j, jobj *o)
{
    NNT_TRY(nnt_json_expect(j, '{', "(an object)"));
    if (nnt_json_peek(j) == '}') {
        j->pos++;
        return NNT_OK;
    }
    for (;;) {
        NNT_TRY(parse_member(j, o));
        int c = nnt_json_peek(j);
        if (c == '}') {
            j->pos++;
            return NNT_OK;
        }
        NNT_TRY(nnt_json_expect(j, ',', "or '}' after a value"));
    }
}

/* Parse the object at buf[start, end) into o (set up by the caller); failures recorded. */
static int jobj_parse(jobj *o, size_t start, size_t end, int whole)
{
    char err[NNT_IO_ERRLEN];
    nnt_json j;
    nnt_json_init(&j, o->buf + start, end - start, start, o->file, err, sizeof err);
    int rc = parse_object(&j, o);
    if (rc == 0 && whole)
        rc = nnt_json_end(&j);
    if (rc == NNT_E_NOMEM)
        return rc;
    return rc ? nnt_fail(o->ctx, rc, "%s: %s", o->fn, err) : NNT_OK;
}

static int bad_type(const jobj *o, const char *key, const char *want)
{
    return nnt_fail(o->ctx, NNT_E_FORMAT, "%s: %s: %s%s must be %s", o->fn, o->file, o->prefix,
                    key, want);
}

/* The value of key, NULL when absent or null (null counts as absent: HF's defaults). */
static const jkey *jvalue(const jobj *o, const char *key)
{
    const jkey *k = jobj_find(o, key);
    if (k && o->buf[k->start] == 'n')
        return NULL;
    return k;
}

static int missing(const jobj *o, const char *key)
{
    return nnt_fail(o->ctx, NNT_E_FORMAT, "%s: %s: no key %s%s", o->fn, o->file, o->prefix, key);
}

/* A number's text (validated by the JSON reader) as a double, whatever the locale. */
static double span_double(const char *s, size_t n)
{
    char tmp[64];
    if (n >= sizeof tmp)
        n = sizeof tmp - 1;
    memcpy(tmp, s, n);
    tmp[n] = '\0';
    char point = localeconv()->decimal_point[0];
    for (char *p = tmp; *p; p++)
        if (*p == '.')
            *p = point;
    return strtod(tmp, NULL);
}

static int is_number(const jobj *o, const jkey *k)
{
    char c = o->buf[k->start];
    return c == '-' || (c >= '0' && c <= '9');
}

/* A number; def when absent or null (required: absent is an error). */
static int get_double(const jobj *o, const char *key, int required, double def, double *out)
{
    const jkey *k = jvalue(o, key);
    if (!k) {
        *out = def;
        return required ? missing(o, key) : NNT_OK;
    }
    if (!is_number(o, k))
        return bad_type(o, key, "a number");
    *out = span_double(o->buf + k->start, k->end - k->start);
    if (!isfinite(*out))
        return bad_type(o, key, "a finite number");
    return NNT_OK;
}

/* An integer (a number without fraction or exponent, in [0, 2^53]). */
static int get_int(const jobj *o, const char *key, int required, int64_t def, int64_t *out)
{
    const jkey *k = jvalue(o, key);
    if (!k) {
        *out = def;
        return required ? missing(o, key) : NNT_OK;
    }
    for (size_t i = k->start; i < k->end; i++)
        if (o->buf[i] < '0' || o->buf[i] > '9' || k->end - k->start > 16)
            return bad_type(o, key, "a non-negative integer");
    *out = (int64_t)span_double(o->buf + k->start, k->end - k->start);
    return NNT_OK;
}

static int get_bool(const jobj *o, const char *key, int def, int *out)
{
    const jkey *k = jvalue(o, key);
    *out = def;
    if (!k)
        return NNT_OK;
    if (o->buf[k->start] != 't' && o->buf[k->start] != 'f')
        return bad_type(o, key, "true or false");
    *out = o->buf[k->start] == 't';
    return NNT_OK;
}

/* A string (malloc'd into *out, NULL when absent or null). */
static int get_string(const jobj *o, const char *key, char **out)
{
    *out = NULL;
    const jkey *k = jvalue(o, key);
    if (!k)
        return NNT_OK;
    if (o->buf[k->start] != '"')
        return bad_type(o, key, "a string");
    char err[NNT_IO_ERRLEN];
    nnt_json j;
    nnt_json_init(&j, o->buf + k->start, k->end - k->start, k->start, o->file, err, sizeof err);
    int rc = nnt_json_string(&j, out, NULL, NNT_IO_MAXNAME, 0, key);
    return rc ? nnt_fail(o->ctx, rc, "%s: %s", o->fn, err) : NNT_OK;
}

/* The sub-object under key into sub (absent or null: sub->n == 0, *present 0). */
static int get_object(const jobj *o, const char *key, const char *prefix, jobj *sub,
                      int *present)
{
    *sub = *o;
    sub->prefix = prefix;
    sub->keys = NULL;
    sub->n = sub->cap = 0;
    const jkey *k = jvalue(o, key);
    *present = k != NULL;
    if (!k)
        return NNT_OK;
    if (o->buf[k->start] != '{')
        return bad_type(o, key, "an object or null");
    return jobj_parse(sub, k->start, k->end, 0);
}

static int unsupported(const jobj *o, const char *key, const char *value, const char *valid)
{
    return nnt_fail(o->ctx, NNT_E_UNSUPPORTED, "%s: %s: %s%s %s is not supported (%s)", o->fn,
                    o->file, o->prefix, key, value, valid);
}

/* A string key that must be one of valid (comma separated in the message); absent: def. */
static int expect_string(const jobj *o, const char *key, const char *def,
                         const char *const *valid, int nvalid, const char *list, int *which)
{
    char *s = NULL;
    NNT_TRY(get_string(o, key, &s));
    const char *v = s ? s : def;
    for (int i = 0; i < nvalid; i++)
        if (strcmp(v, valid[i]) == 0) {
            *which = i;
            free(s);
            return NNT_OK;
        }
    char quoted[NNT_IO_MAXNAME + 8];
    snprintf(quoted, sizeof quoted, "\"%s\"", v);
    free(s);
    return unsupported(o, key, quoted, list);
}

/* ---- config.json -> nnt_model_config ---------------------------------------------------- */

enum { ARCH_GPT2, ARCH_LLAMA, ARCH_MISTRAL, ARCH_QWEN2, ARCH_QWEN3, NARCH };

static const char *const ARCH_NAMES[NARCH] = {
    "GPT2LMHeadModel", "LlamaForCausalLM", "MistralForCausalLM", "Qwen2ForCausalLM",
    "Qwen3ForCausalLM"};
static const char *const MODEL_TYPES[NARCH] = {"gpt2", "llama", "mistral", "qwen2", "qwen3"};

/* The first string of the architectures array. */
static int first_architecture(const jobj *o, const jkey *k, char **out)
{
    char err[NNT_IO_ERRLEN];
    nnt_json j;
    nnt_json_init(&j, o->buf + k->start, k->end - k->start, k->start, o->file, err, sizeof err);
    if (nnt_json_expect(&j, '[', "architectures") || nnt_json_peek(&j) != '"')
        return bad_type(o, "architectures", "an array of strings");
    int rc = nnt_json_string(&j, out, NULL, NNT_IO_MAXNAME, 0, "architectures[0]");
    return rc ? nnt_fail(o->ctx, rc, "%s: %s", o->fn, err) : NNT_OK;
}

static int architecture(const jobj *o, int *arch)
{
    const jkey *k = jvalue(o, "architectures");
    if (k) {
        char *name = NULL;
        NNT_TRY(first_architecture(o, k, &name));
        for (int i = 0; i < NARCH; i++)
            if (strcmp(name, ARCH_NAMES[i]) == 0)
                *arch = i;
        char quoted[NNT_IO_MAXNAME + 8];
        snprintf(quoted, sizeof quoted, "\"%s\"", name);
        free(name);
        if (*arch < 0)
            return unsupported(o, "architectures[0]", quoted, "GPT2LMHeadModel, "
                               "LlamaForCausalLM, MistralForCausalLM, Qwen2ForCausalLM, "
                               "Qwen3ForCausalLM");
        return NNT_OK;
    }
    if (!jvalue(o, "model_type"))
        return nnt_fail(o->ctx, NNT_E_FORMAT, "%s: %s: neither architectures nor model_type "
                        "is given", o->fn, o->file);
    return expect_string(o, "model_type", "", MODEL_TYPES, NARCH,
                         "gpt2, llama, mistral, qwen2, qwen3", arch);
}

/* GPT-2: GPT2Config's keys; what nnt_gpt_create cannot build is refused by key. */
static int gpt2_config(const jobj *o, nnt_model_config *c)
{
    static const char *const acts[2] = {"gelu_new", "gelu_pytorch_tanh"};
    int64_t inner = 0;
    int act = 0, scale = 1, by_layer = 0;
    NNT_TRY(get_int(o, "vocab_size", 1, 0, &c->vocab));
    NNT_TRY(get_int(o, "n_positions", 1, 0, &c->max_seq));
    NNT_TRY(get_int(o, "n_embd", 1, 0, &c->channels));
    NNT_TRY(get_int(o, "n_layer", 1, 0, &c->layers));
    NNT_TRY(get_int(o, "n_head", 1, 0, &c->heads));
    NNT_TRY(get_int(o, "n_inner", 0, 4 * c->channels, &inner));
    NNT_TRY(get_double(o, "layer_norm_epsilon", 0, 1e-5, &c->norm_eps));
    NNT_TRY(expect_string(o, "activation_function", "gelu_new", acts, 2,
                          "gelu_new, gelu_pytorch_tanh", &act));
    NNT_TRY(get_bool(o, "tie_word_embeddings", 1, &c->tied));
    NNT_TRY(get_bool(o, "scale_attn_weights", 1, &scale));
    NNT_TRY(get_bool(o, "scale_attn_by_inverse_layer_idx", 0, &by_layer));
    char v[64];
    if (inner != 4 * c->channels) {
        snprintf(v, sizeof v, "%lld", (long long)inner);
        return unsupported(o, "n_inner", v, "null or 4 * n_embd");
    }
    if (c->norm_eps != 1e-5) {
        snprintf(v, sizeof v, "%g", c->norm_eps);
        return unsupported(o, "layer_norm_epsilon", v, "1e-05");
    }
    if (!c->tied)
        return unsupported(o, "tie_word_embeddings", "false", "true");
    if (!scale)
        return unsupported(o, "scale_attn_weights", "false", "true");
    if (by_layer)
        return unsupported(o, "scale_attn_by_inverse_layer_idx", "true", "false");
    c->kv_heads = c->heads;
    c->hidden = 4 * c->channels;
    return NNT_OK;
}

/* The llama3 fields of a rope object (rope_scaling or rope_parameters). */
static int llama3_fields(const jobj *r, nnt_rope_options *rope)
{
    rope->scaling = NNT_ROPE_SCALING_LLAMA3;
    NNT_TRY(get_double(r, "factor", 1, 0, &rope->factor));
    NNT_TRY(get_double(r, "low_freq_factor", 1, 0, &rope->low_freq_factor));
    NNT_TRY(get_double(r, "high_freq_factor", 1, 0, &rope->high_freq_factor));
    return get_int(r, "original_max_position_embeddings", 1, 0, &rope->original_max_position);
}

/* rope_type (or the older "type") of a rope object: default or llama3. */
static int rope_type(const jobj *r, nnt_rope_options *rope)
{
    static const char *const types[2] = {"default", "llama3"};
    const char *key = jvalue(r, "rope_type") || !jvalue(r, "type") ? "rope_type" : "type";
    int which = 0;
    NNT_TRY(expect_string(r, key, "default", types, 2, "default, llama3", &which));
    return which ? llama3_fields(r, rope) : NNT_OK;
}

/* rope_parameters (transformers 5) or rope_theta + rope_scaling (earlier). */
static int rope_config(const jobj *o, nnt_rope_options *rope)
{
    jobj r;
    int present = 0;
    NNT_TRY(get_object(o, "rope_parameters", "rope_parameters.", &r, &present));
    if (present) {
        int rc = get_double(&r, "rope_theta", 0, 10000.0, &rope->theta);
        if (rc == 0)
            rc = rope_type(&r, rope);
        jobj_free(&r);
        return rc;
    }
    NNT_TRY(get_double(o, "rope_theta", 0, 10000.0, &rope->theta));
    NNT_TRY(get_object(o, "rope_scaling", "rope_scaling.", &r, &present));
    int rc = present ? rope_type(&r, rope) : NNT_OK;
    jobj_free(&r);
    return rc;
}

/* What only some of the Llama family have: biases, q/k norms, sliding windows. Llama:
 * attention_bias on q, k, v and o, mlp_bias; Qwen2: q, k, v biases; Qwen3: attention_bias,
 * q/k norms. */
static int llama_variant(const jobj *o, int arch, nnt_model_config *c)
{
    int on = 0;
    if (arch == ARCH_LLAMA || arch == ARCH_QWEN3) {
        NNT_TRY(get_bool(o, "attention_bias", 0, &c->qkv_bias));
        c->out_bias = c->qkv_bias;
    }
    if (arch == ARCH_LLAMA)
        NNT_TRY(get_bool(o, "mlp_bias", 0, &c->mlp_bias));
    if (arch == ARCH_QWEN2)
        c->qkv_bias = 1;
    c->qk_norm = arch == ARCH_QWEN3;
    if (arch == ARCH_QWEN2 || arch == ARCH_QWEN3) {   /* sliding_window only applies with it */
        NNT_TRY(get_bool(o, "use_sliding_window", 0, &on));
        if (on)
            return unsupported(o, "use_sliding_window", "true", "false");
    } else if (jvalue(o, "sliding_window")) {
        const jkey *k = jvalue(o, "sliding_window");
        char v[40];
        snprintf(v, sizeof v, "%.*s", (int)(k->end - k->start < 32 ? k->end - k->start : 32),
                 o->buf + k->start);
        return unsupported(o, "sliding_window", v, "null");
    }
    return NNT_OK;
}

static int llama_config(const jobj *o, int arch, nnt_model_config *c)
{
    static const char *const acts[1] = {"silu"};
    int64_t head_dim = 0;
    int act = 0;
    c->family = NNT_FAMILY_LLAMA;
    NNT_TRY(get_int(o, "vocab_size", 1, 0, &c->vocab));
    NNT_TRY(get_int(o, "hidden_size", 1, 0, &c->channels));
    NNT_TRY(get_int(o, "intermediate_size", 1, 0, &c->hidden));
    NNT_TRY(get_int(o, "num_hidden_layers", 1, 0, &c->layers));
    NNT_TRY(get_int(o, "num_attention_heads", 1, 0, &c->heads));
    NNT_TRY(get_int(o, "num_key_value_heads", 0, c->heads, &c->kv_heads));
    NNT_TRY(get_int(o, "max_position_embeddings", 1, 0, &c->max_seq));
    NNT_TRY(get_double(o, "rms_norm_eps", 0, 1e-6, &c->norm_eps));
    NNT_TRY(get_bool(o, "tie_word_embeddings", 0, &c->tied));
    NNT_TRY(expect_string(o, "hidden_act", "silu", acts, 1, "silu", &act));
    /* absent or null: hidden_size / num_attention_heads, but Qwen3Config's 128 */
    NNT_TRY(get_int(o, "head_dim", 0, arch == ARCH_QWEN3 ? 128 : 0, &head_dim));
    if (jvalue(o, "head_dim") && head_dim < 1)
        return bad_type(o, "head_dim", "a positive integer");
    c->head_dim = head_dim;
    c->qkv_bias = c->out_bias = c->mlp_bias = 0;
    NNT_TRY(llama_variant(o, arch, c));
    return rope_config(o, &c->rope);
}

/* dir/name into path. */
static int join(nnt_ctx *ctx, const char *fn, const char *dir, const char *name, char *path)
{
    int n = snprintf(path, PATH_MAX_BYTES, "%s/%s", dir, name);
    if (n < 0 || n >= PATH_MAX_BYTES)
        return nnt_fail(ctx, NNT_E_INVAL, "%s: path %s/%s is too long", fn, dir, name);
    return NNT_OK;
}

/* The whole of path (NUL-terminated, malloc'd). */
static int read_file(nnt_ctx *ctx, const char *fn, const char *path, char **out, size_t *len)
{
    char err[NNT_IO_ERRLEN];
    int fd = -1;
    uint64_t size = 0;
    *out = NULL;
    int rc = nnt_io_open_read(path, &fd, &size, err, sizeof err);
    if (rc)
        return nnt_fail(ctx, rc, "%s: %s", fn, err);
    if (size > CONFIG_MAX_BYTES)
        rc = nnt_io_errf(err, sizeof err, NNT_E_FORMAT, "%s: larger than %u bytes", path,
                         CONFIG_MAX_BYTES);
    char *buf = rc ? NULL : malloc((size_t)size + 1);
    if (!rc && !buf)
        rc = nnt_io_errf(err, sizeof err, NNT_E_NOMEM, "out of memory");
    if (!rc)
        rc = nnt_io_pread(fd, buf, (size_t)size, 0, path, err, sizeof err);
    close(fd);
    if (rc) {
        free(buf);
        return nnt_fail(ctx, rc, "%s: %s", fn, err);
    }
    buf[size] = '\0';
    *out = buf;
    *len = (size_t)size;
    return NNT_OK;
}

static int config_from(jobj *o, nnt_model_config *cfg)
{
    nnt_model_config c = NNT_MODEL_CONFIG_INIT;
    int arch = -1;
    NNT_TRY(architecture(o, &arch));
    if (arch == ARCH_GPT2)
        NNT_TRY(gpt2_config(o, &c));
    else
        NNT_TRY(llama_config(o, arch, &c));
    NNT_TRY(nnt_model_check(o->ctx, o->fn, &c));
    *cfg = c;
    return NNT_OK;
}

/* A config.json text (len bytes) as a configuration nnt can build; errors name fn and what
 * (the file). */
int nnt_model_config_parse(nnt_ctx *ctx, const char *fn, const char *what, const char *text,
                           size_t len, nnt_model_config *cfg)
{
    jobj o = {ctx, fn, what, "", text, NULL, 0, 0};
    int rc = jobj_parse(&o, 0, len, 1);
    if (rc == 0)
        rc = config_from(&o, cfg);
    jobj_free(&o);
    return rc;
}

/* dir/config.json as a configuration nnt can build; errors name fn. */
static int hf_config(nnt_ctx *ctx, const char *fn, const char *dir, nnt_model_config *cfg)
{
    char path[PATH_MAX_BYTES];
    char *buf = NULL;
    size_t len = 0;
    NNT_TRY(join(ctx, fn, dir, "config.json", path));
    NNT_TRY(read_file(ctx, fn, path, &buf, &len));
    int rc = nnt_model_config_parse(ctx, fn, path, buf, len, cfg);
    free(buf);
    return rc;
}

NNT_API int nnt_model_hf_config(nnt_ctx *ctx, const char *dir, nnt_model_config *cfg)
{
    const char *fn = "nnt_model_hf_config";
    if (ctx)   /* NULL: no context yet (the message goes to nnt_ctx_last_error(NULL)) */
        NNT_TRY(nnt_ctx_check(ctx, fn));
    if (!dir || !cfg)
        return nnt_fail(ctx, NNT_E_INVAL, "%s: %s is NULL", fn, dir ? "cfg" : "dir");
    return hf_config(ctx, fn, dir, cfg);
}

/* ---- parameters under HF names and shapes ---------------------------------------------- */

static int ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s), k = strlen(suffix);
    return n >= k && strcmp(s + n - k, suffix) == 0;
}

/* The HF shape of a parameter (see the top of the file); its number of dims. */
static int hf_shape(nnt_tensor *value, const char *name, int64_t shape[2])
{
    int nd = 0;
    int64_t s[NNT_IO_MAXDIM], numel = 1;
    if (nnt_tensor_ndim(value, &nd) || nd < 1 || nd > NNT_IO_MAXDIM || nnt_tensor_shape(value, s))
        return 0;
    for (int i = 0; i < nd; i++)
        numel *= s[i];
    if (nd == 1 || ends_with(name, ".bias")) {
        shape[0] = numel;
        return 1;
    }
    int split = ends_with(name, "o_proj.weight") ? 1 : nd - 1;  /* rows: dims before split */
    shape[0] = 1;
    for (int i = 0; i < split; i++)
        shape[0] *= s[i];
    shape[1] = numel / shape[0];
    return 2;
}

static nnt_param_info param_of(nnt_layer *model, int64_t i)
{
    nnt_param_info p;
    memset(&p, 0, sizeof p);
    p.size = sizeof p;
    if (nnt_layer_param(model, i, &p))
        p.name = NULL;
    return p;
}

/* "(a, b)" */
static void shape_text(int nd, const int64_t *shape, char *out, size_t size)
{
    size_t n = (size_t)snprintf(out, size, "(");
    for (int i = 0; i < nd && n < size; i++)
        n += (size_t)snprintf(out + n, size - n, "%s%lld", i ? ", " : "", (long long)shape[i]);
    if (n < size)
        snprintf(out + n, size - n, ")");
}

/* The checkpoint's tensor for parameter p: present, convertible to F32, of its HF shape.
 * what: the directory's weights file or index (messages). */
static int check_tensor(nnt_ctx *ctx, const char *fn, const char *what,
                        const nnt_hf_weights *w, const nnt_param_info *p)
{
    const char *path = what;
    const nnt_st_entry *e = nnt_hf_weights_find(w, p->name, NULL, &path);
    if (!e)
        return nnt_fail(ctx, NNT_E_FORMAT, "%s: %s: no tensor %s", fn, what, p->name);
    if (e->dtype != NNT_IO_F32 && e->dtype != NNT_IO_BF16 && e->dtype != NNT_IO_F16)
        return nnt_fail(ctx, NNT_E_UNSUPPORTED, "%s: %s: tensor %s is %s (F32, BF16 or F16 "
                        "only)", fn, path, p->name, nnt_io_dtype_name(e->dtype));
    int64_t want[2] = {0, 0};
    int nd = hf_shape(p->value, p->name, want);
    if (nd == 0)
        return nnt_fail(ctx, NNT_E_INVAL, "%s: parameter %s has no shape", fn, p->name);
    if (e->ndim != nd || e->shape[0] != want[0] || (nd == 2 && e->shape[1] != want[1])) {
        char got[200], exp[64];
        shape_text(e->ndim, e->shape, got, sizeof got);
        shape_text(nd, want, exp, sizeof exp);
        return nnt_fail(ctx, NNT_E_FORMAT, "%s: %s: tensor %s has shape %s, expected %s", fn,
                        path, p->name, got, exp);
    }
    return NNT_OK;
}

/* A tensor of the file that is no parameter: the tied head, or a buffer HF saves. */
static int ignorable(const char *name, int tied)
{
    return (tied && strcmp(name, "lm_head.weight") == 0) || ends_with(name, "rotary_emb.inv_freq");
}

static int is_param(nnt_layer *model, int64_t count, const char *name)
{
    for (int64_t i = 0; i < count; i++) {
        nnt_param_info p = param_of(model, i);
        if (p.name && strcmp(p.name, name) == 0)
            return 1;
    }
    return 0;
}

/* Every parameter's tensor checked, and every tensor of the checkpoint is a parameter. */
static int check_file(nnt_layer *model, const char *fn, const char *path,
                      const nnt_hf_weights *w, int tied, int64_t count)
{
    for (int64_t i = 0; i < count; i++) {
        nnt_param_info p = param_of(model, i);
        if (!p.name)
            return nnt_fail(model->ctx, NNT_E_INVAL, "%s: parameter %lld unreadable", fn,
                            (long long)i);
        NNT_TRY(check_tensor(model->ctx, fn, path, w, &p));
    }
    for (size_t i = 0; i < nnt_hf_weights_count(w); i++) {
        const char *name = nnt_hf_weights_name(w, i), *file = path;
        nnt_hf_weights_find(w, name, NULL, &file);
        if (!ignorable(name, tied) && !is_param(model, count, name))
            return nnt_fail(model->ctx, NNT_E_FORMAT, "%s: %s: unknown tensor %s (no parameter "
                            "of the model has that name)", fn, file, name);
    }
    return NNT_OK;
}

/* Every parameter from its (checked) tensor, converted to fp32, one at a time. */
static int load_params(nnt_layer *model, const char *fn, const nnt_hf_weights *w,
                       int64_t count)
{
    char err[NNT_IO_ERRLEN];
    for (int64_t i = 0; i < count; i++) {
        nnt_param_info p = param_of(model, i);
        const nnt_st_reader *r = NULL;
        const nnt_st_entry *e = nnt_hf_weights_find(w, p.name, &r, NULL);
        float *buf = malloc((size_t)e->numel * sizeof(float) + 1);
        if (!buf)
            return nnt_fail(model->ctx, NNT_E_NOMEM, "%s: out of memory", fn);
        int rc = nnt_st_read(r, e, NNT_IO_F32, 0, e->numel, buf, err, sizeof err);
        if (rc)
            rc = nnt_fail(model->ctx, rc, "%s: %s", fn, err);
        else
            rc = nnt_tensor_copy_from_host(p.value, buf, (size_t)e->numel * sizeof(float));
        free(buf);
        NNT_TRY(rc);
    }
    return NNT_OK;
}

/* A Llama-family model from the checked weights w (what: their file or index). */
static int llama_load(nnt_ctx *ctx, const char *fn, const nnt_hf_weights *w, const char *what,
                      const nnt_model_config *c, int64_t B, int64_t T,
                      const nnt_tiling *tiling, nnt_layer **out)
{
    nnt_layer *model = NULL;
    int64_t count = 0;
    int rc = nnt_model_build(ctx, fn, c, B, T, tiling, &model);
    if (rc == 0)
        rc = nnt_layer_num_params(model, &count, NULL);
    if (rc == 0)
        rc = check_file(model, fn, what, w, c->tied, count);
    if (rc == 0)
        rc = load_params(model, fn, w, count);
    if (rc) {
        nnt_layer_destroy(model);
        return rc;
    }
    *out = model;
    return NNT_OK;
}

/* ---- GPT-2 (the GPT layer or its tree) ------------------------------------------------------ */

/* The HF GPT2LMHeadModel tensors in nnt_gpt_save_safetensors's order (kind by kind, block by
 * block): hf after "transformer." or "transformer.h.<l>.", made of the nnt parameters nnt
 * (after "h.<l>." for a block's; q, k, v one after the other for c_attn); in: for a Conv1D
 * weight, HF's (in, out) where nnt has (out, in), the number of trailing nnt dimensions
 * that make in (else 0). */
static const struct gpt2_hf {
    const char *hf;
    const char *nnt[3];
    int block, in;
} GPT2_HF[] = {
    {"wte.weight", {"wte.weight"}, 0, 0},
    {"wpe.weight", {"wpe.weight"}, 0, 0},
    {"ln_1.weight", {"ln_1.weight"}, 1, 0},
    {"ln_1.bias", {"ln_1.bias"}, 1, 0},
    {"attn.c_attn.weight", {"attn.q.weight", "attn.k.weight", "attn.v.weight"}, 1, 1},
    {"attn.c_attn.bias", {"attn.q.bias", "attn.k.bias", "attn.v.bias"}, 1, 0},
    {"attn.c_proj.weight", {"attn.c_proj.weight"}, 1, 2},   /* nnt (C, NH, hd) */
    {"attn.c_proj.bias", {"attn.c_proj.bias"}, 1, 0},
    {"ln_2.weight", {"ln_2.weight"}, 1, 0},
    {"ln_2.bias", {"ln_2.bias"}, 1, 0},
    {"mlp.c_fc.weight", {"mlp.c_fc.weight"}, 1, 1},
    {"mlp.c_fc.bias", {"mlp.c_fc.bias"}, 1, 0},
    {"mlp.c_proj.weight", {"mlp.c_proj.weight"}, 1, 1},
    {"mlp.c_proj.bias", {"mlp.c_proj.bias"}, 1, 0},
    {"ln_f.weight", {"ln_f.weight"}, 0, 0},
    {"ln_f.bias", {"ln_f.bias"}, 0, 0},
};
#define GPT2_NHF ((int)(sizeof GPT2_HF / sizeof GPT2_HF[0]))

/* One HF tensor of a GPT-2 tree: its name (without "transformer."), its nnt pieces (numel
 * n each), its HF shape (nd dims), its Conv1D in size (0: none). */
typedef struct gpt2_tensor {
    char name[NNT_IO_MAXNAME + 1];
    nnt_param_info p[3];
    int np, nd;
    int64_t n, shape[2], in;
} gpt2_tensor;

static int64_t param_index(nnt_layer *model, int64_t count, const char *name)
{
    for (int64_t i = 0; i < count; i++) {
        nnt_param_info p = param_of(model, i);
        if (p.name && strcmp(p.name, name) == 0)
            return i;
    }
    return -1;
}

/* The HF shape of t from its first piece's nnt shape. */
static int gpt2_shape(nnt_ctx *ctx, const char *fn, gpt2_tensor *t, int in_dims)
{
    int nd = 0;
    int64_t s[NNT_MAX_DIMS];
    NNT_TRY(nnt_tensor_ndim(t->p[0].value, &nd));
    NNT_TRY(nnt_tensor_shape(t->p[0].value, s));
    NNT_TRY(nnt_tensor_numel(t->p[0].value, &t->n));
    if (nd <= in_dims)
        return nnt_fail(ctx, NNT_E_INVAL, "%s: parameter %s has %d dims", fn, t->p[0].name, nd);
    t->in = 1;
    for (int d = nd - in_dims; d < nd && in_dims; d++)
        t->in *= s[d];
    int64_t total = t->n * t->np;
    if (in_dims) {   /* Conv1D (in, out) */
        t->nd = 2;
        t->shape[0] = t->in;
        t->shape[1] = total / t->in;
    } else if (nd == 2 && t->np == 1 && !ends_with(t->name, ".bias")) {   /* wte, wpe */
        t->nd = 2;
        t->shape[0] = s[0];
        t->shape[1] = s[1];
    } else {
        t->nd = 1;
        t->shape[0] = total;
    }
    if (!in_dims)
        t->in = 0;
    return NNT_OK;
}

/* HF tensor k of block l (l ignored for the others) of a GPT-2 tree of count parameters. */
static int gpt2_tensor_at(nnt_layer *model, const char *fn, int64_t count, int k, int64_t l,
                          gpt2_tensor *t)
{
    const struct gpt2_hf *h = &GPT2_HF[k];
    char block[32] = "", pname[NNT_IO_MAXNAME + 1];
    if (h->block)
        snprintf(block, sizeof block, "h.%lld.", (long long)l);
    snprintf(t->name, sizeof t->name, "%s%s", block, h->hf);
    for (t->np = 0; t->np < 3 && h->nnt[t->np]; t->np++) {
        snprintf(pname, sizeof pname, "%s%s", block, h->nnt[t->np]);
        int64_t i = param_index(model, count, pname);
        if (i < 0)
            return nnt_fail(model->ctx, NNT_E_INVAL, "%s: the GPT-2 model has no parameter %s",
                            fn, pname);
        t->p[t->np] = param_of(model, i);
    }
    return gpt2_shape(model->ctx, fn, t, h->in);
}

/* (rows, cols) row-major -> (cols, rows). */
static void transpose(const float *src, float *dst, int64_t rows, int64_t cols)
{
    for (int64_t r = 0; r < rows; r++)
        for (int64_t c = 0; c < cols; c++)
            dst[c * rows + r] = src[r * cols + c];
}

/* Calls f on every HF tensor of a GPT-2 tree, in file order; stops at the first failure. */
typedef int (*gpt2_visit)(nnt_layer *model, const char *fn, gpt2_tensor *t, void *arg);

static int gpt2_each(nnt_layer *model, const char *fn, gpt2_visit f, void *arg)
{
    nnt_model_config c;
    int64_t count = 0;
    NNT_TRY(nnt_model_config_get(model, fn, &c));
    NNT_TRY(nnt_layer_num_params(model, &count, NULL));
    for (int k = 0; k < GPT2_NHF; k++)
        for (int64_t l = 0; l < (GPT2_HF[k].block ? c.layers : 1); l++) {
            gpt2_tensor t;
            NNT_TRY(gpt2_tensor_at(model, fn, count, k, l, &t));
            NNT_TRY(f(model, fn, &t, arg));
        }
    return NNT_OK;
}

/* ---- saving a GPT-2 tree ---- */

/* One safetensors file being written (model.safetensors or a shard): lib/io's writer (temp
 * file + rename), the host buffers, and where a failure's message is. A pass visits every
 * tensor of the model in file order (ordinal ord); only those in [lo, hi) go to this file.
 * With plan set, declaring records (name, bytes) there instead (the split of a sharded
 * save) and nothing is written. */
typedef struct st_save {
    nnt_st_writer *w;
    float *buf, *tmp;   /* most floats each (NULL while declaring; tmp only if transposing) */
    int64_t most;       /* the largest tensor's floats, found while declaring           */
    int transposes;     /* a declared tensor is stored transposed: tmp is needed        */
    int io;             /* the failure is lib/io's (message in err)                     */
    int64_t ord, lo, hi;   /* the tensor being visited; this file's ordinals            */
    nnt_hf_plan *plan;
    char err[NNT_IO_ERRLEN];
} st_save;

/* A pass over the tensors of a model: declare each (name, shape, s->most), or write each. */
typedef int (*st_pass)(nnt_layer *model, const char *fn, st_save *s);

/* The next tensor of a pass is this file's. */
static int st_mine(st_save *s)
{
    int64_t ord = s->ord++;
    return ord >= s->lo && ord < s->hi;
}

/* Declare the next tensor (n floats): into the plan, or to the writer when it is this
 * file's. */
static int st_declare(st_save *s, const char *name, int nd, const int64_t *shape, int64_t n)
{
    s->io = 1;
    if (s->plan) {
        s->ord++;
        return nnt_hf_plan_add(s->plan, name, (uint64_t)n, (uint64_t)n * sizeof(float),
                               s->err, sizeof s->err);
    }
    if (!st_mine(s))
        return NNT_OK;
    s->most = n > s->most ? n : s->most;
    return nnt_st_writer_add(s->w, name, NNT_IO_F32, nd, shape, NULL, s->err, sizeof s->err);
}

/* Write the file at path with the tensors [lo, hi) of the passes: the header ("format":
 * "pt" and what declare declares), then the data that stream writes, in the same order. */
static int save_st_range(nnt_layer *model, const char *fn, const char *path, st_pass declare,
                         st_pass stream, int64_t lo, int64_t hi)
{
    st_save s = {NULL, NULL, NULL, 1, 0, 1, 0, lo, hi, NULL, ""};
    int rc = nnt_st_writer_begin(path, &s.w, s.err, sizeof s.err);
    if (rc == 0)
        rc = nnt_st_writer_meta(s.w, "format", "pt", s.err, sizeof s.err);
    if (rc == 0)
        rc = declare(model, fn, &s);
    if (rc == 0) {
        s.buf = malloc((size_t)s.most * sizeof(float));
        s.tmp = s.transposes ? malloc((size_t)s.most * sizeof(float)) : NULL;
        if (!s.buf || (s.transposes && !s.tmp))
            rc = nnt_io_errf(s.err, sizeof s.err, NNT_E_NOMEM, "out of memory");
    }
    s.ord = 0;
    if (rc == 0)
        rc = stream(model, fn, &s);
    if (rc == 0) {
        s.io = 1;
        rc = nnt_st_writer_finish(s.w, s.err, sizeof s.err);   /* frees w */
        s.w = NULL;
    }
    nnt_st_writer_abort(s.w);
    free(s.buf);
    free(s.tmp);
    return rc && s.io ? nnt_fail(model->ctx, rc, "%s: %s", fn, s.err) : rc;
}

/* All the tensors in one file at path. */
static int save_st(nnt_layer *model, const char *fn, const char *path, st_pass declare,
                   st_pass stream)
{
    return save_st_range(model, fn, path, declare, stream, 0, INT64_MAX);
}

/* The names and sizes of the tensors declare declares, in file order, into plan. */
static int plan_tensors(nnt_layer *model, const char *fn, st_pass declare, nnt_hf_plan *plan)
{
    st_save s = {NULL, NULL, NULL, 1, 0, 1, 0, 0, 0, plan, ""};
    int rc = declare(model, fn, &s);
    return rc && s.io ? nnt_fail(model->ctx, rc, "%s: %s", fn, s.err) : rc;
}

static int gpt2_declare(nnt_layer *model, const char *fn, gpt2_tensor *t, void *arg)
{
    (void)model;
    (void)fn;
    st_save *s = arg;
    char name[NNT_IO_MAXNAME + 16];
    snprintf(name, sizeof name, "transformer.%s", t->name);
    s->transposes |= t->in != 0;
    return st_declare(s, name, t->nd, t->shape, t->n * t->np);
}

static int gpt2_stream(nnt_layer *model, const char *fn, gpt2_tensor *t, void *arg)
{
    (void)model;
    (void)fn;
    st_save *s = arg;
    s->io = 0;
    if (!st_mine(s))
        return NNT_OK;
    for (int i = 0; i < t->np; i++)
        NNT_TRY(nnt_tensor_copy_to_host(t->p[i].value, s->buf + i * t->n,
                                        (size_t)t->n * sizeof(float)));
    int64_t total = t->n * t->np;
    if (t->in)   /* nnt (out, in) -> Conv1D (in, out) */
        transpose(s->buf, s->tmp, total / t->in, t->in);
    s->io = 1;
    return nnt_st_writer_write(s->w, t->in ? s->tmp : s->buf, (size_t)total * sizeof(float),
                               s->err, sizeof s->err);
}

static int gpt2_declare_all(nnt_layer *model, const char *fn, st_save *s)
{
    return gpt2_each(model, fn, gpt2_declare, s);
}

static int gpt2_stream_all(nnt_layer *model, const char *fn, st_save *s)
{
    return gpt2_each(model, fn, gpt2_stream, s);
}

int nnt_model_save_gpt2_st(nnt_layer *model, const char *fn, const char *path)
{
    return save_st(model, fn, path, gpt2_declare_all, gpt2_stream_all);
}

/* ---- loading a GPT-2 model ---- */

typedef struct gpt2_reading {
    const nnt_hf_weights *w;
    const char *what;   /* the file or index (messages) */
} gpt2_reading;

/* The checkpoint's tensor of t, with or without the "transformer." prefix, its reader and
 * file (r, path may be NULL); NULL if absent. */
static const nnt_st_entry *gpt2_find(const nnt_hf_weights *w, const gpt2_tensor *t,
                                     const nnt_st_reader **r, const char **path)
{
    char name[NNT_IO_MAXNAME + 16];
    snprintf(name, sizeof name, "transformer.%s", t->name);
    const nnt_st_entry *e = nnt_hf_weights_find(w, name, r, path);
    return e ? e : nnt_hf_weights_find(w, t->name, r, path);
}

static int gpt2_check(nnt_layer *model, const char *fn, gpt2_tensor *t, void *arg)
{
    gpt2_reading *g = arg;
    const char *path = g->what;
    const nnt_st_entry *e = gpt2_find(g->w, t, NULL, &path);
    if (!e)
        return nnt_fail(model->ctx, NNT_E_FORMAT, "%s: %s: no tensor transformer.%s", fn,
                        g->what, t->name);
    if (e->dtype != NNT_IO_F32 && e->dtype != NNT_IO_BF16 && e->dtype != NNT_IO_F16)
        return nnt_fail(model->ctx, NNT_E_UNSUPPORTED, "%s: %s: tensor %s is %s (F32, BF16 or "
                        "F16 only)", fn, path, e->name, nnt_io_dtype_name(e->dtype));
    if (e->ndim != t->nd || e->shape[0] != t->shape[0] ||
        (t->nd == 2 && e->shape[1] != t->shape[1])) {
        char got[200], exp[64];
        shape_text(e->ndim, e->shape, got, sizeof got);
        shape_text(t->nd, t->shape, exp, sizeof exp);
        return nnt_fail(model->ctx, NNT_E_FORMAT, "%s: %s: tensor %s has shape %s, expected %s",
                        fn, path, e->name, got, exp);
    }
    return NNT_OK;
}

/* The (checked) tensor of t into its pieces, converted to fp32. */
static int gpt2_fill(nnt_layer *model, const char *fn, gpt2_tensor *t, void *arg)
{
    gpt2_reading *g = arg;
    const nnt_st_reader *r = NULL;
    const nnt_st_entry *e = gpt2_find(g->w, t, &r, NULL);
    int64_t total = t->n * t->np;
    char err[NNT_IO_ERRLEN];
    float *buf = malloc((size_t)total * sizeof(float) + 1);
    float *tmp = malloc((size_t)total * sizeof(float) + 1);
    int rc = buf && tmp ? NNT_OK : nnt_fail(model->ctx, NNT_E_NOMEM, "%s: out of memory", fn);
    if (rc == 0 && (rc = nnt_st_read(r, e, NNT_IO_F32, 0, (uint64_t)total,
                                     t->in ? tmp : buf, err, sizeof err)))
        rc = nnt_fail(model->ctx, rc, "%s: %s", fn, err);
    if (rc == 0 && t->in)   /* Conv1D (in, out) -> nnt (out, in) */
        transpose(tmp, buf, t->in, total / t->in);
    for (int i = 0; i < t->np && rc == 0; i++)
        rc = nnt_tensor_copy_from_host(t->p[i].value, buf + i * t->n,
                                       (size_t)t->n * sizeof(float));
    free(buf);
    free(tmp);
    return rc;
}

/* A GPT-2 model from the weights w (what: their file or index); see nnt_model_load_gpt2_st. */
static int gpt2_load(nnt_ctx *ctx, const char *fn, const nnt_hf_weights *w, const char *what,
                     const nnt_model_config *cfg, int64_t B, int64_t T,
                     const nnt_tiling *tiling, int tree, nnt_layer **out)
{
    nnt_layer *model = NULL;
    gpt2_reading g = {w, what};
    int rc = tree ? nnt_model_build_tree(ctx, fn, cfg, B, T, tiling, &model)
                  : nnt_model_build(ctx, fn, cfg, B, T, tiling, &model);
    if (rc == 0)
        rc = gpt2_each(model, fn, gpt2_check, &g);
    if (rc == 0)
        rc = gpt2_each(model, fn, gpt2_fill, &g);
    if (rc) {
        nnt_layer_destroy(model);
        return rc;
    }
    *out = model;
    return NNT_OK;
}

int nnt_model_load_gpt2_st(nnt_ctx *ctx, const char *fn, const char *path,
                           const nnt_model_config *cfg, int64_t B, int64_t T,
                           const nnt_tiling *tiling, int tree, nnt_layer **out)
{
    nnt_hf_weights *w = NULL;
    NNT_TRY(nnt_hf_weights_open_file(ctx, fn, path, &w));
    int rc = gpt2_load(ctx, fn, w, path, cfg, B, T, tiling, tree, out);
    nnt_hf_weights_close(w);
    return rc;
}

/* nnt_model_load_hf (tree 0: GPT-2 as the GPT layer) or nnt_model_load_hf_tree. */
static int load_hf(nnt_ctx *ctx, const char *fn, const char *dir, int64_t B, int64_t T,
                   const nnt_tiling *tiling, int tree, nnt_layer **out)
{
    if (!out)
        return nnt_fail(ctx, NNT_E_INVAL, "%s: out is NULL", fn);
    *out = NULL;
    NNT_TRY(nnt_ctx_check(ctx, fn));
    if (!dir)
        return nnt_fail(ctx, NNT_E_INVAL, "%s: dir is NULL", fn);
    nnt_model_config cfg;
    nnt_hf_weights *w = NULL;
    NNT_TRY(hf_config(ctx, fn, dir, &cfg));
    NNT_TRY(nnt_hf_weights_open(ctx, fn, dir, &w));
    const char *what = nnt_hf_weights_source(w);   /* a missing tensor's messages name it */
    int rc = cfg.family == NNT_FAMILY_GPT2
                 ? gpt2_load(ctx, fn, w, what, &cfg, B, T, tiling, tree, out)
                 : llama_load(ctx, fn, w, what, &cfg, B, T, tiling, out);
    nnt_hf_weights_close(w);
    return rc;
}

NNT_API int nnt_model_load_hf(nnt_ctx *ctx, const char *dir, int64_t B, int64_t T,
                              const nnt_tiling *tiling, nnt_layer **out)
{
    return load_hf(ctx, "nnt_model_load_hf", dir, B, T, tiling, 0, out);
}

int nnt_model_load_hf_tree(nnt_ctx *ctx, const char *dir, int64_t B, int64_t T,
                           const nnt_tiling *tiling, nnt_layer **out)
{
    return load_hf(ctx, "nnt_model_load_hf_tree", dir, B, T, tiling, 1, out);
}

/* ---- saving --------------------------------------------------------------------------- */

/* A growing JSON text. */
typedef struct jtext {
    char *buf;
    size_t len, cap;
    int oom;
} jtext;

static void jt_add(jtext *t, const char *fmt, ...) NNT_PRINTF(2, 3);

static void jt_add(jtext *t, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (t->oom || n < 0)
        return;
    if (t->len + (size_t)n + 1 > t->cap) {
        size_t cap = 2 * (t->len + (size_t)n + 1);
        char *b = realloc(t->buf, cap);
        if (!b) {
            t->oom = 1;
            return;
        }
        t->buf = b;
        t->cap = cap;
    }
    va_start(ap, fmt);
    vsnprintf(t->buf + t->len, t->cap - t->len, fmt, ap);
    va_end(ap);
    t->len += (size_t)n;
}

/* v as a JSON float that reads back as v: integral values as "10000.0", others in the
 * shortest %g form (with a '.' whatever the locale). */
static void double_text(double v, char *s, size_t size)
{
    if (v == floor(v) && fabs(v) < 1e15) {
        snprintf(s, size, "%.1f", v);
    } else {
        for (int prec = 1; prec <= 17; prec++) {
            snprintf(s, size, "%.*g", prec, v);
            if (span_double(s, strlen(s)) == v)
                break;
        }
    }
    char point = localeconv()->decimal_point[0];
    for (char *p = s; *p; p++)
        if (*p == point)
            *p = '.';
}

static void jt_double(jtext *t, const char *key, double v)
{
    char s[40];
    double_text(v, s, sizeof s);
    jt_add(t, ",\n  \"%s\": %s", key, s);
}

static void jt_int(jtext *t, const char *key, int64_t v)
{
    jt_add(t, ",\n  \"%s\": %lld", key, (long long)v);
}

static void jt_bool(jtext *t, const char *key, int v)
{
    jt_add(t, ",\n  \"%s\": %s", key, v ? "true" : "false");
}

static void jt_head(jtext *t, int arch)
{
    jt_add(t, "{\n  \"architectures\": [\"%s\"],\n  \"model_type\": \"%s\"", ARCH_NAMES[arch],
           MODEL_TYPES[arch]);
}

static void gpt2_json(jtext *t, const nnt_model_config *c)
{
    jt_head(t, ARCH_GPT2);
    jt_int(t, "vocab_size", c->vocab);
    jt_int(t, "n_positions", c->max_seq);
    jt_int(t, "n_embd", c->channels);
    jt_int(t, "n_layer", c->layers);
    jt_int(t, "n_head", c->heads);
    jt_add(t, ",\n  \"n_inner\": null,\n  \"activation_function\": \"gelu_new\"");
    jt_double(t, "layer_norm_epsilon", c->norm_eps);
    jt_double(t, "resid_pdrop", 0.0);
    jt_double(t, "embd_pdrop", 0.0);
    jt_double(t, "attn_pdrop", 0.0);
    jt_bool(t, "tie_word_embeddings", 1);
    /* GPT2Config's default bos/eos 50256 (<|endoftext|>) only where the vocabulary has it */
    if (c->vocab > 50256)
        jt_add(t, ",\n  \"bos_token_id\": 50256,\n  \"eos_token_id\": 50256");
    else
        jt_add(t, ",\n  \"bos_token_id\": null,\n  \"eos_token_id\": null");
}

static void rope_json(jtext *t, const nnt_rope_options *r)
{
    jt_double(t, "rope_theta", r->theta);
    if (r->scaling != NNT_ROPE_SCALING_LLAMA3) {
        jt_add(t, ",\n  \"rope_scaling\": null");
        return;
    }
    char f[40], lo[40], hi[40];
    double_text(r->factor, f, sizeof f);
    double_text(r->low_freq_factor, lo, sizeof lo);
    double_text(r->high_freq_factor, hi, sizeof hi);
    jt_add(t, ",\n  \"rope_scaling\": {\"rope_type\": \"llama3\", \"factor\": %s, "
           "\"low_freq_factor\": %s, \"high_freq_factor\": %s, "
           "\"original_max_position_embeddings\": %lld}", f, lo, hi,
           (long long)r->original_max_position);
}

/* Llama (q, k, v, o biases all or none), Qwen2 (q, k, v biases, no o or MLP bias) or Qwen3
 * (q/k norms; q, k, v, o biases all or none, no MLP bias). */
static int llama_arch(nnt_ctx *ctx, const char *fn, const nnt_model_config *c)
{
    if (!c->qk_norm && c->qkv_bias == c->out_bias)
        return ARCH_LLAMA;
    if (!c->qk_norm && c->qkv_bias && !c->mlp_bias)
        return ARCH_QWEN2;
    if (c->qk_norm && c->qkv_bias == c->out_bias && !c->mlp_bias)
        return ARCH_QWEN3;
    return nnt_fail(ctx, NNT_E_UNSUPPORTED, "%s: no Hugging Face architecture has qkv_bias=%d, "
                    "out_bias=%d, mlp_bias=%d, qk_norm=%d (LlamaForCausalLM: qkv_bias = "
                    "out_bias, qk_norm 0; Qwen2ForCausalLM: qkv_bias 1, out_bias 0, mlp_bias 0, "
                    "qk_norm 0; Qwen3ForCausalLM: qk_norm 1, qkv_bias = out_bias, mlp_bias 0)",
                    fn, c->qkv_bias, c->out_bias, c->mlp_bias, c->qk_norm);
}

static void llama_json(jtext *t, int arch, const nnt_model_config *c)
{
    jt_head(t, arch);
    jt_int(t, "vocab_size", c->vocab);
    jt_int(t, "hidden_size", c->channels);
    jt_int(t, "intermediate_size", c->hidden);
    jt_int(t, "num_hidden_layers", c->layers);
    jt_int(t, "num_attention_heads", c->heads);
    jt_int(t, "num_key_value_heads", c->kv_heads ? c->kv_heads : c->heads);
    jt_int(t, "head_dim", c->head_dim ? c->head_dim : c->channels / c->heads);
    jt_int(t, "max_position_embeddings", c->max_seq);
    jt_double(t, "rms_norm_eps", c->norm_eps);
    jt_add(t, ",\n  \"hidden_act\": \"silu\"");
    jt_bool(t, "tie_word_embeddings", c->tied);
    if (arch != ARCH_QWEN2)
        jt_bool(t, "attention_bias", c->qkv_bias);
    if (arch == ARCH_LLAMA)
        jt_bool(t, "mlp_bias", c->mlp_bias);
    else
        jt_bool(t, "use_sliding_window", 0);
    jt_double(t, "attention_dropout", 0.0);
    rope_json(t, &c->rope);
}

static int write_text(nnt_ctx *ctx, const char *fn, const char *path, const jtext *t)
{
    char err[NNT_IO_ERRLEN];
    nnt_io_out *o = NULL;
    int rc = nnt_io_out_begin(path, &o, err, sizeof err);
    if (rc == 0)
        rc = nnt_io_out_write(o, t->buf, t->len, err, sizeof err);
    if (rc == 0) {
        rc = nnt_io_out_commit(o, err, sizeof err);   /* frees o */
        o = NULL;
    }
    nnt_io_out_abort(o);
    return rc ? nnt_fail(ctx, rc, "%s: %s", fn, err) : NNT_OK;
}

/* The config.json text of c (malloc'd, NUL-terminated) in *out; errors name fn. */
int nnt_model_config_text(nnt_ctx *ctx, const char *fn, const nnt_model_config *c, char **out)
{
    int arch = ARCH_GPT2;
    *out = NULL;
    if (c->family == NNT_FAMILY_LLAMA) {
        arch = llama_arch(ctx, fn, c);
        if (arch < 0)
            return arch;
    }
    jtext t = {NULL, 0, 0, 0};
    if (arch == ARCH_GPT2)
        gpt2_json(&t, c);
    else
        llama_json(&t, arch, c);
    jt_add(&t, ",\n  \"torch_dtype\": \"float32\"\n}\n");
    if (t.oom) {
        free(t.buf);
        return nnt_fail(ctx, NNT_E_NOMEM, "%s: out of memory", fn);
    }
    *out = t.buf;
    return NNT_OK;
}

static int save_config(nnt_ctx *ctx, const char *fn, const char *dir, const nnt_model_config *c)
{
    char path[PATH_MAX_BYTES];
    NNT_TRY(join(ctx, fn, dir, "config.json", path));
    char *text = NULL;
    NNT_TRY(nnt_model_config_text(ctx, fn, c, &text));
    jtext t = {text, strlen(text), 0, 0};
    int rc = write_text(ctx, fn, path, &t);
    free(text);
    return rc;
}

/* Declare every parameter under its HF name and shape (s->most: the largest). */
static int declare_params(nnt_layer *model, const char *fn, st_save *s)
{
    (void)fn;
    int64_t count = 0;
    s->io = 0;   /* a library failure: its message is recorded already */
    NNT_TRY(nnt_layer_num_params(model, &count, NULL));
    s->io = 1;
    for (int64_t i = 0; i < count; i++) {
        nnt_param_info p = param_of(model, i);
        int64_t shape[2];
        int nd = p.name ? hf_shape(p.value, p.name, shape) : 0;
        if (nd == 0)
            return nnt_io_errf(s->err, sizeof s->err, NNT_E_INVAL,
                               "parameter %lld unreadable", (long long)i);
        int64_t n = nd == 2 ? shape[0] * shape[1] : shape[0];
        NNT_TRY(st_declare(s, p.name, nd, shape, n));
    }
    return NNT_OK;
}

/* Stream the declared parameters (HF's memory order is nnt's). */
static int stream_params(nnt_layer *model, const char *fn, st_save *s)
{
    (void)fn;
    int64_t count = 0;
    s->io = 0;
    NNT_TRY(nnt_layer_num_params(model, &count, NULL));
    for (int64_t i = 0; i < count; i++) {
        nnt_param_info p = param_of(model, i);
        int64_t n = 0;
        s->io = 0;
        if (!st_mine(s))
            continue;
        NNT_TRY(nnt_tensor_numel(p.value, &n));
        NNT_TRY(nnt_tensor_copy_to_host(p.value, s->buf, (size_t)n * sizeof(float)));
        s->io = 1;
        NNT_TRY(nnt_st_writer_write(s->w, s->buf, (size_t)n * sizeof(float), s->err,
                                    sizeof s->err));
    }
    return NNT_OK;
}

static int make_dir(nnt_ctx *ctx, const char *fn, const char *dir)
{
    struct stat st;
    if (!nnt_io_writes())
        return NNT_OK;   /* rank > 0 of an MPI job: rank 0 creates it */
    if (mkdir(dir, 0755) != 0 && errno != EEXIST)
        return nnt_fail(ctx, NNT_E_IO, "%s: cannot create directory %s: %s", fn, dir,
                        strerror(errno));
    if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode))
        return nnt_fail(ctx, NNT_E_IO, "%s: %s is not a directory", fn, dir);
    return NNT_OK;
}

/* A lib/io or hf_shards failure (message in err) recorded under fn. */
static int io_fail(nnt_ctx *ctx, const char *fn, int rc, const char *err)
{
    return rc ? nnt_fail(ctx, rc, "%s: %s", fn, err) : NNT_OK;
}

/* dir/model.safetensors, then what an earlier sharded save left removed. */
static int save_single(nnt_layer *model, const char *fn, const char *dir, st_pass declare,
                       st_pass stream)
{
    char path[PATH_MAX_BYTES], err[NNT_IO_ERRLEN];
    NNT_TRY(join(model->ctx, fn, dir, NNT_HF_SINGLE, path));
    NNT_TRY(save_st(model, fn, path, declare, stream));
    return io_fail(model->ctx, fn, nnt_hf_remove_stale(dir, 0, err, sizeof err), err);
}

/* The shards of plan (split), then the index, then what an earlier save left removed. The
 * old index goes first: a save interrupted midway leaves shards without an index (which
 * does not load) rather than an index over a mix of old and new shards. */
static int save_sharded(nnt_layer *model, const char *fn, const char *dir, st_pass declare,
                        st_pass stream, const nnt_hf_plan *plan)
{
    char path[PATH_MAX_BYTES], err[NNT_IO_ERRLEN], name[64];
    NNT_TRY(io_fail(model->ctx, fn, nnt_hf_remove_index(dir, err, sizeof err), err));
    size_t lo = 0;
    for (int k = 0; k < plan->nshards; k++) {
        size_t hi = lo;
        while (hi < plan->n && plan->shard[hi] == k)
            hi++;
        nnt_hf_shard_name(k, plan->nshards, name, sizeof name);
        NNT_TRY(join(model->ctx, fn, dir, name, path));
        NNT_TRY(save_st_range(model, fn, path, declare, stream, (int64_t)lo, (int64_t)hi));
        lo = hi;
    }
    NNT_TRY(join(model->ctx, fn, dir, NNT_HF_INDEX, path));
    NNT_TRY(io_fail(model->ctx, fn, nnt_hf_index_write(plan, path, err, sizeof err), err));
    return io_fail(model->ctx, fn, nnt_hf_remove_stale(dir, plan->nshards, err, sizeof err),
                   err);
}

/* The weights: one file (max_bytes 0, or all fit), else shards of <= max_bytes of data. */
static int save_weights(nnt_layer *model, const char *fn, const char *dir,
                        const nnt_model_config *cfg, uint64_t max_bytes)
{
    st_pass declare = cfg->family == NNT_FAMILY_LLAMA ? declare_params : gpt2_declare_all;
    st_pass stream = cfg->family == NNT_FAMILY_LLAMA ? stream_params : gpt2_stream_all;
    if (max_bytes == 0)
        return save_single(model, fn, dir, declare, stream);
    char err[NNT_IO_ERRLEN];
    nnt_hf_plan plan;
    memset(&plan, 0, sizeof plan);
    int rc = plan_tensors(model, fn, declare, &plan);
    if (rc == 0)
        rc = io_fail(model->ctx, fn, nnt_hf_plan_split(&plan, max_bytes, err, sizeof err), err);
    if (rc == 0)
        rc = plan.nshards == 1 ? save_single(model, fn, dir, declare, stream)
                               : save_sharded(model, fn, dir, declare, stream, &plan);
    nnt_hf_plan_free(&plan);
    return rc;
}

static int save_hf(nnt_layer *model, const char *fn, const char *dir,
                   const nnt_hf_save_options *opts)
{
    nnt_model_config cfg;
    NNT_TRY(nnt_model_config_get(model, fn, &cfg));
    if (!dir)
        return nnt_fail(model->ctx, NNT_E_INVAL, "%s: dir is NULL", fn);
    if (opts && opts->size < sizeof(nnt_hf_save_options))
        return nnt_fail(model->ctx, NNT_E_INVAL, "%s: options size %zu is below "
                        "sizeof(nnt_hf_save_options) %zu (use NNT_HF_SAVE_OPTIONS_INIT)", fn,
                        opts->size, sizeof(nnt_hf_save_options));
    int arch = cfg.family == NNT_FAMILY_LLAMA ? llama_arch(model->ctx, fn, &cfg) : ARCH_GPT2;
    if (arch < 0)
        return arch;
    NNT_TRY(make_dir(model->ctx, fn, dir));
    /* the weights first: config.json, written last, says what they are */
    NNT_TRY(save_weights(model, fn, dir, &cfg, opts ? opts->max_shard_bytes : 0));
    return save_config(model->ctx, fn, dir, &cfg);
}

NNT_API int nnt_model_save_hf(nnt_layer *model, const char *dir)
{
    return save_hf(model, "nnt_model_save_hf", dir, NULL);
}

NNT_API int nnt_model_save_hf_ex(nnt_layer *model, const char *dir,
                                 const nnt_hf_save_options *opts)
{
    return save_hf(model, "nnt_model_save_hf_ex", dir, opts);
}
