#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The measurements of a lent GPU machine (issue 42), time-boxed, with a CPU rehearsal.
#
# A lent machine gives a session about 15 minutes of device time, its start (1-2 minutes)
# included, at most 10 minutes a command, and nothing installed: build here (scripts/
# build-starpu-cuda.sh, a CUDA build of nnt, scripts/gpu-bundle.sh), carry
# gpu-bundle.tar.xz (unpacked here when gpu-bundle/ is absent), and run the phases in one or
# two calls. Each phase has its own time limit, clipped to what is
# left of --deadline; a phase that cannot start in time is recorded as skipped. After every
# phase the results are written again, so a call stopped at its limit still returns all it
# finished: DEST/results.tsv (the figures, one per line), DEST/RESULTS-gpu.json (issue 42's
# keys), DEST/RESULTS-gpu-section.md (a section for bench/RESULTS-gpu.md) and DEST/run.tgz
# (every log). Back here, `scripts/gpu-session.sh --collect DIR...` merges the results of
# one or more calls into bench/RESULTS-gpu.json and appends the section to
# bench/RESULTS-gpu.md (bench/RESULTS-gpu.md's plan says which command to run).
#
# Usage:
#   DEST=$OUT bash scripts/gpu-session.sh [--deadline S] [PHASE...]     (on the GPU machine)
#   bash scripts/gpu-session.sh --rehearse [--build DIR] [PHASE...]     (CPU workers only;
#                                          DIR: a build directory or a GPU bundle)
#   bash scripts/gpu-session.sh --collect DIR...                        (here, afterwards;
#                                                   NNT_RESULTS_DIR: another folder than bench/)
# Without PHASE: the plan, most valuable first: info budget gpt2 llama xl offload largest suite
# compile. --deadline S (default 570): seconds from the start within which every phase must
# end.
#
# Phases (GPU sizes; limits in seconds, NNT_LIMIT_<PHASE> overrides, e.g. NNT_LIMIT_XL=200):
#   info     the GPU, driver, bundle; "gpu", "commit", "date" (20)
#   budget   test_api's ctx_budget_counts_pinned_chunks on the CUDA workers
#            (NNT_TEST_BUDGET_CUDA=1): StarPU's pinned 32 MiB chunks counted, the smallest
#            budget the refusal names accepted, and its reads come back (no hang) (60)
#   gpt2     GPT-2 124M (L12 C768 NH12), B8 T1024, bf16: the PyTorch peer (bench/
#            gpu_torch_peer.py, eager, fused AdamW; it writes the initial weights) and
#            nnt-train from those weights, on the same token file: gpt2_124m_bf16.nnt_s,
#            .torch_eager_s, the largest loss difference over the steps, and the first
#            step against the later ones on a machine without performance models (first_step:
#            its seconds, the later steps', their ratio, the models each kind of worker
#            calibrated: scripts/gpu-perfmodels.sh) (170)
#   llama    Llama 3.2 1B's sizes (L16 C2048 NH32 NKV8 F8192 V128256, tied), B4 T1024, bf16:
#            the PyTorch peer (LlamaForCausalLM; it writes the initial weights) and nnt-train
#            from those weights on the same tokens: llama_1b_bf16.nnt_s, .torch_eager_s, .mfu,
#            .first_s, .max_loss_diff; step 2 traced (DEST/llama-trace.svg) (170)
#   qlora    the same sizes with LoRA r 16 on all-linear, the frozen base as it is and in NF4
#            (--quantize nf4): qlora.none_s, .nf4_s (steps 3-8), .none_ms, .nf4_ms, the
#            memory lines (150)
#   xl       GPT-2 1558M (gpt2-xl: L48 C1600 NH25), B4 T1024, bf16: nnt-train (fresh init)
#            and the eager peer: gpt2_1558m_bf16.nnt_s, .torch_eager_s, .mfu (nnt's, against
#            989 TFLOP/s) (200)
#   offload  the same model with --recompute, in core and with --mem-gpu a quarter of its
#            training state (fp32 weights, gradients and Adam moments, 16 bytes a parameter):
#            offload.gpu_budget_mib, .state_mib, .in_core_s, .offloaded_s, .max_loss_diff
#            (the same steps' losses); then offloaded with NNT_OPTIM_ON=cpu (the optimizer's
#            tasks on the CPU workers, weights and moments kept in RAM): .optim_on_cpu_s,
#            .optim_on_cpu_loss_diff (300)
#   largest  the largest model that trains with the host RAM (--mem-cpu NNT_LARGEST_RAM_MIB,
#            default 85 % of MemTotal; --recompute, B4 T1024, bf16): candidates from large to
#            small (NNT_LARGEST="L24xC5120 L19xC5120 L14xC5120", heads of 128), each refused
#            at once by nnt's budget check when its tiles do not fit; the first that starts
#            trains 2 steps: largest.parameters, .step_s (the second step) (200)
#   suite    every test program but test_cuda_kernels with CUDA workers, NNT_TEST_JOBS at
#            once (8), each under NNT_TEST_TIMEOUT (90), those on tests/testutil.h in
#            NNT_TEST_SHARDS processes (3; NNT_TEST_SHARD=I/N, each its share of the tests),
#            larger sources first: suite.pass, .fail, .skip, .timeout (programs; one whose
#            shard failed, failed) and the names of those that failed or timed out (150)
#   compile  the peer with torch.compile on GPT-2 124M: gpt2_124m_bf16.torch_compile_s and
#            the compilation step's time (200)
#   kernels  test_cuda_kernels: every CUDA kernel against the CPU kernels (90)
#   window   issue 39: bench/attention_window (T 4096, W 512, tiles of 256, 8 heads of 64),
#            sliding-window attention against causal on the GPU, fp32 then bf16:
#            window.fp32_ratio, .bf16_ratio (window / causal, median of the rounds), the
#            causal and window milliseconds, the window's backward's (60)
#   cpuwindow issue 39 on the machine's CPU cores alone (STARPU_NCUDA=0, every core a CPU
#            worker): bench/attention_window fp32 with whole heads (at most 5 runs of band
#            tasks, fewer than the workers) three ways, NNT_ATTN_BAND_TASKS 0 (blocks), unset
#            (the rule: the backward by blocks there) and 2 (the backward by band tasks anyway),
#            and with head tiles of 2 (up to 20 runs: band tasks by the rule):
#            cpuwindow.ncpus, .<variant>_causal_ms, _window_ms, _bwd_ms, _ratio for blocks,
#            rule, bands, heads2 (60)
#   attn     the CUDA attention's two paths (NNT_CUDA_ATTN) on GPT-2 124M (the gpt2 phase's
#            sizes, token file and calibrated models), 10 steps each, flash then products:
#            attn.flash_ms, .products_ms (every step), .flash_s, .products_s (the mean of
#            steps 4-10), .speedup, .max_loss_diff (the same steps' losses) (120)
#   norm     the same for the norms' backward (NNT_CUDA_NORM_BWD), rows then chunks:
#            norm.rows_ms, .chunks_ms, .rows_s, .chunks_s, .speedup, .max_loss_diff (120)
#   steps    diagnostic, not in the plan: GPT-2 124M (the gpt2 phase's sizes and token file),
#            12 steps on the gpt2 phase's calibrated performance models (fresh ones without
#            it), with dmdas, with eager (no model) and with dmdas traced over steps 2-12
#            (DEST/steps-trace.svg, its per-op table in the logs): steps.<variant>_ms, the
#            milliseconds of each step, for the slow steps after the first that calls 1, 3
#            and 5 of 2026-11-29 saw (1.3-1.5 s against 0.15 s) (150)
#   first-all  diagnostic, not in the plan: GPT-2 124M's first steps with NNT_CPU_TASKS=all
#            (StarPU's placement and calibration on the CPU workers too; 110 s on 2026-11-26)
#   cpubench issue 16 on the host CPU (cpu-bundle/, scripts/gpu-bundle.sh --cpu) (300)
#
# --rehearse: the same phases on CPU workers with tiny models (L2 C64, L3 C96, ...), the
# programs of a build directory (--build DIR, default NNT_BUILD or the source tree), the
# PyTorch peer on the CPU when NNT_PYTHON (default python3) imports torch and transformers
# (else skipped and its figures null; compile only with NNT_REHEARSE_COMPILE=1), results
# under DEST (default: a new temporary directory, printed). tests/check_gpu_rehearsal.sh runs
# it in make check and validates the JSON, so that no GPU minute is lost to a script bug.
set -u
here=$(cd "$(dirname "$0")/.." && pwd)
start_s=$(date +%s)
# the environment's own library path, for Python (a bundle's libraries, Debian's, would
# shadow the machine's: libgomp, libstdc++'s users)
py_ld_path=${LD_LIBRARY_PATH:-}

