#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Generate tests/fixtures/llama_tiny/generate.safetensors: what transformers generates with
the committed tiny Llama models (NAME/config.json + NAME/model.safetensors, written by
tests/gen_llama_fixtures.py), for tests/test_model_generate.c.

Not run by CI (it needs PyTorch + transformers); run once and commit the output. No
downloads; single-threaded, deterministic algorithms.

    /tmp/venv-torch/bin/python tests/gen_llama_generate.py [--dir tests/fixtures/llama_tiny]

Per model NAME (gqa, mqa, qwen3), int32 tensors:
  NAME.prompt    (NPROMPT) random prompt ids (seeded: PROMPT_SEED)
  NAME.greedy    (NGEN) model.generate(do_sample=False, max_new_tokens=NGEN): greedy decoding
                 of the whole sequence (NPROMPT + NGEN <= max_position_embeddings 64; HF's
                 generate never slides a window, so the reference stays within it)
  NAME.slide     (NGEN) greedy decoding where each token sees only the last WINDOW tokens
                 of the sequence, at positions 0..WINDOW-1 (what nnt_model_generate does
                 when the sequence is longer than its max_seq = WINDOW): a loop of forwards
                 on the window, argmax of the last position's logits
  NAME.greedy_long (NGEN_LONG) the same as greedy, NGEN_LONG new tokens (the key/value cache
                 test of tests/test_model_generate.c: >= 32 tokens)
and float32:
  NAME.greedy_long_margin (NGEN_LONG) its margins, as below
  NAME.greedy_margin, NAME.slide_margin  (NGEN) largest minus second largest logit at each
                 step: how far each argmax is from a tie (printed, and read by the test to
                 say how robust the token equality is)
"""
import argparse
import os

import torch
from safetensors.torch import load_file, save_file
from transformers import AutoConfig, AutoModelForCausalLM

NAMES = ("gqa", "mqa", "qwen3")
NPROMPT, NGEN, WINDOW = 5, 20, 8
NGEN_LONG = 48
# Seeds of the prompts, picked from 0..59 by hand: varied tokens (random weights make mqa
# repeat one token for most prompts), a sliding run that differs from the whole-sequence
# one, every margin (below) >= 0.003 with logits of about 1.3: far from a tie in fp32.
PROMPT_SEED = {"gqa": 1, "mqa": 8, "qwen3": 5}


def load(directory, name):
    cfg = AutoConfig.from_pretrained(os.path.join(directory, name))
    cfg._attn_implementation = "eager"
    model = AutoModelForCausalLM.from_config(cfg).float().eval()
    state = load_file(os.path.join(directory, name, "model.safetensors"))
    missing, unexpected = model.load_state_dict(state, strict=False)
    assert not unexpected and set(missing) <= {"lm_head.weight"}, (missing, unexpected)
    if cfg.tie_word_embeddings:
        model.tie_weights()
        assert model.lm_head.weight is model.model.embed_tokens.weight
    return cfg, model


def margin(scores):
    top = torch.topk(scores, 2).values
    return (top[0] - top[1]).item()


def hf_greedy(model, prompt, ngen=NGEN):
    # an explicit mask: without one generate masks the prompt's ids equal to pad_token_id
    out = model.generate(prompt.unsqueeze(0), attention_mask=torch.ones(1, NPROMPT,
                                                                        dtype=torch.long),
                         do_sample=False, max_new_tokens=ngen,
                         min_new_tokens=ngen, output_scores=True, return_dict_in_generate=True,
                         pad_token_id=0, eos_token_id=None)
    tokens = out.sequences[0, NPROMPT:]
    margins = [margin(s[0]) for s in out.scores]
    return tokens, margins


def slide_greedy(model, prompt, window):
    seq, margins = prompt.tolist(), []
    for _ in range(NGEN):
        ids = torch.tensor([seq[-window:]])
        logits = model(input_ids=ids).logits[0, -1]
        margins.append(margin(logits))
        seq.append(int(torch.argmax(logits)))
    return torch.tensor(seq[NPROMPT:]), margins


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dir", default=os.path.join(os.path.dirname(__file__), "fixtures",
                                                  "llama_tiny"))
    args = ap.parse_args()
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    out = {}
    for name in NAMES:
        cfg, model = load(args.dir, name)
        assert NPROMPT + NGEN_LONG <= cfg.max_position_embeddings
        g = torch.Generator().manual_seed(PROMPT_SEED[name])
        prompt = torch.randint(0, cfg.vocab_size, (NPROMPT,), generator=g)
        with torch.no_grad():
            greedy, gm = hf_greedy(model, prompt)
            slide, sm = slide_greedy(model, prompt, WINDOW)
            long, lm = hf_greedy(model, prompt, NGEN_LONG)
            # the loop agrees with generate while the window holds the whole sequence
            whole, _ = slide_greedy(model, prompt, NPROMPT + NGEN)
        assert torch.equal(whole, greedy), (whole, greedy)
        out[f"{name}.prompt"] = prompt.to(torch.int32)
        out[f"{name}.greedy"] = greedy.to(torch.int32).contiguous()
        out[f"{name}.slide"] = slide.to(torch.int32)
        out[f"{name}.greedy_margin"] = torch.tensor(gm, dtype=torch.float32)
        out[f"{name}.slide_margin"] = torch.tensor(sm, dtype=torch.float32)
        assert torch.equal(long[:NGEN], greedy), (long, greedy)
        out[f"{name}.greedy_long"] = long.to(torch.int32).contiguous()
        out[f"{name}.greedy_long_margin"] = torch.tensor(lm, dtype=torch.float32)
        print(f"{name}: prompt {prompt.tolist()}\n  greedy {greedy.tolist()} min margin "
              f"{min(gm):.3g}\n  slide {WINDOW} {slide.tolist()} min margin {min(sm):.3g}\n"
              f"  greedy {NGEN_LONG} {long.tolist()} min margin {min(lm):.3g}")
    save_file(out, os.path.join(args.dir, "generate.safetensors"))


if __name__ == "__main__":
    main()
