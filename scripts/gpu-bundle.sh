#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Pack a CUDA build of nnt into a self-contained folder that runs on a GPU machine without
# building anything there: the real programs (nnt-train, every test program), libnnt, the
# CUDA-enabled StarPU and the Debian libraries they need that a plain CUDA image lacks
# (BLIS, hwloc, libsubunit, ...), plus run.sh (scripts/gpu-run.sh) to run the checks.
#
# Usage: scripts/gpu-bundle.sh BUILD [DEST]          (default DEST: $PWD/gpu-bundle)
#   BUILD  a build directory configured with --with-starpu=PREFIX (a CUDA StarPU from
#          scripts/build-starpu-cuda.sh) and NVCC found; this script runs
#          `make -C BUILD all` and `make -C BUILD check TESTS=` (builds, runs no test).
# and DEST.tar.xz, the folder in one xz archive (about 5 MB: the test programs' copies of the
# CUDA kernels are stored once), which is what a device call carries. Then, on the GPU
# machine, from the source tree that holds DEST (scripts/gpu-session.sh unpacks the archive):
#   OUT=/some/dir bash gpu-bundle/run.sh info test bench ooc
# (see scripts/gpu-run.sh for the phases). Left out on purpose: the CUDA libraries (cudart,
# cuBLAS, cuBLASLt: hundreds of MB; run.sh finds the machine's own) and glibc/libstdc++.
#
# The bundle is plain files: copy it with the source tree (tests read tests/fixtures/).
#
# scripts/gpu-bundle.sh --cpu BUILD [DEST] (default DEST: $PWD/cpu-bundle) packs nnt-train
# alone, for CPU measurements on such a machine's host CPU (issue 16: the lent GPU machines
# have AVX-512 CPUs): BUILD configured --with-onednn --without-mpi (no CUDA needed); about
# 58 MB with libdnnl. Then bench/compare_cpu_kernels.py --nnt-train cpu-bundle/nnt-train,
# or scripts/gpu-session.sh's cpubench step.
set -euo pipefail

cpu_only=0
if [ "${1:-}" = --cpu ]; then
    cpu_only=1
    shift
fi
build=${1:?usage: scripts/gpu-bundle.sh [--cpu] BUILD [DEST]}
if [ $cpu_only = 1 ]; then dest=${2:-$PWD/cpu-bundle}; else dest=${2:-$PWD/gpu-bundle}; fi
build=$(cd "$build" && pwd)
src=$(cd "$(dirname "$0")/.." && pwd)

if [ $cpu_only = 1 ]; then
    grep -q '^#define NNT_HAVE_ONEDNN 1' "$build/config.h" ||
        echo "gpu-bundle: warning: $build has no oneDNN (configure --with-onednn)" >&2
else
    grep -q '^#define NNT_HAVE_CUDA 1' "$build/config.h" ||
        { echo "gpu-bundle: $build was configured without CUDA (no NVCC?)" >&2; exit 1; }
    grep -q '^#define NNT_HAVE_ONEDNN 1' "$build/config.h" &&
        echo "gpu-bundle: warning: $build uses oneDNN (libdnnl, 40 MB in the bundle); for a" \
             "GPU bundle configure --without-onednn --without-mpi" >&2
    grep -q 'with-starpu' "$build/config.log" ||
        echo "gpu-bundle: warning: $build was not configured with --with-starpu (a CUDA" \
             "StarPU)" >&2
fi

echo "==> building in $build"
make -C "$build" -j"$(nproc)" all >/dev/null
[ $cpu_only = 1 ] || make -C "$build" -j"$(nproc)" check TESTS= >/dev/null

rm -rf "$dest"
mkdir -p "$dest/lib" "$dest/tests"

# The ELF behind a libtool wrapper (BUILD/x -> BUILD/.libs/x), or the program itself.
real_program() {
    local p=$1 d b
    d=$(dirname "$p") b=$(basename "$p")
    if [ -f "$d/.libs/$b" ]; then echo "$d/.libs/$b"; else echo "$p"; fi
}

