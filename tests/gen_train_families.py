#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Generate tests/fixtures/train_families/: one tiny Hugging Face model of each family with
its options on, a token file, the nnt-train options of each run and the losses, gradient
norms and learning rates of the same training in PyTorch (tests/check_train_families.sh
compares nnt-train's output with them).

Not run by CI (it needs PyTorch + transformers); run once and commit the output. No
downloads: random models (fixed seeds), single thread, deterministic algorithms.

    /tmp/venv-torch/bin/python tests/gen_train_families.py [--out tests/fixtures/train_families]

Writes:
  data.bin            llm.c token file (magic 20240520, version 1, uint16 ids), 400 tokens
  NAME/config.json    the model directory (save_pretrained; lm_head.weight absent when tied)
  NAME/model.safetensors
  NAME.args           nnt-train's options of the run, one line (without --load-hf, --data,
                      --out, which the check adds)
  NAME.ref            "step loss grad_norm lr" per optimizer step, %.9g (PyTorch fp32);
                      grad_norm before clipping, as nnt-train's train.csv
for NAME in
  llama   LlamaForCausalLM: GQA (NH 4, NKV 2), untied head, q/k/v/o and MLP biases, llama3
          RoPE scaling (factor 4, low 1.5, high 3, original 16: one frequency smoothed, two
          divided), theta 5000, rms eps 1e-3; AdamW betas (0.8, 0.99), eps 1e-4, decay 0.05,
          clipping at 0.5 (triggered every step), warmup 2 + cosine to min_lr 4e-4, accum 2,
          tiles that cut every dimension
  qwen3   Qwen3ForCausalLM: q/k norms (eps 2e-4, = rms eps), head_dim 6 != C / NH = 4, GQA,
          tied, theta 20000; Adam (L2) betas (0.85, 0.98) decay 0.02, constant schedule with
          warmup 3, clipping 0.3, --recompute, head tiles of 1
  gpt2    GPT2LMHeadModel (LayerNorm eps 1e-5: the only one nnt reads), gelu_new; SGD momentum 0.8, decay 0.01, lr
          0.05, clipping 0.3, cosine with warmup 1 to min_lr 0.02, accum 3
Why these values: each differs from nnt's default and from its fallback, and where a wrong
formula could give the same number (a threshold of 1, where x and x^2 agree; eps equal to
1e-5 / 1e-6; beta2 = 0.999; min_lr = lr / 10) it is away from it. The norms' gains and all
biases are random (not 1 and 0), so a dropped gain or bias changes the losses.
"""
import argparse
import json
import math
import os
import shutil

import numpy as np
import torch
import torch.nn.functional as F
import transformers
from transformers import (GPT2Config, GPT2LMHeadModel, LlamaConfig, LlamaForCausalLM,
                          Qwen3Config, Qwen3ForCausalLM)

transformers.logging.set_verbosity_error()
V = 64
NTOK = 400

# nnt-train options besides the model and data; B, T, steps, accum as the reference reads
CASES = {
    "llama": dict(
        B=2, T=8, steps=8, accum=2, optim="adamw", lr=3e-3, beta1=0.8, beta2=0.99, eps=1e-4,
        wd=0.05, momentum=0.0, clip=0.5, warmup=2, schedule="cosine", min_lr=4e-4,
        extra=["--tile-seq", "3", "--tile-channels", "10", "--tile-hidden", "16",
               "--tile-vocab", "20", "--tile-heads", "1", "--tile-batch", "1"]),
    "qwen3": dict(
        B=2, T=8, steps=8, accum=1, optim="adam", lr=2e-3, beta1=0.85, beta2=0.98, eps=1e-8,
        wd=0.02, momentum=0.0, clip=0.3, warmup=3, schedule="constant", min_lr=0.0,
        extra=["--recompute", "--tile-heads", "1", "--tile-seq", "5", "--tile-vocab", "24"]),
    "gpt2": dict(
        B=2, T=8, steps=8, accum=3, optim="sgd", lr=0.05, beta1=0.9, beta2=0.95, eps=1e-8,
        wd=0.01, momentum=0.8, clip=0.3, warmup=1, schedule="cosine", min_lr=0.02,
        extra=["--tile-channels", "12", "--tile-hidden", "20", "--tile-vocab", "40"]),
}


def hf_model(name):
    common = dict(vocab_size=V, bos_token_id=None, eos_token_id=None, pad_token_id=None)
    if name == "gpt2":
        cfg = GPT2Config(n_embd=16, n_head=2, n_layer=2, n_positions=16, resid_pdrop=0.0,
                         embd_pdrop=0.0, attn_pdrop=0.0, layer_norm_epsilon=1e-5,
                         activation_function="gelu_new", **common)
        cls = GPT2LMHeadModel
    elif name == "llama":
        rope = {"rope_type": "llama3", "rope_theta": 5000.0, "factor": 4.0,
                "low_freq_factor": 1.5, "high_freq_factor": 3.0,
                "original_max_position_embeddings": 16}
        cfg = LlamaConfig(hidden_size=24, intermediate_size=40, num_hidden_layers=2,
                          num_attention_heads=4, num_key_value_heads=2,
                          max_position_embeddings=64, rms_norm_eps=1e-3,
                          tie_word_embeddings=False, rope_parameters=rope,
                          attention_bias=True, mlp_bias=True, **common)
        cls = LlamaForCausalLM
    else:
        cfg = Qwen3Config(hidden_size=16, intermediate_size=24, num_hidden_layers=2,
                          num_attention_heads=4, num_key_value_heads=2, head_dim=6,
                          max_position_embeddings=32, rms_norm_eps=2e-4,
                          tie_word_embeddings=True, use_sliding_window=False,
                          rope_parameters={"rope_type": "default", "rope_theta": 20000.0},
                          **common)
        cls = Qwen3ForCausalLM
    cfg._attn_implementation = "eager"
    torch.manual_seed(len(name) * 7 + 1)
    model = cls(cfg).float()
    g = torch.Generator().manual_seed(31 + len(name))
    with torch.no_grad():   # gains around 1, biases around 0, all random
        for n, p in model.named_parameters():
            if "norm" in n or "ln_" in n:
                p.copy_((1.0 if n.endswith("weight") else 0.0) + 0.2 * torch.randn(p.shape,
                                                                                  generator=g))
            elif n.endswith(".bias"):
                p.copy_(0.1 * torch.randn(p.shape, generator=g))
    return model


def lr_at(c, s):
    """nnt's schedule at step s (1-based): linear warmup, then constant or cosine to min_lr."""
    lr, w, n = c["lr"], c["warmup"], c["steps"]
    if s <= w:
        return lr * s / w
    if c["schedule"] == "constant":
        return lr
    mn = c["min_lr"]
    if s >= n:
        return mn
    return mn + (lr - mn) * (1 + math.cos(math.pi * (s - w) / (n - w))) / 2


