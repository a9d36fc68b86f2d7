#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""lora_peft.py: time one LoRA training step (forward + loss + backward + AdamW on the
adapters, the base frozen) of nnt-train and of Hugging Face PEFT + transformers (eager,
fp32) on the SmolLM2-135M shape, side by side, and print a Markdown table with the CPU
model and the commands.

Not a test and not run by CI: run by hand, preferably on a quiet machine; results go to
bench/RESULTS-lora.md. Needs a Python with torch, transformers and peft, and a built
nnt-train.

    python bench/lora_peft.py --build-dir BUILD [--threads 2] [--batch 4] [--seq 256]
        [--rank 16] [--alpha 32] [--targets all-linear] [--steps 3] [--rounds 2]

Both sides: random weights of SmolLM2-135M's sizes (vocab 49152, hidden 576, intermediate
1536, 30 layers, 9 heads, 3 key/value heads, tied embeddings), LoRA of rank --rank on
--targets, AdamW (lr 1e-4, weight decay 0), random tokens, one warm-up step, then --steps
timed steps; a round runs nnt then PyTorch, each in a fresh process, and the table gives the
median over the rounds of each run's mean step time and the peak RSS of the process.

The nnt side runs
    nnt-train --model smollm2-135m --lora-rank R --lora-alpha A --lora-targets LIST
        --batch B --seq T --steps N+1 --sample 0 --no-save --cpus THREADS --lr 1e-4
        --warmup 0 --schedule constant --weight-decay 0 --grad-clip 0 --data RANDOM.bin
and reads the ms column of OUT/train.csv (the first step dropped).
"""
import argparse
import csv
import os
import platform
import resource
import statistics
import subprocess
import sys
import tempfile
import time

SMOLLM2 = dict(vocab_size=49152, hidden_size=576, intermediate_size=1536, num_hidden_layers=30,
               num_attention_heads=9, num_key_value_heads=3, max_position_embeddings=8192,
               rope_theta=100000.0, tie_word_embeddings=True, rms_norm_eps=1e-5)


def cpu_model():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "?"


def token_file(path, n, vocab):
    """An llm.c token file (magic 20240520, version 1, uint16 ids) of n random ids."""
    import numpy as np
    header = np.zeros(256, dtype=np.int32)
    header[0], header[1], header[2] = 20240520, 1, n
    ids = np.random.default_rng(0).integers(0, vocab, n, dtype=np.uint16)
    with open(path, "wb") as f:
        f.write(header.tobytes())
        f.write(ids.tobytes())


def run_nnt(a, data, out):
    cmd = [os.path.join(a.build_dir, "nnt-train"), "--model", "smollm2-135m",
           "--lora-rank", str(a.rank), "--lora-alpha", str(a.alpha), "--lora-targets", a.targets,
           "--batch", str(a.batch), "--seq", str(a.seq), "--steps", str(a.steps + 1),
           "--sample", "0", "--no-save", "--cpus", str(a.threads), "--lr", "1e-4",
           "--warmup", "0", "--schedule", "constant", "--weight-decay", "0", "--grad-clip", "0",
           "--data", data, "--out", out, "--overwrite", "--quiet"]
    t = time.time()
    p = subprocess.run(["/usr/bin/time", "-f", "%M"] + cmd, capture_output=True, text=True)
    if p.returncode:
        sys.exit("nnt-train failed: " + p.stderr[-2000:])
    rss_kb = int(p.stderr.strip().splitlines()[-1])
    with open(os.path.join(out, "train.csv")) as f:
        ms = [float(r["ms"]) for r in csv.DictReader(f)]
    return statistics.mean(ms[1:]), rss_kb / 1024.0, " ".join(cmd[:1] + ["..."]), time.time() - t


def torch_worker(a):
    import torch
    import torch.nn.functional as F
    from peft import LoraConfig, get_peft_model
    from transformers import LlamaConfig, LlamaForCausalLM
    torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    model = LlamaForCausalLM(LlamaConfig(**SMOLLM2, attn_implementation="eager")).float()
    model = get_peft_model(model, LoraConfig(r=a.rank, lora_alpha=a.alpha, lora_dropout=0.0,
                                             target_modules=a.targets if a.targets == "all-linear"
                                             else a.targets.split(","), task_type="CAUSAL_LM"))
    model.train()
    opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-4,
                            weight_decay=0.0)
    times = []
    for s in range(a.steps + 1):
        x = torch.randint(0, SMOLLM2["vocab_size"], (a.batch, a.seq + 1))
        t = time.perf_counter()
        logits = model(input_ids=x[:, :-1]).logits
        loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), x[:, 1:].reshape(-1))
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        loss.item()
        times.append(1e3 * (time.perf_counter() - t))
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0
    print(f"{statistics.mean(times[1:])} {rss}")


def run_torch(a):
    cmd = [sys.executable, __file__, "--worker", "--threads", str(a.threads), "--batch",
           str(a.batch), "--seq", str(a.seq), "--rank", str(a.rank), "--alpha", str(a.alpha),
           "--targets", a.targets, "--steps", str(a.steps)]
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode:
        sys.exit("PyTorch worker failed: " + p.stderr[-2000:])
    ms, rss = p.stdout.split()[-2:]
    return float(ms), float(rss)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build-dir", default=".")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--seq", type=int, default=256)
    ap.add_argument("--rank", type=int, default=16)
    ap.add_argument("--alpha", type=float, default=32)
    ap.add_argument("--targets", default="all-linear")
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--worker", action="store_true")
    a = ap.parse_args()
    if a.worker:
        return torch_worker(a)
    nnt_ms, nnt_rss, torch_ms, torch_rss = [], [], [], []
    with tempfile.TemporaryDirectory() as tmp:
        data = os.path.join(tmp, "tokens.bin")
        token_file(data, max(200000, 4 * a.batch * (a.seq + 1) * (a.steps + 2)),
                   SMOLLM2["vocab_size"])
        env_home = os.environ.setdefault("STARPU_HOME", os.path.join(tmp, "starpu"))
        del env_home
        for r in range(a.rounds):
            ms, rss, _, _ = run_nnt(a, data, os.path.join(tmp, f"out{r}"))
            nnt_ms.append(ms), nnt_rss.append(rss)
            ms, rss = run_torch(a)
            torch_ms.append(ms), torch_rss.append(rss)
    n, t = statistics.median(nnt_ms), statistics.median(torch_ms)
    print(f"CPU: {cpu_model()}, {a.threads} threads; SmolLM2-135M shape, B {a.batch}, "
          f"T {a.seq}, LoRA r {a.rank} alpha {a.alpha:g} on {a.targets}; {a.steps} timed steps, "
          f"{a.rounds} rounds (medians)\n")
    print("| side | ms / step | tokens / s | peak RSS MiB | runs (ms) |")
    print("|------|-----------|------------|--------------|-----------|")
    for name, ms, rss, runs in (("nnt-train", n, max(nnt_rss), nnt_ms),
                                ("PEFT + transformers (fp32 eager)", t, max(torch_rss), torch_ms)):
        print(f"| {name} | {ms:.0f} | {a.batch * a.seq / (ms / 1e3):.0f} | {rss:.0f} | "
              f"{', '.join(f'{x:.0f}' for x in runs)} |")
    print(f"\nnnt / PyTorch speed: {t / n:.2f}x")


if __name__ == "__main__":
    sys.exit(main())
