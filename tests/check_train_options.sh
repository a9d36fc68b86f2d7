#!/bin/sh
# SPDX-License-Identifier: MIT
# nnt-train's options that no other test gave a value off its default, each through what it
# changes that a user would see:
#   --data-format   one token sequence as an llm.c shard (auto) and as a nanoGPT file under
#                   a name auto reads as text (nanogpt): the same losses; the text reading
#                   gives others; llmc on the nanoGPT file, nanogpt on a text file and an
#                   unknown format are refused, named;
#   --sched         eager, dmdas and ws on 2 workers: the default's losses, bit for bit, and
#                   the runtime line names the scheduler; an unknown one is refused, named;
#   --save-llmc     OUT/model.bin with llm.c's header (magic 20240326, version 3, maxT, V, L,
#                   NH, C, padded V) and 4 bytes a parameter after its 1024;
#   --load-llmc, --load-safetensors
#                   the same weights read back through llm.c's file, through the bare
#                   safetensors file of --save-hf and through its directory: equal losses;
#                   a file of another shape is refused naming the tensor;
#   --init          the default's losses; with --load-* refused;
#   --head-dim      a Llama with heads of 12 for C 32 and 4 heads: --save-hf's config.json
#                   and q/k shapes say so (4 x 12 and 2 x 12 rows); an odd size and GPT-2
#                   are refused;
#   --qk-norm       a Llama with RMSNorm on each head of q and k: the model line says so,
#                   --save-hf writes Qwen3ForCausalLM with q_norm and k_norm of the head
#                   dimension; other losses than without it; GPT-2 refused;
#   --momentum      SGD with momentum 0.9: steps 1 and 2 as without (its buffer starts as
#                   the gradient: the first update is plain SGD's, and step 2's loss is
#                   computed before the second), step 3 not; the summary names it;
#   --schedule linear|wsd, --decay-steps, --decay-shape
#                   train.csv's lr column is the schedule's closed form at every step (a
#                   linear decay to 0; warmup, stable, a cosine decay over the last 4 steps
#                   to --min-lr), the summary names it; a WSD run stopped at the end of its
#                   stable phase and resumed with more --steps decays over the last 4 of the
#                   new end (decay steps and shape from the checkpoint), its logs in the
#                   checkpoint's directory (--resume without --out); a decay longer than
#                   the steps after the warmup, and a decay option without wsd, refused;
#   --early-stop, --early-stop-delta
#                   a run validated every 2 steps stops after the step transformers'
#                   EarlyStoppingCallback rule gives for the losses of its val.csv without
#                   the option (awk here), saying so, its checkpoint there; stopped before it
#                   and resumed, it stops after the same step (the count goes on from the
#                   resumed val.csv); without validation, and a delta alone, refused;
#   --label-smoothing
#                   other losses than without it from step 1, the loss line of the summary
#                   says so; a run stopped after step 3 and resumed without the option
#                   continues with the losses of the run straight through (the checkpoint
#                   records it, the resumed line names it); with --dpo-beta or a classifier
#                   refused (the math against transformers' LabelSmoother:
#                   tests/test_layer_llama.c);
#   --neftune-alpha other losses than without it from step 1, the summary's noise line gives
#                   its bound 5 / sqrt(T C); stopped after step 3 and resumed, the losses of
#                   the run straight through (the noise of a micro-batch drawn from its
#                   number); with --dpo-beta refused (the noise itself: tests/test_layers.c);
#   --quiet         nothing on stdout or stderr when all goes well (the --print-loss lines
#                   still on stdout), not even the library's warnings (--mem-gpu without a
#                   GPU, which warns otherwise), the error when not.
prog="${top_builddir:?}/nnt-train"
. "${top_srcdir:?}/tests/train_checks.sh"

# same_losses WHAT A B: the --print-loss lines of runs A and B are identical (and present).
same_losses() {
    if [ -s "$tmp/$2.out" ] && cmp -s "$tmp/$2.out" "$tmp/$3.out"; then
        echo "ok: $1: $(tr '\n' ' ' < "$tmp/$2.out")"
    else
        fail "$1: the losses differ:"; paste "$tmp/$2.out" "$tmp/$3.out"
    fi
}

