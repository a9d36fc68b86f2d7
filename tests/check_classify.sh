#!/bin/sh
# SPDX-License-Identifier: MIT
# nnt-train on a text classifier against PyTorch: tests/fixtures/cls_tiny (tests/
# gen_cls_fixtures.py): a tiny LlamaForSequenceClassification of 3 labels over the llama3
# fixture tokenizer, its classification records ({"text", "label"}: text_train.jsonl,
# text_val.jsonl), 3 AdamW steps of 4 examples (one text cut to T - 1 tokens): the step
# losses, then the held-out loss and accuracy, for three tilings and batchings, from the
# .jsonl records and from nnt-tokenize --num-labels's token file; the summary, the records
# line, val.csv, --save-hf; refusals (labels out of range, data that is not labelled, a text
# too long without --too-long cut, usage).
prog="$top_builddir/nnt-train"
tok_prog="$top_builddir/nnt-tokenize"
[ -x "$prog" ] && [ -x "$tok_prog" ] || { echo "FAIL: nnt-train or nnt-tokenize not built"; exit 1; }
fx="$top_srcdir/tests/fixtures/cls_tiny"
tokdir="$top_srcdir/tests/fixtures/sft/llama3"
tmp=$(mktemp -d) || exit 99
trap 'rm -rf "$tmp"' EXIT
fail=0
. "$top_srcdir/tests/within.sh"

want=$(python3 "$top_srcdir/tests/st_float64.py" "$fx/llama_text.safetensors" \
    losses val_loss val_accuracy probs0 2>/dev/null) || want=""
if [ -z "$want" ]; then
    echo "SKIP: python3 cannot read the fixture"; exit 77
fi
ref="$(echo "$want" | sed -n 1,3p | tr '\n' ' ')" probs0="$(echo "$want" | sed -n 4p)"

# Measured (AMD EPYC Zen 5, 2 cores, 2026-12-02): the losses within 1.5e-6 of PyTorch's, the
# held-out loss within 1e-6, at --print-loss's 6 decimals (the rounding alone 5e-7); about
# 10x: 1.5e-5. The accuracy is a share of 4 examples: equal.
TOL=1.5e-5
common="--load-hf $fx/llama_text --val-every 3 --steps 3 --seq 48 --optim adamw --lr 0.01
    --beta1 0.9 --beta2 0.999 --eps 1e-08 --weight-decay 0.1 --grad-clip 0 --warmup 0
    --schedule constant --print-loss --val-batches 0 --sample 0 --no-save"
# one run: its name, then its options; compares its 3 losses, held-out loss and accuracy
run() {
    name=$1
    shift
    # shellcheck disable=SC2086
    "$prog" $common "$@" --out "$tmp/$name" > "$tmp/$name.out" 2> "$tmp/$name.err" || {
        echo "FAIL: nnt-train $name: exit status $?"; tail -n 5 "$tmp/$name.err"; fail=1; return; }
    got="$(sed -n 's/^step [0-9]* loss //p' "$tmp/$name.out" | tr '\n' ' ')"
    got="$got$(sed -n 's/^val 3 loss \([0-9.]*\) accuracy \([0-9.]*\)$/\1 \2/p' "$tmp/$name.out")"
    echo "# $name: nnt $got; PyTorch $ref"
    if ! within "$TOL" "$got" "$ref"; then
        echo "FAIL: nnt-train $name: losses or accuracy differ from PyTorch's by more than $TOL"
        fail=1
    fi
}
records="--tokenizer-json $tokdir/tokenizer.json --data $fx/text_train.jsonl --val-data $fx/text_val.jsonl"
# shellcheck disable=SC2086
run whole $records --batch 4
# shellcheck disable=SC2086
run tiled $records --batch 4 --tile-batch 2 --tile-seq 5
# shellcheck disable=SC2086
run accum $records --batch 2 --accum 2 --tile-seq 7
# the same records with their labels by name (--label-names): the same run
for split in train val; do
    sed 's/"label": 0}$/"label": "bad"}/; s/"label": 1}$/"label": "so-so"}/; s/"label": 2}$/"label": "good"}/' \
        "$fx/text_$split.jsonl" > "$tmp/named_$split.jsonl"
done
grep -q '"label": "so-so"}' "$tmp/named_train.jsonl" || { echo "FAIL: no named labels made"; fail=1; }
run names --tokenizer-json "$tokdir/tokenizer.json" --data "$tmp/named_train.jsonl" \
    --val-data "$tmp/named_val.jsonl" --batch 4 --label-names bad,so-so,good

grep -q "^model: .*a classifier of 3 labels (a score head)" "$tmp/whole.err" ||
    { echo "FAIL: the summary does not say the model is a classifier"; fail=1; }
grep -q "^loss: .*a classifier's cross-entropy over its 3 labels" "$tmp/whole.err" ||
    { echo "FAIL: the summary has no classifier loss line"; grep '^loss' "$tmp/whole.err"; fail=1; }
grep -q "text_train.jsonl: 12 examples (labels 0: 4, 1: 4, 2: 4) (1 cut to T 48) in 12 rows, 12 tokens count" "$tmp/whole.err" ||
    { echo "FAIL: the records line"; grep '^records' "$tmp/whole.err"; fail=1; }
grep -q "^validation: classifier loss [0-9.]*, accuracy 0.2500 at step 3" "$tmp/whole.err" ||
    { echo "FAIL: the run's validation line"; grep '^validation' "$tmp/whole.err"; fail=1; }
head -n 1 "$tmp/whole/val.csv" | grep -q '^step,val_loss,tokens,accuracy$' &&
    sed -n 2p "$tmp/whole/val.csv" | grep -q '^3,[0-9.]*,192,0.25$' ||
    { echo "FAIL: val.csv has no accuracy column"; cat "$tmp/whole/val.csv"; fail=1; }

# LoRA on the classifier: PEFT's initial adapter of task_type SEQ_CLS (q_proj and v_proj, the
# score head trained whole: modules_to_save) trained as PEFT trains it (the same tolerance);
# the adapters and head it saves, read by nnt-generate, classify as the merged directory does
ref="$(python3 "$top_srcdir/tests/st_float64.py" "$fx/lora_text.safetensors" losses val_loss \
    val_accuracy | tr '\n' ' ')"
# shellcheck disable=SC2086
run lora $records --batch 4 --load-peft "$fx/lora_text" --save-peft "$tmp/lora_peft" --merge \
    --save-hf "$tmp/lora_hf"
grep -q "^fine-tune: LoRA r 4, alpha 6, dropout 0 on q_proj,v_proj, the classifier's head (score) trained whole from " "$tmp/lora.err" ||
    { echo "FAIL: the summary's fine-tune line"; grep '^fine-tune' "$tmp/lora.err"; fail=1; }
