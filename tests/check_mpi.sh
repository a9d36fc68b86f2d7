#!/bin/sh
# SPDX-License-Identifier: MIT
# Training over StarPU-MPI on this machine (mpirun -np 2): GPT-2 "tiny", 10 AdamW steps with
# clipping, two tilings and a third of single-tile parameters; the losses of the sharded and
# data distributions (and, for the first tiling, of the root one) against the
# single-process run of the same tiling (equal bit for bit; the difference is printed), the
# parameters read back on every rank (equal on both ranks and to the single process), a
# checkpoint (rank 0's the same bytes as one process's, none from rank 1), the bytes each
# rank owns (<= 0.6 x the single process), release_weights (the same losses, less memory
# held after a backward), and options that differ across ranks (NNT_E_INVAL on every rank,
# no hang), the default RAM budget (each rank's share of the node's), a rank killed mid-run (the job ends, naming it); nnt-train under mpirun (the
# same --print-loss lines and checkpoint, resume, --trace of both ranks, --release-weights,
# a RAM budget that one process cannot train in but 2 sharded ranks can, and a smaller one
# with a disk swap on each rank (one process's losses, the weights named among what moved
# to disk); --distribute data
# and its checkpoint resumed by one process; a Llama-family model under both
# distributions, and with LoRA adapters; packed rows (example starts) with --recompute; DPO
# on pairs of rows (the reference and the held-out pairs), ORPO, SimPO and RPO with the data
# distributed; a regression and KTO with the data distributed;
# mixture-of-experts models (moe-tiny and gpt-oss-tiny through
# nnt-train, Qwen2-MoE through test_mpi moe) under both distributions; SIGTERM to both
# ranks or to one, SIGUSR1 to one: the ranks stop or save after the same step). A library
# built without StarPU-MPI must refuse mpi = 1 (NNT_E_UNSUPPORTED); then the rest is
# skipped, as it is without mpirun. Any build: nnt_ctx_rank and the option checks without
# MPI.
set -u
: "${top_builddir:?}"
prog="$top_builddir/tests/test_mpi"
[ -x "$prog" ] || { echo "FAIL: $prog was not built"; exit 1; }
"$prog" local || { echo "FAIL: nnt_ctx_rank / MPI options without MPI"; exit 1; }
if ! grep -q '^#define NNT_HAVE_MPI 1' "$top_builddir/config.h"; then
    "$prog" unsupported || { echo "FAIL: mpi = 1 without StarPU-MPI"; exit 1; }
    echo "SKIP: nnt was built without StarPU-MPI (configure --with-mpi; Debian: libopenmpi-dev)"
    exit 77
fi
command -v mpirun > /dev/null 2>&1 || { echo "SKIP: mpirun not found (Debian: openmpi-bin)"; exit 77; }
. "$top_srcdir/tests/mpi_procs.sh"   # $tmp, fail(), STARPU_HOME and TMPDIR in $tmp

MPIRUN="mpirun --oversubscribe -np 2"
[ "$(id -u)" -eq 0 ] && MPIRUN="$MPIRUN --allow-run-as-root"
TIMEOUT=
command -v timeout > /dev/null 2>&1 && TIMEOUT="timeout 150"

# field FILE KEY: the values of the lines "KEY STEP VALUE" (or "KEY VALUE"), one per line
field() { awk -v k="$2" '$1 == k { print $NF }' "$1"; }

# lossdiffs REF RUN: the "loss STEP VALUE" lines of RUN against REF's: "D1 D2 MAX" (the
# differences at steps 1 and 2 and the largest), or "count" unless there are 10.
lossdiffs() {
    awk 'NR == FNR { if ($1 == "loss") ref[$2] = $3; next }
         $1 == "loss" && ($2 in ref) { d = $3 - ref[$2]; if (d < 0) d = -d
                                       if (d > m) m = d; if ($2 == 1) d1 = d
                                       if ($2 == 2) d2 = d; c++ }
         END { if (c != 10) print "count"; else printf "%.3g %.3g %.3g\n", d1, d2, m }' \
        "$1" "$2"
}

# compare NAME REF RUN: losses within 1e-6 (the largest difference printed), parameters
# equal on every rank and to the single process, owned bytes <= 0.6 x.
compare() {
    name=$1 ref=$2 run=$3
    for r in 0 1; do
        [ -s "$run.$r" ] || { fail "$name: rank $r wrote nothing"; return; }
        diff=$(lossdiffs "$ref.0" "$run.$r")
        diff=${diff##* }   # the largest
        case $diff in
            count) fail "$name: rank $r has not the 10 losses of the single process";;
            *) echo "$name: rank $r: largest loss difference to one process: $diff"
               awk -v d="$diff" 'BEGIN { exit !(d <= 1e-6) }' || fail "$name: losses differ by $diff";;
        esac
        [ "$r" = 0 ] && ! cmp -s "$ref.ckpt.0" "$run.ckpt.0" &&
            fail "$name: rank 0's checkpoint differs from one process's"
        [ "$r" = 1 ] && [ -e "$run.ckpt.1" ] && fail "$name: rank 1 wrote a checkpoint"
        [ "$(field "$run.$r" params)" = "$(field "$ref.0" params)" ] ||
            fail "$name: rank $r read parameters summing to $(field "$run.$r" params), one process $(field "$ref.0" params)"
    done
}

# owned NAME REF RUN: each rank's owned bytes <= 0.6 x the single process's
owned() {
    one=$(field "$2.0" owned)
    for r in 0 1; do
        mine=$(field "$3.$r" owned)
        echo "$1: rank $r owns $mine bytes, one process $one"
        awk -v a="$mine" -v b="$one" 'BEGIN { exit !(a > 0 && a <= 0.6 * b) }' ||
            fail "$1: rank $r owns $mine bytes, more than 0.6 x $one"
    done
}

# train NAME MPI DIST TILING...: OUT is $tmp/NAME
train() {
    name=$1 mpi=$2; shift 2
    if [ "$mpi" = 1 ]; then
        $TIMEOUT $MPIRUN "$prog" train "$tmp/$name" 1 "$@" > "$tmp/$name.log" 2>&1
    else
        $TIMEOUT "$prog" train "$tmp/$name" 0 "$@" > "$tmp/$name.log" 2>&1
    fi
    status=$?
    [ $status -eq 0 ] || { fail "$name: exit status $status"; tail -n 15 "$tmp/$name.log"; }
}

# tiling 1: batch 2 seq 16 channels 32 hidden 64 vocab 128 (several tiles per dimension)
t1="2 16 32 64 128"
train one1 0 sharded $t1
train sharded1 1 sharded $t1
compare "tiling 1, sharded" "$tmp/one1" "$tmp/sharded1"
# Open MPI's yield_when_idle: set to 1 by nnt for MPI_Init, a value the user gave stands
for r in 0 1; do
    [ "$(field "$tmp/sharded1.$r" yield)" = 1 ] ||
        fail "rank $r: OMPI_MCA_mpi_yield_when_idle is $(field "$tmp/sharded1.$r" yield), not 1"