i=0
while [ $i -lt 300 ]; do
    echo "line $i: the quick brown fox jumps over the lazy dog; a stitch in time saves nine."
    i=$((i + 1))
done > "$tmp/corpus.txt"
"$top_builddir/nnt-tokenize" --out "$tmp/tok.bin" "$tmp/corpus.txt" > /dev/null 2>&1 ||
    fail "nnt-tokenize of the corpus"
tail -c +1025 "$tmp/tok.bin" > "$tmp/tokens.raw"   # the same tokens without the header

gpt="--layers 1 --channels 32 --heads 2 --context 32"
run_args="--batch 2 --seq 16 --sample 0 --cpus 2 --steps 3 --print-loss"

# ---- --data-format ----------------------------------------------------------------------------
run_ok llmc_auto $gpt $run_args --data "$tmp/tok.bin" --out "$tmp/d1"
run_ok nanogpt $gpt $run_args --data "$tmp/tokens.raw" --data-format nanogpt --out "$tmp/d2"
same_losses "--data-format nanogpt reads the llm.c shard's tokens" llmc_auto nanogpt
grep -q "tokens.raw, nanoGPT token file: 25090 tokens" "$tmp/nanogpt.err" ||
    fail "--data-format nanogpt: the data line: $(grep data: "$tmp/nanogpt.err")"
run_ok as_text $gpt $run_args --data "$tmp/tokens.raw" --out "$tmp/d3"
if grep -q "tokens.raw, text, bytes tokenizer: 50180 tokens" "$tmp/as_text.err" &&
   ! cmp -s "$tmp/as_text.out" "$tmp/llmc_auto.out"; then
    echo "ok: auto reads a file not named .bin as text (its 50180 bytes), other losses"
else
    fail "auto on tokens.raw: $(grep data: "$tmp/as_text.err"), losses $(tr '\n' ' ' < "$tmp/as_text.out")"
fi
expect_error llmc_on_raw "bad magic" $gpt $run_args --data "$tmp/tokens.raw" --data-format llmc \
    --out "$tmp/d4"
expect_error nanogpt_on_text "not below the vocabulary size 256" $gpt $run_args \
    --data "$tmp/corpus.txt" --data-format nanogpt --out "$tmp/d5"
expect_error csv "'csv' is not one of auto, text, llmc, nanogpt" $gpt $run_args \
    --data "$tmp/tok.bin" --data-format csv --out "$tmp/d6"

# ---- --sched: any scheduler, the same numbers ----------------------------------------------------
for s in eager dmdas ws; do
    run_ok "sched_$s" $gpt $run_args --data "$tmp/tok.bin" --sched "$s" --out "$tmp/s_$s"
    grep -q "scheduler $s;" "$tmp/sched_$s.err" ||
        fail "--sched $s: the runtime line: $(grep runtime: "$tmp/sched_$s.err")"
    same_losses "--sched $s" llmc_auto "sched_$s"
done
expect_error sched_unknown "unknown scheduler 'nosuch'" $gpt $run_args --data "$tmp/tok.bin" \
    --sched nosuch --out "$tmp/s_x"

# ---- --save-llmc, then the three ways of loading the same weights ---------------------------------
run_ok saved $gpt $run_args --data "$tmp/tok.bin" --out "$tmp/w" --save-llmc --save-hf "$tmp/w/hf"
header=$(od -An -t d4 -N 32 "$tmp/w/model.bin" 2>/dev/null | tr -s ' \n' '  ' | sed 's/^ //; s/ $//')
size=$(wc -c < "$tmp/w/model.bin" 2>/dev/null || echo 0)
# GPT-2 L 1, C 32, V 256 (padded 256), context 32: wte 8192 + wpe 1024 + 2 LayerNorms 128 +
# attention 3072 + 96 (qkv) and 1024 + 32 (proj) + MLP 4096 + 128 (fc) and 4096 + 32 (proj) +
# the final LayerNorm 64 = 21984 parameters
if [ "$header" = "20240326 3 32 256 1 2 32 256" ] && [ "$size" -eq $((1024 + 4 * 21984)) ]; then
    echo "ok: --save-llmc: header $header, $size bytes"