# ---- merging the results of several calls (here, afterwards) ---------------------------------
# json_of TSV: issue 42's JSON from results.tsv lines "SECTION<TAB>KEY<TAB>VALUE" (SECTION "-"
# for top-level keys; VALUE already JSON: a number, null or a quoted string); a key given
# twice keeps its last value; every key of the issue is present (null when not measured).
json_of() {
    awk -F'\t' '
    BEGIN {
        nsec = split("gpt2_124m_bf16 gpt2_1558m_bf16 offload largest", order, " ")
        for (j = 1; j <= nsec; j++) seen[order[j]] = 1
        want["gpt2_124m_bf16"] = "nnt_s torch_eager_s torch_compile_s"
        want["gpt2_1558m_bf16"] = "nnt_s torch_eager_s mfu"
        want["offload"] = "gpu_budget_mib state_mib in_core_s offloaded_s max_loss_diff optim_on_cpu_s optim_on_cpu_loss_diff"
        want["largest"] = "parameters step_s"
        for (s in want) {
            n = split(want[s], ks, " ")
            for (i = 1; i <= n; i++) add(s, ks[i], "null")
        }
        add("-", "gpu", "null"); add("-", "commit", "null"); add("-", "date", "null")
    }
    function add(s, k, v) {
        if (!((s, k) in val)) { nk[s]++; key[s, nk[s]] = k }
        val[s, k] = v
        if (s != "-" && !(s in seen)) { seen[s] = 1; order[++nsec] = s }
    }
    NF >= 3 { add($1, $2, $3) }
    END {
        printf "{\n"
        sep = ""
        for (i = 1; i <= nk["-"]; i++) {
            printf "%s  \"%s\": %s", sep, key["-", i], val["-", key["-", i]]; sep = ",\n"
        }
        for (j = 1; j <= nsec; j++) {
            s = order[j]
            if (!nk[s]) continue
            printf "%s  \"%s\": {", sep, s
            for (i = 1; i <= nk[s]; i++)
                printf "%s\"%s\": %s", (i > 1 ? ", " : ""), key[s, i], val[s, key[s, i]]
            printf "}"; sep = ",\n"
        }
        printf "\n}\n"
    }' "$@"
}

# md_of TSV: the section for bench/RESULTS-gpu.md
md_of() {
    awk -F'\t' '
    NF >= 3 { k = $1 "." $2; if (!(k in v)) ks[++n] = k; v[k] = $3 }
    function g(k) {
        x = (k in v) ? v[k] : "null"
        gsub(/^"|"$/, "", x)
        return x == "null" ? "-" : x
    }
    function row(what, nnt, eager, compiled, other) {
        printf "| %s | %s | %s | %s | %s |\n", what, nnt, eager, compiled, other
    }
    END {
        printf "\n## %s: issue 42 session, %s (commit %s)\n\n", g("-.date"), g("-.gpu"),
               g("-.commit")
        printf "Made by scripts/gpu-session.sh %s.\n\n", g("-.invocation")
        row("measurement", "nnt", "PyTorch eager", "torch.compile", "other")
        row("---", "---", "---", "---", "---")
        row("GPT-2 124M (" g("gpt2_124m_bf16.shape") ") bf16, s/step", g("gpt2_124m_bf16.nnt_s"),
            g("gpt2_124m_bf16.torch_eager_s"), g("gpt2_124m_bf16.torch_compile_s"),
            "largest loss difference " g("gpt2_124m_bf16.max_loss_diff"))
        row("GPT-2 1558M (" g("gpt2_1558m_bf16.shape") ") bf16, s/step",
            g("gpt2_1558m_bf16.nnt_s"), g("gpt2_1558m_bf16.torch_eager_s"), "",
            "nnt MFU " g("gpt2_1558m_bf16.mfu") ", PyTorch MFU " g("gpt2_1558m_bf16.torch_mfu"))
        row("Llama 1B (" g("llama_1b_bf16.shape") ") bf16, s/step", g("llama_1b_bf16.nnt_s"),
            g("llama_1b_bf16.torch_eager_s"), "", "nnt MFU " g("llama_1b_bf16.mfu") \
            ", largest loss difference " g("llama_1b_bf16.max_loss_diff"))
        row("1558M --recompute in core, s/step", g("offload.in_core_s"), "", "", "")
        row("1558M --recompute, --mem-gpu " g("offload.gpu_budget_mib") " MiB of " \
            g("offload.state_mib") " MiB of state, s/step", g("offload.offloaded_s"), "", "",
            "in-core / offloaded " g("offload.throughput_ratio") ", largest loss difference " \
            g("offload.max_loss_diff"))
        row("the same, NNT_OPTIM_ON=cpu (optimizer on the CPU workers), s/step",
            g("offload.optim_on_cpu_s"), "", "", "largest loss difference from in core " \
            g("offload.optim_on_cpu_loss_diff"))
        row("largest model on the host RAM: " g("largest.parameters") " parameters, s/step",
            g("largest.step_s"), "", "", g("largest.shape"))
        row("first step (fresh performance models), s", g("first_step.first_s"), "", "",
            "later steps " g("first_step.later_s") " s, ratio " g("first_step.ratio") "; " \
            g("first_step.perfmodels"))
        printf "\nRAM budget with CUDA workers (test_api ctx_budget_counts_pinned_chunks): %s. ",
               g("budget.result")
        printf "Test suite with CUDA workers: %s passed, %s failed, %s skipped, %s stopped at " \
               "their limit (%s). %s\n", g("suite.pass"), g("suite.fail"), g("suite.skip"),
               g("suite.timeout"), g("suite.limit"), g("suite.failed")
        if (g("window.fp32_ratio") != "-" || g("window.bf16_ratio") != "-")
            printf "\nSliding-window attention against causal (bench/attention_window, %s): " \
                   "fp32 %s ms against %s ms, ratio %s; bf16 %s ms against %s ms, ratio %s.\n",
                   g("window.shape"), g("window.fp32_window_ms"), g("window.fp32_causal_ms"),
                   g("window.fp32_ratio"), g("window.bf16_window_ms"),
                   g("window.bf16_causal_ms"), g("window.bf16_ratio")
        if (g("cpuwindow.rule_ratio") != "-" || g("cpuwindow.bands_ratio") != "-")
            printf "\nSliding-window attention on %s CPU workers alone (fp32, window ms, its " \
                   "backward ms, ratio to causal): blocks %s, %s, %s; the rule %s, %s, %s; " \
                   "band tasks anyway %s, %s, %s; head tiles of 2 %s, %s, %s.\n",
                   g("cpuwindow.ncpus"), g("cpuwindow.blocks_window_ms"),
                   g("cpuwindow.blocks_bwd_ms"), g("cpuwindow.blocks_ratio"),
                   g("cpuwindow.rule_window_ms"), g("cpuwindow.rule_bwd_ms"),
                   g("cpuwindow.rule_ratio"), g("cpuwindow.bands_window_ms"),
                   g("cpuwindow.bands_bwd_ms"), g("cpuwindow.bands_ratio"),
                   g("cpuwindow.heads2_window_ms"), g("cpuwindow.heads2_bwd_ms"),
                   g("cpuwindow.heads2_ratio")
        if (g("attn.flash_s") != "-" || g("attn.products_s") != "-")
            printf "\nCUDA attention (GPT-2 124M, steps 4-10): flash kernels %s s a step, " \
                   "products (the default) %s s, %sx; largest loss difference %s.\n",
                   g("attn.flash_s"), g("attn.products_s"), g("attn.speedup"),
                   g("attn.max_loss_diff")
        if (g("norm.rows_s") != "-" || g("norm.chunks_s") != "-")
            printf "\nCUDA norm backwards (GPT-2 124M, steps 4-10): over rows %s s a step, " \
                   "over row chunks (NNT_CUDA_NORM_BWD=chunks) %s s, %sx; largest loss " \
                   "difference %s.\n", g("norm.rows_s"), g("norm.chunks_s"),
                   g("norm.speedup"), g("norm.max_loss_diff")
        if (g("qlora.none_s") != "-" || g("qlora.nf4_s") != "-")
            printf "\nLoRA on %s: frozen base as it is %s s a step, in NF4 %s s (steps 3-8).\n",
                   g("qlora.shape"), g("qlora.none_s"), g("qlora.nf4_s")
        if (g("kernels.exit") != "-")
            printf "\nCUDA kernels against the CPU kernels (test_cuda_kernels): exit %s, %s.\n",
                   g("kernels.exit"), g("kernels.checks")
        if (g("-.notes") != "-")
            printf "\nNotes: %s\n", g("-.notes")
    }' "$@"
}

