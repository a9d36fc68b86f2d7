#!/bin/sh
# SPDX-License-Identifier: MIT
# Install the Debian 12 packages nnt needs to build, test and package (idempotent).
# Runs apt-get as root, or through sudo for another user. The CUDA toolkit is not a Debian
# package here: configure uses it when nvcc is found (PATH or /usr/local/cuda/bin).
set -e
# build and test; consumers from CMake and Meson (tests/check_consumer.sh); the Debian
# packaging check that make distcheck runs (tests/check_deb.sh, packaging/build-deb.sh)
PACKAGES="build-essential autoconf automake libtool pkg-config \
libstarpu-dev libblis-dev libdnnl-dev libhwloc-dev libpcre2-dev libutf8proc-dev check mandoc abigail-tools \
libopenmpi-dev openmpi-bin \
cmake meson ninja-build \
dpkg-dev debhelper lintian"
SUDO=
[ "$(id -u)" -eq 0 ] || SUDO=sudo
missing=
for p in $PACKAGES; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
if [ -n "$missing" ]; then
    echo "install-deps: installing$missing"
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends $missing
else
    echo "install-deps: all packages present"
fi
