#!/bin/sh
# SPDX-License-Identifier: MIT
# Every public C header compiles alone as C99 -pedantic -Werror and as C++ (twice included);
# every C++ header as C++17.
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
# C++ headers (nnt.hpp): alone, twice, as C++17 -pedantic -Werror, with $CXX and with clang++
# when it is there; and instantiated, through a use of every class (tests/test_cpp.cc is
# built with -Werror too). They include only standard headers and nnt.h.
for h in "$top_srcdir"/include/*.hpp; do
    [ -f "$h" ] || continue
    name=$(basename "$h")
    printf '#include <%s>\n#include <%s>\nint nnt_header_check_dummy;\n' "$name" "$name" > "$tmp/hpp.cpp"
    compilers=$CXX
    command -v clang++ > /dev/null 2>&1 && compilers="$compilers clang++"
    for cxx in $compilers; do
        if ! $cxx -std=c++17 -pedantic -Werror -Wall -Wextra -I"$top_srcdir/include" -fsyntax-only "$tmp/hpp.cpp"; then
            echo "FAIL: $name does not compile alone as C++17 -pedantic -Werror with $cxx"; fail=1
        fi
    done
    if grep -E '^ *# *include' "$h" | grep -vE '<(nnt\.h|array|cstddef|cstdint|cstdlib|initializer_list|optional|stdexcept|string|string_view|type_traits|utility|vector)>'; then
        echo "FAIL: $name includes a header other than nnt.h and standard C++ ones"; fail=1
    fi
    [ $fail -eq 0 ] && echo "ok: $name (C++17 with $compilers)"
done
exit $fail
