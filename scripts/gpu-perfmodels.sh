#!/bin/sh
# SPDX-License-Identifier: MIT
# What StarPU's history-based performance models in a STARPU_HOME hold, per kind of worker
# (cpu0, cuda0, ...): how many task sizes (footprints) each kind ran, how many of them are
# calibrated (at least STARPU_CALIBRATE_MINIMUM runs, default 10: until then a dmda-family
# scheduler sends that task to a worker whose model lacks it), the runs and their time, and
# the calibration work: the sum over footprints of min(runs, minimum) x mean time, what a
# machine without models spends executing them on that kind of worker before the models
# count (bench/RESULTS-gpu.md, issue 42's slow first steps).
#
# Usage: scripts/gpu-perfmodels.sh STARPU_HOME [CODELETS]
#   CODELETS: 1 to list every codelet per kind of worker as well (largest calibration work
#   first). Reads STARPU_HOME/.starpu/sampling/codelets/45/* (StarPU 1.3's format, version 45).
# Output lines, one per kind of worker:
#   perfmodels cpu0: 27 codelets, 180 footprints, 150 calibrated, 3400 runs, 12.3 s run,
#   calibration 9.8 s
set -u
home=${1:?usage: scripts/gpu-perfmodels.sh STARPU_HOME [CODELETS]}
detail=${2:-0}
dir=$home/.starpu/sampling/codelets/45
[ -d "$dir" ] || dir=$home/sampling/codelets/45   # STARPU_HOME pointing at .starpu itself
if [ ! -d "$dir" ]; then
    echo "perfmodels: none in $home"
    exit 0
fi
min=${STARPU_CALIBRATE_MINIMUM:-10}
for f in "$dir"/*; do
    [ -f "$f" ] || continue
    name=$(basename "$f")
    awk -v codelet="${name%.*}" -v min="$min" '
        /^# Model for / { arch = $4; sub(/_impl[0-9]+$/, "", arch); table = 0; next }
        /^# hash/ { table = 1; next }
        /^#/ { table = 0; next }
        table && NF == 8 && $1 ~ /^[0-9a-f]+$/ {
            n = $8 + 0; mean = $4 + 0
            runs[arch] += n; secs[arch] += ($6 + 0) / 1e6; fp[arch]++
            if (n >= min) cal[arch]++
            work[arch] += (n < min ? n : min) * mean / 1e6
        }
        END { for (a in fp) printf "%s %s %d %d %d %.6f %.6f\n", a, codelet, fp[a], cal[a] + 0,
                                  runs[a], secs[a], work[a] }' "$f"
done | sort | awk -v detail="$detail" '
    { a = $1; codelets[a]++; fp[a] += $3; cal[a] += $4; runs[a] += $5; secs[a] += $6
      work[a] += $7
      if (detail == 1)
          line[a] = line[a] sprintf("    %s %s: %d footprints, %d calibrated, %d runs, " \
                                    "calibration %.3f s\n", a, $2, $3, $4, $5, $7) }
    END {
        for (a in fp) {
            printf "perfmodels %s: %d codelets, %d footprints, %d calibrated, %d runs, " \
                   "%.2f s run, calibration %.2f s\n", a, codelets[a], fp[a], cal[a], runs[a],
                   secs[a], work[a]
            if (detail == 1) printf "%s", line[a]
        }
    }'
