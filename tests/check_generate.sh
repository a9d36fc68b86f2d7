#!/bin/sh
# SPDX-License-Identifier: MIT
# Smoke test of nnt-generate: 48 greedy tokens of the tiny GQA Llama fixture
# (tests/fixtures/llama_tiny/gqa) equal transformers' (gqa.greedy_long of generate.safetensors,
# tests/gen_llama_generate.py), and 40 of a GPT-2 (tests/fixtures/gpt2_gen,
# tests/gen_gpt2_generate.py), with and without the key/value cache, in fp32 and with
# --precision bf16; --repetition-penalty gives transformers' ids with that penalty (given or
# from generation_config.json); --eos stops at any id of its list, by default at the model directory's
# (generation_config.json, else config.json), with none at none; --chat renders the prompt
# as transformers' apply_chat_template with the generation prompt, and so does --messages
# (a conversation of several turns in a file); a GPT-2
# directory gives the same ids with and without the cache; text is the prompt and its
# continuation (--continuation-only: the new text), escaped on a terminal, raw into a pipe;
# --num-samples N generates N sequences side by side (greedy: transformers' ids on every
# line; sampled: line r is the run with --seed S + r); --prompts continues each record of a
# file as it would be alone;
# bad usage exits 2, a missing model directory 1, and both say why.
set -u
: "${top_builddir:?}" "${top_srcdir:?}"
prog="$top_builddir/nnt-generate"
[ -x "$prog" ] || { echo "FAIL: $prog was not built"; exit 1; }
tmp=$(mktemp -d) || exit 99
trap 'rm -rf "$tmp"' EXIT
export STARPU_SILENT=1
STARPU_HOME=${STARPU_HOME:-$tmp/starpu}
export STARPU_HOME
fail=0
fail() { echo "FAIL: $*"; fail=1; }
gqa="$top_srcdir/tests/fixtures/llama_tiny/gqa"
gpt2="$top_srcdir/tests/fixtures/gpt2_tiny"
# gqa.prompt and gqa.greedy_long
prompt="59 15 1 58 30"
want="24 26 16 8 32 24 26 16 19 32 56 32 56 32 56 32 56 13 31 12"
want="$want 56 56 56 56 56 56 56 56 56 56 56 56 56 56 56 56 56 56 56 56 56 56 56 56 56 56 56 56"

# expect NAME WANT ARGS...: exit status 0 and stdout WANT
expect() {
    name=$1 w=$2; shift 2
    got=$("$prog" "$@" 2> "$tmp/$name.err")
    status=$?
    [ $status -eq 0 ] || { fail "$name: exit status $status"; cat "$tmp/$name.err"; return; }
    [ "$got" = "$w" ] || fail "$name: got '$got', expected '$w'"
}
expect greedy "$want" --load-hf "$gqa" --prompt-ids "$prompt" --max-new-tokens 48 \
    --temperature 0 --print-ids --cpus 2
expect no-cache "$want" --load-hf "$gqa" --prompt-ids "59,15,1,58,30" --max-new-tokens 48 \
    --temperature 0 --print-ids --no-cache --cpus 2
expect eos "24 26 16 8" --load-hf "$gqa" --prompt-ids "$prompt" --max-new-tokens 48 \
    --temperature 0 --eos 8 --print-ids --cpus 2
# --repetition-penalty 1.3: transformers' generate(repetition_penalty=1.3) (gqa.rep_greedy of
# sampling.safetensors, tests/gen_sampling_fixtures.py); taken from generation_config.json
# too (below)
rep_want="24 26 16 8 32 56 46 50 49 24 12 12 12 12 12 12 12 12 12 12"
expect repetition_penalty "$rep_want" --load-hf "$gqa" --prompt-ids "$prompt" \
    --max-new-tokens 20 --temperature 0 --repetition-penalty 1.3 --print-ids --cpus 2
# --no-repeat-ngram-size 2: transformers' generate(no_repeat_ngram_size=2) (gqa.ngram_greedy)
ngram_want="24 26 16 8 32 24 33 42 46 50 22 50 6 17 26 22 28 28 50 42"
expect no_repeat_ngram "$ngram_want" --load-hf "$gqa" --prompt-ids "$prompt" \
    --max-new-tokens 20 --temperature 0 --no-repeat-ngram-size 2 --print-ids --cpus 2
expect eos_list "24 26" --load-hf "$gqa" --prompt-ids "$prompt" --max-new-tokens 48 \
    --temperature 0 --eos 40,26 --print-ids --cpus 2
# --eos auto (the default): generation_config.json's eos_token_id list (an id beyond the
# vocabulary of 61 left out, as transformers never meets it), else config.json's
mkdir "$tmp/gqa_eos"
cp "$gqa/model.safetensors" "$tmp/gqa_eos/"
sed 's/"eos_token_id": null/"eos_token_id": 16/' "$gqa/config.json" > "$tmp/gqa_eos/config.json"
expect eos_config "24 26 16" --load-hf "$tmp/gqa_eos" --prompt-ids "$prompt" \
    --max-new-tokens 48 --temperature 0 --print-ids --cpus 2
echo '{"eos_token_id": [99, 8], "bos_token_id": 1}' > "$tmp/gqa_eos/generation_config.json"
expect eos_generation_config "24 26 16 8" --load-hf "$tmp/gqa_eos" --prompt-ids "$prompt" \
    --max-new-tokens 48 --temperature 0 --print-ids --cpus 2
expect eos_none "$want" --load-hf "$tmp/gqa_eos" --prompt-ids "$prompt" --max-new-tokens 48 \
    --temperature 0 --eos none --print-ids --cpus 2
# --generation-config auto (the default): the directory's generation_config.json sampling for
# what the command line does not give, as vLLM takes it: top_k 1 samples the greedy ids at
# the default temperature 1; --top-k 0 given overrides it (the run without the file, seed
# 4), and so does --generation-config none; temperature 0 from the file is greedy too; the
# line on stderr names what it took; typical_p is named as not applied; a top_p above 1 is
# refused naming the file
mkdir "$tmp/gqa_gc"
cp "$gqa/model.safetensors" "$gqa/config.json" "$tmp/gqa_gc/"
sampled=$("$prog" --load-hf "$gqa" --prompt-ids "$prompt" --max-new-tokens 48 --seed 4 \
    --top-k 0 --print-ids --cpus 2 2> /dev/null)
[ -n "$sampled" ] && [ "$sampled" != "$want" ] || fail "gqa sampled: '$sampled' (the greedy ids?)"
echo '{"top_k": 1, "typical_p": 0.9, "encoder_repetition_penalty": 1.2}' \
    > "$tmp/gqa_gc/generation_config.json"