else
    fail "--save-llmc: header '$header', $size bytes (expected 20240326 3 32 256 1 2 32 256, $((1024 + 4 * 21984)))"
fi
load_args="--batch 2 --seq 16 --sample 0 --cpus 2 --steps 2 --print-loss --data $tmp/tok.bin"
run_ok from_llmc --load-llmc "$tmp/w/model.bin" $load_args --out "$tmp/l1"
run_ok from_hf --load-hf "$tmp/w/hf" $load_args --out "$tmp/l2"
run_ok from_st $gpt --load-safetensors "$tmp/w/hf/model.safetensors" $load_args --out "$tmp/l3"
same_losses "--load-llmc and --load-hf of one run's weights" from_llmc from_hf
same_losses "--load-safetensors and --load-hf" from_st from_hf
grep -q "weights from $tmp/w/hf/model.safetensors" "$tmp/from_st.err" ||
    fail "--load-safetensors: the model line: $(grep model: "$tmp/from_st.err")"
[ "$(head -n 1 "$tmp/from_hf.out")" = "$(head -n 1 "$tmp/llmc_auto.out")" ] &&
    fail "the loaded weights start from the fresh model's loss"
expect_error st_shape "transformer.wte.weight has shape (256, 32), expected (256, 64)" \
    --layers 1 --channels 64 --heads 2 --context 32 \
    --load-safetensors "$tmp/w/hf/model.safetensors" $load_args --out "$tmp/l4"

# ---- --init ---------------------------------------------------------------------------------------
run_ok init $gpt $run_args --data "$tmp/tok.bin" --init --out "$tmp/i1"
same_losses "--init (the default)" llmc_auto init
expect_error init_load "--init and --load-\* exclude each other" --init --load-hf "$tmp/w/hf" \
    $load_args --out "$tmp/i2"

# ---- --head-dim ------------------------------------------------------------------------------------
llama="--model llama-tiny --layers 1 --channels 32 --heads 4 --kv-heads 2 --hidden 48
    --context 32 --batch 2 --seq 16 --sample 0 --cpus 2 --steps 2 --print-loss"
run_ok head_dim $llama --head-dim 12 --data "$tmp/corpus.txt" --out "$tmp/h1" --save-hf "$tmp/h1/hf"
st_head=$(head -c 4000 "$tmp/h1/hf/model.safetensors" 2>/dev/null | tr -d '\000')
if grep -q "head dim 12," "$tmp/head_dim.err" &&
   grep -q '"head_dim": *12' "$tmp/h1/hf/config.json" 2>/dev/null &&
   echo "$st_head" | grep -q '"model.layers.0.self_attn.q_proj.weight":{"dtype":"F32","shape":\[48,32\]' &&
   echo "$st_head" | grep -q '"model.layers.0.self_attn.k_proj.weight":{"dtype":"F32","shape":\[24,32\]'; then
    echo "ok: --head-dim 12: model line, config.json and q/k shapes (48 x 32, 24 x 32)"
else
    fail "--head-dim 12: $(grep model: "$tmp/head_dim.err"); config: $(cat "$tmp/h1/hf/config.json" 2>/dev/null)"
fi
expect_error head_dim_odd "even head dimension" $llama --head-dim 7 --data "$tmp/corpus.txt" \
    --out "$tmp/h2"
expect_error head_dim_gpt2 "--head-dim does not apply to GPT-2" $gpt $run_args --head-dim 8 \
    --data "$tmp/corpus.txt" --out "$tmp/h3"

