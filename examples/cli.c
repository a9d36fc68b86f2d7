/* SPDX-License-Identifier: MIT */
/* The command line of nnt's programs: parsing, errors, --help and --version from a table
 * (examples/cli.h); the defaults of the chat options nnt-tokenize and nnt-generate share. */
#include "cli.h"

#include <nnt.h>

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int cli_error(const char *program, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "%s: ", program);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    return 2;
}

static void *dst(const void *o, const cli_option *d)
{
    return (char *)o + d->off;
}

const cli_option *cli_find(const cli_program *p, const char *name, size_t len)
{
    for (const cli_option *d = p->options; d < p->options + p->noptions; d++) {
        if (!d->name || strlen(d->name) != len || strncmp(d->name, name, len))
            continue;
        return d->type == CLI_ALIAS ? cli_find(p, d->help, strlen(d->help)) : d;
    }
    return NULL;
}

/* Every option at its initial value (the table's def). */
static void set_defaults(const cli_program *p, void *o)
{
    for (const cli_option *d = p->options; d < p->options + p->noptions; d++) {
        void *v = dst(o, d);
        if (d->type == CLI_INT)
            *(int64_t *)v = d->def ? strtoll(d->def, NULL, 10) : 0;
        else if (d->type == CLI_REAL)
            *(double *)v = d->def ? strtod(d->def, NULL) : 0;
        else if (d->type == CLI_STR)
            *(const char **)v = d->def;
        else if (d->type == CLI_FLAG)
            *(int *)v = 0;
        else if (d->type == CLI_CHOICE)
            for (int k = *(int *)v = -1; d->def && d->choices[++k];)
                if (!strcmp(d->choices[k], d->def))
                    *(int *)v = k;
    }
}

/* "1 to 256", "0 to 1, 0 excluded": the values d allows. */
static void range_text(const cli_option *d, char *buf, size_t size)
{
    int n = d->type == CLI_INT
                ? snprintf(buf, size, "%lld to %lld", (long long)d->min, (long long)d->max)
                : snprintf(buf, size, "%g to %g", d->min, d->max);
    if (d->flags & (CLI_OPEN_MIN | CLI_OPEN_MAX))
        snprintf(buf + n, size - (size_t)n, ", %g excluded",
                 (d->flags & CLI_OPEN_MIN) ? d->min : d->max);
}

static int number(const cli_program *p, const cli_option *d, const char *shown, const char *s,
                  double *v)
{
    char *end, range[96];
    errno = 0;
    range_text(d, range, sizeof range);
    if (d->type == CLI_INT) {
        long long x = strtoll(s, &end, 10);
        if (end == s || *end)
            return cli_error(p->name, "%s: '%s' is not an integer", shown, s);
        if (errno == ERANGE)   /* an integer, only too large */
            return cli_error(p->name, "%s: %s is out of range (%s)", shown, s, range);
        *v = (double)x;
    } else {
        *v = strtod(s, &end);
        if (end == s || *end || errno || !isfinite(*v))
            return cli_error(p->name, "%s: '%s' is not a finite number", shown, s);
    }
    if (*v < d->min || *v > d->max || ((d->flags & CLI_OPEN_MIN) && *v == d->min) ||
        ((d->flags & CLI_OPEN_MAX) && *v == d->max))
        return cli_error(p->name, "%s: %s is out of range (%s)", shown, s, range);
    return 0;
}

static int choice(const cli_program *p, const cli_option *d, const char *shown, int *v,
                  const char *s)
{
    char list[256] = "";
    for (int k = 0; d->choices[k]; k++) {
        if (!strcmp(d->choices[k], s)) {
            *v = k;
            return 0;
        }
        snprintf(list + strlen(list), sizeof list - strlen(list), "%s%s", k ? ", " : "",
                 d->choices[k]);
    }
    return cli_error(p->name, "%s: '%s' is not one of %s", shown, s, list);
}