grep -q '"modules_to_save": \["classifier", "score"\]' "$tmp/lora_peft/adapter_config.json" &&
    grep -q '"task_type": "SEQ_CLS"' "$tmp/lora_peft/adapter_config.json" ||
    { echo "FAIL: --save-peft of a classifier: not PEFT's SEQ_CLS configuration"; fail=1; }
ltext=$(sed -n 's/^{"text": "\(.*\)", "label": .*/\1/p' "$fx/text_val.jsonl" | sed -n 2p)
"$top_builddir/nnt-generate" --load-hf "$fx/llama_text" --adapter "$tmp/lora_peft" \
    --tokenizer-json "$tokdir/tokenizer.json" --prompt "$ltext" > "$tmp/lgen.out" 2>&1 &&
    "$top_builddir/nnt-generate" --load-hf "$tmp/lora_hf" --tokenizer-json "$tokdir/tokenizer.json" \
        --prompt "$ltext" > "$tmp/lgen_hf.out" 2>&1 &&
    "$top_builddir/nnt-generate" --load-hf "$fx/llama_text" --tokenizer-json "$tokdir/tokenizer.json" \
        --prompt "$ltext" > "$tmp/lgen_base.out" 2>&1 &&
    within 1e-5 "$(sed -n 's/^label [0-9]*  //p' "$tmp/lgen.out" | tr '\n' ' ')" \
        "$(sed -n 's/^label [0-9]*  //p' "$tmp/lgen_hf.out" | tr '\n' ' ')" &&
    ! within 1e-3 "$(sed -n 's/^label [0-9]*  //p' "$tmp/lgen.out" | tr '\n' ' ')" \
        "$(sed -n 's/^label [0-9]*  //p' "$tmp/lgen_base.out" | tr '\n' ' ')" ||
    { echo "FAIL: nnt-generate --adapter on a classifier: not the merged directory's classification"; cat "$tmp/lgen.out" "$tmp/lgen_hf.out"; fail=1; }
# nnt-generate --num-labels 3 --adapter: a language model's directory read into a classifier
# (transformers' from_pretrained(num_labels=3)), then a classifier's PEFT adapter with its
# head: PEFT's probabilities (the fixture's lm_probs; measured: the printed digits'); an
# adapter of a classifier refused on the language model, --num-labels against a classifier
lm_probs=$(python3 "$top_srcdir/tests/st_float64.py" "$fx/lora_cls_qv.safetensors" lm_probs)
got=$("$top_builddir/nnt-generate" --load-hf "$fx/llama_lm" --num-labels 3 \
    --adapter "$fx/lora_cls_qv/trained" --prompt-ids "55 14 35 30 23 61 63 51 32 18 53 56" \
    2> "$tmp/lm.err" | sed -n 's/^label [0-9]*  //p' | tr '\n' ' ')
echo "# nnt-generate --num-labels 3 --adapter: $got; PEFT $lm_probs"
within 1e-5 "$got" "$lm_probs" ||
    { echo "FAIL: nnt-generate --num-labels --adapter: not PEFT's probabilities"; cat "$tmp/lm.err"; fail=1; }
"$top_builddir/nnt-generate" --load-hf "$fx/llama_lm" --adapter "$fx/lora_cls_qv/trained" \
    --prompt-ids "55 14" > "$tmp/lm2.out" 2>&1
st=$?
{ [ "$st" -eq 1 ] && grep -q "load it on a classifier (.*--num-labels N)" "$tmp/lm2.out"; } ||
    { echo "FAIL: a classifier's adapter on a language model: status $st"; cat "$tmp/lm2.out"; fail=1; }
"$top_builddir/nnt-generate" --load-hf "$fx/llama_cls" --num-labels 2 --prompt-ids "55 14" \
    > "$tmp/lm3.out" 2>&1
st=$?
{ [ "$st" -eq 2 ] && grep -q "is a classifier of 3 labels already" "$tmp/lm3.out"; } ||
    { echo "FAIL: nnt-generate --num-labels 2 on a classifier of 3: status $st"; fail=1; }

# --label-names: the names in --save-hf's config.json (id2label, label2id) and the summary;
# nnt-generate prints them; kept by the checkpoint (a resumed run saves them again); a count
# other than the labels', or a language model, is bad usage
"$prog" $records --load-hf "$fx/llama_text" --seq 48 --batch 4 --steps 1 --sample 0 \
    --val-split 0 --label-names 'bad,"so-so",good' --save-hf "$tmp/named_hf" \
    --out "$tmp/named" > "$tmp/named.out" 2>&1 || {
    echo "FAIL: nnt-train --label-names: exit status $?"; tail -n 3 "$tmp/named.out"; fail=1; }
grep -q '"id2label": {"0": "bad", "1": "\\"so-so\\"", "2": "good"}' "$tmp/named_hf/config.json" &&
    grep -q '"label2id": {"bad": 0, "\\"so-so\\"": 1, "good": 2}' "$tmp/named_hf/config.json" &&
    grep -q '^model: .*a classifier of 3 labels (a score head; labels bad, "so-so", good)' "$tmp/named.out" ||
    { echo "FAIL: --label-names: not in config.json or the summary"; grep -A2 id2label "$tmp/named_hf/config.json"; fail=1; }
"$top_builddir/nnt-generate" --checkpoint "$tmp/named" --prompt "Great coffee." > "$tmp/named_gen.out" 2>&1 &&
    grep -q '^label 1  [0-9.]*  "so-so"$' "$tmp/named_gen.out" &&
    grep -q '^predicted label [0-2]  [a-z"-]*$' "$tmp/named_gen.out" ||
    { echo "FAIL: nnt-generate does not print the label names"; cat "$tmp/named_gen.out"; fail=1; }
"$prog" $records --seq 48 --batch 4 --steps 2 --sample 0 --val-split 0 \
    --resume "$tmp/named/checkpoint.safetensors" --save-hf "$tmp/named_hf2" --out "$tmp/named" \
    > "$tmp/named2.out" 2>&1 &&
    grep -q '"id2label": {"0": "bad", "1": "\\"so-so\\"", "2": "good"}' "$tmp/named_hf2/config.json" ||
    { echo "FAIL: a resumed run lost the label names"; tail -n 3 "$tmp/named2.out"; fail=1; }
# records naming the labels of the classifier directory they train (its id2label: here
# "so-so" with its quotes, an escape in JSON) need no --label-names; a name it lacks is
# refused naming it
sed 's/"label": 0}$/"label": "bad"}/; s/"label": 1}$/"label": "\\"so-so\\""}/; s/"label": 2}$/"label": "good"}/' \
    "$fx/text_train.jsonl" > "$tmp/dirnamed.jsonl"
