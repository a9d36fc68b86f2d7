#!/bin/sh
# SPDX-License-Identifier: MIT
# Smoke test of nnt-tokenize: the bytes tokenizer and the Llama 3 tokenizer.json fixture; the
# token file holds the ids --print gives (16-bit and, with --token-bits 32, 32-bit headers);
# chunked and multi-threaded output equals one chunk on one thread, and a directory equals its
# files in name order; nnt-train reads the file; refusals (exit 1 naming the file, 2 for bad
# usage, no output file left); the progress line on a terminal only. JSON Lines of
# prompt/answer records (--jsonl, tests/fixtures/sft): the rows and loss mask of the file equal
# TRL's ids and labels padded to T, nnt-train's first loss on it is transformers' with labels
# -100 and gradient accumulation; broken lines, an empty completion, an unknown role, an
# unknown chat template, an example longer than T are refused naming the line or template;
# Llama 3.2's template with --chat-date and Gemma 3's give TRL's ids and labels; nnt-train
# --save-hf copies tokenizer.json and the files beside it (tokenizer_config.json,
# generation_config.json, ...).
prog="${top_builddir:?}/nnt-tokenize"
. "${top_srcdir:?}/tests/train_checks.sh"   # tmp, fail, run, run_ok
export STARPU_SILENT=1
STARPU_HOME=${STARPU_HOME:-$tmp/starpu}
export STARPU_HOME
json="$top_srcdir/tests/fixtures/hftok/llama3.json"
# The GPT-2 fixture with one more merge, newline + space (its tiny vocabulary has none across
# line ends): a cut between "\n" and "  indented" would change the ids.
nl=$(printf '\304\212') sp=$(printf '\304\240') # the byte-level symbols of "\n" and " "
sed "s/\"vocab\":{/\"vocab\":{\"$nl$sp\":800,/; s/\"merges\":\[\[/\"merges\":[[\"$nl\",\"$sp\"],[/" \
    "$top_srcdir/tests/fixtures/hftok/gpt2.json" > "$tmp/gpt2nl.json"

# A text with blank lines, indentation, digits, punctuation runs and UTF-8, over several files.
mkdir "$tmp/corpus" "$tmp/corpus/sub"
i=0
while [ $i -lt 200 ]; do
    printf 'line %d: the quick brown fox.\n\n\n  indented %d\tcaf\303\251 \360\237\230\200!!\n' \
        $i $((i * 7919))
    i=$((i + 1))
done > "$tmp/corpus/b.txt"
printf 'second file, no final newline' > "$tmp/corpus/a.txt"
printf 'skipped: a subdirectory\n' > "$tmp/corpus/sub/c.txt"
cat "$tmp/corpus/a.txt" "$tmp/corpus/b.txt" > "$tmp/ab.txt"

# expect_status NAME STATUS PATTERN ARGS...: that exit status and PATTERN in the message
expect_status() {
    name=$1 want=$2 pattern=$3; shift 3
    run "$name" "$@"
    if [ $status -ne "$want" ]; then
        fail "$name: exit status $status, expected $want"
    elif ! grep -q -- "$pattern" "$tmp/$name.err"; then
        fail "$name: the message does not name '$pattern':"
        cat "$tmp/$name.err"
    fi
}
# ids FILE BITS: the tokens of an llm.c token file, one line, space-separated, checking the
# header (magic, version, count) on the way.
ids() {
    set -- $(od -An -v -t u4 -N 12 "$1") "$1" "$2"
    if [ "$5" = 32 ]; then m=20240801 v=7; else m=20240520 v=1; fi
    [ "$1" = $m ] && [ "$2" = $v ] || fail "$4: header magic $1 version $2, expected $m $v"
    n=$(od -An -v -t "u$(($5 / 8))" -j 1024 "$4" | wc -w)
    [ "$3" = "$n" ] || fail "$4: header count $3, but $n tokens follow"
    od -An -v -t "u$(($5 / 8))" -j 1024 "$4" | tr -s ' \n' '  ' | sed 's/^ //; s/ $//'
}

