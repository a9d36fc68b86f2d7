#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Generate the GPT-2 reference fixtures used by nnt's C tests.

CI cannot run PyTorch, so this script is run once by hand and its output is
committed under tests/fixtures/gpt2_tiny/.  tests/fixtures/README documents
every file, the exact versions used, and the command line.

What it does
------------
1. Builds a tiny GPT2LMHeadModel (Hugging Face transformers), float32, CPU:
       GPT2Config(vocab_size=67, n_positions=16, n_embd=24, n_layer=2,
                  n_head=3, activation_function="gelu_new", resid_pdrop=0,
                  embd_pdrop=0, attn_pdrop=0, layer_norm_epsilon=1e-5)
   head dim 8, lm_head tied to transformer.wte, eager attention.
   torch.manual_seed(1234) precedes construction; afterwards EVERY parameter
   is overwritten from a dedicated generator (seed 1234, parameters visited
   in sorted-name order) so that biases and LayerNorm affines are not the
   trivial 0/1 of HF's default init and the weights do not depend on HF's
   init code:
       LayerNorm weight      1 + 0.1 * N(0,1)
       every bias            0.1 * N(0,1)       (LayerNorm biases included)
       wte, wpe              0.2 * N(0,1)
       Conv1D weight (in,out) N(0,1) / sqrt(in)
2. Writes the weights as model.safetensors + config.json (save_pretrained)
   and as an llm.c checkpoint gpt2_tiny.llmc.bin (magic 20240326, version 3,
   fp32, vocab padded to Vp=72 with zero rows).
3. One forward/backward on a fixed (B=2, T=12) batch with
   loss = F.cross_entropy(logits.view(-1, V), targets.view(-1)) (mean over
   all B*T positions, targets given explicitly, no HF label shifting).
   Saves tokens, targets, logits, loss, activations and every parameter
   gradient -> reference.safetensors (+ llm.c debug-state file
   gpt2_tiny.llmc_debug_state.bin with the same data).
4. Two 10-step AdamW runs (weight_decay 0.0, and 0.1 on >=2-D params only)
   from the same initial weights on a fixed sequence of 10 batches ->
   train.safetensors + train.json.
5. Self-checks: reloads model.safetensors with from_pretrained and an
   independent numpy forward pass over gpt2_tiny.llmc.bin must both reproduce
   the logits.
6. Greedy generation with HF's model.generate (initial weights, B=1): 8 new
   tokens after a fixed 5-token prompt, no eos/pad/bos token (nothing stops
   early) -> generate.safetensors.  Checks that a forward without the KV
   cache gives the same argmax at every step and prints the smallest top-2
   logit margin.  Writes SHA256SUMS and prints a summary.

Usage
-----
    python3 tests/gen_fixtures.py [--out DIR]     # default tests/fixtures/gpt2_tiny

