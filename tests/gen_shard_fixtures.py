#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Generate tests/fixtures/sharded/: the tiny models of tests/fixtures saved by transformers'
save_pretrained(max_shard_size=...) as sharded checkpoints (model-0000K-of-0000N.safetensors
and model.safetensors.index.json), for nnt_model_load_hf's sharded path
(tests/test_model_shards.c compares them with the single-file originals, bit for bit).

Not run by CI (it needs PyTorch + transformers); run once and commit the output. No
downloads: the models are the committed fixtures.

    /tmp/venv-torch/bin/python tests/gen_shard_fixtures.py [--out tests/fixtures/sharded]
    /tmp/venv-torch/bin/python tests/gen_shard_fixtures.py --check-saved DIR \\
        --reference tests/fixtures/llama_tiny/gqa.reference.safetensors [--shards N]

It writes, from SOURCE (a directory of tests/fixtures):
  gqa/       llama_tiny/gqa      (untied head, no biases)         max_shard_size 20KB
  mqa_bf16/  llama_tiny/mqa_bf16 (tied, biases, bfloat16 tensors)  max_shard_size 8KB
  gpt2/      gpt2_tiny           (GPT2LMHeadModel, tied)           max_shard_size 20KB
each with config.json, the shards and the index only, and checks that from_pretrained
reads each back to the source's parameters exactly.

--check-saved DIR loads a sharded directory that nnt_model_save_hf_ex wrote (it must have an
index and no model.safetensors; --shards N: exactly N shard files) with
AutoModelForCausalLM.from_pretrained (float32, eager attention) and compares its logits on
the reference's tokens with the reference's logits; exits 1 beyond --tol (normwise
relative) or when the directory is not as expected.
"""
import argparse
import glob
import hashlib
import json
import os
import shutil

import torch
from safetensors.torch import load_file
from transformers import AutoModelForCausalLM

HERE = os.path.dirname(os.path.abspath(__file__))
FIXTURES = os.path.join(HERE, "fixtures")

SETS = {
    "gqa": ("llama_tiny/gqa", "20KB"),
    "mqa_bf16": ("llama_tiny/mqa_bf16", "8KB"),
    "gpt2": ("gpt2_tiny", "20KB"),
}


def load(path):
    """A model directory as transformers reads it, in the dtype of its files."""
    return AutoModelForCausalLM.from_pretrained(path, dtype="auto",
                                                attn_implementation="eager")


def state(model):
    return {k: v.detach().clone() for k, v in model.state_dict().items()}


def shard_files(path):
    return sorted(glob.glob(os.path.join(path, "model-*-of-*.safetensors")))


def generate(out):
    os.makedirs(out, exist_ok=True)
    sums = []
    for name, (source, size) in SETS.items():
        path = os.path.join(out, name)
        shutil.rmtree(path, ignore_errors=True)
        model = load(os.path.join(FIXTURES, source))
        model.save_pretrained(path, safe_serialization=True, max_shard_size=size)
        for f in os.listdir(path):   # config.json, the shards and the index only
            if f != "config.json" and not f.startswith("model-") and \
                    f != "model.safetensors.index.json":
                os.remove(os.path.join(path, f))
        shards = shard_files(path)
        assert len(shards) >= 3, (name, shards)
        assert not os.path.exists(os.path.join(path, "model.safetensors"))
        # the shards hold exactly the tensors of the source's model.safetensors, the index
        # maps each to its shard
        src = load_file(os.path.join(FIXTURES, source, "model.safetensors"))
        with open(os.path.join(path, "model.safetensors.index.json")) as fh:
            index = json.load(fh)
        got = {}
        for s in shards:
            for k, v in load_file(s).items():
                assert k not in got
                assert index["weight_map"][k] == os.path.basename(s)
                got[k] = v
        assert sorted(got) == sorted(src) == sorted(index["weight_map"]), name
        assert all(torch.equal(got[k], src[k]) for k in src), name
        back = load(path)
        a, b = state(model), state(back)
        assert sorted(a) == sorted(b) and all(torch.equal(a[k], b[k]) for k in a), name
        print(f"{name}: {len(shards)} shards of at most {size}, {len(got)} tensors, "
              f"total_size {index['metadata']['total_size']}")
    for root, _, names in sorted(os.walk(out)):
        for f in sorted(names):
            rel = os.path.relpath(os.path.join(root, f), out)
            if rel == "SHA256SUMS":
                continue
            with open(os.path.join(root, f), "rb") as fh:
                sums.append(f"{hashlib.sha256(fh.read()).hexdigest()}  {rel}\n")
    with open(os.path.join(out, "SHA256SUMS"), "w") as fh:
        fh.writelines(sums)
    print(json.dumps({"torch": torch.__version__,
                      "transformers": __import__("transformers").__version__}))


def check_saved(path, reference, tol, nshards):
    """A sharded directory nnt saved: its layout, then its logits against the reference's."""
    shards = shard_files(path)
    ok = os.path.exists(os.path.join(path, "model.safetensors.index.json")) and \
        not os.path.exists(os.path.join(path, "model.safetensors")) and len(shards) >= 2
    if nshards:
        ok = ok and len(shards) == nshards
    if not ok:
        print(f"{path}: not a sharded checkpoint as expected ({len(shards)} shards)")
        return 1
    ref = load_file(reference)
    model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32,
                                                 attn_implementation="eager")
    model.eval()
    with torch.no_grad():
        lg = model(input_ids=ref["tokens"].long()).logits
    want = ref["logits"]
    rel = ((lg - want).norm() / want.norm()).item()
    print(f"{path}: {type(model).__name__} from {len(shards)} shards, logits vs {reference}: "
          f"normwise relative {rel:.3g}, max |diff| {(lg - want).abs().max().item():.3g}")
    return 0 if rel <= tol else 1


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.path.join(FIXTURES, "sharded"))
    ap.add_argument("--check-saved", metavar="DIR")
    ap.add_argument("--reference", metavar="FILE")
    ap.add_argument("--shards", type=int, default=0)
    ap.add_argument("--tol", type=float, default=1e-5)
    args = ap.parse_args()
    torch.set_num_threads(1)
    if args.check_saved:
        raise SystemExit(check_saved(args.check_saved, args.reference, args.tol, args.shards))
    generate(args.out)


if __name__ == "__main__":
    main()
