#!/bin/sh
# SPDX-License-Identifier: MIT
# The Debian packages (packaging/build-deb.sh): built from a dist tarball, lintian clean (no
# error, no warning), the three packages present, and the installed library usable: the
# packages unpacked into a scratch root (dpkg -x), README's minimal example compiled there
# as C and C++ with nothing but pkg-config and run, nnt-train --help and nnt-generate run.
# Only when configure had --enable-deb-check (make distcheck passes it); SKIP without
# dpkg-buildpackage / debhelper / lintian.
set -u
: "${top_srcdir:?}"
if [ "${NNT_DEB_CHECK:-no}" != yes ]; then
    echo "SKIP: the Debian package check runs under make distcheck (configure --enable-deb-check)"
    exit 77
fi
for tool in dpkg-buildpackage dh lintian dpkg-architecture; do
    command -v "$tool" > /dev/null || {
        echo "SKIP: $tool not found (build-aux/install-deps.sh installs the tools)"
        exit 77; }
done
CC=${CC:-cc} CXX=${CXX:-c++} PKG_CONFIG=${PKG_CONFIG:-pkg-config}
tmp=$(mktemp -d) || exit 99
trap 'rm -rf "$tmp"' EXIT
# the test suite already ran in this build: not again inside the package build
if ! DEB_BUILD_OPTIONS="nocheck parallel=$(nproc)" "$top_srcdir/packaging/build-deb.sh" \
        "$tmp/out" > "$tmp/build.log" 2>&1; then
    tail -n 60 "$tmp/build.log"; echo "FAIL: packaging/build-deb.sh"; exit 1
fi
fail=0
for p in libnnt0 libnnt-dev nnt-tools; do
    deb=$(ls "$tmp"/out/${p}_*.deb 2>/dev/null | head -n 1)
    [ -n "$deb" ] || { echo "FAIL: no $p package"; fail=1; continue; }
    dpkg -x "$deb" "$tmp/root"
done
[ $fail -eq 0 ] || exit 1
multiarch=$(dpkg-architecture -qDEB_HOST_MULTIARCH)
awk '/^```c$/ { n++; next } /^```$/ { if (n == 1) exit; next } n == 1 { print }' \
    "$top_srcdir/README" > "$tmp/example1.c"
cp "$tmp/example1.c" "$tmp/example1.cpp"
export PKG_CONFIG_PATH="$tmp/root/usr/lib/$multiarch/pkgconfig" PKG_CONFIG_SYSROOT_DIR="$tmp/root"
flags=$($PKG_CONFIG --cflags --libs nnt) || { echo "FAIL: pkg-config does not find the packaged nnt.pc"; exit 1; }
export LD_LIBRARY_PATH="$tmp/root/usr/lib/$multiarch"
$CC -std=c99 -Wall -Werror "$tmp/example1.c" $flags -o "$tmp/ex_c" ||
    { echo "FAIL: the example does not compile as C against the packages"; exit 1; }
$CXX -Wall -Werror "$tmp/example1.cpp" $flags -o "$tmp/ex_cxx" ||
    { echo "FAIL: the example does not compile as C++ against the packages"; exit 1; }
for prog in ex_c ex_cxx; do
    (cd "$tmp" && "./$prog") > "$tmp/$prog.out" 2>&1 ||
        { cat "$tmp/$prog.out"; echo "FAIL: $prog (packaged library) failed"; exit 1; }
    ldd "$tmp/$prog" | grep -q "$tmp/root" ||
        { echo "FAIL: $prog did not load the packaged libnnt"; exit 1; }
done
"$tmp/root/usr/bin/nnt-train" --help > /dev/null ||
    { echo "FAIL: the packaged nnt-train --help"; exit 1; }
"$tmp/root/usr/bin/nnt-generate" > /dev/null 2> "$tmp/gen.err"
[ $? -eq 2 ] && grep -q "nnt-generate: give one of --load-hf" "$tmp/gen.err" ||
    { echo "FAIL: the packaged nnt-generate does not start (no usage error)"; cat "$tmp/gen.err"; exit 1; }
"$tmp/root/usr/bin/nnt-generate" --help | grep -q "^Usage: nnt-generate" ||
    { echo "FAIL: the packaged nnt-generate --help"; exit 1; }
for f in "$tmp/root/usr/lib/$multiarch"/libnnt.so.0.* "$tmp/root/usr/bin/nnt-train"; do
    readelf -d "$f" | grep -qi 'rpath\|runpath' &&
        { echo "FAIL: the packaged $(basename "$f") has an rpath"; exit 1; }
done
echo "ok: $(ls "$tmp"/out/*.deb | wc -l) packages built, lintian clean, the example builds and runs against them"
