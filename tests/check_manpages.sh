#!/bin/sh
# SPDX-License-Identifier: MIT
# Every public function has a man3 page (a page or a .so link); every page (man1, man3, man7)
# is installed and mandoc-lint clean.
set -u
: "${top_srcdir:?}"
man3="$top_srcdir/man/man3"
tmp=$(mktemp -d) || exit 99
trap 'rm -rf "$tmp"' EXIT
fail=0
sh "$top_srcdir/tests/public_functions.sh" "$top_srcdir/include/nnt.h" > "$tmp/declared" ||
    { echo "FAIL: tests/public_functions.sh failed on include/nnt.h"; exit 1; }
ndeclared=$(wc -l < "$tmp/declared")
if [ "$ndeclared" -lt 10 ]; then
    echo "FAIL: tests/public_functions.sh found $ndeclared public functions in include/nnt.h (the parser no longer matches the header?)"
    exit 1
fi
while read -r fn; do
    page="$man3/$fn.3"
    if [ ! -f "$page" ]; then
        echo "FAIL: no man page for $fn (expected man/man3/$fn.3)"; fail=1; continue
    fi
    target=$(sed -n 's/^\.so man3\/\(.*\)$/\1/p' "$page")
    if [ -n "$target" ] && [ ! -f "$man3/$target" ]; then
        echo "FAIL: $fn.3 links to missing man3/$target"; fail=1
    fi
    page_doc=$page
    [ -n "$target" ] && page_doc="$man3/$target"
    if ! grep -q "^\.Fn $fn\b\|^\.Fo $fn\b" "$page_doc"; then
        echo "FAIL: $(basename "$page_doc") does not document $fn in its synopsis"; fail=1
    fi
done < "$tmp/declared"
for page in "$top_srcdir"/man/man3/*.3 "$top_srcdir"/man/man1/*.1 "$top_srcdir"/man/man7/*.7; do
    rel=${page#"$top_srcdir"/}
    cat "$top_srcdir/man/Makefile.inc" "$top_srcdir"/lib/*/*.am "$top_srcdir"/examples/*.am 2>/dev/null | grep -q "[[:space:]=]$rel\b" ||
        { echo "FAIL: $rel is not installed (in no dist_man*_MANS of man/Makefile.inc, lib/*/*.am or examples/*.am)"; fail=1; }
done
if [ -z "${MANDOC:-}" ] || [ ! -x "$MANDOC" ]; then
    echo "SKIP: mandoc not found, pages not linted (Debian: apt-get install mandoc)"
    [ $fail -eq 0 ] && exit 77
    exit $fail
fi
for page in "$top_srcdir"/man/man3/*.3 "$top_srcdir"/man/man1/*.1 "$top_srcdir"/man/man7/*.7; do
    [ -f "$page" ] || continue
    grep -q '^\.so ' "$page" && continue
    out=$("$MANDOC" -Tlint -Wwarning "$page" 2>&1)
    if [ -n "$out" ]; then
        echo "FAIL: mandoc -Tlint $(basename "$page"):"; echo "$out"; fail=1
    fi
done
[ $fail -eq 0 ] && echo "ok: $(wc -l < "$tmp/declared") functions documented, pages lint-clean"
exit $fail
