#!/bin/sh
# Smoke test of nnt-train on a tiny model: the --print-loss format and a decreasing loss,
# bit-exact resume, errors on bad usage and bad files, and the output files of a (short) run
# with the default model and corpus.
set -u
: "${top_builddir:?}"
prog="$top_builddir/nnt-train"
[ -x "$prog" ] || { echo "FAIL: $prog was not built"; exit 1; }
tmp=$(mktemp -d) || exit 99
trap 'rm -rf "$tmp"' EXIT
fail=0

small="--layers 1 --channels 32 --heads 2 --context 32 --batch 2 --seq 16 --sample 0"

# A small text: a few sentences repeated, with line numbers so that it is not periodic.
i=0
while [ $i -lt 300 ]; do
    echo "line $i: the quick brown fox jumps over the lazy dog; a stitch in time saves nine."
    i=$((i + 1))
done > "$tmp/corpus.txt"

fail() { echo "FAIL: $*"; fail=1; }

# run NAME ARGS...: stdout to $tmp/NAME.out, stderr to $tmp/NAME.err, status in $status.
run() {
    name=$1; shift
    "$prog" "$@" > "$tmp/$name.out" 2> "$tmp/$name.err"
    status=$?
}

# expect_error NAME PATTERN ARGS...: nonzero status and PATTERN in the error message.
expect_error() {
    name=$1 pattern=$2; shift 2
    run "$name" "$@"
    if [ $status -eq 0 ]; then
        fail "$name: exit status 0 (expected an error)"
    elif ! grep -q -- "$pattern" "$tmp/$name.err"; then
        fail "$name: status $status but the message does not name '$pattern':"
        cat "$tmp/$name.err"
    else
        echo "ok: $name -> status $status: $(head -n 1 "$tmp/$name.err")"
    fi
}

# ---- (1) --print-loss: exactly N lines "step n loss x.xxxxxx", n = 1..N, loss decreasing ----
run loss20 $small --data "$tmp/corpus.txt" --steps 20 --lr 3e-3 --out "$tmp/o1" --print-loss
if [ $status -ne 0 ]; then
    fail "20 steps: exit status $status"; cat "$tmp/loss20.err"
else
    lines=$(wc -l < "$tmp/loss20.out")
    good=$(grep -c -E '^step [0-9]+ loss [0-9]+\.[0-9]{6}$' "$tmp/loss20.out")
    seq_ok=$(awk '$2 != NR { bad = 1 } END { print bad ? "no" : "yes" }' "$tmp/loss20.out")
    [ "$lines" -eq 20 ] && [ "$good" -eq 20 ] && [ "$seq_ok" = yes ] ||
        { fail "--print-loss: $lines lines, $good well-formed, in order: $seq_ok"; cat "$tmp/loss20.out"; }
    # The mean of the last 5 losses must be well below the mean of the first 5.
    verdict=$(awk 'NR <= 5 { a += $4 } NR > 15 { b += $4 }
                   END { printf "%s first5 %.4f last5 %.4f", (b / 5 < a / 5 - 0.5) ? "ok" : "bad", a / 5, b / 5 }' \
              "$tmp/loss20.out")
    case $verdict in
        ok*) echo "ok: loss decreases: $verdict";;
        *) fail "loss does not decrease: $verdict"; cat "$tmp/loss20.out";;
    esac
fi

# ---- (1a) --recompute gives the same losses bit for bit; --no-save writes no checkpoint ----
run plain20 $small --layers 3 --data "$tmp/corpus.txt" --steps 20 --lr 3e-3 --out "$tmp/r1" \
    --print-loss --no-save
run rec20 $small --layers 3 --data "$tmp/corpus.txt" --steps 20 --lr 3e-3 --out "$tmp/r2" \
    --print-loss --no-save --recompute
if [ $status -ne 0 ] || ! cmp -s "$tmp/plain20.out" "$tmp/rec20.out" ||
   [ "$(wc -l < "$tmp/plain20.out")" -ne 20 ]; then
    fail "--recompute: status $status, losses differ or missing:"
    paste "$tmp/plain20.out" "$tmp/rec20.out"; cat "$tmp/rec20.err"
else
    echo "ok: --recompute: the 20 losses are identical"
fi
if [ -e "$tmp/r1/checkpoint.safetensors" ] || [ -e "$tmp/r2/checkpoint.safetensors" ] ||
   [ ! -s "$tmp/r1/train.csv" ]; then
    fail "--no-save: a checkpoint was written, or no train.csv"
else
    echo "ok: --no-save: train.csv but no checkpoint"
fi