for tok in bytes json gpt2nl; do
    case $tok in
    bytes) t="--tokenizer bytes" ;;
    json) t="--tokenizer-json $json" ;;
    gpt2nl) t="--tokenizer-json $tmp/gpt2nl.json" ;;
    esac
    run_ok $tok-print $t --print --threads 1 --chunk-bytes 1000000000 "$tmp/ab.txt"
    want=$(cat "$tmp/$tok-print.out")
    [ -n "$want" ] || fail "$tok: --print wrote nothing"
    n=$(echo "$want" | wc -w)
    # the bytes tokenizer: the byte values
    if [ $tok = bytes ]; then
        b=$(od -An -v -t u1 "$tmp/ab.txt" | tr -s ' \n' '  ' | sed 's/^ //; s/ $//')
        [ "$want" = "$b" ] || fail "bytes: --print is not the byte values"
    else
        [ "$n" -lt "$(wc -c < "$tmp/ab.txt")" ] || fail "$tok: $n ids: no merges happened"
    fi
    if [ $tok = gpt2nl ]; then
        echo "$want" | tr ' ' '\n' | grep -qx 800 || fail "gpt2nl: the added merge is not used"
    fi
    # chunks of 1 byte (a cut at every line start), 50 and 7 bytes on 1, 2 and 3 threads:
    # the ids of one chunk on one thread
    for c in 1:1 2:50 3:7 2:1; do
        th=${c%:*} cb=${c#*:}
        run_ok $tok-t$th-c$cb $t --print --threads $th --chunk-bytes $cb "$tmp/ab.txt"
        [ "$(cat "$tmp/$tok-t$th-c$cb.out")" = "$want" ] ||
            fail "$tok: --threads $th --chunk-bytes $cb differs from one chunk on one thread"
    done
    # a directory: its files, each encoded on its own, in name order (not ab.txt's ids when
    # a.txt's last word runs into b.txt's first)
    run_ok $tok-files $t --print --threads 1 --chunk-bytes 1000000000 "$tmp/corpus/a.txt" \
        "$tmp/corpus/b.txt"
    wantdir=$(cat "$tmp/$tok-files.out")
    run_ok $tok-dir $t --print --threads 2 --chunk-bytes 100 "$tmp/corpus"
    [ "$(cat "$tmp/$tok-dir.out")" = "$wantdir" ] ||
        fail "$tok: the directory differs from a.txt b.txt"
    if [ $tok != bytes ]; then
        [ "$wantdir" != "$want" ] || fail "$tok: a.txt b.txt encoded as one text"
    fi
    # the token file: 16-bit, and 32-bit when asked
    run_ok $tok-out $t --out "$tmp/$tok.bin" --threads 2 --chunk-bytes 100 "$tmp/ab.txt"
    [ ! -s "$tmp/$tok-out.out" ] || fail "$tok: --out wrote to stdout"
    [ "$(ids "$tmp/$tok.bin" 16)" = "$want" ] || fail "$tok: the 16-bit file's ids differ"
    run_ok $tok-out32 $t --out "$tmp/$tok.32.bin" --token-bits 32 "$tmp/corpus"
    [ "$(ids "$tmp/$tok.32.bin" 32)" = "$wantdir" ] || fail "$tok: the 32-bit file's ids differ"
    n=$(echo "$wantdir" | wc -w)
    [ "$(wc -c < "$tmp/$tok.32.bin")" -eq $((1024 + 4 * n)) ] || fail "$tok: 32-bit file size"
    [ -z "$(ls "$tmp" | grep '\.tmp[.-]')" ] || fail "$tok: a temporary file was left behind"
done

# nnt-train reads both kinds of file (nnt_data: 16- and 32-bit llm.c shards)
train="$top_builddir/nnt-train"
small="--layers 1 --channels 32 --heads 2 --context 16 --batch 1 --seq 8 --sample 0 --no-save"
for f in bytes.bin bytes.32.bin; do
    if "$train" $small --data "$tmp/$f" --steps 1 --out "$tmp/train-$f" > "$tmp/train.out" \
        2>&1; then
        echo "ok: nnt-train --data $f"
    else
        fail "nnt-train --data $f:"
        tail -n 5 "$tmp/train.out"
    fi
done

# refusals: exit 1 naming the file; bad usage exit 2; an old output survives a failed run
cp "$tmp/bytes.bin" "$tmp/keep.bin"
expect_status missing 1 "$tmp/nope.txt" --out "$tmp/keep.bin" "$tmp/ab.txt" "$tmp/nope.txt"
cmp -s "$tmp/bytes.bin" "$tmp/keep.bin" || fail "missing: the old output file was changed"
printf '{"model": {"type": "BPE", "vocab": ' > "$tmp/bad.json"
expect_status badjson 1 "bad.json" --tokenizer-json "$tmp/bad.json" --print "$tmp/ab.txt"
expect_status nobpe 1 "nope.json" --bpe-vocab "$tmp/nope.json" --bpe-merges "$tmp/m.txt" --print \
    "$tmp/ab.txt"
mkdir "$tmp/empty"
expect_status emptydir 1 "has no regular files" --print "$tmp/empty"
expect_status noout 2 "give one of --out FILE and --print" "$tmp/ab.txt"
expect_status noinput 2 "no INPUT" --print
expect_status badtok 2 "--tokenizer: 'sp' is not one of bytes, bpe, json" --tokenizer sp --print \
    "$tmp/ab.txt"
expect_status nojson 2 "needs --tokenizer-json" --tokenizer json --print "$tmp/ab.txt"
expect_status threads 2 "--threads: 0 is out of range (1 to 256)" --threads 0 --print "$tmp/ab.txt"
expect_status bits 2 "--token-bits: '8' is not one of 16, 32" --token-bits 8 --print "$tmp/ab.txt"
expect_status unknown 2 "unknown option '--fast' (see nnt-tokenize --help)" --fast --print \
    "$tmp/ab.txt"
expect_status unknown_last 2 "unknown option '--fast'" --print --fast
# the parser the three programs share (examples/cli.c)
expect_status no_value 2 "--threads needs a value" --print "$tmp/ab.txt" --threads
expect_status chunk_huge 2 "--chunk-bytes: 99999999999999999999 is out of range (1 to 1073741824)" \
    --print --chunk-bytes 99999999999999999999 "$tmp/ab.txt"
expect_status chunk_word 2 "--chunk-bytes: '1k' is not an integer" --print --chunk-bytes 1k \
    "$tmp/ab.txt"
expect_status flag_value 2 "--print takes no value" --print=yes "$tmp/ab.txt"
expect_status short_unknown 2 "unknown option '-x'" -x --print "$tmp/ab.txt"
# options and INPUTs in any order, --name=value, -o, and -- before an INPUT named like an option
cp "$tmp/ab.txt" "$tmp/--dash.txt"
run_ok order "$tmp/ab.txt" --threads=1 -o "$tmp/order.bin" --token-bits=16
cmp -s "$tmp/order.bin" "$tmp/bytes.bin" || fail "order: not the token file of ab.txt"
(cd "$tmp" && "$prog" --print -- --dash.txt > dashdash.out 2> dashdash.err) ||
    fail "--: exit status $?"
[ "$(cat "$tmp/dashdash.out")" = "$(cat "$tmp/bytes-print.out")" ] ||
    fail "--: not the ids of ab.txt"
"$prog" --version > "$tmp/version.out" 2>&1 &&
    grep -q '^nnt-tokenize (nnt) [0-9]' "$tmp/version.out" ||
    fail "--version: $(cat "$tmp/version.out")"
"$prog" --help > "$tmp/help.out" 2>&1 && grep -q 'nnt-tokenize(1)' "$tmp/help.out" &&
    grep -q -- '--threads N  *encoding threads (default 2)' "$tmp/help.out" ||
    fail "--help: no defaults or man page"
# a library failure names its call once (it used to print "nnt_tokenizer_hf_load: ...
# nnt_tokenizer_hf_load: ...")
expect_status nofile 1 "nope.json" --tokenizer-json "$tmp/nope.json" --print "$tmp/ab.txt"
[ "$(grep -o 'nnt_tokenizer_hf_load' "$tmp/nofile.err" | wc -l)" -eq 1 ] ||
    { fail "nofile: the failing call named more than once:"; cat "$tmp/nofile.err"; }
[ -z "$(ls "$tmp" | grep '\.tmp[.-]')" ] || fail "refusals: a temporary file was left behind"

# progress: none into a file; on a terminal, a line with MB/s
run_ok quiet --out "$tmp/q.bin" "$tmp/ab.txt"
[ ! -s "$tmp/quiet.err" ] || fail "stderr not a terminal: progress written anyway"
if command -v script > /dev/null 2>&1 && script -q -e -c true /dev/null > /dev/null 2>&1; then
    script -q -e -c "$prog --out $tmp/pty.bin $tmp/ab.txt" /dev/null > "$tmp/pty.out" 2>&1
    grep -q 'MB/s' "$tmp/pty.out" || { fail "no progress line on a terminal:"; cat "$tmp/pty.out"; }
else
    echo "skip: progress on a terminal: no working script(1)"
fi

# --jsonl: prompt/answer records into rows of T with a loss mask
sft="$top_srcdir/tests/fixtures/sft"
run_ok jsonl --jsonl --seq 64 --tokenizer-json "$sft/llama3/tokenizer.json" \
    --out "$tmp/sft.bin" "$sft/records.jsonl"
# header: magic, version 2 (the extension), count, flags 1 (a mask), rows of 64
set -- $(od -An -v -tu4 -N 20 "$tmp/sft.bin")
[ "$1 $2 $3 $4 $5" = "20240520 2 384 1 64" ] || fail "jsonl: header $*"
od -An -v -tu2 -j 1024 -N 768 "$tmp/sft.bin" | tr -s ' \n' '  ' | sed 's/^ //; s/ $//' \
    > "$tmp/sft.ids"
od -An -v -tu1 -j 1792 "$tmp/sft.bin" | awk '{ for (i = 1; i <= NF; i++)
    for (b = 0; b < 8; b++) printf "%s%d", (n++ ? " " : ""), int($i / 2 ^ b) % 2 }' \
    | cut -d' ' -f1-384 > "$tmp/sft.mask"
