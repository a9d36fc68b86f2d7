#!/bin/sh
# SPDX-License-Identifier: MIT
# The GPT-2 path gate of issue 14: the same bench_paths binary (public API only) run against
# two builds of libnnt, interleaved round by round on the same host, so that machine noise
# hits both alike. Typical use: the previous commit's library (fused GPT-2, lib/models/gpt2.c)
# against the current one (the GPT layer on the generic layers).
#
# usage: bench/gate_paths.sh OLD_LIBDIR NEW_LIBDIR BENCH_PATHS [ROUNDS [STEPS [MODE]]]
#   OLD_LIBDIR, NEW_LIBDIR  directories holding libnnt.so.0 (a build tree's .libs)
#   BENCH_PATHS             the bench_paths executable itself (build/bench/.libs/bench_paths,
#                           not libtool's wrapper script, which would pin its own library)
#   ROUNDS (default 5), STEPS timed per run (default 3), MODE fused|generic (default fused:
#   nnt_gpt_create)
# Prints one line per run (round, build, ms/step, peak RSS in MiB) and the medians and their
# ratio new/old at the end. Each run is a fresh process (2 warm-up steps, then STEPS).
set -eu
old=$1 new=$2 bin=$3 rounds=${4:-5} steps=${5:-3} mode=${6:-fused}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export STARPU_HOME="$tmp/starpu" STARPU_SILENT=1
mkdir -p "$STARPU_HOME"
run() {   # $1 libdir $2 tag $3 round
    LD_LIBRARY_PATH=$1 /usr/bin/time -f '%M' -o "$tmp/rss" "$bin" "$mode" --steps "$steps" \
        >"$tmp/out" 2>"$tmp/err" || { cat "$tmp/err" >&2; exit 1; }
    ms=$(sed -n 's/.* mean \([0-9.]*\) ms\/step.*/\1/p' "$tmp/out")
    rss=$(awk '{printf "%.0f", $1 / 1024}' "$tmp/rss")
    echo "$3 $2 $ms $rss" | tee -a "$tmp/all"
}
echo "round build ms/step peak_rss_MiB"
i=1
while [ "$i" -le "$rounds" ]; do
    if [ $((i % 2)) -eq 1 ]; then run "$old" old "$i"; run "$new" new "$i"
    else run "$new" new "$i"; run "$old" old "$i"; fi
    i=$((i + 1))
done
median() { grep " $1 " "$tmp/all" | awk '{print $'"$2"'}' | sort -n |
           awk '{v[NR] = $1} END {print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2}'; }
mo=$(median old 3) mn=$(median new 3) ro=$(median old 4) rn=$(median new 4)
echo "median old $mo ms/step $ro MiB; new $mn ms/step $rn MiB; new/old time $(echo "$mn $mo" |
    awk '{printf "%.3f", $1 / $2}') rss $(echo "$rn $ro" | awk '{printf "%.3f", $1 / $2}')"