grep -q '"label": "\\"so-so\\""}' "$tmp/dirnamed.jsonl" || { echo "FAIL: no quoted names made"; fail=1; }
"$prog" --tokenizer-json "$tokdir/tokenizer.json" --data "$tmp/dirnamed.jsonl" \
    --load-hf "$tmp/named_hf" --seq 48 --batch 4 --steps 1 --sample 0 --val-split 0 --no-save \
    --out "$tmp/dirnamed" > "$tmp/dirnamed.out" 2>&1 &&
    grep -q "dirnamed.jsonl: 12 examples (labels 0: 4, 1: 4, 2: 4)" "$tmp/dirnamed.out" ||
    { echo "FAIL: records naming the directory's labels"; grep -i 'records\|nnt-train:' "$tmp/dirnamed.out"; fail=1; }
# names holding commas (nnt_model_source_label_name reads them; a list could not pass them)
mkdir -p "$tmp/comma_hf" && cp "$tmp/named_hf"/* "$tmp/comma_hf/" &&
    sed 's/"0": "bad"/"0": "bad, really"/; s/"bad": 0/"bad, really": 0/' \
        "$tmp/named_hf/config.json" > "$tmp/comma_hf/config.json"
grep -q '"0": "bad, really"' "$tmp/comma_hf/config.json" || { echo "FAIL: no name with a comma made"; fail=1; }
sed 's/"label": "bad"}$/"label": "bad, really"}/' "$tmp/dirnamed.jsonl" > "$tmp/dircomma.jsonl"
"$prog" --tokenizer-json "$tokdir/tokenizer.json" --data "$tmp/dircomma.jsonl" \
    --load-hf "$tmp/comma_hf" --seq 48 --batch 4 --steps 1 --sample 0 --val-split 0 --no-save \
    --out "$tmp/dircomma" > "$tmp/dircomma.out" 2>&1 &&
    grep -q "dircomma.jsonl: 12 examples (labels 0: 4, 1: 4, 2: 4)" "$tmp/dircomma.out" ||
    { echo "FAIL: records naming a directory's labels with commas"; grep -i 'records\|nnt-train:' "$tmp/dircomma.out"; fail=1; }
sed 's/"label": "bad"}$/"label": "awful"}/' "$tmp/dirnamed.jsonl" > "$tmp/dirbad.jsonl"
"$prog" --tokenizer-json "$tokdir/tokenizer.json" --data "$tmp/dirbad.jsonl" \
    --load-hf "$tmp/named_hf" --seq 48 --batch 4 --steps 1 --sample 0 --val-split 0 --no-save \
    --out "$tmp/dirbad" > "$tmp/dirbad.out" 2>&1 && { echo "FAIL: an unknown label name taken"; fail=1; }
grep -q 'awful' "$tmp/dirbad.out" || { echo "FAIL: the unknown name is not named"; tail -n 3 "$tmp/dirbad.out"; fail=1; }
"$prog" $records --load-hf "$fx/llama_text" --seq 48 --batch 4 --steps 1 --no-save \
    --out "$tmp/bad" --label-names a,b > "$tmp/bad.out" 2>&1
st=$?
[ "$st" -eq 2 ] && grep -q -- "--label-names gives 2 names for a classifier of 3 labels" "$tmp/bad.out" ||
    { echo "FAIL: nnt-train --label-names a,b: status $st, not 2"; tail -n 2 "$tmp/bad.out"; fail=1; }
"$prog" --load-hf "$fx/llama_lm" --data "$fx/llama_rm_pairs.bin" --seq 12 --batch 4 --steps 1 \
    --no-save --out "$tmp/bad" --label-names a,b,c > "$tmp/bad.out" 2>&1
st=$?
[ "$st" -eq 2 ] && grep -q -- "--label-names names a classifier's labels" "$tmp/bad.out" ||
    { echo "FAIL: nnt-train --label-names on a language model: status $st, not 2"; tail -n 2 "$tmp/bad.out"; fail=1; }

# a LoRA classifier's run resumed from its checkpoint: the adapters and the head go on bit
# for bit (the losses of 4 steps in one run)
lcommon="$records --load-hf $fx/llama_text --seq 48 --batch 2 --lr 0.01 --schedule constant
    --warmup 0 --lora-rank 4 --lora-alpha 6 --print-loss --sample 0 --val-split 0"
# shellcheck disable=SC2086
"$prog" $lcommon --steps 4 --out "$tmp/lr_all" > "$tmp/lr_all.out" 2>&1 &&
    "$prog" $lcommon --steps 2 --out "$tmp/lr_part" > "$tmp/lr_part.out" 2>&1 &&
    "$prog" $lcommon --steps 4 --resume "$tmp/lr_part/checkpoint.safetensors" \
        --out "$tmp/lr_part" > "$tmp/lr_rest.out" 2>&1 || {
    echo "FAIL: a LoRA classifier's runs: exit status $?"; tail -n 3 "$tmp/lr_rest.out"; fail=1; }
[ "$(grep '^step' "$tmp/lr_all.out")" = "$(cat "$tmp/lr_part.out" "$tmp/lr_rest.out" | grep '^step')" ] &&
    [ "$(grep -c '^step' "$tmp/lr_all.out")" -eq 4 ] ||
    { echo "FAIL: a LoRA classifier resumed: not the losses of one run"; grep '^step' "$tmp/lr_all.out" "$tmp/lr_part.out" "$tmp/lr_rest.out"; fail=1; }

# nnt-tokenize --num-labels: each text, then its label, the one target that counts; the same
# run from its file
"$tok_prog" --tokenizer-json "$tokdir/tokenizer.json" --num-labels 3 --seq 48 --too-long cut \
    --out "$tmp/train.bin" "$fx/text_train.jsonl" 2> "$tmp/tok.err" &&
    "$tok_prog" --tokenizer-json "$tokdir/tokenizer.json" --num-labels 3 --seq 48 \
        --out "$tmp/val.bin" "$fx/text_val.jsonl" 2>> "$tmp/tok.err" || {
    echo "FAIL: nnt-tokenize --num-labels: exit status $?"; cat "$tmp/tok.err"; fail=1; }
ref="$(echo "$want" | sed -n 1,3p | tr '\n' ' ')"
run file --data "$tmp/train.bin" --val-data "$tmp/val.bin" --batch 4
# nnt-tokenize --label-names (implies --num-labels 3): the file of the labels by index; a name
# of no label refused, naming its line
"$tok_prog" --tokenizer-json "$tokdir/tokenizer.json" --label-names bad,so-so,good --seq 48 \
    --too-long cut --out "$tmp/named.bin" "$tmp/named_train.jsonl" 2> "$tmp/tok_named.err" &&
    cmp -s "$tmp/named.bin" "$tmp/train.bin" ||
    { echo "FAIL: nnt-tokenize --label-names: not the file of the labels' indices"; cat "$tmp/tok_named.err"; fail=1; }
"$tok_prog" --tokenizer-json "$tokdir/tokenizer.json" --label-names bad,good,fine --seq 48 \
    --too-long cut --out "$tmp/named2.bin" "$tmp/named_train.jsonl" > /dev/null 2> "$tmp/tok_named.err"
st=$?
{ [ "$st" -eq 1 ] && grep -q 'named_train.jsonl:[0-9]*: .*the label "so-so" is none of the 3 label names' "$tmp/tok_named.err"; } ||
    { echo "FAIL: nnt-tokenize --label-names, a label of no name: status $st"; cat "$tmp/tok_named.err"; fail=1; }
# without --too-long cut the long text is refused, named by its line
"$tok_prog" --tokenizer-json "$tokdir/tokenizer.json" --num-labels 3 --seq 48 \
    --out "$tmp/refused.bin" "$fx/text_train.jsonl" > /dev/null 2> "$tmp/refused.err"
st=$?
{ [ "$st" -eq 1 ] && grep -q "text_train.jsonl:8: the text has 103 tokens, more than the 47 a row holds before its label" "$tmp/refused.err" &&
    [ ! -e "$tmp/refused.bin" ]; } ||
    { echo "FAIL: nnt-tokenize --num-labels, a text too long: status $st"; cat "$tmp/refused.err"; fail=1; }

# --save-hf: a classifier's directory; training goes on from it
"$prog" $records --batch 4 --seq 48 --steps 1 --val-batches 0 --sample 0 --no-save \
    --load-hf "$fx/llama_text" --save-hf "$tmp/hf" --out "$tmp/save" > /dev/null 2>&1 || {
    echo "FAIL: nnt-train --save-hf of a classifier: exit status $?"; fail=1; }
grep -q '"architectures": \["LlamaForSequenceClassification"\]' "$tmp/hf/config.json" &&
    grep -q '"pad_token_id": 1,' "$tmp/hf/config.json" &&
    grep -q '"id2label": {"0": "LABEL_0", "1": "LABEL_1", "2": "LABEL_2"}' "$tmp/hf/config.json" ||
    { echo "FAIL: --save-hf of a classifier: not a classifier's config.json"; fail=1; }
"$prog" --load-hf "$tmp/hf" --data "$tmp/train.bin" --batch 4 --seq 48 --steps 1 --no-save \
    --val-split 0 --sample 0 --out "$tmp/again" > "$tmp/again.out" 2>&1 &&
    grep -q "a classifier of 3 labels" "$tmp/again.out" ||
    { echo "FAIL: nnt-train --load-hf of a saved classifier"; tail -n 3 "$tmp/again.out"; fail=1; }

# refusals: a label out of range (FILE:LINE; status 1), data that is not labelled (a plain
# token file; prompt/answer rows, whose targets are token ids), usage (status 2)
"$prog" $records --num-labels 2 --batch 4 --seq 48 --steps 1 --no-save --out "$tmp/l2" \
    > "$tmp/l2.out" 2>&1
st=$?
{ [ "$st" -eq 1 ] && grep -q "text_train.jsonl:1: the label 2 is not below the 2 labels" "$tmp/l2.out"; } ||
    { echo "FAIL: a label out of range: status $st"; tail -n 3 "$tmp/l2.out"; fail=1; }
printf 'Some plain text to train a language model on, long enough for a batch.%.0s\n' 1 2 3 4 5 6 7 8 > "$tmp/plain.txt"
"$tok_prog" --tokenizer-json "$tokdir/tokenizer.json" --out "$tmp/plain.bin" "$tmp/plain.txt" 2> /dev/null
"$prog" --load-hf "$fx/llama_text" --data "$tmp/plain.bin" --batch 2 --seq 48 --steps 1 \
    --val-split 0 --no-save --out "$tmp/plain" > "$tmp/plain.out" 2>&1
st=$?
{ [ "$st" -ne 0 ] && grep -q "a classifier of 3 labels trains on labelled examples.*the training data has no loss mask" "$tmp/plain.out"; } ||
    { echo "FAIL: a classifier on unlabelled tokens: status $st"; tail -n 3 "$tmp/plain.out"; fail=1; }
"$tok_prog" --tokenizer-json "$tokdir/tokenizer.json" --jsonl --seq 48 --too-long cut \
    --out "$tmp/sft.bin" "$fx/text_val.jsonl" 2> "$tmp/sft.err"
st=$?
{ [ "$st" -eq 1 ] && grep -q 'unknown key "label"' "$tmp/sft.err"; } ||
    { echo "FAIL: classification records read as prompt/answer ones: status $st"; fail=1; }
printf '{"prompt": "Is it good?", "completion": " Yes, it is quite good."}\n%.0s' 1 2 3 4 > "$tmp/sft.jsonl"
"$tok_prog" --tokenizer-json "$tokdir/tokenizer.json" --jsonl --seq 48 --out "$tmp/sft.bin" \
    "$tmp/sft.jsonl" 2> /dev/null
"$prog" --load-hf "$fx/llama_text" --data "$tmp/sft.bin" --batch 4 --seq 48 --steps 1 \
    --val-split 0 --no-save --out "$tmp/sft" > "$tmp/sft.out" 2>&1
st=$?
{ [ "$st" -ne 0 ] && grep -q "a classifier of 3 labels, but a target that counts is [0-9]*" "$tmp/sft.out"; } ||
    { echo "FAIL: a classifier on prompt/answer rows: status $st"; tail -n 3 "$tmp/sft.out"; fail=1; }
for args in "--num-labels 3 --dpo-beta 0.1" "--num-labels 3 --reward-center 0.5"; do
    # shellcheck disable=SC2086
    "$prog" $records --batch 4 --seq 48 --steps 1 $args --out "$tmp/bad" > /dev/null 2>&1
    st=$?
    [ "$st" -eq 2 ] || { echo "FAIL: nnt-train $args: status $st, not 2"; fail=1; }
done
"$tok_prog" --tokenizer-json "$tokdir/tokenizer.json" --num-labels 3 --preference --seq 48 \
    --out "$tmp/x.bin" "$fx/text_val.jsonl" > /dev/null 2>&1
st=$?
[ "$st" -eq 2 ] || { echo "FAIL: nnt-tokenize --num-labels --preference: status $st, not 2"; fail=1; }
# nnt-generate on a classifier: the labels' probabilities of a text (tokenized as
# tokenizer(text)) as transformers gives them (measured: within 4e-7, the printed digits'
# rounding; tolerance 1e-5), the likeliest label; the trained one from its directory and
# from nnt-train's checkpoint alike; a reward model's score of --prompt-ids (llama_rm's first
# row, as pooled with or without its padding); refusals
gen="$top_builddir/nnt-generate"
text=$(sed -n 's/^{"text": "\(.*\)", "label": .*/\1/p' "$fx/text_val.jsonl" | head -n 1)
"$gen" --load-hf "$fx/llama_text" --tokenizer-json "$tokdir/tokenizer.json" --prompt "$text" \
    > "$tmp/gen.out" 2> "$tmp/gen.err" || { echo "FAIL: nnt-generate on a classifier: exit status $?"; cat "$tmp/gen.err"; fail=1; }