int cli_set(const cli_program *p, const cli_option *d, void *o, const char *s,
            const char *shown)
{
    char name[128];
    double v = 0;
    void *at = dst(o, d);
    if (!shown)
        snprintf(name, sizeof name, "--%s", d->name), shown = name;
    switch (d->type) {
    case CLI_FLAG:
        *(int *)at = 1;
        return 0;
    case CLI_STR:
        if (!*s)
            return cli_error(p->name, "%s: empty value", shown);
        *(const char **)at = s;
        return 0;
    case CLI_CHOICE:
        return choice(p, d, shown, at, s);
    case CLI_INT:
    case CLI_REAL:
        if (number(p, d, shown, s, &v))
            return 2;
        if (d->type == CLI_INT)
            *(int64_t *)at = (int64_t)v;
        else
            *(double *)at = v;
        return 0;
    case CLI_GROUP:
    case CLI_ALIAS:
        break;
    }
    return 2;
}

void cli_value_text(const cli_option *d, const void *o, char *out, size_t size)
{
    const void *p = dst(o, d);
    if (d->type == CLI_STR)
        snprintf(out, size, "%s", *(const char *const *)p ? *(const char *const *)p : "");
    else if (d->type == CLI_INT)
        snprintf(out, size, "%lld", (long long)*(const int64_t *)p);
    else if (d->type == CLI_REAL)
        snprintf(out, size, "%.17g", *(const double *)p);
    else
        snprintf(out, size, "%d", *(const int *)p);
}

const char *cli_choice_name(const cli_program *p, const char *option, int value)
{
    const cli_option *d = cli_find(p, option, strlen(option));
    for (int k = 0; d && d->choices && d->choices[k]; k++)
        if (k == value)
            return d->choices[k];
    return "?";
}

/* An entry's help text with its later lines indented to column 24 (and %s filled). */
static void help_text(const cli_program *p, const char *h, char *out, size_t size)
{
    size_t n = 0;
    for (; *h && n + 32 < size; h++)
        n += (size_t)(*h == '\n' ? sprintf(out + n, "\n%24s", "") : sprintf(out + n, "%c", *h));
    out[n] = '\0';
    if (strstr(out, "%s")) {
        char text[2048];
        snprintf(text, sizeof text, "%s", out);
        snprintf(out, size, text, p->help_fill ? p->help_fill : "");
    }
}

/* --help from the table: the options of an entry without help text share the next one's
 * line; help lines after the first start at column 24. */
static int print_usage(const cli_program *p)
{
    char line[256] = "", help[2048];
    int shared = 0;   /* options on the line before this one */
    fputs(p->head, stdout);
    for (const cli_option *d = p->options; d < p->options + p->noptions; d++) {
        if (d->type == CLI_GROUP)
            puts(d->help);
        if (d->type == CLI_GROUP || d->type == CLI_ALIAS)
            continue;
        size_t n = strlen(line);
        if (n + 4 + strlen(d->name) + (d->arg ? strlen(d->arg) : 0) > 80)
            puts(line), n = 0;   /* a long list of options goes on over lines */
        snprintf(line + n, sizeof line - n, "%s--%s%s%s", n ? " " : "  ", d->name,
                 d->arg ? " " : "", d->arg ? d->arg : "");
        if (!d->help && ++shared)
            continue;
        help_text(p, d->help, help, sizeof help);
        n = strlen(line);
        printf("%s%*s%s\n", line, *help ? (n < 24 ? 24 - (int)n : shared ? 3 : 2) : 0, "",
               help);
        line[0] = '\0', shared = 0;
    }
    printf("  --help, --version\n%s", p->tail);
    return 1;
}

static int print_version(const cli_program *p)
{
    const char *lib;
    nnt_version(NULL, &lib);
    printf("%s (nnt) %d.%d.%d, library %s\n", p->name, NNT_VERSION_MAJOR, NNT_VERSION_MINOR,
           NNT_VERSION_PATCH, lib ? lib : "?");
    return 1;
}

/* The entry an argument names ("--name[=value]", or "-c" for a name of one character), its
 * spelling for messages and its value after '='; NULL (after a message) when unknown. */
static const cli_option *option_of(const cli_program *p, const char *arg, char *shown,
                                   size_t size, const char **value)
{
    const char *name = arg + (arg[1] == '-' ? 2 : 1), *eq = strchr(name, '=');
    size_t len = eq ? (size_t)(eq - name) : strlen(name);
    const cli_option *d = arg[1] == '-' || len == 1 ? cli_find(p, name, len) : NULL;
    snprintf(shown, size, "%.*s", (int)(name - arg + len), arg);
    *value = eq ? eq + 1 : NULL;
    if (!d)
        cli_error(p->name, "unknown option '%s' (see %s --help)", shown, p->name);
    return d;
}