# TRL's input_ids and labels, each row padded to 64 with the pad token (1); a row's first
# token never counts
awk '$1 == "ids" { for (i = 2; i <= 65; i++) ids = ids (ids == "" ? "" : " ") (i <= NF ? $i : 1) }
     $1 == "labels" { for (i = 2; i <= 65; i++)
         m = m (m == "" ? "" : " ") (i > 2 && i <= NF && $i != -100 ? 1 : 0) }
     END { print ids > "'"$tmp"'/want.ids"; print m > "'"$tmp"'/want.mask" }' \
    "$sft/llama3.expected"
[ "$(cat "$tmp/sft.ids")" = "$(cat "$tmp/want.ids")" ] || fail "jsonl: the ids differ from TRL's"
[ "$(cat "$tmp/sft.mask")" = "$(cat "$tmp/want.mask")" ] ||
    fail "jsonl: the loss mask differs from TRL's labels"
# the same records after a UTF-8 byte-order mark (as some editors save them): the same file
{ printf '\357\273\277'; cat "$sft/records.jsonl"; } > "$tmp/bom.jsonl"
run_ok jsonl-bom --jsonl --seq 64 --tokenizer-json "$sft/llama3/tokenizer.json" \
    --out "$tmp/sft-bom.bin" "$tmp/bom.jsonl"
