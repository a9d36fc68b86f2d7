#!/bin/sh
# SPDX-License-Identifier: MIT
# bench_qlora.sh: a LoRA step on a frozen base kept in bf16 (NNT_FREEZE under bf16
# products) against the same step on the base kept in NF4 (nnt-train --quantize nf4: QLoRA),
# side by side in one run, alternating: RAM (nnt-train's RAM peak and the process's peak
# resident set) and step time.
# Usage (from a build directory): sh ../bench/bench_qlora.sh [MODEL] [ROUNDS] [STEPS]
# (default llama-3.1-8b, 1 round, 3 steps; a fresh init of the preset, the default corpus).
# Prints one line per run and the steps' mean time after the first. Results go to
# bench/RESULTS-qlora.md by hand.
set -eu
model=${1:-llama-3.1-8b}
rounds=${2:-1}
steps=${3:-3}
export STARPU_SILENT=1
STARPU_HOME=${STARPU_HOME:-$(mktemp -d)}
export STARPU_HOME
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
[ -x ./nnt-train ] || { echo "bench_qlora.sh: run it from a build directory (./nnt-train)" >&2; exit 2; }
echo "# $(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) cores, $(lscpu | sed -n 's/^Model name: *//p'), load $(cut -d' ' -f1-3 /proc/loadavg)"
common="--model $model --lora-rank 16 --lora-alpha 32 --lora-targets all-linear --precision bf16
    --recompute --batch 1 --seq 256 --steps $steps --sample 0 --no-save --lr 1e-4 --warmup 0
    --schedule constant --weight-decay 0 --grad-clip 0 --overwrite"
echo "# nnt-train $(echo $common) [--quantize nf4]"
for r in $(seq 1 "$rounds"); do
    for q in none nf4; do
        /usr/bin/time -f "rss_kib %M" ./nnt-train $common --quantize $q --out "$out/$q" \
            > "$out/log" 2>&1 || { tail -n 5 "$out/log" >&2; exit 1; }
        ms=$(awk '/^step [0-9]+\// { if (n++) { s += $9 } } END { printf "%.0f", s / (n - 1) }' "$out/log")
        losses=$(awk '/^step [0-9]+\// { printf "%s ", $4 }' "$out/log")
        peak=$(sed -n 's/^memory: *RAM peak \([0-9.]* [GM]iB\).*/\1/p' "$out/log")
        rss=$(awk '/^rss_kib/ { printf "%.2f GiB", $2 / 1048576 }' "$out/log")
        echo "round $r base $q: $ms ms/step after the first, RAM peak $peak, process peak $rss, losses $losses"
    done
done