# ---- --qk-norm -------------------------------------------------------------------------------------
run_ok qk_norm $llama --qk-norm --data "$tmp/corpus.txt" --out "$tmp/k1" --save-hf "$tmp/k1/hf"
run_ok qk_plain $llama --data "$tmp/corpus.txt" --out "$tmp/k2"
st_head=$(head -c 4000 "$tmp/k1/hf/model.safetensors" 2>/dev/null | tr -d '\000')
if grep -q "q/k norm" "$tmp/qk_norm.err" &&
   grep -q '"architectures": \["Qwen3ForCausalLM"\]' "$tmp/k1/hf/config.json" 2>/dev/null &&
   echo "$st_head" | grep -q '"model.layers.0.self_attn.q_norm.weight":{"dtype":"F32","shape":\[8\]' &&
   echo "$st_head" | grep -q '"model.layers.0.self_attn.k_norm.weight":{"dtype":"F32","shape":\[8\]' &&
   ! cmp -s "$tmp/qk_norm.out" "$tmp/qk_plain.out"; then
    echo "ok: --qk-norm: model line, Qwen3 config.json, q_norm and k_norm of 8; other losses"
else
    fail "--qk-norm: $(grep model: "$tmp/qk_norm.err"); config: $(cat "$tmp/k1/hf/config.json" 2>/dev/null)"
fi
expect_error qk_norm_gpt2 "--qk-norm" $gpt $run_args --qk-norm --data "$tmp/corpus.txt" \
    --out "$tmp/k3"

# ---- --momentum ------------------------------------------------------------------------------------
sgd="$llama --steps 3 --optim sgd --lr 0.5 --schedule constant --warmup 0 --grad-clip 0
    --data $tmp/corpus.txt"
# shellcheck disable=SC2086 # the options are words
run_ok sgd_plain $sgd --out "$tmp/m1"
# shellcheck disable=SC2086
run_ok sgd_momentum $sgd --momentum 0.9 --out "$tmp/m2"
step_loss() { sed -n "s/^step $1 loss //p" "$tmp/$2.out"; }
if [ -n "$(step_loss 3 sgd_plain)" ] && [ "$(step_loss 1 sgd_plain)" = "$(step_loss 1 sgd_momentum)" ] &&
   [ "$(step_loss 2 sgd_plain)" = "$(step_loss 2 sgd_momentum)" ] &&
   [ "$(step_loss 3 sgd_plain)" != "$(step_loss 3 sgd_momentum)" ] &&
   grep -q "momentum 0.9" "$tmp/sgd_momentum.err"; then
    echo "ok: --momentum 0.9: steps 1 and 2 as without, step 3 not ($(step_loss 3 sgd_plain), $(step_loss 3 sgd_momentum)); the summary names it"
else
    fail "--momentum: $(tr '\n' ' ' < "$tmp/sgd_plain.out") / $(tr '\n' ' ' < "$tmp/sgd_momentum.out"); $(grep -i optim "$tmp/sgd_momentum.err")"
fi

# ---- --schedule linear and wsd, --decay-steps, --decay-shape ---------------------------------------
# lr_check NAME OUT AWK: OUT/train.csv's lr at each step s equals AWK's expression of s (lr
# printed with 9 significant digits: 1e-8 relative).
lr_check() {
    bad=$(awk -F, -v what="$1" 'NR > 1 { s = $1; want = '"$3"';
              if ($3 - want > 1e-8 * want || want - $3 > 1e-8 * want)
                  printf "%s: step %d lr %s, want %.9g; ", what, s, $3, want }' "$2/train.csv" ||
          echo "awk could not check it")
    n=$(($(wc -l < "$2/train.csv") - 1))
    if [ -z "$bad" ] && [ "$n" -gt 0 ]; then
        echo "ok: $1: the lr of $n steps: $(awk -F, 'NR > 1 { printf "%s ", $3 }' "$2/train.csv")"
    else
        fail "$1: ${bad:-no steps}"
    fi
}
sched="$gpt --batch 2 --seq 16 --cpus 2 --sample 0 --data $tmp/tok.bin --lr 1e-3"
# shellcheck disable=SC2086 # the options are words
run_ok linear $sched --steps 6 --warmup 1 --schedule linear --min-lr 0 --out "$tmp/s1"
lr_check "--schedule linear (to 0 at step 6)" "$tmp/s1" 's <= 1 ? 1e-3 : 1e-3 * (6 - s) / 5'
wsd="$sched --warmup 2 --schedule wsd --decay-steps 4 --decay-shape cosine --min-lr 1e-4"
# (stable to step 6, then 1e-4 + 9e-4 (1 + cos(pi (s - 6) / 4)) / 2)
# (one line: mawk takes no newline after the ?: operator's colon)
cos_decay() { echo "s <= 2 ? 5e-4 * s : s <= $1 ? 1e-3 : s >= $1 + 4 ? 1e-4 :" \
                   "1e-4 + 4.5e-4 * (1 + cos(3.14159265358979 * (s - $1) / 4))"; }
