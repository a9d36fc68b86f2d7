#!/bin/sh
# Install into a staging directory, then build README's minimal example as C and as C++ with
# nothing but `pkg-config --cflags --libs nnt`, and run both.
set -u
: "${top_srcdir:?}" "${top_builddir:?}" "${MAKE:?}" "${CC:?}" "${CXX:?}" "${NNT_LIBDIR:?}" "${NNT_PKGCONFIGDIR:?}"
PKG_CONFIG=${PKG_CONFIG:-pkg-config}
stage="$top_builddir/tests/consumer.tmp"
rm -rf "$stage" && mkdir -p "$stage" || exit 99
if ! $MAKE -s -C "$top_builddir" install DESTDIR="$stage/root" > "$stage/install.log" 2>&1; then
    cat "$stage/install.log"; echo "FAIL: make install DESTDIR=... failed"; exit 1
fi
# The example is the first ```c block of README.
sed -n '/^```c$/,/^```$/p' "$top_srcdir/README" | sed '1d;$d' | sed '/^```$/,$d' > "$stage/example.c"
[ -s "$stage/example.c" ] || { echo "FAIL: no \`\`\`c example block in README"; exit 1; }
cp "$stage/example.c" "$stage/example.cpp"
export PKG_CONFIG_PATH="$stage/root$NNT_PKGCONFIGDIR" PKG_CONFIG_SYSROOT_DIR="$stage/root"
flags=$($PKG_CONFIG --cflags --libs nnt) || { echo "FAIL: pkg-config does not find nnt"; exit 1; }
echo "pkg-config --cflags --libs nnt: $flags"
$CC -std=c99 -Wall -Werror "$stage/example.c" $flags -o "$stage/example_c" ||
    { echo "FAIL: README example does not compile as C99"; exit 1; }
$CXX -Wall -Werror "$stage/example.cpp" $flags -o "$stage/example_cxx" ||
    { echo "FAIL: README example does not compile as C++"; exit 1; }
export LD_LIBRARY_PATH="$stage/root$NNT_LIBDIR${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
for prog in example_c example_cxx; do
    if ! "$stage/$prog" > "$stage/$prog.out" 2>&1; then
        cat "$stage/$prog.out"; echo "FAIL: $prog exited with an error"; exit 1
    fi
    cat "$stage/$prog.out"
    # it must have used the staged library, not another install
    ldd "$stage/$prog" | grep -q "$stage/root" || { echo "FAIL: $prog did not load the staged libnnt"; exit 1; }
done
rm -rf "$stage"
echo "ok: installed library consumed from C and C++ via pkg-config"
