#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Build a CUDA-enabled StarPU 1.3.10 from Debian 12 (bookworm)'s source package
# and install a lean copy that nnt's `./configure --with-starpu=PREFIX` can use
# (it reads PREFIX/lib/pkgconfig/starpu-1.3.pc).
#
# Usage: scripts/build-starpu-cuda.sh [PREFIX]        (default: $PWD/starpu-cuda)
# Environment:
#   CUDA_HOME  CUDA toolkit (nvcc, cuda.h, libcudart, libcublas)  [/usr/local/cuda]
#   JOBS       parallel make jobs                                  [nproc]
#   WORKDIR    where the source is fetched and built               [/tmp/nnt-starpu-cuda-build]
#   MAX_MB     fail if the pruned install is larger than this      [40]
#
# Re-runnable: the downloaded source, the patched tree and the configured build
# directory are reused when nothing relevant changed; `make` is incremental.
# No GPU is needed to build. Runs apt-get as root (or through sudo otherwise).
#
# Why a patch (scripts/starpu-cuda.patch, applied with `patch -p1`): Debian builds
# StarPU without CUDA, and 1.3.10 predates CUDA 12/13. Building it against
# CUDA 13.0 hits exactly two problems; each hunk fixes one of them minimally:
#
#  1. src/drivers/cuda/driver_cuda.h included the legacy <cublas.h>, and
#     src/drivers/cuda/starpu_cublas.c included it next to <starpu_cublas_v2.h>
#     (i.e. <cublas_v2.h>). Current cuBLAS headers refuse that combination
#     ("#error It is an error to include both cublas.h and cublas_v2.h").
#     - driver_cuda.h: <cublas.h> -> <cublas_v2.h>. The header only needs the
#       CUBLAS_STATUS_* codes for starpu_cublas_report_error(); v2 has them.
#     - starpu_cublas.c: drop <cublas.h> and the legacy-API calls that only it
#       declares: cublasInit() (per-device legacy context), cublasShutdown() and
#       cublasSetKernelStream() (stream for legacy calls). StarPU's per-worker
#       cublas_v2 handles (cublasCreate + cublasSetStream on the worker stream,
#       returned by starpu_cublas_get_local_handle()) are untouched, so v2 users
#       see no change. starpu_cublas_set_stream() stays exported but becomes a
#       no-op: it only ever redirected the legacy API.
#  2. src/drivers/cuda/driver_cuda.c read cudaDeviceProp.computeMode, a field
#     removed from the struct in CUDA 13. Query the same value with
#     cudaDeviceGetAttribute(&v, cudaDevAttrComputeMode, dev) instead (the
#     check that aborts in EXCLUSIVE-THREAD mode is kept as it was).
# Nothing else in the library needs changing for CUDA 13: StarPU 1.3.10 has no
# .cu files in libstarpu, does not use clockRate/memoryClockRate, cudaMemAdvise,
# cudaMemPrefetchAsync or texture references, and its only cudaThreadExit()
# call sits behind `#if CUDART_VERSION < 4000`.
#
# Configure choices beyond the obvious --disable-* (see the CONFIGURE_ARGS list):
#  - --enable-maxcpus=64: Debian's build has 4; a 16-core box would get 2 CPUs.
#  - no --disable-sc-hypervisor: in 1.3.10 that flag *enables* the scheduler
#    hypervisor (its AC_ARG_ENABLE sets "yes" whenever the option is given), and
#    that library then fails to build (needs uthash.h). It is off by default.
#  - ac_cv_lib_cusparse_cusparseCreate=no: otherwise libstarpu links libcusparse
#    (a large library, loaded by every program) only for the optional
#    starpu_cusparse_init()/starpu_cusparse_get_local_handle() helpers, which
#    nnt does not use. (starpu_cusparse.h still declares the latter: do not
#    call it with this build.)
#  - NVML (libnvidia-ml) is used only if configure can run an nvmlInit()
#    program, which needs a driver; on a build box without a GPU it is left
#    out, so the library does not depend on the driver's NVML either.
#  - --disable-full-gdb-information: no -g3 (debug info is stripped anyway).
#  - -Wno-deprecated-declarations: starpu.h pulls in <cusparse.h>, whose
#    deprecated types would otherwise emit ~40k warnings and bury real errors.
set -euo pipefail