cmp -s "$tmp/sft.bin" "$tmp/sft-bom.bin" || fail "jsonl: a byte-order mark changes the file"
# nnt-train's loss on it before any update: transformers' 7.840593 (N = 54 counted targets in
# micro-batches of 26, 9 and 19; the mean of the micro-batches' means would be 8.002753)
if "$train" --load-hf "$sft/model" --data "$tmp/sft.bin" --batch 2 --seq 64 --accum 3 \
    --steps 1 --print-loss --no-save --sample 0 --out "$tmp/train-sft" > "$tmp/sft.out" 2>&1; then
    grep -q '^step 1 loss 7\.84059[0-9]' "$tmp/sft.out" ||
        { fail "jsonl: nnt-train's loss is not transformers' 7.840593:"; cat "$tmp/sft.out"; }
else
    fail "nnt-train on the --jsonl file:"; tail -n 5 "$tmp/sft.out"
fi
# nnt-train --save-hf from a model directory with its tokenizer: tokenizer.json and the files
# transformers reads beside it copied into the saved directory
mkdir -p "$tmp/tokmodel"
cp "$sft/model/config.json" "$sft/model/model.safetensors" "$sft/llama3/tokenizer.json" \
    "$sft/llama3/tokenizer_config.json" "$tmp/tokmodel/"
