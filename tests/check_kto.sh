#!/bin/sh
# SPDX-License-Identifier: MIT
# nnt-train --dpo-loss kto and apo_zero_unpaired against TRL 1.16's own KTOTrainer
# (tests/fixtures/kto_tiny, tests/gen_kto_fixtures.py): unpaired preference records
# (conversations, 12 to train, 8 held out) of the chatml tokenizer, read as nnt-train --data
# FILE.jsonl; beta 0.3, desirable_weight 1.3, undesirable_weight 0.7, AdamW. The step losses
# and the held-out loss must equal KTOTrainer's (B 4; B 2 accum 2; APO-zero), the token files
# nnt-train and nnt-tokenize --unpaired write must be the rows KTOTrainer tokenized, byte for
# byte; the summary, the step lines (kl, margin), a resumed run's weights; usage errors exit
# with status 2 and bad records are named. Paired records (TRL's DPO forms), which KTOTrainer
# unpairs: its losses, its rows and their order (chosen rows of each 1000 records, then their
# rejected ones).
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

# paired records (paired_train.jsonl: prompts given; paired_val.jsonl: prompts shared), which
# KTOTrainer unpairs: the step and held-out losses of its run, the rows byte for byte
# (paired_train.bin: the 6 chosen rows, then the 6 rejected ones)
want=$(python3 "$top_srcdir/tests/st_float64.py" "$fx/reference.safetensors" paired.losses \
    paired.eval_loss)
# shellcheck disable=SC2086 # the options are words
"$prog" $common --dpo-loss kto --batch 4 --val-batches 2 --tile-seq 50 --no-save \
    --data "$fx/paired_train.jsonl" --val-data "$fx/paired_val.jsonl" --out "$tmp/paired" \
    > "$tmp/paired.out" 2> "$tmp/paired.err" || {
    echo "FAIL: nnt-train --dpo-loss kto on paired records: exit status $?"; tail -n 5 "$tmp/paired.err"; fail=1; }
got=$(sed -n 's/^step [0-9]* loss //p' "$tmp/paired.out" | tr '\n' ' ')
gotval=$(sed -n 's/^val 3 loss //p' "$tmp/paired.out")
echo "# paired: nnt $got / held out $gotval; TRL $(echo "$want" | tr '\n' ' ')"
within "$TOL" "$got $gotval" "$(echo "$want" | tr '\n' ' ')" ||
    { echo "FAIL: KTO on paired records: losses differ from KTOTrainer's by more than $TOL"; fail=1; }
cmp -s "$tmp/paired/paired_train.tokens.bin" "$fx/paired_train.bin" &&
    cmp -s "$tmp/paired/paired_val.val-tokens.bin" "$fx/paired_val.bin" ||
    { echo "FAIL: nnt-train's rows of paired records are not KTOTrainer's"; fail=1; }
grep -q "^records:   $fx/paired_train.jsonl: 6 preference pairs, unpaired as KTOTrainer does (6 chosen rows desirable, 6 rejected undesirable) (0 cut to T 96) in 12 rows" \
    "$tmp/paired.out" "$tmp/paired.err" ||
    { echo "FAIL: nnt-train does not count the paired records"; grep '^records' "$tmp/paired.err"; fail=1; }
# --val-split on them: held-out rows of the last records' rejected completions alone, said
"$prog" --load-hf "$fx/llama" --tokenizer-json "$tok" --data "$fx/paired_train.jsonl" \
    --dpo-beta 0.3 --dpo-loss kto --batch 2 --seq 96 --steps 1 --val-split 0.2 --sample 0 \
    --no-save --out "$tmp/split" > "$tmp/split.out" 2> "$tmp/split.err" &&
    grep -q "warning: --val-split holds out the last rows of .*rejected (undesirable)" "$tmp/split.err" ||
    { echo "FAIL: --val-split on paired records for KTO: no warning"; tail -n 3 "$tmp/split.err"; fail=1; }
