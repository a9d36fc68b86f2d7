#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Generate tests/fixtures/llama_tiny/: tiny Hugging Face LlamaForCausalLM models (and one
Qwen3ForCausalLM) and what transformers computes with them (logits, loss, every parameter's
gradient, 10 AdamW steps).

Not run by CI (it needs PyTorch + transformers); run once and commit the output. No
downloads: the models are random (fixed seeds), single-threaded, deterministic algorithms.

    /tmp/venv-torch/bin/python tests/gen_llama_fixtures.py [--out tests/fixtures/llama_tiny]
    /tmp/venv-torch/bin/python tests/gen_llama_fixtures.py --check-saved DIR \
        --reference tests/fixtures/llama_tiny/gqa.reference.safetensors

Per model NAME (gqa, mqa, qwen3) it writes:
  NAME/config.json,            a Hugging Face model directory, written by save_pretrained
  NAME/model.safetensors       (safe_serialization): the parameters under HF names
                               (lm_head.weight absent when tied)
  NAME.reference.safetensors   tokens, targets (B, T) int32; logits (B, T, V); loss (1);
                               grad.<HF name> for every parameter (tied: one wte gradient)
  NAME.train.safetensors       train_tokens, train_targets (10, B, T) int32; losses_wd0 and
                               losses_wd01 (10) float32: torch.optim.AdamW lr 1e-3, betas
                               (0.9, 0.999), eps 1e-8, weight decay 0, or 0.1 on the
                               parameters of 2 or more dims only (matrices, embeddings: nnt's
                               decay flags); the loss recorded before each update