printf '{"bos_token_id": 0, "eos_token_id": 4}\n' > "$tmp/tokmodel/generation_config.json"
printf '{{ messages }}' > "$tmp/tokmodel/chat_template.jinja"
if "$train" --load-hf "$tmp/tokmodel" --data "$tmp/sft.bin" --batch 2 --seq 64 --steps 1 \
    --no-save --sample 0 --save-hf "$tmp/tokmodel-saved" --out "$tmp/train-tok" \
    > "$tmp/tok-save.out" 2>&1; then
    for f in tokenizer.json tokenizer_config.json generation_config.json chat_template.jinja; do
        cmp -s "$tmp/tokmodel/$f" "$tmp/tokmodel-saved/$f" || fail "--save-hf: $f not copied"
    done
else
    fail "nnt-train --save-hf from a directory with a tokenizer:"; tail -n 5 "$tmp/tok-save.out"
fi
if "$train" --load-hf "$sft/model" --data "$tmp/sft.bin" --batch 2 --seq 32 --steps 1 \
    --no-save --sample 0 --out "$tmp/train-sft32" > "$tmp/sft32.out" 2>&1; then
    fail "jsonl: nnt-train --seq 32 took rows of 64"
else
    grep -q "train with seq 64, not 32" "$tmp/sft32.out" ||
        { fail "jsonl: --seq 32 refused without saying why:"; cat "$tmp/sft32.out"; }
fi
# packed rows: the four short ChatML records (8 + 17 + 23 + 14 tokens) share a row, the two
# conversations (84, cut to 64, and 58) take one each: 3 rows instead of 6
run_ok packed --jsonl --seq 64 --pack --too-long cut --tokenizer-json "$sft/chatml/tokenizer.json" \
    --out "$tmp/packed.bin" "$sft/records.jsonl"
