#!/bin/sh
# SPDX-License-Identifier: MIT
# bench_train.sh: time nnt-train (the installed program's code path: public API, GPT layer,
# nnt_optim) on GPT-2 124M at B=4, T=64 on the CPU cores, once per StarPU scheduler, in
# interleaved rounds, next to bench/bench_gpt2 (the same model and optimizer through the
# library's API, without nnt-train's loop) as a peer.
# Usage (from a build directory): sh ../bench/bench_train.sh [ROUNDS] [STEPS]
# Environment: SCHEDS (default "lws dmda dmdas eager"), PRECISIONS (GEMM operand precision,
# nnt-train --precision; default "fp32"): one run per scheduler and precision per round.
# Prints one line per run and a table of medians (the lower median for an even count) (ms/step and tokens/s without the first
# step, as nnt-train reports them). Results go to bench/RESULTS.md by hand.
set -eu
rounds=${1:-2}
steps=${2:-10}
scheds=${SCHEDS:-"lws dmda dmdas eager"}
precisions=${PRECISIONS:-fp32}
export STARPU_SILENT=1
STARPU_HOME=${STARPU_HOME:-$(mktemp -d)}
export STARPU_HOME
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
[ -x ./nnt-train ] || { echo "bench_train.sh: run it from a build directory (./nnt-train)" >&2; exit 2; }
echo "# $(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "# nnt-train --model gpt2 --batch 4 --seq 64 --steps $steps --sample 0 --schedule constant --warmup 0 --sched S --precision P"
runs=""
for s in $scheds; do
    for p in $precisions; do
        runs="$runs $s/$p"
    done
done
for r in $(seq 1 "$rounds"); do
    for sp in $runs; do
        s=${sp%/*} p=${sp#*/}
        [ "$precisions" = fp32 ] && sp=$s   # the old labels when only fp32 runs
        line=$(./nnt-train --model gpt2 --batch 4 --seq 64 --steps "$steps" --sample 0 \
            --schedule constant --warmup 0 --sched "$s" --precision "$p" --out "$out/$s" \
            --val-split 0 2>&1 |
            grep '^trained steps') || { echo "nnt-train --sched $s --precision $p failed" >&2; exit 1; }
        ms=$(echo "$line" | sed -E 's/.*: ([0-9.]+) ms\/step, ([0-9.]+) tokens\/s, MFU ([0-9.]+)%.*/\1 \2 \3/')
        echo "round $r sched $sp: $ms" | tee -a "$out/runs"
    done
    if [ -x bench/bench_gpt2 ]; then
        ms=$(bench/bench_gpt2 --steps 3 2>&1 | grep '^mean of' |
            sed -E 's/.*: ([0-9.]+) ms\/step, ([0-9.]+) tokens\/s, MFU ([0-9.]+)%.*/\1 \2 \3/')
        echo "round $r sched bench_gpt2: $ms" | tee -a "$out/runs"
    fi
done
echo "# median over rounds: scheduler[/precision], ms/step, tokens/s, MFU % (nnt-train's: against the GEMM rate it measures at start)"
labels=$runs
[ "$precisions" = fp32 ] && labels=$scheds
for s in $labels "bench_gpt2"; do
    # the median run by ms/step (tokens/s and MFU follow it); POSIX awk, no gawk needed
    grep -F "sched $s:" "$out/runs" | awk '{print $5, $6, $7}' | sort -n > "$out/sorted" || true
    n=$(wc -l < "$out/sorted")
    [ "$n" -gt 0 ] || continue
    sed -n "$(( (n + 1) / 2 ))p" "$out/sorted" | awk -v s="$s" '{printf "%-22s %8.1f %8.1f %6.1f\n", s, $1, $2, $3}'
done