Deterministic: single thread, torch.use_deterministic_algorithms(True), fixed
seeds; two runs on the same machine give byte-identical files.
"""

import argparse
import hashlib
import inspect
import json
import math
import os
import platform
import struct
import sys

import numpy as np
import torch
import torch.nn.functional as F

import safetensors
import transformers
from safetensors.torch import save_file
from transformers import GPT2Config, GPT2LMHeadModel

# ---------------------------------------------------------------- constants
VOCAB = 67
VOCAB_PADDED = 72          # llm.c Vp (rows 67..71 of wte are zero)
MAX_T = 16
N_EMBD = 24
N_LAYER = 2
N_HEAD = 3
LN_EPS = 1e-5

B = 2
T = 12

MODEL_SEED = 1234          # torch.manual_seed before construction + re-init generator
REF_DATA_SEED = 4321       # reference batch
TRAIN_DATA_SEED = 8765     # training batches
TRAIN_STEPS = 10
GEN_PROMPT = [11, 42, 7, 3, 60]   # generation reference: fixed prompt, B=1
GEN_NEW = 8                # max_new_tokens; prompt + 8 = 13 <= MAX_T
LR = 1e-3
BETAS = (0.9, 0.999)
ADAM_EPS = 1e-8
WD = 0.1

LLMC_MODEL_MAGIC = 20240326
LLMC_MODEL_VERSION = 3     # fp32, padded vocab
LLMC_STATE_MAGIC = 20240327
LLMC_STATE_VERSION = 2     # padded-vocab grads


def make_config():
    return GPT2Config(
        vocab_size=VOCAB,
        n_positions=MAX_T,
        n_embd=N_EMBD,
        n_layer=N_LAYER,
        n_head=N_HEAD,
        activation_function="gelu_new",
        resid_pdrop=0.0,
        embd_pdrop=0.0,
        attn_pdrop=0.0,
        layer_norm_epsilon=LN_EPS,
    )


def build_model():
    cfg = make_config()
    cfg._attn_implementation = "eager"
    torch.manual_seed(MODEL_SEED)
    model = GPT2LMHeadModel(cfg).float()
    model.config._attn_implementation = "eager"
    assert model.lm_head.weight is model.transformer.wte.weight, "lm_head not tied"
    g = torch.Generator().manual_seed(MODEL_SEED)
    params = dict(model.named_parameters())  # deduplicated: no lm_head.weight
    with torch.no_grad():
        for name in sorted(params):
            p = params[name]
            if ".ln_" in name and name.endswith(".weight"):
                p.copy_(1.0 + 0.1 * torch.randn(p.shape, generator=g))
            elif name.endswith(".bias"):
                p.copy_(0.1 * torch.randn(p.shape, generator=g))
            elif name in ("transformer.wte.weight", "transformer.wpe.weight"):
                p.copy_(0.2 * torch.randn(p.shape, generator=g))
            else:
                assert p.dim() == 2, name
                p.copy_(torch.randn(p.shape, generator=g) / math.sqrt(p.shape[0]))
    model.eval()  # dropout off (all p are 0 anyway); gradients stay enabled
    return model


def hf_param_names(L):
    """HF parameter names in a fixed, documented order."""
    names = ["transformer.wte.weight", "transformer.wpe.weight"]
    for l in range(L):
        h = f"transformer.h.{l}."
        names += [h + "ln_1.weight", h + "ln_1.bias",
                  h + "attn.c_attn.weight", h + "attn.c_attn.bias",
                  h + "attn.c_proj.weight", h + "attn.c_proj.bias",
                  h + "ln_2.weight", h + "ln_2.bias",
                  h + "mlp.c_fc.weight", h + "mlp.c_fc.bias",
                  h + "mlp.c_proj.weight", h + "mlp.c_proj.bias"]
    names += ["transformer.ln_f.weight", "transformer.ln_f.bias"]
    return names


# ------------------------------------------------------------ llm.c layout
LLMC_TENSORS = [
    # (llm.c name, HF suffix or full name, per-layer?, transpose Conv1D?)
    ("wte", "transformer.wte.weight", False, False),
    ("wpe", "transformer.wpe.weight", False, False),
    ("ln1w", "ln_1.weight", True, False),
    ("ln1b", "ln_1.bias", True, False),
    ("qkvw", "attn.c_attn.weight", True, True),
    ("qkvb", "attn.c_attn.bias", True, False),
    ("attprojw", "attn.c_proj.weight", True, True),
    ("attprojb", "attn.c_proj.bias", True, False),
    ("ln2w", "ln_2.weight", True, False),
    ("ln2b", "ln_2.bias", True, False),
    ("fcw", "mlp.c_fc.weight", True, True),
    ("fcb", "mlp.c_fc.bias", True, False),
    ("fcprojw", "mlp.c_proj.weight", True, True),
    ("fcprojb", "mlp.c_proj.bias", True, False),
    ("lnfw", "transformer.ln_f.weight", False, False),
    ("lnfb", "transformer.ln_f.bias", False, False),
]


def llmc_flat(tensors, L, Vp):
    """Concatenate HF-named tensors (params or grads) in llm.c order, fp32."""
    out = []
    for _, hf, per_layer, transpose in LLMC_TENSORS:
        names = [f"transformer.h.{l}.{hf}" for l in range(L)] if per_layer else [hf]
        for n in names:
            t = tensors[n].detach().to(torch.float32).cpu()
            if transpose:            # HF Conv1D (in, out) -> llm.c (out, in)
                t = t.t()
            if n == "transformer.wte.weight":
                pad = torch.zeros(Vp - t.shape[0], t.shape[1], dtype=torch.float32)
                t = torch.cat([t, pad], 0)
            out.append(t.contiguous().numpy().reshape(-1))
    return np.concatenate(out).astype("<f4")


def llmc_sizes(V, Vp, maxT, L, C):
    return {"wte": Vp * C, "wpe": maxT * C, "ln1w": L * C, "ln1b": L * C,
            "qkvw": L * 3 * C * C, "qkvb": L * 3 * C, "attprojw": L * C * C,
            "attprojb": L * C, "ln2w": L * C, "ln2b": L * C,
            "fcw": L * 4 * C * C, "fcb": L * 4 * C, "fcprojw": L * C * 4 * C,
            "fcprojb": L * C, "lnfw": C, "lnfb": C}


def write_llmc_model(path, params):
    header = np.zeros(256, dtype="<i4")
    header[:8] = [LLMC_MODEL_MAGIC, LLMC_MODEL_VERSION, MAX_T, VOCAB, N_LAYER,
                  N_HEAD, N_EMBD, VOCAB_PADDED]
    flat = llmc_flat(params, N_LAYER, VOCAB_PADDED)
    assert flat.size == sum(llmc_sizes(VOCAB, VOCAB_PADDED, MAX_T, N_LAYER, N_EMBD).values())
    with open(path, "wb") as f:
        f.write(header.tobytes())
        f.write(flat.tobytes())
    return flat.size


def write_llmc_state(path, tokens, targets, logits, loss, grads):
    header = np.zeros(256, dtype="<i4")
    header[:4] = [LLMC_STATE_MAGIC, LLMC_STATE_VERSION, tokens.shape[0], tokens.shape[1]]
    with open(path, "wb") as f:
        f.write(header.tobytes())
        f.write(tokens.numpy().astype("<i4").tobytes())
        f.write(targets.numpy().astype("<i4").tobytes())
        f.write(logits.detach().numpy().astype("<f4").tobytes())   # (B,T,V), unpadded
        f.write(np.asarray([loss.item()], dtype="<f4").tobytes())
        f.write(llmc_flat(grads, N_LAYER, VOCAB_PADDED).tobytes())


def numpy_forward_from_llmc(path, tokens):
    """Independent float64 forward pass over the llm.c checkpoint (self-check)."""
    with open(path, "rb") as f:
        hdr = np.frombuffer(f.read(1024), dtype="<i4")
        data = np.frombuffer(f.read(), dtype="<f4").astype(np.float64)
    assert hdr[0] == LLMC_MODEL_MAGIC and hdr[1] == LLMC_MODEL_VERSION
    maxT, V, L, NH, C, Vp = (int(x) for x in hdr[2:8])
    sizes = llmc_sizes(V, Vp, maxT, L, C)
    p, off = {}, 0
    for name, _, _, _ in LLMC_TENSORS:
        p[name] = data[off:off + sizes[name]]
        off += sizes[name]
    assert off == data.size
    wte = p["wte"].reshape(Vp, C)
    assert not wte[V:].any(), "padding rows must be zero"
    wpe = p["wpe"].reshape(maxT, C)

    def ln(x, w, b):
        m = x.mean(-1, keepdims=True)
        v = ((x - m) ** 2).mean(-1, keepdims=True)
        return (x - m) / np.sqrt(v + LN_EPS) * w + b

    def gelu(x):
        return 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)))

    Bn, Tn = tokens.shape
    hs = C // NH
    x = wte[tokens] + wpe[:Tn]
    mask = np.tril(np.ones((Tn, Tn), bool))
    for l in range(L):
        g = lambda n, *shape: p[n].reshape(L, *shape)[l]
        h = ln(x, g("ln1w", C), g("ln1b", C))
        qkv = h @ g("qkvw", 3 * C, C).T + g("qkvb", 3 * C)
        q, k, v = (qkv[..., i * C:(i + 1) * C].reshape(Bn, Tn, NH, hs).transpose(0, 2, 1, 3)
                   for i in range(3))
        s = q @ k.transpose(0, 1, 3, 2) / math.sqrt(hs)
        s = np.where(mask, s, -np.inf)
        s = np.exp(s - s.max(-1, keepdims=True))
        a = s / s.sum(-1, keepdims=True)
        y = (a @ v).transpose(0, 2, 1, 3).reshape(Bn, Tn, C)
        x = x + y @ g("attprojw", C, C).T + g("attprojb", C)
        h = ln(x, g("ln2w", C), g("ln2b", C))
        h = gelu(h @ g("fcw", 4 * C, C).T + g("fcb", 4 * C))
        x = x + h @ g("fcprojw", C, 4 * C).T + g("fcprojb", C)
    x = ln(x, p["lnfw"], p["lnfb"])
    return (x @ wte.T)[..., :V]


# ------------------------------------------------------------- activations
def attach_hooks(model, acts):
    hooks = []

    def save(name, fn):
        def hook(mod, inp, out):
            acts[name] = fn(inp, out).detach().clone()
        return hook

    tr = model.transformer
    hooks.append(tr.drop.register_forward_hook(save("act.encoded", lambda i, o: o)))
    for l, blk in enumerate(tr.h):
        pre = f"act.h{l}."
        hooks += [
            blk.ln_1.register_forward_hook(save(pre + "ln1", lambda i, o: o)),
            blk.attn.c_attn.register_forward_hook(save(pre + "qkv", lambda i, o: o)),
            blk.attn.register_forward_hook(save(pre + "att", lambda i, o: o[1])),
            blk.attn.c_proj.register_forward_hook(save(pre + "atty", lambda i, o: i[0])),
            blk.attn.c_proj.register_forward_hook(save(pre + "attproj", lambda i, o: o)),
            blk.ln_2.register_forward_hook(save(pre + "residual2", lambda i, o: i[0])),
            blk.ln_2.register_forward_hook(save(pre + "ln2", lambda i, o: o)),
            blk.mlp.c_fc.register_forward_hook(save(pre + "fch", lambda i, o: o)),
            blk.mlp.act.register_forward_hook(save(pre + "fch_gelu", lambda i, o: o)),
            blk.mlp.c_proj.register_forward_hook(save(pre + "fcproj", lambda i, o: o)),
            blk.register_forward_hook(save(pre + "residual3",
                                           lambda i, o: o[0] if isinstance(o, tuple) else o)),
        ]
    hooks.append(tr.ln_f.register_forward_hook(save("act.lnf", lambda i, o: o)))
    return hooks


def ln_stats(x):
    """mean and rstd (biased variance, eps inside sqrt) over the last axis, as llm.c stores."""
    m = x.mean(-1)
    v = ((x - m.unsqueeze(-1)) ** 2).mean(-1)
    return m, 1.0 / torch.sqrt(v + LN_EPS)


# -------------------------------------------------------------------- data
def ref_batch():
    g = torch.Generator().manual_seed(REF_DATA_SEED)
    seq = torch.randint(0, VOCAB, (B, T + 1), generator=g, dtype=torch.int64)
    return seq[:, :T].contiguous(), seq[:, 1:].contiguous()


def train_batches():
    """10 batches from a noisy affine Markov chain x' = (3x + 1 + e) mod V, e in {0,1}."""
    g = torch.Generator().manual_seed(TRAIN_DATA_SEED)
    seq = torch.empty(TRAIN_STEPS, B, T + 1, dtype=torch.int64)
    seq[:, :, 0] = torch.randint(0, VOCAB, (TRAIN_STEPS, B), generator=g)
    noise = torch.randint(0, 2, (TRAIN_STEPS, B, T), generator=g)
    for t in range(T):
        seq[:, :, t + 1] = (3 * seq[:, :, t] + 1 + noise[:, :, t]) % VOCAB
    return seq[:, :, :T].contiguous(), seq[:, :, 1:].contiguous()


