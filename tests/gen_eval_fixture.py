#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Generate tests/fixtures/llama_tiny/eval.bin and eval.txt: token data and the loss that
transformers gives the committed tiny GQA Llama (tests/fixtures/llama_tiny/gqa, written by
tests/gen_llama_fixtures.py) on it, for nnt-train --steps 0 (validation only) in
tests/check_train.sh.

Not run by CI (it needs PyTorch + transformers); run once and commit the output. No
downloads; single-threaded, deterministic.

    /tmp/venv-torch/bin/python tests/gen_eval_fixture.py [--dir tests/fixtures/llama_tiny]

eval.bin: NTOK uint16 little-endian ids below the model's vocabulary (seeded: SEED), a
  nanoGPT-format token file.
eval.txt: one line "B T K LOSS": the mean over windows k = 0..K-1 of transformers' mean
  cross-entropy of the window of B*T+1 tokens at k*B*T (inputs: its first B*T as B rows of
  T, targets: the same moved by one), as nnt-train validates.
"""
import argparse
import os

import numpy as np
import torch
import transformers

SEED, NTOK, B, T, K = 20261126, 2000, 2, 16, 5


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--dir", default=os.path.join(os.path.dirname(__file__), "fixtures",
                                                 "llama_tiny"))
    a = p.parse_args()
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    model = transformers.AutoModelForCausalLM.from_pretrained(os.path.join(a.dir, "gqa"),
                                                              dtype=torch.float32)
    model.eval()
    vocab = model.config.vocab_size
    ids = np.random.default_rng(SEED).integers(0, vocab, size=NTOK).astype("<u2")
    ids.tofile(os.path.join(a.dir, "eval.bin"))
    losses = []
    with torch.no_grad():
        for k in range(K):
            w = torch.tensor(ids[k * B * T:k * B * T + B * T + 1].astype(np.int64))
            logits = model(w[:-1].view(B, T)).logits
            losses.append(torch.nn.functional.cross_entropy(
                logits.reshape(-1, vocab).double(), w[1:].reshape(-1)).item())
    loss = sum(losses) / K
    with open(os.path.join(a.dir, "eval.txt"), "w") as f:
        f.write("%d %d %d %.9f\n" % (B, T, K, loss))
    print("eval.bin: %d tokens below %d; loss of %d windows of %d x %d: %.9f (%s)"
          % (NTOK, vocab, K, B, T, loss, " ".join("%.6f" % x for x in losses)))


if __name__ == "__main__":
    main()