STARPU_VERSION=1.3.10
SCRIPT_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
PATCH_FILE=$SCRIPT_DIR/starpu-cuda.patch

PREFIX=${1:-$PWD/starpu-cuda}
CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
JOBS=${JOBS:-$(nproc)}
WORKDIR=${WORKDIR:-/tmp/nnt-starpu-cuda-build}
MAX_MB=${MAX_MB:-40}

log() { printf '\n==> %s\n' "$*"; }
note() { printf '    %s\n' "$*"; }
die() { printf '\nerror: %s\n' "$*" >&2; exit 1; }
show() { printf '+'; printf ' %q' "$@"; }
run() { show "$@"; printf '\n'; "$@"; }
# run_logged LOGFILE CMD...: run CMD with its output in LOGFILE; on failure show
# the errors and the end of the log.
run_logged() {
	local logfile=$1; shift
	show "$@"; printf '  (log: %s)\n' "$logfile"
	if ! "$@" >"$logfile" 2>&1; then
		printf '\n--- errors in %s ---\n' "$logfile" >&2
		grep -nE '(error|Error)[: ]' "$logfile" | grep -v 'warning' | head -n 40 >&2 || true
		printf -- '--- last 40 lines of %s ---\n' "$logfile" >&2
		tail -n 40 "$logfile" >&2
		die "failed: $*"
	fi
}

START=$SECONDS
SUDO=
if [ "$(id -u)" -ne 0 ]; then
	command -v sudo >/dev/null || die "not root and sudo not found: cannot run apt-get"
	SUDO=sudo
fi

