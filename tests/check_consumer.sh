#!/bin/sh
# Install into a staging directory, then build every C example of README (```c blocks) as C
# and as C++ with nothing but `pkg-config --cflags --libs nnt`, and run them.
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
    /^```$/ { inblock = 0; next }
    inblock { print > file }' "$top_srcdir/README"
[ -s "$stage/example1.c" ] || { echo "FAIL: no \`\`\`c example block in README"; exit 1; }
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
rm -rf "$stage"
echo "ok: installed library consumed from C and C++ via pkg-config"
