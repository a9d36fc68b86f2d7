#!/bin/sh
# SPDX-License-Identifier: MIT
# Install into a staging directory, then build every C example of README (```c blocks) as C
# and as C++, and every C++ example (```cpp blocks, nnt.hpp) as C++17, with nothing but
# `pkg-config --cflags --libs nnt`, and run them; then the first C example and the C++
# examples from CMake and Meson. A C++ example gets a tiny Hugging Face Llama directory
# (tests/fixtures/llama_tiny/gqa) as its argument.
set -u
: "${top_srcdir:?}" "${top_builddir:?}" "${MAKE:?}" "${CC:?}" "${CXX:?}" "${NNT_LIBDIR:?}" "${NNT_PKGCONFIGDIR:?}"
PKG_CONFIG=${PKG_CONFIG:-pkg-config}
stage="$top_builddir/tests/consumer.tmp"
rm -rf "$stage" && mkdir -p "$stage" || exit 99
if ! $MAKE -s -C "$top_builddir" install DESTDIR="$stage/root" > "$stage/install.log" 2>&1; then
    cat "$stage/install.log"; echo "FAIL: make install DESTDIR=... failed"; exit 1
fi
# The examples are README's ```c blocks (1: the minimal example, 2: training a GPT-2).
awk -v dir="$stage" '
    /^```c$/ { n++; file = dir "/example" n ".c"; inblock = 1; next }
    /^```cpp$/ { m++; file = dir "/cppexample" m ".cpp"; inblock = 1; next }
    /^```$/ { inblock = 0; next }
    inblock { print > file }' "$top_srcdir/README"
[ -s "$stage/example1.c" ] || { echo "FAIL: no \`\`\`c example block in README"; exit 1; }
[ -s "$stage/cppexample1.cpp" ] || { echo "FAIL: no \`\`\`cpp example block in README"; exit 1; }
hfdir="$top_srcdir/tests/fixtures/llama_tiny/gqa"
cppexamples=$(cd "$stage" && ls cppexample*.cpp | sed 's/\.cpp$//')
# run_cpp WHERE PROG: a C++ example run in WHERE on the fixture, with the staged libnnt
run_cpp() {
    if ! (cd "$1" && "./$2" "$hfdir") > "$1/$(basename "$2").out" 2>&1; then
        cat "$1/$(basename "$2").out"; echo "FAIL: C++ example $2 ($1) exited with an error"; exit 1
    fi
    cat "$1/$(basename "$2").out"
    [ -f "$1/finetuned/model.safetensors" ] && [ -f "$1/finetuned/config.json" ] ||
        { echo "FAIL: C++ example $2 ($1) saved no Hugging Face directory"; exit 1; }
    rm -rf "$1/finetuned"
    ldd "$1/$2" | grep -q "$stage/root" ||
        { echo "FAIL: $2 ($1) did not load the staged libnnt"; exit 1; }
}
export PKG_CONFIG_PATH="$stage/root$NNT_PKGCONFIGDIR" PKG_CONFIG_SYSROOT_DIR="$stage/root"
flags=$($PKG_CONFIG --cflags --libs nnt) || { echo "FAIL: pkg-config does not find nnt"; exit 1; }
echo "pkg-config --cflags --libs nnt: $flags"
export LD_LIBRARY_PATH="$stage/root$NNT_LIBDIR${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
for src in "$stage"/example*.c; do
    ex=$(basename "$src" .c)
    cp "$src" "$stage/$ex.cpp"
    $CC -std=c99 -Wall -Werror "$src" $flags -o "$stage/${ex}_c" ||
        { echo "FAIL: README $ex does not compile as C99"; exit 1; }
    $CXX -Wall -Werror "$stage/$ex.cpp" $flags -o "$stage/${ex}_cxx" ||
        { echo "FAIL: README $ex does not compile as C++"; exit 1; }
    for prog in "${ex}_c" "${ex}_cxx"; do
        # run inside the staging directory: examples may write files
        if ! (cd "$stage" && "./$prog") > "$stage/$prog.out" 2>&1; then
            cat "$stage/$prog.out"; echo "FAIL: $prog exited with an error"; exit 1
        fi
        cat "$stage/$prog.out"
        # it must have used the staged library, not another install
        ldd "$stage/$prog" | grep -q "$stage/root" ||
            { echo "FAIL: $prog did not load the staged libnnt"; exit 1; }
    done
done

for ex in $cppexamples; do
    $CXX -std=c++17 -Wall -Wextra -pedantic -Werror "$stage/$ex.cpp" $flags -o "$stage/$ex" ||
        { echo "FAIL: README $ex does not compile as C++17"; exit 1; }
    run_cpp "$stage" "$ex"
done

# The same minimal example (README's first block) from CMake (pkg_check_modules with an
# imported target) and Meson (dependency('nnt')), each as C and C++, built and run.
ran=
if command -v cmake > /dev/null; then
    mkdir -p "$stage/cmake"
    cp "$stage/example1.c" "$stage/example1.cpp" "$stage/cmake/"
    cat > "$stage/cmake/CMakeLists.txt" <<'CMAKE'
cmake_minimum_required(VERSION 3.16)
project(nnt_consumer C CXX)
find_package(PkgConfig REQUIRED)
pkg_check_modules(NNT REQUIRED IMPORTED_TARGET nnt)
add_executable(example1_c example1.c)
set_property(TARGET example1_c PROPERTY C_STANDARD 99)
target_link_libraries(example1_c PRIVATE PkgConfig::NNT)
add_executable(example1_cxx example1.cpp)
target_link_libraries(example1_cxx PRIVATE PkgConfig::NNT)
CMAKE
    for ex in $cppexamples; do
        cp "$stage/$ex.cpp" "$stage/cmake/"
        printf 'add_executable(%s %s.cpp)\nset_target_properties(%s PROPERTIES CXX_STANDARD 17 CXX_STANDARD_REQUIRED ON CXX_EXTENSIONS OFF)\ntarget_link_libraries(%s PRIVATE PkgConfig::NNT)\n' \
            "$ex" "$ex" "$ex" "$ex" >> "$stage/cmake/CMakeLists.txt"
    done
    if ! (cd "$stage/cmake" && cmake -S . -B build > cmake.log 2>&1 &&
          cmake --build build >> cmake.log 2>&1); then
        cat "$stage/cmake/cmake.log"; echo "FAIL: the CMake consumer does not build"; exit 1
    fi
    for prog in example1_c example1_cxx; do
        (cd "$stage/cmake" && "./build/$prog") > "$stage/cmake/$prog.out" 2>&1 ||
            { cat "$stage/cmake/$prog.out"; echo "FAIL: CMake-built $prog failed"; exit 1; }
        ldd "$stage/cmake/build/$prog" | grep -q "$stage/root" ||
            { echo "FAIL: CMake-built $prog did not load the staged libnnt"; exit 1; }
    done
    for ex in $cppexamples; do run_cpp "$stage/cmake" "build/$ex"; done
    ran="$ran CMake"
else
    echo "SKIP (part): cmake not found (Debian: apt-get install cmake): no CMake consumer check"
fi
if command -v meson > /dev/null && command -v ninja > /dev/null; then
    mkdir -p "$stage/meson"
    cp "$stage/example1.c" "$stage/example1.cpp" "$stage/meson/"
    cat > "$stage/meson/meson.build" <<'MESON'
project('nnt_consumer', 'c', 'cpp', default_options: ['c_std=c99'])
nnt = dependency('nnt')
executable('example1_c', 'example1.c', dependencies: nnt)
executable('example1_cxx', 'example1.cpp', dependencies: nnt)
MESON
    for ex in $cppexamples; do
        cp "$stage/$ex.cpp" "$stage/meson/"
        printf "executable('%s', '%s.cpp', dependencies: nnt, override_options: ['cpp_std=c++17'])\n" \
            "$ex" "$ex" >> "$stage/meson/meson.build"
    done
    if ! (cd "$stage/meson" && meson setup build > meson.log 2>&1 &&
          ninja -C build >> meson.log 2>&1); then
        cat "$stage/meson/meson.log"; echo "FAIL: the Meson consumer does not build"; exit 1
    fi
    for prog in example1_c example1_cxx; do
        (cd "$stage/meson" && "./build/$prog") > "$stage/meson/$prog.out" 2>&1 ||
            { cat "$stage/meson/$prog.out"; echo "FAIL: Meson-built $prog failed"; exit 1; }
        ldd "$stage/meson/build/$prog" | grep -q "$stage/root" ||
            { echo "FAIL: Meson-built $prog did not load the staged libnnt"; exit 1; }
    done
    for ex in $cppexamples; do run_cpp "$stage/meson" "build/$ex"; done
    ran="$ran Meson"
else
    echo "SKIP (part): meson or ninja not found (Debian: apt-get install meson ninja-build): no Meson consumer check"
fi
# pkg-config --static: the private flags of the dependencies must resolve
$PKG_CONFIG --static --libs nnt > /dev/null ||
    { echo "FAIL: pkg-config --static --libs nnt fails"; exit 1; }
rm -rf "$stage"
echo "ok: installed library consumed from C, C++ and C++17 (nnt.hpp) via pkg-config${ran:+, and via$ran}"