expect gc_top_k "$want" --load-hf "$tmp/gqa_gc" --prompt-ids "$prompt" --max-new-tokens 48 \
    --seed 4 --print-ids --cpus 2
grep -q "^nnt-generate: sampling with top_k 1, typical_p 0.9 from $tmp/gqa_gc/generation_config.json" "$tmp/gc_top_k.err" &&
    grep -q "encoder_repetition_penalty 1.2 is not applied" "$tmp/gc_top_k.err" ||
    { fail "gc_top_k: no line naming the sampling taken, or the one not applied"; cat "$tmp/gc_top_k.err"; }
expect gc_given "$sampled" --load-hf "$tmp/gqa_gc" --prompt-ids "$prompt" --max-new-tokens 48 \
    --seed 4 --top-k 0 --typical-p 1 --print-ids --cpus 2
grep -q "sampling with" "$tmp/gc_given.err" && fail "gc_given: the file's top_k or typical_p said taken"
echo '{"top_k": 0, "temperature": 1.0}' > "$tmp/gqa_gc/generation_config.json"
expect gc_all_tokens "$sampled" --load-hf "$tmp/gqa_gc" --prompt-ids "$prompt" --max-new-tokens 48 \
    --seed 4 --print-ids --cpus 2
echo '{"temperature": 0.0, "top_p": 0.9}' > "$tmp/gqa_gc/generation_config.json"
expect gc_greedy "$want" --load-hf "$tmp/gqa_gc" --prompt-ids "$prompt" --max-new-tokens 48 \
    --seed 4 --top-k 0 --print-ids --cpus 2
echo '{"top_k": 1}' > "$tmp/gqa_gc/generation_config.json"
expect gc_off "$sampled" --load-hf "$tmp/gqa_gc" --prompt-ids "$prompt" --max-new-tokens 48 \
    --seed 4 --top-k 0 --generation-config none --print-ids --cpus 2
# gc_taken NAME WANT CONFIG SAID: greedy from the model with generation_config.json CONFIG
# gives WANT (20 ids), and standard error says "sampling with SAID from"
gc_taken() {
    echo "$3" > "$tmp/gqa_gc/generation_config.json"
    expect "$1" "$2" --load-hf "$tmp/gqa_gc" --prompt-ids "$prompt" --max-new-tokens 20 \
        --print-ids --cpus 2
    grep -q "sampling with $4 from" "$tmp/$1.err" ||
        { fail "$1: no line naming them"; cat "$tmp/$1.err"; }
}
gc_taken gc_repetition_penalty "$rep_want" \
    '{"temperature": 0.0, "repetition_penalty": 1.3, "min_p": 0.5}' \
    "temperature 0, min_p 0.5, repetition_penalty 1.3"
gc_taken gc_no_repeat_ngram "$ngram_want" \
    '{"temperature": 0.0, "no_repeat_ngram_size": 2, "eta_cutoff": 0.001}' \
    "temperature 0, eta_cutoff 0.001, no_repeat_ngram_size 2"
echo '{"top_p": 1.5}' > "$tmp/gqa_gc/generation_config.json"
"$prog" --load-hf "$tmp/gqa_gc" --prompt-ids "$prompt" --max-new-tokens 4 --cpus 2 \
    > /dev/null 2> "$tmp/gc_bad.err"
st=$?
[ $st -ne 0 ] && grep -q "generation_config.json: top_p 1.5 is out of range" "$tmp/gc_bad.err" ||
    { fail "gc_bad: status $st"; cat "$tmp/gc_bad.err"; }
# --chat: --system and --prompt as a conversation, rendered with the tokenizer_config.json's
# chat template (Gemma 3's) and its generation prompt: the new ids of transformers'
# apply_chat_template ids (tests/fixtures/sft/gemma3.prompts, line 4: that conversation, its
# system message untrimmed before the first user message) given as --prompt-ids; the answer
# alone is printed
sft="$top_srcdir/tests/fixtures/sft"
mkdir "$tmp/chat"
cp "$sft/model/config.json" "$sft/model/model.safetensors" "$sft/gemma3/tokenizer.json" \
    "$sft/gemma3/tokenizer_config.json" "$tmp/chat/"
cids=$(sed -n 4p "$sft/gemma3.prompts" | sed 's/^ids //')
csys=$(printf '  Answer in French.\nX') csys=${csys%X}
cwant=$("$prog" --load-hf "$tmp/chat" --prompt-ids "$cids" --max-new-tokens 12 \
    --temperature 0 --print-ids --cpus 2 2> "$tmp/chat.err") ||
    { fail "chat reference run"; cat "$tmp/chat.err"; }
expect chat "$cwant" --load-hf "$tmp/chat" --chat --system "$csys" \
    --prompt " Say hello. " --max-new-tokens 12 --temperature 0 --print-ids --cpus 2
expect chat_named "$cwant" --load-hf "$tmp/chat" --chat --chat-template gemma3 \
    --tokenizer-config "$sft/gemma3/tokenizer_config.json" --system "$csys" \
    --prompt " Say hello. " --max-new-tokens 12 --temperature 0 --print-ids --cpus 2
atext=$("$prog" --load-hf "$tmp/chat" --chat --system "Be brief." --prompt "Name a fruit." \
    --max-new-tokens 12 --temperature 0 --cpus 2 2> "$tmp/chat.err" | cat)
case "$atext" in
    *start_of_turn*|*Name*) fail "--chat printed the prompt: '$atext'";;
esac
[ -n "$atext" ] || fail "--chat printed nothing"
# --messages: a conversation of several turns from a file (gemma3_prompts.jsonl line 2: a
# system message, a user's, an assistant's, a user's), and as a bare list on standard input
# (gemma3_parts_prompts.jsonl line 2: contents as lists of text parts), give the new ids of
# transformers' apply_chat_template ids (gemma3.prompts lines 5 and 7) as --prompt-ids
for m in "5 gemma3_prompts.jsonl 2" "7 gemma3_parts_prompts.jsonl 2"; do
    set -- $m
    mids=$(sed -n "$1p" "$sft/gemma3.prompts" | sed 's/^ids //')
    sed -n "$3p" "$sft/$2" > "$tmp/conv.json"
    mwant=$("$prog" --load-hf "$tmp/chat" --prompt-ids "$mids" --max-new-tokens 8 \
        --temperature 0 --print-ids --cpus 2 2> "$tmp/chat.err") ||
        { fail "messages reference run $1"; cat "$tmp/chat.err"; }
    expect "messages_$1" "$mwant" --load-hf "$tmp/chat" --messages "$tmp/conv.json" \
        --max-new-tokens 8 --temperature 0 --print-ids --cpus 2
    sed 's/^{"messages": //; s/}$//' "$tmp/conv.json" > "$tmp/list.json"
    got=$("$prog" --load-hf "$tmp/chat" --messages - --max-new-tokens 8 --temperature 0 \
        --print-ids --cpus 2 < "$tmp/list.json" 2> "$tmp/chat.err")
    [ "$got" = "$mwant" ] || { fail "messages_list_$1: got '$got', expected '$mwant'"
                                cat "$tmp/chat.err"; }
