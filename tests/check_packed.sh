#!/bin/sh
# SPDX-License-Identifier: MIT
# nnt-train on packed rows against transformers: tests/fixtures/packed_tiny/examples.bin holds
# 18 prompt/answer examples packed in 8 rows of T 16 as nnt-tokenize --pack writes them (with
# the example starts), encoded by tests/gen_packed_fixtures.py; NAME.ref has the losses of 4
# AdamW steps in PyTorch with position_ids restarting at each example (transformers then lets
# each example attend to itself only), for a Llama, a GPT-2 and a Mistral (window 4). The
# loss of every step, from train.csv and the --print-loss lines, must equal PyTorch's; the
# same file with its example starts removed (flags 1, an older --pack file) must train as
# before, each example seeing the earlier ones of its row: other losses.
set -u
: "${top_builddir:?}" "${top_srcdir:?}"
prog="$top_builddir/nnt-train"
[ -x "$prog" ] || { echo "FAIL: $prog was not built"; exit 1; }
fx="$top_srcdir/tests/fixtures/packed_tiny"
tmp=$(mktemp -d) || exit 99
trap 'rm -rf "$tmp"' EXIT
fail=0

# Measured (AMD EPYC, 2 cores, 2026-11-28) largest |nnt - PyTorch| over the 4 steps: loss
# 3.1e-6 (llama), 1.5e-6 (gpt2), 5.3e-7 (mistral), 3.9e-6 (llama, --recompute, tiles of 5).
# About 10x: 3.9e-5. --print-loss prints 6 decimals: within 3.9e-5 + 5e-7.
LOSS_TOL=3.9e-5 PRINT_TOL=3.95e-5
ARGS="--batch 2 --seq 16 --steps 4 --accum 1 --optim adamw --lr 0.001 --beta1 0.9
      --beta2 0.999 --eps 1e-08 --weight-decay 0 --grad-clip 0 --warmup 0
      --schedule constant --tile-seq 3 --tile-batch 1"

# the file without its example starts: flags 1, the last (N + 7) / 8 bytes dropped
size=$(wc -c < "$fx/examples.bin")
n=$(od -An -tu4 -j 8 -N 4 "$fx/examples.bin" | tr -d ' ')   # header[2]: N
head -c $((size - (n + 7) / 8)) "$fx/examples.bin" > "$tmp/nostarts.bin"
printf '\001' | dd of="$tmp/nostarts.bin" bs=1 seek=12 conv=notrunc 2> /dev/null

run() {   # NAME DATA OUT [OPTIONS]: nnt-train's losses "step loss printed"
    # shellcheck disable=SC2086 # the options are words
    "$prog" --load-hf "$fx/$1" --data "$2" $ARGS ${4:-} --print-loss --sample 0 --no-save \
        --out "$3" > "$3.out" 2> "$3.err" || {
        echo "FAIL: $1: nnt-train on $(basename "$2") exit status $?"; tail -n 5 "$3.err"
        return 1; }
    tail -n +2 "$3/train.csv" | cut -d, -f1-2 | tr ',' ' ' > "$3.csv"
    sed -n 's/^step \([0-9]*\) loss \(.*\)$/\2/p' "$3.out" > "$3.printed"
    paste -d' ' "$3.csv" "$3.printed"
}

# After a failure: what the host and the run were, and whether the same run gives the same
# losses again (a run whose losses change from run to run is a race, not a formula: seen once,
# in CI on 2026-11-28, llama+recompute 2.9e-4 and 5.6e-4 off at steps 2 and 4 only, on a host
# not known; never here in hundreds of runs)
diagnose() {   # NAME DATA OUT OPTIONS
    echo "# host: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2-), $(nproc) CPUs"
    grep -E '^(runtime|kernels|tiling|optimizer):' "$3.err" | sed 's/^/# /'
    echo "# this run (step loss printed):"; sed 's/^/#   /' "$3.got"
    run "$1" "$2" "$3-again" "$4" > "$3.again" || return
    echo "# the same run again (step loss printed):"; sed 's/^/#   /' "$3.again"
    cmp -s "$3.got" "$3.again" && echo "# the same losses: deterministic" ||
        echo "# other losses: the run is not deterministic"
}

# the Llama again with --recompute (the blocks' forwards run again in the backward, with the
# positions) and tiles of 5 rows over both batch rows
for run in llama gpt2 mistral llama+recompute; do
    name=${run%%+*} more=
    [ "$run" = "$name" ] || more="--recompute --tile-seq 5 --tile-batch 2"
    run "$name" "$fx/examples.bin" "$tmp/$run" "$more" > "$tmp/$run.got" || { fail=1; continue; }
    grep -v '^#' "$fx/$name.ref" | paste -d' ' - "$tmp/$run.got" | awk -v n="$run" \
        -v lt=$LOSS_TOL -v pt=$PRINT_TOL '
        function abs(x) { return x < 0 ? -x : x }
        NF != 5 || $1 != $3 { print "FAIL: " n ": step " NR ": rows do not match: " $0; bad = 1; next }
        {
            dl = abs($4 - $2); dp = abs($5 - $2)
            if (dl > wl) wl = dl; if (dp > wp) wp = dp
            if (dl > lt || dp > pt) {
                printf "FAIL: %s step %d: loss %s (printed %s), PyTorch %s\n", n, $1, $4, $5, $2
                bad = 1
            }
        }
        END {
            if (NR != 4) { print "FAIL: " n ": " NR " steps, reference 4"; bad = 1 }
            if (!bad)
                printf "ok: %s: 4 steps on packed rows as PyTorch: loss within %.2g, printed %.2g\n", n, wl, wp
            exit bad
        }' || { fail=1; diagnose "$name" "$fx/examples.bin" "$tmp/$run" "$more"; }
    [ "$run" = "$name" ] || continue
    # without the starts: the examples of a row see each other (the first step's loss differs)
    run "$name" "$tmp/nostarts.bin" "$tmp/$name-old" > "$tmp/$name-old.got" || { fail=1; continue; }
    paste -d' ' "$tmp/$name.got" "$tmp/$name-old.got" | awk -v n="$name" '
        function abs(x) { return x < 0 ? -x : x }
        NR == 1 { d = abs($2 - $5) }
        END {
            if (NR != 4 || d < 1e-3) { printf "FAIL: %s: the file without example starts gives the same first loss (difference %g)\n", n, d; exit 1 }
            printf "ok: %s: without example starts another loss (first step %.4g away)\n", n, d
        }' || fail=1
done
exit $fail
