/* SPDX-License-Identifier: MIT */
/* Hugging Face config.json <-> nnt_model_config for every family: lib/io's JSON reader gives
 * the top-level object as a table of keys and value spans (nnt_cfg_in), which the families'
 * read_hf functions query by key (lib/models/family.h); architectures[0] (else model_type)
 * chooses the family through the table of lib/models/families.c. Writing: "architectures"
 * and "model_type" of the architecture the family saves the configuration as, then the
 * family's keys. The same text is the "model" record of training-state files. */
#include "models.h"
#include "family.h"

#include "../io/io.h"

#include <locale.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define CONFIG_MAX_BYTES (16u << 20)   /* largest config.json read                          */

/* ---- config.json as a table of top-level values ----------------------------------------- */

typedef struct jkey {
    char *name;
    size_t start, end;                 /* the value's bytes in buf                          */
} jkey;

/* One JSON object: its keys and their values' spans. Messages name the file and prefix
 * ("" at the top level, "rope_scaling." inside that object). */
struct nnt_cfg_in {
    nnt_ctx *ctx;
    const char *fn, *file, *prefix;
    const char *buf;
    jkey *keys;
    size_t n, cap;
};

static void jobj_free(nnt_cfg_in *o)
{
    for (size_t i = 0; i < o->n; i++)
        free(o->keys[i].name);
    free(o->keys);
    o->keys = NULL;
    o->n = o->cap = 0;
}

static int jobj_add(nnt_cfg_in *o, char *name, size_t start, size_t end)
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

static const jkey *jobj_find(const nnt_cfg_in *o, const char *name)
{
    for (size_t i = 0; i < o->n; i++)
        if (strcmp(o->keys[i].name, name) == 0)
            return &o->keys[i];
    return NULL;
}

/* One "key": value pair of the object j is in, recorded in o (duplicates refused). */
static int parse_member(nnt_json *j, nnt_cfg_in *o)
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
static int parse_object(nnt_json *j, nnt_cfg_in *o)
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
static int jobj_parse(nnt_cfg_in *o, size_t start, size_t end, int whole)
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

int nnt_cfg_bad_type(const nnt_cfg_in *o, const char *key, const char *want)
{
    return nnt_fail(o->ctx, NNT_E_FORMAT, "%s: %s: %s%s must be %s", o->fn, o->file, o->prefix,
                    key, want);
}

/* The value of key, NULL when absent or null (null counts as absent: HF's defaults). */
static const jkey *jvalue(const nnt_cfg_in *o, const char *key)
{
    const jkey *k = jobj_find(o, key);
    if (k && o->buf[k->start] == 'n')
        return NULL;
    return k;
}

static int missing(const nnt_cfg_in *o, const char *key)
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

static int is_number(const nnt_cfg_in *o, const jkey *k)
{
    char c = o->buf[k->start];
    return c == '-' || (c >= '0' && c <= '9');
}

/* A number; def when absent or null (required: absent is an error). */
int nnt_cfg_double(const nnt_cfg_in *o, const char *key, int required, double def, double *out)
{
    const jkey *k = jvalue(o, key);
    if (!k) {
        *out = def;
        return required ? missing(o, key) : NNT_OK;
    }
    if (!is_number(o, k))
        return nnt_cfg_bad_type(o, key, "a number");
    *out = span_double(o->buf + k->start, k->end - k->start);
    if (!isfinite(*out))
        return nnt_cfg_bad_type(o, key, "a finite number");
    return NNT_OK;
}

/* An integer (a number without fraction or exponent, in [0, 2^53]). */
int nnt_cfg_int(const nnt_cfg_in *o, const char *key, int required, int64_t def, int64_t *out)
{
    const jkey *k = jvalue(o, key);
    if (!k) {
        *out = def;
        return required ? missing(o, key) : NNT_OK;
    }
    for (size_t i = k->start; i < k->end; i++)
        if (o->buf[i] < '0' || o->buf[i] > '9' || k->end - k->start > 16)
            return nnt_cfg_bad_type(o, key, "a non-negative integer");
    *out = (int64_t)span_double(o->buf + k->start, k->end - k->start);
    return NNT_OK;
}

/* Integers below 2^31, as a list or (one_ok) one alone; what names them in messages. */
static int int_list(const nnt_cfg_in *o, const char *key, int one_ok, const char *what,
                    int32_t *ids, int64_t cap, int64_t *n)
{
    *n = 0;
    const jkey *k = jvalue(o, key);
    if (!k)
        return NNT_OK;
    char err[NNT_IO_ERRLEN];
    nnt_json j;
    nnt_json_init(&j, o->buf + k->start, k->end - k->start, k->start, o->file, err, sizeof err);
    int list = o->buf[k->start] == '[', rc = list ? nnt_json_expect(&j, '[', key) : NNT_OK;
    if (!list && !one_ok)
        return nnt_cfg_bad_type(o, key, what);
    for (int first = 1; rc == 0 && (!list || nnt_json_peek(&j) != ']'); first = 0) {
        uint64_t v = 0;
        if (!first && list)
            rc = nnt_json_expect(&j, ',', key);
        if (rc == 0 && (nnt_json_peek(&j) < '0' || nnt_json_peek(&j) > '9'))
            return nnt_cfg_bad_type(o, key, what);
        if (rc == 0 && (rc = nnt_json_u64(&j, &v, key)) == 0 && v > INT32_MAX)
            return nnt_cfg_bad_type(o, key, what);
        if (rc == 0 && *n < cap)
            ids[*n] = (int32_t)v;
        if (rc == 0)
            ++*n;
        if (!list)
            break;
    }
    if (rc == 0 && list)
        rc = nnt_json_expect(&j, ']', key);
    if (rc == 0 && nnt_json_peek(&j) != -1)   /* 2.5, 1e3: not an integer */
        return nnt_cfg_bad_type(o, key, what);
    return rc ? nnt_fail(o->ctx, rc, "%s: %s", o->fn, err) : NNT_OK;
}

/* Token ids: an integer or a list of them (absent, null or []: none), each in [0, 2^31): the
 * first cap into ids, their number in *n. */
int nnt_cfg_ids(const nnt_cfg_in *o, const char *key, int32_t *ids, int64_t cap, int64_t *n)
{
    return int_list(o, key, 1, "a token id or a list of them (below 2^31)", ids, cap, n);
}

int nnt_cfg_int_list(const nnt_cfg_in *o, const char *key, const char *what, int32_t *vals,
                     int64_t cap, int64_t *n)
{
    return int_list(o, key, 0, what, vals, cap, n);
}

int nnt_cfg_float_list(const nnt_cfg_in *o, const char *key, float *vals, int64_t cap,
                       int64_t *n)
{
    *n = 0;
    const jkey *k = jvalue(o, key);
    if (!k)
        return NNT_OK;
    if (o->buf[k->start] != '[')
        return nnt_cfg_bad_type(o, key, "a list of numbers");
    char err[NNT_IO_ERRLEN];
    nnt_json j;
    nnt_json_init(&j, o->buf + k->start, k->end - k->start, k->start, o->file, err, sizeof err);
    int rc = nnt_json_expect(&j, '[', key);
    for (int first = 1; rc == 0 && nnt_json_peek(&j) != ']'; first = 0) {
        if (!first && (rc = nnt_json_expect(&j, ',', key)))
            break;
        int c = nnt_json_peek(&j);
        if (c != '-' && (c < '0' || c > '9'))
            return nnt_cfg_bad_type(o, key, "a list of numbers");
        size_t start = j.pos;
        if ((rc = nnt_json_skip(&j, 1, key)))
            break;
        if (*n < cap)
            vals[*n] = (float)span_double(j.buf + start, j.pos - start);
        ++*n;
    }
    if (rc == 0)
        rc = nnt_json_expect(&j, ']', key);
    return rc ? nnt_fail(o->ctx, rc, "%s: %s", o->fn, err) : NNT_OK;
}

int nnt_cfg_bool(const nnt_cfg_in *o, const char *key, int def, int *out)
{
    const jkey *k = jvalue(o, key);
    *out = def;
    if (!k)
        return NNT_OK;
    if (o->buf[k->start] != 't' && o->buf[k->start] != 'f')
        return nnt_cfg_bad_type(o, key, "true or false");
    *out = o->buf[k->start] == 't';
    return NNT_OK;
}

/* A string (malloc'd into *out, NULL when absent or null). */
static int get_string(const nnt_cfg_in *o, const char *key, char **out)
{
    *out = NULL;
    const jkey *k = jvalue(o, key);
    if (!k)
        return NNT_OK;
    if (o->buf[k->start] != '"')
        return nnt_cfg_bad_type(o, key, "a string");
    char err[NNT_IO_ERRLEN];
    nnt_json j;
    nnt_json_init(&j, o->buf + k->start, k->end - k->start, k->start, o->file, err, sizeof err);
    int rc = nnt_json_string(&j, out, NULL, NNT_IO_MAXNAME, 0, key);
    return rc ? nnt_fail(o->ctx, rc, "%s: %s", o->fn, err) : NNT_OK;
}