got=$(sed -n 's/^label [0-9]*  //p' "$tmp/gen.out" | tr '\n' ' ')
echo "# nnt-generate: $got; transformers $probs0"
within 1e-5 "$got" "$probs0" &&
    grep -q '^predicted label 2$' "$tmp/gen.out" ||
    { echo "FAIL: nnt-generate on a classifier: not transformers' probabilities"; cat "$tmp/gen.out"; fail=1; }
"$prog" $records --batch 4 --seq 48 --steps 1 --val-batches 0 --sample 0 --load-hf "$fx/llama_text" \
    --save-hf "$tmp/hf2" --out "$tmp/ckpt" > /dev/null 2>&1
"$gen" --load-hf "$tmp/hf2" --tokenizer-json "$tokdir/tokenizer.json" --prompt "$text" > "$tmp/gen_hf.out" 2>&1 &&
    "$gen" --checkpoint "$tmp/ckpt/checkpoint.safetensors" --prompt "$text" > "$tmp/gen_ckpt.out" 2>&1 &&
    cmp -s "$tmp/gen_hf.out" "$tmp/gen_ckpt.out" && ! cmp -s "$tmp/gen_hf.out" "$tmp/gen.out" ||
    { echo "FAIL: nnt-generate: a trained classifier's directory and checkpoint differ"; cat "$tmp/gen_hf.out" "$tmp/gen_ckpt.out"; fail=1; }