# shellcheck disable=SC2086
run_ok wsd $wsd --steps 10 --out "$tmp/s2"
lr_check "--schedule wsd --decay-steps 4 --decay-shape cosine" "$tmp/s2" "$(cos_decay 6)"
grep -q "wsd schedule, warmup 2, the last 4 steps' decay cosine, min 0.0001" "$tmp/wsd.out" &&
    echo "ok: --schedule wsd: the summary names it" ||
    fail "--schedule wsd: the summary: $(grep -i optimizer "$tmp/wsd.out")"
# stopped at the end of the stable phase, resumed with 4 more steps: the decay moves to 11-14
# shellcheck disable=SC2086
run_ok wsd_stop $wsd --steps 10 --stop-after 6 --out "$tmp/s3"
abs_prog="$(cd "$top_builddir" && pwd)/nnt-train"   # (run from $tmp: where no --out would go)
(cd "$tmp" && "$abs_prog" --resume "$tmp/s3/checkpoint.safetensors" --steps 14 \
    > wsd_more.out 2> wsd_more.err) ||
    { fail "wsd_more: exit status $?"; tail -n 5 "$tmp/wsd_more.err"; }
lr_check "--schedule wsd resumed with --steps 14 from step 6, into its directory" "$tmp/s3" \
    "$(cos_decay 10)"
[ ! -e "$tmp/nnt-train-out" ] || fail "--resume without --out wrote $tmp/nnt-train-out"
# shellcheck disable=SC2086
expect_error decay_too_long "decay-steps 9" $sched --steps 10 --warmup 2 --schedule wsd \
    --decay-steps 9 --out "$tmp/s4"
# shellcheck disable=SC2086
expect_error decay_not_wsd "give --schedule wsd" $sched --steps 10 --decay-shape 1-sqrt \
    --out "$tmp/s5"

# ---- --early-stop, --early-stop-delta --------------------------------------------------------------
early="--layers 1 --channels 32 --heads 2 --batch 2 --seq 32 --sample 0 --lr 3e-2 --val-every 2
    --cpus 2 --steps 40"
# shellcheck disable=SC2086 # the options are words
run_ok no_early $early --out "$tmp/e0"
# the step after which patience 2 and threshold 0.01 stop these losses (transformers' rule)
want=$(awk -F, 'NR > 1 { if (NR == 2 || ($2 < best && best - $2 > 0.01)) c = 0; else c++;
                         if (NR == 2 || $2 < best) best = $2;
                         if (c >= 2) { print $1; exit } }' "$tmp/e0/val.csv")
# shellcheck disable=SC2086
run_ok early $early --early-stop 2 --early-stop-delta 0.01 --out "$tmp/e1"
got=$(sed -n 's/^early stop after step \([0-9]*\):.*/\1/p' "$tmp/early.out")
if [ -n "$want" ] && [ "$want" -lt 40 ] && [ "$got" = "$want" ] &&
   [ "$(tail -n 1 "$tmp/e1/train.csv" | cut -d, -f1)" = "$want" ] &&
   [ -s "$tmp/e1/checkpoint.safetensors" ]; then
    echo "ok: --early-stop 2 --early-stop-delta 0.01: stopped after step $got as transformers' rule on the validation losses: $(grep '^early stop' "$tmp/early.out")"
else
    fail "--early-stop: stopped after '$got', the rule on $tmp/e0/val.csv: '$want'"
fi
stop_at=$((want - 2))   # one validation before: the count is 1 there
# shellcheck disable=SC2086
run_ok early_part $early --early-stop 2 --early-stop-delta 0.01 --stop-after $stop_at \
    --out "$tmp/e2"
