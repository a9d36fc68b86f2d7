// SPDX-License-Identifier: MIT
/* gpt-oss's tools as its chat template (harmony; TRL's gptoss.jinja) writes them in the
 * developer message: "## functions\n\nnamespace functions {\n\n", then each function
 *   // DESCRIPTION
 *   type NAME = (_: {
 *   // PARAMETER'S DESCRIPTION
 *   NAME?: TYPE, // default: DEFAULT,
 *   }) => any;
 * ("() => any;" without parameters), then "} // namespace functions". A parameter's TYPE is
 * the template's render_typescript_type of its JSON schema: string, number (number and
 * integer), boolean, a string enum as "a" | "b", an array as T[] (any[] without items, or
 * when T is "object | object" or longer than 50 characters), a list of types joined by
 * " | ", an object as "{\nNAME?: " then, as the template's unstripped line leaves them, a
 * newline and 16 spaces before each property's type, ", " between them, "}" (object without
 * properties), " | null" after a nullable string or array, any for the rest. "?" marks a
 * parameter its object's "required" does not list. The values are read as Jinja reads them
 * (a key given twice: its last value; a value's truth as Python's); what the template cannot
 * write (a oneOf, a function without a description) is refused naming it. */
#include "../internal.h"
#include "hftok_impl.h"

#include <stdlib.h>
#include <string.h>

#define FN "nnt_sft_encode"

static int put(sbuf *b, const char *s, size_t n)
{
    return hft_sb_put(b, s, n) ? nnt_fail(NULL, NNT_E_NOMEM, FN ": out of host memory") : NNT_OK;
}

static int puts0(sbuf *b, const char *s)
{
    return put(b, s, strlen(s));
}

/* o's value of key as a Python dict holds it (the last one given), NULL if none */
static const jv *get(const jv *o, const char *key)
{
    const jv *v = NULL;
    for (size_t k = 0; o && o->type == JV_OBJ && k < o->n; k++)
        if (strcmp(o->keys[k], key) == 0)
            v = &o->items[k];
    return v;
}

/* Python's truth of a value (absent: false) */
static int truthy(const jv *v)
{
    if (!v)
        return 0;
    switch (v->type) {
    case JV_NULL: return 0;
    case JV_BOOL: return v->b;
    case JV_NUM: return strtod(v->s, NULL) != 0;
    case JV_STR: return v->len > 0;
    default: return v->n > 0;
    }
}

/* 1 when v is the string s */
static int is(const jv *v, const char *s)
{
    return v && v->type == JV_STR && strcmp(v->s, s) == 0;
}

/* 1 when name is in required (a list of strings; absent or false: none) */
static int listed(const jv *required, const char *name)
{
    for (size_t k = 0; truthy(required) && required->type == JV_ARR && k < required->n; k++)
        if (is(&required->items[k], name))
            return 1;
    return 0;
}

/* The characters (code points) of b */
static size_t characters(const sbuf *b)
{
    size_t n = 0;
    for (size_t k = 0; k < b->n; k++)
        n += ((unsigned char)b->p[k] & 0xc0) != 0x80;
    return n;
}

/* The list's strings joined by sep (Jinja's join of strings) */
static int join(sbuf *b, const jv *list, const char *sep, const char *what)
{
    for (size_t k = 0; k < list->n; k++) {
        if (list->items[k].type != JV_STR)
            return nnt_fail(NULL, NNT_E_FORMAT, FN ": tools: %s[%zu] is not a string (the "
                            "gpt-oss template joins them as strings)", what, k);
        if (k > 0)
            NNT_TRY(puts0(b, sep));
        NNT_TRY(put(b, list->items[k].s, list->items[k].len));
    }
    return NNT_OK;
}

static int ts_type(sbuf *b, const jv *spec, int depth);

/* An array's type: ELEMENT[] (| null) */
static int ts_array(sbuf *b, const jv *spec, int depth)
{
    const jv *items = get(spec, "items"), *type = get(items, "type");
    if (!truthy(items)) {
        NNT_TRY(puts0(b, "any[]"));
    } else if (is(type, "string") || is(type, "number") || is(type, "integer") ||
               is(type, "boolean")) {
        NNT_TRY(puts0(b, is(type, "string") ? "string[]" : is(type, "boolean") ? "boolean[]"
                                                                              : "number[]"));
    } else {
        sbuf inner = {NULL, 0, 0};
        int rc = ts_type(&inner, items, depth + 1);
        int any = rc == 0 && ((inner.n == 15 && memcmp(inner.p, "object | object", 15) == 0) ||
                              characters(&inner) > 50);
        if (rc == 0)
            rc = any ? puts0(b, "any[]") : put(b, inner.p, inner.n);
        if (rc == 0 && !any)
            rc = puts0(b, "[]");
        free(inner.p);
        NNT_TRY(rc);
    }
    return truthy(get(spec, "nullable")) ? puts0(b, " | null") : NNT_OK;
}

