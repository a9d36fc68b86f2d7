#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Generate tests/fixtures/llama_tiny/sampling.safetensors: what transformers' logits
processors make of fixed logits (repetition_penalty; temperature, top_k, top_p and min_p),
and its greedy generation with a repetition penalty on the committed tiny Llama models, for
tests/test_model_generate.c (test_sampler_hf, test_repetition_penalty_hf).

Not run by CI (it needs PyTorch + transformers); run once and commit the output. No
downloads; single-threaded.

    /tmp/venv-torch/bin/python tests/gen_sampling_fixtures.py [--dir tests/fixtures/llama_tiny]

Tensors:
  proc.logits   (V) float32 logits, V = 300, from a grid of 1/8 (ties; negative and positive)
  proc.ids      (N) int32 a sequence with repeats (ids with negative, zero and positive logits)
  proc.rep<P>   (V) float32 RepetitionPenaltyLogitsProcessor(P / 100)(ids, logits), P in
                PENALTIES (above 1 and below 1)
  warp.logits   (V) float32 distinct logits (no ties: top_k keeps exactly k in both)
  warp.params   (C, 4) float64 per case: temperature, top_k, top_p, min_p
  warp.kept     (C, V) int32 1 where transformers' warpers (TemperatureLogitsWarper, TopK,
                TopP, MinP, in generate's order) leave the score finite
  NAME.rep_prompt (NPROMPT) int32, NAME.rep_greedy (NGEN) int32, NAME.rep_margin (NGEN)
                float32: model.generate(do_sample=False, repetition_penalty=REP[NAME]) from
                the prompt of tests/gen_llama_generate.py, and the margins of each step's
                processed scores (largest minus second largest)
"""
import argparse
import os
import sys

import torch
from safetensors.torch import save_file
from transformers.generation.logits_process import (MinPLogitsWarper,
                                                    RepetitionPenaltyLogitsProcessor,
                                                    TemperatureLogitsWarper, TopKLogitsWarper,
                                                    TopPLogitsWarper)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gen_llama_generate import NPROMPT, NGEN, PROMPT_SEED, load  # noqa: E402

V = 300
PENALTIES = (130, 80)   # 1.3 and 0.8
# temperature, top_k, top_p, min_p: min_p alone, after top_k, after top_p, with both, at
# temperatures that move the cut
CASES = [(1.0, 0, 1.0, 0.05), (0.7, 0, 1.0, 0.2), (1.5, 0, 1.0, 0.01), (1.0, 40, 1.0, 0.1),
         (0.8, 0, 0.9, 0.05), (1.2, 60, 0.95, 0.02), (1.0, 0, 1.0, 1.0), (1.0, 0, 0.8, 0.0)]
REP = {"gqa": 1.3, "qwen3": 0.8}


def warp(logits, t, k, p, m):
    s = logits.clone()[None]
    ids = torch.zeros(1, 1, dtype=torch.long)
    if t != 1.0:
        s = TemperatureLogitsWarper(t)(ids, s)
    if k:
        s = TopKLogitsWarper(top_k=k)(ids, s)
    if p < 1.0:
        s = TopPLogitsWarper(top_p=p)(ids, s)
    if m:
        s = MinPLogitsWarper(min_p=m)(ids, s)
    return torch.isfinite(s[0])


def cut_margin(logits, t, m):
    """how far the min_p threshold is from the nearest kept or dropped token (log scale)"""
    r = (logits.double() - logits.double().max()) / t
    return (r - torch.log(torch.tensor(m, dtype=torch.float64))).abs().min().item()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dir", default=os.path.join(os.path.dirname(__file__), "fixtures",
                                                  "llama_tiny"))
    args = ap.parse_args()
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    out = {}
    g = torch.Generator().manual_seed(11)
    grid = (torch.randint(-40, 41, (V,), generator=g).float() / 8.0)
    ids = torch.randint(0, V, (60,), generator=g)
    ids[10:20] = ids[0:10]   # repeats
    ids[25] = int(torch.nonzero(grid == 0)[0]) if (grid == 0).any() else ids[25]
    out["proc.logits"] = grid
    out["proc.ids"] = ids.to(torch.int32)
    assert (grid[ids] < 0).any() and (grid[ids] > 0).any()
    for p in PENALTIES:
        out[f"proc.rep{p}"] = RepetitionPenaltyLogitsProcessor(p / 100.0)(
            ids[None], grid.clone()[None])[0].contiguous()
    wl = torch.randn(V, generator=g) * 2.0
    assert wl.unique().numel() == V
    kept = []
    for (t, k, p, m) in CASES:
        mask = warp(wl, t, k, p, m)
        if 0 < m < 1:
            assert cut_margin(wl, t, m) > 1e-4, (t, m)
        kept.append(mask.to(torch.int32))
        print(f"warp t {t} top_k {k} top_p {p} min_p {m}: {int(mask.sum())} kept")
    out["warp.logits"] = wl
    out["warp.params"] = torch.tensor(CASES, dtype=torch.float64)
    out["warp.kept"] = torch.stack(kept)
    for name, pen in REP.items():
        cfg, model = load(args.dir, name)
        gp = torch.Generator().manual_seed(PROMPT_SEED[name])
        prompt = torch.randint(0, cfg.vocab_size, (NPROMPT,), generator=gp)
        with torch.no_grad():
            res = model.generate(prompt.unsqueeze(0),
                                 attention_mask=torch.ones(1, NPROMPT, dtype=torch.long),
                                 do_sample=False, max_new_tokens=NGEN, min_new_tokens=NGEN,
                                 repetition_penalty=pen, output_scores=True,
                                 return_dict_in_generate=True, pad_token_id=0,
                                 eos_token_id=None)
        tokens = res.sequences[0, NPROMPT:]
        margins = [(lambda v: (v[0] - v[1]).item())(torch.topk(s[0], 2).values)
                   for s in res.scores]
        out[f"{name}.rep_prompt"] = prompt.to(torch.int32)
        out[f"{name}.rep_greedy"] = tokens.to(torch.int32).contiguous()
        out[f"{name}.rep_margin"] = torch.tensor(margins, dtype=torch.float32)
        print(f"{name}: repetition_penalty {pen}: {tokens.tolist()} min margin "
              f"{min(margins):.3g}")
    save_file(out, os.path.join(args.dir, "sampling.safetensors"))


if __name__ == "__main__":
    main()