run_ok early_rest --resume "$tmp/e2/checkpoint.safetensors" --out "$tmp/e2"
got=$(sed -n 's/^early stop after step \([0-9]*\):.*/\1/p' "$tmp/early_rest.out")
[ "$got" = "$want" ] && echo "ok: --early-stop resumed after step $stop_at: stopped after step $got" ||
    fail "--early-stop resumed after step $stop_at: stopped after '$got', want $want"
# shellcheck disable=SC2086
expect_error early_no_val "needs\|give --val-data" $gpt $run_args --data "$tmp/tok.bin" \
    --early-stop 2 --out "$tmp/e3"
# shellcheck disable=SC2086
expect_error delta_alone "give --early-stop" $gpt $run_args --early-stop-delta 0.1 --out "$tmp/e4"

# ---- --label-smoothing -----------------------------------------------------------------------------
tuned="$gpt --batch 2 --seq 16 --sample 0 --cpus 2 --steps 6 --print-loss --data $tmp/tok.bin"
# shellcheck disable=SC2086
run_ok ls_plain $tuned --out "$tmp/ls_plain"

# tuned_run NAME OPTION VALUE SUMMARY: 6 steps with --OPTION VALUE straight through
# ($tmp/NAME_full), and stopped after step 3 then resumed without it ($tmp/NAME_part): step 1's
# loss is not ls_plain's, the summary has a line matching SUMMARY; the resume restores the
# option from the checkpoint ("resumed with" names it) and logs the losses of the run straight
# through.
tuned_run() {
    # shellcheck disable=SC2086
    run_ok "$1_full" $tuned --$2 $3 --out "$tmp/$1_full"
    # shellcheck disable=SC2086
    run_ok "$1_part" $tuned --$2 $3 --stop-after 3 --out "$tmp/$1_part"
    run_ok "$1_part_rest" --resume "$tmp/$1_part/checkpoint.safetensors" --print-loss
    first=$(head -n 1 "$tmp/$1_full.out") plain=$(head -n 1 "$tmp/ls_plain.out")
    if [ "$first" != "$plain" ] && grep -q "$4" "$tmp/$1_full.err"; then
        echo "ok: --$2 $3: step 1 $first, without $plain"
    else
        fail "--$2: the losses or the summary: $first / $plain; no line '$4' in $tmp/$1_full.err"
    fi
    cut -d, -f2 "$tmp/$1_full/train.csv" > "$tmp/$1_full.losses"
    cut -d, -f2 "$tmp/$1_part/train.csv" > "$tmp/$1_part.losses"
    if [ "$(wc -l < "$tmp/$1_full.losses")" = 7 ] &&
       cmp -s "$tmp/$1_full.losses" "$tmp/$1_part.losses" &&
       grep -q "resumed with its run's .*--$2 $3" "$tmp/$1_part_rest.err"; then
        echo "ok: --$2 resumed after step 3: the 6 losses of the run straight through"
    else
        fail "--$2 resumed: the losses differ or it was not restored: $(paste -s -d' ' "$tmp/$1_full.losses") / $(paste -s -d' ' "$tmp/$1_part.losses"); $(grep '^resumed with' "$tmp/$1_part_rest.err")"
    fi
}

tuned_run ls label-smoothing 0.2 "^loss: .*(label smoothing 0.2, transformers' LabelSmoother)"
# shellcheck disable=SC2086
expect_error ls_dpo "not with --dpo-beta" $gpt $run_args --label-smoothing 0.1 --dpo-beta 0.1 \
    --out "$tmp/ls_dpo"
# shellcheck disable=SC2086
expect_error ls_cls "not a classifier's" $gpt $run_args --label-smoothing 0.1 --num-labels 3 \
    --out "$tmp/ls_cls"
# shellcheck disable=SC2086
expect_error ls_range "out of range" $gpt $run_args --label-smoothing 1 --out "$tmp/ls_range"

# ---- --neftune-alpha --------------------------------------------------------------------------------
# T 16, C 32: 5 / sqrt(512) = 0.220971
tuned_run nf neftune-alpha 5 "^noise: .* +-5 / sqrt(T C) = +-0.220971 "
# shellcheck disable=SC2086
expect_error nf_dpo "not with --dpo-beta" $gpt $run_args --neftune-alpha 5 --dpo-beta 0.1 \
    --out "$tmp/nf_dpo"