done
# --prompts: a file of prompt records, each continued as it would be alone and written back
# with "generated" (or "generated_ids") and "finish_reason": TRL's prompt-only records of
# messages (other members kept: "answer") and of text (its continuation, greedy, the same
# alone as among the others), a "messages" record, a bare list, a blank line; sampled with
# --num-samples 2, each record's samples those of --chat / --messages with the same seed
cat > "$tmp/prompts.jsonl" <<'JSONL'
{"prompt": "The capital of France is", "completion": " Paris.", "id": 7}
{"prompt": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Name a fruit."}], "answer": "an \"apple\""}

{"messages": [{"role": "user", "content": "Say hello."}]}
[{"role": "user", "content": "Hello?"}]
JSONL
printf '%s\n' '{"messages": [{"role": "user", "content": "Say hello."}]}' > "$tmp/m3.json"
printf '%s\n' '[{"role": "user", "content": "Hello?"}]' > "$tmp/m4.json"
head -n 1 "$tmp/prompts.jsonl" > "$tmp/p1.jsonl"
ids_of() {   # the "generated_ids" lists of a --prompts output: a line each, ids spaced
    sed 's/.*"generated_ids": \[\(.*\)\], "finish_reason".*/\1/; s/\], \[/\n/g; s/[][,]//g'
}
pargs="--load-hf $tmp/chat --max-new-tokens 10 --cpus 2 --print-ids"
# shellcheck disable=SC2086 # the options are words
"$prog" $pargs --prompts "$tmp/prompts.jsonl" --temperature 0 > "$tmp/prompts.out" \
    2> "$tmp/prompts.err" || { fail "--prompts: exit status $?"; cat "$tmp/prompts.err"; }
[ "$(wc -l < "$tmp/prompts.out")" -eq 4 ] || fail "--prompts: not 4 lines: $(cat "$tmp/prompts.out")"
grep -q '^nnt-generate: 4 prompts continued (4 side by side): [0-9]* new tokens in ' "$tmp/prompts.err" ||
    { fail "--prompts: no summary"; cat "$tmp/prompts.err"; }
# --batch 3: two batches (the prompts by length within them), the lines in the file's order
# shellcheck disable=SC2086 # the options are words
"$prog" $pargs --prompts "$tmp/prompts.jsonl" --temperature 0 --batch 3 > "$tmp/prompts3.out" \
    2> "$tmp/prompts3.err" || { fail "--prompts --batch 3: exit status $?"; cat "$tmp/prompts3.err"; }
cmp -s "$tmp/prompts.out" "$tmp/prompts3.out" ||
    { fail "--prompts --batch 3: not --batch 8's lines"; cat "$tmp/prompts3.out"; }
grep -q '^nnt-generate: 4 prompts continued (3 side by side): ' "$tmp/prompts3.err" ||
    { fail "--prompts --batch 3: summary"; cat "$tmp/prompts3.err"; }
# a batch that does not fit in memory is halved until one does, the lines those of a batch
# that fits: 16 records of 40 new tokens under a RAM budget of 1 MiB (STARPU_LIMIT_CPU_MEM)
# fit 4 at a time, not 8 or 16 (measured 2026-12-04)
for i in $(seq 16); do
    printf '{"prompt": "Record %s says hello to the world, and then"}\n' "$i"
done > "$tmp/p16.jsonl"
# shellcheck disable=SC2086 # the options are words
"$prog" $pargs --prompts "$tmp/p16.jsonl" --temperature 0.8 --seed 5 --num-samples 2 \
    --max-new-tokens 40 --batch 4 > "$tmp/p16.out" 2> "$tmp/p16.err" ||
    { fail "--prompts 16 records: exit status $?"; cat "$tmp/p16.err"; }
# shellcheck disable=SC2086 # the options are words
STARPU_LIMIT_CPU_MEM=1 "$prog" $pargs --prompts "$tmp/p16.jsonl" --temperature 0.8 --seed 5 \
    --num-samples 2 --max-new-tokens 40 --batch 16 > "$tmp/p16m.out" 2> "$tmp/p16m.err" ||
    { fail "--prompts under 1 MiB: exit status $?"; cat "$tmp/p16m.err"; }
halved='^nnt-generate: 16 records side by side do not fit in memory: 8 at a time from here on$'
summary='^nnt-generate: 16 prompts continued ([0-9]* side by side, each with its samples, fewer '
summary="${summary}than --batch for memory): "
grep -q "$halved" "$tmp/p16m.err" && grep -q "$summary" "$tmp/p16m.err" ||
    { fail "--prompts under 1 MiB: not halved"; cat "$tmp/p16m.err"; }
cmp -s "$tmp/p16.out" "$tmp/p16m.out" && [ "$(wc -l < "$tmp/p16m.out")" -eq 16 ] ||
    { fail "--prompts under 1 MiB: not --batch 4's lines"; cat "$tmp/p16m.out"; }