[ -f "$PATCH_FILE" ] || die "missing $PATCH_FILE"
mkdir -p "$PREFIX" "$WORKDIR"
PREFIX=$(cd "$PREFIX" && pwd)
WORKDIR=$(cd "$WORKDIR" && pwd)
case "$PREFIX" in "$WORKDIR"|"$WORKDIR"/*) die "PREFIX must not be inside WORKDIR";; esac
# The install step empties PREFIX first, so PREFIX must be a dedicated directory:
# either empty or made by an earlier run of this script (marker file).
MARKER=$PREFIX/.nnt-starpu-cuda
if [ ! -e "$MARKER" ] && [ -n "$(ls -A "$PREFIX")" ]; then
	die "$PREFIX is not empty and was not made by this script; use a dedicated PREFIX"
fi
touch "$MARKER"

log "StarPU $STARPU_VERSION with CUDA"
note "PREFIX    = $PREFIX"
note "CUDA_HOME = $CUDA_HOME"
note "JOBS      = $JOBS"
note "WORKDIR   = $WORKDIR"

# ---------------------------------------------------------------- CUDA toolkit
log "Checking the CUDA toolkit in $CUDA_HOME"
[ -x "$CUDA_HOME/bin/nvcc" ] || die "$CUDA_HOME/bin/nvcc not found (set CUDA_HOME)"
[ -f "$CUDA_HOME/include/cuda.h" ] || die "$CUDA_HOME/include/cuda.h not found"
[ -f "$CUDA_HOME/include/cublas_v2.h" ] || die "$CUDA_HOME/include/cublas_v2.h not found (cuBLAS headers)"
CUDA_LIBDIR=
for d in lib64 lib; do
	if [ -e "$CUDA_HOME/$d/libcudart.so" ] && [ -e "$CUDA_HOME/$d/libcublas.so" ]; then
		CUDA_LIBDIR=$CUDA_HOME/$d; break
	fi
done
[ -n "$CUDA_LIBDIR" ] || die "libcudart.so / libcublas.so not found under $CUDA_HOME/lib64 or lib"
note "$("$CUDA_HOME/bin/nvcc" --version | grep release)"
note "libraries in $CUDA_LIBDIR"
# configure runs a small program linked with -lcudart; make sure it can load it.
export LD_LIBRARY_PATH=$CUDA_LIBDIR${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}

# ------------------------------------------------------------- build packages
# Only what configure/make need; `apt-get build-dep starpu` would pull in MPI,
# Fortran, doxygen, LaTeX, ...  dpkg-dev provides dpkg-source for apt-get source.
PKGS=(gcc g++ make pkg-config libhwloc-dev dpkg-dev patch xz-utils binutils file)
APT_UPDATED=
apt_update() {
	if [ -z "$APT_UPDATED" ]; then run $SUDO apt-get update -q; APT_UPDATED=1; fi
}
missing=()
for p in "${PKGS[@]}"; do
	[ "$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)" = 'install ok installed' ] || missing+=("$p")
done
log "Build packages"
if [ ${#missing[@]} -gt 0 ]; then
	apt_update
	run $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${missing[@]}"
else
	note "already installed: ${PKGS[*]}"
fi

# ------------------------------------------------------------- source package
log "Source package"
SRC_LIST=/etc/apt/sources.list.d/nnt-debian-bookworm-src.sources
DL=$WORKDIR/download
mkdir -p "$DL"
find_dsc() { find "$DL" -maxdepth 1 -name "starpu_${STARPU_VERSION}*.dsc" | sort | tail -n 1; }
# (No `cmd | grep -q` in this script: with pipefail, grep -q exiting early can
# make the pipeline fail with SIGPIPE. Output is captured first instead.)
have_src() { grep -q "^Version: $STARPU_VERSION" <<<"$(apt-cache showsrc starpu 2>/dev/null || true)"; }
DSC=$(find_dsc)
# A source package already in WORKDIR/download (an earlier run, or `apt-get source
# --download-only starpu` run by hand with a private source list) needs no apt at all.
if [ -n "$DSC" ]; then
	note "reusing $DSC"
else
	if ! have_src; then
		if [ ! -e "$SRC_LIST" ]; then
			note "no deb-src entry for starpu $STARPU_VERSION: adding $SRC_LIST"
			signed_by=
			[ -f /usr/share/keyrings/debian-archive-keyring.gpg ] &&
				signed_by="Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg"
			printf '%s\n' "Types: deb-src" "URIs: http://deb.debian.org/debian" \
				"Suites: bookworm" "Components: main" ${signed_by:+"$signed_by"} |
				$SUDO tee "$SRC_LIST" >/dev/null
		fi
		APT_UPDATED=
		apt_update
		have_src ||
			die "apt has no source package starpu $STARPU_VERSION (is this Debian 12?)"
	fi
	# --download-only: we unpack ourselves, so a rerun can start from a clean tree.
	(cd "$DL" && run apt-get source --download-only starpu)
	DSC=$(find_dsc)
	[ -n "$DSC" ] || die "apt-get source did not fetch starpu $STARPU_VERSION"
fi

# Unpack (with Debian's own patches) + apply ours. Redone from scratch when the
# patch file changes, so a half-applied or outdated patch never lingers.
SRC=$WORKDIR/starpu-$STARPU_VERSION
BUILD=$WORKDIR/build
PATCH_SUM=$(sha256sum "$PATCH_FILE" | cut -d' ' -f1)
if [ ! -f "$SRC/.nnt-patched" ] || [ "$(cat "$SRC/.nnt-patched")" != "$PATCH_SUM" ]; then
	log "Unpacking $(basename "$DSC") and applying $(basename "$PATCH_FILE")"
	rm -rf "$SRC" "$BUILD"
	run dpkg-source --no-check -x "$DSC" "$SRC"
	(cd "$SRC" && run patch -p1 --forward --no-backup-if-mismatch < "$PATCH_FILE")
	echo "$PATCH_SUM" > "$SRC/.nnt-patched"
else
	note "patched source tree up to date: $SRC"
fi
grep -q "^PACKAGE_VERSION='$STARPU_VERSION'\$" "$SRC/configure" ||
	die "$SRC is not StarPU $STARPU_VERSION"

# ------------------------------------------------------------------ configure
CONFIGURE_ARGS=(
	--prefix="$PREFIX"
	--enable-cuda --with-cuda-dir="$CUDA_HOME" --with-cuda-lib-dir="$CUDA_LIBDIR"
	--enable-maxcpus=64
	--disable-opencl --disable-socl --disable-mic
	--disable-mpi --disable-mpi-master-slave
	--disable-build-doc --disable-build-doc-pdf
	--disable-build-examples --disable-build-tests
	--disable-fortran --disable-openmp --disable-starpufft --disable-starpurm
	--disable-mlr --disable-hdf5 --disable-leveldb --disable-opengl-render
	--disable-glpk --disable-valgrind --without-fxt --disable-simgrid
	--disable-static --enable-shared
	--disable-full-gdb-information
	ac_cv_lib_cusparse_cusparseCreate=no
	CFLAGS="-g -O2 -Wno-deprecated-declarations"
	CXXFLAGS="-g -O2 -Wno-deprecated-declarations"
)
ARGS_SUM=$(printf '%s\n' "${CONFIGURE_ARGS[@]}" | sha256sum | cut -d' ' -f1)
mkdir -p "$BUILD"
if [ ! -f "$BUILD/config.status" ] || [ "$(cat "$BUILD/.nnt-configure-args" 2>/dev/null || true)" != "$ARGS_SUM" ]; then
	log "Configuring"
	rm -f "$BUILD/.nnt-configure-args"
	(cd "$BUILD" && run_logged "$BUILD/configure.log" "$SRC/configure" "${CONFIGURE_ARGS[@]}")
	echo "$ARGS_SUM" > "$BUILD/.nnt-configure-args"
else
	log "Configure: up to date (delete $BUILD to force)"
fi
sed -n '/CPUs   enabled/,/Maximum number of task buffers/p' "$BUILD/configure.log" | sed 's/^\t*/    /'
grep -q '^#define STARPU_USE_CUDA 1' "$BUILD/include/starpu_config.h" ||
	die "configure did not enable CUDA (STARPU_USE_CUDA missing); see $BUILD/configure.log"