int cli_parse(const cli_program *p, int argc, char **argv, void *o, unsigned char *given,
              char **operands, int *noperands)
{
    char shown[128];
    int options = 1;   /* options still read ("--" ends them) */
    set_defaults(p, o);
    if (noperands)
        *noperands = 0;
    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i], *value;
        if (options && (!strcmp(arg, "--help") || !strcmp(arg, "-h")))
            return print_usage(p);
        if (options && (!strcmp(arg, "--version") || !strcmp(arg, "-V")))
            return print_version(p);
        if (p->operands && options && !strcmp(arg, "--")) {
            options = 0;
            continue;
        }
        if (!options || arg[0] != '-' || !arg[1] || !strcmp(arg, "--")) {
            if (!p->operands)
                return cli_error(p->name, "unexpected argument '%s' (see %s --help)", arg,
                                 p->name);
            operands[(*noperands)++] = argv[i];
            continue;
        }
        const cli_option *d = option_of(p, arg, shown, sizeof shown, &value);
        if (!d)
            return 2;
        if (d->type == CLI_FLAG && value)
            return cli_error(p->name, "%s takes no value", shown);
        if (d->type != CLI_FLAG && !value) {
            if (i + 1 >= argc)
                return cli_error(p->name, "%s needs a value", shown);
            value = argv[++i];
        }
        if (cli_set(p, d, o, value, shown))
            return 2;
        if (given)
            given[d - p->options] = 1;
    }
    return 0;
}

/* ---- the chat options nnt-tokenize and nnt-generate share ---------------------------------- */

char *cli_config_beside(const char *tokenizer_json)
{
    if (!tokenizer_json)
        return NULL;
    struct stat st;
    size_t n = strlen(tokenizer_json);
    char *p = malloc(n + 32);
    if (!p)
        return NULL;
    if (stat(tokenizer_json, &st) == 0 && S_ISDIR(st.st_mode)) {
        snprintf(p, n + 32, "%s/tokenizer_config.json", tokenizer_json);
    } else {
        const char *slash = strrchr(tokenizer_json, '/');
        size_t d = slash ? (size_t)(slash - tokenizer_json) + 1 : 0;
        memcpy(p, tokenizer_json, d);
        strcpy(p + d, "tokenizer_config.json");
    }
    if (access(p, R_OK) == 0)
        return p;
    free(p);
    return NULL;
}

const char *const cli_problem_types[] = {"single_label_classification", "regression",
                                         "multi_label_classification", NULL};

const char *const cli_chat_templates[] = {"auto",     "none",       "chatml",      "llama3",
                                          "qwen2.5",  "qwen3",      "llama3.1",    "llama3.2",
                                          "gemma",    "gemma2",     "gemma3",      "phi3",
                                          "phi3.5",   "qwen3-2507", "deepseek-r1", "gpt-oss",
                                          NULL};

nnt_chat_template cli_chat_template(const char *name)
{
    nnt_chat_template t = NNT_CHAT_AUTO;
    if (strcmp(name, "auto") != 0 && nnt_chat_template_from_name(name, &t) != 0)
        t = NNT_CHAT_AUTO;   /* (the option's choices are names the library knows) */
    return t;
}

int64_t cli_names_count(const char *list)
{
    int64_t count = 1;
    for (const char *c = list; *c; c++)
        count += *c == ',';
    return count;
}

int cli_names(const char *list, const char ***names, int64_t *n)
{
    int64_t count = cli_names_count(list);
    char *copy = strdup(list);
    const char **out = calloc((size_t)count, sizeof *out);
    if (!copy || !out) {
        free(copy);
        free(out);
        return -1;
    }
    char *s = copy;
    for (int64_t k = 0; k < count; k++) {
        char *comma = strchr(s, ',');
        if (comma)
            *comma = '\0';
        out[k] = s;
        s = comma ? comma + 1 : s + strlen(s);
    }
    *names = out, *n = count;
    return 0;
}