# samples_halved NAME WHAT ARGS: nnt-generate ARGS (32 samples of 100 new tokens) without a
# budget and under 1 MiB, where 32 do not fit side by side and 16 do: halved, said, the same
# output
samples_halved() {
    name=$1 what=$2; shift 2
    "$prog" "$@" > "$tmp/$name.out" 2> "$tmp/$name.err" ||
        { fail "$what: exit status $?"; cat "$tmp/$name.err"; }
    STARPU_LIMIT_CPU_MEM=1 "$prog" "$@" > "$tmp/${name}m.out" 2> "$tmp/${name}m.err" ||
        { fail "$what under 1 MiB: exit status $?"; cat "$tmp/${name}m.err"; }
    grep -q '^nnt-generate: 32 samples side by side do not fit in memory: 16 at a time from here on$' \
        "$tmp/${name}m.err" || { fail "$what under 1 MiB: not halved"; cat "$tmp/${name}m.err"; }
    cmp -s "$tmp/$name.out" "$tmp/${name}m.out" ||
        { fail "$what under 1 MiB: not the samples side by side"; cat "$tmp/${name}m.out"; }
}
# so are --num-samples' samples of one prompt
sargs="--load-hf $tmp/chat --max-new-tokens 100 --cpus 2 --print-ids"
sargs="$sargs --temperature 0.8 --seed 11 --num-samples 32"
# shellcheck disable=SC2086 # the options are words
samples_halved n32 "--num-samples 32" $sargs --prompt-ids 5,6,7,8,9
[ "$(sort -u "$tmp/n32m.out" | wc -l)" -gt 16 ] || fail "--num-samples 32: samples alike"
# and the samples of one --prompts record
printf '{"prompt": "Once upon a time"}\n' > "$tmp/one.jsonl"
# shellcheck disable=SC2086 # the options are words
samples_halved r32 "--prompts one record, 32 samples" $sargs --prompts "$tmp/one.jsonl"
# shellcheck disable=SC2086 # the options are words
p1=$("$prog" $pargs --prompts "$tmp/p1.jsonl" --temperature 0 2> "$tmp/p1.err" | ids_of)
w2=$("$prog" $pargs --chat --system "Be brief." --prompt "Name a fruit." --temperature 0 2> /dev/null)
w3=$("$prog" $pargs --messages "$tmp/m3.json" --temperature 0 2> /dev/null)
w4=$("$prog" $pargs --messages "$tmp/m4.json" --temperature 0 2> /dev/null)
got=$(ids_of < "$tmp/prompts.out")
[ -n "$p1" ] && [ -n "$w2" ] && [ "$got" = "$(printf '%s\n%s\n%s\n%s' "$p1" "$w2" "$w3" "$w4")" ] ||
    fail "--prompts: greedy ids '$got', alone '$p1' '$w2' '$w3' '$w4'"
grep -q '^{"prompt": "The capital of France is", "completion": " Paris.", "id": 7, "generated_ids": \[' \
    "$tmp/prompts.out" && grep -q '"answer": "an \\"apple\\"", "generated_ids": \[' "$tmp/prompts.out" &&
    grep -q '^{"messages": \[{"role": "user", "content": "Hello?"}\], "generated_ids"' "$tmp/prompts.out" &&
    [ "$(grep -c '"finish_reason": "length"}$' "$tmp/prompts.out")" -eq 4 ] ||
    { fail "--prompts: the records are not written back with their continuations"; cat "$tmp/prompts.out"; }
# shellcheck disable=SC2086 # the options are words
"$prog" $pargs --prompts "$tmp/prompts.jsonl" --temperature 0.9 --seed 5 --num-samples 2 \
    > "$tmp/samples.out" 2> "$tmp/samples.err" || { fail "--prompts --num-samples 2: exit status $?"; cat "$tmp/samples.err"; }
got=$(sed -n 2,4p "$tmp/samples.out" | ids_of)
w2=$("$prog" $pargs --chat --system "Be brief." --prompt "Name a fruit." --temperature 0.9 --seed 5 \
    --num-samples 2 2> /dev/null)
w3=$("$prog" $pargs --messages "$tmp/m3.json" --temperature 0.9 --seed 5 --num-samples 2 2> /dev/null)
w4=$("$prog" $pargs --messages "$tmp/m4.json" --temperature 0.9 --seed 5 --num-samples 2 2> /dev/null)
[ -n "$w2" ] && [ "$got" = "$(printf '%s\n%s\n%s' "$w2" "$w3" "$w4")" ] ||
    fail "--prompts --num-samples 2: ids '$got', alone '$w2' '$w3' '$w4'"
grep -q '"finish_reason": \["length", "length"\]}$' "$tmp/samples.out" ||
    { fail "--prompts --num-samples 2: finish_reason"; cat "$tmp/samples.out"; }
# text: the continuation decoded (valid JSON, the eos that stops it left out: "stop")
eos1=$(echo "$w4" | head -n 1 | cut -d' ' -f3)
"$prog" --load-hf "$tmp/chat" --prompts "$tmp/prompts.jsonl" --max-new-tokens 10 --cpus 2 \
    --temperature 0.9 --seed 5 --eos "$eos1" > "$tmp/text.out" 2> "$tmp/text.err" ||
    { fail "--prompts, text: exit status $?"; cat "$tmp/text.err"; }
grep -q '"generated": ".*", "finish_reason": "stop"}$' "$tmp/text.out" ||
    { fail "--prompts: no record stopped at --eos $eos1"; cat "$tmp/text.out"; }
if command -v python3 > /dev/null; then
    python3 -c 'import json, sys
for line in open(sys.argv[1]):
    r = json.loads(line)
    assert isinstance(r["generated"], str) and r["finish_reason"] in ("stop", "length"), r' \
        "$tmp/text.out" || fail "--prompts: not JSON lines"
fi
# --chat-date: gpt-oss's template dated as the fixtures were made (2025-02-03; its default is
# today): a developer message and a user's (gptoss_prompts.jsonl line 1) give the new ids of
# transformers' apply_chat_template ids (gpt_oss.prompts, after the chat_prompts.jsonl ones)
mkdir "$tmp/oss"
cp "$sft/model/config.json" "$sft/model/model.safetensors" "$sft/gpt_oss/tokenizer.json" \
    "$sft/gpt_oss/tokenizer_config.json" "$tmp/oss/"
k=$(( $(wc -l < "$sft/chat_prompts.jsonl") + 1 ))
oids=$(sed -n "${k}p" "$sft/gpt_oss.prompts" | sed 's/^ids //')
sed -n 1p "$sft/gptoss_prompts.jsonl" > "$tmp/oss_conv.json"
owant=$("$prog" --load-hf "$tmp/oss" --prompt-ids "$oids" --max-new-tokens 8 --temperature 0 \
    --print-ids --cpus 2 2> "$tmp/oss.err") || { fail "gpt-oss reference run"; cat "$tmp/oss.err"; }
expect chat_date "$owant" --load-hf "$tmp/oss" --messages "$tmp/oss_conv.json" \
    --chat-date 2025-02-03 --max-new-tokens 8 --temperature 0 --print-ids --cpus 2
# --messages with tools: Qwen2.5's template renders the record's "tools" and its tool call and
# response (tool_prompts.jsonl line 1) as transformers' apply_chat_template(..., tools=...)
# does (qwen2_5.tool_prompts line 1)
mkdir "$tmp/qtool"
cp "$sft/model/config.json" "$sft/model/model.safetensors" "$sft/qwen2_5/tokenizer.json" \
    "$sft/qwen2_5/tokenizer_config.json" "$tmp/qtool/"
tids=$(sed -n 1p "$sft/qwen2_5.tool_prompts" | sed 's/^ids //')
sed -n 1p "$sft/tool_prompts.jsonl" > "$tmp/tool_conv.json"
twant=$("$prog" --load-hf "$tmp/qtool" --prompt-ids "$tids" --max-new-tokens 4 --temperature 0 \
    --print-ids --cpus 2 2> "$tmp/qtool.err") || { fail "tools reference run"; cat "$tmp/qtool.err"; }