# ---------------------------------------------------------------- build+install
log "Building with $JOBS jobs"
t0=$SECONDS
run_logged "$BUILD/make.log" make -C "$BUILD" -j"$JOBS"
note "build step: $((SECONDS - t0)) s"

log "Installing into $PREFIX"
# Start from an empty prefix so that files pruned on an earlier run do not linger
# (only a prefix this script made is wiped: see the marker check at the top).
rm -rf "${PREFIX:?}"/{bin,include,lib,share,libexec,etc} "${PREFIX:?}/COPYING.LGPL"
run_logged "$BUILD/install.log" make -C "$BUILD" install

# ---------------------------------------------------------------------- prune
log "Pruning and stripping"
KEEP_BIN=(starpu_machine_display starpu_perfmodel_display)
if [ -d "$PREFIX/bin" ]; then
	for f in "$PREFIX"/bin/*; do
		keep=
		for k in "${KEEP_BIN[@]}"; do [ "$(basename "$f")" = "$k" ] && keep=1; done
		[ -n "$keep" ] || rm -f "$f"
	done
fi
# share/: docs, tutorial sources, sample perfmodels, gdbinit -- none used at run
# time. Keep the LGPL text next to the library.
mv "$PREFIX/share/doc/starpu/COPYING.LGPL" "$PREFIX/COPYING.LGPL"
rm -rf "${PREFIX:?}/share" "${PREFIX:?}/libexec" "${PREFIX:?}/etc"
rm -rf "${PREFIX:?}/lib/starpu"             # example perfmodels / data, not needed
find "$PREFIX/lib" -maxdepth 1 \( -name '*.a' -o -name '*.la' \) -delete
# starpu-1.3.pc puts the CUDA headers on -I. starpu.h includes them (and
# <cusparse.h>), so every nnt file would get ~200 warnings (deprecated cuSPARSE
# types, unnamed unions under -pedantic) and fail with -Werror. Make them system
# headers instead; `pkg-config --cflags` then prints `-isystem CUDA_HOME/include`
# (note: --cflags-only-I no longer lists that directory; --cflags-only-other does).
PC=$PREFIX/lib/pkgconfig/starpu-1.3.pc
[ -f "$PC" ] || die "$PC missing"
pc_text=$(<"$PC")
cuda_inc=$CUDA_HOME/include
grep -qF -- "-I$cuda_inc" <<<"$pc_text" || die "$PC does not mention -I$cuda_inc"
printf '%s\n' "${pc_text//"-I$cuda_inc"/"-isystem $cuda_inc"}" >"$PC"
# Keep only the starpu-1.3 pkg-config file (the others are aliases for older API levels).
find "$PREFIX/lib/pkgconfig" -name '*.pc' ! -name 'starpu-1.3.pc' -delete
find "$PREFIX/lib" -maxdepth 1 -type f -name '*.so*' -exec strip --strip-unneeded {} +
[ -d "$PREFIX/bin" ] && find "$PREFIX/bin" -type f -exec strip --strip-unneeded {} +
rmdir "$PREFIX/bin" 2>/dev/null || true

# ---------------------------------------------------------------------- checks
log "Checking the install"
CONFIG_H=$PREFIX/include/starpu/1.3/starpu_config.h
[ -f "$CONFIG_H" ] || die "$CONFIG_H missing"
grep -q '^#define STARPU_USE_CUDA 1' "$CONFIG_H" || die "STARPU_USE_CUDA is not defined in $CONFIG_H"
grep -E '^#define (STARPU_USE_CUDA|STARPU_MAXCPUS|STARPU_MAXCUDADEVS|STARPU_NMAXBUFS) ' "$CONFIG_H" | sed 's/^/    /'
note "pkg-config: $(PKG_CONFIG_PATH=$PREFIX/lib/pkgconfig pkg-config --cflags --libs starpu-1.3)"
LIB=$PREFIX/lib/libstarpu-1.3.so
[ -e "$LIB" ] || die "$LIB missing"
LDD=$(ldd "$LIB")
if grep -q 'not found' <<<"$LDD"; then
	printf '%s\n' "$LDD" >&2
	die "$LIB has unresolved dependencies"
fi
grep -E 'cudart|cublas|hwloc' <<<"$LDD" | sed 's/^\s*/    /'
grep -q 'NEEDED.*libcudart\.so' <<<"$(readelf -d "$LIB")" || die "$LIB does not link libcudart"
grep -q ' T starpu_cuda_get_local_stream$' <<<"$(nm -D --defined-only "$LIB")" ||
	die "$LIB lacks the CUDA driver (starpu_cuda_get_local_stream)"

SIZE_MB=$(du -sm "$PREFIX" | cut -f1)
SIZE_H=$(du -sh "$PREFIX" | cut -f1)
[ "$SIZE_MB" -le "$MAX_MB" ] || { du -sh "$PREFIX"/* >&2; die "install is ${SIZE_MB} MB, limit ${MAX_MB} MB"; }

log "Done in $((SECONDS - START)) s"
note "PREFIX: $PREFIX"
note "size:   $SIZE_H"
note "At run time libcudart/libcublas come from $CUDA_LIBDIR (ldconfig or LD_LIBRARY_PATH)."
note "Configure nnt with:"
echo
echo "    ./configure --with-starpu=$PREFIX"
