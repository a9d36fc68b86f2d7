# SPDX-License-Identifier: MIT
# Sourced by the checks of the programs (check_train.sh, check_train_options.sh,
# check_tokenize.sh), each of which sets prog (the program under test) first: the program
# must be built, a scratch directory $tmp removed on exit, failures counted in $fail, and
# helpers running $prog with its output in $tmp.
set -u
: "${top_builddir:?}" "${top_srcdir:?}" "${prog:?}"
[ -x "$prog" ] || { echo "FAIL: $prog was not built"; exit 1; }
tmp=$(mktemp -d) || exit 99
trap 'rm -rf "$tmp"' EXIT
fail=0

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
