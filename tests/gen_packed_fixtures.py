#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Generate tests/fixtures/packed_tiny/: tiny Hugging Face models trained on packed rows the
way TRL's SFTTrainer does it with packing=True (padding-free packing): several prompt/answer
examples share a row, each example's position ids restart at 0, and transformers builds the
block-diagonal causal mask from those position ids (masking_utils.find_packed_sequence_indices,
no attention_mask, no cache), so an example attends to itself only. For tests/test_packed.c.

Not run by CI (it needs PyTorch + transformers); run once and commit the output. No
downloads: random models (fixed seeds), single-threaded, deterministic algorithms, eager
attention.

    /tmp/venv-torch/bin/python tests/gen_packed_fixtures.py [--out tests/fixtures/packed_tiny]

Models (V 64, C 32, L 2, NH 4, T 16):
  llama     LlamaForCausalLM, NKV 2 (grouped-query), rope_theta 10000
  gpt2      GPT2LMHeadModel, n_positions 16 (learned positions)
  mistral   MistralForCausalLM, NKV 2, sliding_window 4 (the window applies inside an example)
Examples: prompt/answer token lists; the prompt's tokens and every example's first token are
no targets. They are packed into rows of T as nnt_token_writer_write_example packs them
(pack 1, pad id 0): an example starts a new row unless it fits in the rest of the current
one; the rest of a row is pad (no target).
  examples.safetensors   ex_tokens (N) int32, ex_counts (N) int32 (1: a target), ex_lens (E)
                         int32 (the examples' lengths, in order); rows (R, T) int32 the packed
                         rows; positions (R, T) int32 (0 at each example's start, then 1, 2,
                         ..; the pad after an example continues its count); targets (R, T)
                         int32: the next token of the row where it counts, else -1 (labels
                         -100 in transformers)
  The first 2 rows hold 3 and 2 examples of uneven lengths (the reference batch); rows 2
  .. 7 are four more batches of 2 rows for training.
  examples.bin           the same rows as nnt-tokenize --pack writes them (nnt-tokenize(1),
                         TOKEN FILES), encoded here independently: header magic 20240520,
                         version 2, N, flags 3 (loss mask, example starts), block T; N uint16
                         ids; the mask bits (the tokens with a target); the start bits
Per model NAME:
  NAME/config.json, NAME/model.safetensors   save_pretrained
  NAME.reference.safetensors   logits (2, T, V) and loss (1) of rows 0, 1 (position_ids =
                               positions, mean cross-entropy over the counted targets);
                               grad.<HF name> of every parameter
  NAME.train.safetensors       losses (4): torch.optim.AdamW lr 1e-3, betas (0.9, 0.999),
                               eps 1e-8, weight decay 0, one batch of 2 rows a step (rows 0-1,
                               2-3, 4-5, 6-7), the loss before each update
  NAME.ref                     the same as text, "step loss" a line (tests/check_packed.sh)
The generator checks that the mask is the per-example one: each example run alone (positions
from 0, no packing) gives the same logits as in its packed row, and the packed logits without
position_ids (one causal sequence a row) differ.
"""
import argparse
import hashlib
import json
import os
import struct

import torch
import torch.nn.functional as F
from safetensors.torch import save_file
from transformers import (GPT2Config, GPT2LMHeadModel, LlamaConfig, LlamaForCausalLM,
                          MistralConfig, MistralForCausalLM)

T, V, STEPS = 16, 64, 4

LLAMA = dict(vocab_size=V, hidden_size=32, intermediate_size=48, num_hidden_layers=2,
             num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
             rms_norm_eps=1e-5, tie_word_embeddings=False, attention_bias=False,
             mlp_bias=False, rope_parameters={"rope_type": "default", "rope_theta": 10000.0})
MODELS = {
    "llama": lambda: LlamaConfig(**LLAMA, attn_implementation="eager", bos_token_id=None,
                                 eos_token_id=None, pad_token_id=None),
    "gpt2": lambda: GPT2Config(vocab_size=V, n_positions=T, n_embd=32, n_layer=2, n_head=4,
                               attn_implementation="eager", bos_token_id=None,
                               eos_token_id=None, resid_pdrop=0.0, embd_pdrop=0.0,
                               attn_pdrop=0.0),
    "mistral": lambda: MistralConfig(**{k: v for k, v in LLAMA.items() if k not in
                                        ("attention_bias", "mlp_bias")},
                                     sliding_window=4, attn_implementation="eager",
                                     bos_token_id=None, eos_token_id=None, pad_token_id=None),
}
CLASSES = {"llama": LlamaForCausalLM, "gpt2": GPT2LMHeadModel, "mistral": MistralForCausalLM}

# (prompt length, answer length) of the examples, in order: rows 0 and 1 get 3 and 2
# examples of uneven lengths; the rest fill rows 2 .. 7
EXAMPLES = [(2, 3), (3, 4), (1, 2),          # row 0: 5 + 7 + 3 = 15, 1 pad
            (4, 5), (2, 4),                  # row 1: 9 + 6 = 15, 1 pad
            (3, 10), (1, 2),                 # row 2: 13 + 3
            (5, 6), (2, 2),                  # row 3: 11 + 4, 1 pad
            (2, 6), (3, 3), (1, 1),          # row 4: 8 + 6 + 2
            (6, 9),                          # row 5: 15, 1 pad
            (2, 2), (2, 3), (3, 3),          # row 6: 4 + 5 + 6, 1 pad
            (4, 8), (1, 2)]                  # row 7: 12 + 3, 1 pad


def pack(g):
    """The examples, and the rows nnt_token_writer_write_example lays them in."""
    toks, counts, lens = [], [], []
    rows, pos, cnt = [], [], []
    cur, cpos, ccnt = [], [], []
    for p, a in EXAMPLES:
        n = p + a
        ex = torch.randint(1, V, (n,), generator=g).tolist()
        c = [0] * p + [1] * a
        c[0] = 0                                   # an example's first token never counts
        toks += ex
        counts += c
        lens.append(n)
        if cur and len(cur) + n > T:               # a new row: pad the current one
            while len(cur) < T:
                cur.append(0), cpos.append(cpos[-1] + 1), ccnt.append(0)
            rows.append(cur), pos.append(cpos), cnt.append(ccnt)
            cur, cpos, ccnt = [], [], []
        cur += ex
        cpos += list(range(n))
        ccnt += c
    while len(cur) < T:
        cur.append(0), cpos.append(cpos[-1] + 1), ccnt.append(0)
    rows.append(cur), pos.append(cpos), cnt.append(ccnt)
    rows, pos, cnt = torch.tensor(rows), torch.tensor(pos), torch.tensor(cnt)
    # the target of token t is token t + 1 of the row when it counts (the last token's is the
    # next row's first token, which never counts)
    targets = torch.full_like(rows, -1)
    targets[:, :-1] = torch.where(cnt[:, 1:] == 1, rows[:, 1:], torch.full_like(rows[:, 1:], -1))
    return (torch.tensor(toks), torch.tensor(counts), torch.tensor(lens), rows, pos, targets,
            cnt)


def token_file(rows, pos, cnt):
    """nnt's packed token file (nnt-tokenize --pack) of the rows, written byte by byte."""
    n = rows.numel()
    head = [20240520, 2, n, 3, T] + [0] * 251
    body = struct.pack("<256i", *head) + struct.pack(f"<{n}H", *rows.reshape(-1).tolist())

    def bits(flags):
        out = bytearray((n + 7) // 8)
        for i, f in enumerate(flags):
            if f:
                out[i // 8] |= 1 << (i % 8)
        return bytes(out)
    return body + bits(cnt.reshape(-1).tolist()) + bits((pos.reshape(-1) == 0).tolist())


def build(name, seed):
    cfg = MODELS[name]()
    torch.manual_seed(seed)
    model = CLASSES[name](cfg).float()
    g = torch.Generator().manual_seed(seed + 1)
    with torch.no_grad():
        for pname, p in model.named_parameters():
            if "norm" in pname or ".ln_" in pname or pname.endswith("ln_f.weight"):
                p.copy_((1.0 if pname.endswith("weight") else 0.0) +
                        0.1 * torch.randn(p.shape, generator=g))
            elif pname.endswith(".bias"):
                p.copy_(0.1 * torch.randn(p.shape, generator=g))
            else:
                p.copy_(0.3 * torch.randn(p.shape, generator=g))
    model.config.use_cache = False
    return cfg, model


def loss_of(model, rows, pos, targets):
    logits = model(input_ids=rows, position_ids=pos, use_cache=False).logits
    t = targets.clone()
    t[t < 0] = -100
    return logits, F.cross_entropy(logits.reshape(-1, logits.shape[-1]), t.reshape(-1),
                                   ignore_index=-100)


def check_mask(model, rows, pos):
    """Each example alone gives its packed logits; without position_ids they differ."""
    with torch.no_grad():
        packed = model(input_ids=rows, position_ids=pos, use_cache=False).logits
        worst = 0.0
        for b in range(rows.shape[0]):
            starts = [t for t in range(T) if pos[b, t] == 0] + [T]
            for s, e in zip(starts, starts[1:]):
                alone = model(input_ids=rows[b:b + 1, s:e], use_cache=False).logits[0]
                worst = max(worst, (alone - packed[b, s:e]).abs().max().item())
        causal = model(input_ids=rows, use_cache=False).logits
        d = (causal - packed).abs().max().item()
    assert worst < 1e-5 and d > 1e-2, (worst, d)
    return worst, d


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "fixtures",
                                                  "packed_tiny"))
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    g = torch.Generator().manual_seed(5000)
    toks, counts, lens, rows, pos, targets, cnt = pack(g)
    assert rows.shape[0] == 2 * STEPS
    assert [int((pos[b] == 0).sum()) for b in range(2)] == [3, 2]
    save_file({"ex_tokens": toks.to(torch.int32), "ex_counts": counts.to(torch.int32),
               "ex_lens": lens.to(torch.int32), "rows": rows.to(torch.int32),
               "positions": pos.to(torch.int32), "targets": targets.to(torch.int32)},
              os.path.join(args.out, "examples.safetensors"))
    with open(os.path.join(args.out, "examples.bin"), "wb") as fh:
        fh.write(token_file(rows, pos, cnt))
    for i, name in enumerate(MODELS):
        cfg, model = build(name, 6000 + i)
        path = os.path.join(args.out, name)
        model.save_pretrained(path, safe_serialization=True)
        for f in os.listdir(path):
            if f not in ("config.json", "model.safetensors"):
                os.remove(os.path.join(path, f))
        worst, d = check_mask(model, rows[:2], pos[:2])
        model.zero_grad()
        logits, loss = loss_of(model, rows[:2], pos[:2], targets[:2])
        loss.backward()
        ref = {"logits": logits.detach().contiguous(), "loss": loss.detach().reshape(1)}
        for k, p in model.named_parameters():
            ref["grad." + k] = p.grad.detach().clone().contiguous()
        save_file(ref, os.path.join(args.out, f"{name}.reference.safetensors"))
        _, m = build(name, 6000 + i)
        opt = torch.optim.AdamW(m.parameters(), lr=1e-3, betas=(0.9, 0.999), eps=1e-8,
                                weight_decay=0.0)
        losses = []
        for s in range(STEPS):
            opt.zero_grad()
            r = slice(2 * s, 2 * s + 2)
            _, l = loss_of(m, rows[r], pos[r], targets[r])
            losses.append(l.item())
            l.backward()
            opt.step()
        save_file({"losses": torch.tensor(losses, dtype=torch.float32)},
                  os.path.join(args.out, f"{name}.train.safetensors"))
        with open(os.path.join(args.out, f"{name}.ref"), "w") as fh:
            fh.write("# step loss: AdamW lr 1e-3, betas (0.9, 0.999), eps 1e-8, no decay, "
                     "batches of 2 rows of examples.bin\n")
            fh.writelines(f"{k + 1} {x:.9g}\n" for k, x in enumerate(losses))
        print(f"{name}: loss {loss.item():.6f}; examples alone vs packed {worst:.3g}, "
              f"without position_ids {d:.3g}; AdamW {[round(x, 6) for x in losses]}")
    sums = []
    for root, _, names in sorted(os.walk(args.out)):
        for f in sorted(names):
            rel = os.path.relpath(os.path.join(root, f), args.out)
            if rel == "SHA256SUMS":
                continue
            with open(os.path.join(root, f), "rb") as fh:
                sums.append(f"{hashlib.sha256(fh.read()).hexdigest()}  {rel}\n")
    with open(os.path.join(args.out, "SHA256SUMS"), "w") as fh:
        fh.writelines(sums)
    print(json.dumps({"torch": torch.__version__,
                      "transformers": __import__("transformers").__version__}))


if __name__ == "__main__":
    main()
