#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Generate tests/fixtures/gptoss_tiny/: tiny gpt-oss models (GptOssForCausalLM) and what
transformers computes with them.

Not run by CI (it needs PyTorch + transformers); run once and commit the output. No
downloads: random models (fixed seeds), single-threaded, deterministic algorithms, eager
attention (the path with the sinks) and eager experts (transformers' loop over the experts
that got tokens). No load-balancing loss: output_router_logits false, gpt-oss's default.

    /tmp/venv-torch/bin/python tests/gen_gptoss_fixtures.py [--out tests/fixtures/gptoss_tiny]

Both models: V 64, NH 4, NKV 2, L 3 with layer_types [sliding_attention, full_attention,
sliding_attention], sliding_window 5 (a query sees itself and the 4 tokens before it), E 4,
k 2 (top-k of the router logits, softmax over those k), q/k/v/o biases, per-head sinks,
untied lm_head, rms_norm_eps 1e-5, swiglu_alpha 1.702, YaRN rope: rope_theta 150000,
factor 4, original_max_position_embeddings 4096, beta_fast 32, beta_slow 1, truncate false
(max_position_embeddings 16384 = 4 x 4096). B 2, T 16 (32 tokens).
Parameters: norm weights 1 + 0.1 randn, router weights and sinks randn, everything else
(biases included) 0.3 randn.

  gptoss        C 32, head_dim 12 (not C / NH), intermediate_size 24, swiglu_limit 1.5
                (the clamp cuts gate and up values: the script prints the fractions)
  gptoss-mxfp4  C 64, head_dim 16, intermediate_size 32, swiglu_limit 1.5, the experts in
                gpt-oss's checkpoint format: MXFP4 blocks and scales made here from random
                nibbles and random scale bytes 118..124; every other tensor bf16, as in
                openai/gpt-oss-20b