for ids in "11 25 60 37 20 4 20 38 61 46" "11 25 60 37 20 4 20 38 61 46 0 0"; do
    # (llama_rm.safetensors: rewards[0] is -0.000473849)
    score=$("$gen" --load-hf "$fx/llama_rm" --prompt-ids "$ids" 2>&1)
    [ "$score" = "score -0.000474" ] ||
        { echo "FAIL: nnt-generate on a reward model: '$score', not score -0.000474"; fail=1; }
done
"$gen" --load-hf "$fx/llama_text" --tokenizer-json "$tokdir/tokenizer.json" --prompt "$text" \
    --chat > /dev/null 2>&1
st=$?
[ "$st" -eq 2 ] || { echo "FAIL: nnt-generate --chat on a classifier: status $st, not 2"; fail=1; }

# nnt-generate --classify: the held-out records 3 a forward (the last batch of one, filled)
# and one a forward give the same lines; the first record's probabilities are transformers'
# (as --prompt's above); the accuracy is the share of lines whose label is their target, and
# nnt-train's validation of the records alone (--steps 0) reports the same; records naming
# the directory's labels read as the indices; refusals: a language model, a record without
# a text, a label the model lacks (status 2)
for b in 3 1; do
    "$gen" --load-hf "$fx/llama_text" --tokenizer-json "$tokdir/tokenizer.json" \
        --classify "$fx/text_val.jsonl" --batch "$b" > "$tmp/cls$b.out" 2> "$tmp/cls$b.err" ||
        { echo "FAIL: nnt-generate --classify --batch $b: exit status $?"; cat "$tmp/cls$b.err"; fail=1; }
done
cmp -s "$tmp/cls3.out" "$tmp/cls1.out" ||
    { echo "FAIL: nnt-generate --classify: --batch 3 and 1 differ"; cat "$tmp/cls3.out" "$tmp/cls1.out"; fail=1; }
first=$(sed -n '1s/.*"probabilities": \[\(.*\)\].*/\1/p' "$tmp/cls3.out" | tr -d ',')
[ "$(wc -l < "$tmp/cls3.out")" -eq 4 ] && within 1e-5 "$first" "$probs0" ||
    { echo "FAIL: nnt-generate --classify: not transformers' probabilities ($first)"; fail=1; }
hits=$(grep -c '"label": \([0-9]\),.*"target": \1}' "$tmp/cls3.out")
acc=$(sed -n 's/.*; accuracy \([0-9.]*\) on the 4 with a label$/\1/p' "$tmp/cls3.err")
"$prog" --load-hf "$fx/llama_text" --tokenizer-json "$tokdir/tokenizer.json" \
    --val-data "$fx/text_val.jsonl" --steps 0 --seq 48 --batch 4 --out "$tmp/val_alone" \
    > "$tmp/val_alone.out" 2>&1
vacc=$(sed -n 's/^validation: classifier loss [0-9.]*, accuracy \([0-9.]*\) .*/\1/p' "$tmp/val_alone.out")
echo "# nnt-generate --classify: accuracy $acc ($hits of 4 lines), nnt-train's validation $vacc"
[ -n "$acc" ] && [ "$acc" = "$(awk -v h="$hits" 'BEGIN { printf "%.4f", h / 4 }')" ] &&
    [ "$acc" = "$vacc" ] ||
    { echo "FAIL: nnt-generate --classify: accuracy $acc, $hits hits, nnt-train $vacc"; fail=1; }
sed 's/"label": 0}$/"label": "bad"}/; s/"label": 1}$/"label": "\\"so-so\\""}/; s/"label": 2}$/"label": "good"}/' \
    "$fx/text_val.jsonl" > "$tmp/named_cls.jsonl"
"$gen" --load-hf "$tmp/named_hf" --tokenizer-json "$tokdir/tokenizer.json" \
    --classify "$tmp/named_cls.jsonl" > "$tmp/named_cls.out" 2>&1 &&
    grep -q '"name": "\\"so-so\\"", "probabilities"\|"name": "good", "probabilities"\|"name": "bad", "probabilities"' "$tmp/named_cls.out" &&
    [ "$(grep -c '"target": [0-2]}$' "$tmp/named_cls.out")" -eq 4 ] ||
    { echo "FAIL: nnt-generate --classify with named labels"; cat "$tmp/named_cls.out"; fail=1; }
printf '%s\n' '{"text": "Fine."}' '' '{"label": 1}' > "$tmp/notext.jsonl"
printf '%s\n' '{"text": "Fine.", "label": 7}' > "$tmp/bigl.jsonl"
for k in 1 2 3; do
    case $k in
        1) bad="--load-hf $fx/llama_lm --classify $fx/text_val.jsonl" why="is a language model, not a classifier";;
        2) bad="--load-hf $fx/llama_text --classify $tmp/notext.jsonl" why='line 3: no "text" member';;
        3) bad="--load-hf $fx/llama_text --classify $tmp/bigl.jsonl" why="line 1: label 7, but the model has 3 labels";;
    esac
    # shellcheck disable=SC2086 # the options are words
    "$gen" $bad --tokenizer-json "$tokdir/tokenizer.json" > "$tmp/badcls.out" 2>&1
    st=$?
    [ "$st" -eq 2 ] && grep -q -- "$why" "$tmp/badcls.out" ||
        { echo "FAIL: nnt-generate $bad: status $st (not 2) or not: $why"; cat "$tmp/badcls.out"; fail=1; }