def forward_loss(model, tokens, targets):
    logits = model(input_ids=tokens, use_cache=False).logits
    loss = F.cross_entropy(logits.view(-1, VOCAB), targets.view(-1))
    return logits, loss


# -------------------------------------------------------------- training
def train_run(init_state, weight_decay, tokens, targets):
    model = build_model()
    model.load_state_dict(init_state)
    named = dict(model.named_parameters())
    if weight_decay == 0.0:
        groups = [{"params": list(named.values()), "weight_decay": 0.0}]
    else:
        groups = [
            {"params": [p for p in named.values() if p.dim() >= 2], "weight_decay": weight_decay},
            {"params": [p for p in named.values() if p.dim() < 2], "weight_decay": 0.0},
        ]
    opt = torch.optim.AdamW(groups, lr=LR, betas=BETAS, eps=ADAM_EPS,
                            weight_decay=weight_decay, amsgrad=False,
                            foreach=False, fused=False)
    losses = []
    for step in range(TRAIN_STEPS):
        opt.zero_grad(set_to_none=True)
        _, loss = forward_loss(model, tokens[step], targets[step])
        losses.append(loss.item())
        loss.backward()
        opt.step()
    # NB: the key bias c_attn.bias[C:2C] has a mathematically zero gradient;
    # Adam turns its rounding noise into ~lr steps, so its final values are
    # noise (tests/fixtures/README says to exclude it from comparisons).
    final = {n: p.detach().clone() for n, p in model.named_parameters()}
    return torch.tensor(losses, dtype=torch.float32), final


