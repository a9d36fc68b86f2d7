/* SPDX-License-Identifier: MIT */
/* Values of the options string nnt-train saves in its checkpoints (a flat JSON object whose
 * strings escape only '"' and '\'). */
#ifndef NNT_EXAMPLES_SAVED_OPTIONS_H
#define NNT_EXAMPLES_SAVED_OPTIONS_H

/* The string value of "key" (malloc'd, unescaped); NULL when absent or out of memory. */
char *saved_option_str(const char *options, const char *key);
/* The value of "key" as text (malloc'd): a string unescaped, a number as written; NULL when
 * absent, of another type or out of memory. */
char *saved_option_text(const char *options, const char *key);

#endif
