#!/bin/sh
# SPDX-License-Identifier: MIT
# nnt-train against PyTorch + transformers, one tiny model of each family with its options
# on: Llama (GQA, untied head, q/k/v/o and MLP biases, llama3 RoPE scaling, theta 5000, rms
# eps 1e-3; AdamW with non-default betas and eps, clipping, warmup + cosine to a min_lr,
# accumulation, tiles that cut every dimension), Qwen3 (q/k norms, head_dim 6 != C / NH, GQA,
# tied; Adam with L2 decay, constant schedule, --recompute) and GPT-2 (SGD with momentum,
# clipping, cosine, accumulation). tests/fixtures/train_families/ (tests/gen_train_families.py)
# holds each model directory, the token file, the options of the run (NAME.args) and the
# losses, gradient norms and learning rates of the same training in PyTorch (NAME.ref).
# Every value is compared: train.csv's loss, grad_norm and lr, and the --print-loss lines.
set -u
: "${top_builddir:?}" "${top_srcdir:?}"
prog="$top_builddir/nnt-train"
[ -x "$prog" ] || { echo "FAIL: $prog was not built"; exit 1; }
fx="$top_srcdir/tests/fixtures/train_families"
tmp=$(mktemp -d) || exit 99
trap 'rm -rf "$tmp"' EXIT
fail=0

# Tolerances (absolute on the loss, relative on the gradient norm and lr). Measured (AMD
# EPYC, BLIS zen3, 2026-11-28) largest |nnt - PyTorch| over the 8 steps: loss 3.3e-7
# (llama), 4.3e-7 (qwen3), 3.2e-7 (gpt2); gradient norm 4.0e-8 relative (llama), 5.2e-8
# (qwen3), 5.8e-8 (gpt2); lr: the same 9 digits. About 10x: loss 4e-6, norm 7e-7, lr 1e-8
# (the fixture's 9 digits). --print-loss prints 6 decimals: its lines within 4e-6 + 5e-7.
LOSS_TOL=4e-6 NORM_TOL=7e-7 LR_TOL=1e-8 PRINT_TOL=4.5e-6

for name in llama qwen3 gpt2; do
    out="$tmp/$name"
    # shellcheck disable=SC2046 # the options are words
    "$prog" --load-hf "$fx/$name" --data "$fx/data.bin" $(cat "$fx/$name.args") \
        --print-loss --sample 0 --no-save --out "$out" > "$tmp/$name.out" 2> "$tmp/$name.err"
    status=$?
    if [ $status -ne 0 ]; then
        echo "FAIL: $name: nnt-train exit status $status"; tail -n 5 "$tmp/$name.err"; fail=1
        continue
    fi
    # ref: "step loss grad_norm lr"; train.csv: step,loss,lr,grad_norm,...; printed: "step N loss X"
    grep -v '^#' "$fx/$name.ref" > "$tmp/ref"
    tail -n +2 "$out/train.csv" | cut -d, -f1-4 | tr ',' ' ' > "$tmp/csv"
    sed -n 's/^step \([0-9]*\) loss \(.*\)$/\1 \2/p' "$tmp/$name.out" > "$tmp/printed"
    paste -d' ' "$tmp/ref" "$tmp/csv" "$tmp/printed" | awk -v n="$name" -v lt=$LOSS_TOL \
        -v nt=$NORM_TOL -v rt=$LR_TOL -v pt=$PRINT_TOL -v rows="$(wc -l < "$tmp/ref")" '
        function abs(x) { return x < 0 ? -x : x }
        NF != 10 || $1 != $5 || $1 != $9 { print "FAIL: " n ": step " NR ": rows do not match: " $0; bad = 1; next }
        {
            dl = abs($6 - $2); dn = abs($8 - $3) / $3; dr = abs($7 - $4) / $4; dp = abs($10 - $2)
            if (dl > wl) wl = dl; if (dn > wn) wn = dn; if (dr > wr) wr = dr; if (dp > wp) wp = dp
            if (dl > lt || dn > nt || dr > rt || dp > pt) {
                printf "FAIL: %s step %d: loss %s (printed %s), PyTorch %s; grad norm %s, PyTorch %s; lr %s, PyTorch %s\n", n, $1, $6, $10, $2, $8, $3, $7, $4
                bad = 1
            }
        }
        END {
            if (NR != rows || rows == 0) { print "FAIL: " n ": " NR " steps, reference " rows; bad = 1 }
            if (!bad)
                printf "ok: %s: %d steps as PyTorch: loss within %.2g, grad norm %.2g rel, lr %.2g rel, printed loss %.2g\n", n, NR, wl, wn, wr, wp
            exit bad
        }' || fail=1
done
exit $fail