done
# classifiers trained on values (tests/gen_values_fixtures.py: transformers' regression and
# multi-label problem types): nnt-generate prints each label's value, or its probability
# sigmoid(logit) and the labels above 0.5, as transformers computes them (the pooled logits
# within 2e-7 in test_classifier; the printed 6 decimals: tolerance 1e-5); --classify's JSON
# lines; a labelled record refused; the trainer refuses such a model
vfx="$top_srcdir/tests/fixtures/cls_values"
for case in reg3 multi3; do
    vids=$(sed -n 1p "$vfx/$case.expected") vwant=$(sed -n 2p "$vfx/$case.expected")
    "$gen" --load-hf "$vfx/$case" --prompt-ids "$vids" > "$tmp/$case.out" 2>&1 ||
        { echo "FAIL: nnt-generate on $case: exit status $?"; cat "$tmp/$case.out"; fail=1; }
    got=$(sed -n 's/^\(value\|label\) [0-9]*  \([-0-9.]*\).*/\2/p' "$tmp/$case.out" | tr '\n' ' ')
    echo "# nnt-generate $case: $got; transformers $vwant"
    within 1e-5 "$got" "$vwant" ||
        { echo "FAIL: nnt-generate on $case: not transformers' numbers"; cat "$tmp/$case.out"; fail=1; }
done
want_labels=$(sed -n 2p "$vfx/multi3.expected" |
    awk '{ s = ""; for (i = 1; i <= NF; i++) if ($i > 0.5) s = s (s == "" ? "" : " ") (i - 1); print s == "" ? "none" : s }')
grep -q "^predicted labels $want_labels\$" "$tmp/multi3.out" ||
    { echo "FAIL: multi-label: not the labels above 0.5 ($want_labels)"; cat "$tmp/multi3.out"; fail=1; }
printf '%s\n' '{"text": "Fine."}' '{"text": "Not fine at all."}' > "$tmp/vtexts.jsonl"
"$gen" --load-hf "$vfx/multi3" --tokenizer-json "$tokdir/tokenizer.json" --classify "$tmp/vtexts.jsonl" \
    > "$tmp/vcls.out" 2> "$tmp/vcls.err" &&
    [ "$(grep -c '^{"line": [12], "labels": \[[0-9, ]*\], "probabilities": \[0\.[0-9]*, 0\.[0-9]*, 0\.[0-9]*\]}$' "$tmp/vcls.out")" -eq 2 ] &&
    "$gen" --load-hf "$vfx/reg3" --tokenizer-json "$tokdir/tokenizer.json" --classify "$tmp/vtexts.jsonl" \
        > "$tmp/vreg.out" 2>> "$tmp/vcls.err" &&
    [ "$(grep -c '^{"line": [12], "values": \[-\{0,1\}[0-9.]*, -\{0,1\}[0-9.]*, -\{0,1\}[0-9.]*\]}$' "$tmp/vreg.out")" -eq 2 ] ||
    { echo "FAIL: nnt-generate --classify on classifiers trained on values"; cat "$tmp/vcls.out" "$tmp/vreg.out" "$tmp/vcls.err"; fail=1; }
"$gen" --load-hf "$vfx/reg3" --tokenizer-json "$tokdir/tokenizer.json" --classify "$fx/text_val.jsonl" \
    > "$tmp/vbad.out" 2>&1
st=$?
[ "$st" -eq 2 ] && grep -q "line 1: nnt_sft_encode_valued: the label is 1 value, not a list of as many numbers as the labels (3)" "$tmp/vbad.out" ||
    { echo "FAIL: --classify: a record of one label for a classifier on 3 values: status $st"; cat "$tmp/vbad.out"; fail=1; }
# --classify on records with their values: each line's "target", and the metrics over them
# (regression: the mean squared error, nnt-train's held-out loss of the same records (the
# trainer's MSE, transformers' within 2e-6), and the mean absolute error; multi-label: label
# accuracy, exact match, micro F1), as computed here from the printed numbers
# (multi: records 1 and 2 given the labels the model predicts, so that two are exact)
"$gen" --load-hf "$vfx/text_multi" --tokenizer-json "$tokdir/tokenizer.json" \
    --classify "$vfx/text_multi_val.jsonl" > "$tmp/vm_first.out" 2> /dev/null
awk 'NR == FNR { if (FNR <= 2) { l = $0; sub(/.*"probabilities": \[/, "", l); sub(/\].*/, "", l)
                     n = split(l, p, ", ")
                     s = ""; for (k = 1; k <= n; k++) s = s (k > 1 ? ", " : "") (p[k] > 0.5 ? "1.0" : "0.0")
                     want[FNR] = s }
                 next }
     FNR in want { sub(/"label": \[[^]]*\]/, "\"label\": [" want[FNR] "]") } { print }' \
    "$tmp/vm_first.out" "$vfx/text_multi_val.jsonl" > "$tmp/text_multi_val.jsonl"
cp "$vfx/text_regression_val.jsonl" "$tmp/"
for kind in regression multi; do
    "$gen" --load-hf "$vfx/text_$kind" --tokenizer-json "$tokdir/tokenizer.json" \
        --classify "$tmp/text_${kind}_val.jsonl" > "$tmp/vm_$kind.out" 2> "$tmp/vm_$kind.err" ||
        { echo "FAIL: --classify on $kind records with values: exit status $?"; cat "$tmp/vm_$kind.err"; fail=1; }
    # the printed numbers and targets, one record a line: "p1 p2 ... | t1 t2 ..."
    sed 's/.*"\(values\|probabilities\)": \[\([^]]*\)\], "target": \[\([^]]*\)\]}$/\2 | \3/; s/,//g' \
        "$tmp/vm_$kind.out" > "$tmp/vm_$kind.num"
done
want=$(awk -F' [|] ' '{ n = split($1, p, " "); split($2, t, " ")
    for (k = 1; k <= n; k++) { d = p[k] - t[k]; sq += d * d; ab += d < 0 ? -d : d; m++ } }
    END { printf "%.6f %.6f", sq / m, ab / m }' "$tmp/vm_regression.num")
got=$(sed -n 's/.*mean squared error \([0-9.]*\) (transformers. MSELoss), mean absolute error \([0-9.]*\).*/\1 \2/p' \
    "$tmp/vm_regression.err")
"$prog" --load-hf "$vfx/text_regression" --tokenizer-json "$tokdir/tokenizer.json" \
    --val-data "$vfx/text_regression_val.jsonl" --steps 0 --seq 48 --batch 4 --sample 0 \
    --no-save --out "$tmp/vm_train" > "$tmp/vm_train.out" 2>&1