cp "$(real_program "$build/nnt-train")" "$dest/nnt-train.bin"
[ $cpu_only = 1 ] || for t in "$build"/tests/test_*; do
    case $t in *.log | *.trs | *.o | *.starpu) continue ;; esac
    [ -x "$t" ] && [ -f "$t" ] || continue
    cp "$(real_program "$t")" "$dest/tests/$(basename "$t")"
done
[ $cpu_only = 1 ] || cp "$src"/tests/check_train.sh "$dest/tests/"
if [ $cpu_only = 0 ]; then   # issue 39's window benchmark (gpu-session.sh window)
    mkdir -p "$dest/bench"
    cp "$(real_program "$build/bench/attention_window")" "$dest/bench/attention_window"
fi
cp -L "$build/.libs/libnnt.so.0" "$dest/lib/"   # the soname, as a file: links may not travel

# Libraries the programs load, minus the C runtime and CUDA's own (the GPU machine has
# those): resolved here with the build's libnnt first.
export LD_LIBRARY_PATH="$build/.libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
{
    ldd "$dest/nnt-train.bin"
    for t in "$dest"/tests/test_*; do if [ -e "$t" ]; then ldd "$t"; fi; done
} | awk '$2 == "=>" && $3 ~ /^\// {print $1, $3}' | sort -u |
while read -r name path; do
    case $name in
    libc.so* | libm.so* | libpthread.so* | libdl.so* | librt.so* | ld-linux* | \
    libstdc++.so* | libgcc_s.so* | libcuda.so* | libcudart.so* | libcublas.so* | \
    libcublasLt.so* | libnnt.so*) continue ;;
    esac
    cp -L "$path" "$dest/lib/$name"
done
missing=$(ldd "$dest/nnt-train.bin" | grep 'not found' || true)
[ -z "$missing" ] || { echo "gpu-bundle: unresolved libraries:" >&2; echo "$missing" >&2; exit 1; }

# Symbols off (57 -> 35 MB for a CUDA build on 2026-11-26, 53 MB with the tests of 2026-11-28;
# the xz archive below, 5.4 MB, is what travels): a device call carries at most 64 MiB with
# the source tree.
strip --strip-unneeded "$dest/nnt-train.bin" $(ls "$dest"/tests/test_* 2>/dev/null) \
    $(ls "$dest"/bench/* 2>/dev/null) \
    "$dest"/lib/*.so* 2>/dev/null ||
    echo "gpu-bundle: warning: strip failed; the bundle keeps its symbols" >&2

cp "$src/scripts/gpu-run.sh" "$dest/run.sh"
chmod +x "$dest/run.sh"
# nnt-train for scripts (check_train.sh, bench/compare_pytorch.py): the program with the
# bundle's libraries, wherever the bundle is.
cat > "$dest/nnt-train" <<'EOF'
#!/bin/sh
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib/env.sh"
exec "$here/nnt-train.bin" "$@"
EOF
chmod +x "$dest/nnt-train"
cp "$src/scripts/gpu-env.sh" "$dest/lib/env.sh"
{
    echo "bundle made $(date -u '+%Y-%m-%d %H:%M UTC') on $(uname -n)"
    echo "source: $(git -C "$src" rev-parse --short HEAD 2>/dev/null || echo '?')" \
         "$(git -C "$src" status --porcelain 2>/dev/null | grep -q . && echo '(modified)')"
    echo "build: $build"
    grep -E '^ *\$ .*configure' "$build/config.log" | head -1
    nvcc --version 2>/dev/null | tail -1
} > "$dest/BUILD-INFO"
echo "==> $dest: $(du -sh "$dest" | cut -f1)"
ls -la "$dest" "$dest/lib" | sed 's/^/    /'
# What a device call carries: one archive. The test programs each hold the CUDA kernels
# (about 1.5 MB of them), which xz's 64 MiB dictionary stores once: 53 MB -> 5.4 MB
# (2026-11-28), where the folder and the source tree together pass the 64 MiB a call takes.
# scripts/gpu-session.sh unpacks it on the GPU machine.
if [ $cpu_only = 0 ]; then
    tar -C "$(dirname "$dest")" -cf - "$(basename "$dest")" | xz -9 -T0 > "$dest.tar.xz"
    echo "==> $dest.tar.xz: $(du -sh "$dest.tar.xz" | cut -f1) (carry this one)"
fi
