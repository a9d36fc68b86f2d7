#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Generate tests/fixtures/window_tiny/: tiny Hugging Face models with sliding-window
attention and what transformers computes with them, for tests/test_model_window.c.

Not run by CI (it needs PyTorch + transformers); run once and commit the output. No
downloads: random models (fixed seeds), single-threaded, deterministic algorithms, eager
attention (transformers' sliding-window mask: kv_idx > q_idx - sliding_window).

    /tmp/venv-torch/bin/python tests/gen_window_fixtures.py [--out tests/fixtures/window_tiny]

Models (V 64, C 32, L 2, NH 4, NKV 2, T 16):
  mistral   MistralForCausalLM, sliding_window 5 (every layer)
  qwen2     Qwen2ForCausalLM, use_sliding_window, sliding_window 5, max_window_layers 1
            (layer 0 full, layer 1 sliding)
  qwen2_listed  Qwen2ForCausalLM, use_sliding_window, sliding_window 5, layer_types
            ["sliding_attention", "full_attention"] (layer 0 sliding, layer 1 full: no
            max_window_layers says it)
  smollm3   SmolLM3ForCausalLM, no_rope_layers [0, 1] (layer 0 without rotary positions),
            use_sliding_window, sliding_window 5 (so layer 0 slides: the layers without
            rope do when no layer_types is given), MLP biases (no attention biases: without
            rotary positions k's bias has no gradient, the softmax being blind to it)
  smollm3_nope  SmolLM3ForCausalLM, no_rope_layers [1, 0] (layer 1 without rotary
            positions), no window, no rope_theta (SmolLM3Config's default_theta 2e6)
  olmo2     Olmo2ForCausalLM (no window: the norms after the attention and the MLP, q/k
            norms over the whole projections), NKV 2, attention biases (the k norm makes
            k's bias matter), head_dim 12 (NH hd 48 against C 32)
  llama_yarn  LlamaForCausalLM with YaRN (rope_type "yarn", factor 4, original 64, theta
            100, head_dim 16: the ramp spans frequencies 0 to 5 of 8; attention_factor from
            the factor)
  qwen3_yarn  Qwen3ForCausalLM with YaRN (factor 2.5, original 48, theta 50, beta_fast 4,
            beta_slow 0.5, truncate false, attention_factor 1.3), q/k norms, head_dim 12
  olmo3     Olmo3ForCausalLM, L 4: sliding_window 5 on layers 0-2 (its default layer_types),
            layer 3 full; rope_parameters: the full layer YaRN (factor 2, original 32, theta
            1000), the sliding ones theta 300
  phi3      Phi3ForCausalLM (q, k, v in one qkv_proj, gate and up in one gate_up_proj),
            sliding_window 5 on every layer, head_dim 12 with partial_rotary_factor 0.5
            (pairs (i, i + 3) of the first 6 entries rotated, theta 500)
  phi3_longrope  Phi3ForCausalLM, C 64 (head_dim 16), partial_rotary_factor 0.75 (12
            rotated), LongRoPE over original_max_position_embeddings 10 of 64: T 16 takes the
            long factors (attention factor sqrt(1 + ln 6.4 / ln 10)); generation from a
            prompt of 4 switches to them at position 10, its cached keys keeping the short
            ones; tied head; matrices drawn at 0.15 (not 0.3: at C 64 the float32 reference
            would sit 2.4e-5 from float64's in its gradients)
  phi3_lora  PEFT 0.21's LoRA on phi3 (all-linear: qkv_proj, o_proj, gate_up_proj,
            down_proj; r 4, lora_alpha 8): phi3_lora/init, phi3_lora/trained (10 AdamW
            steps, lr 1e-2, weight decay 0.05) and phi3_lora.reference.safetensors, as
            tests/gen_gemma_fixtures.py makes its LoRA fixtures
  phi       PhiForCausalLM (the attention and the MLP side by side on one LayerNorm, every
            bias, a head with a bias, fc1/fc2 and dense), NKV 2, head_dim 10 (NH hd 40
            against C 32) with partial_rotary_factor 0.4 (4 of 10 rotated, as Phi-2), theta
            500, no window; LayerNorm eps 1e-4
  phi_lora  PEFT 0.21's LoRA on phi with PEFT's default targets for phi (q_proj, v_proj,
            fc1, fc2), as phi3_lora
  stablelm_lora  PEFT 0.21's LoRA on stablelm with PEFT's default targets (q_proj, v_proj
            under self_attn, which the tree calls attn), as phi3_lora
  granite   GraniteForCausalLM: embedding_multiplier 1.7, residual_multiplier 0.22,
            attention_multiplier 0.3 (the scores' scale; 1 / sqrt(12) is 0.29), logits_scaling
            2.5, attention biases (q, k, v, o), head_dim 12, tied head, no window
  stablelm  StableLmForCausalLM: LayerNorm blocks, C 64 (head_dim 16) with StableLmConfig's
            default partial_rotary_factor 0.25 (4 of 16 rotated), theta 500, q, k, v biases,
            SwiGLU without biases, untied head; matrices drawn at 0.15
  neox      GPTNeoXForCausalLM: two LayerNorms a block (eps 1e-4), attention and exact-GELU
            MLP side by side, C 64 (heads of 16) with GPTNeoXConfig's default rotary_pct
            0.25 (4 of 16 rotated), rotary_emb_base 500, every bias, untied head
            (embed_out); matrices drawn at 0.15
  neox_serial  GPTNeoXForCausalLM with use_parallel_residual false (the parts one after the
            other), no attention biases, tied head, rotary_pct 0.5, rotary_emb_base 300,
            linear rope scaling by 2
  neox_lora  PEFT 0.21's LoRA on neox with PEFT's default target for gpt_neox
            (query_key_value, whose B's rows go head by head), as phi3_lora
  starcoder2  Starcoder2ForCausalLM: LayerNorm blocks (norm_epsilon 1e-4), a tanh-GELU MLP
            of 48, every bias (use_bias), sliding_window 5 on every layer, head_dim 12 (NH hd
            48 against C 32), theta 500, tied head
  starcoder2_plain  Starcoder2ForCausalLM without biases or a window, an untied head,
            hidden_act gelu_new, linear rope scaling by 2
  neox_fast  GPTNeoXForCausalLM with hidden_act "gelu_fast" (GPT-NeoX-20B's: the tanh GELU),
            C 64, rotary_pct 1, rotary_emb_base 700, untied
  starcoder2_lora  PEFT 0.21's LoRA on starcoder2, all-linear (q, k, v, o_proj, c_fc,
            c_proj; PEFT has no default for starcoder2), as phi3_lora
  bigcode   GPTBigCodeForCausalLM (GPTBigCodeConfig's own keys, not COMMON's): multi_query
            (one key/value head: c_attn's rows q's 32, k's 8, v's 8), learned positions,
            LayerNorm eps 1e-4, a tanh-GELU MLP of n_inner 48, every bias, tied head
  bigcode_mha  GPTBigCodeForCausalLM without multi_query (c_attn's rows head by head), the
            exact GELU ("gelu"), n_inner null (4 C), an untied head
  bigcode_lora  PEFT 0.21's LoRA on bigcode, all-linear (c_attn, the attention's and the
            MLP's c_proj, c_fc), as phi3_lora
  bigcode_mha_lora  PEFT 0.21's LoRA on bigcode_mha with PEFT's default target for
            gpt_bigcode (c_attn, whose B's rows go head by head)
  falcon    FalconForCausalLM (FalconConfig's own keys), Falcon-7B's layout: multi-query
            (query_key_value's rows q's 32, k's 8, v's 8), the attention and the exact-GELU
            MLP side by side on one LayerNorm (eps 1e-4), ffn_hidden_size 48, every bias
            (bias true), rope theta 500, tied head
  falcon_new  FalconForCausalLM, new_decoder_architecture (Falcon-40B's): 2 key/value heads
            of 4 (query_key_value's rows by key/value head: 2 q heads, k, v), two norms a
            block (ln_attn, ln_mlp), no bias, the tanh GELU ("gelu_new"), untied
  falcon_serial  FalconForCausalLM with parallel_attn false (the parts one after the other),
            multi_query false (query_key_value's rows head by head), every bias
  falcon_new_lora  PEFT 0.21's LoRA on falcon_new with PEFT's default target for falcon
            (query_key_value, whose B's rows go key/value head by key/value head)
  phi3_dora  PEFT 0.21's DoRA (use_dora) on phi3, all-linear: lora_magnitude_vector of
            qkv_proj (NH hd + 2 NKV hd) and gate_up_proj (2 hidden) too, as phi3_lora
  neox_dora  PEFT 0.21's DoRA on neox, query_key_value (its magnitudes' rows head by head,
            as B's), as phi3_lora
(The LoRA fixtures' adapter_config.json list target_modules in the order of PEFT's set, which
differs from run to run; the rest regenerates byte-identical.)
Per model NAME:
  NAME/config.json, NAME/model.safetensors   save_pretrained
  NAME.reference.safetensors   tokens, targets (B, T) int32; logits (B, T, V); loss (1);
                               grad.<HF name> of every parameter
  NAME.train.safetensors       train_tokens, train_targets (10, B, T) int32; losses (10):
                               torch.optim.AdamW lr 1e-3, betas (0.9, 0.999), eps 1e-8,
                               weight decay 0; the loss before each update
  NAME.generate.safetensors    prompt (P) int32; greedy (P + N) int32: generate(do_sample
                               False, use_cache True) past the window
"""
import argparse
import hashlib
import json
import os

import torch
import torch.nn.functional as F
from safetensors.torch import save_file
from transformers import (AutoModelForCausalLM, MistralConfig, MistralForCausalLM,
                          Qwen2Config, Qwen2ForCausalLM, SmolLM3Config, SmolLM3ForCausalLM,
                          Olmo2Config, Olmo2ForCausalLM, LlamaConfig, LlamaForCausalLM,
                          Qwen3Config, Qwen3ForCausalLM, Olmo3Config, Olmo3ForCausalLM,
                          Phi3Config, Phi3ForCausalLM, PhiConfig, PhiForCausalLM,
                          GraniteConfig, GraniteForCausalLM, StableLmConfig,
                          StableLmForCausalLM, GPTNeoXConfig, GPTNeoXForCausalLM,
                          Starcoder2Config, Starcoder2ForCausalLM, GPTBigCodeConfig,
                          GPTBigCodeForCausalLM, FalconConfig, FalconForCausalLM)

B, T, STEPS, P, N = 2, 16, 10, 4, 20

COMMON = dict(vocab_size=64, hidden_size=32, intermediate_size=48, num_hidden_layers=2,
              num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
              rms_norm_eps=1e-5, tie_word_embeddings=False, rope_theta=10000.0)
BIGCODE_NO_DROPOUT = dict(resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0)
FALCON_COMMON = dict(vocab_size=64, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                     max_position_embeddings=64, ffn_hidden_size=48, hidden_dropout=0.0,
                     attention_dropout=0.0)
MODELS = {
    "mistral": (MistralConfig, MistralForCausalLM, dict(sliding_window=5)),
    "qwen2": (Qwen2Config, Qwen2ForCausalLM,
              dict(use_sliding_window=True, sliding_window=5, max_window_layers=1)),
    "qwen2_listed": (Qwen2Config, Qwen2ForCausalLM,
                     dict(use_sliding_window=True, sliding_window=5,
                          layer_types=["sliding_attention", "full_attention"])),
    "smollm3": (SmolLM3Config, SmolLM3ForCausalLM,
                dict(no_rope_layers=[0, 1], use_sliding_window=True, sliding_window=5,
                     mlp_bias=True)),
    "smollm3_nope": (SmolLM3Config, SmolLM3ForCausalLM,
                     dict(no_rope_layers=[1, 0], use_sliding_window=False,
                          rope_theta=None)),
    "olmo2": (Olmo2Config, Olmo2ForCausalLM, dict(attention_bias=True, head_dim=12)),
    "llama_yarn": (LlamaConfig, LlamaForCausalLM,
                   dict(head_dim=16, rope_theta=None,
                        rope_parameters={"rope_type": "yarn", "rope_theta": 100.0,
                                         "factor": 4.0,
                                         "original_max_position_embeddings": 64})),
    "qwen3_yarn": (Qwen3Config, Qwen3ForCausalLM,
                   dict(head_dim=12, use_sliding_window=False, rope_theta=None,
                        rope_parameters={"rope_type": "yarn", "rope_theta": 50.0,
                                         "factor": 2.5, "original_max_position_embeddings": 48,
                                         "beta_fast": 4.0, "beta_slow": 0.5,
                                         "truncate": False, "attention_factor": 1.3})),
    "olmo3": (Olmo3Config, Olmo3ForCausalLM,
              dict(num_hidden_layers=4, sliding_window=5, rope_theta=None,
                   rope_parameters={"full_attention": {"rope_type": "yarn", "rope_theta": 1000.0,
                                                       "factor": 2.0,
                                                       "original_max_position_embeddings": 32},
                                    "sliding_attention": {"rope_type": "default",
                                                          "rope_theta": 300.0}})),
    "phi3": (Phi3Config, Phi3ForCausalLM,
             dict(sliding_window=5, head_dim=12, rope_theta=None,
                  rope_parameters={"rope_type": "default", "rope_theta": 500.0,
                                   "partial_rotary_factor": 0.5})),
    "phi3_longrope": (Phi3Config, Phi3ForCausalLM,
                      dict(hidden_size=64, tie_word_embeddings=True, rope_theta=None,
                           _init_scale=0.15,
                           original_max_position_embeddings=10,
                           rope_parameters={"rope_type": "longrope", "rope_theta": 10000.0,
                                            "partial_rotary_factor": 0.75,
                                            "short_factor": [1.0, 1.2, 1.5, 2.0, 3.0, 4.0],
                                            "long_factor": [1.1, 2.0, 4.0, 8.0, 16.0, 24.0]})),
    "phi": (PhiConfig, PhiForCausalLM,
            dict(head_dim=10, layer_norm_eps=1e-4, rope_theta=None, _init_scale=0.15,
                 rope_parameters={"rope_type": "default", "rope_theta": 500.0,
                                  "partial_rotary_factor": 0.4})),
    "granite": (GraniteConfig, GraniteForCausalLM,
                dict(head_dim=12, attention_bias=True, tie_word_embeddings=True,
                     embedding_multiplier=1.7, residual_multiplier=0.22,
                     attention_multiplier=0.3, logits_scaling=2.5)),
    "stablelm": (StableLmConfig, StableLmForCausalLM,
                 dict(hidden_size=64, use_qkv_bias=True, layer_norm_eps=1e-5, rope_theta=None,
                      _init_scale=0.15,
                      rope_parameters={"rope_type": "default", "rope_theta": 500.0})),
    "neox": (GPTNeoXConfig, GPTNeoXForCausalLM,
             dict(hidden_size=64, layer_norm_eps=1e-4, rotary_emb_base=500.0, _init_scale=0.15)),
    "neox_serial": (GPTNeoXConfig, GPTNeoXForCausalLM,
                    dict(hidden_size=64, use_parallel_residual=False, attention_bias=False,
                         tie_word_embeddings=True, rotary_pct=0.5, rotary_emb_base=300.0,
                         rope_scaling={"rope_type": "linear", "factor": 2.0},
                         _init_scale=0.15)),
    "starcoder2": (Starcoder2Config, Starcoder2ForCausalLM,
                   dict(sliding_window=5, head_dim=12, norm_epsilon=1e-4, use_bias=True,
                        tie_word_embeddings=True, rope_theta=None,
                        rope_parameters={"rope_type": "default", "rope_theta": 500.0})),
    "starcoder2_plain": (Starcoder2Config, Starcoder2ForCausalLM,
                         dict(sliding_window=None, use_bias=False, hidden_act="gelu_new",
                              rope_theta=None,
                              rope_parameters={"rope_type": "linear", "rope_theta": 300.0,
                                               "factor": 2.0})),
    "neox_fast": (GPTNeoXConfig, GPTNeoXForCausalLM,
                  dict(hidden_size=64, hidden_act="gelu_fast", rotary_pct=1.0,
                       rotary_emb_base=700.0, _init_scale=0.15)),
    # GPTBigCodeConfig has keys of its own (n_embd, n_head, ...): COMMON is not given to it;
    # its dropouts default to 0.1 (BIGCODE_NO_DROPOUT: none, as the other models)
    "bigcode": (GPTBigCodeConfig, GPTBigCodeForCausalLM,
                dict(_own=True, **BIGCODE_NO_DROPOUT, vocab_size=64, n_positions=64, n_embd=32, n_layer=2, n_head=4,
                     n_inner=48, layer_norm_epsilon=1e-4, multi_query=True,
                     activation_function="gelu_pytorch_tanh", tie_word_embeddings=True)),
    "bigcode_mha": (GPTBigCodeConfig, GPTBigCodeForCausalLM,
                    dict(_own=True, **BIGCODE_NO_DROPOUT, vocab_size=64, n_positions=64,
                         n_embd=32, n_layer=2,
                         n_head=4, n_inner=None, multi_query=False, activation_function="gelu",
                         tie_word_embeddings=False)),
    "falcon": (FalconConfig, FalconForCausalLM,
               dict(_own=True, **FALCON_COMMON, multi_query=True, parallel_attn=True,
                    bias=True, layer_norm_epsilon=1e-4, tie_word_embeddings=True,
                    rope_parameters={"rope_type": "default", "rope_theta": 500.0})),
    "falcon_new": (FalconConfig, FalconForCausalLM,
                   dict(_own=True, **FALCON_COMMON, new_decoder_architecture=True,
                        num_kv_heads=2, parallel_attn=True, bias=False, activation="gelu_new",
                        tie_word_embeddings=False)),
    "falcon_serial": (FalconConfig, FalconForCausalLM,
                      dict(_own=True, **FALCON_COMMON, multi_query=False, parallel_attn=False,
                           bias=True, tie_word_embeddings=True)),
}


def build(name, seed):
    cc, mc, extra = MODELS[name]
    kw = dict(extra) if extra.get("_own") else {**COMMON, **extra}
    kw.pop("_own", None)
    kw = {k: v for k, v in kw.items() if not (k == "rope_theta" and v is None)}
    scale = kw.pop("_init_scale", 0.3)   # of the matrices (C 64 needs less to stay tame)
    cfg = cc(**kw, attn_implementation="eager", bos_token_id=None, eos_token_id=None,
             pad_token_id=None)
    torch.manual_seed(seed)
    model = mc(cfg).float()
    g = torch.Generator().manual_seed(seed + 1)
    with torch.no_grad():
        for pname, p in model.named_parameters():
            if pname.endswith("norm.weight") or "layernorm" in pname or ".ln_" in pname:
                p.copy_(1.0 + 0.1 * torch.randn(p.shape, generator=g))
            elif pname.endswith(".bias"):
                p.copy_(0.1 * torch.randn(p.shape, generator=g))
            else:
                p.copy_(scale * torch.randn(p.shape, generator=g))
    return cfg, model


def loss_of(model, tokens, targets):
    logits = model(input_ids=tokens).logits
    return logits, F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "fixtures",
                                                  "window_tiny"))
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    for i, name in enumerate(MODELS):
        cfg, model = build(name, 3000 + i)
        g = torch.Generator().manual_seed(4000 + i)
        seq = torch.randint(0, cfg.vocab_size, (B, T + 1), generator=g)
        tokens, targets = seq[:, :-1].contiguous(), seq[:, 1:].contiguous()
        path = os.path.join(args.out, name)
        model.save_pretrained(path, safe_serialization=True)
        for f in os.listdir(path):
            if f not in ("config.json", "model.safetensors"):
                os.remove(os.path.join(path, f))
        model.zero_grad()
        logits, loss = loss_of(model, tokens, targets)
        loss.backward()
        ref = {"tokens": tokens.to(torch.int32), "targets": targets.to(torch.int32),
               "logits": logits.detach().contiguous(), "loss": loss.detach().reshape(1)}
        for k, p in model.named_parameters():
            ref["grad." + k] = p.grad.detach().clone().contiguous()
        # the window matters: with one longer than the sequence the logits differ; so do
        # the layers without rope: with rope everywhere the logits differ
        changes = {"sliding_window": 1000} if getattr(cfg, "sliding_window", None) else {}
        if name.startswith("smollm3"):
            changes["no_rope_layers"] = [1] * cfg.num_hidden_layers
        if name.endswith("_yarn"):   # the same without the scaling
            changes["rope_parameters"] = {"rope_type": "default",
                                          "rope_theta": cfg.rope_parameters["rope_theta"]}
        if name.startswith("phi3"):   # the whole vectors rotated; no LongRoPE
            changes["rope_parameters"] = {"rope_type": "default", "rope_theta": 500.0,
                                          "partial_rotary_factor": 1.0}
            if name == "phi3_longrope":
                changes["rope_parameters"].update(partial_rotary_factor=0.75,
                                                  rope_theta=10000.0)
        if name == "granite":   # each multiplier matters
            changes = {"embedding_multiplier": 1.0, "residual_multiplier": 1.0,
                       "attention_multiplier": 1.0, "logits_scaling": 1.0}
        if name == "stablelm":   # the whole vectors rotated
            changes["rope_parameters"] = {"rope_type": "default", "rope_theta": 500.0,
                                          "partial_rotary_factor": 1.0}
        if name == "phi":   # the whole vectors rotated
            changes["rope_parameters"] = {"rope_type": "default", "rope_theta": 500.0,
                                          "partial_rotary_factor": 1.0}
        if name.startswith("neox"):   # the other arrangement of the blocks; the whole vectors
            changes["use_parallel_residual"] = name == "neox_serial"
            changes["rope_parameters"] = {"rope_type": "default", "partial_rotary_factor": 1.0,
                                          "rope_theta": cfg.rope_parameters["rope_theta"]}
        if name == "neox_fast":   # the exact GELU in its place
            changes = {"hidden_act": "gelu"}
        if name == "starcoder2_plain":   # the same without the scaling
            changes["rope_parameters"] = {"rope_type": "default", "rope_theta": 300.0}
        if name.startswith("bigcode"):   # the other GELU in its place
            changes = {"activation_function": "gelu" if name == "bigcode" else "gelu_new"}
        if name.startswith("falcon"):   # the other GELU in its place
            changes = {"activation": "gelu" if name == "falcon_new" else "gelu_new"}
        for key, value in changes.items():
            other = AutoModelForCausalLM.from_pretrained(path, attn_implementation="eager",
                                                         **{key: value})
            with torch.no_grad():
                d = (other(input_ids=tokens).logits - logits).abs().max().item()
            print(f"{name}: logits with {key} {value} differ by {d:.3g}")
            # the two GELUs differ by 4.7e-4 at most (|x| near 2.3): a smaller bar there,
            # still 40x the tests' logits tolerance
            assert d > (2e-4 if key in ("hidden_act", "activation_function", "activation")
                        else 1e-3)
        save_file(ref, os.path.join(args.out, f"{name}.reference.safetensors"))
        train_seq = torch.randint(0, cfg.vocab_size, (STEPS, B, T + 1), generator=g)
        _, m = build(name, 3000 + i)
        opt = torch.optim.AdamW(m.parameters(), lr=1e-3, betas=(0.9, 0.999), eps=1e-8,
                                weight_decay=0.0)
        losses = []
        for s in range(STEPS):
            opt.zero_grad()
            _, l = loss_of(m, train_seq[s, :, :-1], train_seq[s, :, 1:])
            losses.append(l.item())
            l.backward()
            opt.step()
        save_file({"train_tokens": train_seq[..., :-1].contiguous().to(torch.int32),
                   "train_targets": train_seq[..., 1:].contiguous().to(torch.int32),
                   "losses": torch.tensor(losses, dtype=torch.float32)},
                  os.path.join(args.out, f"{name}.train.safetensors"))
        prompt = torch.randint(0, cfg.vocab_size, (1, P), generator=g)
        with torch.no_grad():
            out = model.generate(prompt, max_new_tokens=N, do_sample=False, use_cache=True,
                                 min_new_tokens=N)
        save_file({"prompt": prompt[0].to(torch.int32).contiguous(),
                   "greedy": out[0].to(torch.int32).contiguous()},
                  os.path.join(args.out, f"{name}.generate.safetensors"))
        print(f"{name}: loss {loss.item():.6f}, AdamW {losses[0]:.6f} -> {losses[-1]:.6f}, "
              f"greedy {out[0].tolist()}")
    # LoRA on phi3 (PEFT's all-linear: its fused qkv_proj and gate_up_proj, o_proj,
    # down_proj), made as tests/gen_gemma_fixtures.py makes its LoRA fixtures
    import sys
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import gen_gemma_fixtures
    gen_gemma_fixtures.LORA["phi3_lora"] = ("phi3", dict(target_modules="all-linear"))
    gen_gemma_fixtures.lora_fixture(args.out, "phi3_lora", 5000)
    gen_gemma_fixtures.LORA["phi_lora"] = ("phi", dict())   # PEFT's default targets
    gen_gemma_fixtures.lora_fixture(args.out, "phi_lora", 5001)
    gen_gemma_fixtures.LORA["stablelm_lora"] = ("stablelm", dict())   # PEFT's: q_proj, v_proj
    gen_gemma_fixtures.lora_fixture(args.out, "stablelm_lora", 5002)
    gen_gemma_fixtures.LORA["neox_lora"] = ("neox", dict())   # PEFT's: query_key_value
    gen_gemma_fixtures.lora_fixture(args.out, "neox_lora", 5003)
    gen_gemma_fixtures.LORA["starcoder2_lora"] = ("starcoder2",
                                                  dict(target_modules="all-linear"))
    gen_gemma_fixtures.lora_fixture(args.out, "starcoder2_lora", 5004)
    gen_gemma_fixtures.LORA["bigcode_lora"] = ("bigcode", dict(target_modules="all-linear"))
    gen_gemma_fixtures.lora_fixture(args.out, "bigcode_lora", 5005)
    gen_gemma_fixtures.LORA["bigcode_mha_lora"] = ("bigcode_mha", dict())   # PEFT's: c_attn
    gen_gemma_fixtures.lora_fixture(args.out, "bigcode_mha_lora", 5006)
    gen_gemma_fixtures.LORA["falcon_new_lora"] = ("falcon_new", dict())   # query_key_value
    gen_gemma_fixtures.lora_fixture(args.out, "falcon_new_lora", 5007)
    # DoRA (use_dora): Phi-3's fused modules (each part's magnitudes), GPT-NeoX's
    # query_key_value (its magnitudes' rows head by head, as B's)
    dora_fixtures(args.out, gen_gemma_fixtures)
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


def dora_fixtures(out, gen_gemma_fixtures):
    gen_gemma_fixtures.LORA["phi3_dora"] = ("phi3", dict(target_modules="all-linear",
                                                         use_dora=True))
    gen_gemma_fixtures.lora_fixture(out, "phi3_dora", 5008)
    gen_gemma_fixtures.LORA["neox_dora"] = ("neox", dict(use_dora=True))
    gen_gemma_fixtures.lora_fixture(out, "neox_dora", 5009)


if __name__ == "__main__":
    main()
