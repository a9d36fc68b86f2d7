#!/bin/sh
# SPDX-License-Identifier: MIT
# nnt-train --dpo-beta against PyTorch with TRL's DPO loss: tests/fixtures/dpo_tiny/pairs.bin
# holds 8 preference pairs of a tiny Llama's ids in rows of T 16 (chosen, rejected), encoded
# by tests/gen_dpo_fixtures.py, whose reference.safetensors has the losses of 3 AdamW steps on
# pairs 0-5 and the loss on the held-out pairs 6-7 after them (beta 0.3, the reference the
# model before training). nnt-train's step losses (--print-loss, train.csv) and its last
# validation (--val-split 0.25: the last 2 pairs) must equal them; the reward accuracy and
# margin are printed with each step. Preference records (TRL's forms) through nnt-tokenize
# --preference and through nnt-train --data FILE.jsonl give the same token file, byte for
# byte; usage errors exit with status 2.
set -u
: "${top_builddir:?}" "${top_srcdir:?}"
prog="$top_builddir/nnt-train"
tokenize="$top_builddir/nnt-tokenize"
[ -x "$prog" ] && [ -x "$tokenize" ] || { echo "FAIL: nnt-train or nnt-tokenize not built"; exit 1; }
fx="$top_srcdir/tests/fixtures/dpo_tiny"
tok="$top_srcdir/tests/fixtures/sft/chatml/tokenizer.json"
tmp=$(mktemp -d) || exit 99
trap 'rm -rf "$tmp"' EXIT
fail=0
. "$top_srcdir/tests/within.sh"

# the fixture's losses (float64 in reference.safetensors: read from the file's header offsets)
want=$(python3 "$top_srcdir/tests/st_float64.py" "$fx/reference.safetensors" \
    losses val_loss ipo.losses simpo.losses simpo.val_loss orpo.losses orpo.val_loss \
    rpo.losses rpo.val_loss \
    2>/dev/null) || want=""
if [ -z "$want" ]; then
    echo "SKIP: python3 cannot read the fixture"; exit 77
fi
losses=$(echo "$want" | sed -n 1p) val=$(echo "$want" | sed -n 2p) ipo=$(echo "$want" | sed -n 3p)
simpo=$(echo "$want" | sed -n 4p) simpo_val=$(echo "$want" | sed -n 5p)
orpo=$(echo "$want" | sed -n 6p) orpo_val=$(echo "$want" | sed -n 7p)
rpo=$(echo "$want" | sed -n 8p) rpo_val=$(echo "$want" | sed -n 9p)

# Measured (AMD EPYC Zen 5, 2 cores, 2026-12-02): |nnt - PyTorch| 5.1e-6 on the steps'
# losses, 2.3e-6 on the held-out loss (tests/test_dpo.c, the same runs through the library).
# About 10x: 5.1e-5; --print-loss prints 6 decimals: within 5.1e-5 + 5e-7.
TOL=5.15e-5
"$prog" --load-hf "$fx/llama" --data "$fx/pairs.bin" --dpo-beta 0.3 --batch 4 --seq 16 \
    --steps 3 --val-split 0.25 --val-every 3 --optim adamw --lr 0.01 --beta1 0.9 \
    --beta2 0.999 --eps 1e-08 --weight-decay 0.1 --grad-clip 0 --warmup 0 \
    --schedule constant --tile-seq 5 --tile-batch 2 --print-loss --sample 0 --no-save \
    --out "$tmp/run" > "$tmp/run.out" 2> "$tmp/run.err" || {
    echo "FAIL: nnt-train --dpo-beta: exit status $?"; tail -n 5 "$tmp/run.err"; exit 1; }
got=$(sed -n 's/^step [0-9]* loss //p' "$tmp/run.out" | tr '\n' ' ')
gotval=$(sed -n 's/^val 3 loss //p' "$tmp/run.out")
echo "# nnt:     $got / held out $gotval"
echo "# PyTorch: $losses / held out $val"
if ! within "$TOL" "$got $gotval" "$losses $val"; then
    echo "FAIL: nnt-train --dpo-beta: losses differ from PyTorch's by more than $TOL"; fail=1
