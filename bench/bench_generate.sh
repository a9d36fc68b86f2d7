#!/bin/sh
# SPDX-License-Identifier: MIT
# bench_generate.sh: generation tokens/s at THREADS threads (default 2) for a gpt2-124M-shaped
# and a smollm2-135m-shaped random model, prompt 64, 128 new tokens, greedy: nnt with the
# key/value cache, nnt without it (nnt_sampling.no_cache, the 0.2 behaviour), and Hugging
# Face transformers' generate(use_cache=True, do_sample=False) with torch.set_num_threads,
# in one run; each in fp32, and in bf16 with PRECISIONS="fp32 bf16" (nnt --precision bf16,
# transformers' model in bfloat16).
# Usage (from a build directory): sh ../bench/bench_generate.sh [PYTHON]
# PYTHON: an interpreter with torch and transformers (default /tmp/venv-torch/bin/python).
# Environment: MODELS (default "gpt2 smollm2-135m"), PRECISIONS (default fp32), THREADS,
# PROMPT, NEW, ROUNDS, SKIP_NO_CACHE=1, FREEZES (default "none"): with "nf4", nnt's model is
# frozen in NF4 (bench_generate --freeze nf4) and transformers' loaded by bitsandbytes in 4
# bits (generate_hf.py's nf4 / nf4-bf16: compute in the precision); with "bf16", nnt's
# frozen (its matrices in bf16 under bf16 products; transformers' as for none). SAMPLES
# (default 1): that many sequences of the prompt side by side (bench_generate --samples, which
# also times them one after another; transformers' generate on a batch of as many copies);
# with RAGGED=1 as many prompts of their own, of lengths from PROMPT down to about half
# (bench_generate --ragged: nnt_model_generate_batch; transformers' generate on them padded
# on the left with an attention mask).
# Results go to bench/RESULTS-generate.md by hand.
set -eu
py=${1:-/tmp/venv-torch/bin/python}
models=${MODELS:-"gpt2 smollm2-135m"}
precisions=${PRECISIONS:-fp32}
threads=${THREADS:-2}
prompt=${PROMPT:-64}
new=${NEW:-128}
here=$(dirname "$0")
ragged='' hfragged=''
[ "${RAGGED:-0}" = 1 ] && ragged=--ragged hfragged=ragged
export STARPU_SILENT=1
STARPU_HOME=${STARPU_HOME:-$(mktemp -d)}
export STARPU_HOME
[ -x bench/bench_generate ] || { echo "bench_generate.sh: run it from a build directory" >&2; exit 2; }
echo "# $(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) cores ($(lscpu | sed -n 's/^Model name: *//p')), load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "# prompt $prompt, $new new tokens, greedy, $threads threads"
# ROUNDS rounds (default 3), nnt with the cache and transformers interleaved (the machine's
# load changes; compare the medians); nnt without the cache once, in the first round.
rounds=${ROUNDS:-3}
for r in $(seq 1 "$rounds"); do
    for m in $models; do
        for p in $precisions; do
          for f in ${FREEZES:-none}; do
            echo "## round $r: $m $p frozen $f (load $(cut -d' ' -f1 /proc/loadavg))"
            # shellcheck disable=SC2086 # $ragged: a word or none
            bench/bench_generate --model "$m" --prompt "$prompt" --new "$new" --cpus "$threads" \
                --precision "$p" --freeze "$f" --samples "${SAMPLES:-1}" $ragged |
                sed -n "s/^round 1/nnt cache $m $p $f/p"
            if [ "$r" = 1 ] && [ "${SKIP_NO_CACHE:-0}" != 1 ]; then
                bench/bench_generate --model "$m" --prompt "$prompt" --new "$new" \
                    --cpus "$threads" --precision "$p" --freeze "$f" --no-cache |
                    sed -n "s/^round 1/nnt no cache $m $p $f/p"
            fi
            hf=$p
            [ "$f" = nf4 ] && { [ "$p" = bf16 ] && hf=nf4-bf16 || hf=nf4; }
            # shellcheck disable=SC2086 # $hfragged: a word or none
            "$py" "$here/generate_hf.py" "$m" "$prompt" "$new" "$threads" "$hf" "${SAMPLES:-1}" $hfragged \
                2>/dev/null |
                grep '^hf'
          done
        done
    done
done
echo "# load after: $(cut -d' ' -f1-3 /proc/loadavg)"
