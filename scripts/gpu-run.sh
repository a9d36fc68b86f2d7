#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# run.sh of a GPU bundle (made by scripts/gpu-bundle.sh; this file is copied into it): run
# nnt's checks and measurements on a machine with an NVIDIA GPU, from the source tree that
# holds the bundle, without building anything there.
#
# Usage: [OUT=DIR] bash gpu-bundle/run.sh PHASE...      (logs and results go to OUT,
#                                                       default ./gpu-out)
# Phases, each sized to finish in well under 10 minutes on an H100 (run them in separate
# calls where a call has a time limit):
#   info    GPU, driver, libraries, and a 3-step nnt-train run that must use the GPU
#   test    every test program (GPU kernels against the CPU, then the whole suite with CPU
#           and CUDA workers) and check_train.sh, at most 5 minutes each; tests.txt lists
#           PASS/FAIL/SKIP as they finish (NNT_TESTS="ops_gemm layer_gpt ..." runs only
#           those: to go on after a call that hit its time limit; NNT_TEST_JOBS=N runs N
#           programs at once, NNT_TEST_TIMEOUT=S limits each, default 300 (NNT_CK_TIMEOUT:
#           each test function; CK_VERBOSITY=verbose lists every test); each program's
#           measured errors go to tolerances-NAME.txt, see NNT_TOL_REPORT in tests/testutil.h)
#   bench   GPT-2 124M and 1558M training steps on the GPU in fp32, tf32 and bf16
#           (nnt-train), tokens/s and MFU; bench.txt
#   torch   bench/compare_pytorch.py: nnt-train vs PyTorch on the GPU, bf16 (or
#           NNT_TORCH_PRECISION), GPT-2 124M (or NNT_TORCH_CONFIGS, e.g. 1558M: one config
#           per call keeps it under 10 minutes); RESULTS-gpu-CONFIGS.md
#   ooc     out of core: GPT-2 1558M with a GPU budget (--mem-gpu 8192) far below its 25 GB
#           of state, then the largest model whose state fits the host RAM budget
#           (NNT_OOC_LAYERS x NNT_OOC_CHANNELS, default L19 C5120 NH40: 6.2B parameters,
#           100 GB of fp32 weights, gradients and Adam moments plus 12.5 GB of bf16 weight
#           copies under NNT_OOC_RAM_MIB, default 114688 = 120 GB); ooc.txt. A disk swap does not raise that limit: StarPU's disk
#           node keeps a copy of every tile it evicts, so the whole state must fit the swap,
#           and the lent machines have 128 GiB of RAM and 64 GB of disk.
# Environment: NNT_BENCH_STEPS (default 6).
set -u
here=$(cd "$(dirname "$0")" && pwd)
repo=${NNT_REPO:-$(cd "$here/.." && pwd)}
out=${OUT:-$PWD/gpu-out}
mkdir -p "$out"
. "$here/lib/env.sh"
export STARPU_SILENT=1
export STARPU_HOME="$out/starpu-home"   # performance models: calibrated once, then reused
mkdir -p "$STARPU_HOME"
steps=${NNT_BENCH_STEPS:-6}
train="$here/nnt-train"

say() { echo "$*" | tee -a "$out/summary.txt"; }

phase_info() {
    {
        echo "# $(date -u '+%Y-%m-%d %H:%M UTC') $(uname -n)"
        cat "$here/BUILD-INFO"
        nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm --format=csv
        nproc; lscpu | grep -E '^(Model name|Vendor ID|CPU family|Model:|Flags)' | cut -c1-600
        free -g | head -2; df -h /tmp | tail -1
        echo "LD_LIBRARY_PATH=$LD_LIBRARY_PATH"
        ldd "$here/nnt-train.bin"
    } > "$out/info.txt" 2>&1
    if grep -q '=> not found' "$out/info.txt"; then
        say "info: unresolved libraries:"; grep '=> not found' "$out/info.txt" | tee -a "$out/summary.txt"
        return 1
    fi
    NNT_LOG_LEVEL=info "$train" --layers 2 --channels 64 --heads 2 --steps 3 --sample 32 \
        --no-save --out "$out/info-run" > "$out/info-run.log" 2>&1
    local rc=$?
    say "info: $(grep -m1 '^runtime:' "$out/info-run.log") -> exit $rc"
    if grep -q '^runtime: .* 0 CUDA workers' "$out/info-run.log"; then
        say "info: no CUDA worker started (StarPU found no usable GPU): see info-run.log"
        rc=1
    fi
    grep -E '^(trained|nnt:)' "$out/info-run.log" | head -5 | tee -a "$out/summary.txt"
    return $rc
}

# run_test NAME CMD...: PASS (0), SKIP (77) or FAIL, with the log in OUT/test-NAME.log
run_test() {
    local name=$1 rc start
    shift
    start=$(date +%s)
    local limit=${NNT_TEST_TIMEOUT:-300}
    top_srcdir="$repo" top_builddir="$here" CK_DEFAULT_TIMEOUT=${NNT_CK_TIMEOUT:-$limit} \
        TMPDIR=/tmp NNT_TOL_REPORT="$out/tolerances-$name.txt" \
        timeout "$limit" stdbuf -oL -eL "$@" > "$out/test-$name.log" 2>&1
    rc=$?
    local verdict=FAIL
    [ $rc -eq 0 ] && verdict=PASS
    [ $rc -eq 77 ] && verdict=SKIP
    say "$verdict: $name ($(( $(date +%s) - start )) s, exit $rc)"
    [ $verdict = FAIL ] && tail -n 15 "$out/test-$name.log" | sed 's/^/    /' >> "$out/summary.txt"
    return 0
}

