#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""nnt-tokenize against the `tokenizers` package's encode_batch on the same threads, in one run.

usage: bench_tokenize.py NNT_TOKENIZE TOKENIZER_JSON CORPUS [THREADS...]

For each thread count: nnt-tokenize --tokenizer-json J --out F --threads N CORPUS (wall time
of the whole program: loading the tokenizer, reading, encoding, writing; and the same minus
the wall time of a run on an empty file, i.e. without loading the tokenizer), then the package
with RAYON_NUM_THREADS=N in a fresh process: Tokenizer.from_file, the corpus cut into the same
chunks as nnt-tokenize's (1 MiB, cut after a newline before a byte that is not white space),
encode_batch(chunks, add_special_tokens=False) (and the same with 4 KiB pieces, which suit the
package better); its encode time and its total time (load +
read + cut + encode) are reported. The ids of both must be equal (checked). Not run by CI.
"""
import os
import struct
import subprocess
import sys
import tempfile
import time

HF = r'''
import sys, time
t0 = time.perf_counter()
from tokenizers import Tokenizer
tok = Tokenizer.from_file(sys.argv[1])
data = open(sys.argv[2], "rb").read()
chunks, start, size = [], 0, int(sys.argv[4])
while start < len(data):
    end = len(data)
    if end - start > size:
        end = start + size
        while end < len(data) and not (data[end - 1] == 10 and data[end] not in b" \t\r\n\v\f"):
            end += 1
    chunks.append(data[start:end].decode("utf-8"))
    start = end
t1 = time.perf_counter()
enc = tok.encode_batch(chunks, add_special_tokens=False)
t2 = time.perf_counter()
with open(sys.argv[3], "w") as f:
    f.write(" ".join(str(i) for e in enc for i in e.ids))
print(t2 - t1, t2 - t0)
'''


# The package is slow on long strings: it gets both nnt-tokenize's 1 MiB chunks and pieces of
# about 4 KiB (cut the same way, so the ids are the same).
HF_CHUNKS = (1 << 20, 4096)


def read_tokens(path):
    with open(path, "rb") as f:
        b = f.read()
    magic, version, n = struct.unpack_from("<3i", b)
    fmt = {20240520: "H", 20240801: "I"}[magic]
    return list(struct.unpack_from("<%d%s" % (n, fmt), b, 1024))


def main():
    prog, tj, corpus = sys.argv[1:4]
    threads = [int(t) for t in sys.argv[4:]] or [1, 2]
    mb = os.path.getsize(corpus) / 1e6
    print("corpus %s: %.2f MB; tokenizer %s" % (corpus, mb, tj))
    with tempfile.TemporaryDirectory() as tmp:
        for n in threads:
            out = os.path.join(tmp, "out.bin")
            t0 = time.perf_counter()
            subprocess.run([prog, "--tokenizer-json", tj, "--out", out, "--threads", str(n),
                            corpus], check=True)
            nnt = time.perf_counter() - t0
            ids = read_tokens(out)
            empty = os.path.join(tmp, "empty.txt")
            open(empty, "w").close()
            t0 = time.perf_counter()
            subprocess.run([prog, "--tokenizer-json", tj, "--out", out, "--threads", str(n),
                            empty], check=True)
            load = time.perf_counter() - t0
            work = nnt - load
            env = dict(os.environ, RAYON_NUM_THREADS=str(n), TOKENIZERS_PARALLELISM="true")
            hf_ids = os.path.join(tmp, "hf.txt")
            print("threads %d: %d tokens; nnt-tokenize %.2f s whole program, %.2f s without "
                  "the load (%.2f MB/s)" % (n, len(ids), nnt, work, mb / work))
            for size in HF_CHUNKS:
                r = subprocess.run([sys.executable, "-c", HF, tj, corpus, hf_ids, str(size)],
                                   env=env, check=True, capture_output=True, text=True)
                enc, total = (float(x) for x in r.stdout.split())
                with open(hf_ids) as f:
                    same = [int(x) for x in f.read().split()] == ids
                print("  tokenizers encode_batch, %d-byte pieces: %.2f s (%.2f MB/s), %.2f s "
                      "with load; ids %s" % (size, enc, mb / enc, total,
                                             "equal" if same else "DIFFER"))


if __name__ == "__main__":
    main()