/* The sub-object under key into sub (absent or null: sub->n == 0, *present 0). */
static int get_object(const nnt_cfg_in *o, const char *key, const char *prefix, nnt_cfg_in *sub,
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
        return nnt_cfg_bad_type(o, key, "an object or null");
    return jobj_parse(sub, k->start, k->end, 0);
}

int nnt_cfg_unsupported(const nnt_cfg_in *o, const char *key, const char *value, const char *valid)
{
    return nnt_fail(o->ctx, NNT_E_UNSUPPORTED, "%s: %s: %s%s %s is not supported (%s)", o->fn,
                    o->file, o->prefix, key, value, valid);
}

int nnt_cfg_sizes(const nnt_cfg_in *o, const nnt_cfg_defaults *d, nnt_model_config *c)
{
    int act = 0;
    NNT_TRY(nnt_cfg_int(o, "vocab_size", 0, d->vocab, &c->vocab));
    NNT_TRY(nnt_cfg_int(o, "hidden_size", 0, d->channels, &c->channels));
    NNT_TRY(nnt_cfg_int(o, "intermediate_size", 0, d->hidden, &c->hidden));
    NNT_TRY(nnt_cfg_int(o, "num_hidden_layers", 0, d->layers, &c->layers));
    NNT_TRY(nnt_cfg_int(o, "num_attention_heads", 0, d->heads, &c->heads));
    NNT_TRY(nnt_cfg_int(o, "num_key_value_heads", 0, d->kv_heads ? d->kv_heads : c->heads,
                        &c->kv_heads));
    NNT_TRY(nnt_cfg_int(o, "max_position_embeddings", 0, d->max_seq, &c->max_seq));
    NNT_TRY(nnt_cfg_double(o, d->eps_key, 0, d->eps, &c->norm_eps));
    NNT_TRY(nnt_cfg_bool(o, "tie_word_embeddings", 0, &c->tied));
    NNT_TRY(nnt_cfg_choice(o, "hidden_act", d->acts[0], d->acts, d->nacts, &act));
    c->mlp_gelu = d->gelus ? d->gelus[act] : 0;
    c->head_dim = 0;
    if (!d->head_dim)
        return NNT_OK;
    NNT_TRY(nnt_cfg_int(o, "head_dim", 0, 0, &c->head_dim));
    if (nnt_cfg_has(o, "head_dim") && c->head_dim < 1)
        return nnt_cfg_bad_type(o, "head_dim", "a positive integer");
    return NNT_OK;
}

int nnt_cfg_gpt2_sizes(const nnt_cfg_in *o, int required, const nnt_cfg_defaults *d,
                       nnt_model_config *c)
{
    int act = 0;
    NNT_TRY(nnt_cfg_int(o, "vocab_size", required, d->vocab, &c->vocab));
    NNT_TRY(nnt_cfg_int(o, "n_positions", required, d->max_seq, &c->max_seq));
    NNT_TRY(nnt_cfg_int(o, "n_embd", required, d->channels, &c->channels));
    NNT_TRY(nnt_cfg_int(o, "n_layer", required, d->layers, &c->layers));
    NNT_TRY(nnt_cfg_int(o, "n_head", required, d->heads, &c->heads));
    NNT_TRY(nnt_cfg_int(o, "n_inner", 0, 4 * c->channels, &c->hidden));
    NNT_TRY(nnt_cfg_double(o, "layer_norm_epsilon", 0, d->eps, &c->norm_eps));
    NNT_TRY(nnt_cfg_choice(o, "activation_function", d->acts[0], d->acts, d->nacts, &act));
    NNT_TRY(nnt_cfg_bool(o, "tie_word_embeddings", 1, &c->tied));
    c->mlp_gelu = d->gelus ? d->gelus[act] : 0;
    c->head_dim = 0;
    return NNT_OK;
}

int nnt_cfg_rope_partial(const nnt_cfg_in *o, double theta, int64_t max_position,
                         double partial, nnt_rope_options *rope)
{
    nnt_cfg_in *obj = NULL;
    NNT_TRY(nnt_cfg_rope(o, theta, max_position, rope));
    int given = nnt_cfg_has(o, "partial_rotary_factor");
    NNT_TRY(nnt_cfg_sub(o, "rope_scaling", &obj));
    if (!obj || nnt_cfg_count(obj) == 0) {
        nnt_cfg_sub_free(obj);
        NNT_TRY(nnt_cfg_sub(o, "rope_parameters", &obj));
    }
    given = given || (obj && nnt_cfg_has(obj, "partial_rotary_factor"));
    nnt_cfg_sub_free(obj);
    if (!given)
        rope->partial_rotary_factor = partial;
    return NNT_OK;
}

void nnt_cfg_put_partial(nnt_cfg_out *t, const nnt_rope_options *r)
{
    if (r->partial_rotary_factor == 0.0 || r->partial_rotary_factor == 1.0)
        nnt_cfg_put_double(t, "partial_rotary_factor", 1.0);
}

void nnt_cfg_put_gelu(nnt_cfg_out *t, const nnt_model_config *c, const char *tanh_act)
{
    nnt_cfg_add(t, ",\n  \"hidden_act\": \"%s\"",
                nnt_model_mlp_kind(c) == NNT_MLP_GELU_ERF ? "gelu" : tanh_act);
}

int nnt_cfg_dropouts(const nnt_cfg_in *o, const char *const *keys, int n)
{
    for (int i = 0; i < n; i++) {
        double p = 0.0;
        NNT_TRY(nnt_cfg_double(o, keys[i], 0, 0.0, &p));
        if (!(p >= 0.0 && p < 1.0))
            return nnt_cfg_bad_type(o, keys[i], "a probability in [0, 1)");
        if (p != 0.0)
            nnt_log(NNT_LOG_WARN, "%s: %s: %s%s %g is not applied: nnt trains without dropout",
                    o->fn, o->file, o->prefix, keys[i], p);
    }
    return NNT_OK;
}

/* valid[0..n) as "a, b, c" into out. */
static void list_text(const char *const *valid, int n, char *out, size_t size)
{
    size_t len = 0;
    out[0] = '\0';
    for (int i = 0; i < n && len < size; i++)
        len += (size_t)snprintf(out + len, size - len, "%s%s", i ? ", " : "", valid[i]);
}

int nnt_cfg_choice(const nnt_cfg_in *o, const char *key, const char *def,
                   const char *const *valid, int nvalid, int *which)
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
    char quoted[NNT_IO_MAXNAME + 8], list[512];
    snprintf(quoted, sizeof quoted, "\"%s\"", v);
    free(s);
    list_text(valid, nvalid, list, sizeof list);
    return nnt_cfg_unsupported(o, key, quoted, list);
}

int nnt_cfg_has(const nnt_cfg_in *o, const char *key)
{
    return jvalue(o, key) != NULL;
}

void nnt_cfg_text(const nnt_cfg_in *o, const char *key, char *out, size_t size)
{
    const jkey *k = jobj_find(o, key);
    size_t n = k ? k->end - k->start : 0;
    if (n >= size)
        n = size - 1;
    memcpy(out, k ? o->buf + k->start : "", n);
    out[n] = '\0';
}

/* How a configuration class reads its rope objects: max_position_embeddings; original > 0:
 * every scaling's original_max_position_embeddings (Phi3Config's attribute, which replaces
 * the object's); longrope_aliases: "su" and "yarn" are longrope (Phi3Config). */
typedef struct rope_rules {
    int64_t max_position, original;
    int longrope_aliases;
} rope_rules;

/* original_max_position_embeddings of a rope object; absent: the model's
 * max_position_embeddings (transformers' standardize_rope_params) */
static int original_max(const nnt_cfg_in *r, const rope_rules *u, nnt_rope_options *rope)
{
    if (u->original > 0) {
        rope->original_max_position = u->original;
        return NNT_OK;
    }
    return nnt_cfg_int(r, "original_max_position_embeddings", 0, u->max_position,
                       &rope->original_max_position);
}

/* The llama3 fields of a rope object (rope_scaling or rope_parameters). */
static int llama3_fields(const nnt_cfg_in *r, const rope_rules *u, nnt_rope_options *rope)
{
    rope->scaling = NNT_ROPE_SCALING_LLAMA3;
    NNT_TRY(nnt_cfg_double(r, "factor", 1, 0, &rope->factor));
    NNT_TRY(nnt_cfg_double(r, "low_freq_factor", 1, 0, &rope->low_freq_factor));
    NNT_TRY(nnt_cfg_double(r, "high_freq_factor", 1, 0, &rope->high_freq_factor));
    return original_max(r, u, rope);
}

