// SPDX-License-Identifier: MIT
/* The options string of training checkpoints (nnt_train_state.options, a JSON object that
 * nnt_trainer records): one member's value as text (nnt_options_get). */
#include "../internal.h"
#include "../io/io.h"

#include <stdlib.h>
#include <string.h>

#define OPTIONS_MAXDEPTH 8

/* Copy text[0..n) to buf (cap bytes, NUL-terminated); NNT_E_INVAL when it does not fit. */
static int put(const char *key, const char *text, size_t n, char *buf, size_t cap)
{
    if (n >= cap)
        return nnt_fail(NULL, NNT_E_INVAL, "nnt_options_get: the value of \"%s\" has %zu "
                        "bytes, buf holds %zu with its NUL", key, n, cap);
    memcpy(buf, text, n);
    buf[n] = '\0';
    return NNT_OK;
}

/* The value at the cursor into buf: a string decoded, anything else as written. */
static int value_text(nnt_json *j, const char *key, char *buf, size_t cap)
{
    if (nnt_json_peek(j) == '"') {
        char *s = NULL;
        size_t n = 0;
        int rc = nnt_json_string(j, &s, &n, (size_t)-1 / 2, 0, "in a value");
        if (rc == NNT_OK)
            rc = put(key, s, n, buf, cap);
        free(s);
        return rc;
    }
    size_t start = j->pos;
    NNT_TRY(nnt_json_skip(j, OPTIONS_MAXDEPTH, "in a value"));
    while (start < j->pos && strchr(" \t\r\n", j->buf[start]))
        start++;
    return put(key, j->buf + start, j->pos - start, buf, cap);
}

/* Search the object at the cursor (depth levels deep) for key, in document order, into the
 * objects it holds too; *found 1 when the value was copied. */
static int search(nnt_json *j, const char *key, char *buf, size_t cap, int *found, int depth)
{
    NNT_TRY(nnt_json_expect(j, '{', "to open an object"));
    if (nnt_json_peek(j) == '}')
        return nnt_json_expect(j, '}', "");
    for (;;) {
        char *name = NULL;
        NNT_TRY(nnt_json_string(j, &name, NULL, 4096, 0, "as a member's name"));
        int same = strcmp(name, key) == 0, rc = nnt_json_expect(j, ':', "after a name");
        free(name);
        NNT_TRY(rc);
        if (same)
            return *found = 1, value_text(j, key, buf, cap);
        if (nnt_json_peek(j) == '{' && depth < OPTIONS_MAXDEPTH)
            NNT_TRY(search(j, key, buf, cap, found, depth + 1));
        else
            NNT_TRY(nnt_json_skip(j, OPTIONS_MAXDEPTH, "in a value"));
        if (*found)
            return NNT_OK;
        if (nnt_json_peek(j) == '}')
            return nnt_json_expect(j, '}', "");
        NNT_TRY(nnt_json_expect(j, ',', "between members"));
    }
}

NNT_API int nnt_options_get(const char *options, const char *key, char *buf, size_t cap,
                            int *found)
{
    if (!options || !key || !buf || !cap || !found)
        return nnt_fail(NULL, NNT_E_INVAL, "nnt_options_get: options, key, buf and found "
                        "must not be NULL, cap not 0");
    char err[512] = "";
    nnt_json j;
    *found = 0;
    buf[0] = '\0';
    nnt_json_init(&j, options, strlen(options), 0, "nnt_options_get: options", err, sizeof err);
    int rc = search(&j, key, buf, cap, found, 0);
    if (rc && err[0])
        return nnt_fail(NULL, rc, "%s", err);
    return rc;
}
