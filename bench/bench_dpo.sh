#!/bin/sh
# SPDX-License-Identifier: MIT
# bench_dpo.sh: a DPO step of nnt-train (--dpo-beta) against TRL's DPOTrainer on the same
# model and preference records, side by side in one run, alternating: the mean step time
# after the first, and the reference pass (both compute the reference once, before the
# steps: TRL's precompute_ref_log_probs), and each whole run. The data's order differs (TRL
# shuffles), so the losses after the first step (log 2 on both sides) differ.
# Usage (from a build directory): sh ../bench/bench_dpo.sh [ROUNDS] [STEPS] [PRECISION]
# LOSS=orpo or simpo (default dpo): --dpo-loss orpo / simpo against TRL's ORPOTrainer /
# CPOTrainer with loss_type "simpo" (no reference on either side). LOSS=kto: --dpo-loss kto
# against TRL's KTOTrainer on unpaired records (the same 2 PAIRS rows a step, labels
# alternating; each micro-batch also a forward of its KL rows; the reference once on both
# sides, rows and KL rows: precompute_ref_log_probs).
# Environment: PYTHON (default /tmp/venv-torch/bin/python: torch, transformers, trl,
# datasets), SHAPE (default smollm2-135m: its configuration, random weights), PAIRS (pairs a
# step, default 4), T (default 256), RECORDS (default 64).
# The model: transformers' LlamaForCausalLM of SmolLM2-135M's configuration (V 49152, C 576,
# L 30, 9 heads of 64 on 3, hidden 1536, tied), random weights, the ChatML tokenizer of
# tests/fixtures/sft (vocabulary 400: ids of the records fit the model's); the records:
# text prompts and completions of random words, every sequence longer than T (cut to T on
# both sides, so both train on B rows of T). Results go to bench/RESULTS-dpo.md by hand.
set -eu
rounds=${1:-2}
steps=${2:-5}
precision=${3:-fp32}
py=${PYTHON:-/tmp/venv-torch/bin/python}
pairs=${PAIRS:-4}
T=${T:-256}
nrec=${RECORDS:-64}
loss=${LOSS:-dpo}
lossopt=""
[ "$loss" = dpo ] || lossopt="--dpo-loss $loss"
top=$(cd "$(dirname "$0")/.." && pwd)
export STARPU_SILENT=1
STARPU_HOME=${STARPU_HOME:-$(mktemp -d)}
export STARPU_HOME
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
[ -x ./nnt-train ] || { echo "bench_dpo.sh: run it from a build directory (./nnt-train)" >&2; exit 2; }
echo "# $(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) cores, $(lscpu | sed -n 's/^Model name: *//p'), load $(cut -d' ' -f1-3 /proc/loadavg)"
"$py" - "$out/model" "$out/prefs.jsonl" "$top/tests/fixtures/sft/chatml" "$nrec" "$loss" <<'PY'
import json, random, shutil, sys, torch
from transformers import LlamaConfig, LlamaForCausalLM
out, recs, tokdir, n = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
unpaired = sys.argv[5] == "kto"
torch.manual_seed(0)
cfg = LlamaConfig(vocab_size=49152, hidden_size=576, intermediate_size=1536,
                  num_hidden_layers=30, num_attention_heads=9, num_key_value_heads=3,
                  max_position_embeddings=2048, rms_norm_eps=1e-5, tie_word_embeddings=True,
                  rope_parameters={"rope_type": "default", "rope_theta": 100000.0},
                  bos_token_id=None, eos_token_id=None, pad_token_id=None)
LlamaForCausalLM(cfg).save_pretrained(out)
for f in ("tokenizer.json", "tokenizer_config.json"):
    shutil.copy(f"{tokdir}/{f}", f"{out}/{f}")
rng = random.Random(1)
words = ["the", "sky", "is", "blue", "green", "a", "cat", "sat", "on", "mat", "water",
         "boils", "at", "degrees", "model", "tile", "answer", "question", "small", "large"]
say = lambda k: " ".join(rng.choice(words) for _ in range(k))
with open(recs, "w") as fh:
    for i in range(n):
        if unpaired:   # (as many rows as the pairs' records make)
            for k in range(2):
                fh.write(json.dumps({"prompt": say(40), "completion": " " + say(200),
                                     "label": (i + k) % 2 == 0}) + "\n")
        else:
            fh.write(json.dumps({"prompt": say(40), "chosen": " " + say(200),
                                 "rejected": " " + say(200)}) + "\n")
PY
common="--load-hf $out/model --data $out/prefs.jsonl --dpo-beta 0.1 --batch $((2 * pairs))
    --seq $T --steps $steps --lr 1e-6 --schedule constant --warmup 0 --beta2 0.95
    --weight-decay 0.1 --grad-clip 1 --val-split 0 --sample 0 --no-save --precision $precision
    $lossopt"
echo "# nnt-train $(echo $common | sed "s|$out/||g")"
echo "# $py bench/dpo_trl.py model prefs.jsonl $pairs $T $steps $(nproc) $precision $loss"
for r in $(seq 1 "$rounds"); do
    start=$(date +%s.%N)
    ./nnt-train $common --out "$out/nnt" > "$out/log" 2>&1 || { tail -n 5 "$out/log" >&2; exit 1; }
    total=$(echo "$(date +%s.%N) - $start" | bc)
    # (the number before "ms" in the step lines)
    ms=$(awk '/^step [0-9]+\// { for (i = 2; i <= NF; i++) if ($i == "ms") v = $(i - 1);
              if (n++) s += v } END { printf "%.0f", s / (n - 1) }' "$out/log")
    first=$(awk '/^step 1\// { for (i = 2; i <= NF; i++) if ($i == "ms") print $(i - 1) }' "$out/log")
    losses=$(awk '/^step [0-9]+\// { printf "%s ", $4 }' "$out/log")
    echo "round $r nnt: $ms ms/step after the first (first $first ms), the whole run $total s (tokenization, load, reference pass, steps), losses $losses"
    "$py" "$top/bench/dpo_trl.py" "$out/model" "$out/prefs.jsonl" "$pairs" "$T" "$steps" \
        "$(nproc)" "$precision" "$loss" > "$out/trl" 2> "$out/trl.err" || { tail -n 5 "$out/trl.err" >&2; exit 1; }
    tms=$(awk '/^step/ { if (n++) { s += $4 } } END { printf "%.0f", s / (n - 1) }' "$out/trl")
    init=$(awk '/^init_s/ { print $2 }' "$out/trl")
    train=$(awk '/^init_s/ { print $4 }' "$out/trl")
    tl=$(awk '/^step/ { printf "%.6f ", $6 }' "$out/trl")
    echo "round $r TRL: $tms ms/step after the first, the trainer's creation $init s (tokenization, the reference pass) + train() $train s, losses $tl"
done