/* transformers' get_mscale */
static double yarn_mscale(double factor, double mscale)
{
    return factor <= 1.0 ? 1.0 : 0.1 * mscale * log(factor) + 1.0;
}

/* YaRN's keys as transformers 5.24's _compute_yarn_parameters reads them: factor required,
 * original_max_position_embeddings, beta_fast (null or 0: 32), beta_slow (null or 0: 1),
 * truncate (true), attention_factor, else mscale / mscale_all_dim's ratio when both are
 * non-zero, else the default of factor (attention_factor 0). */
static int yarn_fields(const nnt_cfg_in *r, const rope_rules *u, nnt_rope_options *rope)
{
    double mscale = 0.0, mscale_all = 0.0;
    rope->scaling = NNT_ROPE_SCALING_YARN;
    NNT_TRY(nnt_cfg_double(r, "factor", 1, 0, &rope->factor));
    NNT_TRY(original_max(r, u, rope));
    NNT_TRY(nnt_cfg_double(r, "beta_fast", 0, 32.0, &rope->beta_fast));
    NNT_TRY(nnt_cfg_double(r, "beta_slow", 0, 1.0, &rope->beta_slow));
    if (rope->beta_fast == 0.0)
        rope->beta_fast = 32.0;
    if (rope->beta_slow == 0.0)
        rope->beta_slow = 1.0;
    NNT_TRY(nnt_cfg_bool(r, "truncate", 1, &rope->truncate));
    NNT_TRY(nnt_cfg_double(r, "attention_factor", 0, 0.0, &rope->attention_factor));
    NNT_TRY(nnt_cfg_double(r, "mscale", 0, 0.0, &mscale));
    NNT_TRY(nnt_cfg_double(r, "mscale_all_dim", 0, 0.0, &mscale_all));
    if (!nnt_cfg_has(r, "attention_factor") && mscale != 0.0 && mscale_all != 0.0)
        rope->attention_factor = yarn_mscale(rope->factor, mscale) /
                                 yarn_mscale(rope->factor, mscale_all);
    return NNT_OK;
}

/* One factor list of longrope: as many as the other, at most NNT_ROPE_MAX_FACTORS */
static int longrope_list(const nnt_cfg_in *r, const char *key, float *vals, int64_t *n)
{
    if (!nnt_cfg_has(r, key))
        return nnt_cfg_bad_type(r, key, "a list of numbers (required by longrope)");
    NNT_TRY(nnt_cfg_float_list(r, key, vals, NNT_ROPE_MAX_FACTORS, n));
    if (*n < 1 || *n > NNT_ROPE_MAX_FACTORS)
        return nnt_cfg_bad_type(r, key, "a list of 1 to 256 numbers");
    return NNT_OK;
}

/* LongRoPE's keys (transformers 5.24's _compute_longrope_parameters): short_factor and
 * long_factor lists, original_max_position_embeddings, factor (absent:
 * max_position_embeddings / original_max_position_embeddings), attention_factor (absent:
 * from factor). */
static int longrope_fields(const nnt_cfg_in *r, const rope_rules *u, nnt_rope_options *rope)
{
    int64_t nlong = 0;
    rope->scaling = NNT_ROPE_SCALING_LONGROPE;
    NNT_TRY(longrope_list(r, "short_factor", rope->short_factor, &rope->nfactors));
    NNT_TRY(longrope_list(r, "long_factor", rope->long_factor, &nlong));
    if (nlong != rope->nfactors)
        return nnt_cfg_bad_type(r, "long_factor", "a list as long as short_factor");
    NNT_TRY(original_max(r, u, rope));
    if (rope->original_max_position < 1)
        return nnt_cfg_bad_type(r, "original_max_position_embeddings", "a positive integer");
    NNT_TRY(nnt_cfg_double(r, "factor", 0,
                           (double)u->max_position / (double)rope->original_max_position,
                           &rope->factor));
    return nnt_cfg_double(r, "attention_factor", 0, 0.0, &rope->attention_factor);
}

/* rope_type (or the older "type") of a rope object: default, llama3, linear (factor), yarn
 * or longrope; with longrope_aliases "su" and "yarn" are longrope (Phi3Config's reading). */
static int rope_type(const nnt_cfg_in *r, const rope_rules *u, nnt_rope_options *rope)
{
    enum { DEFAULT, LLAMA3, LINEAR, YARN, LONGROPE, SU };
    static const char *const types[6] = {"default", "llama3", "linear", "yarn", "longrope",
                                         "su"};
    const char *key = jvalue(r, "rope_type") || !jvalue(r, "type") ? "rope_type" : "type";
    int which = 0;
    NNT_TRY(nnt_cfg_choice(r, key, "default", types, u->longrope_aliases ? 6 : 5, &which));
    NNT_TRY(nnt_cfg_double(r, "partial_rotary_factor", 0, rope->partial_rotary_factor,
                           &rope->partial_rotary_factor));
    if (u->longrope_aliases && (which == YARN || which == SU))
        which = LONGROPE;
    switch (which) {
    case LINEAR:
        rope->scaling = NNT_ROPE_SCALING_LINEAR;
        return nnt_cfg_double(r, "factor", 1, 0, &rope->factor);
    case YARN:
        return yarn_fields(r, u, rope);
    case LONGROPE:
        return longrope_fields(r, u, rope);
    case LLAMA3:
        return llama3_fields(r, u, rope);
    default:
        return NNT_OK;
    }
}

int nnt_cfg_rope_in(const nnt_cfg_in *r, double theta, int64_t max_position,
                    nnt_rope_options *rope)
{
    rope_rules u = {max_position, 0, 0};
    NNT_TRY(nnt_cfg_double(r, "rope_theta", 0, theta, &rope->theta));
    return rope_type(r, &u, rope);
}

int nnt_cfg_windows(const nnt_cfg_in *o, const char *pattern_key, int64_t every,
                    nnt_model_config *c)
{
    char v[8];
    nnt_cfg_text(o, "sliding_window", v, sizeof v);
    if (strcmp(v, "null") == 0)
        c->sliding_window = 0;
    else
        NNT_TRY(nnt_cfg_int(o, "sliding_window", 0, 4096, &c->sliding_window));
    if (nnt_cfg_has(o, "sliding_window") && c->sliding_window < 1)
        return nnt_cfg_bad_type(o, "sliding_window", "a positive integer or null");
    c->window_from = 0;
    c->window_global_every = every;
    memset(c->window_full_layers, 0, sizeof c->window_full_layers);
    if (pattern_key)
        NNT_TRY(nnt_cfg_int(o, pattern_key, 0, every, &c->window_global_every));
    if (c->window_global_every < 1)
        return nnt_cfg_bad_type(o, pattern_key ? pattern_key : "layer_types",
                                "a positive integer");
    if (c->sliding_window)
        NNT_TRY(nnt_cfg_layer_types(o, 1, c));
    if (c->window_global_every == 1)   /* every layer global */
        c->sliding_window = 0;
    return NNT_OK;
}

int nnt_cfg_rope_by_layer_type(const nnt_cfg_in *o, double theta, const char *local_key,
                               double local_theta, nnt_model_config *c)
{
    nnt_cfg_in *params = NULL, *full = NULL, *local = NULL;
    nnt_rope_options lr = NNT_ROPE_OPTIONS_INIT;
    int rc = nnt_cfg_sub(o, "rope_parameters", &params);
    if (rc == 0)
        rc = nnt_cfg_double(o, "partial_rotary_factor", 0, 1.0, &lr.partial_rotary_factor);
    c->rope.partial_rotary_factor = lr.partial_rotary_factor;
    if (rc == 0 && params && nnt_cfg_has(params, "full_attention")) {
        rc = nnt_cfg_sub(params, "full_attention", &full);
        if (rc == 0)
            rc = nnt_cfg_rope_in(full, theta, c->max_seq, &c->rope);
        /* transformers 5.24's YaRN reads truncate from the top of rope_parameters, where
         * these have none: always true, whatever the full_attention object says */
        c->rope.truncate = 1;
        if (rc == 0)
            rc = nnt_cfg_sub(params, "sliding_attention", &local);
        if (rc == 0 && local)
            rc = nnt_cfg_rope_in(local, local_theta, c->max_seq, &lr);
        else
            lr.theta = local_theta;
        if (rc == 0 && lr.scaling != NNT_ROPE_SCALING_NONE)
            rc = nnt_cfg_unsupported(params, "sliding_attention.rope_type", "(a scaling)",
                                     "\"default\" on the sliding layers");
        if (rc == 0 && lr.partial_rotary_factor != c->rope.partial_rotary_factor)
            rc = nnt_cfg_unsupported(params, "sliding_attention.partial_rotary_factor",
                                     "(other than full_attention's)",
                                     "the same rotary dimension on every layer");
        c->rope_local_theta = lr.theta;
    } else if (rc == 0) {
        rc = nnt_cfg_rope(o, theta, c->max_seq, &c->rope);
        c->rope_local_theta = c->rope.theta;
        if (rc == 0 && local_key)
            rc = nnt_cfg_double(o, local_key, 0, local_theta, &c->rope_local_theta);
    }
    nnt_cfg_sub_free(params);
    nnt_cfg_sub_free(full);
    nnt_cfg_sub_free(local);
    return rc;
}

