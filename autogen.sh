#!/bin/sh
# SPDX-License-Identifier: MIT
# Regenerate ./configure and the Makefile.in files from configure.ac and Makefile.am.
set -e
cd "$(dirname "$0")"
mkdir -p m4 build-aux
autoreconf -fi
