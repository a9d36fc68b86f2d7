#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# One time-boxed device call of a GPU bundle (scripts/gpu-bundle.sh), for a session whose GPU
# time is short (the lent machines give a session 15 minutes, start included): the phases of
# gpu-bundle/run.sh, each under its own limit, with everything packed into DEST/run.tgz
# after each step, so that a call stopped at its limit still returns what it finished.
#
# Usage, from the source tree that holds gpu-bundle/:
#   DEST=$OUT bash scripts/gpu-session.sh STEP...
# Steps (run in the order given):
#   info     GPU, driver, libraries, a 3-step nnt-train run on the GPU (60 s)
#   kernels  test_cuda_kernels: every CUDA kernel against the CPU kernel (90 s)
#   suite    every other test program with CUDA workers, NNT_TEST_JOBS at once (default 4),
#            NNT_TEST_TIMEOUT each (default 120 s), all within NNT_SUITE_LIMIT (240 s)
#   torch    bench/compare_pytorch.py, GPT-2 NNT_TORCH_CONFIGS (default 124M) B8 T1024,
#            NNT_TORCH_PRECISION (default bf16), one round (NNT_TORCH_LIMIT s, default 180)
#   probe    what made the first H200 runs slow (2026-11-26: the test programs took over 100 s
#            each with a CUDA worker, 2 calibration steps of GPT-2 124M 111 s): GPT-2 124M
#            bf16 B8 T1024, 4 steps, per-step times, with StarPU's pinned host allocations
#            (its default: cudaHostAlloc for each tile over 4 MiB and for 32 MiB chunks that
#            hold the smaller ones) and without (STARPU_DISABLE_PINNING=1), with
#            2 CPU workers (dmdas calibrates every task size on them too, 10 runs each:
#            STARPU_CALIBRATE_MINIMUM; also with 1) and with none (--cpus 0); test_api's 1 MiB RAM-budget test with a CUDA worker with and
#            without pinning (NNT_TEST_BUDGET_CUDA=1); test_layer_gpt with and without pinning;
#            a context's start and end with and without the GPU, and test_ops_gemm (102 test
#            functions) with and without a process per test function (CK_FORK; ~8 min)
#   cpubench issue 16 on the machine's host CPU (AVX-512; perhaps AMX): bench/
#            compare_cpu_kernels.py with cpu-bundle/nnt-train (scripts/gpu-bundle.sh --cpu,
#            carried as cpu-bundle), NNT_CPU_THREADS threads (default 2, as in the issue), 2
#            rounds (NNT_CPUBENCH_LIMIT s, default 300; NNT_CPUBENCH_ARGS: more options of
#            the script); lscpu first
#   bench    run.sh bench (fp32, tf32, bf16 step times and MFU; NNT_BENCH_LIMIT, 240 s)
#   ooc      run.sh ooc (NNT_OOC_LIMIT, 300 s)
set -u
here=$(cd "$(dirname "$0")/.." && pwd)
dest=${DEST:?DEST: the folder that comes back (OUT of the device tool)}
work=/tmp/nnt-gpu-session
export OUT=$work/r
mkdir -p "$OUT"
run="$here/gpu-bundle/run.sh"
[ -d "$here/gpu-bundle" ] &&
    cp "$here/scripts/gpu-run.sh" "$run"   # the source tree's, newer than the bundle's
pack() { tar czf "$dest/run.tgz" -C "$work" r; }