done
OMPI_MCA_mpi_yield_when_idle=0 train yield0 1 sharded $t1
[ "$(field "$tmp/yield0.1" yield)" = 0 ] ||
    fail "OMPI_MCA_mpi_yield_when_idle=0 became $(field "$tmp/yield0.1" yield)"
echo "Open MPI yield_when_idle: 1 by default, the user's 0 kept"
owned "tiling 1, sharded" "$tmp/one1" "$tmp/sharded1"
train root1 1 root $t1
compare "tiling 1, root" "$tmp/one1" "$tmp/root1"

# release_weights: the same losses (the same tasks; only copies are dropped and fetched
# again), and less memory held on each rank after a backward: the weights it received,
# W (N-1)/N in theory, are gone (measured: 1429760 against 1665920 bytes on rank 0 at
# tiling 1, sharded: 0.474 W less on both ranks, both tilings and distributions; 0.067 W
# when only the tied token table was released).
# released NAME KEPT RUN: each rank's "held" bytes at least 0.4 W below KEPT's; losses the
# same lines
released() {
    for r in 0 1; do
        kept=$(field "$2.$r" held) rel=$(field "$3.$r" held) w=$(field "$3.$r" param_bytes)
        echo "$1: rank $r holds $rel bytes after a backward, $kept keeping the weights" \
             "(W = $w; peaks $(field "$3.$r" peak) and $(field "$2.$r" peak))"
        awk -v a="$rel" -v b="$kept" -v w="$w" 'BEGIN { exit !(a > 0 && w > 0 && b - a >= 0.4 * w) }' ||
            fail "$1: rank $r holds $rel bytes after a backward, not 0.4 x $w less than $kept"
        [ "$(grep '^loss' "$3.$r")" = "$(grep '^loss' "$2.$r")" ] ||
            fail "$1: rank $r: other losses than without release_weights"
    done
}
train release1 1 sharded-release $t1
compare "tiling 1, sharded, release_weights" "$tmp/one1" "$tmp/release1"
released "tiling 1, sharded, release_weights" "$tmp/sharded1" "$tmp/release1"

# tiling 2: batch 1 seq 32 channels 16 hidden 128 vocab 64
t2="1 32 16 128 64"
train one2 0 sharded $t2
train sharded2 1 sharded $t2
compare "tiling 2, sharded" "$tmp/one2" "$tmp/sharded2"
owned "tiling 2, sharded" "$tmp/one2" "$tmp/sharded2"

# tiling 3: one tile along channels, hidden and vocabulary: every parameter is a single
# tile. Cyclic placement over (tensor + tile) put 0.87 of the state on rank 0 here (every
# parameter is created beside its gradient, so all had the same parity); parameters are
# placed by bytes now: 0.499 and 0.501.
t3="2 32 -1 -1 -1"
train one3 0 sharded $t3
train sharded3 1 sharded $t3
compare "tiling 3, sharded" "$tmp/one3" "$tmp/sharded3"
owned "tiling 3, sharded" "$tmp/one3" "$tmp/sharded3"

# data distribution: rows of activations by rank; a weight-gradient tile travels to each
# rank in turn (starpu_mpi_data_migrate), which adds its own rows in one process's order,
# or, where that sends fewer bytes, the rows travel to it (both tilings below have products
# of each kind: NNT_LOG_LEVEL=debug names the choice). The losses are one process's bit
# for bit (all 10 steps; a sum of per-rank partials in rank order, the first version,
# differed by up to 3.4e-6). Both ranks read the same parameters, and each owns about half
# the bytes.
compare_data() {
    name=$1 ref=$2 run=$3
    for r in 0 1; do
        [ -s "$run.$r" ] || { fail "$name: rank $r wrote nothing"; return; }
        res=$(lossdiffs "$ref.0" "$run.$r")
        case $res in
            count) fail "$name: rank $r has not the 10 losses of the single process";;
            *) set -- $res
               echo "$name: rank $r: loss difference to one process: step 1 $1, step 2 $2, largest $3"
               awk -v a="$1" -v b="$2" -v m="$3" 'BEGIN { exit !(a == 0 && b == 0 && m == 0) }' ||
                   fail "$name: losses differ by $1 (step 1), $2 (step 2), $3 (largest)";;
        esac
    done
    [ "$(field "$run.0" params)" = "$(field "$run.1" params)" ] ||
        fail "$name: the ranks read different parameters"
    [ -e "$run.ckpt.1" ] && fail "$name: rank 1 wrote a checkpoint"
    [ -s "$run.ckpt.0" ] || fail "$name: rank 0 wrote no checkpoint"
}
NNT_LOG_LEVEL=debug train data1 1 data $t1
compare_data "tiling 1, data" "$tmp/one1" "$tmp/data1"
for way in "they travel" "the rows travel"; do   # both ways ran, to the same bits
    n=$(grep -c "data distribution: .*: $way\$" "$tmp/data1.log")
    echo "tiling 1, data: $n products where $way"
    [ "$n" -gt 0 ] || fail "tiling 1, data: no product where $way"
done
owned "tiling 1, data" "$tmp/one1" "$tmp/data1"
# three ranks (rows 0 and 1 of 4 on rank 0): the same bits under both distributions. Data
# runs whose gradient tiles travelled through the 3 ranks hung in the first gradient norm:
# with more than 2 ranks the rows travel instead (lib/ops/gemm.c, data_travel)
mpirun2=$MPIRUN
MPIRUN=$(echo "$mpirun2" | sed 's/-np 2/-np 3/')
train data1n3 1 data $t1
train sharded1n3 1 sharded $t1
MPIRUN=$mpirun2
compare_data "tiling 1, data, 3 ranks" "$tmp/one1" "$tmp/data1n3"
compare "tiling 1, sharded, 3 ranks" "$tmp/one1" "$tmp/sharded1n3"
train data2 1 data $t2
compare_data "tiling 2, data" "$tmp/one2" "$tmp/data2"
owned "tiling 2, data" "$tmp/one2" "$tmp/data2"
train drelease2 1 data-release $t2
compare_data "tiling 2, data, release_weights" "$tmp/one2" "$tmp/drelease2"
released "tiling 2, data, release_weights" "$tmp/data2" "$tmp/drelease2"

# options that differ across ranks, or invalid on one rank: an error on every rank
$TIMEOUT $MPIRUN "$prog" options > "$tmp/options.log" 2>&1 ||
    { fail "options: exit status $?"; tail -n 15 "$tmp/options.log"; }
grep 'as expected' "$tmp/options.log"