expect messages_tools "$twant" --load-hf "$tmp/qtool" --messages "$tmp/tool_conv.json" \
    --max-new-tokens 4 --temperature 0 --print-ids --cpus 2
# a checkpoint trained from that directory: --chat takes the template beside the tokenizer.json
# its run recorded, and --eos auto the eos ids of the directory it started from
"$top_builddir/nnt-train" --load-hf "$tmp/chat" --data "$top_srcdir/README" --steps 1 \
    --batch 2 --seq 16 --sample 0 --cpus 2 --out "$tmp/chatc" > "$tmp/chatc.log" 2>&1 ||
    { fail "nnt-train --load-hf (chat)"; cat "$tmp/chatc.log"; }
kwant=$("$prog" --checkpoint "$tmp/chatc" --prompt-ids "$cids" --max-new-tokens 6 \
    --temperature 0 --print-ids --cpus 2 2> "$tmp/chat.err") ||
    { fail "checkpoint reference run"; cat "$tmp/chat.err"; }
expect chat_checkpoint "$kwant" --checkpoint "$tmp/chatc" --chat --system "$csys" \
    --prompt " Say hello. " --max-new-tokens 6 --temperature 0 --print-ids --cpus 2
first=${kwant%% *}
echo "{\"eos_token_id\": [$first]}" > "$tmp/chat/generation_config.json"
expect eos_checkpoint "$first" --checkpoint "$tmp/chatc" --prompt-ids "$cids" \
    --max-new-tokens 6 --temperature 0 --print-ids --cpus 2
rm "$tmp/chat/generation_config.json"
# GPT-2: 40 greedy tokens equal transformers' (tests/fixtures/gpt2_gen, gen_gpt2_generate.py)
# NF4 (tests/fixtures/nf4/greedy.txt, tests/gen_nf4_fixtures.py): transformers' greedy ids
# of the tiny Llama as bitsandbytes' 4-bit model, from --quantize nf4 on its fp32 directory
# and from bitsandbytes' checkpoint (read as floats, and into NF4 without the cache); the
# fp32 base's without --quantize
nf4="$top_srcdir/tests/fixtures/nf4"
nf4_prompt=$(sed -n 's/^prompt //p' "$nf4/greedy.txt")
nf4_want=$(sed -n 's/^nf4 //p' "$nf4/greedy.txt")
fp32_want=$(sed -n 's/^fp32 //p' "$nf4/greedy.txt")
nf4_args="--prompt-ids $nf4_prompt --max-new-tokens 24 --temperature 0 --print-ids --cpus 2"
expect nf4_quantize "$nf4_want" --load-hf "$nf4/llama" --quantize nf4 $nf4_args
expect nf4_bnb "$nf4_want" --load-hf "$nf4/llama_bnb" $nf4_args
expect nf4_bnb_quantize "$nf4_want" --load-hf "$nf4/llama_bnb" --quantize nf4 --no-cache \
    $nf4_args
expect nf4_fp32 "$fp32_want" --load-hf "$nf4/llama" $nf4_args
[ "$nf4_want" != "$fp32_want" ] || fail "nf4: the fixture's NF4 and fp32 ids do not differ"

gen="$top_srcdir/tests/fixtures/gpt2_gen"
gprompt=$(sed -n 1p "$gen/greedy.txt") gwant=$(sed -n 2p "$gen/greedy.txt")
expect gpt2_greedy "$gwant" --load-hf "$gen" --prompt-ids "$gprompt" --max-new-tokens 40 \
    --temperature 0 --print-ids --cpus 2
expect gpt2_greedy_nocache "$gwant" --load-hf "$gen" --prompt-ids "$gprompt" \
    --max-new-tokens 40 --temperature 0 --print-ids --no-cache --cpus 2
# --top-p near 0: the nucleus the most likely token alone, so that sampling at temperature 1
# over every token gives the greedy ids (the option reaches the sampler)
expect gpt2_top_p "$gwant" --load-hf "$gen" --prompt-ids "$gprompt" --max-new-tokens 40 \
    --temperature 1 --top-k 0 --top-p 1e-6 --seed 9 --print-ids --cpus 2
# --precision bf16 (the weights read from bf16 copies; one-row products by nnt's bf16 gemv
# with the cache, whole-window products without): bf16 moves the logits by about 1e-3, and
# on these two fixtures the greedy ids stay transformers' (fp32) on every kernel path tried
# (AMD Zen 4: oneDNN's bf16 and AVX2 products, BLIS, the portable kernels).
for c in "" --no-cache; do
    expect "gqa_bf16$c" "$want" --load-hf "$gqa" --prompt-ids "$prompt" --max-new-tokens 48 \
        --temperature 0 --print-ids --cpus 2 --precision bf16 $c
    expect "gpt2_bf16$c" "$gwant" --load-hf "$gen" --prompt-ids "$gprompt" \
        --max-new-tokens 40 --temperature 0 --print-ids --cpus 2 --precision bf16 $c
done
a=$("$prog" --load-hf "$gpt2" --prompt-ids "11 42 7 3 60" --max-new-tokens 12 --seed 3 \
    --top-k 5 --print-ids --cpus 2 2> "$tmp/gpt2.err") || fail "gpt2: exit status $?"
expect gpt2-no-cache "$a" --load-hf "$gpt2" --prompt-ids "11 42 7 3 60" --max-new-tokens 12 \
    --seed 3 --top-k 5 --print-ids --no-cache --cpus 2
[ "$(echo "$a" | wc -w)" -eq 12 ] || fail "gpt2: '$a' is not 12 ids"
# past the context (gqa: max_position_embeddings 64) a note says the window slides; not before
long=$("$prog" --load-hf "$gqa" --prompt-ids "$prompt" --max-new-tokens 70 --temperature 0 \
    --print-ids --cpus 2 2> "$tmp/long.err") || fail "long: exit status $?"
[ "$(echo "$long" | wc -w)" -eq 70 ] || fail "long: '$long' is not 70 ids"
grep -q "exceed the model's context (64).*sliding" "$tmp/long.err" ||
    { fail "long: no note that 75 tokens exceed the context of 64"; cat "$tmp/long.err"; }
grep -q 'sliding' "$tmp/greedy.err" && fail "greedy: a sliding-window note within the context"

