#!/bin/sh
# SPDX-License-Identifier: MIT
# The task checks of NNT_DEBUG_TASKS (lib/codelets/debug.c; tests/test_debug_tasks shows each
# fault they find) over suites whose tasks cover the library's kinds of access: packed rows
# and grouped-query attention (test_packed), experts sized at run time with scratch buffers
# (test_model_moe), weight copies and B packs kept between products (test_bf16_copies),
# frozen weights and adapters (test_lora), gradients reduced in the backward
# (test_optim_backward); then test_ops_window with NNT_DEBUG_JITTER (random delays around
# every task). Any fault fails its suite (nnt_ctx_destroy returns an error) and this test.
set -u
: "${top_builddir:?}"
tmp=$(mktemp -d) || exit 99
trap 'rm -rf "$tmp"' EXIT
fail=0

run() {   # run NAME VAR=VALUE...
    name=$1
    shift
    prog="$top_builddir/tests/$name"
    [ -x "$prog" ] || { echo "FAIL: $prog was not built"; fail=1; return; }
    if env "$@" CK_VERBOSITY=minimal "$prog" > "$tmp/$name.log" 2>&1; then
        echo "ok: $name with $*"
    else
        echo "FAIL: $name with $*"
        grep -E "NNT_DEBUG_TASKS|:F:|:E:" "$tmp/$name.log" | head -20
        fail=1
    fi
}

for t in test_packed test_model_moe test_bf16_copies test_lora test_optim_backward; do
    run "$t" NNT_DEBUG_TASKS=1
done
run test_ops_window NNT_DEBUG_JITTER=200
exit $fail
