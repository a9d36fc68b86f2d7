#!/bin/sh
# SPDX-License-Identifier: MIT
# nnt-train on a reward model (--num-labels 1, TRL's RewardTrainer) against PyTorch:
# tests/fixtures/cls_tiny (tests/gen_cls_fixtures.py): a tiny LlamaForSequenceClassification
# of one label and its pairs (llama_rm_pairs.bin: 2 pairs, then the same pairs held out),
# 3 AdamW steps with --reward-center 0.25: the step losses and the held-out loss after them;
# the summary and step lines; a language model's directory made a reward model (its
# tokenizer's pad, .jsonl preference records, --save-hf a classifier transformers names;
# --pad-id, through nnt-train's records and nnt-tokenize's file);
# usage errors.
prog="$top_builddir/nnt-train"
[ -x "$prog" ] || { echo "FAIL: nnt-train not built"; exit 1; }
fx="$top_srcdir/tests/fixtures/cls_tiny"
tmp=$(mktemp -d) || exit 99
trap 'rm -rf "$tmp"' EXIT
fail=0
. "$top_srcdir/tests/within.sh"

want=$(python3 "$top_srcdir/tests/st_float64.py" "$fx/llama_rm.safetensors" \
    losses val_loss loss_plain 2>/dev/null) || want=""
if [ -z "$want" ]; then
    echo "SKIP: python3 cannot read the fixture"; exit 77
fi
losses=$(echo "$want" | sed -n 1p) val=$(echo "$want" | sed -n 2p)
plain=$(echo "$want" | sed -n 3p)

# Measured (AMD EPYC Zen 5, 2 cores, 2026-12-02): the steps' losses within 4.5e-6 relative of
# PyTorch's (tests/test_classifier.c, the same runs through the library), about 3.2e-6
# absolute on losses of 0.7; about 10x, plus --print-loss's 6 decimals: 3.3e-5.
TOL=3.3e-5
"$prog" --load-hf "$fx/llama_rm" --data "$fx/llama_rm_pairs.bin" --reward-center 0.25 \
    --batch 4 --seq 12 --steps 3 --val-split 0.5 --val-every 3 --optim adamw --lr 0.01 \
    --beta1 0.9 --beta2 0.999 --eps 1e-08 --weight-decay 0.1 --grad-clip 0 --warmup 0 \
    --schedule constant --tile-seq 5 --tile-batch 2 --print-loss --sample 0 --no-save \
    --out "$tmp/run" > "$tmp/run.out" 2> "$tmp/run.err" || {
    echo "FAIL: nnt-train on a reward model: exit status $?"; tail -n 5 "$tmp/run.err"; exit 1; }
got=$(sed -n 's/^step [0-9]* loss //p' "$tmp/run.out" | tr '\n' ' ')
gotval=$(sed -n 's/^val 3 loss //p' "$tmp/run.out")
echo "# nnt:     $got / held out $gotval"
echo "# PyTorch: $losses / held out $val"
if ! within "$TOL" "$got $gotval" "$losses $val"; then
    echo "FAIL: nnt-train on a reward model: losses differ from PyTorch's by more than $TOL"
    fail=1
fi
grep -q "^model: .*a reward model (a score head)" "$tmp/run.err" ||
    { echo "FAIL: the summary does not say the model is a reward model"; fail=1; }
grep -q "^loss: .*RewardTrainer.* + center (r_chosen + r_rejected)^2, .*id 0): 2 pairs of rows (chosen, rejected), 2 a micro-batch" "$tmp/run.err" ||
    { echo "FAIL: the summary has no reward model loss line"; grep '^loss' "$tmp/run.err"; fail=1; }
# validations alone (--steps 0, held-out pairs, no training data): the untrained model's
# loss without the center term (TRL's, loss_plain)
got=$("$prog" --load-hf "$fx/llama_rm" --val-data "$fx/llama_rm_pairs.bin" --steps 0 \
    --batch 4 --seq 12 --print-loss --no-save --out "$tmp/v0" 2> "$tmp/v0.err" |
    sed -n 's/^val 0 loss //p')
echo "# validation alone: nnt $got, PyTorch $plain"
within "$TOL" "$got" "$plain" ||
    { echo "FAIL: a reward model's validation alone (--steps 0)"; tail -n 2 "$tmp/v0.err"; fail=1; }