int nnt_cfg_sub(const nnt_cfg_in *o, const char *key, nnt_cfg_in **sub)
{
    *sub = NULL;
    char *prefix = malloc(strlen(o->prefix) + strlen(key) + 2);
    nnt_cfg_in *r = malloc(sizeof *r);
    int present = 0, rc = prefix && r ? NNT_OK
                                      : nnt_fail(o->ctx, NNT_E_NOMEM, "%s: out of memory", o->fn);
    if (rc == 0) {
        sprintf(prefix, "%s%s.", o->prefix, key);
        rc = get_object(o, key, prefix, r, &present);   /* r's keys: none, or its own */
        if (rc || !present)
            jobj_free(r);
    }
    if (rc || !present) {
        free(r);
        free(prefix);
        return rc;
    }
    *sub = r;
    return NNT_OK;
}

void nnt_cfg_sub_free(nnt_cfg_in *sub)
{
    if (!sub)
        return;
    jobj_free(sub);
    free((char *)sub->prefix);
    free(sub);
}

/* layer_types (transformers' list of "sliding_attention" / "full_attention", one per layer)
 * as window_from and window_global_every where it has one of their forms (layers from
 * window_from on sliding, or with every_rule every window_global_every-th full and the others
 * sliding), else as window_full_layers (the full layers; up to NNT_MODEL_MAX_WINDOW_LAYER
 * layers). Absent: the keys' values stand; not a list of those strings, or of another length
 * than num_hidden_layers: unsupported. */
int nnt_cfg_layer_types(const nnt_cfg_in *o, int every_rule, nnt_model_config *c)
{
    if (!nnt_cfg_has(o, "layer_types"))
        return NNT_OK;
    size_t cap = (size_t)c->layers * 24 + 64;
    char *text = malloc(cap), *p;
    if (!text)
        return nnt_cfg_unsupported(o, "layer_types", "(too long)", "a list per layer");
    nnt_cfg_text(o, "layer_types", text, cap);
    char *sliding = calloc((size_t)c->layers + 1, 1);
    int64_t n = 0;
    int ok = sliding != NULL && text[0] == '[';
    for (p = text; ok && (p = strchr(p, '"')) != NULL; n++) {
        char *e = strchr(p + 1, '"');
        size_t len = e ? (size_t)(e - p - 1) : 0;
        if (!e || n >= c->layers)
            ok = 0;
        else if (len == 17 && strncmp(p + 1, "sliding_attention", len) == 0)
            sliding[n] = 1;
        else if (!(len == 14 && strncmp(p + 1, "full_attention", len) == 0))
            ok = 0;
        p = e ? e + 1 : p + 1;
    }
    ok = ok && n == c->layers;
    /* the forms: first sliding layer on; or every N-th full from 1; else the full layers */
    int64_t from = 0, every = 0, any = 0, listed = 0;
    for (int64_t i = 0; ok && i < n; i++)
        any |= sliding[i];
    if (ok && any) {
        while (!sliding[from])
            from++;
        int run = 1;
        for (int64_t i = from; i < n; i++)
            run &= sliding[i];
        if (!run) {
            from = 0;
            listed = !every_rule;
            if (every_rule) {   /* every N-th full from 1? */
                while (every < n && sliding[every])
                    every++;
                every++;   /* the first full layer is layer every - 1 */
                for (int64_t i = 0; i < n; i++)
                    listed |= sliding[i] != ((i + 1) % every != 0);
            }
        }
    }
    memset(c->window_full_layers, 0, sizeof c->window_full_layers);
    if (ok && listed) {   /* no rule: window_full_layers names the full layers */
        every = 0;
        ok = n <= NNT_MODEL_MAX_WINDOW_LAYER;
        for (int64_t i = 0; ok && i < n; i++)
            c->window_full_layers[i / 64] |= (uint64_t)!sliding[i] << (i % 64);
    }
    free(text);
    free(sliding);
    if (!ok)
        return nnt_cfg_unsupported(o, "layer_types", "(this list)",
                                   "\"full_attention\" / \"sliding_attention\" per layer (at "
                                   "most 512 layers where the sliding ones have no pattern)");
    if (!any)
        c->sliding_window = 0;
    c->window_from = from;
    c->window_global_every = every;
    return NNT_OK;
}

void nnt_cfg_put_sizes(nnt_cfg_out *t, const nnt_model_config *c)
{
    nnt_cfg_put_sizes_eps(t, c, "rms_norm_eps");
}

void nnt_cfg_put_sizes_eps(nnt_cfg_out *t, const nnt_model_config *c, const char *eps_key)
{
    nnt_cfg_put_int(t, "vocab_size", c->vocab);
    nnt_cfg_put_int(t, "hidden_size", c->channels);
    nnt_cfg_put_int(t, "intermediate_size", c->hidden);
    nnt_cfg_put_int(t, "num_hidden_layers", c->layers);
    nnt_cfg_put_int(t, "num_attention_heads", c->heads);
    nnt_cfg_put_int(t, "num_key_value_heads", nnt_model_kv_heads(c));
    nnt_cfg_put_int(t, "head_dim", c->head_dim ? c->head_dim : c->channels / c->heads);
    nnt_cfg_put_int(t, "max_position_embeddings", c->max_seq);
    nnt_cfg_put_double(t, eps_key, c->norm_eps);
}

void nnt_cfg_put_gpt2_sizes(nnt_cfg_out *t, const nnt_model_config *c)
{
    nnt_cfg_put_int(t, "vocab_size", c->vocab);
    nnt_cfg_put_int(t, "n_positions", c->max_seq);
    nnt_cfg_put_int(t, "n_embd", c->channels);
    nnt_cfg_put_int(t, "n_layer", c->layers);
    nnt_cfg_put_int(t, "n_head", c->heads);
}

void nnt_cfg_put_window(nnt_cfg_out *t, const nnt_model_config *c)
{
    if (c->sliding_window > 0)
        nnt_cfg_put_int(t, "sliding_window", c->sliding_window);
    else
        nnt_cfg_add(t, ",\n  \"sliding_window\": null");
}

void nnt_cfg_put_no_token_ids(nnt_cfg_out *t, const nnt_model_config *c)
{
    nnt_cfg_put_pad(t, c);
    nnt_cfg_add(t, ",\n  \"bos_token_id\": null,\n  \"eos_token_id\": null");
}

void nnt_cfg_put_pad(nnt_cfg_out *t, const nnt_model_config *c)
{
    if (c->has_pad_token)
        nnt_cfg_put_int(t, "pad_token_id", c->pad_token_id);
    else
        nnt_cfg_add(t, ",\n  \"pad_token_id\": null");
    t->pad_done = 1;
}

/* A JSON string of s (a label's name: no control characters, nnt_label_names_check) */
static void put_json_text(nnt_cfg_out *t, const char *s)
{
    nnt_cfg_add(t, "\"");
    for (; *s; s++)
        nnt_cfg_add(t, strchr("\"\\", *s) ? "\\%c" : "%c", *s);
    nnt_cfg_add(t, "\"");
}

/* A classifier's labels: names[k] (NULL: transformers' default names, LABEL_k). */
static void put_labels(nnt_cfg_out *t, const nnt_model_config *c, const char *const *names)
{
    char buf[32];
    nnt_cfg_add(t, ",\n  \"id2label\": {");
    for (int64_t i = 0; i < c->num_labels; i++) {
        nnt_cfg_add(t, "%s\"%lld\": ", i ? ", " : "", (long long)i);
        put_json_text(t, nnt_label_name_at(names, i, buf, sizeof buf));
    }
    nnt_cfg_add(t, "},\n  \"label2id\": {");
    for (int64_t i = 0; i < c->num_labels; i++) {
        nnt_cfg_add(t, "%s", i ? ", " : "");
        put_json_text(t, nnt_label_name_at(names, i, buf, sizeof buf));
        nnt_cfg_add(t, ": %lld", (long long)i);
    }
    nnt_cfg_add(t, "}");
}