fi
# --dpo-loss ipo (TRL's "ipo": the log ratios averaged over each sequence's counted targets);
# the losses, about 2.8 to 5, within 10x the 2.9e-6 measured relative (tests/test_dpo.c)
"$prog" --load-hf "$fx/llama" --data "$fx/pairs.bin" --dpo-beta 0.3 --dpo-loss ipo --batch 4 \
    --seq 16 --steps 3 --val-split 0.25 --val-every 3 --optim adamw --lr 0.01 --beta1 0.9 \
    --beta2 0.999 --eps 1e-08 --weight-decay 0.1 --grad-clip 0 --warmup 0 \
    --schedule constant --print-loss --sample 0 --no-save --out "$tmp/ipo" \
    > "$tmp/ipo.out" 2> "$tmp/ipo.err" || {
    echo "FAIL: nnt-train --dpo-loss ipo: exit status $?"; tail -n 5 "$tmp/ipo.err"; fail=1; }
gotipo=$(sed -n 's/^step [0-9]* loss //p' "$tmp/ipo.out" | tr '\n' ' ')
echo "# ipo: nnt $gotipo / PyTorch $ipo"
within 1.5e-4 "$gotipo" "$ipo" ||
    { echo "FAIL: nnt-train --dpo-loss ipo: losses differ from PyTorch's"; fail=1; }
grep -q "loss_type ipo" "$tmp/ipo.err" "$tmp/ipo.out" ||
    { echo "FAIL: the summary does not name the loss type"; fail=1; }
# TRL's other loss types against the reference (tests/gen_dpo_loss_types.py: TRL's lines for
# each, the same 3 steps): robust (label smoothing 0.1), discopop (tau 0.3), sigmoid_norm,
# apo_down, aot (label smoothing 0.1; a micro-batch's 2 pairs sorted together); measured at most 5.4e-6 from PyTorch's (discopop's step 3; AMD Zen 4, 2026-12-04),
# about 10x
for kind in robust discopop sigmoid_norm apo_down aot; do
    want_k=$(python3 "$top_srcdir/tests/st_float64.py" "$fx/loss_types.safetensors" \
        "train.$kind.losses" 2>/dev/null)
    extra=""
    pairs3="--batch 4 --steps 3 --val-split 0.25 --val-every 3"
    [ "$kind" = robust ] && extra="--dpo-label-smoothing 0.1 $pairs3"
    # (all 8 pairs, 4 steps: the first step's two orders are the same, the policy being the
    # reference; the later ones' differ)
    [ "$kind" = aot ] && extra="--dpo-label-smoothing 0.1 --batch 4 --steps 4 --val-split 0"
    [ "$kind" = discopop ] && extra="--discopop-tau 0.3 $pairs3"
    [ -z "$extra" ] && extra="$pairs3"
    # shellcheck disable=SC2086 # the options are words
    "$prog" --load-hf "$fx/llama" --data "$fx/pairs.bin" --dpo-beta 0.3 --dpo-loss $kind $extra \
        --seq 16 --optim adamw --lr 0.01 \
        --beta1 0.9 --beta2 0.999 --eps 1e-08 --weight-decay 0.1 --grad-clip 0 --warmup 0 \
        --schedule constant --print-loss --sample 0 --no-save --out "$tmp/$kind" \
        > "$tmp/$kind.out" 2> "$tmp/$kind.err" || {
        echo "FAIL: nnt-train --dpo-loss $kind: exit status $?"; tail -n 5 "$tmp/$kind.err"; fail=1; }
    got_k=$(sed -n 's/^step [0-9]* loss //p' "$tmp/$kind.out" | tr '\n' ' ')
    echo "# $kind: nnt $got_k / PyTorch $want_k"
    [ -n "$want_k" ] && within 5e-5 "$got_k" "$want_k" ||
        { echo "FAIL: nnt-train --dpo-loss $kind: losses differ from PyTorch's"; fail=1; }
    grep -q "loss_type $kind" "$tmp/$kind.err" "$tmp/$kind.out" ||
        { echo "FAIL: the summary does not name loss type $kind"; fail=1; }
done
grep -q 'validation: DPO loss' "$tmp/run.err" ||
    { echo "FAIL: the summary does not name the DPO loss"; fail=1; }

