/* SPDX-License-Identifier: MIT */
/* The options string nnt-train saves in its checkpoints (nnt_train_state.options): reading
 * its values back, for nnt-train --resume and nnt-generate --checkpoint. */
#include "saved_options.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The value of "key" (its first character); NULL when absent. */
static const char *value_of(const char *options, const char *key)
{
    char pat[64];
    snprintf(pat, sizeof pat, "\"%s\": ", key);
    const char *p = options ? strstr(options, pat) : NULL;
    return p ? p + strlen(pat) : NULL;
}

char *saved_option_str(const char *options, const char *key)
{
    const char *p = value_of(options, key);
    if (!p || *p != '"')
        return NULL;
    p++;
    char *out = malloc(strlen(p) + 1), *q = out;
    if (!out)
        return NULL;
    for (; *p && *p != '"'; p++)
        *q++ = *p == '\\' && p[1] ? *++p : *p;
    *q = '\0';
    return out;
}

char *saved_option_text(const char *options, const char *key)
{
    const char *p = value_of(options, key);
    if (!p)
        return NULL;
    if (*p == '"')
        return saved_option_str(options, key);
    size_t n = strspn(p, "+-.0123456789eE");
    char *out = n ? malloc(n + 1) : NULL;
    if (out) {
        memcpy(out, p, n);
        out[n] = '\0';
    }
    return out;
}