# -------------------------------------------------------------- generation
def generate_reference(init_state):
    """Greedy decoding with HF generate from the initial weights (own model copy).

    Returns the tensors of generate.safetensors, its metadata string and the
    smallest top-2 margin of the step logits."""
    from transformers import GenerationConfig
    model = build_model()
    model.load_state_dict(init_state)
    prompt = torch.tensor([GEN_PROMPT], dtype=torch.int64)
    gcfg = GenerationConfig(max_new_tokens=GEN_NEW, do_sample=False, eos_token_id=None,
                            pad_token_id=None, bos_token_id=None, use_cache=True,
                            output_scores=True, return_dict_in_generate=True)
    with torch.no_grad():
        out = model.generate(prompt, attention_mask=torch.ones_like(prompt),
                             generation_config=gcfg)
        seq = out.sequences                                   # (1, P + GEN_NEW)
        scores = torch.stack(out.scores, 1)[0].float()        # (GEN_NEW, V)
        full = model(input_ids=seq[:, :-1], use_cache=False).logits[0, len(GEN_PROMPT) - 1:]
    P = len(GEN_PROMPT)
    assert seq.shape == (1, P + GEN_NEW), seq.shape           # nothing stopped early
    assert seq[0, :P].tolist() == GEN_PROMPT
    assert torch.equal(scores.argmax(-1), seq[0, P:]), "scores do not give the tokens"
    assert torch.equal(full.argmax(-1), seq[0, P:]), "cache-free forward disagrees"
    cache_err = float((full - scores).abs().max())
    assert cache_err < 1e-5, cache_err
    top2 = scores.topk(2, -1).values
    margin = float((top2[:, 0] - top2[:, 1]).min())
    assert margin > 1e-3, f"greedy step too close to a tie: {margin}"
    tensors = {
        "prompt": seq[0, :P].to(torch.int32).contiguous(),
        "tokens": seq[0].to(torch.int32).contiguous(),
        "scores": scores.contiguous(),
    }
    info = {
        "description": "nnt GPT-2 tiny greedy generation reference (tests/gen_fixtures.py)",
        "call": ("model.generate(prompt, attention_mask=ones, GenerationConfig("
                 f"max_new_tokens={GEN_NEW}, do_sample=False, eos_token_id=None, "
                 "pad_token_id=None, bos_token_id=None, use_cache=True))"),
        "weights": "initial (model.safetensors)", "B": "1", "prompt_len": str(P),
        "new_tokens": str(GEN_NEW),
    }
    return tensors, json.dumps(info, sort_keys=True), margin, cache_err