# the losses without a reference: --dpo-loss simpo (TRL's CPOTrainer, simpo_gamma 0.7,
# cpo_alpha 0.4) and orpo (ORPOTrainer), and RPO (--rpo-alpha 0.5: DPOTrainer's loss_type
# [sigmoid, sft]), beta 0.3: 3 steps and the held-out pairs after them,
# the losses 3 to 7, within 10x the 6.9e-7 measured relative (tests/test_dpo.c) plus the
# printed digits; the summary names the loss and says there is no reference; ORPO's model
# saved after the run (--save-hf) validated alone (--steps 0, no training data) gives the
# run's held-out loss
for kind in simpo orpo rpo; do
    extra="--dpo-loss $kind"
    [ "$kind" = simpo ] && extra="--dpo-loss simpo --simpo-gamma 0.7 --cpo-alpha 0.4"
    [ "$kind" = rpo ] && extra="--rpo-alpha 0.5"
    # shellcheck disable=SC2086 # the options are words
    "$prog" --load-hf "$fx/llama" --data "$fx/pairs.bin" --dpo-beta 0.3 \
        $extra --batch 4 --seq 16 --steps 3 --val-split 0.25 --val-every 3 --optim adamw \
        --lr 0.01 --beta1 0.9 --beta2 0.999 --eps 1e-08 --weight-decay 0.1 --grad-clip 0 \
        --warmup 0 --schedule constant --tile-seq 7 --print-loss --sample 0 --no-save \
        --save-hf "$tmp/$kind-hf" --out "$tmp/$kind" > "$tmp/$kind.out" 2> "$tmp/$kind.err" || {
        echo "FAIL: nnt-train --dpo-loss $kind: exit status $?"; tail -n 5 "$tmp/$kind.err"; fail=1; }
    got=$(sed -n 's/^step [0-9]* loss //p' "$tmp/$kind.out" | tr '\n' ' ')
    gotval=$(sed -n 's/^val 3 loss //p' "$tmp/$kind.out")
    case $kind in
        simpo) want_l=$simpo want_v=$simpo_val;;
        orpo) want_l=$orpo want_v=$orpo_val;;
        *) want_l=$rpo want_v=$rpo_val;;
    esac
    echo "# $kind: nnt $got / held out $gotval; PyTorch $want_l / $want_v"
    within 5e-5 "$got $gotval" "$want_l $want_v" ||
        { echo "FAIL: nnt-train --dpo-loss $kind: losses differ from PyTorch's"; fail=1; }
    [ "$kind" = rpo ] && continue
    grep -q "no reference model" "$tmp/$kind.out" "$tmp/$kind.err" ||
        { echo "FAIL: --dpo-loss $kind: the summary does not say there is no reference"; fail=1; }
    grep -q "DPO: the reference log-likelihoods" "$tmp/$kind.err" "$tmp/$kind.out" &&
        { echo "FAIL: --dpo-loss $kind ran a reference pass"; fail=1; }
done
grep -q "DPO, beta 0.3, and rpo_alpha 0.5 times the chosen sequences' nll (RPO: TRL's loss_type \[sigmoid, sft\]" \
    "$tmp/rpo.out" "$tmp/rpo.err" || { echo "FAIL: --rpo-alpha: the summary"; fail=1; }
grep -q "^loss:      SimPO, beta 0.3 (TRL's CPOTrainer, loss_type simpo, simpo_gamma 0.7, cpo_alpha 0.4)" \
    "$tmp/simpo.out" "$tmp/simpo.err" || { echo "FAIL: the summary does not describe SimPO"; grep -h "^loss" "$tmp/simpo.out" "$tmp/simpo.err"; fail=1; }
grep -q 'validation: ORPO loss' "$tmp/orpo.err" ||
    { echo "FAIL: the summary does not name the ORPO loss"; fail=1; }
# --dpo-loss cpo on preference records: TRL's default cpo_alpha 1, the records read as pairs
"$prog" --tokenizer-json "$tok" --data "$fx/preference.jsonl" --dpo-beta 0.2 --dpo-loss cpo \
    --batch 2 --seq 96 --steps 1 --layers 1 --channels 32 --heads 2 --sample 0 --no-save \
    --val-split 0 --out "$tmp/cpo" > "$tmp/cpo.out" 2> "$tmp/cpo.err" || {
    echo "FAIL: nnt-train --dpo-loss cpo: exit status $?"; tail -n 5 "$tmp/cpo.err"; fail=1; }
