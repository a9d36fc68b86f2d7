#!/bin/sh
# SPDX-License-Identifier: MIT
# Measure the margin of every numerical tolerance (not run by make check).
#
#   tests/tolerances.sh BUILD_DIR [TEST ...]
#
# Runs the Check suites of BUILD_DIR (all test_* programs, or the TESTs named) once per BLIS
# kernel set this CPU can run (the default choice, then haswell and generic ones when they
# differ; NNT_TOL_ARCHES="default 3 25" overrides, numbers as BLIS_ARCH_TYPE takes them),
# each check made through EXPECT_TOL / test_tol_note (tests/testutil.h) reporting its error
# and tolerance. Prints, per check, the largest error seen, its tolerance and their ratio,
# sorted by ratio. The rule (tests/README): ratio about 0.1. Above 0.5 the check is tight
# enough to fail on another host; below 0.01 it is too loose to catch small bugs.
set -u
build=${1:?usage: tests/tolerances.sh BUILD_DIR [TEST ...]}
shift
build=$(cd "$build" && pwd) || exit 2
top_srcdir=$(cd "$(dirname "$0")/.." && pwd)   # the fixtures' tree (this script's)
export top_srcdir
tests=$*
[ -n "$tests" ] || tests=$(cd "$build/tests" && ls test_* 2>/dev/null | grep -v '\.' )
if [ -z "${NNT_TOL_ARCHES:-}" ]; then
    NNT_TOL_ARCHES=default
    grep -qw avx2 /proc/cpuinfo && grep -qw fma /proc/cpuinfo && NNT_TOL_ARCHES="$NNT_TOL_ARCHES 3"
    NNT_TOL_ARCHES="$NNT_TOL_ARCHES 25"
fi
tmp=$(mktemp -d) || exit 2
trap 'rm -rf "$tmp"' EXIT
for arch in $NNT_TOL_ARCHES; do
    for t in $tests; do
        t=${t#tests/}
        [ -x "$build/tests/$t" ] || { echo "no $build/tests/$t" >&2; continue; }
        mkdir -p "$tmp/home-$t"
        if [ "$arch" = default ]; then unset BLIS_ARCH_TYPE; else BLIS_ARCH_TYPE=$arch; export BLIS_ARCH_TYPE; fi
        (cd "$build" && STARPU_HOME="$tmp/home-$t" STARPU_SILENT=1 top_builddir="$build" \
            NNT_TOL_REPORT="$tmp/report-$arch" CK_DEFAULT_TIMEOUT=600 "./tests/$t" \
            > "$tmp/log" 2>&1)
        case $? in
            0) ;;
            77) [ "$arch" = default ] && echo "SKIP: $t: $(tail -n 1 "$tmp/log")" >&2;;
            *) echo "FAIL: $t (BLIS arch $arch):" >&2
               grep -v '^Running\|^[0-9]*%' "$tmp/log" | tail -n 20 >&2;;
        esac
    done
    echo "BLIS arch $arch: $(cut -f1 "$tmp/report-$arch" 2>/dev/null | sort -u | wc -l) checks" >&2
done
unset BLIS_ARCH_TYPE
cat "$tmp"/report-* 2>/dev/null | awk -F'\t' '
    { r = ($3 > 0) ? $2 / $3 : ($2 > 0 ? 1e9 : 0)
      if (!($1 in worst) || r > ratio[$1]) { ratio[$1] = r; worst[$1] = $2; tol[$1] = $3 }
      n[$1]++ }
    END { for (k in worst) printf "%-34s %10.3e %10.3e %8.3f %6d\n", k, worst[k], tol[k], ratio[k], n[k] }' |
    sort -k4,4gr | awk 'BEGIN { printf "%-34s %10s %10s %8s %6s\n", "check", "max err", "tol", "ratio", "n" } { print }'
