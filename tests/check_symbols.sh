#!/bin/sh
# SPDX-License-Identifier: MIT
# libnnt.so exports exactly the NNT_API functions of include/nnt.h, and the version script
# lists exactly those names.
set -u
: "${top_srcdir:?}" "${top_builddir:?}"
lib="$top_builddir/.libs/libnnt.so"
[ -f "$lib" ] || { echo "FAIL: $lib not built"; exit 1; }
tmp=$(mktemp -d) || exit 99
trap 'rm -rf "$tmp"' EXIT
sh "$top_srcdir/tests/public_functions.sh" "$top_srcdir/include/nnt.h" > "$tmp/declared"
nm -D --defined-only "$lib" | awk '$2 ~ /^[TDBRVW]$/ {print $3}' | sed 's/@.*//' | sort -u > "$tmp/exported"
grep -oE '^ *nnt_[a-z0-9_]+;' "$top_srcdir/lib/libnnt.map" | tr -d ' ;' | sort -u > "$tmp/mapped"
fail=0
n=$(wc -l < "$tmp/declared")
[ "$n" -gt 0 ] || { echo "FAIL: found no NNT_API declarations"; exit 1; }
if ! diff -u "$tmp/declared" "$tmp/exported"; then
    echo "FAIL: exported symbols (+) differ from NNT_API declarations (-)"; fail=1
fi
if ! diff -u "$tmp/declared" "$tmp/mapped"; then
    echo "FAIL: lib/libnnt.map (+) differs from NNT_API declarations (-)"; fail=1
fi
if grep -v '^nnt_' "$tmp/exported"; then
    echo "FAIL: symbols without the nnt_ prefix are exported"; fail=1
fi
[ $fail -eq 0 ] && echo "ok: $n exported symbols, all nnt_*, all declared NNT_API"
exit $fail