"$tokenize" --unpaired --tokenizer-json "$tok" --seq 96 --out "$tmp/paired.bin" \
    "$fx/paired_train.jsonl" 2> "$tmp/tok.err" && cmp -s "$tmp/paired.bin" "$fx/paired_train.bin" ||
    { echo "FAIL: nnt-tokenize --unpaired did not write KTOTrainer's rows of paired records"; cat "$tmp/tok.err"; fail=1; }
# the order of many paired records' rows (TRL's, unpair_order.txt: per 1000 records their
# chosen rows, then their rejected ones), read from two files as one dataset, against the
# unpaired records written in that order
awk 'BEGIN { for (i = 0; i < 2503; i++) printf "{\"prompt\": \"p%d\", \"chosen\": \"c%d\", \"rejected\": \"r%d\"}\n", i, i, i }' \
    > "$tmp/many.jsonl"
head -n 1500 "$tmp/many.jsonl" > "$tmp/many1.jsonl"
tail -n +1501 "$tmp/many.jsonl" > "$tmp/many2.jsonl"
awk '{ for (i = $2; i <= $3; i++)
         printf "{\"prompt\": \"p%d\", \"completion\": \"%s%d\", \"label\": %s}\n", i, $1 == "true" ? "c" : "r", i, $1 }' \
    "$fx/unpair_order.txt" > "$tmp/order.jsonl"
[ "$(wc -l < "$tmp/order.jsonl")" -eq 5006 ] || { echo "FAIL: unpair_order.txt is not 5006 rows"; fail=1; }
"$tokenize" --unpaired --tokenizer-json "$tok" --seq 16 --out "$tmp/many.bin" \
    "$tmp/many1.jsonl" "$tmp/many2.jsonl" 2> "$tmp/many.err" &&
"$tokenize" --unpaired --tokenizer-json "$tok" --seq 16 --out "$tmp/order.bin" \
    "$tmp/order.jsonl" 2> "$tmp/order.err" && cmp -s "$tmp/many.bin" "$tmp/order.bin" ||
    { echo "FAIL: 2503 paired records' rows are not in KTOTrainer's order"; cat "$tmp/many.err" "$tmp/order.err"; fail=1; }

# records refused: records of both forms, a label that is not true or false (named with
# their line)
printf '%s\n' '{"prompt": "Sky?", "completion": " Blue.", "label": true}' \
    '{"prompt": "Sky?", "chosen": " Blue.", "rejected": " Green."}' > "$tmp/mixed.jsonl"
printf '%s\n' '{"prompt": "Sky?", "chosen": " Blue.", "rejected": " Green."}' \
    '{"prompt": "Sky?", "completion": " Blue.", "label": true}' > "$tmp/mixed2.jsonl"
printf '%s\n' '{"prompt": "Sky?", "completion": " Blue.", "label": true}' \
    '{"prompt": "Sky?", "completion": " Green.", "label": 0.5}' > "$tmp/half.jsonl"
printf '%s\n' '{"prompt": "Sky?", "chosen": " Blue.", "rejected": " Green."}' \
    '{"prompt": "Sky?", "chosen": " Blue.", "rejected": [{"role": "assistant", "content": "Green."}]}' \
    > "$tmp/kinds.jsonl"
for f in "mixed:a paired preference record among unpaired ones (the first, $tmp/mixed.jsonl:1, is unpaired)" \
         "mixed2:an unpaired preference record among paired ones (the first, $tmp/mixed2.jsonl:1, is paired)" \
         "half:nnt_sft_encode_unpaired_rows: \"label\" is true" \
         "kinds:nnt_sft_encode_unpaired_rows: \"chosen\" and \"rejected\" must be both"; do
    name=${f%%:*} says=${f#*:}
    "$tokenize" --unpaired --tokenizer-json "$tok" --seq 96 --out "$tmp/x.bin" \
        "$tmp/$name.jsonl" 2> "$tmp/$name.err"
    st=$?
    [ "$st" -eq 1 ] && grep -qF "$name.jsonl:2: $says" "$tmp/$name.err" ||
        { echo "FAIL: nnt-tokenize --unpaired on $name records: status $st"; cat "$tmp/$name.err"; fail=1; }
done

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
