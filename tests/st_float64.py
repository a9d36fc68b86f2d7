#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Print the float64 tensors KEY ... of a safetensors FILE, a line each ("%.9f" values,
space-separated), read from the file's header offsets (no package needed): the check
scripts' PyTorch references (tests/check_dpo.sh, check_reward.sh, check_classify.sh).

    python3 tests/st_float64.py FILE KEY ...
"""
import json
import struct
import sys


def main():
    path, keys = sys.argv[1], sys.argv[2:]
    with open(path, "rb") as fh:
        n = struct.unpack("<Q", fh.read(8))[0]
        head = json.loads(fh.read(n))
        data = fh.read()
    for key in keys:
        a, b = head[key]["data_offsets"]
        print(" ".join("%.9f" % v for v in struct.unpack("<%dd" % ((b - a) // 8), data[a:b])))


if __name__ == "__main__":
    main()
