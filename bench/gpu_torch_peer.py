#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""gpu_torch_peer.py: the PyTorch side of scripts/gpu-session.sh's speed phases (issue 42):
GPT-2 (or Llama) training steps of transformers' GPT2LMHeadModel (LlamaForCausalLM) with
fused AdamW, eager or torch.compile, on the same batches as nnt-train reads from the same
token file.

    python3 bench/gpu_torch_peer.py --layers L --channels C --heads NH --vocab V --context N
        --batch B --seq T --steps S [--warmup W] [--mode eager|compile] [--device cuda|cpu]
        [--precision bf16|fp32] --data FILE [--save-init DIR] [--lr X] [--grad-clip G]
        [--threads N] [--family gpt2|llama --kv-heads NKV --hidden F --rope-theta X]

Data: FILE holds uint16 tokens without a header (nanoGPT's train.bin, nnt-train
--data-format nanogpt). As nnt-train reads it in order (no --shuffle, --accum 1), step s
(0-based, warm-up steps included) trains on the window of B*T + 1 tokens at s*B*T: inputs
window[0..BT) as (B, T), targets window[1..BT]; the loss is the mean cross-entropy over B*T.

Model and optimizer as nnt-train's with the options scripts/gpu-session.sh gives it:
GPT2Config(n_layer L, n_embd C, n_head NH, vocab V, n_positions N), GELU tanh, no dropout,
tied embeddings, transformers' default attention implementation; float32 parameters;
--family llama: LlamaConfig(hidden_size C, intermediate_size F, NH heads, NKV key/value
heads, rope_theta X (default 500000), rms_norm_eps 1e-5, tied embeddings, no biases, no
rope scaling: Llama 3.2 1B's sizes with L 16, C 2048, NH 32, NKV 8, F 8192, V 128256);
torch.optim.AdamW(fused=True) with lr X (constant), betas 0.9 0.95, eps 1e-8, weight decay
0.1 on the matrices and embeddings (nnt-train decays those), none on biases and norms;
gradient clipping to G (default 1, nnt-train's; 0: off). bf16: torch.autocast(bfloat16)
around forward and loss, backward outside it, no TF32 (nnt's bf16: bf16 operands, float
accumulation, float master weights and moments). --save-init DIR writes the initial weights
(seed 0) as a Hugging Face directory (config.json, model.safetensors) before the first
step: nnt-train --load-hf DIR then starts from the same weights, and the two runs' losses
can be compared step by step.

Timing: W warm-up steps (default 2; with --mode compile the first one compiles, its time is
reported apart), then S timed steps, each from the batch's upload to loss.item(), with
torch.cuda.synchronize() before each clock reading. Prints one JSON object: params,
step_s (mean of the timed steps), times, losses (every step, warm-up included: step s of
nnt-train's train.csv is losses[s - 1]), first_s (the first warm-up step), max_mem, and
the versions.
"""

import argparse
import json
import sys
import time


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--layers", type=int, required=True)
    p.add_argument("--channels", type=int, required=True)
    p.add_argument("--heads", type=int, required=True)
    p.add_argument("--vocab", type=int, required=True)
    p.add_argument("--context", type=int, required=True)
    p.add_argument("--batch", type=int, required=True)
    p.add_argument("--seq", type=int, required=True)
    p.add_argument("--steps", type=int, required=True, help="timed steps")
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--mode", choices=("eager", "compile"), default="eager")
    p.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    p.add_argument("--precision", choices=("bf16", "fp32"), default="bf16")
    p.add_argument("--data", required=True)
    p.add_argument("--save-init")
    p.add_argument("--lr", type=float, default=1e-4)
    p.add_argument("--grad-clip", type=float, default=1.0)
    p.add_argument("--threads", type=int, default=0, help="CPU threads (0: torch's default)")
    p.add_argument("--family", choices=("gpt2", "llama"), default="gpt2")
    p.add_argument("--kv-heads", type=int, default=0, help="llama: key/value heads (0: NH)")
    p.add_argument("--hidden", type=int, default=0, help="llama: the MLP's width (0: 4 C)")
    p.add_argument("--rope-theta", type=float, default=500000.0)
    a = p.parse_args(argv)
    if a.warmup < 1:
        p.error("--warmup must be at least 1 (the first step sets up the kernels)")
    return a


def main(argv):
    a = parse_args(argv)
    import torch
    import torch.nn.functional as F
    import transformers
    from transformers import GPT2Config, GPT2LMHeadModel, LlamaConfig, LlamaForCausalLM

    if a.device == "cuda" and not torch.cuda.is_available():
        raise SystemExit("gpu_torch_peer: --device cuda but torch sees no GPU")
    if a.threads > 0:
        torch.set_num_threads(a.threads)
    dev = torch.device(a.device)
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.manual_seed(0)
    if a.family == "llama":
        cfg = LlamaConfig(vocab_size=a.vocab, hidden_size=a.channels,
                          intermediate_size=a.hidden or 4 * a.channels,
                          num_hidden_layers=a.layers, num_attention_heads=a.heads,
                          num_key_value_heads=a.kv_heads or a.heads,
                          max_position_embeddings=a.context, rope_theta=a.rope_theta,
                          rms_norm_eps=1e-5, tie_word_embeddings=True, attention_bias=False,
                          mlp_bias=False, attention_dropout=0.0, use_cache=False)
        model_class = LlamaForCausalLM
    else:
        cfg = GPT2Config(vocab_size=a.vocab, n_positions=a.context, n_embd=a.channels,
                         n_layer=a.layers, n_head=a.heads, activation_function="gelu_new",
                         resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0, use_cache=False)
        model_class = GPT2LMHeadModel
    with torch.device(dev):   # on the GPU: a 1558M model takes long to initialise on the CPU
        model = model_class(cfg).float()
    model.train()
    if a.save_init:
        model.save_pretrained(a.save_init, safe_serialization=True)
    params = sum(p.numel() for p in model.parameters())   # wte and lm_head tied: once
    decay = [p for p in model.parameters() if p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1},
                             {"params": no_decay, "weight_decay": 0.0}],
                            lr=a.lr, betas=(0.9, 0.95), eps=1e-8, fused=True)

    import numpy as np
    tokens = np.fromfile(a.data, dtype=np.uint16)
    bt = a.batch * a.seq
    total = a.warmup + a.steps
    if tokens.size < total * bt + 1:
        raise SystemExit("gpu_torch_peer: %s holds %d tokens, %d steps need %d"
                         % (a.data, tokens.size, total, total * bt + 1))
    if int(tokens[: total * bt + 1].max()) >= a.vocab:
        raise SystemExit("gpu_torch_peer: %s has token ids >= the vocabulary %d"
                         % (a.data, a.vocab))

    fwd = model
    if a.mode == "compile":
        fwd = torch.compile(model)

    def autocast():
        if a.precision == "bf16":
            return torch.autocast(device_type=dev.type, dtype=torch.bfloat16)
        import contextlib
        return contextlib.nullcontext()

    def sync():
        if dev.type == "cuda":
            torch.cuda.synchronize()

    def step(s):
        w = torch.from_numpy(tokens[s * bt: s * bt + bt + 1].astype(np.int64)).to(dev)
        x = w[:-1].view(a.batch, a.seq)
        y = w[1:].view(a.batch, a.seq)
        with autocast():
            logits = fwd(input_ids=x).logits
            loss = F.cross_entropy(logits.view(-1, a.vocab), y.reshape(-1))
        loss.backward()
        if a.grad_clip > 0:
            torch.nn.utils.clip_grad_norm_(model.parameters(), a.grad_clip)
        opt.step()
        opt.zero_grad(set_to_none=True)
        return loss.item()

    losses, times = [], []
    first_s = None
    for s in range(total):
        sync()
        t0 = time.perf_counter()
        losses.append(step(s))
        sync()
        dt = time.perf_counter() - t0
        if s == 0:
            first_s = dt
        if s >= a.warmup:
            times.append(dt)
    out = {"params": params, "family": a.family, "mode": a.mode, "device": a.device, "precision": a.precision,
           "batch": a.batch, "seq": a.seq, "step_s": sum(times) / len(times) if times else None,
           "times": times, "losses": losses, "first_s": first_s,
           "max_mem": torch.cuda.max_memory_allocated(dev) if dev.type == "cuda" else None,
           "attn": getattr(cfg, "_attn_implementation", None),
           "torch": torch.__version__, "transformers": transformers.__version__}
    print(json.dumps(out))


if __name__ == "__main__":
    main(sys.argv[1:])