# nnt-train under mpirun: --print-loss the same lines as one process (validations and
# --shuffle too),
# only rank 0's files,
# the checkpoint the same bytes; a one-process checkpoint resumed by 2 ranks continues as
# the uninterrupted run.
train_prog="$top_builddir/nnt-train"
small_model
small="$small --steps 6"
# run_train NAME MPI ARGS...
run_train() {
    name=$1 mpi=$2; shift 2
    if [ "$mpi" = 1 ]; then
        $TIMEOUT $MPIRUN "$train_prog" $small "$@" > "$tmp/$name.txt" 2> "$tmp/$name.err"
    else
        $TIMEOUT "$train_prog" $small "$@" > "$tmp/$name.txt" 2> "$tmp/$name.err"
    fi
    status=$?
    [ $status -eq 0 ] || { fail "nnt-train $name: exit status $status"; tail -n 5 "$tmp/$name.err"; }
}
run_train t_one 0 --out "$tmp/t_one"
run_train t_two 1 --out "$tmp/t_two"
[ "$(grep -c '^step [0-9]* loss ' "$tmp/t_two.txt")" -eq 6 ] ||
    fail "nnt-train -np 2: not 6 loss lines (only rank 0 prints)"
run_train t_vone 0 --out "$tmp/t_vone" --val-split 0.2 --val-every 3 --shuffle
run_train t_vtwo 1 --out "$tmp/t_vtwo" --val-split 0.2 --val-every 3 --shuffle
[ "$(grep -c '^val [36] loss ' "$tmp/t_vtwo.txt")" -eq 2 ] &&
    cmp -s "$tmp/t_vone.txt" "$tmp/t_vtwo.txt" &&
    echo "nnt-train -np 2 --val-split --shuffle: the training and validation losses of one process" ||
    { fail "nnt-train -np 2 --val-split --shuffle: not the losses of one process, validated after steps 3, 6";
      paste "$tmp/t_vone.txt" "$tmp/t_vtwo.txt"; }
cmp -s "$tmp/t_one.txt" "$tmp/t_two.txt" || fail "nnt-train -np 2: other losses than one process"
cmp -s "$tmp/t_one/checkpoint.safetensors" "$tmp/t_two/checkpoint.safetensors" ||
    fail "nnt-train -np 2: the checkpoint differs from one process's"
ls -d "$TMPDIR"/nnt-train-rank1-* > /dev/null 2>&1 &&
    fail "nnt-train -np 2: rank 1 left its private directory"
# A RAM budget counts, for the rank that may hold the most, its own share of the tiles that
# stay on their owners (optimizer moments; gradients under sharded) and every other tile:
# sharded over 2 ranks, a model that one process cannot hold in 20 MiB trains in 20 MiB a
# rank (measured: one process needs 25.7 MiB, refused at 24; rank 0's peak 17.6 MiB of 20;
# 18 MiB refused on both ranks), with the losses of one process without a budget.
budget="--data $tmp/corpus.txt --tokenizer bytes --layers 2 --channels 256 --heads 4
--context 64 --batch 2 --seq 16 --steps 3 --sample 0 --no-save --print-loss --cpus 1"
$TIMEOUT "$train_prog" $budget --out "$tmp/b_one" > "$tmp/b_one.txt" 2> "$tmp/b_one.err" ||
    fail "nnt-train (budget model, one process): exit status $?"
if $TIMEOUT "$train_prog" $budget --out "$tmp/b_one20" --mem-cpu 20 > /dev/null 2> "$tmp/b_one20.err"; then
    fail "nnt-train --mem-cpu 20, one process: the model fitted (it should need more)"
fi
grep -q 'exceed the RAM budget of 20 MiB' "$tmp/b_one20.err" ||
    fail "nnt-train --mem-cpu 20, one process: no budget message ($(tail -n 1 "$tmp/b_one20.err"))"
$TIMEOUT $MPIRUN "$train_prog" $budget --out "$tmp/b_two" --mem-cpu 20 > "$tmp/b_two.txt" \
    2> "$tmp/b_two.err" || { fail "nnt-train -np 2 --mem-cpu 20: exit status $?"; tail -n 3 "$tmp/b_two.err"; }
cmp -s "$tmp/b_one.txt" "$tmp/b_two.txt" ||
    fail "nnt-train -np 2 --mem-cpu 20: other losses than one process without a budget"
echo "RAM budget: one process refused at 20 MiB, 2 sharded ranks trained in 20 MiB each"
# The same model under a 4 MiB budget with a disk swap on each rank: one process's losses
# without a budget, and rank 0's memory line says which tensors went to its disk
$TIMEOUT $MPIRUN "$train_prog" $budget --out "$tmp/b_swap" --mem-cpu 4 \
    --swap-dir "$tmp/b_swapdir" --swap-size 64 > "$tmp/b_swap.txt" 2> "$tmp/b_swap.err" ||
    { fail "nnt-train -np 2 --mem-cpu 4 --swap-dir: exit status $?"; tail -n 3 "$tmp/b_swap.err"; }
if ! cmp -s "$tmp/b_one.txt" "$tmp/b_swap.txt"; then
    fail "nnt-train -np 2 --mem-cpu 4 --swap-dir: other losses than one process without a budget"
elif ! grep -q '^memory:.*written to disk: weights [1-9]' "$tmp/b_swap.err"; then
    fail "nnt-train -np 2 --mem-cpu 4 --swap-dir: no weights written to disk in the memory line"
else
    echo "RAM budget of 4 MiB + swap on 2 ranks: one process's losses;" \
         "$(grep '^memory:' "$tmp/b_swap.err" | grep -o 'written to disk: weights [^,]*')"
fi

# --trace under mpirun: collective; rank 0 writes both ranks' tasks (workers "rank R ...")
run_train t_trace 1 --out "$tmp/t_trace" --trace "$tmp/t_trace/trace.svg" --trace-steps 2
for r in 0 1; do
    grep -q "^rank $r CPU 0 " "$tmp/t_trace/trace-ops.txt" ||
        fail "nnt-train -np 2 --trace: no row of rank $r's worker in the per-op table"
    grep -q ">rank $r CPU 0<" "$tmp/t_trace/trace.svg" ||
        fail "nnt-train -np 2 --trace: no row of rank $r's worker in the timeline"
done
cmp -s "$tmp/t_one.txt" "$tmp/t_trace.txt" || fail "nnt-train -np 2 --trace: other losses"
echo "nnt-train -np 2 --trace: $(grep -c '^rank [01] CPU' "$tmp/t_trace/trace-ops.txt") worker rows (ranks 0 and 1)"

# --release-weights: the same lines
run_train t_rel 1 --out "$tmp/t_rel" --release-weights
cmp -s "$tmp/t_one.txt" "$tmp/t_rel.txt" ||
    fail "nnt-train -np 2 --release-weights: other losses than one process"
cmp -s "$tmp/t_one/checkpoint.safetensors" "$tmp/t_rel/checkpoint.safetensors" ||
    fail "nnt-train -np 2 --release-weights: the checkpoint differs from one process's"