# (nnt-train's validation: its loss the MSE, and the MAE, in the summary and the val line)
loss=$(sed -n 's/^validation: regression loss (MSE) \([0-9.]*\), MAE \([0-9.]*\) at step 0.*/\1 \2/p' \
    "$tmp/vm_train.out")
vline=$(sed -n 's/^val  0\/0  loss (MSE) \([0-9.]*\)  MAE \([0-9.]*\)  on 4 held-out examples .*/\1 \2/p' \
    "$tmp/vm_train.out")
echo "# --classify regression: mse, mae $got; from the lines $want; nnt-train's validation $loss"
[ "$(grep -c '"target": \[' "$tmp/vm_regression.out")" -eq 4 ] && [ -n "$got" ] &&
    within 1e-5 "$got" "$want" && [ "$got" = "$loss" ] && [ "$vline" = "$loss" ] ||
    { echo "FAIL: --classify's regression metrics, or nnt-train's validation ('$vline')"; cat "$tmp/vm_regression.out" "$tmp/vm_regression.err"; fail=1; }
want=$(awk -F' [|] ' '{ n = split($1, p, " "); split($2, t, " "); r = 0
    for (k = 1; k <= n; k++) { s = p[k] > 0.5; i = t[k] > 0.5; r += s == i; m++
        tp += s && i; fp += s && !i; fn += !s && i }
    right += r; exact += r == n; recs++ }
    END { printf "%.4f %.4f %.4f", right / m, exact / recs, 2 * tp / (2 * tp + fp + fn) }' "$tmp/vm_multi.num")
got=$(sed -n 's/.*label accuracy \([0-9.]*\) (.*), exact match \([0-9.]*\), micro F1 \([0-9.]*\)$/\1 \2 \3/p' \
    "$tmp/vm_multi.err")
echo "# --classify multi-label: label accuracy, exact match, micro F1 $got; from the lines $want"
[ -n "$got" ] && [ "$got" = "$want" ] && [ "$(echo "$got" | cut -d' ' -f2)" = 0.5000 ] ||
    { echo "FAIL: --classify's multi-label metrics"; cat "$tmp/vm_multi.out" "$tmp/vm_multi.err"; fail=1; }
# nnt-train's validation of the same records: the same label accuracy, exact match and micro
# F1 (val line, summary)
"$prog" --load-hf "$vfx/text_multi" --tokenizer-json "$tokdir/tokenizer.json" \
    --val-data "$tmp/text_multi_val.jsonl" --steps 0 --seq 48 --batch 2 --val-batches 2 \
    --sample 0 --no-save --out "$tmp/vm_val" > "$tmp/vm_val.out" 2>&1
acc=$(sed -n 's/^val  0\/0  loss [0-9.]*  label accuracy \([0-9.]*\)  exact match \([0-9.]*\)  micro F1 \([0-9.]*\)  on 4 held-out examples .*/\1 \2 \3/p' "$tmp/vm_val.out")
echo "# nnt-train's validation: label accuracy, exact match, micro F1 $acc"
# shellcheck disable=SC2086 # $acc: three words
[ -n "$acc" ] && [ "$acc" = "$got" ] &&
    grep -q "^validation: multi-label loss [0-9.]*, label accuracy $(printf '%s, exact match %s, micro F1 %s' $acc) at step 0" "$tmp/vm_val.out" ||
    { echo "FAIL: nnt-train's validation of a multi-label classifier: not --classify's metrics"; cat "$tmp/vm_val.out"; fail=1; }
# nnt-train on records of values ({"text", "label": [values]}): 3 steps and the held-out loss
# of transformers' regression and multi-label losses (text_<kind>.safetensors). Measured (AMD
# Zen 4, 2 cores): the steps' losses within 2e-6 and the multi-label held-out loss within the
# printed digits' rounding, the regression's held-out loss 2.2e-5 (its parameters after the 3
# steps within 6e-6 of PyTorch's in float64, every tensor alike; its MSE after Adam's first
# steps is the most sensitive number here): VTOL 2e-4. The records line, the summary's loss
# line, --save-hf's problem_type; the records of one label refused
VTOL=2e-4
for kind in regression multi; do
    ref=$(python3 "$top_srcdir/tests/st_float64.py" "$vfx/text_$kind.safetensors" losses val_loss |
          tr '\n' ' ')
    common="--load-hf $vfx/text_$kind --val-every 3 --steps 3 --seq 48 --optim adamw --lr 0.01
    --beta1 0.9 --beta2 0.999 --eps 1e-08 --weight-decay 0.1 --grad-clip 0 --warmup 0
    --schedule constant --print-loss --val-batches 0 --sample 0"
    # shellcheck disable=SC2086
    "$prog" $common --tokenizer-json "$tokdir/tokenizer.json" --data "$vfx/text_${kind}_train.jsonl" \
        --val-data "$vfx/text_${kind}_val.jsonl" --batch 2 --accum 2 --tile-seq 7 \
        --save-hf "$tmp/v_$kind" --out "$tmp/v_$kind" > "$tmp/v_$kind.out" 2> "$tmp/v_$kind.err" ||
        { echo "FAIL: nnt-train on $kind records: exit status $?"; tail -n 5 "$tmp/v_$kind.err"; fail=1; }
    got="$(sed -n 's/^step [0-9]* loss //p; s/^val 3 loss \([0-9.]*\) .*$/\1/p' "$tmp/v_$kind.out" | tr '\n' ' ')"
    # (a multi-label classifier's validation adds its label accuracy, exact match and micro
    # F1, a regression's its mean absolute error; val.csv's columns alike)
    if [ $kind = multi ]; then
        grep -q '^val 3 loss [0-9.]* accuracy 0\.[0-9]* exact_match [01]\.[0-9]* f1 [01]\.[0-9]*$' "$tmp/v_$kind.out" &&
            head -n 1 "$tmp/v_$kind/val.csv" | grep -q '^step,val_loss,tokens,accuracy,exact_match,f1$' &&
            sed -n 2p "$tmp/v_$kind/val.csv" | grep -q '^3,[0-9.e-]*,[0-9]*,[0-9.e-]*,[0-9.e-]*,[0-9.e-]*$'
    else
        grep -q '^val 3 loss [0-9.]* mae [0-9.]*$' "$tmp/v_$kind.out" &&
            head -n 1 "$tmp/v_$kind/val.csv" | grep -q '^step,val_loss,tokens,mae$' &&
            sed -n 2p "$tmp/v_$kind/val.csv" | grep -q '^3,[0-9.e-]*,[0-9]*,[0-9.e-]*$'
    fi || { echo "FAIL: nnt-train on $kind records: the validation line or val.csv"; grep '^val' "$tmp/v_$kind.out"; cat "$tmp/v_$kind/val.csv"; fail=1; }
    echo "# $kind records: nnt $got; PyTorch $ref"
    within "$VTOL" "$got" "$ref" ||
        { echo "FAIL: nnt-train on $kind records: losses differ from PyTorch's by more than $VTOL"; fail=1; }