grep -q "^loss:      CPO, beta 0.2 (TRL's CPOTrainer, loss_type sigmoid, cpo_alpha 1): 7 pairs" \
    "$tmp/cpo.out" || { echo "FAIL: --dpo-loss cpo's summary"; grep '^loss' "$tmp/cpo.out"; fail=1; }
# the held-out pairs (the last 2 of 8: rows 12-15) of pairs.bin by themselves
python3 - "$fx/pairs.bin" "$tmp/held.bin" <<'PY' || fail=1
import struct, sys
raw = open(sys.argv[1], "rb").read()
head = list(struct.unpack("<256i", raw[:1024]))
n, t = head[2], head[4]
ids = raw[1024:1024 + 2 * n]
mask = raw[1024 + 2 * n:]
bits = [(mask[i // 8] >> (i % 8)) & 1 for i in range(n)]
keep = range(12 * t, 16 * t)
head[2] = len(keep)
out = bytearray((len(keep) + 7) // 8)
for j, i in enumerate(keep):
    out[j // 8] |= bits[i] << (j % 8)
open(sys.argv[2], "wb").write(struct.pack("<256i", *head) + ids[2 * keep[0]:2 * (keep[-1] + 1)] + bytes(out))
PY
"$prog" --load-hf "$tmp/orpo-hf" --val-data "$tmp/held.bin" --dpo-beta 0.3 --dpo-loss orpo \
    --batch 4 --seq 16 --steps 0 --tile-seq 7 --print-loss --sample 0 --no-save \
    --out "$tmp/orpo-val" > "$tmp/orpo-val.out" 2> "$tmp/orpo-val.err" || {
    echo "FAIL: nnt-train --dpo-loss orpo --steps 0: exit status $?"; tail -n 5 "$tmp/orpo-val.err"; fail=1; }
alone=$(sed -n 's/^val 0 loss //p' "$tmp/orpo-val.out")
echo "# orpo validated alone: $alone (the run's $(sed -n 's/^val 3 loss //p' "$tmp/orpo.out"))"
[ -n "$alone" ] && [ "$alone" = "$(sed -n 's/^val 3 loss //p' "$tmp/orpo.out")" ] ||
    { echo "FAIL: ORPO's saved model validated alone: not the run's held-out loss"; fail=1; }

# records: nnt-tokenize --preference and nnt-train's own tokenization of FILE.jsonl agree
"$tokenize" --preference --tokenizer-json "$tok" --seq 96 --out "$tmp/pairs.bin" \
    "$fx/preference.jsonl" 2> "$tmp/tok.err" || {
    echo "FAIL: nnt-tokenize --preference: exit status $?"; cat "$tmp/tok.err"; fail=1; }
"$prog" --tokenizer-json "$tok" --data "$fx/preference.jsonl" --dpo-beta 0.2 --batch 2 \
    --seq 96 --steps 2 --layers 1 --channels 32 --heads 2 --sample 0 --no-save \
    --val-split 0 --out "$tmp/jsonl" > "$tmp/jsonl.out" 2> "$tmp/jsonl.err" || {
    echo "FAIL: nnt-train --data FILE.jsonl --dpo-beta: exit status $?"; tail -n 5 "$tmp/jsonl.err"; fail=1; }
cmp -s "$tmp/pairs.bin" "$tmp/jsonl/preference.tokens.bin" ||
    { echo "FAIL: nnt-tokenize --preference and nnt-train wrote different token files"; fail=1; }
grep -q '^loss:      DPO, beta 0.2 .*: 7 pairs of rows (chosen, rejected), 1 a micro-batch' \
    "$tmp/jsonl.out" || { echo "FAIL: the summary has no DPO line"; grep -A1 '^data' "$tmp/jsonl.out"; fail=1; }
grep -q '7 preference pairs' "$tmp/jsonl.out" ||
    { echo "FAIL: nnt-train does not count the pairs"; grep '^records' "$tmp/jsonl.out"; fail=1; }
# the step lines: the loss (log 2 first: the reference is the policy), the rewards
grep -q '^step 1/2  loss 0.693147  acc 0.000  margin 0.0000  lr ' "$tmp/jsonl.out" ||
    { echo "FAIL: the first DPO step's line: not log 2, or no rewards"; grep '^step' "$tmp/jsonl.out"; fail=1; }
grep -q '^step 2/2  loss 0.[0-9]*  acc [01].000  margin -*0.[0-9]*  lr ' "$tmp/jsonl.out" ||
    { echo "FAIL: the second DPO step's line"; grep '^step' "$tmp/jsonl.out"; fail=1; }

# prompt/answer records (one example a row) given to --dpo-beta: rows that do not start
# alike, warned of
printf '%s\n' '{"prompt": "Sky?", "completion": " Blue."}' '{"prompt": "Grass?", "completion": " Green."}' \
    '{"prompt": "Snow?", "completion": " White."}' '{"prompt": "Coal?", "completion": " Black."}' \
    > "$tmp/sft.jsonl"
"$tokenize" --jsonl --tokenizer-json "$tok" --seq 96 --out "$tmp/sft.bin" "$tmp/sft.jsonl" \
    2> /dev/null || { echo "FAIL: nnt-tokenize --jsonl"; fail=1; }
"$prog" --tokenizer-json "$tok" --data "$tmp/sft.bin" --dpo-beta 0.2 --batch 2 --seq 96 \
    --steps 1 --layers 1 --channels 32 --heads 2 --sample 0 --no-save --val-split 0 \
    --out "$tmp/sft" > "$tmp/sft.out" 2> "$tmp/sft.err" || {
    echo "FAIL: nnt-train --dpo-beta on rows of examples: exit status $?"; fail=1; }
grep -q 'pairs have a chosen and a rejected sequence that start with different tokens' \
    "$tmp/sft.err" || { echo "FAIL: no warning on rows that are not pairs"; cat "$tmp/sft.err"; fail=1; }
grep -q 'start with different tokens' "$tmp/jsonl.out" "$tmp/jsonl.err" "$tmp/run.err" &&
    { echo "FAIL: a warning on real pairs"; fail=1; }

# usage errors: an odd batch, --pack, --preference with --pack, --dpo-loss without --dpo-beta,
# --simpo-gamma without simpo, --cpo-alpha with orpo
for args in "--dpo-beta 0.2 --simpo-gamma 0.3" "--dpo-beta 0.2 --dpo-loss orpo --cpo-alpha 0.5" \
            "--dpo-beta 0.2 --dpo-loss simpo --rpo-alpha 0.5" "--rpo-alpha 0.5" \
            "--dpo-beta 0.2 --dpo-label-smoothing 0.1" "--dpo-beta 0.2 --discopop-tau 0.1" \
            "--dpo-beta 0.2 --dpo-loss robust --dpo-label-smoothing 1"; do
    # shellcheck disable=SC2086 # the options are words
    "$prog" --tokenizer-json "$tok" --data "$fx/preference.jsonl" --seq 96 --steps 1 $args \
        --no-save --out "$tmp/bad" > /dev/null 2> "$tmp/bad.err"
    st=$?
    [ "$st" -eq 2 ] || { echo "FAIL: nnt-train $args: status $st, not 2"; fail=1; }
done
"$prog" --tokenizer-json "$tok" --data "$fx/preference.jsonl" --dpo-loss ipo --seq 96 \
    --steps 1 --no-save --out "$tmp/bad" > /dev/null 2>&1
st=$?
[ "$st" -eq 2 ] || { echo "FAIL: nnt-train --dpo-loss without --dpo-beta: status $st, not 2"; fail=1; }
for args in "--batch 3" "--pack"; do
    # shellcheck disable=SC2086 # the options are words
    "$prog" --tokenizer-json "$tok" --data "$fx/preference.jsonl" --dpo-beta 0.2 --seq 96 \
        --steps 1 $args --no-save --out "$tmp/bad" > /dev/null 2> "$tmp/bad.err"
    st=$?
    [ "$st" -eq 2 ] || { echo "FAIL: nnt-train --dpo-beta $args: status $st, not 2"; fail=1; }
done
"$tokenize" --preference --pack --tokenizer-json "$tok" --seq 96 --out "$tmp/x.bin" \
    "$fx/preference.jsonl" 2> /dev/null
st=$?
[ "$st" -eq 2 ] || { echo "FAIL: nnt-tokenize --preference --pack: status $st, not 2"; fail=1; }
[ "$fail" -eq 0 ] && echo "PASS: nnt-train --dpo-beta"
exit "$fail"