# release_weights when one rank holds every row (batch 1, one sequence tile): the other
# rank, which computes no activation, must still wait for each layer's input before it
# submits the next, or it sends all its weights at once and rank 0 holds them as early
# data. GPT-2 L 24 C 128 (W = 18.3 MiB): rank 0's peak 38.6 MiB released against 45.9
# kept (without the wait 47.3 against 47.0); asserts at least W/4 less.
rows1="--data $tmp/corpus.txt --tokenizer bytes --layers 24 --channels 128 --heads 4
--context 64 --batch 1 --seq 8 --steps 2 --sample 0 --no-save --cpus 1 --print-loss"
peak_of() { sed -n 's/.*RAM peak \([0-9.]*\) MiB.*/\1/p' "$1"; }
for mode in keep release; do
    flag=; [ $mode = release ] && flag=--release-weights
    $TIMEOUT $MPIRUN "$train_prog" $rows1 --out "$tmp/r1_$mode" $flag > "$tmp/r1_$mode.txt" \
        2> "$tmp/r1_$mode.err" || fail "nnt-train -np 2 one row tile ($mode): exit status $?"
done
keep=$(peak_of "$tmp/r1_keep.err") rel=$(peak_of "$tmp/r1_release.err")
echo "one row tile: rank 0's peak $rel MiB releasing the weights, $keep keeping them"
awk -v k="$keep" -v r="$rel" 'BEGIN { exit !(k > 0 && r > 0 && k - r >= 18.3 / 4) }' ||
    fail "one row tile: rank 0's peak $rel MiB with --release-weights, not 4.6 MiB below $keep"
# The RAM budget counts, with release_weights, each rank's share of the weights and the
# weights of two adjacent layers (the window) instead of every weight: this model is refused
# at 44 MiB a rank keeping the weights (accepted from 50) and trains in 44 releasing them
# (accepted down to 42; peak 39.0), with the losses of the run without a budget.
if $TIMEOUT $MPIRUN "$train_prog" $rows1 --out "$tmp/r1_b" --mem-cpu 44 > /dev/null \
    2> "$tmp/r1_b.err"; then
    fail "nnt-train -np 2 --mem-cpu 44 keeping the weights: trained (should be refused)"
fi
grep -q 'exceed the RAM budget of 44 MiB' "$tmp/r1_b.err" ||
    fail "nnt-train -np 2 --mem-cpu 44: no budget message ($(tail -n 1 "$tmp/r1_b.err"))"
$TIMEOUT $MPIRUN "$train_prog" $rows1 --out "$tmp/r1_rb" --mem-cpu 44 --release-weights \
    > "$tmp/r1_rb.txt" 2> "$tmp/r1_rb.err" ||
    { fail "nnt-train -np 2 --mem-cpu 44 --release-weights: exit status $?"; tail -n 3 "$tmp/r1_rb.err"; }
cmp -s "$tmp/r1_release.txt" "$tmp/r1_rb.txt" ||
    fail "nnt-train -np 2 --mem-cpu 44 --release-weights: other losses than without a budget"
echo "RAM budget with --release-weights: refused at 44 MiB keeping the weights, trained releasing them"
# recompute (a block waits for its incoming gradient) and a RAM budget (wont_use hints)
run_train t_rc1 0 --out "$tmp/t_rc1" --recompute --mem-cpu 2048
run_train t_rc2 1 --out "$tmp/t_rc2" --recompute --mem-cpu 2048
cmp -s "$tmp/t_rc1.txt" "$tmp/t_rc2.txt" ||
    fail "nnt-train -np 2 --recompute --mem-cpu: other losses than one process"
run_train t_part 0 --out "$tmp/t_res" --stop-after 3
run_train t_rest 1 --out "$tmp/t_res" --resume "$tmp/t_res/checkpoint.safetensors"
cat "$tmp/t_part.txt" "$tmp/t_rest.txt" | cmp -s - "$tmp/t_one.txt" ||
    fail "nnt-train: resumed by 2 ranks, the losses differ from the uninterrupted run"