done
# a regression's run stopped after step 2 and resumed: step 3 and 4 as the run's in one go
vc="--load-hf $vfx/text_regression --tokenizer-json $tokdir/tokenizer.json --seq 48 --batch 4
    --data $vfx/text_regression_train.jsonl --steps 4 --print-loss --sample 0 --val-split 0"
# shellcheck disable=SC2086
"$prog" $vc --out "$tmp/vr_all" > "$tmp/vr_all.out" 2> /dev/null &&
    "$prog" $vc --out "$tmp/vr_part" --stop-after 2 > /dev/null 2>&1 &&
    "$prog" --resume "$tmp/vr_part/checkpoint.safetensors" --print-loss --out "$tmp/vr_part" \
        > "$tmp/vr_res.out" 2> /dev/null &&
    [ "$(sed -n 3,4p "$tmp/vr_all.out")" = "$(cat "$tmp/vr_res.out")" ] ||
    { echo "FAIL: a regression's run resumed: not the steps of the run in one go"; cat "$tmp/vr_all.out" "$tmp/vr_res.out"; fail=1; }
# nnt-tokenize --problem-type writes the token files nnt-train made of the records: the same run
for split in train val; do
    "$tok_prog" --tokenizer-json "$tokdir/tokenizer.json" --num-labels 2 --problem-type regression \
        --seq 48 --too-long cut --out "$tmp/vreg_$split.bin" "$vfx/text_regression_$split.jsonl" \
        2>> "$tmp/vtok.err" || { echo "FAIL: nnt-tokenize --problem-type regression"; cat "$tmp/vtok.err"; fail=1; }
done
common="--load-hf $vfx/text_regression --val-every 3 --steps 3 --seq 48 --optim adamw --lr 0.01
    --beta1 0.9 --beta2 0.999 --eps 1e-08 --weight-decay 0.1 --grad-clip 0 --warmup 0
    --schedule constant --print-loss --val-batches 0 --sample 0 --no-save"
# shellcheck disable=SC2086
"$prog" $common --data "$tmp/vreg_train.bin" --val-data "$tmp/vreg_val.bin" --batch 4 \
    --out "$tmp/vreg_bin" > "$tmp/vreg_bin.out" 2> "$tmp/vreg_bin.err" &&
    [ -s "$tmp/vreg_bin.out" ] && cmp -s "$tmp/vreg_bin.out" "$tmp/v_regression.out" ||
    { echo "FAIL: nnt-train on nnt-tokenize's regression file: not the run on the records"; cat "$tmp/vreg_bin.out" "$tmp/vreg_bin.err" "$tmp/v_regression.out"; fail=1; }
for args in "--num-labels 1" "--problem-type regression" "--num-labels 2 --problem-type regression --label-names a,b"; do
    # shellcheck disable=SC2086
    "$tok_prog" --tokenizer-json "$tokdir/tokenizer.json" $args --seq 48 --out "$tmp/x.bin" \
        "$vfx/text_regression_val.jsonl" > /dev/null 2>&1
    st=$?
    [ "$st" -eq 2 ] || { echo "FAIL: nnt-tokenize $args: status $st, not 2"; fail=1; }
done
grep -q "text_regression_train.jsonl: 12 examples (1 cut to T 48) in 12 rows" "$tmp/v_regression.err" &&
    grep -q "^model: .*a regression of 2 values (a score head)" "$tmp/v_regression.err" &&
    grep -q "^loss: .*a regression's mean squared error over its 2 values" "$tmp/v_regression.err" &&
    grep -q "^validation: regression loss (MSE) [0-9.]*, MAE [0-9.]* at step 3" "$tmp/v_regression.err" &&
    grep -q '"problem_type": "regression"' "$tmp/v_regression/config.json" ||
    { echo "FAIL: a regression's summary, validation or saved config"; grep '^records\|^model\|^loss\|^validation' "$tmp/v_regression.err"; fail=1; }
grep -q "text_multi_train.jsonl: 12 examples (above 0.5, labels 0: 6, 1: 4, 2: 4) (1 cut" "$tmp/v_multi.err" &&
    grep -q "^model: .*a multi-label classifier of 3 labels (a score head)" "$tmp/v_multi.err" &&
    grep -q '"problem_type": "multi_label_classification"' "$tmp/v_multi/config.json" ||
    { echo "FAIL: a multi-label classifier's summary or saved config"; grep '^records\|^model' "$tmp/v_multi.err"; fail=1; }
# the regression's directory trained again (it reads as one); a fresh model made multi-label
"$prog" --load-hf "$tmp/v_regression" --tokenizer-json "$tokdir/tokenizer.json" \
    --data "$vfx/text_regression_train.jsonl" --seq 48 --batch 4 --steps 1 --sample 0 --no-save \
    --out "$tmp/v_again" > "$tmp/v_again.out" 2>&1 &&
    "$prog" --num-labels 3 --problem-type multi_label_classification --layers 1 --channels 16 \
        --heads 2 --data "$vfx/text_multi_train.jsonl" --tokenizer-json "$tokdir/tokenizer.json" \
        --seq 48 --batch 4 --steps 1 --sample 0 --no-save --out "$tmp/v_fresh" > "$tmp/v_fresh.out" 2>&1 &&
    grep -q "^model: .*a multi-label classifier of 3 labels" "$tmp/v_fresh.out" ||
    { echo "FAIL: nnt-train again on a regression, or a fresh model made multi-label"; tail -n 3 "$tmp/v_again.out" "$tmp/v_fresh.out"; fail=1; }
"$prog" $records --load-hf "$vfx/reg3" --seq 48 --batch 4 --steps 1 --no-save --out "$tmp/vtrain" \
    > "$tmp/vtrain.out" 2>&1
st=$?
[ "$st" -ne 0 ] && grep -q "the label is 1 value, not a list of as many numbers as the labels (3)" "$tmp/vtrain.out" ||
    { echo "FAIL: classification records for a regression: status $st"; tail -n 3 "$tmp/vtrain.out"; fail=1; }
for args in "--problem-type regression" "--problem-type regression --num-labels 2 --label-names a,b" \
            "--problem-type multi_label_classification --num-labels 3 --dpo-beta 0.1"; do
    # shellcheck disable=SC2086
    "$prog" --tokenizer-json "$tokdir/tokenizer.json" --data "$vfx/text_multi_train.jsonl" $args \
        --seq 48 --batch 4 --steps 1 --out "$tmp/bad" > /dev/null 2>&1
    st=$?
    [ "$st" -eq 2 ] || { echo "FAIL: nnt-train $args: status $st, not 2"; fail=1; }
done
[ "$fail" -eq 0 ] && echo "PASS: nnt-train on a text classifier"
exit "$fail"