int nnt_model_config_label_names(nnt_ctx *ctx, const char *fn, const char *what,
                                 const char *text, size_t len, int64_t num_labels,
                                 char ***names)
{
    *names = NULL;
    if (num_labels < 1)
        return NNT_OK;
    nnt_cfg_in o = {ctx, fn, what, "", text, NULL, 0, 0};
    nnt_cfg_in *labels = NULL;
    int rc = jobj_parse(&o, 0, len, 1);
    if (rc == 0)
        rc = nnt_cfg_sub(&o, "id2label", &labels);
    char **out = NULL;
    int defaults = 1;
    if (rc == 0 && labels && (int64_t)labels->n == num_labels &&
        !(out = calloc((size_t)num_labels, sizeof *out)))
        rc = nnt_fail(ctx, NNT_E_NOMEM, "%s: out of memory", fn);
    for (size_t i = 0; rc == 0 && out && i < labels->n; i++) {
        const char *key = nnt_cfg_key_at(labels, i);
        char *end = NULL, dflt[32];
        long long k = strtoll(key, &end, 10);
        if (!*key || *end || k < 0 || k >= num_labels || out[k]) {
            rc = nnt_fail(ctx, NNT_E_FORMAT, "%s: %s: id2label's key \"%s\" is not one of "
                          "the labels 0 to %lld, each once", fn, what, key,
                          (long long)num_labels - 1);
            break;
        }
        if ((rc = nnt_cfg_string(labels, key, &out[k])) == 0 && !out[k])
            rc = nnt_cfg_bad_type(labels, key, "a string");
        defaults &= rc == 0 && strcmp(out[k], nnt_label_name_at(NULL, k, dflt, sizeof dflt)) == 0;
    }
    if (rc == 0 && out && !defaults &&
        nnt_label_names_check(ctx, fn, (const char *const *)out, num_labels))
        rc = nnt_fail(ctx, NNT_E_FORMAT, "%s: %s: id2label: %s", fn, what,
                      nnt_ctx_last_error(ctx));
    nnt_cfg_sub_free(labels);
    jobj_free(&o);
    if (rc || defaults) {
        nnt_label_names_free(out, num_labels);
        out = NULL;
    }
    *names = out;
    return rc;
}

void nnt_cfg_put_layer_types(nnt_cfg_out *t, const nnt_model_config *c)
{
    nnt_cfg_add(t, ",\n  \"layer_types\": [");
    for (int64_t i = 0; i < c->layers; i++)
        nnt_cfg_add(t, "%s\"%s\"", i ? ", " : "",
                    nnt_model_block_window(c, i) ? "sliding_attention" : "full_attention");
    nnt_cfg_add(t, "]");
}

/* transformers 5.24's convert_rope_params_to_dict and standardize_rope_params: the
 * rope_scaling object when given and not empty, else rope_parameters; in it rope_theta and
 * partial_rotary_factor, else the top level's theta_key and partial_key (theta and partial
 * when absent there too). */
static int rope_read(const nnt_cfg_in *o, const char *theta_key, const char *partial_key,
                     double theta, double partial, const rope_rules *u, nnt_rope_options *rope)
{
    nnt_cfg_in *r = NULL;
    NNT_TRY(nnt_cfg_double(o, theta_key, 0, theta, &rope->theta));
    NNT_TRY(nnt_cfg_double(o, partial_key, 0, partial, &rope->partial_rotary_factor));
    int rc = nnt_cfg_sub(o, "rope_scaling", &r);
    if (rc == 0 && r && nnt_cfg_count(r) == 0) {
        nnt_cfg_sub_free(r);
        r = NULL;
    }
    if (rc == 0 && !r)
        rc = nnt_cfg_sub(o, "rope_parameters", &r);
    if (rc == 0 && r)
        rc = nnt_cfg_double(r, "rope_theta", 0, rope->theta, &rope->theta);
    if (rc == 0 && r)
        rc = rope_type(r, u, rope);
    nnt_cfg_sub_free(r);
    return rc;
}

int nnt_cfg_rope_ex(const nnt_cfg_in *o, double theta, int64_t max_position,
                    int64_t original, int longrope_aliases, nnt_rope_options *rope)
{
    rope_rules u = {max_position, original, longrope_aliases};
    return rope_read(o, "rope_theta", "partial_rotary_factor", theta, 1.0, &u, rope);
}

int nnt_cfg_rope_keys(const nnt_cfg_in *o, const char *theta_key, const char *partial_key,
                      double theta, double partial, int64_t max_position,
                      nnt_rope_options *rope)
{
    rope_rules u = {max_position, 0, 0};
    return rope_read(o, theta_key, partial_key, theta, partial, &u, rope);
}

int nnt_cfg_rope(const nnt_cfg_in *o, double theta, int64_t max_position,
                 nnt_rope_options *rope)
{
    return nnt_cfg_rope_ex(o, theta, max_position, 0, 0, rope);
}

/* ---- writing --------------------------------------------------------------------------- */

void nnt_cfg_add(nnt_cfg_out *t, const char *fmt, ...)
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
/* s with the locale's decimal point made '.' */
static void dot_decimal(char *s)
{
    char point = localeconv()->decimal_point[0];
    for (char *p = s; *p; p++)
        if (*p == point)
            *p = '.';
}

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
    dot_decimal(s);
}

void nnt_cfg_put_double(nnt_cfg_out *t, const char *key, double v)
{
    char s[40];
    double_text(v, s, sizeof s);
    nnt_cfg_add(t, ",\n  \"%s\": %s", key, s);
}

void nnt_cfg_put_int(nnt_cfg_out *t, const char *key, int64_t v)
{
    nnt_cfg_add(t, ",\n  \"%s\": %lld", key, (long long)v);
}

void nnt_cfg_put_bool(nnt_cfg_out *t, const char *key, int v)
{
    nnt_cfg_add(t, ",\n  \"%s\": %s", key, v ? "true" : "false");
}

/* ", \"key\": v" (a double that reads back as itself) */
static void put_field(nnt_cfg_out *t, const char *key, double v)
{
    char s[40];
    double_text(v, s, sizeof s);
    nnt_cfg_add(t, ", \"%s\": %s", key, s);
}

/* The shortest text that reads back as the float v */
static void float_text(float v, char *s, size_t size)
{
    for (int prec = 1; prec <= 9; prec++) {
        snprintf(s, size, "%.*g", prec, (double)v);
        if ((float)span_double(s, strlen(s)) == v)
            break;
    }
    dot_decimal(s);
}

/* LongRoPE's factor lists */
static void put_factor_lists(nnt_cfg_out *t, const nnt_rope_options *r)
{
    char f[40];
    const float *lists[2] = {r->short_factor, r->long_factor};
    for (int l = 0; l < 2; l++) {
        nnt_cfg_add(t, ", \"%s_factor\": [", l ? "long" : "short");
        for (int64_t i = 0; i < r->nfactors; i++) {
            float_text(lists[l][i], f, sizeof f);
            nnt_cfg_add(t, "%s%s", i ? ", " : "", f);
        }
        nnt_cfg_add(t, "]");
    }
}

/* A rope object's "rope_type" and the fields of its scaling (none for the default) */
static void put_scaling(nnt_cfg_out *t, const nnt_rope_options *r)
{
    static const char *const TYPES[] = {"default", "llama3", "linear", "yarn", "longrope"};
    int k = r->scaling >= 0 && r->scaling <= NNT_ROPE_SCALING_LONGROPE ? r->scaling : 0;
    nnt_cfg_add(t, "\"rope_type\": \"%s\"", TYPES[k]);
    if (r->scaling == NNT_ROPE_SCALING_NONE)
        return;
    if (r->scaling == NNT_ROPE_SCALING_LONGROPE)
        put_factor_lists(t, r);
    put_field(t, "factor", r->factor);
    if (r->scaling == NNT_ROPE_SCALING_LLAMA3) {
        put_field(t, "low_freq_factor", r->low_freq_factor);
        put_field(t, "high_freq_factor", r->high_freq_factor);
    }
    if (r->scaling != NNT_ROPE_SCALING_LINEAR)
        nnt_cfg_add(t, ", \"original_max_position_embeddings\": %lld",
                    (long long)r->original_max_position);
    if (r->scaling == NNT_ROPE_SCALING_YARN) {
        put_field(t, "beta_fast", r->beta_fast);
        put_field(t, "beta_slow", r->beta_slow);
        nnt_cfg_add(t, ", \"truncate\": %s", r->truncate ? "true" : "false");
    }
    if (r->attention_factor > 0.0 &&
        (r->scaling == NNT_ROPE_SCALING_YARN || r->scaling == NNT_ROPE_SCALING_LONGROPE))
        put_field(t, "attention_factor", r->attention_factor);
}