Files:
  gptoss/config.json, gptoss/model.safetensors   save_pretrained (transformers' own names:
        model.layers.N.mlp.experts.gate_up_proj (E, C, 2I), gate_up_proj_bias (E, 2I),
        down_proj (E, I, C), down_proj_bias (E, C), mlp.router.weight (E, C), .bias (E),
        self_attn.sinks (NH), fp32; config.json with rope_parameters, 5.x style)
  gptoss.reference.safetensors   tokens, targets (B, T) int32; logits (B, T, V) fp32;
        loss (1) = mean cross-entropy over the B*T tokens; grad.<name> (fp32) of every
        parameter under its model.named_parameters() name (the fused experts as they are)
  gptoss.train.safetensors   10 steps of torch.optim.AdamW, the weight decay on every
        parameter but the biases and norm weights (transformers Trainer's groups, nnt's rule),
        from the same initial model: train_tokens, train_targets (10, B, T) int32,
        losses (10) fp32 (each step's loss before its update), and the hyperparameters as
        1-element fp32 tensors lr 1e-3, beta1 0.9, beta2 0.95, eps 1e-8, weight_decay 0.1
  gptoss.generate.safetensors   prompt (P = 4) int32, greedy (P + N = 16) int32:
        model.generate(do_sample=False, use_cache=True) for N = 12 new tokens, so the
        sliding layers' cache goes past the window
  gptoss-mxfp4/config.json   written here in openai/gpt-oss-20b's style: rope_scaling and
        rope_theta (not rope_parameters), experts_per_token, initial_context_length,
        quantization_config {"modules_to_not_convert": [...], "quant_method": "mxfp4"}
  gptoss-mxfp4/model.safetensors   model.layers.N.mlp.experts.gate_up_proj_blocks
        (E, 2I, C/32, 16) uint8, gate_up_proj_scales (E, 2I, C/32) uint8, down_proj_blocks
        (E, C, I/32, 16) uint8, down_proj_scales (E, C, I/32) uint8, the biases and every
        other tensor bf16. A row is an output feature (gate_up rows interleave gate 0,
        up 0, gate 1, ...), 32 consecutive inputs per block; byte j of a block holds
        element 2j in its low nibble and element 2j+1 in its high nibble; a nibble is an
        e2m1 code (+0 .5 1 1.5 2 3 4 6, bit 3 the sign); a value is code * 2^(scale - 127)
  gptoss-mxfp4.reference.safetensors   what transformers computes after loading
        gptoss-mxfp4/ with Mxfp4Config(dequantize=True), dtype float32: tokens, targets
        (B, T) int32, logits (B, T, V), loss (1); dequant.gate_up_proj.0 (E, C, 2I) and
        dequant.down_proj.0 (E, I, C): layer 0's experts as the loaded model holds them
        (fp32); dequant.wide.blocks (1, 16, 2, 16) uint8, dequant.wide.scales (1, 16, 2)
        uint8 (every byte value, scale bytes 112..143) and dequant.wide (1, 64, 16) fp32,
        transformers' convert_moe_packed_tensors of them (float32)
  SHA256SUMS   sha256sum format, every other file
Each directory loads in transformers to the logits of the model that made the reference.
"""
import argparse
import hashlib
import json
import os

import torch
import torch.nn.functional as F
import transformers
from safetensors.torch import save_file
from transformers import GptOssConfig, GptOssForCausalLM, Mxfp4Config
from transformers.integrations.mxfp4 import FP4_VALUES, convert_moe_packed_tensors

B, T, STEPS, P, N = 2, 16, 10, 4, 12
LR, BETAS, EPS, WD = 1e-3, (0.9, 0.95), 1e-8, 0.1
SCALE_LO, SCALE_HI = 118, 124     # MXFP4 scale bytes of the experts (2^-9 .. 2^-3)

ROPE = dict(rope_type="yarn", factor=4.0, original_max_position_embeddings=4096,
            beta_fast=32.0, beta_slow=1.0, truncate=False)
ROPE_THETA = 150000.0
COMMON = dict(vocab_size=64, num_attention_heads=4, num_key_value_heads=2, num_hidden_layers=3,
              layer_types=["sliding_attention", "full_attention", "sliding_attention"],
              sliding_window=5, num_local_experts=4, num_experts_per_tok=2,
              swiglu_alpha=1.702, rms_norm_eps=1e-5, tie_word_embeddings=False,
              attention_bias=True, output_router_logits=False, router_aux_loss_coef=0.9,
              max_position_embeddings=16384, bos_token_id=None, eos_token_id=None,
              pad_token_id=None)
MODELS = {
    "gptoss": dict(hidden_size=32, head_dim=12, intermediate_size=24, swiglu_limit=1.5),
    "gptoss-mxfp4": dict(hidden_size=64, head_dim=16, intermediate_size=32, swiglu_limit=1.5),
}
EAGER = dict(attn_implementation="eager", experts_implementation="eager")


def build(name, seed):
    cfg = GptOssConfig(**COMMON, **MODELS[name],
                       rope_parameters=dict(ROPE, rope_theta=ROPE_THETA), **EAGER)
    torch.manual_seed(seed)
    model = GptOssForCausalLM(cfg).float()
    assert model.config._attn_implementation == "eager"
    assert model.config._experts_implementation == "eager"
    g = torch.Generator().manual_seed(seed + 1)
    with torch.no_grad():
        for pname, p in model.named_parameters():
            if pname.endswith("norm.weight") or "layernorm" in pname:
                p.copy_(1.0 + 0.1 * torch.randn(p.shape, generator=g))
            elif pname.endswith("mlp.router.weight") or pname.endswith("self_attn.sinks"):
                p.copy_(1.0 * torch.randn(p.shape, generator=g))
            else:
                p.copy_(0.3 * torch.randn(p.shape, generator=g))
    return cfg, model


def data(cfg, seed):
    g = torch.Generator().manual_seed(seed)
    seq = torch.randint(0, cfg.vocab_size, (B, T + 1), generator=g)
    return g, seq[:, :-1].contiguous(), seq[:, 1:].contiguous()


def forward(model, tokens, targets):
    logits = model(input_ids=tokens).logits
    return logits, F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))


def clamp_stats(name, model, tokens):
    """Runs the model once, recording what reaches each layer's experts' clamp; prints the
    fraction of gate values above the limit and of up values outside +-limit, and the
    routing (top-k picks per expert)."""
    seen = []
    for layer in model.model.layers:
        ex = layer.mlp.experts

        def record(gate_up, _orig=ex._apply_gate):
            seen.append(gate_up.detach().reshape(-1, gate_up.shape[-1]))
            return _orig(gate_up)
        ex._apply_gate = record
    with torch.no_grad():
        out = model(input_ids=tokens, output_router_logits=True)
    for layer in model.model.layers:
        del layer.mlp.experts._apply_gate
    lim = model.config.swiglu_limit
    gu = torch.cat(seen)
    gate, up = gu[:, ::2], gu[:, 1::2]
    fg = (gate > lim).double().mean().item()
    fu = (up.abs() > lim).double().mean().item()
    k = model.config.num_experts_per_tok
    for li, rl in enumerate(out.router_logits):
        top = torch.topk(rl, k, -1).indices
        counts = torch.bincount(top.reshape(-1), minlength=rl.shape[-1]).tolist()
        print(f"{name} router {li}: counts {counts}")
    print(f"{name}: limit {lim}: gate > limit {fg:.3f}, |up| > limit {fu:.3f} "
          f"of {gate.numel()} values each")
    assert fg > 0.03 and fu > 0.03, (fg, fu)


def check_loads(path, model, tokens, **kw):
    """transformers reads the directory at path: every weight, the same logits."""
    again, info = GptOssForCausalLM.from_pretrained(path, **EAGER, output_loading_info=True,
                                                    **kw)
    assert not info["missing_keys"] and not info["unexpected_keys"], info
    assert not info.get("mismatched_keys"), info
    with torch.no_grad():
        assert torch.equal(again(input_ids=tokens).logits, model(input_ids=tokens).logits)
    return again


def keep_files(path):
    for f in os.listdir(path):
        if f not in ("config.json", "model.safetensors"):
            os.remove(os.path.join(path, f))


def save_sums(out):
    sums = []
    for root, _, names in sorted(os.walk(out)):
        for f in sorted(names):
            rel = os.path.relpath(os.path.join(root, f), out)
            if rel == "SHA256SUMS":
                continue
            with open(os.path.join(root, f), "rb") as fh:
                sums.append(f"{hashlib.sha256(fh.read()).hexdigest()}  {rel}\n")
    with open(os.path.join(out, "SHA256SUMS"), "w") as fh:
        fh.writelines(sums)


def gptoss(out):
    name = "gptoss"
    cfg, model = build(name, 9000)
    g, tokens, targets = data(cfg, 9100)
    path = os.path.join(out, name)
    model.save_pretrained(path, safe_serialization=True)
    keep_files(path)
    check_loads(path, model, tokens)
    clamp_stats(name, model, tokens)

    model.zero_grad()
    logits, loss = forward(model, tokens, targets)
    loss.backward()
    ref = {"tokens": tokens.to(torch.int32), "targets": targets.to(torch.int32),
           "logits": logits.detach().contiguous(), "loss": loss.detach().reshape(1)}
    for k, p in model.named_parameters():
        ref["grad." + k] = p.grad.detach().clone().contiguous()
    save_file(ref, os.path.join(out, f"{name}.reference.safetensors"))
    msg = f"{name}: loss {loss.item():.6f}"

    train_seq = torch.randint(0, cfg.vocab_size, (STEPS, B, T + 1), generator=g)
    _, m = build(name, 9000)
    # the weight decay as transformers' Trainer groups it (get_decay_parameter_names) and
    # nnt applies it: not on biases and norm weights; on the other weights, the embeddings,
    # the experts and the sinks
    no_decay = [p for k, p in m.named_parameters() if k.endswith("bias") or "norm" in k]
    decay = [p for k, p in m.named_parameters() if not (k.endswith("bias") or "norm" in k)]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": WD},
                             {"params": no_decay, "weight_decay": 0.0}],
                            lr=LR, betas=BETAS, eps=EPS)
    losses = []
    for s in range(STEPS):
        opt.zero_grad()
        _, l = forward(m, train_seq[s, :, :-1], train_seq[s, :, 1:])
        losses.append(l.item())
        l.backward()
        opt.step()
    one = lambda v: torch.tensor([v], dtype=torch.float32)  # noqa: E731
    save_file({"train_tokens": train_seq[..., :-1].contiguous().to(torch.int32),
               "train_targets": train_seq[..., 1:].contiguous().to(torch.int32),
               "losses": torch.tensor(losses, dtype=torch.float32),
               "lr": one(LR), "beta1": one(BETAS[0]), "beta2": one(BETAS[1]),
               "eps": one(EPS), "weight_decay": one(WD)},
              os.path.join(out, f"{name}.train.safetensors"))
    msg += f", AdamW {losses[0]:.6f} -> {losses[-1]:.6f}"

    prompt = torch.randint(0, cfg.vocab_size, (1, P), generator=g)
    with torch.no_grad():
        gen = model.generate(prompt, max_new_tokens=N, min_new_tokens=N, do_sample=False,
                             use_cache=True)
        # the cached, windowed decode agrees with a full forward of the whole sequence
        full = model(input_ids=gen[:, :-1], use_cache=False).logits
    assert gen.shape == (1, P + N)
    assert torch.equal(full[0, P - 1:].argmax(-1), gen[0, P:]), "generate != full forward"
    save_file({"prompt": prompt[0].to(torch.int32).contiguous(),
               "greedy": gen[0].to(torch.int32).contiguous()},
              os.path.join(out, f"{name}.generate.safetensors"))
    msg += f", greedy {gen[0].tolist()}"
    print(msg)


# ---- MXFP4 -----------------------------------------------------------------------------

def mxfp4_pack(codes):
    """codes (..., R, K) ints 0..15, K a multiple of 32 -> blocks (..., R, K/32, 16) uint8:
    byte j of a block = code 2j | code 2j+1 << 4."""
    *pre, r, k = codes.shape
    c = codes.to(torch.uint8).reshape(*pre, r, k // 32, 16, 2)
    return (c[..., 0] | (c[..., 1] << 4)).contiguous()


def mxfp4_decode(codes, scales):
    """codes (..., R, K), scales (..., R, K/32) -> (..., R, K) fp32: e2m1 value of each
    code times 2^(scale - 127) of its block of 32."""
    table = torch.tensor(FP4_VALUES, dtype=torch.float32)
    exp = scales.to(torch.int32) - 127
    v = table[codes.long()]
    return v * torch.pow(2.0, exp.to(torch.float64)).to(torch.float32).repeat_interleave(32, -1)


def gptoss_mxfp4(out):
    name = "gptoss-mxfp4"
    cfg, model = build(name, 9200)
    _, tokens, targets = data(cfg, 9300)
    E, I, C = cfg.num_local_experts, cfg.intermediate_size, cfg.hidden_size
    g = torch.Generator().manual_seed(9201)
    st = {}
    with torch.no_grad():
        for pname, p in model.named_parameters():
            if pname.endswith(("mlp.experts.gate_up_proj", "mlp.experts.down_proj")):
                rows, cols = (2 * I, C) if pname.endswith("gate_up_proj") else (C, I)
                codes = torch.randint(0, 16, (E, rows, cols), generator=g)
                scales = torch.randint(SCALE_LO, SCALE_HI + 1, (E, rows, cols // 32),
                                       generator=g).to(torch.uint8)
                blocks = mxfp4_pack(codes)
                w = mxfp4_decode(codes, scales)                     # (E, rows, cols)
                hf = convert_moe_packed_tensors(blocks, scales, dtype=torch.float32)
                assert torch.equal(hf, w.transpose(1, 2))
                p.copy_(w.transpose(1, 2))                          # param is (E, cols, rows)
                st[pname + "_blocks"] = blocks
                st[pname + "_scales"] = scales.contiguous()
            else:
                p.copy_(p.to(torch.bfloat16).float())
                st[pname] = p.detach().to(torch.bfloat16).contiguous()
    path = os.path.join(out, name)
    os.makedirs(path, exist_ok=True)
    save_file(st, os.path.join(path, "model.safetensors"), metadata={"format": "pt"})
    conf = {
        "architectures": ["GptOssForCausalLM"], "attention_bias": True,
        "attention_dropout": 0.0, "eos_token_id": None,
        "experts_per_token": cfg.num_experts_per_tok, "head_dim": cfg.head_dim,
        "hidden_act": "silu", "hidden_size": C,
        "initial_context_length": ROPE["original_max_position_embeddings"],
        "initializer_range": 0.02, "intermediate_size": I, "layer_types": cfg.layer_types,
        "max_position_embeddings": cfg.max_position_embeddings, "model_type": "gpt_oss",
        "num_attention_heads": cfg.num_attention_heads,
        "num_experts_per_tok": cfg.num_experts_per_tok,
        "num_hidden_layers": cfg.num_hidden_layers,
        "num_key_value_heads": cfg.num_key_value_heads, "num_local_experts": E,
        "output_router_logits": False, "pad_token_id": None,
        "quantization_config": {
            "modules_to_not_convert": ["model.layers.*.self_attn", "model.layers.*.mlp.router",
                                       "model.embed_tokens", "lm_head"],
            "quant_method": "mxfp4"},
        "rms_norm_eps": cfg.rms_norm_eps,
        "rope_scaling": {k: ROPE[k] for k in sorted(ROPE)},
        "rope_theta": int(ROPE_THETA), "router_aux_loss_coef": cfg.router_aux_loss_coef,
        "sliding_window": cfg.sliding_window, "swiglu_limit": cfg.swiglu_limit,
        "tie_word_embeddings": False, "transformers_version": transformers.__version__,
        "use_cache": True, "vocab_size": cfg.vocab_size}
    with open(os.path.join(path, "config.json"), "w") as fh:
        json.dump(conf, fh, indent=2)
        fh.write("\n")

    loaded = check_loads(path, model, tokens, dtype=torch.float32,
                         quantization_config=Mxfp4Config(dequantize=True))
    rp = loaded.config.rope_parameters
    assert rp["rope_type"] == "yarn" and rp["rope_theta"] == ROPE_THETA, rp
    assert all(rp[k] == v for k, v in ROPE.items()), rp
    assert loaded.config.swiglu_alpha == 1.702 and loaded.config.swiglu_limit == 1.5
    for (k, p), (k2, q) in zip(loaded.named_parameters(), model.named_parameters()):
        assert k == k2 and p.dtype == torch.float32 and torch.equal(p, q), k
    ex0 = loaded.model.layers[0].mlp.experts
    assert type(ex0).__name__ == "GptOssExperts", type(ex0)
    clamp_stats(name, loaded, tokens)
    with torch.no_grad():
        logits, loss = forward(loaded, tokens, targets)
    ref = {"tokens": tokens.to(torch.int32), "targets": targets.to(torch.int32),
           "logits": logits.contiguous(), "loss": loss.reshape(1),
           "dequant.gate_up_proj.0": ex0.gate_up_proj.detach().float().contiguous(),
           "dequant.down_proj.0": ex0.down_proj.detach().float().contiguous()}
    # every byte value and scale bytes 112..143 (2^-15 .. 2^16) through transformers' decoder
    wide_blocks = torch.arange(512).remainder(256).to(torch.uint8).reshape(1, 16, 2, 16)
    wide_scales = (112 + torch.arange(32)).to(torch.uint8).reshape(1, 16, 2)
    ref["dequant.wide.blocks"] = wide_blocks
    ref["dequant.wide.scales"] = wide_scales
    ref["dequant.wide"] = convert_moe_packed_tensors(wide_blocks, wide_scales,
                                                     dtype=torch.float32).contiguous()
    codes = torch.stack([wide_blocks & 15, wide_blocks >> 4], -1).reshape(1, 16, 64)
    assert torch.equal(ref["dequant.wide"], mxfp4_decode(codes, wide_scales).transpose(1, 2))
    save_file(ref, os.path.join(out, f"{name}.reference.safetensors"))
    w = ex0.gate_up_proj.detach()
    print(f"{name}: loss {loss.item():.6f}, layer 0 gate_up_proj |max| {w.abs().max().item()}, "
          f"rms {w.pow(2).mean().sqrt().item():.4f}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "fixtures",
                                                  "gptoss_tiny"))
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    gptoss(args.out)
    gptoss_mxfp4(args.out)
    save_sums(args.out)
    print(json.dumps({"torch": torch.__version__, "transformers": transformers.__version__}))


if __name__ == "__main__":
    main()