# A Hugging Face tokenizer.json: a model of its vocabulary (1201) saved by nnt-train with
# --save-hf (which copies the tokenizer into the directory); --prompt TEXT is encoded with the
# directory's tokenizer.json by itself, or with --tokenizer-json: the same greedy ids.
tokjson="$top_srcdir/tests/fixtures/hftok/llama3.json"
if "$top_builddir/nnt-train" --model llama-tiny --layers 1 --vocab 1201 --tokenizer json \
        --tokenizer-json "$tokjson" --data "$top_srcdir/README" --steps 1 --batch 2 --seq 16 \
        --sample 0 --no-save --out "$tmp/tj" --save-hf "$tmp/tj/hf" > "$tmp/tj.log" 2>&1; then
    a=$("$prog" --load-hf "$tmp/tj/hf" --prompt "The tiled tensors" --max-new-tokens 6 \
        --temperature 0 --print-ids --cpus 2 2> "$tmp/tj1.err") || fail "tokenizer.json: exit status $?"
    b=$("$prog" --load-hf "$tmp/tj/hf" --tokenizer-json "$tokjson" --prompt "The tiled tensors" \
        --max-new-tokens 6 --temperature 0 --print-ids --cpus 2 2> "$tmp/tj2.err") ||
        fail "--tokenizer-json: exit status $?"
    [ "$(echo "$a" | wc -w)" -eq 6 ] && [ "$a" = "$b" ] ||
        fail "tokenizer.json: '$a' and '$b' (want 6 equal ids)"
    # the prompt from a file, and from standard input (--prompt-file -): the same ids
    printf 'The tiled tensors' > "$tmp/prompt.txt"
    c=$("$prog" --load-hf "$tmp/tj/hf" --prompt-file "$tmp/prompt.txt" --max-new-tokens 6 \
        --temperature 0 --print-ids --cpus 2 2> "$tmp/tj4.err") || fail "--prompt-file: exit status $?"
    d=$("$prog" --load-hf "$tmp/tj/hf" --prompt-file - --max-new-tokens 6 --temperature 0 \
        --print-ids --cpus 2 < "$tmp/prompt.txt" 2> "$tmp/tj5.err") || fail "--prompt-file -: exit status $?"
    [ "$c" = "$a" ] && [ "$d" = "$a" ] || fail "--prompt-file: '$c', stdin: '$d', --prompt: '$a'"
    text=$("$prog" --load-hf "$tmp/tj/hf" --prompt "The tiled tensors" --max-new-tokens 6 \
        --temperature 0 --cpus 2 2> "$tmp/tj3.err") || fail "tokenizer.json text: exit status $?"
    [ -n "$text" ] || fail "tokenizer.json: no text printed"
else
    fail "nnt-train could not make the tokenizer.json model:"; tail -n 5 "$tmp/tj.log"
fi

# An nnt-train checkpoint (--checkpoint FILE or its --out DIR): the same sampled ids as the
# --save-hf export of the same weights, for a Llama and a GPT-2 model; its tokenizer (bytes,
# or the tokenizer.json it names) is used by itself.
for model in llama-tiny tiny; do
    ck="$tmp/ck-$model"
    if "$top_builddir/nnt-train" --model $model --layers 1 --data "$top_srcdir/README" \
            --steps 3 --batch 2 --seq 16 --sample 0 --out "$ck" --save-hf "$ck/hf" \
            > "$tmp/ck-$model.log" 2>&1; then
        # sampled (seeded): equal ids need equal distributions at every step
        a=$("$prog" --checkpoint "$ck" --prompt "The model" --max-new-tokens 8 --seed 3 \
            --top-k 50 --print-ids --cpus 2 2> "$tmp/ck1.err") ||
            { fail "--checkpoint $model: exit $?"; cat "$tmp/ck1.err"; }
        b=$("$prog" --load-hf "$ck/hf" --prompt-ids "84 104 101 32 109 111 100 101 108" \
            --max-new-tokens 8 --seed 3 --top-k 50 --print-ids --cpus 2 2> "$tmp/ck2.err") ||
            fail "--load-hf $model: exit status $?"
        c=$("$prog" --checkpoint "$ck/checkpoint.safetensors" --prompt "The model" \
            --max-new-tokens 8 --temperature 0 --cpus 2 2> "$tmp/ck3.err") ||
            fail "--checkpoint FILE $model: exit status $?"
        [ "$(echo "$a" | wc -w)" -eq 8 ] && [ "$a" = "$b" ] ||
            fail "--checkpoint $model: '$a', the HF export '$b' (want 8 equal ids)"
        [ "$(echo "$a" | tr ' ' '\n' | sort -u | wc -l)" -gt 2 ] ||
            fail "--checkpoint $model: '$a' is too uniform to compare"
        [ -n "$c" ] || fail "--checkpoint $model: no text printed"
        d=$("$prog" --load-hf "$ck/hf" --tokenizer bytes --prompt "The model" \
            --max-new-tokens 8 --seed 3 --top-k 50 --print-ids --cpus 2 2> "$tmp/ck4.err")
        [ "$d" = "$b" ] || fail "--tokenizer bytes $model: '$d', with the ids '$b'"
    else
        fail "nnt-train could not make the $model checkpoint:"; tail -n 5 "$tmp/ck-$model.log"
    fi
done
# Text: the prompt and its continuation (as nnt-train's sample), --continuation-only the new
# text alone; invalid UTF-8 and control bytes raw into a pipe, as \xHH on a terminal (the
# byte-tokenizer checkpoint above: any byte is a token).
ck="$tmp/ck-tiny"
full=$("$prog" --checkpoint "$ck" --prompt "The model" --max-new-tokens 8 --temperature 0 \
    --cpus 2 2> "$tmp/full.err") || fail "prompt and continuation: exit status $?"
cont=$("$prog" --checkpoint "$ck" --prompt "The model" --max-new-tokens 8 --temperature 0 \
    --continuation-only --cpus 2 2> "$tmp/cont.err") || fail "--continuation-only: exit status $?"
if [ "$full" = "The model$cont" ] && [ -n "$cont" ]; then
    echo "ok: the prompt and its continuation; --continuation-only the new text alone"
else
    fail "text: '$full', --continuation-only '$cont' (want the prompt before the same text)"
fi
"$prog" --checkpoint "$ck" --prompt-ids "84 255 27 104 226 130" --max-new-tokens 0 --cpus 2 \
    > "$tmp/raw.out" 2> "$tmp/raw.err" || fail "raw bytes: exit status $?"
printf 'T\377\033h\342\202\n' | cmp -s - "$tmp/raw.out" &&
    echo "ok: into a pipe the bytes as they are" ||
    { fail "into a pipe: not the raw bytes:"; od -c "$tmp/raw.out"; }
