/* SPDX-License-Identifier: MIT */
/* Decoded text written to a terminal by nnt-train (its sample) and nnt-generate. */
#ifndef NNT_EXAMPLES_TEXT_OUT_H
#define NNT_EXAMPLES_TEXT_OUT_H

#include <stddef.h>
#include <stdio.h>

/* Write s[0..len) to f with newlines, tabs, printable ASCII and valid UTF-8 as they are and
 * every other byte as \xHH, so that no control sequence reaches a terminal. A valid start of
 * a UTF-8 character cut off by the end is held back (not written) unless final. Returns the
 * bytes written or escaped. */
size_t text_out_escaped(FILE *f, const unsigned char *s, size_t len, int final);

/* Write s[0..len) to f as a JSON string (with its quotes): valid UTF-8 as it is, '"' and '\\'
 * escaped, control characters as \n, \t or \u00XX, and each byte that does not belong to a
 * valid UTF-8 character (a token that ends inside one) as U+FFFD. */
void text_out_json(FILE *f, const unsigned char *s, size_t len);

#endif