void nnt_cfg_put_rope_object(nnt_cfg_out *t, const nnt_rope_options *r)
{
    nnt_cfg_add(t, "{");
    put_scaling(t, r);
    put_field(t, "rope_theta", r->theta);
    nnt_cfg_add(t, "}");
}

void nnt_cfg_put_rope_by_layer_type(nnt_cfg_out *t, const nnt_model_config *c)
{
    nnt_rope_options local = NNT_ROPE_OPTIONS_INIT;
    local.theta = c->rope_local_theta > 0.0 ? c->rope_local_theta : c->rope.theta;
    nnt_cfg_add(t, ",\n  \"rope_parameters\": {\"sliding_attention\": ");
    nnt_cfg_put_rope_object(t, &local);
    nnt_cfg_add(t, ", \"full_attention\": ");
    nnt_cfg_put_rope_object(t, &c->rope);
    nnt_cfg_add(t, "}");
}

void nnt_cfg_put_rope(nnt_cfg_out *t, const nnt_rope_options *r)
{
    nnt_cfg_put_double(t, "rope_theta", r->theta);
    if (r->partial_rotary_factor != 0.0 && r->partial_rotary_factor != 1.0)
        nnt_cfg_put_double(t, "partial_rotary_factor", r->partial_rotary_factor);
    nnt_cfg_put_rope_scaling(t, r);
}

void nnt_cfg_put_rope_scaling(nnt_cfg_out *t, const nnt_rope_options *r)
{
    if (r->scaling == NNT_ROPE_SCALING_NONE) {
        nnt_cfg_add(t, ",\n  \"rope_scaling\": null");
        return;
    }
    nnt_cfg_add(t, ",\n  \"rope_scaling\": {");
    put_scaling(t, r);
    nnt_cfg_add(t, "}");
}

/* ---- config.json <-> nnt_model_config ---------------------------------------------------- */

/* The first string of the architectures array. */
static int first_architecture(const nnt_cfg_in *o, const jkey *k, char **out)
{
    char err[NNT_IO_ERRLEN];
    nnt_json j;
    nnt_json_init(&j, o->buf + k->start, k->end - k->start, k->start, o->file, err, sizeof err);
    if (nnt_json_expect(&j, '[', "architectures") || nnt_json_peek(&j) != '"')
        return nnt_cfg_bad_type(o, "architectures", "an array of strings");
    int rc = nnt_json_string(&j, out, NULL, NNT_IO_MAXNAME, 0, "architectures[0]");
    return rc ? nnt_fail(o->ctx, rc, "%s: %s", o->fn, err) : NNT_OK;
}

/* The family and architecture of key (architectures[0] or model_type) in the table. */
static int family_by(const nnt_cfg_in *o, int by_type, const nnt_family **f, int *arch,
                     int *classifier)
{
    const char *key = by_type ? "model_type" : "architectures";
    const jkey *k = jvalue(o, key);
    char *name = NULL;
    if (by_type) {
        if (o->buf[k->start] != '"')
            return nnt_cfg_bad_type(o, key, "a string");
        NNT_TRY(get_string(o, key, &name));
    } else {
        NNT_TRY(first_architecture(o, k, &name));
    }
    *f = nnt_family_of_hf(name, by_type, arch);
    *classifier = !*f && !by_type && (*f = nnt_family_of_classifier(name, arch)) != NULL;
    char quoted[NNT_IO_MAXNAME + 8], valid[1024];
    snprintf(quoted, sizeof quoted, "\"%s\"", name);
    free(name);
    if (*f)
        return NNT_OK;
    nnt_family_hf_names(by_type, valid, sizeof valid);
    return nnt_cfg_unsupported(o, by_type ? "model_type" : "architectures[0]", quoted, valid);
}

/* The family of o: architectures[0], else model_type; when both are given they must name
 * the same architecture (a config.json whose model_type is another model's is refused, not
 * read as architectures[0] alone). */
static int family_of(const nnt_cfg_in *o, const nnt_family **f, int *arch, int *classifier)
{
    *classifier = 0;
    if (!jvalue(o, "architectures") && !jvalue(o, "model_type"))
        return nnt_fail(o->ctx, NNT_E_FORMAT, "%s: %s: neither architectures nor model_type "
                        "is given", o->fn, o->file);
    if (!jvalue(o, "architectures"))
        return family_by(o, 1, f, arch, classifier);
    NNT_TRY(family_by(o, 0, f, arch, classifier));
    if (!jvalue(o, "model_type"))
        return NNT_OK;
    char *type = NULL;
    if (o->buf[jvalue(o, "model_type")->start] != '"')
        return nnt_cfg_bad_type(o, "model_type", "a string");
    NNT_TRY(get_string(o, "model_type", &type));
    const nnt_hf_arch *a = &(*f)->archs[*arch];
    int same = strcmp(type, a->model_type) == 0;
    int rc = same ? NNT_OK
                  : nnt_fail(o->ctx, NNT_E_UNSUPPORTED, "%s: %s: architectures[0] \"%s\" and "
                             "model_type \"%s\" disagree (%s has model_type \"%s\")", o->fn,
                             o->file, a->architecture, type, a->architecture, a->model_type);
    free(type);
    return rc;
}

/* A classifier's problem_type: "regression" and "multi_label_classification" train on
 * values (NNT_PROBLEM_REGRESSION, _MULTI_LABEL), "single_label_classification" and none
 * (null, absent) on one label a row. One label is read as a reward model (TRL's
 * RewardTrainer's pairs) unless multi-label: transformers takes any one-label model for a
 * regression, so its "regression" says nothing more. */
static int problem_from(const nnt_cfg_in *o, nnt_model_config *c)
{
    char *type = NULL;
    if (nnt_cfg_has(o, "problem_type") && jvalue(o, "problem_type") != NULL)
        NNT_TRY(nnt_cfg_string(o, "problem_type", &type));
    int rc = NNT_OK;
    if (!type || strcmp(type, "single_label_classification") == 0)
        c->problem_type = NNT_PROBLEM_DEFAULT;
    else if (strcmp(type, "regression") == 0)
        c->problem_type = c->num_labels == 1 ? NNT_PROBLEM_DEFAULT : NNT_PROBLEM_REGRESSION;
    else if (strcmp(type, "multi_label_classification") == 0)
        c->problem_type = NNT_PROBLEM_MULTI_LABEL;
    else
        rc = nnt_cfg_unsupported(o, "problem_type", type, "regression, single_label_"
                                 "classification or multi_label_classification");
    free(type);
    return rc;
}

/* A *ForSequenceClassification's labels (transformers: as many as id2label has, else
 * num_labels, else 2) and pad_token_id (its pooling skips it). */
static int classifier_from(const nnt_cfg_in *o, nnt_model_config *c)
{
    nnt_cfg_in *labels = NULL;
    NNT_TRY(nnt_cfg_sub(o, "id2label", &labels));
    if (labels) {
        c->num_labels = (int64_t)labels->n;
        nnt_cfg_sub_free(labels);
    } else {
        NNT_TRY(nnt_cfg_int(o, "num_labels", 0, 2, &c->num_labels));
    }
    if (c->num_labels < 1)
        return nnt_cfg_unsupported(o, "id2label", "{}", "one label or more");
    c->has_pad_token = nnt_cfg_has(o, "pad_token_id") && jvalue(o, "pad_token_id") != NULL;
    if (c->has_pad_token)
        NNT_TRY(nnt_cfg_int(o, "pad_token_id", 1, 0, &c->pad_token_id));
    return problem_from(o, c);
}

static int config_from(nnt_cfg_in *o, nnt_model_config *cfg, const nnt_hf_arch **which)
{
    nnt_model_config c = NNT_MODEL_CONFIG_INIT;
    const nnt_family *f = NULL;
    int arch = -1, classifier = 0;
    NNT_TRY(family_of(o, &f, &arch, &classifier));
    c.family = f->id;
    NNT_TRY(f->read_hf(o, arch, &c));
    if (classifier)
        NNT_TRY(classifier_from(o, &c));
    NNT_TRY(nnt_model_check(o->ctx, o->fn, &c));
    *cfg = c;
    if (which)
        *which = &f->archs[arch];
    return NNT_OK;
}

static int parse(nnt_ctx *ctx, const char *fn, const char *what, const char *text, size_t len,
                 nnt_model_config *cfg, const nnt_hf_arch **arch)
{
    nnt_cfg_in o = {ctx, fn, what, "", text, NULL, 0, 0};
    int rc = jobj_parse(&o, 0, len, 1);
    if (rc == 0)
        rc = config_from(&o, cfg, arch);
    jobj_free(&o);
    return rc;
}

int nnt_model_config_parse(nnt_ctx *ctx, const char *fn, const char *what, const char *text,
                           size_t len, nnt_model_config *cfg)
{
    return parse(ctx, fn, what, text, len, cfg, NULL);
}

