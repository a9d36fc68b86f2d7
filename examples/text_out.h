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

#endif
