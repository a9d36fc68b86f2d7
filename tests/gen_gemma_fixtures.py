#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Generate tests/fixtures/gemma_tiny/: tiny random Gemma 3 and Gemma 2 models and what
transformers computes with them, for tests/test_model_gemma.c.

Not run by CI (it needs PyTorch + transformers); run once and commit the output. No
downloads: random models (fixed seeds), single-threaded, deterministic algorithms, eager
attention.

    /tmp/venv-torch/bin/python tests/gen_gemma_fixtures.py [--out tests/fixtures/gemma_tiny]

Models (V 64, C 32, L 3, T 16, window 5 < T on layers 0 and 2, layer 1 global):
  gemma3  Gemma3ForCausalLM: NH 4, NKV 1 (GQA 4/1), head_dim 12 (not C/NH = 8),
          query_pre_attn_scalar 20 (not head_dim), q/k norms, rope 1000 with linear
          scaling 2 on the global layer and 100 on the local ones, tied head
  gemma2  Gemma2ForCausalLM: NH 4, NKV 2, head_dim 10, query_pre_attn_scalar 12,
          attn_logit_softcapping 2.5, final_logit_softcapping 3.0 (both bite: the scores
          and logits of these weights reach several times the caps), rope 1000, untied head
Every norm weight w is random (0.1 N(0, 1)), so that 1 + w and w differ; the other weights
0.1 N(0, 1) (gemma3: its tied head otherwise repeats one token in generation) or 0.3 N(0, 1).
Per model NAME:
  NAME/config.json, NAME/model.safetensors   save_pretrained
  NAME.reference.safetensors   tokens, targets (B, T) int32; logits (B, T, V); loss (1);
                               grad.<HF name> of every parameter
  NAME.train.safetensors       train_tokens, train_targets (10, B, T) int32; losses (10):
                               torch.optim.AdamW lr 1e-3, betas (0.9, 0.999), eps 1e-8,
                               weight decay 0; the loss before each update
  NAME.generate.safetensors    prompt (P) int32; greedy (P + N) int32: generate(do_sample
                               False) past the window, the same with use_cache True and False
The script checks that each Gemma option matters: the logits change by more than 1e-2
without the window, with norms w instead of 1 + w, without the embedding scale, without the
soft-caps, with the local rope base on every layer.