# wanted NAME: NAME is in NNT_TESTS (space-separated names such as "cuda_kernels ops_gemm
# check_train"), or NNT_TESTS is unset (all)
wanted() {
    [ -z "${NNT_TESTS:-}" ] && return 0
    case " $NNT_TESTS " in *" $1 "* | *" test_$1 "*) return 0 ;; esac
    return 1
}

phase_test() {
    local jobs=${NNT_TEST_JOBS:-1} running=0
    wanted cuda_kernels && run_test cuda_kernels "$here/tests/test_cuda_kernels"
    for t in "$here"/tests/test_*; do
        name=$(basename "$t")
        name=${name#test_}
        [ "$name" = cuda_kernels ] || ! wanted "$name" || {
            run_test "$name" "$t" &
            running=$((running + 1))
            [ "$running" -lt "$jobs" ] || { wait -n; running=$((running - 1)); }
        }
    done
    wait
    wanted check_train && run_test check_train sh "$here/tests/check_train.sh"
    if ! grep -qE '^(PASS|FAIL|SKIP):' "$out/summary.txt" 2>/dev/null; then
        say "test: no test program matches NNT_TESTS=\"${NNT_TESTS:-}\" (names as in" \
            "\"cuda_kernels ops_gemm check_train\")"
        return 1
    fi
    grep -E '^(PASS|FAIL|SKIP):' "$out/summary.txt" > "$out/tests.txt"
}

# bench_one TAG ARGS...: one nnt-train run, its summary line into bench.txt
bench_one() {
    local tag=$1
    shift
    "$train" "$@" --steps "$((steps + 1))" --sample 0 --no-save --schedule constant \
        --warmup 0 --val-split 0 --out "$out/bench-$tag" > "$out/bench-$tag.log" 2>&1
    local rc=$?
    if [ $rc -eq 0 ]; then
        say "bench $tag: $(grep -m1 '^trained steps' "$out/bench-$tag.log")"
    else
        say "bench $tag: exit $rc: $(tail -n 1 "$out/bench-$tag.log")"
    fi
    grep -m1 '^memory:' "$out/bench-$tag.log" | sed 's/^/    /' | tee -a "$out/summary.txt"
}

phase_bench() {
    local p
    for p in fp32 tf32 bf16; do
        bench_one "124M-$p" --model gpt2 --batch 8 --seq 1024 --precision $p --gpus 1 \
            --sched dmdas --peak-gflops "$(peak $p)"
    done
    for p in bf16 tf32; do
        bench_one "1558M-$p" --model gpt2-xl --batch 4 --seq 1024 --precision $p --gpus 1 \
            --sched dmdas --peak-gflops "$(peak $p)"
    done
    grep '^bench' "$out/summary.txt" > "$out/bench.txt"
}

# H100 SXM dense peaks (GFLOP/s) for the MFU column; an H200 has the same.
peak() {
    case $1 in fp32) echo 67000 ;; tf32) echo 494700 ;; *) echo 989400 ;; esac
}

phase_torch() {
    local configs=${NNT_TORCH_CONFIGS:-124M}
    (cd "$repo" && PYTHONUNBUFFERED=1 python3 bench/compare_pytorch.py --device cuda \
        --precision "${NNT_TORCH_PRECISION:-bf16}" --nnt-train "$train" --configs "$configs" \
        --batch 8 --seq 1024 --steps 5 --rounds 2 --tilings auto --torch-variants fused \
        --calibrate-steps 2 --starpu-home "$STARPU_HOME" \
        --output "$out/RESULTS-gpu-${configs//,/-}.md") > "$out/torch.log" 2>&1
    say "torch: exit $? ($(tail -n 1 "$out/torch.log"))"
}

phase_ooc() {
    local layers=${NNT_OOC_LAYERS:-19} channels=${NNT_OOC_CHANNELS:-5120}
    local ram=${NNT_OOC_RAM_MIB:-114688}
    # 1558M: 25 GB of state (weights, gradients, Adam moments) under an 8 GiB GPU budget
    bench_one "ooc-1558M-gpu8g" --model gpt2-xl --batch 4 --seq 1024 --precision bf16 \
        --gpus 1 --sched dmdas --mem-gpu 8192 --recompute --peak-gflops "$(peak bf16)"
    # the large model: its state in host RAM, the GPU computing
    bench_one "ooc-L${layers}-C${channels}" --layers "$layers" --channels "$channels" \
        --heads 40 --vocab 50257 --context 1024 --batch 4 --seq 1024 --precision bf16 \
        --gpus 1 --sched dmdas --recompute --mem-cpu "$ram" --peak-gflops "$(peak bf16)"
    grep '^bench ooc' "$out/summary.txt" > "$out/ooc.txt"
}

[ $# -gt 0 ] || set -- info
status=0
for phase in "$@"; do
    case $phase in
    info | test | bench | torch | ooc) "phase_$phase" || status=1 ;;
    *) echo "run.sh: unknown phase '$phase' (info, test, bench, torch, ooc)" >&2; exit 2 ;;
    esac
done
exit $status
