# SPDX-License-Identifier: MIT
# Sourced by a GPU bundle's programs (scripts/gpu-bundle.sh): put the bundle's libraries and
# the machine's CUDA libraries (cudart, cuBLAS, cuBLASLt of the major version nnt was built
# with) on LD_LIBRARY_PATH. POSIX sh.
# (NNT_BUNDLE_DIR: the bundle, for a script elsewhere that sources this file; else the
# bundle is found from the program or script that sources it, in the bundle or a folder of it)
if [ -n "${NNT_BUNDLE_DIR:-}" ]; then
    nnt_bundle_lib=$NNT_BUNDLE_DIR/lib
else
    nnt_bundle_lib=$(cd "$(dirname "$0")" && pwd)/lib
    [ -d "$nnt_bundle_lib" ] || nnt_bundle_lib=$(cd "$(dirname "$0")/.." && pwd)/lib
fi
nnt_cuda_libs=
if ! ldconfig -p 2>/dev/null | grep -q 'libcublasLt\.so\.13 '; then
    for d in /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib \
             /usr/local/cuda-13*/lib64 /usr/lib/x86_64-linux-gnu; do
        [ -e "$d/libcublasLt.so.13" ] && { nnt_cuda_libs=$d; break; }
    done
    if [ -z "$nnt_cuda_libs" ]; then   # CUDA libraries from pip wheels (PyTorch's)
        for f in $(find / -xdev -name 'libcublasLt.so.13' 2>/dev/null | head -3); do
            d=$(dirname "$f")
            nnt_cuda_libs=$d
            for r in "$d"/../../*/lib "$d"/../../cuda_runtime/lib; do
                [ -e "$r/libcudart.so.13" ] && nnt_cuda_libs="$nnt_cuda_libs:$r"
            done
            break
        done
    fi
fi
LD_LIBRARY_PATH="$nnt_bundle_lib${nnt_cuda_libs:+:$nnt_cuda_libs}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export LD_LIBRARY_PATH
