#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""compare_pytorch.py: time one GPT-2 or Llama-family training step (forward + loss +
backward + AdamW) of nnt's training program nnt-train and of PyTorch (eager, Hugging Face
transformers GPT2LMHeadModel or LlamaForCausalLM) side by side, on the CPU or on one NVIDIA
GPU, and write a Markdown table.

Not a test and not run by CI: run by hand on a quiet machine, results go to
bench/RESULTS-pytorch.md. Needs a Python with torch and transformers and a built nnt-train
(make in a configured build directory: BUILD/nnt-train; --nnt-train may also name a shell
script that sets LD_LIBRARY_PATH and runs the real program).

    python bench/compare_pytorch.py --build-dir BUILD [--threads 2] [--steps 3]
        [--rounds 3] [--configs 124M,small,wide|smollm2-135m|llama-tiny|qwen3-0.6b|
                      gemma3-270m|pythia-160m|starcoder2-3b-l4|tiny-starcoder|
                      falcon-7b-l2]
        [--tilings auto,none,split]
        [--torch-variants default,fused] [--grad-clip 0] [--nnt-data text|random]
        [--device cpu|cuda] [--precision fp32|tf32|bf16] [--batch 4] [--seq 64]
        [--sched S] [--peak-tflops X] [--calibrate-steps N] [--starpu-home DIR]

On a GPU machine (one H100 / H200; nnt-train built with CUDA), for example:

    python3 bench/compare_pytorch.py --device cuda --precision bf16 \
        --nnt-train BUNDLE/nnt-train --configs 124M,1558M --batch 8 --seq 1024 \
        --steps 5 --rounds 2 --output $OUT/RESULTS-gpu.md

For every config the runs are interleaved (round 1: nnt tiling 1, PyTorch variant 1, nnt
tiling 2, PyTorch variant 2, ...; round 2: the same), each run in a fresh process; the table
gives, per side, the median over the rounds of the mean step time of each run, and for each
side the variant (nnt tiling, PyTorch AdamW implementation) with the lowest median.

The nnt side runs

    nnt-train --layers L --channels C --heads NH --vocab V --context maxT --batch B --seq T
        --steps N+1 --sample 0 --no-save --out DIR --cpus THREADS --gpus G --sched S
        --grad-clip G --warmup 0 --schedule constant --lr 1e-4 --beta2 0.999
        --weight-decay 0.1 --precision P [--peak-gflops X] [tiling options]
        [--data FILE --data-format nanogpt]

or, for a Llama-family config (smollm2-135m, llama-tiny: nnt-train's presets of the same
names), the same with --model NAME in place of --layers ... --context, and reads the
per-step wall times from the ms column of DIR/train.csv: the first step is the
warm-up and is dropped, the mean of the other N (= --steps) is the run's step time (nnt-train
times a whole step: loading the batch, zero grad, forward, loss, backward, the gradient norm,
AdamW, waiting for every task). The PyTorch side (a worker process of this script) does one
warm-up step and then times N steps the same way (random tokens, forward, loss, backward,
[clip_grad_norm_], AdamW step, zero grad, loss.item(); on the GPU with
torch.cuda.synchronize() before each clock reading).

Llama-family configs: PyTorch builds transformers.LlamaForCausalLM(LlamaConfig(...)) with
the preset's sizes (smollm2-135m: vocab 49152, hidden 576, intermediate 1536, 30 layers, 9
heads, 3 key/value heads, context 8192, rope_theta 100000, tied embeddings, rms_norm_eps
1e-5, no biases), random init, fp32, the default attention implementation (as for GPT-2);
qwen3-0.6b: Qwen3ForCausalLM(Qwen3Config(...)) of Qwen/Qwen3-0.6B's sizes (vocab 151936,
hidden 1024, intermediate 3072, 28 layers, 16 heads of 128, 8 key/value heads, q/k norms,
rope_theta 1e6, tied, rms_norm_eps 1e-6); gemma3-270m: Gemma3ForCausalLM(Gemma3TextConfig(...))
of google/gemma-3-270m's sizes (vocab 262144, hidden 640, intermediate 2048, 18 layers, 4
heads of 256, 1 key/value head, query_pre_attn_scalar 256, a window of 512 on five layers of
six, rope 1e6 / 1e4, tied, rms_norm_eps 1e-6; the FLOP count ignores the windows);
pythia-160m: GPTNeoXForCausalLM(GPTNeoXConfig(...)) of EleutherAI/pythia-160m's sizes (vocab
50304, hidden 768, intermediate 3072, 12 layers of 12 heads, rotary_pct 0.25, the attention
and the exact-GELU MLP side by side, every bias, untied, layer_norm_eps 1e-5);
starcoder2-3b-l4: Starcoder2ForCausalLM(Starcoder2Config(...)) of bigcode/starcoder2-3b's
sizes with 4 of its 30 layers (nnt-train --model starcoder2-3b --layers 4: vocab 49152,
hidden 3072, intermediate 12288, 24 heads of 128 over 2 key/value heads, every bias, the
tanh-GELU MLP, a window of 4096 (wider than the sequences), rope 999999.44, tied,
norm_epsilon 1e-5); tiny-starcoder: GPTBigCodeForCausalLM(GPTBigCodeConfig(...)) of
bigcode/tiny_starcoder_py's sizes (nnt-train --model tiny-starcoder: vocab 49152, 8192
positions, n_embd 768, n_inner 3072, 20 layers of 12 heads over one key/value head
(multi_query), learned positions, every bias, the exact-GELU MLP, tied, layer_norm_epsilon
1e-5); falcon-7b-l2: FalconForCausalLM(FalconConfig(...)) of tiiuae/falcon-7b's sizes with 2
of its 32 layers (nnt-train --model falcon-7b --layers 2: vocab 65024, hidden 4544, 71
heads of 64 over one key/value head, the attention and the exact-GELU MLP side by side on
one LayerNorm, no biases, rope 1e4, tied, layer_norm_epsilon 1e-5).
Default nnt tilings when every config is a Llama one: auto only. The FLOP count is the same
6 * params * B * T + 12 * L * B * T^2 * C (grouped-query attention changes only the K/V
projections, which params counts; the attention products have heads * head_dim = C, or
2048 for qwen3-0.6b, which counts that).