set -- $(od -An -v -tu4 -N 20 "$tmp/packed.bin")
[ "$3 $5" = "192 64" ] || fail "packed: $3 tokens in rows of $5, expected 3 rows of 64"
# Llama 3.2's published template (recognised in its tokenizer_config.json) dated as the
# fixture with --chat-date: each row begins with TRL's ids, its mask is TRL's labels
# same_rows NAME FILE T ROWS EXPECTED: the ROWS rows of T 16-bit ids of FILE begin with the
# ids of EXPECTED (TRL's), and their mask is its labels
same_rows() {
    od -An -v -tu2 -j 1024 -N $(($3 * $4 * 2)) "$2" | tr -s ' \n' '  ' |
        sed 's/^ //; s/ $//' > "$tmp/$1.ids"
    od -An -v -tu1 -j $((1024 + $3 * $4 * 2)) "$2" | awk '{ for (i = 1; i <= NF; i++)
        for (b = 0; b < 8; b++) printf "%s%d", (n++ ? " " : ""), int($i / 2 ^ b) % 2 }' \
        | cut -d' ' -f1-$(($3 * $4)) > "$tmp/$1.mask"
    awk -v ids="$(cat "$tmp/$1.ids")" -v mask="$(cat "$tmp/$1.mask")" -v T="$3" -v rows="$4" '
        BEGIN { split(ids, got, " "); split(mask, m, " ") }
        $1 == "ids" { for (i = 2; i <= NF; i++) if (got[row * T + i - 1] != $i) bad++ }
        $1 == "labels" { for (i = 3; i <= NF; i++) if (m[row * T + i - 1] != ($i != -100)) bad++
                         row++ }
        END { exit bad || row != rows }' "$5" ||
        fail "$1: the ids or the mask differ from TRL's"
}
run_ok jsonl-llama32 --jsonl --seq 128 --chat-date "03 Feb 2025" --tokenizer-json \
    "$sft/llama3_2/tokenizer.json" --out "$tmp/l32.bin" "$sft/chat_records.jsonl"
same_rows jsonl-llama32 "$tmp/l32.bin" 128 5 "$sft/llama3_2.expected"
# Gemma 3's published template, recognised: its conversations, then those with a first
# system message, then contents as lists of text parts
run_ok jsonl-gemma3 --jsonl --seq 64 --tokenizer-json "$sft/gemma3/tokenizer.json" \
    --out "$tmp/g3.bin" "$sft/gemma_records.jsonl" "$sft/gemma3_records.jsonl" \
    "$sft/gemma3_parts_records.jsonl"
same_rows jsonl-gemma3 "$tmp/g3.bin" 64 7 "$sft/gemma3.expected"
# --loss all: every token counts, as TRL with completion_only_loss=False and no
# assistant_only_loss (Qwen3's conversations as its published template renders them: think
# blocks only after the last user message; then prompt/completion records)
run_ok jsonl-all --jsonl --seq 128 --loss all --tokenizer-json "$sft/qwen3/tokenizer.json" \
    --out "$tmp/all.bin" "$sft/chat_records.jsonl" "$sft/qwen3_records.jsonl" \
    "$sft/chat_pc.jsonl"
same_rows jsonl-all "$tmp/all.bin" 128 12 "$sft/qwen3.all_expected"
# tool use: Qwen2.5's template (its tools block, calls, responses), Llama 3.1's (the tools in
# the first user message or, by a record's chat_template_kwargs, the system block; a call as
# JSON; an ipython response), each row TRL's ids and labels
run_ok jsonl-tools-qwen --jsonl --seq 1056 --tokenizer-json "$sft/qwen2_5/tokenizer.json" \
    --out "$tmp/qt.bin" "$sft/tool_records.jsonl" "$sft/qwen_tool_records.jsonl"
same_rows jsonl-tools-qwen "$tmp/qt.bin" 1056 6 "$sft/qwen2_5.tool_expected"
run_ok jsonl-tools-llama --jsonl --seq 1536 --tokenizer-json "$sft/llama3_1/tokenizer.json" \
    --out "$tmp/lt.bin" "$sft/tool_records.jsonl" "$sft/llama_tool_records.jsonl"
same_rows jsonl-tools-llama "$tmp/lt.bin" 1536 6 "$sft/llama3_1.tool_expected"
# gpt-oss's (harmony: the tools as a TypeScript namespace, calls on the commentary channel),
# dated as the fixtures
run_ok jsonl-tools-gptoss --jsonl --seq 2048 --chat-date 2025-02-03 --tokenizer-json \
    "$sft/gpt_oss/tokenizer.json" --out "$tmp/ot.bin" "$sft/tool_records.jsonl" \
    "$sft/gptoss_tool_records.jsonl"