# --distribute data: one process's losses bit for bit (and its checkpoint); its checkpoint
# (saved by 2 ranks after 3 steps) resumed by 1 process continues the uninterrupted run.
# lossdiff A B: the largest difference of the "step N loss X" lines (or "count")
lossdiff() {
    awk 'NR == FNR { if ($1 == "step") ref[$2] = $4; next }
         $1 == "step" && ($2 in ref) { d = $4 - ref[$2]; if (d < 0) d = -d; if (d > m) m = d; c++ }
         END { if (c != 6) print "count"; else printf "%.3g\n", m }' "$1" "$2"
}
run_train t_data 1 --out "$tmp/t_data" --distribute data
run_train t_dpart 1 --out "$tmp/t_dres" --distribute data --stop-after 3
run_train t_drest 0 --out "$tmp/t_dres" --resume "$tmp/t_dres/checkpoint.safetensors"
cat "$tmp/t_dpart.txt" "$tmp/t_drest.txt" > "$tmp/t_dboth.txt"
for pair in "t_data:-np 2 --distribute data" "t_dboth:data checkpoint resumed by 1 process"; do
    f=${pair%%:*} what=${pair#*:}
    d=$(lossdiff "$tmp/t_one.txt" "$tmp/$f.txt")
    echo "nnt-train $what: largest loss difference to one process: $d"
    [ "$d" != count ] && awk -v d="$d" 'BEGIN { exit !(d == 0) }' ||
        fail "nnt-train $what: losses differ from one process's by $d"
done
cmp -s "$tmp/t_one.txt" "$tmp/t_data.txt" || fail "nnt-train -np 2 --distribute data: other loss lines"
cmp -s "$tmp/t_one/checkpoint.safetensors" "$tmp/t_data/checkpoint.safetensors" ||
    fail "nnt-train -np 2 --distribute data: the checkpoint differs from one process's"
# the Llama family (GQA, RMSNorm, RoPE, SwiGLU) under both distributions: one process's
# losses and checkpoint, bit for bit
llama="--model llama-tiny --kv-heads 2 --hidden 48"
run_train t_lone 0 --out "$tmp/t_lone" $llama
for dist in sharded data; do
    run_train "t_l$dist" 1 --out "$tmp/t_l$dist" $llama --distribute $dist
    cmp -s "$tmp/t_lone.txt" "$tmp/t_l$dist.txt" ||
        fail "nnt-train -np 2 llama --distribute $dist: other losses than one process"
    cmp -s "$tmp/t_lone/checkpoint.safetensors" "$tmp/t_l$dist/checkpoint.safetensors" ||
        fail "nnt-train -np 2 llama --distribute $dist: the checkpoint differs"
done
# LoRA adapters with dropout on that model's every linear map, the base frozen: one
# process's losses and checkpoint (the adapters and their moments) under both distributions
lora="$llama --lora-rank 4 --lora-targets all-linear --lora-dropout 0.1"
run_train t_aone 0 --out "$tmp/t_aone" $lora
for dist in sharded data; do
    run_train "t_a$dist" 1 --out "$tmp/t_a$dist" $lora --distribute $dist
    cmp -s "$tmp/t_aone.txt" "$tmp/t_a$dist.txt" ||
        fail "nnt-train -np 2 LoRA --distribute $dist: other losses than one process"
    cmp -s "$tmp/t_aone/checkpoint.safetensors" "$tmp/t_a$dist/checkpoint.safetensors" ||
        fail "nnt-train -np 2 LoRA --distribute $dist: the checkpoint differs"
done
# packed rows (nnt-tokenize --pack's example starts: each example its own positions and
# attention; tests/check_packed.sh has one process's losses against PyTorch's) on a Llama
# directory, with --recompute (the blocks read the positions again) and row tiles of 5 (key
# tiles across examples get no task): one process's losses and checkpoint on both ranks
fx="$top_srcdir/tests/fixtures/packed_tiny"
packed="--load-hf $fx/llama --data $fx/examples.bin --batch 2 --seq 16 --steps 4 --sample 0
        --cpus 1 --print-loss --tile-seq 5 --tile-batch 1 --recompute --lr 0.001 --warmup 0"
# shellcheck disable=SC2086 # the options are words
$TIMEOUT "$train_prog" $packed --out "$tmp/p_one" > "$tmp/p_one.txt" 2> "$tmp/p_one.err" ||
    { fail "nnt-train packed rows, one process: exit status $?"; tail -n 3 "$tmp/p_one.err"; }
for dist in sharded data; do
    # shellcheck disable=SC2086
    $TIMEOUT $MPIRUN "$train_prog" $packed --distribute $dist --out "$tmp/p_$dist" \
        > "$tmp/p_$dist.txt" 2> "$tmp/p_$dist.err" ||
        { fail "nnt-train -np 2 packed rows --distribute $dist: exit status $?"
          tail -n 3 "$tmp/p_$dist.err"; }
    cmp -s "$tmp/p_one.txt" "$tmp/p_$dist.txt" ||
        fail "nnt-train -np 2 packed rows --distribute $dist: other losses than one process"
    cmp -s "$tmp/p_one/checkpoint.safetensors" "$tmp/p_$dist/checkpoint.safetensors" ||
        fail "nnt-train -np 2 packed rows --distribute $dist: the checkpoint differs"
done
echo "nnt-train -np 2 packed rows: $(grep -c '^step' "$tmp/p_one.txt") steps, one process's losses and checkpoint under both distributions"
# DPO (tests/fixtures/dpo_tiny: pairs of rows, tests/check_dpo.sh has one process's losses
# against PyTorch's): the per-target losses read on every rank, the reference pass, the
# weighted backward and the held-out pairs; one process's losses and checkpoint (its
# recorded reference too) under both distributions
fx="$top_srcdir/tests/fixtures/dpo_tiny"
dpo="--load-hf $fx/llama --data $fx/pairs.bin --dpo-beta 0.3 --batch 4 --seq 16 --steps 3
     --val-split 0.25 --val-every 3 --sample 0 --cpus 1 --print-loss --tile-seq 5
     --tile-batch 2 --lr 0.01 --warmup 0"
# shellcheck disable=SC2086 # the options are words
$TIMEOUT "$train_prog" $dpo --out "$tmp/d_one" > "$tmp/d_one.txt" 2> "$tmp/d_one.err" ||
    { fail "nnt-train DPO, one process: exit status $?"; tail -n 3 "$tmp/d_one.err"; }
for dist in sharded data; do
    # shellcheck disable=SC2086
    $TIMEOUT $MPIRUN "$train_prog" $dpo --distribute $dist --out "$tmp/d_$dist" \
        > "$tmp/d_$dist.txt" 2> "$tmp/d_$dist.err" ||
        { fail "nnt-train -np 2 DPO --distribute $dist: exit status $?"
          tail -n 3 "$tmp/d_$dist.err"; }
    cmp -s "$tmp/d_one.txt" "$tmp/d_$dist.txt" ||
        fail "nnt-train -np 2 DPO --distribute $dist: other losses than one process"
    cmp -s "$tmp/d_one/checkpoint.safetensors" "$tmp/d_$dist/checkpoint.safetensors" ||
        fail "nnt-train -np 2 DPO --distribute $dist: the checkpoint differs"
done
grep -q '^val 3 loss' "$tmp/d_one.txt" || fail "nnt-train DPO: no validation line"
echo "nnt-train -np 2 DPO: $(grep -c '^step' "$tmp/d_one.txt") steps and a validation, one process's losses and checkpoint under both distributions"
# ORPO (no reference; its nll term reads the prompts' targets too), SimPO (no reference; the
# log-likelihoods averaged over each sequence's tokens) and RPO (DPO plus the chosen
# sequences' nll): one process's losses and checkpoint with the data distributed
for loss in "orpo" "simpo --simpo-gamma 0.3" "sigmoid --rpo-alpha 0.5"; do
    name=${loss%% *}
    case $loss in *rpo-alpha*) name="RPO (sigmoid with --rpo-alpha)";; esac
    # shellcheck disable=SC2086
    $TIMEOUT "$train_prog" $dpo --dpo-loss $loss --out "$tmp/o_one" > "$tmp/o_one.txt" \
        2> "$tmp/o_one.err" || { fail "nnt-train --dpo-loss $loss, one process: exit status $?"; tail -n 3 "$tmp/o_one.err"; }
    # shellcheck disable=SC2086
    $TIMEOUT $MPIRUN "$train_prog" $dpo --dpo-loss $loss --distribute data --out "$tmp/o_data" \
        > "$tmp/o_data.txt" 2> "$tmp/o_data.err" ||
        { fail "nnt-train -np 2 --dpo-loss $loss --distribute data: exit status $?"; tail -n 3 "$tmp/o_data.err"; }
    cmp -s "$tmp/o_one.txt" "$tmp/o_data.txt" ||
        fail "nnt-train -np 2 --dpo-loss $loss --distribute data: other losses than one process"
    cmp -s "$tmp/o_one/checkpoint.safetensors" "$tmp/o_data/checkpoint.safetensors" ||
        fail "nnt-train -np 2 --dpo-loss $loss --distribute data: the checkpoint differs"
    cmp -s "$tmp/o_one.txt" "$tmp/d_one.txt" && fail "nnt-train --dpo-loss $loss: the losses of DPO"
    echo "nnt-train -np 2 $name: one process's losses and checkpoint with the data distributed"
done
# a regression (tests/fixtures/cls_values: rows carrying values, nnt-tokenize --problem-type):
# each rank gives the model its rows' values; one process's losses and checkpoint
vfx="$top_srcdir/tests/fixtures/cls_values"
"$top_builddir/nnt-tokenize" --tokenizer-json "$top_srcdir/tests/fixtures/sft/llama3/tokenizer.json" \
    --num-labels 2 --problem-type regression --seq 48 --too-long cut --out "$tmp/vreg.bin" \
    "$vfx/text_regression_train.jsonl" 2> "$tmp/vreg.err" || { fail "nnt-tokenize --problem-type: exit status $?"; cat "$tmp/vreg.err"; }
vreg="--load-hf $vfx/text_regression --data $tmp/vreg.bin --seq 48 --batch 4 --steps 3
    --print-loss --sample 0 --val-split 0 --lr 0.01"