Device (--device, default cpu):
  cpu   nnt-train --cpus THREADS --gpus 0, default scheduler lws; PyTorch on the CPU with
        torch.set_num_threads(THREADS). Default configs 124M,small,wide, tilings
        auto,none,split.
  cuda  nnt-train --cpus THREADS --gpus 1 (the CPU workers run tasks too), default
        scheduler dmdas; PyTorch model and data on torch.device("cuda"). Default configs
        124M,1558M, tilings auto,none. Fails at once if torch.cuda.is_available() is False.
  --sched S overrides the scheduler. dmda-family schedulers use StarPU performance models
  kept in STARPU_HOME (by default a temporary directory shared by every run of this
  invocation, removed at the end): the first run of each config and tiling calibrates them
  (its tasks are also sent to the CPU workers to time them), later rounds use them.
  --calibrate-steps N runs nnt-train once per config and tiling with N steps, untimed,
  before round 1; --starpu-home DIR keeps the models (and StarPU's bus calibration) in DIR
  across invocations.

Precision (--precision, default fp32; nnt-train always gets --precision P):
  fp32  nnt: float operands. PyTorch: torch.backends.cuda.matmul.allow_tf32 = False,
        torch.backends.cudnn.allow_tf32 = False, float32 matmul precision "highest".
  tf32  nnt: operands of every matrix product rounded to TF32 (float accumulation).
        PyTorch: both allow_tf32 flags True, torch.set_float32_matmul_precision("high")
        (on the CPU this is usually still full fp32).
  bf16  nnt: operands rounded to bf16, float accumulation, float master weights and Adam
        moments. PyTorch: fp32 parameters and AdamW, torch.autocast(device_type,
        dtype=torch.bfloat16) around forward + loss, backward outside it; allow_tf32 off.
  Sizes: --batch B --seq T (default 4 and 64, for 2 CPU cores; on a GPU e.g. --batch 16
  --seq 1024; T <= the config's context 1024).

Peaks for MFU: on the CPU, torch.mm 1024^3 fp32 with THREADS threads (best of 50) measured
before and after the runs, and the 175 GFLOP/s of design.md; nnt-train measures its own
(no --peak-gflops) unless --peak-tflops is given. On the GPU, torch.mm 8192^3 at the
precision (fp32 with TF32 off, fp32 with TF32 on, bf16) timed with CUDA events, best of 5
batches of 10, before and after the runs, and the nominal dense peak --peak-tflops (default:
H100 SXM dense peaks: fp32 67, tf32 495, bf16 989 TFLOP/s; the H200 has the same; an H100
PCIe has 51 / 378 / 756), which is also given to nnt-train as --peak-gflops.

nnt tilings: `auto` gives no tile option (nnt-train's own heuristic, nnt_model_tiling(3));
`none` keeps every dimension in one tile (all tile options -1); `split` and `split-b1` are
hand-picked tilings (see TILINGS), and the tile sizes nnt-train used are listed in the
report. Data: with --nnt-data text (default) nnt-train reads its default corpus
(/usr/share/common-licenses) with the byte tokenizer; nnt-train accepts a model vocabulary
(50257) larger than the tokenizer's (256), so the model is the same and only token ids below
256 occur. With --nnt-data random it reads uniform random tokens in [0, V), like PyTorch's,
from a nanoGPT .bin file (uint16, no header) written to a temporary directory. The amount of
work per step does not depend on the token values. Gradient clipping is off on both sides by default
(--grad-clip 0); --grad-clip G > 0 turns it on on both sides (nnt-train --grad-clip G,
torch.nn.utils.clip_grad_norm_(params, G)). nnt-train computes the global gradient norm
every step even with clipping off (it logs it), PyTorch only when clipping.
"""

import argparse
import array
import contextlib
import csv
import datetime
import json
import os
import random
import re
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

# name: (layers, channels, heads, vocab, context)
CONFIGS = {
    "124M": (12, 768, 12, 50257, 1024),
    "small": (6, 512, 8, 50257, 1024),
    "wide": (4, 1536, 16, 50257, 1024),
    "1558M": (48, 1600, 25, 50257, 1024),  # GPT-2 XL, for the GPU
    # Llama family (nnt-train --model NAME; the rest in LLAMA)
    "smollm2-135m": (30, 576, 9, 49152, 8192),
    "llama-tiny": (2, 64, 4, 256, 256),
    "qwen3-0.6b": (28, 1024, 16, 151936, 40960),
    # Gemma family (nnt-train --model NAME)
    "gemma3-270m": (18, 640, 4, 262144, 32768),
    # GPT-NeoX family (nnt-train --model NAME)
    "pythia-160m": (12, 768, 12, 50304, 2048),
    # StarCoder2 family (nnt-train --model starcoder2-3b --layers 4)
    "starcoder2-3b-l4": (4, 3072, 24, 49152, 16384),
    # GPT-BigCode family (nnt-train --model NAME)
    "tiny-starcoder": (20, 768, 12, 49152, 8192),
    # Falcon family (nnt-train --model falcon-7b --layers 2)
    "falcon-7b-l2": (2, 4544, 71, 65024, 2048),
}

# Llama-family configs: nnt-train's preset of the same name; for transformers.LlamaConfig:
# key/value heads, MLP inner size, rope theta, RMSNorm epsilon, tied LM head (nnt's presets
# in lib/models/transformer.c).
LLAMA = {
    "smollm2-135m": {"kv_heads": 3, "hidden": 1536, "rope_theta": 100000.0, "eps": 1e-5,
                     "tied": True},
    "llama-tiny": {"kv_heads": 2, "hidden": 172, "rope_theta": 10000.0, "eps": 1e-5,
                   "tied": True},
    # Qwen/Qwen3-0.6B: Qwen3ForCausalLM, heads of 128 (16 x 128 = 2048 > C), q/k norms
    "qwen3-0.6b": {"kv_heads": 8, "hidden": 3072, "rope_theta": 1000000.0, "eps": 1e-6,
                   "tied": True, "head_dim": 128, "qwen3": True},
    # google/gemma-3-270m: Gemma3ForCausalLM, 4 heads of 256 (1024 > C) over 1 kv head, q/k
    # norms, a window of 512 on 5 layers of 6, rope 1e6 global / 1e4 local
    "gemma3-270m": {"kv_heads": 1, "hidden": 2048, "rope_theta": 1000000.0, "eps": 1e-6,
                    "tied": True, "head_dim": 256, "gemma3": True},
    # EleutherAI/pythia-160m: GPTNeoXForCausalLM, two LayerNorms a block, parts side by side
    "pythia-160m": {"kv_heads": 12, "hidden": 3072, "rope_theta": 10000.0, "eps": 1e-5,
                    "tied": False, "neox": True},
    # bigcode/starcoder2-3b with 4 of its 30 layers: Starcoder2ForCausalLM, LayerNorm blocks,
    # every bias, the tanh-GELU MLP, 2 key/value heads, a window of 4096
    "starcoder2-3b-l4": {"kv_heads": 2, "hidden": 12288, "rope_theta": 999999.4420358813,
                         "eps": 1e-5, "tied": True, "starcoder2": True,
                         "preset": "starcoder2-3b"},
    # bigcode/tiny_starcoder_py: GPTBigCodeForCausalLM, GPT-2's layout with multi-query
    # attention, the exact GELU (no rope: rope_theta unused)
    "tiny-starcoder": {"kv_heads": 1, "hidden": 3072, "rope_theta": 0.0, "eps": 1e-5,
                       "tied": True, "bigcode": True},
    # tiiuae/falcon-7b with 2 of its 32 layers: FalconForCausalLM, multi-query, the parts
    # side by side on one LayerNorm, no biases
    "falcon-7b-l2": {"kv_heads": 1, "hidden": 18176, "rope_theta": 10000.0, "eps": 1e-5,
                     "tied": True, "falcon": True, "preset": "falcon-7b"},
}

# nnt tilings, as functions of the channels C -> nnt-train tile options (0 or absent:
# automatic, -1: one tile). "split" is the best hand-picked tiling of bench/RESULTS.md for
# 124M (batch 2, channels 768, hidden 1536, vocab 6400), scaled: whole channels, hidden in two
# tiles (2C), vocab in ~8 tiles; dimensions it does not name stay whole, as they did in
# bench_gpt2, which these tilings were first written for.
WHOLE = "-1"
TILINGS = {
    "auto": lambda C: [],
    "none": lambda C: ["--tile-batch", WHOLE, "--tile-seq", WHOLE, "--tile-channels", WHOLE,
                       "--tile-hidden", WHOLE, "--tile-vocab", WHOLE, "--tile-heads", WHOLE],
    "split": lambda C: ["--tile-batch", "2", "--tile-seq", WHOLE, "--tile-channels", WHOLE,
                        "--tile-hidden", str(2 * C), "--tile-vocab", "6400",
                        "--tile-heads", WHOLE],
    "split-b1": lambda C: ["--tile-batch", "1", "--tile-seq", WHOLE, "--tile-channels", WHOLE,
                           "--tile-hidden", str(2 * C), "--tile-vocab", "8192",
                           "--tile-heads", WHOLE],
}
TILING_DESC = {
    "auto": ("nnt-train's automatic tiling (nnt_model_tiling(3), the rule of nnt_gpt_tiling(3) with the model's MLP size)", "(no tile option)"),
    "none": ("one tile per dimension",
             "--tile-batch -1 --tile-seq -1 --tile-channels -1 --tile-hidden -1 "
             "--tile-vocab -1 --tile-heads -1"),
    "split": ("batch 2, hidden 2C, vocab 6400, the rest whole",
              "--tile-batch 2 --tile-seq -1 --tile-channels -1 --tile-hidden 2C "
              "--tile-vocab 6400 --tile-heads -1"),
    "split-b1": ("batch 1, hidden 2C, vocab 8192, the rest whole",
                 "--tile-batch 1 --tile-seq -1 --tile-channels -1 --tile-hidden 2C "
                 "--tile-vocab 8192 --tile-heads -1"),
}

# PyTorch variants: extra keyword arguments of torch.optim.AdamW. "default" is what
# AdamW(params, lr, weight_decay) gives (on the CPU the per-tensor for-loop implementation,
# on CUDA the foreach one); "fused" is the fused kernel (fused=True; CPU since PyTorch 2.4,
# CUDA), the counterpart of nnt's one-pass AdamW task.
TORCH_VARIANTS = {
    "default": {},
    "fused": {"fused": True},
    "foreach": {"foreach": True},
}

DESIGN_PEAK = 175.0  # GFLOP/s, BLIS sgemm with 2 threads on this kind of machine (design.md)

# Default --peak-tflops on the GPU: the dense (no sparsity) peaks of an H100 SXM (the same on
# an H200), per precision: fp32 on the CUDA cores, TF32 and bf16 on the tensor cores.
GPU_PEAK_TFLOPS = {"fp32": 67.0, "tf32": 495.0, "bf16": 989.0}

# Defaults that depend on --device.
DEVICE_DEFAULTS = {
    "cpu": {"sched": "lws", "configs": "124M,small,wide", "tilings": "auto,none,split"},
    "cuda": {"sched": "dmdas", "configs": "124M,1558M", "tilings": "auto,none"},
}

PRECISION_DESC = {
    "fp32": "fp32",
    "tf32": "fp32 with TF32 matrix products",
    "bf16": "bf16 matrix products (fp32 master weights and AdamW moments)",
}


def flops_per_step(params, L, C, B, T, attn_width=None):
    """attn_width: heads * head_dim where a config gives head_dim (else C)."""
    return 6.0 * params * B * T + 12.0 * L * B * T * T * (attn_width or C)


def loadavg():
    with open("/proc/loadavg") as f:
        return tuple(float(x) for x in f.read().split()[:3])


# ---- PyTorch side (runs in a child process: --torch-worker / --peak-worker) -----------------

def torch_device(torch, device):
    """torch.device(device), failing clearly when CUDA is asked for and not usable."""
    if device == "cuda" and not torch.cuda.is_available():
        raise SystemExit("compare_pytorch: --device cuda, but torch.cuda.is_available() is "
                         "False (torch %s, built for CUDA %s): no usable NVIDIA GPU here"
                         % (torch.__version__, torch.version.cuda))
    return torch.device(device)


def set_precision(torch, precision):
    """fp32 and bf16: no TF32 anywhere; tf32: TF32 for float32 matrix products (cuBLAS and
    cuDNN). bf16 itself comes from autocast in torch_worker."""
    tf32 = precision == "tf32"
    torch.backends.cuda.matmul.allow_tf32 = tf32
    torch.backends.cudnn.allow_tf32 = tf32
    torch.set_float32_matmul_precision("high" if tf32 else "highest")
    return {"cuda.matmul.allow_tf32": torch.backends.cuda.matmul.allow_tf32,
            "cudnn.allow_tf32": torch.backends.cudnn.allow_tf32,
            "float32_matmul_precision": torch.get_float32_matmul_precision()}


def torch_worker(a):
    import torch
    import torch.nn.functional as F
    from transformers import GPT2Config, GPT2LMHeadModel, LlamaConfig, LlamaForCausalLM
    from transformers import Qwen3Config, Qwen3ForCausalLM
    from transformers import Gemma3ForCausalLM, Gemma3TextConfig
    from transformers import GPTNeoXConfig, GPTNeoXForCausalLM
    from transformers import Starcoder2Config, Starcoder2ForCausalLM
    from transformers import GPTBigCodeConfig, GPTBigCodeForCausalLM
    from transformers import FalconConfig, FalconForCausalLM

    dev = torch_device(torch, a.device)
    cuda = dev.type == "cuda"
    torch.set_num_threads(a.threads)
    flags = set_precision(torch, a.precision)
    torch.manual_seed(0)
    L, C, NH, V, maxT = CONFIGS[a.config]
    if a.config in LLAMA and LLAMA[a.config].get("gemma3"):
        ll = LLAMA[a.config]
        cfg = Gemma3TextConfig(vocab_size=V, hidden_size=C, intermediate_size=ll["hidden"],
                               num_hidden_layers=L, num_attention_heads=NH,
                               num_key_value_heads=ll["kv_heads"], head_dim=ll["head_dim"],
                               max_position_embeddings=maxT, query_pre_attn_scalar=256,
                               sliding_window=512, sliding_window_pattern=6,
                               tie_word_embeddings=ll["tied"], rms_norm_eps=ll["eps"],
                               attention_bias=False, attention_dropout=0.0, use_cache=False)
        model_class = Gemma3ForCausalLM
    elif a.config in LLAMA and LLAMA[a.config].get("neox"):
        ll = LLAMA[a.config]
        cfg = GPTNeoXConfig(vocab_size=V, hidden_size=C, intermediate_size=ll["hidden"],
                            num_hidden_layers=L, num_attention_heads=NH,
                            max_position_embeddings=maxT, rotary_pct=0.25,
                            rotary_emb_base=ll["rope_theta"], layer_norm_eps=ll["eps"],
                            tie_word_embeddings=False, use_parallel_residual=True,
                            hidden_dropout=0.0, attention_dropout=0.0, use_cache=False)
        model_class = GPTNeoXForCausalLM
    elif a.config in LLAMA and LLAMA[a.config].get("starcoder2"):
        ll = LLAMA[a.config]
        cfg = Starcoder2Config(vocab_size=V, hidden_size=C, intermediate_size=ll["hidden"],
                               num_hidden_layers=L, num_attention_heads=NH,
                               num_key_value_heads=ll["kv_heads"], max_position_embeddings=maxT,
                               rope_theta=ll["rope_theta"], norm_epsilon=ll["eps"],
                               sliding_window=4096, use_bias=True,
                               hidden_act="gelu_pytorch_tanh", tie_word_embeddings=ll["tied"],
                               attention_dropout=0.0, residual_dropout=0.0,
                               embedding_dropout=0.0, use_cache=False)
        model_class = Starcoder2ForCausalLM
    elif a.config in LLAMA and LLAMA[a.config].get("falcon"):
        ll = LLAMA[a.config]
        cfg = FalconConfig(vocab_size=V, hidden_size=C, num_hidden_layers=L,
                           num_attention_heads=NH, multi_query=ll["kv_heads"] == 1,
                           parallel_attn=True, bias=False, max_position_embeddings=maxT,
                           ffn_hidden_size=ll["hidden"], layer_norm_epsilon=ll["eps"],
                           activation="gelu", tie_word_embeddings=ll["tied"],
                           rope_parameters={"rope_type": "default",
                                            "rope_theta": ll["rope_theta"]},
                           hidden_dropout=0.0, attention_dropout=0.0, use_cache=False)
        model_class = FalconForCausalLM
    elif a.config in LLAMA and LLAMA[a.config].get("bigcode"):
        ll = LLAMA[a.config]
        cfg = GPTBigCodeConfig(vocab_size=V, n_positions=maxT, n_embd=C, n_layer=L, n_head=NH,
                               n_inner=ll["hidden"], multi_query=ll["kv_heads"] == 1,
                               activation_function="gelu", layer_norm_epsilon=ll["eps"],
                               tie_word_embeddings=ll["tied"], resid_pdrop=0.0,
                               embd_pdrop=0.0, attn_pdrop=0.0, use_cache=False)
        model_class = GPTBigCodeForCausalLM
    elif a.config in LLAMA:
        ll = LLAMA[a.config]
        config_class, model_class = ((Qwen3Config, Qwen3ForCausalLM) if ll.get("qwen3")
                                     else (LlamaConfig, LlamaForCausalLM))
        extra = {"head_dim": ll["head_dim"]} if "head_dim" in ll else {"mlp_bias": False}
        cfg = config_class(vocab_size=V, hidden_size=C, intermediate_size=ll["hidden"],
                           num_hidden_layers=L, num_attention_heads=NH,
                           num_key_value_heads=ll["kv_heads"], max_position_embeddings=maxT,
                           rope_theta=ll["rope_theta"], tie_word_embeddings=ll["tied"],
                           rms_norm_eps=ll["eps"], attention_bias=False,
                           attention_dropout=0.0, use_cache=False, **extra)
    else:
        cfg = GPT2Config(vocab_size=V, n_positions=maxT, n_embd=C, n_layer=L, n_head=NH,
                         activation_function="gelu_new", resid_pdrop=0.0, embd_pdrop=0.0,
                         attn_pdrop=0.0, use_cache=False)
        model_class = GPT2LMHeadModel
    if cuda:
        with torch.device(dev):  # initialised on the GPU: 1558M takes long on the CPU
            model = model_class(cfg).float()
    else:
        model = model_class(cfg).float()
    model.train()
    params = sum(p.numel() for p in model.parameters())  # wte and lm_head tied: counted once
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, weight_decay=0.1,
                            **TORCH_VARIANTS[a.variant])
    g = torch.Generator(device=dev).manual_seed(7)

    def autocast():
        if a.precision == "bf16":
            return torch.autocast(device_type=dev.type, dtype=torch.bfloat16)
        return contextlib.nullcontext()

    def sync():
        if cuda:
            torch.cuda.synchronize()

    def step():
        x = torch.randint(0, V, (a.batch, a.seq), generator=g, device=dev)
        y = torch.randint(0, V, (a.batch, a.seq), generator=g, device=dev)
        with autocast():
            logits = model(input_ids=x).logits
            loss = F.cross_entropy(logits.view(-1, V), y.view(-1))
        loss.backward()
        if a.grad_clip > 0:
            torch.nn.utils.clip_grad_norm_(model.parameters(), a.grad_clip)
        opt.step()
        opt.zero_grad(set_to_none=True)
        return loss.item()

    step()  # warm-up
    sync()
    times = []
    for _ in range(a.steps):
        sync()
        t0 = time.perf_counter()
        step()
        sync()
        times.append(time.perf_counter() - t0)
    print(json.dumps({"params": params, "times": times, "threads": torch.get_num_threads(),
                      "attn": getattr(cfg, "_attn_implementation", None), "flags": flags,
                      "max_mem": torch.cuda.max_memory_allocated(dev) if cuda else None}))


def cuda_peak(torch, a):
    """torch.mm 8192^3 on the GPU at the precision, timed with CUDA events: best of 5
    batches of 10 products."""
    dev = torch_device(torch, "cuda")
    set_precision(torch, a.precision)
    n, reps = 8192, 10
    dtype = torch.bfloat16 if a.precision == "bf16" else torch.float32
    x = torch.randn(n, n, device=dev, dtype=dtype)
    y = torch.randn(n, n, device=dev, dtype=dtype)
    z = torch.empty(n, n, device=dev, dtype=dtype)
    for _ in range(3):
        torch.mm(x, y, out=z)
    torch.cuda.synchronize()
    t0, t1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    best = float("inf")
    for _ in range(5):
        t0.record()
        for _ in range(reps):
            torch.mm(x, y, out=z)
        t1.record()
        t1.synchronize()
        best = min(best, t0.elapsed_time(t1) / 1e3 / reps)
    return 2.0 * n ** 3 / best / 1e9


def peak_worker(a):
    import torch
    torch.set_num_threads(a.threads)
    if a.device == "cuda":
        print(json.dumps({"gflops": cuda_peak(torch, a)}))
        return
    n = 1024
    x, y = torch.randn(n, n), torch.randn(n, n)
    for _ in range(5):
        torch.mm(x, y)
    best = float("inf")
    for _ in range(50):
        t0 = time.perf_counter()
        torch.mm(x, y)
        best = min(best, time.perf_counter() - t0)
    print(json.dumps({"gflops": 2.0 * n ** 3 / best / 1e9}))


def floor_worker(a):
    """The bf16 floor's rate (issue 41): torch.mm 2048^3 on bf16 tensors with THREADS threads
    (oneDNN's bf16 matmul on AVX512-BF16 / AMX CPUs), best of 10 after 3 warm-ups."""
    import torch
    torch.set_num_threads(a.threads)
    n = 2048
    x = torch.randn(n, n).bfloat16()
    y = torch.randn(n, n).bfloat16()
    for _ in range(3):
        torch.mm(x, y)
    best = float("inf")
    for _ in range(10):
        t0 = time.perf_counter()
        torch.mm(x, y)
        best = min(best, time.perf_counter() - t0)
    print(json.dumps({"gflops": 2.0 * n ** 3 / best / 1e9}))


def torch_floor(a):
    argv = [sys.executable, os.path.abspath(__file__), "--floor-worker", "--threads",
            str(a.threads)]
    return json.loads(run_child(argv).strip().splitlines()[-1])["gflops"]


# ---- driver ------------------------------------------------------------------------------

def run_child(argv, env=None):
    r = subprocess.run(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       universal_newlines=True)
    if r.returncode != 0:
        sys.stderr.write(r.stdout + r.stderr)
        raise SystemExit("compare_pytorch: failed (%d): %s" % (r.returncode, shlex.join(argv)))
    return r.stdout


def torch_argv(a, config, variant):
    return [sys.executable, os.path.abspath(__file__), "--torch-worker", "--config", config,
            "--variant", variant, "--device", a.device, "--precision", a.precision,
            "--threads", str(a.threads), "--steps", str(a.steps),
            "--batch", str(a.batch), "--seq", str(a.seq), "--grad-clip", "%g" % a.grad_clip]


def run_torch(a, config, variant):
    out = run_child(torch_argv(a, config, variant))
    return json.loads(out.strip().splitlines()[-1])


def torch_peak(a):
    argv = [sys.executable, os.path.abspath(__file__), "--peak-worker",
            "--threads", str(a.threads), "--device", a.device, "--precision", a.precision]
    return json.loads(run_child(argv).strip().splitlines()[-1])["gflops"]


# nnt-train's output: the model, tiling and runtime lines at start, the summary at the end.
PARAMS_RE = re.compile(r"^model: .*: ([\d.]+)M parameters", re.M)
DATA_RE = re.compile(r"^data: +(.*)$", re.M)
TILING_RE = re.compile(r"^tiling: +(.*)$", re.M)
RUNTIME_RE = re.compile(r"^runtime: +(\d+) CPU workers, (\d+) CUDA workers, scheduler "
                        r"([^\s;]+)(?:; (\S+) GEMM operands)?", re.M)
MFU_RE = re.compile(r"^MFU: .* against a peak of ([\d.]+) GFLOP/s \((.*)\)$", re.M)
MEAN_RE = re.compile(r"trained steps (\d+)\.\.(\d+) in [\d.]+ s: ([\d.]+) ms/step")


def random_data(a, path):
    """Uniform random tokens in [0, V) as a nanoGPT .bin file: uint16, little-endian, no
    header; enough for every step of a run without wrapping around."""
    V = max(CONFIGS[c][3] for c in a.config_list)
    if V > 65536:
        raise SystemExit("compare_pytorch: vocab %d does not fit uint16 tokens" % V)
    n = max(1 << 18, max(a.steps + 1, a.calibrate_steps) * a.batch * a.seq + 1)
    rng = random.Random(7)
    tokens = array.array("H", (rng.randrange(V) for _ in range(n)))
    if sys.byteorder != "little":
        tokens.byteswap()
    with open(path, "wb") as f:
        tokens.tofile(f)


def nnt_argv(a, config, tiling, tmp="TMP", steps=None):
    """The nnt-train command of one run; tmp is the run's temporary directory (the default
    is the placeholder used in the report); steps: --steps (default: the timed steps and
    the warm-up step)."""
    L, C, NH, V, maxT = CONFIGS[config]
    if config in LLAMA and "preset" in LLAMA[config]:   # a preset with fewer layers
        model = ["--model", LLAMA[config]["preset"], "--layers", str(L)]
    elif config in LLAMA:
        model = ["--model", config]
    else:
        model = ["--layers", str(L), "--channels", str(C), "--heads", str(NH),
                 "--vocab", str(V), "--context", str(maxT)]
    argv = [a.nnt_train] + model + ["--batch", str(a.batch), "--seq", str(a.seq), "--steps", str(steps or a.steps + 1), "--sample", "0",
            "--no-save", "--out", os.path.join(tmp, "out"), "--cpus", str(a.threads),
            "--gpus", str(a.gpus), "--sched", a.sched, "--grad-clip", "%g" % a.grad_clip,
            "--warmup", "0", "--schedule", "constant", "--lr", "1e-4", "--beta2", "0.999",
            "--weight-decay", "0.1", "--precision", a.precision]
    if a.peak_tflops:
        argv += ["--peak-gflops", "%g" % (1e3 * a.peak_tflops)]
    if a.nnt_data == "random":
        argv += ["--data", os.path.join(tmp, "random.bin"), "--data-format", "nanogpt"]
    return argv + TILINGS[tiling](C)


def read_step_ms(path):
    """The ms column of nnt-train's train.csv, one value per step, in step order."""
    with open(path, newline="") as f:
        rows = list(csv.DictReader(f))
    return [(int(r["step"]), float(r["ms"])) for r in rows]


def run_nnt(a, config, tiling, env, tmp):
    out_dir = os.path.join(tmp, "out")
    shutil.rmtree(out_dir, ignore_errors=True)
    argv = nnt_argv(a, config, tiling, tmp)
    out = run_child(argv, env=env)

    def fail(why):
        sys.stderr.write(out)
        raise SystemExit("compare_pytorch: %s: %s" % (why, shlex.join(argv)))

    pm, dm, tm, rm, mm = (PARAMS_RE.search(out), DATA_RE.search(out), TILING_RE.search(out),
                          RUNTIME_RE.search(out), MEAN_RE.search(out))
    if not (pm and dm and tm and rm and mm):
        fail("cannot parse nnt-train's output")
    if int(rm.group(1)) != a.threads or int(rm.group(2)) != a.gpus:
        fail("nnt-train ran with %s CPU and %s CUDA workers, wanted %d and %d"
             % (rm.group(1), rm.group(2), a.threads, a.gpus))
    if rm.group(4) and rm.group(4) != a.precision:
        fail("nnt-train ran with %s GEMM operands, wanted %s" % (rm.group(4), a.precision))
    fm = MFU_RE.search(out)
    steps = read_step_ms(os.path.join(out_dir, "train.csv"))
    if [s for s, _ in steps] != list(range(1, a.steps + 2)):
        fail("train.csv has steps %s, wanted 1..%d" % ([s for s, _ in steps], a.steps + 1))
    ms = [m for _, m in steps[1:]]  # the first step warms up
    mean = statistics.mean(ms)
    # Cross-check with nnt-train's own summary (mean without the first step, printed %.1f;
    # the csv has 3 decimals).
    if abs(mean - float(mm.group(3))) > 0.06 + 1e-4 * mean:
        fail("train.csv gives %.3f ms/step, nnt-train's summary %s" % (mean, mm.group(3)))
    return {"ms": mean, "mparams": float(pm.group(1)), "data": dm.group(1).split(";")[0],
            "tiling": tm.group(1), "sched": rm.group(3),
            "peak": "%s GFLOP/s (%s)" % fm.groups() if fm else "?"}


def calibrate_nnt(a, config, tiling, env, tmp):
    """One untimed nnt-train run of --calibrate-steps steps: StarPU's performance models
    (in STARPU_HOME) are calibrated for the timed runs. Returns its wall time in s."""
    shutil.rmtree(os.path.join(tmp, "out"), ignore_errors=True)
    t0 = time.perf_counter()
    run_child(nnt_argv(a, config, tiling, tmp, steps=a.calibrate_steps), env=env)
    return time.perf_counter() - t0


def nnt_version(a):
    out = run_child([a.nnt_train, "--version"]).strip().splitlines()
    return out[0] if out else "?"


def machine():
    model = "?"
    try:
        for line in subprocess.run(["lscpu"], stdout=subprocess.PIPE,
                                   universal_newlines=True).stdout.splitlines():
            if line.startswith("Model name:"):
                model = line.split(":", 1)[1].strip()
    except OSError:
        pass
    nproc = subprocess.run(["nproc"], stdout=subprocess.PIPE,
                           universal_newlines=True).stdout.strip()
    return model, nproc


LIB_VERSIONS = """
import json, sys, torch, transformers
v = {"torch": torch.__version__, "transformers": transformers.__version__,
     "mkl": torch.backends.mkl.is_available(),
     "cpu_capability": torch.backends.cpu.get_cpu_capability(),
     "cuda_build": torch.version.cuda, "cuda_available": None, "gpu": None, "cudnn": None}
if sys.argv[1] == "cuda":
    v["cuda_available"] = torch.cuda.is_available()
    if v["cuda_available"]:
        v["gpu"] = torch.cuda.get_device_name(0)
        v["gpu_count"] = torch.cuda.device_count()
        v["cudnn"] = torch.backends.cudnn.version()
print(json.dumps(v))
"""


def lib_versions(a):
    """torch's and transformers' versions (and the GPU with --device cuda) from a child
    Python; fails clearly when --device cuda has no usable GPU."""
    v = json.loads(run_child([sys.executable, "-c", LIB_VERSIONS, a.device])
                   .strip().splitlines()[-1])
    if a.device == "cuda" and not v["cuda_available"]:
        raise SystemExit("compare_pytorch: --device cuda, but torch.cuda.is_available() is "
                         "False (torch %s, built for CUDA %s): no usable NVIDIA GPU here; "
                         "run with --device cpu or on a GPU machine"
                         % (v["torch"], v["cuda_build"]))
    return v


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--build-dir", default="/tmp/b2",
                   help="configured and built nnt build directory holding nnt-train "
                        "(default %(default)s)")
    p.add_argument("--nnt-train", help="the nnt-train program (default BUILD_DIR/nnt-train)")
    p.add_argument("--threads", type=int, default=2,
                   help="torch.set_num_threads and nnt-train --cpus (default 2)")
    p.add_argument("--steps", type=int, default=3,
                   help="timed steps per run, after one warm-up step (default 3)")
    p.add_argument("--rounds", type=int, default=3,
                   help="interleaved runs per side, tiling and config; median reported "
                        "(default 3)")
    p.add_argument("--configs",
                   help="comma list of %s (default %s on cpu, %s on cuda)"
                        % (", ".join(CONFIGS), DEVICE_DEFAULTS["cpu"]["configs"],
                           DEVICE_DEFAULTS["cuda"]["configs"]))
    p.add_argument("--tilings",
                   help="comma list of nnt tilings: %s (default %s on cpu, %s on cuda; "
                        "auto when every config is a Llama one)"
                        % (", ".join(TILINGS), DEVICE_DEFAULTS["cpu"]["tilings"],
                           DEVICE_DEFAULTS["cuda"]["tilings"]))
    p.add_argument("--torch-variants", default="default,fused",
                   help="comma list of PyTorch AdamW variants: %s (default %%(default)s)"
                        % ", ".join(TORCH_VARIANTS))
    p.add_argument("--grad-clip", type=float, default=0.0,
                   help="clip the global gradient norm to this on both sides; 0: no clipping "
                        "on either side (default 0)")
    p.add_argument("--nnt-data", choices=("text", "random"), default="text",
                   help="nnt-train's data: its default text corpus with the byte tokenizer, "
                        "or uniform random tokens in [0, V) in a nanoGPT .bin file "
                        "(default %(default)s)")
    p.add_argument("--device", choices=("cpu", "cuda"), default="cpu",
                   help="cpu: nnt-train --gpus 0, PyTorch on the CPU; cuda: nnt-train "
                        "--gpus 1 (and --cpus THREADS), PyTorch on the GPU "
                        "(default %(default)s)")
    p.add_argument("--precision", choices=("fp32", "tf32", "bf16"), default="fp32",
                   help="operands of the matrix products: nnt-train --precision P; PyTorch "
                        "fp32 (TF32 off), TF32 on, or bf16 autocast around forward + loss "
                        "(default %(default)s)")
    p.add_argument("--sched",
                   help="nnt-train's StarPU scheduler (default %s on cpu, %s on cuda)"
                        % (DEVICE_DEFAULTS["cpu"]["sched"], DEVICE_DEFAULTS["cuda"]["sched"]))
    p.add_argument("--peak-tflops", type=float,
                   help="nominal peak for MFU, also nnt-train --peak-gflops (default on cuda: "
                        "H100 SXM dense %s TFLOP/s; on cpu: none, nnt-train measures its own "
                        "and the table uses design.md's %.0f GFLOP/s)"
                        % (", ".join("%s %g" % kv for kv in GPU_PEAK_TFLOPS.items()),
                           DESIGN_PEAK))
    p.add_argument("--calibrate-steps", type=int, default=0,
                   help="before round 1, run nnt-train once per config and tiling with this "
                        "many steps, untimed, to calibrate StarPU's performance models "
                        "(dmda-family schedulers); 0: none (default %(default)s)")
    p.add_argument("--starpu-home",
                   help="STARPU_HOME of the nnt runs, kept (performance models, bus "
                        "calibration); default: a temporary directory removed at the end")
    p.add_argument("--batch", type=int, default=4,
                   help="sequences per step, both sides (default %(default)s; on a GPU e.g. 16)")
    p.add_argument("--seq", type=int, default=64,
                   help="tokens per sequence, at most the context 1024 (default %(default)s; "
                        "on a GPU e.g. 1024)")
    p.add_argument("--output", default=os.path.join(here, "RESULTS-pytorch.md"),
                   help="Markdown file to write (default %(default)s); '-' for stdout only")
    p.add_argument("--config", help=argparse.SUPPRESS)
    p.add_argument("--variant", default="default", help=argparse.SUPPRESS)
    p.add_argument("--torch-worker", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--peak-worker", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--floor-worker", action="store_true", help=argparse.SUPPRESS)
    a = p.parse_args()
    if a.torch_worker:
        return torch_worker(a)
    if a.peak_worker:
        return peak_worker(a)
    if a.floor_worker:
        return floor_worker(a)

    if a.tilings is None and a.configs and all(c in LLAMA for c in a.configs.split(",")):
        a.tilings = "auto"  # Llama configs only: nnt-train's automatic tiling
    for k, v in DEVICE_DEFAULTS[a.device].items():
        if getattr(a, k) is None:
            setattr(a, k, v)
    a.gpus = 1 if a.device == "cuda" else 0
    a.peak_default = a.peak_tflops is None and a.device == "cuda"
    if a.peak_default:
        a.peak_tflops = GPU_PEAK_TFLOPS[a.precision]
    if a.peak_tflops is not None and a.peak_tflops <= 0:
        raise SystemExit("compare_pytorch: --peak-tflops must be positive")
    a.nnt_train = os.path.abspath(a.nnt_train or os.path.join(a.build_dir, "nnt-train"))
    if not os.access(a.nnt_train, os.X_OK):
        raise SystemExit("compare_pytorch: no nnt-train at %s (make nnt-train in the build "
                         "directory, or pass --nnt-train)" % a.nnt_train)
    if a.steps < 1 or a.rounds < 1:
        raise SystemExit("compare_pytorch: --steps and --rounds must be at least 1")
    if a.batch < 1 or a.seq < 1 or a.calibrate_steps < 0:
        raise SystemExit("compare_pytorch: --batch and --seq must be at least 1, "
                         "--calibrate-steps at least 0")
    configs = a.config_list = a.configs.split(",")
    tilings = a.tilings.split(",")
    for c in configs:
        if c not in CONFIGS:
            raise SystemExit("compare_pytorch: unknown config %s" % c)
        if a.seq > CONFIGS[c][4]:
            raise SystemExit("compare_pytorch: --seq %d is longer than config %s's context %d"
                             % (a.seq, c, CONFIGS[c][4]))
    for t in tilings:
        if t not in TILINGS:
            raise SystemExit("compare_pytorch: unknown tiling %s" % t)
    variants = a.torch_variants.split(",")
    for v in variants:
        if v not in TORCH_VARIANTS:
            raise SystemExit("compare_pytorch: unknown PyTorch variant %s" % v)
    # One round: nnt and PyTorch runs alternate (A B A B ...).
    n = max(len(tilings), len(variants))
    order = []
    for i in range(n):
        if i < len(tilings):
            order.append(("nnt", tilings[i]))
        if i < len(variants):
            order.append(("torch", variants[i]))

    # Before anything else: torch's versions, and whether the GPU is there.
    versions = lib_versions(a)
    if a.device == "cuda":
        print("GPU: %s (torch %s, CUDA %s)" % (versions["gpu"], versions["torch"],
                                               versions["cuda_build"]), flush=True)

    # One temporary directory for everything on the nnt side: StarPU's home (unless
    # --starpu-home), nnt-train's output directory (emptied before each run) and the random
    # data.
    tmp = tempfile.mkdtemp(prefix="nnt-cmp-")
    try:
        return compare(a, configs, tilings, variants, order, tmp, versions)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def peak_desc(a):
    """What torch_peak measures, in words."""
    if a.device == "cuda":
        return "torch.mm 8192 x 8192 x 8192 %s on the GPU" % {
            "fp32": "fp32 (TF32 off)", "tf32": "fp32 with TF32", "bf16": "bf16"}[a.precision]
    return "torch.mm 1024 x 1024 x 1024 fp32 with %d threads" % a.threads


def compare(a, configs, tilings, variants, order, tmp, versions):
    starpu_home = (os.path.abspath(a.starpu_home) if a.starpu_home
                   else os.path.join(tmp, "starpu"))
    env = dict(os.environ, STARPU_SILENT="1", STARPU_HOME=starpu_home)
    if a.nnt_data == "random":
        random_data(a, os.path.join(tmp, "random.bin"))
    cmdline = shlex.join([sys.executable] + sys.argv)
    start = datetime.datetime.now(datetime.timezone.utc)
    load_before = loadavg()
    model, nproc = machine()
    peak0 = torch_peak(a)
    bf16_floor = a.device == "cpu" and a.precision == "bf16"
    floor0 = torch_floor(a) if bf16_floor else None
    if floor0:
        print("torch.mm 2048^3 bf16, %d threads: %.1f GFLOP/s" % (a.threads, floor0), flush=True)
    if a.device == "cuda":
        print("%s: %.1f TFLOP/s; load %s" % (peak_desc(a), peak0 / 1e3, load_before),
              flush=True)
    else:
        print("torch.mm 1024^3 fp32, %d threads: %.1f GFLOP/s; load %s"
              % (a.threads, peak0, load_before), flush=True)

    calibrated = {}
    if a.calibrate_steps > 0:
        for c in configs:
            for t in tilings:
                calibrated[(c, t)] = calibrate_nnt(a, c, t, env, tmp)
                print("%s calibration nnt %-8s %d steps in %.1f s"
                      % (c, t, a.calibrate_steps, calibrated[(c, t)]), flush=True)

    results = {}
    load_max = max(load_before)
    attn = flags = None
    for c in configs:
        L, C, NH, V, maxT = CONFIGS[c]
        r = results[c] = {"nnt": {t: [] for t in tilings}, "torch": {v: [] for v in variants},
                          "params": None, "tiling": {},
                          "load": {}}
        for rnd in range(a.rounds):
            for side, what in order:
                if side == "nnt":
                    nr = run_nnt(a, c, what, env, tmp)
                    r["nnt"][what].append(nr["ms"] / 1e3)
                    r["nnt_mparams"] = nr["mparams"]
                    r["tiling"][what] = nr["tiling"]
                    nnt_data, nnt_sched = nr["data"].replace(tmp, "TMP"), nr["sched"]
                    nnt_peak = nr["peak"]
                else:
                    tr = run_torch(a, c, what)
                    r["params"] = tr["params"]
                    attn, flags = tr["attn"], tr["flags"]
                    if tr.get("max_mem") is not None:
                        r["torch_mem"] = max(r.get("torch_mem", 0), tr["max_mem"])
                    r["torch"][what].append(statistics.mean(tr["times"]))
                la = loadavg()[0]
                r["load"].setdefault((side, what), []).append(la)
                load_max = max(load_max, la)
                print("%s round %d %-5s %-8s %.3f s/step (load %.2f)"
                      % (c, rnd + 1, side, what, r[side][what][-1], la), flush=True)
    peak1 = torch_peak(a)
    floor1 = torch_floor(a) if bf16_floor else None
    load_after = loadavg()
    end = datetime.datetime.now(datetime.timezone.utc)
    peak = max(peak0, peak1)
    # The nominal peak of the MFU column: --peak-tflops, or design.md's on the CPU.
    if a.peak_tflops:
        nominal, nominal_label = 1e3 * a.peak_tflops, "%g TFLOP/s" % a.peak_tflops
    else:
        nominal, nominal_label = DESIGN_PEAK, "%.0f" % DESIGN_PEAK

    # ---- report --------------------------------------------------------------------------
    toks = a.batch * a.seq
    rows = []
    for c in configs:
        L, C, NH, V, maxT = CONFIGS[c]
        r = results[c]
        med = {t: statistics.median(v) for t, v in r["nnt"].items()}
        tmed = {v: statistics.median(x) for v, x in r["torch"].items()}
        best = min(med, key=med.get)
        tbest = min(tmed, key=tmed.get)
        tn, tt = med[best], tmed[tbest]
        hd = LLAMA.get(c, {}).get("head_dim")
        # an untied input embedding is a lookup, not a product: its V x C not counted; nor
        # GPT-BigCode's position table (maxT x C; GPT-2's configs count theirs, 0.6 % of 124M,
        # as the earlier results did)
        untied = c in LLAMA and not LLAMA[c]["tied"]
        lookups = (CONFIGS[c][3] * C if untied else 0) + \
            (CONFIGS[c][4] * C if LLAMA.get(c, {}).get("bigcode") else 0)
        fl = flops_per_step(r["params"] - lookups, L, C, a.batch, a.seq, NH * hd if hd else None)
        rows.append((c, L, C, NH, r["params"], r["nnt_mparams"], fl, tn, tt, best, med, r,
                     tbest, tmed))

    lines = []
    w = lines.append
    def fam(c):
        return ("GPT-2" if c not in LLAMA else "Gemma" if LLAMA[c].get("gemma3")
                else "GPT-NeoX" if LLAMA[c].get("neox")
                else "StarCoder2" if LLAMA[c].get("starcoder2")
                else "GPT-BigCode" if LLAMA[c].get("bigcode")
                else "Falcon" if LLAMA[c].get("falcon") else "Llama")
    fams = [f for f in ("GPT-2", "Llama", "Gemma", "GPT-NeoX", "StarCoder2", "GPT-BigCode",
                        "Falcon")
            if any(fam(c) == f for c in configs)]
    w("# nnt vs PyTorch: %s training step on the %s"
      % (" and ".join(fams), "GPU" if a.device == "cuda" else "CPU"))
    w("")
    w("Generated by `bench/compare_pytorch.py` (issue 6); the nnt side is the training "
      "program `nnt-train`. One training step = forward with cross-entropy loss, backward, "
      "%s, AdamW (lr 1e-4, betas 0.9 0.999, weight decay 0.1), zero grad; %s, B = %d, "
      "T = %d, %d timed steps after one warm-up step per run, %d interleaved rounds (every "
      "run a fresh process; in each round the runs alternate nnt, PyTorch, nnt, PyTorch), "
      "median over the rounds. For each side the table gives the best variant (nnt tiling, "
      "PyTorch AdamW implementation) and names it; every variant is listed further down."
      % ("gradient clipping off on both sides" if a.grad_clip <= 0 else
         "gradient norm clipped to %g on both sides" % a.grad_clip,
         PRECISION_DESC[a.precision], a.batch, a.seq, a.steps, a.rounds))
    w("")
    w("- Date: %s to %s UTC" % (start.strftime("%Y-%m-%d %H:%M"), end.strftime("%H:%M")))
    w("- Machine: %s, nproc %s; %d threads / CPU workers used" % (model, nproc, a.threads))
    if a.device == "cuda":
        w("- Device: GPU %s (torch.cuda.get_device_name(0); %d visible, the first used), "
          "torch built for CUDA %s, cuDNN %s; nnt-train --gpus 1 with %d CPU workers beside "
          "it, PyTorch on torch.device('cuda'), timed with torch.cuda.synchronize() before "
          "each clock reading"
          % (versions["gpu"], versions.get("gpu_count", 1), versions["cuda_build"],
             versions["cudnn"], a.threads))
    else:
        w("- Device: CPU (nnt-train --gpus 0, PyTorch on the CPU)")
    w("- Precision: %s. nnt-train --precision %s (%s). PyTorch: %s; settings %s"
      % (a.precision, a.precision,
         {"fp32": "float operands",
          "tf32": "the operands of every matrix product rounded to TF32, float accumulation",
          "bf16": "the operands of every matrix product rounded to bf16, float accumulation, "
                  "float master weights and Adam moments"}[a.precision],
         {"fp32": "fp32, TF32 off",
          "tf32": "fp32 parameters, TF32 on (allow_tf32, set_float32_matmul_precision('high')"
                  "%s)" % ("; no TF32 on the CPU: in effect fp32" if a.device == "cpu" else ""),
          "bf16": "fp32 parameters and AdamW, torch.autocast('%s', dtype=torch.bfloat16) "
                  "around forward + loss, backward outside it, TF32 off" % a.device}[a.precision],
         ", ".join("%s=%s" % kv for kv in flags.items()) if flags else "?"))
    w("- Load average (1, 5, 15 min): before %s, after %s; highest 1-min value seen "
      "between runs %.2f" % (", ".join("%.2f" % x for x in load_before),
                             ", ".join("%.2f" % x for x in load_after), load_max))
    spread = max(max(x) / min(x) for row in rows for side in ("nnt", "torch")
                 for x in row[11][side].values())
    if spread > 1.2:
        w("- **Runs of the same variant differ by up to %.1fx (see the table of every run "
          "below): the medians are not reliable to better than that.**" % spread)
    if max(load_before[0], load_after[0], load_max) > 1.5:
        w("- **The load average was above 1.5: the machine was shared with other work "
          "during this run, so the timings are noisy and probably pessimistic for both sides. "
          "Re-run the command below on a quiet machine.**")
    models = []
    if any(c not in LLAMA for c in configs):
        models.append("GPT2LMHeadModel(GPT2Config(activation_function='gelu_new', dropouts 0))")
    for c in configs:
        if c in LLAMA:
            L, C, NH, V, maxT = CONFIGS[c]
            ll = LLAMA[c]
            if ll.get("gemma3"):
                models.append("%s: Gemma3ForCausalLM(Gemma3TextConfig(vocab_size=%d, "
                              "hidden_size=%d, intermediate_size=%d, num_hidden_layers=%d, "
                              "num_attention_heads=%d, num_key_value_heads=%d, head_dim=%d, "
                              "query_pre_attn_scalar=256, sliding_window=512, "
                              "sliding_window_pattern=6, rope 1e6 / 1e4 (the defaults), "
                              "tie_word_embeddings=True, rms_norm_eps=%g)), random init"
                              % (c, V, C, ll["hidden"], L, NH, ll["kv_heads"],
                                 ll["head_dim"], ll["eps"]))
                continue
            if ll.get("starcoder2"):
                models.append("%s: Starcoder2ForCausalLM(Starcoder2Config(vocab_size=%d, "
                              "hidden_size=%d, intermediate_size=%d, num_hidden_layers=%d, "
                              "num_attention_heads=%d, num_key_value_heads=%d, rope_theta=%g, "
                              "sliding_window=4096, use_bias=True, "
                              "hidden_act='gelu_pytorch_tanh', tie_word_embeddings=True, "
                              "norm_epsilon=%g)), random init"
                              % (c, V, C, ll["hidden"], L, NH, ll["kv_heads"],
                                 ll["rope_theta"], ll["eps"]))
                continue
            if ll.get("falcon"):
                models.append("%s: FalconForCausalLM(FalconConfig(vocab_size=%d, "
                              "hidden_size=%d, ffn_hidden_size=%d, num_hidden_layers=%d, "
                              "num_attention_heads=%d, multi_query=True, parallel_attn=True, "
                              "bias=False, activation='gelu', rope_theta=%g, "
                              "tie_word_embeddings=True, layer_norm_epsilon=%g, dropouts 0)), "
                              "random init" % (c, V, C, ll["hidden"], L, NH, ll["rope_theta"],
                                               ll["eps"]))
                continue
            if ll.get("bigcode"):
                models.append("%s: GPTBigCodeForCausalLM(GPTBigCodeConfig(vocab_size=%d, "
                              "n_positions=%d, n_embd=%d, n_inner=%d, n_layer=%d, n_head=%d, "
                              "multi_query=%s, activation_function='gelu', "
                              "tie_word_embeddings=True, layer_norm_epsilon=%g, dropouts 0)), "
                              "random init" % (c, V, maxT, C, ll["hidden"], L, NH,
                                               ll["kv_heads"] == 1, ll["eps"]))
                continue
            if ll.get("neox"):
                models.append("%s: GPTNeoXForCausalLM(GPTNeoXConfig(vocab_size=%d, "
                              "hidden_size=%d, intermediate_size=%d, num_hidden_layers=%d, "
                              "num_attention_heads=%d, rotary_pct=0.25, rotary_emb_base=%g, "
                              "use_parallel_residual=True, hidden_act='gelu' (the default), "
                              "tie_word_embeddings=False, layer_norm_eps=%g)), random init"
                              % (c, V, C, ll["hidden"], L, NH, ll["rope_theta"], ll["eps"]))
                continue
            kind = "Qwen3" if ll.get("qwen3") else "Llama"
            extra = ("head_dim=%d" % ll["head_dim"]) if "head_dim" in ll else "mlp_bias=False"
            models.append("%s: %sForCausalLM(%sConfig(vocab_size=%d, hidden_size=%d, "
                          "intermediate_size=%d, num_hidden_layers=%d, num_attention_heads=%d, "
                          "num_key_value_heads=%d, max_position_embeddings=%d, rope_theta=%g, "
                          "tie_word_embeddings=%s, rms_norm_eps=%g, attention_bias=False, "
                          "%s)), random init"
                          % (c, kind, kind, V, C, ll["hidden"], L, NH, ll["kv_heads"], maxT,
                             ll["rope_theta"], ll["tied"], ll["eps"], extra))
    w("- PyTorch %s, transformers %s (MKL %s, CPU capability %s), eager, %s, "
      "attention implementation %s (the default), torch.optim.AdamW (variants: %s)"
      % (versions["torch"], versions["transformers"], versions["mkl"],
         versions["cpu_capability"], "; ".join(models), attn,
         "; ".join("`%s` = AdamW(lr=1e-4, weight_decay=0.1%s)"
                   % (v, "".join(", %s=%s" % kv for kv in TORCH_VARIANTS[v].items()))
                   for v in variants)))
    if a.device == "cuda":
        w("- PyTorch peak GPU memory allocated (torch.cuda.max_memory_allocated, highest over "
          "the runs): %s" % ", ".join("%s %.1f GiB" % (c, results[c].get("torch_mem", 0) / 2**30)
                                      for c in configs))
    w("- nnt: %s (%s), StarPU %s scheduler, --cpus %d --gpus %d --precision %s, BLIS "
      "single-threaded per worker; data: %s. Step time: the ms column of nnt-train's "
      "train.csv (the wall time of a whole step: loading the batch, zero grad, forward, loss, "
      "backward, gradient norm, AdamW, waiting for every task), run with --steps %d, the "
      "first step dropped as warm-up. nnt-train's own MFU peak: %s"
      % (a.nnt_train, nnt_version(a), nnt_sched, a.threads, a.gpus, a.precision, nnt_data,
         a.steps + 1, nnt_peak))
    if a.calibrate_steps > 0:
        w("- StarPU performance models (STARPU_HOME %s): calibrated before round 1 by one "
          "untimed nnt-train run of %d steps per config and tiling (%s)"
          % (a.starpu_home or "TMP/starpu", a.calibrate_steps,
             ", ".join("%s %s %.0f s" % (c, t, x) for (c, t), x in calibrated.items())))
    elif nnt_sched.startswith("dm"):
        w("- StarPU performance models (STARPU_HOME %s): %s"
          % (a.starpu_home or "TMP/starpu",
             "kept from earlier invocations where present; otherwise the first run of each "
             "config and tiling calibrated them (no --calibrate-steps), later rounds used them"
             if a.starpu_home else "new: the first run of each config and tiling calibrated "
             "them (no --calibrate-steps), later rounds used them"))
    w("- Gradient clipping: %s"
      % ("off on both sides (nnt-train --grad-clip 0; PyTorch: no clip_grad_norm_). nnt-train "
         "still computes the global gradient norm every step for its log; PyTorch does not"
         if a.grad_clip <= 0 else
         "on on both sides, max norm %g (nnt-train --grad-clip %g; PyTorch "
         "torch.nn.utils.clip_grad_norm_ before the AdamW step)" % (a.grad_clip, a.grad_clip)))
    if a.device == "cuda":
        w("- GEMM peak for MFU: %s, CUDA events, best of 5 batches of 10: %.1f TFLOP/s "
          "before, %.1f after (the higher, %.1f, is used); and the nominal %g TFLOP/s "
          "(--peak-tflops%s; also nnt-train --peak-gflops)"
          % (peak_desc(a), peak0 / 1e3, peak1 / 1e3, peak / 1e3, a.peak_tflops,
             ", the default: H100 SXM dense peak for %s" % a.precision
             if a.peak_default else ""))
    else:
        w("- sgemm peak for MFU: torch.mm 1024 x 1024 x 1024 fp32 with %d threads, best of "
          "50: %.1f GFLOP/s before, %.1f after (the higher, %.1f, is used); and %s"
          % (a.threads, peak0, peak1, peak,
             "%g TFLOP/s (--peak-tflops; also nnt-train --peak-gflops)" % a.peak_tflops
             if a.peak_tflops else "%.0f GFLOP/s, BLIS sgemm with 2 threads on an idle "
             "machine of this kind (design.md)" % DESIGN_PEAK))
    w("- FLOPs per step = 6 * params * B * T + 12 * L * B * T^2 * C (params: PyTorch's "
      "count, the token embedding tied with the LM head; an untied one (pythia-160m's) is a "
      "lookup and not counted%s)"
      % ("; the same formula for the Llama configs: grouped-query attention only shrinks the "
         "K/V projections, which params counts, and the attention products have "
         "heads * head_dim in place of C where a config gives head_dim (qwen3-0.6b: 2048); "
         "RMSNorm, RoPE and SwiGLU's elementwise work are not counted"
         if any(c in LLAMA for c in configs) else ""))
    w("")
    w("Command:")
    w("")
    w("```sh")
    w(cmdline)
    w("```")
    w("")
    w("| config | params | GFLOP/step | s/step nnt | s/step torch | tokens/s nnt | "
      "tokens/s torch | MFU nnt (%s / meas.) | MFU torch (%s / meas.) | "
      "torch/nnt | nnt tiling | torch AdamW |" % (nominal_label, nominal_label))
    w("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---|")
    for c, L, C, NH, params, _, fl, tn, tt, best, med, r, tbest, tmed in rows:
        def mfu(t):
            g = fl / t / 1e9
            return "%.1f%% / %.1f%%" % (100 * g / nominal, 100 * g / peak)
        w("| %s (L%d C%d NH%d) | %.1fM | %.1f | %.3f | %.3f | %.0f | %.0f | %s | %s | %.2f | "
          "%s | %s |" % (c, L, C, NH, params / 1e6, fl / 1e9, tn, tt, toks / tn, toks / tt,
                         mfu(tn), mfu(tt), tt / tn, best, tbest))
    w("")
    w("MFU: achieved GFLOP/s over %s / over the torch.mm peak measured here. torch/nnt > 1 "
      "means nnt is faster."
      % ("the nominal %g TFLOP/s (--peak-tflops)" % a.peak_tflops if a.peak_tflops
         else "the %.0f GFLOP/s of design.md" % DESIGN_PEAK))
    w("")
    if bf16_floor:
        rate = max(floor0, floor1)
        w("The bf16 floor (issue 41): a step's FLOPs at the rate of torch.mm 2048 x 2048 x 2048 "
          "on bf16 tensors with %d threads (oneDNN), best of 10: %.1f GFLOP/s before the runs, "
          "%.1f after (the higher, %.1f, is used). Share of the floor = floor time / step time "
          "(goal >= 70 %%); torch/nnt: PyTorch bf16 autocast's best variant over nnt (goal >= 2)."
          % (a.threads, floor0, floor1, rate))
        w("")
        w("| config | GFLOP/step | floor s | s/step nnt | nnt share of the floor | "
          "s/step torch | torch share of the floor | torch/nnt |")
        w("|---|---:|---:|---:|---:|---:|---:|---:|")
        for c, L, C, NH, params, _, fl, tn, tt, best, med, r, tbest, tmed in rows:
            floor_s = fl / rate / 1e9
            w("| %s | %.1f | %.3f | %.3f | %.1f%% | %.3f | %.1f%% | %.2f |"
              % (c, fl / 1e9, floor_s, tn, 100 * floor_s / tn, tt, 100 * floor_s / tt, tt / tn))
        w("")
    w("nnt tilings tried (nnt-train options; C = channels; -1: one tile) and the tile sizes "
      "nnt-train reported:")
    w("")
    for t in tilings:
        w("- `%s`: %s: `%s`" % (t, TILING_DESC[t][0], TILING_DESC[t][1]))
        for c in configs:
            w("  - %s: %s" % (c, results[c]["tiling"][t]))
    w("")
    w("Every run, s/step (mean of the timed steps of one process), in round order:")
    w("")
    w("| config | side | runs | median | min | max/min |")
    w("|---|---|---|---:|---:|---:|")
    for c, L, C, NH, params, _, fl, tn, tt, best, med, r, tbest, tmed in rows:
        for t in tilings:
            x = r["nnt"][t]
            w("| %s | nnt %s | %s | %.3f | %.3f | %.2f |"
              % (c, t, ", ".join("%.3f" % y for y in x), med[t], min(x), max(x) / min(x)))
        for v in variants:
            x = r["torch"][v]
            w("| %s | torch %s | %s | %.3f | %.3f | %.2f |"
              % (c, v, ", ".join("%.3f" % y for y in x), tmed[v], min(x), max(x) / min(x)))
    w("")
    w("Side by side: in each round, the PyTorch run's s/step over the nnt run's of the same "
      "round (the best variant of each side; > 1: nnt faster), and the load average (1 min) "
      "after each of the two runs:")
    w("")
    w("| config | round | nnt s/step | torch s/step | torch/nnt | load after nnt, torch |")
    w("|---|---:|---:|---:|---:|---|")
    for c, L, C, NH, params, _, fl, tn, tt, best, med, r, tbest, tmed in rows:
        pairs = list(zip(r["nnt"][best], r["torch"][tbest], r["load"][("nnt", best)],
                         r["load"][("torch", tbest)]))
        for k, (x, y, lx, ly) in enumerate(pairs):
            w("| %s | %d | %.3f | %.3f | %.2f | %.2f, %.2f |" % (c, k + 1, x, y, y / x, lx, ly))
        w("| %s | median | | | %.2f | |"
          % (c, statistics.median([y / x for x, y, _, _ in pairs])))
    w("")
    w("nnt commands (TMP: a temporary directory, removed at the end; env STARPU_SILENT=1 "
      "STARPU_HOME=%s; TMP/out is emptied before each run%s):"
      % (a.starpu_home or "TMP/starpu",
         ", TMP/random.bin holds the random tokens" if a.nnt_data == "random" else ""))
    w("")
    w("```sh")
    for c in configs:
        for t in tilings:
            w(shlex.join(nnt_argv(a, c, t)))
    w("```")
    if a.calibrate_steps > 0:
        w("")
        w("Calibration runs before round 1 (untimed): the same commands with --steps %d."
          % a.calibrate_steps)
    w("")
    w("PyTorch runs (one process each; the worker is part of this script):")
    w("")
    w("```sh")
    for c in configs:
        for v in variants:
            w(shlex.join(torch_argv(a, c, v)))
    w("```")
    w("")
    w("Notes: nnt's parameter count (nnt-train) differs from PyTorch's only if the models "
      "differ; here: %s. Both losses are over all B x T positions. PyTorch draws independent "
      "uniform random tokens in [0, V) for inputs and targets; nnt-train reads %s, targets "
      "being the inputs shifted by one: the amount of work per step does not depend on the "
      "token values. Both sides start from a random initialisation (GPT-2's scheme for GPT-2; "
      "nnt's and transformers' own for Llama). nnt-train applies weight "
      "decay to matrices and embeddings only, PyTorch's AdamW here to every parameter."
      % (", ".join("%s %.1fM vs %.1fM" % (row[0], row[5], row[4] / 1e6) for row in rows),
         "its default text corpus with the byte tokenizer (ids 0-255 of the model's V)"
         if a.nnt_data == "text" else "uniform random tokens in [0, V) from a nanoGPT .bin "
         "file"))
    text = "\n".join(lines) + "\n"
    print()
    print(text)
    if a.output != "-":
        with open(a.output, "w") as f:
            f.write(text)
        print("wrote %s" % a.output)


if __name__ == "__main__":
    main()
