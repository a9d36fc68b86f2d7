#!/bin/sh
# SPDX-License-Identifier: MIT
# The GPU session's script rehearsed on CPU workers (scripts/gpu-session.sh --rehearse): every
# phase of the plan with tiny models and the programs of this build, so that a lent GPU
# machine's minutes are not lost to a bug of the script. Checks that it ends well, that the
# JSON it writes parses and holds issue 42's keys with numbers where the rehearsal measures
# them, that the figures are the ones of its runs (the parameters of the largest model that
# fit against nnt-train's own count; the larger candidate refused by the RAM budget check),
# that a phase without time left is recorded as skipped, and that --collect merges two
# calls' results (the later figure wins). The PyTorch peer is left out (NNT_REHEARSE_PYTHON=
# a python with torch and transformers runs it too, on the CPU: slower).
set -u
srcdir=${top_srcdir:-$(cd "$(dirname "$0")/.." && pwd)}
builddir=${top_builddir:-.}
builddir=$(cd "$builddir" && pwd)
tmp=$(mktemp -d "${TMPDIR:-/tmp}/nnt-rehearsal-XXXXXX")
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

[ -x "$builddir/nnt-train" ] || { echo "SKIP: no nnt-train in $builddir"; exit 77; }
start=$(date +%s)
DEST=$tmp/a NNT_PYTHON=${NNT_REHEARSE_PYTHON:-false} NNT_SESSION_WORK=$tmp/work-a \
    bash "$srcdir/scripts/gpu-session.sh" --rehearse --build "$builddir" > "$tmp/a.log" 2>&1 ||
    { cat "$tmp/a.log"; fail "gpu-session.sh --rehearse exited $?"; }
echo "rehearsal: $(( $(date +%s) - start )) s"
json=$tmp/a/RESULTS-gpu.json
[ -s "$json" ] || fail "no RESULTS-gpu.json"

