#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Generate tests/fixtures/smoothing/: label-smoothed cross-entropy as transformers computes
it (transformers.trainer_pt_utils.LabelSmoother, the Trainer's label_smoothing_factor), for
tests/test_layer_llama.c (a model's loss layer with nnt_layer_set_label_smoothing, through
nnt_tensor_cross_entropy_smoothed and its backward).

Not run by CI (it needs PyTorch + transformers); run once and commit the output:

    /tmp/venv-torch/bin/python tests/gen_smoothing_fixtures.py [--out tests/fixtures/smoothing]

Files:
  NAME.safetensors   for NAME gqa and mqa of tests/fixtures/llama_tiny (the model
                     directories there, loaded with from_pretrained, float32, eager):
                     tokens (2, 8) int32 (that fixture's reference tokens), targets (2, 8)
                     int32 (its reference targets with -100 at 3 positions), eps (1),
                     loss (1) (LabelSmoother(eps) on the logits, no shift: the targets are
                     the next tokens already), grad.<HF name> of every parameter
  SHA256SUMS
"""
import argparse
import hashlib
import os

import torch
from safetensors.torch import load_file, save_file
from transformers import AutoModelForCausalLM
from transformers.trainer_pt_utils import LabelSmoother

MODEL_EPS = {"gqa": 0.1, "mqa": 0.25}


def smoothed_mean(logits, targets, eps):
    """transformers' LabelSmoother on logits (..., V) and labels (...), no shift."""
    return LabelSmoother(epsilon=eps)({"logits": logits}, targets.long())


def model_fixture(llama_dir, name):
    model = AutoModelForCausalLM.from_pretrained(os.path.join(llama_dir, name),
                                                 dtype=torch.float32,
                                                 attn_implementation="eager")
    ref = load_file(os.path.join(llama_dir, name + ".reference.safetensors"))
    tokens = ref["tokens"].long()
    targets = ref["targets"].long().clone()
    targets[0, 0], targets[0, 5], targets[1, 7] = -100, -100, -100
    eps = MODEL_EPS[name]
    model.zero_grad()
    logits = model(input_ids=tokens).logits
    loss = smoothed_mean(logits, targets, eps)
    loss.backward()
    out = {"tokens": tokens.to(torch.int32), "targets": targets.to(torch.int32),
           "eps": torch.tensor([eps], dtype=torch.float32), "loss": loss.detach().reshape(1)}
    for k, p in model.named_parameters():
        out["grad." + k] = p.grad.detach().clone().contiguous()
    return out


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.path.join(here, "fixtures", "smoothing"))
    ap.add_argument("--llama", default=os.path.join(here, "fixtures", "llama_tiny"))
    args = ap.parse_args()
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    os.makedirs(args.out, exist_ok=True)
    files = {}
    for name in MODEL_EPS:
        files[name + ".safetensors"] = model_fixture(args.llama, name)
    for fname, tensors in files.items():
        save_file(tensors, os.path.join(args.out, fname))
    with open(os.path.join(args.out, "SHA256SUMS"), "w", newline="\n") as f:
        for fname in sorted(files):
            with open(os.path.join(args.out, fname), "rb") as fh:
                f.write(f"{hashlib.sha256(fh.read()).hexdigest()}  {fname}\n")
    for name in MODEL_EPS:
        print(f"{name} eps {MODEL_EPS[name]}: loss {float(files[name + '.safetensors']['loss']):.6f}")


if __name__ == "__main__":
    main()
