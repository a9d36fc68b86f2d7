#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Generate tests/fixtures/moe_tiny/: tiny mixture-of-experts models and what transformers
computes with them, for tests/test_model_moe.c.

Not run by CI (it needs PyTorch + transformers); run once and commit the output. No
downloads: random models (fixed seeds), single-threaded, deterministic algorithms, eager
attention and eager experts (transformers' loop over the experts that got tokens).
The load-balancing loss is on (output_router_logits) with coefficients large enough that
dropping it moves the loss by far more than the tolerance.

    /tmp/venv-torch/bin/python tests/gen_moe_fixtures.py [--out tests/fixtures/moe_tiny]

Models (V 64, C 32, NH 4, NKV 2, T 16, B 2: 32 tokens):
  qwen3moe   Qwen3MoeForCausalLM, L 3, E 8, k 2, moe_intermediate_size 24, intermediate 40,
             head_dim 12, norm_topk_prob, mlp_only_layers [1] (layer 1 dense), coef 0.05
  qwen3step  Qwen3MoeForCausalLM, L 2, E 4, k 2, decoder_sparse_step 2 (layer 0 dense),
             norm_topk_prob false, coef 0.02
  mixtral    MixtralForCausalLM, L 2, E 4, k 2, intermediate 24, coef 0.05
  olmoe      OlmoeForCausalLM, L 2, E 8, k 2, intermediate 24, norm_topk_prob false (q/k
             norms over each token's whole projection), coef 0.05
  ties       qwen3moe's layout, L 2, E 4: the routers' rows 1, 2, 3 equal, so that the
             probabilities tie at the k-th place (torch.topk's choice among equal values)
  skewed     qwen3moe's layout, L 2, E 4: the embeddings carry a large constant channel
             and the routers follow it: experts 0 and 1 get every token, 2 and 3 none
  qwen2moe   Qwen2MoeForCausalLM, L 3, E 8, k 2, moe_intermediate_size 24, a shared expert
             of 36 behind its sigmoid gate, intermediate 40, mlp_only_layers [1] (layer 1
             dense), norm_topk_prob false, q/k/v biases, coef 0.05
Per model NAME:
  NAME/config.json, NAME/model.safetensors   save_pretrained (per-expert names)
  NAME.reference.safetensors   tokens, targets (B, T) int32; logits (B, T, V); loss (1) =
                               cross-entropy + coef * aux; aux (1); grad.<nnt name> of
                               every parameter (the experts' fused gate_up_proj and
                               down_proj gradients split per expert, nnt's names)
  NAME.train.safetensors       (qwen3moe, mixtral, olmoe, qwen2moe) 10 AdamW steps: train_tokens,
                               train_targets (10, B, T), losses (10), lr 1e-3
  NAME.generate.safetensors    (qwen3moe, mixtral, olmoe, qwen2moe) prompt (P) int32,
                               greedy (P + N) int32
  NAME-fused/                  (qwen3moe, mixtral, olmoe, qwen2moe) the same model saved
                               with save_pretrained(save_original_format=False): the
                               experts as transformers' modules hold them, fused
                               mlp.experts.gate_up_proj (E, 2I, C) and down_proj (E, C, I)
                               (Mixtral's router as mlp.gate.weight)
  mixtral-mixed/               mixtral's weights in the other layouts transformers reads:
                               layer 0 per expert under .mlp. (w1, w2, w3; the router
                               mlp.gate.weight), layer 1 fused under .block_sparse_moe.
Each of these directories loads in transformers to the same logits, bit for bit.
topk.safetensors: rows of tied logits and torch.topk's choices (see topk_fixture)
"""
import argparse
import hashlib
import json
import os

import torch
import torch.nn.functional as F
from safetensors import safe_open
from safetensors.torch import save_file
from transformers import (MixtralConfig, MixtralForCausalLM, OlmoeConfig, OlmoeForCausalLM,
                          Qwen2MoeConfig, Qwen2MoeForCausalLM, Qwen3MoeConfig,
                          Qwen3MoeForCausalLM)

B, T, STEPS, P, N = 2, 16, 10, 4, 12

COMMON = dict(vocab_size=64, hidden_size=32, num_attention_heads=4, num_key_value_heads=2,
              max_position_embeddings=64, tie_word_embeddings=False,
              output_router_logits=True, attn_implementation="eager",
              experts_implementation="eager", bos_token_id=None, eos_token_id=None,
              pad_token_id=None)
QWEN = dict(intermediate_size=40, moe_intermediate_size=24, num_experts_per_tok=2,
            rms_norm_eps=1e-6, rope_theta=10000.0)
MODELS = {
    "qwen3moe": (Qwen3MoeConfig, Qwen3MoeForCausalLM,
                 dict(QWEN, num_hidden_layers=3, num_experts=8, head_dim=12,
                      norm_topk_prob=True, mlp_only_layers=[1], router_aux_loss_coef=0.05)),
    "qwen3step": (Qwen3MoeConfig, Qwen3MoeForCausalLM,
                  dict(QWEN, num_hidden_layers=2, num_experts=4, decoder_sparse_step=2,
                       norm_topk_prob=False, router_aux_loss_coef=0.02)),
    "mixtral": (MixtralConfig, MixtralForCausalLM,
                dict(num_hidden_layers=2, intermediate_size=24, num_local_experts=4,
                     num_experts_per_tok=2, rms_norm_eps=1e-5, rope_theta=10000.0,
                     router_aux_loss_coef=0.05)),
    "olmoe": (OlmoeConfig, OlmoeForCausalLM,
              dict(num_hidden_layers=2, intermediate_size=24, num_experts=8,
                   num_experts_per_tok=2, norm_topk_prob=False, rms_norm_eps=1e-5,
                   rope_theta=10000.0, router_aux_loss_coef=0.05)),
    "ties": (Qwen3MoeConfig, Qwen3MoeForCausalLM,
             dict(QWEN, num_hidden_layers=2, num_experts=4, norm_topk_prob=True,
                  router_aux_loss_coef=0.05)),
    "skewed": (Qwen3MoeConfig, Qwen3MoeForCausalLM,
               dict(QWEN, num_hidden_layers=2, num_experts=4, norm_topk_prob=True,
                    router_aux_loss_coef=0.05)),
    "qwen2moe": (Qwen2MoeConfig, Qwen2MoeForCausalLM,
                 dict(QWEN, num_hidden_layers=3, num_experts=8,
                      shared_expert_intermediate_size=36, mlp_only_layers=[1],
                      norm_topk_prob=False, qkv_bias=True, router_aux_loss_coef=0.05)),
}
TRAIN = ("qwen3moe", "mixtral", "olmoe", "qwen2moe")
FUSED = ("qwen3moe", "mixtral", "olmoe", "qwen2moe")
GENERATE = ("qwen3moe", "mixtral", "olmoe", "qwen2moe")


def build(name, seed):
    cc, mc, extra = MODELS[name]
    cfg = cc(**COMMON, **extra)
    torch.manual_seed(seed)
    model = mc(cfg).float()
    g = torch.Generator().manual_seed(seed + 1)
    with torch.no_grad():
        for pname, p in model.named_parameters():
            if pname.endswith("norm.weight") or "layernorm" in pname:
                p.copy_(1.0 + 0.1 * torch.randn(p.shape, generator=g))
            elif pname.endswith("mlp.gate.weight"):   # routers: clear preferences
                p.copy_(1.0 * torch.randn(p.shape, generator=g))
            else:
                p.copy_(0.3 * torch.randn(p.shape, generator=g))
        if name == "ties":
            for layer in model.model.layers:
                w = layer.mlp.gate.weight
                w[2].copy_(w[1])
                w[3].copy_(w[1])
        if name == "skewed":
            model.model.embed_tokens.weight[:, 0] = 30.0
            for layer in model.model.layers:
                w = layer.mlp.gate.weight
                w.mul_(0.01)
                w[:, 0] += torch.tensor([3.0, 2.0, -1.0, -2.0])
    return cfg, model


def check_loads(path, mc, model, tokens):
    """transformers reads the directory at path: every weight, the same logits."""
    again, info = mc.from_pretrained(path, attn_implementation="eager",
                                     experts_implementation="eager", output_loading_info=True)
    assert not info["missing_keys"] and not info["unexpected_keys"], info
    with torch.no_grad():
        assert torch.equal(again(input_ids=tokens).logits, model(input_ids=tokens).logits)


def save_fused(path, mc, model, tokens):
    """path-fused: save_pretrained(save_original_format=False)."""
    model.save_pretrained(path + "-fused", safe_serialization=True, save_original_format=False)
    for f in os.listdir(path + "-fused"):
        if f not in ("config.json", "model.safetensors"):
            os.remove(os.path.join(path + "-fused", f))
    check_loads(path + "-fused", mc, model, tokens)


def save_mixed(path, mc, model, tokens):
    """path-mixed (Mixtral): layer 0 per expert under .mlp., layer 1 fused under
    .block_sparse_moe., the rest as save_pretrained writes it."""
    mixed = path + "-mixed"
    os.makedirs(mixed, exist_ok=True)
    with safe_open(os.path.join(path, "model.safetensors"), "pt") as f:
        data = {k: f.get_tensor(k) for k in f.keys() if not k.startswith("model.layers.1.")
                or ".block_sparse_moe." not in k}
        data = {k.replace("model.layers.0.block_sparse_moe.", "model.layers.0.mlp."): v
                for k, v in data.items()}
    sd = model.state_dict()
    data["model.layers.1.block_sparse_moe.gate.weight"] = sd["model.layers.1.mlp.gate.weight"]
    for t in ("gate_up_proj", "down_proj"):
        data[f"model.layers.1.block_sparse_moe.experts.{t}"] = \
            sd[f"model.layers.1.mlp.experts.{t}"].contiguous()
    save_file(data, os.path.join(mixed, "model.safetensors"), metadata={"format": "pt"})
    with open(os.path.join(path, "config.json")) as src, \
            open(os.path.join(mixed, "config.json"), "w") as dst:
        dst.write(src.read())
    check_loads(mixed, mc, model, tokens)


def forward(model, tokens, targets):
    out = model(input_ids=tokens, output_router_logits=True)
    logits = out.logits
    ce = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))
    return logits, ce + model.config.router_aux_loss_coef * out.aux_loss, out


def nnt_grads(model):
    """Gradients under nnt's parameter names (per expert)."""
    grads = {}
    for k, p in model.named_parameters():
        g = p.grad.detach()
        if k.endswith("mlp.experts.gate_up_proj"):
            base = k[: -len("gate_up_proj")]
            inter = g.shape[1] // 2
            for e in range(g.shape[0]):
                grads[f"grad.{base}{e}.gate_proj.weight"] = g[e, :inter].contiguous()
                grads[f"grad.{base}{e}.up_proj.weight"] = g[e, inter:].contiguous()
        elif k.endswith("mlp.experts.down_proj"):
            base = k[: -len("down_proj")]
            for e in range(g.shape[0]):
                grads[f"grad.{base}{e}.down_proj.weight"] = g[e].contiguous()
        else:
            grads["grad." + k] = g.clone().contiguous()
    return grads


def check_routing(name, model, out):
    k = model.config.num_experts_per_tok
    for li, rl in enumerate(out.router_logits):
        probs = torch.softmax(rl.float(), -1)
        top = torch.topk(probs, k, -1)
        counts = torch.bincount(top.indices.reshape(-1), minlength=probs.shape[-1])
        srt = probs.sort(-1, descending=True).values
        ties = int((srt[:, k - 1] == srt[:, k]).sum())
        print(f"{name} router {li}: counts {counts.tolist()}, ties at place k {ties}")
        if name == "ties":
            assert ties > 0
        if name == "skewed":
            assert counts[0] == probs.shape[0] and counts[1] == probs.shape[0]
            assert counts[2] == 0 and counts[3] == 0


# (E, k) of the top-k fixture: torch.topk's nth_element regime (k * 64 > E) and its
# partial-sort regime (k * 64 <= E: 100/1, 128/2, 256/4, 300/2)
TOPK = [(4, 2), (8, 2), (16, 3), (60, 8), (64, 8), (128, 8), (100, 1), (128, 2), (256, 4),
        (300, 2)]


def topk_fixture(out):
    """topk.safetensors: per (E, k) 64 rows of logits with few distinct levels (ties
    everywhere, exactly representable), transformers' routing of them: idx.E.k (torch.topk of
    the float32 softmax) and w.E.k (the chosen probabilities, renormalised)."""
    g = torch.Generator().manual_seed(7000)
    data = {}
    for E, k in TOPK:
        levels = torch.randint(2, 6, (64, 1), generator=g)
        logits = torch.floor(torch.rand(64, E, generator=g) * levels) * 0.5
        probs = torch.softmax(logits, dim=-1, dtype=torch.float)
        top = torch.topk(probs, k, dim=-1)
        data[f"logits.{E}.{k}"] = logits.float().contiguous()
        data[f"idx.{E}.{k}"] = top.indices.to(torch.int32).contiguous()
        data[f"w.{E}.{k}"] = (top.values / top.values.sum(-1, keepdim=True)).contiguous()
        ties = int((probs.sort(-1, descending=True).values[:, k - 1] ==
                    probs.sort(-1, descending=True).values[:, k]).sum())
        print(f"topk E {E} k {k}: {ties} of 64 rows tie at place k")
    save_file(data, os.path.join(out, "topk.safetensors"))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "fixtures",
                                                  "moe_tiny"))
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    for i, name in enumerate(MODELS):
        cfg, model = build(name, 5000 + i)
        g = torch.Generator().manual_seed(6000 + i)
        seq = torch.randint(0, cfg.vocab_size, (B, T + 1), generator=g)
        tokens, targets = seq[:, :-1].contiguous(), seq[:, 1:].contiguous()
        path = os.path.join(args.out, name)
        model.save_pretrained(path, safe_serialization=True)
        for f in os.listdir(path):
            if f not in ("config.json", "model.safetensors"):
                os.remove(os.path.join(path, f))
        if name in FUSED:
            save_fused(path, MODELS[name][1], model, tokens)
        if name == "mixtral":
            save_mixed(path, MODELS[name][1], model, tokens)
        model.zero_grad()
        logits, loss, out = forward(model, tokens, targets)
        check_routing(name, model, out)
        loss.backward()
        ref = {"tokens": tokens.to(torch.int32), "targets": targets.to(torch.int32),
               "logits": logits.detach().contiguous(), "loss": loss.detach().reshape(1),
               "aux": out.aux_loss.detach().reshape(1).float()}
        ref.update(nnt_grads(model))
        save_file(ref, os.path.join(args.out, f"{name}.reference.safetensors"))
        msg = f"{name}: loss {loss.item():.6f} (aux {out.aux_loss.item():.6f})"
        if name in TRAIN:
            train_seq = torch.randint(0, cfg.vocab_size, (STEPS, B, T + 1), generator=g)
            _, m = build(name, 5000 + i)
            opt = torch.optim.AdamW(m.parameters(), lr=1e-3, betas=(0.9, 0.999), eps=1e-8,
                                    weight_decay=0.0)
            losses = []
            for s in range(STEPS):
                opt.zero_grad()
                _, l, _ = forward(m, train_seq[s, :, :-1], train_seq[s, :, 1:])
                losses.append(l.item())
                l.backward()
                opt.step()
            save_file({"train_tokens": train_seq[..., :-1].contiguous().to(torch.int32),
                       "train_targets": train_seq[..., 1:].contiguous().to(torch.int32),
                       "losses": torch.tensor(losses, dtype=torch.float32)},
                      os.path.join(args.out, f"{name}.train.safetensors"))
            msg += f", AdamW {losses[0]:.6f} -> {losses[-1]:.6f}"
        if name in GENERATE:
            prompt = torch.randint(0, cfg.vocab_size, (1, P), generator=g)
            with torch.no_grad():
                gen = model.generate(prompt, max_new_tokens=N, do_sample=False,
                                     use_cache=True, min_new_tokens=N)
            save_file({"prompt": prompt[0].to(torch.int32).contiguous(),
                       "greedy": gen[0].to(torch.int32).contiguous()},
                      os.path.join(args.out, f"{name}.generate.safetensors"))
            msg += f", greedy {gen[0].tolist()}"
        print(msg)
    topk_fixture(args.out)
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