same_rows jsonl-tools-gptoss "$tmp/ot.bin" 2048 8 "$sft/gpt_oss.tool_expected"
# --loss assistant (TRL's assistant_only_loss): prompt/completion records whose completions
# hold calls, tool responses and answers; the responses do not count
run_ok jsonl-tools-assistant --jsonl --seq 1056 --loss assistant --tokenizer-json \
    "$sft/qwen2_5/tokenizer.json" --out "$tmp/qa.bin" "$sft/tool_pcu.jsonl" \
    "$sft/qwen_tool_pcu.jsonl"
same_rows jsonl-tools-assistant "$tmp/qa.bin" 1056 6 "$sft/qwen2_5.tool_pc_assistant_expected"
# refusals, naming the line
printf '{"text": "fine"}\n\n{"prompt": "Q", "completion": "A"\n' > "$tmp/broken.jsonl"
expect_status jsonl-broken 1 "broken.jsonl:3: nnt_sft_encode: the record" --jsonl --seq 64 \
    --tokenizer-json "$sft/llama3/tokenizer.json" --out "$tmp/x.bin" "$tmp/broken.jsonl"
printf '{"prompt": "Q", "completion": ""}\n' > "$tmp/empty.jsonl"
expect_status jsonl-empty 1 "empty.jsonl:1: .*empty completion" --jsonl --seq 64 \
    --tokenizer-json "$sft/llama3/tokenizer.json" --out "$tmp/x.bin" "$tmp/empty.jsonl"
printf '{"messages": [{"role": "tool", "content": "x"}, {"role": "assistant", "content": "y"}]}\n' \
    > "$tmp/role.jsonl"
expect_status jsonl-role 1 "role.jsonl:1: .*role \"tool\": the Llama 3 template renders no tool" \
    --jsonl --seq 64 --tokenizer-json "$sft/llama3/tokenizer.json" --out "$tmp/x.bin" \
    "$tmp/role.jsonl"
expect_status jsonl-long 1 "records.jsonl:5: .*does not fit in a row of 64" --jsonl --seq 64 \
    --tokenizer-json "$sft/chatml/tokenizer.json" --out "$tmp/x.bin" "$sft/records.jsonl"
grep -q -- "--too-long cut" "$tmp/jsonl-long.err" || fail "jsonl-long: no hint of --too-long cut"
printf '{"chat_template": "{%% for m in messages %%}<s>[INST] {{ m.content }}{%% endfor %%}"}' \
    > "$tmp/tokenizer_config.json"
expect_status jsonl-template 1 'chat_template "{% for m in messages %}<s>\[INST\]' --jsonl \
    --seq 64 --tokenizer-json "$sft/chatml/tokenizer.json" --tokenizer-config \
    "$tmp/tokenizer_config.json" --out "$tmp/x.bin" "$sft/records.jsonl"
run_ok jsonl-template-given --jsonl --seq 96 --chat-template chatml --tokenizer-json \
    "$sft/chatml/tokenizer.json" --tokenizer-config "$tmp/tokenizer_config.json" \
    --out "$tmp/x.bin" "$sft/records.jsonl"
expect_status jsonl-noseq 2 "give --seq T" --jsonl --tokenizer-json "$sft/chatml/tokenizer.json" \
    --out "$tmp/x.bin" "$sft/records.jsonl"
expect_status jsonl-seqonly 2 "are for --jsonl input" --seq 64 --out "$tmp/x.bin" "$tmp/ab.txt"
expect_status jsonl-lossonly 2 "are for --jsonl input" --loss all --out "$tmp/x.bin" \
    "$tmp/ab.txt"
expect_status jsonl-tmpl 2 "'vicuna' is not one of auto, none, chatml, llama3" --jsonl --seq 64 \
    --chat-template vicuna --out "$tmp/x.bin" "$sft/records.jsonl"
[ -z "$(ls "$tmp" | grep '\.tmp[.-]')" ] || fail "jsonl: a temporary file was left behind"

[ $fail -eq 0 ] && echo "ok: nnt-tokenize"
exit $fail