# ------------------------------------------------------------------ main
def sha256(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default="tests/fixtures/gpt2_tiny",
                    help="output directory (default: %(default)s)")
    args = ap.parse_args()
    out = args.out
    os.makedirs(out, exist_ok=True)

    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)

    model = build_model()
    L, C, V = N_LAYER, N_EMBD, VOCAB
    init_state = {k: v.detach().clone() for k, v in model.state_dict().items()}
    params = dict(model.named_parameters())
    names = hf_param_names(L)
    assert sorted(names) == sorted(params), (sorted(params), names)

    # ---- 2. weights
    sp_kwargs = {}
    if "safe_serialization" in inspect.signature(model.save_pretrained).parameters:
        sp_kwargs["safe_serialization"] = True   # transformers < 5; v5 always writes safetensors
    model.save_pretrained(out, **sp_kwargs)
    gen_cfg = os.path.join(out, "generation_config.json")
    if os.path.exists(gen_cfg):
        os.remove(gen_cfg)      # irrelevant for the C side
    llmc_path = os.path.join(out, "gpt2_tiny.llmc.bin")
    nparams = write_llmc_model(llmc_path, params)

    # ---- 3. reference forward/backward
    tokens, targets = ref_batch()
    acts = {}
    hooks = attach_hooks(model, acts)
    model.zero_grad(set_to_none=True)
    logits, loss = forward_loss(model, tokens, targets)
    logits.retain_grad()
    loss.backward()
    for h in hooks:
        h.remove()
    for l in range(L):
        m, r = ln_stats(acts["act.encoded"] if l == 0 else acts[f"act.h{l-1}.residual3"])
        acts[f"act.h{l}.ln1_mean"], acts[f"act.h{l}.ln1_rstd"] = m, r
        m, r = ln_stats(acts[f"act.h{l}.residual2"])
        acts[f"act.h{l}.ln2_mean"], acts[f"act.h{l}.ln2_rstd"] = m, r
    m, r = ln_stats(acts[f"act.h{L-1}.residual3"])
    acts["act.lnf_mean"], acts["act.lnf_rstd"] = m, r
    grads = {n: params[n].grad.detach().clone() for n in names}

    ref = {
        "tokens": tokens.to(torch.int32),
        "targets": targets.to(torch.int32),
        "logits": logits.detach().clone(),
        "loss": loss.detach().reshape(1).clone(),
        "act_grad.logits": logits.grad.detach().clone(),
    }
    ref.update({k: v.contiguous() for k, v in acts.items()})
    ref.update({"grad." + n: g.contiguous() for n, g in grads.items()})
    for k, v in ref.items():
        assert v.dtype in (torch.float32, torch.int32), (k, v.dtype)
    ref_meta = {
        "description": "nnt GPT-2 tiny reference forward/backward (tests/gen_fixtures.py)",
        "loss": "mean F.cross_entropy(logits.view(-1,V), targets.view(-1)) over all B*T positions",
        "B": str(B), "T": str(T), "V": str(V), "C": str(C), "L": str(L), "NH": str(N_HEAD),
    }
    # one metadata key only: safetensors stores __metadata__ in a hash map whose
    # iteration order changes from run to run, which breaks byte reproducibility
    save_file(ref, os.path.join(out, "reference.safetensors"),
              metadata={"info": json.dumps(ref_meta, sort_keys=True)})
    write_llmc_state(os.path.join(out, "gpt2_tiny.llmc_debug_state.bin"),
                     tokens, targets, logits, loss, grads)

    # ---- 4. training reference
    tr_tokens, tr_targets = train_batches()
    losses_wd0, final_wd0 = train_run(init_state, 0.0, tr_tokens, tr_targets)
    losses_wd01, final_wd01 = train_run(init_state, WD, tr_tokens, tr_targets)
    decay_names = [n for n in names if params[n].dim() >= 2]
    hyper = {
        "optimizer": "torch.optim.AdamW (foreach=False, fused=False, amsgrad=False, maximize=False)",
        "lr": LR, "betas": list(BETAS), "eps": ADAM_EPS, "steps": TRAIN_STEPS,
        "schedule": "constant lr, no warmup, no gradient clipping, no grad accumulation",
        "update": ("t=step (1-based); m=b1*m+(1-b1)*g; v=b2*v+(1-b2)*g^2; "
                   "p = p*(1-lr*wd); p = p - (lr/(1-b1^t)) * m / (sqrt(v)/sqrt(1-b2^t) + eps)"),
        "step_protocol": ("for i in 0..9: zero_grad; loss_i = CE(model(train_tokens[i]), "
                          "train_targets[i]) (recorded BEFORE the update); backward; step"),
        "runs": {
            "wd0": {"weight_decay": 0.0, "param_groups": "single group, all parameters, wd=0"},
            "wd01": {"weight_decay": WD,
                     "param_groups": "wd=0.1 for every parameter with dim>=2, wd=0 for dim<2 "
                                     "(biases, LayerNorm weights/biases)",
                     "decayed_params": decay_names},
        },
        "tied": "lm_head.weight is transformer.wte.weight (one parameter, decayed in wd01)",
        "loss": "mean F.cross_entropy over all B*T positions",
    }
    train = {
        "train_tokens": tr_tokens.to(torch.int32),
        "train_targets": tr_targets.to(torch.int32),
        "losses_wd0": losses_wd0,
        "losses_wd01": losses_wd01,
    }
    train.update({"final_wd0." + n: final_wd0[n].contiguous() for n in names})
    train.update({"final_wd01." + n: final_wd01[n].contiguous() for n in names})
    save_file(train, os.path.join(out, "train.safetensors"),  # one key: see above
              metadata={"hyperparameters": json.dumps(hyper, sort_keys=True)})
    with open(os.path.join(out, "train.json"), "w") as f:
        json.dump({"hyperparameters": hyper,
                   "losses_wd0": [float(x) for x in losses_wd0],
                   "losses_wd01": [float(x) for x in losses_wd01]},
                  f, indent=2, sort_keys=True)
        f.write("\n")

    # ---- 5. self-checks
    reloaded = GPT2LMHeadModel.from_pretrained(out, attn_implementation="eager").float().eval()
    with torch.no_grad():
        rl_logits = reloaded(input_ids=tokens, use_cache=False).logits
    assert torch.equal(rl_logits, logits.detach()), "safetensors round trip changed logits"
    np_logits = numpy_forward_from_llmc(llmc_path, tokens.numpy())
    llmc_err = float(np.abs(np_logits - logits.detach().numpy()).max())
    assert llmc_err < 1e-4, f"llm.c checkpoint forward mismatch {llmc_err}"
    assert abs(float(losses_wd0[0]) - float(losses_wd01[0])) == 0.0

    # ---- 6. generation reference (after everything else: it leaves the files above alone)
    gen, gen_info, gen_margin, gen_cache_err = generate_reference(init_state)
    save_file(gen, os.path.join(out, "generate.safetensors"),  # one key: see above
              metadata={"info": gen_info})

    # ---- checksums + summary
    files = sorted(f for f in os.listdir(out) if f != "SHA256SUMS")
    with open(os.path.join(out, "SHA256SUMS"), "w") as f:
        for fn in files:
            f.write(f"{sha256(os.path.join(out, fn))}  {fn}\n")
    print(f"python {platform.python_version()}  torch {torch.__version__}  "
          f"transformers {transformers.__version__}  safetensors {safetensors.__version__}  "
          f"numpy {np.__version__}")
    print(f"parameters: {sum(p.numel() for p in params.values())} (llm.c padded: {nparams})")
    total = 0
    for fn in files + ["SHA256SUMS"]:
        sz = os.path.getsize(os.path.join(out, fn))
        total += sz
        print(f"  {sz:8d}  {fn}")
    print(f"  {total:8d}  total")
    print(f"reference loss: {loss.item():.9g}  (ln V = {math.log(V):.6f})")
    print("losses_wd0 : " + " ".join(f"{x:.7f}" for x in losses_wd0.tolist()))
    print("losses_wd01: " + " ".join(f"{x:.7f}" for x in losses_wd01.tolist()))
    d = max((final_wd0[n] - final_wd01[n]).abs().max().item() for n in names)
    print(f"max |final_wd0 - final_wd01| = {d:.3g}")
    print(f"self-check: from_pretrained logits identical; numpy llm.c forward max err {llmc_err:.3g}")
    print(f"generation: {gen['tokens'].tolist()} (prompt {GEN_PROMPT}); smallest top-2 margin "
          f"{gen_margin:.3g}; KV-cache vs full forward logits max diff {gen_cache_err:.3g}")


if __name__ == "__main__":
    sys.exit(main())
