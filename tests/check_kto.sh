#!/bin/sh
# SPDX-License-Identifier: MIT
# nnt-train --dpo-loss kto and apo_zero_unpaired against TRL 1.16's own KTOTrainer
# (tests/fixtures/kto_tiny, tests/gen_kto_fixtures.py): unpaired preference records
# (conversations, 12 to train, 8 held out) of the chatml tokenizer, read as nnt-train --data
# FILE.jsonl; beta 0.3, desirable_weight 1.3, undesirable_weight 0.7, AdamW. The step losses
# and the held-out loss must equal KTOTrainer's (B 4; B 2 accum 2; APO-zero), the token files
# nnt-train and nnt-tokenize --unpaired write must be the rows KTOTrainer tokenized, byte for
# byte; the summary, the step lines (kl, margin), a resumed run's weights; usage errors exit
# with status 2 and bad records are named.
set -u
: "${top_builddir:?}" "${top_srcdir:?}"
prog="$top_builddir/nnt-train"
tokenize="$top_builddir/nnt-tokenize"
[ -x "$prog" ] && [ -x "$tokenize" ] || { echo "FAIL: nnt-train or nnt-tokenize not built"; exit 1; }
fx="$top_srcdir/tests/fixtures/kto_tiny"
tok="$top_srcdir/tests/fixtures/sft/chatml/tokenizer.json"
tmp=$(mktemp -d) || exit 99
trap 'rm -rf "$tmp"' EXIT
fail=0
. "$top_srcdir/tests/within.sh"

want=$(python3 "$top_srcdir/tests/st_float64.py" "$fx/reference.safetensors" \
    kto.losses kto.eval_loss accum.losses accum.eval_loss apo.losses apo.eval_loss \
    2>/dev/null) || want=""
if [ -z "$want" ]; then
    echo "SKIP: python3 cannot read the fixture"; exit 77
fi

# Measured (AMD EPYC Zen 4, 2 cores): |nnt - TRL| 3.2e-6 on the step losses, 9.4e-7 on the
# held-out ones (tests/test_kto.c, the same runs through the library). About 10x: 3.2e-5;
# --print-loss prints 6 decimals: within 3.2e-5 + 5e-7.
TOL=3.25e-5
common="--load-hf $fx/llama --tokenizer-json $tok --data $fx/train.jsonl
    --val-data $fx/val.jsonl --dpo-beta 0.3 --desirable-weight 1.3 --undesirable-weight 0.7
    --seq 96 --steps 3 --val-every 3 --optim adamw --lr 0.01 --beta1 0.9 --beta2 0.999
    --eps 1e-08 --weight-decay 0.1 --grad-clip 0 --warmup 0 --schedule constant --print-loss
    --sample 0"
k=0
for run in "kto --batch 4 --val-batches 2 --tile-seq 37" \
           "kto --batch 2 --accum 2 --val-batches 4 --tile-batch 1" \
           "apo_zero_unpaired --batch 4 --val-batches 2"; do
    k=$((k + 1))
    name=$(echo "kto accum apo" | cut -d' ' -f$k)
    # shellcheck disable=SC2086 # the options are words
    "$prog" $common --dpo-loss $run --no-save --out "$tmp/$name" > "$tmp/$name.out" \
        2> "$tmp/$name.err" || {
        echo "FAIL: nnt-train --dpo-loss $run: exit status $?"; tail -n 5 "$tmp/$name.err"; fail=1; }
    got=$(sed -n 's/^step [0-9]* loss //p' "$tmp/$name.out" | tr '\n' ' ')
    gotval=$(sed -n 's/^val 3 loss //p' "$tmp/$name.out")
    wl=$(echo "$want" | sed -n "$((2 * k - 1))p") wv=$(echo "$want" | sed -n "$((2 * k))p")
    echo "# $name: nnt $got / held out $gotval; TRL $wl / $wv"
    within "$TOL" "$got $gotval" "$wl $wv" ||
        { echo "FAIL: --dpo-loss $run: losses differ from KTOTrainer's by more than $TOL"; fail=1; }