for step in "$@"; do
    echo "== $step ($(date -u +%H:%M:%S))"
    case $step in
    info) timeout 60 bash "$run" info ;;
    kernels) NNT_TESTS=cuda_kernels NNT_TEST_TIMEOUT=90 bash "$run" test ;;
    suite)
        names=$(cd "$here/gpu-bundle/tests" && ls test_* | sed 's/^test_//' |
            grep -vx cuda_kernels | tr '\n' ' ')
        CK_VERBOSITY=verbose NNT_TESTS=$names NNT_TEST_JOBS=${NNT_TEST_JOBS:-4} \
            NNT_TEST_TIMEOUT=${NNT_TEST_TIMEOUT:-120} timeout "${NNT_SUITE_LIMIT:-240}" \
            bash "$run" test ;;
    torch)
        (cd "$here" && PYTHONUNBUFFERED=1 timeout "${NNT_TORCH_LIMIT:-180}" python3 \
            bench/compare_pytorch.py --device cuda \
            --precision "${NNT_TORCH_PRECISION:-bf16}" --nnt-train gpu-bundle/nnt-train \
            --configs "${NNT_TORCH_CONFIGS:-124M}" --batch 8 --seq 1024 --steps 5 --rounds 1 \
            --tilings auto --torch-variants fused --calibrate-steps 2 \
            --starpu-home "$OUT/starpu-home" --output "$OUT/RESULTS-gpu-torch.md") \
            > "$OUT/torch.log" 2>&1
        echo "torch: exit $?"; tail -n 25 "$OUT/torch.log" ;;
    probe)
        for v in "cpus0 --cpus 0" "cpus0-nopin --cpus 0" "cpus2 --cpus 2" "cpus2-nopin --cpus 2" \
                 "cpus2-cal1 --cpus 2"; do
            set -- $v
            tag=$1
            shift
            case $tag in *nopin) nopin=1 ;; *) nopin=0 ;; esac
            case $tag in *cal1) cal=1 ;; *) cal=10 ;; esac   # StarPU's default: 10 samples
            STARPU_DISABLE_PINNING=$nopin STARPU_CALIBRATE_MINIMUM=$cal \
                STARPU_HOME="$OUT/probe-home-$tag" timeout 60 \
                "$here/gpu-bundle/nnt-train" --model gpt2 --batch 8 --seq 1024 --precision bf16 \
                --gpus 1 "$@" --steps 4 --sample 0 --no-save --val-split 0 --out "$OUT/probe-$tag" \
                > "$OUT/probe-$tag.log" 2>&1
            echo "probe $tag: exit $?, ms per step: $(grep -E '^step [0-9]' "$OUT/probe-$tag.log" |
                awk '{for (i = 2; i <= NF; i++) if ($i == "ms") printf "%s ", $(i - 1)}')"
        done
        # start-up and shut-down of a context with and without the GPU (each test function of
        # a Check program starts one, in a fresh process unless CK_FORK=no)
        for g in 0 1; do
            start=$(date +%s.%N)
            STARPU_HOME="$OUT/probe-home-tiny" timeout 60 "$here/gpu-bundle/nnt-train" \
                --layers 1 --channels 32 --heads 2 --steps 1 --sample 0 --no-save --val-split 0 --gpus $g \
                --cpus 2 --out "$OUT/probe-tiny-gpus$g" > "$OUT/probe-tiny-gpus$g.log" 2>&1
            echo "probe nnt-train 1 tiny step --gpus $g: exit $?, $(awk -v a="$start" \
                -v b="$(date +%s.%N)" 'BEGIN { printf "%.2f", b - a }') s in all"
        done
        for fork in yes no; do
            CK_FORK=$fork STARPU_NCPU=2 NNT_TESTS=ops_gemm NNT_TEST_TIMEOUT=60 \
                OUT="$OUT/probe-fork-$fork" bash "$run" test | sed "s/^/probe CK_FORK=$fork /"
        done
        # the RAM-budget test with a CUDA worker (1 MiB budget): hangs with pinning?
        for nopin in 0 1; do
            STARPU_NCPU=2 STARPU_DISABLE_PINNING=$nopin NNT_TEST_BUDGET_CUDA=1 \
                CK_RUN_CASE=context NNT_TESTS=api NNT_TEST_TIMEOUT=40 NNT_CK_TIMEOUT=15 \
                OUT="$OUT/probe-budget-nopin$nopin" bash "$run" test |
                sed "s/^/probe budget STARPU_DISABLE_PINNING=$nopin /"
        done
        for nopin in 0 1; do
            STARPU_NCPU=2 STARPU_DISABLE_PINNING=$nopin NNT_TESTS=layer_gpt \
                NNT_TEST_TIMEOUT=60 OUT="$OUT/probe-tests-nopin$nopin" bash "$run" test |
                sed "s/^/probe STARPU_DISABLE_PINNING=$nopin /"
        done ;;
    cpubench)
        lscpu > "$OUT/lscpu.txt" 2>&1
        grep -E '^(Model name|Flags)' "$OUT/lscpu.txt" | cut -c1-400
        (cd "$here" && PYTHONUNBUFFERED=1 timeout "${NNT_CPUBENCH_LIMIT:-300}" python3 \
            bench/compare_cpu_kernels.py --nnt-train cpu-bundle/nnt-train \
            --threads "${NNT_CPU_THREADS:-2}" --rounds 2 --steps 3 \
            --output "$OUT/RESULTS-cpu-kernels.md" ${NNT_CPUBENCH_ARGS:-}) \
            > "$OUT/cpubench.log" 2>&1
        echo "cpubench: exit $?"; tail -n 30 "$OUT/cpubench.log" ;;
    bench) timeout "${NNT_BENCH_LIMIT:-240}" bash "$run" bench ;;
    ooc) timeout "${NNT_OOC_LIMIT:-300}" bash "$run" ooc ;;
    *) echo "gpu-session: unknown step '$step'" >&2 ;;
    esac
    pack
done
# the largest measured errors in units of their tolerance (1 = at the limit)
cat "$OUT"/tolerances-*.txt 2>/dev/null | awk -F'\t' '{
    r = ($1 ~ /^cuda:/) ? $2 : ($3 > 0 ? $2 / $3 : 0); printf "%.3g\t%s\n", r, $0 }' |
    sort -g -r | head -n 40
pack