# ---- --lora-dora ------------------------------------------------------------------------------------
# DoRA starts as the base computes (B 0, the magnitudes the rows' norms): step 1's loss is
# LoRA's, the next ones are not; the summary says DoRA; --save-peft writes use_dora and the
# magnitudes; a resume restores it (the 6 losses of the run straight through).
lora="--lora-rank 4 --lora-targets all-linear"
# shellcheck disable=SC2086
run_ok dora_base $gpt $run_args --data "$tmp/tok.bin" --save-hf "$tmp/dora_base" \
    --out "$tmp/dora_b"
tuned="--load-hf $tmp/dora_base --batch 2 --seq 16 --sample 0 --cpus 2 --steps 6 --print-loss --data $tmp/tok.bin"
# shellcheck disable=SC2086
run_ok dora_lora $tuned $lora --out "$tmp/dora_lora"
# shellcheck disable=SC2086
run_ok dora_full $tuned $lora --lora-dora --save-peft "$tmp/dora_peft" --out "$tmp/dora_full"
# shellcheck disable=SC2086
run_ok dora_part $tuned $lora --lora-dora --stop-after 3 --out "$tmp/dora_part"
run_ok dora_part_rest --resume "$tmp/dora_part/checkpoint.safetensors" --print-loss
if [ "$(head -n 1 "$tmp/dora_full.out")" = "$(head -n 1 "$tmp/dora_lora.out")" ] &&
   [ "$(sed -n 2p "$tmp/dora_full.out")" != "$(sed -n 2p "$tmp/dora_lora.out")" ] &&
   grep -q "^fine-tune: DoRA r 4, alpha 8, dropout 0 on all-linear" "$tmp/dora_full.err" &&
   grep -q '"use_dora": true' "$tmp/dora_peft/adapter_config.json" &&
   grep -q 'mlp.c_fc.lora_magnitude_vector' "$tmp/dora_peft/adapter_model.safetensors"; then
    echo "ok: --lora-dora: step 1 LoRA's, step 2 $(sed -n 2p "$tmp/dora_full.out") (LoRA's $(sed -n 2p "$tmp/dora_lora.out")); its PEFT files"
else
    fail "--lora-dora: losses $(paste -s -d' ' "$tmp/dora_full.out") / LoRA's $(paste -s -d' ' "$tmp/dora_lora.out"); $(grep '^fine-tune' "$tmp/dora_full.err"); $(grep use_dora "$tmp/dora_peft/adapter_config.json")"
fi
cut -d, -f2 "$tmp/dora_full/train.csv" > "$tmp/dora_full.losses"
cut -d, -f2 "$tmp/dora_part/train.csv" > "$tmp/dora_part.losses"
if [ "$(wc -l < "$tmp/dora_full.losses")" = 7 ] &&
   cmp -s "$tmp/dora_full.losses" "$tmp/dora_part.losses" &&
   grep -q "resumed with its run's .*--lora-dora" "$tmp/dora_part_rest.err"; then
    echo "ok: --lora-dora resumed after step 3: the 6 losses of the run straight through"
else
    fail "--lora-dora resumed: $(paste -s -d' ' "$tmp/dora_full.losses") / $(paste -s -d' ' "$tmp/dora_part.losses"); $(grep '^resumed with' "$tmp/dora_part_rest.err")"
fi
# a fine-tuning run on a fresh model (its frozen base read from no file) cannot be resumed:
# said so, not taken for a damaged checkpoint
# shellcheck disable=SC2086
run_ok fresh_lora $gpt $run_args --data "$tmp/tok.bin" $lora --out "$tmp/fresh_lora"
expect_error fresh_lora_resume "fine-tuning run (.* parameter elements frozen) on a freshly initialised model" \
    --resume "$tmp/fresh_lora/checkpoint.safetensors"
