#!/bin/sh
# SPDX-License-Identifier: MIT
# Build the Debian packages of nnt (libnnt0, libnnt-dev, nnt-tools) from a `make dist`
# tarball and check them with lintian.
#
#   packaging/build-deb.sh OUTDIR
#
# Steps: configure a scratch build of this tree and `make dist` (nnt-VERSION.tar.gz), use
# it as the upstream tarball (nnt_VERSION.orig.tar.gz), add packaging/debian with the
# symbols file generated from lib/libnnt.map (gen-symbols.sh), run dpkg-buildpackage
# (source and binary, unsigned; DEB_BUILD_OPTIONS as given, e.g. nocheck to skip the test
# suite inside the package build), then lintian on the .changes. The .debs, the .changes,
# the source package and lintian's report (lintian.txt) go to OUTDIR.
# SOURCE_DATE_EPOCH (default: the date of debian/changelog) makes the .debs reproducible:
# two builds with the same value give byte-identical .debs.
# Needs: dpkg-dev, debhelper, fakeroot (not with Rules-Requires-Root: no), lintian, and the
# Build-Depends of debian/control (build-aux/install-deps.sh installs them).
# Exit status: 0 when the packages are built and lintian reports no error and no warning.
set -eu
out=${1:?usage: packaging/build-deb.sh OUTDIR}
src=$(cd "$(dirname "$0")/.." && pwd)
mkdir -p "$out"
out=$(cd "$out" && pwd)
for tool in dpkg-buildpackage dh lintian; do
    command -v "$tool" > /dev/null ||
        { echo "build-deb: $tool not found (build-aux/install-deps.sh)" >&2; exit 2; }
done
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

echo "build-deb: make dist"
mkdir "$work/dist"
if [ -x "$src/configure" ]; then :; else (cd "$src" && ./autogen.sh > /dev/null); fi
(cd "$work/dist" && "$src/configure" -q --with-cuda=no > "$work/configure.log" 2>&1 &&
    make -s dist > "$work/dist.log" 2>&1) ||
    { cat "$work/configure.log" "$work/dist.log" >&2; echo "build-deb: make dist failed" >&2; exit 1; }
tarball=$(ls "$work"/dist/nnt-*.tar.gz)
version=$(basename "$tarball" .tar.gz | sed 's/^nnt-//')

cp "$tarball" "$work/nnt_$version.orig.tar.gz"
tar -C "$work" -xzf "$tarball"
tree="$work/nnt-$version"
cp -r "$src/packaging/debian" "$tree/debian"
"$src/packaging/gen-symbols.sh" "$src/lib/libnnt.map" > "$tree/debian/libnnt0.symbols"
: "${SOURCE_DATE_EPOCH:=$(cd "$tree" && dpkg-parsechangelog -STimestamp)}"
export SOURCE_DATE_EPOCH

echo "build-deb: dpkg-buildpackage (version $version, SOURCE_DATE_EPOCH $SOURCE_DATE_EPOCH)"
if ! (cd "$tree" && dpkg-buildpackage -us -uc > "$work/build.log" 2>&1); then
    tail -n 40 "$work/build.log" >&2
    cp "$work/build.log" "$out/build.log"
    echo "build-deb: dpkg-buildpackage failed (log: $out/build.log)" >&2
    exit 1
fi
cp "$work/build.log" "$out/build.log"
for f in "$work"/*.deb "$work"/*.changes "$work"/*.dsc "$work"/*.debian.tar.* \
         "$work"/*.orig.tar.gz "$work"/*.buildinfo; do
    [ -e "$f" ] && cp "$f" "$out/"
done
echo "build-deb: lintian"
changes=$(ls "$out"/*.changes | head -n 1)
lintian --info --display-info "$changes" > "$out/lintian.txt" 2>&1 || true
cat "$out/lintian.txt"
if grep -q '^[EW]: ' "$out/lintian.txt"; then
    echo "build-deb: lintian reports errors or warnings (see $out/lintian.txt)" >&2
    exit 1
fi
ls "$out"/*.deb
