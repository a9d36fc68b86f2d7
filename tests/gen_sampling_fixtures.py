#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Generate tests/fixtures/llama_tiny/sampling.safetensors: what transformers' logits
processors make of fixed logits (repetition_penalty and no_repeat_ngram_size; temperature,
top_k, top_p, min_p, typical_p, epsilon_cutoff and eta_cutoff), and its greedy generation
with a repetition penalty or n-gram bans on the committed tiny Llama models, for
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
  proc.ngram_seq (L) int32 a sequence of a few distinct ids (n-grams repeat)
  proc.ngram_len (P) int32 lengths of its prefixes
  proc.ngram<N> (P, V) int8 1 where NoRepeatNGramLogitsProcessor(N) bans a token after the
                prefix of each length, N in NGRAMS
  warp.params   (C, 7) float64 per case: temperature, top_k, top_p, min_p, typical_p,
                epsilon_cutoff, eta_cutoff
  warp.kept     (C, V) int32 1 where transformers' warpers (TemperatureLogitsWarper, TopK,
                TopP, MinP, Typical, Epsilon, Eta, in generate's order) leave the score finite
                (each case's set the same from float64 logits: no cut within rounding)
  NAME.rep_prompt (NPROMPT) int32, NAME.rep_greedy (NGEN) int32, NAME.rep_margin (NGEN)
                float32: model.generate(do_sample=False, repetition_penalty=REP[NAME]) from
                the prompt of tests/gen_llama_generate.py, and the margins of each step's
                processed scores (largest minus second largest)
  NAME.ngram_greedy (NGEN) int32, NAME.ngram_margin (NGEN) float32: the same with
                no_repeat_ngram_size NGRAM[NAME] (and repetition_penalty REP[NAME] on qwen3)
"""
import argparse
import os
import sys

import torch
from safetensors.torch import save_file
from transformers.generation.logits_process import (EpsilonLogitsWarper, EtaLogitsWarper,
                                                    MinPLogitsWarper,
                                                    NoRepeatNGramLogitsProcessor,
                                                    RepetitionPenaltyLogitsProcessor,
                                                    TemperatureLogitsWarper, TopKLogitsWarper,
                                                    TopPLogitsWarper, TypicalLogitsWarper)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gen_llama_generate import NPROMPT, NGEN, PROMPT_SEED, load  # noqa: E402

V = 300
PENALTIES = (130, 80)   # 1.3 and 0.8
# temperature, top_k, top_p, min_p, typical_p, epsilon_cutoff, eta_cutoff: min_p alone, after
# top_k, after top_p, with both, at temperatures that move the cut; then typical_p alone (a
# small mass drops the most likely tokens), after the others and at other temperatures;
# epsilon and eta alone, after top_p and typical_p, and everything at once; an epsilon above
# every probability (the most likely token kept alone), an eta below sqrt(eta) exp(-H)
CASES = [(1.0, 0, 1.0, 0.05, 1.0, 0.0, 0.0), (0.7, 0, 1.0, 0.2, 1.0, 0.0, 0.0),
         (1.5, 0, 1.0, 0.01, 1.0, 0.0, 0.0), (1.0, 40, 1.0, 0.1, 1.0, 0.0, 0.0),
         (0.8, 0, 0.9, 0.05, 1.0, 0.0, 0.0), (1.2, 60, 0.95, 0.02, 1.0, 0.0, 0.0),
         (1.0, 0, 1.0, 1.0, 1.0, 0.0, 0.0), (1.0, 0, 0.8, 0.0, 1.0, 0.0, 0.0),
         (1.0, 0, 1.0, 0.0, 0.5, 0.0, 0.0), (1.0, 0, 1.0, 0.0, 0.05, 0.0, 0.0),
         (0.7, 0, 1.0, 0.0, 0.9, 0.0, 0.0), (1.3, 50, 0.95, 0.01, 0.3, 0.0, 0.0),
         (1.0, 0, 1.0, 0.0, 1.0, 0.004, 0.0), (0.9, 0, 0.9, 0.0, 1.0, 0.02, 0.0),
         (1.0, 0, 1.0, 0.0, 1.0, 0.0, 0.05), (1.4, 0, 1.0, 0.0, 1.0, 0.0, 0.2),
         (1.0, 0, 1.0, 0.0, 0.6, 0.0, 0.01), (1.1, 80, 0.97, 0.005, 0.8, 0.003, 0.02),
         (1.5, 0, 1.0, 0.0, 1.0, 0.3, 0.0), (0.6, 20, 1.0, 0.0, 1.0, 0.0, 0.01)]
REP = {"gqa": 1.3, "qwen3": 0.8}
NGRAM = {"gqa": 2, "qwen3": 3}   # (qwen3 with its repetition penalty: both processors)
NGRAMS = (1, 2, 3, 4)


def warp(logits, t, k, p, m, typ, eps, eta):
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
    if typ < 1.0:
        s = TypicalLogitsWarper(mass=typ)(ids, s)
    if 0 < eps < 1:
        s = EpsilonLogitsWarper(epsilon=eps)(ids, s)
    if 0 < eta < 1:
        s = EtaLogitsWarper(epsilon=eta)(ids, s)
    return torch.isfinite(s[0])


def ngram_cases(g):
    """a sequence over 5 ids (n-grams repeat), and NoRepeatNGramLogitsProcessor's bans after
    prefixes of several lengths"""
    alphabet = torch.tensor([3, 77, 150, 151, 299])
    seq = alphabet[torch.randint(0, 5, (48,), generator=g)]
    lens = [1, 2, 3, 4, 5, 8, 13, 20, 27, 34, 41, 48]
    out = {"proc.ngram_seq": seq.to(torch.int32), "proc.ngram_len": torch.tensor(lens, dtype=torch.int32)}
    for n in NGRAMS:
        masks = []
        for L in lens:
            s = NoRepeatNGramLogitsProcessor(n)(seq[None, :L], torch.zeros(1, V))
            masks.append(torch.isinf(s[0]).to(torch.int8))
        out[f"proc.ngram{n}"] = torch.stack(masks)
        print(f"no_repeat_ngram_size {n}: bans after each prefix "
              f"{[int(m.sum()) for m in masks]}")
    return out


def greedy(model, prompt, **kw):
    with torch.no_grad():
        res = model.generate(prompt.unsqueeze(0),
                             attention_mask=torch.ones(1, NPROMPT, dtype=torch.long),
                             do_sample=False, max_new_tokens=NGEN, min_new_tokens=NGEN,
                             output_scores=True, return_dict_in_generate=True, pad_token_id=0,
                             eos_token_id=None, **kw)
    tokens = res.sequences[0, NPROMPT:]
    margins = [(lambda v: (v[0] - v[1]).item())(torch.topk(s[0], 2).values) for s in res.scores]
    return tokens.to(torch.int32).contiguous(), torch.tensor(margins, dtype=torch.float32)


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
    for case in CASES:
        (t, k, p, m, typ, eps, eta) = case
        mask = warp(wl, *case)
        if 0 < m < 1:
            assert cut_margin(wl, t, m) > 1e-4, (t, m)
        assert torch.equal(mask, warp(wl.double(), *case)), case   # no cut within rounding
        kept.append(mask.to(torch.int32))
        print(f"warp {case}: {int(mask.sum())} kept")
    out["warp.logits"] = wl
    out["warp.params"] = torch.tensor(CASES, dtype=torch.float64)
    out["warp.kept"] = torch.stack(kept)
    out.update(ngram_cases(g))
    for name, pen in REP.items():
        cfg, model = load(args.dir, name)
        gp = torch.Generator().manual_seed(PROMPT_SEED[name])
        prompt = torch.randint(0, cfg.vocab_size, (NPROMPT,), generator=gp)
        tokens, margins = greedy(model, prompt, repetition_penalty=pen)
        out[f"{name}.rep_prompt"] = prompt.to(torch.int32)
        out[f"{name}.rep_greedy"] = tokens
        out[f"{name}.rep_margin"] = margins
        print(f"{name}: repetition_penalty {pen}: {tokens.tolist()} min margin "
              f"{margins.min().item():.3g}")
        kw = {"no_repeat_ngram_size": NGRAM[name]}
        if name == "qwen3":
            kw["repetition_penalty"] = pen
        tokens, margins = greedy(model, prompt, **kw)
        out[f"{name}.ngram_greedy"] = tokens
        out[f"{name}.ngram_margin"] = margins
        print(f"{name}: {kw}: {tokens.tolist()} min margin {margins.min().item():.3g}")
    save_file(out, os.path.join(args.dir, "sampling.safetensors"))


if __name__ == "__main__":
    main()
