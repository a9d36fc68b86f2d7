# SPDX-License-Identifier: MIT
# Shell helpers (sourced, after the caller's SKIP checks) of the tests that start nnt-train
# as 2 ranks: check_mpi.sh (mpirun) and check_srun.sh (Slurm's srun). Sourcing makes the
# scratch directory $tmp (removed at exit), fail() (records a failure in $fail), and points
# StarPU's home and TMPDIR (where nnt-train's ranks > 0 keep their private outputs) into it.
tmp=$(mktemp -d) || exit 99
trap 'rm -rf "$tmp"' EXIT
fail=0
fail() { echo "FAIL: $*"; fail=1; }
STARPU_HOME="$tmp/starpu"
TMPDIR="$tmp/tmpdir"
mkdir -p "$TMPDIR"
export STARPU_HOME TMPDIR

# small_model: writes $tmp/corpus.txt (200 lines) and sets $small to nnt-train's options
# of a 1-layer GPT-2 (C 32) on it, tiles of 16 channels and 1 sequence, one CPU worker,
# no sample, --print-loss (the steps are the caller's)
small_model() {
    sm_i=0
    while [ $sm_i -lt 200 ]; do
        echo "line $sm_i: the quick brown fox jumps over the lazy dog; a stitch in time saves nine."
        sm_i=$((sm_i + 1))
    done > "$tmp/corpus.txt"
    small="--data $tmp/corpus.txt --layers 1 --channels 32 --heads 2 --context 32 --batch 2
--seq 16 --sample 0 --tile-channels 16 --tile-batch 1 --cpus 1 --print-loss"
}

# tagged_pids VAR=VALUE: the processes started by this test (NNT_CHECK_TAG=$tmp in their
# environment) whose environment also holds VAR=VALUE (a rank: OMPI_COMM_WORLD_RANK=1,
# SLURM_PROCID=1). From /proc, not pgrep: procps may be missing. One grep over every
# environment first (fast: the signal tests send theirs within a few steps).
tagged_pids() {
    for env in $(grep -l -z -x -F "NNT_CHECK_TAG=$tmp" /proc/[0-9]*/environ 2> /dev/null); do
        grep -q -z -x -F "$1" "$env" 2> /dev/null &&
            { p=${env#/proc/}; echo "${p%/environ}"; }
    done
}

# steps_in FILE: the number of "step" lines in FILE, 0 while it does not exist yet (the
# background job's redirection may not have made it when first looked at)
steps_in() {
    si_n=$(grep -c '^step' "$1" 2> /dev/null)
    echo "${si_n:-0}"
}

# rank_death NAME RANKVAR MESSAGE LAUNCH...: LAUNCH... starts nnt-train as 2 ranks for a long
# run, printing --print-loss "step" lines; after 3 steps the rank whose RANKVAR is 1 is
# killed (SIGKILL). The job must end within 60 s with a status neither 0 nor 124 (timeout),
# and its stderr must match the grep pattern MESSAGE (the launcher saying why it ended).
rank_death() {
    rd_name=$1 rd_var=$2 rd_msg=$3; shift 3
    rd_fail=$fail fail=0
    NNT_CHECK_TAG=$tmp
    export NNT_CHECK_TAG
    "$@" > "$tmp/$rd_name.txt" 2> "$tmp/$rd_name.err" &
    rd_job=$!
    rd_n=0
    while [ "$(steps_in "$tmp/$rd_name.txt")" -lt 3 ] && [ $rd_n -lt 600 ]; do
        kill -0 $rd_job 2> /dev/null || break   # the job ended by itself: reported below
        sleep 0.1; rd_n=$((rd_n + 1))
    done
    rd_steps=$(steps_in "$tmp/$rd_name.txt")
    rd_killed=
    for p in $(tagged_pids "$rd_var=1"); do
        kill -9 "$p" 2> /dev/null && rd_killed="$rd_killed $p"
    done
    rd_start=$(date +%s)
    wait $rd_job
    rd_status=$?
    rd_took=$(( $(date +%s) - rd_start ))
    if [ -z "$rd_killed" ]; then
        fail "$rd_name: rank 1 of the job was not found ($rd_steps steps printed in $((rd_n / 10)) s; the job ended with status $rd_status)"
    else
        echo "$rd_name: rank 1 (pid$rd_killed) killed after $rd_steps steps; the job ended with status $rd_status after $rd_took s"
        [ $rd_status -ne 0 ] && [ $rd_status -ne 124 ] ||
            fail "$rd_name: the job ended with status $rd_status"
        [ $rd_took -le 60 ] || fail "$rd_name: the job took $rd_took s to end"
        grep -q "$rd_msg" "$tmp/$rd_name.err" ||
            fail "$rd_name: no message on the rank's death (none matches '$rd_msg')"
    fi
    [ $fail -eq 0 ] || { echo "---- $rd_name: the job's stderr:"; tail -n 30 "$tmp/$rd_name.err"; }
    fail=$((fail | rd_fail))
    unset NNT_CHECK_TAG
}
