#!/bin/sh
# SPDX-License-Identifier: MIT
# Print the names of the functions declared NNT_API in the given header, one per line, sorted.
tr '\n' ' ' < "$1" | grep -oE 'NNT_API [a-z][^;#(]*\(' |
    sed -E 's/.*[ *]([A-Za-z_][A-Za-z0-9_]*) *\($/\1/' | sort -u