# a language model's directory under a new head: .jsonl preference records tokenized as
# TRL's RewardTrainer tokenizes them (the same rows as DPO's), the tokenizer's pad
# (<|endoftext|>, id 0 of the chatml fixture), --save-hf a classifier directory
sft="$top_srcdir/tests/fixtures/sft/chatml"
dpo="$top_srcdir/tests/fixtures/dpo_tiny"
"$prog" --tokenizer-json "$sft/tokenizer.json" --data "$dpo/preference.jsonl" --num-labels 1 \
    --batch 2 --seq 96 --steps 2 --layers 1 --channels 32 --heads 2 --no-save --val-split 0 \
    --save-hf "$tmp/rm" --out "$tmp/jsonl" > "$tmp/jsonl.out" 2> "$tmp/jsonl.err" || {
    echo "FAIL: nnt-train --num-labels 1 --data FILE.jsonl: exit status $?"
    tail -n 5 "$tmp/jsonl.err"; fail=1; }
grep -q "^step 1/2  loss [0-9.]*  acc [01].000  margin " "$tmp/jsonl.out" ||
    { echo "FAIL: the step lines have no accuracy and margin"; grep '^step' "$tmp/jsonl.out"; fail=1; }
grep -q '7 preference pairs' "$tmp/jsonl.out" ||
    { echo "FAIL: nnt-train --num-labels 1 does not read preference pairs"; fail=1; }
grep -q '"architectures": \["GPT2ForSequenceClassification"\]' "$tmp/rm/config.json" &&
    grep -q '"pad_token_id": 0' "$tmp/rm/config.json" &&
    grep -q '"id2label": {"0": "LABEL_0"}' "$tmp/rm/config.json" ||
    { echo "FAIL: --save-hf of a reward model: not a classifier's config.json"; fail=1; }
grep -q '^---- sample' "$tmp/jsonl.out" &&
    { echo "FAIL: a reward model printed a text sample"; fail=1; }
# --pad-id 5 (not the tokenizer's 0, and no text ends in it): the rows padded with it and
# pooled by it, so the same scores and losses; config.json's pad_token_id 5 (rows padded with
# the tokenizer's 0 but pooled by 5 gave step 1's loss 0.692449 for 0.691401)
"$prog" --tokenizer-json "$sft/tokenizer.json" --data "$dpo/preference.jsonl" --num-labels 1 \
    --batch 2 --seq 96 --steps 2 --layers 1 --channels 32 --heads 2 --no-save --val-split 0 \
    --pad-id 5 --save-hf "$tmp/rm5" --out "$tmp/jsonl5" > "$tmp/jsonl5.out" 2> "$tmp/jsonl5.err" ||
    { echo "FAIL: nnt-train --pad-id 5: exit status $?"; tail -n 5 "$tmp/jsonl5.err"; fail=1; }
losses() { sed -n 's/^step \([0-9]*\)\/2  loss \([0-9.]*\) .*/\1 \2/p' "$1"; }
[ -n "$(losses "$tmp/jsonl.out")" ] && [ "$(losses "$tmp/jsonl5.out")" = "$(losses "$tmp/jsonl.out")" ] &&
    grep -q '"pad_token_id": 5' "$tmp/rm5/config.json" ||
    { echo "FAIL: --pad-id 5: losses '$(losses "$tmp/jsonl5.out" | tr '\n' ' ')' for '$(losses "$tmp/jsonl.out" | tr '\n' ' ')', or config.json"; fail=1; }
# nnt-tokenize --preference --pad-id 5 writes those rows: nnt-train --pad-id 5 on its file
# gives the same losses again
"$top_builddir/nnt-tokenize" --tokenizer-json "$sft/tokenizer.json" --preference --pad-id 5 \
    --seq 96 --out "$tmp/pairs5.bin" "$dpo/preference.jsonl" 2> "$tmp/tok5.err" ||
    { echo "FAIL: nnt-tokenize --pad-id 5: exit status $?"; cat "$tmp/tok5.err"; fail=1; }
"$prog" --tokenizer-json "$sft/tokenizer.json" --data "$tmp/pairs5.bin" --num-labels 1 \
    --batch 2 --seq 96 --steps 2 --layers 1 --channels 32 --heads 2 --no-save --val-split 0 \
    --pad-id 5 --out "$tmp/bin5" > "$tmp/bin5.out" 2> "$tmp/bin5.err" ||
    { echo "FAIL: nnt-train --pad-id 5 on nnt-tokenize's file: exit status $?"; tail -n 5 "$tmp/bin5.err"; fail=1; }
