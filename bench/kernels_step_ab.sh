#!/bin/sh
# SPDX-License-Identifier: MIT
# kernels_step_ab.sh (issue 16): GPT-2 124M training steps with the AVX2 elementwise kernels
# against the portable ones (NNT_CPU_ISA=generic), the same nnt-train binary, interleaved:
# each round runs fp32 generic, fp32 avx2, bf16 generic, bf16 avx2 (alternating which of
# the pair runs first), fresh processes; prints ms/step (nnt-train's mean over the steps
# after the first) per run, then per precision the median of each side and of the
# per-round ratios generic / avx2 with their range. With TRACE=1 it then traces 2 steps
# of each (nnt-train --trace) and prints the GEMM and non-GEMM shares of worker time.
#
#     bench/kernels_step_ab.sh BUILD_DIR [ROUNDS]
set -eu
build=${1:?usage: bench/kernels_step_ab.sh BUILD_DIR [ROUNDS]}
rounds=${2:-3}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
train() { # ISA PRECISION [extra nnt-train arguments]
    isa=$1 prec=$2
    shift 2
    env ${isa:+NNT_CPU_ISA=$isa} STARPU_SILENT=1 STARPU_HOME="$tmp/starpu" \
        "$build/nnt-train" --layers 12 --channels 768 --heads 12 --vocab 50257 --context 1024 \
        --batch 4 --seq 64 --steps 4 --sample 0 --no-save --out "$tmp/out" --cpus 2 --gpus 0 \
        --sched lws --grad-clip 0 --warmup 0 --schedule constant --lr 1e-4 --beta2 0.999 \
        --weight-decay 0.1 --val-split 0 --precision "$prec" "$@" 2>&1
}
ms() { sed -n 's/.* \([0-9.]*\) ms\/step.*/\1/p'; }
echo "# $(lscpu | sed -n 's/^Model name: *//p'), load $(cut -d' ' -f1-3 /proc/loadavg), $(date -u +%FT%TZ)"
echo "# round precision generic_ms avx2_ms generic/avx2"
for r in $(seq "$rounds"); do
    for prec in fp32 bf16; do
        if [ $((r % 2)) -eq 1 ]; then
            g=$(train generic "$prec" | ms); a=$(train "" "$prec" | ms)
        else
            a=$(train "" "$prec" | ms); g=$(train generic "$prec" | ms)
        fi
        echo "$r $prec $g $a $(echo "$g $a" | awk '{printf "%.3f", $1 / $2}')"
    done
done | tee "$tmp/rows"
echo "# load $(cut -d' ' -f1-3 /proc/loadavg), $(date -u +%FT%TZ)"
med() { sort -n | awk '{v[NR] = $1} END {print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2}'; }
for prec in fp32 bf16; do
    g=$(awk -v p=$prec '$2 == p {print $3}' "$tmp/rows" | med)
    a=$(awk -v p=$prec '$2 == p {print $4}' "$tmp/rows" | med)
    q=$(awk -v p=$prec '$2 == p {print $5}' "$tmp/rows" | med)
    lo=$(awk -v p=$prec '$2 == p {print $5}' "$tmp/rows" | sort -n | head -1)
    hi=$(awk -v p=$prec '$2 == p {print $5}' "$tmp/rows" | sort -n | tail -1)
    echo "$prec: median ms/step generic $g, avx2 $a; generic/avx2 per round: median $q (range $lo-$hi)"
done
[ "${TRACE:-0}" = 1 ] || exit 0
for prec in fp32 bf16; do
    for isa in generic ""; do
        train "$isa" "$prec" --trace "$tmp/t.svg" --trace-steps 2 >/dev/null
        awk -v p=$prec -v i=${isa:-avx2} '$1 ~ /^nnt_/ {t += $3; if ($1 == "nnt_gemm") g += $3}
            END {printf "%s %s: worker-busy %.0f ms over 2 steps, GEMM %.1f %%, non-GEMM %.1f %% (%.0f ms/step)\n",
                 p, i, t, 100 * g / t, 100 * (t - g) / t, (t - g) / 2}' "$tmp/out/trace-ops.txt"
        cp "$tmp/out/trace-ops.txt" "${TRACE_DIR:-$tmp}/trace-ops-$prec-${isa:-avx2}.txt" 2>/dev/null || true
    done
done