collect() {
    [ $# -gt 0 ] ||
        { echo "gpu-session: --collect DIR... (the folders the calls returned)" >&2; exit 2; }
    local tsvs=() d
    for d in "$@"; do
        [ -f "$d/results.tsv" ] || { echo "gpu-session: no results.tsv in $d" >&2; exit 1; }
        tsvs+=("$d/results.tsv")
    done
    local to=${NNT_RESULTS_DIR:-$here/bench}
    json_of "${tsvs[@]}" > "$to/RESULTS-gpu.json"
    md_of "${tsvs[@]}" >> "$to/RESULTS-gpu.md"
    echo "gpu-session: wrote $to/RESULTS-gpu.json and appended a section to $to/RESULTS-gpu.md"
}

# ---- options --------------------------------------------------------------------------------
rehearse=0
deadline=570
build=${NNT_BUILD:-}
while [ $# -gt 0 ]; do
    case $1 in
    --rehearse) rehearse=1 ;;
    --deadline) deadline=${2:?--deadline S}; shift ;;
    --build) build=${2:?--build DIR}; shift ;;
    --collect) shift; collect "$@"; exit 0 ;;
    -h | --help)
        awk 'NR > 2 && /^#/ { sub(/^# ?/, ""); print; next } NR > 2 { exit }' "$0"
        exit 0 ;;
    -*) echo "gpu-session: unknown option $1 (see --help)" >&2; exit 2 ;;
    *) break ;;
    esac
    shift
done
[ $# -gt 0 ] || set -- info budget gpt2 llama xl offload largest suite compile
invocation="$*"

if [ $rehearse = 1 ]; then
    [ -n "$build" ] || build=$here
    build=$(cd "$build" && pwd)
    train=$build/nnt-train
    testdir=$build/tests
    if [ -f "$build/lib/env.sh" ]; then   # a GPU bundle, rehearsed on this machine's CPUs
        NNT_BUNDLE_DIR=$build
        . "$build/lib/env.sh"
    fi
    dest=${DEST:-$(mktemp -d "${TMPDIR:-/tmp}/nnt-gpu-rehearsal-XXXXXX")}
    work=${NNT_SESSION_WORK:-$dest/work}
    gpus=0
else
    train=$here/gpu-bundle/nnt-train
    testdir=$here/gpu-bundle/tests
    dest=${DEST:?DEST: the folder that comes back (OUT of the device tool)}
    work=${NNT_SESSION_WORK:-/tmp/nnt-gpu-session}
    gpus=1
    if [ ! -x "$train" ] && [ -f "$here/gpu-bundle.tar.xz" ]; then   # what the call carried
        tar -C "$here" -xJf "$here/gpu-bundle.tar.xz" ||
            { echo "gpu-session: cannot unpack gpu-bundle.tar.xz" >&2; exit 1; }
    fi
    [ -d "$here/gpu-bundle" ] || { echo "gpu-session: no gpu-bundle/ nor gpu-bundle.tar.xz in" \
        "$here (scripts/gpu-bundle.sh)" >&2; exit 1; }
    cp "$here/scripts/gpu-run.sh" "$here/gpu-bundle/run.sh"   # the source tree's, newer
    # the test programs are the real ELF files: the bundle's and the machine's CUDA libraries
    NNT_BUNDLE_DIR=$here/gpu-bundle
    . "$here/gpu-bundle/lib/env.sh"
fi
builddir=${build:-$here/gpu-bundle}
[ -x "$train" ] || { echo "gpu-session: no nnt-train at $train" >&2; exit 1; }
mkdir -p "$dest" "$work/r"
dest=$(cd "$dest" && pwd)
out=$work/r
tsv=$dest/results.tsv
py=${NNT_PYTHON:-python3}
export STARPU_SILENT=1
if [ $rehearse = 1 ]; then
    echo "gpu-session: rehearsal (CPU workers) with $build, results in $dest"
else
    echo "gpu-session: GPU bundle, results in $dest"
fi

say() { echo "$*" | tee -a "$out/summary.txt"; }
# put SECTION KEY VALUE: one figure (VALUE: JSON), then the results written again
put() {
    printf '%s\t%s\t%s\n' "$1" "$2" "$3" >> "$tsv"
}
num() { # num VALUE: VALUE when a number, else null
    case $1 in '' | *[!0-9.eE+-]* | . ) echo null ;; *) echo "$1" ;; esac
}
str() { # str TEXT: a JSON string
    printf '"%s"' "$(printf '%s' "$1" | tr -d '\000-\037' | sed 's/\\/\\\\/g; s/"/\\"/g')"
}
write_results() {
    json_of "$tsv" > "$dest/RESULTS-gpu.json"
    md_of "$tsv" > "$dest/RESULTS-gpu-section.md"
    # without the weights and token files (the peer's 124M initial weights made call 1's of
    # 2026-11-29 pass the 16 MB a file that comes back may have)
    tar czf "$dest/run.tgz" --exclude='init-*' --exclude='*.safetensors' --exclude='*.bin' \
        -C "$work" r 2> /dev/null
}
note() { notes="${notes:+$notes; }$*"; put - notes "$(str "$notes")"; say "note: $*"; }
notes=

# limit PHASE DEFAULT MIN: the seconds PHASE may take (NNT_LIMIT_PHASE or DEFAULT, clipped
# to what is left of the deadline less 10 s for the results); 0 when under MIN
limit() {
    local var="NNT_LIMIT_$(echo "$1" | tr 'a-z-' 'A-Z_')" want left
    want=${!var:-$2}
    left=$((deadline - ($(date +%s) - start_s) - 10))
    [ "$left" -lt "$want" ] && want=$left
    [ "$want" -lt "$3" ] && want=0
    echo "$want"
}

