#!/bin/sh
# SPDX-License-Identifier: MIT
# tests/mutate.sh's list is current: the script parses, and each mutation's expression
# changes exactly one line of the source as it is now (mutate.sh -c; no build). A mutation
# whose line was rewritten must be updated with the code, or the mutation check proves less.
set -u
: "${top_srcdir:?}"
sh -n "$top_srcdir/tests/mutate.sh" || { echo "FAIL: tests/mutate.sh does not parse"; exit 1; }
sh "$top_srcdir/tests/mutate.sh" -c || { echo "FAIL: mutations out of date"; exit 1; }
echo "PASS: check_mutations"
