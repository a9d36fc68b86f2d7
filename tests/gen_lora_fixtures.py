#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Generate tests/fixtures/lora_tiny/: tiny Hugging Face models, LoRA adapters that PEFT made
and trained on them, and models with frozen parameters trained by PyTorch, for
tests/test_lora.c.

Not run by CI (it needs PyTorch + transformers + peft); run once and commit the output. No
downloads: random models (fixed seeds), single-threaded, deterministic algorithms, eager
attention, dropout 0.

    /tmp/venv-torch/bin/python tests/gen_lora_fixtures.py [--out tests/fixtures/lora_tiny]
    /tmp/venv-torch/bin/python tests/gen_lora_fixtures.py --verify CASE DIR
        load DIR (an adapter nnt saved for CASE's base) with PeftModel.from_pretrained and
        compare its logits on CASE's tokens with DIR/nnt_logits.safetensors ("logits"),
        which the test writes beside it (NNT_LORA_KEEP=DIR keeps them)

Bases (B 2, T 16): llama: LlamaForCausalLM V 64, C 32, L 2, NH 4, NKV 2, hidden 48, untied;
gpt2: GPT2LMHeadModel V 64, C 32, L 2, NH 4, n_positions 32 (tied head).
  BASE/config.json, BASE/model.safetensors        save_pretrained

LoRA cases (r 4, lora_alpha 8, dropout 0; AdamW lr 1e-2, betas (0.9, 0.999), eps 1e-8,
weight decay 0.05 on the adapters (the base frozen, as get_peft_model leaves it), 10 steps):
  llama_qv      q_proj, v_proj (PEFT's default)
  llama_all     all-linear, use_rslora (s = 8 / sqrt(4) = 4, not 2)
  llama_mlp     o_proj, gate_proj, up_proj, down_proj
  gpt2_attn     c_attn (one A for q, k, v; B (3C, r))
  gpt2_all      all-linear: c_attn, c_proj (attention and MLP), c_fc
  llama_dora    all-linear, use_dora (DoRA: lora_magnitude_vector of each module)
  gpt2_dora     all-linear, use_dora (c_attn's magnitudes (3C); biases; c_fc's GELU)
Per case CASE:
  CASE/init/      save_pretrained before training (B zero: the base's logits)
  CASE/trained/   save_pretrained after the 10 steps
  CASE/merged/    merge_and_unload().save_pretrained: the merged base (model.safetensors)
  CASE.reference.safetensors
      tokens, targets (B, T) int32; train_tokens, train_targets (10, B, T) int32;
      losses (10): the loss before each update; logits (B, T, V): the trained adapter's on
      tokens; merged_logits (B, T, V): the merged model's

Frozen parameters (no adapter):
  llama_freeze.reference.safetensors
      the llama base with every parameter matching one of FREEZE (fnmatch) given
      requires_grad False, trained 10 steps by AdamW (lr 1e-2, weight decay 0.05 on every
      trainable parameter): train_tokens, train_targets, losses (10), and final.<name> of
      every trainable parameter after the steps
"""
import argparse
import fnmatch
import json
import os
import sys

import torch
import torch.nn.functional as F
from peft import LoraConfig, PeftModel, get_peft_model
from safetensors.torch import load_file, save_file
from transformers import (GPT2Config, GPT2LMHeadModel, GptOssConfig, GptOssForCausalLM,
                          LlamaConfig, LlamaForCausalLM, MixtralConfig, MixtralForCausalLM)

B, T, STEPS, V = 2, 16, 10, 64
LR, WD = 1e-2, 0.05
FREEZE = ["model.embed_tokens.weight", "model.layers.0.*", "*.mlp.*", "*norm*"]

CASES = {
    "llama_qv": ("llama", dict(target_modules=["q_proj", "v_proj"])),
    "llama_all": ("llama", dict(target_modules="all-linear", use_rslora=True)),
    "llama_mlp": ("llama", dict(target_modules=["o_proj", "gate_proj", "up_proj",
                                                "down_proj"])),
    "gpt2_attn": ("gpt2", dict(target_modules=["c_attn"])),
    "gpt2_all": ("gpt2", dict(target_modules="all-linear")),
    # new in 0.4: the experts of transformers 5's MoE models, 3-D parameters that PEFT adapts
    # through target_parameters (one adapter per expert, stacked: lora_A (E r, in), lora_B
    # (out, r E)); gate_up_proj "experts.base_layer." when down_proj is adapted too
    "gptoss_experts": ("gptoss", dict(target_modules=["q_proj", "o_proj"],
                                      target_parameters=["mlp.experts.gate_up_proj",
                                                         "mlp.experts.down_proj"])),
    "mixtral_all": ("mixtral", dict(target_modules="all-linear")),
    "mixtral_down": ("mixtral", dict(target_modules=["gate"],
                                     target_parameters=["1.mlp.experts.down_proj"])),
    # new in 0.4: DoRA (use_dora): a magnitude per output feature, lora_magnitude_vector
    "llama_dora": ("llama", dict(target_modules="all-linear", use_dora=True)),
    "gpt2_dora": ("gpt2", dict(target_modules="all-linear", use_dora=True)),
}


def build_moe(base):
    """A tiny GptOssForCausalLM (sinks, biases, clamped SwiGLU, experts (E, C, 2I) with gate
    and up columns interleaved) or MixtralForCausalLM (experts (E, 2I, C), gate rows then
    up rows), E 4, top 2, eager experts, no aux loss in the loss."""
    torch.manual_seed(13 if base == "gptoss" else 14)
    common = dict(vocab_size=V, hidden_size=32, intermediate_size=24, num_hidden_layers=2,
                  num_attention_heads=4, num_key_value_heads=2, num_local_experts=4,
                  num_experts_per_tok=2, rms_norm_eps=1e-5, tie_word_embeddings=False,
                  max_position_embeddings=64, output_router_logits=False,
                  attn_implementation="eager", experts_implementation="eager",
                  bos_token_id=None, eos_token_id=None, pad_token_id=None)
    if base == "gptoss":
        cfg = GptOssConfig(**common, head_dim=8,
                           layer_types=["sliding_attention", "full_attention"],
                           sliding_window=64, swiglu_limit=1.5, attention_bias=True,
                           rope_parameters=dict(rope_type="default", rope_theta=10000.0))
        model = GptOssForCausalLM(cfg).float()
    else:
        cfg = MixtralConfig(**common, rope_theta=10000.0)
        model = MixtralForCausalLM(cfg).float()
    g = torch.Generator().manual_seed(22)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "norm" in name:
                p.copy_(1.0 + 0.1 * torch.randn(p.shape, generator=g))
            elif name.endswith("router.weight") or name.endswith("sinks"):
                p.copy_(torch.randn(p.shape, generator=g))
            else:
                p.copy_(0.3 * torch.randn(p.shape, generator=g))
    model.eval()
    return model


def build(base):
    if base in ("gptoss", "mixtral"):
        return build_moe(base)
    torch.manual_seed(11 if base == "llama" else 12)
    if base == "llama":
        cfg = LlamaConfig(vocab_size=V, hidden_size=32, intermediate_size=48,
                          num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                          max_position_embeddings=64, rms_norm_eps=1e-5,
                          tie_word_embeddings=False, rope_theta=10000.0,
                          attn_implementation="eager", bos_token_id=None, eos_token_id=None,
                          pad_token_id=None)
        model = LlamaForCausalLM(cfg).float()
    else:
        cfg = GPT2Config(vocab_size=V, n_embd=32, n_layer=2, n_head=4, n_positions=32,
                         resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0,
                         attn_implementation="eager", bos_token_id=None, eos_token_id=None)
        model = GPT2LMHeadModel(cfg).float()
    g = torch.Generator().manual_seed(21)
    with torch.no_grad():   # weights large enough that the adapters' changes show
        for name, p in model.named_parameters():
            if "norm" in name or ".ln_" in name:
                p.copy_((1.0 if name.endswith("weight") else 0.0) +
                        0.1 * torch.randn(p.shape, generator=g))
            elif name.endswith(".bias"):
                p.copy_(0.1 * torch.randn(p.shape, generator=g))
            else:
                p.copy_(0.3 * torch.randn(p.shape, generator=g))
    model.eval()   # no dropout anywhere
    return model


def data(seed):
    g = torch.Generator().manual_seed(seed)
    tokens = torch.randint(0, V, (B, T), generator=g, dtype=torch.int32)
    targets = torch.randint(0, V, (B, T), generator=g, dtype=torch.int32)
    train = torch.randint(0, V, (STEPS, B, T + 1), generator=g, dtype=torch.int32)
    return tokens, targets, train[:, :, :T].contiguous(), train[:, :, 1:].contiguous()


def loss_of(model, tokens, targets):
    logits = model(input_ids=tokens.long()).logits
    return logits, F.cross_entropy(logits.reshape(-1, V), targets.reshape(-1).long())


def train(model, params, tt, tg):
    opt = torch.optim.AdamW(params, lr=LR, betas=(0.9, 0.999), eps=1e-8, weight_decay=WD)
    losses = []
    for s in range(STEPS):
        opt.zero_grad()
        _, loss = loss_of(model, tt[s], tg[s])
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return torch.tensor(losses, dtype=torch.float32)


def save(obj, path):
    obj.save_pretrained(path)
    readme = os.path.join(path, "README.md")   # PEFT's model card: not needed
    if os.path.exists(readme):
        os.remove(readme)


def lora_case(out, name, base, extra, seed):
    model = build(base)
    tokens, targets, tt, tg = data(seed)
    torch.manual_seed(seed)
    cfg = LoraConfig(r=4, lora_alpha=8, lora_dropout=0.0, bias="none", task_type="CAUSAL_LM",
                     **extra)
    peft = get_peft_model(model, cfg)
    peft.eval()   # dropout is 0 anyway; the base's dropouts off
    save(peft, os.path.join(out, name, "init"))
    params = [p for p in peft.parameters() if p.requires_grad]
    losses = train(peft, params, tt, tg)
    save(peft, os.path.join(out, name, "trained"))
    with torch.no_grad():
        logits = peft(input_ids=tokens.long()).logits
        merged = peft.merge_and_unload()
        merged_logits = merged(input_ids=tokens.long()).logits
    save(merged, os.path.join(out, name, "merged"))
    save_file({"tokens": tokens, "targets": targets, "train_tokens": tt, "train_targets": tg,
               "losses": losses, "logits": logits.contiguous(),
               "merged_logits": merged_logits.contiguous()},
              os.path.join(out, name + ".reference.safetensors"))
    print(name, "losses", [round(x, 5) for x in losses.tolist()])


def freeze_case(out, seed):
    model = build("llama")
    tokens, targets, tt, tg = data(seed)
    params = []
    for n, p in model.named_parameters():
        frozen = any(fnmatch.fnmatchcase(n, pat) for pat in FREEZE)
        p.requires_grad_(not frozen)
        if not frozen:
            params.append((n, p))
    losses = train(model, [p for _, p in params], tt, tg)
    tensors = {"train_tokens": tt, "train_targets": tg, "losses": losses}
    for n, p in params:
        tensors["final." + n] = p.detach().contiguous()
    save_file(tensors, os.path.join(out, "llama_freeze.reference.safetensors"))
    print("llama_freeze trainable", [n for n, _ in params])


def verify(out, case, adir):
    base = CASES[case][0]
    model = AutoModelForBase(out, base)
    ref = load_file(os.path.join(out, case + ".reference.safetensors"))
    peft = PeftModel.from_pretrained(model, adir)
    peft.eval()
    with torch.no_grad():
        logits = peft(input_ids=ref["tokens"].long()).logits
    nnt = load_file(os.path.join(adir, "nnt_logits.safetensors"))["logits"]
    err = (logits - nnt).abs().max().item()
    scale = logits.abs().max().item()
    print(f"{case}: PEFT's logits with nnt's adapter vs nnt's: max abs diff {err:.3g} "
          f"(logits up to {scale:.3g})")
    return 0 if err <= 1e-4 * max(1.0, scale) else 1


def AutoModelForBase(out, base):
    cls = {"llama": LlamaForCausalLM, "gpt2": GPT2LMHeadModel, "gptoss": GptOssForCausalLM,
           "mixtral": MixtralForCausalLM}[base]
    return cls.from_pretrained(os.path.join(out, base), attn_implementation="eager").float()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "fixtures",
                                                  "lora_tiny"))
    ap.add_argument("--verify", nargs=2, metavar=("CASE", "DIR"))
    ap.add_argument("--cases", help="comma-separated: only these cases (the bases and "
                    "llama_freeze not written)")
    args = ap.parse_args()
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    if args.verify:
        return verify(args.out, *args.verify)
    os.makedirs(args.out, exist_ok=True)
    if args.cases:
        only = args.cases.split(",")
        for i, (name, (base, extra)) in enumerate(CASES.items()):
            if name in only:
                lora_case(args.out, name, base, extra, 100 + i)
        return 0
    for base in ("llama", "gpt2", "gptoss", "mixtral"):
        build(base).save_pretrained(os.path.join(args.out, base))
    for i, (name, (base, extra)) in enumerate(CASES.items()):
        lora_case(args.out, name, base, extra, 100 + i)
    freeze_case(args.out, 200)
    return 0


if __name__ == "__main__":
    sys.exit(main())