# flat JSON: "PATH<TAB>VALUE" lines (PATH: SECTION.KEY, or KEY at the top; VALUE as JSON)
flatten() {
    if command -v python3 > /dev/null 2>&1; then
        python3 -c 'import json, sys
d = json.load(open(sys.argv[1]))
for k, v in d.items():
    for p, x in (v.items() if isinstance(v, dict) else [(None, v)]):
        print("%s\t%s" % (k if p is None else k + "." + p,
                           "null" if x is None else json.dumps(x) if isinstance(x, str) else x))
' "$1" > "$1.flat" || fail "$1 does not parse: $(cat "$1")"
    else   # the writer puts each section on one line: "name": {"k": v, ...}
        [ "$(tr -cd '{' < "$1" | wc -c)" = "$(tr -cd '}' < "$1" | wc -c)" ] ||
            fail "$1: unbalanced braces"
        sed -n 's/^  "\([^"]*\)": \(.*\)/\1\t\2/p' "$1" | sed 's/,$//' |
            awk -F'\t' '$2 !~ /^{/ { print; next }
                        { n = split(substr($2, 2, length($2) - 2), kv, ", \"")
                          for (i = 1; i <= n; i++) { sub(/^"/, "", kv[i]); split(kv[i], p, "\": ")
                                                     print $1 "." p[1] "\t" p[2] } }' > "$1.flat"
    fi
}
flatten "$json"
key() {
    awk -F'\t' -v k="$1" '$1 == k { print $2; found = 1 } END { exit !found }' "$json.flat" ||
        fail "$json has no $1"
}
is_number() { case $1 in '' | null | \"*) return 1 ;; *) return 0 ;; esac; }

# issue 42's keys, numbers where the rehearsal measures them
for k in gpu commit date gpt2_124m_bf16.torch_eager_s gpt2_124m_bf16.torch_compile_s \
         gpt2_1558m_bf16.torch_eager_s; do
    key "$k" > /dev/null
done
for k in gpt2_124m_bf16.nnt_s gpt2_1558m_bf16.nnt_s gpt2_1558m_bf16.mfu offload.gpu_budget_mib \
         offload.state_mib offload.in_core_s offload.offloaded_s offload.max_loss_diff \
         largest.parameters largest.step_s first_step.first_s first_step.later_s suite.pass \
         llama_1b_bf16.nnt_s llama_1b_bf16.first_s; do
    v=$(key "$k")
    is_number "$v" || fail "$k is $v, not a number"
done
case $(key gpu) in \"rehearsal*) ;; *) fail "gpu: $(key gpu)" ;; esac
[ "$(key budget.result)" = '"PASS"' ] || fail "budget: $(key budget.result)"
[ "$(key suite.pass)" -ge 1 ] || fail "suite: nothing passed"
[ "$(key suite.fail)" = 0 ] || fail "suite: $(key suite.failed)"

# the offload figures: a quarter of 16 bytes a parameter, the same losses on CPU workers
state=$(key offload.state_mib)
[ "$(key offload.gpu_budget_mib)" = $((state / 4)) ] || fail "offload budget is not a quarter"
awk -v d="$(key offload.max_loss_diff)" 'BEGIN { exit !(d < 1e-4) }' ||
    fail "in-core and offloaded losses differ by $(key offload.max_loss_diff)"

# the largest model: the larger candidate refused at once by the RAM budget, the parameter
# count the script computes equal to nnt-train's own
log=$tmp/work-a/r
grep -q 'need at least' "$log/nnt-largest-L8xC256.log" ||
    fail "the larger candidate was not refused by the RAM budget check"
params=$(key largest.parameters)
nnt_m=$(sed -n 's/^model: .*: \([0-9.]*\)M parameters.*/\1/p' "$log/nnt-largest-L3xC96.log")
awk -v a="$params" -v b="$nnt_m" \
    'BEGIN { d = a / 1e6 - b; exit !(b > 0 && d < 0.001 && d > -0.001) }' ||
    fail "largest.parameters $params, nnt-train counts ${nnt_m}M"

# the suite's shards (NNT_TEST_SHARD, tests/testutil.h): together they ran every test of the
# program once, each a share
checks() { sed -n 's/.*Checks: \([0-9]*\),.*/\1/p' "$@" | awk '{ s += $1 } END { print s + 0 }'; }
whole=$(top_srcdir=$srcdir "$builddir/tests/test_ctx_alloc" 2>&1 | checks)
shards=$(cat "$log"/suite/ctx_alloc.[0-9].log | checks)
[ "$whole" -ge 3 ] && [ "$shards" = "$whole" ] ||
    fail "the suite's shards of test_ctx_alloc ran $shards tests, the program $whole"
for f in "$log"/suite/ctx_alloc.[0-9].log; do
    n=$(checks "$f")
    [ "$n" -ge 1 ] && [ "$n" -lt "$whole" ] || fail "$f ran $n of $whole tests"
done

# the section for RESULTS-gpu.md
grep -q '^| measurement | nnt | PyTorch eager' "$tmp/a/RESULTS-gpu-section.md" ||
    fail "no table in RESULTS-gpu-section.md"

# a phase that cannot end before the deadline is skipped, and said to be
DEST=$tmp/b NNT_PYTHON=false NNT_SESSION_WORK=$tmp/work-b \
    bash "$srcdir/scripts/gpu-session.sh" --rehearse --build "$builddir" --deadline 60 window \
    attn offload > "$tmp/b.log" 2>&1 || fail "the deadline run exited $?"
grep -q 'offload skipped' "$tmp/b/RESULTS-gpu.json" ||
    fail "no skip note: $(cat "$tmp/b/RESULTS-gpu.json")"
# the window phase (issue 39) and the attn phase ran before it: their figures, in the section too
json=$tmp/b/RESULTS-gpu.json
flatten "$json"
for k in window.fp32_ratio window.bf16_ratio window.fp32_causal_ms window.bf16_window_ms \
         attn.flash_s attn.products_s attn.speedup attn.max_loss_diff; do
    is_number "$(key "$k")" || { cat "$tmp/b.log"; fail "$k is $(key "$k"), not a number"; }
done
grep -q '^Sliding-window attention against causal' "$tmp/b/RESULTS-gpu-section.md" ||
    fail "no window line in RESULTS-gpu-section.md"
grep -q '^CUDA attention (GPT-2 124M' "$tmp/b/RESULTS-gpu-section.md" ||
    fail "no attention line in RESULTS-gpu-section.md"

# --collect: two calls merged, the later figure kept
mkdir -p "$tmp/bench"
: > "$tmp/bench/RESULTS-gpu.md"
printf 'largest\tstep_s\t123\n' >> "$tmp/b/results.tsv"
NNT_RESULTS_DIR=$tmp/bench bash "$srcdir/scripts/gpu-session.sh" --collect "$tmp/a" "$tmp/b" \
    > /dev/null || fail "--collect exited $?"
json=$tmp/bench/RESULTS-gpu.json
flatten "$json"
[ "$(key largest.step_s)" = 123 ] || fail "--collect did not keep the later figure"
is_number "$(key gpt2_124m_bf16.nnt_s)" || fail "--collect lost the first call's figures"
grep -q '^## .*issue 42 session' "$tmp/bench/RESULTS-gpu.md" || fail "--collect wrote no section"
echo "PASS: rehearsal JSON and section checked ($(( $(date +%s) - start )) s)"
