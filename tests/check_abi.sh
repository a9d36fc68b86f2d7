#!/bin/sh
# SPDX-License-Identifier: MIT
# Compare libnnt.so with the checked-in ABI baseline (abi/libnnt.abi): additions are fine,
# incompatible changes fail. After an intended break: bump NNT_LT_VERSION in configure.ac
# and run `make abi-baseline`.
set -u
: "${top_srcdir:?}" "${top_builddir:?}"
lib="$top_builddir/.libs/libnnt.so"
base="$top_srcdir/abi/libnnt.abi"
if [ -z "${ABIDIFF:-}" ] || [ ! -x "$ABIDIFF" ]; then
    echo "SKIP: abidiff not found (Debian: apt-get install abigail-tools)"; exit 77
fi
[ -f "$base" ] || { echo "FAIL: no baseline $base (make abi-baseline)"; exit 1; }
"$ABIDIFF" --headers-dir2 "$top_srcdir/include" "$base" "$lib"
rc=$?
if [ $((rc & 3)) -ne 0 ]; then echo "FAIL: abidiff could not compare (exit $rc)"; exit 1; fi
if [ $((rc & 8)) -ne 0 ]; then echo "FAIL: incompatible ABI change against $base"; exit 1; fi
[ $((rc & 4)) -ne 0 ] && echo "note: compatible ABI changes (additions) against the baseline"
echo "ok: ABI compatible with the baseline"
