#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Rough training-step comparison of an OLMoE-shaped model: transformers' OlmoeForCausalLM
(eager attention, eager experts: its loop over the experts that got tokens, fp32, AdamW)
against nnt-train --load-hf on the directory transformers saved (same shapes and weights).

    /tmp/venv-torch/bin/python bench/compare_moe.py NNT_TRAIN [L C E I K T] [--threads 2]

Defaults: L 4, C 512, 32 experts of 256, top 4, B 4, T 128, V 4096, heads of 64. Prints the
ms per step of both (transformers: the median of steps 3..8, its first steps being
slow; nnt-train: the mean of steps 2..8) and their ratio. Not run by make check."""
import argparse
import os
import re
import subprocess
import tempfile
import time

import torch
from transformers import OlmoeConfig, OlmoeForCausalLM


def main():
    p = argparse.ArgumentParser()
    p.add_argument("nnt_train")
    p.add_argument("shape", nargs="*", type=int, default=[4, 512, 32, 256, 4, 128])
    p.add_argument("--threads", type=int, default=2)
    a = p.parse_args()
    L, C, E, I, K, T = a.shape
    B, V, STEPS = 4, 4096, 8
    torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    cfg = OlmoeConfig(vocab_size=V, hidden_size=C, intermediate_size=I, num_hidden_layers=L,
                      num_attention_heads=C // 64, num_key_value_heads=C // 64, num_experts=E,
                      num_experts_per_tok=K, max_position_embeddings=T,
                      attn_implementation="eager", experts_implementation="eager",
                      tie_word_embeddings=False)
    model = OlmoeForCausalLM(cfg)
    tmp = tempfile.mkdtemp(prefix="nnt-moe-bench-")
    model.save_pretrained(os.path.join(tmp, "hf"))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    seq = torch.randint(0, V, (B, T + 1))
    ms = []
    for _ in range(STEPS):
        t0 = time.time()
        opt.zero_grad()
        logits = model(input_ids=seq[:, :-1]).logits
        loss = torch.nn.functional.cross_entropy(logits.reshape(-1, V), seq[:, 1:].reshape(-1))
        loss.backward()
        opt.step()
        ms.append(1e3 * (time.time() - t0))
    torch_ms = sorted(ms[2:])[(STEPS - 2) // 2]   # median of steps 3 ..
    with open(os.path.join(tmp, "data.txt"), "w") as f:
        f.write("the quick brown fox jumps over the lazy dog. " * 2000)
    out = subprocess.run([a.nnt_train, "--load-hf", os.path.join(tmp, "hf"), "--data",
                          os.path.join(tmp, "data.txt"), "--batch", str(B), "--seq", str(T),
                          "--steps", str(STEPS), "--cpus", str(a.threads), "--sample", "0",
                          "--no-save", "--out", os.path.join(tmp, "out")],
                         capture_output=True, text=True, check=True)
    nnt_ms = float(re.search(r"in [0-9.]+ s: ([0-9.]+) ms/step", out.stdout + out.stderr)[1])
    model_line = re.search(r"model: .*", out.stdout + out.stderr)[0]
    print(model_line)
    print(f"transformers eager: {torch_ms:.0f} ms/step (median of steps 3..{STEPS}: "
          f"{[round(x) for x in ms]}); nnt-train: {nnt_ms:.0f} ms/step (mean of 2..); "
          f"ratio {torch_ms / nnt_ms:.1f}x; load average {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