[ "$(losses "$tmp/bin5.out")" = "$(losses "$tmp/jsonl.out")" ] ||
    { echo "FAIL: nnt-tokenize --pad-id 5: losses '$(losses "$tmp/bin5.out" | tr '\n' ' ')'"; fail=1; }
# the saved reward model goes on training from its directory
"$prog" --load-hf "$tmp/rm" --data "$tmp/jsonl/preference.tokens.bin" --batch 2 --seq 96 \
    --steps 1 --no-save --val-split 0 --out "$tmp/again" > "$tmp/again.out" 2>&1 || {
    echo "FAIL: nnt-train --load-hf of a saved reward model: exit status $?"
    tail -n 5 "$tmp/again.out"; fail=1; }
grep -q "a reward model (a score head)" "$tmp/again.out" ||
    { echo "FAIL: the saved reward model was not read as one"; fail=1; }
# LoRA on the saved (GPT-2) reward model, as TRL's RewardTrainer with a peft_config trains
# it (PEFT's task_type SEQ_CLS): the adapters and the score head, saved together; its score
# of a sequence with the adapter (unmerged) and merged is the same, and not the base's
"$prog" --load-hf "$tmp/rm" --data "$tmp/jsonl/preference.tokens.bin" --batch 2 --seq 96 \
    --steps 3 --lr 0.01 --lora-rank 2 --lora-targets all-linear --no-save --val-split 0 \
    --save-peft "$tmp/rm_peft" --merge --save-hf "$tmp/rm_merged" --out "$tmp/lora" \
    > "$tmp/lora.out" 2>&1 || {
    echo "FAIL: nnt-train --lora-rank on a reward model: exit status $?"
    tail -n 5 "$tmp/lora.out"; fail=1; }
grep -q "^fine-tune: LoRA r 2, alpha 8, dropout 0 on all-linear, the classifier's head (score) trained whole$" "$tmp/lora.out" ||
    { echo "FAIL: the LoRA reward model's fine-tune line"; grep '^fine-tune' "$tmp/lora.out"; fail=1; }
head -c 4096 "$tmp/rm_peft/adapter_model.safetensors" |
    grep -a -q '"base_model.model.score.weight":{"dtype":"F32","shape":\[1,32\]' ||
    { echo "FAIL: the reward model's adapter file has no score head (1, 32)"; fail=1; }
gen="$top_builddir/nnt-generate"
s_lora=$("$gen" --load-hf "$tmp/rm" --adapter "$tmp/rm_peft" --prompt-ids "5 9 13 200 17 3" 2>&1)
s_merged=$("$gen" --load-hf "$tmp/rm_merged" --prompt-ids "5 9 13 200 17 3" 2>&1)
s_base=$("$gen" --load-hf "$tmp/rm" --prompt-ids "5 9 13 200 17 3" 2>&1)
echo "# reward model's score: base $s_base, with its LoRA adapter $s_lora, merged $s_merged"
case "$s_lora" in "score "*) ;; *) s_lora=x ;; esac
[ "$s_lora" = "$s_merged" ] && [ "$s_lora" != "$s_base" ] ||
    { echo "FAIL: a LoRA reward model's score: with the adapter '$s_lora', merged '$s_merged', base '$s_base'"; fail=1; }

# usage errors: status 2
for args in "--num-labels 1 --batch 3" "--num-labels 1 --dpo-beta 0.1"; do
    # shellcheck disable=SC2086
    "$prog" --load-hf "$fx/llama_lm" --data "$fx/llama_rm_pairs.bin" --seq 12 --steps 1 \
        $args --out "$tmp/bad" > /dev/null 2>&1
    st=$?
    [ "$st" -eq 2 ] || { echo "FAIL: nnt-train $args: status $st, not 2"; fail=1; }
done
# a classifier of several labels on pairs: its targets are labels (tests/check_classify.sh),
# these token ids: refused, naming what it trains on
"$prog" --load-hf "$fx/llama_cls" --data "$fx/llama_rm_pairs.bin" --seq 12 --batch 4 \
    --steps 1 --no-save --out "$tmp/cls" > "$tmp/cls.out" 2>&1
st=$?
{ [ "$st" -ne 0 ] && grep -q "a classifier of 3 labels, but a target that counts is" "$tmp/cls.out"; } ||
    { echo "FAIL: nnt-train on a classifier of 3 labels: status $st"; tail -n 3 "$tmp/cls.out"; fail=1; }
[ "$fail" -eq 0 ] && echo "PASS: nnt-train on a reward model"
exit "$fail"
