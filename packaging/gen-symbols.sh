#!/bin/sh
# SPDX-License-Identifier: MIT
# Print the dpkg symbols file of libnnt0 from the library's version script: every exported
# function under its version node (nnt_ctx_create@NNT_0.1), with the release that
# introduced the node as its minimal version (node NNT_0.x -> 0.x.0), and the node names
# themselves. dpkg-gensymbols -c4 (debian/rules) then fails the build on any difference
# between the library and this list.
#   packaging/gen-symbols.sh lib/libnnt.map > debian/libnnt0.symbols
set -eu
map=${1:?usage: gen-symbols.sh lib/libnnt.map}
echo "libnnt.so.0 libnnt0 #MINVER#"
echo "* Build-Depends-Package: libnnt-dev"
awk '
    /^NNT_[0-9.]+ *\{/ { node = $1; sub(/ *\{.*/, "", node); ver = node; sub(/^NNT_/, "", ver)
                        printf " %s@%s %s.0\n", node, node, ver; next }
    /^ *global:/ || /^ *local:/ || /^ *\}/ || /^ *\*;/ || /^ *$/ || /^ *#/ { next }
    node != "" { s = $1; sub(/;$/, "", s); printf " %s@%s %s.0\n", s, node, ver }
' "$map" | sort