have_torch=0
if LD_LIBRARY_PATH=$py_ld_path "$py" -c 'import torch, transformers, numpy' > /dev/null 2>&1; then
    have_torch=1
else
    say "PyTorch peer: $py cannot import torch, transformers and numpy: torch figures skipped"
fi

# ---- helpers ----------------------------------------------------------------------------------
# write_tokens FILE N V: N uniform token ids below V (a fixed MINSTD sequence) as uint16
write_tokens() {
    LC_ALL=C awk -v n="$2" -v v="$3" 'BEGIN {
        x = 12345
        for (i = 0; i < n; i++) {
            x = (x * 48271) % 2147483647
            t = x % v
            printf "%c%c", t % 256, int(t / 256)
        }
    }' > "$1"
}

# csv_col FILE NAME: the column NAME of a CSV with a header, one value a line
csv_col() {
    [ -f "$1" ] || return 0
    awk -F, -v name="$2" 'NR == 1 { for (i = 1; i <= NF; i++) if ($i == name) c = i; next }
                          c { print $c }' "$1"
}

# mean_after_first: the mean of the values on stdin after the first one ("" when none)
mean_after_first() { awk 'NR > 1 { s += $1; n++ } END { if (n) printf "%.6g\n", s / n }'; }

# max_diff A B: the largest |a_i - b_i| of two lists of numbers (one a line), over the
# first min(len) ("" when either is empty)
max_diff() {
    awk 'NR == FNR { a[FNR] = $1; na = FNR; next }
         FNR <= na { d = $1 - a[FNR]; if (d < 0) d = -d; if (d > m) m = d; n++ }
         END { if (n) printf "%.6g\n", m }' "$1" "$2"
}

# gpt2_params L C V CTX: GPT-2's parameter count (tied embeddings)
gpt2_params() {
    awk -v L="$1" -v C="$2" -v V="$3" -v T="$4" \
        'BEGIN { printf "%.0f\n", V * C + T * C + L * (12 * C * C + 13 * C) + 2 * C }'
}

# nnt_run TAG LIMIT ARGS...: nnt-train ARGS into OUT/TAG, its performance models in
# run_home (the runs share them and StarPU's bus calibration, except the one that measures a
# first step without them); nnt_rc its exit status
run_home=$out/home-shared
nnt_run() {
    local tag=$1 lim=$2
    shift 2
    rm -rf "$out/$tag"
    local home=$run_home
    mkdir -p "$home"
    local t0
    t0=$(date +%s.%N)
    STARPU_HOME=$home timeout -k 10 "$lim" "$train" "$@" --gpus "$gpus" --sample 0 --no-save \
        --val-split 0 --schedule constant --warmup 0 --out "$out/$tag" > "$out/$tag.log" 2>&1
    nnt_rc=$?
    nnt_wall=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
    csv_col "$out/$tag/train.csv" ms > "$out/$tag.ms"
    csv_col "$out/$tag/train.csv" loss > "$out/$tag.loss"
    csv_col "$out/$tag/train.csv" mfu > "$out/$tag.mfu"
    say "nnt $tag: exit $nnt_rc, $nnt_wall s, ms per step: $(tr '\n' ' ' < "$out/$tag.ms")"
    [ $nnt_rc -eq 0 ] || tail -n 3 "$out/$tag.log" | sed 's/^/    /' | tee -a "$out/summary.txt"
}
# step_s TAG: the mean seconds of TAG's steps after the first
step_s() { awk '{ print $1 / 1000 }' "$out/$1.ms" | mean_after_first; }

# torch_run TAG LIMIT ARGS...: the PyTorch peer; torch_rc its status, OUT/TAG.json its result
torch_run() {
    local tag=$1 lim=$2
    shift 2
    (cd "$here" && LD_LIBRARY_PATH=$py_ld_path PYTHONUNBUFFERED=1 timeout -k 10 "$lim" \
        "$py" bench/gpu_torch_peer.py \
        $([ $rehearse = 1 ] && echo --device cpu --threads 2 || echo --device cuda) "$@") \
        > "$out/$tag.json" 2> "$out/$tag.log"
    torch_rc=$?
    if [ $torch_rc -eq 0 ]; then
        LD_LIBRARY_PATH=$py_ld_path "$py" -c 'import json, sys; d = json.load(open(sys.argv[1]))
print("\n".join(repr(x) for x in d["losses"]), file=open(sys.argv[2], "w"))
print(d["step_s"], d["first_s"], d["params"])' "$out/$tag.json" "$out/$tag.loss" > "$out/$tag.fig"
        say "torch $tag: step $(torch_fig "$tag" 1) s, first $(torch_fig "$tag" 2) s"
    else
        say "torch $tag: exit $torch_rc: $(tail -n 1 "$out/$tag.log")"
        : > "$out/$tag.fig"
    fi
}
torch_fig() { cut -d' ' -f"$2" "$out/$1.fig" 2> /dev/null; }

# ---- sizes --------------------------------------------------------------------------------------
if [ $rehearse = 1 ]; then
    small=(2 64 2 512 64 2 32)      # L C NH V context B T
    llama=(2 64 4 512 64 2 32 2 172)   # ... NKV F
    xl=(3 96 3 512 64 2 32)
    largest_default="L8xC256 L3xC96"
    largest_ram=${NNT_LARGEST_RAM_MIB:-48}
    cpus=(--cpus 2)
else
    small=(12 768 12 50257 1024 8 1024)
    llama=(16 2048 32 128256 1024 4 1024 8 8192)
    xl=(48 1600 25 50257 1024 4 1024)
    largest_default="L24xC5120 L19xC5120 L14xC5120"
    largest_ram=${NNT_LARGEST_RAM_MIB:-$(awk '/MemTotal/ { printf "%d", $2 / 1024 * 0.85 }' \
        /proc/meminfo)}
    cpus=()
fi
model_args() { # model_args L C NH V CTX B T
    echo --layers "$1" --channels "$2" --heads "$3" --vocab "$4" --context "$5" \
        --batch "$6" --seq "$7"
}
peak_gflops=989400   # dense bf16 of an H100/H200 SXM (compare_pytorch.py's figure)

# ---- phases -------------------------------------------------------------------------------------
phase_info() {
    put - date "$(str "$(date -u +%Y-%m-%d)")"
    put - invocation "$(str "$invocation")"
    local commit=
    if [ $rehearse = 0 ] && [ -f "$here/gpu-bundle/BUILD-INFO" ]; then
        commit=$(awk '/^source:/ { print $2 }' "$here/gpu-bundle/BUILD-INFO")
        cat "$here/gpu-bundle/BUILD-INFO" > "$out/info.txt"
    fi
    [ -n "$commit" ] || commit=$(git -C "$here" rev-parse --short HEAD 2> /dev/null || echo unknown)
    put - commit "$(str "$commit")"
    if [ $rehearse = 1 ]; then
        local cpu
        cpu=$(awk -F': ' '/^model name/ { print $2; exit }' /proc/cpuinfo)
        put - gpu "$(str "rehearsal, CPU only: $cpu")"
    else
        nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv >> "$out/info.txt" 2>&1
        { nproc; free -m; df -h /tmp | tail -1; ldd "$here/gpu-bundle/nnt-train.bin"; } \
            >> "$out/info.txt" 2>&1
        local gpu
        gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader 2> /dev/null | head -1)
        put - gpu "$(str "$gpu")"
        if grep -q '=> not found' "$out/info.txt"; then
            note "unresolved libraries: $(grep '=> not found' "$out/info.txt" | tr '\n' ' ')"
        fi
    fi
    say "info: $(awk -F'\t' '$1 == "-" { printf "%s=%s ", $2, $3 }' "$tsv")"
}