# shellcheck disable=SC2086
$TIMEOUT "$train_prog" $vreg --out "$tmp/v_one" > "$tmp/v_one.txt" 2> "$tmp/v_one.err" ||
    { fail "nnt-train regression, one process: exit status $?"; tail -n 3 "$tmp/v_one.err"; }
# shellcheck disable=SC2086
$TIMEOUT $MPIRUN "$train_prog" $vreg --distribute data --out "$tmp/v_data" > "$tmp/v_data.txt" \
    2> "$tmp/v_data.err" ||
    { fail "nnt-train -np 2 regression --distribute data: exit status $?"; tail -n 3 "$tmp/v_data.err"; }
cmp -s "$tmp/v_one.txt" "$tmp/v_data.txt" && [ "$(grep -c '^step' "$tmp/v_one.txt")" -eq 3 ] ||
    fail "nnt-train -np 2 regression --distribute data: other losses than one process"
cmp -s "$tmp/v_one/checkpoint.safetensors" "$tmp/v_data/checkpoint.safetensors" ||
    fail "nnt-train -np 2 regression --distribute data: the checkpoint differs"
echo "nnt-train -np 2 regression: one process's losses and checkpoint with the data distributed"
# KTO (tests/fixtures/kto_tiny: unpaired rows carrying their labels; KL rows built from each
# run of B rows, a forward of them each micro-batch): one process's losses and checkpoint
kfx="$top_srcdir/tests/fixtures/kto_tiny"
kto="--load-hf $kfx/llama --data $kfx/train.bin --val-data $kfx/val.bin --seq 96 --batch 4
    --steps 3 --val-every 3 --val-batches 2 --dpo-beta 0.3 --dpo-loss kto
    --desirable-weight 1.3 --undesirable-weight 0.7 --print-loss --sample 0 --lr 0.01"
# shellcheck disable=SC2086
$TIMEOUT "$train_prog" $kto --out "$tmp/k_one" > "$tmp/k_one.txt" 2> "$tmp/k_one.err" ||
    { fail "nnt-train KTO, one process: exit status $?"; tail -n 3 "$tmp/k_one.err"; }
# shellcheck disable=SC2086
$TIMEOUT $MPIRUN "$train_prog" $kto --distribute data --out "$tmp/k_data" > "$tmp/k_data.txt" \
    2> "$tmp/k_data.err" ||
    { fail "nnt-train -np 2 KTO --distribute data: exit status $?"; tail -n 3 "$tmp/k_data.err"; }
cmp -s "$tmp/k_one.txt" "$tmp/k_data.txt" && [ "$(grep -c '^step' "$tmp/k_one.txt")" -eq 3 ] ||
    fail "nnt-train -np 2 KTO --distribute data: other losses than one process"
cmp -s "$tmp/k_one/checkpoint.safetensors" "$tmp/k_data/checkpoint.safetensors" ||
    fail "nnt-train -np 2 KTO --distribute data: the checkpoint differs"
echo "nnt-train -np 2 KTO: one process's losses and checkpoint with the data distributed"
# mixture of experts: each rank reads the routing (a collective host read) and submits the
# same experts' tasks, sized by their tokens; nnt-train's moe-tiny (Qwen3-MoE's layout, the
# load-balancing loss on): one process's losses and checkpoint; Qwen2-MoE (shared experts,
# a dense layer, q/k/v biases: tests/fixtures/moe_tiny/qwen2moe, tiles that cut the tokens,
# channels and hidden units): one process's losses (with %.17g) and parameters, bit for
# bit, each rank owning half the bytes; under both distributions
run_train t_mone 0 --out "$tmp/t_mone" --model moe-tiny
"$prog" moe "$tmp/moe_one" 0 sharded "$top_srcdir/tests/fixtures/moe_tiny/qwen2moe" \
    > "$tmp/moe_one.log" 2>&1 || fail "test_mpi moe, one process: exit status $?"
for dist in sharded data; do
    run_train "t_m$dist" 1 --out "$tmp/t_m$dist" --model moe-tiny --distribute $dist
    cmp -s "$tmp/t_mone.txt" "$tmp/t_m$dist.txt" ||
        fail "nnt-train -np 2 moe-tiny --distribute $dist: other losses than one process"
    cmp -s "$tmp/t_mone/checkpoint.safetensors" "$tmp/t_m$dist/checkpoint.safetensors" ||
        fail "nnt-train -np 2 moe-tiny --distribute $dist: the checkpoint differs"
    $TIMEOUT $MPIRUN "$prog" moe "$tmp/moe_$dist" 1 $dist \
        "$top_srcdir/tests/fixtures/moe_tiny/qwen2moe" > "$tmp/moe_$dist.log" 2>&1 ||
        { fail "test_mpi moe $dist: exit status $?"; tail -n 5 "$tmp/moe_$dist.log"; }
    for r in 0 1; do
        [ "$(grep '^loss\|^params' "$tmp/moe_$dist.$r")" = \
          "$(grep '^loss\|^params' "$tmp/moe_one.0")" ] ||
            fail "Qwen2-MoE -np 2 $dist: rank $r has other losses or parameters than one process"
        mine=$(field "$tmp/moe_$dist.$r" owned) one=$(field "$tmp/moe_one.0" owned)
        awk -v a="$mine" -v b="$one" 'BEGIN { exit !(a > 0 && a <= 0.6 * b) }' ||
            fail "Qwen2-MoE -np 2 $dist: rank $r owns $mine bytes, one process $one"
    done
    echo "MoE -np 2 --distribute $dist: moe-tiny and Qwen2-MoE train to one process's bits"
done
# gpt-oss (gpt-oss-tiny: attention sinks, whose gradient tasks of a head tile add into one
# tile, expert biases, the clamped SwiGLU, windows): one process's losses and checkpoint
run_train t_gone 0 --out "$tmp/t_gone" --model gpt-oss-tiny
for dist in sharded data; do
    run_train "t_g$dist" 1 --out "$tmp/t_g$dist" --model gpt-oss-tiny --distribute $dist
    cmp -s "$tmp/t_gone.txt" "$tmp/t_g$dist.txt" ||
        fail "nnt-train -np 2 gpt-oss-tiny --distribute $dist: other losses than one process"
    cmp -s "$tmp/t_gone/checkpoint.safetensors" "$tmp/t_g$dist/checkpoint.safetensors" ||
        fail "nnt-train -np 2 gpt-oss-tiny --distribute $dist: the checkpoint differs"
