#!/bin/sh
# SPDX-License-Identifier: MIT
# nnt-train with no data options (the default corpus, /usr/share/common-licenses), shortened
# to 2 steps: exit status 0, train.csv with a header and 2 rows, the validation on the held-out
# tenth (val.csv), the loss curve, the checkpoint, the list of files written and a text sample. SKIP (77) with a message when the
# default corpus is missing (a minimal container); check_train.sh covers the rest on its own
# generated corpus.
set -u
: "${top_builddir:?}"
prog="$top_builddir/nnt-train"
[ -x "$prog" ] || { echo "FAIL: $prog was not built"; exit 1; }
corpus=/usr/share/common-licenses
if [ ! -d "$corpus" ] || [ -z "$(ls "$corpus" 2>/dev/null)" ]; then
    echo "SKIP: the default corpus $corpus is missing or empty (Debian: base-files)"
    exit 77
fi
tmp=$(mktemp -d) || exit 99
trap 'rm -rf "$tmp"' EXIT
fail=0
fail() { echo "FAIL: $*"; fail=1; }

"$prog" --steps 2 --sample 8 --out "$tmp/def" > "$tmp/out" 2> "$tmp/err"
status=$?
if [ $status -ne 0 ]; then
    fail "default run: exit status $status"; cat "$tmp/err"
else
    rows=$(wc -l < "$tmp/def/train.csv")
    [ "$rows" -eq 3 ] || fail "train.csv has $rows lines, not a header + 2 rows"
    grep -q '<polyline' "$tmp/def/loss.svg" || fail "loss.svg has no curve"
    [ -s "$tmp/def/checkpoint.safetensors" ] || fail "no checkpoint"
    grep -q -- '---- sample' "$tmp/out" || fail "no sample printed"
    grep -q 'written' "$tmp/out" || fail "no list of the files written"
    grep -q "data: *$corpus" "$tmp/err" "$tmp/out" || fail "the header does not name the corpus $corpus"
    # a tenth of the default corpus held out: validated after each of the 2 steps
    # (2 steps: a validation every step, of one batch, a tenth of the batches between them
    # rounded up to 1)
    grep -q "validate: *the last [0-9]* tokens of the data (split 0.1): 1 batch of B x T (1024 tokens) every step" "$tmp/out" ||
        fail "the header does not describe the validation"
    [ "$(grep -c '^val  *[12]/2  loss [0-9.]*  *on [0-9]* held-out tokens' "$tmp/out")" -eq 2 ] ||
        fail "no validation lines after steps 1 and 2"
    rows=$(wc -l < "$tmp/def/val.csv" 2>/dev/null || echo 0)
    [ "$rows" -eq 3 ] || fail "val.csv has $rows lines, not a header + 2 rows"
    [ $fail -eq 0 ] && echo "ok: default run (2 steps): $(grep -c '^step' "$tmp/out") progress lines, files written"
fi
exit $fail
