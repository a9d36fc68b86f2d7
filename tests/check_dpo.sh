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
tmp=$(mktemp -d) || exit 99
trap 'rm -rf "$tmp"' EXIT
fail=0
. "$top_srcdir/tests/within.sh"

# the fixture's losses (float64 in reference.safetensors: read from the file's header offsets)
want=$(python3 "$top_srcdir/tests/st_float64.py" "$fx/reference.safetensors" \
    losses val_loss ipo.losses 2>/dev/null) || want=""
if [ -z "$want" ]; then
    echo "SKIP: python3 cannot read the fixture"; exit 77
fi
losses=$(echo "$want" | sed -n 1p) val=$(echo "$want" | sed -n 2p) ipo=$(echo "$want" | sed -n 3p)

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
grep -q 'validation: DPO loss' "$tmp/run.err" ||
    { echo "FAIL: the summary does not name the DPO loss"; fail=1; }

# records: nnt-tokenize --preference and nnt-train's own tokenization of FILE.jsonl agree
tok="$top_srcdir/tests/fixtures/sft/chatml/tokenizer.json"
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

# usage errors: an odd batch, --pack, --preference with --pack, --dpo-loss without --dpo-beta
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