# generation with PEFT's DoRA adapter (the cached forwards keep the first one's gains) is
# PEFT's merged model's, and not the base's
lt="$top_srcdir/tests/fixtures/lora_tiny"
gen_ids() {
    "$top_builddir/nnt-generate" "$@" --prompt-ids "5 9 13 20 17 3" --temperature 0 \
        --max-new-tokens 40 2>/dev/null | tail -n 1
}
g_dora=$(gen_ids --load-hf "$lt/llama" --adapter "$lt/llama_dora/trained")
g_merged=$(gen_ids --load-hf "$lt/llama_dora/merged")
g_base=$(gen_ids --load-hf "$lt/llama")
if [ -n "$g_dora" ] && [ "$g_dora" = "$g_merged" ] && [ "$g_dora" != "$g_base" ]; then
    echo "ok: nnt-generate --adapter (DoRA): PEFT's merged model's tokens ($g_dora)"
else
    fail "nnt-generate --adapter (DoRA): '$g_dora', merged '$g_merged', base '$g_base'"
fi
# QDoRA: the base's matrices in NF4 (the norms of their dequantization): another run than
# DoRA's on the float base, the summary says both
# shellcheck disable=SC2086
run_ok dora_nf4 $tuned $lora --lora-dora --quantize nf4 --out "$tmp/dora_nf4"
if [ "$(sed -n 2p "$tmp/dora_nf4.out")" != "$(sed -n 2p "$tmp/dora_full.out")" ] &&
   grep -q "^fine-tune: DoRA r 4" "$tmp/dora_nf4.err" && grep -q "in NF4" "$tmp/dora_nf4.err"; then
    echo "ok: --lora-dora --quantize nf4: $(sed -n 2p "$tmp/dora_nf4.out")"
else
    fail "--lora-dora --quantize nf4: $(paste -s -d' ' "$tmp/dora_nf4.out"); $(grep -E '^(fine-tune|trained)' "$tmp/dora_nf4.err")"
fi

# ---- --quiet ---------------------------------------------------------------------------------------
run_ok quiet $gpt --batch 2 --seq 16 --cpus 2 --steps 2 --data "$tmp/tok.bin" --quiet \
    --out "$tmp/q1"
run_ok loud $gpt --batch 2 --seq 16 --cpus 2 --steps 2 --data "$tmp/tok.bin" --out "$tmp/q2"
if [ ! -s "$tmp/quiet.out" ] && [ ! -s "$tmp/quiet.err" ] && [ -s "$tmp/loud.out" ] &&
   [ -s "$tmp/q1/checkpoint.safetensors" ]; then
    echo "ok: --quiet: nothing printed (without it $(wc -l < "$tmp/loud.out") lines), the checkpoint written"
else
    fail "--quiet: $(wc -c < "$tmp/quiet.out") bytes on stdout, $(wc -c < "$tmp/quiet.err") on stderr"
fi
# a library warning is silenced too: --mem-gpu without a GPU (see below)
run_ok mem_gpu $gpt $run_args --data "$tmp/tok.bin" --mem-gpu 100 --out "$tmp/g1"
if grep -q "runtime: .* 0 CUDA workers" "$tmp/mem_gpu.err"; then
    grep -q "mem_gpu_mib 100: no CUDA worker started, so no GPU budget applies" \
        "$tmp/mem_gpu.err" && echo "ok: --mem-gpu without a GPU: warned" ||
        fail "--mem-gpu without a GPU: no warning in: $(cat "$tmp/mem_gpu.err")"
    run_ok mem_gpu_quiet $gpt $run_args --data "$tmp/tok.bin" --mem-gpu 100 --quiet \
        --out "$tmp/g2"
    [ -s "$tmp/mem_gpu_quiet.err" ] &&
        fail "--quiet: the library's warning printed: $(cat "$tmp/mem_gpu_quiet.err")"
fi
run_ok quiet_loss $gpt $run_args --data "$tmp/tok.bin" --quiet --out "$tmp/q3"
same_losses "--quiet --print-loss" llmc_auto quiet_loss
[ -s "$tmp/quiet_loss.err" ] && fail "--quiet --print-loss: stderr: $(cat "$tmp/quiet_loss.err")"
expect_error quiet_error "cannot open" $gpt $run_args --quiet --data "$tmp/nosuch.bin" \
    --out "$tmp/q4"

[ $fail -eq 0 ] && echo "PASS" || echo "FAIL"
exit $fail
