# SPDX-License-Identifier: MIT
# Sourced by the nnt-train checks (check_train.sh, check_train_options.sh): running $prog
# with its output in $tmp, and the failures counted in $fail. Each sets prog, tmp and fail=0
# before sourcing this.

fail() { echo "FAIL: $*"; fail=1; }

# run NAME ARGS...: stdout to $tmp/NAME.out, stderr to $tmp/NAME.err, status in $status.
run() {
    name=$1; shift
    "$prog" "$@" > "$tmp/$name.out" 2> "$tmp/$name.err"
    status=$?
}

# run_ok NAME ARGS...: as run, and a failure unless the status is 0 (stderr shown).
run_ok() {
    run "$@"
    [ $status -eq 0 ] || { fail "$1: exit status $status"; tail -n 5 "$tmp/$1.err"; }
}

# expect_error NAME PATTERN ARGS...: nonzero status and PATTERN in the error message.
expect_error() {
    name=$1 pattern=$2; shift 2
    run "$name" "$@"
    if [ $status -eq 0 ]; then
        fail "$name: exit status 0 (expected an error)"
    elif ! grep -q -- "$pattern" "$tmp/$name.err"; then
        fail "$name: status $status but the message does not name '$pattern':"
        cat "$tmp/$name.err"
    else
        echo "ok: $name -> status $status: $(head -n 1 "$tmp/$name.err")"
    fi
}
