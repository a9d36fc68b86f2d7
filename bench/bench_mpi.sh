#!/bin/sh
# SPDX-License-Identifier: MIT
# nnt-train over StarPU-MPI on one machine: GPT-2 124M (B 4, T 64, a fixed tiling), time per
# step at 1 process x 2 CPU workers against 2 ranks x 1 worker (--distribute D for each D of
# $DISTS, default "sharded data"), the losses, and the bytes the ranks send each other per
# step (StarPU-MPI's STARPU_COMM_STATS counters: a run of S2 steps minus a run of S1 steps,
# so that start-up, the first step's allocations and the final reads cancel). RELEASE=1:
# the ranks run with --release-weights; PRECISION=bf16: every run with --precision bf16
# (the theory lines stay those of fp32 weights); BATCH, SEQ and TILE_BATCH (default 4, 64, 2)
# change the batch and its tiling (the sequence tile is SEQ). By hand, from the build directory:
# sh ../bench/bench_mpi.sh [S1 S2]   (a few minutes on 2 cores)
set -eu
S1=${1:-1} S2=${2:-3}
DISTS=${DISTS:-sharded data}
release=
[ "${RELEASE:-0}" = 1 ] && release=--release-weights
prog=${NNT_TRAIN:-./nnt-train}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
i=0
while [ $i -lt 12000 ]; do
    echo "line $i: the quick brown fox jumps over the lazy dog; a stitch in time saves nine."
    i=$((i + 1))
done > "$tmp/corpus.txt"
MPIRUN="mpirun --oversubscribe -np 2"
[ "$(id -u)" -eq 0 ] && MPIRUN="$MPIRUN --allow-run-as-root"
BATCH=${BATCH:-4} SEQ=${SEQ:-64} TILE_BATCH=${TILE_BATCH:-2}
args="--model gpt2 --data $tmp/corpus.txt --batch $BATCH --seq $SEQ --no-save --sample 0
--print-loss --tile-batch $TILE_BATCH --tile-seq $SEQ --tile-channels 768 --tile-hidden 1536
--tile-vocab 7232
--out $tmp/out --precision ${PRECISION:-fp32}"
export STARPU_SILENT=1

# ms per step, the mean without the first step (nnt-train's own summary line)
ms_per_step() { sed -n 's/.* s: \([0-9.]*\) ms\/step.*/\1/p' "$1"; }
# bytes sent by both ranks (the TOTAL lines of STARPU_COMM_STATS)
sent() { awk '/starpu_comm_stats.*TOTAL/ { s += $3 } END { printf "%.0f\n", s }' "$1"; }
# mpi_run DIST STEPS ERRFILE: 2 ranks x 1 worker, the losses on stdout
mpi_run() {
    STARPU_HOME=$tmp/h2 STARPU_COMM_STATS=1 STARPU_SILENT=0 $MPIRUN -x STARPU_COMM_STATS \
        -x STARPU_SILENT "$prog" $args --distribute "$1" --steps "$2" --cpus 1 $release \
        2> "$3"
}

STARPU_HOME=$tmp/h1 "$prog" $args --steps "$S2" --cpus 2 > "$tmp/one.txt" 2> "$tmp/one.err"
one=$(ms_per_step "$tmp/one.err")
echo "machine: $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) CPUs"
echo "losses, 1 process x 2 workers:"; cat "$tmp/one.txt"
echo "np1 x 2 workers: $one ms/step"
for dist in $DISTS; do
    mpi_run "$dist" "$S1" "$tmp/two1.err" > /dev/null
    mpi_run "$dist" "$S2" "$tmp/two.err" > "$tmp/two.txt"
    two=$(ms_per_step "$tmp/two.err")
    echo "losses, 2 ranks x 1 worker, $dist:"; cat "$tmp/two.txt"
    if cmp -s "$tmp/one.txt" "$tmp/two.txt"; then echo "losses: identical"; else echo "losses: DIFFERENT"; fi
    echo "np2 x 1 worker ($dist): $two ms/step"
    awk -v a="$one" -v b="$two" -v d="$dist" 'BEGIN { printf "speed of np2 x 1 (%s) relative to np1 x 2: %.2fx\n", d, a / b }'
    # Theory per rank at N ranks: data parallel all-reduces the gradients, 2 G (N-1)/N;
    # ZeRO-3 gathers the weights for the forward and for the backward and reduce-scatters
    # the gradients, 3 W (N-1)/N (W = G = 4 bytes x 124,439,808 parameters). Both ranks at
    # N = 2.
    awk -v b1="$(sent "$tmp/two1.err")" -v b2="$(sent "$tmp/two.err")" -v n=$((S2 - S1)) -v d="$dist" 'BEGIN {
        W = 4 * 124439808
        per = (b2 - b1) / n
        printf "%s: sent between the ranks: %.1f MB per step, both ranks (%.0f B in %d more steps)\n", d, per / 1e6, b2 - b1, n
        printf "theory, both ranks at N = 2: data parallel %.1f MB, ZeRO-3 %.1f MB\n", 2 * W / 1e6, 3 * W / 1e6
        printf "%s: measured / data-parallel theory: %.2f, / ZeRO-3 theory: %.2f\n", d, per / (2 * W), per / (3 * W)
    }'
done