if command -v script > /dev/null 2>&1 && script -q -e -c true /dev/null > /dev/null 2>&1; then
    script -q -e -c "$prog --checkpoint $ck --prompt-ids '84 255 27 104 226 130' --max-new-tokens 0 --cpus 2" \
        /dev/null > "$tmp/tty.out" 2> /dev/null || fail "on a terminal: exit status $?"
    # (the terminal ends the line with CR LF; a cut-off character shows as its bytes)
    if grep -q -F 'T\xff\x1bh\xe2\x82' "$tmp/tty.out" && ! grep -q "$(printf '\033')" "$tmp/tty.out"; then
        echo "ok: on a terminal invalid UTF-8 and control bytes as \\xHH"
    else
        fail "on a terminal: not escaped:"; od -c "$tmp/tty.out"
    fi
fi

# trained with --tokenizer json on a copy of the file, which the checkpoint names
cp "$tokjson" "$tmp/tok.json"
"$top_builddir/nnt-train" --model llama-tiny --layers 1 --vocab 1201 --tokenizer json \
    --tokenizer-json "$tmp/tok.json" --data "$top_srcdir/README" --steps 1 --batch 2 --seq 16 \
    --sample 0 --out "$tmp/tjc" > "$tmp/tjc.log" 2>&1 || fail "nnt-train --tokenizer json"
a=$("$prog" --checkpoint "$tmp/tjc" --prompt "The tiled tensors" --max-new-tokens 4 \
    --temperature 0 --print-ids --cpus 2 2> "$tmp/tjc1.err") || fail "tokenizer_json: exit $?"
b=$("$prog" --checkpoint "$tmp/tjc" --tokenizer-json "$tokjson" --prompt "The tiled tensors" \
    --max-new-tokens 4 --temperature 0 --print-ids --cpus 2 2> "$tmp/tjc2.err")
[ "$(echo "$a" | wc -w)" -eq 4 ] && [ "$a" = "$b" ] ||
    fail "--checkpoint with tokenizer.json: '$a' and '$b' (want 4 equal ids)"

# --num-samples N: N sequences side by side (nnt_model_generate_n). Greedy: N lines of
# transformers' ids (with the cache, and past the context of 64: the window slides); with an
# eos each line ends at it; sampled: line r is the run alone with --seed S + r; text: each
# sample as one run prints it, under "--- sample R of N ---".
three=$(printf '%s\n%s\n%s' "$want" "$want" "$want")
expect samples_greedy "$three" --load-hf "$gqa" --prompt-ids "$prompt" --max-new-tokens 48 \
    --temperature 0 --print-ids --num-samples 3 --cpus 2
expect samples_eos "$(printf '24 26 16 8\n24 26 16 8')" --load-hf "$gqa" --prompt-ids "$prompt" \
    --max-new-tokens 48 --temperature 0 --eos 8 --print-ids --num-samples 2 --cpus 2
s_args="--load-hf $gqa --prompt-ids 59,15,1,58,30 --max-new-tokens 70 --top-k 0 --print-ids --cpus 2"
sw=""
for r in 0 1 2; do
    line=$("$prog" $s_args --seed $((7 + r)) 2> "$tmp/sample$r.err") || fail "sample $r: exit $?"
    sw="$sw${sw:+
}$line"
done
expect samples_seeds "$sw" $s_args --seed 7 --num-samples 3
[ "$(echo "$sw" | sort -u | wc -l)" -eq 3 ] || fail "samples_seeds: the runs are not 3 different"
t1=$("$prog" --checkpoint "$tmp/ck-tiny" --prompt "The model" --max-new-tokens 8 --seed 3 \
    --cpus 2 2> "$tmp/t1.err") || fail "text sample 1: exit $?"
t2=$("$prog" --checkpoint "$tmp/ck-tiny" --prompt "The model" --max-new-tokens 8 --seed 4 \
    --cpus 2 2> "$tmp/t2.err") || fail "text sample 2: exit $?"
expect samples_text "$(printf -- '--- sample 1 of 2 ---\n%s\n--- sample 2 of 2 ---\n%s' \
    "$t1" "$t2")" --checkpoint "$tmp/ck-tiny" --prompt "The model" --max-new-tokens 8 --seed 3 \
    --num-samples 2 --cpus 2

# usage errors: status 2 and a message; a missing directory: status 1 naming it
bad() {
    want_status=$1 pattern=$2; shift 2
    "$prog" "$@" > "$tmp/bad.out" 2> "$tmp/bad.err"
    status=$?
    [ $status -eq "$want_status" ] || fail "$*: exit status $status, expected $want_status"
    grep -q -- "$pattern" "$tmp/bad.err" || { fail "$*: no '$pattern' in:"; cat "$tmp/bad.err"; }
    [ -s "$tmp/bad.out" ] && fail "$*: wrote to stdout"
}
bad 2 "give one of --load-hf" --prompt-ids 1
bad 2 "give one of --prompt, --prompt-file, --prompt-ids, --messages, --prompts and --classify" --load-hf "$gqa"
bad 2 "give one of --prompt, --prompt-file, --prompt-ids, --messages, --prompts and --classify" --load-hf "$gqa" \
    --prompt x --prompt-file "$tmp/prompt.txt"
bad 2 "give one of --prompt, --prompt-file, --prompt-ids, --messages, --prompts and --classify" --load-hf "$gqa" \
    --prompt x --messages "$tmp/conv.json"
bad 2 "give one of --prompt, --prompt-file, --prompt-ids, --messages, --prompts and --classify" --load-hf "$gqa" \
    --prompt x --classify "$tmp/prompt.txt"
bad 2 "--classify takes texts, not --chat" --load-hf "$gqa" --classify "$tmp/prompt.txt" --chat
bad 2 "--messages: the system message goes in the file's messages" --load-hf "$tmp/chat" \
    --messages "$tmp/conv.json" --system y
bad 2 "--messages $tmp/no-conv.json: No such file" --load-hf "$tmp/chat" \
    --messages "$tmp/no-conv.json"
# a truncated conversation: where it ends (its own offsets); a last message not a user's
head -c 40 "$tmp/conv.json" > "$tmp/cut.json"
bad 1 "--messages (nnt_sft_encode_prompt): .* at byte 40" --load-hf "$tmp/chat" \
    --messages "$tmp/cut.json"
echo '[{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Yes"}]' \
    > "$tmp/ends.json"
bad 1 "a prompt's last message is a user's" --load-hf "$tmp/chat" --messages "$tmp/ends.json"
bad 2 "$tmp/no-prompt.txt" --load-hf "$gqa" --prompt-file "$tmp/no-prompt.txt"
bad 2 "--prompt needs a tokenizer" --load-hf "$gqa" --prompt "hello"
# a directory without tokenizer files (nnt-train's byte-level --save-hf): bytes is a choice
grep -q -- "--tokenizer bytes" "$tmp/bad.err" || fail "no tokenizer: --tokenizer bytes not named"
bad 2 "--tokenizer-json excludes" --load-hf "$gqa" --prompt "hello" --tokenizer-json x \
    --vocab v --merges m