done
echo "gpt-oss -np 2: gpt-oss-tiny trains to one process's losses and checkpoint under both distributions"
# bf16 weight copies (made on their weight's ranks; the copy travels, not the weight):
# one process's losses and checkpoint under both distributions, weights kept or released
run_train t_bone 0 --out "$tmp/t_bone" --precision bf16
n=0
for mode in "sharded" "sharded --release-weights" "data --release-weights"; do
    n=$((n + 1))
    run_train "t_b$n" 1 --out "$tmp/t_b$n" --precision bf16 --distribute $mode
    cmp -s "$tmp/t_bone.txt" "$tmp/t_b$n.txt" ||
        fail "nnt-train -np 2 --precision bf16 --distribute $mode: other losses than one process"
    cmp -s "$tmp/t_bone/checkpoint.safetensors" "$tmp/t_b$n/checkpoint.safetensors" ||
        fail "nnt-train -np 2 --precision bf16 --distribute $mode: the checkpoint differs"
done
echo "nnt-train -np 2: $(wc -l < "$tmp/t_two.txt") loss lines as one process's; checkpoint identical"

# generation under MPI (nnt-train's sample): the tensors it creates go to rank 0, which
# runs every token's tasks, when a rank's share of the tiles and every weight fit in 3/4 of
# the smallest rank's memory (the info log says which); otherwise they stay spread
# (--mem-cpu 15: 6.5 MiB of tiles a rank + 6.3 MiB of weights > 11.25 MiB). The sample is
# one process's, token for token, either way; also with --release-weights (spread, every
# use of a weight receives it again).
gen="--data $tmp/corpus.txt --layers 2 --channels 256 --heads 4 --context 32 --batch 2
--seq 16 --tile-channels 128 --cpus 1 --steps 2 --no-save --sample 24 --optim sgd"
sample_of() { sed -n '/^---- sample/,/^----$/p' "$1"; }
$TIMEOUT "$train_prog" $gen --out "$tmp/g_one" > "$tmp/g_one.txt" 2> "$tmp/g_one.err" ||
    fail "nnt-train --sample, one process: exit status $?"
one_sample=$(sample_of "$tmp/g_one.txt")
[ "$(echo "$one_sample" | wc -l)" -ge 3 ] || fail "nnt-train --sample: no sample printed"
for run in "sharded 0 on rank 0" "data 0 on rank 0" "sharded 15 spread over the ranks" \
           "sharded+release 0 on rank 0" "sharded+release 15 spread over the ranks"; do
    set -- $run
    tag=$1 mem=$2; shift 2
    where="$*" dist=${tag%+release} release=
    [ "$dist" = "$tag" ] || release=--release-weights
    what="nnt-train --sample -np 2 --distribute $dist $release --mem-cpu $mem"
    NNT_LOG_LEVEL=info $TIMEOUT $MPIRUN -x NNT_LOG_LEVEL "$train_prog" $gen --distribute $dist \
        $release --mem-cpu $mem --out "$tmp/g_$tag$mem" > "$tmp/g_$tag$mem.txt" \
        2> "$tmp/g_$tag$mem.err" ||
        { fail "$what: exit status $?"; tail -n 5 "$tmp/g_$tag$mem.err"; continue; }
    grep -q "generation under MPI: $where" "$tmp/g_$tag$mem.err" ||
        fail "$what: not generated $where ($(grep 'generation under' "$tmp/g_$tag$mem.err" | head -n 1))"
    if [ "$one_sample" = "$(sample_of "$tmp/g_$tag$mem.txt")" ]; then
        echo "$what: generated $where, the sample of one process"
    else
        fail "$what: another sample than one process's"
    fi
done
# the smallest rank's memory without --mem-cpu is its share of its node's RAM: the 2 ranks
# on this node (NNT_HOST_RAM_MIB 1000) have 500 MiB each
NNT_HOST_RAM_MIB=1000 NNT_LOG_LEVEL=info $TIMEOUT $MPIRUN -x NNT_HOST_RAM_MIB -x NNT_LOG_LEVEL \
    "$train_prog" $gen --out "$tmp/g_half" > "$tmp/g_half.txt" 2> "$tmp/g_half.err" ||
    { fail "nnt-train --sample -np 2, NNT_HOST_RAM_MIB 1000: exit status $?"
      tail -n 5 "$tmp/g_half.err"; }
grep -q "generation under MPI: on rank 0 .*, 500 MiB on the smallest rank)" "$tmp/g_half.err" &&
    echo "nnt-train --sample -np 2: the smallest rank has its half of the node's 1000 MiB" ||
    fail "nnt-train --sample -np 2, 2 ranks on a 1000 MiB node: not 500 MiB on the smallest rank ($(grep 'generation under' "$tmp/g_half.err" | head -n 1))"

# several sequences side by side under MPI (nnt_model_generate_n, and prompts of their own,
# nnt_model_generate_batch; test_mpi generate: the GQA fixture, 3 sampled sequences each):
# every rank gets one process's tokens
gqa="$top_srcdir/tests/fixtures/llama_tiny/gqa"
"$prog" generate "$tmp/gen_one" 0 sharded "$gqa" > "$tmp/gen_one.log" 2>&1 ||
    fail "test_mpi generate, one process: exit status $?"
for dist in sharded data; do
    $TIMEOUT $MPIRUN "$prog" generate "$tmp/gen_$dist" 1 $dist "$gqa" > "$tmp/gen_$dist.log" 2>&1 ||
        { fail "test_mpi generate $dist: exit status $?"; tail -n 5 "$tmp/gen_$dist.log"; }
    for r in 0 1; do
        [ "$(grep -c '^ids\|^batch' "$tmp/gen_one.0")" -eq 6 ] &&
        [ "$(grep '^ids\|^batch' "$tmp/gen_$dist.$r" 2>/dev/null)" = "$(grep '^ids\|^batch' "$tmp/gen_one.0")" ] ||
            fail "nnt_model_generate_n/_batch -np 2 $dist: rank $r has other tokens than one process"
    done
done
echo "nnt_model_generate_n and _batch -np 2: 3 sequences side by side, one process's tokens on every rank"