int nnt_model_path_join(nnt_ctx *ctx, const char *fn, const char *dir, const char *name,
                        char *path)
{
    int n = snprintf(path, NNT_MODEL_PATH_MAX, "%s/%s", dir, name);
    if (n < 0 || n >= NNT_MODEL_PATH_MAX)
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

/* dir/config.json's path and text (*buf malloc'd, len bytes) */
static int read_config_json(nnt_ctx *ctx, const char *fn, const char *dir, char *path,
                            char **buf, size_t *len)
{
    NNT_TRY(nnt_model_path_join(ctx, fn, dir, "config.json", path));
    return read_file(ctx, fn, path, buf, len);
}

int nnt_model_config_read_dir(nnt_ctx *ctx, const char *fn, const char *dir,
                              nnt_model_config *cfg, const nnt_hf_arch **arch)
{
    char path[NNT_MODEL_PATH_MAX], *buf = NULL;
    size_t len = 0;
    NNT_TRY(read_config_json(ctx, fn, dir, path, &buf, &len));
    int rc = parse(ctx, fn, path, buf, len, cfg, arch);
    free(buf);
    return rc;
}

int nnt_model_label_names_read_dir(nnt_ctx *ctx, const char *fn, const char *dir,
                                   int64_t num_labels, char ***names)
{
    char path[NNT_MODEL_PATH_MAX], *buf = NULL;
    size_t len = 0;
    *names = NULL;
    NNT_TRY(read_config_json(ctx, fn, dir, path, &buf, &len));
    int rc = nnt_model_config_label_names(ctx, fn, path, buf, len, num_labels, names);
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
    return nnt_model_config_read_dir(ctx, fn, dir, cfg, NULL);
}

/* The eos_token_id of dir/name (*n -1: no such file; 0: none named) */
static int eos_of_file(const char *fn, const char *dir, const char *name, int32_t *ids,
                       int64_t cap, int64_t *n)
{
    char path[NNT_MODEL_PATH_MAX];
    nnt_cfg_in *o = NULL, *text = NULL;
    *n = -1;
    NNT_TRY(nnt_model_path_join(NULL, fn, dir, name, path));
    if (access(path, F_OK) != 0)
        return NNT_OK;
    NNT_TRY(nnt_cfg_open(NULL, fn, path, &o));
    int rc = nnt_cfg_ids(o, "eos_token_id", ids, cap, n);
    if (rc == 0 && *n == 0 && nnt_cfg_has(o, "text_config"))   /* a multimodal config.json */
        rc = nnt_cfg_sub(o, "text_config", &text);
    if (rc == 0 && text)
        rc = nnt_cfg_ids(text, "eos_token_id", ids, cap, n);
    nnt_cfg_sub_free(text);
    nnt_cfg_close(o);
    return rc;
}

NNT_API int nnt_model_hf_eos_ids(const char *dir, int32_t *ids, int64_t cap, int64_t *n)
{
    const char *fn = "nnt_model_hf_eos_ids";
    if (!dir || !n || (cap > 0 && !ids) || cap < 0)
        return nnt_fail(NULL, NNT_E_INVAL, "%s: %s", fn, !dir ? "dir is NULL" : !n ? "n is NULL"
                        : cap < 0 ? "cap is negative" : "ids is NULL");
    NNT_TRY(eos_of_file(fn, dir, "generation_config.json", ids, cap, n));
    if (*n <= 0)
        NNT_TRY(eos_of_file(fn, dir, "config.json", ids, cap, n));
    if (*n < 0)
        return nnt_fail(NULL, NNT_E_IO, "%s: %s: neither generation_config.json nor "
                        "config.json is there", fn, dir);
    return NNT_OK;
}

/* generation_config.json's settings nnt does not apply, at values that change the sampling:
 * a warning naming each (the key, the value that does nothing, what nnt does instead) */
static void unapplied_sampling(const nnt_cfg_in *o, const char *path)
{
    static const struct {
        const char *key;
        double none;
    } keys[] = {{"encoder_repetition_penalty", 1.0}, {"length_penalty", 1.0}, {"top_h", 0.0}};
    for (size_t i = 0; i < sizeof keys / sizeof *keys; i++) {
        double v = keys[i].none;
        if (nnt_cfg_double(o, keys[i].key, 0, keys[i].none, &v) == NNT_OK && v != keys[i].none)
            nnt_log(NNT_LOG_WARN, "%s: %s %g is not applied (nnt samples with temperature, "
                    "top_k, top_p, min_p, typical_p, epsilon_cutoff, eta_cutoff, "
                    "repetition_penalty and no_repeat_ngram_size alone)", path, keys[i].key, v);
    }
}

/* A setting of generation_config.json that nnt_sampling holds as a double (nnt_cfg_double,
 * finite) or an integer (nnt_cfg_int, in [0, 2^53]), and its range: lo to hi, each end open
 * or not */
typedef struct hf_setting {
    const char *key, *range;
    size_t offset;   /* in nnt_sampling */
    unsigned bit;    /* NNT_HF_SAMPLING_* */
    int integer;     /* int64_t, else double */
    double lo, hi;
    int lo_open, hi_open;
} hf_setting;

static const hf_setting hf_settings[] = {
    {"temperature", "0 or more", offsetof(nnt_sampling, temperature),
     NNT_HF_SAMPLING_TEMPERATURE, 0, 0, INFINITY, 0, 1},
    {"top_k", "below 2^31", offsetof(nnt_sampling, top_k), NNT_HF_SAMPLING_TOP_K, 1, 0,
     INT32_MAX, 0, 0},
    {"top_p", "above 0, up to 1", offsetof(nnt_sampling, top_p), NNT_HF_SAMPLING_TOP_P, 0, 0, 1,
     1, 0},
    {"repetition_penalty", "above 0", offsetof(nnt_sampling, repetition_penalty),
     NNT_HF_SAMPLING_REPETITION_PENALTY, 0, 0, INFINITY, 1, 1},
    {"min_p", "0 to 1", offsetof(nnt_sampling, min_p), NNT_HF_SAMPLING_MIN_P, 0, 0, 1, 0, 0},
    {"typical_p", "above 0, up to 1", offsetof(nnt_sampling, typical_p),
     NNT_HF_SAMPLING_TYPICAL_P, 0, 0, 1, 1, 0},
    {"epsilon_cutoff", "0 to below 1", offsetof(nnt_sampling, epsilon_cutoff),
     NNT_HF_SAMPLING_EPSILON_CUTOFF, 0, 0, 1, 0, 1},
    {"eta_cutoff", "0 to below 1", offsetof(nnt_sampling, eta_cutoff),
     NNT_HF_SAMPLING_ETA_CUTOFF, 0, 0, 1, 0, 1},
    {"no_repeat_ngram_size", "0 or more", offsetof(nnt_sampling, no_repeat_ngram_size),
     NNT_HF_SAMPLING_NO_REPEAT_NGRAM_SIZE, 1, 0, INFINITY, 0, 1},
};

/* Whether v is in h's range */
static int hf_setting_ok(const hf_setting *h, double v)
{
    return (h->lo_open ? v > h->lo : v >= h->lo) && (h->hi_open ? v < h->hi : v <= h->hi);
}

NNT_API int nnt_model_hf_sampling(const char *dir, nnt_sampling *s, unsigned *found)
{
    const char *fn = "nnt_model_hf_sampling";
    char path[NNT_MODEL_PATH_MAX];
    nnt_cfg_in *o = NULL;
    if (!dir || !s || !found)
        return nnt_fail(NULL, NNT_E_INVAL, "%s: %s is NULL", fn,
                        !dir ? "dir" : !s ? "s" : "found");
    *found = 0;
    NNT_TRY(nnt_model_path_join(NULL, fn, dir, "generation_config.json", path));
    if (access(path, F_OK) != 0)
        return NNT_OK;
    NNT_TRY(nnt_cfg_open(NULL, fn, path, &o));
    enum { N = sizeof hf_settings / sizeof *hf_settings };
    double vals[N];   /* every setting read and checked before any is written */
    int rc = 0;
    for (int i = 0; i < N && rc == 0; i++) {
        const hf_setting *h = &hf_settings[i];
        if (h->integer) {
            int64_t v = 0;
            rc = nnt_cfg_int(o, h->key, 0, 0, &v);
            vals[i] = (double)v;
        } else
            rc = nnt_cfg_double(o, h->key, 0, 0.0, &vals[i]);
        if (rc == 0 && nnt_cfg_has(o, h->key) && !hf_setting_ok(h, vals[i]))
            rc = nnt_fail(NULL, NNT_E_FORMAT, "%s: %s: %s %g is out of range (%s)", fn, path,
                          h->key, vals[i], h->range);
    }
    for (int i = 0; i < N && rc == 0; i++) {
        const hf_setting *h = &hf_settings[i];
        /* (the fields of later versions only where s holds them) */
        if (!nnt_cfg_has(o, h->key) || s->size < h->offset + sizeof(double))
            continue;
        if (h->integer)
            *(int64_t *)((char *)s + h->offset) = (int64_t)vals[i];
        else
            *(double *)((char *)s + h->offset) = vals[i];
        *found |= h->bit;
    }
    if (rc == 0)
        unapplied_sampling(o, path);
    nnt_cfg_close(o);
    return rc;
}

int nnt_model_hf_arch(nnt_ctx *ctx, const char *fn, const nnt_model_config *c,
                      const nnt_family **family)
{
    const nnt_family *f = nnt_family_find(c->family);
    if (!f)
        return nnt_fail(ctx, NNT_E_INVAL, "%s: unknown family %d", fn, c->family);
    *family = f;
    return f->hf_arch ? f->hf_arch(ctx, fn, c) : 0;
}

int nnt_model_config_text(nnt_ctx *ctx, const char *fn, const nnt_model_config *c, char **out)
{
    return nnt_model_config_text_named(ctx, fn, c, NULL, out);
}

int nnt_model_config_text_named(nnt_ctx *ctx, const char *fn, const nnt_model_config *c,
                                const char *const *label_names, char **out)
{
    const nnt_family *f = NULL;
    *out = NULL;
    int arch = nnt_model_hf_arch(ctx, fn, c, &f);
    if (arch < 0)
        return arch;
    char name[128];
    const char *architecture = f->archs[arch].architecture;
    if (c->num_labels > 0) {
        if (!nnt_hf_classifier_name(architecture, name, sizeof name))
            return nnt_fail(ctx, NNT_E_UNSUPPORTED, "%s: transformers has no sequence "
                            "classifier of %s (num_labels %lld)", fn, architecture,
                            (long long)c->num_labels);
        architecture = name;
    }
    nnt_cfg_out t = {NULL, 0, 0, 0, 0};
    nnt_cfg_add(&t, "{\n  \"architectures\": [\"%s\"],\n  \"model_type\": \"%s\"",
                architecture, f->archs[arch].model_type);
    f->write_hf(&t, arch, c);
    if (c->num_labels > 0) {
        put_labels(&t, c, label_names);
        if (!t.pad_done)
            nnt_cfg_put_pad(&t, c);
        static const char *const problems[] = {NULL, "regression", "multi_label_classification"};
        if (c->problem_type > NNT_PROBLEM_DEFAULT && c->problem_type <= NNT_PROBLEM_MULTI_LABEL)
            nnt_cfg_add(&t, ",\n  \"problem_type\": \"%s\"", problems[c->problem_type]);
    }
    nnt_cfg_add(&t, ",\n  \"torch_dtype\": \"float32\"\n}\n");
    if (t.oom) {
        free(t.buf);
        return nnt_fail(ctx, NNT_E_NOMEM, "%s: out of memory", fn);
    }
    *out = t.buf;
    return NNT_OK;
}

int nnt_model_config_write_dir(nnt_ctx *ctx, const char *fn, const char *dir,
                               const nnt_model_config *c, const char *const *label_names)
{
    char path[NNT_MODEL_PATH_MAX], err[NNT_IO_ERRLEN];
    NNT_TRY(nnt_model_path_join(ctx, fn, dir, "config.json", path));
    char *text = NULL;
    NNT_TRY(nnt_model_config_text_named(ctx, fn, c, label_names, &text));
    nnt_io_out *o = NULL;
    int rc = nnt_io_out_begin(path, &o, err, sizeof err);
    if (rc == 0)
        rc = nnt_io_out_write(o, text, strlen(text), err, sizeof err);
    if (rc == 0) {
        rc = nnt_io_out_commit(o, err, sizeof err);   /* frees o */
        o = NULL;
    }
    nnt_io_out_abort(o);
    free(text);
    return rc ? nnt_fail(ctx, rc, "%s: %s", fn, err) : NNT_OK;
}

/* ---- other JSON files of a model directory (adapter_config.json) -------------------------- */

/* The object of the len bytes of buf (taken: freed with the object, or on failure), named
 * what in messages. */
static int cfg_of_text(nnt_ctx *ctx, const char *fn, const char *what, char *buf, size_t len,
                       nnt_cfg_in **out)
{
    *out = NULL;
    nnt_cfg_in *o = calloc(1, sizeof *o);
    char *file = strdup(what);
    if (!o || !file) {
        free(o), free(file), free(buf);
        return nnt_fail(ctx, NNT_E_NOMEM, "%s: out of memory", fn);
    }
    o->ctx = ctx, o->fn = fn, o->file = file, o->prefix = "", o->buf = buf;
    int rc = jobj_parse(o, 0, len, 1);
    if (rc) {
        nnt_cfg_close(o);
        return rc;
    }
    *out = o;
    return NNT_OK;
}

int nnt_cfg_open(nnt_ctx *ctx, const char *fn, const char *path, nnt_cfg_in **out)
{
    char *buf = NULL;
    size_t len = 0;
    *out = NULL;
    NNT_TRY(read_file(ctx, fn, path, &buf, &len));
    return cfg_of_text(ctx, fn, path, buf, len, out);
}

int nnt_cfg_parse(nnt_ctx *ctx, const char *fn, const char *what, const char *text,
                  size_t len, nnt_cfg_in **out)
{
    char *buf = malloc(len + 1);
    *out = NULL;
    if (!buf)
        return nnt_fail(ctx, NNT_E_NOMEM, "%s: out of memory", fn);
    memcpy(buf, text, len);
    buf[len] = '\0';
    return cfg_of_text(ctx, fn, what, buf, len, out);
}

void nnt_cfg_close(nnt_cfg_in *o)
{
    if (!o)
        return;
    jobj_free(o);
    free((char *)o->buf);
    free((char *)o->file);
    free(o);
}

size_t nnt_cfg_count(const nnt_cfg_in *o)
{
    return o->n;
}

const char *nnt_cfg_key_at(const nnt_cfg_in *o, size_t i)
{
    return i < o->n ? o->keys[i].name : NULL;
}

int nnt_cfg_string(const nnt_cfg_in *o, const char *key, char **out)
{
    return get_string(o, key, out);
}

int nnt_cfg_is_empty(const nnt_cfg_in *o, const char *key)
{
    const jkey *k = jvalue(o, key);
    if (!k)
        return 1;
    char c = o->buf[k->start], last = o->buf[k->end - 1];
    return (c == '[' || c == '{') && k->end - k->start >= 2 &&
           strspn(o->buf + k->start + 1, " \t\r\n") == k->end - k->start - 2 &&
           (last == ']' || last == '}');
}

int nnt_cfg_string_list(const nnt_cfg_in *o, const char *key, char **out)
{
    *out = NULL;
    const jkey *k = jvalue(o, key);
    if (!k)
        return NNT_OK;
    if (o->buf[k->start] == '"')
        return get_string(o, key, out);
    if (o->buf[k->start] != '[')
        return nnt_cfg_bad_type(o, key, "a string or a list of strings");
    char err[NNT_IO_ERRLEN];
    nnt_json j;
    nnt_json_init(&j, o->buf + k->start, k->end - k->start, k->start, o->file, err, sizeof err);
    nnt_cfg_out t = {NULL, 0, 0, 0, 0};
    int rc = nnt_json_expect(&j, '[', key);
    for (int first = 1; rc == 0 && nnt_json_peek(&j) != ']'; first = 0) {
        char *s = NULL;
        if (!first)
            rc = nnt_json_expect(&j, ',', key);
        if (rc == 0 && nnt_json_peek(&j) != '"') {
            free(t.buf);
            return nnt_cfg_bad_type(o, key, "a string or a list of strings");
        }
        if (rc == 0)
            rc = nnt_json_string(&j, &s, NULL, NNT_IO_MAXNAME, 0, key);
        if (rc == 0 && (strchr(s, ',') || !*s))
            rc = nnt_json_fail(&j, "%s: a module name \"%s\" with a comma or empty", key, s);
        if (rc == 0)
            nnt_cfg_add(&t, "%s%s", first ? "" : ",", s);
        free(s);
    }
    if (rc) {
        free(t.buf);
        return nnt_fail(o->ctx, rc, "%s: %s", o->fn, err);
    }
    if (t.oom || !t.buf) {
        free(t.buf);
        if (t.oom)
            return nnt_fail(o->ctx, NNT_E_NOMEM, "%s: out of memory", o->fn);
        t.buf = calloc(1, 1);
        if (!t.buf)
            return nnt_fail(o->ctx, NNT_E_NOMEM, "%s: out of memory", o->fn);
    }
    *out = t.buf;
    return NNT_OK;
}