/* An object's type: {\nNAME?: \n<16 spaces>TYPE, ...} */
static int ts_object(sbuf *b, const jv *spec, int depth)
{
    const jv *props = get(spec, "properties"), *required = get(spec, "required");
    if (!truthy(props) || props->type != JV_OBJ)
        return puts0(b, "object");
    NNT_TRY(puts0(b, "{\n"));
    size_t last = props->n;   /* the last key a dict keeps */
    while (last > 0 && hft_jv_repeated(props, last - 1))
        last--;
    for (size_t k = 0; k < props->n; k++) {
        if (hft_jv_repeated(props, k))
            continue;
        NNT_TRY(puts0(b, props->keys[k]));
        if (!listed(required, props->keys[k]))
            NNT_TRY(puts0(b, "?"));
        NNT_TRY(puts0(b, ": \n                "));
        NNT_TRY(ts_type(b, hft_jv_last_value(props, k), depth + 1));
        if (k + 1 < last)
            NNT_TRY(puts0(b, ", "));
    }
    return puts0(b, "}");
}

/* render_typescript_type of a parameter's schema */
static int ts_type(sbuf *b, const jv *spec, int depth)
{
    if (depth > 16)
        return nnt_fail(NULL, NNT_E_FORMAT, FN ": tools: a parameter's schema nested deeper "
                        "than 16");
    const jv *type = get(spec, "type");
    if (is(type, "array"))
        return ts_array(b, spec, depth);
    if (type && type->type == JV_ARR && type->n > 0)   /* its first alone, or all joined */
        return join(b, type, " | ", "a parameter's type");
    if (truthy(get(spec, "oneOf")))
        return nnt_fail(NULL, NNT_E_FORMAT, FN ": tools: a parameter's schema has oneOf, which "
                        "nnt does not write as the gpt-oss template does (give its type)");
    if (is(type, "string")) {
        const jv *e = get(spec, "enum");
        if (truthy(e) && e->type == JV_ARR) {
            NNT_TRY(puts0(b, "\""));
            NNT_TRY(join(b, e, "\" | \"", "an enum"));
            return puts0(b, "\"");
        }
        if (truthy(e))
            return nnt_fail(NULL, NNT_E_FORMAT, FN ": tools: an enum is not a list");
        NNT_TRY(puts0(b, "string"));
        return truthy(get(spec, "nullable")) ? puts0(b, " | null") : NNT_OK;
    }
    if (is(type, "number") || is(type, "integer"))
        return puts0(b, "number");
    if (is(type, "boolean"))
        return puts0(b, "boolean");
    if (is(type, "object"))
        return ts_object(b, spec, depth);
    return puts0(b, "any");
}

/* One parameter of a function's line: // DESCRIPTION, NAME?: TYPE, // default: D, */
static int parameter(sbuf *b, const char *fname, const char *name, const jv *spec,
                     const jv *required)
{
    const jv *desc = get(spec, "description"), *dflt = get(spec, "default");
    if (truthy(desc) && desc->type != JV_STR)
        return nnt_fail(NULL, NNT_E_FORMAT, FN ": tools: %s's parameter %s: its description is "
                        "not a string", fname, name);
    if (truthy(desc)) {
        NNT_TRY(puts0(b, "// "));
        NNT_TRY(put(b, desc->s, desc->len));
        NNT_TRY(puts0(b, "\n"));
    }
    NNT_TRY(puts0(b, name));
    if (!listed(required, name))
        NNT_TRY(puts0(b, "?"));
    NNT_TRY(puts0(b, ": "));
    NNT_TRY(ts_type(b, spec, 0));
    if (dflt && truthy(get(spec, "enum"))) {   /* the default as it is (a string) */
        if (dflt->type != JV_STR)
            return nnt_fail(NULL, NNT_E_FORMAT, FN ": tools: %s's parameter %s: the default "
                            "of an enum is not a string (the gpt-oss template writes it as "
                            "one)", fname, name);
        NNT_TRY(puts0(b, ", // default: "));
        NNT_TRY(put(b, dflt->s, dflt->len));
    } else if (dflt) {
        NNT_TRY(puts0(b, ", // default: "));
        if (hft_jv_tojson(b, dflt, -1))
            return nnt_fail(NULL, NNT_E_NOMEM, FN ": out of host memory");
    }
    return puts0(b, ",\n");
}