done
# the rows: what KTOTrainer tokenized (train.bin, val.bin), from nnt-train and nnt-tokenize
cmp -s "$tmp/kto/train.tokens.bin" "$fx/train.bin" && cmp -s "$tmp/kto/val.val-tokens.bin" "$fx/val.bin" ||
    { echo "FAIL: nnt-train's token files of the records are not KTOTrainer's rows"; fail=1; }
"$tokenize" --unpaired --tokenizer-json "$tok" --seq 96 --out "$tmp/train.bin" \
    "$fx/train.jsonl" 2> "$tmp/tok.err" || {
    echo "FAIL: nnt-tokenize --unpaired: exit status $?"; cat "$tmp/tok.err"; fail=1; }
cmp -s "$tmp/train.bin" "$fx/train.bin" ||
    { echo "FAIL: nnt-tokenize --unpaired did not write KTOTrainer's rows"; fail=1; }
grep -q "^records:   $fx/train.jsonl: 12 unpaired preference records (7 desirable, 5 undesirable)" \
    "$tmp/kto.out" "$tmp/kto.err" || { echo "FAIL: nnt-train does not count the records"; grep '^records' "$tmp/kto.out"; fail=1; }
grep -q "^loss:      KTO, beta 0.3 (TRL's KTOTrainer, loss_type kto, desirable_weight 1.3, undesirable_weight 0.7): 12 rows, each labelled desirable or undesirable, in runs of 4" \
    "$tmp/kto.out" "$tmp/kto.err" || { echo "FAIL: the summary does not describe KTO"; grep '^loss' "$tmp/kto.out"; fail=1; }
grep -q "^loss:      APO-zero unpaired, beta 0.3 .*loss_type apo_zero_unpaired" "$tmp/apo.out" \
    "$tmp/apo.err" ||
    { echo "FAIL: the summary does not describe APO-zero"; grep '^loss' "$tmp/apo.out"; fail=1; }
grep -q "KL row" "$tmp/apo.out" "$tmp/apo.err" && { echo "FAIL: APO-zero's summary names KL rows"; fail=1; }
grep -q 'validation: KTO loss' "$tmp/kto.err" ||
    { echo "FAIL: the summary does not name the KTO loss"; fail=1; }

# the step lines of a run without --print-loss: the first step's loss the labels' (the policy
# is the reference: rows 0-3 desirable, undesirable, desirable, desirable), kl 0 at first
"$prog" --load-hf "$fx/llama" --tokenizer-json "$tok" --data "$fx/train.jsonl" \
    --dpo-beta 0.3 --dpo-loss kto --desirable-weight 1.3 --undesirable-weight 0.7 --batch 4 \
    --seq 96 --steps 2 --lr 0.01 --sample 0 --no-save --out "$tmp/lines" \
    > "$tmp/lines.out" 2> "$tmp/lines.err" || {
    echo "FAIL: nnt-train --dpo-loss kto: exit status $?"; tail -n 5 "$tmp/lines.err"; fail=1; }
grep -q '^step 1/2  loss 0.575000  kl 0.0000  margin 0.0000  lr ' "$tmp/lines.out" ||
    { echo "FAIL: the first KTO step's line"; grep '^step' "$tmp/lines.out"; fail=1; }
grep -q '^step 2/2  loss 0.[0-9]*  kl [0-9]*.[0-9]*  margin -*[0-9]*.[0-9]*  lr ' "$tmp/lines.out" ||
    { echo "FAIL: the second KTO step's line"; grep '^step' "$tmp/lines.out"; fail=1; }

# --resume: the checkpoint of step 2 continues with its weights and reference: step 3 as the
# uninterrupted run's
# shellcheck disable=SC2086 # the options are words
"$prog" $common --dpo-loss kto --batch 4 --val-batches 2 --tile-seq 37 --steps 2 \
    --save "$tmp/kto.ckpt" --out "$tmp/first" > "$tmp/first.out" 2> "$tmp/first.err" || {
    echo "FAIL: nnt-train --dpo-loss kto --steps 2: exit status $?"; tail -n 5 "$tmp/first.err"; fail=1; }