bad 1 "nnt_tokenizer_hf_load" --load-hf "$gqa" --prompt "hello" --tokenizer-json "$tmp/none.json"
bad 2 "--top-p: 0 is out of range (0 to 1, 0 excluded)" --load-hf "$gqa" --prompt-ids 1 --top-p 0
bad 2 "--repetition-penalty: 0 is out of range" --load-hf "$gqa" --prompt-ids 1 \
    --repetition-penalty 0
bad 2 "--min-p: 1.5 is out of range" --load-hf "$gqa" --prompt-ids 1 --min-p 1.5
bad 2 "--num-samples: 0 is out of range" --load-hf "$gqa" --prompt-ids 1 --num-samples 0
# an unknown option given last is unknown, not "needs a value"; --version
bad 2 "unknown option '--max-new'" --load-hf "$gqa" --prompt-ids 1 --max-new
"$prog" --version > "$tmp/version.out" 2>&1 && grep -q '^nnt-generate (nnt) [0-9]' "$tmp/version.out" ||
    fail "--version: $(cat "$tmp/version.out")"
"$prog" --help > "$tmp/help.out" 2>&1 && grep -q 'nnt-generate(1)' "$tmp/help.out" &&
    grep -q -- '--max-new-tokens N  *tokens to generate (default 64)' "$tmp/help.out" ||
    fail "--help: no defaults or man page"
bad 2 "--precision: 'fp16' is not one of fp32, tf32, bf16" --load-hf "$gqa" --prompt-ids 1 \
    --precision fp16
bad 2 "--tokenizer: 'words' is not one of bytes, bpe, json" --load-hf "$gqa" --prompt-ids 1 \
    --tokenizer words
bad 2 "--tokenizer bytes takes no" --load-hf "$gqa" --prompt x --tokenizer bytes \
    --tokenizer-json "$tokjson"
bad 2 "bad id list" --load-hf "$gqa" --prompt-ids "1 x"
bad 2 "unknown option '--frobnicate' (see nnt-generate --help)" --load-hf "$gqa" \
    --prompt-ids 1 --frobnicate 1
# the parser the three programs share (examples/cli.c): a value missing at the end, integers
# out of their range (with it) or not integers, a flag given a value, --name=value
bad 2 "--seed needs a value" --load-hf "$gqa" --prompt-ids 1 --seed
bad 2 "--top-k: 99999999999999999999 is out of range (0 to 2147483647)" --load-hf "$gqa" \
    --prompt-ids 1 --top-k 99999999999999999999
bad 2 "--cpus: -2 is out of range (-1 to 4096)" --load-hf "$gqa" --prompt-ids 1 --cpus -2
bad 2 "bad id list in --eos at \"-2\"" --load-hf "$gqa" --prompt-ids 1 --eos -2
bad 1 "eos_ids.0. 999 must be in .0, 61)" --load-hf "$gqa" --prompt-ids 1 --eos 999
bad 2 "--system, --chat-template, --no-think, --chat-date and --tokenizer-config go with" \
    --load-hf "$gqa" --prompt x --system y
bad 2 "--chat-date and --tokenizer-config go with --chat" --load-hf "$gqa" --prompt x \
    --no-think
bad 2 "--chat-date and --tokenizer-config go with --chat" --load-hf "$gqa" --prompt x \
    --chat-date 2025-02-03
bad 1 "no_thinking: the Gemma 3 template has no switch for thinking" --load-hf "$tmp/chat" \
    --prompt x --chat --no-think
bad 2 "--chat takes the text of --prompt" --load-hf "$gqa" --prompt-ids 1 --chat
bad 2 "--prompts: a record's messages are rendered with the chat template" --load-hf "$tmp/chat" \
    --prompts "$tmp/prompts.jsonl" --chat
printf '%s\n' '{"prompt": "a"}' '{"prompt": 3}' > "$tmp/badp.jsonl"
bad 2 "--prompts $tmp/badp.jsonl line 2: nnt_sft_encode_prompt: \"prompt\" is a string or a list" \
    --load-hf "$tmp/chat" --prompts "$tmp/badp.jsonl"
printf '\n \n' > "$tmp/nop.jsonl"
bad 2 "--prompts $tmp/nop.jsonl: no record" --load-hf "$tmp/chat" --prompts "$tmp/nop.jsonl"

rm "$tmp/chat/tokenizer_config.json"
bad 2 "--chat: no tokenizer_config.json" --load-hf "$tmp/chat" --prompt x --chat
echo '{"eos_token_id": "</s>"}' > "$tmp/gqa_eos/generation_config.json"
bad 1 "eos_token_id" --load-hf "$tmp/gqa_eos" --prompt-ids 1
bad 2 "--max-new-tokens: 'ten' is not an integer" --load-hf "$gqa" --prompt-ids 1 \
    --max-new-tokens ten
bad 2 "--temperature: 'hot' is not a finite number" --load-hf "$gqa" --prompt-ids 1 \
    --temperature hot
bad 2 "--no-cache takes no value" --load-hf "$gqa" --prompt-ids 1 --no-cache=1
bad 2 "unexpected argument 'extra' (see nnt-generate --help)" --load-hf "$gqa" --prompt-ids 1 extra
a=$("$prog" --load-hf="$gqa" --prompt-ids=1,2 --max-new-tokens=3 --temperature=0 --print-ids \
    --cpus 2 2> "$tmp/eq.err") && [ "$(echo "$a" | wc -w)" -eq 3 ] ||
    { fail "--name=value: '$a'"; cat "$tmp/eq.err"; }
bad 1 "$tmp/missing" --load-hf "$tmp/missing" --prompt-ids 1
bad 1 "nnt_model_generate" --load-hf "$gqa" --prompt-ids "1 999"
bad 2 "give one of --load-hf, --load-llmc and --checkpoint" --load-hf "$gqa" --checkpoint x \
    --prompt-ids 1
bad 1 "$tmp/missing.safetensors" --checkpoint "$tmp/missing.safetensors" --prompt-ids 1
bad 1 "not an nnt" --checkpoint "$gqa/model.safetensors" --prompt-ids 1
rm -f "$tmp/tok.json"   # the checkpoint's tokenizer.json is gone
bad 2 "trained with --tokenizer json" --checkpoint "$tmp/tjc" --prompt "hello"
[ $fail -eq 0 ] && echo "ok: nnt-generate"
exit $fail