/* One function: // DESCRIPTION\ntype NAME = (_: {\n PARAMETERS }) => any;\n\n */
static int function(sbuf *b, const jv *tool, size_t k)
{
    const jv *f = get(tool, "function");
    const jv *name = get(f, "name"), *desc = get(f, "description");
    if (!f || f->type != JV_OBJ || !name || name->type != JV_STR || !desc ||
        desc->type != JV_STR)
        return nnt_fail(NULL, NNT_E_FORMAT, FN ": tools[%zu] is not {\"type\": \"function\", "
                        "\"function\": {\"name\": string, \"description\": string, ...}} (the "
                        "gpt-oss template writes both)", k);
    const jv *params = get(f, "parameters"), *props = get(params, "properties");
    NNT_TRY(puts0(b, "// "));
    NNT_TRY(put(b, desc->s, desc->len));
    NNT_TRY(puts0(b, "\ntype "));
    NNT_TRY(put(b, name->s, name->len));
    NNT_TRY(puts0(b, " = "));
    if (!truthy(params) || !truthy(props) || props->type != JV_OBJ)
        return puts0(b, "() => any;\n\n");
    NNT_TRY(puts0(b, "(_: {\n"));
    for (size_t p = 0; p < props->n; p++)
        if (!hft_jv_repeated(props, p))
            NNT_TRY(parameter(b, name->s, props->keys[p], hft_jv_last_value(props, p),
                              get(params, "required")));
    return puts0(b, "}) => any;\n\n");
}

/* gpt-oss's built-in tools as its template describes them (render_builtin_tools) */
static const char BROWSER[] =
    "## browser\n"
    "\n"
    "// Tool for browsing.\n"
    "// The `cursor` appears in brackets before each browsing display: `[{cursor}]`.\n"
    "// Cite information from the tool using the following format:\n"
    "// `\xe3\x80\x90" "{cursor}\xe2\x80\xa0" "L{line_start}(-L{line_end})?\xe3\x80\x91"
    "`, for example: `\xe3\x80\x90" "6\xe2\x80\xa0" "L9-L11\xe3\x80\x91" "` or "
    "`\xe3\x80\x90" "8\xe2\x80\xa0" "L3\xe3\x80\x91" "`.\n"
    "// Do not quote more than 10 words directly from the tool output.\n"
    "// sources=web (default: web)\n"
    "namespace browser {\n"
    "\n"
    "// Searches for information related to `query` and displays `topn` results.\n"
    "type search = (_: {\n"
    "query: string,\n"
    "topn?: number, // default: 10\n"
    "source?: string,\n"
    "}) => any;\n"
    "\n"
    "// Opens the link `id` from the page indicated by `cursor` starting at line number "
    "`loc`, showing `num_lines` lines.\n"
    "// Valid link ids are displayed with the formatting: `\xe3\x80\x90" "{id}\xe2\x80\xa0"
    ".*\xe3\x80\x91" "`.\n"
    "// If `cursor` is not provided, the most recent page is implied.\n"
    "// If `id` is a string, it is treated as a fully qualified URL associated with `source`.\n"
    "// If `loc` is not provided, the viewport will be positioned at the beginning of the "
    "document or centered on the most relevant passage, if available.\n"
    "// Use this function without `id` to scroll to a new location of an opened page.\n"
    "type open = (_: {\n"
    "id?: number | string, // default: -1\n"
    "cursor?: number, // default: -1\n"
    "loc?: number, // default: -1\n"
    "num_lines?: number, // default: -1\n"
    "view_source?: boolean, // default: false\n"
    "source?: string,\n"
    "}) => any;\n"
    "\n"
    "// Finds exact matches of `pattern` in the current page, or the page given by `cursor`.\n"
    "type find = (_: {\n"
    "pattern: string,\n"
    "cursor?: number, // default: -1\n"
    "}) => any;\n"
    "\n"
    "} // namespace browser\n"
    "\n";

static const char PYTHON[] =
    "## python\n"
    "\n"
    "Use this tool to execute Python code in your chain of thought. The code will not be "
    "shown to the user. This tool should be used for internal reasoning, but not for code "
    "that is intended to be visible to the user (e.g. when creating plots, tables, or "
    "files).\n"
    "\n"
    "When you send a message containing Python code to python, it will be executed in a "
    "stateful Jupyter notebook environment. python will respond with the output of the "
    "execution or time out after 120.0 seconds. The drive at '/mnt/data' can be used to "
    "save and persist user files. Internet access for this session is UNKNOWN. Depends on "
    "the cluster.\n"
    "\n";


int hft_harmony_builtin(sbuf *b, int browser, int python)
{
    NNT_TRY(puts0(b, "# Tools\n\n"));
    if (browser)
        NNT_TRY(puts0(b, BROWSER));
    return python ? puts0(b, PYTHON) : NNT_OK;
}

int hft_harmony_tools(sbuf *b, const jv *tools)
{
    NNT_TRY(puts0(b, "## functions\n\nnamespace functions {\n\n"));
    for (size_t k = 0; k < tools->n; k++)
        NNT_TRY(function(b, &tools->items[k], k));
    return puts0(b, "} // namespace functions");
}
