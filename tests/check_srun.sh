#!/bin/sh
# SPDX-License-Identifier: MIT
# nnt-train started by Slurm's srun on this machine (srun -n 2 --mpi=pmix, the way a cluster
# starts it without mpirun): the same --print-loss lines and checkpoint as one process for
# the sharded and data distributions, and a rank killed mid-run ends the job (srun names the
# task), with and without --kill-on-bad-exit. Needs a Slurm that answers here: CI starts a
# one-node one (scripts/slurm-localhost.sh); SKIP without it, srun or StarPU-MPI.
set -u
: "${top_builddir:?}" "${top_srcdir:?}"
grep -q '^#define NNT_HAVE_MPI 1' "$top_builddir/config.h" ||
    { echo "SKIP: nnt was built without StarPU-MPI"; exit 77; }
command -v srun > /dev/null 2>&1 || { echo "SKIP: srun not found (Debian: slurm-wlm)"; exit 77; }
command -v timeout > /dev/null 2>&1 || { echo "SKIP: timeout not found"; exit 77; }
timeout 20 sinfo -h -o %T 2> /dev/null | grep -q 'idle\|mix' ||
    { echo "SKIP: no Slurm node is up here (scripts/slurm-localhost.sh starts one)"; exit 77; }
. "$top_srcdir/tests/mpi_procs.sh"   # $tmp, fail(), STARPU_HOME and TMPDIR in $tmp

train_prog="$top_builddir/nnt-train"
small_model
# -n 2 on one node: the job may share its cores (a 2-core machine has one per task)
SRUN="srun -n 2 --mpi=pmix --oversubscribe --time=5"

# one process, then srun for each distribution: the same lines and checkpoint bytes
timeout 150 "$train_prog" $small --steps 6 --out "$tmp/one" > "$tmp/one.txt" 2> "$tmp/one.err" ||
    { fail "one process: exit status $?"; tail -n 5 "$tmp/one.err"; }
for dist in sharded data; do
    timeout 150 $SRUN "$train_prog" $small --steps 6 --out "$tmp/$dist" --distribute $dist \
        > "$tmp/$dist.txt" 2> "$tmp/$dist.err"
    status=$?
    if [ $status -ne 0 ]; then
        fail "srun --distribute $dist: exit status $status"; tail -n 15 "$tmp/$dist.err"
        continue
    fi
    grep -q "runtime:   2 MPI ranks (distribution $dist)" "$tmp/$dist.err" ||
        fail "srun --distribute $dist: nnt-train does not report 2 ranks ($(grep runtime: "$tmp/$dist.err"))"
    steps=$(steps_in "$tmp/$dist.txt")
    [ "$steps" -eq 6 ] || fail "srun --distribute $dist: $steps loss lines, not 6"
    cmp -s "$tmp/one.txt" "$tmp/$dist.txt" ||
        fail "srun --distribute $dist: other losses than one process"
    cmp -s "$tmp/one/checkpoint.safetensors" "$tmp/$dist/checkpoint.safetensors" ||
        fail "srun --distribute $dist: the checkpoint differs from one process's"
    echo "srun -n 2 --distribute $dist: $steps loss lines and the checkpoint as one process's"
done

# a rank that dies ends the job, naming it ("srun: error: HOST: task 1: Killed"); the pmix
# plugin ends the step even without --kill-on-bad-exit (measured: 0-1 s either way)
rank_death srun_kill_on_bad_exit SLURM_PROCID 'task 1' \
    timeout 150 $SRUN --kill-on-bad-exit=1 "$train_prog" $small --steps 100000 --no-save \
    --out "$tmp/kill1"
rank_death srun_default SLURM_PROCID 'task 1' \
    timeout 150 $SRUN "$train_prog" $small --steps 100000 --no-save --out "$tmp/kill2"

[ $fail -eq 0 ] && echo "PASS: check_srun"
exit $fail
