#!/bin/sh
# Every public header compiles alone as C99 -pedantic -Werror and as C++ (twice included).
set -u
: "${top_srcdir:?}" "${CC:?}" "${CXX:?}"
tmp=$(mktemp -d) || exit 99
trap 'rm -rf "$tmp"' EXIT
fail=0
for h in "$top_srcdir"/include/*.h; do
    name=$(basename "$h")
    printf '#include <%s>\n#include <%s>\nint nnt_header_check_dummy;\n' "$name" "$name" > "$tmp/c.c"
    cp "$tmp/c.c" "$tmp/cxx.cpp"
    for std in c99 c11; do
        if ! $CC -std=$std -pedantic -Werror -Wall -Wextra -I"$top_srcdir/include" -fsyntax-only "$tmp/c.c"; then
            echo "FAIL: $name does not compile alone as $std -pedantic -Werror"; fail=1
        fi
    done
    for std in c++11 c++17; do
        if ! $CXX -std=$std -pedantic -Werror -Wall -Wextra -I"$top_srcdir/include" -fsyntax-only "$tmp/cxx.cpp"; then
            echo "FAIL: $name does not compile as $std"; fail=1
        fi
    done
    # Only standard headers: no StarPU or CUDA type can leak into the API.
    if grep -E '^ *# *include' "$h" | grep -vE '<(stddef|stdint)\.h>'; then
        echo "FAIL: $name includes a non-standard header"; fail=1
    fi
    [ $fail -eq 0 ] && echo "ok: $name (C99, C11, C++11, C++17)"
done
exit $fail