and for mqa two more directories (nnt_model_load_hf's dtype conversions):
  mqa_bf16/, mqa_fp16/         config.json + model.safetensors of the model cast to bfloat16 /
                               float16 (save_pretrained), and reference.safetensors: logits
                               (B, T, V) of that directory loaded by from_pretrained with
                               dtype float32, on the tokens of mqa.reference.safetensors
Loss: mean cross-entropy over all B*T positions, targets given explicitly (no HF shift).

--check-saved DIR loads a directory that nnt_model_save_hf wrote with AutoModelForCausalLM
.from_pretrained (float32, eager attention) and compares its logits on the reference's
tokens with the reference's logits (--reference FILE: a NAME.reference.safetensors here, or
tests/fixtures/gpt2_tiny/reference.safetensors); exits 1 beyond --tol (relative norm).
"""
import argparse
import copy
import hashlib
import json
import os

import torch
import torch.nn.functional as F
from safetensors.torch import load_file, save_file
from transformers import (AutoModelForCausalLM, LlamaConfig, LlamaForCausalLM, Qwen3Config,
                          Qwen3ForCausalLM)

B, T, STEPS = 2, 8, 10

MODELS = {
    # (a) grouped-query NH 4 / NKV 2, untied head, no biases, rope theta 500000
    "gqa": dict(vocab_size=61, hidden_size=32, intermediate_size=48, num_hidden_layers=2,
                num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
                rms_norm_eps=1e-5, tie_word_embeddings=False, attention_bias=False,
                mlp_bias=False,
                rope_parameters={"rope_type": "default", "rope_theta": 500000.0}),
    # (b) multi-query NH 4 / NKV 1, tied embeddings, attention biases (q, k, v and o),
    # Llama 3.1 rope scaling with original 16 positions so that hd 6's three frequencies
    # fall into the three regimes (kept, smoothed, divided by the factor), theta 10000
    "mqa": dict(vocab_size=53, hidden_size=24, intermediate_size=40, num_hidden_layers=2,
                num_attention_heads=4, num_key_value_heads=1, max_position_embeddings=64,
                rms_norm_eps=1e-6, tie_word_embeddings=True, attention_bias=True,
                mlp_bias=False,
                rope_parameters={"rope_type": "llama3", "rope_theta": 10000.0, "factor": 8.0,
                                 "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                                 "original_max_position_embeddings": 16}),
    # (c) Qwen3ForCausalLM: q_norm / k_norm (RMSNorm over each head vector of q and k, before
    # the rotation), head_dim 12 with NH 4 (q 48 wide, C 40), NH 4 / NKV 2, tied embeddings,
    # attention biases (q, k, v and o), theta 1e6
    "qwen3": dict(vocab_size=67, hidden_size=40, intermediate_size=56, num_hidden_layers=2,
                  num_attention_heads=4, num_key_value_heads=2, head_dim=12,
                  max_position_embeddings=64, rms_norm_eps=1e-6, tie_word_embeddings=True,
                  attention_bias=True, use_sliding_window=False,
                  rope_parameters={"rope_type": "default", "rope_theta": 1000000.0}),
}
CLASSES = {"qwen3": (Qwen3Config, Qwen3ForCausalLM)}


def build(name, seed):
    config_class, model_class = CLASSES.get(name, (LlamaConfig, LlamaForCausalLM))
    cfg = config_class(**MODELS[name], attn_implementation="eager", bos_token_id=None,
                       eos_token_id=None, pad_token_id=None)
    torch.manual_seed(seed)
    model = model_class(cfg).float()
    # random values everywhere (biases and norm gains too) so that every term matters
    g = torch.Generator().manual_seed(seed + 1)
    with torch.no_grad():
        for pname, p in model.named_parameters():
            if pname.endswith("norm.weight") or "layernorm" in pname:
                p.copy_(1.0 + 0.1 * torch.randn(p.shape, generator=g))
            elif pname.endswith(".bias"):
                p.copy_(0.1 * torch.randn(p.shape, generator=g))
            else:
                p.copy_(0.08 * torch.randn(p.shape, generator=g))
    return cfg, model


def loss_of(model, tokens, targets):
    logits = model(input_ids=tokens).logits
    return logits, F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))


def params_by_name(model):
    """HF names of the distinct parameters (a tied lm_head.weight is listed once, as
    model.embed_tokens.weight)."""
    return dict(model.named_parameters())


def save_dir(model, path):
    """A Hugging Face model directory: config.json and model.safetensors only."""
    model.save_pretrained(path, safe_serialization=True)
    for f in os.listdir(path):
        if f not in ("config.json", "model.safetensors"):
            os.remove(os.path.join(path, f))


def cast_dirs(out, name, model, tokens, logits32):
    """NAME_bf16/ and NAME_fp16/: the model in that dtype and its logits upcast to fp32."""
    for suffix, dtype in (("bf16", torch.bfloat16), ("fp16", torch.float16)):
        path = os.path.join(out, f"{name}_{suffix}")
        low = copy.deepcopy(model).to(dtype)
        save_dir(low, path)
        # from the file, upcast to float32 as transformers loads it (the rope's inv_freq is
        # computed in float32 again: a cast model would keep a rounded one)
        back = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32,
                                                    attn_implementation="eager")
        with torch.no_grad():
            lg = back(input_ids=tokens).logits.contiguous()
        save_file({"logits": lg}, os.path.join(path, "reference.safetensors"))
        rel = ((lg - logits32).norm() / logits32.norm()).item()
        print(f"{name}_{suffix}: logits vs fp32 model, normwise relative {rel:.3g}")


def check_saved(path, reference, tol):
    """Load a directory nnt saved and compare its logits with the reference's."""
    ref = load_file(reference)
    model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32,
                                                 attn_implementation="eager")
    model.eval()
    with torch.no_grad():
        lg = model(input_ids=ref["tokens"].long()).logits
    want = ref["logits"]
    rel = ((lg - want).norm() / want.norm()).item()
    print(f"{path}: {type(model).__name__}, logits vs {reference}: normwise relative "
          f"{rel:.3g}, max |diff| {(lg - want).abs().max().item():.3g}")
    return 0 if rel <= tol else 1


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "fixtures",
                                                  "llama_tiny"))
    ap.add_argument("--check-saved", metavar="DIR")
    ap.add_argument("--reference", metavar="FILE")
    ap.add_argument("--tol", type=float, default=1e-5)
    ap.add_argument("--only", metavar="NAME", action="append", choices=sorted(MODELS),
                    help="generate only this model (repeatable; SHA256SUMS covers every file)")
    args = ap.parse_args()
    if args.check_saved:
        torch.set_num_threads(1)
        raise SystemExit(check_saved(args.check_saved, args.reference, args.tol))
    os.makedirs(args.out, exist_ok=True)
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    sums = []
    for i, name in enumerate(MODELS):
        if args.only and name not in args.only:
            continue
        cfg, model = build(name, 1000 + i)
        V = cfg.vocab_size
        g = torch.Generator().manual_seed(2000 + i)
        seq = torch.randint(0, V, (B, T + 1), generator=g)
        tokens, targets = seq[:, :-1].contiguous(), seq[:, 1:].contiguous()
        params = params_by_name(model)
        if cfg.tie_word_embeddings:
            assert "lm_head.weight" not in params
            assert model.lm_head.weight is model.model.embed_tokens.weight
        files = {}
        # the model
        state = {k: v.detach().clone().contiguous() for k, v in params.items()}
        save_dir(model, os.path.join(args.out, name))
        # forward, backward
        model.zero_grad()
        logits, loss = loss_of(model, tokens, targets)
        loss.backward()
        ref = {"tokens": tokens.to(torch.int32), "targets": targets.to(torch.int32),
               "logits": logits.detach().contiguous(), "loss": loss.detach().reshape(1)}
        for k, p in params.items():
            ref["grad." + k] = p.grad.detach().clone().contiguous()
        files["reference.safetensors"] = ref
        # the saved directory holds exactly the parameters and reloads to the same logits,
        # bit for bit
        saved = load_file(os.path.join(args.out, name, "model.safetensors"))
        assert sorted(saved) == sorted(state)
        assert all(torch.equal(saved[k], v) for k, v in state.items())
        again = AutoModelForCausalLM.from_pretrained(os.path.join(args.out, name),
                                                     attn_implementation="eager")
        with torch.no_grad():
            assert torch.equal(again(input_ids=tokens).logits, logits.detach())
        # 10 AdamW steps, from the same start, without and with weight decay
        train_seq = torch.randint(0, V, (STEPS, B, T + 1), generator=g)
        train = {"train_tokens": train_seq[..., :-1].contiguous().to(torch.int32),
                 "train_targets": train_seq[..., 1:].contiguous().to(torch.int32)}
        for key, wd in (("losses_wd0", 0.0), ("losses_wd01", 0.1)):
            _, m = build(name, 1000 + i)
            ps = params_by_name(m)
            decay = [p for p in ps.values() if p.dim() >= 2]
            rest = [p for p in ps.values() if p.dim() < 2]
            opt = torch.optim.AdamW([{"params": decay, "weight_decay": wd},
                                     {"params": rest, "weight_decay": 0.0}],
                                    lr=1e-3, betas=(0.9, 0.999), eps=1e-8)
            losses = []
            for s in range(STEPS):
                opt.zero_grad()
                _, l = loss_of(m, train_seq[s, :, :-1], train_seq[s, :, 1:])
                losses.append(l.item())
                l.backward()
                opt.step()
            train[key] = torch.tensor(losses, dtype=torch.float32)
            print(f"{name} AdamW wd {wd}: {losses[0]:.6f} -> {losses[-1]:.6f}")
        files["train.safetensors"] = train
        for f, tensors in files.items():
            save_file(tensors, os.path.join(args.out, f"{name}.{f}"))
        if name == "mqa":
            cast_dirs(args.out, name, model, tokens, logits.detach())
        print(f"{name}: {sum(p.numel() for p in params.values())} parameters, loss "
              f"{loss.item():.6f}")
    for root, _, names in sorted(os.walk(args.out)):
        for f in sorted(names):
            rel = os.path.relpath(os.path.join(root, f), args.out)
            if rel == "SHA256SUMS":
                continue
            with open(os.path.join(root, f), "rb") as fh:
                sums.append(f"{hashlib.sha256(fh.read()).hexdigest()}  {rel}\n")
    with open(os.path.join(args.out, "SHA256SUMS"), "w") as fh:
        fh.writelines(sums)
    meta = {"torch": torch.__version__, "transformers": __import__("transformers").__version__}
    print(json.dumps(meta))


if __name__ == "__main__":
    main()
