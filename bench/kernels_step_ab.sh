#!/bin/sh
# SPDX-License-Identifier: MIT
# kernels_step_ab.sh (issues 16, 41): training steps of the same nnt-train binary under two
# environments, A and B, interleaved: each round runs, per precision, A then B (alternating
# which of the pair runs first), fresh processes; prints ms/step (nnt-train's mean over the
# steps after the first) and the CPU seconds of each whole run (user + system: the work
# done, which a shared machine's time slicing inflates less than the wall time), then per
# precision the median of each side and of the per-round ratios A / B with their range.
# By default A is the portable elementwise kernels (NNT_CPU_ISA=generic) and B the default
# (issue 16), on GPT-2 124M B 4 T 64 in fp32 and bf16; the environment changes that:
#   A_ENV, B_ENV   assignments for env(1) ("NNT_GEMM_KSUM=0"; "" = none), A_NAME, B_NAME
#   A_ARGS, B_ARGS nnt-train arguments of one side only ("--tile-batch 8"; default none)
#   PRECISIONS     "fp32 bf16" by default
#   MODEL          nnt-train model options ("--layers 12 --channels 768 ... --batch 4 --seq 64")
#   STEPS          steps a run (4: 3 timed)
#   NICE           a niceness for the runs (e.g. -10 on a shared machine, as root)
# With TRACE=1 it then traces 2 steps of each (nnt-train --trace) and prints the GEMM and
# non-GEMM shares of worker time.
#
#     bench/kernels_step_ab.sh BUILD_DIR [ROUNDS]
#     A_ENV=NNT_GEMM_KSUM=0 A_NAME=ksum0 B_NAME=ksum PRECISIONS=bf16 NICE=-10 \
#         bench/kernels_step_ab.sh BUILD_DIR 5
set -eu
build=${1:?usage: bench/kernels_step_ab.sh BUILD_DIR [ROUNDS]}
rounds=${2:-3}
a_env=${A_ENV-NNT_CPU_ISA=generic}
b_env=${B_ENV-}
a_name=${A_NAME:-generic}
b_name=${B_NAME:-avx2}
a_args=${A_ARGS:-}
b_args=${B_ARGS:-}
precisions=${PRECISIONS:-fp32 bf16}
gpt2="--layers 12 --channels 768 --heads 12 --vocab 50257 --context 1024 --batch 4 --seq 64"
model=${MODEL:-$gpt2}
steps=${STEPS:-4}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
train() { # ENV PRECISION [extra nnt-train arguments]
    envs=$1 prec=$2
    shift 2
    # shellcheck disable=SC2086 # the model options and assignments are word lists
    nice -n "${NICE:-0}" /usr/bin/time -f "cpu %U %S" env $envs STARPU_SILENT=1 \
        STARPU_HOME="$tmp/starpu" "$build/nnt-train" $model --steps "$steps" --sample 0 \
        --no-save --out "$tmp/out" --cpus 2 --gpus 0 --sched lws --grad-clip 0 --warmup 0 \
        --schedule constant --lr 1e-4 --beta2 0.999 --weight-decay 0.1 --val-split 0 \
        --precision "$prec" "$@" 2>&1
}
# one side's run at a precision, with its environment and arguments
# shellcheck disable=SC2086 # the arguments are word lists
run_a() { p=$1; shift; train "$a_env" "$p" $a_args "$@"; }
# shellcheck disable=SC2086
run_b() { p=$1; shift; train "$b_env" "$p" $b_args "$@"; }
# "ms cpu_s" of one run's output
ms_cpu() { awk '/ms\/step/ {for (i = 1; i < NF; i++) if ($(i + 1) ~ /^ms\/step/) ms = $i}
                /^cpu / {cpu = $2 + $3} END {printf "%s %.2f", ms, cpu}'; }
cpu() { lscpu | sed -n "s/^$1: *//p"; }
echo "# $(cpu 'Model name'), family $(cpu 'CPU family') model $(cpu Model)," \
    "load $(cut -d' ' -f1-3 /proc/loadavg), $(date -u +%FT%TZ)"
echo "# A: ${a_name} (${a_env:-no change}${a_args:+; $a_args}), B: ${b_name}" \
    "(${b_env:-no change}${b_args:+; $b_args}); nice ${NICE:-0}"
echo "# round precision ${a_name}_ms ${b_name}_ms ${a_name}/${b_name}" \
    "${a_name}_cpu_s ${b_name}_cpu_s load1"
for r in $(seq "$rounds"); do
    for prec in $precisions; do
        if [ $((r % 2)) -eq 1 ]; then
            a=$(run_a "$prec" | ms_cpu); b=$(run_b "$prec" | ms_cpu)
        else
            b=$(run_b "$prec" | ms_cpu); a=$(run_a "$prec" | ms_cpu)
        fi
        q=$(echo "${a% *} ${b% *}" | awk '{printf "%.3f", $1 / $2}')
        echo "$r $prec ${a% *} ${b% *} $q ${a#* } ${b#* } $(cut -d' ' -f1 /proc/loadavg)"
    done
done | tee "$tmp/rows"
echo "# load $(cut -d' ' -f1-3 /proc/loadavg), $(date -u +%FT%TZ)"
med() { sort -n | awk '{v[NR] = $1} END {print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2}'; }
for prec in $precisions; do
    a=$(awk -v p=$prec '$2 == p {print $3}' "$tmp/rows" | med)
    b=$(awk -v p=$prec '$2 == p {print $4}' "$tmp/rows" | med)
    q=$(awk -v p=$prec '$2 == p {print $5}' "$tmp/rows" | med)
    lo=$(awk -v p=$prec '$2 == p {print $5}' "$tmp/rows" | sort -n | head -1)
    hi=$(awk -v p=$prec '$2 == p {print $5}' "$tmp/rows" | sort -n | tail -1)
    ca=$(awk -v p=$prec '$2 == p {print $6}' "$tmp/rows" | med)
    cb=$(awk -v p=$prec '$2 == p {print $7}' "$tmp/rows" | med)
    echo "$prec: median ms/step $a_name $a, $b_name $b; $a_name/$b_name per round: median" \
        "$q (range $lo-$hi); median CPU s a run $a_name $ca, $b_name $cb"
done
[ "${TRACE:-0}" = 1 ] || exit 0
for prec in $precisions; do
    for side in a b; do
        if [ $side = a ]; then name=$a_name; else name=$b_name; fi
        "run_$side" "$prec" --trace "$tmp/t.svg" --trace-steps 2 >/dev/null
        awk -v p=$prec -v i="$name" '$1 ~ /^nnt_/ {t += $3; if ($1 == "nnt_gemm") g += $3}
            END {printf "%s %s: worker-busy %.0f ms over 2 steps, GEMM %.1f %%, non-GEMM %.1f %% (%.0f ms/step)\n",
                 p, i, t, 100 * g / t, 100 * (t - g) / t, (t - g) / 2}' "$tmp/out/trace-ops.txt"
        cp "$tmp/out/trace-ops.txt" "${TRACE_DIR:-$tmp}/trace-ops-$prec-$name.txt" \
            2>/dev/null || true
    done
done
