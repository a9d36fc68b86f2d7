#!/bin/sh
# SPDX-License-Identifier: MIT
# bench_ooc.sh: one nnt-train run of a GPT-2 shape, in RAM or with a RAM budget and a disk
# swap, and what it cost: nnt-train's own report (ms/step and tokens/s without the first
# step, peak memory per node, bytes moved between RAM and disk, data wait) plus the process's
# peak RSS and its reads and writes of the disk device (both from GNU time).
#
# Usage (from a build directory):
#   sh ../bench/bench_ooc.sh NAME "NNT-TRAIN MODEL AND BATCH OPTIONS" [BUDGET_MIB SWAP_DIR SWAP_MIB]
# e.g.
#   sh ../bench/bench_ooc.sh 0.9B-ram "--layers 16 --channels 2048 --heads 16 --vocab 50257 \
#       --context 64 --batch 8 --seq 64 --steps 4"
#   sh ../bench/bench_ooc.sh 0.9B-4G "..." 4096 /var/tmp/nnt-swap 32768
# Every run: --sample 0 --no-save --schedule constant --warmup 0 --recompute unless
# NNT_BENCH_EXTRA overrides the extra options. Prints one summary line starting with
# "result NAME:" and keeps the full log in NAME.log (current directory).
# The swap directory is emptied before and after the run. Under a swap, tiles of 1 MiB and
# more get RAM from nnt's own mappings (lib/ctx_ram.c; NNT_RAM_HOOKS=0: StarPU's malloc);
# smaller blocks are mmap'ed by glibc (MALLOC_MMAP_THRESHOLD_=131072) so that freed tiles go
# back to the system and the RSS follows the budget (bench/RESULTS-ooc.md);
# NNT_BENCH_MALLOC=default leaves glibc's own (dynamic) threshold, as nnt-train runs without
# the variable.
set -u
name=$1
model=$2
budget=${3:-0}
swapdir=${4:-}
swapmib=${5:-0}
extra=${NNT_BENCH_EXTRA:---sample 0 --no-save --schedule constant --warmup 0 --recompute --val-split 0}
[ -x ./nnt-train ] || { echo "bench_ooc.sh: run it from a build directory (./nnt-train)" >&2; exit 2; }
[ -x /usr/bin/time ] || { echo "bench_ooc.sh: needs GNU time (apt-get install time)" >&2; exit 2; }
export STARPU_SILENT=1
[ "${NNT_BENCH_MALLOC:-}" = default ] || export MALLOC_MMAP_THRESHOLD_=131072
STARPU_HOME=${STARPU_HOME:-$(mktemp -d)}
export STARPU_HOME
out=$(mktemp -d)
mem=""
if [ "$budget" -gt 0 ]; then
    mem="--mem-cpu $budget"
    if [ -n "$swapdir" ]; then
        rm -rf "$swapdir"
        mem="$mem --swap-dir $swapdir --swap-size $swapmib"
    fi
fi
log="$name.log"
# shellcheck disable=SC2086  # word splitting of the option strings is intended
echo "# $(date -u '+%Y-%m-%d %H:%M:%S UTC'), $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)," \
     "free disk $(df -Pm "${swapdir:-.}" 2>/dev/null | awk 'NR == 2 { print $4 }') MiB" > "$log"
echo "# nnt-train $model $extra $mem --out $out" >> "$log"
# shellcheck disable=SC2086
/usr/bin/time -v ./nnt-train $model $extra $mem --out "$out" >> "$log" 2>&1
rc=$?
[ -n "$swapdir" ] && rm -rf "$swapdir"
rm -rf "$out"
if [ $rc -ne 0 ]; then
    echo "result $name: FAILED (exit $rc), see $log"
    tail -n 20 "$log"
    exit 1
fi
steps=$(grep '^trained steps' "$log" | sed -E 's/.*: ([0-9.]+) ms\/step, ([0-9.]+) tokens\/s, MFU ([0-9.]+)%.*/\1 ms\/step, \2 tok\/s, MFU \3%/')
rss=$(awk -F: '/Maximum resident set size/ { printf "%.0f MiB", $2 / 1024 }' "$log")
# GNU time's file system inputs/outputs are 512-byte blocks read from / written to devices
rd=$(awk -F: '/File system inputs/ { printf "%.2f GiB", $2 * 512 / 2^30 }' "$log")
wr=$(awk -F: '/File system outputs/ { printf "%.2f GiB", $2 * 512 / 2^30 }' "$log")
params=$(grep -o '[0-9.]*M parameters' "$log" | head -n 1)
echo "result $name: $params; $steps; peak RSS $rss; disk read $rd, written $wr"
grep -E '^memory:' "$log" | sed 's/^/  /'