gemma3mm: a Gemma3ForConditionalGeneration (what google/gemma-3-4b-it and larger are) whose
text_config is gemma3's above with final_logit_softcapping 3.0 (which its forward does not
apply) and tie_word_embeddings false (the top level's true ties the head), and a tiny SigLIP
vision tower (hidden 8, one layer, 14x14 images of 7x7 patches, 4 tokens an image):
  gemma3mm/config.json, gemma3mm/model.safetensors   save_pretrained (the text model under
                               language_model.model., vision_tower., multi_modal_projector.)
  gemma3mm_modules/            the same weights under transformers' module names
                               (model.language_model., model.vision_tower., ...), which
                               transformers loads to the same logits
  gemma3mm.reference.safetensors   tokens, targets (B, T) int32; logits (B, T, V) of the
                               model on text alone; loss (1)
The script checks that on text alone the model's logits are Gemma3ForCausalLM's with the
same weights without the final soft-cap (and differ with it), and that token_type_ids of
zeros change nothing.

LoRA (PEFT 0.21) on the gemma3 and gemma2 models above (r 4, lora_alpha 8, dropout 0;
AdamW lr 1e-2, betas (0.9, 0.999), eps 1e-8, weight decay 0.05 on the adapters, the base
frozen as get_peft_model leaves it, 10 steps):
  gemma3_lora   all-linear (q, k, v, o, gate, up, down of every block)
  gemma2_lora   PEFT's default targets for Gemma 2 (no target_modules: q_proj, v_proj),
                use_rslora (s = 8 / sqrt(4) = 4, not 2)
  CASE/init/, CASE/trained/    save_pretrained before and after the steps
  CASE.reference.safetensors   train_tokens, train_targets (10, B, T) int32; losses (10);
                               tokens (B, T) int32, logits (B, T, V) of the trained
                               adapter; merged_logits of merge_and_unload()

    /tmp/venv-torch/bin/python tests/gen_gemma_fixtures.py --check-saved DIR

loads DIR (what nnt_model_save_hf wrote of gemma3mm: a Gemma3ForCausalLM directory) with
transformers and prints the largest difference of its logits from gemma3mm's reference.
"""
import argparse
import hashlib
import json
import os

import torch
import torch.nn.functional as F
from safetensors.torch import save_file
from safetensors.torch import load_file
from peft import LoraConfig, get_peft_model
from transformers import (AutoModelForCausalLM, Gemma2Config, Gemma2ForCausalLM, Gemma3Config,
                          Gemma3ForCausalLM, Gemma3ForConditionalGeneration, Gemma3TextConfig)

B, T, STEPS, P, N = 2, 16, 10, 4, 20

COMMON = dict(vocab_size=64, hidden_size=32, intermediate_size=48, num_hidden_layers=3,
              num_attention_heads=4, max_position_embeddings=64, rms_norm_eps=1e-5,
              sliding_window=5, attention_dropout=0.0)
MODELS = {
    "gemma3": (Gemma3TextConfig, Gemma3ForCausalLM, 0.1,
               dict(num_key_value_heads=1, head_dim=12, query_pre_attn_scalar=20,
                    sliding_window_pattern=2, tie_word_embeddings=True,
                    rope_parameters={
                        "full_attention": {"rope_type": "linear", "factor": 2.0,
                                           "rope_theta": 1000.0},
                        "sliding_attention": {"rope_type": "default", "rope_theta": 100.0}})),
    "gemma2": (Gemma2Config, Gemma2ForCausalLM, 0.3,
               dict(num_key_value_heads=2, head_dim=10, query_pre_attn_scalar=12,
                    attn_logit_softcapping=2.5, final_logit_softcapping=3.0,
                    tie_word_embeddings=False,
                    rope_parameters={"rope_type": "default", "rope_theta": 1000.0})),
}


def build(name, seed):
    cc, mc, scale, extra = MODELS[name]
    cfg = cc(**COMMON, **extra, attn_implementation="eager", bos_token_id=None,
             eos_token_id=None, pad_token_id=None)
    torch.manual_seed(seed)
    model = mc(cfg).float()
    g = torch.Generator().manual_seed(seed + 1)
    with torch.no_grad():
        for pname, p in model.named_parameters():
            if "norm" in pname:   # Gemma's (1 + w): w near 0
                p.copy_(0.1 * torch.randn(p.shape, generator=g))
            else:
                p.copy_(scale * torch.randn(p.shape, generator=g))
    return cfg, model


def loss_of(model, tokens, targets):
    logits = model(input_ids=tokens).logits
    return logits, F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))


def differs(model, tokens, logits, what, patch, undo):
    """The logits with one option changed (patch(model), then undo(model)) differ."""
    patch(model)
    with torch.no_grad():
        d = (model(input_ids=tokens).logits - logits).abs().max().item()
    undo(model)
    print(f"  without {what}: logits differ by {d:.3g}")
    assert d > 1e-2, what


def check_options(name, path, model, tokens, logits):
    nowin = AutoModelForCausalLM.from_pretrained(path, attn_implementation="eager",
                                                 sliding_window=1000)
    with torch.no_grad():
        d = (nowin(input_ids=tokens).logits - logits).abs().max().item()
    print(f"  without the window: logits differ by {d:.3g}")
    assert d > 1e-2
    norms = [m for m in model.modules() if "RMSNorm" in type(m).__name__]
    saved = [m.weight.detach().clone() for m in norms]

    def w_not_1pw(m):   # forward with w in place of 1 + w: weight w - 1
        with torch.no_grad():
            for n in norms:
                n.weight -= 1.0

    def restore(m):
        with torch.no_grad():
            for n, s in zip(norms, saved):
                n.weight.copy_(s)
    differs(model, tokens, logits, "the 1 + w of the norms", w_not_1pw, restore)
    emb = model.model.embed_tokens
    scale = emb.embed_scale.clone()
    differs(model, tokens, logits, "the embedding scale",
            lambda m: emb.embed_scale.fill_(1.0), lambda m: emb.embed_scale.copy_(scale))
    if name == "gemma2":
        cfg = model.config
        a, f = cfg.attn_logit_softcapping, cfg.final_logit_softcapping
        for layer in model.model.layers:
            assert layer.self_attn.attn_logit_softcapping == a

        def no_attn_cap(m):
            for layer in m.model.layers:
                layer.self_attn.attn_logit_softcapping = None

        def attn_cap(m):
            for layer in m.model.layers:
                layer.self_attn.attn_logit_softcapping = a
        differs(model, tokens, logits, "the score soft-cap", no_attn_cap, attn_cap)

        def no_final(m):
            m.config.final_logit_softcapping = None

        def final(m):
            m.config.final_logit_softcapping = f
        differs(model, tokens, logits, "the logit soft-cap", no_final, final)
    else:
        rot = model.model.rotary_emb
        full = rot.full_attention_inv_freq.clone()
        differs(model, tokens, logits, "the global layer's own rope",
                lambda m: rot.full_attention_inv_freq.copy_(rot.sliding_attention_inv_freq),
                lambda m: rot.full_attention_inv_freq.copy_(full))


def build_mm(seed):
    """The Gemma3ForConditionalGeneration of gemma3mm (weights drawn as build's)."""
    text = dict(COMMON, **MODELS["gemma3"][3])
    text.update(final_logit_softcapping=3.0, tie_word_embeddings=False)
    vision = dict(hidden_size=8, intermediate_size=8, num_hidden_layers=1,
                  num_attention_heads=1, image_size=14, patch_size=7)
    cfg = Gemma3Config(text_config=text, vision_config=vision, mm_tokens_per_image=4,
                       boi_token_index=60, eoi_token_index=61, image_token_index=62,
                       tie_word_embeddings=True, attn_implementation="eager")
    torch.manual_seed(seed)
    model = Gemma3ForConditionalGeneration(cfg).float()
    g = torch.Generator().manual_seed(seed + 1)
    with torch.no_grad():
        for pname, p in model.named_parameters():
            p.copy_(0.1 * torch.randn(p.shape, generator=g))
    assert model.lm_head.weight is model.model.language_model.embed_tokens.weight
    return model.eval()


def as_causal_lm(mm, softcap):
    """Gemma3ForCausalLM with the text weights of mm and final_logit_softcapping softcap."""
    cfg = Gemma3TextConfig(**dict(mm.config.text_config.to_dict(),
                                  final_logit_softcapping=softcap, tie_word_embeddings=True))
    cfg._attn_implementation = "eager"
    lm = Gemma3ForCausalLM(cfg).float().eval()
    state = {"model." + k: v for k, v in mm.model.language_model.state_dict().items()}
    missing = lm.load_state_dict(state, strict=False).missing_keys
    assert missing in ([], ["lm_head.weight"]), missing
    lm.tie_weights()
    return lm


def mm_fixture(out):
    name = "gemma3mm"
    model = build_mm(5100)
    g = torch.Generator().manual_seed(6100)
    seq = torch.randint(0, 64, (B, T + 1), generator=g)
    tokens, targets = seq[:, :-1].contiguous(), seq[:, 1:].contiguous()
    path = os.path.join(out, name)
    model.save_pretrained(path, safe_serialization=True)
    for f in os.listdir(path):
        if f not in ("config.json", "model.safetensors"):
            os.remove(os.path.join(path, f))
    back = Gemma3ForConditionalGeneration.from_pretrained(path, attn_implementation="eager")
    with torch.no_grad():
        logits, loss = loss_of(back, tokens, targets)
        zeros = back(input_ids=tokens, token_type_ids=torch.zeros_like(tokens)).logits
        plain = as_causal_lm(back, None)(input_ids=tokens).logits
        capped = as_causal_lm(back, 3.0)(input_ids=tokens).logits
    d0 = (zeros - logits).abs().max().item()
    d1 = (plain - logits).abs().max().item()
    d2 = (capped - logits).abs().max().item()
    print(f"{name}: token_type_ids of zeros change the logits by {d0:.3g}; Gemma3ForCausalLM "
          f"without the final soft-cap differs by {d1:.3g}, with it by {d2:.3g}")
    assert d0 == 0.0 and d1 < 1e-5 and d2 > 1e-2
    # the same weights under transformers' module names
    modules = os.path.join(out, name + "_modules")
    os.makedirs(modules, exist_ok=True)
    state = load_file(os.path.join(path, "model.safetensors"))
    renamed = {}
    for k, v in state.items():
        if k.startswith("language_model.model."):
            renamed["model.language_model." + k[len("language_model.model."):]] = v
        else:
            assert k.startswith(("vision_tower.", "multi_modal_projector.")), k
            renamed["model." + k] = v
    save_file(renamed, os.path.join(modules, "model.safetensors"), metadata={"format": "pt"})
    with open(os.path.join(path, "config.json")) as src, \
            open(os.path.join(modules, "config.json"), "w") as dst:
        dst.write(src.read())
    again = Gemma3ForConditionalGeneration.from_pretrained(modules, attn_implementation="eager")
    with torch.no_grad():
        d3 = (again(input_ids=tokens).logits - logits).abs().max().item()
    print(f"{name}_modules: logits differ by {d3:.3g}")
    assert d3 == 0.0
    save_file({"tokens": tokens.to(torch.int32), "targets": targets.to(torch.int32),
               "logits": logits.contiguous(), "loss": loss.reshape(1)},
              os.path.join(out, f"{name}.reference.safetensors"))
    print(f"{name}: loss {loss.item():.6f}")


LORA = {
    "gemma3_lora": ("gemma3", dict(target_modules="all-linear")),
    "gemma2_lora": ("gemma2", dict(use_rslora=True)),
}


def lora_fixture(out, name, seed):
    base, extra = LORA[name]
    model = AutoModelForCausalLM.from_pretrained(os.path.join(out, base),
                                                 attn_implementation="eager").float()
    model.eval()
    model.name_or_path = model.config._name_or_path = base   # not this machine's path
    g = torch.Generator().manual_seed(seed)
    tokens = torch.randint(0, 64, (B, T), generator=g)
    seq = torch.randint(0, 64, (STEPS, B, T + 1), generator=g)
    torch.manual_seed(seed)
    cfg = LoraConfig(r=4, lora_alpha=8, lora_dropout=0.0, bias="none", task_type="CAUSAL_LM",
                     **extra)
    peft = get_peft_model(model, cfg)
    peft.eval()
    print(f"{name}: targets {sorted(peft.peft_config['default'].target_modules)}")

    def save(path):
        peft.save_pretrained(path)
        readme = os.path.join(path, "README.md")
        if os.path.exists(readme):
            os.remove(readme)
    save(os.path.join(out, name, "init"))
    opt = torch.optim.AdamW([p for p in peft.parameters() if p.requires_grad], lr=1e-2,
                            betas=(0.9, 0.999), eps=1e-8, weight_decay=0.05)
    losses = []
    for s in range(STEPS):
        opt.zero_grad()
        _, loss = loss_of(peft, seq[s, :, :-1], seq[s, :, 1:])
        loss.backward()
        opt.step()
        losses.append(loss.item())
    save(os.path.join(out, name, "trained"))
    with torch.no_grad():
        plain = peft.get_base_model()
        logits = peft(input_ids=tokens).logits
        with peft.disable_adapter():
            base_logits = plain(input_ids=tokens).logits
        merged = peft.merge_and_unload()(input_ids=tokens).logits
    moved = (logits - base_logits).abs().max().item()
    print(f"{name}: losses {losses[0]:.5f} -> {losses[-1]:.5f}; the trained adapter moves "
          f"the logits by {moved:.3g}; merged differ by {(merged - logits).abs().max():.3g}")
    assert moved > 1e-2
    save_file({"train_tokens": seq[..., :-1].contiguous().to(torch.int32),
               "train_targets": seq[..., 1:].contiguous().to(torch.int32),
               "losses": torch.tensor(losses, dtype=torch.float32),
               "tokens": tokens.to(torch.int32), "logits": logits.contiguous(),
               "merged_logits": merged.contiguous()},
              os.path.join(out, f"{name}.reference.safetensors"))


def check_saved(path, out):
    """What nnt saved of gemma3mm, loaded by transformers: its logits against the reference."""
    ref = load_file(os.path.join(out, "gemma3mm.reference.safetensors"))
    with open(os.path.join(path, "config.json")) as f:
        print("architectures", json.load(f)["architectures"])
    model = AutoModelForCausalLM.from_pretrained(path, attn_implementation="eager").float()
    print(type(model).__name__)
    with torch.no_grad():
        logits = model(input_ids=ref["tokens"].long()).logits
    rel = ((logits - ref["logits"]).abs().max() / ref["logits"].abs().max()).item()
    print(f"{path}: logits differ from gemma3mm's by {rel:.3g} of their largest")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "fixtures",
                                                  "gemma_tiny"))
    ap.add_argument("--check-saved", metavar="DIR")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    if args.check_saved:
        check_saved(args.check_saved, args.out)
        return
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
        model.zero_grad()
        logits, loss = loss_of(model, tokens, targets)
        loss.backward()
        ref = {"tokens": tokens.to(torch.int32), "targets": targets.to(torch.int32),
               "logits": logits.detach().contiguous(), "loss": loss.detach().reshape(1)}
        for k, p in model.named_parameters():
            ref["grad." + k] = p.grad.detach().clone().contiguous()
        print(f"{name}: layer_types {cfg.layer_types}")
        check_options(name, path, model, tokens, logits.detach())
        save_file(ref, os.path.join(args.out, f"{name}.reference.safetensors"))
        train_seq = torch.randint(0, cfg.vocab_size, (STEPS, B, T + 1), generator=g)
        _, m = build(name, 5000 + i)
        opt = torch.optim.AdamW(m.parameters(), lr=1e-3, betas=(0.9, 0.999), eps=1e-8,
                                weight_decay=0.0)
        losses = []
        for s in range(STEPS):
            opt.zero_grad()
            _, lo = loss_of(m, train_seq[s, :, :-1], train_seq[s, :, 1:])
            losses.append(lo.item())
            lo.backward()
            opt.step()
        save_file({"train_tokens": train_seq[..., :-1].contiguous().to(torch.int32),
                   "train_targets": train_seq[..., 1:].contiguous().to(torch.int32),
                   "losses": torch.tensor(losses, dtype=torch.float32)},
                  os.path.join(args.out, f"{name}.train.safetensors"))
        prompt = torch.randint(0, cfg.vocab_size, (1, P), generator=g)
        with torch.no_grad():
            out = model.generate(prompt, max_new_tokens=N, do_sample=False, use_cache=True,
                                 min_new_tokens=N)
            out2 = model.generate(prompt, max_new_tokens=N, do_sample=False, use_cache=False,
                                  min_new_tokens=N)
        assert out.tolist() == out2.tolist()
        save_file({"prompt": prompt[0].to(torch.int32).contiguous(),
                   "greedy": out[0].to(torch.int32).contiguous()},
                  os.path.join(args.out, f"{name}.generate.safetensors"))
        print(f"{name}: loss {loss.item():.6f}, AdamW {losses[0]:.6f} -> {losses[-1]:.6f}, "
              f"greedy {out[0].tolist()}")
    mm_fixture(args.out)
    for i, name in enumerate(LORA):
        lora_fixture(args.out, name, 7000 + i)
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