"$prog" --resume "$tmp/kto.ckpt" --tokenizer-json "$tok" --data "$fx/train.jsonl" \
    --val-data "$fx/val.jsonl" --steps 3 --val-every 3 --val-batches 2 --print-loss \
    --sample 0 --no-save --out "$tmp/resumed" > "$tmp/resumed.out" 2> "$tmp/resumed.err" || {
    echo "FAIL: nnt-train --resume of a KTO run: exit status $?"; tail -n 5 "$tmp/resumed.err"; fail=1; }
grep -q "desirable_weight 1.3, undesirable_weight 0.7" "$tmp/resumed.out" "$tmp/resumed.err" ||
    { echo "FAIL: --resume did not restore the weights"; grep '^loss' "$tmp/resumed.out"; fail=1; }
r3=$(sed -n 's/^step 3 loss //p' "$tmp/resumed.out") w3=$(sed -n 's/^step 3 loss //p' "$tmp/kto.out")
echo "# resumed step 3: $r3 (the run's $w3)"
[ -n "$r3" ] && [ "$r3" = "$w3" ] || { echo "FAIL: the resumed step 3 is not the run's"; fail=1; }

# records refused: a paired record, a label that is not true or false (named with its line)
printf '%s\n' '{"prompt": "Sky?", "completion": " Blue.", "label": true}' \
    '{"prompt": "Sky?", "chosen": " Blue.", "rejected": " Green."}' > "$tmp/paired.jsonl"
printf '%s\n' '{"prompt": "Sky?", "completion": " Blue.", "label": true}' \
    '{"prompt": "Sky?", "completion": " Green.", "label": 0.5}' > "$tmp/half.jsonl"
for f in paired half; do
    "$tokenize" --unpaired --tokenizer-json "$tok" --seq 96 --out "$tmp/x.bin" \
        "$tmp/$f.jsonl" 2> "$tmp/$f.err"
    st=$?
    [ "$st" -eq 1 ] && grep -q "$f.jsonl:2: nnt_sft_encode_unpaired" "$tmp/$f.err" ||
        { echo "FAIL: nnt-tokenize --unpaired on $f records: status $st"; cat "$tmp/$f.err"; fail=1; }
done
grep -q "a paired preference record" "$tmp/paired.err" || { echo "FAIL: the paired record's message"; fail=1; }

# usage errors: the weights without kto, kto with B 1, --pack, --unpaired with --preference
for args in "--dpo-beta 0.2 --desirable-weight 2" "--dpo-beta 0.2 --dpo-loss orpo --undesirable-weight 2" \
            "--dpo-beta 0.2 --dpo-loss kto --batch 1" "--dpo-beta 0.2 --dpo-loss kto --pack"; do
    # shellcheck disable=SC2086 # the options are words
    "$prog" --tokenizer-json "$tok" --data "$fx/train.jsonl" --seq 96 --steps 1 $args \
        --no-save --out "$tmp/bad" > /dev/null 2> "$tmp/bad.err"
    st=$?
    [ "$st" -eq 2 ] || { echo "FAIL: nnt-train $args: status $st, not 2"; fail=1; }
done
for args in "--pack" "--preference" "--loss all"; do
    # shellcheck disable=SC2086 # the options are words
    "$tokenize" --unpaired $args --tokenizer-json "$tok" --seq 96 --out "$tmp/x.bin" \
        "$fx/train.jsonl" 2> /dev/null
    st=$?
    [ "$st" -eq 2 ] || { echo "FAIL: nnt-tokenize --unpaired $args: status $st, not 2"; fail=1; }
done
[ "$fail" -eq 0 ] && echo "PASS: nnt-train --dpo-loss kto"
exit "$fail"