phase_budget() {
    local lim=$1 rc
    local env=(CK_RUN_CASE=context CK_DEFAULT_TIMEOUT=$lim)
    [ $rehearse = 0 ] && env+=(NNT_TEST_BUDGET_CUDA=1)
    env "${env[@]}" top_srcdir="$here" STARPU_HOME="$out/home-budget" timeout -k 5 "$lim" \
        "$testdir/test_api" > "$out/budget.log" 2>&1
    rc=$?
    local result
    case $rc in
    0) result="PASS" ;;
    124 | 137) result="TIMEOUT after $lim s (a hang?)" ;;
    *) result="FAIL (exit $rc): $(grep -m1 ':F:\|:E:' "$out/budget.log")" ;;
    esac
    put budget result "$(str "$result")"
    say "budget: $result"
}

phase_gpt2() {
    local lim=$1 m=("${small[@]}")
    local L=${m[0]} C=${m[1]} NH=${m[2]} V=${m[3]} CTX=${m[4]} B=${m[5]} T=${m[6]}
    local steps=8 data=$out/tokens-gpt2.bin init=
    put gpt2_124m_bf16 shape "$(str "L$L C$C NH$NH V$V B$B T$T")"
    write_tokens "$data" $(((steps + 1) * B * T + 1)) "$V"
    local half=$((lim / 2))
    if [ $have_torch = 1 ]; then
        init=$out/init-gpt2
        rm -rf "$init"
        torch_run torch-gpt2 "$half" $(model_args "${m[@]}") --steps $((steps - 2)) \
            --warmup 2 --data "$data" --save-init "$init"
        put gpt2_124m_bf16 torch_eager_s "$(num "$(torch_fig torch-gpt2 1)")"
        [ $torch_rc -eq 0 ] && [ -f "$init/config.json" ] || init=
    fi
    local from=(--layers "$L" --channels "$C" --heads "$NH" --vocab "$V" --context "$CTX")
    [ -n "$init" ] && from=(--load-hf "$init")
    local run_home=$out/home-nnt-gpt2   # none yet: the first step calibrates
    rm -rf "$run_home"
    nnt_run nnt-gpt2 $((lim - half)) "${from[@]}" --batch "$B" --seq "$T" --steps $steps \
        --data "$data" --data-format nanogpt --precision bf16 --lr 1e-4 "${cpus[@]}"
    put gpt2_124m_bf16 nnt_s "$(num "$(step_s nnt-gpt2)")"
    if [ -n "$init" ] && [ -s "$out/nnt-gpt2.loss" ]; then
        local diff
        diff=$(max_diff "$out/nnt-gpt2.loss" "$out/torch-gpt2.loss")
        put gpt2_124m_bf16 max_loss_diff "$(num "$diff")"
        say "gpt2 losses nnt:   $(tr '\n' ' ' < "$out/nnt-gpt2.loss")"
        say "gpt2 losses torch: $(tr '\n' ' ' < "$out/torch-gpt2.loss")"
    fi
    # the first step on a machine without performance models (issue 42's slow first steps)
    local first later
    first=$(awk 'NR == 1 { print $1 / 1000 }' "$out/nnt-gpt2.ms")
    later=$(step_s nnt-gpt2)
    put first_step first_s "$(num "$first")"
    put first_step later_s "$(num "$later")"
    put first_step ratio "$(num "$(awk -v a="$first" -v b="$later" \
        'BEGIN { if (b > 0) printf "%.3g", a / b }')")"
    put first_step start_s "$(num "$(awk -v w="$nnt_wall" '{ s += $1 / 1000 }
        END { printf "%.1f", w - s }' "$out/nnt-gpt2.ms")")"   # start-up, loading, files
    bash "$here/scripts/gpu-perfmodels.sh" "$out/home-nnt-gpt2" 1 > "$out/perfmodels-gpt2.txt"
    local models
    models=$(sed -n 's/^perfmodels //p' "$out/perfmodels-gpt2.txt" | tr '\n' ';' |
             sed 's/;$//; s/;/; /g')
    put first_step perfmodels "$(str "$models")"
    say "first step: $first s, later $later s; $models"
}

# llama_data: the token file of the llama and qlora phases (9 steps of B T; ids below 50257:
# nanoGPT's files hold uint16), into llama_tokens
llama_data() {
    local m=("${llama[@]}")
    llama_tokens=$out/tokens-llama.bin
    [ -f "$llama_tokens" ] || write_tokens "$llama_tokens" $((9 * m[5] * m[6] + 1)) \
        $((m[3] < 50257 ? m[3] : 50257))
}

# llama: Llama 3.2 1B's sizes (L16 C2048 NH32 NKV8 F8192 V128256, tied), B4 T1024, bf16:
# the PyTorch peer (LlamaForCausalLM, its initial weights written) and nnt-train from them
# on the same tokens (ids below 50257: nanoGPT's files hold uint16)
phase_llama() {
    local lim=$1 m=("${llama[@]}")
    local L=${m[0]} C=${m[1]} NH=${m[2]} V=${m[3]} CTX=${m[4]} B=${m[5]} T=${m[6]}
    local NKV=${m[7]} F=${m[8]} steps=8 data init=
    put llama_1b_bf16 shape "$(str "L$L C$C NH$NH NKV$NKV F$F V$V B$B T$T")"
    llama_data
    data=$llama_tokens
    local half=$((lim / 2))
    if [ $have_torch = 1 ]; then
        init=$out/init-llama
        rm -rf "$init"
        torch_run torch-llama "$half" $(model_args "${m[@]:0:7}") --family llama \
            --kv-heads "$NKV" --hidden "$F" --steps $((steps - 2)) --warmup 2 --data "$data" \
            --save-init "$init"
        put llama_1b_bf16 torch_eager_s "$(num "$(torch_fig torch-llama 1)")"
        [ $torch_rc -eq 0 ] && [ -f "$init/config.json" ] || init=
    fi
    local from=(--model llama-3.2-1b --layers "$L" --channels "$C" --heads "$NH" \
                --kv-heads "$NKV" --hidden "$F" --vocab "$V" --context "$CTX")
    [ -n "$init" ] && from=(--load-hf "$init")
    # step 2 traced (2.79 s against 0.19 s for steps 3-8 on 2026-12-04: DEST/llama-trace.svg,
    # its per-op table in the log)
    nnt_run nnt-llama $((lim - half)) "${from[@]}" --batch "$B" --seq "$T" --steps $steps \
        --data "$data" --data-format nanogpt --precision bf16 --lr 1e-4 \
        --peak-gflops $peak_gflops --trace "$dest/llama-trace.svg" --trace-steps 1 "${cpus[@]}"
    put llama_1b_bf16 nnt_s "$(num "$(step_s nnt-llama)")"
    put llama_1b_bf16 mfu "$(num "$(mean_after_first < "$out/nnt-llama.mfu")")"
    put llama_1b_bf16 first_s "$(num "$(awk 'NR == 1 { print $1 / 1000 }' "$out/nnt-llama.ms")")"
    if [ -n "$init" ] && [ -s "$out/nnt-llama.loss" ]; then
        put llama_1b_bf16 max_loss_diff \
            "$(num "$(max_diff "$out/nnt-llama.loss" "$out/torch-llama.loss")")"
        say "llama losses nnt:   $(tr '\n' ' ' < "$out/nnt-llama.loss")"
        say "llama losses torch: $(tr '\n' ' ' < "$out/torch-llama.loss")"
    fi
}

# qlora: Llama 3.2 1B's sizes with LoRA r 16 on all-linear, B4 T1024 bf16, the frozen base
# as it is and in NF4 (--quantize nf4: dequantized on the GPU since 2026-12-04)
phase_qlora() {
    local lim=$1 m=("${llama[@]}") q data
    llama_data
    data=$llama_tokens
    put qlora shape "$(str "L${m[0]} C${m[1]} NH${m[2]} NKV${m[7]} F${m[8]} V${m[3]} B${m[5]} T${m[6]}, LoRA r 16 all-linear")"
    for q in none nf4; do
        nnt_run "qlora-$q" $((lim / 2)) --model llama-3.2-1b $(model_args "${m[@]:0:7}") \
            --kv-heads "${m[7]}" --hidden "${m[8]}" --steps 8 --data "$data" \
            --data-format nanogpt --precision bf16 --lr 1e-4 --lora-rank 16 \
            --lora-targets all-linear --quantize "$q" "${cpus[@]}"
        put qlora "${q}_s" "$(num "$(awk 'NR >= 3 { s += $1 / 1000; n++ }
            END { if (n) printf "%.6g", s / n }' "$out/qlora-$q.ms")")"
        put qlora "${q}_ms" "$(str "$(tr '\n' ' ' < "$out/qlora-$q.ms")(exit $nnt_rc)")"
        put qlora "${q}_memory" "$(str "$(grep -m1 '^memory:' "$out/qlora-$q.log")")"
    done
}

phase_first_all() {
    local lim=$1 m=("${small[@]}")
    local run_home=$out/home-nnt-first-all
    rm -rf "$run_home"
    NNT_CPU_TASKS=all nnt_run nnt-first-all "$lim" $(model_args "${m[@]}") --steps 3 \
        --precision bf16 --cpus 2
    bash "$here/scripts/gpu-perfmodels.sh" "$out/home-nnt-first-all" 1 \
        > "$out/perfmodels-first-all.txt"
    put first_step all_ms "$(str "$(tr '\n' ' ' < "$out/nnt-first-all.ms")(exit $nnt_rc)")"
}

# ab_phase KEY VAR A B LIMIT: GPT-2 124M (the gpt2 phase's sizes, token file and calibrated
# models), 10 steps with VAR=A then VAR=B: KEY.A_ms, KEY.B_ms (every step), KEY.A_s, KEY.B_s
# (the mean of steps 4-10), KEY.speedup (A's over B's), KEY.max_loss_diff.
ab_phase() {
    local key=$1 var=$2 a=$3 b=$4 lim=$5 m=("${small[@]}") v
    local data=$out/tokens-gpt2.bin
    [ -f "$data" ] || write_tokens "$data" $((11 * m[5] * m[6] + 1)) "${m[3]}"
    local run_home=$out/home-nnt-gpt2   # the gpt2 phase's models, when it ran
    mkdir -p "$run_home"
    declare -A secs
    local had=${!var+1} before=${!var-}
    for v in "$a" "$b"; do
        export "$var=$v"
        nnt_run "$key-$v" $((lim / 2)) $(model_args "${m[@]}") --steps 10 \
            --data "$data" --data-format nanogpt --precision bf16 --lr 1e-4 "${cpus[@]}"
        if [ -n "$had" ]; then export "$var=$before"; else unset "$var"; fi
        put "$key" "${v}_ms" "$(str "$(tr '\n' ' ' < "$out/$key-$v.ms")(exit $nnt_rc)")"
        secs[$v]=$(awk 'NR >= 4 { s += $1 / 1000; n++ } END { if (n) printf "%.6g", s / n }' \
            "$out/$key-$v.ms")
        put "$key" "${v}_s" "$(num "${secs[$v]}")"
    done
    put "$key" speedup "$(num "$(awk -v x="${secs[$a]}" -v y="${secs[$b]}" \
        'BEGIN { if (x > 0 && y > 0) printf "%.3g", x / y }')")"
    put "$key" max_loss_diff "$(num "$(max_diff "$out/$key-$a.loss" "$out/$key-$b.loss")")"
    say "$key: $a $(tr '\n' ' ' < "$out/$key-$a.ms")ms; $b" \
        "$(tr '\n' ' ' < "$out/$key-$b.ms")ms"
}

phase_attn() { ab_phase attn NNT_CUDA_ATTN flash products "$1"; }
phase_norm() { ab_phase norm NNT_CUDA_NORM_BWD rows chunks "$1"; }

phase_steps() {
    local lim=$1 m=("${small[@]}") v sched
    local data=$out/tokens-gpt2.bin
    [ -f "$data" ] || write_tokens "$data" $((13 * m[5] * m[6] + 1)) "${m[3]}"
    local run_home=$out/home-nnt-gpt2   # the gpt2 phase's models, when it ran
    mkdir -p "$run_home"
    for v in dmdas eager trace; do
        sched=$v trace=()
        [ $v = trace ] && sched=dmdas trace=(--trace "$dest/steps-trace.svg" --trace-steps 11)
        STARPU_SCHED=$sched nnt_run "steps-$v" $((lim / 3)) $(model_args "${m[@]}") \
            --steps 12 --data "$data" --data-format nanogpt --precision bf16 --lr 1e-4 \
            "${trace[@]}" "${cpus[@]}"
        put steps "${v}_ms" "$(str "$(tr '\n' ' ' < "$out/steps-$v.ms")(exit $nnt_rc)")"
    done
}

# the 1558M runs share one token file
xl_data() {
    local m=("${xl[@]}")
    xl_tokens=$out/tokens-xl.bin
    [ -f "$xl_tokens" ] || write_tokens "$xl_tokens" $((8 * m[5] * m[6] + 1)) "${m[3]}"
}

phase_xl() {
    local lim=$1 m=("${xl[@]}")
    xl_data
    put gpt2_1558m_bf16 shape "$(str "L${m[0]} C${m[1]} NH${m[2]} V${m[3]} B${m[5]} T${m[6]}")"
    local half=$((lim / 2))
    nnt_run nnt-xl "$half" $(model_args "${m[@]}") --steps 6 --data "$xl_tokens" \
        --data-format nanogpt --precision bf16 --lr 1e-4 --peak-gflops $peak_gflops "${cpus[@]}"
    put gpt2_1558m_bf16 nnt_s "$(num "$(step_s nnt-xl)")"
    put gpt2_1558m_bf16 mfu "$(num "$(mean_after_first < "$out/nnt-xl.mfu")")"
    if [ $have_torch = 1 ]; then
        torch_run torch-xl $((lim - half)) $(model_args "${m[@]}") --steps 4 --warmup 2 \
            --data "$xl_tokens"
        local s p
        s=$(torch_fig torch-xl 1)
        p=$(torch_fig torch-xl 3)
        put gpt2_1558m_bf16 torch_eager_s "$(num "$s")"
        put gpt2_1558m_bf16 torch_mfu "$(num "$(awk -v s="$s" -v p="$p" -v L="${m[0]}" \
            -v C="${m[1]}" -v B="${m[5]}" -v T="${m[6]}" -v peak=$peak_gflops 'BEGIN {
            if (s > 0) printf "%.4f", (6 * p * B * T + 12 * L * B * T * T * C) / s / (peak * 1e9)
            }')")"
    fi
}

phase_offload() {
    local lim=$1 m=("${xl[@]}")
    xl_data
    local params state budget
    params=$(gpt2_params "${m[0]}" "${m[1]}" "${m[3]}" "${m[4]}")
    state=$(awk -v p="$params" 'BEGIN { printf "%d", p * 16 / 1048576 }')
    budget=$((state / 4))
    put offload state_mib "$state"
    put offload gpu_budget_mib "$budget"
    local part=$((lim * 3 / 10))
    nnt_run nnt-incore "$part" $(model_args "${m[@]}") --steps 5 --recompute \
        --data "$xl_tokens" --data-format nanogpt --precision bf16 --lr 1e-4 "${cpus[@]}"
    put offload in_core_s "$(num "$(step_s nnt-incore)")"
    nnt_run nnt-offload $((lim * 4 / 10)) $(model_args "${m[@]}") --steps 5 --recompute \
        --mem-gpu "$budget" --data "$xl_tokens" --data-format nanogpt --precision bf16 \
        --lr 1e-4 "${cpus[@]}"
    put offload offloaded_s "$(num "$(step_s nnt-offload)")"
    put offload max_loss_diff "$(num "$(max_diff "$out/nnt-incore.loss" "$out/nnt-offload.loss")")"
    put offload throughput_ratio "$(num "$(awk -v a="$(step_s nnt-incore)" \
        -v b="$(step_s nnt-offload)" 'BEGIN { if (a > 0 && b > 0) printf "%.3g", a / b }')")"
    # the same budget with the optimizer's tasks on the CPU workers (weights and moments
    # stay in RAM: only gradients come down, bf16 weight copies go up)
    NNT_OPTIM_ON=cpu nnt_run nnt-offload-cpuopt $((lim - part - lim * 4 / 10)) \
        $(model_args "${m[@]}") --steps 5 --recompute --mem-gpu "$budget" \
        --data "$xl_tokens" --data-format nanogpt --precision bf16 --lr 1e-4 "${cpus[@]}"
    put offload optim_on_cpu_s "$(num "$(step_s nnt-offload-cpuopt)")"
    put offload optim_on_cpu_loss_diff "$(num "$(max_diff "$out/nnt-incore.loss" \
        "$out/nnt-offload-cpuopt.loss")")"
    grep -h '^memory:' "$out/nnt-incore.log" "$out/nnt-offload.log" \
        "$out/nnt-offload-cpuopt.log" 2>/dev/null | sed 's/^/    /' | tee -a "$out/summary.txt"
}

phase_largest() {
    local lim=$1 c L C NH shape params
    local ends=$(($(date +%s) + lim))
    for c in ${NNT_LARGEST:-$largest_default}; do
        L=${c#L}; L=${L%%x*}; C=${c#*xC}
        NH=$((C / 128)); [ $NH -ge 1 ] || NH=1
        [ $rehearse = 1 ] && NH=$((C / 32))
        local left=$((ends - $(date +%s)))
        [ $left -gt 20 ] || { note "largest: no time left for $c"; break; }
        nnt_run "nnt-largest-$c" "$left" --layers "$L" --channels "$C" --heads "$NH" \
            --vocab "${xl[3]}" --context "${xl[4]}" --batch "${xl[5]}" --seq "${xl[6]}" \
            --steps 2 --recompute --mem-cpu "$largest_ram" --precision bf16 --lr 1e-4 "${cpus[@]}"
        if grep -q 'need at least' "$out/nnt-largest-$c.log" &&
           [ ! -s "$out/nnt-largest-$c.ms" ]; then
            say "largest: $c does not fit a RAM budget of $largest_ram MiB"
            continue
        fi
        params=$(gpt2_params "$L" "$C" "${xl[3]}" "${xl[4]}")
        put largest parameters "$params"
        shape="L$L C$C NH$NH B${xl[5]} T${xl[6]}, --mem-cpu $largest_ram, exit $nnt_rc"
        put largest shape "$(str "$shape")"
        put largest step_s "$(num "$(awk 'NR == 2 { print $1 / 1000 }' "$out/nnt-largest-$c.ms")")"
        put largest first_step_s "$(num "$(awk 'NR == 1 { print $1 / 1000 }' \
            "$out/nnt-largest-$c.ms")")"
        break
    done
}

phase_suite() {
    local lim=$1 jobs=${NNT_TEST_JOBS:-8} each=${NNT_TEST_TIMEOUT:-90} names t name sh
    local shards=${NNT_TEST_SHARDS:-3}
    [ $rehearse = 1 ] && names=${NNT_TESTS:-ctx_alloc} || names=${NNT_TESTS:-}
    [ "$each" -gt "$lim" ] && each=$lim
    local ends=$(($(date +%s) + lim))
    mkdir -p "$out/suite"
    : > "$out/suite/results"
    local running=0 list=()
    # the programs, larger sources (more tests) first; those on tests/testutil.h in shards
    for t in $(for t in "$testdir"/test_*; do
                   n=$(basename "$t"); n=${n#test_}
                   echo "$(cat "$here/tests/test_$n".c* 2> /dev/null | wc -c) $t"
               done | sort -rn | cut -d' ' -f2); do
        name=$(basename "$t"); name=${name#test_}
        case $name in cuda_kernels | *.* ) continue ;; esac
        [ -x "$t" ] || continue
        if [ -n "$names" ]; then case " $names " in *" $name "*) ;; *) continue ;; esac; fi
        if [ "$shards" -gt 1 ] && grep -qs 'testutil.h' "$here/tests/test_$name".c*; then
            for sh in $(seq 0 $((shards - 1))); do list+=("$name $sh/$shards"); done
        else
            list+=("$name -")
        fi
    done
    local job
    for job in "${list[@]}"; do
        name=${job% *} sh=${job#* }
        local left=$((ends - $(date +%s)))
        [ $left -gt 5 ] || { echo "$name $sh 0 notrun" >> "$out/suite/results"; continue; }
        (
            t0=$(date +%s)
            tag=$name; [ "$sh" = - ] || tag=$name.${sh%/*}
            env $([ "$sh" = - ] || echo NNT_TEST_SHARD="$sh") \
                STARPU_NCPU=${STARPU_NCPU:-2} top_srcdir="$here" top_builddir="$builddir" \
                CK_DEFAULT_TIMEOUT=$each STARPU_HOME="$out/suite/home-$tag" \
                NNT_TOL_REPORT="$out/suite/tol-$tag.txt" \
                timeout -k 5 "$(( each < left ? each : left ))" "$testdir/test_$name" \
                > "$out/suite/$tag.log" 2>&1
            rc=$?
            echo "$name $sh $(( $(date +%s) - t0 )) $rc" >> "$out/suite/results"
        ) &
        running=$((running + 1))
        [ $running -lt "$jobs" ] || { wait -n; running=$((running - 1)); }
    done
    wait
    # per program: failed if a shard failed, else stopped at the limit if one was, else not
    # run if one was not, else skipped if all skipped, else passed
    awk '{ s = $4 == 0 ? 0 : $4 == 77 ? 1 : $4 == "notrun" ? 2 : ($4 == 124 || $4 == 137) ? 3 : 4
           if (!($1 in st) || s > st[$1] || (s == 1 && st[$1] == 0)) st[$1] = s
           if (s == 0) ok[$1] = 1
           if (!($1 in t) || $3 + 0 > t[$1]) t[$1] = $3 + 0
           if (s == 4) why[$1] = "exit " $4 }
         END { for (n in st) { v = st[n] == 1 && ok[n] ? 0 : st[n]
                               print n, t[n], v, (n in why) ? why[n] : "" } }' \
        "$out/suite/results" | sort > "$out/suite/programs"
    local pass fail skip tout notrun failed
    pass=$(awk '$3 == 0' "$out/suite/programs" | wc -l)
    skip=$(awk '$3 == 1' "$out/suite/programs" | wc -l)
    notrun=$(awk '$3 == 2' "$out/suite/programs" | wc -l)
    tout=$(awk '$3 == 3' "$out/suite/programs" | wc -l)
    fail=$(awk '$3 == 4' "$out/suite/programs" | wc -l)
    failed=$(awk '$3 >= 2 {
        why = $3 == 3 ? "limit" : $3 == 2 ? "not run" : $4 " " $5
        printf "%s%s (%s, %s s)", s, $1, why, $2; s = ", " }' "$out/suite/programs")
    put suite pass "$pass"; put suite fail "$fail"; put suite skip "$skip"
    put suite timeout "$tout"; put suite not_run "$notrun"
    put suite limit "$(str "$jobs at once, each under $each s, all under $lim s, $shards shards")"
    put suite failed "$(str "$failed")"
    say "suite: $pass passed, $fail failed, $skip skipped, $tout at their limit, $notrun not" \
        "run: $failed"
}

phase_compile() {
    local lim=$1 m=("${small[@]}")
    if [ $have_torch = 0 ] || { [ $rehearse = 1 ] && [ "${NNT_REHEARSE_COMPILE:-0}" != 1 ]; }; then
        say "compile: skipped (no PyTorch, or a rehearsal without NNT_REHEARSE_COMPILE=1)"
        return 0
    fi
    local data=$out/tokens-gpt2.bin
    [ -f "$data" ] || write_tokens "$data" $((9 * m[5] * m[6] + 1)) "${m[3]}"
    torch_run torch-compile "$lim" $(model_args "${m[@]}") --steps 6 --warmup 2 --mode compile \
        --data "$data"
    put gpt2_124m_bf16 torch_compile_s "$(num "$(torch_fig torch-compile 1)")"
    put gpt2_124m_bf16 torch_compile_first_s "$(num "$(torch_fig torch-compile 2)")"
}

phase_kernels() {
    local lim=$1
    [ -x "$testdir/test_cuda_kernels" ] ||
        { say "kernels: no test_cuda_kernels in $testdir (a build without CUDA)"; return 0; }
    top_srcdir="$here" CK_DEFAULT_TIMEOUT=$lim NNT_TOL_REPORT="$out/tolerances-cuda_kernels.txt" \
        timeout -k 5 "$lim" "$testdir/test_cuda_kernels" > "$out/kernels.log" 2>&1
    put kernels exit "$?"
    put kernels checks "$(str "$(grep -m1 'Checks' "$out/kernels.log")")"
    say "kernels: $(grep -m1 'Checks' "$out/kernels.log")"
}

# window_figs GROUP LOG KEY: the median line of bench/attention_window's LOG as results
# GROUP.KEY_causal_ms, _window_ms, _bwd_ms (the window's backward) and _ratio
window_figs() {
    local line c w g r
    line=$(grep -m1 '^median:' "$2") || { put "$1" "$3_ratio" null; return 0; }
    c=$(echo "$line" | sed -n 's/^median: causal \([0-9.]*\) ms.*/\1/p')
    w=$(echo "$line" | sed -n 's/.*, window \([0-9.]*\) ms.*/\1/p')
    g=$(echo "$line" | sed -n 's/.*, window [0-9.]* ms (forward [0-9.]*, backward \([0-9.]*\)).*/\1/p')
    r=$(echo "$line" | sed -n 's/.*times: median \([0-9.]*\)x.*/\1/p')
    put "$1" "$3_causal_ms" "$(num "$c")"
    put "$1" "$3_window_ms" "$(num "$w")"
    put "$1" "$3_bwd_ms" "$(num "$g")"
    put "$1" "$3_ratio" "$(num "$r")"
    say "$1 $3: causal $c ms, window $w ms (backward $g), ratio $r"
}

phase_window() {
    local lim=$1 prec rc b=$builddir/bench/attention_window
    [ -x "$b" ] || { say "window: no bench/attention_window in $builddir"; return 0; }
    local args=(5 4096 512 256 8 8 64)
    [ $rehearse = 1 ] && args=(2 512 64 64 2 2 16)
    put window shape "$(str "rounds T W tile NH NKV HD: ${args[*]}")"
    for prec in fp32 bf16; do
        STARPU_HOME="$out/home-window" timeout -k 5 $((lim / 2)) "$b" "${args[@]}" "$prec" \
            > "$out/window-$prec.log" 2>&1
        rc=$?
        [ $rc -eq 0 ] || say "window $prec: exit $rc: $(tail -n 1 "$out/window-$prec.log")"
        window_figs window "$out/window-$prec.log" "$prec"
    done
}

phase_cpuwindow() {
    local lim=$1 v env htile rc b=$builddir/bench/attention_window
    [ -x "$b" ] || { say "cpuwindow: no bench/attention_window in $builddir"; return 0; }
    local args=(3 4096 512 256 8 8 64 fp32)
    [ $rehearse = 1 ] && args=(2 512 64 64 2 2 16 fp32)
    put cpuwindow ncpus "$(nproc)"
    for v in blocks rule bands heads2; do
        env=; htile=${args[4]}
        case $v in blocks) env=0 ;; bands) env=2 ;; heads2) htile=2 ;; esac
        STARPU_HOME="$out/home-cpuwindow" STARPU_NCUDA=0 NNT_ATTN_BAND_TASKS=$env \
            timeout -k 5 $((lim / 4)) "$b" "${args[@]}" "$htile" > "$out/cpuwindow-$v.log" 2>&1
        rc=$?
        [ $rc -eq 0 ] || say "cpuwindow $v: exit $rc: $(tail -n 1 "$out/cpuwindow-$v.log")"
        window_figs cpuwindow "$out/cpuwindow-$v.log" "$v"
    done
}

phase_cpubench() {
    local lim=$1
    lscpu > "$out/lscpu.txt" 2>&1
    (cd "$here" && LD_LIBRARY_PATH=$py_ld_path PYTHONUNBUFFERED=1 timeout "$lim" "$py" \
        bench/compare_cpu_kernels.py \
        --nnt-train cpu-bundle/nnt-train --threads "${NNT_CPU_THREADS:-2}" --rounds 2 --steps 3 \
        --output "$out/RESULTS-cpu-kernels.md" ${NNT_CPUBENCH_ARGS:-}) > "$out/cpubench.log" 2>&1
    say "cpubench: exit $?"
}

# defaults: limit and the least worth starting with
declare -A phase_limit=([info]=20 [budget]=60 [gpt2]=170 [llama]=170 [qlora]=150 [xl]=200 [offload]=300 [largest]=200
                        [suite]=150 [compile]=200 [kernels]=90 [first-all]=150 [cpubench]=300
                        [window]=60 [cpuwindow]=60 [steps]=150 [attn]=120 [norm]=120)
declare -A phase_min=([info]=5 [budget]=20 [gpt2]=60 [llama]=60 [qlora]=60 [xl]=80 [offload]=100 [largest]=60
                      [suite]=30 [compile]=90 [kernels]=30 [first-all]=60 [cpubench]=60
                      [window]=20 [cpuwindow]=20 [steps]=45 [attn]=40 [norm]=40)
: > "$tsv"
status=0
for phase in "$@"; do
    [ -n "${phase_limit[$phase]:-}" ] ||
        { echo "gpu-session: unknown phase '$phase' (see --help)" >&2; exit 2; }
done
case " $* " in *" info "*) ;; *) set -- info "$@" ;; esac   # every call says what and where
for phase in "$@"; do
    lim=$(limit "$phase" "${phase_limit[$phase]}" "${phase_min[$phase]}")
    if [ "$lim" -eq 0 ]; then
        note "$phase skipped: not enough time left before the deadline of $deadline s"
        write_results
        continue
    fi
    echo "== $phase (limit $lim s, at $(( $(date +%s) - start_s )) s)"
    "phase_${phase//-/_}" "$lim" || status=1
    write_results
done
echo "== done in $(( $(date +%s) - start_s )) s: $dest/RESULTS-gpu.json"
exit $status