def train(model, ids, c):
    """nnt-train's loop: windows of B T + 1 consecutive tokens, wrapping; the mean loss of
    the micro-batches; gradients of the mean, norm before clipping; PyTorch's clipping
    (scale clip / (norm + 1e-6)); decay on parameters of 2 or more dimensions only."""
    params = list(model.parameters())
    groups = [{"params": [p for p in params if p.dim() >= 2], "weight_decay": c["wd"]},
              {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0}]
    if c["optim"] == "sgd":
        opt = torch.optim.SGD(groups, lr=c["lr"], momentum=c["momentum"])
    else:
        cls = torch.optim.AdamW if c["optim"] == "adamw" else torch.optim.Adam
        opt = cls(groups, lr=c["lr"], betas=(c["beta1"], c["beta2"]), eps=c["eps"])
    ids = torch.tensor(ids, dtype=torch.int64)
    B, T, pos, rows = c["B"], c["T"], 0, []
    for s in range(1, c["steps"] + 1):
        for p in params:
            p.grad = None
        tot = 0.0
        for _ in range(c["accum"]):
            w = ids[(pos + torch.arange(B * T + 1)) % len(ids)]
            pos = (pos + B * T) % len(ids)
            logits = model(input_ids=w[:-1].view(B, T)).logits
            loss = F.cross_entropy(logits.reshape(-1, V), w[1:].reshape(-1))
            (loss / c["accum"]).backward()
            tot += loss.item()
        with torch.no_grad():
            norm = math.sqrt(sum(float((p.grad.double() ** 2).sum()) for p in params))
        assert norm > c["clip"], f"clipping at {c['clip']} does not trigger (norm {norm})"
        torch.nn.utils.clip_grad_norm_(params, c["clip"])
        for grp in opt.param_groups:
            grp["lr"] = lr_at(c, s)
        opt.step()
        rows.append((s, tot / c["accum"], norm, lr_at(c, s)))
    return rows


def args_of(c):
    a = ["--batch", c["B"], "--seq", c["T"], "--steps", c["steps"], "--accum", c["accum"],
         "--optim", c["optim"], "--lr", repr(c["lr"]), "--beta1", repr(c["beta1"]),
         "--beta2", repr(c["beta2"]), "--eps", repr(c["eps"]), "--weight-decay", repr(c["wd"]),
         "--momentum", repr(c["momentum"]), "--grad-clip", repr(c["clip"]),
         "--warmup", c["warmup"], "--schedule", c["schedule"]]
    if c["schedule"] == "cosine":
        a += ["--min-lr", repr(c["min_lr"])]
    return " ".join(str(x) for x in a + c["extra"])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "fixtures",
                                                   "train_families"))
    out = ap.parse_args().out
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    os.makedirs(out, exist_ok=True)
    rng = np.random.default_rng(5)
    # a noisy periodic sequence: learnable, not trivial
    ids = [(7 * i) % V if rng.random() < 0.7 else int(rng.integers(V)) for i in range(NTOK)]
    hdr = np.zeros(256, dtype="<i4")
    hdr[0], hdr[1], hdr[2] = 20240520, 1, NTOK
    with open(os.path.join(out, "data.bin"), "wb") as f:
        f.write(hdr.tobytes())
        f.write(np.asarray(ids, dtype="<u2").tobytes())
    for name, c in CASES.items():
        model = hf_model(name)
        d = os.path.join(out, name)
        if os.path.exists(d):
            shutil.rmtree(d)
        model.save_pretrained(d, safe_serialization=True)
        for f in os.listdir(d):   # nnt reads only these two
            if f not in ("config.json", "model.safetensors"):
                os.remove(os.path.join(d, f))
        rows = train(model, ids, c)
        with open(os.path.join(out, name + ".args"), "w") as f:
            f.write(args_of(c) + "\n")
        with open(os.path.join(out, name + ".ref"), "w") as f:
            f.write(f"# {name}: torch {torch.__version__}, transformers "
                    f"{transformers.__version__}, fp32, 1 thread; step loss grad_norm lr\n")
            for r in rows:
                f.write("%d %.9g %.9g %.9g\n" % r)
        print(name, " ".join("%.6f" % r[1] for r in rows))


if __name__ == "__main__":
    main()