# ---- (1d) --precision tf32 / bf16: GEMM operands rounded, so the 20 losses differ from the
# fp32 run's (above) but stay within 2e-2 of them --------------------------------------------
for p in tf32 bf16; do
    run "prec_$p" $small --layers 3 --data "$tmp/corpus.txt" --steps 20 --lr 3e-3 \
        --out "$tmp/p_$p" --print-loss --no-save --precision $p
    verdict=$(awk 'FNR == 1 { f++ } f == 1 { l[FNR] = $4 } f == 2 { d = $4 - l[FNR];
                   if (d < 0) d = -d; if (d > m) m = d; n++ }
                   END { printf "%s %g", (n == 20 && m > 0 && m < 2e-2) ? "ok" : "bad", m }' \
              "$tmp/plain20.out" "$tmp/prec_$p.out")
    if [ $status -ne 0 ] || [ "${verdict%% *}" != ok ] ||
       ! grep -q "$p GEMM operands" "$tmp/prec_$p.err"; then
        fail "--precision $p: status $status, largest loss difference to fp32 ${verdict#* }:"
        paste "$tmp/plain20.out" "$tmp/prec_$p.out"; tail -n 5 "$tmp/prec_$p.err"
    else
        echo "ok: --precision $p: the 20 losses are within ${verdict#* } of fp32's (< 2e-2, > 0)"
    fi
done

# ---- (1c) out of core: a 1 MiB RAM budget (the state is about 2.6 MiB) with a disk swap,
# with and without --recompute, gives the losses of the run in RAM, bit for bit (without
# recompute the activations saved for the backward are hinted wont_use, which under a swap
# queues StarPU prefetches to the disk: none of those handles may be invalidated) -------
ooc="--layers 3 --channels 64 --heads 2 --context 32 --batch 2 --seq 16 --sample 0 --no-save"
run ram6 $ooc --data "$tmp/corpus.txt" --steps 6 --out "$tmp/ram" --print-loss
for rec in --recompute ""; do
    run ooc6 $ooc --data "$tmp/corpus.txt" --steps 6 --out "$tmp/ooc" --print-loss $rec \
        --mem-cpu 1 --swap-dir "$tmp/swap" --swap-size 64
    what="1 MiB RAM budget + swap${rec:+ + $rec}"
    if [ $status -ne 0 ] || ! cmp -s "$tmp/ram6.out" "$tmp/ooc6.out" ||
       [ "$(wc -l < "$tmp/ram6.out")" -ne 6 ]; then
        fail "$what: status $status, losses differ from the run in RAM:"
        paste "$tmp/ram6.out" "$tmp/ooc6.out"; tail -n 5 "$tmp/ooc6.err"
    elif ! grep -q "moved between nodes" "$tmp/ooc6.err" ||
         grep -q "; 0.0 MiB moved between nodes" "$tmp/ooc6.err"; then
        fail "$what: nothing was moved to the disk:"; grep memory "$tmp/ooc6.err"
    else
        echo "ok: $what: the 6 losses of the run in RAM;" \
             "$(grep '^memory:' "$tmp/ooc6.err" | sed 's/^memory: *//')"
    fi
done

# ---- (1b) --accum K: step s averages the windows s*K-K+1 .. s*K of a run without it. With a
# learning rate of 1e-30 the weights do not move, so the accum-2 losses are the means of
# consecutive pairs of accum-1 losses.
run acc1 $small --data "$tmp/corpus.txt" --steps 4 --lr 1e-30 --weight-decay 0 --out "$tmp/a1" --print-loss
run acc2 $small --data "$tmp/corpus.txt" --steps 2 --accum 2 --lr 1e-30 --weight-decay 0 \
    --out "$tmp/a2" --print-loss
verdict=$(awk 'FNR == 1 { f++ } f == 1 { l[FNR] = $4 } f == 2 { m = (l[2 * FNR - 1] + l[2 * FNR]) / 2;
               d = $4 - m; if (d < 0) d = -d; if (d > 2e-6) bad = 1; n++ }
               END { print (n == 2 && !bad) ? "ok" : "bad" }' "$tmp/acc1.out" "$tmp/acc2.out")
[ "$verdict" = ok ] && echo "ok: --accum 2 losses are the means of consecutive windows" ||
    { fail "--accum 2:"; paste "$tmp/acc1.out" "$tmp/acc2.out"; cat "$tmp/acc2.err"; }

# ---- (2) resume: 3 steps, save, resume to 6 == 6 uninterrupted steps, bit for bit -----------
# (--steps is the total, so the first part stops after step 3 of the same 6-step schedule.)
run full6 $small --data "$tmp/corpus.txt" --steps 6 --out "$tmp/full" --print-loss
run first3 $small --data "$tmp/corpus.txt" --steps 6 --stop-after 3 --out "$tmp/half" --print-loss
run resume6 $small --data "$tmp/corpus.txt" --steps 6 --out "$tmp/half2" --print-loss \
    --resume "$tmp/half/checkpoint.safetensors"
