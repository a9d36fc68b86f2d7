# SPDX-License-Identifier: MIT
# Sourced by the check scripts that compare nnt's printed numbers with a reference's
# (check_dpo.sh, check_reward.sh, check_classify.sh; the references read by
# tests/st_float64.py).

# within TOL GOT WANT: GOT and WANT hold as many numbers (space-separated, at least one), each
# of GOT within TOL of WANT's at its place; status 0 then, else 1.
within() {
    awk -v tol="$1" -v g="$2" -v w="$3" 'BEGIN {
        n = split(g, a, " "); m = split(w, b, " ");
        if (n != m || n == 0) exit 1;
        for (i = 1; i <= n; i++) if ((a[i] - b[i]) > tol || (b[i] - a[i]) > tol) exit 1 }'
}
