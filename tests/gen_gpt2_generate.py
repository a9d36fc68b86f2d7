#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Greedy GPT-2 generation reference past 32 new tokens (not run by CI).

A random GPT2LMHeadModel (V 97, n_positions 64, C 32, 2 layers, 4 heads; seed 8) saved as a
Hugging Face directory tests/fixtures/gpt2_gen/ (config.json, model.safetensors), and the
greedy continuation of a fixed 6-token prompt by transformers' generate (use_cache, 40 new
tokens, no eos/pad/bos) in greedy.txt: the prompt ids on the first line, the 40 new ids on
the second. Random weights give near-flat logits, so the weight matrices are scaled by 2.5: then
every greedy step's top-2 logit margin is > 1e-3 (checked, printed: 0.055), so that float
rounding differences cannot flip a token. tests/check_generate.sh compares nnt-generate
(with and without the key/value cache) against greedy.txt.

    /tmp/venv-torch/bin/python tests/gen_gpt2_generate.py [--out DIR]
"""
import argparse
import os

import torch
from transformers import GPT2Config, GPT2LMHeadModel

PROMPT = [5, 17, 42, 3, 88, 61]
NGEN = 40


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "fixtures",
                                                  "gpt2_gen"))
    args = ap.parse_args()
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    torch.manual_seed(8)
    cfg = GPT2Config(vocab_size=97, n_positions=64, n_embd=32, n_layer=2, n_head=4,
                     resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0, bos_token_id=None,
                     eos_token_id=None, pad_token_id=None)
    model = GPT2LMHeadModel(cfg).eval()
    with torch.no_grad():
        for name, p in model.named_parameters():
            if p.dim() == 2:          # sharper logits: larger margins between greedy choices
                p.mul_(2.5)
    prompt = torch.tensor([PROMPT])
    with torch.no_grad():
        out = model.generate(prompt, attention_mask=torch.ones_like(prompt), do_sample=False,
                             max_new_tokens=NGEN, min_new_tokens=NGEN, use_cache=True,
                             output_scores=True, return_dict_in_generate=True,
                             pad_token_id=0, eos_token_id=None)
        seq = out.sequences[0]
        scores = torch.stack(out.scores, 1)[0]
        full = model(input_ids=seq[None, :-1], use_cache=False).logits[0, len(PROMPT) - 1:]
    new = seq[len(PROMPT):]
    assert torch.equal(full.argmax(-1), new), "the cache-free forward disagrees"
    top2 = scores.topk(2, -1).values
    margin = float((top2[:, 0] - top2[:, 1]).min())
    assert margin > 1e-3, f"a greedy step is too close to a tie: {margin}"
    os.makedirs(args.out, exist_ok=True)
    model.save_pretrained(args.out, safe_serialization=True)
    with open(os.path.join(args.out, "greedy.txt"), "w") as f:
        f.write(" ".join(map(str, PROMPT)) + "\n" + " ".join(map(str, new.tolist())) + "\n")
    print(f"greedy {new.tolist()}\nsmallest top-2 margin {margin:.4g}")


if __name__ == "__main__":
    main()