if [ $status -ne 0 ]; then
    fail "resume: exit status $status"; cat "$tmp/resume6.err"
elif ! tail -n 3 "$tmp/full6.out" | cmp -s - "$tmp/resume6.out" ||
     ! head -n 3 "$tmp/full6.out" | cmp -s - "$tmp/first3.out"; then
    fail "resume is not bit-exact:"; paste "$tmp/full6.out" "$tmp/first3.out" "$tmp/resume6.out"
else
    echo "ok: resume bit-exact: $(tr '\n' ' ' < "$tmp/resume6.out")"
fi

# ---- (3) bad usage and bad files: nonzero status, a message naming the problem -------------
expect_error unknown_option "--frobnicate" $small --frobnicate
expect_error steps_abc "abc" $small --steps abc
expect_error missing_value "--lr" $small --lr
expect_error out_of_range "--beta1" $small --beta1 1.5
expect_error seq_too_long "--seq" $small --seq 64
expect_error heads_channels "--heads" --layers 1 --channels 30 --heads 4
expect_error bpe_files "--bpe-vocab" $small --tokenizer bpe
expect_error no_save_every "--no-save" $small --no-save --save-every 2
expect_error missing_data "$tmp/no-such-file.txt" $small --data "$tmp/no-such-file.txt"
ckpt="$tmp/half/checkpoint.safetensors"
if [ -f "$ckpt" ]; then
    size=$(wc -c < "$ckpt")
    head -c $((size / 2)) "$ckpt" > "$tmp/truncated.safetensors"
    expect_error truncated_resume "--resume" $small --data "$tmp/corpus.txt" --steps 6 \
        --out "$tmp/bad1" --resume "$tmp/truncated.safetensors"
    # One byte changed in the middle of the tensor data.
    cp "$ckpt" "$tmp/corrupt.safetensors"
    printf '\377' | dd of="$tmp/corrupt.safetensors" bs=1 seek=$((size - size / 3)) conv=notrunc 2>/dev/null
    expect_error corrupt_resume "checksum" $small --data "$tmp/corpus.txt" --steps 6 \
        --out "$tmp/bad2" --resume "$tmp/corrupt.safetensors"
    run other_model --layers 1 --channels 64 --heads 2 --context 32 --batch 2 --seq 16 \
        --sample 0 --data "$tmp/corpus.txt" --steps 6 --out "$tmp/bad3" --resume "$ckpt"
    [ $status -eq 2 ] && grep -q "resume" "$tmp/other_model.err" &&
        echo "ok: other model refused: $(head -n 1 "$tmp/other_model.err")" ||
        { fail "a checkpoint of another model: status $status (expected 2)"; cat "$tmp/other_model.err"; }
    run other_heads --layers 1 --channels 32 --heads 4 --context 32 --batch 2 --seq 16 \
        --sample 0 --data "$tmp/corpus.txt" --steps 6 --out "$tmp/bad4" --resume "$ckpt"
    [ $status -eq 2 ] && grep -q "resume" "$tmp/other_heads.err" &&
        echo "ok: other head count refused: $(head -n 1 "$tmp/other_heads.err" | cut -c1-100)" ||
        { fail "a checkpoint with other heads: status $status (expected 2)"; cat "$tmp/other_heads.err"; }
else
    fail "no checkpoint at $ckpt"
fi

# ---- (4) the default run, shortened: files written, sample printed ----------------------
if [ -d /usr/share/common-licenses ]; then
    run defaults --steps 2 --sample 8 --out "$tmp/def"
    if [ $status -ne 0 ]; then
        fail "default run: exit status $status"; cat "$tmp/defaults.err"
    else
        [ "$(wc -l < "$tmp/def/train.csv")" -eq 3 ] || fail "train.csv has not 1 + 2 lines"
        grep -q '<polyline' "$tmp/def/loss.svg" || fail "loss.svg has no curve"
        [ -s "$tmp/def/checkpoint.safetensors" ] || fail "no checkpoint"
        grep -q -- '---- sample' "$tmp/defaults.out" || fail "no sample printed"
        grep -q 'written' "$tmp/defaults.out" || fail "no list of the files written"
        echo "ok: default run (2 steps): $(grep -c '^step' "$tmp/defaults.out") progress lines, files written"
    fi
else
    echo "note: /usr/share/common-licenses missing, default run not tested"
fi

# ---- --help and --version ----------------------------------------------------------------
run help --help
[ $status -eq 0 ] && grep -q -- '--resume' "$tmp/help.out" || fail "--help"
run version --version
[ $status -eq 0 ] && grep -q 'nnt-train' "$tmp/version.out" || fail "--version"

exit $fail