# signals, as Slurm sends them (to every task) or as a user may (to one rank): the ranks
# agree at a step boundary. SIGTERM to both ranks (together, or to rank 1 once rank 0 saves:
# it must not end rank 1 in the save) or to rank 1 alone: every rank stops after
# the same step, rank 0 saves, status 143 within 60 s (no hang), and --resume alone under
# mpirun continues bit for bit with one process's uninterrupted run. SIGUSR1 to rank 1
# alone: the job writes a checkpoint of the step in progress and goes on with one process's
# losses (then SIGTERM ends it). The runs are long (--steps 100000: a signal never comes
# after the end); the reference stops after 2000 steps, the resumed runs 30 after the stop.
sigrun="$small --steps 100000"
run_train sig_ref 0 --steps 100000 --stop-after 2000 --out "$tmp/sig_ref"
grep '^step' "$tmp/sig_ref.txt" > "$tmp/sig_ref.steps"
# signal_job NAME SIG RANKS...: the job in the background; after 3 steps SIG to each rank
# of RANKS (SIGUSR1: then, once its checkpoint is written, SIGTERM to both); waits for the
# job (its status in $status, seconds after the signal in $took)
signal_job() {
    sj_name=$1 sj_sig=$2; shift 2
    NNT_CHECK_TAG=$tmp
    export NNT_CHECK_TAG
    $TIMEOUT $MPIRUN -x NNT_CHECK_TAG "$train_prog" $sigrun --out "$tmp/$sj_name" \
        > "$tmp/$sj_name.txt" 2> "$tmp/$sj_name.err" &
    sj_job=$!
    sj_n=0
    while [ "$(steps_in "$tmp/$sj_name.txt")" -lt 3 ] && [ $sj_n -lt 600 ]; do
        kill -0 $sj_job 2> /dev/null || break
        sleep 0.1; sj_n=$((sj_n + 1))
    done
    sj_pids=
    for r in "$@"; do
        [ "$r" = then ] && continue
        sj_p=$(tagged_pids "OMPI_COMM_WORLD_RANK=$r")
        [ -n "$sj_p" ] || fail "$sj_name: rank $r not found to send SIG$sj_sig"
        sj_pids="$sj_pids $sj_p"
    done
    sj_start=$(date +%s)
    sj_at=$(steps_in "$tmp/$sj_name.txt")   # steps printed when the signal goes
    case "$*" in
        "0 then 1")   # rank 1's signal once rank 0 saves: after the ranks agreed to stop
            set -- $sj_pids
            kill -"$sj_sig" $1
            sj_n=0
            while ! grep -q 'saving' "$tmp/$sj_name.err" && [ $sj_n -lt 3000 ]; do
                sleep 0.01; sj_n=$((sj_n + 1))
            done
            kill -"$sj_sig" $2 2> /dev/null;;
        *) kill -"$sj_sig" $sj_pids 2> /dev/null;;
    esac
    if [ "$sj_sig" = USR1 ]; then
        sj_n=0
        while ! grep -q 'SIGUSR1: checkpoint of step' "$tmp/$sj_name.err" && [ $sj_n -lt 600 ]; do
            kill -0 $sj_job 2> /dev/null || break
            sleep 0.1; sj_n=$((sj_n + 1))
        done
        sleep 0.3   # steps after the checkpoint
        kill -TERM $(tagged_pids "OMPI_COMM_WORLD_RANK=0") $(tagged_pids "OMPI_COMM_WORLD_RANK=1") \
            2> /dev/null
    fi
    wait $sj_job
    status=$?
    took=$(( $(date +%s) - sj_start ))
}
# resumes_equal NAME STEP: --resume alone (under mpirun, --stop-after STEP + 30) continues
# NAME's first STEP steps as one process's uninterrupted run
resumes_equal() {
    [ $(($2 + 30)) -le 2000 ] || { echo "$1: stopped after step $2, past the reference's 2000"; return 1; }
    $TIMEOUT $MPIRUN "$train_prog" --resume "$tmp/$1/checkpoint.safetensors" --out "$tmp/$1" \
        --print-loss --stop-after $(($2 + 30)) > "$tmp/$1_resumed.txt" 2> "$tmp/$1_resumed.err" ||
        { echo "$1: the resumed run failed (status $?)"; tail -n 3 "$tmp/$1_resumed.err"; return 1; }
    grep '^step' "$tmp/$1.txt" | head -n "$2" | cat - "$tmp/$1_resumed.txt" | grep '^step' > "$tmp/$1.all"
    head -n $(($2 + 30)) "$tmp/sig_ref.steps" | cmp -s - "$tmp/$1.all"
}
for ranks in "0 1" "0 then 1" "1"; do
    name=sig_term_$(echo $ranks | tr -d ' ')
    what="nnt-train -np 2, SIGTERM to rank(s) $ranks"
    signal_job $name TERM $ranks
    stopped=$(steps_in "$tmp/$name.txt")
    if [ $status -ne 143 ] || [ $took -gt 60 ]; then
        fail "$what: status $status after $took s (expected 143)"; tail -n 4 "$tmp/$name.err"
    elif ! grep -q "interrupted (SIGTERM) after step $stopped: saving" "$tmp/$name.err"; then
        fail "$what: no save after step $stopped"; tail -n 4 "$tmp/$name.err"
    elif [ "$ranks" = 1 ] &&
         ! grep -q "another rank of the job was interrupted: every rank stops after step $stopped" "$tmp/$name.err"; then
        fail "$what: rank 0 does not say another rank stopped the job"
    elif resumes_equal $name "$stopped"; then
        echo "$what: every rank stopped after step $stopped, status 143 in $took s; --resume continues bit for bit"
    else
        fail "$what: the resumed losses differ from one process's uninterrupted run"
    fi
done
# (the checkpoint must come after the steps printed when the signal went, and be said once:
# by rank 0, which writes it; under a loaded machine it may come hundreds of steps later, so
# the losses are compared over the reference's 2000 steps at most)
signal_job sig_usr1 USR1 1
saved=$(sed -n 's/.*SIGUSR1: checkpoint of step \([0-9]*\) written to.*/\1/p' "$tmp/sig_usr1.err")
ran=$(steps_in "$tmp/sig_usr1.txt")
checked=$((ran < 2000 ? ran : 2000))
if [ -z "$saved" ]; then
    fail "nnt-train -np 2, SIGUSR1 to rank 1: no checkpoint"; tail -n 4 "$tmp/sig_usr1.err"
elif [ "$(echo "$saved" | wc -l)" -ne 1 ]; then
    fail "nnt-train -np 2, SIGUSR1 to rank 1: the checkpoint said more than once:" $saved
elif [ $status -ne 143 ] || [ "$ran" -le "$saved" ] || [ "$saved" -lt "$sj_at" ]; then
    fail "nnt-train -np 2, SIGUSR1 to rank 1: status $status after $ran steps (checkpoint of step $saved, signal after step $sj_at)"
    tail -n 4 "$tmp/sig_usr1.err"
elif grep '^step' "$tmp/sig_usr1.txt" | head -n $checked |
     cmp -s - "$(head -n $checked "$tmp/sig_ref.steps" > "$tmp/sig_usr1.ref"; echo "$tmp/sig_usr1.ref")"; then
    echo "nnt-train -np 2, SIGUSR1 to rank 1 after step $sj_at: checkpoint of step $saved written by the job, which went on to step $ran with one process's losses"
else
    fail "nnt-train -np 2, SIGUSR1 to rank 1: other losses than one process's"
fi

# a rank that dies ends the job: rank 1 killed (SIGKILL) after a few steps of a long run;
# mpirun must end every rank with a non-zero status and say why, not hang (measured: 1-2 s
# after the kill). It names the killed rank ("process rank 1 ... exited on signal 9"), or,
# had rank 0 noticed first, reports rank 0's exit: either says the job was ended for it.
rank_death rank_death OMPI_COMM_WORLD_RANK \
    'rank 1\|exited on signal\|non-zero exit\|non-zero status' \
    $TIMEOUT $MPIRUN -x NNT_CHECK_TAG "$train_prog" $small --steps 100000 --no-save \
    --out "$tmp/t_kill"

[ $fail -eq 0 ] && echo "PASS: check_mpi"
exit $fail
